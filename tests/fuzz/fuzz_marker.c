/* The COMPLETED parser on arbitrary bytes: never crashes, never reads past
 * the input, and its result is self-consistent.  A well-formed marker,
 * written back from the parsed fields, parses to the same marker. */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "marker.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static char *serialize(const CkMarker *m)
{
    GString *s = g_string_new("# rewritten\n");
    if (m->has_checkpoint)
        g_string_append_printf(s, "checkpoint=%" G_GUINT64_FORMAT "\n", m->checkpoint);
    if (m->has_generation)
        g_string_append_printf(s, "generation=%" G_GUINT64_FORMAT "\n", m->generation);
    for (guint i = 0; i < m->unknown->len; i++) {
        const CkMarkerKv *kv = m->unknown->pdata[i];
        g_string_append_printf(s, "%s=%s\n", kv->key, kv->value);
    }
    if (m->has_participants) {
        g_string_append(s, "participants=");
        for (guint i = 0; i < m->participants->len; i++)
            g_string_append_printf(s, i ? ",%u" : "%u", g_array_index(m->participants, guint32, i));
        g_string_append_c(s, '\n');
    }
    if (m->has_state)
        g_string_append_printf(s, "state=%s", m->state); /* no final LF */
    return g_string_free(s, FALSE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the expected checkpoint comes from the first byte, so checkpoint= lines
     * sometimes match */
    uint64_t expected = size ? data[0] % 4 : 0;
    CkMarker *m = ck_marker_parse((const char *)data, size, expected);
    CHECK(m != NULL);
    size_t lines = 0;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    if (m->cls == CK_MARKER_MALFORMED) {
        CHECK(m->error != NULL);
        CHECK(m->error_line <= lines + 1);
        CHECK(m->error_line > 0 || size > CK_MARKER_MAX_BYTES ||
              g_str_has_prefix(m->error, "not a regular file"));
        ck_marker_free(m);
        return 0;
    }
    CHECK(m->error == NULL && m->error_line == 0);
    CHECK(size <= CK_MARKER_MAX_BYTES);
    CHECK(memchr(data, 0, size) == NULL);
    CHECK(m->cls == (m->has_state          ? CK_MARKER_NAMESPACED
                     : m->has_participants ? CK_MARKER_LEGACY
                                           : CK_MARKER_CUT_SHORT));
    CHECK(m->has_state == (m->state != NULL));
    CHECK(!m->has_checkpoint || m->checkpoint == expected);
    CHECK(m->has_participants || m->participants->len == 0);
    CHECK(strcmp(ck_marker_class_name(m->cls), "malformed") != 0);

    g_autofree char *again = serialize(m);
    CkMarker *m2 = ck_marker_parse(again, strlen(again), expected);
    /* a state ending in '\r' ("state=x\r\r\n") cannot be written back: one
     * '\r' before the line end is always taken as CRLF */
    bool cr_state = m->state != NULL && g_str_has_suffix(m->state, "\r");
    if (strlen(again) <= CK_MARKER_MAX_BYTES && !cr_state) {
        CHECK(m2->cls == m->cls);
        CHECK(m2->has_generation == m->has_generation && m2->generation == m->generation);
        CHECK(m2->has_checkpoint == m->has_checkpoint);
        CHECK(m2->participants->len == m->participants->len);
        CHECK(m->participants->len == 0 || memcmp(m2->participants->data, m->participants->data,
                                                  m->participants->len * sizeof(guint32)) == 0);
        CHECK(g_strcmp0(m2->state, m->state) == 0);
        CHECK(m2->unknown->len == m->unknown->len);
    }
    ck_marker_free(m2);
    ck_marker_free(m);
    return 0;
}
