/* core/marker.c: the parser and classes of the COMPLETED marker. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "marker.h"
#include "testfs.h"

static CkMarker *parse(const char *s, uint64_t n)
{
    return ck_marker_parse(s, strlen(s), n);
}

static void expect_malformed(const char *text, uint64_t n, unsigned line, const char *reason)
{
    g_autoptr(CkMarker) m = parse(text, n);
    if (m->cls != CK_MARKER_MALFORMED)
        fail_msg("not malformed: %s", text);
    assert_int_equal(m->error_line, line);
    assert_non_null(m->error);
    assert_string_equal(m->error, reason);
}

static void test_class_names(void **st)
{
    (void)st;
    assert_string_equal(ck_marker_class_name(CK_MARKER_NAMESPACED), "namespaced");
    assert_string_equal(ck_marker_class_name(CK_MARKER_LEGACY), "legacy");
    assert_string_equal(ck_marker_class_name(CK_MARKER_CUT_SHORT), "cut-short");
    assert_string_equal(ck_marker_class_name(CK_MARKER_MALFORMED), "malformed");
}

static void test_namespaced(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m =
        parse("checkpoint=5\ngeneration=2\nparticipants=0,1,2,3\nstate=_state/j1\n", 5);
    assert_int_equal(m->cls, CK_MARKER_NAMESPACED);
    assert_true(m->has_checkpoint && m->has_generation && m->has_participants && m->has_state);
    assert_int_equal(m->checkpoint, 5);
    assert_int_equal(m->generation, 2);
    assert_int_equal(m->participants->len, 4);
    for (guint i = 0; i < 4; i++)
        assert_int_equal(g_array_index(m->participants, guint32, i), i);
    assert_string_equal(m->state, "_state/j1");
    assert_int_equal(m->unknown->len, 0);
    assert_null(m->error);
    assert_int_equal(m->error_line, 0);
}

static void test_namespaced_without_participants(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m = parse("state=s3://b/x?local=/t\n", 1);
    assert_int_equal(m->cls, CK_MARKER_NAMESPACED);
    assert_false(m->has_participants);
    assert_false(m->has_generation);
    assert_false(m->has_checkpoint);
    assert_string_equal(m->state, "s3://b/x?local=/t");
}

static void test_legacy(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m = parse("generation=1\nparticipants=3,1\n", 9);
    assert_int_equal(m->cls, CK_MARKER_LEGACY);
    assert_null(m->state);
    assert_int_equal(m->participants->len, 2);
    assert_int_equal(g_array_index(m->participants, guint32, 0), 3);
    assert_int_equal(g_array_index(m->participants, guint32, 1), 1);
}

static void test_empty_participants(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m = parse("participants=\n", 1);
    assert_int_equal(m->cls, CK_MARKER_LEGACY);
    assert_true(m->has_participants);
    assert_int_equal(m->participants->len, 0);
}

static void test_cut_short(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m = parse("generation=4\n", 1);
    assert_int_equal(m->cls, CK_MARKER_CUT_SHORT);
    g_autoptr(CkMarker) e = ck_marker_parse("", 0, 1);
    assert_int_equal(e->cls, CK_MARKER_CUT_SHORT);
    g_autoptr(CkMarker) n = ck_marker_parse(NULL, 0, 1);
    assert_int_equal(n->cls, CK_MARKER_CUT_SHORT);
}

static void test_comments_empty_lines_no_final_lf(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m =
        parse("# written by clink\n\n#generation=99\n\ngeneration=3\n\n# x=y\nparticipants=0", 1);
    assert_int_equal(m->cls, CK_MARKER_LEGACY);
    assert_int_equal(m->generation, 3);
    assert_int_equal(m->participants->len, 1);
    assert_int_equal(m->unknown->len, 0);
    /* a comment is a line starting with '#', nothing else */
    expect_malformed("generation=1\n #x\n", 1, 2, "line 2: no '=' in line");
}

static void test_crlf_stripped(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m = parse("generation=3\r\nstate=_state/j\r\n\r\n#c\r\nfoo=bar\r\n", 1);
    assert_int_equal(m->cls, CK_MARKER_NAMESPACED);
    assert_int_equal(m->generation, 3);
    assert_string_equal(m->state, "_state/j");
    assert_string_equal(((CkMarkerKv *)m->unknown->pdata[0])->value, "bar");
    /* only one CR belongs to the line end */
    expect_malformed("generation=3\r\r\n", 1, 1, "line 1: generation is not a canonical number");
    /* a bare CR without LF is not a line end either */
    expect_malformed("generation=3\rstate=x\n", 1, 1,
                     "line 1: generation is not a canonical number");
}

/* One \r before a line's LF is dropped: a last line without LF keeps its
 * \r, which then belongs to the value. */
static void test_cr_only_before_lf(void **st)
{
    (void)st;
    expect_malformed("participants=0\ngeneration=3\r", 1, 2,
                     "line 2: generation is not a canonical number");
    g_autoptr(CkMarker) m = parse("generation=3\r\nstate=_state/j\r", 1);
    assert_int_equal(m->cls, CK_MARKER_NAMESPACED);
    assert_int_equal(m->generation, 3);
    assert_string_equal(m->state, "_state/j\r");
    g_autoptr(CkMarker) e = parse("generation=3\n\r", 1); /* a lone \r line: no '=' */
    assert_int_equal(e->cls, CK_MARKER_MALFORMED);
    assert_int_equal(e->error_line, 2);
}

/* A participant listed twice is read once (kept at its first place). */
static void test_duplicated_participants_once(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m =
        parse("generation=1\nparticipants=2,0,2,1,0,4294967295,4294967295\n", 1);
    assert_int_equal(m->cls, CK_MARKER_LEGACY);
    const guint32 want[] = {2, 0, 1, 4294967295u};
    assert_int_equal(m->participants->len, G_N_ELEMENTS(want));
    for (guint i = 0; i < G_N_ELEMENTS(want); i++)
        assert_int_equal(g_array_index(m->participants, guint32, i), want[i]);
    /* a long list (past the linear search): every subtask once, in order */
    GString *t = g_string_new("participants=");
    for (guint i = 0; i < 300; i++)
        g_string_append_printf(t, "%s%u", i ? "," : "", (i * 7) % 100);
    g_autoptr(CkMarker) l = parse(t->str, 1);
    g_string_free(t, TRUE);
    assert_int_equal(l->participants->len, 100);
    for (guint i = 0; i < 100; i++)
        assert_int_equal(g_array_index(l->participants, guint32, i), (i * 7) % 100);
}

static void test_unknown_keys_kept(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m = parse("zeta=1\nstate=/abs\nalpha=two=2\nzeta=again\nempty=\n", 1);
    assert_int_equal(m->cls, CK_MARKER_NAMESPACED);
    assert_int_equal(m->unknown->len, 4);
    const char *want[][2] = {{"zeta", "1"}, {"alpha", "two=2"}, {"zeta", "again"}, {"empty", ""}};
    for (guint i = 0; i < 4; i++) {
        CkMarkerKv *kv = m->unknown->pdata[i];
        assert_string_equal(kv->key, want[i][0]);
        assert_string_equal(kv->value, want[i][1]);
    }
}

static void test_value_not_trimmed(void **st)
{
    (void)st;
    g_autoptr(CkMarker) m = parse("state= /abs \n", 1);
    assert_string_equal(m->state, " /abs ");
    expect_malformed("generation= 1\n", 1, 1, "line 1: generation is not a canonical number");
    expect_malformed("generation=1 \n", 1, 1, "line 1: generation is not a canonical number");
    expect_malformed("generation =1\n", 1, 1, "line 1: key is not [a-z_]+");
}

static void test_malformed_duplicates(void **st)
{
    (void)st;
    expect_malformed("generation=1\nparticipants=0\ngeneration=1\n", 1, 3,
                     "line 3: duplicated key generation");
    expect_malformed("checkpoint=1\ncheckpoint=1\n", 1, 2, "line 2: duplicated key checkpoint");
    expect_malformed("participants=\n\nparticipants=0\n", 1, 3,
                     "line 3: duplicated key participants");
    expect_malformed("state=a\n#\nstate=a\n", 1, 3, "line 3: duplicated key state");
}

static void test_malformed_line_without_eq(void **st)
{
    (void)st;
    expect_malformed("generation=1\nparticipants\n", 1, 2, "line 2: no '=' in line");
    /* a line of only blanks is a line without '=' */
    expect_malformed("   \n", 1, 1, "line 1: no '=' in line");
    expect_malformed("generation=1\n\t\n", 1, 2, "line 2: no '=' in line");
    expect_malformed("generation=1\n \r\n", 1, 2, "line 2: no '=' in line");
}

static void test_malformed_nul(void **st)
{
    (void)st;
    const char text[] = "generation=1\nstate=ab\0cd\n";
    g_autoptr(CkMarker) m = ck_marker_parse(text, sizeof text - 1, 1);
    assert_int_equal(m->cls, CK_MARKER_MALFORMED);
    assert_int_equal(m->error_line, 2);
    assert_string_equal(m->error, "line 2: NUL byte");
    const char c[] = "# a comment \0 with NUL\n";
    g_autoptr(CkMarker) m2 = ck_marker_parse(c, sizeof c - 1, 1);
    assert_int_equal(m2->cls, CK_MARKER_MALFORMED);
    assert_int_equal(m2->error_line, 1);
}

static void test_malformed_numbers(void **st)
{
    (void)st;
    expect_malformed("generation=01\n", 1, 1, "line 1: generation is not a canonical number");
    expect_malformed("generation=\n", 1, 1, "line 1: generation is not a canonical number");
    expect_malformed("generation=-1\n", 1, 1, "line 1: generation is not a canonical number");
    expect_malformed("generation=18446744073709551616\n", 1, 1,
                     "line 1: generation is not a canonical number");
    expect_malformed("checkpoint=007\n", 7, 1, "line 1: checkpoint is not a canonical number");
    expect_malformed("checkpoint=+7\n", 7, 1, "line 1: checkpoint is not a canonical number");
    g_autoptr(CkMarker) big = parse("generation=18446744073709551615\n", 1);
    assert_int_equal(big->cls, CK_MARKER_CUT_SHORT);
    assert_true(big->generation == UINT64_MAX);
}

static void test_checkpoint_mismatch(void **st)
{
    (void)st;
    expect_malformed("generation=1\ncheckpoint=8\n", 7, 2,
                     "line 2: checkpoint=8 differs from the directory's chk-7");
    g_autoptr(CkMarker) ok = parse("checkpoint=7\n", 7);
    assert_int_equal(ok->cls, CK_MARKER_CUT_SHORT);
    assert_true(ok->has_checkpoint);
    assert_int_equal(ok->checkpoint, 7);
}

static void test_malformed_keys(void **st)
{
    (void)st;
    expect_malformed("Generation=1\n", 1, 1, "line 1: key is not [a-z_]+");
    expect_malformed("gen2=1\n", 1, 1, "line 1: key is not [a-z_]+");
    expect_malformed("=1\n", 1, 1, "line 1: key is not [a-z_]+");
    expect_malformed("a-b=1\n", 1, 1, "line 1: key is not [a-z_]+");
    g_autoptr(CkMarker) ok = parse("_under_score=1\n", 1);
    assert_int_equal(ok->cls, CK_MARKER_CUT_SHORT);
    assert_int_equal(ok->unknown->len, 1);
}

static void test_malformed_participants(void **st)
{
    (void)st;
    const char *bad[] = {"participants=0,,1\n",       "participants=0,1,\n", "participants=,0\n",
                         "participants=,\n",          "participants=0,01\n", "participants=0, 1\n",
                         "participants=4294967296\n", "participants=a\n"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        expect_malformed(bad[i], 1, 1,
                         "line 1: participants is not a list of canonical subtask indices");
    g_autoptr(CkMarker) ok = parse("participants=4294967295\n", 1);
    assert_int_equal(ok->cls, CK_MARKER_LEGACY);
}

static void test_malformed_empty_state(void **st)
{
    (void)st;
    expect_malformed("generation=1\nstate=\n", 1, 2, "line 2: empty state");
}

static void test_first_error_wins(void **st)
{
    (void)st;
    expect_malformed("junk\ngeneration=01\n", 1, 1, "line 1: no '=' in line");
}

static void test_size_limit(void **st)
{
    (void)st;
    /* exactly 64 KiB: comments padded, then a valid line */
    GString *s = g_string_new("generation=2\n");
    while (s->len < CK_MARKER_MAX_BYTES - 100)
        g_string_append(s, "# padding padding padding padding\n");
    g_string_append(s, "participants=1\n#");
    while (s->len < CK_MARKER_MAX_BYTES)
        g_string_append_c(s, 'x');
    assert_int_equal(s->len, 65536);
    g_autoptr(CkMarker) ok = ck_marker_parse(s->str, s->len, 1);
    assert_int_equal(ok->cls, CK_MARKER_LEGACY);
    g_string_append_c(s, 'x');
    g_autoptr(CkMarker) big = ck_marker_parse(s->str, s->len, 1);
    assert_int_equal(big->cls, CK_MARKER_MALFORMED);
    assert_int_equal(big->error_line, 0);
    assert_string_equal(big->error, "file over 65536 bytes (64 KiB)");
    g_string_free(s, TRUE);
}

static void test_many_participants(void **st)
{
    (void)st;
    GString *s = g_string_new("participants=");
    for (int i = 0; i < 10000; i++)
        g_string_append_printf(s, i ? ",%d" : "%d", i);
    g_string_append(s, "\nstate=_state/j\n");
    g_autoptr(CkMarker) m = ck_marker_parse(s->str, s->len, 1);
    assert_int_equal(m->cls, CK_MARKER_NAMESPACED);
    assert_int_equal(m->participants->len, 10000);
    assert_int_equal(g_array_index(m->participants, guint32, 9999), 9999);
    g_string_free(s, TRUE);
}

static void test_no_read_past_len(void **st)
{
    (void)st;
    /* len cuts "generation=12" to "generation=1"; an exact-size heap copy lets ASan see any
     * read past it */
    char *buf = g_memdup2("generation=12", 12);
    g_autoptr(CkMarker) m = ck_marker_parse(buf, 12, 1);
    assert_int_equal(m->generation, 1);
    g_free(buf);
}

static int setup_dir(void **st)
{
    *st = testfs_tmpdir("ck-marker-XXXXXX");
    return 0;
}

static int teardown_dir(void **st)
{
    bool gone = testfs_remove(*st);
    g_free(*st);
    return gone ? 0 : -1;
}

static void write_file(int dfd, const char *name, const char *data, size_t len)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

static void test_load(void **st)
{
    int dfd = open(*st, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    write_file(dfd, "COMPLETED", "generation=1\nstate=_state/a\n", 28);
    CkMarker *m = NULL;
    assert_int_equal(ck_marker_load(dfd, "COMPLETED", 3, &m), 0);
    assert_int_equal(m->cls, CK_MARKER_NAMESPACED);
    ck_marker_free(m);

    assert_int_equal(ck_marker_load(dfd, "missing", 3, &m), -ENOENT);
    assert_null(m);

    /* not a regular file: never followed or opened, malformed */
    assert_int_equal(symlinkat("COMPLETED", dfd, "link"), 0);
    assert_int_equal(ck_marker_load(dfd, "link", 3, &m), 0);
    assert_int_equal(m->cls, CK_MARKER_MALFORMED);
    assert_int_equal(m->error_line, 0);
    assert_string_equal(m->error, "not a regular file (a symlink, not followed)");
    ck_marker_free(m);

    assert_int_equal(mkdirat(dfd, "adir", 0755), 0);
    assert_int_equal(ck_marker_load(dfd, "adir", 3, &m), 0);
    assert_int_equal(m->cls, CK_MARKER_MALFORMED);
    assert_string_equal(m->error, "not a regular file (a directory)");
    ck_marker_free(m);

    assert_int_equal(mkfifoat(dfd, "fifo", 0644), 0);
    assert_int_equal(ck_marker_load(dfd, "fifo", 3, &m), 0); /* does not block */
    assert_int_equal(m->cls, CK_MARKER_MALFORMED);
    assert_string_equal(m->error, "not a regular file (a FIFO)");
    ck_marker_free(m);
    /* a device is never opened (opening some has effects) */
    if (geteuid() == 0 && mknodat(dfd, "dev", S_IFCHR | 0600, makedev(1, 3)) == 0) {
        assert_int_equal(ck_marker_load(dfd, "dev", 3, &m), 0);
        assert_int_equal(m->cls, CK_MARKER_MALFORMED);
        assert_string_equal(m->error, "not a regular file (a character device)");
        ck_marker_free(m);
    }

    char *big = g_malloc(CK_MARKER_MAX_BYTES * 2);
    memset(big, '#', CK_MARKER_MAX_BYTES * 2);
    write_file(dfd, "big", big, CK_MARKER_MAX_BYTES + 1);
    assert_int_equal(ck_marker_load(dfd, "big", 3, &m), 0);
    assert_int_equal(m->cls, CK_MARKER_MALFORMED);
    assert_int_equal(m->error_line, 0);
    ck_marker_free(m);
    write_file(dfd, "big", big, CK_MARKER_MAX_BYTES);
    assert_int_equal(ck_marker_load(dfd, "big", 3, &m), 0);
    assert_int_equal(m->cls, CK_MARKER_CUT_SHORT);
    ck_marker_free(m);
    g_free(big);

    write_file(dfd, "mismatch", "checkpoint=4\n", 13);
    assert_int_equal(ck_marker_load(dfd, "mismatch", 3, &m), 0);
    assert_int_equal(m->cls, CK_MARKER_MALFORMED);
    assert_int_equal(m->error_line, 1);
    ck_marker_free(m);
    close(dfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_class_names),
        cmocka_unit_test(test_namespaced),
        cmocka_unit_test(test_namespaced_without_participants),
        cmocka_unit_test(test_legacy),
        cmocka_unit_test(test_empty_participants),
        cmocka_unit_test(test_cut_short),
        cmocka_unit_test(test_comments_empty_lines_no_final_lf),
        cmocka_unit_test(test_crlf_stripped),
        cmocka_unit_test(test_cr_only_before_lf),
        cmocka_unit_test(test_duplicated_participants_once),
        cmocka_unit_test(test_unknown_keys_kept),
        cmocka_unit_test(test_value_not_trimmed),
        cmocka_unit_test(test_malformed_duplicates),
        cmocka_unit_test(test_malformed_line_without_eq),
        cmocka_unit_test(test_malformed_nul),
        cmocka_unit_test(test_malformed_numbers),
        cmocka_unit_test(test_checkpoint_mismatch),
        cmocka_unit_test(test_malformed_keys),
        cmocka_unit_test(test_malformed_participants),
        cmocka_unit_test(test_malformed_empty_state),
        cmocka_unit_test(test_first_error_wins),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_many_participants),
        cmocka_unit_test(test_no_read_past_len),
        cmocka_unit_test_setup_teardown(test_load, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
