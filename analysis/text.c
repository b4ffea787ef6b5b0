/* text: names from the event stream (any bytes) made into text that every output can hold:
 * valid UTF-8 without control characters, the rest escaped (see analysis.h), through model's
 * UTF-8 codec. */
#include "analysis.h"

#include <string.h>

size_t text_clean(const char *bytes, size_t len, char *out, int keep_lines)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)bytes;
    char *o = out;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = utf8_len(s + i, len - i);
        int ok;
        if (n == 1)
            ok = (c >= 0x20 && c < 0x7f && !(c == '\\' && i + 1 < len && s[i + 1] == 'x')) ||
                 (keep_lines && (c == '\t' || c == '\n' || c == '\r'));
        else
            ok = n > 1 && !(n == 2 && c == 0xc2 && s[i + 1] < 0xa0); /* C1 controls */
        if (ok) {
            memcpy(o, s + i, n);
            o += n;
            i += n;
            continue;
        }
        /* Escapes only this byte; the next one starts afresh (a broken sequence's tail may
         * be the start of a valid one). */
        *o++ = '\\';
        *o++ = 'x';
        *o++ = hex[c >> 4];
        *o++ = hex[c & 15];
        i++;
    }
    *o = 0;
    return (size_t)(o - out);
}
