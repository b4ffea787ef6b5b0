/* segment's internals shared by segment.c (create, attach, access), segment_lanes.c (the lanes'
 * records, rings and grow region) and segment_list.c (the segments found in SHM_DIR: listing,
 * removing, claiming). Only those include it. */
#ifndef TERMSIGHT_MODEL_SEGMENT_INTERNAL_H
#define TERMSIGHT_MODEL_SEGMENT_INTERNAL_H

#include "model.h"

#include <pthread.h>

#define PAGE            4096u
#define LANES_MAX       4096u
#define LANE_EVENTS_MIN 64u
#define LANE_EVENTS_MAX (1u << 24)
#define STRINGS_MIN     16u
#define STRINGS_MAX     (1u << 24)
#define ARENA_MIN       4096u
#define ARENA_MAX       (1u << 30)
#define GROW_BUDGET_MAX (64ull << 30) /* bytes of grown rings a segment may have */
#define GROW_ORDERS     25            /* ring sizes 2^0 .. 2^24 events: free lists by order */

/* A free list of grown rings of one size (offsets in the grow region). */
typedef struct grow_list {
    uint64_t *off;
    size_t n, cap;
} grow_list;

struct segment {
    uint8_t *base;
    uint64_t size;
    int writable;
    char name[64];
    char note[256];     /* what segment_attach passed over to find it; "" when nothing */
    segment_geometry g; /* the validated layout, never re-read from the header */
    /* The creator's: the lanes' control blocks and the count of lanes claimed, in its own
     * memory (the segment holds their mirrors). NULL and unused in an attacher. */
    ts_lane *ctl;
    _Atomic uint32_t lanes_used;
    /* The creator's: lane i's ring pages are had (segment_lane_ready); full once shared memory
     * refused a ring. Under ready_lock. */
    _Atomic uint8_t *ready;
    pthread_mutex_t ready_lock;
    int ready_lock_made;
    int full;
    /* The creator's consumer's: the grow region's rings (segment_grow_*), and per lane a
     * larger ring being made ready, not yet offered or taken (lane_grow). */
    int grow_full;      /* shared memory refused a grown ring: no more are tried */
    uint64_t grow_next; /* the region's bytes handed out so far */
    uint64_t grow_used; /* bytes of rings in use */
    grow_list grow_free[GROW_ORDERS];
    lane_grow_state *grow;
    ts_mailbox *mailbox; /* the control object's mapping (writable); NULL when read-only */
    /* The creator's: the tree's ledger its pages are taken from (NULL: no limit), and the bytes
     * taken, given back as pages go and all at once when the name goes (segment_unlink). */
    ts_shm_budget *budget;
    _Atomic uint64_t charged;
};

static inline uint64_t segment_round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

static inline int segment_is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

/* Takes len bytes from the tree's ledger for pages about to be had: 0, or -1 when it refuses. */
int segment_charge(segment *s, uint64_t len);

/* Gives back len bytes of what this segment took (at most all of it). */
void segment_discharge(segment *s, uint64_t len);

/* Has the pages of [p, p + len), taken from the ledger first. 0; -1 when the ledger refuses
 * (*refused 1) or shared memory is full (*refused 0; what was taken is given back). */
int segment_have(segment *s, void *p, uint64_t len, int *refused);

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
