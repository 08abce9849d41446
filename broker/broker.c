/*  =========================================================================
    broker - gridbroker's server (see broker.h)
    =========================================================================
*/
#include <time.h>

#include "../proto/conf.h"
#include "../proto/log.h"
#include "../proto/mpscan.h"
#include "../proto/service.h"
#include "broker.h"
#include "dlq.h"
#include "jobrec.h"
#include "nodehist.h"
#include "nodeseen.h"
#include "schedule.h"
#include "token.h"

#define CLIENT_BATCH_MAX 512     //  Client requests read per pass
#define AGENT_PASS_MAX 8192      //  Agent messages read per pass at most
                                 //  (a results counts its entries)...
#define AGENT_PASS_MS 50         //  ...or for this long, then one commit
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

static void
s_pending_destroy (s_pending_t **self_p)
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

//  A result to acknowledge once the pass commits (s_acks_queue).
typedef struct {
    registry_node_t *node;       //  Who sent it (nodes live as long as the
                                 //  registry)
    char job [32];               //  Its job id (job_id_valid: 19 chars)
    uint32_t step;
    uint32_t attempt;
    uint32_t next;               //  The node's next one, or UINT32_MAX
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
struct _broker_io_t {
    zmq_msg_t routing;           //  Agent socket: routing id frame
    zmq_msg_t via;               //  Agent socket: a relay's via frame
    size_t answer_size;          //  Bytes of via that reach the sender
    zmq_msg_t body;              //  Agent socket: body frame
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
    proto_ack_t *ack_batch;      //  One result_acks being written
};

static broker_io_t *
s_io_new (void)
{
    broker_io_t *io = (broker_io_t *) zmalloc (sizeof (broker_io_t));
    zmq_msg_init (&io->routing);
    zmq_msg_init (&io->via);
    zmq_msg_init (&io->body);
    return io;
}

static void
s_io_destroy (broker_io_t **io_p)
{
    broker_io_t *io = *io_p;
    if (io) {
        zmq_msg_close (&io->routing);
        zmq_msg_close (&io->via);
        zmq_msg_close (&io->body);
        free (io->bytes);
        free (io->sends);
        free (io->acks);
        free (io->ack_slots);
        free (io->ack_order);
        free (io->ack_batch);
        free (io);
        *io_p = NULL;
    }
}

int64_t
broker_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
broker_wall_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  What the broker does is logged at info (log.h), what failed or is at
//  risk with log_error and log_warn; a line naming a job carries its id.
static void
s_log (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    log_writev (LOG_LEVEL_INFO, NULL, format, args);
    va_end (args);
}

//  ---------------------------------------------------------------------
//  Passes: one write transaction and an outbox, committed then sent.

store_txn_t *
broker_txn (broker_t *self)
{
    if (!self->txn && !self->pass_broken) {
        self->txn = store_begin (self->store, true);
        if (!self->txn) {
            //  What this pass changes cannot be stored: it fails whole
            if (!self->pass_broken && self->storage.code == 0)
                log_error ("store: cannot begin a transaction: %s",
                       store_last_error (self->store));
            if (!self->pass_broken)
                memcpy (self->pass_finished, self->finished,
                        sizeof self->finished);
            self->pass_broken = true;
        }
        else
            memcpy (self->pass_finished, self->finished,
                    sizeof self->finished);
    }
    return self->txn;
}

//  Queues FIRST, then VIA (VIA_SIZE bytes, 0: no such frame), then the
//  body in self->body, to SOCKET until the commit. NODE (agent sends)
//  names the receiver for the logs, or is NULL.
static void
s_queue_send (broker_t *self, zsock_t *socket, const void *first,
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
static void
s_send_to_node (broker_t *self, const registry_node_t *node,
                bool needs_commit)
{
    if (!node || !node->online || node->routing_id_size == 0)
        return;
    s_queue_send (self, self->agents, node->routing_id,
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

//  Notes that NODE's result (JOB, STEP, ATTEMPT) is acknowledged once the
//  pass commits: s_acks_queue writes one result_acks per node that said
//  in hello it understands them, one result_ack per result for the rest.
static void
s_ack_add (broker_t *self, registry_node_t *node, const char *job,
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
    s_ack_slot_t *slot = s_ack_slot (io, node);
    if (slot->tail == UINT32_MAX)
        slot->head = index;
    else
        io->acks [slot->tail].next = index;
    slot->tail = index;
}

//  Queues the acks of the pass, node by node, to go out after its commit
//  (and not at all when it fails: the agents keep their results and send
//  them again). A node that said hello again on another connection during
//  the pass is answered there: its results are committed all the same.
static void
s_acks_queue (broker_t *self)
{
    broker_io_t *io = self->io;
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
        uint32_t at = slot->head;
        while (at != UINT32_MAX && node->routing_id_size) {
            size_t count = 0;
            do {
                const s_ack_t *ack = &io->acks [at];
                io->ack_batch [count].job = ack->job;
                io->ack_batch [count].step = ack->step;
                io->ack_batch [count].attempt = ack->attempt;
                count++;
                at = ack->next;
            } while (batched && at != UINT32_MAX && count < PROTO_MAX_ACKS);
            pw_reset (self->body);
            int rc = batched
                   ? proto_result_acks_encode (io->ack_batch, count,
                                               self->body)
                   : proto_result_ack_encode (io->ack_batch [0].job,
                                              io->ack_batch [0].step,
                                              io->ack_batch [0].attempt,
                                              self->body);
            assert (rc == 0);
            s_queue_send (self, self->agents, node->routing_id,
                          node->routing_id_size, node->via, node->via_size,
                          node->id, true);
            metrics_result_ack (self->metrics, batched, count);
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
    s_queue_send (self, self->publish, topic, strlen (topic), NULL, 0, NULL,
                  true);
}

//  A queued send failed with ERROR; NODE_ID names the agent it was for,
//  or is NULL.
static void
s_send_failed (broker_t *self, const char *node_id, int error)
{
    self->counters.send_failed++;
    //  EHOSTUNREACH: its connection is gone. EAGAIN (its queue is full)
    //  only drops this message: acks and re-sends cover it.
    if (node_id && error == EHOSTUNREACH) {
        registry_node_t *node = registry_lookup (self->registry, node_id);
        if (node && node->online) {
            s_log ("node %s is unreachable: marking it offline", node_id);
            registry_set_offline (node, broker_now_ms ());
            sched_on_node_down (self->sched, node_id, broker_now_ms ());
        }
    }
    else
    if (node_id && self->config.verbose)
        log_warn ("send to node %s failed: %s", node_id, zmq_strerror (error));
}

static void
s_flush (broker_t *self)
{
    broker_io_t *io = self->io;
    for (size_t index = 0; index < io->send_count; index++) {
        const s_send_t *send = &io->sends [index];
        const uint8_t *at = io->bytes + send->offset;
        void *handle = send->socket ? zsock_resolve (send->socket) : NULL;
        //  The ROUTER refuses the routing id frame of a vanished or full
        //  peer; after it the body cannot fail.
        int rc = handle ? zmq_send (handle, at, send->first_size,
                                    ZMQ_SNDMORE | ZMQ_DONTWAIT)
                        : -1;
        if (rc >= 0 && send->via_size)
            rc = zmq_send (handle, at + send->first_size, send->via_size,
                           ZMQ_SNDMORE | ZMQ_DONTWAIT);
        const uint8_t *body = at + send->first_size + send->via_size;
        if (rc >= 0)
            rc = zmq_send (handle, body, send->body_size, ZMQ_DONTWAIT);
        if (rc < 0)
            s_send_failed (self, send->node_size
                                     ? (const char *) body + send->body_size
                                     : NULL,
                           handle ? zmq_errno () : ENOTSOCK);
    }
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
    s_pending_t *pending;
    while ((pending = (s_pending_t *) zlistx_detach (self->outbox, NULL))) {
        if (zmsg_send (&pending->reply, pending->socket) != 0)
            self->counters.send_failed++;
        s_pending_destroy (&pending);
    }
}

static void s_on_face_message (broker_t *self, zsock_t *socket, zmsg_t *msg);
static void s_reload (broker_t *self);
static int s_on_agents (zloop_t *loop, zsock_t *socket, void *arg);

static int
s_agents_wake (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    self->agents_resting = false;
    zloop_reader (self->loop, self->agents, s_on_agents, self);
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
    if (code == STORE_EFULL && strstr (self->storage.error, "MAP_FULL"))
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
                  self->storage.error);
    else
        snprintf (message, sizeof message,
                  "the broker cannot write its store (%s): nothing was "
                  "changed; reads still work", self->storage.error);
    proto_reply_error (reply, id, code == STORE_EFULL ? PROTO_ERR_STORAGE_FULL
                                                      : PROTO_ERR_STORE,
                       message, NULL, 0);
    self->storage.refused++;
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
    broker_storage_t *storage = &self->storage;
    storage->failed_commits++;
    storage->failed_ms = broker_now_ms ();
    s_agents_rest (self);
    snprintf (storage->error, sizeof storage->error, "%s",
              store_last_error (self->store));
    bool grow = code == STORE_EFULL && store_can_grow (self->store)
                && strstr (storage->error, "MAP_FULL");
    if (grow)
        s_log ("store: a pass did not fit in the map; it grows and the "
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
    memcpy (self->finished, self->pass_finished, sizeof self->finished);
    s_versions_undo (self);
    s_reload (self);
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
    zlistx_purge (self->pass_replies);
    zhashx_purge (self->pass_jobs);
    zhashx_purge (self->pass_versions);
    char *line;
    while ((line = (char *) zlistx_detach (self->pass_logs, NULL))) {
        s_log ("%s", line);
        zstr_free (&line);
    }
    //  A pass that only read proves nothing about the disk; small writes
    //  may fit in pages the store reuses while larger ones still fail, so
    //  the episode ends only after STORE_QUIET_MS without a failure
    if (wrote)
        self->storage.written_ms = broker_now_ms ();
    if (self->storage.code && wrote
        && self->storage.written_ms - self->storage.failed_ms
               >= STORE_QUIET_MS) {
        s_log ("store: writes succeed again (%" PRIu64 " commit%s failed "
               "in all; the last: %s)", self->storage.failed_commits,
               self->storage.failed_commits == 1 ? "" : "s",
               self->storage.error);
        self->storage.code = 0;
        self->storage.since_ms = 0;
    }
}

//  Ends a pass: drains the scheduler, commits, sends. A send failure can
//  feed the scheduler again, so loop until nothing is left (bounded). A
//  pass that did not fit in the map runs its client requests again once
//  the map grew (REPLAY_MAX times at most).
static void s_watch_wake (broker_t *self, int64_t now_ms);

static void
s_pass_end (broker_t *self)
{
    broker_drain (self);
    zlistx_t *replays = zlistx_new ();
    zlistx_set_destructor (replays, (zlistx_destructor_fn *) s_pending_destroy);
    int replayed = 0;
    for (int round = 0; round < 4; round++) {
        broker_drain (self);
        s_acks_queue (self);
        if (self->txn || self->pass_broken) {
            bool wrote = store_txn_changes (self->txn) > 0;
            int64_t commit_us = zclock_usecs ();
            int rc = self->txn ? store_commit (&self->txn) : STORE_EIO;
            if (rc == 0 && wrote)
                metrics_commit (self->metrics, zclock_usecs () - commit_us);
            self->pass_broken = false;
            if (rc != 0)
                s_pass_failed (self, rc, replayed < REPLAY_MAX ? replays
                                                               : NULL);
            else
                s_pass_committed (self, wrote);
        }
        zhashx_purge (self->pass_jobs);
        if (zlistx_size (replays)) {
            //  Their replies wait for the replayed pass's commit
            replayed++;
            round = -1;
            s_pending_t *replay;
            while ((replay = (s_pending_t *) zlistx_detach (replays, NULL))) {
                s_on_face_message (self, replay->socket, replay->request);
                s_pending_destroy (&replay);
            }
            continue;
        }
        //  Watchers hear what is committed: after a failed commit, the
        //  state read back from the store, never what the pass undid
        if (!self->txn)
            s_watch_wake (self, broker_now_ms ());
        if (zlistx_size (self->outbox) == 0 && self->io->send_count == 0)
            break;
        s_flush (self);
    }
    zlistx_destroy (&replays);
}

void
broker_pass_end (broker_t *self)
{
    s_pass_end (self);
}


//  ---------------------------------------------------------------------
//  Scheduler actions

static void
s_write_command (broker_t *self, const sched_job_t *job, uint32_t step,
                 uint32_t attempt, char *const *nodes, size_t node_count)
{
    const job_phase_t *leaf = job_spec_step (job->spec, step, NULL, NULL);
    assert (leaf);
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = PROTO_COMMAND;
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
    pw_reset (self->body);
    int rc = proto_msg_encode (&msg, self->body);
    assert (rc == 0);
}

static void
s_dispatch (broker_t *self, const sched_action_t *action)
{
    const sched_job_t *job = action->job;
    if (action->topic) {
        //  One broadcast. Name the receivers unless the topic reaches
        //  exactly them (late joiners and dropped nodes must not act).
        size_t members = registry_members (self->registry, &job->spec->target);
        bool exact = members == action->node_count;
        s_write_command (self, job, action->step, action->attempt,
                         exact ? NULL : action->nodes,
                         exact ? 0 : action->node_count);
        s_publish (self, action->topic);
    }
    else {
        s_write_command (self, job, action->step, action->attempt, NULL, 0);
        for (size_t index = 0; index < action->node_count; index++) {
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
    msg.job = (char *) action->job->id;
    msg.reason = (char *) (action->job->reason ? action->job->reason
                                               : "cancelled");
    pw_reset (self->body);
    int rc = proto_msg_encode (&msg, self->body);
    assert (rc == 0);
    for (size_t index = 0; index < action->node_count; index++) {
        char *topic = topic_for_node (action->nodes [index]);
        s_publish (self, topic);
        free (topic);
    }
}

static uint32_t
s_next_event_seq (broker_t *self, const char *job_id)
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

//  A write that failed. A full or failing store fails the whole pass at
//  its commit, which is logged once per episode; anything else is a bug.
static void
s_store_error (broker_t *self, int rc, const char *what)
{
    if (rc != 0 && rc != STORE_EFULL && rc != STORE_EIO)
        log_error ("store: cannot save %s: %s", what, store_strerror (rc));
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
                      self->scratch);
    if (rc == 1 && self->config.verbose)
        s_log ("dead-letter: job %s step %u on %s (%s)", job->id, action->step,
               action->node, sched_cell_status_name (cell->status));
    s_store_error (self, rc < 0 ? rc : 0, "a dead-letter entry");
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

broker_node_stats_t *
broker_node_stats (broker_t *self, const char *node)
{
    broker_node_stats_t *stats
        = (broker_node_stats_t *) zhashx_lookup (self->node_stats, node);
    if (!stats) {
        stats = (broker_node_stats_t *) zmalloc (sizeof (broker_node_stats_t));
        zhashx_insert (self->node_stats, node, stats);
    }
    return stats;
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
    broker_node_stats_t *stats = broker_node_stats (self, node);
    stats->run += succeeded || failed;
    stats->failed += failed;
    stats->lost += lost;
    stats->retried += retried;
}

//  ---------------------------------------------------------------------
//  job.watch: requests parked until their job changes

#define WATCHERS_MAX 10000       //  Parked requests at most; beyond, answered at once

//  One parked job.watch request.
typedef struct {
    zsock_t *socket;             //  Where its answer goes (client or HTTP)
    zmsg_t *envelope;            //  Its routing frames (owned)
    char *id;                    //  Its request id (owned)
    char job [JOB_ID_LEN + 1];   //  The job it watches
    uint64_t after;              //  The version the caller has seen
    int64_t deadline_ms;         //  Answered unchanged at this time (monotonic)
} s_watcher_t;

static void
s_watcher_destroy (s_watcher_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zmsg_destroy (&(*self_p)->envelope);
    free ((*self_p)->id);
    free (*self_p);
    *self_p = NULL;
}

//  The scheduler acted on JOB_ID: its version moves on.
static void
s_job_changed (broker_t *self, const char *job_id)
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
}

uint64_t
broker_job_version (broker_t *self, const char *job_id)
{
    uint64_t *version = (uint64_t *) zhashx_lookup (self->job_versions, job_id);
    return version ? *version : 0;
}

void
broker_watch_park (broker_t *self, const char *job_id, uint64_t after,
                   int64_t timeout_ms)
{
    free (self->park_job);
    self->park_job = strdup (job_id);
    self->park_after = after;
    self->park_timeout_ms = timeout_ms;
}

static void s_reply (broker_t *self, zsock_t *socket, zmsg_t *envelope,
                     const void *data, size_t size, zmsg_t *request,
                     const char *id, bool wrote);

//  Answers the watchers whose job changed or ended, and those whose time
//  is up. Their replies go out with the pass's, after its commit.
static void
s_watch_wake (broker_t *self, int64_t now_ms)
{
    if (zlistx_size (self->watchers) == 0)
        return;
    pw_t *reply = NULL;
    s_watcher_t *watcher = (s_watcher_t *) zlistx_first (self->watchers);
    while (watcher) {
        uint64_t version = broker_job_version (self, watcher->job);
        bool live = sched_job (self->sched, watcher->job) != NULL;
        bool changed = version != watcher->after || !live;
        if (changed || now_ms >= watcher->deadline_ms) {
            if (!reply)
                reply = pw_new ();
            api_write_watch (self, watcher->id, watcher->job, version,
                             changed, reply);
            s_reply (self, watcher->socket, watcher->envelope,
                     pw_data (reply), pw_size (reply), NULL, watcher->id,
                     false);
            //  Detaching moves the cursor back, so the walk goes on
            zlistx_detach_cur (self->watchers);
            s_watcher_destroy (&watcher);
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
    while (sched_next_action (self->sched, &action)) {
        store_txn_t *txn = broker_txn (self);
        if (action.job && action.job != changed)
            s_job_changed (self, action.job->id);
        changed = action.type == SCHED_ACTION_FINISHED ? NULL : action.job;
        switch (action.type) {
            case SCHED_ACTION_DISPATCH:
                s_dispatch (self, &action);
                break;
            case SCHED_ACTION_RESEND:
                s_write_command (self, action.job, action.step,
                                 action.attempt, NULL, 0);
                s_send_to_node (self, registry_lookup (self->registry,
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
                    s_store_error (self, jobrec_save_header (txn, action.job,
                                                             self->scratch),
                                   "a job");
                break;
            case SCHED_ACTION_SAVE_CELL:
                s_job_touched (self, action.job, false);
                if (txn)
                    s_store_error (self, jobrec_save_cell_at (txn, action.job,
                                                              action.cell,
                                                              self->scratch),
                                   "a result");
                if (txn && action.job->spec->dead_letter)
                    s_dead_letter (self, txn, &action, wall_ms);
                break;
            case SCHED_ACTION_EVENT: {
                bool step_event = action.node != NULL
                                  || strcmp (action.event, "dispatched") == 0
                                  || strcmp (action.event, "skipped") == 0;
                uint32_t seq = s_next_event_seq (self, action.job->id);
                if (txn)
                    s_store_error (self, jobrec_save_event (
                                             txn, action.job->id, seq, wall_ms,
                                             action.event, action.node,
                                             step_event ? (int64_t) action.step : -1,
                                             action.detail, self->scratch),
                                   "an event");
                if (action.node)
                    s_count_node_event (self, action.node, action.event);
                if (self->config.verbose)
                    s_log ("job %s: %s%s%s%s%s", action.job->id, action.event,
                           action.node ? " node " : "",
                           action.node ? action.node : "",
                           action.detail ? ": " : "",
                           action.detail ? action.detail : "");
                break;
            }
            case SCHED_ACTION_FORGET_CELLS:
                if (txn)
                    s_store_error (self, jobrec_forget_cells (txn, action.job,
                                                              action.node),
                                   "a moved job's cells");
                break;
            case SCHED_ACTION_FINISHED:
                //  Its watchers are answered from the store from now on
                zhashx_delete (self->job_versions, action.job->id);
                if (action.job->status < 6)
                    self->finished [action.job->status]++;
                metrics_job_finished (self->metrics, action.job->status,
                                      wall_ms - action.job->created_at_ms);
                if (action.job->spec->priority >= -100
                    && action.job->spec->priority <= 100)
                    self->finished_by_priority [action.job->spec->priority
                                                + 100]++;
                //  A retry that completed clears the entries it retried
                if (txn && action.job->retry_of
                    && action.job->status == SCHED_JOB_COMPLETED) {
                    int cleared = dlq_clear_retried (txn, action.job->retry_of,
                                                     action.job->id);
                    if (cleared > 0)
                        s_log ("dead-letter: %d entr%s of job %s cleared by "
                               "its retry %s", cleared,
                               cleared == 1 ? "y" : "ies",
                               action.job->retry_of, action.job->id);
                    s_store_error (self, cleared < 0 ? cleared : 0,
                                   "the dead-letter queue");
                }
                if (action.job->schedule)
                    schedrun_on_finished (self, action.job);
                zhashx_delete (self->event_seq, action.job->id);
                //  Logged once it is stored
                zlistx_add_end (self->pass_logs,
                                zsys_sprintf ("job %s %s%s%s", action.job->id,
                                              sched_job_status_name (action.job->status),
                                              action.job->reason ? ": " : "",
                                              action.job->reason ? action.job->reason : ""));
                break;
        }
    }
}

//  ---------------------------------------------------------------------
//  Agent socket

//  Encodes an agent error message into self->body. Returns 0 or -1.
static int
s_encode_agent_error (broker_t *self, const char *code, const char *message)
{
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = PROTO_ERROR;
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
    if (s_encode_agent_error (self, code, message) == 0)
        s_queue_send (self, self->agents, routing, routing_size,
                      zmq_msg_data (&self->io->via), self->io->answer_size,
                      NULL, false);
}

void
broker_save_node (broker_t *self, registry_node_t *node)
{
    store_txn_t *txn = broker_txn (self);
    if (!txn)
        return;
    pw_reset (self->scratch);
    registry_node_encode_record (node, self->scratch);
    int rc = store_put (txn, STORE_DB_NODES, node->id, strlen (node->id),
                        pw_data (self->scratch), pw_size (self->scratch));
    s_store_error (self, rc, "a node");
    //  The record holds its last-seen time
    if (rc == 0)
        registry_seen_saved (node);
}

//  Sends the error NOTICE (duplicate_node) to the connection ROUTING at
//  once, past the outbox: a ROUTER with ZMQ_ROUTER_MANDATORY refuses a
//  routing id it no longer knows, so this tells whether the connection is
//  still up. Returns false only when it is gone.
static bool
s_probe_session (broker_t *self, const registry_node_t *node,
                 const char *notice)
{
    if (s_encode_agent_error (self, PROTO_ERR_DUPLICATE_NODE, notice) != 0)
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
        s_log ("node %s: refused a second agent (%s): the node is online "
               "from %s", node->id, theirs, incumbent);
    //  The node's history gets one entry per episode, not per retry
    store_txn_t *txn = quiet_ms > S_DUPLICATE_EPISODE_MS ? broker_txn (self)
                                                          : NULL;
    if (txn) {
        pw_reset (self->scratch);
        pw_map (self->scratch, 9);
        pw_str (self->scratch, "time_ms");
        pw_int (self->scratch, wall_ms);
        pw_str (self->scratch, "event");
        pw_str (self->scratch, "refused_duplicate");
        pw_str (self->scratch, "agent_version");
        pw_str (self->scratch, hello->version);
        pw_str (self->scratch, "hostname");
        pw_str (self->scratch, hello->hostname);
        pw_str (self->scratch, "instance");
        pw_str (self->scratch, hello->instance ? hello->instance : "");
        pw_str (self->scratch, "actions");
        pw_int (self->scratch, 0);
        pw_str (self->scratch, "added");
        pw_array (self->scratch, 0);
        pw_str (self->scratch, "removed");
        pw_array (self->scratch, 0);
        pw_str (self->scratch, "versions");
        pw_array (self->scratch, 0);
        s_store_error (self, nodehist_append (txn, node->id,
                                              pw_data (self->scratch),
                                              pw_size (self->scratch)),
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
    //  Granted only to an agent whose hello named features (an agent
    //  before them refuses a welcome with an unknown key), and not through
    //  relays: a relay of an earlier release decodes each welcome to grant
    //  its agent's topics, and would refuse one with this key
    char *granted [] = { PROTO_FEATURE_RESULTS };
    if (node->via_size == 0
        && proto_hello_has_feature (node->hello, PROTO_FEATURE_RESULTS)) {
        welcome.features = granted;
        welcome.feature_count = 1;
    }
    pw_reset (self->body);
    int rc = proto_msg_encode (&welcome, self->body);
    assert (rc == 0);
    s_send_to_node (self, node, false);
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
    registry_node_t *before = registry_lookup (self->registry, hello->node);
    if (before && s_hello_repeated (self, before, routing, routing_size,
                                    hello, digest, hello_size)) {
        self->counters.repeated_hellos++;
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
    pw_reset (self->scratch);
    //  The known list is lent to the hello for the comparison only: the
    //  registry gives it for good
    if (known)
        hello->backends = (proto_backend_spec_t *) registry_backends_list (
            known, &hello->backend_count);
    bool changed = nodehist_diff (before ? before->hello : NULL, hello,
                                  broker_wall_ms (), self->scratch);
    if (known) {
        hello->backends = NULL;
        hello->backend_count = 0;
    }
    store_txn_t *txn = changed ? broker_txn (self) : NULL;
    if (txn)
        s_store_error (self, nodehist_append (txn, hello->node,
                                              pw_data (self->scratch),
                                              pw_size (self->scratch)),
                       "a node's history");
    registry_node_t *node = registry_hello_declaring (self->registry, msg_p,
                                                      known, routing,
                                                      routing_size, now_ms,
                                                      broker_wall_ms ());
    //  Through relays: the way back, and whose node it now is
    node->via_size = self->io->answer_size;
    memcpy (node->via, zmq_msg_data (&self->io->via), node->via_size);
    relays_on_hello (self, node, path);
    node->hello_digest = digest;
    node->hello_size = hello_size;
    broker_save_node (self, node);
    s_log ("node %s %s (%s, %zu group%s, %zu backend%s)", node->id,
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
    const sched_job_t *job = sched_job (self->sched, in->job);
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
    const sched_job_t *job = sched_job (self->sched, in->job);
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

//  Stores a piece of a cell's output (after the session check): only
//  for a cell of the sending node, at an offset where the agent cuts its
//  pieces (a multiple of PROTO_MAX_CHUNK), within max_output, and, while
//  the job runs, for an attempt the cell was given; else counted. So one
//  agent stores at most max_output per stream and attempt it ran.
static void
s_on_output (broker_t *self, const proto_msg_t *piece)
{
    store_txn_t *txn = broker_txn (self);
    const sched_job_t *job = sched_job (self->sched, piece->job);
    int index = job && piece->step < job->step_count
                    ? sched_job_node_index (job, piece->node)
                    : -1;
    bool known = job ? index >= 0
                     : txn && jobrec_expects (txn, piece->job, piece->step,
                                              piece->node);
    const char *refused = NULL;
    if (!known)
        refused = "no such cell";
    else
    if (piece->offset % PROTO_MAX_CHUNK != 0)
        refused = "not at a piece boundary";
    else
    if (piece->offset + piece->chunk_len > self->config.max_output)
        refused = "past results.max_output";
    else
    if (job
        && piece->attempt
               > job->cells [piece->step * job->expected_count
                             + (size_t) index].attempt)
        refused = "an attempt the step was never given";
    if (refused) {
        self->counters.output_refused++;
        if (self->config.verbose)
            s_log ("refused output of %s step %u attempt %u from node %s at "
                   "%" PRIu64 ": %s", piece->job, piece->step, piece->attempt,
                   piece->node, piece->offset, refused);
        return;
    }
    if (txn)
        s_store_error (self, jobrec_save_output (txn, piece->job, piece->step,
                                                 piece->node, piece->attempt,
                                                 strcmp (piece->stream,
                                                         "stderr") == 0,
                                                 piece->offset, piece->chunk,
                                                 piece->chunk_len),
                       "an output piece");
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
        known = registry_backends_find (self->registry, bytes + at, len);
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
    int64_t submitted_ms = 0, sent_ms = 0;
    bool first = s_result_start (self, in, &submitted_ms, &sent_ms);
    int rc = sched_on_result (self->sched, in, now_ms);
    if (rc < 0 && !sched_job (self->sched, in->job)) {
        //  A late result for a step the broker ended (the job was
        //  cancelled or its node lost): keep what the step printed
        store_txn_t *txn = broker_txn (self);
        int frc = txn ? jobrec_fill_cell (txn, in, self->scratch) : 0;
        if (frc < 0)
            s_store_error (self, frc, "a late result");
        if (frc == 1)
            rc = 1;
    }
    if (rc == 0) {
        metrics_result (self->metrics, sent_ms ? now_ms - sent_ms : -1);
        int64_t duration_ms = in->duration_ms > INT32_MAX
                                  ? INT32_MAX
                                  : (int64_t) in->duration_ms;
        qstats_add (self->run_samples, now_ms, duration_ms);
        //  A result that stands for its started
        if (first)
            qstats_add (self->wait_samples, now_ms,
                        now_ms - duration_ms - submitted_ms);
    }
    //  Acknowledge even unknown results so the agent's spool drains; the
    //  ack goes out after the commit, and not at all when it fails: the
    //  agent keeps the result and sends it again.
    s_ack_add (self, node, in->job, in->step, in->attempt);
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
    metrics_results_batch (self->metrics, in->result_count);
    for (size_t index = 0; index < in->result_count; index++) {
        const proto_msg_t *entry = &in->results [index];
        if (entry->type != PROTO_RESULT) {
            if (!bad++)
                first_bad = entry->message;
            continue;
        }
        if (s_on_result (self, node, entry, now_ms) < 0)
            self->counters.stale++;
        if (self->pass_broken || (self->txn && store_txn_failed (self->txn)))
            break;
    }
    if (bad) {
        self->counters.bad_entries += bad;
        int64_t mono_ms = broker_now_ms ();
        if (!self->bad_entry_logged_ms
            || mono_ms - self->bad_entry_logged_ms >= 60000) {
            self->bad_entry_logged_ms = mono_ms;
            log_warn ("node %s sent %zu bad result entr%s in a results of "
                      "%zu (dropped; %" PRIu64 " in all): %s", node->id, bad,
                      bad == 1 ? "y" : "ies", in->result_count,
                      self->counters.bad_entries, first_bad ? first_bad : "");
        }
    }
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
    //  Errors go back the way the message came (a relay's via frame)
    size_t via_size = zmq_msg_size (&io->via);
    io->answer_size = via_size % KEYS_Z85_LEN == 0 ? via_size : 0;
    const registry_backend_set_t *known = NULL;
    if (s_agent_decode (self, body, body_size, &in, &known, why, sizeof why)
        != 0) {
        self->counters.malformed++;
        if (self->config.verbose)
            s_log ("dropped a malformed agent message: %s", why);
        const char *code = strstr (why, "version") ? PROTO_ERR_VERSION
                                                   : PROTO_ERR_MALFORMED;
        s_send_agent_error (self, routing, routing_size, code, why);
        return 1;
    }
    metrics_agent_message (self->metrics, in->type);
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
        checked = relays_attest (self, routing, routing_size, conn_key,
                                 zmq_msg_data (&io->via), via_size, &path,
                                 &refusal_code, refusal, sizeof refusal);
    }
    if (checked == 0) {
        io->answer_size = path.answer_size;
        if (path.self)
            checked = relays_on_own (self, &path, in, now_ms, &refusal_code,
                                     refusal, sizeof refusal);
        else
        if (via_size)
            checked = auth_agent_check_relayed (self, path.key, path.pool, in,
                                                broker_wall_ms (),
                                                &refusal_code, refusal,
                                                sizeof refusal);
        else
            checked = auth_agent_check (self, &io->body, in,
                                        broker_wall_ms (), &refusal_code,
                                        refusal, sizeof refusal);
    }
    if (checked != 0 || path.self) {
        if (checked != 0 && refusal_code)
            s_send_agent_error (self, routing, routing_size, refusal_code,
                                refusal);
        proto_msg_destroy (&in);
        return 1;
    }
    if (in->type == PROTO_HELLO) {
        s_on_hello (self, routing, routing_size, &path, &in, known, now_ms);
        proto_msg_destroy (&in);
        return 1;
    }
    bool from_agent = in->type == PROTO_HEARTBEAT || in->type == PROTO_ACK
                      || in->type == PROTO_STARTED || in->type == PROTO_RESULT
                      || in->type == PROTO_PROGRESS || in->type == PROTO_OUTPUT
                      || in->type == PROTO_RESULTS || in->type == PROTO_BYE;
    if (!from_agent) {
        self->counters.malformed++;
        s_send_agent_error (self, routing, routing_size, PROTO_ERR_BAD_REQUEST,
                            "agents send hello, heartbeat, ack, started, "
                            "progress, result, results, output or bye");
        proto_msg_destroy (&in);
        return 1;
    }
    registry_node_t *node = registry_session (self->registry, in->node,
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
        self->counters.unknown_node++;
        if (in->type != PROTO_BYE)
            s_send_agent_error (self, routing, routing_size, "unknown_node",
                                "this broker does not know this session: "
                                "send hello");
        proto_msg_destroy (&in);
        return 1;
    }
    registry_touch (node, now_ms, broker_wall_ms ());
    //  Any word renews the node's leases (a heartbeat also brings its load)
    if (in->type == PROTO_HEARTBEAT) {
        node->running = in->running;
        node->queued = in->queued;
    }
    if (in->type != PROTO_BYE)
        sched_on_heartbeat (self->sched, node->id, now_ms);
    int rc = 0;
    switch (in->type) {
        case PROTO_HEARTBEAT:
            break;
        case PROTO_PROGRESS:
            //  Kept in memory by the scheduler; nothing to commit. Those
            //  who watch the job (gridcli --wait) see it move.
            rc = sched_on_progress (self->sched, in, now_ms);
            if (rc == 0)
                s_job_changed (self, in->job);
            break;
        case PROTO_ACK:
            rc = sched_on_ack (self->sched, in->job, in->step, in->attempt,
                               in->node, now_ms);
            break;
        case PROTO_STARTED: {
            int64_t submitted_ms = 0;
            bool first = s_first_start (self, in, &submitted_ms);
            rc = sched_on_started (self->sched, in->job, in->step,
                                   in->attempt, in->node, now_ms);
            if (rc == 0 && first)
                qstats_add (self->wait_samples, now_ms, now_ms - submitted_ms);
            break;
        }
        case PROTO_RESULT:
            rc = s_on_result (self, node, in, now_ms);
            break;
        case PROTO_RESULTS:
            s_on_results (self, node, in, now_ms);
            break;
        case PROTO_OUTPUT: {
            s_on_output (self, in);
            //  Acknowledged once committed (not when the commit fails:
            //  the agent sends it again), or refused for good: either way
            //  the agent may drop it from its spool
            proto_msg_t ack;
            memset (&ack, 0, sizeof ack);
            ack.type = PROTO_OUTPUT_ACK;
            ack.job = in->job;
            ack.step = in->step;
            ack.attempt = in->attempt;
            ack.stream = in->stream;
            ack.offset = in->offset;
            pw_reset (self->body);
            int erc = proto_msg_encode (&ack, self->body);
            assert (erc == 0);
            s_send_to_node (self, node, true);
            break;
        }
        case PROTO_BYE:
            s_log ("node %s said bye (%s)", node->id,
                   in->reason ? in->reason : "");
            //  A graceful stop hands its work back first: nothing to wait for.
            registry_set_offline (node, now_ms);
            node->offline_reported = true;
            broker_save_node (self, node);
            sched_on_node_offline (self->sched, node->id, now_ms);
            break;
        default:
            break;
    }
    if (rc < 0)
        self->counters.stale++;
    int weight = in->type == PROTO_RESULTS ? (int) in->result_count : 1;
    proto_msg_destroy (&in);
    return weight;
}

//  Receives the next message of the agent socket into self->io's frames.
//  Returns 1 for a routing id and a body, 0 for a message of any other
//  shape (read whole, counted malformed), -1 when nothing was read: with
//  errno EAGAIN when the socket is empty.
static int
s_agent_recv (broker_t *self, void *handle)
{
    broker_io_t *io = self->io;
    io->answer_size = 0;
    if (zmq_msg_recv (&io->routing, handle, ZMQ_DONTWAIT) < 0)
        return -1;
    //  A ROUTER always prepends the routing id, so a lone frame cannot
    //  come from a peer; it is malformed all the same.
    bool framed = zmq_msg_more (&io->routing)
                  && zmq_msg_recv (&io->body, handle, ZMQ_DONTWAIT) >= 0;
    if (framed && !zmq_msg_more (&io->body))
        return 1;
    //  A relay's message: the via frame, then the body (relays.h). A
    //  via frame is 1 to RELAYS_MAX_PATH keys; anything else in front of
    //  the body (an empty delimiter, as a REQ sends) is malformed.
    if (framed) {
        zmq_msg_move (&io->via, &io->body);
        framed = zmq_msg_recv (&io->body, handle, ZMQ_DONTWAIT) >= 0;
        size_t via_size = zmq_msg_size (&io->via);
        if (framed && !zmq_msg_more (&io->body) && via_size > 0
            && via_size % KEYS_Z85_LEN == 0 && via_size <= RELAYS_VIA_MAX)
            return 1;
    }
    //  Parts of one message arrive together: read the rest of it.
    zmq_msg_t *part = framed ? &io->body : &io->routing;
    while (zmq_msg_more (part)
           && zmq_msg_recv (&io->body, handle, ZMQ_DONTWAIT) >= 0)
        part = &io->body;
    self->counters.malformed++;
    return 0;
}

//  Lets go of the frames of the last message, so libzmq may reuse the
//  buffers they point into.
static void
s_agent_release (broker_io_t *io)
{
    zmq_msg_close (&io->routing);
    zmq_msg_close (&io->via);
    zmq_msg_close (&io->body);
    zmq_msg_init (&io->routing);
    zmq_msg_init (&io->via);
    zmq_msg_init (&io->body);
}

//  One pass over the agent socket: until it is empty, AGENT_PASS_MAX
//  messages or AGENT_PASS_MS, then the commit and the sends. A commit
//  costs a disk flush, so under load a pass takes in what it can: at
//  512 messages per pass the broker committed 66,000 to 78,000 results
//  per second (1,000 agents), at 8,192 about 135,000. The time bound
//  keeps replies and timers from waiting behind a long pass. Returns
//  true when it found the socket empty.
static bool
s_agents_pass (broker_t *self)
{
    int64_t start_ms = broker_now_ms ();
    int64_t now_ms = start_ms;
    void *handle = zsock_resolve (self->agents);
    bool empty = false;
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
        count += rc > 0 ? s_on_agent_message (self, now_ms) : 1;
        s_agent_release (self->io);
        broker_drain (self);
        if (self->pass_broken || (self->txn && store_txn_failed (self->txn)))
            s_pass_end (self);
        //  A failed commit rests the agent socket: read no more now
        if (self->agents_resting)
            break;
    }
    //  Everything queued when the pass began has been read
    if (empty)
        self->io->agents_empty_ms = start_ms;
    s_pass_end (self);
    return empty;
}

static int
s_on_agents (zloop_t *loop, zsock_t *socket, void *arg)
{
    s_agents_pass ((broker_t *) arg);
    return 0;
}

//  ---------------------------------------------------------------------
//  Client socket

static bool
s_is_mutation (const char *type)
{
    return strcmp (type, "job.submit") == 0 || strcmp (type, "job.cancel") == 0
           || strcmp (type, "job.delete") == 0 || strcmp (type, "job.retry") == 0
           || strcmp (type, "dlq.retry") == 0 || strcmp (type, "dlq.purge") == 0
           || (strncmp (type, "schedule.", 9) == 0
               && strcmp (type, "schedule.list") != 0
               && strcmp (type, "schedule.get") != 0);
}

//  Keeps REPLY to request ID, whose body has digest DIGEST, for retries:
//  in memory (digest, then the reply) and, for a submit, in the store
//  (jobrec.h's request record).
static void
s_remember_reply (broker_t *self, const char *id, const char *type,
                  const uint8_t *digest, const pw_t *reply)
{
    if (zhashx_lookup (self->replies, id))
        return;
    if (zhashx_size (self->replies) >= REPLY_CACHE_MAX) {
        char *oldest = (char *) zlistx_first (self->reply_order);
        if (oldest) {
            zhashx_delete (self->replies, oldest);
            zlistx_delete (self->reply_order, zlistx_cursor (self->reply_order));
        }
    }
    zchunk_t *chunk = zchunk_new (digest, JOBREC_DIGEST_LEN);
    zchunk_extend (chunk, pw_data (reply), pw_size (reply));
    zhashx_insert (self->replies, id, chunk);
    zlistx_add_end (self->reply_order, strdup (id));
    zlistx_add_end (self->pass_replies, strdup (id));
    if (strcmp (type, "job.submit") != 0 || !self->txn)
        return;
    size_t size = 8 + 1 + JOBREC_DIGEST_LEN + pw_size (reply);
    uint8_t *record = (uint8_t *) malloc (size);
    assert (record);
    uint64_t stamp = (uint64_t) broker_wall_ms ();
    for (int index = 0; index < 8; index++)
        record [index] = (uint8_t) (stamp >> (56 - 8 * index));
    record [8] = JOBREC_DIGEST_LEN;
    memcpy (record + 9, digest, JOBREC_DIGEST_LEN);
    memcpy (record + 9 + JOBREC_DIGEST_LEN, pw_data (reply), pw_size (reply));
    s_store_error (self, store_put (self->txn, STORE_DB_REQUESTS, id,
                                    strlen (id), record, size),
                   "a request id");
    free (record);
}

//  The reply remembered for request ID, from memory or the store: 1 with
//  the reply in *REPLY_P / *SIZE_P (valid until the pass ends) and, when
//  it was kept with one, the request's digest in *DIGEST_P (else NULL);
//  0 when none is kept.
static int
s_recall_reply (broker_t *self, const char *id, const void **reply_p,
                size_t *size_p, const uint8_t **digest_p)
{
    zchunk_t *cached = (zchunk_t *) zhashx_lookup (self->replies, id);
    if (cached) {
        *digest_p = zchunk_data (cached);
        *reply_p = zchunk_data (cached) + JOBREC_DIGEST_LEN;
        *size_p = zchunk_size (cached) - JOBREC_DIGEST_LEN;
        return 1;
    }
    const void *stored = NULL;
    size_t stored_len = 0;
    if (!broker_txn (self)
        || store_get (self->txn, STORE_DB_REQUESTS, id, strlen (id), &stored,
                      &stored_len) != 0
        || stored_len <= 8)
        return 0;
    const uint8_t *bytes = (const uint8_t *) stored + 8;
    size_t len = stored_len - 8;
    *digest_p = NULL;
    if (bytes [0] == JOBREC_DIGEST_LEN) {
        if (len <= 1 + JOBREC_DIGEST_LEN)
            return 0;
        *digest_p = bytes + 1;
        bytes += 1 + JOBREC_DIGEST_LEN;
        len -= 1 + JOBREC_DIGEST_LEN;
    }
    *reply_p = bytes;
    *size_p = len;
    return 1;
}

//  Queues the reply DATA/SIZE to the client whose envelope is ENVELOPE
//  on SOCKET, sent after the pass commits. REQUEST is the message it
//  answers, ID its request id, WROTE whether handling it changed the store.
static void
s_reply (broker_t *self, zsock_t *socket, zmsg_t *envelope, const void *data,
         size_t size, zmsg_t *request, const char *id, bool wrote)
{
    s_pending_t *pending = (s_pending_t *) zmalloc (sizeof (s_pending_t));
    pending->socket = socket;
    pending->reply = zmsg_dup (envelope);
    zmsg_addmem (pending->reply, data, size);
    pending->request = wrote ? zmsg_dup (request) : NULL;
    pending->id = strdup (id ? id : "");
    pending->wrote = wrote;
    zlistx_add_end (self->outbox, pending);
}

//  A client request is the routing id, at most one empty delimiter (REQ
//  adds it, a DEALER need not) and one body frame. A message with more
//  frames is refused whole and counted malformed: its extra frames are
//  never echoed, so the error goes back to the routing id (and delimiter)
//  alone. Returns true when MSG was refused.
static bool
s_client_envelope_refused (broker_t *self, zmsg_t *msg)
{
    size_t frames = zmsg_size (msg);
    zframe_t *routing = zmsg_first (msg);
    zframe_t *second = zmsg_next (msg);
    bool delimited = second && zframe_size (second) == 0;
    if (frames == 2 || (frames == 3 && delimited))
        return false;
    self->counters.malformed++;
    zmsg_t *envelope = zmsg_new ();
    zmsg_addmem (envelope, zframe_data (routing), zframe_size (routing));
    if (delimited)
        zmsg_addmem (envelope, NULL, 0);
    char why [160];
    snprintf (why, sizeof why, "a request is one body frame after the "
              "envelope (the routing id and at most one empty delimiter); "
              "this message had %zu frames", frames);
    pw_t *reply = pw_new ();
    proto_reply_error (reply, "", PROTO_ERR_MALFORMED, why, NULL, 0);
    s_reply (self, self->client, envelope, pw_data (reply), pw_size (reply),
             msg, "", false);
    pw_destroy (&reply);
    zmsg_destroy (&envelope);
    return true;
}

//  Handles one client request, whatever face it came through: BODY is its
//  body frame, *ENVELOPE_P (taken) the frames its reply goes back with on
//  SOCKET, CALLER who sent it, and MSG the whole message as it came (kept
//  to run again should the pass's commit fail on a map that grows).
static void
s_on_request (broker_t *self, zsock_t *socket, zmsg_t **envelope_p,
              zframe_t *body, const auth_caller_t *caller, zmsg_t *msg)
{
    zmsg_t *envelope = *envelope_p;
    *envelope_p = NULL;
    //  What this request writes is told apart from what came before it
    broker_drain (self);
    size_t changes_before = store_txn_changes (self->txn);
    bool had_txn = self->txn != NULL;
    proto_request_t *request = NULL;
    const char *code = NULL;
    char *id = NULL;
    char why [512];
    pw_t *reply = pw_new ();
    const void *answer = NULL;
    size_t answer_size = 0;
    bool same_pass = false;
    bool decoded = proto_request_decode (zframe_data (body), zframe_size (body),
                                         &request, &code, &id, why,
                                         sizeof why) == 0;
    if (decoded)
        metrics_request (self->metrics, request->type);
    if (!decoded) {
        self->counters.malformed++;
        proto_reply_error (reply, id ? id : "", code, why, NULL, 0);
    }
    else if (auth_client_handle (self, caller, request, reply))
        ;   //  Refused by role or allowlist, or a key.* or token.* request
    else {
        bool mutation = s_is_mutation (request->type);
        //  A retry carries the same request: what it says is compared by
        //  the digest of its canonical form (key order does not matter).
        uint8_t digest [JOBREC_DIGEST_LEN];
        if (mutation) {
            pw_reset (self->scratch);
            pw_pv_canonical (self->scratch, request->body);
            jobrec_digest (pw_data (self->scratch), pw_size (self->scratch),
                           digest);
        }
        const void *kept = NULL;
        size_t kept_size = 0;
        const uint8_t *kept_digest = NULL;
        if (mutation
            && s_recall_reply (self, request->id, &kept, &kept_size,
                               &kept_digest)) {
            //  The same request twice in one pass: it stands or falls
            //  with the first
            same_pass = zlistx_find (self->pass_replies, request->id) != NULL;
            if (!kept_digest
                || memcmp (kept_digest, digest, JOBREC_DIGEST_LEN) == 0) {
                answer = kept;
                answer_size = kept_size;
            }
            else
                proto_reply_error (reply, request->id, PROTO_ERR_CONFLICT,
                                   "this request id was already used for "
                                   "another request: a retry must resend "
                                   "the same request, a new request needs "
                                   "a new id", NULL, 0);
        }
        else {
            api_handle (self, request, reply);
            broker_drain (self);
            if (mutation)
                s_remember_reply (self, request->id, request->type, digest,
                                  reply);
        }
    }
    if (self->park_job) {
        //  job.watch: answered when the job changes (s_watch_wake)
        if (zlistx_size (self->watchers) < WATCHERS_MAX) {
            s_watcher_t *watcher = (s_watcher_t *) zmalloc (sizeof *watcher);
            watcher->socket = socket;
            watcher->envelope = envelope;
            envelope = NULL;
            watcher->id = strdup (request->id);
            snprintf (watcher->job, sizeof watcher->job, "%s", self->park_job);
            watcher->after = self->park_after;
            watcher->deadline_ms = broker_now_ms () + self->park_timeout_ms;
            zlistx_add_end (self->watchers, watcher);
        }
        else
            api_write_watch (self, request->id, self->park_job,
                             broker_job_version (self, self->park_job),
                             false, reply);
        zstr_free (&self->park_job);
        if (!envelope) {
            pw_destroy (&reply);
            free (id);
            proto_request_destroy (&request);
            return;
        }
    }
    if (!answer) {
        answer = pw_data (reply);
        answer_size = pw_size (reply);
    }
    //  A reply past ZMQ_MAXMSGSIZE would be dropped by the client's socket
    //  (which closes the connection: the client hears nothing and retries
    //  in vain); it gets an error that says why instead. The HTTP face
    //  has no such bound.
    if (socket == self->client && answer_size > PROTO_MAX_FRAME) {
        char too_large [400];
        snprintf (too_large, sizeof too_large,
                  "the reply is %.1f MiB, more than the %d MiB a message may "
                  "hold: ask for less (a lower limit, events after a seq, "
                  "one node's output with job.output), or use the HTTP "
                  "API, whose replies have no such bound",
                  (double) answer_size / (1024 * 1024),
                  PROTO_MAX_FRAME / (1024 * 1024));
        log_warn ("%s: %s", request ? request->type : "a request",
                  too_large);
        pw_reset (reply);
        proto_reply_error (reply, request ? request->id : id ? id : "",
                           PROTO_ERR_TOO_LARGE, too_large, NULL, 0);
        answer = pw_data (reply);
        answer_size = pw_size (reply);
    }
    //  A transaction begun by this request starts from zero changes
    bool wrote = self->pass_broken || same_pass
                 || (self->txn
                     && (store_txn_changes (self->txn)
                             > (had_txn ? changes_before : 0)
                         || store_txn_failed (self->txn)));
    s_reply (self, socket, envelope, answer, answer_size, msg,
             request ? request->id : id, wrote);
    pw_destroy (&reply);
    free (id);
    proto_request_destroy (&request);
    zmsg_destroy (&envelope);
}

//  A request on the client ROUTER: the routing id, at most one empty
//  delimiter and the body, sent by the CURVE key of its body frame.
static void
s_on_client_message (broker_t *self, zmsg_t *msg)
{
    //  Everything before the last frame is the envelope (REQ adds an
    //  empty delimiter; a DEALER may not).
    zframe_t *body = zmsg_last (msg);
    if (!body || zmsg_size (msg) < 2) {
        self->counters.malformed++;
        return;
    }
    if (s_client_envelope_refused (self, msg))
        return;
    zmsg_t *envelope = zmsg_dup (msg);
    zframe_t *last = zmsg_last (envelope);
    zmsg_remove (envelope, last);
    zframe_destroy (&last);
    auth_caller_t caller = { NULL, NULL, false, false };
    if (!self->config.auth.insecure)
        caller.key = zframe_meta (body, "User-Id");
    s_on_request (self, self->client, &envelope, body, &caller, msg);
}

//  The HTTP face's probe (GET /healthz, /readyz): answered at once, from
//  the reactor, with what readiness needs.
static void
s_http_probe (broker_t *self, zmsg_t **envelope_p)
{
    pw_t *probe = pw_new ();
    bool failing = self->storage.code != 0;
    pw_map (probe, 3 + (failing ? 1 : 0));
    pw_str (probe, "maintenance");
    pw_bool (probe, self->maintenance);
    pw_str (probe, "storage");
    pw_str (probe, !failing ? "ok"
                   : self->storage.code == STORE_EFULL ? "full" : "error");
    pw_str (probe, "uptime_ms");
    pw_int (probe, broker_now_ms () - self->started_ms);
    if (failing) {
        pw_str (probe, "error");
        pw_str (probe, self->storage.error);
    }
    zmsg_addmem (*envelope_p, pw_data (probe), pw_size (probe));
    if (zmsg_send (envelope_p, self->http) != 0)
        self->counters.send_failed++;
    zmsg_destroy (envelope_p);
    pw_destroy (&probe);
}

//  A request from the HTTP face's bridge (http.h): the routing id, the
//  bridge's tag, the kind (HTTP_KIND_REQUEST or HTTP_KIND_PROBE), the
//  bearer token ("" when none was sent) and the body. The reply goes
//  back with the routing id and the tag.
static void
s_on_http_message (broker_t *self, zmsg_t *msg)
{
    if (zmsg_size (msg) != 5) {
        self->counters.malformed++;
        return;
    }
    zframe_t *routing = zmsg_first (msg);
    zframe_t *tag = zmsg_next (msg);
    zframe_t *kind = zmsg_next (msg);
    zframe_t *token = zmsg_next (msg);
    zframe_t *body = zmsg_next (msg);
    zmsg_t *envelope = zmsg_new ();
    zmsg_addmem (envelope, zframe_data (routing), zframe_size (routing));
    zmsg_addmem (envelope, zframe_data (tag), zframe_size (tag));
    if (zframe_streq (kind, HTTP_KIND_PROBE)) {
        s_http_probe (self, &envelope);
        return;
    }
    //  A token is 69 bytes: anything much longer is no token at all
    char text [HTTP_MAX_TOKEN + 1];
    size_t size = zframe_size (token);
    if (size > HTTP_MAX_TOKEN)
        size = 0;
    memcpy (text, zframe_data (token), size);
    text [size] = 0;
    auth_caller_t caller = { NULL, size ? text : NULL, true,
                             zframe_streq (kind, HTTP_KIND_PUBLIC) };
    if (zframe_size (token) > HTTP_MAX_TOKEN)
        caller.token = "-";
    s_on_request (self, self->http, &envelope, body, &caller, msg);
}

static void
s_on_face_message (broker_t *self, zsock_t *socket, zmsg_t *msg)
{
    if (socket == self->http)
        s_on_http_message (self, msg);
    else
        s_on_client_message (self, msg);
}

static int
s_on_client (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_t *self = (broker_t *) arg;
    for (int count = 0; count < CLIENT_BATCH_MAX; count++) {
        zmsg_t *msg = zmsg_recv (socket);
        if (!msg)
            break;
        s_on_face_message (self, socket, msg);
        zmsg_destroy (&msg);
        //  A transaction that failed (a full map) ends the pass here, so
        //  that the requests after it get a fresh one
        if (self->pass_broken || (self->txn && store_txn_failed (self->txn)))
            s_pass_end (self);
    }
    s_pass_end (self);
    return 0;
}

//  ---------------------------------------------------------------------
//  Tick: liveness and scheduler deadlines

//  A node that stays offline past the grace has its in-flight work
//  declared lost; one that comes back within it reports what it ran
//  (results from its spool, or `interrupted` after a restart).
static void
s_report_offline (broker_t *self, int64_t now_ms)
{
    const char **ids = NULL;
    size_t count = registry_overdue (self->registry, now_ms,
                                     self->config.offline_grace_ms, &ids);
    for (size_t index = 0; index < count; index++) {
        if (self->config.verbose)
            s_log ("node %s: offline past the grace, its running steps are lost",
                   ids [index]);
        sched_on_node_offline (self->sched, ids [index], now_ms);
    }
    free (ids);
}

//  The time by which the tick judges deadlines (acks, heartbeats, task
//  and job timeouts, backoffs). Acks, results and heartbeats that wait
//  unread in the agent socket were sent in time: a broker that has
//  fallen behind must not count its own backlog against its agents. So
//  a deadline passes only once a pass that began after it found the
//  agent socket empty; and at most BACKLOG_LAG_MAX_MS late, so that a
//  flood delays the timers but cannot stop them.
static int64_t
s_deadline_clock (broker_t *self, int64_t now_ms)
{
    int64_t clock_ms = self->io->agents_empty_ms;
    if (clock_ms < now_ms - BACKLOG_LAG_MAX_MS)
        clock_ms = now_ms - BACKLOG_LAG_MAX_MS;
    return clock_ms < now_ms ? clock_ms : now_ms;
}

//  Saves the last-seen times of the nodes heard from, at or before
//  BEFORE_MS, since theirs were saved: at most LIMIT of them, in the
//  pass's transaction (nodeseen.h). Returns how many.
static size_t
s_save_seen (broker_t *self, int64_t before_ms, size_t limit)
{
    if (!nodeseen_due (self->registry, before_ms))
        return 0;
    store_txn_t *txn = broker_txn (self);
    if (!txn)
        return 0;
    int64_t saved = nodeseen_save (txn, self->registry, before_ms, limit);
    if (saved < 0) {
        s_store_error (self, (int) saved, "last-seen times");
        return 0;
    }
    return (size_t) saved;
}

//  Warns once when the store passes STORE_NEARLY_FULL percent of
//  store.max_size (again after it fell below STORE_REARM_PERCENT).
static void
s_check_room (broker_t *self, int64_t now_ms)
{
    //  While commits fail, a small write now and then finds out when the
    //  room is back even if nothing else writes
    broker_storage_t *storage = &self->storage;
    if (storage->code && now_ms - storage->failed_ms >= STORE_PROBE_MS
        && now_ms - storage->written_ms >= STORE_PROBE_MS && broker_txn (self)) {
        uint8_t stamp [8];
        uint64_t wall_ms = (uint64_t) broker_wall_ms ();
        for (int index = 0; index < 8; index++)
            stamp [index] = (uint8_t) (wall_ms >> (56 - 8 * index));
        store_put (self->txn, STORE_DB_META, META_PROBE, strlen (META_PROBE),
                   stamp, sizeof stamp);
    }
    store_info_t info;
    store_info (self->store, &info);
    if (info.max_bytes == 0)
        return;
    double percent = info.used_bytes * 100.0 / (double) info.max_bytes;
    if (!self->storage.warned && percent >= STORE_NEARLY_FULL) {
        self->storage.warned = true;
        log_warn ("store: %.0f%% of store.max_size used (%zu of %zu MiB): "
               "past 95%% new jobs are refused; purge old jobs or raise "
               "store.max_size", percent, info.used_bytes >> 20,
               info.max_bytes >> 20);
    }
    else
    if (self->storage.warned && percent < STORE_REARM_PERCENT)
        self->storage.warned = false;
}

static int
s_on_tick (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    //  Input first: zloop runs timers before readers, and a busy agent
    //  socket would otherwise hold the answers to the deadlines below.
    for (int pass = 0; pass < TICK_PASSES && !self->agents_resting; pass++)
        if (s_agents_pass (self))
            break;
    int64_t now_ms = broker_now_ms ();
    int64_t deadline_ms = s_deadline_clock (self, now_ms);
    const char **offline = NULL;
    size_t count = registry_expire (self->registry, deadline_ms,
                                    self->config.heartbeat_ms
                                        * self->config.missed_heartbeats,
                                    &offline);
    for (size_t index = 0; index < count; index++) {
        s_log ("node %s is offline (no heartbeat for %" PRId64 " ms)",
               offline [index],
               self->config.heartbeat_ms * self->config.missed_heartbeats);
        registry_node_t *node = registry_lookup (self->registry, offline [index]);
        if (node)
            broker_save_node (self, node);
        //  Any-node steps it holds go elsewhere now, not after the grace
        sched_on_node_down (self->sched, offline [index], deadline_ms);
    }
    free (offline);
    //  Last-seen times lag at most last_seen_save, plus a pass, plus two
    //  heartbeats (nodeseen.h)
    if (now_ms >= self->next_seen_save_ms) {
        int64_t every_ms = self->config.last_seen_save_ms;
        every_ms = every_ms < NODESEEN_EVERY_MS ? every_ms : NODESEEN_EVERY_MS;
        self->next_seen_save_ms = now_ms + every_ms;
        s_save_seen (self, now_ms - self->config.last_seen_save_ms,
                     NODESEEN_BATCH);
    }
    relays_tick (self, now_ms);
    s_report_offline (self, deadline_ms);
    s_check_room (self, now_ms);
    if (self->hold_until_ms && now_ms >= self->hold_until_ms) {
        self->hold_until_ms = 0;
        if (!self->maintenance)
            sched_set_paused (self->sched, false);
    }
    //  Every tick, not only at deadlines: it also admits queued jobs.
    sched_tick (self->sched, deadline_ms);
    int64_t retention_ms = self->config.retention_ms;
    if (self->config.dlq_retention_ms > 0
        && (retention_ms <= 0 || self->config.dlq_retention_ms < retention_ms))
        retention_ms = self->config.dlq_retention_ms;
    if (retention_ms > 0 && now_ms >= self->next_sweep_ms) {
        //  Sweep every minute, or more often for a short retention.
        int64_t every_ms = retention_ms / 2;
        every_ms = every_ms < 1000 ? 1000 : every_ms > 60000 ? 60000 : every_ms;
        self->next_sweep_ms = now_ms + every_ms;
        size_t purged = broker_sweep (self, broker_wall_ms (), 1000);
        if (purged)
            s_log ("purged %zu finished job%s older than the retention",
                   purged, purged == 1 ? "" : "s");
    }
    s_pass_end (self);
    return 0;
}

//  ---------------------------------------------------------------------
//  Maintenance and retention



void
broker_set_maintenance (broker_t *self, bool on)
{
    self->maintenance = on;
    sched_set_paused (self->sched, on || self->hold_until_ms != 0);
    store_txn_t *txn = broker_txn (self);
    if (txn)
        s_store_error (self, store_put (txn, STORE_DB_META, CTX_META_MAINTENANCE,
                                        strlen (CTX_META_MAINTENANCE),
                                        on ? "1" : "0", 1),
                       "the maintenance flag");
    s_log (on ? "maintenance: no new jobs are admitted; running jobs finish"
              : "maintenance ended: jobs are admitted again");
}

//  Wall-clock ms encoded in a job id ("j-" + 12 hex digits), or -1.
static int64_t
s_job_id_ms (const void *key, size_t key_len)
{
    if (key_len < 14 || memcmp (key, "j-", 2) != 0)
        return -1;
    int64_t ms = 0;
    for (size_t index = 2; index < 14; index++) {
        char c = ((const char *) key) [index];
        int digit = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0)
            return -1;
        ms = ms * 16 + digit;
    }
    return ms;
}

size_t
broker_sweep (broker_t *self, int64_t wall_ms, size_t limit)
{
    store_txn_t *txn = broker_txn (self);
    if (txn && self->config.dlq_retention_ms > 0) {
        int purged = dlq_purge (txn, NULL,
                                wall_ms - self->config.dlq_retention_ms);
        if (purged > 0)
            s_log ("dead-letter: purged %d entr%s older than the dlq "
                   "retention", purged, purged == 1 ? "y" : "ies");
    }
    if (!txn || self->config.retention_ms <= 0)
        return 0;
    int64_t cutoff = wall_ms - self->config.retention_ms;
    //  Ids sort by submission time: walk from the oldest and stop at the
    //  first job submitted after the cutoff. Collect first, delete after.
    zlistx_t *doomed = zlistx_new ();
    zlistx_set_destructor (doomed, (zlistx_destructor_fn *) zstr_free);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_JOBS);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0 && zlistx_size (doomed) < limit) {
        int64_t submitted = s_job_id_ms (k, k_len);
        if (submitted < 0 || submitted > cutoff)
            break;
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0) {
            const pv_t *header = pv_doc_root (doc);
            int status = jobrec_header_status (header);
            int64_t updated = 0;
            pv_get_int (pv_map_get (header, "updated_at_ms"), &updated);
            if (status >= 0 && sched_job_status_final ((sched_job_status_t) status)
                && updated <= cutoff && k_len <= JOB_ID_LEN)
                zlistx_add_end (doomed, zsys_sprintf ("%.*s", (int) k_len,
                                                      (const char *) k));
            //  A job with dead-letter entries stays until they go: a
            //  retry needs its spec
            char *last = (char *) zlistx_last (doomed);
            if (last && strlen (last) == k_len && memcmp (last, k, k_len) == 0
                && dlq_has_job (txn, last))
                zlistx_delete (doomed, zlistx_cursor (doomed));
        }
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    size_t purged = 0;
    for (char *id = (char *) zlistx_first (doomed); id;
         id = (char *) zlistx_next (doomed))
        if (jobrec_delete (txn, id) == 0)
            purged++;
    zlistx_destroy (&doomed);
    //  Remembered submit replies older than the retention go too.
    zlistx_t *old_requests = zlistx_new ();
    zlistx_set_destructor (old_requests, (zlistx_destructor_fn *) zstr_free);
    cursor = store_cursor_new (txn, STORE_DB_REQUESTS);
    rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                : STORE_EIO;
    while (rc == 0 && zlistx_size (old_requests) < limit) {
        int64_t stamp = 0;
        if (v_len >= 8)
            for (int index = 0; index < 8; index++)
                stamp = stamp << 8 | ((const uint8_t *) v) [index];
        if (v_len < 8 || stamp <= cutoff)
            zlistx_add_end (old_requests, zsys_sprintf ("%.*s", (int) k_len,
                                                        (const char *) k));
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    for (char *id = (char *) zlistx_first (old_requests); id;
         id = (char *) zlistx_next (old_requests))
        store_del (txn, STORE_DB_REQUESTS, id, strlen (id));
    zlistx_destroy (&old_requests);
    return purged;
}

//  ---------------------------------------------------------------------
//  Start-up

static size_t
s_resolve (void *arg, const target_t *target, char ***ids_p)
{
    broker_t *self = (broker_t *) arg;
    return registry_resolve (self->registry, target, ids_p);
}

static size_t
s_unavailable (void *arg, const job_spec_t *spec, sched_not_run_t **list_p)
{
    broker_t *self = (broker_t *) arg;
    return registry_unavailable (self->registry, spec, broker_wall_ms (),
                                 list_p);
}

//  The load figures of a node for any-node claims (sched.h).
static bool
s_node_load (void *arg, const char *id, sched_load_t *load)
{
    broker_t *self = (broker_t *) arg;
    const registry_node_t *node = registry_lookup (self->registry, id);
    if (!node)
        return false;
    load->online = node->online && !node->drained;
    load->slots = node->hello && node->hello->concurrency
                      ? node->hello->concurrency
                      : 1;
    load->running = node->running;
    load->queued = node->queued;
    return true;
}

//  Whether an action may run twice: a query, or declared idempotent.
static bool
s_action_idempotent (void *arg, const char *backend, const char *action)
{
    broker_t *self = (broker_t *) arg;
    const proto_action_spec_t *spec
        = registry_find_action (self->registry, backend, action, true);
    return spec && (!spec->modify || spec->idempotent);
}

static int
s_restore (broker_t *self, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (self->store, false);
    if (!txn) {
        snprintf (err, err_len, "cannot read the store: %s",
                  store_last_error (self->store));
        return -1;
    }
    size_t nodes = 0, resumed = 0, broken = 0;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NODES);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0
            && registry_load (self->registry, pv_doc_root (doc)) == 0)
            nodes++;
        else
            broken++;
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    //  Their last-seen times saved since their records
    nodeseen_restore (txn, self->registry);
    //  Collect unfinished job ids first: loading reads other databases.
    zlistx_t *live = zlistx_new ();
    zlistx_set_destructor (live, (zlistx_destructor_fn *) zstr_free);
    cursor = store_cursor_new (txn, STORE_DB_JOBS);
    rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                : STORE_EIO;
    char newest [JOB_ID_LEN + 1] = "";
    while (rc == 0) {
        //  Keys sort as ids do: the last valid one is the newest
        if (k_len <= JOB_ID_LEN) {
            char id [JOB_ID_LEN + 1];
            memcpy (id, k, k_len);
            id [k_len] = 0;
            if (job_id_valid (id))
                memcpy (newest, id, sizeof newest);
        }
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0) {
            int status = jobrec_header_status (pv_doc_root (doc));
            if (status >= 0 && sched_job_status_final ((sched_job_status_t) status))
                self->finished [status]++;
            else if (status >= 0 && k_len <= JOB_ID_LEN)
                zlistx_add_end (live, zsys_sprintf ("%.*s", (int) k_len,
                                                    (const char *) k));
            else
                broken++;
        }
        else
            broken++;
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    //  New ids never go below the newest stored one, even when the clock
    //  is behind it (stepped back while the broker was down): an id of a
    //  kept job must never be made again, its records would be replaced
    if (*newest) {
        self->last_id_ms = (int64_t) strtoll (newest + 2, NULL, 16);
        self->id_seq = (uint32_t) strtoul (newest + 15, NULL, 16);
    }
    int64_t now_ms = broker_now_ms ();
    char *job_id = (char *) zlistx_first (live);
    while (job_id) {
        sched_job_t *job = NULL;
        if (jobrec_load (txn, job_id, &job) == 0
            && sched_restore (self->sched, &job, now_ms) == 0) {
            zhashx_update (self->live_jobs, job_id, (void *) "");
            resumed++;
        }
        else {
            s_log ("job %s could not be restored from the store", job_id);
            sched_job_destroy (&job);
            broken++;
        }
        job_id = (char *) zlistx_next (live);
    }
    zlistx_destroy (&live);
    const void *flag = NULL;
    size_t flag_len = 0;
    if (store_get (txn, STORE_DB_META, CTX_META_MAINTENANCE,
                   strlen (CTX_META_MAINTENANCE), &flag, &flag_len) == 0
        && flag_len == 1 && *(const char *) flag == '1')
        self->maintenance = true;
    store_abort (&txn);
    //  Queued jobs wait until the known agents have had time to say hello
    //  again; otherwise they would start on an empty registry.
    if (nodes) {
        self->hold_until_ms = broker_now_ms ()
                              + self->config.heartbeat_ms
                                    * self->config.missed_heartbeats;
    }
    sched_set_paused (self->sched, self->maintenance || self->hold_until_ms);
    if (self->maintenance)
        s_log ("in maintenance (gridcli broker resume ends it)");
    if (nodes || resumed || broken)
        s_log ("restored %zu node%s (offline until they say hello) and %zu "
               "unfinished job%s%s", nodes, nodes == 1 ? "" : "s", resumed,
               resumed == 1 ? "" : "s", broken ? "; some records were unreadable" : "");
    //  Restored jobs emit re-deliveries; they wait for the agents' hellos
    //  through the scheduler's ack timeouts.
    s_pass_end (self);
    return 0;
}

//  Reads the node records' drained flags and the maintenance flag back
//  from TXN (a failed commit may have changed them in memory only).
static void
s_reload_flags (broker_t *self, store_txn_t *txn)
{
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NODES);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        pv_doc_t *doc = NULL;
        bool drained = false;
        char *id = zsys_sprintf ("%.*s", (int) k_len, (const char *) k);
        registry_node_t *node = id ? registry_lookup (self->registry, id)
                                   : NULL;
        if (node && pv_doc_decode (v, v_len, &doc, NULL, 0) == 0
            && pv_get_bool (pv_map_get (pv_doc_root (doc), "drained"),
                            &drained) == 0)
            node->drained = drained;
        zstr_free (&id);
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    const void *flag = NULL;
    size_t flag_len = 0;
    self->maintenance = store_get (txn, STORE_DB_META, CTX_META_MAINTENANCE,
                                   strlen (CTX_META_MAINTENANCE), &flag,
                                   &flag_len) == 0
                        && flag_len == 1 && *(const char *) flag == '1';
}

//  Rebuilds the scheduler from the store after a failed commit: every
//  job that was live, or that the failed pass touched, is read back as it
//  stands on disk (a job that is not there is gone; one that is final
//  there stays final) and resumed as after a restart (in-flight steps are
//  re-sent; agents deduplicate them, and re-send results the broker has
//  not acknowledged).
static void
s_reload (broker_t *self)
{
    zlistx_t *ids = zlistx_new ();
    zlistx_set_destructor (ids, (zlistx_destructor_fn *) zstr_free);
    for (void *id = zhashx_first (self->live_jobs); id;
         id = zhashx_next (self->live_jobs))
        zlistx_add_end (ids, strdup ((const char *) zhashx_cursor (self->live_jobs)));
    for (void *id = zhashx_first (self->pass_jobs); id;
         id = zhashx_next (self->pass_jobs)) {
        const char *key = (const char *) zhashx_cursor (self->pass_jobs);
        if (!zhashx_lookup (self->live_jobs, key))
            zlistx_add_end (ids, strdup (key));
    }
    zhashx_purge (self->pass_jobs);
    zhashx_purge (self->live_jobs);
    zhashx_purge (self->event_seq);
    bool paused = sched_paused (self->sched);
    sched_destroy (&self->sched);
    self->sched = sched_new (&self->config.sched, s_resolve, self);
    sched_set_paused (self->sched, paused);
    store_txn_t *txn = store_begin (self->store, false);
    if (!txn) {
        //  Nothing can be read: the jobs come back at the next start
        log_error ("store: cannot read the jobs back: %s",
               store_last_error (self->store));
        zlistx_destroy (&ids);
        return;
    }
    s_reload_flags (self, txn);
    sched_set_paused (self->sched, self->maintenance || self->hold_until_ms);
    int64_t now_ms = broker_now_ms ();
    size_t resumed = 0;
    for (char *id = (char *) zlistx_first (ids); id;
         id = (char *) zlistx_next (ids)) {
        sched_job_t *job = NULL;
        if (jobrec_load (txn, id, &job) == 0
            && !sched_job_status_final (job->status)
            && sched_restore (self->sched, &job, now_ms) == 0) {
            zhashx_update (self->live_jobs, id, (void *) "");
            resumed++;
        }
        sched_job_destroy (&job);
    }
    store_abort (&txn);
    zlistx_destroy (&ids);
    //  Tokens, too, are what the store holds
    if (self->auth)
        token_store_reload (auth_tokens (self->auth), self->store);
    if (self->config.verbose)
        s_log ("store: %zu live job%s read back from the store", resumed,
               resumed == 1 ? "" : "s");
}

static zsock_t *
s_bind (auth_t *auth, int type, const char *domain, const char *endpoint,
        char *err, size_t err_len)
{
    zsock_t *socket = zsock_new (type);
    if (!socket) {
        snprintf (err, err_len, "cannot create a socket");
        return NULL;
    }
    zsock_set_maxmsgsize (socket, PROTO_MAX_FRAME);
    zsock_set_sndhwm (socket, 100000);
    zsock_set_rcvhwm (socket, 100000);
    zsock_set_linger (socket, 1000);
    zsock_set_handshake_ivl (socket, 10000);
    //  A registration storm must not overflow the listen queue (each
    //  dropped connection waits a reconnect interval).
    zsock_set_backlog (socket, 4096);
    //  ZMTP heartbeats only where no application heartbeat exists: with
    //  thousands of agents, libzmq's per-message timer cancels in its I/O
    //  thread cost more than all the rest (BENCHMARKS.md). Agents' own
    //  heartbeats carry liveness; agents still ping the broker themselves.
    if (strcmp (domain, KEYS_DOMAIN_CLIENTS) == 0) {
        zsock_set_heartbeat_ivl (socket, 5000);
        zsock_set_heartbeat_timeout (socket, 15000);
    }
    if (type == ZMQ_ROUTER) {
        zsock_set_sndtimeo (socket, 0);    //  Never block the loop on a slow peer
        zsock_set_rcvtimeo (socket, 0);    //  Read until empty, then return
    }
    if (auth_secure_socket (auth, socket, domain, err, err_len) != 0) {
        zsock_destroy (&socket);
        return NULL;
    }
    if (zsock_bind (socket, "%s", endpoint) < 0) {
        snprintf (err, err_len, "cannot bind %s: %s", endpoint,
                  zmq_strerror (zmq_errno ()));
        zsock_destroy (&socket);
    }
    return socket;
}

broker_t *
broker_new (const broker_config_t *config, char *err, size_t err_len)
{
    broker_t *self = (broker_t *) zmalloc (sizeof (broker_t));
    broker_config_copy (&self->config, config);
    self->started_ms = broker_now_ms ();
    self->outbox = zlistx_new ();
    zlistx_set_destructor (self->outbox,
                           (zlistx_destructor_fn *) s_pending_destroy);
    self->io = s_io_new ();
    self->scratch = pw_new ();
    self->body = pw_new ();
    self->event_seq = zhashx_new ();
    zhashx_set_destructor (self->event_seq, (zhashx_destructor_fn *) zstr_free);
    self->replies = zhashx_new ();
    zhashx_set_destructor (self->replies, (zhashx_destructor_fn *) zchunk_destroy);
    self->reply_order = zlistx_new ();
    zlistx_set_destructor (self->reply_order, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_comparator (self->reply_order, (zlistx_comparator_fn *) strcmp);
    self->live_jobs = zhashx_new ();
    self->pass_jobs = zhashx_new ();
    self->watchers = zlistx_new ();
    zlistx_set_destructor (self->watchers,
                           (zlistx_destructor_fn *) s_watcher_destroy);
    self->job_versions = zhashx_new ();
    zhashx_set_destructor (self->job_versions,
                           (zhashx_destructor_fn *) zstr_free);
    self->pass_versions = zhashx_new ();
    zhashx_set_destructor (self->pass_versions,
                           (zhashx_destructor_fn *) zstr_free);
    self->pass_replies = zlistx_new ();
    zlistx_set_destructor (self->pass_replies, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_comparator (self->pass_replies, (zlistx_comparator_fn *) strcmp);
    self->pass_logs = zlistx_new ();
    zlistx_set_destructor (self->pass_logs, (zlistx_destructor_fn *) zstr_free);
    //  Tables looked up by job id several times per result
    zhashx_set_key_hasher (self->event_seq, id_hash);
    zhashx_set_key_hasher (self->live_jobs, id_hash);
    zhashx_set_key_hasher (self->pass_jobs, id_hash);
    zhashx_set_key_hasher (self->job_versions, id_hash);
    zhashx_set_key_hasher (self->pass_versions, id_hash);
    self->registry = registry_new ();
    self->sched = sched_new (&self->config.sched, s_resolve, self);
    sched_set_unavailable (self->sched, s_unavailable, self);
    sched_set_limits (self->sched, self->config.limits,
                      self->config.limit_count);
    self->wait_samples = qstats_new ();
    self->run_samples = qstats_new ();
    self->metrics = metrics_new ();
    assert (self->metrics);
    self->node_stats = zhashx_new ();
    zhashx_set_destructor (self->node_stats, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_key_hasher (self->node_stats, id_hash);
    if (self->sched)
        sched_set_fleet (self->sched, s_node_load, s_action_idempotent, self);
    self->schedules = zhashx_new ();
    zhashx_set_destructor (self->schedules,
                           (zhashx_destructor_fn *) schedule_destroy);
    //  One broker per data dir: two would interleave their writes.
    self->lock = store_lock (self->config.data_dir, "gridbroker", "data dir",
                             err, err_len);
    if (!self->lock) {
        broker_destroy (&self);
        return NULL;
    }
    self->store = store_open (self->config.data_dir, self->config.map_bytes,
                              self->config.max_map_bytes, err, err_len);
    if (!self->store || s_restore (self, err, err_len) != 0) {
        broker_destroy (&self);
        return NULL;
    }
    //  The ZAP handler is bound before any endpoint (auth.h)
    self->auth = auth_new (&self->config.auth, self->store, err, err_len);
    if (!self->auth) {
        broker_destroy (&self);
        return NULL;
    }
    self->relays = relays_new (&self->config.relays,
                               self->config.auth.insecure);
    self->client = s_bind (self->auth, ZMQ_ROUTER, KEYS_DOMAIN_CLIENTS,
                           self->config.client_ep, err, err_len);
    self->agents = self->client
                       ? s_bind (self->auth, ZMQ_ROUTER, KEYS_DOMAIN_AGENTS,
                                 self->config.agents_ep, err, err_len)
                       : NULL;
    if (self->agents)
        zsock_set_router_mandatory (self->agents, 1);
    self->publish = self->agents
                        ? s_bind (self->auth, ZMQ_XPUB, KEYS_DOMAIN_COMMANDS,
                                  self->config.publish_ep, err, err_len)
                        : NULL;
    if (!self->publish) {
        broker_destroy (&self);
        return NULL;
    }
    if (self->config.http.listen) {
        //  The HTTP face's requests come in by message, as a client's do
        char bridge_ep [64];
        snprintf (bridge_ep, sizeof bridge_ep, "inproc://grid-http-%p",
                  (void *) self);
        self->http = zsock_new (ZMQ_ROUTER);
        zsock_set_sndhwm (self->http, 100000);
        zsock_set_rcvhwm (self->http, 100000);
        zsock_set_sndtimeo (self->http, 0);
        zsock_set_rcvtimeo (self->http, 0);
        if (zsock_bind (self->http, "%s", bridge_ep) != 0) {
            snprintf (err, err_len, "cannot bind %s", bridge_ep);
            broker_destroy (&self);
            return NULL;
        }
        self->http_face = http_new (&self->config.http, bridge_ep, err,
                                    err_len);
        if (!self->http_face) {
            broker_destroy (&self);
            return NULL;
        }
    }
    self->loop = zloop_new ();
    zloop_reader (self->loop, self->client, s_on_client, self);
    if (self->http)
        zloop_reader (self->loop, self->http, s_on_client, self);
    zloop_reader (self->loop, self->agents, s_on_agents, self);
    auth_attach (self);
    zloop_timer (self->loop, (size_t) self->config.tick_ms, 0, s_on_tick, self);
    if (schedrun_restore (self, err, err_len) != 0) {
        broker_destroy (&self);
        return NULL;
    }
    return self;
}

int
broker_run (broker_t *self)
{
    s_log ("serving clients on %s, agents on %s, commands on %s; data in %s",
           self->config.client_ep, self->config.agents_ep,
           self->config.publish_ep, self->config.data_dir);
    //  Bound and restored: a service manager may start what depends on us
    service_notify_ready ("serving");
    if (service_watchdog_attach (self->loop) < 0)
        log_warn ("cannot arm the service watchdog timer");
    zloop_start (self->loop);
    service_notify_stopping ();
    s_log ("stopping");
    //  Every node's last-seen time, in one commit
    uint64_t failed = self->storage.failed_commits;
    size_t saved = s_save_seen (self, INT64_MAX, SIZE_MAX);
    s_pass_end (self);
    //  A failed commit saved nothing (and logged why)
    if (saved && self->storage.failed_commits == failed)
        s_log ("saved the last-seen time of %zu node%s", saved,
               saved == 1 ? "" : "s");
    return 0;
}

void
broker_destroy (broker_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    broker_t *self = *self_p;
    if (self->store)
        s_pass_end (self);
    broker_reload_destroy (self);
    zloop_destroy (&self->loop);
    http_destroy (&self->http_face);
    zsock_destroy (&self->http);
    zsock_destroy (&self->client);
    zsock_destroy (&self->agents);
    zsock_destroy (&self->publish);
    relays_destroy (&self->relays);
    auth_destroy (&self->auth);
    store_abort (&self->txn);
    sched_destroy (&self->sched);
    registry_destroy (&self->registry);
    store_destroy (&self->store);
    store_unlock (&self->lock);
    zlistx_destroy (&self->outbox);
    s_io_destroy (&self->io);
    zhashx_destroy (&self->event_seq);
    zhashx_destroy (&self->node_stats);
    qstats_destroy (&self->wait_samples);
    qstats_destroy (&self->run_samples);
    metrics_destroy (&self->metrics);
    zhashx_destroy (&self->replies);
    zhashx_destroy (&self->schedules);
    zlistx_destroy (&self->reply_order);
    zhashx_destroy (&self->live_jobs);
    zhashx_destroy (&self->pass_jobs);
    zlistx_destroy (&self->pass_replies);
    zlistx_destroy (&self->watchers);
    zhashx_destroy (&self->job_versions);
    zhashx_destroy (&self->pass_versions);
    zstr_free (&self->park_job);
    zlistx_destroy (&self->pass_logs);
    pw_destroy (&self->scratch);
    pw_destroy (&self->body);
    broker_config_clear (&self->config);
    free (self);
    *self_p = NULL;
}
