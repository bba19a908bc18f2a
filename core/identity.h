/* Caller identity (SPEC §4 job=ID, identity=env:VAR).
 *
 * The kernel reports the calling *thread*; the answer is per process (thread
 * group).  For identity=env:VAR the job is the value of VAR in
 * /proc/<tgid>/environ, cached per process and keyed so that a reused pid
 * never inherits another process's job (pid + start time).  Callers without
 * VAR, or whose VAR is not a valid job id, are anonymous (NULL).
 * Thread-safe; the returned string is interned (g_intern_string). */
#pragma once
#include <sys/types.h>

typedef struct CkIdentity CkIdentity;

/* fixed_job: job=ID (or NULL); env_var: VAR of identity=env:VAR (or NULL).
 * proc_root: "/proc" (tests may point it elsewhere). */
CkIdentity *ck_identity_new(const char *fixed_job, const char *env_var, const char *proc_root);
void ck_identity_free(CkIdentity *id);
/* The job of thread `tid`, or NULL for anonymous. */
const char *ck_identity_of(CkIdentity *id, pid_t tid);
