/*  =========================================================================
    proto - grid's wire messages (protocol version 2, reads 1 and 2)

    Every ZeroMQ message is its routing frames, a topic frame on the
    commands socket, and exactly one msgpack body frame: a map with "v"
    (protocol version, int) and "type" (string), then that type's fields.
    proto/PROTOCOL.md is the normative text; this header is its C face.

    Agent session (agent DEALER <-> broker ROUTER):
        session = HELLO WELCOME *(HEARTBEAT / ACK / STARTED / PROGRESS /
                  RESULT / RESULTS / RESULT-ACK / RESULT-ACKS / COMMAND /
                  CANCEL / ERROR) [BYE]
    Commands socket (broker PUB -> agent SUB), topic frame first:
        feed    = *(COMMAND / CANCEL)
    Client API (client REQ/DEALER <-> broker ROUTER):
        exchange = REQUEST (OK / ERROR)

    Decoding is strict (pv.h) and then checks each message's exact key set,
    types and ranges; anything else is malformed and refused whole. Encoding
    and decoding touch no socket.

    Threading: reentrant.
    =========================================================================
*/
#ifndef GRID_PROTO_H
#define GRID_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pv.h"
#include "pw.h"

//  The protocol this release writes, and the oldest it still reads: a
//  receiver takes bodies of any v from PROTO_VERSION_MIN to PROTO_VERSION
//  (PROTOCOL.md section 6). A sender writes to one peer at that peer's
//  version (the v of its hello, request or relay heartbeat), and what
//  many peers or a later release read (the commands socket, the store,
//  the spool) at PROTO_VERSION_MIN, so that every reader takes it.
#define PROTO_VERSION 2
#define PROTO_VERSION_MIN 1
#define PROTO_MAX_FRAME (16 * 1024 * 1024)  //  ZMQ_MAXMSGSIZE on every socket
#define PROTO_MAX_OUTPUT (1024 * 1024)      //  Longest result output / error
#define PROTO_MAX_TEXT 4096                 //  Longest other string field
#define PROTO_MAX_LIST 4096                 //  Most groups/labels/backends/data/params
#define PROTO_MAX_NODES 100000              //  Most ids in a command's nodes list
#define PROTO_MAX_PARAM_VALUE 4096          //  Longest command param value
#define PROTO_MAX_ATTEMPT 1000              //  Largest attempt number
#define PROTO_MAX_CONCURRENCY 1024          //  Largest hello concurrency
#define PROTO_MAX_HEARTBEAT_MS 3600000      //  Largest welcome heartbeat_ms
#define PROTO_MAX_REQUEST_ID 128            //  Longest client request id
#define PROTO_MAX_PROGRESS 200              //  Longest progress message
#define PROTO_OUTPUT_HEAD 4096              //  Output a result carries when
                                            //  the stream goes in chunks
#define PROTO_MAX_CHUNK (1024 * 1024)       //  Most bytes in one output chunk
#define PROTO_BLOB_CHUNK_BYTES (256 * 1024)       //  Bytes in one blob_chunk (the
                                            //  last one of a blob: fewer)
#define PROTO_MAX_BLOB ((int64_t) 1 << 40)  //  Largest blob the wire allows
#define PROTO_MAX_STREAM ((int64_t) 1 << 30)  //  Largest kept stream (1 GiB)
#define PROTO_MAX_PAGE (4 * 1024 * 1024)    //  Most bytes in one job.output page
#define PROTO_MAX_ACKS 4096                 //  Most results one result_acks covers
#define PROTO_MAX_FEATURES 64               //  Most names in hello's features
#define PROTO_MAX_RESULTS 4096              //  Most entries in one results
#define PROTO_RESULTS_BYTES (4 * 1024 * 1024)  //  A sender's cap on one
                                            //  results body (the frame's
                                            //  own limit is PROTO_MAX_FRAME)

//  Features an agent may name in hello (PROTOCOL.md 4.2): the broker sends
//  it a message only once it said it understands it.
#define PROTO_FEATURE_RESULT_ACKS "result_acks"  //  batched result acks
#define PROTO_FEATURE_TYPED_DATA "typed_data"  //  result data values may be
                                               //  ints (agent -> broker)
#define PROTO_FEATURE_RESULTS "results"  //  batched results (agent -> broker),
                                         //  once welcome grants it
#define PROTO_FEATURE_TRACE "trace"  //  commands carry a traceparent; the
                                     //  agent's results echo it once
                                     //  welcome grants it
#define PROTO_FEATURE_CHECK "check"  //  commands may carry check: the agent
                                     //  runs the action's check instead
                                     //  (PROTOCOL.md 4.5); nothing to grant
#define PROTO_FEATURE_LIVE_OUTPUT "live_output"  //  output pieces while a
                                                 //  task runs, at any offset,
                                                 //  once welcome grants it
#define PROTO_FEATURE_FACTS "facts"  //  facts messages (agent -> broker),
                                     //  once welcome grants it
#define PROTO_FEATURE_EPOCH "epoch"  //  what a cluster's active sends the
                                     //  agent carries its leadership's
                                     //  epoch, once welcome grants it
#define PROTO_FEATURE_REKEY "rekey"  //  the agent may send rekey and the
                                     //  broker answers rekey_ack, once
                                     //  welcome grants it
#define PROTO_FEATURE_OUTPUT_ACKS "output_acks"  //  batched output acks,
                                                 //  once welcome grants it
#define PROTO_FEATURE_REDIRECT "redirect"  //  a cluster's standby may answer
                                           //  hello with an error
                                           //  not_leader naming the active's
                                           //  agent endpoint; nothing to
                                           //  grant
#define PROTO_FEATURE_BLOBS "blobs"  //  the agent fetches blobs (blob_get,
                                     //  blob_chunk) and runs file.put of a
                                     //  sha256, once welcome grants it
#define PROTO_FEATURE_BROKER_REKEY "broker_rekey"  //  the broker may send
                                     //  broker_key (its next key) and the
                                     //  agent answers broker_key_ack, once
                                     //  welcome grants it
//  All of them, as --version lists them
#define PROTO_FEATURES_TEXT PROTO_FEATURE_RESULT_ACKS ", " \
    PROTO_FEATURE_RESULTS ", " PROTO_FEATURE_TYPED_DATA ", " \
    PROTO_FEATURE_TRACE ", " PROTO_FEATURE_LIVE_OUTPUT ", " \
    PROTO_FEATURE_FACTS ", " \
    PROTO_FEATURE_CHECK ", " \
    PROTO_FEATURE_EPOCH ", " \
    PROTO_FEATURE_REKEY ", " \
    PROTO_FEATURE_OUTPUT_ACKS ", " \
    PROTO_FEATURE_REDIRECT ", " \
    PROTO_FEATURE_BLOBS ", " \
    PROTO_FEATURE_BROKER_REKEY

//  Codec returns (STYLE: 0 ok, -1 I/O, -2 malformed)
#define PROTO_OK 0
#define PROTO_EIO -1
#define PROTO_EMALFORMED -2

typedef enum {
    PROTO_HELLO = 1,     //  agent -> broker: registration
    PROTO_HEARTBEAT,     //  agent -> broker: liveness
    PROTO_ACK,           //  agent -> broker: took a command
    PROTO_STARTED,       //  agent -> broker: began running it
    PROTO_RESULT,        //  agent -> broker: finished attempt
    PROTO_BYE,           //  agent -> broker: graceful stop
    PROTO_WELCOME,       //  broker -> agent: registration accepted
    PROTO_RESULT_ACK,    //  broker -> agent: result committed, drop it from the spool
    PROTO_COMMAND,       //  broker -> agent(s): run one step (PUB or direct)
    PROTO_CANCEL,        //  broker -> agent(s): stop a job's work (PUB or direct)
    PROTO_ERROR,         //  broker -> agent: refusal with code and sentence
    PROTO_PROGRESS,      //  agent -> broker: how far a running task has come
    PROTO_OUTPUT,        //  agent -> broker: a piece of a result's output
    PROTO_OUTPUT_ACK,    //  broker -> agent: output piece committed
    PROTO_RESULT_ACKS,   //  broker -> agent: several results committed at once
    PROTO_RESULTS,       //  agent -> broker: several finished attempts at once
    PROTO_FACTS,         //  agent -> broker: all its facts, when they changed
    PROTO_REKEY,         //  agent -> broker: the next key of this node
    PROTO_REKEY_ACK,     //  broker -> agent: where that next key stands
    PROTO_OUTPUT_ACKS,   //  broker -> agent: several output pieces committed
    PROTO_BLOB_GET,      //  agent -> broker: the piece of a blob at an offset
    PROTO_BLOB_CHUNK,    //  broker -> agent: that piece, or why not
    PROTO_BROKER_KEY,    //  broker -> agent: the broker's next public key
    PROTO_BROKER_KEY_ACK //  agent -> broker: that key is kept
} proto_type_t;

//  One result a result_acks message acknowledges, or one output piece an
//  output_acks does (then STREAM and OFFSET say which).
typedef struct {
    const char *job;     //  Job id (decoded: in the same allocation as acks)
    uint32_t step;       //  Flat step index
    uint32_t attempt;    //  1-based attempt number
    const char *stream;  //  output_acks: "stdout" or "stderr" (decoded: a
                         //  constant)
    uint64_t offset;     //  output_acks: where the piece starts
} proto_ack_t;

typedef struct {
    char *key;      //  A name
    char *value;    //  Text
    bool number;    //  result data: VALUE is a whole number, sent as an int
                    //  (only to a broker that granted typed_data)
} proto_kv_t;

typedef struct {
    char *name;           //  Param name
    bool required;        //  Must be given
    char *type;           //  "string", "int", "bool", "path", "host", "duration",
                          //  "text" (free text, see backends/backend.h)
    char *pattern;        //  Optional POSIX extended regex the value must match, or NULL
    char *default_value;  //  Default when not given, or NULL
    char *help;           //  One line for operators
    int64_t min_value;    //  "int": least allowed, when min_value < max_value
    int64_t max_value;    //  "int": greatest allowed, when min_value < max_value
} proto_param_spec_t;

typedef struct {
    char *name;                  //  Action name
    bool modify;                 //  true = changes the host, false = query
    char *help;                  //  One line for operators
    proto_param_spec_t *params;  //  Its params
    size_t param_count;          //  How many
    bool idempotent;             //  A modify action that may run twice without harm
} proto_action_spec_t;

typedef struct {
    char *name;                    //  Backend name
    proto_action_spec_t *actions;  //  Its actions
    size_t action_count;           //  How many
    char *version;                 //  Backend version, or NULL (optional in hello)
} proto_backend_spec_t;

//  One message of any agent-session or commands-socket type. Only the
//  fields of its type are meaningful; the rest are zero/NULL. Every pointer
//  is owned by the message. A message made by proto_msg_new owns each
//  string and array on its own: a caller may free or replace one. A
//  message proto_msg_decode made of any type but hello is one allocation
//  (packed): its strings and arrays live inside it, so they must never
//  be freed, replaced or kept past proto_msg_destroy, which frees them all.
typedef struct proto_msg_s proto_msg_t;
struct proto_msg_s {
    proto_type_t type;           //  Which message
    int protocol;                //  Decoded: the body's v. Encoded: the v
                                 //  to write (0: PROTO_VERSION); the
                                 //  caller writes only keys it carries
    char *node;                  //  hello, heartbeat, ack, started, result, bye, welcome
    //  hello
    char *hostname;              //  Host's name
    char **groups;               //  Group names
    size_t group_count;
    proto_kv_t *labels;          //  key -> dotted value
    size_t label_count;
    proto_backend_spec_t *backends;  //  What the agent offers
    size_t backend_count;
    char *version;               //  Agent software version
    uint32_t concurrency;        //  Executor pool size (>= 1)
    char *instance;              //  This agent process's id, or NULL (optional)
    char **features;             //  hello: optional messages it understands;
    size_t feature_count;        //  welcome: those granted (PROTO_FEATURE_...),
                                 //  may be 0
    //  heartbeat
    uint32_t running;            //  Tasks running now
    uint32_t queued;             //  Tasks waiting in the executor
    //  ack, started, result, result_ack, command, cancel
    char *job;                   //  Job id
    uint32_t step;               //  Flat step index (command, ack, started, result, result_ack; cancel: unused)
    uint32_t attempt;            //  1-based attempt number
    //  result
    char *status;                //  "success", "failed", "timeout", "cancelled", "interrupted", "refused"
    char *output;                //  Captured stdout (may be truncated)
    char *error;                 //  Captured stderr or the reason, may be ""
    int32_t exit_code;           //  Program exit code, -1 when none
    uint64_t duration_ms;        //  Wall time of the attempt
    bool truncated;              //  Output or error was cut at the cap
    proto_kv_t *data;            //  Structured facts (optional)
    size_t data_count;
    uint64_t output_size;        //  result: stdout's kept bytes, sent in
    uint64_t error_size;         //  output pieces (0: output/error is all)
    uint64_t output_dropped;     //  result: bytes the cap dropped from the
    uint64_t error_dropped;      //  middle of stdout / stderr
    //  output, output_ack
    char *stream;                //  "stdout" or "stderr"
    uint64_t offset;             //  Where the piece starts in the stream
    uint8_t *chunk;              //  output: the piece's bytes
    size_t chunk_len;            //  output: how many (1..PROTO_MAX_CHUNK)
    uint64_t size;               //  output: the stream's kept size;
                                 //  blob_chunk: the blob's size
    char *sha256;                //  blob_get, blob_chunk: the blob (64 hex)
    //  result_acks, output_acks: one allocation, the entries then their
    //  job ids, so that free (acks) frees all of it
    proto_ack_t *acks;
    size_t ack_count;            //  1..PROTO_MAX_ACKS
    //  results: the entries, in order, each a whole PROTO_RESULT whose
    //  node is this message's. A decoded entry that broke a rule of result
    //  has type 0 and its reason in message ("results[2].status: ..."),
    //  so the receiver takes the others and counts it. In a message made
    //  by proto_msg_new the entries and what they hold are owned by it
    struct proto_msg_s *results;
    size_t result_count;         //  1..PROTO_MAX_RESULTS
    //  facts: name -> value (facts.h), sorted by name
    proto_kv_t *facts;
    size_t fact_count;           //  0..FACT_MAX_COUNT
    //  welcome
    uint64_t max_output;         //  Bytes kept per stream (0: not said)
    //  welcome, command, cancel, result_ack, result_acks, output_ack
    uint64_t epoch;              //  The sending active's leadership epoch
                                 //  (epoch feature); 0: none written (a
                                 //  broker alone, or a receiver that did
                                 //  not take the feature)
    //  command
    char *backend;               //  Backend name
    char *action;                //  Action name
    proto_kv_t *params;          //  Params (sorted by key)
    size_t param_count;
    uint64_t timeout_ms;         //  Task timeout the agent enforces
    bool parallel;               //  command: may run alongside other steps of its job
    bool check;                  //  command: run the action's check, never the
                                 //  action (only to agents that named the
                                 //  check feature)
    char *traceparent;           //  command, result: the W3C trace context
                                 //  (only with the trace feature), or NULL
    char **nodes;                //  command/cancel: only these nodes act (NULL = every receiver)
    size_t node_count;
    //  progress (and message, below)
    int32_t percent;             //  0..100, or -1 when the task does not know
    char *kind;                  //  What it is doing: a name ("downloading"), or NULL
    //  welcome
    uint32_t heartbeat_ms;       //  How often the agent must beat
    //  bye, error, cancel
    char *reason;                //  bye: why; cancel: why
    char *code;                  //  error: stable code
    char *message;               //  error: a sentence; progress: what it does now (optional);
                                 //  rekey_ack: why (optional)
    char *key;                   //  rekey, rekey_ack, broker_key,
                                 //  broker_key_ack: a public key (Z85)
    char *endpoint;              //  error not_leader (redirect feature):
                                 //  the active's agent endpoint, or NULL
    bool packed;                 //  Decoded into one allocation (see above)
    void *chunks;                //  packed: further chunks, the codec's own
};

//  A new zeroed message of TYPE.
proto_msg_t *proto_msg_new (proto_type_t type);

//  Frees a message and all it owns; NULL-safe, nulls *self_p.
void proto_msg_destroy (proto_msg_t **self_p);

//  The wire name of a type ("hello", "result_ack", ...), or "?" .
const char *proto_type_name (proto_type_t type);

//  Appends the encoding of MSG to WRITER. Returns 0, or -2 when MSG breaks
//  the protocol's own rules (missing field, bad name): never put such a
//  message on the wire.
int proto_msg_encode (const proto_msg_t *msg, pw_t *writer);

//  Appends a result_ack for JOB, STEP and ATTEMPT to WRITER, with EPOCH
//  (0: none), at protocol VERSION (0: PROTO_VERSION): the bytes
//  proto_msg_encode writes for it, without building a message. Returns 0,
//  or -2 when a field breaks the protocol's rules.
int proto_result_ack_encode (const char *job, uint32_t step,
                             uint32_t attempt, uint64_t epoch, int version,
                             pw_t *writer);

//  Appends a result_acks for the COUNT results in ACKS to WRITER, with
//  EPOCH (0: none), at protocol VERSION (0: PROTO_VERSION; the bytes
//  proto_msg_encode writes for it). Returns 0, or -2 when COUNT is 0 or
//  above PROTO_MAX_ACKS or an entry breaks the protocol's rules.
int proto_result_acks_encode (const proto_ack_t *acks, size_t count,
                              uint64_t epoch, int version, pw_t *writer);

//  Appends an output_acks for the COUNT output pieces in ACKS (each with
//  its stream and offset) to WRITER, with EPOCH (0: none), at protocol
//  VERSION (0: PROTO_VERSION; the bytes proto_msg_encode writes for it).
//  Returns 0, or -2 when COUNT is 0 or above PROTO_MAX_ACKS or an entry
//  breaks the protocol's rules.
int proto_output_acks_encode (const proto_ack_t *acks, size_t count,
                              uint64_t epoch, int version, pw_t *writer);

//  Whether protocol version VERSION is one this release reads.
bool proto_version_spoken (int64_t version);

//  The version to write to a peer that sent VERSION: VERSION itself when
//  this release speaks it, else the spoken one nearest to it (a refusal
//  to a newer peer at PROTO_VERSION, to an older one at
//  PROTO_VERSION_MIN).
int proto_version_for (int64_t version);

//  A sentence on a peer of version VERSION that this release does not
//  speak, into TEXT (LEN bytes), e.g. "unsupported version 3 (speaks 1
//  to 2)". Returns TEXT.
const char *proto_version_refusal (int64_t version, char *text, size_t len);

//  Appends the start of a results from NODE with COUNT entries to WRITER:
//  the caller then appends COUNT entries with proto_results_entry_encode.
//  Returns 0, or -2 when NODE is not a name or COUNT is 0 or above
//  PROTO_MAX_RESULTS.
int proto_results_begin (const char *node, size_t count, pw_t *writer);

//  Appends RESULT (a PROTO_RESULT; its node is not written) to WRITER as
//  one entry of a results. Returns 0, or -2 when RESULT breaks the rules
//  of result (then nothing was appended).
int proto_results_entry_encode (const proto_msg_t *result, pw_t *writer);

//  Whether MSG (a hello or a welcome) names FEATURE in its features.
bool proto_msg_has_feature (const proto_msg_t *msg, const char *feature);

//  Whether HELLO names FEATURE (a PROTO_FEATURE_ name) in its features.
bool proto_hello_has_feature (const proto_msg_t *hello, const char *feature);

//  Decodes one body frame. Returns 0 and a new message in *MSG_P, or -2
//  (malformed: wrong version, unknown type, missing/extra/mistyped field,
//  bad name, out-of-range value, trailing bytes...) with a short reason in
//  WHY. A version mismatch is reported as "unsupported version N (speaks 1
//  to 2)". The message's protocol holds the body's v.
int proto_msg_decode (const void *data, size_t size, proto_msg_t **msg_p,
                      char *why, size_t why_len);

//  The two ways proto_msg_decode reads a frame, apart for tests and the
//  fuzzer. The direct decode reads messages of strings, ints, bools and
//  maps of strings (result, ack, heartbeat...) and results whose entries
//  are all good straight from the bytes:
//  it returns 0 and a new message in *MSG_P exactly as proto_msg_decode
//  would give it, or 1 when it declines the frame (another type, another
//  shape, anything malformed), leaving *MSG_P NULL. It never accepts what
//  the schema decode refuses. The schema decode reads every frame through
//  a tree of its values and gives every error; proto_msg_decode uses it
//  for whatever the direct decode declines. Same returns as
//  proto_msg_decode.
int proto_msg_decode_direct (const void *data, size_t size,
                             proto_msg_t **msg_p);
int proto_msg_decode_schema (const void *data, size_t size,
                             proto_msg_t **msg_p, char *why, size_t why_len);

//  ---------------------------------------------------------------------
//  Client API. A request is {v, type, id, ...fields}; the reply is
//  {v, type: "ok", id, data: {...}} or {v, type: "error", id, code,
//  message, ?details: [str]}. The request types and their fields are in
//  PROTOCOL.md and checked by proto_request_decode.

//  Stable error codes (PROTOCOL.md explains each).
#define PROTO_ERR_MALFORMED "malformed"            //  not a valid message
#define PROTO_ERR_VERSION "unsupported_version"    //  v is not spoken
#define PROTO_ERR_UNKNOWN_TYPE "unknown_type"      //  no such request
#define PROTO_ERR_BAD_REQUEST "bad_request"        //  fields wrong
#define PROTO_ERR_INVALID_JOB "invalid_job"        //  spec fails validation (details)
#define PROTO_ERR_NOT_FOUND "not_found"            //  no such job/node
#define PROTO_ERR_NO_NODES "no_nodes"              //  no node of the target can run the job
#define PROTO_ERR_UNKNOWN_NODE "unknown_node"      //  a node id the target names is not registered (details)
#define PROTO_ERR_QUEUE_FULL "queue_full"          //  admission refused
#define PROTO_ERR_CONFLICT "conflict"              //  e.g. cancel of a finished job
#define PROTO_ERR_STORE "storage_error"            //  store failing (I/O), or unreadable
#define PROTO_ERR_STORAGE_FULL "storage_full"      //  disk or store.max_size full: nothing changed
#define PROTO_ERR_UNAUTHORIZED "unauthorized"      //  unknown key
#define PROTO_ERR_FORBIDDEN "forbidden"            //  role may not do this
#define PROTO_ERR_MAINTENANCE "maintenance"        //  broker drained
#define PROTO_ERR_INTERNAL "internal"              //  a bug; logged
#define PROTO_ERR_TOO_LARGE "too_large"            //  the reply would pass PROTO_MAX_FRAME
#define PROTO_ERR_DUPLICATE_NODE "duplicate_node"  //  node online from another live agent
#define PROTO_ERR_NOT_LEADER "not_leader"          //  a cluster's standby: details name the active's client endpoint

typedef struct {
    char *type;        //  Request type ("job.submit", ...)
    char *id;          //  Client request id (echoed in the reply)
    int version;       //  Its v: the reply is written at it
    const pv_t *body;  //  The whole request map (borrowed from doc)
    pv_doc_t *doc;     //  Owns body
} proto_request_t;

//  Decodes a client request frame and checks its fields against the
//  table of its type. Returns 0 and *REQ_P; or -2 with CODE set to one of
//  the PROTO_ERR_ codes (a static string) and a sentence in WHY. When the
//  frame carried a readable id, *ID_P gets a copy (caller frees) so the
//  error reply can echo it; else *ID_P is NULL.
int proto_request_decode (const void *data, size_t size,
                          proto_request_t **req_p, const char **code,
                          char **id_p, char *why, size_t why_len);

//  Frees a request; NULL-safe, nulls *req_p.
void proto_request_destroy (proto_request_t **req_p);

//  The request type at INDEX of the closed set proto_request_decode
//  accepts (a static string), or NULL past the last one.
const char *proto_request_type_at (size_t index);

//  Starts a request: writes {v, type, id, and then FIELD_COUNT more pairs
//  that the caller writes (key, value, key, value...)}.
void proto_request_begin (pw_t *writer, const char *type, const char *id,
                          size_t field_count);

//  Starts an ok reply: writes {v, type: "ok", id, data: then the caller
//  writes exactly one value (the data map).
void proto_reply_ok_begin (pw_t *writer, const char *id);

//  Writes a whole error reply. DETAILS (DETAIL_COUNT sentences) may be NULL.
void proto_reply_error (pw_t *writer, const char *id, const char *code,
                        const char *message, char *const *details,
                        size_t detail_count);

//  The replies above are written at PROTO_VERSION. The version a reply to
//  the request body DATA (SIZE bytes) must be written at: proto_version_for
//  its v, or PROTO_VERSION_MIN when it has no readable v (the oldest
//  reader then takes the error).
int proto_reply_version (const void *data, size_t size);

//  Rewrites the v of the reply REPLY (SIZE bytes, as the writers above
//  made it) to VERSION, in place. Returns 0, or -1 when REPLY does not
//  start as they write ({v: small int, ...}; nothing is changed).
int proto_reply_set_version (void *reply, size_t size, int version);

#endif
