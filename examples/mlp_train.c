/*
 * mlp_train: a small real training program, instrumented with termsight.
 *
 * A multi-layer perceptron (2 -> H -> H -> 3, ReLU) learns to tell apart the three arms of a
 * spiral with plain SGD. Every operator (matmul, bias add, ReLU, softmax cross-entropy, their
 * gradients, the SGD updates) is a termsight range named in MindSpore's scope style, e.g.
 * "Default/fc1/MatMul-op1" or "Gradients/Default/fc3/gradMatMul/MatMul-op12". A data-loader
 * thread generates batches into a bounded queue that termsight watches.
 */
#include <termsight/termsight.h>

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_IN           2
#define N_CLASSES      3
#define N_LAYERS       3 /* fc1 and fc2 (hidden, ReLU), fc3 (logits) */
#define QUEUE_CAPACITY 8
#define TEST_POINTS    1500
#define LEARNING_RATE  0.2f
#define NAME_LEN       112
#define TRAIN_SEED     0x5eed0001u
#define TEST_SEED      0x5eed0002u
#define INIT_SEED      0x5eed0003u

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fputs("mlp_train: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

/* ---- Data: points on three spiral arms, from a seeded generator ------------------------- */

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t rng_next(rng *r) /* splitmix64 */
{
    uint64_t z = (r->state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static float rng_uniform(rng *r) /* [0, 1) */
{
    return (float)(rng_next(r) >> 40) * 0x1.0p-24f;
}

static float rng_gauss(rng *r) /* Box-Muller */
{
    float u = rng_uniform(r) + 0x1.0p-25f, v = rng_uniform(r);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* A random point of a random class; x gets its two coordinates, the class is returned. */
static int spiral_point(rng *r, float *x)
{
    int c = (int)(rng_next(r) % N_CLASSES);
    float t = rng_uniform(r);
    float angle = 4.0f * ((float)c + t) + 0.2f * rng_gauss(r);
    x[0] = 2.0f * t * sinf(angle);
    x[1] = 2.0f * t * cosf(angle);
    return c;
}

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
    for (int i = 0; i < q->batches; i++)
        queue_push(q, batch_generate(&r, q->batch_size));
    return NULL;
}

/* ---- The model -------------------------------------------------------------------------- */

typedef struct layer {
    int in, out;
    bool relu;
    float *w, *b, *dw, *db; /* w is in x out, row-major */
    float *a, *da;          /* output (batch x out; ReLU applied in place) and its gradient */
    char op_matmul[NAME_LEN], op_bias_add[NAME_LEN], op_relu[NAME_LEN];
    char op_grad_relu[NAME_LEN], op_grad_bias[NAME_LEN], op_grad_w[NAME_LEN], op_grad_x[NAME_LEN];
    char op_sgd_w[NAME_LEN], op_sgd_b[NAME_LEN];
} layer;

typedef struct mlp {
    layer layers[N_LAYERS];
    float *probs; /* softmax output, batch x N_CLASSES */
    char op_loss[NAME_LEN], op_grad_loss[NAME_LEN];
} mlp;

/* The formatted scope and op, then "-op<N>", N counting ops in execution order as MindSpore
 * numbers the nodes of its graph. */
static void __attribute__((format(printf, 3, 4))) op_name(char *out, int *seq, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, NAME_LEN, fmt, ap);
    va_end(ap);
    if (n >= 0 && n < NAME_LEN)
        snprintf(out + n, NAME_LEN - (size_t)n, "-op%d", ++*seq);
}

static void mlp_name_ops(mlp *m)
{
    int seq = 0;
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        op_name(L->op_matmul, &seq, "Default/fc%d/MatMul", l + 1);
        op_name(L->op_bias_add, &seq, "Default/fc%d/BiasAdd", l + 1);
        if (L->relu)
            op_name(L->op_relu, &seq, "Default/relu%d/ReLU", l + 1);
    }
    op_name(m->op_loss, &seq, "Default/loss/SoftmaxCrossEntropyWithLogits");
    op_name(m->op_grad_loss, &seq,
            "Gradients/Default/loss/gradSoftmaxCrossEntropyWithLogits/"
            "SoftmaxCrossEntropyWithLogitsGrad");
    for (int l = N_LAYERS - 1; l >= 0; l--) {
        layer *L = &m->layers[l];
        op_name(L->op_grad_bias, &seq, "Gradients/Default/fc%d/gradBiasAdd/BiasAddGrad", l + 1);
        op_name(L->op_grad_w, &seq, "Gradients/Default/fc%d/gradMatMul/MatMul", l + 1);
        if (l == 0) /* the input needs no gradient */
            break;
        op_name(L->op_grad_x, &seq, "Gradients/Default/fc%d/gradMatMul/MatMul", l + 1);
        op_name(m->layers[l - 1].op_grad_relu, &seq, "Gradients/Default/relu%d/gradReLU/ReluGrad",
                l);
    }
    for (int l = 0; l < N_LAYERS; l++) {
        op_name(m->layers[l].op_sgd_w, &seq, "Default/optimizer-SGD/SGD");
        op_name(m->layers[l].op_sgd_b, &seq, "Default/optimizer-SGD/SGD");
    }
}

static void mlp_init(mlp *m, int hidden, int batch_size)
{
    rng r = {INIT_SEED};
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        L->in = l == 0 ? N_IN : hidden;
        L->out = l == N_LAYERS - 1 ? N_CLASSES : hidden;
        L->relu = l < N_LAYERS - 1;
        size_t nw = (size_t)L->in * L->out, na = (size_t)batch_size * L->out;
        L->w = xcalloc(nw, sizeof(float));
        L->dw = xcalloc(nw, sizeof(float));
        L->b = xcalloc(L->out, sizeof(float));
        L->db = xcalloc(L->out, sizeof(float));
        L->a = xcalloc(na, sizeof(float));
        L->da = xcalloc(na, sizeof(float));
        float scale = sqrtf(2.0f / (float)L->in); /* He initialization, for ReLU */
        for (size_t i = 0; i < nw; i++)
            L->w[i] = scale * rng_gauss(&r);
    }
    m->probs = xcalloc((size_t)batch_size * N_CLASSES, sizeof(float));
    mlp_name_ops(m);
}

static void mlp_free(mlp *m)
{
    for (layer *L = m->layers; L < m->layers + N_LAYERS; L++) {
        free(L->w), free(L->dw), free(L->b), free(L->db), free(L->a), free(L->da);
    }
    free(m->probs);
}

/* ---- Operators -------------------------------------------------------------------------- */

/* c[n x k] = A . B with A = a[n x m] (stored m x n when ta) and B = b[m x k] (stored k x m when
 * tb): the forward product and both gradient products. */
static void matmul(const float *a, const float *b, float *c, int n, int m, int k, bool ta, bool tb)
{
    memset(c, 0, (size_t)n * k * sizeof(float));
    for (int i = 0; i < n; i++)
        for (int p = 0; p < m; p++) {
            float av = ta ? a[(size_t)p * n + i] : a[(size_t)i * m + p];
            for (int j = 0; j < k; j++)
                c[(size_t)i * k + j] += av * (tb ? b[(size_t)j * m + p] : b[(size_t)p * k + j]);
        }
}

/* Mean cross-entropy of softmax(logits) against the labels; keeps the probabilities. */
static float softmax_cross_entropy(const float *logits, const int *y, float *probs, int n)
{
    float loss = 0.0f;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * N_CLASSES;
        float *p = probs + (size_t)i * N_CLASSES, max = z[0], sum = 0.0f;
        for (int c = 1; c < N_CLASSES; c++)
            max = fmaxf(max, z[c]);
        for (int c = 0; c < N_CLASSES; c++)
            sum += p[c] = expf(z[c] - max);
        for (int c = 0; c < N_CLASSES; c++)
            p[c] /= sum;
        loss -= logf(fmaxf(p[y[i]], 1e-12f));
    }
    return loss / (float)n;
}

static float mlp_forward(mlp *m, const float *x, const int *y, int n)
{
    const float *in = x;
    for (layer *L = m->layers; L < m->layers + N_LAYERS; in = L->a, L++) {
        size_t na = (size_t)n * L->out;
        termsight_range_begin(L->op_matmul, "MatMul");
        termsight_range_flops(2ull * na * L->in);
        matmul(in, L->w, L->a, n, L->in, L->out, false, false);
        termsight_range_end();

        termsight_range_begin(L->op_bias_add, "BiasAdd");
        for (size_t i = 0; i < na; i++)
            L->a[i] += L->b[i % L->out];
        termsight_range_end();

        if (L->relu) {
            termsight_range_begin(L->op_relu, "ReLU");
            for (size_t i = 0; i < na; i++)
                L->a[i] = fmaxf(L->a[i], 0.0f);
            termsight_range_end();
        }
    }
    termsight_range_begin(m->op_loss, "SoftmaxCrossEntropyWithLogits");
    float loss = softmax_cross_entropy(m->layers[N_LAYERS - 1].a, y, m->probs, n);
    termsight_range_end();
    return loss;
}

static void mlp_backward(mlp *m, const float *x, const int *y, int n)
{
    float *dlogits = m->layers[N_LAYERS - 1].da;
    termsight_range_begin(m->op_grad_loss, "SoftmaxCrossEntropyWithLogitsGrad");
    for (int i = 0; i < n; i++)
        for (int c = 0; c < N_CLASSES; c++) {
            size_t k = (size_t)i * N_CLASSES + c;
            dlogits[k] = (m->probs[k] - (c == y[i] ? 1.0f : 0.0f)) / (float)n;
        }
    termsight_range_end();

    for (int l = N_LAYERS - 1; l >= 0; l--) {
        layer *L = &m->layers[l], *prev = l > 0 ? &m->layers[l - 1] : NULL;
        termsight_range_begin(L->op_grad_bias, "BiasAddGrad");
        memset(L->db, 0, (size_t)L->out * sizeof(float));
        for (size_t i = 0; i < (size_t)n * L->out; i++)
            L->db[i % L->out] += L->da[i];
        termsight_range_end();

        termsight_range_begin(L->op_grad_w, "MatMul");
        termsight_range_flops(2ull * n * L->in * L->out);
        matmul(prev ? prev->a : x, L->da, L->dw, L->in, n, L->out, true, false);
        termsight_range_end();
        if (!prev)
            break;

        termsight_range_begin(L->op_grad_x, "MatMul");
        termsight_range_flops(2ull * n * L->in * L->out);
        matmul(L->da, L->w, prev->da, n, L->out, L->in, false, true);
        termsight_range_end();

        termsight_range_begin(prev->op_grad_relu, "ReluGrad");
        for (size_t i = 0; i < (size_t)n * prev->out; i++)
            prev->da[i] = prev->a[i] > 0.0f ? prev->da[i] : 0.0f;
        termsight_range_end();
    }
}

static void sgd_update(const char *op, float *param, const float *grad, size_t len)
{
    termsight_range_begin(op, "SGD");
    for (size_t i = 0; i < len; i++)
        param[i] -= LEARNING_RATE * grad[i];
    termsight_range_end();
}

/* Share of correct predictions on a fresh test set, evaluated batch by batch. */
static double mlp_accuracy(mlp *m, int batch_size)
{
    rng r = {TEST_SEED};
    int correct = 0;
    for (int done = 0; done < TEST_POINTS; done += batch_size) {
        int n = TEST_POINTS - done < batch_size ? TEST_POINTS - done : batch_size;
        batch *b = batch_generate(&r, n);
        mlp_forward(m, b->x, b->y, n);
        for (int i = 0; i < n; i++) {
            const float *p = m->probs + (size_t)i * N_CLASSES;
            int best = 0;
            for (int c = 1; c < N_CLASSES; c++)
                best = p[c] > p[best] ? c : best;
            correct += best == b->y[i];
        }
        free(b);
    }
    return (double)correct / TEST_POINTS;
}

/* ---- Command line ----------------------------------------------------------------------- */

typedef struct config {
    int steps, batch_size, hidden;
    const char *output;
    bool no_start;
} config;

static void usage(FILE *out)
{
    fputs("usage: mlp_train [--steps N] [--batch N] [--hidden N] [--output DIR] [--no-start]\n"
          "\n"
          "Trains a small MLP on generated spirals with SGD, recorded by termsight.\n"
          "  --steps N     training steps (default 300)\n"
          "  --batch N     points per batch (default 128)\n"
          "  --hidden N    units in each of the two hidden layers (default 128)\n"
          "  --output DIR  parent of the run folder (default: TERMSIGHT_OUTPUT or\n"
          "                ./termsight-data)\n"
          "  --no-start    create the session but wait for a start command to collect\n",
          out);
}

static bool parse_count(const char *s, int max, int *out)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end || end == s || v < 1 || v > max)
        return false;
    *out = (int)v;
    return true;
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
    if (termsight_session_create(&opts, &session) != TERMSIGHT_OK) {
        fprintf(stderr, "mlp_train: cannot start termsight: %s\n", termsight_last_error());
        return 1;
    }
    termsight_thread_name("train");
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress lines show at once, also through a pipe */

    mlp m = {0};
    mlp_init(&m, cfg.hidden, cfg.batch_size);
    batch_queue queue = {.lock = PTHREAD_MUTEX_INITIALIZER,
                         .not_empty = PTHREAD_COND_INITIALIZER,
                         .not_full = PTHREAD_COND_INITIALIZER,
                         .batches = cfg.steps,
                         .batch_size = cfg.batch_size};
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

    /* Flush first so that the counts include every event emitted above. */
    if (termsight_flush(session) != TERMSIGHT_OK)
        fprintf(stderr, "mlp_train: flush: %s\n", termsight_last_error());
    char folder[4096];
    snprintf(folder, sizeof(folder), "%s", termsight_run_folder(session));
    uint64_t recorded = termsight_events_recorded(session);
    uint64_t dropped = termsight_events_dropped(session);
    if (termsight_session_destroy(session) != TERMSIGHT_OK) {
        fprintf(stderr, "mlp_train: closing the session: %s\n", termsight_last_error());
        return 1;
    }
    /* The recording starts with the first collection window: with --no-start and no start
     * command, there is none. */
    printf("run folder: %s%s\n", folder,
           access(folder, F_OK) == 0 ? "" : " (not created: nothing was collected)");
    printf("events: %llu recorded, %llu dropped\n", (unsigned long long)recorded,
           (unsigned long long)dropped);
    return 0;
}
