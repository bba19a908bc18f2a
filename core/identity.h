/* Caller identity: the job a request comes from (job=ID or identity=env:VAR).
 *
 * The kernel reports the calling *thread*; the answer is per process (thread
 * group).  For identity=env:VAR the job is the value of VAR in
 * /proc/<tgid>/environ, cached per process and keyed so that a reused pid
 * never inherits another process's job (pid + start time).  Callers without
 * VAR, or whose VAR is not a valid job id, are anonymous (NULL).
 * Thread-safe; the returned string is interned (ck_intern).
 *
 * Cost and pid-reuse safety: the cache is keyed by tid and each entry holds
 * the thread's stamp from <proc>/<tid>/stat: start time (field 22, parsed
 * after the last ')' since comm may hold anything) plus env_start/env_end
 * (fields 50-51), which change on execve() (the pid and start time do not).
 * A hit costs one small read of <proc>/<tid>/stat and no other /proc access;
 * a reused tid (new start time) or an exec (new environment) is a miss.  A
 * miss maps tid -> tgid ("Tgid:" of <proc>/<tid>/status), reads at most
 * 1 MiB of <proc>/<tgid>/environ (the thread's own when the leader is a zombie), takes the first
 * VAR=, validates it with ck_is_job_id (invalid -> anonymous), then re-reads the stamp and retries
 * if the thread changed meanwhile.  A vanished thread (ENOENT) is anonymous
 * and not cached; an unreadable environ (EACCES) is cached as anonymous.
 * 4096 entries; the cache is cleared when full.  Call it on write checks
 * only (reads do not need an identity).
 * With fixed_job (job=ID) the answer is always that job, interned, and /proc
 * is never read; fixed_job wins over env_var; with neither, always NULL.
 * tid <= 0 (a caller outside the daemon's pid namespace) is anonymous.
 * Any other failure to read /proc (EMFILE when the daemon is out of
 * descriptors, ENFILE, ENOMEM, EIO) answers CK_IDENTITY_UNKNOWN, not
 * cached: the caller then acts as a job no namespace belongs to, so its
 * writes into every job's namespace are refused (fail closed) instead of
 * being allowed as an anonymous caller's. */
#pragma once
#include <sys/types.h>

/* Never a valid job id (parentheses); returned interned. */
#define CK_IDENTITY_UNKNOWN "(unknown)"

typedef struct CkIdentity CkIdentity;

/* fixed_job: job=ID (or NULL); env_var: VAR of identity=env:VAR (or NULL).
 * proc_root: "/proc" (tests may point it elsewhere). */
CkIdentity *ck_identity_new(const char *fixed_job, const char *env_var, const char *proc_root);
void ck_identity_free(CkIdentity *id);
/* The job of thread `tid`, or NULL for anonymous. */
const char *ck_identity_of(CkIdentity *id, pid_t tid);

/* The value of VAR in the environment of thread `tid` (read from
 * <proc_root>/<tid>/environ as identity=env:VAR reads it, first VAR= wins,
 * at most CK_ENV_VALUE_MAX bytes of it), or NULL when VAR is absent or the
 * environment cannot be read.  Not cached: for collision records ("tag"),
 * which are rare.  g_free. */
#define CK_ENV_VALUE_MAX 1024
char *ck_proc_env_value(const char *proc_root, pid_t tid, const char *var);
