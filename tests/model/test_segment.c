/* Segment: create/attach round trips on real shm_open, read-only mappings, damaged and foreign
 * segments refused with a message (never a crash), and the bounds-checked accessor. */
#include "model_test.h"
#include "segment_test.h"

#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define PAGE 4096u

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                    */
/* ------------------------------------------------------------------------------------------ */

static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void shm_path(pid_t pid, char *out, size_t cap)
{
    shm_path_of_pid(pid, out, cap);
    ck_assert_msg(out[0], "pid %d has no segment, or several", (int)pid);
}

static char *tmp_make(void)
{
    char *dir;
    ck_assert_int_ge(asprintf(&dir, "%s/seg-XXXXXX", mt_tmp_base()), 0);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
    return dir;
}

static int tmp_unlink(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void tmp_remove(char *dir)
{
    nftw(dir, tmp_unlink, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static void file_write(const char *path, const void *bytes, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
    ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
    ck_assert_int_eq(close(fd), 0);
}

/* The permissions of the mapping that holds addr, from /proc/self/maps ("r--s", "rw-s"). */
static void mapping_perms(const void *addr, char perms[5])
{
    FILE *f = fopen("/proc/self/maps", "re");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char p[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, p) == 3 && (uintptr_t)addr >= lo &&
            (uintptr_t)addr < hi) {
            memcpy(perms, p, 5);
            found = 1;
        }
    }
    fclose(f);
    ck_assert_msg(found, "no mapping holds %p", addr);
}

/* Asks the kernel to store one byte at addr: -1/EFAULT when the page is not writable, without
 * taking a signal. Returns 0 when the store happened. */
static int kernel_store(void *addr, char byte)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq(write(p[1], &byte, 1), 1);
    ssize_t r = read(p[0], addr, 1);
    int e = errno;
    close(p[0]);
    close(p[1]);
    if (r == 1)
        return 0;
    ck_assert_int_eq(r, -1);
    return e;
}

/* ------------------------------------------------------------------------------------------ */
/* Create and attach                                                                          */
/* ------------------------------------------------------------------------------------------ */

static void check_header(const ts_segment_header *h, const segment_config *cfg, uint64_t size)
{
    ck_assert_uint_eq(h->magic, TS_SEGMENT_MAGIC);
    ck_assert_uint_eq(h->endian, 0x01020304u);
    ck_assert_uint_eq(h->major, TS_SEGMENT_MAJOR);
    ck_assert_uint_eq(h->minor, TS_SEGMENT_MINOR);
    ck_assert_uint_eq(h->header_size, sizeof(ts_segment_header));
    ck_assert_uint_eq(h->event_size, sizeof(ts_event));
    ck_assert_uint_eq(h->lane_size, sizeof(ts_lane));
    ck_assert_uint_eq(h->word_size, sizeof(void *));
    ck_assert_uint_eq(h->segment_size, size);
    ck_assert_int_eq(h->pid, cfg->pid);
    ck_assert_uint_eq(h->uid, geteuid());
    ck_assert_str_eq(h->process, cfg->process);
    ck_assert_str_eq(h->clock, cfg->clock);
    ck_assert_str_eq(h->run_folder, cfg->run_folder);
    ck_assert_uint_eq(h->start_ns, cfg->start_ns);
    ck_assert_uint_eq(h->lane_count, cfg->lane_count);
    ck_assert_uint_eq(h->lane_events, cfg->lane_events);
    ck_assert_uint_eq(h->string_max, cfg->string_max);
    ck_assert_uint_eq(h->string_arena, cfg->string_arena);
    ck_assert_uint_eq(atomic_load(&h->state), TS_STATE_IDLE);
    ck_assert_uint_eq(atomic_load(&h->lanes_used), 0);
    ck_assert_uint_eq(atomic_load(&h->drops), 0);

    /* Regions: page-aligned where promised, in order, not overlapping, inside the segment. */
    ck_assert_uint_ge(h->lanes_off, sizeof(ts_segment_header));
    ck_assert_uint_eq(h->lanes_off % PAGE, 0);
    ck_assert_uint_eq(h->rings_off % PAGE, 0);
    ck_assert_uint_eq(h->string_arena_off % PAGE, 0);
    ck_assert_uint_eq(h->mailbox_off, 0); /* the mailbox is in the control object */
    ck_assert_uint_le(h->lanes_off + (uint64_t)h->lane_count * sizeof(ts_lane), h->rings_off);
    ck_assert_uint_le(h->rings_off + (uint64_t)h->lane_count * h->lane_events * sizeof(ts_event),
                      h->string_index_off);
    ck_assert_uint_le(h->string_index_off + (uint64_t)h->string_max * sizeof(uint32_t),
                      h->string_arena_off);
    ck_assert_uint_le(h->string_arena_off + h->string_arena, size);
}

START_TEST(test_create_attach_round_trip)
{
    pid_t pid = mt_pid(0);
    segment_config cfg = mt_config(pid);
    cfg.process = "train.py --lr 0.1";
    cfg.run_folder = "/data/runs/2024 run \"a\"";
    cfg.clock = "tsc";
    cfg.start_ns = 987654321012345ull;
    cfg.lane_count = 3;
    cfg.lane_events = 128;
    cfg.string_max = 100;
    cfg.string_arena = 5000;

    /* With no umask to help, the mode must still come out 0600. */
    mode_t old_mask = umask(0);
    uint64_t before = realtime_ns();
    segment *s = mt_create(&cfg);
    uint64_t after = realtime_ns();
    umask(old_mask);

    char want[64];
    snprintf(want, sizeof want, "%s", segment_shm_name(s));
    check_name(want, pid);
    ts_segment_header *h = segment_header(s);
    check_header(h, &cfg, segment_size(s));
    ck_assert_uint_ge(h->start_realtime_ns, before);
    ck_assert_uint_le(h->start_realtime_ns, after);

    char path[96];
    shm_path(pid, path, sizeof path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    ck_assert_uint_eq(st.st_mode & 07777, 0400); /* read-only but for the owner's own mapping */
    ck_assert_uint_eq(st.st_uid, geteuid());
    ck_assert_uint_eq((uint64_t)st.st_size, segment_size(s));

    /* Both attach modes see the same header, and the same object: a store through the owner's
     * mapping shows through the others. */
    for (int writable = 0; writable <= 1; writable++) {
        segment *a = mt_attach(pid, writable);
        ck_assert_ptr_ne(segment_header(a), h);
        ck_assert_uint_eq(segment_size(a), segment_size(s));
        check_header(segment_header(a), &cfg, segment_size(s));
        ck_assert_uint_eq(segment_header(a)->start_realtime_ns, h->start_realtime_ns);
        atomic_store(&h->state, TS_STATE_COLLECTING);
        ck_assert_uint_eq(atomic_load(&segment_header(a)->state), TS_STATE_COLLECTING);
        atomic_store(&h->state, TS_STATE_IDLE);
        segment_close(a, 0);
    }
    /* Closing the attachments removed nothing. */
    ck_assert(mt_shm_exists(pid));

    segment *named = NULL;
    char *cause = NULL;
    ck_assert_int_eq(segment_attach_name(want, 0, &named, &cause), 0);
    ck_assert_int_eq(segment_header(named)->pid, pid);
    segment_close(named, 0);

    segment_close(s, 1);
    ck_assert(!mt_shm_exists(pid));
    ck_assert_int_eq(segment_attach(pid, 0, &named, &cause), -1);
    ck_assert_ptr_null(named);
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "pid %d", (int)pid);
    ck_assert_msg(strstr(cause, "no such segment") && strstr(cause, pid_text), "%s", cause);
    free(cause);
}
END_TEST

START_TEST(test_long_texts_cut)
{
    char process[200], folder[3000], clock[100];
    memset(process, 'p', sizeof process - 1);
    process[sizeof process - 1] = 0;
    memset(folder, 'f', sizeof folder - 1);
    folder[sizeof folder - 1] = 0;
    memset(clock, 'c', sizeof clock - 1);
    clock[sizeof clock - 1] = 0;

    pid_t pid = mt_pid(1);
    segment_config cfg = mt_config(pid);
    cfg.process = process;
    cfg.run_folder = folder;
    cfg.clock = clock;
    segment *s = mt_create(&cfg);
    ts_segment_header *h = segment_header(s);
    ck_assert_uint_eq(strlen(h->process), sizeof h->process - 1);
    ck_assert_uint_eq(strlen(h->run_folder), sizeof h->run_folder - 1);
    ck_assert_uint_eq(strlen(h->clock), sizeof h->clock - 1);
    ck_assert_int_eq(memcmp(h->process, process, sizeof h->process - 1), 0);
    /* Still a valid segment for readers. */
    segment *a = mt_attach(pid, 0);
    segment_close(a, 0);
    segment_close(s, 1);

    /* NULL texts are empty strings. */
    cfg.process = cfg.run_folder = cfg.clock = NULL;
    s = mt_create(&cfg);
    ck_assert_str_eq(segment_header(s)->process, "");
    ck_assert_str_eq(segment_header(s)->run_folder, "");
    ck_assert_str_eq(segment_header(s)->clock, "");
    segment_close(s, 1);
}
END_TEST

static const struct bad_config {
    const char *label;
    uint32_t lane_count, lane_events, string_max, string_arena;
    const char *expect;
} bad_configs[] = {
    {"no lanes", 0, 64, 16, 4096, "lane count"},
    {"too many lanes", 4097, 64, 16, 4096, "lane count"},
    {"lane not a power of two", 1, 100, 16, 4096, "lane size"},
    {"lane too short", 1, 32, 16, 4096, "lane size"},
    {"lane too long", 1, 1u << 25, 16, 4096, "lane size"},
    {"lane of zero", 1, 0, 16, 4096, "lane size"},
    {"string table too small", 1, 64, 15, 4096, "string table size"},
    {"string table too large", 1, 64, (1u << 24) + 1, 4096, "string table size"},
    {"arena too small", 1, 64, 16, 4095, "string arena"},
    {"arena too large", 1, 64, 16, (1u << 30) + 1, "string arena"},
};

START_TEST(test_create_refuses_bad_config)
{
    const struct bad_config *b = &bad_configs[_i];
    pid_t pid = mt_pid(2);
    segment_config cfg = mt_config(pid);
    cfg.lane_count = b->lane_count;
    cfg.lane_events = b->lane_events;
    cfg.string_max = b->string_max;
    cfg.string_arena = b->string_arena;
    segment *s = (segment *)&cfg; /* must be reset to NULL */
    char *cause = NULL;
    ck_assert_int_eq(segment_create(&cfg, &s, &cause), -1);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(cause);
    ck_assert_msg(strstr(cause, b->expect), "%s: \"%s\" lacks \"%s\"", b->label, cause, b->expect);
    free(cause);
    ck_assert(!mt_shm_exists(pid));
    /* cause may be NULL */
    ck_assert_int_eq(segment_create(&cfg, &s, NULL), -1);
}
END_TEST

START_TEST(test_read_only_attach)
{
    pid_t pid = mt_pid(3);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    segment *ro = mt_attach(pid, 0);
    segment *rw = mt_attach(pid, 1);
    char perms[5];

    /* Both attaches map the segment read-only: only the control object is writable, and only
     * for a writable attach. */
    ck_assert_ptr_null(segment_mailbox(ro));
    segment *both[2] = {ro, rw};
    for (int k = 0; k < 2; k++) {
        mapping_perms(segment_header(both[k]), perms);
        ck_assert_msg(perms[0] == 'r' && perms[1] == '-' && perms[3] == 's', "%s: %s",
                      k ? "writable attach" : "read-only attach", perms);
        ck_assert_int_eq(kernel_store(segment_header(both[k])->record_notice, 'Z'), EFAULT);
        const segment_geometry *g = segment_geometry_of(both[k]);
        ck_assert_int_eq(kernel_store(segment_at(both[k], g->string_arena_off, 1), 'Z'), EFAULT);
    }
    ts_mailbox *m = segment_mailbox(rw);
    ck_assert_ptr_nonnull(m);
    mapping_perms(m, perms);
    ck_assert_msg(perms[0] == 'r' && perms[1] == 'w' && perms[3] == 's', "mailbox: %s", perms);
    ck_assert_int_eq(kernel_store(m->arg, 'Z'), 0);
    /* Shared, not private: the owner sees the store. */
    ck_assert_int_eq(segment_mailbox(s)->arg[0], 'Z');
    /* The segment is read-only for every process but its owner's mapping; the control object
     * is the owner's alone. */
    char path[96];
    shm_path(pid, path, sizeof path);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0400);
    strcat(path, "-ctl");
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_uint_eq(st.st_mode & 07777, 0600);

    segment_close(ro, 0);
    segment_close(rw, 0);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_unlink_keeps_mapping)
{
    pid_t pid = mt_pid(4);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    segment_unlink(s);
    ck_assert(!mt_shm_exists(pid));
    /* Threads still finishing an event call may write into it. */
    ts_segment_header *h = segment_header(s);
    atomic_store(&h->events_recorded, 42);
    ck_assert_uint_eq(atomic_load(&h->events_recorded), 42);
    ck_assert_str_eq(h->process, cfg.process);
    segment_close(s, 1); /* unlinking a name already gone is harmless */
    segment_close(NULL, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Damaged, truncated and foreign segments                                                    */
/* ------------------------------------------------------------------------------------------ */

enum dmg_op {
    D_NONE,      /* the intact copy */
    D_SET,       /* field = value */
    D_ADD,       /* field += value */
    D_FILL,      /* every byte of field = value */
    D_SIZE,      /* file cut to value bytes; value < 0: segment size + value */
    D_GROW,      /* file and header segment_size grown by value */
    D_GROW_FILE, /* file grown by value, header left alone */
    D_ZERO,      /* every byte 0 */
    D_ONES,      /* every byte 0xff */
    D_CHOWN,     /* file owned by another uid (root only) */
    D_SYMLINK,   /* the path is a symbolic link to an intact copy */
    D_DIR,       /* the path is a directory */
    D_MISSING,   /* nothing at the path */
};

#define F(field) offsetof(ts_segment_header, field), sizeof(((ts_segment_header *)0)->field)
#define HDR      ((int64_t)sizeof(ts_segment_header))

static const struct damage {
    const char *label;
    enum dmg_op op;
    size_t off, width;
    int64_t value;
    const char *expect; /* NULL: attach must work */
} damages[] = {
    {"intact copy", D_NONE, 0, 0, 0, NULL},
    {"later minor version", D_SET, F(minor), 7, NULL},
    {"larger header of a later minor", D_SET, F(header_size), HDR + 64, NULL},
    {"live counters at their limits", D_SET, F(events_recorded), -1, NULL},
    {"magic", D_SET, F(magic), 0x5453454753495355ll, "bad magic"},
    {"magic zero", D_SET, F(magic), 0, "bad magic"},
    {"byte order swapped", D_SET, F(endian), 0x04030201, "byte order"},
    {"major version 7", D_SET, F(major), 7, "layout version 7"},
    {"major version 5", D_SET, F(major), 5, "layout version 5"},
    {"major version 3", D_SET, F(major), 3, "layout version 3"},
    {"major version 0", D_SET, F(major), 0, "layout version 0"},
    {"header size smaller", D_SET, F(header_size), HDR - 8, "header size"},
    {"header size 0", D_SET, F(header_size), 0, "header size"},
    {"header size beyond its page", D_SET, F(header_size), 4097, "header size"},
    {"event size 32", D_SET, F(event_size), 32, "record sizes"},
    {"event size 128", D_SET, F(event_size), 128, "record sizes"},
    {"lane size", D_SET, F(lane_size), 191, "record sizes"},
    {"word size 4", D_SET, F(word_size), 4, "record sizes"},
    {"segment size +1", D_ADD, F(segment_size), 1, "header says"},
    {"segment size -4096", D_ADD, F(segment_size), -4096, "header says"},
    {"segment size 0", D_SET, F(segment_size), 0, "header says"},
    {"segment size max", D_SET, F(segment_size), -1, "header says"},
    {"pid 0", D_SET, F(pid), 0, "bad pid"},
    {"pid -1", D_SET, F(pid), -1, "bad pid"},
    {"pid INT32_MIN", D_SET, F(pid), INT32_MIN, "bad pid"},
    {"process unterminated", D_FILL, F(process), 'p', "unterminated"},
    {"clock unterminated", D_FILL, F(clock), 'c', "unterminated"},
    {"run folder unterminated", D_FILL, F(run_folder), 'r', "unterminated"},
    {"record notice unterminated", D_FILL, F(record_notice), 'n', "unterminated"},
    {"lane count 0", D_SET, F(lane_count), 0, "lane geometry"},
    {"lane count 4097", D_SET, F(lane_count), 4097, "lane geometry"},
    {"lane count huge", D_SET, F(lane_count), UINT32_MAX, "lane geometry"},
    {"lane count 3 (in range, regions wrong)", D_SET, F(lane_count), 3, "region offsets"},
    {"lane events 0", D_SET, F(lane_events), 0, "lane geometry"},
    {"lane events 100", D_SET, F(lane_events), 100, "lane geometry"},
    {"lane events 65", D_SET, F(lane_events), 65, "lane geometry"},
    {"lane events 32 (power of two below minimum)", D_SET, F(lane_events), 32, "lane geometry"},
    {"lane events 2^25", D_SET, F(lane_events), 1 << 25, "lane geometry"},
    {"lane events 2^31", D_SET, F(lane_events), 1u << 31, "lane geometry"},
    {"lane events 128, over the largest lane", D_SET, F(lane_events), 128, "lane growth geometry"},
    {"largest lane 2^25", D_SET, F(lane_max_events), 1 << 25, "lane growth geometry"},
    {"largest lane 128, no grow region (valid)", D_SET, F(lane_max_events), 128, NULL},
    {"grow region of 100 bytes", D_SET, F(grow_bytes), 100, "lane growth geometry"},
    {"grow region of a page (regions wrong)", D_SET, F(grow_bytes), 4096, "region offsets"},
    {"grow offset +4096", D_ADD, F(grow_off), 4096, "region offsets"},
    {"string max 0", D_SET, F(string_max), 0, "string table geometry"},
    {"string max 15", D_SET, F(string_max), 15, "string table geometry"},
    {"string max 2^24+1", D_SET, F(string_max), (1 << 24) + 1, "string table geometry"},
    {"string max huge", D_SET, F(string_max), UINT32_MAX, "string table geometry"},
    {"string max 2000 (valid, regions wrong)", D_SET, F(string_max), 2000, "region offsets"},
    {"string arena 0", D_SET, F(string_arena), 0, "string table geometry"},
    {"string arena 4095", D_SET, F(string_arena), 4095, "string table geometry"},
    {"string arena 2^30+1", D_SET, F(string_arena), (1 << 30) + 1, "string table geometry"},
    {"string arena huge", D_SET, F(string_arena), UINT32_MAX, "string table geometry"},
    {"string arena 8192 (valid, regions wrong)", D_SET, F(string_arena), 8192, "region offsets"},
    {"lanes offset +64", D_ADD, F(lanes_off), 64, "region offsets"},
    {"lanes offset 0", D_SET, F(lanes_off), 0, "region offsets"},
    {"rings offset +4096", D_ADD, F(rings_off), 4096, "region offsets"},
    {"rings offset -4096", D_ADD, F(rings_off), -4096, "region offsets"},
    {"rings offset near 2^64", D_SET, F(rings_off), -100, "region offsets"},
    {"string index offset +4", D_ADD, F(string_index_off), 4, "region offsets"},
    {"string arena offset +4096", D_ADD, F(string_arena_off), 4096, "region offsets"},
    {"string arena offset -1", D_ADD, F(string_arena_off), -1, "region offsets"},
    {"mailbox offset +8", D_ADD, F(mailbox_off), 8, "region offsets"},
    {"mailbox offset max", D_SET, F(mailbox_off), -1, "region offsets"},
    {"board offset +4096", D_ADD, F(board_off), 4096, "region offsets"},
    {"board offset -4096", D_ADD, F(board_off), -4096, "region offsets"},
    {"board offset max", D_SET, F(board_off), -1, "region offsets"},
    {"cut to 0 bytes", D_SIZE, 0, 0, 0, "too small"},
    {"cut to 1 byte", D_SIZE, 0, 0, 1, "too small"},
    {"cut to header - 1", D_SIZE, 0, 0, HDR - 1, "too small"},
    {"cut to the header", D_SIZE, 0, 0, HDR, "header says"},
    {"cut to one page", D_SIZE, 0, 0, 4096, "header says"},
    {"cut by one page", D_SIZE, 0, 0, -4096, "header says"},
    {"cut by one byte", D_SIZE, 0, 0, -1, "header says"},
    {"grown by a page, header agreeing", D_GROW, 0, 0, 4096, "region offsets"},
    {"grown by a byte", D_GROW_FILE, 0, 0, 1, "header says"},
    {"all zero", D_ZERO, 0, 0, 0, "bad magic"},
    {"all 0xff", D_ONES, 0, 0, 0, "bad magic"},
    {"owned by another uid", D_CHOWN, 0, 0, 0, "belongs to uid"},
    {"symbolic link", D_SYMLINK, 0, 0, 0, "symbolic links"},
    {"directory", D_DIR, 0, 0, 0, "not a regular file"},
    {"missing", D_MISSING, 0, 0, 0, "no such segment"},
};

static void field_store(uint8_t *p, size_t width, uint64_t v)
{
    switch (width) {
    case 2: {
        uint16_t x = (uint16_t)v;
        memcpy(p, &x, 2);
        break;
    }
    case 4: {
        uint32_t x = (uint32_t)v;
        memcpy(p, &x, 4);
        break;
    }
    case 8:
        memcpy(p, &v, 8);
        break;
    default:
        ck_abort_msg("field width %zu", width);
    }
}

static uint64_t field_load(const uint8_t *p, size_t width)
{
    uint16_t a;
    uint32_t b;
    uint64_t c;
    switch (width) {
    case 2:
        memcpy(&a, p, 2);
        return a;
    case 4:
        memcpy(&b, p, 4);
        return b;
    default:
        memcpy(&c, p, 8);
        return c;
    }
}

/* A valid segment's bytes (2 lanes of 64 events, 16 names, 4 KiB of arena: 28 KiB). */
static uint8_t *valid_bytes(int pid_offset, size_t *size)
{
    segment_config cfg = mt_config(mt_pid(pid_offset));
    cfg.lane_count = 2;
    cfg.lane_events = 64;
    cfg.string_max = 16;
    cfg.string_arena = 4096;
    segment *s = mt_create(&cfg);
    *size = segment_size(s);
    uint8_t *copy = malloc(*size);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, segment_header(s), *size);
    segment_close(s, 1);
    return copy;
}

START_TEST(test_damaged_refused)
{
    const struct damage *d = &damages[_i];
    if (d->op == D_CHOWN && geteuid() != 0) {
        fprintf(stderr, "skipped \"%s\": needs root to chown\n", d->label);
        return;
    }
    size_t size;
    uint8_t *bytes = valid_bytes(5, &size);
    size_t file_size = size;
    switch (d->op) {
    case D_SET:
        field_store(bytes + d->off, d->width, (uint64_t)d->value);
        break;
    case D_ADD:
        field_store(bytes + d->off, d->width,
                    field_load(bytes + d->off, d->width) + (uint64_t)d->value);
        break;
    case D_FILL:
        memset(bytes + d->off, (int)d->value, d->width);
        break;
    case D_SIZE:
        file_size = d->value >= 0 ? (size_t)d->value : size + (size_t)d->value;
        break;
    case D_GROW:
    case D_GROW_FILE:
        file_size = size + (size_t)d->value;
        bytes = realloc(bytes, file_size);
        ck_assert_ptr_nonnull(bytes);
        memset(bytes + size, 0, file_size - size);
        if (d->op == D_GROW)
            ((ts_segment_header *)bytes)->segment_size = file_size;
        break;
    case D_ZERO:
        memset(bytes, 0, size);
        break;
    case D_ONES:
        memset(bytes, 0xff, size);
        break;
    default:
        break;
    }

    char *dir = tmp_make();
    char *copy, *path;
    ck_assert_int_ge(asprintf(&copy, "%s/copy.seg", dir), 0);
    ck_assert_int_ge(asprintf(&path, "%s/target.seg", dir), 0);
    switch (d->op) {
    case D_SYMLINK:
        file_write(copy, bytes, file_size);
        ck_assert_int_eq(symlink(copy, path), 0);
        break;
    case D_DIR:
        ck_assert_int_eq(mkdir(path, 0700), 0);
        break;
    case D_MISSING:
        break;
    case D_CHOWN:
        file_write(path, bytes, file_size);
        ck_assert_int_eq(chown(path, 12345, 12345), 0);
        break;
    default:
        file_write(path, bytes, file_size);
        break;
    }

    segment *s = (segment *)bytes; /* must be reset */
    char *cause = NULL;
    int rc = segment_attach_name(path, 0, &s, &cause);
    if (!d->expect) {
        ck_assert_msg(rc == 0, "%s: refused: %s", d->label, cause ? cause : "?");
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(segment_size(s), file_size);
        ck_assert_int_eq(memcmp(segment_header(s), bytes, file_size), 0);
        ck_assert_ptr_nonnull(segment_lane(s, 1));
        ck_assert_ptr_nonnull(segment_ring(s, 1));
        segment_close(s, 1); /* a file path: close must not remove anything */
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
    } else {
        ck_assert_msg(rc == -1, "%s: accepted", d->label);
        ck_assert_ptr_null(s);
        ck_assert_ptr_nonnull(cause);
        ck_assert_msg(strstr(cause, d->expect), "%s: \"%s\" lacks \"%s\"", d->label, cause,
                      d->expect);
        ck_assert_msg(strstr(cause, path), "%s: \"%s\" does not name the file", d->label, cause);
    }
    free(cause);
    free(copy);
    free(path);
    free(bytes);
    tmp_remove(dir);
}
END_TEST

/* Every single-byte change of the header is refused, or leaves every region inside the
 * segment. */
START_TEST(test_header_byte_flips)
{
    size_t size;
    uint8_t *bytes = valid_bytes(6, &size);
    uint8_t *work = malloc(size);
    ck_assert_ptr_nonnull(work);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    unsigned accepted = 0, refused = 0;
    for (size_t off = 0; off < sizeof(ts_segment_header); off++) {
        for (size_t m = 0; m < sizeof masks; m++) {
            memcpy(work, bytes, size);
            work[off] ^= masks[m];
            char *cause = NULL;
            if (segment_validate(work, size, &cause) != 0) {
                ck_assert_msg(cause && *cause, "byte %zu ^ %#x: no message", off, masks[m]);
                free(cause);
                refused++;
                continue;
            }
            accepted++;
            const ts_segment_header *h = (const ts_segment_header *)work;
            uint64_t lanes_end = h->lanes_off + (uint64_t)h->lane_count * sizeof(ts_lane);
            uint64_t rings_end =
                h->rings_off + (uint64_t)h->lane_count * h->lane_events * sizeof(ts_event);
            uint64_t index_end = h->string_index_off + (uint64_t)h->string_max * 4;
            ck_assert_msg(lanes_end <= h->rings_off && rings_end <= h->string_index_off &&
                              index_end <= h->string_arena_off &&
                              h->string_arena_off + h->string_arena <= size,
                          "byte %zu ^ %#x accepted with regions outside", off, masks[m]);
        }
    }
    /* Both outcomes occur: magic flips are refused, process-name flips accepted. */
    ck_assert_uint_gt(accepted, 0);
    ck_assert_uint_gt(refused, 0);
    free(work);
    free(bytes);
}
END_TEST

/* segment_attach(pid) also checks that the header is the one of that pid. */
START_TEST(test_attach_checks_pid)
{
    pid_t pid = mt_pid(7), other = mt_pid(8);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    char name[64];
    snprintf(name, sizeof name, "/" TS_SEGMENT_PREFIX "%d-0123456789abcdef", (int)other);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, segment_header(s), segment_size(s)), (ssize_t)segment_size(s));
    close(fd);

    segment *a = NULL;
    char *cause = NULL;
    ck_assert_int_eq(segment_attach(other, 0, &a, &cause), -1);
    ck_assert_ptr_null(a);
    char want[64];
    snprintf(want, sizeof want, "header names pid %d", (int)pid);
    ck_assert_msg(strstr(cause, want), "%s", cause);
    free(cause);

    shm_unlink(name);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Accessors                                                                                  */
/* ------------------------------------------------------------------------------------------ */

enum { R_ABS, R_SIZE, R_MAX }; /* value is absolute, size + delta, UINT64_MAX + delta */

static const struct span {
    int off_rel;
    int64_t off;
    int len_rel;
    int64_t len;
    int ok;
} spans[] = {
    {R_ABS, 0, R_ABS, 1, 1},
    {R_ABS, 0, R_SIZE, 0, 1},
    {R_SIZE, -1, R_ABS, 1, 1},
    {R_SIZE, -64, R_ABS, 64, 1},
    {R_ABS, 0, R_SIZE, 1, 0},
    {R_SIZE, -1, R_ABS, 2, 0},
    {R_SIZE, 0, R_ABS, 1, 0},
    {R_SIZE, 1, R_ABS, 0, 0},
    {R_SIZE, 4096, R_ABS, 1, 0},
    {R_MAX, 0, R_ABS, 0, 0},
    {R_MAX, 0, R_ABS, 1, 0},
    {R_ABS, 1, R_MAX, 0, 0},
    {R_ABS, 0, R_MAX, 0, 0},
    {R_MAX, 0, R_MAX, 0, 0},
    /* off + len wraps around to a small number: a naive off + len <= size would pass */
    {R_SIZE, -8, R_MAX, -6, 0},
    {R_ABS, 4096, R_MAX, -4094, 0},
    {R_MAX, -4095, R_ABS, 4096, 0},
    {R_MAX, -4095, R_ABS, 4097, 0},
};

static uint64_t span_value(int rel, int64_t v, uint64_t size)
{
    switch (rel) {
    case R_SIZE:
        return size + (uint64_t)v;
    case R_MAX:
        return UINT64_MAX + (uint64_t)v;
    default:
        return (uint64_t)v;
    }
}

START_TEST(test_segment_at_bounds)
{
    const struct span *sp = &spans[_i];
    pid_t pid = mt_pid(9);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    uint64_t size = segment_size(s);
    uint64_t off = span_value(sp->off_rel, sp->off, size);
    uint64_t len = span_value(sp->len_rel, sp->len, size);
    void *p = segment_at(s, off, len);
    if (sp->ok)
        ck_assert_ptr_eq(p, (uint8_t *)segment_header(s) + off);
    else
        ck_assert_msg(p == NULL, "row %d: off %llu len %llu of %llu gave %p", _i,
                      (unsigned long long)off, (unsigned long long)len, (unsigned long long)size,
                      p);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_lane_and_ring_index)
{
    pid_t pid = mt_pid(10);
    segment_config cfg = mt_config(pid);
    cfg.lane_count = 5;
    cfg.lane_events = 256;
    segment *s = mt_create(&cfg);
    uint8_t *base = (uint8_t *)segment_header(s);
    ts_segment_header *h = segment_header(s);
    for (uint32_t i = 0; i < cfg.lane_count; i++) {
        ck_assert_ptr_eq(segment_lane(s, i), base + h->lanes_off + i * sizeof(ts_lane));
        ck_assert_ptr_eq(segment_ring(s, i),
                         base + h->rings_off + (uint64_t)i * cfg.lane_events * sizeof(ts_event));
    }
    static const uint32_t outside[] = {5, 6, 4096, 1u << 31, UINT32_MAX};
    for (size_t k = 0; k < sizeof outside / sizeof outside[0]; k++) {
        ck_assert_ptr_null(segment_lane(s, outside[k]));
        ck_assert_ptr_null(segment_ring(s, outside[k]));
    }

    /* A header changed after attach (a hostile or buggy writer): the accessors go by the layout
     * validated at attach (and by the creator's own), never by the header's new values. */
    segment *ro = mt_attach(pid, 0);
    ts_lane *lane0 = segment_lane(ro, 0);
    ts_event *ring0 = segment_ring(ro, 0);
    ck_assert_ptr_nonnull(lane0);
    ck_assert_ptr_nonnull(ring0);
    h->lane_count = UINT32_MAX;
    ck_assert_ptr_null(segment_lane(ro, UINT32_MAX - 1));
    ck_assert_ptr_null(segment_ring(ro, 4095));
    ck_assert_ptr_null(segment_ring(ro, UINT32_MAX - 1));
    ck_assert_ptr_null(segment_lane(s, cfg.lane_count));
    h->lanes_off = UINT64_MAX - 10;
    h->rings_off = segment_size(s);
    h->lane_events = 1u << 24;
    h->string_index_off = UINT64_MAX;
    h->mailbox_off = 1;
    ck_assert_ptr_eq(segment_lane(ro, 0), lane0);
    ck_assert_ptr_eq(segment_ring(ro, 0), ring0);
    ck_assert_uint_eq(segment_geometry_of(ro)->lane_count, cfg.lane_count);
    ck_assert_uint_eq(segment_geometry_of(ro)->lane_events, cfg.lane_events);
    ck_assert_uint_eq(segment_geometry_of(s)->lane_count, cfg.lane_count);
    ck_assert_uint_eq(segment_geometry_of(s)->rings_off, segment_geometry_of(ro)->rings_off);
    segment_close(ro, 0);
    segment_close(s, 1);
}
END_TEST

static Suite *segment_suite(void)
{
    Suite *s = suite_create("segment");
    TCase *tc = tcase_create("create");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_create_attach_round_trip);
    tcase_add_test(tc, test_long_texts_cut);
    tcase_add_loop_test(tc, test_create_refuses_bad_config, 0,
                        sizeof bad_configs / sizeof bad_configs[0]);
    tcase_add_test(tc, test_read_only_attach);
    tcase_add_test(tc, test_unlink_keeps_mapping);
    suite_add_tcase(s, tc);

    tc = tcase_create("damaged");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_loop_test(tc, test_damaged_refused, 0, sizeof damages / sizeof damages[0]);
    tcase_add_test(tc, test_header_byte_flips);
    tcase_add_test(tc, test_attach_checks_pid);
    suite_add_tcase(s, tc);

    tc = tcase_create("access");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_loop_test(tc, test_segment_at_bounds, 0, sizeof spans / sizeof spans[0]);
    tcase_add_test(tc, test_lane_and_ring_index);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(segment_suite());
}
