/* timeline_tmpl: printing a timeline event fast. Each event shape is a cJSON object (shapes,
 * timeline.c); for each combination of its fixed values (name, category, args strings, pid, tid)
 * it is printed once by cJSON with a marker byte where each varying value goes, and every later
 * event of that combination is the template's text with its numbers spliced in. Templates live
 * in a direct-mapped table; an event whose template cannot be made is printed by cJSON
 * directly. */
#include "timeline_internal.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

/* Prints sh into the buffer after a separator. Returns 0, or -1 when it did not fit. */
int timeline_print_shape(timeline *t, shape *sh)
{
    if (t->file_events)
        t->buf[t->len++] = ',';
    t->buf[t->len++] = '\n';
    size_t room = BUF_SIZE - t->len;
    if (!cJSON_PrintPreallocated(sh->root, t->buf + t->len, (int)room, t->cfg.pretty))
        return -1;
    t->len += strlen(t->buf + t->len);
    t->file_events++;
    return 0;
}

static uint64_t key_hash(const timeline *t, int shi, const shape *sh)
{
    uint64_t h = 0x9e3779b97f4a7c15ull * (uint64_t)(shi + 1);
    for (int s = 0; s < S_COUNT; s++) {
        if (!sh->slot[s])
            continue;
        h ^= t->key[s] + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h ? h : 1;
}

/* Prints the shape once with markers for its varying values; fills e. Returns -1 when it does
 * not fit a template. */
static int tmpl_make(timeline *t, int shi, shape *sh, uint64_t hash, tmpl_entry *e)
{
    static const char marks[S_COUNT][2] = {{MARK(0)},  {MARK(1)},  {MARK(2)},  {MARK(3)}, {MARK(4)},
                                           {MARK(5)},  {MARK(6)},  {MARK(7)},  {MARK(8)}, {MARK(9)},
                                           {MARK(10)}, {MARK(11)}, {MARK(12)}, {MARK(13)}};
    char *saved[S_COUNT];
    for (int s = 0; s < S_COUNT; s++) {
        saved[s] = sh->slot[s] ? sh->slot[s]->valuestring : NULL;
        if (sh->slot[s] && t->key[s] == VARY)
            sh->slot[s]->valuestring = (char *)marks[s];
    }
    int ok = cJSON_PrintPreallocated(sh->root, t->scratch, TMPL_MAX, t->cfg.pretty);
    for (int s = 0; s < S_COUNT; s++)
        if (sh->slot[s])
            sh->slot[s]->valuestring = saved[s];
    if (!ok)
        return -1;
    size_t len = strlen(t->scratch);
    char *text = malloc(len + 1);
    if (!text)
        return -1;
    memcpy(text, t->scratch, len + 1);
    if (!e->text && t->ntmpl_used < TMPL_SLOTS)
        t->tmpl_used[t->ntmpl_used++] = (uint32_t)(e - t->tmpl);
    free(e->text);
    e->text = text;
    e->hash = hash;
    e->shape = (uint32_t)shi;
    memcpy(e->key, t->key, sizeof e->key);
    int n = 0;
    uint32_t lit = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c >= MARK(0) && c < MARK(S_COUNT) && n < S_COUNT) {
            e->seg[n++] = (tmpl_seg){lit, c - MARK(0)};
            lit = 0;
        } else {
            lit++;
        }
    }
    e->seg[n] = (tmpl_seg){lit, -1};
    return 0;
}

/* Prints the event: its template (made on first use) with the varying values spliced in, or
 * directly when it has none. Returns 0, or -1 when it did not fit the buffer. */
int timeline_print_event(timeline *t, int shi, shape *sh)
{
    uint64_t h = key_hash(t, shi, sh);
    tmpl_entry *e = &t->tmpl[h & (TMPL_SLOTS - 1)];
    int hit = e->hash == h && e->shape == (uint32_t)shi;
    for (int s = 0; hit && s < S_COUNT; s++)
        hit = !sh->slot[s] || e->key[s] == t->key[s];
    if (!hit && tmpl_make(t, shi, sh, h, e) < 0) {
        e->hash = 0;
        return timeline_print_shape(t, sh);
    }
    char *o = t->buf + t->len;
    if (t->file_events)
        *o++ = ',';
    *o++ = '\n';
    const char *src = e->text;
    for (const tmpl_seg *g = e->seg;; g++) {
        memcpy(o, src, g->lit);
        o += g->lit;
        src += g->lit;
        if (g->slot < 0)
            break;
        const char *v = t->num[g->slot];
        size_t vl = strlen(v);
        memcpy(o, v, vl);
        o += vl;
        src++; /* the marker */
    }
    t->len = (size_t)(o - t->buf);
    t->file_events++;
    return 0;
}
