/*  =========================================================================
    test_it_agent_move - an agent moving between broker endpoints:

    - an endpoint that refuses connections (no process listens there: a
      broker or relay that died, a standby) is left at once, without
      waiting --failover (here an hour);
    - one that is hung (its kernel accepts, nothing speaks) is not: it
      is left only after --failover, as one that is silent;
    - a command to an agent whose SUB subscribes after its welcome (the
      slow joiner of an agent that just moved or reconnected) waits for
      the subscription at the broker and is not lost (the ack timeout,
      here an hour, would otherwise be the only cure);
    - after a broker restart, a job starts as soon as every known node is
      back, not after the hold (heartbeat x missed heartbeats, here three
      minutes)
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 30000

static grid_t s_grid;

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    s_grid.insecure = true;
    const char *extra [] = {"--ack-timeout", "1h", NULL};
    if (grid_start_broker (&s_grid, extra) != 0)
        return -1;
    *state = &s_grid;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  A TCP socket on loopback at a port the kernel chose, listening (and
//  never accepting) when LISTEN, else closed at once so that the port
//  refuses. Writes "tcp://127.0.0.1:PORT" into EP; returns the socket
//  (or -1 when closed).
static int
s_tcp_port (bool listening, char *ep, size_t len)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in addr = {
        .sin_family = AF_INET, .sin_port = 0,
        .sin_addr.s_addr = htonl (INADDR_LOOPBACK)
    };
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    socklen_t size = sizeof addr;
    assert_int_equal (getsockname (fd, (struct sockaddr *) &addr, &size), 0);
    snprintf (ep, len, "tcp://127.0.0.1:%u", (unsigned) ntohs (addr.sin_port));
    if (listening) {
        assert_int_equal (listen (fd, 64), 0);
        return fd;
    }
    close (fd);
    return -1;
}

//  Starts agent ID whose first endpoint is FIRST (agents and commands
//  alike), then the broker's, with --failover 1h.
static void
s_start_behind (grid_t *grid, const char *id, const char *first)
{
    char brokers [800], publishes [800];
    snprintf (brokers, sizeof brokers, "%s,%s", first, grid->agents_ep);
    snprintf (publishes, sizeof publishes, "%s,%s", first, grid->publish_ep);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--failover", "1h", NULL};
    assert_true (grid_spawn_agent (grid, id, "web", NULL, extra) >= 0);
}

static void
test_it_restart_hold_ends_when_all_are_back (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_true (grid_start_agent (grid, "back-01", "web", NULL, NULL) >= 0);
    grid_stop_broker (grid, true);
    const char *extra [] = {"--ack-timeout", "1h", "--heartbeat", "1m",
                            "--lease", "5m", NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_wait_node (grid, "back-01", "online", S_WAIT_MS));
    char *job = grid_submit_id (grid,
                                "target: {scope: node, value: back-01}\n"
                                "tasks:\n"
                                "  - {backend: test, action: echo, params: "
                                "{msg: back}}\n");
    assert_non_null (job);
    pv_doc_t *doc = grid_wait_job (grid, job, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&doc);
    free (job);
}

static void
test_it_agent_leaves_a_refusing_endpoint (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char dead [64];
    s_tcp_port (false, dead, sizeof dead);
    s_start_behind (grid, "move-01", dead);
    assert_true (grid_wait_node (grid, "move-01", "online", S_WAIT_MS));
    char path [400];
    snprintf (path, sizeof path, "%s/agent-move-01.log", grid->dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    assert_non_null (strstr (log, "refused connections"));
    free (log);
}

static void
test_it_agent_waits_out_a_hung_endpoint (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char hung [64];
    int fd = s_tcp_port (true, hung, sizeof hung);
    s_start_behind (grid, "move-02", hung);
    //  Its kernel took the connection: silent, not dead. The agent stays
    //  (for --failover, an hour)
    assert_false (grid_wait_node (grid, "move-02", "online", 3000));
    close (fd);
}

//  The next message on SOCK within S_WAIT_MS, decoded from its last
//  frame, or NULL.
static proto_msg_t *
s_recv (zsock_t *sock)
{
    zpoller_t *poller = zpoller_new (sock, NULL);
    proto_msg_t *msg = NULL;
    if (zpoller_wait (poller, S_WAIT_MS) == sock) {
        zmsg_t *frames = zmsg_recv (sock);
        zframe_t *body = frames ? zmsg_last (frames) : NULL;
        if (body)
            proto_msg_decode (zframe_data (body), zframe_size (body), &msg,
                              NULL, 0);
        zmsg_destroy (&frames);
    }
    zpoller_destroy (&poller);
    return msg;
}

static void
test_it_command_waits_for_a_late_subscription (void **state)
{
    grid_t *grid = (grid_t *) *state;
    //  A hand-made agent whose SUB connects only after its command was
    //  sent
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    assert_non_null (dealer);
    zsock_set_linger (dealer, 0);
    assert_int_equal (zsock_connect (dealer, "%s", grid->agents_ep), 0);
    proto_backend_spec_t *backends = NULL;
    size_t backend_count = 0;
    assert_int_equal (backends_hello_specs (NULL, 0, &backends,
                                            &backend_count), 0);
    char *groups [] = {"late"};
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = "late-01", .hostname = "raw",
        .groups = groups, .group_count = 1, .version = "0.1.0",
        .concurrency = 1, .backends = backends,
        .backend_count = backend_count
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&hello, writer), 0);
    backends_specs_free (&backends, backend_count);
    zframe_t *frame = zframe_new (pw_data (writer), pw_size (writer));
    assert_int_equal (zframe_send (&frame, dealer, 0), 0);
    pw_destroy (&writer);
    proto_msg_t *welcome = s_recv (dealer);
    assert_non_null (welcome);
    assert_int_equal (welcome->type, PROTO_WELCOME);
    proto_msg_destroy (&welcome);
    char *job = grid_submit_id (grid,
                                "target: {scope: node, value: late-01}\n"
                                "tasks:\n"
                                "  - {backend: test, action: echo, params: "
                                "{msg: late}}\n");
    assert_non_null (job);
    //  The step is sent (running) before anyone subscribed
    bool running = false;
    for (int tries = 0; tries < 300 && !running; tries++) {
        pv_doc_t *doc = grid_call (grid, "job.get", "job", job, NULL);
        const pv_t *data = NULL;
        running = grid_reply_ok (doc, &data)
                  && grid_str_is (data, "status", "running");
        pv_doc_destroy (&doc);
        if (!running)
            zclock_sleep (50);
    }
    assert_true (running);
    zsock_t *sub = zsock_new (ZMQ_SUB);
    assert_non_null (sub);
    zsock_set_linger (sub, 0);
    zsock_set_subscribe (sub, "node/late-01/");
    assert_int_equal (zsock_connect (sub, "%s", grid->publish_ep), 0);
    proto_msg_t *command = s_recv (sub);
    assert_non_null (command);
    assert_int_equal (command->type, PROTO_COMMAND);
    assert_string_equal (command->job, job);
    proto_msg_destroy (&command);
    zsock_destroy (&sub);
    zsock_destroy (&dealer);
    free (job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_restart_hold_ends_when_all_are_back),
        cmocka_unit_test (test_it_agent_leaves_a_refusing_endpoint),
        cmocka_unit_test (test_it_agent_waits_out_a_hung_endpoint),
        cmocka_unit_test (test_it_command_waits_for_a_late_subscription),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
