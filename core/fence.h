/* Where the daemon's own files (collision_log=, log=) may not be: the
 * backing directory and the mount.  The daemon never writes into the
 * backing directory of its own accord, and a file in the mount would be
 * written through the daemon itself.
 *
 * One check serves the mount's look at the option and every later open of
 * the file (SIGHUP reopens it by its name, which may lead elsewhere by then):
 * each directory the name passes through, symbolic links followed one by
 * one, is checked by where it resolves (its real path against the backing
 * directory's and the mount point's) and by identity (no directory above it
 * is the backing directory, whatever path reaches it), before anything is
 * opened or created in it.  The mount is compared by path only: looking at
 * it may wait on a daemon that does not serve it yet. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct CkFence CkFence;

/* backing and mount: real paths, or NULL (not checked).  The backing
 * directory's device and inode are read now. */
CkFence *ck_fence_new(const char *backing, const char *mount);
CkFence *ck_fence_copy(const CkFence *f);
void ck_fence_free(CkFence *f);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkFence, ck_fence_free)

/* The absolute path the daemon opens for arg (canonicalised against the
 * cwd, its directory resolved, its last component as given), or NULL with
 * *err set (G_FILE_ERROR) when the directory cannot be reached or the name
 * leads behind the fence.  Nothing is opened for writing or created. */
char *ck_fence_path(const CkFence *f, const char *arg, GError **err);

/* path (absolute) opened for appending (O_WRONLY | O_APPEND | O_CLOEXEC |
 * O_NOCTTY), created with mode when missing: a descriptor, or -errno with
 * *err set (G_FILE_ERROR: the reason, without the path).  A name that
 * leads behind the fence is refused (-EPERM) before anything is created;
 * so is an existing file with another hard link on the backing directory's
 * file system (that link may be inside it).  f NULL: nothing is refused. */
int ck_fence_open(const CkFence *f, const char *path, mode_t mode, GError **err);
