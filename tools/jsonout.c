/* The one JSON style of the tools (jsonout.h). */
#include "jsonout.h"

#include <string.h>

#include "json.h"

/* The tag of a number above G_MAXINT64 in the node tree: a string no
 * document can hold by chance (128 random bits, per process), so only the
 * numbers json_out_add_u64 wrote are turned back into number tokens. */
static const char *u64_tag(void)
{
    static char tag[64];
    if (!tag[0])
        g_snprintf(tag, sizeof tag, "ckptctl-u64-%08x%08x%08x%08x:", g_random_int(), g_random_int(),
                   g_random_int(), g_random_int());
    return tag;
}

void json_out_add_u64(JsonBuilder *b, guint64 v)
{
    if (v <= (guint64)G_MAXINT64) {
        json_builder_add_int_value(b, (gint64)v);
        return;
    }
    g_autofree char *s = g_strdup_printf("%s%" G_GUINT64_FORMAT, u64_tag(), v);
    json_builder_add_string_value(b, s);
}

char *json_out_text(JsonNode *root)
{
    g_autofree char *s = ck_json_text(root, true);
    /* "<tag><digits>" -> <digits>: a valid JSON number that jq and Python
     * read back exactly (both keep integers beyond 2^63) */
    g_autofree char *quoted = g_strconcat("\"", u64_tag(), NULL);
    GString *out = g_string_new(NULL);
    const char *p = s, *hit;
    while ((hit = strstr(p, quoted)) != NULL) {
        const char *d = hit + strlen(quoted), *e = d;
        while (g_ascii_isdigit(*e))
            e++;
        g_string_append_len(out, p, hit - p);
        if (*e == '"') {
            g_string_append_len(out, d, e - d);
            p = e + 1;
        } else { /* not ours after all: keep it */
            g_string_append_len(out, hit, d - hit);
            p = d;
        }
    }
    g_string_append(out, p);
    g_string_append_c(out, '\n');
    return g_string_free(out, FALSE);
}
