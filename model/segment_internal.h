/* segment's internals shared by segment.c (create, attach, access) and segment_list.c (the
 * segments found in SHM_DIR: listing, removing, claiming). Only those two include it. */
#ifndef TERMSIGHT_MODEL_SEGMENT_INTERNAL_H
#define TERMSIGHT_MODEL_SEGMENT_INTERNAL_H

#include "model.h"

/* Where POSIX shared memory objects live as files on Linux: "/termsight-1" is SHM_DIR
 * "/termsight-1". */
#define SHM_DIR "/dev/shm"

#define CTL_SUFFIX  "-ctl" /* the control object beside a segment: its name + this */
#define CTL_SIZE    TS_SEGMENT_CTL_SIZE
#define REAP_SUFFIX "-reap" /* a segment a reaper took (segment_claim) */

/* a then b into buf of cap bytes: 0, or -1 with errno ENAMETOOLONG when they do not fit (a
 * name cut short would name some other object). */
int segment_join2(char *buf, size_t cap, const char *a, const char *b);

/* src (NULL: "") into dst of cap bytes, cut to fit, NUL-terminated. */
void segment_copy_str(char *dst, size_t cap, const char *src);

/* The pid in a name of SHM_DIR: "termsight-<pid>-<16 hex digits>", or "termsight-<pid>" (the
 * names older versions gave, still listed so that they can be cleaned). 1 and *pid, or 0. */
int segment_parse_pid(const char *entry, pid_t *pid);

/* The names in SHM_DIR that name one pid, all of them: anyone can create "termsight-<pid>-<hex>"
 * for any pid, so no count of planted names may hide the real one. */
typedef struct pid_names {
    char (*own)[64]; /* shm names ("/termsight-...") of this user's objects */
    int n;
    int foreign;   /* passed over: another user's */
    char why[160]; /* the first one passed over, and why */
} pid_names;

/* Fills pn with pid's names: 0, or -1 with *cause when SHM_DIR cannot be read (pn->own is then
 * NULL). Free pn->own. */
int segment_names_of_pid(pid_t pid, pid_names *pn, char **cause);

/* The message when pid has no name of this user's (pn from segment_names_of_pid): the first one
 * passed over, or none. Returns -1. */
int segment_no_own_name(pid_t pid, const pid_names *pn, char **cause);

/* Alive means the process exists and still maps this very object (not a deleted one, not a pid
 * reused by an unrelated process). */
int segment_alive(pid_t pid, const char *shm_name);

#endif
