/* cli: the termsight command's subcommands. */
#ifndef TERMSIGHT_CLI_H
#define TERMSIGHT_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* One subcommand. run gets argv with argv[0] the subcommand's name, and returns the exit
 * status: 0 success, 1 failure (a message printed on stderr), 2 bad usage. With check set it
 * only parses and checks argv, and returns 0 where it would have gone on (the option-parsing
 * fuzz target calls it so). */
typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv, int check);
    void (*usage)(FILE *out);
} cli_command;

/* Defines fn, the run function of a command that parses argv into a struct of type T and then
 * acts on it: parse(argc, argv, &opts) returns 0, or 2 after saying what is wrong; unless that
 * failed or check is set (parsed and checked, all the option-parsing fuzz target asks for),
 * fn returns exec(&opts). */
#define CLI_PARSE_EXEC(fn, T, parse, exec)                                                         \
    static int fn(int argc, char **argv, int check)                                                \
    {                                                                                              \
        T opts;                                                                                    \
        int rc = parse(argc, argv, &opts);                                                         \
        return rc || check ? rc : exec(&opts);                                                     \
    }

extern const cli_command cli_cmd_ls;
extern const cli_command cli_cmd_dump;
extern const cli_command cli_cmd_analyse;
extern const cli_command cli_cmd_diff;
extern const cli_command cli_cmd_top;
extern const cli_command cli_cmd_run;
extern const cli_command cli_cmd_demo;
extern const cli_command cli_cmd_snapshot;
extern const cli_command cli_cmd_hang;
extern const cli_command cli_cmd_export;

/* Prints "termsight: " and the formatted message on stderr, with a newline. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* s (any bytes) as one clean line for a terminal, into buf of cap bytes (cap >= 1): text_clean's
 * text (valid UTF-8; control characters, tab, CR and LF as \xNN), s cut first where the whole
 * would not fit. Every name from outside that a command prints passes through it. Returns buf. */
const char *cli_clean(const char *s, char *buf, size_t cap);

/* Every command's option parser: getopt_long over argv (argv[0] the command's name), so that
 * every command takes "--name value", "--name=value", "-n value" and ends its options at "--".
 * shorts is getopt's short-option string without any leading '+' or ':'; stop_at_operand ends
 * the options at the first operand (run: the command to run follows) instead of taking options
 * from anywhere. Call with *first set on the first call (it resets getopt's state). Returns the
 * option's val, -1 at the end (the operands are argv[optind..argc-1]), or 2 after printing
 * "cmd: unknown option 'X'", "cmd: X needs a value" or "cmd: X takes no value" (the caller shows
 * its usage and returns 2); no option may use 2 as its val. */
int cli_getopt(const char *cmd, int argc, char **argv, const char *shorts,
               const struct option *longs, int stop_at_operand, int *first);

/* The folder of the running termsight binary (from /proc/self/exe) in out: 0, or -1 with errno. */
int cli_exe_dir(char *out, size_t cap);

/* A file the command needs beside itself (the library, the demo trainer): the path in the
 * environment variable env when set, else the first of rel (paths relative to the directory of
 * the termsight binary) that exists with access mode. 0 and the absolute path in out, or -1 with
 * a message printed naming cmd, what was looked for (hint), every place looked at and env. */
int cli_find_beside(const char *cmd, const char *env, const char *const *rel, size_t nrel, int mode,
                    const char *hint, char *out, size_t cap);

/* Makes the output folder (the parent of run folders) and resolves it into out_abs (PATH_MAX
 * bytes): 0, or 1 after saying why not, naming cmd. The collector's rules for it
 * (collectors/util.c): a link there is followed only when it is the user's own or root's, and
 * the folder must be the user's or root's and not writable by others unless sticky
 * (path_trusted). */
int cli_output_folder(const char *cmd, const char *output, char *out_abs);

/* After process pid ended: when it left its segment (it ended without closing its session, by a
 * signal or _exit), the names and events its lanes still held are appended to its recording with
 * a note saying why (how it ended), and the segment is removed. recovered (cap bytes) gets a
 * sentence for the user when events were recovered, else "". Returns 0, also when nothing was
 * left; -1 with a message printed. */
int cli_stale_session(pid_t pid, const char *why, char *recovered, size_t cap);

/* The same for one segment of termsight ls's list. */
struct segment_info;
int cli_stale_segment(const struct segment_info *info, const char *why, char *recovered,
                      size_t cap);

/* What a collector answered to a command (cli_ask). */
typedef struct cli_answer {
    pid_t pid;
    int answered;    /* else error says why not */
    int32_t status;  /* the answer: 0, or a negative termsight error code */
    char msg[256];   /* its message (the mailbox's: TS_MAILBOX_MSG bytes) */
    char error[256]; /* not sent, or not answered */
} cli_answer;

/* Sends cmd (arg may be NULL) to the collector of every target (by its segment's name), then
 * waits at most wait_ms for all of their answers, out[i] for targets[i]; a target whose process
 * is stopped (or has exited) for two seconds is not waited for longer, its error says so. */
void cli_ask(const struct segment_info *targets, size_t n, uint32_t cmd, const char *arg,
             int wait_ms, cli_answer *out);

#endif
