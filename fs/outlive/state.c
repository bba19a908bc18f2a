#include "state.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collision.h"
#include "metrics.h"

#define STATE_MAGIC   0x746174737470636bull /* "ckptstat" */
#define STATE_VERSION 11
#define STATE_PAGE    STATE_PAGE_SIZE
#define STATE_HEADER  (2 * STATE_PAGE) /* the header's pages, before the journal */

_Static_assert(sizeof(NodeRec) == 112, "NodeRec: a layout change needs STATE_VERSION + 1");
_Static_assert(sizeof(KeyRec) == 64, "KeyRec: a layout change needs STATE_VERSION + 1");
_Static_assert(sizeof(LongKeyRec) == 136, "LongKeyRec: a layout change needs STATE_VERSION + 1");
_Static_assert(sizeof(HandleRec) == 40, "HandleRec: a layout change needs STATE_VERSION + 1");
_Static_assert(sizeof(StateHeader) <= STATE_HEADER, "StateHeader fits its pages");

static size_t inflight_offset(void)
{
    return STATE_HEADER;
}

static size_t handles_offset(void)
{
    return inflight_offset() + (size_t)INFLIGHT_RECORDS * sizeof(InflightRec);
}

static size_t nodes_offset(void)
{
    size_t end = handles_offset() + (size_t)STATE_HANDLE_SLOTS * sizeof(HandleRec);
    return (end + STATE_PAGE - 1) / STATE_PAGE * STATE_PAGE;
}

static size_t page_up(size_t n)
{
    return (n + STATE_PAGE - 1) / STATE_PAGE * STATE_PAGE;
}

static size_t keys_offset(void)
{
    return page_up(nodes_offset() + (size_t)STATE_NODE_SLOTS * sizeof(NodeRec));
}

static size_t long_keys_offset(void)
{
    return page_up(keys_offset() + (size_t)STATE_NODE_SLOTS * sizeof(KeyRec));
}

static size_t jobs_offset(void)
{
    return page_up(long_keys_offset() + (size_t)STATE_NODE_SLOTS * sizeof(LongKeyRec));
}

static size_t metrics_offset(void)
{
    return page_up(jobs_offset() + (size_t)STATE_JOB_SLOTS * STATE_JOB_TEXT);
}

static size_t collisions_offset(void)
{
    return metrics_offset() + page_up(sizeof(FsMetrics));
}

static size_t total_size(void)
{
    return collisions_offset() + ck_collision_store_size(CK_COLLISION_LOG_KEEP);
}

const char *state_layout(void)
{
    /* what must match for one build to take over another's state */
    return G_STRINGIFY(STATE_VERSION) "/" G_STRINGIFY(STATE_NODE_SLOTS) "/" G_STRINGIFY(STATE_HANDLE_SLOTS) "/112/64/136/" G_STRINGIFY(
        STATE_JOB_SLOTS) "/40/1024/" G_STRINGIFY(FS_METRICS_SIZE) "/" G_STRINGIFY(CK_COLLISION_LOG_KEEP);
}

int state_create_fd(void)
{
    int fd = memfd_create("ckptfs-state", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    /* sparse: pages are allocated as slots are first used */
    if (ftruncate(fd, (off_t)total_size()) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

int state_open(State *s, int fd)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    size_t size = total_size();
    bool own = fd < 0;
    if (own && (fd = state_create_fd()) < 0)
        return fd;
    struct stat st;
    int err = fstat(fd, &st) < 0 ? -errno : (size_t)st.st_size != size ? -EPROTO : 0;
    void *base = MAP_FAILED;
    if (!err) {
        base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (base == MAP_FAILED)
            err = -errno;
    }
    if (err) {
        if (own)
            close(fd);
        return err;
    }
    s->fd = fd;
    s->size = size;
    s->hdr = base;
    s->inflight = (InflightRec *)((char *)base + inflight_offset());
    s->handles = (HandleRec *)((char *)base + handles_offset());
    s->nodes = (NodeRec *)((char *)base + nodes_offset());
    s->keys = (KeyRec *)((char *)base + keys_offset());
    s->long_keys = (LongKeyRec *)((char *)base + long_keys_offset());
    s->jobs = (char(*)[STATE_JOB_TEXT])((char *)base + jobs_offset());
    s->metrics = (char *)base + metrics_offset();
    s->collisions = (char *)base + collisions_offset();
    s->collisions_size = ck_collision_store_size(CK_COLLISION_LOG_KEEP);
    if (s->hdr->magic == 0) {
        /* made by state_create_fd, never used */
        s->hdr->version = STATE_VERSION;
        s->hdr->node_rec_size = sizeof(NodeRec);
        s->hdr->handle_rec_size = sizeof(HandleRec);
        atomic_store(&s->hdr->mode_audit, -1);
        atomic_store(&s->hdr->mode_legacy_rw, -1);
        s->hdr->magic = STATE_MAGIC;
        return 0;
    }
    if (s->hdr->magic != STATE_MAGIC || s->hdr->version != STATE_VERSION ||
        s->hdr->node_rec_size != sizeof(NodeRec) || s->hdr->handle_rec_size != sizeof(HandleRec)) {
        munmap(base, size);
        memset(s, 0, sizeof *s);
        s->fd = -1;
        return -EPROTO; /* another build's layout: it cannot take over */
    }
    s->attached = true;
    return 0;
}

uint32_t state_job_add(State *s, const char *job)
{
    uint32_t i = atomic_load(&s->hdr->job_high);
    size_t len = strlen(job);
    if (i >= STATE_JOB_SLOTS || len >= STATE_JOB_TEXT)
        return 0;
    memcpy(s->jobs[i], job, len + 1);
    /* the entry whole before its number is handed out */
    atomic_store_explicit(&s->hdr->job_high, i + 1, memory_order_release);
    return i + 1;
}

const char *state_job(const State *s, uint32_t number)
{
    if (number == 0 || number > atomic_load_explicit(&s->hdr->job_high, memory_order_acquire))
        return NULL;
    const char *text = s->jobs[number - 1];
    /* another daemon's entry: whole, or not used */
    return memchr(text, '\0', STATE_JOB_TEXT) ? text : NULL;
}

void state_close(State *s)
{
    if (s->hdr)
        munmap(s->hdr, s->size);
    if (s->fd >= 0)
        close(s->fd);
    memset(s, 0, sizeof *s);
    s->fd = -1;
}

typedef struct {
    uint32_t slot, seq;
} SlotFree;

static uint32_t slot_state(const SlotPool *p, uint32_t slot)
{
    return atomic_load(
        (const _Atomic uint32_t *)(const void *)(p->states + (size_t)slot * p->stride));
}

void slot_pool_init(SlotPool *p, _Atomic uint32_t *high, uint32_t first, uint32_t cap,
                    uint32_t reserve, const void *states, size_t stride, const guint8 *data)
{
    memset(p, 0, sizeof *p);
    p->free = g_array_new(FALSE, FALSE, sizeof(SlotFree));
    p->high = high;
    p->first = first;
    p->cap = cap;
    p->reserve = reserve;
    p->states = states;
    p->stride = stride;
    if (reserve) {
        p->freed_seq = mmap(NULL, (size_t)cap * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p->freed_seq == MAP_FAILED)
            g_error("ckptfs: cannot map the slot pool: %s", g_strerror(errno));
    }
    uint32_t h = atomic_load(high);
    if (h < first)
        atomic_store(high, first);
    /* the slot taken first is the lowest: the last given without a
     * reserve, the first with one */
    for (uint32_t k = first; k < h; k++) {
        uint32_t i = reserve ? k : h - 1 - (k - first);
        if (!state_slot_has_data(data, stride, i) || slot_state(p, i) != SLOT_USED)
            slot_pool_give(p, i);
    }
}

void slot_pool_clear(SlotPool *p)
{
    if (p->free)
        g_array_free(p->free, TRUE);
    p->free = NULL;
    if (p->freed_seq)
        munmap(p->freed_seq, (size_t)p->cap * sizeof(uint32_t));
    p->freed_seq = NULL;
}

/* The next slot off the free list, 0 when it is empty. */
static uint32_t pop_free(SlotPool *p)
{
    while (p->free->len > p->head) {
        SlotFree e;
        if (p->reserve) {
            e = g_array_index(p->free, SlotFree, p->head++);
            if (p->head >= 4096 && p->head * 2 >= p->free->len) {
                g_array_remove_range(p->free, 0, p->head);
                p->head = 0;
            }
            if (p->freed_seq[e.slot] != e.seq)
                continue; /* taken back, maybe freed again: a newer entry stands for it */
            p->freed_seq[e.slot] = 0;
            p->nfree--;
        } else {
            e = g_array_index(p->free, SlotFree, p->free->len - 1);
            g_array_set_size(p->free, p->free->len - 1);
        }
        if (slot_state(p, e.slot) != SLOT_USED)
            return e.slot;
    }
    return 0;
}

uint32_t slot_pool_take(SlotPool *p)
{
    uint32_t h = atomic_load(p->high);
    bool fresh = p->reserve && p->nfree <= p->reserve && h < p->cap;
    uint32_t s = fresh ? 0 : pop_free(p);
    if (s)
        return s;
    if (h >= p->cap)
        return 0;
    atomic_store(p->high, h + 1);
    return h;
}

void slot_pool_give(SlotPool *p, uint32_t slot)
{
    SlotFree e = {slot, 0};
    if (p->reserve) {
        if (++p->next_seq == 0)
            p->next_seq = 1;
        e.seq = p->next_seq;
        if (p->freed_seq[slot] == 0)
            p->nfree++;
        p->freed_seq[slot] = e.seq;
    }
    g_array_append_val(p->free, e);
}

void slot_pool_claim(SlotPool *p, uint32_t slot)
{
    if (p->reserve && p->freed_seq[slot]) {
        p->freed_seq[slot] = 0;
        p->nfree--;
    }
}

bool slot_pool_forgettable(const SlotPool *p, uint32_t slot)
{
    uint32_t seq = p->reserve ? p->freed_seq[slot] : 0;
    return seq != 0 && p->next_seq - seq >= p->reserve;
}

guint8 *state_region_pages(const State *s, const void *region, size_t bytes)
{
    size_t pages = (bytes + STATE_PAGE - 1) / STATE_PAGE;
    guint8 *data = g_malloc0(MAX(pages, 1));
    off_t start = (const char *)region - (const char *)s->hdr, end = start + (off_t)bytes;
    /* the memfd's data extents: a hole is a page given back (a page swapped
     * out is data) */
    for (off_t at = start; at < end;) {
        off_t d = lseek(s->fd, at, SEEK_DATA);
        if (d < 0 && errno != ENXIO) {
            memset(data, 1, MAX(pages, 1)); /* cannot tell: read everything */
            return data;
        }
        if (d < 0 || d >= end)
            break;
        off_t h = lseek(s->fd, d, SEEK_HOLE);
        if (h < 0 || h > end)
            h = end;
        for (off_t pg = (d - start) / STATE_PAGE; pg * STATE_PAGE + start < h; pg++)
            data[pg] = 1;
        at = h;
    }
    return data;
}

bool state_region_has_data(const State *s, const void *region, size_t off)
{
    off_t at = (const char *)region - (const char *)s->hdr + (off_t)(off / STATE_PAGE * STATE_PAGE);
    off_t d = lseek(s->fd, at, SEEK_DATA);
    return d == at || (d < 0 && errno != ENXIO);
}

/* Whether slot's record can go: forgettable, or never handed out. */
static bool record_can_go(const SlotPool *p, uint32_t slot, uint32_t high)
{
    return slot >= high ? slot >= p->first : slot_pool_forgettable(p, slot);
}

/* Gives back [base + from, base + to), pages whose records can all go:
 * one call for a run of them. */
static size_t give_back(char *base, size_t from, size_t to)
{
    if (to <= from)
        return 0;
    return madvise(base + from, to - from, MADV_REMOVE) == 0 ? (to - from) / STATE_PAGE : 0;
}

size_t state_trim_region(const SlotPool *p, void *region, size_t stride, uint32_t high,
                         const guint8 *data)
{
    char *base = region;
    size_t end = (size_t)high * stride, given = 0;
    /* the kernel gives back whole pages of its own size: elsewhere (16 or
     * 64 KiB pages) a page of records could hold records in use beside the
     * 4 KiB checked, and only erasing is safe */
    bool can_give = sysconf(_SC_PAGESIZE) == STATE_PAGE;
    size_t run = 0; /* the start of the run of pages to give back, while `in_run` */
    bool in_run = false;
    for (size_t off = 0; off < end; off += STATE_PAGE) {
        bool all = can_give && data[off / STATE_PAGE];
        uint32_t lo = (uint32_t)(off / stride), hi = (uint32_t)((off + STATE_PAGE - 1) / stride);
        for (uint32_t i = lo; i <= hi && all; i++)
            all = record_can_go(p, i, high);
        if (all) {
            if (!in_run)
                run = off;
            in_run = true;
            continue;
        }
        if (in_run)
            given += give_back(base, run, off);
        in_run = false;
        if (!data[off / STATE_PAGE])
            continue; /* given back before: reads as zeros */
        /* the records that can go, within this page (one may straddle the
         * next: its other part is erased or given back with that page) */
        for (uint32_t i = lo; i <= hi && i < high; i++) {
            if (!slot_pool_forgettable(p, i))
                continue;
            size_t a = MAX((size_t)i * stride, off);
            size_t b = MIN((size_t)(i + 1) * stride, off + STATE_PAGE);
            memset(base + a, 0, b - a);
        }
    }
    if (in_run)
        given += give_back(base, run, (end + STATE_PAGE - 1) / STATE_PAGE * STATE_PAGE);
    return given;
}
