/*  =========================================================================
    req/relays - relay.list (see req.h)

    The relays are relays.c's (relays.h); this handler writes what
    relays_list gives. A relay is connected while its own heartbeats come
    within the agents' liveness window (heartbeat times missed beats).
    =========================================================================
*/
#include "../../proto/names.h"
#include "req.h"

static void
s_write_time (pw_t *writer, int64_t wall_ms)
{
    if (wall_ms <= 0) {
        pw_nil (writer);
        return;
    }
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    pw_str (writer, text);
}

void
req_relay_list (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    size_t count = 0;
    relays_info_t *list = relays_list (ctx->relays, ctx->registry, &count);
    int64_t now_ms = ctx_now_ms (ctx);
    int64_t window_ms = ctx->config->heartbeat_ms
                        * ctx->config->missed_heartbeats;
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 1);
    pw_str (reply, "relays");
    pw_array (reply, count);
    for (size_t index = 0; index < count; index++) {
        const relays_info_t *relay = &list [index];
        bool connected = !relay->revoked && relay->last_seen_wall_ms
                         && now_ms - relay->last_seen_ms <= window_ms;
        pw_map (reply, 6 + (relay->upstream [0] ? 1 : 0)
                       + (relay->pool ? 1 : 0) + (relay->revoked ? 1 : 0)
                       + (relay->version ? 1 : 0));
        pw_str (reply, "name");
        pw_str (reply, relay->name);
        pw_str (reply, "key");
        pw_str (reply, relay->key);
        pw_str (reply, "agents");
        pw_int (reply, (int64_t) relay->agents);
        pw_str (reply, "connected");
        pw_bool (reply, connected);
        pw_str (reply, "last_seen");
        s_write_time (reply, relay->last_seen_wall_ms);
        pw_str (reply, "refused");
        pw_int (reply, (int64_t) relay->refused);
        if (relay->upstream [0]) {
            pw_str (reply, "upstream");
            pw_str (reply, relay->upstream);
        }
        if (relay->pool) {
            pw_str (reply, "pool");
            pw_str (reply, relay->pool);
        }
        if (relay->revoked) {
            pw_str (reply, "revoked");
            pw_bool (reply, true);
        }
        if (relay->version) {
            pw_str (reply, "protocol");
            pw_int (reply, relay->version);
        }
    }
    free (list);
}
