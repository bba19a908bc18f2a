/* ckptctl run: run a command over a fresh ckptfs mount and fail it when two
 * jobs crossed (the run command of ckptctl(1)).
 *
 *   ckptctl run [--dir DIR] [--policy enforce|audit] [--identity MODE]
 *               [--job ID] [--tag-env VAR] [--collision-exit N] [--report FILE]
 *               [--json] [--keep] [--ckptfs PATH] [-o OPT]... -- COMMAND [ARGS...]
 *
 * Mounts `ckptfs -f` over DIR (a new temporary directory when not given) at a
 * private mountpoint, runs COMMAND in the caller's working directory with
 * CKPTFS_MOUNT and CKPTFS_BACKING in its environment, unmounts, then reports the collision log
 * (collision_log= in a private file, so it outlives the mount) grouped by kind
 * and pair of jobs, and the ckptctl check hazards of DIR as COMMAND left it.
 *
 * Exit: COMMAND's status (128+N when killed by signal N) when nothing was
 * recorded and no collision hazard found; --collision-exit N (default 3)
 * when there were collisions (also
 * in audit mode); 2 when the mount could not be set up or broke mid-run.
 *
 * Signals are taken synchronously (blocked, then sigtimedwait), so there is
 * no handler and no global state: SIGINT/SIGTERM/SIGHUP are forwarded to
 * COMMAND's process group (a second one sends SIGKILL), and the unmount runs
 * whatever way COMMAND ended.  SIGKILL of ckptctl run itself cannot be
 * caught: the daemon and COMMAND get PR_SET_PDEATHSIG SIGTERM (the daemon
 * then unmounts, lazily), and the daemon mounts with auto_unmount, so even a
 * SIGKILL of the daemon leaves no mount behind. */
#include "resolve.h"
#include "ckptctl.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glib/gstdio.h>
#include <libmount.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "collision.h"
#include "json.h"
#include "identity.h"
#include "mountrun.h"

#define RUN_EXIT_COLLISIONS 3
#define MOUNT_TIMEOUT_MS    30000 /* ASan start-up on a loaded machine is slow */
#define UNMOUNT_GRACE_MS    5000  /* busy: COMMAND's leftovers may still close files */
#define DAEMON_EXIT_MS      10000

typedef struct {
    /* options */
    char *dir;
    char *policy;
    char *identity;
    char *job;
    char *report;
    char *ckptfs;
    char **opts;
    gboolean keep;
    gboolean json;      /* --json: the report document on stdout, not the table */
    int collision_exit; /* --collision-exit N: the exit status on collisions */
    char *tag_env;      /* --tag-env VAR: recorded as each record's "tag" */
    gboolean baseline;  /* --baseline: hazards DIR had before COMMAND do not count */
    char **command;

    /* the run */
    char *bin;         /* ckptfs binary */
    char *backing;     /* real path of DIR */
    bool made_backing; /* DIR is ours (temporary) */
    char *base;        /* private temp dir: mnt/, collisions.jsonl, ckptfs.log */
    char *mnt;
    char *log;
    char *daemon_log;
    sigset_t sigs; /* blocked for the whole run, taken with sigtimedwait */
    sigset_t old_mask;
    pid_t daemon;
    int daemon_status;
    bool daemon_died; /* exited before we unmounted */
    pid_t cmd;
    pid_t cmd_pgid; /* COMMAND's process group (its pid), kept after it is reaped */
    int cmd_status;
    int tty;            /* our controlling terminal when we were in its foreground, else -1 */
    int signals_seen;   /* SIGINT/SIGTERM/SIGHUP received while COMMAND ran */
    int mount_signal;   /* the termination signal that stopped the wait for the mount */
    GHashTable *before; /* --baseline: ck_hazard_key of each hazard DIR had before COMMAND */
    char *warning;      /* said on stderr before COMMAND and again in the report */
} Run;

static void run_clear(Run *r)
{
    g_free(r->dir);
    g_free(r->policy);
    g_free(r->identity);
    g_free(r->job);
    g_free(r->report);
    g_free(r->tag_env);
    g_free(r->ckptfs);
    g_strfreev(r->opts);
    g_free(r->bin);
    g_free(r->backing);
    g_free(r->base);
    g_free(r->mnt);
    g_free(r->log);
    g_free(r->daemon_log);
    if (r->before)
        g_hash_table_unref(r->before);
    g_free(r->warning);
}

static int run_error(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static int run_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return ckptctl_fail("run", "%s", msg);
}

static bool is_exec(const char *p)
{
    return p && g_file_test(p, G_FILE_TEST_IS_REGULAR) && access(p, X_OK) == 0;
}

/* --ckptfs, else where mountrun_find_ckptfs looks. */
static char *find_ckptfs(const char *opt)
{
    if (opt)
        return is_exec(opt) ? g_strdup(opt) : NULL;
    return mountrun_find_ckptfs();
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) != 0 && errno != ENOENT)
        fprintf(stderr, "ckptctl run: cannot remove %s: %s\n", path, g_strerror(errno));
    return 0;
}

/* rm -rf that stays on one file system and follows no symlink. */
static void remove_tree(const char *path)
{
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* A run killed together with its daemon and the auto_unmount helper (CTest's
 * timeout SIGKILLs the whole process tree) leaves a dead mount at its private
 * mountpoint.  A dead mount fails statfs as only a dead one does (mountrun_state):
 * detach those under root and remove what their run left in its directory. */
static void clear_dead_runs(const char *root)
{
    /* libmount reads /proc/self/mountinfo and unescapes its paths (a TMPDIR
     * with a space is "\040" there) */
    struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
    if (!tb)
        return;
    g_autofree char *prefix = g_build_filename(root, "ckptctl-run-", NULL);
    g_autoptr(GPtrArray) dead = g_ptr_array_new_with_free_func(g_free);
    struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
    struct libmnt_fs *fs;
    while (it && mnt_table_next_fs(tb, it, &fs) == 0) {
        const char *target = mnt_fs_get_target(fs);
        /* exactly <root>/ckptctl-run-XXXXXX/mnt, as make_base names it */
        if (!target || g_strcmp0(mnt_fs_get_fstype(fs), "fuse.ckptfs") != 0 ||
            !g_str_has_prefix(target, prefix))
            continue;
        const char *rest = target + strlen(prefix);
        if (strlen(rest) != 10 || strcmp(rest + 6, "/mnt") != 0 || memchr(rest, '/', 6))
            continue;
        g_ptr_array_add(dead, g_strdup(target));
    }
    mnt_free_iter(it);
    mnt_unref_table(tb);
    for (guint i = 0; i < dead->len; i++) {
        const char *mnt = dead->pdata[i];
        /* statfs always reaches the daemon: a stat may be answered from the
         * kernel's attribute cache of a mount whose daemon is dead */
        if (mountrun_state(mnt) != MOUNTRUN_DEAD)
            continue;
        if (!mountrun_fusermount(mnt, true, NULL))
            continue;
        fprintf(stderr, "ckptctl run: cleared %s, the dead mount of a killed run\n", mnt);
        g_autofree char *base = g_path_get_dirname(mnt);
        g_autofree char *log = g_build_filename(base, "collisions.jsonl", NULL);
        g_autofree char *dlog = g_build_filename(base, "ckptfs.log", NULL);
        g_autofree char *note = g_build_filename(base, "tmpdir", NULL);
        g_autofree char *tmpdir = NULL;
        g_autofree char *tmp_prefix = g_build_filename(root, "ckptctl-run-dir-", NULL);
        if (g_file_get_contents(note, &tmpdir, NULL, NULL) &&
            g_str_has_prefix(tmpdir, tmp_prefix) && !strchr(tmpdir + strlen(tmp_prefix), '/'))
            remove_tree(tmpdir);
        unlink(note);
        unlink(log);
        unlink(dlog);
        g_rmdir(mnt);
        g_rmdir(base);
    }
}

/* A private directory for the mountpoint and the logs, never inside the
 * backing directory (the daemon refuses a collision_log there, and a mount
 * inside its own backing tree would recurse). */
static int make_base(Run *r)
{
    const char *roots[] = {g_get_tmp_dir(), "/tmp", "/var/tmp", "/dev/shm"};
    for (gsize i = 0; i < G_N_ELEMENTS(roots); i++) {
        g_autofree char *root = realpath(roots[i], NULL);
        if (!root || ck_path_is_under(root, r->backing))
            continue;
        clear_dead_runs(root);
        g_autofree char *tmpl = g_build_filename(root, "ckptctl-run-XXXXXX", NULL);
        if (!mkdtemp(tmpl))
            continue;
        r->base = g_steal_pointer(&tmpl);
        r->mnt = g_build_filename(r->base, "mnt", NULL);
        r->log = g_build_filename(r->base, "collisions.jsonl", NULL);
        r->daemon_log = g_build_filename(r->base, "ckptfs.log", NULL);
        if (g_mkdir(r->mnt, 0755) != 0)
            return run_error("%s: %s", r->mnt, g_strerror(errno));
        /* for clear_dead_runs, should this run be killed outright */
        if (r->made_backing && !r->keep) {
            g_autofree char *note = g_build_filename(r->base, "tmpdir", NULL);
            g_file_set_contents(note, r->backing, -1, NULL);
        }
        return 0;
    }
    return run_error("no temporary directory outside %s for the mountpoint (set TMPDIR)",
                     r->backing);
}

static int prepare_backing(Run *r)
{
    if (r->dir) {
        struct stat st;
        if (stat(r->dir, &st) != 0)
            return run_error("--dir %s: %s", r->dir, g_strerror(errno));
        if (!S_ISDIR(st.st_mode))
            return run_error("--dir %s: not a directory", r->dir);
        r->backing = realpath(r->dir, NULL);
        if (!r->backing)
            return run_error("--dir %s: %s", r->dir, g_strerror(errno));
        return 0;
    }
    g_autoptr(GError) err = NULL;
    char *tmp = g_dir_make_tmp("ckptctl-run-dir-XXXXXX", &err);
    if (!tmp)
        return run_error("temporary directory: %s", err->message);
    r->backing = realpath(tmp, NULL);
    g_free(tmp);
    if (!r->backing)
        return run_error("temporary directory: %s", g_strerror(errno));
    r->made_backing = true;
    return 0;
}

/* A mount at r->mnt, live or dead (a dead daemon's mount is still a mount). */
static bool is_mounted(const Run *r)
{
    return mountrun_state(r->mnt) != MOUNTRUN_NONE;
}

/* Milliseconds since start (monotonic): loops wait against a deadline, since
 * a wait_signal returns early for every SIGCHLD (fusermount3 runs too). */
static gint64 since_ms(gint64 start_us)
{
    return (g_get_monotonic_time() - start_us) / 1000;
}

/* Waits up to ms for one of r->sigs; returns the signal or 0 on timeout. */
static int wait_signal(Run *r, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    int sig = sigtimedwait(&r->sigs, NULL, &ts);
    return sig > 0 ? sig : 0;
}

/* Reaps whichever of our two children ended; never waits for others. */
static void reap(Run *r)
{
    int st;
    if (r->cmd > 0 && waitpid(r->cmd, &st, WNOHANG) == r->cmd) {
        r->cmd_status = st;
        r->cmd = 0;
    }
    if (r->daemon > 0 && waitpid(r->daemon, &st, WNOHANG) == r->daemon) {
        r->daemon_status = st;
        r->daemon = 0;
    }
}

/* In a child: the state a freshly exec'ed program expects.  take_tty: the
 * child's group becomes the terminal's foreground before it can read it
 * (SIGTTOU is still blocked here), as a shell does for its jobs. */
static void child_common(Run *r, bool take_tty)
{
    setpgid(0, 0);
    if (take_tty && r->tty >= 0)
        tcsetpgrp(r->tty, getpid());
    /* ckptctl run killed outright (SIGKILL, OOM): take the child along */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    signal(SIGTTOU, SIG_DFL);
    signal(SIGPIPE, SIG_DFL); /* ignored by us only (an ignored signal survives exec) */
    sigprocmask(SIG_SETMASK, &r->old_mask, NULL);
}

static int start_daemon(Run *r)
{
    g_autoptr(GString) o = g_string_new(NULL);
    g_string_append_printf(o, "policy=%s,collision_log=%s", r->policy, r->log);
    if (r->identity)
        g_string_append_printf(o, ",identity=%s", r->identity);
    if (r->job)
        g_string_append_printf(o, ",job=%s", r->job);
    g_string_append_printf(o, ",tag_env=%s", r->tag_env);
    /* the kernel connection's end unmounts even when the daemon is SIGKILLed */
    g_string_append(o, ",auto_unmount");
    /* its log is ckptfs.log (printed when the run fails), not the journal */
    g_string_append(o, ",log=stderr");
    for (char **p = r->opts; p && *p; p++)
        g_string_append_printf(o, ",%s", *p);
    const char *argv[] = {r->bin, "-f", "-o", o->str, r->backing, r->mnt, NULL};

    int logfd = open(r->daemon_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (logfd < 0)
        return run_error("%s: %s", r->daemon_log, g_strerror(errno));
    pid_t ppid = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(logfd);
        return run_error("fork: %s", g_strerror(errno));
    }
    if (pid == 0) {
        child_common(r, false);
        if (getppid() != ppid)
            _exit(127);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        execv(argv[0], (char **)argv);
        dprintf(2, "ckptctl run: %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(logfd);
    setpgid(pid, pid);
    r->daemon = pid;
    return 0;
}

static void print_daemon_log(const Run *r)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(r->daemon_log, &text, NULL, NULL) || !*text)
        return;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++)
        if (**l)
            fprintf(stderr, "ckptctl run: ckptfs: %s\n", *l);
}

/* mountrun's hooks: waits that end early for a signal, and reaps that see
 * both children. */
static bool mount_pause(void *data, int ms)
{
    Run *r = data;
    int sig = wait_signal(r, ms);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
        r->signals_seen++;
        r->mount_signal = sig;
        return false;
    }
    return true;
}

static bool unmount_pause(void *data, int ms)
{
    wait_signal(data, ms);
    return true;
}

static bool reap_daemon(void *data, int *status)
{
    Run *r = data;
    reap(r);
    if (r->daemon)
        return false;
    *status = r->daemon_status;
    return true;
}

/* Returns 0 once mounted; an exit code otherwise (the daemon is then gone). */
static int wait_mounted(Run *r)
{
    MountRun run = {r->daemon, r->mnt, mount_pause, reap_daemon, r};
    int status;
    switch (mountrun_wait_up(&run, MOUNT_TIMEOUT_MS, 50000, &status)) {
    case MOUNTRUN_UP:
        return 0;
    case MOUNTRUN_EXITED:
        print_daemon_log(r);
        return run_error("ckptfs %s %s: the mount could not be set up (ckptfs exited, status %d)",
                         r->backing, r->mnt,
                         WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    case MOUNTRUN_GAVE_UP:
        return run_error("interrupted by signal %d while mounting", r->mount_signal);
    case MOUNTRUN_TIMEOUT:
        break;
    }
    print_daemon_log(r);
    return run_error("ckptfs %s %s: not mounted after %d s", r->backing, r->mnt,
                     MOUNT_TIMEOUT_MS / 1000);
}

static int start_command(Run *r)
{
    pid_t ppid = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return run_error("fork: %s", g_strerror(errno));
    if (pid == 0) {
        child_common(r, true);
        if (getppid() != ppid)
            _exit(127);
        setenv("CKPTFS_MOUNT", r->mnt, 1);
        setenv("CKPTFS_BACKING", r->backing, 1);
        /* --json: stdout holds the report alone, so `ckptctl run --json | jq`
         * works; COMMAND's own output goes to stderr */
        if (r->json && dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
            _exit(127);
        /* COMMAND keeps the caller's working directory (pytest finds its
         * files, its cache is not written into the mount): the mount is in
         * CKPTFS_MOUNT */
        execvp(r->command[0], r->command);
        int e = errno;
        dprintf(2, "ckptctl run: %s: %s\n", r->command[0], strerror(e));
        _exit(e == ENOENT ? 127 : 126);
    }
    setpgid(pid, pid);
    r->cmd = pid;
    r->cmd_pgid = pid;
    /* Ctrl-C at a terminal goes to COMMAND, as if run by the shell; we
     * unmount once it is done.  SIGTTOU is blocked, so this works from the
     * background process group too. */
    if (r->tty >= 0)
        tcsetpgrp(r->tty, pid);
    return 0;
}

/* Waits for COMMAND, forwarding termination signals to its group. */
static void wait_command(Run *r)
{
    while (r->cmd) {
        int sig = wait_signal(r, 1000);
        if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
            r->signals_seen++;
            kill(-r->cmd, r->signals_seen > 1 ? SIGKILL : sig);
        }
        pid_t was_daemon = r->daemon;
        reap(r);
        if (was_daemon && !r->daemon) {
            r->daemon_died = true;
            fprintf(stderr, "ckptctl run: ckptfs exited while COMMAND ran\n");
        }
    }
    if (r->tty >= 0)
        tcsetpgrp(r->tty, getpgrp());
    /* What COMMAND left running in its group would keep the mount busy and
     * write unreported: the mount is going away, so it goes too. */
    if (r->cmd_pgid > 0 && kill(-r->cmd_pgid, 0) == 0) {
        kill(-r->cmd_pgid, SIGTERM);
        for (gint64 t0 = g_get_monotonic_time(); since_ms(t0) < 1000 && kill(-r->cmd_pgid, 0) == 0;)
            wait_signal(r, 50);
    }
}

static void busy_message(void *data, const char *err)
{
    (void)err;
    Run *r = data;
    fprintf(stderr, "ckptctl run: %s still busy after %d s: lazy unmount\n", r->mnt,
            UNMOUNT_GRACE_MS / 1000);
}

/* Unmounts (waiting out a busy mount for a grace period, then lazily) and
 * reaps the daemon, killing it when it does not exit.  Returns false when
 * a mount is still there. */
static bool unmount(Run *r)
{
    MountRun run = {r->daemon, r->mnt, unmount_pause, reap_daemon, r};
    MountStop how = {.busy_ms = UNMOUNT_GRACE_MS,
                     .exit_ms = DAEMON_EXIT_MS,
                     .term_ms = 2000,
                     .term_unmounted = true, /* never mounted (a timeout) */
                     .on_busy = busy_message};
    int status;
    mountrun_stop(&run, &how, &status);
    if (r->daemon) { /* killed and reaped */
        r->daemon_status = status;
        r->daemon = 0;
    }
    return !is_mounted(r);
}

/* ---- the report ---- */

typedef struct {
    const char *kind; /* the three are owned by the records */
    const char *caller;
    const char *owner;
    guint count;
    GPtrArray *paths; /* distinct examples, at most MAX_EXAMPLES, borrowed */
    bool more;        /* more distinct paths than the examples */
    GPtrArray *recs;  /* JsonObject*, borrowed: the group's records, oldest first */
} Group;

#define MAX_EXAMPLES 5
#define MAX_LISTED   20 /* records printed per group; --report has them all */

static void group_free(Group *g)
{
    g_ptr_array_unref(g->paths);
    g_ptr_array_unref(g->recs);
    g_free(g);
}

static void group_add_path(Group *g, const char *path)
{
    if (!path)
        return;
    for (guint k = 0; k < g->paths->len; k++)
        if (strcmp(g->paths->pdata[k], path) == 0)
            return;
    if (g->paths->len < MAX_EXAMPLES)
        g_ptr_array_add(g->paths, (gpointer)path);
    else
        g->more = true;
}

static int group_cmp(gconstpointer a, gconstpointer b)
{
    const Group *x = *(Group *const *)a, *y = *(Group *const *)b;
    int c = g_strcmp0(x->kind, y->kind);
    if (!c)
        c = g_strcmp0(x->caller, y->caller);
    if (!c)
        c = g_strcmp0(x->owner, y->owner);
    return c;
}

/* Records grouped by (kind, caller_job, owner_job), sorted. */
static GPtrArray *group_records(GPtrArray *recs)
{
    GPtrArray *groups = g_ptr_array_new_with_free_func((GDestroyNotify)group_free);
    g_autoptr(GHashTable) by_key = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < recs->len; i++) {
        JsonObject *o = recs->pdata[i];
        const char *kind = ckptctl_member_str(o, "kind"),
                   *caller = ckptctl_member_str(o, "caller_job"),
                   *owner = ckptctl_member_str(o, "owner_job"), *op = ckptctl_member_str(o, "op");
        char *key = g_strdup_printf("%s\x1f%s\x1f%s", kind ? kind : "", caller ? caller : "\x1e",
                                    owner ? owner : "\x1e");
        Group *g = g_hash_table_lookup(by_key, key);
        if (!g) {
            g = g_new0(Group, 1);
            *g = (Group){kind ? kind : "?", caller, owner, 0, g_ptr_array_new(), false,
                         g_ptr_array_new()};
            g_ptr_array_add(groups, g);
            g_hash_table_insert(by_key, key, g);
        } else {
            g_free(key);
        }
        g->count++;
        g_ptr_array_add(g->recs, o);
        /* a rename's or link's destination is written too (record 013's
         * checkpoint-1.snap is one); a symlink's path2 is only its target */
        bool two = op && (strcmp(op, "rename") == 0 || strcmp(op, "link") == 0);
        group_add_path(g, ckptctl_member_str(o, "path"));
        if (two)
            group_add_path(g, ckptctl_member_str(o, "path2"));
    }
    g_ptr_array_sort(groups, group_cmp);
    return groups;
}

static const char *caller_label(const Group *g)
{
    if (g->caller)
        return g->caller;
    return strcmp(g->kind, "invalid-identity") == 0 ? "(invalid identity)" : "(anonymous)";
}

static const char *owner_label(const Group *g)
{
    if (g->owner)
        return g->owner;
    if (strcmp(g->kind, "legacy-write") == 0)
        return "(legacy area)";
    if (strcmp(g->kind, "outside-namespace") == 0)
        return "(structure)";
    return "(no job)";
}

static void add_int_or_null(JsonBuilder *b, const char *name, bool has, gint64 v)
{
    json_builder_set_member_name(b, name);
    if (has)
        json_builder_add_int_value(b, v);
    else
        json_builder_add_null_value(b);
}

typedef struct {
    GPtrArray *recs;    /* JsonObject* */
    GPtrArray *groups;  /* Group* */
    GPtrArray *hazards; /* CkHazard* */
    guint collision_hazards;
    guint baseline_hazards; /* --baseline: hazards DIR had before COMMAND (not counted) */
    bool crossed;           /* records or collision hazards: exit --collision-exit */
    int exit_code;
    const char *log_error; /* the collision log could not be read */
} Outcome;

/* --baseline: whether DIR had h before COMMAND ran. */
static bool in_baseline(const Run *r, const CkHazard *h)
{
    if (!r->before)
        return false;
    g_autofree char *key = ck_hazard_key(h);
    return g_hash_table_contains(r->before, key);
}

/* One record as a row of the records table: what, where, who, which test. */
static void record_row(CkptctlTable *t, const Group *g, JsonObject *o)
{
    const char *path2 = ckptctl_member_str(o, "path2"), *path = ckptctl_member_str(o, "path");
    JsonNode *pid = json_object_get_member(o, "pid");
    g_autofree char *pids = pid && JSON_NODE_HOLDS_VALUE(pid)
                                ? g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(pid))
                                : NULL;
    g_autofree char *where =
        g_strdup_printf("%s%s%s", path ? path : "?", path2 ? " -> " : "", path2 ? path2 : "");
    g_autofree char *caller = ck_collision_caller_text(o);
    ckptctl_table_row(t, g->kind, caller, ckptctl_member_str(o, "verdict"),
                      ckptctl_member_str(o, "op"), where, ckptctl_member_str(o, "comm"), pids,
                      ckptctl_member_str(o, "tag"));
}

static void print_report(const Run *r, const Outcome *out)
{
    fflush(stdout);
    const char *P = "ckptctl run:";
    g_autofree char *cmdline = g_strjoinv(" ", r->command);
    if (strlen(cmdline) > 100) /* the whole of it is in --report */
        strcpy(cmdline + 96, " ...");
    printf("%s ---- collision report ----\n", P);
    if (WIFSIGNALED(r->cmd_status))
        printf("%s COMMAND %s: killed by signal %d (%s)\n", P, cmdline, WTERMSIG(r->cmd_status),
               g_strsignal(WTERMSIG(r->cmd_status)));
    else
        printf("%s COMMAND %s: exit status %d\n", P, cmdline, WEXITSTATUS(r->cmd_status));
    g_autofree char *who = r->identity ? g_strdup_printf("identity %s", r->identity)
                           : r->job    ? g_strdup_printf("job %s", r->job)
                                       : g_strdup("no identity (every caller anonymous)");
    printf("%s dir %s (%s), policy %s, %s\n", P, r->backing,
           r->made_backing ? (r->keep ? "temporary, kept" : "temporary, removed") : "given",
           r->policy, who);
    if (r->warning)
        printf("%s warning: %s\n", P, r->warning);
    if (out->log_error)
        printf("%s collision log unreadable: %s\n", P, out->log_error);
    g_autofree char *indent = g_strconcat(P, "   ", NULL);
    printf("%s %u collision record(s)%s\n", P, out->recs->len, out->recs->len ? ":" : "");
    /* the groups (kind, caller -> owner), then their records; tables
     * (libsmartcols) so 32-character job ids and long paths stay aligned */
    static const char *const gcols[] = {"KIND", "CALLER", "OWNER", ">RECORDS", "PATHS", NULL};
    static const char *const rcols[] = {"KIND", "CALLER", "VERDICT", "OP", "PATH",
                                        "COMM", ">PID",   "TAG",     NULL};
    g_autoptr(CkptctlTable) gt = ckptctl_table_new(gcols);
    g_autoptr(CkptctlTable) rt = ckptctl_table_new(rcols);
    guint unlisted = 0;
    for (guint i = 0; i < out->groups->len; i++) {
        const Group *g = out->groups->pdata[i];
        g_autoptr(GString) ex = g_string_new(NULL);
        for (guint k = 0; k < g->paths->len; k++)
            g_string_append_printf(ex, "%s%s", k ? ", " : "", (char *)g->paths->pdata[k]);
        if (g->more)
            g_string_append(ex, ", ...");
        g_autofree char *count = g_strdup_printf("%u", g->count);
        ckptctl_table_row(gt, g->kind, caller_label(g), owner_label(g), count, ex->str);
        for (guint k = 0; k < g->recs->len && k < MAX_LISTED; k++)
            record_row(rt, g, g->recs->pdata[k]);
        if (g->recs->len > MAX_LISTED)
            unlisted += g->recs->len - MAX_LISTED;
    }
    if (out->groups->len) {
        ckptctl_table_print(gt, indent);
        printf("%s\n", P);
        ckptctl_table_print(rt, indent);
    }
    if (unlisted)
        printf("%s ... %u more record(s), %u of each group listed (all of them in --report)\n", P,
               unlisted, MAX_LISTED);
    g_autofree char *before =
        r->before ? g_strdup_printf(", %u there before COMMAND (--baseline: not counted)",
                                    out->baseline_hazards)
                  : g_strdup("");
    printf("%s %u hazard(s) in dir (ckptctl check), %u collision(s)%s%s\n", P, out->hazards->len,
           out->collision_hazards, before, out->hazards->len ? ":" : "");
    static const char *const hcols[] = {"KIND", "JOBS", "PATH", "DETAIL", NULL};
    static const char *const bcols[] = {"KIND", "JOBS", "PATH", "BASELINE", "DETAIL", NULL};
    g_autoptr(CkptctlTable) ht = ckptctl_table_new(r->before ? bcols : hcols);
    for (guint i = 0; i < out->hazards->len; i++) {
        const CkHazard *h = out->hazards->pdata[i];
        g_autofree char *js = ckptctl_hazard_jobs(h);
        if (r->before)
            ckptctl_table_row(ht, h->kind, js, h->path, in_baseline(r, h) ? "yes" : "no",
                              h->detail);
        else
            ckptctl_table_row(ht, h->kind, js, h->path, h->detail);
    }
    if (out->hazards->len)
        ckptctl_table_print(ht, indent);
    if (out->crossed)
        printf("%s FAILED: jobs crossed (%u record(s), %u collision hazard(s)): exit %d\n", P,
               out->recs->len, out->collision_hazards, out->exit_code);
    else if (out->exit_code == CKPTCTL_ERROR && r->daemon_died)
        printf("%s FAILED: ckptfs exited while COMMAND ran: exit 2\n", P);
    else
        printf("%s no collisions: exit %d (COMMAND's status)\n", P, out->exit_code);
    fflush(stdout);
}

/* The report as one JSON document (--json, --report FILE). */
static char *report_json(const Run *r, const Outcome *out)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "command");
    json_builder_begin_array(b);
    for (char **p = r->command; *p; p++)
        ck_json_add_string(b, *p);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "exit_status");
    json_builder_add_int_value(b, out->exit_code);
    add_int_or_null(b, "command_exit", WIFEXITED(r->cmd_status), WEXITSTATUS(r->cmd_status));
    add_int_or_null(b, "command_signal", WIFSIGNALED(r->cmd_status), WTERMSIG(r->cmd_status));
    ckptctl_add_str_or_null(b, "dir", r->backing);
    json_builder_set_member_name(b, "dir_kept");
    json_builder_add_boolean_value(b, !r->made_backing || r->keep);
    ckptctl_add_str_or_null(b, "mount", r->mnt);
    ckptctl_add_str_or_null(b, "policy", r->policy);
    ckptctl_add_str_or_null(b, "identity", r->identity);
    ckptctl_add_str_or_null(b, "job", r->job);
    json_builder_set_member_name(b, "ckptfs_died");
    json_builder_add_boolean_value(b, r->daemon_died);
    ckptctl_add_records(b, out->recs);
    json_builder_set_member_name(b, "groups");
    json_builder_begin_array(b);
    for (guint i = 0; i < out->groups->len; i++) {
        const Group *g = out->groups->pdata[i];
        json_builder_begin_object(b);
        ckptctl_add_str_or_null(b, "kind", g->kind);
        ckptctl_add_str_or_null(b, "caller_job", g->caller);
        ckptctl_add_str_or_null(b, "owner_job", g->owner);
        json_builder_set_member_name(b, "count");
        json_builder_add_int_value(b, g->count);
        json_builder_set_member_name(b, "paths");
        json_builder_begin_array(b);
        for (guint k = 0; k < g->paths->len; k++)
            ck_json_add_string(b, g->paths->pdata[k]);
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
    ckptctl_add_hazards(b, out->hazards, true, r->before);
    json_builder_set_member_name(b, "warnings");
    json_builder_begin_array(b);
    if (r->warning)
        ck_json_add_string(b, r->warning);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "collisions");
    json_builder_add_int_value(b, out->recs->len + out->collision_hazards);
    json_builder_end_object(b);

    return ckptctl_json_text(b);
}

static int write_report(const Run *r, const Outcome *out)
{
    g_autofree char *text = report_json(r, out);
    if (r->json && (fputs(text, stdout) < 0 || fflush(stdout) != 0))
        /* a reader that went away (SIGPIPE is ignored, so the clean-up runs) */
        fprintf(stderr, "ckptctl run: stdout: %s (report not printed)\n", g_strerror(errno));
    if (!r->report)
        return 0;
    g_autoptr(GError) err = NULL;
    if (!g_file_set_contents(r->report, text, -1, &err))
        return run_error("--report %s: %s", r->report, err->message);
    return 0;
}

/* The -o settings that change what ckptctl check sees (views=,
 * legacy_backend=, external_root=); config=FILE's per-job settings are not
 * read here. */
static void mount_settings(const Run *r, char **views, char **legacy_backend, GPtrArray *external)
{
    for (char **p = r->opts; p && *p; p++) {
        g_auto(GStrv) kv = g_strsplit(*p, ",", -1);
        for (char **o = kv; *o; o++) {
            if (g_str_has_prefix(*o, "views=")) {
                g_free(*views);
                *views = g_strdup(*o + 6);
            } else if (g_str_has_prefix(*o, "legacy_backend=")) {
                g_free(*legacy_backend);
                *legacy_backend = g_strdup(*o + 15);
            } else if (g_str_has_prefix(*o, "external_root=")) {
                g_ptr_array_add(external, g_strdup(*o + 14));
            }
        }
    }
}

/* The ckptctl check hazards of DIR with the mount's settings, NULL with
 * *err when DIR cannot be read. */
static GPtrArray *dir_hazards(const Run *r, GError **err)
{
    g_autofree char *views = NULL, *legacy_backend = NULL;
    g_autoptr(GPtrArray) external = g_ptr_array_new_with_free_func(g_free);
    mount_settings(r, &views, &legacy_backend, external);
    CkCatalogOptions co = {
        .resolve = {.legacy_backend = legacy_backend, .external_roots = external},
        .views_name = views ? views : "_views",
    };
    g_autoptr(CkCatalog) cat = ck_catalog_open(r->backing, &co, err);
    return cat ? ck_catalog_hazards(cat) : NULL;
}

/* --baseline: the hazards DIR holds before COMMAND, which the report shows
 * but does not count.  0, or the exit code (DIR cannot be read). */
static int take_baseline(Run *r)
{
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) hz = dir_hazards(r, &err);
    if (!hz)
        return run_error("--baseline: check %s: %s", r->backing, err->message);
    r->before = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    for (guint i = 0; i < hz->len; i++)
        g_hash_table_add(r->before, ck_hazard_key(hz->pdata[i]));
    return 0;
}

/* With neither an identity nor a job, every caller is anonymous: a job
 * writing another job's state is an anonymous write like any other, and
 * only writes outside every job's namespace are recorded. */
static char *identity_warning(const Run *r)
{
    if (r->identity || r->job)
        return NULL;
    for (char **p = r->opts; p && *p; p++) {
        g_auto(GStrv) kv = g_strsplit(*p, ",", -1);
        for (char **o = kv; *o; o++)
            if (g_str_has_prefix(*o, "identity=") || g_str_has_prefix(*o, "job="))
                return NULL;
    }
    return g_strdup("no --identity or --job: every caller is anonymous, so a job writing "
                    "another job's state (foreign-write) cannot be seen; only writes outside "
                    "every job's namespace are recorded (give --identity env:VAR, e.g. "
                    "env:CLINK_JOB_ID)");
}

/* After the unmount: reads the log and the hazards, prints and writes the
 * report, returns the exit code. */
static int report(Run *r)
{
    Outcome out = {0};
    g_autofree char *buf = NULL;
    gsize len = 0;
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) recs = NULL;
    if (g_file_get_contents(r->log, &buf, &len, &err))
        recs = ck_collision_parse_lines(buf, len, &err);
    g_autofree char *log_error = NULL;
    if (!recs) {
        log_error = g_strdup(err->message);
        recs = g_ptr_array_new();
    }
    out.recs = recs;
    out.log_error = log_error;
    g_autoptr(GPtrArray) groups = group_records(recs);
    out.groups = groups;

    /* the same code path as ckptctl check DIR, with the mount's settings */
    g_autoptr(GError) cerr = NULL;
    g_autoptr(GPtrArray) checked = dir_hazards(r, &cerr);
    bool cat = checked != NULL;
    g_autoptr(GPtrArray) hazards = checked ? g_steal_pointer(&checked) : g_ptr_array_new();
    out.hazards = hazards;
    for (guint i = 0; i < hazards->len; i++) {
        const CkHazard *h = hazards->pdata[i];
        if (in_baseline(r, h))
            out.baseline_hazards++;
        else
            out.collision_hazards += h->collision;
    }

    out.crossed = out.recs->len || out.collision_hazards;
    if (out.crossed)
        out.exit_code = r->collision_exit;
    else if (!cat || log_error || r->daemon_died)
        out.exit_code = CKPTCTL_ERROR;
    else if (WIFSIGNALED(r->cmd_status))
        out.exit_code = 128 + WTERMSIG(r->cmd_status);
    else
        out.exit_code = WEXITSTATUS(r->cmd_status);

    if (!cat)
        fprintf(stderr, "ckptctl run: check %s: %s\n", r->backing, cerr->message);
    if (!r->json)
        print_report(r, &out);
    if ((r->report || r->json) && write_report(r, &out) != 0 && out.exit_code == 0)
        out.exit_code = CKPTCTL_ERROR;
    return out.exit_code;
}

/* ---- the command ---- */

static int parse_args(Run *r, int *argc, char ***argv)
{
    GOptionEntry entries[] = {
        {"dir", 0, 0, G_OPTION_ARG_FILENAME, &r->dir,
         "Mount over DIR (default: a new temporary directory, removed afterwards)", "DIR"},
        {"policy", 0, 0, G_OPTION_ARG_STRING, &r->policy,
         "audit (default: writes behave as on a plain directory, every crossing is recorded) "
         "or enforce (crossings fail with EACCES)",
         "enforce|audit"},
        {"identity", 0, 0, G_OPTION_ARG_STRING, &r->identity,
         "How a process's job is known, as ckptfs's identity=: env:VAR (VAR in its "
         "environment), cgroup:PATTERN (its cgroup v2 path), cgroup or uid (with -o "
         "identity_map=FILE)",
         "MODE"},
        {"job", 0, 0, G_OPTION_ARG_STRING, &r->job, "Every process acts as job ID", "ID"},
        {"collision-exit", 0, 0, G_OPTION_ARG_INT, &r->collision_exit,
         "Exit status when jobs crossed (default 3; 1 to 255, e.g. to keep clear of a test "
         "runner's own codes)",
         "N"},
        {"tag-env", 0, 0, G_OPTION_ARG_STRING, &r->tag_env,
         "Record the writing process's VAR with each collision as \"tag\" (default "
         "PYTEST_CURRENT_TEST: the test that crossed)",
         "VAR"},
        {"report", 0, 0, G_OPTION_ARG_FILENAME, &r->report,
         "Also write the report as one JSON document to FILE", "FILE"},
        {"json", 0, 0, G_OPTION_ARG_NONE, &r->json,
         "Print the report as one JSON document on stdout instead of the table; COMMAND's "
         "stdout goes to stderr",
         NULL},
        {"keep", 0, 0, G_OPTION_ARG_NONE, &r->keep,
         "Keep the temporary directory (without --dir) for inspection", NULL},
        {"baseline", 0, 0, G_OPTION_ARG_NONE, &r->baseline,
         "Hazards DIR already has before COMMAND are reported but do not fail the run; only "
         "new ones do",
         NULL},
        {"ckptfs", 0, 0, G_OPTION_ARG_FILENAME, &r->ckptfs,
         "The ckptfs daemon (default: the build tree's, else PATH, else sbin)", "PATH"},
        {"option", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &r->opts,
         "Pass a mount option to ckptfs (repeatable), e.g. -o legacy=rw", "OPT"},
        {NULL, 0, 0, 0, NULL, NULL, NULL},
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("-- COMMAND [ARGS...]");
    g_option_context_set_summary(
        ctx, "Runs COMMAND over a fresh ckptfs mount of DIR, in the current working "
             "directory, with CKPTFS_MOUNT (the mount) and CKPTFS_BACKING (DIR) in its "
             "environment; unmounts, and reports every collision record, grouped by kind and "
             "pair of jobs, and the ckptctl check hazards of DIR as COMMAND left it.  Exit: "
             "COMMAND's status (128+N when killed by signal N) when there were no collisions, "
             "--collision-exit N (default 3) when there were (also in audit mode), 2 when the "
             "mount could not be set up.");
    g_option_context_add_main_entries(ctx, entries, NULL);
    /* options end at COMMAND: its own options are not ours */
    g_option_context_set_strict_posix(ctx, TRUE);
    g_autoptr(GError) err = NULL;
    if (!g_option_context_parse(ctx, argc, argv, &err))
        return run_error("%s (try ckptctl run --help)", err->message);
    int first = 1;
    if (first < *argc && strcmp((*argv)[first], "--") == 0)
        first++;
    if (first >= *argc)
        return run_error("no COMMAND (try ckptctl run --help)");
    r->command = *argv + first;
    if (!r->policy)
        r->policy = g_strdup("audit");
    if (r->collision_exit == -1)
        r->collision_exit = RUN_EXIT_COLLISIONS;
    if (r->collision_exit < 1 || r->collision_exit > 255)
        return run_error("--collision-exit %d: expected 1 to 255", r->collision_exit);
    if (!r->tag_env)
        r->tag_env = g_strdup("PYTEST_CURRENT_TEST");
    if (!*r->tag_env || strpbrk(r->tag_env, "=,"))
        return run_error("--tag-env %s: expected an environment variable name", r->tag_env);
    if (strcmp(r->policy, "audit") != 0 && strcmp(r->policy, "enforce") != 0)
        return run_error("--policy %s: expected enforce or audit", r->policy);
    if (r->identity) {
        CkIdentityMode mode;
        g_autofree char *why = NULL;
        if (!ck_identity_spec_check(r->identity, &mode, &why))
            return run_error("--identity %s: %s", r->identity, why);
        if (strchr(r->identity, ','))
            return run_error("--identity %s: a ',' would end the mount option", r->identity);
    }
    if (r->identity && r->job)
        return run_error("--identity and --job exclude each other");
    if (r->job && (!*r->job || strchr(r->job, ',')))
        return run_error("--job %s: not a job id", r->job);
    return 0;
}

int ckptctl_run(int argc, char **argv)
{
    Run r = {.tty = -1, .collision_exit = -1};
    /* a reader of stdout that goes away (`| head`) must not kill us before
     * the unmount and the clean-up; write errors are reported instead */
    signal(SIGPIPE, SIG_IGN);
    int rc = parse_args(&r, &argc, &argv);
    if (rc) {
        run_clear(&r);
        return rc;
    }
    r.bin = find_ckptfs(r.ckptfs);
    if (!r.bin) {
        rc = r.ckptfs ? run_error("--ckptfs %s: not an executable file", r.ckptfs)
                      : run_error("ckptfs not found (build tree, PATH, sbin); give --ckptfs PATH");
        run_clear(&r);
        return rc;
    }
    rc = prepare_backing(&r);
    if (!rc && r.baseline)
        rc = take_baseline(&r);
    if (!rc)
        rc = make_base(&r);
    r.warning = rc ? NULL : identity_warning(&r);
    if (r.warning)
        fprintf(stderr, "ckptctl run: warning: %s\n", r.warning);

    sigemptyset(&r.sigs);
    sigaddset(&r.sigs, SIGINT);
    sigaddset(&r.sigs, SIGTERM);
    sigaddset(&r.sigs, SIGHUP);
    sigaddset(&r.sigs, SIGCHLD);
    sigset_t block = r.sigs;
    sigaddset(&block, SIGTTOU);
    sigprocmask(SIG_BLOCK, &block, &r.old_mask);
    if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp())
        r.tty = STDIN_FILENO;

    bool mounted = false;
    if (!rc)
        rc = start_daemon(&r);
    if (!rc) {
        rc = wait_mounted(&r);
        mounted = rc == 0;
    }
    if (!rc)
        rc = start_command(&r);
    if (!rc)
        wait_command(&r);
    bool clean = r.base ? unmount(&r) : true;
    if (!clean)
        fprintf(stderr, "ckptctl run: %s is still mounted; fusermount3 -u -z it\n", r.mnt);
    if (mounted && r.daemon_status != 0 && !r.daemon_died) {
        fprintf(stderr, "ckptctl run: ckptfs exited with status %d\n",
                WIFEXITED(r.daemon_status) ? WEXITSTATUS(r.daemon_status)
                                           : 128 + WTERMSIG(r.daemon_status));
        print_daemon_log(&r);
    } else if (r.daemon_died) {
        print_daemon_log(&r);
    }
    if (!rc)
        rc = report(&r);
    if (r.base && clean) {
        g_autofree char *note = g_build_filename(r.base, "tmpdir", NULL);
        unlink(note);
        unlink(r.log);
        unlink(r.daemon_log);
        g_rmdir(r.mnt);
        if (g_rmdir(r.base) != 0)
            fprintf(stderr, "ckptctl run: cannot remove %s: %s\n", r.base, g_strerror(errno));
    }
    if (r.made_backing) {
        if (r.keep)
            fprintf(stderr, "ckptctl run: kept %s\n", r.backing);
        else if (clean)
            remove_tree(r.backing);
    }
    sigprocmask(SIG_SETMASK, &r.old_mask, NULL);
    run_clear(&r);
    return rc;
}
