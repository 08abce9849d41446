/*  =========================================================================
    client - the broker's client API over ZeroMQ (see client.h)

    Reading order: the client and its keys, request ids, the Lazy Pirate
    exchange, the reply envelope, the generic and typed requests, then the
    pipelined DEALER.
    =========================================================================
*/
#include "client.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/names.h"
#include "../proto/proto.h"

struct _client_t {
    char *endpoint;               //  The broker's client endpoint (owned):
                                  //  the one of ENDPOINTS in use
    char *endpoints;              //  All given (a cluster's: "A,B"), owned
    size_t endpoint_count;
    size_t endpoint_at;           //  Which one ENDPOINT is
    bool stay;                    //  Never follow a not_leader
    zcert_t *cert;                //  Our key pair, or NULL: plaintext
    //  The broker's public keys (Z85): the current one, and while the
    //  broker rotates its key, the next one too
    char broker_keys [CLIENT_BROKER_KEYS_MAX][KEYS_TEXT_SIZE];
    size_t broker_key_count;
    size_t broker_key_at;         //  The one new sockets use
    int64_t timeout_ms;           //  Total time of one call, all tries
    int tries;                    //  Lazy Pirate tries per call
    int64_t max_frame;            //  ZMQ_MAXMSGSIZE of new sockets
    char error [1024];            //  Why the last call failed
    char handshake [512];         //  What failed handshakes said
    pw_t *writer;                 //  client_begin's request
    char id [CLIENT_ID_LEN];      //  Its id
    zsock_t *dealer;              //  client_send's socket, or NULL
    zsock_t *req;                 //  The last exchange's REQ socket, past
                                  //  its handshake and answered: the
                                  //  next exchange's first try, or NULL
    zsock_t *req_monitor;         //  Its handshake monitor, or NULL: a
                                  //  reconnect of it (the broker switched
                                  //  keys) is watched as a new socket is
};

static int
s_fail (client_t *self, int code, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
s_fail (client_t *self, int code, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (self->error, sizeof self->error, format, args);
    va_end (args);
    return code;
}

//  A copy of endpoint INDEX of the comma-separated LIST.
static char *
s_endpoint_at (const char *list, size_t index)
{
    const char *at = list;
    for (size_t skipped = 0; skipped < index && at; skipped++) {
        at = strchr (at, ',');
        if (at)
            at++;
    }
    if (!at)
        return strdup ("");
    return strndup (at, strcspn (at, ","));
}

//  Closes the kept REQ socket and its monitor (the monitor first).
static void
s_req_drop (client_t *self)
{
    zsock_destroy (&self->req_monitor);
    zsock_destroy (&self->req);
}

void
client_set_redirects (client_t *self, bool follow)
{
    self->stay = !follow;
}

//  Moves to the next of a cluster's endpoints (a try went unanswered).
static void
s_endpoint_next (client_t *self)
{
    if (self->endpoint_count < 2)
        return;
    self->endpoint_at = (self->endpoint_at + 1) % self->endpoint_count;
    char *next = s_endpoint_at (self->endpoints, self->endpoint_at);
    if (next) {
        free (self->endpoint);
        self->endpoint = next;
        s_req_drop (self);
    }
}

//  The active's client endpoint when ANSWER says not_leader and names it
//  (details[0]), else NULL. A copy: caller frees.
static char *
s_redirect (const pv_doc_t *answer)
{
    const pv_t *root = pv_doc_root (answer);
    if (!pv_str_eq (pv_map_get (root, "type"), "error")
        || !pv_str_eq (pv_map_get (root, "code"), PROTO_ERR_NOT_LEADER))
        return NULL;
    const pv_t *first = pv_array_at (pv_map_get (root, "details"), 0);
    size_t len = 0;
    const char *text = pv_str (first, &len);
    if (!text || len == 0 || len > 1000 || memchr (text, 0, len)
        || len < 7
        || (strncmp (text, "tcp://", 6) != 0 && strncmp (text, "ipc://", 6) != 0))
        return NULL;
    return strndup (text, len);
}

client_t *
client_new (const char *endpoint)
{
    client_t *self = calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->endpoints = strdup (endpoint ? endpoint : "");
    self->writer = pw_new ();
    if (!self->endpoints || !self->writer) {
        client_destroy (&self);
        return NULL;
    }
    self->endpoint_count = 1;
    for (const char *at = self->endpoints; *at; at++)
        self->endpoint_count += *at == ',';
    self->endpoint = s_endpoint_at (self->endpoints, 0);
    if (!self->endpoint) {
        client_destroy (&self);
        return NULL;
    }
    self->timeout_ms = CLIENT_DEFAULT_TIMEOUT_MS;
    self->tries = CLIENT_DEFAULT_TRIES;
    self->max_frame = PROTO_MAX_FRAME;
    return self;
}

void
client_destroy (client_t **self_p)
{
    client_t *self = *self_p;
    if (!self)
        return;
    zsock_destroy (&self->dealer);
    s_req_drop (self);
    zcert_destroy (&self->cert);
    pw_destroy (&self->writer);
    free (self->endpoint);
    free (self->endpoints);
    free (self);
    *self_p = NULL;
}

const char *
client_endpoint (const client_t *self)
{
    return self->endpoint;
}

//  Splits the comma-separated LIST into KEYS, each element read by
//  READ (Z85 only, or a key file too). Returns the count, or -1 with a
//  sentence in WHY.
static int
s_keys_split (const char *list, bool files,
              char keys [CLIENT_BROKER_KEYS_MAX][KEYS_TEXT_SIZE],
              char *why, size_t why_len)
{
    if (!list || !*list) {
        snprintf (why, why_len, "no broker key given");
        return -1;
    }
    int count = 0;
    const char *at = list;
    while (true) {
        size_t len = strcspn (at, ",");
        if (len == 0) {
            snprintf (why, why_len, "key %d of '%.200s' is empty (give "
                      "keys as KEY or OLD,NEW)", count + 1, list);
            return -1;
        }
        if (count == CLIENT_BROKER_KEYS_MAX) {
            snprintf (why, why_len, "more than %d keys in '%.200s'",
                      CLIENT_BROKER_KEYS_MAX, list);
            return -1;
        }
        char *element = strndup (at, len);
        char sentence [512] = "";
        int rc = -1;
        if (!element)
            snprintf (sentence, sizeof sentence, "out of memory");
        else
        if (files)
            rc = keys_read_public (element, keys [count], sentence,
                                   sizeof sentence);
        else
        if (keys_z85_valid (element)) {
            snprintf (keys [count], KEYS_TEXT_SIZE, "%s", element);
            rc = 0;
        }
        else
            snprintf (sentence, sizeof sentence, "not 40 characters of Z85");
        free (element);
        if (rc != 0) {
            if (strchr (list, ','))
                snprintf (why, why_len, "key %d of the list: %s",
                          count + 1, sentence);
            else
                snprintf (why, why_len, "%s", sentence);
            return -1;
        }
        count++;
        at += len;
        if (!*at)
            break;
        at++;                    //  Past the comma: an element follows
    }
    return count;
}

int
client_broker_keys_read (const char *list, char *keys, char *why,
                         size_t why_len)
{
    char read [CLIENT_BROKER_KEYS_MAX][KEYS_TEXT_SIZE];
    int count = s_keys_split (list, true, read, why, why_len);
    if (count < 0)
        return -1;
    keys [0] = 0;
    for (int index = 0; index < count; index++) {
        if (index)
            strcat (keys, ",");
        strcat (keys, read [index]);
    }
    return count;
}

int
client_set_curve (client_t *self, const zcert_t *cert, const char *broker_key)
{
    zcert_destroy (&self->cert);
    zsock_destroy (&self->dealer);
    s_req_drop (self);
    self->broker_key_count = 0;
    self->broker_key_at = 0;
    if (!cert)
        return 0;
    char why [512];
    int count = s_keys_split (broker_key, false, self->broker_keys, why,
                              sizeof why);
    if (count < 0)
        return s_fail (self, -1, "the broker key: %s", why);
    self->cert = zcert_dup ((zcert_t *) cert);
    if (!self->cert)
        return s_fail (self, -1, "out of memory");
    self->broker_key_count = (size_t) count;
    return 0;
}

int
client_load_keys (client_t *self, const char *key_path,
                  const char *broker_key)
{
    char why [1024] = "";
    char broker_txt [CLIENT_BROKER_KEYS_SIZE];
    zcert_t *cert = keys_load_pair (key_path, why, sizeof why);
    if (!cert)
        return s_fail (self, -1, "client key: %s", why);
    if (client_broker_keys_read (broker_key, broker_txt, why, sizeof why)
        < 0) {
        zcert_destroy (&cert);
        return s_fail (self, -1, "broker key: %s", why);
    }
    int rc = client_set_curve (self, cert, broker_txt);
    zcert_destroy (&cert);
    return rc;
}

const char *
client_broker_key (const client_t *self)
{
    return self->broker_key_count ? self->broker_keys [self->broker_key_at]
                                  : "";
}

bool
client_secure (const client_t *self)
{
    return self->cert != NULL;
}

void
client_set_timeout (client_t *self, int64_t timeout_ms)
{
    self->timeout_ms = timeout_ms > 0 ? timeout_ms
                                      : CLIENT_DEFAULT_TIMEOUT_MS;
}

void
client_set_tries (client_t *self, int tries)
{
    self->tries = tries >= 1 ? tries : CLIENT_DEFAULT_TRIES;
}

void
client_set_max_frame (client_t *self, int64_t max_bytes)
{
    self->max_frame = max_bytes;
}

int64_t
client_timeout (const client_t *self)
{
    return self->timeout_ms;
}

int
client_tries (const client_t *self)
{
    return self->tries;
}

const char *
client_error (const client_t *self)
{
    return self->error;
}

const char *
client_handshake_error (const client_t *self)
{
    return self->handshake;
}

//  ---------------------------------------------------------------------
//  Request ids

void
client_request_id (char *buf, size_t buf_len)
{
    static uint32_t counter = 0;

    //  The short host name, kept to name characters so that the whole id
    //  is a valid name and stays well under 64 characters.
    char host [256] = "";
    char clean [25] = "";
    if (gethostname (host, sizeof host - 1) != 0)
        host [0] = 0;
    size_t used = 0;
    for (size_t index = 0; host [index] && host [index] != '.'
                           && used < sizeof clean - 1; index++) {
        char c = host [index];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
               || (c >= '0' && c <= '9') || c == '_' || c == '-';
        clean [used++] = ok ? c : '-';
    }
    clean [used] = 0;
    if (!used)
        strcpy (clean, "host");

    uint32_t random_part = 0;
    if (getrandom (&random_part, sizeof random_part, GRND_NONBLOCK)
        != (ssize_t) sizeof random_part)
        random_part = (uint32_t) zclock_usecs ()
                    ^ ((uint32_t) getpid () << 16) ^ (counter * 2654435761u);
    counter++;
    snprintf (buf, buf_len, "%s-%u-%" PRIu32 "-%08" PRIx32, clean,
              (unsigned) getpid () % 10000000u, counter, random_part);
}

//  ---------------------------------------------------------------------
//  Lazy Pirate over REQ

//  A socket of TYPE with our options, keys and (MONITOR_P not NULL) a
//  handshake monitor, connected to the endpoint. NULL with the reason
//  in self->error.
static zsock_t *
s_socket_new (client_t *self, int type, int64_t timeout_ms,
              zsock_t **monitor_p)
{
    zsock_t *sock = zsock_new (type);
    if (!sock) {
        s_fail (self, -1, "cannot create a socket: %s",
                zmq_strerror (zmq_errno ()));
        return NULL;
    }
    int timeout = timeout_ms > INT32_MAX ? INT32_MAX : (int) timeout_ms;
    //  Linger 0: a request nobody took must not hold the process at exit.
    zsock_set_linger (sock, 0);
    zsock_set_maxmsgsize (sock, (int) (self->max_frame > INT32_MAX
                                       ? -1 : self->max_frame));
    if (type == ZMQ_REQ) {
        zsock_set_sndhwm (sock, 16);
        zsock_set_rcvhwm (sock, 16);
        zsock_set_sndtimeo (sock, timeout);
        zsock_set_handshake_ivl (sock, timeout);
    }
    else {
        //  A pipeline holds as many requests as its owner puts in
        zsock_set_sndhwm (sock, 0);
        zsock_set_rcvhwm (sock, 0);
    }
    zsock_set_heartbeat_ivl (sock, 1000);
    zsock_set_heartbeat_timeout (sock, 3000);
    if (self->cert) {
        keys_curve_client (sock, self->cert,
                           self->broker_keys [self->broker_key_at]);
        //  A refused key shows only as a failed handshake: watch for it
        if (monitor_p)
            *monitor_p = keys_monitor_new (sock);
    }
    if (zsock_connect (sock, "%s", self->endpoint) != 0) {
        s_fail (self, -1, "cannot use broker endpoint '%s': %s (endpoints "
                "look like tcp://HOST:PORT or ipc:///PATH)", self->endpoint,
                zmq_strerror (zmq_errno ()));
        zsock_destroy (&sock);
    }
    return sock;
}

//  Reads the answer waiting on SOCK. Returns CLIENT_OK or
//  CLIENT_ERR_MALFORMED.
static int
s_answer_read (client_t *self, zsock_t *sock, pv_doc_t **reply_p)
{
    zmsg_t *msg = zmsg_recv (sock);
    if (!msg)
        return s_fail (self, CLIENT_ERR_MALFORMED, "lost the answer from "
                       "the broker at %s", self->endpoint);
    int rc = CLIENT_OK;
    char why [256] = "";
    if (zmsg_size (msg) != 1)
        rc = s_fail (self, CLIENT_ERR_MALFORMED, "the broker at %s sent a "
                     "malformed answer (%zu frames, expected one)",
                     self->endpoint, zmsg_size (msg));
    else {
        zframe_t *frame = zmsg_first (msg);
        if (pv_doc_decode (zframe_data (frame), zframe_size (frame), reply_p,
                           why, sizeof why) != 0)
            rc = s_fail (self, CLIENT_ERR_MALFORMED, "the broker at %s sent "
                         "a malformed answer (%s)", self->endpoint, why);
    }
    zmsg_destroy (&msg);
    return rc;
}

static int s_exchange (client_t *self, const void *request, size_t size,
                       pv_doc_t **reply_p);

//  A cluster's standby answers not_leader with the active's endpoint: the
//  request goes there (a few hops at most, each a fresh exchange).
int
client_exchange (client_t *self, const void *request, size_t size,
                 pv_doc_t **reply_p)
{
    int rc = s_exchange (self, request, size, reply_p);
    for (int hop = 0; hop < 3 && rc == CLIENT_OK && !self->stay; hop++) {
        char *next = s_redirect (*reply_p);
        if (!next || strcmp (next, self->endpoint) == 0) {
            free (next);
            break;
        }
        pv_doc_destroy (reply_p);
        free (self->endpoint);
        self->endpoint = next;
        zsock_destroy (&self->dealer);
        s_req_drop (self);
        rc = s_exchange (self, request, size, reply_p);
    }
    return rc;
}

//  Whether the handshake failure WHY (keys_monitor_read's sentence) names
//  the key or the encryption; else it says the connection was lost during
//  the handshake ("...: retrying"), which is also all a client sees of a
//  broker that cannot read its hello (it closes the connection without a
//  word): a key is taken as refused after S_KEY_CLOSES such losses.
#define S_KEY_CLOSES 2
static bool
s_blames_key (const char *why)
{
    const char *retrying = ": retrying";
    size_t len = strlen (why);
    return !(len >= strlen (retrying)
             && streq (why + len - strlen (retrying), retrying));
}

//  The broker keys as "A, B" into BUF.
static void
s_keys_list (const client_t *self, char *buf, size_t buf_len)
{
    buf [0] = 0;
    size_t used = 0;
    for (size_t index = 0; index < self->broker_key_count; index++) {
        int wrote = snprintf (buf + used, buf_len - used, "%s%s",
                              index ? ", " : "", self->broker_keys [index]);
        if (wrote < 0 || (size_t) wrote >= buf_len - used)
            break;
        used += (size_t) wrote;
    }
}

//  CLIENT_ERR_NO_ANSWER after handshakes that failed, AFTER_MS into the
//  call (-1: every key failed, no need to wait), naming the keys tried.
static int
s_fail_handshake (client_t *self, int64_t after_ms)
{
    if (after_ms < 0 && !s_blames_key (self->handshake))
        snprintf (self->handshake, sizeof self->handshake, "the broker "
                  "closed each connection during the handshake, as it does "
                  "with a hello made for another key");
    //  "...: retrying" said we would try again; we no longer do
    size_t len = strlen (self->handshake);
    const char *retrying = ": retrying";
    if (len > strlen (retrying)
        && streq (self->handshake + len - strlen (retrying), retrying))
        self->handshake [len - strlen (retrying)] = 0;
    char keys [CLIENT_BROKER_KEYS_MAX * (KEYS_TEXT_SIZE + 2)];
    s_keys_list (self, keys, sizeof keys);
    char waited [48] = "";
    if (after_ms >= 0) {
        char duration [32];
        duration_format (after_ms, duration, sizeof duration);
        snprintf (waited, sizeof waited, " after %s", duration);
    }
    return s_fail (self, CLIENT_ERR_NO_ANSWER, "no answer from the broker "
                   "at %s%s: no handshake went through (%s) with the "
                   "broker key%s %s; check that the broker's public key "
                   "(--broker-key, GRID_BROKER_KEY or broker_key) is that "
                   "of the broker at this endpoint: fetch it with 'gridcli "
                   "key fetch-broker --out FILE' where a client still "
                   "connects, or copy broker.key from the broker's host",
                   self->endpoint, waited, self->handshake,
                   self->broker_key_count > 1 ? "s" : "", keys);
}

//  A new REQ socket for the rest of a try (TRY_MS) with its monitor, the
//  request sent on it. Returns the socket, or NULL (self->error says why).
static zsock_t *
s_try_open (client_t *self, const void *request, size_t size,
            int64_t try_ms, zsock_t **monitor_p)
{
    zsock_t *sock = s_socket_new (self, ZMQ_REQ, try_ms, monitor_p);
    if (!sock)
        return NULL;
    zframe_t *frame = zframe_new (request, size);
    if (zframe_send (&frame, sock, 0) != 0) {
        //  Nothing queued (send timed out): wait out this try anyway so
        //  that a broker coming up has its chance on the next one.
        zframe_destroy (&frame);
    }
    return sock;
}

static int
s_exchange (client_t *self, const void *request, size_t size,
            pv_doc_t **reply_p)
{
    *reply_p = NULL;
    self->error [0] = 0;
    self->handshake [0] = 0;
    int64_t timeout_ms = self->timeout_ms;
    int tries = self->tries;
    int64_t start_ms = zclock_mono ();
    int64_t deadline_ms = start_ms + timeout_ms;
    //  The broker keys taken as refused in this call, a bit each, and
    //  how many connections each saw closed during the handshake
    unsigned failed_keys = 0;
    unsigned all_keys = (1u << self->broker_key_count) - 1;
    int closes [CLIENT_BROKER_KEYS_MAX] = {0};

    for (int attempt = 1; attempt <= tries; attempt++) {
        //  Each try gets an equal share of the total; the last one gets
        //  whatever is left, so the total never exceeds the timeout.
        int64_t try_deadline_ms = attempt == tries
            ? deadline_ms
            : start_ms + timeout_ms * attempt / tries;
        int64_t try_ms = try_deadline_ms - zclock_mono ();
        if (try_ms <= 0)
            continue;
        //  A cluster's endpoints take turns, a try each
        if (attempt > 1)
            s_endpoint_next (self);

        //  The first try goes on the last exchange's connection, when it
        //  answered: no new connection, no new CURVE handshake (a
        //  process that makes several requests pays for one)
        zsock_t *monitor = attempt == 1 ? self->req_monitor : NULL;
        zsock_t *sock = attempt == 1 ? self->req : NULL;
        self->req = NULL;
        self->req_monitor = NULL;
        if (sock) {
            int timeout = try_ms > INT32_MAX ? INT32_MAX : (int) try_ms;
            zsock_set_sndtimeo (sock, timeout);
            zframe_t *frame = zframe_new (request, size);
            if (zframe_send (&frame, sock, 0) != 0)
                zframe_destroy (&frame);
        }
        else
            sock = s_try_open (self, request, size, try_ms, &monitor);
        if (!sock) {
            zsock_destroy (&monitor);
            return CLIENT_ERR_ENDPOINT;
        }
        zpoller_t *poller = zpoller_new (sock, NULL);
        if (monitor)
            zpoller_add (poller, monitor);
        int rc = 1;              //  1: no answer yet
        while (rc == 1) {
            int64_t left_ms = try_deadline_ms - zclock_mono ();
            if (left_ms <= 0)
                break;
            void *which = zpoller_wait (poller, (int) left_ms);
            if (which == sock)
                rc = s_answer_read (self, sock, reply_p);
            else
            if (which == monitor && monitor) {
                char why [512] = "";
                int event = keys_monitor_read (monitor, why, sizeof why);
                if (event == 1)
                    rc = s_fail (self, CLIENT_ERR_REFUSED, "the broker at %s "
                                 "refused this client: %s (ask its admin for "
                                 "a role, see docs/SECURITY.md)",
                                 self->endpoint, why);
                else
                if (event == 3)
                    //  A handshake went through: the key is not to blame
                    self->handshake [0] = 0;
                else
                if (event == 2) {
                    snprintf (self->handshake, sizeof self->handshake, "%s",
                              why);
                    size_t at = self->broker_key_at;
                    if (s_blames_key (why) || ++closes [at] >= S_KEY_CLOSES)
                        failed_keys |= 1u << at;
                    //  Every key failed: waiting changes nothing
                    if (all_keys && failed_keys == all_keys)
                        rc = s_fail_handshake (self, -1);
                    else
                    if (self->broker_key_count > 1) {
                        //  The next key (the broker may have retired the
                        //  one we used), the same request on a new socket
                        self->broker_key_at = (self->broker_key_at + 1)
                                            % self->broker_key_count;
                        zpoller_destroy (&poller);
                        zsock_destroy (&monitor);
                        zsock_destroy (&sock);
                        sock = s_try_open (self, request, size, left_ms,
                                           &monitor);
                        if (!sock) {
                            zsock_destroy (&monitor);
                            return CLIENT_ERR_ENDPOINT;
                        }
                        poller = zpoller_new (sock, NULL);
                        if (monitor)
                            zpoller_add (poller, monitor);
                    }
                }
            }
            else
            if (zpoller_terminated (poller) || zsys_interrupted)
                rc = s_fail (self, CLIENT_ERR_INTERRUPTED, "interrupted");
            //  Else the try expired, or another signal woke the poll: the
            //  loop looks at the clock again.
        }
        zpoller_destroy (&poller);
        //  A socket that got its answer may take the next request
        if (rc == CLIENT_OK) {
            self->req = sock;
            self->req_monitor = monitor;
        }
        else {
            zsock_destroy (&monitor);
            zsock_destroy (&sock);
        }
        if (rc != 1)
            return rc;
    }
    if (*self->handshake)
        //  No handshake went through in all that time: a wrong broker key
        //  looks so (the broker closes what it cannot read, without a word)
        return s_fail_handshake (self, timeout_ms);
    char waited [32];
    duration_format (timeout_ms, waited, sizeof waited);
    return s_fail (self, CLIENT_ERR_NO_ANSWER, "no answer from the broker "
                   "at %s after %s", self->endpoint, waited);
}

//  ---------------------------------------------------------------------
//  The reply envelope

//  A copy of LEN bytes of TEXT fit for a terminal: control characters
//  become '?'. Caller frees.
static char *
s_clean (const char *text, size_t len)
{
    char *copy = malloc (len + 1);
    if (!copy)
        return NULL;
    for (size_t index = 0; index < len; index++) {
        unsigned char c = (unsigned char) text [index];
        copy [index] = c == '\t' || c == '\n' || c == '\r' ? ' '
                     : c < 0x20 || c == 0x7F ? '?' : (char) c;
    }
    copy [len] = 0;
    return copy;
}

static int
s_malformed (char *why, size_t why_len, const char *sentence)
{
    if (why && why_len)
        snprintf (why, why_len, "%s", sentence);
    return CLIENT_ERR_MALFORMED;
}

int
client_reply_decode (const pv_doc_t *answer, const char *id,
                     client_reply_t *reply, char *why, size_t why_len)
{
    memset (reply, 0, sizeof *reply);
    const pv_t *root = pv_doc_root (answer);
    int64_t version = 0;
    if (pv_type (root) != PV_MAP
    ||  pv_get_int (pv_map_get (root, "v"), &version) != 0)
        return s_malformed (why, why_len, "the broker's answer is not a grid "
                            "protocol message");
    if (!proto_version_spoken (version)) {
        char sentence [200];
        snprintf (sentence, sizeof sentence, "the broker answered in "
                  "protocol version %" PRId64 "; this client speaks %d to %d",
                  version, PROTO_VERSION_MIN, PROTO_VERSION);
        return s_malformed (why, why_len, sentence);
    }
    const pv_t *type = pv_map_get (root, "type");
    if (pv_str_eq (type, "ok")) {
        const pv_t *data = pv_map_get (root, "data");
        if (!pv_str_eq (pv_map_get (root, "id"), id)) {
            char sentence [200];
            snprintf (sentence, sizeof sentence, "the broker's answer is for "
                      "another request (its id is not %s)", id);
            return s_malformed (why, why_len, sentence);
        }
        if (!data)
            return s_malformed (why, why_len, "the broker's answer carries "
                                "no data");
        reply->ok = true;
        reply->data = data;
        return CLIENT_OK;
    }
    if (pv_str_eq (type, "error")) {
        const pv_t *code = pv_map_get (root, "code");
        const pv_t *message = pv_map_get (root, "message");
        const pv_t *details = pv_map_get (root, "details");
        if (pv_type (code) != PV_STR || pv_type (message) != PV_STR
        ||  (details && pv_type (details) != PV_ARRAY))
            return s_malformed (why, why_len, "the broker's error answer is "
                                "malformed (it needs a code and a message)");
        size_t len = 0;
        const char *bytes = pv_str (code, &len);
        char *clean = s_clean (bytes, len);
        snprintf (reply->code, sizeof reply->code, "%s", clean ? clean : "");
        free (clean);
        bytes = pv_str (message, &len);
        reply->message = s_clean (bytes, len);
        reply->details = details;
        return CLIENT_OK;
    }
    return s_malformed (why, why_len, "the broker's answer has an unknown "
                        "type");
}

void
client_reply_clear (client_reply_t *reply)
{
    if (!reply)
        return;
    pv_doc_destroy (&reply->doc);
    free (reply->message);
    memset (reply, 0, sizeof *reply);
}

int
client_call (client_t *self, const pw_t *writer, const char *id,
             client_reply_t *reply)
{
    memset (reply, 0, sizeof *reply);
    pv_doc_t *answer = NULL;
    int rc = client_exchange (self, pw_data (writer), pw_size (writer),
                              &answer);
    if (rc != CLIENT_OK)
        return rc;
    rc = client_reply_decode (answer, id, reply, self->error,
                              sizeof self->error);
    reply->doc = answer;
    if (rc == CLIENT_OK)
        self->error [0] = 0;
    return rc;
}

//  ---------------------------------------------------------------------
//  Requests: the generic one, then the typed ones

pw_t *
client_begin (client_t *self, const char *type, size_t field_count)
{
    client_request_id (self->id, sizeof self->id);
    pw_reset (self->writer);
    proto_request_begin (self->writer, type, self->id, field_count);
    return self->writer;
}

int
client_end (client_t *self, client_reply_t *reply)
{
    return client_call (self, self->writer, self->id, reply);
}

const char *
client_request_id_last (const client_t *self)
{
    return self->id;
}

int
client_job_submit (client_t *self, const pw_t *job, client_reply_t *reply)
{
    pw_t *writer = client_begin (self, "job.submit", 1);
    pw_str (writer, "job");
    pw_raw (writer, pw_data (job), pw_size (job));
    return client_end (self, reply);
}

//  A request whose one field is KEY: VALUE (or none when KEY is NULL).
static int
s_simple (client_t *self, const char *type, const char *key,
          const char *value, client_reply_t *reply)
{
    pw_t *writer = client_begin (self, type, key ? 1 : 0);
    if (key) {
        pw_str (writer, key);
        pw_str (writer, value);
    }
    return client_end (self, reply);
}

int
client_job_get (client_t *self, const char *job, client_reply_t *reply)
{
    return s_simple (self, "job.get", "job", job, reply);
}

int
client_job_progress (client_t *self, const char *job, client_reply_t *reply)
{
    return s_simple (self, "job.progress", "job", job, reply);
}

int
client_job_watch (client_t *self, const char *job, int64_t version,
                  int64_t timeout_ms, client_reply_t *reply)
{
    pw_t *writer = client_begin (self, "job.watch", version >= 0 ? 3 : 2);
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "timeout_ms");
    pw_int (writer, timeout_ms);
    if (version >= 0) {
        pw_str (writer, "after");
        pw_int (writer, version);
    }
    return client_end (self, reply);
}

int
client_job_events (client_t *self, const char *job, int64_t after,
                   client_reply_t *reply)
{
    pw_t *writer = client_begin (self, "job.events", after >= 0 ? 2 : 1);
    pw_str (writer, "job");
    pw_str (writer, job);
    if (after >= 0) {
        pw_str (writer, "after");
        pw_int (writer, after);
    }
    return client_end (self, reply);
}

int
client_job_output (client_t *self, const char *job, const char *node,
                   int step, const char *stream, int64_t offset,
                   int64_t limit, client_reply_t *reply)
{
    pw_t *writer = client_begin (self, "job.output", 6);
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "node");
    pw_str (writer, node);
    pw_str (writer, "step");
    pw_int (writer, step);
    pw_str (writer, "stream");
    pw_str (writer, stream);
    pw_str (writer, "offset");
    pw_int (writer, offset);
    pw_str (writer, "limit");
    pw_int (writer, limit);
    return client_end (self, reply);
}

int
client_job_output_attempt (client_t *self, const char *job, const char *node,
                           int step, const char *stream, int attempt,
                           int64_t offset, int64_t limit,
                           client_reply_t *reply)
{
    pw_t *writer = client_begin (self, "job.output", 7);
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "node");
    pw_str (writer, node);
    pw_str (writer, "step");
    pw_int (writer, step);
    pw_str (writer, "stream");
    pw_str (writer, stream);
    pw_str (writer, "attempt");
    pw_int (writer, attempt);
    pw_str (writer, "offset");
    pw_int (writer, offset);
    pw_str (writer, "limit");
    pw_int (writer, limit);
    return client_end (self, reply);
}

int
client_status (client_t *self, client_reply_t *reply)
{
    return s_simple (self, "status", NULL, NULL, reply);
}

int
client_node_list (client_t *self, client_reply_t *reply)
{
    return s_simple (self, "node.list", NULL, NULL, reply);
}

int
client_queue_stats (client_t *self, client_reply_t *reply)
{
    return s_simple (self, "queue.stats", NULL, NULL, reply);
}

int
client_metrics_get (client_t *self, client_reply_t *reply)
{
    return s_simple (self, "metrics.get", NULL, NULL, reply);
}

int
client_relay_list (client_t *self, client_reply_t *reply)
{
    return s_simple (self, "relay.list", NULL, NULL, reply);
}

int
client_token_list (client_t *self, client_reply_t *reply)
{
    return s_simple (self, "token.list", NULL, NULL, reply);
}

int
client_token_add (client_t *self, const char *name, const char *role,
                  client_reply_t *reply)
{
    pw_t *writer = client_begin (self, "token.add", 2);
    pw_str (writer, "name");
    pw_str (writer, name);
    pw_str (writer, "role");
    pw_str (writer, role);
    return client_end (self, reply);
}

int
client_token_revoke (client_t *self, const char *name, client_reply_t *reply)
{
    return s_simple (self, "token.revoke", "name", name, reply);
}

//  ---------------------------------------------------------------------
//  Pipelining over one DEALER

zsock_t *
client_dealer (client_t *self)
{
    if (!self->dealer)
        self->dealer = s_socket_new (self, ZMQ_DEALER, 0, NULL);
    return self->dealer;
}

int
client_send (client_t *self, const void *request, size_t size)
{
    if (!client_dealer (self))
        return -1;
    //  An empty delimiter first, as a REQ socket sends it
    zmsg_t *msg = zmsg_new ();
    zmsg_addmem (msg, "", 0);
    zmsg_addmem (msg, request, size);
    if (zmsg_send (&msg, self->dealer) != 0) {
        zmsg_destroy (&msg);
        return s_fail (self, -1, "cannot send to the broker at %s: %s",
                       self->endpoint, zmq_strerror (zmq_errno ()));
    }
    return 0;
}

pv_doc_t *
client_recv (client_t *self, int timeout_ms)
{
    if (!self->dealer)
        return NULL;
    zsock_set_rcvtimeo (self->dealer, timeout_ms);
    zmsg_t *msg = zmsg_recv (self->dealer);
    if (!msg)
        return NULL;
    zframe_t *body = zmsg_last (msg);
    pv_doc_t *doc = NULL;
    if (body)
        pv_doc_decode (zframe_data (body), zframe_size (body), &doc, NULL, 0);
    zmsg_destroy (&msg);
    return doc;
}
