#include "policy.h"
#include "intern.h"
#include "classify.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

const char ck_caller_invalid[] = "(invalid identity)";

static const char *default_views(const char *views_name)
{
    return views_name ? views_name : "_views";
}

static bool is_struct_name(const char *s, size_t len)
{
    return (len == 6 && memcmp(s, "_state", 6) == 0) || (len == 5 && memcmp(s, "_jobs", 5) == 0);
}

CkNs ck_ns_child(CkNs parent, const char *name, const char *views_name)
{
    switch (parent.kind) {
    case CK_NS_ROOT: {
        size_t len = strlen(name);
        if (is_struct_name(name, len))
            return (CkNs){.kind = CK_NS_STRUCT,
                          .place = strcmp(name, "_jobs") == 0 ? CK_PLACE_JOBS : CK_PLACE_OTHER};
        if (strcmp(name, default_views(views_name)) == 0)
            return (CkNs){.kind = CK_NS_VIEWS};
        return (CkNs){.kind = CK_NS_LEGACY};
    }
    case CK_NS_STRUCT:
        if (ck_is_job_id(name, strlen(name)))
            return (CkNs){.kind = CK_NS_JOB,
                          .job = ck_intern(name),
                          .place =
                              parent.place == CK_PLACE_JOBS ? CK_PLACE_JOB_DIR : CK_PLACE_OTHER};
        return (CkNs){.kind = CK_NS_STRAY};
    case CK_NS_JOB: {
        CkPlace place = CK_PLACE_OTHER;
        uint64_t n;
        if (parent.place == CK_PLACE_JOB_DIR && ck_parse_checkpoint_name(name, strlen(name), &n))
            place = CK_PLACE_CHK_DIR;
        else if (parent.place == CK_PLACE_CHK_DIR && strcmp(name, "COMPLETED") == 0)
            place = CK_PLACE_MARKER;
        return (CkNs){.kind = CK_NS_JOB, .job = parent.job, .place = place};
    }
    case CK_NS_STRAY:
    case CK_NS_LEGACY:
    case CK_NS_VIEWS:
        break;
    }
    return parent;
}

CkNs ck_ns_child_of(CkNs parent, const char *name, bool is_dir, const char *views_name)
{
    if (parent.kind == CK_NS_STRUCT && !is_dir)
        return (CkNs){.kind = CK_NS_STRAY};
    return ck_ns_child(parent, name, views_name);
}

const char *ck_verdict_kind(CkVerdict v)
{
    switch (v) {
    case CK_ALLOW:
        return "allow";
    case CK_FOREIGN_WRITE:
        return "foreign-write";
    case CK_LEGACY_WRITE:
        return "legacy-write";
    case CK_OUTSIDE_NAMESPACE:
        return "outside-namespace";
    case CK_CROSS_NAMESPACE_RENAME:
        return "cross-namespace-rename";
    case CK_CROSS_NAMESPACE_LINK:
        return "cross-namespace-link";
    case CK_CROSS_NAMESPACE_SYMLINK:
        return "cross-namespace-symlink";
    case CK_ANONYMOUS_WRITE:
        return "anonymous-write";
    case CK_INVALID_IDENTITY:
        return "invalid-identity";
    case CK_VIEWS_READ_ONLY:
        return "views-read-only";
    }
    return "outside-namespace";
}

int ck_verdict_errno(CkVerdict v)
{
    if (v == CK_ALLOW)
        return 0;
    return v == CK_VIEWS_READ_ONLY ? EROFS : EACCES;
}

const char *ck_ns_owner(CkNs ns)
{
    return ns.kind == CK_NS_JOB ? ns.job : NULL;
}

CkVerdict ck_policy_write(const CkPolicy *p, const char *caller_job, CkNs target)
{
    if (target.kind == CK_NS_VIEWS)
        return CK_VIEWS_READ_ONLY;
    if (caller_job == CK_CALLER_INVALID)
        return CK_INVALID_IDENTITY;
    switch (target.kind) {
    case CK_NS_JOB:
        if (caller_job == NULL)
            return p->anonymous_deny ? CK_ANONYMOUS_WRITE : CK_ALLOW;
        return caller_job == target.job ? CK_ALLOW : CK_FOREIGN_WRITE;
    case CK_NS_LEGACY:
        return p->legacy_rw ? CK_ALLOW : CK_LEGACY_WRITE;
    case CK_NS_ROOT:
    case CK_NS_STRUCT:
    case CK_NS_STRAY:
    case CK_NS_VIEWS:
        break;
    }
    return CK_OUTSIDE_NAMESPACE;
}

/* Creating an entry of ns `child` directly in a structure directory. */
static CkVerdict create_in_structure(const CkPolicy *p, const char *caller_job, CkNs parent,
                                     CkNs child, bool is_dir)
{
    if (parent.kind == CK_NS_ROOT) {
        if (child.kind == CK_NS_STRUCT)
            return is_dir ? CK_ALLOW : CK_OUTSIDE_NAMESPACE;
        return ck_policy_write(p, caller_job, child); /* VIEWS or LEGACY */
    }
    /* parent is STRUCT: only a job's own directory */
    if (child.kind != CK_NS_JOB || !is_dir)
        return CK_OUTSIDE_NAMESPACE;
    return ck_policy_write(p, caller_job, child);
}

/* ck_ns_child; *out (when asked for) gets what the new entry is, of its
 * type (ck_ns_child_of: audit lets a refused entry be made). */
static CkNs child_of(CkNs parent, const char *name, bool is_dir, const char *views_name, CkNs *out)
{
    if (out)
        *out = ck_ns_child_of(parent, name, is_dir, views_name);
    return ck_ns_child(parent, name, views_name);
}

/* A rename's or link's two ends: views are read-only, an invalid caller
 * writes nowhere, and both ends must be in one namespace (else `cross`,
 * never EXDEV). */
static CkVerdict same_namespace(const char *caller_job, CkNs src, CkNs dst, CkVerdict cross)
{
    if (src.kind == CK_NS_VIEWS || dst.kind == CK_NS_VIEWS)
        return CK_VIEWS_READ_ONLY;
    if (caller_job == CK_CALLER_INVALID)
        return CK_INVALID_IDENTITY;
    return ck_ns_equal(src, dst) ? CK_ALLOW : cross;
}

CkVerdict ck_policy_create(const CkPolicy *p, const char *caller_job, CkNs parent, const char *name,
                           bool is_dir, const char *views_name, CkNs *child_out)
{
    CkNs child = child_of(parent, name, is_dir, views_name, child_out);
    if (caller_job == CK_CALLER_INVALID) /* not even the structure's mkdirs */
        return ck_policy_write(p, caller_job, child);
    if (ck_ns_is_structure(parent))
        return create_in_structure(p, caller_job, parent, child, is_dir);
    return ck_policy_write(p, caller_job, child);
}

CkVerdict ck_policy_rename(const CkPolicy *p, const char *caller_job, CkNs src, bool is_dir,
                           CkNs dst_parent, const char *name, const char *views_name, CkNs *dst_out)
{
    CkNs dst = child_of(dst_parent, name, is_dir, views_name, dst_out);
    CkVerdict v = same_namespace(caller_job, src, dst, CK_CROSS_NAMESPACE_RENAME);
    if (v != CK_ALLOW)
        return v;
    /* Removing the source entry is a write of its namespace; that also keeps
     * _state/_jobs themselves (STRUCT) from being renamed away. */
    v = ck_policy_write(p, caller_job, src);
    if (v != CK_ALLOW || !ck_ns_is_structure(dst_parent))
        return v;
    /* The name that appears directly in the root or in _state/_jobs follows
     * the create rules for the moved object's type: a same-job move such as
     * _jobs/J -> _state/J is allowed for a directory, never for a file. */
    return create_in_structure(p, caller_job, dst_parent, dst, is_dir);
}

CkVerdict ck_policy_link(const CkPolicy *p, const char *caller_job, CkNs src, CkNs dst_parent,
                         const char *name, const char *views_name, CkNs *dst_out)
{
    CkNs dst = child_of(dst_parent, name, false, views_name, dst_out);
    CkVerdict v = same_namespace(caller_job, src, dst, CK_CROSS_NAMESPACE_LINK);
    if (v != CK_ALLOW)
        return v;
    if (ck_ns_is_structure(dst_parent)) /* a link is never a directory */
        return create_in_structure(p, caller_job, dst_parent, dst, false);
    return ck_policy_write(p, caller_job, dst);
}

/* Lexical resolution only needs the first two components: the namespace of a
 * path is decided by them (ROOT -> STRUCT/VIEWS/LEGACY -> JOB/STRAY, then
 * inherited).  So a walk keeps a depth and those two components, and never
 * allocates. */
typedef struct {
    size_t depth;
    const char *c[2];
    size_t len[2];
} LexWalk;

static void walk_components(LexWalk *w, const char *s, size_t slen)
{
    const char *p = s, *end = s + slen;
    while (p < end) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        size_t l = slash ? (size_t)(slash - p) : (size_t)(end - p);
        if (l == 0 || (l == 1 && p[0] == '.')) {
            /* empty component or ".": nothing */
        } else if (l == 2 && p[0] == '.' && p[1] == '.') {
            if (w->depth > 0) /* ".." above the root stays at the root */
                w->depth--;
        } else {
            if (w->depth < 2) {
                w->c[w->depth] = p;
                w->len[w->depth] = l;
            }
            w->depth++;
        }
        p = slash ? slash + 1 : end;
    }
}

/* Whether a symlink in job `own`'s namespace may point where w landed. */
static bool landing_allowed(const LexWalk *w, const char *own, const char *views_name)
{
    if (w->depth == 0)
        return true; /* the mount root */
    if (is_struct_name(w->c[0], w->len[0])) {
        if (w->depth == 1 || !ck_is_job_id(w->c[1], w->len[1]))
            return true; /* _state, _jobs themselves, or a stray name */
        return w->len[1] == strlen(own) && memcmp(w->c[1], own, w->len[1]) == 0;
    }
    const char *views = default_views(views_name);
    if (w->len[0] == strlen(views) && memcmp(w->c[0], views, w->len[0]) == 0)
        return true; /* views are read-only: pointing there shares nothing writable */
    return false;    /* the legacy area */
}

CkVerdict ck_policy_symlink(const CkPolicy *p, const char *caller_job, CkNs parent,
                            const char *parent_path, const char *name, const char *target,
                            const char *views_name, CkNs *child_out)
{
    CkNs child;
    CkVerdict v = ck_policy_create(p, caller_job, parent, name, false, views_name, &child);
    if (child_out)
        *child_out = child;
    if (v != CK_ALLOW || child.kind != CK_NS_JOB)
        return v;
    LexWalk w = {0};
    if (target[0] != '/' && parent_path)
        walk_components(&w, parent_path, strlen(parent_path));
    walk_components(&w, target, strlen(target));
    return landing_allowed(&w, child.job, views_name) ? CK_ALLOW : CK_CROSS_NAMESPACE_SYMLINK;
}

/* ---- decisions ---- */

/* The verdicts are taken as with legacy=ro (a legacy write is a verdict
 * even with legacy=rw); anonymous= decides the verdict itself. */
static CkPolicy strict_of(const CkPolicy *p)
{
    return (CkPolicy){.anonymous_deny = p->anonymous_deny};
}

/* The mode applied to verdict v; owner: the namespace the record names. */
static CkDecision decide(const CkPolicy *p, CkVerdict v, CkNs owner, CkNs ns)
{
    CkDecision d = {.verdict = v, .ns = ns};
    if (v == CK_ALLOW || (p->off && v != CK_VIEWS_READ_ONLY)) {
        d.verdict = CK_ALLOW;
        d.proceed = true;
        return d;
    }
    if (v == CK_VIEWS_READ_ONLY) {
        d.err = EROFS; /* not a collision: nothing can reach the backing dir */
        return d;
    }
    d.record = true;
    d.owner_job = ck_ns_owner(owner);
    d.proceed = p->audit || (v == CK_LEGACY_WRITE && p->legacy_rw);
    d.err = d.proceed ? 0 : ck_verdict_errno(v);
    return d;
}

/* The end of a two-ended write (rename, link) a record names: the source's
 * job when that is not the caller's own, else the destination's. */
static CkNs owner_of_two(const char *caller_job, CkNs src, CkNs dst)
{
    const char *o = ck_ns_owner(src);
    return o && o != caller_job ? src : dst;
}

CkDecision ck_decide_write(const CkPolicy *p, const char *caller_job, CkNs target)
{
    CkPolicy strict = strict_of(p);
    return decide(p, ck_policy_write(&strict, caller_job, target), target, target);
}

CkDecision ck_decide_create(const CkPolicy *p, const char *caller_job, CkNs parent,
                            const char *name, bool is_dir, const char *views_name)
{
    CkNs child;
    CkPolicy strict = strict_of(p);
    CkVerdict v = ck_policy_create(&strict, caller_job, parent, name, is_dir, views_name, &child);
    return decide(p, v, child, child);
}

CkDecision ck_decide_rename(const CkPolicy *p, const char *caller_job, CkNs src, bool is_dir,
                            CkNs dst_parent, const char *name, const char *views_name)
{
    CkNs dst;
    CkPolicy strict = strict_of(p);
    CkVerdict v =
        ck_policy_rename(&strict, caller_job, src, is_dir, dst_parent, name, views_name, &dst);
    return decide(p, v, owner_of_two(caller_job, src, dst), dst);
}

CkDecision ck_decide_link(const CkPolicy *p, const char *caller_job, CkNs src, CkNs dst_parent,
                          const char *name, const char *views_name)
{
    CkNs dst;
    CkPolicy strict = strict_of(p);
    CkVerdict v = ck_policy_link(&strict, caller_job, src, dst_parent, name, views_name, &dst);
    return decide(p, v, owner_of_two(caller_job, src, dst), dst);
}

CkDecision ck_decide_symlink(const CkPolicy *p, const char *caller_job, CkNs parent,
                             const char *parent_path, const char *name, const char *target,
                             const char *views_name)
{
    CkNs child;
    CkPolicy strict = strict_of(p);
    CkVerdict v = ck_policy_symlink(&strict, caller_job, parent, parent_path, name, target,
                                    views_name, &child);
    return decide(p, v, child, child);
}
