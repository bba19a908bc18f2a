/* The node table (fs/nodes) on its own, against a real directory:
 * lookups racing forgets on one inode, inode numbers recycled by the
 * backing fs, the bounded descriptor cache, the order slots are taken
 * in, the records an unmount leaves for the next mount, the jobs the
 * records name, the records of forgotten nodes given back, and the index
 * of retired slots when two objects fold to one key. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "intern.h"
#include "nodes/nodes-private.h"
#include "nodes/nodes.h"
#include "outlive/keep.h"

typedef struct {
    NodeTable nodes;
    State state;
    int root_fd, mount_fd;
    char *dir;
} Fixture;

/* A node table over the fixture's directory and state. */
static int table_init(Fixture *f, NodeTable *t)
{
    NodeTableSetup s = {.state = &f->state,
                        .root_fd = f->root_fd,
                        .mount_fd = f->mount_fd,
                        .data_mount_fd = -1,
                        .views_name = ck_intern("_views"),
                        .name = f->dir};
    return node_table_init(t, &s);
}

/* A second table over the same state, as a daemon that attached to the
 * connection would make it: the nodes of the fixture's table revived. */
static void attach(Fixture *f, NodeTable *t)
{
    assert_int_equal(table_init(f, t), 0);
    node_table_revive(t);
}

static int setup(void **state)
{
    Fixture *f = g_new0(Fixture, 1);
    f->dir = g_dir_make_tmp("ckptfs-nodes-XXXXXX", NULL);
    f->root_fd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    f->mount_fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(state_open(&f->state, -1), 0);
    assert_int_equal(table_init(f, &f->nodes), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    node_table_destroy(&f->nodes);
    state_close(&f->state);
    close(f->root_fd);
    close(f->mount_fd);
    const char *rm[] = {"rm", "-rf", f->dir, NULL};
    g_spawn_sync(NULL, (char **)rm, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, NULL, NULL, NULL, NULL);
    g_free(f->dir);
    g_free(f);
    return 0;
}

static Node *lookup(Fixture *f, const char *name, struct stat *st)
{
    Node *root = f->nodes.root;
    Node *n = NULL;
    int err = node_lookup_backing(&f->nodes, root, f->root_fd, name, NULL, st, &n);
    return err ? NULL : n;
}

static void touch(Fixture *f, const char *name)
{
    int fd = openat(f->root_fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    close(fd);
}

/* A forgotten node's address may come back for a new object: its
 * (ino, generation) pair never repeats, and the new node has its own handle. */
static void test_generation_changes_when_recycled(void **state)
{
    Fixture *f = *state;
    GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    int same_inode = 0;
    for (int i = 0; i < 200; i++) {
        touch(f, "x");
        struct stat st;
        Node *n = lookup(f, "x", &st);
        assert_non_null(n);
        char *key = g_strdup_printf("%p/%" G_GUINT64_FORMAT, (void *)n, n->generation);
        assert_false(g_hash_table_contains(seen, key));
        g_hash_table_add(seen, key);
        static ino_t last;
        static uint64_t last_gen;
        if (st.st_ino == last)
            same_inode++;
        last = st.st_ino;
        /* a new node for the recycled number: never the old generation
         * (ASan's quarantine rarely hands back an address, so check this too) */
        assert_true(n->generation > last_gen);
        last_gen = n->generation;
        NodeFd nf;
        assert_int_equal(node_fd(&f->nodes, n, &nf), 0);
        struct stat st2;
        assert_int_equal(fstat(nf.fd, &st2), 0);
        assert_int_equal(st2.st_ino, st.st_ino);
        node_fd_put(&f->nodes, &nf);
        node_forget(&f->nodes, n, 1);
        assert_int_equal(unlinkat(f->root_fd, "x", 0), 0);
    }
    fprintf(stderr, "inode number reused %d times of 200\n", same_inode);
    assert_int_equal(node_table_count(&f->nodes), 0);
    g_hash_table_destroy(seen);
}

/* The old node, still referenced, whose inode number now belongs to another
 * object: the new lookup gets a new node; the old one answers ESTALE. */
static void test_replaced_object_gets_new_node(void **state)
{
    Fixture *f = *state;
    touch(f, "a");
    struct stat st;
    Node *old = lookup(f, "a", &st);
    assert_non_null(old);
    assert_int_equal(unlinkat(f->root_fd, "a", 0), 0);
    touch(f, "a");
    errno = 0;
    int fd = node_open(&f->nodes, old, O_RDONLY);
    if (fd >= 0) {
        /* the cache still held the old inode open: it is the deleted one */
        struct stat ost;
        assert_int_equal(fstat(fd, &ost), 0);
        assert_int_equal(ost.st_nlink, 0);
        close(fd);
        node_mark_stale(&f->nodes, old, -ESTALE);
    } else {
        assert_int_equal(fd, -ESTALE);
    }
    Node *fresh = lookup(f, "a", &st);
    assert_non_null(fresh);
    assert_true(fresh != old);
    assert_true(fresh->generation > old->generation);
    NodeFd nf;
    assert_int_equal(node_fd(&f->nodes, fresh, &nf), 0);
    struct stat st2;
    assert_int_equal(fstat(nf.fd, &st2), 0);
    assert_int_equal(st2.st_nlink, 1);
    node_fd_put(&f->nodes, &nf);
    node_forget(&f->nodes, fresh, 1);
    if (fresh != old)
        node_forget(&f->nodes, old, 1);
    assert_int_equal(node_table_count(&f->nodes), 0);
}

typedef struct {
    Fixture *f;
    int rounds;
    gint *failures;
} Worker;

static gpointer lookup_forget_loop(gpointer data)
{
    Worker *w = data;
    for (int i = 0; i < w->rounds; i++) {
        struct stat st;
        Node *n = NULL;
        int err = node_lookup_backing(&w->f->nodes, w->f->nodes.root, w->f->root_fd, "hot", NULL,
                                      &st, &n);
        if (err == -ENOENT)
            continue; /* between unlink and create */
        if (err) {
            g_atomic_int_inc(w->failures);
            continue;
        }
        node_forget(&w->f->nodes, n, 1);
    }
    return NULL;
}

static gpointer recycle_loop(gpointer data)
{
    Worker *w = data;
    for (int i = 0; i < w->rounds; i++) {
        unlinkat(w->f->root_fd, "hot", 0);
        touch(w->f, "hot");
    }
    return NULL;
}

static void test_lookups_race_forgets(void **state)
{
    Fixture *f = *state;
    touch(f, "hot");
    gint failures = 0;
    Worker w = {f, 3000, &failures};
    GThread *t[5];
    for (int i = 0; i < 4; i++)
        t[i] = g_thread_new("lookup", lookup_forget_loop, &w);
    t[4] = g_thread_new("recycle", recycle_loop, &w);
    for (int i = 0; i < 5; i++)
        g_thread_join(t[i]);
    assert_int_equal(failures, 0);
    /* every reference given back: nothing left, nothing freed twice (ASan) */
    assert_int_equal(node_table_count(&f->nodes), 0);
}

static void test_descriptor_cache_is_bounded(void **state)
{
    Fixture *f = *state;
    GPtrArray *nodes = g_ptr_array_new();
    for (int i = 0; i < 2000; i++) {
        char name[32];
        g_snprintf(name, sizeof name, "f%d", i);
        touch(f, name);
        struct stat st;
        Node *n = lookup(f, name, &st);
        assert_non_null(n);
        NodeFd nf;
        assert_int_equal(node_fd(&f->nodes, n, &nf), 0);
        node_fd_put(&f->nodes, &nf);
        g_ptr_array_add(nodes, n);
    }
    assert_true(f->nodes.fdcache.lru.length <= f->nodes.fdcache.capacity);
    assert_int_equal(node_table_count(&f->nodes), 2000);
    for (guint i = 0; i < nodes->len; i++)
        node_forget(&f->nodes, nodes->pdata[i], 1);
    g_ptr_array_free(nodes, TRUE);
    assert_int_equal(node_table_count(&f->nodes), 0);
}

/* The node slots: a freed slot keeps its record until more than
 * NODE_RETIRED_KEEP others are free, the oldest is taken first, and one
 * taken back by its owner (claimed) and freed again is where its last
 * give put it. */
static void test_slot_pool_keeps_freed_records(void **state)
{
    (void)state;
    enum { CAP = 16, RESERVE = 3 };
    _Atomic uint32_t states[CAP] = {0};
    _Atomic uint32_t high = 0;
    SlotPool p;
    slot_pool_init(&p, &high, 2, CAP, RESERVE, &states[0], sizeof states[0], NULL);
    uint32_t got[6];
    for (int i = 0; i < 6; i++) {
        got[i] = slot_pool_take(&p);
        assert_int_equal(got[i], 2 + i);
        atomic_store(&states[got[i]], SLOT_USED);
    }
    for (int i = 0; i < 5; i++) { /* 2..6 freed, in that order */
        atomic_store(&states[got[i]], SLOT_FREE);
        slot_pool_give(&p, got[i]);
    }
    atomic_store(&states[3], SLOT_USED); /* 3 taken back by its owner */
    slot_pool_claim(&p, 3);
    assert_int_equal(slot_pool_take(&p), 2); /* four free: the oldest */
    atomic_store(&states[2], SLOT_USED);
    assert_int_equal(slot_pool_take(&p), 8); /* three free (4, 5, 6): kept, a fresh one */
    atomic_store(&states[8], SLOT_USED);
    /* 3 freed again: its old place in the line is not its place */
    atomic_store(&states[3], SLOT_FREE);
    slot_pool_give(&p, 3);
    atomic_store(&states[2], SLOT_FREE);
    slot_pool_give(&p, 2);
    assert_int_equal(slot_pool_take(&p), 4);
    assert_int_equal(slot_pool_take(&p), 5);
    assert_int_equal(slot_pool_take(&p), 9); /* 6, 3, 2 kept */
    slot_pool_clear(&p);
    /* a new daemon: the free slots in ascending order, the lowest first */
    slot_pool_init(&p, &high, 2, CAP, 1, &states[0], sizeof states[0], NULL);
    assert_int_equal(slot_pool_take(&p), 2);
    slot_pool_clear(&p);

    /* without a reserve: the slot freed last comes first */
    _Atomic uint32_t states2[CAP] = {0};
    _Atomic uint32_t high2 = 0;
    slot_pool_init(&p, &high2, 1, CAP, 0, &states2[0], sizeof states2[0], NULL);
    assert_int_equal(slot_pool_take(&p), 1);
    assert_int_equal(slot_pool_take(&p), 2);
    slot_pool_give(&p, 1);
    slot_pool_give(&p, 2);
    assert_int_equal(slot_pool_take(&p), 2);
    slot_pool_clear(&p);
}

/* What a clean unmount keeps (outlive/keep.h): the records of backing
 * nodes with their slots and generations, taken by the next mount of the
 * same directory with the same views' name, once (the file goes with it),
 * its generations going on past the old ones; a directory
 * with another identity takes nothing, nor does one whose views are named
 * otherwise (the namespaces were taken under the old name). */
static void test_records_outlive_the_mount(void **state)
{
    Fixture *f = *state;
    struct stat st, root;
    touch(f, "a");
    Node *a = lookup(f, "a", &st);
    assert_non_null(a);
    fuse_ino_t id = node_ino(&f->nodes, a);
    node_forget(&f->nodes, a, 1);
    assert_int_equal(fstat(f->root_fd, &root), 0);
    uint64_t gen = atomic_load(&f->state.hdr->next_generation);
    g_autoptr(GArray) slots = g_array_new(FALSE, FALSE, sizeof(uint32_t));

    keep_save(&f->state, f->dir, root.st_dev, root.st_ino, "_views", -1);
    State other;
    assert_int_equal(state_open(&other, -1), 0);
    keep_take(&other, f->dir, root.st_dev, root.st_ino + 1, "_views", slots);
    assert_int_equal(slots->len, 0);
    keep_take(&other, f->dir, root.st_dev, root.st_ino, ".views", slots);
    assert_int_equal(slots->len, 0);
    state_close(&other);

    keep_save(&f->state, f->dir, root.st_dev, root.st_ino, "_views", -1);
    State next;
    assert_int_equal(state_open(&next, -1), 0);
    keep_take(&next, f->dir, root.st_dev, root.st_ino, "_views", slots);
    assert_true(slots->len >= 1);
    const NodeRec *r = &next.nodes[(uint32_t)id];
    assert_int_equal(atomic_load(&r->state), SLOT_FREE);
    assert_int_equal((uint32_t)r->generation, (uint32_t)(id >> 32));
    assert_true(r->handle_len > 0);
    assert_int_equal(r->nlookup, 0);
    assert_true(atomic_load(&next.hdr->next_generation) >= gen);
    state_close(&next);

    /* taken once: a second mount starts from the clock, past every old id */
    g_array_set_size(slots, 0);
    State again;
    assert_int_equal(state_open(&again, -1), 0);
    keep_take(&again, f->dir, root.st_dev, root.st_ino, "_views", slots);
    assert_int_equal(slots->len, 0);
    assert_true(atomic_load(&again.hdr->next_generation) > gen);
    state_close(&again);
}

/* Each job a record's namespace names is written once in the state's job
 * table; a daemon that attaches finds every node's namespace again from
 * it, and names no job twice; the records an unmount leaves carry their
 * job into the next mount's table. */
static void test_records_name_each_job_once(void **state)
{
    Fixture *f = *state;
    struct stat st;
    const CkNs j1 = {.kind = CK_NS_JOB, .job = ck_intern("job-1")};
    const CkNs j2 = {.kind = CK_NS_JOB, .job = ck_intern("job-2")};
    const char *names[] = {"a", "b", "c"};
    const CkNs *ns[] = {&j1, &j1, &j2};
    Node *n[3];
    for (int i = 0; i < 3; i++) {
        touch(f, names[i]);
        assert_int_equal(
            node_lookup_backing(&f->nodes, f->nodes.root, f->root_fd, names[i], ns[i], &st, &n[i]),
            0);
    }
    const NodeRec *r[3];
    for (int i = 0; i < 3; i++)
        r[i] = &f->state.nodes[n[i]->slot];
    assert_int_equal(r[0]->job, r[1]->job);
    assert_int_not_equal(r[0]->job, r[2]->job);
    assert_string_equal(state_job(&f->state, r[0]->job), "job-1");
    assert_string_equal(state_job(&f->state, r[2]->job), "job-2");
    assert_null(state_job(&f->state, 0));
    assert_null(state_job(&f->state, 3));
    assert_int_equal(atomic_load(&f->state.hdr->job_high), 2);

    NodeTable other;
    attach(f, &other);
    for (int i = 0; i < 3; i++) {
        Node *back = node_of_slot(&other, n[i]->slot);
        assert_non_null(back);
        assert_false(back->stale);
        assert_int_equal(back->ns.kind, CK_NS_JOB);
        assert_ptr_equal(back->ns.job, ns[i]->job);
    }
    Node *again;
    assert_int_equal(node_lookup_backing(&other, other.root, f->root_fd, "a", &j1, &st, &again), 0);
    assert_int_equal(f->state.nodes[again->slot].job, r[0]->job);
    assert_int_equal(atomic_load(&f->state.hdr->job_high), 2);
    node_table_destroy(&other);

    uint32_t slot[3];
    for (int i = 0; i < 3; i++) {
        slot[i] = n[i]->slot;
        node_forget(&f->nodes, n[i], 1);
    }
    assert_int_equal(fstat(f->root_fd, &st), 0);
    keep_save(&f->state, f->dir, st.st_dev, st.st_ino, "_views", -1);
    State next;
    assert_int_equal(state_open(&next, -1), 0);
    g_autoptr(GArray) slots = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    keep_take(&next, f->dir, st.st_dev, st.st_ino, "_views", slots);
    for (int i = 0; i < 3; i++)
        assert_string_equal(state_job(&next, next.nodes[slot[i]].job), ns[i]->job);
    assert_int_equal(atomic_load(&next.hdr->job_high), 2);
    state_close(&next);
}

/* Once the kernel let go of most of what it held, the records of slots
 * freed before the newest NODE_RETIRED_KEEP go, and the pages of the state
 * memfd that held only those go back to the system: a file handle naming
 * one of them is stale, one naming a node forgotten since is still good,
 * and the slots serve new nodes (and a daemon that attaches) as before. */
static void test_forgotten_records_given_back(void **state)
{
    Fixture *f = *state;
    enum { N = 40000 };
    struct stat st;
    g_autofree fuse_ino_t *ids = g_new(fuse_ino_t, N);
    Node **n = g_new(Node *, N);
    for (int i = 0; i < N; i++) {
        char name[32];
        g_snprintf(name, sizeof name, "f%05d", i);
        touch(f, name);
        n[i] = lookup(f, name, &st);
        assert_non_null(n[i]);
        ids[i] = node_ino(&f->nodes, n[i]);
    }
    uint32_t high = atomic_load(&f->state.hdr->node_high);
    size_t pages = ((size_t)high * sizeof(NodeRec) + STATE_PAGE_SIZE - 1) / STATE_PAGE_SIZE;
    for (int i = 0; i < N; i++)
        node_forget(&f->nodes, n[i], 1);
    g_free(n);

    g_autofree guint8 *data =
        state_region_pages(&f->state, f->state.nodes, (size_t)high * sizeof(NodeRec));
    size_t held = 0;
    for (size_t p = 0; p < pages; p++)
        held += data[p];
    /* the newest NODE_RETIRED_KEEP records, and those forgotten after the
     * last trim, stay: about 20,000 of 40,000 */
    assert_true(held < pages * 3 / 5);
    Node *back;
    assert_int_equal(node_lookup_id(&f->nodes, ids[0], &st, &back), -ESTALE);
    assert_int_equal(node_lookup_id(&f->nodes, ids[N - 1], &st, &back), 0);
    assert_int_equal(node_ino(&f->nodes, back), ids[N - 1]);
    node_forget(&f->nodes, back, 1);

    /* the slots serve again: every name looks up, each its own node */
    GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (int i = 0; i < N; i += 7) {
        char name[32];
        g_snprintf(name, sizeof name, "f%05d", i);
        Node *again = lookup(f, name, &st);
        assert_non_null(again);
        assert_false(g_hash_table_contains(seen, again));
        g_hash_table_add(seen, again);
    }
    /* a daemon that attaches finds those nodes, and no other */
    NodeTable other;
    attach(f, &other);
    assert_int_equal(node_table_count(&other), g_hash_table_size(seen));
    node_table_destroy(&other);
    g_hash_table_destroy(seen);
}

/* A retired record at slot, of (dev, ino) with an 8-byte handle h. */
static void retire_fake(Fixture *f, uint32_t slot, dev_t dev, ino_t ino, unsigned char h)
{
    NodeRec *r = &f->state.nodes[slot];
    memset(r, 0, sizeof *r);
    r->kind = STATE_REC_BACKING;
    r->type = S_IFREG;
    r->dev = dev;
    r->ino = ino;
    r->handle_type = 1;
    r->handle_len = 8;
    memset(r->handle, h, 8);
    atomic_store(&r->state, SLOT_FREE);
}

static NodeHandle fake_handle(unsigned char h)
{
    NodeHandle nh = {.len = 8, .type = 1};
    memset(nh.bytes, h, 8);
    return nh;
}

/* Two objects on two devices whose (dev, ino) fold to one key of the
 * retired index: a lookup of the one not indexed loses nothing of the
 * other's hint; an entry whose slot was taken again goes. */
static void test_retired_shared_key_keeps_the_hint(void **state)
{
    Fixture *f = *state;
    NodeTable *t = &f->nodes;
    const uint32_t slot = 1000;
    dev_t da = 1, dc = 2;
    ino_t ia = 4242;
    /* the fold is an xor with a per-device constant: the inode of dc that
     * folds onto (da, ia) */
    ino_t ic =
        (ino_t)((uint64_t)(uintptr_t)retired_key(da, ia) ^ (uint64_t)(uintptr_t)retired_key(dc, 0));
    assert_ptr_equal(retired_key(dc, ic), retired_key(da, ia));

    Node a = {.type = S_IFREG, .key = {da, ia}, .handle = fake_handle(0xaa), .pinned_fd = -1};
    Node c = {.type = S_IFREG, .key = {dc, ic}, .handle = fake_handle(0xcc), .pinned_fd = -1};
    g_mutex_lock(&t->lock);
    guint before = g_hash_table_size(t->retired);
    retire_fake(f, slot, da, ia, 0xaa);
    retired_note_locked(t, slot);
    assert_int_equal(g_hash_table_size(t->retired), before + 1);
    assert_int_equal(retired_slot_locked(t, &c), 0);
    assert_int_equal(retired_slot_locked(t, &a), slot);
    /* the slot taken again: the hint is no one's and goes */
    atomic_store(&f->state.nodes[slot].state, SLOT_USED);
    assert_int_equal(retired_slot_locked(t, &a), 0);
    assert_int_equal(g_hash_table_size(t->retired), before);
    atomic_store(&f->state.nodes[slot].state, SLOT_FREE);
    g_mutex_unlock(&t->lock);
}

/* A views key kept with its job by number comes back whole; a number
 * that names no job, or no number at all, gives none. */
static void test_vkey_by_job_number(void **state)
{
    (void)state;
    State s;
    assert_int_equal(state_open(&s, -1), 0);
    /* numbers are hex: the job's is past 9 and written with a letter */
    for (int i = 0; i < 11; i++) {
        g_autofree char *other = g_strdup_printf("filler-%d", i);
        assert_true(state_job_add(&s, other) > 0);
    }
    g_autofree char *id = g_strnfill(128, 'j');
    uint32_t n = state_job_add(&s, id);
    assert_int_equal(n, 0xc);
    g_autofree char *sixteenth = vkey_from_rec(&s, "\00110/x"); /* 0x10: the 16th, never written */
    assert_null(sixteenth);
    g_autofree char *first = vkey_from_rec(&s, "\001a/x");
    assert_string_equal(first, "filler-9/x");
    g_autofree char *k1 = g_strdup_printf("\001%x/checkpoints/3/0", n);
    g_autofree char *w1 = g_strdup_printf("%s/checkpoints/3/0", id);
    g_autofree char *g1 = vkey_from_rec(&s, k1);
    assert_string_equal(g1, w1);
    g_autofree char *k2 = g_strdup_printf("#12:34#\001%x/state/v1/0/f", n);
    g_autofree char *w2 = g_strdup_printf("#12:34#%s/state/v1/0/f", id);
    g_autofree char *g2 = vkey_from_rec(&s, k2);
    assert_string_equal(g2, w2);
    g_autofree char *k3 = g_strdup_printf("\001%x", n);
    g_autofree char *g3 = vkey_from_rec(&s, k3);
    assert_string_equal(g3, id);
    g_autofree char *plain = vkey_from_rec(&s, "job/state");
    assert_string_equal(plain, "job/state");
    const char *bad[] = {"\001", "\0010/x", "\0019999999/x", "\0011y", "#1:2#\001/x", NULL};
    for (int i = 0; bad[i]; i++) {
        g_autofree char *got = vkey_from_rec(&s, bad[i]);
        if (got)
            fail_msg("key %d expanded to \"%s\"", i, got);
    }
    state_close(&s);
}

/* Writes a views node's record into slot of s, as a daemon would. */
static void put_view_rec(State *s, uint32_t slot, uint64_t gen, const char *text)
{
    NodeRec *r = &s->nodes[slot];
    r->kind = NODE_VIRTUAL;
    r->generation = gen;
    size_t room;
    r->text_len = (uint16_t)strlen(text);
    char *to = (char *)state_key_text(s, slot, r->text_len, &room);
    g_strlcpy(to, text, room);
    atomic_store(&r->state, SLOT_USED);
    if (atomic_load(&s->hdr->node_high) <= slot)
        atomic_store(&s->hdr->node_high, slot + 1);
}

static void test_vkey_by_parent(void **state)
{
    (void)state;
    State s;
    assert_int_equal(state_open(&s, -1), 0);
    put_view_rec(&s, 5, 0x77, "job/checkpoints/3/0/d1");
    put_view_rec(&s, 6, 0x88, "\0025:77/d2"); /* itself named through its parent */
    g_autofree char *g1 = vkey_from_rec(&s, "#1:2#\0026:88/leaf");
    assert_string_equal(g1, "#1:2#job/checkpoints/3/0/d1/d2/leaf");
    g_autofree char *g2 = vkey_from_rec(&s, "\0025:77/d2");
    assert_string_equal(g2, "job/checkpoints/3/0/d1/d2");
    /* a key too long for its KeyRec is in its LongKeyRec, and read there */
    g_autofree char *jid = g_strnfill(64, 'j');
    g_autofree char *long_dir = g_strdup_printf("%s/checkpoints/12/0", jid);
    assert_true(strlen(long_dir) >= STATE_KEY_TEXT);
    put_view_rec(&s, 0x1a, 0xfedcba9876, long_dir);
    g_autofree char *g3 = vkey_from_rec(&s, "\0021a:fedcba9876/leaf");
    g_autofree char *w3 = g_strconcat(long_dir, "/leaf", NULL);
    assert_string_equal(g3, w3);
    put_view_rec(&s, 7, 9, "\0027:9/x"); /* its own parent: never ends */
    put_view_rec(&s, 8, 0x10, "job/state");
    s.nodes[8].kind = NODE_BACKING;
    const char *bad[] = {"\0025:78/x", /* another generation */
                         "\0029:0/x",  /* a free slot */
                         "\0027:9/y",  "\0028:10/x", "\0021:1/x",  "\0025/x", "\0025:77",
                         "\0025:77x",  "\002",       "\00299:1/x", /* past the slots ever taken */
                         NULL};
    for (int i = 0; bad[i]; i++) {
        g_autofree char *got = vkey_from_rec(&s, bad[i]);
        if (got)
            fail_msg("key %d expanded to \"%s\"", i, got);
    }
    state_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_generation_changes_when_recycled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replaced_object_gets_new_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookups_race_forgets, setup, teardown),
        cmocka_unit_test_setup_teardown(test_descriptor_cache_is_bounded, setup, teardown),
        cmocka_unit_test(test_slot_pool_keeps_freed_records),
        cmocka_unit_test(test_vkey_by_job_number),
        cmocka_unit_test(test_vkey_by_parent),
        cmocka_unit_test_setup_teardown(test_records_outlive_the_mount, setup, teardown),
        cmocka_unit_test_setup_teardown(test_records_name_each_job_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forgotten_records_given_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retired_shared_key_keeps_the_hint, setup, teardown),
    };
    return cmocka_run_group_tests_name("unit/nodes", tests, NULL, NULL);
}
