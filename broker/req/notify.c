/*  =========================================================================
    req/notify - notify.list and notify.retry (see req.h)

    The deliveries are notify.c's (notify.h): list reads them newest
    first; retry makes a sent or dead one pending again, now, with a new
    retry_for window, and notes it in its job's timeline.
    =========================================================================
*/
#include "../notify.h"
#include "req.h"

void
req_notify_list (req_call_t *call)
{
    char *status = req_field (call, "status");
    char *job = req_field (call, "job");
    int64_t limit = NOTIFY_LIST_DEFAULT;
    pv_get_int (pv_map_get (call->request->body, "limit"), &limit);
    if (status && strcmp (status, "pending") != 0 && strcmp (status, "sent") != 0
        && strcmp (status, "dead") != 0) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "status: '%s' is no delivery status (pending, sent, dead)",
                   status);
        free (status);
        free (job);
        return;
    }
    store_txn_t *txn = req_txn (call);
    if (txn) {
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        if (notify_list (txn, status, job, (size_t) limit, call->reply) != 0)
            req_error (call, PROTO_ERR_STORE, "the webhook deliveries cannot "
                       "be read: %s", store_last_error (call->ctx->store));
    }
    free (status);
    free (job);
}

void
req_notify_retry (req_call_t *call)
{
    char *id = req_field (call, "delivery");
    uint8_t key [NOTIFY_KEY_LEN];
    if (!id || notify_id_parse (id, key) != 0) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "delivery: '%s' is no "
                   "delivery id (24 hex digits, from notify list)",
                   id ? id : "");
        free (id);
        return;
    }
    store_txn_t *txn = req_txn (call);
    if (!txn) {
        free (id);
        return;
    }
    char job [JOB_ID_LEN + 1] = "";
    int rc = notify_retry (call->ctx->notify, txn, id, ctx_wall_ms (call->ctx),
                           job);
    if (rc == STORE_ENOTFOUND)
        req_error (call, PROTO_ERR_NOT_FOUND, "no webhook delivery %s", id);
    else
    if (rc == 1)
        req_error (call, PROTO_ERR_CONFLICT, "delivery %s is pending already",
                   id);
    else
    if (rc != 0)
        req_error (call, PROTO_ERR_STORE, "the delivery cannot be changed: %s",
                   store_strerror (rc));
    else {
        char detail [512];
        char *who = req_caller_text (call);
        snprintf (detail, sizeof detail, "delivery %s queued again by %s", id,
                  who ? who : "?");
        free (who);
        const void *header = NULL;
        size_t size = 0;
        if (store_get (txn, STORE_DB_JOBS, job, strlen (job), &header, &size)
            == 0)
            ctx_job_event (call->ctx, job, "notify_retried", detail);
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        pw_map (call->reply, 3);
        pw_str (call->reply, "delivery");
        pw_str (call->reply, id);
        pw_str (call->reply, "job");
        pw_str (call->reply, job);
        pw_str (call->reply, "status");
        pw_str (call->reply, "pending");
    }
    free (id);
}
