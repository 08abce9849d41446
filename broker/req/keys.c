/*  =========================================================================
    req/keys - key.list key.accept key.reject key.delete (see req.h)

    A key is named by "key" (Z85) or by "node". The key store is auth's
    (auth.h): these handlers find the record, ask auth for the change (it
    logs it and writes it into the pass), take a revoked node offline and
    write the reply. Client keys and enrolled relays come from the config.
    =========================================================================
*/
#include "../../proto/keys.h"
#include "../../proto/names.h"
#include "../relays.h"
#include "req.h"

//  Which key a key.* request means: by "key" (Z85) or by "node" (the key
//  bound to that node, else the one pending key that claims it, or the
//  one relay key whose relay goes by that name). Sets
//  *TEXT_P to the key text (in BUF, KEYS_TEXT_SIZE bytes). Returns the
//  record (NULL when the key has none), or writes an error into the reply
//  and returns NULL with *TEXT_P NULL.
static const auth_key_t *
s_key_target (req_call_t *call, const char **text_p, char *buf)
{
    auth_t *self = call->ctx->auth;
    const proto_request_t *request = call->request;
    *text_p = NULL;
    const pv_t *key_value = pv_map_get (request->body, "key");
    const pv_t *node_value = pv_map_get (request->body, "node");
    if ((key_value != NULL) == (node_value != NULL)) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "%s: give exactly one of key (40 characters of Z85) and "
                   "node", request->type);
        return NULL;
    }
    if (key_value) {
        size_t len = 0;
        const char *text = pv_str (key_value, &len);
        if (len != KEYS_Z85_LEN) {
            req_error (call, PROTO_ERR_BAD_REQUEST,
                       "key: expected 40 characters of Z85");
            return NULL;
        }
        memcpy (buf, text, len);
        buf [len] = 0;
        if (!keys_z85_valid (buf)) {
            req_error (call, PROTO_ERR_BAD_REQUEST,
                       "key: expected 40 characters of Z85");
            return NULL;
        }
        *text_p = buf;
        return auth_key (self, buf);
    }
    char *node = pv_strdup (node_value);
    if (!node || !name_valid (node)) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "node: expected a node id");
        free (node);
        return NULL;
    }
    size_t claims = 0;
    const auth_key_t *found = auth_key_of_node (self, node, &claims);
    if (claims > 1)
        req_error (call, PROTO_ERR_CONFLICT,
                   "%zu keys claim the name %s: name the key itself (see "
                   "gridcli key list)", claims, node);
    else
    if (!found)
        req_error (call, PROTO_ERR_NOT_FOUND,
                   "no key speaks for node or relay %s (see gridcli key "
                   "list)", node);
    free (node);
    if (found) {
        snprintf (buf, KEYS_TEXT_SIZE, "%s", found->key);
        *text_p = buf;
    }
    return found;
}

static void
s_reply_key (pw_t *reply, const char *id, const char *key, const char *status,
             const char *node)
{
    pw_reset (reply);
    proto_reply_ok_begin (reply, id);
    pw_map (reply, node ? 3 : 2);
    pw_str (reply, "key");
    pw_str (reply, key);
    pw_str (reply, "status");
    pw_str (reply, status);
    if (node) {
        pw_str (reply, "node");
        pw_str (reply, node);
    }
}

//  Is key TEXT accepted already, so that key.accept would change nothing?
//  A client key or a relay enrolled in the config (LIFTED_ONLY) is when
//  no revocation is kept for it; any other when its record is accepted.
static bool
s_key_already_accepted (auth_t *auth, const char *text, bool lifted_only)
{
    const auth_key_t *key = auth_key (auth, text);
    if (lifted_only)
        return key == NULL;
    return key && key->status == AUTH_KEY_ACCEPTED;
}

void
req_key_accept (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char buf [KEYS_TEXT_SIZE];
    const char *text = NULL;
    const auth_key_t *target = s_key_target (call, &text, buf);
    if (!text)
        return;
    //  Named by node: a next key waiting for acceptance is the one meant
    const auth_key_t *next = target && target->status == AUTH_KEY_ACCEPTED
                             && target->node
                             && pv_map_get (call->request->body, "node")
                                 ? auth_key_next_of (ctx->auth, target->node)
                                 : NULL;
    if (next && next->status == AUTH_KEY_PENDING) {
        snprintf (buf, KEYS_TEXT_SIZE, "%s", next->key);
        text = buf;
    }
    bool configured_relay = relays_config_find (&ctx->config->relays, text)
                            != NULL;
    const auth_key_t *key = NULL;
    bool lifted_only = configured_relay || auth_is_client (ctx->auth, text);
    if (s_key_already_accepted (ctx->auth, text, lifted_only)) {
        //  Nothing to change: no write, accepted_at stays the first one
        key = lifted_only ? NULL : auth_key (ctx->auth, text);
        const char *node = key ? key->node : NULL;
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        pw_map (call->reply, node ? 4 : 3);
        pw_str (call->reply, "key");
        pw_str (call->reply, text);
        pw_str (call->reply, "status");
        pw_str (call->reply, "accepted");
        if (node) {
            pw_str (call->reply, "node");
            pw_str (call->reply, node);
        }
        pw_str (call->reply, "already");
        pw_bool (call->reply, true);
        return;
    }
    char why [512];
    if (auth_key_accept (ctx->auth, ctx_txn (ctx), text, configured_relay,
                         ctx_wall_ms (ctx), &key, why, sizeof why)
        != 0) {
        req_error (call, PROTO_ERR_CONFLICT, "%s", why);
        return;
    }
    if (key)
        s_reply_key (call->reply, call->request->id, key->key,
                     auth_key_status_name (key->status), key->node);
    else
        s_reply_key (call->reply, call->request->id, text, "accepted", NULL);
}

void
req_key_reject (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char buf [KEYS_TEXT_SIZE];
    const char *text = NULL;
    s_key_target (call, &text, buf);
    if (!text)
        return;
    bool was_bound = false;
    const auth_key_t *key = auth_key_reject (ctx->auth, ctx_txn (ctx), text,
                                             ctx_wall_ms (ctx), &was_bound);
    if (was_bound)
        ctx_node_offline (ctx, key->node, "its key was rejected");
    s_reply_key (call->reply, call->request->id, key->key, "rejected",
                 key->node);
}

void
req_key_delete (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char buf [KEYS_TEXT_SIZE];
    const char *text = NULL;
    const auth_key_t *key = s_key_target (call, &text, buf);
    if (!text)
        return;
    char *node = NULL;
    bool was_bound = false;
    if (!key
        || auth_key_delete (ctx->auth, ctx_txn (ctx), text, &node,
                            &was_bound)
               != 0) {
        req_error (call, PROTO_ERR_NOT_FOUND, "no key %s in the key store",
                   text);
        return;
    }
    if (was_bound)
        ctx_node_offline (ctx, node, "its key was deleted");
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, node ? 3 : 2);
    pw_str (reply, "key");
    pw_str (reply, text);
    pw_str (reply, "deleted");
    pw_bool (reply, true);
    if (node) {
        pw_str (reply, "node");
        pw_str (reply, node);
    }
    free (node);
}

static int
s_compare_keys (const void *a, const void *b)
{
    const auth_key_t *left = *(const auth_key_t *const *) a;
    const auth_key_t *right = *(const auth_key_t *const *) b;
    int rc = strcmp (left->node ? left->node : "", right->node ? right->node
                                                               : "");
    return rc ? rc : strcmp (left->key, right->key);
}

static void
s_write_time (pw_t *writer, const char *name, int64_t wall_ms)
{
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    pw_str (writer, name);
    pw_str (writer, text);
}

void
req_key_list (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    auth_t *self = ctx->auth;
    pw_t *reply = call->reply;
    const auth_config_t *config = &ctx->config->auth;
    size_t count = 0, records = 0;
    for (const auth_key_t *key = auth_key_first (self); key;
         key = auth_key_next (self))
        records++;
    const auth_key_t **agents = (const auth_key_t **) calloc (
        records + 1, sizeof (auth_key_t *));
    assert (agents);
    const relays_config_t *relays = &ctx->config->relays;
    for (const auth_key_t *key = auth_key_first (self); key;
         key = auth_key_next (self))
        if (!auth_is_client (self, key->key)
            && !relays_config_find (relays, key->key))
            agents [count++] = key;
    qsort (agents, count, sizeof (auth_key_t *), s_compare_keys);
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 1);
    pw_str (reply, "keys");
    pw_array (reply, config->client_count + relays->count + count);
    for (size_t index = 0; index < relays->count; index++) {
        const relays_entry_t *relay = &relays->entries [index];
        const auth_key_t *record = auth_key (self, relay->key);
        bool revoked = record && record->status == AUTH_KEY_REJECTED;
        pw_map (reply, 5);
        pw_str (reply, "key");
        pw_str (reply, relay->key);
        pw_str (reply, "kind");
        pw_str (reply, "relay");
        pw_str (reply, "status");
        pw_str (reply, revoked ? "rejected" : "accepted");
        pw_str (reply, "name");
        pw_str (reply, relay->name);
        pw_str (reply, "pool");
        pw_str (reply, relay->pool);
    }
    for (size_t index = 0; index < config->client_count; index++) {
        const auth_client_t *client = &config->clients [index];
        const auth_key_t *record = auth_key (self, client->key);
        bool revoked = record && record->status == AUTH_KEY_REJECTED;
        pw_map (reply, client->name ? 5 : 4);
        pw_str (reply, "key");
        pw_str (reply, client->key);
        pw_str (reply, "kind");
        pw_str (reply, "client");
        pw_str (reply, "status");
        pw_str (reply, revoked ? "rejected" : "accepted");
        pw_str (reply, "role");
        pw_str (reply, auth_role_name (client->role));
        if (client->name) {
            pw_str (reply, "name");
            pw_str (reply, client->name);
        }
    }
    for (size_t index = 0; index < count; index++) {
        const auth_key_t *key = agents [index];
        bool named = key->relay && key->hostname;
        pw_map (reply, 3 + (key->node ? 1 : 0)
                           + (key->hostname && !named ? 1 : 0)
                           + (named ? 1 : 0)
                           + (key->first_seen_ms ? 1 : 0)
                           + (key->accepted_at_ms ? 1 : 0)
                           + (key->replaces ? 1 : 0)
                           + (key->retired_at_ms ? 1 : 0));
        pw_str (reply, "key");
        pw_str (reply, key->key);
        pw_str (reply, "kind");
        pw_str (reply, key->relay ? "relay" : "agent");
        if (named) {
            pw_str (reply, "name");
            pw_str (reply, key->hostname);
        }
        pw_str (reply, "status");
        pw_str (reply, auth_key_status_name (key->status));
        if (key->node) {
            pw_str (reply, "node");
            pw_str (reply, key->node);
        }
        if (key->hostname && !named) {
            pw_str (reply, "hostname");
            pw_str (reply, key->hostname);
        }
        if (key->first_seen_ms)
            s_write_time (reply, "first_seen", key->first_seen_ms);
        if (key->accepted_at_ms)
            s_write_time (reply, "accepted_at", key->accepted_at_ms);
        if (key->replaces) {
            pw_str (reply, "replaces");
            pw_str (reply, key->replaces);
        }
        if (key->retired_at_ms)
            s_write_time (reply, "retired_at", key->retired_at_ms);
    }
    free (agents);
}

