/* Instantiates the LTTng-UST probe of lttng_tp.h (the peer in the benchmark). */
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#define LTTNG_UST_TRACEPOINT_DEFINE
#include "lttng_tp.h"
