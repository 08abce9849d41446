/*  =========================================================================
    req - what every request handler file uses (see req.h)
    =========================================================================
*/
#include "req.h"

void
req_error (req_call_t *call, const char *code, const char *format, ...)
{
    char message [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (message, sizeof message, format, args);
    va_end (args);
    pw_reset (call->reply);
    proto_reply_error (call->reply, call->request->id, code, message, NULL, 0);
}

char *
req_field (const req_call_t *call, const char *key)
{
    return pv_strdup (pv_map_get (call->request->body, key));
}

store_txn_t *
req_txn (req_call_t *call)
{
    store_txn_t *txn = ctx_txn (call->ctx);
    if (!txn)
        req_error (call, PROTO_ERR_STORE, "the store cannot be read: %s",
                   store_last_error (call->ctx->store));
    return txn;
}

char *
req_caller_text (const req_call_t *call)
{
    const char *role = auth_role_name (call->role);
    bool named = call->name && strcmp (call->name, AUTH_UNNAMED) != 0;
    if (call->caller->http)
        return zsys_sprintf ("token %s (%s)", named ? call->name : "?", role);
    if (named)
        return zsys_sprintf ("%s (%s)", call->name, role);
    if (call->caller->key)
        return zsys_sprintf ("key %.8s... (%s)", call->caller->key, role);
    return zsys_sprintf ("a client of an insecure broker (%s)", role);
}
