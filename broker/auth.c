/*  =========================================================================
    auth - the broker's security (see auth.h)

    Agent keys, by what the broker hears (hello is the only way in). The
    columns are the node the hello names: free, bound to this key, bound
    to another key.

        key               free              this key     another key
        unknown           pending (accepted -            refused, counted
                          with auto_accept)
        pending           stays pending     -            refused, counted
        accepted, unbound binds the node    -            refused, counted
        accepted, bound   refused, counted  welcome      refused, counted
        rejected          refused           refused      refused
        retired           refused           -            refused
        next (accepted)   -                 -            the key it
                                                         replaces: the
                                                         node switches
                                                         to it; another:
                                                         refused, counted
        pending next      refused (pending, not counted)

    Any other agent message passes only from an accepted key bound to the
    node it names. key.accept / key.reject / key.delete move keys between
    these rows; rejecting or deleting a bound key takes its node offline
    (the handler's business: req/keys.c).
    =========================================================================
*/
#include "auth.h"

#include <stdarg.h>

#include "../proto/conf.h"
#include "../proto/log.h"
#include "../proto/names.h"
#include "token.h"

#define S_ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define S_BATCH 256                  //  Messages read per wake-up
#define S_LOG_EVERY_MS 60000         //  One log line per key and minute
#define S_LOGGED_MAX 4096            //  Keys remembered for that

struct _auth_t {
    const auth_config_t *config; //  Borrowed from the broker's config
    zcert_t *cert;               //  The broker's key pair (secure mode)
    zsock_t *zap;                //  ZAP handler (REP), secure mode
    zhashx_t *keys;              //  Z85 -> auth_key_t (owned)
    zhashx_t *bound;             //  Node id -> its accepted key (borrowed)
    size_t pending;              //  Keys waiting for acceptance
    size_t refused;              //  Refused claims kept for key.list
    zhashx_t *logged;            //  Key -> wall ms of its last refusal log line
    auth_counters_t counters;    //  Refusals
    token_store_t *tokens;       //  HTTP bearer tokens
    pw_t *scratch;               //  Encoding buffer for key records
    zhashx_t *replication;       //  Z85 keys of the cluster's members
    auth_refused_fn *on_refused; //  Told of refused client handshakes
    void *on_refused_arg;        //  ...with this
    auth_key_t *retired;         //  Retired by the last check, until taken
};

static void
s_log (const char *format, ...) __attribute__ ((format (printf, 1, 2)));

//  Security events: a line that starts "WARNING" is a warning, the rest
//  info (log.h).
static void
s_log (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    log_writev (strncmp (format, "WARNING", 7) == 0 ? LOG_LEVEL_WARN
                                                  : LOG_LEVEL_INFO,
                NULL, format, args);
    va_end (args);
}

//  The same about node NODE (a hello's, or the node a message claims).
static void
s_log_node (const char *node, const char *format, ...)
    __attribute__ ((format (printf, 2, 3)));

static void
s_log_node (const char *node, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    log_writev (strncmp (format, "WARNING", 7) == 0 ? LOG_LEVEL_WARN
                                                  : LOG_LEVEL_INFO,
                &(log_ctx_t) {NULL, node, NULL, NULL}, format, args);
    va_end (args);
}

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  The first 8 characters of a key, for sentences (the whole key is in
//  gridcli key list).
static const char *
s_short (const char *key, char *buf)
{
    snprintf (buf, 12, "%.8s...", key ? key : "?");
    return buf;
}

//  ---------------------------------------------------------------------
//  Configuration

void
auth_config_defaults (auth_config_t *config)
{
    memset (config, 0, sizeof *config);
    config->key_file = strdup (KEYS_DEFAULT_BROKER_KEY);
    config->max_pending_keys = AUTH_DEFAULT_MAX_PENDING_KEYS;
}

void
auth_config_clear (auth_config_t *config)
{
    free (config->key_file);
    for (size_t index = 0; index < config->client_count; index++)
        free (config->clients [index].name);
    free (config->clients);
    for (size_t index = 0; index < config->allow_count; index++)
        free (config->allow [index]);
    free (config->allow);
    memset (config, 0, sizeof *config);
}

void
auth_config_copy (auth_config_t *dest, const auth_config_t *src)
{
    *dest = *src;
    dest->key_file = src->key_file ? strdup (src->key_file) : NULL;
    dest->clients = NULL;
    if (src->client_count) {
        dest->clients = (auth_client_t *) calloc (src->client_count,
                                                  sizeof (auth_client_t));
        assert (dest->clients);
        for (size_t index = 0; index < src->client_count; index++) {
            dest->clients [index] = src->clients [index];
            if (src->clients [index].name)
                dest->clients [index].name = strdup (src->clients [index].name);
        }
    }
    dest->allow = NULL;
    if (src->allow_count) {
        dest->allow = (char **) calloc (src->allow_count, sizeof (char *));
        assert (dest->allow);
        for (size_t index = 0; index < src->allow_count; index++)
            dest->allow [index] = strdup (src->allow [index]);
    }
}

const char *
auth_key_status_name (auth_key_status_t status)
{
    switch (status) {
        case AUTH_KEY_ACCEPTED: return "accepted";
        case AUTH_KEY_REJECTED: return "rejected";
        case AUTH_KEY_REFUSED: return "refused";
        case AUTH_KEY_NEXT: return "next";
        case AUTH_KEY_RETIRED: return "retired";
        default: return "pending";
    }
}

static int
s_add_client (auth_config_t *config, const char *key_text, const char *role,
              const char *name, char *err, size_t err_len)
{
    auth_role_t parsed = auth_role_parse (role);
    if (parsed == AUTH_ROLE_NONE) {
        s_err (err, err_len, "role '%s' is not viewer, operator or admin",
               role ? role : "");
        return -1;
    }
    char key [KEYS_TEXT_SIZE];
    char why [512];
    if (keys_read_public (key_text, key, why, sizeof why) != 0) {
        s_err (err, err_len, "%s", why);
        return -1;
    }
    for (size_t index = 0; index < config->client_count; index++)
        if (strcmp (config->clients [index].key, key) == 0) {
            s_err (err, err_len, "key %s is listed twice", key);
            return -1;
        }
    auth_client_t *clients = (auth_client_t *) realloc (
        config->clients, (config->client_count + 1) * sizeof (auth_client_t));
    assert (clients);
    config->clients = clients;
    auth_client_t *client = &clients [config->client_count++];
    memset (client, 0, sizeof *client);
    snprintf (client->key, sizeof client->key, "%s", key);
    client->role = parsed;
    client->name = name ? strdup (name) : NULL;
    return 0;
}

//  One item of clients: (conf_get_string_maps): key, role, name.
static int
s_client_item (void *arg, char **values, char *why, size_t why_len)
{
    return s_add_client ((auth_config_t *) arg, values [0], values [1],
                         values [2], why, why_len);
}

int
auth_config_add_client (auth_config_t *config, const char *text, char *err,
                        size_t err_len)
{
    const char *colon = strchr (text, ':');
    if (!colon) {
        s_err (err, err_len, "--client-key '%s': expected ROLE:KEY, e.g. "
               "admin:/etc/grid/keys/alice.key", text);
        return -1;
    }
    char role [32];
    snprintf (role, sizeof role, "%.*s", (int) (colon - text), text);
    char why [600];
    if (s_add_client (config, colon + 1, role, NULL, why, sizeof why) != 0) {
        s_err (err, err_len, "--client-key: %s", why);
        return -1;
    }
    return 0;
}

//  Checks one allowlist item: "backend.action" or "backend.*".
static bool
s_allow_item_valid (const char *item)
{
    const char *dot = strchr (item, '.');
    if (!dot || dot == item || strlen (item) > 2 * NAME_MAX_LEN + 1)
        return false;
    char backend [NAME_MAX_LEN + 1];
    snprintf (backend, sizeof backend, "%.*s", (int) (dot - item), item);
    return name_valid (backend)
           && (strcmp (dot + 1, "*") == 0 || name_valid (dot + 1));
}

static void
s_allow_clear (auth_config_t *config)
{
    for (size_t index = 0; index < config->allow_count; index++)
        free (config->allow [index]);
    free (config->allow);
    config->allow = NULL;
    config->allow_count = 0;
}

static int
s_allow_add (auth_config_t *config, const char *item, char *err,
             size_t err_len)
{
    if (!s_allow_item_valid (item)) {
        char show [NAME_SHOW_LEN];
        s_err (err, err_len, "'%s' is not backend.action or backend.*",
               name_show (item, strlen (item), show, sizeof show));
        return -1;
    }
    char **allow = (char **) realloc (config->allow, (config->allow_count + 1)
                                                         * sizeof (char *));
    assert (allow);
    config->allow = allow;
    allow [config->allow_count++] = strdup (item);
    return 0;
}

int
auth_config_set_allow (auth_config_t *config, const char *text, char *err,
                       size_t err_len)
{
    s_allow_clear (config);
    const char *cursor = text;
    while (cursor && *cursor) {
        const char *comma = strchr (cursor, ',');
        size_t len = comma ? (size_t) (comma - cursor) : strlen (cursor);
        char item [2 * NAME_MAX_LEN + 8];
        if (len == 0 || len >= sizeof item) {
            s_err (err, err_len, "--allow: expected backend.action items "
                   "separated by commas");
            return -1;
        }
        snprintf (item, sizeof item, "%.*s", (int) len, cursor);
        char why [256];
        if (s_allow_add (config, item, why, sizeof why) != 0) {
            s_err (err, err_len, "--allow: %s", why);
            return -1;
        }
        cursor = comma ? comma + 1 : NULL;
    }
    return 0;
}

int
auth_config_load (auth_config_t *config, const pv_t *root, char *err,
                  size_t err_len)
{
    int64_t max_pending = (int64_t) config->max_pending_keys;
    char *rekey = NULL;
    if (conf_get_str (root, "rekey", &rekey, err, err_len))
        return -1;
    if (rekey) {
        bool manual = streq (rekey, "manual");
        if (!manual && !streq (rekey, "auto")) {
            s_err (err, err_len, "rekey: expected auto or manual, not '%s'",
                   rekey);
            free (rekey);
            return -1;
        }
        config->rekey = manual ? AUTH_REKEY_MANUAL : AUTH_REKEY_AUTO;
        free (rekey);
    }
    if (conf_get_str (root, "key", &config->key_file, err, err_len)
        || conf_get_bool (root, "insecure", &config->insecure, err, err_len)
        || conf_get_bool (root, "auto_accept", &config->auto_accept, err,
                          err_len)
        || conf_get_int (root, "max_pending_keys", &max_pending, err,
                         err_len))
        return -1;
    if (max_pending < 0 || max_pending > 100000000) {
        s_err (err, err_len, "max_pending_keys: expected 0 to 100000000");
        return -1;
    }
    config->max_pending_keys = (size_t) max_pending;
    static const char *const client_fields [] = {"key", "role", "name",
                                                  NULL};
    if (conf_get_string_maps (pv_map_get (root, "clients"), "clients",
                              client_fields, 2, s_client_item, config, err,
                              err_len) != 0)
        return -1;
    const pv_t *allow = pv_map_get (root, "allow");
    if (allow) {
        if (pv_type (allow) != PV_ARRAY) {
            s_err (err, err_len, "allow: expected a list of backend.action "
                   "or backend.*");
            return -1;
        }
        s_allow_clear (config);
        for (size_t index = 0; index < pv_size (allow); index++) {
            char *item = pv_strdup (pv_array_at (allow, index));
            char why [256];
            int rc = item ? s_allow_add (config, item, why, sizeof why) : -1;
            if (!item)
                snprintf (why, sizeof why, "expected a string");
            free (item);
            if (rc != 0) {
                s_err (err, err_len, "allow[%zu]: %s", index, why);
                return -1;
            }
        }
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  Pure rules

bool
auth_allowed (const auth_config_t *config, const char *backend,
              const char *action)
{
    if (config->allow_count == 0)
        return true;
    size_t backend_len = strlen (backend);
    for (size_t index = 0; index < config->allow_count; index++) {
        const char *item = config->allow [index];
        if (strncmp (item, backend, backend_len) != 0
            || item [backend_len] != '.')
            continue;
        const char *rest = item + backend_len + 1;
        if (strcmp (rest, "*") == 0 || strcmp (rest, action) == 0)
            return true;
    }
    return false;
}

static bool
s_topic_is (const char *topic, size_t len, const char *want)
{
    return strlen (want) == len && memcmp (topic, want, len) == 0;
}

bool
auth_topic_allowed (const char *node_id, const registry_node_t *node,
                    const char *topic, size_t len)
{
    char want [1024];
    if (s_topic_is (topic, len, "all/"))
        return true;
    snprintf (want, sizeof want, "node/%s/", node_id);
    if (s_topic_is (topic, len, want))
        return true;
    const proto_msg_t *hello = node ? node->hello : NULL;
    if (!hello)
        return false;
    for (size_t index = 0; index < hello->group_count; index++) {
        snprintf (want, sizeof want, "group/%s/", hello->groups [index]);
        if (s_topic_is (topic, len, want))
            return true;
    }
    for (size_t index = 0; index < hello->label_count; index++) {
        //  Every prefix of the dotted value, as the agent subscribes
        const char *value = hello->labels [index].value;
        for (const char *dot = value; dot;) {
            dot = strchr (dot, '.');
            size_t prefix = dot ? (size_t) (dot - value) : strlen (value);
            snprintf (want, sizeof want, "label/%s/%.*s/",
                      hello->labels [index].key, (int) prefix, value);
            if (s_topic_is (topic, len, want))
                return true;
            if (dot)
                dot++;
        }
    }
    return false;
}

void
auth_key_encode (const auth_key_t *key, pw_t *writer)
{
    pw_map (writer, 4 + (key->node ? 1 : 0) + (key->hostname ? 1 : 0)
                    + (key->pool ? 1 : 0) + (key->relay ? 1 : 0)
                    + (key->replaces ? 1 : 0) + (key->retired_at_ms ? 1 : 0));
    pw_str (writer, "status");
    pw_str (writer, auth_key_status_name (key->status));
    if (key->node) {
        pw_str (writer, "node");
        pw_str (writer, key->node);
    }
    if (key->hostname) {
        pw_str (writer, "hostname");
        pw_str (writer, key->hostname);
    }
    if (key->pool) {
        pw_str (writer, "pool");
        pw_str (writer, key->pool);
    }
    if (key->relay) {
        pw_str (writer, "kind");
        pw_str (writer, "relay");
    }
    if (key->replaces) {
        pw_str (writer, "replaces");
        pw_str (writer, key->replaces);
    }
    if (key->retired_at_ms) {
        pw_str (writer, "retired_at_ms");
        pw_int (writer, key->retired_at_ms);
    }
    pw_str (writer, "first_seen_ms");
    pw_int (writer, key->first_seen_ms);
    pw_str (writer, "accepted_at_ms");
    pw_int (writer, key->accepted_at_ms);
    pw_str (writer, "updated_at_ms");
    pw_int (writer, key->updated_at_ms);
}

int
auth_key_decode (const pv_t *record, auth_key_t *key)
{
    if (pv_type (record) != PV_MAP)
        return -1;
    const pv_t *status = pv_map_get (record, "status");
    if (pv_str_eq (status, "pending"))
        key->status = AUTH_KEY_PENDING;
    else
    if (pv_str_eq (status, "accepted"))
        key->status = AUTH_KEY_ACCEPTED;
    else
    if (pv_str_eq (status, "rejected"))
        key->status = AUTH_KEY_REJECTED;
    else
    if (pv_str_eq (status, "next"))
        key->status = AUTH_KEY_NEXT;
    else
    if (pv_str_eq (status, "retired"))
        key->status = AUTH_KEY_RETIRED;
    else
        return -1;
    const pv_t *node = pv_map_get (record, "node");
    const pv_t *hostname = pv_map_get (record, "hostname");
    char *node_text = node ? pv_strdup (node) : NULL;
    if (node && (!node_text || !name_valid (node_text))) {
        free (node_text);
        return -1;
    }
    char *host_text = hostname && pv_size (hostname) <= PROTO_MAX_TEXT
                          ? pv_strdup (hostname) : NULL;
    const pv_t *pool = pv_map_get (record, "pool");
    char *pool_text = pool ? pv_strdup (pool) : NULL;
    if (pool && (!pool_text || !name_valid (pool_text))) {
        free (node_text);
        free (host_text);
        free (pool_text);
        return -1;
    }
    const pv_t *replaces = pv_map_get (record, "replaces");
    char *replaces_text = replaces ? pv_strdup (replaces) : NULL;
    if (replaces && (!replaces_text || !keys_z85_valid (replaces_text))) {
        free (node_text);
        free (host_text);
        free (pool_text);
        free (replaces_text);
        return -1;
    }
    key->node = node_text;
    key->hostname = host_text;
    key->pool = pool_text;
    key->replaces = replaces_text;
    key->relay = pv_str_eq (pv_map_get (record, "kind"), "relay");
    int64_t value = 0;
    if (pv_get_int (pv_map_get (record, "first_seen_ms"), &value) == 0)
        key->first_seen_ms = value;
    if (pv_get_int (pv_map_get (record, "accepted_at_ms"), &value) == 0)
        key->accepted_at_ms = value;
    if (pv_get_int (pv_map_get (record, "updated_at_ms"), &value) == 0)
        key->updated_at_ms = value;
    if (pv_get_int (pv_map_get (record, "retired_at_ms"), &value) == 0)
        key->retired_at_ms = value;
    return 0;
}

//  ---------------------------------------------------------------------
//  The key table

static void
s_key_destroy (void **item_p)
{
    auth_key_t *key = (auth_key_t *) *item_p;
    if (key) {
        free (key->node);
        free (key->hostname);
        free (key->pool);
        free (key->replaces);
        free (key);
        *item_p = NULL;
    }
}

//  Takes KEY out of the indexes (bound nodes, pending count) before a
//  change; s_index puts it back after.
static void
s_unindex (auth_t *self, auth_key_t *key)
{
    if (key->status == AUTH_KEY_PENDING && self->pending > 0)
        self->pending--;
    if (key->status == AUTH_KEY_REFUSED && self->refused > 0)
        self->refused--;
    if (key->status == AUTH_KEY_ACCEPTED && key->node
        && zhashx_lookup (self->bound, key->node) == key)
        zhashx_delete (self->bound, key->node);
}

static void
s_index (auth_t *self, auth_key_t *key)
{
    if (key->status == AUTH_KEY_PENDING)
        self->pending++;
    if (key->status == AUTH_KEY_REFUSED)
        self->refused++;
    if (key->status == AUTH_KEY_ACCEPTED && key->node)
        zhashx_update (self->bound, key->node, key);
}

static auth_key_t *
s_key_lookup (auth_t *self, const char *key)
{
    return key ? (auth_key_t *) zhashx_lookup (self->keys, key) : NULL;
}

static auth_key_t *
s_key_new (auth_t *self, const char *text, auth_key_status_t status,
           int64_t wall_ms)
{
    auth_key_t *key = (auth_key_t *) zmalloc (sizeof (auth_key_t));
    snprintf (key->key, sizeof key->key, "%s", text);
    key->status = status;
    key->updated_at_ms = wall_ms;
    zhashx_insert (self->keys, key->key, key);
    s_index (self, key);
    return key;
}

static void
s_set_text (char **field, const char *value)
{
    free (*field);
    *field = value ? strdup (value) : NULL;
}

void
auth_key_save (auth_t *self, store_txn_t *txn, const auth_key_t *key)
{
    if (!txn)
        return;
    pw_reset (self->scratch);
    auth_key_encode (key, self->scratch);
    int rc = store_put (txn, STORE_DB_KEYS, key->key, strlen (key->key),
                        pw_data (self->scratch), pw_size (self->scratch));
    if (rc != 0)
        s_log ("store: cannot save a key: %s", store_strerror (rc));
}

static void
s_key_forget (auth_t *self, store_txn_t *txn, auth_key_t *key)
{
    if (txn) {
        int rc = store_del (txn, STORE_DB_KEYS, key->key, strlen (key->key));
        if (rc != 0 && rc != STORE_ENOTFOUND)
            s_log ("store: cannot delete a key: %s", store_strerror (rc));
    }
    if (self->retired == key)
        self->retired = NULL;
    s_unindex (self, key);
    zhashx_delete (self->keys, key->key);
}

static int
s_load (auth_t *self, store_t *store, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (store, false);
    if (!txn) {
        s_err (err, err_len, "cannot read the key store: %s",
               store_last_error (store));
        return -1;
    }
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_KEYS);
    const void *k, *v;
    size_t k_len, v_len, broken = 0;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v,
                                         &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        char text [KEYS_TEXT_SIZE] = "";
        if (k_len == KEYS_Z85_LEN)
            memcpy (text, k, k_len);
        pv_doc_t *doc = NULL;
        auth_key_t record;
        memset (&record, 0, sizeof record);
        if (keys_z85_valid (text) && !zhashx_lookup (self->keys, text)
            && pv_doc_decode (v, v_len, &doc, NULL, 0) == 0
            && auth_key_decode (pv_doc_root (doc), &record) == 0) {
            auth_key_t *key = s_key_new (self, text, record.status, 0);
            s_unindex (self, key);
            key->node = record.node;
            key->hostname = record.hostname;
            key->pool = record.pool;
            key->replaces = record.replaces;
            key->retired_at_ms = record.retired_at_ms;
            key->relay = record.relay;
            key->first_seen_ms = record.first_seen_ms;
            key->accepted_at_ms = record.accepted_at_ms;
            key->updated_at_ms = record.updated_at_ms;
            //  Two accepted keys never hold one node; should the store
            //  say otherwise, the first keeps it.
            if (key->status == AUTH_KEY_ACCEPTED && key->node
                && zhashx_lookup (self->bound, key->node)) {
                s_set_text (&key->node, NULL);
                broken++;
            }
            s_index (self, key);
        }
        else
            broken++;
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    store_abort (&txn);
    if (broken)
        s_log ("the key store holds %zu unreadable record%s (ignored)", broken,
               broken == 1 ? "" : "s");
    return 0;
}

int
auth_reload (auth_t *self, store_t *store)
{
    zhashx_t *keys = self->keys, *bound = self->bound;
    size_t pending = self->pending;
    self->keys = zhashx_new ();
    zhashx_set_destructor (self->keys, s_key_destroy);
    self->bound = zhashx_new ();
    self->pending = 0;
    self->retired = NULL;
    char err [256];
    int rc = 0;
    if (s_load (self, store, err, sizeof err) == 0) {
        zhashx_destroy (&bound);
        zhashx_destroy (&keys);
    }
    else {
        //  Nothing could be read: the keys stay as they were
        s_log ("store: %s", err);
        zhashx_destroy (&self->keys);
        zhashx_destroy (&self->bound);
        self->keys = keys;
        self->bound = bound;
        self->pending = pending;
        rc = -1;
    }
    if (self->tokens && token_store_reload (self->tokens, store) != 0)
        rc = -1;
    return rc;
}

//  ---------------------------------------------------------------------
//  Life cycle

auth_t *
auth_new (const auth_config_t *config, store_t *store, char *err,
          size_t err_len)
{
    auth_t *self = (auth_t *) zmalloc (sizeof (auth_t));
    self->config = config;
    self->keys = zhashx_new ();
    zhashx_set_destructor (self->keys, s_key_destroy);
    self->bound = zhashx_new ();
    self->logged = zhashx_new ();
    zhashx_set_destructor (self->logged, (zhashx_destructor_fn *) zstr_free);
    self->scratch = pw_new ();
    if (!config->insecure) {
        char why [1024];
        const char *file = config->key_file ? config->key_file
                                            : KEYS_DEFAULT_BROKER_KEY;
        self->cert = keys_load_pair (file, why, sizeof why);
        if (!self->cert) {
            s_err (err, err_len, "no usable broker key: %s\n"
                   "  create one with: gridbroker keygen --out %s\n"
                   "  or pass --key FILE; to serve plaintext on a trusted "
                   "network only, pass --insecure", why,
                   KEYS_DEFAULT_DIR);
            auth_destroy (&self);
            return NULL;
        }
        //  The handler must exist before any CURVE socket binds. A
        //  handler of this process closed a moment ago (a cluster member
        //  that changes role) may hold the name until libzmq's reaper
        //  ends its socket: a few tries over a second
        self->zap = zsock_new (ZMQ_REP);
        int bound = self->zap ? zsock_bind (self->zap, S_ZAP_ENDPOINT) : -1;
        for (int tries = 0; self->zap && bound != 0
                            && zmq_errno () == EADDRINUSE && tries < 100;
             tries++) {
            zclock_sleep (10);
            bound = zsock_bind (self->zap, S_ZAP_ENDPOINT);
        }
        if (bound != 0) {
            s_err (err, err_len, "cannot start the ZAP handler on %s: %s "
                   "(is another one running in this process?)",
                   S_ZAP_ENDPOINT, zmq_strerror (zmq_errno ()));
            auth_destroy (&self);
            return NULL;
        }
    }
    if (s_load (self, store, err, err_len) != 0) {
        auth_destroy (&self);
        return NULL;
    }
    self->tokens = token_store_new (store, err, err_len);
    if (!self->tokens) {
        auth_destroy (&self);
        return NULL;
    }
    return self;
}

void
auth_destroy (auth_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    auth_t *self = *self_p;
    //  Unbound at once (a close frees the name only when libzmq's reaper
    //  gets to it), so that a new handler can take it
    if (self->zap)
        zsock_unbind (self->zap, S_ZAP_ENDPOINT);
    zsock_destroy (&self->zap);
    zcert_destroy (&self->cert);
    zhashx_destroy (&self->bound);
    zhashx_destroy (&self->keys);
    zhashx_destroy (&self->logged);
    zhashx_destroy (&self->replication);
    token_store_destroy (&self->tokens);
    pw_destroy (&self->scratch);
    free (self);
    *self_p = NULL;
}

int
auth_secure_socket (auth_t *self, zsock_t *sock, const char *domain,
                    char *err, size_t err_len)
{
    if (streq (domain, KEYS_DOMAIN_COMMANDS))
        zsock_set_xpub_manual (sock, 1);
    if (self->config->insecure)
        return 0;
    return keys_curve_server (sock, self->cert, domain, err, err_len);
}

const auth_counters_t *
auth_counters (const auth_t *self)
{
    return &self->counters;
}

void
auth_write_counters (const auth_t *self, pw_t *writer)
{
    pw_str (writer, "refused_handshakes");
    pw_int (writer, (int64_t) self->counters.refused_handshakes);
    pw_str (writer, "unauthorized");
    pw_int (writer, (int64_t) self->counters.unauthorized);
    pw_str (writer, "impersonation");
    pw_int (writer, (int64_t) self->counters.impersonation);
    pw_str (writer, "forbidden");
    pw_int (writer, (int64_t) self->counters.forbidden);
    pw_str (writer, "refused_topics");
    pw_int (writer, (int64_t) self->counters.refused_topics);
    pw_str (writer, "http_unauthorized");
    pw_int (writer, (int64_t) self->counters.http_unauthorized);
    pw_str (writer, "http_forbidden");
    pw_int (writer, (int64_t) self->counters.http_forbidden);
}

token_store_t *
auth_tokens (auth_t *self)
{
    return self->tokens;
}

const auth_key_t *
auth_key (auth_t *self, const char *key)
{
    return s_key_lookup (self, key);
}

//  True when a refusal about KEY may be logged now: one line per key and
//  minute, so that a peer retrying in a loop cannot flood the log.
static bool
s_may_log (auth_t *self, const char *key)
{
    int64_t now_ms = zclock_mono ();
    char *last = (char *) zhashx_lookup (self->logged, key ? key : "-");
    if (last && now_ms - atoll (last) < S_LOG_EVERY_MS)
        return false;
    if (zhashx_size (self->logged) >= S_LOGGED_MAX)
        zhashx_purge (self->logged);
    zhashx_update (self->logged, key ? key : "-",
                   zsys_sprintf ("%lld", (long long) now_ms));
    return true;
}

static const auth_client_t *
s_client (const auth_t *self, const char *key)
{
    for (size_t index = 0; key && index < self->config->client_count; index++)
        if (strcmp (self->config->clients [index].key, key) == 0)
            return &self->config->clients [index];
    return NULL;
}

bool
auth_is_client (const auth_t *self, const char *key)
{
    return s_client (self, key) != NULL;
}

const auth_key_t *
auth_relay_seen (auth_t *self, const char *text, const char *name,
                 int64_t wall_ms, bool *changed_p)
{
    *changed_p = false;
    auth_key_t *key = s_key_lookup (self, text);
    if (key && !key->relay)
        //  Known as an agent's key (or rejected ahead of time): a relay
        //  key is enrolled as one from the start
        return key->status == AUTH_KEY_REJECTED && !key->node ? key : NULL;
    if (!key) {
        if (self->pending >= self->config->max_pending_keys)
            return NULL;
        key = s_key_new (self, text, AUTH_KEY_PENDING, wall_ms);
        key->relay = true;
        key->first_seen_ms = wall_ms;
        s_set_text (&key->hostname, name);
        *changed_p = true;
        s_log ("relay key %s (relay %s) waits for acceptance: gridcli key "
               "accept '%s'", text, name, text);
    }
    else
    if (!key->hostname || strcmp (key->hostname, name) != 0) {
        s_set_text (&key->hostname, name);
        key->updated_at_ms = wall_ms;
        *changed_p = true;
    }
    return key;
}

//  ---------------------------------------------------------------------
//  ZAP handler (RFC 27)

static void
s_zap_reply (zsock_t *zap, zframe_t *request_id, const char *status,
             const char *text, const char *user)
{
    zmsg_t *reply = zmsg_new ();
    zmsg_addstr (reply, "1.0");
    if (request_id)
        zmsg_addmem (reply, zframe_data (request_id), zframe_size (request_id));
    else
        zmsg_addmem (reply, "", 0);
    zmsg_addstr (reply, status);
    zmsg_addstr (reply, text);
    zmsg_addstr (reply, user);
    zmsg_addmem (reply, "", 0);
    zmsg_send (&reply, zap);
}

//  Decides one handshake: returns NULL to let KEY in on DOMAIN, else why
//  not.
static const char *
s_zap_verdict (auth_t *self, const char *domain, const char *key)
{
    const auth_key_t *record = s_key_lookup (self, key);
    if (record && record->status == AUTH_KEY_REJECTED)
        return "the key was rejected";
    if (record && record->status == AUTH_KEY_RETIRED)
        return "the key was retired: its node switched to a newer key";
    if (streq (domain, KEYS_DOMAIN_CLIENTS))
        return s_client (self, key) ? NULL
                                    : "the key has no client role";
    if (streq (domain, KEYS_DOMAIN_AGENTS)
        || streq (domain, KEYS_DOMAIN_COMMANDS)) {
        if (!record && self->pending >= self->config->max_pending_keys
            && !self->config->auto_accept)
            return "too many keys wait for acceptance";
        return NULL;
    }
    if (streq (domain, KEYS_DOMAIN_REPLICATION))
        return self->replication && zhashx_lookup (self->replication, key)
                   ? NULL : "the key is not a member of the cluster";
    return "unknown ZAP domain";
}

void
auth_set_replication_keys (auth_t *self, const char *const *keys,
                           size_t count)
{
    zhashx_destroy (&self->replication);
    self->replication = zhashx_new ();
    for (size_t index = 0; index < count; index++)
        zhashx_update (self->replication, keys [index], (void *) "member");
}

zcert_t *
auth_cert (auth_t *self)
{
    return self->cert;
}

void
auth_replace_cert (auth_t *self, zcert_t **cert_p)
{
    zcert_destroy (&self->cert);
    self->cert = *cert_p;
    *cert_p = NULL;
}

static void
s_zap_serve (auth_t *self, zsock_t *zap, zmsg_t *request)
{
    zframe_t *version = zmsg_first (request);
    zframe_t *request_id = zmsg_next (request);
    zframe_t *domain_frame = zmsg_next (request);
    zframe_t *address_frame = zmsg_next (request);
    zmsg_next (request);                             //  Identity
    zframe_t *mechanism = zmsg_next (request);
    zframe_t *credentials = zmsg_next (request);
    if (!version || !zframe_streq (version, "1.0") || !credentials
        || !zframe_streq (mechanism, "CURVE")
        || zframe_size (credentials) != 32) {
        self->counters.refused_handshakes++;
        s_zap_reply (zap, request_id, "400", "CURVE only", "");
        return;
    }
    char key [KEYS_TEXT_SIZE];
    zmq_z85_encode (key, zframe_data (credentials), 32);
    char *domain = zframe_strdup (domain_frame);
    char *address = address_frame ? zframe_strdup (address_frame) : NULL;
    const char *refusal = s_zap_verdict (self, domain, key);
    if (refusal) {
        self->counters.refused_handshakes++;
        char show [NAME_SHOW_LEN];
        if (s_may_log (self, key))
            s_log ("refused a connection to the %s endpoint from %s: %s "
                   "(key %s)", name_show (domain, strlen (domain), show,
                                          sizeof show),
                   address && *address ? address : "a local peer", refusal,
                   key);
        s_zap_reply (zap, request_id, "400", refusal, "");
        if (self->on_refused && streq (domain, KEYS_DOMAIN_CLIENTS))
            self->on_refused (self->on_refused_arg, key, refusal);
    }
    else
        s_zap_reply (zap, request_id, "200", "OK", key);
    free (domain);
    free (address);
}

zsock_t *
auth_zap_socket (auth_t *self)
{
    return self->zap;
}

void
auth_on_client_refused (auth_t *self, auth_refused_fn *fn, void *arg)
{
    self->on_refused = fn;
    self->on_refused_arg = arg;
}

void
auth_zap_serve (auth_t *self, zsock_t *zap)
{
    for (int count = 0; count < S_BATCH; count++) {
        if (count > 0 && !(zsock_events (zap) & ZMQ_POLLIN))
            break;
        zmsg_t *request = zmsg_recv (zap);
        if (!request)
            break;
        s_zap_serve (self, zap, request);
        zmsg_destroy (&request);
    }
}

//  ---------------------------------------------------------------------
//  Commands socket: grant each subscription, or refuse it

bool
auth_topic_grant (auth_t *self, registry_t *registry, const char *key,
                  const char *topic, size_t len)
{
    if (self->config->insecure)
        return true;
    const auth_key_t *record = s_key_lookup (self, key);
    //  Keys not (yet) accepted get nothing; their agent subscribes again
    //  once it is welcomed.
    if (!record || record->status != AUTH_KEY_ACCEPTED || !record->node)
        return false;
    const registry_node_t *node = registry_lookup (registry, record->node);
    if (auth_topic_allowed (record->node, node, topic, len))
        return true;
    self->counters.refused_topics++;
    if (s_may_log (self, key)) {
        char show [NAME_SHOW_LEN];
        s_log_node (record->node, "refused node %s a subscription to '%s': "
                    "not its topic", record->node,
                    name_show (topic, len, show, sizeof show));
    }
    return false;
}

void
auth_log_start (const auth_t *self)
{
    const auth_config_t *config = self->config;
    if (config->insecure) {
        s_log ("WARNING: --insecure: plaintext and no authentication on "
               "every endpoint; anyone who can reach them can run actions on "
               "every agent. Use it only on a trusted, isolated network.");
        return;
    }
    size_t accepted = zhashx_size (self->bound);
    s_log ("CURVE on every endpoint; broker key %s; %zu client key%s, %zu "
           "enrolled node%s, %zu key%s pending", zcert_public_txt (self->cert),
           config->client_count, config->client_count == 1 ? "" : "s",
           accepted, accepted == 1 ? "" : "s", self->pending,
           self->pending == 1 ? "" : "s");
    if (config->client_count == 0)
        s_log ("WARNING: no client keys are configured: no client can "
               "connect (add clients: to the config, or --client-key "
               "admin:FILE)");
    if (config->auto_accept)
        s_log ("WARNING: auto_accept is on: every new agent key that can "
               "reach the broker is enrolled without review. Use it only "
               "in labs and demos.");
    if (config->allow_count)
        s_log ("allowlist: %zu backend/action item%s", config->allow_count,
               config->allow_count == 1 ? "" : "s");
}

//  ---------------------------------------------------------------------
//  Agents

static int
s_refuse (const char **code, const char *with, char *why, size_t why_len,
          const char *format, ...) __attribute__ ((format (printf, 5, 6)));

static int
s_refuse (const char **code, const char *with, char *why, size_t why_len,
          const char *format, ...)
{
    *code = with;
    va_list args;
    va_start (args, format);
    vsnprintf (why, why_len, format, args);
    va_end (args);
    return -1;
}

//  A key that a relay of POOL speaks for must have first come through a
//  relay of that pool (relays.h). Returns 0, or -1 with the refusal.
static int
s_relayed_refused (auth_t *self, const auth_key_t *key, const char *text,
                   const char *pool, const char **code, char *why,
                   size_t why_len)
{
    if (!pool || !key || (key->pool && strcmp (key->pool, pool) == 0))
        return 0;
    //  Accepted or rejected ahead of its first hello: not yet bound to a way in
    if (!key->pool && !key->first_seen_ms && !key->node)
        return 0;
    char brief [12];
    s_short (text, brief);
    self->counters.impersonation++;
    //  What an admin runs to move the host (docs/SECURITY.md, Pools)
    char move [200] = "";
    if (key->node)
        snprintf (move, sizeof move, " (to move node %s here, an admin runs "
                  "gridcli key delete %s, then accepts its key again)",
                  key->node, key->node);
    if (s_may_log (self, text))
        s_log ("refused key %s through relays of pool %s: it enrolled %s%s%s",
               text, pool, key->pool ? "through pool " : "directly",
               key->pool ? key->pool : "", move);
    return s_refuse (code, PROTO_ERR_FORBIDDEN, why, why_len,
                     "key %s enrolled %s%s: relays of pool %s may not speak "
                     "for it%s", brief, key->pool ? "through relays of pool "
                                                  : "directly",
                     key->pool ? key->pool : "", pool, move);
}

//  A hello from key TEXT (record KEY, or NULL) claimed a node bound to
//  another key: a key with no record is kept as a refused claim, for
//  key.list to show, in memory only and never bound (at most
//  max_pending_keys of them, so that a flood of keys costs nothing).
static void
s_keep_refused (auth_t *self, auth_key_t *key, const char *text,
                const proto_msg_t *hello, int64_t wall_ms)
{
    if (!key) {
        if (self->refused >= self->config->max_pending_keys)
            return;
        key = s_key_new (self, text, AUTH_KEY_REFUSED, wall_ms);
        key->first_seen_ms = wall_ms;
    }
    if (key->status != AUTH_KEY_REFUSED)
        return;
    s_set_text (&key->node, hello->node);
    s_set_text (&key->hostname, hello->hostname);
    key->updated_at_ms = wall_ms;
}

//  The first hello of KEY, the next key of the node of HELLO: KEY becomes
//  the accepted key bound to it, and HOLDER (the key it replaces, or
//  NULL when that one was deleted since) is retired.
static void
s_switch (auth_t *self, auth_key_t *key, auth_key_t *holder,
          const proto_msg_t *hello, int64_t wall_ms)
{
    if (holder) {
        s_unindex (self, holder);
        holder->status = AUTH_KEY_RETIRED;
        holder->retired_at_ms = wall_ms;
        holder->updated_at_ms = wall_ms;
        s_index (self, holder);
        self->retired = holder;
    }
    s_unindex (self, key);
    key->status = AUTH_KEY_ACCEPTED;
    if (!key->accepted_at_ms)
        key->accepted_at_ms = wall_ms;
    if (!key->first_seen_ms)
        key->first_seen_ms = wall_ms;
    key->updated_at_ms = wall_ms;
    s_set_text (&key->hostname, hello->hostname);
    s_index (self, key);
    s_log_node (hello->node, "node %s switched to its next key %s; key %s "
                "is retired", hello->node, key->key,
                holder ? holder->key : "(deleted)");
}

static int
s_agent_hello (auth_t *self, const char *text, const char *pool,
               const proto_msg_t *hello, int64_t wall_ms,
               const auth_key_t **changed_p, const char **code, char *why,
               size_t why_len)
{
    auth_key_t *key = s_key_lookup (self, text);
    const char *node = hello->node;
    auth_key_t *holder = (auth_key_t *) zhashx_lookup (self->bound, node);
    char brief [12], other [12];
    s_short (text, brief);
    if (key && key->status == AUTH_KEY_REJECTED) {
        self->counters.unauthorized++;
        return s_refuse (code, PROTO_ERR_UNAUTHORIZED, why, why_len,
                         "key %s was rejected: this agent may not register "
                         "(an admin can run gridcli key delete on it to let "
                         "it enrol again)", brief);
    }
    if (key && key->relay) {
        self->counters.impersonation++;
        return s_refuse (code, PROTO_ERR_FORBIDDEN, why, why_len,
                         "key %s is a relay's: it registers no node", brief);
    }
    if (s_relayed_refused (self, key, text, pool, code, why, why_len) != 0)
        return -1;
    if (key && pool && !key->pool)
        key->pool = strdup (pool);   //  Saved with its first hello below
    if (key && key->status == AUTH_KEY_RETIRED) {
        self->counters.unauthorized++;
        return s_refuse (code, PROTO_ERR_UNAUTHORIZED, why, why_len,
                         "key %s was retired: its node switched to a newer "
                         "key", brief);
    }
    bool next = key && key->replaces && key->node
                && (key->status == AUTH_KEY_PENDING
                    || key->status == AUTH_KEY_NEXT);
    if (next && strcmp (key->node, node) != 0) {
        self->counters.impersonation++;
        if (s_may_log (self, text))
            s_log_node (node, "WARNING: refused key %s: it is the next key "
                        "of node %s and speaks for node %s", text, key->node,
                        node);
        return s_refuse (code, PROTO_ERR_FORBIDDEN, why, why_len,
                         "key %s is the next key of node %s: it cannot "
                         "register as %s", brief, key->node, node);
    }
    if (next) {
        if (key->status == AUTH_KEY_PENDING)
            return s_refuse (code, "pending", why, why_len,
                             "key %s is the next key of node %s and waits "
                             "for acceptance: an admin runs gridcli key "
                             "accept %s", brief, node, node);
        if (key->status == AUTH_KEY_NEXT
            && (!holder || strcmp (holder->key, key->replaces) == 0)) {
            s_switch (self, key, holder, hello, wall_ms);
            *changed_p = key;
            return 0;
        }
    }
    if (holder && holder != key) {
        self->counters.impersonation++;
        if (s_may_log (self, text))
            s_log_node (node, "WARNING: refused key %s: it speaks for node "
                        "%s, which is bound to key %s", text, node,
                        holder->key);
        s_keep_refused (self, key, text, hello, wall_ms);
        return s_refuse (code, PROTO_ERR_FORBIDDEN, why, why_len,
                         "node %s is bound to another key (%s); if this host "
                         "was rebuilt, an admin must first run: gridcli key "
                         "delete %s", node, s_short (holder->key, other),
                         node);
    }
    if (key && key->status == AUTH_KEY_ACCEPTED) {
        if (key->node && strcmp (key->node, node) != 0) {
            self->counters.impersonation++;
            if (s_may_log (self, text))
                s_log_node (node, "WARNING: refused key %s: it is bound to "
                            "node %s and speaks for node %s", text, key->node,
                            node);
            return s_refuse (code, PROTO_ERR_FORBIDDEN, why, why_len,
                             "key %s is bound to node %s: it cannot "
                             "register as %s", brief, key->node, node);
        }
        bool changed = !key->node || !key->hostname
                       || strcmp (key->hostname, hello->hostname) != 0;
        if (!key->node) {
            s_unindex (self, key);
            s_set_text (&key->node, node);
            s_index (self, key);
            s_log_node (node, "key %s is now bound to node %s", text, node);
        }
        if (changed) {
            s_set_text (&key->hostname, hello->hostname);
            if (!key->first_seen_ms)
                key->first_seen_ms = wall_ms;
            key->updated_at_ms = wall_ms;
            *changed_p = key;
        }
        return 0;
    }
    //  Unknown or pending: a claim refused while the node was bound to
    //  another key starts over as a new key
    if (key && key->status == AUTH_KEY_REFUSED) {
        s_key_forget (self, NULL, key);
        key = NULL;
    }
    bool fresh = !key;
    if (fresh) {
        if (!self->config->auto_accept
            && self->pending >= self->config->max_pending_keys) {
            self->counters.unauthorized++;
            return s_refuse (code, PROTO_ERR_UNAUTHORIZED, why, why_len,
                             "too many keys wait for acceptance (%zu): "
                             "try again later", self->pending);
        }
        key = s_key_new (self, text, AUTH_KEY_PENDING, wall_ms);
        key->first_seen_ms = wall_ms;
        if (pool)
            key->pool = strdup (pool);
    }
    bool changed = fresh || !key->node || strcmp (key->node, node) != 0
                   || !key->hostname
                   || strcmp (key->hostname, hello->hostname) != 0;
    s_unindex (self, key);
    s_set_text (&key->node, node);
    s_set_text (&key->hostname, hello->hostname);
    if (self->config->auto_accept) {
        key->status = AUTH_KEY_ACCEPTED;
        key->accepted_at_ms = wall_ms;
        changed = true;
        s_log_node (node, "WARNING: auto-accepted key %s for node %s "
                    "(auto_accept is on)", text, node);
    }
    s_index (self, key);
    if (changed) {
        key->updated_at_ms = wall_ms;
        *changed_p = key;
    }
    if (key->status == AUTH_KEY_ACCEPTED)
        return 0;
    if (changed)
        s_log_node (node, "key %s of node %s (%s) waits for acceptance: "
                    "gridcli key accept %s", text, node, hello->hostname,
                    node);
    return s_refuse (code, "pending", why, why_len,
                     "key %s is waiting for acceptance: an admin runs "
                     "gridcli key accept %s", brief, node);
}

int
auth_agent_check (auth_t *self, const zmq_msg_t *body,
                  const proto_msg_t *msg, int64_t wall_ms,
                  const auth_key_t **changed_p, const char **code, char *why,
                  size_t why_len)
{
    *changed_p = NULL;
    *code = NULL;
    if (self->config->insecure)
        return 0;
    const char *text = zmq_msg_gets (body, "User-Id");
    if (!text || !keys_z85_valid (text)) {
        self->counters.unauthorized++;
        return s_refuse (code, PROTO_ERR_UNAUTHORIZED, why, why_len,
                         "no authenticated key");
    }
    return auth_agent_check_relayed (self, text, NULL, msg, wall_ms,
                                     changed_p, code, why, why_len);
}

int
auth_agent_check_relayed (auth_t *self, const char *text, const char *pool,
                          const proto_msg_t *msg, int64_t wall_ms,
                          const auth_key_t **changed_p, const char **code,
                          char *why, size_t why_len)
{
    *changed_p = NULL;
    *code = NULL;
    if (self->config->insecure)
        return 0;
    if (msg->type == PROTO_HELLO)
        return s_agent_hello (self, text, pool, msg, wall_ms, changed_p, code,
                              why, why_len);
    const auth_key_t *key = s_key_lookup (self, text);
    char brief [12];
    s_short (text, brief);
    if (!key || key->status != AUTH_KEY_ACCEPTED) {
        self->counters.unauthorized++;
        s_refuse (code, PROTO_ERR_UNAUTHORIZED, why, why_len,
                  "key %s is %s: say hello and wait for acceptance", brief,
                  key ? auth_key_status_name (key->status) : "not enrolled");
        if (msg->type == PROTO_BYE)
            *code = NULL;
        return -1;
    }
    if (key->relay) {
        self->counters.impersonation++;
        return s_refuse (code, PROTO_ERR_FORBIDDEN, why, why_len,
                         "key %s is a relay's: it speaks for no node", brief);
    }
    if (s_relayed_refused (self, key, text, pool, code, why, why_len) != 0)
        return -1;
    //  Messages without a node (not sent by agents) are refused further on
    if (msg->node && (!key->node || strcmp (key->node, msg->node) != 0)) {
        self->counters.impersonation++;
        if (s_may_log (self, text))
            s_log_node (msg->node, "WARNING: refused a %s from key %s: it is "
                        "bound to node %s and speaks for node %s",
                        proto_type_name (msg->type), text,
                        key->node ? key->node : "(none)",
                        msg->node ? msg->node : "(none)");
        return s_refuse (code, PROTO_ERR_FORBIDDEN, why, why_len,
                         "key %s may only speak for node %s", brief,
                         key->node ? key->node : "(none yet: say hello)");
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  Clients

static void
s_reply_error (pw_t *reply, const char *id, const char *code,
               const char *format, ...) __attribute__ ((format (printf, 4, 5)));

static void
s_reply_error (pw_t *reply, const char *id, const char *code,
               const char *format, ...)
{
    char message [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (message, sizeof message, format, args);
    va_end (args);
    pw_reset (reply);
    proto_reply_error (reply, id, code, message, NULL, 0);
}

//  Checks one leaf of a job.submit against the allowlist and ROLE; adds a
//  sentence to DETAILS for each problem.
static void
s_check_leaf (auth_t *self, registry_t *registry, const pv_t *leaf,
              const char *path, auth_role_t role, zlistx_t *details)
{
    char *backend = pv_strdup (pv_map_get (leaf, "backend"));
    char *action = pv_strdup (pv_map_get (leaf, "action"));
    //  Leaves that are not well formed are the API's to refuse
    if (backend && action && name_valid (backend) && name_valid (action)) {
        if (!auth_allowed (self->config, backend, action))
            zlistx_add_end (details,
                            zsys_sprintf ("%s: %s.%s is not in this broker's "
                                          "allowlist", path, backend,
                                          action));
        const proto_action_spec_t *spec = role < AUTH_ROLE_OPERATOR
            ? registry_find_action (registry, backend, action, true)
            : NULL;
        if (spec && spec->modify)
            zlistx_add_end (details,
                            zsys_sprintf ("%s: %s %s changes hosts (kind "
                                          "modify): the viewer role may "
                                          "submit query actions only",
                                          path, backend, action));
    }
    free (backend);
    free (action);
}

bool
auth_submit_refused (auth_t *self, registry_t *registry,
                     const proto_request_t *request, auth_role_t role,
                     pw_t *reply)
{
    const pv_t *tasks = pv_map_get (pv_map_get (request->body, "job"),
                                    "tasks");
    if (pv_type (tasks) != PV_ARRAY)
        return false;
    zlistx_t *details = zlistx_new ();
    zlistx_set_destructor (details, (zlistx_destructor_fn *) zstr_free);
    for (size_t p = 0; p < pv_size (tasks); p++) {
        const pv_t *phase = pv_array_at (tasks, p);
        const pv_t *inner = pv_map_get (phase, "tasks");
        char path [64];
        if (pv_type (inner) == PV_ARRAY)
            for (size_t t = 0; t < pv_size (inner); t++) {
                snprintf (path, sizeof path, "tasks[%zu].tasks[%zu]", p, t);
                s_check_leaf (self, registry, pv_array_at (inner, t), path,
                              role, details);
            }
        else {
            snprintf (path, sizeof path, "tasks[%zu]", p);
            s_check_leaf (self, registry, phase, path, role, details);
        }
    }
    size_t count = zlistx_size (details);
    if (count) {
        char **items = (char **) calloc (count, sizeof (char *));
        assert (items);
        size_t index = 0;
        for (char *item = (char *) zlistx_first (details); item;
             item = (char *) zlistx_next (details))
            items [index++] = item;
        pw_reset (reply);
        proto_reply_error (reply, request->id, PROTO_ERR_FORBIDDEN,
                           count == 1 ? items [0]
                                      : "the job holds actions this client "
                                        "may not run (see details)",
                           count == 1 ? NULL : items, count == 1 ? 0 : count);
        free (items);
        self->counters.forbidden++;
    }
    zlistx_destroy (&details);
    return count > 0;
}

int
auth_identify (auth_t *self, const auth_caller_t *caller,
               const proto_request_t *request, int64_t wall_ms,
               auth_role_t *role_p, const char **name_p, pw_t *reply)
{
    auth_role_t role = AUTH_ROLE_ADMIN;
    const char *name = AUTH_UNNAMED;
    if (caller->http && caller->public_metrics
        && streq (request->type, "metrics.get")) {
        role = AUTH_ROLE_VIEWER;
        name = "a public /metrics reader";
    }
    else
    if (caller->http) {
        //  HTTP always needs a token, also on a broker without CURVE
        if (!token_check (self->tokens, caller->token, wall_ms, &role,
                          &name)) {
            self->counters.http_unauthorized++;
            s_reply_error (reply, request->id, PROTO_ERR_UNAUTHORIZED,
                           caller->token ? "this token is not known to the "
                                           "broker, or it was revoked"
                                         : "this request needs a token "
                                           "(Authorization: Bearer TOKEN)");
            return -1;
        }
    }
    else
    if (!self->config->insecure) {
        const char *text = caller->key;
        const auth_client_t *client = s_client (self, text);
        const auth_key_t *record = s_key_lookup (self, text);
        if (!client || (record && record->status == AUTH_KEY_REJECTED)) {
            self->counters.unauthorized++;
            s_reply_error (reply, request->id, PROTO_ERR_UNAUTHORIZED,
                           "this client's key is not known to the broker, "
                           "or it was revoked");
            return -1;
        }
        role = client->role;
        if (client->name)
            name = client->name;
    }
    *role_p = role;
    *name_p = name;
    return 0;
}

void
auth_forbid (auth_t *self, const auth_caller_t *caller,
             const proto_request_t *request, auth_role_t needed,
             auth_role_t role, const char *name, pw_t *reply)
{
    self->counters.forbidden++;
    if (caller->http)
        self->counters.http_forbidden++;
    s_reply_error (reply, request->id, PROTO_ERR_FORBIDDEN,
                   "%s needs the %s role; %s has the %s role", request->type,
                   auth_role_name (needed), name, auth_role_name (role));
}

//  ---------------------------------------------------------------------
//  The key store's changes (key.* requests)

const auth_key_t *
auth_key_first (auth_t *self)
{
    return (const auth_key_t *) zhashx_first (self->keys);
}

const auth_key_t *
auth_key_next (auth_t *self)
{
    return (const auth_key_t *) zhashx_next (self->keys);
}

const auth_key_t *
auth_key_of_node (auth_t *self, const char *node, size_t *claims_p)
{
    auth_key_t *found = (auth_key_t *) zhashx_lookup (self->bound, node);
    size_t claims = 0;
    //  A relay's name is the one its heartbeats gave (relays.h)
    if (!found)
        for (auth_key_t *key = (auth_key_t *) zhashx_first (self->keys); key;
             key = (auth_key_t *) zhashx_next (self->keys))
            if ((key->status != AUTH_KEY_ACCEPTED
                 && key->status != AUTH_KEY_REFUSED
                 && key->status != AUTH_KEY_RETIRED && key->node
                 && strcmp (key->node, node) == 0)
                || (key->relay && key->hostname
                    && strcmp (key->hostname, node) == 0)) {
                claims++;
                found = key;
            }
    if (claims_p)
        *claims_p = claims;
    return claims > 1 ? NULL : found;
}

int
auth_key_accept (auth_t *self, store_txn_t *txn, const char *text,
                 bool enrolled_relay, int64_t wall_ms,
                 const auth_key_t **record_p, char *why, size_t why_len)
{
    *record_p = NULL;
    auth_key_t *key = s_key_lookup (self, text);
    if (s_client (self, text) || enrolled_relay) {
        //  A client key's role (a relay's enrolment) is in the config:
        //  accepting it only lifts a revocation
        if (key)
            s_key_forget (self, txn, key);
        s_log ("%s key %s may connect again",
               enrolled_relay ? "relay" : "client", text);
        return 0;
    }
    if (!key) {
        //  Enrolled before its agent ever connects: bound at its first hello
        key = s_key_new (self, text, AUTH_KEY_PENDING, wall_ms);
    }
    *record_p = key;
    if (key->status == AUTH_KEY_ACCEPTED || key->status == AUTH_KEY_NEXT)
        return 0;
    auth_key_t *holder = key->node ? (auth_key_t *) zhashx_lookup (
                                         self->bound, key->node)
                                   : NULL;
    //  A pending next key: the node switches to it at its first hello
    if (key->replaces && key->status == AUTH_KEY_PENDING && key->node
        && (!holder || strcmp (holder->key, key->replaces) == 0)) {
        s_unindex (self, key);
        key->status = AUTH_KEY_NEXT;
        key->accepted_at_ms = wall_ms;
        key->updated_at_ms = wall_ms;
        s_index (self, key);
        auth_key_save (self, txn, key);
        s_log_node (key->node, "key %s accepted as the next key of node %s",
                    key->key, key->node);
        return 0;
    }
    if (holder && holder != key) {
        s_err (why, why_len, "node %s is bound to key %s: delete that key "
               "first (gridcli key delete %s)", key->node, holder->key,
               key->node);
        if (key->status == AUTH_KEY_PENDING && !key->first_seen_ms) {
            s_key_forget (self, txn, key);
            *record_p = NULL;
        }
        return -1;
    }
    s_unindex (self, key);
    key->status = AUTH_KEY_ACCEPTED;
    key->accepted_at_ms = wall_ms;
    key->updated_at_ms = wall_ms;
    s_index (self, key);
    auth_key_save (self, txn, key);
    if (key->relay)
        s_log ("relay key %s accepted (relay %s)", key->key,
               key->hostname ? key->hostname : "?");
    else
        s_log ("key %s accepted%s%s", key->key, key->node ? " for node " : "",
               key->node ? key->node : " (bound at its first hello)");
    return 0;
}

const auth_key_t *
auth_key_reject (auth_t *self, store_txn_t *txn, const char *text,
                 int64_t wall_ms, bool *was_bound_p)
{
    auth_key_t *key = s_key_lookup (self, text);
    if (!key)
        key = s_key_new (self, text, AUTH_KEY_REJECTED, wall_ms);
    *was_bound_p = key->status == AUTH_KEY_ACCEPTED && key->node;
    s_unindex (self, key);
    key->status = AUTH_KEY_REJECTED;
    key->updated_at_ms = wall_ms;
    s_index (self, key);
    auth_key_save (self, txn, key);
    s_log ("key %s rejected%s%s%s", key->key, key->node ? " (node " : "",
           key->node ? key->node : "", key->node ? ")" : "");
    return key;
}

int
auth_key_delete (auth_t *self, store_txn_t *txn, const char *text,
                 char **node_p, bool *was_bound_p)
{
    *node_p = NULL;
    *was_bound_p = false;
    auth_key_t *key = s_key_lookup (self, text);
    if (!key)
        return -1;
    char *node = key->node ? strdup (key->node) : NULL;
    *was_bound_p = key->status == AUTH_KEY_ACCEPTED && node;
    char deleted [KEYS_TEXT_SIZE];
    snprintf (deleted, sizeof deleted, "%s", key->key);
    s_key_forget (self, txn, key);
    s_log ("key %s deleted%s%s%s", deleted, node ? " (node " : "",
           node ? node : "", node ? ")" : "");
    *node_p = node;
    return 0;
}

//  ---------------------------------------------------------------------
//  Rotation (rekey)

const auth_key_t *
auth_take_retired (auth_t *self)
{
    const auth_key_t *retired = self->retired;
    self->retired = NULL;
    return retired;
}

static auth_key_t *
s_next_of (auth_t *self, const char *node)
{
    for (auth_key_t *key = (auth_key_t *) zhashx_first (self->keys); key;
         key = (auth_key_t *) zhashx_next (self->keys))
        if ((key->status == AUTH_KEY_PENDING || key->status == AUTH_KEY_NEXT)
            && key->replaces && key->node && strcmp (key->node, node) == 0)
            return key;
    return NULL;
}

const auth_key_t *
auth_key_next_of (auth_t *self, const char *node)
{
    return s_next_of (self, node);
}

//  Where next key KEY stands, as a verdict with its sentence in WHY.
static auth_rekey_t
s_rekey_verdict (const auth_key_t *key, char *why, size_t why_len)
{
    char brief [12];
    s_short (key->key, brief);
    if (key->status == AUTH_KEY_NEXT) {
        s_err (why, why_len, "key %s is the next key of node %s: connect "
               "with it", brief, key->node);
        return AUTH_REKEY_ACCEPTED;
    }
    s_err (why, why_len, "key %s, the next key of node %s, waits for "
           "acceptance: an admin runs gridcli key accept %s", brief,
           key->node, key->node);
    return AUTH_REKEY_PENDING;
}

auth_rekey_t
auth_rekey (auth_t *self, store_txn_t *txn, const char *sender,
            const char *node, const char *text, int64_t wall_ms,
            bool *fresh_p, char *why, size_t why_len)
{
    *fresh_p = false;
    if (!text || !keys_z85_valid (text)) {
        s_err (why, why_len, "key: expected a public key, 40 characters of "
               "Z85");
        return AUTH_REKEY_REFUSED;
    }
    char brief [12];
    s_short (text, brief);
    auth_key_t *current = s_key_lookup (self, sender);
    if (!current || current->status != AUTH_KEY_ACCEPTED || !current->node
        || strcmp (current->node, node) != 0) {
        self->counters.unauthorized++;
        s_err (why, why_len, "only the accepted key of node %s may name its "
               "next key", node);
        return AUTH_REKEY_REFUSED;
    }
    if (strcmp (text, sender) == 0) {
        s_err (why, why_len, "key %s is node %s's key already", brief, node);
        return AUTH_REKEY_REFUSED;
    }
    auth_key_t *key = s_key_lookup (self, text);
    //  A claim refused earlier is kept in memory only: it starts over
    if (key && key->status == AUTH_KEY_REFUSED) {
        s_key_forget (self, NULL, key);
        key = NULL;
    }
    if (key && key->replaces && strcmp (key->replaces, sender) == 0
        && key->node && strcmp (key->node, node) == 0
        && (key->status == AUTH_KEY_PENDING || key->status == AUTH_KEY_NEXT))
        return s_rekey_verdict (key, why, why_len);
    if (key || s_client (self, text)) {
        //  A new pair is unknown: a known key here is someone else's
        self->counters.impersonation++;
        if (s_may_log (self, sender))
            s_log_node (node, "WARNING: refused node %s the next key %s: the "
                        "broker knows that key already (%s)", node, text,
                        key ? auth_key_status_name (key->status) : "client");
        s_err (why, why_len, "key %s is known to the broker already: a next "
               "key must be a new pair (gridagent rotate-key makes one)",
               brief);
        return AUTH_REKEY_REFUSED;
    }
    bool manual = self->config->rekey == AUTH_REKEY_MANUAL;
    if (manual && self->pending >= self->config->max_pending_keys) {
        s_err (why, why_len, "too many keys wait for acceptance (%zu): try "
               "again later", self->pending);
        return AUTH_REKEY_REFUSED;
    }
    //  A next key the agent never used is replaced by its newer one
    auth_key_t *earlier = s_next_of (self, node);
    if (earlier) {
        s_log_node (node, "next key %s of node %s replaced by a newer one",
                    earlier->key, node);
        s_key_forget (self, txn, earlier);
    }
    key = s_key_new (self, text, manual ? AUTH_KEY_PENDING : AUTH_KEY_NEXT,
                     wall_ms);
    s_set_text (&key->node, node);
    s_set_text (&key->hostname, current->hostname);
    s_set_text (&key->replaces, sender);
    key->first_seen_ms = wall_ms;
    if (!manual)
        key->accepted_at_ms = wall_ms;
    auth_key_save (self, txn, key);
    *fresh_p = true;
    if (manual)
        s_log_node (node, "key %s of node %s waits for acceptance as its "
                    "next key: gridcli key accept %s", text, node, node);
    else
        s_log_node (node, "key %s accepted as the next key of node %s "
                    "(rekey: auto)", text, node);
    return s_rekey_verdict (key, why, why_len);
}
