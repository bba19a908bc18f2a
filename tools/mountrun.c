/* A FUSE mount served by a child process (mountrun.h). */
#include "mountrun.h"
#include "mount_gone.h"

#include <dirent.h>

#include <ctype.h>
#include <errno.h>
#include <glib.h>
#include <libmount.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FUSE_SUPER_MAGIC 0x65735546

/* Whether the mount table has a FUSE file system mounted at mnt. */
static bool fuse_mounted_at(const char *mnt)
{
    struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
    struct libmnt_fs *fs = tb ? mnt_table_find_target(tb, mnt, MNT_ITER_BACKWARD) : NULL;
    const char *type = fs ? mnt_fs_get_fstype(fs) : NULL;
    bool fuse = type && (strcmp(type, "fuse") == 0 || g_str_has_prefix(type, "fuse."));
    mnt_unref_table(tb);
    return fuse;
}

/* What a failed statfs or stat of mnt says: a dead daemon, or, for another
 * error (EIO, or EACCES from a mount without allow_other), a live one if a
 * FUSE file system is mounted there. */
static MountState failed_state(const char *mnt, int err)
{
    if (ck_mount_gone_errno(err))
        return MOUNTRUN_DEAD;
    return fuse_mounted_at(mnt) ? MOUNTRUN_LIVE : MOUNTRUN_NONE;
}

MountState mountrun_state(const char *mnt)
{
    struct statfs sf, psf;
    if (statfs(mnt, &sf) != 0)
        return failed_state(mnt, errno);
    if ((unsigned long)sf.f_type != FUSE_SUPER_MAGIC)
        return MOUNTRUN_NONE;
    g_autofree char *parent = g_path_get_dirname(mnt);
    if (statfs(parent, &psf) == 0 && (unsigned long)psf.f_type != FUSE_SUPER_MAGIC)
        return MOUNTRUN_LIVE;
    /* inside a FUSE file system: a mount point has another st_dev than its
     * parent (only here: a stat of the mount root fills the kernel's
     * attribute cache, which would answer a later stat of a dead mount) */
    struct stat a, b;
    if (stat(mnt, &b) != 0)
        return failed_state(mnt, errno);
    if (stat(parent, &a) == 0 && a.st_dev == b.st_dev)
        return MOUNTRUN_NONE;
    return MOUNTRUN_LIVE;
}

static void child_setup(gpointer data)
{
    (void)data;
    /* callers block termination signals for their own handling: a child
     * must not inherit that */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

bool mountrun_fusermount(const char *mnt, bool lazy, char **err_out)
{
    const char *argv[] = {"fusermount3", lazy ? "-uz" : "-u", mnt, NULL};
    g_autofree char *err = NULL;
    int status = -1;
    g_autoptr(GError) error = NULL;
    GSpawnFlags fl = G_SPAWN_SEARCH_PATH | G_SPAWN_STDOUT_TO_DEV_NULL |
                     (err_out ? 0 : G_SPAWN_STDERR_TO_DEV_NULL);
    if (!g_spawn_sync(NULL, (char **)argv, NULL, fl, child_setup, NULL, NULL, err_out ? &err : NULL,
                      &status, &error)) {
        if (err_out)
            *err_out = g_strdup(error->message);
        return false;
    }
    if (err_out)
        *err_out = g_strdup(g_strstrip(err));
    return g_spawn_check_wait_status(status, NULL);
}

char mountrun_proc_state(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/stat", (int)pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    const char *paren = strrchr(text, ')'); /* comm may hold spaces and parens */
    if (!paren || !paren[1] || !paren[2])
        return 0;
    return paren[2];
}

int mountrun_children(pid_t pid, pid_t *out, int max)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/task/%d/children", (int)pid, (int)pid);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return 0;
    int n = 0;
    for (char *p = text; *p && n < max;) {
        while (*p && !isdigit((unsigned char)*p))
            p++;
        if (!*p)
            break;
        pid_t c = (pid_t)strtol(p, &p, 10);
        char st = mountrun_proc_state(c);
        if (st && st != 'Z' && st != 'X')
            out[n++] = c;
    }
    return n;
}

static bool pause_ms(const MountRun *m, int ms)
{
    if (m->pause)
        return m->pause(m->data, ms);
    g_usleep((gulong)ms * 1000);
    return true;
}

static bool reap(const MountRun *m, int *status)
{
    if (m->pid <= 0) {
        *status = 0;
        return true; /* no daemon (it died and was reaped before) */
    }
    if (m->reap)
        return m->reap(m->data, status);
    int st;
    pid_t r = waitpid(m->pid, &st, WNOHANG);
    if (r == m->pid) {
        *status = st;
        return true;
    }
    if (r < 0 && errno == ECHILD) {
        *status = 0; /* reaped elsewhere */
        return true;
    }
    return false;
}

static gint64 since_ms(gint64 t0)
{
    return (g_get_monotonic_time() - t0) / 1000;
}

MountWait mountrun_wait_up(const MountRun *m, int timeout_ms, int poll_us, int *status)
{
    for (gint64 t0 = g_get_monotonic_time();;) {
        if (mountrun_state(m->mnt) == MOUNTRUN_LIVE)
            return MOUNTRUN_UP;
        if (reap(m, status))
            return MOUNTRUN_EXITED;
        if (since_ms(t0) >= timeout_ms)
            return MOUNTRUN_TIMEOUT;
        if (m->pause) {
            if (!m->pause(m->data, MAX(poll_us / 1000, 1)))
                return MOUNTRUN_GAVE_UP;
        } else {
            g_usleep((gulong)poll_us);
        }
    }
}

bool mountrun_wait_exit(const MountRun *m, int ms, int *status)
{
    for (gint64 t0 = g_get_monotonic_time();;) {
        if (reap(m, status))
            return true;
        if (since_ms(t0) >= ms)
            return false;
        /* most daemons are gone within milliseconds of the unmount */
        pause_ms(m, since_ms(t0) < 500 ? 5 : 25);
    }
}

bool mountrun_stop(const MountRun *m, const MountStop *how, int *status)
{
    *status = -1;
    bool clean = true;
    if (how->term_unmounted && m->pid > 0 && mountrun_state(m->mnt) == MOUNTRUN_NONE)
        kill(m->pid, SIGTERM); /* never mounted: nothing makes it exit on its own */
    for (gint64 t0 = g_get_monotonic_time(); mountrun_state(m->mnt) != MOUNTRUN_NONE;) {
        g_autofree char *err = NULL;
        if (mountrun_fusermount(m->mnt, false, &err))
            break;
        if (since_ms(t0) >= how->busy_ms) {
            if (how->on_busy)
                how->on_busy(m->data, err);
            mountrun_fusermount(m->mnt, true, NULL);
            /* detached, but the daemon serves whoever still holds it: stop it */
            if (m->pid > 0)
                kill(m->pid, SIGTERM);
            clean = false;
            break;
        }
        pause_ms(m, 100); /* busy: a process may still be closing files */
    }
    if (!mountrun_wait_exit(m, how->exit_ms, status)) {
        clean = false;
        kill(m->pid, SIGTERM);
        if (!mountrun_wait_exit(m, how->term_ms, status)) {
            if (how->on_kill)
                how->on_kill(m->data);
            kill(m->pid, SIGKILL);
            if (!reap(m, status) && waitpid(m->pid, status, 0) != m->pid)
                *status = -1;
        }
    }
    if (mountrun_state(m->mnt) != MOUNTRUN_NONE)
        mountrun_fusermount(m->mnt, true, NULL);
    return clean;
}

int mountrun_count_fds(pid_t pid, int *pipes)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/fd", (int)pid);
    DIR *d = pid > 0 ? opendir(path) : NULL;
    *pipes = 0;
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        g_autofree char *l = g_build_filename(path, de->d_name, NULL);
        g_autofree char *t = g_file_read_link(l, NULL);
        if (t && g_str_has_prefix(t, "pipe:"))
            (*pipes)++;
        else
            n++;
    }
    closedir(d);
    return n;
}

static bool is_exec(const char *p)
{
    return p && g_file_test(p, G_FILE_TEST_IS_REGULAR) && access(p, X_OK) == 0;
}

char *mountrun_find_ckptfs(void)
{
    g_autofree char *self = g_file_read_link("/proc/self/exe", NULL);
    if (self) {
        g_autofree char *dir = g_path_get_dirname(self);
        g_autofree char *sib = g_build_filename(dir, "..", "fs", "ckptfs", NULL);
        if (is_exec(sib))
            return g_canonicalize_filename(sib, NULL);
    }
    char *p = g_find_program_in_path("ckptfs");
    if (p)
        return p;
    static const char *const sbin[] = {"/usr/local/sbin/ckptfs", "/usr/sbin/ckptfs",
                                       "/sbin/ckptfs"};
    for (gsize i = 0; i < G_N_ELEMENTS(sbin); i++)
        if (is_exec(sbin[i]))
            return g_strdup(sbin[i]);
    return NULL;
}
