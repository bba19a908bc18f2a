/* What outlives an unmount: the records of the newest backing nodes, so
 * that a file handle (name_to_handle_at, an NFS export) taken through one
 * mount of a backing directory opens its object through the next mount of
 * it, as on the backing file system.
 *
 * A node id is a slot and a generation (nodes/nodes.h); the kernel asks
 * the daemon for a node id it has forgotten by LOOKUP of "." (export.c),
 * which the slot's record answers while it keeps it.  At a clean unmount
 * the daemon writes the records of the KEEP_NODES newest backing nodes and
 * its generation counter to a file of its own in KEEP_DIR, named for the
 * backing directory; the next
 * mount of that directory takes the file (and removes it) before it makes
 * any node: the records become retired slots, and generations go on past
 * the old ones, so that an old id never names a new object.  Without the
 * file (a first mount, a reboot, a daemon that died) generations start
 * from the clock, for the same reason.  Files of directories that no
 * longer exist are removed at each save. */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

#include <glib.h>

#include "state.h"

#define KEEP_NODES 16384
#define KEEP_DIR   "/run/ckptfs" /* only a root daemon keeps records: it has handles */

/* Every daemon of the backing directory root (its realpath, device and
 * inode number) holds a lock of it from its start to the end of
 * keep_save: an unmount returns before its daemon has written the records,
 * so a new first daemon waits (wait: 1 s at most) for the lock to be free
 * of daemons before it takes them.  wait is false when another mount of
 * the directory is live (its daemon keeps the lock while it serves).  The
 * lock's descriptor, -1 when there is none. */
int keep_lock(const char *root, dev_t dev, ino_t ino, bool wait);
/* Sets the generation counter of a fresh state s, and takes the records a
 * previous mount of root, with the views named views, left into s, as
 * free slots.  The slots taken are appended to slots
 * (uint32_t), the oldest first; NULL: none are taken.  node_high is not
 * moved (the node table gives them to its pool, nodes.h). */
void keep_take(State *s, const char *root, dev_t dev, ino_t ino, const char *views, GArray *slots);
/* Writes the records of s for the next mount (logs why not on failure),
 * then lets the lock go. */
void keep_save(State *s, const char *root, dev_t dev, ino_t ino, const char *views, int lock);
