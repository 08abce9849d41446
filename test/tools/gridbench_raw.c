/*  =========================================================================
    gridbench_raw - the raw limits of this machine's libzmq under CURVE

    See gridbench_raw.h.
    =========================================================================
*/
#include "gridbench_raw.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define S_READERS 2             //  Threads reading the subscribers
#define S_COMMAND_BYTES 256     //  A broadcast command's size, about
#define S_RESULT_BYTES 160      //  A one-line result's size, about
#define S_ROUND_MS 10000        //  A round not over by then: given up
#define S_CONNECT_MS 120000     //  All handshakes, at most

//  The state the reader threads share with the publisher.
typedef struct {
    void **subs;                //  This thread's subscribers
    size_t count;
    size_t rounds;              //  Warm-up (0) and rounds 1..rounds
    atomic_int *threads_done;   //  Readers that have the round
    atomic_bool *stop;
    int64_t done_us;            //  When this thread had its last copy
} s_reader_t;

static int64_t
s_now_us (void)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    return (int64_t) now.tv_sec * 1000000 + now.tv_nsec / 1000;
}

static int
s_compare (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

//  The round a message belongs to: its first four bytes.
static int32_t
s_round_of (zmq_msg_t *msg)
{
    int32_t round = -1;
    if (zmq_msg_size (msg) >= sizeof round)
        memcpy (&round, zmq_msg_data (msg), sizeof round);
    return round;
}

//  Reads round after round until every one of its subscribers has a copy
//  of that round; older copies (the warm-up's repeats) are dropped.
static void *
s_reader (void *arg)
{
    s_reader_t *self = (s_reader_t *) arg;
    zmq_pollitem_t *items = (zmq_pollitem_t *) calloc (self->count,
                                                       sizeof *items);
    void **waiting = (void **) calloc (self->count, sizeof (void *));
    if (!items || !waiting) {
        atomic_store (self->stop, true);
        free (items);
        free (waiting);
        return NULL;
    }
    zmq_msg_t msg;
    zmq_msg_init (&msg);
    for (int32_t round = 0; round <= (int32_t) self->rounds; round++) {
        memcpy (waiting, self->subs, self->count * sizeof (void *));
        size_t left = self->count;
        while (left && !atomic_load (self->stop)) {
            for (size_t at = 0; at < left; at++)
                items [at] = (zmq_pollitem_t) {
                    .socket = waiting [at], .events = ZMQ_POLLIN
                };
            if (zmq_poll (items, (int) left, 100) <= 0)
                continue;
            //  Those that have this round's copy leave the waiting list
            size_t kept = 0;
            for (size_t at = 0; at < left; at++) {
                bool got = false;
                if (items [at].revents & ZMQ_POLLIN)
                    while (zmq_msg_recv (&msg, waiting [at],
                                         ZMQ_DONTWAIT) >= 0)
                        got = got || s_round_of (&msg) == round;
                if (!got)
                    waiting [kept++] = waiting [at];
            }
            left = kept;
        }
        if (left)
            break;
        self->done_us = s_now_us ();
        atomic_fetch_add (self->threads_done, 1);
        //  The next round starts once the publisher has seen all readers
        while (atomic_load (self->threads_done) != 0
               && !atomic_load (self->stop))
            usleep (50);
    }
    zmq_msg_close (&msg);
    free (items);
    free (waiting);
    return NULL;
}

//  A CURVE socket of TYPE in CTX: the server's when SERVER_SECRET, else a
//  client of SERVER_PUBLIC with the pair CLIENT_*.
static void *
s_socket (void *ctx, int type, const char *server_secret,
          const char *server_public, const char *client_public,
          const char *client_secret)
{
    void *socket = zmq_socket (ctx, type);
    if (!socket)
        return NULL;
    int zero = 0, one = 1;
    zmq_setsockopt (socket, ZMQ_LINGER, &zero, sizeof zero);
    int rc;
    if (server_secret) {
        rc = zmq_setsockopt (socket, ZMQ_CURVE_SERVER, &one, sizeof one);
        rc = rc ? rc : zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY,
                                       server_secret, 40);
    }
    else {
        rc = zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, server_public, 40);
        rc = rc ? rc : zmq_setsockopt (socket, ZMQ_CURVE_PUBLICKEY,
                                       client_public, 40);
        rc = rc ? rc : zmq_setsockopt (socket, ZMQ_CURVE_SECRETKEY,
                                       client_secret, 40);
    }
    if (rc != 0) {
        zmq_close (socket);
        return NULL;
    }
    return socket;
}

//  The endpoint SOCKET is bound to (tcp://127.0.0.1:*).
static int
s_bind (void *socket, char *endpoint, size_t endpoint_len)
{
    if (zmq_bind (socket, "tcp://127.0.0.1:*") != 0)
        return -1;
    return zmq_getsockopt (socket, ZMQ_LAST_ENDPOINT, endpoint,
                           &endpoint_len);
}

//  Fan-out: the warm-up round is published every 20 ms until every
//  subscriber has a copy (connected, past the handshake, subscribed);
//  then ROUNDS rounds, one copy each.
static void
s_fanout (void *pub, void **subs, size_t peers, size_t rounds,
          bench_raw_t *figures)
{
    atomic_int threads_done = 0;
    atomic_bool stop = false;
    s_reader_t readers [S_READERS];
    pthread_t threads [S_READERS];
    size_t started = 0;
    for (size_t at = 0; at < S_READERS; at++) {
        size_t from = peers * at / S_READERS;
        size_t to = peers * (at + 1) / S_READERS;
        readers [at] = (s_reader_t) {
            .subs = subs + from, .count = to - from, .rounds = rounds,
            .threads_done = &threads_done, .stop = &stop, .done_us = 0
        };
        if (pthread_create (&threads [at], NULL, s_reader, &readers [at]))
            break;
        started++;
    }
    double *latency = (double *) calloc (rounds + 1, sizeof (double));
    char message [S_COMMAND_BYTES];
    memset (message, 'c', sizeof message);
    size_t measured = 0;
    int64_t connect_start = s_now_us ();
    for (int32_t round = 0; latency && started == S_READERS
                            && round <= (int32_t) rounds; round++) {
        memcpy (message, &round, sizeof round);
        int64_t start = s_now_us ();
        int64_t deadline = start + (round ? S_ROUND_MS : S_CONNECT_MS)
                                   * (int64_t) 1000;
        int64_t next_send = start;
        while (atomic_load (&threads_done) < S_READERS
               && s_now_us () < deadline && !atomic_load (&stop)) {
            if (s_now_us () >= next_send) {
                zmq_send (pub, message, sizeof message, 0);
                //  The warm-up repeats; a measured round is sent once
                next_send = round ? INT64_MAX : s_now_us () + 20000;
            }
            usleep (round ? 50 : 1000);
        }
        if (atomic_load (&threads_done) < S_READERS) {
            snprintf (figures->error, sizeof figures->error,
                      "fan-out round %d: not every subscriber had it "
                      "within %d ms", round,
                      round ? S_ROUND_MS : S_CONNECT_MS);
            break;
        }
        int64_t last = 0;
        for (size_t at = 0; at < S_READERS; at++)
            last = readers [at].done_us > last ? readers [at].done_us : last;
        if (round == 0)
            figures->connect_s = (double) (last - connect_start) / 1e6;
        else
            latency [measured++] = (double) (last - start) / 1000.0;
        atomic_store (&threads_done, 0);
    }
    atomic_store (&stop, true);
    for (size_t at = 0; at < started; at++)
        pthread_join (threads [at], NULL);
    if (measured == rounds && measured) {
        qsort (latency, measured, sizeof (double), s_compare);
        figures->fanout_p50_ms = latency [(measured - 1) / 2];
        figures->fanout_p99_ms = latency [(size_t) ((double) (measured - 1)
                                                    * 0.99 + 0.5)];
    }
    else if (!figures->error [0])
        snprintf (figures->error, sizeof figures->error,
                  "the fan-out readers did not start");
    free (latency);
}

//  The sender of one ingest round: every dealer sends its message.
typedef struct {
    void **dealers;
    size_t count;
    int32_t round;
    int64_t start_us;
} s_sender_t;

static void *
s_sender (void *arg)
{
    s_sender_t *self = (s_sender_t *) arg;
    char message [S_RESULT_BYTES];
    memset (message, 'r', sizeof message);
    memcpy (message, &self->round, sizeof self->round);
    self->start_us = s_now_us ();
    for (size_t at = 0; at < self->count; at++)
        zmq_send (self->dealers [at], message, sizeof message, 0);
    return NULL;
}

//  Receives COUNT messages of ROUND on ROUTER (others dropped); the time
//  of the last, or -1 when they did not all come.
static int64_t
s_router_take (void *router, size_t count, int32_t round)
{
    zmq_msg_t msg;
    zmq_msg_init (&msg);
    size_t taken = 0;
    int64_t last = -1;
    while (taken < count) {
        //  Identity, then the message
        if (zmq_msg_recv (&msg, router, 0) < 0)
            break;
        if (!zmq_msg_more (&msg) || zmq_msg_recv (&msg, router, 0) < 0)
            continue;
        if (s_round_of (&msg) == round) {
            taken++;
            last = s_now_us ();
        }
    }
    zmq_msg_close (&msg);
    return taken == count ? last : -1;
}

//  Ingest: the warm-up round (one message each) proves every dealer
//  connected; then ROUNDS rounds of one message each, all at once.
static void
s_ingest (void *router, void **dealers, size_t peers, size_t rounds,
          bench_raw_t *figures)
{
    int timeout = S_CONNECT_MS;
    zmq_setsockopt (router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    s_sender_t warm = {.dealers = dealers, .count = peers, .round = 0};
    s_sender (&warm);
    if (s_router_take (router, peers, 0) < 0) {
        snprintf (figures->error, sizeof figures->error,
                  "ingest: not every dealer connected within %d ms",
                  S_CONNECT_MS);
        return;
    }
    timeout = S_ROUND_MS;
    zmq_setsockopt (router, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    double *rates = (double *) calloc (rounds, sizeof (double));
    size_t measured = 0;
    for (int32_t round = 1; rates && round <= (int32_t) rounds; round++) {
        s_sender_t sender = {
            .dealers = dealers, .count = peers, .round = round,
            .start_us = 0
        };
        pthread_t thread;
        if (pthread_create (&thread, NULL, s_sender, &sender))
            break;
        int64_t last = s_router_take (router, peers, round);
        pthread_join (thread, NULL);
        if (last < 0) {
            snprintf (figures->error, sizeof figures->error,
                      "ingest round %d: not every message came within "
                      "%d ms", round, S_ROUND_MS);
            break;
        }
        double seconds = (double) (last - sender.start_us) / 1e6;
        rates [measured++] = seconds > 0 ? (double) peers / seconds : 0;
    }
    if (measured == rounds && measured) {
        qsort (rates, measured, sizeof (double), s_compare);
        figures->ingest_per_s = rates [(measured - 1) / 2];
    }
    free (rates);
}

void
bench_raw_curve (size_t peers, size_t rounds, bench_raw_t *figures)
{
    *figures = (bench_raw_t) {
        .peers = peers, .rounds = rounds, .fanout_p50_ms = -1,
        .fanout_p99_ms = -1, .ingest_per_s = -1, .connect_s = -1
    };
    struct rlimit limit;
    size_t files = peers * 6 + 64;
    if (getrlimit (RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY
        && limit.rlim_cur < files) {
        snprintf (figures->error, sizeof figures->error,
                  "not measured: %zu peers need %zu open files, the limit "
                  "is %llu", peers, files,
                  (unsigned long long) limit.rlim_cur);
        return;
    }
    char server_public [41], server_secret [41];
    char client_public [41], client_secret [41];
    if (!peers || !rounds
        || zmq_curve_keypair (server_public, server_secret) != 0
        || zmq_curve_keypair (client_public, client_secret) != 0) {
        snprintf (figures->error, sizeof figures->error,
                  "not measured: no peers, or this libzmq has no CURVE");
        return;
    }
    //  The server side: one I/O thread, as the broker's
    void *server_ctx = zmq_ctx_new ();
    void *peer_ctx = zmq_ctx_new ();
    zmq_ctx_set (peer_ctx, ZMQ_MAX_SOCKETS, (int) (2 * peers + 16));
    void **subs = (void **) calloc (peers, sizeof (void *));
    void **dealers = (void **) calloc (peers, sizeof (void *));
    void *pub = s_socket (server_ctx, ZMQ_PUB, server_secret, NULL, NULL,
                          NULL);
    void *router = s_socket (server_ctx, ZMQ_ROUTER, server_secret, NULL,
                             NULL, NULL);
    char pub_ep [64], router_ep [64];
    bool ready = subs && dealers && pub && router
                 && s_bind (pub, pub_ep, sizeof pub_ep) == 0
                 && s_bind (router, router_ep, sizeof router_ep) == 0;
    for (size_t at = 0; ready && at < peers; at++) {
        subs [at] = s_socket (peer_ctx, ZMQ_SUB, NULL, server_public,
                              client_public, client_secret);
        dealers [at] = s_socket (peer_ctx, ZMQ_DEALER, NULL, server_public,
                                 client_public, client_secret);
        ready = subs [at] && dealers [at]
                && zmq_setsockopt (subs [at], ZMQ_SUBSCRIBE, "", 0) == 0
                && zmq_connect (subs [at], pub_ep) == 0
                && zmq_connect (dealers [at], router_ep) == 0;
    }
    if (!ready)
        snprintf (figures->error, sizeof figures->error,
                  "not measured: cannot open %zu CURVE peers (%s)", peers,
                  zmq_strerror (zmq_errno ()));
    else {
        s_fanout (pub, subs, peers, rounds, figures);
        if (!figures->error [0])
            s_ingest (router, dealers, peers, rounds, figures);
    }
    for (size_t at = 0; at < peers; at++) {
        if (subs && subs [at])
            zmq_close (subs [at]);
        if (dealers && dealers [at])
            zmq_close (dealers [at]);
    }
    if (pub)
        zmq_close (pub);
    if (router)
        zmq_close (router);
    free (subs);
    free (dealers);
    zmq_ctx_term (peer_ctx);
    zmq_ctx_term (server_ctx);
}
