/* The segments found in /dev/shm (model/segment_list.c): one pid's several segments, another
 * user's refused, the listing and cleaning of stale segments, a reused pid. */
#include "model_test.h"
#include "segment_test.h"

#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* ------------------------------------------------------------------------------------------ */
/* Leftovers, listing, cleaning                                                               */
/* ------------------------------------------------------------------------------------------ */

/* A second segment for the same pid (a program that execs: its earlier image left one): a new
 * object under another name, the earlier one untouched; attach picks the newer, and cleaning
 * removes both. */
START_TEST(test_same_pid_twice)
{
    pid_t pid = mt_pid(11);
    segment_config cfg = mt_config(pid);
    cfg.process = "previous image";
    segment *old = mt_create(&cfg);
    atomic_store(&segment_header(old)->state, TS_STATE_COLLECTING);
    atomic_store(&segment_header(old)->events_recorded, 77);

    cfg.process = "new image";
    segment *s = mt_create(&cfg);
    ck_assert_str_ne(segment_shm_name(s), segment_shm_name(old));
    ck_assert_str_eq(segment_header(s)->process, "new image");
    ck_assert_uint_eq(atomic_load(&segment_header(s)->state), TS_STATE_IDLE);
    ck_assert_uint_eq(atomic_load(&segment_header(old)->events_recorded), 77);
    char paths[SHM_NAMES_MAX][96];
    ck_assert_int_eq(shm_paths_of_pid(pid, paths, SHM_NAMES_MAX), 2);

    segment *a = mt_attach(pid, 0);
    ck_assert_str_eq(segment_header(a)->process, "new image");
    segment_close(a, 0);
    segment_close(old, 0);
    segment_close(s, 0);
    char *cause = NULL;
    ck_assert_int_eq(segment_remove_stale(pid, &cause), 2);
    ck_assert(!mt_shm_exists(pid));
}
END_TEST

/* Another user's object named for our pid (planted before we start): never opened, never in
 * our way. */
START_TEST(test_foreign_owner_refused)
{
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: needs root to chown a segment to another uid\n");
        return;
    }
    pid_t pid = mt_pid(12);
    segment_config cfg = mt_config(pid);
    char planted[96];
    shm_plant_path(pid, planted, sizeof planted);
    int fd = open(planted, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fchown(fd, 12345, 12345), 0);
    close(fd);

    segment *s = mt_create(&cfg); /* under another name */
    ck_assert_str_ne(segment_shm_name(s), planted + strlen("/dev/shm"));
    struct stat st;
    ck_assert_int_eq(stat(planted, &st), 0);
    ck_assert_uint_eq(st.st_uid, 12345); /* left alone */

    /* attach finds ours among the two */
    segment *t = mt_attach(pid, 0);
    ck_assert_str_eq(segment_header(t)->process, "model-test");
    segment_close(t, 0);

    /* Alone, the planted one is refused by its owner. */
    segment_close(s, 1);
    char *cause = NULL;
    t = NULL;
    ck_assert_int_eq(segment_attach(pid, 0, &t, &cause), -1);
    ck_assert_msg(strstr(cause, "belongs to uid 12345"), "%s", cause);
    free(cause);
    cause = NULL;
    ck_assert_int_eq(segment_remove_stale(pid, &cause), -1);
    ck_assert_msg(strstr(cause, "belongs to uid 12345"), "%s", cause);
    free(cause);
    ck_assert_int_eq(stat(planted, &st), 0);

    segment_info *list = NULL;
    int n = segment_list(&list, &cause);
    ck_assert_int_ge(n, 0);
    for (int i = 0; i < n; i++)
        ck_assert_int_ne(list[i].pid, pid); /* only this user's segments */
    free(list);
    unlink(planted);
}
END_TEST

static const segment_info *list_find(const segment_info *list, int n, pid_t pid)
{
    for (int i = 0; i < n; i++)
        if (list[i].pid == pid)
            return &list[i];
    return NULL;
}

START_TEST(test_list_and_remove_stale)
{
    pid_t dead = mt_pid(13), broken = mt_pid(14), me = getpid();
    segment_config cfg = mt_config(dead);
    cfg.process = "gone";
    cfg.run_folder = "/runs/gone";
    segment *d = mt_create(&cfg);
    atomic_store(&segment_header(d)->state, TS_STATE_STOPPED);
    atomic_store(&segment_header(d)->events_recorded, 1234);
    atomic_store(&segment_header(d)->drops, 5);
    uint64_t d_start = segment_header(d)->start_realtime_ns;
    segment_close(d, 0); /* its owner is gone, the object stays */

    cfg = mt_config(0); /* our own pid, mapped by us */
    cfg.process = "me";
    segment *mine = mt_create(&cfg);
    ck_assert_int_eq(segment_header(mine)->pid, me);

    /* A damaged object with a segment's name (the form older versions gave). */
    char name[64];
    snprintf(name, sizeof name, "/" TS_SEGMENT_PREFIX "%d", (int)broken);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ftruncate(fd, 10), 0);
    close(fd);

    segment_info *list = NULL;
    char *cause = NULL;
    int n = segment_list(&list, &cause);
    ck_assert_msg(n >= 3, "%d: %s", n, cause ? cause : "");
    for (int i = 1; i < n; i++)
        ck_assert_int_le(list[i - 1].pid, list[i].pid);

    const segment_info *gi = list_find(list, n, dead);
    ck_assert_ptr_nonnull(gi);
    ck_assert_int_eq(gi->alive, 0);
    ck_assert_int_eq(gi->readable, 1);
    ck_assert_str_eq(gi->process, "gone");
    ck_assert_str_eq(gi->run_folder, "/runs/gone");
    ck_assert_uint_eq(gi->state, TS_STATE_STOPPED);
    ck_assert_uint_eq(gi->events_recorded, 1234);
    ck_assert_uint_eq(gi->drops, 5);
    ck_assert_uint_eq(gi->start_realtime_ns, d_start);
    check_name(gi->shm_name, dead);

    const segment_info *mi = list_find(list, n, me);
    ck_assert_ptr_nonnull(mi);
    ck_assert_int_eq(mi->alive, 1);
    ck_assert_int_eq(mi->readable, 1);
    ck_assert_str_eq(mi->process, "me");

    const segment_info *bi = list_find(list, n, broken);
    ck_assert_ptr_nonnull(bi);
    ck_assert_int_eq(bi->alive, 0);
    ck_assert_int_eq(bi->readable, 0);
    ck_assert_msg(strstr(bi->error, "too small"), "%s", bi->error);
    free(list);

    /* Ours and alive: refused, and still there. */
    ck_assert_int_eq(segment_remove_stale(me, &cause), -1);
    ck_assert_msg(strstr(cause, "alive"), "%s", cause);
    free(cause);
    cause = NULL;
    ck_assert(mt_shm_exists(me));

    ck_assert_int_eq(segment_remove_stale(dead, &cause), 1);
    ck_assert(!mt_shm_exists(dead));
    ck_assert_int_eq(segment_remove_stale(broken, &cause), 1);
    ck_assert(!mt_shm_exists(broken));
    /* Twice: nothing left to remove. */
    ck_assert_int_eq(segment_remove_stale(dead, &cause), -1);
    ck_assert_ptr_nonnull(cause);
    free(cause);
    cause = NULL;

    n = segment_list(&list, &cause);
    ck_assert_int_ge(n, 1);
    ck_assert_ptr_null(list_find(list, n, dead));
    ck_assert_ptr_null(list_find(list, n, broken));
    ck_assert_ptr_nonnull(list_find(list, n, me));
    free(list);
    segment_close(mine, 1);
}
END_TEST

/* A live process that does not map the segment named after its pid (the pid was reused): the
 * segment is stale. */
START_TEST(test_reused_pid_is_stale)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        char c;
        close(p[1]);
        ssize_t r = read(p[0], &c, 1); /* until the parent closes its end */
        _exit(r == 0 ? 0 : 1);
    }
    close(p[0]);
    segment_config cfg = mt_config(child);
    segment *s = mt_create(&cfg);
    segment_close(s, 0);

    segment_info *list = NULL;
    char *cause = NULL;
    int n = segment_list(&list, &cause);
    ck_assert_int_ge(n, 1);
    const segment_info *ci = list_find(list, n, child);
    ck_assert_ptr_nonnull(ci);
    ck_assert_int_eq(ci->alive, 0);
    ck_assert_int_eq(ci->readable, 1);
    free(list);
    ck_assert_int_eq(kill(child, 0), 0); /* the process really is alive */
    ck_assert_int_eq(segment_remove_stale(child, &cause), 1);
    ck_assert(!mt_shm_exists(child));

    close(p[1]);
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

static Suite *segment_list_suite(void)
{
    Suite *s = suite_create("segment_list");
    TCase *tc = tcase_create("stale");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_same_pid_twice);
    tcase_add_test(tc, test_foreign_owner_refused);
    tcase_add_test(tc, test_list_and_remove_stale);
    tcase_add_test(tc, test_reused_pid_is_stale);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(segment_list_suite());
}
