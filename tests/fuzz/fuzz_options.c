/* libFuzzer target for option parsing: the command line of every termsight command (their
 * cli_command.run with check set, which parses and acts on nothing) and the collector's
 * environment (termsight_options_init and session_check_options, TERMSIGHT_STEPS, the
 * TERMSIGHT_DELAY_S/DURATION_S seconds, the step pattern).
 *
 * The input's first byte chooses: even, a command line (the second byte picks the command; the
 * rest, split at NUL bytes, are its arguments); odd, environment values (the rest, split at NUL
 * bytes, are the values of the variables in `vars`, in order). Promises: a command line is
 * accepted (0) or refused as bad usage (2) with a message; a refused environment names what is
 * wrong; and `termsight run` accepts exactly the --steps, --delay, --duration, --sample-ms and
 * --step-pattern values that the collector it starts will accept from the variables it sets. */
#include "cli.h"
#include "collectors.h"
#include "fuzz.h"

#include <string.h>

#define ARGS_MAX 32

static const cli_command *const commands[] = {
    &cli_cmd_ls,  &cli_cmd_dump, &cli_cmd_analyse,  &cli_cmd_diff, &cli_cmd_top,
    &cli_cmd_run, &cli_cmd_demo, &cli_cmd_snapshot, &cli_cmd_hang, &cli_cmd_export,
};

static const char *const vars[] = {
    "TERMSIGHT_OUTPUT",      "TERMSIGHT_START",      "TERMSIGHT_LANE_EVENTS",
    "TERMSIGHT_MAX_THREADS", "TERMSIGHT_SAMPLE_MS",  "TERMSIGHT_TIMELINE_LIMIT_MB",
    "PROFILING_FP_START",    "PROFILING_BP_END",     "TERMSIGHT_STEPS",
    "TERMSIGHT_DELAY_S",     "TERMSIGHT_DURATION_S", "TERMSIGHT_STEP_PATTERN",
};

#define NVARS (sizeof vars / sizeof vars[0])

/* Splits text (len bytes, its own copy, NUL added) at NUL bytes into at most max strings. */
static int split(char *text, size_t len, char **out, int max)
{
    int n = 0;
    for (size_t at = 0; at <= len && n < max;) {
        out[n++] = text + at;
        at += strlen(text + at) + 1;
    }
    return n;
}

/* Every --step-pattern value of argv is one fuzz_pattern_testable takes: "--step-pattern V",
 * "--step-pattern=V" and the abbreviations getopt_long accepts ("--step-p V", from "--step-"). */
static int patterns_testable(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        if (n < 7 || n > 14 || strncmp(a, "--step-pattern", n))
            continue;
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !fuzz_pattern_testable(v))
            return 0;
    }
    return 1;
}

static void command_line(const uint8_t *data, size_t size)
{
    if (!size)
        return;
    const cli_command *cmd = commands[data[0] % (sizeof commands / sizeof commands[0])];
    char *text = malloc(size);
    if (!text)
        return;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = 0;
    char *argv[ARGS_MAX + 2];
    argv[0] = (char *)cmd->name;
    int argc = 1 + (size > 1 ? split(text, size - 1, argv + 1, ARGS_MAX) : 0);
    argv[argc] = NULL;
    if (patterns_testable(argc, argv)) {
        int rc = cmd->run(argc, argv, 1);
        FUZZ_CHECK(rc == 0 || rc == 2);
    }
    free(text);
}

/* What `termsight run` says of one option's value (the command `true` after it). */
static int run_accepts(const char *opt, const char *value)
{
    char *argv[] = {"run", (char *)opt, (char *)value, "--", "true", NULL};
    return cli_cmd_run.run(5, argv, 1) == 0;
}

/* The collector's options from the environment as it is now. */
static int options_accepted(void)
{
    termsight_options o;
    termsight_options_init(&o);
    int rc = session_check_options(&o);
    FUZZ_CHECK(rc == TERMSIGHT_OK || (rc == TERMSIGHT_E_INVALID && termsight_last_error()[0]));
    return rc == TERMSIGHT_OK;
}

static void environment(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return;
    memcpy(text, data, size);
    text[size] = 0;
    char *values[NVARS];
    int n = split(text, size, values, NVARS);
    for (int i = 0; i < n; i++)
        setenv(vars[i], values[i], 1);
    options_accepted();

    const char *v = getenv("TERMSIGHT_STEPS");
    if (v && *v) {
        uint64_t from = 0, to = 0;
        int ok = options_parse_steps(v, &from, &to) == 0;
        FUZZ_CHECK(!ok || (from >= 1 && from <= to));
        FUZZ_CHECK(ok == run_accepts("--steps", v));
    }
    static const char *const seconds[][2] = {{"TERMSIGHT_DELAY_S", "--delay"},
                                             {"TERMSIGHT_DURATION_S", "--duration"}};
    for (size_t k = 0; k < 2; k++) {
        if (!(v = getenv(seconds[k][0])) || !*v)
            continue;
        uint32_t s = UINT32_MAX;
        int ok = options_parse_u32(v, 0, TS_SECONDS_MAX, &s) == 0;
        FUZZ_CHECK(!ok || s <= TS_SECONDS_MAX);
        FUZZ_CHECK(ok == run_accepts(seconds[k][1], v));
    }
    v = getenv("TERMSIGHT_STEP_PATTERN");
    if (v && *v && fuzz_pattern_testable(v)) {
        regex_t re;
        char why[320] = "";
        int ok = nvtx_step_pattern_compile(v, &re, why, sizeof why) == 0;
        if (ok)
            regfree(&re);
        else
            FUZZ_CHECK(why[0]);
        FUZZ_CHECK(ok == run_accepts("--step-pattern", v));
    }
    /* --sample-ms alone: the collector sees it as TERMSIGHT_SAMPLE_MS with nothing else set. */
    char *sample = getenv("TERMSIGHT_SAMPLE_MS") ? strdup(getenv("TERMSIGHT_SAMPLE_MS")) : NULL;
    for (size_t i = 0; i < NVARS; i++)
        unsetenv(vars[i]);
    if (sample && *sample) {
        setenv("TERMSIGHT_SAMPLE_MS", sample, 1);
        FUZZ_CHECK(options_accepted() == run_accepts("--sample-ms", sample));
        unsetenv("TERMSIGHT_SAMPLE_MS");
    }
    free(sample);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size)
        return 0;
    if (data[0] & 1)
        environment(data + 1, size - 1);
    else
        command_line(data + 1, size - 1);
    return 0;
}
