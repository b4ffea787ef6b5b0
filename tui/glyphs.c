/* glyphs: the characters panels draw, UTF-8 and ASCII tables side by side (htop's style), chosen
 * once from the locale. */
#include "tui_internal.h"

#include <langinfo.h>
#include <string.h>
#include <strings.h>

const glyphs glyphs_utf8 = {
    .utf8 = 1,
    .hline = 0x2500,                                   /* ─ */
    .vline = 0x2502,                                   /* │ */
    .interval = 0x2591,                                /* ░ */
    .fpbp = 0x2588,                                    /* █ */
    .wait = 0x259a,                                    /* ▚ */
    .tail = 0x2592,                                    /* ▒ */
    .eval = 0x259e,                                    /* ▞ */
    .unknown = 0x2593,                                 /* ▓ */
    .avg = 0x2504,                                     /* ┄ */
    .slow = 0x25bc,                                    /* ▼ */
    .shade = {0x00b7, 0x2591, 0x2592, 0x2593, 0x2588}, /* · ░ ▒ ▓ █ */
    .user = 0x2588,                                    /* █ */
    .system = 0x2593,                                  /* ▓ */
    .iowait = 0x2592,                                  /* ▒ */
    .used = 0x2588,                                    /* █ */
    .edge = 0x258f,                                    /* ▏ */
    .dense = 0x250a,                                   /* ┊ */
    .ellipsis = 0x2026,                                /* … */
    .selected = 0x25b6,                                /* ▶ */
    .left = 0x25c0,                                    /* ◀ */
    .right = 0x25b6,                                   /* ▶ */
    .up = 0x25b2,                                      /* ▲ */
    .down = 0x25bc,                                    /* ▼ */
};

const glyphs glyphs_ascii = {
    .utf8 = 0,
    .hline = '-',
    .vline = '|',
    .interval = '.',
    .fpbp = '#',
    .wait = '~',
    .tail = '=',
    .eval = 'e',
    .unknown = '?',
    .avg = '-',
    .slow = 'v',
    .shade = {'.', '-', '+', '*', '#'},
    .user = '|',
    .system = '+',
    .iowait = '!',
    .used = '|',
    .edge = '|',
    .dense = ':',
    .ellipsis = '~',
    .selected = '>',
    .left = '<',
    .right = '>',
    .up = '^',
    .down = 'v',
};

const glyphs *glyphs_for_locale(void)
{
    const char *cs = nl_langinfo(CODESET);
    if (cs && (!strcasecmp(cs, "UTF-8") || !strcasecmp(cs, "utf8")))
        return &glyphs_utf8;
    return &glyphs_ascii;
}
