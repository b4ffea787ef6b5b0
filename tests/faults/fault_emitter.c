/* fault_emitter: a training process stand-in for the fault tests. It creates a session, prints
 * "run <folder>" and, with N threads, emits counters at full speed: thread k emits "emit<k>" with
 * the values 0, 1, 2 ... and publishes after each how many it has emitted in slot k of the
 * progress file (uint64 words, mapped shared), so a test can tell how far it got even after a
 * SIGKILL. With --events N each thread stops after N; with 0 (the default) they run until stdin
 * reaches its end. --burst B paces them: B events at full speed, then a millisecond's pause (the
 * recording of an unpaced run grows by gigabytes a minute). --together holds each thread after
 * its first event until every thread has emitted one, so that all hold a lane (or found none)
 * at once, however slowly threads start (with --events only). Then it stops collecting, prints
 * "emitted", "dropped", "recorded", "stop" and "destroy" lines (the last two: the calls' return
 * codes) and exits 0.
 *
 * usage: fault_emitter --output DIR [--threads N] [--events N] [--lane-events N]
 *                      [--burst B] [--progress FILE] [--no-start] [--together] */
#include "termsight/termsight.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256

static _Atomic int stop;
static uint64_t events_each, burst;
static _Atomic uint64_t *progress;
static _Atomic uint64_t emitted[MAX_THREADS];
static int together;
static pthread_barrier_t first_events;

static void *emit_loop(void *arg)
{
    uintptr_t k = (uintptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "emit%u", (unsigned)k);
    uint32_t id = termsight_name(name);
    for (uint64_t i = 0; !events_each || i < events_each; i++) {
        if (atomic_load_explicit(&stop, memory_order_relaxed))
            break;
        termsight_counter_id(id, (double)i);
        if (together && i == 0)
            pthread_barrier_wait(&first_events);
        atomic_store_explicit(&emitted[k], i + 1, memory_order_relaxed);
        if (progress)
            atomic_store_explicit(&progress[k], i + 1, memory_order_release);
        if (burst && (i + 1) % burst == 0) {
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
        }
    }
    return NULL;
}

static int usage(void)
{
    fputs("usage: fault_emitter --output DIR [--threads N] [--events N] [--lane-events N]\n"
          "                     [--burst B] [--progress FILE] [--no-start] [--together]\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    termsight_options o;
    termsight_options_init(&o);
    unsigned threads = 1;
    const char *progress_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--no-start")) {
            o.start_collecting = 0;
            continue;
        }
        if (!strcmp(argv[i], "--together")) {
            together = 1;
            continue;
        }
        if (!v)
            return usage();
        if (!strcmp(argv[i], "--output"))
            o.output_path = v;
        else if (!strcmp(argv[i], "--threads"))
            threads = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--events"))
            events_each = strtoull(v, NULL, 10);
        else if (!strcmp(argv[i], "--burst"))
            burst = strtoull(v, NULL, 10);
        else if (!strcmp(argv[i], "--lane-events"))
            o.lane_events = (uint32_t)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--progress"))
            progress_path = v;
        else
            return usage();
        i++;
    }
    if (!threads || threads > MAX_THREADS)
        return usage();
    if (together && !events_each)
        return usage(); /* a thread stopped before its first event would hold the others */
    if (together && pthread_barrier_init(&first_events, NULL, threads) != 0)
        return 1;
    if (progress_path) {
        int fd = open(progress_path, O_RDWR);
        void *p = fd < 0 ? MAP_FAILED
                         : mmap(NULL, threads * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                                MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            perror(progress_path);
            return 1;
        }
        close(fd);
        progress = p;
    }
    termsight_session *s;
    int rc = termsight_session_create(&o, &s);
    if (rc) {
        fprintf(stderr, "fault_emitter: %s\n", termsight_last_error());
        return 1;
    }
    printf("run %s\n", termsight_run_folder(s));
    fflush(stdout);

    pthread_t th[MAX_THREADS];
    for (uintptr_t k = 0; k < threads; k++)
        if (pthread_create(&th[k], NULL, emit_loop, (void *)k) != 0)
            return 1;
    if (!events_each) {
        char buf[256];
        while (read(STDIN_FILENO, buf, sizeof buf) > 0)
            ;
        atomic_store(&stop, 1);
    }
    uint64_t total = 0;
    for (unsigned k = 0; k < threads; k++) {
        pthread_join(th[k], NULL);
        total += atomic_load(&emitted[k]);
    }
    int stop_rc = termsight_stop(s);
    printf("emitted %" PRIu64 "\ndropped %" PRIu64 "\nrecorded %" PRIu64 "\n", total,
           termsight_events_dropped(s), termsight_events_recorded(s));
    printf("stop %d\n", stop_rc);
    printf("destroy %d\n", termsight_session_destroy(s));
    return fflush(stdout) == 0 ? 0 : 1;
}
