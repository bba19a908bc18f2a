/* The mount table through libmount, and remounting a live mount. */
#include "mounttab.h"
#include "mount_gone.h"

#include <errno.h>
#include <glib.h>
#include <libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>

/* The top mount at mnt (a real path) in this mount namespace, with
 * libmount reading /proc/self/mountinfo (it unescapes "\040" and friends,
 * which a sscanf would not).  NULL when nothing is mounted there; unref
 * the table. */
static struct libmnt_fs *top_mount_at(const char *mnt, struct libmnt_table **tb)
{
    *tb = mnt_new_table_from_file("/proc/self/mountinfo");
    return *tb ? mnt_table_find_target(*tb, mnt, MNT_ITER_BACKWARD) : NULL;
}

/* Whether the options name an atime rule ([no]diratime goes with any). */
static bool names_atime_rule(const char *opts)
{
    static const char *const rules[] = {"atime",      "noatime",     "relatime",
                                        "norelatime", "strictatime", "nostrictatime"};
    g_auto(GStrv) parts = g_strsplit(opts, ",", -1);
    for (size_t i = 0; i < G_N_ELEMENTS(rules); i++)
        if (g_strv_contains((const char *const *)parts, rules[i]))
            return true;
    return false;
}

/* Whether no dead daemon's mount is at mnt: true for a live one, and for a
 * directory nothing is mounted on.  statfs always reaches the daemon (a
 * stat may be answered from the kernel's attribute cache), and only a dead
 * one makes it fail as mount_gone.h says; EACCES is a mount without
 * allow_other. */
static bool mounttab_serving(const char *mnt)
{
    struct statfs sfs;
    return statfs(mnt, &sfs) == 0 || !ck_mount_gone_errno(errno);
}

/* The top mount at mnt when it is a ckptfs (of type fstype), else NULL;
 * unref the table. */
static struct libmnt_fs *ckptfs_at(const char *mnt, const char *fstype, struct libmnt_table **tb)
{
    struct libmnt_fs *top = top_mount_at(mnt, tb);
    return top && g_strcmp0(mnt_fs_get_fstype(top), fstype) == 0 ? top : NULL;
}

char *mounttab_live_ckptfs(const char *mnt, const char *fstype)
{
    struct libmnt_table *tb = NULL;
    struct libmnt_fs *fs = ckptfs_at(mnt, fstype, &tb);
    char *source = NULL;
    if (fs && mounttab_serving(mnt))
        source = g_strdup(mnt_fs_get_source(fs) ? mnt_fs_get_source(fs) : "?");
    mnt_unref_table(tb);
    return source;
}

bool mounttab_is_ckptfs(const char *mnt, const char *fstype)
{
    struct libmnt_table *tb = NULL;
    bool is = ckptfs_at(mnt, fstype, &tb) != NULL;
    mnt_unref_table(tb);
    return is;
}

bool mounttab_dead_ckptfs(const char *mnt, const char *fstype)
{
    struct libmnt_table *tb = NULL;
    bool dead = ckptfs_at(mnt, fstype, &tb) && !mounttab_serving(mnt);
    mnt_unref_table(tb);
    return dead;
}

bool mounttab_has_ckptfs_of(const char *backing)
{
    struct libmnt_table *tb = mnt_new_table_from_file("/proc/self/mountinfo");
    struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
    struct libmnt_fs *fs = NULL;
    bool found = false;
    while (tb && it && !found && mnt_table_next_fs(tb, it, &fs) == 0) {
        const char *src = mnt_fs_get_source(fs);
        if (g_strcmp0(mnt_fs_get_fstype(fs), "fuse.ckptfs") != 0 || !src)
            continue;
        char *real = realpath(src, NULL);
        found = real && strcmp(real, backing) == 0;
        free(real);
    }
    mnt_free_iter(it);
    mnt_unref_table(tb);
    return found;
}

#define ATIME_FLAGS (MS_NOATIME | MS_NODIRATIME | MS_RELATIME | MS_STRICTATIME)

long mounttab_atime_rule(const char *mnt)
{
    struct libmnt_table *tb = NULL;
    struct libmnt_fs *top = top_mount_at(mnt, &tb);
    unsigned long flags = 0;
    long r = -1;
    if (top && mnt_optstr_get_flags(mnt_fs_get_vfs_options(top), &flags,
                                    mnt_get_builtin_optmap(MNT_LINUX_MAP)) == 0)
        r = (long)(flags & ATIME_FLAGS);
    mnt_unref_table(tb);
    return r;
}

unsigned long mounttab_atime_rule_of(const char *opts)
{
    unsigned long flags = 0;
    if (opts)
        mnt_optstr_get_flags(opts, &flags, mnt_get_builtin_optmap(MNT_LINUX_MAP));
    if (!opts || !names_atime_rule(opts))
        flags |= MS_RELATIME;
    return flags & ATIME_FLAGS;
}

int mounttab_remount(const char *mountpoint, const char *opts, const char *fstype)
{
    char *real = realpath(mountpoint, NULL);
    if (!real) {
        fprintf(stderr, "ckptfs: mount point %s: %s\n", mountpoint, g_strerror(errno));
        return 2;
    }
    g_autofree char *mnt = g_strdup(real);
    free(real);
    struct libmnt_table *tb = NULL;
    struct libmnt_fs *top = ckptfs_at(mnt, fstype, &tb);
    /* the flags it has now, from the mount table: no request to the daemon,
     * which refuses every user but its own without allow_other */
    g_autofree char *now = top ? g_strdup(mnt_fs_get_vfs_options(top)) : NULL;
    g_autofree char *sb_now = top ? g_strdup(mnt_fs_get_fs_options(top)) : NULL;
    mnt_unref_table(tb);
    if (!top || !mounttab_serving(mnt)) {
        fprintf(stderr, "ckptfs: %s: no live ckptfs is mounted here to remount\n", mnt);
        return 2;
    }
    const struct libmnt_optmap *linux_map = mnt_get_builtin_optmap(MNT_LINUX_MAP);
    /* the mount's own flags, and the superblock's that a remount resets
     * (sync and lazytime show among the super options) */
    unsigned long had = 0, sb_had = 0;
    mnt_optstr_get_flags(now, &had, linux_map);
    mnt_optstr_get_flags(sb_now, &sb_had, linux_map);
    had |= sb_had & (MS_SYNCHRONOUS | MS_LAZYTIME);
    /* An option not named keeps its value.  The kernel keeps the atime rule
     * too unless one is named; when one is, the current one is not passed
     * on (it would combine with the new one). */
    unsigned long flags = had;
    if (names_atime_rule(opts))
        flags &= ~(unsigned long)ATIME_FLAGS;
    if (mnt_optstr_get_flags(opts, &flags, linux_map) < 0) {
        fprintf(stderr, "ckptfs: -o %s: cannot be read as mount options\n", opts);
        return 2;
    }
    /* mount(8) passes no "exec", "dev" or "suid" it was given (they are the
     * defaults), and the helper (mount.fuse3) adds "dev,suid" to every call:
     * a request to loosen them cannot be told, so a remount never loosens
     * nosuid, nodev or noexec (unmount and mount again for that). */
    flags |= had & (MS_NOSUID | MS_NODEV | MS_NOEXEC);
    flags &= ~(unsigned long)(MS_REMOUNT | MS_BIND | MS_MOVE | MS_REC);
    if (mount(NULL, mnt, NULL, MS_REMOUNT | flags, NULL) < 0) {
        int e = errno;
        if (e == EPERM)
            fprintf(stderr,
                    "ckptfs: %s: a remount needs CAP_SYS_ADMIN (root); without it, unmount "
                    "(fusermount3 -u) and mount again\n",
                    mnt);
        else if (e == EBUSY && (flags & MS_RDONLY))
            fprintf(stderr, "ckptfs: %s: files are open for writing; it stays read-write\n", mnt);
        else
            fprintf(stderr, "ckptfs: %s: remount: %s\n", mnt, g_strerror(e));
        return 1;
    }
    return 0;
}
