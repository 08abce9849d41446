/*  =========================================================================
    test_it_schedule - schedules through the real programs: gridcli
    schedule add/list/show/pause/resume/run/delete, runs as ordinary jobs
    that carry the schedule's name, overlap skip, and a broker restart
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/harness.h"

static grid_t s_grid;

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0)
        return -1;
    if (grid_start_agent (&s_grid, "web-01", "web", NULL, NULL) < 0
        || grid_start_agent (&s_grid, "db-01", "db", NULL, NULL) < 0)
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  The data of an ok reply to TYPE {name: NAME}, or NULL (DOC_P holds the
//  reply for the caller to destroy).
static const pv_t *
s_schedule_call (const char *type, const char *name, pv_doc_t **doc_p)
{
    *doc_p = grid_call (&s_grid, type, "name", name, NULL);
    const pv_t *data = NULL;
    return grid_reply_ok (*doc_p, &data) ? data : NULL;
}

static int64_t
s_schedule_int (const char *name, const char *key)
{
    pv_doc_t *doc = NULL;
    const pv_t *data = s_schedule_call ("schedule.get", name, &doc);
    int64_t value = -1;
    if (data)
        pv_get_int (pv_map_get (data, key), &value);
    pv_doc_destroy (&doc);
    return value;
}

//  How many jobs schedule NAME started (job.list's total).
static int64_t
s_runs (const char *name)
{
    pv_doc_t *doc = grid_call (&s_grid, "job.list", "schedule", name, NULL);
    const pv_t *data = NULL;
    int64_t total = -1;
    if (grid_reply_ok (doc, &data))
        pv_get_int (pv_map_get (data, "total"), &total);
    pv_doc_destroy (&doc);
    return total;
}

//  Polls until schedule NAME has started at least COUNT jobs.
static bool
s_wait_runs (const char *name, int64_t count, int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (grid_now_ms () < deadline) {
        if (s_runs (name) >= count)
            return true;
        usleep (100 * 1000);
    }
    return false;
}

static int
s_cli (char **out_p, char **err_p, ...)
{
    //  Up to 24 arguments
    const char *argv [24] = {NULL};
    va_list args;
    va_start (args, err_p);
    for (int i = 0; i < 23; i++) {
        argv [i] = va_arg (args, const char *);
        if (!argv [i])
            break;
    }
    va_end (args);
    int code = grid_cli (&s_grid, out_p, err_p, 15000, argv [0], argv [1],
                         argv [2], argv [3], argv [4], argv [5], argv [6],
                         argv [7], argv [8], argv [9], argv [10], argv [11],
                         argv [12], argv [13], argv [14], argv [15],
                         argv [16], argv [17], argv [18], argv [19],
                         argv [20], argv [21], argv [22], NULL);
    if (code != 0 && *err_p)
        fprintf (stderr, "gridcli: exit %d: %s%s\n", code, *out_p, *err_p);
    return code;
}

static void
test_it_schedule_every_runs_jobs_that_carry_its_name (void **state)
{
    char *out = NULL, *err = NULL;
    assert_int_equal (s_cli (&out, &err, "schedule", "add", "beat", "--every",
                             "1s", "--target", "group:web or group:db",
                             "test", "echo", "--msg", "tick", NULL),
                      0);
    assert_non_null (strstr (out, "beat"));
    assert_non_null (strstr (out, "every 1s"));
    free (out);
    free (err);
    assert_true (s_wait_runs ("beat", 2, 15000));

    //  Each run is an ordinary job with the schedule's name in its record
    pv_doc_t *listing = grid_call (&s_grid, "job.list", "schedule", "beat",
                                   NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (listing, &data));
    const pv_t *newest = pv_array_at (pv_map_get (data, "jobs"), 0);
    assert_true (grid_str_is (newest, "schedule", "beat"));
    assert_true (grid_str_is (newest, "target", "group:web or group:db"));
    char *job_id = pv_strdup (pv_map_get (newest, "id"));
    pv_doc_destroy (&listing);
    pv_doc_t *record = grid_wait_job (&s_grid, job_id, 15000);
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "schedule", "beat"));
    assert_true (grid_str_is (data, "status", "completed"));
    assert_true (grid_str_is (grid_cell (data, 0, "db-01"), "output",
                              "tick\n"));
    pv_doc_destroy (&record);
    free (job_id);
    //  Jobs not started by it are not in its history
    pv_doc_t *other = grid_call (&s_grid, "job.list", "schedule", "nosuch",
                                 NULL);
    assert_true (grid_reply_ok (other, &data));
    assert_int_equal (pv_size (pv_map_get (data, "jobs")), 0);
    pv_doc_destroy (&other);

    assert_int_equal (s_cli (&out, &err, "job", "list", "--schedule", "beat",
                             NULL),
                      0);
    assert_non_null (strstr (out, "group:web or group:db"));
    free (out);
    free (err);
    assert_int_equal (s_cli (&out, &err, "schedule", "list", NULL), 0);
    assert_non_null (strstr (out, "beat"));
    assert_non_null (strstr (out, "active"));
    free (out);
    free (err);
    assert_int_equal (s_cli (&out, &err, "schedule", "show", "beat", NULL),
                      0);
    assert_non_null (strstr (out, "next run"));
    assert_non_null (strstr (out, "last job"));
    assert_non_null (strstr (out, "last status"));
    free (out);
    free (err);

    //  Pause: no run starts until resume, but run NAME starts one now
    assert_int_equal (s_cli (&out, &err, "schedule", "pause", "beat", NULL),
                      0);
    assert_non_null (strstr (out, "paused"));
    free (out);
    free (err);
    int64_t paused_runs = s_runs ("beat");
    usleep (2500 * 1000);
    assert_int_equal (s_runs ("beat"), paused_runs);
    assert_int_equal (s_cli (&out, &err, "schedule", "run", "beat", NULL), 0);
    assert_non_null (strstr (out, "started by schedule beat"));
    free (out);
    free (err);
    assert_int_equal (s_runs ("beat"), paused_runs + 1);
    assert_int_equal (s_cli (&out, &err, "schedule", "resume", "beat", NULL),
                      0);
    assert_non_null (strstr (out, "active"));
    free (out);
    free (err);
    assert_true (s_wait_runs ("beat", paused_runs + 2, 15000));

    //  Delete: the schedule goes, its jobs stay
    assert_int_equal (s_cli (&out, &err, "schedule", "delete", "beat", NULL),
                      0);
    if (!strstr (out, "schedule beat deleted"))
        fprintf (stderr, "delete said: %s / %s\n", out, err);
    assert_non_null (strstr (out, "schedule beat deleted"));
    free (out);
    free (err);
    int64_t kept = s_runs ("beat");
    assert_true (kept >= paused_runs + 2);
    int code = grid_cli (&s_grid, &out, &err, 15000, "schedule", "show",
                         "beat", NULL);
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "no schedule 'beat'"));
    free (out);
    free (err);
    usleep (1500 * 1000);
    assert_int_equal (s_runs ("beat"), kept);
}

static void
test_it_schedule_bad_input_is_refused (void **state)
{
    char *out = NULL, *err = NULL;
    struct {
        const char *args [12];
        int code;
        const char *message;
    } cases [] = {
        {{"schedule", "add", "x", "--cron", "0 24 * * *", "-f", "j.yaml"},
         2, "bad --cron '0 24 * * *': hour: 24 is out of range (0-23)"},
        {{"schedule", "add", "x", "--every", "1m", "--cron", "* * * * *"},
         2, "needs one of --cron EXPR and --every D"},
        {{"schedule", "add", "x", "--every", "10", "--target", "all"},
         2, "--every must be an interval"},
        {{"schedule", "add", "x", "--every", "1m", "--target", "all"},
         2, "needs BACKEND and ACTION"},
        {{"schedule", "add", "x", "--cron", "* * * * *", "--tz",
          "Mars/Olympus", "--target", "all", "test", "echo"},
         2, "bad --tz: unknown time zone 'Mars/Olympus'"},
        {{"schedule", "add", "x", "--every", "1m", "--target", "all", "nope",
          "echo"},
         4, "no registered node offers nope echo"},
        {{"schedule", "pause", "nosuch"}, 4, "no schedule 'nosuch'"},
        {{"schedule", "frobnicate"}, 2, "unknown schedule subcommand"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases [0]; i++) {
        const char *const *a = cases [i].args;
        int code = grid_cli (&s_grid, &out, &err, 15000, a [0], a [1], a [2],
                             a [3], a [4], a [5], a [6], a [7], a [8], a [9],
                             a [10], a [11], NULL);
        if (code != cases [i].code || !strstr (err, cases [i].message))
            fprintf (stderr, "case %zu: exit %d: %s\n", i, code, err);
        assert_int_equal (code, cases [i].code);
        assert_non_null (strstr (err, cases [i].message));
        free (out);
        free (err);
    }
    //  The same name twice is a conflict
    const char *add [] = {"schedule", "add", "twice", "--every", "1h",
                          "--target", "all", "test", "echo", "--msg", "x"};
    assert_int_equal (grid_cli (&s_grid, &out, &err, 15000, add [0], add [1],
                                add [2], add [3], add [4], add [5], add [6],
                                add [7], add [8], add [9], add [10], NULL),
                      0);
    free (out);
    free (err);
    assert_int_equal (grid_cli (&s_grid, &out, &err, 15000, add [0], add [1],
                                add [2], add [3], add [4], add [5], add [6],
                                add [7], add [8], add [9], add [10], NULL),
                      4);
    assert_non_null (strstr (err, "schedule twice exists"));
    free (out);
    free (err);
    pv_doc_t *doc = NULL;
    assert_non_null (s_schedule_call ("schedule.delete", "twice", &doc));
    pv_doc_destroy (&doc);
}

//  A run due while the last one still goes is skipped, never run beside
//  it.
static void
test_it_schedule_overlap_skip (void **state)
{
    char *out = NULL, *err = NULL;
    assert_int_equal (s_cli (&out, &err, "schedule", "add", "slow",
                             "--every", "1s", "--target", "node:db-01",
                             "test", "sleep", "--seconds", "3", NULL),
                      0);
    free (out);
    free (err);
    long long deadline = grid_now_ms () + 20000;
    int64_t skipped = 0;
    while (grid_now_ms () < deadline && skipped < 2) {
        skipped = s_schedule_int ("slow", "skipped");
        //  Never two runs at once
        pv_doc_t *doc = grid_call (&s_grid, "job.list", "schedule", "slow",
                                   NULL);
        const pv_t *data = NULL;
        assert_true (grid_reply_ok (doc, &data));
        const pv_t *jobs = pv_map_get (data, "jobs");
        size_t live = 0;
        for (size_t i = 0; i < pv_size (jobs); i++)
            if (grid_str_is (pv_array_at (jobs, i), "status", "running")
                || grid_str_is (pv_array_at (jobs, i), "status", "pending"))
                live++;
        assert_true (live <= 1);
        pv_doc_destroy (&doc);
        usleep (200 * 1000);
    }
    assert_true (skipped >= 2);
    pv_doc_t *doc = NULL;
    assert_non_null (s_schedule_call ("schedule.delete", "slow", &doc));
    pv_doc_destroy (&doc);
}

//  Schedules and their history live in the store: after a restart (also
//  after SIGKILL) they are back and keep firing.
static void
test_it_schedule_survives_restart (void **state)
{
    char *out = NULL, *err = NULL;
    assert_int_equal (s_cli (&out, &err, "schedule", "add", "durable",
                             "--every", "1s", "--target", "node:web-01",
                             "test", "echo", "--msg", "again", NULL),
                      0);
    free (out);
    free (err);
    assert_int_equal (s_cli (&out, &err, "schedule", "add", "paused",
                             "--cron", "*/5 * * * *", "--tz",
                             "Europe/Berlin", "--target", "all", "test",
                             "echo", "--msg", "x", NULL),
                      0);
    free (out);
    free (err);
    pv_doc_t *doc = NULL;
    assert_non_null (s_schedule_call ("schedule.pause", "paused", &doc));
    pv_doc_destroy (&doc);
    assert_true (s_wait_runs ("durable", 1, 15000));
    for (int hard = 0; hard < 2; hard++) {
        grid_stop_broker (&s_grid, hard);
        assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
        int64_t before = s_runs ("durable");
        const pv_t *data = s_schedule_call ("schedule.get", "paused", &doc);
        assert_non_null (data);
        bool paused = false;
        pv_get_bool (pv_map_get (data, "paused"), &paused);
        assert_true (paused);
        assert_true (grid_str_is (data, "tz", "Europe/Berlin"));
        pv_doc_destroy (&doc);
        data = s_schedule_call ("schedule.get", "durable", &doc);
        assert_non_null (data);
        int64_t runs = 0;
        pv_get_int (pv_map_get (data, "runs"), &runs);
        assert_true (runs >= 1);
        pv_doc_destroy (&doc);
        //  It fires again once the agents are back
        assert_true (s_wait_runs ("durable", before + 2, 20000));
    }
    assert_int_equal (s_cli (&out, &err, "schedule", "list", NULL), 0);
    assert_non_null (strstr (out, "*/5 * * * * (Europe/Berlin)"));
    assert_non_null (strstr (out, "paused"));
    free (out);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_schedule_every_runs_jobs_that_carry_its_name),
        cmocka_unit_test (test_it_schedule_bad_input_is_refused),
        cmocka_unit_test (test_it_schedule_overlap_skip),
        cmocka_unit_test (test_it_schedule_survives_restart),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
