/* The restore source of a location (see restore_source.h). */
#include "restore_source.h"
#include "intern.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "classify.h"
#include "markers.h"
#include "stateroot.h"

const char *ck_resolve_status_name(CkResolveStatus s)
{
    switch (s) {
    case CK_RESOLVE_OK:
        return "ok";
    case CK_RESOLVE_REFUSED:
        return "refused";
    case CK_RESOLVE_AS_GIVEN:
        return "as-given";
    }
    return "as-given";
}

void ck_resolution_free(CkResolution *r)
{
    if (!r)
        return;
    ck_restore_free(r->restore);
    if (r->unknown)
        g_ptr_array_unref(r->unknown);
    if (r->candidates)
        g_ptr_array_unref(r->candidates);
    g_free(r->location);
    g_free(r->error);
    g_free(r->warning);
    g_free(r->dir);
    g_free(r);
}

char *ck_refusal_text(const char *location, bool latest, uint64_t n, const GPtrArray *candidates)
{
    g_autoptr(GString) names = g_string_new(NULL);
    for (guint i = 0; i < candidates->len; i++)
        g_string_append_printf(names, "%s%s", i ? ", " : "", (char *)candidates->pdata[i]);
    if (latest)
        return g_strdup_printf("several jobs have markers in %s, so \"latest\" is ambiguous: "
                               "name one job's marker directory: %s",
                               location, names->str);
    return g_strdup_printf("checkpoint %" G_GUINT64_FORMAT " was completed by several jobs in "
                           "%s: name one job's marker directory: %s",
                           (guint64)n, location, names->str);
}

static char *path_join(const char *root, const char *rest)
{
    if (root[0] == '\0')
        return g_strdup(rest);
    size_t l = strlen(root);
    return g_strconcat(root, root[l - 1] == '/' ? "" : "/", rest, NULL);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The restore of job's checkpoint n (or its latest), from a catalog of that
 * one job; NULL when the job has no such marker.  -errno in *err when dir
 * cannot be read. */
static CkRestore *job_restore(const char *dir, const char *job, bool latest, uint64_t n,
                              const CkResolveOptions *opts, GPtrArray **unknown, int *err)
{
    CkCatalogOptions co = {.resolve = opts ? *opts : (CkResolveOptions){0}};
    g_autoptr(CkCatalog) cat = ck_catalog_open_job(dir, job, &co, NULL);
    if (!cat) { /* dir was open a moment ago */
        *err = -EIO;
        return NULL;
    }
    g_autoptr(CkJobInfo) j = ck_catalog_get_job(cat, job);
    if (!j || j->checkpoints->len == 0)
        return NULL;
    const CkCheckpointInfo *pick = NULL;
    for (guint i = 0; i < j->checkpoints->len; i++) {
        const CkCheckpointInfo *cp = j->checkpoints->pdata[i];
        if ((latest && j->has_latest && cp->n == j->latest) || (!latest && cp->n == n))
            pick = cp;
    }
    if (latest && !j->has_latest) /* nothing restorable: the newest says why */
        pick = j->checkpoints->pdata[j->checkpoints->len - 1];
    if (!pick)
        return NULL;
    *unknown = ck_marker_kv_copy(pick->unknown);
    return ck_restore_copy(pick->restore);
}

/* Job ids under _jobs (sorted, interned) with a marker for n (any marker,
 * for latest), as markers.c lists them.  A job directory that cannot be read
 * is an error (*err), as for ckptctl jobs and check: not a job without
 * markers. */
static GPtrArray *jobs_with_markers(int dfd, bool latest, uint64_t n, int *err)
{
    g_autoptr(GHashTable) names = g_hash_table_new(g_direct_hash, g_direct_equal);
    ck_list_job_dirs(dfd, "_jobs", names, NULL);
    GPtrArray *out = g_ptr_array_new();
    GHashTableIter it;
    gpointer k;
    g_hash_table_iter_init(&it, names);
    while (g_hash_table_iter_next(&it, &k, NULL)) {
        int jfd = ck_job_dir_open(dfd, k);
        if (jfd < 0 && jfd != -ENOENT && jfd != -ENOTDIR && jfd != -ELOOP && !*err)
            *err = jfd;
        g_autoptr(GArray) list = ck_job_marker_list(jfd);
        if (jfd >= 0)
            close(jfd);
        bool yes = latest && list->len > 0;
        for (guint i = 0; !latest && i < list->len && !yes; i++)
            yes = g_array_index(list, CkMarkerStamp, i).n == n;
        if (yes)
            g_ptr_array_add(out, k);
    }
    g_ptr_array_sort(out, cmp_str);
    return out;
}

static char *strip_trailing_slashes(const char *p)
{
    char *s = g_strdup(p);
    size_t l = strlen(s);
    while (l > 1 && s[l - 1] == '/')
        s[--l] = '\0';
    return s;
}

/* If path names <dir>/_jobs/<J>: sets *job (interned) and returns <dir>
 * (lexically, as given; "." when the path is "_jobs/<J>"). */
static char *split_jobs_dir(int fd, const char *path, const char **job)
{
    g_autofree char *p = strip_trailing_slashes(path);
    g_autofree char *base = g_path_get_basename(p);
    g_autofree char *parent = g_path_get_dirname(p);
    g_autofree char *pbase = g_path_get_basename(parent);
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || strcmp(pbase, ".") == 0 ||
        strcmp(pbase, "..") == 0) {
        /* Not lexically decidable: ask the file system where we are. */
        g_autofree char *proc = g_strdup_printf("/proc/self/fd/%d", fd);
        g_autofree char *real = g_file_read_link(proc, NULL);
        if (!real)
            return NULL;
        g_free(base);
        g_free(parent);
        g_free(pbase);
        base = g_path_get_basename(real);
        parent = g_path_get_dirname(real);
        pbase = g_path_get_basename(parent);
        if (strcmp(pbase, "_jobs") != 0 || !ck_is_job_id(base, strlen(base)))
            return NULL;
        *job = ck_intern(base);
        return g_path_get_dirname(parent);
    }
    if (strcmp(pbase, "_jobs") != 0 || !ck_is_job_id(base, strlen(base)))
        return NULL;
    *job = ck_intern(base);
    return g_path_get_dirname(parent);
}

int ck_resolve(const char *location, bool latest, uint64_t checkpoint, const CkResolveOptions *opts,
               CkResolution **out)
{
    *out = NULL;
    g_autoptr(CkResolution) res = g_new0(CkResolution, 1);
    res->location = g_strdup(location);
    res->status = CK_RESOLVE_AS_GIVEN;
    if (ck_is_remote_uri(location)) {
        *out = g_steal_pointer(&res);
        return 0;
    }
    const char *path = location;
    if (g_str_has_prefix(path, "file://")) {
        path += strlen("file://");
        if (g_str_has_prefix(path, "localhost/"))
            path += strlen("localhost");
    }
    if (path[0] == '\0')
        return -ENOENT;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    const char *job = NULL;
    g_autofree char *dir = split_jobs_dir(fd, path, &job);
    bool marker_dir = dir != NULL; /* the location names _jobs/<J> itself */
    int err = 0;
    if (!dir) {
        res->dir = strip_trailing_slashes(path);
        g_autoptr(GPtrArray) jobs = jobs_with_markers(fd, latest, checkpoint, &err);
        if (err) {
            close(fd);
            return err;
        }
        if (jobs->len == 1) {
            job = jobs->pdata[0];
            dir = g_strdup(res->dir);
        } else if (jobs->len > 1) {
            res->status = CK_RESOLVE_REFUSED;
            res->candidates = g_ptr_array_new_with_free_func(g_free);
            g_autofree char *jobs_dir = path_join(res->dir, "_jobs");
            for (guint i = 0; i < jobs->len; i++)
                g_ptr_array_add(res->candidates, path_join(jobs_dir, jobs->pdata[i]));
            res->error = ck_refusal_text(location, latest, checkpoint, res->candidates);
        }
    } else {
        res->dir = g_strdup(dir);
    }
    close(fd);
    if (job) {
        CkRestore *r = job_restore(dir, job, latest, checkpoint, opts, &res->unknown, &err);
        if (err)
            return err;
        if (r) {
            res->status = CK_RESOLVE_OK;
            res->restore = r;
        } else if (marker_dir) {
            g_autofree char *which =
                latest ? g_strdup("no marker")
                       : g_strdup_printf("no marker for checkpoint %" G_GUINT64_FORMAT,
                                         (guint64)checkpoint);
            res->warning = g_strdup_printf("%s is job %s's marker directory with %s: a restore "
                                           "would read the marker directory itself as state",
                                           location, job, which);
        }
    }
    *out = g_steal_pointer(&res);
    return 0;
}
