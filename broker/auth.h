/*  =========================================================================
    auth - the broker's security: ZAP handler, enrolled keys, node identity,
    client roles, the backend/action allowlist and command subscriptions

    Who a peer is comes from CurveZMQ only: the ZAP handler (RFC 27) sets
    each connection's User-Id to the peer's public key (Z85), and every
    message is judged by the User-Id metadata of its body frame
    (zmq_msg_gets, or zframe_meta), never by what its body claims.

    The handler is the broker's own: auth_new binds it on
    inproc://zeromq.zap.01 before any other socket binds, and the server's
    loop reads it and calls auth_zap_serve; the endpoints enforce ZAP, so
    without it every handshake fails. Domains:

        clients    keys configured with a role, and not revoked
        agents     any key not rejected (a new key must be able to connect
        commands   so that it can wait as pending); what it may do is
                   decided per message against the key store
        replication  the keys of the cluster's other members
                   (auth_set_replication_keys)

    Key store (STORE_DB_KEYS, cached in memory): public key -> {status
    pending | accepted | rejected | next | retired, node, hostname,
    first_seen, accepted_at, updated_at, ?replaces, ?retired_at}. A hello from an unknown key makes it pending (or accepted,
    with auto_accept); an accepted key is bound to the node id of its first
    hello, and no other key may speak for that node until it is deleted.
    Agent messages other than hello pass only from an accepted key bound to
    the node they name. The key requests (key.list, key.accept,
    key.reject, key.delete: req/keys.c) move keys between these states
    through the functions at the end of this header.

    Rotation (rekey, PROTOCOL.md 4.3): an enrolled node sends the public
    half of a new pair over its session; auth_rekey keeps it as the
    node's next key, which "replaces" the node's key: accepted at once
    (status next) with rekey: auto, else pending until key.accept makes it
    next. The next key's first hello for its node switches the node to it:
    it becomes the accepted key bound to the node, and the key it replaces
    is retired (refused at the handshake from then on, listed with the
    time). The node stays online: the new session's hello re-registers it
    (the same agent process). A next key that is not yet accepted is
    refused as pending, never as an impersonation.

    Client roles (role.h) come from the config: viewer (reads, and submits
    of query actions), operator (also modify actions, cancel, delete),
    admin (also keys and drain). A key revoked with key.reject loses its
    role. Which role a request needs is the request table's (requests.h):
    the server identifies the caller (auth_identify), compares, and has
    auth write the refusal (auth_forbid).

    The commands socket is an XPUB with ZMQ_XPUB_MANUAL: each subscription
    is granted only when its User-Id is an accepted key and the topic is
    all/, node/<its node>/, or a group or label topic of that node's last
    hello; anything else is refused (and counted, from an accepted key).
    The server reads the subscriptions and asks relays_grant, then
    auth_topic_grant.

    Auth writes the store only into a transaction its caller gives (the
    pass's), and its agent checks not at all: they return the record that
    changed, for the caller to save.

    With insecure set (--insecure) nothing is encrypted or authenticated:
    every client is admin, agents are not enrolled, every subscription is
    granted. The allowlist applies in both modes.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_AUTH_H
#define GRID_AUTH_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "../proto/pv.h"
#include "../proto/pw.h"
#include "../store/store.h"
#include "registry.h"
#include "role.h"

#define AUTH_DEFAULT_MAX_PENDING_KEYS 10000
#define AUTH_COUNTER_COUNT 7         //  Pairs auth_write_counters writes

typedef enum {
    AUTH_KEY_PENDING = 0,        //  Waits for key.accept
    AUTH_KEY_ACCEPTED,           //  Enrolled
    AUTH_KEY_REJECTED,           //  Refused, also at the handshake
    AUTH_KEY_REFUSED,            //  Claimed a node bound to another key:
                                 //  listed, never bound, never stored
    AUTH_KEY_NEXT,               //  A node's next key (rekey), accepted: its
                                 //  first hello makes it the node's key
    AUTH_KEY_RETIRED             //  Replaced by its node's next key: refused,
                                 //  also at the handshake
} auth_key_status_t;

//  How a node's next key (rekey) is taken: at once when the node's key is
//  accepted (auto), or pending until key.accept (manual).
typedef enum {
    AUTH_REKEY_AUTO = 0,
    AUTH_REKEY_MANUAL
} auth_rekey_mode_t;

//  A client key with its role (from the config).
typedef struct {
    char key [KEYS_TEXT_SIZE];   //  Public key, Z85
    auth_role_t role;            //  What it may do
    char *name;                  //  Who, for key.list (owned, may be NULL)
} auth_client_t;

//  The security part of the broker's configuration.
typedef struct {
    bool insecure;               //  Plaintext, nothing authenticated
    char *key_file;              //  The broker's key pair (either file)
    bool auto_accept;            //  New agent keys are accepted at once (labs)
    auth_rekey_mode_t rekey;     //  How an enrolled node's next key is taken
    size_t max_pending_keys;     //  Unknown agent keys beyond this are refused
    auth_client_t *clients;      //  Client keys and roles
    size_t client_count;         //  How many
    char **allow;                //  "backend.action" or "backend.*"; none = all
    size_t allow_count;          //  How many (0 = no allowlist)
} auth_config_t;

//  One enrolled (or waiting, or rejected) key.
typedef struct {
    char key [KEYS_TEXT_SIZE];   //  Public key, Z85
    auth_key_status_t status;    //  Where it stands
    char *node;                  //  Accepted: bound node (NULL until its first
                                 //  hello); pending: the node it claims
    char *hostname;              //  From its last hello, or NULL
    int64_t first_seen_ms;       //  Wall clock of its first hello, or 0
    int64_t accepted_at_ms;      //  Wall clock of its acceptance, or 0
    int64_t updated_at_ms;       //  Wall clock of its last change
    bool relay;                  //  A relay's key (kind relay): hostname holds
                                 //  the name the relay gives itself
    char *pool;                  //  The relay pool it first came through
                                 //  (relays.h), or NULL: it came directly,
                                 //  and no relay may speak for it
    char *replaces;              //  A next key (pending or next): the key of
                                 //  its node it replaces (kept once it is
                                 //  the node's key), or NULL
    int64_t retired_at_ms;       //  Retired: wall clock of the switch, or 0
} auth_key_t;

typedef struct {
    uint64_t refused_handshakes; //  ZAP said no (unknown client, rejected key)
    uint64_t unauthorized;       //  Messages from keys not accepted or revoked
    uint64_t impersonation;      //  A key speaking for another key's node
    uint64_t forbidden;          //  Requests beyond a role or the allowlist
    uint64_t refused_topics;     //  Subscriptions refused to an accepted key
    uint64_t http_unauthorized;  //  HTTP requests without a valid token (401)
    uint64_t http_forbidden;     //  HTTP requests beyond their token's role (403)
} auth_counters_t;

//  Who sent a client request: the face it came through and what that face
//  vouches for. Each request is judged by this alone, never by its body.
typedef struct {
    const char *key;             //  ZeroMQ: the CURVE client key (Z85) of
                                 //  the body frame's User-Id, or NULL
    const char *token;           //  HTTP: the bearer token sent, or NULL
    bool http;                   //  Came through the HTTP face: a token is
                                 //  needed whatever the ZeroMQ security
    bool public_metrics;         //  HTTP with http.metrics_public: a
                                 //  metrics.get needs no token
    bool dashboard;              //  HTTP from the dashboard (the audit
                                 //  trail's face; it grants nothing)
} auth_caller_t;

typedef struct _auth_t auth_t;

//  ---------------------------------------------------------------------
//  Configuration

//  Fills CONFIG with the defaults: secure, key /etc/grid/keys/broker.key,
//  no clients, no allowlist.
void auth_config_defaults (auth_config_t *config);

//  Frees what CONFIG owns and zeroes it.
void auth_config_clear (auth_config_t *config);

//  Deep copy of SRC into DEST (which holds nothing).
void auth_config_copy (auth_config_t *dest, const auth_config_t *src);

//  Reads the keys key, insecure, auto_accept, rekey (auto|manual),
//  max_pending_keys, clients and allow of the config map ROOT into CONFIG. clients is a list
//  of {key: Z85 or key file, role: viewer|operator|admin, ?name}; allow a
//  list of "backend.action" or "backend.*". Returns 0, or -1 with
//  "key: reason" in ERR.
int auth_config_load (auth_config_t *config, const pv_t *root, char *err,
                      size_t err_len);

//  Adds a client from "ROLE:KEY" (KEY is Z85 or a key file), as
//  --client-key gives it. Returns 0, or -1 with a sentence in ERR.
int auth_config_add_client (auth_config_t *config, const char *text,
                            char *err, size_t err_len);

//  Replaces the allowlist with the comma-separated items of TEXT, as
//  --allow gives it. Returns 0, or -1 with a sentence in ERR.
int auth_config_set_allow (auth_config_t *config, const char *text,
                           char *err, size_t err_len);

//  "pending", "accepted", "rejected", "refused", "next", "retired".
const char *auth_key_status_name (auth_key_status_t status);

//  ---------------------------------------------------------------------
//  Pure rules (no socket, no store)

//  True when BACKEND/ACTION passes the allowlist of CONFIG.
bool auth_allowed (const auth_config_t *config, const char *backend,
                   const char *action);

//  True when the agent of node NODE_ID, whose registry entry is NODE (NULL
//  before its first hello), may receive TOPIC (LEN bytes): all/,
//  node/<NODE_ID>/, and the group and label topics of NODE's hello.
bool auth_topic_allowed (const char *node_id, const registry_node_t *node,
                         const char *topic, size_t len);

//  Writes KEY as its store record; decodes one into KEY (whose key field
//  the caller sets). Decode returns 0 or -1 (malformed).
void auth_key_encode (const auth_key_t *key, pw_t *writer);
int auth_key_decode (const pv_t *record, auth_key_t *key);

//  ---------------------------------------------------------------------
//  The broker's security state

//  Loads the broker's key pair and binds the ZAP handler (unless
//  insecure), and reads the key store and the tokens. Call before any
//  socket binds. CONFIG is borrowed and must outlive the result. Returns
//  NULL with a sentence in ERR.
auth_t *auth_new (const auth_config_t *config, store_t *store, char *err,
                  size_t err_len);

//  Unbinds the ZAP handler and frees everything; NULL-safe.
void auth_destroy (auth_t **self_p);

//  Prepares SOCK (not yet bound) to serve DOMAIN (KEYS_DOMAIN_...): a CURVE
//  server with ZAP enforced, or nothing when insecure. The commands socket
//  (an XPUB) also gets ZMQ_XPUB_MANUAL. Returns 0, or -1 with ERR.
int auth_secure_socket (auth_t *self, zsock_t *sock, const char *domain,
                        char *err, size_t err_len);

//  Logs the security mode once the sockets exist: CURVE with the broker's
//  key and how many clients, nodes and pending keys, or the insecure
//  warning; warnings for no client keys and auto_accept; the allowlist.
void auth_log_start (const auth_t *self);

//  The counters; writes them as AUTH_COUNTER_COUNT map pairs.
const auth_counters_t *auth_counters (const auth_t *self);
void auth_write_counters (const auth_t *self, pw_t *writer);

//  The HTTP tokens (token.h), read from the store by auth_new.
struct _token_store_t *auth_tokens (auth_t *self);

//  Reads the key records and the HTTP tokens back from STORE, dropping
//  what memory holds beyond them: the server calls it after a failed
//  commit, whose key.accept, key.reject, key.delete, new pending keys or
//  token changes reached memory but not the store. Returns 0, or -1 when
//  the store cannot be read (what could not be read stays as it was).
int auth_reload (auth_t *self, store_t *store);

//  True when KEY (Z85) is a configured client key.
bool auth_is_client (const auth_t *self, const char *key);

//  ---------------------------------------------------------------------
//  The ZAP handler and the commands socket (the server reads the sockets)

//  The ZAP handler's socket, for the server's loop to read; NULL when
//  insecure (there is none).
zsock_t *auth_zap_socket (auth_t *self);

//  Answers the ZAP requests that wait on ZAP (auth_zap_socket), a batch
//  at most; never blocks past the first.
void auth_zap_serve (auth_t *self, zsock_t *zap);

//  Called by auth_zap_serve for each handshake refused on the clients
//  endpoint: KEY (Z85) and the refusal's sentence, valid during the call.
typedef void (auth_refused_fn) (void *arg, const char *key,
                                const char *refusal);

//  Has FN (with ARG) told of every refused client handshake, for the
//  audit trail; NULL: no one.
void auth_on_client_refused (auth_t *self, auth_refused_fn *fn, void *arg);

//  The keys (Z85, COUNT of them, copied) let in on the replication
//  domain: a broker cluster's other members (cluster_config.h). None
//  by default.
void auth_set_replication_keys (auth_t *self, const char *const *keys,
                                size_t count);

//  The broker's key pair (secure mode), or NULL; owned by SELF.
zcert_t *auth_cert (auth_t *self);

//  The broker's key was rotated (brokerkey.h): *CERT_P (taken) is its
//  pair from now on, for the sockets secured after this call.
void auth_replace_cert (auth_t *self, zcert_t **cert_p);

//  Commands socket: true to grant TOPIC (LEN bytes) to the subscriber
//  whose key is KEY (the frame's User-Id; NULL when it had none): always
//  when insecure, else when KEY is accepted and bound to a node of
//  REGISTRY that may receive TOPIC (refusals counted and logged). The
//  server asks relays_grant first, and auth only when KEY is no relay's.
bool auth_topic_grant (auth_t *self, registry_t *registry, const char *key,
                       const char *topic, size_t len);

//  ---------------------------------------------------------------------
//  Agents. A check never writes the store: when it changed the sender's
//  key record (a new pending key, a binding, a new hostname), *CHANGED_P
//  gets that record, also when it refuses, and the caller writes it into
//  its pass with auth_key_save.

//  Judges an agent message MSG that was decoded from the received frame
//  BODY: the sender's key is BODY's User-Id metadata (zmq_msg_gets),
//  read only when the broker is secure. BODY is borrowed for the call.
//  Returns 0 to go on, or -1 to drop the message; then *CODE (when not
//  NULL) and WHY are the error to send back. WALL_MS dates key changes.
int auth_agent_check (auth_t *self, const zmq_msg_t *body,
                      const proto_msg_t *msg, int64_t wall_ms,
                      const auth_key_t **changed_p, const char **code,
                      char *why, size_t why_len);

//  auth_agent_check for a message whose sender's key KEY (Z85) a relay of
//  POOL attested (relays.h): the same rules, and a key that first came
//  directly, or through relays of another pool, is refused (forbidden).
//  A new key remembers POOL.
int auth_agent_check_relayed (auth_t *self, const char *key,
                              const char *pool, const proto_msg_t *msg,
                              int64_t wall_ms, const auth_key_t **changed_p,
                              const char **code, char *why, size_t why_len);

//  A relay whose key is not in the config introduced itself as NAME
//  (its own heartbeat, relays.h): its key is kept as a relay key, pending
//  until an admin accepts it (key.accept; never auto-accepted). Returns
//  its record (borrowed until the next change), or NULL when it may not
//  even wait (rejected as an agent key, or too many keys pending).
//  *CHANGED_P is set true when the record is new or renamed: the caller
//  saves it (auth_key_save).
const auth_key_t *auth_relay_seen (auth_t *self, const char *key,
                                   const char *name, int64_t wall_ms,
                                   bool *changed_p);

//  The key that the last agent check retired (a next key's hello switched
//  its node to it), once, for the caller to save and record; else NULL.
const auth_key_t *auth_take_retired (auth_t *self);

//  Where a rekey leaves a node's next key.
typedef enum {
    AUTH_REKEY_ACCEPTED,         //  Next: the agent may connect with it
    AUTH_REKEY_PENDING,          //  Waits for key.accept
    AUTH_REKEY_REFUSED           //  Not taken: WHY says why
} auth_rekey_t;

//  A rekey from the accepted key SENDER (Z85) bound to NODE (the caller
//  has checked that with auth_agent_check): KEY (the message's text) is
//  to be NODE's next key. Idempotent: the same KEY again answers where it
//  stands; another KEY replaces a next key not yet used. Refused: a
//  malformed KEY, the sender's own, or any key the broker already knows
//  otherwise (counted as an impersonation when it is another node's or a
//  client's). Changes are written into TXN; WALL_MS dates them. Returns
//  the verdict, with a sentence in WHY (also when taken); *FRESH_P is true
//  when KEY became the next key now (false when asked again, or refused).
auth_rekey_t auth_rekey (auth_t *self, store_txn_t *txn, const char *sender,
                         const char *node, const char *key, int64_t wall_ms,
                         bool *fresh_p, char *why, size_t why_len);

//  The next key (pending or next) of NODE, or NULL.
const auth_key_t *auth_key_next_of (auth_t *self, const char *node);

//  Writes KEY's record into TXN (the caller's pass), logging a store
//  error; nothing when TXN is NULL.
void auth_key_save (auth_t *self, store_txn_t *txn, const auth_key_t *key);

//  ---------------------------------------------------------------------
//  Clients

//  The name auth_identify gives a caller the config names not (an
//  unnamed client key, or any client when insecure).
#define AUTH_UNNAMED "this client"

//  Who CALLER is, for REQUEST: an HTTP token's role and name (token.h; a
//  public /metrics reader is a viewer), a CURVE client key's from the
//  config, or admin AUTH_UNNAMED when insecure. Returns 0 with *ROLE_P
//  and *NAME_P (borrowed until the next config or token change), or -1
//  after counting and writing the unauthorized error into REPLY.
int auth_identify (auth_t *self, const auth_caller_t *caller,
                   const proto_request_t *request, int64_t wall_ms,
                   auth_role_t *role_p, const char **name_p, pw_t *reply);

//  Counts REQUEST as forbidden (and as http_forbidden from the HTTP face)
//  and writes the error into REPLY: the request needs role NEEDED, and
//  the caller NAME has ROLE.
void auth_forbid (auth_t *self, const auth_caller_t *caller,
                  const proto_request_t *request, auth_role_t needed,
                  auth_role_t role, const char *name, pw_t *reply);

//  job.submit: true, with the forbidden error in REPLY (counted), when
//  REQUEST's job holds an action that the allowlist forbids, or a modify
//  action (as REGISTRY's nodes declare it) that ROLE may not submit.
//  Leaves that are not well formed pass: they are the handler's to refuse.
bool auth_submit_refused (auth_t *self, registry_t *registry,
                          const proto_request_t *request, auth_role_t role,
                          pw_t *reply);

//  ---------------------------------------------------------------------
//  The key store, for the key.* requests (req/keys.c). Records are
//  borrowed until the next change; the changes are logged, and written
//  into TXN (the caller's pass; NULL: memory only).

//  The key record of KEY (Z85), or NULL.
const auth_key_t *auth_key (auth_t *self, const char *key);

//  Iterates the key records in no order; NULL at the end. No change may
//  happen between first and the last next.
const auth_key_t *auth_key_first (auth_t *self);
const auth_key_t *auth_key_next (auth_t *self);

//  The record that speaks for NODE: the accepted key bound to it, else
//  the one key not accepted that claims it, or the one relay key whose
//  relay goes by that name. NULL when none does, or when several claim
//  it; *CLAIMS_P (when not NULL) gets how many claim it (0 when bound).
const auth_key_t *auth_key_of_node (auth_t *self, const char *node,
                                    size_t *claims_p);

//  Accepts KEY at WALL_MS (made pending first when unknown: bound at its
//  first hello). A pending next key becomes next (its node switches to it
//  at its first hello). A client key, or a relay enrolled in the config
//  (ENROLLED_RELAY), is only lifted out of a revocation: *RECORD_P is
//  then NULL. Returns 0 with the record in *RECORD_P, or -1 with a
//  sentence in WHY when the record's node is bound to another key (a
//  conflict): the record is left as it was, or dropped when it is a
//  pending one that no hello brought (*RECORD_P is then NULL).
int auth_key_accept (auth_t *self, store_txn_t *txn, const char *key,
                     bool enrolled_relay, int64_t wall_ms,
                     const auth_key_t **record_p, char *why, size_t why_len);

//  Rejects KEY at WALL_MS (a record is made when it has none): it may no
//  longer connect. Returns its record; *WAS_BOUND_P is true when it was
//  accepted and bound to a node, which the caller then takes offline.
const auth_key_t *auth_key_reject (auth_t *self, store_txn_t *txn,
                                   const char *key, int64_t wall_ms,
                                   bool *was_bound_p);

//  Deletes KEY's record. Returns 0 with the node it named in *NODE_P (a
//  new string the caller frees, or NULL) and *WAS_BOUND_P true when it was
//  accepted and bound to that node (the caller takes it offline), or -1
//  when KEY has no record.
int auth_key_delete (auth_t *self, store_txn_t *txn, const char *key,
                     char **node_p, bool *was_bound_p);

#endif
