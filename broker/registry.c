/*  =========================================================================
    registry - the broker's table of nodes (see registry.h)
    =========================================================================
*/
#include <czmq.h>

#include "factindex.h"
#include "nodeset.h"
#include "registry.h"

//  Nodes in order of one of their times, through one of their links. A
//  node is (re)queued from the back: its time is nearly always the
//  latest, so the walk to its place stops at once.
typedef struct {
    registry_node_t *head;  //  Earliest time
    registry_node_t *tail;  //  Latest time
    size_t link;            //  Offset of the registry_link_t in a node
    size_t key;             //  Offset of the int64_t time in a node
} s_queue_t;

struct _registry_t {
    zhashx_t *nodes;     //  id -> registry_node_t (owned)
    zhashx_t *backend_sets;  //  registry_backend_set_t -> itself (owned)
    zhashx_t *sets_by_bytes; //  The same sets, keyed by their encoding
                             //  (registry_backends_find)
    pw_t *scratch;       //  A node's hello, while its record is written
    //  Liveness deadlines in order, so that a check costs one look at the
    //  front plus one per node whose deadline passed, never a walk of
    //  every node: a node's deadline is its last_seen_ms (or its
    //  offline_since_ms) plus a timeout the same for all.
    s_queue_t by_seen;      //  Online nodes, oldest last_seen_ms first
    s_queue_t by_offline;   //  Offline nodes whose grace runs, oldest
                            //  offline_since_ms first
    s_queue_t by_unsaved;   //  Nodes heard from since their last-seen time
                            //  was saved, oldest unsaved_since_ms first
    uint64_t deadline_visits;  //  Nodes the liveness checks looked at
    factindex_t *facts;     //  Nodes by fact value (fact targets)
    zhashx_t *members;      //  "g:<group>" and "l:<key>=<value>" (the
                            //  value and each dotted prefix of it) ->
                            //  nodeset_t of the slots holding it (owned)
    registry_node_t **by_slot;  //  Nodes by slot (nodes are never removed
    size_t slot_count;          //  but all at once: slots run from 0 to
    size_t slot_room;           //  slot_count - 1, none free)
    uint64_t changes;       //  Nodes added, online, offline, drained or
                            //  resumed (registry_changes)
};

//  The first three fields are the set's key: a lookup passes a set of its
//  own that holds only them (s_set_hash, s_set_compare).
struct _registry_backend_set_t {
    uint64_t hash;                       //  s_backends_hash of the list
    proto_backend_spec_t *backends;      //  The decoded list (in holder)
    size_t backend_count;                //  Entries in backends
    proto_msg_t *holder;                 //  Owns the list (its only field)
    uint8_t *bytes;                      //  The list as a msgpack array
    size_t size;                         //  Bytes in bytes
    size_t refs;                         //  Nodes that declare it
    registry_t *owner;                   //  Registry that keeps it
    uint64_t bytes_hash;                 //  s_hash_bytes of bytes
};


//  ---------------------------------------------------------------------
//  Interned backend lists. The key is a hash of the decoded list rather
//  than of its encoding: encoding every hello's backends only to hash them
//  costs several times more than walking them (each interned list is
//  encoded once, when it is first seen).

#define S_HASH_SEED 0x9e3779b97f4a7c15ULL
#define S_HASH_PRIME 0x100000001b3ULL

//  Eight bytes a step: the declarations run to kilobytes per hello, and
//  a byte at a time costs four times as much. The hash only sorts lists
//  into buckets; equal hashes are always compared in full.
static uint64_t
s_hash_word (uint64_t hash, uint64_t word)
{
    hash = (hash ^ word) * S_HASH_PRIME;
    return hash ^ (hash >> 29);
}

static uint64_t
s_hash_bytes (uint64_t hash, const void *data, size_t size)
{
    const uint8_t *byte = (const uint8_t *) data;
    uint64_t word;
    for (; size >= sizeof word; size -= sizeof word, byte += sizeof word) {
        memcpy (&word, byte, sizeof word);
        hash = s_hash_word (hash, word);
    }
    word = 0;
    memcpy (&word, byte, size);
    return s_hash_word (hash, word ^ ((uint64_t) size << 56));
}

//  Each string's length goes in with its last word, so that "ab","c" and
//  "a","bc" hash apart; a missing string hashes as a word of all ones.
static uint64_t
s_hash_text (uint64_t hash, const char *text)
{
    if (!text)
        return s_hash_word (hash, UINT64_MAX);
    return s_hash_bytes (hash, text, strlen (text));
}

static uint64_t
s_backends_hash (const proto_backend_spec_t *backends, size_t count)
{
    uint64_t hash = s_hash_word (S_HASH_SEED, count);
    for (size_t b = 0; b < count; b++) {
        const proto_backend_spec_t *backend = &backends [b];
        hash = s_hash_text (hash, backend->name);
        hash = s_hash_text (hash, backend->version);
        hash = s_hash_word (hash, backend->action_count);
        for (size_t a = 0; a < backend->action_count; a++) {
            const proto_action_spec_t *action = &backend->actions [a];
            hash = s_hash_text (hash, action->name);
            hash = s_hash_word (hash, action->modify);
            hash = s_hash_word (hash, action->idempotent);
            hash = s_hash_text (hash, action->help);
            hash = s_hash_word (hash, action->param_count);
            for (size_t p = 0; p < action->param_count; p++) {
                const proto_param_spec_t *param = &action->params [p];
                hash = s_hash_text (hash, param->name);
                hash = s_hash_word (hash, param->required);
                hash = s_hash_text (hash, param->type);
                hash = s_hash_text (hash, param->pattern);
                hash = s_hash_text (hash, param->default_value);
                hash = s_hash_text (hash, param->help);
                hash = s_hash_word (hash, (uint64_t) param->min_value);
                hash = s_hash_word (hash, (uint64_t) param->max_value);
            }
        }
    }
    return hash;
}

static bool
s_text_equal (const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp (a, b) == 0;
}

static bool
s_params_equal (const proto_param_spec_t *a, const proto_param_spec_t *b)
{
    return a->required == b->required && a->min_value == b->min_value
        && a->max_value == b->max_value && s_text_equal (a->name, b->name)
        && s_text_equal (a->type, b->type)
        && s_text_equal (a->pattern, b->pattern)
        && s_text_equal (a->default_value, b->default_value)
        && s_text_equal (a->help, b->help);
}

static bool
s_actions_equal (const proto_action_spec_t *a, const proto_action_spec_t *b)
{
    if (a->modify != b->modify || a->idempotent != b->idempotent
        || a->param_count != b->param_count
        || !s_text_equal (a->name, b->name) || !s_text_equal (a->help, b->help))
        return false;
    for (size_t p = 0; p < a->param_count; p++)
        if (!s_params_equal (&a->params [p], &b->params [p]))
            return false;
    return true;
}

static bool
s_backends_equal (const proto_backend_spec_t *a, size_t a_count,
                  const proto_backend_spec_t *b, size_t b_count)
{
    if (a_count != b_count)
        return false;
    for (size_t index = 0; index < a_count; index++) {
        const proto_backend_spec_t *one = &a [index], *other = &b [index];
        if (one->action_count != other->action_count
            || !s_text_equal (one->name, other->name)
            || !s_text_equal (one->version, other->version))
            return false;
        for (size_t at = 0; at < one->action_count; at++)
            if (!s_actions_equal (&one->actions [at], &other->actions [at]))
                return false;
    }
    return true;
}

static size_t
s_set_hash (const void *key)
{
    return (size_t) ((const registry_backend_set_t *) key)->hash;
}

static int
s_set_compare (const void *a, const void *b)
{
    const registry_backend_set_t *one = (const registry_backend_set_t *) a;
    const registry_backend_set_t *other = (const registry_backend_set_t *) b;
    if (one->hash != other->hash)
        return one->hash < other->hash ? -1 : 1;
    return s_backends_equal (one->backends, one->backend_count,
                             other->backends, other->backend_count) ? 0 : 1;
}

//  Writes BACKENDS as the hello's "backends" value (proto/PROTOCOL.md,
//  section 4.2), in the order and with the optional keys proto_msg_encode
//  gives them, so that a record holds the bytes the codec would write.
static void
s_write_wire_backends (pw_t *writer, const proto_backend_spec_t *backends,
                       size_t count)
{
    pw_array (writer, count);
    for (size_t b = 0; b < count; b++) {
        const proto_backend_spec_t *backend = &backends [b];
        pw_map (writer, 2 + (backend->version ? 1 : 0));
        pw_str (writer, "name");
        pw_str (writer, backend->name);
        pw_str (writer, "actions");
        pw_array (writer, backend->action_count);
        for (size_t a = 0; a < backend->action_count; a++) {
            const proto_action_spec_t *action = &backend->actions [a];
            pw_map (writer, 4 + (action->idempotent ? 1 : 0));
            pw_str (writer, "name");
            pw_str (writer, action->name);
            pw_str (writer, "kind");
            pw_str (writer, action->modify ? "modify" : "query");
            pw_str (writer, "help");
            pw_str (writer, action->help);
            pw_str (writer, "params");
            pw_array (writer, action->param_count);
            for (size_t p = 0; p < action->param_count; p++) {
                const proto_param_spec_t *param = &action->params [p];
                bool ranged = param->min_value < param->max_value;
                pw_map (writer, 4 + (param->pattern ? 1 : 0)
                                  + (param->default_value ? 1 : 0)
                                  + (ranged ? 2 : 0));
                pw_str (writer, "name");
                pw_str (writer, param->name);
                pw_str (writer, "required");
                pw_bool (writer, param->required);
                pw_str (writer, "type");
                pw_str (writer, param->type);
                if (param->pattern) {
                    pw_str (writer, "pattern");
                    pw_str (writer, param->pattern);
                }
                if (param->default_value) {
                    pw_str (writer, "default");
                    pw_str (writer, param->default_value);
                }
                pw_str (writer, "help");
                pw_str (writer, param->help);
                if (ranged) {
                    pw_str (writer, "min");
                    pw_int (writer, param->min_value);
                    pw_str (writer, "max");
                    pw_int (writer, param->max_value);
                }
            }
            if (action->idempotent) {
                pw_str (writer, "idempotent");
                pw_bool (writer, true);
            }
        }
        if (backend->version) {
            pw_str (writer, "version");
            pw_str (writer, backend->version);
        }
    }
}

//  The index of sets by their encoding: a lookup passes a set of its own
//  that holds only bytes, size and bytes_hash.
static size_t
s_set_bytes_hash (const void *key)
{
    return (size_t) ((const registry_backend_set_t *) key)->bytes_hash;
}

static int
s_set_bytes_compare (const void *a, const void *b)
{
    const registry_backend_set_t *one = (const registry_backend_set_t *) a;
    const registry_backend_set_t *other = (const registry_backend_set_t *) b;
    if (one->bytes_hash != other->bytes_hash)
        return one->bytes_hash < other->bytes_hash ? -1 : 1;
    if (one->size != other->size)
        return one->size < other->size ? -1 : 1;
    return memcmp (one->bytes, other->bytes, one->size);
}

static void
s_set_destroy (void **item_p)
{
    registry_backend_set_t *set = (registry_backend_set_t *) *item_p;
    if (set) {
        proto_msg_destroy (&set->holder);
        free (set->bytes);
        free (set);
        *item_p = NULL;
    }
}

//  Points HELLO's backends at the interned list equal to them, made from
//  them when there is none, and frees the hello's own list. Returns the
//  list, with one more reference.
static registry_backend_set_t *
s_intern (registry_t *self, proto_msg_t *hello)
{
    registry_backend_set_t probe;
    memset (&probe, 0, sizeof probe);
    probe.backends = hello->backends;
    probe.backend_count = hello->backend_count;
    probe.hash = s_backends_hash (probe.backends, probe.backend_count);
    registry_backend_set_t *set = (registry_backend_set_t *)
        zhashx_lookup (self->backend_sets, &probe);
    if (set) {
        //  proto_msg_destroy is the one way to free a decoded list
        proto_msg_t *spare = proto_msg_new (PROTO_HELLO);
        assert (spare);
        spare->backends = hello->backends;
        spare->backend_count = hello->backend_count;
        proto_msg_destroy (&spare);
    }
    else {
        set = (registry_backend_set_t *) zmalloc (sizeof *set);
        set->hash = probe.hash;
        set->holder = proto_msg_new (PROTO_HELLO);
        assert (set->holder);
        set->holder->backends = hello->backends;
        set->holder->backend_count = hello->backend_count;
        set->backends = hello->backends;
        set->backend_count = hello->backend_count;
        set->owner = self;
        pw_reset (self->scratch);
        s_write_wire_backends (self->scratch, set->backends,
                               set->backend_count);
        set->size = pw_size (self->scratch);
        set->bytes = (uint8_t *) malloc (set->size);
        assert (set->bytes);
        memcpy (set->bytes, pw_data (self->scratch), set->size);
        set->bytes_hash = s_hash_bytes (S_HASH_SEED, set->bytes, set->size);
        int rc = zhashx_insert (self->backend_sets, set, set);
        assert (rc == 0);
        //  Lists that decode alike encode alike: at most one set per
        //  encoding
        rc = zhashx_insert (self->sets_by_bytes, set, set);
        assert (rc == 0);
    }
    set->refs++;
    hello->backends = set->backends;
    hello->backend_count = set->backend_count;
    return set;
}

//  Frees NODE's hello, giving its backends back to their interned list,
//  which goes when no node declares it any longer.
static void
s_node_release_hello (registry_node_t *node)
{
    registry_backend_set_t *set = node->backend_set;
    if (node->hello) {
        node->hello->backends = NULL;
        node->hello->backend_count = 0;
        proto_msg_destroy (&node->hello);
    }
    node->backend_set = NULL;
    if (set && --set->refs == 0) {
        zhashx_delete (set->owner->sets_by_bytes, set);
        zhashx_delete (set->owner->backend_sets, set);
    }
}

//  ---------------------------------------------------------------------
//  Nodes by group and by label, for targets: each group and each label
//  value (with every dotted prefix of it, as label:tier=web covers
//  tier=web.dev) keeps the set of its nodes' slots.

static void
s_nodeset_destroy (void **item_p)
{
    nodeset_destroy ((nodeset_t **) item_p);
}

//  The set of slots under KEY, made when MAKE and there is none; or NULL.
static nodeset_t *
s_members (registry_t *self, const char *key, bool make)
{
    nodeset_t *set = (nodeset_t *) zhashx_lookup (self->members, key);
    if (!set && make) {
        set = nodeset_new ();
        assert (set);
        zhashx_insert (self->members, key, set);
    }
    return set;
}

//  Adds (ADD) or removes SLOT under KEY; a set left empty goes.
static void
s_member_set (registry_t *self, const char *key, uint32_t slot, bool add)
{
    nodeset_t *set = s_members (self, key, add);
    if (add) {
        int rc = nodeset_add (set, slot);
        assert (rc == 0);
    }
    else
    if (set) {
        nodeset_remove (set, slot);
        if (nodeset_size (set) == 0)
            zhashx_delete (self->members, key);
    }
}

//  Adds (ADD) or removes SLOT under every group and label of HELLO.
static void
s_members_update (registry_t *self, const proto_msg_t *hello, uint32_t slot,
                  bool add)
{
    for (size_t index = 0; index < hello->group_count; index++) {
        if (!hello->groups [index])
            continue;
        char *key = zsys_sprintf ("g:%s", hello->groups [index]);
        assert (key);
        s_member_set (self, key, slot, add);
        zstr_free (&key);
    }
    for (size_t index = 0; index < hello->label_count; index++) {
        const proto_kv_t *label = &hello->labels [index];
        if (!label->key || !label->value)
            continue;
        char *key = zsys_sprintf ("l:%s=%s", label->key, label->value);
        assert (key);
        //  The value, then each prefix that ends before a dot
        size_t whole = strlen (key);
        size_t from = whole - strlen (label->value);
        for (size_t end = from; end <= whole; end++)
            if (end == whole || (key [end] == '.' && end > from)) {
                char cut = key [end];
                key [end] = 0;
                s_member_set (self, key, slot, add);
                key [end] = cut;
            }
        zstr_free (&key);
    }
}

//  Whether two hellos name the same groups and labels, in the same order.
static bool
s_same_members (const proto_msg_t *one, const proto_msg_t *other)
{
    if (one->group_count != other->group_count
        || one->label_count != other->label_count)
        return false;
    for (size_t index = 0; index < one->group_count; index++)
        if (!s_text_equal (one->groups [index], other->groups [index]))
            return false;
    for (size_t index = 0; index < one->label_count; index++)
        if (!s_text_equal (one->labels [index].key, other->labels [index].key)
            || !s_text_equal (one->labels [index].value,
                              other->labels [index].value))
            return false;
    return true;
}

//  Gives NODE the hello taken from *HELLO_P, its backends interned; or,
//  when KNOWN, the hello has no list of its own and declares KNOWN.
static void
s_node_set_hello (registry_t *self, registry_node_t *node,
                  proto_msg_t **hello_p, registry_backend_set_t *known)
{
    //  Interned first: a node that says hello again with the same
    //  backends keeps their list instead of freeing and rebuilding it
    registry_backend_set_t *set = known;
    if (set) {
        assert ((*hello_p)->backends == NULL);
        set->refs++;
        (*hello_p)->backends = set->backends;
        (*hello_p)->backend_count = set->backend_count;
    }
    else
        set = s_intern (self, *hello_p);
    //  Its groups and labels move in the index when they changed
    bool same = node->hello && s_same_members (node->hello, *hello_p);
    if (node->hello && !same)
        s_members_update (self, node->hello, node->slot, false);
    if (!same)
        s_members_update (self, *hello_p, node->slot, true);
    s_node_release_hello (node);
    node->hello = *hello_p;
    node->backend_set = set;
    *hello_p = NULL;
}

//  ---------------------------------------------------------------------
//  Queues of nodes by time

static void
s_queue_init (s_queue_t *queue, size_t link, size_t key)
{
    queue->head = queue->tail = NULL;
    queue->link = link;
    queue->key = key;
}

static inline registry_link_t *
s_link (const s_queue_t *queue, registry_node_t *node)
{
    return (registry_link_t *) ((char *) node + queue->link);
}

static inline int64_t
s_key (const s_queue_t *queue, const registry_node_t *node)
{
    int64_t key;
    memcpy (&key, (const char *) node + queue->key, sizeof key);
    return key;
}

static void
s_queue_remove (s_queue_t *queue, registry_node_t *node)
{
    registry_link_t *link = s_link (queue, node);
    if (!link->queued)
        return;
    if (link->prev)
        s_link (queue, link->prev)->next = link->next;
    else
        queue->head = link->next;
    if (link->next)
        s_link (queue, link->next)->prev = link->prev;
    else
        queue->tail = link->prev;
    link->prev = link->next = NULL;
    link->queued = false;
}

//  Puts NODE (queued or not) at its place by its time: after every node
//  whose time is not later, so equal times keep their arrival order.
static void
s_queue_place (s_queue_t *queue, registry_node_t *node)
{
    registry_link_t *link = s_link (queue, node);
    int64_t key = s_key (queue, node);
    //  Already last and in order: the common case of a message
    if (link->queued && !link->next
        && (!link->prev || s_key (queue, link->prev) <= key))
        return;
    s_queue_remove (queue, node);
    registry_node_t *after = queue->tail;
    while (after && s_key (queue, after) > key)
        after = s_link (queue, after)->prev;
    link->prev = after;
    link->next = after ? s_link (queue, after)->next : queue->head;
    if (link->next)
        s_link (queue, link->next)->prev = node;
    else
        queue->tail = node;
    if (after)
        s_link (queue, after)->next = node;
    else
        queue->head = node;
    link->queued = true;
}

static void
s_node_destroy (void **item_p)
{
    registry_node_t *node = (registry_node_t *) *item_p;
    if (node) {
        s_node_release_hello (node);
        free (node->id);
        free (node->duplicate_hostname);
        free (node->incompatible);
        for (size_t index = 0; index < node->fact_count; index++) {
            free (node->facts [index].key);
            free (node->facts [index].value);
        }
        free (node->facts);
        free (node);
        *item_p = NULL;
    }
}

void
registry_note_duplicate (registry_node_t *node, const char *hostname,
                         int64_t wall_ms)
{
    node->duplicates++;
    node->duplicate_wall_ms = wall_ms;
    free (node->duplicate_hostname);
    node->duplicate_hostname = hostname ? strdup (hostname) : NULL;
}

registry_t *
registry_new (void)
{
    registry_t *self = (registry_t *) zmalloc (sizeof (registry_t));
    self->nodes = zhashx_new ();
    zhashx_set_destructor (self->nodes, s_node_destroy);
    self->backend_sets = zhashx_new ();
    zhashx_set_key_hasher (self->backend_sets, s_set_hash);
    zhashx_set_key_comparator (self->backend_sets, s_set_compare);
    zhashx_set_key_duplicator (self->backend_sets, NULL);
    zhashx_set_key_destructor (self->backend_sets, NULL);
    zhashx_set_destructor (self->backend_sets, s_set_destroy);
    self->sets_by_bytes = zhashx_new ();
    zhashx_set_key_hasher (self->sets_by_bytes, s_set_bytes_hash);
    zhashx_set_key_comparator (self->sets_by_bytes, s_set_bytes_compare);
    zhashx_set_key_duplicator (self->sets_by_bytes, NULL);
    zhashx_set_key_destructor (self->sets_by_bytes, NULL);
    self->scratch = pw_new ();
    self->facts = factindex_new ();
    assert (self->facts);
    self->members = zhashx_new ();
    zhashx_set_destructor (self->members, s_nodeset_destroy);
    zhashx_set_key_hasher (self->members, id_hash);
    s_queue_init (&self->by_seen, offsetof (registry_node_t, by_seen),
                  offsetof (registry_node_t, last_seen_ms));
    s_queue_init (&self->by_offline, offsetof (registry_node_t, by_offline),
                  offsetof (registry_node_t, offline_since_ms));
    s_queue_init (&self->by_unsaved, offsetof (registry_node_t, by_unsaved),
                  offsetof (registry_node_t, unsaved_since_ms));
    return self;
}

void
registry_destroy (registry_t **self_p)
{
    if (self_p && *self_p) {
        registry_t *self = *self_p;
        //  Nodes first: each gives its backend list back
        zhashx_destroy (&self->nodes);
        assert (zhashx_size (self->backend_sets) == 0);
        zhashx_destroy (&self->sets_by_bytes);
        zhashx_destroy (&self->backend_sets);
        pw_destroy (&self->scratch);
        factindex_destroy (&self->facts);
        zhashx_destroy (&self->members);
        free (self->by_slot);
        free (self);
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
        node->owner = self;
        if (self->slot_count == self->slot_room) {
            self->slot_room = self->slot_room ? self->slot_room * 2 : 64;
            self->by_slot = (registry_node_t **) realloc (
                self->by_slot, self->slot_room * sizeof (registry_node_t *));
            assert (self->by_slot);
        }
        assert (self->slot_count < UINT32_MAX);
        node->slot = (uint32_t) self->slot_count++;
        self->by_slot [node->slot] = node;
        zhashx_insert (self->nodes, id, node);
    }
    return node;
}

const registry_backend_set_t *
registry_backends_find (registry_t *self, const void *bytes, size_t size)
{
    registry_backend_set_t probe;
    memset (&probe, 0, sizeof probe);
    probe.bytes = (uint8_t *) bytes;
    probe.size = size;
    probe.bytes_hash = s_hash_bytes (S_HASH_SEED, bytes, size);
    return (const registry_backend_set_t *) zhashx_lookup (
        self->sets_by_bytes, &probe);
}

const proto_backend_spec_t *
registry_backends_list (const registry_backend_set_t *set, size_t *count_p)
{
    *count_p = set->backend_count;
    return set->backends;
}

registry_node_t *
registry_hello (registry_t *self, proto_msg_t **hello_p,
                const void *routing_id, size_t routing_id_size,
                int64_t now_ms, int64_t wall_ms)
{
    return registry_hello_declaring (self, hello_p, NULL, routing_id,
                                     routing_id_size, now_ms, wall_ms);
}

registry_node_t *
registry_hello_declaring (registry_t *self, proto_msg_t **hello_p,
                          const registry_backend_set_t *known,
                          const void *routing_id, size_t routing_id_size,
                          int64_t now_ms, int64_t wall_ms)
{
    assert (hello_p && *hello_p && (*hello_p)->node);
    registry_node_t *node = s_node_get_or_new (self, (*hello_p)->node);
    //  The set is the registry's own: lent back to it as it was found
    s_node_set_hello (self, node, hello_p, (registry_backend_set_t *) known);
    if (!node->registered_wall_ms)
        node->registered_wall_ms = wall_ms;
    node->online = true;
    self->changes++;
    node->offline_reported = false;
    free (node->incompatible);
    node->incompatible = NULL;
    s_queue_remove (&self->by_offline, node);
    node->running = 0;
    node->queued = 0;
    if (routing_id_size > REGISTRY_MAX_ROUTING_ID)
        routing_id_size = 0;    //  Cannot happen with ZeroMQ (255 max)
    memcpy (node->routing_id, routing_id, routing_id_size);
    node->routing_id_size = routing_id_size;
    node->via_size = 0;
    node->relay [0] = 0;
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
    //  Stored at the oldest version (registry_node_encode_record): the
    //  node's own is known again at its next hello
    hello->protocol = 0;
    registry_node_t *node = s_node_get_or_new (self, hello->node);
    s_node_set_hello (self, node, &hello, NULL);
    node->online = false;
    s_queue_remove (&self->by_seen, node);
    s_queue_remove (&self->by_offline, node);
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
    size_t relay_len = 0;
    const char *relay = pv_str (pv_map_get (record, "relay"), &relay_len);
    node->relay [0] = 0;
    if (relay && relay_len < sizeof node->relay) {
        memcpy (node->relay, relay, relay_len);
        node->relay [relay_len] = 0;
        if (!name_valid (node->relay))
            node->relay [0] = 0;
    }
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
    registry_t *self = node->owner;
    if (node->online)
        s_queue_place (&self->by_seen, node);
    if (!node->by_unsaved.queued) {
        node->unsaved_since_ms = now_ms;
        s_queue_place (&self->by_unsaved, node);
    }
}

void
registry_set_offline (registry_node_t *node, int64_t now_ms)
{
    registry_t *self = node->owner;
    if (node->online) {
        self->changes++;
        node->offline_since_ms = now_ms;
        s_queue_remove (&self->by_seen, node);
        s_queue_place (&self->by_offline, node);
    }
    node->online = false;
    node->running = 0;
    node->queued = 0;
}

static void
s_ids_add (const char ***ids_p, size_t *count, size_t *room, const char *id)
{
    if (*count == *room) {
        *room = *room ? *room * 2 : 16;
        *ids_p = (const char **) realloc (*ids_p, *room * sizeof (char *));
        assert (*ids_p);
    }
    (*ids_p) [(*count)++] = id;
}

size_t
registry_expire (registry_t *self, int64_t now_ms, int64_t timeout_ms,
                 const char ***ids_p)
{
    *ids_p = NULL;
    size_t count = 0, room = 0;
    //  Online nodes by last_seen_ms: the first one still within the
    //  timeout ends the check
    registry_node_t *node;
    while ((node = self->by_seen.head) != NULL) {
        self->deadline_visits++;
        if (now_ms - node->last_seen_ms <= timeout_ms)
            break;
        registry_set_offline (node, now_ms);
        s_ids_add (ids_p, &count, &room, node->id);
    }
    return count;
}

size_t
registry_overdue (registry_t *self, int64_t now_ms, int64_t grace_ms,
                  const char ***ids_p)
{
    *ids_p = NULL;
    size_t count = 0, room = 0;
    //  Offline nodes by offline_since_ms. A node whose work was declared
    //  lost otherwise (a bye) stays queued until its grace ends, and
    //  leaves then with nothing to report.
    registry_node_t *node;
    while ((node = self->by_offline.head) != NULL) {
        self->deadline_visits++;
        if (now_ms - node->offline_since_ms < grace_ms)
            break;
        s_queue_remove (&self->by_offline, node);
        if (!node->online && !node->offline_reported && node->hello) {
            node->offline_reported = true;
            s_ids_add (ids_p, &count, &room, node->id);
        }
    }
    return count;
}

uint64_t
registry_deadline_visits (registry_t *self)
{
    return self->deadline_visits;
}

registry_node_t *
registry_unsaved_first (registry_t *self)
{
    return self->by_unsaved.head;
}

void
registry_seen_saved (registry_node_t *node)
{
    s_queue_remove (&node->owner->by_unsaved, node);
}

static const char *
s_fact_of (const void *node, const char *name)
{
    return registry_node_fact ((const registry_node_t *) node, name);
}

static bool
s_matches (const registry_node_t *node, const target_t *target)
{
    const proto_msg_t *hello = node->hello;
    if (!hello)
        return false;
    if (target->scope == TARGET_FACT)
        return fact_test_matches (&target->fact,
                                  registry_node_fact (node, target->fact_key));
    if (target->scope != TARGET_LABEL && target->scope != TARGET_EXPR)
        return target_matches (target, node->id, hello->groups,
                               hello->group_count, NULL, NULL, 0);
    //  Labels travel as key/value pairs; target_matches wants two arrays.
    size_t count = hello->label_count;
    char *few [32];             //  Most nodes have a few labels: no malloc
    char **keys = count < 16 ? few
                : (char **) malloc ((count + 1) * 2 * sizeof (char *));
    assert (keys);
    char **values = keys + count + 1;
    for (size_t index = 0; index < count; index++) {
        keys [index] = hello->labels [index].key;
        values [index] = hello->labels [index].value;
    }
    target_subject_t subject = {.node_id = node->id, .groups = hello->groups,
                                .group_count = hello->group_count,
                                .label_keys = keys, .label_values = values,
                                .label_count = count, .fact = s_fact_of,
                                .fact_arg = node};
    bool matches = target_matches_subject (target, &subject);
    if (keys != few)
        free (keys);
    return matches;
}

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  ---------------------------------------------------------------------
//  Candidates from the indexes. A target's terms are answered by the
//  indexes as bitmaps over the slots (nodeset.h): a group, a label and a
//  fact term are the set their index keeps, a node list the slots of its
//  ids; "and" intersects its kids' sets (a kid that cannot narrow, such
//  as `all`, is left out), "or" unites them, "not" complements its kid's
//  set when that set is exact. A set is exact when it holds the matching
//  nodes and no other; otherwise it is a superset, and each of its nodes
//  is tested against the whole target.

//  The candidates of TERM in BITS (WORDS words, zeroed by the caller):
//  returns false when every node is one (BITS unused then). *EXACT_P
//  tells whether they are exactly the nodes matching TERM.
static bool
s_term_candidates (registry_t *self, const target_t *term, uint64_t *bits,
                   size_t words, bool *exact_p)
{
    *exact_p = true;
    switch (term->scope) {
    case TARGET_ALL:
        return false;
    case TARGET_GROUP:
    case TARGET_LABEL: {
        char *key = term->scope == TARGET_GROUP
                        ? zsys_sprintf ("g:%s", term->value)
                        : zsys_sprintf ("l:%s=%s", term->label_key,
                                        term->label_value);
        assert (key);
        nodeset_t *set = s_members (self, key, false);
        if (set)
            nodeset_mark (set, bits, words);
        zstr_free (&key);
        return true;
    }
    case TARGET_FACT:
        factindex_mark (self->facts, term->fact_key, &term->fact, bits, words);
        return true;
    case TARGET_NODE:
        for (size_t index = 0; index < term->node_count; index++) {
            registry_node_t *node = registry_lookup (self, term->nodes [index]);
            if (node && node->slot / 64 < words)
                bits [node->slot / 64] |= 1ULL << (node->slot % 64);
        }
        return true;
    case TARGET_EXPR:
        break;
    }
    *exact_p = false;
    return false;
}

//  s_term_candidates for an expression.
static bool
s_expr_candidates (registry_t *self, const target_expr_t *expr,
                   uint64_t *bits, size_t words, bool *exact_p)
{
    target_expr_op_t op = target_expr_op (expr);
    if (op == TARGET_EXPR_TERM)
        return s_term_candidates (self, target_expr_term (expr), bits, words,
                                  exact_p);
    //  (One word at least: an empty registry has none)
    uint64_t *kid = (uint64_t *) malloc ((words ? words : 1)
                                         * sizeof (uint64_t));
    assert (kid);
    bool some = false, exact = true;
    if (op == TARGET_EXPR_NOT) {
        memset (kid, 0, words * sizeof (uint64_t));
        if (s_expr_candidates (self, target_expr_kid (expr, 0), kid, words,
                               &exact)) {
            //  The slots not in an exact set (those beyond the last node
            //  are never read)
            for (size_t word = 0; word < words; word++)
                bits [word] = ~kid [word];
            some = exact;
        }
        else
            //  The kid takes every node: if exactly so, none passes the
            //  "not" (an empty set); if as a superset, anything may
            some = exact;
    }
    else {
        bool intersect = op == TARGET_EXPR_AND;
        some = !intersect;
        for (size_t index = 0; index < target_expr_kid_count (expr);
             index++) {
            bool kid_exact = false;
            memset (kid, 0, words * sizeof (uint64_t));
            bool narrows = s_expr_candidates (self,
                                              target_expr_kid (expr, index),
                                              kid, words, &kid_exact);
            exact = exact && kid_exact;
            if (!narrows && !intersect) {
                //  One kid takes every node: so does the "or"
                exact = kid_exact;
                some = false;
                break;
            }
            if (!narrows)
                continue;
            for (size_t word = 0; word < words; word++)
                bits [word] = intersect && !some ? kid [word]
                            : intersect          ? bits [word] & kid [word]
                                                 : bits [word] | kid [word];
            some = true;
        }
    }
    free (kid);
    *exact_p = exact;
    return some;
}

//  Calls FN (NODE, ARG) for each node matching TARGET (ignoring "any"),
//  in no order, starting from the candidates the indexes give.
static void
s_each_match (registry_t *self, const target_t *target,
              void (*fn) (registry_node_t *node, void *arg), void *arg)
{
    size_t words = (self->slot_count + 63) / 64;
    uint64_t *bits = (uint64_t *) calloc (words ? words : 1,
                                          sizeof (uint64_t));
    assert (bits);
    bool exact = false;
    bool narrowed = target->scope == TARGET_EXPR
                        ? target->expr
                              && s_expr_candidates (self, target->expr, bits,
                                                    words, &exact)
                        : s_term_candidates (self, target, bits, words,
                                             &exact);
    if (!narrowed) {
        for (registry_node_t *node = (registry_node_t *) zhashx_first (
                 self->nodes);
             node; node = (registry_node_t *) zhashx_next (self->nodes))
            if (exact ? node->hello != NULL : s_matches (node, target))
                fn (node, arg);
        free (bits);
        return;
    }
    for (size_t word = 0; word < words; word++)
        for (uint64_t rest = bits [word]; rest; rest &= rest - 1) {
            size_t slot = word * 64 + (size_t) __builtin_ctzll (rest);
            if (slot >= self->slot_count)
                break;
            registry_node_t *node = self->by_slot [slot];
            if (node && (exact ? node->hello != NULL
                               : s_matches (node, target)))
                fn (node, arg);
        }
    free (bits);
}

//  What s_resolve gathers.
typedef struct {
    bool all_states;             //  Offline and drained nodes too
    char **ids;                  //  Their ids (malloc'd), or NULL to count
    size_t count;                //  How many
    size_t room;                 //  Allocated in ids
    bool keep;                   //  Keep the ids (the caller wants them)
} s_gather_t;

static void
s_gather (registry_node_t *node, void *arg)
{
    s_gather_t *gather = (s_gather_t *) arg;
    if (!gather->all_states && (!node->online || node->drained))
        return;
    if (gather->keep) {
        if (gather->count == gather->room) {
            gather->room = gather->room ? gather->room * 2 : 64;
            gather->ids = (char **) realloc (gather->ids,
                                             gather->room * sizeof (char *));
            assert (gather->ids);
        }
        gather->ids [gather->count] = strdup (node->id);
        assert (gather->ids [gather->count]);
    }
    gather->count++;
}

//  The ids of the nodes matching TARGET (online and not drained unless
//  ALL_STATES), sorted; with IDS_P NULL only counted.
static size_t
s_resolve (registry_t *self, const target_t *target, bool all_states,
           char ***ids_p)
{
    s_gather_t gather = {.all_states = all_states, .keep = ids_p != NULL};
    if (target->scope == TARGET_NODE) {
        //  A node list is looked up id by id
        for (size_t index = 0; index < target->node_count; index++) {
            registry_node_t *node = registry_lookup (self,
                                                     target->nodes [index]);
            if (node)
                s_gather (node, &gather);
        }
    }
    else
        s_each_match (self, target, s_gather, &gather);
    if (gather.count > 1 && ids_p)
        qsort (gather.ids, gather.count, sizeof (char *), s_compare_strings);
    if (ids_p)
        *ids_p = gather.ids;
    return gather.count;
}

size_t
registry_resolve (registry_t *self, const target_t *target, char ***ids_p)
{
    return s_resolve (self, target, false, ids_p);
}

size_t
registry_select (registry_t *self, const target_t *target, char ***ids_p)
{
    return s_resolve (self, target, true, ids_p);
}

static int
s_compare_pairs (const void *a, const void *b)
{
    return strcmp (((const proto_kv_t *) a)->key, ((const proto_kv_t *) b)->key);
}

const char *
registry_node_fact (const registry_node_t *node, const char *name)
{
    if (!node->fact_count)
        return NULL;
    proto_kv_t key = {.key = (char *) name};
    const proto_kv_t *found = (const proto_kv_t *) bsearch (
        &key, node->facts, node->fact_count, sizeof (proto_kv_t),
        s_compare_pairs);
    return found ? found->value : NULL;
}

//  Frees FACTS (COUNT pairs).
static void
s_facts_free (proto_kv_t *facts, size_t count)
{
    for (size_t index = 0; facts && index < count; index++) {
        free (facts [index].key);
        free (facts [index].value);
    }
    free (facts);
}

int
registry_set_facts (registry_t *self, registry_node_t *node,
                    const proto_kv_t *facts, size_t count)
{
    if (count > FACT_MAX_COUNT)
        return -1;
    proto_kv_t *sorted = count ? (proto_kv_t *) calloc (count,
                                                        sizeof (proto_kv_t))
                               : NULL;
    assert (sorted || count == 0);
    for (size_t index = 0; index < count; index++) {
        sorted [index].key = strdup (facts [index].key);
        sorted [index].value = strdup (facts [index].value);
        assert (sorted [index].key && sorted [index].value);
    }
    if (count > 1)
        qsort (sorted, count, sizeof (proto_kv_t), s_compare_pairs);
    bool valid = true;
    for (size_t index = 0; valid && index < count; index++)
        valid = name_valid (sorted [index].key)
                && fact_value_valid (sorted [index].value)
                && (index == 0
                    || strcmp (sorted [index - 1].key, sorted [index].key));
    bool same = valid && count == node->fact_count;
    for (size_t index = 0; same && index < count; index++)
        same = strcmp (sorted [index].key, node->facts [index].key) == 0
               && strcmp (sorted [index].value, node->facts [index].value)
                      == 0;
    if (!valid || same) {
        s_facts_free (sorted, count);
        return valid ? 0 : -1;
    }
    for (size_t index = 0; index < node->fact_count; index++)
        factindex_remove (self->facts, node->facts [index].key,
                          node->facts [index].value, node->slot);
    s_facts_free (node->facts, node->fact_count);
    node->facts = sorted;
    node->fact_count = count;
    for (size_t index = 0; index < count; index++) {
        int rc = factindex_add (self->facts, sorted [index].key,
                                sorted [index].value, node->slot);
        assert (rc == 0);
    }
    return 1;
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

//  The first leaf of SPEC that NODE does not offer, or NULL.
static const job_phase_t *
s_missing_action (const registry_node_t *node, const job_spec_t *spec)
{
    for (size_t p = 0; p < spec->phase_count; p++) {
        const job_phase_t *phase = &spec->phases [p];
        size_t count = phase->tasks ? phase->task_count : 1;
        for (size_t t = 0; t < count; t++) {
            const job_phase_t *leaf = phase->tasks ? &phase->tasks [t] : phase;
            if (!s_find_action (node, leaf->backend, leaf->action))
                return leaf;
        }
    }
    return NULL;
}

bool
registry_node_checks (const registry_node_t *node)
{
    return node && node->hello
           && (node->via_size == 0 || node->relays_protocol >= 2)
           && proto_hello_has_feature (node->hello, PROTO_FEATURE_CHECK);
}

bool
registry_node_blobs (const registry_node_t *node)
{
    return node && node->hello
           && (node->via_size == 0 || node->relays_protocol >= 2)
           && proto_hello_has_feature (node->hello, PROTO_FEATURE_BLOBS);
}

bool
registry_spec_blobs (const job_spec_t *spec)
{
    for (size_t p = 0; p < spec->phase_count; p++) {
        const job_phase_t *phase = &spec->phases [p];
        size_t count = phase->tasks ? phase->task_count : 1;
        for (size_t t = 0; t < count; t++) {
            const job_phase_t *leaf = phase->tasks ? &phase->tasks [t] : phase;
            if (!leaf->backend || strcmp (leaf->backend, "file") != 0)
                continue;
            for (size_t k = 0; k < leaf->param_count; k++)
                if (strcmp (leaf->params [k].name, "sha256") == 0)
                    return true;
        }
    }
    return false;
}

bool
registry_node_takes (const registry_node_t *node, const job_spec_t *spec)
{
    return (!spec->check || registry_node_checks (node))
        && (!registry_spec_blobs (spec) || registry_node_blobs (node));
}

//  Why NODE cannot run SPEC now, with its status; NULL when it can.
static char *
s_unavailable_reason (const registry_node_t *node, const job_spec_t *spec,
                      int64_t wall_ms, sched_cell_status_t *status)
{
    if (!node->online && node->incompatible) {
        *status = SCHED_CELL_UNSUPPORTED;
        return zsys_sprintf ("incompatible: %s", node->incompatible);
    }
    if (!node->online) {
        *status = SCHED_CELL_OFFLINE;
        if (node->last_seen_wall_ms <= 0)
            return strdup ("offline");
        char text [TIME_TEXT_LEN];
        time_format (node->last_seen_wall_ms, text, sizeof text);
        //  "2026-11-21T07:00:51.123Z": the time alone, or date and time
        text [10] = ' ';
        text [19] = 0;
        bool today = wall_ms - node->last_seen_wall_ms < 24 * 3600 * 1000LL;
        return zsys_sprintf ("offline since %s", today ? text + 11 : text);
    }
    if (node->drained) {
        *status = SCHED_CELL_DRAINED;
        return strdup ("drained");
    }
    if (spec->check && !registry_node_checks (node)) {
        //  Its agent would not know the command's check: never sent
        *status = SCHED_CELL_UNSUPPORTED;
        return strdup ("runs no checks, cannot tell (an agent of a release "
                       "before dry runs, or behind an older relay)");
    }
    if (registry_spec_blobs (spec) && !registry_node_blobs (node)) {
        //  Its agent could not fetch the content: never sent
        *status = SCHED_CELL_UNSUPPORTED;
        return strdup ("cannot fetch blobs: a file.put of a sha256 needs an "
                       "agent of a release with blobs (and relays of it)");
    }
    const job_phase_t *leaf = s_missing_action (node, spec);
    if (leaf) {
        *status = SCHED_CELL_UNSUPPORTED;
        return zsys_sprintf ("does not offer %s.%s", leaf->backend,
                             leaf->action);
    }
    return NULL;
}

static void
s_not_run_add (sched_not_run_t **list_p, size_t *count, size_t *room,
               const char *node, sched_cell_status_t status, char *reason,
               bool named)
{
    if (*count == *room) {
        *room = *room ? *room * 2 : 16;
        *list_p = (sched_not_run_t *) realloc (*list_p,
                                               *room * sizeof (sched_not_run_t));
        assert (*list_p);
    }
    sched_not_run_t *entry = &(*list_p) [(*count)++];
    entry->node = strdup (node);
    assert (entry->node && reason);
    entry->status = status;
    entry->reason = reason;
    entry->named = named;
}

//  What registry_unavailable gathers over a target's members.
typedef struct {
    const job_spec_t *spec;      //  The job
    int64_t wall_ms;             //  Now
    sched_not_run_t **list_p;    //  The list so far
    size_t count;                //  Its length
    size_t room;                 //  Allocated
} s_unavailable_t;

static void
s_unavailable_add (registry_node_t *node, void *arg)
{
    s_unavailable_t *unavailable = (s_unavailable_t *) arg;
    sched_cell_status_t status = SCHED_CELL_OFFLINE;
    char *reason = s_unavailable_reason (node, unavailable->spec,
                                         unavailable->wall_ms, &status);
    if (reason)
        s_not_run_add (unavailable->list_p, &unavailable->count,
                       &unavailable->room, node->id, status, reason, false);
}

size_t
registry_unavailable (registry_t *self, const job_spec_t *spec,
                      int64_t wall_ms, sched_not_run_t **list_p)
{
    *list_p = NULL;
    size_t count = 0, room = 0;
    const target_t *target = &spec->target;
    sched_cell_status_t status = SCHED_CELL_OFFLINE;
    if (target->scope == TARGET_NODE) {
        for (size_t index = 0; index < target->node_count; index++) {
            const char *id = target->nodes [index];
            registry_node_t *node = registry_lookup (self, id);
            char *reason = NULL;
            if (!node) {
                status = SCHED_CELL_OFFLINE;
                reason = strdup ("not registered");
            }
            else
                reason = s_unavailable_reason (node, spec, wall_ms, &status);
            if (reason)
                s_not_run_add (list_p, &count, &room, id, status, reason,
                               true);
        }
        return count;
    }
    s_unavailable_t unavailable = {.spec = spec, .wall_ms = wall_ms,
                                   .list_p = list_p};
    s_each_match (self, target, s_unavailable_add, &unavailable);
    return unavailable.count;
}

static void
s_count (registry_node_t *node, void *arg)
{
    (void) node;
    (*(size_t *) arg)++;
}

size_t
registry_members (registry_t *self, const target_t *target)
{
    size_t count = 0;
    if (target->scope == TARGET_NODE)
        return target->node_count;
    s_each_match (self, target, s_count, &count);
    return count;
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
registry_backend_sets (registry_t *self)
{
    return zhashx_size (self->backend_sets);
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

void
registry_set_drained (registry_node_t *node, bool drained)
{
    if (node->drained != drained)
        node->owner->changes++;
    node->drained = drained;
}

uint64_t
registry_changes (registry_t *self)
{
    return self->changes;
}

size_t
registry_drained_count (registry_t *self)
{
    size_t count = 0;
    registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
    while (node) {
        if (node->drained)
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

bool
registry_note_incompatible (registry_node_t *node, const char *why)
{
    if (node->online || !why)
        return false;
    if (node->incompatible && strcmp (node->incompatible, why) == 0)
        return false;
    free (node->incompatible);
    node->incompatible = strdup (why);
    return true;
}

size_t
registry_incompatible_count (registry_t *self)
{
    size_t count = 0;
    for (registry_node_t *node = (registry_node_t *) zhashx_first (self->nodes);
         node; node = (registry_node_t *) zhashx_next (self->nodes))
        if (!node->online && node->incompatible)
            count++;
    return count;
}

void
registry_node_encode (const registry_node_t *node, pw_t *writer,
                      bool with_backends)
{
    const proto_msg_t *hello = node->hello;
    bool incompatible = !node->online && node->incompatible;
    pw_map (writer, 11 + (with_backends ? 2 : 0)
                    + (node->duplicates ? 1 : 0) + (node->relay [0] ? 1 : 0)
                    + (incompatible ? 1 : 0)
                    + (hello && hello->protocol ? 1 : 0));
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
    pw_str (writer, incompatible ? "incompatible"
                    : !node->online ? "offline"
                    : !node->drained ? "online"
                    : node->running || node->queued ? "draining" : "drained");
    pw_str (writer, "last_seen");
    s_write_time (writer, node->last_seen_wall_ms);
    pw_str (writer, "registered_at");
    s_write_time (writer, node->registered_wall_ms);
    pw_str (writer, "version");
    pw_str (writer, hello && hello->version ? hello->version : "");
    if (hello && hello->protocol) {
        pw_str (writer, "protocol");
        pw_int (writer, hello->protocol);
    }
    pw_str (writer, "concurrency");
    pw_int (writer, hello ? hello->concurrency : 0);
    pw_str (writer, "running");
    pw_int (writer, node->running);
    pw_str (writer, "drained");
    pw_bool (writer, node->drained);
    if (node->duplicates) {
        pw_str (writer, "duplicate");
        pw_map (writer, 3);
        pw_str (writer, "count");
        pw_int (writer, node->duplicates);
        pw_str (writer, "last_at");
        s_write_time (writer, node->duplicate_wall_ms);
        pw_str (writer, "hostname");
        pw_str (writer, node->duplicate_hostname ? node->duplicate_hostname
                                                 : "");
    }
    if (node->relay [0]) {
        pw_str (writer, "relay");
        pw_str (writer, node->relay);
    }
    if (incompatible) {
        pw_str (writer, "incompatible");
        pw_str (writer, node->incompatible);
    }
    if (with_backends) {
        pw_str (writer, "backends");
        //  The hello form, min and max included: the shared list's bytes
        if (node->backend_set)
            pw_raw (writer, node->backend_set->bytes, node->backend_set->size);
        else
        if (hello)
            s_write_wire_backends (writer, hello->backends,
                                   hello->backend_count);
        else
            pw_array (writer, 0);
        pw_str (writer, "facts");
        pw_map (writer, node->fact_count);
        for (size_t index = 0; index < node->fact_count; index++) {
            pw_str (writer, node->facts [index].key);
            pw_str (writer, node->facts [index].value);
        }
    }
}

//  Writes HELLO as proto_msg_encode does, its backends spliced in from
//  SET's encoded list.
static void
s_write_wire_hello (pw_t *writer, const proto_msg_t *hello,
                    const registry_backend_set_t *set)
{
    pw_map (writer, 9);
    pw_str (writer, "v");
    //  The oldest version: the previous release reads the store too
    pw_int (writer, PROTO_VERSION_MIN);
    pw_str (writer, "type");
    pw_str (writer, proto_type_name (PROTO_HELLO));
    pw_str (writer, "node");
    pw_str (writer, hello->node);
    pw_str (writer, "hostname");
    pw_str (writer, hello->hostname);
    pw_str (writer, "groups");
    pw_array (writer, hello->group_count);
    for (size_t index = 0; index < hello->group_count; index++)
        pw_str (writer, hello->groups [index]);
    pw_str (writer, "labels");
    pw_map (writer, hello->label_count);
    for (size_t index = 0; index < hello->label_count; index++) {
        pw_str (writer, hello->labels [index].key);
        pw_str (writer, hello->labels [index].value);
    }
    pw_str (writer, "backends");
    pw_raw (writer, set->bytes, set->size);
    pw_str (writer, "version");
    pw_str (writer, hello->version);
    pw_str (writer, "concurrency");
    pw_int (writer, hello->concurrency);
}

void
registry_node_encode_record (const registry_node_t *node, pw_t *writer)
{
    const registry_backend_set_t *set = node->backend_set;
    assert (node->hello && set);
    //  The hello goes in as one bin, whose length comes first
    pw_t *hello = set->owner->scratch;
    assert (hello != writer);
    pw_reset (hello);
    s_write_wire_hello (hello, node->hello, set);
    pw_map (writer, 4 + (node->relay [0] ? 1 : 0));
    pw_str (writer, "hello");
    pw_bin (writer, pw_data (hello), pw_size (hello));
    if (node->relay [0]) {
        //  Its relay as of its last hello: shown while it is offline
        pw_str (writer, "relay");
        pw_str (writer, node->relay);
    }
    pw_str (writer, "registered_at_ms");
    pw_int (writer, node->registered_wall_ms);
    pw_str (writer, "last_seen_ms");
    pw_int (writer, node->last_seen_wall_ms);
    pw_str (writer, "drained");
    pw_bool (writer, node->drained);
}
