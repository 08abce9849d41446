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
    fixture_send (dealer, &msg);
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
        proto_msg_t *msg = fixture_recv (dealer,
                                         (int) (deadline - grid_now_ms ()));
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
    zsock_t *dealer = fixture_agent (grid, "new-01", 1, NULL, NULL);
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
    fixture_agents_forget ();
}

//  An agent whose hello names no feature (as every agent before
//  result_acks): one result_ack per result, nothing batched.
static void
test_it_acks_single_to_old_agent (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    zsock_t *dealer = fixture_agent (grid, "old-01", 0, NULL, NULL);
    s_book_t book;
    memset (&book, 0, sizeof book);
    s_send_two_jobs (dealer, &book, "old-01", 50);
    assert_true (s_book_wait (dealer, &book));
    assert_int_equal (book.batches, 0);
    assert_int_equal (book.strays, 0);
    assert_int_equal (book.singles, (int) book.count);
    //  A new agent next to it still gets result_acks
    zsock_t *other = fixture_agent (grid, "new-02", 1, NULL, NULL);
    memset (&book, 0, sizeof book);
    s_send_two_jobs (other, &book, "new-02", 20);
    assert_true (s_book_wait (other, &book));
    assert_int_equal (book.singles, 0);
    assert_true (book.batches >= 1);
    fixture_agents_forget ();
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
    zsock_t *dealer = fixture_agent_via (grid, "far-01", 1, relay, NULL);
    assert_true (grid_wait_node (grid, "far-01", "online", S_WAIT_MS));
    s_book_t book;
    memset (&book, 0, sizeof book);
    s_send_two_jobs (dealer, &book, "far-01", 60);
    assert_true (s_book_wait (dealer, &book));
    assert_int_equal (book.singles, 0);
    assert_int_equal (book.strays, 0);
    assert_true (book.batches >= 1);
    assert_true (book.batches < (int) book.count);
    fixture_agents_forget ();
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
    zsock_t *dealer = fixture_agent (grid, "crash-01", 1, NULL, NULL);
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
        fixture_take_commands (dealer, jobs, 3, S_WAIT_MS);
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
        fixture_beat (true);
        proto_msg_t *error = fixture_recv_type (dealer, PROTO_ERROR, S_WAIT_MS);
        assert_non_null (error);
        assert_string_equal (error->code, "unknown_node");
        proto_msg_destroy (&error);
        fixture_hello (dealer, "crash-01", 1);
        proto_msg_t *welcome =
            fixture_recv_type (dealer, PROTO_WELCOME, S_WAIT_MS);
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
        fixture_assert_jobs (grid, jobs, 3, "crash-01", true, S_WAIT_MS);
    }
    fixture_agents_forget ();
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
