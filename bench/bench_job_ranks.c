/* bench_job_ranks: records a synthetic training job for bench/bench_job.sh: RANKS processes
 * (two at a time), each a rank of job JOB with its own session under OUTPUT, each emitting
 * EVENTS events: steps of 998 operator ranges between a step begin and end. The last rank waits
 * 2 ms before each step's first operator (a longer step interval), so the job has a
 * straggler whose cause is its data.
 *
 *   bench_job_ranks OUTPUT JOB RANKS EVENTS
 *
 * Each rank's lane holds all its events (TERMSIGHT_LANE_EVENTS=2^20 and more), so none is
 * dropped however fast they come; the program says how many were recorded and dropped. */
#include <termsight/termsight.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OPS_PER_STEP 998 /* + step begin and end: 1000 events a step */

static void spin_ns(uint64_t ns)
{
    uint64_t end = termsight_now_ns() + ns;
    while (termsight_now_ns() < end)
        ;
}

static int one_rank(const char *output, const char *job, int rank, int ranks, uint64_t events)
{
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = output;
    o.job = job;
    o.rank = rank;
    o.world_size = ranks;
    o.max_threads = 2;
    uint32_t lane = 1u << 20;
    while (lane < events + 1024 && lane < (1u << 24))
        lane <<= 1;
    o.lane_events = lane;
    termsight_session *s;
    if (termsight_session_create(&o, &s) != TERMSIGHT_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, termsight_last_error());
        return 1;
    }
    uint32_t names[4] = {termsight_name("Default/net/conv1/Conv2D-op1"),
                         termsight_name("Default/net/fc/MatMul-op2"),
                         termsight_name("Gradients/net/fc/MatMulGrad-op3"),
                         termsight_name("Default/optimizer/SGD-op4")};
    uint32_t types[4] = {termsight_name("Conv2D"), termsight_name("MatMul"),
                         termsight_name("MatMulGrad"), termsight_name("SGD")};
    uint64_t steps = events / (OPS_PER_STEP + 2);
    for (uint64_t st = 0; st < steps; st++) {
        termsight_step_begin();
        if (rank == ranks - 1)
            spin_ns(2000000); /* late input: 2 ms */
        for (int k = 0; k < OPS_PER_STEP; k++) {
            termsight_range_begin_id(names[k & 3], types[k & 3]);
            termsight_range_end();
        }
        termsight_step_end();
    }
    termsight_stop(s);
    printf("rank %d: %llu events recorded, %llu dropped\n", rank,
           (unsigned long long)termsight_events_recorded(s),
           (unsigned long long)termsight_events_dropped(s));
    fflush(stdout);
    return termsight_session_destroy(s) == TERMSIGHT_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fputs("usage: bench_job_ranks OUTPUT JOB RANKS EVENTS\n", stderr);
        return 2;
    }
    int ranks = atoi(argv[3]);
    long long events = atoll(argv[4]);
    if (ranks < 1 || ranks > 4096 || events < 1000 || events > (1LL << 24)) {
        fputs("bench_job_ranks: RANKS 1..4096, EVENTS 1000..16777216\n", stderr);
        return 2;
    }
    int failed = 0, running = 0;
    for (int r = 0; r < ranks || running; r++) {
        if (r < ranks) {
            fflush(NULL);
            pid_t pid = fork();
            if (pid < 0)
                return 1;
            if (pid == 0)
                _exit(one_rank(argv[1], argv[2], r, ranks, (uint64_t)events));
            running++;
        }
        if (running == 2 || r >= ranks - 1) {
            int st;
            if (wait(&st) > 0) {
                running--;
                failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
            }
        }
    }
    return failed ? 1 : 0;
}
