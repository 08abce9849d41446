/*  =========================================================================
    sched - the phase-walking scheduler (a pure state machine)

    docs/SCHEDULING.md is the rule book; the rule numbers (R1..R16) quoted
    in the comments below are its rules. This file holds no socket, no
    store and no clock: every entry point takes now_ms, every effect is an
    action the caller drains.

    Cell (one step on one node) x event. Columns are the cell's state,
    rows the event; "." cannot happen or changes nothing; -1 and 1 are
    the returns for stale and duplicate agent events.

    event       pending    dispatched acked      running    retry_wait final
    dispatch    dispatched .          .          .          .          .
    ack         -1         acked      1          1          1          1
    started     -1         running    running    1          1          1
    result ok   -1         success    success    success    1          1
    result bad  -1         R          R          R          1          1
    ack due     .          S          .          .          .          .
    run due     .          .          T          T          .          .
    retry due   .          .          .          .          D          .
    offline     O          lost       lost       lost       lost       .
    cancel      cancelled  cancelled  cancelled  cancelled  cancelled  .

    R  failed, timeout or interrupted: retry_wait while attempts <=
       max_retries, else that final status; refused: failed at once;
       cancelled: cancelled.
    S  a direct re-send (stays dispatched) while re-sends remain, else lost.
    T  timeout: CANCEL to the node, then as R.
    D  dispatched again with attempt + 1.
    O  a node with nothing under way: its next due cell reads offline;
       all its other open cells read skipped.
    A job timeout acts as cancel.

    Job x event:

    event            pending      running
    admit (a slot)   running      .
    no node matches  failed       .
    phase done       .            the next phase starts (walk)
    last phase done  .            completed / partial_failure / failed (R8)
    job timeout      .            failed (R13)
    cancel           cancelled    cancelled (R14)
    node offline     .            its cells lost/offline, node dropped (R12)

    Deadlines live in one binary min-heap with lazy deletion: an entry is
    acted on only when it still matches its cell (status, attempt, re-send
    count and deadline), so superseded entries are dropped when they reach
    the top.

    Any-node jobs (R17-R20) have one column whose node (expected[0], the
    holder) may change: each step is claimed by the least loaded node of
    the set with a free slot; a step no node can take waits in a queue of
    waiting cells (one heap per target, tried head first when capacity
    may have appeared); the holder keeps a lease (a LEASE deadline, renewed
    lazily from the cell's and the node's last word); an expired lease, a
    node gone down, or an unacknowledged command reclaims the step: it
    goes back to the queue and to another node of the set.
    =========================================================================
*/
#include "sched.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  Longest event detail taken from agent text (errors can be 1 MiB).
#define S_DETAIL_MAX 200
//  Least time between two progress reports of a cell for the second to be
//  logged as an event (an agent's least progress_interval)
#define S_PROGRESS_EVENT_MS 100

//  Jobs of this many nodes or more find a node's index by hash.
#define S_NODE_SLOTS_MIN 16

//  Per-node flags inside one job.
#define S_NODE_DROPPED 0x01      //  Takes no part in later phases
#define S_NODE_UNREACHABLE 0x02  //  Lost or offline: no more work at all
#define S_NODE_TOOK_PART 0x04    //  Was sent at least one step
#define S_NODE_PIPE_FAILED 0x08  //  Failed inside the current pipeline
#define S_NODE_ABSENT 0x10       //  Named, but could not run from the start
#define S_NODE_FAILED 0x20       //  Counted in the failure budget (R26)

typedef enum {
    S_DUE_ACK = 1,     //  A dispatched cell must be acknowledged
    S_DUE_RUN,         //  An acknowledged/running cell must report
    S_DUE_RETRY,       //  A cell's backoff is over
    S_DUE_JOB,         //  The whole job's timeout
    S_DUE_LEASE,       //  An any-node cell's lease may have run out
    S_DUE_STALL        //  A running cell may have gone silent too long
} s_due_kind_t;

typedef struct _s_node_t s_node_t;

//  What the scheduler itself knows of one node (never freed before the
//  scheduler: the set of nodes is the registry's, and small).
struct _s_node_t {
    char *id;                    //  Node id
    s_node_t *hash_next;         //  Next in its hash bucket
    uint32_t in_flight;          //  Cells dispatched to it, not yet final
    int64_t heard_ms;            //  Last word from it (monotonic), 0 never
    bool down;                   //  Went offline, not heard since
    uint64_t claims;             //  Any-node steps given to it
    uint64_t reclaims;           //  Any-node steps taken back from it
    uint64_t lease_expirations;  //  Its leases that ran out
    uint32_t *limit_running;     //  Its cells in flight per per-node limit (lazy)
};

//  Where a step sits in the spec.
typedef struct {
    const job_phase_t *leaf;     //  The task (borrowed from the spec)
    size_t phase;                //  Its top-level phase
    int sub;                     //  Index in its branch, -1 for a barrier
} s_step_t;

//  One top-level phase.
typedef struct {
    size_t first;                //  First step
    size_t count;                //  Steps in it (1 for a barrier)
    job_condition_t condition;   //  The phase's own condition
    bool branch;                 //  A per-node pipeline
} s_phase_t;

typedef struct _s_jobx_t s_jobx_t;

//  The scheduler's private part of a job (sched_job_t.priv).
struct _s_jobx_t {
    sched_job_t *job;            //  NULL once freed while deadlines remain
    size_t due_refs;             //  Deadline-heap entries pointing here
    uint64_t seq;                //  Admission order (age within a priority)
    size_t queue_index;          //  Position in the pending heap
    bool queued;                 //  In the pending heap
    bool running;                //  In the running list
    bool ending;                 //  Being cancelled or timed out
    bool finished;               //  Reached a final status
    s_jobx_t *hash_next;         //  Next in its id-hash bucket
    s_jobx_t *prev;              //  Running list
    s_jobx_t *next;              //  Running list
    s_step_t *steps;             //  step_count entries
    s_phase_t *phases;           //  phase_count entries
    size_t phase_count;          //  Top-level phases
    size_t *step_final;          //  Final cells per step (R15 counters), of
                                 //  the nodes of started batches (R26)
    size_t *phase_final;         //  Final cells per phase, the same nodes
    uint8_t *node_flags;         //  S_NODE_ flags per expected node
    size_t phase;                //  Current top-level phase
    bool phase_started;          //  The current phase has been started
    bool any_failure;            //  Some cell failed so far
    bool failed_before_phase;    //  Some cell failed before this phase
    bool pipe_stop_all;          //  Fail-fast fired inside this pipeline
    int64_t job_deadline_ms;     //  Job timeout, 0 when none
    s_node_t **nodes;            //  Node-table entry per expected node
    uint32_t *node_slots;        //  Expected index + 1 by hash of the id
                                 //  (0: empty), NULL for few nodes
    size_t node_slot_mask;       //  Slots - 1 (a power of two)
    bool any;                    //  Any-node job: one column, its holder may change
    bool claimed;                //  Any: some step was given to a node
    bool fresh_pick;             //  Any: expected[0] was just picked with a free slot
    int64_t lease_ms;            //  Any: the lease
    char *target_text;           //  Any: the target as text (waiting class key)
    uint32_t *step_limits;       //  Per step: the broker limits that cover it (bits)
    uint32_t *step_job_limits;   //  Per step: the job's own limits that cover it (bits)
    uint32_t job_limit_running [JOB_MAX_LIMITS];  //  Its cells in flight per own limit
    job_graph_t *graph;          //  DAG jobs: what each step needs (R23)
    uint8_t *blocked;            //  DAG: per cell, skipped for a failure or a stop
    size_t *barrier_done;        //  DAG: per step, batch + 1 once a barrier was handled
    size_t final_total;          //  Final cells, the same nodes
    size_t batch;                //  Current batch (R26), 0-based
    size_t batch_count;          //  Batches, 1 without `batch`/`canary`
    size_t batch_lo;             //  The current batch's nodes: [lo, hi)
    size_t batch_hi;
    size_t budget;               //  Failed nodes allowed, SIZE_MAX = no limit
    size_t failed_nodes;         //  Nodes with a failure so far
    bool budget_exceeded;        //  No new batch started: the budget ran out
};

//  One entry of the deadline heap.
typedef struct {
    int64_t deadline_ms;         //  When it is due
    uint64_t seq;                //  Tie-break: first pushed, first due
    s_jobx_t *jobx;              //  The job (holds a due_ref)
    uint32_t step;               //  Cell kinds: the step
    uint32_t node;               //  Cell kinds: the node index
    uint32_t attempt;            //  Cell kinds: the attempt it was set for
    uint32_t resends;            //  S_DUE_ACK: the re-send count it was set for
    uint32_t claims;             //  S_DUE_LEASE: the claim it was set for
    s_due_kind_t kind;           //  What is due
} s_due_t;

//  A cell waiting for a slot.
typedef struct {
    s_jobx_t *jobx;              //  The job (holds a due_ref)
    uint64_t seq;                //  Enqueue order
    int priority;                //  The job's priority
    uint32_t step;               //  The cell
    uint32_t node;
    uint32_t attempt;            //  The attempt it will be dispatched as
} s_wait_t;

//  Waiting cells that need the same thing (one target's free slot): a
//  heap, highest priority then oldest on top. When the head cannot go,
//  nothing behind it can.
typedef struct {
    char *key;                   //  What they wait for
    s_wait_t *heap;
    size_t size;
    size_t cap;
} s_class_t;

struct _sched_t {
    sched_config_t config;       //  Copied at sched_new
    sched_resolve_fn *resolve;   //  Target resolver
    void *resolve_arg;           //  Its argument
    sched_unavailable_fn *unavailable;  //  Who cannot run a job, and why
    void *unavailable_arg;       //  Its argument
    uint64_t rng;                //  xorshift64* state
    uint64_t seq;                //  Next admission number
    uint64_t due_seq;            //  Next deadline number
    size_t any_counter;          //  Rotates `any` picks among equals
    int64_t now_ms;              //  Latest now_ms seen
    sched_load_fn *load;         //  Node loads, or NULL
    sched_idempotent_fn *idempotent;  //  Action kinds, or NULL
    void *fleet_arg;             //  Their argument
    sched_counters_t counters;   //  Claims, reclaims, expirations
    //  Nodes by id
    s_node_t **node_buckets;
    size_t node_bucket_count;
    size_t node_count;
    //  Waiting cells, by class
    s_class_t **classes;
    size_t class_count;
    size_t class_cap;
    size_t waiting_count;        //  Cells waiting
    uint64_t wait_seq;           //  Next enqueue number
    bool wait_dirty;             //  Capacity may have appeared
    bool in_wait_pass;           //  Inside s_wait_pass (no re-entry)
    //  Concurrency limits (R21)
    job_limit_t limits [JOB_MAX_LIMITS];
    size_t limit_count;
    uint32_t limit_running [JOB_MAX_LIMITS];  //  Cells in flight per limit
    bool admitting;              //  Inside s_admit (no re-entry)
    bool paused;                 //  Queued jobs wait (maintenance, restart)
    //  Live jobs by id (pending and running)
    s_jobx_t **buckets;
    size_t bucket_count;
    size_t live_count;
    //  Running jobs
    s_jobx_t *running_head;
    size_t running_count;
    //  Pending jobs: a binary heap, highest priority then oldest on top
    s_jobx_t **queue;
    size_t queue_size;
    size_t queue_cap;
    //  Deadlines: a binary min-heap
    s_due_t *due;
    size_t due_size;
    size_t due_cap;
    //  Actions not yet drained
    sched_action_t *actions;
    size_t action_head;
    size_t action_count;
    size_t action_cap;
    //  Memory the drained actions point into, freed at the next mutating
    //  call once every action has been drained
    void **garbage;
    size_t garbage_count;
    size_t garbage_cap;
    sched_job_t **graveyard;
    size_t graveyard_count;
    size_t graveyard_cap;
};

//  ---------------------------------------------------------------------
//  Memory. Allocation failure in the scheduler's own bookkeeping is not
//  recoverable mid-transition (a half-applied event would break the
//  state machine), so it stops the process loudly, as CZMQ's zmalloc does.

static void *
s_alloc (size_t size)
{
    void *data = calloc (1, size ? size : 1);
    if (!data) {
        fprintf (stderr, "sched: out of memory (%zu bytes)\n", size);
        abort ();
    }
    return data;
}

static void *
s_grow (void *data, size_t *cap, size_t item_size)
{
    size_t new_cap = *cap ? *cap * 2 : 16;
    void *grown = realloc (data, new_cap * item_size);
    if (!grown) {
        fprintf (stderr, "sched: out of memory (%zu items)\n", new_cap);
        abort ();
    }
    *cap = new_cap;
    return grown;
}

static char *
s_strdup (const char *text)
{
    if (!text)
        return NULL;
    //  Every byte is written: no need for s_alloc's zeroing
    size_t len = strlen (text);
    char *copy = (char *) malloc (len + 1);
    if (!copy) {
        fprintf (stderr, "sched: out of memory (%zu bytes)\n", len + 1);
        abort ();
    }
    memcpy (copy, text, len + 1);
    return copy;
}

static char *
s_printf (const char *format, ...)
{
    va_list args;
    va_start (args, format);
    char *text = NULL;
    int rc = vasprintf (&text, format, args);
    va_end (args);
    if (rc < 0) {
        fprintf (stderr, "sched: out of memory (text)\n");
        abort ();
    }
    return text;
}

//  Keeps DATA until every action has been drained.
static void *
s_keep (sched_t *self, void *data)
{
    if (self->garbage_count == self->garbage_cap)
        self->garbage = (void **) s_grow (self->garbage, &self->garbage_cap,
                                          sizeof (void *));
    self->garbage [self->garbage_count++] = data;
    return data;
}

//  ---------------------------------------------------------------------
//  Names

static const char *s_job_status_names [] = {
    "pending", "running", "completed", "partial_failure", "failed",
    "cancelled"
};

static const char *s_cell_status_names [] = {
    "pending", "dispatched", "acknowledged", "running", "success", "failed",
    "timeout", "skipped", "lost", "cancelled", "interrupted", "offline",
    "drained", "unsupported", "retry_wait"
};

#define S_JOB_STATUSES (sizeof (s_job_status_names) / sizeof (char *))
#define S_CELL_STATUSES (sizeof (s_cell_status_names) / sizeof (char *))

const char *
sched_job_status_name (sched_job_status_t status)
{
    return (size_t) status < S_JOB_STATUSES ? s_job_status_names [status]
                                            : "?";
}

const char *
sched_cell_status_name (sched_cell_status_t status)
{
    return (size_t) status < S_CELL_STATUSES ? s_cell_status_names [status]
                                             : "?";
}

int
sched_job_status_parse (const char *name, sched_job_status_t *status)
{
    for (size_t index = 0; name && index < S_JOB_STATUSES; index++)
        if (strcmp (name, s_job_status_names [index]) == 0) {
            *status = (sched_job_status_t) index;
            return 0;
        }
    return -1;
}

int
sched_cell_status_parse (const char *name, sched_cell_status_t *status)
{
    for (size_t index = 0; name && index < S_CELL_STATUSES; index++)
        if (strcmp (name, s_cell_status_names [index]) == 0) {
            *status = (sched_cell_status_t) index;
            return 0;
        }
    return -1;
}

bool
sched_job_status_final (sched_job_status_t status)
{
    return status == SCHED_JOB_COMPLETED || status == SCHED_JOB_PARTIAL_FAILURE
           || status == SCHED_JOB_FAILED || status == SCHED_JOB_CANCELLED;
}

bool
sched_cell_status_final (sched_cell_status_t status)
{
    switch (status) {
        case SCHED_CELL_SUCCESS:
        case SCHED_CELL_FAILED:
        case SCHED_CELL_TIMEOUT:
        case SCHED_CELL_SKIPPED:
        case SCHED_CELL_LOST:
        case SCHED_CELL_CANCELLED:
        case SCHED_CELL_INTERRUPTED:
        case SCHED_CELL_OFFLINE:
        case SCHED_CELL_DRAINED:
        case SCHED_CELL_UNSUPPORTED:
            return true;
        default:
            return false;
    }
}

bool
sched_cell_status_failed (sched_cell_status_t status)
{
    return status == SCHED_CELL_FAILED || status == SCHED_CELL_TIMEOUT
           || status == SCHED_CELL_LOST || status == SCHED_CELL_INTERRUPTED
           || status == SCHED_CELL_OFFLINE || status == SCHED_CELL_DRAINED
           || status == SCHED_CELL_UNSUPPORTED;
}

//  Sent and not yet finished: the agent may be working on it.
static bool
s_in_flight (sched_cell_status_t status)
{
    return status == SCHED_CELL_DISPATCHED
           || status == SCHED_CELL_ACKNOWLEDGED
           || status == SCHED_CELL_RUNNING;
}

//  A final status that counts as a failure for conditions and strategies
//  (R6, R7). An agent-reported cancel of a live cell counts too: the node
//  did not do its work.
static bool
s_is_failure (sched_cell_status_t status)
{
    return status == SCHED_CELL_FAILED || status == SCHED_CELL_TIMEOUT
           || status == SCHED_CELL_LOST || status == SCHED_CELL_INTERRUPTED
           || status == SCHED_CELL_OFFLINE || status == SCHED_CELL_CANCELLED;
}

//  The node can no longer be reached for this job.
static bool
s_is_unreachable (sched_cell_status_t status)
{
    return status == SCHED_CELL_LOST || status == SCHED_CELL_OFFLINE;
}

static bool
s_condition_met (job_condition_t condition, bool failed)
{
    if (condition == JOB_COND_ON_SUCCESS)
        return !failed;
    if (condition == JOB_COND_ON_FAILURE)
        return failed;
    return true;
}

//  ---------------------------------------------------------------------
//  Config, PRNG, backoff

void
sched_config_defaults (sched_config_t *config)
{
    memset (config, 0, sizeof (*config));
    config->max_concurrent = 64;
    config->max_pending = 1024;
    config->ack_timeout_ms = 2000;
    config->ack_resends = 3;
    config->default_timeout_ms = 300000;
    config->grace_ms = 5000;
    config->retry_base_ms = 1000;
    config->retry_cap_ms = 60000;
    config->lease_ms = 30000;
    config->seed = 0;
}

//  xorshift64* (Vigna): small, fast, and plenty for jitter.
static uint64_t
s_random (sched_t *self)
{
    uint64_t x = self->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    self->rng = x;
    return x * UINT64_C (0x2545F4914F6CDD1D);
}

//  R11: backoff before attempt ATTEMPT + 1, after ATTEMPT failed.
//  b = min (cap, base * 2^(attempt-1)); equal jitter keeps half of b and
//  draws the other half uniformly, so the delay is in [b - b/2, b]: a
//  retry never comes back at once, and a fleet that failed together
//  spreads out.
static int64_t
s_backoff_ms (sched_t *self, uint32_t attempt)
{
    int64_t base = self->config.retry_base_ms;
    int64_t cap = self->config.retry_cap_ms;
    uint32_t shift = attempt > 0 ? attempt - 1 : 0;
    int64_t backoff;
    if (shift >= 62 || base > (cap >> shift))
        backoff = cap;
    else
        backoff = base << shift;
    if (backoff > cap)
        backoff = cap;
    if (backoff <= 0)
        return 0;
    int64_t half = backoff / 2;
    return backoff - half
           + (int64_t) (s_random (self) % (uint64_t) (half + 1));
}

//  ---------------------------------------------------------------------
//  Actions

static sched_action_t *
s_action (sched_t *self, sched_action_type_t type, sched_job_t *job)
{
    if (self->action_count == self->action_cap)
        self->actions = (sched_action_t *) s_grow (
            self->actions, &self->action_cap, sizeof (sched_action_t));
    sched_action_t *action = &self->actions [self->action_count++];
    memset (action, 0, sizeof (*action));
    action->type = type;
    action->job = job;
    return action;
}

static void
s_save_job (sched_t *self, sched_job_t *job)
{
    s_action (self, SCHED_ACTION_SAVE_JOB, job);
}

static void
s_save_cell (sched_t *self, sched_job_t *job, size_t step, size_t node)
{
    sched_action_t *action = s_action (self, SCHED_ACTION_SAVE_CELL, job);
    action->step = (uint32_t) step;
    action->node = job->expected [node];
    action->cell = step * job->expected_count + node;
}

//  EVENT for NODE (SIZE_MAX: job-level) at STEP; DETAIL is taken (kept
//  until drained) and may be NULL.
static void
s_event (sched_t *self, sched_job_t *job, const char *event, size_t node,
         size_t step, char *detail)
{
    sched_action_t *action = s_action (self, SCHED_ACTION_EVENT, job);
    action->event = event;
    action->step = (uint32_t) step;
    action->node = node == SIZE_MAX ? NULL : job->expected [node];
    action->detail = detail ? (char *) s_keep (self, detail) : NULL;
}

//  EVENT for the node named NODE (kept by the caller until drained).
static void
s_event_named (sched_t *self, sched_job_t *job, const char *event,
               const char *node, size_t step, char *detail)
{
    sched_action_t *action = s_action (self, SCHED_ACTION_EVENT, job);
    action->event = event;
    action->step = (uint32_t) step;
    action->node = node;
    action->detail = detail ? (char *) s_keep (self, detail) : NULL;
}

//  A short, single-line excerpt of agent text for an event detail.
static char *
s_excerpt (const char *prefix, const char *text)
{
    char buf [S_DETAIL_MAX + 1];
    size_t len = 0;
    for (; text && text [len] && len < S_DETAIL_MAX; len++)
        buf [len] = text [len] == '\n' || text [len] == '\r' ? ' '
                                                             : text [len];
    buf [len] = '\0';
    if (len == 0)
        return s_strdup (prefix);
    return s_printf ("%s: %s%s", prefix, buf, text [len] ? "..." : "");
}

//  ---------------------------------------------------------------------
//  Jobs by id: a chained hash, keyed by the job id text.

static size_t
s_hash (const char *text)
{
    return id_hash (text);
}

static s_jobx_t *
s_lookup (sched_t *self, const char *id)
{
    if (!id || !self->bucket_count)
        return NULL;
    s_jobx_t *jobx = self->buckets [s_hash (id) & (self->bucket_count - 1)];
    while (jobx && strcmp (jobx->job->id, id) != 0)
        jobx = jobx->hash_next;
    return jobx;
}

static void
s_hash_insert (sched_t *self, s_jobx_t *jobx)
{
    if (self->live_count + 1 > self->bucket_count) {
        size_t new_count = self->bucket_count ? self->bucket_count * 2 : 64;
        s_jobx_t **buckets
            = (s_jobx_t **) s_alloc (new_count * sizeof (s_jobx_t *));
        for (size_t index = 0; index < self->bucket_count; index++) {
            s_jobx_t *item = self->buckets [index];
            while (item) {
                s_jobx_t *next = item->hash_next;
                size_t slot = s_hash (item->job->id) & (new_count - 1);
                item->hash_next = buckets [slot];
                buckets [slot] = item;
                item = next;
            }
        }
        free (self->buckets);
        self->buckets = buckets;
        self->bucket_count = new_count;
    }
    size_t slot = s_hash (jobx->job->id) & (self->bucket_count - 1);
    jobx->hash_next = self->buckets [slot];
    self->buckets [slot] = jobx;
    self->live_count++;
}

static void
s_hash_remove (sched_t *self, s_jobx_t *jobx)
{
    s_jobx_t **link
        = &self->buckets [s_hash (jobx->job->id) & (self->bucket_count - 1)];
    while (*link && *link != jobx)
        link = &(*link)->hash_next;
    if (*link) {
        *link = jobx->hash_next;
        jobx->hash_next = NULL;
        self->live_count--;
    }
}

//  ---------------------------------------------------------------------
//  Nodes by id: a chained hash of what the scheduler knows of each node.

static s_node_t *
s_node_find (sched_t *self, const char *id)
{
    if (!id || !self->node_bucket_count)
        return NULL;
    s_node_t *node
        = self->node_buckets [s_hash (id) & (self->node_bucket_count - 1)];
    while (node && strcmp (node->id, id) != 0)
        node = node->hash_next;
    return node;
}

//  The node's entry, made on first use.
static s_node_t *
s_node_get (sched_t *self, const char *id)
{
    s_node_t *node = s_node_find (self, id);
    if (node)
        return node;
    if (self->node_count + 1 > self->node_bucket_count) {
        size_t new_count
            = self->node_bucket_count ? self->node_bucket_count * 2 : 64;
        s_node_t **buckets
            = (s_node_t **) s_alloc (new_count * sizeof (s_node_t *));
        for (size_t index = 0; index < self->node_bucket_count; index++) {
            s_node_t *item = self->node_buckets [index];
            while (item) {
                s_node_t *next = item->hash_next;
                size_t slot = s_hash (item->id) & (new_count - 1);
                item->hash_next = buckets [slot];
                buckets [slot] = item;
                item = next;
            }
        }
        free (self->node_buckets);
        self->node_buckets = buckets;
        self->node_bucket_count = new_count;
    }
    node = (s_node_t *) s_alloc (sizeof (s_node_t));
    node->id = s_strdup (id);
    size_t slot = s_hash (id) & (self->node_bucket_count - 1);
    node->hash_next = self->node_buckets [slot];
    self->node_buckets [slot] = node;
    self->node_count++;
    return node;
}

//  Entries for every expected node of JOB, and for a job of many nodes
//  their hashed index (sched_job_node_index reads it: every agent event
//  names its node).
static void
s_nodes_bind (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    free (jobx->nodes);
    jobx->nodes = (s_node_t **) s_alloc (
        (job->expected_count ? job->expected_count : 1) * sizeof (s_node_t *));
    for (size_t index = 0; index < job->expected_count; index++)
        jobx->nodes [index] = s_node_get (self, job->expected [index]);
    free (jobx->node_slots);
    jobx->node_slots = NULL;
    if (job->expected_count < S_NODE_SLOTS_MIN)
        return;
    size_t slots = 64;
    while (slots < job->expected_count * 2)
        slots *= 2;
    jobx->node_slots = (uint32_t *) s_alloc (slots * sizeof (uint32_t));
    jobx->node_slot_mask = slots - 1;
    for (size_t index = 0; index < job->expected_count; index++) {
        size_t slot = s_hash (job->expected [index]) & jobx->node_slot_mask;
        while (jobx->node_slots [slot])
            slot = (slot + 1) & jobx->node_slot_mask;
        jobx->node_slots [slot] = (uint32_t) index + 1;
    }
}

//  ---------------------------------------------------------------------
//  Pending queue: an indexed binary heap (priority desc, then age).

static bool
s_queue_before (const s_jobx_t *a, const s_jobx_t *b)
{
    int pa = a->job->spec->priority, pb = b->job->spec->priority;
    if (pa != pb)
        return pa > pb;
    return a->seq < b->seq;
}

static void
s_queue_place (sched_t *self, size_t index, s_jobx_t *jobx)
{
    self->queue [index] = jobx;
    jobx->queue_index = index;
}

static void
s_queue_sift (sched_t *self, size_t index)
{
    s_jobx_t *jobx = self->queue [index];
    while (index > 0) {
        size_t parent = (index - 1) / 2;
        if (!s_queue_before (jobx, self->queue [parent]))
            break;
        s_queue_place (self, index, self->queue [parent]);
        index = parent;
    }
    while (true) {
        size_t child = index * 2 + 1;
        if (child >= self->queue_size)
            break;
        if (child + 1 < self->queue_size
            && s_queue_before (self->queue [child + 1], self->queue [child]))
            child++;
        if (!s_queue_before (self->queue [child], jobx))
            break;
        s_queue_place (self, index, self->queue [child]);
        index = child;
    }
    s_queue_place (self, index, jobx);
}

static void
s_queue_push (sched_t *self, s_jobx_t *jobx)
{
    if (self->queue_size == self->queue_cap)
        self->queue = (s_jobx_t **) s_grow (self->queue, &self->queue_cap,
                                            sizeof (s_jobx_t *));
    s_queue_place (self, self->queue_size++, jobx);
    jobx->queued = true;
    s_queue_sift (self, jobx->queue_index);
}

static void
s_queue_remove (sched_t *self, s_jobx_t *jobx)
{
    size_t index = jobx->queue_index;
    jobx->queued = false;
    self->queue_size--;
    if (index < self->queue_size) {
        s_queue_place (self, index, self->queue [self->queue_size]);
        s_queue_sift (self, index);
    }
}

//  ---------------------------------------------------------------------
//  Deadlines: a binary min-heap with lazy deletion.

static bool
s_due_before (const s_due_t *a, const s_due_t *b)
{
    if (a->deadline_ms != b->deadline_ms)
        return a->deadline_ms < b->deadline_ms;
    return a->seq < b->seq;
}

static void
s_due_push (sched_t *self, s_jobx_t *jobx, s_due_kind_t kind,
            int64_t deadline_ms, size_t step, size_t node)
{
    if (self->due_size == self->due_cap)
        self->due = (s_due_t *) s_grow (self->due, &self->due_cap,
                                        sizeof (s_due_t));
    s_due_t entry;
    memset (&entry, 0, sizeof (entry));
    entry.deadline_ms = deadline_ms;
    entry.seq = self->due_seq++;
    entry.jobx = jobx;
    entry.kind = kind;
    entry.step = (uint32_t) step;
    entry.node = (uint32_t) node;
    if (kind != S_DUE_JOB) {
        sched_job_t *job = jobx->job;
        const sched_cell_t *cell
            = &job->cells [step * job->expected_count + node];
        entry.attempt = cell->attempt;
        entry.resends = cell->resends;
        entry.claims = cell->claims;
    }
    jobx->due_refs++;
    size_t index = self->due_size++;
    while (index > 0) {
        size_t parent = (index - 1) / 2;
        if (!s_due_before (&entry, &self->due [parent]))
            break;
        self->due [index] = self->due [parent];
        index = parent;
    }
    self->due [index] = entry;
}

static void s_jobx_release (s_jobx_t *jobx);

//  Removes the top entry into *ENTRY; drops its reference to the job.
static void
s_due_pop (sched_t *self, s_due_t *entry)
{
    *entry = self->due [0];
    s_due_t last = self->due [--self->due_size];
    size_t index = 0;
    while (self->due_size > 0) {
        size_t child = index * 2 + 1;
        if (child >= self->due_size)
            break;
        if (child + 1 < self->due_size
            && s_due_before (&self->due [child + 1], &self->due [child]))
            child++;
        if (!s_due_before (&self->due [child], &last))
            break;
        self->due [index] = self->due [child];
        index = child;
    }
    if (self->due_size > 0)
        self->due [index] = last;
    entry->jobx->due_refs--;
    s_jobx_release (entry->jobx);
}

//  Is ENTRY still what its cell or job is waiting for?
static bool
s_due_valid (const s_due_t *entry)
{
    s_jobx_t *jobx = entry->jobx;
    if (!jobx->job || !jobx->running || jobx->finished || jobx->ending)
        return false;
    sched_job_t *job = jobx->job;
    if (entry->kind == S_DUE_JOB)
        return jobx->job_deadline_ms == entry->deadline_ms;
    const sched_cell_t *cell
        = &job->cells [(size_t) entry->step * job->expected_count
                       + entry->node];
    if (entry->kind == S_DUE_LEASE)
        return s_in_flight (cell->status) && cell->attempt == entry->attempt
               && cell->claims == entry->claims;
    if (entry->kind == S_DUE_STALL)
        return cell->status == SCHED_CELL_RUNNING
               && cell->attempt == entry->attempt
               && cell->resends == entry->resends;
    if (cell->deadline_ms != entry->deadline_ms
        || cell->attempt != entry->attempt)
        return false;
    switch (entry->kind) {
        case S_DUE_ACK:
            return cell->status == SCHED_CELL_DISPATCHED
                   && cell->resends == entry->resends;
        case S_DUE_RUN:
            return cell->status == SCHED_CELL_ACKNOWLEDGED
                   || cell->status == SCHED_CELL_RUNNING;
        case S_DUE_RETRY:
            return cell->status == SCHED_CELL_RETRY_WAIT;
        default:
            return false;
    }
}

//  ---------------------------------------------------------------------
//  Job records

sched_job_t *
sched_job_new (const char *id, job_spec_t **spec_p)
{
    if (!id || !spec_p || !*spec_p || strlen (id) > JOB_ID_LEN)
        return NULL;
    sched_job_t *job = (sched_job_t *) s_alloc (sizeof (sched_job_t));
    memcpy (job->id, id, strlen (id) + 1);
    job->spec = *spec_p;
    *spec_p = NULL;
    job->status = SCHED_JOB_PENDING;
    job->step_count = job_spec_step_count (job->spec);
    return job;
}

void
sched_cell_clear (sched_cell_t *cell)
{
    for (size_t at = 0; at < cell->attempt_count; at++) {
        sched_attempt_t *attempt = &cell->attempts [at];
        free (attempt->output);
        free (attempt->error);
        free (attempt->node);
        for (size_t item = 0; item < attempt->data_count; item++) {
            free (attempt->data [item].key);
            free (attempt->data [item].value);
        }
        free (attempt->data);
    }
    free (cell->attempts);
    free (cell->reason);
    free (cell->waiting);
    free (cell->progress_kind);
    free (cell->progress);
    memset (cell, 0, sizeof (*cell));
}

static void
s_cells_free (sched_job_t *job)
{
    size_t count = job->cells ? job->step_count * job->expected_count : 0;
    for (size_t index = 0; index < count; index++)
        sched_cell_clear (&job->cells [index]);
    free (job->cells);
    job->cells = NULL;
}

static void
s_expected_free (sched_job_t *job)
{
    for (size_t index = 0; index < job->expected_count; index++)
        free (job->expected [index]);
    free (job->expected);
    job->expected = NULL;
    job->expected_count = 0;
}

void
sched_not_run_free (sched_not_run_t *list, size_t count)
{
    for (size_t index = 0; list && index < count; index++) {
        free (list [index].node);
        free (list [index].reason);
    }
    free (list);
}

static void
s_not_run_clear (sched_job_t *job)
{
    sched_not_run_free (job->not_run, job->not_run_count);
    job->not_run = NULL;
    job->not_run_count = 0;
}

static int
s_compare_not_run (const void *a, const void *b)
{
    return strcmp (((const sched_not_run_t *) a)->node,
                   ((const sched_not_run_t *) b)->node);
}

//  The not-run entry of NODE in JOB's sorted list, or NULL.
static const sched_not_run_t *
s_not_run_find (const sched_job_t *job, const char *node)
{
    if (!job->not_run_count)
        return NULL;
    sched_not_run_t key;
    memset (&key, 0, sizeof key);
    key.node = (char *) node;
    return (const sched_not_run_t *) bsearch (
        &key, job->not_run, job->not_run_count, sizeof (sched_not_run_t),
        s_compare_not_run);
}

//  "web-07 offline since 12:01:07, web-09 drained" for the entries of
//  JOB's not-run list whose `named` is NAMED, at most 3 then "and N
//  more". A new string.
static char *
s_not_run_text (const sched_job_t *job, bool named)
{
    char *text = s_strdup ("");
    size_t shown = 0, total = 0;
    for (size_t index = 0; index < job->not_run_count; index++) {
        const sched_not_run_t *entry = &job->not_run [index];
        if (entry->named != named)
            continue;
        if (total++ >= 3)
            continue;
        char *longer = s_printf ("%s%s%s %s", text, shown ? ", " : "",
                                 entry->node, entry->reason ? entry->reason
                                                            : "not run");
        free (text);
        text = longer;
        shown++;
    }
    if (total > shown) {
        char *longer = s_printf ("%s and %zu more", text, total - shown);
        free (text);
        text = longer;
    }
    return text;
}

//  How many entries of JOB's not-run list have `named` NAMED.
static size_t
s_not_run_count (const sched_job_t *job, bool named)
{
    size_t count = 0;
    for (size_t index = 0; index < job->not_run_count; index++)
        if (job->not_run [index].named == named)
            count++;
    return count;
}

//  Frees the record itself (not its priv).
static void
s_job_free (sched_job_t *job)
{
    s_cells_free (job);
    s_expected_free (job);
    s_not_run_clear (job);
    job_spec_destroy (&job->spec);
    free (job->reason);
    free (job->retry_of);
    for (size_t index = 0; index < job->retried_by_count; index++)
        free (job->retried_by [index]);
    free (job->retried_by);
    free (job->schedule);
    free (job);
}

//  Frees a priv whose job is gone once no deadline points at it.
static void
s_jobx_release (s_jobx_t *jobx)
{
    if (jobx->job || jobx->due_refs > 0)
        return;
    free (jobx->steps);
    free (jobx->phases);
    free (jobx->step_final);
    free (jobx->phase_final);
    free (jobx->node_flags);
    free (jobx->nodes);
    free (jobx->node_slots);
    free (jobx->target_text);
    free (jobx->step_limits);
    free (jobx->step_job_limits);
    free (jobx->blocked);
    free (jobx->barrier_done);
    job_graph_destroy (&jobx->graph);
    free (jobx);
}

//  Frees a job the scheduler owns, and its priv unless deadlines still
//  point at it (they find jobx->job NULL and let go).
static void
s_job_discard (sched_job_t *job)
{
    s_jobx_t *jobx = (s_jobx_t *) job->priv;
    job->priv = NULL;
    s_job_free (job);
    if (jobx) {
        jobx->job = NULL;
        s_jobx_release (jobx);
    }
}

void
sched_job_destroy (sched_job_t **job_p)
{
    if (!job_p || !*job_p)
        return;
    sched_job_t *job = *job_p;
    //  A job handed to a scheduler is the scheduler's; a caller never
    //  holds one with a priv.
    assert (job->priv == NULL);
    s_job_free (job);
    *job_p = NULL;
}

//  Builds the priv of JOB: the step and phase tables from the spec.
//  Returns NULL when the spec does not add up (a corrupt record).
static s_jobx_t *
s_jobx_new (sched_job_t *job)
{
    const job_spec_t *spec = job->spec;
    if (!spec || job_spec_step_count (spec) != job->step_count
        || (spec->phase_count > 0 && !spec->phases))
        return NULL;
    s_jobx_t *jobx = (s_jobx_t *) s_alloc (sizeof (s_jobx_t));
    jobx->job = job;
    jobx->phase_count = spec->phase_count;
    jobx->phases
        = (s_phase_t *) s_alloc (spec->phase_count * sizeof (s_phase_t));
    jobx->steps = (s_step_t *) s_alloc (job->step_count * sizeof (s_step_t));
    bool valid = true;
    for (size_t p = 0; p < spec->phase_count; p++) {
        s_phase_t *phase = &jobx->phases [p];
        phase->first = job_spec_phase_first_step (spec, p);
        phase->branch = spec->phases [p].tasks != NULL;
        phase->count = phase->branch ? spec->phases [p].task_count : 1;
        phase->condition = spec->phases [p].condition;
    }
    for (size_t p = 0; p < spec->phase_count && valid; p++) {
        const s_phase_t *phase = &jobx->phases [p];
        size_t end = p + 1 < spec->phase_count ? jobx->phases [p + 1].first
                                               : job->step_count;
        if (phase->first + phase->count != end)
            valid = false;
    }
    for (size_t step = 0; step < job->step_count && valid; step++) {
        size_t phase = 0;
        int sub = -1;
        const job_phase_t *leaf = job_spec_step (spec, step, &phase, &sub);
        if (!leaf || phase >= spec->phase_count
            || (sub >= 0) != jobx->phases [phase].branch) {
            valid = false;
            break;
        }
        jobx->steps [step].leaf = leaf;
        jobx->steps [step].phase = phase;
        jobx->steps [step].sub = sub;
    }
    if (valid && job_spec_is_dag (spec)) {
        jobx->graph = job_graph_new (spec);
        valid = jobx->graph && jobx->graph->step_count == job->step_count;
    }
    if (!valid) {
        jobx->job = NULL;
        s_jobx_release (jobx);
        return NULL;
    }
    jobx->lease_ms = spec->lease_ms;
    jobx->barrier_done
        = (size_t *) s_alloc (job->step_count * sizeof (size_t));
    jobx->batch_count = 1;
    jobx->budget = SIZE_MAX;
    jobx->step_final = (size_t *) s_alloc (job->step_count * sizeof (size_t));
    jobx->phase_final
        = (size_t *) s_alloc (spec->phase_count * sizeof (size_t));
    return jobx;
}

static sched_cell_t *
s_cell (sched_job_t *job, size_t step, size_t node)
{
    return &job->cells [step * job->expected_count + node];
}

static int
s_compare_ids (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  R15: index of NODE in the sorted expected array, or -1.
ssize_t
sched_job_node_index (const sched_job_t *job, const char *node)
{
    if (!node || !job->expected)
        return -1;
    const s_jobx_t *jobx = (const s_jobx_t *) job->priv;
    if (jobx && jobx->node_slots) {
        size_t mask = jobx->node_slot_mask;
        for (size_t slot = s_hash (node) & mask; jobx->node_slots [slot];
             slot = (slot + 1) & mask) {
            size_t index = jobx->node_slots [slot] - 1;
            if (strcmp (job->expected [index], node) == 0)
                return (ssize_t) index;
        }
        return -1;
    }
    char *const *found = (char *const *) bsearch (
        &node, job->expected, job->expected_count, sizeof (char *),
        s_compare_ids);
    return found ? found - job->expected : -1;
}

//  Cells of PHASE over the nodes of every batch started so far (R26): the
//  earlier batches are all final, and the counters leave out the cells
//  of batches not started yet.
static size_t
s_phase_cells (const s_jobx_t *jobx, size_t phase)
{
    return jobx->phases [phase].count * jobx->batch_hi;
}

//  ---------------------------------------------------------------------
//  Rolling batches (R26)

//  Nodes per batch and in the first batch, out of NODES.
static void
s_batch_sizes (const job_spec_t *spec, size_t nodes, size_t *size_p,
               size_t *first_p)
{
    size_t size = spec->batch.set ? job_amount_nodes (&spec->batch, nodes)
                                  : nodes;
    if (size < 1)
        size = 1;
    size_t first = spec->canary ? (size_t) spec->canary : size;
    *size_p = size;
    *first_p = first < nodes ? first : nodes;
}

size_t
sched_job_batch_count (const sched_job_t *job)
{
    size_t nodes = job->expected_count, size, first;
    if (nodes == 0)
        return 1;
    s_batch_sizes (job->spec, nodes, &size, &first);
    return 1 + (nodes - first + size - 1) / size;
}

size_t
sched_job_batch_end (const sched_job_t *job, size_t batch)
{
    size_t nodes = job->expected_count, size, first;
    if (nodes == 0)
        return 0;
    s_batch_sizes (job->spec, nodes, &size, &first);
    if (batch == 0)
        return first;
    size_t rest = nodes - first;
    return batch - 1 < rest / size ? first + batch * size : nodes;
}

size_t
sched_job_batch_current (const sched_job_t *job)
{
    size_t count = sched_job_batch_count (job);
    if (!job->cells)
        return 0;
    size_t last_sent = 0;
    for (size_t batch = 0; batch < count; batch++) {
        size_t lo = batch ? sched_job_batch_end (job, batch - 1) : 0;
        size_t hi = sched_job_batch_end (job, batch);
        for (size_t step = 0; step < job->step_count; step++)
            for (size_t node = lo; node < hi; node++) {
                const sched_cell_t *cell
                    = &job->cells [step * job->expected_count + node];
                if (!sched_cell_status_final (cell->status))
                    return batch;
                if (cell->attempt > 0)
                    last_sent = batch;
            }
    }
    //  All final: the last batch that was sent work (a spent failure
    //  budget leaves the later ones untouched)
    return last_sent;
}

size_t
sched_job_budget (const sched_job_t *job)
{
    const job_spec_t *spec = job->spec;
    if (spec->max_failures.set) {
        if (!spec->max_failures.percent)
            return spec->max_failures.value;
        return job_amount_nodes (&spec->max_failures, job->expected_count);
    }
    if (sched_job_batch_count (job) > 1
        && spec->strategy == JOB_STRATEGY_FAIL_FAST)
        return 0;
    return SIZE_MAX;
}

//  R26: named nodes that could not run (R2) count as failed nodes once
//  their batch starts: those of the current batch from node FROM on.
static void
s_batch_count_absent (s_jobx_t *jobx, size_t from)
{
    for (size_t node = from; node < jobx->batch_hi; node++)
        if ((jobx->node_flags [node] & S_NODE_ABSENT)
            && !(jobx->node_flags [node] & S_NODE_FAILED)) {
            jobx->node_flags [node] |= S_NODE_FAILED;
            jobx->failed_nodes++;
        }
}

//  Sets the node range of batch BATCH.
static void
s_batch_set (s_jobx_t *jobx, size_t batch)
{
    jobx->batch = batch;
    jobx->batch_lo = batch ? sched_job_batch_end (jobx->job, batch - 1) : 0;
    jobx->batch_hi = sched_job_batch_end (jobx->job, batch);
    jobx->job->batch = batch;
    jobx->job->batch_count = jobx->batch_count;
}

//  ---------------------------------------------------------------------
//  Concurrency limits (R21)

//  Which broker limits and which of the job's own limits cover each step.
static void
s_limits_bind (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    const job_spec_t *spec = job->spec;
    free (jobx->step_limits);
    free (jobx->step_job_limits);
    jobx->step_limits = NULL;
    jobx->step_job_limits = NULL;
    if (self->limit_count == 0 && spec->limit_count == 0)
        return;
    size_t bytes = (job->step_count ? job->step_count : 1) * sizeof (uint32_t);
    jobx->step_limits = (uint32_t *) s_alloc (bytes);
    jobx->step_job_limits = (uint32_t *) s_alloc (bytes);
    for (size_t step = 0; step < job->step_count; step++) {
        const job_phase_t *leaf = jobx->steps [step].leaf;
        for (size_t rule = 0; rule < self->limit_count; rule++)
            if (job_limit_matches (self->limits [rule].pattern, leaf->backend,
                                   leaf->action))
                jobx->step_limits [step] |= (uint32_t) 1 << rule;
        for (size_t rule = 0; rule < spec->limit_count && rule < JOB_MAX_LIMITS;
             rule++)
            if (job_limit_matches (spec->limits [rule].pattern, leaf->backend,
                                   leaf->action))
                jobx->step_job_limits [step] |= (uint32_t) 1 << rule;
    }
}

//  Is STEP of JOBX under any limit?
static bool
s_step_limited (const s_jobx_t *jobx, size_t step)
{
    return jobx->step_limits
           && (jobx->step_limits [step] || jobx->step_job_limits [step]);
}

//  A cell of STEP on NODE went into flight (DELTA 1) or out of it (-1).
static void
s_limits_count (sched_t *self, s_jobx_t *jobx, size_t step, s_node_t *node,
                int delta)
{
    if (!s_step_limited (jobx, step))
        return;
    uint32_t mask = jobx->step_limits [step];
    for (size_t rule = 0; mask && rule < self->limit_count; rule++)
        if (mask & ((uint32_t) 1 << rule)) {
            self->limit_running [rule] += (uint32_t) delta;
            if (self->limits [rule].per_node) {
                if (!node->limit_running)
                    node->limit_running = (uint32_t *) s_alloc (
                        JOB_MAX_LIMITS * sizeof (uint32_t));
                node->limit_running [rule] += (uint32_t) delta;
            }
        }
    mask = jobx->step_job_limits [step];
    for (size_t rule = 0; mask && rule < JOB_MAX_LIMITS; rule++)
        if (mask & ((uint32_t) 1 << rule))
            jobx->job_limit_running [rule] += (uint32_t) delta;
}

//  R21: do the fleet-wide limits (the broker's and the job's own) leave
//  room for one more cell of STEP? If not, *WHY_P and *KEY_P (malloc'd)
//  say which is full.
static bool
s_limits_room (sched_t *self, s_jobx_t *jobx, size_t step, char **why_p,
               char **key_p)
{
    if (!s_step_limited (jobx, step))
        return true;
    uint32_t mask = jobx->step_limits [step];
    for (size_t rule = 0; mask && rule < self->limit_count; rule++) {
        const job_limit_t *limit = &self->limits [rule];
        if ((mask & ((uint32_t) 1 << rule)) && !limit->per_node
            && self->limit_running [rule] >= limit->max) {
            *why_p = s_printf ("waiting: %s %" PRIu32 "/%" PRIu32 " running",
                               limit->pattern, self->limit_running [rule],
                               limit->max);
            *key_p = s_printf ("limit %s", limit->pattern);
            return false;
        }
    }
    const job_spec_t *spec = jobx->job->spec;
    mask = jobx->step_job_limits [step];
    for (size_t rule = 0; mask && rule < spec->limit_count; rule++) {
        const job_limit_t *limit = &spec->limits [rule];
        if ((mask & ((uint32_t) 1 << rule))
            && jobx->job_limit_running [rule] >= limit->max) {
            *why_p = s_printf ("waiting: %s %" PRIu32 "/%" PRIu32 " running "
                               "(the job's limit)", limit->pattern,
                               jobx->job_limit_running [rule], limit->max);
            *key_p = s_printf ("job %s %s", jobx->job->id, limit->pattern);
            return false;
        }
    }
    return true;
}

//  R21: do the per-node limits leave room on NODE for one more cell of
//  STEP? If not, *WHY_P and *KEY_P (both may be NULL) say which is full.
static bool
s_node_room (sched_t *self, s_jobx_t *jobx, size_t step, const char *node,
             char **why_p, char **key_p)
{
    if (!jobx->step_limits || !jobx->step_limits [step])
        return true;
    s_node_t *entry = s_node_find (self, node);
    uint32_t mask = jobx->step_limits [step];
    for (size_t rule = 0; mask && rule < self->limit_count; rule++) {
        const job_limit_t *limit = &self->limits [rule];
        uint32_t running = entry && entry->limit_running
                               ? entry->limit_running [rule]
                               : 0;
        if ((mask & ((uint32_t) 1 << rule)) && limit->per_node
            && running >= limit->max) {
            if (why_p)
                *why_p = s_printf ("waiting: %s %" PRIu32 "/%" PRIu32
                                   " running on %s", limit->pattern, running,
                                   limit->max, node);
            if (key_p)
                *key_p = s_printf ("limit %s on %s", limit->pattern, node);
            return false;
        }
    }
    return true;
}

//  ---------------------------------------------------------------------
//  Cells

//  The cell's progress is gone (a new attempt, or the end).
static void
s_progress_clear (sched_cell_t *cell)
{
    free (cell->progress_kind);
    free (cell->progress);
    cell->progress_kind = cell->progress = NULL;
    cell->percent = -1;
    cell->progress_ms = 0;
}

//  The cell no longer waits for a slot.
static void
s_waiting_clear (sched_t *self, sched_cell_t *cell)
{
    if (cell->waiting) {
        free (cell->waiting);
        cell->waiting = NULL;
        self->waiting_count--;
    }
}

//  R15: job->step is the lowest step with a cell not yet final, which is
//  the lowest step some node still works on. Cells never leave a final
//  status, so the pointer only moves forward: O(1) amortised.
static void
s_step_update (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    if (jobx->ending)
        return;
    size_t step = job->step;
    while (step < job->step_count
           && jobx->step_final [step] >= jobx->batch_hi)
        step++;
    if (step != job->step) {
        job->step = step;
        s_save_job (self, job);
    }
}

//  Sets a cell's status, with a SAVE_CELL when SAVE; keeps the final
//  counters.
static void
s_cell_change (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
               sched_cell_status_t status, bool save)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, node);
    bool was_final = sched_cell_status_final (cell->status);
    if (cell->status != status)
        cell->since_ms = self->now_ms;
    if (status == SCHED_CELL_DISPATCHED)
        cell->dispatched_ms = self->now_ms;
    cell->status = status;
    //  The node's in-flight figure (loads, R17) follows the cell
    bool flying = s_in_flight (status);
    if (flying != cell->counted && jobx->nodes) {
        s_node_t *entry = jobx->nodes [node];
        if (flying)
            entry->in_flight++;
        else {
            entry->in_flight--;
            self->wait_dirty = true;
        }
        s_limits_count (self, jobx, step, entry, flying ? 1 : -1);
        cell->counted = flying;
    }
    if (!was_final && sched_cell_status_final (status)) {
        self->counters.cells_final [status]++;
        //  Cells of batches not started yet are counted when theirs starts
        if (node < jobx->batch_hi) {
            jobx->step_final [step]++;
            jobx->phase_final [jobx->steps [step].phase]++;
            jobx->final_total++;
        }
        cell->deadline_ms = 0;
        s_waiting_clear (self, cell);
        s_progress_clear (cell);
    }
    if (save)
        s_save_cell (self, job, step, node);
    if (!was_final && sched_cell_status_final (status))
        s_step_update (self, jobx);
}

//  Sets a cell's status (SAVE_CELL); keeps the final counters.
static void
s_cell_set (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
            sched_cell_status_t status)
{
    s_cell_change (self, jobx, step, node, status, true);
}

//  Records a finished attempt on a cell (R11: every attempt is kept).
//  NODE names the node that ran it on any-node jobs (NULL otherwise).
static void
s_attempt_add (sched_cell_t *cell, const char *node,
               sched_cell_status_t status, const char *output,
               const char *error, int32_t exit_code, int64_t duration_ms,
               bool truncated)
{
    sched_attempt_t *grown = (sched_attempt_t *) realloc (
        cell->attempts, (cell->attempt_count + 1) * sizeof (sched_attempt_t));
    if (!grown) {
        fprintf (stderr, "sched: out of memory (attempts)\n");
        abort ();
    }
    cell->attempts = grown;
    sched_attempt_t *attempt = &cell->attempts [cell->attempt_count++];
    memset (attempt, 0, sizeof (*attempt));
    attempt->attempt = cell->attempt;
    attempt->status = status;
    attempt->output = s_strdup (output);
    attempt->error = s_strdup (error);
    attempt->exit_code = exit_code;
    attempt->duration_ms = duration_ms;
    attempt->truncated = truncated;
    attempt->node = s_strdup (node);
}

//  How long the current attempt of CELL has been running: from its
//  started until now, 0 when it never started (a cancel or a loss
//  records the time the step really ran).
static int64_t
s_ran_ms (const sched_t *self, const sched_cell_t *cell)
{
    if (cell->status != SCHED_CELL_RUNNING || cell->started_ms <= 0
        || self->now_ms < cell->started_ms)
        return 0;
    return self->now_ms - cell->started_ms;
}

bool
sched_attempt_fill (sched_cell_t *cell, const proto_msg_t *result)
{
    if ((cell->status != SCHED_CELL_LOST
         && cell->status != SCHED_CELL_CANCELLED)
        || cell->attempt_count == 0)
        return false;
    sched_attempt_t *attempt = &cell->attempts [cell->attempt_count - 1];
    //  Stored records keep a missing output as ""
    if (attempt->attempt != result->attempt
        || (attempt->output && *attempt->output) || attempt->exit_code >= 0
        || attempt->data_count
        || ((!result->output || !*result->output) && result->exit_code < 0
            && result->duration_ms == 0))
        return false;
    free (attempt->output);
    attempt->output = s_strdup (result->output ? result->output : "");
    attempt->exit_code = result->exit_code;
    attempt->duration_ms = result->duration_ms > (uint64_t) INT64_MAX
                               ? INT64_MAX
                               : (int64_t) result->duration_ms;
    attempt->truncated = result->truncated;
    attempt->output_size = result->output_size;
    attempt->error_size = result->error_size;
    attempt->output_dropped = result->output_dropped;
    attempt->error_dropped = result->error_dropped;
    if (!attempt->error && result->error && *result->error)
        attempt->error = s_strdup (result->error);
    if (result->data_count) {
        attempt->data = (proto_kv_t *) s_alloc (result->data_count
                                                * sizeof (proto_kv_t));
        for (size_t item = 0; item < result->data_count; item++) {
            attempt->data [item].key = s_strdup (result->data [item].key);
            attempt->data [item].value = s_strdup (result->data [item].value);
        }
        attempt->data_count = result->data_count;
    }
    return true;
}

//  The node an attempt of JOB on column NODE names: any-node jobs only.
static const char *
s_attempt_node (const s_jobx_t *jobx, size_t node)
{
    return jobx->any ? jobx->job->expected [node] : NULL;
}


//  Marks every non-final cell of NODE in steps FROM up to (not
//  including) TO skipped, with one event saying why. Returns how many.
static size_t
s_skip_node (sched_t *self, s_jobx_t *jobx, size_t node, size_t from,
             size_t to, const char *why)
{
    sched_job_t *job = jobx->job;
    size_t skipped = 0, first = 0;
    for (size_t step = from; step < to; step++) {
        sched_cell_status_t status = s_cell (job, step, node)->status;
        if (sched_cell_status_final (status))
            continue;
        if (skipped++ == 0)
            first = step;
        s_cell_set (self, jobx, step, node, SCHED_CELL_SKIPPED);
        if (jobx->blocked)
            jobx->blocked [step * job->expected_count + node] = 1;
    }
    if (skipped == 1)
        s_event (self, job, "skipped", node, first, s_strdup (why));
    else
    if (skipped > 1)
        s_event (self, job, "skipped", node, first,
                 s_printf ("%zu steps skipped: %s", skipped, why));
    return skipped;
}

//  ---------------------------------------------------------------------
//  Dispatch

//  DISPATCH of STEP/ATTEMPT to one node on its own topic (pipelines,
//  retries, node lists and `any` targets), now.
static void
s_send_node (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
             uint32_t attempt)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, node);
    cell->attempt = attempt;
    cell->resends = 0;
    cell->started_ms = 0;
    cell->deadline_ms = self->now_ms + self->config.ack_timeout_ms;
    s_progress_clear (cell);
    jobx->node_flags [node] |= S_NODE_TOOK_PART;
    s_cell_set (self, jobx, step, node, SCHED_CELL_DISPATCHED);
    s_due_push (self, jobx, S_DUE_ACK, cell->deadline_ms, step, node);
    sched_action_t *action = s_action (self, SCHED_ACTION_DISPATCH, job);
    action->step = (uint32_t) step;
    action->attempt = attempt;
    action->node_count = 1;
    if (jobx->any) {
        //  R17, R18: a claim; the holder's lease starts now. The lane may
        //  move later in this call, so the action keeps its own name.
        char **names = (char **) s_keep (self, s_alloc (sizeof (char *)));
        names [0] = job->expected [node];
        action->nodes = names;
        s_node_t *holder = jobx->nodes [node];
        self->counters.claims++;
        holder->claims++;
        cell->claims++;
        cell->renewed_ms = self->now_ms;
        jobx->claimed = true;
        s_due_push (self, jobx, S_DUE_LEASE, self->now_ms + jobx->lease_ms,
                    step, node);
    }
    else
        action->nodes = &job->expected [node];
    s_event (self, job, "dispatched", node, step,
             attempt > 1 ? s_printf ("attempt %" PRIu32, attempt) : NULL);
}

//  ---------------------------------------------------------------------
//  Any-node claims (R17) and waiting cells

//  Is NODE up as far as the scheduler can tell?
static bool
s_node_up (sched_t *self, const char *node, sched_load_t *load)
{
    s_node_t *entry = s_node_find (self, node);
    if (entry && entry->down)
        return false;
    sched_load_t scratch;
    if (!load)
        load = &scratch;
    memset (load, 0, sizeof (*load));
    load->online = true;
    if (self->load && !self->load (self->fleet_arg, node, load))
        return false;
    return load->online;
}

//  NODE's load: what the scheduler sent it and has not seen finish, or
//  what its last heartbeat said runs and waits there, the larger. Sets
//  *FREE when it has a slot left.
static int64_t
s_node_load (sched_t *self, const char *node, bool *usable, bool *free_slot)
{
    sched_load_t load;
    *usable = s_node_up (self, node, &load);
    s_node_t *entry = s_node_find (self, node);
    int64_t mine = entry ? entry->in_flight : 0;
    int64_t told = self->load ? (int64_t) load.running + load.queued : 0;
    int64_t figure = mine > told ? mine : told;
    *free_slot = !self->load || figure < (int64_t) (load.slots ? load.slots : 1);
    return figure;
}

//  Did CELL's step get taken back from NODE before?
static bool
s_cell_left (const sched_cell_t *cell, const char *node)
{
    for (size_t index = 0; index < cell->attempt_count; index++) {
        const sched_attempt_t *attempt = &cell->attempts [index];
        if (attempt->node && !attempt->late
            && attempt->status == SCHED_CELL_LOST
            && strcmp (attempt->node, node) == 0)
            return true;
    }
    return false;
}

//  R17: the candidate for STEP of JOBX (NULL: a job not yet started)
//  among IDS: the least loaded usable node (with a free slot when
//  NEED_FREE, per-node limits included), ties broken in turn. Nodes the step
//  was taken back from are passed over while another node can take it.
//  Returns its index or -1; *BUSY_P counts usable nodes without a slot,
//  *USABLE_P the nodes up (both may be NULL).
static ssize_t
s_pick (sched_t *self, char **ids, size_t count, s_jobx_t *jobx, size_t step,
        bool need_free, size_t *busy_p, size_t *usable_p)
{
    const sched_cell_t *cell = jobx ? s_cell (jobx->job, step, 0) : NULL;
    int64_t *loads = (int64_t *) s_alloc ((count ? count : 1) * sizeof (int64_t));
    bool *eligible = (bool *) s_alloc (count ? count : 1);
    bool *left = (bool *) s_alloc (count ? count : 1);
    size_t busy = 0, fresh = 0, up = 0;
    for (size_t index = 0; index < count; index++) {
        bool usable, free_slot;
        loads [index] = s_node_load (self, ids [index], &usable, &free_slot);
        //  R21: a node whose per-node limit is full has no slot for it
        if (jobx && free_slot
            && !s_node_room (self, jobx, step, ids [index], NULL, NULL))
            free_slot = false;
        if (usable)
            up++;
        if (usable && !free_slot)
            busy++;
        eligible [index] = usable && (free_slot || !need_free);
        left [index] = cell && s_cell_left (cell, ids [index]);
        if (eligible [index] && !left [index])
            fresh++;
    }
    ssize_t pick = -1;
    int64_t best = INT64_MAX;
    size_t start = count ? self->any_counter % count : 0;
    for (size_t turn = 0; turn < count; turn++) {
        size_t index = (start + turn) % count;
        if (!eligible [index] || (fresh > 0 && left [index]))
            continue;
        if (loads [index] < best) {
            best = loads [index];
            pick = (ssize_t) index;
        }
    }
    if (pick >= 0)
        self->any_counter++;
    free (loads);
    free (eligible);
    free (left);
    if (busy_p)
        *busy_p = busy;
    if (usable_p)
        *usable_p = up;
    return pick;
}

//  Moves an any-node job's column to NODE: the stored cells of the old
//  holder are forgotten and written again under the new one.
static void
s_any_move (sched_t *self, s_jobx_t *jobx, const char *node)
{
    sched_job_t *job = jobx->job;
    if (strcmp (job->expected [0], node) == 0)
        return;
    char *old = (char *) s_keep (self, job->expected [0]);
    sched_action_t *action = s_action (self, SCHED_ACTION_FORGET_CELLS, job);
    action->node = old;
    job->expected [0] = s_strdup (node);
    free (jobx->node_slots);     //  Not built for one node; never stale
    jobx->node_slots = NULL;
    jobx->nodes [0] = s_node_get (self, node);
    s_save_job (self, job);
    for (size_t step = 0; step < job->step_count; step++) {
        const sched_cell_t *cell = s_cell (job, step, 0);
        if (cell->status != SCHED_CELL_PENDING || cell->attempt_count > 0
            || cell->waiting)
            s_save_cell (self, job, step, 0);
    }
}

//  The target of an any-node job as text (kept with the job).
static const char *
s_target_text (s_jobx_t *jobx)
{
    if (!jobx->target_text) {
        char *text = target_format (&jobx->job->spec->target);
        jobx->target_text = text ? text : s_strdup ("any");
    }
    return jobx->target_text;
}

//  R17: may STEP of an any-node job go now, and where? The lane stays
//  on a holder that is up once the job has run there, unless this very
//  step was taken from it; otherwise the least loaded node of the set
//  with a free slot takes it (the lane moves there). Returns true to
//  dispatch to expected[0], or false with *WHY_P (malloc'd) saying what
//  the step waits for.
static bool
s_any_gate (sched_t *self, s_jobx_t *jobx, size_t step, char **why_p)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, 0);
    bool fresh_pick = jobx->fresh_pick;
    jobx->fresh_pick = false;
    if (fresh_pick
        && s_node_room (self, jobx, step, job->expected [0], NULL, NULL))
        return true;
    if (jobx->claimed && !s_cell_left (cell, job->expected [0])
        && s_node_up (self, job->expected [0], NULL)
        && s_node_room (self, jobx, step, job->expected [0], NULL, NULL))
        return true;
    char **ids = NULL;
    size_t count = self->resolve ? self->resolve (self->resolve_arg,
                                                  &job->spec->target, &ids)
                                 : 0;
    size_t busy = 0, up = 0;
    ssize_t pick = s_pick (self, ids, count, jobx, step, true, &busy, &up);
    if (pick >= 0)
        s_any_move (self, jobx, ids [pick]);
    else
    if (up == 0)
        *why_p = s_printf ("waiting: no online node matches %s",
                           s_target_text (jobx));
    else
        *why_p = s_printf ("waiting: no free slot on %s (%zu of %zu node%s "
                           "busy)", s_target_text (jobx), busy, up,
                           up == 1 ? "" : "s");
    for (size_t index = 0; index < count; index++)
        free (ids [index]);
    free (ids);
    return pick >= 0;
}

//  May STEP of JOBX go to column NODE now (R17, R21)? The fleet-wide
//  limits first; then an any-node job picks its node (the column may
//  move), another job checks NODE's own limits. Returns true, or false
//  with *WHY_P (the cell's reason) and *KEY_P (what it waits for, its
//  waiting class), both malloc'd.
static bool
s_gate (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
        char **why_p, char **key_p)
{
    if (!s_limits_room (self, jobx, step, why_p, key_p))
        return false;
    if (jobx->any) {
        if (s_any_gate (self, jobx, step, why_p))
            return true;
        *key_p = s_strdup (s_target_text (jobx));
        return false;
    }
    return s_node_room (self, jobx, step, jobx->job->expected [node], why_p,
                        key_p);
}

//  Does STEP of JOBX have to pass s_gate?
static bool
s_gated (const s_jobx_t *jobx, size_t step)
{
    return jobx->any || s_step_limited (jobx, step);
}

static bool
s_wait_before (const s_wait_t *a, const s_wait_t *b)
{
    if (a->priority != b->priority)
        return a->priority > b->priority;
    return a->seq < b->seq;
}

static void
s_wait_push (s_class_t *class_, const s_wait_t *entry)
{
    if (class_->size == class_->cap)
        class_->heap = (s_wait_t *) s_grow (class_->heap, &class_->cap,
                                           sizeof (s_wait_t));
    size_t index = class_->size++;
    while (index > 0) {
        size_t parent = (index - 1) / 2;
        if (!s_wait_before (entry, &class_->heap [parent]))
            break;
        class_->heap [index] = class_->heap [parent];
        index = parent;
    }
    class_->heap [index] = *entry;
}

//  Removes the head of CLASS_ into *ENTRY (its job reference goes with it).
static void
s_wait_pop (s_class_t *class_, s_wait_t *entry)
{
    *entry = class_->heap [0];
    s_wait_t last = class_->heap [--class_->size];
    size_t index = 0;
    while (class_->size > 0) {
        size_t child = index * 2 + 1;
        if (child >= class_->size)
            break;
        if (child + 1 < class_->size
            && s_wait_before (&class_->heap [child + 1],
                              &class_->heap [child]))
            child++;
        if (!s_wait_before (&class_->heap [child], &last))
            break;
        class_->heap [index] = class_->heap [child];
        index = child;
    }
    if (class_->size > 0)
        class_->heap [index] = last;
}

//  The cell STEP/NODE of JOBX waits for a slot (KEY names what for, WHY
//  is taken): it keeps its status (pending, or retry_wait for a retry),
//  reads WHY, and gets one EVENT waiting unless QUIET (a broadcast's
//  waiting nodes share one).
static void
s_wait_add (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
            uint32_t attempt, const char *key, char *why, bool quiet)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, node);
    s_class_t *class_ = NULL;
    for (size_t index = 0; index < self->class_count && !class_; index++)
        if (strcmp (self->classes [index]->key, key) == 0)
            class_ = self->classes [index];
    if (!class_) {
        if (self->class_count == self->class_cap)
            self->classes = (s_class_t **) s_grow (
                self->classes, &self->class_cap, sizeof (s_class_t *));
        class_ = (s_class_t *) s_alloc (sizeof (s_class_t));
        class_->key = s_strdup (key);
        self->classes [self->class_count++] = class_;
    }
    s_wait_t entry;
    memset (&entry, 0, sizeof (entry));
    entry.jobx = jobx;
    entry.seq = self->wait_seq++;
    entry.priority = job->spec->priority;
    entry.step = (uint32_t) step;
    entry.node = (uint32_t) node;
    entry.attempt = attempt;
    jobx->due_refs++;
    s_wait_push (class_, &entry);
    cell->waiting = why;
    self->waiting_count++;
    s_save_cell (self, job, step, node);
    if (!quiet)
        s_event (self, job, "waiting", node, step, s_strdup (why));
}

//  Does ENTRY still stand for a waiting cell?
static bool
s_wait_valid (const s_wait_t *entry)
{
    s_jobx_t *jobx = entry->jobx;
    if (!jobx->job || !jobx->running || jobx->finished || jobx->ending)
        return false;
    const sched_cell_t *cell = s_cell (jobx->job, entry->step, entry->node);
    return cell->waiting
           && (cell->status == SCHED_CELL_PENDING
               || cell->status == SCHED_CELL_RETRY_WAIT);
}

//  Lets go of a popped entry's job reference.
static void
s_wait_release (s_wait_t *entry)
{
    entry->jobx->due_refs--;
    s_jobx_release (entry->jobx);
}

//  Orders classes by their heads (for qsort).
static int
s_class_compare (const void *a, const void *b)
{
    const s_class_t *ca = *(s_class_t *const *) a;
    const s_class_t *cb = *(s_class_t *const *) b;
    if (ca->size == 0 || cb->size == 0)
        return ca->size == 0 ? (cb->size == 0 ? 0 : 1) : -1;
    if (s_wait_before (&ca->heap [0], &cb->heap [0]))
        return -1;
    return s_wait_before (&cb->heap [0], &ca->heap [0]) ? 1 : 0;
}

//  R17: when capacity may have appeared, waiting cells go in priority,
//  then submission order, class by class; a class stops at the first
//  head that still cannot go. Costs O(classes) when nothing can go.
static void
s_wait_pass (sched_t *self)
{
    if (!self->wait_dirty || self->in_wait_pass || self->class_count == 0)
        return;
    self->in_wait_pass = true;
    self->wait_dirty = false;
    qsort (self->classes, self->class_count, sizeof (s_class_t *),
           s_class_compare);
    for (size_t index = 0; index < self->class_count; index++) {
        s_class_t *class_ = self->classes [index];
        while (class_->size > 0) {
            s_wait_t *head = &class_->heap [0];
            s_wait_t entry;
            if (!s_wait_valid (head)) {
                s_wait_pop (class_, &entry);
                s_wait_release (&entry);
                continue;
            }
            char *why = NULL, *key = NULL;
            if (!s_gate (self, head->jobx, head->step, head->node, &why,
                         &key)) {
                free (why);
                free (key);
                break;
            }
            s_wait_pop (class_, &entry);
            sched_cell_t *cell = s_cell (entry.jobx->job, entry.step,
                                         entry.node);
            s_waiting_clear (self, cell);
            s_send_node (self, entry.jobx, entry.step, entry.node,
                         entry.attempt);
            s_wait_release (&entry);
        }
    }
    //  Empty classes go
    size_t kept = 0;
    for (size_t index = 0; index < self->class_count; index++) {
        s_class_t *class_ = self->classes [index];
        if (class_->size == 0) {
            free (class_->key);
            free (class_->heap);
            free (class_);
        }
        else
            self->classes [kept++] = class_;
    }
    self->class_count = kept;
    self->in_wait_pass = false;
}

//  DISPATCH of STEP/ATTEMPT to one node, or a wait when no node is free
//  to take an any-node step (R17) or a limit is full (R21).
static void
s_dispatch_node (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                 uint32_t attempt)
{
    sched_cell_t *cell = s_cell (jobx->job, step, node);
    if (cell->waiting)
        return;                 //  Already waiting for its slot
    char *why = NULL, *key = NULL;
    if (s_gated (jobx, step)
        && !s_gate (self, jobx, step, node, &why, &key)) {
        s_wait_add (self, jobx, step, node, attempt, key, why, false);
        free (key);
        return;
    }
    s_send_node (self, jobx, step, node, attempt);
}

//  R4: one DISPATCH of a barrier step to every participant at once. Over
//  a limit (R21), the nodes it leaves no room for wait, with one EVENT
//  waiting for them all, and go as slots free. Outside DAG jobs only the
//  first node's dispatched cell is saved: it marks the step as sent, and
//  a restore reads the step's cells that have no record as dispatched
//  (R16), so a broadcast costs one cell write instead of one per node.
static void
s_dispatch_barrier (sched_t *self, s_jobx_t *jobx, size_t step,
                    const size_t *nodes, size_t count)
{
    sched_job_t *job = jobx->job;
    char **names = (char **) s_keep (self, s_alloc (count * sizeof (char *)));
    int64_t deadline_ms = self->now_ms + self->config.ack_timeout_ms;
    bool limited = s_step_limited (jobx, step);
    size_t sent = 0, waited = 0;
    char *first_why = NULL;
    for (size_t index = 0; index < count; index++) {
        size_t node = nodes [index];
        char *why = NULL, *key = NULL;
        if (limited && !s_gate (self, jobx, step, node, &why, &key)) {
            if (!first_why)
                first_why = s_strdup (why);
            s_wait_add (self, jobx, step, node, 1, key, why, true);
            free (key);
            waited++;
            continue;
        }
        sched_cell_t *cell = s_cell (job, step, node);
        cell->attempt = 1;
        cell->resends = 0;
        cell->started_ms = 0;
        cell->deadline_ms = deadline_ms;
        jobx->node_flags [node] |= S_NODE_TOOK_PART;
        s_cell_change (self, jobx, step, node, SCHED_CELL_DISPATCHED,
                       sent == 0 || jobx->graph);
        s_due_push (self, jobx, S_DUE_ACK, deadline_ms, step, node);
        names [sent++] = job->expected [node];
    }
    if (sent > 0) {
        const target_t *target = &job->spec->target;
        char *topic = NULL;
        if (!target->any && target->scope != TARGET_NODE)
            topic = (char *) target_topic (target);
        sched_action_t *action = s_action (self, SCHED_ACTION_DISPATCH, job);
        action->step = (uint32_t) step;
        action->attempt = 1;
        action->topic = topic ? (char *) s_keep (self, topic) : NULL;
        action->nodes = names;
        action->node_count = sent;
        s_event (self, job, "dispatched", SIZE_MAX, step,
                 s_printf ("to %zu node%s", sent, sent == 1 ? "" : "s"));
    }
    if (waited > 0)
        s_event (self, job, "waiting", SIZE_MAX, step,
                 s_printf ("%zu node%s: %s", waited, waited == 1 ? "" : "s",
                           first_why));
    free (first_why);
}

//  R9, R16: the same attempt again, straight to the node.
static void
s_resend (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
          char *detail)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, node);
    cell->deadline_ms = self->now_ms + self->config.ack_timeout_ms;
    s_due_push (self, jobx, S_DUE_ACK, cell->deadline_ms, step, node);
    sched_action_t *action = s_action (self, SCHED_ACTION_RESEND, job);
    action->step = (uint32_t) step;
    action->attempt = cell->attempt;
    action->node = job->expected [node];
    s_event (self, job, "dispatched", node, step, detail);
}

//  CANCEL to a single node.
static void
s_cancel_node (sched_t *self, sched_job_t *job, size_t node)
{
    sched_action_t *action = s_action (self, SCHED_ACTION_CANCEL, job);
    action->nodes = &job->expected [node];
    action->node_count = 1;
}

//  ---------------------------------------------------------------------
//  The walker

//  R5, R6, R7: moves NODE along the current pipeline from sub-step FROM:
//  dispatches the first sub-step that should run, skipping those that
//  should not. A node that failed in this pipeline, or every node once
//  fail-fast fired inside it, runs only on_failure sub-steps whose
//  condition holds for it (its own rollback).
static void
s_pipe_advance (sched_t *self, s_jobx_t *jobx, size_t node, size_t from)
{
    sched_job_t *job = jobx->job;
    const s_phase_t *phase = &jobx->phases [jobx->phase];
    uint8_t flags = jobx->node_flags [node];
    if (flags & S_NODE_UNREACHABLE)
        return;
    for (size_t sub = from; sub < phase->count; sub++) {
        size_t step = phase->first + sub;
        sched_cell_status_t status = s_cell (job, step, node)->status;
        if (sched_cell_status_final (status))
            continue;
        if (status != SCHED_CELL_PENDING)
            return;             //  Already under way
        bool pipe_failed = (flags & S_NODE_PIPE_FAILED) != 0;
        bool node_failed = jobx->failed_before_phase || pipe_failed;
        bool stopped = pipe_failed || jobx->pipe_stop_all;
        job_condition_t condition = jobx->steps [step].leaf->condition;
        bool run = stopped ? condition == JOB_COND_ON_FAILURE && node_failed
                           : s_condition_met (condition, node_failed);
        if (run) {
            s_dispatch_node (self, jobx, step, node, 1);
            return;
        }
        s_cell_set (self, jobx, step, node, SCHED_CELL_SKIPPED);
        s_event (self, job, "skipped", node, step,
                 stopped && s_condition_met (condition, node_failed)
                     ? s_strdup ("pipeline stopped after a failure")
                     : s_printf ("condition %s not met",
                                 job_condition_name (condition)));
    }
}

//  Starts the current phase: decides whether it runs (R6, R7) and on
//  which nodes, then dispatches (R4, R5).
static void
s_phase_start (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    const s_phase_t *phase = &jobx->phases [jobx->phase];
    jobx->phase_started = true;
    jobx->failed_before_phase = jobx->any_failure;
    jobx->pipe_stop_all = false;
    for (size_t node = 0; node < job->expected_count; node++)
        jobx->node_flags [node] &= (uint8_t) ~S_NODE_PIPE_FAILED;

    bool fail_fast = job->spec->strategy == JOB_STRATEGY_FAIL_FAST
                     && jobx->any_failure;
    char *why = NULL;
    if (fail_fast && phase->condition != JOB_COND_ON_FAILURE)
        why = s_strdup ("fail-fast: an earlier step failed");
    else
    if (!s_condition_met (phase->condition, jobx->any_failure))
        why = s_printf ("condition %s not met",
                        job_condition_name (phase->condition));
    if (why) {
        for (size_t sub = 0; sub < phase->count; sub++) {
            size_t step = phase->first + sub, skipped = 0;
            for (size_t node = jobx->batch_lo; node < jobx->batch_hi;
                 node++) {
                sched_cell_t *cell = s_cell (job, step, node);
                if (!sched_cell_status_final (cell->status)) {
                    s_cell_set (self, jobx, step, node, SCHED_CELL_SKIPPED);
                    skipped++;
                }
            }
            if (skipped > 0)
                s_event (self, job, "skipped", SIZE_MAX, step,
                         s_printf ("%zu node%s: %s", skipped,
                                   skipped == 1 ? "" : "s", why));
        }
        free (why);
        return;
    }
    //  Participants: every node still in the job; once fail-fast fired
    //  (a rollback phase), those of them that took part.
    size_t *nodes = (size_t *) s_alloc (
        (job->expected_count ? job->expected_count : 1) * sizeof (size_t));
    size_t count = 0;
    for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++) {
        uint8_t flags = jobx->node_flags [node];
        if (!(flags & S_NODE_DROPPED)
            && (!fail_fast || (flags & S_NODE_TOOK_PART)))
            nodes [count++] = node;
        else
            s_skip_node (self, jobx, node, phase->first,
                         phase->first + phase->count,
                         flags & S_NODE_DROPPED
                             ? "node dropped after a failure"
                             : "node took no part before the failure");
    }
    if (!phase->branch) {
        if (count > 0 && jobx->any)
            s_dispatch_node (self, jobx, phase->first, nodes [0], 1);
        else
        if (count > 0)
            s_dispatch_barrier (self, jobx, phase->first, nodes, count);
    }
    else
        for (size_t index = 0; index < count; index++)
            s_pipe_advance (self, jobx, nodes [index], 0);
    free (nodes);
}

//  ---------------------------------------------------------------------
//  DAG jobs (R23, R24, R25)

static void s_job_complete (sched_t *self, s_jobx_t *jobx);
static bool s_batch_next (sched_t *self, s_jobx_t *jobx);

//  "build" for a named task, else "step 3 (apt install)". Kept until the
//  actions are drained.
static const char *
s_step_label (sched_t *self, s_jobx_t *jobx, size_t step)
{
    const job_phase_t *leaf = jobx->steps [step].leaf;
    if (leaf->name)
        return leaf->name;
    return (const char *) s_keep (self, s_printf ("step %zu (%s %s)", step,
                                                  leaf->backend,
                                                  leaf->action));
}

//  A need that failed: a failure, or a skip caused by one (or by a stop).
static bool
s_dag_bad (const s_jobx_t *jobx, size_t step, size_t node)
{
    const sched_job_t *job = jobx->job;
    size_t at = step * job->expected_count + node;
    sched_cell_status_t status = job->cells [at].status;
    return s_is_failure (status)
           || (status == SCHED_CELL_SKIPPED && jobx->blocked [at]);
}

//  The needs of STEP on NODE: are they all final, did one fail (*BAD, the
//  first in *BAD_STEP), was one skipped for a fine reason (*SKIPPED)?
static bool
s_dag_needs (const s_jobx_t *jobx, size_t step, size_t node, bool *bad,
             size_t *bad_step, bool *skipped, size_t *skipped_step)
{
    const job_step_needs_t *needs = &jobx->graph->steps [step];
    const sched_job_t *job = jobx->job;
    *bad = *skipped = false;
    for (size_t k = 0; k < needs->need_count; k++) {
        size_t need = needs->needs [k];
        sched_cell_status_t status = job->cells [need * job->expected_count
                                                 + node].status;
        if (!sched_cell_status_final (status))
            return false;
        if (s_dag_bad (jobx, need, node)) {
            if (!*bad)
                *bad_step = need;
            *bad = true;
        }
        else
        if (status == SCHED_CELL_SKIPPED) {
            if (!*skipped)
                *skipped_step = need;
            *skipped = true;
        }
    }
    return true;
}

typedef enum {
    S_DAG_RUN = 0,
    S_DAG_SKIP,                  //  Its condition does not hold: a fine skip
    S_DAG_BLOCK                  //  A failure upstream, or a stop: not fine
} s_dag_verdict_t;

//  R24: whether STEP runs on NODE once its needs are final. ANY_BAD is
//  "a need failed on some node" for a barrier (else the node's own);
//  STOPPED is fail-fast after a failure in this batch. *WHY gets a reason
//  (kept until drained) for a skip.
static s_dag_verdict_t
s_dag_decide (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
              bool any_bad, bool stopped, const char **why)
{
    job_condition_t condition = jobx->steps [step].leaf->condition;
    bool bad, skipped;
    size_t bad_step = 0, skipped_step = 0;
    s_dag_needs (jobx, step, node, &bad, &bad_step, &skipped,
                 &skipped_step);
    if (!jobx->graph->steps [step].barrier)
        any_bad = bad;
    if (stopped && condition != JOB_COND_ON_FAILURE) {
        *why = "fail-fast: an earlier step failed";
        return S_DAG_BLOCK;
    }
    if (bad) {
        if (condition == JOB_COND_ON_FAILURE)
            return S_DAG_RUN;
        *why = s_keep (self, s_printf ("needs %s, which failed",
                                       s_step_label (self, jobx, bad_step)));
        return S_DAG_BLOCK;
    }
    if (skipped && condition != JOB_COND_ALWAYS) {
        *why = s_keep (self, s_printf ("needs %s, which was skipped",
                                       s_step_label (self, jobx,
                                                     skipped_step)));
        return S_DAG_SKIP;
    }
    if (!s_condition_met (condition, any_bad)) {
        *why = s_keep (self, s_printf ("condition %s not met",
                                       job_condition_name (condition)));
        return S_DAG_SKIP;
    }
    return S_DAG_RUN;
}

//  Skips one cell of a DAG job for WHY (borrowed); BLOCK marks it as
//  caused by a failure or a stop.
static void
s_dag_skip (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
            bool block, const char *why)
{
    sched_job_t *job = jobx->job;
    s_cell_set (self, jobx, step, node, SCHED_CELL_SKIPPED);
    jobx->blocked [step * job->expected_count + node] = block ? 1 : 0;
    s_event (self, job, "skipped", node, step, s_strdup (why));
}

static bool
s_dag_stopped (const s_jobx_t *jobx)
{
    return jobx->job->spec->strategy == JOB_STRATEGY_FAIL_FAST
           && jobx->any_failure;
}

//  R23: on NODE, starts every pending task whose needs are final there
//  (side by side: the agent queues what exceeds its concurrency), and
//  skips those whose condition does not hold. One pass in graph order
//  settles chains of skips. Barriers wait for s_dag_barriers.
static void
s_dag_pump_node (sched_t *self, s_jobx_t *jobx, size_t node)
{
    sched_job_t *job = jobx->job;
    if ((jobx->node_flags [node] & S_NODE_UNREACHABLE) || jobx->finished
        || jobx->ending || node < jobx->batch_lo || node >= jobx->batch_hi)
        return;
    for (size_t at = 0; at < job->step_count; at++) {
        size_t step = jobx->graph->order [at];
        const sched_cell_t *cell = s_cell (job, step, node);
        //  A waiting cell (R17, R21) was decided already: it runs
        if (jobx->graph->steps [step].barrier
            || cell->status != SCHED_CELL_PENDING || cell->waiting)
            continue;
        bool bad, skipped;
        size_t bad_step, skipped_step;
        if (!s_dag_needs (jobx, step, node, &bad, &bad_step, &skipped,
                          &skipped_step))
            continue;
        const char *why = NULL;
        s_dag_verdict_t verdict = s_dag_decide (self, jobx, step, node, bad,
                                                s_dag_stopped (jobx), &why);
        if (verdict == S_DAG_RUN)
            s_dispatch_node (self, jobx, step, node, 1);
        else
            s_dag_skip (self, jobx, step, node, verdict == S_DAG_BLOCK, why);
    }
}

//  Did a need of STEP fail on some node of the current batch? A named
//  node that could not run at all fails no condition.
static bool
s_dag_any_bad (const s_jobx_t *jobx, size_t step)
{
    const job_step_needs_t *needs = &jobx->graph->steps [step];
    for (size_t k = 0; k < needs->need_count; k++)
        for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++)
            if (!(jobx->node_flags [node] & S_NODE_ABSENT)
                && s_dag_bad (jobx, needs->needs [k], node))
                return true;
    return false;
}

//  R25: a barrier task starts once its needs are final on every node of
//  the batch: one DISPATCH to the nodes where it runs. Returns true when
//  one started (or was skipped everywhere).
static bool
s_dag_barriers (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    bool fired = false;
    for (size_t step = 0; step < job->step_count; step++) {
        const job_step_needs_t *needs = &jobx->graph->steps [step];
        if (!needs->barrier || jobx->barrier_done [step] == jobx->batch + 1)
            continue;
        bool due = true;
        for (size_t k = 0; k < needs->need_count && due; k++)
            due = jobx->step_final [needs->needs [k]] >= jobx->batch_hi;
        if (!due)
            continue;
        jobx->barrier_done [step] = jobx->batch + 1;
        fired = true;
        bool any_bad = s_dag_any_bad (jobx, step);
        bool stopped = s_dag_stopped (jobx);
        size_t *nodes = (size_t *) s_alloc (
            (jobx->batch_hi - jobx->batch_lo) * sizeof (size_t));
        size_t count = 0;
        for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++) {
            const sched_cell_t *cell = s_cell (job, step, node);
            if (cell->status != SCHED_CELL_PENDING || cell->waiting)
                continue;
            const char *why = NULL;
            s_dag_verdict_t verdict = s_dag_decide (self, jobx, step, node,
                                                    any_bad, stopped, &why);
            if (verdict == S_DAG_RUN)
                nodes [count++] = node;
            else
                s_dag_skip (self, jobx, step, node, verdict == S_DAG_BLOCK,
                            why);
        }
        if (count > 0 && jobx->any)
            s_dispatch_node (self, jobx, step, nodes [0], 1);   //  R17
        else
        if (count > 0)
            s_dispatch_barrier (self, jobx, step, nodes, count);
        free (nodes);
    }
    return fired;
}

//  Walks a DAG job: starts the batch's nodes, fires barriers that are
//  due, and when every cell of the batch is final starts the next batch
//  or finishes the job.
static void
s_dag_walk (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    while (!jobx->finished && !jobx->ending) {
        if (!jobx->phase_started) {
            jobx->phase_started = true;
            for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++)
                s_dag_pump_node (self, jobx, node);
            continue;
        }
        if (s_dag_barriers (self, jobx)) {
            for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++)
                s_dag_pump_node (self, jobx, node);
            continue;
        }
        if (jobx->final_total < job->step_count * jobx->batch_hi)
            return;
        if (!s_batch_next (self, jobx)) {
            s_job_complete (self, jobx);
            return;
        }
    }
}

//  R24, R16: rebuilds which skipped cells of nodes [LO, HI) were caused
//  by a failure or a stop, in graph order, from the cells alone: a skip
//  whose condition would have let the task run was a stop.
static void
s_dag_replay (sched_t *self, s_jobx_t *jobx, size_t lo, size_t hi)
{
    sched_job_t *job = jobx->job;
    size_t save_lo = jobx->batch_lo, save_hi = jobx->batch_hi;
    jobx->batch_lo = lo;
    jobx->batch_hi = hi;
    for (size_t at = 0; at < job->step_count; at++) {
        size_t step = jobx->graph->order [at];
        bool any_bad = jobx->graph->steps [step].barrier
                       && s_dag_any_bad (jobx, step);
        for (size_t node = lo; node < hi; node++) {
            size_t cell = step * job->expected_count + node;
            if (job->cells [cell].status != SCHED_CELL_SKIPPED)
                continue;
            const char *why = NULL;
            jobx->blocked [cell] = 0;
            bool bad, skipped;
            size_t bad_step, skipped_step;
            if (!s_dag_needs (jobx, step, node, &bad, &bad_step, &skipped,
                              &skipped_step)
                || (jobx->node_flags [node] & S_NODE_UNREACHABLE))
                jobx->blocked [cell] = 1;
            else
                jobx->blocked [cell]
                    = s_dag_decide (self, jobx, step, node, any_bad, false,
                                    &why)
                      != S_DAG_SKIP;
        }
    }
    jobx->batch_lo = save_lo;
    jobx->batch_hi = save_hi;
}

//  R26: after a batch, starts the next one unless the failure budget is
//  spent; then the untouched nodes read skipped. Returns true when a new
//  batch started.
static bool
s_batch_next (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    if (jobx->batch + 1 >= jobx->batch_count)
        return false;
    if (jobx->failed_nodes > jobx->budget) {
        jobx->budget_exceeded = true;
        char *why = s_printf ("not started: failure budget %zu exceeded in "
                              "batch %zu", jobx->budget, jobx->batch + 1);
        size_t untouched = 0;
        for (size_t node = jobx->batch_hi; node < job->expected_count;
             node++) {
            for (size_t step = 0; step < job->step_count; step++) {
                s_cell_set (self, jobx, step, node, SCHED_CELL_SKIPPED);
                if (jobx->blocked)
                    jobx->blocked [step * job->expected_count + node] = 1;
            }
            untouched++;
        }
        s_event (self, job, "skipped", SIZE_MAX, job->step,
                 s_printf ("%zu node%s %s", untouched,
                           untouched == 1 ? "" : "s", why));
        free (why);
        return false;
    }
    size_t from = jobx->batch_hi;
    s_batch_set (jobx, jobx->batch + 1);
    //  Cells of the new batch that are final already count from now on
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = from; node < jobx->batch_hi; node++)
            if (sched_cell_status_final (s_cell (job, step, node)->status)) {
                jobx->step_final [step]++;
                jobx->phase_final [jobx->steps [step].phase]++;
                jobx->final_total++;
            }
    jobx->phase = 0;
    jobx->phase_started = false;
    jobx->any_failure = false;
    jobx->failed_before_phase = false;
    jobx->pipe_stop_all = false;
    s_save_job (self, job);
    s_event (self, job, "batch", SIZE_MAX, job->step,
             s_printf ("batch %zu/%zu: %zu node%s, from %s", jobx->batch + 1,
                       jobx->batch_count, jobx->batch_hi - jobx->batch_lo,
                       jobx->batch_hi - jobx->batch_lo == 1 ? "" : "s",
                       job->expected [jobx->batch_lo]));
    return true;
}

static void s_job_complete (sched_t *self, s_jobx_t *jobx);
static bool s_batch_next (sched_t *self, s_jobx_t *jobx);
static void s_dag_walk (sched_t *self, s_jobx_t *jobx);

//  Walks forward while phases complete; starts the next one; after the
//  last phase starts the next batch (R26) or finishes the job (R4, R5).
//  Phase completion is O(1): a phase is done when all its cells are final.
static void
s_walk (sched_t *self, s_jobx_t *jobx)
{
    if (jobx->graph) {
        s_dag_walk (self, jobx);
        return;
    }
    while (!jobx->finished && !jobx->ending) {
        if (jobx->phase_started) {
            if (jobx->phase_final [jobx->phase]
                < s_phase_cells (jobx, jobx->phase))
                return;
            jobx->phase++;
            jobx->phase_started = false;
            jobx->pipe_stop_all = false;
        }
        if (jobx->phase >= jobx->phase_count) {
            if (s_batch_next (self, jobx))
                continue;
            s_job_complete (self, jobx);
            return;
        }
        s_phase_start (self, jobx);
    }
}

//  R7, R12: bookkeeping after a cell of NODE ended in failure.
static void
s_node_failed (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
               bool unreachable)
{
    sched_job_t *job = jobx->job;
    jobx->any_failure = true;
    if (!(jobx->node_flags [node] & S_NODE_FAILED)) {
        jobx->node_flags [node] |= S_NODE_FAILED;
        jobx->failed_nodes++;
    }
    if (jobx->graph) {
        //  R24: in a DAG the failure reaches the tasks that need this one
        //  through their conditions; only an unreachable node stops
        if (unreachable) {
            jobx->node_flags [node] |= S_NODE_DROPPED | S_NODE_UNREACHABLE;
            s_skip_node (self, jobx, node, 0, job->step_count,
                         "node unreachable");
        }
        return;
    }
    bool in_phase = jobx->phase_started
                    && jobx->steps [step].phase == jobx->phase;
    if (in_phase && jobx->steps [step].sub >= 0)
        jobx->node_flags [node] |= S_NODE_PIPE_FAILED;
    if (unreachable) {
        jobx->node_flags [node] |= S_NODE_DROPPED | S_NODE_UNREACHABLE;
        s_skip_node (self, jobx, node, 0, job->step_count,
                     "node unreachable");
    }
    else
    if (job->spec->strategy == JOB_STRATEGY_CONTINUE) {
        jobx->node_flags [node] |= S_NODE_DROPPED;
        size_t next = jobx->phase + 1 < jobx->phase_count
                          ? jobx->phases [jobx->phase + 1].first
                          : job->step_count;
        s_skip_node (self, jobx, node, next, job->step_count,
                     "node dropped after a failure");
    }
    if (job->spec->strategy == JOB_STRATEGY_FAIL_FAST && in_phase
        && jobx->phases [jobx->phase].branch && !jobx->failed_before_phase)
        jobx->pipe_stop_all = true;
}

//  After a cell of NODE at STEP became final: a pipeline node moves on at
//  once (R5), then the walker checks the phase.
static void s_dag_pump_node (sched_t *self, s_jobx_t *jobx, size_t node);

static void
s_cell_settled (sched_t *self, s_jobx_t *jobx, size_t step, size_t node)
{
    if (jobx->graph) {
        s_dag_pump_node (self, jobx, node);
        s_walk (self, jobx);
        return;
    }
    if (jobx->phase_started && jobx->steps [step].phase == jobx->phase
        && jobx->steps [step].sub >= 0)
        s_pipe_advance (self, jobx, node, (size_t) jobx->steps [step].sub + 1);
    s_walk (self, jobx);
}

//  The event name for a cell status.
static const char *
s_outcome_event (sched_cell_status_t status)
{
    switch (status) {
        case SCHED_CELL_SUCCESS:
            return "succeeded";
        case SCHED_CELL_TIMEOUT:
            return "timeout";
        case SCHED_CELL_LOST:
            return "lost";
        case SCHED_CELL_INTERRUPTED:
            return "interrupted";
        case SCHED_CELL_CANCELLED:
            return "cancelled";
        case SCHED_CELL_OFFLINE:
            return "offline";
        default:
            return "failed";
    }
}

//  R11: the attempt just recorded on a cell failed with STATUS: wait and
//  retry while attempts remain, else the cell ends with STATUS. DETAIL is
//  taken.
static void
s_cell_failed (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
               sched_cell_status_t status, bool retryable, char *detail)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, node);
    const job_phase_t *leaf = jobx->steps [step].leaf;
    uint32_t max_retries = leaf->max_retries > 0 ? (uint32_t) leaf->max_retries
                                                 : 0;
    if (retryable && cell->attempt <= max_retries) {
        int64_t backoff_ms = s_backoff_ms (self, cell->attempt);
        cell->deadline_ms = self->now_ms + backoff_ms;
        s_cell_set (self, jobx, step, node, SCHED_CELL_RETRY_WAIT);
        s_due_push (self, jobx, S_DUE_RETRY, cell->deadline_ms, step, node);
        s_event (self, job, s_outcome_event (status), node, step, detail);
        s_event (self, job, "retried", node, step,
                 s_printf ("attempt %" PRIu32 " of %" PRIu32
                           " in %" PRId64 "ms",
                           cell->attempt + 1, max_retries + 1, backoff_ms));
        return;
    }
    s_cell_set (self, jobx, step, node, status);
    s_event (self, job, s_outcome_event (status), node, step, detail);
    s_node_failed (self, jobx, step, node, s_is_unreachable (status));
    s_cell_settled (self, jobx, step, node);
}

//  R18, R19: takes STEP of an any-node job back from its holder (WHY: "lease
//  expired", "node offline", ...). The attempt is recorded against the
//  holder, which is told to stop. Before started the step goes out again
//  as the same attempt; after started, as a new attempt while retries
//  remain or when the action is idempotent; else it ends lost. It goes to
//  another node of the set, or waits for one.
static void
s_reclaim (sched_t *self, s_jobx_t *jobx, size_t step, const char *why)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, 0);
    char *from = (char *) s_keep (self, s_strdup (job->expected [0]));
    bool started = cell->status == SCHED_CELL_RUNNING;
    self->counters.reclaims++;
    jobx->nodes [0]->reclaims++;
    char *error = s_printf ("reclaimed from %s (%s)", from, why);
    s_attempt_add (cell, from, SCHED_CELL_LOST, NULL, error, -1, 0, false);
    char **names = (char **) s_keep (self, s_alloc (sizeof (char *)));
    names [0] = from;
    sched_action_t *cancel = s_action (self, SCHED_ACTION_CANCEL, job);
    cancel->nodes = names;
    cancel->node_count = 1;
    const job_phase_t *leaf = jobx->steps [step].leaf;
    uint32_t max_retries = leaf->max_retries > 0 ? (uint32_t) leaf->max_retries
                                                 : 0;
    bool idempotent = self->idempotent
                      && self->idempotent (self->fleet_arg, leaf->backend,
                                           leaf->action);
    if (started && cell->attempt > max_retries && !idempotent) {
        char *detail = s_printf ("%s after it started; not run again (no "
                                 "retries left, %s.%s is not idempotent)",
                                 error, leaf->backend, leaf->action);
        free (error);
        s_cell_failed (self, jobx, step, 0, SCHED_CELL_LOST, false, detail);
        return;
    }
    uint32_t attempt = started ? cell->attempt + 1 : cell->attempt;
    cell->attempt = attempt;
    s_cell_set (self, jobx, step, 0, SCHED_CELL_PENDING);
    char *wait_why = NULL, *wait_key = NULL;
    if (s_gate (self, jobx, step, 0, &wait_why, &wait_key)) {
        s_event_named (self, job, "reclaimed", from, step,
                       s_printf ("%s \xe2\x86\x92 %s", error,
                                 job->expected [0]));
        s_send_node (self, jobx, step, 0, attempt);
    }
    else {
        s_event_named (self, job, "reclaimed", from, step,
                       s_printf ("%s; %s", error, wait_why));
        s_wait_add (self, jobx, step, 0, attempt, wait_key, wait_why, false);
        free (wait_key);
    }
    free (error);
}

//  ---------------------------------------------------------------------
//  Job start and end

static void
s_running_add (sched_t *self, s_jobx_t *jobx)
{
    jobx->running = true;
    jobx->prev = NULL;
    jobx->next = self->running_head;
    if (self->running_head)
        self->running_head->prev = jobx;
    self->running_head = jobx;
    self->running_count++;
}

static void
s_running_remove (sched_t *self, s_jobx_t *jobx)
{
    if (!jobx->running)
        return;
    if (jobx->prev)
        jobx->prev->next = jobx->next;
    else
        self->running_head = jobx->next;
    if (jobx->next)
        jobx->next->prev = jobx->prev;
    jobx->prev = jobx->next = NULL;
    jobx->running = false;
    self->running_count--;
}

static void s_admit (sched_t *self);

//  Ends the job with STATUS and REASON (taken, may be NULL): SAVE_JOB,
//  EVENT finished, FINISHED (R15). The record stays readable until the
//  next mutating call.
static void
s_job_finish (sched_t *self, s_jobx_t *jobx, sched_job_status_t status,
              char *reason)
{
    sched_job_t *job = jobx->job;
    job->status = status;
    free (job->reason);
    job->reason = reason;
    jobx->finished = true;
    s_running_remove (self, jobx);
    if (jobx->queued)
        s_queue_remove (self, jobx);
    s_hash_remove (self, jobx);
    if (self->graveyard_count == self->graveyard_cap)
        self->graveyard = (sched_job_t **) s_grow (
            self->graveyard, &self->graveyard_cap, sizeof (sched_job_t *));
    self->graveyard [self->graveyard_count++] = job;
    s_save_job (self, job);
    s_event (self, job, "finished", SIZE_MAX, job->step,
             reason ? s_printf ("%s: %s", sched_job_status_name (status),
                                reason)
                    : s_strdup (sched_job_status_name (status)));
    s_action (self, SCHED_ACTION_FINISHED, job);
    s_admit (self);
}

//  R8 for the phase walk: for each node of [LO, HI), the first step at
//  which it went wrong (FIRST_BAD) and the first at which it failed
//  (FIRST_FAILURE); SIZE_MAX when none. A named node that could not run
//  at all fails no condition.
static void
s_verdict_phases (s_jobx_t *jobx, size_t lo, size_t hi, size_t *first_bad,
                  size_t *first_failure)
{
    sched_job_t *job = jobx->job;
    size_t nodes = job->expected_count;
    bool *pipe_failed = (bool *) s_alloc (nodes * sizeof (bool));
    bool failed_before = false;
    for (size_t p = 0; p < jobx->phase_count; p++) {
        const s_phase_t *phase = &jobx->phases [p];
        //  An offline cell is written on the next step a waiting node was
        //  due to run, in a phase not started yet: that failure came
        //  before the phase
        for (size_t step = phase->first;
             step < phase->first + phase->count && !failed_before; step++)
            for (size_t node = lo; node < hi; node++)
                if (s_cell (job, step, node)->status == SCHED_CELL_OFFLINE
                    && !(jobx->node_flags [node] & S_NODE_ABSENT)) {
                    failed_before = true;
                    break;
                }
        bool phase_due = s_condition_met (phase->condition, failed_before);
        bool failed_here = false;
        memset (pipe_failed, 0, nodes * sizeof (bool));
        for (size_t sub = 0; sub < phase->count; sub++) {
            size_t step = phase->first + sub;
            job_condition_t condition = jobx->steps [step].leaf->condition;
            for (size_t node = lo; node < hi; node++) {
                sched_cell_status_t status = s_cell (job, step, node)->status;
                bool absent = (jobx->node_flags [node] & S_NODE_ABSENT) != 0;
                bool fine;
                if (status == SCHED_CELL_SUCCESS)
                    fine = true;
                else
                if (status == SCHED_CELL_SKIPPED)
                    fine = !phase_due
                           || (phase->branch
                               && !s_condition_met (condition,
                                                    failed_before
                                                        || pipe_failed [node]));
                else {
                    fine = false;
                    if (s_is_failure (status) && !absent) {
                        failed_here = true;
                        pipe_failed [node] = true;
                        if (first_failure [node] == SIZE_MAX)
                            first_failure [node] = step;
                    }
                }
                if (!fine && first_bad [node] == SIZE_MAX)
                    first_bad [node] = step;
            }
        }
        failed_before = failed_before || failed_here;
    }
    free (pipe_failed);
}

//  R24 for a DAG: a node went wrong at its lowest failed cell, or skipped
//  cell that a failure or a stop caused; it failed at its lowest failed
//  cell. A named node that could not run at all went wrong at step 0.
static void
s_verdict_dag (s_jobx_t *jobx, size_t lo, size_t hi, size_t *first_bad,
               size_t *first_failure)
{
    sched_job_t *job = jobx->job;
    for (size_t node = lo; node < hi; node++)
        if (jobx->node_flags [node] & S_NODE_ABSENT)
            first_bad [node] = 0;
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = lo; node < hi; node++) {
            if (jobx->node_flags [node] & S_NODE_ABSENT)
                continue;
            if (first_bad [node] == SIZE_MAX && s_dag_bad (jobx, step, node))
                first_bad [node] = step;
            if (first_failure [node] == SIZE_MAX
                && s_is_failure (s_cell (job, step, node)->status))
                first_failure [node] = step;
        }
}

//  R8: the verdict once every phase is done. A node "finished
//  everything" when each of its cells is success, or skipped because its
//  condition did not hold at that point. The pass replays the failure
//  state phase by phase (batch by batch, R26), so it needs no per-cell
//  skip reason and gives the same answer after a restore. Nodes of
//  batches that never started are counted apart.
static void
s_job_complete (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    size_t nodes = job->expected_count;
    size_t ran = jobx->batch_hi;
    size_t *first_bad = (size_t *) s_alloc (nodes * sizeof (size_t));
    size_t *first_failure = (size_t *) s_alloc (nodes * sizeof (size_t));
    for (size_t node = 0; node < nodes; node++)
        first_bad [node] = first_failure [node] = SIZE_MAX;
    for (size_t batch = 0; batch <= jobx->batch; batch++) {
        size_t lo = batch ? sched_job_batch_end (job, batch - 1) : 0;
        size_t hi = sched_job_batch_end (job, batch);
        if (jobx->graph)
            s_verdict_dag (jobx, lo, hi, first_bad, first_failure);
        else
            s_verdict_phases (jobx, lo, hi, first_bad, first_failure);
    }
    //  Nodes that failed somewhere, nodes that only missed steps (fail-fast
    //  or a dropped phase), and named nodes that could not run at all
    size_t bad = 0, failed = 0, skipped = 0, absent = 0, lowest = SIZE_MAX;
    bool same_step = true;
    for (size_t node = 0; node < ran; node++) {
        if (first_bad [node] == SIZE_MAX)
            continue;
        bad++;
        if (jobx->node_flags [node] & S_NODE_ABSENT)
            absent++;
        else
        if (first_failure [node] == SIZE_MAX)
            skipped++;
        else {
            if (failed++ > 0 && first_failure [node] != lowest)
                same_step = false;
            if (first_failure [node] < lowest)
                lowest = first_failure [node];
        }
    }
    free (first_bad);
    free (first_failure);
    bool over_budget = jobx->failed_nodes > jobx->budget;
    if (bad == 0 && !over_budget) {
        s_job_finish (self, jobx, SCHED_JOB_COMPLETED, NULL);
        return;
    }
    //  "1 of 3 nodes failed at step 0 (systemd restart); 2 skipped";
    //  "1 of 3 nodes not run: db-01 offline since 12:01:07"
    char *reason = s_strdup ("");
    const char *plural = nodes == 1 ? "" : "s";
    if (failed > 0) {
        const job_phase_t *leaf = jobx->steps [lowest].leaf;
        char *text = s_printf ("%zu of %zu node%s failed%s %zu (%s %s)",
                               failed, nodes, plural,
                               same_step ? " at step" : ", first at step",
                               lowest, leaf->backend, leaf->action);
        free (reason);
        reason = text;
    }
    if (skipped > 0) {
        char *text = *reason ? s_printf ("%s; %zu skipped", reason, skipped)
                             : s_printf ("%zu of %zu node%s skipped", skipped,
                                         nodes, plural);
        free (reason);
        reason = text;
    }
    if (absent > 0) {
        char *list = s_not_run_text (job, true);
        char *text = *reason ? s_printf ("%s; %zu not run: %s", reason,
                                         absent, list)
                             : s_printf ("%zu of %zu node%s not run: %s",
                                         absent, nodes, plural, list);
        free (list);
        free (reason);
        reason = text;
    }
    if (over_budget) {
        //  R26: "2 nodes not started: failure budget 1 exceeded in batch 2"
        char *budget = ran < nodes
                           ? s_printf ("%zu node%s not started: failure "
                                       "budget %zu exceeded in batch %zu",
                                       nodes - ran,
                                       nodes - ran == 1 ? "" : "s",
                                       jobx->budget, jobx->batch + 1)
                           : s_printf ("failure budget %zu exceeded",
                                       jobx->budget);
        char *text = *reason ? s_printf ("%s; %s", reason, budget)
                             : s_strdup (budget);
        free (budget);
        free (reason);
        reason = text;
    }
    s_job_finish (self, jobx,
                  bad == nodes || over_budget ? SCHED_JOB_FAILED
                                              : SCHED_JOB_PARTIAL_FAILURE,
                  reason);
}

//  R13, R14: stops a running job: CANCEL to the nodes with work in
//  flight, every non-final cell reads cancelled, the job ends STATUS.
static void
s_job_abort (sched_t *self, s_jobx_t *jobx, sched_job_status_t status,
             const char *reason)
{
    sched_job_t *job = jobx->job;
    jobx->ending = true;
    size_t nodes = job->expected_count;
    bool *busy = (bool *) s_alloc ((nodes ? nodes : 1) * sizeof (bool));
    size_t busy_count = 0;
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = 0; node < nodes; node++) {
            sched_cell_status_t cell_status = s_cell (job, step, node)->status;
            if (!busy [node] && s_in_flight (cell_status)) {
                busy [node] = true;
                busy_count++;
            }
        }
    if (busy_count > 0) {
        char **names
            = (char **) s_keep (self, s_alloc (busy_count * sizeof (char *)));
        size_t count = 0;
        for (size_t node = 0; node < nodes; node++)
            if (busy [node])
                names [count++] = job->expected [node];
        sched_action_t *action = s_action (self, SCHED_ACTION_CANCEL, job);
        action->nodes = names;
        action->node_count = count;
    }
    free (busy);
    size_t cancelled = 0;
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = 0; node < nodes; node++) {
            sched_cell_t *cell = s_cell (job, step, node);
            if (sched_cell_status_final (cell->status))
                continue;
            if (s_in_flight (cell->status)) {
                s_attempt_add (cell, s_attempt_node (jobx, node),
                               SCHED_CELL_CANCELLED, NULL, reason, -1,
                               s_ran_ms (self, cell), false);
                s_event (self, job, "cancelled", node, step, s_strdup (reason));
            }
            s_cell_set (self, jobx, step, node, SCHED_CELL_CANCELLED);
            cancelled++;
        }
    s_event (self, job, "cancelled", SIZE_MAX, job->step,
             s_printf ("%s (%zu cell%s cancelled)", reason, cancelled,
                       cancelled == 1 ? "" : "s"));
    s_job_finish (self, jobx, status, s_strdup (reason));
}

//  R2: asks which nodes of the target cannot run the job, keeps that
//  list on the job (sorted, one entry per node, NULL reasons filled in)
//  and drops those nodes from IDS (sorted). Returns the new count of IDS.
static size_t
s_not_run_apply (sched_t *self, sched_job_t *job, char **ids, size_t count)
{
    s_not_run_clear (job);
    sched_not_run_t *list = NULL;
    size_t listed = self->unavailable
                        ? self->unavailable (self->unavailable_arg, job->spec,
                                             &list)
                        : 0;
    if (!list)
        listed = 0;
    size_t kept = 0;
    for (size_t index = 0; index < listed; index++) {
        sched_not_run_t *entry = &list [index];
        bool valid = entry->node
                     && (entry->status == SCHED_CELL_OFFLINE
                         || entry->status == SCHED_CELL_DRAINED
                         || entry->status == SCHED_CELL_UNSUPPORTED);
        if (!valid) {
            free (entry->node);
            free (entry->reason);
            continue;
        }
        if (!entry->reason)
            entry->reason = s_strdup (sched_cell_status_name (entry->status));
        list [kept++] = *entry;
    }
    listed = kept;
    if (listed > 1)
        qsort (list, listed, sizeof (sched_not_run_t), s_compare_not_run);
    kept = 0;
    for (size_t index = 0; index < listed; index++)
        if (kept > 0 && strcmp (list [kept - 1].node, list [index].node) == 0) {
            free (list [index].node);
            free (list [index].reason);
        }
        else
            list [kept++] = list [index];
    if (kept == 0) {
        free (list);
        return count;
    }
    job->not_run = list;
    job->not_run_count = kept;
    //  A node that cannot run the job is not run, whatever the resolver
    //  thought of it
    size_t left = 0;
    for (size_t index = 0; index < count; index++)
        if (s_not_run_find (job, ids [index]))
            free (ids [index]);
        else
            ids [left++] = ids [index];
    return left;
}

//  R2: resolves the target and starts the job.
static void
s_job_start (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    const target_t *target = &job->spec->target;
    char **ids = NULL;
    size_t count = self->resolve ? self->resolve (self->resolve_arg, target,
                                                  &ids)
                                 : 0;
    //  Sorted, without NULLs or duplicates (R15: bsearch needs it)
    size_t kept = 0;
    for (size_t index = 0; index < count; index++)
        if (ids [index])
            ids [kept++] = ids [index];
    count = kept;
    //  Resolvers usually give them sorted: check in one pass first
    bool sorted = true;
    for (size_t index = 1; index < count && sorted; index++)
        sorted = strcmp (ids [index - 1], ids [index]) < 0;
    if (!sorted)
        qsort (ids, count, sizeof (char *), s_compare_ids);
    kept = 0;
    for (size_t index = 0; index < count; index++)
        if (kept > 0 && strcmp (ids [kept - 1], ids [index]) == 0)
            free (ids [index]);
        else
            ids [kept++] = ids [index];
    count = kept;
    count = s_not_run_apply (self, job, ids, count);
    if (target->any)
        //  One node takes the work: the others are not owed a row
        s_not_run_clear (job);
    bool fresh_pick = false;
    if (count > 0 && target->any) {
        //  R17: one column, first held by the least loaded node with a
        //  free slot; with none free, by the least loaded (the step waits)
        ssize_t pick = s_pick (self, ids, count, NULL, 0, true, NULL, NULL);
        fresh_pick = pick >= 0;
        if (pick < 0)
            pick = s_pick (self, ids, count, NULL, 0, false, NULL, NULL);
        if (pick < 0)
            pick = 0;
        char *chosen = ids [pick];
        for (size_t index = 0; index < count; index++)
            if (index != (size_t) pick)
                free (ids [index]);
        ids [0] = chosen;
        count = 1;
    }
    //  Named nodes that cannot run it get a row each, so that every node
    //  the job names is answered for
    size_t named = s_not_run_count (job, true);
    if (named > 0) {
        ids = (char **) realloc (ids, (count + named) * sizeof (char *));
        if (!ids) {
            fprintf (stderr, "sched: out of memory (expected)\n");
            abort ();
        }
        for (size_t index = 0; index < job->not_run_count; index++)
            if (job->not_run [index].named)
                ids [count++] = s_strdup (job->not_run [index].node);
        qsort (ids, count, sizeof (char *), s_compare_ids);
    }
    s_running_add (self, jobx);
    job->status = SCHED_JOB_RUNNING;
    job->step = 0;
    if (count == 0) {
        free (ids);
        char *text = target_format (target);
        char *reason;
        if (job->not_run_count > 0) {
            char *list = s_not_run_text (job, false);
            reason = s_printf ("no node of %s can run it: %s",
                               text ? text : "the target", list);
            free (list);
        }
        else
            reason = s_printf ("no online node matches %s",
                               text ? text : "the target");
        free (text);
        s_job_finish (self, jobx, SCHED_JOB_FAILED, reason);
        return;
    }
    s_cells_free (job);
    s_expected_free (job);
    job->expected = ids;
    job->expected_count = count;
    job->cells = (sched_cell_t *) s_alloc (job->step_count * count
                                           * sizeof (sched_cell_t));
    jobx->node_flags = (uint8_t *) s_alloc (count);
    s_nodes_bind (self, jobx);
    s_limits_bind (self, jobx);
    jobx->any = target->any;
    jobx->fresh_pick = fresh_pick;
    if (jobx->graph)
        jobx->blocked = (uint8_t *) s_alloc (job->step_count * count);
    jobx->batch_count = sched_job_batch_count (job);
    jobx->budget = sched_job_budget (job);
    s_batch_set (jobx, 0);
    if (job->spec->timeout_ms > 0) {
        jobx->job_deadline_ms = self->now_ms + job->spec->timeout_ms;
        s_due_push (self, jobx, S_DUE_JOB, jobx->job_deadline_ms, 0, 0);
    }
    s_save_job (self, job);
    size_t members = s_not_run_count (job, false);
    char *list = members ? s_not_run_text (job, false) : NULL;
    char *batches = jobx->batch_count > 1
                        ? s_printf (" in %zu batches, the first of %zu",
                                    jobx->batch_count, jobx->batch_hi)
                        : s_strdup ("");
    s_event (self, job, "started", SIZE_MAX, 0,
             members ? s_printf ("on %zu node%s%s; %zu not run: %s",
                                 count - named, count - named == 1 ? "" : "s",
                                 batches, members, list)
                     : s_printf ("on %zu node%s%s", count - named,
                                 count - named == 1 ? "" : "s", batches));
    free (list);
    free (batches);
    //  A named node that cannot run the job reads its status, with its
    //  reason, in every step; it takes no part and fails no condition. It
    //  counts in the failure budget (R26) once its batch starts.
    for (size_t index = 0; index < job->not_run_count; index++) {
        const sched_not_run_t *entry = &job->not_run [index];
        if (!entry->named)
            continue;
        size_t node = (size_t) sched_job_node_index (job, entry->node);
        jobx->node_flags [node]
            |= S_NODE_ABSENT | S_NODE_DROPPED | S_NODE_UNREACHABLE;
        for (size_t step = 0; step < job->step_count; step++) {
            s_cell (job, step, node)->reason = s_strdup (entry->reason);
            s_cell_set (self, jobx, step, node, entry->status);
        }
        s_event (self, job, sched_cell_status_name (entry->status), node, 0,
                 s_strdup (entry->reason));
    }
    s_batch_count_absent (jobx, 0);
    s_walk (self, jobx);
}

//  R1: starts queued jobs while there is room.
static void
s_admit (sched_t *self)
{
    if (self->admitting || self->paused)
        return;
    self->admitting = true;
    while (self->queue_size > 0
           && self->running_count < self->config.max_concurrent) {
        s_jobx_t *jobx = self->queue [0];
        s_queue_remove (self, jobx);
        s_job_start (self, jobx);
    }
    self->admitting = false;
}

//  ---------------------------------------------------------------------
//  Scheduler

sched_t *
sched_new (const sched_config_t *config, sched_resolve_fn *resolve,
           void *arg)
{
    sched_t *self = (sched_t *) s_alloc (sizeof (sched_t));
    if (config)
        self->config = *config;
    else
        sched_config_defaults (&self->config);
    //  A zero ack timeout would re-send in a tight loop; at least 1 ms
    if (self->config.ack_timeout_ms < 1)
        self->config.ack_timeout_ms = 1;
    if (self->config.max_concurrent < 1)
        self->config.max_concurrent = 1;
    if (self->config.retry_base_ms < 0)
        self->config.retry_base_ms = 0;
    if (self->config.retry_cap_ms < 0)
        self->config.retry_cap_ms = 0;
    if (self->config.grace_ms < 0)
        self->config.grace_ms = 0;
    if (self->config.lease_ms < 1)
        self->config.lease_ms = 1;
    self->resolve = resolve;
    self->resolve_arg = arg;
    //  xorshift needs a non-zero state
    self->rng = self->config.seed ? self->config.seed
                                  : UINT64_C (0x9E3779B97F4A7C15);
    return self;
}

void
sched_set_unavailable (sched_t *self, sched_unavailable_fn *unavailable,
                       void *arg)
{
    self->unavailable = unavailable;
    self->unavailable_arg = arg;
}

//  Frees what drained actions point into, once all have been drained.
static void
s_collect (sched_t *self)
{
    if (self->action_head < self->action_count)
        return;
    self->action_head = self->action_count = 0;
    for (size_t index = 0; index < self->garbage_count; index++)
        free (self->garbage [index]);
    self->garbage_count = 0;
    for (size_t index = 0; index < self->graveyard_count; index++)
        s_job_discard (self->graveyard [index]);
    self->graveyard_count = 0;
}

void
sched_destroy (sched_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sched_t *self = *self_p;
    self->action_head = self->action_count;
    s_collect (self);
    for (size_t index = 0; index < self->bucket_count; index++) {
        s_jobx_t *jobx = self->buckets [index];
        while (jobx) {
            s_jobx_t *next = jobx->hash_next;
            s_job_discard (jobx->job);
            jobx = next;
        }
    }
    for (size_t index = 0; index < self->class_count; index++) {
        s_class_t *class_ = self->classes [index];
        while (class_->size > 0) {
            s_wait_t entry;
            s_wait_pop (class_, &entry);
            s_wait_release (&entry);
        }
        free (class_->key);
        free (class_->heap);
        free (class_);
    }
    free (self->classes);
    while (self->due_size > 0) {
        s_due_t entry;
        s_due_pop (self, &entry);
    }
    for (size_t index = 0; index < self->node_bucket_count; index++) {
        s_node_t *node = self->node_buckets [index];
        while (node) {
            s_node_t *next = node->hash_next;
            free (node->id);
            free (node->limit_running);
            free (node);
            node = next;
        }
    }
    free (self->node_buckets);
    for (size_t index = 0; index < self->limit_count; index++)
        free (self->limits [index].pattern);
    free (self->buckets);
    free (self->queue);
    free (self->due);
    free (self->actions);
    free (self->garbage);
    free (self->graveyard);
    free (self);
    *self_p = NULL;
}

static void
s_reason (char *reason, size_t reason_len, const char *format, ...)
{
    if (!reason || reason_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (reason, reason_len, format, args);
    va_end (args);
}

int
sched_submit (sched_t *self, sched_job_t **job_p, int64_t now_ms,
              char *reason, size_t reason_len)
{
    s_collect (self);
    self->now_ms = now_ms;
    sched_job_t *job = job_p ? *job_p : NULL;
    if (!job || job->priv || !job->spec) {
        s_reason (reason, reason_len, "not a job record");
        return -1;
    }
    if (s_lookup (self, job->id)) {
        s_reason (reason, reason_len, "job %s already exists", job->id);
        return -1;
    }
    //  R1: the queue may hold max_pending after the free slots are taken
    size_t free_slots = self->running_count < self->config.max_concurrent
                            ? self->config.max_concurrent - self->running_count
                            : 0;
    if (self->queue_size + 1 > self->config.max_pending + free_slots) {
        self->counters.queue_full++;
        s_reason (reason, reason_len,
                  "queue full: %zu jobs pending (max_pending)",
                  self->queue_size);
        return -1;
    }
    s_jobx_t *jobx = s_jobx_new (job);
    if (!jobx) {
        s_reason (reason, reason_len, "job %s: the spec does not add up",
                  job->id);
        return -1;
    }
    if (jobx->lease_ms <= 0)
        jobx->lease_ms = self->config.lease_ms;
    *job_p = NULL;
    job->priv = jobx;
    job->status = SCHED_JOB_PENDING;
    job->submitted_ms = now_ms;
    self->counters.submitted++;
    jobx->seq = self->seq++;
    s_hash_insert (self, jobx);
    s_queue_push (self, jobx);
    s_save_job (self, job);
    char *text = target_format (&job->spec->target);
    s_event (self, job, "submitted", SIZE_MAX, 0,
             text ? s_printf ("target %s, %zu step%s, priority %d", text,
                              job->step_count,
                              job->step_count == 1 ? "" : "s",
                              job->spec->priority)
                  : NULL);
    free (text);
    s_admit (self);
    return 0;
}

//  R16: the job timeout of a resumed job, then the walk.
static void
s_resume_end (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    if (job->spec->timeout_ms > 0) {
        //  The monotonic clock of the previous run is gone: the job's
        //  timeout starts again from the restore.
        jobx->job_deadline_ms = self->now_ms + job->spec->timeout_ms;
        s_due_push (self, jobx, S_DUE_JOB, jobx->job_deadline_ms, 0, 0);
    }
    s_walk (self, jobx);
}

//  R16 for a DAG job: which skips were caused by failures (replayed from
//  the cells), which barriers were handled, then in-flight cells are
//  re-sent, retries dispatched, and every node pumped.
static void
s_dag_resume (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    for (size_t batch = 0; batch <= jobx->batch; batch++)
        s_dag_replay (self, jobx,
                      batch ? sched_job_batch_end (job, batch - 1) : 0,
                      sched_job_batch_end (job, batch));
    bool started = false;
    for (size_t step = 0; step < job->step_count; step++) {
        bool pending = false;
        for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++) {
            sched_cell_t *cell = s_cell (job, step, node);
            if (!sched_cell_status_final (cell->status) && cell->attempt == 0)
                cell->status = SCHED_CELL_PENDING;  //  Never sent
            if (cell->status == SCHED_CELL_PENDING)
                pending = true;
            else
                started = true;
        }
        if (jobx->graph->steps [step].barrier && !pending)
            jobx->barrier_done [step] = jobx->batch + 1;
    }
    jobx->phase_started = started;
    for (size_t node = jobx->batch_lo; node < jobx->batch_hi && started;
         node++) {
        if (jobx->node_flags [node] & S_NODE_UNREACHABLE) {
            s_skip_node (self, jobx, node, 0, job->step_count,
                         "node unreachable");
            continue;
        }
        for (size_t step = 0; step < job->step_count; step++) {
            sched_cell_t *cell = s_cell (job, step, node);
            if (s_in_flight (cell->status)) {
                cell->resends = 0;
                cell->deadline_ms = self->now_ms + self->config.ack_timeout_ms;
                s_cell_set (self, jobx, step, node, SCHED_CELL_DISPATCHED);
                s_resend (self, jobx, step, node,
                          s_strdup ("re-sent after a broker restart"));
            }
            else
            if (cell->status == SCHED_CELL_RETRY_WAIT)
                s_dispatch_node (self, jobx, step, node, cell->attempt + 1);
        }
        s_dag_pump_node (self, jobx, node);
    }
    s_resume_end (self, jobx);
}

//  R16: a broadcast saves the dispatched cell of its first node only
//  (s_dispatch_barrier). When a cell of barrier STEP in the current batch
//  was sent, the step's cells with no record were sent with it: they read
//  dispatched, attempt 1, and are re-sent like any cell in flight.
static void
s_resume_broadcast (s_jobx_t *jobx, size_t step)
{
    sched_job_t *job = jobx->job;
    bool sent = false;
    for (size_t node = jobx->batch_lo; node < jobx->batch_hi && !sent; node++)
        sent = s_cell (job, step, node)->attempt > 0;
    for (size_t node = jobx->batch_lo; node < jobx->batch_hi && sent;
         node++) {
        sched_cell_t *cell = s_cell (job, step, node);
        if (cell->stored || cell->attempt > 0
            || cell->status != SCHED_CELL_PENDING
            || (jobx->node_flags [node] & S_NODE_ABSENT))
            continue;
        cell->attempt = 1;
        cell->status = SCHED_CELL_DISPATCHED;
        jobx->node_flags [node] |= S_NODE_TOOK_PART;
    }
}

//  R16: rebuilds the walker's state of a running job from its cells and
//  picks up where it stopped.
static void
s_resume (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    size_t nodes = job->expected_count;
    //  Named nodes that could not run from the start (R2)
    for (size_t index = 0; index < job->not_run_count; index++) {
        ssize_t node = job->not_run [index].named
                           ? sched_job_node_index (job,
                                                   job->not_run [index].node)
                           : -1;
        if (node >= 0)
            jobx->node_flags [node]
                |= S_NODE_ABSENT | S_NODE_DROPPED | S_NODE_UNREACHABLE;
    }
    //  R26: the current batch is the first with a cell not yet final; one
    //  not touched yet is left to the walker, which checks the budget
    jobx->batch_count = sched_job_batch_count (job);
    jobx->budget = sched_job_budget (job);
    s_batch_set (jobx, sched_job_batch_current (job));
    bool touched = false;
    for (size_t step = 0; step < job->step_count && !touched; step++)
        for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++) {
            const sched_cell_t *cell = s_cell (job, step, node);
            if ((cell->attempt > 0
                 || sched_cell_status_final (cell->status))
                && !(jobx->node_flags [node] & S_NODE_ABSENT)) {
                touched = true;
                break;
            }
        }
    if (!touched && jobx->batch > 0)
        s_batch_set (jobx, jobx->batch - 1);
    if (jobx->graph)
        jobx->blocked = (uint8_t *) s_alloc (job->step_count * nodes);
    bool *failed = (bool *) s_alloc (nodes * sizeof (bool));
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = 0; node < nodes; node++) {
            sched_cell_t *cell = s_cell (job, step, node);
            if (sched_cell_status_final (cell->status)
                && node < jobx->batch_hi) {
                jobx->step_final [step]++;
                jobx->phase_final [jobx->steps [step].phase]++;
                jobx->final_total++;
            }
            if (jobx->node_flags [node] & S_NODE_ABSENT)
                continue;
            if (cell->attempt > 0) {
                jobx->node_flags [node] |= S_NODE_TOOK_PART;
                jobx->claimed = true;
            }
            if (s_is_failure (cell->status)) {
                if (node >= jobx->batch_lo && node < jobx->batch_hi)
                    jobx->any_failure = true;
                failed [node] = true;
                if (s_is_unreachable (cell->status))
                    jobx->node_flags [node]
                        |= S_NODE_DROPPED | S_NODE_UNREACHABLE;
            }
        }
    for (size_t node = 0; node < nodes; node++)
        if (failed [node]) {
            jobx->node_flags [node] |= S_NODE_FAILED;
            jobx->failed_nodes++;
            if (job->spec->strategy == JOB_STRATEGY_CONTINUE && !jobx->graph)
                jobx->node_flags [node] |= S_NODE_DROPPED;
        }
    free (failed);
    s_batch_count_absent (jobx, 0);
    if (jobx->graph) {
        s_dag_resume (self, jobx);
        return;
    }

    //  The current phase is the first with a cell not yet final
    size_t p = 0;
    while (p < jobx->phase_count
           && jobx->phase_final [p] == s_phase_cells (jobx, p))
        p++;
    jobx->phase = p;
    job->step = 0;
    s_step_update (self, jobx);
    if (p < jobx->phase_count) {
        const s_phase_t *phase = &jobx->phases [p];
        bool started = false, failed_here = false;
        for (size_t step = 0; step < phase->first + phase->count; step++)
            for (size_t node = jobx->batch_lo; node < jobx->batch_hi;
                 node++) {
                const sched_cell_t *cell = s_cell (job, step, node);
                bool here = step >= phase->first;
                if (jobx->node_flags [node] & S_NODE_ABSENT)
                    continue;
                //  Offline cells count before their phase (as in R8)
                if (!here || cell->status == SCHED_CELL_OFFLINE) {
                    if (s_is_failure (cell->status))
                        jobx->failed_before_phase = true;
                }
                else
                if (s_is_failure (cell->status)) {
                    failed_here = true;
                    if (phase->branch)
                        jobx->node_flags [node] |= S_NODE_PIPE_FAILED;
                }
                if (here
                    && (cell->attempt > 0
                        || (cell->status == SCHED_CELL_SKIPPED
                            && !(jobx->node_flags [node] & S_NODE_DROPPED))))
                    started = true;
            }
        if (started && !phase->branch && !jobx->any)
            s_resume_broadcast (jobx, phase->first);
        if (started) {
            jobx->phase_started = true;
            jobx->pipe_stop_all = phase->branch && failed_here
                                  && job->spec->strategy
                                         == JOB_STRATEGY_FAIL_FAST
                                  && !jobx->failed_before_phase;
            for (size_t node = jobx->batch_lo; node < jobx->batch_hi;
                 node++) {
                if (jobx->node_flags [node] & S_NODE_UNREACHABLE) {
                    s_skip_node (self, jobx, node, 0, job->step_count,
                                 "node unreachable");
                    continue;
                }
                for (size_t sub = 0; sub < phase->count; sub++) {
                    size_t step = phase->first + sub;
                    sched_cell_t *cell = s_cell (job, step, node);
                    if (sched_cell_status_final (cell->status))
                        continue;
                    if (cell->attempt == 0)
                        cell->status = SCHED_CELL_PENDING;  //  Never sent
                    if (s_in_flight (cell->status)) {
                        //  Same attempt again: the agent dedupes it and
                        //  re-sends a result it already has
                        cell->resends = 0;
                        cell->deadline_ms
                            = self->now_ms + self->config.ack_timeout_ms;
                        s_cell_set (self, jobx, step, node,
                                    SCHED_CELL_DISPATCHED);
                        s_resend (self, jobx, step, node,
                                  s_strdup ("re-sent after a broker restart"));
                        if (jobx->any) {
                            //  The lease starts again from the restore
                            cell->claims++;
                            cell->renewed_ms = self->now_ms;
                            s_due_push (self, jobx, S_DUE_LEASE,
                                        self->now_ms + jobx->lease_ms, step,
                                        node);
                        }
                    }
                    else
                    if (cell->status == SCHED_CELL_RETRY_WAIT)
                        s_dispatch_node (self, jobx, step, node,
                                         cell->attempt + 1);
                    else
                    if (jobx->any && cell->attempt > 0
                        && !(jobx->node_flags [node] & S_NODE_DROPPED))
                        //  Reclaimed, and waiting for a node
                        s_dispatch_node (self, jobx, step, node,
                                         cell->attempt);
                    else
                    if (phase->branch)
                        s_pipe_advance (self, jobx, node, sub);
                    else
                    if (jobx->node_flags [node] & S_NODE_DROPPED)
                        s_skip_node (self, jobx, node, step,
                                     job->step_count,
                                     "node dropped after a failure");
                    else
                        s_dispatch_node (self, jobx, step, node, 1);
                    break;
                }
            }
        }
    }
    s_resume_end (self, jobx);
}

int
sched_restore (sched_t *self, sched_job_t **job_p, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    sched_job_t *job = job_p ? *job_p : NULL;
    if (!job || job->priv || !job->spec || s_lookup (self, job->id))
        return -1;
    if (job->status != SCHED_JOB_PENDING && job->status != SCHED_JOB_RUNNING)
        return -1;
    if (job->status == SCHED_JOB_RUNNING) {
        if (job->expected_count == 0 || !job->expected || !job->cells)
            return -1;
        for (size_t index = 0; index < job->expected_count; index++)
            if (!job->expected [index]
                || (index > 0
                    && strcmp (job->expected [index - 1], job->expected [index])
                           >= 0))
                return -1;
    }
    s_jobx_t *jobx = s_jobx_new (job);
    if (!jobx)
        return -1;
    if (jobx->lease_ms <= 0)
        jobx->lease_ms = self->config.lease_ms;
    *job_p = NULL;
    job->priv = jobx;
    job->submitted_ms = now_ms;
    jobx->seq = self->seq++;
    s_hash_insert (self, jobx);
    if (job->status == SCHED_JOB_PENDING) {
        //  Restored in store order (time-sortable ids), so ages hold;
        //  admission happens at the next tick
        s_cells_free (job);
        s_expected_free (job);
        s_queue_push (self, jobx);
        return 0;
    }
    jobx->node_flags = (uint8_t *) s_alloc (job->expected_count);
    s_nodes_bind (self, jobx);
    s_limits_bind (self, jobx);
    jobx->any = job->spec->target.any && job->expected_count == 1;
    s_running_add (self, jobx);
    s_resume (self, jobx);
    return 0;
}

//  R22: the stall timeout of STEP: the task's own, else the job's, else 0.
static int64_t
s_stall_ms (const s_jobx_t *jobx, size_t step)
{
    const job_phase_t *leaf = jobx->steps [step].leaf;
    return leaf->stall_timeout_ms > 0 ? leaf->stall_timeout_ms
                                      : jobx->job->spec->stall_timeout_ms;
}

//  The running job, step and node of an agent event, or NULL.
static s_jobx_t *
s_find_in (s_jobx_t *jobx, uint32_t step, const char *node, size_t *node_p)
{
    if (!jobx || !jobx->running || jobx->finished)
        return NULL;
    if (step >= jobx->job->step_count)
        return NULL;
    ssize_t index = sched_job_node_index (jobx->job, node);
    if (index < 0)
        return NULL;
    *node_p = (size_t) index;
    return jobx;
}

static s_jobx_t *
s_find (sched_t *self, const char *job_id, uint32_t step, const char *node,
        size_t *node_p)
{
    return s_find_in (s_lookup (self, job_id), step, node, node_p);
}

//  Agent events for an attempt that is not the cell's current one, or a
//  cell never sent, are stale (-1); for the current attempt of a cell
//  that is past the state the event would bring, duplicates (1).
int
sched_on_ack (sched_t *self, const char *job_id, uint32_t step,
              uint32_t attempt, const char *node, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    size_t index;
    s_jobx_t *jobx = s_find (self, job_id, step, node, &index);
    if (!jobx)
        return -1;
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, index);
    if (attempt == 0 || attempt != cell->attempt)
        return -1;
    if (cell->status != SCHED_CELL_DISPATCHED)
        return 1;
    const job_phase_t *leaf = jobx->steps [step].leaf;
    int64_t timeout_ms = leaf->timeout_ms > 0 ? leaf->timeout_ms
                                              : self->config.default_timeout_ms;
    cell->deadline_ms = now_ms + timeout_ms + self->config.grace_ms;
    cell->renewed_ms = now_ms;
    s_cell_set (self, jobx, step, index, SCHED_CELL_ACKNOWLEDGED);
    s_due_push (self, jobx, S_DUE_RUN, cell->deadline_ms, step, index);
    s_event (self, job, "acknowledged", index, step, NULL);
    return 0;
}

int
sched_on_started (sched_t *self, const char *job_id, uint32_t step,
                  uint32_t attempt, const char *node, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    size_t index;
    s_jobx_t *jobx = s_find (self, job_id, step, node, &index);
    if (!jobx)
        return -1;
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, step, index);
    if (attempt == 0 || attempt != cell->attempt)
        return -1;
    if (cell->status != SCHED_CELL_DISPATCHED
        && cell->status != SCHED_CELL_ACKNOWLEDGED)
        return 1;
    //  R10: the run clock restarts when the task really starts
    const job_phase_t *leaf = jobx->steps [step].leaf;
    int64_t timeout_ms = leaf->timeout_ms > 0 ? leaf->timeout_ms
                                              : self->config.default_timeout_ms;
    int64_t deadline_ms = now_ms + timeout_ms + self->config.grace_ms;
    bool moved = deadline_ms != cell->deadline_ms
                 || cell->status == SCHED_CELL_DISPATCHED;
    cell->deadline_ms = deadline_ms;
    cell->started_ms = now_ms;
    cell->renewed_ms = now_ms;
    s_cell_set (self, jobx, step, index, SCHED_CELL_RUNNING);
    if (moved)
        s_due_push (self, jobx, S_DUE_RUN, cell->deadline_ms, step, index);
    s_event (self, job, "running", index, step, NULL);
    //  Stall clock (R22): from now, renewed by progress
    int64_t stall_ms = s_stall_ms (jobx, step);
    if (stall_ms > 0) {
        cell->resends = 0;
        s_due_push (self, jobx, S_DUE_STALL, now_ms + stall_ms, step, index);
    }
    return 0;
}

int
sched_on_progress (sched_t *self, const proto_msg_t *progress, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    if (!progress || progress->type != PROTO_PROGRESS)
        return -1;
    size_t index;
    s_jobx_t *jobx = s_find (self, progress->job, progress->step,
                             progress->node, &index);
    if (!jobx)
        return -1;
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, progress->step, index);
    if (progress->attempt == 0 || progress->attempt != cell->attempt
        || !s_in_flight (cell->status))
        return -1;
    //  An agent reports at most every 100 ms (its least progress_interval):
    //  a kind that changes sooner is kept but not logged, so that a flood
    //  cannot grow the job's event log without bound
    bool spaced = cell->progress_ms == 0
                  || now_ms - cell->progress_ms >= S_PROGRESS_EVENT_MS;
    cell->renewed_ms = now_ms;
    cell->progress_ms = now_ms;
    cell->percent = progress->percent >= 0 && progress->percent <= 100
                        ? progress->percent
                        : -1;
    bool new_kind = (progress->kind != NULL) != (cell->progress_kind != NULL)
                    || (progress->kind && cell->progress_kind
                        && strcmp (progress->kind, cell->progress_kind) != 0);
    free (cell->progress_kind);
    free (cell->progress);
    cell->progress_kind = s_strdup (progress->kind);
    cell->progress = s_strdup (progress->message);
    if (new_kind && progress->kind && spaced)
        s_event (self, job, "progress", index, progress->step,
                 s_excerpt (progress->kind, progress->message));
    return 0;
}

//  The cell status a result names; -1 for an unknown word.
static int
s_result_status (const char *text, sched_cell_status_t *status,
                 bool *retryable)
{
    *retryable = true;
    if (strcmp (text, "success") == 0)
        *status = SCHED_CELL_SUCCESS;
    else
    if (strcmp (text, "failed") == 0)
        *status = SCHED_CELL_FAILED;
    else
    if (strcmp (text, "timeout") == 0)
        *status = SCHED_CELL_TIMEOUT;
    else
    if (strcmp (text, "interrupted") == 0)
        *status = SCHED_CELL_INTERRUPTED;
    else
    if (strcmp (text, "refused") == 0) {
        *status = SCHED_CELL_FAILED;
        *retryable = false;
    }
    else
    if (strcmp (text, "cancelled") == 0) {
        *status = SCHED_CELL_CANCELLED;
        *retryable = false;
    }
    else
        return -1;
    return 0;
}

//  R18: a result from a node its any-node step was taken from. It goes
//  into the cell's history (once), marked late, and changes nothing
//  else: the current holder's outcome stands. Returns 0 when recorded, 1
//  for a repeat, -1 when the node never held that attempt.
int
sched_attempt_late (sched_cell_t *cell, const proto_msg_t *result)
{
    bool held = false;
    for (size_t index = 0; index < cell->attempt_count; index++) {
        const sched_attempt_t *attempt = &cell->attempts [index];
        if (!attempt->node || !result->node
            || attempt->attempt != result->attempt
            || strcmp (attempt->node, result->node) != 0)
            continue;
        if (attempt->late)
            return 1;
        if (attempt->status == SCHED_CELL_LOST)
            held = true;
    }
    sched_cell_status_t status;
    bool retryable;
    if (!held || !result->status
        || s_result_status (result->status, &status, &retryable) != 0)
        return -1;
    int64_t duration_ms = result->duration_ms > (uint64_t) INT64_MAX
                              ? INT64_MAX
                              : (int64_t) result->duration_ms;
    s_attempt_add (cell, result->node, status, result->output, result->error,
                   result->exit_code, duration_ms, result->truncated);
    sched_attempt_t *late = &cell->attempts [cell->attempt_count - 1];
    late->attempt = result->attempt;
    late->late = true;
    return 0;
}

static int
s_late_result (sched_t *self, s_jobx_t *jobx, const proto_msg_t *result)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = s_cell (job, result->step, 0);
    int rc = sched_attempt_late (cell, result);
    if (rc != 0)
        return rc;
    self->counters.late_results++;
    s_save_cell (self, job, result->step, 0);
    char *node = (char *) s_keep (self, s_strdup (result->node));
    s_event_named (self, job, "late", node, result->step,
                   s_printf ("late result of attempt %" PRIu32 " (%s) after "
                             "the step was reclaimed: kept in the history",
                             result->attempt, result->status));
    return 0;
}

int
sched_on_result (sched_t *self, const proto_msg_t *result, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    if (!result || result->type != PROTO_RESULT || !result->status
        || !result->node)
        return -1;
    s_jobx_t *owner = s_lookup (self, result->job);
    if (owner && owner->any && owner->running && !owner->finished
        && result->step < owner->job->step_count) {
        const sched_cell_t *cell = s_cell (owner->job, result->step, 0);
        if (strcmp (owner->job->expected [0], result->node) != 0
            || !s_in_flight (cell->status)
            || result->attempt != cell->attempt) {
            int rc = s_late_result (self, owner, result);
            if (rc >= 0)
                return rc;
        }
    }
    size_t index;
    s_jobx_t *jobx = s_find_in (owner, result->step, result->node, &index);
    if (!jobx)
        return -1;
    sched_job_t *job = jobx->job;
    size_t step = result->step;
    sched_cell_t *cell = s_cell (job, step, index);
    if (result->attempt == 0 || result->attempt != cell->attempt)
        return -1;

    const char *text = result->status;
    sched_cell_status_t status;
    bool retryable = true;
    if (s_result_status (text, &status, &retryable) != 0)
        return -1;
    if (!s_in_flight (cell->status)) {
        //  This attempt already has its outcome. When the broker decided
        //  it (lost, cancelled) the agent's late result still brings what
        //  the step printed and how long it ran
        if (sched_attempt_fill (cell, result))
            s_save_cell (self, job, step, index);
        return 1;
    }

    int64_t duration_ms = result->duration_ms > (uint64_t) INT64_MAX
                              ? INT64_MAX
                              : (int64_t) result->duration_ms;
    //  A restarted agent reports an interrupted step without knowing how
    //  long it ran: record the time since its started, as for a cancel
    //  or a loss (0 when it never started)
    if (status == SCHED_CELL_INTERRUPTED && duration_ms == 0)
        duration_ms = s_ran_ms (self, cell);
    s_attempt_add (cell, s_attempt_node (jobx, index), status,
                   result->output, result->error,
                   result->exit_code, duration_ms, result->truncated);
    sched_attempt_t *added = &cell->attempts [cell->attempt_count - 1];
    added->output_size = result->output_size;
    added->error_size = result->error_size;
    added->output_dropped = result->output_dropped;
    added->error_dropped = result->error_dropped;
    if (result->data_count) {
        sched_attempt_t *attempt = &cell->attempts [cell->attempt_count - 1];
        attempt->data = (proto_kv_t *) s_alloc (result->data_count
                                                * sizeof (proto_kv_t));
        for (size_t item = 0; item < result->data_count; item++) {
            attempt->data [item].key = s_strdup (result->data [item].key);
            attempt->data [item].value = s_strdup (result->data [item].value);
        }
        attempt->data_count = result->data_count;
    }
    if (status == SCHED_CELL_SUCCESS) {
        s_cell_set (self, jobx, step, index, SCHED_CELL_SUCCESS);
        s_event (self, job, "succeeded", index, step, NULL);
        s_cell_settled (self, jobx, step, index);
        s_wait_pass (self);
        return 0;
    }
    char prefix [64];
    if (strcmp (text, "refused") == 0)
        snprintf (prefix, sizeof (prefix), "refused");
    else
    if (result->exit_code >= 0)
        snprintf (prefix, sizeof (prefix), "attempt %" PRIu32 ", exit %" PRId32,
                  cell->attempt, result->exit_code);
    else
        snprintf (prefix, sizeof (prefix), "attempt %" PRIu32, cell->attempt);
    s_cell_failed (self, jobx, step, index, status, retryable,
                   s_excerpt (prefix, result->error));
    s_wait_pass (self);
    return 0;
}

//  R19: NODE is down: its any-node steps in flight are reclaimed at once.
static void
s_node_down (sched_t *self, const char *node)
{
    s_node_t *entry = s_node_find (self, node);
    if (!entry)
        return;                 //  Never given anything
    entry->down = true;
    size_t count = 0;
    s_jobx_t **jobs = (s_jobx_t **) s_alloc (
        (self->running_count ? self->running_count : 1) * sizeof (s_jobx_t *));
    for (s_jobx_t *jobx = self->running_head; jobx; jobx = jobx->next)
        if (jobx->any && jobx->nodes && jobx->nodes [0] == entry)
            jobs [count++] = jobx;
    for (size_t at = 0; at < count; at++) {
        s_jobx_t *jobx = jobs [at];
        for (size_t step = 0; step < jobx->job->step_count; step++) {
            if (jobx->finished || jobx->ending || jobx->nodes [0] != entry)
                break;
            if (s_in_flight (s_cell (jobx->job, step, 0)->status))
                s_reclaim (self, jobx, step, "node offline");
        }
    }
    free (jobs);
    self->wait_dirty = true;
}

int
sched_on_node_down (sched_t *self, const char *node, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    if (!node)
        return -1;
    s_node_down (self, node);
    s_wait_pass (self);
    return 0;
}

int
sched_on_heartbeat (sched_t *self, const char *node, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    if (!node)
        return -1;
    s_node_t *entry = s_node_find (self, node);
    if (entry) {
        //  R18: leases of this node run from here (read lazily when they
        //  fall due)
        entry->heard_ms = now_ms;
        entry->down = false;
    }
    //  Its load may have dropped, or it is back
    self->wait_dirty = true;
    s_wait_pass (self);
    return 0;
}

int
sched_on_node_offline (sched_t *self, const char *node, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    if (!node)
        return -1;
    s_node_down (self, node);
    //  Snapshot first: handling one job can finish it or start others
    size_t count = 0;
    s_jobx_t **jobs = (s_jobx_t **) s_alloc (
        (self->running_count ? self->running_count : 1) * sizeof (s_jobx_t *));
    for (s_jobx_t *jobx = self->running_head; jobx; jobx = jobx->next)
        if (!jobx->any && sched_job_node_index (jobx->job, node) >= 0)
            jobs [count++] = jobx;
    for (size_t at = 0; at < count; at++) {
        s_jobx_t *jobx = jobs [at];
        if (jobx->finished || jobx->ending)
            continue;
        sched_job_t *job = jobx->job;
        size_t index = (size_t) sched_job_node_index (job, node);
        if (index >= jobx->batch_hi)
            continue;           //  R26: its batch has not started
        size_t first_open = SIZE_MAX;
        for (size_t step = 0; step < job->step_count; step++)
            if (!sched_cell_status_final (s_cell (job, step, index)->status)) {
                first_open = step;
                break;
            }
        if (first_open == SIZE_MAX)
            continue;           //  It has nothing left to do in this job
        s_event (self, job, "offline", index, first_open,
                 s_strdup ("node went offline"));
        size_t settled = SIZE_MAX;
        for (size_t step = first_open; step < job->step_count; step++) {
            sched_cell_t *cell = s_cell (job, step, index);
            if (!s_in_flight (cell->status)
                && cell->status != SCHED_CELL_RETRY_WAIT)
                continue;
            if (s_in_flight (cell->status))
                s_attempt_add (cell, s_attempt_node (jobx, index),
                               SCHED_CELL_LOST, NULL, "node went offline", -1,
                               s_ran_ms (self, cell), false);
            s_cell_set (self, jobx, step, index, SCHED_CELL_LOST);
            s_event (self, job, "lost", index, step,
                     s_strdup ("node went offline"));
            settled = step;
        }
        if (settled == SIZE_MAX) {
            //  Nothing under way: the step it was due to run next reads
            //  offline, so the failure is in its cells (R8 and R16 read
            //  failures from cells)
            sched_cell_t *cell = s_cell (job, first_open, index);
            free (cell->reason);
            cell->reason = s_strdup ("node went offline");
            s_cell_set (self, jobx, first_open, index, SCHED_CELL_OFFLINE);
            settled = first_open;
        }
        //  R12: offline counts as a failure, and the node is dropped
        s_node_failed (self, jobx, settled, index, true);
        s_cell_settled (self, jobx, settled, index);
    }
    free (jobs);
    s_wait_pass (self);
    return 0;
}

int
sched_cancel (sched_t *self, const char *job_id, const char *reason,
              int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    s_jobx_t *jobx = s_lookup (self, job_id);
    if (!jobx || jobx->finished)
        return -1;
    const char *why = reason && *reason ? reason : "cancelled by request";
    sched_job_t *job = jobx->job;
    if (jobx->queued) {
        s_event (self, job, "cancelled", SIZE_MAX, 0, s_strdup (why));
        s_job_finish (self, jobx, SCHED_JOB_CANCELLED, s_strdup (why));
    }
    else
        s_job_abort (self, jobx, SCHED_JOB_CANCELLED, why);
    s_wait_pass (self);
    return 0;
}

//  One due deadline that still holds.
static void
s_due_fire (sched_t *self, const s_due_t *entry)
{
    s_jobx_t *jobx = entry->jobx;
    sched_job_t *job = jobx->job;
    if (entry->kind == S_DUE_JOB) {
        char text [32];
        duration_format (job->spec->timeout_ms, text, sizeof (text));
        char *reason = s_printf ("job timeout after %s", text);
        s_job_abort (self, jobx, SCHED_JOB_FAILED, reason);
        free (reason);
        return;
    }
    size_t step = entry->step, node = entry->node;
    sched_cell_t *cell = s_cell (job, step, node);
    if (entry->kind == S_DUE_ACK) {
        //  R9: re-send directly, then give up
        if (cell->resends < self->config.ack_resends) {
            cell->resends++;
            s_resend (self, jobx, step, node,
                      s_printf ("re-sent directly (%" PRIu32 " of %" PRIu32
                                ")",
                                cell->resends, self->config.ack_resends));
            return;
        }
        char *error = s_printf ("no acknowledgement after %" PRIu32 " sends",
                                cell->resends + 1);
        if (jobx->any) {
            //  R19: an any-node step goes to another node instead
            s_reclaim (self, jobx, step, error);
            free (error);
            return;
        }
        s_attempt_add (cell, s_attempt_node (jobx, node), SCHED_CELL_LOST,
                       NULL, error, -1, 0, false);
        s_cell_failed (self, jobx, step, node, SCHED_CELL_LOST, false, error);
        return;
    }
    if (entry->kind == S_DUE_RUN) {
        //  R10: past timeout + grace: the broker calls it
        const job_phase_t *leaf = jobx->steps [step].leaf;
        int64_t timeout_ms = leaf->timeout_ms > 0
                                 ? leaf->timeout_ms
                                 : self->config.default_timeout_ms;
        char text [32];
        duration_format (timeout_ms, text, sizeof (text));
        char *error = s_printf ("no result within %s + grace", text);
        s_attempt_add (cell, s_attempt_node (jobx, node), SCHED_CELL_TIMEOUT,
                       NULL, error, -1,
                       timeout_ms + self->config.grace_ms, false);
        s_cancel_node (self, job, node);
        s_cell_failed (self, jobx, step, node, SCHED_CELL_TIMEOUT, true,
                       error);
        return;
    }
    if (entry->kind == S_DUE_STALL) {
        //  R22: heard of since? Then the clock runs from that word
        int64_t stall_ms = s_stall_ms (jobx, step);
        if (cell->renewed_ms + stall_ms > self->now_ms) {
            s_due_push (self, jobx, S_DUE_STALL, cell->renewed_ms + stall_ms,
                        step, node);
            return;
        }
        char text [32];
        duration_format (stall_ms, text, sizeof (text));
        char *error = s_printf ("no progress for %s (stall_timeout)", text);
        s_attempt_add (cell, s_attempt_node (jobx, node), SCHED_CELL_TIMEOUT,
                       NULL, error, -1, s_ran_ms (self, cell), false);
        s_cancel_node (self, job, node);
        s_cell_failed (self, jobx, step, node, SCHED_CELL_TIMEOUT, true,
                       error);
        return;
    }
    if (entry->kind == S_DUE_LEASE) {
        //  R18: renewed since? Then the lease runs from the last word of
        //  the cell or its node, whichever is later
        s_node_t *holder = jobx->nodes [node];
        int64_t renewed_ms = cell->renewed_ms > holder->heard_ms
                                 ? cell->renewed_ms
                                 : holder->heard_ms;
        if (renewed_ms + jobx->lease_ms > self->now_ms) {
            s_due_push (self, jobx, S_DUE_LEASE, renewed_ms + jobx->lease_ms,
                        step, node);
            return;
        }
        self->counters.lease_expirations++;
        holder->lease_expirations++;
        s_reclaim (self, jobx, step, "lease expired");
        return;
    }
    //  R11: the backoff is over
    s_dispatch_node (self, jobx, step, node, cell->attempt + 1);
}

int
sched_tick (sched_t *self, int64_t now_ms)
{
    s_collect (self);
    self->now_ms = now_ms;
    while (self->due_size > 0 && self->due [0].deadline_ms <= now_ms) {
        s_due_t entry;
        //  Keep the job's priv alive while the entry is handled
        self->due [0].jobx->due_refs++;
        s_due_pop (self, &entry);
        if (s_due_valid (&entry))
            s_due_fire (self, &entry);
        entry.jobx->due_refs--;
        s_jobx_release (entry.jobx);
    }
    s_admit (self);
    s_wait_pass (self);
    return 0;
}

int64_t
sched_next_deadline_ms (sched_t *self)
{
    //  Superseded entries are dropped here so the answer is a real
    //  deadline; each entry is dropped once, so this is O(1) amortised.
    while (self->due_size > 0 && !s_due_valid (&self->due [0])) {
        s_due_t entry;
        s_due_pop (self, &entry);
    }
    int64_t next = self->due_size > 0 ? self->due [0].deadline_ms : INT64_MAX;
    if (self->queue_size > 0 && !self->paused
        && self->running_count < self->config.max_concurrent
        && self->now_ms < next)
        next = self->now_ms;
    return next;
}

bool
sched_next_action (sched_t *self, sched_action_t *action)
{
    if (self->action_head >= self->action_count)
        return false;
    *action = self->actions [self->action_head++];
    return true;
}

const sched_job_t *
sched_job (sched_t *self, const char *job_id)
{
    s_jobx_t *jobx = s_lookup (self, job_id);
    return jobx && !jobx->finished ? jobx->job : NULL;
}

void
sched_set_paused (sched_t *self, bool paused)
{
    self->paused = paused;
}

bool
sched_paused (sched_t *self)
{
    return self->paused;
}

size_t
sched_pending_count (sched_t *self)
{
    return self->queue_size;
}

size_t
sched_running_count (sched_t *self)
{
    return self->running_count;
}

size_t
sched_live_jobs (sched_t *self, const sched_job_t ***jobs_p)
{
    const sched_job_t **jobs = (const sched_job_t **) s_alloc (
        (self->live_count ? self->live_count : 1) * sizeof (sched_job_t *));
    size_t count = 0;
    for (size_t bucket = 0; bucket < self->bucket_count; bucket++)
        for (s_jobx_t *jobx = self->buckets [bucket];
             jobx && count < self->live_count; jobx = jobx->hash_next)
            jobs [count++] = jobx->job;
    *jobs_p = jobs;
    return count;
}

size_t
sched_waiting_count (sched_t *self)
{
    return self->waiting_count;
}

void
sched_counters (sched_t *self, sched_counters_t *counters)
{
    *counters = self->counters;
}

int
sched_node_counters (sched_t *self, const char *node,
                     sched_node_counters_t *counters)
{
    memset (counters, 0, sizeof (*counters));
    s_node_t *entry = s_node_find (self, node);
    if (!entry)
        return -1;
    counters->claims = entry->claims;
    counters->reclaims = entry->reclaims;
    counters->lease_expirations = entry->lease_expirations;
    counters->in_flight = entry->in_flight;
    return 0;
}

void
sched_set_fleet (sched_t *self, sched_load_fn *load,
                 sched_idempotent_fn *idempotent, void *arg)
{
    self->load = load;
    self->idempotent = idempotent;
    self->fleet_arg = arg;
}

int
sched_set_limits (sched_t *self, const job_limit_t *limits, size_t count)
{
    if (count > JOB_MAX_LIMITS || self->live_count > 0)
        return -1;
    for (size_t index = 0; index < self->limit_count; index++)
        free (self->limits [index].pattern);
    memset (self->limit_running, 0, sizeof (self->limit_running));
    for (size_t index = 0; index < count; index++) {
        self->limits [index] = limits [index];
        self->limits [index].pattern = s_strdup (limits [index].pattern);
    }
    self->limit_count = count;
    return 0;
}

size_t
sched_limits (sched_t *self, sched_limit_use_t *uses, size_t max)
{
    size_t count = self->limit_count < max ? self->limit_count : max;
    for (size_t index = 0; index < count; index++) {
        uses [index].pattern = self->limits [index].pattern;
        uses [index].max = self->limits [index].max;
        uses [index].per_node = self->limits [index].per_node;
        uses [index].running = self->limit_running [index];
    }
    return count;
}
