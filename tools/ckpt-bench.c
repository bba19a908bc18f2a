/* ckpt-bench: runs the workloads of ckpt-bench(1) on a backing directory
 * directly and through a ckptfs mount of that same directory, in one run, and
 * prints every figure with its ratio to native and the target. It measures,
 * it does not judge: exit 0 whether or not targets are met, 2 on a setup
 * error or when a workload fails.
 *
 * Choices of method, stated so the figures can be read:
 * - every write goes under _state/<bench job>/, a job namespace that an
 *   anonymous caller may write under the default policy;
 * - run r does native then mount when r is even, mount then native when odd;
 *   sync() precedes every timed part; the median of --runs is reported, and
 *   the ratio is of the two medians;
 * - commit: 4 threads commit for a fixed time (5 s x scale), each in its own
 *   _state/<J>/v1/<t>/; commits/s = all commits / time until the last thread
 *   stopped;
 * - seq read cold drops the page cache (both the FUSE inode's and the
 *   backing's) before the timed read; warm reads once, then times a second;
 * - rand read: the file is read fully first through the descriptor that then
 *   does 4,000,000 x scale preads of 4 KiB at seeded 4 KiB-aligned offsets,
 *   the same offsets on both sides;
 * - meta: create = 200 mkdir + 20,000 open(O_CREAT|O_EXCL)+close; find = a
 *   readdir-only walk (d_type, like find without predicates); stat = fstatat
 *   of every file relative to its open directory, warm (right after create
 *   and find, as `find` + stat would be); find and stat are repeated 10
 *   times per run, since one pass takes milliseconds; unlink = unlinkat of
 *   every file, rmdir untimed; every figure is files per second;
 * - view: one untimed walk per side first (warm), then timed walks with
 *   fstatat of every entry, over _views/<J>/state and over _state/<J>;
 * - mount: the fixture is warm (just written); a cold line (drop_caches
 *   first) is printed for information, with no target. Memory is VmRSS after
 *   the ls minus VmRSS of a mount of an empty directory, per marker found.
 *
 * --peers runs the same workloads, in the same run, through the FUSE file
 * systems a user would mount instead (see peer_defs): each workload mounts
 * ckptfs, then each peer in turn, on the same backing directory and mount
 * point, and every system is paired with native runs of its own (native,
 * system, alternated as above), so a system's ratio is of its own pair of
 * medians. The view and mount workloads exist only for ckptfs. A peer that
 * is not installed, does not build or does not mount is reported and
 * skipped; a peer that fails a workload gets "failed" in that cell; neither
 * changes the exit status.
 *
 * --outlive runs none of the above: it mounts ckptfs -o supervise over the
 * scratch directory, runs the commit loop (4 threads, 64 KiB commits: tmp,
 * write, fsync, close, rename over one of 4 final names, fsync of the
 * directory, then a read-back of the previous commit) and, after a second
 * without events, kills the daemon (the supervisor's child) with SIGKILL
 * --kills times, then runs `ckptfs --takeover MNT` --takeovers times; events
 * are 0.5 s apart and each waits until the loop committed again. It prints
 * the operations done and failed, commit latency p50/p99/p100 over the run
 * and in each event's window (commits in flight when it was sent or started
 * within 0.5 s after), and the daemon's descriptors, ckptfs_nodes and
 * ckptfs_daemon_attaches_total before and after (idle, dentries dropped).
 * At the end every acknowledged commit is compared byte for byte through
 * the mount and in the backing dir. --soak is --outlive with 1,000 kills
 * (not for CI). Exit 2 when an operation failed, a byte was wrong or an
 * event did not complete (with --soak: also when descriptors or nodes grew);
 * no duration decides anything. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib.h>
#include <json-glib/json-glib.h>

#include "ckptfs-config.h"
#include "jsonout.h"
#include "mountrun.h"

#define MiB              (1024u * 1024u)
#define COMMIT_THREADS   4
#define COMMIT_SECONDS   5.0
#define SEQ_BYTES        (1024.0 * MiB)
#define RAND_BYTES       (256.0 * MiB)
#define RAND_OPS         4000000.0
#define META_DIRS        200.0
#define META_PER_DIR     100
#define META_REPEAT      10 /* find and stat of 20,000 warm files take milliseconds */
#define VIEW_FILES       100000.0
#define VIEW_SUBTASKS    10
#define VIEW_PER_DIR     100
#define MOUNT_JOBS       10000.0
#define MOUNT_MARKERS    10
#define MOUNT_TIMEOUT_MS 20000
#define VIEW_WAIT_MS     6000
#define SETUP_ERROR      2
#define MAX_SYSTEMS      7 /* ckptfs in each transport, and the peers */
#define MAX_PHASES       8 /* figures one measurement gives */

static const char passthrough_ll_src[] = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c";
/* FUSE over io_uring is off until the fuse module's switch is on */
static const char enable_uring_param[] = "/sys/module/fuse/parameters/enable_uring";

static const char *const workload_names[] = {"commit64k", "commit4m", "seqwrite", "seqread",
                                             "randread",  "meta",     "view",     "mount"};

/* The systems a workload runs through: ckptfs first, then the peers of
 * --peers, each mounted with what a user would choose for speed while
 * keeping POSIX semantics through the mount: its documented speed option,
 * its own defaults otherwise (fuse-overlayfs asks for the writeback cache by
 * default, the others do not), nothing that drops an fsync. */
typedef enum {
    SYS_CKPTFS,
    SYS_PASSTHROUGH_LL, /* libfuse's example, built at bench time: -o cache=always */
    SYS_OVERLAY,        /* fuse-overlayfs -o threaded=1: Debian 12's 1.10 has it */
    SYS_MERGERFS,       /* mergerfs -o cache.files=auto-full */
    SYS_BINDFS,         /* bindfs --multithreaded */
    SYS_UNIONFS,        /* unionfs-fuse, the backing as its one RW branch */
} SystemKind;

typedef struct {
    const char *name;
    SystemKind kind;
    const char *program; /* looked up in PATH; NULL: built from passthrough_ll_src */
    const char *package; /* Debian package that brings it */
} PeerDef;

static const PeerDef peer_defs[] = {
    {"passthrough_ll", SYS_PASSTHROUGH_LL, NULL, "libfuse3-dev"},
    {"fuse-overlayfs", SYS_OVERLAY, "fuse-overlayfs", "fuse-overlayfs"},
    {"mergerfs", SYS_MERGERFS, "mergerfs", "mergerfs"},
    {"bindfs", SYS_BINDFS, "bindfs", "bindfs"},
    {"unionfs-fuse", SYS_UNIONFS, "unionfs", "unionfs-fuse"},
};

/* Peers that drop the directory fsync: their commit figure is not durable.
 * Measured on 2026-12-02 (Debian 12: mergerfs 2.33.5, bindfs 1.14.7,
 * unionfs-fuse 1.0, fuse-overlayfs 1.10, libfuse 3.14 passthrough_ll; kernel
 * 6.18) by mounting each peer with the options above, attaching
 * `strace -f -y -e trace=fsync,fdatasync,sync_file_range,syncfs -p <daemon>`
 * and running 10 commits (write tmp, fsync, rename, fsync dir, unlink n-2)
 * through it: these three fsynced the 10 files and never the directory;
 * fuse-overlayfs and passthrough_ll fsynced both (10 + 10). */
static const char *const peers_dropping_dirsync[] = {"mergerfs", "bindfs", "unionfs-fuse"};

typedef struct {
    const char *name;
    SystemKind kind;
    char *exe;
    char *skip;             /* why it is not run, or NULL */
    const char *skip_cell;  /* what its table cells say then */
    gboolean drops_dirsync; /* listed in peers_dropping_dirsync */
    const char *opts;       /* ckptfs: -o options of this system, after --mount-opts */
} System;

/* What ckptfs's daemon did for one figure's operations, from the deltas of
 * its .metrics over the mounted runs: per operation (the op label), the
 * requests, and of the sampled ones their count, CPU seconds and context
 * switches. */
typedef struct {
    double requests, sampled, cpu_s, switches;
} ProfOp;
typedef struct {
    GHashTable *ops;   /* op name (owned) -> ProfOp* (owned) */
    double operations; /* commits, files, ... of the runs */
} Profile;

typedef enum {
    TARGET_RATIO_MIN, /* mount/native throughput >= target */
    TARGET_RATIO_MAX, /* mount/native time <= target */
    TARGET_VALUE_MAX, /* the mount figure itself <= target */
    TARGET_NONE,      /* information only */
} TargetKind;

typedef struct {
    const char *workload;
    char *label;
    const char *unit;
    TargetKind kind;
    double target;
    GArray *native; /* double per run */
    GArray *mount;
    const char *status; /* "ok", "n/a", "skipped", "failed" */
    char *note;
    /* per system (index into Bench.systems); [0] is ckptfs, aliased by
     * native and mount above */
    GArray *sys_native[MAX_SYSTEMS];
    GArray *sys_mount[MAX_SYSTEMS];
    const char *sys_cell[MAX_SYSTEMS]; /* NULL: the ratio; else what the cell says */
    char *sys_note[MAX_SYSTEMS];       /* why a peer's cell failed */
    const char *per;                   /* what an operation is ("commit", "file"), or NULL */
    Profile prof[MAX_SYSTEMS];         /* ckptfs systems only */
} Result;

typedef struct {
    /* options */
    char *dir_opt;
    char *ckptfs;
    char *mount_opts;
    char *only;
    char *mounted_dir;
    char *backing_opt;
    double scale;
    int runs;
    gboolean json;
    gboolean peers;
    gint64 mount_jobs; /* jobs of the mount workload's fixture (0: MOUNT_JOBS x scale) */
    int idle_s;        /* seconds of the idle-CPU line */
    gboolean outlive;  /* --outlive: kill -9 and --takeover under the commit loop */
    gboolean outlive_soak;
    int outlive_kills;     /* -1 until set: 20 (1,000 with --soak) */
    int outlive_takeovers; /* -1 until set: 20 (0 with --soak) */

    /* set-up */
    char *exe_dir;
    char *scratch; /* made by us and removed afterwards; NULL with --mounted-dir */
    char *backing;
    char *mnt;
    char *job;      /* every write goes under _state/<job> */
    char *view_job; /* the job whose view the view workload walks */
    char *fs_type;
    gboolean can_drop;
    gboolean selected[G_N_ELEMENTS(workload_names)];
    guint8 *data; /* 4 MiB of seeded bytes, the source of every write */

    /* the running daemon; shared with the signal thread */
    GMutex lock;
    GPid daemon;
    char *daemon_mnt;
    gboolean daemon_stopping; /* lock: daemon_stop (not a kill) is ending the daemon */

    /* what the workloads run through: [0] ckptfs (over io_uring where the
     * kernel offers it), maybe ckptfs over /dev/fuse, then the peers */
    System systems[MAX_SYSTEMS];
    guint nsystems;
    guint cur;       /* the system being measured */
    char *uring_was; /* the fuse module's enable_uring before the run, to restore */

    /* the measurement under way on a ckptfs mount: a snapshot of .metrics
     * at its start, and each figure's deltas (prof_start, prof_stop) */
    GHashTable *prof_snap;
    GHashTable *prof_delta[MAX_PHASES];
    double prof_ops[MAX_PHASES];

    GPtrArray *results;
    GPtrArray *notes;
    gboolean failed;
    gboolean mount_failed; /* the daemon did not mount once: later workloads are not run */
} Bench;

/* One side of a run: the directory every path of a workload is relative to. */
typedef struct {
    const char *root;
    gboolean mounted;
} Side;

typedef int (*MeasureFn)(Bench *b, const Side *side, void *ctx, double *out);

static gboolean is_ckptfs(const Bench *b, guint s)
{
    return b->systems[s].kind == SYS_CKPTFS;
}

/* ---- small helpers ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double median(GArray *values)
{
    if (!values || values->len == 0)
        return NAN;
    g_autoptr(GArray) v = g_array_sized_new(FALSE, FALSE, sizeof(double), values->len);
    g_array_append_vals(v, values->data, values->len);
    for (guint i = 1; i < v->len; i++)
        for (guint j = i; j > 0 && g_array_index(v, double, j - 1) > g_array_index(v, double, j);
             j--) {
            double t = g_array_index(v, double, j);
            g_array_index(v, double, j) = g_array_index(v, double, j - 1);
            g_array_index(v, double, j - 1) = t;
        }
    guint n = v->len;
    if (n % 2)
        return g_array_index(v, double, n / 2);
    return (g_array_index(v, double, n / 2 - 1) + g_array_index(v, double, n / 2)) / 2;
}

static guint64 scaled(double base, double scale, guint64 min)
{
    double v = round(base * scale);
    return v < (double)min ? min : (guint64)v;
}

static char *human_bytes(guint64 n)
{
    if (n >= (guint64)1024 * MiB && n % ((guint64)1024 * MiB) == 0)
        return g_strdup_printf("%" G_GUINT64_FORMAT "GiB", n / ((guint64)1024 * MiB));
    if (n >= MiB && n % MiB == 0)
        return g_strdup_printf("%" G_GUINT64_FORMAT "MiB", n / MiB);
    if (n >= 1024 && n % 1024 == 0)
        return g_strdup_printf("%" G_GUINT64_FORMAT "KiB", n / 1024);
    return g_strdup_printf("%" G_GUINT64_FORMAT "B", n);
}

static const char *fs_type_name(long type)
{
    switch ((unsigned long)type) {
    case 0xEF53:
        return "ext4";
    case 0x58465342:
        return "xfs";
    case 0x01021994:
        return "tmpfs";
    case 0x794c7630:
        return "overlay";
    case 0x9123683E:
        return "btrfs";
    case 0x65735546:
        return "fuse";
    case 0x6969:
        return "nfs";
    case 0x2FC12FC1:
        return "zfs";
    default:
        return "unknown";
    }
}

static int drop_caches(void)
{
    sync();
    int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int ret = write(fd, "3\n", 2) == 2 ? 0 : -errno;
    close(fd);
    return ret;
}

static int rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* FTW_MOUNT: never descends into a mount left inside the scratch directory. */
static void rm_rf(const char *path)
{
    nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int write_all(int fd, const guint8 *data, gsize len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        data += n;
        len -= (gsize)n;
    }
    return 0;
}

/* Writes size bytes (from the 4 MiB pattern, 1 MiB at a time) and fsyncs. */
static int write_file_at(int dirfd, const char *name, const guint8 *data, guint64 size, int flags)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0644);
    if (fd < 0)
        return -errno;
    int ret = 0;
    for (guint64 off = 0; off < size && ret == 0;) {
        gsize n = (gsize)MIN((guint64)MiB, size - off);
        ret = write_all(fd, data + (off % (4 * MiB)), n);
        off += n;
    }
    if (ret == 0 && fsync(fd) < 0)
        ret = -errno;
    if (close(fd) < 0 && ret == 0)
        ret = -errno;
    return ret;
}

static int read_fd(int fd, guint8 *buf, guint64 *total)
{
    guint64 sum = 0;
    for (;;) {
        ssize_t n = read(fd, buf, MiB);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        sum += (guint64)n;
    }
    if (total)
        *total = sum;
    return 0;
}

static int read_file(const char *path, guint8 *buf, guint64 *total)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int ret = read_fd(fd, buf, total);
    close(fd);
    return ret;
}

static int empty_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    struct dirent *de;
    int ret = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            unlinkat(dirfd(d), de->d_name, 0) < 0 && ret == 0)
            ret = -errno;
    closedir(d);
    return ret;
}

/* A recursive walk like find: readdir, and stat only when asked (find+stat)
 * or when the file system gives no d_type. */
static int walk(int parent, const char *name, gboolean do_stat, guint64 *count)
{
    int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        return -e;
    }
    int ret = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) {
            errno = 0;
            continue;
        }
        (*count)++;
        gboolean is_dir = de->d_type == DT_DIR;
        if (do_stat || de->d_type == DT_UNKNOWN) {
            struct stat st;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                ret = -errno;
                break;
            }
            is_dir = S_ISDIR(st.st_mode);
        }
        if (is_dir && (ret = walk(dirfd(d), de->d_name, do_stat, count)) < 0)
            break;
        errno = 0;
    }
    if (ret == 0 && errno)
        ret = -errno;
    closedir(d);
    return ret;
}

static guint64 count_named(const char *root, const char *leaf)
{
    /* nftw has no user data; a walk of our own keeps the count local. */
    guint64 n = 0;
    g_autoptr(GPtrArray) stack = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(stack, g_strdup(root));
    while (stack->len > 0) {
        g_autofree char *dir = g_ptr_array_steal_index(stack, stack->len - 1);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            if (de->d_type == DT_DIR)
                g_ptr_array_add(stack, g_build_filename(dir, de->d_name, NULL));
            else if (!strcmp(de->d_name, leaf))
                n++;
        }
        closedir(d);
    }
    return n;
}

static long vm_rss_kib(GPid pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return -1;
    const char *p = strstr(text, "\nVmRSS:");
    return p ? strtol(p + 7, NULL, 10) : -1;
}

/* ---- the daemon ---- */

static void child_setup(gpointer data)
{
    (void)data;
    /* The bench blocks SIGINT/SIGTERM for its signal thread; children must
     * not inherit that, or the daemon would ignore SIGTERM. */
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, NULL);
}

/* Clears whatever daemon is running: unmount (lazily when busy) and kill.
 * Caller holds lock. */
static pid_t out_daemon(pid_t sup);

static void bench_busy(void *data, const char *err)
{
    Bench *b = data;
    if (b->daemon_stopping)
        g_printerr("ckpt-bench: fusermount3 -u %s failed (%s); lazy unmount and kill\n",
                   b->daemon_mnt, err && *err ? err : "?");
}

/* Unmounts and reaps the daemon (a ckptfs -o supervise: its daemon child
 * goes too when it had to be killed).  exit_ms: how long it may take to
 * exit after the unmount.  Returns whether it exited by itself; *status:
 * its wait status.  Caller holds lock. */
static bool daemon_end_locked(Bench *b, int exit_ms, int *status)
{
    pid_t child = out_daemon(b->daemon);
    MountRun run = {b->daemon, b->daemon_mnt, NULL, NULL, b};
    MountStop how = {.busy_ms = 0, .exit_ms = exit_ms, .term_ms = 2000, .on_busy = bench_busy};
    bool clean = mountrun_stop(&run, &how, status);
    if (!clean && child > 0)
        kill(child, SIGKILL);
    b->daemon = 0;
    g_clear_pointer(&b->daemon_mnt, g_free);
    return clean;
}

static void daemon_kill_locked(Bench *b)
{
    if (b->daemon <= 0)
        return;
    int status;
    daemon_end_locked(b, 0, &status);
}

static int daemon_stop(Bench *b)
{
    g_mutex_lock(&b->lock);
    if (b->daemon <= 0) {
        g_mutex_unlock(&b->lock);
        return 0;
    }
    int ret = 0;
    int status = -1;
    const char *name = b->systems[b->cur].name;
    b->daemon_stopping = TRUE;
    if (!daemon_end_locked(b, 10000, &status))
        ret = -EBUSY;
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        g_printerr("ckpt-bench: warning: %s exited with status %d after unmount\n", name,
                   WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    b->daemon_stopping = FALSE;
    g_mutex_unlock(&b->lock);
    return ret;
}

/* The command line that mounts backing on mnt in the foreground. */
static GPtrArray *system_argv(const Bench *b, const System *sys, const char *backing,
                              const char *mnt)
{
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup(sys->exe));
    switch (sys->kind) {
    case SYS_CKPTFS:
        g_ptr_array_add(argv, g_strdup("-f"));
        if (b->mount_opts && *b->mount_opts) {
            g_ptr_array_add(argv, g_strdup("-o"));
            g_ptr_array_add(argv, g_strdup(b->mount_opts));
        }
        if (sys->opts) {
            g_ptr_array_add(argv, g_strdup("-o"));
            g_ptr_array_add(argv, g_strdup(sys->opts));
        }
        break;
    case SYS_PASSTHROUGH_LL:
        /* the backing is only changed behind the mount between a mounted
         * run's end and the next, and the bench cleans up through the mount */
        g_ptr_array_add(argv, g_strdup("-f"));
        g_ptr_array_add(argv, g_strdup("-o"));
        g_ptr_array_add(argv, g_strdup_printf("source=%s,cache=always", backing));
        g_ptr_array_add(argv, g_strdup(mnt));
        g_ptr_array_add(argv, NULL);
        return argv;
    case SYS_OVERLAY:
        /* the backing is the upper layer, under an empty lower one */
        g_ptr_array_add(argv, g_strdup("-f"));
        g_ptr_array_add(argv, g_strdup("-o"));
        g_ptr_array_add(argv,
                        g_strdup_printf("lowerdir=%s/ovl-lower,upperdir=%s,workdir=%s/ovl-work,"
                                        "threaded=1",
                                        b->scratch, backing, b->scratch));
        break;
    case SYS_MERGERFS:
        g_ptr_array_add(argv, g_strdup("-f"));
        g_ptr_array_add(argv, g_strdup("-o"));
        g_ptr_array_add(argv, g_strdup("cache.files=auto-full"));
        break;
    case SYS_BINDFS:
        g_ptr_array_add(argv, g_strdup("-f"));
        g_ptr_array_add(argv, g_strdup("--multithreaded"));
        break;
    case SYS_UNIONFS:
        g_ptr_array_add(argv, g_strdup("-f"));
        g_ptr_array_add(argv, g_strdup_printf("%s=RW", backing));
        g_ptr_array_add(argv, g_strdup(mnt));
        g_ptr_array_add(argv, NULL);
        return argv;
    }
    if (sys->kind != SYS_OVERLAY)
        g_ptr_array_add(argv, g_strdup(backing));
    g_ptr_array_add(argv, g_strdup(mnt));
    g_ptr_array_add(argv, NULL);
    return argv;
}

/* Spawns the current system (`ckptfs -f [-o opts] backing mnt`, or a peer's
 * command line) and waits until mnt is a live mount (mountrun_wait_up).
 * *t0 is the time just before the spawn, for the mount-time
 * figure. */
static int daemon_start(Bench *b, const char *backing, const char *mnt, double *t0)
{
    g_autofree char *parent = g_path_get_dirname(mnt);
    struct stat pst;
    if (stat(parent, &pst) < 0)
        return -errno;
    const System *sys = &b->systems[b->cur];
    g_autoptr(GPtrArray) argv = system_argv(b, sys, backing, mnt);

    g_autoptr(GError) error = NULL;
    GPid pid = 0;
    g_mutex_lock(&b->lock);
    double start = now_s();
    gboolean ok = g_spawn_async(NULL, (char **)argv->pdata, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD | G_SPAWN_STDOUT_TO_DEV_NULL, child_setup,
                                NULL, &pid, &error);
    if (ok) {
        b->daemon = pid;
        b->daemon_mnt = g_strdup(mnt);
    }
    g_mutex_unlock(&b->lock);
    if (!ok) {
        g_printerr("ckpt-bench: cannot run %s: %s\n", sys->exe, error->message);
        return -ENOEXEC;
    }
    if (t0)
        *t0 = start;

    MountRun run = {pid, mnt, NULL, NULL, NULL};
    int status = 0;
    switch (mountrun_wait_up(&run, MOUNT_TIMEOUT_MS, 200, &status)) {
    case MOUNTRUN_UP:
        return 0;
    case MOUNTRUN_EXITED:
        g_mutex_lock(&b->lock);
        b->daemon = 0;
        g_clear_pointer(&b->daemon_mnt, g_free);
        g_mutex_unlock(&b->lock);
        g_printerr("ckpt-bench: %s exited (status %d) before %s was mounted\n", sys->exe,
                   WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), mnt);
        return -ECHILD;
    default:
        g_printerr("ckpt-bench: %s did not mount %s within %d s\n", sys->exe, mnt,
                   MOUNT_TIMEOUT_MS / 1000);
        g_mutex_lock(&b->lock);
        daemon_kill_locked(b);
        g_mutex_unlock(&b->lock);
        return -ETIMEDOUT;
    }
}

/* The mount the throughput workloads use: spawned on the backing directory,
 * or the one given by --mounted-dir. A probe written natively must show
 * through it, so a wrong --backing is caught before any figure is printed.
 * A spawned mount gets the probe written before it starts and removed
 * through it: a daemon that keys its inodes by st_ino (fuse-overlayfs) would
 * otherwise keep the probe's node, and ext4 gives its inode number to the
 * next file created, whose fsync then fails with ENOENT. */
static int bench_mount(Bench *b)
{
    System *sys = &b->systems[b->cur];
    if (b->cur == 0 && b->mount_failed)
        return -ECANCELED;
    g_autofree char *name = g_strdup_printf("_state/%s/probe-%d", b->job, (int)getpid());
    g_autofree char *native = g_build_filename(b->backing, name, NULL);
    g_autofree char *mounted = g_build_filename(b->mnt, name, NULL);
    int ret = write_file_at(AT_FDCWD, native, b->data, 12345, O_TRUNC);
    if (ret < 0)
        return ret;
    if (!b->mounted_dir) {
        ret = daemon_start(b, b->backing, b->mnt, NULL);
        if (ret < 0) {
            unlink(native);
            if (b->cur == 0) {
                b->mount_failed = TRUE;
            } else {
                /* a peer that does not mount once is not tried again */
                sys->skip =
                    g_strdup_printf("did not mount (%s)", ret == -ECHILD ? "exited, see its stderr"
                                                          : ret == -ETIMEDOUT ? "timed out"
                                                                              : g_strerror(-ret));
                sys->skip_cell = "no mount";
            }
            return ret;
        }
    }
    struct stat st;
    if (stat(mounted, &st) < 0 || st.st_size != 12345) {
        g_printerr("ckpt-bench: %s (%s) does not show %s of the backing directory\n", b->mnt,
                   sys->name, name);
        ret = -ENOENT;
        if (b->cur > 0) {
            sys->skip = g_strdup("does not show the backing directory");
            sys->skip_cell = "no mount";
        }
    }
    if (b->mounted_dir || ret < 0 || unlink(mounted) < 0)
        unlink(native);
    return ret;
}

/* ---- results ---- */

static Result *result_new(Bench *b, const char *workload, char *label, const char *unit,
                          TargetKind kind, double target)
{
    Result *r = g_new0(Result, 1);
    r->workload = workload;
    r->label = label;
    r->unit = unit;
    r->kind = kind;
    r->target = target;
    for (int s = 0; s < MAX_SYSTEMS; s++) {
        r->sys_native[s] = g_array_new(FALSE, FALSE, sizeof(double));
        r->sys_mount[s] = g_array_new(FALSE, FALSE, sizeof(double));
    }
    r->native = r->sys_native[0];
    r->mount = r->sys_mount[0];
    r->status = "ok";
    g_ptr_array_add(b->results, r);
    return r;
}

static void result_free(gpointer p)
{
    Result *r = p;
    g_free(r->label);
    g_free(r->note);
    for (int s = 0; s < MAX_SYSTEMS; s++) {
        g_array_unref(r->sys_native[s]);
        g_array_unref(r->sys_mount[s]);
        g_free(r->sys_note[s]);
        if (r->prof[s].ops)
            g_hash_table_unref(r->prof[s].ops);
    }
    g_free(r);
}

static double result_ratio(const Result *r)
{
    double n = median(r->native), m = median(r->mount);
    if (r->kind == TARGET_VALUE_MAX || r->kind == TARGET_NONE || isnan(n) || isnan(m) || n == 0)
        return NAN;
    return m / n;
}

static gboolean result_met(const Result *r)
{
    double ratio = result_ratio(r), m = median(r->mount);
    switch (r->kind) {
    case TARGET_RATIO_MIN:
        return !isnan(ratio) && ratio >= r->target;
    case TARGET_RATIO_MAX:
        return !isnan(ratio) && ratio <= r->target;
    case TARGET_VALUE_MAX:
        return !isnan(m) && m <= r->target;
    case TARGET_NONE:
        break;
    }
    return FALSE;
}

static char *fmt_value(double v)
{
    if (isnan(v))
        return g_strdup("-");
    return g_strdup_printf(fabs(v) >= 10 ? "%.1f" : "%.3f", v);
}

static char *fmt_target(const Result *r)
{
    switch (r->kind) {
    case TARGET_RATIO_MIN:
        return g_strdup_printf(">=%.2f", r->target);
    case TARGET_RATIO_MAX:
        return g_strdup_printf("<=%g", r->target);
    case TARGET_VALUE_MAX:
        return g_strdup_printf("<=%g", r->target);
    case TARGET_NONE:
        break;
    }
    return g_strdup("-");
}

static void print_profile(const Bench *b, const Result *r);
static void json_profile(JsonBuilder *jb, const Result *r, guint s);

static void print_result(const Bench *b, const Result *r)
{
    if (b->json)
        return;
    if (strcmp(r->status, "ok")) {
        printf("%-40s %s%s%s\n", r->label, r->status, r->note ? " " : "", r->note ? r->note : "");
        fflush(stdout);
        return;
    }
    g_autofree char *n = fmt_value(median(r->native));
    g_autofree char *m = fmt_value(median(r->mount));
    double ratio = result_ratio(r);
    g_autofree char *rs = isnan(ratio) ? g_strdup("-") : g_strdup_printf("%.3f", ratio);
    g_autofree char *t = fmt_target(r);
    const char *met = r->kind == TARGET_NONE ? "-" : result_met(r) ? "yes" : "no";
    printf("%-40s %12s %12s %7s %7s %4s%s%s\n", r->label, n, m, rs, t, met, r->note ? "  # " : "",
           r->note ? r->note : "");
    print_profile(b, r);
}

static void result_fail(Bench *b, Result *r, const char *what, int err)
{
    r->status = "failed";
    if (err == -ECANCELED)
        r->note = g_strdup("(not run: the mount failed above)");
    else if (err == -ECHILD)
        r->note = g_strdup_printf("(%s: ckptfs exited, see its stderr)", what);
    else if (err == -ETIMEDOUT)
        r->note = g_strdup_printf("(%s: ckptfs did not mount in time)", what);
    else
        r->note = g_strdup_printf("(%s: %s)", what, g_strerror(-err));
    b->failed = TRUE;
}

static void json_number_or_null(JsonBuilder *jb, const char *key, double v)
{
    json_builder_set_member_name(jb, key);
    if (isnan(v))
        json_builder_add_null_value(jb);
    else
        json_builder_add_double_value(jb, v);
}

static void json_runs(JsonBuilder *jb, const char *key, GArray *runs)
{
    json_builder_set_member_name(jb, key);
    json_builder_begin_array(jb);
    for (guint i = 0; i < runs->len; i++)
        json_builder_add_double_value(jb, g_array_index(runs, double, i));
    json_builder_end_array(jb);
}

static double system_ratio(const Result *r, guint s)
{
    double n = median(r->sys_native[s]), m = median(r->sys_mount[s]);
    if (r->kind == TARGET_VALUE_MAX || r->kind == TARGET_NONE || isnan(n) || isnan(m) || n == 0)
        return NAN;
    return m / n;
}

static gboolean is_commit(const Result *r)
{
    return g_str_has_prefix(r->workload, "commit");
}

/* ckptfs's cell of the peers table: its ratio, or the figure itself on the
 * lines whose target is on the figure. */
static char *ckptfs_cell(const Result *r)
{
    if (strcmp(r->status, "ok"))
        return g_strdup(r->status);
    if (r->kind == TARGET_VALUE_MAX || r->kind == TARGET_NONE)
        return fmt_value(median(r->mount));
    double ratio = result_ratio(r);
    return isnan(ratio) ? g_strdup("-") : g_strdup_printf("%.3f", ratio);
}

static char *peer_cell(const Bench *b, const Result *r, guint s)
{
    if (r->sys_cell[s])
        return g_strdup(r->sys_cell[s]);
    double ratio = system_ratio(r, s);
    if (isnan(ratio))
        return g_strdup("-");
    return g_strdup_printf("%.3f%s", ratio, b->systems[s].drops_dirsync && is_commit(r) ? "*" : "");
}

/* Whether ckptfs's ratio (the ckptfs system c) beats every peer that keeps
 * the directory fsync and has a figure on this line: "yes", "no (best
 * peer's NAME)", or "-". */
static char *ahead_of_peers(const Bench *b, const Result *r, guint c)
{
    double mine = system_ratio(r, c);
    if ((c == 0 && strcmp(r->status, "ok")) || r->sys_cell[c] || isnan(mine))
        return g_strdup("-");
    const char *behind = NULL;
    double best = mine;
    gboolean any = FALSE;
    for (guint s = 1; s < b->nsystems; s++) {
        double theirs = system_ratio(r, s);
        if (b->systems[s].kind == SYS_CKPTFS || b->systems[s].drops_dirsync || r->sys_cell[s] ||
            isnan(theirs))
            continue;
        any = TRUE;
        if (r->kind == TARGET_RATIO_MAX ? theirs < best : theirs > best) {
            best = theirs;
            behind = b->systems[s].name;
        }
    }
    if (!any)
        return g_strdup("-");
    return behind ? g_strdup_printf("no (%s)", behind) : g_strdup("yes");
}

/* ahead_of_peers of each ckptfs system, "A / B" when there are two. */
static char *ahead_cell(const Bench *b, const Result *r)
{
    GString *s = g_string_new(NULL);
    for (guint c = 0; c < b->nsystems; c++) {
        if (!is_ckptfs(b, c))
            continue;
        g_autofree char *a = ahead_of_peers(b, r, c);
        g_string_append_printf(s, "%s%s", s->len ? " / " : "", a);
    }
    return g_string_free(s, FALSE);
}

/* One table: a row per workload line, a column per system. */
static void print_peers_table(const Bench *b)
{
    if (b->json || b->nsystems < 2)
        return;
    int w[MAX_SYSTEMS];
    printf("\n# --peers: each system's mount/native ratio against native runs of its own, "
           "alternated with it\n");
    printf("%-40s %12s", "workload", "native");
    for (guint s = 0; s < b->nsystems; s++) {
        g_autofree char *h =
            g_strdup_printf("%s%s", b->systems[s].name, b->systems[s].drops_dirsync ? "*" : "");
        w[s] = MAX((int)strlen(h), 7);
        printf(" %*s", w[s], h);
    }
    printf(" %s\n", b->nsystems > 1 && is_ckptfs(b, 1) ? "ahead of durable peers (ring / dev)"
                                                       : "ahead of durable peers");
    for (guint i = 0; i < b->results->len; i++) {
        const Result *r = g_ptr_array_index(b->results, i);
        g_autofree char *n = fmt_value(median(r->native));
        printf("%-40s %12s", r->label, n);
        for (guint s = 0; s < b->nsystems; s++) {
            g_autofree char *c = s == 0 ? ckptfs_cell(r) : peer_cell(b, r, s);
            printf(" %*s", w[s], c);
        }
        g_autofree char *a = ahead_cell(b, r);
        printf(" %s\n", a);
    }
    printf("# * drops the directory fsync (strace of the daemon during commits, see "
           "peers_dropping_dirsync in ckpt-bench.c): its commit figure is not durable\n");
    printf("# native: the runs paired with ckptfs; find+stat view: time ratio, lower is better; "
           "mount lines: ckptfs's figure itself; n/a: ckptfs only\n");
    for (guint s = 1; s < b->nsystems; s++)
        if (b->systems[s].skip)
            printf("# %s: %s\n", b->systems[s].name, b->systems[s].skip);
    for (guint i = 0; i < b->results->len; i++) {
        const Result *r = g_ptr_array_index(b->results, i);
        for (guint s = 1; s < b->nsystems; s++)
            if (r->sys_note[s])
                printf("# %s, %s: failed (%s)\n", b->systems[s].name, r->label, r->sys_note[s]);
    }
    fflush(stdout);
}

static void json_systems(JsonBuilder *jb, const Bench *b, const Result *r)
{
    json_builder_set_member_name(jb, "systems");
    json_builder_begin_object(jb);
    for (guint s = 0; s < b->nsystems; s++) {
        json_builder_set_member_name(jb, b->systems[s].name);
        json_builder_begin_object(jb);
        json_number_or_null(jb, "native", median(r->sys_native[s]));
        json_number_or_null(jb, "mount", median(r->sys_mount[s]));
        json_number_or_null(jb, "ratio", system_ratio(r, s));
        json_builder_set_member_name(jb, "cell");
        if (s == 0 || !r->sys_cell[s])
            json_builder_add_null_value(jb);
        else
            json_builder_add_string_value(jb, r->sys_cell[s]);
        json_builder_set_member_name(jb, "note");
        if (r->sys_note[s])
            json_builder_add_string_value(jb, r->sys_note[s]);
        else
            json_builder_add_null_value(jb);
        if (b->systems[s].kind == SYS_CKPTFS)
            json_profile(jb, r, s);
        json_builder_end_object(jb);
    }
    json_builder_end_object(jb);
}

static void print_json(const Bench *b)
{
    static const char *const kinds[] = {"ratio>=", "ratio<=", "mount<=", "none"};
    g_autoptr(JsonBuilder) jb = json_builder_new();
    struct utsname u;
    uname(&u);
    json_builder_begin_object(jb);
    json_builder_set_member_name(jb, "tool");
    json_builder_add_string_value(jb, "ckpt-bench");
    json_builder_set_member_name(jb, "kernel");
    json_builder_add_string_value(jb, u.release);
    json_builder_set_member_name(jb, "backing");
    json_builder_add_string_value(jb, b->backing);
    json_builder_set_member_name(jb, "backing_fs");
    json_builder_add_string_value(jb, b->fs_type);
    json_builder_set_member_name(jb, "mount");
    json_builder_add_string_value(jb, b->mnt);
    json_builder_set_member_name(jb, "ckptfs");
    if (b->mounted_dir)
        json_builder_add_null_value(jb);
    else
        json_builder_add_string_value(jb, b->ckptfs);
    json_builder_set_member_name(jb, "mount_opts");
    json_builder_add_string_value(jb, b->mount_opts ? b->mount_opts : "");
    json_builder_set_member_name(jb, "scale");
    json_builder_add_double_value(jb, b->scale);
    json_builder_set_member_name(jb, "runs");
    json_builder_add_int_value(jb, b->runs);
    json_builder_set_member_name(jb, "results");
    json_builder_begin_array(jb);
    for (guint i = 0; i < b->results->len; i++) {
        const Result *r = g_ptr_array_index(b->results, i);
        json_builder_begin_object(jb);
        json_builder_set_member_name(jb, "workload");
        json_builder_add_string_value(jb, r->workload);
        json_builder_set_member_name(jb, "label");
        json_builder_add_string_value(jb, r->label);
        json_builder_set_member_name(jb, "unit");
        json_builder_add_string_value(jb, r->unit);
        json_builder_set_member_name(jb, "status");
        json_builder_add_string_value(jb, r->status);
        json_number_or_null(jb, "native", median(r->native));
        json_number_or_null(jb, "mount", median(r->mount));
        json_number_or_null(jb, "ratio", result_ratio(r));
        json_builder_set_member_name(jb, "target_kind");
        json_builder_add_string_value(jb, kinds[r->kind]);
        json_number_or_null(jb, "target", r->kind == TARGET_NONE ? NAN : r->target);
        json_builder_set_member_name(jb, "met");
        if (r->kind == TARGET_NONE || strcmp(r->status, "ok"))
            json_builder_add_null_value(jb);
        else
            json_builder_add_boolean_value(jb, result_met(r));
        json_runs(jb, "native_runs", r->native);
        json_runs(jb, "mount_runs", r->mount);
        if (b->nsystems > 1)
            json_systems(jb, b, r);
        json_builder_set_member_name(jb, "note");
        if (r->note)
            json_builder_add_string_value(jb, r->note);
        else
            json_builder_add_null_value(jb);
        json_builder_end_object(jb);
    }
    json_builder_end_array(jb);
    if (b->nsystems > 1) {
        json_builder_set_member_name(jb, "peers");
        json_builder_begin_array(jb);
        for (guint s = 1; s < b->nsystems; s++) {
            json_builder_begin_object(jb);
            json_builder_set_member_name(jb, "name");
            json_builder_add_string_value(jb, b->systems[s].name);
            json_builder_set_member_name(jb, "drops_dir_fsync");
            json_builder_add_boolean_value(jb, b->systems[s].drops_dirsync);
            json_builder_set_member_name(jb, "skipped");
            if (b->systems[s].skip)
                json_builder_add_string_value(jb, b->systems[s].skip);
            else
                json_builder_add_null_value(jb);
            json_builder_end_object(jb);
        }
        json_builder_end_array(jb);
    }
    json_builder_set_member_name(jb, "notes");
    json_builder_begin_array(jb);
    for (guint i = 0; i < b->notes->len; i++)
        json_builder_add_string_value(jb, g_ptr_array_index(b->notes, i));
    json_builder_end_array(jb);
    json_builder_set_member_name(jb, "failed");
    json_builder_add_boolean_value(jb, b->failed);
    json_builder_end_object(jb);

    g_autoptr(JsonNode) root = json_builder_get_root(jb);
    g_autofree char *text = json_out_text(root); /* the one style of every --json */
    fputs(text, stdout);
}

static void note(Bench *b, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void note(Bench *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *text = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    g_ptr_array_add(b->notes, text);
    if (!b->json)
        printf("# %s\n", text);
}

/* ---- what ckptfs's daemon did: requests per operation, cost per request ---- */

static GHashTable *prof_table(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
}

static ProfOp *prof_op(GHashTable *t, const char *name)
{
    ProfOp *p = g_hash_table_lookup(t, name);
    if (!p) {
        p = g_new0(ProfOp, 1);
        g_hash_table_insert(t, g_strdup(name), p);
    }
    return p;
}

/* The per-operation series of the mount's .metrics (one read), or NULL. */
static GHashTable *prof_read(const Bench *b)
{
    static const char *const series[] = {
        "ckptfs_ops_total{",
        "ckptfs_requests_sampled_total{",
        "ckptfs_request_cpu_sampled_seconds_total{",
        "ckptfs_request_context_switches_sampled_total{",
    };
    g_autofree char *path = g_build_filename(b->mnt, "_views", ".metrics", NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    GHashTable *t = prof_table();
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        int which = -1;
        for (int i = 0; i < (int)G_N_ELEMENTS(series); i++)
            if (g_str_has_prefix(*l, series[i]))
                which = i;
        const char *op = which < 0 ? NULL : strstr(*l, ",op=\"");
        const char *end = op ? strchr(op + 5, '"') : NULL;
        const char *val = strrchr(*l, ' ');
        if (!op || !end || !val)
            continue;
        g_autofree char *name = g_strndup(op + 5, (gsize)(end - op - 5));
        ProfOp *p = prof_op(t, name);
        double *field[] = {&p->requests, &p->sampled, &p->cpu_s, &p->switches};
        *field[which] = g_ascii_strtod(val + 1, NULL);
    }
    return t;
}

/* A measurement on a ckptfs mount begins (side mounted): its .metrics now. */
static void prof_start(Bench *b, const Side *side)
{
    g_clear_pointer(&b->prof_snap, g_hash_table_unref);
    if (side->mounted && is_ckptfs(b, b->cur))
        b->prof_snap = prof_read(b);
}

/* Figure i's operations (ops of them) are done: what the daemon did for
 * them, from prof_start or the previous prof_stop.  Outside the timed
 * stretch: reading .metrics is a few requests of its own. */
static void prof_stop(Bench *b, const Side *side, guint i, double ops)
{
    if (!side->mounted || !b->prof_snap || i >= MAX_PHASES)
        return;
    GHashTable *now = prof_read(b);
    if (!now)
        return;
    GHashTable *d = prof_table();
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, now);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const ProfOp *a = v, *was = g_hash_table_lookup(b->prof_snap, k);
        ProfOp *p = prof_op(d, k);
        p->requests = a->requests - (was ? was->requests : 0);
        p->sampled = a->sampled - (was ? was->sampled : 0);
        p->cpu_s = a->cpu_s - (was ? was->cpu_s : 0);
        p->switches = a->switches - (was ? was->switches : 0);
    }
    if (b->prof_delta[i])
        g_hash_table_unref(b->prof_delta[i]);
    b->prof_delta[i] = d;
    b->prof_ops[i] = ops;
    g_hash_table_unref(b->prof_snap);
    b->prof_snap = now;
}

/* After a mounted run: its figures' deltas go to their results. */
static void prof_keep(Bench *b, Result **results, guint nout)
{
    for (guint i = 0; i < MAX_PHASES; i++) {
        GHashTable *d = b->prof_delta[i];
        if (!d)
            continue;
        if (i < nout) {
            Profile *pr = &results[i]->prof[b->cur];
            if (!pr->ops)
                pr->ops = prof_table();
            GHashTableIter it;
            gpointer k, v;
            g_hash_table_iter_init(&it, d);
            while (g_hash_table_iter_next(&it, &k, &v)) {
                const ProfOp *x = v;
                ProfOp *p = prof_op(pr->ops, k);
                p->requests += x->requests;
                p->sampled += x->sampled;
                p->cpu_s += x->cpu_s;
                p->switches += x->switches;
            }
            pr->operations += b->prof_ops[i];
        }
        g_hash_table_unref(d);
        b->prof_delta[i] = NULL;
    }
    g_clear_pointer(&b->prof_snap, g_hash_table_unref);
}

typedef struct {
    const char *name;
    const ProfOp *p;
} ProfRow;

static gint by_requests(gconstpointer a, gconstpointer b)
{
    const ProfRow *x = a, *y = b;
    return x->p->requests < y->p->requests ? 1 : x->p->requests > y->p->requests ? -1 : 0;
}

/* The operations of a profile, most requested first (g_array_unref). */
static GArray *prof_rows(const Profile *pr, double *requests, double *sampled, double *cpu_s,
                         double *switches)
{
    GArray *rows = g_array_new(FALSE, FALSE, sizeof(ProfRow));
    *requests = *sampled = *cpu_s = *switches = 0;
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, pr->ops);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        const ProfOp *p = v;
        *requests += p->requests;
        *sampled += p->sampled;
        *cpu_s += p->cpu_s;
        *switches += p->switches;
        if (p->requests / pr->operations >= 0.005)
            g_array_append_val(rows, ((ProfRow){k, p}));
    }
    g_array_sort(rows, by_requests);
    return rows;
}

/* "#   ckptfs: 10.01 requests per commit (lookup 2.00 at 19 us, ...); the
 * daemon: 21.4 us CPU and 1.02 context switches per request" */
static void print_profile(const Bench *b, const Result *r)
{
    for (guint s = 0; s < b->nsystems; s++) {
        const Profile *pr = &r->prof[s];
        if (!is_ckptfs(b, s) || !pr->ops || !(pr->operations > 0) || !r->per)
            continue;
        double requests, sampled, cpu_s, switches;
        g_autoptr(GArray) rows = prof_rows(pr, &requests, &sampled, &cpu_s, &switches);
        g_autoptr(GString) line = g_string_new(NULL);
        g_string_append_printf(line, "#   %s: %.2f requests per %s%s", b->systems[s].name,
                               requests / pr->operations, r->per, rows->len ? " (" : "");
        for (guint i = 0; i < rows->len; i++) {
            const ProfRow *row = &g_array_index(rows, ProfRow, i);
            g_string_append_printf(line, "%s%s %.2f", i ? ", " : "", row->name,
                                   row->p->requests / pr->operations);
            if (row->p->sampled > 0)
                g_string_append_printf(line, " at %.0f us", row->p->cpu_s / row->p->sampled * 1e6);
        }
        if (rows->len)
            g_string_append(line, ")");
        if (sampled > 0 && requests / pr->operations >= 0.005)
            g_string_append_printf(line,
                                   "; the daemon: %.1f us CPU and %.2f context switches per "
                                   "request",
                                   cpu_s / sampled * 1e6, switches / sampled);
        printf("%s\n", line->str);
    }
    fflush(stdout);
}

static void json_profile(JsonBuilder *jb, const Result *r, guint s)
{
    const Profile *pr = &r->prof[s];
    json_builder_set_member_name(jb, "profile");
    if (!pr->ops || !(pr->operations > 0) || !r->per) {
        json_builder_add_null_value(jb);
        return;
    }
    double requests, sampled, cpu_s, switches;
    g_autoptr(GArray) rows = prof_rows(pr, &requests, &sampled, &cpu_s, &switches);
    json_builder_begin_object(jb);
    json_builder_set_member_name(jb, "per");
    json_builder_add_string_value(jb, r->per);
    json_number_or_null(jb, "requests_per_operation", requests / pr->operations);
    json_number_or_null(jb, "cpu_us_per_request", sampled > 0 ? cpu_s / sampled * 1e6 : NAN);
    json_number_or_null(jb, "switches_per_request", sampled > 0 ? switches / sampled : NAN);
    json_builder_set_member_name(jb, "ops");
    json_builder_begin_object(jb);
    for (guint i = 0; i < rows->len; i++) {
        const ProfRow *row = &g_array_index(rows, ProfRow, i);
        json_builder_set_member_name(jb, row->name);
        json_builder_begin_object(jb);
        json_number_or_null(jb, "per_operation", row->p->requests / pr->operations);
        json_number_or_null(jb, "cpu_us",
                            row->p->sampled > 0 ? row->p->cpu_s / row->p->sampled * 1e6 : NAN);
        json_builder_end_object(jb);
    }
    json_builder_end_object(jb);
    json_builder_end_object(jb);
}

/* ---- running both sides ---- */

/* A workload failed for the current system: the run fails for ckptfs; a
 * peer's cell says so and the run goes on. */
static void system_fail(Bench *b, Result *r, const char *what, int err)
{
    if (b->cur == 0) {
        result_fail(b, r, what, err);
        return;
    }
    const System *sys = &b->systems[b->cur];
    r->sys_cell[b->cur] = sys->skip ? sys->skip_cell : "failed";
    if (!sys->skip && !r->sys_note[b->cur])
        r->sys_note[b->cur] = g_strdup_printf("%s: %s", what, g_strerror(-err));
}

/* Runs fn --runs times on each side, native and mount alternated, appending
 * each of its nout figures to results[i] (the current system's arrays).
 * Stops at the first error. */
static int run_sides(Bench *b, const char *workload, MeasureFn fn, void *ctx, Result **results,
                     guint nout)
{
    const Side native = {b->backing, FALSE}, mounted = {b->mnt, TRUE};
    for (int run = 0; run < b->runs; run++) {
        const Side *order[2] = {&native, &mounted};
        if (run % 2) {
            order[0] = &mounted;
            order[1] = &native;
        }
        for (int s = 0; s < 2; s++) {
            g_printerr("ckpt-bench: %s run %d/%d %s\n", workload, run + 1, b->runs,
                       order[s]->mounted ? b->systems[b->cur].name : "native");
            double out[8];
            for (guint i = 0; i < nout; i++)
                out[i] = NAN;
            sync();
            int ret = fn(b, order[s], ctx, out);
            prof_keep(b, results, nout);
            if (ret < 0) {
                for (guint i = 0; i < nout; i++)
                    system_fail(b, results[i], order[s]->mounted ? "mount" : "native", ret);
                return ret;
            }
            for (guint i = 0; i < nout; i++)
                if (!isnan(out[i]))
                    g_array_append_val(order[s]->mounted ? results[i]->sys_mount[b->cur]
                                                         : results[i]->sys_native[b->cur],
                                       out[i]);
        }
    }
    return 0;
}

/* Mounts each system in turn (ckptfs, then the peers of --peers) and runs
 * the workload native vs. that system; unmounts. */
static void run_systems(Bench *b, const char *workload, MeasureFn fn, void *ctx, Result **results,
                        guint nout)
{
    for (guint s = 0; s < b->nsystems; s++) {
        b->cur = s;
        const System *sys = &b->systems[s];
        if (s > 0 && sys->skip) {
            for (guint i = 0; i < nout; i++)
                results[i]->sys_cell[s] = sys->skip_cell;
            continue;
        }
        int ret = bench_mount(b);
        if (ret < 0)
            for (guint i = 0; i < nout; i++)
                system_fail(b, results[i], "mount", ret);
        else
            run_sides(b, workload, fn, ctx, results, nout);
        daemon_stop(b);
    }
    b->cur = 0;
}

/* Marks the peers' cells of a workload only ckptfs has. */
static void peers_na(Bench *b, Result *r)
{
    for (guint s = 1; s < b->nsystems; s++)
        r->sys_cell[s] = "n/a";
}

static char *side_path(const Side *side, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static char *side_path(const Side *side, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *rel = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return g_build_filename(side->root, rel, NULL);
}

/* ---- commit ---- */

typedef struct {
    GMutex lock;
    GCond cond;
    gboolean go;
    double deadline;
    gsize size;
    const guint8 *data;
} CommitGate;

typedef struct {
    CommitGate *gate;
    char *dir;
    guint64 commits;
    double end;
    int err;
} CommitThread;

static gpointer commit_thread(gpointer p)
{
    CommitThread *t = p;
    CommitGate *g = t->gate;
    int dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        t->err = -errno;
    g_mutex_lock(&g->lock);
    while (!g->go)
        g_cond_wait(&g->cond, &g->lock);
    double deadline = g->deadline;
    g_mutex_unlock(&g->lock);

    for (guint64 n = 1; t->err == 0; n++) {
        char tmp[64], final[64], old[64];
        snprintf(tmp, sizeof tmp, "checkpoint-%" G_GUINT64_FORMAT ".snap.tmp", n);
        snprintf(final, sizeof final, "checkpoint-%" G_GUINT64_FORMAT ".snap", n);
        if ((t->err = write_file_at(dfd, tmp, g->data, g->size, O_TRUNC)) < 0)
            break;
        if (renameat(dfd, tmp, dfd, final) < 0 || fsync(dfd) < 0) {
            t->err = -errno;
            break;
        }
        if (n > 2) {
            snprintf(old, sizeof old, "checkpoint-%" G_GUINT64_FORMAT ".snap", n - 2);
            if (unlinkat(dfd, old, 0) < 0) {
                t->err = -errno;
                break;
            }
        }
        t->commits++;
        if (now_s() >= deadline)
            break;
    }
    t->end = now_s();
    if (dfd >= 0)
        close(dfd);
    return NULL;
}

static int measure_commit(Bench *b, const Side *side, void *ctx, double *out)
{
    gsize size = *(gsize *)ctx;
    CommitGate gate = {.size = size, .data = b->data};
    g_mutex_init(&gate.lock);
    g_cond_init(&gate.cond);
    CommitThread threads[COMMIT_THREADS] = {0};
    GThread *handles[COMMIT_THREADS] = {0};
    int ret = 0;
    for (int i = 0; i < COMMIT_THREADS; i++) {
        threads[i].gate = &gate;
        threads[i].dir = side_path(side, "_state/%s/v1/%d", b->job, i);
        handles[i] = g_thread_new("commit", commit_thread, &threads[i]);
    }
    prof_start(b, side);
    g_mutex_lock(&gate.lock);
    double start = now_s();
    gate.deadline = start + COMMIT_SECONDS * b->scale;
    gate.go = TRUE;
    g_cond_broadcast(&gate.cond);
    g_mutex_unlock(&gate.lock);

    guint64 commits = 0;
    double end = start;
    for (int i = 0; i < COMMIT_THREADS; i++) {
        g_thread_join(handles[i]);
        commits += threads[i].commits;
        end = MAX(end, threads[i].end);
    }
    prof_stop(b, side, 0, (double)commits);
    for (int i = 0; i < COMMIT_THREADS; i++) {
        if (threads[i].err < 0 && ret == 0)
            ret = threads[i].err;
        int e = empty_dir(threads[i].dir);
        if (e < 0 && ret == 0)
            ret = e;
        g_free(threads[i].dir);
    }
    g_mutex_clear(&gate.lock);
    g_cond_clear(&gate.cond);
    if (ret == 0)
        out[0] = (double)commits / (end - start);
    return ret;
}

static void wl_commit(Bench *b, const char *workload, gsize size)
{
    g_autofree char *h = human_bytes(size);
    Result *r = result_new(b, workload, g_strdup_printf("commit %s (commits/s)", h), "commits/s",
                           TARGET_RATIO_MIN, size >= 4 * MiB ? 0.97 : 0.92);
    r->per = "commit";
    int ret = 0;
    for (int i = 0; i < COMMIT_THREADS && ret == 0; i++) {
        g_autofree char *d = g_strdup_printf("%s/_state/%s/v1/%d", b->backing, b->job, i);
        if (g_mkdir_with_parents(d, 0755) < 0)
            ret = -errno;
    }
    if (ret < 0)
        result_fail(b, r, "setup", ret);
    else
        run_systems(b, workload, measure_commit, &size, &r, 1);
    print_result(b, r);
}

/* ---- sequential write ---- */

static int measure_seqwrite(Bench *b, const Side *side, void *ctx, double *out)
{
    guint64 size = *(guint64 *)ctx;
    g_autofree char *path = side_path(side, "_state/%s/seqwrite.dat", b->job);
    double t0 = now_s();
    int ret = write_file_at(AT_FDCWD, path, b->data, size, O_TRUNC);
    double t1 = now_s();
    unlink(path);
    if (ret == 0)
        out[0] = (double)size / 1e6 / (t1 - t0);
    return ret;
}

static void wl_seqwrite(Bench *b)
{
    guint64 size = MAX(MiB, scaled(SEQ_BYTES, b->scale, 1) / MiB * MiB);
    g_autofree char *h = human_bytes(size);
    Result *r = result_new(b, "seqwrite", g_strdup_printf("seq write %s +fsync (MB/s)", h), "MB/s",
                           TARGET_RATIO_MIN, 0.95);
    run_systems(b, "seqwrite", measure_seqwrite, &size, &r, 1);
    print_result(b, r);
}

/* ---- sequential read ---- */

static int measure_seqread(Bench *b, const Side *side, void *ctx, double *out)
{
    guint64 size = *(guint64 *)ctx;
    g_autofree char *path = side_path(side, "_state/%s/seqread.dat", b->job);
    g_autofree guint8 *buf = g_malloc(MiB);
    guint64 got = 0;
    int ret = 0;
    if (b->can_drop) {
        if ((ret = drop_caches()) < 0)
            return ret;
        double t0 = now_s();
        if ((ret = read_file(path, buf, &got)) < 0)
            return ret;
        out[0] = (double)got / 1e6 / (now_s() - t0);
    }
    if ((ret = read_file(path, buf, NULL)) < 0)
        return ret;
    double t0 = now_s();
    if ((ret = read_file(path, buf, &got)) < 0)
        return ret;
    out[1] = (double)got / 1e6 / (now_s() - t0);
    return got == size ? 0 : -EIO;
}

static void wl_seqread(Bench *b)
{
    guint64 size = MAX(MiB, scaled(SEQ_BYTES, b->scale, 1) / MiB * MiB);
    g_autofree char *h = human_bytes(size);
    Result *r[2] = {
        result_new(b, "seqread", g_strdup_printf("seq read %s cold (MB/s)", h), "MB/s",
                   TARGET_RATIO_MIN, 0.95),
        result_new(b, "seqread", g_strdup_printf("seq read %s warm (MB/s)", h), "MB/s",
                   TARGET_RATIO_MIN, 0.98),
    };
    g_autofree char *path = g_strdup_printf("%s/_state/%s/seqread.dat", b->backing, b->job);
    int ret = write_file_at(AT_FDCWD, path, b->data, size, O_TRUNC);
    if (ret < 0) {
        result_fail(b, r[0], "setup", ret);
        result_fail(b, r[1], "setup", ret);
    } else {
        run_systems(b, "seqread", measure_seqread, &size, r, 2);
    }
    unlink(path);
    if (!b->can_drop && !strcmp(r[0]->status, "ok")) {
        r[0]->status = "skipped";
        r[0]->note = g_strdup("(needs root for /proc/sys/vm/drop_caches)");
    }
    print_result(b, r[0]);
    print_result(b, r[1]);
}

/* ---- random read ---- */

typedef struct {
    guint64 size;
    GArray *offsets;
} RandCtx;

static int measure_randread(Bench *b, const Side *side, void *ctx, double *out)
{
    RandCtx *c = ctx;
    g_autofree char *path = side_path(side, "_state/%s/randread.dat", b->job);
    g_autofree guint8 *buf = g_malloc(MiB);
    /* warm through the descriptor the random reads use, so the figure is
     * of cached reads whatever the daemon's keep_cache choice on open */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    guint64 got = 0;
    int ret = read_fd(fd, buf, &got);
    if (ret == 0 && got != c->size)
        ret = -EIO;
    if (ret < 0) {
        close(fd);
        return ret;
    }
    const guint64 *off = (const guint64 *)c->offsets->data;
    double t0 = now_s();
    for (guint i = 0; i < c->offsets->len; i++)
        if (pread(fd, buf, 4096, (off_t)off[i]) != 4096) {
            ret = errno ? -errno : -EIO;
            break;
        }
    double t1 = now_s();
    close(fd);
    if (ret == 0)
        out[0] = c->offsets->len / (t1 - t0);
    return ret;
}

static void wl_randread(Bench *b)
{
    RandCtx c = {.size = MAX(MiB, scaled(RAND_BYTES, b->scale, 1) / MiB * MiB)};
    guint64 ops = scaled(RAND_OPS, b->scale, 1000);
    g_autofree char *h = human_bytes(c.size);
    Result *r = result_new(b, "randread", g_strdup_printf("rand read 4KiB of %s warm (IOPS)", h),
                           "IOPS", TARGET_RATIO_MIN, 0.98);
    c.offsets = g_array_sized_new(FALSE, FALSE, sizeof(guint64), (guint)ops);
    g_autoptr(GRand) rand = g_rand_new_with_seed(20261201);
    guint32 blocks = (guint32)(c.size / 4096);
    for (guint64 i = 0; i < ops; i++) {
        guint64 o = (guint64)g_rand_int_range(rand, 0, (gint32)blocks) * 4096;
        g_array_append_val(c.offsets, o);
    }
    g_autofree char *path = g_strdup_printf("%s/_state/%s/randread.dat", b->backing, b->job);
    int ret = write_file_at(AT_FDCWD, path, b->data, c.size, O_TRUNC);
    if (ret < 0)
        result_fail(b, r, "setup", ret);
    else
        run_systems(b, "randread", measure_randread, &c, &r, 1);
    unlink(path);
    g_array_unref(c.offsets);
    print_result(b, r);
}

/* ---- metadata ---- */

typedef struct {
    guint dirs;
} MetaCtx;

static int measure_meta(Bench *b, const Side *side, void *ctx, double *out)
{
    MetaCtx *c = ctx;
    g_autofree char *base = side_path(side, "_state/%s/meta", b->job);
    if (mkdir(base, 0755) < 0)
        return -errno;
    int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (bfd < 0)
        return -errno;
    g_autofree int *dfd = g_new(int, c->dirs);
    for (guint d = 0; d < c->dirs; d++)
        dfd[d] = -1;
    const double files = (double)c->dirs * META_PER_DIR;
    char name[32];
    int ret = 0;

    prof_start(b, side);
    double t0 = now_s();
    for (guint d = 0; d < c->dirs && ret == 0; d++) {
        snprintf(name, sizeof name, "d%03u", d);
        if (mkdirat(bfd, name, 0755) < 0 ||
            (dfd[d] = openat(bfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
            ret = -errno;
            break;
        }
        for (guint f = 0; f < META_PER_DIR; f++) {
            snprintf(name, sizeof name, "f%05u", f);
            int fd = openat(dfd[d], name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0 || close(fd) < 0) {
                ret = -errno;
                break;
            }
        }
    }
    double t1 = now_s();
    if (ret == 0)
        out[0] = files / (t1 - t0);
    prof_stop(b, side, 0, files);

    if (ret == 0) {
        t0 = now_s();
        for (int rep = 0; rep < META_REPEAT && ret == 0; rep++) {
            guint64 count = 0;
            ret = walk(AT_FDCWD, base, FALSE, &count);
            if (ret == 0 && count != c->dirs + (guint64)files)
                ret = -EIO;
        }
        t1 = now_s();
        if (ret == 0)
            out[1] = META_REPEAT * files / (t1 - t0);
        prof_stop(b, side, 1, META_REPEAT * files);
    }

    if (ret == 0) {
        t0 = now_s();
        for (guint i = 0; i < META_REPEAT * c->dirs && ret == 0; i++)
            for (guint f = 0, d = i % c->dirs; f < META_PER_DIR; f++) {
                struct stat st;
                snprintf(name, sizeof name, "f%05u", f);
                if (fstatat(dfd[d], name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                    ret = -errno;
                    break;
                }
            }
        t1 = now_s();
        if (ret == 0)
            out[2] = META_REPEAT * files / (t1 - t0);
        prof_stop(b, side, 2, META_REPEAT * files);
    }

    if (ret == 0) {
        t0 = now_s();
        for (guint d = 0; d < c->dirs && ret == 0; d++)
            for (guint f = 0; f < META_PER_DIR; f++) {
                snprintf(name, sizeof name, "f%05u", f);
                if (unlinkat(dfd[d], name, 0) < 0) {
                    ret = -errno;
                    break;
                }
            }
        t1 = now_s();
        if (ret == 0)
            out[3] = files / (t1 - t0);
        prof_stop(b, side, 3, files);
    }

    for (guint d = 0; d < c->dirs; d++)
        if (dfd[d] >= 0)
            close(dfd[d]);
    close(bfd);
    /* rmdir through the side first: a mount that caches names (entry
     * timeouts) must see the tree go, or its next mkdir finds it still there */
    rm_rf(base);
    /* whatever a failed run left, natively so it is gone even if the mount refuses */
    g_autofree char *native = g_strdup_printf("%s/_state/%s/meta", b->backing, b->job);
    rm_rf(native);
    return ret;
}

static void wl_meta(Bench *b)
{
    MetaCtx c = {.dirs = (guint)scaled(META_DIRS, b->scale, 1)};
    guint files = c.dirs * META_PER_DIR;
    static const char *const what[] = {"create", "find", "stat", "unlink"};
    static const double targets[] = {0.6, 0.5, 0.8, 0.25}; /* minimum ratios to native */
    Result *r[4];
    for (int i = 0; i < 4; i++) {
        r[i] = result_new(b, "meta", g_strdup_printf("meta %s %u (files/s)", what[i], files),
                          "files/s", TARGET_RATIO_MIN, targets[i]);
        r[i]->per = "file";
    }
    run_systems(b, "meta", measure_meta, &c, r, 4);
    for (int i = 0; i < 4; i++)
        print_result(b, r[i]);
}

/* ---- find + stat over a job view ---- */

static int make_view_job(Bench *b, guint64 files)
{
    g_autofree char *marker_dir = g_strdup_printf("%s/_jobs/%s/chk-1", b->backing, b->view_job);
    if (g_mkdir_with_parents(marker_dir, 0755) < 0)
        return -errno;
    g_autoptr(GString) parts = g_string_new(NULL);
    for (int s = 0; s < VIEW_SUBTASKS; s++)
        g_string_append_printf(parts, "%s%d", s ? "," : "", s);
    g_autofree char *marker = g_strdup_printf("checkpoint=1\ngeneration=1\nparticipants=%s\n"
                                              "state=_state/%s\n",
                                              parts->str, b->view_job);
    guint64 dirs = (files + VIEW_PER_DIR - 1) / VIEW_PER_DIR;
    guint64 made = 0;
    for (guint64 d = 0; d < dirs; d++) {
        g_autofree char *dir =
            g_strdup_printf("%s/_state/%s/v1/%" G_GUINT64_FORMAT "/d%05" G_GUINT64_FORMAT,
                            b->backing, b->view_job, d % VIEW_SUBTASKS, d);
        if (g_mkdir_with_parents(dir, 0755) < 0)
            return -errno;
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
            return -errno;
        for (int f = 0; f < VIEW_PER_DIR && made < files; f++, made++) {
            char name[32];
            snprintf(name, sizeof name, "sst-%06d", f);
            int fd = openat(dfd, name, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
            if (fd < 0) {
                int e = errno;
                close(dfd);
                return -e;
            }
            close(fd);
        }
        close(dfd);
    }
    g_autofree char *mpath = g_build_filename(marker_dir, "COMPLETED", NULL);
    if (!g_file_set_contents(mpath, marker, -1, NULL))
        return -EIO;
    return 0;
}

typedef struct {
    gboolean warmed[2];
    guint64 count[2];
} ViewCtx;

static int measure_view(Bench *b, const Side *side, void *ctx, double *out)
{
    ViewCtx *c = ctx;
    g_autofree char *path = side->mounted
                                ? g_strdup_printf("%s/_views/%s/state", b->mnt, b->view_job)
                                : g_strdup_printf("%s/_state/%s", b->backing, b->view_job);
    guint64 count = 0;
    int ret;
    if (!c->warmed[side->mounted]) {
        if ((ret = walk(AT_FDCWD, path, TRUE, &count)) < 0)
            return ret;
        c->warmed[side->mounted] = TRUE;
    }
    count = 0;
    double t0 = now_s();
    if ((ret = walk(AT_FDCWD, path, TRUE, &count)) < 0)
        return ret;
    out[0] = now_s() - t0;
    c->count[side->mounted] = count;
    return 0;
}

static void wl_view(Bench *b)
{
    guint64 files = scaled(VIEW_FILES, b->scale, 1);
    Result *r =
        result_new(b, "view", g_strdup_printf("find+stat view %" G_GUINT64_FORMAT " (s)", files),
                   "s", TARGET_RATIO_MAX, 2);
    peers_na(b, r);
    int ret = make_view_job(b, files);
    if (ret < 0) {
        result_fail(b, r, "setup", ret);
    } else if ((ret = bench_mount(b)) < 0) {
        result_fail(b, r, "mount", ret);
    } else {
        g_autofree char *views = g_build_filename(b->mnt, "_views", NULL);
        g_autofree char *state = g_strdup_printf("%s/_views/%s/state", b->mnt, b->view_job);
        gboolean have = g_file_test(views, G_FILE_TEST_IS_DIR);
        /* a mount made before the fixture sees it within rescan seconds */
        for (double end = now_s() + VIEW_WAIT_MS / 1000.0;
             have && !g_file_test(state, G_FILE_TEST_IS_DIR); g_usleep(50000))
            if (now_s() > end)
                have = FALSE;
        if (!have) {
            r->status = "n/a";
            r->note = g_strdup("(no views)");
        } else {
            ViewCtx c = {0};
            if (run_sides(b, "view", measure_view, &c, &r, 1) == 0 && c.count[0] != c.count[1])
                r->note = g_strdup_printf("view shows %" G_GUINT64_FORMAT
                                          " entries, _state %" G_GUINT64_FORMAT,
                                          c.count[1], c.count[0]);
        }
    }
    daemon_stop(b);
    g_autofree char *sdir = g_strdup_printf("%s/_state/%s", b->backing, b->view_job);
    g_autofree char *jdir = g_strdup_printf("%s/_jobs/%s", b->backing, b->view_job);
    rm_rf(sdir);
    rm_rf(jdir);
    print_result(b, r);
}

/* ---- mount time and catalog memory ---- */

static int make_mount_fixture_own(const char *dir, guint64 jobs)
{
    for (guint64 j = 0; j < jobs; j++) {
        for (int n = 1; n <= MOUNT_MARKERS; n++) {
            g_autofree char *chk =
                g_strdup_printf("%s/_jobs/job-%05" G_GUINT64_FORMAT "/chk-%d", dir, j, n);
            if (g_mkdir_with_parents(chk, 0755) < 0)
                return -errno;
            g_autofree char *path = g_build_filename(chk, "COMPLETED", NULL);
            g_autofree char *text = g_strdup_printf(
                "checkpoint=%d\ngeneration=1\nparticipants=0\nstate=_state/job-%05" G_GUINT64_FORMAT
                "\n",
                n, j);
            if (!g_file_set_contents(path, text, -1, NULL))
                return -EIO;
        }
    }
    return 0;
}

/* Uses `ckptctl fixture` when it exists and writes the tree; else our own. */
static int make_mount_fixture(Bench *b, const char *dir, guint64 jobs, const char **how)
{
    g_autofree char *ckptctl = g_build_filename(b->exe_dir, "ckptctl", NULL);
    g_autofree char *jobs_s = g_strdup_printf("%" G_GUINT64_FORMAT, jobs);
    g_autofree char *cp_s = g_strdup_printf("%d", MOUNT_MARKERS);
    const char *argv[] = {ckptctl, "fixture",    dir, "--jobs",  jobs_s, "--checkpoints",
                          cp_s,    "--subtasks", "1", "--bytes", "0",    "--legacy",
                          "0",     NULL};
    int status = -1;
    g_autofree char *jobs_dir = g_build_filename(dir, "_jobs", NULL);
    if (g_file_test(ckptctl, G_FILE_TEST_IS_EXECUTABLE) &&
        g_spawn_sync(NULL, (char **)argv, NULL,
                     G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL, child_setup, NULL,
                     NULL, NULL, &status, NULL) &&
        g_spawn_check_wait_status(status, NULL) &&
        count_named(jobs_dir, "COMPLETED") >= jobs * MOUNT_MARKERS) {
        *how = "ckptctl fixture";
        return 0;
    }
    rm_rf(dir);
    *how = "ckpt-bench's own generator";
    if (g_mkdir_with_parents(dir, 0755) < 0)
        return -errno;
    return make_mount_fixture_own(dir, jobs);
}

/* How long a mount run waits for the catalog to count every marker: 30 s,
 * or 0.3 ms a marker (a 100,000-job fixture loads in 76 to 144 s here). */
static double load_wait_s(guint64 markers)
{
    return MAX(30.0, (double)markers * 0.0003);
}

typedef struct {
    double ls_s;     /* spawn to the first readdir of _views done */
    long ls_rss_kib; /* VmRSS then */
    guint64 names;   /* names _views listed */
    double loaded_s; /* spawn to .metrics counting every marker; NAN if it never did */
    long loaded_rss_kib;
} MountSample;

/* ckptfs_catalog_markers from _views/.metrics, or -1. */
static gint64 catalog_markers(const char *views)
{
    g_autofree char *path = g_build_filename(views, ".metrics", NULL);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    g_autoptr(GString) text = g_string_new(NULL);
    char buf[16384];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        g_string_append_len(text, buf, n);
    close(fd);
    /* ckptfs_catalog_markers{mount="..."} N */
    const char *p = strstr(text->str, "\nckptfs_catalog_markers{");
    p = p ? strstr(p, "} ") : NULL;
    return p ? g_ascii_strtoll(p + 2, NULL, 10) : -1;
}

/* Mounts dir, lists _views and reads the daemon's VmRSS; then, since the
 * catalog may load in the background after the names, waits (up to 30 s)
 * until .metrics counts `markers` and reads VmRSS again; unmounts. */
static int mount_once(Bench *b, const char *dir, guint64 markers, MountSample *out)
{
    double t0;
    if (b->mount_failed)
        return -ECANCELED;
    int ret = daemon_start(b, dir, b->mnt, &t0);
    if (ret < 0) {
        b->mount_failed = TRUE;
        return ret;
    }
    out->loaded_s = NAN;
    out->loaded_rss_kib = -1;
    g_autofree char *views = g_build_filename(b->mnt, "_views", NULL);
    DIR *d = opendir(views);
    if (!d) {
        ret = -errno;
    } else {
        guint64 n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
            n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        out->ls_s = now_s() - t0;
        closedir(d);
        out->names = n;
        g_mutex_lock(&b->lock);
        out->ls_rss_kib = vm_rss_kib(b->daemon);
        g_mutex_unlock(&b->lock);
        /* a million markers take minutes to load here: wait as long, and
         * poll .metrics less often the longer the wait */
        double wait = load_wait_s(markers);
        gulong poll_us = markers > 200000 ? 50000 : 2000;
        for (double end = now_s() + wait; markers > 0 && now_s() < end; g_usleep(poll_us)) {
            gint64 m = catalog_markers(views);
            if (m < 0)
                break;
            if ((guint64)m >= markers) {
                out->loaded_s = now_s() - t0;
                g_mutex_lock(&b->lock);
                out->loaded_rss_kib = vm_rss_kib(b->daemon);
                g_mutex_unlock(&b->lock);
                break;
            }
        }
    }
    int e = daemon_stop(b);
    return ret < 0 ? ret : e;
}

/* ---- browsing, idle and upkeep of a big mount ---- */

/* Seconds `argv` took (stdout and stderr to /dev/null); NAN when it failed. */
static double time_cmd(const char *const *argv)
{
    double t0 = now_s();
    gint status = 0;
    if (!g_spawn_sync(NULL, (char **)argv, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                      child_setup, NULL, NULL, NULL, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL))
        return NAN;
    return now_s() - t0;
}

/* utime + stime of pid, in seconds; NAN when unreadable. */
static double cpu_s(GPid pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return NAN;
    const char *p = strrchr(text, ')');
    if (!p)
        return NAN;
    unsigned long long ut = 0, st = 0;
    /* after "comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
     * stime */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

typedef struct {
    Result *ls_warm, *ls_cold, *find, *find_backing, *idle, *idle_after, *behind, *jobs_json;
    gint64 forgets;          /* FORGETs the daemon got during the idle time after the walks */
    guint64 find_entries[2]; /* what find printed over _jobs + _state, over _views */
} BrowseLines;

/* The daemon's CPU over --idle-seconds of nothing, in % of one core. */
static double idle_pct(Bench *b)
{
    g_mutex_lock(&b->lock);
    GPid pid = b->daemon;
    g_mutex_unlock(&b->lock);
    double c0 = cpu_s(pid), w0 = now_s();
    g_usleep((gulong)b->idle_s * G_USEC_PER_SEC);
    return (cpu_s(pid) - c0) / (now_s() - w0) * 100.0;
}

/* ckptfs_ops_total{op="forget"} from .metrics, or -1. */
static gint64 ops_forget(const char *views)
{
    g_autofree char *path = g_build_filename(views, ".metrics", NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return -1;
    const char *key = "\nckptfs_ops_total{op=\"forget\"} ";
    const char *p = strstr(text, key);
    return p ? g_ascii_strtoll(p + strlen(key), NULL, 10) : -1;
}

/* One mount of the fixture, once its catalog is loaded: ls -l of the views
 * dir (warm: the second of two; cold: after drop_caches), find -printf '%s'
 * over every view against the same find over the mount's _jobs and _state,
 * per entry (both the daemon's first walk, the backing warmed natively
 * first), the daemon's CPU over --idle-seconds of nothing, how long a marker
 * written behind the mount takes to show, and ckptctl jobs --json of the
 * directory (warm). */
static int browse_once(Bench *b, const char *dir, guint64 markers, BrowseLines *L)
{
    int ret = daemon_start(b, dir, b->mnt, NULL);
    if (ret < 0)
        return ret;
    g_autofree char *views = g_build_filename(b->mnt, "_views", NULL);
    for (double end = now_s() + 120; now_s() < end; g_usleep(20000)) {
        gint64 m = catalog_markers(views);
        if (m < 0 || (guint64)m >= markers)
            break;
    }
    /* idle: loaded, nothing browsed yet */
    g_usleep(2 * G_USEC_PER_SEC);
    double pct = idle_pct(b);
    g_array_append_val(L->idle->mount, pct);
    const char *ls[] = {"ls", "-l", views, NULL};
    time_cmd(ls);
    double t = time_cmd(ls);
    g_array_append_val(L->ls_warm->mount, t);
    g_autofree char *jobs_dir = g_build_filename(dir, "_jobs", NULL);
    g_autofree char *state_dir = g_build_filename(dir, "_state", NULL);
    const char *lsn[] = {"ls", "-l", jobs_dir, NULL};
    time_cmd(lsn);
    t = time_cmd(lsn);
    g_array_append_val(L->ls_warm->native, t);
    if (b->can_drop && drop_caches() == 0) {
        t = time_cmd(ls);
        g_array_append_val(L->ls_cold->mount, t);
        if (drop_caches() == 0) {
            t = time_cmd(lsn);
            g_array_append_val(L->ls_cold->native, t);
        }
    }
    /* per entry: the views hold about twice the directories of the trees
     * they show, by design */
    const char *fn[] = {"find", jobs_dir, state_dir, "-printf", "%s\n", NULL};
    time_cmd(fn);
    t = time_cmd(fn);
    g_autofree char *mjobs = g_build_filename(b->mnt, "_jobs", NULL);
    g_autofree char *mstate = g_build_filename(b->mnt, "_state", NULL);
    const char *fmb[] = {"find", mjobs, mstate, "-printf", "%s\n", NULL};
    double tm = time_cmd(fmb);
    const char *fm[] = {"find", views, "-printf", "%s\n", NULL};
    double tv = time_cmd(fm);
    guint64 nb = 2, nv = 1; /* find prints its starting points */
    if (!isnan(tm) && !isnan(tv) && walk(AT_FDCWD, jobs_dir, FALSE, &nb) == 0 &&
        walk(AT_FDCWD, state_dir, FALSE, &nb) == 0 && walk(AT_FDCWD, views, FALSE, &nv) == 0) {
        double us_b = tm / (double)nb * 1e6, us_v = tv / (double)nv * 1e6;
        g_array_append_val(L->find->native, us_b);
        g_array_append_val(L->find->mount, us_v);
        L->find_entries[0] = nb;
        L->find_entries[1] = nv;
    }
    if (!isnan(t) && !isnan(tm)) {
        g_array_append_val(L->find_backing->native, t);
        g_array_append_val(L->find_backing->mount, tm);
    }

    /* the same idle time after the walks: the kernel forgetting what they
     * looked up is the daemon's work too (information) */
    gint64 f0 = ops_forget(views);
    pct = idle_pct(b);
    g_array_append_val(L->idle_after->mount, pct);
    L->forgets = ops_forget(views) - f0;

    /* a marker written behind the mount: chk-<N>, then its COMPLETED, as a job does */
    g_autoptr(GDir) jd = g_dir_open(jobs_dir, 0, NULL);
    const char *job = jd ? g_dir_read_name(jd) : NULL;
    if (job) {
        g_autofree char *chk = g_strdup_printf("%s/%s/chk-999999", jobs_dir, job);
        g_autofree char *marker = g_build_filename(chk, "COMPLETED", NULL);
        g_autofree char *tmp = g_build_filename(chk, "COMPLETED.tmp", NULL);
        g_autofree char *text = g_strdup_printf(
            "checkpoint=999999\ngeneration=1\nparticipants=0\nstate=_state/%s\n", job);
        g_autofree char *shown = g_strdup_printf("%s/%s/checkpoints/999999", views, job);
        double t0 = now_s();
        if (g_mkdir_with_parents(chk, 0755) == 0 && g_file_set_contents(tmp, text, -1, NULL) &&
            rename(tmp, marker) == 0) {
            struct stat st;
            double end = t0 + 30;
            while (lstat(shown, &st) != 0 && now_s() < end)
                g_usleep(10000);
            if (lstat(shown, &st) == 0) {
                t = now_s() - t0;
                g_array_append_val(L->behind->mount, t);
            }
        }
        unlink(marker);
        unlink(tmp);
        rmdir(chk);
    }
    ret = daemon_stop(b);
    g_autofree char *ckptctl = g_build_filename(b->exe_dir, "ckptctl", NULL);
    const char *cj[] = {ckptctl, "jobs", "--json", dir, NULL};
    time_cmd(cj);
    t = time_cmd(cj);
    if (!isnan(t))
        g_array_append_val(L->jobs_json->mount, t);
    return ret;
}

static void wl_mount(Bench *b)
{
    guint64 jobs = b->mount_jobs > 0 ? (guint64)b->mount_jobs : scaled(MOUNT_JOBS, b->scale, 1);
    g_autofree char *tag = g_strdup_printf("%" G_GUINT64_FORMAT "x%d", jobs, MOUNT_MARKERS);
    Result *rt = result_new(b, "mount", g_strdup_printf("mount %s warm, ls _views (s)", tag), "s",
                            TARGET_VALUE_MAX, 1);
    Result *rm = result_new(b, "mount", g_strdup_printf("mount %s catalog (B/marker)", tag),
                            "bytes/marker", TARGET_VALUE_MAX, 1024);
    Result *rl = result_new(b, "mount", g_strdup_printf("mount %s warm, catalog loaded (s)", tag),
                            "s", TARGET_NONE, 0);
    Result *rc = result_new(b, "mount", g_strdup_printf("mount %s cold, ls _views (s)", tag), "s",
                            TARGET_NONE, 0);
    Result *rls = result_new(b, "mount", g_strdup_printf("%s: ls -l _views, warm (s)", tag), "s",
                             TARGET_VALUE_MAX, 0.3);
    Result *rlc = result_new(b, "mount", g_strdup_printf("%s: ls -l _views, cold (s)", tag), "s",
                             TARGET_VALUE_MAX, 1);
    Result *rf = result_new(
        b, "mount",
        g_strdup_printf("%s: find -printf %%s per entry, _views vs _jobs + _state (us)", tag),
        "us/entry", TARGET_RATIO_MAX, 1);
    Result *rfb =
        result_new(b, "mount", g_strdup_printf("%s: find _jobs + _state, -printf %%s (s)", tag),
                   "s", TARGET_NONE, 0);
    Result *ri = result_new(
        b, "mount", g_strdup_printf("%s: idle mount, CPU over %d s (%% of a core)", tag, b->idle_s),
        "%", TARGET_VALUE_MAX, 0.5);
    Result *ria = result_new(
        b, "mount", g_strdup_printf("%s: the same, right after the find (%% of a core)", tag), "%",
        TARGET_NONE, 0);
    Result *rb = result_new(b, "mount",
                            g_strdup_printf("%s: marker written behind the mount shows (s)", tag),
                            "s", TARGET_VALUE_MAX, 2);
    Result *rj = result_new(b, "mount", g_strdup_printf("%s: ckptctl jobs --json, warm (s)", tag),
                            "s", TARGET_VALUE_MAX, 1);
    Result *all[] = {rt, rm, rl, rc, rls, rlc, rf, rfb, ri, ria, rb, rj};
    const int nall = G_N_ELEMENTS(all);
    for (int i = 0; i < nall; i++)
        peers_na(b, all[i]);
    if (b->mounted_dir || b->mount_failed) {
        for (int i = 0; i < nall; i++) {
            if (b->mounted_dir) {
                all[i]->status = "n/a";
                all[i]->note = g_strdup("(--mounted-dir: nothing to spawn)");
            } else {
                result_fail(b, all[i], "mount", -ECANCELED);
            }
            print_result(b, all[i]);
        }
        return;
    }
    g_autofree char *fixture = g_build_filename(b->scratch, "fixture", NULL);
    g_autofree char *empty = g_build_filename(b->scratch, "empty", NULL);
    const char *how = NULL;
    g_printerr("ckpt-bench: mount: writing %" G_GUINT64_FORMAT " markers\n", jobs * MOUNT_MARKERS);
    int ret = make_mount_fixture(b, fixture, jobs, &how);
    if (ret == 0 && g_mkdir_with_parents(empty, 0755) < 0)
        ret = -errno;
    g_autofree char *jobs_dir = g_build_filename(fixture, "_jobs", NULL);
    guint64 markers = ret == 0 ? count_named(jobs_dir, "COMPLETED") : 0;
    g_autoptr(GArray) rss_empty = g_array_new(FALSE, FALSE, sizeof(double));
    g_autoptr(GArray) rss_ls = g_array_new(FALSE, FALSE, sizeof(double));
    g_autoptr(GArray) rss_loaded = g_array_new(FALSE, FALSE, sizeof(double));
    MountSample full = {0};
    for (int run = 0; run < b->runs && ret == 0; run++) {
        MountSample e = {0}, cold = {0};
        g_printerr("ckpt-bench: mount run %d/%d\n", run + 1, b->runs);
        if ((ret = mount_once(b, empty, 0, &e)) < 0)
            break;
        double v = (double)e.ls_rss_kib * 1024;
        g_array_append_val(rss_empty, v);
        sync();
        if ((ret = mount_once(b, fixture, markers, &full)) < 0)
            break;
        g_array_append_val(rt->mount, full.ls_s);
        v = (double)full.ls_rss_kib * 1024;
        g_array_append_val(rss_ls, v);
        if (!isnan(full.loaded_s)) {
            g_array_append_val(rl->mount, full.loaded_s);
            v = (double)full.loaded_rss_kib * 1024;
            g_array_append_val(rss_loaded, v);
        }
        if (b->can_drop) {
            if ((ret = drop_caches()) < 0 || (ret = mount_once(b, fixture, 0, &cold)) < 0)
                break;
            g_array_append_val(rc->mount, cold.ls_s);
        }
    }
    if (ret == 0) {
        /* one browsing session: a find over 10,000 job views takes a while */
        g_printerr("ckpt-bench: mount: browsing, %d s idle, a marker behind the mount\n",
                   b->idle_s);
        BrowseLines L = {rls, rlc, rf, rfb, ri, ria, rb, rj, 0, {0, 0}};
        ret = browse_once(b, fixture, markers, &L);
        rls->note = g_strdup_printf("native: ls -l _jobs %.3f s", median(rls->native));
        rlc->note = b->can_drop
                        ? g_strdup_printf("drop_caches first; native %.3f s", median(rlc->native))
                        : NULL;
        if (!b->can_drop)
            rlc->status = "skipped";
        rf->note = g_strdup_printf(
            "native: the same find over the mount's _jobs and _state (%" G_GUINT64_FORMAT
            " entries); mount: over _views (%" G_GUINT64_FORMAT
            "); both the daemon's first walk, the backing warm",
            L.find_entries[0], L.find_entries[1]);
        rfb->note = g_strdup("information: native warm; mount: the daemon's first walk");
        ri->note = g_strdup("utime+stime of the daemon, catalog loaded, nothing browsed yet");
        ria->note = g_strdup_printf(
            "information: the kernel forgot %" G_GINT64_FORMAT " nodes meanwhile", L.forgets);
        rb->note = g_strdup("mkdir chk-<N>, write, rename onto COMPLETED in the backing dir; "
                            "target: rescan=2");
        rj->note = g_strdup("the second of two runs");
    }
    if (ret == -ENOENT) {
        for (int i = 0; i < nall; i++) {
            all[i]->status = "n/a";
            all[i]->note = g_strdup("(no views)");
        }
    } else if (ret < 0) {
        for (int i = 0; i < nall; i++)
            result_fail(b, all[i], "mount", ret);
    } else {
        double div = (double)MAX(markers, 1);
        double after_ls = (median(rss_ls) - median(rss_empty)) / div;
        gboolean loaded = rss_loaded->len == (guint)b->runs;
        double per = loaded ? (median(rss_loaded) - median(rss_empty)) / div : after_ls;
        g_array_append_val(rm->mount, per);
        rt->note = g_strdup_printf("%" G_GUINT64_FORMAT
                                   " markers by %s; _views lists %" G_GUINT64_FORMAT " names",
                                   markers, how, full.names);
        rm->note = loaded ? g_strdup_printf("VmRSS once .metrics counts every marker, less an "
                                            "empty mount's; right after the ls: %.1f",
                                            after_ls)
                          : g_strdup("VmRSS right after the ls, less an empty mount's (.metrics "
                                     "never counted every marker)");
        if (!loaded) {
            rl->status = "n/a";
            rl->note = g_strdup_printf("(.metrics never counted every marker within %.0f s)",
                                       load_wait_s(markers));
        } else {
            rl->note = g_strdup("information, no target");
        }
        if (!b->can_drop) {
            rc->status = "skipped";
            rc->note = g_strdup("(needs root for /proc/sys/vm/drop_caches)");
        } else {
            rc->note = g_strdup("information, no target");
        }
    }
    rm_rf(fixture);
    rm_rf(empty);
    for (int i = 0; i < nall; i++)
        print_result(b, all[i]);
}

/* ---- outlive: kill -9 and --takeover of a supervised daemon (the mount outlives it) ---- */

#define OUT_SLOTS        4 /* final names per thread, renamed over in turn */
#define OUT_COMMIT_BYTES (64 * 1024)
#define OUT_SPACING_S    0.5  /* between two events */
#define OUT_WINDOW_S     0.5  /* an event's window: commits in flight at it or started within */
#define OUT_NEW_DAEMON_S 20.0 /* hang detection only */
#define OUT_PROGRESS_S   30.0 /* hang detection only */

typedef struct {
    double start; /* monotonic seconds */
    double lat;   /* seconds */
} OutSample;

typedef struct Outlive Outlive;

typedef struct {
    Outlive *o;
    int id;
    char *dir;
    GArray *samples;           /* OutSample per acknowledged commit */
    guint64 acked[OUT_SLOTS];  /* commit whose bytes slot i's final file holds (0: none) */
    guint64 unsure[OUT_SLOTS]; /* a commit that failed after its rename */
} OutWorker;

typedef enum { OUT_KILL, OUT_TAKEOVER } OutKind;

typedef struct {
    OutKind kind;
    double t;     /* when it was sent */
    double t_new; /* when the new daemon was seen (kill) or --takeover returned */
    pid_t old, new_;
    gboolean ok;
} OutEvent;

struct Outlive {
    Bench *b;
    gint stop;
    gint commits;
    gint ops;      /* calls the workers made */
    gint failures; /* calls that returned an error */
    gint wrong;
    GMutex lock;
    GString *errors; /* the first 20 failures, described */
    OutWorker w[COMMIT_THREADS];
    GArray *events; /* OutEvent */
};

/* The bytes of commit seq of thread t: 64 KiB of the pattern, at an offset
 * that differs per commit and thread. */
static const guint8 *out_bytes(const Bench *b, int t, guint64 seq)
{
    gsize span = 4 * MiB - OUT_COMMIT_BYTES;
    return b->data + (gsize)((seq * 4099u + (guint64)t * 65537u) % span);
}

static void out_fail(Outlive *o, const char *op, const char *dir, const char *name)
{
    int e = errno;
    if (g_atomic_int_add(&o->failures, 1) < 20) {
        g_mutex_lock(&o->lock);
        g_string_append_printf(o->errors, "  %s %s%s%s: %s (errno %d)\n", op, dir, name ? "/" : "",
                               name ? name : "", g_strerror(e), e);
        g_mutex_unlock(&o->lock);
    }
}

/* Whether dir/ckpt-<slot> holds exactly the bytes of commit seq of thread
 * t: 1 yes, 0 no, -errno when it cannot be read. */
static int out_file_is(const Bench *b, const char *dir, int slot, int t, guint64 seq, guint8 *buf,
                       const char **what)
{
    g_autofree char *p = g_strdup_printf("%s/ckpt-%d", dir, slot);
    *what = "open";
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t total = 0, n = 0;
    while (total < OUT_COMMIT_BYTES + 1 &&
           (n = read(fd, buf + total, (gsize)(OUT_COMMIT_BYTES + 1 - total))) > 0)
        total += n;
    int ret = n < 0 ? -errno : 0;
    if (ret < 0)
        *what = "read";
    if (close(fd) < 0 && ret == 0) {
        ret = -errno;
        *what = "close";
    }
    if (ret < 0)
        return ret;
    return total == OUT_COMMIT_BYTES && !memcmp(buf, out_bytes(b, t, seq), OUT_COMMIT_BYTES);
}

/* Commits like a worker (tmp, write, fsync, close, rename over the final
 * name, fsync of the directory) until told to stop; counts every failed call
 * and goes on; reads the previous commit back through the mount. */
static gpointer out_thread(gpointer p)
{
    OutWorker *w = p;
    Outlive *o = w->o;
    const Bench *b = o->b;
    g_autofree guint8 *buf = g_malloc(OUT_COMMIT_BYTES + 1);
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        out_fail(o, "open", w->dir, NULL);
        return NULL;
    }
    for (guint64 seq = 1; !g_atomic_int_get(&o->stop); seq++) {
        int slot = (int)(seq % OUT_SLOTS);
        char tmp[32], fin[32];
        snprintf(tmp, sizeof tmp, "ckpt-%d.tmp", slot);
        snprintf(fin, sizeof fin, "ckpt-%d", slot);
        double t0 = now_s();
        g_atomic_int_inc(&o->ops);
        int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            out_fail(o, "open", w->dir, tmp);
            continue;
        }
        g_atomic_int_inc(&o->ops); /* the write (a 64 KiB write may be split by the kernel) */
        int ret = write_all(fd, out_bytes(b, w->id, seq), OUT_COMMIT_BYTES);
        if (ret < 0) {
            errno = -ret;
            out_fail(o, "write", w->dir, tmp);
            close(fd);
            continue;
        }
        g_atomic_int_inc(&o->ops);
        if (fsync(fd) < 0) {
            out_fail(o, "fsync", w->dir, tmp);
            close(fd);
            continue;
        }
        g_atomic_int_inc(&o->ops);
        if (close(fd) < 0) {
            out_fail(o, "close", w->dir, tmp);
            continue;
        }
        g_atomic_int_inc(&o->ops);
        if (renameat(dfd, tmp, dfd, fin) < 0) {
            out_fail(o, "rename", w->dir, tmp);
            w->unsure[slot] = seq; /* it may have happened all the same */
            continue;
        }
        g_atomic_int_inc(&o->ops);
        if (fsync(dfd) < 0) {
            out_fail(o, "fsync", w->dir, NULL);
            w->unsure[slot] = seq;
            continue;
        }
        OutSample s = {t0, now_s() - t0};
        g_array_append_val(w->samples, s);
        w->acked[slot] = seq;
        w->unsure[slot] = 0;
        g_atomic_int_inc(&o->commits);
        int prev = (int)((seq - 1) % OUT_SLOTS);
        if (seq > 1 && !w->unsure[prev]) {
            g_atomic_int_add(&o->ops, 3); /* open, read, close */
            const char *what = NULL;
            int r = out_file_is(b, w->dir, prev, w->id, w->acked[prev], buf, &what);
            if (r < 0) {
                char name[32];
                snprintf(name, sizeof name, "ckpt-%d", prev);
                errno = -r;
                out_fail(o, what, w->dir, name);
            } else if (r == 0) {
                g_atomic_int_inc(&o->wrong);
            }
        }
    }
    close(dfd);
    return NULL;
}

/* The supervisor's live (not zombie) child, the newest, 0 if none. */
static pid_t out_daemon(pid_t sup)
{
    pid_t c[8];
    int n = mountrun_children(sup, c, 8);
    return n > 0 ? c[n - 1] : 0;
}

static pid_t out_supervisor(Bench *b)
{
    g_mutex_lock(&b->lock);
    pid_t sup = b->daemon;
    g_mutex_unlock(&b->lock);
    return sup;
}

/* A process's descriptors, pipes apart (*pipes): libfuse keeps a splice
 * pipe per worker thread for the thread's life. */
/* One series of _views/.metrics (the mount label is added), -1 if absent. */
static gint64 out_metric(Bench *b, const char *name)
{
    g_autofree char *path = g_build_filename(b->mnt, "_views", ".metrics", NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return -1;
    g_autofree char *prefix = g_strdup_printf("%s{mount=\"%s\"} ", name, b->mnt);
    for (char *l = text; l && *l;) {
        if (g_str_has_prefix(l, prefix))
            return g_ascii_strtoll(l + strlen(prefix), NULL, 10);
        l = strchr(l, '\n');
        if (l)
            l++;
    }
    return -1;
}

/* Nodes and the daemon's descriptors (pipe ends apart) with the clients
 * idle: the lowest of five readings, dentries dropped before each (when
 * allowed). */
static void out_settled(Bench *b, gint64 *nodes, int *fds, int *pipes)
{
    *nodes = -1;
    *fds = -1;
    *pipes = -1;
    for (int i = 0; i < 5; i++) {
        if (b->can_drop) {
            sync();
            int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
            if (fd >= 0) {
                if (write(fd, "2\n", 2) != 2)
                    g_printerr("ckpt-bench: drop_caches: %s\n", g_strerror(errno));
                close(fd);
            }
        }
        g_usleep(200 * 1000);
        gint64 n = out_metric(b, "ckptfs_nodes");
        int p = 0, f = mountrun_count_fds(out_daemon(out_supervisor(b)), &p);
        if (n >= 0 && (*nodes < 0 || n < *nodes))
            *nodes = n;
        if (f >= 0 && (*fds < 0 || f < *fds)) {
            *fds = f;
            *pipes = p;
        }
    }
}

static gboolean out_wait_commits(Outlive *o, int more)
{
    int from = g_atomic_int_get(&o->commits);
    double deadline = now_s() + OUT_PROGRESS_S;
    while (g_atomic_int_get(&o->commits) < from + more) {
        if (now_s() > deadline)
            return FALSE;
        g_usleep(1000);
    }
    return TRUE;
}

/* kill -9 of the daemon or `ckptfs --takeover MNT`; then waits for the
 * new daemon. */
static gboolean out_event(Outlive *o, OutKind kind, int n)
{
    Bench *b = o->b;
    pid_t sup = out_supervisor(b);
    OutEvent ev = {.kind = kind, .old = out_daemon(sup)};
    const char *what = kind == OUT_KILL ? "kill -9" : "--takeover";
    if (ev.old <= 0) {
        g_printerr("ckpt-bench: %s %d: supervisor %d has no daemon child\n", what, n, (int)sup);
        g_array_append_val(o->events, ev);
        return FALSE;
    }
    ev.t = now_s();
    if (kind == OUT_KILL) {
        if (kill(ev.old, SIGKILL) < 0) {
            g_printerr("ckpt-bench: kill %d: %s\n", (int)ev.old, g_strerror(errno));
            g_array_append_val(o->events, ev);
            return FALSE;
        }
    } else {
        const char *argv[] = {b->ckptfs, "--takeover", b->mnt, NULL};
        g_autofree char *err = NULL;
        int status = -1;
        g_autoptr(GError) error = NULL;
        gboolean ran = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL,
                                    child_setup, NULL, NULL, &err, &status, &error);
        ev.t_new = now_s();
        if (!ran || !g_spawn_check_wait_status(status, NULL)) {
            g_printerr("ckpt-bench: --takeover %d: %s\n", n,
                       !ran ? error->message
                            : (err && *err ? g_strstrip(err) : "failed without a message"));
            g_array_append_val(o->events, ev);
            return FALSE;
        }
    }
    double deadline = now_s() + OUT_NEW_DAEMON_S;
    while ((ev.new_ = out_daemon(sup)) <= 0 || ev.new_ == ev.old) {
        if (now_s() > deadline) {
            g_printerr("ckpt-bench: %s %d: no new daemon within %.0f s\n", what, n,
                       OUT_NEW_DAEMON_S);
            g_array_append_val(o->events, ev);
            return FALSE;
        }
        g_usleep(1000);
    }
    if (kind == OUT_KILL)
        ev.t_new = now_s();
    ev.ok = TRUE;
    g_array_append_val(o->events, ev);
    return TRUE;
}

static int cmp_double(gconstpointer a, gconstpointer b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values (q in 0..1). */
static double pct(GArray *sorted, double q)
{
    if (sorted->len == 0)
        return NAN;
    guint i = (guint)ceil(q * sorted->len);
    return g_array_index(sorted, double, i == 0 ? 0 : i - 1);
}

/* The latencies (sorted) of commits in the window of events of `kind`
 * (every commit when all), or of event `only` alone (>= 0). */
static GArray *out_latencies(Outlive *o, gboolean all, OutKind kind, int only)
{
    GArray *lat = g_array_new(FALSE, FALSE, sizeof(double));
    for (int t = 0; t < COMMIT_THREADS; t++) {
        GArray *s = o->w[t].samples;
        for (guint i = 0; i < s->len; i++) {
            const OutSample *x = &g_array_index(s, OutSample, i);
            gboolean in = all;
            for (guint e = 0; !in && e < o->events->len; e++) {
                const OutEvent *ev = &g_array_index(o->events, OutEvent, e);
                if ((only >= 0 && (int)e != only) || (only < 0 && ev->kind != kind))
                    continue;
                in = x->start < ev->t + OUT_WINDOW_S && x->start + x->lat > ev->t;
            }
            if (in)
                g_array_append_val(lat, x->lat);
        }
    }
    g_array_sort(lat, cmp_double);
    return lat;
}

static void out_print_lat(const char *label, GArray *lat)
{
    if (lat->len == 0) {
        printf("%-40s %8s\n", label, "0");
        return;
    }
    printf("%-40s %8u %10.1f %10.1f %10.1f\n", label, lat->len, pct(lat, 0.5) * 1e3,
           pct(lat, 0.99) * 1e3, pct(lat, 1.0) * 1e3);
}

/* The run of wl_outlive once the workers' directories exist. */
static void out_run(Bench *b, Outlive *o)
{
    int ret = bench_mount(b);
    if (ret < 0) {
        g_printerr("ckpt-bench: outlive: mount: %s\n", g_strerror(-ret));
        b->failed = TRUE;
        return;
    }
    pid_t first = out_daemon(out_supervisor(b));
    for (int i = 0; i < 200 && first <= 0; i++) {
        g_usleep(10 * 1000);
        first = out_daemon(out_supervisor(b));
    }
    if (first <= 0) {
        g_printerr("ckpt-bench: outlive: %s has no daemon child: is -o supervise supported?\n",
                   b->ckptfs);
        b->failed = TRUE;
        daemon_stop(b);
        return;
    }
    gint64 nodes0, nodes1, attaches0 = out_metric(b, "ckptfs_daemon_attaches_total");
    int fds0, fds1, pipes0, pipes1 = -1;
    out_settled(b, &nodes0, &fds0, &pipes0);

    GThread *th[COMMIT_THREADS];
    for (int t = 0; t < COMMIT_THREADS; t++)
        th[t] = g_thread_new("outlive", out_thread, &o->w[t]);
    double start = now_s();
    gboolean ok = out_wait_commits(o, 4 * COMMIT_THREADS);
    g_usleep(1000 * 1000); /* a second without events, for the "all" line */
    int total = b->outlive_kills + b->outlive_takeovers;
    double last = 0;
    for (int n = 0; ok && n < total; n++) {
        OutKind kind = n < b->outlive_kills ? OUT_KILL : OUT_TAKEOVER;
        double wait = last + OUT_SPACING_S - now_s();
        if (wait > 0)
            g_usleep((gulong)(wait * 1e6));
        ok = out_event(o, kind, kind == OUT_KILL ? n + 1 : n + 1 - b->outlive_kills);
        last = now_s();
        /* the new daemon serves the loop before the next event */
        if (ok && !(ok = out_wait_commits(o, COMMIT_THREADS)))
            g_printerr("ckpt-bench: outlive: no commit within %.0f s after event %d\n",
                       OUT_PROGRESS_S, n + 1);
        if (b->outlive_soak && (n + 1) % 50 == 0)
            g_printerr("ckpt-bench: outlive: %d/%d events, %d commits, %d failed calls\n", n + 1,
                       total, g_atomic_int_get(&o->commits), g_atomic_int_get(&o->failures));
    }
    if (!ok) {
        /* clients blocked on a daemon that never came back: the teardown's
         * lazy unmount and kill end them */
        g_printerr("ckpt-bench: outlive: stopping early; unmounting\n");
        g_mutex_lock(&b->lock);
        daemon_kill_locked(b);
        g_mutex_unlock(&b->lock);
    }
    g_atomic_int_set(&o->stop, 1);
    for (int t = 0; t < COMMIT_THREADS; t++)
        g_thread_join(th[t]);
    double elapsed = now_s() - start;

    /* every acknowledged commit, through the mount and in the backing dir */
    int checked = 0, wrong_files = 0;
    g_autofree guint8 *buf = g_malloc(OUT_COMMIT_BYTES + 1);
    for (int t = 0; ok && t < COMMIT_THREADS; t++) {
        OutWorker *w = &o->w[t];
        g_autofree char *bdir = g_strdup_printf("%s/_state/%s/outlive/%d", b->backing, b->job, t);
        for (int s = 0; s < OUT_SLOTS; s++) {
            if (!w->acked[s] && !w->unsure[s])
                continue;
            for (int side = 0; side < 2; side++) {
                const char *dir = side ? bdir : w->dir;
                const char *what;
                gboolean good =
                    (w->acked[s] && out_file_is(b, dir, s, t, w->acked[s], buf, &what) == 1) ||
                    (w->unsure[s] && out_file_is(b, dir, s, t, w->unsure[s], buf, &what) == 1);
                checked++;
                if (!good) {
                    wrong_files++;
                    g_printerr("ckpt-bench: outlive: %s/ckpt-%d is not commit %" G_GUINT64_FORMAT
                               "\n",
                               dir, s, w->acked[s]);
                }
            }
        }
    }
    gint64 attaches = -1;
    nodes1 = fds1 = -1;
    if (ok) {
        attaches = out_metric(b, "ckptfs_daemon_attaches_total");
        out_settled(b, &nodes1, &fds1, &pipes1);
        if (daemon_stop(b) < 0) {
            g_printerr("ckpt-bench: outlive: the supervisor did not exit within 10 s of "
                       "fusermount3 -u; killed\n");
            ok = FALSE;
        }
    }

    int failures = g_atomic_int_get(&o->failures), wrong = g_atomic_int_get(&o->wrong);
    int kills_ok = 0, takeovers_ok = 0;
    for (guint e = 0; e < o->events->len; e++) {
        const OutEvent *ev = &g_array_index(o->events, OutEvent, e);
        if (ev->ok)
            *(ev->kind == OUT_KILL ? &kills_ok : &takeovers_ok) += 1;
    }
    printf("commits acknowledged        %d in %.1f s (%d threads, %s each)\n",
           g_atomic_int_get(&o->commits), elapsed, COMMIT_THREADS, "64KiB");
    printf("operations done             %d (open, write, fsync, close, rename, fsync dir; "
           "open, read, close of the previous commit)\n",
           g_atomic_int_get(&o->ops));
    printf("failed operations           %d\n", failures);
    if (o->errors->len)
        printf("%s", o->errors->str);
    printf("wrong bytes read back       %d commits\n", wrong);
    printf("acknowledged files checked  %d (mount and backing), %d wrong\n", checked, wrong_files);
    printf("kill -9                     %d of %d done\n", kills_ok, b->outlive_kills);
    printf("--takeover                  %d of %d exited 0\n", takeovers_ok, b->outlive_takeovers);
    printf("daemon attaches             %" G_GINT64_FORMAT " before, %" G_GINT64_FORMAT " after\n",
           attaches0, attaches);
    printf("daemon fds (idle)           %d before, %d after (and %d, %d pipe ends: libfuse's "
           "splice pipes, one per worker thread)\n",
           fds0, fds1, pipes0, pipes1);
    printf("ckptfs_nodes (idle)         %" G_GINT64_FORMAT " before, %" G_GINT64_FORMAT " after\n",
           nodes0, nodes1);
    printf("%-40s %8s %10s %10s %10s\n", "commit latency (ms)", "commits", "p50", "p99", "p100");
    g_autoptr(GArray) all = out_latencies(o, TRUE, OUT_KILL, -1);
    out_print_lat("all", all);
    if (b->outlive_kills) {
        g_autoptr(GArray) k = out_latencies(o, FALSE, OUT_KILL, -1);
        out_print_lat("in the kill windows", k);
    }
    if (b->outlive_takeovers) {
        g_autoptr(GArray) k = out_latencies(o, FALSE, OUT_TAKEOVER, -1);
        out_print_lat("in the takeover windows", k);
    }
    if (!b->outlive_soak || o->events->len <= 50) {
        for (guint e = 0; e < o->events->len; e++) {
            const OutEvent *ev = &g_array_index(o->events, OutEvent, e);
            g_autoptr(GArray) k = out_latencies(o, FALSE, ev->kind, (int)e);
            g_autofree char *label = g_strdup_printf(
                "%s %u (%d -> %d, %.0f ms)", ev->kind == OUT_KILL ? "kill" : "takeover",
                ev->kind == OUT_KILL ? e + 1 : e + 1 - (guint)b->outlive_kills, (int)ev->old,
                (int)ev->new_, (ev->t_new - ev->t) * 1e3);
            out_print_lat(label, k);
        }
    }
    printf("# window of an event: commits in flight when it was sent or started within %.1f s "
           "after; (a -> b, t): old and new daemon pid, time until the new daemon was seen "
           "(kill) or --takeover returned\n",
           OUT_WINDOW_S);
    gboolean grew = ok && (fds1 > fds0 + 2 || nodes1 > nodes0 + 2);
    if (b->outlive_soak)
        printf("# soak: %s\n",
               grew ? "descriptors or nodes grew" : "no growth of descriptors or nodes");
    if (!ok || failures || wrong || wrong_files || kills_ok != b->outlive_kills ||
        takeovers_ok != b->outlive_takeovers || (b->outlive_soak && grew))
        b->failed = TRUE;
}

/* --outlive / --soak: a supervised ckptfs over the scratch directory, the
 * 4-thread commit loop, `kills` kill -9 of the daemon then `takeovers`
 * --takeover, OUT_SPACING_S apart and each after the loop made progress
 * again; figures only (the exit status says whether an operation failed, a
 * byte was wrong or an event did not complete, never how long anything
 * took). */
static void wl_outlive(Bench *b)
{
    Outlive *o = g_new0(Outlive, 1);
    o->b = b;
    g_mutex_init(&o->lock);
    o->errors = g_string_new("");
    o->events = g_array_new(FALSE, FALSE, sizeof(OutEvent));
    int ret = 0;
    for (int t = 0; t < COMMIT_THREADS; t++) {
        o->w[t].o = o;
        o->w[t].id = t;
        o->w[t].samples = g_array_new(FALSE, FALSE, sizeof(OutSample));
        o->w[t].dir = g_strdup_printf("%s/_state/%s/outlive/%d", b->mnt, b->job, t);
        g_autofree char *d = g_strdup_printf("%s/_state/%s/outlive/%d", b->backing, b->job, t);
        if (ret == 0 && g_mkdir_with_parents(d, 0755) < 0)
            ret = -errno;
    }
    if (ret < 0) {
        g_printerr("ckpt-bench: outlive: setup: %s\n", g_strerror(-ret));
        b->failed = TRUE;
    } else {
        out_run(b, o);
    }
    for (int t = 0; t < COMMIT_THREADS; t++) {
        g_free(o->w[t].dir);
        if (o->w[t].samples)
            g_array_unref(o->w[t].samples);
    }
    g_array_unref(o->events);
    g_string_free(o->errors, TRUE);
    g_mutex_clear(&o->lock);
    g_free(o);
}

/* ---- set-up, signals, main ---- */

/* The fuse module's enable_uring back as it was before the run (b->lock
 * held: the signal thread and the main thread may both get here). */
static void uring_restore(Bench *b)
{
    if (!b->uring_was)
        return;
    int u = open(enable_uring_param, O_WRONLY | O_CLOEXEC);
    if (u < 0 || write(u, b->uring_was, strlen(b->uring_was)) < 0)
        g_printerr("ckpt-bench: cannot set %s back to %s\n", enable_uring_param, b->uring_was);
    if (u >= 0)
        close(u);
    g_clear_pointer(&b->uring_was, g_free);
}

static gpointer signal_thread(gpointer p)
{
    Bench *b = p;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    int sig = 0;
    if (sigwait(&set, &sig) != 0)
        return NULL;
    g_printerr("ckpt-bench: %s: unmounting and cleaning up\n", g_strsignal(sig));
    g_mutex_lock(&b->lock); /* held until _exit: no new daemon starts */
    daemon_kill_locked(b);
    uring_restore(b);
    if (b->scratch) {
        rm_rf(b->scratch);
    } else if (b->backing) {
        g_autofree char *s = g_strdup_printf("%s/_state/%s", b->backing, b->job);
        g_autofree char *v = g_strdup_printf("%s/_state/%s", b->backing, b->view_job);
        g_autofree char *j = g_strdup_printf("%s/_jobs/%s", b->backing, b->view_job);
        rm_rf(s);
        rm_rf(v);
        rm_rf(j);
    }
    _exit(128 + sig);
}

static int setup(Bench *b)
{
    g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
    b->exe_dir = exe ? g_path_get_dirname(exe) : g_strdup(".");
    if (!b->ckptfs && !b->mounted_dir && !(b->ckptfs = mountrun_find_ckptfs())) {
        g_printerr("ckpt-bench: no ckptfs next to ckpt-bench (a build tree), in PATH, "
                   "/usr/local/sbin or /usr/sbin (use --ckptfs PATH)\n");
        return -ENOENT;
    }

    if (b->mounted_dir) {
        if (!b->backing_opt) {
            g_printerr("ckpt-bench: --mounted-dir needs --backing (the directory it mounts)\n");
            return -EINVAL;
        }
        b->backing = g_canonicalize_filename(b->backing_opt, NULL);
        b->mnt = g_canonicalize_filename(b->mounted_dir, NULL);
        b->job = g_strdup_printf("ckpt-bench-%d", (int)getpid());
    } else {
        if (!g_file_test(b->ckptfs, G_FILE_TEST_IS_EXECUTABLE)) {
            g_printerr("ckpt-bench: no ckptfs at %s (use --ckptfs PATH)\n", b->ckptfs);
            return -ENOENT;
        }
        g_autofree char *tmpl =
            g_build_filename(b->dir_opt ? b->dir_opt : "/var/tmp", "ckpt-bench-XXXXXX", NULL);
        g_autofree char *abs = g_canonicalize_filename(tmpl, NULL);
        if (!g_mkdtemp(abs)) {
            int e = errno;
            g_printerr("ckpt-bench: cannot create %s: %s\n", abs, g_strerror(e));
            return -e;
        }
        b->scratch = g_steal_pointer(&abs);
        b->backing = g_build_filename(b->scratch, "backing", NULL);
        b->mnt = g_build_filename(b->scratch, "mnt", NULL);
        if (mkdir(b->backing, 0755) < 0 || mkdir(b->mnt, 0755) < 0)
            return -errno;
        b->job = g_strdup("bench");
    }
    b->view_job = g_strdup_printf("%s-view", b->job);
    g_autofree char *jobdir = g_strdup_printf("%s/_state/%s", b->backing, b->job);
    if (g_mkdir_with_parents(jobdir, 0755) < 0) {
        int e = errno;
        g_printerr("ckpt-bench: cannot create %s: %s\n", jobdir, g_strerror(e));
        return -e;
    }
    struct statfs sf;
    b->fs_type = g_strdup(statfs(b->backing, &sf) == 0 ? fs_type_name((long)sf.f_type) : "?");

    int fd = geteuid() == 0 ? open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC) : -1;
    b->can_drop = fd >= 0;
    if (fd >= 0)
        close(fd);

    /* ckptfs runs in both transports: the ring needs the module's switch
     * on for the run (root), and gets it back as it was at the end */
    g_autofree char *was = NULL;
    if (!b->mounted_dir && !b->outlive && !(b->mount_opts && strstr(b->mount_opts, "io_uring")) &&
        geteuid() == 0 && g_file_get_contents(enable_uring_param, &was, NULL, NULL) &&
        was[0] == 'N') {
        /* kept before the switch flips: a signal in between still restores it */
        g_mutex_lock(&b->lock);
        b->uring_was = g_steal_pointer(&was);
        g_mutex_unlock(&b->lock);
        int u = open(enable_uring_param, O_WRONLY | O_CLOEXEC);
        if (u < 0 || write(u, "Y\n", 2) != 2)
            g_printerr("ckpt-bench: cannot set %s: ckptfs runs over /dev/fuse only\n",
                       enable_uring_param);
        if (u >= 0)
            close(u);
    }

    b->data = g_malloc(4 * MiB);
    g_autoptr(GRand) rand = g_rand_new_with_seed(1);
    for (gsize i = 0; i < 4 * MiB / 4; i++)
        ((guint32 *)b->data)[i] = g_rand_int(rand);
    return 0;
}

/* Builds libfuse's passthrough_ll example into the scratch directory, the
 * way its Makefile would: gcc with `pkg-config fuse3`. NULL and *why set
 * when it cannot. */
static char *build_passthrough_ll(Bench *b, char **why)
{
    if (!g_file_test(passthrough_ll_src, G_FILE_TEST_IS_REGULAR)) {
        *why = g_strdup_printf("not installed (no %s: apt-get install libfuse3-dev)",
                               passthrough_ll_src);
        return NULL;
    }
    const char *pc_argv[] = {"pkg-config", "--cflags", "--libs", "fuse3", NULL};
    g_autofree char *flags = NULL;
    int status = -1;
    if (!g_spawn_sync(NULL, (char **)pc_argv, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_STDERR_TO_DEV_NULL, child_setup, NULL, &flags,
                      NULL, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL)) {
        *why = g_strdup("not built (pkg-config fuse3 failed)");
        return NULL;
    }
    g_auto(GStrv) fv = NULL;
    if (!g_shell_parse_argv(g_strstrip(flags), NULL, &fv, NULL))
        fv = g_new0(char *, 1);
    char *exe = g_build_filename(b->scratch, "passthrough_ll", NULL);
    g_autoptr(GPtrArray) argv = g_ptr_array_new();
    g_ptr_array_add(argv, "gcc");
    g_ptr_array_add(argv, "-O2");
    g_ptr_array_add(argv, "-o");
    g_ptr_array_add(argv, exe);
    g_ptr_array_add(argv, (char *)passthrough_ll_src);
    for (char **f = fv; *f; f++)
        g_ptr_array_add(argv, *f);
    g_ptr_array_add(argv, NULL);
    g_autofree char *err = NULL;
    if (!g_spawn_sync(NULL, (char **)argv->pdata, NULL,
                      G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL, child_setup, NULL, NULL,
                      &err, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL)) {
        g_auto(GStrv) lines = g_strsplit(err ? err : "", "\n", 2);
        *why = g_strdup_printf("not built (gcc: %s)", lines[0] && *lines[0] ? lines[0] : "failed");
        g_free(exe);
        return NULL;
    }
    return exe;
}

/* Whether the fuse module serves FUSE over io_uring now. */
static gboolean uring_enabled(void)
{
    g_autofree char *v = NULL;
    return g_file_get_contents(enable_uring_param, &v, NULL, NULL) && v[0] == 'Y';
}

/* systems[0] is ckptfs (and [1] ckptfs over /dev/fuse where [0] has the
 * ring); --peers adds each peer, found in PATH or built,
 * or recorded as skipped with the reason. */
static void setup_systems(Bench *b)
{
    b->systems[0] = (System){.name = "ckptfs", .kind = SYS_CKPTFS, .exe = g_strdup(b->ckptfs)};
    b->nsystems = 1;
    /* where the kernel serves FUSE over io_uring, ckptfs runs once over the
     * ring (its default) and once over /dev/fuse */
    if (!b->mounted_dir && uring_enabled() &&
        !(b->mount_opts && strstr(b->mount_opts, "io_uring"))) {
        b->systems[0].name = "ckptfs-ring";
        b->systems[1] = (System){.name = "ckptfs-dev",
                                 .kind = SYS_CKPTFS,
                                 .exe = g_strdup(b->ckptfs),
                                 .opts = "io_uring=off"};
        b->nsystems = 2;
    }
    if (!b->peers)
        return;
    g_autofree char *lower = g_build_filename(b->scratch, "ovl-lower", NULL);
    g_autofree char *work = g_build_filename(b->scratch, "ovl-work", NULL);
    for (gsize i = 0; i < G_N_ELEMENTS(peer_defs); i++) {
        const PeerDef *d = &peer_defs[i];
        System *sys = &b->systems[b->nsystems++];
        *sys = (System){.name = d->name, .kind = d->kind};
        for (gsize j = 0; j < G_N_ELEMENTS(peers_dropping_dirsync); j++)
            sys->drops_dirsync |= !strcmp(d->name, peers_dropping_dirsync[j]);
        if (d->program) {
            sys->exe = g_find_program_in_path(d->program);
            if (!sys->exe)
                sys->skip = g_strdup_printf("not installed (no %s: apt-get install %s)", d->program,
                                            d->package);
        } else {
            sys->exe = build_passthrough_ll(b, &sys->skip);
        }
        if (sys->skip)
            sys->skip_cell = "missing";
        if (d->kind == SYS_OVERLAY && !sys->skip &&
            (g_mkdir_with_parents(lower, 0755) < 0 || g_mkdir_with_parents(work, 0755) < 0)) {
            sys->skip = g_strdup_printf("not run (cannot create %s: %s)", work, g_strerror(errno));
            sys->skip_cell = "missing";
        }
    }
}

static int parse_only(Bench *b)
{
    if (!b->only) {
        for (gsize i = 0; i < G_N_ELEMENTS(workload_names); i++)
            b->selected[i] = TRUE;
        return 0;
    }
    g_auto(GStrv) names = g_strsplit(b->only, ",", -1);
    for (char **n = names; *n; n++) {
        gsize i = 0;
        while (i < G_N_ELEMENTS(workload_names) && strcmp(g_strstrip(*n), workload_names[i]))
            i++;
        if (i == G_N_ELEMENTS(workload_names)) {
            g_printerr("ckpt-bench: unknown workload '%s' in --only\n", *n);
            return -EINVAL;
        }
        b->selected[i] = TRUE;
    }
    return 0;
}

static void teardown(Bench *b)
{
    g_mutex_lock(&b->lock);
    daemon_kill_locked(b);
    uring_restore(b);
    g_mutex_unlock(&b->lock);
    if (b->scratch) {
        rm_rf(b->scratch);
    } else if (b->backing && b->job) {
        g_autofree char *s = g_strdup_printf("%s/_state/%s", b->backing, b->job);
        rm_rf(s);
    }
}

static void bench_free(Bench *b)
{
    g_free(b->dir_opt);
    g_free(b->ckptfs);
    g_free(b->mount_opts);
    g_free(b->only);
    g_free(b->mounted_dir);
    g_free(b->backing_opt);
    g_free(b->exe_dir);
    g_free(b->scratch);
    g_free(b->backing);
    g_free(b->mnt);
    g_free(b->job);
    g_free(b->view_job);
    g_free(b->fs_type);
    g_free(b->data);
    for (guint s = 0; s < b->nsystems; s++) {
        g_free(b->systems[s].exe);
        g_free(b->systems[s].skip);
    }
    g_ptr_array_unref(b->results);
    g_ptr_array_unref(b->notes);
    g_mutex_clear(&b->lock);
}

int main(int argc, char **argv)
{
    setlocale(LC_ALL, ""); /* --help in the user's charset: GOption's own words are UTF-8 */
    gboolean show_version = FALSE;
    Bench b = {.scale = 1.0, .runs = 3, .idle_s = -1, .outlive_kills = -1, .outlive_takeovers = -1};
    g_mutex_init(&b.lock);
    b.results = g_ptr_array_new_with_free_func(result_free);
    b.notes = g_ptr_array_new_with_free_func(g_free);

    GOptionEntry entries[] = {
        {"dir", 0, 0, G_OPTION_ARG_FILENAME, &b.dir_opt,
         "Scratch location: a new directory is made (and removed) in it (default /var/tmp)", "DIR"},
        {"ckptfs", 0, 0, G_OPTION_ARG_FILENAME, &b.ckptfs,
         "The daemon (default: ../fs/ckptfs next to this binary in a build tree, else ckptfs "
         "in PATH, /usr/local/sbin or /usr/sbin)",
         "PATH"},
        {"mount-opts", 0, 0, G_OPTION_ARG_STRING, &b.mount_opts,
         "Passed to ckptfs as -o OPTS (e.g. policy=audit, no_policy)", "OPTS"},
        {"only", 0, 0, G_OPTION_ARG_STRING, &b.only,
         "Comma list of commit64k,commit4m,seqwrite,seqread,randread,meta,view,mount", "LIST"},
        {"scale", 0, 0, G_OPTION_ARG_DOUBLE, &b.scale, "Multiplies sizes and counts (default 1)",
         "F"},
        {"runs", 0, 0, G_OPTION_ARG_INT, &b.runs, "Runs per side; the median is reported (3)", "N"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &b.json, "Print one JSON document", NULL},
        {"peers", 0, 0, G_OPTION_ARG_NONE, &b.peers,
         "Also run the workloads through passthrough_ll, fuse-overlayfs, mergerfs, bindfs and "
         "unionfs-fuse (each skipped when missing), then print one table of every system",
         NULL},
        {"mount-jobs", 0, 0, G_OPTION_ARG_INT64, &b.mount_jobs,
         "Jobs (x 10 markers) of the mount workload's directory (default 10,000; e.g. 100000)",
         "N"},
        {"idle-seconds", 0, 0, G_OPTION_ARG_INT, &b.idle_s,
         "How long the mount workload measures an idle mount's CPU (default 60 x scale, at "
         "least 1)",
         "S"},
        {"mounted-dir", 0, 0, G_OPTION_ARG_FILENAME, &b.mounted_dir,
         "Use this existing mount of --backing instead of spawning ckptfs", "MNT"},
        {"backing", 0, 0, G_OPTION_ARG_FILENAME, &b.backing_opt,
         "With --mounted-dir: the directory MNT mounts", "DIR"},
        {"outlive", 0, 0, G_OPTION_ARG_NONE, &b.outlive,
         "Instead of the workloads: ckptfs -o supervise under a 4-thread commit loop, kill -9 of "
         "its daemon --kills times, then --takeover --takeovers times; failed operations, commit "
         "latency in each event's window, descriptors and nodes before/after",
         NULL},
        {"kills", 0, 0, G_OPTION_ARG_INT, &b.outlive_kills,
         "With --outlive: kill -9 of the daemon, 0.5 s apart (default 20; 1,000 with --soak)", "N"},
        {"takeovers", 0, 0, G_OPTION_ARG_INT, &b.outlive_takeovers,
         "With --outlive: ckptfs --takeover after the kills (default 20; 0 with --soak)", "N"},
        {"soak", 0, 0, G_OPTION_ARG_NONE, &b.outlive_soak,
         "--outlive with 1,000 kills (not for CI): exit 2 also when descriptors or nodes grew",
         NULL},
        {"version", 'V', 0, G_OPTION_ARG_NONE, &show_version, "Print the version and exit", NULL},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) oc =
        g_option_context_new("- the workloads of ckpt-bench(1), native and through a ckptfs mount "
                             "of the same directory");
    g_option_context_add_main_entries(oc, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(oc, &argc, &argv, &error) || argc != 1) {
        g_printerr("ckpt-bench: %s\n", error ? error->message : "unexpected argument");
        bench_free(&b);
        return SETUP_ERROR;
    }
    if (show_version) {
        printf("ckpt-bench (ckptfs) %s\n", CKPTFS_VERSION);
        bench_free(&b);
        return 0;
    }
    if (b.idle_s < 0)
        b.idle_s = (int)MAX(1.0, round(60.0 * b.scale));
    if (b.outlive_soak)
        b.outlive = TRUE;
    if (b.outlive_kills < 0)
        b.outlive_kills = b.outlive_soak ? 1000 : 20;
    if (b.outlive_takeovers < 0)
        b.outlive_takeovers = b.outlive_soak ? 0 : 20;
    if (b.outlive && (b.peers || b.mounted_dir || b.json || b.only)) {
        g_printerr("ckpt-bench: --outlive mounts ckptfs -o supervise itself and prints text: not "
                   "with --peers, --mounted-dir, --json or --only\n");
        bench_free(&b);
        return SETUP_ERROR;
    }
    if (b.outlive) {
        /* the supervisor under the user's options */
        char *opts = g_strdup_printf("supervise%s%s", b.mount_opts && *b.mount_opts ? "," : "",
                                     b.mount_opts ? b.mount_opts : "");
        g_free(b.mount_opts);
        b.mount_opts = opts;
    }
    if (b.runs < 1 || !(b.scale > 0) || parse_only(&b) < 0 || (b.peers && b.mounted_dir)) {
        if (b.runs < 1 || !(b.scale > 0))
            g_printerr("ckpt-bench: --runs must be >= 1 and --scale > 0\n");
        if (b.peers && b.mounted_dir)
            g_printerr("ckpt-bench: --peers mounts each peer itself: not with --mounted-dir\n");
        bench_free(&b);
        return SETUP_ERROR;
    }

    /* Signals go to one thread that unmounts and cleans up, whatever the
     * main thread is doing; children get an empty mask back (child_setup). */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    g_thread_unref(g_thread_new("signals", signal_thread, &b));

    if (setup(&b) < 0) {
        teardown(&b);
        bench_free(&b);
        return SETUP_ERROR;
    }
    setup_systems(&b);

    if (b.outlive) {
        struct utsname u;
        uname(&u);
        printf("# ckpt-bench --outlive: backing %s (%s), mount %s\n", b.backing, b.fs_type, b.mnt);
        printf("# daemon %s -o %s; kernel %s; %d kill -9, then %d --takeover, %.1f s apart%s\n",
               b.ckptfs, b.mount_opts, u.release, b.outlive_kills, b.outlive_takeovers,
               OUT_SPACING_S, b.outlive_soak ? " (soak)" : "");
        fflush(stdout);
        wl_outlive(&b);
        teardown(&b);
        int rc = b.failed ? SETUP_ERROR : 0;
        bench_free(&b);
        return rc;
    }

    if (!b.json) {
        struct utsname u;
        uname(&u);
        printf("# ckpt-bench: backing %s (%s), mount %s\n", b.backing, b.fs_type, b.mnt);
        if (b.uring_was)
            printf("# enable_uring of the fuse module set to Y for the run, and back to %s at its "
                   "end\n",
                   g_strchomp(b.uring_was));
        printf("# daemon %s -o %s; kernel %s; scale %g; median of %d run%s per side\n",
               b.mounted_dir ? "(existing mount)" : b.ckptfs,
               b.mount_opts && *b.mount_opts ? b.mount_opts : "(defaults)", u.release, b.scale,
               b.runs, b.runs == 1 ? "" : "s");
        for (guint s = 1; s < b.nsystems; s++) {
            g_autoptr(GPtrArray) argv = system_argv(&b, &b.systems[s], b.backing, b.mnt);
            g_autofree char *cmd = g_strjoinv(" ", (char **)argv->pdata);
            printf("# %s %s%s: %s\n", is_ckptfs(&b, s) ? "also" : "peer", b.systems[s].name,
                   b.systems[s].drops_dirsync ? "*" : "",
                   b.systems[s].skip ? b.systems[s].skip : cmd);
        }
        printf("%-40s %12s %12s %7s %7s %4s\n", "workload", "native", "mount", "ratio", "target",
               "met");
        fflush(stdout);
    }
    if (!b.can_drop)
        note(&b, "not root or drop_caches not writable: cold read and cold mount skipped");
    if (!strcmp(b.fs_type, "tmpfs"))
        note(&b, "the backing directory is on tmpfs: figures do not reflect a disk");

    if (b.selected[0])
        wl_commit(&b, "commit64k", 64 * 1024);
    if (b.selected[1])
        wl_commit(&b, "commit4m", 4 * MiB);
    if (b.selected[2])
        wl_seqwrite(&b);
    if (b.selected[3])
        wl_seqread(&b);
    if (b.selected[4])
        wl_randread(&b);
    if (b.selected[5])
        wl_meta(&b);
    if (b.selected[6])
        wl_view(&b);
    if (b.selected[7])
        wl_mount(&b);

    teardown(&b);
    if (!b.json)
        printf("# ratio = mount/native of the medians (find+stat view: time, so lower is "
               "better); mount lines: the mount figure itself\n");
    print_peers_table(&b);
    if (b.json)
        print_json(&b);
    int rc = b.failed ? SETUP_ERROR : 0;
    bench_free(&b);
    return rc;
}
