/* core/policy.c against docs/DESIGN.md, "Namespaces and the write policy". */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "policy.h"
#include "intern.h"

static const CkPolicy ro = {.legacy_rw = false};
static const CkPolicy rw = {.legacy_rw = true};

/* The namespace of a '/'-separated path, walked from the root. */
static CkNs ns_of(const char *path)
{
    CkNs ns = ck_ns_root();
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    for (char **p = parts; *p; p++)
        if (**p)
            ns = ck_ns_child(ns, *p, "_views");
    return ns;
}

/* The namespace of the object at path, of its type (ck_ns_child_of). */
static CkNs ns_of_object(const char *path, bool is_dir)
{
    const char *slash = strrchr(path, '/');
    g_autofree char *parent = slash ? g_strndup(path, (gsize)(slash - path)) : g_strdup("");
    return ck_ns_child_of(ns_of(parent), slash ? slash + 1 : path, is_dir, "_views");
}

static const char *A, *B;

static int setup(void **st)
{
    (void)st;
    A = ck_intern("a");
    B = ck_intern("b");
    return 0;
}

static void test_ns_child(void **st)
{
    (void)st;
    CkNs root = ck_ns_root();
    assert_int_equal(root.kind, CK_NS_ROOT);
    assert_null(root.job);
    assert_int_equal(ck_ns_child(root, "_state", "_views").kind, CK_NS_STRUCT);
    assert_int_equal(ck_ns_child(root, "_jobs", "_views").kind, CK_NS_STRUCT);
    assert_int_equal(ck_ns_child(root, "_views", "_views").kind, CK_NS_VIEWS);
    assert_int_equal(ck_ns_child(root, "_views", "_v").kind, CK_NS_LEGACY);
    assert_int_equal(ck_ns_child(root, "_v", "_v").kind, CK_NS_VIEWS);
    assert_int_equal(ck_ns_child(root, "_views", NULL).kind, CK_NS_VIEWS);
    assert_int_equal(ck_ns_child(root, "v1", "_views").kind, CK_NS_LEGACY);
    assert_int_equal(ck_ns_child(root, "0", "_views").kind, CK_NS_LEGACY);
    assert_int_equal(ck_ns_child(root, "README", "_views").kind, CK_NS_LEGACY);
    assert_int_equal(ck_ns_child(root, "_statex", "_views").kind, CK_NS_LEGACY);

    CkNs st_dir = ck_ns_child(root, "_state", "_views");
    char buf[8] = "a";
    CkNs j = ck_ns_child(st_dir, buf, "_views");
    assert_int_equal(j.kind, CK_NS_JOB);
    assert_ptr_equal(j.job, A); /* interned: pointer equality */
    assert_true(ck_ns_equal(j, ns_of("_jobs/a")));
    assert_false(ck_ns_equal(j, ns_of("_state/b")));
    assert_int_equal(ck_ns_child(st_dir, ".tmp", "_views").kind, CK_NS_STRAY);
    assert_int_equal(ck_ns_child(st_dir, "a b", "_views").kind, CK_NS_STRAY);
    assert_null(ck_ns_child(st_dir, ".tmp", "_views").job);

    /* children inherit below the second level */
    assert_true(ck_ns_equal(ns_of("_state/a/v1/0/_state"), j));
    assert_true(ck_ns_equal(ns_of("_jobs/a/chk-1/COMPLETED"), j));
    assert_int_equal(ns_of("_state/.tmp/b").kind, CK_NS_STRAY);
    assert_int_equal(ns_of("v1/_state/b").kind, CK_NS_LEGACY);
    assert_int_equal(ns_of("_views/a/state").kind, CK_NS_VIEWS);
    assert_ptr_equal(ck_ns_owner(j), A);
    assert_null(ck_ns_owner(ns_of("v1")));
    assert_null(ck_ns_owner(root));
}

static void test_verdict_names(void **st)
{
    (void)st;
    const char *want[CK_VERDICT_COUNT] = {"allow",
                                          "foreign-write",
                                          "legacy-write",
                                          "outside-namespace",
                                          "cross-namespace-rename",
                                          "cross-namespace-link",
                                          "cross-namespace-symlink",
                                          "anonymous-write",
                                          "invalid-identity",
                                          "views-read-only"};
    for (int v = 0; v < CK_VERDICT_COUNT; v++)
        assert_string_equal(ck_verdict_kind((CkVerdict)v), want[v]);
    assert_int_equal(ck_verdict_errno(CK_ALLOW), 0);
    assert_int_equal(ck_verdict_errno(CK_VIEWS_READ_ONLY), EROFS);
    for (int v = 1; v < CK_VIEWS_READ_ONLY; v++)
        assert_int_equal(ck_verdict_errno((CkVerdict)v), EACCES);
}

static void test_write(void **st)
{
    (void)st;
    CkNs ja = ns_of("_state/a/v1/0/f");
    assert_int_equal(ck_policy_write(&ro, NULL, ja), CK_ALLOW);
    assert_int_equal(ck_policy_write(&ro, A, ja), CK_ALLOW);
    assert_int_equal(ck_policy_write(&ro, B, ja), CK_FOREIGN_WRITE);
    assert_int_equal(ck_policy_write(&ro, B, ns_of("_jobs/a/chk-1/COMPLETED")), CK_FOREIGN_WRITE);
    /* a non-interned copy of "a" is another pointer: callers must intern */
    assert_int_equal(ck_policy_write(&ro, A, ns_of("_jobs/a")), CK_ALLOW);

    CkNs leg = ns_of("v1/0/checkpoint-1.snap");
    assert_int_equal(ck_policy_write(&ro, NULL, leg), CK_LEGACY_WRITE);
    assert_int_equal(ck_policy_write(&ro, A, leg), CK_LEGACY_WRITE);
    assert_int_equal(ck_policy_write(&rw, NULL, leg), CK_ALLOW);
    assert_int_equal(ck_policy_write(&rw, A, leg), CK_ALLOW);

    assert_int_equal(ck_policy_write(&rw, NULL, ck_ns_root()), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(ck_policy_write(&rw, NULL, ns_of("_state")), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(ck_policy_write(&rw, NULL, ns_of("_jobs")), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(ck_policy_write(&rw, NULL, ns_of("_state/.x/y")), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(ck_policy_write(&rw, A, ns_of("_state/.x")), CK_OUTSIDE_NAMESPACE);

    assert_int_equal(ck_policy_write(&rw, NULL, ns_of("_views/a/state")), CK_VIEWS_READ_ONLY);
    assert_int_equal(ck_policy_write(&rw, A, ns_of("_views")), CK_VIEWS_READ_ONLY);
}

static CkVerdict create(const CkPolicy *p, const char *caller, const char *parent, const char *name,
                        bool dir)
{
    CkNs child;
    CkVerdict v = ck_policy_create(p, caller, ns_of(parent), name, dir, "_views", &child);
    g_autofree char *path = *parent ? g_strconcat(parent, "/", name, NULL) : g_strdup(name);
    assert_true(ck_ns_equal(child, ns_of_object(path, dir)));
    return v;
}

static void test_create_at_root(void **st)
{
    (void)st;
    assert_int_equal(create(&ro, NULL, "", "_state", true), CK_ALLOW);
    assert_int_equal(create(&ro, A, "", "_jobs", true), CK_ALLOW);
    assert_int_equal(create(&ro, NULL, "", "_state", false), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(create(&rw, NULL, "", "_jobs", false), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(create(&rw, NULL, "", "_views", true), CK_VIEWS_READ_ONLY);
    assert_int_equal(create(&ro, NULL, "", "v1", true), CK_LEGACY_WRITE);
    assert_int_equal(create(&ro, A, "", "notes.txt", false), CK_LEGACY_WRITE);
    assert_int_equal(create(&rw, NULL, "", "v1", true), CK_ALLOW);
    assert_int_equal(create(&rw, A, "", "0", false), CK_ALLOW);
}

static void test_create_in_structure(void **st)
{
    (void)st;
    assert_int_equal(create(&ro, NULL, "_state", "a", true), CK_ALLOW);
    assert_int_equal(create(&ro, A, "_state", "a", true), CK_ALLOW);
    assert_int_equal(create(&ro, A, "_jobs", "a", true), CK_ALLOW);
    assert_int_equal(create(&ro, B, "_state", "a", true), CK_FOREIGN_WRITE);
    assert_int_equal(create(&ro, NULL, "_state", "a", false), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(create(&ro, A, "_jobs", "a", false), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(create(&rw, NULL, "_state", ".tmp", true), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(create(&rw, NULL, "_jobs", "bad name", false), CK_OUTSIDE_NAMESPACE);
}

static void test_create_below(void **st)
{
    (void)st;
    assert_int_equal(create(&ro, NULL, "_state/a/v1", "0", true), CK_ALLOW);
    assert_int_equal(create(&ro, A, "_state/a/v1/0", "f.tmp", false), CK_ALLOW);
    assert_int_equal(create(&ro, B, "_state/a/v1/0", "f.tmp", false), CK_FOREIGN_WRITE);
    assert_int_equal(create(&ro, B, "_jobs/a", "chk-3", true), CK_FOREIGN_WRITE);
    assert_int_equal(create(&ro, NULL, "v1/0", "f", false), CK_LEGACY_WRITE);
    assert_int_equal(create(&rw, B, "v1/0", "f", false), CK_ALLOW);
    assert_int_equal(create(&rw, NULL, "_state/.tmp", "f", false), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(create(&rw, NULL, "_views/a", "f", false), CK_VIEWS_READ_ONLY);
    assert_int_equal(create(&rw, NULL, "_views", "a", true), CK_VIEWS_READ_ONLY);
}

static CkVerdict ren(const CkPolicy *p, const char *caller, const char *src, const char *dparent,
                     const char *name)
{
    CkNs dst;
    CkVerdict v =
        ck_policy_rename(p, caller, ns_of(src), true, ns_of(dparent), name, "_views", &dst);
    g_autofree char *path = *dparent ? g_strconcat(dparent, "/", name, NULL) : g_strdup(name);
    assert_true(ck_ns_equal(dst, ns_of(path)));
    return v;
}

static void test_rename(void **st)
{
    (void)st;
    /* the clink commit: tmp -> snap inside one job */
    assert_int_equal(ren(&ro, A, "_state/a/v1/0/c.tmp", "_state/a/v1/0", "c.snap"), CK_ALLOW);
    assert_int_equal(ren(&ro, NULL, "_state/a/v1/0/c.tmp", "_state/a/v1/0", "c.snap"), CK_ALLOW);
    /* job a renaming inside job b: a foreign write */
    assert_int_equal(ren(&ro, A, "_state/b/v1/0/c.tmp", "_state/b/v1/0", "c.snap"),
                     CK_FOREIGN_WRITE);
    /* across jobs, even anonymous */
    assert_int_equal(ren(&ro, NULL, "_state/a/f", "_state/b", "f"), CK_CROSS_NAMESPACE_RENAME);
    assert_int_equal(ren(&ro, A, "_state/a/f", "_state/b", "f"), CK_CROSS_NAMESPACE_RENAME);
    assert_int_equal(ren(&ro, NULL, "_state/a", "_state", "b"), CK_CROSS_NAMESPACE_RENAME);
    assert_int_equal(ren(&ro, NULL, "_state/.tmp", "_state", "a"), CK_CROSS_NAMESPACE_RENAME);
    /* job <-> legacy, both directions, legacy=rw too */
    assert_int_equal(ren(&rw, NULL, "v1/0/f", "_state/a/v1/0", "f"), CK_CROSS_NAMESPACE_RENAME);
    assert_int_equal(ren(&rw, A, "_state/a/v1", "", "v1"), CK_CROSS_NAMESPACE_RENAME);
    /* structure */
    assert_int_equal(ren(&rw, NULL, "_jobs", "", "_state"), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(ren(&rw, NULL, "_state/.a", "_state", ".b"), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(ren(&rw, NULL, "_state/.a/x", "_jobs/.b", "x"), CK_OUTSIDE_NAMESPACE);
    /* same job across _jobs/_state: one namespace */
    assert_int_equal(ren(&ro, A, "_jobs/a", "_state", "a"), CK_ALLOW);
    assert_int_equal(ren(&ro, B, "_jobs/a", "_state", "a"), CK_FOREIGN_WRITE);
    /* a job's root is a directory: a file moved there is outside every
     * namespace, and is so afterwards */
    CkNs moved;
    assert_int_equal(
        ck_policy_rename(&ro, A, ns_of("_jobs/a/x"), false, ns_of("_state"), "a", "_views", &moved),
        CK_OUTSIDE_NAMESPACE);
    assert_int_equal(moved.kind, CK_NS_STRAY);
    /* an object's own namespace: a file directly in _state or _jobs is
     * none, whatever its name */
    assert_int_equal(ck_ns_child_of(ns_of("_state"), "a", false, "_views").kind, CK_NS_STRAY);
    assert_int_equal(ck_ns_child_of(ns_of("_jobs"), "a", false, "_views").kind, CK_NS_STRAY);
    assert_string_equal(ck_ns_child_of(ns_of("_state"), "a", true, "_views").job, "a");
    assert_string_equal(ck_ns_child_of(ns_of("_state/a"), "f", false, "_views").job, "a");
    /* legacy at the root */
    assert_int_equal(ren(&ro, NULL, "v1", "", "v2"), CK_LEGACY_WRITE);
    assert_int_equal(ren(&rw, NULL, "v1", "", "v2"), CK_ALLOW);
    assert_int_equal(ren(&rw, A, "v1/0/a", "v2/0", "a"), CK_ALLOW);
    /* views at either end */
    assert_int_equal(ren(&rw, NULL, "_views/a/state/f", "_state/a", "f"), CK_VIEWS_READ_ONLY);
    assert_int_equal(ren(&rw, NULL, "_state/a/f", "_views/a", "f"), CK_VIEWS_READ_ONLY);
    assert_int_equal(ren(&rw, NULL, "v1", "", "_views"), CK_VIEWS_READ_ONLY);
    assert_int_equal(ren(&rw, NULL, "_views/a", "_views", "b"), CK_VIEWS_READ_ONLY);
}

static CkVerdict lnk(const CkPolicy *p, const char *caller, const char *src, const char *dparent,
                     const char *name)
{
    CkNs dst;
    CkVerdict v = ck_policy_link(p, caller, ns_of(src), ns_of(dparent), name, "_views", &dst);
    g_autofree char *path = *dparent ? g_strconcat(dparent, "/", name, NULL) : g_strdup(name);
    assert_true(ck_ns_equal(dst, ns_of_object(path, false)));
    return v;
}

static void test_link(void **st)
{
    (void)st;
    assert_int_equal(lnk(&ro, A, "_state/a/v1/0/f", "_state/a/v2/0", "f"), CK_ALLOW);
    assert_int_equal(lnk(&ro, NULL, "_state/a/f", "_state/a", "g"), CK_ALLOW);
    assert_int_equal(lnk(&ro, B, "_state/a/f", "_state/a", "g"), CK_FOREIGN_WRITE);
    assert_int_equal(lnk(&ro, NULL, "_state/a/f", "_state/b", "f"), CK_CROSS_NAMESPACE_LINK);
    assert_int_equal(lnk(&rw, NULL, "v1/0/f", "_state/a", "f"), CK_CROSS_NAMESPACE_LINK);
    assert_int_equal(lnk(&rw, NULL, "_state/a/f", "v1", "f"), CK_CROSS_NAMESPACE_LINK);
    assert_int_equal(lnk(&ro, NULL, "v1/f", "v2", "f"), CK_LEGACY_WRITE);
    assert_int_equal(lnk(&rw, NULL, "v1/f", "v2", "f"), CK_ALLOW);
    assert_int_equal(lnk(&rw, NULL, "v1/f", "", "f"), CK_ALLOW);
    assert_int_equal(lnk(&ro, NULL, "v1/f", "", "f"), CK_LEGACY_WRITE);
    /* a link directly in _state/_jobs is never a job directory */
    assert_int_equal(lnk(&ro, A, "_state/a/f", "_state", "a"), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(lnk(&ro, NULL, "_state/.x/f", "_state", ".y"), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(lnk(&rw, NULL, "_state/a/f", "_views/a", "f"), CK_VIEWS_READ_ONLY);
    assert_int_equal(lnk(&rw, NULL, "_views/a/f", "_state/a", "f"), CK_VIEWS_READ_ONLY);
}

static CkVerdict sym(const CkPolicy *p, const char *caller, const char *parent, const char *target)
{
    CkNs child;
    CkVerdict v =
        ck_policy_symlink(p, caller, ns_of(parent), parent, "l", target, "_views", &child);
    g_autofree char *path = *parent ? g_strconcat(parent, "/l", NULL) : g_strdup("l");
    assert_true(ck_ns_equal(child, ns_of_object(path, false)));
    return v;
}

static void test_symlink(void **st)
{
    (void)st;
    const char *d = "_state/a/v1/0";
    assert_int_equal(sym(&ro, A, d, "checkpoint-1.snap"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "../../v2/0/x"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "../../../a/v1"), CK_ALLOW);
    assert_int_equal(sym(&ro, NULL, d, "/_state/a/v3"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "/_jobs/a/chk-1/COMPLETED"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "../../../../_jobs/a"), CK_ALLOW);
    /* into another job: relative across, absolute */
    assert_int_equal(sym(&ro, A, d, "../../../b/v1/0/f"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, NULL, d, "../../../b"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, A, d, "/_state/b/v1"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, A, d, "/_jobs/b/chk-1/COMPLETED"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, A, d, "//_state//./b/"), CK_CROSS_NAMESPACE_SYMLINK);
    /* into legacy */
    assert_int_equal(sym(&ro, A, d, "/v1/0/f"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, A, d, "../../../../v1/0"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, A, d, "../../../../README"), CK_CROSS_NAMESPACE_SYMLINK);
    /* ".." above the root stays at the root */
    assert_int_equal(sym(&ro, A, d, "../../../../../../../../.."), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "../../../../../../v1"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, A, d, "/../../_state/b"), CK_CROSS_NAMESPACE_SYMLINK);
    assert_int_equal(sym(&ro, A, d, "/../../_state/a/x"), CK_ALLOW);
    /* popping back below the job level and going elsewhere */
    assert_int_equal(sym(&ro, A, d, "../../../b/../a/x"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "../../../a/../b/x"), CK_CROSS_NAMESPACE_SYMLINK);
    /* structure, stray, views: allowed */
    assert_int_equal(sym(&ro, A, d, "/"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "../../.."), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "/_state/.tmp/x"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "/_views/b/state"), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, "./././."), CK_ALLOW);
    assert_int_equal(sym(&ro, A, d, ""), CK_ALLOW);
    /* the create check comes first */
    assert_int_equal(sym(&ro, B, d, "x"), CK_FOREIGN_WRITE);
    assert_int_equal(sym(&ro, NULL, "_state", "a"), CK_OUTSIDE_NAMESPACE);
    assert_int_equal(sym(&ro, NULL, "_views/a", "x"), CK_VIEWS_READ_ONLY);
    assert_int_equal(sym(&ro, NULL, "v1", "/_state/b"), CK_LEGACY_WRITE);
    /* outside job namespaces the target is not checked */
    assert_int_equal(sym(&rw, NULL, "v1", "/_state/b"), CK_ALLOW);
    assert_int_equal(sym(&rw, NULL, "", "_state/b"), CK_ALLOW);
    /* a long hostile target */
    GString *t = g_string_new(NULL);
    for (int i = 0; i < 1000; i++)
        g_string_append(t, "x/../");
    g_string_append(t, "../../../b");
    assert_int_equal(sym(&ro, A, d, t->str), CK_CROSS_NAMESPACE_SYMLINK);
    g_string_free(t, TRUE);
}

/* The ns of a path from the root, one component after another. */
static CkNs ns_of_path(const char *path)
{
    CkNs ns = ck_ns_root();
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    for (char **p = parts; *p; p++)
        ns = ck_ns_child(ns, *p, "_views");
    return ns;
}

/* "Is this a marker?" has one answer: _jobs/<J>/chk-<N>/COMPLETED, N canonical. */
static void test_ns_marker_place(void **state)
{
    (void)state;
    assert_true(ck_ns_is_marker(ns_of_path("_jobs/j/chk-1/COMPLETED")));
    assert_true(ck_ns_is_marker(ns_of_path("_jobs/j/chk-0/COMPLETED")));
    assert_false(ck_ns_is_marker(ns_of_path("_jobs/j/chk-01/COMPLETED")));
    assert_false(ck_ns_is_marker(ns_of_path("_state/j/chk-1/COMPLETED")));
    assert_false(ck_ns_is_marker(ns_of_path("_jobs/j/x/chk-1/COMPLETED")));
    assert_false(ck_ns_is_marker(ns_of_path("_jobs/j/chk-1/COMPLETED.tmp")));
    assert_false(ck_ns_is_marker(ns_of_path("v1/chk-1/COMPLETED")));
    assert_true(ck_ns_in_catalog(ns_of_path("_jobs/j")));
    assert_true(ck_ns_in_catalog(ns_of_path("_jobs/j/chk-7")));
    assert_false(ck_ns_in_catalog(ns_of_path("_state/j")));
    assert_false(ck_ns_in_catalog(ns_of_path("_jobs/j/other")));
    /* the place does not change what may be written */
    CkNs m = ns_of_path("_jobs/j/chk-1/COMPLETED");
    assert_int_equal(m.kind, CK_NS_JOB);
    assert_string_equal(m.job, "j");
}

/* One decision per write: the mode decides whether it goes on and whether
 * it is recorded, and as whose. */
static void test_decide_modes(void **state)
{
    (void)state;
    const char *A = ck_intern("a");
    CkPolicy enforce = {0}, audit = {.audit = true}, rw = {.legacy_rw = true}, off = {.off = true};
    CkNs b = ns_of_path("_state/b/x"), legacy = ns_of_path("v1/0"), view = ns_of_path("_views/a");

    CkDecision d = ck_decide_write(&enforce, A, b);
    assert_int_equal(d.verdict, CK_FOREIGN_WRITE);
    assert_false(d.proceed);
    assert_int_equal(d.err, EACCES);
    assert_true(d.record);
    assert_string_equal(d.owner_job, "b");
    d = ck_decide_write(&audit, A, b);
    assert_true(d.proceed && d.record);
    d = ck_decide_write(&off, A, b);
    assert_true(d.proceed);
    assert_false(d.record);
    /* legacy=rw: the legacy write goes on and is still recorded */
    d = ck_decide_write(&rw, NULL, legacy);
    assert_int_equal(d.verdict, CK_LEGACY_WRITE);
    assert_true(d.proceed && d.record);
    assert_null(d.owner_job);
    d = ck_decide_write(&enforce, NULL, legacy);
    assert_false(d.proceed);
    /* the views: EROFS in every mode, never a record */
    CkPolicy modes[] = {enforce, audit, rw, off};
    for (size_t i = 0; i < G_N_ELEMENTS(modes); i++) {
        d = ck_decide_write(&modes[i], NULL, view);
        assert_false(d.proceed);
        assert_int_equal(d.err, EROFS);
        assert_false(d.record);
    }
    /* a rename out of b's namespace by a names b; the moved entry's ns */
    d = ck_decide_rename(&enforce, A, ns_of_path("_state/b/f"), false, ns_of_path("_state/a"), "f",
                         "_views");
    assert_int_equal(d.verdict, CK_CROSS_NAMESPACE_RENAME);
    assert_string_equal(d.owner_job, "b");
    d = ck_decide_rename(&enforce, A, ns_of_path("_jobs/a/chk-1/tmp"), false,
                         ns_of_path("_jobs/a/chk-1"), "COMPLETED", "_views");
    assert_true(d.proceed);
    assert_true(ck_ns_is_marker(d.ns));
    /* a create's child ns, refused or not */
    d = ck_decide_create(&enforce, A, ns_of_path("_state/b"), "f", false, "_views");
    assert_false(d.proceed);
    assert_string_equal(d.ns.job, "b");
}

/* anonymous=deny: an anonymous caller writes in no job's namespace (the
 * legacy area and the structure keep their own rules); a job still writes
 * its own. */
static void test_anonymous_deny(void **state)
{
    (void)state;
    CkPolicy deny = {.anonymous_deny = true}, deny_rw = {.anonymous_deny = true, .legacy_rw = true};
    CkNs ja = ns_of("_state/a/v1/0/f");
    assert_int_equal(ck_policy_write(&deny, NULL, ja), CK_ANONYMOUS_WRITE);
    assert_int_equal(ck_policy_write(&deny, A, ja), CK_ALLOW);
    assert_int_equal(ck_policy_write(&deny, B, ja), CK_FOREIGN_WRITE);
    assert_int_equal(ck_policy_write(&deny, NULL, ns_of("v1/0/f")), CK_LEGACY_WRITE);
    assert_int_equal(ck_policy_write(&deny_rw, NULL, ns_of("v1/0/f")), CK_ALLOW);
    assert_int_equal(ck_policy_write(&deny, NULL, ns_of("_views/a")), CK_VIEWS_READ_ONLY);
    /* mkdir _state/a by nobody: a job's namespace, refused; _state itself stays allowed */
    assert_int_equal(ck_policy_create(&deny, NULL, ns_of("_state"), "a", true, "_views", NULL),
                     CK_ANONYMOUS_WRITE);
    assert_int_equal(ck_policy_create(&deny, NULL, ck_ns_root(), "_state", true, "_views", NULL),
                     CK_ALLOW);
    assert_int_equal(ck_policy_rename(&deny, NULL, ns_of("_state/a/x"), false, ns_of("_state/a"),
                                      "y", "_views", NULL),
                     CK_ANONYMOUS_WRITE);
    /* decided: refused and recorded as a's, or in audit mode let through */
    CkDecision d = ck_decide_write(&deny, NULL, ja);
    assert_int_equal(d.verdict, CK_ANONYMOUS_WRITE);
    assert_false(d.proceed);
    assert_int_equal(d.err, EACCES);
    assert_true(d.record);
    assert_string_equal(d.owner_job, "a");
    CkPolicy audit = {.anonymous_deny = true, .audit = true};
    d = ck_decide_write(&audit, NULL, ja);
    assert_true(d.proceed && d.record);
    /* anonymous=allow (the default): allowed, nothing recorded */
    CkPolicy allow = {0};
    d = ck_decide_write(&allow, NULL, ja);
    assert_true(d.proceed);
    assert_false(d.record);
}

/* A caller whose identity is not a valid job id writes nowhere: no job's
 * namespace, not the legacy area even with legacy=rw, not the structure's
 * mkdirs; the views stay EROFS. */
static void test_invalid_identity(void **state)
{
    (void)state;
    const char *I = CK_CALLER_INVALID;
    CkPolicy rw_allow = {.legacy_rw = true};
    assert_int_equal(ck_policy_write(&rw_allow, I, ns_of("_state/a/f")), CK_INVALID_IDENTITY);
    assert_int_equal(ck_policy_write(&rw_allow, I, ns_of("v1/0/f")), CK_INVALID_IDENTITY);
    assert_int_equal(ck_policy_write(&rw_allow, I, ck_ns_root()), CK_INVALID_IDENTITY);
    assert_int_equal(ck_policy_write(&rw_allow, I, ns_of("_views/a")), CK_VIEWS_READ_ONLY);
    assert_int_equal(ck_policy_create(&rw_allow, I, ck_ns_root(), "_state", true, "_views", NULL),
                     CK_INVALID_IDENTITY);
    assert_int_equal(ck_policy_create(&rw_allow, I, ns_of("_state"), "a", true, "_views", NULL),
                     CK_INVALID_IDENTITY);
    assert_int_equal(ck_policy_create(&rw_allow, I, ns_of("_views"), "x", false, "_views", NULL),
                     CK_VIEWS_READ_ONLY);
    /* within one namespace and across: invalid first (views apart) */
    assert_int_equal(ck_policy_rename(&rw_allow, I, ns_of("_state/a/x"), false, ns_of("_state/a"),
                                      "y", "_views", NULL),
                     CK_INVALID_IDENTITY);
    assert_int_equal(ck_policy_rename(&rw_allow, I, ns_of("_state/a/x"), false, ns_of("_state/b"),
                                      "y", "_views", NULL),
                     CK_INVALID_IDENTITY);
    assert_int_equal(ck_policy_rename(&rw_allow, I, ns_of("_views/a"), false, ns_of("_state/b"),
                                      "y", "_views", NULL),
                     CK_VIEWS_READ_ONLY);
    assert_int_equal(
        ck_policy_link(&rw_allow, I, ns_of("_state/a/x"), ns_of("_state/a"), "y", "_views", NULL),
        CK_INVALID_IDENTITY);
    assert_int_equal(
        ck_policy_symlink(&rw_allow, I, ns_of("_state/a"), "_state/a", "l", "x", "_views", NULL),
        CK_INVALID_IDENTITY);
    /* never mistaken for a job: not even a job named like its text */
    assert_ptr_not_equal(ck_intern("(invalid identity)"), I);
    CkDecision d = ck_decide_write(&rw_allow, I, ns_of("v1/0/f"));
    assert_int_equal(d.verdict, CK_INVALID_IDENTITY);
    assert_false(d.proceed);
    assert_true(d.record);
    CkPolicy audit = {.audit = true};
    d = ck_decide_create(&audit, I, ns_of("_state/b"), "f", false, "_views");
    assert_int_equal(d.verdict, CK_INVALID_IDENTITY);
    assert_true(d.proceed && d.record);
    assert_string_equal(d.owner_job, "b");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anonymous_deny),
        cmocka_unit_test(test_invalid_identity),
        cmocka_unit_test(test_ns_child),
        cmocka_unit_test(test_ns_marker_place),
        cmocka_unit_test(test_decide_modes),
        cmocka_unit_test(test_verdict_names),
        cmocka_unit_test(test_write),
        cmocka_unit_test(test_create_at_root),
        cmocka_unit_test(test_create_in_structure),
        cmocka_unit_test(test_create_below),
        cmocka_unit_test(test_rename),
        cmocka_unit_test(test_link),
        cmocka_unit_test(test_symlink),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
