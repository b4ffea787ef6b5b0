/* mailbox: commands from a frontend to the collector, through the segment's control
 * object.
 *
 * One request at a time. A frontend claims the mailbox by moving req_seq from an even, answered
 * value to odd, writes the command, and publishes it by moving req_seq to the next even value.
 * The collector answers by writing status and message and storing ack_seq = req_seq. A frontend
 * that dies between claim and publish leaves req_seq odd; the collector releases such a claim
 * after TS_MAILBOX_STALE_POLLS polls, and the late publish of a frontend that was merely slow
 * then fails its compare-and-swap instead of corrupting the next command. */
#include "model.h"

#include <string.h>

static ts_mailbox *mailbox_of(const segment *s)
{
    return segment_mailbox(s);
}

const char *mailbox_cmd_name(uint32_t cmd)
{
    switch (cmd) {
    case TS_CMD_START:
        return "start";
    case TS_CMD_STOP:
        return "stop";
    case TS_CMD_FLUSH:
        return "flush";
    case TS_CMD_MARK:
        return "mark";
    case TS_CMD_SNAPSHOT:
        return "snapshot";
    default:
        return NULL;
    }
}

int mailbox_send(const segment *s, uint32_t cmd, const char *arg, uint64_t *seq, char **cause)
{
    ts_mailbox *m = mailbox_of(s);
    if (!m)
        return cause_set(cause, "segment has no mailbox");
    if (!mailbox_cmd_name(cmd))
        return cause_set(cause, "unknown command %u", cmd);
    uint64_t req = atomic_load_explicit(&m->req_seq, memory_order_acquire);
    uint64_t ack = atomic_load_explicit(&m->ack_seq, memory_order_acquire);
    if (req & 1)
        return cause_set(cause, "another frontend is sending a command");
    if (ack != req)
        return cause_set(cause, "the previous command has not been answered yet");
    if (!atomic_compare_exchange_strong_explicit(&m->req_seq, &req, req + 1, memory_order_acq_rel,
                                                 memory_order_relaxed))
        return cause_set(cause, "another frontend is sending a command");
    atomic_store_explicit(&m->cmd, cmd, memory_order_relaxed);
    size_t n = arg ? strnlen(arg, TS_MAILBOX_ARG - 1) : 0;
    if (n)
        memcpy(m->arg, arg, n);
    m->arg[n] = 0;
    uint64_t claimed = req + 1;
    if (!atomic_compare_exchange_strong_explicit(&m->req_seq, &claimed, req + 2,
                                                 memory_order_release, memory_order_relaxed))
        return cause_set(cause, "the collector released our claim before it was complete");
    *seq = req + 2;
    return 0;
}

int mailbox_reply(const segment *s, uint64_t seq, int32_t *status, char *msg, size_t msglen)
{
    ts_mailbox *m = mailbox_of(s);
    if (!m || atomic_load_explicit(&m->ack_seq, memory_order_acquire) != seq)
        return 0;
    *status = atomic_load_explicit(&m->status, memory_order_relaxed);
    if (msg && msglen) {
        size_t n = strnlen(m->msg, TS_MAILBOX_MSG - 1);
        if (n >= msglen)
            n = msglen - 1;
        memcpy(msg, m->msg, n);
        msg[n] = 0;
    }
    /* A later command's answer may have overwritten the message while we copied it. */
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&m->ack_seq, memory_order_relaxed) != seq && msg && msglen) {
        strncpy(msg, "(answer overwritten by a later command)", msglen - 1);
        msg[msglen - 1] = 0; /* strncpy leaves a cut copy unterminated */
    }
    return 1;
}

int mailbox_take(const segment *s, mailbox_state *st, uint64_t *seq, uint32_t *cmd, char *arg,
                 size_t arglen)
{
    ts_mailbox *m = mailbox_of(s);
    if (!m)
        return 0;
    uint64_t req = atomic_load_explicit(&m->req_seq, memory_order_acquire);
    if (req & 1) {
        if (st->odd_seq != req) {
            st->odd_seq = req;
            st->polls = 0;
        } else if (++st->polls >= TS_MAILBOX_STALE_POLLS) {
            uint64_t expect = req;
            if (atomic_compare_exchange_strong_explicit(&m->req_seq, &expect, req + 1,
                                                        memory_order_acq_rel, memory_order_relaxed))
                mailbox_answer(s, req + 1, -1, "command abandoned by its frontend");
            st->odd_seq = 0;
            st->polls = 0;
        }
        return 0;
    }
    st->odd_seq = 0;
    if (req == atomic_load_explicit(&m->ack_seq, memory_order_relaxed))
        return 0;
    *seq = req;
    *cmd = atomic_load_explicit(&m->cmd, memory_order_relaxed);
    if (arg && arglen) {
        size_t n = strnlen(m->arg, TS_MAILBOX_ARG - 1);
        if (n >= arglen)
            n = arglen - 1;
        memcpy(arg, m->arg, n);
        arg[n] = 0;
    }
    return 1;
}

void mailbox_answer(const segment *s, uint64_t seq, int32_t status, const char *msg)
{
    ts_mailbox *m = mailbox_of(s);
    if (!m)
        return;
    atomic_store_explicit(&m->status, status, memory_order_relaxed);
    size_t n = msg ? strnlen(msg, TS_MAILBOX_MSG - 1) : 0;
    if (n)
        memcpy(m->msg, msg, n);
    m->msg[n] = 0;
    atomic_store_explicit(&m->ack_seq, seq, memory_order_release);
}
