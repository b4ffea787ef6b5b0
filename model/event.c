/* event: names of the event kinds and collector states, shared by every view. */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>

static const char *const kind_names[TS_KIND__COUNT] = {
    [TS_KIND_NONE] = "none",
    [TS_KIND_OP_RANGE] = "op",
    [TS_KIND_KERNEL] = "kernel",
    [TS_KIND_MEMCPY] = "memcpy",
    [TS_KIND_MEMSET] = "memset",
    [TS_KIND_DEVMEM_ALLOC] = "devmem_alloc",
    [TS_KIND_DEVMEM_FREE] = "devmem_free",
    [TS_KIND_CUDA_API] = "cuda_api",
    [TS_KIND_NVTX_RANGE] = "nvtx_range",
    [TS_KIND_NVTX_MARK] = "nvtx_mark",
    [TS_KIND_STEP_BEGIN] = "step_begin",
    [TS_KIND_STEP_END] = "step_end",
    [TS_KIND_PHASE] = "phase",
    [TS_KIND_QUEUE_SAMPLE] = "queue",
    [TS_KIND_QUEUE_INFO] = "queue_info",
    [TS_KIND_COUNTER] = "counter",
    [TS_KIND_CPU_MACHINE] = "cpu_machine",
    [TS_KIND_CPU_PROCESS] = "cpu_process",
    [TS_KIND_CPU_THREAD] = "cpu_thread",
    [TS_KIND_HOST_MEMORY] = "host_memory",
    [TS_KIND_COMM_OP] = "comm",
    [TS_KIND_LOST] = "lost",
    [TS_KIND_MARK] = "mark",
    [TS_KIND_SYNC] = "sync",
    [TS_KIND_THREAD_NAME] = "thread_name",
    [TS_KIND_COLLECT_START] = "collect_start",
    [TS_KIND_COLLECT_STOP] = "collect_stop",
    [TS_KIND_HOST_ALLOC] = "host_alloc",
    [TS_KIND_HOST_FREE] = "host_free",
    [TS_KIND_CONFIG] = "config",
    [TS_KIND_CPU_CHILD] = "cpu_child",
};

const char *event_kind_name(uint32_t kind)
{
    if (kind < TS_KIND__COUNT && kind_names[kind])
        return kind_names[kind];
    return "unknown";
}

static const char *const state_names[] = {
    [TS_STATE_IDLE] = "idle",
    [TS_STATE_COLLECTING] = "collecting",
    [TS_STATE_STOPPED] = "stopped",
    [TS_STATE_ENDED] = "ended",
};

const char *state_name(uint32_t state)
{
    if (state < sizeof(state_names) / sizeof(state_names[0]))
        return state_names[state];
    return "unknown";
}

int cause_set(char **cause, const char *fmt, ...)
{
    if (!cause)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(cause, fmt, ap) < 0)
        *cause = NULL;
    va_end(ap);
    return -1;
}
