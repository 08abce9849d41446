/*  =========================================================================
    req/cluster - cluster.status and cluster.switchover (see req.h)

    A broker cluster's active answers them (cluster.h); a standby answers
    every request not_leader, and a broker alone answers cluster.status
    with role "alone".
    =========================================================================
*/
#include "req.h"

void
req_cluster_status (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    ctx_cluster_t view;
    ctx->ops->cluster (ctx, &view);
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    if (!view.enabled) {
        pw_map (reply, 1);
        pw_str (reply, "role");
        pw_str (reply, "alone");
        return;
    }
    int64_t now_ms = ctx_now_ms (ctx);
    pw_map (reply, 10);
    pw_str (reply, "role");
    pw_str (reply, "active");
    pw_str (reply, "cluster");
    pw_str (reply, view.cluster);
    pw_str (reply, "name");
    pw_str (reply, view.name);
    pw_str (reply, "epoch");
    pw_int (reply, (int64_t) view.epoch);
    pw_str (reply, "pass");
    pw_int (reply, (int64_t) view.last);
    pw_str (reply, "released");
    pw_int (reply, (int64_t) view.released);
    pw_str (reply, "lease_left_ms");
    pw_int (reply, view.valid_ms > 0 ? view.valid_ms : 0);
    pw_str (reply, "strict");
    pw_bool (reply, view.strict);
    pw_str (reply, "sync_timeout_ms");
    pw_int (reply, view.sync_timeout_ms);
    pw_str (reply, "standbys");
    pw_array (reply, view.standby_count);
    for (size_t index = 0; index < view.standby_count; index++) {
        const repl_standby_info_t *standby = &view.standbys [index];
        pw_map (reply, 6);
        pw_str (reply, "name");
        pw_str (reply, standby->name);
        pw_str (reply, "state");
        pw_str (reply, standby->state);
        pw_str (reply, "sync");
        pw_bool (reply, standby->sync);
        pw_str (reply, "pass");
        pw_int (reply, (int64_t) standby->acked);
        pw_str (reply, "lag_passes");
        pw_int (reply, view.last > standby->acked
                           ? (int64_t) (view.last - standby->acked) : 0);
        pw_str (reply, "lag_ms");
        pw_int (reply, standby->lag_ms);
    }
    (void) now_ms;
}

void
req_cluster_switchover (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char *to = req_field (call, "to");
    char why [512];
    if (ctx->ops->switchover (ctx, to, why, sizeof why) != 0) {
        req_error (call, PROTO_ERR_CONFLICT, "%s", why);
        free (to);
        return;
    }
    free (to);
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 1);
    pw_str (reply, "switchover");
    pw_bool (reply, true);
}
