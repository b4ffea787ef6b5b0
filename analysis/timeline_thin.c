/* timeline_thin: a finished timeline cut down to a size by steps (timeline.h). A lean rank
 * report keeps its share of the job's timeline this way rather than the beginning of its run:
 * two passes over its files (mapped) through timeline_pick (weigh, then take), the events kept
 * written in their order into one timeline.json, what is cut counted as left out. */
#include "timeline_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

/* The finished files, mapped: read twice (weigh, then take) without copying them. */
typedef struct mapped {
    char *p;
    size_t len;
} mapped;

static void unmap_all(mapped *m, uint32_t n)
{
    for (uint32_t k = 0; m && k < n; k++)
        if (m[k].p)
            munmap(m[k].p, m[k].len);
    free(m);
}

static mapped *map_all(timeline *t)
{
    mapped *m = calloc(t->st.files + 1, sizeof *m);
    for (uint32_t k = 0; m && k < t->st.files; k++) {
        char name[64];
        timeline_file_name(k, name, sizeof name);
        int fd = openat(t->cfg.dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0) {
            if (fd >= 0)
                close(fd);
            unmap_all(m, k);
            return NULL;
        }
        if (st.st_size > 0) {
            void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p == MAP_FAILED) {
                close(fd);
                unmap_all(m, k);
                return NULL;
            }
            m[k].p = p;
            m[k].len = (size_t)st.st_size;
        }
        close(fd);
    }
    return m;
}

/* Every event line of the mapped files through one_event. */
static void each_event(const mapped *m, uint32_t files, thin *th)
{
    for (uint32_t k = 0; k < files; k++) {
        const char *p = m[k].p, *end = p + m[k].len;
        while (p && p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *stop = nl ? nl + 1 : end;
            size_t len = timeline_event_text(p, (size_t)(stop - p));
            if (len)
                one_event(th, p, len);
            p = stop;
        }
    }
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
    uint32_t files = t->st.files;
    mapped *m = map_all(t);
    if (!m) {
        cause_set(cause, "cannot read the timeline to thin it: %s", strerror(errno));
        goto done;
    }
    each_event(m, files, &th);
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
    each_event(m, files, &th);
    fputs(FILE_TAIL, th.out);
    int werr = ferror(th.out);
    if (fclose(th.out) != 0 || werr ||
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
    unmap_all(m, files);
    timeline_pick_free(th.pick);
    return rc;
}
