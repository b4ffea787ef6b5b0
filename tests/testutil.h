/* testutil: temporary folders and files for the tests that need them.
 *
 * Define TESTUTIL_TAG (a short name) before including: folders are made under
 * $TERMSIGHT_TEST_TMP (else /tmp) as <tag>-XXXXXX. */
#ifndef TERMSIGHT_TESTUTIL_H
#define TERMSIGHT_TESTUTIL_H

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef TESTUTIL_TAG
#define TESTUTIL_TAG "test"
#endif

/* short_n in the default set, long_n in the long variant (TERMSIGHT_TEST_LONG set, as the
 * ctest label "long" does): the count or length of a soak or sweep. */
static inline long test_scale(long short_n, long long_n)
{
    const char *v = getenv("TERMSIGHT_TEST_LONG");
    return v && *v && strcmp(v, "0") != 0 ? long_n : short_n;
}

/* A new empty folder; free it with tmp_remove. */
static inline char *tmp_make(void)
{
    const char *base = getenv("TERMSIGHT_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    char *dir;
    ck_assert_int_ge(asprintf(&dir, "%s/" TESTUTIL_TAG "-XXXXXX", base), 0);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp %s: %s", dir, strerror(errno));
    return dir;
}

static inline int tmp_unlink(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes the folder and everything in it, without following links; frees dir. */
static inline void tmp_remove(char *dir)
{
    nftw(dir, tmp_unlink, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* "a/b", malloc'd. */
static inline char *path_join(const char *a, const char *b)
{
    char *p;
    ck_assert_int_ge(asprintf(&p, "%s/%s", a, b), 0);
    return p;
}

/* The size of the file at path (links followed). */
static inline uint64_t path_size(const char *path)
{
    struct stat st;
    ck_assert_msg(stat(path, &st) == 0, "stat %s: %s", path, strerror(errno));
    return (uint64_t)st.st_size;
}

static inline void file_write(const char *path, const void *bytes, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "fopen %s: %s", path, strerror(errno));
    ck_assert_uint_eq(fwrite(bytes, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

/* Runs a suite in the default (forking) mode; the exit status for main. */
static inline int tests_run(Suite *suite)
{
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
