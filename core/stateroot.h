/* job_state_root: a job's own state root under a base (record 013 "The change").
 *
 *   plain path or file:// URI      -> <base>/_state/<job>
 *   URI with a location and ?query -> /_state/<job> into the location, before
 *                                     the '?'; local=<p> gets it appended too
 *   URI naming no location         -> unchanged (memory://, changelog://,
 *                                     disagg-local://, whatever follows the
 *                                     "://", with or without query; and any
 *                                     URI whose location is empty)
 *   a trailing '/' on the base never doubles the separator.
 *
 * Details: a URI is "scheme://..." with an RFC 3986 scheme at the very start;
 * anything else (including "a/b?c") is a plain path and its '?' is literal.
 * The location runs from "://" to the first '?'; the query is split on '&',
 * every parameter kept byte for byte and in order, except each non-empty
 * "local=<dir>" which gets "/_state/<job>" appended (an empty "local=" is
 * kept as is).  All trailing '/' of the location or local dir are dropped
 * before the segment ("/" -> "/_state/<job>"); an empty plain base gives the
 * relative "_state/<job>".  job is not validated here (ck_is_job_id). */
#pragma once
#include <stdbool.h>

/* Returns a newly allocated string (g_free). */
char *ck_job_state_root(const char *base, const char *job);

/* True for the schemes that name no location: memory, changelog and
 * disagg-local (case-insensitive; "changelog+file://" is not one of them). */
bool ck_is_locationless_scheme(const char *s);

/* True for "scheme://..." where scheme is not "file" (case-insensitive);
 * memory:// and friends are remote too: nothing a view can browse. */
bool ck_is_remote_uri(const char *s);
