/*  =========================================================================
    sched_fleet - the fleet as the scheduler sees it: nodes by id,
    concurrency limits, any-node claims and reclaims, cells waiting for a
    slot, nodes that cannot run a job, and nodes going down or offline

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
//  Nodes by id: a chained hash of what the scheduler knows of each node.

static s_node_t *
s_node_find (sched_t *self, const char *id)
{
    if (!id || !self->node_bucket_count)
        return NULL;
    s_node_t *node
        = self->node_buckets [sched_hash (id) & (self->node_bucket_count - 1)];
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
            = (s_node_t **) sched_alloc (new_count * sizeof (s_node_t *));
        for (size_t index = 0; index < self->node_bucket_count; index++) {
            s_node_t *item = self->node_buckets [index];
            while (item) {
                s_node_t *next = item->hash_next;
                size_t slot = sched_hash (item->id) & (new_count - 1);
                item->hash_next = buckets [slot];
                buckets [slot] = item;
                item = next;
            }
        }
        free (self->node_buckets);
        self->node_buckets = buckets;
        self->node_bucket_count = new_count;
    }
    node = (s_node_t *) sched_alloc (sizeof (s_node_t));
    node->id = sched_strdup (id);
    size_t slot = sched_hash (id) & (self->node_bucket_count - 1);
    node->hash_next = self->node_buckets [slot];
    self->node_buckets [slot] = node;
    self->node_count++;
    return node;
}

//  Entries for every expected node of JOB, and for a job of many nodes
//  their hashed index (sched_job_node_index reads it: every agent event
//  names its node).
void
sched_nodes_bind (sched_t *self, s_jobx_t *jobx)
{
    sched_job_t *job = jobx->job;
    free (jobx->nodes);
    jobx->nodes = (s_node_t **) sched_alloc (
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
    jobx->node_slots = (uint32_t *) sched_alloc (slots * sizeof (uint32_t));
    jobx->node_slot_mask = slots - 1;
    for (size_t index = 0; index < job->expected_count; index++) {
        size_t slot = sched_hash (job->expected [index]) & jobx->node_slot_mask;
        while (jobx->node_slots [slot])
            slot = (slot + 1) & jobx->node_slot_mask;
        jobx->node_slots [slot] = (uint32_t) index + 1;
    }
}

//  ---------------------------------------------------------------------
//  Concurrency limits (R21)

//  Which broker limits and which of the job's own limits cover each step.
void
sched_limits_bind (sched_t *self, s_jobx_t *jobx)
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
    jobx->step_limits = (uint32_t *) sched_alloc (bytes);
    jobx->step_job_limits = (uint32_t *) sched_alloc (bytes);
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
bool
sched_step_limited (const s_jobx_t *jobx, size_t step)
{
    return jobx->step_limits
           && (jobx->step_limits [step] || jobx->step_job_limits [step]);
}

//  A cell of STEP on NODE went into flight (DELTA 1) or out of it (-1).
void
sched_limits_count (sched_t *self, s_jobx_t *jobx, size_t step, s_node_t *node,
                int delta)
{
    if (!sched_step_limited (jobx, step))
        return;
    uint32_t mask = jobx->step_limits [step];
    for (size_t rule = 0; mask && rule < self->limit_count; rule++)
        if (mask & ((uint32_t) 1 << rule)) {
            self->limit_running [rule] += (uint32_t) delta;
            if (self->limits [rule].per_node) {
                if (!node->limit_running)
                    node->limit_running = (uint32_t *) sched_alloc (
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
    if (!sched_step_limited (jobx, step))
        return true;
    uint32_t mask = jobx->step_limits [step];
    for (size_t rule = 0; mask && rule < self->limit_count; rule++) {
        const job_limit_t *limit = &self->limits [rule];
        if ((mask & ((uint32_t) 1 << rule)) && !limit->per_node
            && self->limit_running [rule] >= limit->max) {
            *why_p = sched_printf ("waiting: %s %" PRIu32 "/%" PRIu32 " running",
                               limit->pattern, self->limit_running [rule],
                               limit->max);
            *key_p = sched_printf ("limit %s", limit->pattern);
            return false;
        }
    }
    const job_spec_t *spec = jobx->job->spec;
    mask = jobx->step_job_limits [step];
    for (size_t rule = 0; mask && rule < spec->limit_count; rule++) {
        const job_limit_t *limit = &spec->limits [rule];
        if ((mask & ((uint32_t) 1 << rule))
            && jobx->job_limit_running [rule] >= limit->max) {
            *why_p = sched_printf ("waiting: %s %" PRIu32 "/%" PRIu32 " running "
                               "(the job's limit)", limit->pattern,
                               jobx->job_limit_running [rule], limit->max);
            *key_p = sched_printf ("job %s %s", jobx->job->id, limit->pattern);
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
                *why_p = sched_printf ("waiting: %s %" PRIu32 "/%" PRIu32
                                   " running on %s", limit->pattern, running,
                                   limit->max, node);
            if (key_p)
                *key_p = sched_printf ("limit %s on %s", limit->pattern, node);
            return false;
        }
    }
    return true;
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
ssize_t
sched_pick (sched_t *self, char **ids, size_t count, s_jobx_t *jobx, size_t step,
        bool need_free, size_t *busy_p, size_t *usable_p)
{
    const sched_cell_t *cell = jobx ? sched_cell (jobx->job, step, 0) : NULL;
    int64_t *loads = (int64_t *) sched_alloc ((count ? count : 1) * sizeof (int64_t));
    bool *eligible = (bool *) sched_alloc (count ? count : 1);
    bool *left = (bool *) sched_alloc (count ? count : 1);
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
    char *old = (char *) sched_keep (self, job->expected [0]);
    sched_action_t *action = sched_action (self, SCHED_ACTION_FORGET_CELLS, job);
    action->node = old;
    job->expected [0] = sched_strdup (node);
    free (jobx->node_slots);     //  Not built for one node; never stale
    jobx->node_slots = NULL;
    jobx->nodes [0] = s_node_get (self, node);
    sched_save_job (self, job);
    for (size_t step = 0; step < job->step_count; step++) {
        const sched_cell_t *cell = sched_cell (job, step, 0);
        if (cell->status != SCHED_CELL_PENDING || cell->attempt_count > 0
            || cell->waiting)
            sched_save_cell (self, job, step, 0);
    }
}

//  The target of an any-node job as text (kept with the job).
static const char *
s_target_text (s_jobx_t *jobx)
{
    if (!jobx->target_text) {
        char *text = target_format (&jobx->job->spec->target);
        jobx->target_text = text ? text : sched_strdup ("any");
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
    sched_cell_t *cell = sched_cell (job, step, 0);
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
    ssize_t pick = sched_pick (self, ids, count, jobx, step, true, &busy, &up);
    if (pick >= 0)
        s_any_move (self, jobx, ids [pick]);
    else
    if (up == 0)
        *why_p = sched_printf ("waiting: no online node matches %s",
                           s_target_text (jobx));
    else
        *why_p = sched_printf ("waiting: no free slot on %s (%zu of %zu node%s "
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
bool
sched_gate (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
        char **why_p, char **key_p)
{
    if (!s_limits_room (self, jobx, step, why_p, key_p))
        return false;
    if (jobx->any) {
        if (s_any_gate (self, jobx, step, why_p))
            return true;
        *key_p = sched_strdup (s_target_text (jobx));
        return false;
    }
    return s_node_room (self, jobx, step, jobx->job->expected [node], why_p,
                        key_p);
}

//  Does STEP of JOBX have to pass sched_gate?
bool
sched_gated (const s_jobx_t *jobx, size_t step)
{
    return jobx->any || sched_step_limited (jobx, step);
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
        class_->heap = (s_wait_t *) sched_grow (class_->heap, &class_->cap,
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
void
sched_wait_pop (s_class_t *class_, s_wait_t *entry)
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
void
sched_wait_add (sched_t *self, s_jobx_t *jobx, size_t step, size_t node,
            uint32_t attempt, const char *key, char *why, bool quiet)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, node);
    s_class_t *class_ = NULL;
    for (size_t index = 0; index < self->class_count && !class_; index++)
        if (strcmp (self->classes [index]->key, key) == 0)
            class_ = self->classes [index];
    if (!class_) {
        if (self->class_count == self->class_cap)
            self->classes = (s_class_t **) sched_grow (
                self->classes, &self->class_cap, sizeof (s_class_t *));
        class_ = (s_class_t *) sched_alloc (sizeof (s_class_t));
        class_->key = sched_strdup (key);
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
    //  Its class is the job's target when no node is free (sched_gate)
    cell->waiting_any = jobx->any && strcmp (key, s_target_text (jobx)) == 0;
    if (cell->waiting_any)
        self->waiting_any_count++;
    sched_save_cell (self, job, step, node);
    if (!quiet)
        sched_event (self, job, "waiting", node, step, sched_strdup (why));
}

//  Does ENTRY still stand for a waiting cell?
static bool
s_wait_valid (const s_wait_t *entry)
{
    s_jobx_t *jobx = entry->jobx;
    if (!jobx->job || !jobx->running || jobx->finished || jobx->ending)
        return false;
    const sched_cell_t *cell = sched_cell (jobx->job, entry->step, entry->node);
    return cell->waiting
           && (cell->status == SCHED_CELL_PENDING
               || cell->status == SCHED_CELL_RETRY_WAIT);
}

//  Lets go of a popped entry's job reference.
void
sched_wait_release (s_wait_t *entry)
{
    entry->jobx->due_refs--;
    sched_jobx_release (entry->jobx);
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
void
sched_wait_pass (sched_t *self)
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
                sched_wait_pop (class_, &entry);
                sched_wait_release (&entry);
                continue;
            }
            char *why = NULL, *key = NULL;
            if (!sched_gate (self, head->jobx, head->step, head->node, &why,
                         &key)) {
                free (why);
                free (key);
                break;
            }
            sched_wait_pop (class_, &entry);
            sched_cell_t *cell = sched_cell (entry.jobx->job, entry.step,
                                         entry.node);
            sched_waiting_clear (self, cell);
            sched_send_node (self, entry.jobx, entry.step, entry.node,
                         entry.attempt);
            sched_wait_release (&entry);
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

//  R18, R19: takes STEP of an any-node job back from its holder (WHY: "lease
//  expired", "node offline", ...). The attempt is recorded against the
//  holder, which is told to stop. Before started the step goes out again
//  as the same attempt; after started, as a new attempt while retries
//  remain or when the action is idempotent; else it ends lost. It goes to
//  another node of the set, or waits for one.
void
sched_reclaim (sched_t *self, s_jobx_t *jobx, size_t step, const char *why)
{
    sched_job_t *job = jobx->job;
    sched_cell_t *cell = sched_cell (job, step, 0);
    char *from = (char *) sched_keep (self, sched_strdup (job->expected [0]));
    bool started = cell->status == SCHED_CELL_RUNNING;
    self->counters.reclaims++;
    jobx->nodes [0]->reclaims++;
    char *error = sched_printf ("reclaimed from %s (%s)", from, why);
    sched_attempt_add (cell, from, SCHED_CELL_LOST, NULL, error, -1, 0, false);
    char **names = (char **) sched_keep (self, sched_alloc (sizeof (char *)));
    names [0] = from;
    //  Only this attempt stops on the old holder, never the job: a later
    //  attempt may come back to it
    sched_action_t *cancel = sched_action (self, SCHED_ACTION_CANCEL, job);
    cancel->nodes = names;
    cancel->node_count = 1;
    cancel->step = (uint32_t) step;
    cancel->attempt = cell->attempt;
    cancel->detail = (const char *) sched_keep (self, sched_strdup (error));
    const job_phase_t *leaf = jobx->steps [step].leaf;
    uint32_t max_retries = leaf->max_retries > 0 ? (uint32_t) leaf->max_retries
                                                 : 0;
    bool idempotent = self->idempotent
                      && self->idempotent (self->fleet_arg, leaf->backend,
                                           leaf->action);
    if (started && cell->attempt > max_retries && !idempotent) {
        char *detail = sched_printf ("%s after it started; not run again (no "
                                 "retries left, %s.%s is not idempotent)",
                                 error, leaf->backend, leaf->action);
        free (error);
        sched_cell_failed (self, jobx, step, 0, SCHED_CELL_LOST, false, detail);
        return;
    }
    uint32_t attempt = started ? cell->attempt + 1 : cell->attempt;
    cell->attempt = attempt;
    sched_cell_set (self, jobx, step, 0, SCHED_CELL_PENDING);
    char *wait_why = NULL, *wait_key = NULL;
    if (sched_gate (self, jobx, step, 0, &wait_why, &wait_key)) {
        sched_event_named (self, job, "reclaimed", from, step,
                       sched_printf ("%s \xe2\x86\x92 %s", error,
                                 job->expected [0]));
        sched_send_node (self, jobx, step, 0, attempt);
    }
    else {
        sched_event_named (self, job, "reclaimed", from, step,
                       sched_printf ("%s; %s", error, wait_why));
        sched_wait_add (self, jobx, step, 0, attempt, wait_key, wait_why, false);
        free (wait_key);
    }
    free (error);
}

//  ---------------------------------------------------------------------
//  Nodes that cannot run a job (R2)

//  R2: asks which nodes of the target cannot run the job, keeps that
//  list on the job (sorted, one entry per node, NULL reasons filled in)
//  and drops those nodes from IDS (sorted). Returns the new count of IDS.
size_t
sched_not_run_apply (sched_t *self, sched_job_t *job, char **ids, size_t count)
{
    sched_not_run_clear (job);
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
            entry->reason = sched_strdup (sched_cell_status_name (entry->status));
        list [kept++] = *entry;
    }
    listed = kept;
    if (listed > 1)
        qsort (list, listed, sizeof (sched_not_run_t), sched_compare_not_run);
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
        if (sched_not_run_find (job, ids [index]))
            free (ids [index]);
        else
            ids [left++] = ids [index];
    return left;
}

//  ---------------------------------------------------------------------
//  Nodes going down and offline (R12, R19)

//  R19: NODE is down: its any-node steps in flight are reclaimed at once.
static void
s_node_down (sched_t *self, const char *node)
{
    s_node_t *entry = s_node_find (self, node);
    if (!entry)
        return;                 //  Never given anything
    entry->down = true;
    size_t count = 0;
    s_jobx_t **jobs = (s_jobx_t **) sched_alloc (
        (self->running_count ? self->running_count : 1) * sizeof (s_jobx_t *));
    for (s_jobx_t *jobx = self->running_head; jobx; jobx = jobx->next)
        if (jobx->any && jobx->nodes && jobx->nodes [0] == entry)
            jobs [count++] = jobx;
    for (size_t at = 0; at < count; at++) {
        s_jobx_t *jobx = jobs [at];
        for (size_t step = 0; step < jobx->job->step_count; step++) {
            if (jobx->finished || jobx->ending || jobx->nodes [0] != entry)
                break;
            if (sched_in_flight (sched_cell (jobx->job, step, 0)->status))
                sched_reclaim (self, jobx, step, "node offline");
        }
    }
    free (jobs);
    self->wait_dirty = true;
}

int
sched_on_node_down (sched_t *self, const char *node, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    if (!node)
        return -1;
    s_node_down (self, node);
    sched_wait_pass (self);
    return 0;
}

//  R16: NODE speaks again after a broker restart: each of its restored
//  cells still waiting for that is sent again, and its ack clock starts
//  now, with its re-sends counted from zero.
static void
s_node_back (sched_t *self, const char *node)
{
    for (s_jobx_t *jobx = self->running_head; jobx; jobx = jobx->next) {
        if (jobx->finished || jobx->ending)
            continue;
        sched_job_t *job = jobx->job;
        ssize_t index = sched_job_node_index (job, node);
        if (index < 0)
            continue;
        for (size_t step = 0; step < job->step_count; step++) {
            sched_cell_t *cell = sched_cell (job, step, (size_t) index);
            if (!cell->awaiting_node)
                continue;
            cell->awaiting_node = false;
            if (cell->status != SCHED_CELL_DISPATCHED)
                continue;
            cell->resends = 0;
            sched_resend (self, jobx, step, (size_t) index,
                          sched_printf ("re-sent: %s is back after a broker "
                                        "restart", node));
        }
    }
}

int
sched_on_heartbeat (sched_t *self, const char *node, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    if (!node)
        return -1;
    s_node_t *entry = s_node_find (self, node);
    if (entry) {
        //  R18: leases of this node run from here (read lazily when they
        //  fall due)
        entry->heard_ms = now_ms;
        entry->down = false;
        if (entry->awaiting > 0) {
            entry->awaiting = 0;
            s_node_back (self, node);
        }
    }
    //  Its load may have dropped, or it is back
    self->wait_dirty = true;
    sched_wait_pass (self);
    return 0;
}

int
sched_on_node_offline (sched_t *self, const char *node, int64_t now_ms)
{
    sched_collect (self);
    self->now_ms = now_ms;
    if (!node)
        return -1;
    s_node_down (self, node);
    //  Snapshot first: handling one job can finish it or start others
    size_t count = 0;
    s_jobx_t **jobs = (s_jobx_t **) sched_alloc (
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
            if (!sched_cell_status_final (sched_cell (job, step, index)->status)) {
                first_open = step;
                break;
            }
        if (first_open == SIZE_MAX)
            continue;           //  It has nothing left to do in this job
        sched_event (self, job, "offline", index, first_open,
                 sched_strdup ("node went offline"));
        size_t settled = SIZE_MAX;
        for (size_t step = first_open; step < job->step_count; step++) {
            sched_cell_t *cell = sched_cell (job, step, index);
            if (!sched_in_flight (cell->status)
                && cell->status != SCHED_CELL_RETRY_WAIT)
                continue;
            if (sched_in_flight (cell->status))
                sched_attempt_add (cell, sched_attempt_node (jobx, index),
                               SCHED_CELL_LOST, NULL, "node went offline", -1,
                               sched_ran_ms (self, cell), false);
            sched_cell_set (self, jobx, step, index, SCHED_CELL_LOST);
            sched_event (self, job, "lost", index, step,
                     sched_strdup ("node went offline"));
            settled = step;
        }
        if (settled == SIZE_MAX) {
            //  Nothing under way: the step it was due to run next reads
            //  offline, so the failure is in its cells (R8 and R16 read
            //  failures from cells)
            sched_cell_t *cell = sched_cell (job, first_open, index);
            free (cell->reason);
            cell->reason = sched_strdup ("node went offline");
            sched_cell_set (self, jobx, first_open, index, SCHED_CELL_OFFLINE);
            settled = first_open;
        }
        //  R12: offline counts as a failure, and the node is dropped
        sched_node_failed (self, jobx, settled, index, true);
        sched_cell_settled (self, jobx, settled, index);
    }
    free (jobs);
    sched_wait_pass (self);
    return 0;
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

size_t
sched_limits (sched_t *self, sched_limit_use_t *uses, size_t max)
{
    size_t count = self->limit_count < max ? self->limit_count : max;
    for (size_t index = 0; index < count; index++) {
        uses [index].pattern = self->limits [index].pattern;
        uses [index].max = self->limits [index].max;
        uses [index].per_node = self->limits [index].per_node;
        uses [index].running = self->limit_running [index];
        uses [index].busiest = 0;
        uses [index].busiest_node = NULL;
    }
    //  Per-node limits: the busiest node, so that the figure compares
    //  with the limit (the fleet-wide sum may well exceed it)
    for (size_t bucket = 0; bucket < self->node_bucket_count; bucket++)
        for (s_node_t *node = self->node_buckets [bucket]; node;
             node = node->hash_next) {
            if (!node->limit_running)
                continue;
            for (size_t index = 0; index < count; index++)
                if (uses [index].per_node && node->limit_running [index]
                    && (node->limit_running [index] > uses [index].busiest
                        || (node->limit_running [index] == uses [index].busiest
                            && strcmp (node->id, uses [index].busiest_node)
                                   < 0))) {
                    uses [index].busiest = node->limit_running [index];
                    uses [index].busiest_node = node->id;
                }
        }
    return count;
}
