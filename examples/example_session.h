/* example_session: how the example trainers end their profiler session: flushed, then closed,
 * with its run folder and event counts said. Header-only (a static function) so each example
 * stays one program. */
#ifndef TERMSIGHT_EXAMPLES_EXAMPLE_SESSION_H
#define TERMSIGHT_EXAMPLES_EXAMPLE_SESSION_H

#include <termsight/termsight.h>

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

/* Ends session (NULL: the run was not profiled) after saying where it recorded and how much;
 * program prefixes the error messages. Returns the exit status: 0, or 1 when the session could
 * not be closed. */
static int example_session_end(const char *program, termsight_session *session)
{
    if (!session) {
        puts("run folder: none (not profiled)");
        return 0;
    }
    /* Flush first so that the counts include every event emitted before. */
    if (termsight_flush(session) != TERMSIGHT_OK)
        fprintf(stderr, "%s: flush: %s\n", program, termsight_last_error());
    char folder[4096];
    snprintf(folder, sizeof(folder), "%s", termsight_run_folder(session));
    uint64_t recorded = termsight_events_recorded(session);
    uint64_t dropped = termsight_events_dropped(session);
    if (termsight_session_destroy(session) != TERMSIGHT_OK) {
        fprintf(stderr, "%s: closing the session: %s\n", program, termsight_last_error());
        return 1;
    }
    /* The recording starts with the first collection window: with --no-start and no start
     * command, there is none. */
    printf("run folder: %s%s\n", folder,
           access(folder, F_OK) == 0 ? "" : " (not created: nothing was collected)");
    printf("events: %llu recorded, %llu dropped\n", (unsigned long long)recorded,
           (unsigned long long)dropped);
    return 0;
}

#endif
