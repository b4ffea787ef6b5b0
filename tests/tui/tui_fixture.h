/* The crafted run the tui room's panel and frame tests draw (tui_fixture.c), and the readers
 * that turn a canvas back into text. */
#ifndef TERMSIGHT_TEST_TUI_FIXTURE_H
#define TERMSIGHT_TEST_TUI_FIXTURE_H

#include "tui_internal.h"

#include <check.h>
#include <string.h>

/* The names the crafted run's events refer to, by id. */
enum {
    N_NONE,
    N_OVERFLOW,
    N_MATMUL1,
    N_MATMUL,
    N_RELU1,
    N_RELU,
    N_MATMUL_GRAD,
    N_QUEUE,
    N_TRAIN,
    N_LOADER,
    N_EVIL,
    N_EVIL_TYPE,
    N_KERNEL,
    N_REC,
    N_SMP,
    N_AUTOGRAD,
    N_WORKER,
    N__COUNT
};

#define US 1000ull
#define MS 1000000ull
#define T0 (1000 * MS)

#define TRAIN_TID  100
#define LOADER_TID 101
#define STEPS      20
#define SLOW_STEP  7

typedef struct run {
    analysis *a;
    tlring tl;
    source_status st;
    panel_ctx p;
} run;

/* The names of the ids above, as the analysis looks them up. */
const char *names_fn(void *ctx, uint32_t id, uint32_t *len);
/* A host event of tid from b to e, and an op range of the training thread. */
ts_event ev(uint16_t kind, uint32_t tid, uint64_t b, uint64_t e);
ts_event op(uint32_t name, uint32_t type, uint64_t b, uint64_t e);
/* Feeds events to the run's analysis and timeline ring. */
void feed(run *r, const ts_event *e, size_t n);
/* The crafted run (evil: with hostile names and values too); free_run releases it. */
void make_run(run *r, int evil);
void free_run(run *r);

/* The canvas as text, one line per row, in dump_text. */
extern char dump_text[64 * 1024];
const char *dump(const canvas *c);
/* The first row holding needle, copied into out; -1 when none does. */
int line_with(const canvas *c, const char *needle, char *out, size_t cap);

#define ck_assert_canvas_has(c, s)                                                                 \
    ck_assert_msg(strstr(dump(c), (s)) != NULL, "missing \"%s\" in:\n%s", (s), dump_text)
#define ck_assert_canvas_lacks(c, s)                                                               \
    ck_assert_msg(strstr(dump(c), (s)) == NULL, "unexpected \"%s\" in:\n%s", (s), dump_text)

/* Draws panel into a fresh rows x cols canvas c (full: on its own screen). */
void draw_panel(run *r, view *v, canvas *c, int panel, int rows, int cols, int full,
                const glyphs *g);

/* Runs s in a UTF-8 locale (double-width characters need it for wcwidth, as in termsight top).
 * Returns main's exit status. */
int run_suite(Suite *s);

#endif
