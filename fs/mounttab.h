/* What the mount table says of a mount point, and the one change ckptfs
 * makes to a live mount: its flags.
 *
 * `mount -o remount,OPTS MNT` runs the mount helper, which runs
 * "ckptfs SOURCE MNT -o remount,OPTS": that must change the flags of the
 * mount a daemon already serves (read-only, nosuid, nodev, noexec, the
 * atime rule), never start a second daemon on top of it. */
#pragma once

#include <stdbool.h>

/* fstype: the mount table's type of a ckptfs mount, "fuse.ckptfs" unless
 * -o subtype= names another (FsOptions.fstype). */

/* The source of the live ckptfs mounted at mnt (a real path; g_free), or
 * NULL: nothing, another file system, or a dead daemon's mount. */
char *mounttab_live_ckptfs(const char *mnt, const char *fstype);

/* Whether the top mount at mnt (a real path) is a ckptfs, live or not. */
bool mounttab_is_ckptfs(const char *mnt, const char *fstype);

/* Whether the top mount at mnt (a real path) is a ckptfs whose daemon is
 * gone: another file system's dead mount is not ours to clear. */
bool mounttab_dead_ckptfs(const char *mnt, const char *fstype);

/* Whether a ckptfs mount of the backing directory backing (a realpath),
 * by its source, is in the mount table. */
bool mounttab_has_ckptfs_of(const char *backing);

/* The atime rule of the mount at mnt (a real path) now, as mount(2)'s
 * flags (MS_NOATIME, MS_RELATIME, MS_NODIRATIME; neither of the first two
 * is strictatime); -1 when nothing is mounted there.  A remount changes it
 * behind the daemon. */
long mounttab_atime_rule(const char *mnt);

/* The atime rule mount options give a new mount (the kernel's default,
 * relatime, when they name none). */
unsigned long mounttab_atime_rule_of(const char *opts);

/* Remounts the live ckptfs at mountpoint with the mount flags that opts
 * name, the flags it does not name kept.  Returns the exit status, having
 * said on stderr why it failed. */
int mounttab_remount(const char *mountpoint, const char *opts, const char *fstype);
