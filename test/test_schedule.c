/*  =========================================================================
    test_schedule - schedule rules with a fake wall clock: due times,
    overlap (skip, queue, allow), catch-up after downtime, pause, the
    request reader and the store record
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../broker/schedule.h"

#define MIN 60000LL
#define HOUR (60 * MIN)
//  2026-11-25 12:00:00 UTC
#define T0 1795608000000LL

//  A schedule.add body: NAME, then NULL-terminated key, value pairs (all
//  strings), and a small valid job.
static pv_doc_t *
s_body (const char *name, ...)
{
    pw_t *writer = pw_new ();
    va_list args;
    size_t count = 2;
    va_start (args, name);
    while (va_arg (args, const char *)) {
        va_arg (args, const char *);
        count++;
    }
    va_end (args);
    pw_map (writer, count);
    pw_str (writer, "name");
    pw_str (writer, name);
    va_start (args, name);
    const char *key;
    while ((key = va_arg (args, const char *))) {
        pw_str (writer, key);
        pw_str (writer, va_arg (args, const char *));
    }
    va_end (args);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_str (writer, "group:web and not node:web-03");
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 2);
    pw_str (writer, "backend");
    pw_str (writer, "test");
    pw_str (writer, "action");
    pw_str (writer, "echo");
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0),
                      0);
    pw_destroy (&writer);
    return doc;
}

static schedule_t *
s_new (int64_t now_ms, const char *name, ...)
{
    //  Up to three pairs, enough for every test here
    va_list args;
    const char *kv [6] = {NULL};
    va_start (args, name);
    for (int i = 0; i < 6; i++) {
        kv [i] = va_arg (args, const char *);
        if (!kv [i])
            break;
    }
    va_end (args);
    pv_doc_t *doc = s_body (name, kv [0], kv [1], kv [2], kv [3], kv [4],
                            kv [5], NULL);
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    schedule_t *schedule = schedule_from_request (pv_doc_root (doc), now_ms,
                                                  &errors);
    for (size_t i = 0; i < errors.count; i++)
        print_error ("%s\n", errors.items [i]);
    assert_non_null (schedule);
    job_errors_clear (&errors);
    pv_doc_destroy (&doc);
    return schedule;
}

//  Reads a body that must be refused with a problem containing EXPECTED.
static void
s_refused (const char *expected, const char *name, const char *k1,
           const char *v1, const char *k2, const char *v2)
{
    pv_doc_t *doc = s_body (name, k1, v1, k2, v2, NULL);
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    schedule_t *schedule = schedule_from_request (pv_doc_root (doc), T0,
                                                  &errors);
    bool found = false;
    for (size_t i = 0; i < errors.count; i++)
        if (strstr (errors.items [i], expected))
            found = true;
    if (!found) {
        print_error ("expected '%s', got %zu problems:\n", expected,
                     errors.count);
        for (size_t i = 0; i < errors.count; i++)
            print_error ("  %s\n", errors.items [i]);
    }
    assert_null (schedule);
    assert_true (found);
    job_errors_clear (&errors);
    pv_doc_destroy (&doc);
}

static void
test_schedule_request_forms (void **state)
{
    schedule_t *schedule = s_new (T0, "nightly", "cron", "0 3 * * *", "tz",
                                  "Europe/Berlin", NULL);
    assert_string_equal (schedule->name, "nightly");
    assert_string_equal (schedule->tz, "Europe/Berlin");
    assert_string_equal (schedule->target, "group:web and not node:web-03");
    assert_int_equal (schedule->overlap, SCHEDULE_OVERLAP_SKIP);
    assert_int_equal (schedule->catch_up, SCHEDULE_CATCH_UP_ONE);
    assert_int_equal (schedule->catch_up_window_ms, HOUR);
    //  03:00 in Berlin (CET) is 02:00 UTC, the next day
    assert_int_equal (schedule->next_ms, T0 + 14 * HOUR);
    job_spec_t *spec = schedule_job_spec (schedule);
    assert_non_null (spec);
    assert_int_equal (spec->target.scope, TARGET_EXPR);
    job_spec_destroy (&spec);
    schedule_destroy (&schedule);
    assert_null (schedule);

    schedule = s_new (T0, "beat", "every", "10m", "overlap", "queue",
                      "catch_up", "none");
    assert_int_equal (schedule->every_ms, 10 * MIN);
    assert_int_equal (schedule->next_ms, T0 + 10 * MIN);
    assert_int_equal (schedule->overlap, SCHEDULE_OVERLAP_QUEUE);
    assert_int_equal (schedule->catch_up, SCHEDULE_CATCH_UP_NONE);
    assert_null (schedule->tz);
    schedule_destroy (&schedule);

    s_refused ("cron, every: one is required", "x", NULL, NULL, NULL, NULL);
    s_refused ("cron, every: give one of them", "x", "cron", "* * * * *",
               "every", "1m");
    s_refused ("cron: hour: 25 is out of range", "x", "cron", "0 25 * * *",
               NULL, NULL);
    s_refused ("cron: '0 0 30 2 *' never fires", "x", "cron", "0 0 30 2 *",
               NULL, NULL);
    s_refused ("tz: unknown time zone 'Mars/Olympus'", "x", "cron",
               "* * * * *", "tz", "Mars/Olympus");
    s_refused ("tz: only a cron schedule has a time zone", "x", "every",
               "1m", "tz", "UTC");
    s_refused ("every: '500ms' is not an interval from 1s", "x", "every",
               "500ms", NULL, NULL);
    s_refused ("overlap: 'sometimes' is not skip, queue or allow", "x",
               "every", "1m", "overlap", "sometimes");
    s_refused ("catch_up: 'all' is not one or none", "x", "every", "1m",
               "catch_up", "all");
    s_refused ("catch_up_window: 'long' is not a duration", "x", "every",
               "1m", "catch_up_window", "long");
    s_refused ("name: 'a b' is not a schedule name", "a b", "every", "1m",
               NULL, NULL);
}

static void
test_schedule_due_and_interval (void **state)
{
    schedule_t *schedule = s_new (T0, "beat", "every", "10m", NULL);
    assert_int_equal (schedule_due (schedule, T0 + 9 * MIN, false),
                      SCHEDULE_IDLE);
    assert_int_equal (schedule_due (schedule, T0 + 10 * MIN, false),
                      SCHEDULE_FIRE);
    assert_int_equal (schedule->next_ms, T0 + 20 * MIN);
    //  Woken late, past two due times: one run, and the times keep their
    //  anchor (no drift)
    assert_int_equal (schedule_due (schedule, T0 + 35 * MIN, false),
                      SCHEDULE_FIRE);
    assert_int_equal (schedule->next_ms, T0 + 40 * MIN);
    assert_int_equal (schedule_due (schedule, T0 + 35 * MIN, false),
                      SCHEDULE_IDLE);
    schedule_started (schedule, "j-019ab0000000-0001", T0 + 35 * MIN);
    assert_int_equal (schedule->runs, 1);
    assert_string_equal (schedule->last_status, "pending");
    assert_int_equal (schedule->last_run_ms, T0 + 35 * MIN);
    schedule_destroy (&schedule);
}

static void
test_schedule_overlap (void **state)
{
    //  skip: a run due while the last still goes is dropped and counted
    schedule_t *schedule = s_new (T0, "skip", "every", "1m", NULL);
    assert_int_equal (schedule_due (schedule, T0 + MIN, true),
                      SCHEDULE_SKIPPED);
    assert_int_equal (schedule->skipped, 1);
    assert_false (schedule->pending_run);
    assert_int_equal (schedule_due (schedule, T0 + 2 * MIN, false),
                      SCHEDULE_FIRE);
    schedule_destroy (&schedule);

    //  queue: one run waits, however many due times pass, and goes as
    //  soon as the previous run is over
    schedule = s_new (T0, "queue", "every", "1m", "overlap", "queue", NULL);
    assert_int_equal (schedule_due (schedule, T0 + MIN, true),
                      SCHEDULE_HOLD);
    assert_true (schedule->pending_run);
    assert_int_equal (schedule_due (schedule, T0 + 2 * MIN, true),
                      SCHEDULE_HOLD);
    assert_int_equal (schedule_due (schedule, T0 + 2 * MIN + 5, true),
                      SCHEDULE_HOLD);
    assert_int_equal (schedule_due (schedule, T0 + 2 * MIN + 10, false),
                      SCHEDULE_FIRE);
    assert_false (schedule->pending_run);
    assert_int_equal (schedule_due (schedule, T0 + 2 * MIN + 20, false),
                      SCHEDULE_IDLE);
    assert_int_equal (schedule->skipped, 0);
    schedule_destroy (&schedule);

    //  allow: side by side
    schedule = s_new (T0, "allow", "every", "1m", "overlap", "allow", NULL);
    assert_int_equal (schedule_due (schedule, T0 + MIN, true),
                      SCHEDULE_FIRE);
    assert_int_equal (schedule_due (schedule, T0 + 2 * MIN, true),
                      SCHEDULE_FIRE);
    schedule_destroy (&schedule);
}

static void
test_schedule_catch_up (void **state)
{
    //  Down from 11:58 to 14:30 UTC; an hourly schedule missed 12:00,
    //  13:00 and 14:00
    schedule_t *schedule = s_new (T0 - 2 * MIN, "hourly", "cron",
                                  "0 * * * *", NULL);
    assert_int_equal (schedule->next_ms, T0);
    int64_t now = T0 + 2 * HOUR + 30 * MIN;
    //  one (default, window 1h): 14:00 is within the hour: one run
    assert_true (schedule_restart (schedule, now));
    assert_true (schedule->pending_run);
    assert_int_equal (schedule->next_ms, T0 + 3 * HOUR);
    assert_int_equal (schedule_due (schedule, now, false), SCHEDULE_FIRE);
    assert_int_equal (schedule_due (schedule, now, false), SCHEDULE_IDLE);
    schedule_destroy (&schedule);

    //  A window that the missed times do not reach: no run
    schedule = s_new (T0 - 2 * MIN, "hourly", "cron", "0 * * * *",
                      "catch_up_window", "20m", NULL);
    assert_false (schedule_restart (schedule, now));
    assert_false (schedule->pending_run);
    assert_int_equal (schedule->next_ms, T0 + 3 * HOUR);
    schedule_destroy (&schedule);

    //  none: never
    schedule = s_new (T0 - 2 * MIN, "hourly", "cron", "0 * * * *",
                      "catch_up", "none", NULL);
    assert_false (schedule_restart (schedule, now));
    assert_int_equal (schedule->next_ms, T0 + 3 * HOUR);
    schedule_destroy (&schedule);

    //  Nothing missed: nothing to do
    schedule = s_new (T0 - 2 * MIN, "hourly", "cron", "0 * * * *", NULL);
    assert_false (schedule_restart (schedule, T0 - MIN));
    assert_int_equal (schedule->next_ms, T0);
    schedule_destroy (&schedule);

    //  Paused: no catch-up either
    schedule = s_new (T0 - 2 * MIN, "hourly", "cron", "0 * * * *", NULL);
    schedule_set_paused (schedule, true, T0 - MIN);
    assert_false (schedule_restart (schedule, now));
    assert_int_equal (schedule_due (schedule, now + HOUR, false),
                      SCHEDULE_IDLE);
    //  Resume: from the next due time after now, nothing caught up
    schedule_set_paused (schedule, false, now);
    assert_false (schedule->pending_run);
    assert_int_equal (schedule->next_ms, T0 + 3 * HOUR);
    schedule_destroy (&schedule);
}

static void
test_schedule_record_round_trip (void **state)
{
    schedule_t *schedule = s_new (T0, "nightly", "cron", "0 3 * * mon-fri",
                                  "tz", "Europe/Berlin", "overlap", "queue");
    schedule_started (schedule, "j-019ab0000000-0001", T0 + 5);
    schedule_set_status (schedule, "completed");
    schedule->skipped = 3;
    schedule->pending_run = true;
    pw_t *writer = pw_new ();
    schedule_encode (schedule, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0),
                      0);
    schedule_t *again = schedule_decode (pv_doc_root (doc));
    assert_non_null (again);
    assert_string_equal (again->name, "nightly");
    assert_string_equal (again->cron_text, "0 3 * * mon-fri");
    assert_string_equal (again->tz, "Europe/Berlin");
    assert_int_equal (again->cron.weekdays, schedule->cron.weekdays);
    assert_int_equal (again->overlap, SCHEDULE_OVERLAP_QUEUE);
    assert_int_equal (again->next_ms, schedule->next_ms);
    assert_int_equal (again->last_run_ms, T0 + 5);
    assert_string_equal (again->last_job, "j-019ab0000000-0001");
    assert_string_equal (again->last_status, "completed");
    assert_int_equal (again->runs, 1);
    assert_int_equal (again->skipped, 3);
    assert_true (again->pending_run);
    assert_string_equal (again->target, schedule->target);
    assert_int_equal (again->job_size, schedule->job_size);
    assert_memory_equal (again->job, schedule->job, schedule->job_size);
    schedule_destroy (&again);
    pv_doc_destroy (&doc);

    //  Records that do not add up are refused, never half-read
    const char *broken [] = {"name", "overlap", "next_ms", "job"};
    for (size_t b = 0; b < sizeof broken / sizeof broken [0]; b++) {
        pw_reset (writer);
        schedule_encode (schedule, writer);
        assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer),
                                         &doc, NULL, 0),
                          0);
        //  Rebuild the map without the key
        const pv_t *root = pv_doc_root (doc);
        pw_t *copy = pw_new ();
        pw_map (copy, pv_size (root) - 1);
        for (size_t i = 0; i < pv_size (root); i++) {
            const char *key = NULL;
            size_t key_len = 0;
            const pv_t *value = pv_map_entry (root, i, &key, &key_len);
            if (key_len == strlen (broken [b])
                && memcmp (key, broken [b], key_len) == 0)
                continue;
            pw_strn (copy, key, key_len);
            pw_pv (copy, value);
        }
        pv_doc_t *cut = NULL;
        assert_int_equal (pv_doc_decode (pw_data (copy), pw_size (copy), &cut,
                                         NULL, 0),
                          0);
        assert_null (schedule_decode (pv_doc_root (cut)));
        pv_doc_destroy (&cut);
        pv_doc_destroy (&doc);
        pw_destroy (&copy);
    }
    //  The API view
    pw_reset (writer);
    schedule_write_view (schedule, writer);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0),
                      0);
    const pv_t *view = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (view, "cron"), "0 3 * * mon-fri"));
    assert_true (pv_str_eq (pv_map_get (view, "last_status"), "completed"));
    assert_true (pv_str_eq (pv_map_get (view, "catch_up_window"), "1h"));
    assert_non_null (pv_map_get (view, "next_run"));
    assert_true (pv_str_eq (pv_map_get (view, "target"),
                            "group:web and not node:web-03"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    schedule_destroy (&schedule);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_schedule_request_forms),
        cmocka_unit_test (test_schedule_due_and_interval),
        cmocka_unit_test (test_schedule_overlap),
        cmocka_unit_test (test_schedule_catch_up),
        cmocka_unit_test (test_schedule_record_round_trip),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
