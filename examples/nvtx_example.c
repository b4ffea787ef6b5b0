/* nvtx_example: a program annotated with NVTX v3 only (no termsight call), for `termsight run`.
 *
 * The main thread names itself "nvtx-main" and runs STEPS steps, each a range "step" holding
 * nested ranges forward > {matmul, relu} and backward, with a mark per step. A worker thread
 * "nvtx-worker" ends a range that main started ("handoff", start/end across threads) and pushes
 * its own "load" ranges. A domain "example-domain" holds a registered-string range "io" and a
 * domain mark. Without an NVTX injection every call is a no-op. */
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define STEPS 5

static nvtxRangeId_t handoff;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;
static int started;

static void spin_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void *worker(void *arg)
{
    (void)arg;
    nvtxNameOsThreadA((uint32_t)gettid(), "nvtx-worker");
    pthread_mutex_lock(&lock);
    while (!started)
        pthread_cond_wait(&ready, &lock);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < 3; i++) {
        nvtxRangePushA("load");
        spin_us(200);
        nvtxRangePop();
    }
    nvtxRangeEnd(handoff); /* started on the main thread */
    return NULL;
}

int main(void)
{
    nvtxNameOsThreadA((uint32_t)gettid(), "nvtx-main");
    nvtxDomainHandle_t domain = nvtxDomainCreateA("example-domain");
    nvtxStringHandle_t io = nvtxDomainRegisterStringA(domain, "io");

    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0) {
        fputs("nvtx_example: cannot start the worker thread\n", stderr);
        return 1;
    }
    handoff = nvtxRangeStartA("handoff");
    pthread_mutex_lock(&lock);
    started = 1;
    pthread_cond_signal(&ready);
    pthread_mutex_unlock(&lock);

    for (int s = 0; s < STEPS; s++) {
        nvtxRangePushA("step");
        nvtxEventAttributes_t a = {0};
        a.version = NVTX_VERSION;
        a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = "forward";
        nvtxRangePushEx(&a);
        nvtxRangePushA("matmul");
        spin_us(300);
        nvtxRangePop();
        nvtxRangePushA("relu");
        spin_us(100);
        nvtxRangePop();
        nvtxRangePop();
        nvtxRangePushA("backward");
        spin_us(300);
        nvtxRangePop();
        nvtxMarkA("step done");
        nvtxRangePop();
    }

    nvtxEventAttributes_t d = {0};
    d.version = NVTX_VERSION;
    d.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    d.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    d.message.registered = io;
    nvtxDomainRangePushEx(domain, &d);
    spin_us(200);
    nvtxDomainRangePop(domain);
    d.messageType = NVTX_MESSAGE_TYPE_ASCII;
    d.message.ascii = "domain mark";
    nvtxDomainMarkEx(domain, &d);

    pthread_join(t, NULL);
    nvtxDomainDestroy(domain);
    printf("nvtx_example: %d steps done\n", STEPS);
    return 0;
}
