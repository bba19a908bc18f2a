/* One canonical copy of a string for the whole process, so that equal job
 * ids (and the few other names compared by pointer: CkNs.job, the views
 * name) are equal pointers.  What g_intern_string does, in linear memory:
 * GLib's quark table keeps every array it outgrew (lock-free readers), so
 * 100,000 distinct job names cost it 26 MB, this table about 70 bytes a
 * name.  Interned strings live until the process exits.  Thread-safe. */
#pragma once

const char *ck_intern(const char *s);
