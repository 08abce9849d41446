/*  =========================================================================
    test_it_qa_clock - a broker restarted with its clock behind the jobs
    it keeps (a host whose clock was stepped back while the broker was
    down): the ids of new jobs still sort after every stored one, so no
    kept job's id is made again and none of its records is replaced.
    The stored store is made to hold a job a day ahead of the clock,
    which is what a clock a day behind looks like to the broker.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/names.h"
#include "../proto/pv.h"
#include "../proto/pw.h"
#include "../store/store.h"
#include "lib/fixture.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

//  Copies the stored header of job FROM under the id TO (its "id" field
//  too), in the broker's store under DATA_DIR (the broker is stopped).
static void
s_store_copy_job (const char *data_dir, const char *from, const char *to)
{
    char err [256] = "";
    store_t *store = store_open (data_dir, 0, 0, err, sizeof err);
    if (!store)
        fail_msg ("store_open %s: %s", data_dir, err);
    store_txn_t *txn = store_begin (store, true);
    assert_non_null (txn);
    const void *value = NULL;
    size_t value_len = 0;
    assert_int_equal (store_get (txn, STORE_DB_JOBS, from, strlen (from),
                                 &value, &value_len), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (value, value_len, &doc, NULL, 0), 0);
    const pv_t *header = pv_doc_root (doc);
    pw_t *writer = pw_new ();
    pw_map (writer, pv_size (header));
    for (size_t index = 0; index < pv_size (header); index++) {
        const pv_t *key = pv_map_key_at (header, index);
        pw_pv (writer, key);
        if (pv_str_eq (key, "id"))
            pw_str (writer, to);
        else
            pw_pv (writer, pv_map_value_at (header, index));
    }
    assert_int_equal (store_put (txn, STORE_DB_JOBS, to, strlen (to),
                                 pw_data (writer), pw_size (writer)), 0);
    assert_int_equal (store_commit (&txn), 0);
    pw_destroy (&writer);
    pv_doc_destroy (&doc);
    store_destroy (&store);
}

static void
test_it_qa_clock_ids_never_go_back (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    const char *yaml = "target: all\n"
                       "tasks:\n"
                       "  - {backend: test, action: echo, params: {msg: hi}}\n";
    char *first = grid_submit_id (grid, yaml);
    assert_non_null (first);
    pv_doc_t *record = grid_wait_job (grid, first, S_WAIT_MS);
    assert_non_null (record);
    pv_doc_destroy (&record);
    grid_stop_broker (grid, false);

    //  A job a day ahead of the clock, at sequence 5 of its millisecond
    int64_t last_ms = 0;
    uint32_t seq = 0;
    char ahead [JOB_ID_LEN + 1];
    for (int index = 0; index < 6; index++)
        job_id_make (zclock_time () + 86400000LL, &last_ms, &seq, ahead,
                     sizeof ahead);
    char data_dir [300];
    snprintf (data_dir, sizeof data_dir, "%s/broker-data", grid->dir);
    s_store_copy_job (data_dir, first, ahead);

    assert_int_equal (grid_start_broker (grid, NULL), 0);
    assert_true (grid_wait_node (grid, "web-01", "online", S_WAIT_MS));
    char *next = grid_submit_id (grid, yaml);
    assert_non_null (next);
    if (strcmp (next, ahead) <= 0)
        fail_msg ("new job %s does not sort after the stored %s", next,
                  ahead);
    record = grid_wait_job (grid, next, S_WAIT_MS);
    assert_non_null (record);
    pv_doc_destroy (&record);
    //  The stored job a day ahead is still the one it was
    pv_doc_t *reply = grid_call (grid, "job.get", "job", ahead, NULL);
    assert_true (grid_str_is (fixture_data (reply), "id", ahead));
    assert_true (grid_str_is (fixture_data (reply), "status", "completed"));
    pv_doc_destroy (&reply);
    free (next);
    free (first);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_qa_clock_ids_never_go_back,
                                         fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
