#include "json.h"

#include <string.h>

void ck_json_add_string(JsonBuilder *b, const char *v)
{
    if (g_utf8_validate(v, -1, NULL)) {
        json_builder_add_string_value(b, v);
        return;
    }
    g_autofree char *valid = g_utf8_make_valid(v, -1);
    json_builder_add_string_value(b, valid);
}

char *ck_json_text(JsonNode *root, bool pretty)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    if (pretty) {
        json_generator_set_pretty(gen, TRUE);
        json_generator_set_indent(gen, 2);
    }
    json_generator_set_root(gen, root);
    char *s = json_generator_to_data(gen, NULL);
    /* outside strings JSON text holds no control character but the
     * pretty printer's newlines: a raw 0x1f can only be inside a string */
    if (!strchr(s, 0x1f))
        return s;
    GString *o = g_string_sized_new(strlen(s) + 16);
    for (const char *p = s; *p; p++) {
        if (*p == 0x1f)
            g_string_append(o, "\\u001f");
        else
            g_string_append_c(o, *p);
    }
    g_free(s);
    return g_string_free(o, FALSE);
}
