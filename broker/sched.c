/*  =========================================================================
    sched - the phase-walking scheduler (a pure state machine)

    docs/SCHEDULING.md is the rule book; the rule numbers (R1..R26) quoted
    in the comments are its rules. The scheduler holds no socket, no store
    and no clock: every entry point takes now_ms, every effect is an
    action the caller drains. This file keeps memory, config, actions,
    jobs by id, the scheduler's life, submit, restore, cancel and the
    accessors; the rest lives in sched_job.c, sched_walk.c, sched_fleet.c
    and sched_heap.c, sharing sched_int.h.

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
#include "sched_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

//  ---------------------------------------------------------------------
//  Memory. Allocation failure in the scheduler's own bookkeeping is not
//  recoverable mid-transition (a half-applied event would break the
//  state machine), so it stops the process loudly, as CZMQ's zmalloc does.

void *
sched_alloc (size_t size)
{
    void *data = calloc (1, size ? size : 1);
    if (!data) {
        fprintf (stderr, "sched: out of memory (%zu bytes)\n", size);
        abort ();
    }
    return data;
}

void *
sched_grow (void *data, size_t *cap, size_t item_size)
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

char *
sched_strdup (const char *text)
{
    if (!text)
        return NULL;
    //  Every byte is written: no need for sched_alloc's zeroing
    size_t len = strlen (text);
    char *copy = (char *) malloc (len + 1);
    if (!copy) {
        fprintf (stderr, "sched: out of memory (%zu bytes)\n", len + 1);
        abort ();
    }
    memcpy (copy, text, len + 1);
    return copy;
}

char *
sched_printf (const char *format, ...)
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
void *
sched_keep (sched_t *self, void *data)
{
    if (self->garbage_count == self->garbage_cap)
        self->garbage = (void **) sched_grow (self->garbage, &self->garbage_cap,
                                          sizeof (void *));
    self->garbage [self->garbage_count++] = data;
    return data;
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
    config->restore_wait_ms = 20000;
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
int64_t
sched_backoff_ms (sched_t *self, uint32_t attempt)
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

sched_action_t *
sched_action (sched_t *self, sched_action_type_t type, sched_job_t *job)
{
    if (self->action_count == self->action_cap)
        self->actions = (sched_action_t *) sched_grow (
            self->actions, &self->action_cap, sizeof (sched_action_t));
    sched_action_t *action = &self->actions [self->action_count++];
    memset (action, 0, sizeof (*action));
    action->type = type;
    action->job = job;
    return action;
}

void
sched_save_job (sched_t *self, sched_job_t *job)
{
    sched_action (self, SCHED_ACTION_SAVE_JOB, job);
}

void
sched_save_cell (sched_t *self, sched_job_t *job, size_t step, size_t node)
{
    sched_action_t *action = sched_action (self, SCHED_ACTION_SAVE_CELL, job);
    action->step = (uint32_t) step;
    action->node = job->expected [node];
    action->cell = step * job->expected_count + node;
}

//  EVENT for NODE (SIZE_MAX: job-level) at STEP; DETAIL is taken (kept
//  until drained) and may be NULL.
void
sched_event (sched_t *self, sched_job_t *job, const char *event, size_t node,
         size_t step, char *detail)
{
    sched_action_t *action = sched_action (self, SCHED_ACTION_EVENT, job);
    action->event = event;
    action->step = (uint32_t) step;
    action->node = node == SIZE_MAX ? NULL : job->expected [node];
    action->detail = detail ? (char *) sched_keep (self, detail) : NULL;
}

//  EVENT for the node named NODE (kept by the caller until drained).
void
sched_event_named (sched_t *self, sched_job_t *job, const char *event,
               const char *node, size_t step, char *detail)
{
    sched_action_t *action = sched_action (self, SCHED_ACTION_EVENT, job);
    action->event = event;
    action->step = (uint32_t) step;
    action->node = node;
    action->detail = detail ? (char *) sched_keep (self, detail) : NULL;
}

//  A short, single-line excerpt of agent text for an event detail.
char *
sched_excerpt (const char *prefix, const char *text)
{
    char buf [S_DETAIL_MAX + 1];
    size_t len = 0;
    for (; text && text [len] && len < S_DETAIL_MAX; len++)
        buf [len] = text [len] == '\n' || text [len] == '\r' ? ' '
                                                             : text [len];
    buf [len] = '\0';
    if (len == 0)
        return sched_strdup (prefix);
    return sched_printf ("%s: %s%s", prefix, buf, text [len] ? "..." : "");
}

//  ---------------------------------------------------------------------
//  Jobs by id: a chained hash, keyed by the job id text.

size_t
sched_hash (const char *text)
{
    return id_hash (text);
}

s_jobx_t *
sched_lookup (sched_t *self, const char *id)
{
    if (!id || !self->bucket_count)
        return NULL;
    s_jobx_t *jobx = self->buckets [sched_hash (id) & (self->bucket_count - 1)];
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
            = (s_jobx_t **) sched_alloc (new_count * sizeof (s_jobx_t *));
        for (size_t index = 0; index < self->bucket_count; index++) {
            s_jobx_t *item = self->buckets [index];
            while (item) {
                s_jobx_t *next = item->hash_next;
                size_t slot = sched_hash (item->job->id) & (new_count - 1);
                item->hash_next = buckets [slot];
                buckets [slot] = item;
                item = next;
            }
        }
        free (self->buckets);
        self->buckets = buckets;
        self->bucket_count = new_count;
    }
    size_t slot = sched_hash (jobx->job->id) & (self->bucket_count - 1);
    jobx->hash_next = self->buckets [slot];
    self->buckets [slot] = jobx;
    self->live_count++;
}

void
sched_hash_remove (sched_t *self, s_jobx_t *jobx)
{
    s_jobx_t **link
        = &self->buckets [sched_hash (jobx->job->id) & (self->bucket_count - 1)];
    while (*link && *link != jobx)
        link = &(*link)->hash_next;
    if (*link) {
        *link = jobx->hash_next;
        jobx->hash_next = NULL;
        self->live_count--;
    }
}

//  ---------------------------------------------------------------------
//  Scheduler

sched_t *
sched_new (const sched_config_t *config, sched_resolve_fn *resolve,
           void *arg)
{
    sched_t *self = (sched_t *) sched_alloc (sizeof (sched_t));
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
    if (self->config.restore_wait_ms < self->config.ack_timeout_ms)
        self->config.restore_wait_ms = self->config.ack_timeout_ms;
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
void
sched_collect (sched_t *self)
{
    if (self->action_head < self->action_count)
        return;
    self->action_head = self->action_count = 0;
    for (size_t index = 0; index < self->garbage_count; index++)
        free (self->garbage [index]);
    self->garbage_count = 0;
    for (size_t index = 0; index < self->graveyard_count; index++)
        sched_job_discard (self->graveyard [index]);
    self->graveyard_count = 0;
}

void
sched_destroy (sched_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    sched_t *self = *self_p;
    self->action_head = self->action_count;
    sched_collect (self);
    for (size_t index = 0; index < self->bucket_count; index++) {
        s_jobx_t *jobx = self->buckets [index];
        while (jobx) {
            s_jobx_t *next = jobx->hash_next;
            sched_job_discard (jobx->job);
            jobx = next;
        }
    }
    for (size_t index = 0; index < self->class_count; index++) {
        s_class_t *class_ = self->classes [index];
        while (class_->size > 0) {
            s_wait_t entry;
            sched_wait_pop (class_, &entry);
            sched_wait_release (&entry);
        }
        free (class_->key);
        free (class_->heap);
        free (class_);
    }
    free (self->classes);
    while (self->due_size > 0) {
        s_due_t entry;
        sched_due_pop (self, &entry);
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
    sched_collect (self);
    self->now_ms = now_ms;
    sched_job_t *job = job_p ? *job_p : NULL;
    if (!job || job->priv || !job->spec) {
        s_reason (reason, reason_len, "not a job record");
        return -1;
    }
    if (sched_lookup (self, job->id)) {
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
    s_jobx_t *jobx = sched_jobx_new (job);
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
    sched_queue_push (self, jobx);
    sched_save_job (self, job);
    char *text = target_format (&job->spec->target);
    sched_event (self, job, "submitted", SIZE_MAX, 0,
             text ? sched_printf ("%s%s%starget %s, %zu step%s, priority %d",
                              job->submitted_by ? "by " : "",
                              job->submitted_by ? job->submitted_by : "",
                              job->submitted_by ? ": " : "", text,
                              job->step_count,
                              job->step_count == 1 ? "" : "s",
                              job->spec->priority)
                  : NULL);
    free (text);
    sched_admit (self);
    return 0;
}

int
sched_restore (sched_t *self, sched_job_t **job_p, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    sched_job_t *job = job_p ? *job_p : NULL;
    if (!job || job->priv || !job->spec || sched_lookup (self, job->id))
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
    s_jobx_t *jobx = sched_jobx_new (job);
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
        sched_cells_free (job);
        sched_expected_free (job);
        sched_queue_push (self, jobx);
        return 0;
    }
    jobx->node_flags = (uint8_t *) sched_alloc (job->expected_count);
    sched_nodes_bind (self, jobx);
    sched_limits_bind (self, jobx);
    jobx->any = job->spec->target.any && job->expected_count == 1;
    sched_running_add (self, jobx);
    sched_resume (self, jobx);
    return 0;
}

int
sched_cancel (sched_t *self, const char *job_id, const char *reason,
              int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    s_jobx_t *jobx = sched_lookup (self, job_id);
    if (!jobx || jobx->finished)
        return -1;
    const char *why = reason && *reason ? reason : "cancelled by request";
    sched_job_t *job = jobx->job;
    if (jobx->queued) {
        sched_event (self, job, "cancelled", SIZE_MAX, 0, sched_strdup (why));
        sched_job_finish (self, jobx, SCHED_JOB_CANCELLED, sched_strdup (why));
    }
    else
        sched_job_abort (self, jobx, SCHED_JOB_CANCELLED, why);
    sched_wait_pass (self);
    return 0;
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
    s_jobx_t *jobx = sched_lookup (self, job_id);
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
    const sched_job_t **jobs = (const sched_job_t **) sched_alloc (
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

size_t
sched_waiting_any_count (sched_t *self)
{
    return self->waiting_any_count;
}

void
sched_counters (sched_t *self, sched_counters_t *counters)
{
    *counters = self->counters;
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
        self->limits [index].pattern = sched_strdup (limits [index].pattern);
    }
    self->limit_count = count;
    return 0;
}
