#include "stateroot.h"

#include <glib.h>
#include <string.h>

/* Length of "scheme" when s starts with "scheme://" (RFC 3986 scheme
 * characters), else 0. */
static size_t scheme_len(const char *s)
{
    if (!g_ascii_isalpha(s[0]))
        return 0;
    size_t i = 1;
    while (g_ascii_isalnum(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')
        i++;
    return strncmp(s + i, "://", 3) == 0 ? i : 0;
}

/* Appends p[0..len) + "/_state/<job>", dropping p's trailing '/'s so the
 * separator is never doubled ("/" itself becomes "/_state/<job>"). */
static void append_segment(GString *out, const char *p, size_t len, const char *job)
{
    if (len == 0) { /* an empty base names the current directory */
        g_string_append(out, "_state/");
        g_string_append(out, job);
        return;
    }
    while (len > 0 && p[len - 1] == '/')
        len--;
    g_string_append_len(out, p, (gssize)len);
    g_string_append(out, "/_state/");
    g_string_append(out, job);
}

char *ck_job_state_root(const char *base, const char *job)
{
    size_t sl = scheme_len(base);
    if (sl == 0) {
        GString *out = g_string_new(NULL);
        append_segment(out, base, strlen(base), job);
        return g_string_free(out, FALSE);
    }

    const char *loc = base + sl + 3;
    const char *q = strchr(loc, '?');
    size_t loc_len = q ? (size_t)(q - loc) : strlen(loc);
    /* memory://, changelog://, disagg-local:// keep nothing another job could
     * share: no location, nothing to namespace, whatever follows "://"; nor
     * does any URI whose location is empty. */
    if (loc_len == 0 || ck_is_locationless_scheme(base))
        return g_strdup(base);

    GString *out = g_string_new_len(base, (gssize)(loc - base));
    append_segment(out, loc, loc_len, job);
    if (q == NULL)
        return g_string_free(out, FALSE);

    /* The query: every parameter kept in order, byte for byte, except that a
     * non-empty local=<dir> gets the same segment. */
    g_string_append_c(out, '?');
    const char *p = q + 1;
    for (;;) {
        const char *amp = strchr(p, '&');
        size_t plen = amp ? (size_t)(amp - p) : strlen(p);
        if (plen > 6 && strncmp(p, "local=", 6) == 0) {
            g_string_append(out, "local=");
            append_segment(out, p + 6, plen - 6, job);
        } else {
            g_string_append_len(out, p, (gssize)plen);
        }
        if (amp == NULL)
            break;
        g_string_append_c(out, '&');
        p = amp + 1;
    }
    return g_string_free(out, FALSE);
}

bool ck_is_locationless_scheme(const char *s)
{
    static const char *const schemes[] = {"memory", "changelog", "disagg-local"};
    size_t sl = s ? scheme_len(s) : 0;
    for (size_t i = 0; sl && i < G_N_ELEMENTS(schemes); i++)
        if (sl == strlen(schemes[i]) && g_ascii_strncasecmp(s, schemes[i], sl) == 0)
            return true;
    return false;
}

bool ck_is_remote_uri(const char *s)
{
    size_t sl = s ? scheme_len(s) : 0;
    return sl > 0 && !(sl == 4 && g_ascii_strncasecmp(s, "file", 4) == 0);
}
