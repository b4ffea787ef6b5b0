/* model: the sums behind the boards (digest.c). */
#ifndef TERMSIGHT_MODEL_DIGEST_H
#define TERMSIGHT_MODEL_DIGEST_H

#include "event.h"
#include "segment.h"

/* The sums behind the boards (digest.c): the step trace by the operator options given, and every
 * operator's and kernel's totals. One thread: the segment creator's recorder. */
typedef struct digest digest;

/* name: the bytes of a string id (for the operator options and data fetches). NULL when out of
 * memory or when seg has no boards. */
digest *digest_create(const segment *seg,
                      const char *(*name)(void *ctx, uint32_t id, uint32_t *len), void *name_ctx,
                      const char *fp_start_op, const char *bp_end_op);
void digest_destroy(digest *d);
/* Events the recorder took from the lanes, in the order it writes them. */
void digest_feed(digest *d, const ts_event *ev, size_t n);
/* While pressed (a recorder that falls behind: a lane three quarters full), operators fed are
 * counted as left out (the operator board says so: partial) instead of summed, which costs the
 * recorder nothing; steps are summed whatever the pressure. */
void digest_pressed(digest *d, int pressed);
/* After a drain: the steps that have settled (finish: every ended step, at the session's end)
 * and what changed, onto the boards. now_ns: the collector clock at the drain. */
void digest_publish(digest *d, uint64_t now_ns, int finish);

#endif
