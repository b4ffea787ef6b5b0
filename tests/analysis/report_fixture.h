/* report_fixture: what the report tests share (test_report_*.c): files read back, CSV parsed by
 * the rules the writer promises, golden recordings written and reported, JSON and timelines read
 * back. */
#ifndef TERMSIGHT_REPORT_FIXTURE_H
#define TERMSIGHT_REPORT_FIXTURE_H

#include "analysis_internal.h"
#include "golden.h"
#include "report.h"

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

char *slurp(const char *path, size_t *len);

int exists(const char *path);

/* Entries of dir whose name starts with prefix. */
int count_prefix(const char *dir, const char *prefix);

typedef struct csv_file {
    char ***rows; /* rows[i][j], NULL-terminated rows */
    size_t n;
} csv_file;

csv_file csv_parse(const char *text);

void csv_free(csv_file *f);

size_t row_len(char **row);

csv_file csv_read(const char *dir, const char *name);

/* Compares a row with the expected fields (NULL-terminated; NULL entries in want[] are not
 * possible, "*" means any value). */
void expect_row(const csv_file *f, size_t i, const char *const *want);

/* Names that must not break CSV or JSON: a comma, a quote, a newline and a byte that is not
 * UTF-8, and their cleaned form (text_clean: \xff becomes the text "\xff"). */
#define WEIRD       "a,b\"c\nd\xff"
#define WEIRD_CLEAN "a,b\"c\nd\\xff"
#define WEIRD_TYPE  "Weird,\"T\""
#define QUEUE_NAME  "batch,q"

/* Golden A, for the tables. One thread (100, "main"), two steps, four top-level ops:
 *
 *   step 1 [1000, 2000]:  Default/net/Conv2D-op1 [1100, 1300]
 *                         Default/net/MatMul-op2 [1400, 1700]  1000 FLOPs
 *   step 2 [2000, 3000]:  Default/net/Conv2D-op1 [2100, 2250]
 *                         WEIRD (type WEIRD_TYPE) [2300, 2400]
 *
 * Ops (no nesting, so self = total): Conv2D-op1 2 x (200, 150) = 350, MatMul-op2 300, WEIRD 100;
 * all self 750, shares 350/750 = 46.667 %, 300/750 = 40 %, 100/750 = 13.333 %.
 * Steps, by the automatic rule (first op's begin, last op's end):
 *   1: interval 1100-1000 = 100, fp/bp 1700-1100 = 600, tail 2000-1700 = 300, total 1000;
 *      computation (host ops, no device work) 200+300 = 500, free 500, gap 1400-1300 = 100.
 *   2: begins at step 1's end 2000; interval 100, fp/bp 2400-2100 = 300, tail 600, total 1000;
 *      computation 150+100 = 250, free 750, gap 2300-2250 = 50.
 * Queue QUEUE_NAME (host, capacity 4): 10 samples of size 0 at 1000, 1100, ... 1900: mostly
 * empty, so data processing is the bottleneck; all in the 1 s bucket [0, 1 s).
 * CPU: one interval [1000, 2000] of the machine (user 25 %, system 5 %, idle 70 %) and of the
 * process (user 500 us = 50 % of one CPU, system 100 us = 10 %).
 * Host memory: RSS 1 MiB (peak 2 MiB) at 1500. */
void build_a(golden *g);

/* Writes g as dir/recording/events.tsr; returns the run folder dir. */
void write_run(golden *g, const char *run);

report *run_report(const char *path, const report_options *o);

/* Every row of dir's step_trace.csv keeps the split's promise: interval + compute + comm_wait
 * + tail + eval = total, within 1 us (the file has three decimals). */
void check_split(const char *dir);

/* The run that build makes, in a fresh temporary folder, analysed; *tmp to remove. */
report *report_golden(void (*build)(golden *), char **tmp, char **dir, const report_options *o);

/* A golden A run folder in a fresh temporary folder, analysed; *tmp to remove. */
report *report_a(char **tmp, char **dir, const report_options *o);

cJSON *json_read(const char *dir, const char *name);

/* A value by dotted path. Plain tests, no ck_assert on success: Check reports every passed
 * assertion to its parent, which is slow in loops over thousands of events. */
const cJSON *jget(const cJSON *o, const char *path);

double jnum(const cJSON *o, const char *path);

const char *jstr(const cJSON *o, const char *path);

#define MAIN_NAME "main \"loop\"\n\x01\xff"
#define KERNEL    "gemm,\"k\""

/* Golden B, for the timeline: nesting written children first, a launch and its kernel, two
 * devices, a partial overlap, a range that ended on another thread, steps, counters.
 *
 *   tid 100 (MAIN_NAME): outer [1000, 2000] > child1 [1100, 1200], child2 [1300, 1500] >
 *                        cudaLaunchKernel [1310, 1320] corr 77
 *   device 0 stream 7:   KERNEL [1400, 1450] corr 77 under child2, KERNEL [1460, 1480]
 *   device 1 stream 3:   ncclAllReduce [1500, 1600] (communication)
 *   tid 200:             p1 [3000, 3200], p2 [3100, 3300] (crosses p1: moved), handoff
 *                        [5000, 6000] ended on another thread
 *   steps 1 [900, 2100], 2 [2100, 6500]; queue samples; host RSS; device 0 alloc and free;
 *   a counter; a mark; a phase mark; a lost-events notice. */
void build_b(golden *g);

/* n ops of 1 us, 2 us apart, on thread 1; with a recorded timeline limit when limit_mb. */
void build_many(golden *g, int n, const char *limit_mb);

#endif
