/* Unsigned integers in decimal without printf, for the names and keys
 * built once per marker or directory entry, where printf's cost shows in
 * a profile. */
#pragma once

#include <glib.h>

/* Digits of the largest guint64; a buffer for one terminated number. */
#define CK_U64_DIGITS 20
typedef char CkU64Text[CK_U64_DIGITS + 1];

/* The decimal digits of v, written backwards ending just before end (not
 * terminated); returns the first. */
static inline char *ck_u64_digits(char *end, guint64 v)
{
    char *p = end;
    do
        *--p = (char)('0' + v % 10);
    while (v /= 10);
    return p;
}

/* v in decimal, terminated, in buf. */
static inline const char *ck_u64_text(CkU64Text buf, guint64 v)
{
    buf[CK_U64_DIGITS] = '\0';
    return ck_u64_digits(buf + CK_U64_DIGITS, v);
}
