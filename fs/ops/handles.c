/* The open-handle registry: every file and directory handle given to the
 * kernel.  fi->fh is the handle's slot in the state memfd (state.h), whose
 * HandleRec says what a new daemon needs to open it again (its node, its
 * open flags, its passthrough binding); the registry maps the slot to this
 * daemon's own handle.  What the kernel never released (the session ended
 * by a signal) is freed at the end.  open_lock is a leaf lock. */
#include <sys/mman.h>

#include "outlive/inflight.h"
#include "ops.h"
#include "ops-private.h"

uint64_t handle_register(struct ckptfs *fs, void *h, HandleKind kind, const HandleRec *rec)
{
    g_mutex_lock(&fs->open_lock);
    uint32_t slot = slot_pool_take(&fs->open_pool);
    uint64_t fh = 0;
    if (slot) {
        HandleRec *r = &fs->state.handles[slot];
        uint32_t generation = r->generation + 1;
        memcpy((char *)r + sizeof r->state, (const char *)rec + sizeof rec->state,
               sizeof *r - sizeof r->state);
        r->kind = (uint32_t)kind;
        r->generation = generation;
        atomic_store_explicit(&r->state, SLOT_USED, memory_order_release);
        fs->open_live[slot] = h;
        fh = (uint64_t)generation << 32 | slot;
        inflight_note(INFLIGHT_HANDLE, slot);
    }
    g_mutex_unlock(&fs->open_lock);
    return fh;
}

void *handle_lookup(struct ckptfs *fs, uint64_t fh)
{
    uint32_t slot = (uint32_t)fh;
    if (slot >= STATE_HANDLE_SLOTS ||
        __atomic_load_n(&fs->state.handles[slot].generation, __ATOMIC_ACQUIRE) != fh >> 32)
        return NULL; /* a release resent after a takeover, its slot since taken again */
    return fs->open_live[slot];
}

/* What file_of gives for an fh the registry does not have (the kernel
 * never sends one, unless a release was resent after a takeover). */
static const FileHandle file_handle_lost = {.fd = -1, .write_err = -EBADF, .lost_err = -EBADF};

FileHandle *file_of(struct ckptfs *fs, struct fuse_file_info *fi)
{
    FileHandle *h = handle_lookup(fs, fi->fh);
    return h ? h : (FileHandle *)&file_handle_lost;
}

void handle_close(struct ckptfs *fs, uint64_t fh)
{
    uint32_t slot = (uint32_t)fh;
    if (!slot || slot >= STATE_HANDLE_SLOTS)
        return;
    g_mutex_lock(&fs->open_lock);
    void *h = fs->open_live[slot];
    HandleRec *r = &fs->state.handles[slot];
    HandleKind kind = (HandleKind)r->kind;
    /* the handle of this fh, not one that took its slot since (a resent release) */
    bool used = atomic_load(&r->state) == SLOT_USED && r->generation == fh >> 32;
    inflight_unnote(INFLIGHT_HANDLE, slot);
    if (used) {
        atomic_store_explicit(&r->state, SLOT_FREE, memory_order_release);
        fs->open_live[slot] = NULL;
        slot_pool_give(&fs->open_pool, slot);
    }
    g_mutex_unlock(&fs->open_lock);
    if (used && h)
        fs->open_types[kind]->free(fs, h);
}

void handles_give_back(struct ckptfs *fs, uint32_t slot)
{
    if (slot < STATE_HANDLE_SLOTS)
        handle_close(fs, (uint64_t)fs->state.handles[slot].generation << 32 | slot);
}

void handles_close_node(struct ckptfs *fs, uint32_t node_slot)
{
    uint32_t high = atomic_load(&fs->state.hdr->handle_high);
    for (uint32_t i = 1; i < high; i++) {
        HandleRec *r = &fs->state.handles[i];
        if (atomic_load(&r->state) == SLOT_USED && (uint32_t)r->node == node_slot)
            handle_close(fs, (uint64_t)r->generation << 32 | i);
    }
}

void handles_init(struct ckptfs *fs)
{
    g_mutex_init(&fs->open_lock);
    fs->open_types = ckptfs_handle_types;
    fs->open_live = mmap(NULL, (size_t)STATE_HANDLE_SLOTS * sizeof(void *), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fs->open_live == MAP_FAILED)
        g_error("ckptfs: cannot map the handle registry: %s", g_strerror(errno));
    StateHeader *hdr = fs->state.hdr;
    slot_pool_init(&fs->open_pool, &hdr->handle_high, 1, STATE_HANDLE_SLOTS, 0,
                   &fs->state.handles[0].state, sizeof(HandleRec), NULL);
}

void handles_revive(struct ckptfs *fs)
{
    /* the files and directories a previous daemon had open: the kernel will
     * use their fh; each kind opens its own again (after the node table) */
    StateHeader *hdr = fs->state.hdr;
    uint32_t high = atomic_load(&hdr->handle_high), revived = 0;
    for (uint32_t i = 1; i < high; i++) {
        HandleRec *r = &fs->state.handles[i];
        if (atomic_load_explicit(&r->state, memory_order_acquire) != SLOT_USED)
            continue;
        Node *n = r->kind < HANDLE_KINDS ? node_by_ino(fs, r->node) : NULL;
        if (!n) {
            g_debug("ckptfs: handle %u: its node %#llx is gone", i, (unsigned long long)r->node);
            /* a record without its node: nothing the kernel can still use */
            atomic_store(&r->state, SLOT_FREE);
            slot_pool_give(&fs->open_pool, i);
            continue;
        }
        fs->open_live[i] = fs->open_types[r->kind]->revive(fs, n, r);
        revived++;
    }
    if (revived)
        g_message("ckptfs: %u open files and directories taken over", revived);
}

void handles_cleanup(struct ckptfs *fs)
{
    if (!fs->open_live)
        return;
    uint32_t high = atomic_load(&fs->state.hdr->handle_high);
    for (uint32_t i = 1; i < high; i++)
        if (fs->open_live[i])
            handle_close(fs, (uint64_t)fs->state.handles[i].generation << 32 | i);
    munmap(fs->open_live, (size_t)STATE_HANDLE_SLOTS * sizeof(void *));
    fs->open_live = NULL;
    slot_pool_clear(&fs->open_pool);
    g_mutex_clear(&fs->open_lock);
}
