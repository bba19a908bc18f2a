/* The bounded cache of O_PATH descriptors of nodes: a quarter of
 * RLIMIT_NOFILE, at most 512 (open files need the rest); its lock is a
 * leaf, taken only after the table's is released. */
#include "nodes-private.h"

#include <sys/resource.h>
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

bool fdcache_shrink(FdCache *c)
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

bool fdcache_get(FdCache *c, Node *n, NodeFd *out)
{
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
    }
    g_mutex_unlock(&c->lock);
    return e != NULL;
}

void fdcache_put(FdCache *c, NodeFd *f)
{
    if (!f->entry)
        return;
    g_mutex_lock(&c->lock);
    fdentry_unref_locked(f->entry);
    g_mutex_unlock(&c->lock);
    f->entry = NULL;
}
