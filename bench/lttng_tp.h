/* The LTTng-UST peer of the benchmark: tracepoints carrying the same 64 bytes as termsight's
 * ts_event (kind, flags, tid, device, aux, name, type, begin, end, corr, v0, v1). LTTng adds its
 * own header and timestamp. "event" is enabled by bench/run.sh's session; "event_off" never is
 * (the disabled tracepoint, measured in the same run). */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER termsight_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./lttng_tp.h"

#if !defined(TERMSIGHT_BENCH_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define TERMSIGHT_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>

/* clang-format off */
LTTNG_UST_TRACEPOINT_EVENT_CLASS(
    termsight_bench, record,
    LTTNG_UST_TP_ARGS(uint16_t, kind, uint16_t, flags, uint32_t, tid, uint32_t, name,
                      uint64_t, begin_ns, uint64_t, end_ns, uint64_t, v0),
    LTTNG_UST_TP_FIELDS(
        lttng_ust_field_integer(uint16_t, kind, kind)
        lttng_ust_field_integer(uint16_t, flags, flags)
        lttng_ust_field_integer(uint32_t, tid, tid)
        lttng_ust_field_integer(uint32_t, device, 0xffffffffu)
        lttng_ust_field_integer(uint32_t, aux, 0)
        lttng_ust_field_integer(uint32_t, name, name)
        lttng_ust_field_integer(uint32_t, type, 0)
        lttng_ust_field_integer(uint64_t, begin_ns, begin_ns)
        lttng_ust_field_integer(uint64_t, end_ns, end_ns)
        lttng_ust_field_integer(uint64_t, corr, 0)
        lttng_ust_field_integer(uint64_t, v0, v0)
        lttng_ust_field_integer(uint64_t, v1, 0)))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(
    termsight_bench, record, termsight_bench, event,
    LTTNG_UST_TP_ARGS(uint16_t, kind, uint16_t, flags, uint32_t, tid, uint32_t, name,
                      uint64_t, begin_ns, uint64_t, end_ns, uint64_t, v0))

LTTNG_UST_TRACEPOINT_EVENT_INSTANCE(
    termsight_bench, record, termsight_bench, event_off,
    LTTNG_UST_TP_ARGS(uint16_t, kind, uint16_t, flags, uint32_t, tid, uint32_t, name,
                      uint64_t, begin_ns, uint64_t, end_ns, uint64_t, v0))
/* clang-format on */

#endif

#include <lttng/tracepoint-event.h>
