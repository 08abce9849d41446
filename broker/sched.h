/*  =========================================================================
    sched - the phase-walking scheduler (a pure state machine)

    Events go in (submit, ack, started, result, node offline, cancel,
    tick(now)); actions come out (dispatch a step, re-send to a node, cancel
    on nodes, save a job header, save one result cell, append an event,
    job finished). The scheduler calls no socket, no LMDB and no clock: every
    call takes now_ms from a monotonic clock the caller owns, and randomness
    (retry jitter) comes from a seed in the config. It is unit-tested with a
    fake clock and a fake transport (test/test_sched.c).

    Semantics (ARCHITECTURE 5, docs/SCHEDULING.md is the full rule book):
    top-level phases are barriers; a branch is a per-node pipeline; steps
    are numbered depth-first; conditions always/on_success/on_failure are
    evaluated against "has any earlier step failed"; strategies fail-fast
    and continue; per-task retries with capped exponential backoff and
    jitter on the failing node only; task timeouts (deadline + grace) and a
    job timeout; cancel; admission (max_concurrent running, max_pending
    queued by priority then age).

    Caller's loop (broker):
        sched_xxx (sched, ..., now_ms);        //  one or more events
        while (sched_next_action (sched, &action))
            ... persist in one transaction, queue sends ...
        commit, then send;
    Pointers inside an action (job, node, nodes, topic, event, detail) are
    borrowed and valid until the next call to a sched_ function other than
    sched_next_action and the const accessors. A finished job stays
    readable until then, and is freed at the next mutating call.

    Threading: one scheduler belongs to one thread.
    =========================================================================
*/
#ifndef GRID_SCHED_H
#define GRID_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/job.h"
#include "../proto/names.h"
#include "../proto/proto.h"
#include "../proto/trace.h"

typedef enum {
    SCHED_JOB_PENDING = 0,       //  Queued, not started
    SCHED_JOB_RUNNING,           //  Started
    SCHED_JOB_COMPLETED,         //  Every node finished every step it had to run, no failure
    SCHED_JOB_PARTIAL_FAILURE,   //  Some nodes failed, some finished everything
    SCHED_JOB_FAILED,            //  All nodes failed, fail-fast stopped it, job timeout, or no node
    SCHED_JOB_CANCELLED          //  Cancelled by an operator
} sched_job_status_t;

typedef enum {
    SCHED_CELL_PENDING = 0,      //  Not yet sent
    SCHED_CELL_DISPATCHED,       //  Sent, no ack yet
    SCHED_CELL_ACKNOWLEDGED,     //  Agent took it
    SCHED_CELL_RUNNING,          //  Agent started it
    SCHED_CELL_SUCCESS,          //  Final: it worked
    SCHED_CELL_FAILED,           //  Final: it ran and failed (after any retries)
    SCHED_CELL_TIMEOUT,          //  Final: it ran past its timeout
    SCHED_CELL_SKIPPED,          //  Final: not run (condition, strategy, dropped node)
    SCHED_CELL_LOST,             //  Final: never acknowledged, or the node went away
    SCHED_CELL_CANCELLED,        //  Final: job cancelled or timed out before it finished
    SCHED_CELL_INTERRUPTED,      //  Final: the agent restarted while it ran
    SCHED_CELL_OFFLINE,          //  Final: the node was offline when the step was due
    SCHED_CELL_DRAINED,          //  Final: a named node was drained when the job started
    SCHED_CELL_UNSUPPORTED,      //  Final: a named node does not offer an action of the job
    SCHED_CELL_RETRY_WAIT        //  Failed, waiting for its backoff to run again
} sched_cell_status_t;

//  One finished attempt of one (step, node).
typedef struct {
    uint32_t attempt;             //  1-based
    sched_cell_status_t status;   //  SUCCESS, FAILED, TIMEOUT, LOST, CANCELLED, INTERRUPTED
    char *output;                 //  Captured output (owned, may be NULL)
    char *error;                  //  Error text (owned, may be NULL)
    int32_t exit_code;            //  -1 when none
    int64_t duration_ms;          //  As the agent measured it
    bool truncated;               //  Output was cut
    proto_kv_t *data;             //  Structured facts the action gave (owned)
    size_t data_count;            //  How many
    char *node;                   //  Node that ran it (any-node jobs, owned), or NULL
    bool late;                    //  A result that came after the step was reclaimed
    uint64_t output_size;         //  Whole stdout / stderr kept in the
    uint64_t error_size;          //  store's outputs (0: output / error is all)
    uint64_t output_dropped;      //  Bytes the cap dropped from their middle
    uint64_t error_dropped;
    bool has_late;                //  The agent's result came after the broker's verdict on this attempt, and said otherwise:
    sched_cell_status_t late_status;  //  what it said (the verdict's status, exit code and duration stay)
    int32_t late_exit_code;       //  Its exit code
    int64_t late_at_ms;           //  Wall clock it came at (0 until the broker stamps it when it saves the cell)
} sched_attempt_t;

//  The state of one (step, node).
typedef struct {
    sched_cell_status_t status;   //  Current status
    uint32_t attempt;             //  Current attempt, 0 before the first dispatch
    sched_attempt_t *attempts;    //  Finished attempts, oldest first (owned)
    size_t attempt_count;         //  How many
    char *reason;                 //  Why it did not run (offline, drained, unsupported), or NULL (owned)
    char *waiting;                //  Why a pending cell waits for a slot (owned), or NULL
    bool waiting_any;             //  Private: ... for an any-node slot (R17), not a limit
    int64_t progress_ms;          //  When the attempt in flight last reported progress (monotonic), 0 never
    int32_t percent;              //  Its percent: 0..100, -1 none
    char *progress_kind;          //  Its kind ("downloading"), or NULL (owned)
    char *progress;               //  Its message, or NULL (owned); all three kept in memory only
    int64_t deadline_ms;          //  Private: ack / run / retry deadline (monotonic)
    uint32_t resends;             //  Private: direct re-sends of this attempt
    int64_t started_ms;           //  Private: when this attempt started running (monotonic), 0 before
    int64_t since_ms;             //  Monotonic time of its latest status change
    int64_t dispatched_ms;        //  Monotonic time its attempt was last (re)dispatched, 0 never
    int64_t renewed_ms;           //  Private: any-node lease, last renewal (monotonic)
    uint32_t claims;              //  Private: any-node claims of this cell (lease generation)
    bool counted;                 //  Private: counted in its node's in-flight figure
    bool stored;                  //  Restore: the store held a record of it (jobrec_load)
    bool awaiting_node;           //  Private: restored in flight; its ack clock waits for its node's first word (R16)
} sched_cell_t;

//  A node the target names or covers that the job did not run on.
typedef struct {
    char *node;                   //  Node id (owned)
    sched_cell_status_t status;   //  OFFLINE, DRAINED or UNSUPPORTED
    char *reason;                 //  "offline since 12:01:07", "drained", "does not offer apt update" (owned)
    bool named;                   //  Named by the target: it has a row (a cell per step) in the job
} sched_not_run_t;

typedef struct {
    char id [JOB_ID_LEN + 1];     //  Job id
    job_spec_t *spec;             //  The spec (owned)
    sched_job_status_t status;    //  Job status
    size_t step;                  //  Current step: lowest step some node still works on
    size_t step_count;            //  Leaves in the spec
    char **expected;              //  Resolved node ids, sorted (owned)
    size_t expected_count;        //  How many
    sched_cell_t *cells;          //  step_count x expected_count, cells[step * expected_count + node]
    char *reason;                 //  Why it failed or was cancelled, or NULL
    sched_not_run_t *not_run;     //  Nodes named or covered that did not run, sorted by id (owned)
    size_t not_run_count;         //  How many
    char *schedule;               //  The schedule that started it (owned), or NULL; not used by sched
    char *submitted_by;           //  Who submitted it, "alice (admin)" (owned), or NULL;
                                  //  named in its submitted event
    char traceparent [TRACE_PARENT_LEN + 1];  //  Its W3C trace context (broker/jobtrace.h),
                                  //  "" for a job of an earlier release; not used by sched
    bool trace_made;              //  The broker made it (the job's span is a root)
    int64_t created_at_ms;        //  Wall clock, set by the caller, not used by sched
    int64_t updated_at_ms;        //  Wall clock, set by the caller, not used by sched
    int64_t submitted_ms;         //  Monotonic time of submission (sched)
    char *retry_of;               //  The job this one retries, or NULL (owned; sched only frees it)
    char **retried_by;            //  Jobs made to retry this one, oldest first (owned)
    size_t retried_by_count;      //  How many
    size_t batch;                 //  Running: the current batch, 0-based (sched)
    size_t batch_count;           //  Running: how many batches (sched)
    void *priv;                   //  Private to sched
} sched_job_t;

typedef struct {
    size_t max_concurrent;        //  Running jobs at most (default 64)
    size_t max_pending;           //  Queued jobs at most (default 1024)
    int64_t ack_timeout_ms;       //  Dispatch -> ack before a direct re-send (default 2000)
    uint32_t ack_resends;         //  Direct re-sends before `lost` (default 3)
    int64_t default_timeout_ms;   //  Task timeout when the spec has none (default 300000)
    int64_t grace_ms;             //  Broker deadline = task timeout + grace (default 5000)
    int64_t retry_base_ms;        //  First retry backoff (default 1000)
    int64_t retry_cap_ms;         //  Largest backoff (default 60000)
    int64_t lease_ms;             //  Any-node lease when the job sets none (default 30000)
    int64_t restore_wait_ms;      //  R16: how long a restored in-flight cell waits for its node's first word (default 20000; broker: restart hold + offline_grace)
    uint64_t seed;                //  Jitter PRNG seed
} sched_config_t;

//  Fills CONFIG with the defaults above.
void sched_config_defaults (sched_config_t *config);

//  Resolves a target to the ids of online, non-drained nodes that match it.
//  Returns the count and gives *IDS_P a malloc'd array of malloc'd strings
//  (the scheduler frees them); 0 with *IDS_P NULL when none match.
typedef size_t (sched_resolve_fn) (void *arg, const target_t *target,
                                   char ***ids_p);

//  The nodes SPEC's target names or covers that cannot run it now: those
//  offline, drained, or lacking an action of the job. Returns the count
//  and gives *LIST_P a malloc'd array (the scheduler takes it and what
//  its entries own); 0 with *LIST_P NULL when every node can run it.
//  Entries with `named` set get a row in the job: a cell per step with
//  their status and reason. The others are listed in job->not_run only.
//  An entry for a node the resolver also returned drops that node.
typedef size_t (sched_unavailable_fn) (void *arg, const job_spec_t *spec,
                                       sched_not_run_t **list_p);

//  What the broker knows of one node, for any-node claims: whether it is
//  online and not drained, its executor slots (hello concurrency) and its
//  load from its last heartbeat.
typedef struct {
    bool online;                  //  Online and not drained
    uint32_t slots;               //  Executor pool size, >= 1
    uint32_t running;             //  Tasks running, from its last heartbeat
    uint32_t queued;              //  Tasks queued, from its last heartbeat
} sched_load_t;

//  Fills *LOAD for NODE; returns false when the node is unknown.
typedef bool (sched_load_fn) (void *arg, const char *node, sched_load_t *load);

//  True when BACKEND/ACTION may run twice without harm: a query action, or
//  one its backend declares idempotent.
typedef bool (sched_idempotent_fn) (void *arg, const char *backend,
                                    const char *action);

//  Scheduler-wide counters (they only grow).
typedef struct {
    uint64_t claims;              //  Any-node steps given to a node
    uint64_t reclaims;            //  Any-node steps taken back from a node
    uint64_t lease_expirations;   //  Leases that ran out unrenewed
    uint64_t late_results;        //  Results from a node the step was taken from
    uint64_t submitted;           //  Jobs admitted by sched_submit
    uint64_t queue_full;          //  Submits refused: the queue was full
    uint64_t cells_final [SCHED_CELL_RETRY_WAIT + 1];  //  Cells that became final, by status
} sched_counters_t;

//  Per-node figures.
typedef struct {
    uint64_t claims;              //  Any-node steps given to it
    uint64_t reclaims;            //  Any-node steps taken back from it
    uint64_t lease_expirations;   //  Its leases that ran out
    uint32_t in_flight;           //  Cells dispatched to it and not finished
} sched_node_counters_t;

typedef enum {
    SCHED_ACTION_DISPATCH = 1,    //  Send STEP/ATTEMPT of JOB to NODES; on TOPIC when not NULL, else on each node's own topic
    SCHED_ACTION_RESEND,          //  Send STEP/ATTEMPT of JOB to NODE directly (agent ROUTER)
    SCHED_ACTION_CANCEL,          //  Tell NODES to stop JOB's work; with ATTEMPT > 0 only that attempt of STEP (DETAIL: why)
    SCHED_ACTION_SAVE_JOB,        //  Persist JOB's header (status, step, expected, reason)
    SCHED_ACTION_SAVE_CELL,       //  Persist the cell (STEP, NODE) of JOB
    SCHED_ACTION_EVENT,           //  Append EVENT (with NODE, STEP, DETAIL) to JOB's log
    SCHED_ACTION_FINISHED,        //  JOB reached a final status (after its SAVE_JOB)
    SCHED_ACTION_FORGET_CELLS     //  JOB's cells saved under NODE are stale (an any-node job moved): delete them
} sched_action_type_t;

typedef struct {
    sched_action_type_t type;     //  What to do
    sched_job_t *job;             //  The job (borrowed)
    uint32_t step;                //  DISPATCH, RESEND, SAVE_CELL, EVENT (when step-related)
    uint32_t attempt;             //  DISPATCH, RESEND, CANCEL (0: the whole job)
    const char *node;             //  RESEND, SAVE_CELL, EVENT (NULL = job-level event), FORGET_CELLS
    size_t cell;                  //  SAVE_CELL: the cell's index in job->cells (an any-node cell is saved under its holder when drained)
    const char *topic;            //  DISPATCH: broadcast topic, or NULL
    char *const *nodes;           //  DISPATCH, CANCEL: the nodes meant
    size_t node_count;            //  How many
    const char *event;            //  EVENT: submitted, started, dispatched, acknowledged, running, succeeded, failed, timeout, lost, offline, interrupted, retried, skipped, cancelled, finished
    const char *detail;           //  EVENT, CANCEL: a sentence or NULL
} sched_action_t;

//  A new scheduler. CONFIG is copied. RESOLVE/ARG resolve targets when a
//  job starts.
typedef struct _sched_t sched_t;

sched_t *sched_new (const sched_config_t *config, sched_resolve_fn *resolve,
                    void *arg);

//  Lets the scheduler see node loads and action kinds (any-node claims,
//  reclaims after started). Without it every node has a free slot, its
//  load is what the scheduler itself sent it, and no action is idempotent.
void sched_set_fleet (sched_t *self, sched_load_fn *load,
                      sched_idempotent_fn *idempotent, void *arg);

//  Frees the scheduler and every job it holds; NULL-safe, nulls *self_p.
void sched_destroy (sched_t **self_p);

//  Sets the callback that says, when a job starts, which nodes of its
//  target cannot run it and why (R2). Without one, nodes the resolver
//  leaves out are not mentioned.
void sched_set_unavailable (sched_t *self, sched_unavailable_fn *unavailable,
                            void *arg);

//  Frees the entries of a not-run list and the array; NULL-safe.
void sched_not_run_free (sched_not_run_t *list, size_t count);

//  A new job record for SPEC (taken: *spec_p is nulled) with id ID.
sched_job_t *sched_job_new (const char *id, job_spec_t **spec_p);

//  Index of NODE in JOB's sorted expected list (bsearch), or -1.
ssize_t sched_job_node_index (const sched_job_t *job, const char *node);

//  Frees what CELL owns (its attempts and reason) and zeroes it.
void sched_cell_clear (sched_cell_t *cell);

//  Rolling batches (docs/SCHEDULING.md R26), computed from JOB's spec and
//  expected nodes, so they hold for a job read back from the store: how
//  many batches; where batch BATCH ends in `expected` (exclusive; batches
//  are consecutive runs of the sorted nodes); the current batch (the first
//  with a cell not yet final, else the last that was sent work); and the
//  failure budget in nodes (SIZE_MAX when there is none).
size_t sched_job_batch_count (const sched_job_t *job);
size_t sched_job_batch_end (const sched_job_t *job, size_t batch);
size_t sched_job_batch_current (const sched_job_t *job);
size_t sched_job_budget (const sched_job_t *job);

//  Frees a job that was never handed to a scheduler; NULL-safe.
void sched_job_destroy (sched_job_t **job_p);

//  Admits a job (taken: *job_p is nulled on success; on refusal the caller
//  keeps it). Returns 0 when queued or started, -1 when the queue is full
//  (REASON gets a sentence). Emits SAVE_JOB, EVENT(submitted) and, when it
//  starts at once, its first dispatches.
int sched_submit (sched_t *self, sched_job_t **job_p, int64_t now_ms,
                  char *reason, size_t reason_len);

//  Takes back a job read from the store after a restart, in whatever state
//  it was persisted (pending jobs re-enter the queue; running jobs resume:
//  final cells are kept, in-flight ones are re-sent). Same ownership as
//  sched_submit. Returns 0 or -1.
int sched_restore (sched_t *self, sched_job_t **job_p, int64_t now_ms);

//  Agent events. Each returns 0 when applied, 1 when it was a duplicate
//  (already recorded: the caller acknowledges again), -1 when it matches no
//  live (job, step, node, attempt) (the caller drops and counts it).
int sched_on_ack (sched_t *self, const char *job_id, uint32_t step,
                  uint32_t attempt, const char *node, int64_t now_ms);
int sched_on_started (sched_t *self, const char *job_id, uint32_t step,
                      uint32_t attempt, const char *node, int64_t now_ms);
int sched_on_result (sched_t *self, const proto_msg_t *result,
                     int64_t now_ms);

//  A node went offline (missed heartbeats, bye, or disconnect), and the
//  grace is over: its in-flight cells end `lost` and its later steps
//  `skipped`. Its any-node steps are reclaimed (R19).
int sched_on_node_offline (sched_t *self, const char *node, int64_t now_ms);

//  A node stopped answering (marked offline, before the grace): its
//  any-node leases end at once and their steps are reclaimed (R19); its
//  fleet work waits for sched_on_node_offline. Returns 0.
int sched_on_node_down (sched_t *self, const char *node, int64_t now_ms);

//  A progress message from an agent (PROTO_PROGRESS): the cell keeps the
//  latest percent, kind and message (in memory: no SAVE_CELL), its lease
//  and stall clock are renewed, and an EVENT progress is emitted only when
//  the kind changes, at least 100 ms after the cell's previous report.
//  Returns 0, or -1 when it matches no cell in flight.
int sched_on_progress (sched_t *self, const proto_msg_t *progress,
                       int64_t now_ms);

//  A heartbeat (or any message) from NODE: renews its leases; a node whose
//  load may have dropped lets waiting steps start. Returns 0.
int sched_on_heartbeat (sched_t *self, const char *node, int64_t now_ms);

//  Cancels a pending or running job. Returns 0, -1 when no such live job.
int sched_cancel (sched_t *self, const char *job_id, const char *reason,
                  int64_t now_ms);

//  Advances time: ack timeouts and re-sends, task and job timeouts,
//  retry backoffs, admission of queued jobs. Returns 0.
int sched_tick (sched_t *self, int64_t now_ms);

//  The earliest monotonic time at which sched_tick has work, or INT64_MAX.
int64_t sched_next_deadline_ms (sched_t *self);

//  Pops the next action into *ACTION. Returns false when there is none.
bool sched_next_action (sched_t *self, sched_action_t *action);

//  The agent's late RESULT for the attempt the broker ended on CELL (lost,
//  cancelled or timeout). When it says what the verdict says (a cancelled
//  step reporting `cancelled`), it fills the attempt, once: output, exit
//  code, duration, truncation and data; the broker's error stays. When it
//  says otherwise (a `success` after `lost`), the verdict stands whole
//  (status, exit code, duration, output) and the result is recorded beside
//  it, once: has_late, late_status, late_exit_code, and late_at_ms =
//  AT_MS (0: the broker stamps it when it saves the cell). Returns
//  SCHED_FILL_NONE when it changed nothing, SCHED_FILL_OUTPUT or
//  SCHED_FILL_LATE. sched_on_result does this for live jobs (and
//  returns 1); the broker does it on the stored cell of a finished job.
#define SCHED_FILL_NONE 0
#define SCHED_FILL_OUTPUT 1
#define SCHED_FILL_LATE 2
int sched_attempt_fill (sched_cell_t *cell, const proto_msg_t *result,
                        int64_t at_ms);

//  A live (pending or running) job, or NULL. Borrowed.
const sched_job_t *sched_job (sched_t *self, const char *job_id);

//  Holds queued jobs (broker maintenance, or right after a restart while
//  the agents come back) or lets them start again at the next tick.
//  Running jobs go on either way; submits are still queued.
void sched_set_paused (sched_t *self, bool paused);
bool sched_paused (sched_t *self);

//  How many jobs are pending / running.
size_t sched_pending_count (sched_t *self);
size_t sched_running_count (sched_t *self);

//  The live (pending and running) jobs: a malloc'd array of borrowed
//  pointers in no particular order (free only the array), valid until the
//  next mutating call. Returns the count.
size_t sched_live_jobs (sched_t *self, const sched_job_t ***jobs_p);

//  Cells that wait for a free slot (any-node steps with no free node, and
//  cells over a concurrency limit).
size_t sched_waiting_count (sched_t *self);

//  Of those, the any-node steps that wait for a free node (R17); the rest
//  wait for a concurrency limit (R21).
size_t sched_waiting_any_count (sched_t *self);

//  Sets the concurrency limits (R21): LIMITS (COUNT of them, at most
//  JOB_MAX_LIMITS) are copied. Only before any job is handed over (the
//  broker sets them at start). Returns 0, or -1.
int sched_set_limits (sched_t *self, const job_limit_t *limits,
                      size_t count);

//  One limit in use.
typedef struct {
    const char *pattern;          //  backend.action pattern (borrowed from sched)
    uint32_t max;                 //  The limit
    bool per_node;                //  Per node, else fleet-wide
    uint32_t running;             //  Cells in flight it covers, fleet-wide
    uint32_t busiest;             //  Per node: the most that one node runs
    const char *busiest_node;     //  ... which node (borrowed), or NULL if none
} sched_limit_use_t;

//  Fills USES (room for MAX) with the limits and how many cells each
//  covers now; returns how many. Patterns live as long as the scheduler.
size_t sched_limits (sched_t *self, sched_limit_use_t *uses, size_t max);

//  The scheduler-wide counters.
void sched_counters (sched_t *self, sched_counters_t *counters);

//  NODE's figures; returns -1 (and zeroes *COUNTERS) for a node the
//  scheduler never dealt with.
int sched_node_counters (sched_t *self, const char *node,
                         sched_node_counters_t *counters);

//  R18: RESULT came from a node an any-node CELL was taken from (an
//  attempt of the cell names that node and attempt, lost). Adds it to the
//  cell's attempts, marked late, once. Returns 0 when added, 1 when it is
//  there already, -1 when the node never held that attempt. Pure: for
//  the scheduler's live cells and the broker's stored ones alike.
int sched_attempt_late (sched_cell_t *cell, const proto_msg_t *result);

//  Wire/JSON names: "pending", "running", "completed", "partial_failure",
//  "failed", "cancelled"; "pending", "dispatched", "acknowledged",
//  "running", "success", "failed", "timeout", "skipped", "lost",
//  "cancelled", "interrupted", "offline", "drained", "unsupported",
//  "retry_wait".
const char *sched_job_status_name (sched_job_status_t status);
const char *sched_cell_status_name (sched_cell_status_t status);

//  Parse the names back; return 0 or -1.
int sched_job_status_parse (const char *name, sched_job_status_t *status);
int sched_cell_status_parse (const char *name, sched_cell_status_t *status);

//  True for the final job statuses / final cell statuses.
bool sched_job_status_final (sched_job_status_t status);
bool sched_cell_status_final (sched_cell_status_t status);

//  True for a final cell status that is a failure of that node: failed,
//  timeout, lost, interrupted, offline, drained, unsupported (what the
//  summary and job.progress count; a cancel or a skip is not).
bool sched_cell_status_failed (sched_cell_status_t status);

#endif
