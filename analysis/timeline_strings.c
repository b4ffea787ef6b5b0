/* timeline_strings: the timeline writer's event shapes (one cJSON object per shape, whose values
 * point at text the writer sets) and its strings, cleaned and escaped once per distinct name in
 * an arena (timeline_internal.h). */
#include "timeline_internal.h"

#include <cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Shapes -------------------------------------------------------------------------------- */

/* A value we point at our own text on each use: marked as a reference, so cJSON_Delete leaves
 * the pointer alone. */
static cJSON *add_slot(cJSON *obj, const char *key)
{
    cJSON *it = cJSON_AddRawToObject(obj, key, "0");
    if (!it)
        return NULL;
    free(it->valuestring);
    it->valuestring = (char *)"0";
    it->type |= cJSON_IsReference;
    return it;
}

/* Builds shape k. ph is the phase letter; args lists the slot keys of "args" (A0.. in order). */
static int shape_build(shape *sh, const char *ph, int has_tid, int has_dur, int has_id,
                       const char *scope, const char *bp, const char *const *args, int nargs)
{
    memset(sh, 0, sizeof *sh);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return -1;
    sh->root = o;
    char phq[8];
    snprintf(phq, sizeof phq, "\"%s\"", ph);
    int ok = 1;
    ok &= !!(sh->slot[S_NAME] = add_slot(o, "name"));
    if (strcmp(ph, "M") && strcmp(ph, "C"))
        ok &= !!(sh->slot[S_CAT] = add_slot(o, "cat"));
    ok &= !!cJSON_AddRawToObject(o, "ph", phq);
    if (has_id)
        ok &= !!(sh->slot[S_ID] = add_slot(o, "id"));
    if (strcmp(ph, "M"))
        ok &= !!(sh->slot[S_TS] = add_slot(o, "ts"));
    if (has_dur)
        ok &= !!(sh->slot[S_DUR] = add_slot(o, "dur"));
    ok &= !!(sh->slot[S_PID] = add_slot(o, "pid"));
    if (has_tid)
        ok &= !!(sh->slot[S_TID] = add_slot(o, "tid"));
    if (scope)
        ok &= !!cJSON_AddRawToObject(o, "s", scope);
    if (bp)
        ok &= !!cJSON_AddRawToObject(o, "bp", bp);
    if (nargs) {
        cJSON *ar = cJSON_AddObjectToObject(o, "args");
        ok &= !!ar;
        for (int i = 0; ok && i < nargs; i++)
            ok &= !!(sh->slot[S_A0 + i] = add_slot(ar, args[i]));
    }
    return ok ? 0 : -1;
}

int timeline_shapes_build(timeline *t)
{
    static const char *const op[] = {"type"}, *const opf[] = {"type", "flops"},
                             *const kern[] = {"op", "correlation"},
                             *const copy[] = {"op", "bytes", "direction"},
                             *const api[] = {"correlation"}, *const bytes[] = {"bytes"},
                             *const step[] = {"step",         "interval_us", "compute_us",
                                              "comm_wait_us", "tail_us",     "eval_us",
                                              "source"},
                             *const share[] = {"step", "share_pct"}, *const size[] = {"size"},
                             *const cpu[] = {"user_pct", "system_pct", "iowait_pct"},
                             *const procu[] = {"user_pct", "system_pct"},
                             *const value[] = {"value"}, *const name[] = {"name"};
    shape *s = t->shapes;
    int rc = 0;
    rc |= shape_build(&s[SH_X0], "X", 1, 1, 0, NULL, NULL, NULL, 0);
    rc |= shape_build(&s[SH_X_OP], "X", 1, 1, 0, NULL, NULL, op, 1);
    rc |= shape_build(&s[SH_X_OPF], "X", 1, 1, 0, NULL, NULL, opf, 2);
    rc |= shape_build(&s[SH_X_KERNEL], "X", 1, 1, 0, NULL, NULL, kern, 2);
    rc |= shape_build(&s[SH_X_COPY], "X", 1, 1, 0, NULL, NULL, copy, 3);
    rc |= shape_build(&s[SH_X_API], "X", 1, 1, 0, NULL, NULL, api, 1);
    rc |= shape_build(&s[SH_X_COMM], "X", 1, 1, 0, NULL, NULL, bytes, 1);
    rc |= shape_build(&s[SH_X_STEP], "X", 1, 1, 0, NULL, NULL, step, 7);
    rc |= shape_build(&s[SH_X_SHARE], "X", 1, 1, 0, NULL, NULL, share, 2);
    rc |= shape_build(&s[SH_I], "i", 1, 0, 0, "\"t\"", NULL, NULL, 0);
    rc |= shape_build(&s[SH_IG], "i", 1, 0, 0, "\"g\"", NULL, NULL, 0);
    rc |= shape_build(&s[SH_B], "b", 1, 0, 1, NULL, NULL, op, 1);
    rc |= shape_build(&s[SH_E], "e", 1, 0, 1, NULL, NULL, NULL, 0);
    rc |= shape_build(&s[SH_FS], "s", 1, 0, 1, NULL, NULL, NULL, 0);
    rc |= shape_build(&s[SH_FF], "f", 1, 0, 1, NULL, "\"e\"", NULL, 0);
    rc |= shape_build(&s[SH_C1], "C", 1, 0, 0, NULL, NULL, value, 1);
    rc |= shape_build(&s[SH_C_BYTES], "C", 1, 0, 0, NULL, NULL, bytes, 1);
    rc |= shape_build(&s[SH_C_SIZE], "C", 1, 0, 0, NULL, NULL, size, 1);
    rc |= shape_build(&s[SH_C_CPU], "C", 1, 0, 0, NULL, NULL, cpu, 3);
    rc |= shape_build(&s[SH_C_PROC], "C", 1, 0, 0, NULL, NULL, procu, 2);
    rc |= shape_build(&s[SH_M], "M", 1, 0, 0, NULL, NULL, name, 1);
    rc |= shape_build(&s[SH_MP], "M", 0, 0, 0, NULL, NULL, name, 1);
    return rc;
}

/* ---- Escaped strings --------------------------------------------------------------------- */

/* Arena text of bytes as a JSON string (with its quotes), cleaned and escaped by cJSON. Returns
 * the arena offset, or UINT32_MAX when out of memory. */
uint32_t timeline_arena_add(timeline *t, const char *prefix, const char *bytes, size_t len)
{
    size_t pl = prefix ? strlen(prefix) : 0;
    char *clean = malloc(pl + 4 * len + 1);
    if (!clean)
        return UINT32_MAX;
    memcpy(clean, prefix ? prefix : "", pl);
    text_clean(bytes, len, clean + pl, 1);
    cJSON *s = cJSON_CreateString(clean);
    free(clean);
    char *text = s ? cJSON_PrintUnformatted(s) : NULL;
    cJSON_Delete(s);
    if (!text)
        return UINT32_MAX;
    size_t tl = strlen(text) + 1;
    if (t->arena_len + tl > t->arena_cap) {
        size_t n = t->arena_cap ? t->arena_cap * 2 : 1 << 16;
        while (n < t->arena_len + tl)
            n *= 2;
        char *na = n <= UINT32_MAX ? realloc(t->arena, n) : NULL; /* offsets are 32-bit */
        if (!na) {
            free(text);
            return UINT32_MAX;
        }
        t->arena = na;
        t->arena_cap = n;
    }
    uint32_t off = (uint32_t)t->arena_len;
    memcpy(t->arena + off, text, tl);
    t->arena_len += tl;
    free(text);
    return off;
}

/* A fallback's or literal's arena offset, keyed by a caller-chosen key. */
static uint32_t keyed_off(timeline *t, uint64_t key, const char *text)
{
    uint32_t off = index_map_find(&t->strings, key);
    if (off != UINT32_MAX)
        return off;
    off = timeline_arena_add(t, NULL, text, strlen(text));
    if (off == UINT32_MAX)
        return 0; /* the arena starts with "" */
    index_map_get(&t->strings, key, off, NULL);
    return off;
}

/* The arena offset of the JSON string for (class, id), escaped once per id. An id without bytes
 * (none, or not named yet) gets the fallback text, which is not kept under the id: a later
 * strings chunk may still name it. */
uint32_t timeline_jstr(timeline *t, uint32_t cls, uint32_t id, const char *fallback)
{
    uint64_t key = (uint64_t)cls << 32 | id;
    uint32_t off = index_map_find(&t->strings, key);
    if (off != UINT32_MAX)
        return off;
    uint32_t len = 0;
    const char *s = analysis_raw_name(t->a, id, &len);
    if (!s || !len) /* keyed by the fallback's address: the callers pass literals */
        return keyed_off(t, (uint64_t)STR_FALLBACK << 56 ^ (uint64_t)(uintptr_t)fallback, fallback);
    off = timeline_arena_add(t, cls == STR_QUEUE ? "queue " : NULL, s, len);
    if (off == UINT32_MAX)
        return 0;
    index_map_get(&t->strings, key, off, NULL);
    return off;
}

uint32_t timeline_literal(timeline *t, uint32_t key, const char *text)
{
    return keyed_off(t, (uint64_t)STR_LITERAL << 32 | key, text);
}
