/* model: the shared-memory segment, its header, lane records and layout (segment.c). */
#ifndef TERMSIGHT_MODEL_SEGMENT_H
#define TERMSIGHT_MODEL_SEGMENT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "budget.h"
#include "event.h"

#define TS_SEGMENT_MAGIC 0x5453454753495354ull /* "TSIGSEGT" little-endian */
#define TS_SEGMENT_MAJOR                                                                           \
    6 /* 4: the step and operator boards; 5: the step split; 6: the step on the device */
#define TS_SEGMENT_MINOR                                                                           \
    2 /* 1: the ledger's id and charge; 2: flight_mb, open ranges, stacks signal */
#define TS_SEGMENT_PREFIX "termsight-" /* shm name: "/termsight-<pid>-<16 hex digits>" */
#define TS_NAME_MAX       8192         /* longest name the string table keeps */

/* Collector state, the same words everywhere (ls, top, API). */
enum ts_state {
    TS_STATE_IDLE = 0,       /* never started */
    TS_STATE_COLLECTING = 1, /* recording */
    TS_STATE_STOPPED = 2,    /* stopped after collecting */
    TS_STATE_ENDED = 3,      /* the process ended its session */
};

/* "idle", "collecting", "stopped", "ended", or "unknown". */
const char *state_name(uint32_t state);

/* One communication in flight, as monitors see it: whole while seq is even; begin_ns 0: the
 * slot is free. */
typedef struct ts_comm_slot {
    _Atomic uint32_t seq;
    _Atomic uint32_t name; /* string id */
    _Atomic uint64_t begin_ns;
} ts_comm_slot;

#define TS_COMM_SLOTS  16                  /* communications in flight a monitor can see */
#define TS_STACKS_FILE "python-stacks.txt" /* in the run folder: termsight_stacks_signal */

/* The segment starts with this header. Offsets are from the segment's start; the segment holds
 * no pointers. Readers validate every field through segment_attach before using any offset. */
typedef struct ts_segment_header {
    uint64_t magic;       /* TS_SEGMENT_MAGIC */
    uint32_t endian;      /* 0x01020304 as written */
    uint16_t major;       /* incompatible layout changes */
    uint16_t minor;       /* compatible additions */
    uint32_t header_size; /* sizeof(ts_segment_header) */
    uint32_t event_size;  /* sizeof(ts_event) */
    uint32_t lane_size;   /* sizeof(ts_lane) */
    uint32_t word_size;   /* sizeof(void *) of the writer */
    uint64_t segment_size;

    int32_t pid;
    uint32_t uid;
    char process[64];           /* NUL-terminated */
    char clock[16];             /* tsclock_name() */
    uint64_t start_realtime_ns; /* wall clock at creation */
    uint64_t start_ns;          /* collector clock at creation */
    char run_folder[1024];      /* NUL-terminated; where the recording goes */

    uint32_t lane_count;
    uint32_t lane_events;     /* each lane's first ring, in events, a power of two */
    uint64_t lanes_off;       /* lane_count ts_lane records */
    uint64_t rings_off;       /* lane_count rings of lane_events events */
    uint32_t lane_max_events; /* the largest ring a lane may grow to (lane_events: none) */
    uint32_t pad_grow;
    uint64_t grow_off;         /* the grow region: the larger rings lanes grow into */
    uint64_t grow_bytes;       /* its size; the rings in use there take at most half */
    uint32_t string_max;       /* ids available */
    uint32_t string_arena;     /* bytes available for names */
    uint64_t string_index_off; /* string_max uint32 arena offsets */
    uint64_t string_arena_off;
    uint64_t mailbox_off;

    /* Live state, written by the collector: mirrors of what it keeps in its own memory, for
     * monitors. Any process of the user can write here, so the collector never reads these
     * back; the lanes' records are mirrors too (segment_lane_ctl). */
    _Atomic uint32_t state;        /* enum ts_state */
    _Atomic uint32_t lanes_used;   /* lanes ever claimed, for readers' scans */
    _Atomic uint32_t string_count; /* ids published */
    _Atomic uint32_t string_used;  /* arena bytes used */
    _Atomic uint64_t events_recorded;
    _Atomic uint64_t drops; /* events lost for any reason */
    _Atomic uint64_t bytes_recorded;
    _Atomic uint64_t string_drops;     /* names that did not fit */
    _Atomic uint64_t heartbeat_ns;     /* recorder's last loop, collector clock */
    _Atomic uint32_t window;           /* collection windows started */
    _Atomic uint32_t record_error;     /* nonzero: recording stopped (errno) */
    char record_notice[256];           /* why recording stopped; valid when record_error != 0 */
    _Atomic uint32_t strings_recorded; /* ids written to the recording so far */
    _Atomic uint32_t steps;       /* the last step begun, as the recorder last saw it (saturates;
                                   * minor 1: 0 from an older writer, unknown) */
    _Atomic uint64_t write_drops; /* events lost because the recording could not be written */

    /* The job (docs/jobs.md), set at creation. */
    char job[64];  /* NUL-terminated; "" when the process is no rank of a job */
    char host[64]; /* NUL-terminated */
    int32_t rank;  /* -1 when unknown, as the two below */
    int32_t local_rank;
    int32_t world_size;
    int32_t parent_pid; /* a forked child's session: the process it was forked from; else 0 */
    _Atomic uint64_t grow_used; /* bytes of the grow region's rings in use (mirror) */
    uint64_t board_off;         /* the boards (ts_board) */
    /* Minor 1: the ledger (budget.c) this segment's pages were taken from, and how many bytes it
     * holds of it now (a mirror), for whoever reaps the segment to give back. */
    uint64_t budget_id;
    _Atomic uint64_t budget_charged;
    /* Minor 1: events the program's own threads pushed (every lane but the collector's), taken
     * so far: 0 for a process that recorded nothing of its own (its samples aside). */
    _Atomic uint64_t program_events;
    /* Minor 2: MiB of the flight recorder's (0: none): the session writes no recording of its
     * own, only snapshots; whatever its lanes hold at its end goes nowhere. */
    uint32_t flight_mb;
    uint32_t pad_minor2;
    /* Minor 2: hang triage. The signal on which the program writes every thread's stack into
     * TS_STACKS_FILE in its run folder (termsight_stacks_signal); 0: none. And the
     * communications issued and not yet complete (comm_slots_issue), for monitors. */
    _Atomic int32_t stacks_signal;
    uint32_t pad_hang;
    ts_comm_slot comm[TS_COMM_SLOTS];
} ts_segment_header;

enum ts_lane_state {
    TS_LANE_FREE = 0,    /* claimable */
    TS_LANE_OWNED = 1,   /* a thread writes into it */
    TS_LANE_RETIRED = 2, /* its thread ended; free once drained */
};

/* One single-producer ring's control block; four cache lines so producer and consumer never
 * share one. Indexes only grow; index j lies in the ring that holds it at slot j & (events - 1).
 *
 * A lane grows: the consumer offers a larger ring (next_off, next_events), its pages had; the
 * producer takes it when its ring is full, at its head h, and goes on there: indexes from h on
 * (ring_from) lie in the new ring, the ones before in the old one until the consumer has passed
 * them. The producer rewrites the ring fields under ring_seq (odd while it writes), which
 * readers go by as by a sequence lock. */
typedef struct ts_lane {
    _Alignas(64) _Atomic uint64_t head; /* next index the producer writes (producer only) */
    /* The producer's innermost open range, for monitors (lane_open_set, lane_open_read): on the
     * producer's own cache line; the fields below are whole while open_seq is even. */
    _Atomic uint32_t open_seq;
    _Atomic uint32_t open_depth;  /* ranges open on the thread; 0: none */
    _Atomic uint32_t open_name;   /* the innermost kept one's name id */
    _Atomic uint32_t open_window; /* the collection window it began in */
    _Atomic uint64_t open_begin_ns;
    char pad0[32];
    _Atomic uint64_t tail; /* next index the consumer reads (consumer only) */
    char pad1[56];
    _Atomic uint32_t state;      /* enum ts_lane_state */
    _Atomic uint32_t tid;        /* owner's OS thread id */
    _Atomic uint64_t drops;      /* events dropped because the ring was full */
    _Atomic uint64_t generation; /* claims so far; observers notice reuse */
    /* Written by the consumer, for observers (ls, top): what this lane's thread lost in the
     * window under way, when that began and the events per second it offered then. */
    _Atomic uint64_t lost_window;
    _Atomic uint64_t lost_first_ns; /* collector clock; 0: none lost */
    _Atomic uint64_t lost_rate;
    char pad2[16];
    _Atomic uint32_t ring_seq;    /* even: the fields below are whole */
    _Atomic uint32_t ring_events; /* the ring indexes from ring_from on lie in */
    _Atomic uint64_t ring_off;    /* its offset in the segment */
    _Atomic uint64_t ring_from;
    _Atomic uint64_t old_off;     /* the ring indexes below ring_from lie in */
    _Atomic uint32_t old_events;  /* 0: none */
    _Atomic uint32_t next_events; /* a ring offered by the consumer; 0: none, or taken */
    _Atomic uint64_t next_off;
    char pad3[16];
} ts_lane;

_Static_assert(sizeof(ts_lane) == 256, "ts_lane layout");
_Static_assert(offsetof(ts_lane, open_begin_ns) < 64, "the open range on the head's line");
_Static_assert(sizeof(ts_segment_header) <= 4096, "header fits its page");

typedef struct segment segment;

/* What one thread lost in the window under way (a lane's mirror). */
typedef struct lane_loss {
    uint32_t tid;
    uint64_t lost;
    uint64_t first_ns; /* collector clock, when the recorder first saw it */
    uint64_t rate;     /* events per second the thread offered then */
} lane_loss;

#define SEGMENT_INFO_LOST 4

/* The layout of a segment, copied from its header once, when it is created or validated: every
 * later access goes by this copy, never by the header, which another process may rewrite. */
typedef struct segment_geometry {
    uint32_t lane_count;
    uint32_t lane_events;
    uint32_t lane_max_events;
    uint64_t grow_off, grow_bytes;
    uint32_t string_max;
    uint32_t string_arena;
    uint64_t lanes_off;
    uint64_t rings_off;
    uint64_t string_index_off;
    uint64_t string_arena_off;
    uint64_t mailbox_off;
    uint64_t board_off;
} segment_geometry;

typedef struct segment_config {
    pid_t pid;                            /* name and header pid; 0 means getpid() */
    const char *process;                  /* process name for the header */
    const char *run_folder;               /* recording destination for the header */
    const char *clock;                    /* clock name for the header */
    uint64_t start_ns;                    /* collector clock at creation */
    uint32_t lane_count;                  /* 1 .. 4096 */
    uint32_t lane_events;                 /* a lane's first ring: power of two, 64 .. 2^24 */
    uint32_t lane_max_events;             /* the most it grows to: lane_events .. 2^24 */
    uint64_t grow_budget;                 /* bytes the grown rings may take (0: none grow) */
    uint32_t string_max;                  /* 16 .. 2^24 */
    uint32_t string_arena;                /* bytes, 4096 .. 2^30 */
    const char *job;                      /* the job this process is a rank of; NULL or "": none */
    const char *host;                     /* this machine's name; NULL: none */
    int32_t rank, local_rank, world_size; /* in the job; -1: unknown; read only with a job */
    int32_t parent_pid;                   /* a forked child's session: its parent; else 0 */
    ts_shm_budget *budget;                /* the tree's ledger the pages are taken from; NULL:
                                           * none (no limit) */
    uint64_t size_max; /* the most bytes the segment may span (0: any): the limits' share
                        * (rlimits_map_max); the growth region, the first rings and then the
                        * name table are made smaller to fit, segment_geometry_of says how */
} segment_config;

/* Creates "/termsight-<pid>-<random>" mode 0600, exclusively: the random part (getrandom) keeps
 * anyone from taking the name first; a name found taken is never opened, another is drawn. Made
 * smaller to span at most cfg->size_max bytes; -1 with *cause when it cannot be. */
int segment_create(const segment_config *cfg, segment **out, char **cause);

/* Bytes the shared-memory file system has free for this user now; UINT64_MAX when it cannot be
 * told. */
uint64_t segment_shm_available(void);

/* Opens and validates the segment of pid (found by name in /dev/shm; of several, the one the
 * process maps, else the newest; names of other users' are passed over, see segment_note).
 * writable 0 maps it read-only (observers), 1 read-write (frontends sending commands). A foreign,
 * damaged, truncated or incompatible segment, or only another user's, is an error with a
 * message; none is "pid N: no such segment". */
int segment_attach(pid_t pid, int writable, segment **out, char **cause);

/* Same for a segment given by shm name ("/termsight-123-...") or a path to a file holding one. */
int segment_attach_name(const char *name, int writable, segment **out, char **cause);

/* What segment_attach passed over to find s (another user's objects at names of its pid, which
 * anyone can plant): a sentence, or "" when nothing. */
const char *segment_note(const segment *s);

/* The absolute path of s's run folder: the header's, or, for a relative one (older collectors
 * wrote the output option as given), joined to the working directory of the process when it
 * still maps s and is this user's. 0, or -1 with *cause when it cannot be told (never resolved
 * against the caller's own directory) or does not fit in cap. */
int segment_run_folder(const segment *s, char *out, size_t cap, char **cause);

/* Validates a header and its layout against the real size of the mapping. */
int segment_validate(const void *base, uint64_t size, char **cause);

/* Unmaps. remove 1 also unlinks the shm name (the owner at exit). NULL is fine. */
void segment_close(segment *s, int remove);

/* Removes the shm name and frees the rings' pages but keeps the mapping valid (the owner at
 * session end, while other threads may still be finishing an event call into it). */
void segment_unlink(const segment *s);

/* The creator's: has the pages of [off, off + len) (a full shared-memory file system fails here
 * instead of with SIGBUS at a store). 0, or -1 (out of bounds, not the creator, or no memory). */
int segment_populate(const segment *s, uint64_t off, uint64_t len);

/* The one bounds-checked accessor: a pointer to len bytes at off, or NULL when they do not lie
 * inside the segment. */
void *segment_at(const segment *s, uint64_t off, uint64_t len);

ts_segment_header *segment_header(const segment *s);
uint64_t segment_size(const segment *s);
const char *segment_shm_name(const segment *s);

/* A NUL-terminated copy into dst (cap bytes) of a header string of src_cap bytes, which the
 * process may still be writing or a hostile one left unterminated. */
void segment_copy_field(char *dst, size_t cap, const char *src, size_t src_cap);

const segment_geometry *segment_geometry_of(const segment *s);

/* The control mailbox: in an object of its own beside the segment ("<name>-ctl", mode 0600),
 * mapped writable for the creator and for a writable attach; NULL for a read-only attach. The
 * segment itself is mode 0400 and every attach maps it read-only: a monitor writes commands,
 * nothing else. */
typedef struct ts_mailbox ts_mailbox;
ts_mailbox *segment_mailbox(const segment *s);

/* The lane record and ring of lane i in the segment, or NULL when i is out of range. */
ts_lane *segment_lane(const segment *s, uint32_t i);
ts_event *segment_ring(const segment *s, uint32_t i);

/* The offset of lane i's first ring (lane_events events): where every lane starts, and where a
 * reclaimed one starts again. i below the lane count. */
uint64_t segment_first_ring_off(const segment *s, uint32_t i);

/* The ring of events at off, or NULL unless it lies whole among the first rings or in the grow
 * region and its size is one a lane may have. */
ts_event *segment_ring_at(const segment *s, uint64_t off, uint32_t events);

/* Whether the ring at off is a grown one (in the grow region). */
int segment_ring_grown(const segment *s, uint64_t off);

/* The creator's consumer's, one thread: a ring of events from the grow region, within the
 * budget (half the region), its pages not yet had; 0 and *off, or -1 (over the budget, no
 * room, or shared memory found full). Freed, its pages go back. */
int segment_grow_alloc(const segment *s, uint32_t events, uint64_t *off);
/* had: the bytes of it made present (segment_grow_populate), given back to the ledger; UINT64_MAX
 * for the whole ring. */
void segment_grow_free(const segment *s, uint64_t off, uint32_t events, uint64_t had);

/* Has the pages of [off, off + len), taken from the ledger: 0, or -1 when the ledger refuses
 * them or shared memory is full (no ring is tried after that). */
int segment_grow_populate(const segment *s, uint64_t off, uint64_t len);

/* A lane's larger ring being made ready by the consumer (lane_grow). */
typedef struct lane_grow_state {
    uint64_t off; /* the ring; events 0: none */
    uint32_t events;
    int offered;        /* handed to the producer (next_*), not yet seen taken */
    uint64_t populated; /* bytes of it had so far */
    uint32_t freed_seq; /* the ring_seq whose old ring has been freed */
} lane_grow_state;

/* The creator's per-lane growth state; NULL for an attacher. */
lane_grow_state *segment_grow_state(const segment *s, uint32_t i);

/* The control block that lane i's producer and consumer go by: for the segment's creator a
 * private copy in its own memory, which no other process can write (segment_lane is then only
 * its mirror, for observers); for an attacher the segment's record itself. NULL when i is out of
 * range. */
ts_lane *segment_lane_ctl(const segment *s, uint32_t i);

/* The creator's, before lane i's first use: has its ring's pages (a full shared-memory file
 * system then fails here rather than with SIGBUS at a store). 0, or -1 when they cannot be had;
 * a claim is made once per lane. A system call: on a thread's first event only. */
int segment_lane_ready(const segment *s, uint32_t i);

/* The threads that lost events in the window under way, from the lane mirrors: up to max of
 * them, most first, in out; returns how many lanes had losses. */
uint32_t segment_lane_losses(const segment *s, lane_loss *out, uint32_t max);

/* Lanes ever claimed (readers scan this many): the creator's own count, or the header's, capped
 * at the lane count, for an attacher. */
uint32_t segment_lanes_used(const segment *s);

/* Lane i was claimed: the count of lanes used (and its mirror) grows to cover it. */
void segment_lane_claimed(const segment *s, uint32_t i);

/* What `termsight ls` shows about one segment found in /dev/shm. */
typedef struct segment_info {
    pid_t pid;
    int alive;    /* the process exists */
    int readable; /* attach worked; else error says why */
    char shm_name[64];
    char process[64];
    uint32_t state;
    uint64_t events_recorded;
    uint64_t drops;
    uint64_t start_realtime_ns;
    char run_folder[1024];
    char job[64]; /* "" when none */
    int32_t rank, world_size;
    int32_t parent_pid; /* a forked child's session: its parent; else 0 */
    char error[256];
    uint32_t window;   /* collection windows started */
    uint64_t start_ns; /* the collector clock at the segment's creation */
    /* The threads that lost events in the window under way, most first (lane mirrors). */
    uint32_t lost_threads; /* how many did; the first SEGMENT_INFO_LOST are here */
    lane_loss lost[SEGMENT_INFO_LOST];
    uint64_t budget_id, budget_charged; /* the ledger it was charged to, and how much */
    uint64_t program_events;            /* the program's own events taken (header mirror) */
    uint32_t flight_mb;                 /* its flight recorder's MiB; 0: it records as usual */
} segment_info;

/* The state letter of /proc/PID/stat (R, S, D, T, t, Z...), or 0 when it cannot be read. */
char segment_proc_state(pid_t pid);

/* Lists this user's segments, newest pid last. *out is malloc'd. Returns the count or -1. */
int segment_list(segment_info **out, char **cause);

/* Lists, as segment_list does, this user's segments whose process has ended (no such process, or
 * a zombie not yet waited for) and whose header names budget_id as its ledger (when not 0) or
 * parent as its parent (when > 0). Cheap enough to call every 100 ms: a segment of a process
 * that is still there is never opened. */
int segment_list_ended(uint64_t budget_id, pid_t parent, segment_info **out, char **cause);

/* Removes the segment named name (of pid) when its process no longer maps it. Returns 0, or -1
 * when it is in use, not ours or gone. */
int segment_remove_stale_name(const char *name, pid_t pid, char **cause);

/* Takes the segment named name (of pid, whose process no longer maps it) for one reaper: renames
 * it to "<name>-reap", its path into claimed. 1 when taken; 0 when there is nothing to take (gone,
 * another reaper took it first, or junk that was not a file, removed); -1 with *cause (not ours,
 * in use). */
int segment_claim(const char *name, pid_t pid, char *claimed, size_t cap, char **cause);
#define TS_SEGMENT_CTL_SIZE 4096u /* the control object beside a segment */

/* Removes what segment_claim took, and the control object beside name. */
void segment_remove_claimed(const char *name, const char *claimed);

/* Removes every segment of pid that its process no longer maps: the count removed, or -1 when
 * none could be (in use, not ours, or none there). */
int segment_remove_stale(pid_t pid, char **cause);

/* Removes this user's control objects ("/termsight-<pid>-<hex>-ctl") whose segment is gone and
 * whose process is gone (left by a segment removed by hand, or by an older termsight), and the
 * segments a reaper took and never removed ("-reap": it died): the count removed. */
int segment_remove_orphan_ctls(void);

#endif
