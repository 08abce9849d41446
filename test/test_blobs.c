/*  =========================================================================
    test_blobs - the broker's blob store (blobs), who is sent chunks
    when (blobserve), and the chunks counted per blob (stats)
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../broker/blobs.h"
#include "../broker/blobserve.h"
#include "../broker/stats.h"

#define S_SIZE (BLOBS_CHUNK * 2 + 100)

static store_t *
s_store (char *dir)
{
    strcpy (dir, "/tmp/grid-blobs-XXXXXX");
    assert_non_null (mkdtemp (dir));
    char err [256];
    store_t *store = store_open (dir, 1 << 20, 64 << 20, err, sizeof err);
    assert_non_null (store);
    return store;
}

//  Pieces in order make a blob; again, nothing is stored; a piece off the
//  received end is refused; the size limit; a read of each chunk
static void
test_blobs_pieces_dedup_limit (void **state)
{
    char dir [64], sha [SHA256_HEX], err [256];
    store_t *store = s_store (dir);
    store_txn_t *txn = store_begin (store, true);
    uint8_t *data = malloc (S_SIZE);
    assert_non_null (data);
    for (size_t at = 0; at < S_SIZE; at++)
        data [at] = (uint8_t) (at * 7);
    sha256_hex (data, S_SIZE, sha);
    blobs_info_t info;
    bool stored = false;
    assert_int_equal (blobs_put_piece (txn, sha, S_SIZE, 0, data,
                                       BLOBS_CHUNK, 1 << 20, 1000, &info,
                                       &stored, err, sizeof err), 0);
    assert_true (stored);
    assert_int_equal (info.received, BLOBS_CHUNK);
    //  Not where the received bytes end
    assert_int_equal (blobs_put_piece (txn, sha, S_SIZE, 2 * BLOBS_CHUNK,
                                       data, 100, 1 << 20, 1000, &info,
                                       &stored, err, sizeof err),
                      BLOBS_EOFFSET);
    assert_non_null (strstr (err, "goes on at offset 262144"));
    //  The first piece again (a retry): nothing stored
    assert_int_equal (blobs_put_piece (txn, sha, S_SIZE, 0, data,
                                       BLOBS_CHUNK, 1 << 20, 1000, &info,
                                       &stored, err, sizeof err), 0);
    assert_false (stored);
    //  A short piece in the middle
    assert_int_equal (blobs_put_piece (txn, sha, S_SIZE, BLOBS_CHUNK, data,
                                       10, 1 << 20, 1000, &info, &stored,
                                       err, sizeof err), BLOBS_EBAD);
    assert_int_equal (blobs_put_piece (txn, sha, S_SIZE, BLOBS_CHUNK,
                                       data + BLOBS_CHUNK, BLOBS_CHUNK,
                                       1 << 20, 1000, &info, &stored, err,
                                       sizeof err), 0);
    assert_int_equal (blobs_put_piece (txn, sha, S_SIZE, 2 * BLOBS_CHUNK,
                                       data + 2 * BLOBS_CHUNK, 100, 1 << 20,
                                       1000, &info, &stored, err,
                                       sizeof err), 0);
    assert_int_equal (info.received, S_SIZE);
    //  Whole: a new upload stores nothing
    assert_int_equal (blobs_put_piece (txn, sha, S_SIZE, 0, data,
                                       BLOBS_CHUNK, 1 << 20, 2000, &info,
                                       &stored, err, sizeof err), 0);
    assert_false (stored);
    const void *chunk = NULL;
    size_t len = 0;
    assert_int_equal (blobs_read (txn, sha, 2 * BLOBS_CHUNK, &chunk, &len),
                      0);
    assert_int_equal (len, 100);
    assert_memory_equal (chunk, data + 2 * BLOBS_CHUNK, 100);
    assert_int_equal (blobs_read (txn, sha, 3 * BLOBS_CHUNK, &chunk, &len),
                      STORE_ENOTFOUND);
    //  Over the limit; a bad name
    assert_int_equal (blobs_put_piece (txn, sha, 2 << 20, 0, data,
                                       BLOBS_CHUNK, 1 << 20, 1000, &info,
                                       &stored, err, sizeof err),
                      BLOBS_ETOO_LARGE);
    assert_non_null (strstr (err, "blobs.max_size"));
    assert_int_equal (blobs_put_piece (txn, "../../etc", 1, 0, data, 1,
                                       1 << 20, 1000, &info, &stored, err,
                                       sizeof err), BLOBS_EBAD);
    assert_false (blobs_name_valid ("ABCDEF"));
    assert_int_equal (blobs_stat (txn, "../x", &info), STORE_ENOTFOUND);
    assert_int_equal (store_commit (&txn), 0);
    free (data);
    store_destroy (&store);
}

//  A content whose digest is not its name is not kept; the purge of
//  unused blobs; delete
static void
test_blobs_mismatch_purge_delete (void **state)
{
    char dir [64], err [256];
    store_t *store = s_store (dir);
    store_txn_t *txn = store_begin (store, true);
    const char *liar =
        "0000000000000000000000000000000000000000000000000000000000000000";
    blobs_info_t info;
    bool stored = false;
    assert_int_equal (blobs_put_piece (txn, liar, 4, 0, "test", 4, 1 << 20,
                                       1000, &info, &stored, err, sizeof err),
                      BLOBS_EMISMATCH);
    assert_int_equal (blobs_stat (txn, liar, &info), STORE_ENOTFOUND);
    char old [SHA256_HEX], fresh [SHA256_HEX];
    sha256_hex ("old", 3, old);
    sha256_hex ("fresh", 5, fresh);
    assert_int_equal (blobs_put_piece (txn, old, 3, 0, "old", 3, 1 << 20,
                                       1000, &info, &stored, err, sizeof err),
                      0);
    assert_int_equal (blobs_put_piece (txn, fresh, 5, 0, "fresh", 5,
                                       1 << 20, 5000, &info, &stored, err,
                                       sizeof err), 0);
    assert_int_equal (blobs_purge (txn, 2000), 1);
    assert_int_equal (blobs_stat (txn, old, &info), STORE_ENOTFOUND);
    assert_int_equal (blobs_stat (txn, fresh, &info), 0);
    assert_int_equal (blobs_delete (txn, fresh), 0);
    assert_int_equal (blobs_delete (txn, fresh), STORE_ENOTFOUND);
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);
}

//  At most MAX nodes fetch at once; the others wait, oldest first; a
//  node's next chunks go at once; done or silent, a node frees its place
static void
test_blobs_serve_limit (void **state)
{
    blobserve_t *serve = blobserve_new (2);
    assert_non_null (serve);
    const char *sha = "ab";
    blobserve_item_t item;
    assert_int_equal (blobserve_ask (serve, "n1", sha, 0, 100), 0);
    assert_int_equal (blobserve_ask (serve, "n2", sha, 0, 100), 0);
    assert_int_equal (blobserve_ask (serve, "n3", sha, 0, 100), 0);
    assert_true (blobserve_next (serve, &item, 100));
    assert_string_equal (item.node, "n1");
    assert_true (blobserve_next (serve, &item, 100));
    assert_string_equal (item.node, "n2");
    assert_false (blobserve_next (serve, &item, 100));
    assert_int_equal (blobserve_inflight (serve), 2);
    assert_int_equal (blobserve_waiting (serve), 1);
    //  n1 goes on at once; n3 still waits
    assert_int_equal (blobserve_ask (serve, "n1", sha, 262144, 200), 1);
    assert_false (blobserve_next (serve, &item, 200));
    //  n1 done: n3's turn
    blobserve_forget (serve, "n1");
    assert_true (blobserve_next (serve, &item, 300));
    assert_string_equal (item.node, "n3");
    //  n2 silent past the stale time: its place is free
    assert_int_equal (blobserve_ask (serve, "n4", sha, 0, 300), 0);
    blobserve_expire (serve, 300 + BLOBSERVE_STALE_MS);
    assert_true (blobserve_next (serve, &item, 300 + BLOBSERVE_STALE_MS));
    assert_string_equal (item.node, "n4");
    //  A forgotten waiter is skipped
    assert_int_equal (blobserve_ask (serve, "n5", sha, 0, 400), 0);
    blobserve_forget (serve, "n5");
    blobserve_forget (serve, "n3");
    assert_false (blobserve_next (serve, &item, 500));
    assert_int_equal (blobserve_waiting (serve), 0);
    blobserve_destroy (&serve);
    assert_null (serve);
    blobserve_destroy (&serve);
}

//  The chunks sent per blob: counted per name, forgotten with the blob
static void
test_blobs_chunk_figures (void **state)
{
    broker_stats_t *stats = broker_stats_new (0);
    assert_non_null (stats);
    char one [SHA256_HEX], two [SHA256_HEX];
    sha256_hex ("one", 3, one);
    sha256_hex ("two", 3, two);
    assert_int_equal (broker_stats_blob_chunks (stats, one), 0);
    broker_stats_blob_sent (stats, one);
    broker_stats_blob_sent (stats, one);
    broker_stats_blob_sent (stats, two);
    assert_int_equal (broker_stats_blob_chunks (stats, one), 2);
    assert_int_equal (broker_stats_blob_chunks (stats, two), 1);
    broker_stats_blob_forget (stats, one);
    broker_stats_blob_forget (stats, one);
    assert_int_equal (broker_stats_blob_chunks (stats, one), 0);
    assert_int_equal (broker_stats_blob_chunks (stats, two), 1);
    broker_stats_destroy (&stats);
    assert_null (stats);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_blobs_pieces_dedup_limit),
        cmocka_unit_test (test_blobs_mismatch_purge_delete),
        cmocka_unit_test (test_blobs_serve_limit),
        cmocka_unit_test (test_blobs_chunk_figures),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
