/* The node records a clean unmount leaves for the next mount (keep.h). */
#include "keep.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEEP_MAGIC 0x7065656b7470636bull /* "ckptkeep" */

typedef struct {
    uint64_t magic;
    uint32_t rec_size;
    uint32_t count;
    uint64_t dev, ino;
    uint64_t next_generation;
    char root[4096];  /* the directory's realpath: a file outliving it is removed */
    char layout[128]; /* state_layout(): another build's records are not read */
    char views[256];  /* the views' name the namespaces were taken under */
} KeepHeader;

/* A record and the job it names (its number is the state's own). */
typedef struct {
    uint32_t slot;
    uint32_t pad;
    NodeRec rec;
    char job[STATE_JOB_TEXT]; /* "" for none */
} KeepEntry;

static char *keep_dir(void)
{
    return g_strdup(KEEP_DIR);
}

/* <runtime dir>/ckptfs/<kind>-<sha256 of the directory's identity> */
static char *keep_path(const char *kind, const char *root, dev_t dev, ino_t ino, bool make_dir)
{
    g_autofree char *id = g_strdup_printf("%ju:%ju:%s", (uintmax_t)dev, (uintmax_t)ino, root);
    g_autofree char *sum = g_compute_checksum_for_string(G_CHECKSUM_SHA256, id, -1);
    g_autofree char *dir = keep_dir();
    if (make_dir && g_mkdir_with_parents(dir, 0700) < 0)
        return NULL;
    return g_strdup_printf("%s/%s-%s", dir, kind, sum);
}

/* Whether the directory that a file of this directory names (its realpath,
 * device and inode number) is gone. */
static bool dir_gone(const char *root, uint64_t dev, uint64_t ino)
{
    struct stat st;
    return stat(root, &st) < 0 || (uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino;
}

/* Removes the files of directories that are gone (a temporary directory
 * mounted once, as `ckptctl run` makes): no mount can take them, since a
 * new directory has a new identity. */
static void prune_gone(void)
{
    g_autofree char *dir = keep_dir();
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d)) != NULL) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_str_has_prefix(name, "nodes-")) {
            KeepHeader h;
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            bool whole = read(fd, &h, sizeof h) == (ssize_t)sizeof h;
            close(fd);
            h.root[sizeof h.root - 1] = '\0';
            if (!whole || h.magic != KEEP_MAGIC || dir_gone(h.root, h.dev, h.ino))
                g_unlink(path);
        } else if (g_str_has_prefix(name, "lock-")) {
            g_autofree char *text = NULL;
            uint64_t dev = 0, ino = 0;
            int at = 0;
            if (g_file_get_contents(path, &text, NULL, NULL) &&
                sscanf(text, "%" SCNu64 ":%" SCNu64 ":%n", &dev, &ino, &at) == 2 && at > 0 &&
                dir_gone(text + at, dev, ino))
                g_unlink(path);
        }
    }
}

int keep_lock(const char *root, dev_t dev, ino_t ino, bool wait)
{
    g_autofree char *path = keep_path("lock", root, dev, ino, true);
    int fd = path ? open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size == 0) {
        /* what prune_gone reads: the directory it is of */
        g_autofree char *text = g_strdup_printf("%ju:%ju:%s", (uintmax_t)dev, (uintmax_t)ino, root);
        if (write(fd, text, strlen(text)) < 0)
            g_debug("ckptfs: %s: %s", path, g_strerror(errno));
    }
    /* a daemon whose mount just went is still writing its records: wait
     * (1 s at most) until no daemon of the directory holds the lock */
    for (int i = 0; wait && i < 100 && flock(fd, LOCK_EX | LOCK_NB) < 0; i++)
        g_usleep(10 * 1000);
    if (flock(fd, LOCK_SH) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Generations from the clock, a microsecond each: a mount after this one
 * (with no file to go on from) starts past what this one handed out, since
 * no node is made in less than a microsecond.  The kernel keeps the low
 * 32 bits, which wrap every 71 minutes: an old id can name a new object
 * only where the two mounts' ranges of generations meet modulo 2^32 (and
 * the clock going back would bring them closer). */
static uint64_t clock_generation(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Whether a kept record can be a backing node's: what export.c and
 * retired.c will read of it is within its fields. */
static bool rec_sane(const NodeRec *r)
{
    return r->kind == STATE_REC_BACKING && r->handle_len > 0 &&
           r->handle_len <= STATE_HANDLE_BYTES && r->generation != 0 &&
           (r->text_len == 0 || r->text_len == STATE_TEXT_LOST);
}

/* Oldest first: the order the slot pool takes retired slots in. */
static gint older_first(gconstpointer a, gconstpointer b, gpointer data)
{
    const NodeRec *nodes = data;
    uint64_t x = nodes[*(const uint32_t *)a].generation;
    uint64_t y = nodes[*(const uint32_t *)b].generation;
    return x < y ? -1 : x > y ? 1 : 0;
}

void keep_take(State *s, const char *root, dev_t dev, ino_t ino, const char *views, GArray *slots)
{
    uint64_t gen = clock_generation();
    g_autofree char *path = keep_path("nodes", root, dev, ino, false);
    g_autofree char *data = NULL;
    gsize len = 0;
    if (path && g_file_get_contents(path, &data, &len, NULL)) {
        g_unlink(path); /* one mount takes it */
        KeepHeader *h = (KeepHeader *)(void *)data;
        bool ok = len >= sizeof *h && h->magic == KEEP_MAGIC && h->rec_size == sizeof(NodeRec) &&
                  h->dev == (uint64_t)dev && h->ino == (uint64_t)ino &&
                  len == sizeof *h + (gsize)h->count * sizeof(KeepEntry);
        if (ok) {
            h->layout[sizeof h->layout - 1] = h->views[sizeof h->views - 1] = '\0';
            /* namespaces were taken under the views' name of that mount */
            ok = strcmp(h->layout, state_layout()) == 0 && strcmp(h->views, views) == 0;
        }
        const KeepEntry *e = ok && slots ? (const KeepEntry *)(void *)(data + sizeof *h) : NULL;
        /* each job once in this state's job table */
        g_autoptr(GHashTable) jobs = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
        for (uint32_t i = 0; e && i < h->count; i++) {
            uint32_t slot = e[i].slot;
            if (slot <= 1 || slot >= STATE_NODE_SLOTS || !rec_sane(&e[i].rec) ||
                s->nodes[slot].generation != 0 || !memchr(e[i].job, '\0', sizeof e[i].job))
                continue; /* not a slot, not a backing node's record, or twice */
            uint32_t job = 0;
            if (e[i].job[0]) {
                job = GPOINTER_TO_UINT(g_hash_table_lookup(jobs, e[i].job));
                if (!job && (job = state_job_add(s, e[i].job)) != 0)
                    g_hash_table_insert(jobs, g_strdup(e[i].job), GUINT_TO_POINTER(job));
                if (!job)
                    continue; /* no room for its job: its namespace is lost */
            }
            NodeRec *r = &s->nodes[slot];
            memcpy((char *)r + sizeof r->state, (const char *)&e[i].rec + sizeof r->state,
                   sizeof *r - sizeof r->state);
            r->job = job;
            atomic_store(&r->state, SLOT_FREE);
            g_array_append_val(slots, slot);
        }
        if (ok && h->next_generation > gen)
            gen = h->next_generation;
    }
    if (slots)
        g_array_sort_with_data(slots, older_first, s->nodes);
    atomic_store(&s->hdr->next_generation, gen);
}

/* Newest first: the records a handle most likely still names. */
static gint newer_first(gconstpointer a, gconstpointer b)
{
    const KeepEntry *x = a, *y = b;
    return x->rec.generation < y->rec.generation   ? 1
           : x->rec.generation > y->rec.generation ? -1
                                                   : 0;
}

void keep_save(State *s, const char *root, dev_t dev, ino_t ino, const char *views, int lock)
{
    g_autoptr(GArray) entries = g_array_new(FALSE, FALSE, sizeof(KeepEntry));
    uint32_t high = atomic_load(&s->hdr->node_high);
    g_autofree guint8 *data = state_region_pages(s, s->nodes, (size_t)high * sizeof(NodeRec));
    for (uint32_t slot = 2; slot < high; slot++) {
        const NodeRec *r = &s->nodes[slot];
        if (!state_slot_has_data(data, sizeof *r, slot))
            continue; /* given back: no record */
        /* a backing node with a handle: what LOOKUP of "." can open again */
        if (!rec_sane(r) || r->stale || r->text_len == STATE_TEXT_LOST)
            continue;
        KeepEntry e = {.slot = slot};
        memcpy(&e.rec, r, sizeof *r);
        const char *job = state_job(s, r->job);
        if (job)
            g_strlcpy(e.job, job, sizeof e.job);
        /* what only the kernel's references meant */
        atomic_store(&e.rec.state, SLOT_FREE);
        e.rec.nlookup = 0;
        e.rec.backing_id = 0;
        e.rec.backing_refs = 0;
        e.rec.cached_opens = 0;
        g_array_append_val(entries, e);
    }
    if (entries->len > KEEP_NODES) {
        g_array_sort(entries, newer_first);
        g_array_set_size(entries, KEEP_NODES);
    }
    prune_gone();
    KeepHeader h = {.magic = KEEP_MAGIC,
                    .rec_size = sizeof(NodeRec),
                    .count = entries->len,
                    .dev = (uint64_t)dev,
                    .ino = (uint64_t)ino,
                    .next_generation = atomic_load(&s->hdr->next_generation)};
    g_strlcpy(h.root, root, sizeof h.root);
    g_strlcpy(h.layout, state_layout(), sizeof h.layout);
    g_strlcpy(h.views, views, sizeof h.views);
    g_autofree char *path = keep_path("nodes", root, dev, ino, true);
    g_autoptr(GByteArray) out = g_byte_array_sized_new(sizeof h + entries->len * sizeof(KeepEntry));
    g_byte_array_append(out, (const guint8 *)&h, sizeof h);
    g_byte_array_append(out, (const guint8 *)entries->data, entries->len * sizeof(KeepEntry));
    g_autoptr(GError) err = NULL;
    if (!path || !g_file_set_contents_full(path, (const char *)out->data, out->len,
                                           G_FILE_SET_CONTENTS_CONSISTENT, 0600, &err))
        g_message("ckptfs: file handles will not outlive this unmount: %s",
                  err ? err->message : g_strerror(errno));
    if (lock >= 0)
        close(lock); /* the next mount may take them now */
}
