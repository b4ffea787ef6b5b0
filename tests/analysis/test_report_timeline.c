/* test_report_timeline: the Chrome-trace timeline (timeline.c) a report writes: the trace-event
 * rules, nesting, the size limit and the split into files, a lean report's timeline by steps. */
#include "analysis_internal.h"
#include "golden.h"
#include "report.h"
#include "report_fixture.h"

#define TESTUTIL_TAG "report"
#include "testutil.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Text rules of a timeline file: valid UTF-8 and no control byte but LF (and tab, pretty).
 * Plain tests inside the loop: ck_assert per byte would be slow. */
static void check_bytes(const char *s, size_t len, int pretty)
{
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        if (!(c >= 0x20 || c == '\n' || (pretty && c == '\t')))
            ck_abort_msg("control byte 0x%02x at %zu", c, i);
        size_t n = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        if (!(c < 0x80 || (c >= 0xc2 && c <= 0xf4)))
            ck_abort_msg("bad UTF-8 lead 0x%02x at %zu", c, i);
        for (size_t k = 1; k < n; k++)
            if (i + k >= len || (s[i + k] & 0xc0) != 0x80)
                ck_abort_msg("bad UTF-8 at %zu", i);
        i += n;
    }
}

typedef struct xspan {
    int pid, tid;
    long long b, e; /* ns */
} xspan;

static int xspan_cmp(const void *pa, const void *pb)
{
    const xspan *a = pa, *b = pb;
    if (a->pid != b->pid)
        return a->pid - b->pid;
    if (a->tid != b->tid)
        return a->tid - b->tid;
    if (a->b != b->b)
        return a->b < b->b ? -1 : 1;
    return a->e > b->e ? -1 : a->e < b->e; /* the longer first: parents before children */
}

static int small_int(const cJSON *v)
{
    return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble < 100000 &&
           v->valuedouble == (double)(int)v->valuedouble;
}

/* A metadata event's args.name for (ph M, name, pid, tid), or NULL. */
static const char *meta_name(const cJSON *evs, const char *what, int pid, int tid)
{
    const cJSON *e;
    const char *found = NULL;
    cJSON_ArrayForEach(e, evs)
    {
        if (strcmp(jstr(e, "ph"), "M") || strcmp(jstr(e, "name"), what))
            continue;
        if ((int)jnum(e, "pid") != pid)
            continue;
        if (tid && (int)jnum(e, "tid") != tid)
            continue;
        found = jstr(e, "args.name"); /* the last one wins, as in the viewers */
    }
    return found;
}

/* Checks one timeline file against the trace-event rules; returns its parsed root. */
static cJSON *check_trace(const char *path, int pretty)
{
    size_t len;
    char *text = slurp(path, &len);
    check_bytes(text, len, pretty);
    cJSON *root = cJSON_ParseWithLength(text, len);
    ck_assert_msg(root != NULL, "%s is not valid JSON", path);
    free(text);
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    ck_assert(cJSON_IsArray(evs));

    /* The names given in this file: (pid, 0) for processes, (pid, tid) for threads. */
    size_t n = (size_t)cJSON_GetArraySize(evs), nx = 0, nm = 0;
    xspan *xs = calloc(n + 1, sizeof *xs), *named = calloc(n + 1, sizeof *named);
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "ph")) ||
            strcmp(cJSON_GetObjectItemCaseSensitive(e, "ph")->valuestring, "M"))
            continue;
        ck_assert(cJSON_IsString(
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "name")));
        int thread = !strcmp(jstr(e, "name"), "thread_name");
        ck_assert(thread || !strcmp(jstr(e, "name"), "process_name"));
        named[nm++] = (xspan){(int)jnum(e, "pid"), thread ? (int)jnum(e, "tid") : 0, 0, 0};
    }
    cJSON_ArrayForEach(e, evs)
    {
        const char *ph = jstr(e, "ph");
        if (!small_int(cJSON_GetObjectItemCaseSensitive(e, "pid")))
            ck_abort_msg("pid not a small positive integer");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        if (tid && !small_int(tid))
            ck_abort_msg("tid not a small positive integer");
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "name")))
            ck_abort_msg("an event without a name");
        if (!strcmp(ph, "M"))
            continue;
        if (!tid)
            ck_abort_msg("a %s event without tid", ph);
        double ts = jnum(e, "ts");
        int pid = (int)jnum(e, "pid"), t = (int)jnum(e, "tid");
        if (!strcmp(ph, "X")) {
            double dur = jnum(e, "dur");
            if (dur < 0)
                ck_abort_msg("negative dur");
            xs[nx++] = (xspan){pid, t, llround(ts * 1000), llround((ts + dur) * 1000)};
        }
        /* Every thread with events is named in this file, and its process too. */
        int pname = 0, tname = !strcmp(ph, "C"); /* counters belong to the process */
        for (size_t k = 0; k < nm; k++) {
            pname |= named[k].pid == pid && !named[k].tid;
            tname |= named[k].pid == pid && named[k].tid == t;
        }
        if (!pname || !tname)
            ck_abort_msg("pid %d tid %d: no %s_name in %s", pid, t, pname ? "thread" : "process",
                         path);
    }
    free(named);
    /* Complete events on one track nest: sorted by begin (longer first), each must end within
     * the innermost open span that contains its begin. */
    qsort(xs, nx, sizeof *xs, xspan_cmp);
    xspan stack[256];
    int depth = 0;
    for (size_t i = 0; i < nx; i++) {
        if (i && (xs[i].pid != xs[i - 1].pid || xs[i].tid != xs[i - 1].tid))
            depth = 0;
        while (depth && stack[depth - 1].e <= xs[i].b)
            depth--;
        if (depth && xs[i].e > stack[depth - 1].e)
            ck_abort_msg("pid %d tid %d: [%lld, %lld] crosses [%lld, %lld]", xs[i].pid, xs[i].tid,
                         xs[i].b, xs[i].e, stack[depth - 1].b, stack[depth - 1].e);
        ck_assert_int_lt(depth, 256);
        stack[depth++] = xs[i];
    }
    free(xs);
    return root;
}

/* The events named name (and of phase ph, NULL: any). */
static int count_events(const cJSON *root, const char *ph, const char *name)
{
    const cJSON *e;
    int n = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents"))
    {
        if (ph && strcmp(jstr(e, "ph"), ph))
            continue;
        if (name && strcmp(jstr(e, "name"), name))
            continue;
        n++;
    }
    return n;
}

static const cJSON *find_event(const cJSON *root, const char *ph, const char *name)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(root, "traceEvents"))
    {
        if (!strcmp(jstr(e, "ph"), ph) && !strcmp(jstr(e, "name"), name))
            return e;
    }
    ck_abort_msg("no %s event named %s", ph, name);
    return NULL;
}

#define MAIN_NAME_CLEAN "main \"loop\"\n\\x01\\xff"

/* The (pid, tid) an event named name was drawn on. */
static void where(const cJSON *root, const char *ph, const char *name, int *pid, int *tid)
{
    const cJSON *e = find_event(root, ph, name);
    *pid = (int)jnum(e, "pid");
    *tid = (int)jnum(e, "tid");
}

/* Golden B's timeline, the host side and the devices: the host process and its thread names,
 * times from the origin, the devices' processes and streams, the launch's flow to its kernel.
 * Returns the first device's pid. */
static int check_host_and_devices(const cJSON *root)
{
    int pid, tid, pid2, tid2;
    /* The host process and its thread names. */
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", 1, 0),
        "golden (pid 4242)");
    where(root, "X", "outer", &pid, &tid);
    ck_assert_int_eq(pid, 1);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", 1, tid),
        MAIN_NAME_CLEAN " (100)");

    /* Times: microseconds from the origin (the golden's start, 0); child1 [1100, 1200]. */
    const cJSON *c1 = find_event(root, "X", "child1");
    ck_assert_double_eq(jnum(c1, "ts"), 1100);
    ck_assert_double_eq(jnum(c1, "dur"), 100);
    ck_assert_str_eq(jstr(c1, "cat"), "op");
    ck_assert_str_eq(jstr(c1, "args.type"), "child1");
    where(root, "X", "child1", &pid2, &tid2);
    ck_assert_int_eq(tid2, tid);
    where(root, "X", "cudaLaunchKernel", &pid2, &tid2);
    ck_assert_int_eq(tid2, tid);

    /* Devices: their own processes; streams as threads. */
    int kpid, ktid;
    where(root, "X", KERNEL, &kpid, &ktid);
    ck_assert_int_ge(kpid, 2);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", kpid, 0),
        "device 0");
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", kpid, ktid),
        "stream 7");
    ck_assert_int_eq(count_events(root, "X", KERNEL), 2);
    ck_assert_str_eq(jstr(find_event(root, "X", KERNEL), "args.op"), "child2");
    where(root, "X", "ncclAllReduce", &pid2, &tid2);
    ck_assert_int_ne(pid2, kpid);
    ck_assert_str_eq(jstr(find_event(root, "X", "ncclAllReduce"), "cat"), "comm_kernel");

    /* The launch and its kernel: one flow, "s" on the host thread at the call's start, "f"
     * binding to the kernel's slice. */
    const cJSON *s = find_event(root, "s", "ac2g"), *f = find_event(root, "f", "ac2g");
    ck_assert_int_eq((int)jnum(s, "id"), 77);
    ck_assert_int_eq((int)jnum(f, "id"), 77);
    ck_assert_str_eq(jstr(f, "bp"), "e");
    ck_assert_int_eq((int)jnum(s, "tid"), tid);
    ck_assert_double_eq(jnum(s, "ts"), 1310);
    ck_assert_int_eq((int)jnum(f, "pid"), kpid);
    ck_assert_double_eq(jnum(f, "ts"), 1400);
    ck_assert_int_eq(count_events(root, "s", NULL), 1);
    return kpid;
}

/* Golden B's timeline, its tracks: the overlap track, the async pair, the steps, the overlap
 * rows, the counters and the instants (kpid: the first device's pid). */
static void check_tracks(const cJSON *root, int kpid)
{
    int pid, tid, pid2, tid2;
    /* The partial overlap: p2 on an overlap track of thread 200. */
    where(root, "X", "p1", &pid, &tid);
    where(root, "X", "p2", &pid2, &tid2);
    ck_assert_int_eq(pid2, pid);
    ck_assert_int_ne(tid2, tid);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", pid2, tid2),
        "thread 200 (overlapping 1)");

    /* The range that ended on another thread: an async pair. */
    const cJSON *b = find_event(root, "b", "handoff"), *e = find_event(root, "e", "handoff");
    ck_assert_double_eq(jnum(b, "id"), jnum(e, "id"));
    ck_assert_double_eq(jnum(b, "ts"), 5000);
    ck_assert_double_eq(jnum(e, "ts"), 6000);
    ck_assert_int_eq(count_events(root, "X", "handoff"), 0);

    /* Steps: one track, "step N" spanning each step. */
    const cJSON *s1 = find_event(root, "X", "step 1");
    ck_assert_double_eq(jnum(s1, "ts"), 900);
    ck_assert_double_eq(jnum(s1, "dur"), 1200);
    where(root, "X", "step 2", &pid2, &tid2);
    ck_assert_int_eq(pid2, (int)jnum(s1, "pid"));
    ck_assert_int_eq(tid2, (int)jnum(s1, "tid"));
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", pid2, 0),
        "Steps");
    /* The overlap rows. */
    where(root, "X", "computation", &pid, &tid);
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "process_name", pid, 0),
        "Op Overlap Analyse");
    ck_assert_str_eq(
        meta_name(cJSON_GetObjectItemCaseSensitive(root, "traceEvents"), "thread_name", pid, tid),
        "Merged Computation");

    /* Counters. */
    ck_assert_int_eq(count_events(root, "C", "queue " QUEUE_NAME), 3);
    ck_assert_double_eq(jnum(find_event(root, "C", "queue " QUEUE_NAME), "args.size"), 1);
    ck_assert_double_eq(jnum(find_event(root, "C", "host memory"), "args.bytes"), 1 << 20);
    ck_assert_int_ge(count_events(root, "C", "device memory"), 1);
    ck_assert_int_eq((int)jnum(find_event(root, "C", "device memory"), "pid"), kpid);
    ck_assert_double_eq(jnum(find_event(root, "C", "loss"), "args.value"), 0.5);
    /* Instants. */
    ck_assert_double_eq(jnum(find_event(root, "i", "epoch\n1"), "ts"), 1050);
    ck_assert_double_eq(jnum(find_event(root, "i", "forward start"), "ts"), 1000);
    ck_assert_str_eq(jstr(find_event(root, "i", "lost 5 events"), "s"), "g");
}

START_TEST(test_timeline_rules)
{
    int pretty = _i;
    golden g;
    build_b(&g);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.pretty = pretty;
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->timeline_files, 1);
    ck_assert_uint_eq(info->timeline_moved, 1); /* p2 */
    ck_assert_uint_eq(info->timeline_dropped, 0);
    ck_assert_uint_eq(info->timeline_left_out, 0);

    char *path = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(path, pretty);
    ck_assert_uint_eq(
        (uint64_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "traceEvents")),
        info->timeline_events);

    int kpid = check_host_and_devices(root);
    check_tracks(root, kpid);

    cJSON_Delete(root);
    free(path);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* The overlap guard, case by case: ranges on thread 1 in recording order, how many must go to
 * an overlap track, and that the file keeps the nesting rule whatever happens. */
typedef struct span_case {
    const char *what;
    uint64_t ev[8][2]; /* [begin, end] us, in recording order; {0, 0} ends */
    int moved;
} span_case;

static const span_case span_cases[] = {
    {"children before their parent (the recorder's order)",
     {{10, 20}, {30, 40}, {5, 50}, {60, 70}},
     0},
    {"a parent before its child (late child): nested", {{5, 50}, {10, 20}}, 0},
    {"a second late child cannot be checked against the first: moved",
     {{5, 50}, {10, 20}, {30, 40}},
     1},
    {"partial overlap, later", {{10, 20}, {15, 25}}, 1},
    {"partial overlap, earlier", {{15, 25}, {10, 20}}, 1},
    {"identical ranges nest", {{10, 20}, {10, 20}}, 0},
    {"touching ranges are disjoint", {{10, 20}, {20, 30}, {0, 10}}, 0},
    {"a range late into a gap", {{10, 20}, {40, 50}, {25, 35}}, 0},
    {"a range late across a gap's edge", {{10, 20}, {40, 50}, {25, 45}}, 1},
    {"a parent covering several earlier ones", {{10, 20}, {25, 30}, {35, 40}, {0, 100}}, 0},
    {"three ranges crossing one another: two overlap tracks", {{10, 30}, {20, 40}, {25, 50}}, 2},
    {"zero-length ranges", {{10, 10}, {10, 20}, {20, 20}}, 0},
};

START_TEST(test_timeline_nesting)
{
    const span_case *c = &span_cases[_i];
    golden g;
    golden_init(&g);
    int n = 0;
    char name[16];
    for (; n < 8 && c->ev[n][1]; n++) {
        snprintf(name, sizeof name, "r%d", n);
        golden_op(&g, 1, name, NULL, c->ev[n][0], c->ev[n][1], 0);
    }
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report *r = run_report(run, NULL);
    const report_info *info = report_info_of(r);
    ck_assert_msg(info->timeline_moved == (uint64_t)c->moved, "%s: moved %llu, want %d", c->what,
                  (unsigned long long)info->timeline_moved, c->moved);
    ck_assert_uint_eq(info->timeline_dropped, 0);
    char *path = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(path, 0);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "r%d", i);
        ck_assert_int_eq(count_events(root, "X", name), 1);
    }
    cJSON_Delete(root);
    free(path);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* Many top-level ranges: the guard forgets the oldest ones (memory stays bounded) and then
 * refuses a range reaching back into them, but takes one that covers them all. */
START_TEST(test_timeline_nesting_forgets)
{
    golden g;
    golden_init(&g);
    for (uint64_t i = 0; i < 2000; i++)
        golden_op(&g, 1, "step_op", NULL, 100 + 10 * i, 105 + 10 * i, 0);
    golden_op(&g, 1, "reaches_back", NULL, 102, 30000, 0); /* crosses the first op */
    golden_op(&g, 1, "covers_all", NULL, 50, 30000, 0);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report *r = run_report(run, NULL);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->timeline_moved, 1);
    char *path = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(path, 0);
    int p1, t1, p2, t2;
    where(root, "X", "covers_all", &p1, &t1);
    where(root, "X", "step_op", &p2, &t2);
    ck_assert_int_eq(t1, t2);
    where(root, "X", "reaches_back", &p2, &t2);
    ck_assert_int_ne(t1, t2);
    ck_assert_int_eq(count_events(root, "X", "step_op"), 2000);
    cJSON_Delete(root);
    free(path);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* Checks every timeline file of dir; returns the ops drawn and the bytes of all files. */
static int check_timeline_files(const char *dir, uint32_t files, uint64_t split, uint64_t *bytes)
{
    int ops = 0;
    *bytes = 0;
    for (uint32_t i = 0; i < files; i++) {
        char name[64];
        timeline_file_name(i, name, sizeof name);
        char *p = path_join(dir, name);
        struct stat st;
        ck_assert_int_eq(stat(p, &st), 0);
        if (split)
            ck_assert_msg((uint64_t)st.st_size <= split, "%s: %lld bytes", name,
                          (long long)st.st_size);
        *bytes += (uint64_t)st.st_size;
        cJSON *root = check_trace(p, 0);
        ops += count_events(root, "X", "Default/layer/MatMul-op1");
        cJSON_Delete(root);
        free(p);
    }
    char name[64];
    timeline_file_name(files, name, sizeof name);
    char *p = path_join(dir, name);
    ck_assert_msg(!exists(p), "%s beyond the count", name);
    free(p);
    ck_assert_int_eq(count_prefix(dir, ".timeline"), 0); /* no temporary name left */
    return ops;
}

START_TEST(test_timeline_split)
{
    golden g;
    build_many(&g, 3000, NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.timeline_split_bytes = 32 * 1024;
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    /* 3000 ops of about 120 bytes: over 350 KiB, so more than 10 files of 32 KiB. */
    ck_assert_uint_gt(info->timeline_files, 10);
    uint64_t bytes;
    ck_assert_int_eq(
        check_timeline_files(info->dir, info->timeline_files, o.timeline_split_bytes, &bytes),
        3000);
    ck_assert_uint_eq(bytes, info->timeline_bytes);
    ck_assert_uint_eq(info->timeline_left_out, 0);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_int_eq((int)jnum(j, "timeline.files"), (int)info->timeline_files);
    cJSON_Delete(j);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* The size limit: from the option (_i 0), from the recording's option (_i 1). The timeline
 * stops at the first event that would pass it; every op is either drawn or counted. */
START_TEST(test_timeline_limit)
{
    golden g;
    build_many(&g, 12000, _i ? "1" : NULL);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    if (!_i)
        o.timeline_limit_mb = 0.1;
    uint64_t limit = _i ? 1024 * 1024 : (uint64_t)(0.1 * 1024 * 1024);
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    uint64_t bytes;
    int ops = check_timeline_files(info->dir, info->timeline_files, 0, &bytes);
    ck_assert_uint_le(bytes, limit);
    ck_assert_uint_gt(bytes, limit - 1024); /* filled up to the limit */
    ck_assert_uint_gt(info->timeline_left_out, 0);
    ck_assert_uint_eq((uint64_t)ops + info->timeline_left_out, 12000);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_double_eq(jnum(j, "timeline.left_out"), (double)info->timeline_left_out);
    ck_assert_double_eq(jnum(j, "timeline.limit_bytes"), (double)limit);
    cJSON_Delete(j);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* steps steps of ops ops each, one after the other: step slow (its ops "Default/slow/...") three
 * times as long as the others; without one (slow 0), steps of 1,000 to 2,000 ns. */
static void build_steps(golden *g, int steps, int ops, int slow)
{
    golden_init(g);
    uint64_t at = 10;
    for (int k = 1; k <= steps; k++) {
        uint64_t len = k == slow ? 3000 : slow ? 1000 : 1000 + (uint64_t)((k * 37) % 11) * 100;
        uint64_t gap = len / (uint64_t)ops;
        for (uint64_t i = 0; i < (uint64_t)ops; i++)
            golden_op(g, 1, k == slow ? "Default/slow/MatMul-op1" : "Default/layer/MatMul-op1",
                      NULL, at + i * gap + 1, at + i * gap + 2, 0);
        golden_step(g, 1, (uint64_t)k, at, at + len);
        at += len + 10;
    }
}

/* A lean report's timeline cut to its share by steps: 10 steps of 200 ops, step 7 three times
 * as long as the others; a share of about two steps holds step 7 whole (rather than the
 * beginning of the run), the rest in time order up to the share, every op drawn or counted. */
START_TEST(test_lean_timeline_by_steps)
{
    enum { STEPS = 10, OPS = 200, SLOW = 7 };
    golden g;
    build_steps(&g, STEPS, OPS, SLOW);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    report_options o;
    report_options_init(&o);
    o.lean = 1;
    o.timeline_limit_mb = 0.06; /* about two steps' ops */
    uint64_t limit = (uint64_t)(0.06 * 1024 * 1024);
    report *r = run_report(run, &o);
    const report_info *info = report_info_of(r);
    ck_assert_uint_eq(info->timeline_files, 1);
    char *p = path_join(info->dir, "timeline.json");
    cJSON *root = check_trace(p, 0);
    free(p);
    int slow = count_events(root, "X", "Default/slow/MatMul-op1");
    int others = count_events(root, "X", "Default/layer/MatMul-op1");
    ck_assert_int_eq(slow, OPS); /* the slowest step whole */
    ck_assert_int_gt(others, 0);
    ck_assert_int_lt(others, OPS * (STEPS - 1));
    ck_assert_ptr_nonnull(find_event(root, "X", "step 7"));
    cJSON_Delete(root);
    ck_assert_uint_le(info->timeline_bytes, limit);
    ck_assert_uint_gt(info->timeline_left_out, 0);
    cJSON *j = json_read(info->dir, "summary.json");
    ck_assert_double_eq(jnum(j, "timeline.left_out"), (double)info->timeline_left_out);
    ck_assert_double_eq(jnum(j, "timeline.bytes"), (double)info->timeline_bytes);
    cJSON_Delete(j);
    ck_assert_int_eq(count_prefix(info->dir, ".timeline"), 0);
    report_free(r);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* The share kept by steps is the same whether the lean report held its timeline in memory with
 * marks (the default), wrote it to its file as it passed the memory bound (a 4 KiB hold), or
 * read its text back for want of marks (8 marks): the same bytes and counts, with and without a
 * step window. */
START_TEST(test_lean_share_paths_agree)
{
    enum { STEPS = 12, OPS = 150 };
    golden g;
    build_steps(&g, STEPS, OPS, 0);
    char *tmp = tmp_make();
    char *run = path_join(tmp, "run");
    write_run(&g, run);
    golden_free(&g);
    for (int windowed = 0; windowed < 2; windowed++) {
        char *first = NULL;
        size_t first_len = 0;
        uint64_t first_left = 0, first_events = 0;
        for (int path = 0; path < 3; path++) {
            report_options o;
            report_options_init(&o);
            o.lean = 1;
            o.timeline_limit_mb = 0.04;
            if (windowed) {
                o.steps_first = 3;
                o.steps_last = 8;
            }
            o.keep_hold_max = path == 1 ? 4096 : 0;
            o.keep_marks_max = path == 2 ? 8 : 0;
            report *r = run_report(run, &o);
            const report_info *info = report_info_of(r);
            ck_assert_uint_eq(info->timeline_files, 1);
            ck_assert_uint_gt(info->timeline_left_out, 0);
            ck_assert_uint_le(info->timeline_bytes, (uint64_t)(0.04 * 1024 * 1024));
            char *p = path_join(info->dir, "timeline.json");
            size_t len;
            char *text = slurp(p, &len);
            cJSON_Delete(check_trace(p, 0));
            free(p);
            ck_assert_uint_eq(len, info->timeline_bytes);
            ck_assert_int_eq(count_prefix(info->dir, ".timeline"), 0);
            if (!path) {
                first = text;
                first_len = len;
                first_left = info->timeline_left_out;
                first_events = info->timeline_events;
            } else {
                ck_assert_uint_eq(len, first_len);
                ck_assert_mem_eq(text, first, len);
                ck_assert_uint_eq(info->timeline_left_out, first_left);
                ck_assert_uint_eq(info->timeline_events, first_events);
                free(text);
            }
            report_free(r);
        }
        free(first);
    }
    free(run);
    tmp_remove(tmp);
}
END_TEST

static Suite *report_timeline_suite(void)
{
    Suite *s = suite_create("report_timeline");
    TCase *tc = tcase_create("timeline");
    tcase_add_loop_test(tc, test_timeline_rules, 0, 2);
    tcase_add_loop_test(tc, test_timeline_nesting, 0, sizeof span_cases / sizeof span_cases[0]);
    tcase_add_test(tc, test_timeline_nesting_forgets);
    tcase_add_test(tc, test_timeline_split);
    tcase_add_loop_test(tc, test_timeline_limit, 0, 2);
    tcase_add_test(tc, test_lean_timeline_by_steps);
    tcase_add_test(tc, test_lean_share_paths_agree);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tests_run(report_timeline_suite());
}
