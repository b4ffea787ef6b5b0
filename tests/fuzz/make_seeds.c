/* Writes the seed corpora of the fuzz targets into DIR/<target>/ (tests/fuzz/corpus in the
 * repository): recordings and a segment image made by the real writers, and small hand-made
 * inputs for the others, each a few KB at most. Run it again when a format changes:
 *   build-fuzz/tests/fuzz/fuzz_seeds tests/fuzz/corpus */
#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *root;

static void fail(const char *what, const char *why)
{
    fprintf(stderr, "fuzz_seeds: %s: %s\n", what, why ? why : strerror(errno));
    exit(1);
}

static void put(const char *target, const char *name, const void *data, size_t size)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        fail(path, NULL);
    snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        fail(path, NULL);
}

static void *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail(path, NULL);
    static char buf[1 << 16];
    *size = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return buf;
}

/* ---- Recordings ------------------------------------------------------------------------- */

static ts_event event(uint16_t kind, uint32_t name, uint32_t type, uint64_t t)
{
    return (ts_event){.kind = kind,
                      .tid = 7,
                      .device = TS_DEVICE_HOST,
                      .name = name,
                      .type = type,
                      .begin_ns = t,
                      .end_ns = t + 100,
                      .v0 = 3};
}

static void recording_window(const char *dir, uint64_t t)
{
    recording_meta meta = {.major = TS_RECORDING_MAJOR, .minor = TS_RECORDING_MINOR, .pid = 42};
    snprintf(meta.process, sizeof meta.process, "train");
    snprintf(meta.clock, sizeof meta.clock, "tsc");
    snprintf(meta.host, sizeof meta.host, "host");
    recording_writer *w;
    char *why = NULL;
    if (recording_writer_open(dir, &meta, &w, &why) != 0)
        fail("recording", why);
    const char *names[] = {"", "<names table full>", "MatMul", "aten::conv2d", "step\n\x01\xff"};
    uint32_t lens[] = {0, 18, 6, 12, 7};
    ts_event ev[] = {
        event(TS_KIND_COLLECT_START, 0, 0, t),     event(TS_KIND_OP_RANGE, 2, 3, t + 10),
        event(TS_KIND_KERNEL, 3, 2, t + 20),       event(TS_KIND_STEP_BEGIN, 0, 0, t + 30),
        event(TS_KIND_NVTX_RANGE, 4, 0, t + 40),   event(TS_KIND_QUEUE_SAMPLE, 9, 0, t + 50),
        event(TS_KIND_COLLECT_STOP, 0, 0, t + 60),
    };
    size_t n = sizeof ev / sizeof ev[0];
    if (recording_append_strings(w, 0, 5, names, lens, &why) != 0 ||
        recording_append_events(w, (lane_run){.a = ev, .na = 3, .b = ev + 3, .nb = n - 3}, &why) !=
            0 ||
        recording_writer_close(w, &why) != 0)
        fail("recording", why);
}

static void recordings(void)
{
    char dir[] = "/tmp/termsight-seeds-XXXXXX";
    if (!mkdtemp(dir))
        fail("mkdtemp", NULL);
    char file[256];
    snprintf(file, sizeof file, "%s/%s", dir, TS_RECORDING_FILE);
    recording_window(dir, 1000);
    size_t size;
    unsigned char *one = slurp(file, &size);
    put("fuzz_recording", "one-window.tsr", one, size);
    put("fuzz_recording", "cut-short.tsr", one, size - 37);
    one[size / 2] ^= 0x40;
    put("fuzz_recording", "flipped-byte.tsr", one, size);
    recording_window(dir, 5000); /* a second writer appends a second window */
    unsigned char *two = slurp(file, &size);
    put("fuzz_recording", "two-windows.tsr", two, size);
    unlink(file);
    rmdir(dir);
}

/* ---- A segment image -------------------------------------------------------------------- */

/* The image without its trailing zeros (fuzz_segment zero-extends it to the header's size). */
static void put_image(const char *name, const uint8_t *base, size_t size)
{
    while (size > sizeof(ts_segment_header) && !base[size - 1])
        size--;
    put("fuzz_segment", name, base, size);
}

static void segments(void)
{
    segment_config cfg = {.pid = 0x7ffffff0,
                          .process = "train",
                          .run_folder = "/tmp/run",
                          .clock = "tsc",
                          .lane_count = 1,
                          .lane_events = 64,
                          .string_max = 16,
                          .string_arena = 4096};
    segment *s;
    strtab *t = NULL;
    char *why = NULL;
    if (segment_create(&cfg, &s, &why) != 0 || strtab_create(s, &t, &why) != 0)
        fail("segment", why);
    const uint8_t *base = (const uint8_t *)segment_header(s);
    put("fuzz_segment", "header-only.seg", base, sizeof(ts_segment_header));

    uint32_t mm = strtab_intern(t, "MatMul", 6, NULL);
    uint32_t odd = strtab_intern(t, "n\x01\xff\n", 4, NULL);
    lane_writer w;
    digest *d = digest_create(s, NULL, NULL, NULL, NULL);
    if (lane_claim(s, 7, &w) != 0 || !d)
        fail("segment", "no lane");
    for (uint64_t i = 0; i < 70; i++) { /* more than one ring: the writer laps */
        static const uint16_t kinds[] = {TS_KIND_STEP_BEGIN, TS_KIND_OP_RANGE, TS_KIND_STEP_END};
        ts_event ev = {.kind = kinds[i % 3],
                       .tid = 7,
                       .device = TS_DEVICE_HOST,
                       .name = i % 3 == 1 ? (i % 2 ? mm : odd) : 0,
                       .begin_ns = i * 10,
                       .end_ns = i * 10 + (i % 3 == 1 ? 5 : 0),
                       .v0 = i / 3 + 1};
        lane_push(&w, &ev);
        digest_feed(d, &ev, 1); /* the recorder's part: the boards */
    }
    digest_publish(d, 1000, 1);
    digest_destroy(d);
    ts_segment_header *h = segment_header(s);
    atomic_store(&h->lanes_used, 1);
    atomic_store(&h->state, TS_STATE_COLLECTING);
    put_image("names-and-events.seg", base, segment_size(s));
    uint64_t seq;
    if (mailbox_send(s, TS_CMD_MARK, "epoch 1", &seq, &why) != 0)
        fail("segment", why);
    /* The segment, then its control object (fuzz_segment reads what lies past the segment as
     * the mailbox). */
    size_t size = segment_size(s), ctl = sizeof(ts_mailbox);
    uint8_t *both = malloc(size + ctl);
    if (!both)
        fail("segment", "out of memory");
    memcpy(both, base, size);
    memcpy(both + size, segment_mailbox(s), ctl);
    put("fuzz_segment", "mailbox-pending.seg", both, size + ctl);
    free(both);
    strtab_destroy(t);
    segment_close(s, 1);
}

/* ---- /proc text, NVTX scripts, options, screen text ------------------------------------ */

#define PUT_TEXT(target, name, text) put(target, name, text, sizeof text - 1)

static void procfs(void)
{
    PUT_TEXT("fuzz_procfs", "stat",
             "cpu  4705 356 584 3699 23 23 0 0 0 0\ncpu0 1393 280 290 1218 7 14 0 0 0 0\n"
             "intr 114930 41 0 0\nctxt 1990473\nbtime 1062191376\nprocesses 2915\n"
             "procs_running 1\nprocs_blocked 0\n");
    PUT_TEXT("fuzz_procfs", "task-stat",
             "1234 (a) b (c)) S 1 1234 1234 0 -1 4194304 200 0 0 0 15 7 0 0 20 0 3 0 100 "
             "10000000 500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n");
    PUT_TEXT("fuzz_procfs", "status",
             "Name:\ttrain\nState:\tR (running)\nVmPeak:\t  10000 kB\nVmHWM:\t    4096 kB\n"
             "VmRSS:\t    2048 kB\nThreads:\t3\n");
    PUT_TEXT("fuzz_procfs", "comm", "\x0fpt_data_worker\n");
}

/* NVTX script ops (fuzz_nvtx.c's step_call), and attribute encodings (next_attrs). */
enum {
    MARK_A,
    MARK_W,
    MARK_EX,
    PUSH_A,
    PUSH_W,
    PUSH_EX,
    POP,
    START_A,
    START_W,
    START_EX,
    END,
    THREAD_A,
    THREAD_W,
    DOMAIN_A,
    DOMAIN_W,
    REGISTER_A,
    REGISTER_W,
    DMARK,
    DPUSH,
    DPOP,
    DSTART,
    DEND,
    TOGGLE,
    DESTROY,
    PATTERN
};
enum { ASCII = 1 << 1, UNICODE = 2 << 1, REGISTERED = 3 << 1 };

static void nvtx(void)
{
    static const uint8_t steps[] = {
        PUSH_A, 6,   's',     't', 'e',    'p', ' ',    '1', PUSH_A, 7,   'f', 'o', 'r', 'w',
        'a',    'r', 'd',     POP, PUSH_A, 8,   'b',    'a', 'c',    'k', 'w', 'a', 'r', 'd',
        POP,    POP, START_A, 14,  'P',    'r', 'o',    'f', 'i',    'l', 'e', 'r', 'S', 't',
        'e',    'p', '#',     '3', END,    0,   MARK_A, 4,   'm',    'a', 'r', 'k'};
    put("fuzz_nvtx", "steps-and-phases", steps, sizeof steps);
    static const uint8_t wide[] = {PUSH_W, 3,    'M',      0,    0,    0,      0xe9, 0,
                                   0,      0,    0x00,     0xf6, 0x01, 0, /* M, é, a U+1F600 */
                                   PUSH_W, 2,    0x00,     0xd8, 0,    0,      0xff, 0xff,
                                   0xff,   0xff, /* a surrogate, -1 */
                                   POP,    POP,  THREAD_W, 5,    2,    'l',    0,    0,
                                   0,      'o',  0,        0,    0,    MARK_W, 1,    0,
                                   0,      0x11, 0};
    put("fuzz_nvtx", "wide-names", wide, sizeof wide);
    static const uint8_t attrs[] = {DOMAIN_A,   4,     'n',        'c',        'c',     'l',
                                    REGISTER_A, 2,     2,          'i',        'o',     DPUSH,
                                    2,          ASCII, 9,          'a',        'l',     'l',
                                    'r',        'e',   'd',        'u',        'c',     'e',
                                    DPOP,       2,     PUSH_EX,    REGISTERED, 2,       PUSH_EX,
                                    UNICODE,    1,     'x',        0,          0,       0,
                                    POP,        POP,   START_EX,   ASCII | 1,  8,       0,
                                    1,          'y', /* a size too small for the message */
                                    DSTART,     3,     REGISTERED, 1,          DEND,    3,
                                    DMARK,      0,     0xff,       TOGGLE,     MARK_EX, ASCII,
                                    1,          'z',   TOGGLE,     DESTROY,    PATTERN, 6,
                                    '^',        '(',   'a',        '|',        'b',     '$'};
    put("fuzz_nvtx", "domains-and-attributes", attrs, sizeof attrs);
}

static void options(void)
{
    /* First byte even: a command line (second byte: ls, dump, analyse, top, run, demo). */
    PUT_TEXT("fuzz_options", "run",
             "\0\4-o\0out\0--steps\0"
             "3-5\0--sample-ms\0"
             "50\0"
             "--step-pattern\0^step\0--\0python3\0train.py");
    PUT_TEXT("fuzz_options", "analyse",
             "\0\2--op=MatMul\0--timeline-limit\0001e3\0--peak-tflops=0.5\0--\0-rec");
    PUT_TEXT("fuzz_options", "dump", "\0\1-k\0op\0--kind=kernel\0--limit\00010\0rec");
    PUT_TEXT("fuzz_options", "top", "\0\3--refresh-ms=250\0--once\0--json\0--\0-1");
    PUT_TEXT("fuzz_options", "demo", "\0\5--headless\0--seconds\0003\0--workers\0004\0-o\0d");
    PUT_TEXT("fuzz_options", "ls", "\0\0--clean");
    /* First byte odd: environment values, in fuzz_options.c's `vars` order. */
    PUT_TEXT("fuzz_options", "environment",
             "\1out\0000\00065536\0008\000100\000500\0fwd\0bwd\0002-4\0005\00010\0^(step|it)");
}

static void canvas(void)
{
    PUT_TEXT("fuzz_tui_canvas", "names",
             "\x05\x14MatMul \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"
             " \x1b[31m\xc3\x28\xed\xa0\x80\t\x7f");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fputs("usage: fuzz_seeds DIR\n", stderr);
        return 2;
    }
    root = argv[1];
    if (mkdir(root, 0755) != 0 && errno != EEXIST)
        fail(root, NULL);
    recordings();
    segments();
    procfs();
    nvtx();
    options();
    canvas();
    return 0;
}
