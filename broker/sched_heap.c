/*  =========================================================================
    sched_heap - the scheduler's heaps: the pending queue (priority, then
    age) and the deadlines (ack, run, retry, job, lease, stall), fired by
    sched_tick

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

void
sched_queue_push (sched_t *self, s_jobx_t *jobx)
{
    if (self->queue_size == self->queue_cap)
        self->queue = (s_jobx_t **) sched_grow (self->queue, &self->queue_cap,
                                            sizeof (s_jobx_t *));
    s_queue_place (self, self->queue_size++, jobx);
    jobx->queued = true;
    s_queue_sift (self, jobx->queue_index);
}

void
sched_queue_remove (sched_t *self, s_jobx_t *jobx)
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

void
sched_due_push (sched_t *self, s_jobx_t *jobx, s_due_kind_t kind,
            int64_t deadline_ms, size_t step, size_t node)
{
    if (self->due_size == self->due_cap)
        self->due = (s_due_t *) sched_grow (self->due, &self->due_cap,
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


//  Removes the top entry into *ENTRY; drops its reference to the job.
void
sched_due_pop (sched_t *self, s_due_t *entry)
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
    sched_jobx_release (entry->jobx);
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
        return sched_in_flight (cell->status) && cell->attempt == entry->attempt
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
//  Firing deadlines

//  One due deadline that still holds.
static void
s_due_fire (sched_t *self, const s_due_t *entry)
{
    s_jobx_t *jobx = entry->jobx;
    sched_job_t *job = jobx->job;
    if (entry->kind == S_DUE_JOB) {
        char text [32];
        duration_format (job->spec->timeout_ms, text, sizeof (text));
        char *reason = sched_printf ("job timeout after %s", text);
        sched_job_abort (self, jobx, SCHED_JOB_FAILED, reason);
        free (reason);
        return;
    }
    size_t step = entry->step, node = entry->node;
    sched_cell_t *cell = sched_cell (job, step, node);
    if (entry->kind == S_DUE_ACK && cell->awaiting_node) {
        //  R16: restored in flight, and its node never spoke again
        cell->awaiting_node = false;
        const char *error = "node did not come back after a broker restart";
        if (jobx->any) {
            sched_reclaim (self, jobx, step, error);
            return;
        }
        sched_attempt_add (cell, sched_attempt_node (jobx, node),
                           SCHED_CELL_LOST, NULL, error, -1,
                           sched_ran_ms (self, cell), false);
        sched_cell_failed (self, jobx, step, node, SCHED_CELL_LOST, false,
                           sched_strdup (error));
        return;
    }
    if (entry->kind == S_DUE_ACK) {
        //  R9: re-send directly, then give up
        if (cell->resends < self->config.ack_resends) {
            cell->resends++;
            sched_resend (self, jobx, step, node,
                      sched_printf ("re-sent directly (%" PRIu32 " of %" PRIu32
                                ")",
                                cell->resends, self->config.ack_resends));
            return;
        }
        char *error = sched_printf ("no acknowledgement after %" PRIu32 " sends",
                                cell->resends + 1);
        if (jobx->any) {
            //  R19: an any-node step goes to another node instead
            sched_reclaim (self, jobx, step, error);
            free (error);
            return;
        }
        sched_attempt_add (cell, sched_attempt_node (jobx, node), SCHED_CELL_LOST,
                       NULL, error, -1, 0, false);
        sched_cell_failed (self, jobx, step, node, SCHED_CELL_LOST, false, error);
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
        char *error = sched_printf ("no result within %s + grace", text);
        sched_attempt_add (cell, sched_attempt_node (jobx, node), SCHED_CELL_TIMEOUT,
                       NULL, error, -1,
                       timeout_ms + self->config.grace_ms, false);
        sched_cancel_node (self, job, node, step, error);
        sched_cell_failed (self, jobx, step, node, SCHED_CELL_TIMEOUT, true,
                       error);
        return;
    }
    if (entry->kind == S_DUE_STALL) {
        //  R22: heard of since? Then the clock runs from that word
        int64_t stall_ms = sched_stall_ms (jobx, step);
        if (cell->renewed_ms + stall_ms > self->now_ms) {
            sched_due_push (self, jobx, S_DUE_STALL, cell->renewed_ms + stall_ms,
                        step, node);
            return;
        }
        char text [32];
        duration_format (stall_ms, text, sizeof (text));
        char *error = sched_printf ("no progress for %s (stall_timeout)", text);
        sched_attempt_add (cell, sched_attempt_node (jobx, node), SCHED_CELL_TIMEOUT,
                       NULL, error, -1, sched_ran_ms (self, cell), false);
        sched_cancel_node (self, job, node, step, error);
        sched_cell_failed (self, jobx, step, node, SCHED_CELL_TIMEOUT, true,
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
            sched_due_push (self, jobx, S_DUE_LEASE, renewed_ms + jobx->lease_ms,
                        step, node);
            return;
        }
        self->counters.lease_expirations++;
        holder->lease_expirations++;
        sched_reclaim (self, jobx, step, "lease expired");
        return;
    }
    //  R11: the backoff is over
    sched_dispatch_node (self, jobx, step, node, cell->attempt + 1);
}

int
sched_tick (sched_t *self, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    while (self->due_size > 0 && self->due [0].deadline_ms <= now_ms) {
        s_due_t entry;
        //  Keep the job's priv alive while the entry is handled
        self->due [0].jobx->due_refs++;
        sched_due_pop (self, &entry);
        if (s_due_valid (&entry))
            s_due_fire (self, &entry);
        entry.jobx->due_refs--;
        sched_jobx_release (entry.jobx);
    }
    sched_admit (self);
    sched_wait_pass (self);
    return 0;
}

int64_t
sched_next_deadline_ms (sched_t *self)
{
    //  Superseded entries are dropped here so the answer is a real
    //  deadline; each entry is dropped once, so this is O(1) amortised.
    while (self->due_size > 0 && !s_due_valid (&self->due [0])) {
        s_due_t entry;
        sched_due_pop (self, &entry);
    }
    int64_t next = self->due_size > 0 ? self->due [0].deadline_ms : INT64_MAX;
    if (self->queue_size > 0 && !self->paused
        && self->running_count < self->config.max_concurrent
        && self->now_ms < next)
        next = self->now_ms;
    return next;
}
