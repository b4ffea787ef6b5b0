/* format: numbers as the panels print them, short and with their unit. */
#include "tui_internal.h"

#include <math.h>

void format_duration(double ns, char *out, size_t cap)
{
    if (!(ns >= 0) || !isfinite(ns))
        snprintf(out, cap, "-");
    else if (ns < 1e3)
        snprintf(out, cap, "%.0f ns", ns);
    else if (ns < 1e6)
        snprintf(out, cap, "%.*f us", ns < 1e4 ? 2 : ns < 1e5 ? 1 : 0, ns / 1e3);
    else if (ns < 1e9)
        snprintf(out, cap, "%.*f ms", ns < 1e7 ? 2 : ns < 1e8 ? 1 : 0, ns / 1e6);
    else
        snprintf(out, cap, "%.*f s", ns < 1e10 ? 2 : ns < 1e11 ? 1 : 0, ns / 1e9);
}

void format_elapsed(double s, char *out, size_t cap)
{
    if (!(s >= 0) || !isfinite(s))
        s = 0;
    unsigned long long t = (unsigned long long)s;
    unsigned long long d = t / 86400, h = t / 3600 % 24, m = t / 60 % 60, sec = t % 60;
    if (d)
        snprintf(out, cap, "%llud %02llu:%02llu:%02llu", d, h, m, sec);
    else
        snprintf(out, cap, "%llu:%02llu:%02llu", h, m, sec);
}

void format_count(double v, char *out, size_t cap)
{
    static const char unit[] = " kMGTP";
    if (!(v >= 0) || !isfinite(v)) {
        snprintf(out, cap, "-");
        return;
    }
    int u = 0;
    while (v >= 999.5 && u < 5) {
        v /= 1000;
        u++;
    }
    if (!u)
        snprintf(out, cap, "%.0f", v);
    else
        snprintf(out, cap, "%.*f%c", v < 9.995 ? 2 : v < 99.95 ? 1 : 0, v, unit[u]);
}

void format_bytes(double v, char *out, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (!(v >= 0) || !isfinite(v)) {
        snprintf(out, cap, "-");
        return;
    }
    int u = 0;
    while (v >= 1023.5 && u < 5) {
        v /= 1024;
        u++;
    }
    if (!u)
        snprintf(out, cap, "%.0f B", v);
    else
        snprintf(out, cap, "%.*f %s", v < 9.995 ? 2 : v < 99.95 ? 1 : 0, v, unit[u]);
}

int format_shade(double share)
{
    if (!(share > 0))
        return 0;
    if (share >= 1)
        return 4;
    int k = (int)(share * 5);
    return k > 4 ? 4 : k;
}
