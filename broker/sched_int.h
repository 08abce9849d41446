/*  =========================================================================
    sched_int - the scheduler's private state and what its files share

    The scheduler (sched.h) is split by concern into files that share the
    structs below: sched.c (memory, config, actions, jobs by id, the
    scheduler's life, submit, restore, cancel, accessors), sched_job.c
    (job, cell and attempt state), sched_walk.c (batches, dispatch, the
    phase and DAG walk, start and resume), sched_fleet.c (nodes, limits,
    any-node claims, waiting cells) and sched_heap.c (pending queue and
    deadlines). Only these files include this header; everything here may
    change without notice to the rest of the tree.

    Threading: the scheduler's thread only (sched.h).
    =========================================================================
*/
#ifndef GRID_SCHED_INT_H
#define GRID_SCHED_INT_H

#include "sched.h"


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
    uint32_t awaiting;           //  Restored cells waiting for its first word (R16)
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
    size_t waiting_any_count;    //  ... of them for an any-node slot (R17)
    uint64_t wait_seq;           //  Next enqueue number
    bool wait_dirty;             //  Capacity may have appeared
    bool in_wait_pass;           //  Inside sched_wait_pass (no re-entry)
    //  Concurrency limits (R21)
    job_limit_t limits [JOB_MAX_LIMITS];
    size_t limit_count;
    uint32_t limit_running [JOB_MAX_LIMITS];  //  Cells in flight per limit
    bool admitting;              //  Inside sched_admit (no re-entry)
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
//  sched.c: memory, actions, jobs by id, the scheduler

void *sched_alloc (size_t size);

void *sched_grow (void *data, size_t *cap, size_t item_size);

char *sched_strdup (const char *text);

char *sched_printf (const char *format, ...);

//  Keeps DATA until every action has been drained.
void *sched_keep (sched_t *self, void *data);

//  R11: backoff before attempt ATTEMPT + 1, after ATTEMPT failed.
//  b = min (cap, base * 2^(attempt-1)); equal jitter keeps half of b and
//  draws the other half uniformly, so the delay is in [b - b/2, b]: a
//  retry never comes back at once, and a fleet that failed together
//  spreads out.
int64_t sched_backoff_ms (sched_t *self, uint32_t attempt);

sched_action_t *sched_action (sched_t *self, sched_action_type_t type,
                              sched_job_t *job);

void sched_save_job (sched_t *self, sched_job_t *job);

void sched_save_cell (sched_t *self, sched_job_t *job, size_t step,
                      size_t node);

//  EVENT for NODE (SIZE_MAX: job-level) at STEP; DETAIL is taken (kept
//  until drained) and may be NULL.
void sched_event (sched_t *self, sched_job_t *job, const char *event,
                  size_t node, size_t step, char *detail);

//  EVENT for the node named NODE (kept by the caller until drained).
void sched_event_named (sched_t *self, sched_job_t *job, const char *event,
                        const char *node, size_t step, char *detail);

//  A short, single-line excerpt of agent text for an event detail.
char *sched_excerpt (const char *prefix, const char *text);

size_t sched_hash (const char *text);

s_jobx_t *sched_lookup (sched_t *self, const char *id);

void sched_hash_remove (sched_t *self, s_jobx_t *jobx);

//  Frees what drained actions point into, once all have been drained.
void sched_collect (sched_t *self);

//  ---------------------------------------------------------------------
//  sched_job.c: job, cell and attempt state

//  Sent and not yet finished: the agent may be working on it.
bool sched_in_flight (sched_cell_status_t status);

//  A final status that counts as a failure for conditions and strategies
//  (R6, R7). An agent-reported cancel of a live cell counts too: the node
//  did not do its work.
bool sched_is_failure (sched_cell_status_t status);

//  The node can no longer be reached for this job.
bool sched_is_unreachable (sched_cell_status_t status);

bool sched_condition_met (job_condition_t condition, bool failed);

void sched_cells_free (sched_job_t *job);

void sched_expected_free (sched_job_t *job);

void sched_not_run_clear (sched_job_t *job);

int sched_compare_not_run (const void *a, const void *b);

//  The not-run entry of NODE in JOB's sorted list, or NULL.
const sched_not_run_t *sched_not_run_find (const sched_job_t *job,
                                           const char *node);

//  "web-07 offline since 12:01:07, web-09 drained" for the entries of
//  JOB's not-run list whose `named` is NAMED, at most 3 then "and N
//  more". A new string.
char *sched_not_run_text (const sched_job_t *job, bool named);

//  How many entries of JOB's not-run list have `named` NAMED.
size_t sched_not_run_count (const sched_job_t *job, bool named);

//  Frees a priv whose job is gone once no deadline points at it.
void sched_jobx_release (s_jobx_t *jobx);

//  Frees a job the scheduler owns, and its priv unless deadlines still
//  point at it (they find jobx->job NULL and let go).
void sched_job_discard (sched_job_t *job);

//  Builds the priv of JOB: the step and phase tables from the spec.
//  Returns NULL when the spec does not add up (a corrupt record).
s_jobx_t *sched_jobx_new (sched_job_t *job);

sched_cell_t *sched_cell (sched_job_t *job, size_t step, size_t node);

int sched_compare_ids (const void *a, const void *b);

//  May a cell's status go from FROM to TO? The one table of moves
//  (s_cell_moves in sched_job.c). Final statuses have no way out. False
//  for a status out of range.
bool sched_cell_move_allowed (sched_cell_status_t from,
                              sched_cell_status_t to);

//  Sets CELL's status to STATUS: every write of a cell's status goes
//  through here. Asserts the move is in the table in debug builds
//  (GRID_DEBUG); a release build makes the move regardless. Keeps
//  no counter: sched_cell_change does that for live cells.
void sched_cell_move (sched_cell_t *cell, sched_cell_status_t status);

//  The cell's progress is gone (a new attempt, or the end).
void sched_progress_clear (sched_cell_t *cell);

//  The cell no longer waits for a slot.
void sched_waiting_clear (sched_t *self, sched_cell_t *cell);

//  R15: job->step is the lowest step with a cell not yet final, which is
//  the lowest step some node still works on. Cells never leave a final
//  status, so the pointer only moves forward: O(1) amortised. Cells of
//  batches not started yet count as not final (R26).
void sched_step_update (sched_t *self, s_jobx_t *jobx);

//  Sets a cell's status, with a SAVE_CELL when SAVE; keeps the final
//  counters.
void sched_cell_change (sched_t *self, s_jobx_t *jobx, size_t step,
                        size_t node, sched_cell_status_t status, bool save);

//  Sets a cell's status (SAVE_CELL); keeps the final counters.
void sched_cell_set (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                     sched_cell_status_t status);
//  Skips a cell (SAVE_CELL) and keeps WHY (borrowed) as its reason, so
//  that the record says why it did not run: a condition, a stop after a
//  failure, fail-fast, the failure budget.
void sched_cell_skip (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                      const char *why);

//  Records a finished attempt on a cell (R11: every attempt is kept).
//  NODE names the node that ran it on any-node jobs (NULL otherwise).
void sched_attempt_add (sched_cell_t *cell, const char *node,
                        sched_cell_status_t status, const char *output,
                        const char *error, int32_t exit_code,
                        int64_t duration_ms, bool truncated);

//  How long the current attempt of CELL has been running: from its
//  started until now, 0 when it never started (a cancel or a loss
//  records the time the step really ran).
int64_t sched_ran_ms (const sched_t *self, const sched_cell_t *cell);

//  The node an attempt of JOB on column NODE names: any-node jobs only.
const char *sched_attempt_node (const s_jobx_t *jobx, size_t node);

//  Marks every non-final cell of NODE in steps FROM up to (not
//  including) TO skipped, with one event saying why. Returns how many.
size_t sched_skip_node (sched_t *self, s_jobx_t *jobx, size_t node,
                        size_t from, size_t to, const char *why);

//  R11: the attempt just recorded on a cell failed with STATUS: wait and
//  retry while attempts remain, else the cell ends with STATUS. DETAIL is
//  taken.
void sched_cell_failed (sched_t *self, s_jobx_t *jobx, size_t step,
                        size_t node, sched_cell_status_t status,
                        bool retryable, char *detail);

void sched_running_add (sched_t *self, s_jobx_t *jobx);

//  Ends the job with STATUS and REASON (taken, may be NULL): SAVE_JOB,
//  EVENT finished, FINISHED (R15). The record stays readable until the
//  next mutating call.
void sched_job_finish (sched_t *self, s_jobx_t *jobx,
                       sched_job_status_t status, char *reason);

//  R13, R14: stops a running job: CANCEL to the nodes with work in
//  flight, every non-final cell reads cancelled, the job ends STATUS.
void sched_job_abort (sched_t *self, s_jobx_t *jobx, sched_job_status_t status,
                      const char *reason);

//  R22: the stall timeout of STEP: the task's own, else the job's, else 0.
int64_t sched_stall_ms (const s_jobx_t *jobx, size_t step);

//  ---------------------------------------------------------------------
//  sched_walk.c: batches, dispatch, the walk

//  DISPATCH of STEP/ATTEMPT to one node on its own topic (pipelines,
//  retries, node lists and `any` targets), now.
void sched_send_node (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                      uint32_t attempt);

//  DISPATCH of STEP/ATTEMPT to one node, or a wait when no node is free
//  to take an any-node step (R17) or a limit is full (R21).
void sched_dispatch_node (sched_t *self, s_jobx_t *jobx, size_t step,
                          size_t node, uint32_t attempt);

//  R9, R16: the same attempt again, straight to the node.
void sched_resend (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                   char *detail);

//  CANCEL to a single node.
void sched_cancel_node (sched_t *self, sched_job_t *job, size_t node,
                        size_t step, const char *why);

//  R7, R12: bookkeeping after a cell of NODE ended in failure.
void sched_node_failed (sched_t *self, s_jobx_t *jobx, size_t step,
                        size_t node, bool unreachable);

void sched_cell_settled (sched_t *self, s_jobx_t *jobx, size_t step,
                         size_t node);

//  R1: starts queued jobs while there is room.
void sched_admit (sched_t *self);

//  R16: rebuilds the walker's state of a running job from its cells and
//  picks up where it stopped.
void sched_resume (sched_t *self, s_jobx_t *jobx);

//  ---------------------------------------------------------------------
//  sched_fleet.c: nodes, limits, claims, waiting cells

//  Entries for every expected node of JOB, and for a job of many nodes
//  their hashed index (sched_job_node_index reads it: every agent event
//  names its node).
void sched_nodes_bind (sched_t *self, s_jobx_t *jobx);

//  Which broker limits and which of the job's own limits cover each step.
void sched_limits_bind (sched_t *self, s_jobx_t *jobx);

//  Is STEP of JOBX under any limit?
bool sched_step_limited (const s_jobx_t *jobx, size_t step);

//  A cell of STEP on NODE went into flight (DELTA 1) or out of it (-1).
void sched_limits_count (sched_t *self, s_jobx_t *jobx, size_t step,
                         s_node_t *node, int delta);

//  R17: the candidate for STEP of JOBX (NULL: a job not yet started)
//  among IDS: the least loaded usable node (with a free slot when
//  NEED_FREE, per-node limits included), ties broken in turn. Nodes the step
//  was taken back from are passed over while another node can take it.
//  Returns its index or -1; *BUSY_P counts usable nodes without a slot,
//  *USABLE_P the nodes up (both may be NULL).
ssize_t sched_pick (sched_t *self, char **ids, size_t count, s_jobx_t *jobx,
                    size_t step, bool need_free, size_t *busy_p,
                    size_t *usable_p);

//  May STEP of JOBX go to column NODE now (R17, R21)? The fleet-wide
//  limits first; then an any-node job picks its node (the column may
//  move), another job checks NODE's own limits. Returns true, or false
//  with *WHY_P (the cell's reason) and *KEY_P (what it waits for, its
//  waiting class), both malloc'd.
bool sched_gate (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                 char **why_p, char **key_p);

//  Does STEP of JOBX have to pass sched_gate?
bool sched_gated (const s_jobx_t *jobx, size_t step);

//  Removes the head of CLASS_ into *ENTRY (its job reference goes with it).
void sched_wait_pop (s_class_t *class_, s_wait_t *entry);

//  The cell STEP/NODE of JOBX waits for a slot (KEY names what for, WHY
//  is taken): it keeps its status (pending, or retry_wait for a retry),
//  reads WHY, and gets one EVENT waiting unless QUIET (a broadcast's
//  waiting nodes share one).
void sched_wait_add (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                     uint32_t attempt, const char *key, char *why, bool quiet);

//  Lets go of a popped entry's job reference.
void sched_wait_release (s_wait_t *entry);

//  R17: when capacity may have appeared, waiting cells go in priority,
//  then submission order, class by class; a class stops at the first
//  head that still cannot go. Costs O(classes) when nothing can go.
void sched_wait_pass (sched_t *self);

//  R18, R19: takes STEP of an any-node job back from its holder (WHY: "lease
//  expired", "node offline", ...). The attempt is recorded against the
//  holder, which is told to stop. Before started the step goes out again
//  as the same attempt; after started, as a new attempt while retries
//  remain or when the action is idempotent; else it ends lost. It goes to
//  another node of the set, or waits for one.
void sched_reclaim (sched_t *self, s_jobx_t *jobx, size_t step,
                    const char *why);

//  R2: asks which nodes of the target cannot run the job, keeps that
//  list on the job (sorted, one entry per node, NULL reasons filled in)
//  and drops those nodes from IDS (sorted). Returns the new count of IDS.
size_t sched_not_run_apply (sched_t *self, sched_job_t *job, char **ids,
                            size_t count);

//  ---------------------------------------------------------------------
//  sched_heap.c: pending queue and deadlines

void sched_queue_push (sched_t *self, s_jobx_t *jobx);

void sched_queue_remove (sched_t *self, s_jobx_t *jobx);

void sched_due_push (sched_t *self, s_jobx_t *jobx, s_due_kind_t kind,
                     int64_t deadline_ms, size_t step, size_t node);

//  Removes the top entry into *ENTRY; drops its reference to the job.
void sched_due_pop (sched_t *self, s_due_t *entry);

#endif
