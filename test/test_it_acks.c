/*  =========================================================================
    test_it_acks - result acknowledgements with the real broker and relay,
    and agents made by hand in the test (a DEALER that speaks the protocol
    message by message): an agent that names the result_acks feature in
    hello gets one result_acks per commit pass covering its results, of
    any jobs; one that does not (an older agent) gets one result_ack per
    result; through a relay the batched form passes untouched; and a
    broker killed once it committed, before the agent heard the ack, loses
    nothing: the agent sends the results again, and each cell still holds
    exactly one attempt.
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
#define S_RESULTS_MAX 256       //  Results one test follows

//  Encodes MSG and sends it on DEALER.
static void
s_send (zsock_t *dealer, const proto_msg_t *msg)
{
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    pw_destroy (&writer);
}

//  The node the hand-made agent speaks for: it beats while it waits, as
//  the broker marks a silent node offline within a second here.
static const char *s_node;
static int64_t s_beat_ms;

static void
s_beat (zsock_t *dealer)
{
    if (!s_node || grid_now_ms () - s_beat_ms < 200)
        return;
    s_beat_ms = grid_now_ms ();
    proto_msg_t beat = {
        .type = PROTO_HEARTBEAT, .node = (char *) s_node
    };
    s_send (dealer, &beat);
}

//  The next message on DEALER within TIMEOUT_MS, decoded, or NULL.
static proto_msg_t *
s_recv (zsock_t *dealer, int timeout_ms)
{
    zpoller_t *poller = zpoller_new (dealer, NULL);
    proto_msg_t *decoded = NULL;
    int64_t deadline = grid_now_ms () + timeout_ms;
    void *ready = NULL;
    while (!ready && grid_now_ms () < deadline) {
        s_beat (dealer);
        int64_t left = deadline - grid_now_ms ();
        ready = zpoller_wait (poller, left < 100 ? (int) left : 100);
    }
    if (ready == dealer) {
        zmsg_t *msg = zmsg_recv (dealer);
        zframe_t *body = msg ? zmsg_last (msg) : NULL;
        if (body)
            proto_msg_decode (zframe_data (body), zframe_size (body),
                              &decoded, NULL, 0);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    return decoded;
}

//  The next message of TYPE on DEALER (others are skipped), or NULL.
static proto_msg_t *
s_recv_type (zsock_t *dealer, proto_type_t type)
{
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        proto_msg_t *msg = s_recv (dealer, (int) (deadline - grid_now_ms ()));
        if (msg && msg->type == type)
            return msg;
        proto_msg_destroy (&msg);
    }
    return NULL;
}

//  Sends hello as NODE, naming result_acks when FEATURES, and declaring
//  the test backend's echo (so that jobs may target it).
static void
s_hello (zsock_t *dealer, const char *node, bool features)
{
    proto_param_spec_t param = {
        .name = "msg", .required = true, .type = "text", .help = "text"
    };
    proto_action_spec_t action = {
        .name = "echo", .modify = false, .help = "print a message",
        .params = &param, .param_count = 1
    };
    proto_backend_spec_t backend = {
        .name = "test", .actions = &action, .action_count = 1
    };
    char *names [] = { PROTO_FEATURE_RESULT_ACKS };
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = (char *) node, .hostname = "hand-made",
        .version = "0.1.0", .concurrency = 64, .instance = "0123456789abcdef",
        .backends = &backend, .backend_count = 1,
        .features = features ? names : NULL, .feature_count = features
    };
    s_send (dealer, &hello);
}

//  A DEALER registered as NODE at ENDPOINT (NULL: the broker's), welcomed.
static zsock_t *
s_agent (grid_t *grid, const char *node, bool features, const char *endpoint)
{
    char key_file [400], name [100];
    snprintf (name, sizeof name, "agent-%s", node);
    assert_int_equal (grid_keygen (grid, name, key_file, sizeof key_file,
                                   NULL), 0);
    zsock_t *dealer = grid_dealer (grid, endpoint ? endpoint
                                                  : grid->agents_ep,
                                   key_file);
    assert_non_null (dealer);
    s_hello (dealer, node, features);
    proto_msg_t *welcome = s_recv_type (dealer, PROTO_WELCOME);
    assert_non_null (welcome);
    proto_msg_destroy (&welcome);
    s_node = node;
    return dealer;
}

//  One result the test sent and the acks it got for it.
typedef struct {
    char job [32];
    uint32_t step;
    uint32_t attempt;
    int acked;                  //  Times an ack named it
} s_result_t;

typedef struct {
    s_result_t results [S_RESULTS_MAX];
    size_t count;
    int singles;                //  result_ack messages
    int batches;                //  result_acks messages
    int spanning;               //  result_acks naming more than one job
    int widest;                 //  Most results in one result_acks
    int strays;                 //  Acks for results never sent
} s_book_t;

static void
s_result_send (zsock_t *dealer, s_book_t *book, const char *node,
               const char *job, uint32_t step, const char *output)
{
    assert_true (book->count < S_RESULTS_MAX);
    s_result_t *result = &book->results [book->count++];
    snprintf (result->job, sizeof result->job, "%s", job);
    result->step = step;
    result->attempt = 1;
    proto_msg_t msg = {
        .type = PROTO_RESULT, .node = (char *) node, .job = (char *) job,
        .step = step, .attempt = 1, .status = "success",
        .output = (char *) output, .error = "", .exit_code = 0,
        .duration_ms = 1
    };
    s_send (dealer, &msg);
}

static void
s_book_ack (s_book_t *book, const char *job, uint32_t step,
            uint32_t attempt)
{
    for (size_t index = 0; index < book->count; index++) {
        s_result_t *result = &book->results [index];
        if (strcmp (result->job, job) == 0 && result->step == step
            && result->attempt == attempt) {
            result->acked++;
            return;
        }
    }
    book->strays++;
}

//  Reads acks on DEALER until every result of BOOK was acknowledged at
//  least once (true) or the deadline passed (false).
static bool
s_book_wait (zsock_t *dealer, s_book_t *book)
{
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    while (true) {
        bool all = true;
        for (size_t index = 0; index < book->count && all; index++)
            all = book->results [index].acked > 0;
        if (all)
            return true;
        if (grid_now_ms () >= deadline)
            return false;
        proto_msg_t *msg = s_recv (dealer, (int) (deadline - grid_now_ms ()));
        if (msg && msg->type == PROTO_RESULT_ACK) {
            book->singles++;
            s_book_ack (book, msg->job, msg->step, msg->attempt);
        }
        else
        if (msg && msg->type == PROTO_RESULT_ACKS) {
            book->batches++;
            bool spans = false;
            for (size_t at = 0; at < msg->ack_count; at++) {
                s_book_ack (book, msg->acks [at].job, msg->acks [at].step,
                            msg->acks [at].attempt);
                spans |= strcmp (msg->acks [at].job, msg->acks [0].job) != 0;
            }
            book->spanning += spans;
            if ((int) msg->ack_count > book->widest)
                book->widest = (int) msg->ack_count;
        }
        proto_msg_destroy (&msg);
    }
}

//  Results of two jobs the broker does not know, interleaved: it commits
//  and acknowledges them all the same, so that the agent's spool drains.
static void
s_send_two_jobs (zsock_t *dealer, s_book_t *book, const char *node,
                 size_t per_job)
{
    for (size_t step = 0; step < per_job; step++) {
        s_result_send (dealer, book, node, "j-00000000aaaa-0001",
                       (uint32_t) step, "a");
        s_result_send (dealer, book, node, "j-00000000bbbb-0002",
                       (uint32_t) step, "b");
    }
}

//  A new agent: every result acknowledged, in result_acks only, fewer
//  messages than results, and a message that covers results of both jobs.
static void
test_it_acks_batched_to_new_agent (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    zsock_t *dealer = s_agent (grid, "new-01", true, NULL);
    s_book_t book;
    memset (&book, 0, sizeof book);
    s_send_two_jobs (dealer, &book, "new-01", 100);
    assert_true (s_book_wait (dealer, &book));
    assert_int_equal (book.singles, 0);
    assert_int_equal (book.strays, 0);
    assert_true (book.batches >= 1);
    assert_true (book.batches < (int) book.count);
    assert_true (book.widest >= 2);
    assert_true (book.spanning >= 1);
    zsock_destroy (&dealer);
}

//  An agent whose hello names no feature (as every agent before
//  result_acks): one result_ack per result, nothing batched.
static void
test_it_acks_single_to_old_agent (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    zsock_t *dealer = s_agent (grid, "old-01", false, NULL);
    s_book_t book;
    memset (&book, 0, sizeof book);
    s_send_two_jobs (dealer, &book, "old-01", 50);
    assert_true (s_book_wait (dealer, &book));
    assert_int_equal (book.batches, 0);
    assert_int_equal (book.strays, 0);
    assert_int_equal (book.singles, (int) book.count);
    //  A new agent next to it still gets result_acks
    zsock_t *other = s_agent (grid, "new-02", true, NULL);
    memset (&book, 0, sizeof book);
    s_send_two_jobs (other, &book, "new-02", 20);
    assert_true (s_book_wait (other, &book));
    assert_int_equal (book.singles, 0);
    assert_true (book.batches >= 1);
    zsock_destroy (&other);
    zsock_destroy (&dealer);
}

//  Through a relay the result_acks reach the agent as the broker wrote
//  them.
static void
test_it_acks_through_relay (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relay;
    fixture_start_relays (grid, &broker, NULL, (const char *[]) {"r1", NULL},
                          NULL, &relay);
    //  The relay is the server this DEALER speaks CURVE with
    char broker_key [sizeof grid->broker_key];
    memcpy (broker_key, grid->broker_key, sizeof broker_key);
    snprintf (grid->broker_key, sizeof grid->broker_key, "%s",
              grid->relay_key [relay]);
    zsock_t *dealer = s_agent (grid, "far-01", true,
                               grid->relay_agents_ep [relay]);
    memcpy (grid->broker_key, broker_key, sizeof broker_key);
    assert_true (grid_wait_node (grid, "far-01", "online", S_WAIT_MS));
    s_book_t book;
    memset (&book, 0, sizeof book);
    s_send_two_jobs (dealer, &book, "far-01", 60);
    assert_true (s_book_wait (dealer, &book));
    assert_int_equal (book.singles, 0);
    assert_int_equal (book.strays, 0);
    assert_true (book.batches >= 1);
    assert_true (book.batches < (int) book.count);
    zsock_destroy (&dealer);
}

//  Waits for a command of JOB over DEALER (the broker re-sends it there
//  after its ack timeout: this agent subscribes to nothing).
static void
s_take_commands (zsock_t *dealer, char jobs [][32], size_t count)
{
    size_t taken = 0;
    bool seen [8] = { false };
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    while (taken < count && grid_now_ms () < deadline) {
        proto_msg_t *msg = s_recv (dealer, 500);
        for (size_t index = 0; msg && msg->type == PROTO_COMMAND
                               && index < count; index++)
            if (!seen [index] && strcmp (msg->job, jobs [index]) == 0) {
                seen [index] = true;
                taken++;
            }
        proto_msg_destroy (&msg);
    }
    assert_int_equal (taken, count);
}

//  Each job completed, its one cell success with the output sent and
//  exactly one attempt.
static void
s_assert_jobs (grid_t *grid, char jobs [][32], size_t count,
               const char *node)
{
    for (size_t index = 0; index < count; index++) {
        pv_doc_t *doc = grid_wait_job (grid, jobs [index], S_WAIT_MS);
        const pv_t *record = NULL;
        assert_true (grid_reply_ok (doc, &record));
        assert_true (grid_str_is (record, "status", "completed"));
        const pv_t *cell = grid_cell (record, 0, node);
        assert_non_null (cell);
        assert_true (grid_str_is (cell, "status", "success"));
        assert_true (grid_str_is (cell, "output", jobs [index]));
        int64_t attempts = 0;
        assert_int_equal (pv_get_int (pv_map_get (cell, "attempts"),
                                      &attempts), 0);
        assert_int_equal (attempts, 1);
        pv_doc_destroy (&doc);
    }
}

//  The broker commits results and is killed before the agent hears the
//  acks (here the agent heard them, and forgets them as if they were
//  lost with the broker); once it is back the agent says hello and sends
//  the same results again: the broker acknowledges them again, counts
//  none twice, and loses none. Then the other window: killed right after
//  the results went out, whatever it had done with them.
static void
test_it_acks_broker_killed_between_commit_and_ack (void **state)
{
    grid_t *grid = (grid_t *) *state;
    const char *broker_extra [] = {"--ack-timeout", "300ms", NULL};
    assert_int_equal (grid_start_broker (grid, broker_extra), 0);
    zsock_t *dealer = s_agent (grid, "crash-01", true, NULL);
    for (int round = 0; round < 2; round++) {
        char jobs [3][32];
        for (size_t index = 0; index < 3; index++) {
            char *id = grid_submit_id (grid,
                "target: node:crash-01\n"
                "tasks:\n"
                "  - {backend: test, action: echo, params: {msg: x}}\n");
            assert_non_null (id);
            snprintf (jobs [index], sizeof jobs [index], "%s", id);
            free (id);
        }
        s_take_commands (dealer, jobs, 3);
        s_book_t book;
        memset (&book, 0, sizeof book);
        for (size_t index = 0; index < 3; index++)
            s_result_send (dealer, &book, "crash-01", jobs [index], 0,
                           jobs [index]);
        //  Round 0: every ack came, so everything is committed
        if (round == 0)
            assert_true (s_book_wait (dealer, &book));
        grid_stop_broker (grid, true);
        assert_int_equal (grid_start_broker (grid, broker_extra), 0);
        //  The broker does not know the session any more
        s_beat_ms = 0;
        s_beat (dealer);
        proto_msg_t *error = s_recv_type (dealer, PROTO_ERROR);
        assert_non_null (error);
        assert_string_equal (error->code, "unknown_node");
        proto_msg_destroy (&error);
        s_hello (dealer, "crash-01", true);
        proto_msg_t *welcome = s_recv_type (dealer, PROTO_WELCOME);
        assert_non_null (welcome);
        proto_msg_destroy (&welcome);
        //  The spool's results again
        memset (&book, 0, sizeof book);
        for (size_t index = 0; index < 3; index++)
            s_result_send (dealer, &book, "crash-01", jobs [index], 0,
                           jobs [index]);
        assert_true (s_book_wait (dealer, &book));
        assert_int_equal (book.singles, 0);
        assert_int_equal (book.strays, 0);
        s_assert_jobs (grid, jobs, 3, "crash-01");
    }
    zsock_destroy (&dealer);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_acks_batched_to_new_agent,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_acks_single_to_old_agent,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_acks_through_relay,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_acks_broker_killed_between_commit_and_ack, fixture_setup,
            fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
