/* libFuzzer harness for the text that reaches the screen from outside (names in a segment or a
 * recording, any bytes): canvas_text and canvas_text_fit must keep every cell a printable code
 * point, never write outside the canvas, and read back as valid UTF-8 without control bytes. */
#include "tui_internal.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

static int valid_line(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        setlocale(LC_ALL, "C.UTF-8");
        init = 1;
    }
    if (size < 2)
        return 0;
    /* The first two bytes choose where and how wide: the rest is the text. */
    int x = data[0] % 48 - 4, width = data[1] % 40;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    const glyphs *tables[2] = {&glyphs_ascii, &glyphs_utf8};
    for (int t = 0; t < 2; t++) {
        canvas c;
        if (canvas_init(&c, 3, 40, tables[t]) != 0)
            return 0;
        rect r = {0, 0, 3, 40}, inner = {1, 5, 1, 30};
        canvas_text(&c, r, 0, x, -1, ROLE_NORMAL, text, len);
        canvas_text_fit(&c, inner, 0, x, width, ROLE_NORMAL, text, len, 0);
        canvas_text_fit(&c, r, 2, x, width, ROLE_NORMAL, text, len, 1);
        char line[40 * 4 + 1];
        for (int y = 0; y < 3; y++) {
            canvas_line(&c, y, line, sizeof line);
            if (!valid_line(line))
                abort();
        }
        for (int i = 0; i < 3 * 40; i++) {
            uint32_t ch = c.cells[i].ch;
            if (ch != CELL_CONT && (ch < 0x20 || ch == 0x7f || (ch >= 0x80 && ch < 0xa0) ||
                                    (!tables[t]->utf8 && ch >= 0x80)))
                abort();
        }
        /* The text of row 1 stays within its rect. */
        for (int xx = 0; xx < 40; xx++)
            if ((xx < 5 || xx >= 35) && c.cells[40 + xx].ch != ' ')
                abort();
        canvas_free(&c);
    }
    return 0;
}
