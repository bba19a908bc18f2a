#include "held.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#define ENV_HELD_RESUME "CKPTFS_SUPERVISOR_HELD" /* slot:gen:fd,... */

struct HeldSet {
    GHashTable *by_slot; /* node slot -> Held */
    guint max;
    /* the last close of a file without a name frees its blocks (seconds,
     * for a large fragmented file on ext4): done on a thread of its own,
     * so that the supervisor's loop, which replaces a dying daemon, never
     * waits for it.  Made at the first close, after the supervisor's forks
     * (a pool made before a fork may wait on a thread the child lacks) */
    GThreadPool *closer;
};

typedef struct {
    guint64 gen;
    int fd;
    bool offered; /* to a daemon that has not served yet */
    HeldSet *set;
} Held;

static void close_one(gpointer fd_plus_one, gpointer unused)
{
    (void)unused;
    close(GPOINTER_TO_INT(fd_plus_one) - 1);
}

static void held_free(gpointer p)
{
    Held *h = p;
    HeldSet *set = h->set;
    if (!set->closer)
        set->closer = g_thread_pool_new(close_one, NULL, 1, FALSE, NULL);
    if (!set->closer || !g_thread_pool_push(set->closer, GINT_TO_POINTER(h->fd + 1), NULL))
        close(h->fd);
    g_free(h);
}

/* Waits for the closes under way. */
static void closes_done(HeldSet *h)
{
    if (h->closer)
        g_thread_pool_free(h->closer, FALSE, TRUE);
    h->closer = NULL;
}

HeldSet *held_set_new(void)
{
    HeldSet *h = g_new0(HeldSet, 1);
    h->by_slot = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, held_free);
    struct rlimit rl;
    h->max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur / 2 < HELD_MAX
                 ? (guint)(rl.rlim_cur / 2)
                 : HELD_MAX;
    return h;
}

void held_set_free(HeldSet *h)
{
    g_hash_table_destroy(h->by_slot);
    closes_done(h);
    g_free(h);
}

/* "SLOT<sep>GEN", the rest of the text in *rest when rest is not NULL
 * (else nothing may follow). */
static bool parse_pair(const char *text, char sep, guint32 *slot, guint64 *gen, const char **rest)
{
    char *end = NULL;
    guint64 sl = g_ascii_strtoull(text, &end, 10);
    if (end == text || *end != sep || sl == 0 || sl > G_MAXUINT32)
        return false;
    const char *g = end + 1;
    *gen = g_ascii_strtoull(g, &end, 10);
    if (end == g || (!rest && *end != '\0'))
        return false;
    if (rest)
        *rest = end;
    *slot = (guint32)sl;
    return true;
}

bool held_parse(const char *text, guint32 *slot, guint64 *gen)
{
    return parse_pair(text, ' ', slot, gen, NULL);
}

void held_word(char *out, size_t len, const char *word, guint32 slot, guint64 gen)
{
    g_snprintf(out, len, "%s %u %" G_GUINT64_FORMAT, word, slot, gen);
}

static void add(HeldSet *h, guint32 slot, guint64 gen, int fd)
{
    gpointer key = GUINT_TO_POINTER(slot);
    if (g_hash_table_size(h->by_slot) >= h->max && !g_hash_table_contains(h->by_slot, key)) {
        close(fd);
        return;
    }
    Held *e = g_new0(Held, 1);
    e->gen = gen;
    e->fd = fd;
    e->set = h;
    g_hash_table_replace(h->by_slot, key, e);
}

bool held_set_message(HeldSet *h, const char *msg, int *fd)
{
    bool hold = g_str_has_prefix(msg, "hold ") && *fd >= 0;
    if (!hold && !g_str_has_prefix(msg, "let-go "))
        return false;
    guint32 slot;
    guint64 gen;
    if (!held_parse(msg + (hold ? 5 : 7), &slot, &gen))
        return true; /* one of ours, garbled: its descriptor is closed by the caller */
    if (hold) {
        add(h, slot, gen, *fd);
        *fd = -1;
    } else {
        Held *e = g_hash_table_lookup(h->by_slot, GUINT_TO_POINTER(slot));
        if (e && e->gen == gen)
            g_hash_table_remove(h->by_slot, GUINT_TO_POINTER(slot));
    }
    return true;
}

void held_set_offer(HeldSet *h, bool (*offer)(const char *msg, int fd, void *ctx), void *ctx)
{
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, h->by_slot);
    while (g_hash_table_iter_next(&it, &key, &val)) {
        Held *e = val;
        char m[64];
        held_word(m, sizeof m, "held", GPOINTER_TO_UINT(key), e->gen);
        if (!offer(m, e->fd, ctx))
            break;
        e->offered = true;
    }
}

static gboolean offered(gpointer key, gpointer val, gpointer data)
{
    (void)key;
    (void)data;
    return ((Held *)val)->offered;
}

void held_set_settle(HeldSet *h)
{
    g_hash_table_foreach_remove(h->by_slot, offered, NULL);
}

void held_set_inherit(HeldSet *h, bool inherit)
{
    /* the exec would close the queued ones itself, in its own time */
    closes_done(h);
    GString *env = g_string_new(NULL);
    GHashTableIter it;
    gpointer key, val;
    g_hash_table_iter_init(&it, h->by_slot);
    while (g_hash_table_iter_next(&it, &key, &val)) {
        Held *e = val;
        fcntl(e->fd, F_SETFD, inherit ? 0 : FD_CLOEXEC);
        g_string_append_printf(env, "%s%u:%" G_GUINT64_FORMAT ":%d", env->len ? "," : "",
                               GPOINTER_TO_UINT(key), e->gen, e->fd);
    }
    if (inherit)
        setenv(ENV_HELD_RESUME, env->str, 1);
    else
        unsetenv(ENV_HELD_RESUME);
    g_string_free(env, TRUE);
}

void held_set_resume(HeldSet *h)
{
    const char *env = g_getenv(ENV_HELD_RESUME);
    g_auto(GStrv) parts = g_strsplit(env ? env : "", ",", -1);
    for (char **p = parts; *p; p++) {
        guint32 slot;
        guint64 gen;
        const char *rest;
        char *end = NULL;
        if (!parse_pair(*p, ':', &slot, &gen, &rest) || *rest != ':')
            continue;
        long fd = strtol(rest + 1, &end, 10);
        if (end == rest + 1 || *end || fd < 0 || fd > INT_MAX ||
            fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
            continue;
        add(h, slot, gen, (int)fd);
    }
    g_unsetenv(ENV_HELD_RESUME);
}
