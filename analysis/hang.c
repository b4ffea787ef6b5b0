/* hang: which rank the others wait for, from what each is inside now (analysis/job.h). A rank
 * whose communication has been in flight for seconds waits for a peer that has not joined it; a
 * live rank that has none in flight while others wait is that peer (stuck in its data, its
 * compute, or dead-locked elsewhere). Pure functions: termsight top and termsight hang give them
 * what they read from the segments. */
#include "job.h"
#include "model.h"

#include <stdio.h>

int job_stalled(double since_s, double typical_s)
{
    if (since_s < JOB_HANG_MIN_S)
        return 0;
    return typical_s <= 0 || since_s >= JOB_HANG_STEPS * typical_s;
}

/* Whether r takes part: live, and a rank where any process has one. */
static int counted(const job_rank_wait *r, int ranked)
{
    return r->live && (!ranked || r->rank >= 0);
}

size_t job_waited_for(const job_rank_wait *r, size_t n, size_t *out, size_t *waiting)
{
    size_t w = 0, k = 0;
    int ranked = 0;
    for (size_t i = 0; i < n; i++)
        ranked |= r[i].live && r[i].rank >= 0;
    for (size_t i = 0; i < n; i++)
        w += counted(&r[i], ranked) && r[i].comm_s >= JOB_HANG_COMM_S;
    if (waiting)
        *waiting = w;
    if (!w)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (counted(&r[i], ranked) && !(r[i].comm_s >= JOB_HANG_COMM_S))
            out[k++] = i;
    return k;
}

void job_hang_verdict(char *buf, size_t cap, const job_rank_wait *r, size_t n)
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
        int w = r[i].rank >= 0
                    ? snprintf(buf + at, cap - at, "%srank %d", j ? ", " : "", (int)r[i].rank)
                    : snprintf(buf + at, cap - at, "%spid %d", j ? ", " : "", (int)r[i].pid);
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

static double secs_since(uint64_t now_ns, uint64_t then_ns)
{
    return then_ns && now_ns > then_ns ? (double)(now_ns - then_ns) / 1e9 : 0.0;
}

void job_name_of(const segment *s, uint32_t id, char *out, size_t cap)
{
    uint32_t len = 0;
    const char *b = id != TS_STR_NONE ? strtab_get(s, id, &len) : NULL;
    if (!b)
        snprintf(out, cap, "%s", id == TS_STR_NONE ? "(deeper than kept)" : "(unknown name)");
    else
        snprintf(out, cap, "%.*s", (int)(len < cap - 1 ? len : cap - 1), b);
}

double job_inside_text(const segment *s, const inflight_summary *in, uint64_t now_ns, char *buf,
                       size_t cap)
{
    const open_range *r = in->ncomms ? &in->comms[0] : in->main >= 0 ? &in->ranges[in->main] : NULL;
    if (!cap)
        return -1;
    buf[0] = 0;
    if (!r)
        return -1;
    char name[200];
    job_name_of(s, r->name, name, sizeof name);
    double t = secs_since(now_ns, r->begin_ns);
    snprintf(buf, cap, "in %s for %.1f s", name, t);
    return t;
}
