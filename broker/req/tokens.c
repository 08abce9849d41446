/*  =========================================================================
    req/tokens - token.add token.list token.revoke (see req.h)
    =========================================================================
*/

//  ---------------------------------------------------------------------
//  Requests

static void
s_error (pw_t *reply, const char *id, const char *code, const char *format,
         ...) __attribute__ ((format (printf, 4, 5)));

static void
s_error (pw_t *reply, const char *id, const char *code, const char *format,
         ...)
{
    char message [512];
    va_list args;
    va_start (args, format);
    vsnprintf (message, sizeof message, format, args);
    va_end (args);
    pw_reset (reply);
    proto_reply_error (reply, id, code, message, NULL, 0);
}

static void
s_write_time (pw_t *writer, const char *key, int64_t wall_ms)
{
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    pw_str (writer, key);
    pw_str (writer, text);
}

//  The request's string field KEY (caller frees), or NULL.
static char *
s_field (const proto_request_t *request, const char *key)
{
    return pv_strdup (pv_map_get (request->body, key));
}

static void
s_token_add (broker_t *broker, token_store_t *self,
             const proto_request_t *request, pw_t *reply)
{
    char *name = s_field (request, "name");
    char *role_text = s_field (request, "role");
    auth_role_t role = role_text ? auth_role_parse (role_text) : AUTH_ROLE_NONE;
    uint8_t random [32];
    store_txn_t *txn = NULL;
    if (!name || !name_valid (name))
        s_error (reply, request->id, PROTO_ERR_BAD_REQUEST,
                 "name: expected 1 to 64 of A-Z a-z 0-9 _ -");
    else
    if (role == AUTH_ROLE_NONE)
        s_error (reply, request->id, PROTO_ERR_BAD_REQUEST,
                 "role: expected viewer, operator or admin");
    else
    if (zhashx_lookup (self->by_name, name))
        s_error (reply, request->id, PROTO_ERR_CONFLICT,
                 "a token named '%s' exists: revoke it first, or choose "
                 "another name", name);
    else
    if (zhashx_size (self->by_name) >= TOKEN_MAX)
        s_error (reply, request->id, PROTO_ERR_CONFLICT,
                 "the broker holds %d tokens, its most: revoke some first",
                 TOKEN_MAX);
    else
    if (getrandom (random, sizeof random, 0) != (ssize_t) sizeof random)
        s_error (reply, request->id, PROTO_ERR_INTERNAL,
                 "no random bytes for a token: %s", strerror (errno));
    else
    if (!(txn = broker_txn (broker)))
        s_error (reply, request->id, PROTO_ERR_STORE,
                 "the store cannot be written");
    else {
        char text [TOKEN_TEXT_LEN + 1];
        memcpy (text, TOKEN_PREFIX, 5);
        s_hex (random, sizeof random, text + 5);
        s_token_t *token = (s_token_t *) zmalloc (sizeof (s_token_t));
        token->name = strdup (name);
        token->role = role;
        token->created_ms = broker_wall_ms ();
        int rc = token_hash (text, TOKEN_TEXT_LEN, token->hash);
        if (rc == 0) {
            pw_reset (broker->scratch);
            s_encode (token, broker->scratch);
            rc = store_put (txn, STORE_DB_TOKENS, name, strlen (name),
                            pw_data (broker->scratch),
                            pw_size (broker->scratch));
        }
        if (rc != 0) {
            s_error (reply, request->id, PROTO_ERR_STORE,
                     "the token cannot be stored: %s", store_strerror (rc));
            free (token->name);
            free (token);
        }
        else {
            s_add (self, token);
            pw_reset (reply);
            proto_reply_ok_begin (reply, request->id);
            pw_map (reply, 4);
            pw_str (reply, "name");
            pw_str (reply, name);
            pw_str (reply, "role");
            pw_str (reply, auth_role_name (role));
            pw_str (reply, "token");
            pw_str (reply, text);
            s_write_time (reply, "created", token->created_ms);
            log_info ("token '%s' (%s) added", name, auth_role_name (role));
        }
        explicit_bzero (text, sizeof text);
    }
    explicit_bzero (random, sizeof random);
    free (name);
    free (role_text);
}

static int
s_compare_names (const void *a, const void *b)
{
    return strcmp ((*(s_token_t *const *) a)->name,
                   (*(s_token_t *const *) b)->name);
}

static void
s_token_list (token_store_t *self, const proto_request_t *request,
              pw_t *reply)
{
    size_t count = zhashx_size (self->by_name);
    s_token_t **tokens = (s_token_t **) calloc (count + 1, sizeof (s_token_t *));
    assert (tokens);
    size_t index = 0;
    for (s_token_t *token = (s_token_t *) zhashx_first (self->by_name); token;
         token = (s_token_t *) zhashx_next (self->by_name))
        tokens [index++] = token;
    qsort (tokens, count, sizeof (s_token_t *), s_compare_names);
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    pw_map (reply, 1);
    pw_str (reply, "tokens");
    pw_array (reply, count);
    for (index = 0; index < count; index++) {
        const s_token_t *token = tokens [index];
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

static void
s_token_revoke (broker_t *broker, token_store_t *self,
                const proto_request_t *request, pw_t *reply)
{
    char *name = s_field (request, "name");
    s_token_t *token = name ? (s_token_t *) zhashx_lookup (self->by_name, name)
                            : NULL;
    store_txn_t *txn = NULL;
    if (!token)
        s_error (reply, request->id, PROTO_ERR_NOT_FOUND, "no token '%s'",
                 name ? name : "");
    else
    if (!(txn = broker_txn (broker)))
        s_error (reply, request->id, PROTO_ERR_STORE,
                 "the store cannot be written");
    else {
        int rc = store_del (txn, STORE_DB_TOKENS, name, strlen (name));
        if (rc != 0 && rc != STORE_ENOTFOUND)
            s_error (reply, request->id, PROTO_ERR_STORE,
                     "the token cannot be removed: %s", store_strerror (rc));
        else {
            zhashx_delete (self->by_hash, token->hash_hex);
            zhashx_delete (self->by_name, name);
            pw_reset (reply);
            proto_reply_ok_begin (reply, request->id);
            pw_map (reply, 2);
            pw_str (reply, "name");
            pw_str (reply, name);
            pw_str (reply, "revoked");
            pw_bool (reply, true);
            log_info ("token '%s' revoked", name);
        }
    }
    free (name);
}

bool
token_handle (broker_t *broker, token_store_t *self,
              const proto_request_t *request, pw_t *reply)
{
    if (strcmp (request->type, "token.add") == 0)
        s_token_add (broker, self, request, reply);
    else
    if (strcmp (request->type, "token.list") == 0)
        s_token_list (self, request, reply);
    else
    if (strcmp (request->type, "token.revoke") == 0)
        s_token_revoke (broker, self, request, reply);
    else
        return false;
    return true;
}
