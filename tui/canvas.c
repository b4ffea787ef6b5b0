/* canvas: a grid of cells that panels fill, with text made safe for a terminal. No curses: the
 * room's tests read canvases back as text, and screen.c paints them. */
#include "tui_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

int canvas_init(canvas *c, int rows, int cols, const glyphs *g)
{
    memset(c, 0, sizeof *c);
    c->g = g ? g : &glyphs_ascii;
    return canvas_resize(c, rows, cols);
}

void canvas_free(canvas *c)
{
    free(c->cells);
    c->cells = NULL;
    c->rows = c->cols = 0;
}

int canvas_resize(canvas *c, int rows, int cols)
{
    rows = rows < 1 ? 1 : rows;
    cols = cols < 1 ? 1 : cols;
    cell *n = malloc((size_t)rows * (size_t)cols * sizeof *n);
    if (!n)
        return -1;
    free(c->cells);
    c->cells = n;
    c->rows = rows;
    c->cols = cols;
    canvas_clear(c);
    return 0;
}

void canvas_clear(canvas *c)
{
    size_t n = (size_t)c->rows * (size_t)c->cols;
    for (size_t i = 0; i < n; i++)
        c->cells[i] = (cell){.ch = ' ', .role = ROLE_NORMAL};
}

static int inside(const canvas *c, rect r, int y, int x)
{
    return y >= 0 && x >= 0 && y < r.h && x < r.w && r.y + y >= 0 && r.y + y < c->rows &&
           r.x + x >= 0 && r.x + x < c->cols;
}

static cell *at(canvas *c, rect r, int y, int x)
{
    return &c->cells[(size_t)(r.y + y) * (size_t)c->cols + (size_t)(r.x + x)];
}

/* Writing over half of a double-width character blanks its other half. */
static void put_cell(canvas *c, rect r, int y, int x, uint32_t ch, int role)
{
    cell *p = at(c, r, y, x);
    if (p->ch == CELL_CONT && r.x + x > 0)
        p[-1] = (cell){.ch = ' ', .role = p[-1].role};
    if (r.x + x + 1 < c->cols && p[1].ch == CELL_CONT)
        p[1] = (cell){.ch = ' ', .role = p[1].role};
    *p = (cell){.ch = ch, .role = (uint8_t)role};
}

void canvas_fill(canvas *c, rect r, uint32_t ch, int role)
{
    for (int y = 0; y < r.h; y++)
        for (int x = 0; x < r.w; x++)
            if (inside(c, r, y, x))
                put_cell(c, r, y, x, ch, role);
}

void canvas_put(canvas *c, rect r, int y, int x, uint32_t ch, int role)
{
    if (inside(c, r, y, x))
        put_cell(c, r, y, x, ch, role);
}

/* Decodes one UTF-8 character at s (n bytes left, n >= 1) with model's decoder. Returns
 * the bytes it takes (at least 1) and *cp: '?' for an invalid sequence, one for the whole of a
 * complete one that is overlong, a surrogate or past U+10FFFF, one per byte otherwise. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    size_t len = utf8_decode(s, n, cp);
    if (len)
        return len;
    *cp = '?';
    unsigned char b = s[0];
    size_t want = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 1;
    if (want > n)
        return 1;
    for (size_t i = 1; i < want; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 1;
    return want;
}

/* The cells a code point takes once made safe (*cp may become '?'): 0 for one to leave out. */
static int safe_width(const canvas *c, uint32_t *cp)
{
    uint32_t v = *cp;
    if (v < 0x20 || v == 0x7f || (v >= 0x80 && v < 0xa0)) {
        *cp = '?';
        return 1;
    }
    if (v < 0x7f)
        return 1;
    if (!c->g->utf8) {
        *cp = '?';
        return 1;
    }
    int w = wcwidth((wchar_t)v);
    if (w == 0)
        return 0; /* combining marks: left out rather than stacked on a cell */
    if (w < 0 || w > 2) {
        *cp = '?';
        return 1;
    }
    return w;
}

int canvas_text_width(const canvas *c, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    int w = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        i += utf8_next(p + i, len - i, &cp);
        w += safe_width(c, &cp);
    }
    return w;
}

int canvas_text(canvas *c, rect r, int y, int x, int max, int role, const char *s, size_t len)
{
    if (!s)
        return 0;
    if (max < 0)
        max = r.w - x;
    const unsigned char *p = (const unsigned char *)s;
    int used = 0;
    for (size_t i = 0; i < len && used < max;) {
        uint32_t cp;
        i += utf8_next(p + i, len - i, &cp);
        int w = safe_width(c, &cp);
        if (w == 0)
            continue;
        if (used + w > max)
            break;
        if (w == 2 && !(inside(c, r, y, x + used) && inside(c, r, y, x + used + 1))) {
            used += 2; /* half a wide character would not show: leave both cells */
            continue;
        }
        if (inside(c, r, y, x + used))
            put_cell(c, r, y, x + used, cp, role);
        if (w == 2) {
            cell *right = at(c, r, y, x + used + 1);
            if (r.x + x + used + 2 < c->cols && right[1].ch == CELL_CONT)
                right[1] = (cell){.ch = ' ', .role = right[1].role};
            *right = (cell){.ch = CELL_CONT, .role = (uint8_t)role};
        }
        used += w;
    }
    return used;
}

int canvas_str(canvas *c, rect r, int y, int x, int role, const char *s)
{
    return s ? canvas_text(c, r, y, x, -1, role, s, strlen(s)) : 0;
}

int canvas_printf(canvas *c, rect r, int y, int x, int role, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return 0;
    return canvas_text(c, r, y, x, -1, role, buf,
                       (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

int canvas_text_fit(canvas *c, rect r, int y, int x, int width, int role, const char *s, size_t len,
                    int keep_end)
{
    if (width <= 0 || !s)
        return 0;
    int total = canvas_text_width(c, s, len);
    if (total <= width)
        return canvas_text(c, r, y, x, width, role, s, len);
    if (width == 1) {
        canvas_put(c, r, y, x, c->g->ellipsis, role);
        return 1;
    }
    if (!keep_end) {
        int used = canvas_text(c, r, y, x, width - 1, role, s, len);
        canvas_put(c, r, y, x + used, c->g->ellipsis, role);
        return used + 1;
    }
    /* Skip characters from the start until the rest fits beside the ellipsis. */
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len && total > width - 1) {
        uint32_t cp;
        i += utf8_next(p + i, len - i, &cp);
        total -= safe_width(c, &cp);
    }
    canvas_put(c, r, y, x, c->g->ellipsis, role);
    return 1 + canvas_text(c, r, y, x + 1, width - 1, role, s + i, len - i);
}

size_t canvas_line(const canvas *c, int y, char *out, size_t cap)
{
    if (!cap)
        return 0;
    size_t n = 0, keep = 0;
    if (y >= 0 && y < c->rows) {
        for (int x = 0; x < c->cols; x++) {
            uint32_t ch = c->cells[(size_t)y * (size_t)c->cols + (size_t)x].ch;
            if (ch == CELL_CONT)
                continue;
            if (n + 5 > cap)
                break;
            n += utf8_encode(ch, out + n);
            if (ch != ' ')
                keep = n;
        }
    }
    out[keep] = 0;
    return keep;
}

int canvas_role_at(const canvas *c, int y, int x)
{
    if (y < 0 || x < 0 || y >= c->rows || x >= c->cols)
        return -1;
    return c->cells[(size_t)y * (size_t)c->cols + (size_t)x].role;
}
