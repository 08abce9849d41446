/*  =========================================================================
    registry - the broker's table of nodes (see registry.h)
    =========================================================================
*/
#include <czmq.h>

#include "registry.h"

struct _registry_t {
    zhashx_t *nodes;     //  id -> registry_node_t (owned)
    bool seen_known;     //  oldest_seen_ms holds a bound
    int64_t oldest_seen_ms;  //  No online node was last seen before this
};

static void
s_node_destroy (void **item_p)
{
    registry_node_t *node = (registry_node_t *) *item_p;
    if (node) {
        free (node->id);
        free (node->hello_bytes);
        proto_msg_destroy (&node->hello);
        free (node);
        *item_p = NULL;
    }
}

registry_t *
registry_new (void)
{
    registry_t *self = (registry_t *) zmalloc (sizeof (registry_t));
    self->nodes = zhashx_new ();
    zhashx_set_destructor (self->nodes, s_node_destroy);
    return self;
}

void
registry_destroy (registry_t **self_p)
{
    if (self_p && *self_p) {
        zhashx_destroy (&(*self_p)->nodes);
        free (*self_p);
        *self_p = NULL;
    }
}

static registry_node_t *
s_node_get_or_new (registry_t *self, const char *id)
{
    registry_node_t *node = (registry_node_t *) zhashx_lookup (self->nodes, id);
    if (!node) {
        node = (registry_node_t *) zmalloc (sizeof (registry_node_t));
        node->id = strdup (id);
        zhashx_insert (self->nodes, id, node);
    }
    return node;
}

//  Keeps a copy of the hello's bytes (or none).
static void
s_set_hello_bytes (registry_node_t *node, const void *bytes, size_t size)
{
    free (node->hello_bytes);
    node->hello_bytes = NULL;
    node->hello_size = 0;
    if (bytes && size) {
        node->hello_bytes = (uint8_t *) malloc (size);
        assert (node->hello_bytes);
        memcpy (node->hello_bytes, bytes, size);
        node->hello_size = size;
    }
}

registry_node_t *
registry_hello (registry_t *self, proto_msg_t **hello_p, const void *bytes,
                size_t size, const void *routing_id, size_t routing_id_size,
                int64_t now_ms, int64_t wall_ms)
{
    assert (hello_p && *hello_p && (*hello_p)->node);
    registry_node_t *node = s_node_get_or_new (self, (*hello_p)->node);
    proto_msg_destroy (&node->hello);
    node->hello = *hello_p;
    *hello_p = NULL;
    s_set_hello_bytes (node, bytes, size);
    if (!node->registered_wall_ms)
        node->registered_wall_ms = wall_ms;
    node->online = true;
    node->offline_reported = false;
    node->running = 0;
    node->queued = 0;
    if (routing_id_size > REGISTRY_MAX_ROUTING_ID)
        routing_id_size = 0;    //  Cannot happen with ZeroMQ (255 max)
    memcpy (node->routing_id, routing_id, routing_id_size);
    node->routing_id_size = routing_id_size;
    registry_touch (node, now_ms, wall_ms);
    return node;
}

int
registry_load (registry_t *self, const pv_t *record)
{
    size_t hello_len = 0;
    const char *hello_bytes = pv_str (pv_map_get (record, "hello"), &hello_len);
    if (!hello_bytes)
        return -1;
    proto_msg_t *hello = NULL;
    if (proto_msg_decode (hello_bytes, hello_len, &hello, NULL, 0) != 0)
        return -1;
    if (hello->type != PROTO_HELLO) {
        proto_msg_destroy (&hello);
        return -1;
    }
    registry_node_t *node = s_node_get_or_new (self, hello->node);
    proto_msg_destroy (&node->hello);
    node->hello = hello;
    s_set_hello_bytes (node, hello_bytes, hello_len);
    node->online = false;
    //  Restored work on a node that never returns ends through the
    //  scheduler's ack timeouts; no grace timer runs from before the start.
    node->offline_reported = true;
    int64_t value = 0;
    if (pv_get_int (pv_map_get (record, "registered_at_ms"), &value) == 0)
        node->registered_wall_ms = value;
    if (pv_get_int (pv_map_get (record, "last_seen_ms"), &value) == 0)
        node->last_seen_wall_ms = value;
    bool drained = false;
    if (pv_get_bool (pv_map_get (record, "drained"), &drained) == 0)
        node->drained = drained;
    return 0;
}

registry_node_t *
registry_lookup (registry_t *self, const char *id)
{
    return (registry_node_t *) zhashx_lookup (self->nodes, id);
}

registry_node_t *
registry_session (registry_t *self, const char *id, const void *routing_id,
                  size_t routing_id_size)
{
    registry_node_t *node = registry_lookup (self, id);
    if (!node || !node->online || !node->hello)
        return NULL;
    if (node->routing_id_size != routing_id_size
        || memcmp (node->routing_id, routing_id, routing_id_size) != 0)
        return NULL;
    return node;
}

void
registry_touch (registry_node_t *node, int64_t now_ms, int64_t wall_ms)
{
    node->last_seen_ms = now_ms;
    node->last_seen_wall_ms = wall_ms;
}

void
registry_set_offline (registry_node_t *node, int64_t now_ms)
{
    if (node->online)
        node->offline_since_ms = now_ms;
    node->online = false;
    node->running = 0;
    node->queued = 0;
}

size_t
registry_expire (registry_t *self, int64_t now_ms, int64_t timeout_ms,
                 const char ***ids_p)
{
    *ids_p = NULL;
    //  Called every tick, and a scan visits every node. Last-seen times
    //  only move forward (registry_touch and registry_hello take the
    //  monotonic clock), so the oldest one of the last scan bounds them
    //  all: until the timeout passes that bound, nothing can expire.
    if (self->seen_known && now_ms - self->oldest_seen_ms <= timeout_ms)
        return 0;
    size_t count = 0, room = 0;
    self->seen_known = true;
    self->oldest_seen_ms = now_ms;
    registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
    while (node) {
        if (node->online && node->last_seen_ms < self->oldest_seen_ms
            && now_ms - node->last_seen_ms <= timeout_ms)
            self->oldest_seen_ms = node->last_seen_ms;
        if (node->online && now_ms - node->last_seen_ms > timeout_ms) {
            registry_set_offline (node, now_ms);
            if (count == room) {
                room = room ? room * 2 : 16;
                *ids_p = (const char **) realloc (*ids_p, room * sizeof (char *));
                assert (*ids_p);
            }
            (*ids_p) [count++] = node->id;
        }
        node = (registry_node_t *) zhashx_next (self->nodes);
    }
    return count;
}

size_t
registry_overdue (registry_t *self, int64_t now_ms, int64_t grace_ms,
                  const char ***ids_p)
{
    *ids_p = NULL;
    size_t count = 0, room = 0;
    registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
    while (node) {
        if (!node->online && !node->offline_reported && node->hello
            && now_ms - node->offline_since_ms >= grace_ms) {
            node->offline_reported = true;
            if (count == room) {
                room = room ? room * 2 : 16;
                *ids_p = (const char **) realloc (*ids_p, room * sizeof (char *));
                assert (*ids_p);
            }
            (*ids_p) [count++] = node->id;
        }
        node = (registry_node_t *) zhashx_next (self->nodes);
    }
    return count;
}

static bool
s_matches (const registry_node_t *node, const target_t *target)
{
    const proto_msg_t *hello = node->hello;
    if (!hello)
        return false;
    if (target->scope != TARGET_LABEL)
        return target_matches (target, node->id, hello->groups,
                               hello->group_count, NULL, NULL, 0);
    //  Labels travel as key/value pairs; target_matches wants two arrays.
    size_t count = hello->label_count;
    char **keys = (char **) malloc ((count + 1) * 2 * sizeof (char *));
    assert (keys);
    char **values = keys + count + 1;
    for (size_t index = 0; index < count; index++) {
        keys [index] = hello->labels [index].key;
        values [index] = hello->labels [index].value;
    }
    bool matches = target_matches (target, node->id, hello->groups,
                                   hello->group_count, keys, values, count);
    free (keys);
    return matches;
}

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

size_t
registry_resolve (registry_t *self, const target_t *target, char ***ids_p)
{
    *ids_p = NULL;
    size_t count = 0, room = 0;
    //  A node list is looked up id by id instead of scanning every node.
    if (target->scope == TARGET_NODE) {
        for (size_t index = 0; index < target->node_count; index++) {
            registry_node_t *node = registry_lookup (self, target->nodes [index]);
            if (!node || !node->online || node->drained)
                continue;
            if (count == room) {
                room = room ? room * 2 : 16;
                *ids_p = (char **) realloc (*ids_p, room * sizeof (char *));
                assert (*ids_p);
            }
            (*ids_p) [count++] = strdup (node->id);
        }
    }
    else {
        registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
        while (node) {
            if (node->online && !node->drained && s_matches (node, target)) {
                if (count == room) {
                    room = room ? room * 2 : 64;
                    *ids_p = (char **) realloc (*ids_p, room * sizeof (char *));
                    assert (*ids_p);
                }
                (*ids_p) [count++] = strdup (node->id);
            }
            node = (registry_node_t *) zhashx_next (self->nodes);
        }
    }
    if (count > 1)
        qsort (*ids_p, count, sizeof (char *), s_compare_strings);
    return count;
}

size_t
registry_members (registry_t *self, const target_t *target)
{
    size_t count = 0;
    if (target->scope == TARGET_NODE)
        return target->node_count;
    registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
    while (node) {
        if (s_matches (node, target))
            count++;
        node = (registry_node_t *) zhashx_next (self->nodes);
    }
    return count;
}

static const proto_action_spec_t *
s_find_action (const registry_node_t *node, const char *backend,
               const char *action)
{
    const proto_msg_t *hello = node->hello;
    if (!hello)
        return NULL;
    for (size_t b = 0; b < hello->backend_count; b++) {
        const proto_backend_spec_t *spec = &hello->backends [b];
        if (strcmp (spec->name, backend) != 0)
            continue;
        for (size_t a = 0; a < spec->action_count; a++)
            if (strcmp (spec->actions [a].name, action) == 0)
                return &spec->actions [a];
    }
    return NULL;
}

const proto_action_spec_t *
registry_find_action (registry_t *self, const char *backend,
                      const char *action, bool any_state)
{
    const proto_action_spec_t *fallback = NULL;
    registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
    while (node) {
        const proto_action_spec_t *spec = s_find_action (node, backend, action);
        if (spec && node->online)
            return spec;
        if (spec && !fallback)
            fallback = spec;
        node = (registry_node_t *) zhashx_next (self->nodes);
    }
    return any_state ? fallback : NULL;
}

size_t
registry_size (registry_t *self)
{
    return zhashx_size (self->nodes);
}

size_t
registry_online_count (registry_t *self)
{
    size_t count = 0;
    registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
    while (node) {
        if (node->online)
            count++;
        node = (registry_node_t *) zhashx_next (self->nodes);
    }
    return count;
}

static int
s_compare_nodes (const void *a, const void *b)
{
    return strcmp ((*(registry_node_t *const *) a)->id,
                   (*(registry_node_t *const *) b)->id);
}

size_t
registry_list (registry_t *self, registry_node_t ***nodes_p)
{
    size_t count = zhashx_size (self->nodes);
    *nodes_p = NULL;
    if (count == 0)
        return 0;
    *nodes_p = (registry_node_t **) malloc (count * sizeof (registry_node_t *));
    assert (*nodes_p);
    size_t index = 0;
    registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
    while (node) {
        (*nodes_p) [index++] = node;
        node = (registry_node_t *) zhashx_next (self->nodes);
    }
    qsort (*nodes_p, count, sizeof (registry_node_t *), s_compare_nodes);
    return count;
}

static void
s_write_time (pw_t *writer, int64_t wall_ms)
{
    if (wall_ms <= 0) {
        pw_nil (writer);
        return;
    }
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    pw_str (writer, text);
}

static void
s_write_backends (const proto_msg_t *hello, pw_t *writer)
{
    pw_array (writer, hello->backend_count);
    for (size_t b = 0; b < hello->backend_count; b++) {
        const proto_backend_spec_t *backend = &hello->backends [b];
        pw_map (writer, 2);
        pw_str (writer, "name");
        pw_str (writer, backend->name);
        pw_str (writer, "actions");
        pw_array (writer, backend->action_count);
        for (size_t a = 0; a < backend->action_count; a++) {
            const proto_action_spec_t *action = &backend->actions [a];
            pw_map (writer, 4);
            pw_str (writer, "name");
            pw_str (writer, action->name);
            pw_str (writer, "kind");
            pw_str (writer, action->modify ? "modify" : "query");
            pw_str (writer, "help");
            pw_str (writer, action->help ? action->help : "");
            pw_str (writer, "params");
            pw_array (writer, action->param_count);
            for (size_t p = 0; p < action->param_count; p++) {
                const proto_param_spec_t *param = &action->params [p];
                pw_map (writer, 4 + (param->pattern ? 1 : 0)
                                  + (param->default_value ? 1 : 0));
                pw_str (writer, "name");
                pw_str (writer, param->name);
                pw_str (writer, "required");
                pw_bool (writer, param->required);
                pw_str (writer, "type");
                pw_str (writer, param->type ? param->type : "string");
                if (param->pattern) {
                    pw_str (writer, "pattern");
                    pw_str (writer, param->pattern);
                }
                if (param->default_value) {
                    pw_str (writer, "default");
                    pw_str (writer, param->default_value);
                }
                pw_str (writer, "help");
                pw_str (writer, param->help ? param->help : "");
            }
        }
    }
}

void
registry_node_encode (const registry_node_t *node, pw_t *writer,
                      bool with_backends)
{
    const proto_msg_t *hello = node->hello;
    pw_map (writer, 11 + (with_backends ? 1 : 0));
    pw_str (writer, "id");
    pw_str (writer, node->id);
    pw_str (writer, "hostname");
    pw_str (writer, hello && hello->hostname ? hello->hostname : "");
    pw_str (writer, "groups");
    pw_array (writer, hello ? hello->group_count : 0);
    for (size_t index = 0; hello && index < hello->group_count; index++)
        pw_str (writer, hello->groups [index]);
    pw_str (writer, "labels");
    pw_map (writer, hello ? hello->label_count : 0);
    for (size_t index = 0; hello && index < hello->label_count; index++) {
        pw_str (writer, hello->labels [index].key);
        pw_str (writer, hello->labels [index].value);
    }
    pw_str (writer, "status");
    //  A drained node reads draining while it still runs work.
    pw_str (writer, !node->online ? "offline"
                    : !node->drained ? "online"
                    : node->running || node->queued ? "draining" : "drained");
    pw_str (writer, "last_seen");
    s_write_time (writer, node->last_seen_wall_ms);
    pw_str (writer, "registered_at");
    s_write_time (writer, node->registered_wall_ms);
    pw_str (writer, "version");
    pw_str (writer, hello && hello->version ? hello->version : "");
    pw_str (writer, "concurrency");
    pw_int (writer, hello ? hello->concurrency : 0);
    pw_str (writer, "running");
    pw_int (writer, node->running);
    pw_str (writer, "drained");
    pw_bool (writer, node->drained);
    if (with_backends) {
        pw_str (writer, "backends");
        if (hello)
            s_write_backends (hello, writer);
        else
            pw_array (writer, 0);
    }
}

void
registry_node_encode_record (const registry_node_t *node, pw_t *writer)
{
    pw_t *hello = NULL;
    pw_map (writer, 4);
    pw_str (writer, "hello");
    if (node->hello_bytes)
        pw_bin (writer, node->hello_bytes, node->hello_size);
    else {
        hello = pw_new ();
        int rc = proto_msg_encode (node->hello, hello);
        assert (rc == 0);       //  It was decoded, so it encodes
        pw_bin (writer, pw_data (hello), pw_size (hello));
    }
    pw_str (writer, "registered_at_ms");
    pw_int (writer, node->registered_wall_ms);
    pw_str (writer, "last_seen_ms");
    pw_int (writer, node->last_seen_wall_ms);
    pw_str (writer, "drained");
    pw_bool (writer, node->drained);
    pw_destroy (&hello);
}
