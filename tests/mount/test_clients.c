/* Real clients through a ckptfs mount: SQLite (transactions, WAL mode,
 * integrity_check) and RocksDB (many keys, flush, a checkpoint made of hard
 * links, reopened and verified key by key). */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <rocksdb/c.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "harness.h"

static void exec_sql(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
    if (rc != SQLITE_OK)
        fprintf(stderr, "%s: %s\n", sql, err);
    sqlite3_free(err);
    assert_int_equal(rc, SQLITE_OK);
}

static char *query_text(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    char *v = g_strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

static void test_sqlite_wal_transactions(void **state)
{
    Mount *m = *state;
    g_autofree char *path = mp(m, "app.db"), *bpath = bp(m, "app.db");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    g_autofree char *mode = query_text(db, "PRAGMA journal_mode=WAL");
    assert_string_equal(mode, "wal");
    exec_sql(db, "CREATE TABLE kv (k INTEGER PRIMARY KEY, v TEXT)");
    for (int t = 0; t < 20; t++) {
        exec_sql(db, "BEGIN");
        for (int i = 0; i < 100; i++) {
            g_autofree char *sql =
                g_strdup_printf("INSERT INTO kv VALUES (%d, '%0200d')", t * 100 + i, t * 100 + i);
            exec_sql(db, sql);
        }
        exec_sql(db, "COMMIT");
    }
    exec_sql(db, "BEGIN");
    exec_sql(db, "DELETE FROM kv WHERE k % 2 = 0");
    exec_sql(db, "ROLLBACK");
    exec_sql(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    g_autofree char *count = query_text(db, "SELECT count(*) FROM kv");
    assert_string_equal(count, "2000");
    g_autofree char *ok = query_text(db, "PRAGMA integrity_check");
    assert_string_equal(ok, "ok");
    sqlite3_close(db);

    /* the backing file is the same database */
    assert_int_equal(sqlite3_open_v2(bpath, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    g_autofree char *bcount = query_text(db, "SELECT count(*) FROM kv");
    assert_string_equal(bcount, "2000");
    g_autofree char *bok = query_text(db, "PRAGMA integrity_check");
    assert_string_equal(bok, "ok");
    sqlite3_close(db);
}

#define KEYS 20000

static void check_rocks(char *err)
{
    if (err)
        fprintf(stderr, "rocksdb: %s\n", err);
    assert_null(err);
}

static void test_rocksdb_checkpoint(void **state)
{
    Mount *m = *state;
    g_autofree char *dbpath = mp(m, "rocks"), *ckpath = mp(m, "rocks-ckpt");
    char *err = NULL;
    rocksdb_options_t *opts = rocksdb_options_create();
    rocksdb_options_set_create_if_missing(opts, 1);
    rocksdb_options_set_write_buffer_size(opts, 256 * 1024);
    rocksdb_t *db = rocksdb_open(opts, dbpath, &err);
    check_rocks(err);
    rocksdb_writeoptions_t *wo = rocksdb_writeoptions_create();
    for (int i = 0; i < KEYS; i++) {
        char k[32], v[128];
        int kl = g_snprintf(k, sizeof k, "key-%08d", i);
        int vl = g_snprintf(v, sizeof v, "value-%08d-%064d", i, i);
        rocksdb_put(db, wo, k, (size_t)kl, v, (size_t)vl, &err);
        check_rocks(err);
    }
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    rocksdb_flush(db, fo, &err);
    check_rocks(err);
    rocksdb_checkpoint_t *ck = rocksdb_checkpoint_object_create(db, &err);
    check_rocks(err);
    rocksdb_checkpoint_create(ck, ckpath, 0, &err);
    check_rocks(err);
    rocksdb_checkpoint_object_destroy(ck);
    rocksdb_close(db);

    /* the checkpoint's SST files are hard links of the live ones */
    g_autofree char *bck = bp(m, "rocks-ckpt");
    g_autoptr(GDir) d = g_dir_open(bck, 0, NULL);
    assert_non_null(d);
    int ssts = 0;
    const char *name;
    while ((name = g_dir_read_name(d))) {
        if (!g_str_has_suffix(name, ".sst"))
            continue;
        g_autofree char *p = g_build_filename(bck, name, NULL);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_nlink, 2);
        ssts++;
    }
    assert_true(ssts > 0);

    /* reopen the checkpoint through the mount and read every key back */
    rocksdb_options_set_create_if_missing(opts, 0);
    db = rocksdb_open(opts, ckpath, &err);
    check_rocks(err);
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    for (int i = 0; i < KEYS; i++) {
        char k[32], v[128];
        int kl = g_snprintf(k, sizeof k, "key-%08d", i);
        int vl = g_snprintf(v, sizeof v, "value-%08d-%064d", i, i);
        size_t len = 0;
        char *got = rocksdb_get(db, ro, k, (size_t)kl, &len, &err);
        check_rocks(err);
        assert_non_null(got);
        assert_int_equal(len, (size_t)vl);
        assert_memory_equal(got, v, len);
        rocksdb_free(got);
    }
    rocksdb_readoptions_destroy(ro);
    rocksdb_close(db);
    rocksdb_flushoptions_destroy(fo);
    rocksdb_writeoptions_destroy(wo);
    rocksdb_options_destroy(opts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sqlite_wal_transactions, mount_setup, mount_teardown),
        cmocka_unit_test_setup_teardown(test_rocksdb_checkpoint, mount_setup, mount_teardown),
    };
    return cmocka_run_group_tests_name("mount/clients", tests, NULL, NULL);
}
