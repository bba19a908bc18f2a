/* The daemon's state that outlives it (docs/DESIGN.md, "Outliving the
 * daemon"): one memfd, kept by the supervisor beside the /dev/fuse
 * descriptor, holding
 *  - a header: the kernel's INIT request (a new daemon replays it to
 *    libfuse), the generation counter, the live settings, the mount point
 *    and the settings the mount fixed, and what the serving daemon says of
 *    itself (status.h);
 *  - the in-flight journal's records (inflight.h);
 *  - a slot per node the kernel holds (node id = slot), with what a new
 *    daemon needs to serve that id again: the backing (dev, ino) and file
 *    handle; the lookup count; the namespace, its job by its number in the
 *    job table; the passthrough binding (nodes/nodes.h writes them);
 *  - for a views node, its key and inode number, in a region of its own
 *    indexed by the same slot (a tree without views never touches it), and
 *    a key too long for that record in a second such region (a walk of the
 *    views touches its pages only for such keys);
 *  - the job table: each job id a slot's namespace named, once, in the
 *    order they came (a walk of one job's state names one job);
 *  - a slot per open file or directory handle (fh = slot): its node and
 *    open flags, so it can be opened again (ops/handles.c);
 *  - the counters of .metrics (metrics.h) and the newest .collisions
 *    records (core/collision.h keeps them in the memory it is handed).
 * The memory is MAP_SHARED and sparse: only slots in use cost pages.  A
 * slot's `state` is written last when it is taken and first when it is
 * given back, so a daemon killed between two stores leaves either a whole
 * slot or a free one.  Slots are handed out by SlotPool under the caller's
 * lock; the pool's free list is rebuilt from the states by a new daemon. */
#pragma once
#include <glib.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "inflight.h"

#define STATE_NODE_SLOTS    (1u << 24) /* nodes the kernel may hold at once */
#define STATE_HANDLE_SLOTS  (1u << 20) /* open files and directories at once */
#define STATE_KEY_TEXT      56         /* a views key and its NUL, in its KeyRec */
#define STATE_LONG_KEY_TEXT 136        /* a longer one, in its LongKeyRec */
#define STATE_JOB_SLOTS     (1u << 20) /* job ids the nodes' namespaces name */
#define STATE_JOB_TEXT      132        /* a job id (<= 128 bytes) and its NUL */
#define STATE_HANDLE_BYTES  40         /* file handles up to this size survive */
#define STATE_INIT_MAX      256        /* the kernel's INIT request: 104 bytes today */

enum { SLOT_FREE = 0, SLOT_USED = 1 };
/* NodeRec.kind of a backing object (nodes/nodes.h's NODE_BACKING, which
 * asserts it) */
#define STATE_REC_BACKING 0

typedef struct {
    _Atomic uint32_t state; /* SLOT_FREE / SLOT_USED, written last when taken */
    uint8_t kind;           /* NodeKind */
    uint8_t stale;
    uint8_t ns_kind, ns_place; /* CkNs (its job: `job`) */
    uint16_t type;             /* S_IFMT */
    /* the views key's length (its KeyRec); STATE_TEXT_LOST: the node
     * cannot be found again (a key too long, no room for its job) */
    uint16_t text_len;
    uint8_t handle_len; /* 0: no handle kept (the node cannot be found again) */
    /* 1: its last name went through the mount while it was open, so an
     * open that finds no name is a reopen.  A daemon that knows no such
     * byte wrote 0 here (the byte was padding) and reads past it. */
    uint8_t nameless_open;
    uint8_t pad[2];
    int32_t handle_type;
    uint32_t job; /* of CK_NS_JOB: its number in the job table (state_job) */
    uint64_t generation;
    uint64_t nlookup;
    uint64_t dev, ino;
    int32_t backing_id;
    uint32_t backing_refs;
    uint32_t cached_opens;
    uint8_t handle[STATE_HANDLE_BYTES];
} NodeRec;
#define STATE_TEXT_LOST 0xffff

/* A views node's reported inode number and key, beside its NodeRec; a
 * key of STATE_KEY_TEXT bytes or more is in the slot's LongKeyRec. */
typedef struct {
    uint64_t vino;
    char text[STATE_KEY_TEXT];
} KeyRec;
typedef struct {
    char text[STATE_LONG_KEY_TEXT];
} LongKeyRec;

typedef struct {
    _Atomic uint32_t state;
    uint32_t kind; /* HandleKind (handles.h) */
    uint64_t node; /* the kernel's node id of the open object */
    int32_t flags; /* open(2) flags of the open */
    int32_t backing_id;
    uint8_t bound, writable;
    uint8_t pad[6];
    int32_t write_err;
    uint32_t generation; /* bumped each time the slot is taken: fh = generation << 32 | slot */
} HandleRec;

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t node_rec_size, handle_rec_size;
    _Atomic uint32_t init_len; /* 0 until the kernel's INIT was read */
    uint8_t init[STATE_INIT_MAX];
    uint64_t root_dev, root_ino;
    _Atomic uint64_t next_generation;
    _Atomic uint32_t node_high; /* slots below this were handed out once */
    _Atomic uint32_t job_high;  /* the job table's entries below this are written */
    _Atomic uint32_t handle_high;
    _Atomic uint64_t attaches;      /* daemons that attached to the live connection */
    _Atomic uint64_t failed_starts; /* daemons that died before they served (supervisor) */
    _Atomic uint64_t give_ups;      /* times the supervisor gave up (supervisor) */
    _Atomic int32_t mode_audit, mode_legacy_rw; /* -1: as the options say */
    char mountpoint[2048]; /* realpath: an attaching daemon must not resolve it (it waits) */
    /* key=value lines of what the mount fixes for its life (main.c
     * fixed_settings), written by the daemon that mounted */
    char fixed[1024];
    uint64_t mount_dev; /* the mount's device number, written once mounted */
    /* the other settings changed live (control.c), applied again by a new
     * daemon over its options; policy and legacy are mode_audit and
     * mode_legacy_rw above */
    _Atomic int64_t live_rescan_us; /* 0: as the options say */
    _Atomic int32_t live_tag_env;   /* 0: as the options say; 1 + i: live_tag_env_text[i] */
    char live_tag_env_text[2][256]; /* "" for none; the one not in use is written, then named */
    /* the live settings as the options (and config=) of the daemon that
     * last read them said, as key=value lines: a new daemon keeps a
     * setting changed live unless its own options say otherwise than
     * these (control.c).  0: none yet; 1 + i: configured_text[i], written
     * as live_tag_env_text is */
    _Atomic int32_t configured_at;
    char configured_text[2][512];
    /* what the serving daemon says of itself, for `ckptctl status` (read by
     * the supervisor without asking the daemon, which may be hung) */
    struct {
        _Atomic int32_t pid;          /* 0 until a daemon serves */
        _Atomic int64_t started_us;   /* g_get_real_time at its start */
        _Atomic int32_t passthrough;  /* -1 not known yet, 0 off, 1 on */
        _Atomic int32_t catalog_done; /* the first load of the catalog finished */
        _Atomic int64_t last_rescan_us;
        char version[32];
        char passthrough_why[160]; /* why it is off */
        char identity[192];        /* "env:VAR", "job:ID", "none" */
        char log[64];              /* the log target */
    } status;
} StateHeader;

typedef struct State {
    int fd;
    StateHeader *hdr;
    InflightRec *inflight;        /* [INFLIGHT_RECORDS] */
    NodeRec *nodes;               /* [STATE_NODE_SLOTS] */
    KeyRec *keys;                 /* [STATE_NODE_SLOTS]: views nodes' */
    LongKeyRec *long_keys;        /* [STATE_NODE_SLOTS]: their keys too long for a KeyRec */
    char (*jobs)[STATE_JOB_TEXT]; /* [STATE_JOB_SLOTS]: state_job */
    HandleRec *handles;           /* [STATE_HANDLE_SLOTS] */
    void *metrics;                /* FsMetrics (metrics.h) */
    void *collisions;             /* the collision log's store (ck_collision_log_new_in) */
    size_t collisions_size;
    size_t size;
    bool attached; /* opened from a descriptor a previous daemon filled */
} State;

/* Creates a fresh state (fd < 0) or maps the one in fd (a previous
 * daemon's, which must match this build's layout).  0 or -errno. */
int state_open(State *s, int fd);
/* A fresh state's descriptor alone (the supervisor makes it before the
 * first daemon; the daemon maps it with state_open).  fd or -errno. */
int state_create_fd(void);
/* This build's layout of the state, as text: a takeover needs the same. */
const char *state_layout(void);
void state_close(State *s);

/* Where slot's views key is, by its length (NodeRec.text_len), and the
 * room it had (a key read back must end within it). */
static inline const char *state_key_text(const State *s, uint32_t slot, size_t len, size_t *room)
{
    *room = len < STATE_KEY_TEXT ? STATE_KEY_TEXT : STATE_LONG_KEY_TEXT;
    return len < STATE_KEY_TEXT ? s->keys[slot].text : s->long_keys[slot].text;
}

/* The job table: state_job_add writes job as the next entry and returns
 * its number (> 0), 0 when the table is full; the caller knows it is not
 * there yet (an entry is never written twice by one daemon, but a daemon
 * killed halfway leaves one that is written again).  state_job: the job
 * of a number, NULL for 0 or one not written. */
uint32_t state_job_add(State *s, const char *job);
const char *state_job(const State *s, uint32_t number);

/* Slots handed out under the caller's lock: the free ones below *high,
 * then *high itself.  Slot 0 is never handed out; slots below `first` are
 * the caller's to place.  With reserve 0 the slot freed last is taken
 * first.  With a reserve, a freed slot keeps its record as long as it can:
 * the oldest freed slot is taken, and only once more than `reserve` slots
 * are free (until the cap) — a record the caller can still read back
 * (node ids in file handles).  A slot on the free list whose state says
 * used again (the caller took it back itself) is skipped. */
typedef struct {
    GArray *free; /* SlotFree, most recently freed last */
    guint head;   /* with a reserve: free[head] is the oldest */
    _Atomic uint32_t *high;
    uint32_t first, cap, reserve;
    const char *states; /* the first slot's state field */
    size_t stride;
    /* with a reserve: each slot's last give (0: not free), so that an entry
     * left behind by a slot taken back and freed again is skipped, and the
     * free slots counted against the reserve are the real ones */
    uint32_t *freed_seq;
    uint32_t next_seq;
    guint nfree;
} SlotPool;

/* states: the first slot's state field, stride bytes between slots;
 * data: which pages of the slots hold data (state_region_pages), NULL for
 * all: a slot on a page given back is free and is not read. */
void slot_pool_init(SlotPool *p, _Atomic uint32_t *high, uint32_t first, uint32_t cap,
                    uint32_t reserve, const void *states, size_t stride, const guint8 *data);
void slot_pool_clear(SlotPool *p);
/* A slot not in use, 0 when all are. */
uint32_t slot_pool_take(SlotPool *p);
void slot_pool_give(SlotPool *p, uint32_t slot);
/* The caller took a free slot back itself (its record names it again). */
void slot_pool_claim(SlotPool *p, uint32_t slot);
/* With a reserve: a free slot given before the newest `reserve`, whose
 * record the caller need not keep any more. */
bool slot_pool_forgettable(const SlotPool *p, uint32_t slot);

/* Memory given back.  The records of forgettable slots are erased, and
 * every page of a region that holds only such records goes back to the
 * system (a hole of the memfd, which reads as zeros: a free slot with no
 * record).  A page given back is made again when a slot on it is taken;
 * readers of free slots skip the holes, so as not to make them again.
 * - state_region_pages: one byte per page of the region's first `bytes`
 *   (the region starts on a page), 1 where it holds data (g_free);
 * - state_region_has_data: whether the page at offset `off` of the region
 *   holds data;
 * - state_trim_region: erases the forgettable slots' records of a region
 *   of records of `stride` bytes, slot i at i * stride, below `high`, and
 *   gives back the pages that hold nothing else; data: its pages as
 *   state_region_pages gave them.  The pool's lock held.  Returns the
 *   pages given back. */
guint8 *state_region_pages(const State *s, const void *region, size_t bytes);
bool state_region_has_data(const State *s, const void *region, size_t off);
size_t state_trim_region(const SlotPool *p, void *region, size_t stride, uint32_t high,
                         const guint8 *data);
/* The page of a region's slot (its record's first byte, its state). */
#define STATE_PAGE_SIZE 4096
static inline bool state_slot_has_data(const guint8 *data, size_t stride, uint32_t slot)
{
    return !data || data[(size_t)slot * stride / STATE_PAGE_SIZE];
}
