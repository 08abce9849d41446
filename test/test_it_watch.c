/*  =========================================================================
    test_it_watch - job.watch through a real broker and agent: answered at
    once when the caller has not seen the job's latest state, parked until
    the job changes otherwise, answered unchanged when its wait runs out,
    and every parked watcher answered when the job ends
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/proto.h"
#include "lib/fixture.h"

#define S_WAIT_MS 20000

//  One broker and one agent, w-01, for the whole suite. The agent sends
//  no progress reports (test sleep's would come every second): a running
//  job changes only when it starts and when it ends.
static int
s_setup (void **state)
{
    if (fixture_setup (state) != 0)
        return -1;
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    const char *quiet [] = {"--progress-interval", "1h", NULL};
    assert_true (grid_start_agent (grid, "w-01", NULL, NULL, quiet) >= 0);
    return 0;
}

//  The request {job.watch, job, ?after, ?timeout_ms} in WRITER.
static void
s_watch_request (pw_t *writer, const char *job, int64_t after,
                 int64_t timeout_ms)
{
    static int seq;
    char id [32];
    snprintf (id, sizeof id, "watch-%d", ++seq);
    pw_reset (writer);
    proto_request_begin (writer, "job.watch", id,
                         1 + (after >= 0) + (timeout_ms >= 0));
    pw_str (writer, "job");
    pw_str (writer, job);
    if (after >= 0) {
        pw_str (writer, "after");
        pw_int (writer, after);
    }
    if (timeout_ms >= 0) {
        pw_str (writer, "timeout_ms");
        pw_int (writer, timeout_ms);
    }
}

//  Sends job.watch and returns the reply (caller destroys).
static pv_doc_t *
s_watch (grid_t *grid, const char *job, int64_t after, int64_t timeout_ms)
{
    pw_t *writer = pw_new ();
    s_watch_request (writer, job, after, timeout_ms);
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     S_WAIT_MS);
    pw_destroy (&writer);
    assert_non_null (reply);
    return reply;
}

static int64_t
s_int (const pv_t *map, const char *key)
{
    int64_t value = -1;
    assert_int_equal (pv_get_int (pv_map_get (map, key), &value), 0);
    return value;
}

static bool
s_changed (const pv_t *data)
{
    bool changed = false;
    assert_int_equal (pv_get_bool (pv_map_get (data, "changed"), &changed), 0);
    return changed;
}

static bool
s_status_is (const pv_t *data, const char *status)
{
    return pv_str_eq (pv_map_get (pv_map_get (data, "progress"), "status"),
                      status);
}

static char *
s_sleep_job (grid_t *grid, const char *seconds)
{
    char yaml [256];
    snprintf (yaml, sizeof yaml,
              "target: { scope: node, value: w-01 }\n"
              "tasks: [ { backend: test, action: sleep, "
              "params: { seconds: %s } } ]\n", seconds);
    char *job = grid_submit_id (grid, yaml);
    assert_non_null (job);
    return job;
}

//  Watching a job from its start to its end sees every state once and
//  the end as soon as it happens, never a timeout in between.
static void
test_watch_follows_a_job_to_its_end (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_sleep_job (grid, "1");
    pv_doc_t *reply = s_watch (grid, job, -1, -1);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    assert_true (s_changed (data));
    int64_t version = s_int (data, "version");
    int rounds = 0;
    while (!s_status_is (data, "completed")) {
        assert_true (++rounds < 20);
        pv_doc_destroy (&reply);
        reply = s_watch (grid, job, version, 15000);
        assert_true (grid_reply_ok (reply, &data));
        //  A 15 s wait on a 1 s job comes back because the job changed
        assert_true (s_changed (data));
        assert_true (s_int (data, "version") != version);
        version = s_int (data, "version");
    }
    pv_doc_destroy (&reply);
    //  A finished job is answered at once, whatever the caller saw
    reply = s_watch (grid, job, version, 15000);
    assert_true (grid_reply_ok (reply, &data));
    assert_true (s_status_is (data, "completed"));
    pv_doc_destroy (&reply);
    free (job);
}

//  gridcli --wait on a job that stays unchanged longer than one try of a
//  request (--request-timeout 9s: 3 s a try, which a CURVE handshake on a
//  busy machine needs) waits for its end.
static void
test_watch_cli_waits_out_a_quiet_job (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, 60000, "--request-timeout",
                         "9s", "job", "run", "--target", "node:w-01",
                         "test", "sleep", "--seconds", "4", "--wait", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out ? out : "", err ? err : "");
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, " completed"));
    free (out);
    free (err);
}

//  Nothing happens: the watch comes back when its wait is over, unchanged.
static void
test_watch_times_out_unchanged (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_sleep_job (grid, "30");
    //  Until it runs, the job changes (dispatched, started). On a busy
    //  machine the agent's start may come later than one quiet wait, so
    //  wait for it: from then on nothing changes for 30 s (no progress
    //  reports, see s_setup).
    assert_true (fixture_wait_cells (grid, job, 0,
                                     (const char *[]) {"w-01", NULL},
                                     "running", S_WAIT_MS));
    pv_doc_t *reply = NULL;
    const pv_t *data = NULL;
    int64_t version = -1;
    for (int round = 0; round < 20; round++) {
        pv_doc_destroy (&reply);
        reply = s_watch (grid, job, version, 300);
        assert_true (grid_reply_ok (reply, &data));
        version = s_int (data, "version");
        if (!s_changed (data))
            break;
    }
    assert_false (s_changed (data));
    assert_true (s_status_is (data, "running"));
    pv_doc_destroy (&reply);
    //  timeout_ms 0 answers at once
    reply = s_watch (grid, job, version, 0);
    assert_true (grid_reply_ok (reply, &data));
    assert_false (s_changed (data));
    pv_doc_destroy (&reply);
    reply = grid_call (grid, "job.cancel", "job", job, NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    free (job);
}

//  Many callers parked on one job are all answered when it ends.
static void
test_watch_many_watchers_answered (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_sleep_job (grid, "1");
    pv_doc_t *reply = s_watch (grid, job, -1, -1);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t version = s_int (data, "version");
    pv_doc_destroy (&reply);
    enum { WATCHERS = 20 };
    zsock_t *dealers [WATCHERS];
    pw_t *writer = pw_new ();
    for (int index = 0; index < WATCHERS; index++) {
        dealers [index] = grid_dealer (grid, grid->client_ep, grid->admin_key);
        assert_non_null (dealers [index]);
        s_watch_request (writer, job, version, 15000);
        zmsg_t *msg = zmsg_new ();
        zmsg_addmem (msg, "", 0);
        zmsg_addmem (msg, pw_data (writer), pw_size (writer));
        assert_int_equal (zmsg_send (&msg, dealers [index]), 0);
    }
    int answered = 0;
    for (int index = 0; index < WATCHERS; index++) {
        zsock_set_rcvtimeo (dealers [index], S_WAIT_MS);
        zmsg_t *msg = zmsg_recv (dealers [index]);
        if (msg) {
            zframe_t *body = zmsg_last (msg);
            pv_doc_t *doc = NULL;
            char why [128];
            if (pv_doc_decode (zframe_data (body), zframe_size (body), &doc,
                               why, sizeof why) == 0
                && grid_reply_ok (doc, &data) && s_changed (data))
                answered++;
            pv_doc_destroy (&doc);
            zmsg_destroy (&msg);
        }
        zsock_destroy (&dealers [index]);
    }
    assert_int_equal (answered, WATCHERS);
    pw_destroy (&writer);
    pv_doc_destroy (&reply);
    free (job);
}

//  The request {TYPE (job.changes, node.changes), ?after, ?timeout_ms} in
//  WRITER.
static void
s_feed_request (pw_t *writer, const char *type, int64_t after,
                int64_t timeout_ms)
{
    static int seq;
    char id [32];
    snprintf (id, sizeof id, "changes-%d", ++seq);
    pw_reset (writer);
    proto_request_begin (writer, type, id,
                         (after >= 0) + (timeout_ms >= 0));
    if (after >= 0) {
        pw_str (writer, "after");
        pw_int (writer, after);
    }
    if (timeout_ms >= 0) {
        pw_str (writer, "timeout_ms");
        pw_int (writer, timeout_ms);
    }
}

static void
s_changes_request (pw_t *writer, int64_t after, int64_t timeout_ms)
{
    s_feed_request (writer, "job.changes", after, timeout_ms);
}

static pv_doc_t *
s_feed (grid_t *grid, const char *type, int64_t after, int64_t timeout_ms)
{
    pw_t *writer = pw_new ();
    s_feed_request (writer, type, after, timeout_ms);
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     S_WAIT_MS);
    pw_destroy (&writer);
    assert_non_null (reply);
    return reply;
}

static pv_doc_t *
s_changes (grid_t *grid, int64_t after, int64_t timeout_ms)
{
    pw_t *writer = pw_new ();
    s_changes_request (writer, after, timeout_ms);
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     S_WAIT_MS);
    pw_destroy (&writer);
    assert_non_null (reply);
    return reply;
}

//  job.changes: at once without AFTER; parked until any job changes (a
//  submit wakes it); unchanged when its wait runs out; bad bounds refused.
static void
test_changes_wakes_on_any_job (void **state)
{
    grid_t *grid = (grid_t *) *state;
    pv_doc_t *reply = s_changes (grid, -1, -1);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    assert_true (s_changed (data));
    pv_doc_destroy (&reply);
    //  Quiet: earlier tests' jobs may still end; wait until nothing moves
    int64_t version = -1;
    for (int round = 0; round < 40; round++) {
        reply = s_changes (grid, version, 500);
        assert_true (grid_reply_ok (reply, &data));
        version = s_int (data, "version");
        bool changed = s_changed (data);
        pv_doc_destroy (&reply);
        if (!changed)
            break;
    }
    //  Parked on a DEALER while a job is submitted: woken with a new version
    zsock_t *dealer = grid_dealer (grid, grid->client_ep, grid->admin_key);
    assert_non_null (dealer);
    pw_t *writer = pw_new ();
    s_changes_request (writer, version, 15000);
    zmsg_t *msg = zmsg_new ();
    zmsg_addmem (msg, "", 0);
    zmsg_addmem (msg, pw_data (writer), pw_size (writer));
    assert_int_equal (zmsg_send (&msg, dealer), 0);
    zclock_sleep (200);
    char *job = s_sleep_job (grid, "0");
    zsock_set_rcvtimeo (dealer, S_WAIT_MS);
    msg = zmsg_recv (dealer);
    assert_non_null (msg);
    zframe_t *body = zmsg_last (msg);
    pv_doc_t *doc = NULL;
    char why [128];
    assert_int_equal (pv_doc_decode (zframe_data (body), zframe_size (body),
                                     &doc, why, sizeof why), 0);
    assert_true (grid_reply_ok (doc, &data));
    assert_true (s_changed (data));
    assert_true (s_int (data, "version") > version);
    pv_doc_destroy (&doc);
    zmsg_destroy (&msg);
    zsock_destroy (&dealer);
    pw_destroy (&writer);
    free (job);
    //  Out of bounds: a clear error
    reply = s_changes (grid, -1, 60001);
    char *code = grid_reply_code (reply);
    assert_string_equal (code, "bad_request");
    free (code);
    pv_doc_destroy (&reply);
}

//  Bad requests get clear errors; an unknown job is not_found.
static void
test_watch_refuses_what_it_cannot_watch (void **state)
{
    grid_t *grid = (grid_t *) *state;
    pv_doc_t *reply = s_watch (grid, "j-000000000000-0000", -1, -1);
    char *code = grid_reply_code (reply);
    assert_string_equal (code, "not_found");
    free (code);
    pv_doc_destroy (&reply);
    reply = s_watch (grid, "j-000000000000-0000", -1, 60001);
    code = grid_reply_code (reply);
    assert_string_equal (code, "bad_request");
    free (code);
    pv_doc_destroy (&reply);
    reply = s_watch (grid, "not-a-job", 3, -1);
    code = grid_reply_code (reply);
    assert_non_null (code);
    free (code);
    pv_doc_destroy (&reply);
}

//  node.changes: at once without AFTER; unchanged while no node changes
//  (heartbeats are not changes); parked until a node is drained, resumed
//  or goes offline, then answered with a higher version; a job is not a
//  node change; bad bounds refused.
static void
test_node_changes_wakes_on_a_node (void **state)
{
    grid_t *grid = (grid_t *) *state;
    pv_doc_t *reply = s_feed (grid, "node.changes", -1, -1);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    assert_true (s_changed (data));
    int64_t version = s_int (data, "version");
    pv_doc_destroy (&reply);
    //  Heartbeats and a job go by: no change
    char *job = s_sleep_job (grid, "0");
    reply = s_feed (grid, "node.changes", version, 800);
    assert_true (grid_reply_ok (reply, &data));
    assert_false (s_changed (data));
    assert_int_equal (s_int (data, "version"), version);
    pv_doc_destroy (&reply);
    free (job);
    //  Parked on a DEALER while the node is drained: woken, a new version
    const char *steps [] = {"node.drain", "node.resume"};
    for (size_t step = 0; step < 2; step++) {
        zsock_t *dealer = grid_dealer (grid, grid->client_ep, grid->admin_key);
        assert_non_null (dealer);
        pw_t *writer = pw_new ();
        s_feed_request (writer, "node.changes", version, 15000);
        zmsg_t *msg = zmsg_new ();
        zmsg_addmem (msg, "", 0);
        zmsg_addmem (msg, pw_data (writer), pw_size (writer));
        assert_int_equal (zmsg_send (&msg, dealer), 0);
        zclock_sleep (200);
        pv_doc_t *done = grid_call (grid, steps [step], "node", "w-01", NULL);
        assert_non_null (done);
        assert_true (grid_reply_ok (done, NULL));
        pv_doc_destroy (&done);
        zsock_set_rcvtimeo (dealer, S_WAIT_MS);
        msg = zmsg_recv (dealer);
        assert_non_null (msg);
        zframe_t *body = zmsg_last (msg);
        pv_doc_t *doc = NULL;
        char why [128];
        assert_int_equal (pv_doc_decode (zframe_data (body), zframe_size (body),
                                         &doc, why, sizeof why), 0);
        assert_true (grid_reply_ok (doc, &data));
        assert_true (s_changed (data));
        assert_true (s_int (data, "version") > version);
        version = s_int (data, "version");
        pv_doc_destroy (&doc);
        zmsg_destroy (&msg);
        zsock_destroy (&dealer);
        pw_destroy (&writer);
    }
    //  Out of bounds: a clear error
    reply = s_feed (grid, "node.changes", -1, 60001);
    char *code = grid_reply_code (reply);
    assert_string_equal (code, "bad_request");
    free (code);
    pv_doc_destroy (&reply);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_watch_follows_a_job_to_its_end),
        cmocka_unit_test (test_watch_times_out_unchanged),
        cmocka_unit_test (test_watch_cli_waits_out_a_quiet_job),
        cmocka_unit_test (test_watch_many_watchers_answered),
        cmocka_unit_test (test_watch_refuses_what_it_cannot_watch),
        cmocka_unit_test (test_changes_wakes_on_any_job),
        cmocka_unit_test (test_node_changes_wakes_on_a_node),
    };
    return cmocka_run_group_tests (tests, s_setup, fixture_teardown);
}
