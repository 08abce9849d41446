/*  =========================================================================
    test_sched - the scheduler's rules (docs/SCHEDULING.md), one test each

    A fake clock (an int64 the tests advance), a fake fleet behind the
    resolver callback, and a fake transport: every action is drained into
    a log the tests read. Dispatches, re-sends and cancels are rendered as
    text ("0/1 group/web/ web-01,web-02" = step 0, attempt 1, on that
    topic, to those nodes; "-" = each node's own topic), so a test reads
    like the sequence diagrams it checks.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../broker/sched.h"
#include "../proto/conf.h"

//  ---------------------------------------------------------------------
//  Harness

typedef struct {
    char *id;               //  Node id
    char *group;            //  Its one group
    bool online;            //  Resolvable
    bool drained;           //  Takes no new work
    const char *lacks;      //  An action it does not offer, or NULL
    uint32_t slots;         //  Executor slots (0: 1)
    uint32_t running;       //  From its last heartbeat
    uint32_t queued;        //  From its last heartbeat
} fake_node_t;

typedef struct {
    sched_action_type_t type;
    char job [JOB_ID_LEN + 1];
    uint32_t step;
    uint32_t attempt;
    char *node;
    char *topic;
    char *nodes;            //  Comma-joined
    char *event;
    char *detail;
} record_t;

//  A finished job as it was at its FINISHED action.
typedef struct {
    char id [JOB_ID_LEN + 1];
    sched_job_status_t status;
    char *reason;
    size_t step;
    size_t expected_count;
    char **expected;
    sched_cell_status_t *cells;
    size_t *attempt_counts;
} snapshot_t;

typedef struct {
    fake_node_t *fleet;
    size_t fleet_count;
    sched_config_t config;
    sched_t *sched;
    int64_t now;
    bool quiet;             //  Count actions, do not log them
    size_t counts [16];     //  Actions by type
    record_t *log;
    size_t log_count;
    size_t log_cap;
    snapshot_t *snaps;
    size_t snap_count;
    size_t snap_cap;
    char *text;             //  Last rendering, freed on the next one
} harness_t;

static char *
s_dup (const char *text)
{
    return text ? strdup (text) : NULL;
}

static size_t
s_resolve (void *arg, const target_t *target, char ***ids_p)
{
    harness_t *h = (harness_t *) arg;
    char **ids = (char **) calloc (h->fleet_count + 1, sizeof (char *));
    size_t count = 0;
    for (size_t index = 0; index < h->fleet_count; index++) {
        fake_node_t *node = &h->fleet [index];
        bool match = false;
        if (!node->online || node->drained)
            continue;
        if (target->scope == TARGET_ALL)
            match = true;
        else
        if (target->scope == TARGET_GROUP)
            match = strcmp (node->group, target->value) == 0;
        else
        if (target->scope == TARGET_NODE)
            for (size_t at = 0; at < target->node_count; at++)
                if (strcmp (target->nodes [at], node->id) == 0)
                    match = true;
        if (target->scope == TARGET_EXPR)
            match = target_matches (target, node->id, &node->group, 1, NULL,
                                    NULL, 0);
        if (match)
            ids [count++] = strdup (node->id);
    }
    if (count == 0) {
        free (ids);
        ids = NULL;
    }
    *ids_p = ids;
    return count;
}

static bool
s_fake_matches (const fake_node_t *node, const target_t *target)
{
    if (target->scope == TARGET_ALL)
        return true;
    if (target->scope == TARGET_GROUP)
        return strcmp (node->group, target->value) == 0;
    return false;
}

//  Why NODE cannot run SPEC (as the registry words it), or NULL.
static char *
s_fake_why (const fake_node_t *node, const job_spec_t *spec,
            sched_cell_status_t *status)
{
    if (!node->online) {
        *status = SCHED_CELL_OFFLINE;
        return strdup ("offline since 12:01:07");
    }
    if (node->drained) {
        *status = SCHED_CELL_DRAINED;
        return strdup ("drained");
    }
    for (size_t step = 0; node->lacks && step < job_spec_step_count (spec);
         step++) {
        const job_phase_t *leaf = job_spec_step (spec, step, NULL, NULL);
        if (strcmp (leaf->action, node->lacks) == 0) {
            *status = SCHED_CELL_UNSUPPORTED;
            char *text = NULL;
            assert_true (asprintf (&text, "does not offer %s.%s",
                                   leaf->backend, leaf->action) > 0);
            return text;
        }
    }
    return NULL;
}

static size_t
s_unavailable (void *arg, const job_spec_t *spec, sched_not_run_t **list_p)
{
    harness_t *h = (harness_t *) arg;
    const target_t *target = &spec->target;
    sched_not_run_t *list = (sched_not_run_t *) calloc (
        h->fleet_count + target->node_count + 1, sizeof (sched_not_run_t));
    size_t count = 0;
    if (target->scope == TARGET_NODE)
        for (size_t at = 0; at < target->node_count; at++) {
            const fake_node_t *node = NULL;
            for (size_t index = 0; index < h->fleet_count; index++)
                if (strcmp (h->fleet [index].id, target->nodes [at]) == 0)
                    node = &h->fleet [index];
            sched_cell_status_t status = SCHED_CELL_OFFLINE;
            char *why = node ? s_fake_why (node, spec, &status)
                             : strdup ("not registered");
            if (why)
                list [count++] = (sched_not_run_t) {
                    strdup (target->nodes [at]), status, why, true};
        }
    else
        for (size_t index = 0; index < h->fleet_count; index++) {
            const fake_node_t *node = &h->fleet [index];
            sched_cell_status_t status = SCHED_CELL_OFFLINE;
            char *why = s_fake_matches (node, target)
                            ? s_fake_why (node, spec, &status)
                            : NULL;
            if (why)
                list [count++] = (sched_not_run_t) {strdup (node->id), status,
                                                    why, false};
        }
    if (count == 0) {
        free (list);
        list = NULL;
    }
    *list_p = list;
    return count;
}

//  Loads of the fake fleet (sched_load_fn).
static bool
s_load (void *arg, const char *node, sched_load_t *load)
{
    harness_t *h = (harness_t *) arg;
    for (size_t index = 0; index < h->fleet_count; index++)
        if (strcmp (h->fleet [index].id, node) == 0) {
            load->online = h->fleet [index].online;
            load->slots = h->fleet [index].slots ? h->fleet [index].slots : 1;
            load->running = h->fleet [index].running;
            load->queued = h->fleet [index].queued;
            return true;
        }
    return false;
}

//  Actions of the "idem" backend may run twice; no other may.
static bool
s_idempotent (void *arg, const char *backend, const char *action)
{
    (void) arg;
    (void) action;
    return strcmp (backend, "idem") == 0;
}

//  A fleet from "id:group" texts.
static harness_t *
s_harness_new (const char *const *nodes, size_t count)
{
    harness_t *h = (harness_t *) calloc (1, sizeof (harness_t));
    h->fleet = (fake_node_t *) calloc (count ? count : 1, sizeof (fake_node_t));
    for (size_t index = 0; index < count; index++) {
        const char *colon = strchr (nodes [index], ':');
        h->fleet [index].id = strndup (nodes [index],
                                       (size_t) (colon - nodes [index]));
        h->fleet [index].group = strdup (colon + 1);
        h->fleet [index].online = true;
    }
    h->fleet_count = count;
    sched_config_defaults (&h->config);
    h->config.seed = 42;
    h->now = 1000;
    return h;
}

//  Starts the scheduler with h->config (tests tweak it first).
static void
s_start (harness_t *h)
{
    h->sched = sched_new (&h->config, s_resolve, h);
    assert_non_null (h->sched);
    sched_set_unavailable (h->sched, s_unavailable, h);
}

static void
s_snapshot (harness_t *h, const sched_job_t *job)
{
    if (h->snap_count == h->snap_cap) {
        h->snap_cap = h->snap_cap ? h->snap_cap * 2 : 16;
        h->snaps = (snapshot_t *) realloc (h->snaps,
                                           h->snap_cap * sizeof (snapshot_t));
    }
    snapshot_t *snap = &h->snaps [h->snap_count++];
    memset (snap, 0, sizeof (*snap));
    strcpy (snap->id, job->id);
    snap->status = job->status;
    snap->reason = s_dup (job->reason);
    snap->step = job->step;
    snap->expected_count = job->expected_count;
    size_t cells = job->cells ? job->step_count * job->expected_count : 0;
    snap->expected
        = (char **) calloc (job->expected_count + 1, sizeof (char *));
    for (size_t index = 0; index < job->expected_count; index++)
        snap->expected [index] = strdup (job->expected [index]);
    snap->cells = (sched_cell_status_t *) calloc (cells + 1,
                                                  sizeof (sched_cell_status_t));
    snap->attempt_counts = (size_t *) calloc (cells + 1, sizeof (size_t));
    for (size_t index = 0; index < cells; index++) {
        snap->cells [index] = job->cells [index].status;
        snap->attempt_counts [index] = job->cells [index].attempt_count;
    }
}

static char *
s_join (char *const *nodes, size_t count)
{
    size_t len = 1;
    for (size_t index = 0; index < count; index++)
        len += strlen (nodes [index]) + 1;
    char *text = (char *) calloc (1, len);
    for (size_t index = 0; index < count; index++) {
        if (index > 0)
            strcat (text, ",");
        strcat (text, nodes [index]);
    }
    return text;
}

static void
s_drain (harness_t *h)
{
    sched_action_t action;
    while (sched_next_action (h->sched, &action)) {
        assert_true (action.type >= SCHED_ACTION_DISPATCH
                     && action.type <= SCHED_ACTION_FORGET_CELLS);
        assert_non_null (action.job);
        h->counts [action.type]++;
        if (action.type == SCHED_ACTION_SAVE_CELL) {
            //  The cell's index names the same cell as step and node
            //  (an any-node step may have moved on to another node since)
            ssize_t index = sched_job_node_index (action.job, action.node);
            assert_true (index >= 0 || action.job->expected_count == 1);
            assert_int_equal (action.cell,
                              action.step * action.job->expected_count
                                  + (size_t) (index > 0 ? index : 0));
        }
        if (action.type == SCHED_ACTION_FINISHED)
            s_snapshot (h, action.job);
        if (h->quiet)
            continue;
        if (h->log_count == h->log_cap) {
            h->log_cap = h->log_cap ? h->log_cap * 2 : 64;
            h->log = (record_t *) realloc (h->log,
                                           h->log_cap * sizeof (record_t));
        }
        record_t *rec = &h->log [h->log_count++];
        memset (rec, 0, sizeof (*rec));
        rec->type = action.type;
        strcpy (rec->job, action.job->id);
        rec->step = action.step;
        rec->attempt = action.attempt;
        rec->node = s_dup (action.node);
        rec->topic = s_dup (action.topic);
        rec->nodes = action.nodes ? s_join (action.nodes, action.node_count)
                                  : NULL;
        rec->event = s_dup (action.event);
        rec->detail = s_dup (action.detail);
    }
}

static void
s_harness_destroy (harness_t **h_p)
{
    harness_t *h = *h_p;
    if (h->sched) {
        s_drain (h);
        sched_destroy (&h->sched);
        assert_null (h->sched);
    }
    for (size_t index = 0; index < h->log_count; index++) {
        record_t *rec = &h->log [index];
        free (rec->node);
        free (rec->topic);
        free (rec->nodes);
        free (rec->event);
        free (rec->detail);
    }
    free (h->log);
    for (size_t index = 0; index < h->snap_count; index++) {
        snapshot_t *snap = &h->snaps [index];
        free (snap->reason);
        for (size_t at = 0; at < snap->expected_count; at++)
            free (snap->expected [at]);
        free (snap->expected);
        free (snap->cells);
        free (snap->attempt_counts);
    }
    free (h->snaps);
    for (size_t index = 0; index < h->fleet_count; index++) {
        free (h->fleet [index].id);
        free (h->fleet [index].group);
    }
    free (h->fleet);
    free (h->text);
    free (h);
    *h_p = NULL;
}

//  Dispatches, re-sends and cancels logged since FROM, for JOB (NULL:
//  all jobs), as one line.
static const char *
s_sends (harness_t *h, size_t from, const char *job)
{
    size_t len = 1;
    for (size_t index = from; index < h->log_count; index++) {
        record_t *rec = &h->log [index];
        len += 64 + (rec->nodes ? strlen (rec->nodes) : 0)
               + (rec->topic ? strlen (rec->topic) : 0)
               + (rec->node ? strlen (rec->node) : 0);
    }
    free (h->text);
    h->text = (char *) calloc (1, len);
    char *at = h->text;
    for (size_t index = from; index < h->log_count; index++) {
        record_t *rec = &h->log [index];
        if (job && strcmp (rec->job, job) != 0)
            continue;
        const char *sep = at == h->text ? "" : "; ";
        if (rec->type == SCHED_ACTION_DISPATCH)
            at += sprintf (at, "%s%u/%u %s %s", sep, rec->step, rec->attempt,
                           rec->topic ? rec->topic : "-", rec->nodes);
        else
        if (rec->type == SCHED_ACTION_RESEND)
            at += sprintf (at, "%sresend %u/%u %s", sep, rec->step,
                           rec->attempt, rec->node);
        else
        if (rec->type == SCHED_ACTION_CANCEL)
            at += sprintf (at, "%scancel %s", sep, rec->nodes);
    }
    return h->text;
}

//  How many EVENT actions since FROM match (NULL / -1 = any).
static size_t
s_events (harness_t *h, size_t from, const char *event, const char *node,
          int step)
{
    size_t count = 0;
    for (size_t index = from; index < h->log_count; index++) {
        record_t *rec = &h->log [index];
        if (rec->type != SCHED_ACTION_EVENT
            || (event && strcmp (rec->event, event) != 0)
            || (node && (!rec->node || strcmp (rec->node, node) != 0))
            || (step >= 0 && rec->step != (uint32_t) step))
            continue;
        count++;
    }
    return count;
}

//  The detail of the last EVENT EVENT for NODE since FROM, or NULL.
static const char *
s_event_detail (harness_t *h, size_t from, const char *event,
                const char *node)
{
    const char *detail = NULL;
    for (size_t index = from; index < h->log_count; index++) {
        record_t *rec = &h->log [index];
        if (rec->type == SCHED_ACTION_EVENT && strcmp (rec->event, event) == 0
            && (!node || (rec->node && strcmp (rec->node, node) == 0)))
            detail = rec->detail;
    }
    return detail;
}

static size_t
s_type_count (harness_t *h, size_t from, sched_action_type_t type)
{
    size_t count = 0;
    for (size_t index = from; index < h->log_count; index++)
        if (h->log [index].type == type)
            count++;
    return count;
}

static snapshot_t *
s_finished (harness_t *h, const char *id)
{
    for (size_t index = 0; index < h->snap_count; index++)
        if (strcmp (h->snaps [index].id, id) == 0)
            return &h->snaps [index];
    return NULL;
}

static ssize_t
s_index_of (char *const *ids, size_t count, const char *node)
{
    for (size_t index = 0; index < count; index++)
        if (strcmp (ids [index], node) == 0)
            return (ssize_t) index;
    return -1;
}

//  A cell's status, from the live job or its finished snapshot.
static sched_cell_status_t
s_cell_status (harness_t *h, const char *id, size_t step, const char *node)
{
    const sched_job_t *job = sched_job (h->sched, id);
    if (job) {
        ssize_t index = s_index_of (job->expected, job->expected_count, node);
        assert_true (index >= 0);
        return job->cells [step * job->expected_count + (size_t) index].status;
    }
    snapshot_t *snap = s_finished (h, id);
    assert_non_null (snap);
    ssize_t index = s_index_of (snap->expected, snap->expected_count, node);
    assert_true (index >= 0);
    return snap->cells [step * snap->expected_count + (size_t) index];
}

static const sched_cell_t *
s_live_cell (harness_t *h, const char *id, size_t step, const char *node)
{
    const sched_job_t *job = sched_job (h->sched, id);
    assert_non_null (job);
    ssize_t index = s_index_of (job->expected, job->expected_count, node);
    assert_true (index >= 0);
    return &job->cells [step * job->expected_count + (size_t) index];
}

#define assert_cell(h, id, step, node, want)                          \
    assert_string_equal (                                               \
        sched_cell_status_name (s_cell_status (h, id, step, node)),     \
        sched_cell_status_name (want))

static void
s_assert_outcome (harness_t *h, const char *id, sched_job_status_t status,
                  const char *reason)
{
    snapshot_t *snap = s_finished (h, id);
    assert_non_null (snap);
    assert_string_equal (sched_job_status_name (snap->status),
                         sched_job_status_name (status));
    if (reason) {
        assert_non_null (snap->reason);
        assert_string_equal (snap->reason, reason);
    }
    else
        assert_null (snap->reason);
    assert_null (sched_job (h->sched, id));
}

//  ---------------------------------------------------------------------
//  Specs by hand (malloc'd as the decoder makes them; job_spec_destroy
//  frees them)

static job_spec_t *
s_spec (target_scope_t scope, const char *value, bool any,
        job_strategy_t strategy)
{
    job_spec_t *spec = (job_spec_t *) calloc (1, sizeof (job_spec_t));
    spec->target.scope = scope;
    spec->target.any = any;
    spec->target.value = s_dup (value);
    if (scope == TARGET_NODE) {
        char *copy = strdup (value);
        char *save = NULL;
        spec->target.nodes = (char **) calloc (16, sizeof (char *));
        for (char *id = strtok_r (copy, ",", &save); id;
             id = strtok_r (NULL, ",", &save))
            spec->target.nodes [spec->target.node_count++] = strdup (id);
        free (copy);
    }
    spec->strategy = strategy;
    return spec;
}

static void
s_leaf_init (job_phase_t *leaf, const char *backend, const char *action,
             job_condition_t condition)
{
    memset (leaf, 0, sizeof (*leaf));
    leaf->backend = strdup (backend);
    leaf->action = strdup (action);
    leaf->condition = condition;
}

//  Appends a top-level leaf; the pointer is valid until the next append.
static job_phase_t *
s_leaf (job_spec_t *spec, const char *backend, const char *action,
        job_condition_t condition)
{
    spec->phases = (job_phase_t *) realloc (
        spec->phases, (spec->phase_count + 1) * sizeof (job_phase_t));
    job_phase_t *leaf = &spec->phases [spec->phase_count++];
    s_leaf_init (leaf, backend, action, condition);
    return leaf;
}

//  Appends an empty branch; returns its phase index.
static size_t
s_branch (job_spec_t *spec, job_condition_t condition)
{
    spec->phases = (job_phase_t *) realloc (
        spec->phases, (spec->phase_count + 1) * sizeof (job_phase_t));
    job_phase_t *branch = &spec->phases [spec->phase_count];
    memset (branch, 0, sizeof (*branch));
    branch->condition = condition;
    return spec->phase_count++;
}

static job_phase_t *
s_sub (job_spec_t *spec, size_t branch_index, const char *backend,
       const char *action, job_condition_t condition)
{
    job_phase_t *branch = &spec->phases [branch_index];
    branch->tasks = (job_phase_t *) realloc (
        branch->tasks, (branch->task_count + 1) * sizeof (job_phase_t));
    job_phase_t *leaf = &branch->tasks [branch->task_count++];
    s_leaf_init (leaf, backend, action, condition);
    return leaf;
}

//  ---------------------------------------------------------------------
//  Events in (each drains the actions)

static void
s_submit (harness_t *h, const char *id, job_spec_t *spec)
{
    sched_job_t *job = sched_job_new (id, &spec);
    assert_non_null (job);
    assert_null (spec);
    char reason [256] = "";
    int rc = sched_submit (h->sched, &job, h->now, reason, sizeof (reason));
    if (rc != 0)
        print_error ("submit %s: %s\n", id, reason);
    assert_int_equal (rc, 0);
    assert_null (job);
    s_drain (h);
}

static int
s_ack (harness_t *h, const char *id, uint32_t step, uint32_t attempt,
       const char *node)
{
    int rc = sched_on_ack (h->sched, id, step, attempt, node, h->now);
    s_drain (h);
    return rc;
}

static int
s_started (harness_t *h, const char *id, uint32_t step, uint32_t attempt,
           const char *node)
{
    int rc = sched_on_started (h->sched, id, step, attempt, node, h->now);
    s_drain (h);
    return rc;
}

static int
s_result (harness_t *h, const char *id, uint32_t step, uint32_t attempt,
          const char *node, const char *status, const char *error)
{
    proto_msg_t msg;
    memset (&msg, 0, sizeof (msg));
    msg.type = PROTO_RESULT;
    msg.job = (char *) id;
    msg.step = step;
    msg.attempt = attempt;
    msg.node = (char *) node;
    msg.status = (char *) status;
    msg.output = (char *) "out";
    msg.error = (char *) (error ? error : "");
    msg.exit_code = strcmp (status, "success") == 0 ? 0 : 1;
    msg.duration_ms = 25;
    int rc = sched_on_result (h->sched, &msg, h->now);
    s_drain (h);
    return rc;
}

//  The node takes its current attempt of STEP and reports STATUS.
static void
s_run (harness_t *h, const char *id, uint32_t step, const char *node,
       const char *status)
{
    uint32_t attempt = s_live_cell (h, id, step, node)->attempt;
    assert_true (attempt > 0);
    assert_int_equal (s_ack (h, id, step, attempt, node), 0);
    assert_int_equal (s_result (h, id, step, attempt, node, status,
                                strcmp (status, "success") == 0 ? NULL
                                                                : "boom"),
                      0);
}

static void
s_tick (harness_t *h, int64_t now)
{
    h->now = now;
    assert_int_equal (sched_tick (h->sched, now), 0);
    s_drain (h);
}

static const char *s_web3 [] = {"web-01:web", "web-02:web", "web-03:web",
                                "db-01:db"};
#define WEB "web-01,web-02,web-03"

//  ---------------------------------------------------------------------
//  Tests

static void
test_sched_status_names (void **state)
{
    for (int status = SCHED_JOB_PENDING; status <= SCHED_JOB_CANCELLED;
         status++) {
        sched_job_status_t back;
        const char *name = sched_job_status_name ((sched_job_status_t) status);
        assert_int_equal (sched_job_status_parse (name, &back), 0);
        assert_int_equal (back, status);
    }
    for (int status = SCHED_CELL_PENDING; status <= SCHED_CELL_RETRY_WAIT;
         status++) {
        sched_cell_status_t back;
        const char *name
            = sched_cell_status_name ((sched_cell_status_t) status);
        assert_int_equal (sched_cell_status_parse (name, &back), 0);
        assert_int_equal (back, status);
    }
    assert_string_equal (sched_job_status_name (SCHED_JOB_PARTIAL_FAILURE),
                         "partial_failure");
    assert_string_equal (sched_cell_status_name (SCHED_CELL_RETRY_WAIT),
                         "retry_wait");
    sched_job_status_t job_status;
    assert_int_equal (sched_job_status_parse ("done", &job_status), -1);
    assert_int_equal (sched_job_status_parse (NULL, &job_status), -1);
    assert_true (sched_job_status_final (SCHED_JOB_CANCELLED));
    assert_false (sched_job_status_final (SCHED_JOB_RUNNING));
    assert_true (sched_cell_status_final (SCHED_CELL_OFFLINE));
    assert_false (sched_cell_status_final (SCHED_CELL_RETRY_WAIT));
    assert_false (sched_cell_status_final (SCHED_CELL_PENDING));
}

//  R1: at most max_concurrent running, at most max_pending queued; the
//  next starts at once when one finishes.
static void
test_sched_admission_limits (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.max_concurrent = 1;
    h->config.max_pending = 2;
    s_start (h);
    const char *ids [] = {"j-a", "j-b", "j-c"};
    for (size_t index = 0; index < 3; index++) {
        job_spec_t *spec = s_spec (TARGET_NODE, "db-01", false,
                                   JOB_STRATEGY_FAIL_FAST);
        s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
        s_submit (h, ids [index], spec);
    }
    assert_int_equal (sched_running_count (h->sched), 1);
    assert_int_equal (sched_pending_count (h->sched), 2);
    assert_int_equal (sched_job (h->sched, "j-b")->status, SCHED_JOB_PENDING);

    job_spec_t *spec = s_spec (TARGET_NODE, "db-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    sched_job_t *job = sched_job_new ("j-d", &spec);
    char reason [128] = "";
    assert_int_equal (sched_submit (h->sched, &job, h->now, reason,
                                    sizeof (reason)),
                      -1);
    assert_string_equal (reason, "queue full: 2 jobs pending (max_pending)");
    assert_non_null (job);           //  Refused: the caller keeps it
    sched_job_destroy (&job);
    assert_null (job);
    assert_null (sched_job (h->sched, "j-d"));

    //  A duplicate id is refused too
    spec = s_spec (TARGET_NODE, "db-01", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    job = sched_job_new ("j-a", &spec);
    assert_int_equal (sched_submit (h->sched, &job, h->now, reason,
                                    sizeof (reason)),
                      -1);
    assert_string_equal (reason, "job j-a already exists");
    sched_job_destroy (&job);

    size_t mark = h->log_count;
    s_run (h, "j-a", 0, "db-01", "success");
    s_assert_outcome (h, "j-a", SCHED_JOB_COMPLETED, NULL);
    //  j-b started at once, in the same call
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - db-01");
    assert_int_equal (sched_job (h->sched, "j-b")->status, SCHED_JOB_RUNNING);
    assert_int_equal (sched_running_count (h->sched), 1);
    assert_int_equal (sched_pending_count (h->sched), 1);
    s_harness_destroy (&h);
}

//  R1: the queue is ordered by priority (higher first), then age.
static void
test_sched_admission_priority_and_age (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.max_concurrent = 1;
    s_start (h);
    const char *ids [] = {"j-run", "j-low-old", "j-high-old", "j-low-new",
                          "j-high-new", "j-neg"};
    int priorities [] = {0, 0, 5, 0, 5, -3};
    for (size_t index = 0; index < 6; index++) {
        job_spec_t *spec = s_spec (TARGET_NODE, "db-01", false,
                                   JOB_STRATEGY_FAIL_FAST);
        spec->priority = priorities [index];
        s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
        s_submit (h, ids [index], spec);
        h->now += 10;
    }
    const char *order [] = {"j-run", "j-high-old", "j-high-new", "j-low-old",
                            "j-low-new", "j-neg"};
    for (size_t index = 0; index < 6; index++) {
        const sched_job_t *job = sched_job (h->sched, order [index]);
        assert_non_null (job);
        assert_int_equal (job->status, SCHED_JOB_RUNNING);
        assert_int_equal (sched_running_count (h->sched), 1);
        s_run (h, order [index], 0, "db-01", "success");
        s_assert_outcome (h, order [index], SCHED_JOB_COMPLETED, NULL);
    }
    assert_int_equal (sched_pending_count (h->sched), 0);
    assert_int_equal (sched_running_count (h->sched), 0);
    s_harness_destroy (&h);
}

//  R1: a queued job waits for a free slot; a tick admits it when a slot
//  is free (after a restore, for instance) and next_deadline says so.
static void
test_sched_admission_on_tick (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.max_concurrent = 1;
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_NODE, "db-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    sched_job_t *job = sched_job_new ("j-restored", &spec);
    assert_int_equal (sched_restore (h->sched, &job, h->now), 0);
    assert_null (job);
    s_drain (h);
    assert_int_equal (sched_pending_count (h->sched), 1);
    assert_int_equal (sched_next_deadline_ms (h->sched), h->now);
    size_t mark = h->log_count;
    s_tick (h, h->now + 1);
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - db-01");
    assert_int_equal (sched_pending_count (h->sched), 0);
    assert_int_equal (sched_running_count (h->sched), 1);
    s_harness_destroy (&h);
}

//  R1: while paused (maintenance, restart hold) queued jobs wait, even
//  with free slots; submits are still queued; resuming admits them.
static void
test_sched_admission_paused (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    sched_set_paused (h->sched, true);
    assert_true (sched_paused (h->sched));
    job_spec_t *spec = s_spec (TARGET_NODE, "db-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-paused", spec);
    s_tick (h, h->now + 1000);
    assert_int_equal (sched_pending_count (h->sched), 1);
    assert_int_equal (sched_running_count (h->sched), 0);
    assert_int_equal (sched_next_deadline_ms (h->sched), INT64_MAX);
    sched_set_paused (h->sched, false);
    size_t mark = h->log_count;
    s_tick (h, h->now + 1);
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - db-01");
    assert_int_equal (sched_running_count (h->sched), 1);
    s_harness_destroy (&h);
}

//  R2: no node matches: the job fails at once with a reason.
static void
test_sched_start_no_node (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "nosuch", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-none", spec);
    s_assert_outcome (h, "j-none", SCHED_JOB_FAILED,
                      "no online node matches group:nosuch");
    assert_int_equal (s_type_count (h, 0, SCHED_ACTION_DISPATCH), 0);
    assert_int_equal (sched_running_count (h->sched), 0);
    //  Members that cannot run it are named in the reason
    h->fleet [3].online = false;
    spec = s_spec (TARGET_GROUP, "db", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-off", spec);
    s_assert_outcome (h, "j-off", SCHED_JOB_FAILED,
                      "no node of group:db can run it: db-01 offline since "
                      "12:01:07");
    //  A named node that cannot run it gets its rows (R2): the job fails
    //  with every cell saying why
    spec = s_spec (TARGET_NODE, "db-01", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-named", spec);
    s_assert_outcome (h, "j-named", SCHED_JOB_FAILED,
                      "1 of 1 node not run: db-01 offline since 12:01:07");
    assert_cell (h, "j-named", 0, "db-01", SCHED_CELL_OFFLINE);
    s_harness_destroy (&h);
}

//  R2: `any` picks one node and rotates through the candidates; its
//  dispatch goes to that node's own topic.
static void
test_sched_any_target_rotates (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    const char *ids [] = {"j-1", "j-2", "j-3", "j-4"};
    const char *want [] = {"0/1 - web-01", "0/1 - web-02", "0/1 - web-03",
                           "0/1 - web-01"};
    for (size_t index = 0; index < 4; index++) {
        size_t mark = h->log_count;
        job_spec_t *spec = s_spec (TARGET_GROUP, "web", true,
                                   JOB_STRATEGY_FAIL_FAST);
        s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
        s_submit (h, ids [index], spec);
        assert_string_equal (s_sends (h, mark, NULL), want [index]);
        assert_int_equal (sched_job (h->sched, ids [index])->expected_count, 1);
    }
    s_run (h, "j-2", 0, "web-02", "success");
    s_assert_outcome (h, "j-2", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R2, R15: start allocates sorted expected x steps cells, all pending,
//  and the actions come in the documented order.
//  R15: a cell remembers when its status last changed (node.workers'
//  "since"), and the live jobs can be listed (queue.stats).
static void
test_sched_cell_since_and_live_jobs (void **state)
{
    const char *fleet [] = {"web-01:web", "web-02:web"};
    harness_t *h = s_harness_new (fleet, 2);
    s_start (h);
    h->now = 1000;
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    const sched_job_t *job = sched_job (h->sched, "j-1");
    assert_int_equal (job->cells [0].since_ms, 1000);
    h->now = 1500;
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    h->now = 1700;
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);
    //  A repeated ack changes nothing, the time included
    h->now = 1800;
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 1);
    assert_int_equal (job->cells [0].since_ms, 1700);
    assert_int_equal (job->cells [1].since_ms, 1000);
    job_spec_t *other = s_spec (TARGET_GROUP, "web", false,
                                JOB_STRATEGY_FAIL_FAST);
    s_leaf (other, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-2", other);
    const sched_job_t **live = NULL;
    assert_int_equal (sched_live_jobs (h->sched, &live), 2);
    assert_true ((live [0] == job) != (live [1] == job));
    free (live);
    s_harness_destroy (&h);
}

static void
test_sched_start_actions (void **state)
{
    const char *fleet [] = {"web-03:web", "web-01:web", "web-02:web"};
    harness_t *h = s_harness_new (fleet, 3);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    const sched_job_t *job = sched_job (h->sched, "j-1");
    assert_int_equal (job->status, SCHED_JOB_RUNNING);
    assert_int_equal (job->expected_count, 3);
    assert_string_equal (job->expected [0], "web-01");
    assert_string_equal (job->expected [1], "web-02");
    assert_string_equal (job->expected [2], "web-03");
    assert_int_equal (job->step_count, 2);
    for (size_t index = 0; index < 3; index++) {
        assert_int_equal (job->cells [index].status, SCHED_CELL_DISPATCHED);
        assert_int_equal (job->cells [index].attempt, 1);
        assert_int_equal (job->cells [3 + index].status, SCHED_CELL_PENDING);
        assert_int_equal (job->cells [3 + index].attempt, 0);
    }
    //  SAVE_JOB, EVENT submitted, SAVE_JOB, EVENT started, then the step
    assert_int_equal (h->log [0].type, SCHED_ACTION_SAVE_JOB);
    assert_int_equal (h->log [1].type, SCHED_ACTION_EVENT);
    assert_string_equal (h->log [1].event, "submitted");
    assert_int_equal (h->log [2].type, SCHED_ACTION_SAVE_JOB);
    assert_int_equal (h->log [3].type, SCHED_ACTION_EVENT);
    assert_string_equal (h->log [3].event, "started");
    //  A broadcast saves its first node's dispatched cell only (R16)
    assert_int_equal (s_type_count (h, 0, SCHED_ACTION_SAVE_CELL), 1);
    assert_int_equal (h->log [4].type, SCHED_ACTION_SAVE_CELL);
    assert_string_equal (h->log [4].node, "web-01");
    assert_int_equal (s_type_count (h, 0, SCHED_ACTION_DISPATCH), 1);
    //  One dispatched event for the broadcast: job-level, "to N nodes"
    assert_int_equal (s_events (h, 0, "dispatched", NULL, 0), 1);
    assert_string_equal (s_event_detail (h, 0, "dispatched", NULL),
                         "to 3 nodes");
    record_t *last = &h->log [h->log_count - 1];
    assert_int_equal (last->type, SCHED_ACTION_EVENT);
    assert_null (last->node);
    s_harness_destroy (&h);
}

//  R3: steps are numbered depth-first: [leaf, pipeline[leaf, leaf], leaf]
//  gives 0, 1, 2, 3.
static void
test_sched_step_numbering (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_NODE, "db-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "apt", "update", JOB_COND_ALWAYS);
    s_sub (spec, branch, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "start", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    assert_int_equal (sched_job (h->sched, "j-1")->step_count, 4);
    for (uint32_t step = 0; step < 4; step++)
        s_run (h, "j-1", step, "db-01", "success");
    assert_string_equal (s_sends (h, 0, NULL),
                         "0/1 - db-01; 1/1 - db-01; 2/1 - db-01; 3/1 - db-01");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    assert_int_equal (s_finished (h, "j-1")->step, 4);
    s_harness_destroy (&h);
}

//  R4: a barrier waits for its slowest node.
static void
test_sched_barrier_waits_for_slowest (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "upgrade", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-03", "success");
    s_run (h, "j-1", 0, "web-01", "success");
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    h->now += 60000;
    s_tick (h, h->now);            //  Time alone does not move a barrier
    assert_string_equal (s_sends (h, mark, NULL), "");
    assert_int_equal (sched_job (h->sched, "j-1")->step, 0);
    assert_cell (h, "j-1", 1, "web-01", SCHED_CELL_PENDING);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "success", NULL), 0);
    assert_string_equal (s_sends (h, mark, NULL), "1/1 group/web/ " WEB);
    assert_int_equal (sched_job (h->sched, "j-1")->step, 1);
    s_harness_destroy (&h);
}

//  R4 and R15: GRID's flat example: step 0 to all three on the group
//  topic, step 1 only after 3/3, then the job completes; the last three
//  actions are SAVE_JOB, EVENT finished, FINISHED.
static void
test_sched_grid_flat_example (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "restart", JOB_COND_ALWAYS);
    s_submit (h, "j1", spec);
    assert_string_equal (s_sends (h, 0, NULL), "0/1 group/web/ " WEB);
    size_t mark = h->log_count;
    s_run (h, "j1", 0, "web-01", "success");
    s_run (h, "j1", 0, "web-02", "success");
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_run (h, "j1", 0, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL), "1/1 group/web/ " WEB);
    s_run (h, "j1", 1, "web-01", "success");
    s_run (h, "j1", 1, "web-02", "success");
    s_run (h, "j1", 1, "web-03", "success");
    assert_string_equal (s_sends (h, 0, NULL),
                         "0/1 group/web/ " WEB "; 1/1 group/web/ " WEB);
    s_assert_outcome (h, "j1", SCHED_JOB_COMPLETED, NULL);
    size_t n = h->log_count;
    assert_int_equal (h->log [n - 3].type, SCHED_ACTION_SAVE_JOB);
    assert_int_equal (h->log [n - 2].type, SCHED_ACTION_EVENT);
    assert_string_equal (h->log [n - 2].event, "finished");
    assert_string_equal (h->log [n - 2].detail, "completed");
    assert_int_equal (h->log [n - 1].type, SCHED_ACTION_FINISHED);
    //  Every cell change was saved but a broadcast's dispatch, which
    //  saves its first node's cell only (R16): 6 cells x (acknowledged,
    //  success) and 2 dispatched
    assert_int_equal (s_type_count (h, 0, SCHED_ACTION_SAVE_CELL), 14);
    assert_int_equal (s_events (h, 0, "acknowledged", NULL, -1), 6);
    assert_int_equal (s_events (h, 0, "succeeded", NULL, -1), 6);
    assert_int_equal (s_events (h, 0, "finished", NULL, -1), 1);
    assert_int_equal (sched_running_count (h->sched), 0);
    s_harness_destroy (&h);
}

//  R4: a compound target has no topic of its own, so every step goes to
//  each resolved node's own topic and never to a wider one.
static void
test_sched_expression_target_goes_per_node (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_ALL, NULL, false,
                               JOB_STRATEGY_FAIL_FAST);
    assert_int_equal (target_parse ("group:web and not node:web-02",
                                    &spec->target, NULL, 0),
                      0);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j1", spec);
    assert_string_equal (s_sends (h, 0, NULL), "0/1 - web-01,web-03");
    s_run (h, "j1", 0, "web-01", "success");
    s_run (h, "j1", 0, "web-03", "success");
    s_run (h, "j1", 1, "web-01", "success");
    s_run (h, "j1", 1, "web-03", "success");
    assert_string_equal (s_sends (h, 0, NULL),
                         "0/1 - web-01,web-03; 1/1 - web-01,web-03");
    s_assert_outcome (h, "j1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R5 and R3: GRID's hierarchical example: per-node sub-steps interleave
//  as results arrive, then the barrier step 3 goes out on the group topic.
static void
test_sched_grid_hierarchical_example (void **state)
{
    const char *fleet [] = {"web-01:web", "web-02:web"};
    harness_t *h = s_harness_new (fleet, 2);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "apt", "update", JOB_COND_ALWAYS);
    s_sub (spec, branch, "apt", "install", JOB_COND_ALWAYS);
    s_sub (spec, branch, "systemd", "enable", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "start", JOB_COND_ALWAYS);
    s_submit (h, "j2", spec);
    assert_string_equal (s_sends (h, 0, NULL), "0/1 - web-01; 0/1 - web-02");
    size_t mark = h->log_count;
    s_run (h, "j2", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "1/1 - web-01");
    s_run (h, "j2", 1, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 - web-01; 2/1 - web-01");
    assert_int_equal (sched_job (h->sched, "j2")->step, 0);
    s_run (h, "j2", 0, "web-02", "success");
    assert_int_equal (sched_job (h->sched, "j2")->step, 1);
    s_run (h, "j2", 2, "web-01", "success");
    s_run (h, "j2", 1, "web-02", "success");
    assert_int_equal (sched_job (h->sched, "j2")->step, 2);
    s_run (h, "j2", 2, "web-02", "success");
    assert_int_equal (sched_job (h->sched, "j2")->step, 3);
    assert_string_equal (s_sends (h, 0, NULL),
                         "0/1 - web-01; 0/1 - web-02; "
                         "1/1 - web-01; 2/1 - web-01; 1/1 - web-02; "
                         "2/1 - web-02; 3/1 group/web/ web-01,web-02");
    s_run (h, "j2", 3, "web-01", "success");
    s_run (h, "j2", 3, "web-02", "success");
    s_assert_outcome (h, "j2", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R5: in a pipeline a node moves on at once, however far behind the
//  others are, and never waits for them.
static void
test_sched_pipeline_node_advances (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "one", JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "two", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-02", "success");
    assert_string_equal (s_sends (h, mark, NULL), "1/1 - web-02");
    s_run (h, "j-1", 1, "web-02", "success");
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SUCCESS);
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_DISPATCHED);
    assert_int_equal (sched_job (h->sched, "j-1")->status, SCHED_JOB_RUNNING);
    s_run (h, "j-1", 0, "web-01", "success");
    s_run (h, "j-1", 0, "web-03", "success");
    s_run (h, "j-1", 1, "web-03", "success");
    s_run (h, "j-1", 1, "web-01", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R6 (top level) and R8: under continue, on_success is skipped after a
//  failure (a fine skip), on_failure runs on the nodes still in.
static void
test_sched_conditions_top_level (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "test", "check", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "notify", JOB_COND_ON_SUCCESS);
    s_leaf (spec, "test", "repair", JOB_COND_ON_FAILURE);
    s_leaf (spec, "test", "report", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-01", "success");
    s_run (h, "j-1", 0, "web-02", "failed");
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-03", "success");
    //  Step 1 skipped (condition), step 2 sent to the two nodes still in
    assert_string_equal (s_sends (h, mark, NULL),
                         "2/1 group/web/ web-01,web-03");
    assert_cell (h, "j-1", 1, "web-01", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 1, "web-03", SCHED_CELL_SKIPPED);
    assert_int_equal (s_events (h, mark, "skipped", NULL, 1), 1);
    assert_string_equal (s_event_detail (h, mark, "skipped", NULL),
                         "2 nodes: condition on_success not met");
    s_run (h, "j-1", 2, "web-01", "success");
    s_run (h, "j-1", 2, "web-03", "success");
    s_run (h, "j-1", 3, "web-01", "success");
    s_run (h, "j-1", 3, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 3 nodes failed at step 0 (test check)");

    //  Nothing failed: on_failure is skipped, and that is fine
    spec = s_spec (TARGET_GROUP, "web", false, JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "test", "check", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "repair", JOB_COND_ON_FAILURE);
    s_leaf (spec, "test", "notify", JOB_COND_ON_SUCCESS);
    s_submit (h, "j-2", spec);
    mark = h->log_count;
    s_run (h, "j-2", 0, "web-01", "success");
    s_run (h, "j-2", 0, "web-02", "success");
    s_run (h, "j-2", 0, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL), "2/1 group/web/ " WEB);
    assert_cell (h, "j-2", 1, "web-02", SCHED_CELL_SKIPPED);
    s_run (h, "j-2", 2, "web-01", "success");
    s_run (h, "j-2", 2, "web-02", "success");
    s_run (h, "j-2", 2, "web-03", "success");
    s_assert_outcome (h, "j-2", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R6 (inside a pipeline): conditions see failures from before the
//  pipeline and on the same node earlier in it; a branch has its own
//  condition too.
static void
test_sched_conditions_in_pipeline (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "install", JOB_COND_ALWAYS);      //  0
    s_sub (spec, branch, "test", "verify", JOB_COND_ON_SUCCESS);   //  1
    s_sub (spec, branch, "test", "undo", JOB_COND_ON_FAILURE);     //  2
    s_sub (spec, branch, "test", "log", JOB_COND_ALWAYS);          //  3
    branch = s_branch (spec, JOB_COND_ON_FAILURE);
    s_sub (spec, branch, "test", "alert", JOB_COND_ALWAYS);        //  4
    s_sub (spec, branch, "test", "page", JOB_COND_ON_SUCCESS);     //  5
    s_submit (h, "j-1", spec);
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-02", "failed");
    //  web-02 failed: verify skipped, its rollback (undo) runs
    assert_string_equal (s_sends (h, mark, NULL), "2/1 - web-02");
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SKIPPED);
    //  ... and its later phases are already skipped (continue drops it)
    assert_cell (h, "j-1", 4, "web-02", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 5, "web-02", SCHED_CELL_SKIPPED);
    mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    //  web-01 did not fail: verify runs; undo will be skipped
    assert_string_equal (s_sends (h, mark, NULL), "1/1 - web-01");
    s_run (h, "j-1", 2, "web-02", "success");
    //  After a failure on the node, `always` sub-steps stop too
    assert_cell (h, "j-1", 3, "web-02", SCHED_CELL_SKIPPED);
    s_run (h, "j-1", 1, "web-01", "success");
    assert_cell (h, "j-1", 2, "web-01", SCHED_CELL_SKIPPED);
    s_run (h, "j-1", 3, "web-01", "success");
    s_run (h, "j-1", 0, "web-03", "success");
    s_run (h, "j-1", 1, "web-03", "success");
    mark = h->log_count;
    s_run (h, "j-1", 3, "web-03", "success");
    //  The on_failure branch runs (web-02 failed before it) on the nodes
    //  still in; inside it, on_success sees that earlier failure
    assert_string_equal (s_sends (h, mark, NULL),
                         "4/1 - web-01; 4/1 - web-03");
    s_run (h, "j-1", 4, "web-01", "success");
    s_run (h, "j-1", 4, "web-03", "success");
    assert_cell (h, "j-1", 5, "web-01", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 5, "web-03", SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 3 nodes failed at step 0 (test install)");

    //  No failure at all: the on_failure branch is skipped and it is fine
    spec = s_spec (TARGET_NODE, "db-01", false, JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "test", "check", JOB_COND_ALWAYS);
    branch = s_branch (spec, JOB_COND_ON_FAILURE);
    s_sub (spec, branch, "test", "alert", JOB_COND_ALWAYS);
    s_submit (h, "j-2", spec);
    s_run (h, "j-2", 0, "db-01", "success");
    assert_cell (h, "j-2", 1, "db-01", SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-2", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R7 and the third GRID example: fail-fast skips everything but
//  on_failure, and the rollback runs on every node that took part and is
//  still reachable.
static void
test_sched_fail_fast_rollback (void **state)
{
    const char *fleet [] = {"web-01:web", "web-02:web", "web-03:web"};
    harness_t *h = s_harness_new (fleet, 3);
    s_start (h);
    //  All succeed: the rollback is skipped and the job completes
    job_spec_t *spec = s_spec (TARGET_ALL, NULL, false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "start", JOB_COND_ALWAYS);
    size_t branch = s_branch (spec, JOB_COND_ON_FAILURE);
    s_sub (spec, branch, "apt", "remove", JOB_COND_ALWAYS);
    s_submit (h, "j-ok", spec);
    for (uint32_t step = 0; step < 2; step++) {
        s_run (h, "j-ok", step, "web-01", "success");
        s_run (h, "j-ok", step, "web-02", "success");
        s_run (h, "j-ok", step, "web-03", "success");
    }
    assert_string_equal (s_sends (h, 0, NULL),
                         "0/1 all/ " WEB "; 1/1 all/ " WEB);
    assert_cell (h, "j-ok", 2, "web-01", SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-ok", SCHED_JOB_COMPLETED, NULL);

    //  web-02 fails the install: start is skipped on all, remove runs on
    //  all three (all took part), and the job fails
    spec = s_spec (TARGET_ALL, NULL, false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "start", JOB_COND_ALWAYS);
    branch = s_branch (spec, JOB_COND_ON_FAILURE);
    s_sub (spec, branch, "apt", "remove", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "notify", JOB_COND_ON_SUCCESS);
    s_submit (h, "j-bad", spec);
    size_t mark = h->log_count;
    s_run (h, "j-bad", 0, "web-02", "failed");
    s_run (h, "j-bad", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_run (h, "j-bad", 0, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "2/1 - web-01; 2/1 - web-02; 2/1 - web-03");
    assert_cell (h, "j-bad", 1, "web-01", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-bad", 1, "web-02", SCHED_CELL_SKIPPED);
    assert_string_equal (s_event_detail (h, mark, "skipped", NULL),
                         "3 nodes: fail-fast: an earlier step failed");
    s_run (h, "j-bad", 2, "web-01", "success");
    s_run (h, "j-bad", 2, "web-02", "success");
    s_run (h, "j-bad", 2, "web-03", "success");
    assert_cell (h, "j-bad", 3, "web-03", SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-bad", SCHED_JOB_FAILED,
                      "1 of 3 nodes failed at step 0 (apt install); 2 skipped");

    //  A node lost during the failing step gets no rollback
    spec = s_spec (TARGET_ALL, NULL, false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "remove", JOB_COND_ON_FAILURE);
    s_submit (h, "j-lost", spec);
    mark = h->log_count;
    assert_int_equal (sched_on_node_offline (h->sched, "web-03", h->now), 0);
    s_drain (h);
    s_run (h, "j-lost", 0, "web-01", "success");
    s_run (h, "j-lost", 0, "web-02", "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 all/ web-01,web-02");
    assert_cell (h, "j-lost", 0, "web-03", SCHED_CELL_LOST);
    assert_cell (h, "j-lost", 1, "web-03", SCHED_CELL_SKIPPED);
    s_run (h, "j-lost", 1, "web-01", "success");
    s_run (h, "j-lost", 1, "web-02", "success");
    s_assert_outcome (h, "j-lost", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 3 nodes failed at step 0 (apt install)");
    s_harness_destroy (&h);
}

//  R7: fail-fast inside a pipeline: the failing node stops; the others
//  finish their current sub-step and stop there.
static void
test_sched_fail_fast_in_pipeline (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "one", JOB_COND_ALWAYS);     //  0
    s_sub (spec, branch, "test", "two", JOB_COND_ALWAYS);     //  1
    s_sub (spec, branch, "test", "three", JOB_COND_ALWAYS);   //  2
    s_leaf (spec, "test", "after", JOB_COND_ALWAYS);          //  3
    s_leaf (spec, "test", "rollback", JOB_COND_ON_FAILURE);   //  4
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-03", "success");    //  web-03 is ahead, at 1
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "failed");
    assert_string_equal (s_sends (h, mark, NULL), "");
    assert_cell (h, "j-1", 1, "web-01", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 2, "web-01", SCHED_CELL_SKIPPED);
    s_run (h, "j-1", 0, "web-02", "success");    //  finishes 0, stops
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SKIPPED);
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_run (h, "j-1", 1, "web-03", "success");    //  finishes 1, stops
    assert_cell (h, "j-1", 2, "web-03", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 3, "web-03", SCHED_CELL_SKIPPED);
    assert_string_equal (s_sends (h, mark, NULL), "4/1 group/web/ " WEB);
    s_run (h, "j-1", 4, "web-01", "success");
    s_run (h, "j-1", 4, "web-02", "success");
    s_run (h, "j-1", 4, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "1 of 3 nodes failed at step 0 (test one); 2 skipped");
    s_harness_destroy (&h);
}

//  R7 and R8: continue drops the failed node (its later cells read
//  skipped at once), the others go on, the job ends partial_failure;
//  when every node fails the job fails.
static void
test_sched_continue_drops_failed (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "start", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-01", "success");
    s_run (h, "j-1", 0, "web-03", "success");
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-02", "failed");
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_FAILED);
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 2, "web-02", SCHED_CELL_SKIPPED);
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 group/web/ web-01,web-03");
    assert_string_equal (s_event_detail (h, mark, "skipped", "web-02"),
                         "2 steps skipped: node dropped after a failure");
    s_run (h, "j-1", 1, "web-01", "failed");
    s_run (h, "j-1", 1, "web-03", "success");
    s_run (h, "j-1", 2, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "2 of 3 nodes failed, first at step 0 (apt update)");

    spec = s_spec (TARGET_GROUP, "web", false, JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "start", JOB_COND_ALWAYS);
    s_submit (h, "j-2", spec);
    s_run (h, "j-2", 0, "web-01", "failed");
    s_run (h, "j-2", 0, "web-02", "failed");
    s_run (h, "j-2", 0, "web-03", "success");
    s_run (h, "j-2", 1, "web-03", "success");
    s_assert_outcome (h, "j-2", SCHED_JOB_PARTIAL_FAILURE,
                      "2 of 3 nodes failed at step 0 (apt install)");
    s_harness_destroy (&h);
}

//  R8: every node failing ends failed, with the reason.
static void
test_sched_all_nodes_fail (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-01", "failed");
    s_run (h, "j-1", 0, "web-02", "failed");
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-03", "failed");
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "3 of 3 nodes failed at step 0 (apt update)");
    assert_cell (h, "j-1", 1, "web-03", SCHED_CELL_SKIPPED);
    s_harness_destroy (&h);
}

//  R11: retries on the failing node only, each attempt recorded, with
//  capped exponential backoff and equal jitter: the wait before attempt
//  a+1 is within [b - b/2, b], b = min (cap, base * 2^(a-1)).
static void
test_sched_retry_backoff (void **state)
{
    uint64_t seeds [] = {1, 42, 0xdeadbeef, 7777777};
    for (size_t round = 0; round < 4; round++) {
        harness_t *h = s_harness_new (s_web3, 4);
        h->config.retry_base_ms = 1000;
        h->config.retry_cap_ms = 3000;
        h->config.seed = seeds [round];
        s_start (h);
        job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                                   JOB_STRATEGY_CONTINUE);
        s_leaf (spec, "apt", "update", JOB_COND_ALWAYS)->max_retries = 3;
        s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
        s_submit (h, "j-1", spec);
        s_run (h, "j-1", 0, "web-01", "success");
        s_run (h, "j-1", 0, "web-03", "success");
        int64_t bounds [4] [2] = {{500, 1000}, {1000, 2000}, {1500, 3000},
                                  {0, 0}};
        for (uint32_t attempt = 1; attempt <= 4; attempt++) {
            size_t mark = h->log_count;
            assert_int_equal (s_ack (h, "j-1", 0, attempt, "web-02"), 0);
            assert_int_equal (s_started (h, "j-1", 0, attempt, "web-02"), 0);
            assert_int_equal (s_result (h, "j-1", 0, attempt, "web-02",
                                        attempt == 2 ? "timeout" : "failed",
                                        "exit 1"),
                              0);
            if (attempt == 4)
                break;
            const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-02");
            assert_int_equal (cell->status, SCHED_CELL_RETRY_WAIT);
            assert_int_equal (cell->attempt_count, attempt);
            assert_int_equal (s_events (h, mark, "retried", "web-02", 0), 1);
            int64_t due = sched_next_deadline_ms (h->sched);
            int64_t wait = due - h->now;
            assert_true (wait >= bounds [attempt - 1] [0]);
            assert_true (wait <= bounds [attempt - 1] [1]);
            s_tick (h, due - 1);
            assert_string_equal (s_sends (h, mark, NULL), "");
            s_tick (h, due);
            char want [64];
            snprintf (want, sizeof (want), "0/%u - web-02", attempt + 1);
            assert_string_equal (s_sends (h, mark, NULL), want);
            assert_int_equal (s_live_cell (h, "j-1", 0, "web-02")->attempt,
                              attempt + 1);
        }
        //  Fourth failure: no retries left (max_retries 3 = 4 attempts)
        assert_null (s_finished (h, "j-1"));
        assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_FAILED);
        const sched_job_t *job = sched_job (h->sched, "j-1");
        const sched_cell_t *cell = &job->cells [1];
        assert_int_equal (cell->attempt_count, 4);
        for (uint32_t at = 0; at < 4; at++) {
            assert_int_equal (cell->attempts [at].attempt, at + 1);
            assert_int_equal (cell->attempts [at].status,
                              at == 1 ? SCHED_CELL_TIMEOUT : SCHED_CELL_FAILED);
            assert_string_equal (cell->attempts [at].error, "exit 1");
            assert_string_equal (cell->attempts [at].output, "out");
            assert_int_equal (cell->attempts [at].exit_code, 1);
            assert_int_equal (cell->attempts [at].duration_ms, 25);
        }
        assert_int_equal (s_events (h, 0, "retried", NULL, -1), 3);
        s_run (h, "j-1", 1, "web-01", "success");
        s_run (h, "j-1", 1, "web-03", "success");
        s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                          "1 of 3 nodes failed at step 0 (apt update)");
        s_harness_destroy (&h);
    }
}

//  R11: refused fails at once without retry; cancelled reads cancelled;
//  interrupted is retried like a failure.
static void
test_sched_result_kinds (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS)->max_retries = 2;
    s_submit (h, "j-1", spec);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "refused",
                                "no such action"),
                      0);
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_FAILED);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "cancelled", NULL),
                      0);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_CANCELLED);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-03", "interrupted",
                                NULL),
                      0);
    assert_cell (h, "j-1", 0, "web-03", SCHED_CELL_RETRY_WAIT);
    assert_int_equal (s_events (h, 0, "interrupted", "web-03", 0), 1);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-03", "bogus", NULL), -1);
    s_tick (h, sched_next_deadline_ms (h->sched));
    s_run (h, "j-1", 0, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "2 of 3 nodes failed at step 0 (apt update)");
    s_harness_destroy (&h);
}

//  R9: no ack within ack_timeout: RESEND direct, up to ack_resends times,
//  each with a fresh timeout; then lost.
static void
test_sched_ack_timeout_resends_then_lost (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.ack_timeout_ms = 2000;
    h->config.ack_resends = 2;
    s_start (h);
    h->now = 0;
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    assert_int_equal (sched_next_deadline_ms (h->sched), 2000);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    size_t mark = h->log_count;
    s_tick (h, 1999);
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_tick (h, 2000);
    assert_string_equal (s_sends (h, mark, NULL), "resend 0/1 web-03");
    assert_int_equal (sched_next_deadline_ms (h->sched), 4000);
    s_tick (h, 4000);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 web-03; resend 0/1 web-03");
    s_tick (h, 5999);
    assert_cell (h, "j-1", 0, "web-03", SCHED_CELL_DISPATCHED);
    s_tick (h, 6000);
    assert_cell (h, "j-1", 0, "web-03", SCHED_CELL_LOST);
    assert_cell (h, "j-1", 1, "web-03", SCHED_CELL_SKIPPED);
    assert_int_equal (s_events (h, mark, "lost", "web-03", 0), 1);
    assert_string_equal (s_event_detail (h, mark, "lost", "web-03"),
                         "no acknowledgement after 3 sends");
    const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-03");
    assert_int_equal (cell->attempt_count, 1);
    assert_int_equal (cell->attempts [0].status, SCHED_CELL_LOST);
    assert_string_equal (cell->attempts [0].error,
                         "no acknowledgement after 3 sends");
    //  A late ack for the lost attempt changes nothing
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-03"), 1);
    //  Acked nodes are not re-sent: their clock is the task timeout now
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 web-03; resend 0/1 web-03");
    s_harness_destroy (&h);
}

//  R10: after the ack the broker allows timeout + grace, restarted at
//  started; past it the cell reads timeout and the node gets a CANCEL.
static void
test_sched_task_timeout (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.grace_ms = 5000;
    h->config.default_timeout_ms = 60000;
    s_start (h);
    h->now = 0;
    job_spec_t *spec = s_spec (TARGET_NODE, "web-01,web-02", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "test", "sleep", JOB_COND_ALWAYS)->timeout_ms = 10000;
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    //  A node list goes per node, not on a broadcast topic
    assert_string_equal (s_sends (h, 0, NULL), "0/1 - web-01,web-02");
    h->now = 100;
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    assert_int_equal (sched_next_deadline_ms (h->sched), 15100);
    h->now = 1000;
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 1);
    size_t mark = h->log_count;
    s_tick (h, 15100);
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_RUNNING);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_TIMEOUT);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-02");
    const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-02");
    assert_int_equal (cell->attempt_count, 1);
    assert_int_equal (cell->attempts [0].status, SCHED_CELL_TIMEOUT);
    assert_string_equal (cell->attempts [0].error,
                         "no result within 10s + grace");
    //  A late result for the timed-out attempt changes nothing
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "success", NULL), 1);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_TIMEOUT);
    s_tick (h, 15999);
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_RUNNING);
    s_tick (h, 16000);
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_TIMEOUT);
    assert_string_equal (s_sends (h, mark, NULL),
                         "cancel web-02; cancel web-01");
    assert_int_equal (s_events (h, mark, "timeout", NULL, 0), 2);
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "2 of 2 nodes failed at step 0 (test sleep)");
    s_harness_destroy (&h);
}

//  R13: the job timeout cancels the rest and fails the job.
static void
test_sched_job_timeout (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    h->now = 0;
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    spec->timeout_ms = 30 * 60000;
    //  Task timeouts longer than the job's, so the job's comes first
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "one", JOB_COND_ALWAYS)->timeout_ms = 7200000;
    s_sub (spec, branch, "test", "two", JOB_COND_ALWAYS)->timeout_ms = 7200000;
    s_leaf (spec, "test", "three", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    h->now = 1000;
    s_run (h, "j-1", 0, "web-01", "success");     //  web-01 at step 1
    assert_int_equal (s_ack (h, "j-1", 1, 1, "web-01"), 0);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-03"), 0);
    s_run (h, "j-1", 0, "web-02", "success");
    s_run (h, "j-1", 1, "web-02", "success");     //  web-02 done
    size_t mark = h->log_count;
    s_tick (h, 30 * 60000 - 1);
    assert_int_equal (sched_job (h->sched, "j-1")->status, SCHED_JOB_RUNNING);
    s_tick (h, 30 * 60000);
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED, "job timeout after 30m");
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-01,web-03");
    assert_cell (h, "j-1", 1, "web-01", SCHED_CELL_CANCELLED);
    assert_cell (h, "j-1", 0, "web-03", SCHED_CELL_CANCELLED);
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SUCCESS);
    assert_cell (h, "j-1", 2, "web-02", SCHED_CELL_CANCELLED);
    assert_cell (h, "j-1", 1, "web-03", SCHED_CELL_CANCELLED);
    assert_int_equal (sched_next_deadline_ms (h->sched), INT64_MAX);
    //  The finished job is gone: events for it are refused
    assert_int_equal (s_ack (h, "j-1", 1, 1, "web-01"), -1);
    s_harness_destroy (&h);
}

//  R14: cancel during a barrier.
static void
test_sched_cancel_barrier (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-02", "success");
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    size_t mark = h->log_count;
    assert_int_equal (sched_cancel (h->sched, "j-1", "operator said so",
                                    h->now),
                      0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-01,web-03");
    s_assert_outcome (h, "j-1", SCHED_JOB_CANCELLED, "operator said so");
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_CANCELLED);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_SUCCESS);
    assert_cell (h, "j-1", 0, "web-03", SCHED_CELL_CANCELLED);
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_CANCELLED);
    assert_int_equal (s_events (h, mark, "cancelled", NULL, -1), 3);
    assert_int_equal (h->log [h->log_count - 1].type, SCHED_ACTION_FINISHED);
    assert_int_equal (sched_cancel (h->sched, "j-1", NULL, h->now), -1);
    assert_int_equal (sched_cancel (h->sched, "j-nope", NULL, h->now), -1);
    s_harness_destroy (&h);
}

//  R14: cancel during a pipeline.
static void
test_sched_cancel_pipeline (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "one", JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "two", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-01", "success");
    s_run (h, "j-1", 1, "web-01", "success");   //  web-01 done
    s_run (h, "j-1", 0, "web-02", "success");   //  web-02 at 1
    s_run (h, "j-1", 0, "web-03", "failed");    //  web-03 stopped
    size_t mark = h->log_count;
    assert_int_equal (sched_cancel (h->sched, "j-1", NULL, h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-02");
    s_assert_outcome (h, "j-1", SCHED_JOB_CANCELLED, "cancelled by request");
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_CANCELLED);
    assert_cell (h, "j-1", 1, "web-01", SCHED_CELL_SUCCESS);
    assert_cell (h, "j-1", 1, "web-03", SCHED_CELL_SKIPPED);
    s_harness_destroy (&h);
}

//  R14: a pending job leaves the queue and ends cancelled.
static void
test_sched_cancel_pending (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.max_concurrent = 1;
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_NODE, "db-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-run", spec);
    spec = s_spec (TARGET_NODE, "db-01", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-wait", spec);
    assert_int_equal (sched_pending_count (h->sched), 1);
    size_t mark = h->log_count;
    assert_int_equal (sched_cancel (h->sched, "j-wait", "not needed", h->now),
                      0);
    s_drain (h);
    assert_int_equal (sched_pending_count (h->sched), 0);
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_assert_outcome (h, "j-wait", SCHED_JOB_CANCELLED, "not needed");
    assert_int_equal (s_finished (h, "j-wait")->expected_count, 0);
    //  Finishing the running job starts nothing
    s_run (h, "j-run", 0, "db-01", "success");
    assert_int_equal (sched_running_count (h->sched), 0);
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_harness_destroy (&h);
}

//  R12: a node going offline mid-step: its in-flight cell reads lost, its
//  later cells skipped; the barrier goes on without it. A node that goes
//  offline between steps gets `offline` on the step it was due to run.
static void
test_sched_node_offline (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "systemd", "start", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-01", "success");
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    size_t mark = h->log_count;
    assert_int_equal (sched_on_node_offline (h->sched, "web-02", h->now), 0);
    s_drain (h);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_LOST);
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 2, "web-02", SCHED_CELL_SKIPPED);
    assert_int_equal (s_events (h, mark, "offline", "web-02", -1), 1);
    assert_int_equal (s_events (h, mark, "lost", "web-02", 0), 1);
    const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-02");
    assert_string_equal (cell->attempts [0].error, "node went offline");
    //  A result from it now is a duplicate of a decided attempt
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "success", NULL), 1);
    s_run (h, "j-1", 0, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 group/web/ web-01,web-03");
    //  web-01 finishes step 1 and goes offline while web-03 is still on it
    s_run (h, "j-1", 1, "web-01", "success");
    mark = h->log_count;
    assert_int_equal (sched_on_node_offline (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_cell (h, "j-1", 2, "web-01", SCHED_CELL_OFFLINE);
    //  Again: nothing more happens
    assert_int_equal (sched_on_node_offline (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_int_equal (s_events (h, mark, "offline", "web-01", -1), 1);
    s_run (h, "j-1", 1, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL), "2/1 group/web/ web-03");
    s_run (h, "j-1", 2, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "2 of 3 nodes failed, first at step 0 (apt update)");
    //  A node not in any job: nothing
    assert_int_equal (sched_on_node_offline (h->sched, "db-01", h->now), 0);
    assert_int_equal (sched_on_node_offline (h->sched, NULL, h->now), -1);
    s_harness_destroy (&h);
}

static job_spec_t *
s_notify_spec (void)
{
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "notify", JOB_COND_ON_SUCCESS);
    s_leaf (spec, "test", "report", JOB_COND_ALWAYS);
    return spec;
}

static void s_restart (harness_t *h, const char *job_id, job_spec_t *spec);

//  R12, R8, R16: a node that goes offline while it waits at a barrier
//  fails before the next phase: on_success is then skipped on the others
//  (a fine skip), the same after a restore.
static void
test_sched_offline_between_phases (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_submit (h, "j-1", s_notify_spec ());
    s_run (h, "j-1", 0, "web-01", "success");
    assert_int_equal (sched_on_node_offline (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_cell (h, "j-1", 1, "web-01", SCHED_CELL_OFFLINE);
    assert_cell (h, "j-1", 2, "web-01", SCHED_CELL_SKIPPED);
    s_restart (h, "j-1", s_notify_spec ());
    size_t mark = h->log_count;
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "success", NULL), 0);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-03", "success", NULL), 0);
    assert_string_equal (s_sends (h, mark, NULL),
                         "2/1 group/web/ web-02,web-03");
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SKIPPED);
    s_run (h, "j-1", 2, "web-02", "success");
    s_run (h, "j-1", 2, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 3 nodes failed at step 1 (test notify)");
    s_harness_destroy (&h);
}

//  R9, R11: acks, starteds and results for stale attempts or unknown
//  cells return -1; repeated ones return 1 and change nothing.
static void
test_sched_stale_and_duplicate (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.retry_base_ms = 10;
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS)->max_retries = 1;
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    //  Unknown job, node, step; never-sent step; attempt 0 or ahead
    assert_int_equal (s_ack (h, "j-x", 0, 1, "web-01"), -1);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "db-01"), -1);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-99"), -1);
    assert_int_equal (s_ack (h, "j-1", 7, 1, "web-01"), -1);
    assert_int_equal (s_ack (h, "j-1", 1, 1, "web-01"), -1);
    assert_int_equal (s_ack (h, "j-1", 0, 0, "web-01"), -1);
    assert_int_equal (s_ack (h, "j-1", 0, 2, "web-01"), -1);
    assert_int_equal (s_started (h, "j-1", 1, 1, "web-01"), -1);
    assert_int_equal (s_result (h, "j-1", 1, 1, "web-01", "success", NULL),
                      -1);
    assert_int_equal (s_result (h, "j-x", 0, 1, "web-01", "success", NULL),
                      -1);
    //  Repeats
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 1);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 1);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 1);
    size_t saves = s_type_count (h, 0, SCHED_ACTION_SAVE_CELL);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "success", NULL), 0);
    assert_int_equal (s_type_count (h, 0, SCHED_ACTION_SAVE_CELL), saves + 1);
    size_t log = h->log_count;
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "failed", NULL), 1);
    assert_int_equal (h->log_count, log);         //  No action at all
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_SUCCESS);
    assert_int_equal (s_live_cell (h, "j-1", 0, "web-01")->attempt_count, 1);
    //  web-02 fails attempt 1 and is retried: attempt 1 is now stale
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "failed", NULL), 0);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "failed", NULL), 1);
    s_tick (h, sched_next_deadline_ms (h->sched));
    assert_int_equal (s_live_cell (h, "j-1", 0, "web-02")->attempt, 2);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), -1);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "success", NULL),
                      -1);
    assert_int_equal (s_result (h, "j-1", 0, 2, "web-02", "success", NULL), 0);
    assert_int_equal (s_live_cell (h, "j-1", 0, "web-02")->attempt_count, 2);
    //  A result that is not a result
    proto_msg_t msg;
    memset (&msg, 0, sizeof (msg));
    msg.type = PROTO_ACK;
    assert_int_equal (sched_on_result (h->sched, &msg, h->now), -1);
    assert_int_equal (sched_on_result (h->sched, NULL, h->now), -1);
    s_harness_destroy (&h);
}

//  A deep copy of a job as the store would have it (no private fields).
//  Was the cell of JOB_ID at STEP on NODE ever saved (SAVE_CELL)?
static bool
s_saved (const harness_t *h, const char *job_id, size_t step,
         const char *node)
{
    for (size_t index = 0; index < h->log_count; index++) {
        const record_t *rec = &h->log [index];
        if (rec->type == SCHED_ACTION_SAVE_CELL && rec->step == step
            && strcmp (rec->job, job_id) == 0 && rec->node
            && strcmp (rec->node, node) == 0)
            return true;
    }
    return false;
}

//  The job as the store holds it: cells never saved read pending, with
//  no record (stored false), as jobrec_load gives them.
static sched_job_t *
s_persisted (const harness_t *h, const sched_job_t *src, job_spec_t *spec)
{
    sched_job_t *job = sched_job_new (src->id, &spec);
    assert_non_null (job);
    job->status = src->status;
    job->step = src->step;
    job->not_run_count = src->not_run_count;
    job->not_run = (sched_not_run_t *) calloc (src->not_run_count + 1,
                                               sizeof (sched_not_run_t));
    for (size_t index = 0; index < src->not_run_count; index++) {
        job->not_run [index] = src->not_run [index];
        job->not_run [index].node = s_dup (src->not_run [index].node);
        job->not_run [index].reason = s_dup (src->not_run [index].reason);
    }
    job->expected_count = src->expected_count;
    job->expected = (char **) calloc (src->expected_count, sizeof (char *));
    for (size_t index = 0; index < src->expected_count; index++)
        job->expected [index] = strdup (src->expected [index]);
    size_t cells = src->step_count * src->expected_count;
    job->cells = (sched_cell_t *) calloc (cells, sizeof (sched_cell_t));
    for (size_t index = 0; index < cells; index++) {
        const sched_cell_t *from = &src->cells [index];
        sched_cell_t *to = &job->cells [index];
        if (!s_saved (h, src->id, index / src->expected_count,
                      src->expected [index % src->expected_count]))
            continue;
        to->stored = true;
        to->status = from->status;
        to->attempt = from->attempt;
        to->reason = s_dup (from->reason);
        to->attempt_count = from->attempt_count;
        to->attempts = (sched_attempt_t *) calloc (from->attempt_count + 1,
                                                   sizeof (sched_attempt_t));
        for (size_t at = 0; at < from->attempt_count; at++) {
            to->attempts [at] = from->attempts [at];
            to->attempts [at].output = s_dup (from->attempts [at].output);
            to->attempts [at].error = s_dup (from->attempts [at].error);
            to->attempts [at].node = s_dup (from->attempts [at].node);
        }
    }
    return job;
}

static job_spec_t *
s_barrier_spec (void)
{
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    return spec;
}

//  Kills H's scheduler and restores JOB_ID into a fresh one.
static void
s_restart (harness_t *h, const char *job_id, job_spec_t *spec)
{
    sched_job_t *job = s_persisted (h, sched_job (h->sched, job_id), spec);
    sched_destroy (&h->sched);
    s_start (h);
    assert_int_equal (sched_restore (h->sched, &job, h->now), 0);
    assert_null (job);
    s_drain (h);
}

//  R16: a running barrier resumes: final cells stay, in-flight ones are
//  re-sent with the same attempt and a fresh ack deadline.
static void
test_sched_restore_barrier (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    h->now = 0;
    s_submit (h, "j-1", s_barrier_spec ());
    s_run (h, "j-1", 0, "web-01", "success");
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    h->now = 50000;
    size_t mark = h->log_count;
    s_restart (h, "j-1", s_barrier_spec ());
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 web-02; resend 0/1 web-03");
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_SUCCESS);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_DISPATCHED);
    //  No ack clock until the nodes speak again (R16)
    assert_int_equal (sched_next_deadline_ms (h->sched),
                      50000 + h->config.restore_wait_ms);
    assert_int_equal (sched_running_count (h->sched), 1);
    //  The agents dedupe and answer for attempt 1
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "success", NULL), 0);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 web-02; resend 0/1 web-03");
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-03", "success", NULL), 0);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 web-02; resend 0/1 web-03; "
                         "1/1 group/web/ " WEB);
    s_run (h, "j-1", 1, "web-01", "success");
    s_run (h, "j-1", 1, "web-02", "success");
    s_run (h, "j-1", 1, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);

    //  Restored just after a barrier went out: every node gets it again
    s_submit (h, "j-2", s_barrier_spec ());
    s_run (h, "j-2", 0, "web-01", "success");
    s_run (h, "j-2", 0, "web-02", "success");
    s_run (h, "j-2", 0, "web-03", "success");
    mark = h->log_count;
    s_restart (h, "j-2", s_barrier_spec ());
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 1/1 web-01; resend 1/1 web-02; "
                         "resend 1/1 web-03");
    s_harness_destroy (&h);
}

//  R16: a cell in flight at the restart has no ack clock until its node
//  speaks again (the agents reconnect after the broker restarts, with
//  back-off): no re-sends, never "no acknowledgement". The node's first
//  word sends it again and starts the clock; a node silent for
//  restore_wait_ms is taken for gone.
static void
test_sched_restore_waits_for_node (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.restore_wait_ms = 30000;
    s_start (h);
    h->now = 0;
    s_submit (h, "j-1", s_barrier_spec ());
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-02"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-03"), 0);
    h->now = 50000;
    s_restart (h, "j-1", s_barrier_spec ());
    size_t mark = h->log_count;
    //  Far past every ack deadline and re-send: nothing happens
    s_tick (h, 50000 + 10 * h->config.ack_timeout_ms);
    assert_string_equal (s_sends (h, mark, NULL), "");
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_DISPATCHED);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_DISPATCHED);
    //  web-01 is back: the step goes to it again, and it answers
    assert_int_equal (sched_on_heartbeat (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "resend 0/1 web-01");
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "success", NULL), 0);
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_SUCCESS);
    //  web-02 is back but silent after that: its clock runs from its word
    mark = h->log_count;
    assert_int_equal (sched_on_heartbeat (h->sched, "web-02", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "resend 0/1 web-02");
    s_tick (h, h->now + h->config.ack_timeout_ms);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 web-02; resend 0/1 web-02");
    //  web-03 never comes back: lost once the wait is over
    s_tick (h, 50000 + 30000);
    assert_cell (h, "j-1", 0, "web-03", SCHED_CELL_LOST);
    const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-03");
    assert_non_null (cell);
    assert_string_equal (cell->attempts [cell->attempt_count - 1].error,
                         "node did not come back after a broker restart");
    s_harness_destroy (&h);
}

static job_spec_t *
s_pipeline_spec (void)
{
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    size_t branch = s_branch (spec, JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "one", JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "two", JOB_COND_ALWAYS);
    s_sub (spec, branch, "test", "three", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "four", JOB_COND_ALWAYS);
    return spec;
}

//  R16: a pipeline resumes per node; a failed node stays dropped and a
//  cell waiting for its retry gets its next attempt.
static void
test_sched_restore_pipeline (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.retry_base_ms = 60000;
    s_start (h);
    job_spec_t *spec = s_pipeline_spec ();
    spec->phases [0].tasks [1].max_retries = 1;
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-01", "success");
    s_run (h, "j-1", 1, "web-01", "success");
    assert_int_equal (s_ack (h, "j-1", 2, 1, "web-01"), 0);
    assert_int_equal (s_started (h, "j-1", 2, 1, "web-01"), 0);
    s_run (h, "j-1", 0, "web-02", "failed");         //  dropped
    s_run (h, "j-1", 0, "web-03", "success");
    s_run (h, "j-1", 1, "web-03", "failed");         //  retry_wait
    assert_cell (h, "j-1", 1, "web-03", SCHED_CELL_RETRY_WAIT);
    size_t mark = h->log_count;
    spec = s_pipeline_spec ();
    spec->phases [0].tasks [1].max_retries = 1;
    s_restart (h, "j-1", spec);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 2/1 web-01; 1/2 - web-03");
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_FAILED);
    assert_cell (h, "j-1", 3, "web-02", SCHED_CELL_SKIPPED);
    assert_int_equal (sched_job (h->sched, "j-1")->step, 1);
    mark = h->log_count;
    s_run (h, "j-1", 2, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_run (h, "j-1", 1, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL), "2/1 - web-03");
    s_run (h, "j-1", 2, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "2/1 - web-03; 3/1 group/web/ web-01,web-03");
    s_run (h, "j-1", 3, "web-01", "success");
    s_run (h, "j-1", 3, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 3 nodes failed at step 0 (test one)");

    //  A finished job is not restored
    job_spec_t *done_spec = s_pipeline_spec ();
    sched_job_t *job = sched_job_new ("j-done", &done_spec);
    job->status = SCHED_JOB_COMPLETED;
    assert_int_equal (sched_restore (h->sched, &job, h->now), -1);
    assert_non_null (job);
    //  Nor a running one whose cells are missing
    job->status = SCHED_JOB_RUNNING;
    assert_int_equal (sched_restore (h->sched, &job, h->now), -1);
    sched_job_destroy (&job);
    s_harness_destroy (&h);
}


//  ---------------------------------------------------------------------
//  DAG jobs (R23, R24, R25) and rolling batches (R26)

//  A spec from a YAML job text (as a job file would say it).
static job_spec_t *
s_yaml_spec (const char *text)
{
    pv_doc_t *doc = NULL;
    char err [256] = "";
    assert_int_equal (conf_parse (text, strlen (text), &doc, err,
                                  sizeof (err)),
                      0);
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof (errors));
    int rc = job_spec_decode (pv_doc_root (doc), &spec, &errors);
    for (size_t index = 0; index < errors.count; index++)
        print_error ("%s\n", errors.items [index]);
    assert_int_equal (rc, 0);
    job_errors_clear (&errors);
    pv_doc_destroy (&doc);
    return spec;
}

//  Steps: 0 fetch, 1 build, 2 deploy (needs fetch, build)
static const char *s_join_yaml =
    "target: group:web\n"
    "tasks:\n"
    "  - {name: fetch, backend: test, action: one}\n"
    "  - {name: build, backend: test, action: two}\n"
    "  - {name: deploy, backend: test, action: three, needs: [fetch, build]}\n";

//  R23: independent tasks go out side by side on each node; a join runs
//  on a node once all it needs finished there, without waiting for the
//  other nodes.
static void
test_sched_dag_join (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    size_t mark = h->log_count;
    s_submit (h, "j-1", s_yaml_spec (s_join_yaml));
    assert_string_equal (s_sends (h, mark, NULL),
                         "0/1 - web-01; 1/1 - web-01; 0/1 - web-02; "
                         "1/1 - web-02; 0/1 - web-03; 1/1 - web-03");
    mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_run (h, "j-1", 1, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "2/1 - web-01");
    s_run (h, "j-1", 2, "web-01", "success");
    //  web-01 is done while the others have not started their join
    assert_cell (h, "j-1", 2, "web-02", SCHED_CELL_PENDING);
    for (size_t at = 0; at < 2; at++) {
        const char *node = at ? "web-03" : "web-02";
        s_run (h, "j-1", 1, node, "success");
        s_run (h, "j-1", 0, node, "success");
        s_run (h, "j-1", 2, node, "success");
    }
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R25: a barrier task waits until its needs are final on every node, then
//  goes out in one dispatch on the target's topic.
static void
test_sched_dag_barrier (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_submit (h, "j-1", s_yaml_spec (
        "target: group:web\n"
        "tasks:\n"
        "  - {name: drain, backend: test, action: one}\n"
        "  - {name: flip, backend: test, action: two, needs: drain,"
        " barrier: true}\n"
        "  - {backend: test, action: three, needs: [flip]}\n"));
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    s_run (h, "j-1", 0, "web-02", "success");
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_run (h, "j-1", 0, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL), "1/1 group/web/ " WEB);
    mark = h->log_count;
    s_run (h, "j-1", 1, "web-02", "success");
    assert_string_equal (s_sends (h, mark, NULL), "2/1 - web-02");
    s_run (h, "j-1", 1, "web-01", "success");
    s_run (h, "j-1", 1, "web-03", "success");
    s_run (h, "j-1", 2, "web-01", "success");
    s_run (h, "j-1", 2, "web-02", "success");
    s_run (h, "j-1", 2, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  Steps: 0 a; 1 b needs a; 2 undo needs a on_failure; 3 c needs undo
//  (always); 4 d needs undo (on_success)
static const char *s_cond_yaml =
    "target: node:web-01,web-02\n"
    "strategy: continue\n"
    "tasks:\n"
    "  - {name: a, backend: test, action: one}\n"
    "  - {name: b, backend: test, action: two, needs: a}\n"
    "  - {name: undo, backend: test, action: undo, needs: a,"
    " condition: on_failure}\n"
    "  - {name: c, backend: test, action: three, needs: undo,"
    " condition: always}\n"
    "  - {name: d, backend: test, action: four, needs: undo,"
    " condition: on_success}\n";

//  R24: conditions look at the needed tasks on that node; a failed need
//  lets only on_failure run; a skipped need skips all but always.
static void
test_sched_dag_conditions (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_submit (h, "j-1", s_yaml_spec (s_cond_yaml));
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "failed");
    //  b is skipped (its need failed), the rollback runs
    assert_string_equal (s_sends (h, mark, NULL), "2/1 - web-01");
    assert_cell (h, "j-1", 1, "web-01", SCHED_CELL_SKIPPED);
    assert_string_equal (s_event_detail (h, mark, "skipped", "web-01"),
                         "needs a, which failed");
    mark = h->log_count;
    s_run (h, "j-1", 0, "web-02", "success");
    //  b runs; undo is skipped (nothing failed), so c (always) runs and d
    //  (on_success) does not
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 - web-02; 3/1 - web-02");
    assert_cell (h, "j-1", 2, "web-02", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 4, "web-02", SCHED_CELL_SKIPPED);
    assert_string_equal (s_event_detail (h, mark, "skipped", "web-02"),
                         "needs undo, which was skipped");
    mark = h->log_count;
    s_run (h, "j-1", 2, "web-01", "success");
    //  The rollback worked: c and d run on web-01
    assert_string_equal (s_sends (h, mark, NULL),
                         "3/1 - web-01; 4/1 - web-01");
    s_run (h, "j-1", 1, "web-02", "success");
    s_run (h, "j-1", 3, "web-02", "success");
    s_run (h, "j-1", 3, "web-01", "success");
    s_run (h, "j-1", 4, "web-01", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 2 nodes failed at step 0 (test one)");
    s_harness_destroy (&h);
}

//  R24: under fail-fast, after the first failure only on_failure tasks
//  start; running tasks finish; skips caused by the stop are failures.
static void
test_sched_dag_fail_fast (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_submit (h, "j-1", s_yaml_spec (
        "target: node:web-01,web-02\n"
        "tasks:\n"
        "  - {name: a, backend: test, action: one}\n"
        "  - {name: b, backend: test, action: two, needs: a}\n"
        "  - {name: undo, backend: test, action: undo, needs: a,"
        " condition: on_failure}\n"));
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "failed");
    assert_string_equal (s_sends (h, mark, NULL), "2/1 - web-01");
    mark = h->log_count;
    s_run (h, "j-1", 0, "web-02", "success");
    //  web-02's b would run, but fail-fast stops it; its undo has
    //  nothing to undo
    assert_string_equal (s_sends (h, mark, NULL), "");
    assert_cell (h, "j-1", 1, "web-02", SCHED_CELL_SKIPPED);
    assert_int_equal (s_events (h, mark, "skipped", "web-02", 1), 1);
    assert_string_equal (s_event_detail (h, mark, "skipped", "web-02"),
                         "condition on_failure not met");
    s_run (h, "j-1", 2, "web-01", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "1 of 2 nodes failed at step 0 (test one); 1 skipped");
    s_harness_destroy (&h);
}

//  R23: inside a pipeline, needs order its tasks per node; a pipeline's
//  own needs hold back its first tasks; a task needing a pipeline waits
//  for all of it.
static void
test_sched_dag_pipeline (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    //  Steps: 0 base; pipeline app (needs base): 1 x, 2 y, 3 z needs x,y;
    //  4 done needs app
    s_submit (h, "j-1", s_yaml_spec (
        "target: node:web-01\n"
        "tasks:\n"
        "  - {name: base, backend: test, action: one}\n"
        "  - name: app\n"
        "    needs: [base]\n"
        "    tasks:\n"
        "      - {name: x, backend: test, action: two}\n"
        "      - {name: y, backend: test, action: three}\n"
        "      - {name: z, backend: test, action: four, needs: [x, y]}\n"
        "  - {name: done, backend: test, action: five, needs: app}\n"));
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 - web-01; 2/1 - web-01");
    mark = h->log_count;
    s_run (h, "j-1", 2, "web-01", "success");
    s_run (h, "j-1", 1, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "3/1 - web-01");
    s_run (h, "j-1", 3, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "3/1 - web-01; 4/1 - web-01");
    s_run (h, "j-1", 4, "web-01", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R16 + R24: a DAG job resumes after a restart: in-flight cells are
//  re-sent, skips caused by a failure still count, and the verdict holds.
static void
test_sched_dag_restore (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_submit (h, "j-1", s_yaml_spec (s_cond_yaml));
    s_run (h, "j-1", 0, "web-01", "failed");
    assert_int_equal (s_ack (h, "j-1", 2, 1, "web-01"), 0);
    s_run (h, "j-1", 0, "web-02", "success");
    size_t mark = h->log_count;
    s_restart (h, "j-1", s_yaml_spec (s_cond_yaml));
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 2/1 web-01; resend 1/1 web-02; "
                         "resend 3/1 web-02");
    s_run (h, "j-1", 2, "web-01", "success");
    s_run (h, "j-1", 1, "web-02", "success");
    s_run (h, "j-1", 3, "web-02", "success");
    s_run (h, "j-1", 3, "web-01", "success");
    s_run (h, "j-1", 4, "web-01", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 2 nodes failed at step 0 (test one)");
    s_harness_destroy (&h);
}

//  R23 with R17: an any-node DAG job keeps its one column; its steps go
//  through the claim like any any-node step, and a barrier is just a step
static void
test_sched_dag_any_node (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    size_t mark = h->log_count;
    s_submit (h, "j-1", s_yaml_spec (
        "target: any:group:web\n"
        "tasks:\n"
        "  - {name: a, backend: test, action: one}\n"
        "  - {name: b, backend: test, action: two, needs: a,"
        " barrier: true}\n"));
    const sched_job_t *job = sched_job (h->sched, "j-1");
    assert_int_equal (job->expected_count, 1);
    char holder [64];
    snprintf (holder, sizeof holder, "%s", job->expected [0]);
    char want [128];
    snprintf (want, sizeof want, "0/1 - %s", holder);
    assert_string_equal (s_sends (h, mark, NULL), want);
    mark = h->log_count;
    s_run (h, "j-1", 0, holder, "success");
    snprintf (want, sizeof want, "1/1 - %s", holder);
    assert_string_equal (s_sends (h, mark, NULL), want);
    s_run (h, "j-1", 1, holder, "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

static const char *s_six [] = {"n1:web", "n2:web", "n3:web", "n4:web",
                               "n5:web", "n6:web"};

//  R26: batches are consecutive runs of the sorted nodes; percents round
//  up and are at least 1; a canary makes the first batch; the last batch
//  takes what is left.
static void
test_sched_batch_split (void **state)
{
    job_spec_t *spec = s_yaml_spec ("target: all\nbatch: 40%\ncanary: 1\n"
                                    "tasks: [{backend: test, action: one}]\n");
    sched_job_t *job = sched_job_new ("j-1", &spec);
    job->expected_count = 6;
    //  6 nodes: canary 1, then 40% = 2.4 -> 3: [1] [3] [2]
    assert_int_equal (sched_job_batch_count (job), 3);
    assert_int_equal (sched_job_batch_end (job, 0), 1);
    assert_int_equal (sched_job_batch_end (job, 1), 4);
    assert_int_equal (sched_job_batch_end (job, 2), 6);
    //  Fail-fast and batches without max_failures: budget 0
    assert_int_equal (sched_job_budget (job), 0);
    //  1% of 6 nodes is 1 node per batch
    job->spec->canary = 0;
    job->spec->batch.value = 1;
    assert_int_equal (sched_job_batch_count (job), 6);
    //  A count larger than the fleet: one batch, no budget
    job->spec->batch = (job_amount_t) {true, false, 50};
    assert_int_equal (sched_job_batch_count (job), 1);
    assert_int_equal (sched_job_batch_end (job, 0), 6);
    assert_true (sched_job_budget (job) == SIZE_MAX);
    //  A percent budget of a tiny fleet is at least 1 node
    job->spec->max_failures = (job_amount_t) {true, true, 10};
    assert_int_equal (sched_job_budget (job), 1);
    job->spec->max_failures = (job_amount_t) {true, false, 0};
    assert_int_equal (sched_job_budget (job), 0);
    job->expected_count = 0;
    sched_job_destroy (&job);
}

//  R26: each batch runs the whole job before the next starts; the job
//  completes when the last (partial) batch does.
static void
test_sched_batch_rolling (void **state)
{
    harness_t *h = s_harness_new (s_six, 6);
    s_start (h);
    s_submit (h, "j-1", s_yaml_spec (
        "target: all\nbatch: 4\nmax_failures: 1\n"
        "tasks:\n"
        "  - {backend: test, action: one}\n"
        "  - {backend: test, action: two}\n"));
    const sched_job_t *job = sched_job (h->sched, "j-1");
    assert_int_equal (job->batch, 0);
    assert_int_equal (job->batch_count, 2);
    size_t mark = h->log_count;
    const char *first [] = {"n1", "n2", "n3", "n4"};
    for (size_t at = 0; at < 4; at++)
        s_run (h, "j-1", 0, first [at], "success");
    for (size_t at = 0; at < 4; at++)
        s_run (h, "j-1", 1, first [at], at == 2 ? "failed" : "success");
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 all/ n1,n2,n3,n4; 0/1 all/ n5,n6");
    assert_string_equal (s_event_detail (h, mark, "batch", NULL),
                         "batch 2/2: 2 nodes, from n5");
    assert_int_equal (sched_job (h->sched, "j-1")->batch, 1);
    s_run (h, "j-1", 0, "n5", "success");
    s_run (h, "j-1", 0, "n6", "success");
    s_run (h, "j-1", 1, "n5", "success");
    s_run (h, "j-1", 1, "n6", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 6 nodes failed at step 1 (test two)");
    s_harness_destroy (&h);
}

//  R26: once more nodes failed than the budget allows no new batch
//  starts; the untouched nodes read skipped and the job fails. Every
//  failure kind counts per node (here a lost node), and a whole batch
//  failing does not stop the job while the budget holds.
static void
test_sched_batch_budget (void **state)
{
    harness_t *h = s_harness_new (s_six, 6);
    s_start (h);
    s_submit (h, "j-1", s_yaml_spec (
        "target: all\nbatch: 2\nmax_failures: 2\nstrategy: continue\n"
        "tasks:\n"
        "  - {backend: test, action: one}\n"
        "  - {backend: test, action: two}\n"));
    //  Batch 1: both nodes fail (2 of a budget of 2): batch 2 starts
    s_run (h, "j-1", 0, "n1", "failed");
    s_run (h, "j-1", 0, "n2", "failed");
    assert_cell (h, "j-1", 1, "n1", SCHED_CELL_SKIPPED);
    assert_int_equal (sched_job (h->sched, "j-1")->batch, 1);
    //  A node of a later batch that goes offline is left alone for now
    assert_int_equal (sched_on_node_offline (h->sched, "n6", h->now), 0);
    s_drain (h);
    assert_cell (h, "j-1", 0, "n6", SCHED_CELL_PENDING);
    //  Batch 2: n3 is lost (offline while running): 3 > 2
    size_t mark = h->log_count;
    assert_int_equal (sched_on_node_offline (h->sched, "n3", h->now), 0);
    s_drain (h);
    s_run (h, "j-1", 0, "n4", "success");
    assert_string_equal (s_sends (h, mark, NULL), "1/1 all/ n4");
    s_run (h, "j-1", 1, "n4", "success");
    assert_cell (h, "j-1", 0, "n5", SCHED_CELL_SKIPPED);
    assert_cell (h, "j-1", 1, "n6", SCHED_CELL_SKIPPED);
    assert_string_equal (s_event_detail (h, mark, "skipped", NULL),
                         "2 nodes not started: failure budget 2 exceeded "
                         "in batch 2");
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "3 of 6 nodes failed at step 0 (test one); 2 nodes "
                      "not started: failure budget 2 exceeded in batch 2");
    s_harness_destroy (&h);
}

//  R26: max_failures 0 (and fail-fast batches by default) stop at the
//  first failed node; a DAG job runs batch by batch too; batches survive a
//  restart.
static void
test_sched_batch_zero_and_restore (void **state)
{
    harness_t *h = s_harness_new (s_six, 6);
    s_start (h);
    const char *yaml = "target: all\nbatch: 3\n"
                       "tasks:\n"
                       "  - {name: a, backend: test, action: one}\n"
                       "  - {backend: test, action: two, needs: a}\n";
    s_submit (h, "j-1", s_yaml_spec (yaml));
    s_run (h, "j-1", 0, "n1", "success");
    s_run (h, "j-1", 0, "n2", "success");
    s_run (h, "j-1", 0, "n3", "success");
    s_run (h, "j-1", 1, "n1", "success");
    s_run (h, "j-1", 1, "n2", "success");
    s_run (h, "j-1", 1, "n3", "success");
    assert_int_equal (sched_job (h->sched, "j-1")->batch, 1);
    s_run (h, "j-1", 0, "n4", "success");
    size_t mark = h->log_count;
    s_restart (h, "j-1", s_yaml_spec (yaml));
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 1/1 n4; resend 0/1 n5; resend 0/1 n6");
    assert_int_equal (sched_job (h->sched, "j-1")->batch, 1);
    assert_int_equal (sched_job (h->sched, "j-1")->batch_count, 2);
    s_run (h, "j-1", 0, "n5", "failed");
    s_run (h, "j-1", 0, "n6", "success");
    s_run (h, "j-1", 1, "n4", "success");
    //  n6's second step was stopped by fail-fast: it did not finish
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "1 of 6 nodes failed at step 0 (test one); 1 skipped; "
                      "failure budget 0 exceeded");

    //  max_failures 0 stops after the first batch with a failure
    s_submit (h, "j-2", s_yaml_spec (
        "target: all\nbatch: 1\nmax_failures: 0\nstrategy: continue\n"
        "tasks: [{backend: test, action: one}]\n"));
    s_run (h, "j-2", 0, "n1", "failed");
    assert_cell (h, "j-2", 0, "n2", SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-2", SCHED_JOB_FAILED,
                      "1 of 6 nodes failed at step 0 (test one); 5 nodes "
                      "not started: failure budget 0 exceeded in batch 1");
    s_harness_destroy (&h);
}

//  R26: a named node that could not run counts as a failed node in its
//  batch. With max_failures 0, the offline n2 of batch 2 spends the
//  budget: batches 3 and 4 never start, their nodes read skipped, n2
//  keeps its status and reason, and the verdict carries the budget. With
//  max_failures 1 the same job runs to the end.
static void
test_sched_batch_budget_named_offline (void **state)
{
    harness_t *h = s_harness_new (s_six, 4);
    h->fleet [1].online = false;                //  n2
    s_start (h);
    const char *yaml = "target: node:n1,n2,n3,n4\nbatch: 1\n"
                       "max_failures: 0\nstrategy: continue\n"
                       "tasks: [{backend: test, action: one}]\n";
    size_t mark = h->log_count;
    s_submit (h, "j-1", s_yaml_spec (yaml));
    s_run (h, "j-1", 0, "n1", "success");
    assert_string_equal (s_sends (h, mark, "j-1"), "0/1 - n1");
    assert_string_equal (s_event_detail (h, mark, "skipped", NULL),
                         "2 nodes not started: failure budget 0 exceeded "
                         "in batch 2");
    snapshot_t *snap = s_finished (h, "j-1");
    assert_non_null (snap);
    assert_int_equal (snap->cells [1], SCHED_CELL_OFFLINE);
    assert_int_equal (snap->cells [2], SCHED_CELL_SKIPPED);
    assert_int_equal (snap->cells [3], SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "1 of 4 nodes not run: n2 offline since 12:01:07; "
                      "2 nodes not started: failure budget 0 exceeded in "
                      "batch 2");

    //  One offline node within a budget of 1: every batch runs
    s_submit (h, "j-2", s_yaml_spec (
        "target: node:n1,n2,n3,n4\nbatch: 1\nmax_failures: 1\n"
        "strategy: continue\ntasks: [{backend: test, action: one}]\n"));
    s_run (h, "j-2", 0, "n1", "success");
    s_run (h, "j-2", 0, "n3", "success");
    s_run (h, "j-2", 0, "n4", "success");
    s_assert_outcome (h, "j-2", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 4 nodes not run: n2 offline since 12:01:07");
    s_harness_destroy (&h);
}

//  R26: two offline named nodes against a budget of 1: n2 (batch 2)
//  holds, n3 (batch 3) spends it, so n4's batch never starts; with a
//  budget of 0, a first batch of offline nodes (n1, n2) stops the job
//  before anything is sent.
static void
test_sched_batch_budget_two_offline (void **state)
{
    harness_t *h = s_harness_new (s_six, 4);
    h->fleet [1].online = false;                //  n2
    h->fleet [2].online = false;                //  n3
    s_start (h);
    size_t mark = h->log_count;
    s_submit (h, "j-1", s_yaml_spec (
        "target: node:n1,n2,n3,n4\nbatch: 1\nmax_failures: 1\n"
        "strategy: continue\ntasks: [{backend: test, action: one}]\n"));
    s_run (h, "j-1", 0, "n1", "success");
    assert_string_equal (s_sends (h, mark, "j-1"), "0/1 - n1");
    snapshot_t *snap = s_finished (h, "j-1");
    assert_non_null (snap);
    assert_int_equal (snap->cells [3], SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "2 of 4 nodes not run: n2 offline since 12:01:07, "
                      "n3 offline since 12:01:07; 1 node not started: "
                      "failure budget 1 exceeded in batch 3");

    h->fleet [0].online = false;                //  n1
    h->fleet [2].online = true;                 //  n3
    mark = h->log_count;
    s_submit (h, "j-2", s_yaml_spec (
        "target: node:n1,n2,n3,n4\nbatch: 2\nmax_failures: 0\n"
        "tasks: [{backend: test, action: one}]\n"));
    assert_string_equal (s_sends (h, mark, "j-2"), "");
    s_assert_outcome (h, "j-2", SCHED_JOB_FAILED,
                      "2 of 4 nodes not run: n1 offline since 12:01:07, "
                      "n2 offline since 12:01:07; 2 nodes not started: "
                      "failure budget 0 exceeded in batch 1");
    s_harness_destroy (&h);
}

//  R26: a member of a group that could not run belongs to no batch and
//  counts as a failed node from the first batch: with max_failures 0 the
//  second batch never starts.
static void
test_sched_batch_budget_member_offline (void **state)
{
    harness_t *h = s_harness_new (s_six, 6);
    h->fleet [1].online = false;                //  n2
    s_start (h);
    size_t mark = h->log_count;
    s_submit (h, "j-1", s_yaml_spec (
        "target: group:web\nbatch: 2\nmax_failures: 0\nstrategy: continue\n"
        "tasks: [{backend: test, action: one}]\n"));
    assert_int_equal (sched_job (h->sched, "j-1")->expected_count, 5);
    s_run (h, "j-1", 0, "n1", "success");
    s_run (h, "j-1", 0, "n3", "success");
    assert_string_equal (s_sends (h, mark, "j-1"), "0/1 group/web/ n1,n3");
    assert_string_equal (s_event_detail (h, mark, "skipped", NULL),
                         "3 nodes not started: failure budget 0 exceeded "
                         "in batch 1");
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "1 member not run: n2 offline since 12:01:07; 3 nodes "
                      "not started: failure budget 0 exceeded in batch 1");
    s_harness_destroy (&h);
}

//  R15, R26: job->step does not read as done while a batch remains: the
//  cells of the batches not started yet are open. It moves on in the last
//  batch and reads step_count at the end.
static void
test_sched_batch_step (void **state)
{
    harness_t *h = s_harness_new (s_six, 6);
    s_start (h);
    s_submit (h, "j-1", s_yaml_spec (
        "target: all\nbatch: 3\n"
        "tasks:\n"
        "  - {backend: test, action: one}\n"
        "  - {backend: test, action: two}\n"));
    const sched_job_t *job = sched_job (h->sched, "j-1");
    const char *first [] = {"n1", "n2", "n3"}, *last [] = {"n4", "n5", "n6"};
    for (size_t step = 0; step < 2; step++)
        for (size_t index = 0; index < 3; index++)
            s_run (h, "j-1", (uint32_t) step, first [index], "success");
    assert_int_equal (job->batch, 1);
    assert_int_equal (job->step, 0);
    for (size_t index = 0; index < 3; index++)
        s_run (h, "j-1", 0, last [index], "success");
    assert_int_equal (job->step, 1);
    for (size_t index = 0; index < 3; index++)
        s_run (h, "j-1", 1, last [index], "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    assert_int_equal (s_finished (h, "j-1")->step, 2);
    //  A last batch of a named node that could not run is done at once
    h->fleet [1].online = false;                //  n2
    s_submit (h, "j-2", s_yaml_spec (
        "target: node:n1,n2\nbatch: 1\nmax_failures: 1\n"
        "tasks: [{backend: test, action: one}]\n"));
    assert_int_equal (sched_job (h->sched, "j-2")->step, 0);
    s_run (h, "j-2", 0, "n1", "success");
    s_assert_outcome (h, "j-2", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 2 nodes not run: n2 offline since 12:01:07");
    assert_int_equal (s_finished (h, "j-2")->step, 1);
    s_harness_destroy (&h);
}

//  R26: the job-level EVENT skipped of a spent budget names step 0 (the
//  untouched nodes miss every step), never a step past the last; the job
//  then reads every step behind it.
static void
test_sched_batch_budget_event_step (void **state)
{
    harness_t *h = s_harness_new (s_six, 6);
    s_start (h);
    size_t mark = h->log_count;
    s_submit (h, "j-1", s_yaml_spec (
        "target: all\nbatch: 3\nmax_failures: 0\nstrategy: continue\n"
        "tasks:\n"
        "  - {backend: test, action: one}\n"
        "  - {backend: test, action: two}\n"));
    s_run (h, "j-1", 0, "n1", "failed");
    s_run (h, "j-1", 0, "n2", "success");
    s_run (h, "j-1", 0, "n3", "success");
    s_run (h, "j-1", 1, "n2", "success");
    s_run (h, "j-1", 1, "n3", "success");
    assert_int_equal (s_events (h, mark, "skipped", NULL, -1), 2);
    assert_int_equal (s_events (h, mark, "skipped", "n1", 1), 1);
    assert_int_equal (s_events (h, mark, "skipped", NULL, 0), 1);
    assert_string_equal (s_event_detail (h, mark, "skipped", NULL),
                         "3 nodes not started: failure budget 0 exceeded "
                         "in batch 1");
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "1 of 6 nodes failed at step 0 (test one); 3 nodes "
                      "not started: failure budget 0 exceeded in batch 1");
    assert_int_equal (s_finished (h, "j-1")->step, 2);
    s_harness_destroy (&h);
}

//  Performance rules: one barrier job over 10,000 nodes with 3 steps runs
//  to completion (no timing assertion).
static void
test_sched_scale_10k_nodes (void **state)
{
    enum { NODES = 10000 };
    char **fleet = (char **) calloc (NODES, sizeof (char *));
    for (size_t index = 0; index < NODES; index++) {
        fleet [index] = (char *) malloc (32);
        snprintf (fleet [index], 32, "n%05zu:big", NODES - 1 - index);
    }
    harness_t *h = s_harness_new ((const char *const *) fleet, NODES);
    for (size_t index = 0; index < NODES; index++)
        free (fleet [index]);
    free (fleet);
    h->quiet = true;
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "big", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "one", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "two", JOB_COND_ALWAYS);
    s_leaf (spec, "test", "three", JOB_COND_ALWAYS);
    s_submit (h, "j-big", spec);
    char node [16];
    //  Every node's index, by hash in a job this large
    const sched_job_t *live = sched_job (h->sched, "j-big");
    assert_non_null (live);
    for (size_t index = 0; index < NODES; index++)
        assert_int_equal (sched_job_node_index (live, live->expected [index]),
                          (ssize_t) index);
    assert_int_equal (sched_job_node_index (live, "n99999"), -1);
    assert_int_equal (sched_job_node_index (live, "n0000"), -1);
    assert_int_equal (sched_job_node_index (live, ""), -1);
    for (uint32_t step = 0; step < 3; step++) {
        assert_int_equal (h->counts [SCHED_ACTION_DISPATCH], step + 1);
        for (size_t index = 0; index < NODES; index++) {
            snprintf (node, sizeof (node), "n%05zu", index);
            assert_int_equal (sched_on_ack (h->sched, "j-big", step, 1, node,
                                            h->now),
                              0);
            assert_int_equal (s_result (h, "j-big", step, 1, node, "success",
                                        NULL),
                              0);
        }
        h->now += 10;
        s_tick (h, h->now);
    }
    snapshot_t *snap = s_finished (h, "j-big");
    assert_non_null (snap);
    assert_int_equal (snap->status, SCHED_JOB_COMPLETED);
    assert_int_equal (snap->expected_count, NODES);
    assert_int_equal (h->counts [SCHED_ACTION_DISPATCH], 3);
    assert_int_equal (h->counts [SCHED_ACTION_SAVE_CELL], 3 * (2 * NODES + 1));
    s_harness_destroy (&h);
}

//  The reason a live job or its snapshot gives a cell of NODE at STEP.
static const char *
s_cell_reason (harness_t *h, const char *id, size_t step, const char *node)
{
    return s_live_cell (h, id, step, node)->reason;
}

static job_spec_t *
s_named_spec (void)
{
    job_spec_t *spec = s_spec (TARGET_NODE, "web-01,web-02,web-03,db-01",
                               false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "remove", JOB_COND_ON_FAILURE);
    return spec;
}

//  R2, R8: every node a list names is answered for. An offline, drained
//  or unsupported one gets a row with its status and reason in every
//  step; it is never sent anything, fails no condition (no fail-fast, no
//  rollback), and counts as a failed node in the verdict.
static void
test_sched_named_nodes_not_run (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->fleet [1].drained = true;                //  web-02
    h->fleet [2].lacks = "install";             //  web-03
    h->fleet [3].online = false;                //  db-01
    s_start (h);
    s_submit (h, "j-1", s_named_spec ());
    const sched_job_t *job = sched_job (h->sched, "j-1");
    assert_non_null (job);
    assert_int_equal (job->expected_count, 4);
    assert_int_equal (job->not_run_count, 3);
    assert_true (job->not_run [0].named);
    assert_string_equal (job->not_run [0].node, "db-01");
    assert_string_equal (s_sends (h, 0, NULL), "0/1 - web-01");
    for (size_t step = 0; step < 3; step++) {
        assert_cell (h, "j-1", step, "db-01", SCHED_CELL_OFFLINE);
        assert_string_equal (s_cell_reason (h, "j-1", step, "db-01"),
                             "offline since 12:01:07");
        assert_cell (h, "j-1", step, "web-02", SCHED_CELL_DRAINED);
        assert_string_equal (s_cell_reason (h, "j-1", step, "web-02"),
                             "drained");
        assert_cell (h, "j-1", step, "web-03", SCHED_CELL_UNSUPPORTED);
        assert_string_equal (s_cell_reason (h, "j-1", step, "web-03"),
                             "does not offer apt.install");
    }
    assert_null (s_cell_reason (h, "j-1", 0, "web-01"));
    //  One event each, with the reason; the start counts who runs
    assert_string_equal (s_event_detail (h, 0, "offline", "db-01"),
                         "offline since 12:01:07");
    assert_string_equal (s_event_detail (h, 0, "drained", "web-02"),
                         "drained");
    assert_string_equal (s_event_detail (h, 0, "unsupported", "web-03"),
                         "does not offer apt.install");
    assert_string_equal (s_event_detail (h, 0, "started", NULL), "on 1 node");
    //  Agent events for a row that was never sent are stale
    assert_int_equal (s_ack (h, "j-1", 0, 1, "db-01"), -1);
    //  web-01 goes on past step 0: nothing failed, so no fail-fast
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "1/1 - web-01");
    mark = h->log_count;
    s_run (h, "j-1", 1, "web-01", "success");
    //  ... and no rollback: the on_failure step is a fine skip
    assert_string_equal (s_sends (h, mark, NULL), "");
    assert_cell (h, "j-1", 2, "web-01", SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "3 of 4 nodes not run: db-01 offline since 12:01:07, "
                      "web-02 drained, web-03 does not offer apt.install");
    s_harness_destroy (&h);
}

//  R8: a node that ran and failed and a named node that could not run
//  are counted apart, as are nodes fail-fast only skipped.
static void
test_sched_named_node_and_failure (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->fleet [3].online = false;                //  db-01
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_NODE, "web-01,web-02,web-03,db-01",
                               false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "systemd", "restart", JOB_COND_ALWAYS);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "web-01", "failed");
    s_run (h, "j-1", 0, "web-02", "success");
    s_run (h, "j-1", 0, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_FAILED,
                      "1 of 4 nodes failed at step 0 (systemd restart); "
                      "2 skipped; 1 not run: db-01 offline since 12:01:07");
    s_harness_destroy (&h);
}

//  R2: members of a group, label or all that cannot run the job are
//  listed in not_run, are not sent it (a member lacking the action is
//  left out of the broadcast), and do not fail the job.
static void
test_sched_members_not_run (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->fleet [1].online = false;                //  web-02
    h->fleet [2].lacks = "install";             //  web-03
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    const sched_job_t *job = sched_job (h->sched, "j-1");
    assert_int_equal (job->expected_count, 1);
    assert_string_equal (job->expected [0], "web-01");
    assert_int_equal (job->not_run_count, 2);
    assert_string_equal (job->not_run [0].node, "web-02");
    assert_int_equal (job->not_run [0].status, SCHED_CELL_OFFLINE);
    assert_false (job->not_run [0].named);
    assert_string_equal (job->not_run [1].reason,
                         "does not offer apt.install");
    assert_string_equal (s_sends (h, 0, NULL), "0/1 group/web/ web-01");
    assert_string_equal (s_event_detail (h, 0, "started", NULL),
                         "on 1 node; 2 not run: web-02 offline since "
                         "12:01:07, web-03 does not offer apt.install");
    s_run (h, "j-1", 0, "web-01", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    //  An `any` target owes nobody a row or a listing
    spec = s_spec (TARGET_GROUP, "web", true, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-2", spec);
    job = sched_job (h->sched, "j-2");
    assert_int_equal (job->expected_count, 1);
    assert_string_equal (job->expected [0], "web-01");
    assert_int_equal (job->not_run_count, 0);
    s_harness_destroy (&h);
}

//  R1, R2: a queued job is resolved when it starts, so a named node that
//  went offline while it waited gets its rows.
static void
test_sched_queued_named_node_offline (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.max_concurrent = 1;
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_NODE, "web-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    spec = s_spec (TARGET_NODE, "web-02,db-01", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-2", spec);
    spec = s_spec (TARGET_NODE, "db-01", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_submit (h, "j-3", spec);
    assert_int_equal (sched_pending_count (h->sched), 2);
    h->fleet [3].online = false;
    size_t mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-02");
    assert_cell (h, "j-2", 0, "db-01", SCHED_CELL_OFFLINE);
    s_run (h, "j-2", 0, "web-02", "success");
    s_assert_outcome (h, "j-2", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 2 nodes not run: db-01 offline since 12:01:07");
    //  A job none of whose named nodes can run fails with its rows
    s_assert_outcome (h, "j-3", SCHED_JOB_FAILED,
                      "1 of 1 node not run: db-01 offline since 12:01:07");
    assert_cell (h, "j-3", 0, "db-01", SCHED_CELL_OFFLINE);
    s_harness_destroy (&h);
}

//  R16: after a restore, a named node that could not run still fails no
//  condition, and the verdict is the same.
static void
test_sched_restore_named_not_run (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->fleet [3].online = false;
    s_start (h);
    s_submit (h, "j-1", s_named_spec ());
    s_run (h, "j-1", 0, "web-01", "success");
    s_run (h, "j-1", 0, "web-02", "success");
    s_restart (h, "j-1", s_named_spec ());
    const sched_job_t *job = sched_job (h->sched, "j-1");
    assert_int_equal (job->not_run_count, 1);
    size_t mark = h->log_count;
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-03", "success", NULL), 0);
    assert_string_equal (s_sends (h, mark, NULL),
                         "1/1 - web-01,web-02,web-03");
    s_run (h, "j-1", 1, "web-01", "success");
    s_run (h, "j-1", 1, "web-02", "success");
    s_run (h, "j-1", 1, "web-03", "success");
    assert_cell (h, "j-1", 2, "web-01", SCHED_CELL_SKIPPED);
    s_assert_outcome (h, "j-1", SCHED_JOB_PARTIAL_FAILURE,
                      "1 of 4 nodes not run: db-01 offline since 12:01:07");
    s_harness_destroy (&h);
}

//  R12, R14: a cell cancelled or lost while it ran records how long it
//  ran; one never started records 0.
static void
test_sched_cancel_records_run_time (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "test", "sleep", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-02"), 0);
    h->now += 700;
    assert_int_equal (sched_on_node_offline (h->sched, "web-02", h->now), 0);
    s_drain (h);
    const sched_cell_t *lost = s_live_cell (h, "j-1", 0, "web-02");
    assert_int_equal (lost->attempts [0].duration_ms, 700);
    //  The agent's late result for that attempt tells another story: the
    //  broker's verdict stands whole (status, exit code, duration, no
    //  output of the other account) and the result is recorded beside it,
    //  with an event
    size_t mark = h->log_count;
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "success", NULL),
                      1);
    assert_int_equal (s_type_count (h, mark, SCHED_ACTION_SAVE_CELL), 1);
    assert_int_equal (s_events (h, mark, "late", "web-02", 0), 1);
    assert_string_equal (s_event_detail (h, mark, "late", "web-02"),
                         "late result: success from web-02");
    lost = s_live_cell (h, "j-1", 0, "web-02");
    assert_int_equal (lost->status, SCHED_CELL_LOST);
    assert_int_equal (lost->attempt_count, 1);
    assert_null (lost->attempts [0].output);
    assert_int_equal (lost->attempts [0].exit_code, -1);
    assert_string_equal (lost->attempts [0].error, "node went offline");
    assert_int_equal (lost->attempts [0].duration_ms, 700);
    assert_true (lost->attempts [0].has_late);
    assert_int_equal (lost->attempts [0].late_status, SCHED_CELL_SUCCESS);
    assert_int_equal (lost->attempts [0].late_exit_code, 0);
    //  Only once
    mark = h->log_count;
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-02", "failed", NULL),
                      1);
    assert_int_equal (s_type_count (h, mark, SCHED_ACTION_SAVE_CELL), 0);
    assert_int_equal (lost->attempts [0].late_status, SCHED_CELL_SUCCESS);
    h->now += 300;
    assert_int_equal (sched_cancel (h->sched, "j-1", NULL, h->now), 0);
    //  Read the record as the FINISHED action left it
    sched_action_t action;
    assert_false (sched_next_action (h->sched, &action) == false);
    const sched_job_t *job = action.job;
    ssize_t web01 = sched_job_node_index (job, "web-01");
    ssize_t web03 = sched_job_node_index (job, "web-03");
    assert_int_equal (job->cells [web01].attempts [0].duration_ms, 1000);
    assert_int_equal (job->cells [web03].attempts [0].duration_ms, 0);
    assert_int_equal (job->cells [web03].status, SCHED_CELL_CANCELLED);
    s_drain (h);
    s_harness_destroy (&h);
}

//  An interrupted result from a restarted agent carries no run time: the
//  attempt records the time since its started (0 when it never started);
//  a run time the agent did report stands.
static void
test_sched_interrupted_records_run_time (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "test", "sleep", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-03"), 0);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-03"), 0);
    h->now += 4200;
    proto_msg_t msg;
    memset (&msg, 0, sizeof (msg));
    msg.type = PROTO_RESULT;
    msg.job = (char *) "j-1";
    msg.step = 0;
    msg.attempt = 1;
    msg.status = (char *) "interrupted";
    msg.output = (char *) "";
    msg.error = (char *) "agent restarted while the task ran";
    msg.exit_code = -1;
    msg.node = (char *) "web-01";
    assert_int_equal (sched_on_result (h->sched, &msg, h->now), 0);
    s_drain (h);
    msg.node = (char *) "web-02";
    msg.error = (char *) "agent restarted before the task ran";
    assert_int_equal (sched_on_result (h->sched, &msg, h->now), 0);
    s_drain (h);
    const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-01");
    assert_int_equal (cell->attempt_count, 1);
    assert_int_equal (cell->attempts [0].status, SCHED_CELL_INTERRUPTED);
    assert_int_equal (cell->attempts [0].duration_ms, 4200);
    cell = s_live_cell (h, "j-1", 0, "web-02");
    assert_int_equal (cell->attempt_count, 1);
    assert_int_equal (cell->attempts [0].status, SCHED_CELL_INTERRUPTED);
    assert_int_equal (cell->attempts [0].duration_ms, 0);
    msg.node = (char *) "web-03";
    msg.duration_ms = 3900;
    assert_int_equal (sched_on_result (h->sched, &msg, h->now), 0);
    //  The last cell ends the job: read the record as FINISHED left it
    sched_action_t action;
    const sched_job_t *job = NULL;
    while (!job && sched_next_action (h->sched, &action))
        if (action.type == SCHED_ACTION_FINISHED)
            job = action.job;
    assert_non_null (job);
    ssize_t web03 = sched_job_node_index (job, "web-03");
    assert_true (web03 >= 0);
    assert_int_equal (job->cells [web03].attempts [0].status,
                      SCHED_CELL_INTERRUPTED);
    assert_int_equal (job->cells [web03].attempts [0].duration_ms, 3900);
    s_drain (h);
    s_harness_destroy (&h);
}

//  ---------------------------------------------------------------------
//  Any-node claims, leases and reclaims (R17-R20)

static fake_node_t *
s_fake (harness_t *h, const char *id)
{
    for (size_t index = 0; index < h->fleet_count; index++)
        if (strcmp (h->fleet [index].id, id) == 0)
            return &h->fleet [index];
    fail ();
    return NULL;
}

static void
s_submit_any (harness_t *h, const char *id, const char *backend,
              int max_retries, int priority)
{
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", true,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, backend, "echo", JOB_COND_ALWAYS)->max_retries = max_retries;
    spec->priority = priority;
    s_submit (h, id, spec);
}

//  The node holding an any-node job's column.
static const char *
s_holder (harness_t *h, const char *id)
{
    const sched_job_t *job = sched_job (h->sched, id);
    assert_non_null (job);
    assert_int_equal (job->expected_count, 1);
    return job->expected [0];
}

//  R17: each `any` step goes to the least loaded node of the set with a
//  free slot (load: what the scheduler sent it and has not seen finish,
//  or its heartbeat's running + queued, the larger), ties in turn. With
//  no free slot the step waits, pending with a reason, and goes when a
//  slot frees: highest priority first, then oldest.
static void
test_sched_any_least_loaded (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    sched_set_fleet (h->sched, s_load, s_idempotent, h);
    s_fake (h, "web-01")->slots = 1;
    s_fake (h, "web-01")->running = 1;           //  Full
    s_fake (h, "web-02")->slots = 2;
    s_fake (h, "web-02")->running = 1;
    s_fake (h, "web-03")->slots = 2;
    size_t mark = h->log_count;
    s_submit_any (h, "j-1", "test", 0, 0);
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-03");
    //  web-02 and web-03 now both carry 1: in turn
    mark = h->log_count;
    s_submit_any (h, "j-2", "test", 0, 0);
    s_submit_any (h, "j-3", "test", 0, 0);
    s_submit_any (h, "j-4", "test", 0, 0);
    assert_string_equal (s_sends (h, mark, NULL),
                         "0/1 - web-02; 0/1 - web-03; 0/1 - web-02");
    sched_counters_t counters;
    sched_counters (h->sched, &counters);
    assert_int_equal (counters.claims, 4);
    sched_node_counters_t node;
    assert_int_equal (sched_node_counters (h->sched, "web-03", &node), 0);
    assert_int_equal (node.claims, 2);
    assert_int_equal (node.in_flight, 2);
    assert_int_equal (sched_node_counters (h->sched, "db-01", &node), -1);

    //  Every slot taken: the next ones wait, and say why
    mark = h->log_count;
    s_submit_any (h, "j-5", "test", 0, 0);
    s_submit_any (h, "j-6", "test", 0, 5);
    assert_string_equal (s_sends (h, mark, NULL), "");
    assert_int_equal (sched_waiting_count (h->sched), 2);
    const sched_cell_t *cell = &sched_job (h->sched, "j-5")->cells [0];
    assert_int_equal (cell->status, SCHED_CELL_PENDING);
    assert_string_equal (cell->waiting,
                         "waiting: no free slot on any:group:web (3 of 3 "
                         "nodes busy)");
    assert_int_equal (s_events (h, mark, "waiting", NULL, 0), 2);
    //  A tick or a heartbeat changes nothing while nothing frees
    s_tick (h, h->now + 1000);
    assert_int_equal (sched_on_heartbeat (h->sched, "web-02", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "");

    //  j-1 ends on web-03: the higher priority j-6 takes the slot
    s_run (h, "j-1", 0, "web-03", "success");
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-03");
    assert_string_equal (s_holder (h, "j-6"), "web-03");
    assert_null (sched_job (h->sched, "j-6")->cells [0].waiting);
    assert_int_equal (sched_waiting_count (h->sched), 1);
    //  web-01's heartbeat says it is free now: j-5 goes there
    mark = h->log_count;
    s_fake (h, "web-01")->running = 0;
    assert_int_equal (sched_on_heartbeat (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-01");
    assert_string_equal (s_holder (h, "j-5"), "web-01");
    assert_int_equal (sched_waiting_count (h->sched), 0);
    s_run (h, "j-5", 0, "web-01", "success");
    s_assert_outcome (h, "j-5", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R18: the holder keeps a lease, renewed by ack, started and any word
//  from the node (heartbeats). Unrenewed for lease_ms it expires: the
//  step is reclaimed and goes to another node of the set; before started
//  as the same attempt. A result from the old holder that comes late is
//  kept in the history and changes nothing.
static void
test_sched_lease_expiry_reclaims (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.lease_ms = 10000;
    s_start (h);
    s_submit_any (h, "j-1", "test", 0, 0);           //  Dispatched at 1000
    assert_string_equal (s_holder (h, "j-1"), "web-01");
    h->now = 1005;
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-01"), 0);
    h->now = 9000;
    assert_int_equal (sched_on_heartbeat (h->sched, "web-01", h->now), 0);
    s_drain (h);
    size_t mark = h->log_count;
    s_tick (h, 12000);                       //  Renewed at 9000: not yet
    assert_string_equal (s_sends (h, mark, NULL), "");
    s_tick (h, 19000);
    assert_string_equal (s_sends (h, mark, NULL),
                         "cancel web-01; 0/1 - web-02");
    assert_string_equal (s_holder (h, "j-1"), "web-02");
    assert_string_equal (s_event_detail (h, mark, "reclaimed", "web-01"),
                         "reclaimed from web-01 (lease expired) \xe2\x86\x92 "
                         "web-02");
    assert_int_equal (s_type_count (h, mark, SCHED_ACTION_FORGET_CELLS), 1);
    sched_counters_t counters;
    sched_counters (h->sched, &counters);
    assert_int_equal (counters.claims, 2);
    assert_int_equal (counters.reclaims, 1);
    assert_int_equal (counters.lease_expirations, 1);
    sched_node_counters_t node;
    assert_int_equal (sched_node_counters (h->sched, "web-01", &node), 0);
    assert_int_equal (node.reclaims, 1);
    assert_int_equal (node.lease_expirations, 1);
    assert_int_equal (node.in_flight, 0);

    //  The old holder answers after all: history only
    mark = h->log_count;
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "success", NULL), 0);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "success", NULL), 1);
    assert_int_equal (s_events (h, mark, "late", "web-01", 0), 1);
    assert_int_equal (s_type_count (h, mark, SCHED_ACTION_SAVE_CELL), 1);
    const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-02");
    assert_int_equal (cell->status, SCHED_CELL_DISPATCHED);
    assert_int_equal (cell->attempt, 1);
    assert_int_equal (cell->attempt_count, 2);
    assert_string_equal (cell->attempts [0].node, "web-01");
    assert_int_equal (cell->attempts [0].status, SCHED_CELL_LOST);
    assert_false (cell->attempts [0].late);
    assert_true (cell->attempts [1].late);
    assert_int_equal (cell->attempts [1].status, SCHED_CELL_SUCCESS);
    sched_counters (h->sched, &counters);
    assert_int_equal (counters.late_results, 1);
    //  A node that never held it is stale
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-03", "success", NULL),
                      -1);
    s_run (h, "j-1", 0, "web-02", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    snapshot_t *snap = s_finished (h, "j-1");
    assert_string_equal (snap->expected [0], "web-02");
    assert_int_equal (snap->attempt_counts [0], 3);
    s_harness_destroy (&h);
}

//  R19: a node that goes down gives its any-node steps back at once.
//  After started, the step runs again (attempt + 1) only while retries
//  remain or when the action is idempotent; else it ends lost.
static void
test_sched_reclaim_after_started (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    sched_set_fleet (h->sched, s_load, s_idempotent, h);
    for (size_t index = 0; index < 3; index++)
        h->fleet [index].slots = 4;
    //  Not started: the same attempt elsewhere
    s_submit_any (h, "j-a", "test", 0, 0);
    assert_string_equal (s_holder (h, "j-a"), "web-01");
    size_t mark = h->log_count;
    assert_int_equal (sched_on_node_down (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-01; 0/1 - web-02");
    assert_string_equal (s_event_detail (h, mark, "reclaimed", "web-01"),
                         "reclaimed from web-01 (node offline) \xe2\x86\x92 "
                         "web-02");
    //  Started, no retries, not idempotent: lost, the job fails
    assert_int_equal (s_ack (h, "j-a", 0, 1, "web-02"), 0);
    assert_int_equal (s_started (h, "j-a", 0, 1, "web-02"), 0);
    mark = h->log_count;
    assert_int_equal (sched_on_node_down (h->sched, "web-02", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-02");
    assert_non_null (strstr (s_event_detail (h, mark, "lost", "web-02"),
                             "not run again"));
    s_assert_outcome (h, "j-a", SCHED_JOB_FAILED,
                      "1 of 1 node failed at step 0 (test echo)");
    //  Started, a retry left: attempt 2 on the node still up
    s_fake (h, "web-01")->online = false;
    s_fake (h, "web-02")->online = false;
    s_submit_any (h, "j-b", "test", 1, 0);
    assert_string_equal (s_holder (h, "j-b"), "web-03");
    s_fake (h, "web-01")->online = true;
    assert_int_equal (sched_on_heartbeat (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_int_equal (s_started (h, "j-b", 0, 1, "web-03"), 0);
    mark = h->log_count;
    assert_int_equal (sched_on_node_down (h->sched, "web-03", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-03; 0/2 - web-01");
    s_run (h, "j-b", 0, "web-01", "success");
    s_assert_outcome (h, "j-b", SCHED_JOB_COMPLETED, NULL);
    //  Started, no retries, idempotent: attempt 2
    s_submit_any (h, "j-c", "idem", 0, 0);
    assert_string_equal (s_holder (h, "j-c"), "web-01");
    assert_int_equal (s_started (h, "j-c", 0, 1, "web-01"), 0);
    s_fake (h, "web-03")->online = true;
    assert_int_equal (sched_on_heartbeat (h->sched, "web-03", h->now), 0);
    mark = h->log_count;
    assert_int_equal (sched_on_node_offline (h->sched, "web-01", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-01; 0/2 - web-03");
    //  No node of the set left: the step waits for one
    mark = h->log_count;
    s_fake (h, "web-03")->online = false;
    assert_int_equal (sched_on_node_down (h->sched, "web-03", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-03");
    assert_string_equal (s_live_cell (h, "j-c", 0, "web-03")->waiting,
                         "waiting: no online node matches any:group:web");
    s_fake (h, "web-02")->online = true;
    mark = h->log_count;
    assert_int_equal (sched_on_heartbeat (h->sched, "web-02", h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL), "0/2 - web-02");
    s_run (h, "j-c", 0, "web-02", "success");
    s_assert_outcome (h, "j-c", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R19: an any-node step never acknowledged is reclaimed (not lost) once
//  its direct re-sends are spent.
static void
test_sched_any_ack_timeout_reclaims (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.ack_resends = 1;
    s_start (h);
    s_submit_any (h, "j-1", "test", 0, 0);
    size_t mark = h->log_count;
    s_tick (h, h->now + 2000);
    s_tick (h, h->now + 2000);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 web-01; cancel web-01; 0/1 - web-02");
    assert_string_equal (s_event_detail (h, mark, "reclaimed", "web-01"),
                         "reclaimed from web-01 (no acknowledgement after 2 "
                         "sends) \xe2\x86\x92 web-02");
    s_run (h, "j-1", 0, "web-02", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  ---------------------------------------------------------------------
//  Concurrency limits (R21)

static void
s_set_limits (harness_t *h, const char *fleet, uint32_t max,
              const char *per_node, uint32_t node_max)
{
    job_limit_t limits [2];
    size_t count = 0;
    if (fleet)
        limits [count++] = (job_limit_t) {(char *) fleet, max, false};
    if (per_node)
        limits [count++] = (job_limit_t) {(char *) per_node, node_max, true};
    assert_int_equal (sched_set_limits (h->sched, limits, count), 0);
}

//  R21: a broadcast over a fleet-wide limit goes out to as many nodes as
//  the limit allows; the others wait, pending, with the reason, and go
//  as slots free. Other actions are not held.
static void
test_sched_limit_fleet_batches (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_set_limits (h, "apt.install", 2, NULL, 0);
    job_spec_t *spec = s_spec (TARGET_ALL, NULL, false, JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    //  On the target's topic, naming the nodes that may act
    assert_string_equal (s_sends (h, 0, NULL), "0/1 all/ db-01,web-01");
    assert_string_equal (s_live_cell (h, "j-1", 0, "web-02")->waiting,
                         "waiting: apt.install 2/2 running");
    assert_cell (h, "j-1", 0, "web-03", SCHED_CELL_PENDING);
    assert_string_equal (s_event_detail (h, 0, "waiting", NULL),
                         "2 nodes: waiting: apt.install 2/2 running");
    assert_int_equal (sched_waiting_count (h->sched), 2);
    sched_limit_use_t uses [4];
    assert_int_equal (sched_limits (h->sched, uses, 4), 1);
    assert_string_equal (uses [0].pattern, "apt.install");
    assert_int_equal (uses [0].running, 2);
    //  Another action is not held by it
    size_t mark = h->log_count;
    job_spec_t *other = s_spec (TARGET_NODE, "web-02", false,
                                JOB_STRATEGY_FAIL_FAST);
    s_leaf (other, "apt", "update", JOB_COND_ALWAYS);
    s_submit (h, "j-2", other);
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-02");
    //  A slot frees: the next node goes
    mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-02");
    assert_null (s_live_cell (h, "j-1", 0, "web-02")->waiting);
    mark = h->log_count;
    s_run (h, "j-1", 0, "db-01", "success");
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-03");
    s_run (h, "j-1", 0, "web-02", "success");
    s_run (h, "j-1", 0, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    assert_int_equal (sched_waiting_count (h->sched), 0);
    sched_limits (h->sched, uses, 4);
    assert_int_equal (uses [0].running, 0);
    s_harness_destroy (&h);
}

static job_spec_t *
s_install_all_spec (void)
{
    job_spec_t *spec = s_spec (TARGET_ALL, NULL, false, JOB_STRATEGY_CONTINUE);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    return spec;
}

//  R16, R21: a broadcast saves its first node's dispatched cell only. A
//  restore reads the step's cells that have no record as dispatched and
//  re-sends them, while the cells that waited for a slot (saved) wait
//  again; a result for an unsaved cell after the restore counts.
static void
test_sched_restore_broadcast_unsaved (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_set_limits (h, "apt.install", 2, NULL, 0);
    s_submit (h, "j-1", s_install_all_spec ());
    assert_string_equal (s_sends (h, 0, NULL), "0/1 all/ db-01,web-01");
    assert_true (s_saved (h, "j-1", 0, "db-01"));
    assert_false (s_saved (h, "j-1", 0, "web-01"));
    assert_true (s_saved (h, "j-1", 0, "web-02"));
    assert_true (s_saved (h, "j-1", 0, "web-03"));
    h->now = 1000;
    sched_job_t *job = s_persisted (h, sched_job (h->sched, "j-1"),
                                    s_install_all_spec ());
    assert_false (job->cells [1].stored);
    assert_int_equal (job->cells [1].attempt, 0);
    sched_destroy (&h->sched);
    s_start (h);
    s_set_limits (h, "apt.install", 2, NULL, 0);
    size_t mark = h->log_count;
    assert_int_equal (sched_restore (h->sched, &job, h->now), 0);
    s_drain (h);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 db-01; resend 0/1 web-01");
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_DISPATCHED);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_PENDING);
    assert_int_equal (sched_waiting_count (h->sched), 2);
    //  web-01's result, on its way during the restart, counts
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "success", NULL),
                      0);
    assert_string_equal (s_sends (h, mark, NULL),
                         "resend 0/1 db-01; resend 0/1 web-01; "
                         "0/1 - web-02");
    s_run (h, "j-1", 0, "db-01", "success");
    s_run (h, "j-1", 0, "web-02", "success");
    s_run (h, "j-1", 0, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R21: waiting cells start in priority, then submission order; a
//  per-node limit holds a node's cells while others run elsewhere.
static void
test_sched_limit_priority_and_per_node (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_set_limits (h, NULL, 0, "apt.*", 1);
    const char *ids [] = {"j-1", "j-2", "j-3"};
    int priorities [] = {0, 0, 9};
    for (size_t index = 0; index < 3; index++) {
        job_spec_t *spec = s_spec (TARGET_NODE, "web-01", false,
                                   JOB_STRATEGY_FAIL_FAST);
        s_leaf (spec, "apt", "update", JOB_COND_ALWAYS);
        spec->priority = priorities [index];
        s_submit (h, ids [index], spec);
    }
    assert_string_equal (s_sends (h, 0, NULL), "0/1 - web-01");
    assert_string_equal (s_live_cell (h, "j-2", 0, "web-01")->waiting,
                         "waiting: apt.* 1/1 running on web-01");
    //  web-02 is not held by web-01's limit
    size_t mark = h->log_count;
    job_spec_t *spec = s_spec (TARGET_NODE, "web-02", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "remove", JOB_COND_ALWAYS);
    s_submit (h, "j-4", spec);
    assert_string_equal (s_sends (h, mark, NULL), "0/1 - web-02");
    //  The priority 9 job goes first, then the older of the others
    mark = h->log_count;
    s_run (h, "j-1", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, "j-3"), "0/1 - web-01");
    assert_string_equal (s_sends (h, mark, "j-2"), "");
    mark = h->log_count;
    s_run (h, "j-3", 0, "web-01", "success");
    assert_string_equal (s_sends (h, mark, "j-2"), "0/1 - web-01");
    s_run (h, "j-2", 0, "web-01", "success");
    s_assert_outcome (h, "j-2", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R21: a job's own limit lowers the broker's for its cells, never
//  raises it; an any-node step goes to a node with room under a per-node
//  limit.
static void
test_sched_limit_job_lowers (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    s_set_limits (h, "apt.install", 2, "idem.*", 1);
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    spec->limits = (job_limit_t *) calloc (1, sizeof (job_limit_t));
    spec->limits [0] = (job_limit_t) {strdup ("apt.*"), 1, false};
    spec->limit_count = 1;
    s_submit (h, "j-1", spec);
    assert_string_equal (s_sends (h, 0, NULL), "0/1 group/web/ web-01");
    assert_string_equal (s_live_cell (h, "j-1", 0, "web-02")->waiting,
                         "waiting: apt.* 1/1 running (the job's limit)");
    //  Its limit of 5 does not raise the broker's 2
    size_t mark = h->log_count;
    spec = s_spec (TARGET_GROUP, "web", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    spec->limits = (job_limit_t *) calloc (1, sizeof (job_limit_t));
    spec->limits [0] = (job_limit_t) {strdup ("apt.install"), 5, false};
    spec->limit_count = 1;
    s_submit (h, "j-2", spec);
    assert_string_equal (s_sends (h, mark, NULL), "0/1 group/web/ web-01");
    assert_string_equal (s_live_cell (h, "j-2", 0, "web-02")->waiting,
                         "waiting: apt.install 2/2 running");
    //  Any-node: web-01 and web-02 are full for idem.*; web-03 takes it
    sched_set_fleet (h->sched, s_load, s_idempotent, h);
    for (size_t index = 0; index < 3; index++)
        h->fleet [index].slots = 4;
    mark = h->log_count;
    s_submit_any (h, "j-3", "idem", 0, 0);
    s_submit_any (h, "j-4", "idem", 0, 0);
    s_submit_any (h, "j-5", "idem", 0, 0);
    s_submit_any (h, "j-6", "idem", 0, 0);
    assert_string_equal (s_sends (h, mark, NULL),
                         "0/1 - web-02; 0/1 - web-03; 0/1 - web-01");
    assert_string_equal (s_live_cell (h, "j-6", 0, s_holder (h, "j-6"))
                             ->waiting,
                         "waiting: no free slot on any:group:web (3 of 3 "
                         "nodes busy)");
    s_harness_destroy (&h);
}

//  ---------------------------------------------------------------------
//  Progress and stall_timeout (R22)

static int
s_progress_msg (harness_t *h, const char *id, uint32_t step, uint32_t attempt,
                const char *node, int percent, const char *kind,
                const char *message)
{
    proto_msg_t msg;
    memset (&msg, 0, sizeof (msg));
    msg.type = PROTO_PROGRESS;
    msg.job = (char *) id;
    msg.step = step;
    msg.attempt = attempt;
    msg.node = (char *) node;
    msg.percent = percent;
    msg.kind = (char *) kind;
    msg.message = (char *) message;
    int rc = sched_on_progress (h->sched, &msg, h->now);
    s_drain (h);
    return rc;
}

//  R22: the latest progress stays with the cell in memory (no SAVE_CELL);
//  an EVENT progress comes only when the kind changes; it goes when the
//  cell ends. Progress for no cell in flight is stale.
static void
test_sched_progress_in_memory (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_NODE, "web-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "apt", "install", JOB_COND_ALWAYS);
    s_submit (h, "j-1", spec);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);
    size_t mark = h->log_count;
    assert_int_equal (s_progress_msg (h, "j-1", 0, 1, "web-01", 10,
                                      "downloading", "downloading nginx"),
                      0);
    assert_int_equal (s_progress_msg (h, "j-1", 0, 1, "web-01", 40,
                                      "downloading", "downloading nginx"),
                      0);
    assert_int_equal (s_type_count (h, mark, SCHED_ACTION_SAVE_CELL), 0);
    assert_int_equal (s_events (h, mark, "progress", "web-01", 0), 1);
    const sched_cell_t *cell = s_live_cell (h, "j-1", 0, "web-01");
    assert_int_equal (cell->percent, 40);
    assert_string_equal (cell->progress_kind, "downloading");
    assert_string_equal (cell->progress, "downloading nginx");
    assert_true (cell->progress_ms > 0);
    h->now += 1000;
    assert_int_equal (s_progress_msg (h, "j-1", 0, 1, "web-01", -1,
                                      "configuring", "setting up nginx"),
                      0);
    assert_int_equal (s_events (h, mark, "progress", "web-01", 0), 2);
    assert_string_equal (s_event_detail (h, mark, "progress", "web-01"),
                         "configuring: setting up nginx");
    assert_int_equal (cell->percent, -1);
    //  A flood of changing kinds (faster than any agent reports) is kept
    //  in memory but not logged: the event log stays bounded
    for (int round = 0; round < 1000; round++) {
        h->now += 1;
        assert_int_equal (s_progress_msg (h, "j-1", 0, 1, "web-01", 50,
                                          round % 2 ? "a" : "b", "flood"),
                          0);
    }
    assert_int_equal (s_events (h, mark, "progress", "web-01", 0), 2);
    assert_string_equal (cell->progress_kind, "a");
    //  A change 100 ms after the last report is logged again
    h->now += 100;
    assert_int_equal (s_progress_msg (h, "j-1", 0, 1, "web-01", 60,
                                      "configuring", "setting up nginx"),
                      0);
    assert_int_equal (s_events (h, mark, "progress", "web-01", 0), 3);
    //  Stale: another attempt, another node
    assert_int_equal (s_progress_msg (h, "j-1", 0, 2, "web-01", 5, NULL, NULL),
                      -1);
    assert_int_equal (s_progress_msg (h, "j-1", 0, 1, "web-02", 5, NULL, NULL),
                      -1);
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "success", NULL), 0);
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

//  R22: stall_timeout (the task's, else the job's): a running cell heard
//  of by neither started nor progress for that long is a timeout (then
//  retries apply). Progress renews it; node heartbeats do not.
static void
test_sched_stall_timeout (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    s_start (h);
    job_spec_t *spec = s_spec (TARGET_NODE, "web-01", false,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "sleep", JOB_COND_ALWAYS)->max_retries = 1;
    spec->stall_timeout_ms = 5000;
    s_submit (h, "j-1", spec);
    assert_int_equal (s_started (h, "j-1", 0, 1, "web-01"), 0);   //  1000
    h->now = 4000;
    assert_int_equal (s_progress_msg (h, "j-1", 0, 1, "web-01", 50, NULL,
                                      "half"),
                      0);
    size_t mark = h->log_count;
    s_tick (h, 8000);                           //  Renewed at 4000
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_RUNNING);
    assert_int_equal (sched_on_heartbeat (h->sched, "web-01", 8500), 0);
    s_drain (h);
    s_tick (h, 9000);
    assert_cell (h, "j-1", 0, "web-01", SCHED_CELL_RETRY_WAIT);
    assert_string_equal (s_sends (h, mark, NULL), "cancel web-01");
    assert_string_equal (s_event_detail (h, mark, "timeout", "web-01"),
                         "no progress for 5s (stall_timeout)");
    //  The task's own stall_timeout comes first
    spec = s_spec (TARGET_NODE, "web-02", false, JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "sleep", JOB_COND_ALWAYS)->stall_timeout_ms = 1000;
    spec->stall_timeout_ms = 60000;
    s_submit (h, "j-2", spec);
    assert_int_equal (s_started (h, "j-2", 0, 1, "web-02"), 0);
    s_tick (h, h->now + 1000);
    s_assert_outcome (h, "j-2", SCHED_JOB_FAILED,
                      "1 of 1 node failed at step 0 (test sleep)");
    s_harness_destroy (&h);
}

//  R16, R18: an any-node job restored after a reclaim: its holder gets
//  the step again with a fresh lease, and the node it was taken from is
//  still known by the history, so its late result is kept, not taken.
static void
test_sched_restore_any_node (void **state)
{
    harness_t *h = s_harness_new (s_web3, 4);
    h->config.lease_ms = 10000;
    s_start (h);
    s_submit_any (h, "j-1", "test", 0, 0);
    assert_string_equal (s_holder (h, "j-1"), "web-01");
    s_tick (h, h->now + 10000);
    assert_string_equal (s_holder (h, "j-1"), "web-02");
    assert_int_equal (s_ack (h, "j-1", 0, 1, "web-02"), 0);
    h->now += 1000;
    size_t mark = h->log_count;
    job_spec_t *spec = s_spec (TARGET_GROUP, "web", true,
                               JOB_STRATEGY_FAIL_FAST);
    s_leaf (spec, "test", "echo", JOB_COND_ALWAYS);
    s_restart (h, "j-1", spec);
    assert_string_equal (s_sends (h, mark, NULL), "resend 0/1 web-02");
    assert_int_equal (s_result (h, "j-1", 0, 1, "web-01", "success", NULL), 0);
    assert_int_equal (s_events (h, mark, "late", "web-01", 0), 1);
    assert_cell (h, "j-1", 0, "web-02", SCHED_CELL_DISPATCHED);
    //  Silent past the lease from the restore (no re-send on the way: its
    //  ack clock waits for its first word): taken back again
    mark = h->log_count;
    s_tick (h, h->now + 10000);
    assert_string_equal (s_sends (h, mark, NULL),
                         "cancel web-02; 0/1 - web-03");
    assert_string_equal (s_event_detail (h, mark, "reclaimed", "web-02"),
                         "reclaimed from web-02 (lease expired) \xe2\x86\x92 "
                         "web-03");
    s_run (h, "j-1", 0, "web-03", "success");
    s_assert_outcome (h, "j-1", SCHED_JOB_COMPLETED, NULL);
    s_harness_destroy (&h);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_sched_status_names),
        cmocka_unit_test (test_sched_admission_limits),
        cmocka_unit_test (test_sched_admission_priority_and_age),
        cmocka_unit_test (test_sched_admission_on_tick),
        cmocka_unit_test (test_sched_admission_paused),
        cmocka_unit_test (test_sched_start_no_node),
        cmocka_unit_test (test_sched_any_target_rotates),
        cmocka_unit_test (test_sched_start_actions),
        cmocka_unit_test (test_sched_cell_since_and_live_jobs),
        cmocka_unit_test (test_sched_step_numbering),
        cmocka_unit_test (test_sched_barrier_waits_for_slowest),
        cmocka_unit_test (test_sched_grid_flat_example),
        cmocka_unit_test (test_sched_expression_target_goes_per_node),
        cmocka_unit_test (test_sched_grid_hierarchical_example),
        cmocka_unit_test (test_sched_pipeline_node_advances),
        cmocka_unit_test (test_sched_conditions_top_level),
        cmocka_unit_test (test_sched_conditions_in_pipeline),
        cmocka_unit_test (test_sched_fail_fast_rollback),
        cmocka_unit_test (test_sched_fail_fast_in_pipeline),
        cmocka_unit_test (test_sched_continue_drops_failed),
        cmocka_unit_test (test_sched_all_nodes_fail),
        cmocka_unit_test (test_sched_retry_backoff),
        cmocka_unit_test (test_sched_result_kinds),
        cmocka_unit_test (test_sched_ack_timeout_resends_then_lost),
        cmocka_unit_test (test_sched_task_timeout),
        cmocka_unit_test (test_sched_job_timeout),
        cmocka_unit_test (test_sched_cancel_barrier),
        cmocka_unit_test (test_sched_cancel_pipeline),
        cmocka_unit_test (test_sched_cancel_pending),
        cmocka_unit_test (test_sched_node_offline),
        cmocka_unit_test (test_sched_offline_between_phases),
        cmocka_unit_test (test_sched_stale_and_duplicate),
        cmocka_unit_test (test_sched_restore_barrier),
        cmocka_unit_test (test_sched_restore_broadcast_unsaved),
        cmocka_unit_test (test_sched_restore_pipeline),
        cmocka_unit_test (test_sched_dag_join),
        cmocka_unit_test (test_sched_dag_barrier),
        cmocka_unit_test (test_sched_dag_conditions),
        cmocka_unit_test (test_sched_dag_fail_fast),
        cmocka_unit_test (test_sched_dag_pipeline),
        cmocka_unit_test (test_sched_dag_restore),
        cmocka_unit_test (test_sched_dag_any_node),
        cmocka_unit_test (test_sched_batch_split),
        cmocka_unit_test (test_sched_batch_rolling),
        cmocka_unit_test (test_sched_batch_budget),
        cmocka_unit_test (test_sched_batch_zero_and_restore),
        cmocka_unit_test (test_sched_batch_budget_named_offline),
        cmocka_unit_test (test_sched_batch_budget_two_offline),
        cmocka_unit_test (test_sched_batch_budget_member_offline),
        cmocka_unit_test (test_sched_batch_step),
        cmocka_unit_test (test_sched_batch_budget_event_step),
        cmocka_unit_test (test_sched_scale_10k_nodes),
        cmocka_unit_test (test_sched_named_nodes_not_run),
        cmocka_unit_test (test_sched_named_node_and_failure),
        cmocka_unit_test (test_sched_members_not_run),
        cmocka_unit_test (test_sched_queued_named_node_offline),
        cmocka_unit_test (test_sched_restore_named_not_run),
        cmocka_unit_test (test_sched_cancel_records_run_time),
        cmocka_unit_test (test_sched_interrupted_records_run_time),
        cmocka_unit_test (test_sched_any_least_loaded),
        cmocka_unit_test (test_sched_lease_expiry_reclaims),
        cmocka_unit_test (test_sched_reclaim_after_started),
        cmocka_unit_test (test_sched_any_ack_timeout_reclaims),
        cmocka_unit_test (test_sched_limit_fleet_batches),
        cmocka_unit_test (test_sched_limit_priority_and_per_node),
        cmocka_unit_test (test_sched_limit_job_lowers),
        cmocka_unit_test (test_sched_progress_in_memory),
        cmocka_unit_test (test_sched_stall_timeout),
        cmocka_unit_test (test_sched_restore_any_node),
        cmocka_unit_test (test_sched_restore_waits_for_node),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
