/*  =========================================================================
    registry - the broker's table of nodes

    Who is registered, what each node offers, which groups and labels it
    carries, whether it is online, and which nodes a target means. Nodes
    enter by hello, stay alive by any message (heartbeats at least), and go
    offline after missed heartbeats, a bye, or a broker restart (nodes read
    from the store start offline until they say hello again).

    The registry owns no socket and reads no clock: callers pass now_ms
    (monotonic) and wall_ms (wall clock, for display).

    Nearly every node of a fleet declares the same backends, and a node's
    declaration is most of its hello. So each distinct backend list is
    kept once (interned), decoded and encoded, and shared by every node
    that declares it. A node's hello lends its backends from that shared
    list: node->hello->backends and backend_count read as they were
    received, but the list belongs to the registry, which detaches it
    before it frees the hello. Callers read node->hello and never free,
    keep or change it. A list is freed when no node declares it any
    longer (a node that says hello again declares only its newest list).

    A target is resolved from indexes, never by testing every node: each
    node has a slot (a small number), and the registry keeps the slots of
    each group, of each label value (and each dotted prefix of it) and,
    through factindex, of each fact value (nodeset.h). A term is the set
    its index keeps, a node list the slots of its ids, and an expression
    combines its terms' sets as bitmaps: "and" intersects them, "or"
    unites them, "not" takes the complement. The sets move on every hello
    whose groups or labels changed, every restore from the store and
    every change of facts; going offline, expiring and draining leave
    them as they are (resolve tests those on the nodes found). A term the
    indexes cannot answer leaves every node a candidate, each then
    tested against the whole target.

    Threading: one registry belongs to one thread.
    =========================================================================
*/
#ifndef GRID_REGISTRY_H
#define GRID_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/names.h"
#include "../proto/proto.h"
#include "../proto/pv.h"
#include "../proto/pw.h"
#include "sched.h"

#define REGISTRY_MAX_ROUTING_ID 256  //  Longest ROUTER identity kept
#define REGISTRY_MAX_VIA 160         //  Longest relay path kept (relays.h)

//  One distinct backend declaration, shared by the nodes that send it.
typedef struct _registry_backend_set_t registry_backend_set_t;

typedef struct _registry_t registry_t;
typedef struct _registry_node_t registry_node_t;

//  A node's place in one of the registry's queues (registry.c).
typedef struct {
    registry_node_t *prev;       //  Earlier in the queue, or NULL
    registry_node_t *next;       //  Later in the queue, or NULL
    bool queued;                 //  In the queue
} registry_link_t;

struct _registry_node_t {
    char *id;                    //  Node id
    //  Its last hello (owned; its backends are lent by backend_set)
    proto_msg_t *hello;          //  (its protocol: the node's version,
                                 //  0 until it says hello to this broker)
    registry_backend_set_t *backend_set;  //  Its interned backends (a reference)
    bool online;                 //  Heard from within the liveness window
    bool drained;                //  Takes no new work
    int64_t last_seen_ms;        //  Monotonic time of its last message
    int64_t last_seen_wall_ms;   //  Wall clock of its last message
    int64_t registered_wall_ms;  //  Wall clock of its first hello (kept across restarts)
    uint32_t running;            //  Tasks running, from its last heartbeat
    uint32_t queued;             //  Tasks queued, from its last heartbeat
    int64_t offline_since_ms;    //  Monotonic time it went offline
    bool offline_reported;       //  Its work was declared lost (after the grace)
    uint8_t routing_id [REGISTRY_MAX_ROUTING_ID];  //  ROUTER identity of its connection
    size_t routing_id_size;      //  Bytes in routing_id (0 = none)
    uint8_t via [REGISTRY_MAX_VIA];  //  Through relays: the via frame that
                                 //  reaches it from the relay at routing_id
    size_t via_size;             //  Bytes in via (0 = it connected directly)
    char relay [NAME_MAX_LEN + 1];  //  The relay its last hello came through
                                 //  ("" = none); kept in its record
    int relays_protocol;         //  The oldest protocol the relays of its
                                 //  last hello's path speak (0: unknown,
                                 //  or none on it)
    uint32_t duplicates;         //  Second agents refused (duplicate_node)
    int64_t duplicate_wall_ms;   //  Wall clock of the last such refusal
    char *duplicate_hostname;    //  Its hostname (owned), or NULL
    char *incompatible;          //  Offline, its agent refused for the
                                 //  protocol it speaks: why (owned), or
                                 //  NULL; a welcomed hello clears it
    uint64_t hello_digest;       //  Digest of its last hello's bytes (broker.c)
    size_t hello_size;           //  Their length (0 = unknown: loaded, or none)
    //  Kept by the registry alone (callers read them at most):
    registry_t *owner;           //  The registry that holds it
    registry_link_t by_seen;     //  Online: its place by last_seen_ms
    registry_link_t by_offline;  //  Offline, work not yet declared lost:
                                 //  its place by offline_since_ms
    registry_link_t by_unsaved;  //  Heard from since its last-seen time
                                 //  was last saved: its place by then
    int64_t unsaved_since_ms;    //  Monotonic: its first message since
    proto_kv_t *facts;           //  Its facts, sorted by name (owned; set
    size_t fact_count;           //  by registry_set_facts alone)
    uint32_t slot;               //  Its number in the indexes of groups,
                                 //  labels and facts (nodeset.h)
};

//  A new, empty registry.
registry_t *registry_new (void);

//  Frees the registry and every node; NULL-safe, nulls *self_p.
void registry_destroy (registry_t **self_p);

//  Registers or refreshes a node from a decoded hello (taken: *hello_p is
//  nulled), reached through ROUTING_ID. Its backends join an equal
//  interned list, or become a new one; the hello's own copy is freed.
//  Returns the node (borrowed, valid until the node is removed or the
//  registry destroyed).
registry_node_t *registry_hello (registry_t *self, proto_msg_t **hello_p,
                                 const void *routing_id, size_t routing_id_size,
                                 int64_t now_ms, int64_t wall_ms);

//  The interned backend list whose encoding is the SIZE bytes at BYTES,
//  as the codec writes a hello's "backends" value, or NULL when no node
//  declares that list. A hello whose backends are those very bytes
//  declares that list: its receiver may decode the rest of it only
//  (mpscan.h) and give it to registry_hello_declaring. Borrowed: valid
//  until the next registry_hello, registry_load or destroy.
const registry_backend_set_t *registry_backends_find (registry_t *self,
                                                      const void *bytes,
                                                      size_t size);

//  The decoded list of SET and its length (borrowed, as SET is).
const proto_backend_spec_t *registry_backends_list (
    const registry_backend_set_t *set, size_t *count_p);

//  registry_hello for a hello decoded without its backends (it has none of
//  its own) whose backends list is KNOWN, from registry_backends_find.
//  KNOWN NULL: exactly registry_hello.
registry_node_t *registry_hello_declaring (registry_t *self,
                                           proto_msg_t **hello_p,
                                           const registry_backend_set_t *known,
                                           const void *routing_id,
                                           size_t routing_id_size,
                                           int64_t now_ms, int64_t wall_ms);

//  Adds a node read from the store (offline until it says hello). RECORD
//  is the map written by registry_node_encode_record (or by an earlier
//  version, which kept the hello as received: the same map). Its backends
//  are interned as registry_hello does. Returns 0 or -1 (malformed).
int registry_load (registry_t *self, const pv_t *record);

//  The node with this id, or NULL. Borrowed.
registry_node_t *registry_lookup (registry_t *self, const char *id);

//  Whether NODE's agent runs checks (dry runs): its hello named the check
//  feature and every relay on its path said it speaks protocol 2. A
//  command with check goes to no other node.
bool registry_node_checks (const registry_node_t *node);

//  Whether NODE's agent fetches blobs: its hello named the blobs feature
//  (and every relay on its way forwards it).
bool registry_node_blobs (const registry_node_t *node);

//  Whether SPEC has a file.put of a blob (a sha256 param): only nodes
//  that fetch blobs are sent it.
bool registry_spec_blobs (const job_spec_t *spec);

//  Whether NODE may be sent SPEC's commands: checks for a dry run, blobs
//  for a job of blobs.
bool registry_node_takes (const registry_node_t *node, const job_spec_t *spec);

//  The node that owns this connection and id, or NULL when ID is unknown,
//  offline, or registered through another connection.
registry_node_t *registry_session (registry_t *self, const char *id,
                                   const void *routing_id,
                                   size_t routing_id_size);

//  Marks NODE as heard from now.
void registry_touch (registry_node_t *node, int64_t now_ms, int64_t wall_ms);

//  Notes that NODE's agent was refused for the protocol it speaks, and
//  WHY (copied): until a hello is welcomed, node.list and node.get read
//  status "incompatible" with the reason as "incompatible", and a job
//  names it unsupported with that reason. Returns true when WHY is news
//  (the first refusal, or another reason), for the caller to log.
bool registry_note_incompatible (registry_node_t *node, const char *why);

//  Nodes whose status reads incompatible.
size_t registry_incompatible_count (registry_t *self);

//  Counts a second agent refused as NODE (duplicate_node) from HOSTNAME at
//  WALL_MS; node.get shows the count, the last time and that hostname.
void registry_note_duplicate (registry_node_t *node, const char *hostname,
                              int64_t wall_ms);

//  Marks NODE offline (bye, or a send that failed) as of NOW_MS.
void registry_set_offline (registry_node_t *node, int64_t now_ms);

//  Marks every online node not heard from since NOW_MS - TIMEOUT_MS as
//  offline. Returns how many and gives *IDS_P a malloc'd array of their ids
//  (borrowed strings, valid while the nodes exist; free only the array),
//  oldest last message first. Costs one look plus one per node marked:
//  online nodes are kept in order of their last message.
size_t registry_expire (registry_t *self, int64_t now_ms, int64_t timeout_ms,
                        const char ***ids_p);

//  Offline nodes whose grace ran out since they went offline and whose
//  work was not yet declared lost: marks them reported and returns how
//  many, with *IDS_P as registry_expire gives it. Costs one look plus one
//  per node whose grace ran out (offline nodes are kept in order of when
//  they went offline).
size_t registry_overdue (registry_t *self, int64_t now_ms, int64_t grace_ms,
                         const char ***ids_p);

//  How many nodes registry_expire and registry_overdue have looked at
//  since the registry was made: at most one per call, plus one per node
//  whose deadline had passed.
uint64_t registry_deadline_visits (registry_t *self);

//  The node whose last-seen time has gone unsaved the longest, or NULL
//  when every node's is saved: registry_touch queues a node, at its first
//  message since registry_seen_saved, with unsaved_since_ms the time of
//  that message. Borrowed.
registry_node_t *registry_unsaved_first (registry_t *self);

//  Notes that NODE's last-seen time, as it is now, is in the store.
void registry_seen_saved (registry_node_t *node);

//  Sets NODE's facts to the COUNT pairs of FACTS (copied), and the
//  index of fact targets with them. Returns 1 when they changed, 0 when
//  they are the ones it had, -1 when a name comes twice or is not
//  valid, a value is not valid (facts.h) or there are more than
//  FACT_MAX_COUNT (nothing changed then).
int registry_set_facts (registry_t *self, registry_node_t *node,
                        const proto_kv_t *facts, size_t count);

//  The value of NODE's fact NAME, or NULL. Borrowed from NODE.
const char *registry_node_fact (const registry_node_t *node,
                                const char *name);

//  Ids of every registered node (online or not) matching TARGET
//  (ignoring "any"), sorted, as registry_resolve gives them: what
//  node.list's where shows.
size_t registry_select (registry_t *self, const target_t *target,
                        char ***ids_p);

//  Ids of the online, non-drained nodes matching TARGET (ignoring "any"),
//  sorted. Returns the count; *IDS_P gets a malloc'd array of malloc'd
//  strings (the caller frees both), NULL when none. With IDS_P NULL it
//  only counts them.
size_t registry_resolve (registry_t *self, const target_t *target,
                         char ***ids_p);

//  The nodes SPEC's target names or covers that cannot run it now, as
//  sched_unavailable_fn gives them: each named id of a node list (named)
//  or each registered member of a group, label or `all` that is offline
//  ("offline since 12:01:07", from its last message, UTC; the date is
//  added when that is more than a day before WALL_MS), drained
//  ("drained"), or lacks an action of the job ("does not offer
//  apt.update"), in that order of precedence. An id of a node list that
//  is not registered reads offline, "not registered". Returns the count;
//  *LIST_P is malloc'd (the caller frees it with sched_not_run_free), NULL
//  when every node can run the job.
size_t registry_unavailable (registry_t *self, const job_spec_t *spec,
                             int64_t wall_ms, sched_not_run_t **list_p);

//  How many registered nodes (online or not) match TARGET: the receivers
//  a broadcast on its topic can reach.
size_t registry_members (registry_t *self, const target_t *target);

//  The spec of BACKEND/ACTION as the first online node offering it
//  declares it, or NULL when no online node offers it (then any node,
//  online or not, is tried when ANY_STATE). Borrowed from an interned
//  list: valid until the next registry_hello, registry_load or destroy.
const proto_action_spec_t *registry_find_action (registry_t *self,
                                                 const char *backend,
                                                 const char *action,
                                                 bool any_state);

//  Node counts.
size_t registry_size (registry_t *self);
size_t registry_online_count (registry_t *self);

//  How many registered nodes are drained (online or not).
size_t registry_drained_count (registry_t *self);

//  Drains NODE (it takes no new work) or resumes it.
void registry_set_drained (registry_node_t *node, bool drained);

//  How often a node was added, came online, went offline, was drained or
//  resumed since the registry was made (node.changes watches it).
uint64_t registry_changes (registry_t *self);

//  How many distinct backend lists the registered nodes declare (each is
//  kept once, whatever the number of nodes that declare it).
size_t registry_backend_sets (registry_t *self);

//  All nodes sorted by id: a malloc'd array of borrowed pointers (free only
//  the array); returns the count.
size_t registry_list (registry_t *self, registry_node_t ***nodes_p);

//  Writes NODE as a map: id, hostname, groups, labels, status, last_seen,
//  registered_at, version, concurrency, running, drained, relay (when it
//  came through one) and, when WITH_BACKENDS, backends and facts (the
//  node.get shape of proto/PROTOCOL.md).
void registry_node_encode (const registry_node_t *node, pw_t *writer,
                           bool with_backends);

//  Writes NODE as its store record: {hello: bin, registered_at_ms,
//  last_seen_ms, drained}, where hello holds the node's hello encoded as
//  on the wire (the bytes proto_msg_encode gives), built from the node's
//  own fields and the encoded bytes of its interned backends.
void registry_node_encode_record (const registry_node_t *node, pw_t *writer);

#endif
