/*
 * bench_top_emit: a process that emits events at a steady rate through the public API, for
 * bench_top.sh to watch with `termsight top`. Each step is a run of operator ranges of 20 names
 * (MindSpore-style scoped names), with phase marks and a queue sample, repeated until the rate
 * is met; the emitting thread sleeps between batches to hold the rate.
 *
 * The recording is capped (RLIMIT_FSIZE, --record-mb): at a million events a second it would
 * otherwise fill the disk at 64 MB/s. Past the cap the collector says "recording stopped" and
 * goes on draining and discarding; the lanes, which is what the monitor reads, see the same
 * traffic either way.
 *
 * usage: bench_top_emit [--rate EVENTS_PER_S] [--seconds S] [--output DIR] [--record-mb MB]
 */
#include <termsight/termsight.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define OPS_PER_STEP 20
#define BATCH        1000 /* events between checks of the clock */

static int parse_u64(const char *s, unsigned long long *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    *out = strtoull(s, &end, 10);
    return *end ? -1 : 0;
}

int main(int argc, char **argv)
{
    unsigned long long rate = 1000000, seconds = 60, record_mb = 64;
    const char *output = "/tmp/termsight-bench-top";
    for (int i = 1; i < argc; i += 2) { /* every option takes a value */
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(argv[i], "--rate"))
            bad = parse_u64(v, &rate) || !rate;
        else if (!strcmp(argv[i], "--seconds"))
            bad = parse_u64(v, &seconds);
        else if (!strcmp(argv[i], "--record-mb"))
            bad = parse_u64(v, &record_mb);
        else if (!strcmp(argv[i], "--output"))
            output = v, bad = !v;
        else
            bad = 1;
        if (bad) {
            fprintf(stderr, "usage: bench_top_emit [--rate EVENTS_PER_S] [--seconds S] "
                            "[--output DIR] [--record-mb MB]\n");
            return 2;
        }
    }
    termsight_options opts;
    termsight_options_init(&opts);
    opts.output_path = output;
    termsight_session *session;
    if (termsight_session_create(&opts, &session) != TERMSIGHT_OK) {
        fprintf(stderr, "bench_top_emit: %s\n", termsight_last_error());
        return 1;
    }
    /* After the session exists (the limit would refuse its shared memory too): writes past the
     * cap fail with EFBIG instead of killing the process. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {record_mb << 20, record_mb << 20};
    setrlimit(RLIMIT_FSIZE, &rl);
    termsight_thread_name("emit");
    uint32_t names[OPS_PER_STEP], types[4];
    static const char *const type_names[4] = {"MatMul", "BiasAdd", "ReLU", "SGD"};
    for (int t = 0; t < 4; t++)
        types[t] = termsight_name(type_names[t]);
    for (int k = 0; k < OPS_PER_STEP; k++) {
        char name[96];
        snprintf(name, sizeof name, "Default/layer%d/%s-op%d", k / 4 + 1, type_names[k % 4], k + 1);
        names[k] = termsight_name(name);
    }
    uint32_t queue =
        termsight_queue_register("batch_queue", 8, TERMSIGHT_QUEUE_HOST, "loader", "emit");

    uint64_t start = termsight_now_ns(), emitted = 0, steps = 0;
    uint64_t end = start + seconds * 1000000000ull;
    for (;;) {
        /* One step: begin, forward mark, the ops, backward mark, a queue sample, end. */
        for (int b = 0; b < BATCH;) {
            termsight_step_begin();
            termsight_phase_mark(TERMSIGHT_FORWARD_START);
            for (int k = 0; k < OPS_PER_STEP; k++) {
                termsight_range_begin_id(names[k], types[k % 4]);
                termsight_range_end();
            }
            termsight_phase_mark(TERMSIGHT_BACKWARD_END);
            termsight_queue_size(queue, steps % 8);
            termsight_step_end();
            b += OPS_PER_STEP + 5;
            steps++;
        }
        emitted += BATCH;
        uint64_t now = termsight_now_ns();
        if (now >= end)
            break;
        uint64_t due = start + emitted * 1000000000ull / rate;
        if (due > now) {
            struct timespec ts = {(time_t)((due - now) / 1000000000ull),
                                  (long)((due - now) % 1000000000ull)};
            nanosleep(&ts, NULL);
        }
    }
    double took = (double)(termsight_now_ns() - start) / 1e9;
    printf("bench_top_emit: %llu events in %.1f s (%.0f events/s), %llu dropped\n",
           (unsigned long long)emitted, took, (double)emitted / took,
           (unsigned long long)termsight_events_dropped(session));
    termsight_session_destroy(session);
    return 0;
}
