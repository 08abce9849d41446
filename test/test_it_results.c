/*  =========================================================================
    test_it_results - results in batches (PROTOCOL.md 4.1 rule 8), with the
    real broker, relay and gridagent, and agents made by hand in the test
    (a DEALER that speaks the protocol message by message): a welcome
    grants results only to an agent that named it, and says nothing of
    features to one that did not; a results is taken as that many result
    messages (each acknowledged, each attempt stored once, duplicates
    counted once); hostile batches are refused whole or, entry by entry,
    dropped and counted; through a relay no grant is made and a results
    still passes; gridagent sends its spool again as one results after a
    broker restart; and a broker killed around its commit loses nothing.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/proto.h"
#include "lib/fixture.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen
#define S_RESULTS_MAX 64        //  Results one test follows

//  True when the last message read holds TEXT.
static bool
s_body_has (const char *text)
{
    size_t size = 0;
    const void *body = fixture_last_body (&size);
    return memmem (body, size, text, strlen (text)) != NULL;
}

//  A result entry of JOB, step 0, attempt 1, printing OUTPUT.
static proto_msg_t
s_entry (const char *job, const char *output)
{
    proto_msg_t entry = {
        .type = PROTO_RESULT, .job = (char *) job, .step = 0, .attempt = 1,
        .status = "success", .output = (char *) output, .error = "",
        .exit_code = 0, .duration_ms = 1
    };
    return entry;
}

//  Sends a results of NODE with the COUNT entries at ENTRIES.
static void
s_results_send (zsock_t *dealer, const char *node, proto_msg_t *entries,
                size_t count)
{
    proto_msg_t msg = {
        .type = PROTO_RESULTS, .node = (char *) node, .results = entries,
        .result_count = count
    };
    fixture_send (dealer, &msg);
}

//  Acknowledgements seen, by job (step 0, attempt 1).
typedef struct {
    char jobs [S_RESULTS_MAX][32];
    int acked [S_RESULTS_MAX];
    size_t count;
    int strays;                 //  Acks for jobs not followed
    int singles;                //  result_ack messages
} s_book_t;

static void
s_book_add (s_book_t *book, const char *job)
{
    assert_true (book->count < S_RESULTS_MAX);
    assert_true (strlen (job) < 32);
    memcpy (book->jobs [book->count], job, strlen (job) + 1);
    book->acked [book->count++] = 0;
}

static void
s_book_ack (s_book_t *book, const char *job)
{
    for (size_t index = 0; index < book->count; index++)
        if (strcmp (book->jobs [index], job) == 0) {
            book->acked [index]++;
            return;
        }
    book->strays++;
}

//  Reads acks on DEALER until every job of BOOK was acknowledged (true)
//  or WAIT_MS passed (false).
static bool
s_book_wait (zsock_t *dealer, s_book_t *book, int wait_ms)
{
    int64_t deadline = grid_now_ms () + wait_ms;
    while (true) {
        bool all = true;
        for (size_t index = 0; index < book->count && all; index++)
            all = book->acked [index] > 0;
        if (all)
            return true;
        if (grid_now_ms () >= deadline)
            return false;
        proto_msg_t *msg = fixture_recv (dealer,
                                         (int) (deadline - grid_now_ms ()));
        if (msg && msg->type == PROTO_RESULT_ACK) {
            book->singles++;
            s_book_ack (book, msg->job);
        }
        if (msg && msg->type == PROTO_RESULT_ACKS)
            for (size_t at = 0; at < msg->ack_count; at++)
                s_book_ack (book, msg->acks [at].job);
        proto_msg_destroy (&msg);
    }
}

//  COUNT jobs of one test echo step on NODE, their ids in JOBS.
static void
s_submit (grid_t *grid, const char *node, char jobs [][32], size_t count)
{
    char yaml [256];
    snprintf (yaml, sizeof yaml, "target: node:%s\n"
              "tasks:\n"
              "  - {backend: test, action: echo, params: {msg: x}}\n", node);
    for (size_t index = 0; index < count; index++) {
        char *id = grid_submit_id (grid, yaml);
        assert_non_null (id);
        snprintf (jobs [index], 32, "%s", id);
        free (id);
    }
}

//  The broker's status counter dropped.NAME.
static int64_t
s_dropped (grid_t *grid, const char *name)
{
    pv_doc_t *doc = grid_call (grid, "status", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    int64_t value = -1;
    assert_int_equal (pv_get_int (pv_map_get (pv_map_get (data, "dropped"),
                                              name), &value), 0);
    pv_doc_destroy (&doc);
    return value;
}

//  The value of the metric line that starts with SERIES ("name{labels}").
static int64_t
s_metric (grid_t *grid, const char *series)
{
    pv_doc_t *doc = grid_call (grid, "metrics.get", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    size_t len = 0;
    const char *text = pv_str (pv_map_get (data, "text"), &len);
    assert_non_null (text);
    char *copy = strndup (text, len);
    pv_doc_destroy (&doc);
    int64_t value = -1;
    for (char *line = strtok (copy, "\n"); line; line = strtok (NULL, "\n"))
        if (strncmp (line, series, strlen (series)) == 0
            && line [strlen (series)] == ' ')
            value = strtoll (line + strlen (series) + 1, NULL, 10);
    free (copy);
    return value;
}

//  A welcome grants results to an agent that named it, and says nothing
//  of features to one that did not (an agent before them refuses the
//  key); an agent without the grant still gets its results taken.
static void
test_it_results_negotiated (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    proto_msg_t *welcome = NULL;
    zsock_t *dealer = fixture_agent (grid, "new-01", 2, NULL, &welcome);
    assert_int_equal (welcome->feature_count, 1);
    assert_string_equal (welcome->features [0], PROTO_FEATURE_RESULTS);
    proto_msg_destroy (&welcome);
    //  The release before: result_acks only
    zsock_t *acks_only = fixture_agent (grid, "acks-01", 1, NULL, &welcome);
    assert_int_equal (welcome->feature_count, 0);
    assert_false (s_body_has ("features"));
    proto_msg_destroy (&welcome);
    //  Before any feature
    zsock_t *old = fixture_agent (grid, "old-01", 0, NULL, &welcome);
    assert_int_equal (welcome->feature_count, 0);
    assert_false (s_body_has ("features"));
    proto_msg_destroy (&welcome);
    //  The old agent's result is taken and acknowledged as ever
    char jobs [1][32];
    s_submit (grid, "old-01", jobs, 1);
    fixture_take_commands (old, jobs, 1, S_WAIT_MS);
    proto_msg_t result = s_entry (jobs [0], jobs [0]);
    result.node = "old-01";
    fixture_send (old, &result);
    s_book_t book;
    memset (&book, 0, sizeof book);
    s_book_add (&book, jobs [0]);
    assert_true (s_book_wait (old, &book, S_WAIT_MS));
    assert_int_equal (book.singles, 1);
    fixture_assert_jobs (grid, jobs, 1, "old-01", true, S_WAIT_MS);
    fixture_agents_forget ();
    (void) dealer;
    (void) acks_only;
}

//  One results of several jobs: each acknowledged, each stored once; the
//  same batch again, and a batch that repeats an entry, change nothing.
static void
test_it_results_batch_acked (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    zsock_t *dealer = fixture_agent (grid, "b-01", 2, NULL, NULL);
    char jobs [4][32];
    s_submit (grid, "b-01", jobs, 4);
    fixture_take_commands (dealer, jobs, 4, S_WAIT_MS);
    proto_msg_t entries [4];
    s_book_t book;
    memset (&book, 0, sizeof book);
    for (size_t index = 0; index < 4; index++) {
        entries [index] = s_entry (jobs [index], jobs [index]);
        s_book_add (&book, jobs [index]);
    }
    s_results_send (dealer, "b-01", entries, 4);
    assert_true (s_book_wait (dealer, &book, S_WAIT_MS));
    assert_int_equal (book.strays, 0);
    assert_int_equal (book.singles, 0);
    fixture_assert_jobs (grid, jobs, 4, "b-01", true, S_WAIT_MS);
    //  Again, and with an entry twice
    memset (book.acked, 0, sizeof book.acked);
    s_results_send (dealer, "b-01", entries, 4);
    proto_msg_t twice [3] = { entries [0], entries [0], entries [1] };
    s_results_send (dealer, "b-01", twice, 3);
    assert_true (s_book_wait (dealer, &book, S_WAIT_MS));
    assert_int_equal (book.strays, 0);
    fixture_assert_jobs (grid, jobs, 4, "b-01", true, S_WAIT_MS);
    assert_int_equal (s_metric (grid, "grid_agent_messages_total{type="
                                      "\"results\"}"), 3);
    assert_int_equal (s_metric (grid, "grid_batched_results_total"), 11);
    assert_int_equal (s_dropped (grid, "bad_entries"), 0);
    fixture_agents_forget ();
}

//  Writes a results of NODE with COUNT good entries of JOB to WRITER.
static void
s_write_many (pw_t *writer, const char *node, const char *job, size_t count)
{
    assert_int_equal (proto_results_begin (node, count, writer), 0);
    proto_msg_t entry = s_entry (job, "x");
    for (size_t index = 0; index < count; index++)
        assert_int_equal (proto_results_entry_encode (&entry, writer), 0);
}

//  Sends BYTES and expects an error CODE whose message holds TEXT.
static void
s_expect_error (zsock_t *dealer, pw_t *bytes, const char *code,
                const char *text)
{
    fixture_send_bytes (dealer, pw_data (bytes), pw_size (bytes));
    proto_msg_t *error = fixture_recv_type (dealer, PROTO_ERROR, S_WAIT_MS);
    assert_non_null (error);
    assert_string_equal (error->code, code);
    if (!strstr (error->message, text))
        fail_msg ("'%s' lacks '%s'", error->message, text);
    proto_msg_destroy (&error);
}

//  Hostile batches: a bad envelope is refused whole; bad entries among
//  good ones are dropped and counted and the good ones taken; an entry
//  for another node's job changes nothing of that job; another node's
//  batch is forbidden; a message past the size limit is dropped by the
//  socket, and the broker carries on.
static void
test_it_results_hostile (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    zsock_t *dealer = fixture_agent (grid, "h-01", 2, NULL, NULL);
    zsock_t *other = fixture_agent (grid, "o-01", 2, NULL, NULL);
    pw_t *writer = pw_new ();

    //  No entries; one more than 4096; not a list
    pw_map (writer, 4);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "results");
    pw_str (writer, "node");
    pw_str (writer, "h-01");
    pw_str (writer, "results");
    size_t head = pw_size (writer);
    pw_array (writer, 0);
    s_expect_error (dealer, writer, "malformed", "at least 1");
    pw_reset (writer);
    s_write_many (writer, "h-01", "j-00000000aaaa-0001", PROTO_MAX_RESULTS);
    pw_t *over = pw_new ();
    pw_raw (over, pw_data (writer), head);
    pw_array (over, PROTO_MAX_RESULTS + 1);
    pw_raw (over, (const char *) pw_data (writer) + head + 3,
            pw_size (writer) - head - 3);
    proto_msg_t entry = s_entry ("j-00000000aaaa-0001", "x");
    assert_int_equal (proto_results_entry_encode (&entry, over), 0);
    s_expect_error (dealer, over, "malformed", "more than 4096");
    pw_destroy (&over);
    pw_reset (writer);
    pw_map (writer, 4);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "results");
    pw_str (writer, "node");
    pw_str (writer, "h-01");
    pw_str (writer, "results");
    pw_str (writer, "x");
    s_expect_error (dealer, writer, "malformed", "expected array");
    assert_int_equal (s_dropped (grid, "malformed"), 3);

    //  Bad entries among good ones: a status that is none, a string, a
    //  step out of range; and one for a job of o-01
    char jobs [2][32], theirs [1][32];
    s_submit (grid, "h-01", jobs, 2);
    s_submit (grid, "o-01", theirs, 1);
    fixture_take_commands (dealer, jobs, 2, S_WAIT_MS);
    fixture_take_commands (other, theirs, 1, S_WAIT_MS);
    pw_reset (writer);
    assert_int_equal (proto_results_begin ("h-01", 6, writer), 0);
    entry = s_entry (jobs [0], jobs [0]);
    assert_int_equal (proto_results_entry_encode (&entry, writer), 0);
    pw_map (writer, 3);
    pw_str (writer, "job");
    pw_str (writer, jobs [1]);
    pw_str (writer, "status");
    pw_str (writer, "done");
    pw_str (writer, "step");
    pw_int (writer, 0);
    pw_str (writer, "a result");
    entry = s_entry (jobs [1], jobs [1]);
    pw_t *raw = pw_new ();
    assert_int_equal (proto_results_entry_encode (&entry, raw), 0);
    //  The step's value is the byte after its key: make it 1024
    const uint8_t *bytes = (const uint8_t *) pw_data (raw);
    size_t at = 0;
    while (at + 5 < pw_size (raw) && memcmp (bytes + at, "\xa4step", 5))
        at++;
    assert_true (at + 5 < pw_size (raw));
    pw_raw (writer, bytes, at + 5);
    pw_int (writer, 1024);
    pw_raw (writer, bytes + at + 6, pw_size (raw) - at - 6);
    pw_destroy (&raw);
    entry = s_entry (theirs [0], "not mine");
    assert_int_equal (proto_results_entry_encode (&entry, writer), 0);
    entry = s_entry (jobs [1], jobs [1]);
    assert_int_equal (proto_results_entry_encode (&entry, writer), 0);
    fixture_send_bytes (dealer, pw_data (writer), pw_size (writer));
    s_book_t book;
    memset (&book, 0, sizeof book);
    s_book_add (&book, jobs [0]);
    s_book_add (&book, jobs [1]);
    s_book_add (&book, theirs [0]);
    assert_true (s_book_wait (dealer, &book, S_WAIT_MS));
    fixture_assert_jobs (grid, jobs, 2, "h-01", true, S_WAIT_MS);
    assert_int_equal (s_dropped (grid, "bad_entries"), 3);
    char path [600];
    snprintf (path, sizeof path, "%s/broker.log", grid->dir);
    char *log = grid_slurp (path);
    assert_true (grid_line_with (log, "node h-01 sent 3 bad result entries",
                                 "results.results[1]", NULL));
    free (log);
    //  o-01's job waits for o-01
    pv_doc_t *doc = grid_call (grid, "job.get", "job", theirs [0], NULL);
    const pv_t *record = NULL;
    assert_true (grid_reply_ok (doc, &record));
    assert_true (grid_str_is (record, "status", "running"));
    pv_doc_destroy (&doc);
    entry = s_entry (theirs [0], theirs [0]);
    s_results_send (other, "o-01", &entry, 1);
    fixture_assert_jobs (grid, theirs, 1, "o-01", true, S_WAIT_MS);

    //  h-01's key speaks for h-01 only
    pw_reset (writer);
    s_write_many (writer, "o-01", theirs [0], 1);
    s_expect_error (dealer, writer, "forbidden", "");

    //  Past the agent socket's limit: the connection drops it
    size_t huge = PROTO_MAX_FRAME + 1024;
    char *blob = (char *) malloc (huge);
    assert_non_null (blob);
    memset (blob, 'a', huge);
    zsock_send (dealer, "b", blob, huge);
    free (blob);
    doc = grid_call (grid, "status", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    //  The broker carries on
    char more [1][32];
    s_submit (grid, "o-01", more, 1);
    fixture_take_commands (other, more, 1, S_WAIT_MS);
    entry = s_entry (more [0], more [0]);
    s_results_send (other, "o-01", &entry, 1);
    fixture_assert_jobs (grid, more, 1, "o-01", true, S_WAIT_MS);
    pw_destroy (&writer);
    fixture_agents_forget ();
}

//  Through a relay that speaks protocol 2 (its own heartbeats say so)
//  the broker grants results as to a direct agent (a relay of protocol
//  1 gets no grant: test/upgrade.sh runs one); the results pass the
//  relay untouched and are taken.
static void
test_it_results_through_relay (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relay;
    fixture_start_relays (grid, &broker, NULL, (const char *[]) {"r1", NULL},
                          NULL, &relay);
    proto_msg_t *welcome = NULL;
    zsock_t *dealer = fixture_agent_via (grid, "far-01", 2, relay, &welcome);
    assert_true (proto_msg_has_feature (welcome, PROTO_FEATURE_RESULTS));
    proto_msg_destroy (&welcome);
    assert_true (grid_wait_node (grid, "far-01", "online", S_WAIT_MS));
    char jobs [3][32];
    s_submit (grid, "far-01", jobs, 3);
    fixture_take_commands (dealer, jobs, 3, S_WAIT_MS);
    proto_msg_t entries [3];
    s_book_t book;
    memset (&book, 0, sizeof book);
    for (size_t index = 0; index < 3; index++) {
        entries [index] = s_entry (jobs [index], jobs [index]);
        s_book_add (&book, jobs [index]);
    }
    s_results_send (dealer, "far-01", entries, 3);
    assert_true (s_book_wait (dealer, &book, S_WAIT_MS));
    fixture_assert_jobs (grid, jobs, 3, "far-01", true, S_WAIT_MS);
    fixture_agents_forget ();
}

//  gridagent: its results are sent while the broker is down; once the
//  broker is back the agent says hello and sends its spool again as one
//  results; every job completes with one attempt.
static void
test_it_results_gridagent_resend (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    const char *agent_extra [] = {"--concurrency", "4", "--log-level",
                                  "debug", NULL};
    int slot = grid_start_agent (grid, "a-01", NULL, NULL, agent_extra);
    assert_true (slot >= 0);
    char path [600];
    snprintf (path, sizeof path, "%s/agent-a-01.log", grid->dir);
    assert_true (fixture_wait_file (path, "result(s) to deliver, in batches)",
                                    1, S_WAIT_MS));
    char jobs [4][32];
    for (size_t index = 0; index < 4; index++) {
        char *id = grid_submit_id (grid,
            "target: node:a-01\n"
            "tasks:\n"
            "  - {backend: test, action: sleep, params: {seconds: \"2\", "
            "msg: done}}\n");
        assert_non_null (id);
        snprintf (jobs [index], 32, "%s", id);
        free (id);
    }
    //  All four running, then the broker is killed; they finish while it
    //  is away
    assert_true (fixture_wait_file (path, "test.sleep started", 4, S_WAIT_MS));
    grid_stop_broker (grid, true);
    assert_true (fixture_wait_file (path, "attempt 1: success", 4, S_WAIT_MS));
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    fixture_assert_jobs (grid, jobs, 4, "a-01", false, S_WAIT_MS);
    //  After the welcome, the spool's four in one results
    assert_true (fixture_wait_file (path, "sent 4 result(s) in one results",
                                    1, S_WAIT_MS));
    assert_true (s_metric (grid, "grid_batched_results_total") >= 4);
    assert_int_equal (s_dropped (grid, "bad_entries"), 0);
}

//  The broker commits a batch and is killed before the agent hears the
//  acks (here the agent heard them, and forgets them as if they were lost
//  with the broker); once it is back the agent sends the same batch
//  again: acknowledged again, counted once, nothing lost. Then the other
//  window: killed right after the batch went out.
static void
test_it_results_broker_killed (void **state)
{
    grid_t *grid = (grid_t *) *state;
    const char *broker_extra [] = {"--ack-timeout", "300ms", NULL};
    assert_int_equal (grid_start_broker (grid, broker_extra), 0);
    zsock_t *dealer = fixture_agent (grid, "crash-01", 2, NULL, NULL);
    for (int round = 0; round < 2; round++) {
        char jobs [3][32];
        s_submit (grid, "crash-01", jobs, 3);
        fixture_take_commands (dealer, jobs, 3, S_WAIT_MS);
        proto_msg_t entries [3];
        s_book_t book;
        memset (&book, 0, sizeof book);
        for (size_t index = 0; index < 3; index++) {
            entries [index] = s_entry (jobs [index], jobs [index]);
            s_book_add (&book, jobs [index]);
        }
        s_results_send (dealer, "crash-01", entries, 3);
        if (round == 0)
            assert_true (s_book_wait (dealer, &book, S_WAIT_MS));
        grid_stop_broker (grid, true);
        assert_int_equal (grid_start_broker (grid, broker_extra), 0);
        fixture_beat (true);
        proto_msg_t *error = fixture_recv_type (dealer, PROTO_ERROR, S_WAIT_MS);
        assert_non_null (error);
        assert_string_equal (error->code, "unknown_node");
        proto_msg_destroy (&error);
        fixture_hello (dealer, "crash-01", 2);
        proto_msg_t *welcome =
            fixture_recv_type (dealer, PROTO_WELCOME, S_WAIT_MS);
        assert_non_null (welcome);
        assert_true (proto_msg_has_feature (welcome, PROTO_FEATURE_RESULTS));
        proto_msg_destroy (&welcome);
        memset (book.acked, 0, sizeof book.acked);
        s_results_send (dealer, "crash-01", entries, 3);
        assert_true (s_book_wait (dealer, &book, S_WAIT_MS));
        assert_int_equal (book.strays, 0);
        fixture_assert_jobs (grid, jobs, 3, "crash-01", true, S_WAIT_MS);
    }
    fixture_agents_forget ();
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_results_negotiated,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_results_batch_acked,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_results_hostile, fixture_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_results_through_relay,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_results_gridagent_resend,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_results_broker_killed,
                                         fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
