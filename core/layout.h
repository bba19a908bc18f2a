/* The layout of a checkpoint directory, by name: the two top-level
 * directories that hold every job's own namespace, and the paths of a job
 * in them (docs/DESIGN.md, "What clink's record 013 decided").  Paths are
 * relative to the checkpoint directory; the daemon and ckptctl spell them
 * only through these. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define CK_JOBS_DIR  "_jobs"  /* _jobs/<J>/chk-<N>/COMPLETED: each job's markers */
#define CK_STATE_DIR "_state" /* _state/<J>/v<G>/<S>/...: each job's own state */

/* "_jobs/<J>" (g_free). */
char *ck_job_markers_dir(const char *job);
/* "_state/<J>" (g_free). */
char *ck_job_state_dir(const char *job);
/* "_jobs/<J>/chk-<N>" (g_free). */
char *ck_checkpoint_dir(const char *job, uint64_t n);
/* Whether name is one of the layout's top-level directories. */
bool ck_is_layout_dir(const char *name);

/* Whether the directory open on dfd holds a checkpoint directory's layout:
 * a _jobs or _state directory, a v<G> directory or a bare <S> directory
 * (the older layout).  A directory with nothing in it but views_name (may
 * be NULL) is one too: a checkpoint directory before its first job.  1
 * yes, 0 no (say "not a checkpoint directory"), -errno when it cannot be
 * listed.  dfd and its offset are left as they were. */
int ck_is_checkpoint_dir(int dfd, const char *views_name);
