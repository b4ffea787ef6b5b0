/* stale: the segment a session leaves when its process ends without closing it (a signal,
 * _exit): what its lanes still held goes into its recording, then the segment is removed. */
#include "cli.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One segment left behind: what its lanes held into its recording, then the segment removed. */
static int stale_segment(const segment_info *info, const char *why, uint64_t *events)
{
    segment *seg;
    char *cause = NULL;
    int rc = 0;
    if (segment_attach_name(info->shm_name, 0, &seg, &cause) == 0) {
        char dir[sizeof segment_header(seg)->run_folder + 16];
        snprintf(dir, sizeof dir, "%.*s/" TS_RECORDING_DIR,
                 (int)sizeof segment_header(seg)->run_folder - 1, segment_header(seg)->run_folder);
        uint64_t n = 0;
        if (recording_salvage(seg, dir, why, &n, &cause) != 0) {
            cli_error("cannot add what pid %d left in its lanes to %s: %s", (int)info->pid, dir,
                      cause ? cause : "?");
            rc = -1;
        }
        *events += n;
        segment_close(seg, 0);
    }
    /* A damaged or foreign object at the name has nothing to recover: it goes all the same. */
    free(cause);
    cause = NULL;
    if (segment_remove_stale_name(info->shm_name, info->pid, &cause) != 0) {
        cli_error("cannot remove %s: %s", info->shm_name, cause ? cause : "?");
        free(cause);
        rc = -1;
    }
    return rc;
}

static void recovered_text(uint64_t events, char *recovered, size_t cap)
{
    recovered[0] = 0;
    if (events)
        snprintf(recovered, cap, "%llu events its lanes still held were added to its recording",
                 (unsigned long long)events);
}

int cli_stale_segment(const segment_info *info, const char *why, char *recovered, size_t cap)
{
    uint64_t events = 0;
    int rc = stale_segment(info, why, &events);
    recovered_text(events, recovered, cap);
    return rc;
}

int cli_stale_session(pid_t pid, const char *why, char *recovered, size_t cap)
{
    recovered[0] = 0;
    segment_info *list;
    char *cause = NULL;
    int n = segment_list(&list, &cause);
    if (n < 0) {
        cli_error("%s", cause ? cause : "cannot list the sessions");
        free(cause);
        return -1;
    }
    int rc = 0;
    uint64_t events = 0;
    /* Every segment pid left (an exec'd program's earlier images each left one); none is the
     * usual end. */
    for (int i = 0; i < n; i++)
        if (list[i].pid == pid && !list[i].alive && stale_segment(&list[i], why, &events) != 0)
            rc = -1;
    free(list);
    recovered_text(events, recovered, cap);
    return rc;
}
