/* Tests of termsight analyse run as a real program: the report, a job, --op, bad and truncated
 * input, the output folder, its usage; and the option forms every command shares. dump and ls:
 * test_cli.c. */
#include "model.h"

#define TESTUTIL_TAG "cli-analyse"
#include "testutil.h"
#include "shmnames.h"
#include "cliutil.h"
#include "recutil.h"

#include <cJSON.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* analyse                                                                                    */

/* The text of the file at path (malloc'd); fails the test when it cannot be read. */
static char *text_at(const char *path)
{
    int fd = open(path, O_RDONLY);
    ck_assert_msg(fd >= 0, "cannot open %s", path);
    size_t len;
    char *text = file_slurp(fd, &len);
    close(fd);
    ck_assert_ptr_nonnull(text);
    return text;
}

/* ------------------------------------------------------------------------------------------ */

START_TEST(test_analyse_report)
{
    char *tmp = tmp_make();
    char *run = rec_make_run(tmp, "run");
    cli_result r;
    cli_run(tmp, (const char *const[]){"analyse", run, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_str_eq(r.err, "");
    const char *parts[] = {"run:        trainer (pid 5151)",
                           "events:     8 over 0.002 s",
                           "steps:      2 steps, average 1.000 ms",
                           "top op types by total time:",
                           "              total  self share     calls      average  type",
                           "   1.      0.600 ms      92.3 %         3     0.200 ms  MatMul",
                           "   2.      0.050 ms       7.7 %         1     0.050 ms  BiasAdd",
                           "data queues: none recorded",
                           "suggestions:",
                           "report:     "};
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        ck_assert_msg(strstr(r.out, parts[i]), "stdout lacks '%s':\n%s", parts[i], r.out);
    char *real = realpath(run, NULL);
    char want[4200];
    snprintf(want, sizeof(want), "report:     %s/report\n", real);
    ck_assert_msg(strstr(r.out, want), "stdout lacks '%s':\n%s", want, r.out);
    cli_result_free(&r);
    const char *files[] = {"summary.json", "report.txt", "timeline.json", "op_statistics.csv",
                           "step_trace.csv"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char *p;
        ck_assert_int_ge(asprintf(&p, "%s/report/%s", real, files[i]), 0);
        ck_assert_msg(access(p, F_OK) == 0, "%s missing", p);
        free(p);
    }
    /* Again, from the .tsr file, into -o DIR, pretty. */
    char *out = path_join(tmp, "elsewhere/rep");
    char *file = path_join(run, TS_RECORDING_DIR "/" TS_RECORDING_FILE);
    cli_run(tmp, (const char *const[]){"analyse", "-o", out, "--pretty", file, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    cli_result_free(&r);
    char *sum = path_join(out, "summary.json");
    char *text = text_at(sum);
    ck_assert_msg(!strncmp(text, "{\n\t\"termsight\":", 15), "not pretty: %.40s", text);
    free(text);
    free(sum);
    free(file);
    free(out);
    free(real);
    free(run);
    tmp_remove(tmp);
}
END_TEST

/* A job folder: each rank analysed, then the job report; --merge-only merges what is there. */
START_TEST(test_analyse_job)
{
    char *tmp = tmp_make();
    char *job = path_join(tmp, "j");
    ck_assert_int_eq(mkdir(job, 0700), 0);
    char *r0 = rec_make_rank(job, 0, NULL), *r1 = rec_make_rank(job, 1, NULL);
    cli_result r;
    /* Nothing analysed yet: a merge alone has nothing to merge. */
    cli_run(tmp, (const char *const[]){"analyse", "--merge-only", job, NULL}, &r);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "no rank of a job could be used"));
    cli_result_free(&r);

    cli_run(tmp, (const char *const[]){"analyse", "-j", "2", job, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "job:        j, 2 ranks of 2\n"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "skew:       2 steps aligned by number"), "%s", r.out);
    /* The ranks record steps and no communication: no verdict, and the report says why. */
    ck_assert_msg(strstr(r.out, "stragglers: unknown: 2 ranks recorded no communication"), "%s",
                  r.out);
    cli_result_free(&r);
    const char *files[] = {"report/summary.json",  "report/ranks.csv",
                           "report/job_steps.csv", "report/job_step_trace.csv",
                           "report/timeline.json", "report/report.txt"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = path_join(job, files[i]);
        ck_assert_msg(access(p, F_OK) == 0, "%s missing", p);
        free(p);
    }
    /* Each rank has its own report too, lean: its tables and summary, no report.html and no
     * report.sqlite (the job report has its database). */
    char *p0 = path_join(r0, "report/summary.json");
    ck_assert_int_eq(access(p0, F_OK), 0);
    free(p0);
    char *db0 = path_join(r0, "report/report.sqlite"),
         *dbj = path_join(job, "report/report.sqlite");
    ck_assert_int_ne(access(db0, F_OK), 0);
    ck_assert_int_eq(access(dbj, F_OK), 0);
    free(dbj);
    p0 = path_join(r0, "report/report.html");
    ck_assert_int_ne(access(p0, F_OK), 0);
    /* --rank: that rank's full report, on demand; a rank the job lacks is said. */
    cli_run(tmp, (const char *const[]){"analyse", "--rank", "0", job, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "rank 0 of 2"), "%s", r.out);
    cli_result_free(&r);
    ck_assert_int_eq(access(p0, F_OK), 0);
    free(p0);
    ck_assert_int_eq(access(db0, F_OK), 0); /* the whole report has its database */
    free(db0);
    cli_run(tmp, (const char *const[]){"analyse", "--rank", "5", job, NULL}, &r);
    ck_assert_int_eq(r.status, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "no run folder of rank 5"));
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"analyse", "--rank", "0", "--merge-only", job, NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"analyse", "--rank", "0", "--steps", "1-2", job, NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--steps is for a job folder's timeline"));
    cli_result_free(&r);
    /* --steps: the job's timeline holds step 2 alone, the window said in summary.json. */
    cli_run(tmp, (const char *const[]){"analyse", "--steps", "2", job, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    cli_result_free(&r);
    char *sp = path_join(job, "report/summary.json"), *sum0 = text_at(sp);
    ck_assert_msg(strstr(sum0, "\"steps\":{\"first\":2,\"last\":2}"), "%s", sum0);
    free(sum0);
    free(sp);

    /* A rank's report removed: merged again without it, saying so. */
    char *sum1 = path_join(r1, "report/summary.json");
    ck_assert_int_eq(unlink(sum1), 0);
    free(sum1);
    cli_run(tmp, (const char *const[]){"analyse", "--merge-only", job, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.out, "no report"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "rank 1 of 2 is missing"), "%s", r.out);
    cli_result_free(&r);

    /* Options that have no use on a job folder, or need one. */
    cli_run(tmp, (const char *const[]){"analyse", "--op", "MatMul", job, NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"analyse", "-j", "0", job, NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"analyse", "--merge-only", r0, NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "for a job folder"));
    cli_result_free(&r);
    free(r0);
    free(r1);
    free(job);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_analyse_op)
{
    char *tmp = tmp_make();
    char *run = rec_make_run(tmp, "run");
    cli_result r;
    cli_run(tmp, (const char *const[]){"analyse", "--op", "MatMul", run, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    /* The second line is one string cut in two: in parentheses, so that it reads as meant. */
    const char *want[] = {
        "op type: MatMul",
        ("count 3, total 0.600 ms, average 0.200 ms, min 0.100 ms, max 0.300 ms, 92.3 % of all "
         "ops' self time"),
        "",
        "   count     total_ms     avg_ms     min_ms     max_ms  share  op",
        "       2        0.300      0.150      0.100      0.200   46.2  Default/fc/MatMul-op1",
        "       1        0.300      0.300      0.300      0.300   46.2  Default/fc/MatMul-op2",
    };
    lines_expect(&r, want, sizeof(want) / sizeof(want[0]));
    cli_result_free(&r);
    char *rep = path_join(run, "report");
    ck_assert_msg(access(rep, F_OK) != 0, "--op wrote a report");

    /* --json: the same figures in summary.json's row shape, times in microseconds. */
    cli_run(tmp, (const char *const[]){"analyse", "--op", "MatMul", "--json", run, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    cJSON *j = cJSON_Parse(r.out);
    ck_assert_msg(j != NULL, "not JSON:\n%s", r.out);
    cJSON *type = cJSON_GetObjectItem(j, "type");
    ck_assert_str_eq(cJSON_GetObjectItem(type, "type")->valuestring, "MatMul");
    ck_assert_int_eq(cJSON_GetObjectItem(type, "count")->valueint, 3);
    ck_assert(fabs(cJSON_GetObjectItem(type, "total_us")->valuedouble - 600.0) < 1e-6);
    ck_assert(fabs(cJSON_GetObjectItem(type, "max_us")->valuedouble - 300.0) < 1e-6);
    cJSON *ops = cJSON_GetObjectItem(j, "ops");
    ck_assert_int_eq(cJSON_GetArraySize(ops), 2);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(ops, 0), "op")->valuestring,
                     "Default/fc/MatMul-op1");
    cJSON_Delete(j);
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"analyse", "--json", run, NULL}, &r);
    ck_assert_int_eq(r.status, 2);
    err_expect(&r, "--json goes with --op");
    cli_result_free(&r);

    /* A unique case-insensitive substring will do; an unknown type is an error. */
    cli_run(tmp, (const char *const[]){"analyse", "--op=biasa", run, NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    ck_assert(!strncmp(r.out, "op type: BiasAdd\ncount 1,", 25));
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"analyse", "--op", "Conv2D", run, NULL}, &r);
    ck_assert_int_eq(r.status, 1);
    err_expect(&r, "no op type or operator named 'Conv2D' in this recording");
    cli_result_free(&r);
    /* An operator's own name (a label, a record_function's) when no type has it. */
    cli_run(tmp, (const char *const[]){"analyse", "--op", "Default/fc/MatMul-op1", run, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    static const char op_head[] = "op: Default/fc/MatMul-op1\ntype: MatMul\ncount 2,";
    ck_assert_msg(!strncmp(r.out, op_head, sizeof op_head - 1), "%s", r.out);
    cli_result_free(&r);
    cli_run(tmp,
            (const char *const[]){"analyse", "--op", "Default/fc/MatMul-op1", "--json", run, NULL},
            &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    cJSON *one = cJSON_Parse(r.out);
    ck_assert_msg(one != NULL, "not JSON:\n%s", r.out);
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(one, "op"), "op")->valuestring,
                     "Default/fc/MatMul-op1");
    cJSON_Delete(one);
    cli_result_free(&r);
    cli_run(tmp, (const char *const[]){"analyse", "--op", "a", run, NULL}, &r); /* both */
    ck_assert_int_eq(r.status, 1);
    err_expect(&r, "it matches:");
    cli_result_free(&r);
    free(rep);
    free(run);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_analyse_bad_files)
{
    char *tmp = tmp_make();
    char *missing = path_join(tmp, "missing"), *empty = path_join(tmp, "empty.tsr"),
         *foreign = path_join(tmp, "foreign.tsr");
    file_write(empty, "", 0);
    file_write(foreign, "PK\003\004 this is a zip file, not a recording", 40);
    const struct {
        const char *path, *says;
    } cases[] = {
        {missing, "cannot open"},
        {empty, "is empty"},
        {foreign, "is not a termsight recording"},
    };
    for (size_t i = 0; i < 3; i++) {
        cli_result r;
        cli_run(tmp, (const char *const[]){"analyse", cases[i].path, NULL}, &r);
        ck_assert_msg(r.status == 1, "%s: status %d", cases[i].path, r.status);
        err_expect(&r, cases[i].says);
        ck_assert_str_eq(r.out, "");
        cli_result_free(&r);
    }
    char *rep = path_join(tmp, "report");
    ck_assert_msg(access(rep, F_OK) != 0, "a report was written for a bad file");
    free(rep);
    free(missing);
    free(empty);
    free(foreign);
    tmp_remove(tmp);
}
END_TEST

/* An output folder given where a run folder belongs: the error lists the run folders and job
 * folders it holds, the newest first, as commands to copy. */
START_TEST(test_analyse_output_folder)
{
    char *tmp = tmp_make();
    char *out = path_join(tmp, "out");
    ck_assert_int_eq(mkdir(out, 0700), 0);
    static const char *const runs[] = {"old-1-20260101-000000-aaaaaaaa",
                                       "new-2-20260102-000000-bbbbbbbb", "job7/rank0-h-3-x"};
    static const time_t when[] = {1000000000, 1700000000, 1500000000};
    for (size_t i = 0; i < 3; i++) {
        char dir[1024], file[1100];
        snprintf(dir, sizeof dir, "%s/%s/recording", out, runs[i]);
        ck_assert(path_mkdirs(dir, 1, 0700, NULL) == 0);
        snprintf(file, sizeof file, "%s/events.tsr", dir);
        file_write(file, "", 0);
        struct timespec t[2] = {{when[i], 0}, {when[i], 0}};
        ck_assert_int_eq(utimensat(AT_FDCWD, file, t, 0), 0);
        snprintf(dir, sizeof dir, "%s/%.4s", out, runs[i]);
        if (i == 2) /* the job folder's own time */
            ck_assert_int_eq(utimensat(AT_FDCWD, dir, t, 0), 0);
    }
    char *junk = path_join(out, "notes");
    ck_assert_int_eq(mkdir(junk, 0700), 0);
    cli_result r;
    cli_run(tmp, (const char *const[]){"analyse", out, NULL}, &r);
    ck_assert_int_eq(r.status, 1);
    err_expect(&r, "holds no termsight recording");
    err_expect(&r, "holds 2 run folders and 1 job folder");
    const char *n = strstr(r.err, "new-2-"), *j = strstr(r.err, "/job7 "),
               *o = strstr(r.err, "old-1-");
    ck_assert_msg(n && j && o && n < j && j < o, "not the newest first:\n%s", r.err);
    err_expect(&r, "termsight analyse ");
    ck_assert_ptr_null(strstr(r.err, "notes"));
    cli_result_free(&r);
    free(junk);
    free(out);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_analyse_truncated)
{
    char *tmp = tmp_make();
    char *run = rec_make_run(tmp, "run");
    char *file = path_join(run, TS_RECORDING_DIR "/" TS_RECORDING_FILE);
    struct stat st;
    ck_assert_int_eq(stat(file, &st), 0);
    ck_assert_int_eq(truncate(file, st.st_size - 40), 0); /* inside the second event chunk */
    cli_result r;
    cli_run(tmp, (const char *const[]){"analyse", run, NULL}, &r);
    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    err_expect(&r, "warning: ");
    err_expect(&r, "bytes skipped in 1 damaged chunks; the rest was analysed");
    /* The first chunk's events: step 1 and its two MatMul ops. */
    ck_assert_msg(strstr(r.out, "events:     4 over"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "1 steps, average 1.000 ms"), "%s", r.out);
    cli_result_free(&r);
    free(file);
    free(run);
    tmp_remove(tmp);
}
END_TEST

static const struct {
    const char *args[6];
    const char *says;
} analyse_usages[] = {
    {{NULL}, "analyse: which recording?"},
    {{"--bogus", "x", NULL}, "analyse: unknown option '--bogus'"},
    {{"--timeline-limit", "lots", "x", NULL}, "--timeline-limit needs a size in MiB, not 'lots'"},
    {{"--peak-tflops", "-1", "x", NULL}, "--peak-tflops needs a positive number"},
    {{"x", "--op", NULL}, "analyse: --op needs a value"},
    {{"x", "y", NULL}, "one recording at a time"},
    {{"--pretty=yes", "x", NULL}, "--pretty takes no value"},
    {{"--op", "MatMul", "-o", "d", "x", NULL}, "-o has no use with it"},
    {{"--steps", "3-2", "x", NULL}, "--steps needs A-B, step numbers with 1 <= A <= B, not '3-2'"},
    {{"--steps", "0-2", "x", NULL}, "--steps needs A-B"},
    {{"--steps", "1-x", "x", NULL}, "--steps needs A-B"},
    {{"--steps", "1-2", "x", NULL}, "--steps is for a job folder's timeline"},
};

/* One parser for every command: "--name=value" reaches the same check as "--name value", a
 * value given to a flag is refused, and an unknown option is named, whichever the command. */
static const struct {
    const char *args[6];
    const char *says;
} option_forms[] = {
    {{"run", "--sample-ms=0", "--", "true", NULL}, "run: --sample-ms wants 1 to 3600000, got '0'"},
    {{"run", "--no-start=1", "--", "true", NULL}, "run: --no-start takes no value"},
    {{"run", "--bogus", "--", "true", NULL}, "run: unknown option '--bogus'"},
    {{"run", "-o", NULL}, "run: -o needs a value"},
    {{"top", "--refresh-ms=10", NULL}, "top: --refresh-ms: '10' is not a number"},
    {{"top", "--once=yes", NULL}, "top: --once takes no value"},
    {{"ls", "--clean=1", NULL}, "ls: --clean takes no value"},
    {{"dump", "--limit=x", "r", NULL}, "dump: --limit needs a whole number, not 'x'"},
    {{"dump", "-k", NULL}, "dump: -k needs a value"},
    {{"demo", "--workers=0", NULL}, "demo: --workers wants 1 to 64, not '0'"},
    {{"demo", "-x", NULL}, "demo: unknown option '-x'"},
    {{"analyse", "--timeline-limit=lots", "x", NULL}, "--timeline-limit needs a size in MiB"},
};

START_TEST(test_option_forms)
{
    char *tmp = tmp_make();
    cli_result r;
    cli_run(tmp, option_forms[_i].args, &r);
    ck_assert_int_eq(r.status, 2);
    err_expect(&r, option_forms[_i].says);
    cli_result_free(&r);
    tmp_remove(tmp);
}
END_TEST

START_TEST(test_analyse_usage)
{
    char *tmp = tmp_make();
    const char *argv[8] = {"analyse"};
    for (size_t i = 0; analyse_usages[_i].args[i]; i++)
        argv[i + 1] = analyse_usages[_i].args[i];
    cli_result r;
    cli_run(tmp, argv, &r);
    ck_assert_int_eq(r.status, 2);
    err_expect(&r, analyse_usages[_i].says);
    err_expect(&r, "usage: termsight analyse");
    cli_result_free(&r);

    cli_run(tmp, (const char *const[]){"analyse", "--help", NULL}, &r);
    ck_assert_int_eq(r.status, 0);
    const char *first = "usage: termsight analyse [options] RUN_FOLDER_OR_RECORDING\n";
    ck_assert(!strncmp(r.out, first, strlen(first)));
    cli_result_free(&r);
    tmp_remove(tmp);
}
END_TEST

Suite *analyse_suite(void)
{
    Suite *s = suite_create("analyse");
    TCase *tc = tcase_create("report");
    tcase_add_test(tc, test_analyse_report);
    tcase_add_test(tc, test_analyse_job);
    tcase_add_test(tc, test_analyse_op);
    tcase_add_test(tc, test_analyse_bad_files);
    tcase_add_test(tc, test_analyse_output_folder);
    tcase_add_test(tc, test_analyse_truncated);
    tcase_add_loop_test(tc, test_option_forms, 0,
                        (int)(sizeof option_forms / sizeof option_forms[0]));
    tcase_add_loop_test(tc, test_analyse_usage, 0,
                        sizeof(analyse_usages) / sizeof(analyse_usages[0]));
    suite_add_tcase(s, tc);
    return s;
}

/* ------------------------------------------------------------------------------------------ */

int main(void)
{
    SRunner *sr = srunner_create(analyse_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
