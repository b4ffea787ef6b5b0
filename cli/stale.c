/* stale: the segment a session leaves when its process ends without closing it (a signal,
 * _exit): what its lanes still held goes into its recording, then the segment is removed. */
#include "cli.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_stale_session(pid_t pid, const char *why, char *recovered, size_t cap)
{
    recovered[0] = 0;
    segment *seg;
    char *cause = NULL;
    int rc = 0;
    if (segment_attach(pid, 0, &seg, &cause) == 0) {
        char dir[sizeof segment_header(seg)->run_folder + 16];
        snprintf(dir, sizeof dir, "%.*s/" TS_RECORDING_DIR,
                 (int)sizeof segment_header(seg)->run_folder - 1, segment_header(seg)->run_folder);
        uint64_t events = 0;
        if (recording_salvage(seg, dir, why, &events, &cause) != 0) {
            cli_error("cannot add what pid %d left in its lanes to %s: %s", (int)pid, dir,
                      cause ? cause : "?");
            rc = -1;
        } else if (events) {
            snprintf(recovered, cap, "%llu events its lanes still held were added to its recording",
                     (unsigned long long)events);
        }
        segment_close(seg, 0);
    } else if (cause && strstr(cause, "no such segment")) {
        free(cause);
        return 0; /* none left behind: the usual end */
    }
    /* A damaged or foreign object at the name has nothing to recover: it goes all the same. */
    free(cause);
    cause = NULL;
    if (segment_remove_stale(pid, &cause) != 0) {
        cli_error("cannot remove the segment of pid %d: %s", (int)pid, cause ? cause : "?");
        free(cause);
        rc = -1;
    }
    return rc;
}
