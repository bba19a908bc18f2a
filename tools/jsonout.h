/* The one JSON style of every --json of ckptctl and ckpt-bench: json-glib's
 * pretty printer, two spaces of indentation, a final newline; unsigned
 * 64-bit numbers written exactly. */
#pragma once
#include <glib.h>
#include <json-glib/json-glib.h>

/* An unsigned 64-bit number, written exactly (json-glib has only gint64
 * nodes: a value above G_MAXINT64 goes in as a tagged string that
 * json_out_text turns back into the bare number token). */
void json_out_add_u64(JsonBuilder *b, guint64 v);
/* The document, in the one style (g_free). */
char *json_out_text(JsonNode *root);
