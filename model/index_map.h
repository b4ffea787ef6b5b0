/* index_map: a 64-bit key to a dense index. */
#ifndef TERMSIGHT_INDEX_MAP_H
#define TERMSIGHT_INDEX_MAP_H

#include <stddef.h>
#include <stdint.h>

/* Open-addressing map from a 64-bit key to a dense index (model/index_map.c): the analysis
 * modules' tables, the recording reader's sparse name ids. */
typedef struct index_map {
    uint64_t *keys;
    uint32_t *values;
    uint32_t mask;
    uint32_t count;
} index_map;

int index_map_init(index_map *m, uint32_t capacity_pow2);
void index_map_free(index_map *m);
/* The index for key, inserting next_index when absent (*inserted set). UINT32_MAX when out of
 * memory. */
uint32_t index_map_get(index_map *m, uint64_t key, uint32_t next_index, int *inserted);
/* The index, or UINT32_MAX when absent. */
uint32_t index_map_find(const index_map *m, uint64_t key);

#endif
