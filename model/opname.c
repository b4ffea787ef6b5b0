/* opname: what the bytes of an operator's name say, for the step trace (steptrace.c) and the
 * analysis's op keys (analysis/names.c) alike. Pure over the bytes: no encoding is assumed. */
#include "model.h"

#include <string.h>

static const char *const pytorch_fields[] = {"seq = ", "op_id = ", "sizes = ", "input_op_ids = "};

uint32_t opname_key_length(const char *s, uint32_t len)
{
    for (uint32_t i = 1; i + 2 < len; i++) {
        if (s[i] != ',' || s[i + 1] != ' ')
            continue;
        const char *rest = s + i + 2;
        uint32_t left = len - i - 2;
        for (size_t f = 0; f < sizeof pytorch_fields / sizeof pytorch_fields[0]; f++) {
            size_t fl = strlen(pytorch_fields[f]);
            if (left >= fl && !memcmp(rest, pytorch_fields[f], fl))
                return i;
        }
    }
    return len;
}

int opname_is_label(const char *s, uint32_t len)
{
    static const char label[] = "record_function";
    return s && len == sizeof label - 1 && !memcmp(s, label, len);
}

int opname_is_fetch(const char *s, uint32_t len)
{
    static const char *const words[] = {"getnext", "datafetch", "fetchdata", "dataloader",
                                        "nextbatch"};
    char buf[512];
    uint32_t n = 0;
    for (uint32_t i = 0; i < len && n < sizeof buf; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 'A' && c <= 'Z')
            buf[n++] = (char)(c - 'A' + 'a');
        else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            buf[n++] = (char)c;
    }
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (memmem(buf, n, words[w], strlen(words[w])))
            return 1;
    return 0;
}
