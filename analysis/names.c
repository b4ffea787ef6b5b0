/* names: op keys, op types and scope prefixes derived from op names.
 *
 * The functions here are pure over the bytes of a name: they keep no state, so a caller that
 * meets the same stream id many times caches their answer per id (opstats keys an index_map by
 * stream id and calls them only when an id is new). Derived bytes become local ids through
 * analysis_local_name, which interns by bytes, so equal derived strings share one id.
 *
 * The rules, on the bytes (no encoding is assumed; NULs and invalid UTF-8 pass through):
 *
 * Op key. PyTorch's NVTX names append fields to the op name: ", seq = N", ", op_id = N",
 * ", sizes = [[...]]", ", input_op_ids = [...]". The key is the name cut at the first ", " that
 * starts one of those fields (never cut to nothing). Other names (MindSpore's full scope names,
 * user ranges) are kept whole.
 *
 * Op type (when the event gives none), from the key:
 *   1. trailing '/' are dropped, and the text after the last '/' is the op ("A/B/" -> "B");
 *   2. instance numbering is stripped from its end, repeatedly: "-op<digits>" (MindSpore's
 *      "Conv2D-op11"), "_<digits>" ("AddN_70", "MatMul_7") and ".<digits>" ("layers.3"). Bare
 *      trailing digits stay: they belong to type names ("ReLU6", "AddmmBackward0");
 *   3. unless the op is namespace-qualified ("aten::add.Tensor" keeps its dot), the text after
 *      its last '.' is the type ("layer3.MatMul_7" -> "MatMul"), then step 2 again;
 *   4. a step of 2 or 3 whose result would be empty or only digits is not taken, so "", "123",
 *      "_7" and "1.5" keep themselves (a last component "7" after a '/' is the type "7").
 *
 * Scopes: the '/'-separated prefixes above the op, from the key with trailing '/' dropped. Empty
 * components ("A//B", "/A") make no scope of their own. */
#include "analysis_internal.h"

#include <string.h>

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* 1 when s[0..len) is empty or only digits: not acceptable as a derived type. */
static int empty_or_digits(const char *s, uint32_t len)
{
    for (uint32_t i = 0; i < len; i++)
        if (!is_digit(s[i]))
            return 0;
    return 1;
}

/* The length of s[0..len) without one trailing numbering suffix, or len when there is none. */
static uint32_t strip_one(const char *s, uint32_t len)
{
    uint32_t d = len;
    while (d > 0 && is_digit(s[d - 1]))
        d--;
    if (d == len || d == 0)
        return len;
    if (s[d - 1] == '_' || s[d - 1] == '.')
        return d - 1;
    if (d >= 3 && s[d - 3] == '-' && s[d - 2] == 'o' && s[d - 1] == 'p')
        return d - 3;
    return len;
}

static uint32_t strip_numbering(const char *s, uint32_t len)
{
    for (;;) {
        uint32_t n = strip_one(s, len);
        if (n == len || empty_or_digits(s, n))
            return len;
        len = n;
    }
}

static int has_namespace(const char *s, uint32_t len)
{
    for (uint32_t i = 0; i + 1 < len; i++)
        if (s[i] == ':' && s[i + 1] == ':')
            return 1;
    return 0;
}

/* Drops trailing '/' (keeping at least one byte). */
static uint32_t trim_slashes(const char *s, uint32_t len)
{
    while (len > 1 && s[len - 1] == '/')
        len--;
    return len;
}

/* The type's bytes within s[0..len): *off and the returned length. */
static uint32_t derive_type(const char *s, uint32_t len, uint32_t *off)
{
    uint32_t end = trim_slashes(s, len);
    uint32_t b = end;
    while (b > 0 && s[b - 1] != '/')
        b--;
    if (b == end) { /* only slashes */
        *off = 0;
        return len;
    }
    const char *op = s + b;
    uint32_t n = strip_numbering(op, end - b);
    if (!has_namespace(op, n)) {
        uint32_t dot = n;
        while (dot > 0 && op[dot - 1] != '.')
            dot--;
        if (dot > 0 && !empty_or_digits(op + dot, n - dot)) {
            op += dot;
            n = strip_numbering(op, n - dot);
        }
    }
    *off = (uint32_t)(op - s);
    return n;
}

/* The bytes of id, stable while several local names are added: each analysis_local_name call
 * keeps its own input valid, but may move the table holding the bytes of local ids, so a caller
 * that interns more than once from the same bytes (names_scopes) copies them to buf first. */
static const char *stable_bytes(const analysis *a, uint32_t id, uint32_t *len, char *buf)
{
    const char *s = analysis_raw_name(a, id, len);
    if (s && (id & ANALYSIS_LOCAL_ID)) {
        if (*len > TS_NAME_MAX)
            *len = TS_NAME_MAX;
        memcpy(buf, s, *len);
        return buf;
    }
    return s;
}

uint32_t names_op_key(analysis *a, uint32_t name)
{
    uint32_t len;
    const char *s = analysis_raw_name(a, name, &len);
    if (!s)
        return name;
    uint32_t k = opname_key_length(s, len);
    if (k == len)
        return name;
    uint32_t id = analysis_local_name(a, s, k);
    return id != TS_STR_NONE ? id : name;
}

/* An op's type when it needs no lookup (the type it carries, or the name itself when no type
 * can be derived from it): 1 with *id. Else 0 with the derived type's bytes in *s, *n. */
static int type_known(const analysis *a, uint32_t name, uint32_t type, uint32_t *id, const char **s,
                      uint32_t *n)
{
    *id = type != TS_STR_NONE ? type : name;
    if (type != TS_STR_NONE)
        return 1;
    uint32_t len;
    const char *p = analysis_raw_name(a, name, &len);
    if (!p)
        return 1;
    uint32_t off;
    *n = derive_type(p, opname_key_length(p, len), &off);
    *s = p + off;
    return off == 0 && *n == len;
}

uint32_t names_op_type(analysis *a, uint32_t name, uint32_t type)
{
    const char *s;
    uint32_t id, n;
    if (type_known(a, name, type, &id, &s, &n))
        return id;
    id = analysis_local_name(a, s, n);
    return id != TS_STR_NONE ? id : name;
}

uint32_t analysis_op_type_of(const analysis *a, uint32_t name, uint32_t type)
{
    const char *s;
    uint32_t id, n;
    if (type_known(a, name, type, &id, &s, &n))
        return id;
    id = analysis_local_find(a, s, n);
    return id != TS_STR_NONE ? id : name;
}

void names_scopes(analysis *a, uint32_t name, void (*fn)(void *ctx, uint32_t scope, uint32_t level),
                  void *ctx)
{
    uint32_t len;
    char buf[TS_NAME_MAX];
    const char *s = stable_bytes(a, name, &len, buf);
    if (!s)
        return;
    uint32_t end = trim_slashes(s, opname_key_length(s, len));
    uint32_t level = 0;
    for (uint32_t i = 1; i < end; i++) {
        if (s[i] != '/' || s[i - 1] == '/')
            continue; /* a '/' after a '/' (or first) closes no component */
        uint32_t id = analysis_local_name(a, s, i);
        if (id != TS_STR_NONE)
            fn(ctx, id, ++level);
    }
}

static unsigned char fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

int names_contains(const char *hay, uint32_t hay_len, const char *needle)
{
    if (!needle || !*needle)
        return 1;
    if (!hay)
        return 0;
    size_t n = strlen(needle);
    if (n > hay_len)
        return 0;
    unsigned char first = fold((unsigned char)needle[0]);
    for (uint32_t i = 0; i + n <= hay_len; i++) {
        if (fold((unsigned char)hay[i]) != first)
            continue;
        size_t k = 1;
        while (k < n && fold((unsigned char)hay[i + k]) == fold((unsigned char)needle[k]))
            k++;
        if (k == n)
            return 1;
    }
    return 0;
}

uint32_t names_canon(analysis *a, uint32_t id)
{
    if (id & ANALYSIS_LOCAL_ID)
        return id;
    uint32_t len;
    const char *s = analysis_raw_name(a, id, &len);
    if (!s)
        return id;
    uint32_t c = analysis_local_name(a, s, len);
    return c != TS_STR_NONE ? c : id;
}
