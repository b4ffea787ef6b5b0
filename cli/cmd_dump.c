/* termsight dump: a recording's events as text, one event per line, for people and scripts.
 *
 * The line format is stable (documented in dump_usage); names are escaped so that no byte of
 * a name can break a line or a field. Damage in the recording is skipped by the reader and
 * reported at the end, after every whole chunk was printed. */
#include "cli.h"
#include "model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void dump_usage(FILE *out)
{
    fputs("usage: termsight dump [--kind NAME]... [--limit N] RECORDING\n"
          "\n"
          "Prints the events of a recording, one per line, in file order. RECORDING is a\n"
          "run folder, its recording/ folder, or the " TS_RECORDING_FILE " file.\n"
          "\n"
          "  -k, --kind NAME   only events of this kind (repeatable)\n"
          "  -n, --limit N     stop after N events\n"
          "\n"
          "Each line reads:\n"
          "  BEGIN_NS END_NS KIND tid=TID dev=DEV name=NAME type=TYPE aux=AUX corr=CORR\n"
          "  v0=V0 v1=V1 flags=0xFLAGS\n"
          "(on one line). DEV is a device index or 'host'. NAME and TYPE are double-quoted,\n"
          "with a backslash, a double quote and any byte below 0x20 or from 0x7f written as\n"
          "\\\\, \\\" and \\xNN; an id the recording does not name is written #ID. V0 is a\n"
          "floating-point number when flags has 0x1, else an integer. An unknown kind is\n"
          "written unknown(N).\n"
          "\n"
          "On stderr: the number of events printed and, when the recording is damaged, the\n"
          "bytes skipped. Exit status: 0 (also after skipping damage), 1 when RECORDING is\n"
          "missing, empty or not a recording, 2 on bad usage.\n"
          "\n"
          "kinds:",
          out);
    for (uint32_t k = 0; k < TS_KIND__COUNT; k++)
        fprintf(out, "%s %s", k % 8 ? "" : "\n ", event_kind_name(k));
    fputc('\n', out);
}

/* The kind named name, or -1. */
static int dump_kind(const char *name)
{
    for (uint32_t k = 0; k < TS_KIND__COUNT; k++) {
        if (!strcmp(name, event_kind_name(k)))
            return (int)k;
    }
    return -1;
}

static void dump_string(FILE *out, const recording_reader *r, uint32_t id)
{
    uint32_t len = 0;
    const char *s = recording_reader_string(r, id, &len);
    if (!s && id != TS_STR_NONE) {
        fprintf(out, "#%" PRIu32, id);
        return;
    }
    putc_unlocked('"', out);
    for (uint32_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '"') {
            putc_unlocked('\\', out);
            putc_unlocked(c, out);
        } else if (c < 0x20 || c >= 0x7f) {
            fprintf(out, "\\x%02x", c);
        } else {
            putc_unlocked(c, out);
        }
    }
    putc_unlocked('"', out);
}

static void dump_event(FILE *out, const recording_reader *r, const ts_event *e)
{
    const char *kind = event_kind_name(e->kind);
    if (!strcmp(kind, "unknown"))
        fprintf(out, "%" PRIu64 " %" PRIu64 " unknown(%u)", e->begin_ns, e->end_ns, e->kind);
    else
        fprintf(out, "%" PRIu64 " %" PRIu64 " %s", e->begin_ns, e->end_ns, kind);
    fprintf(out, " tid=%" PRIu32, e->tid);
    if (e->device == TS_DEVICE_HOST)
        fputs(" dev=host", out);
    else
        fprintf(out, " dev=%" PRIu32, e->device);
    fputs(" name=", out);
    dump_string(out, r, e->name);
    fputs(" type=", out);
    dump_string(out, r, e->type);
    fprintf(out, " aux=%" PRIu32 " corr=%" PRIu64, e->aux, e->corr);
    if (e->flags & TS_EF_DOUBLE) {
        double d;
        memcpy(&d, &e->v0, sizeof(d));
        fprintf(out, " v0=%.17g", d);
    } else {
        fprintf(out, " v0=%" PRIu64, e->v0);
    }
    fprintf(out, " v1=%" PRIu64 " flags=0x%x\n", e->v1, (unsigned)e->flags);
}

static const struct option dump_longs[] = {
    {"kind", required_argument, NULL, 'k'},
    {"limit", required_argument, NULL, 'n'},
    {NULL, 0, NULL, 0},
};

static int dump_bad_usage(void)
{
    fputs("usage: termsight dump [--kind NAME]... [--limit N] RECORDING\n", stderr);
    return 2;
}

/* What the command line asks for. */
typedef struct dump_opts {
    int want[TS_KIND__COUNT]; /* kinds to print, when filtered */
    int filtered;
    uint64_t limit;
    const char *path;
} dump_opts;

/* Parses and checks argv into o: 0, or 2 after saying what is wrong. */
static int dump_parse(int argc, char **argv, dump_opts *o)
{
    memset(o, 0, sizeof *o);
    o->limit = UINT64_MAX;
    int c, first = 1;

    while ((c = cli_getopt("dump", argc, argv, "k:n:", dump_longs, 0, &first)) != -1) {
        const char *v = optarg;
        if (c == 'k') {
            int k = dump_kind(v);
            if (k < 0) {
                cli_error("dump: unknown kind '%s' (see 'termsight dump --help')", v);
                return dump_bad_usage();
            }
            o->want[k] = 1;
            o->filtered = 1;
        } else if (c == 'n') {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(v, &end, 10);
            if (*v < '0' || *v > '9' || *end || errno) {
                cli_error("dump: --limit needs a whole number, not '%s'", v);
                return dump_bad_usage();
            }
            o->limit = n;
        } else {
            return dump_bad_usage();
        }
    }
    if (optind < argc)
        o->path = argv[optind];
    if (optind + 1 < argc) {
        cli_error("dump: one recording at a time ('%s', then '%s')", o->path, argv[optind + 1]);
        return dump_bad_usage();
    }
    if (!o->path) {
        cli_error("dump: which recording?");
        return dump_bad_usage();
    }
    return 0;
}

/* Prints the recording's events as o asks. */
static int dump_exec(const dump_opts *o)
{
    const char *path = o->path;
    uint64_t limit = o->limit;

    recording_reader *r = NULL;
    char *cause = NULL;
    if (recording_reader_open(path, &r, &cause) < 0) {
        cli_error("%s", cause ? cause : "cannot open the recording");
        free(cause);
        return 1;
    }

    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof(outbuf));
    uint64_t printed = 0;
    int rc = 0;
    while (printed < limit) {
        const ts_event *ev;
        size_t n;
        int got = recording_reader_next(r, &ev, &n, &cause);
        if (got < 0) {
            cli_error("%s", cause ? cause : "cannot read the recording");
            free(cause);
            rc = 1;
            break;
        }
        if (got == 0)
            break;
        for (size_t i = 0; i < n && printed < limit; i++) {
            if (o->filtered && (ev[i].kind >= TS_KIND__COUNT || !o->want[ev[i].kind]))
                continue;
            dump_event(stdout, r, &ev[i]);
            printed++;
        }
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_error("dump: cannot write the output: %s", strerror(errno));
        rc = 1;
    }

    fprintf(stderr, "%" PRIu64 " events printed\n", printed);
    uint64_t skipped = recording_reader_skipped_bytes(r);
    uint64_t damaged = recording_reader_bad_chunks(r);
    if (skipped || damaged)
        cli_error("warning: %s: %" PRIu64 " bytes skipped in %" PRIu64 " damaged chunks", path,
                  skipped, damaged);
    recording_reader_close(r);
    return rc;
}

CLI_PARSE_EXEC(dump_run, dump_opts, dump_parse, dump_exec)

const cli_command cli_cmd_dump = {
    .name = "dump",
    .summary = "print a recording's events, one per line",
    .run = dump_run,
    .usage = dump_usage,
};
