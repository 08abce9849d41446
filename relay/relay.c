/*  =========================================================================
    relay - gridrelay (see relay.h)
    =========================================================================
*/
#include "relay.h"
#include "brokerkeys.h"
#include "frames.h"
#include "status.h"
#include "topics.h"
#include "upstream.h"

#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../proto/cmdline.h"
#include "../proto/conf.h"
#include "../proto/epoch.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "../proto/mpscan.h"
#include "../proto/names.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "../proto/relaywire.h"
#include "../proto/service.h"

#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_DOMAIN_CLIENTS "clients"
#define S_PEER_TIMEOUT_MIN_MS 15000  //  A silent peer is forgotten after
                                     //  3 heartbeats, at least this
#define S_SWEEP_MS 1000              //  Peers are checked this often
#define S_BATCH 1024                 //  Messages read per socket event
#define S_PEERS_MAX 200000           //  Downstream peers at most
#define S_STALE_END_MS 2000          //  The end of a connection left may
                                     //  come this late after the next one
#define S_SERVE_WAIT_MS 2000         //  Several upstreams: a handshake not
                                     //  answered by a welcome or a
                                     //  not_leader this long serves all the
                                     //  same (an upstream of an earlier
                                     //  release welcomes no relay)

//  One downstream peer (an agent, or a relay below), by its key.
typedef struct {
    char token [KEYS_TEXT_SIZE];     //  Its key (Z85), or its routing id
                                     //  as a key (--insecure)
    uint8_t routing [32];            //  Its connection's routing id
    uint8_t routing_size;
    bool welcomed;                   //  An agent of its own was welcomed
    int64_t last_seen_ms;            //  Monotonic: its last message
    int64_t heartbeat_ms;            //  From the welcomes it got (0: none)
    relay_topics_t hello;            //  Topics of its own last hello
    zhashx_t *behind;                //  A relay below: via (text) -> topics
                                     //  (relay_topics_t) of the last hello
                                     //  it passed up for each; NULL until
                                     //  one
    relay_topics_t entitled;         //  Topics it was welcomed for
    relay_topics_t granted;          //  Topics granted to it now
} s_peer_t;

struct _relay_t {
    const relay_config_t *config;
    zloop_t *loop;
    zsock_t *down;                   //  Agents (ROUTER)
    zsock_t *down_pub;               //  Commands to agents (XPUB)
    zsock_t *client;                 //  Status requests (ROUTER), or NULL
    zsock_t *up;                     //  To upstream (DEALER)
    zsock_t *up_sub;                 //  From upstream (XSUB)
    zsock_t *zap;                    //  ZAP handler (REP), secure mode
    zsock_t *monitor;                //  Upstream connection events (PAIR)
    char monitor_ep [128];
    zcert_t *cert;                   //  Our key pair (upstream identity)
    zcert_t *server_cert;            //  Downstream server key pair
    relay_upstream_t *upstream;      //  The upstream list (upstream.h)
    bool own_welcomed;               //  Our heartbeat was welcomed on this
                                     //  connection
    bool standby;                    //  The upstream said not_leader on it
    int64_t serve_at_ms;             //  Monotonic: serve then unless told
                                     //  otherwise (0: not waiting)
    int64_t quiet_since_ms;          //  Monotonic: moved to the endpoint in
                                     //  use, or lost it (failover clock)
    int64_t hold_until_ms;           //  Monotonic: a key swap keeps serving
                                     //  the agents until then (0: none)
    bool rekey_granted;              //  The welcome granted broker_rekey
    uint32_t up_fd;                  //  The connection's descriptor (its
                                     //  connected event's), when ready
    uint32_t connected_fd;           //  The last connection made's
    bool serving;                    //  Downstream endpoints are bound
    bool serve_failed;               //  The last bind failed (logged once;
                                     //  tried again every sweep)
    bool up_ready;                   //  The upstream handshake succeeded
    unsigned failed_handshakes;      //  Upstream, in a row
    int64_t up_since_ms;             //  Monotonic: up_ready changed
    zhashx_t *peers;                 //  token -> s_peer_t
    zhashx_t *topics;                //  topic -> holders (char *): upstream
                                     //  subscriptions
    zhashx_t *renewed;               //  Topics subscribed again since the
                                     //  upstream connected (set)
    pw_t *writer;
    int signal_fd;
    int64_t started_ms;
    struct {
        uint64_t up;                 //  Messages forwarded upstream
        uint64_t down;               //  Messages forwarded downstream
        uint64_t commands;           //  Commands republished
        uint64_t malformed;          //  Frames of a wrong shape, dropped
        uint64_t unroutable;         //  For a peer that is gone, dropped
        uint64_t dropped;            //  Not sent (upstream full or down)
        uint64_t refused_topics;     //  Subscriptions not granted
        uint64_t refused;            //  Errors the upstream sent us
        uint64_t stale_epoch;        //  From a cluster's active of an
                                     //  epoch lower than seen, dropped
        uint64_t redirects;          //  A standby's redirects followed
        uint64_t failovers;          //  Moves to the next upstream
        uint64_t key_swaps;          //  Broker keys tried on reconnection
    } counters;
    epoch_gate_t *epochs;            //  The highest epoch seen upstream
    relay_frames_t frames;           //  Results upstream, batched once
                                     //  granted (frames.h)
    bool ask_results;                //  Our heartbeat asks for `results`
};

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  ---------------------------------------------------------------------
//  Peers and topics

static void
s_peer_destroy (void **item_p)
{
    s_peer_t *peer = (s_peer_t *) *item_p;
    if (peer) {
        relay_topics_clear (&peer->hello);
        zhashx_destroy (&peer->behind);
        relay_topics_clear (&peer->entitled);
        relay_topics_clear (&peer->granted);
        free (peer);
        *item_p = NULL;
    }
}

static s_peer_t *
s_peer_new (const char *token)
{
    s_peer_t *peer = (s_peer_t *) zmalloc (sizeof (s_peer_t));
    memcpy (peer->token, token, KEYS_TEXT_SIZE);
    return peer;
}

//  The topics of the last hello PEER passed up from PATH ("": its own),
//  made empty at first use when MAKE, else NULL when none.
static relay_topics_t *
s_peer_hello (s_peer_t *peer, const char *path, bool make)
{
    if (!*path)
        return &peer->hello;
    relay_topics_t *topics = peer->behind ? (relay_topics_t *) zhashx_lookup (
                                            peer->behind, path)
                                      : NULL;
    if (!topics && make) {
        if (!peer->behind) {
            peer->behind = zhashx_new ();
            zhashx_set_destructor (peer->behind, relay_topics_destroy);
        }
        topics = (relay_topics_t *) zmalloc (sizeof (relay_topics_t));
        zhashx_insert (peer->behind, path, topics);
    }
    return topics;
}

//  Subscribes (ON) or unsubscribes TOPIC on the upstream XSUB.
static void
s_upstream_subscribe (relay_t *self, const char *topic, bool on)
{
    size_t len = strlen (topic);
    zframe_t *frame = zframe_new (NULL, len + 1);
    uint8_t *data = zframe_data (frame);
    data [0] = on ? 1 : 0;
    memcpy (data + 1, topic, len);
    if (zframe_send (&frame, self->up_sub, ZFRAME_DONTWAIT) != 0) {
        self->counters.dropped++;
        zframe_destroy (&frame);
    }
}

//  One more (DELTA 1) or one fewer (-1) holder of TOPIC; the first
//  subscribes it upstream, the last unsubscribes it.
static void
s_topic_count (relay_t *self, const char *topic, int delta)
{
    char *count = (char *) zhashx_lookup (self->topics, topic);
    long long before = count ? atoll (count) : 0;
    long long after = before + delta;
    if (after <= 0) {
        if (before > 0) {
            zhashx_delete (self->topics, topic);
            s_upstream_subscribe (self, topic, false);
        }
        return;
    }
    zhashx_update (self->topics, topic, zsys_sprintf ("%lld", after));
    if (before == 0)
        s_upstream_subscribe (self, topic, true);
}

//  Forgets PEER: the topics granted to it lose a holder.
static void
s_peer_forget (relay_t *self, s_peer_t *peer)
{
    for (size_t index = 0; index < peer->granted.count; index++)
        s_topic_count (self, peer->granted.items [index], -1);
    relay_topics_clear (&peer->granted);
    zhashx_delete (self->peers, peer->token);
}

//  TOPICS become those of HELLO, as its agent subscribes (PROTOCOL.md
//  section 3). Appended as they come, never searched: a hello is read
//  before its key is judged, and one of 4096 groups and labels of eight
//  segments makes some 37,000 topics (a duplicate, from a repeated group,
//  is harmless: a welcome adds each topic once).
static void
s_hello_topics (const proto_msg_t *hello, relay_topics_t *topics)
{
    char topic [512];
    relay_topics_clear (topics);
    relay_topics_append (topics, "all/");
    snprintf (topic, sizeof topic, "node/%s/", hello->node);
    relay_topics_append (topics, topic);
    for (size_t index = 0; index < hello->group_count; index++) {
        snprintf (topic, sizeof topic, "group/%s/", hello->groups [index]);
        relay_topics_append (topics, topic);
    }
    for (size_t index = 0; index < hello->label_count; index++) {
        const char *value = hello->labels [index].value;
        for (const char *dot = value; dot;) {
            dot = strchr (dot, '.');
            int prefix = dot ? (int) (dot - value) : (int) strlen (value);
            snprintf (topic, sizeof topic, "label/%s/%.*s/",
                      hello->labels [index].key, prefix, value);
            relay_topics_append (topics, topic);
            if (dot)
                dot++;
        }
    }
}

//  True when BODY (SIZE bytes) may be a message of TYPE: the first "type"
//  of its map says so (encoders put v and type first, so little is read).
//  Cheap, so only candidates are decoded.
static bool
s_may_be (const void *body, size_t size, const char *type)
{
    size_t at = 0, len = 0;
    return mpscan_map_find (body, size, "type", true, &at, &len) == 0
           && mpscan_str_is ((const uint8_t *) body + at, len, type);
}

//  The hello in BODY (SIZE bytes) decoded without its backends, or NULL
//  when it is none. The relay needs its node, groups and labels (its
//  topics); the backends are most of its bytes and nearly all the cost of
//  decoding it, and the broker decodes and judges them. A hello the broker
//  refuses is never welcomed, so its topics are never granted.
static proto_msg_t *
s_decode_hello (const void *body, size_t size)
{
    size_t at = 0, len = 0;
    if (!s_may_be (body, size, "hello")
        || mpscan_map_find (body, size, "backends", false, &at, &len) != 0)
        return NULL;
    static const uint8_t empty_list = 0x90;
    uint8_t *rest = (uint8_t *) malloc (size);
    assert (rest);
    size_t rest_size = mpscan_replace (body, size, at, len, &empty_list, 1,
                                       rest, size);
    proto_msg_t *msg = NULL;
    if (rest_size && proto_msg_decode (rest, rest_size, &msg, NULL, 0) == 0
        && msg->type != PROTO_HELLO)
        proto_msg_destroy (&msg);
    free (rest);
    return msg;
}

static proto_msg_t *
s_decode_if (const void *body, size_t size, proto_type_t type,
             const char *name)
{
    if (!s_may_be (body, size, name))
        return NULL;
    proto_msg_t *msg = NULL;
    if (proto_msg_decode (body, size, &msg, NULL, 0) != 0)
        return NULL;
    if (msg->type != type)
        proto_msg_destroy (&msg);
    return msg;
}

//  ---------------------------------------------------------------------
//  Downstream: agents (and relays below) to upstream

//  The token of a peer in --insecure mode: its routing id as a key.
static bool
s_insecure_token (const void *routing, size_t size, char *token)
{
    if (size > 32)
        return false;
    uint8_t bytes [32];
    memset (bytes, 0, sizeof bytes);
    memcpy (bytes, routing, size);
    bytes [31] = (uint8_t) size;   //  Never all zero: never PROTO_RELAY_SELF
    zmq_z85_encode (token, bytes, 32);
    return true;
}

static void
s_on_down_message (relay_t *self, zmq_msg_t *routing, zmq_msg_t *via,
                   zmq_msg_t *body, int64_t now_ms)
{
    size_t via_size = via ? zmq_msg_size (via) : 0;
    if (via_size % KEYS_Z85_LEN != 0
        || via_size + KEYS_Z85_LEN > PROTO_RELAY_VIA_MAX
        || zmq_msg_size (routing) > sizeof ((s_peer_t *) 0)->routing) {
        self->counters.malformed++;
        return;
    }
    char token [KEYS_TEXT_SIZE];
    if (self->config->insecure) {
        if (!s_insecure_token (zmq_msg_data (routing), zmq_msg_size (routing),
                               token)) {
            self->counters.malformed++;
            return;
        }
    }
    else {
        const char *key = zmq_msg_gets (body, "User-Id");
        if (!key || strlen (key) != KEYS_Z85_LEN) {
            self->counters.malformed++;
            return;
        }
        memcpy (token, key, KEYS_TEXT_SIZE);
    }
    s_peer_t *peer = (s_peer_t *) zhashx_lookup (self->peers, token);
    if (!peer) {
        if (zhashx_size (self->peers) >= S_PEERS_MAX) {
            self->counters.dropped++;
            return;
        }
        peer = s_peer_new (token);
        zhashx_insert (self->peers, token, peer);
    }
    peer->routing_size = (uint8_t) zmq_msg_size (routing);
    memcpy (peer->routing, zmq_msg_data (routing), peer->routing_size);
    peer->last_seen_ms = now_ms;
    //  A hello's topics wait for its welcome; a bye ends an agent's grants
    const void *data = zmq_msg_data (body);
    size_t size = zmq_msg_size (body);
    char path [PROTO_RELAY_VIA_MAX + 1];
    memcpy (path, via ? zmq_msg_data (via) : "", via_size);
    path [via_size] = 0;
    proto_msg_t *hello = s_decode_hello (data, size);
    if (hello) {
        s_hello_topics (hello, s_peer_hello (peer, path, true));
        proto_msg_destroy (&hello);
    }
    proto_msg_t *bye = via_size ? NULL
                                : s_decode_if (data, size, PROTO_BYE, "bye");
    bool leaving = bye != NULL;
    proto_msg_destroy (&bye);
    //  Up: [token + via] [body]
    zmq_msg_t frame;
    zmq_msg_init_size (&frame, KEYS_Z85_LEN + via_size);
    memcpy (zmq_msg_data (&frame), token, KEYS_Z85_LEN);
    if (via_size)
        memcpy ((uint8_t *) zmq_msg_data (&frame) + KEYS_Z85_LEN,
                zmq_msg_data (via), via_size);
    bool result = s_may_be (data, size, "result")
                  || s_may_be (data, size, "results");
    if (relay_frames_send (&self->frames, zsock_resolve (self->up), &frame,
                           body, result) != 0)
        self->counters.dropped++;
    else
        self->counters.up++;
    //  An agent that said bye holds no topic any more
    if (leaving)
        s_peer_forget (self, peer);
}

static int
s_on_down (zloop_t *loop, zsock_t *sock, void *arg)
{
    relay_t *self = (relay_t *) arg;
    void *handle = zsock_resolve (sock);
    int64_t now_ms = s_now_ms ();
    for (int count = 0; count < S_BATCH; count++) {
        zmq_msg_t parts [3];
        bool too_long = false;
        size_t got = relay_frames_recv (handle, parts, 3, &too_long);
        if (got == 0)
            break;
        if (too_long)
            self->counters.malformed++;
        else
        if (got == 2)
            s_on_down_message (self, &parts [0], NULL, &parts [1], now_ms);
        else
        if (got == 3)
            s_on_down_message (self, &parts [0], &parts [1], &parts [2],
                               now_ms);
        else
            self->counters.malformed++;
        for (size_t index = 0; index < got; index++)
            zmq_msg_close (&parts [index]);
    }
    relay_frames_flush (&self->frames, zsock_resolve (self->up));
    return 0;
}

//  ---------------------------------------------------------------------
//  Upstream to downstream

//  A welcome for the agent behind PEER at PATH (its remaining via):
//  the topics of the hello it answers become PEER's to hold. Those
//  already held are subscribed again upstream, once per upstream
//  connection, in case the upstream refused them before it knew any of
//  our nodes (its XSUB sends them again by itself when it reconnects).
static void
s_on_welcome (relay_t *self, s_peer_t *peer, const char *path,
              const proto_msg_t *welcome)
{
    if (welcome->heartbeat_ms)
        peer->heartbeat_ms = welcome->heartbeat_ms;
    relay_topics_t *topics = s_peer_hello (peer, path, false);
    if (!topics || !topics->count)
        return;
    //  It answers the last hello passed up only when it names that hello's
    //  node: a welcome of an earlier hello for another node entitles to
    //  nothing (the last one gets its own welcome, or is refused)
    char own [NAME_MAX_LEN + 8];
    snprintf (own, sizeof own, "node/%s/", welcome->node ? welcome->node : "");
    if (!relay_topics_has (topics, own))
        return;
    if (!*path)
        peer->welcomed = true;
    for (size_t index = 0; index < topics->count; index++) {
        const char *topic = topics->items [index];
        relay_topics_add (&peer->entitled, topic);
        if (zhashx_lookup (self->topics, topic)
            && !zhashx_lookup (self->renewed, topic)) {
            s_upstream_subscribe (self, topic, false);
            s_upstream_subscribe (self, topic, true);
            zhashx_insert (self->renewed, topic, (void *) 1);
        }
    }
}

static int s_serve (relay_t *self);
static bool s_epoch_passes (relay_t *self, const void *body, size_t size,
                            bool welcome);
static void s_upstream_move (relay_t *self, size_t index, const char *why);

//  Sends MSG upstream as the relay's own ([PROTO_RELAY_SELF] [body]).
static void
s_send_own (relay_t *self, const proto_msg_t *msg)
{
    pw_reset (self->writer);
    if (proto_msg_encode (msg, self->writer) != 0)
        return;
    zmsg_t *out = zmsg_new ();
    zmsg_addmem (out, PROTO_RELAY_SELF, KEYS_Z85_LEN);
    zmsg_addmem (out, pw_data (self->writer), pw_size (self->writer));
    if (zmsg_send (&out, self->up) != 0) {
        zmsg_destroy (&out);
        self->counters.dropped++;
    }
}

//  A welcome of our own heartbeat: the upstream serves (a cluster's
//  active, or a broker alone), so the relay serves its agents.
static void
s_on_own_welcome (relay_t *self, const proto_msg_t *welcome)
{
    if (!self->own_welcomed)
        relay_upstream_welcomed (self->upstream);
    self->own_welcomed = true;
    self->standby = false;
    self->serve_at_ms = 0;
    bool rekey = proto_msg_has_feature (welcome, PROTO_FEATURE_BROKER_REKEY);
    if (rekey && !self->rekey_granted)
        log_debug ("upstream granted broker_rekey: this relay learns the "
                   "broker's next key");
    self->rekey_granted = rekey;
    if (!self->serving && s_serve (self) == 0)
        service_notify_ready ("serving agents");
}

//  A standby's not_leader (feature redirect): the active's agent
//  endpoint (or none) and the epoch of its leadership. Followed when the
//  epoch is not lower than seen and the endpoint is one of the list's
//  (upstream.h); else the standby counts as not serving, and the
//  failover moves on from it.
static void
s_on_not_leader (relay_t *self, const proto_msg_t *error)
{
    size_t in_use = relay_upstream_index (self->upstream);
    const char *here = relay_upstream_endpoint (self->upstream, in_use);
    bool first = !self->standby;
    self->standby = true;
    self->serve_at_ms = 0;
    uint64_t highest = epoch_gate_highest (self->epochs);
    if (error->endpoint && error->epoch && error->epoch < highest) {
        self->counters.stale_epoch++;
        if (first)
            log_warn ("%s: a redirect of epoch %" PRIu64 ", lower than the %"
                      PRIu64 " seen: dropped", here, error->epoch, highest);
        return;
    }
    size_t index = 0;
    const char *why = NULL;
    if (relay_upstream_redirect (self->upstream, error->endpoint, s_now_ms (),
                                 &index, &why) == 0) {
        self->counters.redirects++;
        char text [600];
        snprintf (text, sizeof text, "%s is a standby: moving to the active "
                  "at %s", here, error->endpoint);
        s_upstream_move (self, index, text);
        return;
    }
    if (first && error->endpoint)
        log_warn ("%s is a standby (%s): the active's agent endpoint %s %s",
                  here, error->message ? error->message : "",
                  error->endpoint, why);
    else
    if (first)
        log_warn ("%s is a standby (%s): left after --failover", here,
                  error->message ? error->message : "");
}

//  The broker's next key (broker_key, granted by the welcome): kept
//  beside the key it replaces, tried on the next loss (upstream.h), and
//  acknowledged (broker_key_ack).
static void
s_on_broker_key (relay_t *self, const proto_msg_t *announce)
{
    if (!self->rekey_granted || self->config->insecure) {
        self->counters.malformed++;
        return;
    }
    int rc = relay_upstream_next_key (self->upstream, announce->key);
    if (rc < 0) {
        self->counters.malformed++;
        log_warn ("a broker_key message %s: dropped",
                  announce->key ? "names the key trusted now or no key"
                                : "without a key");
        return;
    }
    //  Kept on disk before it is acknowledged, so that a restart does not
    //  lose it (a state dir that cannot be written: in memory only, said)
    if (rc == 1
        && brokerkeys_save_next (self->config->state_dir,
                                 relay_upstream_old_key_of (self->upstream),
                                 announce->key) != 0)
        log_error ("the broker's next key %s is kept in memory only: "
                   "restarted before the old key is retired, this relay "
                   "cannot connect (give it the new key then, gridcli key "
                   "fetch-broker)", announce->key);
    else
    if (rc == 1)
        log_info ("the broker's next key is %s (kept in %s/%s): tried "
                  "whenever the upstream connection is lost, so that the "
                  "relay connects again at once after the old key is "
                  "retired", announce->key, self->config->state_dir,
                  BROKERKEYS_NEXT);
    proto_msg_t ack = {
        .type = PROTO_BROKER_KEY_ACK,
        .node = self->config->name,
        .key = announce->key,
    };
    s_send_own (self, &ack);
}

//  A message for the relay itself (no via frame): a welcome that grants
//  `results` lets it batch results (frames.h); a standby's not_leader
//  moves it (s_on_not_leader); the broker's next key is kept
//  (s_on_broker_key); an error is logged (one that refuses our heartbeat
//  as malformed: an upstream of an earlier release, which we stop
//  asking).
static void
s_on_own (void *arg, zmq_msg_t *body)
{
    relay_t *self = (relay_t *) arg;
    proto_msg_t *msg = NULL;
    if (proto_msg_decode (zmq_msg_data (body), zmq_msg_size (body), &msg,
                          NULL, 0) != 0) {
        self->counters.malformed++;
        return;
    }
    //  Not from a cluster's demoted active
    if (msg->epoch && msg->type != PROTO_ERROR
        && !s_epoch_passes (self, zmq_msg_data (body), zmq_msg_size (body),
                            msg->type == PROTO_WELCOME)) {
        proto_msg_destroy (&msg);
        return;
    }
    if (msg->type == PROTO_WELCOME)
        s_on_own_welcome (self, msg);
    if (msg->type == PROTO_BROKER_KEY)
        s_on_broker_key (self, msg);
    if (msg->type == PROTO_ERROR
        && strcmp (msg->code, PROTO_ERR_NOT_LEADER) == 0) {
        s_on_not_leader (self, msg);
        proto_msg_destroy (&msg);
        return;
    }
    if (msg->type == PROTO_WELCOME && !self->frames.granted
        && proto_msg_has_feature (msg, PROTO_FEATURE_RESULTS)) {
        log_info ("upstream granted results: this relay's agents' results "
                  "go up several to a message");
        relay_frames_grant (&self->frames, true);
    }
    if (msg->type == PROTO_ERROR && self->ask_results
        && strcmp (msg->code, PROTO_ERR_MALFORMED) == 0)
        self->ask_results = false;
    if (msg->type == PROTO_ERROR) {
        self->counters.refused++;
        //  Once a minute at most
        static int64_t logged_ms = 0;
        int64_t now_ms = s_now_ms ();
        if (!logged_ms || now_ms - logged_ms >= 60000) {
            logged_ms = now_ms;
            if (strcmp (msg->code, PROTO_ERR_VERSION) == 0)
                //  Its agents' messages still pass; its own do not
                log_error ("upstream does not speak this relay's protocol "
                           "(release %s, protocol %d): %s. Upgrade the "
                           "broker first (brokers, then relays, then "
                           "agents), or run the relay's previous release",
                           GRID_VERSION, PROTO_VERSION, msg->message);
            else
                log_warn ("upstream says %s: %s", msg->code, msg->message);
        }
    }
    proto_msg_destroy (&msg);
}

//  Whether BODY (SIZE bytes) from upstream may go down: not from a
//  broker cluster's active of an epoch lower than the highest seen (a
//  demoted one that woke up). WELCOME when it is a welcome (epoch.h).
static bool
s_epoch_passes (relay_t *self, const void *body, size_t size, bool welcome)
{
    uint64_t epoch = epoch_of_body (body, size);
    if (epoch == 0)
        return true;
    uint64_t highest = epoch_gate_highest (self->epochs);
    epoch_verdict_t verdict = epoch_gate_judge (self->epochs, epoch, welcome,
                                                s_now_ms ());
    if (verdict == EPOCH_PASS)
        return true;
    if (verdict == EPOCH_RESET) {
        log_warn ("passing a welcome of epoch %" PRIu64 ", lower than the %"
                  PRIu64 " seen: no broker of a later epoch welcomed an "
                  "agent for %d s (was the cluster's etcd rebuilt?)", epoch,
                  highest, EPOCH_WELCOME_HOLD_MS / 1000);
        return true;
    }
    self->counters.stale_epoch++;
    if (verdict == EPOCH_REFUSE_WARN)
        log_warn ("dropped a message of epoch %" PRIu64 " from upstream: a "
                  "broker of epoch %" PRIu64 " leads the cluster now (%"
                  PRIu64 " dropped so far)", epoch, highest,
                  self->counters.stale_epoch);
    return false;
}

static void
s_on_up_message (void *arg, zmq_msg_t *via, zmq_msg_t *body)
{
    relay_t *self = (relay_t *) arg;
    size_t via_size = zmq_msg_size (via);
    if (via_size < KEYS_Z85_LEN || via_size % KEYS_Z85_LEN != 0
        || via_size > PROTO_RELAY_VIA_MAX) {
        self->counters.malformed++;
        return;
    }
    char token [KEYS_TEXT_SIZE];
    memcpy (token, zmq_msg_data (via), KEYS_Z85_LEN);
    token [KEYS_Z85_LEN] = 0;
    s_peer_t *peer = (s_peer_t *) zhashx_lookup (self->peers, token);
    if (!peer) {
        self->counters.unroutable++;
        return;
    }
    size_t rest = via_size - KEYS_Z85_LEN;
    char path [PROTO_RELAY_VIA_MAX + 1];
    memcpy (path, (const uint8_t *) zmq_msg_data (via) + KEYS_Z85_LEN, rest);
    path [rest] = 0;
    if (!s_epoch_passes (self, zmq_msg_data (body), zmq_msg_size (body),
                         s_may_be (zmq_msg_data (body), zmq_msg_size (body),
                                   "welcome")))
        return;
    proto_msg_t *welcome = s_decode_if (zmq_msg_data (body),
                                        zmq_msg_size (body), PROTO_WELCOME,
                                        "welcome");
    if (welcome) {
        s_on_welcome (self, peer, path, welcome);
        proto_msg_destroy (&welcome);
    }
    void *down = zsock_resolve (self->down);
    int rc = zmq_send (down, peer->routing, peer->routing_size,
                       ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0 && rest)
        rc = zmq_send (down, path, rest, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0)
        rc = zmq_msg_send (body, down, ZMQ_DONTWAIT);
    if (rc < 0) {
        if (zmq_errno () == EHOSTUNREACH) {
            //  Its connection is gone: it comes back with its next message
            self->counters.unroutable++;
            s_peer_forget (self, peer);
        }
        else
            self->counters.dropped++;
        return;
    }
    self->counters.down++;
}

static int
s_on_up (zloop_t *loop, zsock_t *sock, void *arg)
{
    relay_t *self = (relay_t *) arg;
    self->counters.malformed += relay_frames_up (
        &self->frames, zsock_resolve (sock), S_BATCH, s_on_own,
        s_on_up_message, self);
    return 0;
}

//  Commands: whatever upstream publishes (a topic frame, then a body)
//  goes to the downstream XPUB, which sends it to the peers holding its
//  topic; but a body of an epoch lower than seen (s_epoch_passes).
static int
s_on_up_sub (zloop_t *loop, zsock_t *sock, void *arg)
{
    relay_t *self = (relay_t *) arg;
    void *handle = zsock_resolve (sock);
    void *down = zsock_resolve (self->down_pub);
    for (int count = 0; count < S_BATCH; count++) {
        zmq_msg_t parts [2];
        bool too_long = false;
        size_t got = relay_frames_recv (handle, parts, 2, &too_long);
        if (got == 0)
            break;
        self->counters.commands++;
        zmq_msg_t *body = &parts [got - 1];
        bool fine = !too_long;
        if (!fine)
            self->counters.malformed++;
        else
            fine = s_epoch_passes (self, zmq_msg_data (body),
                                   zmq_msg_size (body), false);
        size_t sent = 0;
        while (fine && self->serving && sent < got
               && zmq_msg_send (&parts [sent], down,
                                (sent + 1 < got ? ZMQ_SNDMORE : 0)
                                    | ZMQ_DONTWAIT) >= 0)
            sent++;
        if (fine && sent < got)
            self->counters.dropped++;
        for (size_t index = sent; index < got; index++)
            zmq_msg_close (&parts [index]);
    }
    return 0;
}

//  Subscriptions of the downstream XPUB. Secure: each is granted only
//  when its key was welcomed for the topic (ZMQ_XPUB_MANUAL), and the
//  granted ones are counted into the upstream subscriptions. Insecure:
//  the XPUB reports the first and last holder of each topic itself, and
//  that goes upstream as it is.
static int
s_on_down_pub (zloop_t *loop, zsock_t *sock, void *arg)
{
    relay_t *self = (relay_t *) arg;
    void *handle = zsock_resolve (sock);
    for (int count = 0; count < S_BATCH; count++) {
        zmq_msg_t frame;
        zmq_msg_init (&frame);
        if (zmq_msg_recv (&frame, handle, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&frame);
            break;
        }
        const char *data = (const char *) zmq_msg_data (&frame);
        size_t size = zmq_msg_size (&frame);
        if (size < 1 || (data [0] != 0 && data [0] != 1) || size > 1024
            || zmq_msg_more (&frame)) {
            zmq_msg_close (&frame);
            continue;
        }
        if (self->config->insecure) {
            if (zmq_msg_send (&frame, zsock_resolve (self->up_sub),
                              ZMQ_DONTWAIT) < 0) {
                self->counters.dropped++;
                zmq_msg_close (&frame);
            }
            continue;
        }
        char topic [1025];
        memcpy (topic, data + 1, size - 1);
        topic [size - 1] = 0;
        //  A grant applies to the connection of the message just read,
        //  so it comes before the next read
        const char *key = zmq_msg_gets (&frame, "User-Id");
        s_peer_t *peer = key ? (s_peer_t *) zhashx_lookup (self->peers, key)
                             : NULL;
        if (data [0] == 0) {
            zmq_setsockopt (handle, ZMQ_UNSUBSCRIBE, data + 1, size - 1);
            if (peer && relay_topics_remove (&peer->granted, topic))
                s_topic_count (self, topic, -1);
        }
        else
        if (peer && relay_topics_has (&peer->entitled, topic)) {
            zmq_setsockopt (handle, ZMQ_SUBSCRIBE, data + 1, size - 1);
            if (relay_topics_add (&peer->granted, topic))
                s_topic_count (self, topic, 1);
        }
        else
            self->counters.refused_topics++;
        zmq_msg_close (&frame);
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  Serving downstream while upstream is there

//  True when ENDPOINT is ipc:// and a process listens on its path (a
//  bind would take the path from it without a word).
static bool
s_ipc_in_use (const char *endpoint)
{
    const char *path = strncmp (endpoint, "ipc://", 6) == 0 ? endpoint + 6
                                                            : NULL;
    struct sockaddr_un address;
    if (!path || *path == '@' || strlen (path) >= sizeof address.sun_path)
        return false;
    memset (&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    memcpy (address.sun_path, path, strlen (path));
    int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool listening = connect (fd, (struct sockaddr *) &address,
                              sizeof address) == 0;
    close (fd);
    return listening;
}

static zsock_t *
s_bind_socket (relay_t *self, int type, const char *domain,
               const char *endpoint, char *err, size_t err_len)
{
    if (s_ipc_in_use (endpoint)) {
        s_err (err, err_len, "cannot bind %s: a process listens on it",
               endpoint);
        return NULL;
    }
    zsock_t *sock = zsock_new (type);
    if (!sock) {
        s_err (err, err_len, "cannot create a socket");
        return NULL;
    }
    zsock_set_maxmsgsize (sock, PROTO_MAX_FRAME);
    zsock_set_sndhwm (sock, 100000);
    zsock_set_rcvhwm (sock, 100000);
    zsock_set_linger (sock, 1000);
    zsock_set_handshake_ivl (sock, 10000);
    zsock_set_backlog (sock, 4096);
    if (type == ZMQ_ROUTER) {
        zsock_set_router_mandatory (sock, 1);
        zsock_set_sndtimeo (sock, 0);
        zsock_set_rcvtimeo (sock, 0);
    }
    if (type == ZMQ_XPUB && !self->config->insecure)
        zsock_set_xpub_manual (sock, 1);
    if (!self->config->insecure
        && keys_curve_server (sock, self->server_cert, domain, err, err_len)
               != 0) {
        zsock_destroy (&sock);
        return NULL;
    }
    if (zsock_bind (sock, "%s", endpoint) < 0) {
        s_err (err, err_len, "cannot bind %s: %s", endpoint,
               zmq_strerror (zmq_errno ()));
        zsock_destroy (&sock);
    }
    return sock;
}

//  Binds the downstream endpoints (upstream is there). Returns 0 or -1.
static int
s_serve (relay_t *self)
{
    if (self->serving)
        return 0;
    char err [512];
    self->down = s_bind_socket (self, ZMQ_ROUTER, KEYS_DOMAIN_AGENTS,
                                self->config->agents_ep, err, sizeof err);
    self->down_pub = self->down
                         ? s_bind_socket (self, ZMQ_XPUB, KEYS_DOMAIN_COMMANDS,
                                          self->config->publish_ep, err,
                                          sizeof err)
                         : NULL;
    if (!self->down_pub) {
        zsock_destroy (&self->down);
        if (!self->serve_failed)
            log_error ("cannot serve agents (trying again every second): "
                       "%s", err);
        self->serve_failed = true;
        return -1;
    }
    zloop_reader (self->loop, self->down, s_on_down, self);
    zloop_reader (self->loop, self->down_pub, s_on_down_pub, self);
    self->serving = true;
    self->serve_failed = false;
    log_info ("serving agents on %s, commands on %s",
              self->config->agents_ep, self->config->publish_ep);
    return 0;
}

//  Closes the downstream endpoints: every peer's connection drops, so
//  agents fail over to their next endpoint. Every peer is forgotten.
static void
s_unserve (relay_t *self)
{
    if (!self->serving)
        return;
    zloop_reader_end (self->loop, self->down);
    zloop_reader_end (self->loop, self->down_pub);
    zsock_set_linger (self->down, 0);
    zsock_set_linger (self->down_pub, 0);
    zsock_destroy (&self->down);
    zsock_destroy (&self->down_pub);
    size_t peers = zhashx_size (self->peers);
    s_peer_t *peer;
    while ((peer = (s_peer_t *) zhashx_first (self->peers)))
        s_peer_forget (self, peer);
    self->serving = false;
    log_warn ("stopped serving agents (%zu peer%s dropped): no upstream",
              peers, peers == 1 ? "" : "s");
}

static int s_on_heartbeat (zloop_t *loop, int timer_id, void *arg);

//  Connects the upstream sockets to endpoint INDEX of the list, trusting
//  its broker key (secure).
static int
s_upstream_connect (relay_t *self, size_t index)
{
    relay_upstream_use (self->upstream, index);
    const char *endpoint = relay_upstream_endpoint (self->upstream, index);
    const char *publish = relay_upstream_publish (self->upstream, index);
    if (self->cert) {
        keys_curve_client (self->up, self->cert,
                           relay_upstream_key (self->upstream, index));
        keys_curve_client (self->up_sub, self->cert,
                           relay_upstream_key (self->upstream, index));
    }
    self->quiet_since_ms = s_now_ms ();
    if (zsock_connect (self->up, "%s", endpoint) != 0
        || zsock_connect (self->up_sub, "%s", publish) != 0)
        return -1;
    return 0;
}

//  The upstream connection is gone (lost, or left): what was granted on
//  it is asked again on the next one, which may be of an earlier release.
static void
s_upstream_down (relay_t *self)
{
    self->up_ready = false;
    self->own_welcomed = false;
    self->standby = false;
    self->serve_at_ms = 0;
    self->rekey_granted = false;
    self->up_since_ms = self->quiet_since_ms = s_now_ms ();
    relay_frames_flush (&self->frames, zsock_resolve (self->up));
    relay_frames_grant (&self->frames, false);
    self->ask_results = true;
}

//  Leaves the endpoint in use for endpoint INDEX (WHY is logged): its
//  agents are dropped (they connect again and say hello once the relay
//  serves again, their spools re-sending what was not acknowledged).
//  INDEX may be the endpoint in use: connected again (a key swap).
static void
s_upstream_move (relay_t *self, size_t index, const char *why)
{
    size_t from = relay_upstream_index (self->upstream);
    zsock_disconnect (self->up, "%s",
                      relay_upstream_endpoint (self->upstream, from));
    zsock_disconnect (self->up_sub, "%s",
                      relay_upstream_publish (self->upstream, from));
    s_upstream_down (self);
    if (index != from) {
        self->hold_until_ms = 0;
        s_unserve (self);
        log_warn ("%s", why);
    }
    if (s_upstream_connect (self, index) != 0)
        log_error ("cannot connect to %s: %s",
                   relay_upstream_endpoint (self->upstream, index),
                   zmq_strerror (zmq_errno ()));
}

//  A rotation of the broker's key is under way and the connection to
//  the endpoint in use was lost or its handshake failed: the other of
//  the two keys is tried (upstream.h), at most every half second (one
//  failure comes as several events). The agents stay served meanwhile,
//  for up to upstream_timeout. Returns true when it swapped.
static bool
s_upstream_swap_key (relay_t *self)
{
    static int64_t swapped_ms = 0;
    int64_t now_ms = s_now_ms ();
    if (self->config->insecure
        || !relay_upstream_next_key_of (self->upstream)
        || (swapped_ms && now_ms - swapped_ms < 500)
        || !relay_upstream_swap (self->upstream))
        return false;
    swapped_ms = now_ms;
    self->counters.key_swaps++;
    if (self->serving && !self->hold_until_ms)
        self->hold_until_ms = now_ms + self->config->upstream_timeout_ms;
    size_t index = relay_upstream_index (self->upstream);
    log_debug ("connecting to %s again with the broker key %s",
               relay_upstream_endpoint (self->upstream, index),
               relay_upstream_key (self->upstream, index));
    s_upstream_move (self, index, NULL);
    return true;
}

//  Upstream connection events (of the endpoint in use; those of one left
//  are late and ignored).
static int
s_on_monitor (zloop_t *loop, zsock_t *sock, void *arg)
{
    relay_t *self = (relay_t *) arg;
    zmsg_t *msg = zmsg_recv (sock);
    if (!msg)
        return 0;
    zframe_t *first = zmsg_first (msg);
    zframe_t *address = zmsg_next (msg);
    uint16_t event = 0;
    uint32_t value = 0;
    if (first && zframe_size (first) >= 2)
        memcpy (&event, zframe_data (first), 2);
    if (first && zframe_size (first) >= 6)
        memcpy (&value, (const uint8_t *) zframe_data (first) + 2, 4);
    size_t index = relay_upstream_index (self->upstream);
    const char *endpoint = relay_upstream_endpoint (self->upstream, index);
    bool ours = !address || zframe_streq (address, endpoint);
    zmsg_destroy (&msg);
    if (!ours)
        return 0;
    bool secure = !self->config->insecure;
    if (event == ZMQ_EVENT_CONNECTED)
        self->connected_fd = value;
    if ((secure && event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
        || (!secure && event == ZMQ_EVENT_CONNECTED)) {
        if (!self->up_ready)
            log_info ("connected upstream to %s", endpoint);
        char old [KEYS_TEXT_SIZE] = "";
        if (relay_upstream_old_key_of (self->upstream))
            snprintf (old, sizeof old, "%s",
                      relay_upstream_old_key_of (self->upstream));
        if (relay_upstream_settle (self->upstream)) {
            const char *now = relay_upstream_key (self->upstream, index);
            if (brokerkeys_save_done (self->config->state_dir, old, now)
                == 0)
                log_warn ("the broker's key is now %s: the relay trusts it "
                          "wherever it trusted the old one (kept in %s/%s "
                          "for its restarts)", now, self->config->state_dir,
                          BROKERKEYS_DONE);
            else
                log_warn ("the broker's key is now %s: the relay trusts it "
                          "wherever it trusted the old one (until it "
                          "restarts: give it the new key, gridcli key "
                          "fetch-broker)", now);
        }
        self->failed_handshakes = 0;
        self->up_ready = true;
        self->up_fd = secure ? self->connected_fd : value;
        self->hold_until_ms = 0;
        zhashx_purge (self->renewed);
        self->up_since_ms = s_now_ms ();
        //  Say who we are before any agent of ours does
        s_on_heartbeat (self->loop, 0, self);
        //  One upstream: it serves. Several (a cluster): the one that
        //  welcomes our heartbeat serves, a standby says not_leader
        if (relay_upstream_count (self->upstream) > 1 && !self->serving)
            self->serve_at_ms = s_now_ms () + S_SERVE_WAIT_MS;
        else
        if (s_serve (self) == 0)
            service_notify_ready ("serving agents");
    }
    else
    if (event == ZMQ_EVENT_DISCONNECTED) {
        //  The late end of a connection left (a key swap connects again
        //  to the same endpoint at once), just after the new one came:
        //  not the one in use
        if (self->up_ready && value != self->up_fd
            && s_now_ms () - self->up_since_ms < S_STALE_END_MS) {
            log_debug ("the end of an earlier connection to %s: ignored",
                       endpoint);
            return 0;
        }
        if (self->up_ready)
            log_warn ("lost the upstream %s", endpoint);
        s_upstream_down (self);
        //  A rotation of the broker's key: its retirement ends the
        //  connection, and the other key is tried at once
        if (!s_upstream_swap_key (self) && !self->hold_until_ms)
            s_unserve (self);
    }
    else
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
        || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
        if (s_upstream_swap_key (self))
            return 0;
        //  An upstream that cannot read our hello (a wrong --upstream-key)
        //  closes the connection without a word: said once, after a few
        if (++self->failed_handshakes == 10)
            log_warn ("no handshake with the upstream %s went through in 10 "
                      "tries: if it runs, check that --upstream-key is its "
                      "public key (was the broker's key rotated while this "
                      "relay was away? gridcli key fetch-broker)", endpoint);
    }
    else
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
        static int64_t logged_ms = 0;
        int64_t now_ms = s_now_ms ();
        if (!logged_ms || now_ms - logged_ms >= 60000) {
            logged_ms = now_ms;
            log_error ("the upstream %s refused this relay's key %s: enrol "
                       "it on the broker (relays: in gridbroker.yaml, or "
                       "--relay-key)", endpoint,
                       zcert_public_txt (self->cert));
        }
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  Timers

static int
s_on_heartbeat (zloop_t *loop, int timer_id, void *arg)
{
    relay_t *self = (relay_t *) arg;
    if (!self->up_ready)
        return 0;
    size_t agents = 0;
    for (s_peer_t *peer = (s_peer_t *) zhashx_first (self->peers); peer;
         peer = (s_peer_t *) zhashx_next (self->peers))
        if (peer->welcomed)
            agents++;
    proto_msg_t beat;
    memset (&beat, 0, sizeof beat);
    beat.type = PROTO_HEARTBEAT;
    beat.node = self->config->name;
    beat.running = (uint32_t) agents;
    //  A standby may answer with the active's endpoint (redirect), and
    //  the broker may tell its next key (broker_rekey, secure only): an
    //  upstream that knows neither ignores them, one before features
    //  refuses the heartbeat, and is not asked again
    char *features [] = {PROTO_FEATURE_RESULTS, PROTO_FEATURE_RESULT_ACKS,
                         PROTO_FEATURE_REDIRECT, PROTO_FEATURE_BROKER_REKEY};
    if (self->ask_results) {
        beat.features = features;
        beat.feature_count = self->config->insecure ? 3 : 4;
    }
    s_send_own (self, &beat);
    return 0;
}

//  Forgets peers not heard from for three of their heartbeats.
static int
s_on_sweep (zloop_t *loop, int timer_id, void *arg)
{
    relay_t *self = (relay_t *) arg;
    int64_t now_ms = s_now_ms ();
    //  Several upstreams: one that shook hands and neither welcomed us nor
    //  said not_leader is of an earlier release, and serves
    bool waited = self->serve_at_ms && now_ms >= self->serve_at_ms;
    bool may_serve = self->up_ready && !self->standby
                     && (relay_upstream_count (self->upstream) == 1
                         || self->own_welcomed || waited);
    //  Endpoints that could not be bound (taken meanwhile) are tried again
    if (may_serve && !self->serving && s_serve (self) == 0)
        service_notify_ready ("serving agents");
    //  A key swap that did not bring the upstream back in time
    if (self->hold_until_ms && now_ms >= self->hold_until_ms) {
        self->hold_until_ms = 0;
        if (!self->up_ready)
            s_unserve (self);
    }
    //  Several upstreams: the one in use not serving for failover_ms (no
    //  connection, or a standby that names no active we know), the next
    if (relay_upstream_count (self->upstream) > 1 && !self->serving
        && !self->hold_until_ms
        && now_ms - self->quiet_since_ms >= self->config->failover_ms) {
        size_t next = relay_upstream_next (self->upstream);
        char text [800];
        snprintf (text, sizeof text, "%s has not served for %" PRId64 " ms "
                  "(%s): moving to %s",
                  relay_upstream_endpoint (self->upstream,
                                           relay_upstream_index (
                                               self->upstream)),
                  now_ms - self->quiet_since_ms,
                  self->standby ? "a standby" : self->up_ready
                      ? "no answer" : "no connection",
                  relay_upstream_endpoint (self->upstream, next));
        self->counters.failovers++;
        s_upstream_move (self, next, text);
    }
    zlistx_t *gone = zlistx_new ();
    for (s_peer_t *peer = (s_peer_t *) zhashx_first (self->peers); peer;
         peer = (s_peer_t *) zhashx_next (self->peers)) {
        int64_t timeout_ms = 3 * (peer->heartbeat_ms ? peer->heartbeat_ms
                                                     : self->config->heartbeat_ms);
        if (timeout_ms < S_PEER_TIMEOUT_MIN_MS)
            timeout_ms = S_PEER_TIMEOUT_MIN_MS;
        if (now_ms - peer->last_seen_ms > timeout_ms)
            zlistx_add_end (gone, peer);
    }
    for (s_peer_t *peer = (s_peer_t *) zlistx_first (gone); peer;
         peer = (s_peer_t *) zlistx_next (gone))
        s_peer_forget (self, peer);
    zlistx_destroy (&gone);
    return 0;
}

//  ---------------------------------------------------------------------
//  Status requests and ZAP

//  The relay's figures now, for status and metrics.get.
static void
s_figures (relay_t *self, relay_figures_t *figures)
{
    size_t agents = 0;
    for (s_peer_t *peer = (s_peer_t *) zhashx_first (self->peers); peer;
         peer = (s_peer_t *) zhashx_next (self->peers))
        if (peer->welcomed)
            agents++;
    int64_t now_ms = s_now_ms ();
    *figures = (relay_figures_t) {
        .name = self->config->name,
        .uptime_ms = now_ms - self->started_ms,
        .upstream = relay_upstream_endpoint (
            self->upstream, relay_upstream_index (self->upstream)),
        .connected = self->up_ready,
        .since_ms = now_ms - self->up_since_ms,
        .serving = self->serving,
        .agents = agents,
        .topics = zhashx_size (self->topics),
        .peers = zhashx_size (self->peers),
        .up = self->counters.up,
        .down = self->counters.down,
        .commands = self->counters.commands,
        .malformed = self->counters.malformed,
        .unroutable = self->counters.unroutable,
        .dropped = self->counters.dropped,
        .refused_topics = self->counters.refused_topics,
        .refused = self->counters.refused,
        .stale_epoch = self->counters.stale_epoch,
        .redirects = self->counters.redirects,
        .failovers = self->counters.failovers,
        .key_swaps = self->counters.key_swaps,
        .batches = self->frames.batches,
        .batched = self->frames.batched,
        .batches_down = self->frames.batches_down,
    };
}

static int
s_on_client (zloop_t *loop, zsock_t *sock, void *arg)
{
    relay_t *self = (relay_t *) arg;
    for (int count = 0; count < 64; count++) {
        zmsg_t *msg = zmsg_recv (sock);
        if (!msg)
            break;
        //  [routing] [empty] [body] (REQ), or [routing] [body]
        zframe_t *routing = zmsg_pop (msg);
        zframe_t *body = zmsg_pop (msg);
        bool delimited = body && zframe_size (body) == 0;
        if (delimited) {
            zframe_destroy (&body);
            body = zmsg_pop (msg);
        }
        if (!routing || !body || zmsg_size (msg) != 0) {
            self->counters.malformed++;
            zframe_destroy (&routing);
            zframe_destroy (&body);
            zmsg_destroy (&msg);
            continue;
        }
        proto_request_t *request = NULL;
        const char *code = NULL;
        char *id = NULL;
        char why [256];
        pw_reset (self->writer);
        if (proto_request_decode (zframe_data (body), zframe_size (body),
                                  &request, &code, &id, why, sizeof why)
            != 0)
            proto_reply_error (self->writer, id ? id : "", code, why, NULL,
                               0);
        else
        if (strcmp (request->type, "status") == 0) {
            relay_figures_t figures;
            s_figures (self, &figures);
            relay_status_write (&figures, request->id, self->writer);
        }
        else
        if (strcmp (request->type, "metrics.get") == 0) {
            relay_figures_t figures;
            s_figures (self, &figures);
            relay_metrics_write (&figures, request->id, self->writer);
        }
        else
            proto_reply_error (self->writer, request->id,
                               PROTO_ERR_UNKNOWN_TYPE,
                               "a relay answers status and metrics.get only",
                               NULL, 0);
        free (id);
        proto_request_destroy (&request);
        zmsg_t *reply = zmsg_new ();
        zmsg_append (reply, &routing);
        if (delimited)
            zmsg_addmem (reply, "", 0);
        zmsg_addmem (reply, pw_data (self->writer), pw_size (self->writer));
        //  At the request's own version (an older gridcli reads it)
        zframe_t *answer = zmsg_last (reply);
        proto_reply_set_version (zframe_data (answer), zframe_size (answer),
                                 proto_reply_version (zframe_data (body),
                                                      zframe_size (body)));
        if (zmsg_send (&reply, sock) != 0)
            zmsg_destroy (&reply);
        zframe_destroy (&body);
        zmsg_destroy (&msg);
    }
    return 0;
}

//  ZAP (RFC 27): agents and relays below connect with any CURVE key (the
//  broker judges each one); status clients only with a listed key.
static int
s_on_zap (zloop_t *loop, zsock_t *sock, void *arg)
{
    relay_t *self = (relay_t *) arg;
    zmsg_t *request = zmsg_recv (sock);
    if (!request)
        return 0;
    zframe_t *version = zmsg_first (request);
    zframe_t *request_id = zmsg_next (request);
    zframe_t *domain = zmsg_next (request);
    zmsg_next (request);                         //  Address
    zmsg_next (request);                         //  Identity
    zframe_t *mechanism = zmsg_next (request);
    zframe_t *credentials = zmsg_next (request);
    char key [KEYS_TEXT_SIZE] = "";
    const char *status = "400";
    if (version && zframe_streq (version, "1.0") && credentials
        && zframe_streq (mechanism, "CURVE")
        && zframe_size (credentials) == 32) {
        zmq_z85_encode (key, zframe_data (credentials), 32);
        if (zframe_streq (domain, KEYS_DOMAIN_AGENTS)
            || zframe_streq (domain, KEYS_DOMAIN_COMMANDS))
            status = "200";
        else
        if (zframe_streq (domain, S_DOMAIN_CLIENTS))
            for (size_t index = 0; index < self->config->client_key_count;
                 index++)
                if (strcmp (self->config->client_keys [index], key) == 0)
                    status = "200";
    }
    zmsg_t *reply = zmsg_new ();
    zmsg_addstr (reply, "1.0");
    if (request_id)
        zmsg_addmem (reply, zframe_data (request_id),
                     zframe_size (request_id));
    else
        zmsg_addmem (reply, "", 0);
    zmsg_addstr (reply, status);
    zmsg_addstr (reply, streq (status, "200") ? "OK" : "refused");
    zmsg_addstr (reply, streq (status, "200") ? key : "");
    zmsg_addmem (reply, "", 0);
    zmsg_send (&reply, sock);
    zmsg_destroy (&request);
    return 0;
}

static int
s_on_signal (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    relay_t *self = (relay_t *) arg;
    struct signalfd_siginfo info;
    if (read (self->signal_fd, &info, sizeof info) != sizeof info)
        return 0;
    if (info.ssi_signo == SIGHUP)
        return 0;
    log_info ("signal %u: stopping", info.ssi_signo);
    service_notify_stopping ();
    return -1;
}

//  ---------------------------------------------------------------------
//  Lifecycle

relay_t *
relay_new (const relay_config_t *config, char *err, size_t err_len)
{
    relay_t *self = (relay_t *) zmalloc (sizeof (relay_t));
    self->config = config;
    self->started_ms = self->up_since_ms = s_now_ms ();
    self->writer = pw_new ();
    self->epochs = epoch_gate_new (NULL);
    relay_frames_init (&self->frames);
    self->ask_results = true;
    assert (self->epochs);
    self->peers = zhashx_new ();
    zhashx_set_destructor (self->peers, s_peer_destroy);
    self->topics = zhashx_new ();
    zhashx_set_destructor (self->topics, (zhashx_destructor_fn *) zstr_free);
    self->renewed = zhashx_new ();
    self->loop = zloop_new ();
    self->signal_fd = -1;
    if (!config->insecure) {
        self->cert = keys_load_pair (config->key_file, err, err_len);
        if (!self->cert) {
            relay_destroy (&self);
            return NULL;
        }
        if (config->server_key_file) {
            self->server_cert = keys_load_pair (config->server_key_file, err,
                                                err_len);
            if (!self->server_cert) {
                relay_destroy (&self);
                return NULL;
            }
        }
        else
            self->server_cert = zcert_dup (self->cert);
        self->zap = zsock_new (ZMQ_REP);
        if (!self->zap || zsock_bind (self->zap, S_ZAP_ENDPOINT) != 0) {
            s_err (err, err_len, "cannot start the ZAP handler: %s",
                   zmq_strerror (zmq_errno ()));
            relay_destroy (&self);
            return NULL;
        }
        zloop_reader (self->loop, self->zap, s_on_zap, self);
    }
    self->upstream = relay_upstream_new (config->upstream_ep,
                                         config->upstream_publish_ep,
                                         config->insecure ? NULL
                                                          : config->upstream_key,
                                         err, err_len);
    if (!self->upstream) {
        relay_destroy (&self);
        return NULL;
    }
    //  A rotation of the broker's key that a restart cut through
    if (!config->insecure)
        brokerkeys_load (config->state_dir, self->upstream);
    //  Upstream: a DEALER and an XSUB, as an agent connects
    self->up = zsock_new (ZMQ_DEALER);
    self->up_sub = zsock_new (ZMQ_XSUB);
    if (!self->up || !self->up_sub) {
        s_err (err, err_len, "cannot create the upstream sockets");
        relay_destroy (&self);
        return NULL;
    }
    zsock_t *ups [2] = {self->up, self->up_sub};
    for (int index = 0; index < 2; index++) {
        zsock_set_maxmsgsize (ups [index], PROTO_MAX_FRAME);
        zsock_set_sndhwm (ups [index], 100000);
        zsock_set_rcvhwm (ups [index], 100000);
        zsock_set_linger (ups [index], 2000);
        zsock_set_reconnect_ivl (ups [index], 100);
        zsock_set_reconnect_ivl_max (ups [index], 2000);
        //  A dead upstream is noticed in seconds, not at the next send;
        //  a busy one (a broker registering thousands of agents reads
        //  late, pings too) is waited for, rather than every agent
        //  dropped and registered again
        zsock_set_heartbeat_ivl (ups [index], 1000);
        zsock_set_heartbeat_timeout (ups [index],
                                     (int) config->upstream_timeout_ms);
    }
    snprintf (self->monitor_ep, sizeof self->monitor_ep,
              "inproc://gridrelay-monitor-%d", (int) getpid ());
    if (zmq_socket_monitor (zsock_resolve (self->up), self->monitor_ep,
                            ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED
                                | ZMQ_EVENT_HANDSHAKE_SUCCEEDED
                                | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                                | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
                                | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        != 0) {
        s_err (err, err_len, "cannot watch the upstream connection");
        relay_destroy (&self);
        return NULL;
    }
    self->monitor = zsock_new (ZMQ_PAIR);
    if (!self->monitor
        || zsock_connect (self->monitor, "%s", self->monitor_ep) != 0) {
        s_err (err, err_len, "cannot watch the upstream connection");
        relay_destroy (&self);
        return NULL;
    }
    //  Endpoints another process holds (a second gridrelay on them) stop
    //  the start before the upstream hears of this relay. They are bound
    //  for good only while the upstream is there. An ipc:// path is only
    //  looked at: a probe's listener, closed in the background, would
    //  remove the path of the bind that follows.
    const char *endpoints [2] = {config->agents_ep, config->publish_ep};
    const int types [2] = {ZMQ_ROUTER, ZMQ_XPUB};
    for (int index = 0; index < 2; index++) {
        char why [512];
        bool ipc = strncmp (endpoints [index], "ipc://", 6) == 0;
        if (ipc && s_ipc_in_use (endpoints [index])) {
            s_err (err, err_len, "cannot bind %s: a process listens on it "
                   "(is another gridrelay serving it?)", endpoints [index]);
            relay_destroy (&self);
            return NULL;
        }
        zsock_t *probe = ipc ? NULL
                             : s_bind_socket (self, types [index],
                                              KEYS_DOMAIN_AGENTS,
                                              endpoints [index], why,
                                              sizeof why);
        if (ipc)
            continue;
        if (!probe) {
            bool taken = strstr (why, zmq_strerror (EADDRINUSE)) != NULL;
            s_err (err, err_len, "%s%s", why,
                   taken ? " (is another gridrelay serving it?)" : "");
            relay_destroy (&self);
            return NULL;
        }
        zsock_set_linger (probe, 0);
        zsock_destroy (&probe);
    }
    if (s_upstream_connect (self, 0) != 0) {
        s_err (err, err_len, "cannot connect to %s or %s",
               config->upstream_ep, config->upstream_publish_ep);
        relay_destroy (&self);
        return NULL;
    }
    if (config->client_ep) {
        self->client = zsock_new (ZMQ_ROUTER);
        if (self->client) {
            zsock_set_maxmsgsize (self->client, 1 << 20);
            zsock_set_linger (self->client, 0);
            zsock_set_rcvtimeo (self->client, 0);
            zsock_set_sndtimeo (self->client, 0);
        }
        if (!self->client
            || (!config->insecure
                && keys_curve_server (self->client, self->server_cert,
                                      S_DOMAIN_CLIENTS, err, err_len) != 0)
            || zsock_bind (self->client, "%s", config->client_ep) < 0) {
            if (!*err)
                s_err (err, err_len, "cannot bind %s: %s", config->client_ep,
                       zmq_strerror (zmq_errno ()));
            relay_destroy (&self);
            return NULL;
        }
        zloop_reader (self->loop, self->client, s_on_client, self);
        if (!config->insecure && config->client_key_count == 0)
            log_warn ("status endpoint %s: no --client-key given, so every "
                      "key that asks is refused", config->client_ep);
    }
    //  main () blocked these before any thread started
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGTERM);
    sigaddset (&mask, SIGINT);
    sigaddset (&mask, SIGHUP);
    self->signal_fd = signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (self->signal_fd < 0) {
        s_err (err, err_len, "cannot read signals: %s", strerror (errno));
        relay_destroy (&self);
        return NULL;
    }
    zmq_pollitem_t item = {NULL, self->signal_fd, ZMQ_POLLIN, 0};
    zloop_poller (self->loop, &item, s_on_signal, self);
    zloop_reader (self->loop, self->monitor, s_on_monitor, self);
    zloop_reader (self->loop, self->up, s_on_up, self);
    zloop_reader (self->loop, self->up_sub, s_on_up_sub, self);
    zloop_timer (self->loop, (size_t) config->heartbeat_ms, 0, s_on_heartbeat,
                 self);
    zloop_timer (self->loop, S_SWEEP_MS, 0, s_on_sweep, self);
    service_watchdog_attach (self->loop);
    log_info ("relay %s %s: upstream %s (commands %s)%s%s", config->name,
              GRID_VERSION, config->upstream_ep, config->upstream_publish_ep,
              config->insecure ? "; WARNING: --insecure, plaintext and no "
                                 "authentication"
                               : "; key ",
              config->insecure ? "" : zcert_public_txt (self->cert));
    return self;
}

int
relay_run (relay_t *self)
{
    //  Ready once it runs: it serves agents as soon as the upstream
    //  answers, which may be long after a boot
    service_notify_ready ("waiting for the upstream");
    zloop_start (self->loop);
    return 0;
}

void
relay_destroy (relay_t **self_p)
{
    relay_t *self = *self_p;
    if (!self)
        return;
    if (self->serving) {
        zsock_destroy (&self->down);
        zsock_destroy (&self->down_pub);
    }
    zloop_destroy (&self->loop);
    if (self->up)
        zmq_socket_monitor (zsock_resolve (self->up), NULL, 0);
    zsock_destroy (&self->monitor);
    zsock_destroy (&self->client);
    zsock_destroy (&self->up);
    zsock_destroy (&self->up_sub);
    zsock_destroy (&self->zap);
    zcert_destroy (&self->cert);
    zcert_destroy (&self->server_cert);
    zhashx_destroy (&self->peers);
    zhashx_destroy (&self->topics);
    zhashx_destroy (&self->renewed);
    pw_destroy (&self->writer);
    epoch_gate_destroy (&self->epochs);
    relay_frames_destroy (&self->frames);
    relay_upstream_destroy (&self->upstream);
    if (self->signal_fd >= 0)
        close (self->signal_fd);
    free (self);
    *self_p = NULL;
}
