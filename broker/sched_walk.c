/*  =========================================================================
    sched_walk - the walk: rolling batches, dispatch, the phase and
    pipeline walker, DAG jobs, job start and admission, and the resume of
    a restored job

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
//  Members of a group, label or `all` that could not run belong to no
//  batch: they count from the start, in the first batch (FROM 0).
static void
s_batch_count_absent (s_jobx_t *jobx, size_t from)
{
    for (size_t node = from; node < jobx->batch_hi; node++)
        if ((jobx->node_flags [node] & S_NODE_ABSENT)
            && !(jobx->node_flags [node] & S_NODE_FAILED)) {
            jobx->node_flags [node] |= S_NODE_FAILED;
            jobx->failed_nodes++;
        }
    if (from == 0)
        jobx->failed_nodes += sched_not_run_count (jobx->job, false);
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
//  Dispatch

//  DISPATCH of STEP/ATTEMPT to one node on its own topic (pipelines,
//  retries, node lists and `any` targets), now.
void
sched_send_node (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
             uint32_t attempt)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, node);
    cell->attempt = attempt;
    cell->resends = 0;
    cell->started_ms = 0;
    cell->deadline_ms = self->now_ms + self->config.ack_timeout_ms;
    sched_progress_clear (cell);
    jobx->node_flags [node] |= S_NODE_TOOK_PART;
    sched_cell_set (self, jobx, step, node, SCHED_CELL_DISPATCHED);
    sched_due_push (self, jobx, S_DUE_ACK, cell->deadline_ms, step, node);
    sched_action_t *action = sched_action (self, SCHED_ACTION_DISPATCH, job);
    action->step = (uint32_t) step;
    action->attempt = attempt;
    action->node_count = 1;
    if (jobx->any) {
        //  R17, R18: a claim; the holder's lease starts now. The lane may
        //  move later in this call, so the action keeps its own name.
        char **names = (char **) sched_keep (self, sched_alloc (sizeof (char *)));
        names [0] = job->expected [node];
        action->nodes = names;
        s_node_t *holder = jobx->nodes [node];
        self->counters.claims++;
        holder->claims++;
        cell->claims++;
        cell->renewed_ms = self->now_ms;
        jobx->claimed = true;
        sched_due_push (self, jobx, S_DUE_LEASE, self->now_ms + jobx->lease_ms,
                    step, node);
    }
    else
        action->nodes = &job->expected [node];
    sched_event (self, job, "dispatched", node, step,
             attempt > 1 ? sched_printf ("attempt %" PRIu32, attempt) : NULL);
}

//  DISPATCH of STEP/ATTEMPT to one node, or a wait when no node is free
//  to take an any-node step (R17) or a limit is full (R21).
void
sched_dispatch_node (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
                 uint32_t attempt)
{
    sched_cell_t *cell = sched_cell (jobx->job, step, node);
    if (cell->waiting)
        return;                 //  Already waiting for its slot
    char *why = NULL, *key = NULL;
    if (sched_gated (jobx, step)
        && !sched_gate (self, jobx, step, node, &why, &key)) {
        sched_wait_add (self, jobx, step, node, attempt, key, why, false);
        free (key);
        return;
    }
    sched_send_node (self, jobx, step, node, attempt);
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
    char **names = (char **) sched_keep (self, sched_alloc (count * sizeof (char *)));
    int64_t deadline_ms = self->now_ms + self->config.ack_timeout_ms;
    bool limited = sched_step_limited (jobx, step);
    size_t sent = 0, waited = 0;
    char *first_why = NULL;
    for (size_t index = 0; index < count; index++) {
        size_t node = nodes [index];
        char *why = NULL, *key = NULL;
        if (limited && !sched_gate (self, jobx, step, node, &why, &key)) {
            if (!first_why)
                first_why = sched_strdup (why);
            sched_wait_add (self, jobx, step, node, 1, key, why, true);
            free (key);
            waited++;
            continue;
        }
        sched_cell_t *cell = sched_cell (job, step, node);
        cell->attempt = 1;
        cell->resends = 0;
        cell->started_ms = 0;
        cell->deadline_ms = deadline_ms;
        jobx->node_flags [node] |= S_NODE_TOOK_PART;
        sched_cell_change (self, jobx, step, node, SCHED_CELL_DISPATCHED,
                       sent == 0 || jobx->graph);
        sched_due_push (self, jobx, S_DUE_ACK, deadline_ms, step, node);
        names [sent++] = job->expected [node];
    }
    if (sent > 0) {
        const target_t *target = &job->spec->target;
        char *topic = NULL;
        if (!target->any && target->scope != TARGET_NODE)
            topic = (char *) target_topic (target);
        sched_action_t *action = sched_action (self, SCHED_ACTION_DISPATCH, job);
        action->step = (uint32_t) step;
        action->attempt = 1;
        action->topic = topic ? (char *) sched_keep (self, topic) : NULL;
        action->nodes = names;
        action->node_count = sent;
        sched_event (self, job, "dispatched", SIZE_MAX, step,
                 sched_printf ("to %zu node%s", sent, sent == 1 ? "" : "s"));
    }
    if (waited > 0)
        sched_event (self, job, "waiting", SIZE_MAX, step,
                 sched_printf ("%zu node%s: %s", waited, waited == 1 ? "" : "s",
                           first_why));
    free (first_why);
}

//  R9, R16: the same attempt again, straight to the node.
void
sched_resend (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
          char *detail)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, node);
    cell->deadline_ms = self->now_ms + self->config.ack_timeout_ms;
    sched_due_push (self, jobx, S_DUE_ACK, cell->deadline_ms, step, node);
    sched_action_t *action = sched_action (self, SCHED_ACTION_RESEND, job);
    action->step = (uint32_t) step;
    action->attempt = cell->attempt;
    action->node = job->expected [node];
    sched_event (self, job, "dispatched", node, step, detail);
}

//  CANCEL to a single node of the current attempt of its cell (STEP,
//  NODE) only: the job's other work there goes on. WHY is the reason.
void
sched_cancel_node (sched_t *self, sched_job_t *job, size_t node, size_t step,
                   const char *why)
{
    sched_action_t *action = sched_action (self, SCHED_ACTION_CANCEL, job);
    action->nodes = &job->expected [node];
    action->node_count = 1;
    action->step = (uint32_t) step;
    action->attempt = sched_cell (job, step, node)->attempt;
    action->detail = why ? (const char *) sched_keep (self, sched_strdup (why))
                         : NULL;
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
        sched_cell_status_t status = sched_cell (job, step, node)->status;
        if (sched_cell_status_final (status))
            continue;
        if (status != SCHED_CELL_PENDING)
            return;             //  Already under way
        bool pipe_failed = (flags & S_NODE_PIPE_FAILED) != 0;
        bool node_failed = jobx->failed_before_phase || pipe_failed;
        bool stopped = pipe_failed || jobx->pipe_stop_all;
        job_condition_t condition = jobx->steps [step].leaf->condition;
        bool run = stopped ? condition == JOB_COND_ON_FAILURE && node_failed
                           : sched_condition_met (condition, node_failed);
        if (run) {
            sched_dispatch_node (self, jobx, step, node, 1);
            return;
        }
        char *why = stopped && sched_condition_met (condition, node_failed)
                        ? sched_strdup ("pipeline stopped after a failure")
                        : sched_printf ("condition %s not met",
                                        job_condition_name (condition));
        sched_cell_skip (self, jobx, step, node, why);
        sched_event (self, job, "skipped", node, step, why);
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
        why = sched_strdup ("fail-fast: an earlier step failed");
    else
    if (!sched_condition_met (phase->condition, jobx->any_failure))
        why = sched_printf ("condition %s not met",
                        job_condition_name (phase->condition));
    if (why) {
        for (size_t sub = 0; sub < phase->count; sub++) {
            size_t step = phase->first + sub, skipped = 0;
            for (size_t node = jobx->batch_lo; node < jobx->batch_hi;
                 node++) {
                sched_cell_t *cell = sched_cell (job, step, node);
                if (!sched_cell_status_final (cell->status)) {
                    sched_cell_skip (self, jobx, step, node, why);
                    skipped++;
                }
            }
            if (skipped > 0)
                sched_event (self, job, "skipped", SIZE_MAX, step,
                         sched_printf ("%zu node%s: %s", skipped,
                                   skipped == 1 ? "" : "s", why));
        }
        free (why);
        return;
    }
    //  Participants: every node still in the job; once fail-fast fired
    //  (a rollback phase), those of them that took part.
    size_t *nodes = (size_t *) sched_alloc (
        (job->expected_count ? job->expected_count : 1) * sizeof (size_t));
    size_t count = 0;
    for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++) {
        uint8_t flags = jobx->node_flags [node];
        if (!(flags & S_NODE_DROPPED)
            && (!fail_fast || (flags & S_NODE_TOOK_PART)))
            nodes [count++] = node;
        else
            sched_skip_node (self, jobx, node, phase->first,
                         phase->first + phase->count,
                         flags & S_NODE_DROPPED
                             ? "node dropped after a failure"
                             : "node took no part before the failure");
    }
    if (!phase->branch) {
        if (count > 0 && jobx->any)
            sched_dispatch_node (self, jobx, phase->first, nodes [0], 1);
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
    return (const char *) sched_keep (self, sched_printf ("step %zu (%s %s)", step,
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
    return sched_is_failure (status)
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
        *why = sched_keep (self, sched_printf ("needs %s, which failed",
                                       s_step_label (self, jobx, bad_step)));
        return S_DAG_BLOCK;
    }
    if (skipped && condition != JOB_COND_ALWAYS) {
        *why = sched_keep (self, sched_printf ("needs %s, which was skipped",
                                       s_step_label (self, jobx,
                                                     skipped_step)));
        return S_DAG_SKIP;
    }
    if (!sched_condition_met (condition, any_bad)) {
        *why = sched_keep (self, sched_printf ("condition %s not met",
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
    sched_cell_skip (self, jobx, step, node, why);
    jobx->blocked [step * job->expected_count + node] = block ? 1 : 0;
    sched_event (self, job, "skipped", node, step, sched_strdup (why));
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
        const sched_cell_t *cell = sched_cell (job, step, node);
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
            sched_dispatch_node (self, jobx, step, node, 1);
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
        size_t *nodes = (size_t *) sched_alloc (
            (jobx->batch_hi - jobx->batch_lo) * sizeof (size_t));
        size_t count = 0;
        for (size_t node = jobx->batch_lo; node < jobx->batch_hi; node++) {
            const sched_cell_t *cell = sched_cell (job, step, node);
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
            sched_dispatch_node (self, jobx, step, nodes [0], 1);   //  R17
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
        char *why = sched_printf ("not started: failure budget %zu exceeded in "
                              "batch %zu", jobx->budget, jobx->batch + 1);
        //  A named node that could not run keeps its status and reason:
        //  only the nodes that could have run read skipped
        size_t untouched = 0;
        for (size_t node = jobx->batch_hi; node < job->expected_count;
             node++) {
            if (jobx->node_flags [node] & S_NODE_ABSENT)
                continue;
            for (size_t step = 0; step < job->step_count; step++) {
                sched_cell_skip (self, jobx, step, node, why);
                if (jobx->blocked)
                    jobx->blocked [step * job->expected_count + node] = 1;
            }
            untouched++;
        }
        //  The skipped nodes miss every step, from step 0
        if (untouched > 0)
            sched_event (self, job, "skipped", SIZE_MAX, 0,
                     sched_printf ("%zu node%s %s", untouched,
                               untouched == 1 ? "" : "s", why));
        free (why);
        //  Every cell is final now (R15)
        sched_step_update (self, jobx);
        return false;
    }
    size_t from = jobx->batch_hi;
    s_batch_set (jobx, jobx->batch + 1);
    s_batch_count_absent (jobx, from);
    //  Cells of the new batch that are final already count from now on
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = from; node < jobx->batch_hi; node++)
            if (sched_cell_status_final (sched_cell (job, step, node)->status)) {
                jobx->step_final [step]++;
                jobx->phase_final [jobx->steps [step].phase]++;
                jobx->final_total++;
            }
    sched_step_update (self, jobx);
    jobx->phase = 0;
    jobx->phase_started = false;
    jobx->any_failure = false;
    jobx->failed_before_phase = false;
    jobx->pipe_stop_all = false;
    sched_save_job (self, job);
    sched_event (self, job, "batch", SIZE_MAX, job->step,
             sched_printf ("batch %zu/%zu: %zu node%s, from %s", jobx->batch + 1,
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
void
sched_node_failed (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
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
            sched_skip_node (self, jobx, node, 0, job->step_count,
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
        sched_skip_node (self, jobx, node, 0, job->step_count,
                     "node unreachable");
    }
    else
    if (job->spec->strategy == JOB_STRATEGY_CONTINUE) {
        jobx->node_flags [node] |= S_NODE_DROPPED;
        size_t next = jobx->phase + 1 < jobx->phase_count
                          ? jobx->phases [jobx->phase + 1].first
                          : job->step_count;
        sched_skip_node (self, jobx, node, next, job->step_count,
                     "node dropped after a failure");
    }
    if (job->spec->strategy == JOB_STRATEGY_FAIL_FAST && in_phase
        && jobx->phases [jobx->phase].branch && !jobx->failed_before_phase)
        jobx->pipe_stop_all = true;
}

//  After a cell of NODE at STEP became final: a pipeline node moves on at
//  once (R5), then the walker checks the phase.
static void s_dag_pump_node (sched_t *self, s_jobx_t *jobx, size_t node);

void
sched_cell_settled (sched_t *self, s_jobx_t *jobx, size_t step, size_t node)
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

//  ---------------------------------------------------------------------
//  The verdict (R8, R24)

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
    bool *pipe_failed = (bool *) sched_alloc (nodes * sizeof (bool));
    bool failed_before = false;
    for (size_t p = 0; p < jobx->phase_count; p++) {
        const s_phase_t *phase = &jobx->phases [p];
        //  An offline cell is written on the next step a waiting node was
        //  due to run, in a phase not started yet: that failure came
        //  before the phase
        for (size_t step = phase->first;
             step < phase->first + phase->count && !failed_before; step++)
            for (size_t node = lo; node < hi; node++)
                if (sched_cell (job, step, node)->status == SCHED_CELL_OFFLINE
                    && !(jobx->node_flags [node] & S_NODE_ABSENT)) {
                    failed_before = true;
                    break;
                }
        bool phase_due = sched_condition_met (phase->condition, failed_before);
        bool failed_here = false;
        memset (pipe_failed, 0, nodes * sizeof (bool));
        for (size_t sub = 0; sub < phase->count; sub++) {
            size_t step = phase->first + sub;
            job_condition_t condition = jobx->steps [step].leaf->condition;
            for (size_t node = lo; node < hi; node++) {
                sched_cell_status_t status = sched_cell (job, step, node)->status;
                bool absent = (jobx->node_flags [node] & S_NODE_ABSENT) != 0;
                bool fine;
                if (status == SCHED_CELL_SUCCESS)
                    fine = true;
                else
                if (status == SCHED_CELL_SKIPPED)
                    fine = !phase_due
                           || (phase->branch
                               && !sched_condition_met (condition,
                                                    failed_before
                                                        || pipe_failed [node]));
                else {
                    fine = false;
                    if (sched_is_failure (status) && !absent) {
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
                && sched_is_failure (sched_cell (job, step, node)->status))
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
    size_t *first_bad = (size_t *) sched_alloc (nodes * sizeof (size_t));
    size_t *first_failure = (size_t *) sched_alloc (nodes * sizeof (size_t));
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
    //  Named nodes that could not run, in batches never started, are not
    //  run rather than not started: they keep their status (R26)
    size_t not_started = 0;
    for (size_t node = ran; node < nodes; node++)
        if (jobx->node_flags [node] & S_NODE_ABSENT) {
            bad++;
            absent++;
        }
        else
            not_started++;
    bool over_budget = jobx->failed_nodes > jobx->budget;
    if (bad == 0 && !over_budget) {
        sched_job_finish (self, jobx, SCHED_JOB_COMPLETED, NULL);
        return;
    }
    //  "1 of 3 nodes failed at step 0 (systemd restart); 2 skipped";
    //  "1 of 3 nodes not run: db-01 offline since 12:01:07"
    char *reason = sched_strdup ("");
    const char *plural = nodes == 1 ? "" : "s";
    if (failed > 0) {
        const job_phase_t *leaf = jobx->steps [lowest].leaf;
        char *text = sched_printf ("%zu of %zu node%s failed%s %zu (%s %s)",
                               failed, nodes, plural,
                               same_step ? " at step" : ", first at step",
                               lowest, leaf->backend, leaf->action);
        free (reason);
        reason = text;
    }
    if (skipped > 0) {
        char *text = *reason ? sched_printf ("%s; %zu skipped", reason, skipped)
                             : sched_printf ("%zu of %zu node%s skipped", skipped,
                                         nodes, plural);
        free (reason);
        reason = text;
    }
    if (absent > 0) {
        char *list = sched_not_run_text (job, true);
        char *text = *reason ? sched_printf ("%s; %zu not run: %s", reason,
                                         absent, list)
                             : sched_printf ("%zu of %zu node%s not run: %s",
                                         absent, nodes, plural, list);
        free (list);
        free (reason);
        reason = text;
    }
    size_t members = sched_not_run_count (job, false);
    if (over_budget && members > 0) {
        //  R26: members that could not run count in the budget too
        char *list = sched_not_run_text (job, false);
        char *text = *reason ? sched_printf ("%s; %zu member%s not run: %s",
                                         reason, members,
                                         members == 1 ? "" : "s", list)
                             : sched_printf ("%zu member%s not run: %s",
                                         members, members == 1 ? "" : "s",
                                         list);
        free (list);
        free (reason);
        reason = text;
    }
    if (over_budget) {
        //  R26: "2 nodes not started: failure budget 1 exceeded in batch 2"
        char *budget = not_started > 0
                           ? sched_printf ("%zu node%s not started: failure "
                                       "budget %zu exceeded in batch %zu",
                                       not_started,
                                       not_started == 1 ? "" : "s",
                                       jobx->budget, jobx->batch + 1)
                           : sched_printf ("failure budget %zu exceeded",
                                       jobx->budget);
        char *text = *reason ? sched_printf ("%s; %s", reason, budget)
                             : sched_strdup (budget);
        free (budget);
        free (reason);
        reason = text;
    }
    sched_job_finish (self, jobx,
                  bad == nodes || over_budget ? SCHED_JOB_FAILED
                                              : SCHED_JOB_PARTIAL_FAILURE,
                  reason);
}

//  ---------------------------------------------------------------------
//  Job start and admission

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
        qsort (ids, count, sizeof (char *), sched_compare_ids);
    kept = 0;
    for (size_t index = 0; index < count; index++)
        if (kept > 0 && strcmp (ids [kept - 1], ids [index]) == 0)
            free (ids [index]);
        else
            ids [kept++] = ids [index];
    count = kept;
    count = sched_not_run_apply (self, job, ids, count);
    if (target->any)
        //  One node takes the work: the others are not owed a row
        sched_not_run_clear (job);
    bool fresh_pick = false;
    if (count > 0 && target->any) {
        //  R17: one column, first held by the least loaded node with a
        //  free slot; with none free, by the least loaded (the step waits)
        ssize_t pick = sched_pick (self, ids, count, NULL, 0, true, NULL, NULL);
        fresh_pick = pick >= 0;
        if (pick < 0)
            pick = sched_pick (self, ids, count, NULL, 0, false, NULL, NULL);
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
    size_t named = sched_not_run_count (job, true);
    if (named > 0) {
        ids = (char **) realloc (ids, (count + named) * sizeof (char *));
        if (!ids) {
            fprintf (stderr, "sched: out of memory (expected)\n");
            abort ();
        }
        for (size_t index = 0; index < job->not_run_count; index++)
            if (job->not_run [index].named)
                ids [count++] = sched_strdup (job->not_run [index].node);
        qsort (ids, count, sizeof (char *), sched_compare_ids);
    }
    sched_running_add (self, jobx);
    job->status = SCHED_JOB_RUNNING;
    job->step = 0;
    if (count == 0) {
        free (ids);
        char *text = target_format (target);
        char *reason;
        if (job->not_run_count > 0) {
            char *list = sched_not_run_text (job, false);
            reason = sched_printf ("no node of %s can run it: %s",
                               text ? text : "the target", list);
            free (list);
        }
        else
            reason = sched_printf ("no online node matches %s",
                               text ? text : "the target");
        free (text);
        sched_job_finish (self, jobx, SCHED_JOB_FAILED, reason);
        return;
    }
    sched_cells_free (job);
    sched_expected_free (job);
    job->expected = ids;
    job->expected_count = count;
    job->cells = (sched_cell_t *) sched_alloc (job->step_count * count
                                           * sizeof (sched_cell_t));
    jobx->node_flags = (uint8_t *) sched_alloc (count);
    sched_nodes_bind (self, jobx);
    sched_limits_bind (self, jobx);
    jobx->any = target->any;
    jobx->fresh_pick = fresh_pick;
    if (jobx->graph)
        jobx->blocked = (uint8_t *) sched_alloc (job->step_count * count);
    jobx->batch_count = sched_job_batch_count (job);
    jobx->budget = sched_job_budget (job);
    s_batch_set (jobx, 0);
    if (job->spec->timeout_ms > 0) {
        jobx->job_deadline_ms = self->now_ms + job->spec->timeout_ms;
        sched_due_push (self, jobx, S_DUE_JOB, jobx->job_deadline_ms, 0, 0);
    }
    sched_save_job (self, job);
    size_t members = sched_not_run_count (job, false);
    char *list = members ? sched_not_run_text (job, false) : NULL;
    char *batches = jobx->batch_count > 1
                        ? sched_printf (" in %zu batches, the first of %zu",
                                    jobx->batch_count, jobx->batch_hi)
                        : sched_strdup ("");
    sched_event (self, job, "started", SIZE_MAX, 0,
             members ? sched_printf ("on %zu node%s%s; %zu not run: %s",
                                 count - named, count - named == 1 ? "" : "s",
                                 batches, members, list)
                     : sched_printf ("on %zu node%s%s", count - named,
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
            sched_cell (job, step, node)->reason = sched_strdup (entry->reason);
            sched_cell_set (self, jobx, step, node, entry->status);
        }
        sched_event (self, job, sched_cell_status_name (entry->status), node, 0,
                 sched_strdup (entry->reason));
    }
    s_batch_count_absent (jobx, 0);
    s_walk (self, jobx);
}

//  R1: starts queued jobs while there is room.
void
sched_admit (sched_t *self)
{
    if (self->admitting || self->paused)
        return;
    self->admitting = true;
    while (self->queue_size > 0
           && self->running_count < self->config.max_concurrent) {
        s_jobx_t *jobx = self->queue [0];
        sched_queue_remove (self, jobx);
        s_job_start (self, jobx);
    }
    self->admitting = false;
}

//  ---------------------------------------------------------------------
//  Resume after a restart (R16)

//  R16: the job timeout of a resumed job, then the walk.
static void
s_resume_end (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    if (job->spec->timeout_ms > 0) {
        //  The monotonic clock of the previous run is gone: the job's
        //  timeout starts again from the restore.
        jobx->job_deadline_ms = self->now_ms + job->spec->timeout_ms;
        sched_due_push (self, jobx, S_DUE_JOB, jobx->job_deadline_ms, 0, 0);
    }
    s_walk (self, jobx);
}

//  R16: a cell that was in flight when the broker stopped goes out again
//  as the same attempt (the agent dedupes it and re-sends a result it
//  already has), but its ack clock does not run yet: its node has not had
//  its chance to say hello again (its session died with the old broker).
//  Its first word starts the clock (sched_on_heartbeat); a node silent for
//  restore_wait_ms is taken for gone (s_due_fire).
static void
s_resend_restored (sched_t *self, s_jobx_t *jobx, size_t step, size_t node)
{
    sched_cell_t *cell = sched_cell (jobx->job, step, node);
    sched_resend (self, jobx, step, node,
                  sched_strdup ("re-sent after a broker restart"));
    //  The ACK deadline just pushed is stale; this one only ends the wait
    //  of a node that never comes back
    cell->deadline_ms = self->now_ms + self->config.restore_wait_ms;
    sched_due_push (self, jobx, S_DUE_ACK, cell->deadline_ms, step, node);
    cell->awaiting_node = true;
    if (jobx->nodes && jobx->nodes [node])
        jobx->nodes [node]->awaiting++;
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
            sched_cell_t *cell = sched_cell (job, step, node);
            if (!sched_cell_status_final (cell->status) && cell->attempt == 0)
                sched_cell_move (cell, SCHED_CELL_PENDING);  //  Never sent
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
            sched_skip_node (self, jobx, node, 0, job->step_count,
                         "node unreachable");
            continue;
        }
        for (size_t step = 0; step < job->step_count; step++) {
            sched_cell_t *cell = sched_cell (job, step, node);
            if (sched_in_flight (cell->status)) {
                cell->resends = 0;
                sched_cell_set (self, jobx, step, node, SCHED_CELL_DISPATCHED);
                s_resend_restored (self, jobx, step, node);
            }
            else
            if (cell->status == SCHED_CELL_RETRY_WAIT)
                sched_dispatch_node (self, jobx, step, node, cell->attempt + 1);
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
        sent = sched_cell (job, step, node)->attempt > 0;
    for (size_t node = jobx->batch_lo; node < jobx->batch_hi && sent;
         node++) {
        sched_cell_t *cell = sched_cell (job, step, node);
        if (cell->stored || cell->attempt > 0
            || cell->status != SCHED_CELL_PENDING
            || (jobx->node_flags [node] & S_NODE_ABSENT))
            continue;
        cell->attempt = 1;
        sched_cell_move (cell, SCHED_CELL_DISPATCHED);
        jobx->node_flags [node] |= S_NODE_TOOK_PART;
    }
}

//  R16: rebuilds the walker's state of a running job from its cells and
//  picks up where it stopped.
void
sched_resume (sched_t *self, s_jobx_t *jobx)
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
            const sched_cell_t *cell = sched_cell (job, step, node);
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
        jobx->blocked = (uint8_t *) sched_alloc (job->step_count * nodes);
    bool *failed = (bool *) sched_alloc (nodes * sizeof (bool));
    for (size_t step = 0; step < job->step_count; step++)
        for (size_t node = 0; node < nodes; node++) {
            sched_cell_t *cell = sched_cell (job, step, node);
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
            if (sched_is_failure (cell->status)) {
                if (node >= jobx->batch_lo && node < jobx->batch_hi)
                    jobx->any_failure = true;
                failed [node] = true;
                if (sched_is_unreachable (cell->status))
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
    sched_step_update (self, jobx);
    if (p < jobx->phase_count) {
        const s_phase_t *phase = &jobx->phases [p];
        bool started = false, failed_here = false;
        for (size_t step = 0; step < phase->first + phase->count; step++)
            for (size_t node = jobx->batch_lo; node < jobx->batch_hi;
                 node++) {
                const sched_cell_t *cell = sched_cell (job, step, node);
                bool here = step >= phase->first;
                if (jobx->node_flags [node] & S_NODE_ABSENT)
                    continue;
                //  Offline cells count before their phase (as in R8)
                if (!here || cell->status == SCHED_CELL_OFFLINE) {
                    if (sched_is_failure (cell->status))
                        jobx->failed_before_phase = true;
                }
                else
                if (sched_is_failure (cell->status)) {
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
                    sched_skip_node (self, jobx, node, 0, job->step_count,
                                 "node unreachable");
                    continue;
                }
                for (size_t sub = 0; sub < phase->count; sub++) {
                    size_t step = phase->first + sub;
                    sched_cell_t *cell = sched_cell (job, step, node);
                    if (sched_cell_status_final (cell->status))
                        continue;
                    if (cell->attempt == 0)
                        sched_cell_move (cell, SCHED_CELL_PENDING);  //  Never sent
                    if (sched_in_flight (cell->status)) {
                        //  Same attempt again: the agent dedupes it and
                        //  re-sends a result it already has
                        cell->resends = 0;
                        cell->deadline_ms
                            = self->now_ms + self->config.ack_timeout_ms;
                        sched_cell_set (self, jobx, step, node,
                                    SCHED_CELL_DISPATCHED);
                        s_resend_restored (self, jobx, step, node);
                        if (jobx->any) {
                            //  The lease starts again from the restore
                            cell->claims++;
                            cell->renewed_ms = self->now_ms;
                            sched_due_push (self, jobx, S_DUE_LEASE,
                                        self->now_ms + jobx->lease_ms, step,
                                        node);
                        }
                    }
                    else
                    if (cell->status == SCHED_CELL_RETRY_WAIT)
                        sched_dispatch_node (self, jobx, step, node,
                                         cell->attempt + 1);
                    else
                    if (jobx->any && cell->attempt > 0
                        && !(jobx->node_flags [node] & S_NODE_DROPPED))
                        //  Reclaimed, and waiting for a node
                        sched_dispatch_node (self, jobx, step, node,
                                         cell->attempt);
                    else
                    if (phase->branch)
                        s_pipe_advance (self, jobx, node, sub);
                    else
                    if (jobx->node_flags [node] & S_NODE_DROPPED)
                        sched_skip_node (self, jobx, node, step,
                                     job->step_count,
                                     "node dropped after a failure");
                    else
                        sched_dispatch_node (self, jobx, step, node, 1);
                    break;
                }
            }
        }
    }
    s_resume_end (self, jobx);
}
