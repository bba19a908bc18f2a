/* The open-handle registry: every file and directory handle given to the
 * kernel, so that the ones it never released (a session ended by a signal)
 * are freed at the end.  open_lock is a leaf lock. */
#include "ops.h"
#include "opsint.h"

void handle_register(struct ckptfs *fs, void *h, void (*free_fn)(struct ckptfs *, void *))
{
    g_mutex_lock(&fs->open_lock);
    g_hash_table_insert(fs->open_handles, h, (gpointer)free_fn);
    g_mutex_unlock(&fs->open_lock);
}

void handle_close(struct ckptfs *fs, void *h)
{
    g_mutex_lock(&fs->open_lock);
    gpointer free_fn = g_hash_table_lookup(fs->open_handles, h);
    g_hash_table_remove(fs->open_handles, h);
    g_mutex_unlock(&fs->open_lock);
    if (free_fn)
        ((void (*)(struct ckptfs *, void *))free_fn)(fs, h);
}

void ckptfs_handles_init(struct ckptfs *fs)
{
    g_mutex_init(&fs->open_lock);
    fs->open_handles = g_hash_table_new(g_direct_hash, g_direct_equal);
}

void ckptfs_handles_cleanup(struct ckptfs *fs)
{
    if (!fs->open_handles)
        return;
    GHashTableIter it;
    gpointer h, free_fn;
    g_hash_table_iter_init(&it, fs->open_handles);
    while (g_hash_table_iter_next(&it, &h, &free_fn)) {
        g_hash_table_iter_steal(&it);
        ((void (*)(struct ckptfs *, void *))free_fn)(fs, h);
    }
    g_hash_table_destroy(fs->open_handles);
    fs->open_handles = NULL;
    g_mutex_clear(&fs->open_lock);
}
