/* Mount tests' harness: a fresh backing dir and mountpoint under a temp
 * dir, `ckptfs -f [opts] BACKING MNT` started from $CKPTFS_BIN, a wait until
 * the mount shows, and a teardown that always unmounts: fusermount3 -u, and
 * on failure -u -z and SIGKILL of the daemon by its pid.  Mounts still up at
 * exit (a failed assertion that skipped teardown) are cleared by an atexit
 * hook.  Every test works in _state/t (a job namespace an anonymous caller
 * may write), m->work in the mount and m->bwork in the backing dir. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>

/* `call` fails with -1 and errno `e` (cmocka's assertions; errno is
 * cleared first so a stale value cannot pass). */
#define assert_errno(call, e)                                                                      \
    do {                                                                                           \
        errno = 0;                                                                                 \
        assert_int_equal((call), -1);                                                              \
        assert_int_equal(errno, (e));                                                              \
    } while (0)

typedef struct {
    char *base;              /* temp dir holding everything */
    char *backing;           /* base/backing */
    char *mnt;               /* base/mnt */
    char *work;              /* mnt/_state/t */
    char *bwork;             /* backing/_state/t */
    char *log;               /* daemon's stderr */
    pid_t pid;               /* daemon (its supervisor with -o supervise), 0 when not running */
    bool supervised;         /* started with -o supervise: m->pid is the supervisor */
    bool auto_unmount;       /* started with -o auto_unmount (served over /dev/fuse) */
    int exit_status;         /* of the last stop (waitpid status) */
    long nofile;             /* RLIMIT_NOFILE for the daemon, 0: inherited */
    bool backing_tmpfs;      /* mount_backing_tmpfs: the backing dir is a tmpfs */
    GPtrArray *expected_log; /* mount_expect_log: texts a warning may contain */
    /* The command mount_start runs the daemon under (NULL-terminated, found
     * in PATH, e.g. unshare --pid --fork --kill-child), its own arguments
     * after it; m->pid is then that command's.  NULL: the daemon itself. */
    const char *const *launcher;
} Mount;

/* Makes the directories (backing/_state/t exists) without mounting. */
Mount *mount_new(void);
/* Puts the backing directory on a tmpfs of its own (tmpfs options opts,
 * may be NULL) before the daemon starts, backing/_state/t made again; it
 * is detached by mount_free, or by the exit hook when a failed assertion
 * ended the test (not after SIGKILL).  For a small full file system, and
 * for tests that create hundreds of thousands of files: on the machine's
 * ext4, creating that many right after another test removed as many makes
 * ext4 search its recently freed inodes on every create, a minute of
 * set-up that has nothing to do with the daemon.  0; -EBUSY once mounted
 * or with the daemon running; else -errno of mount(2) or mkdir(2). */
int mount_backing_tmpfs(Mount *m, const char *opts);
/* Starts the daemon with extra arguments (NULL-terminated, may be NULL),
 * plus "-o $CKPTFS_TEST_OPTS" when that is set (the suite's variant);
 * returns 0 once mounted, -1 (and prints the daemon log) otherwise.  An
 * "-o ...supervise..." among the arguments (the last of supervise and
 * nosupervise wins) sets m->supervised, an auto_unmount m->auto_unmount. */
int mount_start(Mount *m, const char *const *args);
/* The process that serves the mount: the supervisor's only child that is
 * not a zombie (waiting up to 2 s for there to be exactly one while the
 * supervisor starts or replaces it, then the newest), or m->pid when the
 * mount is not supervised; 0 when there is none. */
pid_t mount_daemon_pid(Mount *m);
/* What happens to a supervised mount's daemon in a test. */
typedef enum { DAEMON_KILL, DAEMON_TAKEOVER } DaemonEvent;
/* kill -9 of the daemon (announcing the supervisor's warning), or
 * `$CKPTFS_BIN --takeover MNT`; then waits (20 s at most: a hang, not a
 * time limit) for the next daemon.  Its pid, or 0 with why appended to err. */
pid_t mount_replace_daemon(Mount *m, DaemonEvent ev, GString *err);
/* Unmounts and reaps the daemon (a supervised mount: the supervisor, which
 * exits once its daemon has unmounted; on failure the daemon is killed
 * too); returns 0 when it exited with status 0
 * (an ASan leak report makes it non-zero) and logged no warning or
 * critical message that the test did not announce (as libfuse's own test
 * harness does: a daemon that complains is a failure). */
int mount_stop(Mount *m);
/* The test expects the daemon to log a warning containing `text` (the
 * text of a line, "ckptfs[PID]: warning: text"). */
void mount_expect_log(Mount *m, const char *text);
/* Whether the daemon (or its supervisor) logged a line containing text. */
bool mount_log_has(Mount *m, const char *text);
/* mount_stop if needed, then removes the temp dir. */
void mount_free(Mount *m);
/* Prints the daemon log to stderr. */
void mount_dump_log(Mount *m);

/* g_build_filename shorthands (g_free the result). */
char *mp(Mount *m, const char *rel); /* inside m->work */
char *bp(Mount *m, const char *rel); /* inside m->bwork */

/* Whole-file helpers; abort the test on I/O errors. */
void put_file(const char *path, const char *data);
char *get_file(const char *path); /* g_free */

/* The value of one line of _views/.metrics, e.g.
 * "ckptfs_ops_total{op=\"fsyncdir\"}" (the mount="<mnt>" label that every
 * series has first is added here); -1 if absent. */
int64_t mount_metric(Mount *m, const char *series);

/* sync, then echo 2 > /proc/sys/vm/drop_caches: the kernel forgets every
 * dentry and inode nothing uses, machine-wide (aborts the test when it
 * cannot).  It waits while a test of another process holds the caches. */
void kernel_drop_caches(void);
/* Keeps every test's kernel_drop_caches waiting until caches_release: for
 * a test that counts what the kernel's caches spare the daemon (the suites
 * run two at a time).  A test that holds them neither drops them nor forks
 * a child that outlives the hold, and releases them in caches_teardown too
 * (cmocka runs it after a failed test). */
void caches_hold(void);
void caches_release(void);
int caches_teardown(void **state);
/* kernel_drop_caches until m's daemon holds at most at_most nodes, `tries`
 * times at most, 100 ms apart (the kernel's forgets arrive
 * asynchronously); the nodes left (-1: no reading). */
int64_t mount_forget_down_to(Mount *m, int64_t at_most, int tries);

/* The entries of dir other than "." and ".." (-1: it cannot be opened);
 * with stat_each, each is lstat'ed too (a failure aborts the test). */
int dir_entries(const char *dir, bool stat_each);
/* Open descriptors of m's daemon (m->pid), pipes counted; -1: gone. */
int mount_daemon_fds(Mount *m);

/* Runs argv, returns the wait status (-1 when it could not start). */
int run_cmd(const char *const *argv, char **out);

/* cmocka setup/teardown that mount with no extra options. */
int mount_setup(void **state);
int mount_teardown(void **state);
