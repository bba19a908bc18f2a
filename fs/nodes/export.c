/* Nodes found again by the ids the kernel puts in file handles
 * (name_to_handle_at, NFS): the kernel asks for "." of a node id it no
 * longer holds, and for ".." of a directory it decoded.
 *
 * A forgotten node's slot keeps its record (the backing file handle, the
 * generation, the namespace) until the pool takes the slot again, the
 * oldest first and only past NODE_RETIRED_KEEP free slots, or until the
 * table gives back the records of all but the newest NODE_RETIRED_KEEP
 * (after the kernel let go of half its nodes: table.c); the node comes
 * back in the same slot with the same generation, so the id is the one
 * the handle holds (a lookup by name brings it back there too: retired.c).
 * An object whose node the kernel made again under another id meanwhile,
 * one that is gone, and the views' nodes answer ESTALE: a node id names
 * one object in the kernel, never two ids one.
 * A node a daemon dropped itself (references a predecessor left that the
 * kernel had given up) is never found again: the kernel's late FORGET of
 * the old references would free it under the new ones. */
#include "nodes-private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "outlive/inflight.h"

/* A reference on a node the table holds; the table's lock held. */
static Node *ref_locked(NodeTable *t, Node *n)
{
    n->nlookup++;
    node_sync_locked(t, n);
    inflight_note(INFLIGHT_NODE, n->slot);
    return n;
}

/* The live node of id ino with a reference, NULL when the table has none
 * of that id (maybe its retired record, copied into *rec).  Lock held. */
static Node *live_or_retired_locked(NodeTable *t, fuse_ino_t ino, NodeRec *rec, bool *retired)
{
    uint32_t slot = (uint32_t)ino;
    *retired = false;
    if (slot <= FUSE_ROOT_ID || slot >= atomic_load(&t->state->hdr->node_high))
        return NULL;
    Node *n = t->by_slot[slot];
    if (n)
        return node_ino(t, n) == ino && n->kind == NODE_BACKING && !n->stale ? ref_locked(t, n)
                                                                             : NULL;
    /* a record whose page was given back is no record (reading it would
     * make the page again) */
    if (!state_region_has_data(t->state, t->state->nodes, (size_t)slot * sizeof(NodeRec)))
        return NULL;
    const NodeRec *r = &t->state->nodes[slot];
    /* the fields at the record's start first: an erased record (one whose
     * start was zeroed and its end given back with the next page) stops
     * there, before a read could make that page again */
    *retired = atomic_load_explicit(&r->state, memory_order_acquire) == SLOT_FREE &&
               r->kind == NODE_BACKING && r->handle_len > 0 && r->text_len != STATE_TEXT_LOST &&
               (uint32_t)r->generation == (uint32_t)(ino >> 32);
    if (*retired)
        memcpy(rec, r, sizeof *rec);
    return NULL;
}

/* The path of the object open as fd below the backing root, as a list of
 * names (g_strfreev; empty for the root), NULL when it is not below it
 * (moved out, removed). */
static char **path_below_root(NodeTable *t, int fd)
{
    char link[64], root[PATH_MAX], dir[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", t->root_fd);
    ssize_t rl = readlink(link, root, sizeof root - 1);
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t dl = readlink(link, dir, sizeof dir - 1);
    if (rl <= 0 || dl <= 0)
        return NULL;
    root[rl] = dir[dl] = '\0';
    if (g_str_has_suffix(dir, " (deleted)"))
        return NULL;
    size_t n = strcmp(root, "/") == 0 ? 0 : (size_t)rl;
    if (strncmp(dir, root, n) != 0 || (dir[n] != '/' && dir[n] != '\0'))
        return NULL;
    return g_strsplit_set(dir + n + (dir[n] == '/'), "/", -1);
}

/* The namespace of the object open as fd (st its attributes) from its path
 * below the root, as lookups down that path would give it; false when the
 * path does not lead to it (a file decoded from a handle may have a
 * dentry without its real path). */
static bool ns_of_path(NodeTable *t, int fd, const struct stat *st, CkNs *ns)
{
    g_auto(GStrv) names = path_below_root(t, fd);
    if (!names)
        return false;
    g_autofree char *rel = g_strjoinv("/", names);
    struct stat at;
    if (*rel && (fstatat(t->root_fd, rel, &at, AT_SYMLINK_NOFOLLOW) < 0 ||
                 at.st_dev != st->st_dev || at.st_ino != st->st_ino))
        return false;
    CkNs n = ck_ns_root();
    for (char **p = names; *p; p++)
        if (**p) /* every name but the last is a directory's */
            n = ck_ns_child_of(n, *p, p[1] || S_ISDIR(st->st_mode), t->views_name);
    *ns = n;
    return true;
}

int node_lookup_id(NodeTable *t, fuse_ino_t ino, struct stat *st, Node **out)
{
    if (ino == FUSE_ROOT_ID) {
        *out = t->root;
        return fstat(t->root_fd, st) < 0 ? -errno : 0;
    }
    NodeRec rec;
    bool retired;
    g_mutex_lock(&t->lock);
    Node *n = live_or_retired_locked(t, ino, &rec, &retired);
    g_mutex_unlock(&t->lock);
    if (n) {
        int err = node_fstat(t, n, st);
        if (err)
            node_forget(t, n, 1);
        else
            *out = n;
        return err;
    }
    if (!retired)
        return -ESTALE;

    /* the object must still be there, with a name: the handle of an
     * unlinked file is stale, as on the backing file system */
    Node *fresh = node_from_rec(t->state, (uint32_t)ino, &rec);
    HandleBuf h;
    int fd = open_by_handle_at(t->mount_fd, nhandle_fh(&fresh->handle, &h), O_PATH | O_CLOEXEC);
    if (fd < 0 || fstat(fd, st) < 0 || st->st_dev != fresh->key.dev ||
        st->st_ino != fresh->key.ino || (st->st_mode & S_IFMT) != fresh->type ||
        st->st_nlink == 0 || (fresh->ns.kind == CK_NS_JOB && !fresh->ns.job)) {
        if (fd >= 0)
            close(fd);
        node_free(t, fresh);
        return -ESTALE;
    }
    /* where it is now decides its namespace, as a lookup by name would
     * (moved behind the mount's back); an object with several names keeps
     * the one it was first found under */
    if (S_ISDIR(st->st_mode) || st->st_nlink == 1)
        ns_of_path(t, fd, st, &fresh->ns);

    g_mutex_lock(&t->lock);
    /* another request may have brought it back meanwhile, or the slot went */
    n = live_or_retired_locked(t, ino, &rec, &retired);
    Node *other = g_hash_table_lookup(t->backing, &fresh->key);
    if (n || !retired || other) {
        g_mutex_unlock(&t->lock);
        close(fd);
        node_free(t, fresh);
        if (!n)
            return -ESTALE;
        *out = n;
        return 0;
    }
    fresh->nlookup = 1;
    g_hash_table_insert(t->backing, &fresh->key, fresh);
    slot_pool_claim(&t->pool, (uint32_t)ino);
    rec_fill_locked(t, fresh, (uint32_t)ino);
    inflight_note(INFLIGHT_NODE, fresh->slot);
    node_counted_locked(t);
    g_mutex_unlock(&t->lock);
    fdcache_insert(&t->fdcache, fresh, fd, NULL);
    *out = fresh;
    return 0;
}

int node_lookup_parent(NodeTable *t, Node *dir, struct stat *st, Node **out)
{
    if (!dir || dir->kind != NODE_BACKING || !S_ISDIR(dir->type))
        return -ESTALE;
    if (dir == t->root)
        return node_lookup_id(t, FUSE_ROOT_ID, st, out);
    NodeFd df;
    int err = node_fd(t, dir, &df);
    if (err)
        return err;
    int fd = openat(df.fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
    node_fd_put(t, &df);
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) < 0) {
        err = -errno;
        close(fd);
        return err;
    }
    if (st->st_dev == t->root->key.dev && st->st_ino == t->root->key.ino) {
        close(fd);
        *out = t->root;
        return 0;
    }
    /* its namespace, from the names down from the root as a lookup takes
     * them (a directory has one name) */
    CkNs ns;
    if (!ns_of_path(t, fd, st, &ns)) {
        close(fd);
        return -ESTALE;
    }
    return node_from_fd(t, ns, fd, true, st, out);
}
