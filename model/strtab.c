/* strtab: names interned to 32-bit ids in the segment.
 *
 * Shared part (readable by any process): an index of arena offsets and an arena of entries
 * {uint32 length, bytes, NUL}, 4-byte aligned; header->string_count publishes ids with a release
 * store after their entry is written. Process-local part: the writer's own copy of the index and
 * the arena (what it reads, since any process of the user can write into the segment) and an
 * open-addressing hash of (hash, id) words, read lock-free; inserts (a name's first use) take a
 * mutex. The segment's index and arena pages are had as names reach them (segment_populate, from
 * the tree's ledger): a process with few names costs a page of each. */
#include "hash.h"
#include "model.h"

#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

struct strtab {
    const segment *seg;
    uint32_t *index; /* the segment's, for other processes */
    char *arena;
    uint32_t max;
    uint32_t arena_size;
    /* The writer's own copies: another process may rewrite anything in the segment, so the
     * writer's lookups and the recorder go by these, and the segment's index, arena and the
     * header's string_count, string_used and string_drops are mirrors, never read back. The
     * arena copy's pages are touched as names arrive, like the segment's. */
    uint32_t *own_index;
    char *own_arena;
    _Atomic uint32_t count;
    uint32_t used;
    uint64_t index_had, arena_had; /* bytes of the segment's index and arena had, whole pages */
    _Atomic uint64_t drops;
    _Atomic uint64_t *slots; /* 0 empty, else hash32 << 32 | id, hash32 never 0 */
    uint64_t mask;
    pthread_mutex_t lock;
};

#define PAGE 4096u

/* Has the pages of the region at off up to byte need (from had, which grows to it). */
static int have_up_to(const strtab *t, uint64_t off, uint64_t *had, uint64_t need)
{
    if (need <= *had)
        return 0;
    uint64_t to = (need + PAGE - 1) / PAGE * PAGE;
    if (segment_populate(t->seg, off + *had, to - *had) != 0)
        return -1;
    *had = to;
    return 0;
}

static uint32_t hash32(uint64_t h)
{
    uint32_t v = (uint32_t)(h >> 32) ^ (uint32_t)h;
    return v ? v : 1;
}

/* The entry of id in an index and arena of max ids and arena_size bytes. An offset or a length
 * read from shared memory may be anything: both are checked. */
static const char *entry_of(const uint32_t *index, const char *arena, uint32_t max,
                            uint32_t arena_size, uint32_t count, uint32_t id, uint32_t *len)
{
    if (id >= count || id >= max || !index || !arena)
        return NULL;
    uint32_t off = __atomic_load_n(&index[id], __ATOMIC_RELAXED);
    if ((uint64_t)off + sizeof(uint32_t) > arena_size)
        return NULL;
    const char *e = arena + off;
    uint32_t l;
    memcpy(&l, e, sizeof l);
    if ((uint64_t)l + 1 > (uint64_t)arena_size - off - sizeof(uint32_t) || l > TS_NAME_MAX)
        return NULL;
    if (len)
        *len = l;
    return e + sizeof(uint32_t);
}

static int entry_matches(const strtab *t, uint32_t id, const char *bytes, size_t len)
{
    uint32_t elen;
    const char *e = strtab_name(t, id, &elen);
    return e && elen == len && !memcmp(e, bytes, len);
}

/* Lock-free probe; UINT32_MAX when absent. *free_slot gets the first empty slot seen. */
static uint32_t probe(strtab *t, uint64_t h, const char *bytes, size_t len, uint64_t *free_slot)
{
    uint32_t h32 = hash32(h);
    for (uint64_t i = h & t->mask, k = 0; k <= t->mask; i = (i + 1) & t->mask, k++) {
        uint64_t v = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (!v) {
            if (free_slot)
                *free_slot = i;
            return UINT32_MAX;
        }
        if ((uint32_t)(v >> 32) == h32 && entry_matches(t, (uint32_t)v, bytes, len))
            return (uint32_t)v;
    }
    if (free_slot)
        *free_slot = UINT64_MAX;
    return UINT32_MAX;
}

/* Under the lock. Returns the new id or UINT32_MAX when the table is full. */
static uint32_t insert(strtab *t, uint64_t h, const char *bytes, size_t len, uint64_t slot)
{
    ts_segment_header *hd = segment_header(t->seg);
    uint32_t id = atomic_load_explicit(&t->count, memory_order_relaxed);
    uint32_t used = t->used;
    uint64_t need = (sizeof(uint32_t) + len + 1 + 3) & ~(uint64_t)3;
    if (id >= t->max || slot == UINT64_MAX || need > (uint64_t)t->arena_size - used)
        return UINT32_MAX;
    const segment_geometry *g = segment_geometry_of(t->seg);
    if (have_up_to(t, g->string_index_off, &t->index_had, ((uint64_t)id + 1) * sizeof(uint32_t)) ||
        have_up_to(t, g->string_arena_off, &t->arena_had, used + need))
        return UINT32_MAX; /* no memory for it: dropped as a full table's */
    uint32_t l32 = (uint32_t)len;
    char *own = t->own_arena + used;
    memcpy(own, &l32, sizeof l32);
    memcpy(own + sizeof l32, bytes, len);
    memset(own + sizeof l32 + len, 0, need - sizeof l32 - len);
    t->own_index[id] = used;
    memcpy(t->arena + used, own, need);
    t->index[id] = used;
    t->used = used + (uint32_t)need;
    atomic_store_explicit(&t->count, id + 1, memory_order_release);
    atomic_store_explicit(&hd->string_used, t->used, memory_order_relaxed);
    atomic_store_explicit(&hd->string_count, id + 1, memory_order_release);
    atomic_store_explicit(&t->slots[slot], (uint64_t)hash32(h) << 32 | id, memory_order_release);
    return id;
}

static const char overflow_name[] = "<names table full>";

int strtab_create(const segment *s, strtab **out, char **cause)
{
    *out = NULL;
    const segment_geometry *g = segment_geometry_of(s);
    strtab *t = calloc(1, sizeof *t);
    if (!t)
        return cause_set(cause, "out of memory");
    t->seg = s;
    t->max = g->string_max;
    t->arena_size = g->string_arena;
    t->index = segment_at(s, g->string_index_off, (uint64_t)t->max * sizeof(uint32_t));
    t->arena = segment_at(s, g->string_arena_off, t->arena_size);
    uint64_t nslots = 16;
    while (nslots < (uint64_t)t->max * 2)
        nslots <<= 1;
    t->slots = calloc(nslots, sizeof *t->slots);
    t->own_index = calloc(t->max, sizeof *t->own_index);
    t->own_arena = calloc(1, t->arena_size);
    if (!t->index || !t->arena || !t->slots || !t->own_index || !t->own_arena) {
        int fits = t->index && t->arena;
        free(t->slots);
        free(t->own_index);
        free(t->own_arena);
        free(t);
        return cause_set(cause, fits ? "out of memory" : "string table does not fit the segment");
    }
    t->mask = nslots - 1;
    pthread_mutex_init(&t->lock, NULL);
    /* Reserved ids, in order: TS_STR_NONE, TS_STR_OVERFLOW. */
    if (strtab_intern(t, "", 0, NULL) != TS_STR_NONE ||
        strtab_intern(t, overflow_name, sizeof overflow_name - 1, NULL) != TS_STR_OVERFLOW) {
        strtab_destroy(t);
        return cause_set(cause, "string table too small for its reserved names");
    }
    *out = t;
    return 0;
}

void strtab_destroy(strtab *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->lock);
    free(t->slots);
    free(t->own_index);
    free(t->own_arena);
    free(t);
}

/* A name longer than TS_NAME_MAX as the table keeps it, in cut (TS_NAME_MAX bytes): its first
 * bytes up to a character's start, then "...[cut: N bytes]" with its whole length, so that
 * wherever the name is shown it says that it was cut and from what. Returns the length. */
static size_t cut_name(const char *bytes, size_t len, char *cut)
{
    char tail[48];
    size_t tl = (size_t)snprintf(tail, sizeof tail, "...[cut: %zu bytes]", len);
    size_t keep = TS_NAME_MAX - tl;
    while (keep > 0 && ((unsigned char)bytes[keep] & 0xc0) == 0x80)
        keep--; /* not inside a UTF-8 sequence */
    memcpy(cut, bytes, keep);
    memcpy(cut + keep, tail, tl);
    return keep + tl;
}

static uint32_t intern(strtab *t, const char *bytes, size_t len)
{
    uint64_t h = hash_bytes(bytes, len);
    uint32_t id = probe(t, h, bytes, len, NULL);
    if (id != UINT32_MAX)
        return id;
    pthread_mutex_lock(&t->lock);
    uint64_t slot;
    id = probe(t, h, bytes, len, &slot);
    if (id == UINT32_MAX)
        id = insert(t, h, bytes, len, slot);
    pthread_mutex_unlock(&t->lock);
    if (id == UINT32_MAX) {
        uint64_t d = atomic_fetch_add_explicit(&t->drops, 1, memory_order_relaxed) + 1;
        atomic_store_explicit(&segment_header(t->seg)->string_drops, d, memory_order_relaxed);
        return TS_STR_OVERFLOW;
    }
    return id;
}

/* A name past TS_NAME_MAX, cut: apart, so that the lookup of every other name (on the event
 * calls' path) keeps no 8 KiB buffer on the caller's stack. */
static __attribute__((noinline, cold)) uint32_t intern_cut(strtab *t, const char *bytes, size_t len)
{
    char cut[TS_NAME_MAX];
    return intern(t, cut, cut_name(bytes, len, cut));
}

uint32_t strtab_intern(strtab *t, const char *bytes, size_t len, int *truncated)
{
    if (truncated)
        *truncated = bytes && len > TS_NAME_MAX;
    if (!bytes)
        len = 0, bytes = "";
    return len > TS_NAME_MAX ? intern_cut(t, bytes, len) : intern(t, bytes, len);
}

uint32_t strtab_count(const strtab *t)
{
    return atomic_load_explicit(&((strtab *)t)->count, memory_order_acquire);
}

const char *strtab_name(const strtab *t, uint32_t id, uint32_t *len)
{
    return entry_of(t->own_index, t->own_arena, t->max, t->arena_size, strtab_count(t), id, len);
}

const char *strtab_get(const segment *s, uint32_t id, uint32_t *len)
{
    const segment_geometry *g = segment_geometry_of(s);
    const uint32_t *index =
        segment_at(s, g->string_index_off, (uint64_t)g->string_max * sizeof(uint32_t));
    const char *arena = segment_at(s, g->string_arena_off, g->string_arena);
    uint32_t count = atomic_load_explicit(&segment_header(s)->string_count, memory_order_acquire);
    return entry_of(index, arena, g->string_max, g->string_arena, count, id, len);
}
