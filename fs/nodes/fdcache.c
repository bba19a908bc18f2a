/* The bounded cache of O_PATH descriptors (a quarter of RLIMIT_NOFILE, at
 * most 512: open files need the rest), and the ways from a node to its
 * backing object: a cached descriptor, a pinned one, or an open by handle. */
#include "nodes-private.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define FD_CACHE_CAPACITY 512

typedef struct {
    Node *node;
    int fd;
    int refs; /* the cache's own reference + borrowers */
    GList link;
} FdEntry;

static void fdentry_unref_locked(FdEntry *e)
{
    if (--e->refs == 0) {
        close(e->fd);
        g_free(e);
    }
}

void fdcache_init(FdCache *c)
{
    g_mutex_init(&c->lock);
    c->map = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_queue_init(&c->lru);
    struct rlimit rl;
    c->capacity = FD_CACHE_CAPACITY;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        c->capacity = (guint)MAX(16, MIN((rlim_t)FD_CACHE_CAPACITY, rl.rlim_cur / 4));
}

void fdcache_clear(FdCache *c)
{
    if (!c->map)
        return;
    GList *l;
    while ((l = g_queue_pop_head_link(&c->lru))) {
        FdEntry *e = l->data;
        fdentry_unref_locked(e);
    }
    g_hash_table_destroy(c->map);
    c->map = NULL;
    g_mutex_clear(&c->lock);
}

void fdcache_drop(FdCache *c, Node *n)
{
    g_mutex_lock(&c->lock);
    FdEntry *e = g_hash_table_lookup(c->map, n);
    if (e) {
        g_hash_table_remove(c->map, n);
        g_queue_unlink(&c->lru, &e->link);
        fdentry_unref_locked(e);
    }
    g_mutex_unlock(&c->lock);
}

/* Closes the older half of the cached descriptors; true if it closed any. */
static bool fdcache_shrink(FdCache *c)
{
    g_mutex_lock(&c->lock);
    guint target = c->lru.length / 2, closed = 0;
    while (c->lru.length > target) {
        GList *tail = g_queue_pop_tail_link(&c->lru);
        FdEntry *old = tail->data;
        g_hash_table_remove(c->map, old->node);
        fdentry_unref_locked(old);
        closed++;
    }
    g_mutex_unlock(&c->lock);
    return closed > 0;
}

void fdcache_insert(FdCache *c, Node *n, int fd, NodeFd *out)
{
    g_mutex_lock(&c->lock);
    FdEntry *e = g_hash_table_lookup(c->map, n);
    if (e) {
        /* another thread opened it meanwhile */
        close(fd);
    } else {
        e = g_new0(FdEntry, 1);
        e->node = n;
        e->fd = fd;
        e->refs = 1;
        e->link.data = e;
        g_hash_table_insert(c->map, n, e);
        g_queue_push_head_link(&c->lru, &e->link);
        while (c->lru.length > c->capacity) {
            GList *tail = g_queue_pop_tail_link(&c->lru);
            FdEntry *old = tail->data;
            g_hash_table_remove(c->map, old->node);
            fdentry_unref_locked(old);
        }
    }
    if (out) {
        e->refs++;
        out->fd = e->fd;
        out->entry = e;
    }
    g_mutex_unlock(&c->lock);
}

int node_fd(NodeTable *t, Node *n, NodeFd *out)
{
    if (n->pinned_fd >= 0) {
        out->fd = n->pinned_fd;
        out->entry = NULL;
        return 0;
    }
    if (!n->handle)
        return -ESTALE; /* a virtual node has no backing object */
    FdCache *c = &t->fdcache;
    g_mutex_lock(&c->lock);
    FdEntry *e = g_hash_table_lookup(c->map, n);
    if (e) {
        e->refs++;
        if (c->lru.head != &e->link) {
            g_queue_unlink(&c->lru, &e->link);
            g_queue_push_head_link(&c->lru, &e->link);
        }
        out->fd = e->fd;
        out->entry = e;
        g_mutex_unlock(&c->lock);
        return 0;
    }
    g_mutex_unlock(&c->lock);
    int fd = open_by_handle_at(t->mount_fd, n->handle, O_PATH | O_CLOEXEC);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && fdcache_shrink(c)) {
        /* out of descriptors (many open files): the cache gives way */
        fd = open_by_handle_at(t->mount_fd, n->handle, O_PATH | O_CLOEXEC);
    }
    if (fd < 0)
        return node_mark_stale(t, n, -errno);
    fdcache_insert(c, n, fd, out);
    return 0;
}

void node_fd_put(NodeTable *t, NodeFd *f)
{
    if (!f->entry)
        return;
    g_mutex_lock(&t->fdcache.lock);
    fdentry_unref_locked(f->entry);
    g_mutex_unlock(&t->fdcache.lock);
    f->entry = NULL;
}

int node_fstat(NodeTable *t, Node *n, struct stat *st)
{
    /* initialised: with node_fd inlined, -O3 gcc cannot see it is set */
    NodeFd f = {.fd = -1, .entry = NULL};
    int err = node_fd(t, n, &f);
    if (err)
        return err;
    if (fstatat(f.fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
        err = -errno;
    node_fd_put(t, &f);
    return err;
}

int node_open(NodeTable *t, Node *n, int flags)
{
    flags &= ~(O_CREAT | O_EXCL | O_NOCTTY);
    flags |= O_CLOEXEC;
    int fd;
    if (n->handle) {
        fd = open_by_handle_at(t->mount_fd, n->handle, flags);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && fdcache_shrink(&t->fdcache))
            fd = open_by_handle_at(t->mount_fd, n->handle, flags);
    } else if (n->pinned_fd >= 0) {
        char proc[64];
        g_snprintf(proc, sizeof proc, "/proc/self/fd/%d", n->pinned_fd);
        fd = open(proc, flags);
    } else {
        return -ESTALE;
    }
    return fd < 0 ? node_mark_stale(t, n, -errno) : fd;
}

int node_open_live(NodeTable *t, Node *n, int flags, struct stat *st)
{
    int fd = node_open(t, n, flags);
    if (fd < 0)
        return fd;
    if (fstat(fd, st) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    /* An open by name of an object that no longer has one: its name was
     * replaced or removed behind the mount's back while the kernel still
     * cached it.  ESTALE makes the kernel look the name up again (and find
     * the new file) instead of reading the old one.  This is decided by
     * nlink alone: the kernel sends RELEASE after close asynchronously, so
     * "no open file" cannot be known here.  (A reopen of an unlinked file
     * through /proc/self/fd therefore fails with ESTALE.) */
    if (st->st_nlink == 0) {
        close(fd);
        return node_mark_stale(t, n, -ESTALE);
    }
    return fd;
}
