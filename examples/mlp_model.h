/* mlp_model: the model the example trainers share: a multi-layer perceptron (2 -> H -> H -> 3,
 * ReLU) trained with SGD on the three arms of a spiral, every operator (matmul, bias add, ReLU,
 * softmax cross-entropy, their gradients, the SGD updates) a termsight range named in MindSpore's
 * scope style, e.g. "Default/fc1/MatMul-op1". Header-only (static functions) so each example
 * stays one program. */
#ifndef TERMSIGHT_EXAMPLES_MLP_MODEL_H
#define TERMSIGHT_EXAMPLES_MLP_MODEL_H

#include <termsight/termsight.h>

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IN          2
#define N_CLASSES     3
#define N_LAYERS      3 /* fc1 and fc2 (hidden, ReLU), fc3 (logits) */
#define TEST_POINTS   1500
#define LEARNING_RATE 0.2f
#define NAME_LEN      112
#define TRAIN_SEED    0x5eed0001u
#define TEST_SEED     0x5eed0002u
#define INIT_SEED     0x5eed0003u

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (!p) {
        fputs("out of memory\n", stderr);
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

/* A command-line count from 1 to max. */
static bool parse_count(const char *s, int max, int *out)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end || end == s || v < 1 || v > max)
        return false;
    *out = (int)v;
    return true;
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
    float *x = xcalloc((size_t)batch_size * N_IN, sizeof *x);
    int *y = xcalloc((size_t)batch_size, sizeof *y);
    int correct = 0;
    for (int done = 0; done < TEST_POINTS; done += batch_size) {
        int n = TEST_POINTS - done < batch_size ? TEST_POINTS - done : batch_size;
        for (int i = 0; i < n; i++)
            y[i] = spiral_point(&r, x + i * N_IN);
        mlp_forward(m, x, y, n);
        for (int i = 0; i < n; i++) {
            const float *p = m->probs + (size_t)i * N_CLASSES;
            int best = 0;
            for (int c = 1; c < N_CLASSES; c++)
                best = p[c] > p[best] ? c : best;
            correct += best == y[i];
        }
    }
    free(x);
    free(y);
    return (double)correct / TEST_POINTS;
}

#endif
