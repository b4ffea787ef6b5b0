/* analyse: F6 (or r, confirmed) runs the report writer on a thread of its own, with a progress
 * bar: of one session, its run folder; of a job, each rank's, then the job report's merge. */
#include "app.h"
#include "job.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define TOP_ADVICE 3

static void on_progress(void *ctx, double fraction)
{
    app *a = ctx;
    double whole = ((double)a->part + fraction) / (double)(a->nfolders ? a->nfolders : 1);
    uint32_t pm = (uint32_t)(whole * 1000);
    atomic_store_explicit(&a->permille, pm > 1000 ? 1000 : pm, memory_order_relaxed);
}

/* printf into the notice, at its end. */
static void note(app *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(app *a, const char *fmt, ...)
{
    size_t len = strlen(a->notice);
    if (len + 1 >= sizeof a->notice)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->notice + len, sizeof a->notice - len, fmt, ap);
    va_end(ap);
}

/* A job: each rank's report, then the job report merged from them. The notice says what came of
 * each; rc is 0 when one rank's report at least was written. */
static void analyse_job(app *a)
{
    a->notice[0] = 0;
    size_t ok = 0;
    for (size_t i = 0; i < a->nfolders; i++) {
        a->part = i;
        report_options o;
        report_options_init(&o);
        o.progress = on_progress;
        o.progress_ctx = a;
        report *rep = NULL;
        char *why = NULL;
        if (report_run(a->folders[i].path, &o, &rep, &why) == 0) {
            const report_info *info = report_info_of(rep);
            note(a, "rank %d: report written: %s (%llu events)\n", (int)a->folders[i].rank,
                 info->dir ? info->dir : "-", (unsigned long long)info->events);
            ok++;
        } else {
            note(a, "rank %d: error: %s\n", (int)a->folders[i].rank, why ? why : "failed");
        }
        report_free(rep);
        free(why);
    }
    a->rc = ok ? 0 : -1;
    if (!ok) {
        a->why = strdup("no rank's report could be written");
        return;
    }
    if (!a->job_folder[0] || !job_is_folder(a->job_folder)) {
        note(a, "\nThe ranks' run folders share no job folder: no job report.\n");
        return;
    }
    job_options jo;
    job_options_init(&jo);
    job_report *j = NULL;
    char *why = NULL;
    if (job_report_run(a->job_folder, &jo, &j, &why) != 0) {
        note(a, "\njob report: error: %s\n", why ? why : "failed");
        free(why);
        return;
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        job_report_print(j, f);
        fclose(f);
    }
    note(a, "\nJob report: %s\n%s", job_report_dir(j) ? job_report_dir(j) : "-", text ? text : "");
    free(text);
    job_report_free(j);
}

static void *analyse_main(void *arg)
{
    app *a = arg;
    if (a->job_folder) {
        analyse_job(a);
    } else {
        report_options o;
        report_options_init(&o);
        o.progress = on_progress;
        o.progress_ctx = a;
        a->rc = report_run(a->folders[0].path, &o, &a->rep, &a->why);
    }
    atomic_store_explicit(&a->done, 1, memory_order_release);
    return NULL;
}

void analyse_clear_folders(app *a)
{
    for (size_t i = 0; i < a->nfolders; i++)
        free(a->folders[i].path);
    a->nfolders = 0;
    free(a->job_folder);
    a->job_folder = NULL;
}

/* The run folder of st to analyse: 0, 1 when it is not known (said), -1 when out of memory. */
int analyse_add_folder(app *a, const source_status *st)
{
    if (a->nfolders >= RANKS_MAX)
        return 0;
    if (st->folder_why[0]) {
        app_say(a, ROLE_ERROR, "analyse pid %d: %s", (int)st->pid, st->folder_why);
        return 1;
    }
    char *path = strdup(st->run_folder);
    if (!path)
        return -1;
    a->folders[a->nfolders++] = (folder){.path = path, .rank = st->rank};
    return 0;
}

/* The job folder: the parent that every rank's run folder shares, "" when they share none. */
static char *common_parent(const app *a)
{
    char *parent = NULL;
    for (size_t i = 0; i < a->nfolders; i++) {
        const char *p = a->folders[i].path;
        const char *slash = strrchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : 0;
        if (!parent) {
            parent = strndup(p, len);
            if (!parent)
                return NULL;
        } else if (strlen(parent) != len || strncmp(parent, p, len) != 0) {
            parent[0] = 0;
        }
    }
    return parent ? parent : strdup("");
}

void analyse_start(app *a)
{
    atomic_store(&a->permille, 0);
    atomic_store(&a->done, 0);
    a->rep = NULL;
    a->why = NULL;
    a->part = 0;
    if (app_is_job(a) && !(a->job_folder = common_parent(a))) {
        app_say(a, ROLE_ERROR, "analyse: out of memory");
        return;
    }
    if (!a->nfolders || pthread_create(&a->thread, NULL, analyse_main, a) != 0) {
        app_say(a, ROLE_ERROR, "analyse: cannot start the analysis thread");
        return;
    }
    a->analysing = 1;
    if (a->job_folder)
        app_say(a, ROLE_NORMAL, "analysing %zu rank%s of job %s", a->nfolders,
                a->nfolders == 1 ? "" : "s", ranks_table_of(a->rk)->job);
    else
        app_say(a, ROLE_NORMAL, "analysing %s", a->folders[0].path);
}

/* The report is written: its path and the advisor's top suggestions, as a notice page. */
void analyse_finish(app *a)
{
    pthread_join(a->thread, NULL);
    a->analysing = 0;
    if (a->rc != 0) {
        app_fail(a, "analyse: error: %s", a->why ? a->why : "failed");
        free(a->why);
        a->why = NULL;
        if (a->job_folder)
            a->v.notice = 1;
        return;
    }
    if (a->job_folder) {
        snprintf(a->last_command, sizeof a->last_command, "analyse: ok");
        a->last_failed = 0;
        app_say(a, ROLE_GOOD, "%zu rank%s analysed; the job report follows them", a->nfolders,
                a->nfolders == 1 ? "" : "s");
        a->v.notice = 1;
        return;
    }
    const report_info *info = report_info_of(a->rep);
    const char *dir = info->dir ? info->dir : "(not written)";
    snprintf(a->last_command, sizeof a->last_command, "analyse: ok");
    a->last_failed = 0;
    app_say(a, ROLE_GOOD, "report written: %s", dir);
    advice adv[TOP_ADVICE];
    size_t n = analysis_advise(report_analysis(a->rep), adv, TOP_ADVICE);
    char skipped[160] = "";
    if (info->bad_chunks)
        snprintf(skipped, sizeof skipped,
                 "; %llu chunks skipped (cut short or damaged: a recording still being written "
                 "can end in one)",
                 (unsigned long long)info->bad_chunks);
    int k = snprintf(a->notice, sizeof a->notice, "Report folder: %s\nEvents analysed: %llu%s\n\n",
                     dir, (unsigned long long)info->events, skipped);
    if (!n && k > 0 && (size_t)k < sizeof a->notice)
        k += snprintf(a->notice + k, sizeof a->notice - (size_t)k,
                      "The advisor has no suggestion for this run.\n");
    for (size_t i = 0; i < n && k > 0 && (size_t)k < sizeof a->notice; i++)
        k += snprintf(a->notice + k, sizeof a->notice - (size_t)k, "%zu. %s\n%s\n\n", i + 1,
                      adv[i].title, adv[i].text);
    a->v.notice = 1;
    report_free(a->rep);
    a->rep = NULL;
}

void analyse_end(app *a)
{
    if (a->analysing) {
        fputs("termsight top: waiting for the report being written to finish\n", stderr);
        pthread_join(a->thread, NULL);
        if (a->rc == 0 && a->job_folder)
            fprintf(stderr, "termsight top: %s", a->notice);
        else if (a->rc == 0)
            fprintf(stderr, "termsight top: report written: %s\n",
                    report_info_of(a->rep)->dir ? report_info_of(a->rep)->dir : "-");
        report_free(a->rep);
        free(a->why);
    }
    analyse_clear_folders(a);
}
