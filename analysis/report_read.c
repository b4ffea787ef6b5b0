/* report_read: reading a report folder's files back (the job report's merge, termsight diff):
 * each file opened only when it is a regular file of bounded size, read line by line with a
 * bound on a line, CSV lines split as the writers quote them (docs/report-format.md). */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The kind of a file that is not a regular one, for a message. */
static const char *kind_of(mode_t mode)
{
    return S_ISFIFO(mode)   ? "a FIFO"
           : S_ISDIR(mode)  ? "a folder"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

/* The rank's report file name (report/NAME), opened for reading when it is a regular file of at
 * most max bytes: opened without blocking and without following a link, so that a FIFO, a
 * device or a link there is refused rather than waited on or read through. NULL with why
 * ("report/NAME: ...", naming the file) and errno (ENOENT when there is none); *size its
 * size. */
FILE *report_file_read(const char *folder, const char *name, uint64_t max, uint64_t *size,
                       char *why, size_t cap)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" REPORT_DIR "/%s", folder, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    int err = errno;
    if (fd < 0 || fstat(fd, &st) != 0) {
        err = errno;
        snprintf(why, cap, REPORT_DIR "/%s: %s", name,
                 err == ELOOP ? "a symbolic link, not followed" : strerror(err));
    } else if (!S_ISREG(st.st_mode)) {
        err = EINVAL;
        snprintf(why, cap, REPORT_DIR "/%s is %s, not a report file", name, kind_of(st.st_mode));
    } else if ((uint64_t)st.st_size > max) {
        err = EFBIG;
        snprintf(why, cap, REPORT_DIR "/%s holds %jd bytes, more than the %" PRIu64 " it may", name,
                 (intmax_t)st.st_size, max);
    } else {
        FILE *f = fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "r") : NULL;
        if (f) {
            *size = (uint64_t)st.st_size;
            return f;
        }
        err = errno;
        snprintf(why, cap, REPORT_DIR "/%s: %s", name, strerror(err));
    }
    if (fd >= 0)
        close(fd);
    errno = err;
    return NULL;
}

/* The next line of f into *line (NUL-terminated, the newline kept): its length, or -1 at the
 * end. A line longer than REPORT_MAX_LINE_BYTES is passed over and counted in *long_lines: a file
 * without newlines costs no more memory than one line may. */
ssize_t report_read_line(FILE *f, char **line, size_t *cap, uint64_t *long_lines)
{
    for (;;) {
        size_t len = 0;
        int c = 0;
        int skipping = 0;
        while ((c = getc_unlocked(f)) != EOF) {
            if (!skipping && len + 2 > *cap) {
                size_t want = *cap ? 2 * *cap : 256;
                char *l = want <= REPORT_MAX_LINE_BYTES + 2 ? realloc(*line, want) : NULL;
                if (!l)
                    skipping = 1;
                else
                    *line = l, *cap = want;
            }
            if (!skipping)
                (*line)[len++] = (char)c;
            if (c == '\n')
                break;
        }
        if (skipping) {
            (*long_lines)++;
            if (c == EOF)
                return -1;
            continue;
        }
        if (!len)
            return -1;
        (*line)[len] = 0;
        return (ssize_t)len;
    }
}

ssize_t report_next_line(const char **at, const char *end, const char **line, uint64_t *long_lines)
{
    while (*at < end) {
        const char *p = *at, *nl = memchr(p, '\n', (size_t)(end - p));
        const char *stop = nl ? nl + 1 : end;
        *at = stop;
        if ((size_t)(stop - p) > REPORT_MAX_LINE_BYTES) {
            (*long_lines)++;
            continue;
        }
        *line = p;
        return (ssize_t)(stop - p);
    }
    return -1;
}

/* Splits one CSV line (RFC 4180 quoting, as the report writes it) in place into at most max
 * fields; returns their count. */
size_t report_csv_split(char *line, char **field, size_t max)
{
    size_t n = 0;
    char *p = line;
    while (n < max) {
        if (*p == '"') {
            char *w = ++p;
            field[n++] = w;
            while (*p) {
                if (*p == '"' && p[1] == '"') {
                    *w++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *w++ = *p++;
                }
            }
            *w = 0; /* w never passes p */
        } else {
            field[n++] = p;
            p += strcspn(p, ",\r\n");
        }
        if (*p != ',') {
            *p = 0;
            break;
        }
        *p++ = 0;
    }
    return n;
}

/* ---- step_trace.csv ------------------------------------------------------------------------ */

int report_step_trace_open(report_step_reader *sr, const char *folder, uint64_t max,
                           uint64_t *long_lines, char *why, size_t cap)
{
    memset(sr, 0, sizeof *sr);
    sr->long_lines = long_lines;
    for (int k = 0; k < STEP_COL__COUNT; k++)
        sr->col[k] = -1;
    uint64_t size;
    sr->f = report_file_read(folder, REPORT_STEP_TRACE_CSV, max, &size, why, cap);
    if (!sr->f)
        return -1;
    char *field[64];
    if (report_read_line(sr->f, &sr->line, &sr->cap, sr->long_lines) > 0) {
        size_t nf = report_csv_split(sr->line, field, 64);
        for (size_t i = 0; i < nf; i++)
            for (int k = 0; k < STEP_COL__COUNT; k++)
                if (sr->col[k] < 0 && !strcmp(field[i], report_step_columns[k]))
                    sr->col[k] = (int)i;
    }
    if (sr->col[STEP_COL_STEP] < 0 || sr->col[STEP_COL_TOTAL] < 0) {
        report_step_trace_close(sr);
        snprintf(why, cap, "its %s/%s has no step or total_us column", REPORT_DIR,
                 REPORT_STEP_TRACE_CSV);
        errno = EINVAL;
        return -1;
    }
    return 0;
}

int report_step_trace_next(report_step_reader *sr, double v[STEP_COL__COUNT])
{
    char *field[64];
    while (report_read_line(sr->f, &sr->line, &sr->cap, sr->long_lines) > 0) {
        size_t nf = report_csv_split(sr->line, field, 64);
        for (int k = 0; k < STEP_COL__COUNT; k++) {
            int c = sr->col[k];
            v[k] = -1;
            if (c < 0 || (size_t)c >= nf)
                continue;
            char *end;
            double x = strtod(field[c], &end);
            if (end != field[c] && !*end && x >= 0 && x <= 1e15)
                v[k] = x;
        }
        if (v[STEP_COL_STEP] >= 0 && v[STEP_COL_TOTAL] >= 0 &&
            v[STEP_COL_STEP] == floor(v[STEP_COL_STEP]))
            return 1;
    }
    return 0;
}

void report_step_trace_close(report_step_reader *sr)
{
    if (sr->f)
        fclose(sr->f);
    free(sr->line);
    sr->f = NULL;
    sr->line = NULL;
    sr->cap = 0;
}
