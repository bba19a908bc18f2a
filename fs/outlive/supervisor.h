/* -o supervise: the mount outlives its daemon (docs/DESIGN.md, "Outliving
 * the daemon").
 *
 * The process the user (or systemd, or mount(8)) started becomes a small
 * supervisor.  It makes the state memfd (state.h), runs the daemon as a
 * child (the same binary, from a descriptor of it), keeps a duplicate of
 * the /dev/fuse descriptor the daemon mounted with, and when the daemon
 * dies starts a new one that attaches to the same connection (kio replays
 * INIT and asks the kernel to resend).  After START_TRIES daemons in a row
 * died before serving it gives up: it answers every request with EIO until
 * a takeover brings a daemon that starts, or the mount goes.
 *
 * `ckptfs --takeover MNT [-o OPTIONS]` replaces the daemon with the
 * requesting binary, without failing a request:
 *   1. the requester asks the supervisor (an abstract Unix socket named for
 *      MNT) for the daemon's command line, replaces its -o options by
 *      OPTIONS when given, and checks the result with its own option
 *      parser: a bad option or config file is refused there, exit 2, the
 *      running daemon untouched;
 *   2. the supervisor starts the new binary as a standby daemon, which
 *      checks what it can without the state (directories, files) and says
 *      so; only then is the running daemon told to hand over;
 *   3. the standby daemon attaches; once it serves, the supervisor execs
 *      the new binary itself.  A standby that fails leaves the old daemon
 *      serving; one that fails after the handover is replaced by the old
 *      binary (kept open by descriptor) with the old command line.
 * The supervisor also holds a duplicate descriptor of each file without a
 * name (unlinked while open, O_TMPFILE) the daemon tells it of, and hands
 * them to the next daemon (suplink_hold, suplink_take_held).
 * A daemon whose supervisor died listens on a socket of its own, so that a
 * takeover can adopt its connection and supervise it again.  Messages are
 * SOCK_SEQPACKET datagrams: a word, maybe a payload, maybe a descriptor. */
#pragma once
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "held.h"

struct State;

typedef enum {
    LINK_NONE,    /* not supervised */
    LINK_MOUNT,   /* the first daemon: mounts, then hands the descriptor up */
    LINK_ATTACH,  /* a replacement: attaches to the live connection at once */
    LINK_STANDBY, /* a takeover's: checks, says so, attaches when told */
} LinkMode;

/* The daemon's end. */
typedef struct {
    LinkMode mode;
    int sock;                  /* to the supervisor; -1 when not supervised */
    int state_fd;              /* the state memfd the supervisor made; -1: make one */
    int fuse_fd;               /* the live connection to attach to; -1: mount */
    bool daemonized;           /* the supervisor detached from the terminal */
    char **argv;               /* the daemon's command line (absolute), borrowed */
    const char *mnt;           /* the mount point (suplink_ready), borrowed */
    int conn_fd;               /* the connection the daemon serves (suplink_mounted, or fuse_fd) */
    const struct State *state; /* the daemon's state memfd, for status (borrowed) */
    bool was_supervised;       /* keeps the in-flight journal a takeover needs */
    pthread_t main_thread;
    void (*handover)(void *ctx); /* called (in a thread) when told to hand over */
    /* what the supervisor holds for this daemon (SupHeld; NULL: none),
     * given to a takeover that adopts it after its supervisor died */
    GArray *(*held_now)(void *ctx);
    void *ctx;
    bool held_coming; /* a replacement: the supervisor's held list comes first */
    GArray *held;     /* SupHeld: that list, once read */
    /* let-gos the socket had no room for, sent before the next message and
     * by the link's thread as soon as it has room (letgo_lock) */
    GMutex letgo_lock;
    GArray *letgos; /* SupHeld, fd -1 */
    int letgo_wake; /* eventfd: tells the link's thread that one waits */
    int sndbuf;     /* the socket's send buffer, 0 until asked (letgo_lock) */
} SupLink;

/* An object without a name the supervisor held for a new daemon. */
typedef struct {
    uint32_t slot;
    uint64_t gen;
    int fd; /* owned by whoever took the array */
} SupHeld;

/* The exit status of a daemon that handed its connection over. */
#define SUPERVISOR_EXIT_HANDOVER 75

/* A supervisor re-executed by a takeover: it resumes with what it had, and
 * parses nothing (so a config file broken meanwhile cannot stop it). */
bool supervisor_resuming(void);
/* This process is a daemon a supervisor started (its first process spoke
 * to the terminal already). */
bool supervisor_started_me(void);
/* Runs the resumed supervisor; returns its exit status. */
int supervisor_resume(char **argv);
/* In main, options parsed, argv absolute (fs_argv_absolute).  In a daemon
 * the supervisor started: fills link and returns 0.  Not supervising:
 * link->sock = -1, returns 0.  Otherwise this process becomes the
 * supervisor and returns only its exit status (> 0, or 0 after a clean
 * unmount) for main to exit with.  started_note (or NULL): what the
 * process on the terminal says once a background mount is up. */
int supervisor_start(char **argv, bool supervise, bool foreground, const char *started_note,
                     SupLink *link);
/* A standby or starting daemon's reason to fail, for the takeover's reply. */
void suplink_error(SupLink *l, const char *msg);
/* A standby daemon checked what it could: waits until the running daemon
 * handed over.  0: attach now; -1: the supervisor went away. */
int suplink_standby(SupLink *l);
/* An object without a name whose descriptor this daemon may alone hold
 * (node `slot` of generation `gen`): the supervisor holds fd (a duplicate,
 * closed here) for the next daemon.  fd -1: the node went, let it go.
 * Never waits; whether the message went (a let-go always goes: one the
 * socket has no room for now goes later, as soon as it has, and no hold
 * goes before it).  spare: a hold that only goes while the socket has
 * half its buffer free (a directory: files come first).  A daemon holds at
 * most SUPLINK_HELD_MAX at once, so that their let-gos fit the socket. */
#define SUPLINK_HELD_MAX HELD_MAX
bool suplink_hold(SupLink *l, uint32_t slot, uint64_t gen, int fd, bool spare);
/* A daemon that attaches: what the supervisor handed over to it (SupHeld;
 * the caller owns the array and its descriptors), NULL for nothing.  The
 * supervisor holds none of them any more: hold again what is kept. */
GArray *suplink_take_held(SupLink *l);
/* The daemon mounted: the supervisor keeps a duplicate of fuse_fd. */
int suplink_mounted(SupLink *l, int fuse_fd);
/* The daemon serves mnt; from now on it listens for "hand over" (a thread),
 * and, should its supervisor die, for a takeover that adopts it.  note:
 * what the takeover's requester is told besides "done", or NULL. */
void suplink_ready(SupLink *l, const char *mnt, const char *note);
/* Detaches the mount at mnt (umount2 MNT_DETACH as root, else
 * fusermount3 -u -z): a dead one (dev 0), or an attached daemon's at its
 * end: then only when the mount there is still the one of device dev (a
 * new mount may have taken the mount point since).  True when it went. */
bool unmount_lazily(const char *mnt, unsigned long dev);
/* Whether the FUSE connection on fd is still up (not unmounted, aborted). */
bool connection_alive(int fd);
/* The device number of the top mount at mnt (mountinfo), 0 for none. */
unsigned long mount_dev_at(const char *mnt);

/* Checks a daemon command line as a daemon would, without mounting:
 * 0, or the exit status after a line on stderr. */
typedef int (*TakeoverCheck)(char **argv);
/* `ckptfs --takeover MNT [-o opts]`: exit status (0 done; 2 the new command
 * line is refused; 1 anything else, with a line on stderr). */
int supervisor_takeover(const char *mountpoint, const char *opts, TakeoverCheck check);
