/* index_map: open addressing from a 64-bit key to a dense index (linear probing, at most three
 * quarters full, never shrinks, no deletion): the analysis modules' tables and the recording
 * reader's sparse name ids. */
#include "index_map.h"
#include "hash.h"

#include <stdlib.h>
#include <string.h>

int index_map_init(index_map *m, uint32_t capacity_pow2)
{
    if (capacity_pow2 < 16 || (capacity_pow2 & (capacity_pow2 - 1)))
        capacity_pow2 = 16;
    m->keys = malloc(capacity_pow2 * sizeof *m->keys);
    m->values = malloc(capacity_pow2 * sizeof *m->values);
    if (!m->keys || !m->values) {
        free(m->keys);
        free(m->values);
        m->keys = NULL;
        m->values = NULL;
        return -1;
    }
    memset(m->values, 0xff, capacity_pow2 * sizeof *m->values);
    m->mask = capacity_pow2 - 1;
    m->count = 0;
    return 0;
}

void index_map_free(index_map *m)
{
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}

uint32_t index_map_find(const index_map *m, uint64_t key)
{
    if (!m->keys)
        return UINT32_MAX;
    for (uint64_t i = hash_mix(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->values[i] == UINT32_MAX)
            return UINT32_MAX;
        if (m->keys[i] == key)
            return m->values[i];
    }
}

static int index_map_grow(index_map *m)
{
    index_map bigger;
    if (index_map_init(&bigger, (m->mask + 1) * 2) != 0)
        return -1;
    for (uint32_t i = 0; i <= m->mask; i++) {
        if (m->values[i] == UINT32_MAX)
            continue;
        uint64_t j = hash_mix(m->keys[i]) & bigger.mask;
        while (bigger.values[j] != UINT32_MAX)
            j = (j + 1) & bigger.mask;
        bigger.keys[j] = m->keys[i];
        bigger.values[j] = m->values[i];
    }
    bigger.count = m->count;
    index_map_free(m);
    *m = bigger;
    return 0;
}

uint32_t index_map_get(index_map *m, uint64_t key, uint32_t next_index, int *inserted)
{
    if (inserted)
        *inserted = 0;
    if (!m->keys && index_map_init(m, 64) != 0)
        return UINT32_MAX;
    if ((m->count + 1) * 4 > (m->mask + 1) * 3 && index_map_grow(m) != 0)
        return UINT32_MAX;
    for (uint64_t i = hash_mix(key) & m->mask;; i = (i + 1) & m->mask) {
        if (m->values[i] == UINT32_MAX) {
            m->keys[i] = key;
            m->values[i] = next_index;
            m->count++;
            if (inserted)
                *inserted = 1;
            return next_index;
        }
        if (m->keys[i] == key)
            return m->values[i];
    }
}
