/* Keeping a catalog current while one process acts on its answers: ckptctl
 * prune removes what the catalog calls unused and must first see every
 * marker written since the catalog was read.
 *
 * ck_catalog_follow_new watches, by inotify, the top level, _jobs, _state,
 * every _jobs/<J> and every chk-<N> without a COMPLETED, then makes the
 * cheap check of every job once (ck_catalog_job_check), so a change made
 * between the catalog's open and the watches is not missed either.
 * ck_catalog_follow_sync re-reads each job a change was seen in since the
 * last sync, and the top level (ck_catalog_check_top): after it, the
 * catalog holds every checkpoint completed (a chk-<N> created or renamed,
 * a COMPLETED written into one), every job created or removed, before the
 * call began.  When nothing changed a sync costs one read(2) of the
 * inotify descriptor and three fstatat, whatever the number of jobs.
 *
 * Where inotify cannot see every change -- no inotify, a watch that could
 * not be added (max_user_watches), a queue overflow, a file system another
 * host may write (ck_fs_is_shared) -- or with CK_FOLLOW_POLL, every sync
 * makes the cheap check of every job instead: two or three fstatat a job.
 *
 * A COMPLETED rewritten in place in a checkpoint that was already complete
 * is seen by neither (markers are written once); ck_catalog_refresh_job of
 * its job sees it.  Not thread-safe: one follower, one thread. */
#pragma once
#include <glib.h>
#include <stdbool.h>

#include "catalog.h"

typedef struct CkCatalogFollow CkCatalogFollow;

#define CK_FOLLOW_POLL 1u /* check every job at every sync, inotify or not */

/* c must outlive the follower. */
CkCatalogFollow *ck_catalog_follow_new(CkCatalog *c, unsigned flags);
/* changed_out (optional): the interned ids of the jobs whose snapshot changed. */
void ck_catalog_follow_sync(CkCatalogFollow *f, GPtrArray *changed_out);
/* NULL while inotify sees every change, else why every sync checks every
 * job ("CK_FOLLOW_POLL", "a network file system", "inotify: <reason>"). */
const char *ck_catalog_follow_polls(CkCatalogFollow *f);
void ck_catalog_follow_free(CkCatalogFollow *f);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkCatalogFollow, ck_catalog_follow_free)

/* A file system another host may change (NFS, CIFS/SMB, FUSE, 9P, Ceph,
 * AFS, Lustre, GPFS, OCFS2, GFS2, Coda, NCP), so that inotify, which sees
 * this kernel's changes only, cannot be trusted alone; true when fstatfs
 * fails. */
bool ck_fs_is_shared(int fd);

/* What the re-check of one entry of ck_catalog_unused found. */
typedef enum {
    CK_RECHECK_UNUSED,  /* still unused: it may go */
    CK_RECHECK_NEEDED,  /* a restorable marker reads it now, or it is no longer older than
                           every restorable marker of its job */
    CK_RECHECK_GONE,    /* no longer there */
    CK_RECHECK_NOT_DIR, /* no longer a directory reached through no symlink */
    CK_RECHECK_ERROR,   /* it could not be looked at (EACCES, EIO, ...) */
} CkRecheck;

/* The check made just before `path` (an entry of ck_catalog_unused) is
 * removed: a sync (every marker written before this call), then the owner
 * of a _state/<J>/v<G> re-read in full (ck_catalog_refresh_job: its markers
 * rewritten in place too), then the rule of ck_catalog_unused for that one
 * path (ck_catalog_unused_reason).  *reason: the unused reason when
 * CK_RECHECK_UNUSED; *why (optional, g_free): what keeps it otherwise. */
CkRecheck ck_catalog_unused_recheck(CkCatalogFollow *f, const char *path, const char **reason,
                                    char **why);
