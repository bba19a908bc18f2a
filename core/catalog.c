/* The job catalog of one checkpoint directory (see catalog.h).
 *
 * Everything is read relative to one descriptor of the directory, with
 * AT_SYMLINK_NOFOLLOW / O_NOFOLLOW, so nothing here follows a symlink out of
 * it.  A job snapshot is built off-lock and published by swapping a pointer
 * in the table under c->lock; rebuilds (open, refresh, rescan) are
 * serialised by c->scan_lock so two never interleave. */
#include "catalog.h"
#include "intern.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify.h"
#include "markers.h"

typedef struct {
    bool exists;
    guint64 ino;
    gint64 mtime_ns;
} DirStamp;

/* A snapshot: the public part first, so a CkJobInfo* is a JobPriv*. */
typedef struct {
    CkJobInfo pub;
    GArray *stamps;    /* CkMarkerStamp, parallel to pub.checkpoints */
    DirStamp own_root; /* _state/<J> */
    bool uses_top;     /* some restore depends on the top-level layout (legacy) */
    /* For compute_shared, and for rebuild's choice to skip it: a
     * private job (every restorable read local and inside _state/<J>, the
     * location of a restore that reads no subtask too) reads
     * nothing another job can read unless another job reads inside its root,
     * and a job with no shared_with has no answer to take back. */
    bool private_reads;
    bool any_shared; /* some checkpoint's shared_with is not empty */
} JobPriv;

/* What the cheap check of a job compares (ck_catalog_job_check): the
 * directories whose change can change the job, as they were when it was last
 * looked at.  Kept beside the snapshots, not in them: a look that finds the
 * same markers still records the new stamps. */
typedef struct {
    DirStamp markers_dir; /* _jobs/<J> */
    DirStamp own_root;    /* _state/<J> */
    GArray *pending;      /* PendingStamp: chk-<N> directories without a COMPLETED */
} CheckStamp;

typedef struct {
    guint64 n;
    DirStamp st;
} PendingStamp;

static void check_stamp_free(gpointer p)
{
    CheckStamp *cs = p;
    if (cs && cs->pending)
        g_array_unref(cs->pending);
    g_free(cs);
}

struct CkCatalog {
    char *dir;
    int dfd;
    /* the directory as an absolute path, as given and with its symlinks
     * resolved (NULL: the same, or unknown): an external root inside it is
     * a location a local root may name too (location_key) */
    char *self[2];
    CkResolveOptions ropts;
    char *views_name;
    GMutex lock;         /* jobs, not_jobs, n_markers, top */
    GMutex scan_lock;    /* one rebuild at a time */
    GHashTable *jobs;    /* interned id -> JobPriv* (one reference) */
    GPtrArray *not_jobs; /* char*: "_jobs/<name>", "_state/<name>" */
    guint n_markers;
    DirStamp top;
    DirStamp jobs_dir, state_dir; /* _jobs, _state when last listed */
    GHashTable *checks;           /* interned id -> CheckStamp* (lock) */
    GHashTable *pending_jobs;     /* interned ids with a chk-<N> in progress (lock) */
    /* Owners whose _state/<J> another job's restore reads, as the last
     * compute_shared found them (scan_lock): what decides whether a rebuild
     * may skip compute_shared (keeps_to_itself). */
    GHashTable *hot;
    guint64 next_version;
    guint64 names_version; /* bumps when a job is added or removed (lock) */
    const char *only_job;  /* interned: a catalog of this one job (ck_catalog_open_job) */
    CkCatalogProgress *progress;
    bool report_unreadable;
    int unreadable_err;     /* what the last full listing could not open (lock) */
    char *unreadable_where; /* relative to dir (lock) */
};

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static gint64 mtime_ns_of(const struct stat *sb)
{
    return (gint64)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

static DirStamp dir_stamp(int dfd, const char *path)
{
    struct stat sb;
    DirStamp d = {0};
    if (fstatat(dfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(sb.st_mode)) {
        d.exists = true;
        d.ino = sb.st_ino;
        d.mtime_ns = mtime_ns_of(&sb);
    }
    return d;
}

static bool dir_stamp_equal(DirStamp a, DirStamp b)
{
    return a.exists == b.exists && a.ino == b.ino && a.mtime_ns == b.mtime_ns;
}

/* ---- snapshots ---- */

static void checkpoint_free(gpointer p)
{
    CkCheckpointInfo *cp = p;
    ck_restore_free(cp->restore);
    g_ptr_array_unref(cp->shared_with);
    g_ptr_array_unref(cp->unknown);
    g_free(cp);
}

static CkCheckpointInfo *checkpoint_copy(const CkCheckpointInfo *o)
{
    CkCheckpointInfo *cp = g_new0(CkCheckpointInfo, 1);
    cp->n = o->n;
    cp->restore = ck_restore_copy(o->restore);
    cp->shared_with = g_ptr_array_copy(o->shared_with, NULL, NULL);
    cp->unknown = ck_marker_kv_copy(o->unknown);
    return cp;
}

static void job_priv_clear(gpointer p)
{
    JobPriv *jp = p;
    g_ptr_array_unref(jp->pub.checkpoints);
    g_array_unref(jp->stamps);
}

static JobPriv *job_priv_new(const char *job)
{
    JobPriv *jp = g_atomic_rc_box_new0(JobPriv);
    jp->pub.job = job;
    jp->pub.checkpoints = g_ptr_array_new_with_free_func(checkpoint_free);
    jp->stamps = g_array_new(FALSE, FALSE, sizeof(CkMarkerStamp));
    jp->pub.layout = "namespaced";
    return jp;
}

CkJobInfo *ck_job_info_ref(CkJobInfo *j)
{
    return j ? g_atomic_rc_box_acquire(j) : NULL;
}

void ck_job_info_unref(CkJobInfo *j)
{
    if (j)
        g_atomic_rc_box_release_full(j, job_priv_clear);
}

static bool under_own_root(const char *job, const char *path);

/* Derived fields: latest, layout, uses_top, private_reads, any_shared. */
static void job_finish(JobPriv *jp)
{
    bool ns = false, legacy = false;
    jp->pub.has_latest = false;
    jp->uses_top = false;
    jp->private_reads = true;
    jp->any_shared = false;
    for (guint i = 0; i < jp->pub.checkpoints->len; i++) {
        const CkCheckpointInfo *cp = jp->pub.checkpoints->pdata[i];
        const CkRestore *r = cp->restore;
        if (cp->shared_with->len)
            jp->any_shared = true;
        if (r->restorable) {
            jp->pub.has_latest = true;
            jp->pub.latest = cp->n;
            for (guint k = 0; k < r->reads->len && jp->private_reads; k++)
                jp->private_reads = r->root_kind == CK_ROOT_LOCAL &&
                                    under_own_root(jp->pub.job, r->reads->pdata[k]);
            if (r->reads->len == 0 && jp->private_reads) {
                /* restores no subtask, yet names a location others may share */
                g_autofree char *loc = ck_restore_location(r);
                jp->private_reads =
                    !loc || (r->root_kind == CK_ROOT_LOCAL && under_own_root(jp->pub.job, loc));
            }
        }
        if (r->cls == CK_MARKER_LEGACY)
            jp->uses_top = true;
        if (r->cls == CK_MARKER_MALFORMED)
            continue;
        if (r->legacy_location)
            legacy = true;
        else
            ns = true;
    }
    /* no readable marker says: the job's markers are where a namespaced
     * job keeps them, and nothing puts its state in the shared layout */
    jp->pub.layout = ns && legacy ? "mixed" : legacy ? "legacy" : "namespaced";
}

static DirStamp own_root_stamp(CkCatalog *c, const char *job)
{
    char p[CK_JOB_ID_MAX + 16];
    g_snprintf(p, sizeof p, "_state/%s", job);
    return dir_stamp(c->dfd, p);
}

/* An open that failed for a reason other than "gone, not a directory, or a
 * symlink": something is there that cannot be read. */
static bool unreadable_errno(int e)
{
    return e != ENOENT && e != ENOTDIR && e != ELOOP;
}

/* own_root_stamp for report_unreadable: _state/<J> opened rather than
 * looked at, its failure noted in *err (an errno), and its listing handed to
 * the memo, so the restores that read the own root do not open it again. */
static DirStamp own_root_open(CkCatalog *c, const char *job, CkRootCache *cache, int *err)
{
    char p[CK_JOB_ID_MAX + 16];
    g_snprintf(p, sizeof p, "_state/%s", job);
    int fd = ck_open_beneath(c->dfd, p, O_RDONLY | O_DIRECTORY, NULL);
    if (fd < 0) {
        if (unreadable_errno(-fd))
            *err = -fd;
        return dir_stamp(c->dfd, p); /* what a look sees (a symlinked _state, say) */
    }
    struct stat sb;
    DirStamp d = {0};
    if (fstat(fd, &sb) == 0)
        d = (DirStamp){true, sb.st_ino, mtime_ns_of(&sb)};
    ck_root_cache_scan_fd(cache, p, fd);
    close(fd);
    return d;
}

#define MARKER_BUF (CK_MARKER_MAX_BYTES + 1)

/* Checkpoint *ms of job (jfd: _jobs/<J>), read and resolved by markers.c;
 * NULL when its COMPLETED is gone since the listing.  *ms: refreshed when the
 * marker was not what was listed. */
static CkCheckpointInfo *checkpoint_new(CkCatalog *c, const char *job, int jfd, CkMarkerStamp *ms,
                                        CkRootCache *cache, char *buf)
{
    GPtrArray *unknown = NULL;
    CkRestore *r = ck_job_marker_restore(c->dfd, jfd, job, ms, &c->ropts, cache, buf, &unknown);
    if (!r)
        return NULL;
    CkCheckpointInfo *cp = g_new0(CkCheckpointInfo, 1);
    cp->n = ms->n;
    cp->shared_with = g_ptr_array_new();
    cp->restore = r;
    cp->unknown = unknown;
    return cp;
}

/* Builds a snapshot of `job` from what job_update found: jfd (_jobs/<J>, or
 * -1), own_root (_state/<J>) and list, the stamps of its markers as listed.
 * A marker whose stamp equals old's is copied from old instead of re-read,
 * unless `reeval` (its surroundings changed). */
static JobPriv *job_build(CkCatalog *c, const char *job, int jfd, DirStamp own_root,
                          const JobPriv *old, bool reeval, const GArray *list, CkRootCache *cache,
                          char *buf)
{
    JobPriv *jp = job_priv_new(job);
    jp->pub.has_markers_dir = jfd >= 0;
    jp->own_root = own_root;
    jp->pub.has_own_root = own_root.exists;
    guint k = 0;
    for (guint i = 0; i < list->len; i++) {
        CkMarkerStamp ms = g_array_index(list, CkMarkerStamp, i);
        CkCheckpointInfo *cp = NULL;
        if (old && !reeval) {
            while (k < old->stamps->len && g_array_index(old->stamps, CkMarkerStamp, k).n < ms.n)
                k++;
            if (k < old->stamps->len) {
                const CkMarkerStamp *os = &g_array_index(old->stamps, CkMarkerStamp, k);
                if (memcmp(os, &ms, sizeof ms) == 0)
                    cp = checkpoint_copy(old->pub.checkpoints->pdata[k]);
            }
        }
        if (!cp) {
            cp = checkpoint_new(c, job, jfd, &ms, cache, buf);
            if (!cp)
                continue; /* COMPLETED gone since the listing */
            if (c->progress)
                g_atomic_int_inc(&c->progress->markers_loaded);
        }
        g_array_append_val(jp->stamps, ms);
        g_ptr_array_add(jp->pub.checkpoints, cp);
    }
    job_finish(jp);
    return jp;
}

static JobPriv *job_clone(const JobPriv *o)
{
    JobPriv *jp = job_priv_new(o->pub.job);
    CkJobInfo keep = jp->pub;
    jp->pub = o->pub;
    jp->pub.checkpoints = keep.checkpoints;
    for (guint i = 0; i < o->pub.checkpoints->len; i++)
        g_ptr_array_add(jp->pub.checkpoints, checkpoint_copy(o->pub.checkpoints->pdata[i]));
    g_array_append_vals(jp->stamps, o->stamps->data, o->stamps->len);
    jp->own_root = o->own_root;
    jp->uses_top = o->uses_top;
    jp->private_reads = o->private_reads;
    jp->any_shared = o->any_shared;
    return jp;
}

static bool same_string_sets(const GPtrArray *a, const GPtrArray *b)
{
    if (a->len != b->len)
        return false;
    for (guint i = 0; i < a->len; i++)
        if (a->pdata[i] != b->pdata[i]) /* interned, sorted */
            return false;
    return true;
}

static bool under_own_root(const char *job, const char *path)
{
    size_t jl = strlen(job);
    return g_str_has_prefix(path, "_state/") && strncmp(path + 7, job, jl) == 0 &&
           (path[7 + jl] == '/' || path[7 + jl] == '\0');
}

/* "_state/<X>/..." (local): the interned X, else NULL. */
static const char *state_owner(const char *path)
{
    if (!g_str_has_prefix(path, "_state/"))
        return NULL;
    const char *j = path + 7, *e = strchr(j, '/');
    size_t l = e ? (size_t)(e - j) : strlen(j);
    char buf[CK_JOB_ID_MAX + 1];
    if (!ck_is_job_id(j, l))
        return NULL;
    memcpy(buf, j, l);
    buf[l] = '\0';
    return ck_intern(buf);
}

/* The state location r reads (ck_restore_location), as the key on which
 * two jobs' reads meet: a marker may name a root inside the checkpoint
 * directory by its absolute path (under an external_root= that allows
 * it), which is the same location as the local root, so such a key is the
 * local one.  *local: the key is local.  NULL: no location. */
static char *location_key(char *const self[2], const CkRestore *r, bool *local)
{
    char *loc = ck_restore_location(r);
    *local = r->root_kind == CK_ROOT_LOCAL;
    if (!loc || r->root_kind != CK_ROOT_EXTERNAL)
        return loc;
    for (int i = 0; i < 2; i++) {
        if (!self[i] || !ck_path_is_under(loc, self[i]))
            continue;
        const char *rest = loc + strlen(self[i]);
        while (*rest == '/')
            rest++;
        char *key = g_strdup(rest);
        g_free(loc);
        *local = true;
        return key;
    }
    return loc;
}

/* A location no other job can share: inside the job's own root, when no
 * other job reads anything in that root. */
static bool location_private(const CkJobInfo *j, const CkRestore *r, const char *loc,
                             GHashTable *hot)
{
    return r->root_kind == CK_ROOT_LOCAL && under_own_root(j->job, loc) &&
           !g_hash_table_contains(hot, j->job);
}

static void index_location(GHashTable *by_loc, const char *loc, const char *job)
{
    GPtrArray *js = g_hash_table_lookup(by_loc, loc);
    if (!js) {
        js = g_ptr_array_new();
        g_hash_table_insert(by_loc, (gpointer)loc, js);
    }
    if (!g_ptr_array_find(js, job, NULL))
        g_ptr_array_add(js, (gpointer)job);
}

/* answers below are padded with NULLs: an unref that takes them */
static void ptr_array_unref0(gpointer p)
{
    if (p)
        g_ptr_array_unref(p);
}

/* shared_with for every checkpoint of every job in `jobs` (id -> JobPriv*):
 * the other jobs whose restorable markers read the same state location
 * (ck_restore_location: the same root and generation, whatever subtasks
 * each reads).  Jobs in `fresh` (not yet published) are filled in place; a
 * published job whose answer changes is replaced by a clone.  Only
 * locations that can be shared are hashed: those outside the reader's own
 * root, and the own-root locations of jobs whose root another job reads
 * ("hot") -- so 10,000 jobs that keep to their own roots cost one pass and
 * no hashing.  *hot_out gets the ids whose root another job reads. */
static void compute_shared(char *const self[2], GHashTable *jobs, GHashTable *fresh,
                           GPtrArray *changed, guint64 *next_version, GHashTable **hot_out)
{
    g_autoptr(GHashTable) by_loc =
        g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_ptr_array_unref);
    g_autoptr(GHashTable) hot = g_hash_table_new(g_direct_hash, g_direct_equal);
    GStringChunk *locs = g_string_chunk_new(4096); /* the keys of by_loc */
    GHashTableIter it;
    gpointer key, val;
    /* pass 1: locations outside their own root; note whose roots they enter */
    g_hash_table_iter_init(&it, jobs);
    while (g_hash_table_iter_next(&it, &key, &val)) {
        const JobPriv *jp = val;
        if (jp->private_reads)
            continue; /* no read outside its own root */
        for (guint i = 0; i < jp->pub.checkpoints->len; i++) {
            const CkRestore *r = ((CkCheckpointInfo *)jp->pub.checkpoints->pdata[i])->restore;
            bool local;
            g_autofree char *loc = location_key(self, r, &local);
            if (!loc || (r->root_kind == CK_ROOT_LOCAL && under_own_root(jp->pub.job, loc)))
                continue;
            index_location(by_loc, g_string_chunk_insert_const(locs, loc), jp->pub.job);
            const char *owner = local ? state_owner(loc) : NULL;
            if (owner)
                g_hash_table_add(hot, (gpointer)owner);
        }
    }
    /* pass 2: the own-root locations of hot jobs */
    g_hash_table_iter_init(&it, hot);
    while (g_hash_table_iter_next(&it, &key, NULL)) {
        const JobPriv *jp = g_hash_table_lookup(jobs, key);
        for (guint i = 0; jp && i < jp->pub.checkpoints->len; i++) {
            const CkRestore *r = ((CkCheckpointInfo *)jp->pub.checkpoints->pdata[i])->restore;
            if (r->root_kind != CK_ROOT_LOCAL)
                continue;
            g_autofree char *loc = ck_restore_location(r);
            if (loc && under_own_root(jp->pub.job, loc))
                index_location(by_loc, g_string_chunk_insert_const(locs, loc), jp->pub.job);
        }
    }
    g_autoptr(GPtrArray) replace = g_ptr_array_new();
    g_hash_table_iter_init(&it, jobs);
    while (g_hash_table_iter_next(&it, &key, &val)) {
        JobPriv *jp = val;
        /* every read private, none shared before: the answers stay empty */
        if (jp->private_reads && !jp->any_shared && !g_hash_table_contains(hot, key))
            continue;
        bool is_fresh = fresh && g_hash_table_contains(fresh, key);
        GPtrArray *answers = NULL; /* per checkpoint, NULL: none */
        bool differs = false;
        for (guint i = 0; i < jp->pub.checkpoints->len; i++) {
            CkCheckpointInfo *cp = jp->pub.checkpoints->pdata[i];
            GPtrArray *sw = NULL;
            const CkRestore *r = cp->restore;
            bool local;
            g_autofree char *loc = location_key(self, r, &local);
            GPtrArray *js = loc && !location_private(&jp->pub, r, loc, hot)
                                ? g_hash_table_lookup(by_loc, loc)
                                : NULL;
            for (guint x = 0; js && x < js->len; x++) {
                if (js->pdata[x] == jp->pub.job)
                    continue;
                if (!sw)
                    sw = g_ptr_array_new();
                g_ptr_array_add(sw, js->pdata[x]);
            }
            if (sw)
                g_ptr_array_sort(sw, cmp_str);
            static const GPtrArray empty = {NULL, 0};
            if (!same_string_sets(sw ? sw : &empty, cp->shared_with))
                differs = true;
            if (sw || differs) {
                if (!answers)
                    answers = g_ptr_array_new_with_free_func(ptr_array_unref0);
                while (answers->len < i)
                    g_ptr_array_add(answers, NULL);
                g_ptr_array_add(answers, sw ? sw : g_ptr_array_new());
            }
        }
        if (!answers || !differs) {
            if (answers)
                g_ptr_array_unref(answers);
            continue;
        }
        JobPriv *target = jp;
        if (!is_fresh) {
            target = job_clone(jp);
            target->pub.version = ++*next_version;
            g_ptr_array_add(replace, target);
        }
        target->any_shared = false;
        for (guint i = 0; i < target->pub.checkpoints->len; i++) {
            CkCheckpointInfo *cp = target->pub.checkpoints->pdata[i];
            GPtrArray *a = i < answers->len ? answers->pdata[i] : NULL;
            g_ptr_array_unref(cp->shared_with);
            cp->shared_with = a ? g_ptr_array_ref(a) : g_ptr_array_new();
            if (cp->shared_with->len)
                target->any_shared = true;
        }
        g_ptr_array_unref(answers);
    }
    for (guint i = 0; i < replace->len; i++) {
        JobPriv *cl = replace->pdata[i];
        g_hash_table_replace(jobs, (gpointer)cl->pub.job, cl); /* unrefs the old one */
        if (changed && !g_ptr_array_find(changed, cl->pub.job, NULL))
            g_ptr_array_add(changed, (gpointer)cl->pub.job);
    }
    g_hash_table_unref(*hot_out);
    *hot_out = g_steal_pointer(&hot);
    g_hash_table_destroy(g_steal_pointer(&by_loc)); /* before the keys go */
    g_string_chunk_free(locs);
}

/* A job that reads only inside its own root, shares nothing, and whose root
 * no other job reads. */
static bool keeps_to_itself(const CkCatalog *c, const JobPriv *jp)
{
    return jp->private_reads && !jp->any_shared && !g_hash_table_contains(c->hot, jp->pub.job);
}

static GPtrArray *keys_array(GHashTable *t)
{
    GPtrArray *out = g_ptr_array_sized_new(g_hash_table_size(t));
    GHashTableIter it;
    gpointer k;
    g_hash_table_iter_init(&it, t);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(out, k);
    return out;
}

/* ---- scanning ---- */

static GHashTable *table_copy(GHashTable *t)
{
    GHashTable *n = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                          (GDestroyNotify)ck_job_info_unref);
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, t);
    while (g_hash_table_iter_next(&it, &k, &v))
        g_hash_table_insert(n, k, ck_job_info_ref(v));
    return n;
}

/* A job's new snapshot, or NULL when nothing it depends on changed.  One
 * look at _jobs/<J> and _state/<J> serves both the comparison and the build;
 * *check gets what the cheap check will compare next time; errs[0] and
 * errs[1] (report_unreadable) the errno of an unreadable _jobs/<J> and
 * _state/<J>. */
static JobPriv *job_update(CkCatalog *c, const char *job, const JobPriv *old, bool top_changed,
                           CkRootCache *cache, char *buf, CheckStamp **check, int *errs)
{
    int jfd = ck_job_dir_open(c->dfd, job);
    if (jfd < 0 && unreadable_errno(-jfd))
        errs[0] = -jfd;
    CheckStamp *cs = g_new0(CheckStamp, 1);
    cs->pending = g_array_new(FALSE, FALSE, sizeof(PendingStamp));
    struct stat sb;
    /* stamped before the listing: a change during it shows at the next check */
    if (jfd >= 0 && fstat(jfd, &sb) == 0)
        cs->markers_dir = (DirStamp){true, sb.st_ino, mtime_ns_of(&sb)};
    DirStamp own =
        c->report_unreadable ? own_root_open(c, job, cache, &errs[1]) : own_root_stamp(c, job);
    cs->own_root = own;
    g_autoptr(GArray) inprog = g_array_new(FALSE, FALSE, sizeof(guint64));
    g_autoptr(GArray) st = ck_job_marker_list_full(jfd, inprog);
    for (guint i = 0; i < inprog->len; i++) {
        char p[48];
        guint64 n = g_array_index(inprog, guint64, i);
        g_snprintf(p, sizeof p, "chk-%" G_GUINT64_FORMAT, n);
        PendingStamp ps = {n, dir_stamp(jfd, p)};
        /* its COMPLETED written between the listing and the stamp: make
         * sure the next check sees a change */
        g_strlcat(p, "/COMPLETED", sizeof p);
        if (fstatat(jfd, p, &sb, AT_SYMLINK_NOFOLLOW) == 0)
            ps.st.mtime_ns = -1;
        g_array_append_val(cs->pending, ps);
    }
    *check = cs;
    if (c->progress)
        g_atomic_int_add(&c->progress->markers_known, (gint)st->len);
    bool reeval = false, same = false;
    if (old) {
        reeval = !dir_stamp_equal(own, old->own_root) || (top_changed && old->uses_top);
        same = !reeval && (jfd >= 0) == old->pub.has_markers_dir && st->len == old->stamps->len &&
               (st->len == 0 ||
                memcmp(st->data, old->stamps->data, st->len * sizeof(CkMarkerStamp)) == 0);
    }
    JobPriv *jp = same ? NULL : job_build(c, job, jfd, own, old, reeval, st, cache, buf);
    if (jfd >= 0)
        close(jfd);
    if (c->progress)
        g_atomic_int_inc(&c->progress->jobs_done);
    return jp;
}

guint ck_walk_threads(void)
{
    guint np = g_get_num_processors(); /* once: it can change between calls */
    return CLAMP(4 * np, 8, CK_WALK_THREADS_MAX);
}

typedef struct {
    CkCatalog *c;
    GHashTable *current; /* read-only while workers run */
    bool top_changed;
    GPtrArray *todo; /* sorted interned ids */
    JobPriv **results;
    CheckStamp **checks;
    int *errs; /* two per job: job_update's */
    gint next; /* atomic index into todo */
} BuildWork;

static gpointer build_worker(gpointer p)
{
    BuildWork *bw = p;
    g_autoptr(CkRootCache) cache = ck_root_cache_new();
    g_autofree char *buf = g_malloc(MARKER_BUF);
    for (;;) {
        gint i = g_atomic_int_add(&bw->next, 1);
        if (i >= (gint)bw->todo->len)
            break;
        const char *job = bw->todo->pdata[i];
        const JobPriv *old = g_hash_table_lookup(bw->current, job);
        bw->results[i] = job_update(bw->c, job, old, bw->top_changed, cache, buf, &bw->checks[i],
                                    &bw->errs[2 * i]);
    }
    return NULL;
}

/* Under c->lock, after a full listing: the first directory it could not
 * open (ck_catalog_unreadable). */
static void note_unreadable(CkCatalog *c, const int top_errs[2], const BuildWork *bw)
{
    static const char *const tops[] = {"_jobs", "_state"};
    g_clear_pointer(&c->unreadable_where, g_free);
    c->unreadable_err = 0;
    for (guint t = 0; t < 2; t++)
        if (top_errs[t] && unreadable_errno(top_errs[t])) {
            c->unreadable_err = top_errs[t];
            c->unreadable_where = g_strdup(tops[t]);
            return;
        }
    for (guint t = 0; t < 2; t++) /* every _jobs/<J> before any _state/<J>, as listed */
        for (guint i = 0; i < bw->todo->len; i++)
            if (bw->errs[2 * i + t]) {
                c->unreadable_err = bw->errs[2 * i + t];
                c->unreadable_where = g_strconcat(tops[t], "/", bw->todo->pdata[i], NULL);
                return;
            }
}

typedef enum {
    RB_FULL,  /* re-list _jobs and _state, look at every job */
    RB_LIGHT, /* re-list only if _jobs, _state or the top level changed; look at new jobs
                 (and, when the top level changed, at those that depend on it) */
    RB_JOBS,  /* look at the given jobs only */
} RbMode;

#define IN_PLACE_MAX 64 /* jobs a rebuild may change in the published table */

/* True when the jobs a rebuild changed kept to themselves before and after
 * (keeps_to_itself): then no other job's shared_with can change and theirs
 * stay empty, so compute_shared has nothing to do. */
static bool sharing_unaffected(const CkCatalog *c, GHashTable *cur, const BuildWork *bw,
                               const GPtrArray *gone)
{
    for (guint i = 0; i < gone->len; i++) {
        const JobPriv *o = g_hash_table_lookup(cur, gone->pdata[i]);
        if (o && !keeps_to_itself(c, o))
            return false;
    }
    for (guint i = 0; i < bw->todo->len; i++) {
        if (!bw->results[i])
            continue;
        const JobPriv *o = g_hash_table_lookup(cur, bw->todo->pdata[i]);
        if (!keeps_to_itself(c, bw->results[i]) || (o && !keeps_to_itself(c, o)))
            return false;
    }
    return true;
}

/* Whether the job list changes (before the changes are applied to t). */
static bool names_change(GHashTable *t, const BuildWork *bw, const GPtrArray *gone)
{
    for (guint i = 0; i < gone->len; i++)
        if (g_hash_table_contains(t, gone->pdata[i]))
            return true;
    for (guint i = 0; i < bw->todo->len; i++)
        if (bw->results[i] && !g_hash_table_contains(t, bw->todo->pdata[i]))
            return true;
    return false;
}

/* Applies a rebuild's results to t: drops the jobs gone, puts in the new
 * snapshots with new versions.  Returns the change in markers.  fresh
 * (optional) gets the ids put in, changed (optional) those and the ids gone. */
static gint64 apply_changes(CkCatalog *c, GHashTable *t, const BuildWork *bw, const GPtrArray *gone,
                            GPtrArray *changed, GHashTable *fresh)
{
    gint64 delta = 0;
    for (guint i = 0; i < gone->len; i++) {
        const JobPriv *o = g_hash_table_lookup(t, gone->pdata[i]);
        if (o)
            delta -= o->pub.checkpoints->len;
        g_hash_table_remove(t, gone->pdata[i]);
        if (changed)
            g_ptr_array_add(changed, gone->pdata[i]);
    }
    for (guint i = 0; i < bw->todo->len; i++) {
        JobPriv *jp = bw->results[i];
        if (!jp)
            continue;
        const char *job = bw->todo->pdata[i];
        const JobPriv *o = g_hash_table_lookup(t, job);
        if (o)
            delta -= o->pub.checkpoints->len;
        delta += jp->pub.checkpoints->len;
        jp->pub.version = ++c->next_version;
        g_hash_table_replace(t, (gpointer)job, jp); /* unrefs the old one */
        if (fresh)
            g_hash_table_add(fresh, (gpointer)job);
        if (changed)
            g_ptr_array_add(changed, (gpointer)job);
    }
    return delta;
}

/* Rebuilds what `mode` says (RB_JOBS: the interned ids in `jobs`).
 * Publishes the result only when something changed; changed (optional)
 * gets the ids whose snapshot changed (added, removed, replaced). */
static void rebuild(CkCatalog *c, RbMode mode, GPtrArray *jobs, GPtrArray *changed)
{
    g_mutex_lock(&c->scan_lock);
    g_mutex_lock(&c->lock);
    GHashTable *cur = g_hash_table_ref(c->jobs);
    DirStamp old_top = c->top, old_jobs = c->jobs_dir, old_state = c->state_dir;
    g_mutex_unlock(&c->lock);

    g_autoptr(GHashTable) names = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GPtrArray) gone = g_ptr_array_new();
    GPtrArray *not_jobs = NULL;
    DirStamp top = old_top, jd = old_jobs, sd = old_state;
    bool top_changed = false; /* a refresh of given jobs never looks at the top level */
    int top_errs[2] = {0, 0}; /* of listing _jobs, _state */
    if (c->only_job && mode != RB_JOBS) {
        mode = RB_JOBS;
        jobs = NULL;
    }
    if (mode == RB_JOBS) {
        guint n = jobs ? jobs->len : 1;
        for (guint i = 0; i < n; i++) {
            const char *job = jobs ? jobs->pdata[i] : c->only_job;
            if (c->only_job && job != c->only_job)
                continue;
            char p[CK_JOB_ID_MAX + 16];
            g_snprintf(p, sizeof p, "_jobs/%s", job);
            if (dir_stamp(c->dfd, p).exists || own_root_stamp(c, job).exists)
                g_hash_table_add(names, (gpointer)job);
            else if (g_hash_table_contains(cur, job))
                g_ptr_array_add(gone, (gpointer)job);
        }
    } else {
        top = dir_stamp(c->dfd, ".");
        jd = dir_stamp(c->dfd, "_jobs");
        sd = dir_stamp(c->dfd, "_state");
        top_changed = !dir_stamp_equal(top, old_top);
        bool relist =
            mode == RB_FULL || !dir_stamp_equal(jd, old_jobs) || !dir_stamp_equal(sd, old_state);
        g_autoptr(GHashTable) listed = g_hash_table_new(g_direct_hash, g_direct_equal);
        if (relist) {
            not_jobs = g_ptr_array_new_with_free_func(g_free);
            top_errs[0] = -ck_list_job_dirs(c->dfd, "_jobs", listed, not_jobs);
            top_errs[1] = -ck_list_job_dirs(c->dfd, "_state", listed, not_jobs);
            g_ptr_array_sort(not_jobs, cmp_str);
            GHashTableIter it;
            gpointer k, v;
            g_hash_table_iter_init(&it, cur);
            while (g_hash_table_iter_next(&it, &k, &v))
                if (!g_hash_table_contains(listed, k))
                    g_ptr_array_add(gone, k);
        }
        if (mode == RB_FULL) {
            g_hash_table_unref(names);
            names = g_hash_table_ref(listed);
        } else {
            GHashTableIter it;
            gpointer k, v;
            g_hash_table_iter_init(&it, listed);
            while (g_hash_table_iter_next(&it, &k, NULL))
                if (!g_hash_table_contains(cur, k))
                    g_hash_table_add(names, k);
            if (top_changed) {
                g_hash_table_iter_init(&it, cur);
                while (g_hash_table_iter_next(&it, &k, &v))
                    if (((JobPriv *)v)->uses_top && !g_ptr_array_find(gone, k, NULL))
                        g_hash_table_add(names, k);
            }
        }
    }

    /* Jobs are independent: build them on several threads (each with its
     * own memo), then merge in name order so versions are deterministic.
     * More threads than processors (ck_walk_threads). */
    BuildWork bw = {c, cur, top_changed, keys_array(names), NULL, NULL, NULL, 0};
    g_ptr_array_sort(bw.todo, cmp_str);
    bw.results = g_new0(JobPriv *, bw.todo->len + 1);
    bw.checks = g_new0(CheckStamp *, bw.todo->len + 1);
    bw.errs = g_new0(int, 2 * bw.todo->len + 2);
    if (c->progress)
        g_atomic_int_set(&c->progress->jobs_total, (gint)bw.todo->len);
    guint nthreads = ck_walk_threads();
    if (bw.todo->len < 256)
        nthreads = 1;
    if (nthreads <= 1) {
        build_worker(&bw);
    } else {
        GThread *th[CK_WALK_THREADS_MAX];
        for (guint i = 0; i < nthreads; i++)
            th[i] = g_thread_new("ck-catalog", build_worker, &bw);
        for (guint i = 0; i < nthreads; i++)
            g_thread_join(th[i]);
    }
    bool any = gone->len > 0;
    for (guint i = 0; i < bw.todo->len && !any; i++)
        any = bw.results[i] != NULL;
    /* The usual change, a job's own marker, is applied in place: a copy of
     * the table and compute_shared's pass over every job would cost what
     * the catalog holds (3 ms at 10,000 jobs) for an answer that cannot
     * change.  Readers see the table only under c->lock (snapshot_table
     * copies it), so an in-place change under that lock is safe. */
    guint n_results = gone->len;
    for (guint i = 0; i < bw.todo->len; i++)
        n_results += bw.results[i] != NULL;
    /* (a big batch, as a rescan after a burst, is built aside: readers
     * would wait for its application under c->lock) */
    bool in_place = any && n_results <= IN_PLACE_MAX && sharing_unaffected(c, cur, &bw, gone);
    GHashTable *next = NULL;
    gint64 delta = 0;
    if (any && !in_place) {
        /* a new table only when something changed: an idle look copies nothing */
        next = table_copy(cur);
        g_autoptr(GHashTable) fresh = g_hash_table_new(g_direct_hash, g_direct_equal);
        delta = apply_changes(c, next, &bw, gone, changed, fresh);
        compute_shared(c->self, next, fresh, changed, &c->next_version, &c->hot);
    }

    g_mutex_lock(&c->lock);
    if (any && names_change(c->jobs, &bw, gone))
        c->names_version++;
    if (in_place) {
        delta = apply_changes(c, c->jobs, &bw, gone, changed, NULL);
    } else if (any) {
        g_hash_table_unref(c->jobs);
        c->jobs = next;
    }
    c->n_markers = (guint)((gint64)c->n_markers + delta);
    for (guint i = 0; i < gone->len; i++) {
        g_hash_table_remove(c->checks, gone->pdata[i]);
        g_hash_table_remove(c->pending_jobs, gone->pdata[i]);
    }
    for (guint i = 0; i < bw.todo->len; i++) {
        if (!bw.checks[i])
            continue;
        if (bw.checks[i]->pending->len)
            g_hash_table_add(c->pending_jobs, bw.todo->pdata[i]);
        else
            g_hash_table_remove(c->pending_jobs, bw.todo->pdata[i]);
        g_hash_table_replace(c->checks, bw.todo->pdata[i], bw.checks[i]);
    }
    if (not_jobs) {
        g_ptr_array_unref(c->not_jobs);
        c->not_jobs = not_jobs;
    }
    if (mode != RB_JOBS) {
        c->top = top;
        c->jobs_dir = jd;
        c->state_dir = sd;
    }
    if (c->report_unreadable && mode == RB_FULL && !c->only_job)
        note_unreadable(c, top_errs, &bw);
    g_mutex_unlock(&c->lock);
    g_free(bw.results);
    g_free(bw.checks);
    g_free(bw.errs);
    g_ptr_array_unref(bw.todo);
    g_hash_table_unref(cur);
    g_mutex_unlock(&c->scan_lock);
}

static CkCatalog *catalog_new(const char *dir, const CkCatalogOptions *opts, const char *only_job,
                              GError **error)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s", dir, g_strerror(e));
        return NULL;
    }
    CkCatalog *c = g_new0(CkCatalog, 1);
    c->dir = g_strdup(dir);
    c->dfd = fd;
    g_autofree char *given = g_canonicalize_filename(dir, NULL);
    c->self[0] = ck_path_normalize_abs(given);
    char *real = realpath(dir, NULL);
    if (real && strcmp(real, c->self[0]) != 0)
        c->self[1] = g_strdup(real);
    free(real);
    if (opts) {
        c->ropts.legacy_backend = g_strdup(opts->resolve.legacy_backend);
        if (opts->resolve.legacy_backends)
            c->ropts.legacy_backends = g_hash_table_ref(opts->resolve.legacy_backends);
        if (opts->resolve.external_roots)
            c->ropts.external_roots = g_ptr_array_ref(opts->resolve.external_roots);
    }
    c->views_name = g_strdup(opts && opts->views_name ? opts->views_name : "_views");
    g_mutex_init(&c->lock);
    g_mutex_init(&c->scan_lock);
    c->jobs = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                    (GDestroyNotify)ck_job_info_unref);
    c->not_jobs = g_ptr_array_new_with_free_func(g_free);
    c->checks = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, check_stamp_free);
    c->pending_jobs = g_hash_table_new(g_direct_hash, g_direct_equal);
    c->hot = g_hash_table_new(g_direct_hash, g_direct_equal);
    c->top.exists = false;
    c->only_job = only_job ? ck_intern(only_job) : NULL;
    c->progress = opts ? opts->progress : NULL;
    c->report_unreadable = opts && opts->report_unreadable;
    rebuild(c, RB_FULL, NULL, NULL);
    c->progress = NULL; /* the caller's counters need not outlive the open */
    return c;
}

CkCatalog *ck_catalog_open(const char *dir, const CkCatalogOptions *opts, GError **error)
{
    return catalog_new(dir, opts, NULL, error);
}

CkCatalog *ck_catalog_open_job(const char *dir, const char *job, const CkCatalogOptions *opts,
                               GError **error)
{
    if (!ck_is_job_id(job, strlen(job))) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: not a job id", job);
        return NULL;
    }
    return catalog_new(dir, opts, job, error);
}

void ck_catalog_free(CkCatalog *c)
{
    if (!c)
        return;
    g_hash_table_unref(c->jobs);
    g_hash_table_unref(c->checks);
    g_hash_table_unref(c->pending_jobs);
    g_hash_table_unref(c->hot);
    g_ptr_array_unref(c->not_jobs);
    g_free(c->ropts.legacy_backend);
    if (c->ropts.legacy_backends)
        g_hash_table_unref(c->ropts.legacy_backends);
    if (c->ropts.external_roots)
        g_ptr_array_unref(c->ropts.external_roots);
    g_mutex_clear(&c->lock);
    g_mutex_clear(&c->scan_lock);
    close(c->dfd);
    g_free(c->unreadable_where);
    g_free(c->views_name);
    g_free(c->dir);
    g_free(c->self[0]);
    g_free(c->self[1]);
    g_free(c);
}

guint64 ck_catalog_names_version(CkCatalog *c)
{
    g_mutex_lock(&c->lock);
    guint64 v = c->names_version;
    g_mutex_unlock(&c->lock);
    return v;
}

GPtrArray *ck_catalog_job_names(CkCatalog *c)
{
    g_mutex_lock(&c->lock);
    GPtrArray *out = keys_array(c->jobs);
    g_mutex_unlock(&c->lock);
    g_ptr_array_sort(out, cmp_str);
    return out;
}

CkJobInfo *ck_catalog_get_job(CkCatalog *c, const char *job)
{
    const char *ij = ck_intern(job);
    g_mutex_lock(&c->lock);
    CkJobInfo *j = ck_job_info_ref(g_hash_table_lookup(c->jobs, ij));
    g_mutex_unlock(&c->lock);
    return j;
}

bool ck_catalog_refresh_job(CkCatalog *c, const char *job)
{
    if (!ck_is_job_id(job, strlen(job)))
        return false;
    const char *ij = ck_intern(job);
    if (c->only_job && ij != c->only_job)
        return false;
    g_autoptr(GPtrArray) one = g_ptr_array_new();
    g_ptr_array_add(one, (gpointer)ij);
    g_autoptr(GPtrArray) changed = g_ptr_array_new();
    rebuild(c, RB_JOBS, one, changed);
    return g_ptr_array_find(changed, ij, NULL);
}

void ck_catalog_refresh_jobs(CkCatalog *c, GPtrArray *jobs, GPtrArray *changed_out)
{
    g_autoptr(GPtrArray) valid = g_ptr_array_sized_new(jobs->len);
    for (guint i = 0; i < jobs->len; i++) {
        const char *j = jobs->pdata[i];
        if (ck_is_job_id(j, strlen(j)))
            g_ptr_array_add(valid, (gpointer)ck_intern(j));
    }
    if (valid->len)
        rebuild(c, RB_JOBS, valid, changed_out);
}

void ck_catalog_rescan(CkCatalog *c, GPtrArray *changed_out)
{
    rebuild(c, RB_FULL, NULL, changed_out);
}

void ck_catalog_check_top(CkCatalog *c, GPtrArray *changed_out)
{
    rebuild(c, RB_LIGHT, NULL, changed_out);
}

bool ck_catalog_job_check(CkCatalog *c, const char *job)
{
    const char *ij = ck_intern(job);
    g_mutex_lock(&c->lock);
    const CheckStamp *cs = g_hash_table_lookup(c->checks, ij);
    DirStamp md = {0}, own = {0};
    g_autoptr(GArray) pending = NULL;
    if (cs) {
        md = cs->markers_dir;
        own = cs->own_root;
        pending = g_array_ref(cs->pending);
    }
    g_mutex_unlock(&c->lock);
    if (!cs)
        return true;
    char p[CK_JOB_ID_MAX + 48];
    g_snprintf(p, sizeof p, "_jobs/%s", ij);
    if (!dir_stamp_equal(dir_stamp(c->dfd, p), md) || !dir_stamp_equal(own_root_stamp(c, ij), own))
        return true;
    for (guint i = 0; i < pending->len; i++) {
        const PendingStamp *ps = &g_array_index(pending, PendingStamp, i);
        g_snprintf(p, sizeof p, "_jobs/%s/chk-%" G_GUINT64_FORMAT, ij, (guint64)ps->n);
        if (!dir_stamp_equal(dir_stamp(c->dfd, p), ps->st))
            return true;
    }
    return false;
}

bool ck_catalog_job_stale(CkCatalog *c, const char *job)
{
    if (ck_catalog_job_check(c, job))
        return true;
    const char *ij = ck_intern(job);
    g_mutex_lock(&c->lock);
    const JobPriv *jp = g_hash_table_lookup(c->jobs, ij);
    g_autoptr(GArray) stamps = jp ? g_array_ref(jp->stamps) : NULL; /* never changed once set */
    g_mutex_unlock(&c->lock);
    return stamps && !ck_marker_stamps_current(c->dfd, ij, stamps);
}

GPtrArray *ck_catalog_pending_jobs(CkCatalog *c)
{
    g_mutex_lock(&c->lock);
    GPtrArray *out = keys_array(c->pending_jobs);
    g_mutex_unlock(&c->lock);
    return out;
}

int ck_catalog_unreadable(CkCatalog *c, char **where)
{
    g_mutex_lock(&c->lock);
    int e = c->unreadable_err;
    if (e && where)
        *where = g_strdup(c->unreadable_where);
    g_mutex_unlock(&c->lock);
    return e ? -e : 0;
}

int ck_catalog_dirfd(CkCatalog *c)
{
    return c->dfd;
}

GArray *ck_catalog_pending_checkpoints(CkCatalog *c, const char *job)
{
    GArray *out = g_array_new(FALSE, FALSE, sizeof(guint64));
    const char *ij = ck_intern(job);
    g_mutex_lock(&c->lock);
    const CheckStamp *cs = g_hash_table_lookup(c->checks, ij);
    for (guint i = 0; cs && i < cs->pending->len; i++) {
        guint64 n = g_array_index(cs->pending, PendingStamp, i).n;
        g_array_append_val(out, n);
    }
    g_mutex_unlock(&c->lock);
    return out;
}

guint ck_catalog_n_jobs(CkCatalog *c)
{
    g_mutex_lock(&c->lock);
    guint n = g_hash_table_size(c->jobs);
    g_mutex_unlock(&c->lock);
    return n;
}

guint ck_catalog_n_markers(CkCatalog *c)
{
    g_mutex_lock(&c->lock);
    guint n = c->n_markers;
    g_mutex_unlock(&c->lock);
    return n;
}

/* A consistent view of every job: a copy of the table, its snapshots shared. */
static GHashTable *snapshot_table(CkCatalog *c)
{
    g_mutex_lock(&c->lock);
    GHashTable *t = table_copy(c->jobs); /* a rebuild may change c->jobs in place */
    g_mutex_unlock(&c->lock);
    return t;
}

static GPtrArray *sorted_jobs(GHashTable *t)
{
    GPtrArray *keys = keys_array(t);
    g_ptr_array_sort(keys, cmp_str);
    GPtrArray *out = g_ptr_array_new_full(keys->len, NULL);
    for (guint i = 0; i < keys->len; i++)
        g_ptr_array_add(out, g_hash_table_lookup(t, keys->pdata[i]));
    g_ptr_array_unref(keys);
    return out;
}

/* ---- layers ---- */

static void layer_free(gpointer p)
{
    CkLayer *l = p;
    g_free(l->prefix);
    g_free(l->backing);
    g_free(l);
}

static CkLayer *layer_new(char *prefix, const char *backing, bool local, const char *source,
                          const CkRestore *r)
{
    CkLayer *l = g_new0(CkLayer, 1);
    l->prefix = prefix;
    l->backing = g_strdup(backing);
    l->local = local;
    l->source = source;
    l->has_generation = r ? r->has_generation : false;
    l->generation = r ? r->generation : 0;
    return l;
}

static const char *source_of(const CkJobInfo *j, const CkRestore *r, const char *read)
{
    if (r->root_kind == CK_ROOT_EXTERNAL)
        return "external";
    return under_own_root(j->job, read) ? "own" : "legacy";
}

GPtrArray *ck_job_state_layers(const CkJobInfo *j)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(layer_free);
    if (j->has_own_root) {
        g_autofree char *own = g_strconcat("_state/", j->job, NULL);
        g_ptr_array_add(out, layer_new(g_strdup(""), own, true, "own", NULL));
    }
    g_autoptr(GHashTable) seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    /* Newest checkpoint first: where two disagree about one prefix, the newer wins. */
    for (guint i = j->checkpoints->len; i-- > 0;) {
        const CkCheckpointInfo *cp = j->checkpoints->pdata[i];
        const CkRestore *r = cp->restore;
        if (!r->restorable || r->root_kind == CK_ROOT_REMOTE || r->root_kind == CK_ROOT_NONE)
            continue;
        if (r->foreign_job)
            continue; /* another job's root: never shown as this job's state */
        for (guint k = 0; k < r->reads->len; k++) {
            const char *rd = r->reads->pdata[k];
            if (r->root_kind == CK_ROOT_LOCAL && under_own_root(j->job, rd))
                continue; /* already the own layer */
            guint32 s = g_array_index(r->subtasks, guint32, k);
            char *prefix = r->has_generation ? g_strdup_printf("v%" G_GUINT64_FORMAT "/%u",
                                                               (guint64)r->generation, s)
                                             : g_strdup_printf("%u", s);
            g_autofree char *key = g_strconcat(prefix, "\n", rd, NULL);
            if (!g_hash_table_add(seen, g_steal_pointer(&key))) {
                g_free(prefix);
                continue;
            }
            g_ptr_array_add(
                out, layer_new(prefix, rd, r->root_kind == CK_ROOT_LOCAL, source_of(j, r, rd), r));
        }
    }
    return out;
}

GPtrArray *ck_job_checkpoint_layers(const CkJobInfo *j, const CkCheckpointInfo *cp)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(layer_free);
    const CkRestore *r = cp->restore;
    if (!r->restorable || r->root_kind == CK_ROOT_REMOTE || r->root_kind == CK_ROOT_NONE)
        return out;
    for (guint k = 0; k < r->reads->len; k++) {
        const char *rd = r->reads->pdata[k];
        guint32 s = g_array_index(r->subtasks, guint32, k);
        g_ptr_array_add(out, layer_new(g_strdup_printf("%u", s), rd, r->root_kind == CK_ROOT_LOCAL,
                                       source_of(j, r, rd), r));
    }
    return out;
}

/* ---- restore text ---- */

char *ck_job_restore_text(const CkJobInfo *j)
{
    GString *s = g_string_new(NULL);
    for (guint i = 0; i < j->checkpoints->len; i++) {
        const CkCheckpointInfo *cp = j->checkpoints->pdata[i];
        if (i)
            g_string_append_c(s, '\n');
        ck_restore_describe(s, cp->restore, NULL, cp->shared_with, cp->unknown);
    }
    /* the views keep it while the job's snapshot lives: not the GString's
     * doubled capacity */
    gsize len = s->len;
    return g_realloc(g_string_free(s, FALSE), len + 1);
}

/* ---- sizes ---- */

typedef struct {
    guint64 dev, ino;
} DevIno;

static guint devino_hash(gconstpointer p)
{
    const DevIno *d = p;
    return (guint)(d->ino * 2654435761u) ^ (guint)d->dev;
}

static gboolean devino_equal(gconstpointer a, gconstpointer b)
{
    const DevIno *x = a, *y = b;
    return x->dev == y->dev && x->ino == y->ino;
}

/* A job's walk sees a handful of directories (one per subtask and
 * generation it reads): a short array, and a hash table only past it. */
#define SEEN_FEW 16

typedef struct {
    /* DevIno: directories and multiply linked files already counted; in
     * few[] until there are more than SEEN_FEW, then all in seen */
    DevIno few[SEEN_FEW];
    guint nfew;
    GHashTable *seen;
    bool blocks; /* du-like st_blocks*512, else st_size of regular files */
    guint64 bytes;
} SizeWalk;

static bool first_time(SizeWalk *w, const struct stat *sb)
{
    DevIno k = {sb->st_dev, sb->st_ino};
    if (!w->seen) {
        for (guint i = 0; i < w->nfew; i++)
            if (w->few[i].ino == k.ino && w->few[i].dev == k.dev)
                return false;
        if (w->nfew < SEEN_FEW) {
            w->few[w->nfew++] = k;
            return true;
        }
        w->seen = g_hash_table_new_full(devino_hash, devino_equal, g_free, NULL);
        for (guint i = 0; i < w->nfew; i++)
            g_hash_table_add(w->seen, g_memdup2(&w->few[i], sizeof k));
    }
    if (g_hash_table_contains(w->seen, &k))
        return false;
    g_hash_table_add(w->seen, g_memdup2(&k, sizeof k));
    return true;
}

static void walk_dir(SizeWalk *w, int fd, int depth);

/* Counts entry `name` of directory pfd (not followed if a symlink). */
static void walk_entry(SizeWalk *w, int pfd, const char *name, int depth)
{
    struct stat sb;
    if (fstatat(pfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return;
    if (S_ISDIR(sb.st_mode)) {
        if (depth > 64 || !first_time(w, &sb))
            return;
        if (w->blocks)
            w->bytes += (guint64)sb.st_blocks * 512;
        int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            walk_dir(w, fd, depth + 1);
        return;
    }
    if (sb.st_nlink > 1 && !first_time(w, &sb))
        return;
    if (w->blocks)
        w->bytes += (guint64)sb.st_blocks * 512;
    else if (S_ISREG(sb.st_mode))
        w->bytes += (guint64)sb.st_size;
}

static void walk_dir(SizeWalk *w, int fd, int depth)
{
    CkDirIter it;
    ck_dir_iter_init(&it, fd);
    const char *nm;
    unsigned char t;
    while ((nm = ck_dir_iter_next(&it, &t)) != NULL)
        walk_entry(w, fd, nm, depth);
    close(fd);
}

/* Opens a path a restore reads: a local one beneath dfd, an external one
 * beneath its external_root prefix (ext), through no symlink either way. */
static int open_read(int dfd, const GPtrArray *ext, bool local, const char *path)
{
    return local ? ck_open_beneath(dfd, path, O_RDONLY | O_DIRECTORY, NULL)
                 : ck_open_external(ext, path, O_RDONLY | O_DIRECTORY, NULL);
}

/* Counts a path a restore reads (open_read's way). */
static void walk_read(SizeWalk *w, int dfd, const GPtrArray *ext, bool local, const char *path)
{
    int fd = open_read(dfd, ext, local, path);
    if (fd < 0) {
        /* not a directory (or gone): count the entry itself */
        g_autofree char *dir = g_path_get_dirname(path);
        g_autofree char *base = g_path_get_basename(path);
        int pfd = open_read(dfd, ext, local, strcmp(dir, ".") ? dir : "");
        if (pfd >= 0) {
            walk_entry(w, pfd, base, 0);
            close(pfd);
        }
        return;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !first_time(w, &sb)) {
        close(fd);
        return;
    }
    if (w->blocks)
        w->bytes += (guint64)sb.st_blocks * 512;
    walk_dir(w, fd, 1);
}

static void size_walk_init(SizeWalk *w, bool blocks)
{
    w->nfew = 0;
    w->seen = NULL;
    w->blocks = blocks;
    w->bytes = 0;
}

static void size_walk_clear(SizeWalk *w)
{
    if (w->seen)
        g_hash_table_unref(w->seen);
}

/* The reads a job's markers share (every checkpoint of one generation
 * reads the same <root>/v<G>/<S>): a short array of the distinct ones, a
 * hash table only when there are many. */
#define READS_FEW 32

typedef struct {
    const char *few[READS_FEW];
    guint nfew;
    GHashTable *many;
} ReadSet;

/* true when rd was not in the set (and is now) */
static bool read_set_add(ReadSet *s, const char *rd)
{
    if (!s->many) {
        for (guint i = 0; i < s->nfew; i++)
            if (s->few[i] == rd || strcmp(s->few[i], rd) == 0)
                return false;
        if (s->nfew < READS_FEW) {
            s->few[s->nfew++] = rd;
            return true;
        }
        s->many = g_hash_table_new(g_str_hash, g_str_equal);
        for (guint i = 0; i < s->nfew; i++)
            g_hash_table_add(s->many, (gpointer)s->few[i]);
    }
    return g_hash_table_add(s->many, (gpointer)rd);
}

guint64 ck_catalog_job_bytes(CkCatalog *c, const CkJobInfo *j)
{
    SizeWalk w;
    size_walk_init(&w, false);
    ReadSet done = {.nfew = 0, .many = NULL};
    for (guint i = 0; i < j->checkpoints->len; i++) {
        const CkRestore *r = ((CkCheckpointInfo *)j->checkpoints->pdata[i])->restore;
        if (!r->restorable)
            continue;
        for (guint k = 0; k < r->reads->len; k++) {
            const char *rd = r->reads->pdata[k];
            if (!read_set_add(&done, rd))
                continue;
            if (r->root_kind == CK_ROOT_LOCAL || r->root_kind == CK_ROOT_EXTERNAL)
                walk_read(&w, c->dfd, c->ropts.external_roots, r->root_kind == CK_ROOT_LOCAL, rd);
        }
    }
    if (done.many)
        g_hash_table_unref(done.many);
    size_walk_clear(&w);
    return w.bytes;
}

/* ---- hazards ---- */

static void hazard_free(gpointer p)
{
    CkHazard *h = p;
    g_ptr_array_unref(h->jobs);
    g_free(h->path);
    g_free(h->detail);
    g_free(h);
}

static CkHazard *hazard_add(GPtrArray *out, const char *kind, char *path, char *detail)
{
    CkHazard *h = g_new0(CkHazard, 1);
    h->kind = kind;
    h->jobs = g_ptr_array_new();
    h->path = path;
    h->detail = detail;
    h->collision = strcmp(kind, "shared-location") == 0 || strcmp(kind, "foreign-root") == 0;
    g_ptr_array_add(out, h);
    return h;
}

static int kind_rank(const char *k)
{
    static const char *order[] = {"shared-location", "foreign-root", "malformed",
                                  "cut-short",       "orphan-root",  "not-a-job"};
    for (int i = 0; i < 6; i++)
        if (strcmp(order[i], k) == 0)
            return i;
    return 6;
}

static gint cmp_hazard(gconstpointer a, gconstpointer b)
{
    const CkHazard *x = *(CkHazard *const *)a, *y = *(CkHazard *const *)b;
    int d = kind_rank(x->kind) - kind_rank(y->kind);
    if (d)
        return d;
    return strcmp(x->path, y->path);
}

GPtrArray *ck_catalog_hazards(CkCatalog *c)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(hazard_free);
    g_autoptr(GHashTable) t = snapshot_table(c);
    g_mutex_lock(&c->lock);
    g_autoptr(GPtrArray) not_jobs = g_ptr_array_ref(c->not_jobs);
    g_mutex_unlock(&c->lock);
    g_autoptr(GPtrArray) jobs = sorted_jobs(t);

    /* shared-location: every state location (root and generation) that
     * restorable markers of two or more jobs read, whatever their subtasks
     * (compute_shared found them: shared_with) */
    g_autoptr(GHashTable) by_loc =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_ptr_array_unref);
    g_autoptr(GPtrArray) locs = g_ptr_array_new();
    for (guint i = 0; i < jobs->len; i++) {
        const CkJobInfo *j = jobs->pdata[i];
        for (guint k = 0; k < j->checkpoints->len; k++) {
            const CkCheckpointInfo *cp = j->checkpoints->pdata[k];
            if (cp->shared_with->len == 0)
                continue;
            bool local;
            char *loc = location_key(c->self, cp->restore, &local);
            if (!loc)
                continue;
            GPtrArray *js = g_hash_table_lookup(by_loc, loc);
            if (!js) {
                js = g_ptr_array_new_with_free_func(g_free);
                g_hash_table_insert(by_loc, loc, js);
                g_ptr_array_add(locs, loc);
            } else {
                g_free(loc);
            }
            g_ptr_array_add(js, g_strdup_printf("%s:%" G_GUINT64_FORMAT, j->job, (guint64)cp->n));
        }
    }
    for (guint i = 0; i < locs->len; i++) {
        GPtrArray *who = g_hash_table_lookup(by_loc, locs->pdata[i]);
        g_autoptr(GPtrArray) names = g_ptr_array_new();
        for (guint k = 0; k < who->len; k++) {
            g_autofree char *jn =
                g_strndup(who->pdata[k], strrchr(who->pdata[k], ':') - (char *)who->pdata[k]);
            const char *ij = ck_intern(jn);
            if (!g_ptr_array_find(names, ij, NULL))
                g_ptr_array_add(names, (gpointer)ij);
        }
        if (names->len < 2)
            continue;
        g_ptr_array_sort(names, cmp_str);
        g_autoptr(GString) d = g_string_new("read by the restores of ");
        for (guint k = 0; k < who->len; k++) {
            if (k == 8) {
                g_string_append_printf(d, " and %u more", who->len - 8);
                break;
            }
            g_string_append_printf(d, "%s%s", k ? ", " : "", (char *)who->pdata[k]);
        }
        g_string_append(d, " (job:checkpoint)");
        const char *loc = locs->pdata[i];
        CkHazard *h = hazard_add(out, "shared-location", g_strdup(*loc ? loc : "."),
                                 g_string_free(g_steal_pointer(&d), FALSE));
        for (guint k = 0; k < names->len; k++)
            g_ptr_array_add(h->jobs, names->pdata[k]);
    }

    for (guint i = 0; i < jobs->len; i++) {
        const CkJobInfo *j = jobs->pdata[i];
        for (guint k = 0; k < j->checkpoints->len; k++) {
            const CkCheckpointInfo *cp = j->checkpoints->pdata[k];
            const CkRestore *r = cp->restore;
            if (r->foreign_job) {
                CkHazard *h = hazard_add(
                    out, "foreign-root", g_strdup(r->marker),
                    g_strdup_printf("state=%s names job %s's root: checkpoint %" G_GUINT64_FORMAT
                                    " of %s restores another job's state",
                                    r->state ? r->state : r->root, r->foreign_job, (guint64)cp->n,
                                    j->job));
                g_ptr_array_add(h->jobs, (gpointer)j->job);
                g_ptr_array_add(h->jobs, (gpointer)r->foreign_job);
            }
            if (r->cls == CK_MARKER_MALFORMED) {
                CkHazard *h = hazard_add(out, "malformed", g_strdup(r->marker),
                                         g_strdup(r->error ? r->error : "malformed"));
                g_ptr_array_add(h->jobs, (gpointer)j->job);
            } else if (r->cls == CK_MARKER_CUT_SHORT) {
                CkHazard *h = hazard_add(
                    out, "cut-short", g_strdup(r->marker),
                    r->restorable
                        ? g_strdup_printf("no participants= and no state=: restores every "
                                          "subtask found under %s/v%" G_GUINT64_FORMAT,
                                          r->root, (guint64)r->generation)
                        : g_strdup_printf("no participants= and no state=: not restorable "
                                          "(%s)",
                                          r->error ? r->error : "?"));
                g_ptr_array_add(h->jobs, (gpointer)j->job);
            }
        }
        if (j->has_own_root && j->checkpoints->len == 0) {
            CkHazard *h = hazard_add(out, "orphan-root", g_strconcat("_state/", j->job, NULL),
                                     g_strdup_printf("_state/%s has no markers in _jobs/%s "
                                                     "(informational)",
                                                     j->job, j->job));
            g_ptr_array_add(h->jobs, (gpointer)j->job);
        }
    }
    for (guint i = 0; i < not_jobs->len; i++) {
        const char *p = not_jobs->pdata[i];
        const char *nm = strchr(p, '/') + 1;
        struct stat sb;
        const char *why = !ck_is_job_id(nm, strlen(nm)) ? "not a job id"
                          : fstatat(c->dfd, p, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)
                              ? "a symlink (not followed)"
                              : "not a directory";
        g_autofree char *shown = g_strescape(nm, NULL);
        hazard_add(out, "not-a-job", g_strdup(p),
                   g_strdup_printf("\"%s\" is %s: passed through, never a view", shown, why));
    }
    g_ptr_array_sort(out, cmp_hazard);
    return out;
}

char *ck_hazard_key(const CkHazard *h)
{
    GString *k = g_string_new(h->kind);
    g_string_append_c(k, '\x1f');
    g_string_append(k, h->path);
    for (guint i = 0; i < h->jobs->len; i++) {
        g_string_append_c(k, '\x1f');
        g_string_append(k, h->jobs->pdata[i]);
    }
    return g_string_free(k, FALSE);
}

/* ---- unused ---- */

static void unused_free(gpointer p)
{
    CkUnused *u = p;
    g_free(u->path);
    g_free(u);
}

static gint cmp_unused(gconstpointer a, gconstpointer b)
{
    const CkUnused *x = *(CkUnused *const *)a, *y = *(CkUnused *const *)b;
    return strcmp(x->path, y->path);
}

static guint64 du_local(SizeWalk *w, int dfd, const char *path)
{
    guint64 before = w->bytes;
    walk_read(w, dfd, NULL, true, path);
    return w->bytes - before;
}

/* The shape of a path the unused report can list. */
typedef enum {
    UP_NONE,
    UP_LEGACY,     /* "v<G>" or "<S>" */
    UP_GENERATION, /* "_state/<J>/v<G>" */
} UnusedShape;

/* For UP_GENERATION, *job gets the interned J and *g the generation. */
static UnusedShape unused_shape(const char *path, const char **job, guint64 *g)
{
    size_t l = strlen(path);
    guint32 s;
    if (ck_parse_generation_name(path, l, g) || ck_parse_subtask_name(path, l, &s))
        return UP_LEGACY;
    if (!g_str_has_prefix(path, "_state/"))
        return UP_NONE;
    const char *j = path + 7, *sl = strchr(j, '/');
    if (!sl || !ck_is_job_id(j, (size_t)(sl - j)) ||
        !ck_parse_generation_name(sl + 1, strlen(sl + 1), g))
        return UP_NONE;
    char buf[CK_JOB_ID_MAX + 1];
    memcpy(buf, j, (size_t)(sl - j));
    buf[sl - j] = '\0';
    *job = ck_intern(buf);
    return UP_GENERATION;
}

/* What the unused report judges a path by, from one consistent set of
 * snapshots: every restorable local read, by the entry it lies in (its
 * first component, and for reads under _state its first three), with the
 * first marker that makes it, and each job's oldest generation among its
 * restorable markers whose root is its own.  `only` (optional) keeps to the
 * reads and jobs one path can be judged by. */
typedef struct {
    GHashTable *top;    /* interned first component -> marker */
    GHashTable *state3; /* "_state/<X>/<Y>" (owned) -> marker */
    GHashTable *oldest; /* interned job -> const CkRestore* of its oldest own-root generation */
} UnusedIndex;

/* Keeps the lexicographically first marker, whatever order the jobs come in. */
static void index_note(GHashTable *t, gpointer key, const char *marker, bool owned)
{
    const char *old = g_hash_table_lookup(t, key);
    if (!old || strcmp(marker, old) < 0)
        g_hash_table_replace(t, owned ? g_strdup(key) : key, (gpointer)marker);
}

static void unused_index_init(UnusedIndex *ix, GPtrArray *jobs, const char *only)
{
    ix->top = g_hash_table_new(g_direct_hash, g_direct_equal);
    ix->state3 = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    ix->oldest = g_hash_table_new(g_direct_hash, g_direct_equal);
    const char *only_job = NULL;
    guint64 only_g;
    UnusedShape shape = only ? unused_shape(only, &only_job, &only_g) : UP_NONE;
    size_t only_len = only ? strlen(only) : 0;
    bool want_top = !only || shape == UP_LEGACY, want_state = !only || shape == UP_GENERATION;
    for (guint i = 0; i < jobs->len; i++) {
        const CkJobInfo *j = jobs->pdata[i];
        bool want_oldest = !only || j->job == only_job;
        for (guint k = 0; k < j->checkpoints->len; k++) {
            const CkRestore *r = ((CkCheckpointInfo *)j->checkpoints->pdata[k])->restore;
            if (!r->restorable || r->root_kind != CK_ROOT_LOCAL)
                continue;
            if (want_oldest && r->has_generation && r->root &&
                g_str_has_prefix(r->root, "_state/") && strcmp(r->root + 7, j->job) == 0) {
                const CkRestore *o = g_hash_table_lookup(ix->oldest, j->job);
                if (!o || r->generation < o->generation ||
                    (r->generation == o->generation && strcmp(r->marker, o->marker) < 0))
                    g_hash_table_insert(ix->oldest, (gpointer)j->job, (gpointer)r);
            }
            for (guint x = 0; x < r->reads->len; x++) {
                const char *rd = r->reads->pdata[x];
                const char *sl = strchr(rd, '/');
                size_t l1 = sl ? (size_t)(sl - rd) : strlen(rd);
                if (want_top && (!only || (l1 == only_len && strncmp(rd, only, l1) == 0))) {
                    g_autofree char *first = g_strndup(rd, l1);
                    index_note(ix->top, (gpointer)ck_intern(first), r->marker, false);
                }
                if (!want_state || !g_str_has_prefix(rd, "_state/"))
                    continue;
                /* the entry _state/<X>/<Y> the read lies in, or is */
                const char *e = strchr(rd + 7, '/');
                e = e ? strchr(e + 1, '/') : NULL;
                size_t l3 = e ? (size_t)(e - rd) : strlen(rd);
                if (only && (l3 != only_len || strncmp(rd, only, l3) != 0))
                    continue;
                g_autofree char *key = g_strndup(rd, l3);
                index_note(ix->state3, key, r->marker, true);
            }
        }
    }
}

static void unused_index_clear(UnusedIndex *ix)
{
    g_hash_table_unref(ix->top);
    g_hash_table_unref(ix->state3);
    g_hash_table_unref(ix->oldest);
}

/* The one rule of the unused report, for a path of either shape that is a
 * directory: its reason, or NULL when it is not unused, with *why
 * (optional, g_free) saying what keeps it. */
static const char *unused_judge(const UnusedIndex *ix, const char *path, char **why)
{
    const char *job = NULL;
    guint64 g = 0;
    const char *by;
    switch (unused_shape(path, &job, &g)) {
    case UP_LEGACY:
        by = g_hash_table_lookup(ix->top, ck_intern(path));
        if (!by)
            return "legacy-unread";
        if (why)
            *why = g_strdup_printf("read by %s", by);
        return NULL;
    case UP_GENERATION: {
        const CkRestore *o = g_hash_table_lookup(ix->oldest, job);
        if (!o) {
            if (why)
                *why =
                    g_strdup_printf("no restorable marker of %s has its root _state/%s", job, job);
            return NULL;
        }
        if (g >= o->generation) {
            if (why)
                *why = g_strdup_printf("not older than generation %" G_GUINT64_FORMAT " of %s",
                                       (guint64)o->generation, o->marker);
            return NULL;
        }
        by = g_hash_table_lookup(ix->state3, path);
        if (!by)
            return "superseded-generation";
        if (why)
            *why = g_strdup_printf("read by %s", by);
        return NULL;
    }
    case UP_NONE:
    default:
        if (why)
            *why = g_strdup("not a v<G>, <S> or _state/<J>/v<G> directory");
        return NULL;
    }
}

static void unused_add(GPtrArray *out, SizeWalk *w, int dfd, char *path, const char *reason)
{
    CkUnused *u = g_new0(CkUnused, 1);
    u->path = path;
    u->reason = reason;
    u->bytes = du_local(w, dfd, u->path);
    g_ptr_array_add(out, u);
}

GPtrArray *ck_catalog_unused(CkCatalog *c)
{
    GPtrArray *out = g_ptr_array_new_with_free_func(unused_free);
    g_autoptr(GHashTable) t = snapshot_table(c);
    g_autoptr(GPtrArray) jobs = sorted_jobs(t);
    UnusedIndex ix;
    unused_index_init(&ix, jobs, NULL);
    SizeWalk w;
    size_walk_init(&w, true);
    /* Legacy top level: v<G> and bare subtask directories nothing reads. */
    /* A description of its own: readdir must not share c->dfd's offset. */
    int fd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            const char *reason = NULL;
            guint64 g;
            const char *jn;
            if (unused_shape(de->d_name, &jn, &g) != UP_LEGACY)
                continue;
            struct stat sb;
            if (fstatat(c->dfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode))
                continue;
            if ((reason = unused_judge(&ix, de->d_name, NULL)) != NULL)
                unused_add(out, &w, c->dfd, g_strdup(de->d_name), reason);
        }
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    /* _state/<J>/v<G> older than every restorable marker of J reading its own root. */
    for (guint i = 0; i < jobs->len; i++) {
        const CkJobInfo *j = jobs->pdata[i];
        if (!j->has_own_root || !g_hash_table_contains(ix.oldest, j->job))
            continue;
        g_autofree char *own = g_strconcat("_state/", j->job, NULL);
        int sfd = openat(c->dfd, own, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0)
            continue;
        DIR *sd = fdopendir(sfd);
        if (!sd) {
            close(sfd);
            continue;
        }
        struct dirent *de;
        while ((de = readdir(sd)) != NULL) {
            guint64 g;
            if (!ck_parse_generation_name(de->d_name, strlen(de->d_name), &g))
                continue;
            struct stat sb;
            if (fstatat(dirfd(sd), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISDIR(sb.st_mode))
                continue;
            g_autofree char *p = g_strconcat(own, "/", de->d_name, NULL);
            const char *reason = unused_judge(&ix, p, NULL);
            if (reason)
                unused_add(out, &w, c->dfd, g_steal_pointer(&p), reason);
        }
        closedir(sd);
    }
    size_walk_clear(&w);
    unused_index_clear(&ix);
    g_ptr_array_sort(out, cmp_unused);
    return out;
}

const char *ck_catalog_unused_reason(CkCatalog *c, const char *path, int *err, char **why)
{
    if (why)
        *why = NULL;
    if (err)
        *err = 0;
    const char *job = NULL;
    guint64 g;
    UnusedShape shape = unused_shape(path, &job, &g);
    if (shape == UP_NONE)
        return unused_judge(NULL, path, why);
    /* a directory, reached through no symlink */
    g_autofree char *parent = g_path_get_dirname(path);
    g_autofree char *base = g_path_get_basename(path);
    int pfd =
        ck_open_beneath(c->dfd, strcmp(parent, ".") ? parent : "", O_RDONLY | O_DIRECTORY, NULL);
    struct stat sb;
    int e = pfd < 0                                             ? -pfd
            : fstatat(pfd, base, &sb, AT_SYMLINK_NOFOLLOW) != 0 ? errno
            : S_ISLNK(sb.st_mode)                               ? ELOOP
            : !S_ISDIR(sb.st_mode)                              ? ENOTDIR
                                                                : 0;
    if (pfd >= 0)
        close(pfd);
    if (e) {
        if (err)
            *err = -e;
        if (why)
            *why = g_strdup(e == ELOOP ? "a symlink (not followed)" : g_strerror(e));
        return NULL;
    }
    /* The jobs that can read the path: its owner, and those with a read
     * outside their own root (a job whose every read is inside its own
     * root reads neither the top level nor another job's root), so a
     * judgement costs what those jobs hold, not what the catalog holds. */
    g_autoptr(GPtrArray) jobs = g_ptr_array_new_with_free_func((GDestroyNotify)ck_job_info_unref);
    const CkJobInfo *owner = NULL;
    g_mutex_lock(&c->lock);
    GHashTableIter it;
    gpointer k, v;
    g_hash_table_iter_init(&it, c->jobs);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        JobPriv *jp = v;
        if (k == job)
            owner = &jp->pub;
        if (k == job || !jp->private_reads)
            g_ptr_array_add(jobs, ck_job_info_ref(&jp->pub));
    }
    bool own_root = owner && owner->has_own_root;
    g_mutex_unlock(&c->lock);
    if (shape == UP_GENERATION && !own_root) {
        if (why)
            *why = g_strdup_printf("_state/%s is not the own root of a job", job);
        return NULL;
    }
    UnusedIndex ix;
    unused_index_init(&ix, jobs, path);
    const char *reason = unused_judge(&ix, path, why);
    unused_index_clear(&ix);
    return reason;
}
