/* JSON text as ckptfs and ckptctl write it: strings that are always valid
 * UTF-8, and documents that every JSON parser reads. */
#pragma once
#include <json-glib/json-glib.h>
#include <stdbool.h>

/* v as a JSON string value.  JSON carries text where paths and comm carry
 * bytes: bytes that are not UTF-8 become U+FFFD, rather than making the whole
 * document unreadable. */
void ck_json_add_string(JsonBuilder *b, const char *v);
/* root as JSON text (g_free): one line, or pretty with an indent of 2.
 * Every control character inside a string is escaped: json-glib 1.6
 * writes U+001F as the raw byte, which JSON forbids and parsers refuse.
 * Every JSON document ckptfs and ckptctl write goes through this. */
char *ck_json_text(JsonNode *root, bool pretty);
