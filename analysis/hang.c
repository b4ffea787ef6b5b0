/* hang: which rank the others wait for, from what each is inside now (analysis/job.h). A rank
 * whose communication has been in flight for seconds waits for a peer that has not joined it; a
 * live rank that has none in flight while others wait is that peer (stuck in its data, its
 * compute, or dead-locked elsewhere). Pure functions: termsight top and termsight hang give them
 * what they read from the segments. */
#include "job.h"

#include <stdio.h>

int job_stalled(double since_s, double typical_s)
{
    if (since_s < JOB_HANG_MIN_S)
        return 0;
    return typical_s <= 0 || since_s >= JOB_HANG_STEPS * typical_s;
}

static int waits(const job_rank_wait *r)
{
    return r->live && r->comm_s >= JOB_HANG_COMM_S;
}

size_t job_waited_for(const job_rank_wait *r, size_t n, size_t *out, size_t *waiting)
{
    size_t w = 0, k = 0;
    for (size_t i = 0; i < n; i++)
        w += waits(&r[i]);
    if (waiting)
        *waiting = w;
    if (!w)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].live && !waits(&r[i]))
            out[k++] = i;
    return k;
}

void job_hang_verdict(char *buf, size_t cap, const job_rank_wait *r, size_t n,
                      const int32_t *rank_of, const int32_t *pid_of)
{
    size_t idx[256], waiting = 0;
    size_t m = n < 256 ? n : 256;
    size_t k = job_waited_for(r, m, idx, &waiting);
    if (!cap)
        return;
    if (!waiting) {
        snprintf(buf, cap, "no rank waits in a communication");
        return;
    }
    if (!k) {
        snprintf(buf, cap, "every rank waits in a communication: none can be named");
        return;
    }
    size_t at = 0;
    for (size_t j = 0; j < k && at < cap; j++) {
        size_t i = idx[j];
        int w = rank_of[i] >= 0
                    ? snprintf(buf + at, cap - at, "%srank %d", j ? ", " : "", (int)rank_of[i])
                    : snprintf(buf + at, cap - at, "%spid %d", j ? ", " : "", (int)pid_of[i]);
        if (w < 0)
            return;
        at += (size_t)w;
    }
    if (at < cap)
        snprintf(buf + at, cap - at,
                 " %s the others wait for (%zu rank%s wait%s in a communication)",
                 k == 1 ? "is the one" : "are the ones", waiting, waiting == 1 ? "" : "s",
                 waiting == 1 ? "s" : "");
}
