/* frame: what surrounds the panels: the header band, the tab line, the status line, and the
 * pages that replace the body (help, notices, "terminal too small"). */
#include "tui_internal.h"

#include <string.h>

/* The panels, in enum panel_id order: the overview draws them all, screen k shows panel k - 1. */
const panel_class *const panels[PANEL__COUNT] = {
    [PANEL_STEPS] = &panel_steps,       [PANEL_OPS] = &panel_ops,
    [PANEL_QUEUES] = &panel_queues,     [PANEL_CPU] = &panel_cpu,
    [PANEL_TIMELINE] = &panel_timeline, [PANEL_RANKS] = &panel_ranks,
};

void frame_title(canvas *c, rect r, const char *title, const char *extra)
{
    rect line = {r.y, r.x, 1, r.w};
    canvas_fill(c, line, c->g->hline, ROLE_RULE);
    int x = 1;
    x += canvas_printf(c, line, 0, x, ROLE_TITLE, " %s ", title);
    if (extra && *extra) {
        int w = canvas_text_fit(c, line, 0, x, r.w - x - 2, ROLE_DIM, extra, strlen(extra), 0);
        canvas_put(c, line, 0, x + w, ' ', ROLE_DIM);
    }
}

static int state_role(const source_status *st)
{
    if (st->gone)
        return ROLE_BAD;
    switch (st->state) {
    case TS_STATE_COLLECTING:
        return ROLE_GOOD;
    case TS_STATE_STOPPED:
        return ROLE_WARN;
    case TS_STATE_IDLE:
        return ROLE_NORMAL;
    default:
        return ROLE_BAD;
    }
}

/* One "label value" item; nothing when it would not fit whole. Returns the new x. */
static int item(canvas *c, rect r, int y, int x, const char *label, const char *value, int role)
{
    int need = (label ? canvas_text_width(c, label, strlen(label)) + 1 : 0) +
               canvas_text_width(c, value, strlen(value)) + 2;
    if (x + need > r.w)
        return x;
    if (label)
        x += canvas_printf(c, r, y, x, ROLE_HEADER_KEY, "%s ", label);
    x += canvas_str(c, r, y, x, role, value);
    return x + 2;
}

void frame_header(canvas *c, rect r, const source_status *st, const analysis *a,
                  const char *message, int message_role, double progress, int frozen)
{
    canvas_fill(c, r, ' ', ROLE_HEADER);
    char buf[96];
    int x = 1;
    if (r.w >= 100 || !st) /* narrower, the figures matter more than the name of the tool */
        x += canvas_str(c, r, 0, x, ROLE_TITLE, "termsight top") + 2;
    if (!st) {
        canvas_str(c, r, 0, x, ROLE_DIM, "no session");
        return;
    }
    int pw = canvas_text_width(c, st->process, strlen(st->process));
    x += canvas_text_fit(c, r, 0, x, pw < 24 ? pw : 24, ROLE_HEADER, st->process,
                         strlen(st->process), 0) +
         2;
    snprintf(buf, sizeof buf, "%d", (int)st->pid);
    x = item(c, r, 0, x, "pid", buf, ROLE_HEADER);
    if (st->job[0]) { /* a rank of a job: which one (screen 7 has them all) */
        if (st->rank < 0)
            snprintf(buf, sizeof buf, "?");
        else if (st->world_size > 0)
            snprintf(buf, sizeof buf, "%d/%d", (int)st->rank, (int)st->world_size);
        else
            snprintf(buf, sizeof buf, "%d", (int)st->rank);
        x = item(c, r, 0, x, "rank", buf, ROLE_HEADER);
    }
    if (st->gone)
        snprintf(buf, sizeof buf, "ended (%s)",
                 st->state == TS_STATE_ENDED ? "session closed" : "process gone");
    else if (st->flight_mb && st->state == TS_STATE_COLLECTING)
        snprintf(buf, sizeof buf, "flight"); /* collecting into its flight recorder */
    else
        snprintf(buf, sizeof buf, "%s", state_name(st->state));
    x = item(c, r, 0, x, NULL, buf, state_role(st));
    format_count(st->events_per_s, buf, sizeof buf);
    x = item(c, r, 0, x, "events/s", buf, ROLE_HEADER);
    format_count((double)st->drops, buf, sizeof buf);
    x = item(c, r, 0, x, "drops", buf, st->drops ? ROLE_WARN : ROLE_HEADER);
    if (st->lost_threads) {
        /* Who lost most in this window, and how fast it emitted when it began to. */
        char rate[16];
        format_count((double)st->worst.rate, rate, sizeof rate);
        snprintf(buf, sizeof buf, "tid %u at %s/s%s", st->worst.tid, rate,
                 st->lost_threads > 1 ? " +" : "");
        x = item(c, r, 0, x, "lost by", buf, ROLE_WARN);
    }
    format_elapsed(st->elapsed_s, buf, sizeof buf);
    x = item(c, r, 0, x, "up", buf, ROLE_HEADER);
    if (frozen)
        canvas_str(c, r, 0, r.w - 8, ROLE_WARN, "FROZEN");

    x = 1;
    /* The training's own count where the collector says it (the live view sees steps only
     * while collecting, and may miss some); final once the process has ended. */
    step_summary ss = analysis_steps(a);
    uint64_t step = source_step_now(st, a);
    if (step)
        snprintf(buf, sizeof buf, "%llu%s", (unsigned long long)step, st->gone ? " (final)" : "");
    else
        snprintf(buf, sizeof buf, "-");
    x = item(c, r, 1, x, "step", buf, ROLE_HEADER);
    format_duration(ss.steps ? ss.avg_total_ns : -1, buf, sizeof buf);
    x = item(c, r, 1, x, "avg step", buf, ROLE_HEADER);
    if (st->stalled && !st->gone) /* no step end for a while: where it is (termsight hang) */
        x = item(c, r, 1, x, "stalled", st->inside, ROLE_BAD);
    if (progress >= 0 && r.w - x > 32) {
        /* The analysis at work: a bar of its progress. */
        int bw = 16, fill = (int)(progress * bw + 0.5);
        x += canvas_str(c, r, 1, x, ROLE_HEADER_KEY, "analysing [");
        for (int i = 0; i < bw; i++)
            canvas_put(c, r, 1, x + i, i < fill ? c->g->used : ' ',
                       i < fill ? ROLE_PROGRESS : ROLE_DIM);
        x += bw;
        x += canvas_printf(c, r, 1, x, ROLE_HEADER, "] %3d %%  ", (int)(progress * 100 + 0.5));
    }
    if (message && *message && r.w - x > 10) {
        /* The latest answer or event, while it is news; else the run folder. */
        canvas_text_fit(c, r, 1, x, r.w - x - 1, message_role, message, strlen(message), 0);
        return;
    }
    if (st->record_error) {
        /* The reason first: the notice starts with a path that a narrow header cuts short. */
        char why[96];
        snprintf(why, sizeof why, "recording stopped (%s): ", strerror((int)st->record_error));
        x += canvas_str(c, r, 1, x, ROLE_ERROR, why);
        canvas_text_fit(c, r, 1, x, r.w - x - 1, ROLE_ERROR, st->record_notice,
                        strlen(st->record_notice), 0);
    } else if (r.w - x > 10) {
        x += canvas_str(c, r, 1, x, ROLE_HEADER_KEY, "run ");
        canvas_text_fit(c, r, 1, x, r.w - x - 1, ROLE_HEADER, st->run_folder,
                        strlen(st->run_folder), 1);
    }
}

static const char *tab_name(int s)
{
    return s == SCREEN_OVERVIEW ? "Overview" : panels[s - 1]->tab;
}

/* The tab line's geometry: a blank between tabs where they fit with it (at 80 columns they
 * fit without); tab s spans [x0[s], x0[s] + width(s)). */
static int tab_gap(int cols)
{
    int need = 1;
    for (int s = 0; s < SCREEN__COUNT; s++)
        need += (int)strlen(tab_name(s)) + 5;
    return need <= cols ? 1 : 0;
}

static int tab_width(int s)
{
    return (int)strlen(tab_name(s)) + 4; /* " %d %s " with a one-digit number */
}

void frame_tabs(canvas *c, rect r, int screen)
{
    canvas_fill(c, r, ' ', ROLE_TAB);
    int gap = tab_gap(r.w), x = 1;
    for (int s = 0; s < SCREEN__COUNT; s++)
        x += canvas_printf(c, r, 0, x, s == screen ? ROLE_TAB_ACTIVE : ROLE_TAB, " %d %s ", s + 1,
                           tab_name(s)) +
             gap;
}

int frame_tab_at(int cols, int x)
{
    int gap = tab_gap(cols), at = 1;
    for (int s = 0; s < SCREEN__COUNT; s++) {
        if (x >= at && x < at + tab_width(s))
            return s;
        at += tab_width(s) + gap;
    }
    return -1;
}

/* The keys every screen has, around the screen's own (key_hint.drop: the higher, the sooner
 * it goes when the bar is narrow; 0 stays). */
static const key_hint global_first[] = {
    {"F1", "Help", 0, VK_F1}, {"F5", NULL, 0, VK_F5}, {"F6", "Analyse", 0, VK_F6}};
static const key_hint global_last[] = {
    {"Tab", "Screen", 5, VK_TAB}, {"Space", NULL, 6, ' '}, {"F10", "Quit", 0, VK_F10}};

/* A key as the terminal can show it: the arrows in ASCII where the locale has no UTF-8. */
static const char *key_text(const canvas *c, const char *key)
{
    if (c->g->utf8)
        return key;
    if (!strcmp(key, "\u2190\u2192"))
        return "<>";
    if (!strcmp(key, "\u2191\u2193"))
        return "^v";
    return key;
}

static int hint_width(const canvas *c, const key_hint *h)
{
    const char *k = key_text(c, h->key);
    return canvas_text_width(c, k, strlen(k)) + canvas_text_width(c, h->what, strlen(h->what));
}

void frame_keys(canvas *c, rect r, view *v, const panel_ctx *p)
{
    canvas_fill(c, r, ' ', ROLE_TAB);
    v->nbar = 0;
    if (v->confirm) {
        const char *ask = v->confirm == VA_STARTSTOP
                              ? " Stop collecting? The window ends here.   y stop   any other "
                                "key: no "
                              : " Run the analysis? It writes the report folder, replacing an "
                                "earlier one.   y run   any other key: no ";
        canvas_text_fit(c, r, 0, 0, r.w, ROLE_WARN, ask, strlen(ask), 0);
        return;
    }
    if (v->searching) {
        canvas_str(c, r, 0, 1, ROLE_TAB, "Search: type a part of a name   Enter keep   Esc cancel");
        return;
    }
    if (v->help) {
        canvas_str(c, r, 0, 1, ROLE_TAB,
                   v->help_more ? "Up Down PgUp PgDn scroll   any other key closes"
                                : "any key closes this page   q quit");
        return;
    }
    if (v->notice) {
        canvas_str(c, r, 0, 1, ROLE_TAB, "any key closes this page   q quit");
        return;
    }
    /* The bar's entries: the global first ones, the screen's (on the overview, the keys that
     * reach its panels: operators, timeline), the global last ones. */
    key_hint all[32];
    size_t n = 0;
    int collecting = p && p->st && !p->st->gone && p->st->state == TS_STATE_COLLECTING;
    for (size_t i = 0; i < sizeof global_first / sizeof global_first[0]; i++) {
        all[n] = global_first[i];
        if (!all[n].what)
            all[n].what = collecting ? "Stop" : "Collect";
        n++;
    }
    const panel_class *own[2] = {NULL, NULL};
    if (v->screen == SCREEN_OVERVIEW)
        own[0] = panels[PANEL_TIMELINE], own[1] = panels[PANEL_OPS];
    else
        own[0] = panels[v->screen - 1];
    for (int k = 0; k < 2; k++)
        for (const key_hint *h = own[k] ? own[k]->hints : NULL; h && h->key && n < 28; h++)
            all[n++] = *h;
    for (size_t i = 0; i < sizeof global_last / sizeof global_last[0]; i++) {
        all[n] = global_last[i];
        if (!all[n].what)
            all[n].what = v->frozen ? "Thaw" : "Freeze";
        n++;
    }
    /* Step down: the entry that goes soonest leaves first, until the rest fit. */
    int keep[32], width = 0;
    for (size_t i = 0; i < n; i++) {
        keep[i] = 1;
        width += hint_width(c, &all[i]) + 2;
    }
    while (width > r.w) {
        size_t worst = n;
        for (size_t i = 0; i < n; i++)
            if (keep[i] && all[i].drop && (worst == n || all[i].drop >= all[worst].drop))
                worst = i;
        if (worst == n)
            break;
        keep[worst] = 0;
        width -= hint_width(c, &all[worst]) + 2;
    }
    int x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!keep[i])
            continue;
        const char *k = key_text(c, all[i].key);
        int x0 = x;
        x += canvas_str(c, r, 0, x, ROLE_TAB_ACTIVE, k);
        x += canvas_str(c, r, 0, x, ROLE_TAB, all[i].what);
        if (all[i].code && v->nbar < (int)(sizeof v->bar / sizeof v->bar[0])) {
            v->bar[v->nbar].x0 = x0;
            v->bar[v->nbar].x1 = x;
            v->bar[v->nbar].key = all[i].code;
            v->nbar++;
        }
        x += canvas_str(c, r, 0, x, ROLE_TAB, "  ");
    }
}

/* frame_wrap's work; draw 0: only counts the rows. */
static int wrap(canvas *c, rect r, int y, int x, int role, const char *text, int draw)
{
    int width = r.w - x, rows = 0;
    const char *p = text;
    while (*p && y + rows < r.h) {
        const char *nl = strchr(p, '\n');
        size_t para = nl ? (size_t)(nl - p) : strlen(p);
        size_t i = 0;
        do {
            /* Take whole words while they fit; a word longer than the line is cut. */
            size_t best = 0, j = i;
            while (j < para) {
                size_t k = j;
                while (k < para && p[k] == ' ')
                    k++;
                while (k < para && p[k] != ' ')
                    k++;
                if (canvas_text_width(c, p + i, k - i) > width)
                    break;
                best = k - i;
                j = k;
            }
            if (!best && i < para) {
                best = 1;
                while (i + best < para && canvas_text_width(c, p + i, best + 1) <= width)
                    best++;
            }
            if (draw && y + rows < r.h)
                canvas_text(c, r, y + rows, x, width, role, p + i, best);
            rows++;
            i += best;
            while (i < para && p[i] == ' ')
                i++;
        } while (i < para && y + rows < r.h);
        p += para + (nl ? 1 : 0);
    }
    return rows;
}

int frame_wrap(canvas *c, rect r, int y, int x, int role, const char *text)
{
    return wrap(c, r, y, x, role, text, 1);
}

static const struct {
    const char *keys, *what;
} help_lines[] = {
    {NULL, "Keys"},
    {"Tab  Shift-Tab", "next / previous screen"},
    {"1 .. 7", "overview, step trace, operators, queues, CPU and memory, timeline, ranks"},
    {"F5  c", "start or stop collecting (a stop asks first: y); of a job: every rank"},
    {"F7  p", "flight-recorder snapshot (termsight run --flight): the events kept, written under "
              "the run folder's snapshots/; of a job: every rank"},
    {"F6  r", "analyse (asks first: y): flush, write the report folder, show its path and top "
              "suggestions; of a job: every rank's, then the job report"},
    {"space", "freeze or thaw the display"},
    {"?  h  F1", "this help (any key closes it)"},
    {"q  F10", "quit (the terminal is restored; training goes on)"},
    {"Ctrl-L", "redraw the whole terminal"},
    {"Up Down PgUp PgDn", "move in a table (operators; lanes on the timeline)"},
    {"Home End", "first / last row; oldest / latest steps and timeline"},
    {"Left Right", "step trace: older / newer steps; timeline: previous / next op"},
    {"t  k", "operators: by type or by op; k: device kernels with the op each ran under"},
    {"o", "operators: sort by total, average or count"},
    {"/", "operators: search (Enter keeps it, Esc cancels)"},
    {"Enter", "operators: the selected type's ops (Esc or Backspace: back); ranks: show that "
              "rank on every screen"},
    {"w  s", "timeline: zoom in / out (either case)"},
    {"a  d", "timeline: move left / right (d past the end follows the latest again)"},
    {"mouse", "click a tab, a key bar entry, a row (again: open it; a rank: show it) or a "
              "timeline block; the wheel scrolls tables and moves the timeline"},
    {"", ""},
    {NULL, "The header"},
    {"state", "idle (no window yet), collecting, flight (collecting into a flight recorder: p "
              "writes a snapshot), stopped, or ended (session closed, or the "
              "process gone: its last figures stay)"},
    {"events/s", "events the process wrote into its lanes per second, counted by the monitor"},
    {"drops", "events the collector lost (a full lane, no free lane, a full disk): the "
              "recording lacks them and the report says so"},
    {"lost by", "the thread that lost most events in this window, at the rate it emitted when "
                "it began to lose them; + when others lost some too (termsight ls lists them)"},
    {"sampled", "in a panel's title: the data queues or the timeline show a sample, as the "
                "process writes faster than the live view reads its lanes (what it skipped is in "
                "the recording, the report has it all); steps and operators are always whole"},
    {"partial", "in the operators' title: some operators are not in the live sums (more distinct "
                "ones than the collector's board holds, 4096, or a recorder that fell behind "
                "left some out to keep up); the recording has them, the report has them all"},
    {"up", "time since the session began"},
    {"rank", "of a job: this rank / the job's world size (screen 7 lists the ranks)"},
    {"step", "the training's own step count; (final) once it ended"},
    {"avg step", "the mean time of every step finished so far, as the recording has them"},
    {"run", "the run folder (the recording, and the report once analysed); in its place for a "
            "while, the latest answer or event"},
    {"FROZEN", "the display is frozen (space thaws it); the training goes on"},
};

void frame_help(canvas *c, rect r, view *v)
{
    canvas_fill(c, r, ' ', ROLE_NORMAL);
    frame_title(c, r, "Help", "termsight top: keys and the header's figures");
    int kw = 20, rows = r.h - 1, n = (int)(sizeof help_lines / sizeof help_lines[0]);
    /* Entries wrap; the page scrolls by entries where the terminal is short. */
    if (v->help_top > n - 1)
        v->help_top = n - 1;
    if (v->help_top < 0)
        v->help_top = 0;
    int y = 1, shown = 0;
    for (int i = v->help_top; i < n && y <= rows; i++) {
        if (!help_lines[i].keys) {
            canvas_str(c, r, y++, 2, ROLE_TITLE, help_lines[i].what);
            shown++;
            continue;
        }
        rect text = {r.y + y, r.x + 2 + kw, rows - y + 1, r.w - kw - 3};
        /* Only whole entries: one that does not fit waits for the next page. */
        int need = wrap(c, (rect){0, 0, 1 << 20, text.w}, 0, 0, ROLE_NORMAL, help_lines[i].what, 0);
        if (y + need - 1 > rows)
            break;
        canvas_str(c, r, y, 2, ROLE_HEADER_KEY, help_lines[i].keys);
        y += frame_wrap(c, text, 0, 0, ROLE_NORMAL, help_lines[i].what);
        shown++;
    }
    if (v->help_top + shown >= n && y <= rows)
        canvas_str(c, r, y, 2, ROLE_DIM,
                   "Colors: NO_COLOR=1 for monochrome. Glyphs: ASCII under LANG=C.");
    v->help_rows = n;
    v->help_page = shown;
    v->help_more = v->help_top > 0 || v->help_top + shown < n;
}

void frame_notice(canvas *c, rect r, const char *title, const char *text)
{
    canvas_fill(c, r, ' ', ROLE_NORMAL);
    frame_title(c, r, title, "any key returns");
    rect in = {r.y + 2, r.x + 2, r.h - 2, r.w - 4};
    frame_wrap(c, in, 0, 0, ROLE_NORMAL, text);
}

void frame_too_small(canvas *c, int rows, int cols)
{
    canvas_clear(c);
    rect all = {0, 0, c->rows, c->cols};
    char msg[128];
    snprintf(msg, sizeof msg, "terminal too small: %dx%d, termsight top needs %dx%d", cols, rows,
             LAYOUT_MIN_COLS, LAYOUT_MIN_ROWS);
    int w = (int)strlen(msg);
    int y = c->rows / 2, x = (c->cols - w) / 2;
    if (x < 0) {
        /* Narrower than the message: wrap it from the left edge. */
        frame_wrap(c, all, y > 0 ? y - 1 : 0, 0, ROLE_WARN, msg);
        return;
    }
    canvas_str(c, all, y, x, ROLE_WARN, msg);
    if (y + 1 < c->rows)
        canvas_str(c, all, y + 1, (c->cols - 11) / 2 > 0 ? (c->cols - 11) / 2 : 0, ROLE_DIM,
                   "q quits");
}

void frame_draw(canvas *c, const layout *L, view *v, const panel_ctx *p, const char *message,
                int message_role, double progress)
{
    frame_header(c, L->header, p->st, p->a, message, message_role, progress, v->frozen);
    frame_tabs(c, L->tabs, v->screen);
    canvas_fill(c, L->body, ' ', ROLE_NORMAL);
    if (v->help) {
        frame_help(c, L->body, v);
        frame_keys(c, L->status, v, p); /* after the help: it says whether the help scrolls */
        return;
    }
    frame_keys(c, L->status, v, p);
    for (int i = 0; i < PANEL__COUNT; i++)
        if (L->panel[i].h > 0)
            panels[i]->draw(p, v, c, L->panel[i], v->screen != SCREEN_OVERVIEW);
    for (int i = 0; i < 2; i++)
        if (L->rule[i].h > 0)
            canvas_fill(c, L->rule[i], c->g->vline, ROLE_RULE);
}
