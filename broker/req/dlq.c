/*  =========================================================================
    dlq - the dlq.* requests (see req.h and proto/PROTOCOL.md)
    =========================================================================
*/
#include "../dlq.h"
#include "../jobrec.h"
#include "req.h"

void
req_dlq_list (req_call_t *call)
{
    char *job_id = req_field (call, "job");
    if (job_id && !job_id_valid (job_id)) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "job: '%s' is not a job id (like j-0193a1b2c3d4-0001)",
                   job_id);
        free (job_id);
        return;
    }
    int64_t limit = REQ_LIST_DEFAULT;
    pv_get_int (pv_map_get (call->request->body, "limit"), &limit);
    store_txn_t *txn = req_txn (call);
    if (txn) {
        size_t total = 0;
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        pw_map (call->reply, 2);
        pw_str (call->reply, "entries");
        dlq_write_list (txn, job_id, (size_t) limit, call->reply, &total);
        pw_str (call->reply, "total");
        pw_int (call->reply, (int64_t) total);
    }
    free (job_id);
}

//  The entry id of the request's "entry" field into JOB, STEP, NODE.
//  Returns 0, or -1 with an error reply.
static int
s_entry_field (req_call_t *call, char *job, uint32_t *step, char *node)
{
    char *text = req_field (call, "entry");
    int rc = dlq_id_parse (text, job, step, node);
    if (rc != 0) {
        char shown [NAME_SHOW_LEN];
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "entry: '%s' is not a dead-letter entry id (JOB/STEP/NODE, "
                   "like j-0193a1b2c3d4-0001/0/web-01)",
                   name_show (text ? text : "", text ? strlen (text) : 0,
                              shown, sizeof shown));
    }
    free (text);
    return rc;
}

void
req_dlq_get (req_call_t *call)
{
    char job [JOB_ID_LEN + 1], node [NAME_MAX_LEN + 1];
    uint32_t step = 0;
    if (s_entry_field (call, job, &step, node) != 0)
        return;
    store_txn_t *txn = req_txn (call);
    if (!txn)
        return;
    pv_doc_t *doc = NULL;
    int rc = dlq_get (txn, job, step, node, &doc);
    if (rc == STORE_ENOTFOUND)
        req_error (call, PROTO_ERR_NOT_FOUND, "no dead-letter entry %s/%u/%s",
                   job, step, node);
    else
    if (rc == 0) {
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        rc = dlq_write_entry (pv_doc_root (doc), call->reply);
    }
    if (rc != 0 && rc != STORE_ENOTFOUND)
        req_error (call, PROTO_ERR_STORE, "dead-letter entry %s/%u/%s is "
                   "unreadable", job, step, node);
    pv_doc_destroy (&doc);
}

void
req_dlq_retry (req_call_t *call)
{
    char job [JOB_ID_LEN + 1], node [NAME_MAX_LEN + 1];
    uint32_t step = 0;
    char *text = req_field (call, "entry");
    //  An entry id, or a job id for all of the job's entries
    if (text && job_id_valid (text))
        snprintf (job, sizeof job, "%s", text);
    else
    if (s_entry_field (call, job, &step, node) != 0) {
        free (text);
        return;
    }
    free (text);
    store_txn_t *txn = req_txn (call);
    if (!txn)
        return;
    if (!dlq_has_job (txn, job)) {
        req_error (call, PROTO_ERR_NOT_FOUND, "job %s has no dead-letter entry",
                   job);
        return;
    }
    req_retry (call, job, true, NULL);
}

void
req_dlq_purge (req_call_t *call)
{
    const pv_t *body = call->request->body;
    bool all = false;
    pv_get_bool (pv_map_get (body, "all"), &all);
    char *older = req_field (call, "older_than");
    char *job_id = req_field (call, "job");
    bool by_entry = pv_map_get (body, "entry") != NULL;
    int64_t older_ms = 0;
    char job [JOB_ID_LEN + 1], node [NAME_MAX_LEN + 1];
    uint32_t step = 0;
    int rc = 0;
    if (!all && !older && !job_id && !by_entry) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "dlq.purge needs entry, job, older_than or all: true");
        rc = -1;
    }
    else
    if (older && duration_parse (older, &older_ms) != 0) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "older_than: expected a duration like 10s, 30m or 7d");
        rc = -1;
    }
    else
    if (job_id && !job_id_valid (job_id)) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "job: not a job id (like j-0193a1b2c3d4-0001)");
        rc = -1;
    }
    else
    if (by_entry)
        rc = s_entry_field (call, job, &step, node);
    store_txn_t *txn = rc == 0 ? req_txn (call) : NULL;
    if (txn) {
        int purged = 0;
        int64_t before = older ? ctx_wall_ms (call->ctx) - older_ms : 0;
        if (by_entry) {
            uint8_t key [JOBREC_MAX_KEY];
            size_t key_len = jobrec_cell_key (job, step, node, key);
            purged = store_del (txn, STORE_DB_DLQ, key, key_len) == 0 ? 1 : 0;
        }
        else
            purged = dlq_purge (txn, job_id, before);
        if (purged < 0)
            req_error (call, PROTO_ERR_STORE, "the dead-letter queue: %s",
                       store_strerror (purged));
        else {
            pw_reset (call->reply);
            proto_reply_ok_begin (call->reply, call->request->id);
            pw_map (call->reply, 1);
            pw_str (call->reply, "purged");
            pw_int (call->reply, purged);
        }
    }
    free (older);
    free (job_id);
}
