/*  =========================================================================
    req - what every request handler file uses (see req.h and proto/PROTOCOL.md)
    =========================================================================
*/
#include "req.h"

typedef struct {
    const broker_t *self;
    const proto_request_t *request;
    pw_t *reply;
} api_call_t;

static void
s_error (api_call_t *call, const char *code, const char *format, ...)
{
    char message [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (message, sizeof message, format, args);
    va_end (args);
    pw_reset (call->reply);
    proto_reply_error (call->reply, call->request->id, code, message, NULL, 0);
}

//  The string field KEY of the request (borrowed copy freed by caller).
static char *
s_field (const api_call_t *call, const char *key)
{
    return pv_strdup (pv_map_get (call->request->body, key));
}

static store_txn_t *
s_txn (api_call_t *call)
{
    store_txn_t *txn = broker_txn ((broker_t *) call->self);
    if (!txn)
        s_error (call, PROTO_ERR_STORE, "the store cannot be read: %s",
                 store_last_error (call->self->store));
    return txn;
}
