/*  =========================================================================
    standby - a cluster standby's HTTP face and agent endpoint (standby.h)
    =========================================================================
*/
#include "standby.h"

#include <inttypes.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/log.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "../proto/relaywire.h"
#include "cluster_config.h"
#include "http.h"
#include "listener.h"
#include "token.h"

#define S_BATCH 256                  //  Messages read per wake-up, at most
#define S_ALIVE_MS (3 * REPL_PING_MS)  //  An active heard within this long is
                                     //  alive: agents are sent to it

struct _standby_t {
    const broker_config_t *config;
    auth_t *auth;                //  NULL when insecure
    zloop_t *loop;
    repl_sink_t *sink;
    zsock_t *agents;             //  The agent endpoint (ROUTER)
    zsock_t *bridge;             //  The HTTP face's bridge (ROUTER), or NULL
    http_t *http;                //  The HTTP face, or NULL
    char leader [64];            //  The active's name, "" when unknown
    uint64_t epoch;              //  Its epoch, 0 when unknown
    int64_t started_ms;          //  Monotonic
    uint64_t redirected;
    uint64_t dropped;
    pw_t *writer;                //  Reused for every answer
};

//  The active's peer entry, or NULL when no active is known (or it is
//  not among the peers).
static const cluster_peer_t *
s_active (const standby_t *self)
{
    return *self->leader ? cluster_config_peer (&self->config->cluster,
                                                self->leader)
                         : NULL;
}


//  ---------------------------------------------------------------------
//  Agents

//  Answers HELLO (a direct hello, or a relay's own heartbeat, that named
//  the redirect feature) from ROUTING with the active's agent endpoint.
static void
s_redirect (standby_t *self, zframe_t *routing, const proto_msg_t *hello)
{
    const cluster_peer_t *active = s_active (self);
    //  Only to an active that speaks: one that died is still named by
    //  the leader key until its lease lapses, and an agent sent there
    //  would wait out its failover before it came back
    int64_t heard_ms = repl_sink_heard_ms (self->sink);
    bool alive = heard_ms && zclock_mono () - heard_ms < S_ALIVE_MS;
    const char *endpoint = active && alive ? active->agents : NULL;
    char message [512];
    if (endpoint)
        snprintf (message, sizeof message, "broker %s is a standby of "
                  "cluster %s; the active is %s, its agent endpoint %s",
                  self->config->cluster.name, self->config->cluster.cluster,
                  active->name, active->agents);
    else
        snprintf (message, sizeof message, "broker %s is a standby of "
                  "cluster %s; %s", self->config->cluster.name,
                  self->config->cluster.cluster,
                  !active ? "no active is known yet"
                  : !alive ? "the active has not been heard lately"
                           : "the configuration names no agent endpoint "
                             "for the active (ha: peers: agents)");
    proto_msg_t error = {
        .type = PROTO_ERROR,
        .protocol = hello->protocol,
        .code = (char *) PROTO_ERR_NOT_LEADER,
        .message = message,
        .endpoint = (char *) endpoint,
        .epoch = endpoint ? self->epoch : 0,
    };
    pw_reset (self->writer);
    if (proto_msg_encode (&error, self->writer) != 0)
        return;
    void *handle = zsock_resolve (self->agents);
    if (zmq_send (handle, zframe_data (routing), zframe_size (routing),
                  ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return;
    if (zmq_send (handle, pw_data (self->writer), pw_size (self->writer),
                  ZMQ_DONTWAIT) >= 0)
        self->redirected++;
}

static int
s_on_agents (zloop_t *loop, zsock_t *socket, void *arg)
{
    standby_t *self = (standby_t *) arg;
    for (int count = 0; count < S_BATCH; count++) {
        zmsg_t *msg = zmsg_recv (socket);
        if (!msg)
            break;
        //  Straight from an agent: its routing id, one body. From a
        //  relay, its own heartbeat ([self] [body]) is answered when it
        //  named redirect (the relay follows it as an agent does); its
        //  agents' traffic is not: the relay moves them
        proto_msg_t *hello = NULL;
        zframe_t *routing = zmsg_first (msg);
        zframe_t *via = zmsg_next (msg);
        zframe_t *body = zmsg_size (msg) == 3 ? zmsg_next (msg) : via;
        bool relay = zmsg_size (msg) == 3
                     && zframe_size (via) == KEYS_Z85_LEN
                     && memcmp (zframe_data (via), PROTO_RELAY_SELF,
                                KEYS_Z85_LEN) == 0;
        proto_type_t type = relay ? PROTO_HEARTBEAT : PROTO_HELLO;
        if ((zmsg_size (msg) == 2 || relay)
            && proto_msg_decode (zframe_data (body), zframe_size (body),
                                 &hello, NULL, 0) == 0
            && hello->type == type
            && proto_msg_has_feature (hello, PROTO_FEATURE_REDIRECT))
            s_redirect (self, routing, hello);
        else
            self->dropped++;
        proto_msg_destroy (&hello);
        zmsg_destroy (&msg);
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  HTTP

//  Writes the cluster's pairs of a probe's reply (http.h): 7 pairs.
static void
s_write_cluster (standby_t *self, pw_t *writer)
{
    const cluster_peer_t *active = s_active (self);
    pw_str (writer, "role");
    pw_str (writer, "standby");
    pw_str (writer, "name");
    pw_str (writer, self->config->cluster.name);
    pw_str (writer, "cluster");
    pw_str (writer, self->config->cluster.cluster);
    pw_str (writer, "epoch");
    pw_int (writer, (int64_t) self->epoch);
    pw_str (writer, "leader");
    if (*self->leader)
        pw_str (writer, self->leader);
    else
        pw_nil (writer);
    pw_str (writer, "client");
    if (active && active->client)
        pw_str (writer, active->client);
    else
        pw_nil (writer);
    pw_str (writer, "http");
    if (active && active->http)
        pw_str (writer, active->http);
    else
        pw_nil (writer);
}

static void
s_probe (standby_t *self, pw_t *writer)
{
    pw_map (writer, 3 + 7);
    pw_str (writer, "maintenance");
    pw_bool (writer, false);
    pw_str (writer, "storage");
    pw_str (writer, "ok");
    pw_str (writer, "uptime_ms");
    pw_int (writer, zclock_mono () - self->started_ms);
    s_write_cluster (self, writer);
}

//  One gauge in the text format.
static void
s_gauge (char *text, size_t size, size_t *used, const char *name,
         const char *help, double value)
{
    if (*used >= size)
        return;
    int wrote = snprintf (text + *used, size - *used, "# HELP %s %s\n"
                          "# TYPE %s gauge\n%s %.17g\n", name, help, name,
                          name, value);
    *used += wrote > 0 ? (size_t) wrote : 0;
}

//  metrics.get's reply: this standby's grid_ha_* figures.
static void
s_metrics (standby_t *self, const char *id, pw_t *writer)
{
    uint64_t epoch = 0, seq = 0;
    repl_sink_position (self->sink, &epoch, &seq);
    int64_t heard_ms = repl_sink_heard_ms (self->sink);
    double silent_s = *self->leader && heard_ms
                      ? (double) (zclock_mono () - heard_ms) / 1000.0 : 0;
    char text [2048];
    size_t used = 0;
    s_gauge (text, sizeof text, &used, "grid_ha_role", "1 on a broker "
             "cluster's active, 0 on a standby.", 0);
    s_gauge (text, sizeof text, &used, "grid_ha_epoch", "The epoch of the "
             "active this standby follows (0: none known).",
             (double) self->epoch);
    s_gauge (text, sizeof text, &used, "grid_ha_standby_in_sync", "1 while "
             "the active counts this standby in its sync set.",
             repl_sink_in_sync (self->sink) ? 1 : 0);
    s_gauge (text, sizeof text, &used, "grid_ha_standby_pass", "The last "
             "pass this standby applied.", (double) seq);
    s_gauge (text, sizeof text, &used, "grid_ha_replication_lag_seconds",
             "On a standby: how long since it last heard the active (a "
             "pass or a ping).", silent_s);
    if (used >= sizeof text)
        used = sizeof text - 1;
    proto_reply_ok_begin (writer, id);
    pw_map (writer, 1);
    pw_str (writer, "text");
    pw_strn (writer, text, used);
}

//  Whether TOKEN (SIZE bytes) is a live HTTP token: what /metrics asks
//  of its caller unless metrics_public. Insecure: no keys, no tokens.
static bool
s_token_live (standby_t *self, zframe_t *token)
{
    if (!self->auth)
        return true;
    char text [HTTP_MAX_TOKEN + 1];
    size_t size = zframe_size (token);
    if (size == 0 || size > HTTP_MAX_TOKEN)
        return false;
    memcpy (text, zframe_data (token), size);
    text [size] = 0;
    auth_role_t role = AUTH_ROLE_NONE;
    const char *name = NULL;
    return token_check (auth_tokens (self->auth), text, zclock_time (), &role,
                        &name);
}

//  The answer to a request BODY: metrics.get's figures, else not_leader.
static void
s_answer (standby_t *self, zframe_t *kind, zframe_t *token, zframe_t *body,
          pw_t *writer)
{
    proto_request_t *request = NULL;
    const char *code = NULL;
    char *id = NULL;
    char why [256];
    proto_request_decode (zframe_data (body), zframe_size (body), &request,
                          &code, &id, why, sizeof why);
    const char *request_id = request ? request->id : id ? id : "";
    if (request && strcmp (request->type, "metrics.get") == 0
        && (zframe_streq (kind, HTTP_KIND_PUBLIC)
            || s_token_live (self, token)))
        s_metrics (self, request_id, writer);
    else {
        const cluster_peer_t *active = s_active (self);
        char message [512];
        char *details [1] = { active ? active->http : NULL };
        snprintf (message, sizeof message, "broker %s is a standby of "
                  "cluster %s; %s%s%s%s", self->config->cluster.name,
                  self->config->cluster.cluster,
                  active ? "the active is " : "no active is known yet: try "
                  "again in a few seconds", active ? active->name : "",
                  active && active->http ? ", at " : "",
                  active && active->http ? active->http : "");
        proto_reply_error (writer, request_id, PROTO_ERR_NOT_LEADER, message,
                           details, details [0] ? 1 : 0);
    }
    proto_request_destroy (&request);
    free (id);
}

//  A call from the HTTP face (http.h): routing, tag, kind, token, body;
//  answered with routing, tag, reply.
static int
s_on_bridge (zloop_t *loop, zsock_t *socket, void *arg)
{
    standby_t *self = (standby_t *) arg;
    for (int count = 0; count < S_BATCH; count++) {
        zmsg_t *msg = zmsg_recv (socket);
        if (!msg)
            break;
        if (zmsg_size (msg) != 5) {
            zmsg_destroy (&msg);
            continue;
        }
        zframe_t *routing = zmsg_first (msg);
        zframe_t *tag = zmsg_next (msg);
        zframe_t *kind = zmsg_next (msg);
        zframe_t *token = zmsg_next (msg);
        zframe_t *body = zmsg_next (msg);
        pw_reset (self->writer);
        if (zframe_streq (kind, HTTP_KIND_PROBE))
            s_probe (self, self->writer);
        else
            s_answer (self, kind, token, body, self->writer);
        zmsg_t *reply = zmsg_new ();
        zmsg_addmem (reply, zframe_data (routing), zframe_size (routing));
        zmsg_addmem (reply, zframe_data (tag), zframe_size (tag));
        zmsg_addmem (reply, pw_data (self->writer), pw_size (self->writer));
        if (zmsg_send (&reply, socket) != 0)
            zmsg_destroy (&reply);
        zmsg_destroy (&msg);
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  Life

//  The agent endpoint, or NULL with a sentence in ERR.
static zsock_t *
s_agents_bind (standby_t *self, char *err, size_t err_len)
{
    zsock_t *agents = zsock_new (ZMQ_ROUTER);
    if (!agents) {
        snprintf (err, err_len, "cannot create a socket");
        return NULL;
    }
    zsock_set_linger (agents, 0);
    zsock_set_sndtimeo (agents, 0);
    zsock_set_rcvtimeo (agents, 0);
    zsock_set_maxmsgsize (agents, PROTO_MAX_FRAME);
    zsock_set_handshake_ivl (agents, 10000);
    zsock_set_backlog (agents, 4096);
    int rc = self->auth ? auth_secure_socket (self->auth, agents,
                                              KEYS_DOMAIN_AGENTS, err,
                                              err_len)
                        : 0;
    if (rc == 0 && zsock_bind (agents, "%s", self->config->agents_ep) < 0) {
        snprintf (err, err_len, "cannot bind %s: %s",
                  self->config->agents_ep, zmq_strerror (zmq_errno ()));
        rc = -1;
    }
    if (rc != 0)
        zsock_destroy (&agents);
    return agents;
}

//  The HTTP face and its bridge; returns 0, or -1 with ERR.
static int
s_http_start (standby_t *self, char *err, size_t err_len)
{
    char bridge_ep [64];
    snprintf (bridge_ep, sizeof bridge_ep, "inproc://grid-standby-http-%p",
              (void *) self);
    self->bridge = zsock_new (ZMQ_ROUTER);
    if (!self->bridge || zsock_bind (self->bridge, "%s", bridge_ep) != 0) {
        snprintf (err, err_len, "cannot bind %s", bridge_ep);
        zsock_destroy (&self->bridge);
        return -1;
    }
    zsock_set_sndtimeo (self->bridge, 0);
    zsock_set_rcvtimeo (self->bridge, 0);
    zsock_set_linger (self->bridge, 0);
    self->http = http_new (&self->config->http, bridge_ep, err, err_len);
    if (!self->http) {
        zsock_destroy (&self->bridge);
        return -1;
    }
    return 0;
}

standby_t *
standby_new (const broker_config_t *config, auth_t *auth, zloop_t *loop,
             repl_sink_t *sink)
{
    standby_t *self = (standby_t *) zmalloc (sizeof (standby_t));
    self->config = config;
    self->auth = auth;
    self->loop = loop;
    self->sink = sink;
    self->started_ms = zclock_mono ();
    self->writer = pw_new ();
    //  Neither face is what a standby is for (it follows the active and
    //  takes over): one that cannot open is said, and the standby goes on
    char err [512];
    self->agents = s_agents_bind (self, err, sizeof err);
    if (self->agents)
        zloop_reader (loop, self->agents, s_on_agents, self);
    else
        log_error ("cluster: a standby without its agent endpoint (%s): "
                   "agents are not redirected, they fail over by their "
                   "lists", err);
    if (config->http.listen && s_http_start (self, err, sizeof err) == 0)
        zloop_reader (loop, self->bridge, s_on_bridge, self);
    else
    if (config->http.listen)
        log_error ("cluster: a standby without its HTTP face: %s", err);
    return self;
}

void
standby_destroy (standby_t **self_p)
{
    standby_t *self = *self_p;
    if (!self)
        return;
    *self_p = NULL;
    if (self->bridge)
        zloop_reader_end (self->loop, self->bridge);
    if (self->agents)
        zloop_reader_end (self->loop, self->agents);
    //  The face first: its thread talks to the bridge
    http_destroy (&self->http);
    zsock_destroy (&self->bridge);
    bool bound = self->agents != NULL;
    zsock_destroy (&self->agents);
    if (bound)
        listener_released (self->config->agents_ep);
    pw_destroy (&self->writer);
    free (self);
}

void
standby_rekey (standby_t *self)
{
    if (self->agents) {
        zloop_reader_end (self->loop, self->agents);
        zsock_destroy (&self->agents);
        listener_released (self->config->agents_ep);
    }
    char err [512];
    self->agents = s_agents_bind (self, err, sizeof err);
    if (self->agents)
        zloop_reader (self->loop, self->agents, s_on_agents, self);
    else
        log_error ("cluster: a standby without its agent endpoint (%s): "
                   "agents are not redirected, they fail over by their "
                   "lists", err);
}

void
standby_set_leader (standby_t *self, const char *leader, uint64_t epoch)
{
    snprintf (self->leader, sizeof self->leader, "%s", leader ? leader : "");
    self->epoch = epoch;
}

uint64_t
standby_redirected (const standby_t *self)
{
    return self->redirected;
}

uint64_t
standby_dropped (const standby_t *self)
{
    return self->dropped;
}
