/* String table: names of any bytes interned once, read back by id from any mapping, concurrent
 * interning from many threads, full tables, and damaged entries. */
#include "model_test.h"

#include <pthread.h>

static const char overflow_name[] = "<names table full>";

static segment *strtab_segment(int pid_offset, uint32_t max, uint32_t arena)
{
    segment_config cfg = mt_config(mt_pid(pid_offset));
    cfg.string_max = max;
    cfg.string_arena = arena;
    return mt_create(&cfg);
}

static strtab *strtab_make(const segment *s)
{
    strtab *t = NULL;
    char *cause = NULL;
    ck_assert_msg(strtab_create(s, &t, &cause) == 0, "strtab_create: %s", cause ? cause : "?");
    free(cause);
    return t;
}

static void get_is(const segment *s, uint32_t id, const void *bytes, size_t len)
{
    uint32_t got = UINT32_MAX;
    const char *p = strtab_get(s, id, &got);
    ck_assert_msg(p != NULL, "id %u unreadable", id);
    ck_assert_uint_eq(got, len);
    ck_assert_int_eq(memcmp(p, bytes, len), 0);
    ck_assert_int_eq(p[len], 0); /* usable as a C string when it holds no NUL */
}

START_TEST(test_reserved_ids)
{
    pid_t pid = mt_pid(0);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->string_count), 0);
    ck_assert_ptr_null(strtab_get(s, 0, NULL));
    strtab *t = strtab_make(s);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->string_count), 2);
    get_is(s, TS_STR_NONE, "", 0);
    get_is(s, TS_STR_OVERFLOW, overflow_name, sizeof overflow_name - 1);
    ck_assert_uint_eq(strtab_intern(t, "", 0, NULL), TS_STR_NONE);
    /* A reader in another mapping, read-only. */
    segment *ro = mt_attach(pid, 0);
    get_is(ro, TS_STR_NONE, "", 0);
    get_is(ro, TS_STR_OVERFLOW, overflow_name, sizeof overflow_name - 1);
    ck_assert_ptr_nonnull(strtab_get(ro, TS_STR_NONE, NULL)); /* len may be NULL */
    segment_close(ro, 0);
    strtab_destroy(t);
    strtab_destroy(NULL);
    segment_close(s, 1);
}
END_TEST

#define B(lit) lit, sizeof(lit) - 1

static const struct odd_name {
    const char *label;
    const char *bytes;
    size_t len;
} odd_names[] = {
    {"plain", B("aten::matmul")},
    {"one byte", B("a")},
    {"embedded NUL", B("a\0b")},
    {"a lone NUL", B("\0")},
    {"two NULs", B("\0\0")},
    {"NUL at the end", B("ab\0")},
    {"prefix of the above", B("ab")},
    {"0xff", B("\xff")},
    {"0xff 0xfe", B("\xff\xfe")},
    {"invalid UTF-8 continuation", B("\xc3\x28")},
    {"UTF-8 surrogate", B("\xed\xa0\x80")},
    {"overlong slash", B("\xc0\xaf")},
    {"valid UTF-8", B("\xc3\x9f\xe2\x88\x91\xf0\x9f\x98\x80")},
    {"quotes", B("\"'`")},
    {"JSON breaker", B("\",\"x\":1}\\")},
    {"CSV breaker", B("a,b\r\n\"c\"")},
    {"newline", B("a\nb")},
    {"tab and escape", B("\t\x1b[31m")},
    {"format directives", B("%s%n%p%%")},
    {"backslashes", B("\\\\\\")},
    {"spaces only", B("   ")},
    {"case differs", B("Aten::matmul")},
    {"trailing space", B("aten::matmul ")},
};

#define N_ODD (sizeof odd_names / sizeof odd_names[0])

START_TEST(test_any_bytes_round_trip)
{
    pid_t pid = mt_pid(1);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    strtab *t = strtab_make(s);
    uint32_t ids[N_ODD + 1];
    for (size_t i = 0; i < N_ODD; i++) {
        int truncated = -1;
        ids[i] = strtab_intern(t, odd_names[i].bytes, odd_names[i].len, &truncated);
        ck_assert_int_eq(truncated, 0);
        ck_assert_uint_ge(ids[i], 2);
    }
    /* A name of every byte value, twice over. */
    char all[512];
    for (size_t i = 0; i < sizeof all; i++)
        all[i] = (char)(i & 0xff);
    ids[N_ODD] = strtab_intern(t, all, sizeof all, NULL);

    segment *ro = mt_attach(pid, 0);
    for (size_t i = 0; i < N_ODD; i++) {
        get_is(s, ids[i], odd_names[i].bytes, odd_names[i].len);
        get_is(ro, ids[i], odd_names[i].bytes, odd_names[i].len);
        /* Same bytes, same id; different bytes, different id. */
        ck_assert_uint_eq(strtab_intern(t, odd_names[i].bytes, odd_names[i].len, NULL), ids[i]);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(ids[i] != ids[j], "\"%s\" and \"%s\" share id %u", odd_names[i].label,
                          odd_names[j].label, ids[i]);
    }
    get_is(ro, ids[N_ODD], all, sizeof all);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->string_count), N_ODD + 1 + 2);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->string_drops), 0);
    /* Interning from a buffer that is not the original: equality is by bytes. */
    char copy[64];
    memcpy(copy, odd_names[2].bytes, odd_names[2].len);
    ck_assert_uint_eq(strtab_intern(t, copy, odd_names[2].len, NULL), ids[2]);
    segment_close(ro, 0);
    strtab_destroy(t);
    segment_close(s, 1);
}
END_TEST

static const size_t long_lens[] = {TS_NAME_MAX - 1, TS_NAME_MAX, TS_NAME_MAX + 1,
                                   TS_NAME_MAX + 4096, 1u << 20};

START_TEST(test_long_names_cut)
{
    size_t len = long_lens[_i];
    segment *s = strtab_segment(2, 1024, 1u << 20);
    strtab *t = strtab_make(s);
    char *name = malloc(len);
    ck_assert_ptr_nonnull(name);
    for (size_t i = 0; i < len; i++)
        name[i] = (char)('a' + i % 23);
    int truncated = -1;
    uint32_t id = strtab_intern(t, name, len, &truncated);
    ck_assert_uint_ge(id, 2);
    ck_assert_int_eq(truncated, len > TS_NAME_MAX);
    /* A cut name says so, with its whole length, within TS_NAME_MAX bytes: its first bytes,
     * then "...[cut: N bytes]" (before, its first TS_NAME_MAX bytes without a word). */
    char *kept = malloc(TS_NAME_MAX);
    ck_assert_ptr_nonnull(kept);
    size_t klen = len;
    if (len > TS_NAME_MAX) {
        char tail[48];
        size_t tl = (size_t)snprintf(tail, sizeof tail, "...[cut: %zu bytes]", len);
        memcpy(kept, name, TS_NAME_MAX - tl);
        memcpy(kept + TS_NAME_MAX - tl, tail, tl);
        klen = TS_NAME_MAX;
    } else {
        memcpy(kept, name, len);
    }
    get_is(s, id, kept, klen);
    /* The cut name is the same name as what it was cut to, and as itself again. */
    truncated = -1;
    ck_assert_uint_eq(strtab_intern(t, kept, klen, &truncated), id);
    ck_assert_int_eq(truncated, 0);
    ck_assert_uint_eq(strtab_intern(t, name, len, NULL), id);
    /* One byte shorter is another name. */
    ck_assert_uint_ne(strtab_intern(t, kept, klen - 1, NULL), id);
    free(kept);
    free(name);
    strtab_destroy(t);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_table_full)
{
    const uint32_t max = 16;
    segment *s = strtab_segment(3, max, 1u << 20);
    ts_segment_header *h = segment_header(s);
    strtab *t = strtab_make(s);
    uint32_t ids[16];
    char name[32];
    for (uint32_t i = 0; i < max - 2; i++) {
        int n = snprintf(name, sizeof name, "name %u", i);
        ids[i] = strtab_intern(t, name, (size_t)n, NULL);
        ck_assert_uint_eq(ids[i], i + 2);
    }
    ck_assert_uint_eq(atomic_load(&h->string_count), max);
    ck_assert_uint_eq(atomic_load(&h->string_drops), 0);
    for (uint32_t k = 1; k <= 3; k++) {
        int n = snprintf(name, sizeof name, "one too many %u", k);
        ck_assert_uint_eq(strtab_intern(t, name, (size_t)n, NULL), TS_STR_OVERFLOW);
        ck_assert_uint_eq(atomic_load(&h->string_drops), k);
    }
    /* Known names still resolve, and the table did not grow. */
    for (uint32_t i = 0; i < max - 2; i++) {
        int n = snprintf(name, sizeof name, "name %u", i);
        ck_assert_uint_eq(strtab_intern(t, name, (size_t)n, NULL), ids[i]);
        get_is(s, ids[i], name, (size_t)n);
    }
    ck_assert_uint_eq(atomic_load(&h->string_count), max);
    ck_assert_uint_eq(atomic_load(&h->string_drops), 3);
    strtab_destroy(t);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_arena_full)
{
    const uint32_t arena = 4096;
    segment *s = strtab_segment(4, 1024, arena);
    ts_segment_header *h = segment_header(s);
    strtab *t = strtab_make(s);
    char name[1000];
    uint32_t ids[16];
    uint32_t n = 0;
    /* Names of 1000 bytes until one does not fit. */
    for (;; n++) {
        ck_assert_uint_lt(n, 16);
        memset(name, 'a' + (int)n, sizeof name);
        uint32_t used = atomic_load(&h->string_used);
        ids[n] = strtab_intern(t, name, sizeof name, NULL);
        if (ids[n] == TS_STR_OVERFLOW) {
            /* Refused only when it really did not fit. */
            ck_assert_uint_gt(used + sizeof name, arena - 4);
            ck_assert_uint_eq(atomic_load(&h->string_used), used);
            break;
        }
        ck_assert_uint_le(atomic_load(&h->string_used), arena);
    }
    ck_assert_uint_ge(n, 3);
    ck_assert_uint_eq(atomic_load(&h->string_drops), 1);
    ck_assert_uint_eq(atomic_load(&h->string_count), n + 2);
    /* A name longer than the whole arena. */
    char *big = malloc(TS_NAME_MAX);
    ck_assert_ptr_nonnull(big);
    memset(big, 'z', TS_NAME_MAX);
    ck_assert_uint_eq(strtab_intern(t, big, TS_NAME_MAX, NULL), TS_STR_OVERFLOW);
    ck_assert_uint_eq(atomic_load(&h->string_drops), 2);
    free(big);
    /* Small names fill what is left, to the last byte and never beyond. */
    uint32_t small = 0;
    for (;; small++) {
        ck_assert_uint_lt(small, 1000);
        char tiny[8];
        int len = snprintf(tiny, sizeof tiny, "%03u", small);
        uint32_t id = strtab_intern(t, tiny, (size_t)len, NULL);
        uint32_t used = atomic_load(&h->string_used);
        ck_assert_uint_le(used, arena);
        if (id == TS_STR_OVERFLOW) {
            ck_assert_uint_lt(arena - used, 4 + 3 + 1); /* an entry of 3 bytes: 8 */
            break;
        }
        get_is(s, id, tiny, (size_t)len);
    }
    ck_assert_uint_gt(small, 0);
    ck_assert_uint_eq(atomic_load(&h->string_drops), 3);
    for (uint32_t i = 0; i < n; i++) {
        memset(name, 'a' + (int)i, sizeof name);
        get_is(s, ids[i], name, sizeof name);
        ck_assert_uint_eq(strtab_intern(t, name, sizeof name, NULL), ids[i]);
    }
    ck_assert_uint_eq(atomic_load(&h->string_count), n + 2 + small);
    strtab_destroy(t);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Damaged tables                                                                             */
/* ------------------------------------------------------------------------------------------ */

START_TEST(test_get_out_of_range)
{
    segment *s = strtab_segment(5, 64, 4096);
    strtab *t = strtab_make(s);
    ck_assert_uint_eq(strtab_intern(t, B("x"), NULL), 2);
    static const uint32_t ids[] = {3, 4, 63, 64, 65, 1u << 24, UINT32_MAX};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        ck_assert_ptr_null(strtab_get(s, ids[i], NULL));
    /* A count published beyond the table's size (damage) still stops at string_max. */
    atomic_store(&segment_header(s)->string_count, UINT32_MAX);
    ck_assert_ptr_null(strtab_get(s, 64, NULL));
    ck_assert_ptr_null(strtab_get(s, UINT32_MAX, NULL));
    strtab_destroy(t);
    segment_close(s, 1);
}
END_TEST

enum { KEEP, ABS, FROM_END }; /* how an entry's offset is changed */
#define LEN_KEEP INT64_MIN

static const struct bad_entry {
    const char *label;
    int off_mode;
    int64_t off;    /* ABS: the offset; FROM_END: arena size + off */
    int64_t length; /* the entry's length word, or LEN_KEEP */
    int readable;
} bad_entries[] = {
    {"intact", KEEP, 0, LEN_KEEP, 1},
    {"offset at the arena's end", FROM_END, 0, LEN_KEEP, 0},
    {"offset 3 bytes before the end", FROM_END, -3, LEN_KEEP, 0},
    {"offset far beyond", ABS, 1ll << 31, LEN_KEEP, 0},
    {"offset max", ABS, UINT32_MAX, LEN_KEEP, 0},
    {"empty entry in the last 4 bytes (no room for its NUL)", FROM_END, -4, 0, 0},
    {"entry ending on the arena's last byte", FROM_END, -16, 11, 1},
    {"entry one byte longer than the arena", FROM_END, -16, 12, 0},
    {"length beyond the arena", KEEP, 0, 16384, 0},
    {"length max", KEEP, 0, UINT32_MAX, 0},
    {"length TS_NAME_MAX + 1", KEEP, 0, TS_NAME_MAX + 1, 0},
    {"length TS_NAME_MAX", KEEP, 0, TS_NAME_MAX, 1},
};

START_TEST(test_get_damaged_entry)
{
    const struct bad_entry *d = &bad_entries[_i];
    /* An arena larger than TS_NAME_MAX, so that the two length limits differ. */
    const uint32_t arena = 16384;
    segment *s = strtab_segment(6, 64, arena);
    ts_segment_header *h = segment_header(s);
    strtab *t = strtab_make(s);
    uint32_t id = strtab_intern(t, B("victim"), NULL);
    ck_assert_uint_eq(id, 2);
    uint32_t *index = segment_at(s, h->string_index_off, h->string_max * sizeof(uint32_t));
    char *base = segment_at(s, h->string_arena_off, arena);
    ck_assert(index && base);
    if (d->off_mode == ABS)
        index[id] = (uint32_t)d->off;
    else if (d->off_mode == FROM_END)
        index[id] = (uint32_t)((int64_t)arena + d->off);
    uint32_t off = index[id];
    uint32_t want_len = 6;
    if (d->length != LEN_KEEP) {
        want_len = (uint32_t)d->length;
        ck_assert_uint_le((uint64_t)off + 4, arena);
        memcpy(base + off, &want_len, sizeof want_len);
    }
    uint32_t len = UINT32_MAX;
    const char *p = strtab_get(s, id, &len);
    if (d->readable) {
        ck_assert_msg(p != NULL, "%s: refused", d->label);
        ck_assert_ptr_eq(p, base + off + 4);
        ck_assert_uint_eq(len, want_len);
        ck_assert_uint_le((uint64_t)off + 4 + len + 1, arena);
        if (d->off_mode == KEEP && d->length == LEN_KEEP)
            get_is(s, id, "victim", 6);
    } else {
        ck_assert_msg(p == NULL, "%s: accepted", d->label);
    }
    /* The other ids are untouched. */
    get_is(s, TS_STR_OVERFLOW, overflow_name, sizeof overflow_name - 1);
    strtab_destroy(t);
    segment_close(s, 1);
}
END_TEST

/* ------------------------------------------------------------------------------------------ */
/* Threads                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct interner {
    strtab *t;
    const segment *ro;
    pthread_barrier_t *start;
    unsigned index, names;
    uint32_t *ids; /* per name; UINT32_MAX when this thread did not intern it */
    const char *error;
} interner;

static size_t name_of(unsigned k, char *out, size_t cap)
{
    /* Varied lengths, odd bytes, and many shared prefixes. */
    int n = snprintf(out, cap, "op/%u/%.*s", k, (int)(k % 40),
                     "\xff\"\n,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    return (size_t)n;
}

static void *interner_run(void *arg)
{
    interner *w = arg;
    char name[128];
    pthread_barrier_wait(w->start);
    /* Each thread takes two thirds of the names, from its own starting point and stride, so
     * every name is interned by several threads, at different times. */
    for (unsigned j = 0; j < w->names; j++) {
        unsigned k = (j * 7 + w->index * 131) % w->names;
        if ((k + w->index) % 3 == 0)
            continue;
        size_t len = name_of(k, name, sizeof name);
        uint32_t id = strtab_intern(w->t, name, len, NULL);
        w->ids[k] = id;
        /* Any reader sees the bytes as soon as it has the id. */
        uint32_t got;
        const char *p = strtab_get(w->ro, id, &got);
        if (!p || got != len || memcmp(p, name, len) != 0) {
            w->error = "a fresh id did not read back";
            return NULL;
        }
    }
    return NULL;
}

/* A reader that walks the published ids while they are being added. */
typedef struct walker {
    const segment *ro;
    _Atomic int *stop;
    const char *error;
    uint64_t reads;
} walker;

static void *walker_run(void *arg)
{
    walker *w = arg;
    const ts_segment_header *h = segment_header(w->ro);
    while (!atomic_load(w->stop)) {
        uint32_t count =
            atomic_load_explicit(&((ts_segment_header *)h)->string_count, memory_order_acquire);
        for (uint32_t id = 2; id < count; id++) {
            uint32_t len;
            const char *p = strtab_get(w->ro, id, &len);
            if (!p || len < 5 || memcmp(p, "op/", 3) != 0 || p[len] != 0) {
                w->error = "a published id is unreadable or malformed";
                return NULL;
            }
            w->reads++;
        }
    }
    return NULL;
}

START_TEST(test_concurrent_interning)
{
    unsigned nthreads = mt_scale(8, 4);
    unsigned names = mt_scale(3000, 400);
    pid_t pid = mt_pid(7);
    segment_config cfg = mt_config(pid);
    cfg.string_max = 8192;
    segment *s = mt_create(&cfg);
    segment *ro = mt_attach(pid, 0);
    strtab *t = strtab_make(s);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, nthreads);
    interner *w = calloc(nthreads, sizeof *w);
    pthread_t *th = calloc(nthreads, sizeof *th);
    ck_assert(w && th);
    _Atomic int stop = 0;
    walker wk = {.ro = ro, .stop = &stop};
    pthread_t wt;
    ck_assert_int_eq(pthread_create(&wt, NULL, walker_run, &wk), 0);
    for (unsigned i = 0; i < nthreads; i++) {
        w[i] = (interner){.t = t, .ro = ro, .start = &start, .index = i, .names = names};
        w[i].ids = malloc(names * sizeof(uint32_t));
        ck_assert_ptr_nonnull(w[i].ids);
        for (unsigned k = 0; k < names; k++)
            w[i].ids[k] = UINT32_MAX;
        ck_assert_int_eq(pthread_create(&th[i], NULL, interner_run, &w[i]), 0);
    }
    for (unsigned i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    atomic_store(&stop, 1);
    pthread_join(wt, NULL);
    ck_assert_msg(wk.error == NULL, "walker: %s", wk.error);
    for (unsigned i = 0; i < nthreads; i++)
        ck_assert_msg(w[i].error == NULL, "thread %u: %s", i, w[i].error);

    /* Every thread agrees on every name's id; different names have different ids. */
    uint32_t count = atomic_load(&segment_header(s)->string_count);
    unsigned char *seen = calloc(count, 1);
    ck_assert_ptr_nonnull(seen);
    unsigned distinct = 0;
    char name[128];
    for (unsigned k = 0; k < names; k++) {
        uint32_t id = UINT32_MAX;
        for (unsigned i = 0; i < nthreads; i++) {
            if (w[i].ids[k] == UINT32_MAX)
                continue;
            if (id == UINT32_MAX)
                id = w[i].ids[k];
            ck_assert_msg(w[i].ids[k] == id, "name %u: ids %u and %u", k, id, w[i].ids[k]);
        }
        if (id == UINT32_MAX)
            continue;
        distinct++;
        ck_assert_uint_ge(id, 2);
        ck_assert_uint_lt(id, count);
        ck_assert_msg(!seen[id], "id %u given to two names", id);
        seen[id] = 1;
        get_is(ro, id, name, name_of(k, name, sizeof name));
    }
    ck_assert_uint_eq(distinct, names); /* every name was interned by some thread */
    ck_assert_uint_eq(count, distinct + 2);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->string_drops), 0);
    free(seen);
    for (unsigned i = 0; i < nthreads; i++)
        free(w[i].ids);
    free(w);
    free(th);
    pthread_barrier_destroy(&start);
    strtab_destroy(t);
    segment_close(ro, 0);
    segment_close(s, 1);
}
END_TEST

/* Many threads hitting a table that fills up: each thread's names either get a real id or
 * TS_STR_OVERFLOW, the counts add up, and no id is given twice. */
typedef struct filler {
    strtab *t;
    pthread_barrier_t *start;
    unsigned index, names;
    uint32_t *ids;
} filler;

static void *filler_run(void *arg)
{
    filler *f = arg;
    char name[64];
    pthread_barrier_wait(f->start);
    for (unsigned k = 0; k < f->names; k++) {
        int n = snprintf(name, sizeof name, "t%u-%u", f->index, k);
        f->ids[k] = strtab_intern(f->t, name, (size_t)n, NULL);
    }
    return NULL;
}

START_TEST(test_concurrent_overflow)
{
    enum { MAX = 64 };
    unsigned nthreads = mt_scale(8, 4), names = 40;
    segment *s = strtab_segment(8, MAX, 1u << 20);
    strtab *t = strtab_make(s);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, nthreads);
    filler *f = calloc(nthreads, sizeof *f);
    pthread_t *th = calloc(nthreads, sizeof *th);
    ck_assert(f && th);
    for (unsigned i = 0; i < nthreads; i++) {
        f[i] = (filler){.t = t, .start = &start, .index = i, .names = names};
        f[i].ids = calloc(names, sizeof(uint32_t));
        ck_assert_ptr_nonnull(f[i].ids);
        ck_assert_int_eq(pthread_create(&th[i], NULL, filler_run, &f[i]), 0);
    }
    unsigned char seen[MAX] = {0};
    unsigned real = 0, over = 0;
    char name[64];
    for (unsigned i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        for (unsigned k = 0; k < names; k++) {
            uint32_t id = f[i].ids[k];
            if (id == TS_STR_OVERFLOW) {
                over++;
                continue;
            }
            ck_assert_uint_ge(id, 2);
            ck_assert_uint_lt(id, MAX);
            ck_assert(!seen[id]);
            seen[id] = 1;
            real++;
            int n = snprintf(name, sizeof name, "t%u-%u", i, k);
            get_is(s, id, name, (size_t)n);
        }
        free(f[i].ids);
    }
    ck_assert_uint_eq(real, MAX - 2);
    ck_assert_uint_eq(real + over, nthreads * names);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->string_drops), over);
    ck_assert_uint_eq(atomic_load(&segment_header(s)->string_count), MAX);
    free(f);
    free(th);
    pthread_barrier_destroy(&start);
    strtab_destroy(t);
    segment_close(s, 1);
}
END_TEST

static Suite *strtab_suite(void)
{
    Suite *s = suite_create("strtab");
    TCase *tc = tcase_create("names");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_reserved_ids);
    tcase_add_test(tc, test_any_bytes_round_trip);
    tcase_add_loop_test(tc, test_long_names_cut, 0, sizeof long_lens / sizeof long_lens[0]);
    tcase_add_test(tc, test_table_full);
    tcase_add_test(tc, test_arena_full);
    suite_add_tcase(s, tc);

    tc = tcase_create("damaged");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_get_out_of_range);
    tcase_add_loop_test(tc, test_get_damaged_entry, 0, sizeof bad_entries / sizeof bad_entries[0]);
    suite_add_tcase(s, tc);

    tc = tcase_create("threads");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_test(tc, test_concurrent_interning);
    tcase_add_test(tc, test_concurrent_overflow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(strtab_suite());
}
