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
    uint64_t n = 0;
    char *cause = NULL;
    int rc = segment_reap(info, why, NULL, NULL, &n, &cause);
    if (rc != 0)
        cli_error("%s", cause ? cause : "cannot clean a stale session");
    free(cause);
    *events += n;
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
