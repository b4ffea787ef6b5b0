/* session_options: a session's options, their defaults, the environment variables that set
 * them, and their checks (termsight_options_init, session_check_options). */
#include "collectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_LANE_EVENTS (1u << 24) /* the most a ring grows to */
#define DEFAULT_LANE_BUDGET 256u       /* MiB: a ring of 2^20 events and the one before it */
#define LANE_BUDGET_MAX     65536u
#define FLIGHT_MB_DEFAULT   64u /* the flight recorder's: a million events */
#define FLIGHT_MB_MAX       65536u
#define DEFAULT_MAX_THREADS 64
#define DEFAULT_TIMELINE_MB 500

/* Environment values that do not parse become bad (a value create refuses, naming the
 * variable). */
static void env_u32(const char *name, uint32_t *field, uint32_t bad)
{
    const char *v = getenv(name);
    if (v && options_parse_u32(v, 0, UINT32_MAX, field) != 0)
        *field = bad;
}

void termsight_options_init(termsight_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->output_path = TS_OUTPUT_DEFAULT;
    o->start_collecting = 1;
    o->lane_events = DEFAULT_LANE_EVENTS;
    o->lane_budget_mb = DEFAULT_LANE_BUDGET;
    o->max_threads = DEFAULT_MAX_THREADS;
    o->sample_interval_ms = TS_SAMPLE_MS_DEFAULT;
    o->timeline_limit_mb = DEFAULT_TIMELINE_MB;
    o->rank = o->local_rank = o->world_size = -1; /* job and ranks: from the environment */

    const char *v;
    if ((v = getenv("TERMSIGHT_OUTPUT")) && *v)
        o->output_path = v;
    if ((v = getenv("TERMSIGHT_START")))
        o->start_collecting = !(v[0] == '0' || !strcmp(v, "no") || !strcmp(v, "false"));
    env_u32("TERMSIGHT_LANE_EVENTS", &o->lane_events, 0);
    env_u32("TERMSIGHT_LANE_BUDGET_MB", &o->lane_budget_mb, UINT32_MAX);
    env_u32("TERMSIGHT_MAX_THREADS", &o->max_threads, 0);
    env_u32("TERMSIGHT_SAMPLE_MS", &o->sample_interval_ms, 0);
    env_u32("TERMSIGHT_TIMELINE_LIMIT_MB", &o->timeline_limit_mb, 0);
    if ((v = getenv("TERMSIGHT_FLIGHT")) && *v)
        o->flight_mb =
            v[0] == '0' || !strcmp(v, "no") || !strcmp(v, "false") ? 0 : FLIGHT_MB_DEFAULT;
    env_u32("TERMSIGHT_FLIGHT_MB", &o->flight_mb, UINT32_MAX);
    if ((v = getenv("PROFILING_FP_START")) && *v)
        o->fp_start_op = v;
    if ((v = getenv("PROFILING_BP_END")) && *v)
        o->bp_end_op = v;
}

static int bad_option(const char *field, const char *env, uint32_t value, const char *want)
{
    const char *v = getenv(env);
    if (v)
        return session_fail(TERMSIGHT_E_INVALID, "%s=%s is invalid: %s", env, v, want);
    return session_fail(TERMSIGHT_E_INVALID, "option %s=%u is invalid: %s", field, value, want);
}

int session_check_options(const termsight_options *o)
{
    /* Programs built before the job fields were added pass the shorter struct: accepted, and
     * read that far (termsight_session_create). */
    if (o->struct_size < offsetof(termsight_options, job))
        return session_fail(TERMSIGHT_E_INVALID,
                            "termsight_options not initialized with termsight_options_init");
    if (o->struct_size >= sizeof *o &&
        (o->rank < -1 || o->local_rank < -1 || o->world_size < -1 || o->world_size == 0))
        return session_fail(TERMSIGHT_E_INVALID,
                            "option rank, local_rank or world_size is invalid: -1 (from the "
                            "environment) or a rank from 0, a world size from 1");
    uint32_t le = o->lane_events;
    if (le < 64 || le > (1u << 24) || (le & (le - 1)))
        return bad_option("lane_events", "TERMSIGHT_LANE_EVENTS", le,
                          "a power of two from 64 to 16777216");
    if (o->struct_size >= offsetof(termsight_options, lane_budget_mb) + sizeof o->lane_budget_mb &&
        o->lane_budget_mb > LANE_BUDGET_MAX)
        return bad_option("lane_budget_mb", "TERMSIGHT_LANE_BUDGET_MB", o->lane_budget_mb,
                          "from 0 to 65536 MiB");
    if (o->max_threads < 1 || o->max_threads > 4096)
        return bad_option("max_threads", "TERMSIGHT_MAX_THREADS", o->max_threads, "from 1 to 4096");
    if (o->sample_interval_ms < TS_SAMPLE_MS_MIN || o->sample_interval_ms > TS_SAMPLE_MS_MAX)
        return bad_option("sample_interval_ms", "TERMSIGHT_SAMPLE_MS", o->sample_interval_ms,
                          "from 1 to 3600000 ms");
    if (o->timeline_limit_mb < 1 || o->timeline_limit_mb > 1000000)
        return bad_option("timeline_limit_mb", "TERMSIGHT_TIMELINE_LIMIT_MB", o->timeline_limit_mb,
                          "from 1 to 1000000 MB");
    if (o->struct_size >= offsetof(termsight_options, flight_mb) + sizeof o->flight_mb &&
        o->flight_mb > FLIGHT_MB_MAX)
        return bad_option("flight_mb", "TERMSIGHT_FLIGHT_MB", o->flight_mb, "from 0 to 65536 MiB");
    if (!o->output_path || !*o->output_path)
        return session_fail(TERMSIGHT_E_INVALID, "output_path is empty");
    return TERMSIGHT_OK;
}
