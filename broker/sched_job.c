/*  =========================================================================
    sched_job - job, cell and attempt state: status names, job records,
    status changes and their counters, attempts, the end of a job, and
    the agent events that move a cell (ack, started, progress, result)

    Part of the scheduler (sched.h); shares its private state through
    sched_int.h. No socket, no store, no clock.
    =========================================================================
*/
#include "sched_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
bool
sched_in_flight (sched_cell_status_t status)
{
    return status == SCHED_CELL_DISPATCHED
           || status == SCHED_CELL_ACKNOWLEDGED
           || status == SCHED_CELL_RUNNING;
}

//  A final status that counts as a failure for conditions and strategies
//  (R6, R7). An agent-reported cancel of a live cell counts too: the node
//  did not do its work.
bool
sched_is_failure (sched_cell_status_t status)
{
    return status == SCHED_CELL_FAILED || status == SCHED_CELL_TIMEOUT
           || status == SCHED_CELL_LOST || status == SCHED_CELL_INTERRUPTED
           || status == SCHED_CELL_OFFLINE || status == SCHED_CELL_CANCELLED;
}

//  The node can no longer be reached for this job.
bool
sched_is_unreachable (sched_cell_status_t status)
{
    return status == SCHED_CELL_LOST || status == SCHED_CELL_OFFLINE;
}

bool
sched_condition_met (job_condition_t condition, bool failed)
{
    if (condition == JOB_COND_ON_SUCCESS)
        return !failed;
    if (condition == JOB_COND_ON_FAILURE)
        return failed;
    return true;
}

//  ---------------------------------------------------------------------
//  Job records

sched_job_t *
sched_job_new (const char *id, job_spec_t **spec_p)
{
    if (!id || !spec_p || !*spec_p || strlen (id) > JOB_ID_LEN)
        return NULL;
    sched_job_t *job = (sched_job_t *) sched_alloc (sizeof (sched_job_t));
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

void
sched_cells_free (sched_job_t *job)
{
    size_t count = job->cells ? job->step_count * job->expected_count : 0;
    for (size_t index = 0; index < count; index++)
        sched_cell_clear (&job->cells [index]);
    free (job->cells);
    job->cells = NULL;
}

void
sched_expected_free (sched_job_t *job)
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

void
sched_not_run_clear (sched_job_t *job)
{
    sched_not_run_free (job->not_run, job->not_run_count);
    job->not_run = NULL;
    job->not_run_count = 0;
}

int
sched_compare_not_run (const void *a, const void *b)
{
    return strcmp (((const sched_not_run_t *) a)->node,
                   ((const sched_not_run_t *) b)->node);
}

//  The not-run entry of NODE in JOB's sorted list, or NULL.
const sched_not_run_t *
sched_not_run_find (const sched_job_t *job, const char *node)
{
    if (!job->not_run_count)
        return NULL;
    sched_not_run_t key;
    memset (&key, 0, sizeof key);
    key.node = (char *) node;
    return (const sched_not_run_t *) bsearch (
        &key, job->not_run, job->not_run_count, sizeof (sched_not_run_t),
        sched_compare_not_run);
}

//  "web-07 offline since 12:01:07, web-09 drained" for the entries of
//  JOB's not-run list whose `named` is NAMED, at most 3 then "and N
//  more". A new string.
char *
sched_not_run_text (const sched_job_t *job, bool named)
{
    char *text = sched_strdup ("");
    size_t shown = 0, total = 0;
    for (size_t index = 0; index < job->not_run_count; index++) {
        const sched_not_run_t *entry = &job->not_run [index];
        if (entry->named != named)
            continue;
        if (total++ >= 3)
            continue;
        char *longer = sched_printf ("%s%s%s %s", text, shown ? ", " : "",
                                 entry->node, entry->reason ? entry->reason
                                                            : "not run");
        free (text);
        text = longer;
        shown++;
    }
    if (total > shown) {
        char *longer = sched_printf ("%s and %zu more", text, total - shown);
        free (text);
        text = longer;
    }
    return text;
}

//  How many entries of JOB's not-run list have `named` NAMED.
size_t
sched_not_run_count (const sched_job_t *job, bool named)
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
    sched_cells_free (job);
    sched_expected_free (job);
    sched_not_run_clear (job);
    job_spec_destroy (&job->spec);
    free (job->reason);
    free (job->retry_of);
    for (size_t index = 0; index < job->retried_by_count; index++)
        free (job->retried_by [index]);
    free (job->retried_by);
    free (job->schedule);
    free (job->submitted_by);
    free (job);
}

//  Frees a priv whose job is gone once no deadline points at it.
void
sched_jobx_release (s_jobx_t *jobx)
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
void
sched_job_discard (sched_job_t *job)
{
    s_jobx_t *jobx = (s_jobx_t *) job->priv;
    job->priv = NULL;
    s_job_free (job);
    if (jobx) {
        jobx->job = NULL;
        sched_jobx_release (jobx);
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
s_jobx_t *
sched_jobx_new (sched_job_t *job)
{
    const job_spec_t *spec = job->spec;
    if (!spec || job_spec_step_count (spec) != job->step_count
        || (spec->phase_count > 0 && !spec->phases))
        return NULL;
    s_jobx_t *jobx = (s_jobx_t *) sched_alloc (sizeof (s_jobx_t));
    jobx->job = job;
    jobx->phase_count = spec->phase_count;
    jobx->phases
        = (s_phase_t *) sched_alloc (spec->phase_count * sizeof (s_phase_t));
    jobx->steps = (s_step_t *) sched_alloc (job->step_count * sizeof (s_step_t));
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
        sched_jobx_release (jobx);
        return NULL;
    }
    jobx->lease_ms = spec->lease_ms;
    jobx->barrier_done
        = (size_t *) sched_alloc (job->step_count * sizeof (size_t));
    jobx->batch_count = 1;
    jobx->budget = SIZE_MAX;
    jobx->step_final = (size_t *) sched_alloc (job->step_count * sizeof (size_t));
    jobx->phase_final
        = (size_t *) sched_alloc (spec->phase_count * sizeof (size_t));
    return jobx;
}

sched_cell_t *
sched_cell (sched_job_t *job, size_t step, size_t node)
{
    return &job->cells [step * job->expected_count + node];
}

int
sched_compare_ids (const void *a, const void *b)
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
        for (size_t slot = sched_hash (node) & mask; jobx->node_slots [slot];
             slot = (slot + 1) & mask) {
            size_t index = jobx->node_slots [slot] - 1;
            if (strcmp (job->expected [index], node) == 0)
                return (ssize_t) index;
        }
        return -1;
    }
    char *const *found = (char *const *) bsearch (
        &node, job->expected, job->expected_count, sizeof (char *),
        sched_compare_ids);
    return found ? found - job->expected : -1;
}

//  ---------------------------------------------------------------------
//  Cells

//  The moves a cell's status may make: one row per status it leaves,
//  naming the statuses it may go to. sched_cell_move is the only write of
//  a cell's status and checks its move against this table. Besides the
//  moves of the cell x event table at the top of sched.c:
//  - a restore (R16) reads a cell in flight again as dispatched, and an
//    open cell that was never sent (attempt 0) as pending;
//  - a reclaim (R19) puts an any-node cell in flight back to pending;
//  - a node that becomes unreachable, a failed condition, a stop or a
//    spent failure budget skip its open cells, those in flight too in a
//    DAG job, whose tasks run side by side.
//  A final status has no way out: the cells of a named node that could
//  not run (offline, drained, unsupported) keep their status and reason
//  even in a batch a spent failure budget never starts (R26).
#define S_TO(status) (1u << SCHED_CELL_##status)
//  The final statuses an open cell may end in
#define S_TO_ENDS                                                           \
    (S_TO (SUCCESS) | S_TO (FAILED) | S_TO (TIMEOUT) | S_TO (SKIPPED)       \
     | S_TO (LOST) | S_TO (CANCELLED) | S_TO (INTERRUPTED))
//  Where a cell in flight (dispatched, acknowledged, running) may go
#define S_TO_FLYING                                                         \
    (S_TO_ENDS | S_TO (RETRY_WAIT) | S_TO (PENDING) | S_TO (DISPATCHED))

static const uint32_t s_cell_moves [SCHED_CELL_RETRY_WAIT + 1] = {
    [SCHED_CELL_PENDING] = S_TO (PENDING) | S_TO (DISPATCHED)
                           | S_TO (SKIPPED) | S_TO (CANCELLED)
                           | S_TO (OFFLINE) | S_TO (DRAINED)
                           | S_TO (UNSUPPORTED),
    [SCHED_CELL_DISPATCHED] = S_TO_FLYING | S_TO (ACKNOWLEDGED)
                              | S_TO (RUNNING),
    [SCHED_CELL_ACKNOWLEDGED] = S_TO_FLYING | S_TO (RUNNING),
    [SCHED_CELL_RUNNING] = S_TO_FLYING,
    [SCHED_CELL_RETRY_WAIT] = S_TO (DISPATCHED) | S_TO (PENDING)
                              | S_TO (SKIPPED) | S_TO (LOST)
                              | S_TO (CANCELLED),
    [SCHED_CELL_SUCCESS] = 0,
    [SCHED_CELL_FAILED] = 0,
    [SCHED_CELL_TIMEOUT] = 0,
    [SCHED_CELL_SKIPPED] = 0,
    [SCHED_CELL_LOST] = 0,
    [SCHED_CELL_CANCELLED] = 0,
    [SCHED_CELL_INTERRUPTED] = 0,
    [SCHED_CELL_OFFLINE] = 0,
    [SCHED_CELL_DRAINED] = 0,
    [SCHED_CELL_UNSUPPORTED] = 0
};

bool
sched_cell_move_allowed (sched_cell_status_t from, sched_cell_status_t to)
{
    if ((unsigned) from > SCHED_CELL_RETRY_WAIT
        || (unsigned) to > SCHED_CELL_RETRY_WAIT)
        return false;
    return (s_cell_moves [from] & (1u << to)) != 0;
}

void
sched_cell_move (sched_cell_t *cell, sched_cell_status_t status)
{
#ifdef GRID_DEBUG
    //  Debug builds (make SANITIZE=1) stop at a move outside the table;
    //  a running broker never aborts over one (a damaged stored record
    //  could ask for it) and keeps the move, as it did before the table.
    assert (sched_cell_move_allowed (cell->status, status));
#endif
    cell->status = status;
}

//  The cell's progress is gone (a new attempt, or the end).
void
sched_progress_clear (sched_cell_t *cell)
{
    free (cell->progress_kind);
    free (cell->progress);
    cell->progress_kind = cell->progress = NULL;
    cell->percent = -1;
    cell->progress_ms = 0;
}

//  The cell no longer waits for a slot.
void
sched_waiting_clear (sched_t *self, sched_cell_t *cell)
{
    if (cell->waiting) {
        free (cell->waiting);
        cell->waiting = NULL;
        self->waiting_count--;
        if (cell->waiting_any)
            self->waiting_any_count--;
        cell->waiting_any = false;
    }
}

//  R15: job->step is the lowest step with a cell not yet final, which is
//  the lowest step some node still works on. Cells never leave a final
//  status, so the pointer only moves forward: O(1) amortised. The cells
//  of batches not started yet are open (R26): the step stays put until
//  the last batch starts, or a spent failure budget closes them all.
void
sched_step_update (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    if (jobx->ending)
        return;
    //  While a later batch may still start, its nodes' cells are not
    //  final: no step is done on every node yet (R26)
    if (jobx->batch_hi < job->expected_count && !jobx->budget_exceeded)
        return;
    size_t step = job->step;
    while (step < job->step_count
           && jobx->step_final [step] >= jobx->batch_hi)
        step++;
    if (step != job->step) {
        job->step = step;
        sched_save_job (self, job);
    }
}

//  Sets a cell's status, with a SAVE_CELL when SAVE; keeps the final
//  counters.
void
sched_cell_change (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
               sched_cell_status_t status, bool save)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, node);
    bool was_final = sched_cell_status_final (cell->status);
    if (cell->status != status)
        cell->since_ms = self->now_ms;
    if (status == SCHED_CELL_DISPATCHED)
        cell->dispatched_ms = self->now_ms;
    sched_cell_move (cell, status);
    //  The node's in-flight figure (loads, R17) follows the cell
    bool flying = sched_in_flight (status);
    if (flying != cell->counted && jobx->nodes) {
        s_node_t *entry = jobx->nodes [node];
        if (flying)
            entry->in_flight++;
        else {
            entry->in_flight--;
            self->wait_dirty = true;
        }
        sched_limits_count (self, jobx, step, entry, flying ? 1 : -1);
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
        sched_waiting_clear (self, cell);
        sched_progress_clear (cell);
    }
    if (save)
        sched_save_cell (self, job, step, node);
    if (!was_final && sched_cell_status_final (status))
        sched_step_update (self, jobx);
}

void
sched_cell_skip (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                 const char *why)
{
    sched_cell_t *cell = sched_cell (jobx->job, step, node);
    if (why && !cell->reason)
        cell->reason = sched_strdup (why);
    sched_cell_set (self, jobx, step, node, SCHED_CELL_SKIPPED);
}

//  Sets a cell's status (SAVE_CELL); keeps the final counters.
void
sched_cell_set (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
            sched_cell_status_t status)
{
    sched_cell_change (self, jobx, step, node, status, true);
}

//  Records a finished attempt on a cell (R11: every attempt is kept).
//  NODE names the node that ran it on any-node jobs (NULL otherwise).
void
sched_attempt_add (sched_cell_t *cell, const char *node,
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
    attempt->output = sched_strdup (output);
    attempt->error = sched_strdup (error);
    attempt->exit_code = exit_code;
    attempt->duration_ms = duration_ms;
    attempt->truncated = truncated;
    attempt->node = sched_strdup (node);
}

//  How long the current attempt of CELL has been running: from its
//  started until now, 0 when it never started (a cancel or a loss
//  records the time the step really ran).
int64_t
sched_ran_ms (const sched_t *self, const sched_cell_t *cell)
{
    if (cell->status != SCHED_CELL_RUNNING || cell->started_ms <= 0
        || self->now_ms < cell->started_ms)
        return 0;
    return self->now_ms - cell->started_ms;
}

static int s_result_status (const char *text, sched_cell_status_t *status,
                            bool *retryable);

int
sched_attempt_fill (sched_cell_t *cell, const proto_msg_t *result,
                    int64_t at_ms)
{
    if ((cell->status != SCHED_CELL_LOST
         && cell->status != SCHED_CELL_CANCELLED
         && cell->status != SCHED_CELL_TIMEOUT)
        || cell->attempt_count == 0)
        return SCHED_FILL_NONE;
    sched_attempt_t *attempt = &cell->attempts [cell->attempt_count - 1];
    sched_cell_status_t said;
    bool retryable;
    if (attempt->attempt != result->attempt || attempt->late
        || !result->status
        || s_result_status (result->status, &said, &retryable) != 0)
        return SCHED_FILL_NONE;
    if (said != attempt->status) {
        //  Another account than the verdict's: never mixed into it
        if (attempt->has_late)
            return SCHED_FILL_NONE;
        attempt->has_late = true;
        attempt->late_status = said;
        attempt->late_exit_code = result->exit_code;
        attempt->late_at_ms = at_ms;
        return SCHED_FILL_LATE;
    }
    //  Stored records keep a missing output as ""
    if ((attempt->output && *attempt->output) || attempt->exit_code >= 0
        || attempt->data_count
        || ((!result->output || !*result->output) && result->exit_code < 0
            && result->duration_ms == 0))
        return SCHED_FILL_NONE;
    free (attempt->output);
    attempt->output = sched_strdup (result->output ? result->output : "");
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
        attempt->error = sched_strdup (result->error);
    if (result->data_count) {
        attempt->data = (proto_kv_t *) sched_alloc (result->data_count
                                                * sizeof (proto_kv_t));
        for (size_t item = 0; item < result->data_count; item++) {
            attempt->data [item].key = sched_strdup (result->data [item].key);
            attempt->data [item].value = sched_strdup (result->data [item].value);
            attempt->data [item].number = result->data [item].number;
        }
        attempt->data_count = result->data_count;
    }
    return SCHED_FILL_OUTPUT;
}

//  The node an attempt of JOB on column NODE names: any-node jobs only.
const char *
sched_attempt_node (const s_jobx_t *jobx, size_t node)
{
    return jobx->any ? jobx->job->expected [node] : NULL;
}


//  Marks every non-final cell of NODE in steps FROM up to (not
//  including) TO skipped, with one event saying why. Returns how many.
size_t
sched_skip_node (sched_t *self, s_jobx_t *jobx, size_t node, size_t from,
             size_t to, const char *why)
{
    sched_job_t *job = jobx->job;
    size_t skipped = 0, first = 0;
    for (size_t step = from; step < to; step++) {
        sched_cell_status_t status = sched_cell (job, step, node)->status;
        if (sched_cell_status_final (status))
            continue;
        if (skipped++ == 0)
            first = step;
        sched_cell_skip (self, jobx, step, node, why);
        if (jobx->blocked)
            jobx->blocked [step * job->expected_count + node] = 1;
    }
    if (skipped == 1)
        sched_event (self, job, "skipped", node, first, sched_strdup (why));
    else
    if (skipped > 1)
        sched_event (self, job, "skipped", node, first,
                 sched_printf ("%zu steps skipped: %s", skipped, why));
    return skipped;
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
void
sched_cell_failed (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
               sched_cell_status_t status, bool retryable, char *detail)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, node);
    const job_phase_t *leaf = jobx->steps [step].leaf;
    uint32_t max_retries = leaf->max_retries > 0 ? (uint32_t) leaf->max_retries
                                                 : 0;
    if (retryable && cell->attempt <= max_retries) {
        int64_t backoff_ms = sched_backoff_ms (self, cell->attempt);
        cell->deadline_ms = self->now_ms + backoff_ms;
        sched_cell_set (self, jobx, step, node, SCHED_CELL_RETRY_WAIT);
        sched_due_push (self, jobx, S_DUE_RETRY, cell->deadline_ms, step, node);
        sched_event (self, job, s_outcome_event (status), node, step, detail);
        sched_event (self, job, "retried", node, step,
                 sched_printf ("attempt %" PRIu32 " of %" PRIu32
                           " in %" PRId64 "ms",
                           cell->attempt + 1, max_retries + 1, backoff_ms));
        return;
    }
    sched_cell_set (self, jobx, step, node, status);
    sched_event (self, job, s_outcome_event (status), node, step, detail);
    sched_node_failed (self, jobx, step, node, sched_is_unreachable (status));
    sched_cell_settled (self, jobx, step, node);
}

//  ---------------------------------------------------------------------
//  Job start and end

void
sched_running_add (sched_t *self, s_jobx_t *jobx)
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


//  Ends the job with STATUS and REASON (taken, may be NULL): SAVE_JOB,
//  EVENT finished, FINISHED (R15). The record stays readable until the
//  next mutating call.
void
sched_job_finish (sched_t *self, s_jobx_t *jobx, sched_job_status_t status,
              char *reason)
{
    sched_job_t *job = jobx->job;
    job->status = status;
    free (job->reason);
    job->reason = reason;
    jobx->finished = true;
    s_running_remove (self, jobx);
    if (jobx->queued)
        sched_queue_remove (self, jobx);
    sched_hash_remove (self, jobx);
    if (self->graveyard_count == self->graveyard_cap)
        self->graveyard = (sched_job_t **) sched_grow (
            self->graveyard, &self->graveyard_cap, sizeof (sched_job_t *));
    self->graveyard [self->graveyard_count++] = job;
    sched_save_job (self, job);
    sched_event (self, job, "finished", SIZE_MAX, job->step,
             reason ? sched_printf ("%s: %s", sched_job_status_name (status),
                                reason)
                    : sched_strdup (sched_job_status_name (status)));
    sched_action (self, SCHED_ACTION_FINISHED, job);
    sched_admit (self);
}

//  R13, R14: stops a running job: CANCEL to the nodes with work in
//  flight, every non-final cell reads cancelled, the job ends STATUS.
void
sched_job_abort (sched_t *self, s_jobx_t *jobx, sched_job_status_t status,
             const char *reason)
{
    sched_job_t *job = jobx->job;
    jobx->ending = true;
    size_t nodes = job->expected_count;
    bool *busy = (bool *) sched_alloc ((nodes ? nodes : 1) * sizeof (bool));
    size_t busy_count = 0;
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = 0; node < nodes; node++) {
            sched_cell_status_t cell_status = sched_cell (job, step, node)->status;
            if (!busy [node] && sched_in_flight (cell_status)) {
                busy [node] = true;
                busy_count++;
            }
        }
    if (busy_count > 0) {
        char **names
            = (char **) sched_keep (self, sched_alloc (busy_count * sizeof (char *)));
        size_t count = 0;
        for (size_t node = 0; node < nodes; node++)
            if (busy [node])
                names [count++] = job->expected [node];
        sched_action_t *action = sched_action (self, SCHED_ACTION_CANCEL, job);
        action->nodes = names;
        action->node_count = count;
    }
    free (busy);
    size_t cancelled = 0;
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = 0; node < nodes; node++) {
            sched_cell_t *cell = sched_cell (job, step, node);
            if (sched_cell_status_final (cell->status))
                continue;
            if (sched_in_flight (cell->status)) {
                sched_attempt_add (cell, sched_attempt_node (jobx, node),
                               SCHED_CELL_CANCELLED, NULL, reason, -1,
                               sched_ran_ms (self, cell), false);
                sched_event (self, job, "cancelled", node, step, sched_strdup (reason));
            }
            sched_cell_set (self, jobx, step, node, SCHED_CELL_CANCELLED);
            cancelled++;
        }
    sched_event (self, job, "cancelled", SIZE_MAX, job->step,
             sched_printf ("%s (%zu cell%s cancelled)", reason, cancelled,
                       cancelled == 1 ? "" : "s"));
    sched_job_finish (self, jobx, status, sched_strdup (reason));
}

//  ---------------------------------------------------------------------
//  Agent events (ack, started, progress, result)

//  R22: the stall timeout of STEP: the task's own, else the job's, else 0.
int64_t
sched_stall_ms (const s_jobx_t *jobx, size_t step)
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
    return s_find_in (sched_lookup (self, job_id), step, node, node_p);
}

//  Agent events for an attempt that is not the cell's current one, or a
//  cell never sent, are stale (-1); for the current attempt of a cell
//  that is past the state the event would bring, duplicates (1).
int
sched_on_ack (sched_t *self, const char *job_id, uint32_t step,
              uint32_t attempt, const char *node, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    size_t index;
    s_jobx_t *jobx = s_find (self, job_id, step, node, &index);
    if (!jobx)
        return -1;
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, index);
    if (attempt == 0 || attempt != cell->attempt)
        return -1;
    if (cell->status != SCHED_CELL_DISPATCHED)
        return 1;
    const job_phase_t *leaf = jobx->steps [step].leaf;
    int64_t timeout_ms = leaf->timeout_ms > 0 ? leaf->timeout_ms
                                              : self->config.default_timeout_ms;
    cell->deadline_ms = now_ms + timeout_ms + self->config.grace_ms;
    cell->renewed_ms = now_ms;
    sched_cell_set (self, jobx, step, index, SCHED_CELL_ACKNOWLEDGED);
    sched_due_push (self, jobx, S_DUE_RUN, cell->deadline_ms, step, index);
    sched_event (self, job, "acknowledged", index, step, NULL);
    return 0;
}

int
sched_on_started (sched_t *self, const char *job_id, uint32_t step,
                  uint32_t attempt, const char *node, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    size_t index;
    s_jobx_t *jobx = s_find (self, job_id, step, node, &index);
    if (!jobx)
        return -1;
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, index);
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
    sched_cell_set (self, jobx, step, index, SCHED_CELL_RUNNING);
    if (moved)
        sched_due_push (self, jobx, S_DUE_RUN, cell->deadline_ms, step, index);
    sched_event (self, job, "running", index, step, NULL);
    //  Stall clock (R22): from now, renewed by progress
    int64_t stall_ms = sched_stall_ms (jobx, step);
    if (stall_ms > 0) {
        cell->resends = 0;
        sched_due_push (self, jobx, S_DUE_STALL, now_ms + stall_ms, step, index);
    }
    return 0;
}

int
sched_on_progress (sched_t *self, const proto_msg_t *progress, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    if (!progress || progress->type != PROTO_PROGRESS)
        return -1;
    size_t index;
    s_jobx_t *jobx = s_find (self, progress->job, progress->step,
                             progress->node, &index);
    if (!jobx)
        return -1;
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, progress->step, index);
    if (progress->attempt == 0 || progress->attempt != cell->attempt
        || !sched_in_flight (cell->status))
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
    cell->progress_kind = sched_strdup (progress->kind);
    cell->progress = sched_strdup (progress->message);
    if (new_kind && progress->kind && spaced)
        sched_event (self, job, "progress", index, progress->step,
                 sched_excerpt (progress->kind, progress->message));
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
    sched_attempt_add (cell, result->node, status, result->output, result->error,
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
    sched_cell_t *cell = sched_cell (job, result->step, 0);
    int rc = sched_attempt_late (cell, result);
    if (rc != 0)
        return rc;
    self->counters.late_results++;
    sched_save_cell (self, job, result->step, 0);
    char *node = (char *) sched_keep (self, sched_strdup (result->node));
    sched_event_named (self, job, "late", node, result->step,
                   sched_printf ("late result of attempt %" PRIu32 " (%s) after "
                             "the step was reclaimed: kept in the history",
                             result->attempt, result->status));
    return 0;
}

int
sched_on_result (sched_t *self, const proto_msg_t *result, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    if (!result || result->type != PROTO_RESULT || !result->status
        || !result->node)
        return -1;
    s_jobx_t *owner = sched_lookup (self, result->job);
    if (owner && owner->any && owner->running && !owner->finished
        && result->step < owner->job->step_count) {
        const sched_cell_t *cell = sched_cell (owner->job, result->step, 0);
        if (strcmp (owner->job->expected [0], result->node) != 0
            || !sched_in_flight (cell->status)
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
    sched_cell_t *cell = sched_cell (job, step, index);
    if (result->attempt == 0 || result->attempt != cell->attempt)
        return -1;

    const char *text = result->status;
    sched_cell_status_t status;
    bool retryable = true;
    if (s_result_status (text, &status, &retryable) != 0)
        return -1;
    if (!sched_in_flight (cell->status)) {
        //  This attempt already has its outcome. When the broker decided
        //  it (lost, cancelled, timeout) the agent's late result still
        //  brings what the step printed, or, when it tells another story,
        //  is recorded beside the verdict, which stands
        int filled = sched_attempt_fill (cell, result, 0);
        if (filled != SCHED_FILL_NONE)
            sched_save_cell (self, job, step, index);
        if (filled == SCHED_FILL_LATE) {
            self->counters.late_results++;
            sched_event_named (self, job, "late", job->expected [index], step,
                               sched_printf ("late result: %s from %s",
                                             sched_cell_status_name (status),
                                             result->node));
        }
        return 1;
    }

    int64_t duration_ms = result->duration_ms > (uint64_t) INT64_MAX
                              ? INT64_MAX
                              : (int64_t) result->duration_ms;
    //  A restarted agent reports an interrupted step without knowing how
    //  long it ran: record the time since its started, as for a cancel
    //  or a loss (0 when it never started)
    if (status == SCHED_CELL_INTERRUPTED && duration_ms == 0)
        duration_ms = sched_ran_ms (self, cell);
    sched_attempt_add (cell, sched_attempt_node (jobx, index), status,
                   result->output, result->error,
                   result->exit_code, duration_ms, result->truncated);
    sched_attempt_t *added = &cell->attempts [cell->attempt_count - 1];
    added->output_size = result->output_size;
    added->error_size = result->error_size;
    added->output_dropped = result->output_dropped;
    added->error_dropped = result->error_dropped;
    if (result->data_count) {
        sched_attempt_t *attempt = &cell->attempts [cell->attempt_count - 1];
        attempt->data = (proto_kv_t *) sched_alloc (result->data_count
                                                * sizeof (proto_kv_t));
        for (size_t item = 0; item < result->data_count; item++) {
            attempt->data [item].key = sched_strdup (result->data [item].key);
            attempt->data [item].value = sched_strdup (result->data [item].value);
            attempt->data [item].number = result->data [item].number;
        }
        attempt->data_count = result->data_count;
    }
    if (status == SCHED_CELL_SUCCESS) {
        sched_cell_set (self, jobx, step, index, SCHED_CELL_SUCCESS);
        sched_event (self, job, "succeeded", index, step, NULL);
        sched_cell_settled (self, jobx, step, index);
        sched_wait_pass (self);
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
    sched_cell_failed (self, jobx, step, index, status, retryable,
                   sched_excerpt (prefix, result->error));
    sched_wait_pass (self);
    return 0;
}
