/* model: limits and defaults shared by the library and the termsight command (options.c). */
#ifndef TERMSIGHT_MODEL_OPTIONS_H
#define TERMSIGHT_MODEL_OPTIONS_H

#include <stdint.h>

#define TS_OUTPUT_DEFAULT       "./termsight-data" /* parent of run folders */
#define TS_SAMPLE_MS_MIN        1u
#define TS_SAMPLE_MS_MAX        3600000u /* an hour */
#define TS_SAMPLE_MS_DEFAULT    100u
#define TS_SECONDS_MAX          31536000u /* a year: TERMSIGHT_DELAY_S, TERMSIGHT_DURATION_S */
#define TS_STEP_PATTERN_DEFAULT "^(step|ProfilerStep#[0-9]+)"

/* A whole decimal number from min to max (no sign, nothing after it) into *out: 0, or -1. */
int options_parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *out);

/* A step window "A-B" (1 <= A <= B) into *from and *to: 0, or -1. */
int options_parse_steps(const char *text, uint64_t *from, uint64_t *to);

#endif
