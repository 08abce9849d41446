/*  =========================================================================
    test_store - unit tests for store/ (LMDB key/value store)

    Every test gets a fresh temporary directory, removed afterwards.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../store/store.h"

#define MIB ((size_t) 1 << 20)

typedef struct {
    char dir[1024];         //  The temporary directory of this test
    char data[PATH_MAX];    //  A store directory inside it (not yet made)
} s_fixture_t;

static int
s_setup (void **state)
{
    s_fixture_t *fixture = calloc (1, sizeof *fixture);
    assert_non_null (fixture);
    const char *tmp = getenv ("TMPDIR");
    if (!tmp || !*tmp || strlen (tmp) > 512)
        tmp = "/tmp";
    //  mkdtemp replaces the six trailing 'X's of the template
    char pattern[7];
    memset (pattern, 'X', 6);
    pattern[6] = '\0';
    snprintf (fixture->dir, sizeof fixture->dir, "%s/test_store.%s", tmp,
              pattern);
    assert_non_null (mkdtemp (fixture->dir));
    snprintf (fixture->data, sizeof fixture->data, "%s/data", fixture->dir);
    *state = fixture;
    return 0;
}

static int
s_remove_entry (const char *path, const struct stat *info, int flag,
                struct FTW *ftw)
{
    return remove (path);
}

static int
s_teardown (void **state)
{
    s_fixture_t *fixture = *state;
    //  test_store_full_disk's tmpfs, should it have failed while mounted
    char disk[PATH_MAX];
    snprintf (disk, sizeof disk, "%s/disk", fixture->dir);
    umount2 (disk, MNT_DETACH);
    nftw (fixture->dir, s_remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free (fixture);
    return 0;
}

static store_t *
s_open_dir (const char *dir, size_t map_bytes, size_t max_map_bytes)
{
    char err[256] = "";
    store_t *store = store_open (dir, map_bytes, max_map_bytes, err, sizeof err);
    if (!store)
        fail_msg ("store_open: %s", err);
    return store;
}

static store_t *
s_open (s_fixture_t *fixture, size_t map_bytes, size_t max_map_bytes)
{
    return s_open_dir (fixture->data, map_bytes, max_map_bytes);
}

//  Writes one string KEY -> string VALUE in its own transaction.
static void
s_put_str (store_t *store, store_db_t db, const char *key, const char *value)
{
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    assert_int_equal (
        store_put (txn, db, key, strlen (key), value, strlen (value)), 0);
    assert_int_equal (store_commit (&txn), 0);
    assert_null (txn);
}

//  Asserts that KEY reads back as VALUE (NULL: absent).
static void
s_expect_str (store_t *store, store_db_t db, const char *key,
              const char *value)
{
    store_txn_t *txn = store_begin (store, false);
    assert_non_null (txn);
    const void *data = NULL;
    size_t size = 0;
    int rc = store_get (txn, db, key, strlen (key), &data, &size);
    if (value) {
        assert_int_equal (rc, 0);
        assert_int_equal (size, strlen (value));
        assert_memory_equal (data, value, size);
    }
    else
        assert_int_equal (rc, STORE_ENOTFOUND);
    store_abort (&txn);
    assert_null (txn);
}

//  A 4 KiB value that encodes its index, so a mix-up cannot read as intact.
static void
s_fill_value (unsigned char *value, size_t size, uint32_t index)
{
    for (size_t i = 0; i < size; i++)
        value[i] = (unsigned char) ((index * 31 + i) & 0xff);
}

static void
s_be32 (unsigned char *out, uint32_t value)
{
    out[0] = (unsigned char) (value >> 24);
    out[1] = (unsigned char) (value >> 16);
    out[2] = (unsigned char) (value >> 8);
    out[3] = (unsigned char) value;
}

static uint32_t
s_read_be32 (const unsigned char *in)
{
    return (uint32_t) in[0] << 24 | (uint32_t) in[1] << 16
         | (uint32_t) in[2] << 8 | (uint32_t) in[3];
}

static void
test_store_put_get_del (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);

    s_put_str (store, STORE_DB_JOBS, "j-1", "one");
    s_expect_str (store, STORE_DB_JOBS, "j-1", "one");
    //  Databases are separate namespaces
    s_expect_str (store, STORE_DB_NODES, "j-1", NULL);

    //  Overwrite, then an empty value (NULL pointer, length 0)
    s_put_str (store, STORE_DB_JOBS, "j-1", "uno");
    s_expect_str (store, STORE_DB_JOBS, "j-1", "uno");
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    assert_int_equal (store_put (txn, STORE_DB_QUEUE, "q", 1, NULL, 0), 0);
    assert_int_equal (store_commit (&txn), 0);
    s_expect_str (store, STORE_DB_QUEUE, "q", "");

    txn = store_begin (store, true);
    assert_non_null (txn);
    assert_int_equal (store_count (txn, STORE_DB_JOBS), 1);
    assert_int_equal (store_del (txn, STORE_DB_JOBS, "j-1", 3), 0);
    assert_int_equal (store_del (txn, STORE_DB_JOBS, "j-1", 3),
                      STORE_ENOTFOUND);
    assert_int_equal (store_count (txn, STORE_DB_JOBS), 0);
    assert_int_equal (store_commit (&txn), 0);
    s_expect_str (store, STORE_DB_JOBS, "j-1", NULL);

    //  A read transaction refuses writes, and a second writer is refused
    txn = store_begin (store, false);
    assert_non_null (txn);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, "k", 1, "v", 1),
                      STORE_EINVAL);
    assert_int_equal (store_del (txn, STORE_DB_QUEUE, "q", 1), STORE_EINVAL);
    assert_int_equal (store_commit (&txn), 0);
    txn = store_begin (store, true);
    assert_non_null (txn);
    assert_null (store_begin (store, true));
    assert_true (strlen (store_last_error (store)) > 0);
    //  ... while one read transaction may sit beside the writer
    store_txn_t *reader = store_begin (store, false);
    assert_non_null (reader);
    store_abort (&reader);
    store_abort (&txn);
    assert_null (txn);
    store_abort (&txn);     //  NULL-safe

    store_destroy (&store);
    assert_null (store);
    store_destroy (&store);     //  NULL-safe
}

static void
test_store_key_order (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);

    //  Time-sortable ids (fixed-width hex time, then a sequence), written
    //  out of order, list in time order.
    const char *ids[] = {
        "j-0193a1b2c3d4-0001", "j-0193a1b2c3d4-0002", "j-0193a1b2c3ff-0001",
        "j-0193a1b2c400-0001", "j-0193a1b2d000-0001", "j-0194000000ab-0001"
    };
    size_t count = sizeof ids / sizeof ids[0];
    const size_t order[] = { 3, 0, 5, 1, 4, 2 };
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    for (size_t i = 0; i < count; i++) {
        const char *id = ids[order[i]];
        assert_int_equal (
            store_put (txn, STORE_DB_JOBS, id, strlen (id), "x", 1), 0);
    }
    assert_int_equal (store_commit (&txn), 0);

    txn = store_begin (store, false);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_JOBS);
    assert_non_null (cursor);
    const void *k;
    size_t k_len;
    size_t seen = 0;
    int rc = store_cursor_seek (cursor, NULL, 0, &k, &k_len, NULL, NULL);
    while (rc == 0) {
        assert_true (seen < count);
        assert_int_equal (k_len, strlen (ids[seen]));
        assert_memory_equal (k, ids[seen], k_len);
        seen++;
        rc = store_cursor_next (cursor, &k, &k_len, NULL, NULL);
    }
    assert_int_equal (rc, STORE_ENOTFOUND);
    assert_int_equal (seen, count);
    store_cursor_destroy (&cursor);
    assert_null (cursor);
    store_abort (&txn);

    //  Binary keys: big-endian integers with a step that crosses byte
    //  boundaries sort numerically (little-endian would not).
    txn = store_begin (store, true);
    uint32_t step = 0x1ff;
    size_t binary_count = 300;
    for (size_t i = binary_count; i-- > 0;) {
        unsigned char key[4];
        s_be32 (key, (uint32_t) i * step);
        assert_int_equal (store_put (txn, STORE_DB_RESULTS, key, sizeof key,
                                     &i, sizeof i),
                          0);
    }
    assert_int_equal (store_commit (&txn), 0);

    txn = store_begin (store, false);
    assert_int_equal (store_count (txn, STORE_DB_RESULTS), binary_count);
    cursor = store_cursor_new (txn, STORE_DB_RESULTS);
    size_t expected = 0;
    const void *v;
    size_t v_len;
    rc = store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len);
    while (rc == 0) {
        assert_int_equal (k_len, 4);
        assert_int_equal (s_read_be32 (k), (uint32_t) expected * step);
        size_t stored;
        assert_int_equal (v_len, sizeof stored);
        memcpy (&stored, v, sizeof stored);
        assert_int_equal (stored, expected);
        expected++;
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    assert_int_equal (expected, binary_count);

    //  And backwards from the last key
    assert_int_equal (store_cursor_last (cursor, &k, &k_len, NULL, NULL), 0);
    assert_int_equal (s_read_be32 (k), (uint32_t) (binary_count - 1) * step);
    assert_int_equal (store_cursor_prev (cursor, &k, &k_len, NULL, NULL), 0);
    assert_int_equal (s_read_be32 (k), (uint32_t) (binary_count - 2) * step);
    store_cursor_destroy (&cursor);
    store_abort (&txn);
    store_destroy (&store);
}

static void
test_store_reopen_keeps_data (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);
    s_put_str (store, STORE_DB_NODES, "web-1", "node record");
    s_put_str (store, STORE_DB_SPOOL, "j-1|0|1", "result");
    //  An aborted write does not survive either
    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (store_put (txn, STORE_DB_NODES, "web-2", 5, "x", 1), 0);
    store_abort (&txn);
    store_destroy (&store);

    store = s_open (fixture, MIB, 0);
    s_expect_str (store, STORE_DB_NODES, "web-1", "node record");
    s_expect_str (store, STORE_DB_SPOOL, "j-1|0|1", "result");
    s_expect_str (store, STORE_DB_NODES, "web-2", NULL);
    //  The schema version is in meta
    txn = store_begin (store, false);
    const void *value;
    size_t size;
    assert_int_equal (store_get (txn, STORE_DB_META, "schema_version", 14,
                                 &value, &size),
                      0);
    assert_int_equal (size, 4);
    assert_int_equal (s_read_be32 (value), STORE_SCHEMA_VERSION);
    store_abort (&txn);
    store_destroy (&store);

    //  The directory was created private
    struct stat info;
    assert_int_equal (stat (fixture->data, &info), 0);
    assert_int_equal (info.st_mode & 0777, 0700);
}

static void
test_store_cursor_seek_prefix (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);
    const char *keys[] = { "j-1|0|a", "j-1|1|a", "j-2|0|a", "j-2|0|b",
                           "j-2|1|a", "j-3|0|a" };
    size_t count = sizeof keys / sizeof keys[0];
    store_txn_t *txn = store_begin (store, true);
    for (size_t i = 0; i < count; i++)
        assert_int_equal (store_put (txn, STORE_DB_EVENTS, keys[i],
                                     strlen (keys[i]), keys[i],
                                     strlen (keys[i])),
                          0);
    assert_int_equal (store_commit (&txn), 0);

    txn = store_begin (store, false);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_EVENTS);
    assert_non_null (cursor);
    const char *prefix = "j-2|";
    const void *k, *v;
    size_t k_len, v_len;
    size_t seen = 0;
    int rc = store_cursor_seek (cursor, prefix, strlen (prefix), &k, &k_len,
                                &v, &v_len);
    while (rc == 0 && k_len >= strlen (prefix)
           && memcmp (k, prefix, strlen (prefix)) == 0) {
        assert_int_equal (k_len, strlen (keys[2 + seen]));
        assert_memory_equal (k, keys[2 + seen], k_len);
        assert_memory_equal (v, keys[2 + seen], v_len);
        seen++;
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    assert_int_equal (seen, 3);
    assert_int_equal (rc, 0);   //  Stopped on j-3, the next job
    assert_memory_equal (k, "j-3|0|a", k_len);

    //  Seeking between keys lands on the next one
    assert_int_equal (
        store_cursor_seek (cursor, "j-1|0|b", 7, &k, &k_len, NULL, NULL), 0);
    assert_memory_equal (k, "j-1|1|a", k_len);
    assert_int_equal (store_cursor_prev (cursor, &k, &k_len, NULL, NULL), 0);
    assert_memory_equal (k, "j-1|0|a", k_len);
    assert_int_equal (store_cursor_prev (cursor, &k, &k_len, NULL, NULL),
                      STORE_ENOTFOUND);
    assert_int_equal (store_cursor_next (cursor, &k, &k_len, NULL, NULL), 0);
    assert_memory_equal (k, "j-1|0|a", k_len);

    //  Seeking past the end finds nothing; prev from there is the last key
    assert_int_equal (store_cursor_seek (cursor, "j-9", 3, &k, &k_len, NULL,
                                         NULL),
                      STORE_ENOTFOUND);
    assert_int_equal (store_cursor_next (cursor, &k, &k_len, NULL, NULL),
                      STORE_ENOTFOUND);
    assert_int_equal (store_cursor_prev (cursor, &k, &k_len, NULL, NULL), 0);
    assert_memory_equal (k, "j-3|0|a", k_len);
    assert_int_equal (store_cursor_next (cursor, &k, &k_len, NULL, NULL),
                      STORE_ENOTFOUND);

    //  An over-long seek key is refused
    char long_key[STORE_MAX_KEY + 1];
    memset (long_key, 'k', sizeof long_key);
    assert_int_equal (store_cursor_seek (cursor, long_key, sizeof long_key,
                                         NULL, NULL, NULL, NULL),
                      STORE_EINVAL);
    store_cursor_destroy (&cursor);

    //  A cursor left open is closed with its transaction, then refuses use
    cursor = store_cursor_new (txn, STORE_DB_EVENTS);
    assert_non_null (cursor);
    store_abort (&txn);
    assert_int_equal (store_cursor_next (cursor, &k, &k_len, NULL, NULL),
                      STORE_EINVAL);
    store_cursor_destroy (&cursor);

    //  An empty database
    txn = store_begin (store, false);
    cursor = store_cursor_new (txn, STORE_DB_KEYS);
    assert_int_equal (store_cursor_seek (cursor, NULL, 0, &k, &k_len, NULL,
                                         NULL),
                      STORE_ENOTFOUND);
    assert_int_equal (store_cursor_last (cursor, &k, &k_len, NULL, NULL),
                      STORE_ENOTFOUND);
    store_cursor_destroy (&cursor);
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);
}

static void
test_store_del_prefix (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);
    const char *keys[] = { "group/web/a", "group/web/b", "group/web/c",
                           "group/webserver/a", "group/db/a", "group/wea" };
    size_t count = sizeof keys / sizeof keys[0];
    store_txn_t *txn = store_begin (store, true);
    for (size_t i = 0; i < count; i++)
        assert_int_equal (store_put (txn, STORE_DB_NODES, keys[i],
                                     strlen (keys[i]), "v", 1),
                          0);
    //  Same keys in another database, which must not be touched
    for (size_t i = 0; i < count; i++)
        assert_int_equal (store_put (txn, STORE_DB_KEYS, keys[i],
                                     strlen (keys[i]), "v", 1),
                          0);
    assert_int_equal (store_commit (&txn), 0);

    txn = store_begin (store, true);
    assert_int_equal (store_del_prefix (txn, STORE_DB_NODES, "group/web/", 10),
                      3);
    assert_int_equal (store_del_prefix (txn, STORE_DB_NODES, "group/web/", 10),
                      0);
    assert_int_equal (store_del_prefix (txn, STORE_DB_NODES, "zzz", 3), 0);
    assert_int_equal (store_commit (&txn), 0);

    s_expect_str (store, STORE_DB_NODES, "group/web/a", NULL);
    s_expect_str (store, STORE_DB_NODES, "group/web/c", NULL);
    s_expect_str (store, STORE_DB_NODES, "group/webserver/a", "v");
    s_expect_str (store, STORE_DB_NODES, "group/db/a", "v");
    s_expect_str (store, STORE_DB_NODES, "group/wea", "v");
    s_expect_str (store, STORE_DB_KEYS, "group/web/a", "v");

    //  An empty prefix empties the database; reads refuse to delete
    txn = store_begin (store, false);
    assert_int_equal (store_del_prefix (txn, STORE_DB_NODES, "g", 1),
                      STORE_EINVAL);
    store_abort (&txn);
    txn = store_begin (store, true);
    assert_int_equal (store_del_prefix (txn, STORE_DB_NODES, NULL, 0), 3);
    assert_int_equal (store_count (txn, STORE_DB_NODES), 0);
    assert_int_equal (store_count (txn, STORE_DB_KEYS), count);
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);
}

static void
test_store_abort_discards (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);
    s_put_str (store, STORE_DB_JOBS, "keep", "old");

    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, "keep", 4, "new", 3), 0);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, "gone", 4, "x", 1), 0);
    assert_int_equal (store_del_prefix (txn, STORE_DB_JOBS, "k", 1), 1);
    //  Inside the transaction its own writes are visible
    const void *value;
    size_t size;
    assert_int_equal (store_get (txn, STORE_DB_JOBS, "gone", 4, &value, &size),
                      0);
    assert_int_equal (store_get (txn, STORE_DB_JOBS, "keep", 4, &value, &size),
                      STORE_ENOTFOUND);
    store_abort (&txn);

    s_expect_str (store, STORE_DB_JOBS, "keep", "old");
    s_expect_str (store, STORE_DB_JOBS, "gone", NULL);
    store_destroy (&store);
}

//  Writes 4 KiB values, one per transaction, until the map is full.
//  Returns how many were committed.
static uint32_t
s_fill_until_full (store_t *store, unsigned char *value, size_t size)
{
    uint32_t committed = 0;
    for (;;) {
        assert_true (committed < 100000);
        store_txn_t *txn = store_begin (store, true);
        assert_non_null (txn);
        unsigned char key[4];
        s_be32 (key, committed);
        s_fill_value (value, size, committed);
        int rc = store_put (txn, STORE_DB_RESULTS, key, sizeof key, value,
                            size);
        if (rc == 0)
            rc = store_commit (&txn);
        else {
            //  A failed transaction keeps failing, and commit aborts it
            assert_int_equal (rc, STORE_EFULL);
            assert_int_equal (store_put (txn, STORE_DB_JOBS, "k", 1, "v", 1),
                              STORE_EFULL);
            assert_int_equal (store_commit (&txn), STORE_EFULL);
            assert_null (txn);
            return committed;
        }
        if (rc == STORE_EFULL)
            return committed;
        assert_int_equal (rc, 0);
        committed++;
    }
}

static void
s_expect_values (store_t *store, uint32_t committed, unsigned char *value,
                 size_t size)
{
    store_txn_t *txn = store_begin (store, false);
    assert_non_null (txn);
    assert_int_equal (store_count (txn, STORE_DB_RESULTS), committed);
    for (uint32_t i = 0; i < committed; i++) {
        unsigned char key[4];
        s_be32 (key, i);
        s_fill_value (value, size, i);
        const void *stored;
        size_t stored_len;
        assert_int_equal (store_get (txn, STORE_DB_RESULTS, key, sizeof key,
                                     &stored, &stored_len),
                          0);
        assert_int_equal (stored_len, size);
        assert_memory_equal (stored, value, size);
    }
    store_abort (&txn);
}

static void
test_store_full_map (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, MIB);
    assert_false (store_can_grow (store));
    size_t size = 4096;
    unsigned char *value = malloc (size);
    assert_non_null (value);

    uint32_t committed = s_fill_until_full (store, value, size);
    assert_true (committed > 10);
    assert_true (committed * size < MIB);
    assert_string_equal (store_strerror (STORE_EFULL), "store is full");
    assert_true (strlen (store_last_error (store)) > 0);

    //  Also a whole transaction of puts that runs out is aborted whole
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < 1000; i++) {
        unsigned char key[4];
        s_be32 (key, committed + i);
        rc = store_put (txn, STORE_DB_RESULTS, key, sizeof key, value, size);
    }
    assert_int_equal (rc, STORE_EFULL);
    store_abort (&txn);

    //  Everything committed before reads back intact, and reads still work
    s_expect_values (store, committed, value, size);
    size_t map_bytes, used_bytes;
    store_usage (store, &map_bytes, &used_bytes);
    assert_int_equal (map_bytes, MIB);
    assert_true (used_bytes <= map_bytes);
    assert_true (used_bytes > MIB / 2);

    //  Deleting makes room again, for retention to work on a full store
    txn = store_begin (store, true);
    assert_non_null (txn);
    assert_int_equal (store_del_prefix (txn, STORE_DB_RESULTS, NULL, 0),
                      (int) committed);
    assert_int_equal (store_commit (&txn), 0);
    s_put_str (store, STORE_DB_JOBS, "after", "purge");
    store_destroy (&store);

    //  And the store opens again
    store = s_open (fixture, MIB, MIB);
    s_expect_str (store, STORE_DB_JOBS, "after", "purge");
    s_expect_values (store, 0, value, size);
    store_destroy (&store);
    free (value);
}

static void
test_store_growth (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 16 * MIB);
    assert_true (store_can_grow (store));
    size_t size = 4096;
    unsigned char *value = malloc (size);
    assert_non_null (value);

    //  One value per transaction: the map grows ahead of the writes
    uint32_t total = (uint32_t) (3 * MIB / 2 / size);
    for (uint32_t i = 0; i < total; i++) {
        store_txn_t *txn = store_begin (store, true);
        assert_non_null (txn);
        unsigned char key[4];
        s_be32 (key, i);
        s_fill_value (value, size, i);
        assert_int_equal (
            store_put (txn, STORE_DB_RESULTS, key, sizeof key, value, size),
            0);
        assert_int_equal (store_commit (&txn), 0);
    }
    size_t map_bytes, used_bytes;
    store_usage (store, &map_bytes, &used_bytes);
    assert_true (map_bytes > MIB);
    assert_true (map_bytes <= 16 * MIB);
    assert_true (used_bytes > 3 * MIB / 2);

    //  One transaction larger than the room left: it fails, is aborted and
    //  succeeds when replayed after the map grew (the caller's loop).
    uint32_t batch = (uint32_t) ((map_bytes - used_bytes) / size + 64);
    int attempts = 0;
    int rc;
    do {
        attempts++;
        assert_true (attempts <= 8);    //  One doubling per attempt
        store_txn_t *txn = store_begin (store, true);
        assert_non_null (txn);
        rc = 0;
        for (uint32_t i = total; rc == 0 && i < total + batch; i++) {
            unsigned char key[4];
            s_be32 (key, i);
            s_fill_value (value, size, i);
            rc = store_put (txn, STORE_DB_RESULTS, key, sizeof key, value,
                            size);
        }
        if (rc == 0)
            rc = store_commit (&txn);
        else
            store_abort (&txn);
        assert_true (rc == 0 || rc == STORE_EFULL);
    } while (rc == STORE_EFULL && store_can_grow (store));
    assert_int_equal (rc, 0);
    assert_true (attempts > 1);
    total += batch;
    s_expect_values (store, total, value, size);
    store_destroy (&store);

    //  Reopening with the small initial map still holds all the data
    store = s_open (fixture, MIB, 16 * MIB);
    s_expect_values (store, total, value, size);
    store_destroy (&store);

    //  Filling to the ceiling ends in STORE_EFULL, with nothing lost (sizes
    //  that are not whole pages are rounded: start up, ceiling down)
    store = s_open (fixture, MIB + 1, 16 * MIB + 100);
    for (int passes = 0;; passes++) {
        assert_true (passes < 1000);    //  16 MiB / 64 values, and retries
        store_txn_t *txn = store_begin (store, true);
        assert_non_null (txn);
        rc = 0;
        for (uint32_t i = total; rc == 0 && i < total + 64; i++) {
            unsigned char key[4];
            s_be32 (key, i);
            s_fill_value (value, size, i);
            rc = store_put (txn, STORE_DB_RESULTS, key, sizeof key, value,
                            size);
        }
        if (rc == 0)
            rc = store_commit (&txn);
        else
            store_abort (&txn);
        if (rc == 0)
            total += 64;
        else {
            assert_int_equal (rc, STORE_EFULL);
            if (!store_can_grow (store))
                break;
        }
    }
    store_usage (store, &map_bytes, NULL);
    assert_int_equal (map_bytes, 16 * MIB);
    s_expect_values (store, total, value, size);
    store_destroy (&store);
    free (value);
}

//  Rewrites the stored schema version to VERSION.
static void
s_set_schema (store_t *store, uint32_t version)
{
    unsigned char bytes[4];
    s_be32 (bytes, version);
    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (store_put (txn, STORE_DB_META, "schema_version", 14,
                                 bytes, sizeof bytes),
                      0);
    assert_int_equal (store_commit (&txn), 0);
}

static void
test_store_schema_version (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);
    s_put_str (store, STORE_DB_JOBS, "j-1", "job");
    //  Opening wrote this release as the last to open it
    store_txn_t *txn = store_begin (store, false);
    const void *value = NULL;
    size_t size = 0;
    assert_int_equal (store_get (txn, STORE_DB_META, "release", 7, &value,
                                 &size), 0);
    assert_int_equal (size, strlen (GRID_VERSION));
    assert_memory_equal (value, GRID_VERSION, size);
    store_abort (&txn);
    s_set_schema (store, 7);
    txn = store_begin (store, true);
    assert_int_equal (store_put (txn, STORE_DB_META, "release", 7, "9.1.0", 5),
                      0);
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);

    char err[512] = "";
    store = store_open (fixture->data, MIB, 0, err, sizeof err);
    assert_null (store);
    assert_non_null (strstr (err, "schema version 7 is newer than this "
                                  "release's"));
    assert_non_null (strstr (err, "written by release 9.1.0; install that "
                                  "release or a later one"));
    assert_non_null (strstr (err, fixture->data));
    //  Refused, and left as it was
    char again[512] = "";
    assert_null (store_open (fixture->data, MIB, 0, again, sizeof again));
    assert_string_equal (err, again);

    //  ERR may be left out
    assert_null (store_open (fixture->data, MIB, 0, NULL, 0));

    //  An older version is refused too (no upgrade exists)
    snprintf (fixture->data, sizeof fixture->data, "%s/old", fixture->dir);
    store = s_open (fixture, MIB, 0);
    s_set_schema (store, 0);
    store_destroy (&store);
    err[0] = '\0';
    assert_null (store_open (fixture->data, MIB, 0, err, sizeof err));
    assert_non_null (strstr (err, "schema version 0 is older"));
}

static void
test_store_bad_directory (void **state)
{
    s_fixture_t *fixture = *state;
    char file[sizeof fixture->dir + 8];
    snprintf (file, sizeof file, "%s/file", fixture->dir);
    FILE *handle = fopen (file, "w");
    assert_non_null (handle);
    fclose (handle);

    //  A directory below a plain file cannot be created
    char dir[sizeof file + 16];
    snprintf (dir, sizeof dir, "%s/sub/store", file);
    char err[256] = "";
    assert_null (store_open (dir, MIB, 0, err, sizeof err));
    assert_non_null (strstr (err, file));
    assert_non_null (strstr (err, "Not a directory"));

    //  Nor is a plain file a store directory
    err[0] = '\0';
    assert_null (store_open (file, MIB, 0, err, sizeof err));
    assert_non_null (strstr (err, "Not a directory"));

    err[0] = '\0';
    assert_null (store_open ("", MIB, 0, err, sizeof err));
    assert_true (strlen (err) > 0);

    //  Missing parents are created
    snprintf (dir, sizeof dir, "%s/a/b/c", fixture->dir);
    store_t *store = store_open (dir, MIB, 0, err, sizeof err);
    assert_non_null (store);
    store_destroy (&store);
}

static void
test_store_bad_keys (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 0);
    char key[STORE_MAX_KEY + 1];
    memset (key, 'k', sizeof key);

    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, key, 0, "v", 1),
                      STORE_EINVAL);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, NULL, 3, "v", 1),
                      STORE_EINVAL);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, key, sizeof key, "v", 1),
                      STORE_EINVAL);
    assert_int_equal (store_put (txn, STORE_DB_JOBS, key, 1, NULL, 1),
                      STORE_EINVAL);
    assert_int_equal (store_put (txn, STORE_DB_COUNT, key, 1, "v", 1),
                      STORE_EINVAL);
    assert_int_equal (store_get (txn, STORE_DB_JOBS, key, 0, NULL, NULL),
                      STORE_EINVAL);
    assert_int_equal (store_get (txn, STORE_DB_JOBS, key, sizeof key, NULL,
                                 NULL),
                      STORE_EINVAL);
    assert_int_equal (store_del (txn, STORE_DB_JOBS, key, sizeof key),
                      STORE_EINVAL);
    assert_int_equal (store_del (txn, STORE_DB_JOBS, key, 0), STORE_EINVAL);
    assert_int_equal (store_del_prefix (txn, STORE_DB_JOBS, key, sizeof key),
                      STORE_EINVAL);
    assert_null (store_cursor_new (txn, STORE_DB_COUNT));

    //  A bad argument does not spoil the transaction; the longest key works
    assert_int_equal (
        store_put (txn, STORE_DB_JOBS, key, STORE_MAX_KEY, "v", 1), 0);
    assert_int_equal (store_commit (&txn), 0);
    txn = store_begin (store, false);
    const void *value;
    size_t size;
    assert_int_equal (
        store_get (txn, STORE_DB_JOBS, key, STORE_MAX_KEY, &value, &size), 0);
    assert_int_equal (size, 1);
    store_abort (&txn);

    assert_int_equal (store_commit (NULL), STORE_EINVAL);
    assert_null (store_begin (NULL, false));
    store_destroy (&store);
}

//  A commit that fails (here by the test hook, as a full disk or an I/O
//  error would) lands nothing, says why, and leaves the store usable.
static void
test_store_failed_commit (void **state)
{
    s_fixture_t *fixture = *state;
    store_t *store = s_open (fixture, MIB, 4 * MIB);
    s_put_str (store, STORE_DB_JOBS, "kept", "before");
    store_test_fail_commits (store, STORE_EFULL, 2);

    //  A transaction that changes nothing commits: reads never fail
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    assert_int_equal (store_txn_changes (txn), 0);
    assert_int_equal (store_get (txn, STORE_DB_JOBS, "kept", 4, NULL, NULL),
                      0);
    assert_int_equal (store_commit (&txn), 0);
    txn = store_begin (store, false);
    assert_int_equal (store_commit (&txn), 0);

    for (int round = 0; round < 2; round++) {
        txn = store_begin (store, true);
        assert_non_null (txn);
        assert_int_equal (store_put (txn, STORE_DB_JOBS, "lost", 4, "x", 1),
                          0);
        assert_int_equal (store_del (txn, STORE_DB_JOBS, "kept", 4), 0);
        assert_int_equal (store_txn_changes (txn), 2);
        assert_int_equal (store_txn_failed (txn), 0);
        assert_int_equal (store_commit (&txn), STORE_EFULL);
        assert_null (txn);
        assert_non_null (strstr (store_last_error (store), "injected"));
    }
    //  Nothing of them landed; the third commit is a real one again
    s_expect_str (store, STORE_DB_JOBS, "kept", "before");
    txn = store_begin (store, false);
    assert_int_equal (store_get (txn, STORE_DB_JOBS, "lost", 4, NULL, NULL),
                      STORE_ENOTFOUND);
    store_abort (&txn);
    s_put_str (store, STORE_DB_JOBS, "after", "space");
    s_expect_str (store, STORE_DB_JOBS, "after", "space");

    //  I/O errors, for ever until cleared
    store_test_fail_commits (store, STORE_EIO, -1);
    for (int round = 0; round < 3; round++) {
        txn = store_begin (store, true);
        assert_int_equal (store_put (txn, STORE_DB_JOBS, "io", 2, "x", 1), 0);
        assert_int_equal (store_commit (&txn), STORE_EIO);
    }
    store_test_fail_commits (store, STORE_OK, 0);
    s_put_str (store, STORE_DB_JOBS, "io", "fine");
    s_expect_str (store, STORE_DB_JOBS, "io", "fine");

    //  A full map poisons the transaction it happens in
    store_destroy (&store);
    store = s_open (fixture, MIB, MIB);
    unsigned char *value = calloc (1, 4096);
    assert_non_null (value);
    txn = store_begin (store, true);
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < 1000; i++) {
        unsigned char key[4];
        s_be32 (key, i);
        rc = store_put (txn, STORE_DB_RESULTS, key, sizeof key, value, 4096);
    }
    assert_int_equal (rc, STORE_EFULL);
    assert_int_equal (store_txn_failed (txn), STORE_EFULL);
    assert_int_equal (store_commit (&txn), STORE_EFULL);
    free (value);

    //  What status shows
    store_info_t info;
    store_info (store, &info);
    assert_int_equal (info.map_bytes, MIB);
    assert_int_equal (info.max_bytes, MIB);
    assert_true (info.used_bytes > 0 && info.used_bytes <= MIB);
    assert_true (info.disk_bytes > 0);
    assert_true (info.disk_free_bytes <= info.disk_bytes);
    store_destroy (&store);
}

//  Fills the filesystem of PATH with the file PATH, then gives back all
//  but its last LEAVE bytes, so that about LEAVE bytes are free.
static void
s_fill_disk_leaving (const char *path, off_t leave)
{
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true (fd >= 0);
    char block[4096];
    memset (block, 0, sizeof block);
    off_t size = 0;
    while (true) {
        ssize_t written = write (fd, block, sizeof block);
        if (written <= 0)
            break;
        size += written;
    }
    assert_int_equal (ftruncate (fd, size > leave ? size - leave : 0), 0);
    close (fd);
}

//  A commit on a full disk is STORE_EFULL and says "No space left on
//  device", also when LMDB's write came back short (LMDB calls that
//  EIO), so the broker answers storage_full, not storage_error.
static void
test_store_full_disk (void **state)
{
    s_fixture_t *fixture = *state;
    if (geteuid () != 0) {
        fprintf (stderr, "    skipped: mounting a small tmpfs needs root\n");
        return;
    }
    char disk[PATH_MAX], data[PATH_MAX + 8], filler[PATH_MAX + 8];
    snprintf (disk, sizeof disk, "%s/disk", fixture->dir);
    snprintf (data, sizeof data, "%s/data", disk);
    snprintf (filler, sizeof filler, "%s/filler", disk);
    assert_int_equal (mkdir (disk, 0700), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m")) {
        fprintf (stderr, "    skipped: cannot mount a tmpfs: %s\n",
                 strerror (errno));
        return;
    }
    store_t *store = s_open_dir (data, 4 * MIB, 4 * MIB);
    unsigned char *value = calloc (1, 4096);
    assert_non_null (value);
    //  A little room, a little less, none: each commit that needs more
    //  than is left fails as full, never as an I/O error
    const off_t leaves[] = { 40960, 20480, 9000, 4096, 0 };
    uint32_t next = 0;
    for (size_t round = 0; round < sizeof leaves / sizeof leaves[0];
         round++) {
        s_fill_disk_leaving (filler, leaves[round]);
        store_txn_t *txn = store_begin (store, true);
        assert_non_null (txn);
        for (uint32_t i = 0; i < 64; i++, next++) {
            unsigned char key[4];
            s_be32 (key, next);
            s_fill_value (value, 4096, next);
            assert_int_equal (store_put (txn, STORE_DB_RESULTS, key,
                                         sizeof key, value, 4096), 0);
        }
        int rc = store_commit (&txn);
        if (rc != STORE_EFULL)
            fprintf (stderr, "    %lld bytes left: commit gave %s (%s)\n",
                     (long long) leaves[round], store_strerror (rc),
                     store_last_error (store));
        assert_int_equal (rc, STORE_EFULL);
        assert_non_null (strstr (store_last_error (store),
                                 "No space left on device"));
        assert_int_equal (unlink (filler), 0);
    }
    //  With the room back, the same writes land
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    unsigned char key[4];
    s_be32 (key, 7);
    s_fill_value (value, 4096, 7);
    assert_int_equal (store_put (txn, STORE_DB_RESULTS, key, sizeof key,
                                 value, 4096), 0);
    assert_int_equal (store_commit (&txn), 0);
    free (value);
    store_destroy (&store);
    assert_int_equal (umount2 (disk, MNT_DETACH), 0);
}

//  A second owner of a directory is refused with the first one's pid;
//  once the first lets go, the directory is free again.
static void
test_store_lock (void **state)
{
    s_fixture_t *fixture = *state;
    char err[512];
    store_lock_t *first = store_lock (fixture->data, "gridbroker",
                                      "data dir", err, sizeof err);
    assert_non_null (first);
    //  flock locks belong to the open file: a second open in this very
    //  process is refused like another process would be.
    store_lock_t *second = store_lock (fixture->data, "gridbroker",
                                       "data dir", err, sizeof err);
    assert_null (second);
    char expected[PATH_MAX + 100];
    snprintf (expected, sizeof expected,
              "data dir %s is in use by gridbroker pid %ld", fixture->data,
              (long) getpid ());
    assert_string_equal (err, expected);
    //  The store itself still opens in a locked directory (same owner).
    store_t *store = store_open (fixture->data, MIB, 0, err, sizeof err);
    assert_non_null (store);
    store_destroy (&store);
    store_unlock (&first);
    assert_null (first);
    store_unlock (&first);
    second = store_lock (fixture->data, "gridagent", "state dir", err,
                         sizeof err);
    assert_non_null (second);
    store_unlock (&second);
    //  A directory that cannot be made is a plain error.
    char blocked[PATH_MAX + 16];
    snprintf (blocked, sizeof blocked, "%s/owner.lock/sub", fixture->data);
    assert_null (store_lock (blocked, "gridagent", "state dir", err,
                             sizeof err));
    assert_non_null (strstr (err, "owner.lock"));
}

static void
test_store_strerror (void **state)
{
    const int codes[] = { STORE_OK, STORE_EIO, STORE_ENOTFOUND, STORE_EFULL,
                          STORE_EVERSION, STORE_EINVAL, -99 };
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *text = store_strerror (codes[i]);
        assert_non_null (text);
        assert_true (strlen (text) > 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal (text, store_strerror (codes[j]));
    }
    assert_string_equal (store_strerror (STORE_ENOTFOUND), "not found");
    assert_string_equal (store_last_error (NULL), "");
}

//  ---------------------------------------------------------------------
//  Migration

//  What the test steps saw: the transaction each ran in, and how often
static store_txn_t *s_step_txns[2];
static int s_step_runs[2];
static bool s_fail_second_step;

//  1 -> 2, rewrites: j-1's value in capitals, j-2 deleted
static int
s_step_rewrite (store_txn_t *txn, char *err, size_t err_len)
{
    s_step_txns[0] = txn;
    s_step_runs[0]++;
    if (store_put (txn, STORE_DB_JOBS, "j-1", 3, "ONE", 3) != 0
        || store_del (txn, STORE_DB_JOBS, "j-2", 3) != 0) {
        snprintf (err, err_len, "j-1 or j-2 is not there");
        return -1;
    }
    return 0;
}

//  2 -> 3, additive: a new key that says what the first step left
static int
s_step_add (store_txn_t *txn, char *err, size_t err_len)
{
    s_step_txns[1] = txn;
    s_step_runs[1]++;
    if (s_fail_second_step) {
        snprintf (err, err_len, "told to fail");
        return -1;
    }
    const void *value;
    size_t size;
    bool seen = store_get (txn, STORE_DB_JOBS, "j-1", 3, &value, &size) == 0
             && size == 3 && memcmp (value, "ONE", 3) == 0;
    const char *note = seen ? "after-one" : "before-one";
    return store_put (txn, STORE_DB_META, "added", 5, note, strlen (note))
               ? -1 : 0;
}

static const store_step_t s_steps[] = {
    { 1, "capitals for j-1, no more j-2", true, s_step_rewrite },
    { 2, "a note in meta", false, s_step_add },
};

static void
s_steps_reset (void)
{
    memset (s_step_txns, 0, sizeof s_step_txns);
    memset (s_step_runs, 0, sizeof s_step_runs);
    s_fail_second_step = false;
}

//  A store at schema 1 in the fixture's data dir, holding j-1 and j-2.
static void
s_make_v1 (s_fixture_t *fixture)
{
    store_t *store = s_open (fixture, MIB, 0);
    s_put_str (store, STORE_DB_JOBS, "j-1", "one");
    s_put_str (store, STORE_DB_JOBS, "j-2", "two");
    store_destroy (&store);
}

//  The path of the copy a migration keeps of the fixture's store
static void
s_copy_path (s_fixture_t *fixture, char *path, size_t path_len)
{
    if (snprintf (path, path_len, "%s/data.mdb.pre-v%s", fixture->data,
                  GRID_VERSION) >= (int) path_len)
        fail_msg ("path too long");
}

static bool
s_exists (const char *path)
{
    struct stat info;
    return lstat (path, &info) == 0;
}

//  Asserts that the store in DIR is at schema VERSION: it opens at that
//  target with nothing to migrate, and its meta record says so.
static void
s_expect_schema (const char *dir, uint32_t version)
{
    char err[512] = "";
    store_t *store = store_open_with (dir, MIB, 0, version, NULL, 0, err,
                                      sizeof err);
    if (!store)
        fail_msg ("open at schema %u: %s", (unsigned) version, err);
    assert_null (store_migration (store, 0));
    store_txn_t *txn = store_begin (store, false);
    const void *value;
    size_t size;
    assert_int_equal (store_get (txn, STORE_DB_META, "schema_version", 14,
                                 &value, &size), 0);
    assert_int_equal (size, 4);
    assert_int_equal (s_read_be32 (value), version);
    store_abort (&txn);
    store_destroy (&store);
}

//  The records of a schema 1 store as s_make_v1 left them
static void
s_expect_v1_records (const char *dir)
{
    s_expect_schema (dir, 1);
    store_t *store = s_open_dir (dir, MIB, 0);
    s_expect_str (store, STORE_DB_JOBS, "j-1", "one");
    s_expect_str (store, STORE_DB_JOBS, "j-2", "two");
    s_expect_str (store, STORE_DB_META, "added", NULL);
    store_destroy (&store);
}

//  Opens the single-file copy PATH as a store of its own: it is moved as
//  data.mdb into a new directory under the fixture's.
static void
s_expect_copy_holds_v1 (s_fixture_t *fixture, const char *path)
{
    char dir[PATH_MAX], file[PATH_MAX + 16];
    snprintf (dir, sizeof dir, "%s/copy", fixture->dir);
    snprintf (file, sizeof file, "%s/data.mdb", dir);
    assert_int_equal (mkdir (dir, 0700), 0);
    char command[3 * PATH_MAX];
    snprintf (command, sizeof command, "cp '%s' '%s'", path, file);
    assert_int_equal (system (command), 0);
    s_expect_v1_records (dir);
}

//  A store at schema 1 opened for schema 3: the copy first, then both
//  steps in one transaction with the new version; what was done is told
//  in order. Opened again, nothing more is done.
static void
test_store_migrate_runs_steps (void **state)
{
    s_fixture_t *fixture = *state;
    s_make_v1 (fixture);
    s_steps_reset ();
    char err[512] = "", copy[PATH_MAX];
    s_copy_path (fixture, copy, sizeof copy);
    store_t *store = store_open_with (fixture->data, MIB, 0, 3, s_steps, 2,
                                      err, sizeof err);
    if (!store)
        fail_msg ("store_open_with: %s", err);
    assert_int_equal (s_step_runs[0], 1);
    assert_int_equal (s_step_runs[1], 1);
    assert_ptr_equal (s_step_txns[0], s_step_txns[1]);
    char expected[PATH_MAX + 64];
    snprintf (expected, sizeof expected,
              "copied the store to %s before migrating it", copy);
    assert_string_equal (store_migration (store, 0), expected);
    assert_string_equal (store_migration (store, 1),
                         "migrated the store from schema 1 to 2: capitals "
                         "for j-1, no more j-2");
    assert_string_equal (store_migration (store, 2),
                         "migrated the store from schema 2 to 3: a note in "
                         "meta");
    assert_null (store_migration (store, 3));
    assert_null (store_migration (NULL, 0));
    //  The second step saw the first one's change: one transaction
    s_expect_str (store, STORE_DB_JOBS, "j-1", "ONE");
    s_expect_str (store, STORE_DB_JOBS, "j-2", NULL);
    s_expect_str (store, STORE_DB_META, "added", "after-one");
    store_destroy (&store);
    s_expect_schema (fixture->data, 3);

    //  The copy is one whole file, none half-written beside it
    struct stat before;
    assert_int_equal (lstat (copy, &before), 0);
    assert_true (S_ISREG (before.st_mode));
    char temp[PATH_MAX + 8];
    snprintf (temp, sizeof temp, "%s.tmp", copy);
    assert_false (s_exists (temp));
    s_expect_copy_holds_v1 (fixture, copy);

    //  At schema 3 already: nothing runs, the copy stays as it is
    s_steps_reset ();
    store = store_open_with (fixture->data, MIB, 0, 3, s_steps, 2, err,
                             sizeof err);
    assert_non_null (store);
    assert_null (store_migration (store, 0));
    assert_int_equal (s_step_runs[0] + s_step_runs[1], 0);
    store_destroy (&store);
    struct stat after;
    assert_int_equal (lstat (copy, &after), 0);
    assert_int_equal (before.st_ino, after.st_ino);
    assert_int_equal (before.st_mtime, after.st_mtime);

    //  ... and this release (schema 1) refuses it as newer
    err[0] = '\0';
    assert_null (store_open (fixture->data, MIB, 0, err, sizeof err));
    assert_non_null (strstr (err, "schema version 3 is newer than this "
                                  "release's"));
    assert_non_null (strstr (err, "written by release " GRID_VERSION));
}

//  A step that fails undoes the whole migration: the store stays at
//  schema 1 with its records; the copy stays too, and a retry keeps it.
static void
test_store_migrate_failure_undoes (void **state)
{
    s_fixture_t *fixture = *state;
    s_make_v1 (fixture);
    s_steps_reset ();
    s_fail_second_step = true;
    char err[512] = "", copy[PATH_MAX];
    s_copy_path (fixture, copy, sizeof copy);
    assert_null (store_open_with (fixture->data, MIB, 0, 3, s_steps, 2, err,
                                  sizeof err));
    assert_int_equal (s_step_runs[0], 1);
    assert_int_equal (s_step_runs[1], 1);
    assert_non_null (strstr (err, fixture->data));
    assert_non_null (strstr (err, "the migration from schema 2 to 3 (a note "
                                  "in meta) failed: told to fail; the store "
                                  "is left as it was, and its copy is kept "
                                  "as "));
    assert_non_null (strstr (err, copy));
    s_expect_v1_records (fixture->data);
    struct stat before;
    assert_int_equal (lstat (copy, &before), 0);
    s_expect_copy_holds_v1 (fixture, copy);

    //  The retry migrates, keeping the copy the first try made
    s_steps_reset ();
    store_t *store = store_open_with (fixture->data, MIB, 0, 3, s_steps, 2,
                                      err, sizeof err);
    if (!store)
        fail_msg ("retry: %s", err);
    char expected[PATH_MAX + 96];
    snprintf (expected, sizeof expected, "kept the copy %s that an earlier "
              "try made of the store before migrating it", copy);
    assert_string_equal (store_migration (store, 0), expected);
    assert_non_null (store_migration (store, 2));
    s_expect_str (store, STORE_DB_JOBS, "j-1", "ONE");
    store_destroy (&store);
    s_expect_schema (fixture->data, 3);
    struct stat after;
    assert_int_equal (lstat (copy, &after), 0);
    assert_int_equal (before.st_ino, after.st_ino);
}

//  Steps that only add need no copy.
static void
test_store_migrate_no_copy_without_rewrites (void **state)
{
    s_fixture_t *fixture = *state;
    s_make_v1 (fixture);
    s_steps_reset ();
    const store_step_t additive[] = {
        { 1, "nothing much", false, s_step_add },
        { 2, "nothing more", false, s_step_add },
    };
    char err[512] = "", copy[PATH_MAX];
    s_copy_path (fixture, copy, sizeof copy);
    store_t *store = store_open_with (fixture->data, MIB, 0, 3, additive, 2,
                                      err, sizeof err);
    if (!store)
        fail_msg ("store_open_with: %s", err);
    assert_string_equal (store_migration (store, 0),
                         "migrated the store from schema 1 to 2: nothing "
                         "much");
    assert_non_null (store_migration (store, 1));
    assert_null (store_migration (store, 2));
    s_expect_str (store, STORE_DB_JOBS, "j-1", "one");
    s_expect_str (store, STORE_DB_META, "added", "before-one");
    store_destroy (&store);
    assert_int_equal (s_step_runs[1], 2);
    assert_false (s_exists (copy));
    s_expect_schema (fixture->data, 3);
}

//  A file already at the copy's name is an earlier try's copy: kept as
//  it is, never written over. A .tmp file beside it is a copy cut short:
//  it never takes the name.
static void
test_store_migrate_keeps_existing_copy (void **state)
{
    s_fixture_t *fixture = *state;
    s_make_v1 (fixture);
    s_steps_reset ();
    char err[512] = "", copy[PATH_MAX], temp[PATH_MAX + 8];
    s_copy_path (fixture, copy, sizeof copy);
    snprintf (temp, sizeof temp, "%s.tmp", copy);
    FILE *file = fopen (copy, "w");
    assert_non_null (file);
    fputs ("an earlier copy", file);
    fclose (file);
    file = fopen (temp, "w");
    assert_non_null (file);
    fputs ("half", file);
    fclose (file);
    store_t *store = store_open_with (fixture->data, MIB, 0, 3, s_steps, 2,
                                      err, sizeof err);
    if (!store)
        fail_msg ("store_open_with: %s", err);
    assert_non_null (strstr (store_migration (store, 0), "kept the copy"));
    store_destroy (&store);
    char text[64] = "";
    file = fopen (copy, "r");
    assert_non_null (file);
    assert_non_null (fgets (text, sizeof text, file));
    fclose (file);
    assert_string_equal (text, "an earlier copy");

    //  Without the copy, the .tmp left by a try cut short is replaced
    snprintf (fixture->data, sizeof fixture->data, "%s/other", fixture->dir);
    s_make_v1 (fixture);
    s_copy_path (fixture, copy, sizeof copy);
    snprintf (temp, sizeof temp, "%s.tmp", copy);
    file = fopen (temp, "w");
    assert_non_null (file);
    fputs ("half", file);
    fclose (file);
    store = store_open_with (fixture->data, MIB, 0, 3, s_steps, 2, err,
                             sizeof err);
    if (!store)
        fail_msg ("store_open_with: %s", err);
    assert_non_null (strstr (store_migration (store, 0), "copied the store"));
    store_destroy (&store);
    assert_false (s_exists (temp));
    s_expect_copy_holds_v1 (fixture, copy);
}

//  A version no step leads from is refused, nothing touched, no copy.
static void
test_store_migrate_no_path (void **state)
{
    s_fixture_t *fixture = *state;
    s_make_v1 (fixture);
    s_steps_reset ();
    char err[512] = "", copy[PATH_MAX];
    s_copy_path (fixture, copy, sizeof copy);
    //  No step from 1
    assert_null (store_open_with (fixture->data, MIB, 0, 3, s_steps + 1, 1,
                                  err, sizeof err));
    assert_non_null (strstr (err, "schema version 1 is older than this "
                                  "release's (" GRID_VERSION " reads 3) and "
                                  "this release has no migration from "
                                  "schema 1: the store was last opened by "
                                  "release " GRID_VERSION " (this one leaves "
                                  "the store as it is)"));
    //  A step from 1, none from 2
    assert_null (store_open_with (fixture->data, MIB, 0, 3, s_steps, 1, err,
                                  sizeof err));
    assert_non_null (strstr (err, "no migration from schema 2 on the way "
                                  "to 3"));
    //  A table out of order
    const store_step_t backwards[] = { s_steps[1], s_steps[0] };
    assert_null (store_open_with (fixture->data, MIB, 0, 3, backwards, 2,
                                  err, sizeof err));
    assert_non_null (strstr (err, "out of order"));
    assert_int_equal (s_step_runs[0] + s_step_runs[1], 0);
    assert_false (s_exists (copy));
    s_expect_v1_records (fixture->data);

    //  Newer than the target: refused, naming the release
    s_make_v1 (fixture);
    store_t *store = s_open (fixture, MIB, 0);
    s_set_schema (store, 4);
    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (store_put (txn, STORE_DB_META, "release", 7, "7.0.0", 5),
                      0);
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);
    assert_null (store_open_with (fixture->data, MIB, 0, 3, s_steps, 2, err,
                                  sizeof err));
    assert_non_null (strstr (err, "schema version 4 is newer than this "
                                  "release's (" GRID_VERSION " reads 3): the "
                                  "store was written by release 7.0.0"));
    assert_int_equal (s_step_runs[0] + s_step_runs[1], 0);
    assert_false (s_exists (copy));
}

//  A schema record that is not 4 bytes is no grid store's: refused, and
//  left as it is.
static void
test_store_migrate_garbage_schema (void **state)
{
    s_fixture_t *fixture = *state;
    const size_t sizes[] = { 0, 1, 3, 5, 64 };
    char copy[PATH_MAX];
    s_copy_path (fixture, copy, sizeof copy);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        store_t *store = s_open (fixture, MIB, 0);
        unsigned char bytes[64];
        memset (bytes, 0, sizeof bytes);
        store_txn_t *txn = store_begin (store, true);
        assert_int_equal (store_put (txn, STORE_DB_META, "schema_version", 14,
                                     bytes, sizes[i]), 0);
        assert_int_equal (store_commit (&txn), 0);
        store_destroy (&store);
        s_steps_reset ();
        char err[512] = "";
        assert_null (store_open_with (fixture->data, MIB, 0, 3, s_steps, 2,
                                      err, sizeof err));
        char expected[128];
        snprintf (expected, sizeof expected, "schema version record is %zu "
                  "bytes long, not 4: this is not a grid store", sizes[i]);
        assert_non_null (strstr (err, expected));
        assert_null (store_open (fixture->data, MIB, 0, err, sizeof err));
        assert_non_null (strstr (err, expected));
        assert_int_equal (s_step_runs[0] + s_step_runs[1], 0);
        assert_false (s_exists (copy));
        //  A new store for the next round
        char command[PATH_MAX + 16];
        snprintf (command, sizeof command, "rm -rf '%s'", fixture->data);
        assert_int_equal (system (command), 0);
    }
}

//  A copy that cannot be written (a data dir this user may not write)
//  fails the open with the reason; the store stays at schema 1. As root,
//  the open runs in a child as the user nobody.
static void
test_store_migrate_read_only_dir (void **state)
{
    s_fixture_t *fixture = *state;
    s_make_v1 (fixture);
    s_steps_reset ();
    char copy[PATH_MAX];
    s_copy_path (fixture, copy, sizeof copy);
    char command[3 * PATH_MAX];
    const uid_t nobody = 65534;
    if (geteuid () == 0) {
        snprintf (command, sizeof command, "chown -R %u:%u '%s'",
                  (unsigned) nobody, (unsigned) nobody, fixture->data);
        assert_int_equal (system (command), 0);
        assert_int_equal (chmod (fixture->dir, 0711), 0);
    }
    assert_int_equal (chmod (fixture->data, 0500), 0);
    int pipe_fds[2];
    assert_int_equal (pipe (pipe_fds), 0);
    pid_t child = fork ();
    assert_true (child >= 0);
    if (child == 0) {
        close (pipe_fds[0]);
        if (geteuid () == 0 && (setgid (nobody) || setuid (nobody)))
            _exit (2);
        char err[512] = "";
        store_t *store = store_open_with (fixture->data, MIB, 0, 3, s_steps,
                                          2, err, sizeof err);
        if (write (pipe_fds[1], err, strlen (err)) < 0)
            _exit (3);
        _exit (store ? 1 : 0);
    }
    close (pipe_fds[1]);
    char err[512] = "";
    ssize_t size = read (pipe_fds[0], err, sizeof err - 1);
    close (pipe_fds[0]);
    err[size > 0 ? size : 0] = '\0';
    int status = -1;
    assert_int_equal (waitpid (child, &status, 0), child);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    assert_non_null (strstr (err, "cannot copy the store to "));
    assert_non_null (strstr (err, "Permission denied; the store is left as "
                                  "it was"));
    assert_int_equal (chmod (fixture->data, 0700), 0);
    assert_false (s_exists (copy));
    s_expect_v1_records (fixture->data);
}

//  A disk with no room for the copy: the open fails as full, the store
//  stays at schema 1, no copy nor part of one is left; with room again
//  the same open migrates.
static void
test_store_migrate_full_disk (void **state)
{
    s_fixture_t *fixture = *state;
    if (geteuid () != 0) {
        fprintf (stderr, "    skipped: mounting a small tmpfs needs root\n");
        return;
    }
    char disk[PATH_MAX], filler[PATH_MAX + 8];
    snprintf (disk, sizeof disk, "%s/disk", fixture->dir);
    snprintf (filler, sizeof filler, "%s/filler", disk);
    assert_int_equal (mkdir (disk, 0700), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m")) {
        fprintf (stderr, "    skipped: cannot mount a tmpfs: %s\n",
                 strerror (errno));
        return;
    }
    if (snprintf (fixture->data, sizeof fixture->data, "%s/data", disk)
        >= (int) sizeof fixture->data)
        fail_msg ("path too long");
    store_t *store = s_open (fixture, 2 * MIB, 0);
    s_put_str (store, STORE_DB_JOBS, "j-1", "one");
    s_put_str (store, STORE_DB_JOBS, "j-2", "two");
    //  About half a MiB of records for the copy to write
    unsigned char *value = calloc (1, 4096);
    assert_non_null (value);
    store_txn_t *txn = store_begin (store, true);
    for (uint32_t i = 0; i < 128; i++) {
        unsigned char key[4];
        s_be32 (key, i);
        s_fill_value (value, 4096, i);
        assert_int_equal (store_put (txn, STORE_DB_RESULTS, key, sizeof key,
                                     value, 4096), 0);
    }
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);
    char copy[PATH_MAX], temp[PATH_MAX + 8];
    s_copy_path (fixture, copy, sizeof copy);
    snprintf (temp, sizeof temp, "%s.tmp", copy);

    s_fill_disk_leaving (filler, 64 * 1024);
    s_steps_reset ();
    char err[512] = "";
    assert_null (store_open_with (fixture->data, 2 * MIB, 0, 3, s_steps, 2,
                                  err, sizeof err));
    assert_non_null (strstr (err, "cannot copy the store to "));
    assert_non_null (strstr (err, "No space left on device; the store is "
                                  "left as it was"));
    assert_int_equal (s_step_runs[0] + s_step_runs[1], 0);
    assert_false (s_exists (copy));
    assert_false (s_exists (temp));
    assert_int_equal (unlink (filler), 0);
    s_expect_v1_records (fixture->data);
    store = s_open (fixture, 2 * MIB, 0);
    s_expect_values (store, 128, value, 4096);
    store_destroy (&store);

    //  With room, the same open migrates
    store = store_open_with (fixture->data, 2 * MIB, 0, 3, s_steps, 2, err,
                             sizeof err);
    if (!store)
        fail_msg ("with room: %s", err);
    store_destroy (&store);
    s_expect_schema (fixture->data, 3);
    assert_true (s_exists (copy));
    free (value);
    assert_int_equal (umount2 (disk, MNT_DETACH), 0);
}

//  A migration that outgrows the map grows it (up to the ceiling) and
//  runs again from the start.
static int
s_step_big (store_txn_t *txn, char *err, size_t err_len)
{
    s_step_runs[0]++;
    unsigned char value[4096];
    memset (value, 'x', sizeof value);
    for (uint32_t i = 0; i < 512; i++) {
        unsigned char key[4];
        s_be32 (key, i);
        if (store_put (txn, STORE_DB_OUTPUTS, key, sizeof key, value,
                       sizeof value))
            return -1;
    }
    return 0;
}

static void
test_store_migrate_grows_map (void **state)
{
    s_fixture_t *fixture = *state;
    s_make_v1 (fixture);
    s_steps_reset ();
    const store_step_t big[] = { { 1, "2 MiB of outputs", false, s_step_big } };
    char err[512] = "";
    //  A map at its ceiling: full, and nothing of it lands
    assert_null (store_open_with (fixture->data, MIB, MIB, 2, big, 1, err,
                                  sizeof err));
    assert_non_null (strstr (err, "the migration from schema 1 to 2 (2 MiB "
                                  "of outputs) failed: store is full"));
    assert_int_equal (s_step_runs[0], 1);
    s_expect_v1_records (fixture->data);
    //  A map that may grow: it does, and the step runs again
    s_steps_reset ();
    store_t *store = store_open_with (fixture->data, MIB, 16 * MIB, 2, big,
                                      1, err, sizeof err);
    if (!store)
        fail_msg ("growing: %s", err);
    assert_true (s_step_runs[0] >= 2);
    store_txn_t *read = store_begin (store, false);
    assert_int_equal (store_count (read, STORE_DB_OUTPUTS), 512);
    store_abort (&read);
    store_destroy (&store);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_store_put_get_del, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_key_order, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_reopen_keeps_data,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_cursor_seek_prefix,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_del_prefix, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_abort_discards, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_full_map, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_growth, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_schema_version, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_bad_directory, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_bad_keys, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_failed_commit, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_full_disk, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_lock, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_runs_steps,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_failure_undoes,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_no_copy_without_rewrites,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_keeps_existing_copy,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_no_path,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_garbage_schema,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_read_only_dir,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_full_disk,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_store_migrate_grows_map,
                                         s_setup, s_teardown),
        cmocka_unit_test (test_store_strerror),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
