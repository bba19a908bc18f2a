/* -o supervise (issue 14, SPEC §7): the mount outlives its daemon.
 *
 * The process the user (or systemd, or mount(8)) started becomes a small
 * supervisor.  It makes the state memfd (state.h), runs the daemon as a
 * child (the same binary, exec'd), keeps a duplicate of the /dev/fuse
 * descriptor the daemon mounted with, and when the daemon dies starts a
 * new one that attaches to the same connection (kio replays INIT and asks
 * the kernel to resend).  `ckptfs --takeover MNT` asks it, over an abstract
 * Unix socket named for MNT, to stop its daemon and re-exec itself from
 * the binary that asked: both are upgraded, the connection and the state
 * stay.  Messages are SOCK_SEQPACKET datagrams of one word. */
#pragma once
#include <pthread.h>
#include <stdbool.h>

/* The daemon's end. */
typedef struct {
    int sock;        /* to the supervisor; -1 when not supervised */
    int state_fd;    /* the state memfd the supervisor made; -1: make one */
    int fuse_fd;     /* the live connection to attach to; -1: mount */
    bool daemonized; /* the supervisor detached from the terminal */
    pthread_t main_thread;
    void (*handover)(void *ctx); /* called (in a thread) when told to hand over */
    void *ctx;
} SupLink;

/* The exit status of a daemon that handed its connection over. */
#define SUPERVISOR_EXIT_HANDOVER 75

/* In main, options parsed.  In a daemon the supervisor started: fills link
 * and returns 0.  Not supervising: link->sock = -1, returns 0.  Otherwise
 * this process becomes the supervisor and returns only its exit status
 * (> 0, or 0 after a clean unmount) for main to exit with. */
int supervisor_start(char **argv, bool supervise, bool foreground, SupLink *link);
/* The daemon mounted: the supervisor keeps a duplicate of fuse_fd. */
int suplink_mounted(SupLink *l, int fuse_fd);
/* The daemon serves; from now on it listens for "hand over" (a thread). */
void suplink_ready(SupLink *l);
/* Detaches the mount at mnt (umount2 MNT_DETACH as root, else
 * fusermount3 -u -z): a dead one, or an attached daemon's at its end.
 * True when it went. */
bool unmount_lazily(const char *mnt);
/* `ckptfs --takeover MNT`: exit status (0 done, 1 with a line on stderr). */
int supervisor_takeover(const char *mountpoint);
