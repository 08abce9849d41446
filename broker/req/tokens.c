/*  =========================================================================
    req/tokens - token.add token.list token.revoke (see req.h)

    The tokens are the token store's (token.h, held by auth): these
    handlers check the request's fields, ask the store for the change,
    written into the pass, and write the reply. A new token's text is in
    the token.add reply only, and wiped from memory once written there.
    =========================================================================
*/
#include "../../proto/names.h"
#include "../token.h"
#include "req.h"

static void
s_write_time (pw_t *writer, const char *key, int64_t wall_ms)
{
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    pw_str (writer, key);
    pw_str (writer, text);
}

void
req_token_add (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char *name = req_field (call, "name");
    char *role_text = req_field (call, "role");
    auth_role_t role = role_text ? auth_role_parse (role_text) : AUTH_ROLE_NONE;
    if (!name || !name_valid (name))
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "name: expected 1 to 64 of A-Z a-z 0-9 _ -");
    else
    if (role == AUTH_ROLE_NONE)
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "role: expected viewer, operator or admin");
    else {
        char text [TOKEN_TEXT_LEN + 1];
        const char *code = NULL;
        char why [512];
        int64_t created_ms = ctx_wall_ms (ctx);
        if (token_add (auth_tokens (ctx->auth), ctx_txn (ctx), name, role,
                       created_ms, text, &code, why, sizeof why)
            != 0)
            req_error (call, code, "%s", why);
        else {
            pw_t *reply = call->reply;
            pw_reset (reply);
            proto_reply_ok_begin (reply, call->request->id);
            pw_map (reply, 4);
            pw_str (reply, "name");
            pw_str (reply, name);
            pw_str (reply, "role");
            pw_str (reply, auth_role_name (role));
            pw_str (reply, "token");
            pw_str (reply, text);
            s_write_time (reply, "created", created_ms);
        }
        explicit_bzero (text, sizeof text);
    }
    free (name);
    free (role_text);
}

void
req_token_list (req_call_t *call)
{
    size_t count = 0;
    token_info_t *tokens = token_list (auth_tokens (call->ctx->auth), &count);
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 1);
    pw_str (reply, "tokens");
    pw_array (reply, count);
    for (size_t index = 0; index < count; index++) {
        const token_info_t *token = &tokens [index];
        pw_map (reply, 3 + (token->last_used_ms ? 1 : 0));
        pw_str (reply, "name");
        pw_str (reply, token->name);
        pw_str (reply, "role");
        pw_str (reply, auth_role_name (token->role));
        s_write_time (reply, "created", token->created_ms);
        if (token->last_used_ms)
            s_write_time (reply, "last_used", token->last_used_ms);
    }
    free (tokens);
}

void
req_token_revoke (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char *name = req_field (call, "name");
    const char *code = NULL;
    char why [512];
    if (token_revoke (auth_tokens (ctx->auth), ctx_txn (ctx), name, &code,
                      why, sizeof why)
        != 0)
        req_error (call, code, "%s", why);
    else {
        pw_t *reply = call->reply;
        pw_reset (reply);
        proto_reply_ok_begin (reply, call->request->id);
        pw_map (reply, 2);
        pw_str (reply, "name");
        pw_str (reply, name);
        pw_str (reply, "revoked");
        pw_bool (reply, true);
    }
    free (name);
}
