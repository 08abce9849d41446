/*  =========================================================================
    test_zmtp - gridswarm's ZMTP 3.0 client (test/tools/zmtp.c) against a
    peer played by the test over ipc://: the handshake, frames short and
    long, MORE, PING and PONG, batched writes, subscriptions, and hostile
    input (truncated, oversized and malformed frames, a wrong mechanism):
    each is refused with a clear reason, the connection dropped, counted
    and retried, nothing crashes
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

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "tools/zmtp.h"

#define S_MAX_FRAME 4096

typedef struct {
    char dir [64];
    char path [100];
    int listener;               //  The peer's listening socket
    int peer;                   //  The accepted connection, or -1
    int epoll_fd;
    zmtp_endpoint_t endpoint;
    zmtp_ctx_t ctx;
    zmtp_t conn;
    int ready;                  //  on_ready calls
    int messages;               //  on_message calls
    size_t last_count;          //  Frames of the last message
    size_t last_sizes [ZMTP_MAX_FRAMES];
    uint8_t last_body [8192];   //  Its last frame
    size_t last_body_size;
    int drops;                  //  on_drop calls
    char reason [128];          //  The last drop's reason
} s_fixture_t;

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_on_ready (void *arg, zmtp_t *conn)
{
    ((s_fixture_t *) arg)->ready++;
}

static void
s_on_message (void *arg, zmtp_t *conn, const zmtp_frame_t *frames,
              size_t count)
{
    s_fixture_t *self = (s_fixture_t *) arg;
    self->messages++;
    self->last_count = count;
    for (size_t at = 0; at < count && at < ZMTP_MAX_FRAMES; at++)
        self->last_sizes [at] = frames [at].size;
    const zmtp_frame_t *last
        = &frames [(count < ZMTP_MAX_FRAMES ? count : ZMTP_MAX_FRAMES) - 1];
    self->last_body_size = last->size;
    if (last->size <= sizeof self->last_body)
        memcpy (self->last_body, last->data, last->size);
}

static void
s_on_drop (void *arg, zmtp_t *conn, const char *reason)
{
    s_fixture_t *self = (s_fixture_t *) arg;
    self->drops++;
    snprintf (self->reason, sizeof self->reason, "%s", reason);
}

//  Accepts the client's connection (waits up to a second).
static void
s_accept (s_fixture_t *self)
{
    struct pollfd item = {self->listener, POLLIN, 0};
    assert_int_equal (poll (&item, 1, 1000), 1);
    self->peer = accept (self->listener, NULL, NULL);
    assert_true (self->peer >= 0);
}

//  Reads exactly SIZE bytes from the peer side (a second at most).
static void
s_peer_read (s_fixture_t *self, void *into, size_t size)
{
    size_t got = 0;
    while (got < size) {
        struct pollfd item = {self->peer, POLLIN, 0};
        assert_int_equal (poll (&item, 1, 1000), 1);
        ssize_t rc = read (self->peer, (uint8_t *) into + got, size - got);
        assert_true (rc > 0);
        got += (size_t) rc;
    }
}

static void
s_peer_write (s_fixture_t *self, const void *data, size_t size)
{
    assert_int_equal (write (self->peer, data, size), (ssize_t) size);
}

//  Lets the client read whatever the peer wrote.
static void
s_pump (s_fixture_t *self)
{
    struct epoll_event events [4];
    int count = epoll_wait (self->epoll_fd, events, 4, 200);
    for (int at = 0; at < count; at++)
        zmtp_on_event (&self->conn, events [at].events, s_now_ms ());
}

//  A greeting as libzmq 4.3 sends it, with MECHANISM.
static void
s_greeting (uint8_t *greeting, const char *mechanism)
{
    memset (greeting, 0, ZMTP_GREETING_SIZE);
    greeting [0] = 0xff;
    greeting [9] = 0x7f;
    greeting [10] = 3;
    greeting [11] = 1;
    memcpy (greeting + 12, mechanism, strlen (mechanism));
}

//  A READY command frame with Socket-Type TYPE (NULL: none).
static size_t
s_ready (uint8_t *frame, const char *type)
{
    size_t at = 2;
    frame [at++] = 5;
    memcpy (frame + at, "READY", 5);
    at += 5;
    if (type) {
        frame [at++] = 11;
        memcpy (frame + at, "Socket-Type", 11);
        at += 11;
        frame [at++] = 0;
        frame [at++] = 0;
        frame [at++] = 0;
        frame [at++] = (uint8_t) strlen (type);
        memcpy (frame + at, type, strlen (type));
        at += strlen (type);
    }
    frame [0] = 0x04;
    frame [1] = (uint8_t) (at - 2);
    return at;
}

static int
s_setup (void **state)
{
    s_fixture_t *self = (s_fixture_t *) calloc (1, sizeof *self);
    snprintf (self->dir, sizeof self->dir, "/tmp/test_zmtp.XXXXXX");
    assert_non_null (mkdtemp (self->dir));
    snprintf (self->path, sizeof self->path, "%.60s/peer.ipc", self->dir);
    self->listener = socket (AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address;
    memset (&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    snprintf (address.sun_path, sizeof address.sun_path, "%s", self->path);
    assert_int_equal (bind (self->listener, (struct sockaddr *) &address,
                            sizeof address), 0);
    assert_int_equal (listen (self->listener, 8), 0);
    self->peer = -1;
    self->epoll_fd = epoll_create1 (0);
    char text [160], err [200];
    snprintf (text, sizeof text, "ipc://%s", self->path);
    assert_int_equal (zmtp_endpoint_parse (text, false, &self->endpoint, err,
                                           sizeof err), 0);
    zmtp_options_t options;
    zmtp_options_default (&options);
    options.max_frame = S_MAX_FRAME;
    options.heartbeat_ms = 0;
    options.reconnect_ms = 10;
    zmtp_handlers_t handlers = {s_on_ready, s_on_message, s_on_drop};
    assert_int_equal (zmtp_ctx_init (&self->ctx, self->epoll_fd, &options,
                                     &handlers, self), 0);
    *state = self;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *self = (s_fixture_t *) *state;
    zmtp_close (&self->conn);
    zmtp_ctx_fini (&self->ctx);
    if (self->peer >= 0)
        close (self->peer);
    close (self->listener);
    close (self->epoll_fd);
    unlink (self->path);
    rmdir (self->dir);
    free (self);
    return 0;
}

//  Opens the client as TYPE, accepts it and checks its greeting.
static void
s_open (s_fixture_t *self, zmtp_type_t type)
{
    assert_int_equal (zmtp_open (&self->conn, &self->ctx, type, 7,
                                 &self->endpoint, NULL, s_now_ms ()), 0);
    s_accept (self);
    //  ipc:// connects at once, or on the first writable event
    if (self->conn.state == ZMTP_CONNECTING)
        s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_GREETING);
    uint8_t greeting [ZMTP_GREETING_SIZE];
    s_peer_read (self, greeting, sizeof greeting);
    assert_int_equal (greeting [0], 0xff);
    assert_int_equal (greeting [9], 0x7f);
    assert_int_equal (greeting [10], 3);
    assert_int_equal (greeting [11], 0);
    assert_memory_equal (greeting + 12, "NULL\0", 5);
}

//  Opens and completes the handshake as a libzmq PEER_TYPE would.
static void
s_handshake (s_fixture_t *self, zmtp_type_t type, const char *peer_type)
{
    s_open (self, type);
    uint8_t greeting [ZMTP_GREETING_SIZE];
    s_greeting (greeting, "NULL");
    s_peer_write (self, greeting, sizeof greeting);
    uint8_t frame [64];
    size_t size = s_ready (frame, peer_type);
    s_peer_write (self, frame, size);
    for (int round = 0; round < 5 && self->conn.state != ZMTP_READY; round++)
        s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_READY);
    assert_int_equal (self->ready, 1);
    //  The client's READY names its socket type
    uint8_t ready [64];
    const char *name = type == ZMTP_DEALER ? "DEALER" : "SUB";
    size_t expected = 2 + 6 + 12 + 4 + strlen (name);
    s_peer_read (self, ready, expected);
    assert_int_equal (ready [0], 0x04);
    assert_int_equal (ready [1], expected - 2);
    assert_memory_equal (ready + 2, "\5READY\13Socket-Type", 18);
    assert_memory_equal (ready + 24, name, strlen (name));
}

static void
test_zmtp_handshake_and_messages (void **state)
{
    s_fixture_t *self = (s_fixture_t *) *state;
    s_handshake (self, ZMTP_SUB, "PUB");
    //  A topic frame with MORE, then a long body frame, as a PUB sends
    uint8_t message [2 + 4 + 9 + 1000];
    message [0] = 0x01;
    message [1] = 4;
    memcpy (message + 2, "all/", 4);
    message [6] = 0x02;
    memset (message + 7, 0, 8);
    message [13] = 1000 >> 8;
    message [14] = 1000 & 0xff;
    for (int at = 0; at < 1000; at++)
        message [15 + at] = (uint8_t) at;
    s_peer_write (self, message, sizeof message);
    s_pump (self);
    assert_int_equal (self->messages, 1);
    assert_int_equal (self->last_count, 2);
    assert_int_equal (self->last_sizes [0], 4);
    assert_int_equal (self->last_body_size, 1000);
    assert_memory_equal (self->last_body, message + 15, 1000);

    //  The same bytes one at a time: nothing until the last, then the same
    for (size_t at = 0; at < sizeof message; at++) {
        assert_int_equal (zmtp_feed (&self->conn, message + at, 1,
                                     s_now_ms ()), 0);
        assert_int_equal (self->messages, at + 1 < sizeof message ? 1 : 2);
    }
    assert_int_equal (self->last_body_size, 1000);
    assert_memory_equal (self->last_body, message + 15, 1000);

    //  Subscriptions the 3.0 way and a batch of messages: one write
    uint64_t writes = self->ctx.stats.writes;
    assert_int_equal (zmtp_subscribe (&self->conn, "all/", 4, true), 0);
    assert_int_equal (zmtp_subscribe (&self->conn, "node/a/", 7, false), 0);
    assert_int_equal (zmtp_flush (&self->conn), 0);
    assert_int_equal (self->ctx.stats.writes, writes + 1);
    uint8_t wire [2 + 5 + 2 + 8];
    s_peer_read (self, wire, sizeof wire);
    assert_memory_equal (wire, "\0\5\1all/\0\10\0node/a/", sizeof wire);
    assert_int_equal (self->drops, 0);
}

static void
test_zmtp_dealer_batches_and_long_frames (void **state)
{
    s_fixture_t *self = (s_fixture_t *) *state;
    s_handshake (self, ZMTP_DEALER, "ROUTER");
    uint8_t big [300];
    memset (big, 'x', sizeof big);
    uint64_t writes = self->ctx.stats.writes;
    for (int at = 0; at < 10; at++)
        assert_int_equal (zmtp_send (&self->conn, "hello", 5, false), 0);
    assert_int_equal (zmtp_send (&self->conn, big, sizeof big, false), 0);
    assert_int_equal (zmtp_queued (&self->conn), 10 * 7 + 9 + 300);
    assert_int_equal (zmtp_flush (&self->conn), 0);
    assert_int_equal (self->ctx.stats.writes, writes + 1);
    assert_int_equal (zmtp_queued (&self->conn), 0);
    uint8_t wire [10 * 7 + 9 + 300];
    s_peer_read (self, wire, sizeof wire);
    assert_memory_equal (wire, "\0\5hello", 7);
    assert_memory_equal (wire + 70, "\2\0\0\0\0\0\0\1\54", 9);
    assert_int_equal (wire [79], 'x');
    //  A message of more frames than are handed over: counted whole
    uint8_t many [6 * 3];
    for (int at = 0; at < 6; at++) {
        many [at * 3] = at < 5 ? 0x01 : 0x00;
        many [at * 3 + 1] = 1;
        many [at * 3 + 2] = (uint8_t) ('a' + at);
    }
    s_peer_write (self, many, sizeof many);
    s_pump (self);
    assert_int_equal (self->messages, 1);
    assert_int_equal (self->last_count, 6);
    assert_int_equal (self->conn.state, ZMTP_READY);
}

static void
test_zmtp_ping_gets_pong (void **state)
{
    s_fixture_t *self = (s_fixture_t *) *state;
    s_handshake (self, ZMTP_DEALER, "ROUTER");
    //  PING, TTL 0, context "ab": answered by PONG "ab"
    uint8_t ping [] = {0x04, 9, 4, 'P', 'I', 'N', 'G', 0, 0, 'a', 'b'};
    s_peer_write (self, ping, sizeof ping);
    s_pump (self);
    uint8_t pong [2 + 7];
    s_peer_read (self, pong, sizeof pong);
    assert_memory_equal (pong, "\4\7\4PONGab", sizeof pong);
    assert_int_equal (self->ctx.stats.pings_answered, 1);
    //  Our own PINGs, with the heartbeat on
    self->ctx.options.heartbeat_ms = 10;
    zmtp_tick (&self->conn, s_now_ms () + 100);
    uint8_t ours [2 + 7];
    s_peer_read (self, ours, sizeof ours);
    assert_memory_equal (ours, "\4\7\4PING\0\0", sizeof ours);
    assert_int_equal (self->ctx.stats.pings_sent, 1);
    uint8_t answer [] = {0x04, 5, 4, 'P', 'O', 'N', 'G'};
    s_peer_write (self, answer, sizeof answer);
    s_pump (self);
    assert_int_equal (self->ctx.stats.pongs_received, 1);
    //  A peer silent past the timeout is dropped
    self->ctx.options.timeout_ms = 50;
    zmtp_tick (&self->conn, s_now_ms () + 1000);
    assert_int_equal (self->conn.state, ZMTP_WAITING);
    assert_string_equal (self->reason,
                         "the peer fell silent (heartbeat timeout)");
}

//  Feeds BYTES after a good handshake and expects a drop for REASON.
static void
s_expect_drop (s_fixture_t *self, const uint8_t *bytes, size_t size,
               const char *reason)
{
    s_handshake (self, ZMTP_DEALER, "ROUTER");
    uint64_t errors = self->ctx.stats.protocol_errors;
    s_peer_write (self, bytes, size);
    s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_WAITING);
    assert_int_equal (self->drops, 1);
    assert_string_equal (self->reason, reason);
    assert_int_equal (self->ctx.stats.protocol_errors, errors + 1);
    assert_int_equal (self->conn.fd, -1);
    assert_int_equal (self->messages, 0);
}

static void
test_zmtp_refuses_oversized_frame (void **state)
{
    //  A long frame one byte past the limit: refused from its header,
    //  before its body arrives
    uint8_t frame [9] = {0x02, 0, 0, 0, 0, 0, 0, S_MAX_FRAME >> 8, 1};
    s_expect_drop ((s_fixture_t *) *state, frame, sizeof frame,
                   "frame larger than the limit");
}

static void
test_zmtp_refuses_huge_length (void **state)
{
    uint8_t frame [9] = {0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    s_expect_drop ((s_fixture_t *) *state, frame, sizeof frame,
                   "frame larger than the limit");
}

static void
test_zmtp_refuses_reserved_flags (void **state)
{
    uint8_t frame [3] = {0x80, 1, 'x'};
    s_expect_drop ((s_fixture_t *) *state, frame, sizeof frame,
                   "reserved frame flags set");
}

static void
test_zmtp_refuses_command_inside_message (void **state)
{
    uint8_t bytes [] = {0x01, 1, 'x', 0x04, 5, 4, 'P', 'O', 'N', 'G'};
    s_expect_drop ((s_fixture_t *) *state, bytes, sizeof bytes,
                   "command inside a message");
}

static void
test_zmtp_refuses_malformed_commands (void **state)
{
    //  A name longer than the command
    uint8_t bytes [] = {0x04, 3, 9, 'P', 'I'};
    s_expect_drop ((s_fixture_t *) *state, bytes, sizeof bytes,
                   "malformed command");
}

static void
test_zmtp_refuses_malformed_ping (void **state)
{
    uint8_t bytes [] = {0x04, 6, 4, 'P', 'I', 'N', 'G', 0};
    s_expect_drop ((s_fixture_t *) *state, bytes, sizeof bytes,
                   "malformed PING");
}

static void
test_zmtp_truncated_then_closed (void **state)
{
    s_fixture_t *self = (s_fixture_t *) *state;
    s_handshake (self, ZMTP_DEALER, "ROUTER");
    //  Half a frame: held, nothing handed over
    uint8_t half [] = {0x00, 10, 'a', 'b', 'c'};
    s_peer_write (self, half, sizeof half);
    s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_READY);
    assert_int_equal (self->messages, 0);
    assert_int_equal (self->conn.in_size, sizeof half);
    //  The peer goes away mid-frame: dropped, not a protocol error
    close (self->peer);
    self->peer = -1;
    s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_WAITING);
    assert_string_equal (self->reason, "closed by the peer");
    assert_int_equal (self->ctx.stats.protocol_errors, 0);
    assert_int_equal (self->ctx.stats.drops, 1);
    assert_int_equal (self->conn.in_size, 0);
    //  ...and reconnects after its backoff
    while (s_now_ms () < self->conn.due_ms)
        usleep (1000);
    zmtp_tick (&self->conn, s_now_ms ());
    s_accept (self);
    if (self->conn.state == ZMTP_CONNECTING)
        s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_GREETING);
    assert_int_equal (self->ctx.stats.connects, 2);
}

static void
test_zmtp_refuses_bad_handshakes (void **state)
{
    s_fixture_t *self = (s_fixture_t *) *state;
    struct {
        const char *mechanism;  //  In the peer's greeting
        uint8_t major;          //  Its version
        const char *type;       //  Its Socket-Type, NULL for none
        zmtp_type_t ours;
        const char *reason;
    } cases [] = {
        {"CURVE", 3, "ROUTER", ZMTP_DEALER,
         "the peer wants another security mechanism than NULL (CURVE?)"},
        {"NULL", 2, "ROUTER", ZMTP_DEALER, "the peer speaks ZMTP before 3.0"},
        {"NULL", 3, NULL, ZMTP_DEALER, "READY without Socket-Type"},
        {"NULL", 3, "PUB", ZMTP_DEALER, "the peer's socket type does not fit"},
        {"NULL", 3, "ROUTER", ZMTP_SUB, "the peer's socket type does not fit"},
    };
    for (size_t at = 0; at < sizeof cases / sizeof cases [0]; at++) {
        s_open (self, cases [at].ours);
        uint8_t greeting [ZMTP_GREETING_SIZE];
        s_greeting (greeting, cases [at].mechanism);
        greeting [10] = cases [at].major;
        s_peer_write (self, greeting, sizeof greeting);
        uint8_t frame [64];
        size_t size = s_ready (frame, cases [at].type);
        s_peer_write (self, frame, size);
        for (int round = 0; round < 3 && self->conn.state != ZMTP_WAITING;
             round++)
            s_pump (self);
        assert_int_equal (self->conn.state, ZMTP_WAITING);
        assert_string_equal (self->reason, cases [at].reason);
        assert_int_equal (self->ready, 0);
        assert_int_equal (self->ctx.stats.protocol_errors, at + 1);
        zmtp_close (&self->conn);
        close (self->peer);
        self->peer = -1;
    }
    //  Not ZMTP at all (an HTTP server, say)
    s_open (self, ZMTP_DEALER);
    s_peer_write (self, "HTTP/1.1 400", 12);
    s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_WAITING);
    assert_string_equal (self->reason, "not a ZMTP peer");
    zmtp_close (&self->conn);
    close (self->peer);
    self->peer = -1;
    //  A libzmq peer that wants CURVE sends its signature and closes
    uint64_t errors = self->ctx.stats.protocol_errors;
    s_open (self, ZMTP_DEALER);
    uint8_t signature [ZMTP_GREETING_SIZE];
    s_greeting (signature, "CURVE");
    s_peer_write (self, signature, 11);
    close (self->peer);
    self->peer = -1;
    for (int round = 0; round < 3 && self->conn.state != ZMTP_WAITING;
         round++)
        s_pump (self);
    assert_int_equal (self->conn.state, ZMTP_WAITING);
    assert_string_equal (self->reason, "the peer closed during the greeting "
                         "(does it want CURVE?)");
    assert_int_equal (self->ctx.stats.protocol_errors, errors + 1);
}

static void
test_zmtp_refused_connect_retries (void **state)
{
    s_fixture_t *self = (s_fixture_t *) *state;
    zmtp_endpoint_t nowhere;
    char err [200];
    assert_int_equal (zmtp_endpoint_parse ("ipc:///tmp/test_zmtp-nobody.ipc",
                                           false, &nowhere, err, sizeof err),
                      0);
    int64_t now_ms = s_now_ms ();
    assert_int_equal (zmtp_open (&self->conn, &self->ctx, ZMTP_DEALER, 1,
                                 &nowhere, NULL, now_ms), 0);
    assert_int_equal (self->conn.state, ZMTP_WAITING);
    assert_string_equal (self->reason, "connect refused");
    assert_true (self->conn.due_ms > now_ms);
    //  Sends are refused while it is not up, as ZMQ_IMMEDIATE does
    assert_int_equal (zmtp_send (&self->conn, "x", 1, false), -1);
    //  The wait doubles, up to the limit
    uint32_t first = self->conn.backoff_ms;
    zmtp_tick (&self->conn, self->conn.due_ms);
    assert_int_equal (self->conn.state, ZMTP_WAITING);
    assert_true (self->conn.backoff_ms > first);
    assert_int_equal (self->ctx.stats.refused, 2);
    //  Endpoints that are not spoken
    assert_int_equal (zmtp_endpoint_parse ("inproc://x", false, &nowhere,
                                           err, sizeof err), -1);
    assert_non_null (strstr (err, "only tcp:// and ipc://"));
    assert_int_equal (zmtp_endpoint_parse ("tcp://127.0.0.1", false,
                                           &nowhere, err, sizeof err), -1);
    assert_int_equal (zmtp_endpoint_parse ("127.0.0.2", true, &nowhere,
                                           err, sizeof err), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_zmtp_handshake_and_messages,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_zmtp_dealer_batches_and_long_frames, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_ping_gets_pong, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_refuses_oversized_frame,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_refuses_huge_length,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_refuses_reserved_flags,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_zmtp_refuses_command_inside_message, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_refuses_malformed_commands,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_refuses_malformed_ping,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_truncated_then_closed,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_refuses_bad_handshakes,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_zmtp_refused_connect_retries,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
