/* A checkpoint directory's jobs and their markers: the one
 * implementation that lists the jobs, lists a job's checkpoints, reads each
 * COMPLETED and says what its restore reads.  The catalog (so the views and
 * ckptctl jobs, check, unused) and ck_resolve (ckptctl resolve) take every
 * answer about a marker from here, so they cannot disagree.
 *
 * What counts as a checkpoint of job J: a chk-<N> (canonical N) under
 * _jobs/<J> that is
 *  - a directory holding a COMPLETED of any type: a regular file is read; a
 *    symlink, directory, FIFO or device is never followed or opened, and the
 *    checkpoint is malformed "not a regular file (...)";
 *  - a symlink (never followed): malformed, "chk-<N> is a symlink, not
 *    followed".
 * A chk-<N> directory without COMPLETED is a checkpoint in progress, not a
 * checkpoint.  A COMPLETED that cannot be looked at or read (EACCES, EIO)
 * is malformed too, "cannot be read: <reason>".  Everything is read beneath the directory's
 * descriptor. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "resolve.h"

/* A checkpoint as listed: what COMPLETED looked like (lstat), so a rescan
 * re-reads only what changed.  No padding: compared with memcmp. */
typedef struct {
    uint64_t n;
    uint64_t ino;
    uint64_t size;
    int64_t mtime_ns;
    uint32_t mode;  /* COMPLETED's st_mode (of chk-<N> when CK_STAMP_CHK_SYMLINK; the errno
                       when CK_STAMP_ERRNO) */
    uint32_t flags; /* CK_STAMP_* */
} CkMarkerStamp;

G_STATIC_ASSERT(sizeof(CkMarkerStamp) == 40); /* no padding */

#define CK_STAMP_CHK_SYMLINK 1u /* chk-<N> itself is a symlink: not followed */
#define CK_STAMP_ERRNO       2u /* COMPLETED could not be looked at (mode: the errno) */

/* The job directories of dfd's sub ("_jobs" or "_state"): valid job ids that
 * are directories (not symlinks) go into names (a set of interned ids), every
 * other entry into not_jobs as "<sub>/<name>" (either may be NULL).  0, or
 * -errno when sub cannot be opened (nothing listed). */
int ck_list_job_dirs(int dfd, const char *sub, GHashTable *names, GPtrArray *not_jobs);

/* _jobs/<job> beneath dfd, through no symlink: a descriptor, or -errno. */
int ck_job_dir_open(int dfd, const char *job);

/* The checkpoints of a job (jfd: _jobs/<J> freshly opened, its offset at the
 * start; -1: none), ascending by N, with their stamps.  A new array. */
GArray *ck_job_marker_list(int jfd);
/* The same; in_progress (optional, a GArray of uint64_t) also gets the N of
 * each chk-<N> directory without a COMPLETED (a checkpoint being written). */
GArray *ck_job_marker_list_full(int jfd, GArray *in_progress);

/* Whether the stamps of job's markers (as listed, ascending) still describe
 * each _jobs/<job>/chk-<N>/COMPLETED beneath dfd: one fstatat a marker, no
 * listing (chk-<N> itself where it was a symlink; the same errno where it
 * could not be looked at).  What a rewrite in place changes, and no
 * directory. */
bool ck_marker_stamps_current(int dfd, const char *job, const GArray *stamps);

/* Reads the marker of the listed checkpoint *st of `job` (jfd: _jobs/<J>)
 * and returns what its restore reads (ck_restore_of_marker_cached against
 * dfd).  *st stays as listed, never newer than the bytes read, unless
 * the bytes disagreed with the listing (or could not be read): it then
 * describes what was opened, stat'ed before the bytes were read.  unknown
 * (optional) gets the marker's unknown keys (CkMarkerKv*).  buf:
 * CK_MARKER_MAX_BYTES + 1 bytes of scratch.  NULL when COMPLETED is gone
 * since the listing. */
CkRestore *ck_job_marker_restore(int dfd, int jfd, const char *job, CkMarkerStamp *st,
                                 const CkResolveOptions *opts, CkRootCache *cache, char *buf,
                                 GPtrArray **unknown);
