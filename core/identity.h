/* Caller identity: the job a write comes from, in one of these modes
 * (identity= and job= of ckptfs(8)):
 *
 *   job=ID          every caller is job ID;
 *   env:VAR         the value of VAR in the caller's environment;
 *   cgroup:PATTERN  the caller's cgroup v2 path: the map's cgroup lines
 *                   first (the longest prefix wins), then PATTERN;
 *   cgroup          the map's cgroup lines only;
 *   uid             the caller's uid (as the kernel reports it with the
 *                   request), in the map's uid lines;
 *   none            every caller is anonymous.
 *
 * The answer (CkCaller) is a job, anonymous (nothing names one), invalid
 * (a value is present but is not a valid job id: CK_CALLER_INVALID, which
 * the policy lets write nowhere; never anonymous) or CK_IDENTITY_UNKNOWN
 * (the daemon could not read what names the caller, or could not see the
 * caller at all).
 *
 * Thread-safe; job ids are interned (ck_intern).  Call it on write checks
 * only: reads do not need an identity.
 *
 * env:VAR.  The kernel reports the calling *thread*; the answer is per
 * process (thread group).  The job is the value of VAR in
 * <proc>/<tgid>/environ, cached per thread and keyed so that a reused tid
 * never inherits another process's job: each entry holds the thread's
 * stamp from <proc>/<tid>/stat, its start time (field 22, parsed after the
 * last ')' since comm may hold anything) plus env_start/env_end (fields
 * 50-51), which change on execve() (the pid and start time do not).  A hit
 * costs one small read of <proc>/<tid>/stat; a reused tid (new start time)
 * or an exec (new environment) is a miss.  A miss maps tid -> tgid
 * ("Tgid:" of <proc>/<tid>/status), reads <proc>/<tgid>/environ whole
 * (the thread's own when the leader is a zombie), takes the first VAR=,
 * then re-reads the stamp and retries if the thread changed meanwhile.
 * Without VAR the caller is anonymous; with VAR set to anything that is
 * not a job id (empty included) it is invalid.  An environment of more
 * than CK_PROC_READ_MAX bytes (far more than an exec can pass: the kernel
 * caps its strings at a quarter of the stack limit, 6 MiB at most) is
 * unknown and cached: a job is never taken from part of an environment,
 * where a variable past the cut would be missed or a value cut short.  A
 * vanished thread (ENOENT) is anonymous and not cached; an unreadable
 * environ (EACCES) is cached as anonymous.  4096 entries; the cache is
 * cleared when full.
 *
 * cgroup.  Read on every call, never cached, so that a process moved to
 * another cgroup writes as its new job from its next write: the one "0::"
 * line of <proc>/<tid>/cgroup, read whole (the path as the daemon's
 * cgroup namespace shows it).  No such line (no cgroup v2) is anonymous;
 * two (a cgroup name holding a newline, made to look like a second line)
 * is unknown.
 *
 * uid.  The uid of the request; /proc is never read.
 *
 * tid <= 0 is unknown in the env and cgroup modes: the kernel sends pid 0
 * for a caller outside the daemon's pid namespace, a process the daemon
 * cannot read.  None of the requests the kernel makes itself with pid 0
 * (release, forget, writeback writes, readahead) is a write check.
 *
 * Any failure to read /proc other than the caller being gone (EMFILE when
 * the daemon is out of descriptors, ENFILE, ENOMEM, EIO) answers
 * CK_IDENTITY_UNKNOWN, not cached: the caller then acts as a job no
 * namespace belongs to, so its writes into every job's namespace are
 * refused (fail closed) instead of being allowed as an anonymous
 * caller's. */
#pragma once
#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "policy.h"

/* Never a valid job id (parentheses); returned interned. */
#define CK_IDENTITY_UNKNOWN "(unknown)"

typedef enum {
    CK_IDENTITY_NONE = 0, /* every caller anonymous */
    CK_IDENTITY_JOB,      /* job=ID */
    CK_IDENTITY_ENV,      /* identity=env:VAR */
    CK_IDENTITY_CGROUP,   /* identity=cgroup[:PATTERN] */
    CK_IDENTITY_UID,      /* identity=uid */
} CkIdentityMode;

/* "job", "env", "cgroup", "uid" (a collision record's "identity"); NULL
 * for CK_IDENTITY_NONE. */
const char *ck_identity_mode_name(CkIdentityMode m);
/* What anonymous= is when not given: allow for none, job and env (callers
 * opt in by setting VAR), deny for cgroup and uid (the orchestrator names
 * every job, so a caller it did not name is not one of its workers). */
bool ck_identity_anonymous_denied_by_default(CkIdentityMode m);

/* ---- cgroup patterns ---- */

/* PATTERN of identity=cgroup:PATTERN: an absolute cgroup path whose
 * components are literal names, "*" (any one component) or a name holding
 * "%j" exactly once in the whole pattern (what stands there is the job
 * id, e.g. "clink-worker@%j.service").  No empty, "." or ".." component,
 * no trailing '/', no other '%', at most 4096 bytes.  It matches a cgroup
 * path as a prefix, whole components: the sub-cgroups a worker makes in a
 * delegated subtree keep its job. */
typedef struct CkCgroupPattern CkCgroupPattern;
/* NULL with *why (g_free) when text is not a pattern. */
CkCgroupPattern *ck_cgroup_pattern_new(const char *text, char **why);
void ck_cgroup_pattern_free(CkCgroupPattern *p);
/* Whether path (len bytes, "/a/b", "/" for the root) matches: then *job
 * and *job_len give what %j stood for, inside path (possibly empty, or not
 * a valid job id: the caller decides). */
bool ck_cgroup_pattern_match(const CkCgroupPattern *p, const char *path, size_t len,
                             const char **job, size_t *job_len);

/* identity= as given ("env:VAR", "cgroup:PATTERN", "cgroup", "uid"): true
 * with *mode, or false with *why (g_free). */
bool ck_identity_spec_check(const char *spec, CkIdentityMode *mode, char **why);

/* ---- the identity map ---- */

/* identity_map=FILE: lines of two fields separated by blanks,
 *   <cgroup-prefix> <job-id>     e.g. /kubepods.slice/kubepods-pod1234.slice j1
 *   uid:<N> <job-id>             e.g. uid:1000 j2
 * Blank lines and lines starting with '#' (after blanks) are skipped; a
 * CR before the LF is dropped.  A cgroup prefix is an absolute path
 * without empty, "." or ".." components or a trailing '/' ("/" alone
 * matches every cgroup) and matches whole components; N is a uid in
 * decimal, no sign, no leading zeros, below 4294967295.  A line of another
 * shape, a job id that is not valid, a prefix or uid given twice, a NUL
 * byte or a file over 16 MiB makes the whole map malformed: the error
 * names the first such line ("line 3: ..."). */
typedef struct CkIdentityMap CkIdentityMap;
#define CK_IDENTITY_MAP_MAX_BYTES (16 * 1024 * 1024)
/* NULL with *why (g_free) on the first malformed line. */
CkIdentityMap *ck_identity_map_parse(const char *text, size_t len, char **why);
/* The same from a file (a regular file, read whole); *why also says why it
 * could not be read. */
CkIdentityMap *ck_identity_map_load(const char *path, char **why);
void ck_identity_map_free(CkIdentityMap *m);
guint ck_identity_map_cgroup_lines(const CkIdentityMap *m);
guint ck_identity_map_uid_lines(const CkIdentityMap *m);
/* The job of the longest prefix of path (whole components), interned, or NULL. */
const char *ck_identity_map_by_cgroup(const CkIdentityMap *m, const char *path, size_t len);
const char *ck_identity_map_by_uid(const CkIdentityMap *m, uid_t uid);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkIdentityMap, ck_identity_map_free)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(CkCgroupPattern, ck_cgroup_pattern_free)

/* ---- callers ---- */

typedef struct CkIdentity CkIdentity;

/* fixed_job: job=ID (or NULL; wins over spec); spec: identity= (or NULL),
 * as ck_identity_spec_check takes it; map: the identity map, taken (or
 * NULL); proc_root: "/proc" (tests may point it elsewhere).  NULL with
 * *why when spec is not valid. */
CkIdentity *ck_identity_new(const char *fixed_job, const char *spec, CkIdentityMap *map,
                            const char *proc_root, char **why);
void ck_identity_free(CkIdentity *id);
CkIdentityMode ck_identity_mode(const CkIdentity *id);
/* Replaces the map (taken; NULL: none): the calls that start after it
 * returns use the new one. */
void ck_identity_set_map(CkIdentity *id, CkIdentityMap *map);

typedef struct {
    /* the job (interned); CK_CALLER_INVALID; ck_intern(CK_IDENTITY_UNKNOWN);
     * or NULL: anonymous */
    const char *job;
    CkIdentityMode mode; /* the mode that named it; CK_IDENTITY_NONE when anonymous */
    /* CK_CALLER_INVALID: the value that stood for the job, at most
     * CK_ENV_VALUE_MAX bytes of it, escaped (ck_identity_escape); else NULL */
    char *value;
} CkCaller;
void ck_caller_clear(CkCaller *c);
G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC(CkCaller, ck_caller_clear)

/* The caller of a request from thread `tid` with uid `uid`. */
CkCaller ck_identity_caller(CkIdentity *id, pid_t tid, uid_t uid);

/* Bytes as printable ASCII: '\' and every byte outside 0x20-0x7e as \xHH
 * (a newline or a non-UTF-8 byte stays visible and unambiguous).  g_free. */
char *ck_identity_escape(const char *raw, size_t len);

/* The process (thread group) thread `tid` belongs to, read from
 * <proc_root>/<tid>/status; tid itself when that cannot be read (it
 * exited).  The kernel names the thread that asked; a record names the
 * process, as ps and kill do. */
pid_t ck_proc_tgid(const char *proc_root, pid_t tid);

/* The most the daemon reads of a caller's environ or cgroup file; a larger
 * one is never read in part (see env:VAR above). */
#define CK_PROC_READ_MAX (64 * 1024 * 1024)

/* The value of VAR in the environment of thread `tid` (read whole from
 * <proc_root>/<tid>/environ as identity=env:VAR reads it, first VAR= wins,
 * at most CK_ENV_VALUE_MAX bytes of it), or NULL when VAR is absent or the
 * environment cannot be read whole.  Not cached: for collision records
 * ("tag"), which are rare.  g_free. */
#define CK_ENV_VALUE_MAX 1024
char *ck_proc_env_value(const char *proc_root, pid_t tid, const char *var);
