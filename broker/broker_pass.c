/*  =========================================================================
    broker_pass - the server's pass: one write transaction, the sends and
    replies that wait for its commit, the undo of a pass whose commit
    failed, and the drain of the scheduler's actions into it

    One of the server's rooms: it shares the server's struct through
    broker_int.h, and no handler includes that header.
    =========================================================================
*/
#include "broker.h"
#include "broker_int.h"
#include "jobtrace.h"

void
broker_pending_destroy (s_pending_t **self_p)
{
    s_pending_t *self = *self_p;
    if (self) {
        zmsg_destroy (&self->reply);
        zmsg_destroy (&self->request);
        free (self->id);
        free (self);
        *self_p = NULL;
    }
}

//  ---------------------------------------------------------------------
//  Passes: one write transaction and an outbox, committed then sent.

store_txn_t *
broker_txn (broker_t *self)
{
    if (!self->txn && !self->pass_broken) {
        self->txn = store_begin (self->ctx.store, true);
        if (!self->txn) {
            //  What this pass changes cannot be stored: it fails whole
            if (!self->pass_broken && self->stats->storage.code == 0)
                log_error ("store: cannot begin a transaction: %s",
                       store_last_error (self->ctx.store));
            if (!self->pass_broken)
                memcpy (self->pass_finished, self->stats->finished,
                        sizeof self->stats->finished);
            self->pass_broken = true;
        }
        else {
            memcpy (self->pass_finished, self->stats->finished,
                    sizeof self->stats->finished);
            if (self->repl) {
                pw_reset (self->journal);
                store_txn_journal (self->txn, self->journal);
            }
        }
    }
    return self->txn;
}

//  Queues FIRST, then VIA (VIA_SIZE bytes, 0: no such frame), then the
//  body in self->body, to SOCKET until the commit. NODE (agent sends)
//  names the receiver for the logs, or is NULL.
void
broker_queue_send (broker_t *self, zsock_t *socket, const void *first,
              size_t first_size, const void *via, size_t via_size,
              const char *node, bool needs_commit)
{
    broker_io_t *io = self->io;
    size_t body_size = pw_size (self->body);
    size_t node_size = node ? strlen (node) : 0;
    size_t need = first_size + via_size + body_size
                  + (node ? node_size + 1 : 0);
    if (io->bytes_max - io->bytes_size < need) {
        size_t max = io->bytes_max ? io->bytes_max : 65536;
        while (max - io->bytes_size < need)
            max *= 2;
        io->bytes = (uint8_t *) realloc (io->bytes, max);
        assert (io->bytes);
        io->bytes_max = max;
    }
    if (io->send_count == io->send_max) {
        io->send_max = io->send_max ? io->send_max * 2 : 1024;
        io->sends = (s_send_t *) realloc (io->sends,
                                          io->send_max * sizeof (s_send_t));
        assert (io->sends);
    }
    s_send_t *send = &io->sends [io->send_count++];
    send->socket = socket;
    send->offset = io->bytes_size;
    send->first_size = first_size;
    send->via_size = via_size;
    send->body_size = body_size;
    send->node_size = node_size;
    send->needs_commit = needs_commit;
    uint8_t *at = io->bytes + io->bytes_size;
    memcpy (at, first, first_size);
    if (via_size) {
        memcpy (at + first_size, via, via_size);
        at += via_size;
    }
    memcpy (at + first_size, pw_data (self->body), body_size);
    if (node) {
        memcpy (at + first_size + body_size, node, node_size);
        at [first_size + body_size + node_size] = 0;
    }
    io->bytes_size += need;
}

//  Queues the body in self->body to a node over the agent ROUTER.
//  NEEDS_COMMIT: it stands for what this pass stores (an ack, a command),
//  so a failed commit drops it.
void
broker_send_to_node (broker_t *self, const registry_node_t *node,
                bool needs_commit)
{
    if (!node || !node->online || node->routing_id_size == 0)
        return;
    broker_queue_send (self, self->agents, node->routing_id,
                  node->routing_id_size, node->via, node->via_size, node->id,
                  needs_commit);
}

//  The slot of NODE in the pass's ack table, made when new.
static s_ack_slot_t *
s_ack_slot (broker_io_t *io, registry_node_t *node)
{
    if ((io->ack_node_count + 1) * 2 > io->ack_slot_max) {
        //  Grow, and place the nodes seen so far again
        size_t max = io->ack_slot_max ? io->ack_slot_max * 2 : 1024;
        s_ack_slot_t *slots = (s_ack_slot_t *) calloc (max, sizeof *slots);
        uint32_t *order = (uint32_t *) malloc (max / 2 * sizeof *order);
        assert (slots && order);
        for (size_t index = 0; index < io->ack_node_count; index++) {
            const s_ack_slot_t *old = &io->ack_slots [io->ack_order [index]];
            size_t at = ((uintptr_t) old->node >> 4) * 0x9E3779B97F4A7C15ull
                        >> 7 & (max - 1);
            while (slots [at].node)
                at = (at + 1) & (max - 1);
            slots [at] = *old;
            order [index] = (uint32_t) at;
        }
        free (io->ack_slots);
        free (io->ack_order);
        io->ack_slots = slots;
        io->ack_order = order;
        io->ack_slot_max = max;
    }
    size_t mask = io->ack_slot_max - 1;
    size_t at = ((uintptr_t) node >> 4) * 0x9E3779B97F4A7C15ull >> 7 & mask;
    while (io->ack_slots [at].node && io->ack_slots [at].node != node)
        at = (at + 1) & mask;
    s_ack_slot_t *slot = &io->ack_slots [at];
    if (!slot->node) {
        slot->node = node;
        slot->head = slot->tail = UINT32_MAX;
        io->ack_order [io->ack_node_count++] = (uint32_t) at;
    }
    return slot;
}

//  A new ack of NODE for JOB, STEP, ATTEMPT, linked after the node's
//  others in the pass's table.
static s_ack_t *
s_ack_new (broker_t *self, registry_node_t *node, const char *job,
           uint32_t step, uint32_t attempt)
{
    broker_io_t *io = self->io;
    if (io->ack_count == io->ack_max) {
        io->ack_max = io->ack_max ? io->ack_max * 2 : 1024;
        io->acks = (s_ack_t *) realloc (io->acks,
                                        io->ack_max * sizeof (s_ack_t));
        assert (io->acks);
    }
    uint32_t index = (uint32_t) io->ack_count++;
    s_ack_t *ack = &io->acks [index];
    ack->node = node;
    size_t job_len = strnlen (job, sizeof ack->job - 1);
    memcpy (ack->job, job, job_len);
    ack->job [job_len] = 0;
    ack->step = step;
    ack->attempt = attempt;
    ack->next = UINT32_MAX;
    ack->output = false;
    ack->stderr_ = false;
    ack->offset = 0;
    s_ack_slot_t *slot = s_ack_slot (io, node);
    if (slot->tail == UINT32_MAX)
        slot->head = index;
    else
        io->acks [slot->tail].next = index;
    slot->tail = index;
    return ack;
}

//  Notes that NODE's result (JOB, STEP, ATTEMPT) is acknowledged once the
//  pass commits: s_acks_queue writes one result_acks per node that said
//  in hello it understands them, one result_ack per result for the rest.
void
broker_ack_add (broker_t *self, registry_node_t *node, const char *job,
           uint32_t step, uint32_t attempt)
{
    s_ack_new (self, node, job, step, attempt);
}

void
broker_output_ack_add (broker_t *self, registry_node_t *node,
                       const char *job, uint32_t step, uint32_t attempt,
                       bool stderr_, uint64_t offset)
{
    s_ack_t *ack = s_ack_new (self, node, job, step, attempt);
    ack->output = true;
    ack->stderr_ = stderr_;
    ack->offset = offset;
}

//  Queues the acks of the pass, node by node, to go out after its commit
//  (and not at all when it fails: the agents keep their results and send
//  them again). A node that said hello again on another connection during
//  the pass is answered there: its results are committed all the same.
static void
s_acks_queue (broker_t *self)
{
    broker_io_t *io = self->io;
    broker_output_paced (self, broker_now_ms ());
    if (io->ack_count == 0)
        return;
    if (!io->ack_batch) {
        io->ack_batch = (proto_ack_t *) malloc (PROTO_MAX_ACKS
                                                * sizeof (proto_ack_t));
        assert (io->ack_batch);
    }
    for (size_t index = 0; index < io->ack_node_count; index++) {
        s_ack_slot_t *slot = &io->ack_slots [io->ack_order [index]];
        registry_node_t *node = slot->node;
        bool batched = proto_hello_has_feature (node->hello,
                                                PROTO_FEATURE_RESULT_ACKS);
        //  The results first, then the output pieces (only of nodes
        //  granted output_acks: the others' went one by one)
        for (int output = 0; output < 2; output++) {
            uint32_t at = slot->head;
            while (at != UINT32_MAX && io->acks [at].output != output)
                at = io->acks [at].next;
            while (at != UINT32_MAX && node->routing_id_size) {
                size_t count = 0;
                do {
                    const s_ack_t *ack = &io->acks [at];
                    io->ack_batch [count].job = ack->job;
                    io->ack_batch [count].step = ack->step;
                    io->ack_batch [count].attempt = ack->attempt;
                    io->ack_batch [count].stream = ack->stderr_ ? "stderr"
                                                                : "stdout";
                    io->ack_batch [count].offset = ack->offset;
                    count++;
                    for (at = ack->next; at != UINT32_MAX
                                         && io->acks [at].output != output;
                         at = io->acks [at].next)
                        ;
                } while ((batched || output) && at != UINT32_MAX
                         && count < PROTO_MAX_ACKS);
                pw_reset (self->body);
                int version = broker_node_protocol (node);
                int rc = output
                       ? proto_output_acks_encode (io->ack_batch, count,
                                                   broker_node_epoch (self,
                                                                      node),
                                                   version, self->body)
                       : batched
                       ? proto_result_acks_encode (io->ack_batch, count,
                                                   broker_node_epoch (self,
                                                                      node),
                                                   version, self->body)
                       : proto_result_ack_encode (io->ack_batch [0].job,
                                                  io->ack_batch [0].step,
                                                  io->ack_batch [0].attempt,
                                                  broker_node_epoch (self,
                                                                     node),
                                                  version, self->body);
                assert (rc == 0);
                broker_queue_send (self, self->agents, node->routing_id,
                              node->routing_id_size, node->via,
                              node->via_size, node->id, true);
                if (!output)
                    metrics_result_ack (self->stats->metrics, batched,
                                        count);
            }
        }
        slot->node = NULL;
    }
    io->ack_count = 0;
    io->ack_node_count = 0;
}

//  Queues the body in self->body on the commands PUB under TOPIC.
static void
s_publish (broker_t *self, const char *topic)
{
    broker_queue_send (self, self->publish, topic, strlen (topic), NULL, 0, NULL,
                  true);
}

//  A queued send failed with ERROR; NODE_ID names the agent it was for,
//  or is NULL.
static void
s_send_failed (broker_t *self, const char *node_id, int error)
{
    self->stats->counters.send_failed++;
    //  EHOSTUNREACH: its connection is gone. EAGAIN (its queue is full)
    //  only drops this message: acks and re-sends cover it.
    if (node_id && error == EHOSTUNREACH) {
        registry_node_t *node = registry_lookup (self->ctx.registry, node_id);
        if (node && node->online) {
            log_node (LOG_LEVEL_INFO, node_id,
                      "node %s is unreachable: marking it offline", node_id);
            registry_set_offline (node, broker_now_ms ());
            sched_on_node_down (self->ctx.sched, node_id, broker_now_ms ());
        }
    }
    else
    if (node_id && self->config.verbose)
        log_node (LOG_LEVEL_WARN, node_id, "send to node %s failed: %s",
                  node_id, zmq_strerror (error));
}

#define S_NODE_TOPIC "node/"

//  Publishes TOPIC and BODY on the commands XPUB (subgate_send_fn).
static void
s_gate_send (void *arg, const void *topic, size_t topic_size,
             const void *body, size_t body_size)
{
    broker_t *self = (broker_t *) arg;
    void *handle = zsock_resolve (self->publish);
    if (zmq_send (handle, topic, topic_size, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0
        || zmq_send (handle, body, body_size, ZMQ_DONTWAIT) < 0)
        self->stats->counters.send_failed++;
}

void
broker_gate_release (broker_t *self)
{
    if (!subgate_held (self->gate))
        return;
    if (self->repl && !self->demoted && !broker_lead_valid (self))
        broker_demote (self, "its leadership could lapse: no renewal came in "
                       "time");
    if (self->demoted)
        subgate_drop (self->gate);
    else
        subgate_release (self->gate, broker_now_ms (), s_gate_send, self);
}

//  True when SEND is a command to one node (node/ID/) that must wait at
//  the gate, which then holds it.
static bool
s_gated (broker_t *self, const uint8_t *at, const s_send_t *send)
{
    if (send->socket != self->publish || send->via_size
        || send->first_size < strlen (S_NODE_TOPIC)
        || memcmp (at, S_NODE_TOPIC, strlen (S_NODE_TOPIC)) != 0
        || !subgate_must_wait (self->gate, at, send->first_size))
        return false;
    subgate_hold (self->gate, at, send->first_size, at + send->first_size,
                  send->body_size, broker_now_ms ());
    return true;
}

//  True when SEND goes to an agent through a relay connection granted
//  result_acks (its routing id in io->batch_relays).
static bool
s_batchable (broker_t *self, const uint8_t *bytes, const s_send_t *send)
{
    if (!send->via_size || send->socket != self->agents
        || send->first_size > 255
        || zhashx_size (self->io->batch_relays) == 0)
        return false;
    char key [2 * 255 + 1];
    const uint8_t *routing = bytes + send->offset;
    for (size_t at = 0; at < send->first_size; at++)
        snprintf (key + 2 * at, 3, "%02x", routing [at]);
    key [2 * send->first_size] = 0;
    return zhashx_lookup (self->io->batch_relays, key) != NULL;
}

//  True when sends A and B go to the same connection, both with a via.
static bool
s_same_relay (const uint8_t *bytes, const s_send_t *a, const s_send_t *b)
{
    return a->socket == b->socket && b->via_size
           && a->first_size == b->first_size
           && memcmp (bytes + a->offset, bytes + b->offset, a->first_size)
                  == 0;
}

//  Sends COUNT queued SENDS whose bytes are BYTES. What goes in a row to
//  a relay granted result_acks goes as one message, its routing id then
//  each send's via and body (PROTOCOL.md 4.3), RELAY_BATCH_PAIRS at most.
static void
s_send_queued (broker_t *self, const uint8_t *bytes, const s_send_t *sends,
               size_t count)
{
    for (size_t index = 0; index < count; index++) {
        const s_send_t *send = &sends [index];
        const uint8_t *at = bytes + send->offset;
        if (s_gated (self, at, send))
            continue;
        size_t last = index;
        if (s_batchable (self, bytes, send))
            while (last + 1 < count && last + 1 - index < RELAY_BATCH_PAIRS
                   && s_same_relay (bytes, send, &sends [last + 1]))
                last++;
        void *handle = send->socket ? zsock_resolve (send->socket) : NULL;
        //  The ROUTER refuses the routing id frame of a vanished or full
        //  peer; after it the rest of the message cannot fail.
        int rc = handle ? zmq_send (handle, at, send->first_size,
                                    ZMQ_SNDMORE | ZMQ_DONTWAIT)
                        : -1;
        int error = rc < 0 ? (handle ? zmq_errno () : ENOTSOCK) : 0;
        for (size_t next = index; next <= last; next++) {
            const s_send_t *one = &sends [next];
            const uint8_t *from = bytes + one->offset;
            if (rc >= 0 && one->via_size)
                rc = zmq_send (handle, from + one->first_size, one->via_size,
                               ZMQ_SNDMORE | ZMQ_DONTWAIT);
            const uint8_t *body = from + one->first_size + one->via_size;
            if (rc >= 0)
                rc = zmq_send (handle, body, one->body_size,
                               next < last ? ZMQ_SNDMORE | ZMQ_DONTWAIT
                                           : ZMQ_DONTWAIT);
            if (rc < 0 && !error)
                error = zmq_errno ();
            if (rc < 0)
                s_send_failed (self, one->node_size
                                         ? (const char *) body
                                               + one->body_size
                                         : NULL,
                               error);
        }
        index = last;
    }
}

//  Sends the client replies of OUTBOX.
static void
s_send_outbox (broker_t *self, zlistx_t *outbox)
{
    s_pending_t *pending;
    while ((pending = (s_pending_t *) zlistx_detach (outbox, NULL))) {
        if (zmsg_send (&pending->reply, pending->socket) != 0)
            self->stats->counters.send_failed++;
        broker_pending_destroy (&pending);
    }
}

static void
s_flush (broker_t *self)
{
    broker_io_t *io = self->io;
    s_send_queued (self, io->bytes, io->sends, io->send_count);
    io->send_count = 0;
    io->bytes_size = 0;
    //  A rare huge pass (a restore's re-sends, a long node list) does not
    //  keep its memory
    if (io->bytes_max > SEND_BYTES_KEEP) {
        free (io->bytes);
        free (io->sends);
        io->bytes = NULL;
        io->sends = NULL;
        io->bytes_max = io->send_max = 0;
    }
    s_send_outbox (self, self->outbox);
}

static void
s_held_destroy (s_held_t **self_p)
{
    s_held_t *self = *self_p;
    if (self) {
        free (self->bytes);
        free (self->sends);
        zlistx_destroy (&self->outbox);
        free (self);
        *self_p = NULL;
    }
}

//  Drops every pass's sends and replies: leadership is lost, and nothing
//  that waited for the standbys may go out now.
static void
s_drop_all (broker_t *self)
{
    self->io->send_count = 0;
    self->io->bytes_size = 0;
    zlistx_purge (self->outbox);
    subgate_drop (self->gate);
    s_held_t *held;
    while (self->held
           && (held = (s_held_t *) zlistx_detach (self->held, NULL)))
        s_held_destroy (&held);
}

//  A cluster's active: what this pass sends waits until the sync standbys
//  hold every pass so far (SEQ), as does everything after it.
static void
s_hold (broker_t *self, uint64_t seq)
{
    broker_io_t *io = self->io;
    s_held_t *held = (s_held_t *) zmalloc (sizeof (s_held_t));
    held->seq = seq;
    held->bytes = io->bytes;
    held->sends = io->sends;
    held->send_count = io->send_count;
    held->outbox = zlistx_new ();
    zlistx_set_destructor (held->outbox,
                           (zlistx_destructor_fn *) broker_pending_destroy);
    s_pending_t *pending;
    while ((pending = (s_pending_t *) zlistx_detach (self->outbox, NULL)))
        zlistx_add_end (held->outbox, pending);
    io->bytes = NULL;
    io->sends = NULL;
    io->bytes_size = io->bytes_max = 0;
    io->send_count = io->send_max = 0;
    zlistx_add_end (self->held, held);
}

static void s_switchover (broker_t *self);
static bool s_release_held (broker_t *self);

//  Sends the pass's outbox now, or holds it for the standbys.
static void
s_send_out (broker_t *self)
{
    if (self->repl && !self->demoted && !broker_lead_valid (self))
        broker_demote (self, "its leadership could lapse: no renewal came in "
                       "time");
    if (self->demoted) {
        s_drop_all (self);
        return;
    }
    if (!self->repl) {
        s_flush (self);
        return;
    }
    //  The acks that came in while this pass ran and committed release
    //  what waits before it, now rather than when the loop next reads
    //  the replication socket (the end of this pass loops again for
    //  what a failed send changed)
    repl_source_read (self->repl, broker_now_ms ());
    s_release_held (self);
    uint64_t need = repl_source_last (self->repl);
    if (zlistx_size (self->held) == 0
        && repl_source_released (self->repl) >= need)
        s_flush (self);
    else
        s_hold (self, need);
    s_switchover (self);
}

//  A switchover asked for: once everything answered is sent (the reply
//  to cluster.switchover too), the elector leaves the key; its DEMOTED
//  stops this broker and a standby in sync takes over.
static void
s_switchover (broker_t *self)
{
    if (!self->switchover || self->demoted || zlistx_size (self->held)
        || self->io->send_count || zlistx_size (self->outbox))
        return;
    self->switchover = false;
    log_warn ("cluster: %s hands the lead over (cluster.switchover)",
              self->cluster_name);
    zstr_send (self->elector, "RESIGN");
}

void
broker_release (broker_t *self)
{
    if (!self->repl)
        return;
    if (!self->demoted && !broker_lead_valid (self))
        broker_demote (self, "its leadership could lapse: no renewal came in "
                       "time");
    if (self->demoted) {
        s_drop_all (self);
        return;
    }
    //  A send that failed may have changed what the scheduler holds
    if (s_release_held (self))
        broker_pass_end (self);
    s_switchover (self);
}

//  Sends the held passes the sync standbys acknowledged, oldest first.
//  Returns true when it sent any.
static bool
s_release_held (broker_t *self)
{
    uint64_t released = repl_source_released (self->repl);
    bool sent = false;
    s_held_t *held;
    while ((held = (s_held_t *) zlistx_first (self->held))
           && held->seq <= released) {
        zlistx_detach_cur (self->held);
        s_send_queued (self, held->bytes, held->sends, held->send_count);
        s_send_outbox (self, held->outbox);
        s_held_destroy (&held);
        sent = true;
    }
    return sent;
}

void
broker_demote (broker_t *self, const char *why)
{
    if (self->demoted)
        return;
    self->demoted = true;
    log_warn ("cluster: %s is no longer the active of epoch %" PRIu64 ": %s; "
              "nothing more is acknowledged, published or answered here",
              self->cluster_name, self->epoch, why);
    s_drop_all (self);
    store_abort (&self->txn);
}


static int
s_agents_wake (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    self->agents_resting = false;
    zloop_reader (self->loop, self->agents, broker_on_agents, self);
    return 0;
}

//  After a failed commit the broker reads its agents again only after
//  STORE_COOLDOWN_MS: their messages wait in the socket (heartbeats are
//  judged by the last time it was read empty, so no node reads offline for
//  it), and a result that cannot be stored is not taken, rolled back and
//  asked for again in a tight loop.
static void
s_agents_rest (broker_t *self)
{
    if (self->agents_resting || !self->loop || !self->agents)
        return;
    self->agents_resting = true;
    zloop_reader_end (self->loop, self->agents);
    zloop_timer (self->loop, STORE_COOLDOWN_MS, 1, s_agents_wake, self);
}

//  The reply to a request whose changes could not be stored: CODE and a
//  sentence that says why and what still works.
static void
s_storage_reply (broker_t *self, const char *id, int code, pw_t *reply)
{
    char message [512];
    size_t max = self->config.max_map_bytes;
    if (code == STORE_EFULL && strstr (self->stats->storage.error, "MAP_FULL"))
        snprintf (message, sizeof message,
                  "the store reached its size limit (store.max_size, "
                  "%zu MiB): nothing was changed; reads still work; purge "
                  "old jobs (gridcli job delete, retention) or raise the "
                  "limit", max >> 20);
    else
    if (code == STORE_EFULL)
        snprintf (message, sizeof message,
                  "the broker's disk is full (%s): nothing was changed; "
                  "reads still work; retry once space is freed",
                  self->stats->storage.error);
    else
        snprintf (message, sizeof message,
                  "the broker cannot write its store (%s): nothing was "
                  "changed; reads still work", self->stats->storage.error);
    proto_reply_error (reply, id, code == STORE_EFULL ? PROTO_ERR_STORAGE_FULL
                                                      : PROTO_ERR_STORE,
                       message, NULL, 0);
    self->stats->storage.refused++;
}

//  The pass's commit failed with CODE: nothing of it is on disk. Undoes
//  it in memory (the scheduler is rebuilt from the store), drops the
//  sends that stood for it, and answers each client request that wrote
//  with storage_full or storage_error, except that requests are kept in
//  REPLAYS to run again when the map was full and may still grow. Reads
//  keep their answers.
static void s_versions_undo (broker_t *self);

static void
s_pass_failed (broker_t *self, int code, zlistx_t *replays)
{
    broker_storage_t *storage = &self->stats->storage;
    storage->failed_commits++;
    //  The pieces whose acks the pass held were not stored
    outpace_abort (self->outpace);
    storage->failed_ms = broker_now_ms ();
    s_agents_rest (self);
    snprintf (storage->error, sizeof storage->error, "%s",
              store_last_error (self->ctx.store));
    bool grow = code == STORE_EFULL && store_can_grow (self->ctx.store)
                && strstr (storage->error, "MAP_FULL");
    if (grow)
        log_info ("store: a pass did not fit in the map; it grows and the "
               "pass runs again");
    else
    if (storage->code == 0) {
        storage->code = code;
        storage->since_ms = broker_wall_ms ();
        storage->episodes++;
        log_error ("store: commit failed: %s (%s); until a commit succeeds, "
               "changes are refused with %s and reads go on",
               store_strerror (code), storage->error,
               code == STORE_EFULL ? PROTO_ERR_STORAGE_FULL : PROTO_ERR_STORE);
    }
    //  Acks and commands of the pass stand for what was not stored
    broker_io_t *io = self->io;
    size_t kept = 0;
    for (size_t index = 0; index < io->send_count; index++)
        if (!io->sends [index].needs_commit)
            io->sends [kept++] = io->sends [index];
    io->send_count = kept;
    //  Replies of the pass that were remembered for retries are not valid
    for (char *id = (char *) zlistx_first (self->pass_replies); id;
         id = (char *) zlistx_next (self->pass_replies)) {
        zhashx_delete (self->replies, id);
        void *handle = zlistx_find (self->reply_order, id);
        if (handle)
            zlistx_delete (self->reply_order, handle);
    }
    zlistx_purge (self->pass_replies);
    zlistx_purge (self->pass_logs);
    zlistx_purge (self->pass_audits);
    memcpy (self->stats->finished, self->pass_finished, sizeof self->stats->finished);
    s_versions_undo (self);
    broker_rebuild (self);
    if (self->ctx.notify)
        notify_reload (self->ctx.notify, self->ctx.store);
    pw_t *reply = pw_new ();
    zlistx_t *kept_replies = zlistx_new ();
    s_pending_t *pending;
    while ((pending = (s_pending_t *) zlistx_detach (self->outbox, NULL))) {
        if (pending->wrote && grow && replays) {
            zlistx_add_end (replays, pending);
            continue;
        }
        if (pending->wrote) {
            pw_reset (reply);
            s_storage_reply (self, pending->id, code, reply);
            zframe_t *body = zmsg_last (pending->reply);
            zmsg_remove (pending->reply, body);
            zframe_destroy (&body);
            zmsg_addmem (pending->reply, pw_data (reply), pw_size (reply));
        }
        zlistx_add_end (kept_replies, pending);
    }
    while ((pending = (s_pending_t *) zlistx_detach (kept_replies, NULL)))
        zlistx_add_end (self->outbox, pending);
    zlistx_destroy (&kept_replies);
    pw_destroy (&reply);
}

//  A commit succeeded: when it WROTE, the episode of failures, if any, is
//  over.
static void
s_pass_committed (broker_t *self, bool wrote)
{
    outpace_commit (self->outpace);
    zlistx_purge (self->pass_replies);
    zhashx_purge (self->pass_jobs);
    zhashx_purge (self->pass_versions);
    self->jobs_version_pass = self->jobs_version;
    char *line;
    while ((line = (char *) zlistx_detach (self->pass_logs, NULL))) {
        log_info ("%s", line);
        zstr_free (&line);
    }
    audit_entry_t *entry;
    while ((entry = (audit_entry_t *) zlistx_detach (self->pass_audits, NULL))) {
        broker_audit_log (entry);
        free (entry);
    }
    //  A pass that only read proves nothing about the disk; small writes
    //  may fit in pages the store reuses while larger ones still fail, so
    //  the episode ends only after STORE_QUIET_MS without a failure
    if (wrote)
        self->stats->storage.written_ms = broker_now_ms ();
    if (self->stats->storage.code && wrote
        && self->stats->storage.written_ms - self->stats->storage.failed_ms
               >= STORE_QUIET_MS) {
        log_info ("store: writes succeed again (%" PRIu64 " commit%s failed "
               "in all; the last: %s)", self->stats->storage.failed_commits,
               self->stats->storage.failed_commits == 1 ? "" : "s",
               self->stats->storage.error);
        self->stats->storage.code = 0;
        self->stats->storage.since_ms = 0;
    }
}

static int
s_paced_fired (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    self->outpace_timer = 0;
    broker_pass_end (self);
    return 0;
}

//  While acks of live output pieces wait for results.output_rate, one
//  timer ends a pass when the next may go, OUTPACE_TICK_MS apart at
//  least (a busy broker's passes send them sooner).
static void
s_paced_arm (broker_t *self)
{
    if (self->outpace_timer || !self->loop
        || outpace_held (self->outpace) == 0)
        return;
    int64_t now_ms = broker_now_ms ();
    int64_t due_ms = outpace_due_ms (self->outpace, self->config.output_rate,
                                     now_ms);
    int64_t delay_ms = due_ms - now_ms;
    delay_ms = delay_ms < OUTPACE_TICK_MS ? OUTPACE_TICK_MS
               : delay_ms > OUTPACE_MAX_WAIT_MS ? OUTPACE_MAX_WAIT_MS
               : delay_ms;
    self->outpace_timer = zloop_timer (self->loop, (size_t) delay_ms, 1,
                                       s_paced_fired, self);
    if (self->outpace_timer < 0)
        self->outpace_timer = 0;
}

//  Ends a pass: drains the scheduler, commits, sends. A send failure can
//  feed the scheduler again, so loop until nothing is left (bounded). A
//  pass that did not fit in the map runs its client requests again once
//  the map grew (REPLAY_MAX times at most).

void
broker_pass_end (broker_t *self)
{
    //  A pass of output pieces that waited commits with this one
    self->lazy_since_ms = 0;
    if (self->lazy_timer && self->loop) {
        zloop_timer_end (self->loop, self->lazy_timer);
        self->lazy_timer = 0;
    }
    if (self->demoted) {
        //  What this pass did is never stored or sent: the new active
        //  serves from what the standbys hold
        store_abort (&self->txn);
        outpace_abort (self->outpace);
        self->pass_broken = false;
        s_drop_all (self);
        return;
    }
    broker_drain (self);
    zlistx_t *replays = zlistx_new ();
    zlistx_set_destructor (replays, (zlistx_destructor_fn *) broker_pending_destroy);
    int replayed = 0;
    for (int round = 0; round < 4; round++) {
        broker_drain (self);
        s_acks_queue (self);
        if (self->txn || self->pass_broken) {
            bool wrote = store_txn_changes (self->txn) > 0;
            //  A cluster's active numbers each written pass, in it, and
            //  ships it before its own commit: the standbys' commit (and
            //  fsync) runs beside this one, not after it. What the pass
            //  answers still waits for both (s_send_out)
            uint64_t seq = 0;
            if (self->repl && self->txn && wrote) {
                seq = repl_source_next_seq (self->repl);
                repl_store_mark (self->txn, self->epoch, seq);
                if (store_txn_failed (self->txn) == 0)
                    repl_source_ship (self->repl, seq,
                                      pw_data (self->journal),
                                      pw_size (self->journal),
                                      broker_now_ms ());
                else
                    seq = 0;     //  Its commit fails: never shipped
            }
            int64_t commit_us = zclock_usecs ();
            int rc = self->txn ? store_commit (&self->txn) : STORE_EIO;
            if (rc == 0 && wrote)
                metrics_commit (self->stats->metrics, zclock_usecs () - commit_us);
            if (rc != 0 && seq && repl_source_unship (self->repl, seq) != 0) {
                //  A standby may hold a pass this store does not: the
                //  two would differ from here on. This member leaves the
                //  lead at once (nothing of the pass was answered; the
                //  elector deletes the leader key, so a sync standby,
                //  whose disk took the pass, takes over without waiting
                //  for the lease), and comes back as a standby that
                //  catches up from a snapshot
                broker_demote (self, "its store could not commit a pass "
                               "already sent to its standbys");
                zstr_send (self->elector, "RESIGN");
                self->pass_broken = false;
                break;
            }
            self->pass_broken = false;
            if (rc != 0)
                s_pass_failed (self, rc, replayed < REPLAY_MAX ? replays
                                                               : NULL);
            else
                s_pass_committed (self, wrote);
        }
        else
            outpace_commit (self->outpace);
        zhashx_purge (self->pass_jobs);
        if (zlistx_size (replays)) {
            //  Their replies wait for the replayed pass's commit
            replayed++;
            round = -1;
            s_pending_t *replay;
            while ((replay = (s_pending_t *) zlistx_detach (replays, NULL))) {
                broker_on_face_message (self, replay->socket, replay->request);
                broker_pending_destroy (&replay);
            }
            continue;
        }
        //  Watchers hear what is committed: after a failed commit, the
        //  state read back from the store, never what the pass undid
        if (!self->txn)
            broker_watch_wake (self, broker_now_ms ());
        if (zlistx_size (self->outbox) == 0 && self->io->send_count == 0)
            break;
        s_send_out (self);
    }
    zlistx_destroy (&replays);
    s_paced_arm (self);
}


//  ---------------------------------------------------------------------
//  Scheduler actions

//  Whether the command of JOB's STEP to NODES (COUNT of them) may carry
//  the job's trace context: every one of them takes it.
static bool
s_traced (broker_t *self, const sched_job_t *job, char *const *nodes,
          size_t count)
{
    if (!*job->traceparent || count == 0)
        return false;
    for (size_t index = 0; index < count; index++)
        if (!broker_node_traced (registry_lookup (self->ctx.registry,
                                                  nodes [index])))
            return false;
    return true;
}

//  Whether every one of NODES (COUNT of them) takes the epoch key: a
//  broadcast carries it only then (as the trace context, s_traced).
static bool
s_fenced (broker_t *self, char *const *nodes, size_t count)
{
    if (self->epoch == 0 || count == 0)
        return false;
    for (size_t index = 0; index < count; index++)
        if (!broker_node_fenced (registry_lookup (self->ctx.registry,
                                                  nodes [index])))
            return false;
    return true;
}

//  The epoch to write on what goes to the node NODE_ID alone.
static uint64_t
s_epoch_for (broker_t *self, const char *node_id)
{
    return broker_node_epoch (self, registry_lookup (self->ctx.registry,
                                                     node_id));
}

//  TRACED: the command carries the job's trace context (s_traced).
//  EPOCH: the epoch it carries (0: none).
static void
s_write_command (broker_t *self, const sched_job_t *job, uint32_t step,
                 uint32_t attempt, char *const *nodes, size_t node_count,
                 bool traced, uint64_t epoch)
{
    const job_phase_t *leaf = job_spec_step (job->spec, step, NULL, NULL);
    assert (leaf);
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = PROTO_COMMAND;
    //  Read by agents of every version the broker serves (the commands
    //  socket, and its direct re-sends): written at the oldest
    msg.protocol = PROTO_VERSION_MIN;
    msg.job = (char *) job->id;
    msg.step = step;
    msg.attempt = attempt;
    msg.backend = leaf->backend;
    msg.action = leaf->action;
    //  job_param_t and proto_kv_t are both {name, value} pairs of strings.
    proto_kv_t params [JOB_MAX_PARAMS];
    for (size_t index = 0; index < leaf->param_count; index++) {
        params [index].key = leaf->params [index].name;
        params [index].value = leaf->params [index].value;
    }
    msg.params = params;
    msg.param_count = leaf->param_count;
    msg.timeout_ms = (uint64_t) (leaf->timeout_ms > 0
                                     ? leaf->timeout_ms
                                     : self->config.sched.default_timeout_ms);
    msg.nodes = (char **) nodes;
    msg.node_count = node_count;
    //  Steps of a DAG job may be under way side by side on one node
    msg.parallel = job_spec_is_dag (job->spec);
    //  A dry run: sent only to nodes that run checks (s_dispatch)
    msg.check = job->spec->check;
    char traceparent [TRACE_PARENT_LEN + 1];
    if (traced)
        msg.traceparent = jobtrace_command (job->id, job->traceparent, step,
                                            traceparent);
    msg.epoch = epoch;
    pw_reset (self->body);
    int rc = proto_msg_encode (&msg, self->body);
    assert (rc == 0);
}

static void
s_dispatch (broker_t *self, const sched_action_t *action)
{
    const sched_job_t *job = action->job;
    if (job->spec->check || registry_spec_blobs (job->spec)) {
        //  A dry run's command carries check, which an agent that did
        //  not name the feature refuses: one node at a time, only to
        //  those that run checks (the others were set apart as
        //  unsupported when the job started; one that said hello again
        //  since without the feature is not sent it, and its step ends
        //  lost)
        bool traced = s_traced (self, job, action->nodes,
                                action->node_count);
        uint64_t written = UINT64_MAX;
        for (size_t index = 0; index < action->node_count; index++) {
            if (!registry_node_takes (registry_lookup (self->ctx.registry,
                                                       action->nodes [index]),
                                      job->spec))
                continue;
            //  Each with the epoch it takes (written again only where
            //  that changes)
            uint64_t epoch = s_epoch_for (self, action->nodes [index]);
            if (epoch != written) {
                s_write_command (self, job, action->step, action->attempt,
                                 NULL, 0, traced, epoch);
                written = epoch;
            }
            char *topic = topic_for_node (action->nodes [index]);
            s_publish (self, topic);
            free (topic);
        }
        return;
    }
    if (action->topic) {
        //  One broadcast. Name the receivers unless the topic reaches
        //  exactly them (late joiners and dropped nodes must not act).
        size_t members = registry_members (self->ctx.registry, &job->spec->target);
        bool exact = members == action->node_count;
        //  Every receiver must take the trace context and the epoch: the
        //  topic's members when they are exactly the nodes meant
        bool fenced = exact && s_fenced (self, action->nodes,
                                         action->node_count);
        s_write_command (self, job, action->step, action->attempt,
                         exact ? NULL : action->nodes,
                         exact ? 0 : action->node_count,
                         exact && s_traced (self, job, action->nodes,
                                            action->node_count),
                         fenced ? self->epoch : 0);
        s_publish (self, action->topic);
    }
    else {
        //  One topic per node: each gets the epoch if it takes it (the
        //  command is written again only where that changes)
        bool traced = s_traced (self, job, action->nodes,
                                action->node_count);
        uint64_t written = UINT64_MAX;
        for (size_t index = 0; index < action->node_count; index++) {
            uint64_t epoch = s_epoch_for (self, action->nodes [index]);
            if (epoch != written) {
                s_write_command (self, job, action->step, action->attempt,
                                 NULL, 0, traced, epoch);
                written = epoch;
            }
            char *topic = topic_for_node (action->nodes [index]);
            s_publish (self, topic);
            free (topic);
        }
    }
}

static void
s_cancel (broker_t *self, const sched_action_t *action)
{
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = PROTO_CANCEL;
    msg.protocol = PROTO_VERSION_MIN;   //  As commands are
    msg.job = (char *) action->job->id;
    msg.reason = (char *) (action->job->reason ? action->job->reason
                                               : "cancelled");
    if (action->attempt > 0) {
        //  One attempt only (a reclaim, a timeout): agents before this
        //  field stop the whole job's work there, as they always did
        msg.step = action->step;
        msg.attempt = action->attempt;
        if (action->detail)
            msg.reason = (char *) action->detail;
    }
    //  One topic per node: each gets the epoch if it takes it (the cancel
    //  is written again only where that changes)
    uint64_t written = UINT64_MAX;
    for (size_t index = 0; index < action->node_count; index++) {
        msg.epoch = s_epoch_for (self, action->nodes [index]);
        if (msg.epoch != written) {
            pw_reset (self->body);
            int rc = proto_msg_encode (&msg, self->body);
            assert (rc == 0);
            written = msg.epoch;
        }
        char *topic = topic_for_node (action->nodes [index]);
        s_publish (self, topic);
        free (topic);
    }
}

//  A late result the scheduler recorded beside a verdict came now: the
//  scheduler keeps no wall clock, so its time is stamped as it is saved.
static void
s_stamp_late (sched_job_t *job, size_t index, int64_t wall_ms)
{
    if (!job->cells || index >= job->step_count * job->expected_count)
        return;
    sched_cell_t *cell = &job->cells [index];
    for (size_t at = 0; at < cell->attempt_count; at++)
        if (cell->attempts [at].has_late && cell->attempts [at].late_at_ms == 0)
            cell->attempts [at].late_at_ms = wall_ms;
}

uint32_t
broker_next_event_seq (broker_t *self, const char *job_id)
{
    uint32_t *seq = (uint32_t *) zhashx_lookup (self->event_seq, job_id);
    if (!seq) {
        seq = (uint32_t *) zmalloc (sizeof (uint32_t));
        store_txn_t *txn = broker_txn (self);
        *seq = txn ? jobrec_next_event_seq (txn, job_id) : 1;
        zhashx_insert (self->event_seq, job_id, seq);
    }
    return (*seq)++;
}


//  A cell of a job that asks for it ended failed for good: it lands in
//  the dead-letter queue (dlq.h).
static void
s_dead_letter (broker_t *self, store_txn_t *txn, const sched_action_t *action,
               int64_t wall_ms)
{
    const sched_job_t *job = action->job;
    ssize_t index = sched_job_node_index (job, action->node);
    if (index < 0 || action->step >= job->step_count)
        return;
    const sched_cell_t *cell
        = &job->cells [action->step * job->expected_count + (size_t) index];
    if (!dlq_status_lands (cell->status))
        return;
    int rc = dlq_add (txn, job, action->step, action->node, wall_ms,
                      self->ctx.scratch);
    if (rc == 1 && self->config.verbose)
        log_job (LOG_LEVEL_INFO, job->id, action->node,
                 "dead-letter: job %s step %u on %s (%s)", job->id,
                 action->step,
               action->node, sched_cell_status_name (cell->status));
    ctx_store_error (rc < 0 ? rc : 0, "a dead-letter entry");
}

//  Notes that this pass changed JOB (a failed commit reloads it) and
//  whether it is still live.
static void
s_job_touched (broker_t *self, const sched_job_t *job, bool header)
{
    zhashx_update (self->pass_jobs, job->id, (void *) "");
    if (!header)
        return;
    if (sched_job_status_final (job->status))
        zhashx_delete (self->live_jobs, job->id);
    else
        zhashx_update (self->live_jobs, job->id, (void *) "");
}

//  Per-node counters from the scheduler's events.
static void
s_count_node_event (broker_t *self, const char *node, const char *event)
{
    bool succeeded = strcmp (event, "succeeded") == 0;
    bool failed = strcmp (event, "failed") == 0
                  || strcmp (event, "timeout") == 0
                  || strcmp (event, "interrupted") == 0;
    bool lost = strcmp (event, "lost") == 0;
    bool retried = strcmp (event, "retried") == 0;
    if (!succeeded && !failed && !lost && !retried)
        return;
    broker_node_stats_t *stats = broker_stats_node (self->stats, node);
    stats->run += succeeded || failed;
    stats->failed += failed;
    stats->lost += lost;
    stats->retried += retried;
}

//  ---------------------------------------------------------------------
//  job.watch: requests parked until their job changes


void
broker_watcher_destroy (s_watcher_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zmsg_destroy (&(*self_p)->envelope);
    free ((*self_p)->id);
    free (*self_p);
    *self_p = NULL;
}

void
broker_job_changed (broker_t *self, const char *job_id)
{
    self->jobs_version++;
    broker_job_output_came (self, job_id);
}

void
broker_job_output_came (broker_t *self, const char *job_id)
{
    uint64_t *version = (uint64_t *) zhashx_lookup (self->job_versions, job_id);
    if (!zhashx_lookup (self->pass_versions, job_id)) {
        uint64_t *before = (uint64_t *) zmalloc (sizeof (uint64_t));
        *before = version ? *version : 0;
        zhashx_insert (self->pass_versions, job_id, before);
    }
    if (!version) {
        //  Versions of one run never repeat another run's: they start at
        //  the wall clock's microseconds
        version = (uint64_t *) zmalloc (sizeof (uint64_t));
        *version = (uint64_t) broker_wall_ms () * 1000;
        zhashx_insert (self->job_versions, job_id, version);
    }
    (*version)++;
}

//  A failed pass: the versions it moved go back to the committed ones, so
//  that a watcher is not woken by changes that were undone.
static void
s_versions_undo (broker_t *self)
{
    for (uint64_t *before = (uint64_t *) zhashx_first (self->pass_versions);
         before; before = (uint64_t *) zhashx_next (self->pass_versions)) {
        const char *job_id = (const char *) zhashx_cursor (self->pass_versions);
        if (*before == 0) {
            zhashx_delete (self->job_versions, job_id);
            continue;
        }
        uint64_t *version = (uint64_t *) zhashx_lookup (self->job_versions,
                                                        job_id);
        if (!version) {
            version = (uint64_t *) zmalloc (sizeof (uint64_t));
            zhashx_insert (self->job_versions, job_id, version);
        }
        *version = *before;
    }
    zhashx_purge (self->pass_versions);
    self->jobs_version = self->jobs_version_pass;
}

uint64_t
broker_job_version (broker_t *self, const char *job_id)
{
    if (*job_id == 0)
        return self->jobs_version;
    if (strcmp (job_id, REQ_PARK_NODES) == 0)
        return self->nodes_version_base
             + registry_changes (self->ctx.registry);
    uint64_t *version = (uint64_t *) zhashx_lookup (self->job_versions, job_id);
    return version ? *version : 0;
}


//  Answers the watchers whose job changed or ended, and those whose time
//  is up. Their replies go out with the pass's, after its commit.
void
broker_watch_wake (broker_t *self, int64_t now_ms)
{
    if (zlistx_size (self->watchers) == 0)
        return;
    pw_t *reply = NULL;
    s_watcher_t *watcher = (s_watcher_t *) zlistx_first (self->watchers);
    while (watcher) {
        uint64_t version = broker_job_version (self, watcher->job);
        //  A watch of every job (job.changes) or node (node.changes)
        //  never ends
        bool live = *watcher->job == 0
                 || strcmp (watcher->job, REQ_PARK_NODES) == 0
                 || sched_job (self->ctx.sched, watcher->job) != NULL;
        bool changed = version != watcher->after || !live;
        if (changed || now_ms >= watcher->deadline_ms) {
            if (!reply)
                reply = pw_new ();
            req_write_watch (&self->ctx, watcher->id, watcher->job, version,
                             changed, reply);
            broker_reply (self, watcher->socket, watcher->envelope,
                     pw_data (reply), pw_size (reply), watcher->version, NULL,
                     watcher->id, false);
            //  Detaching moves the cursor back, so the walk goes on
            zlistx_detach_cur (self->watchers);
            broker_watcher_destroy (&watcher);
        }
        watcher = (s_watcher_t *) zlistx_next (self->watchers);
    }
    pw_destroy (&reply);
}

void
broker_drain (broker_t *self)
{
    sched_action_t action;
    int64_t wall_ms = broker_wall_ms ();
    //  One version step per run of actions of one job: nothing reads the
    //  versions while a drain runs (a result's cell and event are a run).
    //  A finished job's handling may call the scheduler, which may free it.
    const sched_job_t *changed = NULL;
    while (sched_next_action (self->ctx.sched, &action)) {
        store_txn_t *txn = broker_txn (self);
        if (action.job && action.job != changed)
            broker_job_changed (self, action.job->id);
        changed = action.type == SCHED_ACTION_FINISHED ? NULL : action.job;
        switch (action.type) {
            case SCHED_ACTION_DISPATCH:
                s_dispatch (self, &action);
                break;
            case SCHED_ACTION_RESEND:
                if (!registry_node_takes (registry_lookup (
                           self->ctx.registry, action.node), action.job->spec))
                    break;      //  A dry run's command: as s_dispatch
                s_write_command (self, action.job, action.step,
                                 action.attempt, NULL, 0,
                                 s_traced (self, action.job,
                                           (char *const *) &action.node, 1),
                                 s_epoch_for (self, action.node));
                broker_send_to_node (self, registry_lookup (self->ctx.registry,
                                                       action.node),
                                true);
                break;
            case SCHED_ACTION_CANCEL:
                s_cancel (self, &action);
                break;
            case SCHED_ACTION_SAVE_JOB:
                action.job->updated_at_ms = wall_ms;
                s_job_touched (self, action.job, true);
                if (txn)
                    ctx_store_error (jobrec_save_header (txn, action.job,
                                                             self->ctx.scratch),
                                   "a job");
                break;
            case SCHED_ACTION_SAVE_CELL:
                s_job_touched (self, action.job, false);
                s_stamp_late (action.job, action.cell, wall_ms);
                if (txn)
                    ctx_store_error (jobrec_save_cell_at (txn, action.job,
                                                              action.cell,
                                                              self->ctx.scratch),
                                   "a result");
                if (txn && action.job->spec->dead_letter)
                    s_dead_letter (self, txn, &action, wall_ms);
                break;
            case SCHED_ACTION_EVENT: {
                bool step_event = action.node != NULL
                                  || strcmp (action.event, "dispatched") == 0
                                  || strcmp (action.event, "skipped") == 0;
                uint32_t seq = broker_next_event_seq (self, action.job->id);
                if (txn)
                    ctx_store_error (jobrec_save_event (
                                             txn, action.job->id, seq, wall_ms,
                                             action.event, action.node,
                                             step_event ? (int64_t) action.step : -1,
                                             action.detail, self->ctx.scratch),
                                   "an event");
                if (action.node)
                    s_count_node_event (self, action.node, action.event);
                if (self->config.verbose)
                    log_job (LOG_LEVEL_INFO, action.job->id, action.node,
                             "job %s: %s%s%s%s%s", action.job->id, action.event,
                           action.node ? " node " : "",
                           action.node ? action.node : "",
                           action.detail ? ": " : "",
                           action.detail ? action.detail : "");
                break;
            }
            case SCHED_ACTION_FORGET_CELLS:
                if (txn)
                    ctx_store_error (jobrec_forget_cells (txn, action.job,
                                                              action.node),
                                   "a moved job's cells");
                break;
            case SCHED_ACTION_FINISHED:
                //  Its watchers are answered from the store from now on
                zhashx_delete (self->job_versions, action.job->id);
                if (action.job->status < 6)
                    self->stats->finished [action.job->status]++;
                metrics_job_finished (self->stats->metrics, action.job->status,
                                      wall_ms - action.job->created_at_ms);
                if (action.job->spec->priority >= -100
                    && action.job->spec->priority <= 100)
                    self->stats->finished_by_priority [action.job->spec->priority
                                                + 100]++;
                //  A retry that completed clears the entries it retried
                if (txn && action.job->retry_of
                    && action.job->status == SCHED_JOB_COMPLETED) {
                    int cleared = dlq_clear_retried (txn, action.job->retry_of,
                                                     action.job->id);
                    if (cleared > 0)
                        log_info ("dead-letter: %d entr%s of job %s cleared by "
                               "its retry %s", cleared,
                               cleared == 1 ? "y" : "ies",
                               action.job->retry_of, action.job->id);
                    ctx_store_error (cleared < 0 ? cleared : 0,
                                   "the dead-letter queue");
                }
                if (action.job->schedule)
                    schedrun_on_finished (&self->ctx, action.job);
                //  Its spans, from what this pass holds (tracing.h)
                tracing_job_finished (self->ctx.tracer, txn, action.job,
                                      wall_ms);
                //  Its webhooks are queued with its end (notify.h)
                if (txn && self->ctx.notify) {
                    int queued = notify_job_finished (self->ctx.notify, txn,
                                                      &self->config.notify,
                                                      action.job, wall_ms);
                    ctx_store_error (queued < 0 ? queued : 0,
                                     "a webhook delivery");
                }
                zhashx_delete (self->event_seq, action.job->id);
                //  Logged once it is stored, with its trace id, by which
                //  its spans are found
                zlistx_add_end (self->pass_logs,
                                zsys_sprintf ("job %s %s%s%s%s%.32s%s", action.job->id,
                                              sched_job_status_name (action.job->status),
                                              action.job->reason ? ": " : "",
                                              action.job->reason ? action.job->reason : "",
                                              *action.job->traceparent ? " (trace " : "",
                                              *action.job->traceparent
                                                  ? action.job->traceparent + 3 : "",
                                              *action.job->traceparent ? ")" : ""));
                break;
        }
    }
}

