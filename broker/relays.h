/*  =========================================================================
    relays - the broker's side of gridrelay: enrolled relays, the
    identities they attest, their command subscriptions, relay.list

    A relay (relay/relay.h) is a broker to its agents and one agent-like
    connection pair to its upstream (the broker, or another relay). It
    forwards each message of a downstream peer with one frame in front of
    the body, the via frame: the peer's CURVE key (Z85, 40 bytes), after
    the via frame that peer sent itself, if any (a relay below). So the
    broker reads, from a connection whose key is C:

        [routing] [via = K1 K2 ... Kn] [body]

    where C attested K1, K1 attested K2, and so on; Kn is who speaks: an
    agent's key, or RELAYS_SELF when the relay Kn-1 (or C) speaks for
    itself (its heartbeat). Replies go back the same way: the broker sends
    [routing] [via] [body] and each relay takes the first key off the via
    frame to find its downstream connection.

    Trust (docs/SECURITY.md): C and every K1..Kn-1 must be relay keys the
    admin enrolled (`relays:` in the config, or --relay-key), not rejected,
    all of one pool; Kn must not be a relay key. The agent key Kn is then
    judged by auth as if it had connected directly, plus: a key first seen
    through relays is bound to their pool, and a key that enrolled directly
    is never taken from a relay (auth.h). What is refused is answered with
    an error through the same via frame, and counted.

    The commands socket grants a relay (its key is the subscriber's
    User-Id) exactly the topics of the nodes that came through it; a relay
    whose key is rejected (gridcli key reject) loses its nodes at once.

    With --insecure nothing is authenticated: relays are told apart by the
    path they came on and named by their own heartbeats.

    Relays read auth's key records (auth.h) and never write the store:
    a node record they change goes to the caller's save_node, a key record
    auth_relay_seen changed back to the caller (relays_on_own). relay.list
    is served by req/relays.c from relays_list.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_RELAYS_H
#define GRID_RELAYS_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "../proto/pv.h"
#include "../proto/pw.h"
#include "../proto/relaywire.h"
#include "auth.h"
#include "registry.h"

//  The via frame's limits and the self marker live with the wire
//  (proto/relaywire.h); these names are the broker's for them.
#define RELAYS_MAX_PATH PROTO_RELAY_MAX_PATH
#define RELAYS_VIA_MAX PROTO_RELAY_VIA_MAX
#define RELAYS_SELF PROTO_RELAY_SELF
#define RELAYS_MAX_INSECURE 4096     //  Relays told apart in --insecure mode

//  One enrolled relay (from the config).
typedef struct {
    char key [KEYS_TEXT_SIZE];   //  Its public key (Z85): what it connects as
    char *name;                  //  Its name (a grid name)
    char *pool;                  //  Relays of one pool may carry each other's
                                 //  agents (failover, stacking); default name
} relays_entry_t;

typedef struct {
    relays_entry_t *entries;     //  Enrolled relays
    size_t count;                //  How many
} relays_config_t;

typedef struct _relays_t relays_t;

//  Writes NODE's record into the caller's pass (ctx_save_node, with the
//  context as ARG).
typedef void (relays_save_node_fn) (void *arg, registry_node_t *node);

//  What relays_attest found out about one message.
typedef struct {
    char key [KEYS_TEXT_SIZE];   //  Who speaks: the agent's key ("" insecure)
    const char *pool;            //  Pool of the relays on its path, or NULL
    const char *relay;           //  Name of the relay next to it ("" none)
    bool self;                   //  A relay speaks for itself
    size_t answer_size;          //  Bytes of the via frame that reach it
    int version;                 //  The oldest protocol version the relays
                                 //  on it said they speak (their own
                                 //  heartbeats' v), 0 when one has not
                                 //  said yet or no relay is on it
    const char *oldest;          //  The relay that speaks VERSION, or NULL
    void *connect;               //  relays.c's: the relay connected to the
    void *next;                  //  broker, the one next to the speaker
} relays_path_t;

//  One relay as relay.list shows it; the strings are borrowed until the
//  next call into relays.
typedef struct {
    const char *id;              //  Its key (secure) or its path (insecure)
    const char *name;            //  Its name
    const char *key;             //  Its enrolled key (Z85), or "" (insecure)
    const char *pool;            //  Its pool, or NULL (insecure)
    const char *upstream;        //  The relay it comes through, or ""
    size_t agents;               //  Online nodes next to it
    int64_t last_seen_ms;        //  Monotonic: its last own message
    int64_t last_seen_wall_ms;   //  Wall clock of the same, 0 never
    uint64_t refused;            //  Attestations of it refused
    bool revoked;                //  Its key was rejected: its nodes went
    int version;                 //  Protocol of its heartbeats, 0 not yet
} relays_info_t;

//  ---------------------------------------------------------------------
//  Configuration

//  Frees what CONFIG owns and zeroes it.
void relays_config_clear (relays_config_t *config);

//  Deep copy of SRC into DEST (which holds nothing).
void relays_config_copy (relays_config_t *dest, const relays_config_t *src);

//  Reads the config's `relays:` list LIST ({key, name, ?pool} maps) into
//  CONFIG (adding). Returns 0, or -1 with "relays: reason" in ERR.
int relays_config_load (relays_config_t *config, const pv_t *list, char *err,
                        size_t err_len);

//  Adds a relay from "NAME[@POOL]:KEY" (KEY is Z85 or a key file), as
//  --relay-key gives it. Returns 0, or -1 with a sentence in ERR.
int relays_config_add (relays_config_t *config, const char *text, char *err,
                       size_t err_len);

//  The enrolled relay whose key is KEY, or NULL.
const relays_entry_t *relays_config_find (const relays_config_t *config,
                                          const char *key);

//  ---------------------------------------------------------------------
//  The broker's relays

//  A new table for the relays of CONFIG (borrowed; must outlive it).
//  INSECURE: the broker authenticates nobody.
relays_t *relays_new (const relays_config_t *config, bool insecure);

//  Frees everything; NULL-safe.
void relays_destroy (relays_t **self_p);

//  RUNNING (the config given to relays_new) now holds the relays of
//  FRESH, taken (FRESH is left empty); the old entries are freed. A relay
//  still enrolled takes its new name (its nodes of REGISTRY say it at
//  once, and are saved through SAVE_NODE with ARG) and pool; a new one
//  may connect; one no longer in the list stands as a relay an admin
//  accepted if it was (key.accept), else it is refused from now on and
//  its nodes go offline at the next relays_tick. Returns how many relays
//  were added and removed, into *ADDED_P and *REMOVED_P.
void relays_reload (relays_t *self, relays_config_t *running,
                    relays_config_t *fresh, registry_t *registry,
                    relays_save_node_fn *save_node, void *arg,
                    size_t *added_p, size_t *removed_p);

//  Judges the path of a message from the connection ROUTING (whose key is
//  CONN_KEY, NULL when insecure) with the via frame VIA (VIA_SIZE bytes,
//  0 when it had none), reading the keys' records in AUTH. Fills PATH.
//  Returns 0 to go on, or -1 with the error (*CODE, WHY) to answer
//  through PATH->answer_size bytes of VIA.
int relays_attest (relays_t *self, auth_t *auth, const void *routing,
                   size_t routing_size, const char *conn_key,
                   const void *via, size_t via_size, relays_path_t *path,
                   const char **code, char *why, size_t why_len);

//  A relay's own message MSG (PATH->self: a heartbeat or a broker_key_ack;
//  anything else is refused) at NOW_MS / WALL_MS: a heartbeat
//  renews it and tells the protocol version it speaks (its v) (insecure: it names the relay, and so its nodes in
//  REGISTRY). A relay not enrolled is kept pending in AUTH
//  (auth_relay_seen): when that changed its key record, *CHANGED_P gets
//  it, for the caller to save (auth_key_save). Returns 0, or -1 with an
//  error to answer (*CODE, WHY).
int relays_on_own (relays_t *self, auth_t *auth, registry_t *registry,
                   const relays_path_t *path, const proto_msg_t *msg,
                   int64_t now_ms, int64_t wall_ms,
                   const auth_key_t **changed_p, const char **code,
                   char *why, size_t why_len);

//  NODE said hello (accepted) on PATH: it now belongs to the relays of
//  that path (or to none when it connected directly), and its topics are
//  granted to the relay that connects it. Sets NODE's relay name (the
//  caller saves NODE).
void relays_on_hello (relays_t *self, registry_node_t *node,
                      const relays_path_t *path);

//  The id (its key; its path when insecure) of the relay connected to
//  the broker that NODE came through last, or NULL (it came directly, or
//  not since the broker started). Borrowed until the next call.
const char *relays_connect_id (relays_t *self, const char *node);

//  Commands socket: returns 1 to grant TOPIC (LEN bytes) to the
//  subscriber whose key is KEY (read in AUTH), 0 to refuse it (counted),
//  -1 when KEY is no relay's (then auth_topic_grant decides).
int relays_grant (relays_t *self, auth_t *auth, const char *key,
                  const char *topic, size_t len);

//  Once a tick: relays whose key AUTH says is rejected lose their nodes:
//  each goes offline in REGISTRY at NOW_MS, is saved through SAVE_NODE
//  with ARG, and its cells are handed to SCHED (when not NULL).
void relays_tick (relays_t *self, auth_t *auth, registry_t *registry,
                  sched_t *sched, int64_t now_ms,
                  relays_save_node_fn *save_node, void *arg);

//  relay.list: the relays that have a name, sorted by name, with their
//  online agents in REGISTRY counted, as a new array of *COUNT_P items
//  (the caller frees the array).
relays_info_t *relays_list (relays_t *self, registry_t *registry,
                            size_t *count_p);

//  Attestations refused since the start.
uint64_t relays_refused (const relays_t *self);

#endif
