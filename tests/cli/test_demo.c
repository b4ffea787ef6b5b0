/* termsight demo --headless, run as a real program ($TERMSIGHT_BIN with the trainer at
 * $TERMSIGHT_DEMO): the trainer trains, the report is written, and summary.json says what the
 * run did: the steps the trainer trained, every operator type it ran, and the queue verdict its
 * pipeline deserves (the map stage with --slow-map, the training otherwise). */
#define TESTUTIL_TAG "demo"
#include "testutil.h"

#include <cjson/cJSON.h>

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO_SECONDS "4"

static char *fd_slurp(int fd)
{
    ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    ck_assert_ptr_nonnull(buf);
    ssize_t got;
    while ((got = read(fd, buf + n, cap - n)) > 0) {
        n += (size_t)got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert_ptr_nonnull(buf);
        }
    }
    ck_assert_int_ge(got, 0);
    buf[n] = 0;
    return buf;
}

/* Runs "termsight demo --headless --seconds 4 -o <tmp> [--slow-map]"; its stdout. */
static char *demo_run(const char *tmp, int slow_map)
{
    const char *bin = getenv("TERMSIGHT_BIN"), *trainer = getenv("TERMSIGHT_DEMO");
    ck_assert_msg(bin && *bin, "TERMSIGHT_BIN is not set");
    ck_assert_msg(trainer && *trainer, "TERMSIGHT_DEMO is not set");
    char *out_path = path_join(tmp, "stdout-XXXXXX");
    int out = mkstemp(out_path);
    ck_assert_int_ge(out, 0);
    char *data = path_join(tmp, "data");
    const char *argv[] = {bin,          "demo", "--headless", "--seconds",
                          DEMO_SECONDS, "-o",   data,         slow_map ? "--slow-map" : NULL,
                          NULL};
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        if (dup2(out, STDOUT_FILENO) < 0)
            _exit(126);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    char *text = fd_slurp(out);
    close(out);
    unlink(out_path);
    free(out_path);
    free(data);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "termsight demo failed (status %d):\n%s",
                  st, text);
    return text;
}

/* The text after prefix at the start of a line, up to the line's end (malloc'd), or NULL. */
static char *line_after(const char *text, const char *prefix)
{
    size_t k = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, prefix, k)) {
            size_t len = strcspn(p + k, "\n");
            return strndup(p + k, len);
        }
    }
    return NULL;
}

static cJSON *summary_load(const char *folder)
{
    char *path = path_join(folder, "report/summary.json");
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "no %s", path);
    char *text = fd_slurp(fd);
    close(fd);
    cJSON *j = cJSON_Parse(text);
    ck_assert_msg(j != NULL, "%s is not JSON", path);
    free(text);
    free(path);
    return j;
}

static int has_op_type(const cJSON *j, const char *type)
{
    const cJSON *types = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "ops"), "top_types");
    const cJSON *t;
    cJSON_ArrayForEach(t, types)
    {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(t, "type"));
        if (name && !strcmp(name, type))
            return 1;
    }
    return 0;
}

/* Counts the queue findings with this verdict (and this bottleneck stage when op is not NULL). */
static int findings(const cJSON *j, const char *verdict, const char *op)
{
    int n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(j, "queue_findings"))
    {
        const char *v = cJSON_GetStringValue(cJSON_GetObjectItem(f, "verdict"));
        const char *o = cJSON_GetStringValue(cJSON_GetObjectItem(f, "bottleneck_op"));
        n += v && !strcmp(v, verdict) && (!op || (o && !strcmp(o, op)));
    }
    return n;
}

/* The checks both runs share; returns the parsed summary for the verdict checks. */
static cJSON *demo_check(const char *out)
{
    char *trained = line_after(out, "steps trained: ");
    ck_assert_msg(trained, "the trainer printed no step count:\n%s", out);
    long steps = strtol(trained, NULL, 10);
    ck_assert_int_gt(steps, 0); /* a few under sanitizers with --slow-map; compared below */
    char *folder = line_after(out, "run folder: ");
    ck_assert_msg(folder && folder[0] == '/', "the trainer printed no run folder:\n%s", out);
    ck_assert_msg(strstr(out, "test accuracy"), "no accuracy line:\n%s", out);
    ck_assert_msg(strstr(out, "data queues:"), "no report summary:\n%s", out);

    cJSON *j = summary_load(folder);
    const cJSON *count = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "steps"), "count");
    ck_assert_msg(cJSON_IsNumber(count), "summary.json has no steps.count");
    ck_assert_int_eq((long)count->valuedouble, steps);
    const char *types[] = {"MatMul",
                           "BiasAdd",
                           "ReLU",
                           "SoftmaxCrossEntropyWithLogits",
                           "SoftmaxCrossEntropyWithLogitsGrad",
                           "BiasAddGrad",
                           "ReluGrad",
                           "SGD"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        ck_assert_msg(has_op_type(j, types[i]), "op type %s missing from summary.json", types[i]);
    free(trained);
    free(folder);
    return j;
}

START_TEST(test_demo_keeps_up)
{
    char *tmp = tmp_make();
    char *out = demo_run(tmp, 0);
    cJSON *j = demo_check(out);
    ck_assert_msg(findings(j, "training", "train") >= 1,
                  "no 'training' verdict on the prefetch queue:\n%s", out);
    ck_assert_msg(!findings(j, "operator", NULL) && !findings(j, "data_processing", NULL) &&
                      !findings(j, "transfer", NULL),
                  "a bottleneck verdict without --slow-map:\n%s", out);
    cJSON_Delete(j);
    free(out);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_demo_slow_map)
{
    char *tmp = tmp_make();
    char *out = demo_run(tmp, 1);
    cJSON *j = demo_check(out);
    ck_assert_msg(findings(j, "operator", "map") + findings(j, "data_processing", "map") >= 1,
                  "the map stage is not named the bottleneck with --slow-map:\n%s", out);
    ck_assert_msg(!findings(j, "training", NULL),
                  "a 'training' verdict (the pipeline keeps up) with --slow-map:\n%s", out);
    cJSON_Delete(j);
    free(out);
    tmp_remove(tmp);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("demo");
    TCase *tc = tcase_create("headless");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_demo_keeps_up);
    tcase_add_test(tc, test_demo_slow_map);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
