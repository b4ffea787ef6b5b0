/* termsight hang: what a stuck job's ranks are inside, and which rank the others wait for.
 *
 * For each live session of the job (or the one process): every thread's innermost open range and
 * how long it has been open, the communications in flight, the time since the last step ended
 * (model/inflight.c reads them from the segment, checked), the verdict (analysis/hang.c), and the
 * Python programs' stacks: where the segment says the program writes them on a signal
 * (termsight_stacks_signal, faulthandler), that signal is sent and the file in the run folder read
 * back, bounded in time. Nothing is stopped or traced; a process that does not answer is said so.
 */
#include "cli.h"
#include "report.h"
#include "job.h"
#include "model.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HANG_MAX          256          /* ranks of one job looked at */
#define STACKS_MAX_BYTES  (256u << 10) /* of one process's stacks */
#define STACKS_QUIET_NS   300000000ull /* a dump that stopped growing this long is whole */
#define STACKS_WAIT_S_DEF 5.0
#define SNAPSHOT_WAIT_MS                                                                           \
    30000 /* the flight recorders' answers: a snapshot writes up to its ring                       \
           */

typedef struct hang_thread {
    uint32_t tid, depth;
    char name[256];
    double open_s;
} hang_thread;

typedef struct hang_proc {
    segment_info info;
    inflight_summary in;
    hang_thread threads[INFLIGHT_RANGES];
    char comm[256];   /* the oldest communication in flight */
    char inside[300]; /* what it is inside, in one line (job_inside_text) */
    double comm_s;    /* < 0: none */
    double since_s;   /* since the last step ended; < 0: unknown */
    double typical_s;
    int stalled;
    int stacks_signal;
    char stacks_path[1100];
    off_t stacks_from;
    int stacks_sent; /* 1 sent; -errno */
    char *stacks;    /* malloc'd; NULL: none */
    const char *stacks_note;
    char snapshot[256]; /* the flight-recorder snapshot's folder, or why there is none */
    int snapshot_ok;
} hang_proc;

static void hang_usage(FILE *out)
{
    fprintf(out,
            "usage: termsight hang [JOB | PID] [--json] [--wait-s N] [--no-snapshot]\n"
            "\n"
            "Says where a stuck training job is: for each rank (or process) on this machine, its\n"
            "threads' innermost open ranges and how long they have been open, the communication\n"
            "it waits in, the time since its last step ended, and which rank the others wait\n"
            "for (the live rank not inside a communication while the others are). Python\n"
            "programs (under termsight run, or with the termsight binding) are asked for every\n"
            "thread's Python stack: the signal SIGRTMAX-3 makes faulthandler write them into\n"
            "python-stacks.txt in the run folder; nothing is traced or stopped. Sessions that\n"
            "keep a flight recorder (termsight run's flight option) each write a snapshot of\n"
            "their last events, whose folder is printed (termsight analyse reads it).\n"
            "\n"
            "JOB is a job id, PID a process (its whole job when it is a rank of one); with\n"
            "neither, the newest live session and its job, as termsight top picks.\n"
            "\n"
            "  --json      the same as JSON\n"
            "  --wait-s N  how long to wait for the stacks, in seconds (0 to 60, default 5;\n"
            "              0: do not ask)\n"
            "  --no-snapshot  do not ask flight recorders for snapshots (a script that polls)\n"
            "\n"
            "Exit status: 0, 1 when no session matches or on failure, 2 on bad usage.\n");
}

static int hang_bad_usage(const char *msg, const char *arg)
{
    cli_error("hang: %s%s", msg, arg);
    fputs("usage: termsight hang [JOB | PID] [--json] [--wait-s N] [--no-snapshot]\n", stderr);
    return 2;
}

static int alive_session(const segment_info *i)
{
    return i->alive && i->readable && i->state != TS_STATE_ENDED;
}

/* The sessions to look at: target's job (or it alone), sorted by rank. */
static int pick(const char *target, segment_info *all, int n, char **cause)
{
    int k = 0, best = -1;
    for (int i = 0; i < n; i++)
        if (alive_session(&all[i]))
            all[k++] = all[i];
    n = k;
    char *end;
    long pid = target ? strtol(target, &end, 10) : 0;
    int by_pid = target && *target && !*end && pid > 0;
    const char *job = target && !by_pid ? target : NULL;
    for (int i = 0; i < n && !job; i++) {
        if (by_pid ? all[i].pid == (pid_t)pid
                   : best < 0 || all[i].start_realtime_ns >= all[best].start_realtime_ns)
            best = i;
    }
    if (!job) {
        if (best < 0)
            return cause_set(cause,
                             target ? "hang: no live session of pid %s" : "hang: no live session%s",
                             target ? target : "");
        if (!all[best].job[0]) {
            all[0] = all[best];
            return 1;
        }
        job = all[best].job;
    }
    char want[64];
    snprintf(want, sizeof want, "%s", job);
    k = 0;
    for (int i = 0; i < n && k < HANG_MAX; i++)
        if (!strcmp(all[i].job, want))
            all[k++] = all[i];
    if (!k)
        return cause_set(cause, "hang: no live session of job '%.64s'", want);
    return k;
}

static double secs(uint64_t now, uint64_t then)
{
    return then && now > then ? (double)(now - then) / 1e9 : 0.0;
}

/* Reads what p's process is inside now. 0, or -1 when its segment cannot be read. */
static int hang_read(hang_proc *p, char **cause)
{
    segment *s;
    if (segment_attach(p->info.pid, 0, &s, cause) != 0)
        return -1;
    uint64_t now = tsclock_monotonic_ns();
    inflight_read(s, now, &p->in);
    for (uint32_t i = 0; i < p->in.nranges; i++) {
        hang_thread *t = &p->threads[i];
        t->tid = p->in.ranges[i].tid;
        t->depth = p->in.ranges[i].depth;
        t->open_s = secs(now, p->in.ranges[i].begin_ns);
        job_name_of(s, p->in.ranges[i].name, t->name, sizeof t->name);
    }
    p->comm_s = -1;
    if (p->in.ncomms) {
        p->comm_s = secs(now, p->in.comms[0].begin_ns);
        job_name_of(s, p->in.comms[0].name, p->comm, sizeof p->comm);
    }
    job_inside_text(s, &p->in, now, p->inside, sizeof p->inside);
    const ts_segment_header *h = segment_header(s);
    p->since_s = secs(now, p->in.last_step_end_ns ? p->in.last_step_end_ns : p->info.start_ns);
    p->typical_s = (double)p->in.typical_step_ns / 1e9;
    p->stalled = job_stalled(p->since_s, p->typical_s);
    /* A real-time signal only: whatever the segment says, hang sends nothing that stops or
     * ends a process by default but these, and those only where they are caught (stacks_ask). */
    p->stacks_signal = atomic_load_explicit(&h->stacks_signal, memory_order_acquire);
    if (p->stacks_signal < SIGRTMIN || p->stacks_signal > SIGRTMAX)
        p->stacks_signal = 0;
    segment_close(s, 0);
    return 0;
}

/* ---- Python stacks ------------------------------------------------------------------------ */

static off_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : -1;
}

/* Whether pid has a handler for sig now (/proc/<pid>/status, SigCgt): a signal it does not catch
 * would end it. */
static int signal_caught(pid_t pid, int sig)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    unsigned long long mask = 0;
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "SigCgt: %llx", &mask) == 1;
    fclose(f);
    return found && sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1);
}

/* Asks p's program for its stacks: notes where its file ends, then sends the signal it named,
 * where the program catches it. */
static void stacks_ask(hang_proc *p)
{
    if (!p->stacks_signal) {
        p->stacks_note = "no stacks: no stack dump registered (not Python, or no termsight in it)";
        return;
    }
    snprintf(p->stacks_path, sizeof p->stacks_path, "%.1024s/%s", p->info.run_folder,
             TS_STACKS_FILE);
    p->stacks_from = file_size(p->stacks_path);
    if (p->stacks_from < 0) {
        p->stacks_note = "its stacks file is missing";
        return;
    }
    /* The program's file is the user's own: one of another user's (a run folder swapped in a
     * folder they can write) is never shown. */
    struct stat st;
    if (lstat(p->stacks_path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
        p->stacks_note = "no stacks: its stacks file is not a file of yours (not read)";
        return;
    }
    char state = segment_proc_state(p->info.pid);
    if (state == 'T' || state == 't') {
        p->stacks_note = "no stacks: the process is stopped (a signal waits until it resumes)";
        return;
    }
    if (!signal_caught(p->info.pid, p->stacks_signal)) {
        p->stacks_note = kill(p->info.pid, 0) != 0 && errno == ESRCH
                             ? "the process is gone"
                             : "no stacks: the program no longer catches its stack signal";
        return;
    }
    /* The segment's process is the one asked: a pid reused since would have no segment of its
     * own (segment_list saw this one alive a moment ago). */
    if (kill(p->info.pid, p->stacks_signal) != 0) {
        p->stacks_sent = -errno;
        p->stacks_note = errno == ESRCH ? "the process is gone" : "the signal could not be sent";
        return;
    }
    p->stacks_sent = 1;
}

/* Reads what p's program wrote past stacks_from, once it has stopped growing. 1 when done. */
static int stacks_collect(hang_proc *p, uint64_t now, uint64_t *grown_ns, off_t *last)
{
    off_t size = file_size(p->stacks_path);
    if (size != *last) {
        *last = size;
        *grown_ns = now;
        return 0;
    }
    if (size <= p->stacks_from || now - *grown_ns < STACKS_QUIET_NS)
        return 0;
    int fd = open(p->stacks_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_uid != geteuid())) {
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        return 0;
    size_t want = (size_t)(size - p->stacks_from);
    if (want > STACKS_MAX_BYTES)
        want = STACKS_MAX_BYTES;
    char *buf = malloc(want + 1);
    ssize_t got = buf ? pread(fd, buf, want, p->stacks_from) : -1;
    close(fd);
    if (got <= 0) {
        free(buf);
        return 0;
    }
    buf[got] = 0;
    p->stacks = buf;
    return 1;
}

static void stacks_gather(hang_proc *p, size_t n, double wait_s)
{
    uint64_t grown[HANG_MAX];
    off_t last[HANG_MAX];
    size_t pending = 0;
    for (size_t i = 0; i < n; i++) {
        stacks_ask(&p[i]);
        grown[i] = tsclock_monotonic_ns();
        last[i] = p[i].stacks_from;
        pending += p[i].stacks_sent == 1;
    }
    uint64_t deadline = tsclock_monotonic_ns() + (uint64_t)(wait_s * 1e9);
    while (pending) {
        uint64_t now = tsclock_monotonic_ns();
        for (size_t i = 0; i < n; i++)
            if (p[i].stacks_sent == 1 && !p[i].stacks &&
                stacks_collect(&p[i], now, &grown[i], &last[i]))
                pending--;
        if (!pending || now >= deadline)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
    }
    for (size_t i = 0; i < n; i++)
        if (p[i].stacks_sent == 1 && !p[i].stacks)
            p[i].stacks_note = kill(p[i].info.pid, 0) != 0 && errno == ESRCH
                                   ? "the process is gone"
                                   : "the process did not answer in time (no stacks)";
}

/* A flight-recorder snapshot of every rank that keeps one, at once (the mailbox's snapshot, as
 * `termsight snapshot` asks): its folder, or why there is none. A session without a flight
 * recorder is not asked (it has nothing to write); a stopped rank is waited for two seconds. */
static void hang_request_snapshots(hang_proc *p, size_t n)
{
    segment_info *targets = calloc(n ? n : 1, sizeof *targets);
    cli_answer *answers = calloc(n ? n : 1, sizeof *answers);
    size_t *of = calloc(n ? n : 1, sizeof *of), k = 0;
    if (!targets || !answers || !of)
        goto done;
    for (size_t i = 0; i < n; i++) {
        if (p[i].info.flight_mb) {
            of[k] = i;
            targets[k++] = p[i].info;
        } else {
            snprintf(p[i].snapshot, sizeof p[i].snapshot,
                     "none: no flight recorder (termsight run --flight keeps one), not asked");
        }
    }
    cli_ask(targets, k, TS_CMD_SNAPSHOT, "termsight hang", SNAPSHOT_WAIT_MS, answers);
    for (size_t j = 0; j < k; j++) {
        const cli_answer *a = &answers[j];
        hang_proc *q = &p[of[j]];
        q->snapshot_ok = a->answered && a->status == 0;
        if (a->answered)
            snprintf(q->snapshot, sizeof q->snapshot, "%.250s", a->msg);
        else if (q->info.rank >= 0)
            snprintf(q->snapshot, sizeof q->snapshot, "rank %d (pid %d) %.200s", q->info.rank,
                     (int)q->info.pid, a->error);
        else
            snprintf(q->snapshot, sizeof q->snapshot, "pid %d %.200s", (int)q->info.pid, a->error);
    }
done:
    free(targets);
    free(answers);
    free(of);
}

/* ---- Output ------------------------------------------------------------------------------- */

/* What the hang rule reads of each process. */
static void waits_of(const hang_proc *p, size_t n, job_rank_wait *w)
{
    for (size_t i = 0; i < n; i++)
        w[i] = (job_rank_wait){.live = 1,
                               .rank = p[i].info.rank,
                               .pid = p[i].info.pid,
                               .comm_s = p[i].comm_s,
                               .since_s = p[i].since_s};
}

static void verdict_of(const hang_proc *p, size_t n, char *buf, size_t cap)
{
    job_rank_wait w[HANG_MAX];
    waits_of(p, n, w);
    job_hang_verdict(buf, cap, w, n);
}

/* Every name and text from the programs (process, ranges, communications, stacks, folders) is
 * printed cleaned (cli_clean; report_json_text in JSON), as top shows them: a name cannot move
 * the cursor, clear the screen or add a line of its own. */
#define CLEAN(buf, s) cli_clean((s), (buf), sizeof(buf))

static void print_indented(const char *title, const char *text)
{
    puts(title);
    char line[4 * 1024 + 1];
    for (const char *at = text; *at;) {
        size_t len = strcspn(at, "\n");
        char raw[1024];
        snprintf(raw, sizeof raw, "%.*s", (int)(len < sizeof raw ? len : sizeof raw - 1), at);
        printf("    %s\n", CLEAN(line, raw));
        at += len + (at[len] == '\n');
    }
}

static void print_text(const hang_proc *p, size_t n, const char *verdict)
{
    char name[4 * sizeof p->threads[0].name + 1], process[4 * sizeof p->info.process + 1];
    for (size_t i = 0; i < n; i++) {
        const hang_proc *q = &p[i];
        CLEAN(process, q->info.process);
        if (q->info.rank >= 0)
            printf("rank %d (pid %d, %.64s)", (int)q->info.rank, (int)q->info.pid, process);
        else
            printf("pid %d (%.64s)", (int)q->info.pid, process);
        if (q->in.last_step_end_ns)
            printf(": %llu steps, the last ended %.1f s ago%s\n", (unsigned long long)q->in.steps,
                   q->since_s, q->stalled ? " (stalled)" : "");
        else
            printf(": no step ended yet (%.1f s since it began)\n", q->since_s);
        if (q->comm_s >= 0)
            printf("  in %s for %.1f s (communication in flight, %u in all)\n",
                   CLEAN(name, q->comm), q->comm_s, q->in.ncomms);
        for (uint32_t t = 0; t < q->in.nranges; t++)
            printf("  thread %u%s: in %s for %.1f s (depth %u)\n", q->threads[t].tid,
                   (int)t == q->in.main ? " (main)" : "", CLEAN(name, q->threads[t].name),
                   q->threads[t].open_s, q->threads[t].depth);
        if (!q->in.nranges && q->comm_s < 0)
            printf("  no open range\n");
        if (q->snapshot[0])
            printf("  flight-recorder snapshot: %s\n", CLEAN(name, q->snapshot));
        if (q->stacks)
            print_indented("  Python stacks:", q->stacks);
        else if (q->stacks_note)
            printf("  %s\n", q->stacks_note);
    }
    printf("verdict: %s\n", verdict);
}

/* key: s (any bytes) cleaned into the JSON object. */
static void json_text(cJSON *o, const char *key, const char *s)
{
    report_json_text(o, key, s, strlen(s));
}

static cJSON *proc_json(const hang_proc *q)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", q->info.pid);
    cJSON_AddNumberToObject(o, "rank", q->info.rank);
    json_text(o, "process", q->info.process);
    json_text(o, "run_folder", q->info.run_folder);
    cJSON_AddNumberToObject(o, "steps", (double)q->in.steps);
    if (q->in.last_step_end_ns)
        cJSON_AddNumberToObject(o, "since_step_end_s", q->since_s);
    else
        cJSON_AddNullToObject(o, "since_step_end_s");
    cJSON_AddNumberToObject(o, "typical_step_s", q->typical_s);
    cJSON_AddBoolToObject(o, "stalled", q->stalled);
    cJSON *c = cJSON_AddObjectToObject(o, "communication");
    if (q->comm_s >= 0) {
        json_text(c, "name", q->comm);
        cJSON_AddNumberToObject(c, "open_s", q->comm_s);
        cJSON_AddNumberToObject(c, "in_flight", q->in.ncomms);
    } else {
        cJSON_DeleteItemFromObject(o, "communication");
        cJSON_AddNullToObject(o, "communication");
    }
    cJSON *th = cJSON_AddArrayToObject(o, "threads");
    for (uint32_t t = 0; t < q->in.nranges; t++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "tid", q->threads[t].tid);
        cJSON_AddBoolToObject(x, "main", (int)t == q->in.main);
        json_text(x, "range", q->threads[t].name);
        cJSON_AddNumberToObject(x, "open_s", q->threads[t].open_s);
        cJSON_AddNumberToObject(x, "depth", q->threads[t].depth);
        cJSON_AddItemToArray(th, x);
    }
    json_text(o, "inside", q->inside); /* in one line, as top shows it */
    if (q->stacks)
        json_text(o, "python_stacks", q->stacks);
    else
        cJSON_AddNullToObject(o, "python_stacks");
    json_text(o, "stacks_note", q->stacks_note ? q->stacks_note : "");
    if (q->snapshot_ok)
        json_text(o, "snapshot", q->snapshot);
    else
        cJSON_AddNullToObject(o, "snapshot");
    json_text(o, "snapshot_note", q->snapshot_ok ? "" : q->snapshot);
    return o;
}

static int print_json(const hang_proc *p, size_t n, const char *verdict)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *ranks = cJSON_AddArrayToObject(root, "ranks");
    job_rank_wait w[HANG_MAX];
    size_t idx[HANG_MAX], waiting = 0;
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(ranks, proc_json(&p[i]));
    waits_of(p, n, w);
    size_t k = job_waited_for(w, n, idx, &waiting);
    json_text(root, "job", n ? p[0].info.job : "");
    cJSON *wf = cJSON_AddArrayToObject(root, "waited_for");
    for (size_t j = 0; j < k; j++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "rank", p[idx[j]].info.rank);
        cJSON_AddNumberToObject(x, "pid", p[idx[j]].info.pid);
        cJSON_AddItemToArray(wf, x);
    }
    cJSON_AddNumberToObject(root, "waiting", (double)waiting);
    cJSON_AddStringToObject(root, "verdict", verdict);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text)
        return -1;
    puts(text);
    free(text);
    return 0;
}

/* ---- The command -------------------------------------------------------------------------- */

static int hang_parse(int argc, char **argv, const char **target, int *json, double *wait_s,
                      int *snapshots)
{
    enum { O_JSON = 256, O_WAIT, O_NO_SNAPSHOT };
    static const struct option longs[] = {
        {"json", no_argument, NULL, O_JSON},
        {"wait-s", required_argument, NULL, O_WAIT},
        {"no-snapshot", no_argument, NULL, O_NO_SNAPSHOT},
        {NULL, 0, NULL, 0},
    };
    int c, first = 1;
    *target = NULL;
    *json = 0;
    *wait_s = STACKS_WAIT_S_DEF;
    *snapshots = 1;
    while ((c = cli_getopt("hang", argc, argv, "", longs, 0, &first)) != -1) {
        if (c == O_JSON) {
            *json = 1;
        } else if (c == O_NO_SNAPSHOT) {
            *snapshots = 0;
        } else if (c == O_WAIT) {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (end == optarg || *end || errno || !(v >= 0 && v <= 60))
                return hang_bad_usage("--wait-s: not a number of seconds from 0 to 60: ", optarg);
            *wait_s = v;
        } else {
            return hang_bad_usage("see termsight hang --help", "");
        }
    }
    if (optind < argc)
        *target = argv[optind];
    if (optind + 1 < argc)
        return hang_bad_usage("unexpected argument: ", argv[optind + 1]);
    if (*target && !**target)
        return hang_bad_usage("an empty JOB or PID", "");
    return 0;
}

static int hang_run(int argc, char **argv, int check)
{
    const char *target;
    int json;
    double wait_s;
    int snapshots;
    int prc = hang_parse(argc, argv, &target, &json, &wait_s, &snapshots);
    if (prc || check)
        return prc;
    char *cause = NULL;
    segment_info *all = NULL;
    int n = segment_list(&all, &cause);
    if (n >= 0)
        n = pick(target, all, n, &cause);
    hang_proc *p = n > 0 ? calloc((size_t)n, sizeof *p) : NULL;
    if (n > 0 && !p)
        n = cause_set(&cause, "hang: out of memory");
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        p[k].info = all[i];
        char *why = NULL;
        if (hang_read(&p[k], &why) == 0)
            k++;
        else {
            cli_error("hang: pid %d: %s", (int)all[i].pid, why ? why : "cannot be read");
            free(why);
        }
    }
    free(all);
    if (n < 0 || !k) {
        cli_error("%s", cause ? cause : "hang: no session could be read");
        free(cause);
        free(p);
        return 1;
    }
    if (wait_s > 0)
        stacks_gather(p, k, wait_s);
    if (snapshots)
        hang_request_snapshots(p, k);
    char verdict[512];
    verdict_of(p, k, verdict, sizeof verdict);
    int rc = json ? print_json(p, k, verdict) : (print_text(p, k, verdict), 0);
    for (size_t i = 0; i < k; i++)
        free(p[i].stacks);
    free(p);
    return rc ? 1 : 0;
}

const cli_command cli_cmd_hang = {
    .name = "hang",
    .summary = "where a stuck job's ranks are, and which one the others wait for",
    .run = hang_run,
    .usage = hang_usage,
};
