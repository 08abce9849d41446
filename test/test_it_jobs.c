/*  =========================================================================
    test_it_jobs - the job model end to end: the scheduler's rules
    (docs/SCHEDULING.md) through a real gridbroker, real gridagents and the
    real gridcli over ipc://.

    The fleet: web-01 (group web, tier=web.dev.us-east) and web-02 (group
    web, tier=web.prod) run the recording fakes of test/fakes; db-01 (group
    db) runs test/fakes/broken, whose apt-get fails every install, so one
    node of an `all` job fails while the others succeed. Each agent's fakes
    log their argv to <dir>/fake-<id>.log, so a test can see what ran, in
    which order, and what never ran.

    A node is made slow without timing: a long `test sleep` job holds its
    only executor slot, and the test cancels it when it has seen what it
    wanted to see.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ctype.h>
#include <czmq.h>
#include <dirent.h>
#include <pthread.h>

#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

static grid_t s_grid;

//  ---------------------------------------------------------------------
//  Helpers

//  The source tree (for test/fakes and test/data).
static const char *
s_src (void)
{
    const char *src = getenv ("GRID_SRC");
    return src && *src ? src : ".";
}

//  Starts agent ID whose programs come from test/fakes/TOOLS ("" for the
//  working fakes) and log their argv to <dir>/fake-<id>.log.
static int
s_start_agent (grid_t *grid, const char *id, const char *groups,
               const char *labels, const char *tools)
{
    char log [400], tool_dir [600];
    snprintf (log, sizeof log, "%s/fake-%s.log", grid->dir, id);
    snprintf (tool_dir, sizeof tool_dir, "%s/test/fakes%s%s", s_src (),
              *tools ? "/" : "", tools);
    const char *extra [] = {"--tool-dir", tool_dir, NULL};
    setenv ("GRID_FAKE_LOG", log, 1);
    int slot = grid_start_agent (grid, id, groups, labels, extra);
    unsetenv ("GRID_FAKE_LOG");
    return slot;
}

static char *
s_slurp (const char *path)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return strdup ("");
    char *text = NULL;
    size_t size = 0;
    FILE *memory = open_memstream (&text, &size);
    char buf [4096];
    size_t got;
    while ((got = fread (buf, 1, sizeof buf, file)) > 0)
        fwrite (buf, 1, got, memory);
    fclose (memory);
    fclose (file);
    return text;
}

//  What node ID's fakes recorded (caller frees).
static char *
s_fake_log (grid_t *grid, const char *id)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fake-%s.log", grid->dir, id);
    return s_slurp (path);
}

static void
s_fake_clear (grid_t *grid, const char *id)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fake-%s.log", grid->dir, id);
    FILE *file = fopen (path, "w");
    if (file)
        fclose (file);
}

static void
s_fake_clear_all (void)
{
    s_fake_clear (&s_grid, "web-01");
    s_fake_clear (&s_grid, "web-02");
    s_fake_clear (&s_grid, "db-01");
}

//  The ok reply's data, or a failed test.
static const pv_t *
s_data (pv_doc_t *doc)
{
    const pv_t *data = NULL;
    if (!grid_reply_ok (doc, &data) && doc) {
        pv_write_json (pv_doc_root (doc), stderr, 2);
        fprintf (stderr, "\n");
    }
    assert_true (grid_reply_ok (doc, &data));
    return data;
}

static char *
s_submit (grid_t *grid, const char *yaml)
{
    char *id = grid_submit_id (grid, yaml);
    assert_non_null (id);
    return id;
}

//  Submits YAML and waits for the job to end; returns the final record.
static pv_doc_t *
s_run (grid_t *grid, const char *yaml)
{
    char *id = s_submit (grid, yaml);
    pv_doc_t *doc = grid_wait_job (grid, id, S_WAIT_MS);
    free (id);
    s_data (doc);
    return doc;
}

static pv_doc_t *
s_get (grid_t *grid, const char *job_id)
{
    return grid_call (grid, "job.get", "job", job_id, NULL);
}

//  True when the string value VALUE is one of the '|'-separated LIST.
static bool
s_one_of (const pv_t *value, const char *list)
{
    size_t len = 0;
    const char *text = pv_str (value, &len);
    if (!text)
        return false;
    const char *cursor = list;
    while (cursor) {
        const char *bar = strchr (cursor, '|');
        size_t item = bar ? (size_t) (bar - cursor) : strlen (cursor);
        if (item == len && memcmp (cursor, text, len) == 0)
            return true;
        cursor = bar ? bar + 1 : NULL;
    }
    return false;
}

//  Asserts the status of cell (STEP, NODE) in RECORD, showing it if not.
static void
s_assert_cell (const pv_t *record, int step, const char *node,
               const char *status)
{
    const pv_t *cell = grid_cell (record, step, node);
    if (!grid_str_is (cell, "status", status)) {
        fprintf (stderr, "step %d on %s: expected %s, got ", step, node,
                 status);
        pv_write_json (cell, stderr, 0);
        fprintf (stderr, "\n");
    }
    assert_true (grid_str_is (cell, "status", status));
}

static void
s_assert_status (const pv_t *record, const char *status)
{
    if (!grid_str_is (record, "status", status)) {
        fprintf (stderr, "expected job status %s, the record is:\n", status);
        pv_write_json (record, stderr, 2);
        fprintf (stderr, "\n");
    }
    assert_true (grid_str_is (record, "status", status));
}

//  Polls the job until cell (STEP, NODE) has one of STATUSES ("a|b").
static bool
s_wait_cell (grid_t *grid, const char *job_id, int step, const char *node,
             const char *statuses)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *doc = s_get (grid, job_id);
        const pv_t *record = NULL;
        bool there = grid_reply_ok (doc, &record)
                     && s_one_of (pv_map_get (grid_cell (record, step, node),
                                              "status"), statuses);
        pv_doc_destroy (&doc);
        if (there)
            return true;
        zclock_sleep (20);
    }
    return false;
}

//  Processes whose parent is PID (zombies included: not yet reaped).
static int
s_children (pid_t pid)
{
    DIR *dir = opendir ("/proc");
    if (!dir)
        return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir (dir))) {
        if (!isdigit ((unsigned char) entry->d_name [0]))
            continue;
        char path [300];
        snprintf (path, sizeof path, "/proc/%s/stat", entry->d_name);
        FILE *file = fopen (path, "r");
        if (!file)
            continue;
        char buf [1024];
        size_t got = fread (buf, 1, sizeof buf - 1, file);
        fclose (file);
        buf [got] = 0;
        //  pid (comm) state ppid ...: comm may hold spaces and parens
        char *paren = strrchr (buf, ')');
        char state = 0;
        int parent = 0;
        if (paren && sscanf (paren + 1, " %c %d", &state, &parent) == 2
            && parent == pid)
            count++;
    }
    closedir (dir);
    return count;
}

//  Polls until agent SLOT has no child process left.
static bool
s_wait_no_children (grid_t *grid, int slot)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        if (s_children (grid->agent_pids [slot]) == 0)
            return true;
        zclock_sleep (20);
    }
    return false;
}

static int
s_slot (grid_t *grid, const char *id)
{
    for (size_t index = 0; index < grid->agent_count; index++)
        if (strcmp (grid->agent_ids [index], id) == 0)
            return (int) index;
    return -1;
}

//  The job's events document (job.events).
static pv_doc_t *
s_events (grid_t *grid, const char *job_id)
{
    pv_doc_t *doc = grid_call (grid, "job.events", "job", job_id, NULL);
    s_data (doc);
    return doc;
}

//  Index of the first event NAME at STEP (-1: no step) on NODE (NULL: no
//  node) in EVENTS, or -1.
static int
s_event_at (const pv_t *events, const char *name, int step, const char *node)
{
    for (size_t index = 0; index < pv_size (events); index++) {
        const pv_t *event = pv_array_at (events, index);
        int64_t at = -1;
        if (pv_map_get (event, "step"))
            pv_get_int (pv_map_get (event, "step"), &at);
        const pv_t *who = pv_map_get (event, "node");
        bool node_ok = node ? pv_str_eq (who, node)
                            : (!who || pv_type (who) == PV_NIL);
        if (grid_str_is (event, "event", name) && at == step && node_ok)
            return (int) index;
    }
    return -1;
}

//  Asserts the first event NAME_A (STEP_A, NODE_A) comes before the first
//  NAME_B (STEP_B, NODE_B), both present.
static void
s_assert_before (const pv_t *events, const char *name_a, int step_a,
                 const char *node_a, const char *name_b, int step_b,
                 const char *node_b)
{
    int a = s_event_at (events, name_a, step_a, node_a);
    int b = s_event_at (events, name_b, step_b, node_b);
    if (a < 0 || b < 0 || a >= b) {
        fprintf (stderr, "expected %s %d %s (at %d) before %s %d %s (at %d):\n",
                 name_a, step_a, node_a ? node_a : "-", a, name_b, step_b,
                 node_b ? node_b : "-", b);
        pv_write_json (events, stderr, 0);
        fprintf (stderr, "\n");
    }
    assert_true (a >= 0 && b >= 0 && a < b);
}

static char *
s_field (const pv_t *map, const char *key)
{
    char *text = pv_strdup (pv_map_get (map, key));
    return text ? text : strdup ("");
}

static int64_t
s_int (const pv_t *map, const char *key)
{
    int64_t value = -1;
    pv_get_int (pv_map_get (map, key), &value);
    return value;
}

//  Asserts gridcli exited CODE, showing its output when it did not.
static void
s_cli_expect (int code, const char *out, const char *err, int got)
{
    if (got != code)
        fprintf (stderr, "gridcli exit %d (expected %d)\nstdout:\n%s\n"
                 "stderr:\n%s\n", got, code, out, err);
    assert_int_equal (got, code);
}

//  True when some line of TEXT holds every NULL-terminated word.
static bool
s_line_with (const char *text, ...)
{
    const char *line = text;
    while (line && *line) {
        const char *end = strchr (line, '\n');
        size_t len = end ? (size_t) (end - line) : strlen (line);
        char *copy = strndup (line, len);
        bool all = true;
        va_list args;
        va_start (args, text);
        const char *word;
        while ((word = va_arg (args, const char *)))
            if (!strstr (copy, word))
                all = false;
        va_end (args);
        free (copy);
        if (all)
            return true;
        line = end ? end + 1 : NULL;
    }
    return false;
}

//  Reads a job file of test/data into a fresh string.
static char *
s_data_file (const char *name)
{
    char path [600];
    snprintf (path, sizeof path, "%s/test/data/%s", s_src (), name);
    char *text = s_slurp (path);
    assert_true (strlen (text) > 0);
    return text;
}

//  ---------------------------------------------------------------------
//  Fixture

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0)
        return -1;
    if (s_start_agent (&s_grid, "web-01", "web", "tier=web.dev.us-east", "") < 0
        || s_start_agent (&s_grid, "web-02", "web", "tier=web.prod", "") < 0
        || s_start_agent (&s_grid, "db-01", "db", NULL, "broken") < 0)
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  R4, R5: pipeline then barrier

static void
test_it_jobs_hierarchical_example (void **state)
{
    s_fake_clear_all ();
    //  web-02's only executor slot is taken by a long sleep
    char *blocker = s_submit (&s_grid,
        "target: node:web-02\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60}}]\n");
    assert_true (s_wait_cell (&s_grid, blocker, 0, "web-02", "running"));

    char *yaml = s_data_file ("grid-hierarchical.yaml");
    char *job_id = s_submit (&s_grid, yaml);
    free (yaml);
    //  web-01 goes through the whole pipeline without waiting for web-02
    assert_true (s_wait_cell (&s_grid, job_id, 2, "web-01", "success"));
    pv_doc_t *doc = s_get (&s_grid, job_id);
    const pv_t *record = s_data (doc);
    s_assert_cell (record, 0, "web-01", "success");
    s_assert_cell (record, 1, "web-01", "success");
    assert_true (s_one_of (pv_map_get (grid_cell (record, 0, "web-02"),
                                       "status"), "dispatched|acknowledged"));
    s_assert_cell (record, 1, "web-02", "pending");
    //  ...and the barrier holds web-01 back until web-02 is through
    s_assert_cell (record, 3, "web-01", "pending");
    s_assert_cell (record, 3, "web-02", "pending");
    s_assert_status (record, "running");
    pv_doc_destroy (&doc);
    char *log = s_fake_log (&s_grid, "web-02");
    assert_string_equal (log, "");
    free (log);

    //  Free web-02: its pipeline runs, then both start nginx together
    doc = grid_call (&s_grid, "job.cancel", "job", blocker, NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    doc = grid_wait_job (&s_grid, job_id, S_WAIT_MS);
    record = s_data (doc);
    s_assert_status (record, "completed");
    const char *nodes [] = {"web-01", "web-02"};
    for (int step = 0; step < 4; step++)
        for (int node = 0; node < 2; node++)
            s_assert_cell (record, step, nodes [node], "success");
    assert_int_equal (s_int (record, "steps"), 4);
    pv_doc_destroy (&doc);

    doc = s_events (&s_grid, job_id);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    //  Per node, no waiting: web-01 finished the pipeline before web-02
    //  finished its first step (a quick step's result stands for its ack
    //  and its start, so it may have no "running" event)
    s_assert_before (events, "succeeded", 2, "web-01", "succeeded", 0,
                     "web-02");
    //  The barrier: one broadcast after the last pipeline step of both
    s_assert_before (events, "succeeded", 2, "web-02", "dispatched", 3, NULL);
    s_assert_before (events, "succeeded", 2, "web-01", "dispatched", 3, NULL);
    s_assert_before (events, "dispatched", 3, NULL, "succeeded", 3, "web-01");
    pv_doc_destroy (&doc);

    //  Exactly what ran, in order, on each node
    const char *expected = "apt-get\nupdate\n-y\n---- end of argv\n"
                           "apt-get\ninstall\n-y\n--\nnginx\n---- end of argv\n"
                           "systemctl\nenable\n--\nnginx\n---- end of argv\n"
                           "systemctl\nstart\n--\nnginx\n---- end of argv\n";
    for (int node = 0; node < 2; node++) {
        log = s_fake_log (&s_grid, nodes [node]);
        assert_string_equal (log, expected);
        free (log);
    }
    log = s_fake_log (&s_grid, "db-01");
    assert_string_equal (log, "");
    free (log);
    free (job_id);

    doc = s_get (&s_grid, blocker);
    s_assert_status (s_data (doc), "cancelled");
    pv_doc_destroy (&doc);
    free (blocker);
}

//  ---------------------------------------------------------------------
//  R6, R7: fail-fast with rollback, continue, conditions

static void
test_it_jobs_rollback_example (void **state)
{
    s_fake_clear_all ();
    char *yaml = s_data_file ("grid-conditions.yaml");
    char *job_id = s_submit (&s_grid, yaml);
    free (yaml);
    pv_doc_t *doc = grid_wait_job (&s_grid, job_id, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    s_assert_status (record, "failed");
    //  The install failed on db-01 only
    s_assert_cell (record, 0, "db-01", "failed");
    s_assert_cell (record, 0, "web-01", "success");
    s_assert_cell (record, 0, "web-02", "success");
    char *error = s_field (grid_cell (record, 0, "db-01"), "error");
    assert_non_null (strstr (error, "dpkg returned an error"));
    free (error);
    //  fail-fast: the start never happens anywhere
    s_assert_cell (record, 1, "db-01", "skipped");
    s_assert_cell (record, 1, "web-01", "skipped");
    s_assert_cell (record, 1, "web-02", "skipped");
    //  The rollback ran on every node that took part, the failed one too
    s_assert_cell (record, 2, "db-01", "success");
    s_assert_cell (record, 2, "web-01", "success");
    s_assert_cell (record, 2, "web-02", "success");
    char *reason = s_field (record, "reason");
    assert_non_null (strstr (reason, "step 0"));
    free (reason);
    pv_doc_destroy (&doc);

    const char *expected = "apt-get\ninstall\n-y\n--\nmyapp\n---- end of argv\n"
                           "apt-get\nremove\n-y\n--\nmyapp\n---- end of argv\n";
    const char *nodes [] = {"db-01", "web-01", "web-02"};
    for (int node = 0; node < 3; node++) {
        char *log = s_fake_log (&s_grid, nodes [node]);
        assert_string_equal (log, expected);
        free (log);
    }
    doc = s_events (&s_grid, job_id);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    assert_true (s_event_at (events, "failed", 0, "db-01") >= 0);
    assert_true (s_event_at (events, "skipped", 1, NULL) >= 0);
    s_assert_before (events, "failed", 0, "db-01", "dispatched", 2, "db-01");
    pv_doc_destroy (&doc);
    free (job_id);
}

static void
test_it_jobs_continue_partial_failure (void **state)
{
    s_fake_clear_all ();
    pv_doc_t *doc = s_run (&s_grid,
        "target: all\n"
        "strategy: continue\n"
        "tasks:\n"
        "  - {backend: apt, action: install, params: {package: myapp}}\n"
        "  - {backend: systemd, action: start, params: {unit: myapp}}\n");
    const pv_t *record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "partial_failure");
    s_assert_cell (record, 0, "db-01", "failed");
    s_assert_cell (record, 1, "db-01", "skipped");
    s_assert_cell (record, 0, "web-01", "success");
    s_assert_cell (record, 1, "web-01", "success");
    s_assert_cell (record, 0, "web-02", "success");
    s_assert_cell (record, 1, "web-02", "success");
    char *reason = s_field (record, "reason");
    assert_non_null (strstr (reason, "1 of 3 nodes failed at step 0"));
    free (reason);
    pv_doc_destroy (&doc);
    //  The dropped node never got the start
    char *log = s_fake_log (&s_grid, "db-01");
    assert_string_equal (log, "apt-get\ninstall\n-y\n--\nmyapp\n"
                              "---- end of argv\n");
    free (log);
    log = s_fake_log (&s_grid, "web-01");
    assert_non_null (strstr (log, "systemctl\nstart\n--\nmyapp\n"));
    free (log);
}

static void
test_it_jobs_conditions_at_both_levels (void **state)
{
    //  Top level, something failed: on_success is skipped, on_failure runs
    pv_doc_t *doc = s_run (&s_grid,
        "target: group:web\n"
        "tasks:\n"
        "  - {backend: test, action: fail, params: {msg: broken}}\n"
        "  - {backend: test, action: echo, params: {msg: ok},\n"
        "     condition: on_success}\n"
        "  - {backend: test, action: echo, params: {msg: undo},\n"
        "     condition: on_failure}\n");
    const pv_t *record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "failed");
    const char *web [] = {"web-01", "web-02"};
    for (int node = 0; node < 2; node++) {
        const char *name = web [node];
        s_assert_cell (record, 0, name, "failed");
        s_assert_cell (record, 1, name, "skipped");
        s_assert_cell (record, 2, name, "success");
        assert_true (grid_str_is (grid_cell (record, 2, name), "output",
                                  "undo\n"));
    }
    pv_doc_destroy (&doc);

    //  Top level, nothing failed: the skipped on_failure phase is fine
    doc = s_run (&s_grid,
        "target: group:web\n"
        "tasks:\n"
        "  - {backend: test, action: echo, params: {msg: first}}\n"
        "  - {backend: test, action: echo, params: {msg: undo},\n"
        "     condition: on_failure}\n"
        "  - {backend: test, action: echo, params: {msg: ok},\n"
        "     condition: on_success}\n");
    record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "completed");
    s_assert_cell (record, 1, "web-01", "skipped");
    s_assert_cell (record, 2, "web-01", "success");
    s_assert_cell (record, 1, "web-02", "skipped");
    s_assert_cell (record, 2, "web-02", "success");
    pv_doc_destroy (&doc);

    //  Inside a pipeline, per node: db-01's install fails, so db-01 (and
    //  only db-01) runs its on_failure sub-step and skips on_success
    s_fake_clear_all ();
    doc = s_run (&s_grid,
        "target: all\n"
        "strategy: continue\n"
        "tasks:\n"
        "  - tasks:\n"
        "      - {backend: apt, action: install, params: {package: myapp}}\n"
        "      - {backend: apt, action: remove, params: {package: myapp},\n"
        "         condition: on_failure}\n"
        "      - {backend: test, action: echo, params: {msg: installed},\n"
        "         condition: on_success}\n");
    record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "partial_failure");
    s_assert_cell (record, 0, "db-01", "failed");
    s_assert_cell (record, 1, "db-01", "success");
    s_assert_cell (record, 2, "db-01", "skipped");
    s_assert_cell (record, 0, "web-01", "success");
    s_assert_cell (record, 1, "web-01", "skipped");
    s_assert_cell (record, 2, "web-01", "success");
    s_assert_cell (record, 0, "web-02", "success");
    s_assert_cell (record, 1, "web-02", "skipped");
    s_assert_cell (record, 2, "web-02", "success");
    pv_doc_destroy (&doc);
    char *log = s_fake_log (&s_grid, "web-01");
    assert_null (strstr (log, "remove"));
    free (log);
    log = s_fake_log (&s_grid, "db-01");
    assert_non_null (strstr (log, "apt-get\nremove\n-y\n--\nmyapp\n"));
    free (log);
}

//  ---------------------------------------------------------------------
//  R11: retries

static void
test_it_jobs_retry_succeeds_on_second_attempt (void **state)
{
    char *job_id = s_submit (&s_grid,
        "target: node:web-01\n"
        "tasks:\n"
        "  - {backend: test, action: flaky, params: {failures: 1},\n"
        "     max_retries: 1}\n");
    pv_doc_t *doc = grid_wait_job (&s_grid, job_id, S_WAIT_MS);
    const pv_t *record = s_data (doc);
    s_assert_status (record, "completed");
    const pv_t *cell = grid_cell (record, 0, "web-01");
    s_assert_cell (record, 0, "web-01", "success");
    assert_int_equal (s_int (cell, "attempts"), 2);
    assert_true (grid_str_is (cell, "output",
                              "attempt 2: succeeded, failures 1\n"));
    //  The failed first attempt is kept
    const pv_t *history = pv_map_get (cell, "history");
    assert_int_equal (pv_size (history), 1);
    const pv_t *first = pv_array_at (history, 0);
    assert_int_equal (s_int (first, "attempt"), 1);
    assert_true (grid_str_is (first, "status", "failed"));
    assert_int_equal (s_int (first, "exit_code"), 1);
    assert_true (grid_str_is (first, "error",
                              "attempt 1: failing as asked, failures 1\n"));
    pv_doc_destroy (&doc);
    doc = s_events (&s_grid, job_id);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    s_assert_before (events, "failed", 0, "web-01", "retried", 0, "web-01");
    s_assert_before (events, "retried", 0, "web-01", "succeeded", 0, "web-01");
    pv_doc_destroy (&doc);
    free (job_id);

    //  Without retries the same task fails once and stays failed
    doc = s_run (&s_grid,
        "target: node:web-01\n"
        "tasks: [{backend: test, action: flaky, params: {failures: 1}}]\n");
    record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "failed");
    s_assert_cell (record, 0, "web-01", "failed");
    assert_int_equal (s_int (grid_cell (record, 0, "web-01"), "attempts"), 1);
    pv_doc_destroy (&doc);

    //  Retries run out: every attempt is in the history
    doc = s_run (&s_grid,
        "target: node:web-01\n"
        "tasks: [{backend: test, action: flaky, params: {failures: 3},\n"
        "         max_retries: 2}]\n");
    record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "failed");
    cell = grid_cell (record, 0, "web-01");
    s_assert_cell (record, 0, "web-01", "failed");
    assert_int_equal (s_int (cell, "attempts"), 3);
    assert_int_equal (pv_size (pv_map_get (cell, "history")), 2);
    assert_true (grid_str_is (cell, "error",
                              "attempt 3: failing as asked, failures 3\n"));
    pv_doc_destroy (&doc);
}

//  ---------------------------------------------------------------------
//  R10, R13, R14: timeouts and cancels

static void
test_it_jobs_task_timeout_kills_the_work (void **state)
{
    int slot = s_slot (&s_grid, "web-01");
    long long start = grid_now_ms ();
    pv_doc_t *doc = s_run (&s_grid,
        "target: node:web-01\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60},\n"
        "         timeout: 1s}]\n");
    const pv_t *record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "failed");
    s_assert_cell (record, 0, "web-01", "timeout");
    int64_t exit_code = s_int (grid_cell (record, 0, "web-01"), "exit_code");
    assert_int_equal (exit_code, -1);
    pv_doc_destroy (&doc);
    //  The agent stopped the sleep itself, long before its 60 s
    assert_true (grid_now_ms () - start < 60000);
    assert_true (s_wait_no_children (&s_grid, slot));
    //  ...and its slot is free for the next job at once
    doc = s_run (&s_grid,
        "target: node:web-01\n"
        "tasks: [{backend: test, action: echo, params: {msg: next}}]\n");
    s_assert_status (pv_map_get (pv_doc_root (doc), "data"), "completed");
    pv_doc_destroy (&doc);
}

static void
test_it_jobs_job_timeout_cancels_the_rest (void **state)
{
    pv_doc_t *doc = s_run (&s_grid,
        "target: group:web\n"
        "timeout: 1s\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 60}}\n"
        "  - {backend: test, action: echo, params: {msg: never}}\n");
    const pv_t *record = pv_map_get (pv_doc_root (doc), "data");
    s_assert_status (record, "failed");
    char *reason = s_field (record, "reason");
    assert_string_equal (reason, "job timeout after 1s");
    free (reason);
    s_assert_cell (record, 0, "web-01", "cancelled");
    s_assert_cell (record, 0, "web-02", "cancelled");
    s_assert_cell (record, 1, "web-01", "cancelled");
    s_assert_cell (record, 1, "web-02", "cancelled");
    pv_doc_destroy (&doc);
    assert_true (s_wait_no_children (&s_grid, s_slot (&s_grid, "web-01")));
    assert_true (s_wait_no_children (&s_grid, s_slot (&s_grid, "web-02")));
}

static void
test_it_jobs_cancel_running_job (void **state)
{
    int slot = s_slot (&s_grid, "web-02");
    char *job_id = s_submit (&s_grid,
        "target: node:web-02\n"
        "tasks:\n"
        "  - tasks:\n"
        "      - {backend: test, action: sleep, params: {seconds: 60}}\n"
        "      - {backend: test, action: echo, params: {msg: never}}\n");
    assert_true (s_wait_cell (&s_grid, job_id, 0, "web-02", "running"));
    assert_true (s_children (s_grid.agent_pids [slot]) >= 1);

    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "cancel", job_id,
                         "--reason", "operator changed their mind", NULL);
    s_cli_expect (0, out, err, code);
    assert_true (s_line_with (out, "job", job_id, "cancelled", NULL));
    free (out);
    free (err);

    //  Cancelled at once: the running step and the one never run
    pv_doc_t *doc = s_get (&s_grid, job_id);
    const pv_t *record = s_data (doc);
    s_assert_status (record, "cancelled");
    s_assert_cell (record, 0, "web-02", "cancelled");
    s_assert_cell (record, 1, "web-02", "cancelled");
    char *reason = s_field (record, "reason");
    assert_non_null (strstr (reason, "operator changed their mind"));
    free (reason);
    pv_doc_destroy (&doc);
    //  The agent stopped the sleep and freed its only slot: the next job
    //  on web-02 runs now, not in 60 s
    assert_true (s_wait_no_children (&s_grid, slot));
    long long start = grid_now_ms ();
    doc = s_run (&s_grid,
        "target: node:web-02\n"
        "tasks: [{backend: test, action: echo, params: {msg: next}}]\n");
    s_assert_status (pv_map_get (pv_doc_root (doc), "data"), "completed");
    pv_doc_destroy (&doc);
    assert_true (grid_now_ms () - start < 30000);

    doc = s_events (&s_grid, job_id);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    assert_true (s_event_at (events, "cancelled", 0, "web-02") >= 0);
    assert_true (s_event_at (events, "finished", -1, NULL) >= 0);
    pv_doc_destroy (&doc);

    //  A finished job cannot be cancelled again: conflict, exit 4
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "cancel", job_id, NULL);
    s_cli_expect (4, out, err, code);
    assert_non_null (strstr (err, "(conflict)"));
    free (out);
    free (err);
    free (job_id);
}

//  ---------------------------------------------------------------------
//  R1: admission, priority, pending cancel (a broker of its own)

static void
test_it_jobs_admission_queue_full_and_priority (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    const char *limits [] = {"--max-concurrent", "1", "--max-pending", "3",
                             NULL};
    assert_int_equal (grid_start_broker (&grid, limits), 0);
    assert_true (s_start_agent (&grid, "web-01", "web", NULL, "") >= 0);

    char *running = s_submit (&grid,
        "target: node:web-01\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60}}]\n");
    assert_true (s_wait_cell (&grid, running, 0, "web-01", "running"));
    //  Three wait: low, high, low (submission order b, c, d)
    char *queued [3];
    const char *jobs [] = {
        "target: node:web-01\npriority: 0\n"
        "tasks: [{backend: apt, action: install, params: {package: pkg-b}}]\n",
        "target: node:web-01\npriority: 10\n"
        "tasks: [{backend: apt, action: install, params: {package: pkg-c}}]\n",
        "target: node:web-01\npriority: 0\n"
        "tasks: [{backend: apt, action: install, params: {package: pkg-d}}]\n",
    };
    for (int index = 0; index < 3; index++) {
        pv_doc_t *reply = grid_submit (&grid, jobs [index]);
        const pv_t *data = s_data (reply);
        assert_true (grid_str_is (data, "status", "pending"));
        queued [index] = s_field (data, "job");
        pv_doc_destroy (&reply);
    }
    //  The operator sees the queue
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&grid, &out, &err, 10000, "status", NULL);
    s_cli_expect (0, out, err, rc);
    assert_true (s_line_with (out, "jobs", "3 pending", "1 running", NULL));
    free (out);
    free (err);
    //  A fourth is refused: back-pressure, not a silent drop
    const char *fourth =
        "target: node:web-01\n"
        "tasks: [{backend: apt, action: install, params: {package: pkg-e}}]\n";
    pv_doc_t *reply = grid_submit (&grid, fourth);
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, "queue_full");
    free (code);
    char *message = s_field (pv_doc_root (reply), "message");
    assert_non_null (strstr (message, "queue full"));
    free (message);
    pv_doc_destroy (&reply);
    rc = grid_cli (&grid, &out, &err, 10000, "job", "run", "--target",
                       "node:web-01", "apt", "install", "--package", "pkg-e",
                       NULL);
    s_cli_expect (4, out, err, rc);
    assert_non_null (strstr (err, "(queue_full)"));
    free (out);
    free (err);

    //  Cancelling a pending job takes it out of the queue at once
    rc = grid_cli (&grid, &out, &err, 10000, "job", "cancel", queued [2], NULL);
    s_cli_expect (0, out, err, rc);
    free (out);
    free (err);
    pv_doc_t *doc = s_get (&grid, queued [2]);
    s_assert_status (s_data (doc), "cancelled");
    pv_doc_destroy (&doc);
    //  ...which makes room for one more
    reply = grid_submit (&grid, fourth);
    const pv_t *data = s_data (reply);
    char *last = s_field (data, "job");
    pv_doc_destroy (&reply);

    //  Free the slot: the queue runs by priority, then age
    doc = grid_call (&grid, "job.cancel", "job", running, NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    doc = grid_wait_job (&grid, last, S_WAIT_MS);
    s_assert_status (s_data (doc), "completed");
    pv_doc_destroy (&doc);
    for (int index = 0; index < 2; index++) {
        doc = grid_wait_job (&grid, queued [index], S_WAIT_MS);
        s_assert_status (s_data (doc), "completed");
        pv_doc_destroy (&doc);
    }
    char *log = s_fake_log (&grid, "web-01");
    assert_string_equal (log,
                         "apt-get\ninstall\n-y\n--\npkg-c\n---- end of argv\n"
                         "apt-get\ninstall\n-y\n--\npkg-b\n---- end of argv\n"
                         "apt-get\ninstall\n-y\n--\npkg-e\n---- end of argv\n");
    free (log);
    //  The cancelled pending job never started and says so
    doc = s_events (&grid, queued [2]);
    const pv_t *events = pv_map_get (s_data (doc), "events");
    assert_true (s_event_at (events, "submitted", -1, NULL) >= 0);
    assert_true (s_event_at (events, "started", -1, NULL) < 0);
    assert_true (s_event_at (events, "finished", -1, NULL) >= 0);
    pv_doc_destroy (&doc);
    for (int index = 0; index < 3; index++)
        free (queued [index]);
    free (last);
    free (running);
    grid_stop (&grid);
}

//  A cancel names who asked for it: the caller's key name and role, as the
//  broker identified them, in the job's reason and its cancelled event
static void
test_it_jobs_cancel_names_the_caller (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    char alice [400], conf [400];
    assert_int_equal (grid_keygen (&grid, "alice", alice, sizeof alice, NULL),
                      0);
    snprintf (conf, sizeof conf, "%s/broker.yaml", grid.dir);
    FILE *file = fopen (conf, "w");
    assert_non_null (file);
    fprintf (file, "clients:\n  - {key: %s, role: admin, name: alice}\n",
             alice);
    fclose (file);
    const char *extra [] = {"--config", conf, NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    assert_true (s_start_agent (&grid, "web-01", "web", NULL, "") >= 0);
    const char *spec =
        "target: node:web-01\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60}}]\n";
    char *job_id = s_submit (&grid, spec);
    char *other = s_submit (&grid, spec);

    char *out = NULL, *err = NULL;
    int rc = grid_cli_as (&grid, alice, &out, &err, 10000, "job", "cancel",
                          job_id, "--reason", "wrong package", NULL);
    s_cli_expect (0, out, err, rc);
    free (out);
    free (err);
    pv_doc_t *doc = s_get (&grid, job_id);
    char *reason = s_field (s_data (doc), "reason");
    assert_string_equal (reason, "cancelled by alice (admin): wrong package");
    free (reason);
    pv_doc_destroy (&doc);
    rc = grid_cli_as (&grid, alice, &out, &err, 10000, "job", "status",
                      job_id, NULL);
    s_cli_expect (1, out, err, rc);
    assert_non_null (strstr (out, "cancelled by alice (admin): wrong package"));
    free (out);
    free (err);
    rc = grid_cli_as (&grid, alice, &out, &err, 10000, "job", "events",
                      job_id, NULL);
    s_cli_expect (0, out, err, rc);
    assert_non_null (strstr (out, "cancelled by alice (admin): wrong package"));
    free (out);
    free (err);

    //  A key with no name is named by the start of the key
    doc = grid_call (&grid, "job.cancel", "job", other, NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    doc = s_get (&grid, other);
    reason = s_field (s_data (doc), "reason");
    assert_non_null (strstr (reason, "cancelled by key "));
    assert_non_null (strstr (reason, "... (admin)"));
    free (reason);
    pv_doc_destroy (&doc);
    free (other);
    free (job_id);
    grid_stop (&grid);
}

//  ---------------------------------------------------------------------
//  Targets

static char *
s_expected (const pv_t *record)
{
    const pv_t *expected = pv_map_get (record, "expected");
    char *text = (char *) calloc (1, 1024);
    for (size_t index = 0; index < pv_size (expected); index++) {
        char *id = pv_strdup (pv_array_at (expected, index));
        if (index)
            strcat (text, ",");
        strncat (text, id ? id : "?", 100);
        free (id);
    }
    return text;
}

static void
test_it_jobs_label_targets_are_hierarchical (void **state)
{
    struct {
        const char *target, *expected;
    } cases [] = {
        {"label:tier=web", "web-01,web-02"},
        {"label:tier=web.dev", "web-01"},
        {"label:tier=web.dev.us-east", "web-01"},
        {"label:tier=web.prod", "web-02"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        char yaml [256];
        snprintf (yaml, sizeof yaml, "target: \"%s\"\n"
                  "tasks: [{backend: test, action: echo, params: {msg: x}}]\n",
                  cases [index].target);
        pv_doc_t *doc = s_run (&s_grid, yaml);
        const pv_t *record = pv_map_get (pv_doc_root (doc), "data");
        char *expected = s_expected (record);
        assert_string_equal (expected, cases [index].expected);
        free (expected);
        s_assert_status (record, "completed");
        pv_doc_destroy (&doc);
    }
    //  Segments match whole: "we" and "web.de" are not prefixes of a label
    const char *none [] = {"label:tier=we", "label:tier=web.de",
                           "label:tier=web.dev.us"};
    for (size_t index = 0; index < 3; index++) {
        char yaml [256];
        snprintf (yaml, sizeof yaml, "target: \"%s\"\n"
                  "tasks: [{backend: test, action: echo, params: {msg: x}}]\n",
                  none [index]);
        pv_doc_t *reply = grid_submit (&s_grid, yaml);
        char *code = grid_reply_code (reply);
        assert_non_null (code);
        assert_string_equal (code, "no_nodes");
        free (code);
        pv_doc_destroy (&reply);
    }
    //  The same through gridcli
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                         "label:tier=web.dev", "--wait", "test", "echo",
                         "--msg", "labelled", NULL);
    s_cli_expect (0, out, err, code);
    assert_true (s_line_with (out, "web-01", "test echo", "success",
                              "labelled", NULL));
    assert_null (strstr (out, "web-02"));
    free (out);
    free (err);
}

//  ---------------------------------------------------------------------
//  Validation through gridcli

static void
test_it_jobs_validation_errors_have_paths (void **state)
{
    char local [400], remote [400];
    snprintf (local, sizeof local, "%s/local-bad.yaml", s_grid.dir);
    snprintf (remote, sizeof remote, "%s/remote-bad.yaml", s_grid.dir);
    FILE *file = fopen (local, "w");
    assert_non_null (file);
    fputs ("target: group:web\n"
           "strategy: whenever\n"
           "tasks:\n"
           "  - backend: test\n"
           "    action: echo\n"
           "    params: {msg: hi}\n"
           "  - tasks:\n"
           "      - backend: apt\n"
           "        action: install\n"
           "        condition: sometimes\n", file);
    fclose (file);
    file = fopen (remote, "w");
    assert_non_null (file);
    fputs ("target: group:web\n"
           "tasks:\n"
           "  - backend: test\n"
           "    action: echo\n"
           "    params: {msg: hi}\n"
           "  - tasks:\n"
           "      - backend: apt\n"
           "        action: install\n"
           "      - backend: apt\n"
           "        action: remove\n"
           "        params: {package: \"nginx; rm -rf /\"}\n"
           "  - backend: nosuch\n"
           "    action: thing\n"
           "  - backend: ping\n"
           "    action: ping\n"
           "    params: {address: \"-f\", colour: red}\n", file);
    fclose (file);
    pv_doc_t *before = grid_call (&s_grid, "job.list", NULL);
    int64_t total = s_int (s_data (before), "total");
    pv_doc_destroy (&before);

    //  A problem gridcli sees itself: usage error, every path, exit 2
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "-f",
                         local, NULL);
    s_cli_expect (2, out, err, code);
    assert_non_null (strstr (err, "strategy: unknown strategy 'whenever'"));
    assert_non_null (strstr (err, "tasks[1].tasks[0].condition: unknown "
                                  "condition 'sometimes'"));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "-f",
                     "/nonexistent/job.yaml", NULL);
    s_cli_expect (2, out, err, code);
    free (out);
    free (err);

    //  Problems only the broker sees (schemas): refused, every one with
    //  its path, exit 4
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "-f", remote,
                     "--wait", NULL);
    s_cli_expect (4, out, err, code);
    assert_non_null (strstr (err, "(invalid_job)"));
    assert_true (s_line_with (err, "tasks[1].tasks[0].params.package",
                              "required", NULL));
    assert_true (s_line_with (err, "tasks[1].tasks[1].params.package", "';'",
                              NULL));
    assert_true (s_line_with (err, "tasks[2]", "nosuch", NULL));
    //  Every problem of one task, not just the first
    assert_true (s_line_with (err, "tasks[3].params.address",
                              "must not start with '-'", NULL));
    assert_true (s_line_with (err, "tasks[3].params.colour", "unknown param",
                              NULL));
    free (out);
    free (err);

    //  Nothing was made
    pv_doc_t *after = grid_call (&s_grid, "job.list", NULL);
    assert_int_equal (s_int (s_data (after), "total"), total);
    pv_doc_destroy (&after);
}

//  ---------------------------------------------------------------------
//  What an operator sees: --wait, the final table, events, JSON

//  gridcli job run -f PATH --wait, run in a thread so that the test can
//  act while gridcli waits.
typedef struct {
    grid_t *grid;
    const char *path;
    int code;
    char *out, *err;
} s_cli_run_t;

static void *
s_cli_thread (void *arg)
{
    s_cli_run_t *run = (s_cli_run_t *) arg;
    run->code = grid_cli (run->grid, &run->out, &run->err, 60000, "job",
                          "run", "-f", run->path, "--wait", NULL);
    return NULL;
}

//  Polls the stderr file of the gridcli that runs now until it holds TEXT.
static bool
s_wait_cli_err (grid_t *grid, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%s/cli.err", grid->dir);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        char *err = s_slurp (path);
        bool there = strstr (err, text) != NULL;
        free (err);
        if (there)
            return true;
        zclock_sleep (20);
    }
    return false;
}

static void
test_it_jobs_cli_wait_table_events_and_json (void **state)
{
    s_fake_clear_all ();
    //  web-02 is held up, so the job is seen running half-way through
    char *blocker = s_submit (&s_grid,
        "target: node:web-02\n"
        "tasks: [{backend: test, action: sleep, params: {seconds: 60}}]\n");
    assert_true (s_wait_cell (&s_grid, blocker, 0, "web-02", "running"));
    char path [600];
    snprintf (path, sizeof path, "%s/test/data/grid-hierarchical.yaml",
              s_src ());
    s_cli_run_t run = {&s_grid, path, -1, NULL, NULL};
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_cli_thread, &run), 0);
    //  Live progress on stderr: web-01 is through step 0, web-02 is not
    bool progress = s_wait_cli_err (&s_grid,
                                    "running  step 0/4  nodes 1/2 done");
    pv_doc_t *doc = grid_call (&s_grid, "job.cancel", "job", blocker, NULL);
    s_data (doc);
    pv_doc_destroy (&doc);
    pthread_join (thread, NULL);
    free (blocker);
    char *out = run.out, *err = run.err;
    s_cli_expect (0, out, err, run.code);
    assert_true (progress);
    assert_true (s_line_with (err, "j-", "running  step 0/4  nodes 1/2 done",
                              NULL));
    //  The per-node, per-step table on stdout
    const char *nodes [] = {"web-01", "web-02"};
    const char *tasks [] = {"apt update", "apt install", "systemd enable",
                            "systemd start"};
    for (int node = 0; node < 2; node++)
        for (int step = 0; step < 4; step++) {
            char number [16];
            snprintf (number, sizeof number, " %d ", step);
            assert_true (s_line_with (out, nodes [node], number, tasks [step],
                                      "success", NULL));
        }
    assert_null (strstr (out, "db-01"));
    char *job_line = strstr (out, "\njob j-");
    assert_non_null (job_line);
    assert_true (s_line_with (job_line + 1, "completed", NULL));
    char job_id [64] = "";
    sscanf (job_line + 1, "job %63s", job_id);
    free (out);
    free (err);

    //  The timeline
    int code = grid_cli (&s_grid, &out, &err, 10000, "job", "events", job_id,
                     NULL);
    s_cli_expect (0, out, err, code);
    assert_true (s_line_with (out, "submitted", NULL));
    assert_true (s_line_with (out, "started", "on 2 nodes", NULL));
    assert_true (s_line_with (out, "dispatched", " 3 ", "to 2 nodes", NULL));
    for (int node = 0; node < 2; node++)
        for (int step = 0; step < 4; step++) {
            char number [16];
            snprintf (number, sizeof number, " %d ", step);
            //  Pipeline steps go to each node on its own; the last is
            //  one broadcast (checked above)
            if (step < 3)
                assert_true (s_line_with (out, "dispatched", number,
                                          nodes [node], NULL));
            assert_true (s_line_with (out, "succeeded", number, nodes [node],
                                      NULL));
        }
    assert_true (s_line_with (out, "finished", "completed", NULL));
    //  Oldest first
    assert_true (strstr (out, "submitted") < strstr (out, "finished"));
    free (out);
    free (err);

    //  The job's state through status, and the same as JSON
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "status", job_id,
                     NULL);
    s_cli_expect (0, out, err, code);
    assert_true (s_line_with (out, "status", "completed", NULL));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 10000, "--output", "json", "job",
                     "events", job_id, NULL);
    s_cli_expect (0, out, err, code);
    assert_non_null (strstr (out, "\"events\""));
    free (out);
    free (err);

    //  --output json with --wait: stdout is only the final record
    code = grid_cli (&s_grid, &out, &err, 30000, "--output", "json", "job",
                     "run", "--target", "group:web", "--wait", "test", "echo",
                     "--msg", "as json", NULL);
    s_cli_expect (0, out, err, code);
    const char *first = out + strspn (out, " \n");
    assert_true (*first == '{');
    assert_non_null (strstr (out, "\"status\": \"completed\""));
    assert_non_null (strstr (out, "\"results\""));
    assert_non_null (strstr (out, "\"output\": \"as json\\n\""));
    assert_null (strstr (out, "nodes 0/2"));
    free (out);
    free (err);

    //  A failed job exits 1 and marks the failed rows
    code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                     "group:web", "--wait", "test", "fail", "--msg", "boom",
                     NULL);
    s_cli_expect (1, out, err, code);
    assert_true (s_line_with (out, "!", "web-01", "test fail", "failed",
                              "boom", NULL));
    assert_true (s_line_with (out, "!", "web-02", "test fail", "failed",
                              "boom", NULL));
    assert_true (s_line_with (out, "job j-", "failed", NULL));
    free (out);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_jobs_hierarchical_example),
        cmocka_unit_test (test_it_jobs_rollback_example),
        cmocka_unit_test (test_it_jobs_continue_partial_failure),
        cmocka_unit_test (test_it_jobs_conditions_at_both_levels),
        cmocka_unit_test (test_it_jobs_retry_succeeds_on_second_attempt),
        cmocka_unit_test (test_it_jobs_task_timeout_kills_the_work),
        cmocka_unit_test (test_it_jobs_job_timeout_cancels_the_rest),
        cmocka_unit_test (test_it_jobs_cancel_running_job),
        cmocka_unit_test (test_it_jobs_admission_queue_full_and_priority),
        cmocka_unit_test (test_it_jobs_cancel_names_the_caller),
        cmocka_unit_test (test_it_jobs_label_targets_are_hierarchical),
        cmocka_unit_test (test_it_jobs_validation_errors_have_paths),
        cmocka_unit_test (test_it_jobs_cli_wait_table_events_and_json),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
