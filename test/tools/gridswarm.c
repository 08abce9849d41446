/*  =========================================================================
    gridswarm - one process that stands in for many gridagents

    Each simulated agent has its own node id, its own DEALER to the broker's
    agent endpoint and its own SUB to the commands endpoint, and speaks the
    real session (proto/PROTOCOL.md section 4): subscribe, hello, welcome,
    heartbeats, ack, started, result until result_ack, bye. A built-in
    answer stands in for the backends: `test echo` prints its message,
    `test fail` fails, `test sleep` answers after its seconds, anything else
    succeeds with no output; --delay-ms and --fail-rate change that for
    every command. Commands are deduplicated by (node, job, step, attempt)
    and unacknowledged results are sent again, as a real agent does, so the
    broker sees the same traffic it would from a fleet. As gridagent does,
    ack and started wait --progress-hold-ms and are left out when the
    result goes first (PROTOCOL.md 4.1 rules 4 and 7): an answer within the
    hold is the result alone; a later one is ack and started at the hold,
    then the result.

    Live output. --live-output announces `live_output` in the hello and
    runs `test lines` as gridagent runs it (its count of lines, one every
    interval, the first at once), other commands as above: while the task
    runs, in its agent's live round (every 100 ms from a moment of the
    agent's own, as gridagent's timer; --live-aligned: all agents of a
    shard at once) it sends what the lines wrote since its last piece
    in an `output` piece (at most --output-rate pieces a second per agent,
    only the first half of the welcome's max_output), when the welcome
    granted the feature; at the end the rest of the stream follows in
    pieces (the whole stream without the grant), then the result, which
    says the stream's size (PROTOCOL.md 4.1 rule 8a). Pieces are kept
    until their `output_ack` and sent again as results are; as gridagent,
    a task's next live piece waits for the ack of its last (or the
    re-send interval) and takes all that was written meanwhile. Without
    the option `test lines` answers at once with no output, as before.

    Blobs. --blobs announces `blobs` in the hello and fetches blobs as
    gridagent does: a `file put` of sha256 and size starts a fetch, one
    chunk at a time (blob_get at an offset, blob_chunk back, the next
    asked at once), and answers when the last chunk came; the agent then
    keeps the sha256 as cached, and a put of the same blob again answers
    at once. Chunks are counted (blob_chunks, blob_bytes), not written
    or hashed: the broker's side is what is measured.

    Scale. Thousands of zmq sockets cannot go through zpoller (without the
    draft API it scans every socket on each call). The agents are split
    over shard threads; each shard watches the ZMQ_FD of its sockets with
    epoll and keeps one timer heap for hellos, heartbeats and delayed
    answers. The open-file limit and ZeroMQ's socket limit are raised to fit
    (each agent costs four descriptors: two connections and two socket
    mailboxes; two with --transport zmtp). Many agents from one address
    run out of ephemeral ports (about 28,000 per broker port on Linux);
    --source-ips spreads the connections over several loopback addresses.
    --ramp N starts N agents a second instead of all at once, as a fleet
    coming up over some seconds would.

    Commands that reach every agent arrive as identical bytes on every SUB;
    a shard decodes such a body once and reuses it. That saves the swarm's
    CPU for the broker, which is what is measured; each agent still
    answers on its own.

    Control. With --control EP the swarm binds a ROUTER there. Requests and
    replies are msgpack maps:
        {type: "stats", ?id}         -> {type: "stats", ?id, agents, ...}
        {type: "job", job, ?id}      -> {type: "job", ?id, job, commands,
                                          results, acked, ...}
        {type: "watch", job, count, ?id}
                                     -> the "job" reply, sent once the
                                        swarm holds COUNT result_acks of JOB
        {type: "forget", ?id}        -> {type: "forget", ?id, jobs}: drops
                                        the per-job figures
        {type: "hold", ?id}          -> {type: "hold", ?id, held}: from now
                                        on results are made and spooled,
                                        not sent (commands are still taken,
                                        acked and started at once)
        {type: "release", ?id}       -> {type: "release", ?id, held}: sends
                                        every spooled result at once and
                                        sends again as they come
    "stats" tells "holding" (1 after hold), "held" (results spooled and not
    yet handed to the transport: 0 once a release has written them) and
    "unsent_bytes" (zmtp: what the kernel did not take at the last release,
    its buffers full; 0 on libzmq, whose I/O thread writes).
    Times in replies are CLOCK_MONOTONIC milliseconds, comparable with any
    other process on the machine.

    Transport. --transport libzmq (the default, and the only one for
    CURVE) gives each agent the two libzmq sockets above. --transport zmtp
    speaks ZMTP 3.0 itself (zmtp.h): each agent's DEALER and SUB are plain
    TCP or ipc:// connections in the shard's own epoll, with no ZeroMQ I/O
    thread and no socket mailbox; everything an agent queued in one loop
    pass leaves in one write. The session above is the same code for both:
    only sending, subscribing, reading frames and connecting differ. The
    broker and relays still run libzmq; only the load generator is cheaper
    (BENCHMARKS.md, "The swarm's own cost").

    Threading: one control thread (main) and --threads shard threads; each
    zmq socket and ZMTP connection belongs to one thread. Per-job figures
    are shared under one mutex; counters are atomics.
    =========================================================================
*/
#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "../../backends/backend.h"
#include "../../proto/names.h"
#include "../../proto/proto.h"
#include "../../proto/pv.h"
#include "../../proto/pw.h"
#include "zmtp.h"

#define S_ID_MAX (NAME_MAX_LEN + 1)
#define S_HWM 1000                  //  Messages queued per socket at most
#define S_KERNEL_BUFFER 65536       //  SO_SNDBUF / SO_RCVBUF per connection
#define S_LINGER_MS 1000            //  Byes get this long at close
#define S_HELLO_RETRY_MS 2000       //  Hello again until welcomed, after this,
#define S_HELLO_RETRY_MAX_MS 30000  //  doubling up to this (as gridagent)
#define S_RESEND_MS 5000            //  Unacknowledged results again
#define S_RESEND_CHECK_MS 1000      //  How often to look for them
#define S_ZMTP_HEARTBEAT_MS 5000    //  As gridagent
#define S_ZMTP_TIMEOUT_MS 15000     //  ...and the TTL in its PINGs
#define S_HANDSHAKE_MS 10000
#define S_RECONNECT_MS 100
#define S_RECONNECT_MAX_MS 10000
#define S_CREATE_BATCH 200          //  Agents created per loop pass
#define S_READ_BATCH 64             //  Messages per socket per wake-up
#define S_EPOLL_BATCH 512
#define S_MAX_WAIT_MS 1000
#define S_NOTIFY_EP "inproc://gridswarm-notify"
#define S_NODE_SET_MIN 16           //  nodes lists this long get a hash set
#define S_PROGRESS_HOLD_MS 20       //  As gridagent: ack and started wait
#define S_DUE_PROGRESS 1ULL         //  Tag on a delayed item: the ack and
                                    //  started of that result are due
#define S_LIVE_MS 100               //  As gridagent: a live output round
#define S_OUTPUT_RATE 50            //  ...and its output_rate by default
#define S_OUTPUT_CAP (16u << 20)    //  ...and its own cap per stream

//  ---------------------------------------------------------------------
//  Counters, summed over shards for "stats"

typedef enum {
    C_CREATED,          //  Agents whose sockets exist
    C_HELLOS,           //  Hellos sent
    C_HELLO_DEFERRED,   //  Hellos held until the connection was up
    C_WELCOMED,         //  Welcomes received (re-welcomes included)
    C_HEARTBEATS,       //  Heartbeats sent
    C_COMMANDS,         //  Commands taken (first time per attempt)
    C_DUP_COMMANDS,     //  Same (job, step, attempt) again: acked again
    C_STALE_COMMANDS,   //  An older attempt than one already taken
    C_NOT_FOR_US,       //  A nodes list without this agent
    C_UNWELCOMED,       //  Commands before the welcome (ignored)
    C_RERUNS,           //  A new attempt of a step already run
    C_ACKS,             //  Acks sent
    C_STARTED,          //  Started sent
    C_RESULTS,          //  Results produced (once per attempt)
    C_RESULT_ACKS,      //  First result_ack of a result
    C_DUP_RESULT_ACKS,  //  A result_ack for nothing outstanding
    C_RESENT,           //  Results sent again (no ack in time, or asked)
    C_CANCELS,          //  Cancels meant for an agent
    C_ERRORS,           //  Error messages from the broker
    C_UNKNOWN_NODE,     //  ...of which unknown_node (hello again)
    C_MALFORMED,        //  Frames that did not decode
    C_SEND_FAILED,      //  Sends refused by ZeroMQ (not connected, HWM)
    C_BYES,             //  Byes sent at shutdown
    C_CONNECTED,        //  ZMTP handshakes completed (--transport zmtp)
    C_DISCONNECTS,      //  ZMTP connections lost, refused ones included
    C_PROTOCOL_ERRORS,  //  ...of which the peer broke ZMTP or refused
                        //  the handshake
    C_PONGS,            //  PONGs for our ZMTP PINGs
    C_OUTPUTS,          //  Output pieces sent (first time; --live-output)
    C_LIVE_OUTPUTS,     //  ...of which sent while their task ran
    C_OUTPUT_BYTES,     //  Their bytes
    C_LIVE_BYTES,       //  ...of the live ones
    C_OUTPUT_ACKS,      //  First output_ack of a piece
    C_OUTPUT_ACKED_BYTES,   //  ...and the bytes of the pieces acked
    C_DUP_OUTPUT_ACKS,  //  An output_ack for nothing outstanding
    C_BLOB_CHUNKS,      //  blob_chunks taken (--blobs)
    C_BLOB_BYTES,       //  ...their bytes
    C_BLOB_ERRORS,      //  blob_chunks that said why not
    C_BLOBS,            //  Blobs fetched whole
    C_COUNT
} s_counter_t;

static const char *const s_counter_names [C_COUNT] = {
    "created", "hellos", "hello_deferred", "welcomed", "heartbeats", "commands",
    "dup_commands", "stale_commands", "not_for_us", "unwelcomed", "reruns",
    "acks", "started", "results", "result_acks", "dup_result_acks",
    "resent", "cancels", "errors", "unknown_node", "malformed",
    "send_failed", "byes", "connected", "disconnects", "protocol_errors",
    "pongs", "outputs", "live_outputs", "output_bytes", "live_bytes",
    "output_acks", "output_acked_bytes", "dup_output_acks",
    "blob_chunks", "blob_bytes", "blob_errors", "blobs"
};

//  ---------------------------------------------------------------------
//  Configuration

typedef struct {
    size_t agents;              //  How many agents
    size_t first;               //  Number of the first agent
    char *prefix;               //  Node ids are <prefix>-<number>
    char *broker_ep;            //  Broker agent endpoint
    char *publish_ep;           //  Broker commands endpoint
    char *control_ep;           //  Control ROUTER, or NULL
    char **groups;              //  Groups of every agent
    size_t group_count;
    proto_kv_t *labels;         //  Labels of every agent
    size_t label_count;
    size_t threads;             //  Shard threads
    int io_threads;             //  ZeroMQ I/O threads
    int64_t delay_ms;           //  Answer this long after the command
    double fail_rate;           //  Fraction of commands that fail
    bool send_started;          //  Send `started` (as gridagent does)
    int64_t progress_hold_ms;   //  Ack and started wait this long, 0: never
    bool test_only;             //  Declare only the test backend
    bool single_results;        //  One result per message, even when granted
    bool single_acks;           //  Hello without features: one result_ack
                                //  per result, as an older agent
    int zmtp_heartbeat_ms;      //  ZMTP PING interval, 0 for none
    int zmtp_ttl_ms;            //  TTL our PINGs ask the broker to keep
    int zmtp_timeout_ms;        //  Silence that drops a connection
    char curve_server [41];     //  Broker public key (Z85), "" for none
    char **source_ips;          //  Local addresses to connect from
    size_t source_ip_count;
    bool verbose;               //  Log agent events
    size_t ramp;                //  Agents started per second, 0: at once
    bool zmtp;                  //  --transport zmtp: ZMTP spoken here
    bool live_output;           //  Announce live_output; run `test lines`
    int64_t output_rate;        //  Live pieces a second per agent at most
    bool live_aligned;          //  Every agent of a shard in one live round
    bool blobs;                 //  Announce blobs; fetch them for file put
} s_config_t;

//  ---------------------------------------------------------------------
//  A u64 -> u64 hash table (linear probing, backward-shift deletion).
//  Key 0 marks an empty slot; callers never use it.

typedef struct {
    uint64_t *keys;
    uint64_t *values;
    size_t mask;                //  Capacity - 1 (a power of two)
    size_t count;
} s_map_t;

static void
s_map_init (s_map_t *map, size_t capacity)
{
    size_t size = 64;
    while (size < capacity * 2)
        size *= 2;
    map->keys = (uint64_t *) zmalloc (size * sizeof (uint64_t));
    map->values = (uint64_t *) zmalloc (size * sizeof (uint64_t));
    map->mask = size - 1;
    map->count = 0;
}

static void
s_map_free (s_map_t *map)
{
    free (map->keys);
    free (map->values);
    memset (map, 0, sizeof *map);
}

static uint64_t *
s_map_find (s_map_t *map, uint64_t key)
{
    for (size_t slot = key & map->mask;; slot = (slot + 1) & map->mask) {
        if (map->keys [slot] == key)
            return &map->values [slot];
        if (map->keys [slot] == 0)
            return NULL;
    }
}

static void
s_map_grow (s_map_t *map)
{
    s_map_t bigger;
    s_map_init (&bigger, (map->mask + 1));
    for (size_t slot = 0; slot <= map->mask; slot++) {
        uint64_t key = map->keys [slot];
        if (!key)
            continue;
        size_t at = key & bigger.mask;
        while (bigger.keys [at])
            at = (at + 1) & bigger.mask;
        bigger.keys [at] = key;
        bigger.values [at] = map->values [slot];
        bigger.count++;
    }
    s_map_free (map);
    *map = bigger;
}

//  The value of KEY, inserted as 0 when absent.
static uint64_t *
s_map_insert (s_map_t *map, uint64_t key)
{
    if ((map->count + 1) * 10 > (map->mask + 1) * 7)
        s_map_grow (map);
    size_t slot = key & map->mask;
    while (map->keys [slot] && map->keys [slot] != key)
        slot = (slot + 1) & map->mask;
    if (!map->keys [slot]) {
        map->keys [slot] = key;
        map->values [slot] = 0;
        map->count++;
    }
    return &map->values [slot];
}

static void
s_map_delete (s_map_t *map, uint64_t key)
{
    size_t hole = key & map->mask;
    while (map->keys [hole] != key) {
        if (map->keys [hole] == 0)
            return;
        hole = (hole + 1) & map->mask;
    }
    //  Pull later members of the probe run back into the hole, so that
    //  lookups never stop early at it.
    size_t next = hole;
    while (true) {
        next = (next + 1) & map->mask;
        uint64_t moved = map->keys [next];
        if (!moved)
            break;
        size_t home = moved & map->mask;
        bool stays = hole <= next ? (hole < home && home <= next)
                                  : (hole < home || home <= next);
        if (stays)
            continue;
        map->keys [hole] = moved;
        map->values [hole] = map->values [next];
        hole = next;
    }
    map->keys [hole] = 0;
    map->values [hole] = 0;
    map->count--;
}

//  A 64-bit fingerprint of (agent, job, step, attempt); never 0.
static uint64_t
s_fingerprint (uint32_t agent, const char *job, uint32_t step,
               uint32_t attempt)
{
    uint64_t hash = 14695981039346656037ULL;
    for (const char *cursor = job; *cursor; cursor++)
        hash = (hash ^ (uint8_t) *cursor) * 1099511628211ULL;
    hash ^= ((uint64_t) agent << 32) ^ ((uint64_t) step << 16) ^ attempt;
    //  splitmix64's finaliser spreads the low bits used as the slot
    hash ^= hash >> 30;
    hash *= 0xbf58476d1ce4e5b9ULL;
    hash ^= hash >> 27;
    hash *= 0x94d049bb133111ebULL;
    hash ^= hash >> 31;
    return hash ? hash : 1;
}

//  ---------------------------------------------------------------------
//  A binary min-heap of (due_ms, item)

typedef struct {
    int64_t due_ms;
    uint64_t item;
} s_due_t;

typedef struct {
    s_due_t *items;
    size_t count;
    size_t room;
} s_heap_t;

static void
s_heap_push (s_heap_t *heap, int64_t due_ms, uint64_t item)
{
    if (heap->count == heap->room) {
        heap->room = heap->room ? heap->room * 2 : 256;
        heap->items = (s_due_t *) realloc (heap->items,
                                           heap->room * sizeof (s_due_t));
        assert (heap->items);
    }
    size_t at = heap->count++;
    while (at > 0) {
        size_t parent = (at - 1) / 2;
        if (heap->items [parent].due_ms <= due_ms)
            break;
        heap->items [at] = heap->items [parent];
        at = parent;
    }
    heap->items [at].due_ms = due_ms;
    heap->items [at].item = item;
}

static void
s_heap_pop (s_heap_t *heap)
{
    assert (heap->count);
    s_due_t last = heap->items [--heap->count];
    size_t at = 0;
    while (true) {
        size_t child = at * 2 + 1;
        if (child >= heap->count)
            break;
        if (child + 1 < heap->count
            && heap->items [child + 1].due_ms < heap->items [child].due_ms)
            child++;
        if (last.due_ms <= heap->items [child].due_ms)
            break;
        heap->items [at] = heap->items [child];
        at = child;
    }
    if (heap->count)
        heap->items [at] = last;
}

//  ---------------------------------------------------------------------
//  Agents, results, shards

typedef enum {
    S_AGENT_NEW = 0,            //  No sockets yet
    S_AGENT_HELLO,              //  Hello sent (or due), no welcome
    S_AGENT_WELCOMED            //  Registered
} s_agent_state_t;

typedef struct {
    char id [S_ID_MAX];         //  Node id
    void *dealer;               //  To the broker's agent endpoint
    void *sub;                  //  From the commands endpoint
    uint8_t state;              //  s_agent_state_t
    uint8_t dirty;              //  1: DEALER, 2: SUB needs a look
    bool hello_pending;         //  Hello waits for the connection
    uint16_t running;           //  Delayed answers not sent yet
    bool batch_results;         //  The welcome granted results
    uint32_t heartbeat_ms;      //  From the welcome
    uint32_t hello_delay_ms;    //  Wait before the next hello retry
    int64_t due_ms;             //  Next hello retry or heartbeat
    struct _s_result_t *batch;  //  Results to send in one results, newest
                                //  first (through batch_next)
} s_agent_t;

//  A result: waiting for its delay, or sent and not yet acknowledged.
typedef struct _s_result_t s_result_t;
struct _s_result_t {
    uint64_t key;               //  Fingerprint of (agent, job, step, attempt)
    uint32_t agent;             //  Index in the shard
    char job [JOB_ID_LEN + 1];  //  Job id
    uint32_t step;              //  Step
    uint32_t attempt;           //  Attempt
    int64_t sent_ms;            //  Last send, 0 while delayed
    bool failed;                //  Its status is not success
    bool cancelled;             //  Delayed, then answered by a cancel
    void *data;                 //  Encoded result
    size_t size;
    s_result_t *prev;           //  Unacknowledged list, oldest send first
    s_result_t *next;
    s_result_t *batch_next;     //  Its agent's batch
    bool in_batch;              //  Waits in its agent's batch
    uint32_t piece_bytes;       //  An output piece: its data's bytes (0: a
                                //  result); acked by output_ack
};

//  --live-output: a running `test lines` task (linked from its shard).
//  Its output is "line 1\n" .. "line COUNT\n", one line every INTERVAL_MS
//  from STARTED_MS, the first at once; nothing of it is kept in memory:
//  a piece's bytes are written out when it is sent.
typedef struct _s_task_t s_task_t;
struct _s_task_t {
    uint32_t agent;             //  Index in the shard
    char job [JOB_ID_LEN + 1];
    uint32_t step;
    uint32_t attempt;
    int64_t started_ms;
    int64_t end_ms;             //  When the last line is written
    int64_t interval_ms;
    uint64_t count;             //  Lines
    uint64_t sent;              //  Bytes of stdout sent live so far
    uint64_t wait_key;          //  Its last live piece, while it awaits
                                //  its output_ack (0: none)
    int64_t wait_ms;            //  ...sent then
    s_task_t *next;
};

//  --blobs: one agent's fetch (one at a time) and its cache (the last
//  blob it fetched).
typedef struct {
    char sha256 [65];           //  The blob being fetched, or "" for none
    uint64_t size;              //  Its size
    uint64_t offset;            //  The chunk asked for
    char job [JOB_ID_LEN + 1];  //  The command that waits for it
    uint32_t step;
    uint32_t attempt;
    char cached [65];           //  The blob it has
} s_fetch_t;

//  --live-output: what one agent's welcome granted, and its rate budget.
typedef struct {
    bool granted;               //  The welcome granted live_output
    uint64_t cap;               //  Bytes kept per stream (welcome's
                                //  max_output, at most the agent's own)
    double tokens;              //  Live pieces it may send now
    int64_t refilled_ms;        //  When the tokens were last refilled
    int64_t round_ms;           //  Its next live round (0: not yet set)
    int64_t fired_ms;           //  When its last round began
} s_live_t;

//  Values of the shard's seen table (key: fingerprint of the step): the
//  attempt taken last in the low 32 bits, and this flag.
#define S_SEEN_ANSWERED (1ULL << 32)    //  The result of that attempt exists

typedef struct _s_swarm_t s_swarm_t;

typedef struct {
    s_swarm_t *swarm;
    size_t index;               //  Shard number
    s_agent_t *agents;          //  This shard's agents
    size_t count;               //  How many
    size_t base;                //  Agent number of agents [0]
    size_t created;             //  Agents whose sockets exist
    int64_t started_ms;         //  When the shard began making agents
    pthread_t thread;
    int epoll_fd;
    int wake_fd;                //  eventfd: stop now
    void *notify;               //  PUSH to the control thread
    pw_t *writer;               //  Encoding buffer
    uint64_t random;            //  xorshift state
    s_heap_t timers;            //  (due, agent index): hello, heartbeat
    s_heap_t delayed;           //  (due, s_result_t *): answers not sent,
                                //  and (tagged S_DUE_PROGRESS) held acks
    s_map_t seen;               //  Step fingerprint -> attempt | flags
    s_map_t outstanding;        //  Result fingerprint -> s_result_t *
    s_result_t *unacked_head;   //  Sent, not acknowledged: oldest first
    s_result_t *unacked_tail;
    s_result_t *held_head;      //  Spooled by "hold", not sent: oldest
    s_result_t *held_tail;      //  first (linked by next)
    _Atomic uint64_t held;      //  ...how many, until handed to the transport
    _Atomic uint64_t unsent_bytes;  //  zmtp: queued, unwritten at release
    uint32_t *dirty;            //  Agents to look at before sleeping
    size_t dirty_count;
    uint32_t *batching;         //  Agents with results in their batch
    size_t batching_count;
    int64_t next_resend_ms;
    //  The last command body decoded from a SUB, reused while the next
    //  bodies are the same bytes (one broadcast reaches every agent)
    void *cache_body;
    size_t cache_size;
    proto_msg_t *cache_msg;
    zhashx_t *cache_nodes;      //  Its nodes list as a set, or NULL
    _Atomic uint64_t counters [C_COUNT];
    _Atomic uint64_t pending;   //  Results not yet acknowledged
    //  --transport zmtp: agent I's DEALER is conns [2 I], its SUB
    //  conns [2 I + 1], all in this shard's epoll
    zmtp_ctx_t zmtp;
    zmtp_t *conns;
    s_heap_t conn_timers;       //  (due, epoll tag): reconnects, PINGs
    int64_t now_ms;             //  This loop pass's time, for handlers
    //  --live-output only (NULL otherwise): per agent, and the running
    //  `test lines` tasks
    s_live_t *live;
    s_fetch_t *fetches;         //  --blobs: per agent
    s_task_t *tasks;
    int64_t next_live_ms;       //  --live-aligned: the shard's next round
    int64_t next_task_ms;       //  The next agent's round or task end
} s_shard_t;

//  Figures per job, for the control socket.
typedef struct {
    uint64_t commands;          //  Commands taken
    uint64_t results;           //  Results produced
    uint64_t acked;             //  First result_acks
    uint64_t dup_acks;          //  Extra result_acks
    uint64_t dup_commands;      //  Commands taken again
    uint64_t reruns;            //  New attempts of steps already run
    uint64_t failed;            //  Results that were not success
    int64_t first_command_ms;   //  Monotonic
    int64_t first_result_ms;
    int64_t last_ack_ms;
    uint64_t watch;             //  Ack count a waiter wants, 0 for none
} s_job_t;

struct _s_swarm_t {
    s_config_t config;
    void *context;              //  ZeroMQ context
    s_shard_t *shards;
    proto_msg_t *hello;         //  Template: every field but the node id
    zmtp_endpoint_t broker_peer;    //  --transport zmtp: where to connect
    zmtp_endpoint_t publish_peer;
    zmtp_endpoint_t *sources;   //  --source-ips, parsed
    pthread_mutex_t lock;       //  Guards jobs
    zhashx_t *jobs;             //  Job id -> s_job_t
    atomic_bool stopping;
    atomic_bool holding;        //  "hold": results are spooled, not sent
    _Atomic int64_t last_welcome_ms;
    int64_t started_ms;
};

typedef enum {
    S_JOB_COMMAND, S_JOB_DUP_COMMAND, S_JOB_RERUN, S_JOB_RESULT,
    S_JOB_FAILED_RESULT, S_JOB_ACK, S_JOB_DUP_ACK
} s_job_event_t;

static void
s_job_destroy (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

static int64_t
s_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_log (const char *format, ...) __attribute__ ((format (printf, 1, 2)));

static void
s_log (const char *format, ...)
{
    char line [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (line, sizeof line, format, args);
    va_end (args);
    fprintf (stderr, "gridswarm: %s\n", line);
}

static void
s_count (s_shard_t *shard, s_counter_t counter)
{
    atomic_fetch_add_explicit (&shard->counters [counter], 1,
                               memory_order_relaxed);
}

static uint64_t
s_random (s_shard_t *shard)
{
    uint64_t x = shard->random;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    shard->random = x;
    return x;
}

//  Jitter: MS give or take a fifth, so that agents do not move in step.
static int64_t
s_jitter (s_shard_t *shard, uint32_t ms)
{
    uint32_t spread = ms / 5;
    return (int64_t) ms - spread
           + (spread ? (int64_t) (s_random (shard) % (2 * spread + 1)) : 0);
}

static size_t
s_rss_kib (void)
{
    FILE *file = fopen ("/proc/self/status", "r");
    size_t kib = 0;
    char line [256];
    while (file && fgets (line, sizeof line, file))
        if (sscanf (line, "VmRSS: %zu kB", &kib) == 1)
            break;
    if (file)
        fclose (file);
    return kib;
}

//  Records EVENT of JOB at NOW_MS; tells the control thread when a
//  watched job reaches its count.
static void
s_job_event (s_shard_t *shard, const char *job_id, s_job_event_t event,
             int64_t now_ms)
{
    s_swarm_t *swarm = shard->swarm;
    bool reached = false;
    pthread_mutex_lock (&swarm->lock);
    s_job_t *job = (s_job_t *) zhashx_lookup (swarm->jobs, job_id);
    if (!job) {
        job = (s_job_t *) zmalloc (sizeof (s_job_t));
        zhashx_insert (swarm->jobs, job_id, job);
    }
    switch (event) {
        case S_JOB_COMMAND:
            if (!job->commands++)
                job->first_command_ms = now_ms;
            break;
        case S_JOB_DUP_COMMAND:
            job->dup_commands++;
            break;
        case S_JOB_RERUN:
            job->reruns++;
            break;
        case S_JOB_FAILED_RESULT:
        case S_JOB_RESULT:
            if (event == S_JOB_FAILED_RESULT)
                job->failed++;
            if (!job->results++)
                job->first_result_ms = now_ms;
            break;
        case S_JOB_ACK:
            job->acked++;
            job->last_ack_ms = now_ms;
            reached = job->watch && job->acked == job->watch;
            break;
        case S_JOB_DUP_ACK:
            job->dup_acks++;
            break;
    }
    pthread_mutex_unlock (&swarm->lock);
    if (reached)
        zmq_send (shard->notify, job_id, strlen (job_id), ZMQ_DONTWAIT);
}

//  ---------------------------------------------------------------------
//  Sending

static void
s_mark_dirty (s_shard_t *shard, uint32_t index, uint8_t which)
{
    s_agent_t *agent = &shard->agents [index];
    if (!agent->dirty)
        shard->dirty [shard->dirty_count++] = index;
    agent->dirty |= which;
}

//  The transport: sends one message of agent INDEX to the broker. Refused
//  while the connection is not up (ZMQ_IMMEDIATE, or ZMTP not ready).
static int
s_transport_send (s_shard_t *shard, uint32_t index, const void *data,
                  size_t size)
{
    int rc = shard->conns
                 ? zmtp_send (&shard->conns [2 * index], data, size, false)
                 : zmq_send (shard->agents [index].dealer, data, size,
                             ZMQ_DONTWAIT);
    //  libzmq: a send may swallow the mailbox signal of messages that
    //  arrived meanwhile, so look at the socket again before sleeping.
    //  ZMTP: what was queued is written once, before sleeping.
    s_mark_dirty (shard, index, 1);
    return rc < 0 ? -1 : 0;
}

static int
s_send_bytes (s_shard_t *shard, uint32_t index, const void *data,
              size_t size)
{
    int rc = s_transport_send (shard, index, data, size);
    if (rc < 0) {
        s_count (shard, C_SEND_FAILED);
        return -1;
    }
    return 0;
}

static int
s_send_msg (s_shard_t *shard, uint32_t index, const proto_msg_t *msg)
{
    pw_reset (shard->writer);
    if (proto_msg_encode (msg, shard->writer) != 0) {
        s_log ("internal: a %s message does not encode",
               proto_type_name (msg->type));
        return -1;
    }
    return s_send_bytes (shard, index, pw_data (shard->writer),
                         pw_size (shard->writer));
}

static void
s_send_progress (s_shard_t *shard, uint32_t index, proto_type_t type,
                 const char *job, uint32_t step, uint32_t attempt)
{
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = type;
    msg.node = shard->agents [index].id;
    msg.job = (char *) job;
    msg.step = step;
    msg.attempt = attempt;
    s_send_msg (shard, index, &msg);
    s_count (shard, type == PROTO_ACK ? C_ACKS : C_STARTED);
}

static void
s_arm (s_shard_t *shard, uint32_t index, int64_t due_ms)
{
    shard->agents [index].due_ms = due_ms;
    s_heap_push (&shard->timers, due_ms, index);
}

//  Says hello as soon as the DEALER can send (ZMQ_IMMEDIATE refuses a
//  send before the connection is up; the socket's mailbox wakes the shard
//  when it is), and again until welcomed: after S_HELLO_RETRY_MS, the wait
//  doubling at each RETRY up to S_HELLO_RETRY_MAX_MS, give or take a
//  fifth, so that a slow broker is not asked ever more often. gridagent
//  retries on a timer instead; waiting for the connection itself keeps the
//  registration figure about the broker, not about a retry delay.
static void
s_hello (s_shard_t *shard, uint32_t index, int64_t now_ms, bool retry)
{
    s_agent_t *agent = &shard->agents [index];
    agent->state = S_AGENT_HELLO;
    if (!retry || agent->hello_delay_ms == 0)
        agent->hello_delay_ms = S_HELLO_RETRY_MS;
    else
    if (agent->hello_delay_ms < S_HELLO_RETRY_MAX_MS)
        agent->hello_delay_ms = agent->hello_delay_ms * 2 < S_HELLO_RETRY_MAX_MS
                              ? agent->hello_delay_ms * 2
                              : S_HELLO_RETRY_MAX_MS;
    proto_msg_t hello = *shard->swarm->hello;
    hello.node = agent->id;
    pw_reset (shard->writer);
    int rc = proto_msg_encode (&hello, shard->writer);
    assert (rc == 0);
    rc = s_transport_send (shard, index, pw_data (shard->writer),
                           pw_size (shard->writer));
    agent->hello_pending = rc < 0;
    s_count (shard, rc < 0 ? C_HELLO_DEFERRED : C_HELLOS);
    s_arm (shard, index, now_ms + s_jitter (shard, agent->hello_delay_ms));
}

//  ---------------------------------------------------------------------
//  Results

static void
s_unacked_link (s_shard_t *shard, s_result_t *result)
{
    result->next = NULL;
    result->prev = shard->unacked_tail;
    if (shard->unacked_tail)
        shard->unacked_tail->next = result;
    else
        shard->unacked_head = result;
    shard->unacked_tail = result;
}

static void
s_unacked_unlink (s_shard_t *shard, s_result_t *result)
{
    if (result->prev)
        result->prev->next = result->next;
    else
        shard->unacked_head = result->next;
    if (result->next)
        result->next->prev = result->prev;
    else
        shard->unacked_tail = result->prev;
    result->prev = result->next = NULL;
}

static void
s_result_free (s_result_t **result_p)
{
    if (*result_p) {
        free ((*result_p)->data);
        free (*result_p);
        *result_p = NULL;
    }
}

//  Sends RESULT of its agent now, or in the agent's batch when the
//  broker granted results: the batches go out at the end of this pass,
//  one results per agent (as gridagent sends what finished in one turn).
static void s_send_or_batch (s_shard_t *shard, s_result_t *result);

//  The bytes of RESULT's encoding after its v, type and node, and the
//  count of its other keys: an entry of a results is that map. False when
//  the encoding does not start the way proto_msg_encode writes it.
static bool
s_entry_tail (const s_shard_t *shard, const s_result_t *result,
              size_t *keys, size_t *offset)
{
    static const char prefix [] = "\xa1v\x01\xa4type\xa6result\xa4node";
    const uint8_t *bytes = (const uint8_t *) result->data;
    size_t at = 1;
    if (result->size > 0 && (bytes [0] & 0xf0) == 0x80)
        *keys = bytes [0] & 0x0f;
    else
    if (result->size > 3 && bytes [0] == 0xde) {
        *keys = ((size_t) bytes [1] << 8) | bytes [2];
        at = 3;
    }
    else
        return false;
    const char *id = shard->agents [result->agent].id;
    size_t id_len = strlen (id);
    size_t head = sizeof prefix - 1;
    if (*keys < 4 || id_len >= 32
        || result->size < at + head + 1 + id_len
        || memcmp (bytes + at, prefix, head) != 0
        || bytes [at + head] != (0xa0 | id_len)
        || memcmp (bytes + at + head + 1, id, id_len) != 0)
        return false;
    *keys -= 3;
    *offset = at + head + 1 + id_len;
    return true;
}

static void
s_send_or_batch (s_shard_t *shard, s_result_t *result)
{
    s_agent_t *agent = &shard->agents [result->agent];
    size_t keys, offset;
    if (result->in_batch)
        return;
    if (!agent->batch_results || shard->swarm->config.single_results
        || !s_entry_tail (shard, result, &keys, &offset)) {
        s_send_bytes (shard, result->agent, result->data, result->size);
        return;
    }
    if (!agent->batch)
        shard->batching [shard->batching_count++] = result->agent;
    result->in_batch = true;
    result->batch_next = agent->batch;
    agent->batch = result;
}

//  Sends every agent's batch: one results each, oldest result first, at
//  most PROTO_MAX_RESULTS entries and PROTO_RESULTS_BYTES a message.
static void
s_batches_flush (s_shard_t *shard)
{
    static _Thread_local s_result_t *order [PROTO_MAX_RESULTS];
    for (size_t at = 0; at < shard->batching_count; at++) {
        uint32_t index = shard->batching [at];
        s_agent_t *agent = &shard->agents [index];
        s_result_t *result = agent->batch;
        agent->batch = NULL;
        while (result) {
            //  The newest PROTO_MAX_RESULTS, or fewer to fit the bytes
            size_t count = 0, bytes = 64;
            while (result && count < PROTO_MAX_RESULTS
                   && bytes + result->size < PROTO_RESULTS_BYTES) {
                bytes += result->size;
                order [count++] = result;
                result->in_batch = false;
                result = result->batch_next;
            }
            if (count == 0) {
                result->in_batch = false;
                s_send_bytes (shard, index, result->data, result->size);
                result = result->batch_next;
                continue;
            }
            pw_reset (shard->writer);
            int rc = proto_results_begin (agent->id, count, shard->writer);
            assert (rc == 0);
            while (count--) {
                size_t keys, offset;
                s_entry_tail (shard, order [count], &keys, &offset);
                pw_map (shard->writer, keys);
                pw_raw (shard->writer,
                        (const uint8_t *) order [count]->data + offset,
                        order [count]->size - offset);
            }
            s_send_bytes (shard, index, pw_data (shard->writer),
                          pw_size (shard->writer));
        }
    }
    shard->batching_count = 0;
}

//  The answer of the built-in backend to COMMAND.
static void
s_answer (s_shard_t *shard, const proto_msg_t *command, proto_msg_t *result)
{
    const s_config_t *config = &shard->swarm->config;
    bool test = strcmp (command->backend, "test") == 0;
    const char *msg = NULL;
    for (size_t index = 0; index < command->param_count; index++)
        if (strcmp (command->params [index].key, "msg") == 0)
            msg = command->params [index].value;
    bool fail = test && strcmp (command->action, "fail") == 0;
    if (config->fail_rate > 0
        && (double) (s_random (shard) % 1000000) < config->fail_rate * 1e6)
        fail = true;
    result->status = fail ? "failed" : "success";
    result->exit_code = fail ? 1 : 0;
    result->output = "";
    result->error = fail ? (msg ? (char *) msg : "simulated failure") : "";
    if (!fail && test && msg
        && (strcmp (command->action, "echo") == 0
            || strcmp (command->action, "sleep") == 0)) {
        //  Echo prints its message and a newline, as the real backend does
        size_t len = strlen (msg);
        char *text = (char *) malloc (len + 2);
        assert (text);
        memcpy (text, msg, len);
        memcpy (text + len, "\n", 2);
        result->output = text;
    }
}

//  How long COMMAND takes: --delay-ms, or `test sleep`'s seconds.
static int64_t
s_delay_ms (s_shard_t *shard, const proto_msg_t *command)
{
    int64_t delay_ms = shard->swarm->config.delay_ms;
    if (strcmp (command->backend, "test") == 0
        && strcmp (command->action, "sleep") == 0)
        for (size_t index = 0; index < command->param_count; index++)
            if (strcmp (command->params [index].key, "seconds") == 0)
                delay_ms += strtoll (command->params [index].value, NULL, 10)
                            * 1000;
    return delay_ms;
}

//  A new s_result_t holding a copy of the encoded result in the writer.
static s_result_t *
s_result_wrap (s_shard_t *shard, uint32_t index, const char *job,
               uint32_t step, uint32_t attempt, bool failed)
{
    s_result_t *self = (s_result_t *) zmalloc (sizeof (s_result_t));
    self->key = s_fingerprint ((uint32_t) (shard->base + index), job, step,
                               attempt);
    self->agent = index;
    snprintf (self->job, sizeof self->job, "%s", job);
    self->step = step;
    self->attempt = attempt;
    self->failed = failed;
    self->size = pw_size (shard->writer);
    self->data = malloc (self->size);
    assert (self->data);
    memcpy (self->data, pw_data (shard->writer), self->size);
    return self;
}

//  Encodes the result of COMMAND for agent INDEX into a new s_result_t.
static s_result_t *
s_result_new (s_shard_t *shard, uint32_t index, const proto_msg_t *command,
              int64_t duration_ms)
{
    proto_msg_t result;
    memset (&result, 0, sizeof result);
    result.type = PROTO_RESULT;
    result.node = shard->agents [index].id;
    result.job = command->job;
    result.step = command->step;
    result.attempt = command->attempt;
    result.duration_ms = (uint64_t) duration_ms;
    s_answer (shard, command, &result);
    pw_reset (shard->writer);
    int rc = proto_msg_encode (&result, shard->writer);
    bool failed = strcmp (result.status, "success") != 0;
    if (*result.output)
        free (result.output);
    if (rc != 0)
        return NULL;
    return s_result_wrap (shard, index, command->job, command->step,
                          command->attempt, failed);
}

//  Sends RESULT for the first time and keeps it until its result_ack;
//  while the swarm holds results, spools it instead (s_release sends it).
static void
s_result_send (s_shard_t *shard, s_result_t *result, int64_t now_ms)
{
    if (atomic_load_explicit (&shard->swarm->holding, memory_order_relaxed)) {
        result->next = NULL;
        if (shard->held_tail)
            shard->held_tail->next = result;
        else
            shard->held_head = result;
        shard->held_tail = result;
        atomic_fetch_add_explicit (&shard->held, 1, memory_order_relaxed);
        return;
    }
    result->sent_ms = now_ms;
    *s_map_insert (&shard->outstanding, result->key) = (uintptr_t) result;
    s_unacked_link (shard, result);
    atomic_fetch_add_explicit (&shard->pending, 1, memory_order_relaxed);
    s_count (shard, C_RESULTS);
    s_job_event (shard, result->job,
                 result->failed ? S_JOB_FAILED_RESULT : S_JOB_RESULT,
                 now_ms);
    uint64_t *seen = s_map_find (
        &shard->seen, s_fingerprint ((uint32_t) (shard->base + result->agent),
                                     result->job, result->step, 0));
    if (seen && (uint32_t) *seen == result->attempt)
        *seen |= S_SEEN_ANSWERED;
    if (shard->agents [result->agent].state == S_AGENT_WELCOMED)
        s_send_or_batch (shard, result);
}

//  After "release": sends every spooled result, oldest first (the loop
//  pass then writes them out and s_release_done tells the control thread).
//  Returns how many it sent.
static uint64_t
s_release (s_shard_t *shard, int64_t now_ms)
{
    //  Another hold may come meanwhile: it spools onto a list of its own
    s_result_t *result = shard->held_head;
    shard->held_head = shard->held_tail = NULL;
    uint64_t sent = 0;
    while (result) {
        s_result_t *next = result->next;
        s_result_send (shard, result, now_ms);
        result = next;
        sent++;
    }
    return sent;
}

static void
s_on_result_ack (s_shard_t *shard, uint32_t index, const proto_ack_t *ack,
                 int64_t now_ms)
{
    uint32_t number = (uint32_t) (shard->base + index);
    uint64_t key = s_fingerprint (number, ack->job, ack->step, ack->attempt);
    uint64_t *slot = s_map_find (&shard->outstanding, key);
    s_result_t *result = slot ? (s_result_t *) (uintptr_t) *slot : NULL;
    if (!result || result->agent != index) {
        s_count (shard, C_DUP_RESULT_ACKS);
        s_job_event (shard, ack->job, S_JOB_DUP_ACK, now_ms);
        return;
    }
    s_map_delete (&shard->outstanding, key);
    s_unacked_unlink (shard, result);
    atomic_fetch_sub_explicit (&shard->pending, 1, memory_order_relaxed);
    s_count (shard, C_RESULT_ACKS);
    s_job_event (shard, ack->job, S_JOB_ACK, now_ms);
    s_result_free (&result);
}

//  Sends every unacknowledged result of agent INDEX again (after a new
//  welcome: the broker may have restarted).
static void
s_resend_agent (s_shard_t *shard, uint32_t index, int64_t now_ms)
{
    s_result_t *result = shard->unacked_head;
    while (result) {
        s_result_t *next = result->next;
        if (result->agent == index) {
            s_send_or_batch (shard, result);
            s_count (shard, C_RESENT);
            result->sent_ms = now_ms;
            s_unacked_unlink (shard, result);
            s_unacked_link (shard, result);
        }
        result = next;
    }
}

//  Results without an ack for S_RESEND_MS go again, as from a spool.
static void
s_resend_due (s_shard_t *shard, int64_t now_ms)
{
    s_result_t *stop = shard->unacked_tail;
    while (shard->unacked_head && shard->unacked_head->sent_ms + S_RESEND_MS
                                      <= now_ms) {
        s_result_t *result = shard->unacked_head;
        s_unacked_unlink (shard, result);
        if (shard->agents [result->agent].state == S_AGENT_WELCOMED) {
            s_send_bytes (shard, result->agent, result->data, result->size);
            s_count (shard, C_RESENT);
        }
        result->sent_ms = now_ms;
        s_unacked_link (shard, result);
        if (result == stop)
            break;
    }
}

//  ---------------------------------------------------------------------
//  Commands

//  True when NODES (from a command or cancel) names agent INDEX. A long
//  list from a SUB body is looked up in the cached set.
static bool
s_meant_for (s_shard_t *shard, uint32_t index, const proto_msg_t *msg,
             bool cached)
{
    if (!msg->nodes)
        return true;
    const char *id = shard->agents [index].id;
    if (cached && shard->cache_nodes)
        return zhashx_lookup (shard->cache_nodes, id) != NULL;
    for (size_t at = 0; at < msg->node_count; at++)
        if (strcmp (msg->nodes [at], id) == 0)
            return true;
    return false;
}

//  Ack, then started unless --no-started.
static void
s_send_ack_started (s_shard_t *shard, uint32_t index, const char *job,
                    uint32_t step, uint32_t attempt)
{
    s_send_progress (shard, index, PROTO_ACK, job, step, attempt);
    if (shard->swarm->config.send_started)
        s_send_progress (shard, index, PROTO_STARTED, job, step, attempt);
}

//  ---------------------------------------------------------------------
//  Live output (--live-output): `test lines` run as gridagent runs it

//  Bytes of "line 1\n" .. "line LINES\n".
static uint64_t
s_lines_len (uint64_t lines)
{
    uint64_t total = 0;
    uint64_t low = 1;
    for (uint64_t digits = 1; low <= lines; digits++, low *= 10) {
        uint64_t high = low * 10 - 1 < lines ? low * 10 - 1 : lines;
        total += (high - low + 1) * (5 + digits + 1);
    }
    return total;
}

//  Writes LEN bytes of the lines from OFFSET into OUT.
static void
s_lines_fill (uint64_t offset, uint8_t *out, size_t len)
{
    //  The first line that ends past OFFSET (each line is 7 bytes or more)
    uint64_t low = 1, high = offset / 7 + 1;
    while (low < high) {
        uint64_t middle = low + (high - low) / 2;
        if (s_lines_len (middle) > offset)
            high = middle;
        else
            low = middle + 1;
    }
    uint64_t line = low;
    size_t within = (size_t) (offset - s_lines_len (line - 1));
    size_t done = 0;
    while (done < len) {
        char text [32];
        size_t text_len = (size_t) snprintf (text, sizeof text,
                                             "line %" PRIu64 "\n", line++);
        size_t take = text_len - within < len - done ? text_len - within
                                                     : len - done;
        memcpy (out + done, text + within, take);
        done += take;
        within = 0;
    }
}

//  Writes LEN bytes from OFFSET of the stream an agent keeps of TOTAL
//  bytes written under CAP: all of them, or past CAP the first cap / 2
//  and the last cap - cap / 2 (as gridagent keeps a stream).
static void
s_kept_fill (uint64_t total, uint64_t cap, uint64_t offset, uint8_t *out,
             size_t len)
{
    uint64_t head = cap / 2;
    uint64_t dropped = total > cap ? total - cap : 0;
    if (dropped && offset < head && offset + len > head) {
        size_t first = (size_t) (head - offset);
        s_lines_fill (offset, out, first);
        s_lines_fill (head + dropped, out + first, len - first);
    }
    else
        s_lines_fill (dropped && offset >= head ? offset + dropped : offset,
                      out, len);
}

//  Lines TASK has written by NOW_MS.
static uint64_t
s_task_lines (const s_task_t *task, int64_t now_ms)
{
    if (task->interval_ms <= 0 || now_ms >= task->end_ms)
        return task->count;
    uint64_t lines = 1 + (uint64_t) ((now_ms - task->started_ms)
                                     / task->interval_ms);
    return lines < task->count ? lines : task->count;
}

//  The key of the piece at OFFSET of the stdout of the attempt whose
//  result has KEY; never 0.
static uint64_t
s_piece_key (uint64_t key, uint64_t offset)
{
    uint64_t hash = key ^ ((offset + 1) * 0x9e3779b97f4a7c15ULL);
    hash ^= hash >> 31;
    hash *= 0xbf58476d1ce4e5b9ULL;
    hash ^= hash >> 29;
    return hash ? hash : 1;
}

static void
s_count_add (s_shard_t *shard, s_counter_t counter, uint64_t value)
{
    atomic_fetch_add_explicit (&shard->counters [counter], value,
                               memory_order_relaxed);
}

//  Sends the piece of TASK's kept stdout (TOTAL bytes written, kept under
//  CAP) at OFFSET, LEN bytes, saying SIZE; it is kept until its
//  output_ack and sent again as a result is (gridagent spools it).
//  Returns its key in the shard's outstanding map, or 0 when it could
//  not be made.
static uint64_t
s_piece_send (s_shard_t *shard, const s_task_t *task, uint64_t total,
              uint64_t cap, uint64_t offset, size_t len, uint64_t size,
              bool live, int64_t now_ms)
{
    uint8_t *data = (uint8_t *) malloc (len);
    assert (data);
    s_kept_fill (total, cap, offset, data, len);
    proto_msg_t piece;
    memset (&piece, 0, sizeof piece);
    piece.type = PROTO_OUTPUT;
    piece.node = shard->agents [task->agent].id;
    piece.job = (char *) task->job;
    piece.step = task->step;
    piece.attempt = task->attempt;
    piece.stream = "stdout";
    piece.offset = offset;
    piece.chunk = data;
    piece.chunk_len = len;
    piece.size = size;
    pw_reset (shard->writer);
    int rc = proto_msg_encode (&piece, shard->writer);
    free (data);
    if (rc != 0) {
        s_log ("internal: an output piece of %s does not encode", task->job);
        return 0;
    }
    s_result_t *self = s_result_wrap (shard, task->agent, task->job,
                                      task->step, task->attempt, false);
    self->key = s_piece_key (self->key, offset);
    self->piece_bytes = (uint32_t) len;
    self->sent_ms = now_ms;
    uint64_t *slot = s_map_insert (&shard->outstanding, self->key);
    if (*slot) {
        //  The same piece again (an attempt run twice): the new one holds
        s_result_t *old = (s_result_t *) (uintptr_t) *slot;
        s_unacked_unlink (shard, old);
        s_result_free (&old);
    }
    *slot = (uintptr_t) self;
    s_unacked_link (shard, self);
    s_count (shard, C_OUTPUTS);
    s_count_add (shard, C_OUTPUT_BYTES, len);
    if (live) {
        s_count (shard, C_LIVE_OUTPUTS);
        s_count_add (shard, C_LIVE_BYTES, len);
    }
    if (shard->agents [task->agent].state == S_AGENT_WELCOMED)
        s_send_bytes (shard, task->agent, self->data, self->size);
    return self->key;
}

static void
s_on_output_ack (s_shard_t *shard, uint32_t index, const proto_msg_t *ack)
{
    uint32_t number = (uint32_t) (shard->base + index);
    uint64_t key = s_piece_key (s_fingerprint (number, ack->job, ack->step,
                                               ack->attempt),
                                ack->offset);
    uint64_t *slot = s_map_find (&shard->outstanding, key);
    s_result_t *piece = slot ? (s_result_t *) (uintptr_t) *slot : NULL;
    if (!piece || piece->agent != index || !piece->piece_bytes
        || strcmp (ack->stream, "stdout") != 0) {
        s_count (shard, C_DUP_OUTPUT_ACKS);
        return;
    }
    s_map_delete (&shard->outstanding, key);
    s_unacked_unlink (shard, piece);
    s_count (shard, C_OUTPUT_ACKS);
    s_count_add (shard, C_OUTPUT_ACKED_BYTES, piece->piece_bytes);
    s_result_free (&piece);
}

//  TASK's next live piece, as gridagent's live round sends it: what the
//  task wrote since its last piece, of the stream's first cap / 2 bytes
//  (those the cap never moves), at most a piece's bytes; only when its
//  agent was granted live_output and has a piece of its --output-rate
//  budget left.
static void
s_task_live (s_shard_t *shard, s_task_t *task, int64_t now_ms)
{
    s_live_t *live = &shard->live [task->agent];
    int64_t rate = shard->swarm->config.output_rate;
    if (!live->granted || rate <= 0
        || shard->agents [task->agent].state != S_AGENT_WELCOMED)
        return;
    if (live->refilled_ms != now_ms) {
        int64_t elapsed_ms = live->refilled_ms ? now_ms - live->refilled_ms
                                               : 1000;
        live->refilled_ms = now_ms;
        live->tokens += (double) elapsed_ms * (double) rate / 1000.0;
        if (live->tokens > (double) rate)
            live->tokens = (double) rate;
    }
    if (live->tokens < 1.0)
        return;
    //  One live piece in flight: the next waits for its output_ack (or
    //  the re-send interval), and takes what was written meanwhile
    if (task->wait_key && now_ms - task->wait_ms < S_RESEND_MS
        && s_map_find (&shard->outstanding, task->wait_key))
        return;
    task->wait_key = 0;
    uint64_t written = s_lines_len (s_task_lines (task, now_ms));
    uint64_t head = live->cap / 2;
    uint64_t ready = written < head ? written : head;
    if (ready <= task->sent)
        return;
    size_t take = ready - task->sent < PROTO_MAX_CHUNK
                      ? (size_t) (ready - task->sent)
                      : PROTO_MAX_CHUNK;
    task->wait_key = s_piece_send (shard, task, written, live->cap,
                                   task->sent, take, task->sent + take,
                                   true, now_ms);
    task->wait_ms = now_ms;
    task->sent += take;
    live->tokens -= 1.0;
}

//  Ends TASK as gridagent ends an attempt: the rest of its kept stream
//  in pieces from where the live ones stopped, then its result, which
//  says the stream's size when pieces carry it. CANCELLED: stopped at
//  NOW_MS with what it wrote by then, for REASON.
static void
s_task_finish (s_shard_t *shard, s_task_t *task, int64_t now_ms,
               bool cancelled, const char *reason)
{
    uint32_t index = task->agent;
    uint64_t cap = shard->live [index].cap;
    uint64_t total = s_lines_len (cancelled ? s_task_lines (task, now_ms)
                                            : task->count);
    uint64_t kept = total < cap ? total : cap;
    proto_msg_t result;
    memset (&result, 0, sizeof result);
    result.type = PROTO_RESULT;
    result.node = shard->agents [index].id;
    result.job = task->job;
    result.step = task->step;
    result.attempt = task->attempt;
    result.duration_ms = (uint64_t) (now_ms - task->started_ms);
    result.status = cancelled ? "cancelled" : "success";
    result.exit_code = cancelled ? -1 : 0;
    result.error = cancelled && reason ? (char *) reason : "";
    size_t head_len = kept < PROTO_OUTPUT_HEAD ? (size_t) kept
                                               : PROTO_OUTPUT_HEAD;
    char *head = (char *) malloc (head_len + 1);
    assert (head);
    s_kept_fill (total, cap, 0, (uint8_t *) head, head_len);
    head [head_len] = 0;
    result.output = head;
    if (kept > PROTO_OUTPUT_HEAD || total > kept || task->sent) {
        result.output_size = kept;
        result.output_dropped = total - kept;
        for (uint64_t offset = task->sent; offset < kept;
             offset += PROTO_MAX_CHUNK) {
            size_t take = kept - offset < PROTO_MAX_CHUNK
                              ? (size_t) (kept - offset)
                              : PROTO_MAX_CHUNK;
            s_piece_send (shard, task, total, cap, offset, take, kept, false,
                          now_ms);
        }
    }
    pw_reset (shard->writer);
    int rc = proto_msg_encode (&result, shard->writer);
    free (head);
    shard->agents [index].running--;
    if (rc != 0) {
        s_log ("internal: the result of %s does not encode", task->job);
        return;
    }
    s_result_send (shard, s_result_wrap (shard, index, task->job, task->step,
                                         task->attempt, cancelled),
                   now_ms);
}

//  Whether the live round of agent INDEX begins at NOW_MS, and when its
//  next one is due (*NEXT_MS). As gridagent's timer, each agent's round
//  comes every S_LIVE_MS from a moment of its own (its first round at a
//  random point of the first S_LIVE_MS), so that a fleet's pieces are
//  spread over the round; with --live-aligned every agent of a shard
//  fires at once (the worst case: a fleet whose rounds line up).
static bool
s_live_round (s_shard_t *shard, uint32_t index, bool aligned_round,
              int64_t now_ms, int64_t *next_ms)
{
    if (shard->swarm->config.live_aligned) {
        *next_ms = shard->next_live_ms;
        return aligned_round;
    }
    s_live_t *live = &shard->live [index];
    if (!live->round_ms)
        live->round_ms = now_ms + (int64_t) (s_random (shard) % S_LIVE_MS);
    if (now_ms >= live->round_ms) {
        live->fired_ms = now_ms;
        while (live->round_ms <= now_ms)
            live->round_ms += S_LIVE_MS;
    }
    *next_ms = live->round_ms;
    return live->fired_ms == now_ms;
}

//  Each loop pass: the tasks that wrote their last line end; each
//  running task sends what it wrote since its last piece in its agent's
//  live round (s_live_round).
static void
s_tasks_run (s_shard_t *shard, int64_t now_ms)
{
    if (!shard->tasks || now_ms < shard->next_task_ms)
        return;
    bool aligned_round = now_ms >= shard->next_live_ms;
    if (aligned_round)
        shard->next_live_ms = now_ms + S_LIVE_MS;
    int64_t next_ms = INT64_MAX;
    s_task_t **link = &shard->tasks;
    while (*link) {
        s_task_t *task = *link;
        if (now_ms >= task->end_ms) {
            *link = task->next;
            s_task_finish (shard, task, now_ms, false, NULL);
            free (task);
            continue;
        }
        int64_t round_ms;
        if (s_live_round (shard, task->agent, aligned_round, now_ms,
                          &round_ms))
            s_task_live (shard, task, now_ms);
        if (round_ms < next_ms)
            next_ms = round_ms;
        if (task->end_ms < next_ms)
            next_ms = task->end_ms;
        link = &task->next;
    }
    shard->next_task_ms = next_ms;
}

//  Cancels the running tasks of JOB on agent INDEX.
static void
s_tasks_cancel (s_shard_t *shard, uint32_t index, const proto_msg_t *cancel,
                int64_t now_ms)
{
    s_task_t **link = &shard->tasks;
    while (*link) {
        s_task_t *task = *link;
        if (task->agent != index || strcmp (task->job, cancel->job) != 0) {
            link = &task->next;
            continue;
        }
        *link = task->next;
        s_task_finish (shard, task, now_ms, true, cancel->reason);
        free (task);
    }
}

//  An interval of `test lines` as its param's pattern lets it through:
//  "250ms", "2s", "0.5s". Returns milliseconds, or -1.
static int64_t
s_interval_ms (const char *text)
{
    char *end = NULL;
    int64_t whole = strtoll (text, &end, 10);
    if (end == text || whole < 0)
        return -1;
    if (strcmp (end, "ms") == 0)
        return whole;
    if (strcmp (end, "s") == 0)
        return whole * 1000;
    if (*end != '.')
        return -1;
    int64_t fraction = 0, scale = 1000;
    for (end++; *end >= '0' && *end <= '9' && scale > 1; end++) {
        scale /= 10;
        fraction += (*end - '0') * scale;
    }
    return strcmp (end, "s") == 0 ? whole * 1000 + fraction : -1;
}

//  True when COMMAND is `test lines`, which --live-output runs.
static bool
s_is_lines (const proto_msg_t *command)
{
    return strcmp (command->backend, "test") == 0
           && strcmp (command->action, "lines") == 0;
}

//  Starts `test lines` on agent INDEX: COMMAND's count lines, one every
//  interval (defaults as the real backend's: 1 line, 1 s). The ack and
//  started go at once unless the task ends within the hold.
static void
s_task_start (s_shard_t *shard, uint32_t index, const proto_msg_t *command,
              int64_t hold_ms, int64_t now_ms)
{
    s_task_t *task = (s_task_t *) zmalloc (sizeof (s_task_t));
    task->agent = index;
    snprintf (task->job, sizeof task->job, "%s", command->job);
    task->step = command->step;
    task->attempt = command->attempt;
    task->count = 1;
    task->interval_ms = 1000;
    for (size_t at = 0; at < command->param_count; at++) {
        const proto_kv_t *param = &command->params [at];
        if (strcmp (param->key, "count") == 0) {
            long long count = strtoll (param->value, NULL, 10);
            task->count = count > 0 ? (uint64_t) count : 1;
        }
        else
        if (strcmp (param->key, "interval") == 0) {
            int64_t interval_ms = s_interval_ms (param->value);
            task->interval_ms = interval_ms >= 0 ? interval_ms : 1000;
        }
    }
    task->started_ms = now_ms;
    task->end_ms = now_ms + (int64_t) (task->count - 1) * task->interval_ms;
    task->next = shard->tasks;
    shard->tasks = task;
    shard->next_task_ms = now_ms;
    shard->agents [index].running++;
    if (hold_ms > 0 && task->end_ms - now_ms > hold_ms)
        s_send_ack_started (shard, index, command->job, command->step,
                            command->attempt);
}

//  The blob a `file put` names (its sha256 param, *SIZE_P its size), or
//  NULL for any other command.
static const char *
s_blob_of (const proto_msg_t *command, uint64_t *size_p)
{
    if (strcmp (command->backend, "file") != 0
        || strcmp (command->action, "put") != 0)
        return NULL;
    const char *sha256 = NULL;
    for (size_t at = 0; at < command->param_count; at++) {
        if (strcmp (command->params [at].key, "sha256") == 0)
            sha256 = command->params [at].value;
        if (strcmp (command->params [at].key, "size") == 0)
            *size_p = strtoull (command->params [at].value, NULL, 10);
    }
    return sha256;
}

static void
s_blob_ask (s_shard_t *shard, uint32_t index)
{
    s_fetch_t *fetch = &shard->fetches [index];
    proto_msg_t get = {
        .type = PROTO_BLOB_GET, .node = shard->agents [index].id,
        .sha256 = fetch->sha256, .offset = fetch->offset
    };
    s_send_msg (shard, index, &get);
}

//  A blob_chunk: written nowhere, counted; the next is asked for, or the
//  command that waited is answered.
static void
s_on_blob_chunk (s_shard_t *shard, uint32_t index, const proto_msg_t *chunk,
                 int64_t now_ms)
{
    s_fetch_t *fetch = shard->fetches ? &shard->fetches [index] : NULL;
    if (!fetch || !fetch->sha256 [0] || strcmp (fetch->sha256, chunk->sha256)
        || chunk->offset != fetch->offset)
        return;
    if (chunk->error)
        s_count (shard, C_BLOB_ERRORS);
    else {
        s_count (shard, C_BLOB_CHUNKS);
        s_count_add (shard, C_BLOB_BYTES, chunk->chunk_len);
        fetch->offset += chunk->chunk_len;
        if (fetch->offset < fetch->size && chunk->chunk_len) {
            s_blob_ask (shard, index);
            return;
        }
        s_count (shard, C_BLOBS);
        memcpy (fetch->cached, fetch->sha256, sizeof fetch->cached);
    }
    fetch->sha256 [0] = 0;
    proto_msg_t command = {
        .type = PROTO_COMMAND, .job = fetch->job, .step = fetch->step,
        .attempt = fetch->attempt, .backend = "file", .action = "put"
    };
    s_result_t *result = s_result_new (shard, index, &command, 0);
    if (result)
        s_result_send (shard, result, now_ms);
}

static void
s_take (s_shard_t *shard, uint32_t index, const proto_msg_t *command,
        int64_t now_ms)
{
    int64_t hold_ms = shard->swarm->config.progress_hold_ms;
    //  A result held back comes late: its ack and started go at once
    if (atomic_load_explicit (&shard->swarm->holding, memory_order_relaxed))
        hold_ms = 0;
    if (hold_ms == 0)
        s_send_ack_started (shard, index, command->job, command->step,
                            command->attempt);
    s_count (shard, C_COMMANDS);
    s_job_event (shard, command->job, S_JOB_COMMAND, now_ms);
    if (shard->live && s_is_lines (command)) {
        s_task_start (shard, index, command, hold_ms, now_ms);
        return;
    }
    uint64_t size = 0;
    const char *sha256 = shard->fetches ? s_blob_of (command, &size) : NULL;
    s_fetch_t *fetch = sha256 ? &shard->fetches [index] : NULL;
    if (fetch && strcmp (fetch->cached, sha256) != 0 && !fetch->sha256 [0]
        && strlen (sha256) == 64) {
        //  Answered when the blob is here (s_on_blob_chunk)
        snprintf (fetch->sha256, sizeof fetch->sha256, "%s", sha256);
        fetch->size = size;
        fetch->offset = 0;
        snprintf (fetch->job, sizeof fetch->job, "%s", command->job);
        fetch->step = command->step;
        fetch->attempt = command->attempt;
        if (hold_ms > 0)
            s_send_ack_started (shard, index, command->job, command->step,
                                command->attempt);
        s_blob_ask (shard, index);
        return;
    }
    int64_t delay_ms = s_delay_ms (shard, command);
    s_result_t *result = s_result_new (shard, index, command, delay_ms);
    if (!result) {
        s_log ("internal: the result of %s does not encode", command->job);
        if (hold_ms > 0)
            s_send_ack_started (shard, index, command->job, command->step,
                                command->attempt);
        return;
    }
    if (delay_ms > 0) {
        shard->agents [index].running++;
        s_heap_push (&shard->delayed, now_ms + delay_ms, (uintptr_t) result);
        //  Due strictly before the result, so RESULT is still in the heap
        //  (sent or not, never freed) when its progress comes due
        if (hold_ms > 0 && delay_ms > hold_ms)
            s_heap_push (&shard->delayed, now_ms + hold_ms,
                         (uintptr_t) result | S_DUE_PROGRESS);
    }
    else
        s_result_send (shard, result, now_ms);
}

static void
s_on_command (s_shard_t *shard, uint32_t index, const proto_msg_t *command,
              bool cached, int64_t now_ms)
{
    s_agent_t *agent = &shard->agents [index];
    if (!s_meant_for (shard, index, command, cached)) {
        s_count (shard, C_NOT_FOR_US);
        return;
    }
    if (agent->state != S_AGENT_WELCOMED) {
        //  The broker re-sends it directly after its ack timeout
        s_count (shard, C_UNWELCOMED);
        return;
    }
    uint32_t number = (uint32_t) (shard->base + index);
    uint64_t *seen = s_map_insert (
        &shard->seen, s_fingerprint (number, command->job, command->step, 0));
    uint32_t attempt = (uint32_t) *seen;
    if (attempt == 0 || attempt < command->attempt) {
        if (attempt) {
            s_count (shard, C_RERUNS);
            s_job_event (shard, command->job, S_JOB_RERUN, now_ms);
        }
        *seen = command->attempt;
        s_take (shard, index, command, now_ms);
        return;
    }
    //  Seen before: ack again, never run again
    s_send_progress (shard, index, PROTO_ACK, command->job, command->step,
                     command->attempt);
    if (attempt > command->attempt) {
        s_count (shard, C_STALE_COMMANDS);
        return;
    }
    s_count (shard, C_DUP_COMMANDS);
    s_job_event (shard, command->job, S_JOB_DUP_COMMAND, now_ms);
    if (!(*seen & S_SEEN_ANSWERED))
        return;     //  Still delayed: the result follows
    uint64_t key = s_fingerprint (number, command->job, command->step,
                                  command->attempt);
    uint64_t *slot = s_map_find (&shard->outstanding, key);
    if (slot) {
        s_result_t *result = (s_result_t *) (uintptr_t) *slot;
        s_send_bytes (shard, index, result->data, result->size);
    }
    else {
        //  Acknowledged already: the answer is deterministic, so send it
        //  again untracked (its ack will count as a duplicate ack)
        s_result_t *result = s_result_new (shard, index, command, 0);
        if (result)
            s_send_bytes (shard, index, result->data, result->size);
        s_result_free (&result);
    }
    s_count (shard, C_RESENT);
}

static void
s_on_cancel (s_shard_t *shard, uint32_t index, const proto_msg_t *cancel,
             bool cached, int64_t now_ms)
{
    if (!s_meant_for (shard, index, cancel, cached)
        || shard->agents [index].state != S_AGENT_WELCOMED)
        return;
    s_count (shard, C_CANCELS);
    //  Delayed answers of that job end now, as cancelled
    for (size_t at = 0; at < shard->delayed.count; at++) {
        if (shard->delayed.items [at].item & S_DUE_PROGRESS)
            continue;
        s_result_t *result
            = (s_result_t *) (uintptr_t) shard->delayed.items [at].item;
        if (result->agent != index || result->cancelled
            || strcmp (result->job, cancel->job) != 0)
            continue;
        proto_msg_t msg;
        memset (&msg, 0, sizeof msg);
        msg.type = PROTO_RESULT;
        msg.node = shard->agents [index].id;
        msg.job = result->job;
        msg.step = result->step;
        msg.attempt = result->attempt;
        msg.status = "cancelled";
        msg.output = "";
        msg.error = (char *) cancel->reason;
        msg.exit_code = -1;
        pw_reset (shard->writer);
        if (proto_msg_encode (&msg, shard->writer) != 0)
            continue;
        //  The heap entry stays and is dropped when due; the cancelled
        //  answer goes now
        result->cancelled = true;
        shard->agents [index].running--;
        s_result_send (shard,
                       s_result_wrap (shard, index, result->job, result->step,
                                      result->attempt, true),
                       now_ms);
    }
    if (shard->live)
        s_tasks_cancel (shard, index, cancel, now_ms);
}

//  The transport: subscribes agent INDEX's SUB to TOPIC; AGAIN:
//  unsubscribe first, so that the subscription is sent again.
static void
s_subscribe (s_shard_t *shard, uint32_t index, const char *topic,
             bool again)
{
    size_t size = strlen (topic);
    if (shard->conns) {
        zmtp_t *conn = &shard->conns [2 * index + 1];
        if (again)
            zmtp_subscribe (conn, topic, size, false);
        zmtp_subscribe (conn, topic, size, true);
        s_mark_dirty (shard, index, 2);
        return;
    }
    void *socket = shard->agents [index].sub;
    if (again)
        zmq_setsockopt (socket, ZMQ_UNSUBSCRIBE, topic, size);
    zmq_setsockopt (socket, ZMQ_SUBSCRIBE, topic, size);
}

//  Subscribes agent INDEX to its topics: all/, its groups, every prefix of
//  its labels' values, node/<id>/ (PROTOCOL.md section 3).
static void
s_subscribe_all (s_shard_t *shard, uint32_t index, bool again)
{
    const s_config_t *config = &shard->swarm->config;
    s_agent_t *agent = &shard->agents [index];
    char topic [NAME_MAX_LEN * 3 + 32];
    s_subscribe (shard, index, "all/", again);
    for (size_t at = 0; at < config->group_count; at++) {
        snprintf (topic, sizeof topic, "group/%s/", config->groups [at]);
        s_subscribe (shard, index, topic, again);
    }
    for (size_t at = 0; at < config->label_count; at++) {
        const char *value = config->labels [at].value;
        const char *dot = value;
        while (dot) {
            dot = strchr (dot, '.');
            int len = dot ? (int) (dot - value) : (int) strlen (value);
            snprintf (topic, sizeof topic, "label/%s/%.*s/",
                      config->labels [at].key, len, value);
            s_subscribe (shard, index, topic, again);
            if (dot)
                dot++;
        }
    }
    snprintf (topic, sizeof topic, "node/%s/", agent->id);
    s_subscribe (shard, index, topic, again);
}

static void
s_on_welcome (s_shard_t *shard, uint32_t index, const proto_msg_t *welcome,
              int64_t now_ms)
{
    s_agent_t *agent = &shard->agents [index];
    if (strcmp (welcome->node, agent->id) != 0)
        return;
    bool first = agent->state != S_AGENT_WELCOMED;
    agent->state = S_AGENT_WELCOMED;
    agent->heartbeat_ms = welcome->heartbeat_ms < 100 ? 100
                                                      : welcome->heartbeat_ms;
    agent->batch_results = proto_msg_has_feature (welcome,
                                                  PROTO_FEATURE_RESULTS);
    if (shard->live) {
        s_live_t *live = &shard->live [index];
        live->granted = proto_msg_has_feature (welcome,
                                               PROTO_FEATURE_LIVE_OUTPUT);
        live->cap = welcome->max_output && welcome->max_output < S_OUTPUT_CAP
                        ? welcome->max_output
                        : S_OUTPUT_CAP;
        //  Its unacknowledged pieces go again: its streams need not wait
        for (s_task_t *task = shard->tasks; task; task = task->next)
            if (task->agent == index)
                task->wait_key = 0;
    }
    s_arm (shard, index, now_ms + agent->heartbeat_ms);
    if (first) {
        s_count (shard, C_WELCOMED);
        int64_t last = atomic_load (&shard->swarm->last_welcome_ms);
        while (last < now_ms
               && !atomic_compare_exchange_weak (
                   &shard->swarm->last_welcome_ms, &last, now_ms))
            ;
        if (shard->swarm->config.verbose)
            s_log ("%s welcomed (heartbeat %u ms)", agent->id,
                   agent->heartbeat_ms);
    }
    //  With CURVE the broker grants topics only to a node it knows, so
    //  the subscriptions sent at connect time were refused: again, as
    //  gridagent does
    if (shard->swarm->config.curve_server [0])
        s_subscribe_all (shard, index, true);
    s_resend_agent (shard, index, now_ms);
}

static void
s_on_error (s_shard_t *shard, uint32_t index, const proto_msg_t *error,
            int64_t now_ms)
{
    s_agent_t *agent = &shard->agents [index];
    s_count (shard, C_ERRORS);
    if (shard->swarm->config.verbose)
        s_log ("%s: broker says %s: %s", agent->id, error->code,
               error->message);
    if (strcmp (error->code, "unknown_node") == 0) {
        s_count (shard, C_UNKNOWN_NODE);
        if (agent->state == S_AGENT_WELCOMED) {
            //  Re-registration: it no longer counts as welcomed
            atomic_fetch_sub_explicit (&shard->counters [C_WELCOMED], 1,
                                       memory_order_relaxed);
            s_hello (shard, index, now_ms, false);
        }
    }
}

//  ---------------------------------------------------------------------
//  Sockets

//  Receives one message of up to 3 frames into FRAMES (initialised by the
//  caller). Returns the frame count, 0 when nothing is waiting, -1 when
//  it had more frames than that (dropped).
static int
s_recv (void *socket, zmq_msg_t *frames)
{
    int count = 0;
    bool more = true;
    while (more) {
        zmq_msg_t *frame = &frames [count < 3 ? count : 2];
        if (zmq_msg_recv (frame, socket, ZMQ_DONTWAIT) < 0)
            return count == 0 ? 0 : -1;
        more = zmq_msg_more (frame);
        count++;
    }
    return count <= 3 ? count : -1;
}

static void
s_on_dealer (s_shard_t *shard, uint32_t index, const void *data,
             size_t size, int64_t now_ms)
{
    proto_msg_t *msg = NULL;
    char why [256];
    if (proto_msg_decode (data, size, &msg, why, sizeof why) != 0) {
        s_count (shard, C_MALFORMED);
        if (shard->swarm->config.verbose)
            s_log ("%s: malformed message from the broker: %s",
                   shard->agents [index].id, why);
        return;
    }
    switch (msg->type) {
        case PROTO_WELCOME:
            s_on_welcome (shard, index, msg, now_ms);
            break;
        case PROTO_RESULT_ACK: {
            proto_ack_t ack = { .job = msg->job, .step = msg->step,
                                .attempt = msg->attempt };
            s_on_result_ack (shard, index, &ack, now_ms);
            break;
        }
        case PROTO_RESULT_ACKS:
            for (size_t at = 0; at < msg->ack_count; at++)
                s_on_result_ack (shard, index, &msg->acks [at], now_ms);
            break;
        case PROTO_OUTPUT_ACKS:
            for (size_t at = 0; at < msg->ack_count; at++) {
                proto_msg_t one;
                memset (&one, 0, sizeof one);
                one.job = (char *) msg->acks [at].job;
                one.step = msg->acks [at].step;
                one.attempt = msg->acks [at].attempt;
                one.stream = (char *) msg->acks [at].stream;
                one.offset = msg->acks [at].offset;
                s_on_output_ack (shard, index, &one);
            }
            break;
        case PROTO_OUTPUT_ACK:
            s_on_output_ack (shard, index, msg);
            break;
        case PROTO_COMMAND:
            s_on_command (shard, index, msg, false, now_ms);
            break;
        case PROTO_CANCEL:
            s_on_cancel (shard, index, msg, false, now_ms);
            break;
        case PROTO_ERROR:
            s_on_error (shard, index, msg, now_ms);
            break;
        case PROTO_BLOB_CHUNK:
            s_on_blob_chunk (shard, index, msg, now_ms);
            break;
        default:
            s_count (shard, C_MALFORMED);
            break;
    }
    proto_msg_destroy (&msg);
}

static void
s_cache_clear (s_shard_t *shard)
{
    free (shard->cache_body);
    shard->cache_body = NULL;
    shard->cache_size = 0;
    proto_msg_destroy (&shard->cache_msg);
    zhashx_destroy (&shard->cache_nodes);
}

static void
s_on_sub (s_shard_t *shard, uint32_t index, const void *data, size_t size,
          int64_t now_ms)
{
    if (!shard->cache_msg || size != shard->cache_size
        || memcmp (data, shard->cache_body, size) != 0) {
        s_cache_clear (shard);
        char why [256];
        if (proto_msg_decode (data, size, &shard->cache_msg, why, sizeof why)
            != 0) {
            s_count (shard, C_MALFORMED);
            return;
        }
        shard->cache_body = malloc (size);
        assert (shard->cache_body);
        memcpy (shard->cache_body, data, size);
        shard->cache_size = size;
        proto_msg_t *msg = shard->cache_msg;
        if (msg->nodes && msg->node_count >= S_NODE_SET_MIN) {
            shard->cache_nodes = zhashx_new ();
            for (size_t at = 0; at < msg->node_count; at++)
                zhashx_insert (shard->cache_nodes, msg->nodes [at], msg);
        }
    }
    const proto_msg_t *msg = shard->cache_msg;
    if (msg->type == PROTO_COMMAND)
        s_on_command (shard, index, msg, true, now_ms);
    else if (msg->type == PROTO_CANCEL)
        s_on_cancel (shard, index, msg, true, now_ms);
    else
        s_count (shard, C_MALFORMED);
}

//  A message of COUNT frames (COUNT < 0: more than FRAMES holds) for
//  agent INDEX from its DEALER (WHICH 1) or SUB (2), from either
//  transport.
static void
s_on_frames (s_shard_t *shard, uint32_t index, uint8_t which,
             const zmtp_frame_t *frames, int count, int64_t now_ms)
{
    if (which == 1) {
        //  One body frame; tolerate an empty delimiter before it
        int body = count == 1 ? 0
                   : count == 2 && frames [0].size == 0 ? 1
                                                        : -1;
        if (body < 0)
            s_count (shard, C_MALFORMED);
        else
            s_on_dealer (shard, index, frames [body].data,
                         frames [body].size, now_ms);
    }
    else {
        //  The topic, then the body
        if (count != 2)
            s_count (shard, C_MALFORMED);
        else
            s_on_sub (shard, index, frames [1].data, frames [1].size,
                      now_ms);
    }
}

//  Reads what waits on one socket of agent INDEX (WHICH: 1 DEALER, 2 SUB).
static void
s_drain (s_shard_t *shard, uint32_t index, uint8_t which, int64_t now_ms)
{
    s_agent_t *agent = &shard->agents [index];
    void *socket = which == 1 ? agent->dealer : agent->sub;
    if (!socket)
        return;
    zmq_msg_t frames [3];
    for (int at = 0; at < 3; at++)
        zmq_msg_init (&frames [at]);
    int read = 0;
    while (read < S_READ_BATCH) {
        int count = s_recv (socket, frames);
        if (count == 0)
            break;
        read++;
        zmtp_frame_t views [3];
        for (int at = 0; at < count && at < 3; at++) {
            views [at].data = (const uint8_t *) zmq_msg_data (&frames [at]);
            views [at].size = zmq_msg_size (&frames [at]);
        }
        s_on_frames (shard, index, which, views, count, now_ms);
    }
    for (int at = 0; at < 3; at++)
        zmq_msg_close (&frames [at]);
    if (read == S_READ_BATCH)
        s_mark_dirty (shard, index, which);     //  Fair share: come back
}

//  Looks at a socket whose mailbox fd woke epoll, or that was marked.
static void
s_socket_ready (s_shard_t *shard, uint32_t index, uint8_t which,
                int64_t now_ms)
{
    s_agent_t *agent = &shard->agents [index];
    void *socket = which == 1 ? agent->dealer : agent->sub;
    if (!socket)
        return;
    int events = 0;
    size_t len = sizeof events;
    //  Reading ZMQ_EVENTS also processes the socket's pending commands
    //  and resets its mailbox fd
    if (zmq_getsockopt (socket, ZMQ_EVENTS, &events, &len) != 0)
        return;
    if (which == 1 && agent->hello_pending && (events & ZMQ_POLLOUT))
        s_hello (shard, index, now_ms, false);
    if (events & ZMQ_POLLIN)
        s_drain (shard, index, which, now_ms);
}

//  A new socket with the options every agent socket gets (not connected).
static void *
s_socket_new (s_shard_t *shard, int type, zcert_t *cert)
{
    const s_config_t *config = &shard->swarm->config;
    void *socket = zmq_socket (shard->swarm->context, type);
    if (!socket)
        return NULL;
    int value = S_HWM;
    zmq_setsockopt (socket, ZMQ_SNDHWM, &value, sizeof value);
    zmq_setsockopt (socket, ZMQ_RCVHWM, &value, sizeof value);
    value = S_KERNEL_BUFFER;
    zmq_setsockopt (socket, ZMQ_SNDBUF, &value, sizeof value);
    zmq_setsockopt (socket, ZMQ_RCVBUF, &value, sizeof value);
    value = S_LINGER_MS;
    zmq_setsockopt (socket, ZMQ_LINGER, &value, sizeof value);
    int64_t max_size = PROTO_MAX_FRAME;
    zmq_setsockopt (socket, ZMQ_MAXMSGSIZE, &max_size, sizeof max_size);
    if (config->zmtp_heartbeat_ms > 0) {
        value = config->zmtp_heartbeat_ms;
        zmq_setsockopt (socket, ZMQ_HEARTBEAT_IVL, &value, sizeof value);
        value = config->zmtp_timeout_ms;
        zmq_setsockopt (socket, ZMQ_HEARTBEAT_TIMEOUT, &value, sizeof value);
        value = config->zmtp_ttl_ms;
        zmq_setsockopt (socket, ZMQ_HEARTBEAT_TTL, &value, sizeof value);
    }
    value = S_HANDSHAKE_MS;
    zmq_setsockopt (socket, ZMQ_HANDSHAKE_IVL, &value, sizeof value);
    //  Jittered reconnects, so that a restarted broker is not hit by the
    //  whole swarm in the same millisecond
    value = S_RECONNECT_MS + (int) (s_random (shard) % (2 * S_RECONNECT_MS));
    zmq_setsockopt (socket, ZMQ_RECONNECT_IVL, &value, sizeof value);
    value = S_RECONNECT_MAX_MS;
    zmq_setsockopt (socket, ZMQ_RECONNECT_IVL_MAX, &value, sizeof value);
    if (type == ZMQ_DEALER) {
        //  As gridagent: nothing queues for a broker that is not there
        value = 1;
        zmq_setsockopt (socket, ZMQ_IMMEDIATE, &value, sizeof value);
    }
    if (cert) {
        zcert_apply (cert, socket);
        zmq_setsockopt (socket, ZMQ_CURVE_SERVERKEY, config->curve_server,
                        40);
    }
    return socket;
}

//  Connects SOCKET to ENDPOINT, from local address SOURCE when not NULL
//  (libzmq's "tcp://source:0;destination" form).
static int
s_connect (void *socket, const char *endpoint, const char *source)
{
    char spec [512];
    if (source && strncmp (endpoint, "tcp://", 6) == 0)
        snprintf (spec, sizeof spec, "tcp://%s:0;%s", source, endpoint + 6);
    else
        snprintf (spec, sizeof spec, "%s", endpoint);
    if (zmq_connect (socket, spec) != 0) {
        s_log ("cannot connect to %s: %s", spec, zmq_strerror (errno));
        return -1;
    }
    return 0;
}

static int
s_watch_fd (s_shard_t *shard, void *socket, uint32_t index, uint8_t which)
{
    int fd = -1;
    size_t len = sizeof fd;
    if (zmq_getsockopt (socket, ZMQ_FD, &fd, &len) != 0)
        return -1;
    struct epoll_event event;
    memset (&event, 0, sizeof event);
    event.events = EPOLLIN;
    event.data.u64 = ((uint64_t) index << 2) | which;
    return epoll_ctl (shard->epoll_fd, EPOLL_CTL_ADD, fd, &event);
}

//  ---------------------------------------------------------------------
//  The ZMTP transport (--transport zmtp): the connections of agent I are
//  shard->conns [2 I] (DEALER, epoll tag I << 2 | 1) and [2 I + 1] (SUB,
//  tag I << 2 | 2)

static zmtp_t *
s_conn (s_shard_t *shard, uint64_t tag)
{
    return &shard->conns [2 * (tag >> 2) + ((tag & 3) == 2 ? 1 : 0)];
}

//  Schedules CONN's timer when it is due earlier than the one set (a
//  later one runs, finds nothing due and schedules the new time).
static void
s_conn_arm (s_shard_t *shard, zmtp_t *conn)
{
    if (conn->due_ms < conn->armed_ms) {
        conn->armed_ms = conn->due_ms;
        s_heap_push (&shard->conn_timers, conn->due_ms, conn->tag);
    }
}

//  The handshake ended: the SUB subscribes (again, after a reconnect), the
//  DEALER says a hello that waited for it.
static void
s_zmtp_on_ready (void *arg, zmtp_t *conn)
{
    s_shard_t *shard = (s_shard_t *) arg;
    uint32_t index = (uint32_t) (conn->tag >> 2);
    if ((conn->tag & 3) == 2)
        s_subscribe_all (shard, index, false);
    else
    if (shard->agents [index].hello_pending)
        s_hello (shard, index, shard->now_ms, false);
}

static void
s_zmtp_on_message (void *arg, zmtp_t *conn, const zmtp_frame_t *frames,
                   size_t count)
{
    s_shard_t *shard = (s_shard_t *) arg;
    s_on_frames (shard, (uint32_t) (conn->tag >> 2), (uint8_t) (conn->tag & 3),
                 frames, count > ZMTP_MAX_FRAMES ? -1 : (int) count,
                 shard->now_ms);
}

//  A connection dropped; the first that broke ZMTP is always told (say, a
//  broker that wants CURVE), the rest with --verbose.
static void
s_zmtp_on_drop (void *arg, zmtp_t *conn, const char *reason)
{
    static atomic_bool told;
    s_shard_t *shard = (s_shard_t *) arg;
    bool tell = shard->swarm->config.verbose
                || (shard->zmtp.stats.protocol_errors
                    && !atomic_exchange (&told, true));
    if (tell)
        s_log ("%s: %s connection lost: %s",
               shard->agents [conn->tag >> 2].id,
               (conn->tag & 3) == 2 ? "SUB" : "DEALER", reason);
}

//  The connection counters, where "stats" reads them.
static void
s_zmtp_publish (s_shard_t *shard)
{
    const zmtp_stats_t *stats = &shard->zmtp.stats;
    atomic_store_explicit (&shard->counters [C_CONNECTED], stats->ready,
                           memory_order_relaxed);
    atomic_store_explicit (&shard->counters [C_DISCONNECTS], stats->drops,
                           memory_order_relaxed);
    atomic_store_explicit (&shard->counters [C_PROTOCOL_ERRORS],
                           stats->protocol_errors, memory_order_relaxed);
    atomic_store_explicit (&shard->counters [C_PONGS], stats->pongs_received,
                           memory_order_relaxed);
}

//  After a release's pass wrote what it sent: "held" drops to 0 and, on
//  zmtp, "unsent_bytes" tells what the kernel did not take (its buffers
//  full while the broker reads nothing).
static void
s_release_done (s_shard_t *shard, uint64_t sent)
{
    uint64_t unsent = 0;
    for (size_t index = 0; shard->conns && index < shard->created; index++)
        unsent += zmtp_queued (&shard->conns [2 * index]);
    atomic_store_explicit (&shard->unsent_bytes, unsent,
                           memory_order_relaxed);
    atomic_fetch_sub_explicit (&shard->held, sent, memory_order_relaxed);
}

//  Opens agent INDEX's two connections; the hello waits for the DEALER's
//  handshake, the subscriptions for the SUB's.
static int
s_agent_start_zmtp (s_shard_t *shard, uint32_t index, int64_t now_ms)
{
    s_swarm_t *swarm = shard->swarm;
    const s_config_t *config = &swarm->config;
    size_t number = shard->base + index;
    const zmtp_endpoint_t *source
        = config->source_ip_count
              ? &swarm->sources [number % config->source_ip_count]
              : NULL;
    zmtp_t *dealer = &shard->conns [2 * index];
    zmtp_t *sub = &shard->conns [2 * index + 1];
    if (zmtp_open (sub, &shard->zmtp, ZMTP_SUB, ((uint64_t) index << 2) | 2,
                   &swarm->publish_peer, source, now_ms)
        != 0) {
        s_log ("cannot start agent %s: %s", shard->agents [index].id,
               strerror (errno));
        return -1;
    }
    if (zmtp_open (dealer, &shard->zmtp, ZMTP_DEALER,
                   ((uint64_t) index << 2) | 1, &swarm->broker_peer, source,
                   now_ms)
        != 0) {
        s_log ("cannot start agent %s: %s", shard->agents [index].id,
               strerror (errno));
        zmtp_close (sub);
        return -1;
    }
    s_conn_arm (shard, sub);
    s_conn_arm (shard, dealer);
    s_count (shard, C_CREATED);
    s_hello (shard, index, now_ms, false);
    return 0;
}

//  Creates agent INDEX's sockets: subscribe first, then connect the
//  DEALER and say hello (PROTOCOL.md 4.1 rule 1).
static int
s_agent_start (s_shard_t *shard, uint32_t index, int64_t now_ms)
{
    if (shard->conns)
        return s_agent_start_zmtp (shard, index, now_ms);
    const s_config_t *config = &shard->swarm->config;
    s_agent_t *agent = &shard->agents [index];
    size_t number = shard->base + index;
    const char *source = config->source_ip_count
                             ? config->source_ips [number
                                                   % config->source_ip_count]
                             : NULL;
    zcert_t *cert = config->curve_server [0] ? zcert_new () : NULL;
    if (config->curve_server [0] && !cert) {
        s_log ("cannot make a CURVE certificate");
        return -1;
    }
    agent->sub = s_socket_new (shard, ZMQ_SUB, cert);
    agent->dealer = agent->sub ? s_socket_new (shard, ZMQ_DEALER, cert) : NULL;
    zcert_destroy (&cert);
    if (agent->dealer)
        s_subscribe_all (shard, index, false);
    if (!agent->dealer || s_connect (agent->sub, config->publish_ep, source)
        || s_connect (agent->dealer, config->broker_ep, source)
        || s_watch_fd (shard, agent->dealer, index, 1) != 0
        || s_watch_fd (shard, agent->sub, index, 2) != 0) {
        s_log ("cannot start agent %s: %s", agent->id, zmq_strerror (errno));
        return -1;
    }
    s_count (shard, C_CREATED);
    s_hello (shard, index, now_ms, false);
    return 0;
}

//  ---------------------------------------------------------------------
//  The shard loop

static void
s_run_timers (s_shard_t *shard, int64_t now_ms)
{
    while (shard->conn_timers.count
           && shard->conn_timers.items [0].due_ms <= now_ms) {
        s_due_t due = shard->conn_timers.items [0];
        s_heap_pop (&shard->conn_timers);
        zmtp_t *conn = s_conn (shard, due.item);
        if (conn->armed_ms != due.due_ms)
            continue;       //  Re-armed since
        conn->armed_ms = INT64_MAX;
        if (conn->due_ms <= now_ms)
            zmtp_tick (conn, now_ms);
        s_conn_arm (shard, conn);
    }
    while (shard->timers.count && shard->timers.items [0].due_ms <= now_ms) {
        s_due_t due = shard->timers.items [0];
        s_heap_pop (&shard->timers);
        uint32_t index = (uint32_t) due.item;
        s_agent_t *agent = &shard->agents [index];
        if (agent->due_ms != due.due_ms)
            continue;       //  Re-armed since
        if (agent->state == S_AGENT_HELLO)
            s_hello (shard, index, now_ms, true);
        else if (agent->state == S_AGENT_WELCOMED) {
            proto_msg_t beat;
            memset (&beat, 0, sizeof beat);
            beat.type = PROTO_HEARTBEAT;
            beat.node = agent->id;
            beat.running = agent->running;
            if (s_send_msg (shard, index, &beat) == 0)
                s_count (shard, C_HEARTBEATS);
            s_arm (shard, index, now_ms + agent->heartbeat_ms);
        }
    }
    while (shard->delayed.count && shard->delayed.items [0].due_ms <= now_ms) {
        uint64_t item = shard->delayed.items [0].item;
        s_result_t *result
            = (s_result_t *) (uintptr_t) (item & ~S_DUE_PROGRESS);
        s_heap_pop (&shard->delayed);
        if (item & S_DUE_PROGRESS) {
            //  Not when a cancel already sent the result
            if (!result->cancelled
                && shard->agents [result->agent].state == S_AGENT_WELCOMED)
                s_send_ack_started (shard, result->agent, result->job,
                                    result->step, result->attempt);
            continue;
        }
        if (result->cancelled) {
            s_result_free (&result);
            continue;
        }
        shard->agents [result->agent].running--;
        s_result_send (shard, result, now_ms);
    }
    if (now_ms >= shard->next_resend_ms) {
        s_resend_due (shard, now_ms);
        shard->next_resend_ms = now_ms + S_RESEND_CHECK_MS;
    }
    s_tasks_run (shard, now_ms);
}

//  Agents the shard may have made by NOW_MS: all of them, or with --ramp
//  its share of the rate times the time since it began.
static size_t
s_ramp_allowed (s_shard_t *shard, int64_t now_ms)
{
    const s_config_t *config = &shard->swarm->config;
    if (!config->ramp)
        return shard->count;
    double per_ms = (double) config->ramp / 1000.0
                    * (double) shard->count / (double) config->agents;
    size_t allowed = (size_t) ((double) (now_ms - shard->started_ms + 1)
                               * per_ms) + 1;
    return allowed < shard->count ? allowed : shard->count;
}

static int
s_next_wait_ms (s_shard_t *shard, int64_t now_ms)
{
    if (shard->dirty_count || shard->batching_count
        || (shard->created < shard->count
            && shard->created < s_ramp_allowed (shard, now_ms)))
        return 0;
    if (shard->created < shard->count)
        return 5;
    int64_t due_ms = shard->next_resend_ms;
    if (shard->timers.count && shard->timers.items [0].due_ms < due_ms)
        due_ms = shard->timers.items [0].due_ms;
    if (shard->delayed.count && shard->delayed.items [0].due_ms < due_ms)
        due_ms = shard->delayed.items [0].due_ms;
    if (shard->conn_timers.count
        && shard->conn_timers.items [0].due_ms < due_ms)
        due_ms = shard->conn_timers.items [0].due_ms;
    if (shard->tasks && shard->next_task_ms < due_ms)
        due_ms = shard->next_task_ms;
    int64_t wait_ms = due_ms - now_ms;
    return wait_ms < 0 ? 0 : wait_ms > S_MAX_WAIT_MS ? S_MAX_WAIT_MS
                                                     : (int) wait_ms;
}

static void
s_shard_stop (s_shard_t *shard)
{
    //  Graceful stop: every registered agent says bye (rule 11)
    for (size_t index = 0; index < shard->created; index++) {
        s_agent_t *agent = &shard->agents [index];
        if (agent->state == S_AGENT_WELCOMED) {
            proto_msg_t bye;
            memset (&bye, 0, sizeof bye);
            bye.type = PROTO_BYE;
            bye.node = agent->id;
            bye.reason = "shutdown";
            if (s_send_msg (shard, (uint32_t) index, &bye) == 0)
                s_count (shard, C_BYES);
        }
        if (shard->conns) {
            //  The bye leaves now; the kernel delivers it after close
            zmtp_flush (&shard->conns [2 * index]);
            zmtp_close (&shard->conns [2 * index]);
            zmtp_close (&shard->conns [2 * index + 1]);
            continue;
        }
        if (agent->dealer)
            zmq_close (agent->dealer);
        if (agent->sub)
            zmq_close (agent->sub);
        agent->dealer = agent->sub = NULL;
    }
}

static void *
s_shard_run (void *arg)
{
    s_shard_t *shard = (s_shard_t *) arg;
    s_swarm_t *swarm = shard->swarm;
    shard->notify = zmq_socket (swarm->context, ZMQ_PUSH);
    int hwm = 0;
    zmq_setsockopt (shard->notify, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_connect (shard->notify, S_NOTIFY_EP);
    struct epoll_event events [S_EPOLL_BATCH];
    shard->started_ms = s_now_ms ();
    while (!atomic_load (&swarm->stopping)) {
        int64_t now_ms = s_now_ms ();
        shard->now_ms = now_ms;
        //  Create agents a batch at a time, so the first ones register
        //  while the rest are still being made (at --ramp's pace)
        size_t allowed = s_ramp_allowed (shard, now_ms);
        for (size_t made = 0; made < S_CREATE_BATCH
                              && shard->created < allowed; made++) {
            if (s_agent_start (shard, (uint32_t) shard->created, now_ms) != 0) {
                atomic_store (&swarm->stopping, true);
                break;
            }
            shard->created++;
        }
        s_run_timers (shard, now_ms);
        uint64_t released = 0;
        if (shard->held_head
            && !atomic_load_explicit (&swarm->holding, memory_order_relaxed))
            released = s_release (shard, now_ms);
        //  Results that came due or were answered in this pass
        s_batches_flush (shard);
        //  Marked sockets: a send happened, or a read stopped at its batch
        while (shard->dirty_count) {
            uint32_t index = shard->dirty [--shard->dirty_count];
            uint8_t which = shard->agents [index].dirty;
            shard->agents [index].dirty = 0;
            if (shard->conns) {
                //  Everything queued this pass, in one write each
                for (uint8_t one = 1; one <= 2; one++)
                    if (which & one) {
                        zmtp_t *conn = &shard->conns [2 * index + one - 1];
                        zmtp_flush (conn);
                        s_conn_arm (shard, conn);
                    }
                continue;
            }
            if (which & 1)
                s_socket_ready (shard, index, 1, now_ms);
            if (which & 2)
                s_socket_ready (shard, index, 2, now_ms);
        }
        if (released)
            s_release_done (shard, released);
        int count = epoll_wait (shard->epoll_fd, events, S_EPOLL_BATCH,
                                s_next_wait_ms (shard, s_now_ms ()));
        now_ms = s_now_ms ();
        shard->now_ms = now_ms;
        for (int at = 0; at < count; at++) {
            uint64_t data = events [at].data.u64;
            if (data == UINT64_MAX) {
                uint64_t value;
                if (read (shard->wake_fd, &value, sizeof value) < 0)
                    value = 0;
                continue;
            }
            if (shard->conns) {
                zmtp_t *conn = s_conn (shard, data);
                zmtp_on_event (conn, events [at].events, now_ms);
                s_conn_arm (shard, conn);
                continue;
            }
            s_socket_ready (shard, (uint32_t) (data >> 2),
                            (uint8_t) (data & 3), now_ms);
        }
        if (shard->conns)
            s_zmtp_publish (shard);
    }
    s_shard_stop (shard);
    if (shard->conns)
        s_zmtp_publish (shard);
    zmq_close (shard->notify);
    return NULL;
}

//  ---------------------------------------------------------------------
//  Control socket (main thread)

static void
s_write_job (pw_t *writer, const char *job_id, const s_job_t *job)
{
    pw_str (writer, "job");
    pw_str (writer, job_id);
    pw_str (writer, "commands");
    pw_int (writer, (int64_t) job->commands);
    pw_str (writer, "results");
    pw_int (writer, (int64_t) job->results);
    pw_str (writer, "acked");
    pw_int (writer, (int64_t) job->acked);
    pw_str (writer, "failed");
    pw_int (writer, (int64_t) job->failed);
    pw_str (writer, "dup_acks");
    pw_int (writer, (int64_t) job->dup_acks);
    pw_str (writer, "dup_commands");
    pw_int (writer, (int64_t) job->dup_commands);
    pw_str (writer, "reruns");
    pw_int (writer, (int64_t) job->reruns);
    pw_str (writer, "first_command_ms");
    pw_int (writer, job->first_command_ms);
    pw_str (writer, "first_result_ms");
    pw_int (writer, job->first_result_ms);
    pw_str (writer, "last_ack_ms");
    pw_int (writer, job->last_ack_ms);
}

#define S_JOB_FIELDS 11

//  Who sent a control request: the ROUTER's routing frame, and whether an
//  empty delimiter followed it (a REQ peer), to echo in the reply.
typedef struct {
    zmq_msg_t routing;
    bool delimiter;
} s_peer_t;

static void
s_reply (void *control, s_peer_t *peer, pw_t *writer)
{
    zmq_msg_t copy;
    zmq_msg_init (&copy);
    zmq_msg_copy (&copy, &peer->routing);
    zmq_msg_send (&copy, control, ZMQ_SNDMORE);
    zmq_msg_close (&copy);
    if (peer->delimiter)
        zmq_send (control, "", 0, ZMQ_SNDMORE);
    zmq_send (control, pw_data (writer), pw_size (writer), 0);
}

//  A waiter of a watch request.
typedef struct {
    s_peer_t peer;              //  Who asked
    char *id;                   //  Their request id, or NULL
    char job [JOB_ID_LEN + 1];  //  Which job
    uint64_t count;             //  Result_acks wanted
} s_waiter_t;

static void
s_waiter_destroy (void **item_p)
{
    s_waiter_t *waiter = (s_waiter_t *) *item_p;
    if (waiter) {
        zmq_msg_close (&waiter->peer.routing);
        free (waiter->id);
        free (waiter);
        *item_p = NULL;
    }
}

static void
s_reply_begin (pw_t *writer, const char *type, const char *id,
               size_t fields)
{
    pw_reset (writer);
    pw_map (writer, fields + 1 + (id ? 1 : 0));
    pw_str (writer, "type");
    pw_str (writer, type);
    if (id) {
        pw_str (writer, "id");
        pw_str (writer, id);
    }
}

//  Replies "job" for JOB_ID (called with the lock held).
static void
s_reply_job (s_swarm_t *swarm, void *control, s_peer_t *peer,
             const char *id, const char *job_id, pw_t *writer)
{
    s_job_t empty;
    memset (&empty, 0, sizeof empty);
    s_job_t *job = (s_job_t *) zhashx_lookup (swarm->jobs, job_id);
    s_reply_begin (writer, "job", id, S_JOB_FIELDS);
    s_write_job (writer, job_id, job ? job : &empty);
    s_reply (control, peer, writer);
}

static void
s_reply_stats (s_swarm_t *swarm, void *control, s_peer_t *peer,
               const char *id, pw_t *writer)
{
    uint64_t totals [C_COUNT];
    memset (totals, 0, sizeof totals);
    uint64_t pending = 0, held = 0, unsent = 0;
    for (size_t shard = 0; shard < swarm->config.threads; shard++) {
        for (int at = 0; at < C_COUNT; at++)
            totals [at] += atomic_load_explicit (
                &swarm->shards [shard].counters [at], memory_order_relaxed);
        pending += atomic_load_explicit (&swarm->shards [shard].pending,
                                         memory_order_relaxed);
        held += atomic_load_explicit (&swarm->shards [shard].held,
                                      memory_order_relaxed);
        unsent += atomic_load_explicit (&swarm->shards [shard].unsent_bytes,
                                        memory_order_relaxed);
    }
    s_reply_begin (writer, "stats", id, C_COUNT + 8);
    for (int at = 0; at < C_COUNT; at++) {
        pw_str (writer, s_counter_names [at]);
        pw_int (writer, (int64_t) totals [at]);
    }
    pw_str (writer, "agents");
    pw_int (writer, (int64_t) swarm->config.agents);
    pw_str (writer, "unacked");
    pw_int (writer, (int64_t) pending);
    pw_str (writer, "rss_kib");
    pw_int (writer, (int64_t) s_rss_kib ());
    pw_str (writer, "started_ms");
    pw_int (writer, swarm->started_ms);
    pw_str (writer, "last_welcome_ms");
    pw_int (writer, atomic_load (&swarm->last_welcome_ms));
    pw_str (writer, "holding");
    pw_int (writer, atomic_load (&swarm->holding) ? 1 : 0);
    pw_str (writer, "held");
    pw_int (writer, (int64_t) held);
    pw_str (writer, "unsent_bytes");
    pw_int (writer, (int64_t) unsent);
    s_reply (control, peer, writer);
}

static void
s_on_control (s_swarm_t *swarm, void *control, zlistx_t *waiters,
              pw_t *writer)
{
    s_peer_t peer;
    zmq_msg_t body;
    zmq_msg_init (&peer.routing);
    zmq_msg_init (&body);
    peer.delimiter = false;
    if (zmq_msg_recv (&peer.routing, control, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close (&peer.routing);
        zmq_msg_close (&body);
        return;
    }
    //  The last frame is the body (a REQ peer adds an empty delimiter)
    int frames = 1;
    bool more = zmq_msg_more (&peer.routing);
    while (more) {
        if (frames > 1 && zmq_msg_size (&body) == 0)
            peer.delimiter = true;
        zmq_msg_close (&body);
        zmq_msg_init (&body);
        if (zmq_msg_recv (&body, control, 0) < 0)
            break;
        frames++;
        more = zmq_msg_more (&body);
    }
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (zmq_msg_data (&body), zmq_msg_size (&body), &doc, NULL,
                       0)
        == 0) {
        const pv_t *root = pv_doc_root (doc);
        const pv_t *type = pv_map_get (root, "type");
        char *id = pv_strdup (pv_map_get (root, "id"));
        char *job = pv_strdup (pv_map_get (root, "job"));
        int64_t count = 0;
        pv_get_int (pv_map_get (root, "count"), &count);
        if (pv_str_eq (type, "stats"))
            s_reply_stats (swarm, control, &peer, id, writer);
        else if (pv_str_eq (type, "job") && job && job_id_valid (job)) {
            pthread_mutex_lock (&swarm->lock);
            s_reply_job (swarm, control, &peer, id, job, writer);
            pthread_mutex_unlock (&swarm->lock);
        }
        else if (pv_str_eq (type, "watch") && job && job_id_valid (job)
                 && count > 0) {
            pthread_mutex_lock (&swarm->lock);
            s_job_t *entry = (s_job_t *) zhashx_lookup (swarm->jobs, job);
            if (!entry) {
                entry = (s_job_t *) zmalloc (sizeof (s_job_t));
                zhashx_insert (swarm->jobs, job, entry);
            }
            if (entry->acked >= (uint64_t) count)
                s_reply_job (swarm, control, &peer, id, job, writer);
            else {
                if (!entry->watch || (uint64_t) count < entry->watch)
                    entry->watch = (uint64_t) count;
                s_waiter_t *waiter = (s_waiter_t *) zmalloc (sizeof *waiter);
                zmq_msg_init (&waiter->peer.routing);
                zmq_msg_copy (&waiter->peer.routing, &peer.routing);
                waiter->peer.delimiter = peer.delimiter;
                waiter->id = id;
                id = NULL;
                snprintf (waiter->job, sizeof waiter->job, "%s", job);
                waiter->count = (uint64_t) count;
                zlistx_add_end (waiters, waiter);
            }
            pthread_mutex_unlock (&swarm->lock);
        }
        else if (pv_str_eq (type, "hold") || pv_str_eq (type, "release")) {
            bool hold = pv_str_eq (type, "hold");
            atomic_store (&swarm->holding, hold);
            uint64_t held = 0;
            for (size_t at = 0; at < swarm->config.threads; at++) {
                held += atomic_load (&swarm->shards [at].held);
                //  Each shard sends what it holds on its next pass
                uint64_t one = 1;
                if (!hold && write (swarm->shards [at].wake_fd, &one,
                                    sizeof one) < 0)
                    s_log ("cannot wake shard %zu", at);
            }
            s_reply_begin (writer, hold ? "hold" : "release", id, 1);
            pw_str (writer, "held");
            pw_int (writer, (int64_t) held);
            s_reply (control, &peer, writer);
        }
        else if (pv_str_eq (type, "forget")) {
            pthread_mutex_lock (&swarm->lock);
            size_t jobs = zhashx_size (swarm->jobs);
            zhashx_purge (swarm->jobs);
            pthread_mutex_unlock (&swarm->lock);
            s_reply_begin (writer, "forget", id, 1);
            pw_str (writer, "jobs");
            pw_int (writer, (int64_t) jobs);
            s_reply (control, &peer, writer);
        }
        else {
            s_reply_begin (writer, "error", id, 1);
            pw_str (writer, "message");
            pw_str (writer,
                    "expected stats, job, watch, forget, hold or release");
            s_reply (control, &peer, writer);
        }
        free (id);
        free (job);
    }
    pv_doc_destroy (&doc);
    zmq_msg_close (&peer.routing);
    zmq_msg_close (&body);
}

//  A watched job reached a count: answer its waiters that are satisfied.
static void
s_on_notify (s_swarm_t *swarm, void *control, zlistx_t *waiters,
             pw_t *writer, const char *job_id)
{
    pthread_mutex_lock (&swarm->lock);
    s_job_t *job = (s_job_t *) zhashx_lookup (swarm->jobs, job_id);
    uint64_t next_watch = 0;
    s_waiter_t *waiter = (s_waiter_t *) zlistx_first (waiters);
    while (waiter) {
        void *cursor = zlistx_cursor (waiters);
        s_waiter_t *next = (s_waiter_t *) zlistx_next (waiters);
        if (strcmp (waiter->job, job_id) == 0) {
            if (job && job->acked >= waiter->count) {
                s_reply_job (swarm, control, &waiter->peer, waiter->id,
                             job_id, writer);
                zlistx_delete (waiters, cursor);
            }
            else if (!next_watch || waiter->count < next_watch)
                next_watch = waiter->count;
        }
        waiter = next;
    }
    if (job)
        job->watch = next_watch;
    pthread_mutex_unlock (&swarm->lock);
}

//  ---------------------------------------------------------------------
//  Set-up

static const char *s_usage =
    "usage: gridswarm [options]\n"
    "\n"
    "Stands in for many gridagents in one process: each simulated agent\n"
    "has its own node id, DEALER and SUB, registers, beats, and answers\n"
    "commands at once (test echo prints its message).\n"
    "\n"
    "options:\n"
    "  --agents N           how many agents                      [1000]\n"
    "  --first N            number of the first agent            [1]\n"
    "  --prefix NAME        node ids are NAME-000001...          [swarm]\n"
    "  --broker EP          broker agent endpoint  [tcp://127.0.0.1:7702]\n"
    "  --publish EP         broker commands endpoint [tcp://127.0.0.1:7703]\n"
    "  --groups G1,G2       groups of every agent\n"
    "  --labels K=V,...     labels of every agent\n"
    "  --threads N          shard threads                        [2]\n"
    "  --io-threads N       ZeroMQ I/O threads (0: one per 2,500 agents)\n"
    "                                                            [0]\n"
    "  --delay-ms MS        answer MS after the command          [0]\n"
    "  --fail-rate F        fraction of commands that fail, 0..1 [0]\n"
    "  --no-started         do not send `started`\n"
    "  --progress-hold-ms MS  hold ack and started MS and leave them out\n"
    "                       when the result is ready first (as gridagent);\n"
    "                       0 sends them at once                 [20]\n"
    "  --test-only          declare only the test backend (default: every\n"
    "                       built-in backend, as a real agent does)\n"
    "  --single-acks        ask for one result_ack per result (as an agent\n"
    "                       older than result_acks)\n"
    "  --single-results     one result per message even when the broker\n"
    "                       grants results (as an agent older than them)\n"
    "  --zmtp-heartbeat-ms MS  ZMTP PING interval, 0 for none    [5000]\n"
    "  --zmtp-ttl-ms MS     TTL carried in the PINGs (0, as gridagent) [0]\n"
    "                       (both as gridagent sets them)\n"
    "  --zmtp-timeout-ms MS a pinged connection silent this long is\n"
    "                       dropped and made again              [15000]\n"
    "  --curve KEY|FILE     CURVE: the broker's public key (Z85 text, or a\n"
    "                       certificate or key file); every agent gets its\n"
    "                       own keypair, made in memory\n"
    "  --source-ips A,B     connect from these local addresses in turn\n"
    "                       (past ~28,000 agents per broker port)\n"
    "  --control EP         bind a control ROUTER (stats, job figures,\n"
    "                       hold and release of results)\n"
    "  --ramp N             start N agents a second (0: all at once)   [0]\n"
    "  --transport T        libzmq: two libzmq sockets per agent; zmtp:\n"
    "                       ZMTP 3.0 spoken here over plain TCP or ipc://\n"
    "                       in the shard threads (much cheaper; plaintext\n"
    "                       only, not with --curve)             [libzmq]\n"
    "  --live-output        announce live_output, and run `test lines` as\n"
    "                       gridagent does: its lines one every interval,\n"
    "                       sent in output pieces while it runs when the\n"
    "                       welcome grants live_output (else whole, before\n"
    "                       the result)\n"
    "  --live-aligned       all agents of a shard send their live pieces\n"
    "                       in the same round (the worst case), instead\n"
    "                       of each in a round of its own, as gridagents\n"
    "                       started at different times\n"
    "  --blobs              announce blobs, and fetch the blob of a file\n"
    "                       put as gridagent does (counted, not kept)\n"
    "  --output-rate N      live pieces a second per agent at most, as\n"
    "                       gridagent's output_rate               [50]\n"
    "  --verbose            log agent events\n"
    "  -h, --help           this text\n";

static int
s_split (const char *text, char ***list_p, size_t *count_p)
{
    char *copy = strdup (text);
    assert (copy);
    char *save = NULL;
    for (char *item = strtok_r (copy, ",", &save); item;
         item = strtok_r (NULL, ",", &save)) {
        *list_p = (char **) realloc (*list_p, (*count_p + 1) * sizeof (char *));
        assert (*list_p);
        (*list_p) [(*count_p)++] = strdup (item);
    }
    free (copy);
    return 0;
}

static void
s_free_list (char **list, size_t count)
{
    for (size_t at = 0; at < count; at++)
        free (list [at]);
    free (list);
}

static int
s_curve_key (const char *text, char *key)
{
    if (strlen (text) == 40) {
        memcpy (key, text, 41);
        return 0;
    }
    zcert_t *cert = zcert_load (text);
    if (cert) {
        snprintf (key, 41, "%s", zcert_public_txt (cert));
        zcert_destroy (&cert);
        return 0;
    }
    //  A file holding the bare key
    FILE *file = fopen (text, "r");
    char line [128] = "";
    if (file) {
        if (!fgets (line, sizeof line, file))
            line [0] = 0;
        fclose (file);
    }
    line [strcspn (line, " \r\n")] = 0;
    if (strlen (line) != 40)
        return -1;
    memcpy (key, line, 41);
    return 0;
}

static int
s_parse (s_config_t *config, int argc, char *argv [])
{
    static const struct option options [] = {
        {"agents", required_argument, NULL, 'n'},
        {"first", required_argument, NULL, 'f'},
        {"prefix", required_argument, NULL, 'p'},
        {"broker", required_argument, NULL, 'b'},
        {"publish", required_argument, NULL, 'P'},
        {"groups", required_argument, NULL, 'g'},
        {"labels", required_argument, NULL, 'l'},
        {"threads", required_argument, NULL, 't'},
        {"io-threads", required_argument, NULL, 'i'},
        {"delay-ms", required_argument, NULL, 'd'},
        {"fail-rate", required_argument, NULL, 'F'},
        {"no-started", no_argument, NULL, 'S'},
        {"progress-hold-ms", required_argument, NULL, 'R'},
        {"test-only", no_argument, NULL, 'T'},
        {"single-acks", no_argument, NULL, 'A'},
        {"single-results", no_argument, NULL, 'B'},
        {"zmtp-heartbeat-ms", required_argument, NULL, 'H'},
        {"zmtp-ttl-ms", required_argument, NULL, 'L'},
        {"zmtp-timeout-ms", required_argument, NULL, 'O'},
        {"curve", required_argument, NULL, 'c'},
        {"source-ips", required_argument, NULL, 's'},
        {"control", required_argument, NULL, 'C'},
        {"verbose", no_argument, NULL, 'v'},
        {"ramp", required_argument, NULL, 'r'},
        {"transport", required_argument, NULL, 'X'},
        {"live-output", no_argument, NULL, 'V'},
        {"blobs", no_argument, NULL, 0x201},
        {"live-aligned", no_argument, NULL, 0x202},
        {"output-rate", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    int option;
    while ((option = getopt_long (argc, argv, "h", options, NULL)) != -1) {
        char *end = NULL;
        switch (option) {
            case 'n':
                config->agents = strtoul (optarg, &end, 10);
                break;
            case 'r':
                config->ramp = strtoul (optarg, &end, 10);
                break;
            case 'f':
                config->first = strtoul (optarg, &end, 10);
                break;
            case 'p':
                free (config->prefix);
                config->prefix = strdup (optarg);
                break;
            case 'b':
                free (config->broker_ep);
                config->broker_ep = strdup (optarg);
                break;
            case 'P':
                free (config->publish_ep);
                config->publish_ep = strdup (optarg);
                break;
            case 'g':
                s_split (optarg, &config->groups, &config->group_count);
                break;
            case 'l': {
                char **items = NULL;
                size_t count = 0;
                s_split (optarg, &items, &count);
                for (size_t at = 0; at < count; at++) {
                    char *equal = strchr (items [at], '=');
                    if (!equal) {
                        fprintf (stderr, "gridswarm: --labels: '%s' is not "
                                 "key=value\n", items [at]);
                        s_free_list (items, count);
                        return -1;
                    }
                    *equal = 0;
                    config->labels = (proto_kv_t *) realloc (
                        config->labels,
                        (config->label_count + 1) * sizeof (proto_kv_t));
                    assert (config->labels);
                    config->labels [config->label_count].key
                        = strdup (items [at]);
                    config->labels [config->label_count].value
                        = strdup (equal + 1);
                    config->label_count++;
                }
                s_free_list (items, count);
                break;
            }
            case 't':
                config->threads = strtoul (optarg, &end, 10);
                break;
            case 'i':
                config->io_threads = (int) strtol (optarg, &end, 10);
                break;
            case 'd':
                config->delay_ms = strtoll (optarg, &end, 10);
                break;
            case 'F':
                config->fail_rate = strtod (optarg, &end);
                break;
            case 'S':
                config->send_started = false;
                break;
            case 'R':
                config->progress_hold_ms = strtoll (optarg, &end, 10);
                break;
            case 'T':
                config->test_only = true;
                break;
            case 'A':
                config->single_acks = true;
                break;
            case 'B':
                config->single_results = true;
                break;
            case 'H':
                config->zmtp_heartbeat_ms = (int) strtol (optarg, &end, 10);
                break;
            case 'L':
                config->zmtp_ttl_ms = (int) strtol (optarg, &end, 10);
                break;
            case 'O':
                config->zmtp_timeout_ms = (int) strtol (optarg, &end, 10);
                break;
            case 'c':
                if (s_curve_key (optarg, config->curve_server) != 0) {
                    fprintf (stderr, "gridswarm: --curve: '%s' is neither a "
                             "Z85 key nor a readable key file\n", optarg);
                    return -1;
                }
                break;
            case 's':
                s_split (optarg, &config->source_ips,
                         &config->source_ip_count);
                break;
            case 'C':
                free (config->control_ep);
                config->control_ep = strdup (optarg);
                break;
            case 'v':
                config->verbose = true;
                break;
            case 'V':
                config->live_output = true;
                break;
            case 0x201:
                config->blobs = true;
                break;
            case 0x202:
                config->live_aligned = true;
                break;
            case 'W':
                config->output_rate = strtoll (optarg, &end, 10);
                break;
            case 'X':
                if (strcmp (optarg, "zmtp") != 0
                    && strcmp (optarg, "libzmq") != 0) {
                    fprintf (stderr, "gridswarm: --transport: expected "
                             "zmtp or libzmq, not '%s'\n", optarg);
                    return -1;
                }
                config->zmtp = strcmp (optarg, "zmtp") == 0;
                break;
            case 'h':
                fputs (s_usage, stdout);
                exit (0);
            default:
                fprintf (stderr, "run 'gridswarm --help' for the options\n");
                return -1;
        }
        if (end && *end) {
            fprintf (stderr, "gridswarm: '%s' is not a number\n", optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf (stderr, "gridswarm: unexpected argument '%s'\n",
                 argv [optind]);
        return -1;
    }
    if (config->agents < 1 || config->threads < 1 || config->threads > 64
        || config->io_threads < 0 || config->delay_ms < 0
        || config->progress_hold_ms < 0
        || config->zmtp_heartbeat_ms < 0 || config->zmtp_ttl_ms < 0
        || config->zmtp_timeout_ms < 0 || config->output_rate < 0
        || config->fail_rate < 0 || config->fail_rate > 1) {
        fprintf (stderr, "gridswarm: --agents and --threads must be at "
                 "least 1; --io-threads, --delay-ms, --progress-hold-ms, "
                 "--output-rate and the ZMTP times at least 0; --fail-rate "
                 "within 0..1\n");
        return -1;
    }
    if (config->zmtp && config->curve_server [0]) {
        fprintf (stderr, "gridswarm: --transport zmtp speaks only "
                 "plaintext; CURVE runs use --transport libzmq\n");
        return -1;
    }
    if (config->threads > config->agents)
        config->threads = config->agents;
    char id [S_ID_MAX + 16];
    snprintf (id, sizeof id, "%s-%06zu", config->prefix,
              config->first + config->agents - 1);
    if (!name_valid (id)) {
        fprintf (stderr, "gridswarm: node ids like '%s' are not valid names\n",
                 id);
        return -1;
    }
    for (size_t at = 0; at < config->group_count; at++)
        if (!name_valid (config->groups [at])) {
            fprintf (stderr, "gridswarm: group '%s' is not a valid name\n",
                     config->groups [at]);
            return -1;
        }
    for (size_t at = 0; at < config->label_count; at++)
        if (!name_valid (config->labels [at].key)
            || !name_label_value_valid (config->labels [at].value)) {
            fprintf (stderr, "gridswarm: label '%s=%s' is not valid\n",
                     config->labels [at].key, config->labels [at].value);
            return -1;
        }
    return 0;
}

static void
s_config_clear (s_config_t *config)
{
    free (config->prefix);
    free (config->broker_ep);
    free (config->publish_ep);
    free (config->control_ep);
    s_free_list (config->groups, config->group_count);
    for (size_t at = 0; at < config->label_count; at++) {
        free (config->labels [at].key);
        free (config->labels [at].value);
    }
    free (config->labels);
    s_free_list (config->source_ips, config->source_ip_count);
}

//  Raises the open-file limit to fit WANTED descriptors. Returns 0, or -1
//  when the hard limit is lower and cannot be raised (not root).
static int
s_raise_fd_limit (rlim_t wanted)
{
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0)
        return -1;
    if (limit.rlim_cur >= wanted)
        return 0;
    if (limit.rlim_max < wanted) {
        struct rlimit raised = {wanted, wanted};
        if (setrlimit (RLIMIT_NOFILE, &raised) == 0)
            return 0;
        return -1;
    }
    limit.rlim_cur = wanted;
    return setrlimit (RLIMIT_NOFILE, &limit);
}

static proto_msg_t *
s_hello_template (const s_config_t *config)
{
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    char hostname [256];
    if (gethostname (hostname, sizeof hostname) != 0)
        snprintf (hostname, sizeof hostname, "swarm");
    hello->hostname = strdup (hostname);
    hello->version = strdup ("0.1.0-swarm");
    hello->concurrency = 1;
    //  This process's id, as a real agent's: a hello repeated on its
    //  session is then welcomed again rather than registered again
    char instance [24];
    snprintf (instance, sizeof instance, "%08x%08x", (unsigned) getpid (),
              (unsigned) (zclock_usecs () & 0xffffffffu));
    hello->instance = strdup (instance);
    //  --single-acks: no features at all (an agent before them);
    //  --single-results: result_acks only (the release before results)
    //  --live-output: live_output too
    if (!config->single_acks || config->live_output || config->blobs) {
        hello->features = (char **) calloc (6, sizeof (char *));
        assert (hello->features);
    }
    if (config->blobs)
        hello->features [hello->feature_count++]
            = strdup (PROTO_FEATURE_BLOBS);
    if (!config->single_acks) {
        hello->features [hello->feature_count++]
            = strdup (PROTO_FEATURE_RESULT_ACKS);
        if (!config->single_results)
            hello->features [hello->feature_count++]
                = strdup (PROTO_FEATURE_RESULTS);
    }
    if (config->live_output) {
        hello->features [hello->feature_count++]
            = strdup (PROTO_FEATURE_LIVE_OUTPUT);
        hello->features [hello->feature_count++]
            = strdup (PROTO_FEATURE_OUTPUT_ACKS);
    }
    for (size_t at = 0; at < config->group_count; at++) {
        hello->groups = (char **) realloc (hello->groups,
                                           (at + 1) * sizeof (char *));
        assert (hello->groups);
        hello->groups [at] = strdup (config->groups [at]);
        hello->group_count++;
    }
    if (config->label_count) {
        hello->labels = (proto_kv_t *) calloc (config->label_count,
                                               sizeof (proto_kv_t));
        assert (hello->labels);
        for (size_t at = 0; at < config->label_count; at++) {
            hello->labels [at].key = strdup (config->labels [at].key);
            hello->labels [at].value = strdup (config->labels [at].value);
        }
        hello->label_count = config->label_count;
    }
    //  The same declarations as a real agent's hello, so the broker
    //  holds as much per node as it would for a real fleet
    size_t total = 0;
    const backend_ops_t *const *all = backends_all (&total);
    char **disabled = (char **) calloc (total + 1, sizeof (char *));
    assert (disabled);
    size_t disabled_count = 0;
    for (size_t at = 0; config->test_only && at < total; at++)
        if (strcmp (all [at]->name, "test") != 0)
            disabled [disabled_count++] = (char *) all [at]->name;
    int rc = backends_hello_specs (disabled, disabled_count, &hello->backends,
                                   &hello->backend_count);
    free (disabled);
    if (rc != 0)
        proto_msg_destroy (&hello);
    return hello;
}

static void
s_shard_destroy (s_shard_t *shard)
{
    if (shard->epoll_fd >= 0)
        close (shard->epoll_fd);
    if (shard->wake_fd >= 0)
        close (shard->wake_fd);
    s_result_t *lists [2] = {shard->unacked_head, shard->held_head};
    for (int list = 0; list < 2; list++) {
        s_result_t *result = lists [list];
        while (result) {
            s_result_t *next = result->next;
            s_result_free (&result);
            result = next;
        }
    }
    for (size_t at = 0; at < shard->delayed.count; at++) {
        if (shard->delayed.items [at].item & S_DUE_PROGRESS)
            continue;
        s_result_t *delayed
            = (s_result_t *) (uintptr_t) shard->delayed.items [at].item;
        s_result_free (&delayed);
    }
    while (shard->tasks) {
        s_task_t *next = shard->tasks->next;
        free (shard->tasks);
        shard->tasks = next;
    }
    free (shard->live);
    free (shard->fetches);
    free (shard->timers.items);
    free (shard->delayed.items);
    free (shard->conn_timers.items);
    free (shard->conns);
    zmtp_ctx_fini (&shard->zmtp);
    s_map_free (&shard->seen);
    s_map_free (&shard->outstanding);
    s_cache_clear (shard);
    pw_destroy (&shard->writer);
    free (shard->dirty);
    free (shard->batching);
}

int
main (int argc, char *argv [])
{
    s_swarm_t swarm;
    memset (&swarm, 0, sizeof swarm);
    s_config_t *config = &swarm.config;
    config->agents = 1000;
    config->first = 1;
    config->prefix = strdup ("swarm");
    config->broker_ep = strdup ("tcp://127.0.0.1:7702");
    config->publish_ep = strdup ("tcp://127.0.0.1:7703");
    config->threads = 2;
    config->io_threads = 0;
    config->send_started = true;
    config->progress_hold_ms = S_PROGRESS_HOLD_MS;
    config->zmtp_heartbeat_ms = S_ZMTP_HEARTBEAT_MS;
    config->zmtp_ttl_ms = 0;      //  As gridagent: no per-connection broker timer
    config->zmtp_timeout_ms = S_ZMTP_TIMEOUT_MS;
    config->output_rate = S_OUTPUT_RATE;
    if (s_parse (config, argc, argv) != 0) {
        s_config_clear (config);
        return 2;
    }
    //  Two connections and two socket mailboxes per agent, plus slack
    //  (ZMTP: the two connections only)
    rlim_t wanted = (rlim_t) config->agents * (config->zmtp ? 2 : 4) + 64;
    if (s_raise_fd_limit (wanted) != 0) {
        s_log ("%zu agents need %llu open files; the limit is lower and "
               "cannot be raised (run as root, or raise ulimit -n)",
               config->agents, (unsigned long long) wanted);
        s_config_clear (config);
        return 1;
    }
    swarm.hello = s_hello_template (config);
    if (!swarm.hello) {
        s_log ("cannot build the hello");
        s_config_clear (config);
        return 1;
    }
    //  Signals go to the control thread's signalfd only
    signal (SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGINT);
    sigaddset (&mask, SIGTERM);
    pthread_sigmask (SIG_BLOCK, &mask, NULL);
    int signal_fd = signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

    //  libzmq's timers cost O(timers of the I/O thread) to cancel, and
    //  every ZMTP heartbeat cancels one: spread the connections over I/O
    //  threads so that the swarm does not choke on its own heartbeats
    if (config->io_threads == 0)
        config->io_threads = config->zmtp ? 1
                                          : (int) (config->agents / 2500) + 1;
    if (config->zmtp) {
        char err [300];
        if (zmtp_endpoint_parse (config->broker_ep, false, &swarm.broker_peer,
                                 err, sizeof err) != 0
            || zmtp_endpoint_parse (config->publish_ep, false,
                                    &swarm.publish_peer, err, sizeof err)
                   != 0) {
            s_log ("--transport zmtp: %s", err);
            return 1;
        }
        swarm.sources = (zmtp_endpoint_t *) zmalloc (
            (config->source_ip_count + 1) * sizeof (zmtp_endpoint_t));
        for (size_t at = 0; at < config->source_ip_count; at++)
            if (zmtp_endpoint_parse (config->source_ips [at], true,
                                     &swarm.sources [at], err, sizeof err)
                != 0) {
                s_log ("--source-ips: %s", err);
                return 1;
            }
    }
    swarm.context = zmq_ctx_new ();
    zmq_ctx_set (swarm.context, ZMQ_IO_THREADS, config->io_threads);
    int max_sockets = config->zmtp ? (int) (config->threads + 16)
                                   : (int) (config->agents * 2
                                            + config->threads + 16);
    zmq_ctx_set (swarm.context, ZMQ_MAX_SOCKETS, max_sockets);
    if (zmq_ctx_get (swarm.context, ZMQ_MAX_SOCKETS) < max_sockets) {
        s_log ("ZeroMQ allows only %d sockets, %d needed",
               zmq_ctx_get (swarm.context, ZMQ_MAX_SOCKETS), max_sockets);
        return 1;
    }
    pthread_mutex_init (&swarm.lock, NULL);
    swarm.jobs = zhashx_new ();
    zhashx_set_destructor (swarm.jobs, s_job_destroy);
    swarm.started_ms = s_now_ms ();

    void *notify = zmq_socket (swarm.context, ZMQ_PULL);
    int hwm = 0;
    zmq_setsockopt (notify, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_bind (notify, S_NOTIFY_EP);
    void *control = NULL;
    if (config->control_ep) {
        control = zmq_socket (swarm.context, ZMQ_ROUTER);
        int linger = 0;
        zmq_setsockopt (control, ZMQ_LINGER, &linger, sizeof linger);
        if (zmq_bind (control, config->control_ep) != 0) {
            s_log ("cannot bind %s: %s", config->control_ep,
                   zmq_strerror (errno));
            return 1;
        }
    }

    //  Shards: agents split evenly, numbered in order
    swarm.shards = (s_shard_t *) zmalloc (config->threads * sizeof (s_shard_t));
    size_t base = 0;
    for (size_t at = 0; at < config->threads; at++) {
        s_shard_t *shard = &swarm.shards [at];
        size_t count = config->agents / config->threads
                       + (at < config->agents % config->threads ? 1 : 0);
        shard->swarm = &swarm;
        shard->index = at;
        shard->base = base;
        shard->count = count;
        shard->agents = (s_agent_t *) zmalloc (count * sizeof (s_agent_t));
        for (size_t index = 0; index < count; index++)
            snprintf (shard->agents [index].id, S_ID_MAX, "%s-%06zu",
                      config->prefix, config->first + base + index);
        shard->dirty = (uint32_t *) zmalloc (count * sizeof (uint32_t));
        shard->batching = (uint32_t *) zmalloc (count * sizeof (uint32_t));
        if (config->live_output)
            shard->live = (s_live_t *) zmalloc (count * sizeof (s_live_t));
        if (config->blobs)
            shard->fetches = (s_fetch_t *) zmalloc (count * sizeof (s_fetch_t));
        shard->writer = pw_new ();
        shard->random = 0x9e3779b97f4a7c15ULL ^ ((uint64_t) getpid () << 16)
                        ^ (uint64_t) at;
        s_map_init (&shard->seen, count * 4);
        s_map_init (&shard->outstanding, count);
        shard->epoll_fd = epoll_create1 (EPOLL_CLOEXEC);
        shard->wake_fd = eventfd (0, EFD_NONBLOCK | EFD_CLOEXEC);
        struct epoll_event event;
        memset (&event, 0, sizeof event);
        event.events = EPOLLIN;
        event.data.u64 = UINT64_MAX;
        epoll_ctl (shard->epoll_fd, EPOLL_CTL_ADD, shard->wake_fd, &event);
        if (config->zmtp) {
            zmtp_options_t options;
            zmtp_options_default (&options);
            options.heartbeat_ms = config->zmtp_heartbeat_ms;
            options.timeout_ms = config->zmtp_timeout_ms;
            options.ttl_ms = config->zmtp_ttl_ms;
            options.handshake_ms = S_HANDSHAKE_MS;
            options.reconnect_ms = S_RECONNECT_MS;
            options.reconnect_max_ms = S_RECONNECT_MAX_MS;
            options.kernel_buffer = S_KERNEL_BUFFER;
            options.max_frame = PROTO_MAX_FRAME;
            zmtp_handlers_t handlers = {
                .on_ready = s_zmtp_on_ready,
                .on_message = s_zmtp_on_message,
                .on_drop = s_zmtp_on_drop
            };
            shard->conns = (zmtp_t *) zmalloc (2 * count * sizeof (zmtp_t));
            if (zmtp_ctx_init (&shard->zmtp, shard->epoll_fd, &options,
                               &handlers, shard)
                != 0) {
                s_log ("out of memory");
                return 1;
            }
        }
        base += count;
    }
    for (size_t at = 0; at < config->threads; at++)
        pthread_create (&swarm.shards [at].thread, NULL, s_shard_run,
                        &swarm.shards [at]);
    s_log ("%zu agents (%s-%06zu..) on %zu thread%s: broker %s, commands %s%s"
           "%s", config->agents, config->prefix, config->first,
           config->threads, config->threads == 1 ? "" : "s",
           config->broker_ep, config->publish_ep,
           config->curve_server [0] ? ", CURVE" : "",
           config->zmtp ? ", transport zmtp" : "");

    //  Control loop: requests, watch notifications, signals
    zlistx_t *waiters = zlistx_new ();
    zlistx_set_destructor (waiters, s_waiter_destroy);
    pw_t *writer = pw_new ();
    bool announced = false;
    while (!atomic_load (&swarm.stopping)) {
        zmq_pollitem_t items [3] = {
            {notify, 0, ZMQ_POLLIN, 0},
            {NULL, signal_fd, ZMQ_POLLIN, 0},
            {control, 0, ZMQ_POLLIN, 0}
        };
        int rc = zmq_poll (items, control ? 3 : 2, 1000);
        if (rc < 0 && errno != EINTR)
            break;
        if (items [1].revents & ZMQ_POLLIN) {
            struct signalfd_siginfo info;
            if (read (signal_fd, &info, sizeof info) > 0)
                s_log ("%s: stopping", strsignal ((int) info.ssi_signo));
            atomic_store (&swarm.stopping, true);
            break;
        }
        for (int count = 0; count < 1000 && (items [0].revents & ZMQ_POLLIN);
             count++) {
            char job [JOB_ID_LEN + 1];
            int size = zmq_recv (notify, job, JOB_ID_LEN, ZMQ_DONTWAIT);
            if (size < 0)
                break;
            job [size] = 0;
            s_on_notify (&swarm, control, waiters, writer, job);
        }
        for (int count = 0;
             control && count < 1000 && (items [2].revents & ZMQ_POLLIN);
             count++) {
            int events = 0;
            size_t len = sizeof events;
            zmq_getsockopt (control, ZMQ_EVENTS, &events, &len);
            if (!(events & ZMQ_POLLIN))
                break;
            s_on_control (&swarm, control, waiters, writer);
        }
        if (!announced) {
            uint64_t welcomed = 0;
            for (size_t at = 0; at < config->threads; at++)
                welcomed += atomic_load (
                    &swarm.shards [at].counters [C_WELCOMED]);
            if (welcomed >= config->agents) {
                size_t rss = s_rss_kib ();
                s_log ("all %zu agents welcomed in %.2f s; RSS %zu MiB "
                       "(%.1f KiB per agent)", config->agents,
                       (double) (atomic_load (&swarm.last_welcome_ms)
                                 - swarm.started_ms) / 1000.0,
                       rss >> 10, (double) rss / (double) config->agents);
                announced = true;
            }
        }
    }
    atomic_store (&swarm.stopping, true);
    for (size_t at = 0; at < config->threads; at++) {
        uint64_t one = 1;
        if (write (swarm.shards [at].wake_fd, &one, sizeof one) < 0)
            s_log ("cannot wake shard %zu", at);
    }
    uint64_t totals [C_COUNT];
    memset (totals, 0, sizeof totals);
    for (size_t at = 0; at < config->threads; at++) {
        pthread_join (swarm.shards [at].thread, NULL);
        for (int counter = 0; counter < C_COUNT; counter++)
            totals [counter]
                += atomic_load (&swarm.shards [at].counters [counter]);
    }
    s_log ("stopped: %" PRIu64 " commands, %" PRIu64 " results, %" PRIu64
           " result_acks, %" PRIu64 " duplicate commands, %" PRIu64
           " reruns, %" PRIu64 " byes",
           totals [C_COMMANDS], totals [C_RESULTS], totals [C_RESULT_ACKS],
           totals [C_DUP_COMMANDS], totals [C_RERUNS], totals [C_BYES]);
    zlistx_destroy (&waiters);
    pw_destroy (&writer);
    zmq_close (notify);
    if (control)
        zmq_close (control);
    //  Waits up to the linger for the byes to leave
    zmq_ctx_term (swarm.context);
    for (size_t at = 0; at < config->threads; at++) {
        s_shard_destroy (&swarm.shards [at]);
        free (swarm.shards [at].agents);
    }
    free (swarm.shards);
    zhashx_destroy (&swarm.jobs);
    pthread_mutex_destroy (&swarm.lock);
    proto_msg_destroy (&swarm.hello);
    free (swarm.sources);
    s_config_clear (config);
    close (signal_fd);
    return 0;
}
