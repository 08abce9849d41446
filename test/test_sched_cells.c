/*  =========================================================================
    test_sched_cells - the table of a cell's status moves (sched_int.h)

    Every write of a cell's status goes through sched_cell_move, which
    asserts its move is in one table in debug builds (GRID_DEBUG, as make
    SANITIZE=1 builds); sched_cell_move_allowed reads that table. The first tests read the table itself: final statuses have no
    way out, open ones reach the moves the rules need and no others. The
    walks then drive jobs through the public API into every final status
    a cell can have, so a move the scheduler makes and the table lacks
    stops the test in a debug build.
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

#include "../broker/sched_int.h"

#define S_STATUSES (SCHED_CELL_RETRY_WAIT + 1)
#define S_CELLS_MAX 16

//  ---------------------------------------------------------------------
//  Harness: two online nodes n1 and n2; n3 is named by targets but is
//  ABSENT_STATUS (drained, unsupported, offline) when ABSENT is set.

typedef struct {
    sched_t *sched;
    int64_t now;
    bool absent;                        //  n3 cannot run jobs
    sched_cell_status_t absent_status;  //  How it cannot
    bool finished;                      //  A FINISHED action was drained
    sched_job_status_t job_status;      //  The job's status at FINISHED
    size_t expected_count;              //  Its nodes at FINISHED
    char expected [S_CELLS_MAX][8];
    size_t cell_count;
    sched_cell_status_t cells [S_CELLS_MAX];  //  Its cells at FINISHED
} harness_t;

static size_t
s_resolve (void *arg, const target_t *target, char ***ids_p)
{
    char **ids = (char **) calloc (2, sizeof (char *));
    size_t count = 0;
    const char *online [] = {"n1", "n2"};
    for (size_t index = 0; index < 2; index++) {
        bool match = target->scope == TARGET_ALL;
        for (size_t at = 0; at < target->node_count; at++)
            if (strcmp (target->nodes [at], online [index]) == 0)
                match = true;
        if (match)
            ids [count++] = strdup (online [index]);
    }
    *ids_p = ids;
    if (count == 0) {
        free (ids);
        *ids_p = NULL;
    }
    return count;
}

static size_t
s_unavailable (void *arg, const job_spec_t *spec, sched_not_run_t **list_p)
{
    harness_t *h = (harness_t *) arg;
    *list_p = NULL;
    bool named = false;
    for (size_t at = 0; at < spec->target.node_count; at++)
        if (strcmp (spec->target.nodes [at], "n3") == 0)
            named = true;
    if (!h->absent || !named)
        return 0;
    sched_not_run_t *list = (sched_not_run_t *) calloc (1, sizeof (*list));
    list->node = strdup ("n3");
    list->status = h->absent_status;
    list->reason = strdup (sched_cell_status_name (h->absent_status));
    list->named = true;
    *list_p = list;
    return 1;
}

static harness_t *
s_harness_new (void)
{
    harness_t *h = (harness_t *) calloc (1, sizeof (harness_t));
    sched_config_t config;
    sched_config_defaults (&config);
    config.seed = 7;
    config.ack_timeout_ms = 1000;
    config.ack_resends = 1;
    h->now = 1000;
    h->sched = sched_new (&config, s_resolve, h);
    assert_non_null (h->sched);
    sched_set_unavailable (h->sched, s_unavailable, h);
    return h;
}

static void
s_drain (harness_t *h)
{
    sched_action_t action;
    while (sched_next_action (h->sched, &action)) {
        if (action.type != SCHED_ACTION_FINISHED)
            continue;
        const sched_job_t *job = action.job;
        h->finished = true;
        h->job_status = job->status;
        h->expected_count = job->expected_count;
        h->cell_count = job->cells ? job->step_count * job->expected_count
                                   : 0;
        assert_true (h->expected_count <= S_CELLS_MAX);
        assert_true (h->cell_count <= S_CELLS_MAX);
        for (size_t index = 0; index < job->expected_count; index++)
            snprintf (h->expected [index], sizeof (h->expected [index]),
                      "%s", job->expected [index]);
        for (size_t index = 0; index < h->cell_count; index++)
            h->cells [index] = job->cells [index].status;
    }
}

static void
s_harness_destroy (harness_t **h_p)
{
    harness_t *h = *h_p;
    s_drain (h);
    sched_destroy (&h->sched);
    free (h);
    *h_p = NULL;
}

//  A spec over TARGET ("all" or a node list) of STEPS top-level tasks
//  test.one, test.two, ... with STRATEGY.
static job_spec_t *
s_spec (const char *target, size_t steps, job_strategy_t strategy)
{
    job_spec_t *spec = (job_spec_t *) calloc (1, sizeof (job_spec_t));
    if (strcmp (target, "all") == 0)
        spec->target.scope = TARGET_ALL;
    else {
        spec->target.scope = TARGET_NODE;
        spec->target.value = strdup (target);
        spec->target.nodes = (char **) calloc (4, sizeof (char *));
        char *copy = strdup (target);
        char *save = NULL;
        for (char *id = strtok_r (copy, ",", &save); id;
             id = strtok_r (NULL, ",", &save))
            spec->target.nodes [spec->target.node_count++] = strdup (id);
        free (copy);
    }
    spec->strategy = strategy;
    spec->phases = (job_phase_t *) calloc (steps, sizeof (job_phase_t));
    const char *actions [] = {"one", "two", "three"};
    for (size_t step = 0; step < steps; step++) {
        spec->phases [step].backend = strdup ("test");
        spec->phases [step].action = strdup (actions [step % 3]);
        spec->phases [step].condition = JOB_COND_ALWAYS;
    }
    spec->phase_count = steps;
    return spec;
}

static void
s_submit (harness_t *h, const char *id, job_spec_t *spec)
{
    sched_job_t *job = sched_job_new (id, &spec);
    assert_non_null (job);
    char reason [128] = "";
    assert_int_equal (sched_submit (h->sched, &job, h->now, reason,
                                    sizeof (reason)),
                      0);
    assert_null (job);
    s_drain (h);
}

static const sched_cell_t *
s_live_cell (harness_t *h, const char *id, size_t step, const char *node)
{
    const sched_job_t *job = sched_job (h->sched, id);
    assert_non_null (job);
    ssize_t index = sched_job_node_index (job, node);
    assert_true (index >= 0);
    return &job->cells [step * job->expected_count + (size_t) index];
}

static int
s_result (harness_t *h, const char *id, uint32_t step, const char *node,
          const char *status)
{
    uint32_t attempt = s_live_cell (h, id, step, node)->attempt;
    proto_msg_t msg;
    memset (&msg, 0, sizeof (msg));
    msg.type = PROTO_RESULT;
    msg.job = (char *) id;
    msg.step = step;
    msg.attempt = attempt;
    msg.node = (char *) node;
    msg.status = (char *) status;
    msg.exit_code = strcmp (status, "success") == 0 ? 0 : 1;
    int rc = sched_on_result (h->sched, &msg, h->now);
    s_drain (h);
    return rc;
}

//  The node acknowledges, starts, and reports STATUS for STEP.
static void
s_run (harness_t *h, const char *id, uint32_t step, const char *node,
       const char *status)
{
    uint32_t attempt = s_live_cell (h, id, step, node)->attempt;
    assert_true (attempt > 0);
    assert_int_equal (sched_on_ack (h->sched, id, step, attempt, node, h->now),
                      0);
    assert_string_equal (
        sched_cell_status_name (s_live_cell (h, id, step, node)->status),
        "acknowledged");
    assert_int_equal (sched_on_started (h->sched, id, step, attempt, node,
                                        h->now),
                      0);
    assert_string_equal (
        sched_cell_status_name (s_live_cell (h, id, step, node)->status),
        "running");
    s_drain (h);
    assert_int_equal (s_result (h, id, step, node, status), 0);
}

//  The final status of cell STEP/NODE of the job that finished last.
static sched_cell_status_t
s_final_cell (harness_t *h, size_t step, const char *node)
{
    assert_true (h->finished);
    for (size_t index = 0; index < h->expected_count; index++)
        if (strcmp (h->expected [index], node) == 0)
            return h->cells [step * h->expected_count + index];
    fail_msg ("no node %s", node);
    return SCHED_CELL_PENDING;
}

#define assert_final(h, step, node, want)                               \
    assert_string_equal (sched_cell_status_name (s_final_cell (h, step, node)), \
                         sched_cell_status_name (want))

#define assert_live(h, id, step, node, want)                            \
    assert_string_equal (                                               \
        sched_cell_status_name (s_live_cell (h, id, step, node)->status), \
        sched_cell_status_name (want))

//  ---------------------------------------------------------------------
//  The table

//  A final status has no way out, not even to itself: a named node that
//  could not run keeps its status even in a batch a spent failure budget
//  never starts (R26).
static void
test_sched_cells_final_no_way_out (void **state)
{
    for (int from = 0; from < S_STATUSES; from++) {
        if (!sched_cell_status_final ((sched_cell_status_t) from))
            continue;
        for (int to = 0; to < S_STATUSES; to++)
            if (sched_cell_move_allowed ((sched_cell_status_t) from,
                                         (sched_cell_status_t) to))
                fail_msg ("%s -> %s: allowed",
                          sched_cell_status_name ((sched_cell_status_t) from),
                          sched_cell_status_name ((sched_cell_status_t) to));
    }
    //  The statuses with no way out at all are exactly the finals
    int closed = 0;
    for (int from = 0; from < S_STATUSES; from++) {
        bool any = false;
        for (int to = 0; to < S_STATUSES; to++)
            any = any || sched_cell_move_allowed ((sched_cell_status_t) from,
                                                  (sched_cell_status_t) to);
        if (!any) {
            assert_true (sched_cell_status_final ((sched_cell_status_t) from));
            closed++;
        }
    }
    assert_int_equal (closed, 10);
}

//  Every open status can end: it reaches a final status, and cancelled
//  (R14: a cancel ends every open cell).
static void
test_sched_cells_open_can_end (void **state)
{
    for (int from = 0; from < S_STATUSES; from++) {
        if (sched_cell_status_final ((sched_cell_status_t) from))
            continue;
        assert_true (sched_cell_move_allowed ((sched_cell_status_t) from,
                                              SCHED_CELL_CANCELLED));
        assert_true (sched_cell_move_allowed ((sched_cell_status_t) from,
                                              SCHED_CELL_SKIPPED));
    }
}

static void
test_sched_cells_open_moves (void **state)
{
    struct {
        sched_cell_status_t from, to;
        bool allowed;
    } moves [] = {
        //  Pending: sent, skipped, cancelled, or it could not run
        {SCHED_CELL_PENDING, SCHED_CELL_DISPATCHED, true},
        {SCHED_CELL_PENDING, SCHED_CELL_OFFLINE, true},
        {SCHED_CELL_PENDING, SCHED_CELL_DRAINED, true},
        {SCHED_CELL_PENDING, SCHED_CELL_UNSUPPORTED, true},
        {SCHED_CELL_PENDING, SCHED_CELL_ACKNOWLEDGED, false},
        {SCHED_CELL_PENDING, SCHED_CELL_RUNNING, false},
        {SCHED_CELL_PENDING, SCHED_CELL_SUCCESS, false},
        {SCHED_CELL_PENDING, SCHED_CELL_FAILED, false},
        {SCHED_CELL_PENDING, SCHED_CELL_LOST, false},
        {SCHED_CELL_PENDING, SCHED_CELL_RETRY_WAIT, false},
        //  In flight: the agent's answers, the broker's deadlines
        {SCHED_CELL_DISPATCHED, SCHED_CELL_ACKNOWLEDGED, true},
        {SCHED_CELL_DISPATCHED, SCHED_CELL_RUNNING, true},
        {SCHED_CELL_DISPATCHED, SCHED_CELL_LOST, true},
        {SCHED_CELL_DISPATCHED, SCHED_CELL_SUCCESS, true},
        {SCHED_CELL_ACKNOWLEDGED, SCHED_CELL_RUNNING, true},
        {SCHED_CELL_ACKNOWLEDGED, SCHED_CELL_TIMEOUT, true},
        {SCHED_CELL_ACKNOWLEDGED, SCHED_CELL_ACKNOWLEDGED, false},
        {SCHED_CELL_RUNNING, SCHED_CELL_SUCCESS, true},
        {SCHED_CELL_RUNNING, SCHED_CELL_FAILED, true},
        {SCHED_CELL_RUNNING, SCHED_CELL_INTERRUPTED, true},
        {SCHED_CELL_RUNNING, SCHED_CELL_RETRY_WAIT, true},
        {SCHED_CELL_RUNNING, SCHED_CELL_PENDING, true},     //  Reclaim (R19)
        {SCHED_CELL_RUNNING, SCHED_CELL_DISPATCHED, true},  //  Restore (R16)
        {SCHED_CELL_RUNNING, SCHED_CELL_ACKNOWLEDGED, false},
        {SCHED_CELL_RUNNING, SCHED_CELL_RUNNING, false},
        {SCHED_CELL_RUNNING, SCHED_CELL_OFFLINE, false},
        {SCHED_CELL_RUNNING, SCHED_CELL_DRAINED, false},
        //  Waiting for a retry: sent again, or ended
        {SCHED_CELL_RETRY_WAIT, SCHED_CELL_DISPATCHED, true},
        {SCHED_CELL_RETRY_WAIT, SCHED_CELL_LOST, true},
        {SCHED_CELL_RETRY_WAIT, SCHED_CELL_RUNNING, false},
        {SCHED_CELL_RETRY_WAIT, SCHED_CELL_SUCCESS, false},
        {SCHED_CELL_RETRY_WAIT, SCHED_CELL_FAILED, false},
        {SCHED_CELL_RETRY_WAIT, SCHED_CELL_RETRY_WAIT, false},
    };
    for (size_t index = 0; index < sizeof (moves) / sizeof (moves [0]);
         index++)
        if (sched_cell_move_allowed (moves [index].from, moves [index].to)
            != moves [index].allowed)
            fail_msg ("%s -> %s: %s",
                      sched_cell_status_name (moves [index].from),
                      sched_cell_status_name (moves [index].to),
                      moves [index].allowed ? "refused" : "allowed");
    //  Out of range is never a move
    assert_false (sched_cell_move_allowed ((sched_cell_status_t) S_STATUSES,
                                           SCHED_CELL_PENDING));
    assert_false (sched_cell_move_allowed (SCHED_CELL_PENDING,
                                           (sched_cell_status_t) -1));
}

//  sched_cell_move writes the status for an allowed move.
static void
test_sched_cells_move_writes (void **state)
{
    sched_cell_t cell;
    memset (&cell, 0, sizeof (cell));
    sched_cell_move (&cell, SCHED_CELL_DISPATCHED);
    assert_int_equal (cell.status, SCHED_CELL_DISPATCHED);
    sched_cell_move (&cell, SCHED_CELL_RUNNING);
    assert_int_equal (cell.status, SCHED_CELL_RUNNING);
    sched_cell_move (&cell, SCHED_CELL_RETRY_WAIT);
    sched_cell_move (&cell, SCHED_CELL_DISPATCHED);
    sched_cell_move (&cell, SCHED_CELL_SUCCESS);
    assert_int_equal (cell.status, SCHED_CELL_SUCCESS);
}

//  ---------------------------------------------------------------------
//  Walks through the public API into every final status

//  success, failed and skipped (continue drops the failed node)
static void
test_sched_cells_walk_success_failed_skipped (void **state)
{
    harness_t *h = s_harness_new ();
    s_submit (h, "j-1", s_spec ("all", 2, JOB_STRATEGY_CONTINUE));
    assert_live (h, "j-1", 0, "n1", SCHED_CELL_DISPATCHED);
    assert_live (h, "j-1", 1, "n1", SCHED_CELL_PENDING);
    s_run (h, "j-1", 0, "n1", "success");
    s_run (h, "j-1", 0, "n2", "failed");
    s_run (h, "j-1", 1, "n1", "success");
    assert_int_equal (h->job_status, SCHED_JOB_PARTIAL_FAILURE);
    assert_final (h, 0, "n1", SCHED_CELL_SUCCESS);
    assert_final (h, 1, "n1", SCHED_CELL_SUCCESS);
    assert_final (h, 0, "n2", SCHED_CELL_FAILED);
    assert_final (h, 1, "n2", SCHED_CELL_SKIPPED);
    s_harness_destroy (&h);
}

//  timeout and interrupted, as the agent reports them; a retry goes
//  through retry_wait and dispatched again first
static void
test_sched_cells_walk_timeout_interrupted (void **state)
{
    harness_t *h = s_harness_new ();
    job_spec_t *spec = s_spec ("all", 1, JOB_STRATEGY_CONTINUE);
    spec->phases [0].max_retries = 1;
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "n1", "timeout");
    assert_live (h, "j-1", 0, "n1", SCHED_CELL_RETRY_WAIT);
    h->now += 120000;
    assert_int_equal (sched_tick (h->sched, h->now), 0);
    s_drain (h);
    assert_live (h, "j-1", 0, "n1", SCHED_CELL_DISPATCHED);
    assert_int_equal (s_live_cell (h, "j-1", 0, "n1")->attempt, 2);
    s_run (h, "j-1", 0, "n1", "timeout");
    s_run (h, "j-1", 0, "n2", "interrupted");
    assert_live (h, "j-1", 0, "n2", SCHED_CELL_RETRY_WAIT);
    h->now += 120000;
    assert_int_equal (sched_tick (h->sched, h->now), 0);
    s_drain (h);
    s_run (h, "j-1", 0, "n2", "interrupted");
    assert_int_equal (h->job_status, SCHED_JOB_FAILED);
    assert_final (h, 0, "n1", SCHED_CELL_TIMEOUT);
    assert_final (h, 0, "n2", SCHED_CELL_INTERRUPTED);
    s_harness_destroy (&h);
}

//  lost (never acknowledged, and a node gone offline while it ran),
//  offline (a node gone with nothing under way) and the skip after them
static void
test_sched_cells_walk_lost_offline (void **state)
{
    harness_t *h = s_harness_new ();
    s_submit (h, "j-1", s_spec ("all", 2, JOB_STRATEGY_CONTINUE));
    s_run (h, "j-1", 0, "n1", "success");
    //  n1 waits for the barrier: nothing under way there
    assert_int_equal (sched_on_node_offline (h->sched, "n1", h->now), 0);
    s_drain (h);
    //  n2 never acknowledges: re-sent once, then lost
    for (int round = 0; round < 3; round++) {
        h->now += 1000;
        assert_int_equal (sched_tick (h->sched, h->now), 0);
        s_drain (h);
    }
    assert_int_equal (h->job_status, SCHED_JOB_FAILED);
    assert_final (h, 0, "n1", SCHED_CELL_SUCCESS);
    assert_final (h, 1, "n1", SCHED_CELL_OFFLINE);
    assert_final (h, 0, "n2", SCHED_CELL_LOST);
    assert_final (h, 1, "n2", SCHED_CELL_SKIPPED);

    //  A node that goes offline while its step runs: lost
    h->finished = false;
    s_submit (h, "j-2", s_spec ("n2", 1, JOB_STRATEGY_CONTINUE));
    uint32_t attempt = s_live_cell (h, "j-2", 0, "n2")->attempt;
    assert_int_equal (sched_on_started (h->sched, "j-2", 0, attempt, "n2",
                                        h->now),
                      0);
    assert_int_equal (sched_on_node_offline (h->sched, "n2", h->now), 0);
    s_drain (h);
    assert_int_equal (h->job_status, SCHED_JOB_FAILED);
    assert_final (h, 0, "n2", SCHED_CELL_LOST);
    s_harness_destroy (&h);
}

//  cancelled: pending, in flight and waiting for a retry alike
static void
test_sched_cells_walk_cancelled (void **state)
{
    harness_t *h = s_harness_new ();
    job_spec_t *spec = s_spec ("all", 2, JOB_STRATEGY_CONTINUE);
    spec->phases [0].max_retries = 2;
    s_submit (h, "j-1", spec);
    s_run (h, "j-1", 0, "n1", "failed");
    assert_live (h, "j-1", 0, "n1", SCHED_CELL_RETRY_WAIT);
    assert_int_equal (sched_on_ack (h->sched, "j-1", 0, 1, "n2", h->now), 0);
    s_drain (h);
    assert_int_equal (sched_cancel (h->sched, "j-1", "stop", h->now), 0);
    s_drain (h);
    assert_int_equal (h->job_status, SCHED_JOB_CANCELLED);
    for (size_t step = 0; step < 2; step++) {
        assert_final (h, step, "n1", SCHED_CELL_CANCELLED);
        assert_final (h, step, "n2", SCHED_CELL_CANCELLED);
    }
    //  A final cell stays: a result for the cancelled attempt is a
    //  duplicate, not a move
    assert_null (sched_job (h->sched, "j-1"));
    s_harness_destroy (&h);
}

//  drained, unsupported and offline for a named node that cannot run
static void
test_sched_cells_walk_named_not_run (void **state)
{
    sched_cell_status_t statuses [] = {SCHED_CELL_DRAINED,
                                       SCHED_CELL_UNSUPPORTED,
                                       SCHED_CELL_OFFLINE};
    for (size_t round = 0; round < 3; round++) {
        harness_t *h = s_harness_new ();
        h->absent = true;
        h->absent_status = statuses [round];
        s_submit (h, "j-1", s_spec ("n1,n3", 2, JOB_STRATEGY_CONTINUE));
        assert_live (h, "j-1", 0, "n3", statuses [round]);
        assert_live (h, "j-1", 1, "n3", statuses [round]);
        s_run (h, "j-1", 0, "n1", "success");
        s_run (h, "j-1", 1, "n1", "success");
        assert_int_equal (h->job_status, SCHED_JOB_PARTIAL_FAILURE);
        assert_final (h, 0, "n1", SCHED_CELL_SUCCESS);
        assert_final (h, 0, "n3", statuses [round]);
        assert_final (h, 1, "n3", statuses [round]);
        s_harness_destroy (&h);
    }
}

//  A spent failure budget (R26) skips the nodes of the batches it never
//  starts that could have run; a named node that could not run (drained)
//  keeps its status: no move leaves a final status.
static void
test_sched_cells_walk_budget_keeps_absent (void **state)
{
    harness_t *h = s_harness_new ();
    h->absent = true;
    h->absent_status = SCHED_CELL_DRAINED;
    job_spec_t *spec = s_spec ("n1,n2,n3", 1, JOB_STRATEGY_CONTINUE);
    spec->batch = (job_amount_t) {true, false, 1};
    spec->max_failures = (job_amount_t) {true, false, 0};
    s_submit (h, "j-1", spec);
    assert_live (h, "j-1", 0, "n3", SCHED_CELL_DRAINED);
    assert_live (h, "j-1", 0, "n2", SCHED_CELL_PENDING);
    s_run (h, "j-1", 0, "n1", "failed");
    assert_int_equal (h->job_status, SCHED_JOB_FAILED);
    assert_final (h, 0, "n1", SCHED_CELL_FAILED);
    assert_final (h, 0, "n2", SCHED_CELL_SKIPPED);
    assert_final (h, 0, "n3", SCHED_CELL_DRAINED);
    s_harness_destroy (&h);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_sched_cells_final_no_way_out),
        cmocka_unit_test (test_sched_cells_open_can_end),
        cmocka_unit_test (test_sched_cells_open_moves),
        cmocka_unit_test (test_sched_cells_move_writes),
        cmocka_unit_test (test_sched_cells_walk_success_failed_skipped),
        cmocka_unit_test (test_sched_cells_walk_timeout_interrupted),
        cmocka_unit_test (test_sched_cells_walk_lost_offline),
        cmocka_unit_test (test_sched_cells_walk_cancelled),
        cmocka_unit_test (test_sched_cells_walk_named_not_run),
        cmocka_unit_test (test_sched_cells_walk_budget_keeps_absent),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
