/*  =========================================================================
    broker_agents - the agent socket: hello and its checks, then one row
    per message type (heartbeat, ack, started, progress, result,
    results, output, bye)

    One of the server's rooms: it shares the server's struct through
    broker_int.h, and no handler includes that header.
    =========================================================================
*/
#include "broker.h"
#include "broker_int.h"

//  ---------------------------------------------------------------------
//  Agent socket

//  Encodes an agent error message into self->body at protocol VERSION.
//  Returns 0 or -1.
static int
s_encode_agent_error (broker_t *self, const char *code, const char *message,
                      int version)
{
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = PROTO_ERROR;
    msg.protocol = version;
    msg.code = (char *) code;
    msg.message = (char *) message;
    pw_reset (self->body);
    return proto_msg_encode (&msg, self->body);
}

//  Queues an error to the connection ROUTING, through the via frame of
//  the message being handled (up to the bytes that reach its sender).
static void
s_send_agent_error (broker_t *self, const void *routing, size_t routing_size,
                    const char *code, const char *message)
{
    //  In the version of the message it answers (the nearest spoken)
    const broker_io_t *io = self->io;
    int version = proto_reply_version (zmq_msg_data ((zmq_msg_t *) &io->body),
                                       zmq_msg_size ((zmq_msg_t *) &io->body));
    if (s_encode_agent_error (self, code, message, version) == 0)
        broker_queue_send (self, self->agents, routing, routing_size,
                      zmq_msg_data (&self->io->via), self->io->answer_size,
                      NULL, false);
}

//  Sends the error NOTICE (duplicate_node) to the connection ROUTING at
//  once, past the outbox: a ROUTER with ZMQ_ROUTER_MANDATORY refuses a
//  routing id it no longer knows, so this tells whether the connection is
//  still up. Returns false only when it is gone.
static bool
s_probe_session (broker_t *self, const registry_node_t *node,
                 const char *notice)
{
    if (s_encode_agent_error (self, PROTO_ERR_DUPLICATE_NODE, notice,
                              broker_node_protocol (node)) != 0)
        return true;
    void *handle = zsock_resolve (self->agents);
    if (zmq_send (handle, node->routing_id, node->routing_id_size,
                  ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        //  EAGAIN (its queue is full) cannot tell: count it as up
        return errno != EHOSTUNREACH;
    //  Through relays only the relay's connection can be probed: a node
    //  behind it counts as up while it is heard from
    if (node->via_size)
        zmq_send (handle, node->via, node->via_size,
                  ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_send (handle, pw_data (self->body), pw_size (self->body),
              ZMQ_DONTWAIT);
    return true;
}

//  A hello for NODE, which is online from another connection. Only a live
//  session keeps a node: the newcomer is refused (duplicate_node) while
//  the session it would replace was heard from within the liveness window,
//  comes from another agent process (the hellos' instance ids differ, or
//  one has none), and its connection is still up. The same process on a
//  new connection (a network blip), or an agent restarted after its old
//  process died, gets in. The incumbent hears of the refusal; the broker
//  logs it at most once a minute per node, and node.get counts it.
//  Returns true when HELLO was refused.
static bool
s_duplicate_refused (broker_t *self, registry_node_t *node,
                     const void *routing, size_t routing_size,
                     const proto_msg_t *hello, int64_t now_ms)
{
    if (!node->online || !node->hello || node->routing_id_size == 0)
        return false;
    const void *via = zmq_msg_data (&self->io->via);
    size_t via_size = self->io->answer_size;
    if (node->routing_id_size == routing_size
    &&  memcmp (node->routing_id, routing, routing_size) == 0
    &&  node->via_size == via_size
    &&  memcmp (node->via, via, via_size) == 0)
        return false;
    const char *ours = node->hello->instance;
    if (ours && hello->instance && strcmp (ours, hello->instance) == 0)
        return false;
    int64_t silent_ms = now_ms - node->last_seen_ms;
    if (silent_ms > self->config.heartbeat_ms * self->config.missed_heartbeats)
        return false;
    char theirs [200], incumbent [200];
    snprintf (theirs, sizeof theirs, "host %s%s%s", hello->hostname,
              hello->instance ? ", instance " : "",
              hello->instance ? hello->instance : "");
    snprintf (incumbent, sizeof incumbent, "host %s%s%s",
              node->hello->hostname, ours ? ", instance " : "",
              ours ? ours : "");
    char text [600];
    snprintf (text, sizeof text, "another agent (%s) tried to register as "
              "node %s and was refused: this session stays", theirs,
              node->id);
    if (!s_probe_session (self, node, text))
        return false;
    int64_t wall_ms = broker_wall_ms ();
    int64_t quiet_ms = node->duplicates ? wall_ms - node->duplicate_wall_ms
                                        : INT64_MAX;
    if (quiet_ms > 60000)
        log_node (LOG_LEVEL_INFO, node->id, "node %s: refused a second "
                  "agent (%s): the node is online from %s", node->id, theirs,
                  incumbent);
    //  The node's history gets one entry per episode, not per retry
    store_txn_t *txn = quiet_ms > S_DUPLICATE_EPISODE_MS ? broker_txn (self)
                                                          : NULL;
    if (txn) {
        pw_reset (self->ctx.scratch);
        pw_map (self->ctx.scratch, 9);
        pw_str (self->ctx.scratch, "time_ms");
        pw_int (self->ctx.scratch, wall_ms);
        pw_str (self->ctx.scratch, "event");
        pw_str (self->ctx.scratch, "refused_duplicate");
        pw_str (self->ctx.scratch, "agent_version");
        pw_str (self->ctx.scratch, hello->version);
        pw_str (self->ctx.scratch, "hostname");
        pw_str (self->ctx.scratch, hello->hostname);
        pw_str (self->ctx.scratch, "instance");
        pw_str (self->ctx.scratch, hello->instance ? hello->instance : "");
        pw_str (self->ctx.scratch, "actions");
        pw_int (self->ctx.scratch, 0);
        pw_str (self->ctx.scratch, "added");
        pw_array (self->ctx.scratch, 0);
        pw_str (self->ctx.scratch, "removed");
        pw_array (self->ctx.scratch, 0);
        pw_str (self->ctx.scratch, "versions");
        pw_array (self->ctx.scratch, 0);
        ctx_store_error (nodehist_append (txn, node->id,
                                              pw_data (self->ctx.scratch),
                                              pw_size (self->ctx.scratch)),
                       "a node's history");
    }
    registry_note_duplicate (node, hello->hostname, wall_ms);
    //  The same words for every retry, so that the agent says it once
    snprintf (text, sizeof text, "node %s is online from another agent "
              "(%s): this agent is refused while that session lives; stop "
              "the other agent, or give this one another id (--id)",
              node->id, incumbent);
    s_send_agent_error (self, routing, routing_size,
                        PROTO_ERR_DUPLICATE_NODE, text);
    return true;
}

//  FNV-1a over SIZE bytes at DATA: tells a hello sent again unchanged
//  from one that changed (the sender only ever harms itself by a clash).
static uint64_t
s_hello_digest (const void *data, size_t size)
{
    const uint8_t *bytes = (const uint8_t *) data;
    uint64_t digest = 14695981039346656037ULL;
    for (size_t index = 0; index < size; index++) {
        digest ^= bytes [index];
        digest *= 1099511628211ULL;
    }
    return digest;
}

//  True when NODE's welcome grants rekey: it asked, it came directly, and
//  the broker authenticates keys.
static bool
s_rekey_granted (broker_t *self, const registry_node_t *node)
{
    return !self->config.auth.insecure && node->via_size == 0
           && node->hello
           && proto_hello_has_feature (node->hello, PROTO_FEATURE_REKEY);
}

//  True when NODE's welcome grants broker_rekey: as rekey (the broker's
//  key matters to direct agents only).
static bool
s_broker_rekey_granted (broker_t *self, const registry_node_t *node)
{
    return !self->config.auth.insecure && node->via_size == 0
           && node->hello
           && proto_hello_has_feature (node->hello,
                                       PROTO_FEATURE_BROKER_REKEY);
}

//  An agent's change to its node's keys in the audit trail: face "agent",
//  who the node, TYPE (key.rekey, key.switch), OBJECT the key, OUTCOME
//  "ok" or what stopped it, MESSAGE the sentence. Refusals are recorded
//  once per node every AUDIT_REFUSED_MS at most (the others counted in
//  the next one's suppressed), so that an agent cannot flood the trail.
static void
s_audit_agent (broker_t *self, const char *node, const char *type,
               const char *object, const char *outcome, const char *message)
{
    char who [NAME_MAX_LEN + 8];
    snprintf (who, sizeof who, "node %s", node);
    int64_t suppressed = 0;
    if (audit_outcome_refused (outcome)) {
        char caller [NAME_MAX_LEN + 16];
        snprintf (caller, sizeof caller, "agent %s", who);
        if (!audit_refusal_admit (self->audit, caller, broker_now_ms (),
                                  &suppressed))
            return;
    }
    broker_audit_record (self, "agent", who, type, object, outcome, message,
                         suppressed);
}

//  The broker's own change of its key in the audit trail: face "broker",
//  who "gridbroker", TYPE, OBJECT the key, OUTCOME and MESSAGE.
static void
s_audit_broker (broker_t *self, const char *type, const char *object,
                const char *outcome, const char *message)
{
    broker_audit_record (self, "broker", "gridbroker", type, object, outcome,
                         message, 0);
}

//  Sends NODE the broker's next key, when a rotation runs and NODE does
//  not have it yet.
static void
s_send_broker_key (broker_t *self, registry_node_t *node)
{
    const char *next = brokerkey_next (self->ctx.brokerkey);
    if (!next || brokerkey_has (self->ctx.brokerkey, node->id))
        return;
    proto_msg_t announce;
    memset (&announce, 0, sizeof announce);
    announce.type = PROTO_BROKER_KEY;
    announce.node = node->id;
    announce.key = (char *) next;
    announce.protocol = broker_node_protocol (node);
    pw_reset (self->body);
    if (proto_msg_encode (&announce, self->body) == 0)
        broker_send_to_node (self, node, false);
}

//  Sends NODE its welcome.
static void
s_send_welcome (broker_t *self, registry_node_t *node)
{
    proto_msg_t welcome;
    memset (&welcome, 0, sizeof welcome);
    welcome.type = PROTO_WELCOME;
    welcome.node = node->id;
    welcome.heartbeat_ms = (uint32_t) self->config.heartbeat_ms;
    welcome.max_output = self->config.max_output;
    welcome.protocol = broker_node_protocol (node);
    //  Granted only to an agent whose hello named features (an agent
    //  before them refuses a welcome with an unknown key), and through
    //  relays only when each of them said it speaks protocol 2: a relay
    //  of a release before features decodes each welcome to grant its
    //  agent's topics, and would refuse one with this key
    char *granted [12];           //  One per feature a welcome may grant
    size_t granted_count = 0;
    bool path_grants = node->via_size == 0 || node->relays_protocol >= 2;
    if (path_grants
        && proto_hello_has_feature (node->hello, PROTO_FEATURE_RESULTS))
        granted [granted_count++] = PROTO_FEATURE_RESULTS;
    //  Result data may hold ints: an earlier broker refuses a result
    //  whose data is not all strings, so only when granted
    if (path_grants
        && proto_hello_has_feature (node->hello, PROTO_FEATURE_TYPED_DATA))
        granted [granted_count++] = PROTO_FEATURE_TYPED_DATA;
    //  Its results may echo the traceparent of their command
    if (broker_node_traced (node))
        granted [granted_count++] = PROTO_FEATURE_TRACE;
    //  Output pieces at any offset while a task runs: an earlier broker
    //  keeps pieces only at the offsets of whole outputs
    if (path_grants
        && proto_hello_has_feature (node->hello, PROTO_FEATURE_LIVE_OUTPUT))
        granted [granted_count++] = PROTO_FEATURE_LIVE_OUTPUT;
    //  Facts in a message of their own: an earlier broker knows no such
    //  message
    if (path_grants
        && proto_hello_has_feature (node->hello, PROTO_FEATURE_FACTS))
        granted [granted_count++] = PROTO_FEATURE_FACTS;
    //  What this broker sends it carries its epoch when it is a cluster's
    //  active; granted by a broker alone as well (it writes none), so
    //  that the agent knows it is heard whichever broker serves
    if (broker_node_fenced (node))
        granted [granted_count++] = PROTO_FEATURE_EPOCH;
    welcome.epoch = broker_node_epoch (self, node);
    //  Key rotation: a direct agent of a secure broker only (through
    //  relays, a new key would have to enrol through them)
    if (s_rekey_granted (self, node))
        granted [granted_count++] = PROTO_FEATURE_REKEY;
    //  The broker's next key: to a direct agent of a secure broker only
    bool broker_rekey = s_broker_rekey_granted (self, node);
    if (broker_rekey)
        granted [granted_count++] = PROTO_FEATURE_BROKER_REKEY;
    //  Output pieces acknowledged in one output_acks per pass: a relay
    //  of an earlier release would refuse the new message
    if (path_grants
        && proto_hello_has_feature (node->hello, PROTO_FEATURE_OUTPUT_ACKS))
        granted [granted_count++] = PROTO_FEATURE_OUTPUT_ACKS;
    //  Blob fetches (blob_get, blob_chunk): relays of an earlier release
    //  would refuse the new messages
    if (registry_node_blobs (node))
        granted [granted_count++] = PROTO_FEATURE_BLOBS;
    assert (granted_count <= sizeof granted / sizeof granted [0]);
    if (granted_count) {
        welcome.features = granted;
        welcome.feature_count = granted_count;
    }
    pw_reset (self->body);
    int rc = proto_msg_encode (&welcome, self->body);
    assert (rc == 0);
    broker_send_to_node (self, node, false);
    if (broker_rekey)
        s_send_broker_key (self, node);
}

//  True when HELLO (DIGEST over SIZE bytes) repeats the hello that NODE
//  registered with, on the same session: the node is online, from the
//  same connection and path (so the same key), the same agent process
//  (instance), with the same bytes. An agent that did not hear its
//  welcome in time says hello again; registering it again would cost as
//  much as the first time, and under load the repeats pile up.
static bool
s_hello_repeated (broker_t *self, const registry_node_t *node,
                  const void *routing, size_t routing_size,
                  const proto_msg_t *hello, uint64_t digest, size_t size)
{
    if (!node->online || !node->hello || node->hello_size == 0
    ||  node->hello_size != size || node->hello_digest != digest)
        return false;
    if (!node->hello->instance || !hello->instance
    ||  strcmp (node->hello->instance, hello->instance) != 0)
        return false;
    const void *via = zmq_msg_data (&self->io->via);
    size_t via_size = self->io->answer_size;
    return node->routing_id_size == routing_size
        && memcmp (node->routing_id, routing, routing_size) == 0
        && node->via_size == via_size
        && memcmp (node->via, via, via_size) == 0;
}

//  KNOWN: the hello was decoded without its backends, which are that
//  interned list (s_agent_decode).
static void
s_on_hello (broker_t *self, const void *routing, size_t routing_size,
            const relays_path_t *path, proto_msg_t **msg_p,
            const registry_backend_set_t *known, int64_t now_ms)
{
    proto_msg_t *hello = *msg_p;
    size_t hello_size = zmq_msg_size (&self->io->body);
    uint64_t digest = s_hello_digest (zmq_msg_data (&self->io->body),
                                      hello_size);
    registry_node_t *before = registry_lookup (self->ctx.registry, hello->node);
    if (before && s_hello_repeated (self, before, routing, routing_size,
                                    hello, digest, hello_size)) {
        self->stats->counters.repeated_hellos++;
        registry_touch (before, now_ms, broker_wall_ms ());
        s_send_welcome (self, before);
        return;
    }
    if (before && s_duplicate_refused (self, before, routing, routing_size,
                                       hello, now_ms))
        return;
    bool was_online = before && before->online;
    //  What changed since its last hello, judged before the registry
    //  lets go of that hello
    pw_reset (self->ctx.scratch);
    //  The known list is lent to the hello for the comparison only: the
    //  registry gives it for good
    if (known)
        hello->backends = (proto_backend_spec_t *) registry_backends_list (
            known, &hello->backend_count);
    bool changed = nodehist_diff (before ? before->hello : NULL, hello,
                                  broker_wall_ms (), self->ctx.scratch);
    if (known) {
        hello->backends = NULL;
        hello->backend_count = 0;
    }
    store_txn_t *txn = changed ? broker_txn (self) : NULL;
    if (txn)
        ctx_store_error (nodehist_append (txn, hello->node,
                                              pw_data (self->ctx.scratch),
                                              pw_size (self->ctx.scratch)),
                       "a node's history");
    registry_node_t *node = registry_hello_declaring (self->ctx.registry, msg_p,
                                                      known, routing,
                                                      routing_size, now_ms,
                                                      broker_wall_ms ());
    //  Through relays: the way back, and whose node it now is
    node->via_size = self->io->answer_size;
    memcpy (node->via, zmq_msg_data (&self->io->via), node->via_size);
    node->relays_protocol = path->version;
    relays_on_hello (self->ctx.relays, node, path);
    node->hello_digest = digest;
    node->hello_size = hello_size;
    ctx_save_node (&self->ctx, node);
    log_node (LOG_LEVEL_INFO, node->id,
              "node %s %s (%s, %zu group%s, %zu backend%s)", node->id,
           was_online ? "re-registered" : "registered",
           node->hello->hostname, node->hello->group_count,
           node->hello->group_count == 1 ? "" : "s",
           node->hello->backend_count,
           node->hello->backend_count == 1 ? "" : "s");
    //  A welcome stands for no stored change: it goes out even when the
    //  node's record could not be saved (it is saved again at its next
    //  hello, and the registry serves from memory)
    s_send_welcome (self, node);
}

//  True when IN (started, or a result standing for it) would start a
//  job's first step on its node for the first time: the end of that
//  node's wait (queue.stats). *SUBMITTED_MS gets the job's submit time.
static bool
s_first_start (broker_t *self, const proto_msg_t *in, int64_t *submitted_ms)
{
    if (in->step != 0 || in->attempt != 1)
        return false;
    const sched_job_t *job = sched_job (self->ctx.sched, in->job);
    ssize_t index = job ? sched_job_node_index (job, in->node) : -1;
    if (index < 0 || !job->cells)
        return false;
    sched_cell_status_t status = job->cells [index].status;
    *submitted_ms = job->submitted_ms;
    return status == SCHED_CELL_DISPATCHED
           || status == SCHED_CELL_ACKNOWLEDGED;
}

//  s_first_start for a result IN, with one look-up of its job: also
//  *DISPATCHED_MS, when the attempt IN answers was dispatched (monotonic;
//  0 when unknown), for its dispatch-to-result latency (metrics).
static bool
s_result_start (broker_t *self, const proto_msg_t *in, int64_t *submitted_ms,
                int64_t *dispatched_ms)
{
    *dispatched_ms = 0;
    const sched_job_t *job = sched_job (self->ctx.sched, in->job);
    ssize_t index = job && job->cells && in->step < job->step_count
                        ? sched_job_node_index (job, in->node) : -1;
    if (index < 0)
        return false;
    const sched_cell_t *cell
        = &job->cells [in->step * job->expected_count + (size_t) index];
    if (cell->attempt == in->attempt)
        *dispatched_ms = cell->dispatched_ms;
    *submitted_ms = job->submitted_ms;
    return in->step == 0 && in->attempt == 1
           && (cell->status == SCHED_CELL_DISPATCHED
               || cell->status == SCHED_CELL_ACKNOWLEDGED);
}

//  True when NODE was granted live_output in its welcome.
static bool
s_live_granted (const registry_node_t *node)
{
    return (node->via_size == 0 || node->relays_protocol >= 2)
           && proto_hello_has_feature (node->hello, PROTO_FEATURE_LIVE_OUTPUT);
}

//  Stores a piece of a cell's output (after the session check): only
//  for a cell of the sending node, at an offset where the agent cuts its
//  pieces (a multiple of PROTO_MAX_CHUNK; from a node granted
//  live_output, anywhere no other piece of the stream lies), within
//  max_output, and, while the job runs, for an attempt the cell was
//  given; else counted. So one agent stores at most max_output per stream
//  and attempt it ran. A piece of a running job wakes its watchers.
//  Returns true when it stored a live piece: one of a node granted
//  live_output for the attempt its cell runs now (no result yet), sent
//  for the first time (a piece sent again lost its ack, or its ack was
//  held past the agent's re-send: acked at once, it is not sent a third
//  time).
static bool
s_on_output (broker_t *self, registry_node_t *node, const proto_msg_t *piece)
{
    store_txn_t *txn = broker_txn (self);
    bool stderr_ = strcmp (piece->stream, "stderr") == 0;
    const sched_job_t *job = sched_job (self->ctx.sched, piece->job);
    int index = job && piece->step < job->step_count
                    ? sched_job_node_index (job, piece->node)
                    : -1;
    bool known = job ? index >= 0
                     : txn && jobrec_expects (txn, piece->job, piece->step,
                                              piece->node);
    const char *refused = NULL;
    bool repeat = false;
    if (!known)
        refused = "no such cell";
    else
    if (!s_live_granted (node) && piece->offset % PROTO_MAX_CHUNK != 0)
        refused = "not at a piece boundary";
    else
    if (piece->offset + piece->chunk_len > self->config.max_output)
        refused = "past results.max_output";
    else
    if (s_live_granted (node) && txn
        && !jobrec_output_fits (txn, piece->job, piece->step, piece->node,
                                piece->attempt, stderr_, piece->offset,
                                piece->chunk_len, &repeat))
        refused = "over another piece";
    else
    if (job
        && piece->attempt
               > job->cells [piece->step * job->expected_count
                             + (size_t) index].attempt)
        refused = "an attempt the step was never given";
    if (refused) {
        self->stats->counters.output_refused++;
        if (self->config.verbose)
            log_job (LOG_LEVEL_INFO, piece->job, piece->node,
                     "refused output of %s step %u attempt %u from node %s at "
                   "%" PRIu64 ": %s", piece->job, piece->step, piece->attempt,
                   piece->node, piece->offset, refused);
        return false;
    }
    if (txn)
        ctx_store_error (jobrec_save_output (txn, piece->job, piece->step,
                                                 piece->node, piece->attempt,
                                                 stderr_, piece->offset,
                                                 piece->chunk,
                                                 piece->chunk_len),
                       "an output piece");
    //  A piece sent again (its ack was lost) is stored again, the same
    //  bytes, but is no new output: no event, no wake
    if (job && !repeat) {
        outlog_add (self->ctx.outlog, piece->job, piece->step, piece->node,
                    piece->attempt, stderr_, piece->offset,
                    piece->chunk_len);
        broker_job_output_came (self, piece->job);
    }
    if (!txn || !job || repeat || !s_live_granted (node))
        return false;
    const sched_cell_t *cell
        = &job->cells [piece->step * job->expected_count + (size_t) index];
    return cell->attempt == piece->attempt
           && (cell->status == SCHED_CELL_DISPATCHED
               || cell->status == SCHED_CELL_ACKNOWLEDGED
               || cell->status == SCHED_CELL_RUNNING);
}

//  Decodes an agent message BODY (SIZE bytes) into *MSG_P as
//  proto_msg_decode does. A hello whose "backends" value is, byte for
//  byte, the encoding of a list the registry holds (so one that decoded
//  whole before: nearly every hello of a fleet) is decoded without it,
//  most of its bytes, and *KNOWN_P gets that list; its own list stays
//  empty. Otherwise *KNOWN_P is NULL.
static int
s_agent_decode (broker_t *self, const void *body, size_t size,
                proto_msg_t **msg_p, const registry_backend_set_t **known_p,
                char *why, size_t why_len)
{
    *known_p = NULL;
    //  Nearly every message is read directly: only a hello needs the scan
    if (proto_msg_decode_direct (body, size, msg_p) == 0)
        return 0;
    const uint8_t *bytes = (const uint8_t *) body;
    size_t at = 0, len = 0;
    const registry_backend_set_t *known = NULL;
    if (mpscan_map_find (bytes, size, "type", true, &at, &len) == 0
        && mpscan_str_is (bytes + at, len, "hello")
        && mpscan_map_find (bytes, size, "backends", false, &at, &len) == 0)
        known = registry_backends_find (self->ctx.registry, bytes + at, len);
    if (known) {
        static const uint8_t empty_list = 0x90;
        uint8_t *rest = (uint8_t *) malloc (size);
        assert (rest);
        size_t rest_size = mpscan_replace (bytes, size, at, len, &empty_list,
                                           1, rest, size);
        int rc = rest_size ? proto_msg_decode (rest, rest_size, msg_p, NULL,
                                               0)
                           : -2;
        free (rest);
        if (rc == 0 && (*msg_p)->type == PROTO_HELLO) {
            *known_p = known;
            return 0;
        }
        proto_msg_destroy (msg_p);
        //  Refused: the whole decode gives its verdict and its words
    }
    return proto_msg_decode (body, size, msg_p, why, why_len);
}

//  Takes one RESULT of NODE (a result message, or an entry of a
//  results): the scheduler, or the stored cell of a job that ended; its
//  ack is noted to go out after the pass's commit. Returns the
//  scheduler's verdict (< 0: it matched no live cell).
static int
s_on_result (broker_t *self, registry_node_t *node, const proto_msg_t *in,
             int64_t now_ms)
{
    //  A result the agent made without its output (it restarted while the
    //  attempt ran: interrupted) says the size of what went live
    proto_msg_t sized;
    store_txn_t *live_txn = s_live_granted (node) ? broker_txn (self) : NULL;
    if (live_txn && (!in->output_size || !in->error_size)) {
        uint64_t out = in->output_size ? 0
                       : jobrec_output_arrived (live_txn, in->job, in->step,
                                                in->node, in->attempt, false);
        uint64_t err = in->error_size ? 0
                       : jobrec_output_arrived (live_txn, in->job, in->step,
                                                in->node, in->attempt, true);
        bool more_out = out > (in->output ? strlen (in->output) : 0);
        bool more_err = err > (in->error ? strlen (in->error) : 0);
        if (more_out || more_err) {
            sized = *in;
            if (more_out)
                sized.output_size = out;
            if (more_err)
                sized.error_size = err;
            in = &sized;
        }
    }
    int64_t submitted_ms = 0, sent_ms = 0;
    bool first = s_result_start (self, in, &submitted_ms, &sent_ms);
    int rc = sched_on_result (self->ctx.sched, in, now_ms);
    if (rc < 0 && !sched_job (self->ctx.sched, in->job)) {
        //  A late result for a step the broker ended (the job was
        //  cancelled or its node lost): keep what the step printed
        store_txn_t *txn = broker_txn (self);
        int64_t wall_ms = broker_wall_ms ();
        int frc = txn ? jobrec_fill_cell (txn, in, wall_ms, self->ctx.scratch)
                      : 0;
        if (frc < 0)
            ctx_store_error (frc, "a late result");
        if (frc == 2) {
            //  It told another story than the verdict: said in the events
            char detail [200];
            snprintf (detail, sizeof detail, "late result: %s from %s",
                      in->status, in->node);
            uint32_t seq = broker_next_event_seq (self, in->job);
            ctx_store_error (jobrec_save_event (txn, in->job, seq, wall_ms,
                                                "late", in->node,
                                                (int64_t) in->step, detail,
                                                self->ctx.scratch),
                             "an event");
            broker_job_changed (self, in->job);
        }
        if (frc >= 1)
            rc = 1;
    }
    if (rc == 0) {
        metrics_result (self->stats->metrics, sent_ms ? now_ms - sent_ms : -1);
        int64_t duration_ms = in->duration_ms > INT32_MAX
                                  ? INT32_MAX
                                  : (int64_t) in->duration_ms;
        qstats_add (self->stats->run_samples, now_ms, duration_ms);
        //  A result that stands for its started
        if (first)
            qstats_add (self->stats->wait_samples, now_ms,
                        now_ms - duration_ms - submitted_ms);
    }
    //  Acknowledge even unknown results so the agent's spool drains; the
    //  ack goes out after the commit, and not at all when it fails: the
    //  agent keeps the result and sends it again.
    broker_ack_add (self, node, in->job, in->step, in->attempt);
    return rc;
}

//  Takes the entries of a results of NODE in order, as that many result
//  messages: one session lookup for all (done by the caller), the
//  scheduler's actions drained once after them. An entry that broke a
//  rule of result is dropped and counted (and logged at most once a
//  minute), the others are taken. When the pass's commit can no longer
//  succeed the rest wait: unacknowledged, the agent sends them again.
static void
s_on_results (broker_t *self, registry_node_t *node, const proto_msg_t *in,
              int64_t now_ms)
{
    size_t bad = 0;
    const char *first_bad = NULL;
    metrics_results_batch (self->stats->metrics, in->result_count);
    for (size_t index = 0; index < in->result_count; index++) {
        const proto_msg_t *entry = &in->results [index];
        if (entry->type != PROTO_RESULT) {
            if (!bad++)
                first_bad = entry->message;
            continue;
        }
        if (s_on_result (self, node, entry, now_ms) < 0)
            self->stats->counters.stale++;
        if (self->pass_broken || (self->txn && store_txn_failed (self->txn)))
            break;
    }
    if (bad) {
        self->stats->counters.bad_entries += bad;
        int64_t mono_ms = broker_now_ms ();
        if (!self->stats->bad_entry_logged_ms
            || mono_ms - self->stats->bad_entry_logged_ms >= 60000) {
            self->stats->bad_entry_logged_ms = mono_ms;
            log_node (LOG_LEVEL_WARN, node->id,
                      "node %s sent %zu bad result entr%s in a results of "
                      "%zu (dropped; %" PRIu64 " in all): %s", node->id, bad,
                      bad == 1 ? "y" : "ies", in->result_count,
                      self->stats->counters.bad_entries, first_bad ? first_bad : "");
        }
    }
}


//  ---------------------------------------------------------------------
//  One row per message type an agent sends once it has a session (hello
//  comes first, before any: s_on_hello). Each handler returns 0, or -1
//  when the message matched no live cell (counted stale).

typedef int (s_agent_fn) (broker_t *self, registry_node_t *node,
                          const proto_msg_t *in, int64_t now_ms);

static int
s_on_heartbeat (broker_t *self, registry_node_t *node, const proto_msg_t *in,
                int64_t now_ms)
{
    node->running = in->running;
    node->queued = in->queued;
    return 0;
}

//  Kept in memory by the scheduler; nothing to commit. Those who watch
//  the job (gridcli --wait) see it move.
static int
s_on_progress (broker_t *self, registry_node_t *node, const proto_msg_t *in,
               int64_t now_ms)
{
    int rc = sched_on_progress (self->ctx.sched, in, now_ms);
    if (rc == 0)
        broker_job_changed (self, in->job);
    return rc;
}

static int
s_on_ack (broker_t *self, registry_node_t *node, const proto_msg_t *in,
          int64_t now_ms)
{
    return sched_on_ack (self->ctx.sched, in->job, in->step, in->attempt,
                         in->node, now_ms);
}

static int
s_on_started (broker_t *self, registry_node_t *node, const proto_msg_t *in,
              int64_t now_ms)
{
    int64_t submitted_ms = 0;
    bool first = s_first_start (self, in, &submitted_ms);
    int rc = sched_on_started (self->ctx.sched, in->job, in->step, in->attempt,
                               in->node, now_ms);
    if (rc == 0 && first)
        qstats_add (self->stats->wait_samples, now_ms, now_ms - submitted_ms);
    return rc;
}

static int
s_on_result_row (broker_t *self, registry_node_t *node, const proto_msg_t *in,
                 int64_t now_ms)
{
    return s_on_result (self, node, in, now_ms);
}

static int
s_on_results_row (broker_t *self, registry_node_t *node,
                  const proto_msg_t *in, int64_t now_ms)
{
    s_on_results (self, node, in, now_ms);
    return 0;
}

//  Queues the ack of NODE's output piece (JOB, STEP, ATTEMPT, STDERR_ or
//  stdout, OFFSET) to go after this pass's commit: in the node's
//  output_acks of the pass when it was granted them, else on its own.
static void
s_output_ack (broker_t *self, registry_node_t *node, const char *job,
              uint32_t step, uint32_t attempt, bool stderr_, uint64_t offset)
{
    //  Granted output_acks: one message per agent and pass for all
    if ((node->via_size == 0 || node->relays_protocol >= 2)
        && proto_hello_has_feature (node->hello, PROTO_FEATURE_OUTPUT_ACKS)) {
        broker_output_ack_add (self, node, job, step, attempt, stderr_,
                               offset);
        return;
    }
    proto_msg_t ack;
    memset (&ack, 0, sizeof ack);
    ack.type = PROTO_OUTPUT_ACK;
    ack.job = (char *) job;
    ack.step = step;
    ack.attempt = attempt;
    ack.stream = (char *) (stderr_ ? "stderr" : "stdout");
    ack.offset = offset;
    ack.epoch = broker_node_epoch (self, node);
    ack.protocol = broker_node_protocol (node);
    pw_reset (self->body);
    int rc = proto_msg_encode (&ack, self->body);
    assert (rc == 0);
    broker_send_to_node (self, node, true);
}

//  Acknowledged once committed (not when the commit fails: the agent
//  sends it again), or refused for good: either way the agent may drop
//  it from its spool. The ack of a live piece waits its turn when the
//  fleet sends more than results.output_rate of them a second
//  (outpace.h): the agent's next piece waits for it and carries more.
static int
s_on_output_row (broker_t *self, registry_node_t *node, const proto_msg_t *in,
                 int64_t now_ms)
{
    bool stderr_ = strcmp (in->stream, "stderr") == 0;
    if (s_on_output (self, node, in)
        && !outpace_take (self->outpace, self->config.output_rate, now_ms)) {
        outpace_ack_t held = {
            .step = in->step, .attempt = in->attempt, .stderr_ = stderr_,
            .offset = in->offset, .held_ms = now_ms
        };
        snprintf (held.node, sizeof held.node, "%s", node->id);
        snprintf (held.job, sizeof held.job, "%s", in->job);
        if (outpace_hold (self->outpace, &held)) {
            self->stats->counters.output_paced++;
            return 0;
        }
    }
    s_output_ack (self, node, in->job, in->step, in->attempt, stderr_,
                  in->offset);
    return 0;
}

void
broker_output_paced (broker_t *self, int64_t now_ms)
{
    outpace_ack_t ack;
    while (outpace_next (self->outpace, self->config.output_rate, now_ms,
                         &ack)) {
        registry_node_t *node = registry_lookup (self->ctx.registry,
                                                 ack.node);
        if (node && node->online && node->routing_id_size)
            s_output_ack (self, node, ack.job, ack.step, ack.attempt,
                          ack.stderr_, ack.offset);
    }
}

//  rekey: the node names its next key (auth_rekey), over the session of its
//  accepted key (auth_agent_check saw to that); the answer is a rekey_ack.
static int
s_on_rekey (broker_t *self, registry_node_t *node, const proto_msg_t *in,
            int64_t now_ms)
{
    if (!s_rekey_granted (self, node)) {
        s_send_agent_error (self, node->routing_id, node->routing_id_size,
                            PROTO_ERR_BAD_REQUEST, "rekey was not granted in "
                            "this session's welcome");
        return 0;
    }
    const char *sender = zmq_msg_gets (&self->io->body, "User-Id");
    char why [512];
    bool fresh = false;
    auth_rekey_t verdict = auth_rekey (self->ctx.auth, broker_txn (self),
                                       sender, node->id, in->key,
                                       broker_wall_ms (), &fresh, why,
                                       sizeof why);
    static const char *const names [] = {"accepted", "pending", "refused"};
    //  Once per next key (the agent asks again until it is accepted), and
    //  every refusal (the agent stops asking after one)
    if (fresh || verdict == AUTH_REKEY_REFUSED)
        s_audit_agent (self, node->id, "key.rekey", in->key,
                       verdict == AUTH_REKEY_REFUSED ? PROTO_ERR_FORBIDDEN
                       : verdict == AUTH_REKEY_PENDING ? "pending" : "ok",
                       why);
    proto_msg_t ack;
    memset (&ack, 0, sizeof ack);
    ack.type = PROTO_REKEY_ACK;
    ack.node = node->id;
    ack.key = in->key;
    ack.status = (char *) names [verdict];
    ack.message = why;
    ack.protocol = broker_node_protocol (node);
    pw_reset (self->body);
    if (proto_msg_encode (&ack, self->body) == 0)
        broker_send_to_node (self, node, false);
    return 0;
}

//  broker_key_ack: the node keeps the broker's next key. Another key (an
//  ack of an earlier rotation, or forged) is dropped and counted.
static int
s_on_broker_key_ack (broker_t *self, registry_node_t *node,
                     const proto_msg_t *in, int64_t now_ms)
{
    if (!s_broker_rekey_granted (self, node)) {
        s_send_agent_error (self, node->routing_id, node->routing_id_size,
                            PROTO_ERR_BAD_REQUEST, "broker_rekey was not "
                            "granted in this session's welcome");
        return 0;
    }
    if (!brokerkey_ack (self->ctx.brokerkey, node->id, in->key)) {
        self->stats->counters.malformed++;
        log_node (LOG_LEVEL_WARN, node->id, "node %s acknowledged a broker "
                  "key that is not the next one (%s): dropped", node->id,
                  in->key);
        return 0;
    }
    log_node (LOG_LEVEL_INFO, node->id, "node %s has the broker's next key",
              node->id);
    return 0;
}

void
broker_keys_tick (broker_t *self)
{
    brokerkey_t *keys = self->ctx.brokerkey;
    const char *next = brokerkey_next (keys);
    if (!next)
        return;
    //  Once a second: the walk over the nodes costs one pass of the
    //  registry
    int64_t now_ms = broker_now_ms ();
    if (now_ms - self->brokerkey_checked_ms < BROKERKEY_CHECK_MS)
        return;
    self->brokerkey_checked_ms = now_ms;
    bool announce = now_ms - self->brokerkey_sent_ms >= BROKERKEY_ANNOUNCE_MS;
    if (announce)
        self->brokerkey_sent_ms = now_ms;
    //  Retired early when every node has the key: one that connects
    //  directly acknowledged it, one behind relays through a relay
    //  connected here that acknowledged it (the relays below and the
    //  agents trust their relay's key)
    registry_node_t **nodes = NULL;
    size_t count = registry_list (self->ctx.registry, &nodes);
    bool everyone = true;
    size_t acked = 0;
    for (size_t index = 0; index < count; index++) {
        registry_node_t *node = nodes [index];
        if (node->via_size
                ? !brokerkey_relay_has (keys, relays_connect_id (
                                                  self->ctx.relays, node->id))
                : !brokerkey_has (keys, node->id))
            everyone = false;
        else
            acked++;
        if (announce && node->online && s_broker_rekey_granted (self, node))
            s_send_broker_key (self, node);
    }
    free (nodes);
    int64_t wall_ms = broker_wall_ms ();
    bool due = wall_ms >= brokerkey_deadline_ms (keys);
    uint64_t recorded = brokerkey_recorded (keys);
    if (!due && !everyone && !recorded)
        return;
    //  A cluster's active records the retirement first, and switches only
    //  once its standbys hold it (AFTER_SYNC, as any answer): a member
    //  elected in between serves the new key, which every agent that
    //  acknowledged it tries (brokerkey.h)
    if (self->config.cluster.enabled && self->repl) {
        if (!recorded) {
            if (brokerkey_record (keys, broker_txn (self), true) != 0) {
                log_error ("cannot record the retirement of the broker's "
                           "old key in the store (the rotation goes on)");
                return;
            }
            brokerkey_set_recorded (keys, repl_source_next_seq (self->repl));
            broker_pass_end (self);
            return;
        }
        if (repl_source_released (self->repl) < recorded)
            return;
    }
    char old [KEYS_TEXT_SIZE];
    snprintf (old, sizeof old, "%s", zcert_public_txt (
                                         auth_cert (self->ctx.auth)));
    char why [1024] = "";
    zcert_t *cert = brokerkey_commit (keys, why, sizeof why);
    if (!cert) {
        log_error ("cannot retire the broker's old key: %s (the rotation "
                   "goes on)", why);
        return;
    }
    //  What waits for the old connections goes first
    broker_pass_end (self);
    snprintf (why, sizeof why, "the old key %s retired %s; %zu of %zu "
              "node%s had the new key", old, due ? "at the deadline"
              : "as every node has the new key", acked, count,
              count == 1 ? "" : "s");
    int rc = broker_rebind (self, cert);
    //  The broker heard nobody while it bound its endpoints again (the
    //  old listeners are waited for): no node is blamed for its silence
    int64_t rebound_ms = broker_now_ms ();
    count = registry_list (self->ctx.registry, &nodes);
    for (size_t index = 0; index < count; index++)
        if (nodes [index]->online) {
            registry_touch (nodes [index], rebound_ms, broker_wall_ms ());
            sched_on_heartbeat (self->ctx.sched, nodes [index]->id,
                                rebound_ms);
        }
    free (nodes);
    log_warn ("the broker's key is now %s: %s", zcert_public_txt (cert), why);
    s_audit_broker (self, "key.retire", zcert_public_txt (cert),
                    rc == 0 ? "ok" : PROTO_ERR_INTERNAL, why);
    auth_replace_cert (self->ctx.auth, &cert);
    if (rc != 0)
        log_error ("an endpoint is not served any more: restart gridbroker "
                   "(it reads the new key)");
}

//  A graceful stop hands its work back first: nothing to wait for.
static int
s_on_bye (broker_t *self, registry_node_t *node, const proto_msg_t *in,
          int64_t now_ms)
{
    log_node (LOG_LEVEL_INFO, node->id, "node %s said bye (%s)", node->id,
              in->reason ? in->reason : "");
    //  A node stopped on purpose is most often restarted (an upgrade, a
    //  config change): like one that missed its heartbeats, its any-node
    //  steps go elsewhere at once and its other work waits offline_grace
    //  for it to come back before it reads lost
    registry_set_offline (node, now_ms);
    ctx_save_node (&self->ctx, node);
    sched_on_node_down (self->ctx.sched, node->id, now_ms);
    return 0;
}

//  All of a node's facts, sent when they changed: kept in the registry
//  (and its index of fact targets) and in the store. Facts that break a
//  rule (a name twice) are refused whole, logged and counted.
static int
s_on_facts (broker_t *self, registry_node_t *node, const proto_msg_t *in,
            int64_t now_ms)
{
    int rc = registry_set_facts (self->ctx.registry, node, in->facts,
                                 in->fact_count);
    if (rc < 0) {
        self->stats->counters.malformed++;
        log_node (LOG_LEVEL_WARN, node->id, "node %s: facts refused: a "
                  "name comes twice", node->id);
        return 0;
    }
    if (rc == 0)
        return 0;
    log_node (LOG_LEVEL_DEBUG, node->id, "node %s: %zu fact%s", node->id,
              node->fact_count, node->fact_count == 1 ? "" : "s");
    store_txn_t *txn = broker_txn (self);
    if (txn)
        ctx_store_error (nodefacts_save (txn, node, self->ctx.scratch),
                         "a node's facts");
    return 0;
}

typedef struct {
    proto_type_t type;           //  What the agent sent
    s_agent_fn *handler;         //  Serves it
} s_agent_row_t;

static const s_agent_row_t s_agent_rows [] = {
    {PROTO_HEARTBEAT, s_on_heartbeat},
    {PROTO_ACK, s_on_ack},
    {PROTO_STARTED, s_on_started},
    {PROTO_PROGRESS, s_on_progress},
    {PROTO_RESULT, s_on_result_row},
    {PROTO_RESULTS, s_on_results_row},
    {PROTO_OUTPUT, s_on_output_row},
    {PROTO_BYE, s_on_bye},
    {PROTO_FACTS, s_on_facts},
    {PROTO_REKEY, s_on_rekey},
    {PROTO_BLOB_GET, broker_blobs_on_get},
    {PROTO_BROKER_KEY_ACK, s_on_broker_key_ack},
};

#define S_AGENT_ROWS (sizeof s_agent_rows / sizeof s_agent_rows [0])

static const s_agent_row_t *
s_agent_row (proto_type_t type)
{
    for (size_t index = 0; index < S_AGENT_ROWS; index++)
        if (s_agent_rows [index].type == type)
            return &s_agent_rows [index];
    return NULL;
}

//  What agents send, for the error to one that sent something else:
//  "agents send hello, heartbeat, ..., or bye", from the rows.
static const char *
s_agent_types (void)
{
    static char text [256];
    if (*text)
        return text;
    size_t used = (size_t) snprintf (text, sizeof text, "agents send %s",
                                     proto_type_name (PROTO_HELLO));
    for (size_t index = 0; index < S_AGENT_ROWS && used < sizeof text;
         index++)
        used += (size_t) snprintf (text + used, sizeof text - used, "%s%s",
                                   index + 1 < S_AGENT_ROWS ? ", " : " or ",
                                   proto_type_name (s_agent_rows [index].type));
    return text;
}

//  The text of the msgpack string value of KEY in the map BODY (SIZE
//  bytes) into BUF, or NULL when there is none that is valid text.
static const char *
s_peek_str (const uint8_t *body, size_t size, const char *key, char *buf,
            size_t buf_len)
{
    size_t at = 0, len = 0;
    pv_doc_t *doc = NULL;
    const char *found = NULL;
    if (mpscan_map_find (body, size, key, false, &at, &len) == 0
        && pv_doc_decode (body + at, len, &doc, NULL, 0) == 0) {
        size_t text_len = 0;
        const char *text = pv_str (pv_doc_root (doc), &text_len);
        if (text && text_len < buf_len) {
            memcpy (buf, text, text_len);
            buf [text_len] = 0;
            found = buf;
        }
    }
    pv_doc_destroy (&doc);
    return found;
}

//  Who sent the agent message in self->io that is being dropped, for the
//  log: the node its body names when it is a map with a valid "node"
//  (the rest of the map unchecked), else the node the connection's key is bound to (or claims),
//  else NULL. Writes into BUF.
static const char *
s_dropped_sender (broker_t *self, char *buf, size_t buf_len)
{
    broker_io_t *io = self->io;
    //  Only the node's value is decoded (and so checked): the rest of
    //  the message may be what is wrong with it
    const char *found = s_peek_str (zmq_msg_data (&io->body),
                                    zmq_msg_size (&io->body), "node", buf,
                                    buf_len);
    if (found && !name_valid (found))
        found = NULL;
    if (!found && !self->config.auth.insecure
        && zmq_msg_size (&io->body) > 0) {
        const char *key = zmq_msg_gets (&io->body, "User-Id");
        const auth_key_t *record = key ? auth_key (self->ctx.auth, key) : NULL;
        if (record && record->node
            && snprintf (buf, buf_len, "%s", record->node) < (int) buf_len)
            found = buf;
    }
    return found;
}

//  A hello in self->io refused for its protocol version (WHY; RELAYED:
//  for a relay's on its path, not the broker's): a node the
//  broker knows, offline, whose bound key sent it (any sender when
//  insecure), reads incompatible until a hello is welcomed; said at warn
//  level once per reason. Unknown nodes are only logged (s_log_dropped),
//  so that no one can fill the registry with names.
static void
s_note_incompatible (broker_t *self, const char *why, bool relayed)
{
    broker_io_t *io = self->io;
    const uint8_t *body = zmq_msg_data (&io->body);
    size_t size = zmq_msg_size (&io->body);
    char type [16], id [NAME_MAX_LEN + 1], release [64];
    if (!s_peek_str (body, size, "type", type, sizeof type)
        || strcmp (type, "hello") != 0
        || !s_peek_str (body, size, "node", id, sizeof id) || !name_valid (id))
        return;
    registry_node_t *node = registry_lookup (self->ctx.registry, id);
    if (!node || node->online)
        return;
    if (!self->config.auth.insecure) {
        const char *key = zmq_msg_gets (&io->body, "User-Id");
        const auth_key_t *record = key ? auth_key (self->ctx.auth, key) : NULL;
        if (!record || record->status != AUTH_KEY_ACCEPTED || !record->node
            || strcmp (record->node, id) != 0)
            return;
    }
    const char *version = s_peek_str (body, size, "version", release,
                                      sizeof release);
    char text [400];
    snprintf (text, sizeof text, "its agent%s%s was refused: %s; this broker "
              "is release %s (protocol %d to %d): %s",
              version ? " of release " : "", version ? version : "", why,
              GRID_VERSION, PROTO_VERSION_MIN, PROTO_VERSION,
              relayed ? "upgrade the relay"
              : proto_reply_version (body, size) == PROTO_VERSION
                  ? "upgrade gridbroker, or run the agent's previous release"
                  : "upgrade gridagent");
    if (registry_note_incompatible (node, text))
        log_node (LOG_LEVEL_WARN, id, "node %s is incompatible: %s", id,
                  text);
}

//  Says at warn level that the broker dropped an agent's message, WHY,
//  and which node sent it, at most once a minute (the line counts those
//  dropped since the last one); with --verbose every one at debug.
static void
s_log_dropped (broker_t *self, const char *why)
{
    broker_stats_t *stats = self->stats;
    int64_t mono_ms = broker_now_ms ();
    bool due = !stats->dropped_logged_ms
               || mono_ms - stats->dropped_logged_ms >= 60000;
    if (!due && !self->config.verbose) {
        stats->dropped_unlogged++;
        return;
    }
    char node [NAME_MAX_LEN + 1];
    const char *sender = s_dropped_sender (self, node, sizeof node);
    if (!due) {
        stats->dropped_unlogged++;
        log_node (LOG_LEVEL_DEBUG, sender,
                  "dropped a message from %s%s: %s",
                  sender ? "node " : "an unknown agent",
                  sender ? sender : "", why);
        return;
    }
    char earlier [96] = "";
    if (stats->dropped_unlogged)
        snprintf (earlier, sizeof earlier,
                  " (and %" PRIu64 " more since the last such line)",
                  stats->dropped_unlogged);
    stats->dropped_logged_ms = mono_ms;
    stats->dropped_unlogged = 0;
    log_node (LOG_LEVEL_WARN, sender,
              "dropped a message from %s%s: %s%s; at most one such line a "
              "minute, all counted as malformed in status",
              sender ? "node " : "an unknown agent", sender ? sender : "",
              why, earlier);
}

//  Answers a relay's own heartbeat BEAT that asks for `results` (and
//  `result_acks`) with a welcome that grants them, when the relay is
//  connected to this broker itself (VIA_SIZE: one key, its own): it may
//  then send its agents' results several pairs of via and body to a
//  message, and (result_acks) what goes to its agents in a row comes to
//  it so too (PROTOCOL.md 4.3). A relay below another is not granted:
//  the one above it would not pass a batch. The welcome is sent at every
//  such heartbeat, so that a relay that reconnected learns it again.
//  A relay that asks for broker_rekey too (secure brokers only) is
//  granted it, and told the broker's next key while a rotation runs and
//  it has not acknowledged it (PROTOCOL.md 4.3).
static void
s_welcome_relay (broker_t *self, const void *routing, size_t routing_size,
                 const proto_msg_t *beat, size_t via_size)
{
    if (via_size != KEYS_Z85_LEN
        || !proto_msg_has_feature (beat, PROTO_FEATURE_RESULTS))
        return;
    char *granted [3] = {PROTO_FEATURE_RESULTS, PROTO_FEATURE_RESULT_ACKS};
    size_t granted_count = 1;
    bool acks = proto_msg_has_feature (beat, PROTO_FEATURE_RESULT_ACKS)
                && routing_size <= 255;
    if (acks)
        granted_count = 2;
    const char *relay_key = self->config.auth.insecure
                                ? NULL
                                : zmq_msg_gets (&self->io->body, "User-Id");
    bool rekey = relay_key
                 && proto_msg_has_feature (beat, PROTO_FEATURE_BROKER_REKEY);
    if (rekey)
        granted [granted_count++] = PROTO_FEATURE_BROKER_REKEY;
    if (acks) {
        char key [2 * 255 + 1];
        for (size_t at = 0; at < routing_size; at++)
            snprintf (key + 2 * at, 3, "%02x",
                      ((const uint8_t *) routing) [at]);
        key [2 * routing_size] = 0;
        zhashx_update (self->io->batch_relays, key, (void *) 1);
    }
    proto_msg_t welcome = {
        .type = PROTO_WELCOME,
        .node = beat->node,
        .protocol = beat->protocol,
        .heartbeat_ms = (uint32_t) self->config.heartbeat_ms,
        .features = granted,
        .feature_count = granted_count,
    };
    pw_reset (self->body);
    if (proto_msg_encode (&welcome, self->body) == 0)
        broker_queue_send (self, self->agents, routing, routing_size,
                           zmq_msg_data (&self->io->via),
                           self->io->answer_size, NULL, false);
    const char *next = brokerkey_next (self->ctx.brokerkey);
    if (!rekey || !next
        || brokerkey_relay_has (self->ctx.brokerkey, relay_key))
        return;
    proto_msg_t announce = {
        .type = PROTO_BROKER_KEY,
        .node = beat->node,
        .key = (char *) next,
        .protocol = beat->protocol,
    };
    pw_reset (self->body);
    if (proto_msg_encode (&announce, self->body) == 0)
        broker_queue_send (self, self->agents, routing, routing_size,
                           zmq_msg_data (&self->io->via),
                           self->io->answer_size, NULL, false);
}

//  A relay connected to the broker (VIA_SIZE: its own key only) answered
//  broker_key_ack ACK: it has the next key, and so every node that comes
//  through it. Another key is dropped and counted.
static void
s_on_relay_broker_key_ack (broker_t *self, const proto_msg_t *ack,
                           size_t via_size)
{
    const char *relay_key = self->config.auth.insecure
                                ? NULL
                                : zmq_msg_gets (&self->io->body, "User-Id");
    if (via_size != KEYS_Z85_LEN || !relay_key
        || !brokerkey_relay_ack (self->ctx.brokerkey, relay_key, ack->key)) {
        self->stats->counters.malformed++;
        return;
    }
    log_info ("relay %s has the broker's next key", ack->node ? ack->node
                                                              : relay_key);
}

//  Handles the message in self->io's frames (a routing id and a body).
//  Returns how many messages' work it was: the entries of a results, else
//  1.
static int
s_on_agent_message (broker_t *self, int64_t now_ms)
{
    broker_io_t *io = self->io;
    const void *routing = zmq_msg_data (&io->routing);
    size_t routing_size = zmq_msg_size (&io->routing);
    const void *body = zmq_msg_data (&io->body);
    size_t body_size = zmq_msg_size (&io->body);
    proto_msg_t *in = NULL;
    char why [256];
    io->only_output = false;
    //  Errors go back the way the message came (a relay's via frame)
    size_t via_size = zmq_msg_size (&io->via);
    io->answer_size = via_size % KEYS_Z85_LEN == 0 ? via_size : 0;
    const registry_backend_set_t *known = NULL;
    if (s_agent_decode (self, body, body_size, &in, &known, why, sizeof why)
        != 0) {
        self->stats->counters.malformed++;
        s_log_dropped (self, why);
        const char *code = strstr (why, "version") ? PROTO_ERR_VERSION
                                                   : PROTO_ERR_MALFORMED;
        if (strncmp (why, "unsupported version", 19) == 0)
            s_note_incompatible (self, why, false);
        s_send_agent_error (self, routing, routing_size, code, why);
        return 1;
    }
    metrics_agent_message (self->stats->metrics, in->type);
    io->only_output = in->type == PROTO_OUTPUT
                      || in->type == PROTO_HEARTBEAT;
    //  Who sent it: the key of the connection, never the body (auth.h).
    //  The ROUTER's routing id frame carries no metadata; the body does.
    const char *refusal_code = NULL;
    char refusal [512];
    //  Through relays, the key is the one they attest (relays.h)
    relays_path_t path;
    int checked = 0;
    //  A direct agent's message needs no path, unless relays are enrolled
    //  in the config (whose keys must not speak as agents)
    bool direct = via_size == 0 && self->config.relays.count == 0;
    if (direct)
        memset (&path, 0, sizeof path);
    else {
        const char *conn_key = self->config.auth.insecure
                                   ? NULL
                                   : zmq_msg_gets (&io->body, "User-Id");
        checked = relays_attest (self->ctx.relays, self->ctx.auth, routing,
                                 routing_size, conn_key,
                                 zmq_msg_data (&io->via), via_size, &path,
                                 &refusal_code, refusal, sizeof refusal);
    }
    //  The checks change key records (first seen, last seen) but write
    //  nothing: their changes are saved here, refused or not
    const auth_key_t *changed = NULL;
    if (checked == 0) {
        io->answer_size = path.answer_size;
        if (path.self)
            checked = relays_on_own (self->ctx.relays, self->ctx.auth,
                                     self->ctx.registry, &path, in, now_ms,
                                     broker_wall_ms (), &changed,
                                     &refusal_code, refusal, sizeof refusal);
        else
        if (via_size)
            checked = auth_agent_check_relayed (self->ctx.auth, path.key,
                                                path.pool, in,
                                                broker_wall_ms (), &changed,
                                                &refusal_code, refusal,
                                                sizeof refusal);
        else
            checked = auth_agent_check (self->ctx.auth, &io->body, in,
                                        broker_wall_ms (), &changed,
                                        &refusal_code, refusal,
                                        sizeof refusal);
    }
    if (changed)
        auth_key_save (self->ctx.auth, broker_txn (self), changed);
    //  A next key's hello switched its node to it: the old key is retired
    const auth_key_t *retired = auth_take_retired (self->ctx.auth);
    if (retired && changed) {
        auth_key_save (self->ctx.auth, broker_txn (self), retired);
        char text [200];
        snprintf (text, sizeof text, "the node switched from key %s, now "
                  "retired", retired->key);
        s_audit_agent (self, changed->node, "key.switch", changed->key, "ok",
                       text);
    }
    if (checked == 0 && path.self && in->type == PROTO_HEARTBEAT)
        s_welcome_relay (self, routing, routing_size, in, via_size);
    if (checked == 0 && path.self && in->type == PROTO_BROKER_KEY_ACK)
        s_on_relay_broker_key_ack (self, in, via_size);
    if (checked != 0 || path.self) {
        if (checked != 0 && refusal_code)
            s_send_agent_error (self, routing, routing_size, refusal_code,
                                refusal);
        proto_msg_destroy (&in);
        return 1;
    }
    if (in->type == PROTO_HELLO && path.version
        && in->protocol > path.version) {
        //  A relay decodes each hello and welcome to grant its agents'
        //  topics: one that speaks an older protocol cannot
        self->stats->counters.malformed++;
        char refused [400];
        snprintf (refused, sizeof refused, "unsupported version %d through "
                  "relay %s, which speaks %d: upgrade gridrelay %s first "
                  "(relays before their agents), or run the agent's "
                  "previous release", in->protocol, path.oldest,
                  path.version, path.oldest);
        s_note_incompatible (self, refused, true);
        s_log_dropped (self, refused);
        s_send_agent_error (self, routing, routing_size, PROTO_ERR_VERSION,
                            refused);
        proto_msg_destroy (&in);
        return 1;
    }
    if (in->type == PROTO_HELLO) {
        s_on_hello (self, routing, routing_size, &path, &in, known, now_ms);
        proto_msg_destroy (&in);
        return 1;
    }
    const s_agent_row_t *row = s_agent_row (in->type);
    if (!row) {
        self->stats->counters.malformed++;
        char why_type [96];
        snprintf (why_type, sizeof why_type, "a %s is not an agent's message",
                  proto_type_name (in->type));
        s_log_dropped (self, why_type);
        s_send_agent_error (self, routing, routing_size, PROTO_ERR_BAD_REQUEST,
                            s_agent_types ());
        proto_msg_destroy (&in);
        return 1;
    }
    registry_node_t *node = registry_session (self->ctx.registry, in->node,
                                              routing, routing_size);
    //  Through relays the path is part of the session
    if (node
        && (node->via_size != io->answer_size
            || memcmp (node->via, zmq_msg_data (&io->via), node->via_size)
                   != 0))
        node = NULL;
    if (!node) {
        //  Unknown session (broker restarted, or node marked offline):
        //  the agent says hello again, then re-sends what is unacked.
        self->stats->counters.unknown_node++;
        if (in->type != PROTO_BYE)
            s_send_agent_error (self, routing, routing_size, "unknown_node",
                                "this broker does not know this session: "
                                "send hello");
        proto_msg_destroy (&in);
        return 1;
    }
    registry_touch (node, now_ms, broker_wall_ms ());
    //  Any word renews the node's leases (a heartbeat also brings its load)
    if (in->type != PROTO_BYE)
        sched_on_heartbeat (self->ctx.sched, node->id, now_ms);
    int rc = row->handler (self, node, in, now_ms);
    if (rc < 0)
        self->stats->counters.stale++;
    int weight = in->type == PROTO_RESULTS ? (int) in->result_count : 1;
    proto_msg_destroy (&in);
    return weight;
}

//  Receives the next message of the agent socket into self->io's frames.
//  Returns 1 for a routing id and a body, 0 for a message of any other
//  shape (read whole, counted malformed), -1 when nothing was read: with
//  errno EAGAIN when the socket is empty. A relay's batch (a via frame
//  and a body, then more such pairs: PROTOCOL.md 4.3) is read one pair a
//  call, each with the batch's routing id (io->batch_more says that
//  another pair follows).
static int
s_agent_recv (broker_t *self, void *handle)
{
    broker_io_t *io = self->io;
    io->answer_size = 0;
    bool framed = true;
    if (!io->batch_more) {
        if (zmq_msg_recv (&io->routing, handle, ZMQ_DONTWAIT) < 0)
            return -1;
        //  A ROUTER always prepends the routing id, so a lone frame
        //  cannot come from a peer; it is malformed all the same.
        framed = zmq_msg_more (&io->routing)
                 && zmq_msg_recv (&io->body, handle, ZMQ_DONTWAIT) >= 0;
        if (framed && !zmq_msg_more (&io->body))
            return 1;
    }
    else
    if (zmq_msg_recv (&io->body, handle, ZMQ_DONTWAIT) < 0) {
        io->batch_more = false;
        return -1;
    }
    io->batch_more = false;
    //  A relay's message: the via frame, then the body (relays.h). A
    //  via frame is 1 to RELAYS_MAX_PATH keys; anything else in front of
    //  the body (an empty delimiter, as a REQ sends) is malformed.
    if (framed && zmq_msg_more (&io->body)) {
        zmq_msg_move (&io->via, &io->body);
        framed = zmq_msg_recv (&io->body, handle, ZMQ_DONTWAIT) >= 0;
        size_t via_size = zmq_msg_size (&io->via);
        if (framed && via_size > 0 && via_size % KEYS_Z85_LEN == 0
            && via_size <= RELAYS_VIA_MAX) {
            io->batch_more = zmq_msg_more (&io->body);
            return 1;
        }
    }
    //  Parts of one message arrive together: read the rest of it.
    zmq_msg_t *part = framed ? &io->body : &io->routing;
    while (zmq_msg_more (part)
           && zmq_msg_recv (&io->body, handle, ZMQ_DONTWAIT) >= 0)
        part = &io->body;
    self->stats->counters.malformed++;
    return 0;
}

//  Lets go of the frames of the last message, so libzmq may reuse the
//  buffers they point into.
static void
s_agent_release (broker_io_t *io)
{
    //  The next pair of a batch is answered through the same connection
    if (!io->batch_more) {
        zmq_msg_close (&io->routing);
        zmq_msg_init (&io->routing);
    }
    zmq_msg_close (&io->via);
    zmq_msg_close (&io->body);
    zmq_msg_init (&io->via);
    zmq_msg_init (&io->body);
}

static int
s_lazy_fired (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    self->lazy_timer = 0;
    broker_pass_end (self);
    return 0;
}

//  Whether the pass that read only output pieces and heartbeats may
//  leave its commit to the next pass, OUTPUT_COMMIT_MS after the first
//  such at most (a timer sees to it): a fleet that streams then costs a
//  disk flush every OUTPUT_COMMIT_MS rather than one every few pieces,
//  and a result or request that comes meanwhile waits for one flush,
//  its own, which carries the pieces too. Their acks go after it, as
//  ever. Not in a cluster, where each pass ships to the standbys.
static bool
s_commit_later (broker_t *self, int64_t now_ms)
{
    if (!self->loop || self->repl || !self->txn || self->pass_broken
        || store_txn_failed (self->txn) || self->demoted)
        return false;
    if (!self->lazy_since_ms) {
        self->lazy_timer = zloop_timer (self->loop, OUTPUT_COMMIT_MS, 1,
                                        s_lazy_fired, self);
        if (self->lazy_timer <= 0) {
            self->lazy_timer = 0;
            return false;
        }
        self->lazy_since_ms = now_ms;
    }
    return now_ms - self->lazy_since_ms < OUTPUT_COMMIT_MS;
}

//  One pass over the agent socket: until it is empty, AGENT_PASS_MAX
//  messages or AGENT_PASS_MS, then the commit and the sends. A commit
//  costs a disk flush, so under load a pass takes in what it can: at
//  512 messages per pass the broker committed 66,000 to 78,000 results
//  per second (1,000 agents), at 8,192 about 135,000. The time bound
//  keeps replies and timers from waiting behind a long pass. A pass of
//  output pieces alone may commit with the next (s_commit_later).
//  Returns true when it found the socket empty.
bool
broker_agents_pass (broker_t *self)
{
    int64_t start_ms = broker_now_ms ();
    int64_t now_ms = start_ms;
    void *handle = zsock_resolve (self->agents);
    bool empty = false;
    bool only_output = true;
    int checked = 0;
    for (int count = 0; count < AGENT_PASS_MAX; ) {
        if (count - checked >= 64) {
            checked = count;
            now_ms = broker_now_ms ();
            if (now_ms - start_ms >= AGENT_PASS_MS)
                break;
        }
        int rc = s_agent_recv (self, handle);
        if (rc < 0) {
            empty = zmq_errno () == EAGAIN;
            break;
        }
        if (rc == 0)
            s_log_dropped (self, "its frames are not a routing id and a "
                                 "body (or a relay's path and a body)");
        count += rc > 0 ? s_on_agent_message (self, now_ms) : 1;
        only_output = only_output && rc > 0 && self->io->only_output;
        s_agent_release (self->io);
        broker_drain (self);
        if (self->pass_broken || (self->txn && store_txn_failed (self->txn)))
            broker_pass_end (self);
        //  A failed commit rests the agent socket: read no more now
        if (self->agents_resting)
            break;
    }
    //  Everything queued when the pass began has been read
    if (empty)
        self->io->agents_empty_ms = start_ms;
    if (only_output && s_commit_later (self, broker_now_ms ()))
        return empty;
    broker_pass_end (self);
    return empty;
}

int
broker_on_agents (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_agents_pass ((broker_t *) arg);
    return 0;
}

