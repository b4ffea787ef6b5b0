/* A full disk: the run folder on a 2 MiB tmpfs, mounted in a private mount namespace (the test
 * re-executes itself under `unshare -m` as root, `unshare -rm` otherwise; exit 77 when neither
 * works). Recording stops with its notice in the segment header, in `termsight top --once` (the
 * monitor's header line) and its JSON; the training goes on; what was written stays readable, and
 * every event emitted is in it or counted as dropped, exactly once; the recording ends with a note
 * of what the full disk cost (written into the space the collector kept for it) and the report
 * says so. A flight recorder's snapshot that does not fit fails and removes what it wrote. */
#define TESTUTIL_TAG "diskfull"
#include "testutil.h"

#include "cliutil.h"
#include "faults.h"
#include "termsight/termsight.h"

#include <dirent.h>
#include <errno.h>
#include <sys/statvfs.h>

static int record_failed(void *ctx)
{
    return atomic_load(&((ts_segment_header *)ctx)->record_error) != 0;
}

/* A tmpfs mounted (with options) at base/tmpfs: its path. */
static char *tmpfs_make(const char *base, const char *options)
{
    char *out = path_join(base, "tmpfs");
    ck_assert_int_eq(mkdir(out, 0700), 0);
    ck_assert_msg(mount("faults", out, "tmpfs", 0, options) == 0, "mount: %s", strerror(errno));
    return out;
}

START_TEST(disk_full)
{
    char *base = tmp_make(), *out = tmpfs_make(base, "size=2m,mode=0700");
    emitter e;
    /* Full speed into big lanes: drains of several chunks, the disk fills within one. */
    const char *big[] = {"--lane-events", "65536", NULL};
    emitter_start(&e, out, 2, big);
    segment *seg;
    char *why = NULL;
    ck_assert_msg(segment_attach(e.pid, 0, &seg, &why) == 0, "attach: %s", why);
    ts_segment_header *h = segment_header(seg);
    ck_assert_msg(wait_for(record_failed, h, 60), "2 MiB never filled");
    char notice[sizeof h->record_notice];
    snprintf(notice, sizeof notice, "%s", h->record_notice);
    ck_assert_msg(strstr(notice, "No space left on device"), "notice: %s", notice);
    ck_assert_uint_eq(atomic_load(&h->record_error), ENOSPC);
    ck_assert_uint_eq(atomic_load(&h->state), TS_STATE_COLLECTING);
    ck_assert(emitter_advances(&e, 10)); /* the training goes on */

    /* The monitor says so, in its header line and in its JSON. */
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)e.pid);
    const char *text[] = {"top", pid, "--once", "--refresh-ms", "50", NULL};
    const char *json[] = {"top", pid, "--once", "--json", "--refresh-ms", "50", NULL};
    cli_result res;
    cli_run(base, text, &res);
    ck_assert_msg(res.status == 0, "top --once: %s", res.err);
    ck_assert_msg(strstr(res.out, "No space left on device"), "top --once:\n%s", res.out);
    cli_result_free(&res);
    cli_run(base, json, &res);
    ck_assert_msg(res.status == 0, "top --once --json: %s", res.err);
    ck_assert_msg(strstr(res.out, "\"recording_stopped\"") &&
                      strstr(res.out, "No space left on device"),
                  "top --once --json:\n%s", res.out);
    cli_result_free(&res);

    ck_assert(emitter_advances(&e, 10));
    emitter_result r;
    emitter_finish(&e, &r);
    ck_assert(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
    ck_assert_int_eq(r.stop_rc, 0);
    /* Every event pushed into a lane (the mapping outlives the session): the emitter's, the
     * sampler's, the collector's own. Drops of the collector's own lane are retried, no loss. */
    uint64_t pushed = 0, lane_drops = 0;
    for (uint32_t i = 0; i < atomic_load(&h->lanes_used); i++) {
        ts_lane *l = segment_lane(seg, i);
        pushed += atomic_load(&l->head);
        if (atomic_load(&l->tid) != (uint32_t)e.pid)
            lane_drops += atomic_load(&l->drops);
    }
    segment_close(seg, 0);

    /* What was written reads back: whole chunks, at most the one cut by the full disk lost. At
     * the end, with the space the collector had kept given back, the recording got its closing
     * note: a loss notice for what could not be written and why (two events). */
    counter_tally t;
    tally_counters(e.run, &t);
    ck_assert_uint_le(t.bad_chunks, 1);
    ck_assert_int_eq(t.ordered, 1);
    ck_assert_uint_gt(t.total, 0);
    ck_assert_uint_eq(t.events, r.recorded + 2);
    ck_assert_uint_eq(t.by_kind[TS_KIND_LOST], 1 + (t.lost_by_reason[TS_LOST_LANE_FULL] > 0));
    uint64_t write_lost = t.lost_by_reason[TS_LOST_WRITE];
    ck_assert_uint_gt(write_lost, 0);
    /* Each pushed event is in the recording or counted as lost for the write; the others were
     * dropped by their full lane. */
    ck_assert_msg(t.events - 2 + write_lost == pushed,
                  "in the recording %" PRIu64 " - 2 + lost to the full disk %" PRIu64
                  " != pushed %" PRIu64,
                  t.events, write_lost, pushed);
    ck_assert_uint_eq(r.dropped, write_lost + lane_drops);
    ck_assert_uint_le(t.total, r.emitted);
    char reserve[1200];
    snprintf(reserve, sizeof reserve, "%s/" TS_RECORDING_DIR "/" TS_RECORDING_RESERVE, e.run);
    ck_assert_int_ne(access(reserve, F_OK), 0); /* the kept space is gone with the session */

    /* The report says that the disk was full and how many events were lost. */
    char *report = path_join(base, "report");
    const char *analyse[] = {"analyse", e.run, "-o", report, NULL};
    cli_run(base, analyse, &res);
    ck_assert_msg(res.status == 0, "analyse: %s", res.err);
    char want[sizeof notice + 128];
    snprintf(want, sizeof want, "recording stopped early (%s): the %" PRIu64, notice, write_lost);
    ck_assert_msg(strstr(res.out, want), "analyse does not say \"%s\":\n%s", want, res.out);
    cli_result_free(&res);
    free(report);
    printf("disk full: 2 MiB tmpfs; emitted %" PRIu64 ", %" PRIu64 " counters readable (%" PRIu64
           " events, %" PRIu64 " bad chunk, %" PRIu64 " bytes skipped), dropped %" PRIu64
           "; notice: %s\n",
           r.emitted, t.total, t.events, t.bad_chunks, t.skipped_bytes, r.dropped, notice);
    ck_assert_int_eq(umount(out), 0);
    free(out);
    tmp_remove(base);
}
END_TEST

static uint64_t free_bytes(const char *dir)
{
    struct statvfs v;
    ck_assert_int_eq(statvfs(dir, &v), 0);
    return (uint64_t)v.f_bavail * v.f_frsize;
}

/* The entries of dir but . and .., joined by spaces. */
static void entries(const char *dir, char *out, size_t cap)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d, "%s: %s", dir, strerror(errno));
    out[0] = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(out + strlen(out), cap - strlen(out), "%s ", e->d_name);
    closedir(d);
}

/* A snapshot that does not fit on the disk: it fails saying why and removes what it wrote (before,
 * a partial events.tsr and its folders stayed, keeping the disk full for the next ones); the free
 * space is what it was, and with space again the next snapshot is written. */
START_TEST(snapshot_disk_full)
{
    char *base = tmp_make(), *out = tmpfs_make(base, "size=4m,mode=0700");
    /* A flight recorder of 16 MiB, its run folder on the tmpfs. */
    setenv("TERMSIGHT_OUTPUT", out, 1);
    setenv("TERMSIGHT_FLIGHT_MB", "16", 1);
    termsight_session *s = NULL;
    ck_assert_msg(termsight_session_create(NULL, &s) == TERMSIGHT_OK, "%s", termsight_last_error());
    for (int i = 0; i < 4000; i++) {
        termsight_step_begin();
        termsight_range_begin("Default/fc1/MatMul-op1", "MatMul");
        termsight_range_end();
        termsight_step_end();
    }
    ck_assert_msg(termsight_snapshot(s, NULL) == TERMSIGHT_OK, "%s", termsight_last_error());
    char *snaps = path_join(termsight_run_folder(s), "snapshots");
    char *first = path_join(snaps, "01-request/recording/events.tsr");
    uint64_t size = path_size(first);
    ck_assert_msg(size > 64 * 1024, "the first snapshot is only %" PRIu64 " bytes", size);

    /* Fill the disk but for half a snapshot. */
    uint64_t room = free_bytes(out);
    ck_assert_msg(room > size, "%" PRIu64 " bytes free after a snapshot of %" PRIu64, room, size);
    uint64_t fill = (room - size / 2) & ~(uint64_t)4095;
    char *filler = path_join(base, "tmpfs/filler");
    int fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(posix_fallocate(fd, 0, (off_t)fill), 0);
    close(fd);
    uint64_t before = free_bytes(out);
    ck_assert_int_ne(termsight_snapshot(s, NULL), TERMSIGHT_OK);
    ck_assert_msg(strstr(termsight_last_error(), "No space left on device"), "%s",
                  termsight_last_error());
    char names[512];
    entries(snaps, names, sizeof names);
    ck_assert_msg(!strcmp(names, "01-request "), "left in snapshots/: %s", names);
    ck_assert_uint_eq(free_bytes(out), before);

    ck_assert_int_eq(unlink(filler), 0);
    ck_assert_msg(termsight_snapshot(s, NULL) == TERMSIGHT_OK, "%s", termsight_last_error());
    entries(snaps, names, sizeof names);
    ck_assert_msg(strstr(names, "03-request"), "snapshots/: %s", names);
    ck_assert_int_eq(termsight_session_destroy(s), TERMSIGHT_OK);
    printf("snapshot on a full disk: %" PRIu64 " bytes, %" PRIu64
           " free; failed, nothing left, the next one written\n",
           size, before);
    free(filler);
    free(first);
    free(snaps);
    ck_assert_int_eq(umount(out), 0);
    free(out);
    tmp_remove(base);
}
END_TEST

int main(void)
{
    int rc = faults_private_mounts();
    if (rc >= 0)
        return rc;
    const TTest *tests[] = {disk_full, snapshot_disk_full, NULL};
    return faults_main("disk_full", 120, tests);
}
