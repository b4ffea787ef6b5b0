/* libFuzzer target for what a monitor trusts about a segment it attaches to (model/segment.c,
 * lane.c, strtab.c, mailbox.c) and what `termsight top` then reads (tui/source.c, the snapshot).
 *
 * The input is a segment image, from its first byte; an image shorter than the size its header
 * claims (at most IMAGE_MAX) is extended with zeros, so that mutated headers of a real segment
 * stay small seeds. Bytes past that size are the control object's (the mailbox a monitor writes;
 * zeros when there are none). Three passes:
 * - segment_validate over exactly the input's bytes (ASan catches a read past them);
 * - the image as a shm object attached by name, read-only, then every lane observed and peeked,
 *   names fetched by any id; attached again for commands, the mailbox read and written as a
 *   frontend and a collector would;
 * - the same object under this process's pid through source_open, polled, and drawn as
 *   `termsight top --once` and `--json` draw it.
 * Promises: a bad image is refused with a message; from a valid one every pointer handed out lies
 * inside the mapping, names fit the arena, and observing copies at most one ring per lane. */
#include "fuzz.h"
#include "job.h"
#include "tui_internal.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define IMAGE_MAX (1u << 20)

#define CTL_BYTES 4096u /* the control object's size (segment.c) */

static char shm_name[64], ctl_name[80];
static int shm_fd = -1, ctl_fd = -1;
static FILE *devnull;

static void remove_shm(void)
{
    shm_unlink(shm_name);
    shm_unlink(ctl_name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* A name source_open looks for: this process's pid (with the random part it has when the
     * collector makes it). */
    snprintf(shm_name, sizeof shm_name, "/" TS_SEGMENT_PREFIX "%d-0123456789abcdef", (int)getpid());
    snprintf(ctl_name, sizeof ctl_name, "%s-ctl", shm_name);
    shm_fd = shm_open(shm_name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ctl_fd = shm_open(ctl_name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    devnull = fopen("/dev/null", "w");
    if (shm_fd < 0 || ctl_fd < 0 || !devnull) {
        perror("fuzz_segment: setup");
        abort();
    }
    atexit(remove_shm);
    return 0;
}

static int inside(const segment *s, const void *p, uint64_t len)
{
    const uint8_t *base = (const uint8_t *)segment_header(s), *q = p;
    return q >= base && (uint64_t)(q - base) <= segment_size(s) &&
           len <= segment_size(s) - (uint64_t)(q - base);
}

static void check_names(const segment *s, uint32_t extra)
{
    const ts_segment_header *h = segment_header(s);
    uint32_t ids[] = {0, 1, 2, extra, h->string_max - 1, h->string_max, UINT32_MAX};
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) {
        uint32_t len = 0;
        const char *name = strtab_get(s, ids[k], &len);
        if (!name)
            continue;
        FUZZ_CHECK(len <= TS_NAME_MAX && inside(s, name, (uint64_t)len + 1));
        for (uint32_t i = 0; i < len; i++)
            fuzz_sink ^= (unsigned char)name[i];
    }
}

static void check_lanes(const segment *s)
{
    const ts_segment_header *h = segment_header(s);
    static ts_event out[256];
    for (uint32_t i = 0; i <= h->lane_count && i < 64; i++) {
        ts_lane *l = segment_lane(s, i);
        ts_event *ring = segment_ring(s, i);
        FUZZ_CHECK((l == NULL) == (i >= h->lane_count) && (ring == NULL) == (l == NULL));
        if (!l)
            continue;
        FUZZ_CHECK(inside(s, l, sizeof *l) &&
                   inside(s, ring, (uint64_t)h->lane_events * sizeof(ts_event)));
        lane_run run;
        size_t n = lane_peek(s, i, &run);
        FUZZ_CHECK(n == lane_run_count(&run) && n <= h->lane_events);
        FUZZ_CHECK(!run.na || inside(s, run.a, run.na * sizeof(ts_event)));
        FUZZ_CHECK(!run.nb || inside(s, run.b, run.nb * sizeof(ts_event)));
        uint64_t cursor = 0, missed = 0;
        for (int round = 0; round < 2; round++) {
            size_t got = lane_observe(s, i, &cursor, out, sizeof out / sizeof out[0], &missed);
            FUZZ_CHECK(got <= sizeof out / sizeof out[0]);
            for (size_t k = 0; k < got; k++)
                check_names(s, out[k].name);
        }
    }
}

/* What termsight hang and top read of what the process is inside: bounded, names checked. */
static void check_inflight(const segment *s)
{
    inflight_summary in;
    inflight_read(s, UINT64_MAX / 2, &in);
    FUZZ_CHECK(in.nranges <= INFLIGHT_RANGES && in.ncomms <= TS_COMM_SLOTS);
    FUZZ_CHECK(in.main >= -1 && in.main < (int)in.nranges);
    for (uint32_t i = 0; i < in.nranges; i++)
        check_names(s, in.ranges[i].name);
    for (uint32_t i = 0; i < in.ncomms; i++)
        check_names(s, in.comms[i].name);
    char text[64];
    job_inside_text(s, &in, UINT64_MAX / 2, text, sizeof text);
    FUZZ_CHECK(strlen(text) < sizeof text);
}

static void check_mailbox(const segment *s)
{
    char arg[TS_MAILBOX_ARG], msg[64];
    mailbox_state st = {0};
    uint64_t seq = 0;
    uint32_t cmd = 0;
    for (int i = 0; i < 2; i++)
        if (mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg) == 1)
            FUZZ_CHECK(strlen(arg) < sizeof arg);
    int32_t status;
    if (mailbox_reply(s, seq, &status, msg, sizeof msg) == 1)
        FUZZ_CHECK(strlen(msg) < sizeof msg);
    char *cause = NULL;
    int rc = mailbox_send(s, TS_CMD_MARK, "fuzz", &seq, &cause);
    FUZZ_CHECK_CAUSE(rc, cause);
    free(cause);
    mailbox_answer(s, seq, 0, "done");
}

/* What `termsight top` does with the segment of pid, as far as it reads it. */
static void watch(void)
{
    source *src = NULL;
    char *cause = NULL;
    int rc = source_open(getpid(), &src, &cause);
    FUZZ_CHECK_CAUSE(rc, cause);
    free(cause);
    if (rc != 0)
        return;
    for (int i = 0; i < 2; i++) {
        source_poll(src, (uint64_t)i * 1000000000ull + 1);
        source_resync(src);
    }
    const source_status *st = source_status_of(src);
    FUZZ_CHECK(strlen(st->process) < sizeof st->process &&
               strlen(st->run_folder) < sizeof st->run_folder);
    panel_ctx pc = {.a = source_analysis(src), .tl = source_timeline(src), .st = st};
    snapshot_text(devnull, &pc, &glyphs_utf8, 100);
    snapshot_json(devnull, &pc);
    source_close(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *exact = malloc(size ? size : 1);
    if (!exact)
        return 0;
    memcpy(exact, data, size);
    char *cause = NULL;
    int rc = segment_validate(exact, size, &cause);
    FUZZ_CHECK_CAUSE(rc, cause);
    free(cause);
    free(exact);

    /* The image, zero-extended to what the header claims; what lies past it, the control
     * object's first bytes. */
    uint64_t want = size;
    if (size >= sizeof(ts_segment_header)) {
        uint64_t claimed;
        memcpy(&claimed, data + offsetof(ts_segment_header, segment_size), sizeof claimed);
        if (claimed <= IMAGE_MAX)
            want = claimed;
    }
    uint8_t *image = calloc(1, want ? want : 1);
    uint8_t ctl[CTL_BYTES] = {0};
    if (!image)
        return 0;
    memcpy(image, data, size < want ? size : want);
    if (size > want)
        memcpy(ctl, data + want, size - want < sizeof ctl ? size - want : sizeof ctl);
    fuzz_fd_fill(shm_fd, image, want);
    fuzz_fd_fill(ctl_fd, ctl, sizeof ctl);

    segment *s = NULL;
    cause = NULL;
    rc = segment_attach_name(shm_name, 0, &s, &cause);
    FUZZ_CHECK_CAUSE(rc, cause);
    free(cause);
    if (rc == 0) {
        FUZZ_CHECK(segment_size(s) == want);
        check_lanes(s);
        check_inflight(s);
        check_names(s, 3);
        segment_close(s, 0);
        cause = NULL;
        rc = segment_attach_name(shm_name, 1, &s, &cause);
        FUZZ_CHECK(rc == 0);
        check_mailbox(s);
        segment_close(s, 0);
        /* Under this process's pid, for the monitor's own attach. */
        int32_t pid = (int32_t)getpid();
        memcpy(image + offsetof(ts_segment_header, pid), &pid, sizeof pid);
        fuzz_fd_fill(shm_fd, image, want);
        watch();
    }
    free(image);
    return 0;
}
