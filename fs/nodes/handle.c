/* A node's kernel file handle, kept inside the node when short
 * (nodes.h: NodeHandle): a walk of a million objects holds a million. */
#include "nodes-private.h"

#include <string.h>

static uint8_t handle_len(const NodeHandle *h)
{
    return __atomic_load_n(&h->len, __ATOMIC_ACQUIRE);
}

void nhandle_set(NodeHandle *h, int type, const void *bytes, size_t len)
{
    g_assert(len > 0 && len <= MAX_HANDLE_SZ && handle_len(h) == 0);
    h->type = type;
    if (len <= NODE_HANDLE_INLINE)
        memcpy(h->bytes, bytes, len);
    else
        h->heap = g_memdup2(bytes, len);
    __atomic_store_n(&h->len, (uint8_t)len, __ATOMIC_RELEASE);
}

void nhandle_set_fh(NodeHandle *h, const struct file_handle *fh)
{
    nhandle_set(h, fh->handle_type, fh->f_handle, fh->handle_bytes);
}

void nhandle_move(NodeHandle *to, NodeHandle *from)
{
    uint8_t len = handle_len(from);
    if (!len)
        return;
    to->type = from->type;
    if (len <= NODE_HANDLE_INLINE)
        memcpy(to->bytes, from->bytes, len);
    else
        to->heap = from->heap;
    from->len = 0;
    __atomic_store_n(&to->len, len, __ATOMIC_RELEASE);
}

void nhandle_clear(NodeHandle *h)
{
    if (h->len > NODE_HANDLE_INLINE)
        g_free(h->heap);
    h->len = 0;
}

bool nhandle_present(const NodeHandle *h)
{
    return handle_len(h) > 0;
}

const uint8_t *nhandle_bytes(const NodeHandle *h, size_t *len)
{
    *len = handle_len(h);
    return *len > NODE_HANDLE_INLINE ? h->heap : h->bytes;
}

bool nhandle_is(const NodeHandle *h, int type, const void *bytes, size_t len)
{
    size_t have;
    const uint8_t *b = nhandle_bytes(h, &have);
    return have == len && h->type == type && memcmp(b, bytes, len) == 0;
}

bool nhandle_equal(const NodeHandle *a, const NodeHandle *b)
{
    size_t len;
    const uint8_t *bytes = nhandle_bytes(b, &len);
    return nhandle_present(a) == (len > 0) && (len == 0 || nhandle_is(a, b->type, bytes, len));
}

struct file_handle *nhandle_fh(const NodeHandle *h, HandleBuf *buf)
{
    size_t len;
    const uint8_t *b = nhandle_bytes(h, &len);
    if (!len)
        return NULL;
    buf->fh.handle_bytes = (unsigned)len;
    buf->fh.handle_type = h->type;
    memcpy(buf->fh.f_handle, b, len);
    return &buf->fh;
}
