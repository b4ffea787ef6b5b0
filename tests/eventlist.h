/* eventlist: a whole recording read into memory, for tests that check it event by event. */
#ifndef TERMSIGHT_EVENTLIST_H
#define TERMSIGHT_EVENTLIST_H

#include "model.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

typedef struct event_list {
    ts_event *ev;
    size_t n;
    recording_reader *reader; /* kept open for names */
} event_list;

/* Reads every event of the recording in folder (a run folder, recording/ or the file); the
 * recording must be undamaged. */
static inline void read_all(const char *folder, event_list *l)
{
    char *why = NULL;
    ck_assert_msg(recording_reader_open(folder, &l->reader, &why) == 0, "open %s: %s", folder,
                  why ? why : "?");
    l->ev = NULL;
    l->n = 0;
    const ts_event *ev;
    size_t n;
    int rc;
    while ((rc = recording_reader_next(l->reader, &ev, &n, &why)) == 1) {
        l->ev = realloc(l->ev, (l->n + n) * sizeof *l->ev);
        ck_assert_ptr_nonnull(l->ev);
        memcpy(l->ev + l->n, ev, n * sizeof *ev);
        l->n += n;
    }
    ck_assert_msg(rc == 0, "read: %s", why ? why : "?");
    ck_assert_uint_eq(recording_reader_bad_chunks(l->reader), 0);
}

static inline void list_free(event_list *l)
{
    free(l->ev);
    recording_reader_close(l->reader);
}

/* The name of a string id, "" when unknown. */
static inline const char *name_of(const event_list *l, uint32_t id)
{
    uint32_t len;
    const char *s = recording_reader_string(l->reader, id, &len);
    return s ? s : "";
}

/* Events of kind, named name (any name when NULL). */
static inline size_t count(const event_list *l, uint16_t kind, const char *name)
{
    size_t c = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->ev[i].kind == kind && (!name || !strcmp(name_of(l, l->ev[i].name), name)))
            c++;
    return c;
}

/* The first event of kind named name, or NULL. */
static inline const ts_event *find(const event_list *l, uint16_t kind, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->ev[i].kind == kind && !strcmp(name_of(l, l->ev[i].name), name))
            return &l->ev[i];
    return NULL;
}

#endif
