/*  =========================================================================
    req/brokerkey - broker.rekey broker.keys (see req.h): the rotation of
    the broker's own key (brokerkey.h)

    broker.rekey starts a rotation (an admin's, audited); broker.keys says
    the broker's public key, the next one while a rotation runs and how
    far it has come, so that a client fetches the next key over the
    session of the current one (gridcli key fetch-broker).
    =========================================================================
*/
#include <inttypes.h>

#include "../../proto/keys.h"
#include "../../proto/log.h"
#include "../../proto/names.h"
#include "req.h"

void
req_broker_rekey (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    //  No key to rotate is a request this broker cannot take (as
    //  PROTOCOL.md says); conflict is for a rotation that runs already
    if (ctx->config->auth.insecure || !ctx->auth) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "this broker runs "
                   "--insecure: it has no key to rotate");
        return;
    }
    ctx_cluster_t cluster = {.enabled = false};
    ctx->ops->cluster (ctx, &cluster);
    //  A cluster's members share one pair (docs/HA.md): the rotation is
    //  recorded in the store, which every standby holds (brokerkey.h)
    const cluster_config_t *members = &ctx->config->cluster;
    const char *own = ctx->auth ? zcert_public_txt (auth_cert (ctx->auth))
                                : NULL;
    for (size_t index = 0; cluster.enabled && own
                           && index < members->peer_count; index++) {
        const char *key = members->peers [index].key;
        if (key && !streq (key, own)) {
            req_error (call, PROTO_ERR_BAD_REQUEST, "the members of cluster "
                       "%s have keys of their own (the peer %s's is not this "
                       "broker's): a rotation needs the one key pair they "
                       "share (docs/HA.md); rotate each with every broker "
                       "stopped (docs/SECURITY.md)", members->cluster,
                       members->peers [index].name);
            return;
        }
    }
    int64_t deadline_ms = BROKERKEY_DEADLINE_MS;
    char *text = req_field (call, "deadline");
    if (text && (duration_parse (text, &deadline_ms) != 0
                 || deadline_ms < 1000)) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "deadline '%s' is not a "
                   "duration from 1s to 30d (e.g. 10m, 24h)", text);
        free (text);
        return;
    }
    free (text);
    int64_t now_ms = ctx_wall_ms (ctx);
    char why [1024];
    if (brokerkey_start (ctx->brokerkey, now_ms, now_ms + deadline_ms, why,
                         sizeof why) != 0) {
        req_error (call, PROTO_ERR_CONFLICT, "%s", why);
        return;
    }
    store_txn_t *txn = cluster.enabled ? ctx_txn (ctx) : NULL;
    if (cluster.enabled
        && (!txn || brokerkey_record (ctx->brokerkey, txn, false) != 0))
        log_error ("the rotation of the broker's key is not recorded in "
                   "the store: a standby elected before it ends serves "
                   "the old key alone (restart this broker to try again)");
    const char *next = brokerkey_next (ctx->brokerkey);
    log_warn ("rotation of the broker's key started by %s: next key %s, the "
              "old key retired when every node has the new one, or in %"
              PRId64 " s", call->name, next, deadline_ms / 1000);
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 3);
    pw_str (reply, "key");
    pw_str (reply, zcert_public_txt (auth_cert (ctx->auth)));
    pw_str (reply, "next");
    pw_str (reply, next);
    char deadline [TIME_TEXT_LEN];
    time_format (now_ms + deadline_ms, deadline, sizeof deadline);
    pw_str (reply, "deadline");
    pw_str (reply, deadline);
}

void
req_broker_key_counts (ctx_t *ctx, req_broker_key_counts_t *counts)
{
    *counts = (req_broker_key_counts_t) {.nodes = 0};
    brokerkey_t *keys = ctx->brokerkey;
    const char *next = brokerkey_next (keys);
    registry_node_t **nodes = NULL;
    size_t count = registry_list (ctx->registry, &nodes);
    size_t acked = 0, unable = 0, relayed = 0;
    for (size_t index = 0; index < count; index++) {
        const registry_node_t *node = nodes [index];
        //  Behind relays: has it when the relay connected here has it
        if (node->via_size) {
            if (next && brokerkey_relay_has (keys, relays_connect_id (
                                                       ctx->relays, node->id)))
                acked++;
            else
                relayed++;
        }
        else
        if (next && brokerkey_has (keys, node->id))
            acked++;
        else
        if (!node->hello
            || !proto_hello_has_feature (node->hello,
                                         PROTO_FEATURE_BROKER_REKEY))
            unable++;
    }
    free (nodes);
    counts->nodes = count;
    counts->acknowledged = acked;
    counts->unable = unable;
    counts->relayed = relayed;
}

void
req_broker_keys (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    zcert_t *cert = auth_cert (ctx->auth);
    brokerkey_t *keys = ctx->brokerkey;
    const char *next = brokerkey_next (keys);
    req_broker_key_counts_t counts;
    req_broker_key_counts (ctx, &counts);
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, next ? 10 : 3);
    pw_str (reply, "key");
    if (cert)
        pw_str (reply, zcert_public_txt (cert));
    else
        pw_nil (reply);
    pw_str (reply, "rotating");
    pw_bool (reply, next != NULL);
    pw_str (reply, "retired");
    pw_int (reply, (int64_t) brokerkey_retired (keys));
    if (!next)
        return;
    char when [TIME_TEXT_LEN];
    pw_str (reply, "next");
    pw_str (reply, next);
    time_format (brokerkey_started_ms (keys), when, sizeof when);
    pw_str (reply, "started");
    pw_str (reply, when);
    time_format (brokerkey_deadline_ms (keys), when, sizeof when);
    pw_str (reply, "deadline");
    pw_str (reply, when);
    pw_str (reply, "nodes");
    pw_int (reply, (int64_t) counts.nodes);
    pw_str (reply, "acknowledged");
    pw_int (reply, (int64_t) counts.acknowledged);
    pw_str (reply, "unable");
    pw_int (reply, (int64_t) counts.unable);
    pw_str (reply, "relayed");
    pw_int (reply, (int64_t) counts.relayed);
}
