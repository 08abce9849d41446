/*  =========================================================================
    broker_int - the server's own struct and what its rooms share

    The server is split by concern into rooms that share one struct:
    broker.c (the loop, its timers and signals, the tick, start and stop),
    broker_pass.c (the pass: transaction, outbox, commit or undo, the
    scheduler's drain), broker_agents.c (the agent socket),
    broker_clients.c (the client socket and the HTTP bridge) and
    broker_restore.c (start-up reading, rebuild, retention). Only these
    files include this header; handlers see the context (ctx.h).

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_INT_H
#define GRID_BROKER_INT_H

#include <signal.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "../ha/elector.h"
#include "../proto/conf.h"
#include "../proto/log.h"
#include "../proto/mpscan.h"
#include "../proto/service.h"
#include "audit.h"
#include "blobserve.h"
#include "dlq.h"
#include "jobrec.h"
#include "notify.h"
#include "nodefacts.h"
#include "nodehist.h"
#include "nodeseen.h"
#include "outpace.h"
#include "reload.h"
#include "repl.h"
#include "requests.h"
#include "schedrun.h"
#include "schedule.h"
#include "subgate.h"
#include "token.h"

#define CLIENT_BATCH_MAX 512     //  Client requests read per pass...
#define CLIENT_PASS_JOURNAL_MAX (8u << 20)  //  ...until a cluster's pass
                                 //  journal holds this much (blob pieces):
                                 //  a standby applies it in its map's
                                 //  headroom, a message far under its limit
#define AGENT_PASS_MAX 8192      //  Agent messages read per pass at most
                                 //  (a results counts its entries)...
#define AGENT_PASS_MS 50         //  ...or for this long, then one commit
#define OUTPUT_COMMIT_MS 25      //  A pass of output pieces alone commits
                                 //  with the next, this much later at most
#define RELAY_BATCH_PAIRS 1024   //  Sends to one relay in one message, most
#define TICK_PASSES 4            //  Agent socket passes before each tick
#define BACKLOG_LAG_MAX_MS 30000 //  Deadlines wait for a backlog at most this
#define REPLY_CACHE_MAX 10000    //  Client replies kept for retries
#define S_DUPLICATE_EPISODE_MS 600000  //  duplicate_node refusals this far
                                 //  apart are separate entries in history
#define SEND_BYTES_KEEP (1 << 20) //  Larger send buffers are freed after use
#define REPLAY_MAX 8             //  Passes replayed after a full map grew
#define STORE_REARM_PERCENT 85   //  The nearly-full warning again below this
#define STORE_COOLDOWN_MS 1000   //  After a failed commit the agent socket rests
#define STORE_QUIET_MS 3000      //  A failure episode ends after this without one
#define STORE_PROBE_MS 1000      //  While failing, the tick tries a write this often
#define META_PROBE "store_probe"

//  A two-frame message (routing id or topic, then body), or three with
//  a relay's via frame between them (relays.h), that waits for the
//  pass's commit. Its bytes lie in broker_io_t.bytes: the first frame,
//  the via frame, the body, then for agent sends the node id and a NUL.
typedef struct {
    zsock_t *socket;             //  Agent ROUTER or commands XPUB
    size_t offset;               //  Where its bytes start
    size_t first_size;           //  Routing id or topic
    size_t via_size;             //  Via frame (0: none)
    size_t body_size;            //  msgpack body
    size_t node_size;            //  Node id (agent sends, for logs), or 0
    bool needs_commit;           //  Dropped when the pass's commit fails
} s_send_t;

//  A client reply waiting for the pass's commit, with what a failed
//  commit needs to answer for it: the request (replayed after the map
//  grew), its id, and whether handling it wrote to the store.
typedef struct {
    zsock_t *socket;             //  Where it goes: the client ROUTER, or the
                                 //  HTTP face's bridge
    zmsg_t *reply;               //  Envelope and reply body
    zmsg_t *request;             //  The request as it came
    char *id;                    //  Its request id ("" when unreadable)
    bool wrote;                  //  Its handling changed the store
} s_pending_t;

//  Frees a pending reply; NULL-safe.
void broker_pending_destroy (s_pending_t **self_p);


//  A result, or an output piece, to acknowledge once the pass commits
//  (s_acks_queue).
typedef struct {
    registry_node_t *node;       //  Who sent it (nodes live as long as the
                                 //  registry)
    char job [32];               //  Its job id (job_id_valid: 19 chars)
    uint32_t step;
    uint32_t attempt;
    uint32_t next;               //  The node's next one, or UINT32_MAX
    bool output;                 //  An output piece (output_acks)...
    bool stderr_;                //  ...of stderr, else stdout
    uint64_t offset;             //  ...at this offset
} s_ack_t;

//  The acks of one node in a pass: a slot of an open-addressing table
//  keyed by the node's address.
typedef struct {
    registry_node_t *node;       //  NULL: free
    uint32_t head;               //  Its first ack
    uint32_t tail;               //  Its last ack
} s_ack_slot_t;

//  The agent socket's receive frames and the queue of two-frame sends.
//  Both are reused from message to message and pass to pass: the hot
//  path allocates nothing once the buffers have grown.
typedef struct _broker_io_t broker_io_t;

struct _broker_io_t {
    zmq_msg_t routing;           //  Agent socket: routing id frame
    zmq_msg_t via;               //  Agent socket: a relay's via frame
    size_t answer_size;          //  Bytes of via that reach the sender
    zmq_msg_t body;              //  Agent socket: body frame
    bool batch_more;             //  A relay's batch: another pair of via
                                 //  and body follows (s_agent_recv)
    bool only_output;            //  The last message was an output piece
                                 //  or a heartbeat (s_on_agent_message)
    zhashx_t *batch_relays;      //  Routing ids (hex) of the relay
                                 //  connections granted result_acks: what
                                 //  goes to one of them in a row goes as
                                 //  one message of [via] [body] pairs
    uint8_t *bytes;              //  Queued sends' bytes, back to back
    size_t bytes_size;           //  Bytes used
    size_t bytes_max;            //  Bytes allocated
    s_send_t *sends;             //  Queued sends, in order
    size_t send_count;           //  Sends queued
    size_t send_max;             //  Sends allocated
    int64_t agents_empty_ms;     //  Monotonic: a pass that began then found
                                 //  the agent socket empty
    s_ack_t *acks;               //  Results of this pass to acknowledge
    size_t ack_count;
    size_t ack_max;
    s_ack_slot_t *ack_slots;     //  Their nodes (ack_slot_max, a power of 2)
    size_t ack_slot_max;
    uint32_t *ack_order;         //  Used slots, in the order nodes came
    size_t ack_node_count;
    proto_ack_t *ack_batch;      //  One result_acks or output_acks being
                                 //  written
};

//  reload: SIGHUP's state.
typedef struct {
    broker_config_fn *read;      //  Reads a fresh configuration
    void *arg;                   //  For READ
    int signal_fd;               //  SIGHUP
} s_sighup_t;

#define WATCHERS_MAX 10000       //  Parked requests at most; beyond, answered at once

//  One parked job.watch request.
typedef struct {
    zsock_t *socket;             //  Where its answer goes (client or HTTP)
    zmsg_t *envelope;            //  Its routing frames (owned)
    char *id;                    //  Its request id (owned)
    int version;                 //  Its protocol version (the reply's)
    char job [JOB_ID_LEN + 1];   //  The job it watches ("": every job,
                                 //  job.changes)
    uint64_t after;              //  The version the caller has seen
    int64_t deadline_ms;         //  Answered unchanged at this time (monotonic)
} s_watcher_t;

typedef struct _broker_t broker_t;

struct _broker_t {
    ctx_t ctx;                   //  What handlers see (first: broker_of)
    broker_config_t config;      //  Copied configuration
    zloop_t *loop;               //  The reactor
    zsock_t *client;             //  Client API ROUTER
    zsock_t *agents;             //  Agent ROUTER
    zsock_t *publish;            //  Commands XPUB (subscriptions granted by auth)
    subgate_t *gate;             //  Commands to a node not yet subscribed
    char *bound [3];             //  Where client, agents and publish are
                                 //  bound (their last endpoints), bound
                                 //  again with the new key (brokerkey.h)
    int64_t brokerkey_sent_ms;   //  Monotonic: last announce round
    int64_t brokerkey_checked_ms;  //  Monotonic: last look at the nodes
    zsock_t *http;               //  The HTTP face's bridge (inproc ROUTER), or NULL
    store_lock_t *lock;          //  The data dir's lock (one broker per dir)
    store_txn_t *txn;            //  This pass's write transaction, or NULL
    zlistx_t *outbox;            //  Client replies to send after commit
    broker_io_t *io;             //  Agent socket frames, and the agent and
                                 //  command sends that wait for the commit
    pw_t *body;                  //  Encoding buffer for messages
    broker_stats_t *stats;       //  Counters and figures (ctx.stats too)
    zhashx_t *event_seq;         //  Job id -> next event seq (uint32_t *)
    zhashx_t *replies;           //  Recent client request id -> reply (zchunk_t)
    zlistx_t *reply_order;       //  Request ids in arrival order, for eviction
    zhashx_t *live_jobs;         //  Ids of the pending and running jobs
    zhashx_t *pass_jobs;         //  Ids of jobs this pass changed
    zlistx_t *pass_replies;      //  Request ids this pass added to replies
    zlistx_t *watchers;          //  Parked job.watch requests (s_watcher_t)
    zhashx_t *job_versions;      //  Job id -> how often it changed in this run
    zhashx_t *pass_versions;     //  Job id -> its version before this pass
                                 //  (uint64_t *; 0: it had none)
    uint64_t jobs_version;       //  How often any job changed in this run
                                 //  (output pieces aside): job.changes
    uint64_t jobs_version_pass;  //  ... before this pass
    uint64_t nodes_version_base; //  node.changes' version: this plus the
                                 //  registry's changes (registry_changes)
    zlistx_t *pass_logs;         //  Log lines that wait for this pass's commit
    audit_t *audit;              //  The audit trail's key sequence and the
                                 //  refusals it leaves out
    zlistx_t *pass_audits;       //  Audit entries of this pass (audit_entry_t),
                                 //  logged once it commits
    uint64_t pass_finished [6];  //  finished[] when this pass began
    bool pass_broken;            //  This pass could not begin a transaction
    bool agents_resting;         //  The agent socket is not read (a cooldown)
    int64_t next_sweep_ms;       //  Next retention sweep
    int64_t next_notify_prune_ms;  //  Next prune of sent and dead deliveries
    int64_t next_seen_save_ms;   //  Next save of last-seen times
    s_sighup_t *sighup;     //  SIGHUP reload, or NULL
    int schedule_timer;          //  The one zloop timer of schedules, or 0
    int64_t schedule_due_ms;     //  Monotonic: when it fires
    //  A cluster's active (broker_lead); all NULL/0 for a broker alone
    repl_source_t *repl;         //  Ships each written pass to the standbys
    pw_t *journal;               //  This pass's journal
    uint64_t epoch;              //  This leadership's
    zactor_t *elector;           //  Borrowed from the cluster's runner
    int64_t valid_until;         //  Monotonic: leadership valid until then
    bool demoted;                //  Lost it: nothing more goes out
    bool switchover;             //  Hand the lead over once nothing waits
    zlistx_t *held;              //  s_held_t: what waits for the standbys
    char cluster_name [64];      //  This member's name
    blobserve_t *blobserve;      //  Blob chunks in flight to agents
    int64_t next_blob_sweep_ms;  //  Next purge of unused blobs
    outpace_t *outpace;          //  Acks of live output pieces that wait
                                 //  for results.output_rate
    int outpace_timer;           //  The zloop timer that sends them, or 0
    int64_t lazy_since_ms;       //  A pass of output pieces alone waits
                                 //  for its commit since (0: none waits)
    int lazy_timer;              //  The zloop timer that commits it, or 0
};

//  What a pass sends, held until the sync standbys acknowledged SEQ.
typedef struct {
    uint64_t seq;
    uint8_t *bytes;
    s_send_t *sends;
    size_t send_count;
    zlistx_t *outbox;            //  s_pending_t
} s_held_t;

//  Sends what the standbys acknowledged (held batches up to the release
//  point), then ends a pass for what the sends changed. A leadership past
//  its validity demotes instead.
void broker_release (broker_t *self);

//  True while a cluster's active may act: its leadership is valid now
//  (renewals waiting on the elector's pipe are read first).
bool broker_lead_valid (broker_t *self);

//  Publishes the commands the gate holds whose node subscribed since, or
//  that waited long enough (subgate.h); drops them all once demoted.
void broker_gate_release (broker_t *self);

//  Leadership is lost (WHY): nothing more is acknowledged, published or
//  answered; the loop stops.
void broker_demote (broker_t *self, const char *why);

//  The pass's write transaction, begun on first use; NULL when the
//  store cannot begin one (logged; the pass is marked broken).
store_txn_t *broker_txn (broker_t *self);

//  The next event seq of JOB_ID (cached per job; read from the store the
//  first time).
uint32_t broker_next_event_seq (broker_t *self, const char *job_id);

//  Queues FIRST, then VIA (VIA_SIZE bytes, 0: no such frame), then the
//  body in self->body, to SOCKET until the commit. NODE (agent sends)
//  names the receiver for the logs, or is NULL.
void broker_queue_send (broker_t *self, zsock_t *socket, const void *first,
                        size_t first_size, const void *via, size_t via_size,
                        const char *node, bool needs_commit);

//  The rotation of the broker's key (brokerkey.h), every tick: announces
//  the next key to the nodes that do not have it yet, every
//  BROKERKEY_ANNOUNCE_MS, and retires the old key when every node has the
//  next one or at the deadline, looking every BROKERKEY_CHECK_MS
//  (broker_agents.c).
void broker_keys_tick (broker_t *self);

//  Binds the client, agent and commands endpoints again with the pair
//  CERT (the old key's connections end; their peers connect again with
//  the new key). Returns 0, or -1 when an endpoint could not be bound
//  again (logged: a restart of the broker serves it with the new key).
int broker_rebind (broker_t *self, zcert_t *cert);

//  Queues the body in self->body to a node over the agent ROUTER.
//  NEEDS_COMMIT: it stands for what this pass stores (an ack, a command),
//  so a failed commit drops it.
void broker_send_to_node (broker_t *self, const registry_node_t *node,
                          bool needs_commit);

//  Notes that NODE's result (JOB, STEP, ATTEMPT) is acknowledged once the
//  pass commits: s_acks_queue writes one result_acks per node that said
//  in hello it understands them, one result_ack per result for the rest.
void broker_ack_add (broker_t *self, registry_node_t *node, const char *job,
                     uint32_t step, uint32_t attempt);

//  Notes that NODE's output piece (JOB, STEP, ATTEMPT, STDERR_ or stdout,
//  OFFSET) is acknowledged once the pass commits: s_acks_queue writes one
//  output_acks per node for them (for nodes granted output_acks only).
void broker_output_ack_add (broker_t *self, registry_node_t *node,
                            const char *job, uint32_t step, uint32_t attempt,
                            bool stderr_, uint64_t offset);

//  broker_agents.c: the acks of live output pieces held for
//  results.output_rate (outpace.h) that may go at NOW_MS, queued to go
//  after this pass's commit, each to its node's session of now (none to
//  a node gone offline: it sends the piece again).
void broker_output_paced (broker_t *self, int64_t now_ms);

//  broker_blobs.c: a blob_get of NODE (always 0: refusals are answered);
//  the tick (chunks whose node went silent, the retention sweep); a node
//  gone offline.
int broker_blobs_on_get (broker_t *self, registry_node_t *node,
                         const proto_msg_t *in, int64_t now_ms);
void broker_blobs_tick (broker_t *self, int64_t now_ms);
void broker_blobs_node_gone (broker_t *self, const char *node);

//  Ends a loop pass: drains the scheduler, commits, then sends the
//  outbox; a failed commit is undone (replies become storage errors).
void broker_pass_end (broker_t *self);

//  Frees a parked job.watch request; NULL-safe.
void broker_watcher_destroy (s_watcher_t **self_p);

//  The scheduler acted on JOB_ID: its version moves on, and so does the
//  version of all jobs (job.changes).
void broker_job_changed (broker_t *self, const char *job_id);

//  An output piece of JOB_ID came: its version moves on (job.watch wakes),
//  not the version of all jobs (a job list shows no output).
void broker_job_output_came (broker_t *self, const char *job_id);

//  How often JOB_ID changed in this run (ctx.h's job_version); of "", how
//  often any job did (job.changes).
uint64_t broker_job_version (broker_t *self, const char *job_id);

//  Answers the watchers whose job changed or ended, and those whose time
//  is up. Their replies go out with the pass's, after its commit.
void broker_watch_wake (broker_t *self, int64_t now_ms);

//  Drains the scheduler's actions into the pass: records, events,
//  commands and cancels to send after the commit.
void broker_drain (broker_t *self);

//  One pass over the agent socket: until it is empty, AGENT_PASS_MAX
//  messages or AGENT_PASS_MS, then the commit and the sends. A commit
//  costs a disk flush, so under load a pass takes in what it can: at
//  512 messages per pass the broker committed 66,000 to 78,000 results
//  per second (1,000 agents), at 8,192 about 135,000. The time bound
//  keeps replies and timers from waiting behind a long pass. Returns
//  true when it found the socket empty.
bool broker_agents_pass (broker_t *self);

//  The agent ROUTER's reader (zloop).
int broker_on_agents (zloop_t *loop, zsock_t *socket, void *arg);

//  The protocol version messages to NODE alone are written at: the v of
//  its hello (PROTO_VERSION_MIN before one came to this broker).
static inline int
broker_node_protocol (const registry_node_t *node)
{
    return node && node->hello && node->hello->protocol
           ? node->hello->protocol : PROTO_VERSION_MIN;
}

//  Whether NODE's agent takes a command's traceparent: its hello named
//  the trace feature, and every relay on its path said it speaks
//  protocol 2 (as welcome's features, PROTOCOL.md section 6).
static inline bool
broker_node_traced (const registry_node_t *node)
{
    return node && node->hello
           && (node->via_size == 0 || node->relays_protocol >= 2)
           && proto_hello_has_feature (node->hello, PROTO_FEATURE_TRACE);
}

//  Whether NODE's agent takes the epoch key (the epoch feature): its
//  hello named it, and every relay on its path said it speaks protocol 2
//  (an older relay decodes each welcome, and would refuse the key).
static inline bool
broker_node_fenced (const registry_node_t *node)
{
    return node && node->hello
           && (node->via_size == 0 || node->relays_protocol >= 2)
           && proto_hello_has_feature (node->hello, PROTO_FEATURE_EPOCH);
}

//  The epoch to write on a message to NODE alone: this active's, when
//  NODE takes it; 0 (none) from a broker alone or to an agent without
//  the feature.
static inline uint64_t
broker_node_epoch (const broker_t *self, const registry_node_t *node)
{
    return broker_node_fenced (node) ? self->epoch : 0;
}

//  Queues the reply DATA/SIZE to the client whose envelope is ENVELOPE
//  on SOCKET, sent after the pass commits, at protocol VERSION (the
//  request's: proto_version_for). REQUEST is the message it answers, ID
//  its request id, WROTE whether handling it changed the store.
void broker_reply (broker_t *self, zsock_t *socket, zmsg_t *envelope, const void *data,
                   size_t size, int version, zmsg_t *request, const char *id,
                   bool wrote);

//  Writes ENTRY, committed, as one log line of the audit trail.
void broker_audit_log (const audit_entry_t *entry);

//  Puts ENTRY (taken) in TXN, this pass's transaction: kept with the pass
//  (its log line goes once the pass commits), or freed when it cannot be
//  put (the store error is counted).
void broker_audit_keep (broker_t *self, store_txn_t *txn,
                        audit_entry_t *entry);

//  An entry the broker itself makes, in this pass (role "none"): FACE,
//  WHO, TYPE, OBJECT (or NULL), OUTCOME and MESSAGE, and SUPPRESSED, the
//  refusals left out before it. Nothing when no pass can be written.
void broker_audit_record (broker_t *self, const char *face, const char *who,
                          const char *type, const char *object,
                          const char *outcome, const char *message,
                          int64_t suppressed);

//  One message from the client ROUTER or the HTTP bridge.
void broker_on_face_message (broker_t *self, zsock_t *socket, zmsg_t *msg);

//  The client ROUTER's and the HTTP bridge's reader (zloop).
int broker_on_client (zloop_t *loop, zsock_t *socket, void *arg);

//  Purges finished jobs older than the retention, and dead letters
//  older than theirs, at most LIMIT per call. Returns how many.
size_t broker_sweep (broker_t *self, int64_t wall_ms, size_t limit);

//  A new scheduler wired to the registry (target resolution, the nodes
//  that cannot run a job, the load figures of any-node claims, the
//  idempotent actions) with the configured limits: the one recipe for
//  the start and for the rebuild after a failed commit.
sched_t *broker_sched_new (broker_t *self);

//  Reads nodes, jobs, flags and counters back from the store at start.
//  Returns 0, or -1 with a sentence in ERR.
int broker_restore (broker_t *self, char *err, size_t err_len);

//  Rebuilds the scheduler from the store after a failed commit: every
//  job that was live, or that the failed pass touched, is read back as it
//  stands on disk (a job that is not there is gone; one that is final
//  there stays final) and resumed as after a restart (in-flight steps are
//  re-sent; agents deduplicate them, and re-send results the broker has
//  not acknowledged).
void broker_rebuild (broker_t *self);

//  Sets the one schedules timer for the earliest due time (schedrun.h).
//  Schedules change by request and as their jobs end, so the client
//  socket's passes and the tick call this; the timer moves only when the
//  earliest due time did.
void broker_schedules_arm (broker_t *self);

#endif
