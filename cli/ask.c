/* ask: a command to running collectors through their segments' mailboxes, and their answers. */
#include "cli.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ASK_STOPPED_MS 2000 /* a process stopped this long is not waited for */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Whether the state of /proc/PID/stat is one in which no command is answered. */
static const char *not_answering(char state)
{
    switch (state) {
    case 'T':
    case 't':
        return "stopped";
    case 'Z':
    case 'X':
        return "exited";
    default:
        return NULL;
    }
}

/* Gives up on target i's answer when its process has been stopped (or has exited) for
 * ASK_STOPPED_MS: *since_ms notes when it was first seen so. 1 when given up. */
static int ask_give_up(const segment_info *t, cli_answer *a, uint64_t now, uint64_t start,
                       uint64_t *since_ms)
{
    char state = segment_proc_state(t->pid);
    const char *why = not_answering(state);
    if (!why) {
        *since_ms = 0;
        return 0;
    }
    if (!*since_ms)
        *since_ms = now;
    if (now - *since_ms < ASK_STOPPED_MS)
        return 0;
    snprintf(a->error, sizeof a->error, "did not answer in %.1f s: %s (state %c)",
             (double)(now - start) / 1000, why, state);
    return 1;
}

void cli_ask(const segment_info *targets, size_t n, uint32_t cmd, const char *arg, int wait_ms,
             cli_answer *out)
{
    segment **segs = calloc(n ? n : 1, sizeof *segs);
    uint64_t *seqs = calloc(n ? n : 1, sizeof *seqs);
    uint64_t *stopped = calloc(n ? n : 1, sizeof *stopped); /* ms since seen stopped; 0: not */
    size_t waiting = 0;
    for (size_t i = 0; i < n; i++) {
        cli_answer *a = &out[i];
        *a = (cli_answer){.pid = targets[i].pid};
        char *cause = NULL;
        if (!segs || !seqs || !stopped)
            snprintf(a->error, sizeof a->error, "out of memory");
        else if (segment_attach_name(targets[i].shm_name, 1, &segs[i], &cause) != 0 ||
                 mailbox_send(segs[i], cmd, arg, &seqs[i], &cause) != 0)
            snprintf(a->error, sizeof a->error, "%.200s", cause ? cause : "cannot attach");
        else
            waiting++;
        free(cause);
    }
    /* Every collector answers from its loop, within milliseconds unless it is writing. */
    uint64_t start = now_ms(), deadline = start + (uint64_t)(wait_ms > 0 ? wait_ms : 0);
    while (waiting) {
        uint64_t now = now_ms();
        for (size_t i = 0; i < n; i++) {
            cli_answer *a = &out[i];
            if (!segs || !segs[i] || a->answered || a->error[0])
                continue;
            if (mailbox_reply(segs[i], seqs[i], &a->status, a->msg, sizeof a->msg)) {
                a->answered = 1;
                waiting--;
            } else if (ask_give_up(&targets[i], a, now, start, &stopped[i])) {
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
    free(stopped);
}
