/* termsight top on damaged, foreign and hostile segments (docs/reliability.md).
 *
 * A real segment is made through the model API (names interned, a lane with ops and steps, the
 * state collecting), its bytes kept, and damaged copies are put at /dev/shm/termsight-<pid>:
 * one bit flipped at both ends of every header field, cuts, growth, foreign bytes, a link, a
 * folder, a FIFO, and live state that validation cannot judge (counts, lane indexes, string
 * offsets at their limits). `termsight top PID --once --json` must print a snapshot (exit 0,
 * JSON) or one line of error (exit 1, nothing on stdout); never a signal, never a hang. Header
 * validation itself is swept byte by byte in process by tests/model/test_segment.c. */
#include "model/model_test.h"

#define TESTUTIL_TAG "hostile-seg"
#include "testutil.h"
#include "shmnames.h"
#include "cliutil.h"

#include <cJSON.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/stat.h>

static uint8_t *good; /* the intact segment's bytes */
static size_t good_len;
static pid_t seg_pid;

/* A segment with something to show: 2 lanes of 64 events, a few names, 3 steps of ops. */
static void segment_make(void)
{
    mt_init();
    seg_pid = mt_pid(1);
    segment_config cfg = mt_config(seg_pid);
    cfg.lane_count = 2;
    cfg.string_max = 64;
    cfg.string_arena = 4096;
    cfg.process = "trainer";
    segment *s = mt_create(&cfg);
    strtab *names = NULL;
    char *cause = NULL;
    ck_assert_int_eq(strtab_create(s, &names, &cause), 0);
    lane_writer w;
    ck_assert_int_eq(lane_claim(s, 77, &w), 0);
    uint32_t op = strtab_intern(names, "Default/fc1/MatMul-op1", 22, NULL);
    uint32_t type = strtab_intern(names, "MatMul", 6, NULL);
    uint64_t t = 1000;
    for (uint64_t step = 1; step <= 3; step++) {
        ts_event b = {.kind = TS_KIND_STEP_BEGIN,
                      .tid = 77,
                      .device = TS_DEVICE_HOST,
                      .begin_ns = t,
                      .end_ns = t,
                      .v0 = step};
        ck_assert_int_eq(lane_push(&w, &b), 1);
        for (int i = 0; i < 5; i++, t += 2000) {
            ts_event e = {.kind = TS_KIND_OP_RANGE,
                          .tid = 77,
                          .device = TS_DEVICE_HOST,
                          .name = op,
                          .type = type,
                          .begin_ns = t,
                          .end_ns = t + 1000};
            ck_assert_int_eq(lane_push(&w, &e), 1);
        }
        ts_event e = b;
        e.kind = TS_KIND_STEP_END;
        e.begin_ns = e.end_ns = t;
        ck_assert_int_eq(lane_push(&w, &e), 1);
    }
    atomic_store(&segment_header(s)->state, TS_STATE_COLLECTING);
    good_len = segment_size(s);
    good = malloc(good_len);
    ck_assert_ptr_nonnull(good);
    memcpy(good, segment_header(s), good_len);
    strtab_destroy(names);
    segment_close(s, 1);
}

static void segment_drop(void)
{
    mt_unlink_band();
    free(good);
}

static void shm_file(char *out, size_t cap)
{
    shm_plant_path(seg_pid, out, cap);
}

/* Puts bytes at the segment's name, mode 0600, replacing whatever is there. */
static void shm_put(const void *bytes, size_t len)
{
    char path[80];
    shm_file(path, sizeof path);
    remove(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

typedef struct tally {
    unsigned cases, shown, refused;
} tally;

/* Runs top on the segment's pid. want_ok: 1 must show, 0 must refuse, -1 either. */
static void top_check(const char *label, int want_ok, const char *says, tally *t)
{
    char *dir = tmp_make();
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)seg_pid);
    cli_result r;
    cli_run(dir, (const char *const[]){"top", pid, "--once", "--json", "--refresh-ms", "50", NULL},
            &r);
    t->cases++;
    if (r.status == 0) {
        ck_assert_msg(want_ok != 0, "%s: shown, should be refused: %s", label, r.out);
        cJSON *j = cJSON_Parse(r.out);
        ck_assert_msg(j != NULL, "%s: the snapshot is not JSON: %s", label, r.out);
        cJSON_Delete(j);
        t->shown++;
    } else {
        ck_assert_msg(want_ok != 1, "%s: refused: %s", label, r.err);
        ck_assert_msg(r.status == 1, "%s: exit %d: %s", label, r.status, r.err);
        ck_assert_msg(!strncmp(r.err, "termsight: top: cannot watch pid ", 33), "%s: %s", label,
                      r.err);
        ck_assert_msg(strchr(r.err, '\n') == r.err + r.err_len - 1, "%s: not one line: %s", label,
                      r.err);
        ck_assert_msg(!says || strstr(r.err, says), "%s: \"%s\" lacks \"%s\"", label, r.err, says);
        ck_assert_msg(r.out_len == 0, "%s: printed %s", label, r.out);
        t->refused++;
    }
    cli_result_free(&r);
    tmp_remove(dir);
}

/* ------------------------------------------------------------------------------------------ */

#define F(field) #field, offsetof(ts_segment_header, field), sizeof(((ts_segment_header *)0)->field)

/* The fields segment_validate judges: a flipped bit in any of them is refused. */
static const struct field {
    const char *name;
    size_t off, width;
} checked[] = {
    {F(magic)},
    {F(endian)},
    {F(major)},

    {F(event_size)},
    {F(lane_size)},
    {F(word_size)},
    {F(segment_size)},
    {F(pid)},
    {F(lane_count)},
    {F(lane_events)},
    {F(lanes_off)},
    {F(rings_off)},

    {F(string_arena)},
    {F(string_index_off)},
    {F(string_arena_off)},
    {F(mailbox_off)},
};

/* Fields read as they are, and two that a flip may leave valid (a larger header_size is a later
 * minor's; string_max 65 has the same layout as 64): shown or refused, never a crash. */
static const struct field unchecked[] = {
    {F(header_size)},
    {F(string_max)},
    {F(minor)},
    {F(uid)},
    {F(process)},
    {F(clock)},
    {F(start_realtime_ns)},
    {F(start_ns)},
    {F(run_folder)},
    {F(state)},
    {F(lanes_used)},
    {F(string_count)},
    {F(string_used)},
    {F(events_recorded)},
    {F(drops)},
    {F(bytes_recorded)},
    {F(string_drops)},
    {F(heartbeat_ns)},
    {F(window)},
    {F(record_error)},
    {F(record_notice)},
};

static void flip_field(const struct field *f, int refused, tally *t)
{
    /* The lowest bit of the first byte and the highest of the last: both ends of the value. */
    const size_t at[2] = {f->off, f->off + f->width - 1};
    const unsigned bit[2] = {0, 7};
    for (int i = 0; i < 2; i++) {
        uint8_t *b = malloc(good_len);
        ck_assert_ptr_nonnull(b);
        memcpy(b, good, good_len);
        b[at[i]] ^= (uint8_t)(1u << bit[i]);
        shm_put(b, good_len);
        char label[96];
        snprintf(label, sizeof label, "%s: bit %u of byte %zu flipped", f->name, bit[i], at[i]);
        top_check(label, refused ? 0 : -1, NULL, t);
        free(b);
    }
}

START_TEST(test_header_fields)
{
    tally t = {0};
    shm_put(good, good_len);
    top_check("the intact segment", 1, NULL, &t);
    for (size_t i = 0; i < sizeof checked / sizeof checked[0]; i++)
        flip_field(&checked[i], 1, &t);
    for (size_t i = 0; i < sizeof unchecked / sizeof unchecked[0]; i++)
        flip_field(&unchecked[i], 0, &t);
    fprintf(stderr, "header bit flips: %u tried: %u shown, %u refused, 0 crashed\n", t.cases,
            t.shown, t.refused);
}
END_TEST

/* Live state at its limits: validation passes; the observer must bound what it reads. */
static void set_u32(uint8_t *b, size_t off, uint32_t v)
{
    memcpy(b + off, &v, 4);
}

static void set_u64(uint8_t *b, size_t off, uint64_t v)
{
    memcpy(b + off, &v, 8);
}

enum live {
    L_LANES_USED,
    L_STRINGS,
    L_STRING_USED,
    L_HEAD,
    L_TAIL,
    L_LANE_STATE,
    L_INDEX,
    L_ARENA,
    L_RINGS,
    L_MAILBOX,
    L_STATE,
    L__COUNT
};

static const char *const live_names[L__COUNT] = {"lanes_used max",
                                                 "string_count max",
                                                 "string_used max",
                                                 "lane head max",
                                                 "lane tail past head",
                                                 "lane state 7",
                                                 "string index all 0xff",
                                                 "string arena all 0xff",
                                                 "rings all 0xff",
                                                 "mailbox all 0xff",
                                                 "state 99"};

START_TEST(test_live_state)
{
    const ts_segment_header *h = (const ts_segment_header *)good;
    uint8_t *b = malloc(good_len);
    ck_assert_ptr_nonnull(b);
    memcpy(b, good, good_len);
    size_t lane0 = h->lanes_off;
    switch (_i) {
    case L_LANES_USED:
        set_u32(b, offsetof(ts_segment_header, lanes_used), UINT32_MAX);
        break;
    case L_STRINGS:
        set_u32(b, offsetof(ts_segment_header, string_count), UINT32_MAX);
        break;
    case L_STRING_USED:
        set_u32(b, offsetof(ts_segment_header, string_used), UINT32_MAX);
        break;
    case L_HEAD:
        set_u64(b, lane0 + offsetof(ts_lane, head), UINT64_MAX);
        break;
    case L_TAIL:
        set_u64(b, lane0 + offsetof(ts_lane, tail), UINT64_MAX - 5);
        break;
    case L_LANE_STATE:
        set_u32(b, lane0 + offsetof(ts_lane, state), 7);
        break;
    case L_INDEX:
        memset(b + h->string_index_off, 0xff, (size_t)h->string_max * 4);
        break;
    case L_ARENA:
        memset(b + h->string_arena_off, 0xff, h->string_arena);
        break;
    case L_RINGS:
        memset(b + h->rings_off, 0xff, (size_t)h->lane_count * h->lane_events * sizeof(ts_event));
        break;
    case L_MAILBOX:
        memset(b + h->mailbox_off, 0xff, sizeof(ts_mailbox));
        break;
    default:
        set_u32(b, offsetof(ts_segment_header, state), 99);
        break;
    }
    shm_put(b, good_len);
    tally t = {0};
    top_check(live_names[_i], -1, NULL, &t);
    free(b);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */

enum foreign {
    FG_EMPTY,
    FG_ONE,
    FG_HEADER_LESS_1,
    FG_PAGE,
    FG_CUT_1,
    FG_GROWN,
    FG_ZERO,
    FG_PNG,
    FG_TEXT,
    FG_LINK,
    FG_DIR,
    FG_FIFO,
    FG_MISSING,
    FG__COUNT
};

static const struct {
    const char *label, *says;
} foreigns[FG__COUNT] = {
    {"zero-length", "too small"},
    {"one byte", "too small"},
    {"header minus one byte", "too small"},
    {"cut to one page", "header says"},
    {"cut by one byte", "header says"},
    {"grown by a page", "header says"},
    {"all zero", "bad magic"},
    {"a PNG", "too small"},
    {"a page of text", "bad magic"},
    {"a link to an intact copy", "symbolic links"},
    {"a folder", "not a regular file"},
    {"a FIFO", "not a regular file"},
    {"missing", "no such segment"},
};

START_TEST(test_foreign)
{
    static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    char path[80];
    shm_file(path, sizeof path);
    remove(path);
    rmdir(path);
    char *dir = tmp_make();
    char *copy = path_join(dir, "copy");
    uint8_t *b = calloc(1, good_len + 4096);
    ck_assert_ptr_nonnull(b);
    memcpy(b, good, good_len);
    switch (_i) {
    case FG_EMPTY:
        shm_put(b, 0);
        break;
    case FG_ONE:
        shm_put(b, 1);
        break;
    case FG_HEADER_LESS_1:
        shm_put(b, sizeof(ts_segment_header) - 1);
        break;
    case FG_PAGE:
        shm_put(b, 4096);
        break;
    case FG_CUT_1:
        shm_put(b, good_len - 1);
        break;
    case FG_GROWN:
        shm_put(b, good_len + 4096);
        break;
    case FG_ZERO:
        memset(b, 0, good_len);
        shm_put(b, good_len);
        break;
    case FG_PNG:
        shm_put(png, sizeof png);
        break;
    case FG_TEXT:
        memset(b, 'x', 4096);
        shm_put(b, 4096);
        break;
    case FG_LINK:
        file_write(copy, good, good_len);
        ck_assert_int_eq(symlink(copy, path), 0);
        break;
    case FG_DIR:
        ck_assert_int_eq(mkdir(path, 0700), 0);
        break;
    case FG_FIFO:
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        break;
    default:
        break;
    }
    tally t = {0};
    top_check(foreigns[_i].label, 0, foreigns[_i].says, &t);
    remove(path);
    free(b);
    free(copy);
    tmp_remove(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile segment");
    TCase *tc = tcase_create("top");
    tcase_add_unchecked_fixture(tc, segment_make, segment_drop);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_header_fields);
    tcase_add_loop_test(tc, test_live_state, 0, L__COUNT);
    tcase_add_loop_test(tc, test_foreign, 0, FG__COUNT);
    suite_add_tcase(s, tc);
    return tests_run(s);
}
