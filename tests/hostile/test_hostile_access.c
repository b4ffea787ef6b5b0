/* Access rules (docs/reliability.md): segments and run folders belong to the user who owns the
 * process, mode 0600 / 0700 whatever the umask, created without following symbolic links or
 * reusing another user's objects; `termsight top` and the mailbox refuse a segment of another
 * user; report files are written under a temporary name beside the target and renamed, and no
 * link at a report path or at a temporary name is followed.
 *
 * Sessions are made through the public API in the test's own (forked) process. Cases that need
 * another uid chown to 65534 and need root: without it they say so and the binary exits 77. */
#include "termsight/termsight.h"
#include "model.h"

#define TESTUTIL_TAG "hostile-acc"
#include "testutil.h"
#include "shmnames.h"
#include "cliutil.h"
#include "report.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define OTHER_UID 65534
#define PROCESS   "hostile"

static int need_root(const char *what)
{
    if (geteuid() == 0)
        return 0;
    fprintf(stderr, "skipped: %s needs root (to chown to uid %d)\n", what, OTHER_UID);
    return 1;
}

static void mode_expect(const char *path, mode_t type, mode_t mode)
{
    struct stat st;
    ck_assert_msg(lstat(path, &st) == 0, "%s: %s", path, strerror(errno));
    ck_assert_msg((st.st_mode & S_IFMT) == type, "%s: type 0%o", path, st.st_mode & S_IFMT);
    ck_assert_msg((st.st_mode & 07777) == mode, "%s: mode 0%03o, want 0%03o", path,
                  st.st_mode & 07777, mode);
    ck_assert_msg(st.st_uid == geteuid(), "%s: owner %u", path, (unsigned)st.st_uid);
}

/* The path of pid's one segment. */
static void shm_path(pid_t pid, char *out, size_t cap)
{
    shm_path_of_pid(pid, out, cap);
    ck_assert_msg(out[0], "pid %d has no segment, or several", (int)pid);
}

static char *slurp_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    size_t len;
    char *s = file_slurp(fd, &len);
    close(fd);
    return s;
}

/* A victim file the collector or the report writer must never touch. */
static char *victim_make(const char *dir, const char *name)
{
    char *v = path_join(dir, name);
    file_write(v, "victim\n", 7);
    return v;
}

static void victim_expect(const char *victim)
{
    char *s = slurp_path(victim);
    ck_assert_msg(!strcmp(s, "victim\n"), "%s was written to: %s", victim, s);
    free(s);
    mode_expect(victim, S_IFREG, 0644);
}

static void folder_empty(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d)))
        ck_assert_msg(de->d_name[0] == '.', "%s holds %s", dir, de->d_name);
    closedir(d);
}

static termsight_options options_for(const char *out)
{
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = out;
    o.process_name = PROCESS;
    o.sample_interval_ms = 1000;
    return o;
}

/* A short session in this process (a step with an op), ended; returns its run folder. */
static char *session_run(const char *out)
{
    termsight_options o = options_for(out);
    termsight_session *s = NULL;
    int rc = termsight_session_create(&o, &s);
    ck_assert_msg(rc == TERMSIGHT_OK, "create: %s", termsight_last_error());
    termsight_step_begin();
    termsight_range_begin("Default/fc1/MatMul-op1", "MatMul");
    termsight_range_end();
    termsight_step_end();
    char *run = strdup(termsight_run_folder(s));
    ck_assert_ptr_nonnull(run);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    return run;
}

/* ------------------------------------------------------------------------------------------ */
/* Modes                                                                                      */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_modes)
{
    umask(0); /* the modes must not depend on it */
    char *tmp = tmp_make();
    char *out = path_join(tmp, "out");
    termsight_options o = options_for(out);
    termsight_session *s = NULL;
    ck_assert_msg(termsight_session_create(&o, &s) == TERMSIGHT_OK, "%s", termsight_last_error());
    char shm[96];
    shm_path(getpid(), shm, sizeof shm);
    mode_expect(shm, S_IFREG, 0400); /* read-only for every process but its owner's */
    char ctl[128];
    snprintf(ctl, sizeof ctl, "%s-ctl", shm);
    mode_expect(ctl, S_IFREG, 0600); /* its control object, where monitors write commands */
    termsight_mark("m");
    ck_assert_int_eq(termsight_flush(s), TERMSIGHT_OK);
    char *run = strdup(termsight_run_folder(s));
    char *rec = path_join(run, TS_RECORDING_DIR);
    char *file = path_join(rec, TS_RECORDING_FILE);
    mode_expect(out, S_IFDIR, 0700);
    mode_expect(run, S_IFDIR, 0700);
    mode_expect(rec, S_IFDIR, 0700);
    mode_expect(file, S_IFREG, 0600);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);

    /* The report: not writable by others, whatever the umask (the CLI inherits 0). */
    char *rep = path_join(tmp, "rep");
    cli_result r;
    cli_run(tmp, (const char *const[]){"analyse", run, "-o", rep, NULL}, &r);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    mode_expect(rep, S_IFDIR, 0755);
    DIR *d = opendir(rep);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    unsigned files = 0;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char *p = path_join(rep, de->d_name);
        mode_expect(p, S_IFREG, 0644);
        free(p);
        files++;
    }
    closedir(d);
    ck_assert_uint_ge(files, 10);
    free(rep);
    free(file);
    free(rec);
    free(run);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Links and other users' objects where the collector writes                                  */
/* ------------------------------------------------------------------------------------------ */

enum plant { P_FILE_LINK, P_RECDIR_LINK, P_RUN_LINK, P_RUN_FOREIGN, P_RECDIR_FOREIGN, P__COUNT };

static const struct {
    const char *label;
    int root;
} plants[P__COUNT] = {
    {"a link at recording/events.tsr", 0},
    {"a link at recording/", 0},
    {"a link at the run folder", 0},
    {"a run folder of another user", 1},
    {"a recording/ folder of another user", 1},
};

/* Plants at the run folders this process could get in the next seconds, as far as anyone can
 * tell (the pid and the time, to the second, with or without a random part of the right form):
 * the session starts all the same under a name with a random part nobody could plant at, and
 * what was planted, and what it points to, stay as they were. */
START_TEST(test_planted)
{
    if (plants[_i].root && need_root(plants[_i].label))
        return;
    char *tmp = tmp_make();
    char *out = path_join(tmp, "out");
    char *victims = path_join(tmp, "victims");
    ck_assert_int_eq(mkdir(out, 0700), 0);
    ck_assert_int_eq(mkdir(victims, 0755), 0);
    char *victim = victim_make(tmp, "victim-file");
    time_t now = time(NULL);
    int planted = 0;
    for (int k = 0; k < 4; k++) {
        for (int form = 0; form < 2; form++) {
            time_t t = now + k;
            struct tm tm;
            localtime_r(&t, &tm);
            char stamp[32], *run;
            strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
            ck_assert_int_ge(asprintf(&run, "%s/" PROCESS "-%d-%s%s", out, (int)getpid(), stamp,
                                      form ? "-0123abcd" : ""),
                             0);
            char *rec = path_join(run, TS_RECORDING_DIR);
            char *file = path_join(rec, TS_RECORDING_FILE);
            switch (_i) {
            case P_FILE_LINK:
                ck_assert_int_eq(mkdir(run, 0700), 0);
                ck_assert_int_eq(mkdir(rec, 0700), 0);
                ck_assert_int_eq(symlink(victim, file), 0);
                break;
            case P_RECDIR_LINK:
                ck_assert_int_eq(mkdir(run, 0700), 0);
                ck_assert_int_eq(symlink(victims, rec), 0);
                break;
            case P_RUN_LINK:
                ck_assert_int_eq(symlink(victims, run), 0);
                break;
            case P_RUN_FOREIGN:
                ck_assert_int_eq(mkdir(run, 0777), 0);
                ck_assert_int_eq(chown(run, OTHER_UID, OTHER_UID), 0);
                break;
            default:
                ck_assert_int_eq(mkdir(run, 0700), 0);
                ck_assert_int_eq(mkdir(rec, 0777), 0);
                ck_assert_int_eq(chown(rec, OTHER_UID, OTHER_UID), 0);
                break;
            }
            planted++;
            free(file);
            free(rec);
            free(run);
        }
    }
    termsight_options o = options_for(out);
    termsight_session *s = NULL;
    int rc = termsight_session_create(&o, &s);
    ck_assert_msg(rc == TERMSIGHT_OK, "%s: %s", plants[_i].label, termsight_last_error());
    ck_assert_str_eq(termsight_state(s), "collecting");
    termsight_mark("recorded");
    ck_assert_int_eq(termsight_flush(s), TERMSIGHT_OK);
    char *run = strdup(termsight_run_folder(s));
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    /* A folder of its own, with its recording. */
    mode_expect(run, S_IFDIR, 0700);
    char *file = path_join(run, TS_RECORDING_DIR "/" TS_RECORDING_FILE);
    mode_expect(file, S_IFREG, 0600);
    /* Everything planted still there, as it was; nothing written where it points. */
    DIR *d = opendir(out);
    ck_assert_ptr_nonnull(d);
    int entries = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        entries += de->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(entries, planted + 1);
    victim_expect(victim);
    folder_empty(victims);
    free(file);
    free(run);
    free(victim);
    free(victims);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* The output folder is a symbolic link: another user's (planted in a shared folder such as /tmp)
 * is not followed, and the training is not stopped for it: the session is created, not
 * collecting; one of ours is followed. */
START_TEST(test_output_link)
{
    if (need_root("another user's link"))
        return;
    char *tmp = tmp_make();
    char *target = path_join(tmp, "target");
    ck_assert_int_eq(mkdir(target, 0777), 0);
    char *link = path_join(tmp, "output");
    ck_assert_int_eq(symlink(target, link), 0);
    ck_assert_int_eq(lchown(link, OTHER_UID, OTHER_UID), 0);

    termsight_options o = options_for(link);
    termsight_session *s = NULL;
    ck_assert_msg(termsight_session_create(&o, &s) == TERMSIGHT_OK, "%s", termsight_last_error());
    ck_assert_str_eq(termsight_state(s), "idle");
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_E_RECORDING);
    ck_assert_msg(
        strstr(termsight_last_error(), "symbolic link of uid 65534, which is not followed"), "%s",
        termsight_last_error());
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    folder_empty(target);

    /* Ours: followed. */
    ck_assert_int_eq(lchown(link, geteuid(), getegid()), 0);
    char *run = session_run(link);
    ck_assert_msg(!strncmp(run, link, strlen(link)), "%s", run);
    char *real = path_join(target, run + strlen(link) + 1);
    mode_expect(real, S_IFDIR, 0700);
    free(real);
    free(run);
    free(link);
    free(target);
    tmp_remove(tmp);
}
END_TEST

/* termsight run reports the run folder its command's session made: never something planted
 * under a name of the same form (here by the command itself, which knows its pid, with a time
 * stamp that makes it the newest), and refuses an output folder that is another user's link. */
START_TEST(test_run_reports_its_folder)
{
    char *tmp = tmp_make();
    char *out = path_join(tmp, "out");
    char *victims = path_join(tmp, "victims");
    ck_assert_int_eq(mkdir(victims, 0755), 0);
    char script[1024];
    snprintf(script, sizeof script, "ln -s %s \"%s/sh-$$-20991231-235959-deadbeef\"", victims, out);
    cli_result r;
    cli_run(tmp, (const char *const[]){"run", "-o", out, "--", "sh", "-c", script, NULL}, &r);
    ck_assert_msg(r.status == 0, "run: %d %s", r.status, r.err);
    const char *key = "termsight: run folder ";
    const char *p = strstr(r.err, key);
    ck_assert_msg(p, "no run folder in: %s", r.err);
    p += strlen(key);
    char folder[2048];
    snprintf(folder, sizeof folder, "%.*s", (int)strcspn(p, "\n"), p);
    ck_assert_msg(!strstr(folder, "20991231"), "the planted link was reported: %s", folder);
    mode_expect(folder, S_IFDIR, 0700);
    cli_result_free(&r);
    folder_empty(victims);

    if (!need_root("another user's link as run's output folder")) {
        char *link = path_join(tmp, "link");
        ck_assert_int_eq(symlink(victims, link), 0);
        ck_assert_int_eq(lchown(link, OTHER_UID, OTHER_UID), 0);
        cli_run(tmp, (const char *const[]){"run", "-o", link, "--", "true", NULL}, &r);
        ck_assert_int_eq(r.status, 1);
        err_expect(&r, "is a symbolic link of uid 65534, which is not followed");
        cli_result_free(&r);
        folder_empty(victims);
        free(link);
    }
    free(victims);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* An output folder (or a job folder in it) that another user could swap run folders in: one of
 * another user's (a shared /tmp/termsight-data made by them first), or one writable by every
 * user without the sticky bit. The session is made and trains on, not collecting, saying why;
 * nothing is written there; termsight run refuses such an output folder. A sticky one, as /tmp
 * is, is used. */
enum foreign { F_OTHER_OUTPUT, F_OPEN_OUTPUT, F_OTHER_JOB, F__COUNT };

START_TEST(test_output_foreign)
{
    if (need_root("another user's output folder"))
        return;
    static const char *const want[F__COUNT] = {"belongs to uid 65534, not to you",
                                               "writable by every user without the sticky bit",
                                               "belongs to uid 65534, not to you"};
    char *tmp = tmp_make(), *out = path_join(tmp, "shared"), *job = path_join(out, "j");
    ck_assert_int_eq(mkdir(out, 0755), 0);
    ck_assert_int_eq(chmod(out, _i == F_OPEN_OUTPUT ? 0777 : 0755), 0);
    if (_i == F_OTHER_JOB)
        ck_assert_int_eq(mkdir(job, 0700), 0);
    ck_assert_int_eq(
        chown(_i == F_OTHER_JOB ? job : out, _i == F_OPEN_OUTPUT ? 0 : OTHER_UID, OTHER_UID), 0);
    termsight_options o = options_for(out);
    if (_i == F_OTHER_JOB) {
        o.job = "j";
        o.rank = 0;
        o.world_size = 1;
    }
    termsight_session *s = NULL;
    ck_assert_msg(termsight_session_create(&o, &s) == TERMSIGHT_OK, "%s", termsight_last_error());
    ck_assert_str_eq(termsight_state(s), "idle");
    ck_assert_int_eq(termsight_start(s), TERMSIGHT_E_RECORDING);
    ck_assert_msg(strstr(termsight_last_error(), want[_i]), "%s", termsight_last_error());
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    folder_empty(_i == F_OTHER_JOB ? job : out);

    cli_result r;
    if (_i != F_OTHER_JOB) {
        cli_run(tmp, (const char *const[]){"run", "-o", out, "--", "true", NULL}, &r);
        ck_assert_int_eq(r.status, 1);
        err_expect(&r, want[_i]);
        cli_result_free(&r);
        folder_empty(out);
    }
    /* Ours, or root's, and sticky, as /tmp is: used. */
    ck_assert_int_eq(chown(out, 0, 0), 0);
    ck_assert_int_eq(chmod(out, 01777), 0);
    cli_run(tmp, (const char *const[]){"run", "-o", out, "--", "true", NULL}, &r);
    ck_assert_msg(r.status == 0, "%s", r.err);
    cli_result_free(&r);
    free(job);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Another user's object at the segment's name                                                */
/* ------------------------------------------------------------------------------------------ */

enum squat { S_FILE, S_LINK, S_FIFO, S_OWN_LINK, S_OWN_FIFO, S__COUNT };

static const char *const squats[S__COUNT] = {"another user's file", "another user's link",
                                             "another user's FIFO", "a link of ours",
                                             "a FIFO of ours"};

/* Objects planted where a segment of this pid could be named (the name older versions gave it,
 * and one of the form it has now): the session is created all the same, under a name nobody
 * could predict, and what was planted is left as it was. */
START_TEST(test_shm_squatted)
{
    int foreign = _i < S_OWN_LINK;
    if (foreign && need_root(squats[_i]))
        return;
    char *tmp = tmp_make();
    char *out = path_join(tmp, "out");
    char *victim = victim_make(tmp, "victim");
    char planted[2][96];
    snprintf(planted[0], sizeof planted[0], "/dev/shm/" TS_SEGMENT_PREFIX "%d", (int)getpid());
    shm_plant_path(getpid(), planted[1], sizeof planted[1]);
    for (int k = 0; k < 2; k++) {
        switch (_i) {
        case S_FILE:
            file_write(planted[k], "victim\n", 7);
            break;
        case S_LINK:
        case S_OWN_LINK:
            ck_assert_int_eq(symlink(victim, planted[k]), 0);
            break;
        default:
            ck_assert_int_eq(mkfifo(planted[k], 0600), 0);
            break;
        }
        if (foreign)
            ck_assert_int_eq(lchown(planted[k], OTHER_UID, OTHER_UID), 0);
    }
    struct stat before[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(lstat(planted[k], &before[k]), 0);
    termsight_options o = options_for(out);
    o.start_collecting = 0;
    termsight_session *s = NULL;
    int rc = termsight_session_create(&o, &s);
    ck_assert_msg(rc == TERMSIGHT_OK, "%s: %s", squats[_i], termsight_last_error());
    /* Ours among them, a real segment; the planted ones as they were. */
    char paths[SHM_NAMES_MAX][96];
    int n = shm_paths_of_pid(getpid(), paths, SHM_NAMES_MAX);
    ck_assert_int_eq(n, 3);
    for (int i = 0; i < n; i++)
        if (strcmp(paths[i], planted[0]) && strcmp(paths[i], planted[1]))
            mode_expect(paths[i], S_IFREG, 0400);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    for (int k = 0; k < 2; k++) {
        struct stat st;
        ck_assert_int_eq(lstat(planted[k], &st), 0);
        ck_assert_uint_eq(st.st_ino, before[k].st_ino);
        ck_assert_uint_eq(st.st_uid, before[k].st_uid);
        ck_assert_uint_eq(st.st_mode, before[k].st_mode);
        remove(planted[k]);
    }
    victim_expect(victim);
    free(victim);
    free(out);
    tmp_remove(tmp);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* top and the mailbox on another user's segment                                              */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_top_foreign_owner)
{
    if (need_root("top on another user's segment"))
        return;
    char *tmp = tmp_make();
    segment_config cfg = {.process = PROCESS,
                          .run_folder = "/nonexistent",
                          .clock = "monotonic",
                          .lane_count = 1,
                          .lane_events = 64,
                          .string_max = 16,
                          .string_arena = 4096};
    segment *s = NULL;
    char *cause = NULL;
    ck_assert_msg(segment_create(&cfg, &s, &cause) == 0, "%s", cause);
    char shm[96];
    shm_path(getpid(), shm, sizeof shm);
    ck_assert_int_eq(chown(shm, OTHER_UID, OTHER_UID), 0);

    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    cli_result r;
    cli_run(tmp, (const char *const[]){"top", pid, "--once", "--json", NULL}, &r);
    ck_assert_int_eq(r.status, 1);
    err_expect(&r, "belongs to uid 65534, not to you (uid 0)");
    ck_assert_msg(strchr(r.err, '\n') == r.err + r.err_len - 1, "not one line: %s", r.err);
    ck_assert_uint_eq(r.out_len, 0);
    cli_result_free(&r);

    /* Commands go through a writable attach: refused too, so nothing reaches the mailbox. */
    segment *w = NULL;
    ck_assert_int_eq(segment_attach(getpid(), 1, &w, &cause), -1);
    ck_assert_msg(strstr(cause, "belongs to uid 65534"), "%s", cause);
    free(cause);
    const ts_mailbox *mb = segment_mailbox(s);
    ck_assert_uint_eq(atomic_load(&mb->req_seq), 0);

    /* ls does not list it, and --clean leaves it. */
    cli_run(tmp, (const char *const[]){"ls", NULL}, &r);
    ck_assert_msg(!strstr(r.out, pid), "ls lists another user's segment: %s", r.out);
    cli_result_free(&r);
    segment_close(s, 1);
    tmp_remove(tmp);
}
END_TEST

/* Another user's files at names of this pid ("termsight-<pid>-<16 hex>"), count of them made
 * from first; 0 when they are all there. */
static int plant_names(int first, int count)
{
    for (int i = first; i < first + count; i++) {
        char path[96];
        snprintf(path, sizeof path, "/dev/shm/termsight-%d-%016llx", (int)getpid(),
                 0xf0e1d2c3b4a50000ull + (unsigned long long)i);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
        if (fd < 0 || fchown(fd, OTHER_UID, OTHER_UID) != 0 || close(fd) != 0)
            return -1;
    }
    return 0;
}

static int planted_left(int count)
{
    int left = 0;
    for (int i = 0; i < count; i++) {
        char path[96];
        struct stat st;
        snprintf(path, sizeof path, "/dev/shm/termsight-%d-%016llx", (int)getpid(),
                 0xf0e1d2c3b4a50000ull + (unsigned long long)i);
        if (lstat(path, &st) == 0 && st.st_uid == OTHER_UID)
            left++;
        unlink(path);
    }
    return left;
}

#define PLANTED 40 /* more than the 16 names a lookup used to look at, half on each side */

/* Another user creates files at this pid's segment names, before and after the real one: every
 * lookup still finds the real one (top PID, top NAME, a writable attach as F5/F6 make, ls),
 * says what it passed over, and leaves the planted files as they were. */
START_TEST(test_top_planted_names)
{
    if (need_root("names planted by another uid"))
        return;
    char *tmp = tmp_make();
    ck_assert_int_eq(plant_names(0, PLANTED / 2), 0);
    termsight_options o = options_for(tmp);
    char pid[16], name[32];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    snprintf(name, sizeof name, "planted-%d", (int)getpid()); /* no other session's */
    o.process_name = name;
    termsight_session *s = NULL;
    ck_assert_msg(termsight_session_create(&o, &s) == TERMSIGHT_OK, "create: %s",
                  termsight_last_error());
    ck_assert_int_eq(plant_names(PLANTED / 2, PLANTED / 2), 0);

    const char *targets[] = {pid, name};
    for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
        const char *args[] = {"top", "--once", "--json", "--refresh-ms", "50", targets[i], NULL};
        cli_result r;
        cli_run(tmp, args, &r);
        ck_assert_msg(r.status == 0, "top %s: %s", targets[i], r.err);
        ck_assert_msg(strstr(r.out, name), "top %s: %s", targets[i], r.out);
        err_expect(&r, "passed over 40 names of pid");
        err_expect(&r, "belongs to uid 65534, not to you");
        cli_result_free(&r);
    }

    segment *w = NULL;
    char *cause = NULL;
    ck_assert_msg(segment_attach(getpid(), 1, &w, &cause) == 0, "writable attach: %s", cause);
    ck_assert_ptr_nonnull(segment_mailbox(w));
    ck_assert_msg(strstr(segment_note(w), "passed over 40 names"), "%s", segment_note(w));
    segment_close(w, 0);
    ck_assert_int_eq(segment_remove_stale(getpid(), &cause), -1); /* ours is in use */
    ck_assert_msg(strstr(cause, "is alive"), "%s", cause);
    free(cause);

    cli_result r;
    cli_run(tmp, (const char *const[]){"ls", NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert_msg(strstr(r.out, pid) && strstr(r.out, name), "ls: %s", r.out);
    cli_result_free(&r);

    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    ck_assert_int_eq(planted_left(PLANTED), PLANTED);
    tmp_remove(tmp);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Report paths                                                                               */
/* ------------------------------------------------------------------------------------------ */

/* A recording made by a session in a child (this process keeps no session), in tmp/out; its
 * run folder. */
static char *recording_make(const char *tmp)
{
    char *out = path_join(tmp, "out");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        free(session_run(out));
        _exit(0);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    DIR *d = opendir(out);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    char *run = NULL;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            run = path_join(out, de->d_name);
    closedir(d);
    ck_assert_ptr_nonnull(run);
    free(out);
    return run;
}

/* What the report tests start from: a scratch folder, a run folder, an empty folder that
 * planted links point to. */
typedef struct report_case {
    char *tmp, *run, *victims;
} report_case;

static void report_case_open(report_case *c)
{
    c->tmp = tmp_make();
    c->run = recording_make(c->tmp);
    c->victims = path_join(c->tmp, "victims");
    ck_assert_int_eq(mkdir(c->victims, 0755), 0);
}

static void report_case_close(report_case *c)
{
    folder_empty(c->victims);
    free(c->victims);
    free(c->run);
    tmp_remove(c->tmp);
}

START_TEST(test_report_links)
{
    report_case c;
    report_case_open(&c);
    char *tmp = c.tmp, *run = c.run, *victims = c.victims;
    char *victim = victim_make(tmp, "victim");

    /* The default target, <run>/report, and a -o target: a link to a folder, and to a file. */
    char *def = path_join(run, REPORT_DIR), *o = path_join(tmp, "o");
    const struct {
        const char *link, *to;
        int dash_o;
    } cases[] = {{def, victims, 0}, {o, victims, 1}, {def, victim, 0}, {o, victim, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ck_assert_int_eq(symlink(cases[i].to, cases[i].link), 0);
        cli_result r;
        if (cases[i].dash_o)
            cli_run(tmp, (const char *const[]){"analyse", run, "-o", cases[i].link, NULL}, &r);
        else
            cli_run(tmp, (const char *const[]){"analyse", run, NULL}, &r);
        ck_assert_msg(r.status == 1, "case %zu: exit %d", i, r.status);
        err_expect(&r, "is a symbolic link: not writing a report through it");
        cli_result_free(&r);
        struct stat st;
        ck_assert_int_eq(lstat(cases[i].link, &st), 0);
        ck_assert(S_ISLNK(st.st_mode));
        ck_assert_int_eq(unlink(cases[i].link), 0);
        folder_empty(victims);
        victim_expect(victim);
    }
    free(def);
    free(o);
    free(victim);
    report_case_close(&c);
}
END_TEST

/* Names "<target>.tmp-<pid>-<n>" taken before the command starts (in its child, before the
 * exec, so the pid is the command's). */
typedef struct squat_ctx {
    const char *target, *to;
    int count, dirs;
} squat_ctx;

static void squat_tmp_names(void *p)
{
    const squat_ctx *c = p;
    for (int n = 0; n < c->count; n++) {
        char name[4096];
        snprintf(name, sizeof name, "%s.tmp-%ld-%d", c->target, (long)getpid(), n);
        if (c->dirs) {
            if (mkdir(name, 0755) != 0)
                _exit(125);
            char keep[4200];
            snprintf(keep, sizeof keep, "%s/keep", name);
            FILE *f = fopen(keep, "w");
            if (!f)
                _exit(125);
            fclose(f);
        } else if (symlink(c->to, name) != 0) {
            _exit(125);
        }
    }
}

static unsigned entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    unsigned n = 0;
    while ((de = readdir(d)))
        n += !strncmp(de->d_name, prefix, strlen(prefix));
    closedir(d);
    return n;
}

START_TEST(test_report_tmp_names)
{
    report_case c;
    report_case_open(&c);
    char *tmp = c.tmp, *run = c.run, *victims = c.victims;
    char *target = path_join(tmp, "rep");
    cli_result r;

    /* A few links: the next free name is used, the links and their target are left alone. */
    squat_ctx links = {.target = target, .to = victims, .count = 5};
    cli_run_with(tmp, (const char *const[]){"analyse", run, "-o", target, NULL}, &r,
                 squat_tmp_names, &links);
    ck_assert_msg(r.status == 0, "exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    folder_empty(victims);
    ck_assert_uint_eq(entries(tmp, "rep.tmp-"), 5);
    mode_expect(target, S_IFDIR, 0755);

    /* Every name it would try taken by folders that are not its own: refused, none used. */
    char *cmd;
    ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s' '%s'.tmp-*", target, target), 0);
    ck_assert_int_eq(system(cmd), 0);
    squat_ctx dirs = {.target = target, .count = 100, .dirs = 1};
    cli_run_with(tmp, (const char *const[]){"analyse", run, "-o", target, NULL}, &r,
                 squat_tmp_names, &dirs);
    ck_assert_msg(r.status == 1, "exit %d: %s", r.status, r.err);
    err_expect(&r, "temporary");
    cli_result_free(&r);
    struct stat st;
    ck_assert_msg(lstat(target, &st) != 0, "a report was written");
    ck_assert_uint_eq(entries(tmp, "rep.tmp-"), 100);
    ck_assert_int_eq(system(cmd), 0);
    free(cmd);
    free(target);
    report_case_close(&c);
}
END_TEST

/* getrandom for this binary: the next forced_draws draws of 8 bytes give forced_value, the
 * others come from the kernel. Defined here, it stands in for libc's in the collector linked
 * into this test, so that a case knows the name a new segment is given first. */
static uint64_t forced_value = 0x5ee5ee5ee5ee5ee5ull;
static int forced_draws;

ssize_t getrandom(void *buf, size_t len, unsigned int flags)
{
    if (len == sizeof forced_value && forced_draws > 0) {
        forced_draws--;
        memcpy(buf, &forced_value, len);
        return (ssize_t)len;
    }
    return syscall(SYS_getrandom, buf, len, flags);
}

/* Another user creates the control object of the name a new segment is about to have (watching
 * /dev/shm): the session is profiled all the same (both names are drawn again), and the planted
 * object is left as it was. */
START_TEST(test_ctl_squatted)
{
    if (need_root("a control object of another uid"))
        return;
    char *tmp = tmp_make();
    char *out = path_join(tmp, "out");
    char planted[96];
    snprintf(planted, sizeof planted, "/dev/shm/" TS_SEGMENT_PREFIX "%d-%016llx-ctl", (int)getpid(),
             (unsigned long long)forced_value);
    file_write(planted, "victim\n", 7);
    ck_assert_int_eq(lchown(planted, OTHER_UID, OTHER_UID), 0);
    struct stat before, st;
    ck_assert_int_eq(lstat(planted, &before), 0);
    forced_draws = 2; /* the tree's ledger may draw first, then the segment's name */
    char *run = session_run(out);
    forced_draws = 0;
    char *rec = path_join(run, "recording/events.tsr");
    ck_assert_msg(stat(rec, &st) == 0 && st.st_size > 0, "%s: not recorded", rec);
    ck_assert_msg(lstat(planted, &st) == 0, "%s was removed", planted);
    ck_assert_uint_eq(st.st_ino, before.st_ino);
    ck_assert_uint_eq(st.st_uid, OTHER_UID);
    char *text = slurp_path(planted);
    ck_assert_str_eq(text, "victim\n");
    free(text);
    remove(planted);
    free(rec);
    free(run);
    free(out);
    tmp_remove(tmp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile access");
    TCase *tc = tcase_create("access");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_modes);
    tcase_add_loop_test(tc, test_planted, 0, P__COUNT);
    tcase_add_test(tc, test_output_link);
    tcase_add_test(tc, test_run_reports_its_folder);
    tcase_add_loop_test(tc, test_output_foreign, 0, F__COUNT);
    tcase_add_loop_test(tc, test_shm_squatted, 0, S__COUNT);
    tcase_add_test(tc, test_ctl_squatted);
    tcase_add_test(tc, test_top_foreign_owner);
    tcase_add_test(tc, test_top_planted_names);
    tcase_add_test(tc, test_report_links);
    tcase_add_test(tc, test_report_tmp_names);
    suite_add_tcase(s, tc);
    if (tests_run(s) != EXIT_SUCCESS)
        return EXIT_FAILURE;
    return geteuid() != 0 ? 77 : EXIT_SUCCESS; /* the cases for another uid did not run */
}
