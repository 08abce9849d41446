/*  =========================================================================
    req/audit - audit.list (see req.h)

    The trail is audit.c's (audit.h): this handler checks the filters and
    writes what audit_list gives, newest first. Nothing edits or deletes
    an entry: there is no request for it.
    =========================================================================
*/
#include "../audit.h"
#include "req.h"

//  The string field KEY of the request, borrowed into BUF (SIZE bytes),
//  or NULL when absent. The protocol's schema bounds its length.
static const char *
s_text (req_call_t *call, const char *key, char *buf, size_t size)
{
    char *text = req_field (call, key);
    if (!text)
        return NULL;
    audit_text_set (buf, size, text);
    free (text);
    return buf;
}

void
req_audit_list (req_call_t *call)
{
    char who [AUDIT_TEXT_MAX], type [64], object [AUDIT_TEXT_MAX];
    char outcome [64], before [AUDIT_ID_LEN + 1];
    audit_filter_t filter;
    memset (&filter, 0, sizeof filter);
    filter.who = s_text (call, "who", who, sizeof who);
    //  "type" is the request's own (audit.list)
    filter.type = s_text (call, "request_type", type, sizeof type);
    filter.object = s_text (call, "object", object, sizeof object);
    filter.outcome = s_text (call, "outcome", outcome, sizeof outcome);
    filter.before = s_text (call, "before", before, sizeof before);
    pv_get_int (pv_map_get (call->request->body, "since"), &filter.since_ms);
    int64_t limit = AUDIT_LIST_DEFAULT;
    pv_get_int (pv_map_get (call->request->body, "limit"), &limit);
    filter.limit = (size_t) limit;
    uint8_t key [AUDIT_KEY_LEN];
    if (filter.before && audit_id_parse (filter.before, key) != 0) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "before: '%s' is no audit entry id (24 hex digits, the "
                   "next of an earlier reply)", filter.before);
        return;
    }
    if (filter.type && !strchr (filter.type, '.')) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "request_type: '%s' is no request type (job.cancel) or "
                   "prefix (job.)", filter.type);
        return;
    }
    store_txn_t *txn = req_txn (call);
    if (!txn)
        return;
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    if (audit_list (txn, &filter, call->reply) != 0)
        req_error (call, PROTO_ERR_STORE, "the audit trail cannot be read: %s",
                   store_last_error (call->ctx->store));
}
