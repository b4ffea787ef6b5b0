/*
 * tui internals: the layer below the panels (glyphs, canvas, layout, screen), the live source,
 * the view state with its keys, and the panels. Only tui/ and its tests include this; only
 * screen.c includes curses.
 *
 * Data flows one way: the source observes the segment's lanes and feeds an analysis and a
 * bounded timeline ring; panels read those and fill a canvas of cells; screen.c turns the canvas
 * into curses calls. Panels never compute statistics: they format what the analysis returns.
 */
#ifndef TERMSIGHT_TUI_INTERNAL_H
#define TERMSIGHT_TUI_INTERNAL_H

#include "analysis.h"
#include "model.h"
#include "tui.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

/* ---- Glyphs (glyphs.c) ------------------------------------------------------------------ */

/* Every non-text character the panels draw, in a UTF-8 table and an ASCII table side by side.
 * Parts that colors tell apart also differ by glyph, so a monochrome terminal shows them too. */
typedef struct glyphs {
    int utf8;
    uint32_t hline, vline;
    uint32_t interval, fpbp, wait, tail, eval; /* step bar parts: the split (fpbp: compute) */
    uint32_t unknown;                          /* a step whose FP/BP was not found */
    uint32_t avg, slow;                        /* the average line, a slowest-step marker */
    uint32_t shade[5];                         /* queue usage: 0-20 % .. 80-100 % */
    uint32_t user, system, iowait, used;       /* gauge parts */
    uint32_t edge, dense;                      /* timeline: a block's left edge; several ops */
    uint32_t ellipsis, selected, left, right, up, down;
} glyphs;

extern const glyphs glyphs_utf8;
extern const glyphs glyphs_ascii;

/* The table for the current locale (call after setlocale): UTF-8 when the codeset is UTF-8,
 * else ASCII. */
const glyphs *glyphs_for_locale(void);

/* ---- Roles ------------------------------------------------------------------------------ */

/* Semantic color roles: panels say what a cell is, screen.c's schemes say how it looks
 * (256, 16, 8 colors or monochrome attributes). */
enum role {
    ROLE_NORMAL,
    ROLE_DIM,        /* secondary text: units, empty parts, hints */
    ROLE_TITLE,      /* panel titles */
    ROLE_HEADER,     /* the header band */
    ROLE_HEADER_KEY, /* field names in the header */
    ROLE_TAB,
    ROLE_TAB_ACTIVE,
    ROLE_RULE,     /* separators */
    ROLE_LABEL,    /* column heads */
    ROLE_SELECTED, /* the selected row */
    ROLE_GOOD,
    ROLE_WARN,
    ROLE_BAD,
    ROLE_INTERVAL, /* step bar parts */
    ROLE_FPBP,
    ROLE_WAIT,
    ROLE_TAIL,
    ROLE_EVAL,
    ROLE_AVG,
    ROLE_SLOW,
    ROLE_HEAT0, /* queue usage, empty .. full (five roles) */
    ROLE_HEAT1,
    ROLE_HEAT2,
    ROLE_HEAT3,
    ROLE_HEAT4,
    ROLE_CPU_USER,
    ROLE_CPU_SYSTEM,
    ROLE_CPU_IOWAIT,
    ROLE_PROCESS,
    ROLE_MEMORY,
    ROLE_BLOCK0, /* timeline host blocks, by op type (four roles) */
    ROLE_BLOCK1,
    ROLE_BLOCK2,
    ROLE_BLOCK3,
    ROLE_DEVICE, /* timeline device blocks */
    ROLE_CURSOR, /* the op under the timeline cursor */
    ROLE_PROGRESS,
    ROLE_ERROR,
    ROLE__COUNT
};

/* ---- Canvas (canvas.c): cells that panels fill, no curses ------------------------------ */

#define CELL_CONT 0xffffffffu /* the right half of a double-width character */

typedef struct cell {
    uint32_t ch; /* a code point */
    uint8_t role;
    uint8_t pad[3];
} cell;

typedef struct rect {
    int y, x, h, w;
} rect;

typedef struct canvas {
    int rows, cols;
    cell *cells;
    const glyphs *g; /* ASCII: text outside ASCII is drawn as '?' */
} canvas;

/* Returns 0, or -1 when out of memory. rows and cols are clamped to at least 1. */
int canvas_init(canvas *c, int rows, int cols, const glyphs *g);
void canvas_free(canvas *c);
/* Resizes (contents cleared). Returns 0, or -1 when out of memory (the canvas is unchanged). */
int canvas_resize(canvas *c, int rows, int cols);
void canvas_clear(canvas *c);

/* Drawing is relative to r and clipped to it. */
void canvas_fill(canvas *c, rect r, uint32_t ch, int role);
void canvas_put(canvas *c, rect r, int y, int x, uint32_t ch, int role);

/* Writes len bytes of text (any bytes: invalid UTF-8 and control characters become '?') from
 * (y, x), at most max cells (max < 0: to the edge of r). Returns the cells used. */
int canvas_text(canvas *c, rect r, int y, int x, int max, int role, const char *s, size_t len);
int canvas_str(canvas *c, rect r, int y, int x, int role, const char *s);
int canvas_printf(canvas *c, rect r, int y, int x, int role, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Like canvas_text within width cells; text that does not fit is cut with an ellipsis, at the
 * start when keep_end (paths and scoped op names keep their informative end). */
int canvas_text_fit(canvas *c, rect r, int y, int x, int width, int role, const char *s, size_t len,
                    int keep_end);

/* Cells text takes (same rules as canvas_text). */
int canvas_text_width(const canvas *c, const char *s, size_t len);

/* Row y as UTF-8 text, trailing blanks removed, into out (NUL-terminated). Returns its length. */
size_t canvas_line(const canvas *c, int y, char *out, size_t cap);
/* The role of a cell, -1 off the canvas. */
int canvas_role_at(const canvas *c, int y, int x);

/* ---- Layout (layout.c): a pure function of the terminal size --------------------------- */

#define LAYOUT_MIN_ROWS 24
#define LAYOUT_MIN_COLS 80

/* The overview shows every panel but PANEL_RANKS (a screen of its own). */
enum panel_id {
    PANEL_STEPS,
    PANEL_OPS,
    PANEL_QUEUES,
    PANEL_CPU,
    PANEL_TIMELINE,
    PANEL_RANKS,
    PANEL__COUNT
};

/* Screen 0 is the overview; screen k shows panel k - 1 alone. */
#define SCREEN_OVERVIEW 0
#define SCREEN__COUNT   (PANEL__COUNT + 1)

typedef struct layout {
    int rows, cols;
    int too_small;            /* below LAYOUT_MIN_ROWS x LAYOUT_MIN_COLS: nothing else is set */
    rect header;              /* process, state, rates */
    rect tabs;                /* the screens */
    rect body;                /* what the panels share */
    rect status;              /* messages, progress, key hints */
    rect panel[PANEL__COUNT]; /* h == 0: not shown */
    rect rule[2];             /* vertical separators; h == 0: none */
} layout;

void layout_compute(int rows, int cols, int screen, layout *out);

/* ---- Screen (screen.c): the one file that talks to curses ------------------------------ */

/* Starts curses on the terminal (the locale must be set): alternate screen, no echo, keypad,
 * hidden cursor, the color scheme for the terminal's depth (monochrome under NO_COLOR), and
 * handlers that restore the terminal on fatal signals. Returns 0, or -1 with *cause. */
int screen_init(char **cause);
/* Restores the terminal. Safe to call twice, and from the crash handler. */
void screen_end(void);
/* The terminal's size now. */
void screen_size(int *rows, int *cols);
/* Copies the canvas rows that changed since the last paint into curses' virtual screen and
 * updates the terminal (curses sends only the difference). all: every row, after a resize. */
void screen_paint(const canvas *c, int all);
/* Forgets what the terminal shows and repaints it whole at the next paint (Ctrl-L). */
void screen_invalidate(void);
/* The next key within timeout_ms (curses numbering, see enum view_key_code), or -1. */
int screen_key(int timeout_ms);
/* After screen_key returned VK_MOUSE: the event (enum mouse_kind, 0 for one to ignore) and
 * where, in terminal cells. */
int screen_mouse(int *y, int *x);
/* A quit signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) received, or 0. */
int screen_quit_signal(void);

/* ---- Timeline ring (tlring.c): the recent ops and device work, bounded ----------------- */

#define TLRING_LANES 64 /* lanes kept; events of further threads or streams are not kept */

typedef struct tl_lane {
    uint32_t device; /* TS_DEVICE_HOST for a host thread */
    uint32_t tid;    /* thread, or stream */
    uint32_t count;  /* its events in the ring; a lane leaves with its last event */
} tl_lane;

#define TLRING_MARKS  8192 /* step edges, queue sizes and counter values kept */
#define TLRING_TRACKS 8    /* queues and counters with a track; further ones are not drawn */

/* A small track under the lanes: one queue's sizes or one counter's values. */
typedef struct tl_track {
    uint16_t kind; /* TS_KIND_QUEUE_SAMPLE or TS_KIND_COUNTER */
    uint32_t name;
} tl_track;

typedef struct tlring {
    ts_event *ev;
    size_t cap, n, next; /* n events held, oldest at (next - n) mod cap; next slot written */
    uint64_t latest_ns;  /* the latest end of a range seen ("now" for the timeline) */
    tl_lane lanes[TLRING_LANES];
    uint32_t nlanes;
    uint64_t refused; /* events of lanes beyond TLRING_LANES */
    /* Instants beside the ranges, in a ring of their own (so a flood of queue sizes never
     * pushes ops out): step begins and ends, queue sizes, counter values. */
    ts_event *marks;
    size_t nmarks, next_mark;
    tl_track tracks[TLRING_TRACKS];
    uint32_t ntracks;
} tlring;

int tlring_init(tlring *r, size_t cap);
void tlring_free(tlring *r);
/* Keeps ranges of the kinds the timeline shows (ops, NVTX, communication, kernels, copies,
 * memsets), and step edges, queue sizes and counter values as marks; other kinds are ignored. */
void tlring_feed(tlring *r, const ts_event *ev, size_t n);
/* The lane index of an event, -1 when it has none. */
int tlring_lane_of(const tlring *r, const ts_event *ev);
/* The k-th mark held, 0 = oldest (k < r->nmarks). */
const ts_event *tlring_mark(const tlring *r, size_t k);

/* ---- The live source (source.c) -------------------------------------------------------- */

typedef struct source source;

/* What the header shows. */
typedef struct source_status {
    pid_t pid;
    char process[64];
    char run_folder[1024]; /* absolute (segment_run_folder); as the header says when unknown */
    char folder_why[256];  /* why the run folder is not known; "" when it is */
    char note[256];        /* what finding the segment passed over (segment_note); "" none */
    uint32_t state;        /* enum ts_state as the header says */
    int gone;              /* the process has ended (state ENDED, or the pid no longer exists) */
    double elapsed_s;
    double events_per_s;   /* events the process wrote into its lanes, per second */
    uint64_t drops;        /* events the collector dropped */
    lane_loss worst;       /* the thread that lost most in the window under way */
    uint32_t lost_threads; /* threads that lost events in it */
    uint64_t missed;       /* events of the lanes the monitor did not read: skipped or lapped */
    uint64_t observed;     /* events the monitor read */
    int sampled;           /* the views built from the lanes (queues, counters, the timeline)
                              missed events lately: they show a sample */
    uint64_t ops_lost;     /* operator events the operator board had no room for */
    uint64_t board_ns;     /* collector clock of the boards' last publication (0: none) */
    uint32_t window;
    uint32_t flight_mb; /* the session keeps a flight recorder (no recording); 0: none */
    uint64_t steps;     /* the last step the training began (its own count; 0: unknown) */
    uint32_t record_error;
    char record_notice[256];
    char job[64];                         /* the job the session is a rank of; "" when none */
    char host[64];                        /* "" when unknown */
    int32_t rank, local_rank, world_size; /* -1 when unknown */
    /* Hang triage (model/inflight.c, analysis/hang.c): what the process is inside now. */
    char inside[160]; /* "in c10d::allreduce_ for 41.2 s"; "" when nothing is open */
    double comm_s;    /* its oldest communication in flight has waited this long; < 0: none */
    double since_s;   /* since its last step ended (or its session began) */
    int stalled;      /* no step ended for a while (job_stalled): inside is worth showing */
} source_status;

/* Attaches read-only to pid's segment and starts observing. An incompatible, damaged or
 * foreign segment, or none: -1 with *cause. */
int source_open(pid_t pid, source **out, char **cause);
void source_close(source *s);

/* Reads what the lanes hold since the last poll into the analysis and the timeline ring. now_ns
 * is CLOCK_MONOTONIC, for rates. Returns the events read. */
size_t source_poll(source *s, uint64_t now_ns);

/* After a pause (the display frozen): lanes the writers lapped meanwhile resume from what they
 * still hold, without counting the rest as missed. */
void source_resync(source *s);

/* The step the training is at: its own count as the collector mirrors it, else the last step
 * begun that the step board has (the header, the Ranks screen and the snapshots say this one). */
uint64_t source_step_now(const source_status *st, const analysis *a);

analysis *source_analysis(const source *s);
const tlring *source_timeline(const source *s);
const source_status *source_status_of(const source *s);

/* Sends a command through the mailbox (attaching writable on first use). Returns 0 with *seq,
 * or -1 with *cause. */
int source_send(source *s, uint32_t cmd, uint64_t *seq, char **cause);
/* 1 with the answer when seq was answered, 0 while pending. */
int source_reply(source *s, uint64_t seq, int32_t *status, char *msg, size_t len);

/* Live sessions of this user: alive, readable and not ended, oldest first. *out malloc'd. */
int source_list_live(segment_info **out, char **cause);

/* ---- The job's ranks on this machine (ranks.c) ------------------------------------------ */

#define RANKS_MAX 64 /* ranks watched at once; sessions beyond are counted, not watched */

/* One rank of the Ranks screen: who it is, its state, and its figures as its live analysis has
 * them (times in ns). Filled by ranks_row_fill; the verdict by ranks_verdict. */
typedef struct rank_row {
    pid_t pid;
    int32_t rank, local_rank; /* -1 when unknown */
    char host[64];
    uint32_t state; /* enum ts_state */
    int gone;       /* ended: the figures are its last */
    uint64_t step;  /* the last step begun, 0: none */
    uint64_t steps; /* steps finished */
    int have_last;  /* the last finished step's figures below are set */
    double last_total_ns, last_interval_ns, last_compute_ns, last_wait_ns, last_tail_ns;
    double avg_total_ns, avg_interval_ns, avg_compute_ns, avg_wait_ns, avg_tail_ns, avg_eval_ns;
    double last_eval_ns;
    double avg_comm_ns; /* communication in flight per step: 0, its waits were not measured */
    double events_per_s;
    uint64_t drops;
    double cpu; /* the process's CPU at its last sample, percent of one CPU; < 0: no sample */
    /* The job rule's verdict (analysis/job.h). */
    int straggler;
    const char *cause;                /* with straggler: "data", "compute" or "tail" */
    double excess_ns, others_wait_ns; /* its busy time past the typical rank's; the others' wait */
    /* Hang triage: what it is inside (source_status), and the hang rule's verdict. */
    char inside[160];
    double comm_s, since_s;
    int stalled;
    int waited_for; /* the others wait in a communication; this rank is in none */
} rank_row;

/* What the Ranks screen and the snapshots read. */
typedef struct ranks_table {
    char job[64]; /* "" when the session watched is no rank of a job */
    int32_t world_size;
    size_t n;      /* rows, by rank */
    size_t hidden; /* live sessions of the job beyond RANKS_MAX, not watched */
    int selected;  /* the row of the rank the other screens show */
    size_t stragglers;
    size_t unmeasured; /* ranks with steps that recorded no communication */
    size_t stalled;    /* ranks whose step has not ended for a while (job_stalled) */
    size_t waited_for; /* ranks the others wait for (job_waited_for) */
    char hang_verdict[256];
    rank_row row[RANKS_MAX];
} ranks_table;

/* A row from a rank's status and live analysis, without the verdict. */
void ranks_row_fill(rank_row *row, const source_status *st, const analysis *a);
/* Marks t's stragglers by the job rule (job_stragglers) over the rows' averages. */
void ranks_verdict(ranks_table *t);

/* The live sources of one job's ranks on this machine: the session attached to, and, when it
 * is a rank of a job, every other live session of that job that segment_list finds (ranks that
 * appear later are picked up; ranks that end keep their last figures). */
typedef struct ranks ranks;

/* Watches pid's session and its job's other sessions. -1 with *cause when pid's session cannot
 * be watched; another rank that cannot is left out (and looked for again). */
int ranks_open(pid_t pid, ranks **out, char **cause);
void ranks_close(ranks *r);
/* Looks for sessions of the job not watched yet. Returns how many were added. */
int ranks_discover(ranks *r);
/* Polls every rank's source (ranks_discover every few seconds), then refreshes the table. */
void ranks_poll(ranks *r, uint64_t now_ns);
/* source_resync for every rank. */
void ranks_resync(ranks *r);
const ranks_table *ranks_table_of(const ranks *r);
/* The source of row i of the table (NULL out of range), and of the selected rank. */
source *ranks_source(const ranks *r, size_t i);
source *ranks_selected(const ranks *r);
/* Makes row i the selected rank (out of range: no change). */
void ranks_select(ranks *r, size_t i);

/* ---- Formatting (format.c) ------------------------------------------------------------- */

/* "850 ns", "12.3 us", "4.56 ms", "1.23 s", "-" for a negative value. */
void format_duration(double ns, char *out, size_t cap);
/* "0:01:23", "2d 03:04:05". */
void format_elapsed(double s, char *out, size_t cap);
/* "950", "12.3k", "4.56M". */
void format_count(double v, char *out, size_t cap);
/* "512 B", "12.3 KiB", "1.50 GiB". */
void format_bytes(double v, char *out, size_t cap);
/* The shade (0 .. 4, glyphs_*.shade and ROLE_HEAT0 + it) of a share from 0 to 1; anything
 * else, a NaN or an infinity from a damaged segment included, is clamped, never converted. */
int format_shade(double share);

typedef struct panel_ctx panel_ctx;

/* ---- View state and keys (view.c) ------------------------------------------------------ */

#define VIEW_SEARCH_MAX 64

/* Keys, as curses numbers them (the room's tests use these without curses). */
enum view_key_code {
    VK_TAB = '\t',
    VK_ENTER = '\n',
    VK_ESC = 27,
    VK_CTRL_L = 12,
    VK_BACKSPACE_ASCII = 127,
    VK_DOWN = 0402,
    VK_UP = 0403,
    VK_LEFT = 0404,
    VK_RIGHT = 0405,
    VK_HOME = 0406,
    VK_BACKSPACE = 0407,
    VK_F1 = 0411,
    VK_F5 = 0415,
    VK_F6 = 0416,
    VK_F7 = 0417,
    VK_F10 = 0422,
    VK_NPAGE = 0522,
    VK_PPAGE = 0523,
    VK_ENTER_KP = 0527,
    VK_BTAB = 0541,
    VK_END = 0550,
    VK_RESIZE = 0632,
    VK_MOUSE = 0631, /* a mouse event: screen_mouse says which */
};

/* A mouse event, as screen.c reads it (the room's tests make them by hand). */
enum mouse_kind { MOUSE_CLICK = 1, MOUSE_WHEEL_UP, MOUSE_WHEEL_DOWN };

/* What a key asks of the loop. */
enum view_action {
    VA_NONE = 0,
    VA_REDRAW,    /* state changed: draw again */
    VA_QUIT,      /* restore the terminal and leave */
    VA_STARTSTOP, /* start or stop collection through the mailbox */
    VA_ANALYSE,   /* flush, then write the report folder */
    VA_FREEZE,    /* the display was frozen or thawed (v->frozen says which) */
    VA_REPAINT,   /* redraw the whole terminal (Ctrl-L) */
    VA_RANK,      /* show the rank of the Ranks screen's row v->ranks_sel (Enter there) */
    VA_SNAPSHOT,  /* a flight-recorder snapshot through the mailbox */
};

typedef struct view {
    int screen;                         /* SCREEN_OVERVIEW or 1 + enum panel_id */
    int help;                           /* the help screen is up */
    int help_top, help_rows, help_page; /* its first entry shown, its entries, entries shown */
    int help_more;                      /* the help does not fit: it scrolls */
    int notice;                         /* a notice (the analysis result) is up */
    int frozen;
    int confirm; /* VA_STARTSTOP (a stop) or VA_ANALYSE waiting for 'y'; 0: none */
    /* The key bar as last drawn: each entry's columns and the key it stands for (clicks). */
    struct {
        int x0, x1, key;
    } bar[32];
    int nbar;

    /* Operators. */
    int ops_by_type; /* 1: types; 0: ops */
    int ops_kernels; /* 1: the device kernels with their ops instead ('k') */
    int ops_sort;    /* OP_SORT_TOTAL, OP_SORT_AVG or OP_SORT_COUNT */
    int searching;   /* typing into search */
    char search[VIEW_SEARCH_MAX];
    char search_before[VIEW_SEARCH_MAX]; /* restored by Esc */
    uint32_t ops_type;                   /* ops of this type only (Enter on a type); 0: all */
    int ops_sel, ops_top;                /* selected row, first row shown */
    int ops_rows;                        /* rows of the last draw, for keys */
    int ops_page;                        /* rows shown at the last draw */
    uint32_t ops_sel_id;                 /* id of the selected row at the last draw */

    /* Step trace: steps hidden to the right (0: the latest). */
    int steps_back;
    int steps_page;
    /* Queues and CPU: first row shown. */
    int queues_top, cpu_top;
    /* Ranks: the row under the cursor, the first row shown. */
    int ranks_sel, ranks_top;

    /* Timeline: the window is [end - span, end]; follow keeps end at the latest event. */
    uint64_t tl_span_ns;
    uint64_t tl_end_ns;
    int tl_follow;
    int tl_lane;        /* selected lane */
    uint64_t tl_cursor; /* begin_ns of the op under the cursor; 0: none chosen */
    uint64_t tl_latest; /* the ring's latest end at the last draw */
    int tl_lane_top;    /* first lane shown */
    int tl_rows_above;  /* rows between the axis and the first lane at the last draw (steps) */
} view;

void view_init(view *v);

/* A mouse event at (y, x) of the terminal laid out as L: a click on a tab shows its screen, on
 * a key bar entry does what its key does, on a table row or a timeline block selects it (a
 * second click on the selected rank shows it); the wheel scrolls tables and moves the
 * timeline. Returns a view_action, as view_key. */
int view_mouse(view *v, const layout *L, const panel_ctx *p, int kind, int y, int x);

/* Handles one key. Keys reach the help screen, the search line, the global keys, then the
 * panel on screen (on the overview: the operators table, then the timeline). */
int view_key(view *v, int key, const panel_ctx *p);

/* How a list of the panels moves under the scroll keys (view_scroll). */
typedef struct scroll_keys {
    int page; /* positions PgUp/PgDn move; 0: the list takes no page keys */
    int last; /* the last position, where End goes; SCROLL_OPEN: no End key, the draw bounds it */
    int back_in_time; /* 0 is the newest step, on the right: Left, PgUp and Home go back */
} scroll_keys;

#define SCROLL_OPEN INT_MAX

/* The scroll keys the panels' lists share, applied to *pos: Up/Down a row, PgUp/PgDn a page,
 * Home to 0 and End to the last (with back_in_time: Right/Left, PgDn/PgUp, End/Home). *pos
 * stays within 0 and the last (0 when the list is empty). Returns 1 when key is one of them,
 * else 0 with *pos unchanged. */
int view_scroll(const scroll_keys *s, int key, int *pos);

/* ---- Panels (panel_*.c) ---------------------------------------------------------------- */

/* What a panel reads: the analysis and the timeline ring (the live source's, or a test's). */
struct panel_ctx {
    const analysis *a;
    const tlring *tl;
    const source_status *st; /* NULL when unknown (tests) */
    const ranks_table *rk;   /* the job's ranks; NULL when unknown (tests) */
};

/* One entry of the bottom key bar: the key as shown, what it does (short), and how soon it
 * goes when the bar is too narrow (0: never; higher goes first). */
typedef struct key_hint {
    const char *key, *what;
    int drop;
    int code; /* the key a click on the entry presses (0: none, as for a pair of keys) */
} key_hint;

typedef struct panel_class {
    const char *title;
    const char *tab;       /* its screen's name */
    const key_hint *hints; /* its keys for the key bar, ending with {NULL} */
    /* Fills r. full: the panel has the screen to itself. The view's scroll positions are
     * clamped to what there is. */
    void (*draw)(const panel_ctx *p, view *v, canvas *c, rect r, int full);
    /* Returns 1 when it handled key. full 0: the key came on the overview. */
    int (*key)(const panel_ctx *p, view *v, int key, int full);
    /* A click at (y, x) in the panel's rect r (NULL: clicks do nothing). Returns a view_action:
     * VA_NONE when nothing there, VA_REDRAW when it selected something, or the action of a
     * second click on a selected row (the Ranks screen's Enter). */
    int (*click)(const panel_ctx *p, view *v, rect r, int y, int x, int full);
    /* The keys the wheel stands for in this panel: up, down (0: the wheel does nothing). */
    int wheel_up, wheel_down;
} panel_class;

extern const panel_class panel_steps;
extern const panel_class panel_ops;
extern const panel_class panel_queues;
extern const panel_class panel_cpu;
extern const panel_class panel_timeline;
extern const panel_class panel_ranks;

/* In enum panel_id order (frame.c). */
extern const panel_class *const panels[PANEL__COUNT];

/* ---- The frame (frame.c) ---------------------------------------------------------------- */

/* The title line of a panel: its name, then extra text dimmed, then a rule. */
void frame_title(canvas *c, rect r, const char *title, const char *extra);

/* The header band: process, pid, state, rates; then the step, the analysis's progress
 * (progress < 0: none, else 0..1), and the latest message (message_role: its role) or, with
 * none, the run folder. The tab line, the help screen, the "too small" screen. */
void frame_header(canvas *c, rect r, const source_status *st, const analysis *a,
                  const char *message, int message_role, double progress, int frozen);
void frame_tabs(canvas *c, rect r, int screen);
void frame_help(canvas *c, rect r, view *v);
void frame_too_small(canvas *c, int rows, int cols);
/* A titled page of text (the analysis result), paragraphs split at '\n' and wrapped. */
void frame_notice(canvas *c, rect r, const char *title, const char *text);
/* The key bar (the bottom line, htop's): the keys of the screen shown, the global ones around
 * them, the least needed left out when the line is narrow; a question while an action waits
 * for its confirmation. */
void frame_keys(canvas *c, rect r, view *v, const panel_ctx *p);
/* The screen whose tab holds column x of a tab line cols wide, or -1. */
int frame_tab_at(int cols, int x);
/* Writes text wrapped to r's width from row y; returns the rows used. */
int frame_wrap(canvas *c, rect r, int y, int x, int role, const char *text);

/* Everything: header (with message and progress as frame_header), tabs, the screen's panels
 * (or help), the key bar. */
void frame_draw(canvas *c, const layout *L, view *v, const panel_ctx *p, const char *message,
                int message_role, double progress);

/* ---- Snapshot without curses (snapshot.c) ---------------------------------------------- */

/* Writes the header and every panel as text, cols wide. */
void snapshot_text(FILE *out, const panel_ctx *p, const glyphs *g, int cols);
/* Writes the same figures as one JSON object (cJSON). Returns 0, or -1 when out of memory. */
int snapshot_json(FILE *out, const panel_ctx *p);

#endif
