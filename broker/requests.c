/*  =========================================================================
    requests - the one table of client request types (see requests.h)
    =========================================================================
*/
#include "requests.h"

#define V AUTH_ROLE_VIEWER
#define O AUTH_ROLE_OPERATOR
#define A AUTH_ROLE_ADMIN

static bool
s_submit_refused (req_call_t *call)
{
    return auth_submit_refused (call->ctx->auth, call->ctx->registry,
                                call->request, call->role, call->reply);
}

//  Viewers read; operators run, cancel, retry and delete jobs and
//  schedules and purge the dead letters; admins change who may do what
//  (keys, tokens) and drain or resume nodes and the broker. A viewer may
//  submit query actions only (s_submit_refused checks every leaf, and the
//  allowlist for everyone); job.check writes nothing, so a viewer may ask.
//  What changes anything is audited (audit.h); audit.list is an admin's,
//  and so are the webhook deliveries (notify.list, notify.retry).
static const requests_row_t s_rows [] = {
    //  type              role  mutates audited handler              check
    {"job.submit",        V,    true,   true,  req_job_submit,      s_submit_refused},
    {"job.check",         V,    false,  false, req_job_check,       NULL},
    {"job.get",           V,    false,  false, req_job_get,         NULL},
    {"job.progress",      V,    false,  false, req_job_progress,    NULL},
    {"job.watch",         V,    false,  false, req_job_watch,       NULL},
    {"job.changes",       V,    false,  false, req_job_changes,     NULL},
    {"job.list",          V,    false,  false, req_job_list,        NULL},
    {"job.cancel",        O,    true,   true,  req_job_cancel,      NULL},
    {"job.events",        V,    false,  false, req_job_events,      NULL},
    {"job.delete",        O,    true,   true,  req_job_delete,      NULL},
    {"job.output",        V,    false,  false, req_job_output,      NULL},
    {"job.output_events", V,    false,  false, req_job_output_events, NULL},
    {"job.retry",         O,    true,   true,  req_job_retry,       NULL},
    {"node.list",         V,    false,  false, req_node_list,       NULL},
    {"node.changes",      V,    false,  false, req_node_changes,    NULL},
    {"node.get",          V,    false,  false, req_node_get,        NULL},
    {"node.drain",        A,    false,  true,  req_node_drain,      NULL},
    {"node.resume",       A,    false,  true,  req_node_resume,     NULL},
    {"node.workers",      V,    false,  false, req_node_workers,    NULL},
    {"node.history",      V,    false,  false, req_node_history,    NULL},
    {"status",            V,    false,  false, req_status,          NULL},
    {"whoami",            V,    false,  false, req_whoami,          NULL},
    {"broker.drain",      A,    false,  true,  req_broker_drain,    NULL},
    {"broker.resume",     A,    false,  true,  req_broker_resume,   NULL},
    {"queue.stats",       V,    false,  false, req_queue_stats,     NULL},
    {"metrics.get",       V,    false,  false, req_metrics_get,     NULL},
    {"dlq.list",          V,    false,  false, req_dlq_list,        NULL},
    {"dlq.get",           V,    false,  false, req_dlq_get,         NULL},
    {"dlq.retry",         O,    true,   true,  req_dlq_retry,       NULL},
    {"dlq.purge",         O,    true,   true,  req_dlq_purge,       NULL},
    {"key.list",          A,    false,  false, req_key_list,        NULL},
    {"key.accept",        A,    false,  true,  req_key_accept,      NULL},
    {"key.reject",        A,    false,  true,  req_key_reject,      NULL},
    {"key.delete",        A,    false,  true,  req_key_delete,      NULL},
    {"broker.rekey",      A,    false,  true,  req_broker_rekey,    NULL},
    {"broker.keys",       V,    false,  false, req_broker_keys,     NULL},
    {"token.add",         A,    false,  true,  req_token_add,       NULL},
    {"token.list",        A,    false,  false, req_token_list,      NULL},
    {"token.revoke",      A,    false,  true,  req_token_revoke,    NULL},
    {"relay.list",        V,    false,  false, req_relay_list,      NULL},
    {"schedule.add",      O,    true,   true,  req_schedule_add,    NULL},
    {"schedule.list",     V,    false,  false, req_schedule_list,   NULL},
    {"schedule.get",      V,    false,  false, req_schedule_get,    NULL},
    {"schedule.pause",    O,    true,   true,  req_schedule_pause,  NULL},
    {"schedule.resume",   O,    true,   true,  req_schedule_resume, NULL},
    {"schedule.delete",   O,    true,   true,  req_schedule_delete, NULL},
    {"schedule.run",      O,    true,   true,  req_schedule_run,    NULL},
    {"audit.list",        A,    false,  false, req_audit_list,      NULL},
    {"cluster.status",    V,    false,  false, req_cluster_status,  NULL},
    {"cluster.switchover", A,   false,  true,  req_cluster_switchover, NULL},
    {"notify.list",       A,    false,  false, req_notify_list,     NULL},
    {"notify.retry",      A,    true,   true,  req_notify_retry,    NULL},
    {"blob.put",          O,    false,  false, req_blob_put,        NULL},
    {"blob.stat",         V,    false,  false, req_blob_stat,       NULL},
    {"blob.list",         V,    false,  false, req_blob_list,       NULL},
    {"blob.delete",       O,    true,   true,  req_blob_delete,     NULL},
};

#undef V
#undef O
#undef A

const requests_row_t *
requests_find (const char *type)
{
    for (size_t index = 0; index < sizeof s_rows / sizeof s_rows [0]; index++)
        if (strcmp (s_rows [index].type, type) == 0)
            return &s_rows [index];
    return NULL;
}

const requests_row_t *
requests_rows (size_t *count_p)
{
    *count_p = sizeof s_rows / sizeof s_rows [0];
    return s_rows;
}

const requests_row_t *
requests_admit (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    const proto_request_t *request = call->request;
    if (auth_identify (ctx->auth, call->caller, request, ctx_wall_ms (ctx),
                       &call->role, &call->name, call->reply) != 0)
        return NULL;
    const requests_row_t *row = requests_find (request->type);
    if (!row) {
        req_error (call, PROTO_ERR_UNKNOWN_TYPE, "unknown request type '%s'",
                   request->type);
        return NULL;
    }
    if (call->role < row->role) {
        auth_forbid (ctx->auth, call->caller, request, row->role, call->role,
                     call->name, call->reply);
        return NULL;
    }
    if (row->refused && row->refused (call))
        return NULL;
    return row;
}
