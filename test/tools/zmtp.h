/*  =========================================================================
    zmtp - a small non-blocking ZMTP 3.0 client, NULL mechanism only

    What gridswarm uses instead of two libzmq sockets per simulated agent:
    one plain TCP (or ipc://) connection per peer, driven from the caller's
    own epoll loop, with no I/O thread, no mailbox and no per-message
    allocation. It speaks to libzmq 4.x ROUTER, PUB and XPUB sockets as a
    DEALER or a SUB would:

    - greeting: 64 bytes, version 3.0 (so a libzmq peer takes
      subscriptions as messages whose first byte is 1, the 3.0 way),
      mechanism NULL, as client;
    - READY with Socket-Type DEALER or SUB (and an Identity when one is
      set); the peer's READY must name a socket type that fits;
    - frames short and long, the MORE flag, commands; a frame larger than
      max_frame, a reserved flag bit, a command in the middle of a message
      or a malformed command drops the connection (counted in
      zmtp_stats_t.protocol_errors, reason in the drop callback), as does
      a peer that closes during the greeting (libzmq does that when it
      wants another mechanism, CURVE);
    - PING is answered with PONG carrying its context; with
      heartbeat_ms > 0 the client sends its own PINGs (TTL ttl_ms) and
      drops a connection that brought nothing for timeout_ms;
    - sends go into an outbound buffer per connection; zmtp_flush writes
      all of it in one write () (the caller flushes once per loop pass),
      the rest on EPOLLOUT when the kernel takes only part of it;
    - a drop or a refused connect is retried after reconnect_ms, doubling
      up to reconnect_max_ms; the handshake must end within handshake_ms;
    - an optional local address to bind before connect (the port left to
      the kernel at connect time, IP_BIND_ADDRESS_NO_PORT).

    Not spoken: CURVE and PLAIN (CURVE runs keep libzmq), ZMTP 3.1's
    SUBSCRIBE commands, and the server side.

    Use: one zmtp_ctx_t per thread (its epoll descriptor, options,
    handlers, scratch buffer and counters) and any number of zmtp_t
    connections in it, each with a 64-bit tag that its epoll events carry
    in data.u64. The caller's loop hands every epoll event of a tag to
    zmtp_on_event, calls zmtp_flush on the connections it sent on before
    it sleeps, and calls zmtp_tick at zmtp_due_ms. Handlers run from
    inside zmtp_on_event and zmtp_tick; they may send on any connection
    of the context, but must not close the connection they are called
    for.

    Threading: a context and its connections belong to one thread.
    =========================================================================
*/
#ifndef GRID_ZMTP_H
#define GRID_ZMTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define ZMTP_MAX_FRAMES 4           //  Frames per message handed over
#define ZMTP_GREETING_SIZE 64

typedef enum {
    ZMTP_DEALER = 1,
    ZMTP_SUB = 2
} zmtp_type_t;

//  Where a connection state is; only ZMTP_READY carries messages.
typedef enum {
    ZMTP_IDLE = 0,              //  Not started, or closed
    ZMTP_CONNECTING,            //  connect () in progress
    ZMTP_GREETING,              //  Greeting sent, the peer's not yet read
    ZMTP_HANDSHAKE,             //  READY sent, the peer's not yet read
    ZMTP_READY,                 //  Messages flow
    ZMTP_WAITING                //  Dropped: reconnects at due_ms
} zmtp_state_t;

//  An endpoint, resolved once and shared by any number of connections.
typedef struct {
    struct sockaddr_storage address;
    socklen_t size;
    int family;                 //  AF_INET, AF_INET6 or AF_UNIX
} zmtp_endpoint_t;

//  One frame of a received message: borrowed, valid only inside the
//  message handler.
typedef struct {
    const uint8_t *data;
    size_t size;
} zmtp_frame_t;

typedef struct _zmtp_t zmtp_t;

//  What the owner hears. ARG is the context's handler_arg.
typedef struct {
    //  The handshake ended: the connection carries messages now (a SUB
    //  subscribes here, after every reconnect).
    void (*on_ready) (void *arg, zmtp_t *conn);
    //  A message of COUNT frames (COUNT may exceed ZMTP_MAX_FRAMES: then
    //  only the first ZMTP_MAX_FRAMES are in FRAMES).
    void (*on_message) (void *arg, zmtp_t *conn, const zmtp_frame_t *frames,
                        size_t count);
    //  The connection dropped (a reconnect is due); REASON is static text.
    void (*on_drop) (void *arg, zmtp_t *conn, const char *reason);
} zmtp_handlers_t;

typedef struct {
    int heartbeat_ms;           //  Our PING interval, 0 for none
    int timeout_ms;             //  Silence that drops a pinged connection
    int ttl_ms;                 //  TTL our PINGs carry
    int handshake_ms;           //  Connect to READY at most, 0: no limit
    int reconnect_ms;           //  First wait after a drop
    int reconnect_max_ms;       //  The wait doubles up to this
    int kernel_buffer;          //  SO_SNDBUF / SO_RCVBUF, 0: the default
    size_t max_frame;           //  Larger frames drop the connection
    size_t max_queued;          //  Outbound bytes at most; sends past it fail
} zmtp_options_t;

typedef struct {
    uint64_t connects;          //  connect () calls
    uint64_t ready;             //  Handshakes completed
    uint64_t drops;             //  Connections lost (any reason)
    uint64_t refused;           //  ...of which connects refused or failed
    uint64_t protocol_errors;   //  ...of which the peer broke ZMTP or
                                //  refused the handshake
    uint64_t pings_sent;
    uint64_t pongs_received;
    uint64_t pings_answered;    //  PONGs sent for the peer's PINGs
    uint64_t writes;            //  write () calls that moved bytes
    uint64_t messages_in;       //  Messages handed to on_message
    uint64_t messages_out;      //  Messages queued by zmtp_send
} zmtp_stats_t;

typedef struct {
    int epoll_fd;               //  The owner's epoll (level-triggered)
    zmtp_options_t options;
    zmtp_handlers_t handlers;
    void *handler_arg;
    uint8_t *scratch;           //  Read buffer shared by the connections
    size_t scratch_size;
    uint64_t random;            //  xorshift state, for reconnect jitter
    zmtp_stats_t stats;
} zmtp_ctx_t;

struct _zmtp_t {
    zmtp_ctx_t *ctx;            //  Its context
    const zmtp_endpoint_t *peer;    //  Where it connects (borrowed)
    const zmtp_endpoint_t *source;  //  Bind here first, or NULL (borrowed)
    uint64_t tag;               //  epoll data.u64 of its events
    int fd;                     //  -1 when there is no socket
    uint8_t type;               //  zmtp_type_t
    uint8_t state;              //  zmtp_state_t
    bool want_out;              //  EPOLLOUT is in the interest set
    uint8_t identity_size;
    const uint8_t *identity;    //  Sent in READY when set (borrowed)
    uint8_t *in;                //  Unparsed bytes carried between reads
    size_t in_size;
    size_t in_room;
    uint8_t *out;               //  Queued bytes, out_sent of them written
    size_t out_size;
    size_t out_sent;
    size_t out_room;
    uint32_t backoff_ms;        //  Current reconnect wait
    int64_t due_ms;             //  When zmtp_tick wants to run, or INT64_MAX
    int64_t since_ms;           //  Connect start (handshake limit)
    int64_t last_in_ms;         //  Last bytes from the peer
    int64_t next_ping_ms;       //  Our next PING
    int64_t armed_ms;           //  The owner's: the due time it scheduled
};

//  Fills OPTIONS with gridswarm's defaults (as its libzmq sockets).
void zmtp_options_default (zmtp_options_t *options);

//  Sets up CTX over EPOLL_FD. Returns 0, or -1 (out of memory).
int zmtp_ctx_init (zmtp_ctx_t *ctx, int epoll_fd,
                   const zmtp_options_t *options,
                   const zmtp_handlers_t *handlers, void *handler_arg);

//  Frees what CTX holds (not its connections: close them first).
void zmtp_ctx_fini (zmtp_ctx_t *ctx);

//  Parses "tcp://HOST:PORT" (numeric address or name, resolved now) or
//  "ipc://PATH" into ENDPOINT. For a source address ("tcp://A:0" or a
//  bare address) pass SOURCE true: the port may be absent. Returns 0, or
//  -1 with the reason in ERR.
int zmtp_endpoint_parse (const char *text, bool source,
                         zmtp_endpoint_t *endpoint, char *err,
                         size_t err_len);

//  Sets up CONN (of TYPE, tagged TAG) to connect to PEER from SOURCE
//  (NULL for any) and starts connecting at once. PEER and SOURCE must
//  outlive the connection. Returns 0, or -1 when no socket could be made
//  (errno; nothing is retried then).
int zmtp_open (zmtp_t *conn, zmtp_ctx_t *ctx, zmtp_type_t type,
               uint64_t tag, const zmtp_endpoint_t *peer,
               const zmtp_endpoint_t *source, int64_t now_ms);

//  Closes CONN's socket and frees its buffers; no reconnect follows.
//  Whatever is queued and not written is lost (flush first).
void zmtp_close (zmtp_t *conn);

//  Handles the epoll EVENTS of CONN: connect completion, reads (handlers
//  run from here), writes of what is still queued, hang-ups.
void zmtp_on_event (zmtp_t *conn, uint32_t events, int64_t now_ms);

//  Runs CONN's timers (reconnect, handshake limit, PING, silence). Call at
//  or after conn->due_ms; it sets the next due_ms.
void zmtp_tick (zmtp_t *conn, int64_t now_ms);

//  Queues one frame of a message (MORE: another frame follows). Only on a
//  READY connection, as a libzmq socket with ZMQ_IMMEDIATE. Returns 0, or
//  -1 when not ready (EAGAIN) or past max_queued (ENOBUFS); a refused
//  frame of a multi-frame message leaves earlier frames queued, so send
//  such messages whole or not at all.
int zmtp_send (zmtp_t *conn, const void *data, size_t size, bool more);

//  A SUB's subscription (SUBSCRIBE true) or its end for TOPIC, as ZMTP 3.0
//  does: a message of one frame, 1 or 0 then the topic. 0 or -1 as
//  zmtp_send.
int zmtp_subscribe (zmtp_t *conn, const void *topic, size_t size,
                    bool subscribe);

//  Writes what CONN has queued, in one write () when the kernel takes it
//  all; the rest goes when the socket is writable. Returns 0, or -1 when
//  the connection dropped.
int zmtp_flush (zmtp_t *conn);

//  Bytes CONN has queued and not yet written.
size_t zmtp_queued (const zmtp_t *conn);

//  Feeds SIZE bytes to CONN's parser as if they had been read (tests).
//  Returns 0, or -1 when they broke the protocol (the connection is
//  dropped, as from a read).
int zmtp_feed (zmtp_t *conn, const void *data, size_t size, int64_t now_ms);

//  The name of STATE, for logs.
const char *zmtp_state_name (zmtp_state_t state);

#endif
