/* screen: curses, and nothing else does curses. Canvases become curses calls here; the
 * semantic roles become colors through one scheme per color depth, stepped down 256 -> 16 -> 8
 * -> monochrome (htop's ColorElements), where monochrome uses attributes only and the glyph
 * tables keep every part distinct.
 *
 * Redrawing only what changed: rows equal to the last painted canvas are not touched, and
 * curses compares its virtual screen with the terminal, so a frame sends only the cells that
 * differ. The screen is never cleared per frame. */
#include "tui_internal.h"

#include <curses.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(VK_DOWN == KEY_DOWN && VK_UP == KEY_UP && VK_LEFT == KEY_LEFT &&
                   VK_RIGHT == KEY_RIGHT && VK_HOME == KEY_HOME && VK_BACKSPACE == KEY_BACKSPACE &&
                   VK_F1 == KEY_F(1) && VK_F5 == KEY_F(5) && VK_F6 == KEY_F(6) &&
                   VK_F7 == KEY_F(7) && VK_F10 == KEY_F(10) && VK_NPAGE == KEY_NPAGE &&
                   VK_PPAGE == KEY_PPAGE && VK_ENTER_KP == KEY_ENTER && VK_BTAB == KEY_BTAB &&
                   VK_END == KEY_END && VK_RESIZE == KEY_RESIZE && VK_MOUSE == KEY_MOUSE,
               "view_key_code follows curses' key numbers");

enum { S_BOLD = 1, S_REV = 2, S_UL = 4, S_DIM = 8 };

/* The color depth of the scheme in use. */
enum color_depth { SCREEN_MONO = 0, SCREEN_8 = 8, SCREEN_16 = 16, SCREEN_256 = 256 };

typedef struct style {
    short fg, bg; /* -1: the terminal's default */
    uint8_t attr;
} style;

#define D (-1)

/* Monochrome: attributes only. Blocks are reverse video; the cursor is the one block that is
 * not, so it stands out. */
static const style scheme_mono[ROLE__COUNT] = {
    [ROLE_NORMAL] = {D, D, 0},
    [ROLE_DIM] = {D, D, S_DIM},
    [ROLE_TITLE] = {D, D, S_BOLD},
    [ROLE_HEADER] = {D, D, 0},
    [ROLE_HEADER_KEY] = {D, D, S_BOLD},
    [ROLE_TAB] = {D, D, 0},
    [ROLE_TAB_ACTIVE] = {D, D, S_REV},
    [ROLE_RULE] = {D, D, 0},
    [ROLE_LABEL] = {D, D, S_UL},
    [ROLE_SELECTED] = {D, D, S_REV},
    [ROLE_GOOD] = {D, D, S_BOLD},
    [ROLE_WARN] = {D, D, S_BOLD},
    [ROLE_BAD] = {D, D, S_BOLD | S_UL},
    [ROLE_INTERVAL] = {D, D, 0},
    [ROLE_FPBP] = {D, D, 0},
    [ROLE_WAIT] = {D, D, S_BOLD},
    [ROLE_TAIL] = {D, D, 0},
    [ROLE_EVAL] = {D, D, S_DIM},
    [ROLE_AVG] = {D, D, S_BOLD},
    [ROLE_SLOW] = {D, D, S_BOLD},
    [ROLE_HEAT0] = {D, D, S_DIM},
    [ROLE_HEAT1] = {D, D, 0},
    [ROLE_HEAT2] = {D, D, 0},
    [ROLE_HEAT3] = {D, D, S_BOLD},
    [ROLE_HEAT4] = {D, D, S_BOLD},
    [ROLE_CPU_USER] = {D, D, 0},
    [ROLE_CPU_SYSTEM] = {D, D, S_BOLD},
    [ROLE_CPU_IOWAIT] = {D, D, S_DIM},
    [ROLE_PROCESS] = {D, D, 0},
    [ROLE_MEMORY] = {D, D, 0},
    [ROLE_BLOCK0] = {D, D, S_REV},
    [ROLE_BLOCK1] = {D, D, S_REV},
    [ROLE_BLOCK2] = {D, D, S_REV},
    [ROLE_BLOCK3] = {D, D, S_REV},
    [ROLE_DEVICE] = {D, D, S_REV | S_BOLD},
    [ROLE_CURSOR] = {D, D, S_BOLD | S_UL},
    [ROLE_PROGRESS] = {D, D, S_REV},
    [ROLE_ERROR] = {D, D, S_BOLD},
};

static const style scheme_8[ROLE__COUNT] = {
    [ROLE_NORMAL] = {D, D, 0},
    [ROLE_DIM] = {D, D, S_DIM},
    [ROLE_TITLE] = {COLOR_CYAN, D, S_BOLD},
    [ROLE_HEADER] = {D, D, 0},
    [ROLE_HEADER_KEY] = {COLOR_CYAN, D, 0},
    [ROLE_TAB] = {D, D, 0},
    [ROLE_TAB_ACTIVE] = {COLOR_BLACK, COLOR_CYAN, 0},
    [ROLE_RULE] = {COLOR_BLUE, D, 0},
    [ROLE_LABEL] = {COLOR_BLACK, COLOR_GREEN, 0},
    [ROLE_SELECTED] = {COLOR_BLACK, COLOR_CYAN, 0},
    [ROLE_GOOD] = {COLOR_GREEN, D, S_BOLD},
    [ROLE_WARN] = {COLOR_YELLOW, D, S_BOLD},
    [ROLE_BAD] = {COLOR_RED, D, S_BOLD},
    [ROLE_INTERVAL] = {COLOR_YELLOW, D, 0},
    [ROLE_FPBP] = {COLOR_GREEN, D, 0},
    [ROLE_WAIT] = {COLOR_RED, D, 0},
    [ROLE_TAIL] = {COLOR_MAGENTA, D, 0},
    [ROLE_EVAL] = {COLOR_BLUE, D, S_BOLD},
    [ROLE_AVG] = {COLOR_CYAN, D, S_BOLD},
    [ROLE_SLOW] = {COLOR_RED, D, S_BOLD},
    [ROLE_HEAT0] = {COLOR_BLUE, D, 0},
    [ROLE_HEAT1] = {COLOR_BLUE, D, S_BOLD},
    [ROLE_HEAT2] = {COLOR_CYAN, D, 0},
    [ROLE_HEAT3] = {COLOR_CYAN, D, S_BOLD},
    [ROLE_HEAT4] = {COLOR_WHITE, D, S_BOLD},
    [ROLE_CPU_USER] = {COLOR_GREEN, D, 0},
    [ROLE_CPU_SYSTEM] = {COLOR_RED, D, 0},
    [ROLE_CPU_IOWAIT] = {COLOR_MAGENTA, D, 0},
    [ROLE_PROCESS] = {COLOR_CYAN, D, 0},
    [ROLE_MEMORY] = {COLOR_GREEN, D, 0},
    [ROLE_BLOCK0] = {COLOR_BLACK, COLOR_GREEN, 0},
    [ROLE_BLOCK1] = {COLOR_BLACK, COLOR_CYAN, 0},
    [ROLE_BLOCK2] = {COLOR_BLACK, COLOR_YELLOW, 0},
    [ROLE_BLOCK3] = {COLOR_BLACK, COLOR_MAGENTA, 0},
    [ROLE_DEVICE] = {COLOR_WHITE, COLOR_BLUE, 0},
    [ROLE_CURSOR] = {COLOR_WHITE, COLOR_RED, S_BOLD},
    [ROLE_PROGRESS] = {COLOR_BLACK, COLOR_GREEN, 0},
    [ROLE_ERROR] = {COLOR_RED, D, S_BOLD},
};

/* 16 colors: the 8-color scheme with bright grays for dim parts (8 is bright black). */
static style scheme_16[ROLE__COUNT];

/* 256 colors (xterm's cube and gray ramp). */
static const style scheme_256[ROLE__COUNT] = {
    [ROLE_NORMAL] = {D, D, 0},       [ROLE_DIM] = {245, D, 0},
    [ROLE_TITLE] = {81, D, S_BOLD},  [ROLE_HEADER] = {D, D, 0},
    [ROLE_HEADER_KEY] = {110, D, 0}, [ROLE_TAB] = {250, D, 0},
    [ROLE_TAB_ACTIVE] = {16, 81, 0}, [ROLE_RULE] = {239, D, 0},
    [ROLE_LABEL] = {16, 114, 0},     [ROLE_SELECTED] = {16, 117, 0},
    [ROLE_GOOD] = {114, D, S_BOLD},  [ROLE_WARN] = {221, D, S_BOLD},
    [ROLE_BAD] = {203, D, S_BOLD},   [ROLE_INTERVAL] = {221, D, 0},
    [ROLE_FPBP] = {114, D, 0},       [ROLE_TAIL] = {176, D, 0},
    [ROLE_WAIT] = {203, D, 0},       [ROLE_EVAL] = {75, D, 0},
    [ROLE_AVG] = {81, D, S_BOLD},    [ROLE_SLOW] = {203, D, S_BOLD},
    [ROLE_HEAT0] = {24, D, 0},       [ROLE_HEAT1] = {31, D, 0},
    [ROLE_HEAT2] = {38, D, 0},       [ROLE_HEAT3] = {45, D, 0},
    [ROLE_HEAT4] = {159, D, 0},      [ROLE_CPU_USER] = {114, D, 0},
    [ROLE_CPU_SYSTEM] = {203, D, 0}, [ROLE_CPU_IOWAIT] = {176, D, 0},
    [ROLE_PROCESS] = {81, D, 0},     [ROLE_MEMORY] = {150, D, 0},
    [ROLE_BLOCK0] = {16, 114, 0},    [ROLE_BLOCK1] = {16, 117, 0},
    [ROLE_BLOCK2] = {16, 222, 0},    [ROLE_BLOCK3] = {16, 183, 0},
    [ROLE_DEVICE] = {231, 61, 0},    [ROLE_CURSOR] = {231, 160, S_BOLD},
    [ROLE_PROGRESS] = {16, 114, 0},  [ROLE_ERROR] = {203, D, S_BOLD},
};

#undef D

static int started;
static int depth;
static attr_t role_attr[ROLE__COUNT];
static short role_pair[ROLE__COUNT];
static cell *painted; /* what the terminal shows, row by row */
static int painted_rows, painted_cols;
static volatile sig_atomic_t quit_signal;

static attr_t attrs_of(uint8_t a)
{
    return (a & S_BOLD ? A_BOLD : 0) | (a & S_REV ? A_REVERSE : 0) | (a & S_UL ? A_UNDERLINE : 0) |
           (a & S_DIM ? A_DIM : 0);
}

static void apply_scheme(void)
{
    const style *scheme = scheme_mono;
    if (depth == SCREEN_256)
        scheme = scheme_256;
    else if (depth == SCREEN_16)
        scheme = scheme_16;
    else if (depth == SCREEN_8)
        scheme = scheme_8;
    for (int r = 0; r < ROLE__COUNT; r++) {
        role_attr[r] = attrs_of(scheme[r].attr);
        role_pair[r] = 0;
        if (depth != SCREEN_MONO && (scheme[r].fg >= 0 || scheme[r].bg >= 0)) {
            role_pair[r] = (short)(r + 1);
            init_pair(role_pair[r], scheme[r].fg, scheme[r].bg);
        }
    }
}

/* The depth to use: none under NO_COLOR (no-color.org: present and not empty) or without
 * color, else the most the terminal has. */
static int choose_depth(void)
{
    const char *nc = getenv("NO_COLOR");
    if ((nc && *nc) || !has_colors() || start_color() != OK)
        return SCREEN_MONO;
    if (use_default_colors() != OK)
        assume_default_colors(COLOR_WHITE, COLOR_BLACK);
    if (COLORS >= 256 && COLOR_PAIRS > ROLE__COUNT)
        return SCREEN_256;
    if (COLORS >= 16 && COLOR_PAIRS > ROLE__COUNT)
        return SCREEN_16;
    if (COLORS >= 8 && COLOR_PAIRS > ROLE__COUNT)
        return SCREEN_8;
    return SCREEN_MONO;
}

static void on_quit(int sig)
{
    quit_signal = sig;
}

/* A crash: give the terminal back before the default action (htop does the same). */
static void on_crash(int sig)
{
    screen_end();
    static const char msg[] = "termsight top: crashed; the terminal was restored\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_quit;
    /* Installed before initscr, so curses leaves these to us. */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
}

int screen_init(char **cause)
{
    if (started)
        return 0;
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return cause_set(cause, "top: needs a terminal (--once prints a snapshot without one)");
    const char *term = getenv("TERM");
    if (!term || !*term)
        return cause_set(cause, "top: TERM is not set");
    install_handlers();
    /* newterm, not initscr: an unknown TERM is an error to report, not an exit. */
    SCREEN *sp = newterm(NULL, stdout, stdin);
    if (!sp)
        return cause_set(cause, "top: cannot use terminal type '%s'", term);
    set_term(sp);
    started = 1;
    atexit(screen_end);
    for (int r = 0; r < ROLE__COUNT; r++) {
        scheme_16[r] = scheme_8[r];
        if (r == ROLE_DIM || r == ROLE_RULE)
            scheme_16[r] = (style){8, -1, 0};
    }
    depth = choose_depth();
    apply_scheme();
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    intrflush(stdscr, FALSE);
    leaveok(stdscr, TRUE);
    curs_set(0);
    set_escdelay(25);
    /* The mouse, as htop and nvtop take it (tmux and SSH pass it on): clicks and the wheel;
     * no click delay. A terminal without a mouse simply sends none. */
    mousemask(BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
    mouseinterval(0);
    return 0;
}

void screen_end(void)
{
    if (!started)
        return;
    started = 0;
    curs_set(1);
    endwin();
    free(painted);
    painted = NULL;
    painted_rows = painted_cols = 0;
}

void screen_size(int *rows, int *cols)
{
    *rows = LINES;
    *cols = COLS;
}

void screen_invalidate(void)
{
    free(painted);
    painted = NULL;
    painted_rows = painted_cols = 0;
    clearok(curscr, TRUE);
}

static void paint_row(const canvas *c, int y, int cols)
{
    const cell *row = &c->cells[(size_t)y * (size_t)c->cols];
    for (int x = 0; x < cols; x++) {
        if (row[x].ch == CELL_CONT)
            continue;
        wchar_t wc[2] = {(wchar_t)row[x].ch, 0};
        int role = row[x].role < ROLE__COUNT ? row[x].role : ROLE_NORMAL;
        cchar_t cc;
        setcchar(&cc, wc, role_attr[role], role_pair[role], NULL);
        /* The bottom-right cell makes waddch report an error (the cursor cannot advance past
         * it) after the cell is written: that error is expected. */
        mvwadd_wch(stdscr, y, x, &cc);
    }
}

void screen_paint(const canvas *c, int all)
{
    if (!started)
        return;
    /* The canvas follows the terminal's size; between a resize and the next layout they may
     * differ for a moment, and only what both have is painted. */
    int rows = c->rows < LINES ? c->rows : LINES, cols = c->cols < COLS ? c->cols : COLS;
    if (painted_rows != c->rows || painted_cols != c->cols) {
        free(painted);
        painted = calloc((size_t)c->rows * (size_t)c->cols, sizeof *painted);
        painted_rows = painted ? c->rows : 0;
        painted_cols = painted ? c->cols : 0;
        all = 1;
    }
    size_t rowbytes = (size_t)c->cols * sizeof(cell);
    for (int y = 0; y < rows; y++) {
        const cell *src = &c->cells[(size_t)y * (size_t)c->cols];
        if (!all && painted && !memcmp(&painted[(size_t)y * (size_t)c->cols], src, rowbytes))
            continue;
        paint_row(c, y, cols);
        if (painted)
            memcpy(&painted[(size_t)y * (size_t)c->cols], src, rowbytes);
    }
    wnoutrefresh(stdscr);
    doupdate();
}

int screen_key(int timeout_ms)
{
    if (!started)
        return -1;
    wtimeout(stdscr, timeout_ms);
    wint_t wc;
    int r = wget_wch(stdscr, &wc);
    if (r == ERR)
        return -1;
    return (int)wc;
}

int screen_mouse(int *y, int *x)
{
    MEVENT me;
    if (!started || getmouse(&me) != OK)
        return 0;
    *y = me.y;
    *x = me.x;
    if (me.bstate & BUTTON4_PRESSED)
        return MOUSE_WHEEL_UP;
    if (me.bstate & BUTTON5_PRESSED)
        return MOUSE_WHEEL_DOWN;
    return me.bstate & BUTTON1_PRESSED ? MOUSE_CLICK : 0;
}

int screen_quit_signal(void)
{
    return quit_signal;
}
