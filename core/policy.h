/* Job namespaces and the write policy (docs/DESIGN.md, "Namespaces and the
 * write policy").
 *
 * Every node of the mount carries a CkNs computed once, at lookup, from its
 * parent's CkNs and its name (ck_ns_child); rename recomputes it.  The write
 * checks below are then a comparison of small values: O(1), no path strings,
 * no allocation, safe to call on every request from any thread.
 *
 * Job ids inside CkNs and caller identities are ck_intern() pointers (core/intern.h),
 * so two jobs are the same job iff the pointers are equal.  A caller is a
 * job, NULL (anonymous) or CK_CALLER_INVALID. */
#pragma once
#include <stdbool.h>

typedef enum {
    CK_NS_ROOT,   /* the mount root itself (structure) */
    CK_NS_STRUCT, /* "_state" or "_jobs" at the root (structure) */
    CK_NS_STRAY,  /* a non-job name under _state/_jobs, and below: writes refused */
    CK_NS_JOB,    /* _state/<J>/..., _jobs/<J>/... : job J (ns.job) */
    CK_NS_LEGACY, /* every other top-level entry and below */
    CK_NS_VIEWS,  /* the virtual views tree: read-only (EROFS) */
} CkNsKind;

/* Where in the namespace an entry stands, as far as the catalog cares:
 * whether it is a job's marker, or a directory on the way to one. */
typedef enum {
    CK_PLACE_OTHER = 0,
    CK_PLACE_JOBS,    /* _jobs itself */
    CK_PLACE_JOB_DIR, /* _jobs/<J> */
    CK_PLACE_CHK_DIR, /* _jobs/<J>/chk-<N> (N canonical) */
    CK_PLACE_MARKER,  /* _jobs/<J>/chk-<N>/COMPLETED */
} CkPlace;

typedef struct {
    CkNsKind kind;
    CkPlace place;
    const char *job; /* interned; set iff kind == CK_NS_JOB */
} CkNs;

static inline CkNs ck_ns_root(void)
{
    return (CkNs){.kind = CK_NS_ROOT};
}
/* The same namespace (what the policy compares; the place does not count). */
static inline bool ck_ns_equal(CkNs a, CkNs b)
{
    return a.kind == b.kind && a.job == b.job;
}
/* The same namespace and place (what a node must be told after a rename). */
static inline bool ck_ns_identical(CkNs a, CkNs b)
{
    return ck_ns_equal(a, b) && a.place == b.place;
}
/* The one answer to "is this a marker?": _jobs/<J>/chk-<N>/COMPLETED. */
static inline bool ck_ns_is_marker(CkNs ns)
{
    return ns.place == CK_PLACE_MARKER;
}
/* A change to an entry of this ns (create, remove, rename) can change what
 * the catalog knows of its job: a job's marker directory, a checkpoint
 * directory or a marker. */
static inline bool ck_ns_in_catalog(CkNs ns)
{
    return ns.place == CK_PLACE_JOB_DIR || ns.place == CK_PLACE_CHK_DIR ||
           ns.place == CK_PLACE_MARKER;
}

/* The mount root or _state/_jobs themselves: where only the create rules
 * let a name appear. */
static inline bool ck_ns_is_structure(CkNs ns)
{
    return ns.kind == CK_NS_ROOT || ns.kind == CK_NS_STRUCT;
}

/* The namespace of entry `name` inside a directory of namespace `parent`.
 * views_name is the virtual directory's name at the root. */
CkNs ck_ns_child(CkNs parent, const char *name, const char *views_name);
/* The same for an object whose type is known: a job's root directly in
 * _state or _jobs is a directory, and a non-directory there is outside
 * every namespace (STRAY), as a name that is no job id is. */
CkNs ck_ns_child_of(CkNs parent, const char *name, bool is_dir, const char *views_name);

/* Outcome of a write check.  CK_ALLOW is 0. */
typedef enum {
    CK_ALLOW = 0,
    CK_FOREIGN_WRITE,           /* "foreign-write" */
    CK_LEGACY_WRITE,            /* "legacy-write" */
    CK_OUTSIDE_NAMESPACE,       /* "outside-namespace" */
    CK_CROSS_NAMESPACE_RENAME,  /* "cross-namespace-rename" */
    CK_CROSS_NAMESPACE_LINK,    /* "cross-namespace-link" */
    CK_CROSS_NAMESPACE_SYMLINK, /* "cross-namespace-symlink" */
    CK_ANONYMOUS_WRITE,         /* "anonymous-write": anonymous=deny */
    CK_INVALID_IDENTITY,        /* "invalid-identity": the caller is CK_CALLER_INVALID */
    CK_VIEWS_READ_ONLY,         /* a write into the views: EROFS, not a collision */
} CkVerdict;

#define CK_VERDICT_COUNT 10

/* The caller whose identity is present but is not a valid job id (an
 * empty or malformed value): it writes nowhere (CK_INVALID_IDENTITY), and
 * is never taken for anonymous.  A pointer no interned job id equals. */
extern const char ck_caller_invalid[];
#define CK_CALLER_INVALID ((const char *)ck_caller_invalid)

/* "foreign-write", ...; "allow" for CK_ALLOW, "views-read-only". */
const char *ck_verdict_kind(CkVerdict v);
/* The errno a refusal returns in enforce mode: EACCES, or EROFS for views. */
int ck_verdict_errno(CkVerdict v);

typedef struct {
    bool legacy_rw;      /* legacy=rw: legacy writes go on (ck_decide_*: still recorded) */
    bool audit;          /* policy=audit: crossing writes go on, recorded as allowed */
    bool off;            /* no checks at all (measuring only): only the views stay EROFS */
    bool anonymous_deny; /* anonymous=deny: an anonymous caller writes in no job's namespace */
} CkPolicy;

/* A write to an existing object (write, truncate, setattr, xattr, open for
 * writing) or the removal of an entry (unlink/rmdir: pass the entry's ns).
 * caller_job: interned job id, NULL for an anonymous caller, or
 * CK_CALLER_INVALID.  Every check below answers CK_VIEWS_READ_ONLY for the
 * views first, then CK_INVALID_IDENTITY for an invalid caller, whatever the
 * namespace (the structure's mkdirs included); an anonymous caller's write
 * into a job's namespace is CK_ANONYMOUS_WRITE with anonymous_deny, else
 * allowed. */
CkVerdict ck_policy_write(const CkPolicy *p, const char *caller_job, CkNs target);

/* Creating entry `name` in a directory of namespace `parent` (create, mknod,
 * mkdir, symlink; is_dir for mkdir).  *child_out gets the new entry's ns. */
CkVerdict ck_policy_create(const CkPolicy *p, const char *caller_job, CkNs parent, const char *name,
                           bool is_dir, const char *views_name, CkNs *child_out);

/* rename(src_ns entry) -> entry `name` in dst_parent.  Both ends must be
 * writable and in the same namespace.  *dst_out gets the ns the moved entry
 * has afterwards.  RENAME_EXCHANGE is the same check (both ends swap).
 * Order: views at either end -> CK_VIEWS_READ_ONLY; different namespaces ->
 * CK_CROSS_NAMESPACE_RENAME (for anonymous callers too); then
 * ck_policy_write(src); a destination directly in the root or in
 * _state/_jobs also follows ck_policy_create for the moved object's type
 * (is_dir), and so does the other way of a RENAME_EXCHANGE. */
CkVerdict ck_policy_rename(const CkPolicy *p, const char *caller_job, CkNs src, bool is_dir,
                           CkNs dst_parent, const char *name, const char *views_name,
                           CkNs *dst_out);

/* link(existing object of ns src) -> entry `name` in dst_parent.  Like
 * rename with CK_CROSS_NAMESPACE_LINK; the new name must be creatable as a
 * non-directory (so never directly in _state/_jobs; at the root only under
 * the legacy rule). */
CkVerdict ck_policy_link(const CkPolicy *p, const char *caller_job, CkNs src, CkNs dst_parent,
                         const char *name, const char *views_name, CkNs *dst_out);

/* symlink(target) as entry `name` in a directory of namespace `parent`,
 * whose path relative to the mount root is parent_path ("" for the root).
 * Beyond ck_policy_create: when the link is in a job's namespace, its target
 * is resolved lexically against parent_path (an absolute target against the
 * mount root; ".." above the root stays at the root), and landing in another
 * job's namespace or the legacy area is CK_CROSS_NAMESPACE_SYMLINK.
 * "." and empty components are skipped.  Landing on the root, _state/_jobs
 * themselves, a stray (non-job) name, the views or the link's own job is
 * allowed.  Symlinks outside job namespaces get only the create check.
 * No allocation: the namespace depends on the first two components only. */
CkVerdict ck_policy_symlink(const CkPolicy *p, const char *caller_job, CkNs parent,
                            const char *parent_path, const char *name, const char *target,
                            const char *views_name, CkNs *child_out);

/* The job a verdict is about (the owner of the namespace written), for the
 * collision record's owner_job; NULL when it is not a job's. */
const char *ck_ns_owner(CkNs ns);

/* What the mount does with one write, decided in one place: the verdict
 * of the ck_policy_* checks above (taken as with legacy=ro, so a legacy
 * write is a verdict even with legacy=rw), then the mode: whether the
 * write goes on, what it answers otherwise, whether it is recorded, and as
 * whose namespace. */
typedef struct {
    CkVerdict verdict;     /* CK_ALLOW: nothing crossed */
    bool proceed;          /* the write goes on */
    int err;               /* when !proceed: EACCES, or EROFS in the views */
    bool record;           /* a collision record is written; "allowed" iff proceed */
    const char *owner_job; /* the job whose namespace is written (NULL: none) */
    CkNs ns;               /* the entry's namespace afterwards (create, rename, link, symlink) */
} CkDecision;

CkDecision ck_decide_write(const CkPolicy *p, const char *caller_job, CkNs target);
CkDecision ck_decide_create(const CkPolicy *p, const char *caller_job, CkNs parent,
                            const char *name, bool is_dir, const char *views_name);
/* Renaming entry src (of ns `src`) to `name` in dst_parent; for
 * RENAME_EXCHANGE ask again the other way. */
CkDecision ck_decide_rename(const CkPolicy *p, const char *caller_job, CkNs src, bool is_dir,
                            CkNs dst_parent, const char *name, const char *views_name);
CkDecision ck_decide_link(const CkPolicy *p, const char *caller_job, CkNs src, CkNs dst_parent,
                          const char *name, const char *views_name);
CkDecision ck_decide_symlink(const CkPolicy *p, const char *caller_job, CkNs parent,
                             const char *parent_path, const char *name, const char *target,
                             const char *views_name);
