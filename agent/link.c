/*  =========================================================================
    link - gridagent's link to the broker (link.h)

    Session on one endpoint:

        connected (monitor)    -> hello now, again with backoff
        welcome (link_welcome) -> hello stops, heartbeats start
        error (link_refused)   -> hello at the short pace, if not welcomed
        not_leader (a standby) -> its redirect followed at once when it
                                  names one of our endpoints, else the
                                  endpoint counts as quiet (failover)
        unknown_node, lost     -> heartbeats stop, hello again

    Across endpoints (several configured), checked every
    S_FAILOVER_CHECK_MS:

        not welcomed, quiet failover_ms (+ spread) -> the next endpoint
        not welcomed, its connects refused (no process listens there),
            quiet S_FAILOVER_REFUSED_MS (+ spread)     -> the next endpoint
        welcomed on a later one, every failback_ms -> probe the earlier
            ones in order; the first whose handshake goes through is taken
    =========================================================================
*/
#include "link.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/keys.h"
#include "../proto/log.h"

#define S_HELLO_FIRST_MS 100        //  First hello retry, doubling...
#define S_HELLO_MS 30000            //  ...up to this, until welcomed;
#define S_HELLO_ANSWERED_MS 2000    //  up to this while the broker refuses
#define S_HELLO_INCOMPATIBLE_MS 60000  //  every this while it speaks
                                    //  another protocol (another release)
#define S_HWM 10000                 //  Socket high-water marks
#define S_ZMTP_HEARTBEAT_MS 5000    //  ZMTP-level heartbeats
#define S_ZMTP_TIMEOUT_MS 15000
#define S_HANDSHAKE_MS 10000
#define S_RECONNECT_MS 100          //  First reconnect (plus jitter)
#define S_FAILOVER_CHECK_MS 250     //  How often failover is considered
#define S_FAILOVER_REFUSED_MS 1000  //  Failover from an endpoint that refuses
                                    //  connections (its process is gone)
#define S_REFUSED_TRIES 2           //  ... that many connects in a row
#define S_PROBE_MS 3000             //  Failback: a handshake takes this at most
#define S_RECONNECT_MAX_MS 10000    //  Backoff cap
#define S_LINGER_MS 2000            //  Queued messages get this long at close
#define S_READ_BATCH 64             //  Messages per socket wake-up
#define S_NEXT_HELLO_MS 1000        //  Hello on the next key's session
#define S_OLD_SUB_MS 3000           //  The old session's SUB stays this long
#define S_HEARTBEAT_MIN_MS 100
#define S_HEARTBEAT_MAX_MS 600000
#define S_REDIRECTS_MAX 4           //  Redirects followed without a welcome
#define S_REDIRECTS_WINDOW_MS 60000 //  ... in this long (then the list's
                                    //  order: two standbys naming each
                                    //  other do not keep us moving)

struct _link_t {
    agent_config_t *config;     //  Borrowed from the agent
    zloop_t *loop;              //  Borrowed from the agent
    link_callbacks_t callbacks; //  To the loop...
    void *arg;                  //  ... with this
    zsock_t *dealer;            //  To the broker's agent endpoint
    zsock_t *sub;               //  From the broker's commands endpoint
    pw_t *writer;               //  Reused for every send
    bool stopping;              //  No hello on connect, no failover
    bool welcomed;              //  The broker knows us
    uint32_t heartbeat_ms;      //  From the welcome
    int hello_timer;            //  -1 when none
    uint32_t hello_delay_ms;    //  Next hello retry delay
    bool hello_answered;        //  The broker refused a hello (it is not busy)
    bool incompatible;          //  ... because it speaks another protocol
    int heartbeat_timer;
    zcert_t *cert;              //  Our key pair (NULL when insecure)
    char broker_key [KEYS_TEXT_SIZE];  //  The broker's public key
    zsock_t *monitor;           //  Failed handshakes and losses of the dealer
    char **endpoints;           //  Agent endpoints (--broker), in order
    char **publishes;           //  Their commands endpoints
    char (*server_keys) [KEYS_TEXT_SIZE];  //  Their public keys (secure)
    size_t endpoint_count;
    size_t endpoint;            //  The one in use
    int64_t quiet_since_ms;     //  Monotonic: last heard from it, connected
                                //  to it, or lost it
    int64_t connected_ms;       //  Monotonic: when the session moved to it
    unsigned redirects;         //  Followed since redirect_since_ms
    int64_t redirect_since_ms;  //  Monotonic: the first of them
    int failover_timer;
    unsigned refused;           //  Connects to it to be tried again in a
                                //  row, without a connection made
    bool refused_said;          //  A move away from a refusing endpoint
                                //  was logged since the last handshake
    bool sub_behind;            //  The SUB may sleep in its reconnect
                                //  backoff: connects were retried
    zsock_t *sub_monitor;       //  The SUB's handshakes and losses
    bool sub_up;                //  The SUB is connected (by its monitor;
                                //  true when it has none)
    zsock_t *probe;             //  Failback: a DEALER that only shakes hands
    zsock_t *probe_monitor;     //  ... and its handshake events
    size_t probe_endpoint;      //  ... with this earlier endpoint
    int64_t probe_deadline_ms;  //  ... given up then (monotonic)
    int64_t failback_at_ms;     //  Next failback probe (monotonic), 0: none
    uint32_t failover_spread;   //  0..1000: this agent waits failover_ms and
                                //  this many thousandths of a fifth more
    char last_refusal [512];    //  Last handshake or enrolment refusal logged
    unsigned failed_handshakes; //  In a row, since the last one that went
                                //  through
    //  Key rotation (link_rekey_connect): a second session with the next key
    zcert_t *next_cert;         //  The next key pair, NULL when none
    zsock_t *next_dealer;       //  Its DEALER, SUB and monitor, to the
    zsock_t *next_sub;          //  endpoint in use
    zsock_t *next_monitor;
    int next_hello_timer;       //  Hello on it until its welcome
    bool from_next;             //  on_message is handling a frame of it
    zsock_t *old_dealer;        //  After the switch: the old session's
    zsock_t *old_monitor;       //  sockets, closed at the next turn, and its
    zsock_t *old_sub;           //  SUB a little later (commands on the way)
    int old_timer;
    zcert_t *fallback;          //  link_rekey_fallback's pair, or NULL
    int fallback_timer;         //  Moves to it (out of the monitor's reader)
    //  The broker's key rotation (link_broker_key_next)
    char broker_old [KEYS_TEXT_SIZE];  //  The broker's key now...
    char broker_new [KEYS_TEXT_SIZE];  //  ...and its next one ("": none)
    int broker_swap_timer;      //  Tries the other one (out of the reader)
};

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  The agent's lines (log.h), as agent.c writes them
#define s_log(self, ...) \
    log_write (LOG_LEVEL_INFO, NULL, __VA_ARGS__)
#define s_debug(self, ...) \
    log_write (LOG_LEVEL_DEBUG, NULL, __VA_ARGS__)

size_t
link_jitter (uint32_t ms)
{
    uint32_t spread = ms / 5;
    return (size_t) (ms - spread + (spread ? randof (2 * spread + 1) : 0));
}


//  ---------------------------------------------------------------------
//  Sending

void
link_send_bytes (link_t *self, const void *data, size_t size)
{
    zframe_t *frame = zframe_new (data, size);
    if (!frame)
        return;
    if (zframe_send (&frame, self->dealer, ZFRAME_DONTWAIT))
        s_debug (self, "send to broker dropped: %s", zmq_strerror (errno));
    zframe_destroy (&frame);
}

int
link_send (link_t *self, const proto_msg_t *msg)
{
    pw_reset (self->writer);
    if (proto_msg_encode (msg, self->writer)) {
        log_error ("internal: a %s message does not encode",
               proto_type_name (msg->type));
        return -1;
    }
    link_send_bytes (self, pw_data (self->writer), pw_size (self->writer));
    return 0;
}

static void
s_send_hello (link_t *self)
{
    size_t size = 0;
    const void *hello = self->callbacks.hello (self->arg, &size);
    link_send_bytes (self, hello, size);
}


//  ---------------------------------------------------------------------
//  Timers

static int
s_hello_fired (zloop_t *loop, int timer_id, void *arg);

//  Hello retries start fast (a hello sent before the connection is up is
//  dropped, not queued) and back off to every S_HELLO_MS, give or take a
//  fifth: a busy broker is not asked ever more often by a whole fleet (a
//  new connection says hello at once, s_monitor_ready). A broker that
//  answers with a refusal (pending, duplicate_node) is not busy: it is
//  asked every S_HELLO_ANSWERED_MS, so that an accepted key or a freed
//  node is taken up soon.
static void
s_arm_hello (link_t *self, bool first)
{
    uint32_t most = self->incompatible ? S_HELLO_INCOMPATIBLE_MS
                  : self->hello_answered ? S_HELLO_ANSWERED_MS : S_HELLO_MS;
    if (self->incompatible)
        self->hello_delay_ms = most;
    else
    if (first || self->hello_delay_ms == 0)
        self->hello_delay_ms = S_HELLO_FIRST_MS;
    else
        self->hello_delay_ms = self->hello_delay_ms * 2 < most
                             ? self->hello_delay_ms * 2 : most;
    if (self->hello_timer >= 0)
        zloop_timer_end (self->loop, self->hello_timer);
    self->hello_timer = zloop_timer (self->loop,
                                     link_jitter (self->hello_delay_ms), 1,
                                     s_hello_fired, self);
}

static int
s_hello_fired (zloop_t *loop, int timer_id, void *arg)
{
    link_t *self = (link_t *) arg;
    if (timer_id != self->hello_timer)
        return 0;
    self->hello_timer = -1;
    if (!self->welcomed) {
        s_debug (self, "no welcome yet: hello again");
        s_send_hello (self);
        s_arm_hello (self, false);
    }
    return 0;
}

static int
s_heartbeat_fired (zloop_t *loop, int timer_id, void *arg)
{
    link_t *self = (link_t *) arg;
    if (timer_id != self->heartbeat_timer || !self->welcomed)
        return 0;
    proto_msg_t msg = {
        .type = PROTO_HEARTBEAT, .node = self->config->id
    };
    self->callbacks.load (self->arg, &msg.running, &msg.queued);
    link_send (self, &msg);
    return 0;
}

//  The broker does not know us (any more): register again.
void
link_unwelcome (link_t *self)
{
    self->welcomed = false;
    if (self->heartbeat_timer >= 0)
        zloop_timer_end (self->loop, self->heartbeat_timer);
    self->heartbeat_timer = -1;
    s_send_hello (self);
    s_arm_hello (self, true);
}


//  ---------------------------------------------------------------------
//  Reading: every frame goes to the loop (on_message)

static int
s_dealer_ready (zloop_t *loop, zsock_t *sock, void *arg)
{
    link_t *self = (link_t *) arg;
    //  Whatever it says, the endpoint is there
    self->quiet_since_ms = zclock_mono ();
    for (int count = 0; count < S_READ_BATCH; count++) {
        zmsg_t *msg = zmsg_recv (sock);
        if (!msg)
            break;
        //  A session left for the next key's: what it still says is moot
        if (sock != self->dealer && sock != self->next_dealer) {
            zmsg_destroy (&msg);
            continue;
        }
        self->from_next = sock == self->next_dealer;
        //  One body frame; tolerate an empty delimiter before it
        zframe_t *body = zmsg_first (msg);
        if (zmsg_size (msg) == 2 && zframe_size (body) == 0)
            body = zmsg_next (msg);
        else
        if (zmsg_size (msg) != 1)
            body = NULL;
        if (body)
            self->callbacks.on_message (self->arg, zframe_data (body),
                                       zframe_size (body), false);
        else
            self->callbacks.on_malformed (
                self->arg, "unexpected frames from the broker");
        self->from_next = false;
        zmsg_destroy (&msg);
        //  What it said may have closed this socket (a redirect moves to
        //  another endpoint): it is gone, read no more from it
        if (sock != self->dealer && sock != self->next_dealer)
            break;
    }
    return 0;
}

static int
s_sub_ready (zloop_t *loop, zsock_t *sock, void *arg)
{
    link_t *self = (link_t *) arg;
    //  Not welcomed yet: a welcome already waiting on the DEALER is read
    //  first. The broker sends it before the commands that follow it, on
    //  the other socket: read in the other order, the first command would
    //  be ignored (rule 1) and come again only after the ack timeout
    if (!self->welcomed && self->dealer
        && (zsock_events (self->dealer) & ZMQ_POLLIN))
        s_dealer_ready (loop, self->dealer, self);
    //  What the DEALER said may have closed this socket (a redirect)
    if (sock != self->sub)
        return 0;
    for (int count = 0; count < S_READ_BATCH; count++) {
        zmsg_t *msg = zmsg_recv (sock);
        if (!msg)
            break;
        //  Topic frame, body frame
        if (zmsg_size (msg) == 2) {
            zmsg_first (msg);
            zframe_t *body = zmsg_next (msg);
            self->callbacks.on_message (self->arg, zframe_data (body),
                                       zframe_size (body), true);
        }
        else
            self->callbacks.on_malformed (
                self->arg, "commands message without topic and body");
        zmsg_destroy (&msg);
        if (sock != self->sub)
            break;
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  Connections

static zsock_t *
s_socket (link_t *self, int type, const char *endpoint, char **topics,
          char *err, size_t err_len)
{
    zsock_t *sock = zsock_new (type);
    if (!sock) {
        s_err (err, err_len, "cannot create a socket");
        return NULL;
    }
    zsock_set_maxmsgsize (sock, PROTO_MAX_FRAME);
    zsock_set_sndhwm (sock, S_HWM);
    zsock_set_rcvhwm (sock, S_HWM);
    zsock_set_heartbeat_ivl (sock, S_ZMTP_HEARTBEAT_MS);
    zsock_set_heartbeat_timeout (sock, S_ZMTP_TIMEOUT_MS);
    //  No TTL: the broker then keeps no timer per agent connection
    zsock_set_handshake_ivl (sock, S_HANDSHAKE_MS);
    //  Jittered, backed-off reconnects: a restarted broker is not hit by
    //  the whole fleet in the same millisecond
    zsock_set_reconnect_ivl (sock, (int) (S_RECONNECT_MS
                                          + randof (2 * S_RECONNECT_MS)));
    zsock_set_reconnect_ivl_max (sock, S_RECONNECT_MAX_MS);
    zsock_set_linger (sock, S_LINGER_MS);
    zsock_set_rcvtimeo (sock, 0);
    zsock_set_sndtimeo (sock, 0);
    //  The DEALER queues nothing for a broker that is not connected: a
    //  hello or heartbeat queued for hours would arrive as a stale burst,
    //  and results are re-sent from the spool anyway
    if (type == ZMQ_DEALER)
        zsock_set_immediate (sock, 1);
    if (self->cert)
        keys_curve_client (sock, self->cert, self->broker_key);
    for (size_t index = 0; topics && topics [index]; index++)
        zsock_set_subscribe (sock, topics [index]);
    if (zsock_connect (sock, "%s", endpoint)) {
        s_err (err, err_len, "cannot connect to '%s': %s", endpoint,
               zmq_strerror (zmq_errno ()));
        zsock_destroy (&sock);
    }
    return sock;
}

//  Loads our key pair and the broker's public key.
static int
s_load_keys (link_t *self, char *err, size_t err_len)
{
    const agent_config_t *config = self->config;
    char why [1024];
    self->cert = keys_load_pair (config->key_file, why, sizeof (why));
    if (!self->cert) {
        s_err (err, err_len, "no usable agent key: %s\n"
               "  create one with: gridagent keygen --out %s (then an admin "
               "runs gridcli key accept %s)\n"
               "  or pass --key FILE; against a broker that runs --insecure, "
               "pass --insecure", why, KEYS_DEFAULT_DIR, config->id);
        return -1;
    }
    char **keys = NULL;
    size_t count = agent_config_split (config->broker_key, &keys);
    self->server_keys = (char (*) [KEYS_TEXT_SIZE]) calloc (
        self->endpoint_count, KEYS_TEXT_SIZE);
    int rc = self->server_keys && count ? 0 : -1;
    for (size_t index = 0; rc == 0 && index < self->endpoint_count; index++)
        if (keys_read_public (keys [count == 1 ? 0 : index],
                              self->server_keys [index], why, sizeof (why))) {
            s_err (err, err_len, "no broker public key: %s\n"
                   "  copy the broker's public key file (broker.key) here "
                   "and pass --broker-key FILE, or pass its 40 characters",
                   why);
            rc = -1;
        }
    agent_config_list_free (&keys, &count);
    if (rc == 0)
        memcpy (self->broker_key, self->server_keys [0], KEYS_TEXT_SIZE);
    return rc;
}

#define S_HANDSHAKES_SAID 10     //  Failed handshakes in a row that are
                                 //  worth a warning

//  A failed handshake says why the broker is silent: log it once.
static int s_next_monitor_ready (link_t *self, zsock_t *sock);
static int s_fallback_fired (zloop_t *loop, int timer_id, void *arg);

static int s_broker_swap_fired (zloop_t *loop, int timer_id, void *arg);

static int
s_monitor_ready (zloop_t *loop, zsock_t *sock, void *arg)
{
    link_t *self = (link_t *) arg;
    if (sock == self->next_monitor)
        return s_next_monitor_ready (self, sock);
    if (sock == self->sub_monitor) {
        char why [512];
        int event = keys_monitor_read (sock, why, sizeof why);
        if (event == 3)
            self->sub_up = true;
        else
        if (event == 4)
            self->sub_up = false;
        if (event == 3 || event == 4)
            s_debug (self, "commands socket %s",
                     event == 3 ? "connected" : "lost");
        return 0;
    }
    if (sock != self->monitor) {
        zmsg_t *stale = zmsg_recv (sock);
        zmsg_destroy (&stale);
        return 0;
    }
    char why [512] = "";
    int rc = keys_monitor_read (sock, why, sizeof (why));
    //  Our key refused while a rotation was under way (the broker switched
    //  us to the next key, and we restarted before we knew): the next key
    if (rc == 1 && self->fallback && !self->welcomed
        && self->fallback_timer < 0) {
        log_warn ("the broker refused key %s: taking the next key %s (a key "
                  "rotation was under way)", zcert_public_txt (self->cert),
                  zcert_public_txt (self->fallback));
        self->fallback_timer = zloop_timer (self->loop, 1, 1,
                                            s_fallback_fired, self);
        return 0;
    }
    //  The transport's news: a connection made, a connect to try again
    //  (refused, or the connection just lost)
    if (rc == 5)
        self->refused = 0;
    else
    if (rc == 6) {
        self->refused++;
        self->sub_behind = true;
    }
    if (rc == 3 && self->sub_behind && !self->sub_up && self->sub) {
        //  The endpoint is back (a broker restarted, a standby took
        //  over): the SUB, refused as often as the DEALER and not
        //  connected yet, may wait seconds more in its backed-off
        //  reconnect, and the commands the welcome brings would wait
        //  with it (at the broker, which holds them until the SUB
        //  subscribed). It connects again now (a SUB that is connected
        //  is left alone: its subscription is there).
        const char *publish = self->publishes [self->endpoint];
        s_debug (self, "connecting the commands socket to %s again",
                 publish);
        zsock_disconnect (self->sub, "%s", publish);
        if (zsock_connect (self->sub, "%s", publish))
            s_log (self, "cannot connect to %s: %s", publish,
                   zmq_strerror (zmq_errno ()));
        self->sub_behind = false;
    }
    //  The broker's key is being rotated: a connection lost, or a
    //  handshake that failed, tries the other key of the two next time
    if ((rc == 2 || rc == 4) && *self->broker_new && !self->stopping
        && self->broker_swap_timer < 0)
        self->broker_swap_timer = zloop_timer (
            self->loop, link_jitter (S_RECONNECT_MS * 2), 1,
            s_broker_swap_fired, self);
    if (rc == 3) {
        self->last_refusal [0] = 0;
        self->failed_handshakes = 0;
        self->refused = 0;
        self->refused_said = false;
        //  Connected (again): say hello now, not at the next backed-off
        //  retry, so a restarted broker or relay has us back at once (the
        //  agents that lost it together find it again at their own
        //  jittered reconnect times, s_socket)
        s_debug (self, "connected to %s", self->endpoints [self->endpoint]);
        self->quiet_since_ms = zclock_mono ();
        if (!self->welcomed && !self->stopping) {
            s_send_hello (self);
            s_arm_hello (self, true);
        }
    }
    else
    if ((rc == 1 || rc == 2) && strcmp (why, self->last_refusal) != 0) {
        s_log (self, "%s", why);
        snprintf (self->last_refusal, sizeof (self->last_refusal), "%s", why);
    }
    //  A broker that cannot read our hello (we hold a wrong public key for
    //  it) closes the connection without a word, as a restarting one does:
    //  many failures in a row are said once, with what to check
    if (rc == 2 && ++self->failed_handshakes == S_HANDSHAKES_SAID)
        log_warn ("no handshake with %s went through in %u tries (last: "
                  "%s): if a broker or relay serves there, check that "
                  "--broker-key is its public key (was the broker's key "
                  "rotated while this agent was away? then write its new "
                  "public key to that file: gridcli key fetch-broker --out "
                  "FILE)",
                  self->endpoints [self->endpoint], S_HANDSHAKES_SAID, why);
    if (rc == 4) {
        //  The broker (or relay) went away: register again when it is
        //  back, or fail over to the next endpoint
        self->quiet_since_ms = zclock_mono ();
        if (self->welcomed) {
            s_log (self, "lost the connection to %s: registering again",
                   self->endpoints [self->endpoint]);
            self->callbacks.on_down (self->arg);
            link_unwelcome (self);
        }
    }
    return 0;
}

static void s_next_close (link_t *self);

//  Stops watching the SUB (it is closed, or another session's): it then
//  counts as connected.
static void
s_sub_monitor_end (link_t *self)
{
    if (self->sub_monitor) {
        zloop_reader_end (self->loop, self->sub_monitor);
        zmq_socket_monitor (zsock_resolve (self->sub), NULL, 0);
        zsock_destroy (&self->sub_monitor);
    }
    self->sub_up = true;
}

//  Closes the sockets to the current endpoint.
static void
s_disconnect (link_t *self)
{
    s_next_close (self);
    s_sub_monitor_end (self);
    if (self->monitor) {
        zloop_reader_end (self->loop, self->monitor);
        zmq_socket_monitor (zsock_resolve (self->dealer), NULL, 0);
        zsock_destroy (&self->monitor);
    }
    zsock_t **sockets [2] = {&self->dealer, &self->sub};
    for (int index = 0; index < 2; index++)
        if (*sockets [index]) {
            zloop_reader_end (self->loop, *sockets [index]);
            //  What waits for a peer that is gone is re-sent from the spool
            zsock_set_linger (*sockets [index], 0);
            zsock_destroy (sockets [index]);
        }
}

//  Connects to endpoint INDEX: subscribes first, then the DEALER (rule 1
//  of the protocol). Returns 0, or -1 with a sentence in ERR.
static int
s_connect (link_t *self, size_t index, char *err, size_t err_len)
{
    s_disconnect (self);
    self->endpoint = index;
    self->refused = 0;
    self->sub_behind = false;
    //  Another broker may speak our protocol
    self->incompatible = false;
    if (self->server_keys)
        memcpy (self->broker_key, self->server_keys [index], KEYS_TEXT_SIZE);
    char **topics = agent_topics (self->config, NULL);
    self->sub = topics ? s_socket (self, ZMQ_SUB, self->publishes [index],
                                   topics, err, err_len) : NULL;
    agent_topics_free (&topics);
    if (self->sub)
        self->dealer = s_socket (self, ZMQ_DEALER, self->endpoints [index],
                                 NULL, err, err_len);
    if (!self->sub || !self->dealer)
        return -1;
    self->monitor = keys_monitor_new_lossy (self->dealer);
    if (self->monitor)
        zloop_reader (self->loop, self->monitor, s_monitor_ready, self);
    self->sub_monitor = keys_monitor_new_lossy (self->sub);
    self->sub_up = self->sub_monitor == NULL;
    if (self->sub_monitor)
        zloop_reader (self->loop, self->sub_monitor, s_monitor_ready, self);
    zloop_reader (self->loop, self->dealer, s_dealer_ready, self);
    zloop_reader (self->loop, self->sub, s_sub_ready, self);
    zloop_reader_set_tolerant (self->loop, self->dealer);
    zloop_reader_set_tolerant (self->loop, self->sub);
    self->quiet_since_ms = self->connected_ms = zclock_mono ();
    return 0;
}

//  Failback: closes the probe, if any.
static void
s_probe_end (link_t *self)
{
    if (self->probe_monitor) {
        zmq_socket_monitor (zsock_resolve (self->probe), NULL, 0);
        zsock_destroy (&self->probe_monitor);
    }
    zsock_destroy (&self->probe);
}

//  Failback: the next probe FAILBACK_MS from NOW_MS, +-20 % so that the
//  agents a relay lost do not all come back to it in the same moment.
static void
s_failback_arm (link_t *self, int64_t now_ms)
{
    int64_t ms = self->config->failback_ms;
    self->failback_at_ms = now_ms + (int64_t) link_jitter (
        (uint32_t) (ms > INT32_MAX ? INT32_MAX : ms));
}

//  Failback: a DEALER to endpoint INDEX that only shakes hands (it says
//  nothing, so nothing registers); its monitor tells whether it answers.
static void
s_probe_start (link_t *self, size_t index, int64_t now_ms)
{
    char saved [KEYS_TEXT_SIZE];
    memcpy (saved, self->broker_key, KEYS_TEXT_SIZE);
    if (self->server_keys)
        memcpy (self->broker_key, self->server_keys [index], KEYS_TEXT_SIZE);
    char err [512] = "";
    self->probe = s_socket (self, ZMQ_DEALER, self->endpoints [index], NULL,
                            err, sizeof err);
    memcpy (self->broker_key, saved, KEYS_TEXT_SIZE);
    if (self->probe) {
        zsock_set_linger (self->probe, 0);
        self->probe_monitor = keys_monitor_new (self->probe);
    }
    if (!self->probe || !self->probe_monitor) {
        s_probe_end (self);
        s_failback_arm (self, now_ms);
        return;
    }
    self->probe_endpoint = index;
    self->probe_deadline_ms = now_ms + S_PROBE_MS;
}

//  Moves the session to endpoint INDEX: as after a failover, hello there
//  (what is spooled is sent again once welcomed).
static void
s_switch (link_t *self, size_t index, int64_t now_ms)
{
    self->welcomed = false;
    if (self->heartbeat_timer >= 0)
        zloop_timer_end (self->loop, self->heartbeat_timer);
    self->heartbeat_timer = -1;
    self->failback_at_ms = 0;
    char err [512] = "";
    if (s_connect (self, index, err, sizeof err) != 0) {
        log_error ("cannot connect to %s: %s", self->endpoints [index], err);
        self->quiet_since_ms = now_ms;
        return;
    }
    s_send_hello (self);
    s_arm_hello (self, true);
}

//  Welcomed on a later endpoint: every failback_ms (jittered) the earlier
//  ones are tried in order with a probe that only shakes hands, and the
//  first that answers is taken. A relay serves agents only while it has
//  its upstream, so one that answers can carry us; one that then does not
//  welcome us is left again by the failover.
static void
s_failback_check (link_t *self, int64_t now_ms)
{
    if (self->endpoint == 0 || self->config->failback_ms == 0) {
        s_probe_end (self);
        self->failback_at_ms = 0;
        return;
    }
    if (!self->probe) {
        if (!self->failback_at_ms)
            s_failback_arm (self, now_ms);
        else
        if (now_ms >= self->failback_at_ms)
            s_probe_start (self, 0, now_ms);
        return;
    }
    bool refused = false;
    while (!refused && (zsock_events (self->probe_monitor) & ZMQ_POLLIN)) {
        char why [512];
        int rc = keys_monitor_read (self->probe_monitor, why, sizeof why);
        if (rc == 3) {
            size_t back = self->probe_endpoint;
            s_probe_end (self);
            s_log (self, "%s answers again: going back to it from %s",
                   self->endpoints [back], self->endpoints [self->endpoint]);
            s_switch (self, back, now_ms);
            return;
        }
        refused = rc == 1 || rc == 2 || rc < 0;
    }
    if (!refused && now_ms < self->probe_deadline_ms)
        return;
    size_t next = self->probe_endpoint + 1;
    s_probe_end (self);
    if (next < self->endpoint)
        s_probe_start (self, next, now_ms);
    else
        s_failback_arm (self, now_ms);
}

//  With several endpoints: an agent not welcomed that heard nothing from
//  its endpoint for failover_ms moves to the next one, in order (after
//  the last, the first again). A broker that answers, even to refuse
//  (a pending key), keeps it. It stays where it is welcomed, but for a
//  failback to an earlier endpoint (s_failback_check).
static int
s_failover_fired (zloop_t *loop, int timer_id, void *arg)
{
    link_t *self = (link_t *) arg;
    if (self->endpoint_count < 2 || self->stopping)
        return 0;
    int64_t now_ms = zclock_mono ();
    if (self->welcomed) {
        s_failback_check (self, now_ms);
        return 0;
    }
    s_probe_end (self);
    self->failback_at_ms = 0;
    //  The agents of a relay that went away all lost it at once: each
    //  waits its own share longer, so the next one is not hit by all of
    //  them in the same moment
    int64_t wait_ms = self->config->failover_ms
                      + self->config->failover_ms / 5
                            * (int64_t) self->failover_spread / 1000;
    //  An endpoint that refuses connections has no process listening (a
    //  broker or relay that died, a standby): no use waiting for it. One
    //  that is hung accepts connections (its kernel does) and is left
    //  only after failover_ms, as one that is silent
    bool refusing = self->refused >= S_REFUSED_TRIES;
    int64_t refused_ms = S_FAILOVER_REFUSED_MS
                         + S_FAILOVER_REFUSED_MS / 5
                               * (int64_t) self->failover_spread / 1000;
    if (refusing && wait_ms > refused_ms)
        wait_ms = refused_ms;
    if (now_ms - self->quiet_since_ms < wait_ms)
        return 0;
    size_t next = (self->endpoint + 1) % self->endpoint_count;
    if (refusing && self->refused_said)
        //  Going round endpoints that all refuse: said once
        s_debug (self, "%s refused connections for %lld ms: trying %s",
                 self->endpoints [self->endpoint],
                 (long long) (now_ms - self->quiet_since_ms),
                 self->endpoints [next]);
    else
    if (refusing)
        s_log (self, "%s refused connections (nothing listens there) for "
               "%lld ms: trying %s", self->endpoints [self->endpoint],
               (long long) (now_ms - self->quiet_since_ms),
               self->endpoints [next]);
    else
        s_log (self, "nothing from %s for %lld ms: trying %s",
               self->endpoints [self->endpoint],
               (long long) (now_ms - self->quiet_since_ms),
               self->endpoints [next]);
    self->refused_said = self->refused_said || refusing;
    char err [512] = "";
    if (s_connect (self, next, err, sizeof err) != 0) {
        log_error ("cannot connect to %s: %s", self->endpoints [next], err);
        self->quiet_since_ms = now_ms;
        return 0;
    }
    s_send_hello (self);
    s_arm_hello (self, true);
    return 0;
}


//  ---------------------------------------------------------------------
//  Key rotation: a second session with the next key, on the same endpoint

//  Closes the old session's sockets: its DEALER and monitor, and its SUB
//  too when ALL (else only when its time has come).
static void
s_old_close (link_t *self, bool all)
{
    zsock_t **sockets [3] = {&self->old_monitor, &self->old_dealer,
                             &self->old_sub};
    for (int index = 0; index < (all ? 3 : 2); index++)
        if (*sockets [index]) {
            zloop_reader_end (self->loop, *sockets [index]);
            if (index == 0 && self->old_dealer)
                zmq_socket_monitor (zsock_resolve (self->old_dealer), NULL, 0);
            zsock_set_linger (*sockets [index], 0);
            zsock_destroy (sockets [index]);
        }
}

static int
s_old_fired (zloop_t *loop, int timer_id, void *arg)
{
    link_t *self = (link_t *) arg;
    if (timer_id != self->old_timer)
        return 0;
    //  First the DEALER at the next turn, then the SUB after S_OLD_SUB_MS
    bool all = !self->old_dealer;
    s_old_close (self, all);
    self->old_timer = all ? -1 : zloop_timer (self->loop, S_OLD_SUB_MS, 1,
                                              s_old_fired, self);
    return 0;
}

static void
s_next_send_hello (link_t *self)
{
    size_t size = 0;
    const void *hello = self->callbacks.hello (self->arg, &size);
    zframe_t *frame = zframe_new (hello, size);
    if (frame && zframe_send (&frame, self->next_dealer, ZFRAME_DONTWAIT))
        s_debug (self, "hello on the next key's session dropped: %s",
                 zmq_strerror (errno));
    zframe_destroy (&frame);
}

static int
s_next_hello_fired (zloop_t *loop, int timer_id, void *arg)
{
    link_t *self = (link_t *) arg;
    if (timer_id == self->next_hello_timer && self->next_dealer)
        s_next_send_hello (self);
    return 0;
}

//  The next key's session connected: hello there at once.
static int
s_next_monitor_ready (link_t *self, zsock_t *sock)
{
    char why [512] = "";
    int rc = keys_monitor_read (sock, why, sizeof why);
    if (rc == 3)
        s_next_send_hello (self);
    else
    if (rc == 1 || rc == 2)
        s_log (self, "the next key's session: %s", why);
    return 0;
}

//  Ends the next key's session, if any (its pair goes too).
static void
s_next_close (link_t *self)
{
    if (self->next_hello_timer >= 0)
        zloop_timer_end (self->loop, self->next_hello_timer);
    self->next_hello_timer = -1;
    if (self->next_monitor) {
        zloop_reader_end (self->loop, self->next_monitor);
        zmq_socket_monitor (zsock_resolve (self->next_dealer), NULL, 0);
        zsock_destroy (&self->next_monitor);
    }
    zsock_t **sockets [2] = {&self->next_dealer, &self->next_sub};
    for (int index = 0; index < 2; index++)
        if (*sockets [index]) {
            zloop_reader_end (self->loop, *sockets [index]);
            zsock_set_linger (*sockets [index], 0);
            zsock_destroy (sockets [index]);
        }
    zcert_destroy (&self->next_cert);
    self->from_next = false;
}

//  The next key's session was welcomed: it becomes the session, and the
//  old one is closed (its DEALER at the next turn of the loop, its SUB a
//  few seconds later, so that commands already sent down it arrive).
static void
s_next_promote (link_t *self)
{
    if (self->old_timer >= 0)
        zloop_timer_end (self->loop, self->old_timer);
    s_old_close (self, true);
    s_sub_monitor_end (self);
    if (self->monitor)
        zloop_reader_end (self->loop, self->monitor);
    zloop_reader_end (self->loop, self->dealer);
    self->old_monitor = self->monitor;
    self->old_dealer = self->dealer;
    self->old_sub = self->sub;
    self->monitor = self->next_monitor;
    self->dealer = self->next_dealer;
    self->sub = self->next_sub;
    //  The SUB, connected by now, is watched as s_connect's is
    self->sub_monitor = keys_monitor_new_lossy (self->sub);
    if (self->sub_monitor)
        zloop_reader (self->loop, self->sub_monitor, s_monitor_ready, self);
    zcert_destroy (&self->cert);
    self->cert = self->next_cert;
    self->next_monitor = self->next_dealer = self->next_sub = NULL;
    self->next_cert = NULL;
    if (self->next_hello_timer >= 0)
        zloop_timer_end (self->loop, self->next_hello_timer);
    self->next_hello_timer = -1;
    self->from_next = false;
    self->old_timer = zloop_timer (self->loop, 1, 1, s_old_fired, self);
    s_log (self, "switched to the next key %s", zcert_public_txt (self->cert));
}

void
link_rekey_connect (link_t *self, zcert_t **next_p)
{
    s_next_close (self);
    self->next_cert = *next_p;
    *next_p = NULL;
    if (!self->next_cert || !self->cert)
        return;
    zcert_t *current = self->cert;
    self->cert = self->next_cert;
    char err [512] = "";
    char **topics = agent_topics (self->config, NULL);
    self->next_sub = topics ? s_socket (self, ZMQ_SUB,
                                        self->publishes [self->endpoint],
                                        topics, err, sizeof err) : NULL;
    agent_topics_free (&topics);
    if (self->next_sub)
        self->next_dealer = s_socket (self, ZMQ_DEALER,
                                      self->endpoints [self->endpoint], NULL,
                                      err, sizeof err);
    self->cert = current;
    if (!self->next_sub || !self->next_dealer) {
        log_warn ("cannot open a session with the next key: %s", err);
        s_next_close (self);
        return;
    }
    //  The events a session lives by (lost, connected): once welcomed it
    //  becomes the session (s_next_promote), and a lost connection must
    //  be seen then, to register again and to try the broker's next key
    self->next_monitor = keys_monitor_new_lossy (self->next_dealer);
    if (self->next_monitor)
        zloop_reader (self->loop, self->next_monitor, s_monitor_ready, self);
    zloop_reader (self->loop, self->next_dealer, s_dealer_ready, self);
    zloop_reader (self->loop, self->next_sub, s_sub_ready, self);
    zloop_reader_set_tolerant (self->loop, self->next_dealer);
    zloop_reader_set_tolerant (self->loop, self->next_sub);
    self->next_hello_timer = zloop_timer (self->loop, S_NEXT_HELLO_MS, 0,
                                          s_next_hello_fired, self);
}

void
link_rekey_abort (link_t *self)
{
    s_next_close (self);
}

bool
link_rekeying (link_t *self)
{
    return self->next_dealer != NULL;
}

bool
link_from_next (link_t *self)
{
    return self->from_next;
}

const char *
link_key (link_t *self)
{
    return self->cert ? zcert_public_txt (self->cert) : NULL;
}

void
link_rekey_fallback (link_t *self, zcert_t **next_p)
{
    zcert_destroy (&self->fallback);
    self->fallback = *next_p;
    *next_p = NULL;
}

static int
s_fallback_fired (zloop_t *loop, int timer_id, void *arg)
{
    link_t *self = (link_t *) arg;
    if (timer_id != self->fallback_timer)
        return 0;
    self->fallback_timer = -1;
    if (!self->fallback || self->welcomed)
        return 0;
    zcert_destroy (&self->cert);
    self->cert = self->fallback;
    self->fallback = NULL;
    s_switch (self, self->endpoint, zclock_mono ());
    return 0;
}


//  The broker's key rotation: the endpoint in use trusted with one of the
//  two keys is trusted with the other one, and connected to again.
static int
s_broker_swap_fired (zloop_t *loop, int timer_id, void *arg)
{
    link_t *self = (link_t *) arg;
    if (timer_id != self->broker_swap_timer)
        return 0;
    self->broker_swap_timer = -1;
    if (!*self->broker_new || self->stopping || self->welcomed
        || !self->server_keys)
        return 0;
    char *key = self->server_keys [self->endpoint];
    const char *other = streq (key, self->broker_old) ? self->broker_new
                      : streq (key, self->broker_new) ? self->broker_old
                      : NULL;
    if (!other)
        return 0;
    s_debug (self, "the broker's key is being rotated: trying %s on %s",
             other, self->endpoints [self->endpoint]);
    snprintf (key, KEYS_TEXT_SIZE, "%s", other);
    s_switch (self, self->endpoint, zclock_mono ());
    return 0;
}

void
link_broker_key_next (link_t *self, const char *old, const char *next)
{
    snprintf (self->broker_old, sizeof self->broker_old, "%s",
              old && next ? old : "");
    snprintf (self->broker_new, sizeof self->broker_new, "%s",
              old && next ? next : "");
}

void
link_broker_key_map (link_t *self, const char *old, const char *next)
{
    if (!self->server_keys)
        return;
    bool in_use = false;
    for (size_t index = 0; index < self->endpoint_count; index++)
        if (streq (self->server_keys [index], old)) {
            snprintf (self->server_keys [index], KEYS_TEXT_SIZE, "%s", next);
            in_use = in_use || index == self->endpoint;
        }
    if (in_use && !self->welcomed)
        s_switch (self, self->endpoint, zclock_mono ());
}

const char *
link_broker_key (link_t *self)
{
    return self->server_keys ? self->broker_key : NULL;
}

//  ---------------------------------------------------------------------
//  The link

link_t *
link_new (zloop_t *loop, agent_config_t *config,
          const link_callbacks_t *callbacks, void *arg, char *err,
          size_t err_len)
{
    link_t *self = (link_t *) calloc (1, sizeof (link_t));
    if (!self) {
        s_err (err, err_len, "out of memory");
        return NULL;
    }
    self->config = config;
    self->loop = loop;
    self->callbacks = *callbacks;
    self->arg = arg;
    self->hello_timer = self->heartbeat_timer = self->failover_timer = -1;
    self->next_hello_timer = self->old_timer = self->fallback_timer = -1;
    self->broker_swap_timer = -1;
    self->failover_spread = (uint32_t) randof (1001);
    self->writer = pw_new ();
    if (!self->writer) {
        s_err (err, err_len, "out of memory");
        link_destroy (&self);
        return NULL;
    }
    self->endpoint_count = agent_config_split (config->broker, &self->endpoints);
    size_t publish_count = agent_config_split (config->publish, &self->publishes);
    if (!self->endpoint_count || publish_count != self->endpoint_count) {
        s_err (err, err_len, "one commands endpoint per broker endpoint");
        link_destroy (&self);
        return NULL;
    }
    if (!config->insecure && s_load_keys (self, err, err_len)) {
        link_destroy (&self);
        return NULL;
    }

    //  Subscribe before connecting, and both before the first hello, so
    //  no command published after our welcome can miss us
    if (s_connect (self, 0, err, err_len) != 0) {
        link_destroy (&self);
        return NULL;
    }
    //  One endpoint has nothing to fail over to: no timer wakes an idle
    //  agent for it
    if (self->endpoint_count > 1)
        self->failover_timer = zloop_timer (self->loop, S_FAILOVER_CHECK_MS,
                                            0, s_failover_fired, self);
    return self;
}

void
link_destroy (link_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    link_t *self = *self_p;
    int *timers [7] = {&self->hello_timer, &self->heartbeat_timer,
                       &self->failover_timer, &self->next_hello_timer,
                       &self->old_timer, &self->fallback_timer,
                       &self->broker_swap_timer};
    for (int index = 0; index < 7; index++)
        if (*timers [index] >= 0)
            zloop_timer_end (self->loop, *timers [index]);
    s_next_close (self);
    s_old_close (self, true);
    zcert_destroy (&self->fallback);
    s_sub_monitor_end (self);
    if (self->monitor)
        zloop_reader_end (self->loop, self->monitor);
    if (self->dealer)
        zloop_reader_end (self->loop, self->dealer);
    if (self->sub)
        zloop_reader_end (self->loop, self->sub);
    s_probe_end (self);
    zsock_destroy (&self->monitor);
    zsock_destroy (&self->dealer);
    zsock_destroy (&self->sub);
    agent_topics_free (&self->endpoints);
    agent_topics_free (&self->publishes);
    free (self->server_keys);
    zcert_destroy (&self->cert);
    pw_destroy (&self->writer);
    free (self);
    *self_p = NULL;
}

void
link_hello (link_t *self)
{
    s_send_hello (self);
    s_arm_hello (self, true);
}

void
link_welcome (link_t *self, uint32_t heartbeat_ms)
{
    uint32_t beat = heartbeat_ms;
    if (beat < S_HEARTBEAT_MIN_MS)
        beat = S_HEARTBEAT_MIN_MS;
    if (beat > S_HEARTBEAT_MAX_MS)
        beat = S_HEARTBEAT_MAX_MS;
    //  The welcome of the next key's session: it becomes the session
    if (self->from_next)
        s_next_promote (self);
    bool changed = !self->welcomed || beat != self->heartbeat_ms;
    self->welcomed = true;
    self->redirects = 0;
    self->hello_answered = false;
    self->incompatible = false;
    if (self->hello_timer >= 0)
        zloop_timer_end (self->loop, self->hello_timer);
    self->hello_timer = -1;
    if (changed) {
        if (self->heartbeat_timer >= 0)
            zloop_timer_end (self->loop, self->heartbeat_timer);
        self->heartbeat_ms = beat;
        self->heartbeat_timer = zloop_timer (self->loop, beat, 0,
                                             s_heartbeat_fired, self);
    }
    self->last_refusal [0] = 0;
    //  The broker grants topics only to a node it knows: ask again now
    if (self->cert) {
        char **topics = agent_topics (self->config, NULL);
        for (size_t index = 0; topics && topics [index]; index++) {
            zsock_set_unsubscribe (self->sub, topics [index]);
            zsock_set_subscribe (self->sub, topics [index]);
        }
        agent_topics_free (&topics);
    }
}

uint32_t
link_heartbeat_ms (link_t *self)
{
    return self->heartbeat_ms;
}

//  What to upgrade, after a refusal MESSAGE of our protocol version: a
//  relay names itself; a broker says the versions it speaks ("(speaks
//  1)", "(speaks 1 to 2)"): one older than this agent is upgraded first.
static const char *
s_upgrade_advice (const char *message)
{
    if (strstr (message, "through relay"))
        return "Upgrade that relay, then this agent";
    const char *speaks = strstr (message, "(speaks ");
    if (!speaks)
        return "Upgrade gridagent or the broker so that their releases are "
               "at most one apart";
    int oldest = 0, newest = 0;
    int read = sscanf (speaks, "(speaks %d to %d)", &oldest, &newest);
    if (read == 1)
        newest = oldest;
    return read >= 1 && newest < PROTO_VERSION
           ? "This agent is newer than the broker: upgrade the broker first "
             "(brokers, then relays, then agents), or run the gridagent of "
             "the broker's release"
           : "This agent is older than the broker speaks: upgrade gridagent";
}

//  A standby's not_leader, before a welcome: moves at once to ENDPOINT
//  (the active's, or NULL) when it is one of ours (each has its own
//  broker key: an endpoint we were not given is never dialled) and
//  the redirects of the last minute are few. Returns true when it
//  moved. Else the standby counts as silent: the failover leaves it.
static bool
s_redirect (link_t *self, const char *endpoint, const char *message)
{
    self->quiet_since_ms = self->connected_ms;
    size_t index = 0;
    while (endpoint && index < self->endpoint_count
           && strcmp (self->endpoints [index], endpoint) != 0)
        index++;
    bool ours = endpoint && index < self->endpoint_count;
    int64_t now_ms = zclock_mono ();
    if (now_ms - self->redirect_since_ms > S_REDIRECTS_WINDOW_MS) {
        self->redirects = 0;
        self->redirect_since_ms = now_ms;
    }
    const char *why = !endpoint ? NULL
                    : !ours ? "is not one of this agent's --broker "
                              "endpoints: not followed"
                    : index == self->endpoint ? "is the one in use"
                    : self->redirects >= S_REDIRECTS_MAX
                        ? "was one redirect too many this minute: "
                          "not followed"
                    : NULL;
    if (why) {
        if (strcmp (self->last_refusal, message) != 0)
            log_warn ("%s: the active's agent endpoint %s %s",
                      self->endpoints [self->endpoint], endpoint, why);
        return false;
    }
    if (!endpoint)
        return false;
    self->redirects++;
    log_info ("%s is a standby: moving to the active at %s (%s)",
              self->endpoints [self->endpoint], endpoint, message);
    self->last_refusal [0] = 0;
    s_switch (self, index, now_ms);
    return true;
}

void
link_refused (link_t *self, const char *code, const char *message,
              const char *endpoint)
{
    if (!self->welcomed && strcmp (code, PROTO_ERR_NOT_LEADER) == 0
        && s_redirect (self, endpoint, message))
        return;
    //  Until a welcome, the same refusal answers every hello: say it once
    bool repeated = !self->welcomed
                    && strcmp (self->last_refusal, message) == 0;
    //  A broker of another release: it refuses our protocol version, or
    //  a hello key it does not know. Waiting will not help, an upgrade
    //  will: say so at error level, and ask again only once a minute
    bool incompatible = !self->welcomed
        && (strcmp (code, PROTO_ERR_VERSION) == 0
            || (strcmp (code, PROTO_ERR_MALFORMED) == 0
                && strstr (message, "hello: unknown key")));
    if (!repeated && incompatible)
        log_error ("the broker at %s does not speak this agent's protocol "
                   "(release %s, protocol %d): %s: %s. %s; asking again "
                   "every %d s", self->endpoints [self->endpoint],
                   GRID_VERSION, PROTO_VERSION, code, message,
                   s_upgrade_advice (message), S_HELLO_INCOMPATIBLE_MS / 1000);
    else
    if (!repeated)
        s_log (self, "broker says %s: %s", code, message);
    if (!self->welcomed)
        snprintf (self->last_refusal, sizeof self->last_refusal, "%s",
                  message);
    if (incompatible && !self->incompatible) {
        self->incompatible = true;
        self->hello_answered = true;
        s_arm_hello (self, false);
    }
    else
    //  A refused hello: the broker answers, so ask again at the short pace
    if (!self->welcomed && !self->hello_answered) {
        self->hello_answered = true;
        if (self->hello_delay_ms > S_HELLO_ANSWERED_MS)
            s_arm_hello (self, false);
    }
}

bool
link_welcomed (link_t *self)
{
    return self->welcomed;
}

void
link_stop (link_t *self)
{
    self->stopping = true;
}
