/* steps_fixture: what the step tests share (test_steps_*.c): a golden fed to an analysis in the
 * orders a recorder produces (lanes one after another, drains of a few microseconds, kernels
 * late, one event per call), the rows it gives checked against hand-computed ones in every
 * order. Times in the goldens and the expectations are microseconds. */
#ifndef TERMSIGHT_STEPS_FIXTURE_H
#define TERMSIGHT_STEPS_FIXTURE_H

#include "analysis/golden.h"

#include <stddef.h>
#include <stdint.h>

typedef struct order {
    const char *label;
    uint64_t period_us;       /* drain period; 0: as pushed; UINT64_MAX: one block per lane */
    int lanes_desc;           /* lanes drained from the highest id down */
    uint64_t kernel_delay_us; /* device records reach their lane this much later */
    size_t batch;             /* events per analysis_feed call; 0: all */
} order;

extern const order orders[];

/* How many orders there are. */
extern const size_t n_orders;
#define N_ORDERS n_orders

typedef struct capture {
    step_row rows[64];
    size_t n;
    uint64_t calls, out_of_order, last_step;
} capture;

void capture_step(void *ctx, const step_row *row);

analysis *analyse_in_order(golden *g, const analysis_config *base, const order *o, capture *cap,
                           analysis_sink *sink);

typedef struct exp_row {
    uint64_t step, begin, end, fp, bp;
    uint64_t interval, fpbp, tail,
        total; /* tail: backward end to step end, as step_trace.csv has it */
    uint32_t source;
    const char *fp_op, *bp_op;
    uint64_t compute, comm, pure, idle, gap; /* compute: merged, as overlap.csv has it */
} exp_row;

void check_row(const analysis *a, const step_row *r, const exp_row *e, const char *label);

/* Feeds g in every order and checks the rows the sink got (and analysis_recent_steps). */
void check_all_orders(golden *g, const analysis_config *cfg, const exp_row *want, size_t n);

/* Two steps with phase marks on thread 1 and a data thread 2; no device. */
void build_marks(golden *g);

/* Step 1: marks FP 210, BP 850 in [100, 1100].
 *   interval 210-100 = 110, fpbp 850-210 = 640, tail 1100-850 = 250, total 1000.
 *   computation (no device: top-level host ops of every thread): [110,200] 90 + [220,500] u
 *   [480,560] u [520,800] = [220,800] 580 + [900,1050] 150 = 820; free 1000-820 = 180.
 *   gaps on thread 1 inside [210,850]: (200,220) clipped to [210,220] 10, (500,520) 20,
 *   (800,900) clipped to [800,850] 50: 80.
 * Step 2: window from step 1's end, [1100, 2200]; marks FP 1310, BP 1950.
 *   interval 1310-1100 = 210, fpbp 1950-1310 = 640, tail 2200-1950 = 250, total 1100.
 *   computation [1120,1190] 70 + [1320,1600] 280 + [1650,1900] 250 + [2000,2150] u [2100,2200]
 *   (Decode clipped to the step) 200 = 800; free 1100-800 = 300.
 *   gaps inside [1310,1950]: (1190,1320) clipped 10, (1600,1650) 50, (1900,2000) clipped 50:
 *   110. */
extern const exp_row marks_rows[];

#endif
