/* report_internal: what the files of the report writer share (report.c orchestrates;
 * report_dir.c the folder, its files and the swap; report_csv.c the CSV files; report_json.c
 * summary.json; report_text.c report.txt and the short summary; report_html.c report.html). Only
 * analysis/ includes it. */
#ifndef TERMSIGHT_REPORT_INTERNAL_H
#define TERMSIGHT_REPORT_INTERNAL_H

#include "analysis_internal.h"
#include "report.h"

#include <stdio.h>

#define TOP_OPS    10 /* rows of operators, types and kernels in summary.json and report.txt */
#define MAX_ADVICE 16
#define MAX_FIND   64

/* A cleaned, NUL-terminated copy of an id's bytes in a reusable buffer. */
typedef struct scratch {
    char *p;
    size_t cap;
} scratch;

typedef struct report_picture report_picture; /* report_html.c's */

typedef struct sql_rows sql_rows; /* report_sqlite.c's: a table being filled */

/* One table: a CSV file, or with --sqlite-only its table in report.sqlite (sql). */
typedef struct csv {
    FILE *f;
    sql_rows *sql;
    int col;
    scratch sc;
} csv;

struct report {
    report_options opt;
    recording_reader *rd;
    analysis *a;
    report_info info;
    recording_meta meta;
    int have_meta;
    char *run_folder;

    /* Writing. */
    char *target, *tmp;
    int dirfd;
    int started;
    uint64_t origin;
    timeline *tl;
    int limit_set; /* the timeline limit is final (option or recording) */
    csv steps, overlap, qusage, cpu, mem, step_ops;
    stepops *so; /* each step's operator totals, for step_ops.csv */
    uint32_t *qnames;
    size_t nq;
    char **files;
    size_t nfiles;
    int werr; /* first write error (errno) */
    char *werr_file;
    report_picture *picture; /* what report.html draws, gathered as the analysis goes */
    struct sql_writer *sql;  /* report.sqlite under way (report_sqlite.c) */
};

/* ---- report.c: shared helpers ----------------------------------------------------------- */

/* An id's bytes cleaned (text_clean; tab, CR and LF escaped too unless keep_lines) into sc. */
const char *report_clean_id(scratch *sc, const analysis *a, uint32_t id, int keep_lines);
const char *report_lost_reason_name(uint32_t reason);
/* The losses as report.txt and report.html list them, the largest first: a sentence for each of
 * the first REPORT_LOSSES_SHOWN, then how many more summary.json lists; each line passed to
 * line(ctx, text). Returns how many losses there are. */
#define REPORT_LOSSES_SHOWN 10
size_t report_loss_lines(const report *r, void (*line)(void *ctx, const char *text), void *ctx);
/* ns in the run's time: since its origin. */
int64_t report_rebase(const report *r, uint64_t ns);
/* A forked child's session: the pid of the process it was forked from (config "parent_pid"),
 * 0 when there is none or it is out of range. */
long report_parent_pid(const analysis *a);
/* The finding about queue q, or NULL. */
const queue_finding *report_finding_of(const queue_finding *f, size_t nf, uint32_t q);

/* ---- report_dir.c: the folder, its files, the swap ------------------------------------- */

/* The first write error is kept (file and errno) and reported at commit. */
void report_note_error(report *r, const char *file, int err);
/* A new file in the folder (O_EXCL, no link followed), listed for the report; NULL on error. */
FILE *report_file_create(report *r, const char *name);
int report_file_close(report *r, FILE *f, const char *name);
/* Lists a file the folder holds (one another writer made in it: the timeline's). */
void report_file_list(report *r, const char *name);
char *report_join(const char *a, const char *b);
/* The recording file a path names (as recording_reader_open finds it), malloc'd, or NULL. */
char *report_locate(const char *path);
/* 1 absent, 2 a report folder (or empty) that may be replaced, else -1 with a message. */
int report_check_target(const char *target, char **cause);
/* The temporary folder beside r->target, after removing stale ones: r->tmp, r->dirfd. */
int report_make_tmp(report *r, char **cause);
/* The temporary folder, its files written, takes the target's place. */
int report_commit(report *r, int existed, char **cause);
/* Removes a folder the writer made (files only), never following links. */
void report_remove_tree(const char *dir);

/* ---- report_csv.c: the CSV files ---------------------------------------------------------- */

/* The files written row by row as the analysis completes them (steps, overlap, queue usage,
 * CPU, memory): opened at the start, closed at the end (both idempotent). */
int report_csv_open_streams(report *r);
void report_csv_close_streams(report *r);
/* The analysis sink that writes them. */
void report_csv_sink(report *r, analysis_sink *sink);
/* The tables written at the end: operators, types, kernels, queues, threads, processes,
 * allocations, FLOPs. */
void report_csv_tables(report *r, const queue_finding *qf, size_t nqf);

/* ---- report_sqlite.c: report.sqlite -------------------------------------------------------- */

/* With --sqlite-only the tables go to report.sqlite row by row instead of CSV files: the
 * database opened (under a temporary name in the temporary folder) and a transaction begun;
 * report_sqlite_rows makes a CSV file's table from its header. Failures are kept as the
 * report's write error (the database removed) and later calls do nothing. */
int report_sqlite_begin(report *r);
sql_rows *report_sqlite_rows(report *r, const char *file, const char *header);
/* Column col of the row under way (an empty text in a column that is not TEXT is NULL). */
void report_sqlite_text(sql_rows *rows, int col, const char *v);
void report_sqlite_int(sql_rows *rows, int col, int64_t v);
void report_sqlite_real(sql_rows *rows, int col, double v);
/* The row under way inserted. */
void report_sqlite_row(report *r, sql_rows *rows);
/* report.sqlite finished: the tables not written row by row from the CSV files the temporary
 * folder holds, every table's indexes, the views, the commit, the rename to report.sqlite;
 * with sqlite_only a CSV file there is removed after. Returns 0, or -1 with the error kept for
 * the commit (nothing left behind). */
int report_sqlite_write(report *r, int sqlite_only);
void report_sqlite_free(report *r);

/* ---- report_html.c: report.html ------------------------------------------------------------ */

/* The bounded copy of the steps and queue buckets that report.html draws, fed from the sink. */
report_picture *report_picture_create(void);
void report_picture_free(report_picture *p);
void report_picture_step(report_picture *p, const step_row *s);
void report_picture_bucket(report_picture *p, const queue_bucket *b);
/* report.html: the picture, the operator top 20, the CPU gauges, the suggestions. */
void report_html_write(report *r, const queue_finding *qf, size_t nqf, const advice *adv,
                       size_t nadv);

/* ---- report_json.c: summary.json ---------------------------------------------------------- */

int report_json_write_summary(report *r, const queue_finding *qf, size_t nqf, const advice *adv,
                              size_t nadv);

#endif
