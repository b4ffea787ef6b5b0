/* tui: termsight top's entry point and loop. It finds the session (attach.c), then observes,
 * draws and answers keys until q. A session that is a rank of a job brings the job's other ranks
 * on this machine along (ranks.c): the screens show one rank, the Ranks screen all of them, and
 * commands go to every rank (commands.c); the report is written in the background (analyse.c). */
#include "app.h"

#include <errno.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define KEY_WAIT_MAX_MS 250 /* quit signals are seen at least this often */
#define BUSY_WAIT_MS    100 /* while a command or the analysis is under way */

/* Enter on the Ranks screen: that rank on every screen, from the overview. */
static void on_rank(app *a)
{
    ranks_select(a->rk, (size_t)a->v.ranks_sel);
    a->src = ranks_selected(a->rk);
    a->pc.a = source_analysis(a->src);
    a->pc.tl = source_timeline(a->src);
    a->pc.st = source_status_of(a->src);
    view was = a->v;
    view_init(&a->v);
    a->v.frozen = was.frozen;
    a->v.ranks_sel = was.ranks_sel;
    a->v.ranks_top = was.ranks_top;
    const source_status *st = a->pc.st;
    app_say(a, ROLE_NORMAL, "showing rank %d, pid %d", (int)st->rank, (int)st->pid);
}

static void draw(app *a)
{
    canvas *c = &a->cv;
    if (a->L.too_small) {
        frame_too_small(c, a->L.rows, a->L.cols);
        return;
    }
    double progress =
        a->analysing ? atomic_load_explicit(&a->permille, memory_order_relaxed) / 1000.0 : -1;
    frame_draw(c, &a->L, &a->v, &a->pc, app_message_now(a, tsclock_monotonic_ns()), a->message_role,
               progress);
    if (a->v.notice && !a->v.help)
        frame_notice(c, a->L.body, "Analysis", a->notice);
}

static int relayout(app *a)
{
    int rows, cols;
    screen_size(&rows, &cols);
    if (rows != a->cv.rows || cols != a->cv.cols) {
        if (canvas_resize(&a->cv, rows, cols) != 0)
            return -1;
        a->all = 1;
    }
    layout_compute(rows, cols, a->v.screen, &a->L);
    return 0;
}

static int monitor(app *a, char **cause)
{
    uint64_t next_poll = 0;
    int dirty = 1;
    uint32_t last_pm = 0;
    for (;;) {
        if (screen_quit_signal())
            break;
        uint64_t now = tsclock_monotonic_ns();
        if (!a->v.frozen && now >= next_poll) {
            const ranks_table *t = ranks_table_of(a->rk);
            size_t was_n = t->n, was_gone = 0, gone = 0;
            for (size_t i = 0; i < t->n; i++)
                was_gone += t->row[i].gone;
            ranks_poll(a->rk, now);
            next_poll = now + a->refresh_ns;
            dirty = 1;
            for (size_t i = 0; i < t->n; i++)
                gone += t->row[i].gone;
            if (!app_is_job(a) && gone > was_gone)
                app_say(a, ROLE_WARN, "the process has ended; its last data stays on the screen");
            else if (gone > was_gone)
                app_say(a, ROLE_WARN,
                        "%zu of %zu ranks have ended; their last figures stay on the "
                        "screens",
                        gone, t->n);
            else if (t->n > was_n)
                app_say(a, ROLE_NORMAL, "%zu ranks of job %s on this machine", t->n, t->job);
        }
        if (a->pending != PENDING_NONE) {
            commands_check(a, now);
            dirty |= a->pending == PENDING_NONE;
        }
        if (a->analysing) {
            uint32_t pm = atomic_load_explicit(&a->permille, memory_order_relaxed);
            dirty |= pm / 10 != last_pm / 10;
            last_pm = pm;
            if (atomic_load_explicit(&a->done, memory_order_acquire)) {
                analyse_finish(a);
                dirty = 1;
            }
        }
        if (dirty) {
            if (relayout(a) != 0)
                return cause_set(cause, "out of memory");
            draw(a);
            screen_paint(&a->cv, a->all);
            a->all = 0;
            dirty = 0;
        }
        now = tsclock_monotonic_ns();
        int wait = KEY_WAIT_MAX_MS;
        if (!a->v.frozen && next_poll > now && (next_poll - now) / 1000000 < (uint64_t)wait)
            wait = (int)((next_poll - now) / 1000000) + 1;
        else if (!a->v.frozen && next_poll <= now)
            wait = 0;
        if ((a->pending != PENDING_NONE || a->analysing) && wait > BUSY_WAIT_MS)
            wait = BUSY_WAIT_MS;
        int key = screen_key(wait);
        if (key < 0)
            continue;
        if (key == VK_RESIZE) {
            a->all = 1;
            dirty = 1;
            continue;
        }
        int action;
        if (key == VK_MOUSE) {
            int my = 0, mx = 0, kind = screen_mouse(&my, &mx);
            action = view_mouse(&a->v, &a->L, &a->pc, kind, my, mx);
        } else {
            action = view_key(&a->v, key, &a->pc);
        }
        switch (action) {
        case VA_QUIT:
            return 0;
        case VA_STARTSTOP:
            commands_startstop(a);
            break;
        case VA_ANALYSE:
            commands_analyse(a);
            break;
        case VA_RANK:
            on_rank(a);
            break;
        case VA_SNAPSHOT:
            commands_snapshot(a);
            break;
        case VA_FREEZE:
            if (!a->v.frozen) {
                ranks_resync(a->rk);
                next_poll = 0;
            }
            break;
        case VA_REPAINT:
            screen_invalidate();
            a->all = 1;
            break;
        default:
            break;
        }
        dirty = 1;
    }
    return 0;
}

static int run_interactive(const tui_options *o, const glyphs *g, const target *t, char **cause)
{
    app *a = calloc(1, sizeof *a);
    if (!a)
        return cause_set(cause, "out of memory");
    a->g = g;
    a->refresh_ns = (uint64_t)o->refresh_ms * 1000000ull;
    view_init(&a->v);
    int rc = -1;
    if (canvas_init(&a->cv, 24, 80, g) != 0) {
        cause_set(cause, "out of memory");
        goto out;
    }
    if (screen_init(cause) != 0)
        goto out;
    /* A pid that has no session yet (a training just launched) is waited for, like a name. */
    pid_t pid = attach_choose(&a->cv, t, cause);
    if (pid <= 0) {
        rc = pid == 0 ? 0 : -1;
        goto out;
    }
    if (attach_open(pid, &a->rk, cause) != 0)
        goto out;
    a->src = ranks_selected(a->rk);
    a->pc = (panel_ctx){.a = source_analysis(a->src),
                        .tl = source_timeline(a->src),
                        .st = source_status_of(a->src),
                        .rk = ranks_table_of(a->rk)};
    a->v.ranks_sel = a->pc.rk->selected; /* the Ranks screen opens on the rank shown */
    if (a->pc.st->note[0])
        app_say(a, ROLE_WARN, "%s", a->pc.st->note);
    else if (app_is_job(a)) /* the job's ranks are a key away */
        app_say(a, ROLE_NORMAL, "rank %d of job %s, %zu rank%s on this machine: 7 shows them",
                (int)a->pc.st->rank, a->pc.rk->job, a->pc.rk->n, a->pc.rk->n == 1 ? "" : "s");
    a->all = 1;
    rc = monitor(a, cause);
out:
    screen_end();
    analyse_end(a);
    ranks_close(a->rk);
    canvas_free(&a->cv);
    free(a);
    int sig = screen_quit_signal();
    if (rc == 0 && sig)
        return 128 + sig;
    return rc == 0 ? 0 : 1;
}

/* ---- --once ------------------------------------------------------------------------------ */

static int terminal_cols(void)
{
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    return 120;
}

static int run_once(const tui_options *o, const glyphs *g, const target *t, char **cause)
{
    pid_t pid = t->pid;
    if (!pid) {
        segment_info *list = NULL;
        int n = attach_candidates(t, &list, cause);
        if (n < 0)
            return 1;
        if (n == 0) {
            free(list);
            if (t->job)
                cause_set(cause, "top: no sessions of job %s on this machine", t->job);
            else if (t->name)
                cause_set(cause, "top: no live profiler session of '%s'", t->name);
            else
                cause_set(cause, "top: no live profiler session (termsight ls lists them)");
            return 1;
        }
        int k = t->job ? attach_lowest_rank(list, n) : attach_newest(list, n);
        pid = list[k].pid;
        if (n > 1 && !t->job)
            fprintf(stderr, "termsight: top: %d live sessions; showing the newest, pid %d\n", n,
                    (int)pid);
        free(list);
    }
    ranks *rk;
    if (attach_open(pid, &rk, cause) != 0)
        return 1;
    /* Two looks one refresh apart: rates need an interval, and the rings fill meanwhile. */
    ranks_poll(rk, tsclock_monotonic_ns());
    struct timespec ts = {(time_t)(o->refresh_ms / 1000), (long)(o->refresh_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    ranks_poll(rk, tsclock_monotonic_ns());
    source *src = ranks_selected(rk);
    if (source_status_of(src)->note[0])
        fprintf(stderr, "termsight: top: %s\n", source_status_of(src)->note);
    panel_ctx pc = {.a = source_analysis(src),
                    .tl = source_timeline(src),
                    .st = source_status_of(src),
                    .rk = ranks_table_of(rk)};
    int rc = 0;
    if (o->json) {
        if (snapshot_json(stdout, &pc) != 0)
            rc = cause_set(cause, "top: out of memory");
    } else {
        snapshot_text(stdout, &pc, g, terminal_cols());
    }
    if (fflush(stdout) != 0 && !rc)
        rc = cause_set(cause, "top: cannot write the snapshot: %s", strerror(errno));
    ranks_close(rk);
    return rc ? 1 : 0;
}

int tui_main(const tui_options *o, char **cause)
{
    setlocale(LC_ALL, "");
    tui_options opt = *o;
    if (!opt.refresh_ms)
        opt.refresh_ms = TUI_REFRESH_MS_DEFAULT;
    target t;
    if (attach_parse_target(opt.target, opt.job, &t, cause) != 0)
        return 1;
    const glyphs *g = glyphs_for_locale();
    return opt.once ? run_once(&opt, g, &t, cause) : run_interactive(&opt, g, &t, cause);
}
