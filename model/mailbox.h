/* model: the control mailbox (mailbox.c). */
#ifndef TERMSIGHT_MODEL_MAILBOX_H
#define TERMSIGHT_MODEL_MAILBOX_H

#include "segment.h"

enum ts_cmd {
    TS_CMD_NONE = 0,
    TS_CMD_START = 1,
    TS_CMD_STOP = 2,
    TS_CMD_FLUSH = 3,
    TS_CMD_MARK = 4,     /* arg: the mark's text */
    TS_CMD_SNAPSHOT = 5, /* flight recorder: write the events kept; arg: why; answer: the folder */
};

#define TS_MAILBOX_ARG 256
#define TS_MAILBOX_MSG 256

/* The mailbox, in the segment's control object. req_seq is even when stable and odd while a
 * frontend writes a command; the collector answers by setting ack_seq to the request's sequence. */
struct ts_mailbox {
    _Atomic uint64_t req_seq;
    _Atomic uint64_t ack_seq;
    _Atomic uint32_t cmd;
    _Atomic int32_t status;
    char arg[TS_MAILBOX_ARG];
    char msg[TS_MAILBOX_MSG];
};

/* The collector's memory of a frontend's unfinished claim, to release it when abandoned. */
typedef struct mailbox_state {
    uint64_t odd_seq;
    uint32_t polls;
} mailbox_state;

/* Polls after which an unfinished claim counts as abandoned. */
#define TS_MAILBOX_STALE_POLLS 200

/* "start", "stop", "flush", "mark", "snapshot", or NULL. */
const char *mailbox_cmd_name(uint32_t cmd);

/* Frontend: posts cmd. Fails when another frontend's command is still unanswered. */
int mailbox_send(const segment *s, uint32_t cmd, const char *arg, uint64_t *seq, char **cause);

/* Frontend: 1 when seq has been answered (status: 0 or a negative termsight error code; msg
 * copied, NUL-terminated), 0 while pending. */
int mailbox_reply(const segment *s, uint64_t seq, int32_t *status, char *msg, size_t msglen);

/* Collector: 1 and the command when a new one is waiting, else 0. A claim abandoned by a frontend
 * that died while writing is released after TS_MAILBOX_STALE_POLLS polls. */
int mailbox_take(const segment *s, mailbox_state *st, uint64_t *seq, uint32_t *cmd, char *arg,
                 size_t arglen);

/* Collector: answers seq. */
void mailbox_answer(const segment *s, uint64_t seq, int32_t status, const char *msg);

#endif
