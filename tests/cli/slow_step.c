/* slow_step: a training loop whose step is steady but for one, for the flight recorder's tests.
 *
 *   slow_step STEPS SLOW FACTOR STEP_MS [HANG_AFTER [OPS [SLOW2 FACTOR2]]]
 *
 * STEPS steps of STEP_MS milliseconds each (a "forward" and a "backward" operator, sleeping), step
 * SLOW (1-based; 0: none) FACTOR times as long (its "backward" longer). HANG_AFTER (optional):
 * after that many steps, the next step begins and never ends (the process sleeps until killed); 0:
 * never. OPS (optional): that many more operators a step ("tiny", inside "forward"). SLOW2 FACTOR2:
 * a second slow step. Prints "step N ms" for the slow steps as the program measured them. */
#include "termsight/termsight.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void sleep_ms(double ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (time_t)(ms / 1000) * 1000) * 1e6)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr,
                "usage: slow_step STEPS SLOW FACTOR STEP_MS [HANG_AFTER [OPS [SLOW2 FACTOR2]]]\n");
        return 2;
    }
    int steps = atoi(argv[1]), slow = atoi(argv[2]);
    double factor = atof(argv[3]), step_ms = atof(argv[4]);
    int hang_after = argc > 5 ? atoi(argv[5]) : 0, ops = argc > 6 ? atoi(argv[6]) : 0;
    int slow2 = argc > 8 ? atoi(argv[7]) : 0;
    double factor2 = argc > 8 ? atof(argv[8]) : 1;
    for (int i = 1; i <= steps; i++) {
        double t = now_ms();
        termsight_step_begin();
        if (hang_after && i > hang_after) {
            termsight_range_begin("wait_for_data", "DataLoader");
            for (;;)
                sleep_ms(1000);
        }
        termsight_range_begin("forward", "Forward");
        for (int k = 0; k < ops; k++) {
            termsight_range_begin("tiny", "Tiny");
            termsight_range_end();
        }
        sleep_ms(step_ms / 2);
        termsight_range_end();
        termsight_range_begin("backward", "Backward");
        double f = i == slow ? factor : i == slow2 ? factor2 : 1;
        sleep_ms(step_ms * f - step_ms / 2);
        termsight_range_end();
        termsight_step_end();
        if (i == slow || i == slow2)
            printf("step %d %.1f ms\n", i, now_ms() - t);
    }
    return 0;
}
