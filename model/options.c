/* options: the configuration's limits and the parsers of its text values, in one place for the
 * library (termsight_options_init's TERMSIGHT_* variables, autostart) and the termsight
 * command (run's options, which become those variables). See options.h. */
#include "model.h"

#include <errno.h>
#include <stdlib.h>

int options_parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out)
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

int options_parse_steps(const char *text, uint64_t *from, uint64_t *to)
{
    if (!text)
        return -1;
    char *end;
    errno = 0;
    unsigned long long a = strtoull(text, &end, 10);
    if (errno || end == text || *end != '-' || text[0] == '-')
        return -1;
    const char *b_text = end + 1;
    unsigned long long b = strtoull(b_text, &end, 10);
    if (errno || end == b_text || *end || *b_text == '-' || a < 1 || b < a)
        return -1;
    *from = a;
    *to = b;
    return 0;
}
