/*
 * demo_train: the demo trainer of `termsight demo`, a real CPU training program.
 *
 * A multi-layer perceptron (2 -> H -> H -> 3, ReLU) learns with plain SGD to tell apart the three
 * arms of a spiral. Every operator (matmul, bias add, ReLU, softmax cross-entropy, their
 * gradients, the SGD updates) is a termsight range with its type; steps, the forward start and
 * the backward end are marked.
 *
 * The data arrives through a real pipeline of threads joined by bounded queues (mutex and
 * condition variables) whose sizes termsight samples:
 *
 *   generator --raw_queue--> map x N --map_queue--> batch --prefetch_queue--> train
 *
 * The generator draws spiral points in shards of SHARD samples; the map workers augment them
 * (Gaussian noise, a small random rotation and scaling); the batcher packs shards into batches;
 * the training loop takes them from the prefetch queue. raw_queue and map_queue are pipeline
 * queues, prefetch_queue holds batches ready on the host. With --slow-map each map worker also
 * applies an elastic distortion to every point, real work that makes the map stage the bottleneck:
 * the queue before it fills, the ones after it run empty.
 *
 * SIGTERM and SIGINT end the training after the current step: the pipeline is closed, the test
 * accuracy printed and the session destroyed, so the recording is complete.
 */
#include "example_session.h"
#include "mlp_model.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHARD          32 /* samples per shard, the unit the first two queues carry */
#define RAW_CAPACITY   16 /* shards */
#define MAP_CAPACITY   16 /* shards */
#define PREFETCH_DEPTH 4  /* batches */
#define MAX_WORKERS    64
#define MAP_SEED       0x5eed0100u

/* Set by SIGTERM and SIGINT; the training loop ends after the current step. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/* ---- Data: shards of spiral points (mlp_model.h) and batches ----------------------------- */

typedef struct shard {
    int y[SHARD];
    float x[SHARD * N_IN];
} shard;

typedef struct batch {
    int n;
    int *y;   /* n labels */
    float *x; /* n x N_IN coordinates */
} batch;

/* One allocation, freed with free(). */
static batch *batch_alloc(int n)
{
    batch *b = xcalloc(1, sizeof(*b) + (size_t)n * (sizeof(int) + N_IN * sizeof(float)));
    b->n = n;
    b->y = (int *)(b + 1);
    b->x = (float *)(b->y + n);
    return b;
}

/* ---- Bounded queues --------------------------------------------------------------------- */

/* A ring of fixed-size items. Closing it wakes every waiter: push then fails, and pop fails once
 * the queue is empty. Each change of size goes to termsight. */
typedef struct bqueue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    unsigned char *items;
    size_t item_size;
    int capacity, head, count;
    bool closed;
    uint32_t handle; /* termsight's; 0 (ignored) when nothing is profiling */
} bqueue;

static void bqueue_init(bqueue *q, const char *name, int capacity, size_t item_size,
                        termsight_queue_role role, const char *producer, const char *consumer)
{
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->items = xcalloc((size_t)capacity, item_size);
    q->item_size = item_size;
    q->capacity = capacity;
    q->handle = termsight_queue_register(name, (uint64_t)capacity, role, producer, consumer);
}

static void bqueue_destroy(bqueue *q)
{
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->items);
}

static bool bqueue_push(bqueue *q, const void *item)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == q->capacity && !q->closed)
        pthread_cond_wait(&q->not_full, &q->lock);
    bool ok = !q->closed;
    if (ok) {
        int slot = (q->head + q->count) % q->capacity;
        memcpy(q->items + (size_t)slot * q->item_size, item, q->item_size);
        q->count++;
        termsight_queue_size(q->handle, (uint64_t)q->count);
        pthread_cond_signal(&q->not_empty);
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static bool bqueue_pop(bqueue *q, void *item)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->lock);
    bool ok = q->count > 0;
    if (ok) {
        memcpy(item, q->items + (size_t)q->head * q->item_size, q->item_size);
        q->head = (q->head + 1) % q->capacity;
        q->count--;
        termsight_queue_size(q->handle, (uint64_t)q->count);
        pthread_cond_signal(&q->not_full);
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

static void bqueue_close(bqueue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = true;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->lock);
}

/* ---- The pipeline's stages -------------------------------------------------------------- */

typedef struct pipeline {
    bqueue raw, mapped, prefetch; /* shards, shards, batch pointers */
    int workers, batch_size;
    bool slow_map;
} pipeline;

typedef struct worker {
    pipeline *p;
    int index;
    pthread_t thread;
} worker;

/* The stage's name in termsight's views and in the OS's (top -H, /proc/PID/task/TID/comm). */
static void name_thread(const char *name)
{
    termsight_thread_name(name);
    pthread_setname_np(pthread_self(), name);
}

static void *generator_main(void *arg)
{
    pipeline *p = arg;
    rng r = {TRAIN_SEED};
    name_thread("generator");
    shard s;
    do {
        for (int i = 0; i < SHARD; i++)
            s.y[i] = spiral_point(&r, s.x + i * N_IN);
    } while (bqueue_push(&p->raw, &s));
    return NULL;
}

/* Elastic distortion (Simard et al., 2003) of one point: a random displacement field on an
 * ELASTIC_GRID x ELASTIC_GRID grid around it, smoothed by ELASTIC_PASSES passes of a 3x3 box
 * filter, read at the grid's centre. Costly per sample, as such transforms are, and plain loops
 * over arrays like the training's own operators, so that the two slow down alike under a
 * sanitizer. */
#define ELASTIC_GRID   24
#define ELASTIC_PASSES 40
#define ELASTIC_ALPHA  0.05f

static void elastic(rng *r, float *x)
{
    enum { G = ELASTIC_GRID };
    static _Thread_local float field[2][2][G][G]; /* [buffer][dx, dy][row][column] */
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < G; i++)
            for (int j = 0; j < G; j++)
                field[0][c][i][j] = 2.0f * rng_uniform(r) - 1.0f;
    int cur = 0;
    for (int pass = 0; pass < ELASTIC_PASSES; pass++, cur ^= 1)
        for (int c = 0; c < 2; c++)
            for (int i = 0; i < G; i++)
                for (int j = 0; j < G; j++) {
                    float sum = 0.0f;
                    for (int di = -1; di <= 1; di++)
                        for (int dj = -1; dj <= 1; dj++) {
                            int ii = (i + di + G) % G, jj = (j + dj + G) % G;
                            sum += field[cur][c][ii][jj];
                        }
                    field[cur ^ 1][c][i][j] = sum / 9.0f;
                }
    /* Smoothing shrinks the field: normalise it back before reading it. */
    float norm = 0.0f;
    for (int i = 0; i < G; i++)
        for (int j = 0; j < G; j++)
            norm += fabsf(field[cur][0][i][j]) + fabsf(field[cur][1][i][j]);
    norm = norm > 0.0f ? 2.0f * G * G / norm : 0.0f;
    x[0] += ELASTIC_ALPHA * norm * field[cur][0][G / 2][G / 2];
    x[1] += ELASTIC_ALPHA * norm * field[cur][1][G / 2][G / 2];
}

/* Augmentation: Gaussian noise, a rotation of up to about 0.1 radian and a scaling of about 5%,
 * small enough to keep each point on its arm; with slow, an elastic distortion too. */
static void augment(rng *r, float *x, bool slow)
{
    float angle = 0.05f * rng_gauss(r), scale = 1.0f + 0.03f * rng_gauss(r);
    float c = cosf(angle) * scale, s = sinf(angle) * scale;
    float x0 = c * x[0] - s * x[1] + 0.02f * rng_gauss(r);
    float x1 = s * x[0] + c * x[1] + 0.02f * rng_gauss(r);
    x[0] = x0;
    x[1] = x1;
    if (slow)
        elastic(r, x);
}

static void *map_main(void *arg)
{
    worker *w = arg;
    rng r = {MAP_SEED + (uint64_t)w->index};
    char name[16];
    snprintf(name, sizeof name, "map-%d", w->index + 1);
    name_thread(name);
    shard s;
    while (bqueue_pop(&w->p->raw, &s)) {
        for (int i = 0; i < SHARD; i++)
            augment(&r, s.x + i * N_IN, w->p->slow_map);
        if (!bqueue_push(&w->p->mapped, &s))
            break;
    }
    return NULL;
}

static void *batch_main(void *arg)
{
    pipeline *p = arg;
    name_thread("batch");
    shard s;
    int used = SHARD; /* samples of s already packed */
    for (;;) {
        batch *b = batch_alloc(p->batch_size);
        for (int n = 0; n < b->n; n++, used++) {
            if (used == SHARD) {
                if (!bqueue_pop(&p->mapped, &s)) {
                    free(b);
                    return NULL;
                }
                used = 0;
            }
            b->y[n] = s.y[used];
            memcpy(b->x + n * N_IN, s.x + used * N_IN, N_IN * sizeof(float));
        }
        if (!bqueue_push(&p->prefetch, &b)) {
            free(b);
            return NULL;
        }
    }
}

/* ---- Command line ----------------------------------------------------------------------- */

typedef struct config {
    int steps, seconds, batch_size, hidden, workers;
    const char *output;
    bool no_start, slow_map;
} config;

static void usage(FILE *out)
{
    fputs("usage: demo_train [--steps N] [--seconds S] [--workers N] [--slow-map] [--batch N]\n"
          "                  [--hidden N] [--output DIR] [--no-start]\n"
          "\n"
          "Trains a small MLP with SGD on generated spirals fed by a threaded data pipeline\n"
          "(generator -> map x N -> batch -> prefetch -> train), recorded by termsight.\n"
          "  --steps N     stop after N steps (default 1000 when --seconds is not given)\n"
          "  --seconds S   stop once S seconds of training have passed\n"
          "  --workers N   map (augmentation) threads (default 2)\n"
          "  --slow-map    the map stage does much more work per sample: it becomes the\n"
          "                pipeline's bottleneck\n"
          "  --batch N     points per batch (default 128)\n"
          "  --hidden N    units in each of the two hidden layers (default 128)\n"
          "  --output DIR  parent of the run folder (default: TERMSIGHT_OUTPUT or\n"
          "                ./termsight-data)\n"
          "  --no-start    create the session but wait for a start command to collect\n"
          "\n"
          "SIGTERM or SIGINT ends the training after the current step; the recording is then\n"
          "completed as after a normal end.\n",
          out);
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, config *cfg)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--no-start")) {
            cfg->no_start = true;
            continue;
        } else if (!strcmp(a, "--slow-map")) {
            cfg->slow_map = true;
            continue;
        } else if (!strcmp(a, "--steps")) {
            ok = parse_count(value, 100000000, &cfg->steps);
        } else if (!strcmp(a, "--seconds")) {
            ok = parse_count(value, 31536000, &cfg->seconds);
        } else if (!strcmp(a, "--workers")) {
            ok = parse_count(value, MAX_WORKERS, &cfg->workers);
        } else if (!strcmp(a, "--batch")) {
            ok = parse_count(value, 65536, &cfg->batch_size);
        } else if (!strcmp(a, "--hidden")) {
            ok = parse_count(value, 8192, &cfg->hidden);
        } else if (!strcmp(a, "--output")) {
            ok = value && *value;
            cfg->output = value;
        } else {
            fprintf(stderr, "demo_train: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "demo_train: %s: missing or bad value\n", a);
            return 2;
        }
        i++;
    }
    if (!cfg->steps && !cfg->seconds)
        cfg->steps = 1000;
    return -1;
}

/* Starts the pipeline's threads; false (with the started ones stopped) when one cannot start. */
static bool pipeline_start(pipeline *p, worker *w, pthread_t *generator, pthread_t *batcher)
{
    if (pthread_create(generator, NULL, generator_main, p) != 0)
        return false;
    int started = 0;
    bool ok = true;
    for (; started < p->workers && ok; started++) {
        w[started] = (worker){.p = p, .index = started};
        ok = pthread_create(&w[started].thread, NULL, map_main, &w[started]) == 0;
    }
    if (!ok)
        started--;
    if (ok && pthread_create(batcher, NULL, batch_main, p) == 0)
        return true;
    bqueue_close(&p->raw);
    bqueue_close(&p->mapped);
    pthread_join(*generator, NULL);
    for (int i = 0; i < started; i++)
        pthread_join(w[i].thread, NULL);
    return false;
}

/* Closes every queue (each stage then ends) and joins the threads. */
static void pipeline_stop(pipeline *p, worker *w, pthread_t generator, pthread_t batcher)
{
    bqueue_close(&p->raw);
    bqueue_close(&p->mapped);
    bqueue_close(&p->prefetch);
    pthread_join(generator, NULL);
    for (int i = 0; i < p->workers; i++)
        pthread_join(w[i].thread, NULL);
    pthread_join(batcher, NULL);
    batch *b;
    while (bqueue_pop(&p->prefetch, &b)) /* batches made but not trained on */
        free(b);
}

/* The profiler session the options ask for; NULL when it cannot be made: the training then runs
 * all the same, unprofiled (the event calls cost nothing then). */
static termsight_session *session_open(const config *cfg)
{
    termsight_options opts;
    termsight_options_init(&opts);
    if (cfg->output)
        opts.output_path = cfg->output;
    if (cfg->no_start)
        opts.start_collecting = 0;
    termsight_session *session;
    if (termsight_session_create(&opts, &session) != TERMSIGHT_OK) {
        fprintf(stderr, "demo_train: termsight: profiling off: %s\n", termsight_last_error());
        return NULL;
    }
    return session;
}

/* The run's first line: the model, the pipeline, how long it trains. */
static void say_plan(const config *cfg)
{
    printf("demo_train: 3 spiral arms, MLP 2-%d-%d-3, batch %d, %d map worker%s%s; ", cfg->hidden,
           cfg->hidden, cfg->batch_size, cfg->workers, cfg->workers == 1 ? "" : "s",
           cfg->slow_map ? " (slow map)" : "");
    if (cfg->steps && cfg->seconds)
        printf("%d steps or %d s, ", cfg->steps, cfg->seconds);
    else if (cfg->steps)
        printf("%d steps, ", cfg->steps);
    else
        printf("%d s, ", cfg->seconds);
    printf("%s\n", cfg->no_start ? "waiting for a start command" : "recording");
}

/* One training step on batch b: forward, backward, the optimizer, each phase marked. Returns
 * the batch's loss. */
static double train_step(mlp *m, const batch *b)
{
    termsight_phase_mark(TERMSIGHT_FORWARD_START);
    double loss = mlp_forward(m, b->x, b->y, b->n);
    mlp_backward(m, b->x, b->y, b->n);
    termsight_phase_mark(TERMSIGHT_BACKWARD_END);
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        sgd_update(L->op_sgd_w, L->w, L->dw, (size_t)L->in * L->out);
        sgd_update(L->op_sgd_b, L->b, L->db, (size_t)L->out);
    }
    return loss;
}

/* What the training loop did. */
typedef struct progress {
    int steps;
    double first_loss, last_loss, elapsed_s;
} progress;

/* Trains on the pipeline's batches until the steps or the seconds are done, or a signal stops
 * it; a progress line at the first step, then about every second. The pipeline is stopped. */
static progress train(const config *cfg, mlp *m, pipeline *p, worker *w, pthread_t generator,
                      pthread_t batcher)
{
    progress r = {.first_loss = -1.0};
    double loss_sum = 0.0;
    int in_sum = 0;
    uint64_t t0 = termsight_now_ns(), last_report = t0;
    uint64_t deadline = cfg->seconds ? t0 + (uint64_t)cfg->seconds * 1000000000ull : UINT64_MAX;
    while (!stop_requested && (!cfg->steps || r.steps < cfg->steps) &&
           termsight_now_ns() < deadline) {
        termsight_step_begin();
        batch *b;
        if (!bqueue_pop(&p->prefetch, &b)) /* waiting here is the step interval */
            break;
        r.steps++;
        loss_sum += train_step(m, b);
        in_sum++;
        termsight_step_end();
        free(b);

        uint64_t now = termsight_now_ns();
        if (r.steps == 1 || now - last_report >= 1000000000ull) {
            r.last_loss = loss_sum / in_sum;
            if (r.first_loss < 0)
                r.first_loss = r.last_loss;
            printf("step %6d  loss %.4f\n", r.steps, r.last_loss);
            loss_sum = 0.0;
            in_sum = 0;
            last_report = now;
        }
    }
    r.elapsed_s = (double)(termsight_now_ns() - t0) * 1e-9;
    pipeline_stop(p, w, generator, batcher);
    if (in_sum)
        r.last_loss = loss_sum / in_sum;
    return r;
}

int main(int argc, char **argv)
{
    config cfg = {.batch_size = 128, .hidden = 128, .workers = 2};
    int status = parse_args(argc, argv, &cfg);
    if (status >= 0)
        return status;

    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    termsight_session *session = session_open(&cfg);
    name_thread("train");
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines show at once, also through a pipe */

    mlp m = {0};
    mlp_init(&m, cfg.hidden, cfg.batch_size);
    pipeline p = {.workers = cfg.workers, .batch_size = cfg.batch_size, .slow_map = cfg.slow_map};
    bqueue_init(&p.raw, "raw_queue", RAW_CAPACITY, sizeof(shard), TERMSIGHT_QUEUE_PIPELINE,
                "generator", "map");
    bqueue_init(&p.mapped, "map_queue", MAP_CAPACITY, sizeof(shard), TERMSIGHT_QUEUE_PIPELINE,
                "map", "batch");
    bqueue_init(&p.prefetch, "prefetch_queue", PREFETCH_DEPTH, sizeof(batch *),
                TERMSIGHT_QUEUE_HOST, "batch", "train");
    worker workers[MAX_WORKERS];
    pthread_t generator, batcher;
    if (!pipeline_start(&p, workers, &generator, &batcher)) {
        fputs("demo_train: cannot start the data pipeline's threads\n", stderr);
        termsight_session_destroy(session);
        return 1;
    }

    say_plan(&cfg);
    progress r = train(&cfg, &m, &p, workers, generator, batcher);
    printf("steps trained: %d in %.2f s (%.1f steps/s)%s\n", r.steps, r.elapsed_s,
           r.elapsed_s > 0 ? r.steps / r.elapsed_s : 0.0,
           stop_requested ? ", stopped by a signal" : "");
    printf("loss: %.4f at the start, %.4f at the end; test accuracy %.1f%% (chance %.1f%%)\n",
           r.first_loss < 0 ? 0.0 : r.first_loss, r.last_loss,
           100.0 * mlp_accuracy(&m, cfg.batch_size), 100.0 / N_CLASSES);
    mlp_free(&m);
    bqueue_destroy(&p.raw);
    bqueue_destroy(&p.mapped);
    bqueue_destroy(&p.prefetch);
    return example_session_end("demo_train", session);
}
