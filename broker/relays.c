/*  =========================================================================
    relays - the broker's side of gridrelay (see relays.h)
    =========================================================================
*/
#include "relays.h"

#include <stdarg.h>

#include "../proto/conf.h"
#include "../proto/log.h"
#include "../proto/names.h"
#include "auth.h"

//  One relay the broker knows: enrolled (secure), or seen (insecure).
typedef struct {
    char *id;                    //  Its key (secure) or its path (insecure)
    const relays_entry_t *entry; //  Its enrolment (the config's, or own),
                                 //  or NULL (insecure)
    bool configured;             //  Enrolled in the config (else by key.accept)
    relays_entry_t own;          //  Enrolled by key.accept: its enrolment
    char name [NAME_MAX_LEN + 1];  //  Its name ("" until it says, insecure)
    char upstream [NAME_MAX_LEN + 1];  //  The relay it comes through, or ""
    int64_t last_seen_ms;        //  Monotonic: its last own message
    int64_t last_seen_wall_ms;   //  Wall clock of the same, 0 never
    zhashx_t *topics;            //  Topic -> count (char *) of the nodes it
                                 //  connects: what it may subscribe to
    uint64_t refused;            //  Attestations of it refused
    bool revoked;                //  Its key was rejected: its nodes went
    size_t agents;               //  relay.list: online nodes next to it
    int version;                 //  Protocol of its heartbeats, 0 not yet
} s_relay_t;

//  Which relays a node came through.
typedef struct {
    s_relay_t *connect;          //  The relay connected to the broker
    s_relay_t *next;             //  The relay next to the node
    char **topics;               //  Its topics (granted to connect)
    size_t topic_count;
} s_member_t;

struct _relays_t {
    const relays_config_t *config;  //  Enrolled relays (borrowed)
    bool insecure;               //  Nothing is authenticated
    zhashx_t *relays;            //  id -> s_relay_t
    zhashx_t *members;           //  node id -> s_member_t
    uint64_t refused;            //  Attestations refused
};

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  ---------------------------------------------------------------------
//  Configuration

void
relays_config_clear (relays_config_t *config)
{
    for (size_t index = 0; index < config->count; index++) {
        free (config->entries [index].name);
        free (config->entries [index].pool);
    }
    free (config->entries);
    config->entries = NULL;
    config->count = 0;
}

void
relays_config_copy (relays_config_t *dest, const relays_config_t *src)
{
    dest->count = src->count;
    dest->entries = src->count ? (relays_entry_t *) calloc (
                                     src->count, sizeof (relays_entry_t))
                               : NULL;
    for (size_t index = 0; index < src->count; index++) {
        dest->entries [index] = src->entries [index];
        dest->entries [index].name = strdup (src->entries [index].name);
        dest->entries [index].pool = strdup (src->entries [index].pool);
    }
}

const relays_entry_t *
relays_config_find (const relays_config_t *config, const char *key)
{
    for (size_t index = 0; key && index < config->count; index++)
        if (strcmp (config->entries [index].key, key) == 0)
            return &config->entries [index];
    return NULL;
}

static int
s_config_add (relays_config_t *config, const char *key_text, const char *name,
              const char *pool, char *err, size_t err_len)
{
    char key [KEYS_TEXT_SIZE];
    char why [512];
    if (!name_valid (name)) {
        s_err (err, err_len, "relay name '%s' is not a name "
               "([A-Za-z0-9_-], 1 to 64)", name);
        return -1;
    }
    if (pool && !name_valid (pool)) {
        s_err (err, err_len, "relay %s: pool '%s' is not a name", name, pool);
        return -1;
    }
    if (keys_read_public (key_text, key, why, sizeof why) != 0) {
        s_err (err, err_len, "relay %s: %s", name, why);
        return -1;
    }
    for (size_t index = 0; index < config->count; index++) {
        if (strcmp (config->entries [index].key, key) == 0) {
            s_err (err, err_len, "relay %s: its key is already relay %s's",
                   name, config->entries [index].name);
            return -1;
        }
        if (strcmp (config->entries [index].name, name) == 0) {
            s_err (err, err_len, "relay %s is enrolled twice", name);
            return -1;
        }
    }
    relays_entry_t *entries = (relays_entry_t *) realloc (
        config->entries, (config->count + 1) * sizeof (relays_entry_t));
    assert (entries);
    config->entries = entries;
    relays_entry_t *entry = &entries [config->count++];
    memset (entry, 0, sizeof *entry);
    memcpy (entry->key, key, sizeof entry->key);
    entry->name = strdup (name);
    entry->pool = strdup (pool ? pool : name);
    return 0;
}

//  One item of relays: (conf_get_string_maps): key, name, pool.
static int
s_relay_item (void *arg, char **values, char *why, size_t why_len)
{
    return s_config_add ((relays_config_t *) arg, values [0], values [1],
                         values [2], why, why_len);
}

int
relays_config_load (relays_config_t *config, const pv_t *list, char *err,
                    size_t err_len)
{
    static const char *const fields [] = {"key", "name", "pool", NULL};
    return conf_get_string_maps (list, "relays", fields, 2, s_relay_item,
                                 config, err, err_len);
}

int
relays_config_add (relays_config_t *config, const char *text, char *err,
                   size_t err_len)
{
    const char *colon = strchr (text, ':');
    if (!colon || colon == text || !colon [1]) {
        s_err (err, err_len, "--relay-key: expected NAME[@POOL]:KEY, got "
               "'%s'", text);
        return -1;
    }
    char name [NAME_MAX_LEN + 2] = "", pool [NAME_MAX_LEN + 2] = "";
    size_t len = (size_t) (colon - text);
    const char *at = memchr (text, '@', len);
    size_t name_len = at ? (size_t) (at - text) : len;
    size_t pool_len = at ? len - name_len - 1 : 0;
    if (name_len > NAME_MAX_LEN || pool_len > NAME_MAX_LEN) {
        s_err (err, err_len, "--relay-key: the name or pool in '%s' is too "
               "long", text);
        return -1;
    }
    memcpy (name, text, name_len);
    name [name_len] = 0;
    if (at) {
        memcpy (pool, at + 1, pool_len);
        pool [pool_len] = 0;
    }
    return s_config_add (config, colon + 1, name, at ? pool : NULL, err,
                         err_len);
}

//  ---------------------------------------------------------------------
//  The table

static void
s_relay_destroy (void **item_p)
{
    s_relay_t *relay = (s_relay_t *) *item_p;
    if (relay) {
        zhashx_destroy (&relay->topics);
        free (relay->own.name);
        free (relay->own.pool);
        free (relay->id);
        free (relay);
        *item_p = NULL;
    }
}

static s_relay_t *
s_relay_new (relays_t *self, const char *id, const relays_entry_t *entry)
{
    s_relay_t *relay = (s_relay_t *) zmalloc (sizeof (s_relay_t));
    relay->id = strdup (id);
    relay->entry = entry;
    relay->configured = entry != NULL;
    if (entry)
        snprintf (relay->name, sizeof relay->name, "%s", entry->name);
    relay->topics = zhashx_new ();
    zhashx_set_destructor (relay->topics, (zhashx_destructor_fn *) zstr_free);
    zhashx_insert (self->relays, id, relay);
    return relay;
}

static void
s_member_destroy (void **item_p)
{
    s_member_t *member = (s_member_t *) *item_p;
    if (member) {
        for (size_t index = 0; index < member->topic_count; index++)
            free (member->topics [index]);
        free (member->topics);
        free (member);
        *item_p = NULL;
    }
}

relays_t *
relays_new (const relays_config_t *config, bool insecure)
{
    relays_t *self = (relays_t *) zmalloc (sizeof (relays_t));
    self->config = config;
    self->insecure = insecure;
    self->relays = zhashx_new ();
    zhashx_set_destructor (self->relays, s_relay_destroy);
    self->members = zhashx_new ();
    zhashx_set_destructor (self->members, s_member_destroy);
    for (size_t index = 0; !insecure && index < config->count; index++)
        s_relay_new (self, config->entries [index].key,
                     &config->entries [index]);
    return self;
}

void
relays_destroy (relays_t **self_p)
{
    relays_t *self = *self_p;
    if (self) {
        //  Members point into relays: free them first
        zhashx_destroy (&self->members);
        zhashx_destroy (&self->relays);
        free (self);
        *self_p = NULL;
    }
}

//  RELAY's name is now NAME: so say the nodes next to it.
static void
s_relay_rename (relays_t *self, s_relay_t *relay, const char *name,
                registry_t *registry, relays_save_node_fn *save_node,
                void *arg)
{
    if (strcmp (relay->name, name) == 0)
        return;
    snprintf (relay->name, sizeof relay->name, "%s", name);
    for (s_member_t *member = (s_member_t *) zhashx_first (self->members);
         member; member = (s_member_t *) zhashx_next (self->members)) {
        if (member->next != relay)
            continue;
        registry_node_t *node = registry_lookup (
            registry, (const char *) zhashx_cursor (self->members));
        if (node) {
            snprintf (node->relay, sizeof node->relay, "%s", relay->name);
            save_node (arg, node);
        }
    }
}

void
relays_reload (relays_t *self, relays_config_t *running,
               relays_config_t *fresh, registry_t *registry,
               relays_save_node_fn *save_node, void *arg, size_t *added_p,
               size_t *removed_p)
{
    assert (running == self->config);
    relays_config_t old = *running;
    *running = *fresh;
    fresh->entries = NULL;
    fresh->count = 0;
    size_t added = 0, removed = 0;
    for (size_t index = 0; index < old.count; index++)
        if (!relays_config_find (running, old.entries [index].key))
            removed++;
    for (size_t index = 0; index < running->count; index++)
        if (!relays_config_find (&old, running->entries [index].key))
            added++;
    if (!self->insecure) {
        //  Entries point into the old list: point them at the new one
        for (s_relay_t *relay = (s_relay_t *) zhashx_first (self->relays);
             relay; relay = (s_relay_t *) zhashx_next (self->relays)) {
            if (!relay->configured)
                continue;
            const relays_entry_t *entry = relays_config_find (running,
                                                              relay->id);
            if (entry) {
                relay->entry = entry;
                s_relay_rename (self, relay, entry->name, registry, save_node,
                                arg);
                continue;
            }
            //  No longer in the list: it stands by its own enrolment, if
            //  an admin accepted its key, with what it had
            free (relay->own.name);
            free (relay->own.pool);
            memcpy (relay->own.key, relay->entry->key, KEYS_TEXT_SIZE);
            relay->own.name = strdup (relay->entry->name);
            relay->own.pool = strdup (relay->entry->pool);
            relay->entry = &relay->own;
            relay->configured = false;
        }
        for (size_t index = 0; index < running->count; index++) {
            relays_entry_t *entry = &running->entries [index];
            s_relay_t *relay = (s_relay_t *) zhashx_lookup (self->relays,
                                                            entry->key);
            if (!relay)
                s_relay_new (self, entry->key, entry);
            else
            if (!relay->configured) {
                relay->configured = true;
                relay->entry = entry;
                s_relay_rename (self, relay, entry->name, registry, save_node,
                                arg);
            }
        }
    }
    relays_config_clear (&old);
    *added_p = added;
    *removed_p = removed;
}

uint64_t
relays_refused (const relays_t *self)
{
    return self->refused;
}

//  ---------------------------------------------------------------------
//  Attestation

static int
s_refuse (relays_t *self, s_relay_t *relay, const char **code,
          const char *with, char *why, size_t why_len, const char *format,
          ...) __attribute__ ((format (printf, 7, 8)));

static int
s_refuse (relays_t *self, s_relay_t *relay, const char **code,
          const char *with, char *why, size_t why_len, const char *format,
          ...)
{
    self->refused++;
    if (relay)
        relay->refused++;
    *code = with;
    va_list args;
    va_start (args, format);
    vsnprintf (why, why_len, format, args);
    va_end (args);
    return -1;
}

//  The enrolled relay of KEY, whose key record is RECORD (auth_key), when
//  it may attest now, else NULL: one of the config whose key is not
//  rejected, or one an admin accepted (key.accept), made at first use,
//  named as it names itself, in a pool of its own.
static s_relay_t *
s_live_relay (relays_t *self, const char *key, const auth_key_t *record)
{
    s_relay_t *relay = (s_relay_t *) zhashx_lookup (self->relays, key);
    if (relay && relay->configured)
        return record && record->status == AUTH_KEY_REJECTED ? NULL : relay;
    if (self->insecure || !record || !record->relay
        || record->status != AUTH_KEY_ACCEPTED)
        return NULL;
    if (!relay) {
        const char *name = record->hostname && name_valid (record->hostname)
                               ? record->hostname : "relay";
        relay = s_relay_new (self, key, NULL);
        memcpy (relay->own.key, key, KEYS_TEXT_SIZE);
        relay->own.name = strdup (name);
        relay->own.pool = strdup (name);
        relay->entry = &relay->own;
        snprintf (relay->name, sizeof relay->name, "%s", name);
    }
    return relay;
}

//  Insecure: the relay that sent on ROUTING through the first PREFIX
//  bytes of the via frame, made at first sight (NULL when too many).
static s_relay_t *
s_path_relay (relays_t *self, const void *routing, size_t routing_size,
              const void *via, size_t prefix)
{
    char id [2 * (REGISTRY_MAX_ROUTING_ID + RELAYS_VIA_MAX) + 2];
    size_t at = 0;
    for (size_t index = 0; index < routing_size && at + 3 < sizeof id;
         index++)
        at += (size_t) snprintf (id + at, sizeof id - at, "%02x",
                                 ((const uint8_t *) routing) [index]);
    id [at++] = '/';
    memcpy (id + at, via, prefix);
    id [at + prefix] = 0;
    s_relay_t *relay = (s_relay_t *) zhashx_lookup (self->relays, id);
    if (!relay && zhashx_size (self->relays) < RELAYS_MAX_INSECURE)
        relay = s_relay_new (self, id, NULL);
    return relay;
}

//  PATH's version (relays_path_t) with RELAY on it: the oldest so far,
//  0 once a relay on it has not said.
static void
s_path_version (relays_path_t *path, const s_relay_t *relay)
{
    if (!path->oldest || (path->version && relay->version < path->version)) {
        path->version = relay->version;
        path->oldest = relay->name;
    }
}

int
relays_attest (relays_t *self, auth_t *auth, const void *routing,
               size_t routing_size, const char *conn_key, const void *via,
               size_t via_size, relays_path_t *path, const char **code,
               char *why, size_t why_len)
{
    memset (path, 0, sizeof *path);
    path->relay = "";
    *code = NULL;
    if (via_size == 0) {
        //  Directly connected. A relay key speaks only through a via frame
        //  (its own messages end with RELAYS_SELF): nothing else may
        //  enrol it as an agent.
        if (conn_key && self->config->count
            && zhashx_lookup (self->relays, conn_key))
            return s_refuse (self, NULL, code, PROTO_ERR_BAD_REQUEST, why,
                             why_len, "a relay sends its agents' messages "
                             "behind a via frame (PROTOCOL.md section 4.3)");
        if (conn_key)
            memcpy (path->key, conn_key, KEYS_TEXT_SIZE);
        return 0;
    }
    const char *hops = (const char *) via;
    size_t count = via_size / KEYS_Z85_LEN;
    if (via_size % KEYS_Z85_LEN != 0 || count > RELAYS_MAX_PATH)
        return s_refuse (self, NULL, code, PROTO_ERR_MALFORMED, why, why_len,
                         "a via frame holds 1 to %d keys of 40 characters",
                         RELAYS_MAX_PATH);
    char keys [RELAYS_MAX_PATH][KEYS_TEXT_SIZE];
    for (size_t index = 0; index < count; index++) {
        memcpy (keys [index], hops + index * KEYS_Z85_LEN, KEYS_Z85_LEN);
        keys [index][KEYS_Z85_LEN] = 0;
        if (!keys_z85_valid (keys [index]))
            return s_refuse (self, NULL, code, PROTO_ERR_MALFORMED, why,
                             why_len, "the via frame holds something that "
                             "is not a key");
    }
    path->self = strcmp (keys [count - 1], RELAYS_SELF) == 0;
    path->answer_size = path->self ? via_size - KEYS_Z85_LEN : via_size;
    if (self->insecure) {
        //  Nothing is authenticated: the relay next to the speaker is told
        //  apart by its path
        s_relay_t *next = s_path_relay (self, routing, routing_size, via,
                                        (count - 1) * KEYS_Z85_LEN);
        path->relay = next ? next->name : "";
        path->connect = path->next = next;
        if (next)
            s_path_version (path, next);
        return 0;
    }
    //  The connection and every key but the last are enrolled relays of
    //  one pool
    s_relay_t *connect = conn_key ? s_live_relay (self, conn_key,
                                                  auth_key (auth, conn_key))
                                  : NULL;
    if (!connect && conn_key && count == 1 && path->self) {
        //  A relay that is not enrolled introduces itself: relays_on_own
        //  keeps its key pending for an admin
        memcpy (path->key, conn_key, KEYS_TEXT_SIZE);
        return 0;
    }
    if (!connect) {
        s_relay_t *known = conn_key ? (s_relay_t *) zhashx_lookup (
                                          self->relays, conn_key)
                                    : NULL;
        if (!known) {
            char brief [12];
            snprintf (brief, sizeof brief, "%.8s", conn_key ? conn_key : "-");
            log_warn ("refused a message attested by key %s: it is not an "
                      "enrolled relay", conn_key ? conn_key : "(none)");
            return s_refuse (self, NULL, code, PROTO_ERR_FORBIDDEN, why,
                             why_len, "key %s... is not an enrolled relay: "
                             "it may not speak for other keys", brief);
        }
        return s_refuse (self, known, code, PROTO_ERR_UNAUTHORIZED, why,
                         why_len, "relay %s was revoked (its key was "
                         "rejected)", known->name);
    }
    const char *pool = connect->entry->pool;
    s_relay_t *next = connect;
    s_relay_t *above = NULL;
    s_path_version (path, connect);
    for (size_t index = 0; index + 1 < count; index++) {
        s_relay_t *relay = s_live_relay (self, keys [index],
                                         auth_key (auth, keys [index]));
        if (!relay)
            return s_refuse (self, connect, code, PROTO_ERR_FORBIDDEN, why,
                             why_len, "relay %s attests key %.8s... as a "
                             "relay, which it is not (or no longer)",
                             next->name, keys [index]);
        if (strcmp (relay->entry->pool, pool) != 0)
            return s_refuse (self, connect, code, PROTO_ERR_FORBIDDEN, why,
                             why_len, "relay %s (pool %s) may not carry "
                             "relay %s (pool %s)", next->name, pool,
                             relay->name, relay->entry->pool);
        above = next;
        next = relay;
        s_path_version (path, relay);
    }
    if (path->self) {
        snprintf (next->upstream, sizeof next->upstream, "%s",
                  above ? above->name : "");
        path->relay = next->name;
        path->pool = pool;
        path->connect = connect;
        path->next = next;
        return 0;
    }
    const char *agent = keys [count - 1];
    if (zhashx_lookup (self->relays, agent)
        || auth_is_client (auth, agent)) {
        if (log_enabled (LOG_LEVEL_WARN))
            log_warn ("refused relay %s: it attests key %s, which is not an "
                      "agent's", next->name, agent);
        return s_refuse (self, next, code, PROTO_ERR_FORBIDDEN, why,
                         why_len, "relay %s may not speak as a relay's or "
                         "a client's key", next->name);
    }
    memcpy (path->key, agent, KEYS_TEXT_SIZE);
    path->pool = pool;
    path->relay = next->name;
    path->connect = connect;
    path->next = next;
    return 0;
}

int
relays_on_own (relays_t *self, auth_t *auth, registry_t *registry,
               const relays_path_t *path, const proto_msg_t *msg,
               int64_t now_ms, int64_t wall_ms, const auth_key_t **changed_p,
               const char **code, char *why, size_t why_len)
{
    *changed_p = NULL;
    *code = NULL;
    if (msg->type != PROTO_HEARTBEAT && msg->type != PROTO_BROKER_KEY_ACK) {
        s_err (why, why_len, "a relay sends heartbeats and broker_key_acks "
               "of its own, nothing else");
        *code = PROTO_ERR_BAD_REQUEST;
        return -1;
    }
    s_relay_t *relay = (s_relay_t *) path->next;
    if (!relay && !self->insecure) {
        //  Not enrolled: it waits for key.accept
        bool changed = false;
        const auth_key_t *record = auth_relay_seen (auth, path->key,
                                                    msg->node, wall_ms,
                                                    &changed);
        if (changed)
            *changed_p = record;
        self->refused++;
        if (record && record->status == AUTH_KEY_PENDING) {
            *code = "pending";
            s_err (why, why_len, "relay key %s waits for acceptance: an "
                   "admin runs gridcli key accept '%s'", path->key, path->key);
        }
        else {
            *code = PROTO_ERR_UNAUTHORIZED;
            s_err (why, why_len, "key %.8s... is not an enrolled relay%s",
                   path->key, record ? " (it was rejected)" : "");
        }
        return -1;
    }
    //  Insecure: named by what it says, and so are the nodes next to it
    if (relay && !relay->entry && msg->node
        && strcmp (relay->name, msg->node) != 0) {
        snprintf (relay->name, sizeof relay->name, "%s", msg->node);
        for (s_member_t *member = (s_member_t *) zhashx_first (self->members);
             member; member = (s_member_t *) zhashx_next (self->members)) {
            if (member->next != relay)
                continue;
            registry_node_t *node = registry_lookup (
                registry, (const char *) zhashx_cursor (self->members));
            if (node)
                snprintf (node->relay, sizeof node->relay, "%s",
                          relay->name);
        }
    }
    if (!relay)
        return 0;
    if (!relay->last_seen_wall_ms || relay->version != msg->protocol)
        log_info ("relay %s %s%s%s (protocol %d)", relay->name,
                  relay->last_seen_wall_ms ? "speaks another release"
                                           : "connected",
                  relay->upstream [0] ? " through relay " : "",
                  relay->upstream, msg->protocol);
    relay->version = msg->protocol;
    relay->last_seen_ms = now_ms;
    relay->last_seen_wall_ms = wall_ms;
    return 0;
}

//  ---------------------------------------------------------------------
//  Nodes and topics

static void
s_topic_add (char ***list_p, size_t *count_p, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_topic_add (char ***list_p, size_t *count_p, const char *format, ...)
{
    char topic [512];
    va_list args;
    va_start (args, format);
    vsnprintf (topic, sizeof topic, format, args);
    va_end (args);
    //  The list doubles (4, 8, 16, ...): a hello of thousands of groups
    //  and labels makes tens of thousands of topics
    size_t count = *count_p;
    if (count == 0 || (count >= 4 && (count & (count - 1)) == 0)) {
        char **list = (char **) realloc (*list_p,
                                         (count ? count * 2 : 4) * sizeof (char *));
        assert (list);
        *list_p = list;
    }
    (*list_p) [(*count_p)++] = strdup (topic);
}

//  The topics of HELLO's node, as its agent subscribes (PROTOCOL.md 3).
static void
s_hello_topics (const proto_msg_t *hello, char ***list_p, size_t *count_p)
{
    s_topic_add (list_p, count_p, "all/");
    s_topic_add (list_p, count_p, "node/%s/", hello->node);
    for (size_t index = 0; index < hello->group_count; index++)
        s_topic_add (list_p, count_p, "group/%s/", hello->groups [index]);
    for (size_t index = 0; index < hello->label_count; index++) {
        const char *value = hello->labels [index].value;
        for (const char *dot = value; dot;) {
            dot = strchr (dot, '.');
            size_t prefix = dot ? (size_t) (dot - value) : strlen (value);
            s_topic_add (list_p, count_p, "label/%s/%.*s/",
                         hello->labels [index].key, (int) prefix, value);
            if (dot)
                dot++;
        }
    }
}

static void
s_topics_count (s_relay_t *relay, const s_member_t *member, int delta)
{
    for (size_t index = 0; relay && index < member->topic_count; index++) {
        const char *topic = member->topics [index];
        char *count = (char *) zhashx_lookup (relay->topics, topic);
        long long value = (count ? atoll (count) : 0) + delta;
        if (value <= 0)
            zhashx_delete (relay->topics, topic);
        else
            zhashx_update (relay->topics, topic,
                           zsys_sprintf ("%lld", value));
    }
}

void
relays_on_hello (relays_t *self, registry_node_t *node,
                 const relays_path_t *path)
{
    s_member_t *member = (s_member_t *) zhashx_lookup (self->members,
                                                       node->id);
    if (member) {
        s_topics_count (member->connect, member, -1);
        zhashx_delete (self->members, node->id);
    }
    snprintf (node->relay, sizeof node->relay, "%s",
              path && path->relay ? path->relay : "");
    if (!node->via_size || !node->hello)
        return;
    s_relay_t *connect = (s_relay_t *) path->connect;
    s_relay_t *next = (s_relay_t *) path->next;
    member = (s_member_t *) zmalloc (sizeof (s_member_t));
    member->connect = connect;
    member->next = next;
    s_hello_topics (node->hello, &member->topics, &member->topic_count);
    s_topics_count (connect, member, 1);
    zhashx_insert (self->members, node->id, member);
}

const char *
relays_connect_id (relays_t *self, const char *node)
{
    s_member_t *member = (s_member_t *) zhashx_lookup (self->members, node);
    return member && member->connect ? member->connect->id : NULL;
}

int
relays_grant (relays_t *self, auth_t *auth, const char *key,
              const char *topic, size_t len)
{
    if (!key || self->insecure)
        return -1;
    const auth_key_t *record = auth_key (auth, key);
    if (!zhashx_lookup (self->relays, key) && !(record && record->relay))
        return -1;
    s_relay_t *relay = s_live_relay (self, key, record);
    if (!relay || relay->revoked)
        return 0;
    char want [1024];
    if (len >= sizeof want)
        return 0;
    memcpy (want, topic, len);
    want [len] = 0;
    if (zhashx_lookup (relay->topics, want))
        return 1;
    self->refused++;
    relay->refused++;
    return 0;
}

void
relays_tick (relays_t *self, auth_t *auth, registry_t *registry,
             sched_t *sched, int64_t now_ms, relays_save_node_fn *save_node,
             void *arg)
{
    if (self->insecure)
        return;
    for (s_relay_t *relay = (s_relay_t *) zhashx_first (self->relays); relay;
         relay = (s_relay_t *) zhashx_next (self->relays)) {
        const auth_key_t *record = auth_key (auth, relay->id);
        bool rejected = relay->configured
                            ? record && record->status == AUTH_KEY_REJECTED
                            : !record || record->status != AUTH_KEY_ACCEPTED;
        if (rejected == relay->revoked)
            continue;
        relay->revoked = rejected;
        if (!rejected)
            continue;
        //  Every node that came through it goes offline now
        size_t dropped = 0;
        for (s_member_t *member = (s_member_t *) zhashx_first (self->members);
             member; member = (s_member_t *) zhashx_next (self->members)) {
            if (member->connect != relay && member->next != relay)
                continue;
            const char *id = (const char *) zhashx_cursor (self->members);
            registry_node_t *node = registry_lookup (registry, id);
            if (!node || !node->online)
                continue;
            registry_set_offline (node, now_ms);
            save_node (arg, node);
            if (sched)
                sched_on_node_offline (sched, id, now_ms);
            dropped++;
        }
        log_warn ("relay %s was revoked: %zu node%s that came through it "
                  "%s offline", relay->name, dropped, dropped == 1 ? "" : "s",
                  dropped == 1 ? "is" : "are");
    }
}

//  ---------------------------------------------------------------------
//  relay.list

static int
s_compare_infos (const void *a, const void *b)
{
    const relays_info_t *left = (const relays_info_t *) a;
    const relays_info_t *right = (const relays_info_t *) b;
    int rc = strcmp (left->name, right->name);
    return rc ? rc : strcmp (left->id, right->id);
}

relays_info_t *
relays_list (relays_t *self, registry_t *registry, size_t *count_p)
{
    //  One pass over the nodes behind relays counts every relay's agents
    for (s_relay_t *relay = (s_relay_t *) zhashx_first (self->relays); relay;
         relay = (s_relay_t *) zhashx_next (self->relays))
        relay->agents = 0;
    for (s_member_t *member = (s_member_t *) zhashx_first (self->members);
         member; member = (s_member_t *) zhashx_next (self->members)) {
        registry_node_t *node = member->next
                                    ? registry_lookup (
                                          registry,
                                          (const char *) zhashx_cursor (
                                              self->members))
                                    : NULL;
        if (node && node->online)
            member->next->agents++;
    }
    size_t count = 0;
    relays_info_t *list = (relays_info_t *) calloc (
        zhashx_size (self->relays) + 1, sizeof (relays_info_t));
    assert (list);
    for (s_relay_t *relay = (s_relay_t *) zhashx_first (self->relays); relay;
         relay = (s_relay_t *) zhashx_next (self->relays)) {
        if (!relay->entry && !relay->name [0])
            continue;
        relays_info_t *info = &list [count++];
        info->id = relay->id;
        info->name = relay->name;
        info->key = relay->entry ? relay->entry->key : "";
        info->pool = relay->entry ? relay->entry->pool : NULL;
        info->upstream = relay->upstream;
        info->version = relay->version;
        info->agents = relay->agents;
        info->last_seen_ms = relay->last_seen_ms;
        info->last_seen_wall_ms = relay->last_seen_wall_ms;
        info->refused = relay->refused;
        info->revoked = relay->revoked;
    }
    qsort (list, count, sizeof (relays_info_t), s_compare_infos);
    *count_p = count;
    return list;
}
