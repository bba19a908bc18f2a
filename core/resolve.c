/* Restore resolution: what a restore reads for each marker class
 * (namespaced, legacy, cut short, malformed).  From a location to its
 * marker is restore_source.c, over the catalog.
 *
 * Local roots are looked at through the checkpoint directory's descriptor
 * only, component by component with AT_SYMLINK_NOFOLLOW, so a symlink in a
 * root is reported, never followed out of the directory.  External roots
 * (allowed by external_root) are opened by their absolute path; remote ones
 * are never touched. */
#include "resolve.h"
#include "intern.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "classify.h"
#include "decimal.h"
#include "stateroot.h"

const char *ck_root_kind_name(CkRootKind k)
{
    switch (k) {
    case CK_ROOT_NONE:
        return "none";
    case CK_ROOT_LOCAL:
        return "local";
    case CK_ROOT_EXTERNAL:
        return "external";
    case CK_ROOT_REMOTE:
        return "remote";
    }
    return "none";
}

/* ---- paths ---- */

/* p (after its leading '/' when absolute) is already what normalize
 * returns: no empty, "." or ".." component (nearly every state= value). */
static bool is_normal(const char *p)
{
    if (*p == '\0')
        return true;
    for (const char *c = p;;) {
        const char *e = strchrnul(c, '/');
        size_t l = (size_t)(e - c);
        if (l == 0 || (c[0] == '.' && (l == 1 || (l == 2 && c[1] == '.'))))
            return false;
        if (*e == '\0')
            return true;
        c = e + 1;
    }
}

static char *normalize(const char *p, bool absolute)
{
    if (absolute ? p[0] == '/' && is_normal(p + 1) : is_normal(p))
        return g_strdup(p);
    g_auto(GStrv) parts = g_strsplit(p, "/", -1);
    g_autoptr(GPtrArray) out = g_ptr_array_new();
    for (char **c = parts; *c; c++) {
        if (**c == '\0' || strcmp(*c, ".") == 0)
            continue;
        if (strcmp(*c, "..") == 0) {
            if (out->len > 0)
                g_ptr_array_remove_index(out, out->len - 1);
            else if (!absolute)
                return NULL;
            continue;
        }
        g_ptr_array_add(out, *c);
    }
    g_ptr_array_add(out, NULL);
    g_autofree char *joined = g_strjoinv("/", (char **)out->pdata);
    return absolute ? g_strconcat("/", joined, NULL) : g_steal_pointer(&joined);
}

char *ck_path_normalize_rel(const char *p)
{
    if (p[0] == '/')
        return NULL;
    return normalize(p, false);
}

char *ck_path_normalize_abs(const char *p)
{
    return normalize(p, true);
}

bool ck_path_is_under(const char *path, const char *prefix)
{
    g_autofree char *np = ck_path_normalize_abs(path);
    g_autofree char *nx = ck_path_normalize_abs(prefix);
    size_t lx = strlen(nx);
    if (strcmp(nx, "/") == 0)
        return true;
    return strncmp(np, nx, lx) == 0 && (np[lx] == '\0' || np[lx] == '/');
}

static char *path_join(const char *root, const char *rest)
{
    if (root[0] == '\0')
        return g_strdup(rest);
    size_t l = strlen(root);
    return g_strconcat(root, root[l - 1] == '/' ? "" : "/", rest, NULL);
}

/* "v<G>/<S>" into a URI's location, before any ?query. */
static char *uri_join(const char *uri, const char *rest)
{
    const char *q = strchr(uri, '?');
    if (!q)
        return path_join(uri, rest);
    g_autofree char *loc = g_strndup(uri, (gsize)(q - uri));
    g_autofree char *j = path_join(loc, rest);
    return g_strconcat(j, q, NULL);
}

/* ---- directories ---- */

void ck_dir_iter_init(CkDirIter *it, int fd)
{
    it->fd = fd;
    it->len = it->pos = 0;
    it->ino = 0;
}

const char *ck_dir_iter_next(CkDirIter *it, unsigned char *d_type)
{
    for (;;) {
        if (it->pos >= it->len) {
            ssize_t n = getdents64(it->fd, it->buf, sizeof it->buf);
            if (n <= 0)
                return NULL;
            it->len = n;
            it->pos = 0;
        }
        struct dirent64 *de = (struct dirent64 *)(void *)(it->buf + it->pos);
        it->pos += de->d_reclen;
        if (de->d_name[0] == '.' &&
            (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
            continue;
        *d_type = de->d_type;
        it->ino = de->d_ino;
        return de->d_name;
    }
}

unsigned char ck_dir_entry_type(int dirfd, const char *name, unsigned char d_type)
{
    if (d_type != DT_UNKNOWN)
        return d_type;
    struct stat sb;
    if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0)
        return DT_UNKNOWN;
    return (unsigned char)IFTODT(sb.st_mode & S_IFMT);
}

/* ---- the look-up memo ---- */

typedef enum {
    ST_DIR,
    ST_MISSING,
    ST_SYMLINK, /* a component is a symlink: not followed */
    ST_NOT_DIR,
    ST_ERROR,
} DirStatus;

typedef struct {
    DirStatus st;
    int err;
    char *bad;        /* the offending component path, for messages */
    bool scanned;     /* gens/subtasks below are valid */
    GArray *gens;     /* guint64 sorted: canonical v<G> directories */
    GArray *subtasks; /* guint32 sorted: canonical <S> directories */
} RootInfo;

struct CkRootCache {
    GHashTable *roots; /* "L:<rel>" / "E:<abs>" -> RootInfo* */
    const char *job;   /* the job interned last (a catalog reads one job's markers in a row) */
    /* the external_root prefixes of the resolve that uses it (borrowed) */
    const GPtrArray *ext;
};

static void root_info_free(gpointer p)
{
    RootInfo *ri = p;
    g_free(ri->bad);
    if (ri->gens)
        g_array_unref(ri->gens);
    if (ri->subtasks)
        g_array_unref(ri->subtasks);
    g_free(ri);
}

CkRootCache *ck_root_cache_new(void)
{
    CkRootCache *c = g_new0(CkRootCache, 1);
    c->roots = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, root_info_free);
    return c;
}

void ck_root_cache_free(CkRootCache *c)
{
    if (!c)
        return;
    g_hash_table_unref(c->roots);
    g_free(c);
}

/* The slow path: component by component, to say which one is a symlink. */
static int open_walk(int dfd, const char *path, int flags, char **bad)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    g_autoptr(GString) sofar = g_string_new(NULL);
    for (char **c = parts; *c; c++) {
        if (**c == '\0' || strcmp(*c, ".") == 0)
            continue;
        if (strcmp(*c, "..") == 0) { /* never above dirfd */
            close(fd);
            if (bad)
                *bad = g_strdup(path);
            return -EXDEV;
        }
        if (sofar->len)
            g_string_append_c(sofar, '/');
        g_string_append(sofar, *c);
        bool last = c[1] == NULL;
        int nfd = openat(fd, *c, (last ? flags : O_RDONLY | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0) {
            int e = errno;
            struct stat sb;
            if ((e == ELOOP || e == ENOTDIR) && fstatat(fd, *c, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                S_ISLNK(sb.st_mode))
                e = ELOOP;
            if (bad)
                *bad = g_strdup(sofar->str);
            close(fd);
            return -e;
        }
        close(fd);
        fd = nfd;
    }
    return fd;
}

int ck_open_beneath(int dirfd, const char *path, int flags, char **bad)
{
    if (bad)
        *bad = NULL;
    if (path[0] == '\0' || strcmp(path, ".") == 0)
        return open_walk(dirfd, ".", flags, bad);
    struct open_how how = {
        .flags = (guint64)(flags | O_CLOEXEC),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0)
        return fd;
    int e = errno;
    if (e == ELOOP || e == ENOSYS || e == EPERM || e == EXDEV || e == ENOTDIR)
        return open_walk(dirfd, path, flags, bad); /* which component, or no openat2 */
    if (bad)
        *bad = g_strdup(path);
    return -e;
}

int ck_open_external(const GPtrArray *external_roots, const char *path, int flags, char **bad)
{
    if (bad)
        *bad = NULL;
    g_autofree char *npath = path[0] == '/' ? ck_path_normalize_abs(path) : NULL;
    for (guint i = 0; npath && external_roots && i < external_roots->len; i++) {
        const char *given = external_roots->pdata[i];
        if (!given || given[0] != '/')
            continue;
        /* the prefix as the path is compared: normalised, as a tool may
         * have been given "/x/ext/" or "/x/./ext" */
        g_autofree char *pfx = ck_path_normalize_abs(given);
        if (!ck_path_is_under(npath, pfx))
            continue;
        int pfd = open(pfx, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pfd < 0)
            return -errno;
        const char *rest = npath + strlen(pfx);
        while (*rest == '/')
            rest++;
        g_autofree char *below = NULL;
        int fd = ck_open_beneath(pfd, rest, flags, &below);
        close(pfd);
        if (fd < 0 && below && bad)
            *bad = path_join(pfx, below);
        return fd;
    }
    return -EACCES;
}

static DirStatus status_of_errno(int e)
{
    switch (e) {
    case ENOENT:
        return ST_MISSING;
    case ELOOP:
        return ST_SYMLINK;
    case ENOTDIR:
        return ST_NOT_DIR;
    default:
        return ST_ERROR;
    }
}

/* Opens a root directory, never through a symlink: a local path beneath
 * dfd, an external one beneath the external_root prefix that allows it.
 * The views open what they show the same way: what a restore reads is what
 * they can show.  Returns a descriptor or -1 with *ri filled. */
static int open_root(int dfd, bool local, const GPtrArray *ext, const char *path, RootInfo *ri)
{
    char *bad = NULL;
    int fd = local ? ck_open_beneath(dfd, path, O_RDONLY | O_DIRECTORY, &bad)
                   : ck_open_external(ext, path, O_RDONLY | O_DIRECTORY, &bad);
    if (fd < 0) {
        ri->err = -fd;
        ri->st = status_of_errno(-fd);
        g_free(ri->bad);
        ri->bad = bad ? bad : g_strdup(path);
        return -1;
    }
    g_free(bad);
    ri->st = ST_DIR;
    return fd;
}

static gint cmp_u32(gconstpointer a, gconstpointer b)
{
    guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
    return x < y ? -1 : x > y;
}

static gint cmp_u64(gconstpointer a, gconstpointer b)
{
    guint64 x = *(const guint64 *)a, y = *(const guint64 *)b;
    return x < y ? -1 : x > y;
}

static bool has_u64(const GArray *a, guint64 v)
{
    for (guint i = 0; a && i < a->len; i++)
        if (g_array_index(a, guint64, i) == v)
            return true;
    return false;
}

static bool has_u32(const GArray *a, guint32 v)
{
    for (guint i = 0; a && i < a->len; i++)
        if (g_array_index(a, guint32, i) == v)
            return true;
    return false;
}

static RootInfo *root_find(CkRootCache *cache, bool local, const char *path, bool create)
{
    char buf[512];
    g_autofree char *big = NULL;
    const char *key = buf;
    size_t pl = strlen(path);
    if (pl + 3 <= sizeof buf) {
        buf[0] = local ? 'L' : 'E';
        buf[1] = ':';
        memcpy(buf + 2, path, pl + 1);
    } else {
        key = big = g_strconcat(local ? "L:" : "E:", path, NULL);
    }
    RootInfo *ri = g_hash_table_lookup(cache->roots, key);
    if (!ri && create) {
        ri = g_new0(RootInfo, 1);
        g_hash_table_insert(cache->roots, g_strdup(key), ri);
    }
    return ri;
}

/* ri's v<G> and <S> subdirectories: a listing of fd (a directory). */
static void root_scan(RootInfo *ri, int fd)
{
    ri->scanned = true;
    ri->gens = g_array_new(FALSE, FALSE, sizeof(guint64));
    ri->subtasks = g_array_new(FALSE, FALSE, sizeof(guint32));
    CkDirIter it;
    ck_dir_iter_init(&it, fd);
    const char *nm;
    unsigned char t;
    while ((nm = ck_dir_iter_next(&it, &t)) != NULL) {
        size_t l = strlen(nm);
        guint64 g;
        guint32 s;
        if (ck_parse_generation_name(nm, l, &g)) {
            if (ck_dir_entry_type(fd, nm, t) == DT_DIR)
                g_array_append_val(ri->gens, g);
        } else if (ck_parse_subtask_name(nm, l, &s)) {
            if (ck_dir_entry_type(fd, nm, t) == DT_DIR)
                g_array_append_val(ri->subtasks, s);
        }
    }
    g_array_sort(ri->gens, cmp_u64);
    g_array_sort(ri->subtasks, cmp_u32);
}

/* Status of a directory, and (want_scan) its v<G> and <S> subdirectories.
 * A directory named v<G> or <S> inside an already scanned parent is answered
 * from the parent's scan, without a system call. */
static const RootInfo *root_lookup(CkRootCache *cache, int dfd, bool local, const char *path,
                                   bool want_scan)
{
    RootInfo *ri = root_find(cache, local, path, false);
    if (ri && (ri->scanned || !want_scan || ri->st != ST_DIR))
        return ri;
    if (!ri && !want_scan && path[0] != '\0') {
        const char *sl = strrchr(path, '/');
        g_autofree char *parent = sl ? g_strndup(path, (gsize)(sl - path)) : g_strdup("");
        const RootInfo *pi = root_find(cache, local, parent, false);
        guint64 g;
        guint32 s;
        const char *nm = sl ? sl + 1 : path;
        if (pi && pi->scanned &&
            ((ck_parse_generation_name(nm, strlen(nm), &g) && has_u64(pi->gens, g)) ||
             (ck_parse_subtask_name(nm, strlen(nm), &s) && has_u32(pi->subtasks, s)))) {
            ri = root_find(cache, local, path, true);
            ri->st = ST_DIR;
            return ri;
        }
    }
    if (!ri)
        ri = root_find(cache, local, path, true);
    int fd = open_root(dfd, local, cache->ext, path, ri);
    if (fd < 0)
        return ri;
    if (want_scan)
        root_scan(ri, fd);
    close(fd);
    return ri;
}

void ck_root_cache_scan_fd(CkRootCache *cache, const char *path, int fd)
{
    RootInfo *ri = root_find(cache, true, path, true);
    g_clear_pointer(&ri->gens, g_array_unref);
    g_clear_pointer(&ri->subtasks, g_array_unref);
    g_clear_pointer(&ri->bad, g_free);
    ri->st = ST_DIR;
    ri->err = 0;
    root_scan(ri, fd);
}

/* ---- one marker ---- */

void ck_restore_free(CkRestore *r)
{
    if (!r)
        return;
    g_free(r->root);
    if (r->participants)
        g_array_unref(r->participants);
    if (r->subtasks)
        g_array_unref(r->subtasks);
    g_free(r->marker);
    if (r->reads)
        g_ptr_array_unref(r->reads);
    g_free(r->error);
    g_free(r->state);
    g_free(r);
}

static GArray *u32_array_copy(const GArray *a)
{
    GArray *b = g_array_sized_new(FALSE, FALSE, sizeof(guint32), a ? a->len : 0);
    if (a && a->len)
        g_array_append_vals(b, a->data, a->len);
    return b;
}

CkRestore *ck_restore_copy(const CkRestore *r)
{
    CkRestore *c = g_new0(CkRestore, 1);
    *c = *r;
    c->root = g_strdup(r->root);
    c->participants = u32_array_copy(r->participants);
    c->subtasks =
        r->subtasks == r->participants ? g_array_ref(c->participants) : u32_array_copy(r->subtasks);
    c->marker = g_strdup(r->marker);
    c->reads = g_ptr_array_new_full(r->reads->len, g_free);
    for (guint i = 0; i < r->reads->len; i++)
        g_ptr_array_add(c->reads, g_strdup(r->reads->pdata[i]));
    c->error = g_strdup(r->error);
    c->state = g_strdup(r->state);
    return c;
}

char *ck_restore_path(const char *dir, const char *rel)
{
    if (!dir || strcmp(dir, ".") == 0)
        return g_strdup(rel[0] ? rel : ".");
    if (rel[0] == '\0')
        return g_strdup(dir);
    size_t l = strlen(dir);
    return g_strconcat(dir, dir[l - 1] == '/' ? "" : "/", rel, NULL);
}

static void describe_list(GString *out, const char *key, const GPtrArray *a)
{
    g_string_append_printf(out, "%s:", key);
    for (guint k = 0; a && k < a->len; k++)
        g_string_append_printf(out, "%s%s", k ? ", " : " ", (char *)a->pdata[k]);
    if (!a || a->len == 0)
        g_string_append(out, " -");
    g_string_append_c(out, '\n');
}

bool ck_restore_root_relative(const CkRestore *r)
{
    return r->root_kind == CK_ROOT_LOCAL ||
           (r->cls == CK_MARKER_CUT_SHORT && r->root_kind == CK_ROOT_NONE && r->root);
}

char *ck_restore_escape(const char *text)
{
    return g_strescape(text, "\"");
}

const char *ck_restore_generation_source(const CkRestore *r)
{
    return r->generation_guessed ? "guessed" : r->has_generation ? "marker" : NULL;
}

void ck_restore_describe(GString *out, const CkRestore *r, const char *dir,
                         const GPtrArray *shared_with, const GPtrArray *unknown)
{
    bool local = ck_restore_root_relative(r);
    g_string_append_printf(out, "checkpoint: %" G_GUINT64_FORMAT "\n", (guint64)r->checkpoint);
    g_string_append_printf(out, "class: %s\n", ck_marker_class_name(r->cls));
    if (r->root) {
        g_autofree char *root = local ? ck_restore_path(dir, r->root) : g_strdup(r->root);
        g_string_append_printf(out, "root: %s (%s)\n", root, ck_root_kind_name(r->root_kind));
    } else {
        g_string_append(out, "root: -\n");
    }
    if (r->has_generation)
        g_string_append_printf(out, "generation: %" G_GUINT64_FORMAT " (%s)\n",
                               (guint64)r->generation, ck_restore_generation_source(r));
    else
        g_string_append(out, "generation: -\n");
    g_string_append(out, "participants:");
    for (guint i = 0; i < r->participants->len; i++)
        g_string_append_printf(out, "%s%u", i ? "," : " ",
                               g_array_index(r->participants, guint32, i));
    g_string_append(out, r->participants->len ? "\n" : " -\n");
    g_autofree char *marker = ck_restore_path(dir, r->marker);
    g_string_append_printf(out, "marker: %s\n", marker);
    g_string_append_printf(out, "restorable: %s\n", r->restorable ? "yes" : "no");
    g_autoptr(GPtrArray) reads = g_ptr_array_new_with_free_func(g_free);
    for (guint k = 0; k < r->reads->len; k++)
        g_ptr_array_add(reads, local ? ck_restore_path(dir, r->reads->pdata[k])
                                     : g_strdup(r->reads->pdata[k]));
    describe_list(out, "reads", reads);
    if (r->legacy_location)
        g_string_append_printf(out, "legacy_location: yes%s\n",
                               r->older_layout ? " (older layout)" : "");
    if (r->foreign_job)
        g_string_append_printf(out, "foreign_root: %s\n", r->foreign_job);
    if (shared_with)
        describe_list(out, "shared_with", shared_with);
    for (guint k = 0; unknown && k < unknown->len; k++) {
        const CkMarkerKv *kv = unknown->pdata[k];
        g_autofree char *v = ck_restore_escape(kv->value);
        g_string_append_printf(out, "unknown: %s=%s\n", kv->key, v);
    }
    if (r->error) {
        g_autofree char *e = ck_restore_escape(r->error);
        g_string_append_printf(out, "error: %s\n", e);
    } else {
        g_string_append(out, "error: -\n");
    }
}

static void set_unrestorable(CkRestore *r, char *msg)
{
    r->restorable = false;
    g_free(r->error);
    r->error = msg;
    g_ptr_array_set_size(r->reads, 0);
    g_array_set_size(r->subtasks, 0);
}

/* A malformed marker, reported as every one is: "malformed marker: " and
 * why (with "line N: " when it is about a line), and none of its
 * half-read fields shown. */
static void set_malformed(CkRestore *r, const char *why)
{
    r->cls = CK_MARKER_MALFORMED;
    r->root_kind = CK_ROOT_NONE;
    g_clear_pointer(&r->root, g_free);
    g_clear_pointer(&r->state, g_free);
    r->has_generation = r->generation_guessed = false;
    g_array_set_size(r->participants, 0);
    set_unrestorable(r, g_strconcat("malformed marker: ", why, NULL));
}

static char *status_message(const RootInfo *ri, const char *path, bool local)
{
    const char *shown = path[0] ? path : ".";
    switch (ri->st) {
    case ST_DIR:
        return NULL;
    case ST_MISSING:
        return g_strdup_printf("%s does not exist", shown);
    case ST_SYMLINK:
        return g_strdup_printf("%s: %s is a symlink, not followed", shown, ri->bad);
    case ST_NOT_DIR:
        return g_strdup_printf("%s is not a directory", shown);
    case ST_ERROR:
        break;
    }
    return g_strdup_printf("%s: %s%s", shown, g_strerror(ri->err), local ? "" : " (external root)");
}

/* A root the restore can look at: local (relative to dfd) or external. */
typedef struct {
    int dfd;
    bool local;
    const char *path;
    CkRootCache *cache;
} Root;

static const RootInfo *lookup(const Root *rt, const char *sub, bool scan)
{
    if (!sub)
        return root_lookup(rt->cache, rt->dfd, rt->local, rt->path, scan);
    g_autofree char *p = path_join(rt->path, sub);
    return root_lookup(rt->cache, rt->dfd, rt->local, p, scan);
}

/* Generation: the marker's, else the highest v<G> under the root. */
static bool pick_generation(CkRestore *r, const CkMarker *m, const Root *rt)
{
    if (m->has_generation) {
        r->has_generation = true;
        r->generation = m->generation;
        return true;
    }
    if (!rt) {
        set_unrestorable(
            r, g_strdup_printf("no generation= and the root %s is remote: cannot guess the "
                               "generation",
                               r->root));
        return false;
    }
    const RootInfo *ri = lookup(rt, NULL, true);
    if (ri->st == ST_DIR && ri->gens && ri->gens->len) {
        r->has_generation = true;
        r->generation = g_array_index(ri->gens, guint64, ri->gens->len - 1);
        r->generation_guessed = true;
        return true;
    }
    return false;
}

static void add_reads_gen(CkRestore *r, const CkMarker *m, bool uri)
{
    if (uri) {
        for (guint i = 0; i < m->participants->len; i++) {
            guint32 s = g_array_index(m->participants, guint32, i);
            g_autofree char *rest =
                g_strdup_printf("v%" G_GUINT64_FORMAT "/%u", (guint64)r->generation, s);
            g_ptr_array_add(r->reads, uri_join(r->root, rest));
            g_array_append_val(r->subtasks, s);
        }
        return;
    }
    /* path_join(root, "v<G>/<S>") for each participant, without a printf
     * per read (a catalog makes one for every participant of every marker) */
    char gen[CK_U64_DIGITS];
    char *gd = ck_u64_digits(gen + sizeof gen, r->generation);
    size_t rl = strlen(r->root), gl = (size_t)(gen + sizeof gen - gd);
    bool sep = rl > 0 && r->root[rl - 1] != '/';
    for (guint i = 0; i < m->participants->len; i++) {
        guint32 s = g_array_index(m->participants, guint32, i);
        char sub[CK_U64_DIGITS];
        char *sd = ck_u64_digits(sub + sizeof sub, s);
        size_t sl = (size_t)(sub + sizeof sub - sd);
        char *p = g_malloc(rl + sep + 1 + gl + 1 + sl + 1), *w = p;
        memcpy(w, r->root, rl);
        w += rl;
        if (sep)
            *w++ = '/';
        *w++ = 'v';
        memcpy(w, gd, gl);
        w += gl;
        *w++ = '/';
        memcpy(w, sd, sl);
        w[sl] = '\0';
        g_ptr_array_add(r->reads, p);
        g_array_append_val(r->subtasks, s);
    }
}

char *ck_restore_location(const CkRestore *r)
{
    if (!r->restorable || !r->root)
        return NULL;
    if (r->older_layout)
        return g_strdup(r->root);
    if (!r->has_generation)
        return NULL;
    char vg[24];
    g_snprintf(vg, sizeof vg, "v%" G_GUINT64_FORMAT, (guint64)r->generation);
    return r->root_kind == CK_ROOT_REMOTE ? uri_join(r->root, vg) : path_join(r->root, vg);
}

static bool external_allowed(const CkResolveOptions *opts, const char *abs)
{
    if (!opts || !opts->external_roots)
        return false;
    for (guint i = 0; i < opts->external_roots->len; i++) {
        const char *pfx = opts->external_roots->pdata[i];
        if (pfx && pfx[0] == '/' && ck_path_is_under(abs, pfx))
            return true;
    }
    return false;
}

/* Classifies a root value (state= or a legacy backend): sets root_kind and
 * root; relative values are normalised and must stay inside the dir.
 * Returns false (with r failed) when the value is unusable. */
static bool classify_root(CkRestore *r, const char *value, const CkResolveOptions *opts,
                          const char *what, bool *escapes)
{
    *escapes = false;
    if (ck_is_remote_uri(value)) {
        r->root_kind = CK_ROOT_REMOTE;
        r->root = g_strdup(value);
        return true;
    }
    const char *p = value;
    if (g_str_has_prefix(value, "file://")) {
        p = value + strlen("file://");
        if (g_str_has_prefix(p, "localhost/"))
            p += strlen("localhost");
        if (p[0] != '/') {
            r->root = g_strdup(value);
            set_unrestorable(
                r, g_strdup_printf("%s=%s: a file:// URI needs an absolute path", what, value));
            return false;
        }
    }
    if (p[0] == '/') {
        r->root = ck_path_normalize_abs(p);
        r->root_kind = external_allowed(opts, r->root) ? CK_ROOT_EXTERNAL : CK_ROOT_REMOTE;
        return true;
    }
    if (p[0] == '\0') {
        r->root = g_strdup("");
        set_unrestorable(r, g_strdup_printf("%s= is empty", what));
        return false;
    }
    char *n = ck_path_normalize_rel(p);
    if (!n) {
        r->root = g_strdup(value);
        *escapes = true;
        set_unrestorable(r, g_strdup_printf("%s=%s escapes the checkpoint directory", what, value));
        return false;
    }
    r->root = n;
    r->root_kind = CK_ROOT_LOCAL;
    return true;
}

/* A local root as messages name it: "" is the checkpoint directory. */
static const char *root_name(const CkRestore *r)
{
    return r->root[0] ? r->root : "the checkpoint directory";
}

/* No generation= and no v<G> under the root to take the highest of. */
static void fail_cannot_guess(CkRestore *r)
{
    set_unrestorable(
        r, g_strdup_printf("no generation= and no v<G> under %s: cannot guess the generation",
                           root_name(r)));
}

/* Where a restore goes once its root is classified.
 * A remote root is not looked at: the reads are <root>/v<G>/<S> (or a
 * failure when G must be guessed); NULL, r is done.  A local or external
 * root must be a directory: NULL with r failed ("<what> <why>") when it is
 * not, else its info, and *rt looks below it. */
static const RootInfo *browse_root(CkRestore *r, const CkMarker *m, int dfd, CkRootCache *cache,
                                   const char *what, Root *rt)
{
    if (r->root_kind == CK_ROOT_REMOTE) {
        if (pick_generation(r, m, NULL)) {
            add_reads_gen(r, m, true);
            r->restorable = true;
        }
        return NULL;
    }
    *rt = (Root){dfd, r->root_kind == CK_ROOT_LOCAL, r->root, cache};
    const RootInfo *ri = lookup(rt, NULL, true);
    if (ri->st != ST_DIR) {
        g_autofree char *msg = status_message(ri, r->root, rt->local);
        set_unrestorable(r, g_strdup_printf("%s %s", what, msg));
        return NULL;
    }
    return ri;
}

static void restore_namespaced(CkRestore *r, int dfd, const CkMarker *m,
                               const CkResolveOptions *opts, CkRootCache *cache)
{
    bool escapes;
    if (!classify_root(r, m->state, opts, "state", &escapes)) {
        if (escapes) { /* a relative root that escapes is malformed */
            g_autofree char *why = g_strdup_printf(
                "line %u: state=%s escapes the checkpoint directory", m->state_line, m->state);
            set_malformed(r, why);
        }
        return;
    }
    if (r->root_kind == CK_ROOT_LOCAL) {
        /* _state/<other>: resolved, but flagged (a collision hazard). */
        const char *s = r->root;
        if (g_str_has_prefix(s, "_state/")) {
            const char *j = s + strlen("_state/");
            const char *e = strchr(j, '/');
            size_t l = e ? (size_t)(e - j) : strlen(j);
            bool own = strncmp(j, r->job, l) == 0 && r->job[l] == '\0';
            if (!own && ck_is_job_id(j, l)) {
                g_autofree char *other = g_strndup(j, l);
                const char *oi = ck_intern(other);
                if (oi != r->job)
                    r->foreign_job = oi;
            }
        }
    }
    Root rt;
    const RootInfo *ri = browse_root(r, m, dfd, cache, "state root", &rt);
    if (!ri)
        return;
    if (!pick_generation(r, m, &rt)) { /* with a browsable root it fails silently */
        fail_cannot_guess(r);
        return;
    }
    if (m->participants->len > 0 && !(ri->scanned && has_u64(ri->gens, r->generation))) {
        g_autofree char *vg = g_strdup_printf("v%" G_GUINT64_FORMAT, (guint64)r->generation);
        const RootInfo *gi = lookup(&rt, vg, false);
        if (gi->st != ST_DIR) {
            g_autofree char *p = path_join(r->root, vg);
            set_unrestorable(r, status_message(gi, p, rt.local));
            return;
        }
    }
    add_reads_gen(r, m, false);
    r->restorable = true;
}

static const char *legacy_backend_of(const CkResolveOptions *opts, const char *job)
{
    if (!opts)
        return NULL;
    if (opts->legacy_backends) {
        const char *b = g_hash_table_lookup(opts->legacy_backends, job);
        if (b)
            return b;
    }
    return opts->legacy_backend;
}

static void restore_legacy(CkRestore *r, int dfd, const CkMarker *m, const CkResolveOptions *opts,
                           CkRootCache *cache)
{
    r->legacy_location = true;
    const char *backend = legacy_backend_of(opts, r->job);
    if (backend) {
        bool escapes;
        if (!classify_root(r, backend, opts, "legacy_backend", &escapes))
            return;
    } else {
        r->root = g_strdup("");
        r->root_kind = CK_ROOT_LOCAL;
    }
    Root rt;
    const RootInfo *ri = browse_root(r, m, dfd, cache, "legacy backend", &rt);
    if (!ri)
        return;
    bool have_gen = pick_generation(r, m, &rt);
    if (m->participants->len == 0) {
        if (!have_gen) {
            fail_cannot_guess(r);
            return;
        }
        r->restorable = true;
        return;
    }
    const RootInfo *gi = NULL;
    g_autofree char *vg = NULL;
    if (have_gen) {
        vg = g_strdup_printf("v%" G_GUINT64_FORMAT, (guint64)r->generation);
        gi = lookup(&rt, vg, false);
        if (gi->st == ST_DIR) {
            add_reads_gen(r, m, false);
            r->restorable = true;
            return;
        }
        if (gi->st == ST_SYMLINK || gi->st == ST_NOT_DIR || gi->st == ST_ERROR) {
            g_autofree char *p = path_join(r->root, vg);
            set_unrestorable(r, status_message(gi, p, rt.local));
            return;
        }
    }
    /* <dir>/v<G> is missing: the older layout <dir>/<S>, if any participant has one. */
    bool any = false;
    for (guint i = 0; i < m->participants->len && !any; i++)
        any = has_u32(ri->subtasks, g_array_index(m->participants, guint32, i));
    if (!any) {
        const char *where = root_name(r);
        if (have_gen)
            set_unrestorable(
                r,
                g_strdup_printf("neither %s nor the older layout <S> exists under %s", vg, where));
        else
            set_unrestorable(
                r, g_strdup_printf("no generation= and no v<G> (nor the older layout <S>) "
                                   "under %s: cannot guess the generation",
                                   where));
        return;
    }
    r->older_layout = true;
    if (!m->has_generation)
        r->has_generation = false;
    for (guint i = 0; i < m->participants->len; i++) {
        guint32 s = g_array_index(m->participants, guint32, i);
        g_autofree char *rest = g_strdup_printf("%u", s);
        g_ptr_array_add(r->reads, path_join(r->root, rest));
        g_array_append_val(r->subtasks, s);
    }
    r->restorable = true;
}

static void restore_cut_short(CkRestore *r, int dfd, const CkMarker *m, CkRootCache *cache)
{
    r->root = g_strconcat("_state/", r->job, NULL);
    r->root_kind = CK_ROOT_LOCAL;
    Root rt;
    if (!browse_root(r, m, dfd, cache,
                     "cut short (neither participants= nor state=) and its own root", &rt)) {
        r->root_kind = CK_ROOT_NONE;
        return;
    }
    if (!pick_generation(r, m, &rt)) {
        set_unrestorable(
            r, g_strdup_printf("cut short, no generation= and no v<G> under %s", r->root));
        return;
    }
    g_autofree char *vg = g_strdup_printf("v%" G_GUINT64_FORMAT, (guint64)r->generation);
    g_autofree char *gp = path_join(r->root, vg);
    const RootInfo *gi = lookup(&rt, vg, true);
    if (gi->st != ST_DIR) {
        g_autofree char *msg = status_message(gi, gp, true);
        set_unrestorable(r, g_strdup_printf("cut short and %s", msg));
        return;
    }
    /* Participants unknown: a restore reads every subtask directory present. */
    for (guint i = 0; gi->subtasks && i < gi->subtasks->len; i++) {
        guint32 s = g_array_index(gi->subtasks, guint32, i);
        g_autofree char *rest = g_strdup_printf("%u", s);
        g_ptr_array_add(r->reads, path_join(gp, rest));
        g_array_append_val(r->subtasks, s);
    }
    r->restorable = true;
}

CkRestore *ck_restore_of_marker_cached(int dirfd, const char *job, uint64_t checkpoint,
                                       const CkMarker *m, const CkResolveOptions *opts,
                                       CkRootCache *cache)
{
    g_autoptr(CkRootCache) own = NULL;
    if (!cache)
        cache = own = ck_root_cache_new();
    CkRestore *r = g_new0(CkRestore, 1);
    /* ck_intern takes a process-wide lock: once per job, not per marker */
    if (!cache->job || strcmp(cache->job, job) != 0)
        cache->job = ck_intern(job);
    cache->ext = opts ? opts->external_roots : NULL;
    r->job = cache->job;
    r->checkpoint = checkpoint;
    r->cls = m->cls;
    /* a parse error leaves half-parsed fields behind: none is shown */
    r->participants = u32_array_copy(m->cls == CK_MARKER_MALFORMED ? NULL : m->participants);
    r->subtasks = g_array_new(FALSE, FALSE, sizeof(guint32));
    r->reads = g_ptr_array_new_with_free_func(g_free);
    CkU64Text num;
    r->marker =
        g_strconcat("_jobs/", job, "/chk-", ck_u64_text(num, checkpoint), "/COMPLETED", NULL);
    r->state = m->cls == CK_MARKER_MALFORMED ? NULL : g_strdup(m->state);
    if (m->cls != CK_MARKER_MALFORMED && m->has_generation) {
        /* shown even when the restore then fails */
        r->has_generation = true;
        r->generation = m->generation;
    }
    /* a marker without generation= is flagged guessed, also when there was
     * nothing to take the generation from */
    r->generation_guessed = m->cls != CK_MARKER_MALFORMED && !m->has_generation;
    switch (m->cls) {
    case CK_MARKER_MALFORMED:
        /* m->error already says "line N: ..." when it is about a line. */
        set_malformed(r, m->error ? m->error : "parse error");
        break;
    case CK_MARKER_NAMESPACED:
        restore_namespaced(r, dirfd, m, opts, cache);
        break;
    case CK_MARKER_LEGACY:
        restore_legacy(r, dirfd, m, opts, cache);
        break;
    case CK_MARKER_CUT_SHORT:
        restore_cut_short(r, dirfd, m, cache);
        break;
    }
    /* Memory (the budget: 1 KiB of catalog memory per marker): one array when
     * the reads follow the participants. */
    if (r->subtasks->len == r->participants->len &&
        (r->subtasks->len == 0 || memcmp(r->subtasks->data, r->participants->data,
                                         r->subtasks->len * sizeof(guint32)) == 0)) {
        g_array_unref(r->subtasks);
        r->subtasks = g_array_ref(r->participants);
    }
    if (r->state && r->root && strcmp(r->state, r->root) == 0) {
        g_free(r->state);
        r->state = NULL;
    }
    return r;
}

CkRestore *ck_restore_of_marker(int dirfd, const char *job, uint64_t checkpoint, const CkMarker *m,
                                const CkResolveOptions *opts)
{
    return ck_restore_of_marker_cached(dirfd, job, checkpoint, m, opts, NULL);
}
