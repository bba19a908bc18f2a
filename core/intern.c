#include "intern.h"

#include <glib.h>

/* Process-wide as g_intern_string's own table is: a pointer handed out must
 * stay the canonical one for every caller (core, the daemon, the tools). */
static GMutex intern_lock;
static GHashTable *interned; /* intern_lock: the strings themselves, as keys */

const char *ck_intern(const char *s)
{
    if (!s)
        return NULL;
    g_mutex_lock(&intern_lock);
    if (!interned)
        interned = g_hash_table_new(g_str_hash, g_str_equal);
    const char *got = g_hash_table_lookup(interned, s);
    if (!got) {
        char *copy = g_strdup(s);
        g_hash_table_add(interned, copy);
        got = copy;
    }
    g_mutex_unlock(&intern_lock);
    return got;
}
