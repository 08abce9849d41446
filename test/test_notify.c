/*  =========================================================================
    test_notify - job notifications without a network: the `notify:`
    configuration and its errors, the allow-list check of a job's
    webhooks, ids, shown URLs, the signature, the backoff, and the
    deliveries a job's end queues in a store (which ends each webhook
    wants, the payload, list, retry and prune).
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../broker/notify.h"
#include "../broker/notify_post.h"
#include "../proto/conf.h"

//  Loads TEXT (YAML) as a broker config's notify: part. Returns 0, or -1
//  with WHY.
static int
s_load (const char *text, notify_config_t *config, char *why, size_t size)
{
    pv_doc_t *doc = NULL;
    char err [256];
    assert_int_equal (conf_parse (text, strlen (text), &doc, err, sizeof err),
                      0);
    notify_config_defaults (config);
    int rc = notify_config_load (config, pv_doc_root (doc), why, size);
    pv_doc_destroy (&doc);
    return rc;
}

static void
s_refused (const char *text, const char *expected)
{
    notify_config_t config;
    char why [512] = "";
    int rc = s_load (text, &config, why, sizeof why);
    if (rc == 0 || !strstr (why, expected))
        print_error ("expected '%s', got rc %d: %s\n", expected, rc, why);
    assert_int_equal (rc, -1);
    assert_non_null (strstr (why, expected));
    notify_config_clear (&config);
}

static void
test_notify_config (void **state)
{
    notify_config_t config;
    char why [512] = "";
    assert_int_equal (s_load ("notify:\n"
                              "  secret: abc\n"
                              "  targets:\n"
                              "    - {url: \"https://a.example/x\", on: [failed]}\n"
                              "    - {url: \"http://b.example/\"}\n"
                              "  allow: [\"https://hooks.example.com/\"]\n"
                              "  retry_for: 2s\n"
                              "  workers: 4\n",
                              &config, why, sizeof why), 0);
    assert_int_equal (config.target_count, 2);
    assert_int_equal (config.targets [0].on, JOB_NOTIFY_FAILED);
    assert_int_equal (config.targets [1].on, JOB_NOTIFY_ALL);
    assert_int_equal (config.allow_count, 1);
    assert_string_equal (config.secret, "abc");
    assert_int_equal (config.retry_for_ms, 2000);
    assert_int_equal (config.retry_base_ms, 1000);
    assert_int_equal (config.workers, 4);
    notify_config_t copy;
    assert_int_equal (notify_config_copy (&copy, &config), 0);
    assert_string_equal (copy.targets [0].url, "https://a.example/x");
    assert_string_equal (copy.allow [0], "https://hooks.example.com/");
    notify_config_clear (&copy);
    notify_config_clear (&config);
    //  No notify: the defaults, no webhooks
    assert_int_equal (s_load ("retention: 1d\n", &config, why, sizeof why), 0);
    assert_int_equal (config.target_count, 0);
    assert_int_equal (config.timeout_ms, 10000);
    notify_config_clear (&config);

    s_refused ("notify: [x]\n", "notify: expected a mapping");
    s_refused ("notify: {sekret: x}\n", "notify: ");
    s_refused ("notify: {targets: [{url: \"ftp://x/\"}]}\n",
               "notify.targets[0].url: must start with http:// or https://");
    s_refused ("notify: {targets: [{url: \"http://x/\", on: [sometimes]}]}\n",
               "notify.targets[0].on: unknown job end 'sometimes'");
    s_refused ("notify: {targets: [{on: [failed]}]}\n",
               "notify.targets[0].url: required");
    s_refused ("notify: {allow: [\"https://hooks.example.com\"]}\n",
               "notify.allow[0]: expected a URL prefix with its host and path");
    s_refused ("notify: {workers: 0}\n", "notify.workers: 1 to 32");
    s_refused ("notify: {retry_base: 0s}\n", "notify.retry_base: a duration");
    s_refused ("notify: {secret: \"\"}\n", "notify.secret: 1 to 1024 bytes");
    s_refused ("notify: {secret_file: /nonexistent/grid-secret}\n",
               "notify.secret_file: cannot read /nonexistent/grid-secret");
    //  The secret file's first line is the secret
    char path [] = "/tmp/grid-notify-secret-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, "from-a-file\nignored\n", 20), 20);
    close (fd);
    char text [256];
    snprintf (text, sizeof text, "notify: {secret_file: %s}\n", path);
    assert_int_equal (s_load (text, &config, why, sizeof why), 0);
    assert_string_equal (config.secret, "from-a-file");
    notify_config_clear (&config);
    unlink (path);
}

static void
test_notify_allow (void **state)
{
    notify_config_t config;
    char why [512] = "";
    notify_config_defaults (&config);
    job_spec_t spec;
    memset (&spec, 0, sizeof spec);
    job_notify_t hooks [2] = {{(char *) "https://hooks.example.com/a", 0},
                              {(char *) "https://hooks.example.com.evil/a", 0}};
    spec.notify = hooks;
    spec.notify_count = 1;
    //  Refused until the operator allows a prefix
    assert_int_equal (notify_spec_check (&config, &spec, why, sizeof why), -1);
    assert_non_null (strstr (why, "notify[0].url: this broker takes no "
                                  "job-level webhooks"));
    assert_int_equal (s_load ("notify: {allow: [\"https://hooks.example.com/\"]}\n",
                              &config, why, sizeof why), 0);
    assert_int_equal (notify_spec_check (&config, &spec, why, sizeof why), 0);
    spec.notify_count = 2;
    assert_int_equal (notify_spec_check (&config, &spec, why, sizeof why), -1);
    assert_non_null (strstr (why, "notify[1].url: https://hooks.example.com.evil/a "
                                  "is not under a prefix"));
    notify_config_clear (&config);
}

static void
test_notify_pure (void **state)
{
    uint8_t key [NOTIFY_KEY_LEN], back [NOTIFY_KEY_LEN];
    for (int i = 0; i < NOTIFY_KEY_LEN; i++)
        key [i] = (uint8_t) (i * 17);
    char id [NOTIFY_ID_LEN + 1];
    notify_id_format (key, id);
    assert_int_equal (strlen (id), NOTIFY_ID_LEN);
    assert_int_equal (notify_id_parse (id, back), 0);
    assert_memory_equal (key, back, NOTIFY_KEY_LEN);
    assert_int_equal (notify_id_parse ("xyz", back), -1);
    assert_int_equal (notify_id_parse ("00000000000000000000000g", back), -1);

    char shown [64];
    notify_url_show ("https://h.example/p?token=secret#x", shown, sizeof shown);
    assert_string_equal (shown, "https://h.example/p?...");
    notify_url_show ("https://h.example/p", shown, sizeof shown);
    assert_string_equal (shown, "https://h.example/p");

    //  HMAC-SHA256 over "t.body" (checked against Python's hmac)
    char signature [128];
    assert_int_equal (notify_post_sign ("key", 1700000000, "{\"a\":1}", 7,
                                        signature, sizeof signature), 0);
    assert_string_equal (signature, "t=1700000000,v1=a438e398bfafc57e4396bb7fc2"
                                    "304422f0f768e965d073ca313cb52e22e6ad03");

    //  Backoff: doubled from the base up to the cap, plus up to a quarter
    notify_config_t config;
    notify_config_defaults (&config);
    config.retry_base_ms = 100;
    config.retry_cap_ms = 1000;
    assert_int_equal (notify_backoff_ms (&config, 1, 0), 100);
    assert_int_equal (notify_backoff_ms (&config, 2, 0), 200);
    assert_int_equal (notify_backoff_ms (&config, 4, 0), 800);
    assert_int_equal (notify_backoff_ms (&config, 5, 0), 1000);
    assert_int_equal (notify_backoff_ms (&config, 60, 0), 1000);
    assert_int_equal (notify_backoff_ms (&config, 60, 1), 1250);
}

//  A finished job by hand: two nodes, one step, web-02 failed.
static sched_job_t *
s_job (sched_job_status_t status, const char *reason)
{
    job_spec_t *spec = (job_spec_t *) calloc (1, sizeof (job_spec_t));
    spec->phases = (job_phase_t *) calloc (1, sizeof (job_phase_t));
    spec->phase_count = 1;
    spec->phases [0].backend = strdup ("apt");
    spec->phases [0].action = strdup ("install");
    spec->notify = (job_notify_t *) calloc (1, sizeof (job_notify_t));
    spec->notify [0].url = strdup ("https://hooks.example.com/job");
    spec->notify [0].on = JOB_NOTIFY_ALL;
    spec->notify_count = 1;
    sched_job_t *job = sched_job_new ("j-0193a1b2c3d4-0001", &spec);
    job->status = status;
    job->reason = reason ? strdup (reason) : NULL;
    job->step_count = 1;
    job->expected_count = 2;
    job->expected = (char **) calloc (3, sizeof (char *));
    job->expected [0] = strdup ("web-01");
    job->expected [1] = strdup ("web-02");
    job->cells = (sched_cell_t *) calloc (2, sizeof (sched_cell_t));
    job->cells [0].status = SCHED_CELL_SUCCESS;
    job->cells [1].status = SCHED_CELL_FAILED;
    job->cells [1].attempts = (sched_attempt_t *) calloc (1, sizeof (sched_attempt_t));
    job->cells [1].attempt_count = 1;
    job->cells [1].attempts [0].status = SCHED_CELL_FAILED;
    job->cells [1].attempts [0].exit_code = 100;
    job->cells [1].attempts [0].error = strdup ("E: Unable to locate package");
    job->cells [1].attempts [0].output = strdup ("1\n2\n3\n4\n5\n6\n7\n");
    job->submitted_by = strdup ("alice (admin)");
    job->created_at_ms = 1764700000000;
    return job;
}

static char id_text [NOTIFY_ID_LEN + 1];

static const char *
s_id (const uint8_t *key, char *text)
{
    notify_id_format (key, text);
    return text;
}

static void
test_notify_deliveries (void **state)
{
    char dir [] = "/tmp/grid-notify-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char err [256];
    store_t *store = store_open (dir, 1 << 20, 64 << 20, err, sizeof err);
    assert_non_null (store);
    notify_config_t config;
    char why [256];
    assert_int_equal (s_load ("notify:\n"
                              "  public_url: \"https://grid.example.com/\"\n"
                              "  targets:\n"
                              "    - {url: \"https://a.example/f\", on: [failed]}\n"
                              "    - {url: \"https://a.example/t\", on: [timeout]}\n"
                              "    - {url: \"https://a.example/c\", on: [completed]}\n",
                              &config, why, sizeof why), 0);
    notify_t *notify = notify_new ();
    store_txn_t *txn = store_begin (store, true);
    //  A job ended by its timeout: failed and timeout want it, completed
    //  does not; the job's own webhook wants every end
    sched_job_t *job = s_job (SCHED_JOB_FAILED, "job timeout after 5s");
    assert_int_equal (notify_job_finished (notify, txn, &config, job,
                                           1764700005000), 3);
    assert_int_equal (notify_counters (notify).pending, 3);
    pw_t *writer = pw_new ();
    assert_int_equal (notify_list (txn, "pending", NULL, 0, writer), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *deliveries = pv_map_get (pv_doc_root (doc), "deliveries");
    assert_int_equal (pv_size (deliveries), 3);
    //  Newest first: the job's own, then the broker's
    const pv_t *newest = pv_array_at (deliveries, 0);
    assert_true (pv_str_eq (pv_map_get (newest, "source"), "job"));
    assert_true (pv_str_eq (pv_map_get (newest, "status"), "pending"));
    assert_null (pv_map_get (newest, "body"));
    char *id = pv_strdup (pv_map_get (pv_array_at (deliveries, 2), "id"));
    pv_doc_destroy (&doc);
    //  Retry of a pending one is refused, of an unknown one not found
    char job_id [JOB_ID_LEN + 1];
    assert_int_equal (notify_retry (notify, txn, id, 1764700006000, job_id), 1);
    assert_string_equal (job_id, job->id);
    assert_int_equal (notify_retry (notify, txn, "000000000000000000000000",
                                    1764700006000, job_id), STORE_ENOTFOUND);
    //  Nothing pruned while pending, however old
    assert_int_equal (notify_prune (txn, INT64_MAX, 100), 0);
    assert_int_equal (store_commit (&txn), 0);

    //  A completed job with no webhook of its own: only completed wants it
    sched_job_destroy (&job);
    job = s_job (SCHED_JOB_COMPLETED, NULL);
    job->spec->notify_count = 0;
    txn = store_begin (store, true);
    assert_int_equal (notify_job_finished (notify, txn, &config, job,
                                           1764700007000), 1);
    pw_reset (writer);
    assert_int_equal (notify_list (txn, NULL, job->id, 1, writer), 0);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *one = pv_array_at (pv_map_get (pv_doc_root (doc),
                                               "deliveries"), 0);
    assert_true (pv_str_eq (pv_map_get (one, "url"), "https://a.example/c"));
    pv_doc_destroy (&doc);
    store_abort (&txn);
    job->spec->notify_count = 1;
    sched_job_destroy (&job);

    //  Restored after a restart: the three pending ones
    notify_t *restarted = notify_new ();
    txn = store_begin (store, false);
    assert_int_equal (notify_restore (restarted, txn), 3);
    store_abort (&txn);
    notify_destroy (&restarted);

    //  Outcomes: a 200 makes one sent; a failure within retry_for keeps
    //  another pending, one past it makes it dead
    notify_outcome_t outcome;
    memset (&outcome, 0, sizeof outcome);
    uint8_t keys [3][NOTIFY_KEY_LEN];
    txn = store_begin (store, true);
    pw_reset (writer);
    assert_int_equal (notify_list (txn, NULL, NULL, 0, writer), 0);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    for (size_t i = 0; i < 3; i++) {
        char *text = pv_strdup (pv_map_get (pv_array_at (pv_map_get (
                                    pv_doc_root (doc), "deliveries"), i), "id"));
        assert_int_equal (notify_id_parse (text, keys [i]), 0);
        free (text);
    }
    pv_doc_destroy (&doc);
    const char *event = NULL;
    char detail [512];
    memcpy (outcome.key, keys [0], NOTIFY_KEY_LEN);
    outcome.ok = true;
    outcome.code = 200;
    assert_int_equal (notify_outcome_apply (notify, txn, &config, &outcome,
                                            1764700010000, job_id, &event,
                                            detail, sizeof detail), 0);
    assert_string_equal (event, "notify_sent");
    assert_non_null (strstr (detail, "HTTP 200 (attempt 1"));
    memcpy (outcome.key, keys [1], NOTIFY_KEY_LEN);
    outcome.ok = false;
    outcome.code = 500;
    snprintf (outcome.error, sizeof outcome.error, "HTTP 500");
    assert_int_equal (notify_outcome_apply (notify, txn, &config, &outcome,
                                            1764700010000, job_id, &event,
                                            detail, sizeof detail), 0);
    assert_string_equal (event, "notify_failed");
    memcpy (outcome.key, keys [2], NOTIFY_KEY_LEN);
    assert_int_equal (notify_outcome_apply (notify, txn, &config, &outcome,
                                            1764700005000 + config.retry_for_ms,
                                            job_id, &event, detail,
                                            sizeof detail), 0);
    assert_string_equal (event, "notify_dead");
    notify_counters_t counters = notify_counters (notify);
    assert_int_equal (counters.sent, 1);
    assert_int_equal (counters.failed, 2);
    assert_int_equal (counters.dead, 1);
    //  The dead one may be retried; the sent and dead ones are pruned once
    //  old enough, the pending one never
    assert_int_equal (notify_retry (notify, txn, s_id (keys [2], id_text),
                                    1764700020000, job_id), 0);
    assert_int_equal (notify_prune (txn, 1764700010000, 100), 0);
    assert_int_equal (notify_prune (txn, INT64_MAX, 100), 1);
    pw_reset (writer);
    assert_int_equal (notify_list (txn, NULL, NULL, 0, writer), 0);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_int_equal (pv_size (pv_map_get (pv_doc_root (doc), "deliveries")), 2);
    pv_doc_destroy (&doc);
    store_abort (&txn);

    free (id);
    pw_destroy (&writer);
    notify_destroy (&notify);
    notify_config_clear (&config);
    store_destroy (&store);
    char command [128];
    snprintf (command, sizeof command, "rm -rf '%s'", dir);
    assert_int_equal (system (command), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_notify_config),
        cmocka_unit_test (test_notify_allow),
        cmocka_unit_test (test_notify_pure),
        cmocka_unit_test (test_notify_deliveries),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
