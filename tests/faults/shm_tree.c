/* shm_tree: the programs of a container's small /dev/shm (the tree's budget: model/budget.c), each
 * finishing as it does without termsight or not at all (a SIGBUS ends it, and the test sees the
 * signal).
 *
 *   shm_tree fork N OUT      a session (output OUT), then N children one after the other, each
 *                            recording a range and a counter and ending with _exit, as forked
 *                            workers do
 *   shm_tree threads N MIB OUT  a session, N pool threads that record one range each and stay,
 *                            then MIB MiB written into a shared-memory object of the program's own
 *   shm_tree shm MIB         only the MIB MiB write (a program that records nothing)
 *   shm_tree race N [destroy]  N threads record ranges and counters by name while main returns
 *                            without joining them (the exit handler ends the session meanwhile);
 *                            with destroy, main ends the session itself first, the threads on
 *
 * Prints "ok" and exits 0 when done. OUT "-" leaves the session to `termsight run`. */
#include "termsight/termsight.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static termsight_session *session;

static void session_for(const char *out)
{
    if (!strcmp(out, "-"))
        return;
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    if (termsight_session_create(&o, &session) != TERMSIGHT_OK)
        fprintf(stderr, "shm_tree: no session: %s\n", termsight_last_error());
}

/* The program's own shared memory: mib MiB written through a mapping (a full tmpfs answers a
 * store with SIGBUS). */
static int own_shm(unsigned mib)
{
    char name[64];
    snprintf(name, sizeof name, "/shm_tree-%d", (int)getpid());
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return perror("shm_open"), 1;
    shm_unlink(name);
    size_t len = (size_t)mib << 20;
    if (ftruncate(fd, (off_t)len) != 0)
        return perror("ftruncate"), 1;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return perror("mmap"), 1;
    memset(p, 0x5a, len);
    munmap(p, len);
    return 0;
}

static int forks(int n)
{
    termsight_range_begin("parent", "tree");
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return perror("fork"), 1;
        if (pid == 0) {
            termsight_range_begin("child", "tree");
            termsight_counter("child.i", i);
            termsight_range_end();
            _exit(0);
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "shm_tree: child %d ended badly (status %#x)\n", i, st);
            return 1;
        }
    }
    termsight_range_end();
    return 0;
}

static pthread_barrier_t recorded, release;

static void *pool_thread(void *arg)
{
    (void)arg;
    termsight_range_begin("task", "pool");
    termsight_range_end();
    pthread_barrier_wait(&recorded);
    pthread_barrier_wait(&release);
    return NULL;
}

static int threads(int n, unsigned mib)
{
    pthread_t t[256];
    if (n < 1 || n > 256)
        return 2;
    pthread_barrier_init(&recorded, NULL, (unsigned)n + 1);
    pthread_barrier_init(&release, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, pool_thread, NULL) != 0)
            return perror("pthread_create"), 1;
    pthread_barrier_wait(&recorded);
    int rc = own_shm(mib);
    pthread_barrier_wait(&release);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    return rc;
}

static _Atomic int started;

static void *racer(void *arg)
{
    char name[32];
    snprintf(name, sizeof name, "racer%u", (unsigned)(uintptr_t)arg);
    atomic_fetch_add(&started, 1);
    for (unsigned i = 0;; i++) {
        termsight_range_begin(name, "race");
        termsight_counter(i & 1 ? "odd" : "even", i);
        termsight_range_end();
    }
    return NULL;
}

static int race(int n, int destroy)
{
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, racer, (void *)(uintptr_t)i) != 0)
            return perror("pthread_create"), 1;
    }
    while (atomic_load(&started) < n)
        sched_yield();
    if (destroy && session) {
        /* The program ends its session itself while its threads go on. */
        struct timespec ms = {0, 2000000};
        nanosleep(&ms, NULL);
        termsight_session_destroy(session);
        session = NULL;
        nanosleep(&ms, NULL);
    }
    printf("ok\n");
    fflush(stdout);
    return 0; /* main returns: exit handlers run while the racers go on */
}

int main(int argc, char **argv)
{
    int rc = 2;
    if (argc == 4 && !strcmp(argv[1], "fork")) {
        session_for(argv[3]);
        rc = forks(atoi(argv[2]));
    } else if (argc == 5 && !strcmp(argv[1], "threads")) {
        session_for(argv[4]);
        rc = threads(atoi(argv[2]), (unsigned)atoi(argv[3]));
    } else if (argc == 3 && !strcmp(argv[1], "shm")) {
        rc = own_shm((unsigned)atoi(argv[2]));
    } else if ((argc == 3 || argc == 4) && !strcmp(argv[1], "race")) {
        session_for(getenv("SHM_TREE_OUT") ? getenv("SHM_TREE_OUT") : "-");
        return race(atoi(argv[2]), argc == 4 && !strcmp(argv[3], "destroy"));
    } else {
        fputs("usage: shm_tree fork N OUT | threads N MIB OUT | shm MIB | race N\n", stderr);
        return 2;
    }
    if (session && termsight_session_destroy(session) != TERMSIGHT_OK)
        fprintf(stderr, "shm_tree: destroy: %s\n", termsight_last_error());
    if (rc == 0)
        printf("ok\n");
    return rc;
}
