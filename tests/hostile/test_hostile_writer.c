/* A monitor that writes into the segment: any process of the user can map it writable (a buggy
 * or hostile monitor; the collector makes the segment read-only for others and every attach maps
 * it so, but its owner may change the mode back, as this test does) and rewrite the header's live
 * state, the lanes' records and the mailbox while the training process emits. The training process
 * must treat all of it as untrusted input: it never crashes, never hangs, never writes more than it
 * was given, and records exactly what its threads emitted (every event recorded or counted as
 * dropped).
 *
 * Reproduced before the collector kept its own copies: string_used set to 0xF0000000 and a mark
 * posted made the recorder thread intern the mark's text far outside the name store (a segfault);
 * lane tails moved past their heads made the recorder write a ring of garbage at every drain,
 * forever (a 64 MB tmpfs full in under 2 s, the trainer never ended). */
#define TESTUTIL_TAG "hwriter"
#include "testutil.h"

#include "../faults/faults.h"
#include "shmnames.h"

#include <sys/stat.h>

#define RECORDING_LIMIT (256ull << 20) /* the test fails before the recording grows past this */

static uint64_t file_size(const char *run)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/" TS_RECORDING_DIR "/" TS_RECORDING_FILE, run);
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* The segment mapped writable the way a hostile process of the user can: the collector leaves
 * it mode 0400 and every attach maps it read-only, but its owner (same user) may change the mode
 * back. W(p) is the writable address of p, a pointer into seg's read-only mapping. */
static uint8_t *rw_base;
static const uint8_t *ro_base;
#define W(p) ((__typeof__(p))(void *)(rw_base + ((const uint8_t *)(p)-ro_base)))

static void map_writable(const segment *seg, pid_t pid)
{
    char path[96];
    shm_path_of_pid(pid, path, sizeof path);
    ck_assert_msg(path[0], "pid %d has no segment, or several", (int)pid);
    ck_assert_int_eq(chmod(path, 0600), 0);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    void *m = mmap(NULL, segment_size(seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert(m != MAP_FAILED);
    close(fd);
    rw_base = m;
    ro_base = (const uint8_t *)segment_header(seg);
}

/* One round of scribbling: every field a monitor can reach gets a hostile value from the table,
 * a different one each round. */
static void scribble(segment *seg, unsigned round)
{
    static const uint64_t values[] = {
        0,          1,          0xF0000000u,    UINT32_MAX, UINT32_MAX - 1,
        1ull << 40, UINT64_MAX, UINT64_MAX - 1, 63,         4096};
    const size_t nv = sizeof values / sizeof values[0];
    uint64_t v = values[round % nv], w = values[(round * 7 + 3) % nv];
    ts_segment_header *h = W(segment_header(seg));
    atomic_store(&h->state, (uint32_t)v);
    atomic_store(&h->lanes_used, (uint32_t)w);
    atomic_store(&h->string_count, (uint32_t)v);
    atomic_store(&h->string_used, (uint32_t)(round & 1 ? 0xF0000000u : w));
    atomic_store(&h->events_recorded, v);
    atomic_store(&h->drops, w);
    atomic_store(&h->record_error, round % 5 == 4 ? 28u : 0u);
    atomic_store(&h->strings_recorded, (uint32_t)w);
    h->lane_count = (uint32_t)v;
    h->lane_events = (uint32_t)w;
    h->lanes_off = v;
    h->rings_off = w;
    h->string_max = (uint32_t)w;
    h->string_arena = (uint32_t)v;
    h->string_index_off = w;
    h->string_arena_off = v;
    const segment_geometry *g = segment_geometry_of(seg);
    for (uint32_t i = 0; i < g->lane_count; i++) {
        ts_lane *l = W(segment_lane(seg, i));
        /* tails past heads, heads far ahead, states and owners flipped */
        atomic_store(&l->head, round & 2 ? v : atomic_load(&l->head) + 5);
        atomic_store(&l->tail, atomic_load(&l->head) + w + 1);
        atomic_store(&l->state, (uint32_t)(round % 4));
        atomic_store(&l->tid, (uint32_t)v);
        atomic_store(&l->drops, w);
    }
    /* The index of the names, and the lengths in the arena, point anywhere. */
    uint32_t *index = segment_at(seg, g->string_index_off, (uint64_t)g->string_max * 4);
    ck_assert_ptr_nonnull(index);
    index = W(index);
    for (uint32_t i = 0; i < 64 && i < g->string_max; i++)
        __atomic_store_n(&index[i], (uint32_t)(v + i), __ATOMIC_RELAXED);
    uint32_t *arena = segment_at(seg, g->string_arena_off, 64);
    ck_assert_ptr_nonnull(arena);
    arena = W(arena);
    __atomic_store_n(&arena[round % 16], (uint32_t)w, __ATOMIC_RELAXED);
}

/* The header's fields restored from the layout validated at attach, so that the segment can be
 * attached again (a monitor's damage need not outlive it: the collector never reads it back). */
static void restore_layout(segment *seg)
{
    const segment_geometry *g = segment_geometry_of(seg);
    ts_segment_header *h = W(segment_header(seg));
    h->lane_count = g->lane_count;
    h->lane_events = g->lane_events;
    h->lanes_off = g->lanes_off;
    h->rings_off = g->rings_off;
    h->string_max = g->string_max;
    h->string_arena = g->string_arena;
    h->string_index_off = g->string_index_off;
    h->string_arena_off = g->string_arena_off;
}

START_TEST(scribbling_monitor)
{
    char *out = tmp_make();
    emitter e;
    /* Paced (200 events per thread per millisecond), so the recording stays small. */
    const char *extra[] = {"--burst", "200", "--lane-events", "4096", NULL};
    emitter_start(&e, out, 2, extra);
    segment *seg;
    char *why = NULL;
    ck_assert_msg(segment_attach(e.pid, 1, &seg, &why) == 0, "attach: %s", why);
    map_writable(seg, e.pid);

    unsigned marks_ok = 0, round;
    uint64_t end = faults_now_ns() + 2000000000ull;
    for (round = 0; faults_now_ns() < end; round++) {
        scribble(seg, round);
        /* A mark through the mailbox: its text is interned by the recorder thread, after the
         * header's name counters were rewritten. */
        uint64_t seq;
        if (mailbox_send(seg, TS_CMD_MARK, "scribbled", &seq, NULL) == 0) {
            int32_t status = -1;
            uint64_t wait_end = faults_now_ns() + 2000000000ull;
            while (!mailbox_reply(seg, seq, &status, NULL, 0) && faults_now_ns() < wait_end)
                faults_nap();
            marks_ok += status == 0;
        }
        ck_assert_msg(file_size(e.run) < RECORDING_LIMIT,
                      "the recording grew past %llu bytes: the recorder writes garbage",
                      (unsigned long long)RECORDING_LIMIT);
        ck_assert_msg(kill(e.pid, 0) == 0, "the training process died");
        faults_nap();
    }
    ck_assert(emitter_advances(&e, 10)); /* never blocked */
    restore_layout(seg);
    munmap(rw_base, segment_size(seg));
    segment_close(seg, 0);

    emitter_result r;
    emitter_finish_ok(&e, &r);
    ck_assert_uint_gt(marks_ok, 0);

    /* Exactly what was emitted: every counter recorded in order or counted as dropped, and the
     * process's own figures untouched by the header's. */
    counter_tally t;
    tally_counters(e.run, &t);
    ck_assert_uint_eq(t.bad_chunks, 0);
    ck_assert_int_eq(t.ordered, 1);
    ck_assert_uint_eq(t.total + t.lost, r.emitted);
    ck_assert_uint_eq(t.lost, r.dropped);
    ck_assert_uint_eq(t.marks, marks_ok);
    ck_assert_uint_ge(r.recorded, t.total);
    ck_assert_uint_le(r.recorded, t.events);
    /* The file holds the events and their names, nothing more. */
    ck_assert_uint_le(file_size(e.run), (t.events + 100000) * sizeof(ts_event));
    printf("scribbler: %u rounds in 2 s, %u marks answered; emitted %" PRIu64 " = %" PRIu64
           " recorded + %" PRIu64 " dropped; recording %" PRIu64 " bytes\n",
           round, marks_ok, r.emitted, t.total, t.lost, file_size(e.run));
    tmp_remove(out);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {scribbling_monitor, NULL};
    return faults_main("hostile_writer", FAULTS_SLOW ? 300 : 120, tests);
}
