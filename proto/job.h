/*  =========================================================================
    job - the job spec: tasks, phases, jobs; validation; wire and YAML forms

    A job is a target, a list of top-level phases and a few controls. A
    phase is a leaf (one task: backend, action, params) or a branch (a
    `tasks:` list of leaves, run per node as a pipeline). Depth is at most 2.
    Leaves are numbered depth-first ("steps"): [leaf, branch[leaf, leaf],
    leaf] gives steps 0, 1, 2, 3.

    Wire form (msgpack map; a YAML job file has the same shape):
        job   = { target: TARGET, tasks: [PHASE, ...], ?strategy: STR,
                  ?timeout: DURATION, ?priority: INT, ?idempotency_key: STR,
                  ?dead_letter: BOOL, ?lease_ms: INT,
                  ?limits: {LIMIT_PATTERN: INT}, ?stall_timeout: DURATION,
                  ?notify: [NOTIFY, ...] }
        NOTIFY = { url: STR, ?on: [ON, ...] }   (a job file may write
                  just the URL); ON = "completed" | "partial_failure" |
                  "failed" | "cancelled" | "timeout" (a job ended by its
                  own timeout); no `on`: every end (docs/NOTIFY.md)
        LIMIT_PATTERN = "backend.action", either part a name or "*"
                  ("apt.install", "rke2.*", "*.*")
        TARGET = { scope: "all"|"group"|"node"|"label", ?value: STR,
                   ?any: BOOL }
        PHASE = leaf | branch
        leaf  = { backend: NAME, action: NAME, ?params: {NAME: SCALAR},
                  ?timeout: DURATION, ?max_retries: INT, ?condition: COND,
                  ?stall_timeout: DURATION, ?name: NAME,
                  ?needs: [NAME, ...], ?barrier: BOOL }
        branch = { tasks: [leaf, ...], ?condition: COND, ?name: NAME,
                   ?needs: [NAME, ...], ?barrier: BOOL }
        COND  = "always" | "on_success" | "on_failure"
        AMOUNT = INT | "N%"      (batch, max_failures: a count or a percent)
    The job map may also carry ?batch: AMOUNT, ?max_failures: AMOUNT and
    ?canary: INT (rolling batches, docs/SCHEDULING.md).

    A job where some task has `needs` is a graph ("DAG job"): a top-level
    task needs top-level tasks; a task inside a pipeline needs tasks of
    the same pipeline; a pipeline whose tasks have no `needs` runs them in
    order. Names are unique in the whole job; `barrier` is for top-level
    tasks only. Unknown needs, cycles and needs across a pipeline
    boundary are errors that name the tasks involved.
    Param values may be strings, integers or booleans; they are kept as
    strings ("80", "true"). Durations are strings like "500ms", "10s",
    "30m" (see names.h). A job file may also write its target as a string
    ("group:web").

    Errors name the offending path: "tasks[1].tasks[0].params.package:
    required", "tasks[0]: a phase has either backend/action or tasks, not
    both", "strategy: unknown strategy 'sometimes' (fail-fast, continue)".

    Threading: reentrant; a job_spec_t belongs to one thread at a time.
    =========================================================================
*/
#ifndef GRID_JOB_H
#define GRID_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "pv.h"
#include "pw.h"

#define JOB_MAX_PHASES 256        //  Most top-level phases
#define JOB_MAX_STEPS 1024        //  Most leaves in one job
#define JOB_MAX_PARAMS 64         //  Most params in one task
#define JOB_MAX_PARAM_LEN 4096    //  Longest param value in bytes
#define JOB_MAX_RETRIES 10        //  Largest max_retries
#define JOB_MAX_ERRORS 32         //  Validation stops collecting after this
#define JOB_MIN_LEASE_MS 100      //  Shortest any-node lease
#define JOB_MAX_LEASE_MS 86400000 //  Longest any-node lease (1 day)
#define JOB_MAX_LIMITS 32         //  Most concurrency limits (a job's, the broker's)
#define JOB_MAX_LIMIT 1000000     //  Largest concurrency limit
#define JOB_MAX_NEEDS 64          //  Most needs on one task
#define JOB_MAX_BATCH 100000      //  Largest batch, max_failures or canary count
#define JOB_MAX_NOTIFY 4          //  Most webhooks in one job's notify
#define JOB_NOTIFY_URL_MAX 2048   //  Longest webhook URL in bytes

//  The job ends a webhook is sent for (job_notify_t.on): bits
#define JOB_NOTIFY_COMPLETED 0x01u
#define JOB_NOTIFY_PARTIAL_FAILURE 0x02u
#define JOB_NOTIFY_FAILED 0x04u
#define JOB_NOTIFY_CANCELLED 0x08u
#define JOB_NOTIFY_TIMEOUT 0x10u       //  Ended by its job timeout
#define JOB_NOTIFY_ALL 0x1fu

typedef enum {
    JOB_COND_ALWAYS = 0,
    JOB_COND_ON_SUCCESS,
    JOB_COND_ON_FAILURE
} job_condition_t;

typedef enum {
    JOB_STRATEGY_FAIL_FAST = 0,
    JOB_STRATEGY_CONTINUE
} job_strategy_t;

//  The msgpack type a param was submitted as: an action reads its text,
//  but the spec keeps the type so that a 30 comes back as 30, not "30".
typedef enum {
    JOB_PARAM_STR = 0,
    JOB_PARAM_INT,
    JOB_PARAM_BOOL
} job_param_kind_t;

typedef struct {
    char *name;               //  Parameter name (a valid name)
    char *value;              //  Its value as text
    job_param_kind_t kind;    //  What it was submitted as
} job_param_t;

typedef struct job_phase_s job_phase_t;
struct job_phase_s {
    char *backend;            //  Leaf: backend name; NULL for a branch
    char *action;             //  Leaf: action name; NULL for a branch
    job_param_t *params;      //  Leaf: params, sorted by name
    size_t param_count;       //  Leaf: how many params
    int64_t timeout_ms;       //  Leaf: task timeout, 0 = the broker's default
    int max_retries;          //  Leaf: extra attempts after a failure
    int64_t stall_timeout_ms; //  Leaf: silence that counts as a timeout, 0 = the job's
    job_condition_t condition;  //  When this phase runs
    job_phase_t *tasks;       //  Branch: its leaves (NULL for a leaf)
    size_t task_count;        //  Branch: how many leaves (>= 1)
    char *name;               //  Optional task name (unique in the job)
    char **needs;             //  Names of the tasks it needs (same level)
    size_t need_count;        //  How many
    bool barrier;             //  Top level: wait for its needs on every node
};

//  A concurrency limit: at most MAX cells whose backend.action matches
//  PATTERN run at once, across the fleet or (PER_NODE) on each node.
typedef struct {
    char *pattern;            //  "backend.action", either part may be "*"
    uint32_t max;             //  1..JOB_MAX_LIMIT
    bool per_node;            //  Per node, else fleet-wide
} job_limit_t;

//  A count of nodes, or a percent of the job's nodes (batch, max_failures).
typedef struct {
    bool set;                 //  Given in the spec
    bool percent;             //  VALUE is a percent (1..100)
    uint32_t value;           //  The count, or the percent
} job_amount_t;

//  A webhook a job names: where to POST its summary, and on which ends.
typedef struct {
    char *url;                //  http:// or https:// (job_notify_url_check)
    uint32_t on;              //  JOB_NOTIFY_* bits; JOB_NOTIFY_ALL by default
} job_notify_t;

typedef struct {
    target_t target;          //  Which nodes
    job_phase_t *phases;      //  Top-level phases
    size_t phase_count;       //  How many
    job_strategy_t strategy;  //  fail-fast (default) or continue
    int64_t timeout_ms;       //  Whole-job timeout, 0 = none
    int priority;             //  Higher runs first; default 0, range -100..100
    char *idempotency_key;    //  Optional, a client's key for exactly-once submit
    bool dead_letter;         //  Cells that end failed go to the dead-letter
                              //  queue; default: on for `any` targets only
    int64_t lease_ms;         //  Any-node lease, 0 = the broker's default
    job_limit_t *limits;      //  Lower concurrency limits for its own cells
    size_t limit_count;       //  How many
    int64_t stall_timeout_ms; //  Silence of a running task that counts as a timeout, 0 = none
    job_amount_t batch;       //  Rolling batches: nodes per batch
    job_amount_t max_failures;  //  Failure budget: failed nodes allowed
    uint32_t canary;          //  Nodes in the first batch, 0 = as batch says
    job_notify_t *notify;     //  Webhooks told of the job's end (owned)
    size_t notify_count;      //  How many (at most JOB_MAX_NOTIFY)
    bool check;               //  A dry run (job.submit's check): each command
                              //  asks for its action's check. Not part of
                              //  the wire form; the stored form holds it
                              //  (job_spec_encode_stored); job_spec_dup
                              //  copies it
} job_spec_t;

//  The order of a DAG job, per step: what each step waits for on its node.
typedef struct {
    size_t *needs;            //  Steps that must be final first (owned)
    size_t need_count;        //  How many
    bool barrier;             //  ...final on every node of the job (or batch)
} job_step_needs_t;

typedef struct {
    job_step_needs_t *steps;  //  One per step (owned)
    size_t step_count;        //  How many
    size_t *order;            //  Every step once, each after its needs (owned)
} job_graph_t;

//  A problem found while reading or validating a spec.
typedef struct {
    char *items[JOB_MAX_ERRORS];  //  "path: reason" sentences (owned)
    size_t count;                 //  How many
    bool truncated;               //  More problems than JOB_MAX_ERRORS
} job_errors_t;

//  Frees the sentences of ERRORS and zeroes it.
void job_errors_clear (job_errors_t *errors);

//  Builds a spec from a decoded value (the wire form or a YAML job file),
//  checking shape, types, names, conditions, strategy, durations, depth and
//  bounds; it reports every problem it finds, each with its path. Returns 0
//  and a new spec in *SPEC_P, or -1 with ERRORS filled.
int job_spec_decode (const pv_t *value, job_spec_t **spec_p,
                     job_errors_t *errors);

//  As job_spec_decode, for the form job_spec_encode_stored writes: it may
//  also say `check: true` (a dry run), which the wire form may not.
int job_spec_decode_stored (const pv_t *value, job_spec_t **spec_p,
                            job_errors_t *errors);

//  Reads a YAML job file (through conf) and decodes it. Returns 0, or -1
//  with ERRORS filled (a YAML syntax error is one item with line and column).
int job_spec_load_file (const char *path, job_spec_t **spec_p,
                        job_errors_t *errors);

//  Writes SPEC in the wire form (durations as text, target as a map).
void job_spec_encode (const job_spec_t *spec, pw_t *writer);

//  Writes SPEC as job_spec_encode does, but every param as a string: the
//  form an idempotency digest is taken of, the same as before params kept
//  their type, so a key stored by an older broker still matches.
void job_spec_encode_digest (const job_spec_t *spec, pw_t *writer);

//  Checks a webhook URL: http or https, a host, no user or password,
//  at most JOB_NOTIFY_URL_MAX bytes of printable ASCII without spaces.
//  Returns 0, or -1 with a sentence in WHY.
int job_notify_url_check (const char *url, char *why, size_t why_len);

//  The JOB_NOTIFY_* bit named NAME ("failed"), or 0 when none is.
uint32_t job_notify_on_bit (const char *name);

//  The name of one JOB_NOTIFY_* bit, or NULL.
const char *job_notify_on_name (uint32_t bit);

//  Reads a list of ON names (an array of strings) into *ON_P. Returns 0,
//  or -1 with a sentence in WHY naming the bad entry.
int job_notify_on_read (const pv_t *value, uint32_t *on_p, char *why,
                        size_t why_len);

//  Writes SPEC as job_spec_encode does, without its notify: the form a
//  store keeps in a job's header, which an older release reads (the
//  webhooks are kept apart: job_notify_encode). A dry run's spec says
//  `check: true`, which a release before dry runs refuses: it never
//  restores such a job, so never runs its actions for real.
void job_spec_encode_stored (const job_spec_t *spec, pw_t *writer);

//  Writes SPEC's webhooks as its `notify` value ([{url, ?on}...]), and
//  reads such a value into SPEC (replacing its webhooks). Returns 0, or
//  -1 when VALUE is not one.
void job_notify_encode (const job_spec_t *spec, pw_t *writer);
int job_notify_decode (const pv_t *value, job_spec_t *spec);

//  Writes TARGET in the wire form: {scope, ?value, ?any}.
void job_target_encode (const target_t *target, pw_t *writer);

//  A deep copy of SPEC (through its wire form), or NULL.
job_spec_t *job_spec_dup (const job_spec_t *spec);

//  Frees a spec; NULL-safe, nulls *spec_p.
void job_spec_destroy (job_spec_t **spec_p);

//  Number of leaves (steps) in SPEC.
size_t job_spec_step_count (const job_spec_t *spec);

//  Where step STEP sits: its leaf, its top-level phase index and, for a leaf
//  inside a branch, its index in the branch (else -1). Returns the leaf or
//  NULL when STEP is out of range. The leaf is borrowed from SPEC.
const job_phase_t *job_spec_step (const job_spec_t *spec, size_t step,
                                  size_t *phase_index, int *sub_index);

//  The first step number of top-level phase PHASE_INDEX.
size_t job_spec_phase_first_step (const job_spec_t *spec, size_t phase_index);

//  True when some task of SPEC has `needs`: the job is walked as a graph.
bool job_spec_is_dag (const job_spec_t *spec);

//  The step graph of a DAG job: for each step the steps it needs (a
//  top-level task needing a pipeline needs every step of it; a pipeline
//  without inner needs is a chain; a pipeline's outer needs go to its
//  first steps), and a topological order that takes the lowest ready step
//  first. Returns NULL for a spec that is not a valid DAG job.
job_graph_t *job_graph_new (const job_spec_t *spec);

//  Frees a graph; NULL-safe, nulls *graph_p.
void job_graph_destroy (job_graph_t **graph_p);

//  The name of the task at STEP, or NULL when it has none. Borrowed.
const char *job_spec_step_name (const job_spec_t *spec, size_t step);

//  Nodes an AMOUNT stands for out of NODES: a count as is (at most NODES),
//  a percent rounded up and at least 1.
size_t job_amount_nodes (const job_amount_t *amount, size_t nodes);

//  Writes AMOUNT as text ("10", "25%") into TEXT.
void job_amount_format (const job_amount_t *amount, char *text, size_t size);

//  Parses "10" or "25%" (a percent 1..100, a count 0..JOB_MAX_BATCH, or
//  1.. when MIN_ONE). Returns 0, or -1.
int job_amount_parse (const char *text, bool min_one, job_amount_t *amount);

//  Value of param NAME of LEAF, or NULL.
const char *job_phase_param (const job_phase_t *leaf, const char *name);

//  Is PATTERN a limit pattern ("backend.action", each part a name or "*")?
bool job_limit_pattern_valid (const char *pattern);

//  Does the limit PATTERN cover BACKEND/ACTION?
bool job_limit_matches (const char *pattern, const char *backend,
                        const char *action);

//  Reads a map {PATTERN: INT} into *LIMITS_P / *COUNT_P (appended;
//  entries get PER_NODE), passing over the key SKIP (may be NULL).
//  Returns 0, or -1 with a sentence in WHY naming the key (the caller
//  says where the map is). Shared by job specs and the broker's config.
int job_limits_read (const pv_t *map, bool per_node,
                     const char *skip, job_limit_t **limits_p,
                     size_t *count_p, char *why, size_t why_len);

//  Frees COUNT limits and the array.
void job_limits_free (job_limit_t *limits, size_t count);

//  "always", "on_success", "on_failure"; "fail-fast", "continue".
const char *job_condition_name (job_condition_t condition);
const char *job_strategy_name (job_strategy_t strategy);

#endif
