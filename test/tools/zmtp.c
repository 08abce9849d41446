/*  =========================================================================
    zmtp - a small non-blocking ZMTP 3.0 client, NULL mechanism only

    See zmtp.h. The wire (rfc.zeromq.org/spec/23, ZMTP 3.0):

        greeting = %xFF 8OCTET %x7F major minor mechanism(20) as-server
                   filler(31)
        frame    = flags size body
        flags    = %b00000 command long more
        size     = OCTET when short, 8 OCTETs network order when long
        command  = name-size name data
        READY    = "READY" *(name-size name value-size(4) value)
        PING     = "PING" ttl(2, deciseconds) context(0..16)
        PONG     = "PONG" context
    =========================================================================
*/
#include "zmtp.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define S_FLAG_MORE 0x01
#define S_FLAG_LONG 0x02
#define S_FLAG_COMMAND 0x04
#define S_SCRATCH_SIZE (64 * 1024)      //  One read at most
#define S_READS_PER_EVENT 4             //  Then other connections' turn
#define S_OUT_KEEP (16 * 1024)          //  Larger emptied buffers are freed
#define S_IN_STEP (16 * 1024)           //  Carried buffer growth
#define S_MESSAGE_SLACK 65536           //  Past max_frame, for the other
                                        //  frames of one message
#ifndef IP_BIND_ADDRESS_NO_PORT
#define IP_BIND_ADDRESS_NO_PORT 24
#endif

static void s_drop (zmtp_t *conn, const char *reason, int64_t now_ms);

void
zmtp_options_default (zmtp_options_t *options)
{
    memset (options, 0, sizeof *options);
    options->heartbeat_ms = 5000;
    options->timeout_ms = 15000;
    options->ttl_ms = 0;
    options->handshake_ms = 10000;
    options->reconnect_ms = 100;
    options->reconnect_max_ms = 10000;
    options->kernel_buffer = 65536;
    options->max_frame = 16 * 1024 * 1024;
    options->max_queued = 8 * 1024 * 1024;
}

int
zmtp_ctx_init (zmtp_ctx_t *ctx, int epoll_fd, const zmtp_options_t *options,
               const zmtp_handlers_t *handlers, void *handler_arg)
{
    memset (ctx, 0, sizeof *ctx);
    ctx->epoll_fd = epoll_fd;
    ctx->options = *options;
    ctx->handlers = *handlers;
    ctx->handler_arg = handler_arg;
    ctx->scratch_size = S_SCRATCH_SIZE;
    ctx->scratch = (uint8_t *) malloc (ctx->scratch_size);
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    ctx->random = ((uint64_t) ts.tv_nsec << 20) ^ (uint64_t) getpid ()
                  ^ (uint64_t) (uintptr_t) ctx;
    if (!ctx->random)
        ctx->random = 1;
    return ctx->scratch ? 0 : -1;
}

void
zmtp_ctx_fini (zmtp_ctx_t *ctx)
{
    free (ctx->scratch);
    ctx->scratch = NULL;
}

const char *
zmtp_state_name (zmtp_state_t state)
{
    switch (state) {
        case ZMTP_IDLE: return "idle";
        case ZMTP_CONNECTING: return "connecting";
        case ZMTP_GREETING: return "greeting";
        case ZMTP_HANDSHAKE: return "handshake";
        case ZMTP_READY: return "ready";
        case ZMTP_WAITING: return "waiting";
    }
    return "?";
}

//  ---------------------------------------------------------------------
//  Endpoints

int
zmtp_endpoint_parse (const char *text, bool source,
                     zmtp_endpoint_t *endpoint, char *err, size_t err_len)
{
    memset (endpoint, 0, sizeof *endpoint);
    if (strncmp (text, "ipc://", 6) == 0 && !source) {
        struct sockaddr_un *un = (struct sockaddr_un *) &endpoint->address;
        const char *path = text + 6;
        if (!*path || strlen (path) >= sizeof un->sun_path) {
            snprintf (err, err_len, "%s: the path is empty or too long",
                      text);
            return -1;
        }
        un->sun_family = AF_UNIX;
        strcpy (un->sun_path, path);
        endpoint->size = (socklen_t) (offsetof (struct sockaddr_un, sun_path)
                                      + strlen (path) + 1);
        endpoint->family = AF_UNIX;
        return 0;
    }
    const char *rest = text;
    if (strncmp (rest, "tcp://", 6) == 0)
        rest += 6;
    else
    if (!source) {
        snprintf (err, err_len, "%s: only tcp:// and ipc:// are spoken",
                  text);
        return -1;
    }
    char host [256];
    const char *port = NULL;
    if (*rest == '[') {
        const char *close = strchr (rest, ']');
        if (!close || (size_t) (close - rest - 1) >= sizeof host) {
            snprintf (err, err_len, "%s: bad IPv6 address", text);
            return -1;
        }
        memcpy (host, rest + 1, (size_t) (close - rest - 1));
        host [close - rest - 1] = 0;
        port = close [1] == ':' ? close + 2 : NULL;
    }
    else {
        const char *colon = strrchr (rest, ':');
        size_t len = colon ? (size_t) (colon - rest) : strlen (rest);
        if (len >= sizeof host) {
            snprintf (err, err_len, "%s: the host is too long", text);
            return -1;
        }
        memcpy (host, rest, len);
        host [len] = 0;
        port = colon ? colon + 1 : NULL;
    }
    if (!source && (!port || !*port)) {
        snprintf (err, err_len, "%s: no port", text);
        return -1;
    }
    if (source && port && strcmp (port, "*") == 0)
        port = NULL;
    struct addrinfo hints, *found = NULL;
    memset (&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = source ? AI_PASSIVE : 0;
    int rc = getaddrinfo (strcmp (host, "*") == 0 ? NULL : host,
                          port ? port : "0", &hints, &found);
    if (rc != 0 || !found) {
        snprintf (err, err_len, "%s: %s", text,
                  rc ? gai_strerror (rc) : "no address");
        return -1;
    }
    memcpy (&endpoint->address, found->ai_addr, found->ai_addrlen);
    endpoint->size = found->ai_addrlen;
    endpoint->family = found->ai_family;
    freeaddrinfo (found);
    return 0;
}

//  ---------------------------------------------------------------------
//  Outbound buffer

static uint64_t
s_random (zmtp_ctx_t *ctx)
{
    uint64_t x = ctx->random;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ctx->random = x;
    return x;
}

//  Room for SIZE more bytes at the end of CONN's outbound buffer; NULL
//  past max_queued or out of memory.
static uint8_t *
s_reserve (zmtp_t *conn, size_t size)
{
    size_t pending = conn->out_size - conn->out_sent;
    if (pending + size > conn->ctx->options.max_queued) {
        errno = ENOBUFS;
        return NULL;
    }
    if (conn->out_size + size > conn->out_room && conn->out_sent) {
        memmove (conn->out, conn->out + conn->out_sent, pending);
        conn->out_size = pending;
        conn->out_sent = 0;
    }
    if (conn->out_size + size > conn->out_room) {
        size_t room = conn->out_room ? conn->out_room : 1024;
        while (room < conn->out_size + size)
            room *= 2;
        uint8_t *bigger = (uint8_t *) realloc (conn->out, room);
        if (!bigger) {
            errno = ENOMEM;
            return NULL;
        }
        conn->out = bigger;
        conn->out_room = room;
    }
    uint8_t *at = conn->out + conn->out_size;
    conn->out_size += size;
    return at;
}

//  Queues a frame header for SIZE bytes with FLAGS, then the body.
static int
s_queue_frame (zmtp_t *conn, uint8_t flags, const void *data, size_t size)
{
    size_t header = size > 255 ? 9 : 2;
    uint8_t *at = s_reserve (conn, header + size);
    if (!at)
        return -1;
    if (size > 255) {
        at [0] = flags | S_FLAG_LONG;
        uint64_t length = size;
        for (int byte = 8; byte >= 1; byte--) {
            at [byte] = (uint8_t) (length & 0xff);
            length >>= 8;
        }
    }
    else {
        at [0] = flags;
        at [1] = (uint8_t) size;
    }
    if (size)
        memcpy (at + header, data, size);
    return 0;
}

static void
s_want_out (zmtp_t *conn, bool want)
{
    if (conn->want_out == want || conn->fd < 0)
        return;
    struct epoll_event event;
    memset (&event, 0, sizeof event);
    event.events = EPOLLIN | (want ? EPOLLOUT : 0);
    event.data.u64 = conn->tag;
    epoll_ctl (conn->ctx->epoll_fd, EPOLL_CTL_MOD, conn->fd, &event);
    conn->want_out = want;
}

size_t
zmtp_queued (const zmtp_t *conn)
{
    return conn->out_size - conn->out_sent;
}

int
zmtp_flush (zmtp_t *conn)
{
    if (conn->fd < 0 || conn->state == ZMTP_CONNECTING
        || conn->state == ZMTP_IDLE || conn->state == ZMTP_WAITING)
        return conn->state == ZMTP_WAITING ? -1 : 0;
    size_t pending = conn->out_size - conn->out_sent;
    if (!pending)
        return 0;
    ssize_t sent = send (conn->fd, conn->out + conn->out_sent, pending,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            s_want_out (conn, true);
            return 0;
        }
        struct timespec ts;
        clock_gettime (CLOCK_MONOTONIC, &ts);
        s_drop (conn, "write failed",
                (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
        return -1;
    }
    conn->ctx->stats.writes++;
    conn->out_sent += (size_t) sent;
    if (conn->out_sent < conn->out_size) {
        s_want_out (conn, true);
        return 0;
    }
    conn->out_sent = conn->out_size = 0;
    if (conn->out_room > S_OUT_KEEP) {
        free (conn->out);
        conn->out = NULL;
        conn->out_room = 0;
    }
    s_want_out (conn, false);
    return 0;
}

int
zmtp_send (zmtp_t *conn, const void *data, size_t size, bool more)
{
    if (conn->state != ZMTP_READY) {
        errno = EAGAIN;
        return -1;
    }
    if (s_queue_frame (conn, more ? S_FLAG_MORE : 0, data, size) != 0)
        return -1;
    if (!more)
        conn->ctx->stats.messages_out++;
    return 0;
}

int
zmtp_subscribe (zmtp_t *conn, const void *topic, size_t size,
                bool subscribe)
{
    if (conn->state != ZMTP_READY) {
        errno = EAGAIN;
        return -1;
    }
    uint8_t small [256];
    uint8_t *body = size + 1 <= sizeof small ? small
                                               : (uint8_t *) malloc (size + 1);
    if (!body)
        return -1;
    body [0] = subscribe ? 1 : 0;
    memcpy (body + 1, topic, size);
    int rc = s_queue_frame (conn, 0, body, size + 1);
    if (body != small)
        free (body);
    return rc;
}

//  ---------------------------------------------------------------------
//  Connection life

static void
s_close_socket (zmtp_t *conn)
{
    if (conn->fd >= 0) {
        epoll_ctl (conn->ctx->epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
        close (conn->fd);
    }
    conn->fd = -1;
    conn->want_out = false;
    free (conn->in);
    conn->in = NULL;
    conn->in_size = conn->in_room = 0;
    free (conn->out);
    conn->out = NULL;
    conn->out_size = conn->out_sent = conn->out_room = 0;
}

//  Loses CONN's connection for REASON; a reconnect is due after the
//  backoff, give or take half of it.
static void
s_drop (zmtp_t *conn, const char *reason, int64_t now_ms)
{
    if (conn->state == ZMTP_IDLE || conn->state == ZMTP_WAITING)
        return;
    s_close_socket (conn);
    zmtp_ctx_t *ctx = conn->ctx;
    ctx->stats.drops++;
    conn->state = ZMTP_WAITING;
    uint32_t wait_ms = conn->backoff_ms ? conn->backoff_ms
                                        : (uint32_t) ctx->options.reconnect_ms;
    if (wait_ms == 0)
        wait_ms = 1;
    conn->due_ms = now_ms + wait_ms / 2 + (int64_t) (s_random (ctx) % wait_ms);
    uint32_t next = wait_ms * 2;
    if (next > (uint32_t) ctx->options.reconnect_max_ms)
        next = (uint32_t) ctx->options.reconnect_max_ms;
    conn->backoff_ms = next > wait_ms ? next : wait_ms;
    if (ctx->handlers.on_drop)
        ctx->handlers.on_drop (ctx->handler_arg, conn, reason);
}

static void
s_protocol_error (zmtp_t *conn, const char *reason, int64_t now_ms)
{
    conn->ctx->stats.protocol_errors++;
    s_drop (conn, reason, now_ms);
}

static void
s_set_handshake_due (zmtp_t *conn)
{
    int limit = conn->ctx->options.handshake_ms;
    conn->due_ms = limit > 0 ? conn->since_ms + limit : INT64_MAX;
}

//  The TCP or IPC connection is up: greet.
static void
s_connected (zmtp_t *conn, int64_t now_ms)
{
    conn->state = ZMTP_GREETING;
    conn->last_in_ms = now_ms;
    uint8_t *greeting = s_reserve (conn, ZMTP_GREETING_SIZE);
    if (!greeting) {
        s_drop (conn, "out of memory", now_ms);
        return;
    }
    memset (greeting, 0, ZMTP_GREETING_SIZE);
    greeting [0] = 0xff;
    greeting [9] = 0x7f;
    greeting [10] = 3;          //  ZMTP 3.0: subscriptions as messages
    greeting [11] = 0;
    memcpy (greeting + 12, "NULL", 4);
    greeting [32] = 0;          //  As client
    s_want_out (conn, false);
    zmtp_flush (conn);
}

//  Makes a socket and starts connecting. Returns 0, or -1 when no socket
//  could be made (CONN is left without one, not dropped).
static int
s_start (zmtp_t *conn, int64_t now_ms)
{
    zmtp_ctx_t *ctx = conn->ctx;
    const zmtp_endpoint_t *peer = conn->peer;
    conn->since_ms = now_ms;
    conn->state = ZMTP_CONNECTING;
    s_set_handshake_due (conn);
    int fd = socket (peer->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                     0);
    if (fd < 0)
        return -1;
    conn->fd = fd;
    ctx->stats.connects++;
    if (peer->family != AF_UNIX) {
        int one = 1;
        setsockopt (fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (ctx->options.kernel_buffer > 0) {
            setsockopt (fd, SOL_SOCKET, SO_SNDBUF,
                        &ctx->options.kernel_buffer, sizeof (int));
            setsockopt (fd, SOL_SOCKET, SO_RCVBUF,
                        &ctx->options.kernel_buffer, sizeof (int));
        }
        if (conn->source) {
            //  The port is chosen at connect time, per destination, so
            //  that one source address serves more than 28,000 peers
            setsockopt (fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one,
                        sizeof one);
            if (bind (fd, (const struct sockaddr *) &conn->source->address,
                      conn->source->size) != 0) {
                ctx->stats.refused++;
                s_drop (conn, "cannot bind the source address", now_ms);
                return 0;
            }
        }
    }
    struct epoll_event event;
    memset (&event, 0, sizeof event);
    event.events = EPOLLIN | EPOLLOUT;
    event.data.u64 = conn->tag;
    if (epoll_ctl (ctx->epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        ctx->stats.refused++;
        s_drop (conn, "cannot watch the socket", now_ms);
        return 0;
    }
    conn->want_out = true;
    int rc = connect (fd, (const struct sockaddr *) &peer->address,
                      peer->size);
    if (rc == 0)
        s_connected (conn, now_ms);
    else
    if (errno != EINPROGRESS && errno != EAGAIN && errno != EINTR) {
        ctx->stats.refused++;
        s_drop (conn, "connect refused", now_ms);
    }
    return 0;
}

int
zmtp_open (zmtp_t *conn, zmtp_ctx_t *ctx, zmtp_type_t type, uint64_t tag,
           const zmtp_endpoint_t *peer, const zmtp_endpoint_t *source,
           int64_t now_ms)
{
    memset (conn, 0, sizeof *conn);
    conn->ctx = ctx;
    conn->peer = peer;
    conn->source = source && peer->family != AF_UNIX ? source : NULL;
    conn->tag = tag;
    conn->fd = -1;
    conn->type = (uint8_t) type;
    conn->armed_ms = INT64_MAX;
    conn->due_ms = INT64_MAX;
    if (s_start (conn, now_ms) != 0) {
        conn->state = ZMTP_IDLE;
        conn->due_ms = INT64_MAX;
        return -1;
    }
    return 0;
}

void
zmtp_close (zmtp_t *conn)
{
    if (conn->fd >= 0) {
        //  Read what waits, so that close () sends FIN, not RST: a RST
        //  can make the peer discard the last messages it has not read
        while (recv (conn->fd, conn->ctx->scratch, conn->ctx->scratch_size,
                     MSG_DONTWAIT) > 0)
            ;
        shutdown (conn->fd, SHUT_WR);
    }
    s_close_socket (conn);
    conn->state = ZMTP_IDLE;
    conn->due_ms = INT64_MAX;
}

//  ---------------------------------------------------------------------
//  Reading

static uint32_t
s_be32 (const uint8_t *at)
{
    return ((uint32_t) at [0] << 24) | ((uint32_t) at [1] << 16)
           | ((uint32_t) at [2] << 8) | at [3];
}

static bool
s_name_is (const uint8_t *data, size_t size, const char *name)
{
    size_t len = strlen (name);
    return size >= 1 + len && data [0] == len
           && memcmp (data + 1, name, len) == 0;
}

//  Checks the peer's READY: returns NULL, or why it is refused.
static const char *
s_check_ready (zmtp_t *conn, const uint8_t *data, size_t size)
{
    if (s_name_is (data, size, "ERROR"))
        return "the peer refused the handshake (ERROR)";
    if (!s_name_is (data, size, "READY"))
        return "expected READY";
    size_t at = 6;
    bool typed = false;
    while (at < size) {
        size_t name_size = data [at];
        if (name_size == 0 || at + 1 + name_size + 4 > size)
            return "malformed READY property";
        const uint8_t *name = data + at + 1;
        uint32_t value_size = s_be32 (data + at + 1 + name_size);
        const uint8_t *value = name + name_size + 4;
        if ((size_t) value_size > size - (at + 1 + name_size + 4))
            return "malformed READY property value";
        if (name_size == 11 && strncasecmp ((const char *) name,
                                            "Socket-Type", 11) == 0) {
            typed = true;
            bool fits
                = conn->type == ZMTP_DEALER
                      ? (value_size == 6
                         && (memcmp (value, "ROUTER", 6) == 0
                             || memcmp (value, "DEALER", 6) == 0))
                      : ((value_size == 3 && memcmp (value, "PUB", 3) == 0)
                         || (value_size == 4
                             && memcmp (value, "XPUB", 4) == 0));
            if (!fits)
                return "the peer's socket type does not fit";
        }
        at += 1 + name_size + 4 + value_size;
    }
    return typed ? NULL : "READY without Socket-Type";
}

static void
s_queue_ready (zmtp_t *conn)
{
    uint8_t body [6 + 12 + 4 + 6 + 9 + 4 + 255];
    size_t at = 0;
    body [at++] = 5;
    memcpy (body + at, "READY", 5);
    at += 5;
    body [at++] = 11;
    memcpy (body + at, "Socket-Type", 11);
    at += 11;
    const char *type = conn->type == ZMTP_DEALER ? "DEALER" : "SUB";
    size_t len = strlen (type);
    body [at++] = 0;
    body [at++] = 0;
    body [at++] = 0;
    body [at++] = (uint8_t) len;
    memcpy (body + at, type, len);
    at += len;
    if (conn->identity_size) {
        body [at++] = 8;
        memcpy (body + at, "Identity", 8);
        at += 8;
        body [at++] = 0;
        body [at++] = 0;
        body [at++] = 0;
        body [at++] = conn->identity_size;
        memcpy (body + at, conn->identity, conn->identity_size);
        at += conn->identity_size;
    }
    s_queue_frame (conn, S_FLAG_COMMAND, body, at);
}

//  A command on a READY connection. Returns 0, or -1 when it dropped.
static int
s_on_command (zmtp_t *conn, const uint8_t *data, size_t size,
              int64_t now_ms)
{
    zmtp_ctx_t *ctx = conn->ctx;
    if (size < 1 || (size_t) data [0] + 1 > size) {
        s_protocol_error (conn, "malformed command", now_ms);
        return -1;
    }
    if (s_name_is (data, size, "PING")) {
        if (size < 7 || size > 7 + 16) {
            s_protocol_error (conn, "malformed PING", now_ms);
            return -1;
        }
        uint8_t pong [5 + 16];
        pong [0] = 4;
        memcpy (pong + 1, "PONG", 4);
        memcpy (pong + 5, data + 7, size - 7);
        if (s_queue_frame (conn, S_FLAG_COMMAND, pong, 5 + size - 7) == 0)
            ctx->stats.pings_answered++;
        return 0;
    }
    if (s_name_is (data, size, "PONG")) {
        ctx->stats.pongs_received++;
        return 0;
    }
    if (s_name_is (data, size, "ERROR")) {
        s_protocol_error (conn, "the peer sent ERROR", now_ms);
        return -1;
    }
    //  Other commands (a later ZMTP's) are ignored
    return 0;
}

//  Parses BUF [0..LEN) for CONN: the greeting, the handshake, then
//  messages, handed to the handler. Returns how many bytes were used
//  (the rest starts an incomplete unit, which needs *NEED_P bytes in all
//  when that is known, else 0), or -1 when the connection dropped.
static ssize_t
s_parse (zmtp_t *conn, const uint8_t *buf, size_t len, size_t *need_p,
         int64_t now_ms)
{
    zmtp_ctx_t *ctx = conn->ctx;
    size_t max_frame = ctx->options.max_frame;
    size_t pos = 0;
    size_t start = 0;           //  Where the current message began
    zmtp_frame_t frames [ZMTP_MAX_FRAMES];
    size_t count = 0;
    *need_p = 0;
    if (len)
        conn->last_in_ms = now_ms;
    while (true) {
        if (conn->state == ZMTP_GREETING) {
            if (len - pos < ZMTP_GREETING_SIZE) {
                //  The signature is checked as soon as it is here
                if (len - pos >= 1 && buf [pos] != 0xff) {
                    s_protocol_error (conn, "not a ZMTP peer", now_ms);
                    return -1;
                }
                *need_p = ZMTP_GREETING_SIZE;
                return (ssize_t) pos;
            }
            const uint8_t *greeting = buf + pos;
            if (greeting [0] != 0xff || (greeting [9] & 1) != 1) {
                s_protocol_error (conn, "not a ZMTP peer", now_ms);
                return -1;
            }
            if (greeting [10] < 3) {
                s_protocol_error (conn, "the peer speaks ZMTP before 3.0",
                                  now_ms);
                return -1;
            }
            if (memcmp (greeting + 12, "NULL", 4) != 0
                || greeting [16] != 0) {
                s_protocol_error (conn, "the peer wants another security "
                                  "mechanism than NULL (CURVE?)", now_ms);
                return -1;
            }
            pos += ZMTP_GREETING_SIZE;
            start = pos;
            conn->state = ZMTP_HANDSHAKE;
            s_queue_ready (conn);
            continue;
        }
        if (len - pos < 2) {
            if (len - pos == 1 && (buf [pos] & ~0x07)) {
                s_protocol_error (conn, "reserved frame flags set", now_ms);
                return -1;
            }
            break;
        }
        uint8_t flags = buf [pos];
        if (flags & ~0x07) {
            s_protocol_error (conn, "reserved frame flags set", now_ms);
            return -1;
        }
        size_t header = (flags & S_FLAG_LONG) ? 9 : 2;
        if (len - pos < header)
            break;
        uint64_t size = 0;
        if (flags & S_FLAG_LONG)
            for (int byte = 1; byte <= 8; byte++)
                size = (size << 8) | buf [pos + (size_t) byte];
        else
            size = buf [pos + 1];
        bool command = (flags & S_FLAG_COMMAND) != 0;
        if (size > max_frame) {
            s_protocol_error (conn, "frame larger than the limit", now_ms);
            return -1;
        }
        if (command && (flags & S_FLAG_MORE)) {
            s_protocol_error (conn, "command with the MORE flag", now_ms);
            return -1;
        }
        if (command && count) {
            s_protocol_error (conn, "command inside a message", now_ms);
            return -1;
        }
        if ((pos - start) + header + size > max_frame + S_MESSAGE_SLACK) {
            s_protocol_error (conn, "message larger than the limit", now_ms);
            return -1;
        }
        if (len - pos < header + size) {
            *need_p = (pos - start) + header + (size_t) size;
            break;
        }
        const uint8_t *body = buf + pos + header;
        pos += header + (size_t) size;
        if (conn->state == ZMTP_HANDSHAKE) {
            const char *why = command ? s_check_ready (conn, body, size)
                                      : "a message before READY";
            if (why) {
                s_protocol_error (conn, why, now_ms);
                return -1;
            }
            conn->state = ZMTP_READY;
            conn->backoff_ms = 0;
            ctx->stats.ready++;
            start = pos;
            if (ctx->options.heartbeat_ms > 0) {
                conn->next_ping_ms = now_ms + ctx->options.heartbeat_ms;
                conn->due_ms = conn->next_ping_ms;
            }
            else
                conn->due_ms = INT64_MAX;
            if (ctx->handlers.on_ready)
                ctx->handlers.on_ready (ctx->handler_arg, conn);
            continue;
        }
        if (command) {
            if (s_on_command (conn, body, size, now_ms) != 0)
                return -1;
            start = pos;
            continue;
        }
        if (count < ZMTP_MAX_FRAMES) {
            frames [count].data = body;
            frames [count].size = (size_t) size;
        }
        count++;
        if (flags & S_FLAG_MORE)
            continue;
        ctx->stats.messages_in++;
        if (ctx->handlers.on_message)
            ctx->handlers.on_message (ctx->handler_arg, conn, frames, count);
        count = 0;
        start = pos;
        if (conn->state != ZMTP_READY)
            return -1;
    }
    return (ssize_t) start;
}

//  Keeps BUF [USED..LEN) in CONN's carried buffer, room for NEED bytes.
static int
s_carry (zmtp_t *conn, const uint8_t *buf, size_t len, size_t used,
         size_t need)
{
    size_t rest = len - used;
    if (rest == 0) {
        free (conn->in);
        conn->in = NULL;
        conn->in_size = conn->in_room = 0;
        return 0;
    }
    size_t room = need > rest ? need : rest;
    if (buf == conn->in) {
        memmove (conn->in, conn->in + used, rest);
        conn->in_size = rest;
        if (room > conn->in_room) {
            uint8_t *bigger = (uint8_t *) realloc (conn->in, room);
            if (!bigger)
                return -1;
            conn->in = bigger;
            conn->in_room = room;
        }
        return 0;
    }
    free (conn->in);
    conn->in = (uint8_t *) malloc (room);
    if (!conn->in) {
        conn->in_size = conn->in_room = 0;
        return -1;
    }
    memcpy (conn->in, buf + used, rest);
    conn->in_size = rest;
    conn->in_room = room;
    return 0;
}

//  Parses BUF and keeps what is left. Returns 0, or -1 when it dropped.
static int
s_consume (zmtp_t *conn, const uint8_t *buf, size_t len, int64_t now_ms)
{
    size_t need = 0;
    ssize_t used = s_parse (conn, buf, len, &need, now_ms);
    if (used < 0)
        return -1;
    if (s_carry (conn, buf, len, (size_t) used, need) != 0) {
        s_drop (conn, "out of memory", now_ms);
        return -1;
    }
    return 0;
}

int
zmtp_feed (zmtp_t *conn, const void *data, size_t size, int64_t now_ms)
{
    if (conn->state != ZMTP_GREETING && conn->state != ZMTP_HANDSHAKE
        && conn->state != ZMTP_READY)
        return -1;
    if (!conn->in_size)
        return s_consume (conn, (const uint8_t *) data, size, now_ms);
    if (conn->in_size + size > conn->in_room) {
        uint8_t *bigger = (uint8_t *) realloc (conn->in, conn->in_size + size);
        if (!bigger) {
            s_drop (conn, "out of memory", now_ms);
            return -1;
        }
        conn->in = bigger;
        conn->in_room = conn->in_size + size;
    }
    memcpy (conn->in + conn->in_size, data, size);
    conn->in_size += size;
    return s_consume (conn, conn->in, conn->in_size, now_ms);
}

//  Reads what waits, a few reads at most. Returns 0, or -1 when the
//  connection dropped.
static int
s_read (zmtp_t *conn, int64_t now_ms)
{
    zmtp_ctx_t *ctx = conn->ctx;
    for (int round = 0; round < S_READS_PER_EVENT; round++) {
        uint8_t *into;
        size_t room;
        if (conn->in_size) {
            if (conn->in_room - conn->in_size < S_IN_STEP) {
                size_t bigger_room = conn->in_room + S_IN_STEP;
                uint8_t *bigger = (uint8_t *) realloc (conn->in, bigger_room);
                if (!bigger) {
                    s_drop (conn, "out of memory", now_ms);
                    return -1;
                }
                conn->in = bigger;
                conn->in_room = bigger_room;
            }
            into = conn->in + conn->in_size;
            room = conn->in_room - conn->in_size;
        }
        else {
            into = ctx->scratch;
            room = ctx->scratch_size;
        }
        ssize_t got = recv (conn->fd, into, room, MSG_DONTWAIT);
        if (got == 0) {
            //  libzmq closes at once, before the rest of its greeting
            //  leaves, when the mechanisms differ
            if (conn->state == ZMTP_GREETING)
                s_protocol_error (conn, "the peer closed during the greeting "
                                  "(does it want CURVE?)", now_ms);
            else
                s_drop (conn, "closed by the peer", now_ms);
            return -1;
        }
        if (got < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 0;
            s_drop (conn, "read failed", now_ms);
            return -1;
        }
        int rc;
        if (conn->in_size) {
            conn->in_size += (size_t) got;
            rc = s_consume (conn, conn->in, conn->in_size, now_ms);
        }
        else
            rc = s_consume (conn, ctx->scratch, (size_t) got, now_ms);
        if (rc != 0)
            return -1;
        if ((size_t) got < room)
            return 0;           //  Drained (level-triggered epoll says if not)
    }
    return 0;
}

void
zmtp_on_event (zmtp_t *conn, uint32_t events, int64_t now_ms)
{
    if (conn->fd < 0)
        return;
    if (conn->state == ZMTP_CONNECTING) {
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int error = 0;
        socklen_t len = sizeof error;
        if (getsockopt (conn->fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0)
            error = errno;
        if (error) {
            conn->ctx->stats.refused++;
            s_drop (conn, "connect refused", now_ms);
            return;
        }
        s_connected (conn, now_ms);
        return;
    }
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        if (s_read (conn, now_ms) != 0)
            return;
    }
    //  What the handshake and the handlers queued for this connection,
    //  and what the kernel did not take before
    if (conn->out_size > conn->out_sent)
        zmtp_flush (conn);
}

void
zmtp_tick (zmtp_t *conn, int64_t now_ms)
{
    const zmtp_options_t *options = &conn->ctx->options;
    switch (conn->state) {
        case ZMTP_WAITING:
            if (now_ms >= conn->due_ms && s_start (conn, now_ms) != 0) {
                //  Out of descriptors: try again later
                conn->state = ZMTP_CONNECTING;
                s_drop (conn, "cannot make a socket", now_ms);
            }
            return;
        case ZMTP_CONNECTING:
        case ZMTP_GREETING:
        case ZMTP_HANDSHAKE:
            if (options->handshake_ms > 0
                && now_ms >= conn->since_ms + options->handshake_ms)
                s_drop (conn, "handshake timed out", now_ms);
            else
                s_set_handshake_due (conn);
            return;
        case ZMTP_READY:
            if (options->heartbeat_ms <= 0) {
                conn->due_ms = INT64_MAX;
                return;
            }
            if (options->timeout_ms > 0
                && now_ms >= conn->last_in_ms + options->timeout_ms) {
                s_drop (conn, "the peer fell silent (heartbeat timeout)",
                        now_ms);
                return;
            }
            if (now_ms >= conn->next_ping_ms) {
                //  PING: TTL in deciseconds, no context
                uint8_t ping [7] = {4, 'P', 'I', 'N', 'G', 0, 0};
                int ttl = options->ttl_ms / 100;
                ping [5] = (uint8_t) ((ttl >> 8) & 0xff);
                ping [6] = (uint8_t) (ttl & 0xff);
                if (s_queue_frame (conn, S_FLAG_COMMAND, ping, sizeof ping)
                    == 0)
                    conn->ctx->stats.pings_sent++;
                conn->next_ping_ms = now_ms + options->heartbeat_ms;
                if (zmtp_flush (conn) != 0)
                    return;
            }
            conn->due_ms = conn->next_ping_ms;
            if (options->timeout_ms > 0
                && conn->last_in_ms + options->timeout_ms < conn->due_ms)
                conn->due_ms = conn->last_in_ms + options->timeout_ms;
            return;
        case ZMTP_IDLE:
            conn->due_ms = INT64_MAX;
            return;
    }
}
