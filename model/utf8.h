/* model: UTF-8 (utf8.c). */
#ifndef TERMSIGHT_MODEL_UTF8_H
#define TERMSIGHT_MODEL_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1..4) of the valid UTF-8 sequence at s (left bytes, left >= 1) and its code point
 * in *cp (untouched when invalid); 0 when it is not one (overlong forms, surrogates and code
 * points past U+10FFFF are not). utf8_len: the same without the code point. */
size_t utf8_decode(const unsigned char *s, size_t left, uint32_t *cp);
size_t utf8_len(const unsigned char *s, size_t left);
/* cp as UTF-8 into out (4 bytes of room): its length, 0 for a surrogate or past U+10FFFF. */
size_t utf8_encode(uint32_t cp, char *out);

#endif
