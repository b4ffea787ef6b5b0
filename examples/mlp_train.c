/*
 * mlp_train: a small real training program, instrumented with termsight.
 *
 * A multi-layer perceptron (2 -> H -> H -> 3, ReLU) learns to tell apart the three arms of a
 * spiral with plain SGD. Every operator (matmul, bias add, ReLU, softmax cross-entropy, their
 * gradients, the SGD updates) is a termsight range named in MindSpore's scope style, e.g.
 * "Default/fc1/MatMul-op1" or "Gradients/Default/fc3/gradMatMul/MatMul-op12". A data-loader
 * thread generates batches into a bounded queue that termsight watches.
 */
#include "example_session.h"
#include "mlp_model.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_CAPACITY 8

typedef struct batch {
    int n;
    int *y;   /* n labels */
    float *x; /* n x N_IN coordinates */
} batch;

/* One allocation, freed with free(). */
static batch *batch_generate(rng *r, int n)
{
    batch *b = xcalloc(1, sizeof(*b) + (size_t)n * (sizeof(int) + N_IN * sizeof(float)));
    b->n = n;
    b->y = (int *)(b + 1);
    b->x = (float *)(b->y + n);
    for (int i = 0; i < n; i++)
        b->y[i] = spiral_point(r, b->x + (size_t)i * N_IN);
    return b;
}

/* ---- The data loader: a thread that fills a bounded queue ------------------------------- */

typedef struct batch_queue {
    pthread_mutex_t lock;
    pthread_cond_t not_empty, not_full;
    batch *slots[QUEUE_CAPACITY];
    int head, count;
    uint32_t handle;         /* termsight's handle; 0 (ignored) when nothing is profiling */
    int batches, batch_size; /* what the loader is to produce */
    int data_ms;             /* the loader's extra time a batch (a slower input pipeline) */
} batch_queue;

static void queue_push(batch_queue *q, batch *b)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == QUEUE_CAPACITY)
        pthread_cond_wait(&q->not_full, &q->lock);
    q->slots[(q->head + q->count) % QUEUE_CAPACITY] = b;
    q->count++;
    termsight_queue_size(q->handle, (uint64_t)q->count);
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->lock);
}

static batch *queue_pop(batch_queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (q->count == 0)
        pthread_cond_wait(&q->not_empty, &q->lock);
    batch *b = q->slots[q->head];
    q->head = (q->head + 1) % QUEUE_CAPACITY;
    q->count--;
    termsight_queue_size(q->handle, (uint64_t)q->count);
    pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->lock);
    return b;
}

/* Produces exactly as many batches as the trainer takes, then ends. */
static void *loader_main(void *arg)
{
    batch_queue *q = arg;
    rng r = {TRAIN_SEED};
    termsight_thread_name("data-loader");
    for (int i = 0; i < q->batches; i++) {
        batch *b = batch_generate(&r, q->batch_size);
        if (q->data_ms) {
            struct timespec ts = {q->data_ms / 1000, (long)(q->data_ms % 1000) * 1000000};
            nanosleep(&ts, NULL);
        }
        queue_push(q, b);
    }
    return NULL;
}

/* ---- Command line ----------------------------------------------------------------------- */

typedef struct config {
    int steps, batch_size, hidden, data_ms;
    const char *output;
    bool no_start;
} config;

static void usage(FILE *out)
{
    fputs("usage: mlp_train [--steps N] [--batch N] [--hidden N] [--data-ms N] [--output DIR]\n"
          "                 [--no-start]\n"
          "\n"
          "Trains a small MLP on generated spirals with SGD, recorded by termsight.\n"
          "  --steps N     training steps (default 300)\n"
          "  --batch N     points per batch (default 128)\n"
          "  --hidden N    units in each of the two hidden layers (default 128)\n"
          "  --data-ms N   the data loader sleeps N ms a batch, as a slower input pipeline\n"
          "                would (default 0)\n"
          "  --output DIR  parent of the run folder (default: TERMSIGHT_OUTPUT or\n"
          "                ./termsight-data)\n"
          "  --no-start    create the session but wait for a start command to collect\n",
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
        } else if (!strcmp(a, "--steps")) {
            ok = parse_count(value, 100000000, &cfg->steps);
        } else if (!strcmp(a, "--batch")) {
            ok = parse_count(value, 65536, &cfg->batch_size);
        } else if (!strcmp(a, "--hidden")) {
            ok = parse_count(value, 8192, &cfg->hidden);
        } else if (!strcmp(a, "--data-ms")) {
            ok = parse_count(value, 60000, &cfg->data_ms);
        } else if (!strcmp(a, "--output")) {
            ok = value && *value;
            cfg->output = value;
        } else {
            fprintf(stderr, "mlp_train: unknown option '%s'\n", a);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "mlp_train: %s: missing or bad value\n", a);
            return 2;
        }
        i++;
    }
    return -1;
}

int main(int argc, char **argv)
{
    config cfg = {.steps = 300, .batch_size = 128, .hidden = 128};
    int status = parse_args(argc, argv, &cfg);
    if (status >= 0)
        return status;

    termsight_options opts;
    termsight_options_init(&opts);
    if (cfg.output)
        opts.output_path = cfg.output;
    if (cfg.no_start)
        opts.start_collecting = 0;
    termsight_session *session;
    /* Without a session the training runs all the same, unprofiled: the event calls cost
     * nothing then. */
    if (termsight_session_create(&opts, &session) != TERMSIGHT_OK) {
        fprintf(stderr, "mlp_train: termsight: profiling off: %s\n", termsight_last_error());
        session = NULL;
    }
    termsight_thread_name("train");
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines show at once, also through a pipe */

    mlp m = {0};
    mlp_init(&m, cfg.hidden, cfg.batch_size);
    batch_queue queue = {.lock = PTHREAD_MUTEX_INITIALIZER,
                         .not_empty = PTHREAD_COND_INITIALIZER,
                         .not_full = PTHREAD_COND_INITIALIZER,
                         .batches = cfg.steps,
                         .batch_size = cfg.batch_size,
                         .data_ms = cfg.data_ms};
    queue.handle = termsight_queue_register("batch_queue", QUEUE_CAPACITY, TERMSIGHT_QUEUE_HOST,
                                            "generator", "train");
    pthread_t loader_thread;
    if (pthread_create(&loader_thread, NULL, loader_main, &queue) != 0) {
        fputs("mlp_train: cannot start the data-loader thread\n", stderr);
        termsight_session_destroy(session);
        return 1;
    }

    printf("mlp_train: 3 spiral arms, MLP 2-%d-%d-3, batch %d, %d steps, %s\n", cfg.hidden,
           cfg.hidden, cfg.batch_size, cfg.steps,
           cfg.no_start ? "waiting for a start command" : "recording");
    int report_every = cfg.steps >= 10 ? cfg.steps / 10 : 1;
    double loss_sum = 0.0;
    uint64_t t0 = termsight_now_ns();
    int in_sum = 0;
    for (int step = 1; step <= cfg.steps; step++) {
        termsight_step_begin();
        batch *b = queue_pop(&queue); /* waiting here is the step interval */

        termsight_phase_mark(TERMSIGHT_FORWARD_START);
        loss_sum += mlp_forward(&m, b->x, b->y, b->n);
        in_sum++;
        mlp_backward(&m, b->x, b->y, b->n);
        termsight_phase_mark(TERMSIGHT_BACKWARD_END);

        for (int l = 0; l < N_LAYERS; l++) {
            layer *L = &m.layers[l];
            sgd_update(L->op_sgd_w, L->w, L->dw, (size_t)L->in * L->out);
            sgd_update(L->op_sgd_b, L->b, L->db, (size_t)L->out);
        }
        termsight_step_end();
        free(b);

        if (step % report_every == 0 || step == 1) {
            printf("step %6d  loss %.4f\n", step, loss_sum / in_sum);
            loss_sum = 0.0;
            in_sum = 0;
        }
    }
    double elapsed = (double)(termsight_now_ns() - t0) * 1e-9;
    pthread_join(loader_thread, NULL);

    printf("trained in %.2f s (%.1f steps/s); test accuracy %.1f%% (chance %.1f%%)\n", elapsed,
           cfg.steps / elapsed, 100.0 * mlp_accuracy(&m, cfg.batch_size), 100.0 / N_CLASSES);
    mlp_free(&m);

    return example_session_end("mlp_train", session);
}
