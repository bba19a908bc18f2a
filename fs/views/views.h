/* fs/views: the read-only virtual tree under the views name (docs/DESIGN.md,
 * "The views and the catalog", ckptfs(8) THE VIEWS): the views directory,
 * .collisions, .metrics, .control (the live settings: control.h), and one
 * directory per job of the catalog, kept current by the watcher and the
 * notifier (catalog_watch.c).
 *
 * Contract: the request handlers (ops/) send here every request on a
 * VIRTUAL or ALIAS node, and the lookup of the views name at the root; the
 * views use the node table, the state memfd and the protocol module below
 * them, and call nothing of ops/.  The only writes that reach the views
 * are those to .control (its opens for writing, writes and setxattr); the
 * policy hooks refuse every other write in the views with EROFS (their
 * nodes' namespace is CK_NS_VIEWS).  Writes through the mount that change
 * what the catalog knows reach it through views_note_change and
 * views_marker_written.
 *
 * Nodes come from node_get_virtual (nodes/nodes.h), keyed by the entry's
 * path below the views dir ("" is the views dir itself), so a second
 * lookup of one entry gives the same node; VIRTUAL nodes report their vino as
 * st_ino (top bit set: never a backing number), ALIAS nodes the backing
 * object's st_ino and attributes.  Each function returns 0 (or a size) or
 * -errno and may be called from any worker thread at once. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

#include "ckptfs.h"

/* views_init reads the job names (the views dir lists them at once);
 * views_start (after fuse_daemonize: threads do not survive its fork) starts
 * the watcher, which builds the catalog in the background (deeper lookups
 * wait for it), and the notifier; views_stop joins them (before the session
 * is unmounted and destroyed: the notifier writes to it); views_destroy
 * frees the rest (and stops first). */
int views_init(struct ckptfs *fs);
int views_start(struct ckptfs *fs);
void views_stop(struct ckptfs *fs);
void views_destroy(struct ckptfs *fs);

/* Entry `name` of `parent` (the mount root, for the views dir itself, or a
 * VIRTUAL directory): fills e (ino, generation, attr, timeouts) with a node
 * that got nlookup+1. */
int views_lookup(struct ckptfs *fs, Node *parent, const char *name, struct fuse_entry_param *e);
/* Attributes of a VIRTUAL or ALIAS node; *timeout: the attr timeout to give. */
int views_getattr(struct ckptfs *fs, Node *n, struct stat *st, double *timeout);
/* The views dir's attributes, for the root's readdir (no node needed). */
void views_dir_stat(struct ckptfs *fs, struct stat *st);
/* Target of a VIRTUAL symlink (g_free). */
int views_readlink(struct ckptfs *fs, Node *n, char **target);

/* Directories: a snapshot at opendir keeps offsets stable until releasedir. */
int views_opendir(struct ckptfs *fs, Node *n, void **dh);
/* Fills buf (at most size bytes) with fuse_add_direntry[_plus] entries
 * following offset `off`; returns the bytes used.  With plus, each entry
 * but "." and ".." holds nlookup+1 only if it fitted in buf. */
ssize_t views_readdir(struct ckptfs *fs, fuse_req_t req, Node *n, void *dh, char *buf, size_t size,
                      off_t off, bool plus);
void views_releasedir(struct ckptfs *fs, void *dh);
/* A handle kept without the kernel holding its directory (a parked
 * listing): its node may be gone by its release, which must then not
 * touch it. */
void views_dir_detach(void *dh);
/* Whether the kernel may cache the listing of an opened views dir
 * (fi->cache_readdir), and whether what it cached at an earlier open is
 * still the same listing (*keep: fi->keep_cache; false drops it). */
bool views_dir_cacheable(void *dh, bool *keep);

/* Files: what an open of a VIRTUAL or ALIAS file serves. */
typedef struct {
    int fd;          /* >= 0: read this backing descriptor (ALIAS; ops.c closes it) */
    GBytes *content; /* else: this snapshot (ops.c unrefs it) */
    bool direct_io;  /* content whose size may differ from what getattr said */
    bool keep_cache;
    bool control; /* .control opened for writing: writes go to views_write */
} ViewsOpen;
/* flags: open(2) flags.  Opens for writing or truncating: EROFS, but of
 * .control by root or the daemon's user (EACCES for another; req NULL: an
 * open made again after a takeover, already allowed once). */
int views_open(struct ckptfs *fs, fuse_req_t req, Node *n, int flags, ViewsOpen *out);
/* A write through a handle views_open gave with `control`: 0 or -errno
 * (control_write). */
int views_write(struct ckptfs *fs, fuse_req_t req, Node *n, const char *data, size_t size);
/* access(2) of a views node: W_OK gives EROFS, but on .control (root and
 * the daemon's user may write it, others get EACCES). */
int views_access(struct ckptfs *fs, fuse_req_t req, Node *n, int mask);

/* Hooks for the request handlers (no cost beyond a compare unless a marker
 * is involved; core answers what is a marker: ck_ns_is_marker):
 * - views_note_change: an entry of namespace `entry` in a directory of
 *   namespace pns was created, removed or renamed through the mount (the
 *   policy's decision gave its namespace); when it is a marker, a
 *   checkpoint or marker directory or a job's root, the job is re-read
 *   before this returns and the kernel's view entries are invalidated
 *   (asynchronously).
 * - views_marker_written: a marker of `job` opened for writing was flushed
 *   or released. */
void views_note_change(struct ckptfs *fs, CkNs pns, CkNs entry);
void views_marker_written(struct ckptfs *fs, const char *job);

/* Extended attributes (user.ckptfs.source, .backing, .generation), read-only,
 * on regular files and directories of the job trees (the kernel refuses
 * user.* on symlinks, so `latest` and symlinks in a state tree have none):
 *  - a file in state/ or checkpoints/<N>/: its layer's source ("own",
 *    "legacy", "external"), its backing path (relative to the backing dir;
 *    absolute for external), the generation (its layer's, or the v<G> its
 *    path starts with);
 *  - a directory: the same, from the first layer that has it as a real
 *    directory; a directory that only stands for a deeper layer's prefix
 *    (state/v1 above a legacy v1/0) has a source but no backing;
 *  - <J>: own, "_jobs/<J>"; <J>/state: own, "_state/<J>" (when it exists);
 *    <J>/checkpoints and <J>/restore: own, "_jobs/<J>";
 *    checkpoints/<N> and its ERROR: own, the marker dir / marker, and the
 *    checkpoint's generation when known;
 *  - the views dir, .collisions, .metrics: none. */
int views_getxattr(struct ckptfs *fs, Node *n, const char *name, GBytes **value);
/* Appends each name and its NUL to names. */
int views_listxattr(struct ckptfs *fs, Node *n, GString *names);
/* setxattr in the views: the settings of .control (control.c), EROFS
 * everywhere else. */
int views_setxattr(struct ckptfs *fs, fuse_req_t req, Node *n, const char *name, const char *value,
                   size_t size);
