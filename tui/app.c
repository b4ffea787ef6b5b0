/* app: the state of the attached monitor and its message line. */
#include "app.h"

#include <stdarg.h>
#include <stdio.h>

void app_say(app *a, int role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->message, sizeof a->message, fmt, ap);
    va_end(ap);
    a->message_role = role;
    a->message_ns = tsclock_monotonic_ns();
}

/* How long a message stays in the header (an error longer), before the run folder is back. */
#define MESSAGE_NEWS_NS  20000000000ull
#define MESSAGE_ERROR_NS 60000000000ull

const char *app_message_now(const app *a, uint64_t now)
{
    uint64_t keep = a->message_role == ROLE_ERROR ? MESSAGE_ERROR_NS : MESSAGE_NEWS_NS;
    return a->message[0] && now - a->message_ns < keep ? a->message : NULL;
}

int app_is_job(const app *a)
{
    return ranks_table_of(a->rk)->job[0] != 0;
}

void app_fail(app *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->last_command, sizeof a->last_command, fmt, ap);
    va_end(ap);
    a->last_failed = 1;
    app_say(a, ROLE_ERROR, "%s", a->last_command);
}
