/* job_state_root (SPEC §1, record 013 "The change").
 *
 *   plain path or file:// URI      -> <base>/_state/<job>
 *   URI with a location and ?query -> /_state/<job> into the location, before
 *                                     the '?'; local=<p> gets it appended too
 *   URI naming no location         -> unchanged (memory://, changelog://,
 *                                     disagg-local://, with or without query)
 *   a trailing '/' on the base never doubles the separator. */
#pragma once
#include <stdbool.h>

/* Returns a newly allocated string (g_free). */
char *ck_job_state_root(const char *base, const char *job);

/* True for "scheme://..." where scheme is not "file". */
bool ck_is_remote_uri(const char *s);
