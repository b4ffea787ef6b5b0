/* termsight: the command's entry point and subcommand table. */
#include "cli.h"
#include "analysis.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const cli_command *const commands[] = {
    &cli_cmd_demo, &cli_cmd_ls,  &cli_cmd_dump,     &cli_cmd_analyse, &cli_cmd_diff,
    &cli_cmd_top,  &cli_cmd_run, &cli_cmd_snapshot, &cli_cmd_hang,    &cli_cmd_export,
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

void cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("termsight: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

const char *cli_clean(const char *s, char *buf, size_t cap)
{
    size_t n = strlen(s), room = (cap - 1) / 4;
    text_clean(s, n < room ? n : room, buf, 0);
    return buf;
}

int cli_getopt(const char *cmd, int argc, char **argv, const char *shorts,
               const struct option *longs, int stop_at_operand, int *first)
{
    char spec[64];
    snprintf(spec, sizeof spec, "%s:%s", stop_at_operand ? "+" : "", shorts);
    if (*first) {
        optind = 0; /* glibc: a full reset, for a second parse in one process (the fuzz target) */
        *first = 0;
    }
    opterr = 0;
    int prev = optind ? optind : 1;
    int c = getopt_long(argc, argv, spec, longs, NULL);
    if (c != '?' && c != ':')
        return c;
    const char *arg = optind - 1 >= 1 && optind - 1 < argc ? argv[optind - 1] : "";
    if (prev < argc && optind == prev) /* a short option inside a cluster ("-xq") */
        arg = argv[prev];
    const char *eq = strchr(arg, '=');
    if (c == ':')
        cli_error("%s: %s needs a value", cmd, arg);
    else if (optopt && !strncmp(arg, "--", 2) && eq)
        cli_error("%s: %.*s takes no value", cmd, (int)(eq - arg), arg);
    else if (optopt && strncmp(arg, "--", 2))
        cli_error("%s: unknown option '-%c'", cmd, optopt);
    else
        cli_error("%s: unknown option '%s'", cmd, arg);
    return 2;
}

int cli_exe_dir(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0)
        return -1;
    out[n] = 0;
    char *slash = strrchr(out, '/');
    if (slash)
        *slash = 0;
    return 0;
}

int cli_find_beside(const char *cmd, const char *env, const char *const *rel, size_t nrel, int mode,
                    const char *hint, char *out, size_t cap)
{
    char buf[PATH_MAX];
    const char *v = getenv(env);
    if (v && *v) {
        if (!realpath(v, buf) || access(buf, mode) != 0) {
            cli_error("%s: %s=%s: %s", cmd, env, v, strerror(errno ? errno : ENOENT));
            return -1;
        }
        snprintf(out, cap, "%s", buf);
        return 0;
    }
    char exe[PATH_MAX];
    if (cli_exe_dir(exe, sizeof exe) != 0) {
        cli_error("%s: cannot read /proc/self/exe: %s", cmd, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < nrel; i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", exe, rel[i]);
        if (realpath(cand, buf) && access(buf, mode) == 0) {
            snprintf(out, cap, "%s", buf);
            return 0;
        }
    }
    cli_error("%s: %s; looked at:", cmd, hint);
    for (size_t i = 0; i < nrel; i++)
        fprintf(stderr, "  %s/%s\n", exe, rel[i]);
    fprintf(stderr, "set %s to its path\n", env);
    return -1;
}

static void usage(FILE *out)
{
    fputs("usage: termsight COMMAND [ARGS]\n\ncommands:\n", out);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fputs("\n'termsight help COMMAND' (or 'termsight COMMAND --help') describes one command;\n"
          "'termsight --version' prints the version.\n",
          out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") && argc > 2) { /* termsight help COMMAND */
        for (size_t i = 0; i < N_COMMANDS; i++)
            if (!strcmp(argv[2], commands[i]->name)) {
                commands[i]->usage(stdout);
                return 0;
            }
        cli_error("help: unknown command '%s'", argv[2]);
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        puts("termsight " TERMSIGHT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i]->name))
            continue;
        for (int a = 2; a < argc && strcmp(argv[a], "--"); a++) {
            if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
                commands[i]->usage(stdout);
                return 0;
            }
        }
        return commands[i]->run(argc - 1, argv + 1, 0);
    }
    cli_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return 2;
}
