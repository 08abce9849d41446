/*  =========================================================================
    client - what every ZeroMQ client of the broker's client API needs

    gridcli, the benchmarks and other tools talk to the broker's client
    endpoint (proto/PROTOCOL.md section 5) through this module, so that
    CURVE, retries and the reply envelope are written once:

    - connect: a client_t names the broker's endpoint and, unless it runs
      plaintext, our CURVE key pair and the broker's public key (given, or
      loaded from the key files gridcli uses);
    - Lazy Pirate: client_call sends one request on a REQ socket and waits
      for its reply; a try that gets no answer is abandoned with its
      socket, and the same bytes (so the same client request id, which
      lets the broker deduplicate) go out again on a fresh socket, up to
      `tries` times within one total timeout. A socket that got its
      answer is kept for the next call's first try, so that the requests
      of one process share one connection and one CURVE handshake;
    - typed requests: client_begin starts a request of any type with a
      fresh id (the generic form); client_job_get, client_status and the
      other helpers below write the common ones whole;
    - replies: every answer is decoded into a client_reply_t, ok with its
      data or an error with its stable code and sentence;
    - pipelining: client_send and client_recv put many requests in flight
      on one DEALER (benchmarks and scripts that do not wait for each
      reply).

    Failures are returned as one of the CLIENT_ERR_ codes below with a
    sentence in client_error (); nothing is printed.

    Threading: a client_t belongs to one thread. client_call watches
    CZMQ's zsys_interrupted (Ctrl-C) and gives up with
    CLIENT_ERR_INTERRUPTED.
    =========================================================================
*/
#ifndef GRID_CLIENT_H
#define GRID_CLIENT_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pv.h"
#include "../proto/pw.h"

#define CLIENT_DEFAULT_TIMEOUT_MS 5000  //  Total wait for one answer
#define CLIENT_DEFAULT_TRIES 3          //  Lazy Pirate tries per request
#define CLIENT_ID_LEN 64                //  Buffer size for a request id
#define CLIENT_BROKER_KEYS_MAX 8        //  Broker keys one client may trust
//  Room for CLIENT_BROKER_KEYS_MAX keys of Z85, comma-separated
#define CLIENT_BROKER_KEYS_SIZE (CLIENT_BROKER_KEYS_MAX * 41)

//  What client_call, client_exchange and the typed helpers return.
#define CLIENT_OK 0                     //  An answer came (ok or error)
#define CLIENT_ERR_NO_ANSWER -1         //  No answer within the timeout
#define CLIENT_ERR_MALFORMED -2         //  The answer was lost or malformed
#define CLIENT_ERR_ENDPOINT -3          //  The endpoint is not usable
#define CLIENT_ERR_REFUSED -4           //  The broker refused our key
#define CLIENT_ERR_INTERRUPTED -5       //  Ctrl-C (zsys_interrupted)

typedef struct _client_t client_t;

//  One decoded answer. ok answers lend DATA; error answers fill CODE,
//  MESSAGE and DETAILS. All of it lives until client_reply_clear.
typedef struct {
    pv_doc_t *doc;            //  The whole answer (owned), or NULL
    bool ok;                  //  type "ok"
    const pv_t *data;         //  ok: the data map (lent by doc)
    char code [64];           //  error: the stable code, e.g. "not_found"
    char *message;            //  error: the broker's sentence (owned)
    const pv_t *details;      //  error: array of sentences, or NULL
} client_reply_t;

//  Creates a client of the broker at ENDPOINT (tcp://HOST:PORT or
//  ipc:///PATH), plaintext until keys are set, with the default timeout
//  and tries. Connects nothing yet. Returns NULL when out of memory.
//  ENDPOINT may list a broker cluster's members, comma-separated: each
//  try of a call goes to the next one, and an answer not_leader that
//  names the active's endpoint (details[0]) sends the call there (the
//  same keys: a cluster's members share the broker key pair, or the
//  client runs --insecure; several broker keys, client_set_curve, apply
//  to every endpoint alike).
client_t *client_new (const char *endpoint);

//  Destroys the client and its sockets; NULL-safe, nulls *SELF_P.
void client_destroy (client_t **self_p);

//  Whether a not_leader answer sends the call on to the active it names
//  (the default), or is the answer (FOLLOW false: a tool that asks one
//  member what it is).
void client_set_redirects (client_t *self, bool follow);

//  The endpoint in use: the one given to client_new, or of a cluster's,
//  the one that answered last.
const char *client_endpoint (const client_t *self);

//  Speaks CURVE from now on with a copy of the key pair CERT, trusting
//  the broker's public key BROKER_KEY (40 characters of Z85), or any of
//  the keys of a comma-separated list of them ("OLD,NEW": the broker's
//  current and next key while it rotates its key, see docs/SECURITY.md):
//  sockets use the first; a handshake that fails (the monitor tells,
//  without waiting out the try) moves to the next, with the same request
//  and within the same timeout, and the key that went through stays the
//  one new sockets use. When every key failed its handshake the call
//  gives up at once (CLIENT_ERR_NO_ANSWER, the keys named in
//  client_error). CERT NULL goes back to plaintext. A pipeline's DEALER
//  made before is closed (the next client_send makes one with the keys).
//  Returns 0, or -1 when BROKER_KEY is not a list of 1 to
//  CLIENT_BROKER_KEYS_MAX keys.
int client_set_curve (client_t *self, const zcert_t *cert,
                      const char *broker_key);

//  Reads the broker keys LIST: comma-separated, each a key file or 40
//  characters of Z85, 1 to CLIENT_BROKER_KEYS_MAX of them, none empty.
//  Writes their Z85 into KEYS (CLIENT_BROKER_KEYS_SIZE bytes),
//  comma-separated, as client_set_curve takes them. Returns the number of
//  keys, or -1 with a sentence in WHY (which element, and why).
int client_broker_keys_read (const char *list, char *keys, char *why,
                             size_t why_len);

//  Loads our key pair from KEY_PATH (a public or secret key file, as
//  gridcli keygen writes them) and the broker's public keys from
//  BROKER_KEY (as client_broker_keys_read), then speaks CURVE.
//  Returns 0, or -1 with a sentence in client_error ().
int client_load_keys (client_t *self, const char *key_path,
                      const char *broker_key);

//  The broker key new sockets use (Z85): the first given, or the last
//  one a handshake went through with; "" when plaintext.
const char *client_broker_key (const client_t *self);

//  True when the client speaks CURVE.
bool client_secure (const client_t *self);

//  The total time one call may take, over all its tries (<= 0: the
//  default), and how many tries it gets (< 1: the default).
void client_set_timeout (client_t *self, int64_t timeout_ms);
void client_set_tries (client_t *self, int tries);
int64_t client_timeout (const client_t *self);
int client_tries (const client_t *self);

//  Why the last call failed, as one sentence ("" after a success).
const char *client_error (const client_t *self);

//  After CLIENT_ERR_NO_ANSWER: what the handshakes said, when they failed
//  (a wrong broker key, CURVE on one side only), else "".
const char *client_handshake_error (const client_t *self);

//  Writes a new client request id into BUF (CLIENT_ID_LEN bytes):
//  "<host>-<pid>-<counter>-<random hex>", unique across processes and
//  calls, and a valid name ([A-Za-z0-9_-], at most 64 characters).
void client_request_id (char *buf, size_t buf_len);

//  Lazy Pirate: sends REQUEST (SIZE bytes) and waits for one answer, each
//  try on a fresh REQ socket with the same bytes (the first on the last
//  answered call's socket, when there is one). Returns CLIENT_OK with
//  the decoded answer in *REPLY_P (caller destroys), or a CLIENT_ERR_
//  code with a sentence in client_error ().
int client_exchange (client_t *self, const void *request, size_t size,
                     pv_doc_t **reply_p);

//  Decodes the envelope of ANSWER, the answer to request ID, into REPLY,
//  which borrows from ANSWER (REPLY->doc stays NULL: ANSWER must outlive
//  REPLY). Returns CLIENT_OK (REPLY->ok tells ok from error), or
//  CLIENT_ERR_MALFORMED with a sentence in WHY (a protocol version we do
//  not speak, another request's id, no data, an error without code or
//  message). Release REPLY with client_reply_clear in both cases.
int client_reply_decode (const pv_doc_t *answer, const char *id,
                         client_reply_t *reply, char *why, size_t why_len);

//  Frees what REPLY holds and zeroes it; safe on a zeroed reply.
void client_reply_clear (client_reply_t *reply);

//  client_exchange of the request in WRITER, whose id is ID, then
//  client_reply_decode. Returns CLIENT_OK with REPLY filled (ok or error),
//  or a CLIENT_ERR_ code with a sentence in client_error ().
int client_call (client_t *self, const pw_t *writer, const char *id,
                 client_reply_t *reply);

//  The generic request: client_begin resets the client's own writer,
//  makes a fresh id and writes {v, type: TYPE, id} with room for
//  FIELD_COUNT more pairs, which the caller writes into the returned
//  writer (lent until the next client_begin); client_end sends it with
//  client_call.
pw_t *client_begin (client_t *self, const char *type, size_t field_count);
int client_end (client_t *self, client_reply_t *reply);

//  The id of the request client_begin started last.
const char *client_request_id_last (const client_t *self);

//  Typed requests (each as client_call). Names, fields and answers are
//  those of proto/PROTOCOL.md section 5.
//  job.submit of JOB, a job in the wire form (job_spec_encode writes it)
int client_job_submit (client_t *self, const pw_t *job,
                       client_reply_t *reply);
//  job.get: the whole record of JOB
int client_job_get (client_t *self, const char *job, client_reply_t *reply);
//  job.progress: JOB's counts and running tasks
int client_job_progress (client_t *self, const char *job,
                         client_reply_t *reply);
//  job.watch: answered when JOB changes past VERSION (any change when
//  VERSION < 0), or after TIMEOUT_MS
int client_job_watch (client_t *self, const char *job, int64_t version,
                      int64_t timeout_ms, client_reply_t *reply);
//  job.events after sequence number AFTER (all when AFTER < 0)
int client_job_events (client_t *self, const char *job, int64_t after,
                       client_reply_t *reply);
//  job.output: LIMIT bytes of STREAM ("stdout" or "stderr") of step STEP
//  on NODE, from OFFSET
int client_job_output (client_t *self, const char *job, const char *node,
                       int step, const char *stream, int64_t offset,
                       int64_t limit, client_reply_t *reply);
//  The same of attempt ATTEMPT (1..1000) of that step
int client_job_output_attempt (client_t *self, const char *job,
                               const char *node, int step, const char *stream,
                               int attempt, int64_t offset, int64_t limit,
                               client_reply_t *reply);
//  status, node.list, queue.stats, metrics.get, relay.list, token.list
int client_status (client_t *self, client_reply_t *reply);
int client_node_list (client_t *self, client_reply_t *reply);
int client_queue_stats (client_t *self, client_reply_t *reply);
int client_metrics_get (client_t *self, client_reply_t *reply);
int client_relay_list (client_t *self, client_reply_t *reply);
int client_token_list (client_t *self, client_reply_t *reply);
//  token.add NAME with ROLE (viewer, operator, admin); token.revoke NAME
int client_token_add (client_t *self, const char *name, const char *role,
                      client_reply_t *reply);
int client_token_revoke (client_t *self, const char *name,
                         client_reply_t *reply);

//  Pipelining over one DEALER (connected on first use, with the client's
//  keys): client_send queues SIZE bytes of REQUEST without waiting;
//  client_recv waits up to TIMEOUT_MS for the next answer to any of them
//  and returns it decoded (caller destroys), or NULL (timeout, or a frame
//  that is not msgpack). Answers come in the order the broker sends them;
//  match them by id. client_send returns 0 or -1.
int client_send (client_t *self, const void *request, size_t size);
pv_doc_t *client_recv (client_t *self, int timeout_ms);

//  The pipeline's DEALER (made and connected when needed), for a caller
//  that polls it with others; NULL with a sentence in client_error ().
//  Lent: valid until client_set_curve or client_destroy.
zsock_t *client_dealer (client_t *self);

//  The largest answer the sockets accept (ZMQ_MAXMSGSIZE): PROTO_MAX_FRAME
//  unless set; -1 for no limit (a benchmark reading huge job records from
//  a broker it started). Applies to sockets made after the call.
void client_set_max_frame (client_t *self, int64_t max_bytes);

#endif
