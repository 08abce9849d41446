/*  =========================================================================
    auth - the broker's security: ZAP handler, enrolled keys, node identity,
    client roles, the backend/action allowlist and command subscriptions

    Who a peer is comes from CurveZMQ only: the ZAP handler (RFC 27) sets
    each connection's User-Id to the peer's public key (Z85), and every
    message is judged by the User-Id metadata of its body frame
    (zmq_msg_gets, or zframe_meta), never by what its body claims.

    The handler is the broker's own, served in the broker's zloop on
    inproc://zeromq.zap.01, bound before any other socket binds; the
    endpoints enforce ZAP, so without it every handshake fails. Domains:

        clients    keys configured with a role, and not revoked
        agents     any key not rejected (a new key must be able to connect
        commands   so that it can wait as pending); what it may do is
                   decided per message against the key store

    Key store (STORE_DB_KEYS, cached in memory): public key -> {status
    pending | accepted | rejected, node, hostname, first_seen, accepted_at,
    updated_at}. A hello from an unknown key makes it pending (or accepted,
    with auto_accept); an accepted key is bound to the node id of its first
    hello, and no other key may speak for that node until it is deleted.
    Agent messages other than hello pass only from an accepted key bound to
    the node they name. Key requests (key.list, key.accept, key.reject,
    key.delete) are admin requests.

    Client roles come from the config: viewer (reads, and submits of query
    actions), operator (also modify actions, cancel, delete), admin (also
    keys and drain). A key revoked with key.reject loses its role.

    The commands socket is an XPUB with ZMQ_XPUB_MANUAL: each subscription
    is granted only when its User-Id is an accepted key and the topic is
    all/, node/<its node>/, or a group or label topic of that node's last
    hello; anything else is refused (and counted, from an accepted key).

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
    AUTH_KEY_REJECTED            //  Refused, also at the handshake
} auth_key_status_t;

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
} auth_caller_t;

typedef struct _auth_t auth_t;
typedef struct _broker_t broker_t;

//  ---------------------------------------------------------------------
//  Configuration

//  Fills CONFIG with the defaults: secure, key /etc/grid/keys/broker.key,
//  no clients, no allowlist.
void auth_config_defaults (auth_config_t *config);

//  Frees what CONFIG owns and zeroes it.
void auth_config_clear (auth_config_t *config);

//  Deep copy of SRC into DEST (which holds nothing).
void auth_config_copy (auth_config_t *dest, const auth_config_t *src);

//  Reads the keys key, insecure, auto_accept, max_pending_keys, clients
//  and allow of the config map ROOT into CONFIG. clients is a list
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

//  "pending", "accepted", "rejected".
const char *auth_key_status_name (auth_key_status_t status);

//  ---------------------------------------------------------------------
//  Pure rules (no socket, no store)

//  The least role a client request of TYPE needs. Request types not known
//  here need admin.
auth_role_t auth_role_needed (const char *type);

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
//  insecure), and reads the key store. Call before any socket binds.
//  CONFIG is borrowed and must outlive the result. Returns NULL with a
//  sentence in ERR.
auth_t *auth_new (const auth_config_t *config, store_t *store, char *err,
                  size_t err_len);

//  Unbinds the ZAP handler and frees everything; NULL-safe.
void auth_destroy (auth_t **self_p);

//  Prepares SOCK (not yet bound) to serve DOMAIN (KEYS_DOMAIN_...): a CURVE
//  server with ZAP enforced, or nothing when insecure. The commands socket
//  (an XPUB) also gets ZMQ_XPUB_MANUAL. Returns 0, or -1 with ERR.
int auth_secure_socket (auth_t *self, zsock_t *sock, const char *domain,
                        char *err, size_t err_len);

//  The counters; writes them as AUTH_COUNTER_COUNT map pairs.
const auth_counters_t *auth_counters (const auth_t *self);
void auth_write_counters (const auth_t *self, pw_t *writer);

//  The key record of KEY (Z85), or NULL. Borrowed until the next change.
const auth_key_t *auth_key (auth_t *self, const char *key);

//  ---------------------------------------------------------------------
//  Broker hooks (broker.c calls these; each takes the broker)

//  Registers the ZAP handler and the commands socket's subscriptions in
//  the broker's loop, and logs the security mode. Call once the loop and
//  the sockets exist.
void auth_attach (broker_t *broker);

//  Judges an agent message MSG that was decoded from the received frame
//  BODY: the sender's key is BODY's User-Id metadata (zmq_msg_gets),
//  read only when the broker is secure. BODY is borrowed for the call.
//  Returns 0 to go on, or -1 to drop the message; then *CODE (when not
//  NULL) and WHY are the error to send back. May change the key store
//  (in the pass's transaction).
int auth_agent_check (broker_t *broker, const zmq_msg_t *body,
                      const proto_msg_t *msg, int64_t wall_ms,
                      const char **code, char *why, size_t why_len);

//  auth_agent_check for a message whose sender's key KEY (Z85) a relay of
//  POOL attested (relays.h): the same rules, and a key that first came
//  directly, or through relays of another pool, is refused (forbidden).
//  A new key remembers POOL.
int auth_agent_check_relayed (broker_t *broker, const char *key,
                              const char *pool, const proto_msg_t *msg,
                              int64_t wall_ms, const char **code, char *why,
                              size_t why_len);

//  A relay whose key is not in the config introduced itself as NAME
//  (its own heartbeat, relays.h): its key is kept as a relay key, pending
//  until an admin accepts it (key.accept; never auto-accepted). Returns
//  its record (borrowed until the next change), or NULL when it may not
//  even wait (rejected as an agent key, or too many keys pending).
const auth_key_t *auth_relay_seen (broker_t *broker, const char *key,
                                   const char *name, int64_t wall_ms);

//  True when KEY (Z85) is a configured client key.
bool auth_is_client (const auth_t *self, const char *key);

//  Judges a client request sent by CALLER against the caller's role (a
//  CURVE key's from the config; an HTTP token's from the token store) and
//  the allowlist, and serves the key.*, token.* and whoami requests. Returns true
//  when it wrote the whole reply into REPLY (a refusal, or a key or token
//  request served); false when the request goes on to the API.
bool auth_client_handle (broker_t *broker, const auth_caller_t *caller,
                         const proto_request_t *request, pw_t *reply);

//  The HTTP tokens (token.h), read from the store by auth_new.
struct _token_store_t *auth_tokens (auth_t *self);

#endif
