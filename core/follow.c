/* Keeping a catalog current by inotify while one process acts on it (see
 * follow.h).  Watches are added on descriptors opened beneath the catalog's
 * own (through /proc/self/fd), so what is watched is what the catalog
 * reads, never a directory a symlink leads to. */
#include "follow.h"
#include "intern.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "classify.h"
#include "policy.h"
#include "resolve.h"

typedef enum {
    W_JOBS,   /* _jobs */
    W_STATE,  /* _state */
    W_JOBDIR, /* _jobs/<J> */
    W_CHKDIR, /* _jobs/<J>/chk-<N> without a COMPLETED when watched */
} WatchKind;

typedef struct {
    WatchKind kind;
    const char *job; /* interned: W_JOBDIR, W_CHKDIR */
} WatchInfo;

struct CkCatalogFollow {
    CkCatalog *c;
    int ifd;             /* -1 when polling */
    const char *polls;   /* why every sync checks every job, NULL while inotify sees all */
    char *polls_owned;   /* polls, when it was formatted */
    bool sweep;          /* the next sync checks every job (an overflow, a watch added late) */
    GHashTable *wds;     /* wd -> WatchInfo* */
    GHashTable *jobdirs; /* job -> wd of _jobs/<J> */
    GHashTable *chkdirs; /* "<J>/chk-<N>" (owned) -> wd */
    GHashTable *todo;    /* interned jobs to re-read at the next sync */
};

bool ck_fs_is_shared(int fd)
{
    static const unsigned long magics[] = {
        0x6969,     /* NFS */
        0xff534d42, /* CIFS */
        0xfe534d42, /* SMB2 */
        0x517b,     /* SMB */
        0x65735546, /* FUSE */
        0x01021997, /* 9P */
        0x00c36400, /* Ceph */
        0x5346414f, /* AFS */
        0x0bd00bd0, /* Lustre */
        0x47504653, /* GPFS */
        0x7461636f, /* OCFS2 */
        0x01161970, /* GFS2 */
        0x73757245, /* Coda */
        0x564c,     /* NCP */
    };
    struct statfs sf;
    if (fstatfs(fd, &sf) != 0)
        return true;
    for (gsize i = 0; i < G_N_ELEMENTS(magics); i++)
        if ((unsigned long)sf.f_type == magics[i])
            return true;
    return false;
}

/* From now on, every sync checks every job. */
static void give_up_inotify(CkCatalogFollow *f, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static void give_up_inotify(CkCatalogFollow *f, const char *fmt, ...)
{
    if (f->polls)
        return;
    va_list ap;
    va_start(ap, fmt);
    f->polls = f->polls_owned = g_strdup_vprintf(fmt, ap);
    va_end(ap);
}

/* A watch on `rel` (beneath the catalog's directory): its wd, or -errno
 * (-ENOENT, -ENOTDIR, -ELOOP: nothing there to watch). */
static int add_watch(CkCatalogFollow *f, const char *rel, uint32_t mask, WatchKind kind,
                     const char *job)
{
    if (f->polls)
        return -EAGAIN;
    int fd = ck_open_beneath(ck_catalog_dirfd(f->c), rel, O_RDONLY | O_DIRECTORY, NULL);
    if (fd < 0) {
        /* gone, not a directory, a symlink: nothing the catalog reads either */
        if (fd != -ENOENT && fd != -ENOTDIR && fd != -ELOOP)
            give_up_inotify(f, "%s: %s", rel, g_strerror(-fd));
        return fd;
    }
    char proc[48];
    g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(f->ifd, proc, mask | IN_ONLYDIR);
    int e = errno;
    close(fd);
    if (wd < 0) {
        /* the directory is there and cannot be watched: inotify misses it */
        give_up_inotify(f, "inotify: %s: %s", rel, g_strerror(e));
        return -e;
    }
    WatchInfo *wi = g_new0(WatchInfo, 1);
    wi->kind = kind;
    wi->job = job;
    g_hash_table_replace(f->wds, GINT_TO_POINTER(wd), wi);
    return wd;
}

#define DIR_EVENTS (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)

/* Watches _jobs/<J> and its chk-<N> in progress; true when a watch was
 * added (a change just before it is then looked for: see sync). */
static bool watch_job(CkCatalogFollow *f, const char *job)
{
    bool added = false;
    if (!g_hash_table_contains(f->jobdirs, job)) {
        g_autofree char *rel = g_strconcat("_jobs/", job, NULL);
        int wd = add_watch(f, rel, DIR_EVENTS | IN_DELETE_SELF | IN_MOVE_SELF, W_JOBDIR, job);
        if (wd >= 0) {
            g_hash_table_insert(f->jobdirs, (gpointer)job, GINT_TO_POINTER(wd));
            added = true;
        }
    }
    g_autoptr(GArray) pending = ck_catalog_pending_checkpoints(f->c, job);
    for (guint i = 0; i < pending->len; i++) {
        char *key = g_strdup_printf("%s/chk-%" G_GUINT64_FORMAT, job,
                                    (guint64)g_array_index(pending, guint64, i));
        if (g_hash_table_contains(f->chkdirs, key)) {
            g_free(key);
            continue;
        }
        g_autofree char *rel = g_strconcat("_jobs/", key, NULL);
        int wd = add_watch(f, rel, DIR_EVENTS | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF,
                           W_CHKDIR, job);
        if (wd >= 0) {
            g_hash_table_insert(f->chkdirs, key, GINT_TO_POINTER(wd));
            added = true;
        } else {
            g_free(key);
        }
    }
    return added;
}

static void forget_watch(CkCatalogFollow *f, int wd, const WatchInfo *wi)
{
    if (wi->kind == W_JOBDIR && GPOINTER_TO_INT(g_hash_table_lookup(f->jobdirs, wi->job)) == wd)
        g_hash_table_remove(f->jobdirs, wi->job);
    if (wi->kind == W_CHKDIR) {
        GHashTableIter it;
        gpointer k, v;
        g_hash_table_iter_init(&it, f->chkdirs);
        while (g_hash_table_iter_next(&it, &k, &v))
            if (GPOINTER_TO_INT(v) == wd) {
                g_hash_table_iter_remove(&it);
                break;
            }
    }
    g_hash_table_remove(f->wds, GINT_TO_POINTER(wd));
}

static void handle_event(CkCatalogFollow *f, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW) {
        f->sweep = true;
        return;
    }
    WatchInfo *wi = g_hash_table_lookup(f->wds, GINT_TO_POINTER(ev->wd));
    if (!wi)
        return;
    const char *job = wi->job;
    if (ev->mask & IN_IGNORED) {
        if (job)
            g_hash_table_add(f->todo, (gpointer)job);
        else
            f->sweep = true; /* _jobs or _state went: check_top re-lists */
        forget_watch(f, ev->wd, wi);
        return;
    }
    const char *name = ev->len ? ev->name : "";
    switch (wi->kind) {
    case W_JOBS:
    case W_STATE:
        if (ck_is_job_id(name, strlen(name)))
            g_hash_table_add(f->todo, (gpointer)ck_intern(name));
        break;
    case W_JOBDIR:
    case W_CHKDIR:
        g_hash_table_add(f->todo, (gpointer)job);
        /* a complete checkpoint's directory is not watched any more (a
         * watch per checkpoint ever made would exhaust max_user_watches) */
        if (wi->kind == W_CHKDIR && (ev->mask & (IN_CLOSE_WRITE | IN_MOVED_TO)) &&
            ck_ns_child((CkNs){.kind = CK_NS_JOB, .job = job, .place = CK_PLACE_CHK_DIR}, name,
                        NULL)
                    .place == CK_PLACE_MARKER)
            inotify_rm_watch(f->ifd, ev->wd); /* its IN_IGNORED forgets it */
        break;
    }
}

static void drain(CkCatalogFollow *f)
{
    if (f->ifd < 0)
        return;
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t len = read(f->ifd, buf, sizeof buf);
        if (len <= 0)
            return;
        for (char *p = buf; p < buf + len;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            handle_event(f, ev);
            p += sizeof *ev + ev->len;
        }
    }
}

/* The jobs to re-read, emptied. */
static GPtrArray *take_todo(CkCatalogFollow *f)
{
    GPtrArray *out = g_ptr_array_sized_new(g_hash_table_size(f->todo));
    GHashTableIter it;
    gpointer k;
    g_hash_table_iter_init(&it, f->todo);
    while (g_hash_table_iter_next(&it, &k, NULL))
        g_ptr_array_add(out, k);
    g_hash_table_remove_all(f->todo);
    return out;
}

static void add_changed(GPtrArray *changed_out, GPtrArray *changed)
{
    for (guint i = 0; changed_out && i < changed->len; i++)
        if (!g_ptr_array_find(changed_out, changed->pdata[i], NULL))
            g_ptr_array_add(changed_out, changed->pdata[i]);
}

void ck_catalog_follow_sync(CkCatalogFollow *f, GPtrArray *changed_out)
{
    g_autoptr(GPtrArray) changed = g_ptr_array_new();
    drain(f);
    ck_catalog_check_top(f->c, changed);
    if (f->polls || f->sweep) {
        f->sweep = false;
        g_autoptr(GPtrArray) names = ck_catalog_job_names(f->c);
        for (guint i = 0; i < names->len; i++)
            if (ck_catalog_job_check(f->c, names->pdata[i]))
                g_hash_table_add(f->todo, names->pdata[i]);
    }
    /* Re-read what changed; watch what is new (a job, a checkpoint in
     * progress), then look at it once more: a change made before its
     * watch was added shows in the cheap check, one made after in the next
     * drain.  A few passes settle anything but a directory changing all
     * the time, which the next sync sees again. */
    for (int pass = 0; pass < 4; pass++) {
        if (g_hash_table_size(f->todo)) {
            g_autoptr(GPtrArray) jobs = take_todo(f);
            ck_catalog_refresh_jobs(f->c, jobs, changed);
        }
        add_changed(changed_out, changed);
        if (f->polls)
            break;
        for (guint i = 0; i < changed->len; i++) {
            const char *job = changed->pdata[i];
            if (watch_job(f, job) && ck_catalog_job_check(f->c, job))
                g_hash_table_add(f->todo, (gpointer)job);
        }
        g_ptr_array_set_size(changed, 0);
        drain(f);
        if (!g_hash_table_size(f->todo))
            break;
    }
    if (f->polls && g_hash_table_size(f->todo)) {
        g_autoptr(GPtrArray) jobs = take_todo(f);
        ck_catalog_refresh_jobs(f->c, jobs, changed);
        add_changed(changed_out, changed);
    }
}

CkCatalogFollow *ck_catalog_follow_new(CkCatalog *c, unsigned flags)
{
    CkCatalogFollow *f = g_new0(CkCatalogFollow, 1);
    f->c = c;
    f->ifd = -1;
    f->wds = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    f->jobdirs = g_hash_table_new(g_direct_hash, g_direct_equal);
    f->chkdirs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    f->todo = g_hash_table_new(g_direct_hash, g_direct_equal);
    if (flags & CK_FOLLOW_POLL)
        f->polls = "CK_FOLLOW_POLL";
    else if (ck_fs_is_shared(ck_catalog_dirfd(c)))
        f->polls = "a file system another host may change";
    else if ((f->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0)
        give_up_inotify(f, "inotify: %s", g_strerror(errno));
    if (!f->polls) {
        add_watch(f, "_jobs", DIR_EVENTS, W_JOBS, NULL);
        add_watch(f, "_state", DIR_EVENTS, W_STATE, NULL);
        g_autoptr(GPtrArray) names = ck_catalog_job_names(c);
        for (guint i = 0; i < names->len; i++)
            watch_job(f, names->pdata[i]);
    }
    /* what changed between the catalog's read and the watches */
    f->sweep = true;
    ck_catalog_follow_sync(f, NULL);
    return f;
}

const char *ck_catalog_follow_polls(CkCatalogFollow *f)
{
    return f->polls;
}

void ck_catalog_follow_free(CkCatalogFollow *f)
{
    if (!f)
        return;
    if (f->ifd >= 0)
        close(f->ifd);
    g_hash_table_unref(f->wds);
    g_hash_table_unref(f->jobdirs);
    g_hash_table_unref(f->chkdirs);
    g_hash_table_unref(f->todo);
    g_free(f->polls_owned);
    g_free(f);
}

/* "_state/<J>/v<G>": the interned J, else NULL. */
static const char *generation_owner(const char *path)
{
    if (!g_str_has_prefix(path, "_state/"))
        return NULL;
    const char *j = path + 7, *sl = strchr(j, '/');
    guint64 g;
    if (!sl || !ck_is_job_id(j, (size_t)(sl - j)) ||
        !ck_parse_generation_name(sl + 1, strlen(sl + 1), &g))
        return NULL;
    g_autofree char *job = g_strndup(j, (gsize)(sl - j));
    return ck_intern(job);
}

CkRecheck ck_catalog_unused_recheck(CkCatalogFollow *f, const char *path, const char **reason,
                                    char **why)
{
    *reason = NULL;
    if (why)
        *why = NULL;
    /* the owner re-read in full by the sync, so a checkpoint it began
     * meanwhile is watched as any other job's */
    const char *owner = generation_owner(path);
    if (owner)
        g_hash_table_add(f->todo, (gpointer)owner);
    ck_catalog_follow_sync(f, NULL);
    int err = 0;
    *reason = ck_catalog_unused_reason(f->c, path, &err, why);
    if (*reason)
        return CK_RECHECK_UNUSED;
    switch (-err) {
    case 0:
        return CK_RECHECK_NEEDED;
    case ENOENT:
        return CK_RECHECK_GONE;
    case ENOTDIR:
    case ELOOP:
        return CK_RECHECK_NOT_DIR;
    default:
        return CK_RECHECK_ERROR;
    }
}
