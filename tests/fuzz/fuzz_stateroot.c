/* job_state_root and ck_is_remote_uri on arbitrary (base, job) pairs: input
 * is "base\0job" (no NUL: job "j").  Checks the composition's invariants. */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "stateroot.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* "scheme://" at the start: where the location begins, else NULL */
static const char *location(const char *s)
{
    if (!g_ascii_isalpha(s[0]))
        return NULL;
    size_t i = 1;
    while (s[i] != '\0' && (g_ascii_isalnum(s[i]) || strchr("+-.", s[i]) != NULL))
        i++;
    return s[i] != '\0' && strncmp(s + i, "://", 3) == 0 ? s + i + 3 : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nul = memchr(data, 0, size);
    size_t blen = nul ? (size_t)(nul - (const char *)data) : size;
    g_autofree char *base = g_strndup((const char *)data, blen);
    g_autofree char *job = nul ? g_strndup(nul + 1, size - blen - 1) : g_strdup("j");

    (void)ck_is_remote_uri(base);
    g_autofree char *r = ck_job_state_root(base, job);
    CHECK(r != NULL);
    if (!ck_is_job_id(job, strlen(job)))
        return 0;

    g_autofree char *seg = g_strconcat("_state/", job, NULL);
    if (strcmp(r, base) == 0) {
        /* unchanged only when the URI names no location: an empty one,
         * or a location-less scheme whatever follows */
        const char *loc = location(base);
        CHECK(loc != NULL);
        CHECK(loc[0] == '\0' || loc[0] == '?' || ck_is_locationless_scheme(base));
        return 0;
    }
    CHECK(!ck_is_locationless_scheme(base));
    /* the segment went in once more than before at least (location), and
     * every byte of the base survives in order */
    CHECK(count(r, seg) > count(base, seg));
    const char *q = location(r) ? strchr(location(r), '?') : NULL;
    const char *bq = location(base) ? strchr(location(base), '?') : NULL;
    CHECK((q == NULL) == (bq == NULL));
    size_t loc_end = q ? (size_t)(q - r) : strlen(r);
    CHECK(loc_end >= strlen(seg));
    CHECK(memcmp(r + loc_end - strlen(seg), seg, strlen(seg)) == 0);
    /* the separator before the segment is never doubled inside the
     * location (the "//" of "scheme://" is not the location's) */
    size_t p = loc_end - strlen(seg);
    if (p >= 1)
        CHECK(r[p - 1] == '/');
    size_t loc_off = location(r) ? (size_t)(location(r) - r) : 0;
    if (p >= loc_off + 2)
        CHECK(r[p - 2] != '/');
    /* composing is not idempotent but is stable: same input, same output */
    g_autofree char *r2 = ck_job_state_root(base, job);
    CHECK(strcmp(r, r2) == 0);
    return 0;
}
