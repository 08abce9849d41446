/*  =========================================================================
    ctx - what a handler sees of the broker (see ctx.h)
    =========================================================================
*/
#include "../proto/log.h"
#include "../proto/names.h"
#include "ctx.h"

void
ctx_store_error (int rc, const char *what)
{
    if (rc != 0 && rc != STORE_EFULL && rc != STORE_EIO)
        log_error ("store: cannot save %s: %s", what, store_strerror (rc));
}

void
ctx_save_node (ctx_t *ctx, registry_node_t *node)
{
    store_txn_t *txn = ctx_txn (ctx);
    if (!txn)
        return;
    pw_reset (ctx->scratch);
    registry_node_encode_record (node, ctx->scratch);
    int rc = store_put (txn, STORE_DB_NODES, node->id, strlen (node->id),
                        pw_data (ctx->scratch), pw_size (ctx->scratch));
    ctx_store_error (rc, "a node");
    //  The record holds its last-seen time
    if (rc == 0)
        registry_seen_saved (node);
}

void
ctx_node_offline (ctx_t *ctx, const char *id, const char *why)
{
    registry_node_t *node = registry_lookup (ctx->registry, id);
    if (!node || !node->online)
        return;
    int64_t now_ms = ctx_now_ms (ctx);
    log_node (LOG_LEVEL_INFO, id, "node %s is offline: %s", id, why);
    registry_set_offline (node, now_ms);
    ctx_save_node (ctx, node);
    if (ctx->sched)
        sched_on_node_offline (ctx->sched, id, now_ms);
}

void
ctx_set_maintenance (ctx_t *ctx, bool on)
{
    ctx->state.maintenance = on;
    if (ctx->sched)
        sched_set_paused (ctx->sched, on || ctx->state.hold_until_ms != 0);
    store_txn_t *txn = ctx_txn (ctx);
    if (txn)
        ctx_store_error (store_put (txn, STORE_DB_META, CTX_META_MAINTENANCE,
                                    strlen (CTX_META_MAINTENANCE),
                                    on ? "1" : "0", 1),
                         "the maintenance flag");
    log_info (on ? "maintenance: no new jobs are admitted; running jobs finish"
                 : "maintenance ended: jobs are admitted again");
}

void
ctx_job_id (ctx_t *ctx, int64_t wall_ms, char *id)
{
    job_id_make (wall_ms, &ctx->state.last_id_ms, &ctx->state.id_seq, id,
                 JOB_ID_LEN + 1);
}

const char *
ctx_broker_state (const ctx_t *ctx)
{
    if (!ctx->state.maintenance)
        return "serving";
    return ctx->sched && sched_running_count (ctx->sched) ? "draining"
                                                          : "maintenance";
}

const char *
ctx_store_state (const ctx_t *ctx, const store_info_t *info)
{
    const broker_storage_t *storage = &ctx->stats->storage;
    return storage->code == STORE_EFULL ? "full"
         : storage->code ? "error"
         : info->max_bytes
           && info->used_bytes / 100 * 100
                  >= info->max_bytes / 100 * STORE_NEARLY_FULL
         ? "nearly_full" : "ok";
}
