/* The attach sequence, from start to finish (attach.h). */
#include "attach.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "intern.h"
#include "ops/ops.h"

const char *attach_state_open(struct ckptfs *fs, const SupLink *link)
{
    int rc = state_open(&fs->state, link->state_fd);
    if (rc == -EPROTO)
        return "the state memfd: kept in another layout by another build";
    if (rc < 0)
        return g_strerror(-rc);
    bool attach = link->fuse_fd >= 0;
    if (attach != fs->state.attached || (attach && !fs->state.hdr->init_len))
        return "the supervisor's state does not match its connection";
    if (attach)
        fs->mountpoint = strdup(fs->state.hdr->mountpoint);
    return NULL;
}

/* What a mount fixes for its life: the kernel holds it (mount options, the
 * answer to INIT, the names it looked up).  The first daemon writes it into
 * the state; a daemon that attaches keeps it, whatever its own options say,
 * and names what it could not change (a remount would). */
static char *fixed_settings(const struct ckptfs *fs)
{
    const FsOptions *o = &fs->opt;
    return g_strdup_printf("backing=%s\nviews=%s\npassthrough=%s\nwriteback=%d\n"
                           "allow_other=%d\ndefault_permissions=%d\nmax_read=%u\n",
                           fs->backing, o->views_name, o->passthrough_off ? "off" : "auto",
                           o->writeback, o->allow_other, o->default_permissions, o->max_read);
}

char *attach_keep_fixed(struct ckptfs *fs)
{
    const char *kept = fs->state.hdr->fixed;
    g_autofree char *mine = fixed_settings(fs);
    if (!kept[0] || strcmp(kept, mine) == 0)
        return NULL;
    g_auto(GStrv) old = g_strsplit(kept, "\n", -1);
    g_auto(GStrv) now = g_strsplit(mine, "\n", -1);
    GString *changed = g_string_new(NULL);
    FsOptions *o = &fs->opt;
    for (int i = 0; old[i] && now[i]; i++) {
        if (strcmp(old[i], now[i]) == 0)
            continue;
        const char *v = strchr(old[i], '=');
        if (!v)
            continue;
        g_autofree char *key = g_strndup(old[i], (gsize)(v - old[i]));
        v++;
        if (strcmp(key, "backing") == 0) {
            free(fs->backing);
            fs->backing = strdup(v);
            fs->backing_len = strlen(v) == 1 ? 0 : strlen(v);
        } else if (strcmp(key, "views") == 0) {
            o->views_name = ck_intern(v);
        } else if (strcmp(key, "passthrough") == 0) {
            o->passthrough_off = strcmp(v, "off") == 0;
        } else if (strcmp(key, "writeback") == 0) {
            o->writeback = atoi(v);
        } else if (strcmp(key, "allow_other") == 0) {
            o->allow_other = atoi(v);
        } else if (strcmp(key, "default_permissions") == 0) {
            o->default_permissions = atoi(v);
        } else if (strcmp(key, "max_read") == 0) {
            o->max_read = (unsigned)atoi(v);
        }
        g_string_append_printf(changed, "%s%s", changed->len ? ", " : "", key);
    }
    if (!changed->len) {
        g_string_free(changed, TRUE);
        return NULL;
    }
    g_warning("ckptfs: %s: these settings change only with a remount, and keep the values the "
              "mount has: %s",
              fs->mountpoint, changed->str);
    g_autofree char *list = g_string_free(changed, FALSE);
    return g_strdup_printf("these options need a remount to change: %s", list);
}

int attach_match(struct ckptfs *fs)
{
    StateHeader *h = fs->state.hdr;
    struct stat root;
    if (fstat(fs->root_fd, &root) < 0)
        return -errno;
    if (fs->state.attached)
        return h->root_dev == (uint64_t)root.st_dev && h->root_ino == (uint64_t)root.st_ino
                   ? 0
                   : -EXDEV;
    g_strlcpy(h->mountpoint, fs->mountpoint, sizeof h->mountpoint);
    g_autofree char *fixed = fixed_settings(fs);
    g_strlcpy(h->fixed, fixed, sizeof h->fixed);
    h->root_dev = (uint64_t)root.st_dev;
    h->root_ino = (uint64_t)root.st_ino;
    return 0;
}

static bool hold_by_supervisor(void *ctx, uint32_t slot, uint64_t gen, int fd, bool spare)
{
    return suplink_hold(ctx, slot, gen, fd, spare);
}

static void add_held(void *array, uint32_t slot, uint64_t gen, int fd)
{
    SupHeld h = {slot, gen, fd};
    g_array_append_val((GArray *)array, h);
}

GArray *attach_held_now(void *fs_)
{
    struct ckptfs *fs = fs_;
    GArray *held = g_array_new(FALSE, FALSE, sizeof(SupHeld));
    node_each_held(&fs->nodes, add_held, held);
    return held;
}

void attach_revive(struct ckptfs *fs)
{
    if (fs->link && fs->link->sock >= 0) { /* supervised (suplink_hold checks the rest) */
        fs->nodes.holder = hold_by_supervisor;
        fs->nodes.holder_ctx = fs->link;
        fs->nodes.held_max = SUPLINK_HELD_MAX;
    }
    if (!fs->state.attached)
        return;
    node_table_revive(&fs->nodes);
    g_autoptr(GArray) held = fs->link ? suplink_take_held(fs->link) : NULL;
    for (guint i = 0; held && i < held->len; i++) {
        const SupHeld *h = &g_array_index(held, SupHeld, i);
        node_adopt_held(&fs->nodes, h->slot, h->gen, h->fd);
    }
    handles_revive(fs); /* after the nodes: each handle opens its node's object */
    atomic_fetch_add(&fs->state.hdr->attaches, 1);
    /* the backing files registered for nodes taken over stay registered
     * with the connection: the gauge counts them again */
    atomic_store(&fs->metrics->pt_ids, (int64_t)node_table_count_bound(&fs->nodes));
}

/* What a request of the dead daemon took and the kernel never heard of,
 * given back as the request comes again (outlive/inflight.h); and the
 * forgets it read but had not applied. */
static void give_back(void *ctx, uint32_t kind, uint32_t slot, uint32_t count)
{
    struct ckptfs *fs = ctx;
    if (kind == INFLIGHT_HANDLE) {
        handles_give_back(fs, slot);
    } else if (kind == INFLIGHT_PROBE) {
        Node *n = node_of_slot(&fs->nodes, slot);
        if (n && kio_node_known(&fs->kio, node_ino(&fs->nodes, n)) == 0)
            node_forget_revived(&fs->nodes, n);
    } else {
        /* a reference taken for an unanswered request, or a forget read
         * and not applied */
        Node *n = node_of_slot(&fs->nodes, slot);
        if (n)
            node_forget(&fs->nodes, n, count);
    }
}

/* The nodes the kernel no longer holds: their FORGET was read by the daemon
 * that died (a forget is never sent again).  Asked of the kernel node by
 * node, before any request is read; a node an unanswered request took is
 * left to that request's give-back.  A FORGET the kernel sends later for
 * one of these names a slot now empty or another node's: node_forget_id
 * passes it over. */
static void drop_forgotten(struct ckptfs *fs)
{
    uint32_t high = atomic_load(&fs->state.hdr->node_high), dropped = 0;
    for (uint32_t i = FUSE_ROOT_ID + 1; i < high; i++) {
        Node *n = node_of_slot(&fs->nodes, i);
        if (!n || inflight_adopted_holds(fs->journal.adopted, INFLIGHT_NODE, i) ||
            kio_node_known(&fs->kio, node_ino(&fs->nodes, n)) != 0)
            continue;
        handles_close_node(fs, i);
        node_forget_revived(&fs->nodes, n);
        dropped++;
    }
    if (dropped)
        g_debug("ckptfs: %u nodes the kernel had forgotten, dropped", dropped);
}

int attach_connect(struct ckptfs *fs, int fuse_fd)
{
    /* the kernel's connection, kept by the supervisor: no mount, no INIT */
    kio_replay_init(&fs->kio, fs->state.hdr->init, fs->state.hdr->init_len);
    inflight_journal_init(&fs->journal, fs->state.inflight);
    kio_set_hooks(&fs->kio, &inflight_kio_hooks, &fs->journal);
    int rc = kio_attach(&fs->kio, fs->se, fuse_fd);
    if (rc)
        return rc;
    inflight_journal_adopt(&fs->journal, give_back, fs); /* before any request is read */
    drop_forgotten(fs);
    return 0;
}

int attach_first(struct ckptfs *fs)
{
    StateHeader *h = fs->state.hdr;
    kio_keep_init(&fs->kio, h->init, &h->init_len, sizeof h->init);
    if (fs->supervised) {
        /* the journal is for a daemon that takes over */
        inflight_journal_init(&fs->journal, fs->state.inflight);
        kio_set_hooks(&fs->kio, &inflight_kio_hooks, &fs->journal);
    }
    int fd = fuse_session_fd(fs->se);
    int rc = kio_attach(&fs->kio, fs->se, fd);
    /* ours: the one just mounted (a stat of it would wait for the loop not
     * started yet); a daemon that attaches unmounts it at its end */
    h->mount_dev = mount_dev_at(fs->mountpoint);
    return rc;
}

void attach_end(struct ckptfs *fs, int fuse_fd)
{
    /* libfuse has no mount of its own to unmount; a connection that is gone
     * was unmounted already, and the mount point may be another's now */
    if (fs->state.attached && connection_alive(fuse_fd))
        unmount_lazily(fs->mountpoint, (unsigned long)fs->state.hdr->mount_dev);
}
