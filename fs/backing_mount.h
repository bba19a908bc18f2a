/* The daemon's own mount of the backing directory, under the FUSE mount's
 * atime rule.
 *
 * Reads the kernel makes for the FUSE mount without asking the daemon (a
 * passthrough read, a mapped file, an executable) go to backing files the
 * daemon opened, and update atimes as the mount those files were opened
 * through says: the backing file system's, not the FUSE mount's.  So the
 * daemon opens backing files and directories for I/O through a private,
 * detached copy of the backing mount (open_tree(2), OPEN_TREE_CLONE),
 * gives the copy the FUSE mount's atime rule (mount_setattr(2)), and again
 * whenever a remount changes it; what it opens only to name objects (*at()
 * calls, paths in the log) stays on the backing mount itself, and so do a
 * file's open at its create and the opens of nodes that keep a descriptor
 * of their own (no handles, a mount below the directory), which keep a
 * noatime rule with O_NOATIME instead.  The copy
 * needs CAP_SYS_ADMIN; without it the daemon's own opens fall back to
 * O_NOATIME (nodes/), which covers every read it serves (passthrough needs
 * root anyway).
 *
 * An atime rule is mount(2)'s flags: MS_NOATIME, MS_RELATIME,
 * MS_STRICTATIME, MS_NODIRATIME (mounttab_atime_rule reads them). */
#pragma once

/* An O_PATH descriptor of dir's root in a private copy of its mount, with
 * the atime rule; -errno when no copy can be made (EPERM unprivileged). */
int backing_mount_open(const char *dir, unsigned long rule);

/* Gives the copy whose root tree is open at the atime rule.  0 or -errno. */
int backing_mount_set_atime(int tree, unsigned long rule);
