/*  =========================================================================
    cluster - a broker cluster's member (see cluster.h)
    =========================================================================
*/
#include "cluster.h"

#include <inttypes.h>
#include <unistd.h>

#include "../ha/elector.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "../proto/service.h"
#include "auth.h"
#include "broker.h"
#include "brokerkey.h"
#include "listener.h"
#include "repl.h"
#include "standby.h"

//  The standby phase's state.
typedef struct {
    const broker_config_t *config;
    zactor_t *elector;
    zcert_t *cert;               //  This member's key pair, or NULL
    bool shared;                 //  The members share that pair (every
                                 //  peer's key is its public key)
    zloop_t *loop;
    store_lock_t *lock;
    store_t *store;
    auth_t *auth;                //  The client socket's ZAP handler
    zsock_t *client;             //  Answers not_leader
    repl_sink_t *sink;
    zsock_t *following;          //  The sink's socket the loop reads
    standby_t *face;             //  HTTP and the agent endpoint (redirects)
    char leader [64];            //  Who holds the key ("" none)
    bool cold;                   //  No leader seen yet in this run
    int64_t hold_until;          //  A former active: campaigns after
                                 //  this unless in sync (monotonic ms)
    bool campaigning;            //  The elector may take the key
    bool elected;
    uint64_t epoch;
    int64_t valid_until;
    int64_t said_ms;             //  Last "not in sync" line
    int64_t keyed_ms;            //  Last look at the store's key rotation
} s_standby_t;

//  The elector campaigns only when etcd's sync key names this member (it
//  reads it at each try). A former active of this run also waits, for a
//  lease's time, until the new active says it is in its sync set: it
//  does not take the lead back from the standby it just handed it to
//  (after that time, with no new active, the key alone decides).
static void
s_gate (s_standby_t *self)
{
    bool may = zclock_mono () >= self->hold_until
               || repl_sink_in_sync (self->sink);
    if (may == self->campaigning)
        return;
    self->campaigning = may;
    zstr_send (self->elector, may ? "CAMPAIGN" : "HOLD");
}

static int
s_on_sink (zloop_t *loop, zsock_t *socket, void *arg)
{
    s_standby_t *self = (s_standby_t *) arg;
    repl_sink_read (self->sink, zclock_mono ());
    s_gate (self);
    return 0;
}

static void
s_follow (s_standby_t *self, const char *leader)
{
    if (strcmp (self->leader, leader) == 0 && (!*leader || self->following))
        return;
    snprintf (self->leader, sizeof self->leader, "%s", leader);
    if (self->following) {
        zloop_reader_end (self->loop, self->following);
        self->following = NULL;
    }
    repl_sink_unfollow (self->sink);
    if (!*leader)
        return;
    self->cold = false;
    const cluster_peer_t *peer = cluster_config_peer (&self->config->cluster,
                                                      leader);
    if (!peer) {
        log_error ("cluster: the leader key names '%s', which is not among "
                   "this member's peers (ha: peers): not following it",
                   leader);
        return;
    }
    char err [512];
    //  Members that share one pair: the active's is the one this member's
    //  files hold now (a rotation retired since start changed it)
    const char *server_key = self->shared && self->cert
                             ? zcert_public_txt (self->cert) : peer->key;
    if (repl_sink_follow (self->sink, peer->replicate, self->cert, server_key,
                          err, sizeof err) != 0) {
        log_error ("cluster: cannot follow %s at %s: %s", leader,
                   peer->replicate, err);
        return;
    }
    self->following = repl_sink_socket (self->sink);
    zloop_reader (self->loop, self->following, s_on_sink, self);
    log_info ("cluster: %s follows the active %s at %s",
              self->config->cluster.name, leader, peer->replicate);
}

static int
s_on_elector (zloop_t *loop, zsock_t *socket, void *arg)
{
    s_standby_t *self = (s_standby_t *) arg;
    zmsg_t *msg = zmsg_recv (socket);
    if (!msg)
        return -1;
    char *what = zmsg_popstr (msg);
    char *first = zmsg_popstr (msg);
    char *second = zmsg_popstr (msg);
    int rc = 0;
    if (what && streq (what, "LEADER") && first && second) {
        self->elected = true;
        self->epoch = strtoull (first, NULL, 10);
        self->valid_until = strtoll (second, NULL, 10);
        rc = -1;
    }
    else
    if (what && streq (what, "FOLLOWER") && second) {
        bool own = strcmp (second, self->config->cluster.name) == 0;
        //  Our own key of an earlier run: it lapses by itself
        s_follow (self, own ? "" : second);
        standby_set_leader (self->face, own ? "" : second,
                            first ? strtoull (first, NULL, 10) : 0);
    }
    else
    if (what && streq (what, "BARRED")) {
        if (first && *first)
            log_warn ("cluster: %s may not stand for election: %s",
                      self->config->cluster.name, first);
        else
            log_info ("cluster: %s may stand for election (the sync key "
                      "names it, or there is none)",
                      self->config->cluster.name);
    }
    else
    if (what && streq (what, "UNREACHABLE"))
        log_warn ("cluster: etcd %s%s", first && *first ? "does not answer: "
                                                        : "answers again",
                  first ? first : "");
    free (what);
    free (first);
    free (second);
    zmsg_destroy (&msg);
    s_gate (self);
    return rc;
}

//  Answers a client request with not_leader, naming the active.
static int
s_on_client (zloop_t *loop, zsock_t *socket, void *arg)
{
    s_standby_t *self = (s_standby_t *) arg;
    pw_t *reply = pw_new ();
    for (int count = 0; count < 512; count++) {
        zmsg_t *msg = zmsg_recv (socket);
        if (!msg)
            break;
        zframe_t *body = zmsg_last (msg);
        if (!body || zmsg_size (msg) < 2) {
            zmsg_destroy (&msg);
            continue;
        }
        proto_request_t *request = NULL;
        const char *code = NULL;
        char *id = NULL;
        char why [256];
        proto_request_decode (zframe_data (body), zframe_size (body), &request,
                              &code, &id, why, sizeof why);
        const char *request_id = request ? request->id : id ? id : "";
        const cluster_peer_t *peer
            = cluster_config_peer (&self->config->cluster, self->leader);
        char message [512];
        char *details [1] = { NULL };
        if (peer) {
            snprintf (message, sizeof message, "broker %s is a standby of "
                      "cluster %s; the active is %s, at %s",
                      self->config->cluster.name, self->config->cluster.cluster,
                      peer->name, peer->client);
            details [0] = peer->client;
        }
        else
            snprintf (message, sizeof message, "broker %s is a standby of "
                      "cluster %s, and no active is known yet: try again in "
                      "a few seconds", self->config->cluster.name,
                      self->config->cluster.cluster);
        pw_reset (reply);
        proto_reply_error (reply, request_id, PROTO_ERR_NOT_LEADER, message,
                           details, peer ? 1 : 0);
        proto_reply_set_version ((void *) pw_data (reply), pw_size (reply),
                                 proto_reply_version (zframe_data (body),
                                                      zframe_size (body)));
        zmsg_remove (msg, body);
        zframe_destroy (&body);
        zmsg_addmem (msg, pw_data (reply), pw_size (reply));
        if (zmsg_send (&msg, socket) != 0)
            zmsg_destroy (&msg);
        proto_request_destroy (&request);
        free (id);
    }
    pw_destroy (&reply);
    return 0;
}

static int
s_on_zap (zloop_t *loop, zsock_t *socket, void *arg)
{
    s_standby_t *self = (s_standby_t *) arg;
    auth_zap_serve (self->auth, socket);
    return 0;
}

//  A rotation of the members' shared key retired on the active (its
//  store says so): the standby's client and agent endpoints serve the new
//  key, so that clients and agents that know only that one still hear
//  not_leader and redirects. Its files are left alone (brokerkey_adopt
//  does that once it is elected) and so is its replication link.
static void
s_rekey (s_standby_t *self)
{
    zcert_t *pair = self->shared && self->auth
                    ? brokerkey_retired_pair (self->store) : NULL;
    if (!pair || streq (zcert_public_txt (pair),
                        zcert_public_txt (auth_cert (self->auth)))) {
        zcert_destroy (&pair);
        return;
    }
    log_warn ("cluster: %s serves its standby endpoints with the broker's "
              "key %s (a rotation retired the old one)",
              self->config->cluster.name, zcert_public_txt (pair));
    auth_replace_cert (self->auth, &pair);
    const char *client = self->config->client_ep;
    zsock_unbind (self->client, "%s", client);
    listener_released (client);
    char err [512] = "";
    if (auth_secure_socket (self->auth, self->client, KEYS_DOMAIN_CLIENTS,
                            err, sizeof err) != 0
        || zsock_bind (self->client, "%s", client) < 0)
        log_error ("cluster: cannot serve %s with the new key: %s", client,
                   *err ? err : zmq_strerror (zmq_errno ()));
    standby_rekey (self->face);
}

static int
s_on_tick (zloop_t *loop, int timer_id, void *arg)
{
    s_standby_t *self = (s_standby_t *) arg;
    int64_t now_ms = zclock_mono ();
    repl_sink_tick (self->sink, now_ms);
    if (now_ms - self->keyed_ms >= 1000) {
        self->keyed_ms = now_ms;
        s_rekey (self);
    }
    s_gate (self);
    if (*self->leader && !self->campaigning && !repl_sink_in_sync (self->sink)
        && now_ms - self->said_ms > 60000) {
        if (self->said_ms)
            log_info ("cluster: %s is still catching up with %s: it will not "
                      "stand for election until it is in sync",
                      self->config->cluster.name, self->leader);
        self->said_ms = now_ms;
    }
    return 0;
}

static void
s_standby_end (s_standby_t *self)
{
    standby_destroy (&self->face);
    zloop_destroy (&self->loop);
    repl_sink_destroy (&self->sink);
    bool bound = self->client != NULL;
    zsock_destroy (&self->client);
    if (bound) {
        listener_released (self->config->client_ep);
    }
    auth_destroy (&self->auth);
    store_destroy (&self->store);
    store_unlock (&self->lock);
}

//  The standby phase: returns 1 when elected (EPOCH, VALID_UNTIL set),
//  0 when stopped, -1 on an error (logged).
static int
s_standby (const broker_config_t *config, zactor_t *elector, zcert_t *cert,
           bool shared, bool cold, uint64_t *epoch, int64_t *valid_until)
{
    s_standby_t self;
    memset (&self, 0, sizeof self);
    self.config = config;
    self.elector = elector;
    self.cert = cert;
    self.shared = shared;
    self.cold = cold;
    self.hold_until = cold ? 0 : zclock_mono () + config->cluster.ttl_ms;
    self.campaigning = false;    //  The elector starts held
    char err [1024];
    self.lock = store_lock (config->data_dir, "gridbroker", "data dir", err,
                            sizeof err);
    if (self.lock)
        self.store = store_open (config->data_dir, config->map_bytes,
                                 config->max_map_bytes, err, sizeof err);
    if (self.store && !config->auth.insecure)
        self.auth = auth_new (&config->auth, self.store, err, sizeof err);
    if (!self.store || (!config->auth.insecure && !self.auth)) {
        log_lines (LOG_LEVEL_ERROR, NULL, err);
        s_standby_end (&self);
        return -1;
    }
    self.sink = repl_sink_new (config->cluster.name, config->data_dir,
                               config->map_bytes, config->max_map_bytes,
                               &self.store);
    self.client = zsock_new (ZMQ_ROUTER);
    zsock_set_linger (self.client, 0);
    zsock_set_sndtimeo (self.client, 0);
    zsock_set_rcvtimeo (self.client, 0);
    zsock_set_maxmsgsize (self.client, PROTO_MAX_FRAME);
    int rc = 0;
    if (self.auth)
        rc = auth_secure_socket (self.auth, self.client, KEYS_DOMAIN_CLIENTS,
                                 err, sizeof err);
    if (rc == 0 && zsock_bind (self.client, "%s", config->client_ep) < 0) {
        snprintf (err, sizeof err, "cannot bind %s: %s", config->client_ep,
                  zmq_strerror (zmq_errno ()));
        rc = -1;
    }
    if (rc != 0) {
        log_error ("%s", err);
        s_standby_end (&self);
        return -1;
    }
    self.loop = zloop_new ();
    zloop_reader (self.loop, zactor_sock (elector), s_on_elector, &self);
    zloop_reader (self.loop, self.client, s_on_client, &self);
    if (self.auth && auth_zap_socket (self.auth))
        zloop_reader (self.loop, auth_zap_socket (self.auth), s_on_zap, &self);
    zloop_timer (self.loop, 100, 0, s_on_tick, &self);
    self.face = standby_new (config, self.auth, self.loop, self.sink);
    uint64_t held_epoch, held_seq;
    repl_store_position (self.store, &held_epoch, &held_seq);
    log_warn ("cluster: %s is a standby of cluster %s (its store holds pass %"
              PRIu64 " of epoch %" PRIu64 "); clients on %s are told the "
              "active", config->cluster.name, config->cluster.cluster,
              held_seq, held_epoch, config->client_ep);
    service_notify_ready ("standby");
    s_gate (&self);
    zloop_start (self.loop);
    bool elected = self.elected;
    *epoch = self.epoch;
    *valid_until = self.valid_until;
    s_standby_end (&self);
    return elected ? 1 : 0;
}

int
cluster_run (const broker_config_t *config, broker_config_fn *read, void *arg)
{
    char err [1024];
    if (cluster_config_check (&config->cluster, config->auth.insecure, err,
                              sizeof err) != 0) {
        log_error ("%s", err);
        return 1;
    }
    zcert_t *cert = NULL;
    const char *key_file = config->auth.key_file ? config->auth.key_file
                                                 : KEYS_DEFAULT_BROKER_KEY;
    if (!config->auth.insecure) {
        cert = keys_load_pair (key_file, err, sizeof err);
        if (!cert) {
            log_error ("%s", err);
            return 1;
        }
    }
    //  One pair for every member (docs/HA.md): what its rotation changes
    //  changes for all
    bool shared = cert != NULL;
    for (size_t index = 0; cert && index < config->cluster.peer_count;
         index++) {
        const char *key = config->cluster.peers [index].key;
        if (!key || !streq (key, zcert_public_txt (cert)))
            shared = false;
    }
    elector_config_t elector_config = {
        config->cluster.etcd, config->cluster.cluster, config->cluster.name,
        config->cluster.ttl_ms, true
    };
    zactor_t *elector = elector_new (&elector_config, err, sizeof err);
    if (!elector) {
        log_error ("ha: %s", err);
        zcert_destroy (&cert);
        return 1;
    }
    int code = 0;
    bool cold = true;
    while (!zsys_interrupted) {
        uint64_t epoch = 0;
        int64_t valid_until = 0;
        //  The pair as the files hold it now: an earlier lead of this run
        //  may have retired a rotation (brokerkey.h)
        zcert_t *fresh = cert ? keys_load_pair (key_file, err, sizeof err)
                              : NULL;
        if (fresh) {
            zcert_destroy (&cert);
            cert = fresh;
        }
        int rc = s_standby (config, elector, cert, shared, cold, &epoch,
                            &valid_until);
        if (rc <= 0) {
            code = rc < 0 ? 1 : 0;
            break;
        }
        cold = false;
        broker_t *broker = broker_new (config, err, sizeof err);
        if (broker && broker_lead (broker, elector, epoch, valid_until, err,
                                   sizeof err) != 0)
            broker_destroy (&broker);
        if (!broker) {
            log_lines (LOG_LEVEL_ERROR, NULL, err);
            code = 1;
            break;
        }
        if (broker_reload_on_sighup (broker, read, arg) != 0)
            log_warn ("cannot catch SIGHUP: %s; a SIGHUP will not reload "
                      "the configuration", strerror (errno));
        broker_run (broker);
        bool demoted = broker_demoted (broker);
        broker_destroy (&broker);
        listener_released (config->client_ep);
        listener_released (config->agents_ep);
        if (!demoted)
            break;
        //  The elector is held (again: a lapse leaves it held, a
        //  switchover resigned): it watches who leads, and campaigns once
        //  this member is in sync with the new active
        zstr_send (elector, "HOLD");
    }
    //  A leader resigns: a standby takes over without waiting for the lease
    zactor_destroy (&elector);
    zcert_destroy (&cert);
    return code;
}
