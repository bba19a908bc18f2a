#include "marker.h"
#include "classify.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *ck_marker_class_name(CkMarkerClass c)
{
    switch (c) {
    case CK_MARKER_NAMESPACED:
        return "namespaced";
    case CK_MARKER_LEGACY:
        return "legacy";
    case CK_MARKER_CUT_SHORT:
        return "cut-short";
    case CK_MARKER_MALFORMED:
        return "malformed";
    }
    return "malformed";
}

static void kv_free(gpointer p)
{
    CkMarkerKv *kv = p;
    g_free(kv->key);
    g_free(kv->value);
    g_free(kv);
}

GPtrArray *ck_marker_kv_copy(const GPtrArray *kvs)
{
    GPtrArray *out = g_ptr_array_new_full(kvs->len, kv_free);
    for (guint i = 0; i < kvs->len; i++) {
        const CkMarkerKv *kv = kvs->pdata[i];
        CkMarkerKv *k = g_new(CkMarkerKv, 1);
        k->key = g_strdup(kv->key);
        k->value = g_strdup(kv->value);
        g_ptr_array_add(out, k);
    }
    return out;
}

static CkMarker *marker_new(void)
{
    CkMarker *m = g_new0(CkMarker, 1);
    m->participants = g_array_new(FALSE, FALSE, sizeof(guint32));
    m->unknown = g_ptr_array_new_with_free_func(kv_free);
    return m;
}

void ck_marker_free(CkMarker *m)
{
    if (m == NULL)
        return;
    g_array_unref(m->participants);
    g_ptr_array_unref(m->unknown);
    g_free(m->state);
    g_free(m->error);
    g_free(m);
}

G_GNUC_PRINTF(3, 4)
static CkMarker *malformed(CkMarker *m, unsigned line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    g_autofree char *reason = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    m->cls = CK_MARKER_MALFORMED;
    m->error_line = line;
    m->error = line ? g_strdup_printf("line %u: %s", line, reason) : g_steal_pointer(&reason);
    return m;
}

CkMarker *ck_marker_malformed(const char *reason)
{
    return malformed(marker_new(), 0, "%s", reason);
}

const char *ck_marker_file_type(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFLNK:
        return "a symlink, not followed";
    case S_IFDIR:
        return "a directory";
    case S_IFIFO:
        return "a FIFO";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    case S_IFSOCK:
        return "a socket";
    }
    return "not a file";
}

CkMarker *ck_marker_not_regular(mode_t mode)
{
    return malformed(marker_new(), 0, "not a regular file (%s)", ck_marker_file_type(mode));
}

static bool is_key(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
            return false;
    return true;
}

static bool key_is(const char *k, size_t klen, const char *lit)
{
    return klen == strlen(lit) && memcmp(k, lit, klen) == 0;
}

static bool has_u32(const GArray *a, guint32 v)
{
    for (guint i = 0; i < a->len; i++)
        if (g_array_index(a, guint32, i) == v)
            return true;
    return false;
}

/* "0,1,2": every element a canonical u32; "" is the empty list.  A subtask
 * listed twice is kept once, at its first place: a participant is read once. */
static bool parse_participants(const char *v, size_t vlen, GArray *out)
{
    if (vlen == 0)
        return true;
    g_autoptr(GHashTable) seen = NULL; /* past a few elements: linear search gets quadratic */
    const char *p = v, *end = v + vlen;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t l = comma ? (size_t)(comma - p) : (size_t)(end - p);
        guint32 s;
        if (!ck_parse_u32(p, l, &s))
            return false;
        if (!seen && out->len >= 32) {
            seen = g_hash_table_new(g_direct_hash, g_direct_equal);
            for (guint i = 0; i < out->len; i++)
                g_hash_table_add(seen, GUINT_TO_POINTER(g_array_index(out, guint32, i)));
        }
        /* (a NULL key, subtask 0, is a key like any other in a GHashTable) */
        bool dup = seen ? !g_hash_table_add(seen, GUINT_TO_POINTER(s)) : has_u32(out, s);
        if (!dup)
            g_array_append_val(out, s);
        if (!comma)
            return true;
        p = comma + 1; /* a trailing comma leaves an empty element: refused above */
    }
}

CkMarker *ck_marker_parse(const char *buf, size_t len, uint64_t expected_checkpoint)
{
    CkMarker *m = marker_new();
    if (len > CK_MARKER_MAX_BYTES)
        return malformed(m, 0, "file over %u bytes (64 KiB)", (unsigned)CK_MARKER_MAX_BYTES);
    if (buf == NULL) {
        buf = "";
        len = 0;
    }

    const char *p = buf, *end = buf + len;
    unsigned lineno = 0;
    while (p < end) {
        lineno++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line = p;
        size_t llen = nl ? (size_t)(nl - p) : (size_t)(end - p);
        p = nl ? nl + 1 : end;

        if (memchr(line, '\0', llen))
            return malformed(m, lineno, "NUL byte");
        /* Markers edited on other systems get CRLF line ends: one '\r' before
         * the LF is part of the line end, not of the value.  Only before an
         * LF: a last line without LF keeps its '\r'. */
        if (nl && llen > 0 && line[llen - 1] == '\r')
            llen--;
        if (llen == 0 || line[0] == '#')
            continue;

        const char *eq = memchr(line, '=', llen);
        if (eq == NULL)
            return malformed(m, lineno, "no '=' in line");
        const char *key = line, *val = eq + 1;
        size_t klen = (size_t)(eq - line), vlen = llen - klen - 1;
        if (!is_key(key, klen))
            return malformed(m, lineno, "key is not [a-z_]+");

        if (key_is(key, klen, "checkpoint")) {
            if (m->has_checkpoint)
                return malformed(m, lineno, "duplicated key checkpoint");
            m->has_checkpoint = true;
            if (!ck_parse_u64(val, vlen, &m->checkpoint))
                return malformed(m, lineno, "checkpoint is not a canonical number");
            if (m->checkpoint != expected_checkpoint)
                return malformed(m, lineno,
                                 "checkpoint=%" G_GUINT64_FORMAT
                                 " differs from the directory's chk-%" G_GUINT64_FORMAT,
                                 m->checkpoint, expected_checkpoint);
        } else if (key_is(key, klen, "generation")) {
            if (m->has_generation)
                return malformed(m, lineno, "duplicated key generation");
            m->has_generation = true;
            if (!ck_parse_u64(val, vlen, &m->generation))
                return malformed(m, lineno, "generation is not a canonical number");
        } else if (key_is(key, klen, "participants")) {
            if (m->has_participants)
                return malformed(m, lineno, "duplicated key participants");
            m->has_participants = true;
            if (!parse_participants(val, vlen, m->participants))
                return malformed(m, lineno,
                                 "participants is not a list of canonical subtask indices");
        } else if (key_is(key, klen, "state")) {
            if (m->has_state)
                return malformed(m, lineno, "duplicated key state");
            m->has_state = true;
            if (vlen == 0)
                return malformed(m, lineno, "empty state");
            m->state = g_strndup(val, vlen);
            m->state_line = lineno;
        } else {
            CkMarkerKv *kv = g_new(CkMarkerKv, 1);
            kv->key = g_strndup(key, klen);
            kv->value = g_strndup(val, vlen);
            g_ptr_array_add(m->unknown, kv);
        }
    }

    if (m->has_state)
        m->cls = CK_MARKER_NAMESPACED;
    else if (m->has_participants)
        m->cls = CK_MARKER_LEGACY;
    else
        m->cls = CK_MARKER_CUT_SHORT;
    return m;
}

/* Up to cap bytes of fd from its start into buf.  When the first read
 * gives exactly `size` bytes (a size as stat'ed) it stops there, so the read
 * that would return 0 is skipped; reads that come in parts (a FUSE or
 * network backing) go on to the end of the file. */
static int read_from_start(int fd, off_t size, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    while (*len < cap) {
        ssize_t n = pread(fd, buf + *len, cap - *len, (off_t)*len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        bool first = *len == 0;
        *len += (size_t)n;
        if (first && size < (off_t)cap && *len == (size_t)size)
            break;
    }
    return 0;
}

int ck_marker_read_fd(int fd, struct stat *st, uint64_t expected_checkpoint, char *buf,
                      CkMarker **out)
{
    *out = NULL;
    if (!S_ISREG(st->st_mode)) {
        *out = ck_marker_not_regular(st->st_mode);
        return 0;
    }
    const size_t cap = CK_MARKER_MAX_BYTES + 1;
    size_t len;
    int rc = read_from_start(fd, st->st_size, buf, cap, &len);
    int refreshed = 0;
    if (rc < 0 || (off_t)len != MIN(st->st_size, (off_t)cap)) {
        /* not what st described: look at what is open, then read again, so
         * the stamp is never newer than the bytes */
        if (fstat(fd, st) != 0)
            return -errno;
        refreshed = 1;
        if (!S_ISREG(st->st_mode)) {
            *out = ck_marker_not_regular(st->st_mode);
            return refreshed;
        }
        rc = read_from_start(fd, st->st_size, buf, cap, &len);
        if (rc < 0)
            return rc;
    }
    *out = ck_marker_parse(buf, len, expected_checkpoint);
    return refreshed;
}

int ck_marker_load(int dirfd, const char *path, uint64_t expected_checkpoint, CkMarker **out)
{
    *out = NULL;
    /* Look before opening: a COMPLETED that is not a regular file is never
     * followed or opened, so a FIFO or a device is not touched. */
    struct stat st;
    if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return -errno;
    if (!S_ISREG(st.st_mode)) {
        *out = ck_marker_not_regular(st.st_mode);
        return 0;
    }
    /* O_NONBLOCK, O_NOFOLLOW: replaced by a FIFO or a symlink since the look,
     * the open neither hangs nor follows; the read, or the fstat made when
     * the read disagrees with the look, says what it is. */
    int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ELOOP) {
            *out = ck_marker_not_regular(S_IFLNK);
            return 0;
        }
        return -errno;
    }
    g_autofree char *buf = g_malloc(CK_MARKER_MAX_BYTES + 1);
    int rc = ck_marker_read_fd(fd, &st, expected_checkpoint, buf, out);
    close(fd);
    return MIN(rc, 0);
}
