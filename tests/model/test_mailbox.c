/* Control mailbox: a frontend's command, the collector's answer, refusals, cut arguments,
 * abandoned claims, and a real round trip between two processes. */
#include "model_test.h"

#include <sys/wait.h>

static ts_mailbox *mailbox_of(const segment *s)
{
    ts_mailbox *m = segment_mailbox(s);
    ck_assert_ptr_nonnull(m);
    return m;
}

/* The request sequence, loaded outside the assertions so that failures read plainly. */
static uint64_t req_of(ts_mailbox *m)
{
    return atomic_load(&m->req_seq);
}

static uint64_t send_ok(const segment *s, uint32_t cmd, const char *arg)
{
    uint64_t seq = 0;
    char *cause = NULL;
    ck_assert_msg(mailbox_send(s, cmd, arg, &seq, &cause) == 0, "send %u: %s", cmd,
                  cause ? cause : "?");
    free(cause);
    return seq;
}

static const struct {
    uint32_t cmd;
    const char *name;
} cmd_names[] = {
    {TS_CMD_START, "start"},
    {TS_CMD_STOP, "stop"},
    {TS_CMD_FLUSH, "flush"},
    {TS_CMD_MARK, "mark"},
    {TS_CMD_SNAPSHOT, "snapshot"},
    {TS_CMD_NONE, NULL},
    {6, NULL},
    {1000, NULL},
    {UINT32_MAX, NULL},
};

START_TEST(test_cmd_name)
{
    const char *got = mailbox_cmd_name(cmd_names[_i].cmd);
    if (cmd_names[_i].name)
        ck_assert_str_eq(got, cmd_names[_i].name);
    else
        ck_assert_ptr_null(got);
}
END_TEST

START_TEST(test_round_trip)
{
    pid_t pid = mt_pid(0);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    segment *fe = mt_attach(pid, 1); /* the frontend's own mapping */
    mailbox_state st = {0};
    uint64_t seq = 0;
    uint32_t cmd = 0;
    char arg[TS_MAILBOX_ARG];
    char msg[TS_MAILBOX_MSG];
    int32_t status = 99;

    /* Nothing waiting at first. */
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 0);

    uint64_t sent = send_ok(fe, TS_CMD_START, NULL);
    ck_assert_int_eq(mailbox_reply(fe, sent, &status, msg, sizeof msg), 0); /* pending */
    ck_assert_int_eq(status, 99);
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(seq, sent);
    ck_assert_uint_eq(cmd, TS_CMD_START);
    ck_assert_str_eq(arg, "");
    mailbox_answer(s, seq, 0, "collecting into /runs/a");
    ck_assert_int_eq(mailbox_reply(fe, sent, &status, msg, sizeof msg), 1);
    ck_assert_int_eq(status, 0);
    ck_assert_str_eq(msg, "collecting into /runs/a");
    /* Answered: not taken again. */
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 0);

    /* The next command, with an argument and an error answer; sequences move on. */
    uint64_t sent2 = send_ok(fe, TS_CMD_MARK, "epoch 3 \"done\"\n");
    ck_assert_uint_gt(sent2, sent);
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(seq, sent2);
    ck_assert_uint_eq(cmd, TS_CMD_MARK);
    ck_assert_str_eq(arg, "epoch 3 \"done\"\n");
    mailbox_answer(s, seq, -22, "not collecting: nothing to mark");
    ck_assert_int_eq(mailbox_reply(fe, sent2, &status, msg, sizeof msg), 1);
    ck_assert_int_eq(status, -22);
    ck_assert_str_eq(msg, "not collecting: nothing to mark");
    /* A short buffer gets a cut, terminated message; no buffer at all is fine too. */
    char small[8];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(mailbox_reply(fe, sent2, &status, small, sizeof small), 1);
    ck_assert_str_eq(small, "not col");
    ck_assert_int_eq(mailbox_reply(fe, sent2, &status, NULL, 0), 1);
    ck_assert_int_eq(status, -22);
    /* A sequence that was never sent is not answered. */
    ck_assert_int_eq(mailbox_reply(fe, sent2 + 2, &status, msg, sizeof msg), 0);

    /* Every command in turn. */
    for (uint32_t c = TS_CMD_START; c <= TS_CMD_MARK; c++) {
        uint64_t q = send_ok(fe, c, "x");
        ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
        ck_assert_uint_eq(seq, q);
        ck_assert_uint_eq(cmd, c);
        mailbox_answer(s, seq, (int32_t)c, mailbox_cmd_name(c));
        ck_assert_int_eq(mailbox_reply(fe, q, &status, msg, sizeof msg), 1);
        ck_assert_int_eq(status, (int32_t)c);
        ck_assert_str_eq(msg, mailbox_cmd_name(c));
    }
    segment_close(fe, 0);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_second_send_refused)
{
    pid_t pid = mt_pid(1);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    segment *fe1 = mt_attach(pid, 1), *fe2 = mt_attach(pid, 1);
    ts_mailbox *m = mailbox_of(s);
    uint64_t first = send_ok(fe1, TS_CMD_START, "first");

    uint64_t seq = 12345;
    char *cause = NULL;
    ck_assert_int_eq(mailbox_send(fe2, TS_CMD_STOP, "second", &seq, &cause), -1);
    ck_assert_msg(strstr(cause, "not been answered"), "%s", cause);
    free(cause);
    ck_assert_int_eq(mailbox_send(fe2, TS_CMD_STOP, "second", &seq, NULL), -1);
    /* The waiting command is untouched. */
    ck_assert_uint_eq(req_of(m), first);
    ck_assert_uint_eq(atomic_load(&m->cmd), TS_CMD_START);
    ck_assert_str_eq(m->arg, "first");

    mailbox_state st = {0};
    uint32_t cmd;
    char arg[TS_MAILBOX_ARG];
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(seq, first);
    ck_assert_str_eq(arg, "first");
    mailbox_answer(s, seq, 0, "ok");
    /* Once answered, the other frontend may send. */
    uint64_t second = send_ok(fe2, TS_CMD_STOP, "second");
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(seq, second);
    ck_assert_uint_eq(cmd, TS_CMD_STOP);
    segment_close(fe1, 0);
    segment_close(fe2, 0);
    segment_close(s, 1);
}
END_TEST

static const uint32_t unknown_cmds[] = {TS_CMD_NONE, 6, 255, UINT32_MAX};

START_TEST(test_unknown_command_refused)
{
    segment_config cfg = mt_config(mt_pid(2));
    segment *s = mt_create(&cfg);
    ts_mailbox *m = mailbox_of(s);
    uint64_t seq = 777;
    char *cause = NULL;
    ck_assert_int_eq(mailbox_send(s, unknown_cmds[_i], "x", &seq, &cause), -1);
    ck_assert_msg(strstr(cause, "unknown command"), "%s", cause);
    free(cause);
    ck_assert_uint_eq(req_of(m), 0);
    mailbox_state st = {0};
    uint32_t cmd;
    char arg[8];
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 0);
    /* And the mailbox still works. */
    uint64_t q = send_ok(s, TS_CMD_FLUSH, NULL);
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(seq, q);
    ck_assert_uint_eq(cmd, TS_CMD_FLUSH);
    segment_close(s, 1);
}
END_TEST

START_TEST(test_long_arg_and_message_cut)
{
    segment_config cfg = mt_config(mt_pid(3));
    segment *s = mt_create(&cfg);
    ts_mailbox *m = mailbox_of(s);
    char long_arg[1000];
    for (size_t i = 0; i < sizeof long_arg - 1; i++)
        long_arg[i] = (char)('a' + i % 26);
    long_arg[sizeof long_arg - 1] = 0;
    /* Dirty the mailbox first, so that a missing terminator would show. */
    memset(m->arg, 'Z', sizeof m->arg);
    memset(m->msg, 'Z', sizeof m->msg);

    uint64_t q = send_ok(s, TS_CMD_MARK, long_arg);
    ck_assert_int_eq(m->arg[TS_MAILBOX_ARG - 1], 0);
    mailbox_state st = {0};
    uint64_t seq;
    uint32_t cmd;
    char arg[TS_MAILBOX_ARG + 64];
    memset(arg, 'Q', sizeof arg);
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(strlen(arg), TS_MAILBOX_ARG - 1);
    ck_assert_int_eq(memcmp(arg, long_arg, TS_MAILBOX_ARG - 1), 0);
    /* A smaller buffer than the mailbox's: cut again, terminated. */
    char tiny[6];
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, tiny, sizeof tiny), 1);
    ck_assert_str_eq(tiny, "abcde");

    mailbox_answer(s, q, 0, long_arg);
    ck_assert_int_eq(m->msg[TS_MAILBOX_MSG - 1], 0);
    char msg[TS_MAILBOX_MSG + 64];
    memset(msg, 'Q', sizeof msg);
    int32_t status;
    ck_assert_int_eq(mailbox_reply(s, q, &status, msg, sizeof msg), 1);
    ck_assert_uint_eq(strlen(msg), TS_MAILBOX_MSG - 1);
    ck_assert_int_eq(memcmp(msg, long_arg, TS_MAILBOX_MSG - 1), 0);

    /* A short argument after a long one leaves no trace of it. */
    q = send_ok(s, TS_CMD_MARK, "hi");
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_str_eq(arg, "hi");
    mailbox_answer(s, q, 0, NULL);
    ck_assert_int_eq(mailbox_reply(s, q, &status, msg, sizeof msg), 1);
    ck_assert_str_eq(msg, "");
    segment_close(s, 1);
}
END_TEST

/* A frontend that died between claiming the mailbox and publishing its command. */
START_TEST(test_abandoned_claim_released)
{
    pid_t pid = mt_pid(4);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    segment *fe = mt_attach(pid, 1);
    ts_mailbox *m = mailbox_of(fe);
    mailbox_state st = {0};
    uint64_t seq;
    uint32_t cmd;
    char arg[TS_MAILBOX_ARG];
    int32_t status;
    char msg[TS_MAILBOX_MSG];

    /* One command answered first, so the claim starts from a later sequence. */
    uint64_t q = send_ok(fe, TS_CMD_START, NULL);
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    mailbox_answer(s, seq, 0, "ok");

    /* The dead frontend's claim: req_seq even -> odd, and nothing more. */
    uint64_t even = q;
    ck_assert(atomic_compare_exchange_strong(&m->req_seq, &even, q + 1));
    atomic_store(&m->cmd, TS_CMD_STOP);

    char *cause = NULL;
    ck_assert_int_eq(mailbox_send(fe, TS_CMD_FLUSH, NULL, &seq, &cause), -1);
    ck_assert_msg(strstr(cause, "another frontend"), "%s", cause);
    free(cause);

    /* Not released early: half the polls leave it alone, and never hand out the half-written
     * command. */
    for (int i = 0; i < TS_MAILBOX_STALE_POLLS / 2; i++)
        ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 0);
    ck_assert_uint_eq(req_of(m), q + 1);

    /* Released within the promised number of polls (one more to notice it). */
    int polls = TS_MAILBOX_STALE_POLLS / 2;
    while (req_of(m) == q + 1 && polls <= TS_MAILBOX_STALE_POLLS + 1) {
        ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 0);
        polls++;
    }
    ck_assert_msg(req_of(m) == q + 2, "still claimed after %d polls", polls);
    ck_assert_int_ge(polls, TS_MAILBOX_STALE_POLLS);

    /* The abandoned sequence has an answer saying so, and is not taken as a command. */
    ck_assert_int_eq(mailbox_reply(fe, q + 2, &status, msg, sizeof msg), 1);
    ck_assert_int_lt(status, 0);
    ck_assert_msg(strstr(msg, "abandoned"), "%s", msg);
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 0);

    /* The dead frontend's late publish (had it only been slow) fails instead of posting. */
    uint64_t claimed = q + 1;
    ck_assert(!atomic_compare_exchange_strong(&m->req_seq, &claimed, q + 2));

    /* A later send works. */
    uint64_t later = send_ok(fe, TS_CMD_FLUSH, "after");
    ck_assert_uint_gt(later, q + 2);
    ck_assert_int_eq(mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg), 1);
    ck_assert_uint_eq(seq, later);
    ck_assert_uint_eq(cmd, TS_CMD_FLUSH);
    ck_assert_str_eq(arg, "after");
    mailbox_answer(s, seq, 0, "flushed");
    ck_assert_int_eq(mailbox_reply(fe, later, &status, msg, sizeof msg), 1);
    ck_assert_str_eq(msg, "flushed");
    segment_close(fe, 0);
    segment_close(s, 1);
}
END_TEST

/* Exit codes of the child frontend. */
enum {
    CHILD_OK = 0,
    CHILD_ATTACH = 10,
    CHILD_SEND = 11,
    CHILD_TIMEOUT = 12,
    CHILD_STATUS = 13,
    CHILD_MESSAGE = 14,
};

static int child_frontend(pid_t pid)
{
    segment *s = NULL;
    if (segment_attach(pid, 1, &s, NULL) != 0)
        return CHILD_ATTACH;
    uint64_t seq;
    if (mailbox_send(s, TS_CMD_START, "from the child", &seq, NULL) != 0)
        return CHILD_SEND;
    int32_t status = 1;
    char msg[TS_MAILBOX_MSG];
    uint64_t t0 = mt_now_ns();
    while (!mailbox_reply(s, seq, &status, msg, sizeof msg)) {
        if (mt_now_ns() - t0 > MT_POLL_LIMIT_NS)
            return CHILD_TIMEOUT;
        mt_pause();
    }
    if (status != 0)
        return CHILD_STATUS;
    if (strcmp(msg, "started for the child") != 0)
        return CHILD_MESSAGE;
    segment_close(s, 0);
    return CHILD_OK;
}

START_TEST(test_cross_process)
{
    pid_t pid = mt_pid(5);
    segment_config cfg = mt_config(pid);
    segment *s = mt_create(&cfg);
    fflush(NULL);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0)
        _exit(child_frontend(pid));

    mailbox_state st = {0};
    uint64_t seq = 0;
    uint32_t cmd = 0;
    char arg[TS_MAILBOX_ARG];
    int status = 0, reaped = 0;
    uint64_t t0 = mt_now_ns();
    while (!mailbox_take(s, &st, &seq, &cmd, arg, sizeof arg)) {
        /* A child that died early ends the wait with its own exit code. */
        pid_t r = waitpid(child, &status, WNOHANG);
        ck_assert_int_ge(r, 0);
        if (r == child) {
            reaped = 1;
            break;
        }
        ck_assert_msg(mt_now_ns() - t0 < MT_POLL_LIMIT_NS, "no command from the child");
        mt_pause();
    }
    if (!reaped) {
        ck_assert_uint_eq(cmd, TS_CMD_START);
        ck_assert_str_eq(arg, "from the child");
        mailbox_answer(s, seq, 0, "started for the child");
        ck_assert_int_eq(waitpid(child, &status, 0), child);
    }
    ck_assert_msg(WIFEXITED(status), "child did not exit normally (status %#x)", status);
    ck_assert_msg(WEXITSTATUS(status) == CHILD_OK, "child exited with %d", WEXITSTATUS(status));
    ck_assert(!reaped);
    segment_close(s, 1);
}
END_TEST

static Suite *mailbox_suite(void)
{
    Suite *s = suite_create("mailbox");
    TCase *tc = tcase_create("mailbox");
    tcase_add_unchecked_fixture(tc, NULL, mt_unlink_band);
    tcase_add_loop_test(tc, test_cmd_name, 0, sizeof cmd_names / sizeof cmd_names[0]);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_second_send_refused);
    tcase_add_loop_test(tc, test_unknown_command_refused, 0,
                        sizeof unknown_cmds / sizeof unknown_cmds[0]);
    tcase_add_test(tc, test_long_arg_and_message_cut);
    tcase_add_test(tc, test_abandoned_claim_released);
    tcase_add_test(tc, test_cross_process);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return mt_run(mailbox_suite());
}
