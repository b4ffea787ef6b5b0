/* model: the segment's string table (strtab.c). */
#ifndef TERMSIGHT_MODEL_STRTAB_H
#define TERMSIGHT_MODEL_STRTAB_H

#include "segment.h"

#define TS_STR_NONE     0u /* "" */
#define TS_STR_OVERFLOW 1u /* "<names table full>" */

/* Process-local writer over the segment's table: lookups are lock-free, inserts serialize on a
 * mutex (first use of a name only). */
typedef struct strtab strtab;

/* Creates the writer and publishes the reserved ids. */
int strtab_create(const segment *s, strtab **out, char **cause);
void strtab_destroy(strtab *t);

/* The id of these bytes (any bytes, len up to TS_NAME_MAX; a longer name is kept as its first
 * bytes and "...[cut: N bytes]", TS_NAME_MAX in all, and *truncated is set when truncated is not
 * NULL). A full table yields TS_STR_OVERFLOW and counts the miss. */
uint32_t strtab_intern(strtab *t, const char *bytes, size_t len, int *truncated);

/* Ids interned so far (the writer's own count). */
uint32_t strtab_count(const strtab *t);

/* The writer's lookup: the bytes of id, or NULL when id was not interned or its entry, which
 * lives in shared memory, is out of bounds. */
const char *strtab_name(const strtab *t, uint32_t id, uint32_t *len);

/* Reader (any process): the bytes of id, or NULL when id is unpublished or its entry is out of
 * bounds. */
const char *strtab_get(const segment *s, uint32_t id, uint32_t *len);

#endif
