/* A FUSE mount served by a child process: the one implementation behind
 * the programs that start ckptfs (or a peer) themselves and must always
 * take the mount down again: `ckptctl run`, ckpt-bench and the mount tests'
 * harness.  Each spawns its daemon its own way (log files, rlimits, signal
 * masks), then uses these to wait for the mount and to end it: fusermount3
 * -u (retried while busy), else -u -z, and the daemon killed by pid when it
 * does not exit. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

typedef enum {
    MOUNTRUN_NONE, /* no mount at the path */
    MOUNTRUN_LIVE, /* a FUSE mount whose daemon answers */
    MOUNTRUN_DEAD, /* a FUSE mount whose daemon is gone (mount_gone.h) */
} MountState;

/* What is at mnt, from statfs, which always reaches the daemon (one that
 * answers with an error, EIO or EACCES, is live if the mount table has a
 * FUSE mount there): a stat may
 * be answered from the kernel's cache even for a dead one, so none is made
 * unless the parent is a FUSE file system too (then a directory that is not
 * a mount point has its parent's st_dev). */
MountState mountrun_state(const char *mnt);

/* fusermount3 -u [-z] mnt; true when it succeeded.  err_out (optional):
 * its stderr, stripped (g_free). */
bool mountrun_fusermount(const char *mnt, bool lazy, char **err_out);

/* Up to max live (not zombie) children of pid, in the kernel's order (the
 * newest last): the daemons of a ckptfs -o supervise. */
int mountrun_children(pid_t pid, pid_t *out, int max);
/* The state letter of /proc/<pid>/stat ('Z': a zombie), 0 if gone. */
char mountrun_proc_state(pid_t pid);

/* How a caller waits: pause(data, ms) waits up to ms (it may return early)
 * and returns false to give up (ckptctl run: a termination signal); NULL
 * sleeps.  reap(data, &status) reaps the daemon when it ended (true, with
 * its wait status); NULL: waitpid(pid, WNOHANG). */
typedef struct {
    pid_t pid;
    const char *mnt;
    bool (*pause)(void *data, int ms);
    bool (*reap)(void *data, int *status);
    void *data;
} MountRun;

typedef enum {
    MOUNTRUN_UP,      /* mnt is a live mount */
    MOUNTRUN_EXITED,  /* the daemon exited first (*status) */
    MOUNTRUN_TIMEOUT, /* neither within the time */
    MOUNTRUN_GAVE_UP, /* pause said so */
} MountWait;

/* Waits for the mount, polling every poll_us. */
MountWait mountrun_wait_up(const MountRun *m, int timeout_ms, int poll_us, int *status);
/* Waits up to ms for the daemon to exit: true (*status) once reaped. */
bool mountrun_wait_exit(const MountRun *m, int ms, int *status);

typedef struct {
    int busy_ms;         /* how long a busy mount is retried (every 100 ms) before -u -z */
    int exit_ms;         /* how long the daemon may take to exit once unmounted */
    int term_ms;         /* then SIGTERM, and this long before SIGKILL */
    bool term_unmounted; /* SIGTERM a daemon that has no mount (it never came up) */
    /* optional: the busy time ran out, before the lazy unmount (a message) */
    void (*on_busy)(void *data, const char *err);
    /* optional: before the SIGKILL of m->pid (a supervisor's children) */
    void (*on_kill)(void *data);
} MountStop;

/* Takes the mount down and reaps the daemon (*status: its wait status,
 * -1 if it could not be reaped; m->pid 0: no daemon any more, only its
 * mount).  Returns true when the daemon exited by itself after a plain
 * unmount (fusermount3 -u): false after a lazy unmount or a signal. */
bool mountrun_stop(const MountRun *m, const MountStop *how, int *status);

/* Open descriptors of a process, pipes counted apart in *pipes (libfuse
 * keeps one splice pipe per worker thread); -1 when it is gone. */
int mountrun_count_fds(pid_t pid, int *pipes);

/* The ckptfs daemon a tool starts when not told which (g_free), NULL when
 * none is found: ../fs/ckptfs next to the running program (a build tree),
 * else ckptfs in PATH, else /usr/local/sbin, /usr/sbin and /sbin (where it
 * is installed, and which a user's PATH often lacks). */
char *mountrun_find_ckptfs(void);
