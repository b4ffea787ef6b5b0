/* util: small helpers for naming the run and parsing options. */
#include "collectors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void util_process_name(char *out, size_t cap)
{
    FILE *f = fopen("/proc/self/comm", "re");
    size_t n = 0;
    if (f) {
        n = fread(out, 1, cap - 1, f);
        fclose(f);
    }
    while (n && (out[n - 1] == '\n' || out[n - 1] == 0))
        n--;
    if (!n) {
        snprintf(out, cap, "process");
        return;
    }
    out[n] = 0;
}

void util_path_component(const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && n + 1 < cap; p++) {
        int bad = *p == '/' || *p < 0x20 || *p == 0x7f || (n == 0 && *p == '.');
        out[n++] = bad ? '_' : (char)*p;
    }
    if (!n)
        out[n++] = '_';
    out[n] = 0;
}

int util_run_folder(const char *output, const char *process, int pid, char *out, size_t cap)
{
    char safe[64];
    util_path_component(process, safe, sizeof safe);
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    int n = snprintf(out, cap, "%s/%s-%d-%s", output, safe, pid, stamp);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int util_parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out)
{
    if (!text || !*text)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || text[0] == '-' || v < min || v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}
