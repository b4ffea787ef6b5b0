/* ask: a command to running collectors through their segments' mailboxes, and their answers. */
#include "cli.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void cli_ask(const segment_info *targets, size_t n, uint32_t cmd, const char *arg, int wait_ms,
             cli_answer *out)
{
    segment **segs = calloc(n ? n : 1, sizeof *segs);
    uint64_t *seqs = calloc(n ? n : 1, sizeof *seqs);
    size_t waiting = 0;
    for (size_t i = 0; i < n; i++) {
        cli_answer *a = &out[i];
        *a = (cli_answer){.pid = targets[i].pid};
        char *cause = NULL;
        if (!segs || !seqs)
            snprintf(a->error, sizeof a->error, "out of memory");
        else if (segment_attach_name(targets[i].shm_name, 1, &segs[i], &cause) != 0 ||
                 mailbox_send(segs[i], cmd, arg, &seqs[i], &cause) != 0)
            snprintf(a->error, sizeof a->error, "%.200s", cause ? cause : "cannot attach");
        else
            waiting++;
        free(cause);
    }
    /* Every collector answers from its loop, within milliseconds unless it is writing. */
    uint64_t deadline = now_ms() + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
    while (waiting) {
        for (size_t i = 0; i < n; i++) {
            cli_answer *a = &out[i];
            if (!segs || !segs[i] || a->answered || a->error[0])
                continue;
            if (mailbox_reply(segs[i], seqs[i], &a->status, a->msg, sizeof a->msg)) {
                a->answered = 1;
                waiting--;
            }
        }
        if (!waiting)
            break;
        if (now_ms() >= deadline) {
            for (size_t i = 0; i < n; i++)
                if (segs && segs[i] && !out[i].answered && !out[i].error[0])
                    snprintf(out[i].error, sizeof out[i].error,
                             "no answer within %d ms (its process may be stopped, or busy)",
                             wait_ms);
            break;
        }
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    for (size_t i = 0; segs && i < n; i++)
        if (segs[i])
            segment_close(segs[i], 0);
    free(segs);
    free(seqs);
}
