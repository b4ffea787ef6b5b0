/* timeline_thin: a finished timeline cut down to a size by steps (timeline.h). A lean rank
 * report keeps its share of the job's timeline this way rather than the beginning of its run:
 * two passes over its files through timeline_pick (weigh, then take), the events kept written in
 * their order into one timeline.json, what is cut counted as left out. */
#include "timeline_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct thin {
    timeline_pick *pick;
    int weighing, first;
    uint64_t bytes, events, cut;
    FILE *out;
} thin;

static void one_event(thin *th, const char *ev, size_t len)
{
    if (th->weighing) {
        timeline_pick_weigh(th->pick, ev, len, 0);
        return;
    }
    if (!timeline_pick_take(th->pick, ev, len, 0)) {
        th->cut++;
        return;
    }
    fputs(th->first ? "\n" : ",\n", th->out);
    fwrite(ev, 1, len, th->out);
    th->first = 0;
    th->bytes += len + 2;
    th->events++;
}

/* Every event line of the finished files through one_event. -1 on a read error. */
static int each_event(timeline *t, thin *th)
{
    char *line = NULL;
    size_t cap = 0;
    for (uint32_t k = 0; k < t->st.files; k++) {
        char name[64];
        timeline_file_name(k, name, sizeof name);
        int fd = openat(t->cfg.dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
        if (!f) {
            if (fd >= 0)
                close(fd);
            free(line);
            return -1;
        }
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0) {
            size_t len = timeline_event_text(line, (size_t)n);
            if (len)
                one_event(th, line, len);
        }
        fclose(f);
    }
    free(line);
    return 0;
}

int timeline_thin(timeline *t, uint64_t keep_bytes, uint64_t first, uint64_t last, char **cause)
{
    int windowed = first > 0 || last < UINT64_MAX;
    if (t->error || t->cfg.pretty || (t->st.bytes <= keep_bytes && !windowed))
        return 0;
    static const char tmp[] = ".timeline-thin.tmp";
    static const uint64_t frame = sizeof FILE_HEAD - 1 + sizeof FILE_TAIL - 1;
    thin th = {
        .pick = timeline_pick_create(t->spans, t->nspans, first, last), .weighing = 1, .first = 1};
    if (!th.pick)
        return cause_set(cause, "out of memory");
    int rc = -1;
    if (each_event(t, &th) < 0) {
        cause_set(cause, "cannot read the timeline to thin it: %s", strerror(errno));
        goto done;
    }
    timeline_pick_plan(th.pick, keep_bytes > frame ? keep_bytes - frame : 0);
    th.weighing = 0;
    int fd = openat(t->cfg.dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    th.out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!th.out) {
        if (fd >= 0)
            close(fd);
        cause_set(cause, "cannot write %s: %s", tmp, strerror(errno));
        goto done;
    }
    fputs(FILE_HEAD, th.out);
    int rd = each_event(t, &th);
    fputs(FILE_TAIL, th.out);
    int werr = ferror(th.out);
    if (fclose(th.out) != 0 || werr || rd < 0 ||
        renameat(t->cfg.dirfd, tmp, t->cfg.dirfd, "timeline.json") < 0) {
        cause_set(cause, "cannot thin the timeline: %s", strerror(errno ? errno : EIO));
        unlinkat(t->cfg.dirfd, tmp, 0);
        goto done;
    }
    for (uint32_t k = 1; k < t->st.files; k++) {
        char name[64];
        timeline_file_name(k, name, sizeof name);
        unlinkat(t->cfg.dirfd, name, 0);
    }
    t->st.files = 1;
    t->st.events = th.events;
    t->st.left_out += th.cut;
    t->st.bytes = t->total = th.bytes + frame;
    t->cfg.limit_bytes = keep_bytes;
    rc = 0;
done:
    timeline_pick_free(th.pick);
    return rc;
}
