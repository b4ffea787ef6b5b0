/* text: names from the event stream (any bytes) made into text that every output can hold:
 * valid UTF-8 without control characters, the rest escaped (see analysis.h). The project's one
 * UTF-8 decoder (the TUI draws with it too). */
#include "analysis.h"

#include <string.h>

size_t text_utf8_decode(const unsigned char *s, size_t left, uint32_t *cp)
{
    unsigned c = s[0];
    size_t n;
    uint32_t v;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    if (left < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3f);
    }
    if ((n == 3 && v < 0x800) || (n == 4 && (v < 0x10000 || v > 0x10ffff)) ||
        (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return n;
}

size_t text_utf8_len(const unsigned char *s, size_t left)
{
    uint32_t cp;
    return text_utf8_decode(s, left, &cp);
}

size_t text_clean(const char *bytes, size_t len, char *out, int keep_lines)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)bytes;
    char *o = out;
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = text_utf8_len(s + i, len - i);
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
