/*
 * cuda_train: a small CUDA training program for `termsight run`, annotated with NVTX v3 only.
 *
 * A multi-layer perceptron (2 -> H -> H -> 3, ReLU) learns to tell apart the three arms of a
 * spiral with plain SGD, on the GPU: a tiled matmul kernel of its own (no cuBLAS), bias add, ReLU,
 * softmax cross-entropy, their gradients and the SGD updates. Every operator is an NVTX range
 * named in MindSpore's scope style ("Default/fc1/MatMul-op1",
 * "Gradients/Default/fc3/gradMatMul/MatMul-op12"), every step a range "step", so under
 * `termsight run` each kernel, copy and memset carries the operator it was launched under.
 *
 * It uses only the CUDA runtime (cudaMalloc, cudaMemcpy, cudaMemset, kernel launches) and NVTX
 * (header-only; without an NVTX injection every range is a no-op). The loss and the accuracy are
 * printed as they fall and rise; then the training time, for measuring the collector's overhead
 * against a run without it; the last line ("cuda_train: asked kernels K h2d ...") counts what the
 * program asked of CUDA, to hold a profiler's record of the run against.
 *
 * Usage: cuda_train [steps [batch [hidden]]]   (defaults 600, 256, 128)
 * Exit status: 0 trained, 1 a CUDA error or no usable device (said on stderr), 2 bad arguments.
 */
#include <nvtx3/nvToolsExt.h>

#include <cuda_runtime.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_IN          2
#define N_CLASSES     3
#define N_LAYERS      3 /* fc1 and fc2 (hidden, ReLU), fc3 (logits) */
#define TILE          16
#define TRAIN_POINTS  6000
#define TEST_POINTS   1500
#define LEARNING_RATE 0.1f
#define NAME_LEN      112
#define PRINT_EVERY   100
#define TRAIN_SEED    0x5eed0001u
#define TEST_SEED     0x5eed0002u
#define INIT_SEED     0x5eed0003u

/* A failed CUDA call: say which and why, and return 1 from the function (main frees). */
#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "cuda_train: %s failed: %s (%s)\n", #call, cudaGetErrorString(err_),   \
                    cudaGetErrorName(err_));                                                       \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* What the program asks of CUDA, counted as it asks and printed at the end (the "asked:" line),
 * so that a profiler's record of the run can be held against it (bench/gpu_check.sh). */
static struct {
    long kernels, h2d, d2h, memsets, dev_allocs, dev_frees, pinned_allocs, pinned_frees;
} asked;

template <class T> static cudaError_t counted_malloc(T **p, size_t bytes)
{
    asked.dev_allocs++;
    return cudaMalloc(p, bytes);
}

template <class T> static cudaError_t counted_malloc_host(T **p, size_t bytes)
{
    asked.pinned_allocs++;
    return cudaMallocHost(p, bytes);
}

static cudaError_t counted_free(void *p)
{
    asked.dev_frees += p != NULL;
    return cudaFree(p);
}

static cudaError_t counted_free_host(void *p)
{
    asked.pinned_frees += p != NULL;
    return cudaFreeHost(p);
}

static cudaError_t counted_memcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    asked.h2d += kind == cudaMemcpyHostToDevice;
    asked.d2h += kind == cudaMemcpyDeviceToHost;
    return cudaMemcpy(dst, src, bytes, kind);
}

static cudaError_t counted_memset(void *p, int value, size_t bytes)
{
    asked.memsets++;
    return cudaMemset(p, value, bytes);
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

static float rng_normal(rng *r) /* Box-Muller */
{
    float u = rng_uniform(r) + 1e-7f, v = rng_uniform(r);
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

/* n points, class i % 3 on arm i % 3, with some noise. x is [n, 2], y is [n]. */
static void spiral(uint32_t seed, int n, float *x, int *y)
{
    rng r = {seed};
    for (int i = 0; i < n; i++) {
        int c = i % N_CLASSES;
        float t = rng_uniform(&r);
        float angle = 4.0f * t + 2.0944f * (float)c + 0.2f * rng_normal(&r);
        x[2 * i] = t * cosf(angle);
        x[2 * i + 1] = t * sinf(angle);
        y[i] = c;
    }
}

/* ---- Kernels ------------------------------------------------------------------------------ */

/* C[M,N] = op(A)[M,K] * op(B)[K,N], row-major; op transposes when ta / tb (A stored [K,M], B
 * stored [N,K]). One TILE x TILE block of C per thread block, through shared memory. */
__global__ void matmul_tiled(const float *A, const float *B, float *C, int M, int N, int K, int ta,
                             int tb)
{
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] =
            row < M && ka < K ? (ta ? A[(size_t)ka * M + row] : A[(size_t)row * K + ka]) : 0.0f;
        Bs[threadIdx.y][threadIdx.x] =
            kb < K && col < N ? (tb ? B[(size_t)col * K + kb] : B[(size_t)kb * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = acc;
}

__global__ void bias_add(float *z, const float *b, int rows, int cols)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols)
        z[i] += b[i % cols];
}

__global__ void relu(const float *z, float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        a[i] = z[i] > 0.0f ? z[i] : 0.0f;
}

/* dz = da where z > 0 (in place on da). */
__global__ void relu_grad(float *da, const float *z, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && z[i] <= 0.0f)
        da[i] = 0.0f;
}

/* One thread per row: softmax of the logits, the row's cross-entropy and whether it is right
 * added into stats[0] and stats[1], and the gradient of the mean loss into dlogits. */
__global__ void softmax_xent(const float *logits, const int *y, float *dlogits, float *stats,
                             int rows)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows)
        return;
    const float *l = logits + (size_t)i * N_CLASSES;
    float m = l[0];
    int arg = 0;
    for (int c = 1; c < N_CLASSES; c++)
        if (l[c] > m) {
            m = l[c];
            arg = c;
        }
    float p[N_CLASSES], sum = 0.0f;
    for (int c = 0; c < N_CLASSES; c++)
        sum += p[c] = expf(l[c] - m);
    for (int c = 0; c < N_CLASSES; c++) {
        p[c] /= sum;
        if (dlogits)
            dlogits[(size_t)i * N_CLASSES + c] = (p[c] - (c == y[i] ? 1.0f : 0.0f)) / (float)rows;
    }
    atomicAdd(&stats[0], -logf(p[y[i]] + 1e-12f));
    atomicAdd(&stats[1], arg == y[i] ? 1.0f : 0.0f);
}

/* db[c] = sum over rows of dz[r, c]: one thread per column. */
__global__ void bias_grad(const float *dz, float *db, int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols)
        return;
    float s = 0.0f;
    for (int r = 0; r < rows; r++)
        s += dz[(size_t)r * cols + c];
    db[c] = s;
}

__global__ void sgd_update(float *w, const float *dw, float lr, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        w[i] -= lr * dw[i];
}

/* ---- The model ---------------------------------------------------------------------------- */

typedef struct layer {
    int in, out;
    float *w, *b, *dw, *db; /* device: [in, out], [out] */
    float *z, *a, *dz;      /* device: [batch, out] pre-activation, activation, gradient */
    char op_matmul[NAME_LEN], op_bias_add[NAME_LEN], op_relu[NAME_LEN];
    char op_grad_relu[NAME_LEN], op_grad_bias[NAME_LEN], op_grad_w[NAME_LEN], op_grad_x[NAME_LEN];
    char op_update_w[NAME_LEN], op_update_b[NAME_LEN];
} layer;

typedef struct model {
    int batch, hidden;
    layer layers[N_LAYERS];
    float *x;                    /* device: [batch, 2] */
    int *y;                      /* device: [batch] */
    float *stats;                /* device: loss sum, correct count */
    float *host_x, *host_test_x; /* host: all training / test points (pinned: async copies) */
    int *host_y, *host_test_y;
    float *test_x;                              /* device: the test points */
    int *test_y;                                /* device */
    float *eval_z[N_LAYERS], *eval_a[N_LAYERS]; /* device: [TEST_POINTS, out] */
    char op_get_next[NAME_LEN], op_loss[NAME_LEN];
} model;

static void op_name(char *out, int *seq, const char *fmt, int l)
{
    char scope[NAME_LEN - 16];
    snprintf(scope, sizeof scope, fmt, l);
    snprintf(out, NAME_LEN, "%s-op%d", scope, (*seq)++);
}

static void name_ops(model *m)
{
    int seq = 0;
    snprintf(m->op_get_next, NAME_LEN, "Default/GetNext-op%d", seq++);
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        op_name(L->op_matmul, &seq, "Default/fc%d/MatMul", l + 1);
        op_name(L->op_bias_add, &seq, "Default/fc%d/BiasAdd", l + 1);
        if (l < N_LAYERS - 1)
            op_name(L->op_relu, &seq, "Default/relu%d/ReLU", l + 1);
    }
    /* One kernel gives the loss and its gradient, as MindSpore's op of that name does. */
    op_name(m->op_loss, &seq, "Default/loss/SoftmaxCrossEntropyWithLogits", 0);
    for (int l = N_LAYERS - 1; l >= 0; l--) {
        layer *L = &m->layers[l];
        if (l < N_LAYERS - 1)
            op_name(L->op_grad_relu, &seq, "Gradients/Default/relu%d/gradReLU/ReluGrad", l + 1);
        op_name(L->op_grad_bias, &seq, "Gradients/Default/fc%d/gradBiasAdd/BiasAddGrad", l + 1);
        op_name(L->op_grad_w, &seq, "Gradients/Default/fc%d/gradMatMul/MatMul", l + 1);
        if (l > 0)
            op_name(L->op_grad_x, &seq, "Gradients/Default/fc%d/gradMatMul/MatMul", l + 1);
    }
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        op_name(L->op_update_w, &seq, "Default/optimizer-SGD/SGD", 0);
        op_name(L->op_update_b, &seq, "Default/optimizer-SGD/SGD", 0);
    }
}

static unsigned blocks(int n, int per)
{
    return (unsigned)((n + per - 1) / per);
}

static void matmul(const float *A, const float *B, float *C, int M, int N, int K, int ta, int tb)
{
    dim3 block(TILE, TILE), grid(blocks(N, TILE), blocks(M, TILE));
    matmul_tiled<<<grid, block>>>(A, B, C, M, N, K, ta, tb);
    asked.kernels++;
}

/* The forward pass of rows points at x; the logits end in the last layer's z. */
static cudaError_t forward(model *m, const float *x, int rows)
{
    const float *in = x;
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        int n = rows * L->out;
        nvtxRangePushA(L->op_matmul);
        matmul(in, L->w, L->z, rows, L->out, L->in, 0, 0);
        nvtxRangePop();
        nvtxRangePushA(L->op_bias_add);
        bias_add<<<blocks(n, 256), 256>>>(L->z, L->b, rows, L->out);
        asked.kernels++;
        nvtxRangePop();
        if (l < N_LAYERS - 1) {
            nvtxRangePushA(L->op_relu);
            relu<<<blocks(n, 256), 256>>>(L->z, L->a, n);
            asked.kernels++;
            nvtxRangePop();
            in = L->a;
        }
    }
    return cudaGetLastError();
}

/* The backward pass from dlogits in the last layer's dz, then the SGD updates. */
static cudaError_t backward_update(model *m, const float *x)
{
    int rows = m->batch;
    for (int l = N_LAYERS - 1; l >= 0; l--) {
        layer *L = &m->layers[l];
        if (l < N_LAYERS - 1) {
            nvtxRangePushA(L->op_grad_relu);
            relu_grad<<<blocks(rows * L->out, 256), 256>>>(L->dz, L->z, rows * L->out);
            asked.kernels++;
            nvtxRangePop();
        }
        nvtxRangePushA(L->op_grad_bias);
        bias_grad<<<blocks(L->out, 128), 128>>>(L->dz, L->db, rows, L->out);
        asked.kernels++;
        nvtxRangePop();
        const float *in = l ? m->layers[l - 1].a : x;
        nvtxRangePushA(L->op_grad_w); /* dW = in^T dz */
        matmul(in, L->dz, L->dw, L->in, L->out, rows, 1, 0);
        nvtxRangePop();
        if (l > 0) {
            nvtxRangePushA(L->op_grad_x); /* d(in) = dz W^T, into the previous layer's dz */
            matmul(L->dz, L->w, m->layers[l - 1].dz, rows, L->in, L->out, 0, 1);
            nvtxRangePop();
        }
    }
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        nvtxRangePushA(L->op_update_w);
        sgd_update<<<blocks(L->in * L->out, 256), 256>>>(L->w, L->dw, LEARNING_RATE,
                                                         L->in * L->out);
        asked.kernels++;
        nvtxRangePop();
        nvtxRangePushA(L->op_update_b);
        sgd_update<<<blocks(L->out, 256), 256>>>(L->b, L->db, LEARNING_RATE, L->out);
        asked.kernels++;
        nvtxRangePop();
    }
    return cudaGetLastError();
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Data on the device and the host, parameters initialized. Returns 0, or 1 (said on stderr). */
static int setup(model *m)
{
    CHECK(counted_malloc_host(&m->host_x, sizeof(float) * 2 * TRAIN_POINTS));
    CHECK(counted_malloc_host(&m->host_y, sizeof(int) * TRAIN_POINTS));
    CHECK(counted_malloc_host(&m->host_test_x, sizeof(float) * 2 * TEST_POINTS));
    CHECK(counted_malloc_host(&m->host_test_y, sizeof(int) * TEST_POINTS));
    spiral(TRAIN_SEED, TRAIN_POINTS, m->host_x, m->host_y);
    spiral(TEST_SEED, TEST_POINTS, m->host_test_x, m->host_test_y);
    CHECK(counted_malloc(&m->test_x, sizeof(float) * 2 * TEST_POINTS));
    CHECK(counted_malloc(&m->test_y, sizeof(int) * TEST_POINTS));
    CHECK(counted_memcpy(m->test_x, m->host_test_x, sizeof(float) * 2 * TEST_POINTS,
                         cudaMemcpyHostToDevice));
    CHECK(counted_memcpy(m->test_y, m->host_test_y, sizeof(int) * TEST_POINTS,
                         cudaMemcpyHostToDevice));
    CHECK(counted_malloc(&m->x, sizeof(float) * 2 * m->batch));
    CHECK(counted_malloc(&m->y, sizeof(int) * m->batch));
    CHECK(counted_malloc(&m->stats, sizeof(float) * 2));

    /* Parameters: He initialization on the host, biases zeroed on the device. */
    int widths[N_LAYERS + 1] = {N_IN, m->hidden, m->hidden, N_CLASSES};
    rng init = {INIT_SEED};
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        L->in = widths[l];
        L->out = widths[l + 1];
        size_t nw = (size_t)L->in * L->out, na = (size_t)m->batch * L->out;
        CHECK(counted_malloc(&L->w, sizeof(float) * nw));
        CHECK(counted_malloc(&L->dw, sizeof(float) * nw));
        CHECK(counted_malloc(&L->b, sizeof(float) * L->out));
        CHECK(counted_malloc(&L->db, sizeof(float) * L->out));
        CHECK(counted_malloc(&L->z, sizeof(float) * na));
        CHECK(counted_malloc(&L->a, sizeof(float) * na));
        CHECK(counted_malloc(&L->dz, sizeof(float) * na));
        CHECK(counted_malloc(&m->eval_z[l], sizeof(float) * TEST_POINTS * L->out));
        CHECK(counted_malloc(&m->eval_a[l], sizeof(float) * TEST_POINTS * L->out));
        float *w = (float *)malloc(sizeof(float) * nw);
        if (!w) {
            fputs("cuda_train: out of memory\n", stderr);
            return 1;
        }
        float scale = sqrtf(2.0f / (float)L->in);
        for (size_t i = 0; i < nw; i++)
            w[i] = scale * rng_normal(&init);
        cudaError_t err = counted_memcpy(L->w, w, sizeof(float) * nw, cudaMemcpyHostToDevice);
        free(w);
        CHECK(err);
        CHECK(counted_memset(L->b, 0, sizeof(float) * L->out));
    }
    name_ops(m);
    return 0;
}

/* steps of SGD, the running loss and accuracy printed every PRINT_EVERY steps; the wall time of
 * the loop in *seconds. Returns 0, or 1 (said on stderr). */
static int train(model *m, int steps, double *seconds)
{
    int batch = m->batch;
    float loss_sum = 0, correct = 0;
    int seen = 0;
    CHECK(cudaDeviceSynchronize());
    double t0 = now_s();
    for (int s = 1; s <= steps; s++) {
        nvtxRangePushA("step");
        int first = (int)(((long long)(s - 1) * batch) % (TRAIN_POINTS - batch + 1));
        nvtxRangePushA(m->op_get_next);
        CHECK(counted_memcpy(m->x, m->host_x + 2 * first, sizeof(float) * 2 * batch,
                             cudaMemcpyHostToDevice));
        CHECK(counted_memcpy(m->y, m->host_y + first, sizeof(int) * batch, cudaMemcpyHostToDevice));
        CHECK(counted_memset(m->stats, 0, sizeof(float) * 2));
        nvtxRangePop();

        CHECK(forward(m, m->x, batch));
        layer *last = &m->layers[N_LAYERS - 1];
        nvtxRangePushA(m->op_loss);
        softmax_xent<<<blocks(batch, 128), 128>>>(last->z, m->y, last->dz, m->stats, batch);
        asked.kernels++;
        nvtxRangePop();
        CHECK(cudaGetLastError());
        CHECK(backward_update(m, m->x));

        /* The step's loss back on the host: a real loop's loss.item(), which synchronizes. */
        float stats[2];
        CHECK(counted_memcpy(stats, m->stats, sizeof stats, cudaMemcpyDeviceToHost));
        nvtxRangePop();
        loss_sum += stats[0];
        correct += stats[1];
        seen += batch;
        if (s % PRINT_EVERY == 0 || s == steps) {
            printf("step %6d  loss %.4f  train accuracy %5.1f%%\n", s, loss_sum / (float)seen,
                   100.0f * correct / (float)seen);
            fflush(stdout);
            loss_sum = correct = 0;
            seen = 0;
        }
    }
    CHECK(cudaDeviceSynchronize());
    *seconds = now_s() - t0;
    return 0;
}

/* Held-out loss and accuracy: the forward pass over the test points as one batch, in the
 * layers' evaluation buffers. Returns 0, or 1 (said on stderr). */
static int evaluate(model *m)
{
    float *keep_z[N_LAYERS], *keep_a[N_LAYERS];
    for (int l = 0; l < N_LAYERS; l++) {
        keep_z[l] = m->layers[l].z;
        keep_a[l] = m->layers[l].a;
        m->layers[l].z = m->eval_z[l];
        m->layers[l].a = m->eval_a[l];
    }
    nvtxRangePushA("eval");
    cudaError_t err = counted_memset(m->stats, 0, sizeof(float) * 2);
    if (err == cudaSuccess)
        err = forward(m, m->test_x, TEST_POINTS);
    if (err == cudaSuccess) {
        nvtxRangePushA(m->op_loss);
        softmax_xent<<<blocks(TEST_POINTS, 128), 128>>>(m->layers[N_LAYERS - 1].z, m->test_y, NULL,
                                                        m->stats, TEST_POINTS);
        asked.kernels++;
        nvtxRangePop();
        err = cudaGetLastError();
    }
    float stats[2] = {0, 0};
    if (err == cudaSuccess)
        err = counted_memcpy(stats, m->stats, sizeof stats, cudaMemcpyDeviceToHost);
    nvtxRangePop();
    for (int l = 0; l < N_LAYERS; l++) {
        m->layers[l].z = keep_z[l];
        m->layers[l].a = keep_a[l];
    }
    CHECK(err);
    printf("test loss %.4f  test accuracy %.1f%%\n", stats[0] / TEST_POINTS,
           100.0f * stats[1] / TEST_POINTS);
    return 0;
}

static void model_free(model *m)
{
    for (int l = 0; l < N_LAYERS; l++) {
        layer *L = &m->layers[l];
        float *dev[] = {L->w, L->dw, L->b, L->db, L->z, L->a, L->dz, m->eval_z[l], m->eval_a[l]};
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
            counted_free(dev[i]);
    }
    counted_free(m->x);
    counted_free(m->y);
    counted_free(m->stats);
    counted_free(m->test_x);
    counted_free(m->test_y);
    counted_free_host(m->host_x);
    counted_free_host(m->host_y);
    counted_free_host(m->host_test_x);
    counted_free_host(m->host_test_y);
}

/* argv[i] as an int in 1..max, def when absent, -1 when not such a number. */
static int parse_arg(int argc, char **argv, int i, int def, int max)
{
    if (argc <= i)
        return def;
    char *end = NULL;
    long v = strtol(argv[i], &end, 10);
    return end != argv[i] && !*end && v > 0 && v <= max ? (int)v : -1;
}

int main(int argc, char **argv)
{
    int steps = parse_arg(argc, argv, 1, 600, 10000000);
    int batch = parse_arg(argc, argv, 2, 256, TRAIN_POINTS);
    int hidden = parse_arg(argc, argv, 3, 128, 8192);
    if (argc > 4 || steps < 0 || batch < 0 || hidden < 0) {
        fprintf(stderr,
                "usage: cuda_train [steps [batch [hidden]]]\n"
                "  steps 1..10000000 (600), batch 1..%d (256), hidden 1..8192 (128)\n",
                TRAIN_POINTS);
        return 2;
    }

    /* Without a driver or a device every runtime call fails: say so once, clearly. */
    int devices = 0;
    cudaError_t err = cudaGetDeviceCount(&devices);
    if (err != cudaSuccess || devices == 0) {
        fprintf(stderr,
                "cuda_train: no usable CUDA device (cudaGetDeviceCount: %s); this example needs "
                "an NVIDIA GPU and its driver\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "no devices");
        return 1;
    }
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, 0);
    printf("cuda_train: %s, %d steps, batch %d, hidden %d\n",
           err == cudaSuccess ? prop.name : "device 0", steps, batch, hidden);

    model m;
    memset(&m, 0, sizeof m);
    m.batch = batch;
    m.hidden = hidden;
    double seconds = 0;
    int rc = setup(&m) || train(&m, steps, &seconds) || evaluate(&m);
    if (!rc)
        printf("cuda_train: %d steps in %.1f ms (%.3f ms/step)\n", steps, 1e3 * seconds,
               1e3 * seconds / steps);
    model_free(&m);
    printf("cuda_train: asked kernels %ld h2d %ld d2h %ld memsets %ld dev_allocs %ld dev_frees %ld "
           "pinned_allocs %ld pinned_frees %ld\n",
           asked.kernels, asked.h2d, asked.d2h, asked.memsets, asked.dev_allocs, asked.dev_frees,
           asked.pinned_allocs, asked.pinned_frees);
    return rc;
}
