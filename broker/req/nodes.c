/*  =========================================================================
    nodes - the node.* requests (see req.h and proto/PROTOCOL.md)
    =========================================================================
*/
#include "../../proto/log.h"
#include "../nodehist.h"
#include "req.h"

//  ---------------------------------------------------------------------
//  node.list, node.get

//  The nodes node.list's optional "where" (a target: fact:os=debian,
//  group:web and fact:arch=arm64) selects, online or not, sorted by id,
//  into *NODES_P. Returns the count, or -1 after a bad_request reply.
static ssize_t
s_nodes_where (req_call_t *call, const char *where, registry_node_t ***nodes_p)
{
    target_t target;
    char err [512];
    if (target_parse (where, &target, err, sizeof err) != 0) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "where: %s", err);
        return -1;
    }
    char **ids = NULL;
    size_t count = registry_select (call->ctx->registry, &target, &ids);
    target_clear (&target);
    *nodes_p = count ? (registry_node_t **) calloc (count, sizeof (void *))
                     : NULL;
    for (size_t index = 0; index < count; index++) {
        (*nodes_p) [index] = registry_lookup (call->ctx->registry,
                                              ids [index]);
        free (ids [index]);
    }
    free (ids);
    return (ssize_t) count;
}

//  node.changes: answered once any node was registered, came online, went
//  offline, was drained or resumed past the version the caller saw, at the
//  end of the pass (at once without AFTER); else parked until one does or
//  TIMEOUT_MS (30 s by default) passes. A node list watches this, then reads.
void
req_node_changes (req_call_t *call)
{
    int64_t after = -1, timeout_ms = 30000;
    const pv_t *value = pv_map_get (call->request->body, "after");
    if (value)
        pv_get_int (value, &after);
    value = pv_map_get (call->request->body, "timeout_ms");
    if (value)
        pv_get_int (value, &timeout_ms);
    call->park = true;
    snprintf (call->park_job, sizeof call->park_job, "%s", REQ_PARK_NODES);
    call->park_after = after >= 0 ? (uint64_t) after : UINT64_MAX;
    call->park_timeout_ms = timeout_ms;
}

void
req_node_list (req_call_t *call)
{
    registry_node_t **nodes = NULL;
    char *where = req_field (call, "where");
    ssize_t selected = where ? s_nodes_where (call, where, &nodes) : 0;
    free (where);
    if (selected < 0)
        return;
    size_t count = where ? (size_t) selected
                         : registry_list (call->ctx->registry, &nodes);
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    pw_map (call->reply, 1);
    pw_str (call->reply, "nodes");
    pw_array (call->reply, count);
    for (size_t index = 0; index < count; index++)
        registry_node_encode (nodes [index], call->reply, false);
    free (nodes);
}

void
req_node_get (req_call_t *call)
{
    char *id = req_field (call, "node");
    registry_node_t *node = id && name_valid (id)
                                ? registry_lookup (call->ctx->registry, id)
                                : NULL;
    if (!node)
        req_error (call, PROTO_ERR_NOT_FOUND, "no node '%s'", id ? id : "");
    else {
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        registry_node_encode (node, call->reply, true);
    }
    free (id);
}

//  ---------------------------------------------------------------------
//  node.drain, node.resume

static void
s_node_set_drained (req_call_t *call, bool drained)
{
    ctx_t *ctx = call->ctx;
    char *id = req_field (call, "node");
    registry_node_t *node = id && name_valid (id)
                                ? registry_lookup (ctx->registry, id)
                                : NULL;
    if (!node)
        req_error (call, PROTO_ERR_NOT_FOUND, "no node '%s'", id ? id : "");
    else {
        if (node->drained != drained)
            log_node (LOG_LEVEL_INFO, node->id, "node %s %s", node->id,
                      drained ? "drained: it takes no new work"
                              : "resumed: it takes new work again");
        registry_set_drained (node, drained);
        ctx_save_node (ctx, node);
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        registry_node_encode (node, call->reply, false);
    }
    free (id);
}

void
req_node_drain (req_call_t *call)
{
    s_node_set_drained (call, true);
}

void
req_node_resume (req_call_t *call)
{
    s_node_set_drained (call, false);
}

//  ---------------------------------------------------------------------
//  node.workers, node.history

//  The node of the request's "node" field, or NULL with a not_found reply.
static registry_node_t *
s_node_field (req_call_t *call)
{
    char *id = req_field (call, "node");
    registry_node_t *node = id && name_valid (id)
                                ? registry_lookup (call->ctx->registry, id)
                                : NULL;
    if (!node) {
        char shown [NAME_SHOW_LEN];
        req_error (call, PROTO_ERR_NOT_FOUND, "no node '%s'",
                   name_show (id ? id : "", id ? strlen (id) : 0, shown,
                              sizeof shown));
    }
    free (id);
    return node;
}

//  One in-flight cell of a node (node.workers).
typedef struct {
    const sched_job_t *job;
    uint32_t step;
    const sched_cell_t *cell;
} s_slot_t;

static int
s_compare_slots (const void *a, const void *b)
{
    const s_slot_t *one = (const s_slot_t *) a, *other = (const s_slot_t *) b;
    //  Running first, then by how long they have been so
    bool one_running = one->cell->status == SCHED_CELL_RUNNING;
    bool other_running = other->cell->status == SCHED_CELL_RUNNING;
    if (one_running != other_running)
        return one_running ? -1 : 1;
    return one->cell->since_ms < other->cell->since_ms ? -1
           : one->cell->since_ms > other->cell->since_ms;
}

void
req_node_workers (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    registry_node_t *node = s_node_field (call);
    if (!node)
        return;
    int64_t now_ms = ctx_now_ms (ctx);
    int64_t wall_ms = ctx_wall_ms (ctx);
    const sched_job_t **live = NULL;
    size_t live_count = sched_live_jobs (ctx->sched, &live);
    s_slot_t *slots = NULL;
    size_t slot_count = 0, slot_max = 0;
    for (size_t index = 0; index < live_count; index++) {
        const sched_job_t *job = live [index];
        ssize_t at = job->cells ? sched_job_node_index (job, node->id) : -1;
        for (size_t step = 0; at >= 0 && step < job->step_count; step++) {
            const sched_cell_t *cell
                = &job->cells [step * job->expected_count + (size_t) at];
            if (cell->status != SCHED_CELL_DISPATCHED
                && cell->status != SCHED_CELL_ACKNOWLEDGED
                && cell->status != SCHED_CELL_RUNNING)
                continue;
            if (slot_count == slot_max) {
                slot_max = slot_max ? slot_max * 2 : 16;
                slots = (s_slot_t *) realloc (slots, slot_max * sizeof (s_slot_t));
                assert (slots);
            }
            slots [slot_count++] = (s_slot_t) {job, (uint32_t) step, cell};
        }
    }
    free (live);
    if (slot_count)
        qsort (slots, slot_count, sizeof (s_slot_t), s_compare_slots);
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 7);
    pw_str (reply, "node");
    pw_str (reply, node->id);
    pw_str (reply, "status");
    pw_str (reply, node->online ? "online" : "offline");
    pw_str (reply, "concurrency");
    pw_int (reply, node->hello ? node->hello->concurrency : 0);
    pw_str (reply, "running");
    pw_int (reply, node->running);
    pw_str (reply, "queued");
    pw_int (reply, node->queued);
    pw_str (reply, "slots");
    pw_array (reply, slot_count);
    for (size_t index = 0; index < slot_count; index++) {
        const s_slot_t *slot = &slots [index];
        const job_phase_t *leaf = job_spec_step (slot->job->spec, slot->step,
                                                 NULL, NULL);
        char action [2 * NAME_MAX_LEN + 2];
        snprintf (action, sizeof action, "%s.%s", leaf->backend, leaf->action);
        const sched_cell_t *cell = slot->cell;
        bool reported = cell->progress_ms > 0;
        bool percent = reported && cell->percent >= 0;
        bool kind = reported && cell->progress_kind;
        bool message = reported && cell->progress;
        pw_map (reply, 6 + (percent ? 1 : 0) + (kind ? 1 : 0)
                          + (message ? 1 : 0));
        pw_str (reply, "job");
        pw_str (reply, slot->job->id);
        pw_str (reply, "step");
        pw_int (reply, slot->step);
        pw_str (reply, "attempt");
        pw_int (reply, slot->cell->attempt);
        pw_str (reply, "action");
        pw_str (reply, action);
        pw_str (reply, "status");
        pw_str (reply, sched_cell_status_name (slot->cell->status));
        pw_str (reply, "since");
        if (slot->cell->since_ms > 0) {
            char text [TIME_TEXT_LEN];
            time_format (wall_ms - (now_ms - slot->cell->since_ms), text,
                         sizeof text);
            pw_str (reply, text);
        }
        else
            pw_nil (reply);
        //  The latest progress it reported (kept in memory only)
        if (percent) {
            pw_str (reply, "percent");
            pw_int (reply, cell->percent);
        }
        if (kind) {
            pw_str (reply, "kind");
            pw_str (reply, cell->progress_kind);
        }
        if (message) {
            pw_str (reply, "message");
            pw_str (reply, cell->progress);
        }
    }
    free (slots);
    const broker_node_stats_t *stats = broker_stats_node (ctx->stats,
                                                           node->id);
    sched_node_counters_t any;
    sched_node_counters (ctx->sched, node->id, &any);
    pw_str (reply, "counters");
    pw_map (reply, 7);
    pw_str (reply, "claims");
    pw_int (reply, (int64_t) any.claims);
    pw_str (reply, "reclaimed");
    pw_int (reply, (int64_t) any.reclaims);
    pw_str (reply, "lease_expirations");
    pw_int (reply, (int64_t) any.lease_expirations);
    pw_str (reply, "run");
    pw_int (reply, (int64_t) stats->run);
    pw_str (reply, "failed");
    pw_int (reply, (int64_t) stats->failed);
    pw_str (reply, "lost");
    pw_int (reply, (int64_t) stats->lost);
    pw_str (reply, "retried");
    pw_int (reply, (int64_t) stats->retried);
}

void
req_node_history (req_call_t *call)
{
    registry_node_t *node = s_node_field (call);
    if (!node)
        return;
    int64_t limit = REQ_LIST_DEFAULT;
    pv_get_int (pv_map_get (call->request->body, "limit"), &limit);
    store_txn_t *txn = req_txn (call);
    if (!txn)
        return;
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    pw_map (call->reply, 2);
    pw_str (call->reply, "node");
    pw_str (call->reply, node->id);
    pw_str (call->reply, "history");
    nodehist_write (txn, node->id, (size_t) limit, call->reply);
}
