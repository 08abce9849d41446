/*  =========================================================================
    test_dlq - the dead-letter queue's store layout: entries land once,
    read back in the client shape, are marked by a retry and cleared by
    it, and purged by job or age. Links between a job and its retries
    survive the header's round trip.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../broker/dlq.h"
#include "../broker/jobrec.h"
#include "../proto/conf.h"

typedef struct {
    char dir [64];
    store_t *store;
    store_txn_t *txn;
    pw_t *scratch;
} fixture_t;

static int
s_setup (void **state)
{
    fixture_t *fixture = (fixture_t *) calloc (1, sizeof (fixture_t));
    strcpy (fixture->dir, "/tmp/grid-dlq-XXXXXX");
    if (!mkdtemp (fixture->dir))
        return -1;
    char err [256];
    fixture->store = store_open (fixture->dir, 1 << 20, 64 << 20, err,
                                 sizeof err);
    if (!fixture->store)
        return -1;
    fixture->txn = store_begin (fixture->store, true);
    fixture->scratch = pw_new ();
    *state = fixture;
    return 0;
}

static int
s_teardown (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    store_abort (&fixture->txn);
    store_destroy (&fixture->store);
    pw_destroy (&fixture->scratch);
    char command [128];
    snprintf (command, sizeof command, "rm -rf %s", fixture->dir);
    if (system (command) != 0)
        return -1;
    free (fixture);
    return 0;
}

//  An `any` job of one apt install step whose node web-02 failed twice.
static sched_job_t *
s_job (const char *id, const char *error)
{
    const char *yaml =
        "target: any:group:web\n"
        "tasks: [{backend: apt, action: install, max_retries: 1,\n"
        "         params: {package: nginx}}]\n";
    pv_doc_t *doc = NULL;
    char err [256];
    assert_int_equal (conf_parse (yaml, strlen (yaml), &doc, err, sizeof err), 0);
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    assert_int_equal (job_spec_decode (pv_doc_root (doc), &spec, &errors), 0);
    pv_doc_destroy (&doc);
    assert_true (spec->dead_letter);
    sched_job_t *job = sched_job_new (id, &spec);
    job->status = SCHED_JOB_FAILED;
    job->expected_count = 1;
    job->expected = (char **) calloc (1, sizeof (char *));
    job->expected [0] = strdup ("web-02");
    job->cells = (sched_cell_t *) calloc (1, sizeof (sched_cell_t));
    sched_cell_t *cell = &job->cells [0];
    cell->status = SCHED_CELL_FAILED;
    cell->attempt = 2;
    cell->attempt_count = 2;
    cell->attempts = (sched_attempt_t *) calloc (2, sizeof (sched_attempt_t));
    for (int index = 0; index < 2; index++)
        cell->attempts [index] = (sched_attempt_t) {
            (uint32_t) index + 1, SCHED_CELL_FAILED, strdup (""),
            strdup (error), 100, 5, false, NULL, 0, NULL, false,
                                            0, 0, 0, 0, false, 0, 0, 0};
    return job;
}

static void
test_dlq_entry_lands_once_in_client_shape (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    //  A long error keeps its end, cut on a character boundary
    char *error = (char *) malloc (DLQ_TEXT_MAX + 100);
    memset (error, 'x', DLQ_TEXT_MAX + 99);
    memcpy (error, "\xc3\xa9\xc3\xa9", 4);
    strcpy (error + DLQ_TEXT_MAX + 80, "E: no such package");
    sched_job_t *job = s_job ("j-0193a1b2c3d4-0001", error);
    free (error);
    assert_true (dlq_status_lands (SCHED_CELL_FAILED));
    assert_true (dlq_status_lands (SCHED_CELL_LOST));
    assert_false (dlq_status_lands (SCHED_CELL_CANCELLED));
    assert_false (dlq_status_lands (SCHED_CELL_SKIPPED));
    assert_false (dlq_status_lands (SCHED_CELL_RETRY_WAIT));
    assert_int_equal (dlq_add (fixture->txn, job, 0, "web-02", 1000,
                               fixture->scratch), 1);
    //  The second landing of the same cell changes nothing
    assert_int_equal (dlq_add (fixture->txn, job, 0, "web-02", 2000,
                               fixture->scratch), 0);
    assert_int_equal (dlq_add (fixture->txn, job, 0, "db-01", 2000,
                               fixture->scratch), STORE_EINVAL);
    assert_int_equal (dlq_size (fixture->txn), 1);
    assert_true (dlq_has_job (fixture->txn, job->id));
    assert_false (dlq_has_job (fixture->txn, "j-0193a1b2c3d4-0002"));

    pv_doc_t *doc = NULL;
    assert_int_equal (dlq_get (fixture->txn, job->id, 0, "web-02", &doc), 0);
    pw_t *writer = pw_new ();
    assert_int_equal (dlq_write_entry (pv_doc_root (doc), writer), 0);
    pv_doc_destroy (&doc);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *entry = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (entry, "id"),
                            "j-0193a1b2c3d4-0001/0/web-02"));
    assert_true (pv_str_eq (pv_map_get (entry, "action"), "install"));
    assert_true (pv_str_eq (pv_map_get (entry, "status"), "failed"));
    assert_true (pv_str_eq (pv_map_get (entry, "time"),
                            "1970-01-01T00:00:01.000Z"));
    int64_t attempts = 0, exit_code = 0;
    pv_get_int (pv_map_get (entry, "attempts"), &attempts);
    pv_get_int (pv_map_get (entry, "exit_code"), &exit_code);
    assert_int_equal (attempts, 2);
    assert_int_equal (exit_code, 100);
    size_t len = 0;
    const char *kept = pv_str (pv_map_get (entry, "error"), &len);
    assert_true (len <= DLQ_TEXT_MAX);
    assert_true (len > DLQ_TEXT_MAX - 4);
    assert_int_equal (memcmp (kept + len - 18, "E: no such package", 18), 0);
    assert_true (((uint8_t) kept [0] & 0xC0) != 0x80);
    assert_null (pv_map_get (entry, "retry_job"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    sched_job_destroy (&job);
}

static void
test_dlq_ids_parse_strictly (void **state)
{
    char job [JOB_ID_LEN + 1], node [NAME_MAX_LEN + 1];
    uint32_t step = 0;
    assert_int_equal (dlq_id_parse ("j-0193a1b2c3d4-0001/12/web-02", job,
                                    &step, node), 0);
    assert_string_equal (job, "j-0193a1b2c3d4-0001");
    assert_int_equal (step, 12);
    assert_string_equal (node, "web-02");
    const char *bad [] = {
        "", "j-0193a1b2c3d4-0001", "j-0193a1b2c3d4-0001/0", "x/0/web-01",
        "j-0193a1b2c3d4-0001//web-01", "j-0193a1b2c3d4-0001/1a/web-01",
        "j-0193a1b2c3d4-0001/1024/web-01", "j-0193a1b2c3d4-0001/0/web/01",
        "j-0193a1b2c3d4-0001/0/", "j-0193a1b2c3d4-0001/999999/web-01",
        "j-0193a1b2c3d4-0001/0/../../etc", NULL};
    for (int index = 0; bad [index]; index++)
        assert_int_equal (dlq_id_parse (bad [index], job, &step, node), -1);
    assert_int_equal (dlq_id_parse (NULL, job, &step, node), -1);
}

static void
test_dlq_retry_marks_and_clears (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ("j-0193a1b2c3d4-0001", "boom");
    sched_job_t *other = s_job ("j-0193a1b2c3d4-0002", "bang");
    assert_int_equal (dlq_add (fixture->txn, job, 0, "web-02", 1000,
                               fixture->scratch), 1);
    assert_int_equal (dlq_add (fixture->txn, other, 0, "web-02", 5000,
                               fixture->scratch), 1);
    assert_int_equal (dlq_mark_retry (fixture->txn, job->id,
                                      "j-0193a1b2c3d4-0009", fixture->scratch), 1);
    //  A later retry replaces the mark
    assert_int_equal (dlq_mark_retry (fixture->txn, job->id,
                                      "j-0193a1b2c3d4-000a", fixture->scratch), 1);
    pv_doc_t *doc = NULL;
    assert_int_equal (dlq_get (fixture->txn, job->id, 0, "web-02", &doc), 0);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "retry_job"),
                            "j-0193a1b2c3d4-000a"));
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "error"), "boom"));
    pv_doc_destroy (&doc);
    //  The older retry completing clears nothing; the newer one does
    assert_int_equal (dlq_clear_retried (fixture->txn, job->id,
                                         "j-0193a1b2c3d4-0009"), 0);
    assert_int_equal (dlq_clear_retried (fixture->txn, job->id,
                                         "j-0193a1b2c3d4-000a"), 1);
    assert_int_equal (dlq_size (fixture->txn), 1);

    //  The list names every entry, the filter one job's
    pw_t *writer = pw_new ();
    size_t total = 0;
    dlq_write_list (fixture->txn, NULL, 10, writer, &total);
    assert_int_equal (total, 1);
    pw_reset (writer);
    dlq_write_list (fixture->txn, job->id, 10, writer, &total);
    assert_int_equal (total, 0);

    //  Purge by age: only entries at or before the cutoff
    assert_int_equal (dlq_add (fixture->txn, job, 0, "web-02", 1000,
                               fixture->scratch), 1);
    assert_int_equal (dlq_purge (fixture->txn, NULL, 2000), 1);
    assert_int_equal (dlq_size (fixture->txn), 1);
    assert_int_equal (dlq_purge (fixture->txn, other->id, 0), 1);
    assert_int_equal (dlq_size (fixture->txn), 0);
    pw_destroy (&writer);
    sched_job_destroy (&job);
    sched_job_destroy (&other);
}

static void
test_dlq_retry_links_survive_the_header (void **state)
{
    fixture_t *fixture = (fixture_t *) *state;
    sched_job_t *job = s_job ("j-0193a1b2c3d4-0001", "boom");
    job->retry_of = strdup ("j-0193a1b2c3d4-0000");
    job->retried_by = (char **) calloc (2, sizeof (char *));
    job->retried_by [0] = strdup ("j-0193a1b2c3d4-0005");
    job->retried_by [1] = strdup ("j-0193a1b2c3d4-0007");
    job->retried_by_count = 2;
    assert_int_equal (jobrec_save_header (fixture->txn, job, fixture->scratch), 0);
    sched_job_t *copy = NULL;
    assert_int_equal (jobrec_load (fixture->txn, job->id, &copy), 0);
    assert_string_equal (copy->retry_of, "j-0193a1b2c3d4-0000");
    assert_int_equal (copy->retried_by_count, 2);
    assert_string_equal (copy->retried_by [1], "j-0193a1b2c3d4-0007");
    assert_true (copy->spec->dead_letter);
    pw_t *writer = pw_new ();
    assert_int_equal (jobrec_write_record (fixture->txn, job->id, NULL, NULL, false, writer), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *record = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (record, "retry_of"),
                            "j-0193a1b2c3d4-0000"));
    assert_int_equal (pv_size (pv_map_get (record, "retried_by")), 2);
    bool dead_letter = false;
    assert_int_equal (pv_get_bool (pv_map_get (record, "dead_letter"),
                                   &dead_letter), 0);
    assert_true (dead_letter);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    sched_job_destroy (&copy);
    sched_job_destroy (&job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_dlq_entry_lands_once_in_client_shape, s_setup, s_teardown),
        cmocka_unit_test (test_dlq_ids_parse_strictly),
        cmocka_unit_test_setup_teardown (test_dlq_retry_marks_and_clears, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_dlq_retry_links_survive_the_header, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
