/* core/catalog.c: jobs, hazards of each kind, shared_with, the unused
 * report, view layers, the restore text, rescans and snapshots. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "intern.h"
#include "testfs.h"

typedef struct {
    char *dir;
    CkCatalogOptions opts;
} Fx;

static int setup(void **state)
{
    Fx *fx = g_new0(Fx, 1);
    fx->dir = testfs_tmpdir("ck-catalog-XXXXXX");
    fx->opts.views_name = "_views";
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    Fx *fx = *state;
    testfs_remove(fx->dir);
    g_free(fx->dir);
    g_free(fx);
    return 0;
}

static CkCatalog *open_cat(Fx *fx)
{
    g_autoptr(GError) err = NULL;
    CkCatalog *c = ck_catalog_open(fx->dir, &fx->opts, &err);
    assert_non_null(c);
    return c;
}

/* The record's setting: two legacy jobs sharing v1/, two namespaced jobs,
 * one of which restores from the other's root, a cut-short marker, a
 * malformed one, an orphan root and names that are not jobs. */
static void build_mixed(Fx *fx)
{
    testfs_put(fx->dir, "v1/0/checkpoint-1.snap", "legacy state 0");
    testfs_put(fx->dir, "v1/1/checkpoint-1.snap", "legacy state 1");
    testfs_put(fx->dir, "v2/0/checkpoint-9.snap", "nobody reads v2"); /* unread legacy generation */
    testfs_put(fx->dir, "7/data", "older layout, unread");
    testfs_marker(fx->dir, "ins1", 1, "checkpoint=1\ngeneration=1\nparticipants=0,1\n");
    testfs_marker(fx->dir, "ins2", 1, "checkpoint=1\ngeneration=1\nparticipants=0\n");
    /* a: namespaced in v1, then v2 (v0 left behind) */
    testfs_put(fx->dir, "_state/a/v0/0/checkpoint-0.snap.tmp", "abandoned");
    testfs_put(fx->dir, "_state/a/v1/0/checkpoint-1.snap", "a1");
    testfs_put(fx->dir, "_state/a/v2/0/checkpoint-2.snap", "a22");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "a", 2, "generation=2\nparticipants=0\nstate=_state/a\nowner=team-x\n");
    /* b restores from a's root: foreign */
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    /* c: a cut-short marker with an own root, and a malformed one */
    testfs_put(fx->dir, "_state/c/v3/0/s", "c");
    testfs_marker(fx->dir, "c", 1, "checkpoint=1\ngeneration=3\n");
    testfs_marker(fx->dir, "c", 2, "generation=3\ngeneration=4\n");
    /* an orphan root, names that are not jobs */
    testfs_mkdir(fx->dir, "_state/orphan/v1/0");
    testfs_mkdir(fx->dir, "_jobs/.hidden");
    testfs_mkdir(fx->dir, "_state/bad name");
    testfs_put(fx->dir, "_jobs/afile", "not a directory");
}

static const CkHazard *find_hazard(GPtrArray *hz, const char *kind, const char *path)
{
    for (guint i = 0; i < hz->len; i++) {
        const CkHazard *h = hz->pdata[i];
        if (strcmp(h->kind, kind) == 0 && (!path || strcmp(h->path, path) == 0))
            return h;
    }
    return NULL;
}

static guint count_kind(GPtrArray *hz, const char *kind)
{
    guint n = 0;
    for (guint i = 0; i < hz->len; i++)
        n += strcmp(((CkHazard *)hz->pdata[i])->kind, kind) == 0;
    return n;
}

static const CkCheckpointInfo *cp_of(const CkJobInfo *j, uint64_t n)
{
    for (guint i = 0; i < j->checkpoints->len; i++)
        if (((CkCheckpointInfo *)j->checkpoints->pdata[i])->n == n)
            return j->checkpoints->pdata[i];
    return NULL;
}

static void jobs_and_snapshots(void **state)
{
    Fx *fx = *state;
    build_mixed(fx);
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(GPtrArray) names = ck_catalog_job_names(c);
    const char *want[] = {"a", "b", "c", "ins1", "ins2", "orphan"};
    assert_int_equal(names->len, G_N_ELEMENTS(want));
    for (guint i = 0; i < names->len; i++) {
        assert_string_equal(names->pdata[i], want[i]);
        assert_ptr_equal(names->pdata[i], ck_intern(want[i]));
    }
    assert_int_equal(ck_catalog_n_jobs(c), 6);
    assert_int_equal(ck_catalog_n_markers(c), 7);

    g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, "a");
    assert_non_null(a);
    assert_int_equal(a->checkpoints->len, 2);
    assert_true(a->has_latest);
    assert_int_equal(a->latest, 2);
    assert_string_equal(a->layout, "namespaced");
    assert_true(a->has_markers_dir);
    assert_true(a->has_own_root);
    const CkCheckpointInfo *a2 = cp_of(a, 2);
    assert_int_equal(a2->unknown->len, 1);
    assert_string_equal(((CkMarkerKv *)a2->unknown->pdata[0])->key, "owner");

    g_autoptr(CkJobInfo) ins1 = ck_catalog_get_job(c, "ins1");
    assert_string_equal(ins1->layout, "legacy");
    assert_false(ins1->has_own_root);
    g_autoptr(CkJobInfo) cj = ck_catalog_get_job(c, "c");
    assert_true(cj->has_latest);
    assert_int_equal(cj->latest, 1); /* chk-2 is malformed */
    g_autoptr(CkJobInfo) orphan = ck_catalog_get_job(c, "orphan");
    assert_int_equal(orphan->checkpoints->len, 0);
    assert_false(orphan->has_latest);
    assert_string_equal(orphan->layout, "namespaced"); /* _state/orphan, no marker */
    assert_null(ck_catalog_get_job(c, "nope"));
    assert_null(ck_catalog_get_job(c, ".hidden"));

    /* bytes: regular files its restorable markers read, st_size */
    assert_int_equal(ck_catalog_job_bytes(c, a), strlen("a1") + strlen("a22"));
    assert_int_equal(ck_catalog_job_bytes(c, ins1),
                     strlen("legacy state 0") + strlen("legacy state 1"));
}

static void mixed_layout(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0");
    testfs_mkdir(fx->dir, "_state/m/v2/0");
    testfs_marker(fx->dir, "m", 1, "generation=1\nparticipants=0\n");
    testfs_marker(fx->dir, "m", 2, "generation=2\nparticipants=0\nstate=_state/m\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) m = ck_catalog_get_job(c, "m");
    assert_string_equal(m->layout, "mixed");
}

static void hazards_of_each_kind(void **state)
{
    Fx *fx = *state;
    build_mixed(fx);
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(GPtrArray) hz = ck_catalog_hazards(c);
    for (guint i = 0; i < hz->len; i++) {
        const CkHazard *h = hz->pdata[i];
        print_message("%s %s: %s\n", h->kind, h->path, h->detail);
    }
    /* shared-location: both legacy jobs read generation 1 of the directory
     * (v1); a and b read generation 1 of _state/a */
    const CkHazard *s = find_hazard(hz, "shared-location", "v1");
    assert_non_null(s);
    assert_true(s->collision);
    assert_int_equal(s->jobs->len, 2);
    assert_string_equal(s->jobs->pdata[0], "ins1");
    assert_string_equal(s->jobs->pdata[1], "ins2");
    assert_null(find_hazard(hz, "shared-location", "v1/0")); /* one hazard per location */
    const CkHazard *sa = find_hazard(hz, "shared-location", "_state/a/v1");
    assert_non_null(sa);
    assert_string_equal(sa->jobs->pdata[0], "a");
    assert_string_equal(sa->jobs->pdata[1], "b");
    /* foreign-root */
    const CkHazard *f = find_hazard(hz, "foreign-root", "_jobs/b/chk-1/COMPLETED");
    assert_non_null(f);
    assert_true(f->collision);
    assert_string_equal(f->jobs->pdata[0], "b");
    assert_string_equal(f->jobs->pdata[1], "a");
    /* malformed, cut-short: not collisions */
    const CkHazard *m = find_hazard(hz, "malformed", "_jobs/c/chk-2/COMPLETED");
    assert_non_null(m);
    assert_false(m->collision);
    assert_non_null(strstr(m->detail, "line 2"));
    const CkHazard *cs = find_hazard(hz, "cut-short", "_jobs/c/chk-1/COMPLETED");
    assert_non_null(cs);
    assert_false(cs->collision);
    /* orphan-root, not-a-job */
    const CkHazard *o = find_hazard(hz, "orphan-root", "_state/orphan");
    assert_non_null(o);
    assert_false(o->collision);
    assert_non_null(find_hazard(hz, "not-a-job", "_jobs/.hidden"));
    assert_non_null(find_hazard(hz, "not-a-job", "_state/bad name"));
    assert_non_null(find_hazard(hz, "not-a-job", "_jobs/afile"));
    assert_int_equal(count_kind(hz, "not-a-job"), 3);
    assert_int_equal(count_kind(hz, "shared-location"), 2);
    assert_int_equal(count_kind(hz, "foreign-root"), 1);
    /* stable order: kind, then path */
    for (guint i = 1; i < hz->len; i++) {
        const CkHazard *p = hz->pdata[i - 1], *q = hz->pdata[i];
        if (strcmp(p->kind, q->kind) == 0)
            assert_true(strcmp(p->path, q->path) < 0);
    }
}

static void clean_directory_has_no_hazards(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/b/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=0\nstate=_state/b\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(GPtrArray) hz = ck_catalog_hazards(c);
    assert_int_equal(hz->len, 0);
    g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, "a");
    assert_int_equal(cp_of(a, 1)->shared_with->len, 0);
}

/* A job no readable marker describes is namespaced, with a _state/<J> of
 * its own or without (its markers are where a namespaced job keeps them);
 * the orphan root of jobs_and_snapshots is too. */
static void layout_without_a_readable_marker(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/own/v1/0");
    testfs_marker(fx->dir, "own", 1, "not a marker\n");
    testfs_marker(fx->dir, "bare", 1, "not a marker\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) own = ck_catalog_get_job(c, "own");
    g_autoptr(CkJobInfo) bare = ck_catalog_get_job(c, "bare");
    assert_int_equal(own->checkpoints->len, 1);
    assert_int_equal(cp_of(own, 1)->restore->cls, CK_MARKER_MALFORMED);
    assert_string_equal(own->layout, "namespaced");
    assert_string_equal(bare->layout, "namespaced");
}

static void shared_with_per_checkpoint(void **state)
{
    Fx *fx = *state;
    build_mixed(fx);
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) ins1 = ck_catalog_get_job(c, "ins1");
    const CkCheckpointInfo *i1 = cp_of(ins1, 1);
    assert_int_equal(i1->shared_with->len, 1);
    assert_ptr_equal(i1->shared_with->pdata[0], ck_intern("ins2"));
    g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, "a");
    assert_int_equal(cp_of(a, 1)->shared_with->len, 1); /* b reads _state/a/v1/0 */
    assert_ptr_equal(cp_of(a, 1)->shared_with->pdata[0], ck_intern("b"));
    assert_int_equal(cp_of(a, 2)->shared_with->len, 0);
    g_autoptr(CkJobInfo) b = ck_catalog_get_job(c, "b");
    assert_ptr_equal(cp_of(b, 1)->shared_with->pdata[0], ck_intern("a"));
    assert_ptr_equal(cp_of(b, 1)->restore->foreign_job, ck_intern("a"));
}

/* A marker may name a root inside the checkpoint directory by its absolute
 * path (under an external_root that allows it): the same location as the
 * local root another job's marker names, so they share it, whichever of
 * the directory's spellings (through a symlink too) the catalog was given. */
static void shared_location_named_absolute(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    g_autofree char *abs =
        g_strdup_printf("generation=1\nparticipants=2\nstate=%s/_state/a\n", fx->dir);
    testfs_marker(fx->dir, "absa", 1, abs);
    g_autofree char *link = g_strconcat(fx->dir, ".link", NULL);
    assert_int_equal(symlink(fx->dir, link), 0);
    g_autoptr(GPtrArray) ext = g_ptr_array_new();
    g_ptr_array_add(ext, fx->dir);
    fx->opts.resolve.external_roots = ext;
    const char *dirs[] = {fx->dir, link};
    for (int d = 0; d < 2; d++) {
        g_autoptr(GError) err = NULL;
        g_autoptr(CkCatalog) c = ck_catalog_open(dirs[d], &fx->opts, &err);
        assert_non_null(c);
        g_autoptr(GPtrArray) hz = ck_catalog_hazards(c);
        const CkHazard *h = find_hazard(hz, "shared-location", "_state/a/v1");
        assert_non_null(h);
        assert_int_equal(h->jobs->len, 2);
        assert_string_equal(h->jobs->pdata[0], "a");
        assert_string_equal(h->jobs->pdata[1], "absa");
        g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, "a");
        assert_int_equal(cp_of(a, 1)->shared_with->len, 1);
        assert_ptr_equal(cp_of(a, 1)->shared_with->pdata[0], ck_intern("absa"));
    }
    fx->opts.resolve.external_roots = NULL;
    assert_int_equal(unlink(link), 0);
}

/* Two jobs whose markers name the same root and generation share its
 * state even when their participants are disjoint (or one names none): a
 * rescaled subtask of either writes into the other's.  Hazards and
 * shared_with (the views' restore file) say so alike; another generation
 * of the same root is not shared. */
static void shared_location_with_disjoint_participants(void **state)
{
    Fx *fx = *state;
    /* legacy: a reads v1/0, b reads v1/1 */
    testfs_mkdir(fx->dir, "v1/0");
    testfs_mkdir(fx->dir, "v1/1");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\n");
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=1\n");
    /* namespaced, one remote root: c and d in generation 4, e in 5 */
    testfs_marker(fx->dir, "c", 1, "generation=4\nparticipants=0\nstate=s3://bk/x?region=y\n");
    testfs_marker(fx->dir, "d", 1, "generation=4\nparticipants=1,2\nstate=s3://bk/x?region=y\n");
    testfs_marker(fx->dir, "e", 1, "generation=5\nparticipants=0\nstate=s3://bk/x?region=y\n");
    /* the older layout (no v2): f reads <dir>/7, g reads <dir>/8 */
    testfs_mkdir(fx->dir, "7");
    testfs_mkdir(fx->dir, "8");
    testfs_marker(fx->dir, "f", 1, "generation=2\nparticipants=7\n");
    testfs_marker(fx->dir, "g", 1, "generation=2\nparticipants=8\n");
    /* h restores no subtask of generation 9, i one of it */
    testfs_marker(fx->dir, "h", 1, "generation=9\nparticipants=\nstate=s3://bk/z\n");
    testfs_marker(fx->dir, "i", 1, "generation=9\nparticipants=3\nstate=s3://bk/z\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(GPtrArray) hz = ck_catalog_hazards(c);
    for (guint i = 0; i < hz->len; i++) {
        const CkHazard *h = hz->pdata[i];
        print_message("%s %s: %s\n", h->kind, h->path, h->detail);
    }
    const CkHazard *v1 = find_hazard(hz, "shared-location", "v1");
    assert_non_null(v1);
    assert_true(v1->collision);
    assert_int_equal(v1->jobs->len, 2);
    assert_string_equal(v1->jobs->pdata[0], "a");
    assert_string_equal(v1->jobs->pdata[1], "b");
    assert_non_null(strstr(v1->detail, "a:1, b:1"));
    const CkHazard *r = find_hazard(hz, "shared-location", "s3://bk/x/v4?region=y");
    assert_non_null(r);
    assert_int_equal(r->jobs->len, 2);
    assert_string_equal(r->jobs->pdata[0], "c");
    assert_string_equal(r->jobs->pdata[1], "d");
    const CkHazard *o = find_hazard(hz, "shared-location", ".");
    assert_non_null(o);
    assert_int_equal(o->jobs->len, 2);
    const CkHazard *z = find_hazard(hz, "shared-location", "s3://bk/z/v9");
    assert_non_null(z);
    assert_int_equal(z->jobs->len, 2);
    assert_string_equal(z->jobs->pdata[0], "h");
    assert_string_equal(z->jobs->pdata[1], "i");
    assert_int_equal(count_kind(hz, "shared-location"), 4);
    g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, "a");
    assert_int_equal(cp_of(a, 1)->shared_with->len, 1);
    assert_ptr_equal(cp_of(a, 1)->shared_with->pdata[0], ck_intern("b"));
    g_autofree char *text = ck_job_restore_text(a);
    assert_non_null(strstr(text, "shared_with: b\n"));
    g_autoptr(CkJobInfo) e = ck_catalog_get_job(c, "e");
    assert_int_equal(cp_of(e, 1)->shared_with->len, 0); /* generation 5: its own */
    g_autoptr(CkJobInfo) g = ck_catalog_get_job(c, "g");
    assert_ptr_equal(cp_of(g, 1)->shared_with->pdata[0], ck_intern("f"));
    g_autoptr(CkJobInfo) h = ck_catalog_get_job(c, "h");
    assert_int_equal(cp_of(h, 1)->shared_with->len, 1);
    assert_ptr_equal(cp_of(h, 1)->shared_with->pdata[0], ck_intern("i"));
}

static const CkUnused *find_unused(GPtrArray *un, const char *path)
{
    for (guint i = 0; i < un->len; i++)
        if (strcmp(((CkUnused *)un->pdata[i])->path, path) == 0)
            return un->pdata[i];
    return NULL;
}

static void unused_report(void **state)
{
    Fx *fx = *state;
    build_mixed(fx);
    /* a's v0 is older than both its markers; but b's foreign marker keeps a/v1 read */
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(GPtrArray) un = ck_catalog_unused(c);
    for (guint i = 0; i < un->len; i++) {
        const CkUnused *u = un->pdata[i];
        print_message("unused %s %s %" G_GUINT64_FORMAT "\n", u->path, u->reason, u->bytes);
    }
    const CkUnused *v2 = find_unused(un, "v2");
    assert_non_null(v2);
    assert_string_equal(v2->reason, "legacy-unread");
    assert_true(v2->bytes > 0);
    const CkUnused *seven = find_unused(un, "7");
    assert_non_null(seven);
    assert_string_equal(seven->reason, "legacy-unread");
    const CkUnused *v0 = find_unused(un, "_state/a/v0");
    assert_non_null(v0);
    assert_string_equal(v0->reason, "superseded-generation");
    assert_null(find_unused(un, "v1"));          /* ins1, ins2 still read it */
    assert_null(find_unused(un, "_state/a/v1")); /* a's chk-1 (and b) read it */
    assert_null(find_unused(un, "_state/a/v2"));
    assert_null(find_unused(un, "_state/orphan/v1")); /* no restorable marker: not judged */
    assert_int_equal(un->len, 3);
    /* nothing was deleted */
    g_autofree char *p = g_build_filename(fx->dir, "v2", "0", "checkpoint-9.snap", NULL);
    assert_true(g_file_test(p, G_FILE_TEST_EXISTS));
}

static void unused_once_every_job_moved(void **state)
{
    Fx *fx = *state;
    /* record 013: once every job that used the directory has a namespaced
     * checkpoint and the legacy markers are gone, v1 is no longer read */
    testfs_put(fx->dir, "v1/0/checkpoint-1.snap", "old");
    testfs_put(fx->dir, "_state/a/v2/0/x", "new");
    testfs_marker(fx->dir, "a", 2, "generation=2\nparticipants=0\nstate=_state/a\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(GPtrArray) un = ck_catalog_unused(c);
    assert_int_equal(un->len, 1);
    assert_string_equal(((CkUnused *)un->pdata[0])->path, "v1");
}

static const CkLayer *find_layer(GPtrArray *ls, const char *prefix)
{
    for (guint i = 0; i < ls->len; i++)
        if (strcmp(((CkLayer *)ls->pdata[i])->prefix, prefix) == 0)
            return ls->pdata[i];
    return NULL;
}

static void state_layers(void **state)
{
    Fx *fx = *state;
    /* j1: legacy in v1 (checkpoints 1, 2), then namespaced; j2: legacy in v2 only */
    testfs_mkdir(fx->dir, "v1/0");
    testfs_mkdir(fx->dir, "v1/1");
    testfs_mkdir(fx->dir, "v2/0");
    testfs_mkdir(fx->dir,
                 "_state/j1/v1/0"); /* own entry of the same name: shadows the legacy one */
    testfs_mkdir(fx->dir, "_state/j1/v3/0");
    testfs_marker(fx->dir, "j1", 1, "generation=1\nparticipants=0,1\n");
    testfs_marker(fx->dir, "j1", 2, "generation=1\nparticipants=0\n");
    testfs_marker(fx->dir, "j1", 3, "generation=3\nparticipants=0\nstate=_state/j1\n");
    testfs_marker(fx->dir, "j2", 1, "generation=2\nparticipants=0\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) j1 = ck_catalog_get_job(c, "j1");
    g_autoptr(GPtrArray) ls = ck_job_state_layers(j1);
    for (guint i = 0; i < ls->len; i++) {
        const CkLayer *l = ls->pdata[i];
        print_message("layer '%s' -> %s (%s)\n", l->prefix, l->backing, l->source);
    }
    assert_true(ls->len >= 1);
    const CkLayer *own = ls->pdata[0];
    assert_string_equal(own->prefix, "");
    assert_string_equal(own->backing, "_state/j1");
    assert_string_equal(own->source, "own");
    assert_true(own->local);
    const CkLayer *l0 = find_layer(ls, "v1/0");
    assert_non_null(l0);
    assert_string_equal(l0->backing, "v1/0");
    assert_string_equal(l0->source, "legacy");
    assert_true(l0->has_generation);
    assert_int_equal(l0->generation, 1);
    assert_non_null(find_layer(ls, "v1/1"));
    assert_int_equal(ls->len, 3); /* own, v1/0, v1/1: once each */
    /* j2's generation is never in j1's layers */
    for (guint i = 0; i < ls->len; i++)
        assert_null(strstr(((CkLayer *)ls->pdata[i])->backing, "v2"));

    g_autoptr(CkJobInfo) j2 = ck_catalog_get_job(c, "j2");
    g_autoptr(GPtrArray) l2 = ck_job_state_layers(j2);
    assert_int_equal(l2->len, 1); /* no own root */
    assert_string_equal(((CkLayer *)l2->pdata[0])->prefix, "v2/0");

    /* checkpoint layers: "<S>" -> each read */
    g_autoptr(GPtrArray) cl = ck_job_checkpoint_layers(j1, cp_of(j1, 1));
    assert_int_equal(cl->len, 2);
    assert_string_equal(((CkLayer *)cl->pdata[0])->prefix, "0");
    assert_string_equal(((CkLayer *)cl->pdata[0])->backing, "v1/0");
    assert_string_equal(((CkLayer *)cl->pdata[1])->prefix, "1");
    g_autoptr(GPtrArray) cl3 = ck_job_checkpoint_layers(j1, cp_of(j1, 3));
    assert_int_equal(cl3->len, 1);
    assert_string_equal(((CkLayer *)cl3->pdata[0])->backing, "_state/j1/v3/0");
    assert_string_equal(((CkLayer *)cl3->pdata[0])->source, "own");
}

static void older_layout_and_foreign_layers(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "0");
    testfs_mkdir(fx->dir, "_state/other/v1/0");
    testfs_marker(fx->dir, "j1", 1, "generation=4\nparticipants=0\n");
    testfs_marker(fx->dir, "j1", 2, "generation=1\nparticipants=0\nstate=_state/other\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) j1 = ck_catalog_get_job(c, "j1");
    g_autoptr(GPtrArray) ls = ck_job_state_layers(j1);
    assert_int_equal(ls->len, 1); /* no own root; the foreign root is not shown as j1's */
    const CkLayer *l = ls->pdata[0];
    assert_string_equal(l->prefix, "v4/0");
    assert_string_equal(l->backing, "0");
    /* but checkpoints/2 shows what that restore reads */
    g_autoptr(GPtrArray) cl = ck_job_checkpoint_layers(j1, cp_of(j1, 2));
    assert_int_equal(cl->len, 1);
    assert_string_equal(((CkLayer *)cl->pdata[0])->backing, "_state/other/v1/0");
    assert_string_equal(((CkLayer *)cl->pdata[0])->source, "legacy");
}

static void restore_text_blocks(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0");
    testfs_marker(fx->dir, "j1", 1, "participants=0\n");
    testfs_marker(fx->dir, "j1", 2, "participants=0\nparticipants=0\n");
    testfs_marker(fx->dir, "j2", 1, "generation=1\nparticipants=0\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) j1 = ck_catalog_get_job(c, "j1");
    g_autofree char *t = ck_job_restore_text(j1);
    print_message("%s", t);
    g_auto(GStrv) blocks = g_strsplit(t, "\n\n", -1);
    assert_int_equal(g_strv_length(blocks), 2);
    assert_non_null(strstr(blocks[0], "checkpoint: 1\n"));
    assert_non_null(strstr(blocks[0], "class: legacy\n"));
    assert_non_null(strstr(blocks[0], "root: . (local)\n"));
    assert_non_null(strstr(blocks[0], "generation: 1 (guessed)\n"));
    assert_non_null(strstr(blocks[0], "participants: 0\n"));
    assert_non_null(strstr(blocks[0], "marker: _jobs/j1/chk-1/COMPLETED\n"));
    assert_non_null(strstr(blocks[0], "shared_with: j2\n"));
    assert_non_null(strstr(blocks[0], "\nerror: -"));
    assert_non_null(strstr(blocks[1], "class: malformed\n"));
    assert_non_null(strstr(blocks[1], "restorable: no\n"));
    assert_null(strstr(blocks[1], "error: -"));
    /* one rule for empty values: "-" */
    assert_non_null(strstr(blocks[1], "root: -\n"));
    assert_non_null(strstr(blocks[1], "generation: -\n"));
    assert_non_null(strstr(blocks[1], "participants: -\n"));
    assert_non_null(strstr(blocks[1], "reads: -\n"));
    assert_non_null(strstr(blocks[1], "shared_with: -\n"));
    g_autoptr(CkJobInfo) j2 = ck_catalog_get_job(c, "j2");
    g_autofree char *t2 = ck_job_restore_text(j2);
    assert_non_null(strstr(t2, "generation: 1 (marker)\n"));
    /* unknown keys are kept and shown (control characters escaped, quotes
     * as they are) */
    testfs_marker(fx->dir, "j3", 1, "generation=1\nparticipants=0\nowner=team \"a\"\ttab\nzz=\n");
    ck_catalog_rescan(c, NULL);
    g_autoptr(CkJobInfo) j3 = ck_catalog_get_job(c, "j3");
    g_autofree char *t3 = ck_job_restore_text(j3);
    assert_non_null(strstr(t3, "unknown: owner=team \"a\"\\ttab\nunknown: zz=\nerror: -\n"));
}

/* report_unreadable (ckptctl) opens each _state/<J> and hands its listing to
 * the restores: the snapshots are the same as a mount's. */
static void report_unreadable_reads_the_same(void **state)
{
    Fx *fx = *state;
    build_mixed(fx);
    testfs_marker(fx->dir, "g", 1, "participants=0\nstate=_state/g\n"); /* guessed: v2 */
    testfs_mkdir(fx->dir, "_state/g/v1/0");
    testfs_mkdir(fx->dir, "_state/g/v2/0");
    testfs_marker(fx->dir, "f", 1, "generation=1\nparticipants=0\nstate=_state/f\n");
    testfs_put(fx->dir, "_state/f", "a file, not a root");
    testfs_marker(fx->dir, "l", 1, "generation=1\nparticipants=0\nstate=_state/l\n");
    g_autofree char *tg = g_build_filename(fx->dir, "_state", "a", NULL);
    g_autofree char *ln = g_build_filename(fx->dir, "_state", "l", NULL);
    assert_int_equal(symlink(tg, ln), 0);
    g_autoptr(CkCatalog) plain = open_cat(fx);
    fx->opts.report_unreadable = true;
    g_autoptr(CkCatalog) rep = open_cat(fx);
    g_autofree char *where = NULL;
    assert_int_equal(ck_catalog_unreadable(rep, &where), 0); /* gone, a file, a symlink: no */
    assert_null(where);
    assert_int_equal(ck_catalog_unreadable(plain, NULL), 0);
    g_autoptr(GPtrArray) names = ck_catalog_job_names(plain);
    g_autoptr(GPtrArray) names2 = ck_catalog_job_names(rep);
    assert_int_equal(names->len, names2->len);
    for (guint i = 0; i < names->len; i++) {
        assert_ptr_equal(names->pdata[i], names2->pdata[i]);
        g_autoptr(CkJobInfo) x = ck_catalog_get_job(plain, names->pdata[i]);
        g_autoptr(CkJobInfo) y = ck_catalog_get_job(rep, names->pdata[i]);
        g_autofree char *tx = ck_job_restore_text(x);
        g_autofree char *ty = ck_job_restore_text(y);
        assert_string_equal(tx, ty);
        assert_int_equal(x->has_own_root, y->has_own_root);
        assert_int_equal(x->has_latest, y->has_latest);
        assert_string_equal(x->layout, y->layout);
    }
    g_autoptr(CkJobInfo) g = ck_catalog_get_job(rep, "g");
    g_autofree char *tg2 = ck_job_restore_text(g);
    assert_non_null(strstr(tg2, "generation: 2 (guessed)\n"));
}

/* ck_catalog_job_bytes keeps short sets (reads, directories seen) in
 * arrays and moves to hash tables past them: the same count either way. */
static void bytes_of_many_reads(void **state)
{
    Fx *fx = *state;
    g_autoptr(GString) parts = g_string_new("participants=");
    guint64 want = 0;
    for (guint s = 0; s < 40; s++) { /* 40 reads in each of two generations: 80 directories */
        g_string_append_printf(parts, "%s%u", s ? "," : "", s);
        for (guint g = 1; g <= 2; g++) {
            g_autofree char *rel = g_strdup_printf("_state/m/v%u/%u/part", g, s);
            g_autofree char *text = g_strnfill(s + g, 'x');
            testfs_put(fx->dir, rel, text);
            want += s + g;
        }
    }
    /* one file linked into two of the directories: counted once */
    testfs_put(fx->dir, "_state/m/v1/0/shared", "12345");
    g_autofree char *a = g_build_filename(fx->dir, "_state/m/v1/0/shared", NULL);
    g_autofree char *b = g_build_filename(fx->dir, "_state/m/v2/39/shared", NULL);
    assert_int_equal(link(a, b), 0);
    want += 5;
    for (guint n = 1; n <= 4; n++) { /* two markers per generation: each read twice */
        g_autofree char *text =
            g_strdup_printf("generation=%u\n%s\nstate=_state/m\n", (n + 1) / 2, parts->str);
        testfs_marker(fx->dir, "m", n, text);
    }
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) m = ck_catalog_get_job(c, "m");
    assert_int_equal(m->checkpoints->len, 4);
    assert_int_equal(ck_catalog_job_bytes(c, m), want);
}

static void rescan_reparses_only_changes(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/b/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=0\nstate=_state/b\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) a0 = ck_catalog_get_job(c, "a");
    g_autoptr(CkJobInfo) b0 = ck_catalog_get_job(c, "b");

    /* nothing changed: nothing reported, the same snapshots */
    g_autoptr(GPtrArray) ch = g_ptr_array_new();
    ck_catalog_rescan(c, ch);
    assert_int_equal(ch->len, 0);
    g_autoptr(CkJobInfo) a1 = ck_catalog_get_job(c, "a");
    assert_ptr_equal(a1, a0);

    /* a new marker of a (a rename onto COMPLETED, as a coordinator does) */
    testfs_put(fx->dir, "_jobs/a/chk-2/COMPLETED.tmp",
               "generation=1\nparticipants=0\nstate=_state/a\n");
    g_autofree char *from = g_build_filename(fx->dir, "_jobs/a/chk-2/COMPLETED.tmp", NULL);
    g_autofree char *to = g_build_filename(fx->dir, "_jobs/a/chk-2/COMPLETED", NULL);
    assert_int_equal(rename(from, to), 0);
    ck_catalog_rescan(c, ch);
    assert_int_equal(ch->len, 1);
    assert_ptr_equal(ch->pdata[0], ck_intern("a"));
    g_autoptr(CkJobInfo) a2 = ck_catalog_get_job(c, "a");
    assert_ptr_not_equal(a2, a0);
    assert_true(a2->version > a0->version);
    assert_int_equal(a2->latest, 2);
    assert_int_equal(a0->latest, 1); /* the old snapshot is untouched */
    g_autoptr(CkJobInfo) b1 = ck_catalog_get_job(c, "b");
    assert_ptr_equal(b1, b0);

    /* a rewritten marker (same name, new content) */
    g_ptr_array_set_size(ch, 0);
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=0,1\nstate=_state/b\n");
    ck_catalog_rescan(c, ch);
    assert_int_equal(ch->len, 1);
    g_autoptr(CkJobInfo) b2 = ck_catalog_get_job(c, "b");
    assert_int_equal(cp_of(b2, 1)->restore->participants->len, 2);

    /* a job appears, a job disappears */
    g_ptr_array_set_size(ch, 0);
    testfs_mkdir(fx->dir, "_state/n/v1/0");
    testfs_marker(fx->dir, "n", 1, "generation=1\nparticipants=0\nstate=_state/n\n");
    g_autofree char *bj = g_build_filename(fx->dir, "_jobs", "b", NULL);
    g_autofree char *bs = g_build_filename(fx->dir, "_state", "b", NULL);
    assert_true(testfs_remove(bj));
    assert_true(testfs_remove(bs));
    ck_catalog_rescan(c, ch);
    assert_int_equal(ch->len, 2);
    g_autoptr(CkJobInfo) nj = ck_catalog_get_job(c, "n");
    assert_non_null(nj);
    assert_null(ck_catalog_get_job(c, "b"));
    assert_int_equal(ck_catalog_n_jobs(c), 2);
    assert_int_equal(ck_catalog_n_markers(c), 3);
}

/* Proof that an unchanged marker is not re-read: rewrite chk-1 in place with
 * the same size and mtime (so its stamp is unchanged), then add chk-2; the
 * rebuilt snapshot still has chk-1's old content, and chk-2's new one. */
static void rescan_copies_unchanged_markers(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/a/v1/1");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autofree char *p1 = g_build_filename(fx->dir, "_jobs/a/chk-1/COMPLETED", NULL);
    struct stat before;
    assert_int_equal(stat(p1, &before), 0);
    int fd = open(p1, O_WRONLY);
    assert_true(fd >= 0);
    const char same_size[] = "generation=1\nparticipants=1\nstate=_state/a\n";
    assert_int_equal(pwrite(fd, same_size, strlen(same_size), 0), (ssize_t)strlen(same_size));
    struct timespec ts[2] = {before.st_atim, before.st_mtim};
    assert_int_equal(futimens(fd, ts), 0);
    close(fd);
    testfs_marker(fx->dir, "a", 2, "generation=1\nparticipants=1\nstate=_state/a\n");
    g_autoptr(GPtrArray) ch = g_ptr_array_new();
    ck_catalog_rescan(c, ch);
    assert_int_equal(ch->len, 1);
    g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, "a");
    assert_int_equal(a->checkpoints->len, 2);
    assert_int_equal(g_array_index(cp_of(a, 1)->restore->participants, guint32, 0), 0);
    assert_int_equal(g_array_index(cp_of(a, 2)->restore->participants, guint32, 0), 1);
}

static void rescan_sees_new_sharing(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "v1/0");
    testfs_marker(fx->dir, "x", 1, "generation=1\nparticipants=0\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) x0 = ck_catalog_get_job(c, "x");
    assert_int_equal(cp_of(x0, 1)->shared_with->len, 0);
    /* y starts writing the same legacy location: x's snapshot changes too */
    testfs_marker(fx->dir, "y", 1, "generation=1\nparticipants=0\n");
    g_autoptr(GPtrArray) ch = g_ptr_array_new();
    ck_catalog_rescan(c, ch);
    assert_int_equal(ch->len, 2);
    g_autoptr(CkJobInfo) x1 = ck_catalog_get_job(c, "x");
    assert_true(x1->version > x0->version);
    assert_int_equal(cp_of(x1, 1)->shared_with->len, 1);
    assert_ptr_equal(cp_of(x1, 1)->shared_with->pdata[0], ck_intern("y"));
}

static void refresh_one_job(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    assert_false(ck_catalog_refresh_job(c, "a"));
    testfs_marker(fx->dir, "a", 2, "generation=1\nparticipants=0\nstate=_state/a\n");
    assert_true(ck_catalog_refresh_job(c, "a"));
    g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, "a");
    assert_int_equal(a->latest, 2);
    /* a job that did not exist at open */
    testfs_mkdir(fx->dir, "_state/z/v1/0");
    testfs_marker(fx->dir, "z", 1, "generation=1\nparticipants=0\nstate=_state/z\n");
    assert_true(ck_catalog_refresh_job(c, "z"));
    g_autoptr(CkJobInfo) z = ck_catalog_get_job(c, "z");
    assert_non_null(z);
    assert_false(ck_catalog_refresh_job(c, "not a job"));
}

/* Every job of c as a fresh open of the same directory has it: markers,
 * latest and every shared_with (the check of the in-place path of a
 * refresh, which skips the pass over every job when it cannot matter). */
static void assert_same_as_open(Fx *fx, CkCatalog *c)
{
    g_autoptr(CkCatalog) f = open_cat(fx);
    assert_int_equal(ck_catalog_n_jobs(c), ck_catalog_n_jobs(f));
    assert_int_equal(ck_catalog_n_markers(c), ck_catalog_n_markers(f));
    g_autoptr(GPtrArray) names = ck_catalog_job_names(f);
    for (guint i = 0; i < names->len; i++) {
        g_autoptr(CkJobInfo) a = ck_catalog_get_job(c, names->pdata[i]);
        g_autoptr(CkJobInfo) b = ck_catalog_get_job(f, names->pdata[i]);
        assert_non_null(a);
        assert_int_equal(a->checkpoints->len, b->checkpoints->len);
        assert_int_equal(a->has_latest, b->has_latest);
        assert_int_equal(a->latest, b->latest);
        for (guint k = 0; k < a->checkpoints->len; k++) {
            const CkCheckpointInfo *x = a->checkpoints->pdata[k], *y = b->checkpoints->pdata[k];
            assert_int_equal(x->n, y->n);
            assert_int_equal(x->shared_with->len, y->shared_with->len);
            for (guint s = 0; s < x->shared_with->len; s++)
                assert_ptr_equal(x->shared_with->pdata[s], y->shared_with->pdata[s]);
        }
    }
}

/* Refreshes that keep to a job's own root change the table in place; those
 * that start or stop a sharing recompute it.  After each step the catalog
 * equals a fresh open. */
static void refresh_in_place_or_shared(void **state)
{
    Fx *fx = *state;
    testfs_mkdir(fx->dir, "_state/a/v1/0");
    testfs_mkdir(fx->dir, "_state/b/v1/0");
    testfs_marker(fx->dir, "a", 1, "generation=1\nparticipants=0\nstate=_state/a\n");
    testfs_marker(fx->dir, "b", 1, "generation=1\nparticipants=0\nstate=_state/b\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    guint64 names0 = ck_catalog_names_version(c);
    /* a's own marker: in place */
    testfs_marker(fx->dir, "a", 2, "generation=1\nparticipants=0\nstate=_state/a\n");
    assert_true(ck_catalog_refresh_job(c, "a"));
    assert_int_equal(ck_catalog_names_version(c), names0);
    assert_same_as_open(fx, c);
    /* b restores from a's root: both now share _state/a/v1/0 */
    testfs_marker(fx->dir, "b", 2, "generation=1\nparticipants=0\nstate=_state/a\n");
    assert_true(ck_catalog_refresh_job(c, "b"));
    g_autoptr(CkJobInfo) a2 = ck_catalog_get_job(c, "a");
    assert_int_equal(cp_of(a2, 2)->shared_with->len, 1);
    assert_same_as_open(fx, c);
    /* a, whose root b reads, writes another marker: a's answers stay */
    testfs_marker(fx->dir, "a", 3, "generation=1\nparticipants=0\nstate=_state/a\n");
    assert_true(ck_catalog_refresh_job(c, "a"));
    assert_same_as_open(fx, c);
    /* b's foreign marker goes: a shares nothing any more */
    g_autofree char *m = g_build_filename(fx->dir, "_jobs/b/chk-2/COMPLETED", NULL);
    assert_int_equal(unlink(m), 0);
    assert_true(ck_catalog_refresh_job(c, "b"));
    g_autoptr(CkJobInfo) a3 = ck_catalog_get_job(c, "a");
    assert_int_equal(cp_of(a3, 2)->shared_with->len, 0);
    assert_same_as_open(fx, c);
    /* a new job, then a job gone: the names change */
    testfs_mkdir(fx->dir, "_state/n/v1/0");
    testfs_marker(fx->dir, "n", 1, "generation=1\nparticipants=0\nstate=_state/n\n");
    assert_true(ck_catalog_refresh_job(c, "n"));
    assert_true(ck_catalog_names_version(c) > names0);
    assert_same_as_open(fx, c);
    guint64 names1 = ck_catalog_names_version(c);
    g_autofree char *nj = g_build_filename(fx->dir, "_jobs/n", NULL);
    g_autofree char *ns = g_build_filename(fx->dir, "_state/n", NULL);
    assert_true(testfs_remove(nj));
    assert_true(testfs_remove(ns));
    assert_true(ck_catalog_refresh_job(c, "n"));
    assert_true(ck_catalog_names_version(c) > names1);
    assert_same_as_open(fx, c);
}

static void cut_short_becomes_restorable(void **state)
{
    Fx *fx = *state;
    testfs_marker(fx->dir, "c", 1, "generation=1\n");
    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) c0 = ck_catalog_get_job(c, "c");
    assert_false(c0->has_latest);
    testfs_mkdir(fx->dir, "_state/c/v1/0");
    ck_catalog_rescan(c, NULL);
    g_autoptr(CkJobInfo) c1 = ck_catalog_get_job(c, "c");
    assert_true(c1->has_latest);
    assert_true(c1->has_own_root);
}

static void bad_input(void **state)
{
    Fx *fx = *state;
    /* binary garbage, an over-long marker, a FIFO, a symlink, an unreadable one */
    testfs_put(fx->dir, "_jobs/g/chk-1/COMPLETED", "\x01\x02\xff\xfe=\n\x80");
    GString *big = g_string_new(NULL);
    while (big->len <= 70000)
        g_string_append(big, "participants=0\n");
    testfs_put(fx->dir, "_jobs/g/chk-2/COMPLETED", big->str);
    g_string_free(big, TRUE);
    testfs_mkdir(fx->dir, "_jobs/g/chk-3");
    g_autofree char *fifo = g_build_filename(fx->dir, "_jobs/g/chk-3/COMPLETED", NULL);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    testfs_mkdir(fx->dir, "_jobs/g/chk-4");
    g_autofree char *ln = g_build_filename(fx->dir, "_jobs/g/chk-4/COMPLETED", NULL);
    assert_int_equal(symlink("/etc/passwd", ln), 0);
    testfs_put(fx->dir, "_jobs/g/chk-5/COMPLETED", "generation=1\nparticipants=0\n");
    g_autofree char *unreadable = g_build_filename(fx->dir, "_jobs/g/chk-5/COMPLETED", NULL);
    assert_int_equal(chmod(unreadable, 0), 0);
    /* a symlinked marker directory is not followed */
    testfs_mkdir(fx->dir, "_jobs/h");
    g_autofree char *hl = g_build_filename(fx->dir, "_jobs/h/chk-1", NULL);
    g_autofree char *target = g_build_filename(fx->dir, "_jobs/g/chk-1", NULL);
    assert_int_equal(symlink(target, hl), 0);

    g_autoptr(CkCatalog) c = open_cat(fx);
    g_autoptr(CkJobInfo) g = ck_catalog_get_job(c, "g");
    assert_int_equal(g->checkpoints->len, 5);
    for (guint i = 0; i < g->checkpoints->len; i++) {
        const CkCheckpointInfo *cp = g->checkpoints->pdata[i];
        print_message("chk-%" G_GUINT64_FORMAT ": %s\n", cp->n,
                      cp->restore->error ? cp->restore->error : "-");
        if (cp->n == 4)
            assert_non_null(strstr(cp->restore->error, "symlink"));
        if (cp->n == 5 && geteuid() == 0)
            continue; /* root reads it anyway; the tools tests drop privileges */
        assert_int_equal(cp->restore->cls, CK_MARKER_MALFORMED);
        assert_false(cp->restore->restorable);
        assert_non_null(cp->restore->error);
    }
    /* ... but it is a checkpoint, malformed, as in every tool */
    g_autoptr(CkJobInfo) h = ck_catalog_get_job(c, "h");
    assert_int_equal(h->checkpoints->len, 1);
    const CkRestore *hr = ((CkCheckpointInfo *)h->checkpoints->pdata[0])->restore;
    assert_int_equal(hr->cls, CK_MARKER_MALFORMED);
    assert_string_equal(hr->error, "malformed marker: chk-1 is a symlink, not followed");
    g_autoptr(GPtrArray) hz = ck_catalog_hazards(c);
    assert_true(count_kind(hz, "malformed") >= 4);
    /* a missing directory is an error, not a crash */
    g_autoptr(GError) err = NULL;
    g_autofree char *missing = g_build_filename(fx->dir, "missing", NULL);
    assert_null(ck_catalog_open(missing, &fx->opts, &err));
    assert_non_null(err);
}

typedef struct {
    CkCatalog *c;
    gint stop;
    gint reads;
} Race;

static gpointer reader(gpointer p)
{
    Race *r = p;
    while (!g_atomic_int_get(&r->stop)) {
        g_autoptr(GPtrArray) names = ck_catalog_job_names(r->c);
        for (guint i = 0; i < names->len; i++) {
            g_autoptr(CkJobInfo) j = ck_catalog_get_job(r->c, names->pdata[i]);
            if (j) {
                g_autoptr(GPtrArray) ls = ck_job_state_layers(j);
                g_autofree char *t = ck_job_restore_text(j);
                g_atomic_int_inc(&r->reads);
            }
        }
    }
    return NULL;
}

static void concurrent_readers_and_rescans(void **state)
{
    Fx *fx = *state;
    for (int i = 0; i < 20; i++) {
        g_autofree char *s = g_strdup_printf("_state/j%d/v1/0", i);
        testfs_mkdir(fx->dir, s);
        g_autofree char *j = g_strdup_printf("j%d", i);
        testfs_marker(fx->dir, j, 1, "generation=1\nparticipants=0\nstate=_state/x\n");
    }
    g_autoptr(CkCatalog) c = open_cat(fx);
    Race r = {c, 0, 0};
    GThread *t1 = g_thread_new("r1", reader, &r);
    GThread *t2 = g_thread_new("r2", reader, &r);
    for (int k = 0; k < 30; k++) {
        g_autofree char *j = g_strdup_printf("j%d", k % 20);
        g_autofree char *text = g_strdup_printf(
            "generation=1\nparticipants=0\nstate=_state/j%d\nround=%d\n", k % 20, k);
        testfs_marker(fx->dir, j, 1, text);
        if (k % 2)
            ck_catalog_rescan(c, NULL);
        else
            ck_catalog_refresh_job(c, j);
    }
    g_atomic_int_set(&r.stop, 1);
    g_thread_join(t1);
    g_thread_join(t2);
    assert_int_equal(ck_catalog_n_jobs(c), 20);
    g_autoptr(CkJobInfo) j9 = ck_catalog_get_job(c, "j9");
    assert_string_equal(cp_of(j9, 1)->restore->root, "_state/j9");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(jobs_and_snapshots, setup, teardown),
        cmocka_unit_test_setup_teardown(mixed_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(hazards_of_each_kind, setup, teardown),
        cmocka_unit_test_setup_teardown(clean_directory_has_no_hazards, setup, teardown),
        cmocka_unit_test_setup_teardown(layout_without_a_readable_marker, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_with_per_checkpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_location_named_absolute, setup, teardown),
        cmocka_unit_test_setup_teardown(shared_location_with_disjoint_participants, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unused_report, setup, teardown),
        cmocka_unit_test_setup_teardown(unused_once_every_job_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(state_layers, setup, teardown),
        cmocka_unit_test_setup_teardown(older_layout_and_foreign_layers, setup, teardown),
        cmocka_unit_test_setup_teardown(restore_text_blocks, setup, teardown),
        cmocka_unit_test_setup_teardown(report_unreadable_reads_the_same, setup, teardown),
        cmocka_unit_test_setup_teardown(bytes_of_many_reads, setup, teardown),
        cmocka_unit_test_setup_teardown(rescan_reparses_only_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(rescan_copies_unchanged_markers, setup, teardown),
        cmocka_unit_test_setup_teardown(rescan_sees_new_sharing, setup, teardown),
        cmocka_unit_test_setup_teardown(refresh_one_job, setup, teardown),
        cmocka_unit_test_setup_teardown(refresh_in_place_or_shared, setup, teardown),
        cmocka_unit_test_setup_teardown(cut_short_becomes_restorable, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_readers_and_rescans, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
