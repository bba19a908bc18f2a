/* Path classification, canonical numbers and the policy's lexical symlink
 * resolver on arbitrary bytes, each checked against a slow, obviously
 * correct reference.
 *
 * Input: byte 0 picks a directory the symlink is created in, byte 1 the
 * caller; the rest, up to the first NUL, is both a path to classify and
 * the symlink target. */
#include <glib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "intern.h"
#include "policy.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c))                                                                                  \
            abort();                                                                               \
    } while (0)

/* Canonical decimal, the slow way: digits only, no leading zero, compared
 * against the decimal text of UINT64_MAX. */
static bool ref_u64(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!g_ascii_isdigit(s[i]))
            return false;
    if (len == 20 && memcmp(s, "18446744073709551615", 20) > 0)
        return false;
    g_autofree char *z = g_strndup(s, len);
    *out = g_ascii_strtoull(z, NULL, 10);
    return true;
}

static void check_numbers(const char *s, size_t len)
{
    uint64_t a = 0, b = 0;
    bool ok = ck_parse_u64(s, len, &a);
    CHECK(ok == ref_u64(s, len, &b));
    CHECK(!ok || a == b);
    uint32_t u;
    CHECK(ck_parse_u32(s, len, &u) == (ok && b <= UINT32_MAX));
    uint64_t g;
    CHECK(ck_parse_generation_name(s, len, &g) ==
          (len > 0 && s[0] == 'v' && ref_u64(s + 1, len - 1, &b)));
}

static void check_classify(const char *path)
{
    CkPathClass c = ck_classify_path(path, "_views");
    if (c.job != NULL) {
        CHECK(c.job >= path && c.job + c.job_len <= path + strlen(path));
        CHECK(ck_is_job_id(c.job, c.job_len));
        CHECK(c.kind == CK_PATH_JOB_MARKERS || c.kind == CK_PATH_MARKER ||
              c.kind == CK_PATH_JOB_STATE);
    } else {
        CHECK(c.kind != CK_PATH_JOB_MARKERS && c.kind != CK_PATH_MARKER &&
              c.kind != CK_PATH_JOB_STATE);
    }
    if (c.kind == CK_PATH_MARKER)
        CHECK(g_str_has_suffix(path, "/COMPLETED") && g_str_has_prefix(path, "_jobs/"));
}

/* Full lexical normalisation with a stack of every component. */
static bool ref_symlink_allowed(const char *parent, const char *target, const char *own)
{
    g_autoptr(GPtrArray) st = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *joined =
        target[0] == '/' ? g_strdup(target) : g_strconcat(parent, "/", target, NULL);
    g_auto(GStrv) parts = g_strsplit(joined, "/", -1);
    for (char **p = parts; *p; p++) {
        if (**p == '\0' || strcmp(*p, ".") == 0)
            continue;
        if (strcmp(*p, "..") == 0) {
            if (st->len > 0)
                g_ptr_array_remove_index(st, st->len - 1);
            continue;
        }
        g_ptr_array_add(st, g_strdup(*p));
    }
    if (st->len == 0)
        return true;
    const char *c0 = st->pdata[0];
    if (strcmp(c0, "_views") == 0)
        return true;
    if (strcmp(c0, "_state") != 0 && strcmp(c0, "_jobs") != 0)
        return false;
    if (st->len == 1)
        return true;
    const char *c1 = st->pdata[1];
    return !ck_is_job_id(c1, strlen(c1)) || strcmp(c1, own) == 0;
}

static const char *const parents[] = {
    "_state/a/v1/0",
    "_state/a",
    "_jobs/a/chk-1",
    "_state/b/x/y/z/w",
    "_jobs/b",
    "_state/a/v1/0/_state/b",
    "",
    "_state",
    "_state/.x/y",
    "v1/0",
    "_views/a",
};

static CkNs ns_of(const char *path)
{
    CkNs ns = ck_ns_root();
    g_auto(GStrv) parts = g_strsplit(path, "/", -1);
    for (char **p = parts; *p; p++)
        if (**p)
            ns = ck_ns_child(ns, *p, "_views");
    return ns;
}

static void check_symlink(uint8_t pick, uint8_t who, const char *target)
{
    const char *parent = parents[pick % G_N_ELEMENTS(parents)];
    const char *callers[] = {NULL, ck_intern("a"), ck_intern("b")};
    const char *caller = callers[who % 3];
    CkPolicy pol = {.legacy_rw = (who & 4) != 0};
    CkNs pns = ns_of(parent), child;
    CkVerdict v = ck_policy_symlink(&pol, caller, pns, parent, "lnk", target, "_views", &child);
    CHECK((int)v >= 0 && (int)v < CK_VERDICT_COUNT);
    CkNs cchild;
    CkVerdict create = ck_policy_create(&pol, caller, pns, "lnk", false, "_views", &cchild);
    CHECK(ck_ns_equal(child, cchild));
    if (create != CK_ALLOW) {
        CHECK(v == create);
        return;
    }
    if (child.kind != CK_NS_JOB) {
        CHECK(v == CK_ALLOW);
        return;
    }
    bool ok = ref_symlink_allowed(parent, target, child.job);
    CHECK(v == (ok ? CK_ALLOW : CK_CROSS_NAMESPACE_SYMLINK));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0; /* PATH_MAX-ish; bigger inputs only slow the reference */
    check_numbers((const char *)data, size);
    (void)ck_is_job_id((const char *)data, size);
    if (size < 2)
        return 0;
    const char *rest = (const char *)data + 2;
    g_autofree char *s = g_strndup(rest, size - 2);
    check_classify(s);
    check_symlink(data[0], data[1], s);
    return 0;
}
