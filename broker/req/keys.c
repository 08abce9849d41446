/*  =========================================================================
    req/keys - key.list key.accept key.reject key.delete (see req.h)
    =========================================================================
*/

//  Which key a key.* request means: by "key" (Z85) or by "node" (the key
//  bound to that node, else the one pending key that claims it, or the
//  one relay key whose relay goes by that name). Sets
//  *TEXT_P to the key text (borrowed from the request or the record).
//  Returns the record (NULL when the key has none), or writes an error into
//  REPLY and returns NULL with *TEXT_P NULL.
static auth_key_t *
s_key_target (auth_t *self, const proto_request_t *request, pw_t *reply,
              const char **text_p, char *buf)
{
    *text_p = NULL;
    const pv_t *key_value = pv_map_get (request->body, "key");
    const pv_t *node_value = pv_map_get (request->body, "node");
    if ((key_value != NULL) == (node_value != NULL)) {
        s_reply_error (reply, request->id, PROTO_ERR_BAD_REQUEST,
                       "%s: give exactly one of key (40 characters of Z85) "
                       "and node", request->type);
        return NULL;
    }
    if (key_value) {
        size_t len = 0;
        const char *text = pv_str (key_value, &len);
        if (len != KEYS_Z85_LEN) {
            s_reply_error (reply, request->id, PROTO_ERR_BAD_REQUEST,
                           "key: expected 40 characters of Z85");
            return NULL;
        }
        memcpy (buf, text, len);
        buf [len] = 0;
        if (!keys_z85_valid (buf)) {
            s_reply_error (reply, request->id, PROTO_ERR_BAD_REQUEST,
                           "key: expected 40 characters of Z85");
            return NULL;
        }
        *text_p = buf;
        return s_key_lookup (self, buf);
    }
    char *node = pv_strdup (node_value);
    if (!node || !name_valid (node)) {
        s_reply_error (reply, request->id, PROTO_ERR_BAD_REQUEST,
                       "node: expected a node id");
        free (node);
        return NULL;
    }
    auth_key_t *found = (auth_key_t *) zhashx_lookup (self->bound, node);
    size_t claims = 0;
    //  A relay's name is the one its heartbeats gave (relays.h)
    if (!found)
        for (auth_key_t *key = (auth_key_t *) zhashx_first (self->keys); key;
             key = (auth_key_t *) zhashx_next (self->keys))
            if ((key->status != AUTH_KEY_ACCEPTED && key->node
                 && strcmp (key->node, node) == 0)
                || (key->relay && key->hostname
                    && strcmp (key->hostname, node) == 0)) {
                claims++;
                found = key;
            }
    if (!found)
        s_reply_error (reply, request->id, PROTO_ERR_NOT_FOUND,
                       "no key speaks for node or relay %s (see gridcli key "
                       "list)", node);
    else
    if (claims > 1) {
        s_reply_error (reply, request->id, PROTO_ERR_CONFLICT,
                       "%zu keys claim the name %s: name the key itself (see "
                       "gridcli key list)", claims, node);
        found = NULL;
    }
    free (node);
    if (found)
        *text_p = found->key;
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

static void
s_key_accept (broker_t *broker, const proto_request_t *request, pw_t *reply)
{
    auth_t *self = broker->auth;
    char buf [KEYS_TEXT_SIZE];
    const char *text = NULL;
    auth_key_t *key = s_key_target (self, request, reply, &text, buf);
    if (!text)
        return;
    int64_t wall_ms = broker_wall_ms ();
    bool configured_relay = relays_config_find (&broker->config.relays,
                                                text) != NULL;
    if (s_client (self, text) || configured_relay) {
        //  A client key's role (a relay's enrolment) is in the config:
        //  accepting it only lifts a revocation
        if (key)
            s_key_forget (broker, key);
        s_log ("%s key %s may connect again",
               configured_relay ? "relay" : "client", text);
        s_reply_key (reply, request->id, text, "accepted", NULL);
        return;
    }
    if (!key) {
        //  Enrolled before its agent ever connects: bound at its first hello
        key = s_key_new (self, text, AUTH_KEY_PENDING, wall_ms);
    }
    if (key->status == AUTH_KEY_ACCEPTED) {
        s_reply_key (reply, request->id, key->key, "accepted", key->node);
        return;
    }
    auth_key_t *holder = key->node ? (auth_key_t *) zhashx_lookup (
                                         self->bound, key->node)
                                   : NULL;
    if (holder && holder != key) {
        s_reply_error (reply, request->id, PROTO_ERR_CONFLICT,
                       "node %s is bound to key %s: delete that key first "
                       "(gridcli key delete %s)", key->node, holder->key,
                       key->node);
        if (key->status == AUTH_KEY_PENDING && !key->first_seen_ms)
            s_key_forget (broker, key);
        return;
    }
    s_unindex (self, key);
    key->status = AUTH_KEY_ACCEPTED;
    key->accepted_at_ms = wall_ms;
    key->updated_at_ms = wall_ms;
    s_index (self, key);
    s_key_save (broker, key);
    if (key->relay)
        s_log ("relay key %s accepted (relay %s)", key->key,
               key->hostname ? key->hostname : "?");
    else
        s_log ("key %s accepted%s%s", key->key, key->node ? " for node " : "",
               key->node ? key->node : " (bound at its first hello)");
    s_reply_key (reply, request->id, key->key, "accepted", key->node);
}

static void
s_key_reject (broker_t *broker, const proto_request_t *request, pw_t *reply)
{
    auth_t *self = broker->auth;
    char buf [KEYS_TEXT_SIZE];
    const char *text = NULL;
    auth_key_t *key = s_key_target (self, request, reply, &text, buf);
    if (!text)
        return;
    int64_t wall_ms = broker_wall_ms ();
    if (!key)
        key = s_key_new (self, text, AUTH_KEY_REJECTED, wall_ms);
    bool was_bound = key->status == AUTH_KEY_ACCEPTED && key->node;
    s_unindex (self, key);
    key->status = AUTH_KEY_REJECTED;
    key->updated_at_ms = wall_ms;
    s_index (self, key);
    s_key_save (broker, key);
    s_log ("key %s rejected%s%s%s", key->key, key->node ? " (node " : "",
           key->node ? key->node : "", key->node ? ")" : "");
    if (was_bound)
        s_revoke_node (broker, key->node, "its key was rejected");
    s_reply_key (reply, request->id, key->key, "rejected", key->node);
}

static void
s_key_delete (broker_t *broker, const proto_request_t *request, pw_t *reply)
{
    auth_t *self = broker->auth;
    char buf [KEYS_TEXT_SIZE];
    const char *text = NULL;
    auth_key_t *key = s_key_target (self, request, reply, &text, buf);
    if (!text)
        return;
    if (!key) {
        s_reply_error (reply, request->id, PROTO_ERR_NOT_FOUND,
                       "no key %s in the key store", text);
        return;
    }
    char *node = key->node ? strdup (key->node) : NULL;
    bool was_bound = key->status == AUTH_KEY_ACCEPTED && node;
    char deleted [KEYS_TEXT_SIZE];
    snprintf (deleted, sizeof deleted, "%s", key->key);
    s_key_forget (broker, key);
    s_log ("key %s deleted%s%s%s", deleted, node ? " (node " : "",
           node ? node : "", node ? ")" : "");
    if (was_bound)
        s_revoke_node (broker, node, "its key was deleted");
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    pw_map (reply, node ? 3 : 2);
    pw_str (reply, "key");
    pw_str (reply, deleted);
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

static void
s_key_list (broker_t *broker, const proto_request_t *request, pw_t *reply)
{
    auth_t *self = broker->auth;
    size_t count = 0;
    auth_key_t **agents = (auth_key_t **) calloc (zhashx_size (self->keys) + 1,
                                                  sizeof (auth_key_t *));
    assert (agents);
    const relays_config_t *relays = &broker->config.relays;
    for (auth_key_t *key = (auth_key_t *) zhashx_first (self->keys); key;
         key = (auth_key_t *) zhashx_next (self->keys))
        if (!s_client (self, key->key)
            && !relays_config_find (relays, key->key))
            agents [count++] = key;
    qsort (agents, count, sizeof (auth_key_t *), s_compare_keys);
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    pw_map (reply, 1);
    pw_str (reply, "keys");
    pw_array (reply, self->config->client_count + relays->count + count);
    for (size_t index = 0; index < relays->count; index++) {
        const relays_entry_t *relay = &relays->entries [index];
        const auth_key_t *record = s_key_lookup (self, relay->key);
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
    for (size_t index = 0; index < self->config->client_count; index++) {
        const auth_client_t *client = &self->config->clients [index];
        const auth_key_t *record = s_key_lookup (self, client->key);
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
                           + (key->accepted_at_ms ? 1 : 0));
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
    }
    free (agents);
}

