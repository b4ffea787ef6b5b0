/* termsight analyse on damaged and foreign recordings (docs/reliability.md).
 *
 * A real recording (examples/mlp_train, $MLP_TRAIN, under the collector) is damaged in copies:
 * cut at many offsets (in the first chunk's header, inside chunks, at and next to every chunk
 * boundary), bits flipped in every field of every chunk's header and along a sweep of the
 * whole file, and foreign things put in its place (empty, PNG, ELF, text, a folder, a FIFO,
 * links). Each copy goes through the real `termsight analyse`, which must either succeed and
 * say what it skipped, or fail with one line and exit 1; never die of a signal, never leave a
 * report folder when it fails, never leave a temporary folder behind.
 *
 * What "recovered" means (model/recording_read.c): every chunk whose header and CRC check
 * out is read; a damaged chunk is skipped whole, the reader resynchronizes on the next valid
 * one. So the exact oracle for one flipped bit in chunk k is "all events but chunk k's, chunk
 * k's bytes skipped"; for a cut inside chunk k, "the events of chunks 0..k-1, the bytes from
 * chunk k's start to the cut skipped". A cut exactly at a chunk boundary cannot be told from a
 * recording that ended there: it is analysed without a warning. A file with no whole chunk at
 * all is an error. A bit flip in the first four bytes makes the file foreign (no magic). */
#include "model.h"

#define TESTUTIL_TAG "hostile-rec"
#include "testutil.h"
#include "cliutil.h"
#include "report.h"

#include <cJSON.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK_HEADER 24u
#define MAX_CHUNKS   4096

/* ------------------------------------------------------------------------------------------ */
/* The recording, made once by the unchecked fixture (children inherit it)                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct chunk {
    size_t off, size; /* header included, padding included */
    uint64_t events;  /* 0 unless an EVENTS chunk */
} chunk;

static char *base_dir;      /* scratch for the whole binary */
static unsigned char *good; /* the undamaged recording */
static size_t good_len;
static chunk chunks[MAX_CHUNKS];
static size_t n_chunks;
static uint64_t total_events;

static void recording_make(void)
{
    const char *mlp = getenv("MLP_TRAIN");
    ck_assert_msg(mlp && *mlp, "MLP_TRAIN is not set");
    base_dir = tmp_make();
    char *out = path_join(base_dir, "out");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 1) < 0)
            _exit(126);
        /* Small, but several chunks: the recorder drains the lanes as the steps run. */
        execl(mlp, mlp, "--steps", "20", "--batch", "16", "--hidden", "16", "--output", out,
              (char *)NULL);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mlp_train failed (status %d)", st);

    DIR *d = opendir(out);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    char *file = NULL;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            ck_assert_int_ge(
                asprintf(&file, "%s/%s/" TS_RECORDING_DIR "/" TS_RECORDING_FILE, out, de->d_name),
                0);
    closedir(d);
    ck_assert_ptr_nonnull(file);
    int fd = open(file, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    good = (unsigned char *)file_slurp(fd, &good_len);
    close(fd);

    /* The chunk table, read by the format's layout (model/recording_internal.h): the oracle below.
     */
    for (size_t off = 0; off < good_len;) {
        ck_assert_uint_lt(n_chunks, MAX_CHUNKS);
        ck_assert_uint_le(off + CHUNK_HEADER, good_len);
        uint32_t length;
        uint16_t type;
        memcpy(&type, good + off + 4, 2);
        memcpy(&length, good + off + 8, 4);
        chunk *c = &chunks[n_chunks++];
        c->off = off;
        c->size = CHUNK_HEADER + length + ((8u - (length & 7u)) & 7u);
        c->events = type == TS_CHUNK_EVENTS ? length / sizeof(ts_event) : 0;
        total_events += c->events;
        off += c->size;
        ck_assert_uint_le(off, good_len);
    }
    ck_assert_msg(n_chunks >= 5 && total_events > 100, "%zu chunks, %llu events", n_chunks,
                  (unsigned long long)total_events);
    fprintf(stderr, "recording: %zu bytes, %zu chunks, %llu events\n", good_len, n_chunks,
            (unsigned long long)total_events);
    free(file);
    free(out);
}

static void recording_drop(void)
{
    tmp_remove(base_dir);
    free(good);
}

/* ------------------------------------------------------------------------------------------ */
/* One case through the real command                                                          */
/* ------------------------------------------------------------------------------------------ */

/* What a case must give. */
typedef struct expect {
    int ok;           /* 1: exit 0 with a report; 0: exit 1 with one line */
    uint64_t events;  /* ok: events analysed */
    uint64_t skipped; /* ok: bytes skipped (0: no warning) */
    const char *says; /* !ok: part of the message */
} expect;

typedef struct tally {
    unsigned cases, recovered, warned, refused;
} tally;

static uint64_t json_u64(const cJSON *root, const char *obj, const char *key)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, obj);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "summary.json lacks %s.%s", obj, key);
    return (uint64_t)v->valuedouble;
}

/* Folder entries other than the ones named (NULL-terminated): leftovers. */
static void folder_expect(const char *dir, const char *const *allowed, const char *label)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        int known = 0;
        for (size_t i = 0; allowed[i]; i++)
            known |= !strcmp(de->d_name, allowed[i]);
        ck_assert_msg(known, "%s: '%s' left in %s", label, de->d_name, dir);
    }
    closedir(d);
}

/* Runs `termsight analyse PATH -o DIR/report` and checks the outcome against e. dir must hold
 * nothing afterwards but the inputs (keep: at most two names, NULL-terminated) and the report. */
static void analyse_check(const char *dir, const char *path, const char *const *keep,
                          const expect *e, const char *label, tally *t)
{
    char *rep = path_join(dir, REPORT_DIR);
    cli_result r;
    cli_run(dir, (const char *const[]){"analyse", path, "-o", rep, NULL}, &r);
    t->cases++;
    struct stat st;
    if (e->ok) {
        ck_assert_msg(r.status == 0, "%s: exit %d: %s", label, r.status, r.err);
        char *sum = path_join(rep, "summary.json");
        int fd = open(sum, O_RDONLY);
        ck_assert_msg(fd >= 0, "%s: no summary.json", label);
        size_t len;
        char *text = file_slurp(fd, &len);
        close(fd);
        cJSON *j = cJSON_Parse(text);
        ck_assert_msg(j != NULL, "%s: summary.json does not parse", label);
        ck_assert_msg(json_u64(j, "events", "total") == e->events,
                      "%s: %llu events analysed, %llu expected", label,
                      (unsigned long long)json_u64(j, "events", "total"),
                      (unsigned long long)e->events);
        uint64_t skipped = json_u64(j, "recording", "bytes_skipped");
        ck_assert_msg(skipped == e->skipped, "%s: %llu bytes skipped, %llu expected", label,
                      (unsigned long long)skipped, (unsigned long long)e->skipped);
        if (e->skipped) {
            ck_assert_uint_ge(json_u64(j, "recording", "chunks_skipped"), 1);
            /* What was lost and what was kept, on stderr and in the summary printed. */
            err_expect(&r, "warning: ");
            err_expect(&r, "bytes skipped in");
            ck_assert_msg(strstr(r.err, "events recovered"), "%s: %s", label, r.err);
            ck_assert_msg(strstr(r.out, "damaged:"), "%s: %s", label, r.out);
            t->warned++;
        } else {
            ck_assert_msg(!strstr(r.err, "warning"), "%s: %s", label, r.err);
        }
        cJSON_Delete(j);
        free(text);
        free(sum);
        t->recovered++;
    } else {
        ck_assert_msg(r.status == 1, "%s: exit %d (want 1): %s", label, r.status, r.err);
        ck_assert_msg(!strncmp(r.err, "termsight: ", 11), "%s: %s", label, r.err);
        ck_assert_msg(strchr(r.err, '\n') == r.err + r.err_len - 1, "%s: not one line: %s", label,
                      r.err);
        ck_assert_msg(strstr(r.err, e->says), "%s: \"%s\" lacks \"%s\"", label, r.err, e->says);
        ck_assert_msg(r.out_len == 0, "%s: printed %s", label, r.out);
        ck_assert_msg(lstat(rep, &st) != 0, "%s: a report was left at %s", label, rep);
        t->refused++;
    }
    const char *allowed[4] = {e->ok ? REPORT_DIR : NULL};
    for (size_t i = 0; i < 2 && keep[i]; i++)
        allowed[i + (e->ok ? 1 : 0)] = keep[i];
    folder_expect(dir, allowed, label);
    cli_result_free(&r);
    if (e->ok) {
        char *cmd;
        ck_assert_int_ge(asprintf(&cmd, "rm -rf '%s'", rep), 0);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
    }
    free(rep);
}

/* Writes bytes as DIR/events.tsr in a fresh folder and analyses it. */
static void analyse_bytes(const unsigned char *bytes, size_t len, const expect *e,
                          const char *label, tally *t)
{
    char *dir = tmp_make();
    char *file = path_join(dir, TS_RECORDING_FILE);
    file_write(file, bytes, len);
    analyse_check(dir, file, (const char *const[]){TS_RECORDING_FILE, NULL}, e, label, t);
    free(file);
    tmp_remove(dir);
}

static size_t chunk_at(size_t off)
{
    for (size_t k = 0; k < n_chunks; k++)
        if (off < chunks[k].off + chunks[k].size)
            return k;
    return n_chunks;
}

static uint64_t events_before(size_t k)
{
    uint64_t n = 0;
    for (size_t i = 0; i < k; i++)
        n += chunks[i].events;
    return n;
}

/* ------------------------------------------------------------------------------------------ */
/* Cut short                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static expect cut_expect(size_t cut)
{
    if (cut == 0)
        return (expect){.says = "is empty"};
    if (cut < 4)
        return (expect){.says = "is not a termsight recording"};
    size_t k = chunk_at(cut);
    if (k < n_chunks && chunks[k].off == cut) /* at a boundary: nothing to tell */
        return (expect){.ok = 1, .events = events_before(k)};
    if (k == 0) /* inside the first chunk: not one whole chunk */
        return (expect){.says = "no whole chunk"};
    return (expect){.ok = 1, .events = events_before(k), .skipped = cut - chunks[k].off};
}

/* Whether chunk k's cuts and header flips are tried: every chunk in the long variant; in the
 * default set the first two, the last and every fourth (each kind of cut and field is still tried,
 * on fewer chunks: each try runs the command, some 0.1 s). */
static int chunk_tried(size_t k)
{
    return k < 2 || k + 1 == n_chunks || k % (size_t)test_scale(4, 1) == 0;
}

START_TEST(test_truncated)
{
    size_t cuts[512], n = 0;
    static const size_t early[] = {0, 1, 3, 4, 8, 12, 16, 23, 24, 25, 100};
    for (size_t i = 0; i < sizeof early / sizeof early[0]; i++)
        cuts[n++] = early[i];
    for (size_t k = 1; k < n_chunks && n + 5 < sizeof cuts / sizeof cuts[0]; k++) {
        if (!chunk_tried(k))
            continue;
        const chunk *c = &chunks[k];
        cuts[n++] = c->off - 1;            /* last byte of the previous chunk missing */
        cuts[n++] = c->off;                /* at the boundary */
        cuts[n++] = c->off + 1;            /* in the magic */
        cuts[n++] = c->off + CHUNK_HEADER; /* a header and no payload */
        cuts[n++] = c->off + c->size / 2;  /* mid payload */
    }
    cuts[n++] = good_len - 1;
    tally t = {0};
    for (size_t i = 0; i < n; i++) {
        char label[64];
        snprintf(label, sizeof label, "cut at %zu of %zu", cuts[i], good_len);
        expect e = cut_expect(cuts[i]);
        analyse_bytes(good, cuts[i], &e, label, &t);
    }
    fprintf(stderr,
            "truncations: %u tried: %u analysed (%u with a warning), %u refused, 0 crashed\n",
            t.cases, t.recovered, t.warned, t.refused);
    ck_assert_uint_eq(t.cases, n);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Bits flipped                                                                               */
/* ------------------------------------------------------------------------------------------ */

static expect flip_expect(size_t off)
{
    if (off < 4)
        return (expect){.says = "is not a termsight recording"};
    size_t k = chunk_at(off);
    return (expect){.ok = 1, .events = total_events - chunks[k].events, .skipped = chunks[k].size};
}

static void flip_one(size_t off, unsigned bit, tally *t)
{
    unsigned char *bytes = malloc(good_len);
    ck_assert_ptr_nonnull(bytes);
    memcpy(bytes, good, good_len);
    bytes[off] ^= (unsigned char)(1u << bit);
    char label[64];
    snprintf(label, sizeof label, "bit %u of byte %zu flipped", bit, off);
    expect e = flip_expect(off);
    analyse_bytes(bytes, good_len, &e, label, t);
    free(bytes);
}

/* Every header field of every chunk, and the first and last payload byte. */
START_TEST(test_flipped_headers)
{
    static const size_t fields[] = {0, 3, 4, 6, 8, 11, 12, 16, 23, CHUNK_HEADER};
    tally t = {0};
    for (size_t k = 0; k < n_chunks; k++) {
        if (!chunk_tried(k))
            continue;
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
            flip_one(chunks[k].off + fields[f], (unsigned)(k + f) % 8, &t);
        flip_one(chunks[k].off + chunks[k].size - 1, (unsigned)k % 8, &t);
    }
    fprintf(stderr,
            "header bit flips: %u tried: %u analysed (%u with a warning), %u refused, "
            "0 crashed\n",
            t.cases, t.recovered, t.warned, t.refused);
}
END_TEST

/* A systematic sweep through the command: 96 positions evenly spread over the file (32 in the
 * default set). */
START_TEST(test_flipped_sweep)
{
    tally t = {0};
    const size_t steps = (size_t)test_scale(32, 96);
    for (size_t i = 0; i < steps; i++)
        flip_one(i * good_len / steps + i % 7, (unsigned)i % 8, &t);
    fprintf(stderr,
            "swept bit flips (command): %u tried: %u analysed (%u with a warning), "
            "%u refused, 0 crashed\n",
            t.cases, t.recovered, t.warned, t.refused);
}
END_TEST

/* The same oracle in process, denser: every 13th byte (every offset within the 64-byte event
 * records is hit), through report_run without writing. */
START_TEST(test_flipped_dense)
{
    char *dir = tmp_make();
    char *file = path_join(dir, TS_RECORDING_FILE);
    file_write(file, good, good_len);
    int fd = open(file, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    report_options o;
    report_options_init(&o);
    o.write = 0;
    unsigned tried = 0, recovered = 0, refused = 0;
    for (size_t off = 0; off < good_len; off += 13) {
        unsigned char b = good[off] ^ (unsigned char)(1u << (off % 8));
        ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)off), 1);
        expect e = flip_expect(off);
        report *r = NULL;
        char *cause = NULL;
        int rc = report_run(file, &o, &r, &cause);
        tried++;
        if (e.ok) {
            ck_assert_msg(rc == 0, "byte %zu: %s", off, cause ? cause : "?");
            const report_info *info = report_info_of(r);
            ck_assert_msg(info->events == e.events && info->skipped_bytes == e.skipped &&
                              info->bad_chunks >= 1,
                          "byte %zu: %llu events, %llu bytes skipped in %llu chunks", off,
                          (unsigned long long)info->events, (unsigned long long)info->skipped_bytes,
                          (unsigned long long)info->bad_chunks);
            recovered++;
        } else {
            ck_assert_msg(rc == -1 && cause && strstr(cause, e.says), "byte %zu: %s", off,
                          cause ? cause : "accepted");
            refused++;
        }
        report_free(r);
        free(cause);
        ck_assert_int_eq(pwrite(fd, &good[off], 1, (off_t)off), 1);
    }
    close(fd);
    fprintf(stderr, "swept bit flips (in process): %u tried: %u analysed, %u refused, 0 crashed\n",
            tried, recovered, refused);
    free(file);
    tmp_remove(dir);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Foreign things                                                                             */
/* ------------------------------------------------------------------------------------------ */

enum foreign_kind {
    FK_BYTES,
    FK_ELF,
    FK_GOOD_THEN,
    FK_DIR,
    FK_RUN_DIR,
    FK_MISSING,
    FK_FIFO,
    FK_LINK_GOOD,
    FK_LINK_DANGLING,
    FK_LINK_LOOP
};

static const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13,
                                    'I',  'H', 'D', 'R', 0,    0,    0,    1,    0, 0, 0, 1};
static const char magic_then_junk[] = "TSRC\3\0\0\0\100\0\0\0junk junk junk junk junk junk";

static const struct foreign {
    const char *label;
    enum foreign_kind kind;
    const void *bytes;
    size_t len;
    expect e; /* events: -1 for the whole recording */
} foreigns[] = {
    {"zero-length", FK_BYTES, "", 0, {.says = "is empty"}},
    {"PNG", FK_BYTES, png, sizeof png, {.says = "is not a termsight recording"}},
    {"text", FK_BYTES, "step,loss\n1,0.5\n", 16, {.says = "is not a termsight recording"}},
    {"three bytes of the magic", FK_BYTES, "TSR", 3, {.says = "is not a termsight recording"}},
    {"the magic and junk",
     FK_BYTES,
     magic_then_junk,
     sizeof magic_then_junk - 1,
     {.says = "no whole chunk"}},
    {"ELF (the termsight program)", FK_ELF, NULL, 0, {.says = "is not a termsight recording"}},
    {"recording followed by a PNG",
     FK_GOOD_THEN,
     png,
     sizeof png,
     {.ok = 1, .events = UINT64_MAX, .skipped = sizeof png}},
    {"a folder without a recording", FK_DIR, NULL, 0, {.says = "holds no termsight recording"}},
    {"a run folder whose events.tsr is a folder",
     FK_RUN_DIR,
     NULL,
     0,
     {.says = "holds no termsight recording"}},
    {"missing", FK_MISSING, NULL, 0, {.says = "No such file"}},
    {"FIFO", FK_FIFO, NULL, 0, {.says = "not a regular file"}},
    {"link to the recording", FK_LINK_GOOD, NULL, 0, {.ok = 1, .events = UINT64_MAX}},
    {"dangling link", FK_LINK_DANGLING, NULL, 0, {.says = "No such file"}},
    {"link loop", FK_LINK_LOOP, NULL, 0, {.says = "symbolic links"}},
};

START_TEST(test_foreign)
{
    const struct foreign *f = &foreigns[_i];
    char *dir = tmp_make();
    char *in = path_join(dir, "input");
    char *file = path_join(dir, "input-target");
    const char *name = "input", *extra = NULL;
    switch (f->kind) {
    case FK_BYTES:
        file_write(in, f->bytes, f->len);
        break;
    case FK_ELF: {
        int fd = open(getenv("TERMSIGHT_BIN"), O_RDONLY);
        ck_assert_int_ge(fd, 0);
        size_t len;
        char *elf = file_slurp(fd, &len);
        close(fd);
        file_write(in, elf, len < 65536 ? len : 65536);
        free(elf);
        break;
    }
    case FK_GOOD_THEN: {
        unsigned char *b = malloc(good_len + f->len);
        ck_assert_ptr_nonnull(b);
        memcpy(b, good, good_len);
        memcpy(b + good_len, f->bytes, f->len);
        file_write(in, b, good_len + f->len);
        free(b);
        break;
    }
    case FK_DIR:
        ck_assert_int_eq(mkdir(in, 0700), 0);
        break;
    case FK_RUN_DIR: {
        char *p = path_join(in, TS_RECORDING_DIR "/" TS_RECORDING_FILE);
        char *cmd;
        ck_assert_int_ge(asprintf(&cmd, "mkdir -p '%s'", p), 0);
        ck_assert_int_eq(system(cmd), 0);
        free(cmd);
        free(p);
        break;
    }
    case FK_MISSING:
        name = NULL; /* nothing may be there afterwards */
        break;
    case FK_FIFO:
        ck_assert_int_eq(mkfifo(in, 0600), 0);
        break;
    case FK_LINK_GOOD:
        file_write(file, good, good_len);
        ck_assert_int_eq(symlink(file, in), 0);
        extra = "input-target";
        break;
    case FK_LINK_DANGLING:
        ck_assert_int_eq(symlink(file, in), 0);
        break;
    case FK_LINK_LOOP:
        ck_assert_int_eq(symlink(in, file), 0);
        ck_assert_int_eq(symlink(file, in), 0);
        extra = "input-target";
        break;
    }
    expect e = f->e;
    if (e.events == UINT64_MAX)
        e.events = total_events;
    tally t = {0};
    analyse_check(dir, in, (const char *const[]){name, extra, NULL}, &e, f->label, &t);
    free(in);
    free(file);
    tmp_remove(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile recording");
    TCase *tc = tcase_create("analyse");
    tcase_add_unchecked_fixture(tc, recording_make, recording_drop);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_flipped_headers);
    tcase_add_test(tc, test_flipped_sweep);
    tcase_add_test(tc, test_flipped_dense);
    tcase_add_loop_test(tc, test_foreign, 0, sizeof foreigns / sizeof foreigns[0]);
    suite_add_tcase(s, tc);
    return tests_run(s);
}
