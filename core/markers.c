/* A checkpoint directory's jobs and their markers (see markers.h). */
#include "markers.h"
#include "intern.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "classify.h"
#include "decimal.h"

int ck_list_job_dirs(int dfd, const char *sub, GHashTable *names, GPtrArray *not_jobs)
{
    int fd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    CkDirIter it;
    ck_dir_iter_init(&it, fd);
    const char *nm;
    unsigned char t;
    while ((nm = ck_dir_iter_next(&it, &t)) != NULL) {
        if (ck_dir_entry_type(fd, nm, t) == DT_DIR && ck_is_job_id(nm, strlen(nm))) {
            if (names)
                g_hash_table_add(names, (gpointer)ck_intern(nm));
        } else if (not_jobs) {
            g_ptr_array_add(not_jobs, g_strconcat(sub, "/", nm, NULL));
        }
    }
    close(fd);
    return 0;
}

int ck_job_dir_open(int dfd, const char *job)
{
    char p[CK_JOB_ID_MAX + 16];
    g_snprintf(p, sizeof p, "_jobs/%s", job);
    return ck_open_beneath(dfd, p, O_RDONLY | O_DIRECTORY, NULL);
}

static int64_t mtime_ns_of(const struct stat *sb)
{
    return (int64_t)sb->st_mtim.tv_sec * 1000000000 + sb->st_mtim.tv_nsec;
}

static CkMarkerStamp stamp_of(uint64_t n, const struct stat *sb, uint32_t flags)
{
    return (CkMarkerStamp){
        n,    (uint64_t)sb->st_ino, (uint64_t)sb->st_size, mtime_ns_of(sb), (uint32_t)sb->st_mode,
        flags};
}

bool ck_marker_stamps_current(int dfd, const char *job, const GArray *stamps)
{
    char p[CK_JOB_ID_MAX + 64];
    for (guint i = 0; i < stamps->len; i++) {
        const CkMarkerStamp *st = &g_array_index(stamps, CkMarkerStamp, i);
        /* what the listing stat'ed: chk-<N> itself when it was a symlink */
        bool chk = st->flags & CK_STAMP_CHK_SYMLINK;
        g_snprintf(p, sizeof p, "_jobs/%s/chk-%" G_GUINT64_FORMAT "%s", job, (guint64)st->n,
                   chk ? "" : "/COMPLETED");
        struct stat sb;
        if (fstatat(dfd, p, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
            if (!(st->flags & CK_STAMP_ERRNO) || (uint32_t)errno != st->mode)
                return false;
            continue; /* unreadable as before */
        }
        CkMarkerStamp now = stamp_of(st->n, &sb, st->flags & CK_STAMP_CHK_SYMLINK);
        if (memcmp(&now, st, sizeof now) != 0)
            return false;
    }
    return true;
}

static gint cmp_stamp(gconstpointer a, gconstpointer b)
{
    const CkMarkerStamp *x = a, *y = b;
    return x->n < y->n ? -1 : x->n > y->n;
}

GArray *ck_job_marker_list(int jfd)
{
    return ck_job_marker_list_full(jfd, NULL);
}

GArray *ck_job_marker_list_full(int jfd, GArray *in_progress)
{
    GArray *out = g_array_new(FALSE, FALSE, sizeof(CkMarkerStamp));
    if (jfd < 0)
        return out;
    CkDirIter it;
    ck_dir_iter_init(&it, jfd);
    char path[64];
    const char *nm;
    unsigned char t;
    while ((nm = ck_dir_iter_next(&it, &t)) != NULL) {
        uint64_t n;
        if (t != DT_DIR && t != DT_LNK && t != DT_UNKNOWN)
            continue;
        if (!ck_parse_checkpoint_name(nm, strlen(nm), &n))
            continue;
        struct stat sb;
        if (t != DT_DIR) {
            if (fstatat(jfd, nm, &sb, AT_SYMLINK_NOFOLLOW) != 0)
                continue;
            if (S_ISLNK(sb.st_mode)) {
                CkMarkerStamp ms = stamp_of(n, &sb, CK_STAMP_CHK_SYMLINK);
                g_array_append_val(out, ms);
                continue;
            }
            if (!S_ISDIR(sb.st_mode))
                continue; /* a chk-<N> file holds no marker */
        }
        /* chk-<N> is a real directory (just checked, or d_type), so only the
         * last component could be a symlink: not followed */
        size_t nl = strlen(nm); /* "chk-" and at most 20 digits: fits */
        memcpy(path, nm, nl);
        memcpy(path + nl, "/COMPLETED", sizeof "/COMPLETED");
        CkMarkerStamp ms;
        if (fstatat(jfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
            ms = stamp_of(n, &sb, 0);
        } else if (errno == ENOENT || errno == ENOTDIR) {
            if (in_progress && errno == ENOENT)
                g_array_append_val(in_progress, n);
            continue; /* in progress (or gone) */
        } else {      /* chk-<N> unreadable (EACCES): a marker nobody can look at */
            ms = (CkMarkerStamp){n, 0, 0, 0, (uint32_t)errno, CK_STAMP_ERRNO};
        }
        g_array_append_val(out, ms);
    }
    g_array_sort(out, cmp_stamp);
    return out;
}

/* Reads chk-<N>/COMPLETED of jfd; a regular file only (anything else is
 * malformed, never followed or opened).  Returns 0 with *out set, -ENOENT
 * when it is gone, or another -errno. */
static int marker_read(int jfd, CkMarkerStamp *st, char *buf, CkMarker **out)
{
    /* "chk-<N>" then "chk-<N>/COMPLETED": one of these per marker, no printf */
    char path[48], digits[CK_U64_DIGITS];
    const char *d = ck_u64_digits(digits + sizeof digits, st->n);
    size_t dl = (size_t)(digits + sizeof digits - d);
    memcpy(path, "chk-", 4);
    memcpy(path + 4, d, dl);
    path[4 + dl] = '\0';
    *out = NULL;
    if (st->flags & CK_STAMP_CHK_SYMLINK) {
        g_autofree char *why = g_strdup_printf("%s is a symlink, not followed", path);
        *out = ck_marker_malformed(why);
        return 0;
    }
    if (st->flags & CK_STAMP_ERRNO)
        return -(int)st->mode;
    if (!S_ISREG(st->mode)) {
        *out = ck_marker_not_regular(st->mode);
        return 0;
    }
    /* chk-<N> was a directory and COMPLETED a regular file when listed; a
     * symlink put in the place of either since is not followed (openat2
     * RESOLVE_NO_SYMLINKS: one call), a FIFO does not hang the open */
    memcpy(path + 4 + dl, "/COMPLETED", sizeof "/COMPLETED");
    g_autofree char *bad = NULL;
    int fd = ck_open_beneath(jfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, &bad);
    if (fd < 0) {
        struct stat sb;
        if (fd == -ELOOP && bad && !strchr(bad, '/')) { /* chk-<N> itself */
            if (fstatat(jfd, bad, &sb, AT_SYMLINK_NOFOLLOW) != 0)
                return -ENOENT;
            *st = stamp_of(st->n, &sb, CK_STAMP_CHK_SYMLINK);
            g_autofree char *why = g_strdup_printf("%s is a symlink, not followed", bad);
            *out = ck_marker_malformed(why);
            return 0;
        }
        if (fd != -ENOENT && fd != -ENOTDIR && fstatat(jfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
            *st = stamp_of(st->n, &sb, 0);
            if (!S_ISREG(sb.st_mode)) {
                *out = ck_marker_not_regular(sb.st_mode);
                return 0;
            }
        }
        return fd == -ENOTDIR ? -ENOENT : fd;
    }
    /* No fstat of the open file unless the bytes disagree with the listing:
     * one system call less a marker */
    struct stat sb = {.st_size = (off_t)st->size, .st_mode = (mode_t)st->mode};
    int rc = ck_marker_read_fd(fd, &sb, st->n, buf, out);
    if (rc == 1)
        *st = stamp_of(st->n, &sb, 0);
    close(fd);
    return MIN(rc, 0);
}

CkRestore *ck_job_marker_restore(int dfd, int jfd, const char *job, CkMarkerStamp *st,
                                 const CkResolveOptions *opts, CkRootCache *cache, char *buf,
                                 GPtrArray **unknown)
{
    CkMarker *m = NULL;
    int rc = marker_read(jfd, st, buf, &m);
    if (rc == -ENOENT)
        return NULL;
    if (rc < 0) {
        /* unreadable: malformed, with the reason (one text everywhere) */
        g_autofree char *why = g_strdup_printf("cannot be read: %s", g_strerror(-rc));
        m = ck_marker_malformed(why);
    }
    CkRestore *r = ck_restore_of_marker_cached(dfd, job, st->n, m, opts, cache);
    if (unknown) { /* not the half-parsed keys of a malformed marker */
        if (r->cls == CK_MARKER_MALFORMED)
            g_ptr_array_set_size(m->unknown, 0);
        *unknown = g_steal_pointer(&m->unknown);
        m->unknown = g_ptr_array_new();
    }
    ck_marker_free(m);
    return r;
}
