/*  =========================================================================
    test_it_basic - the whole system on loopback: a real gridbroker, three
    real gridagents and the real gridcli, over ipc:// in a temp directory.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "../proto/proto.h"
#include "lib/harness.h"

//  One grid for the file: broker + web-01, web-02 (group web), db-01 (db).
static grid_t s_grid;

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0)
        return -1;
    if (grid_start_agent (&s_grid, "web-01", "web", "tier=web.dev", NULL) < 0
        || grid_start_agent (&s_grid, "web-02", "web", "tier=web.prod", NULL) < 0
        || grid_start_agent (&s_grid, "db-01", "db", NULL, NULL) < 0)
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  Submits a one-task job; PARAMS are NULL-terminated key, value pairs.
//  Returns the reply document.
static pv_doc_t *
s_submit (const char *scope, const char *value, const char *backend,
          const char *action, ...)
{
    va_list args;
    size_t params = 0;
    va_start (args, action);
    while (va_arg (args, const char *)) {
        va_arg (args, const char *);
        params++;
    }
    va_end (args);
    pw_t *writer = pw_new ();
    char id [64];
    snprintf (id, sizeof id, "submit-%d-%d", (int) getpid (), ++s_grid.request_seq);
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, value ? 2 : 1);
    pw_str (writer, "scope");
    pw_str (writer, scope);
    if (value) {
        pw_str (writer, "value");
        pw_str (writer, value);
    }
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, backend);
    pw_str (writer, "action");
    pw_str (writer, action);
    pw_str (writer, "params");
    pw_map (writer, params);
    va_start (args, action);
    const char *key;
    while ((key = va_arg (args, const char *))) {
        pw_str (writer, key);
        pw_str (writer, va_arg (args, const char *));
    }
    va_end (args);
    pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer), pw_size (writer), 5000);
    pw_destroy (&writer);
    return reply;
}

//  Submits and waits for the end; returns the final job record document.
static pv_doc_t *
s_run (const char *scope, const char *value, const char *backend,
       const char *action, const char *key, const char *param)
{
    pv_doc_t *reply = s_submit (scope, value, backend, action, key, param, NULL);
    const pv_t *data = NULL;
    if (!grid_reply_ok (reply, &data)) {
        if (reply)
            pv_write_json (pv_doc_root (reply), stderr, 2);
        pv_doc_destroy (&reply);
        return NULL;
    }
    char *job_id = pv_strdup (pv_map_get (data, "job"));
    pv_doc_destroy (&reply);
    pv_doc_t *record = grid_wait_job (&s_grid, job_id, 20000);
    free (job_id);
    return record;
}

static const pv_t *
s_data (pv_doc_t *doc)
{
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    return data;
}

//  The expected node list of a record as one comma-joined string.
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
test_it_basic_all_target_reaches_every_node (void **state)
{
    pv_doc_t *doc = s_run ("all", NULL, "test", "echo", "msg", "hello grid");
    assert_non_null (doc);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    char *expected = s_expected (record);
    assert_string_equal (expected, "db-01,web-01,web-02");
    free (expected);
    const char *nodes [] = {"db-01", "web-01", "web-02"};
    for (int index = 0; index < 3; index++) {
        const pv_t *cell = grid_cell (record, 0, nodes [index]);
        assert_non_null (cell);
        assert_true (grid_str_is (cell, "status", "success"));
        assert_true (grid_str_is (cell, "output", "hello grid\n"));
        int64_t exit_code = -1, attempts = 0;
        assert_int_equal (pv_get_int (pv_map_get (cell, "exit_code"), &exit_code), 0);
        assert_int_equal (exit_code, 0);
        assert_int_equal (pv_get_int (pv_map_get (cell, "attempts"), &attempts), 0);
        assert_int_equal (attempts, 1);
    }
    pv_doc_destroy (&doc);
}

static void
test_it_basic_group_node_and_list_targets (void **state)
{
    struct {
        const char *scope, *value, *expected;
    } cases [] = {
        {"group", "web", "web-01,web-02"},
        {"group", "db", "db-01"},
        {"node", "db-01", "db-01"},
        {"node", "web-02,db-01", "db-01,web-02"},
        {"label", "tier=web", "web-01,web-02"},
        {"label", "tier=web.prod", "web-02"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        pv_doc_t *doc = s_run (cases [index].scope, cases [index].value, "test",
                               "echo", "msg", "x");
        assert_non_null (doc);
        const pv_t *record = s_data (doc);
        char *expected = s_expected (record);
        assert_string_equal (expected, cases [index].expected);
        free (expected);
        assert_true (grid_str_is (record, "status", "completed"));
        //  Exactly the expected nodes have results.
        const pv_t *step = pv_map_get (pv_map_get (record, "results"), "0");
        assert_int_equal (pv_size (step), pv_size (pv_map_get (record, "expected")));
        pv_doc_destroy (&doc);
    }
}

static void
test_it_basic_compound_targets (void **state)
{
    //  On the wire as {scope: "expr", value}
    struct {
        const char *value, *expected;
    } cases [] = {
        {"group:web and not node:web-01", "web-02"},
        {"group:db or label:tier=web.dev", "db-01,web-01"},
        {"not group:web", "db-01"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        pv_doc_t *doc = s_run ("expr", cases [index].value, "test", "echo",
                               "msg", "x");
        assert_non_null (doc);
        const pv_t *record = s_data (doc);
        char *expected = s_expected (record);
        assert_string_equal (expected, cases [index].expected);
        free (expected);
        assert_true (grid_str_is (record, "status", "completed"));
        pv_doc_destroy (&doc);
    }
    pv_doc_t *reply = s_submit ("expr", "group:web or (group:db", "test",
                                "echo", NULL);
    assert_non_null (reply);
    assert_false (grid_reply_ok (reply, NULL));
    char *message = NULL;
    size_t message_len = 0;
    FILE *json = open_memstream (&message, &message_len);
    pv_write_json (pv_doc_root (reply), json, 0);
    fclose (json);
    assert_non_null (strstr (message, "bad target at column 23: expected ')' "
                                      "to close the '(' at column 14"));
    free (message);
    pv_doc_destroy (&reply);

    //  On the command line, with any: over the whole expression
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                         "(group:web or group:db) and not label:tier=web.prod",
                         "test", "echo", "--msg", "compound", "--wait", NULL);
    if (code != 0)
        fprintf (stderr, "stdout:\n%s\nstderr:\n%s\n", out, err);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "web-01"));
    assert_non_null (strstr (out, "db-01"));
    assert_null (strstr (out, "web-02"));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                     "any:group:web or group:db", "test", "echo", "--msg",
                     "one", "--wait", NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    pv_doc_t *listing = grid_call (&s_grid, "job.list", NULL);
    const pv_t *newest = pv_array_at (pv_map_get (s_data (listing), "jobs"), 0);
    assert_true (grid_str_is (newest, "target", "any:group:web or group:db"));
    int64_t expected_count = 0;
    assert_int_equal (pv_get_int (pv_map_get (newest, "expected"),
                                  &expected_count),
                      0);
    assert_int_equal (expected_count, 1);
    pv_doc_destroy (&listing);

    //  A bad expression is a usage error that names the column
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--target",
                     "group:web and", "test", "echo", NULL);
    assert_int_equal (code, 2);
    assert_non_null (strstr (err, "bad target at column 14: expected a term "
                                  "after 'and'"));
    free (out);
    free (err);
}

static void
test_it_basic_failures_are_reported_per_node (void **state)
{
    pv_doc_t *doc = s_run ("group", "web", "test", "fail", "msg", "boom");
    assert_non_null (doc);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "failed"));
    const pv_t *cell = grid_cell (record, 0, "web-01");
    assert_true (grid_str_is (cell, "status", "failed"));
    int64_t exit_code = 0;
    pv_get_int (pv_map_get (cell, "exit_code"), &exit_code);
    assert_int_not_equal (exit_code, 0);
    pv_doc_destroy (&doc);
}

static void
test_it_basic_system_hostname_is_real (void **state)
{
    pv_doc_t *doc = s_run ("node", "db-01", "system", "hostname", NULL, NULL);
    assert_non_null (doc);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    char host [256] = "";
    gethostname (host, sizeof host - 1);
    char *output = pv_strdup (pv_map_get (grid_cell (record, 0, "db-01"), "output"));
    assert_non_null (output);
    assert_non_null (strstr (output, host));
    free (output);
    //  The facts travel as structured data too.
    const pv_t *data = pv_map_get (grid_cell (record, 0, "db-01"), "data");
    assert_true (pv_str_eq (pv_map_get (data, "hostname"), host));
    pv_doc_destroy (&doc);
}

static void
test_it_basic_invalid_jobs_are_refused_with_paths (void **state)
{
    pv_doc_t *doc = s_submit ("all", NULL, "nosuch", "thing", NULL);
    char *code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "invalid_job");
    free (code);
    const pv_t *details = pv_map_get (pv_doc_root (doc), "details");
    assert_true (pv_size (details) >= 1);
    char *first = pv_strdup (pv_array_at (details, 0));
    assert_non_null (strstr (first, "tasks[0]"));
    free (first);
    pv_doc_destroy (&doc);

    doc = s_submit ("group", "nobody", "test", "echo", "msg", "x", NULL);
    code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "no_nodes");
    free (code);
    pv_doc_destroy (&doc);

    doc = s_submit ("group", "bad name", "test", "echo", "msg", "x", NULL);
    code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "invalid_job");
    free (code);
    pv_doc_destroy (&doc);

    doc = grid_call (&s_grid, "job.get", "job", "j-000000000000-0000", NULL);
    code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "not_found");
    free (code);
    pv_doc_destroy (&doc);
}

//  job.progress counts what job.get shows, without the outputs, for a
//  live job and for a finished one (read back from the store).
static void
test_it_basic_progress_counts_cells (void **state)
{
    pv_doc_t *reply = s_submit ("group", "web", "test", "sleep", "seconds",
                                "1", NULL);
    char *job_id = pv_strdup (pv_map_get (s_data (reply), "job"));
    pv_doc_destroy (&reply);
    assert_non_null (job_id);
    long long deadline = grid_now_ms () + 20000;
    bool finished = false;
    int64_t nodes = -1;
    while (!finished && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&s_grid, "job.progress", "job", job_id,
                                   NULL);
        const pv_t *progress = s_data (doc);
        assert_true (grid_str_is (progress, "id", job_id));
        assert_null (pv_map_get (progress, "results"));
        int64_t done = -1;
        assert_int_equal (pv_get_int (pv_map_get (progress, "nodes"), &nodes),
                          0);
        assert_int_equal (pv_get_int (pv_map_get (progress, "done"), &done), 0);
        assert_true (done >= 0 && done <= nodes);
        finished = grid_str_is (progress, "status", "completed");
        if (!finished)
            assert_true (grid_str_is (progress, "status", "running"));
        pv_doc_destroy (&doc);
        if (!finished)
            usleep (50 * 1000);
    }
    assert_true (finished);
    //  The same counts once the job has left the scheduler's memory
    pv_doc_t *doc = grid_wait_job (&s_grid, job_id, 20000);
    const pv_t *record = s_data (doc);
    int64_t expected = (int64_t) pv_size (pv_map_get (record, "expected"));
    pv_doc_destroy (&doc);
    assert_int_equal (nodes, expected);
    doc = grid_call (&s_grid, "job.progress", "job", job_id, NULL);
    const pv_t *progress = s_data (doc);
    assert_true (grid_str_is (progress, "status", "completed"));
    int64_t value = -1;
    assert_int_equal (pv_get_int (pv_map_get (progress, "done"), &value), 0);
    assert_int_equal (value, expected);
    assert_int_equal (pv_get_int (pv_map_get (progress, "failed"), &value), 0);
    assert_int_equal (value, 0);
    assert_int_equal (pv_get_int (pv_map_get (pv_map_get (progress, "cells"),
                                              "success"), &value), 0);
    assert_int_equal (value, expected);
    pv_doc_destroy (&doc);
    free (job_id);

    doc = grid_call (&s_grid, "job.progress", "job", "j-000000000000-0000",
                     NULL);
    char *code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "not_found");
    free (code);
    pv_doc_destroy (&doc);
}

static void
test_it_basic_cli_runs_and_reports (void **state)
{
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                         "group:web", "test", "echo", "--msg", "from-cli",
                         "--wait", NULL);
    if (code != 0)
        fprintf (stderr, "stdout:\n%s\nstderr:\n%s\n", out, err);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "web-01"));
    assert_non_null (strstr (out, "web-02"));
    assert_null (strstr (out, "db-01"));
    assert_non_null (strstr (out, "from-cli"));
    free (out);
    free (err);

    //  JSON: GRID's record for the newest job.
    code = grid_cli (&s_grid, &out, &err, 10000, "--output", "json", "job",
                     "list", "--limit", "1", NULL);
    assert_int_equal (code, 0);
    pv_doc_t *listing = grid_call (&s_grid, "job.list", NULL);
    const pv_t *jobs = pv_map_get (s_data (listing), "jobs");
    char *job_id = pv_strdup (pv_map_get (pv_array_at (jobs, 0), "id"));
    assert_non_null (job_id);
    pv_doc_destroy (&listing);
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 10000, "--output", "json", "job",
                     "status", job_id, NULL);
    assert_int_equal (code, 0);
    const char *fields [] = {"\"id\"", "\"target\"", "\"tasks\"", "\"status\"",
                             "\"step\"", "\"expected\"", "\"results\"",
                             "\"created_at\"", "\"updated_at\"", "\"output\"",
                             "\"error\"", "\"exit_code\"", "\"duration_ms\"",
                             "\"attempts\""};
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++)
        assert_non_null (strstr (out, fields [index]));
    free (out);
    free (err);
    free (job_id);

    code = grid_cli (&s_grid, &out, &err, 10000, "node", "list", NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "db-01"));
    assert_non_null (strstr (out, "online"));
    free (out);
    free (err);

    //  Usage errors exit 2, refusals exit 4.
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "run", "--target",
                     "grp:web", "test", "echo", NULL);
    assert_int_equal (code, 2);
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 10000, "job", "status",
                     "j-000000000000-0000", NULL);
    assert_int_equal (code, 4);
    free (out);
    free (err);
}

static void
test_it_basic_cli_without_broker_exits_3 (void **state)
{
    grid_t lonely;
    assert_int_equal (grid_init (&lonely), 0);
    const char *commands [][3] = {{"status", NULL, NULL},
                                  {"node", "list", NULL},
                                  {"job", "list", NULL}};
    for (size_t index = 0; index < 3; index++) {
        char *out = NULL, *err = NULL;
        int code = grid_cli (&lonely, &out, &err, 15000, commands [index][0],
                             commands [index][1], commands [index][2], NULL);
        assert_int_equal (code, 3);
        assert_non_null (strstr (err, "broker"));
        free (out);
        free (err);
    }
    grid_stop (&lonely);
}

static void
test_it_basic_killed_agent_reads_lost (void **state)
{
    //  A fourth agent that will die mid-task.
    int slot = grid_start_agent (&s_grid, "web-03", "web", NULL, NULL);
    assert_true (slot >= 0);
    pv_doc_t *reply = s_submit ("group", "web", "test", "sleep", "seconds", "2", NULL);
    const pv_t *data = s_data (reply);
    char *job_id = pv_strdup (pv_map_get (data, "job"));
    pv_doc_destroy (&reply);
    //  Wait until web-03 has taken the work, then kill it.
    long long deadline = grid_now_ms () + 10000;
    bool running = false;
    while (!running && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
        const pv_t *record = NULL;
        if (grid_reply_ok (doc, &record)) {
            const pv_t *cell = grid_cell (record, 0, "web-03");
            running = grid_str_is (cell, "status", "running")
                      || grid_str_is (cell, "status", "acknowledged");
        }
        pv_doc_destroy (&doc);
    }
    assert_true (running);
    grid_stop_agent (&s_grid, slot, true);
    pv_doc_t *doc = grid_wait_job (&s_grid, job_id, 20000);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (grid_cell (record, 0, "web-03"), "status", "lost"));
    assert_true (grid_str_is (grid_cell (record, 0, "web-01"), "status", "success"));
    assert_true (grid_str_is (grid_cell (record, 0, "web-02"), "status", "success"));
    assert_true (grid_str_is (record, "status", "partial_failure"));
    pv_doc_destroy (&doc);
    free (job_id);
    assert_true (grid_wait_node (&s_grid, "web-03", "offline", 5000));
}

//  Writes BYTES to the ipc endpoint's socket file directly (no ZMTP).
static void
s_raw_unix (const char *endpoint, const void *bytes, size_t size)
{
    const char *path = endpoint + strlen ("ipc://");
    int fd = socket (AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address;
    memset (&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    snprintf (address.sun_path, sizeof address.sun_path, "%s", path);
    if (connect (fd, (struct sockaddr *) &address, sizeof address) == 0) {
        ssize_t sent = write (fd, bytes, size);
        (void) sent;
    }
    close (fd);
}

static void
test_it_basic_hostile_bytes_leave_broker_serving (void **state)
{
    unsigned char noise [4096];
    srand (7);
    for (size_t index = 0; index < sizeof noise; index++)
        noise [index] = (unsigned char) rand ();
    const char *endpoints [] = {s_grid.client_ep, s_grid.agents_ep,
                                s_grid.publish_ep};
    for (int index = 0; index < 3; index++)
        s_raw_unix (endpoints [index], noise, sizeof noise);

    //  Valid ZeroMQ framing, hostile bodies.
    const unsigned char bodies [][8] = {
        {0xdd, 0x00, 0xff, 0xff, 0xff},           //  array of 16M, nothing
        {0x81, 0xa1, 'v', 0x01, 0xc1},            //  reserved byte
        {0x82, 0xa1, 'v', 0x01, 0xa1, 'v', 0x02}, //  duplicate key
        {0x93, 0x01, 0x02},                       //  truncated array
        {0x81, 0xa1, 'v', 0x07},                  //  unknown version
    };
    const size_t sizes [] = {5, 5, 7, 3, 4};
    //  Through authenticated connections, so the bodies reach the decoders
    char agent_key [400];
    assert_int_equal (grid_keygen (&s_grid, "hostile", agent_key,
                                   sizeof agent_key, NULL), 0);
    zsock_t *agent = grid_dealer (&s_grid, s_grid.agents_ep, agent_key);
    zsock_t *client = grid_dealer (&s_grid, s_grid.client_ep,
                                   s_grid.admin_key);
    assert_non_null (agent);
    assert_non_null (client);
    for (size_t index = 0; index < 5; index++) {
        zsock_send (agent, "b", bodies [index], sizes [index]);
        zsock_send (client, "zb", bodies [index], sizes [index]);
        pv_doc_t *reply = grid_call_raw (&s_grid, bodies [index], sizes [index], 3000);
        assert_non_null (reply);
        char *code = grid_reply_code (reply);
        assert_non_null (code);
        free (code);
        pv_doc_destroy (&reply);
    }
    zsock_send (agent, "b", noise, sizeof noise);
    zsock_send (client, "zb", noise, sizeof noise);
    zsock_send (agent, "bbb", noise, 10, noise, 20, noise, 30);
    zsock_destroy (&agent);
    zsock_destroy (&client);

    //  The broker still serves and still runs jobs.
    pv_doc_t *status = grid_call (&s_grid, "status", NULL);
    const pv_t *data = s_data (status);
    int64_t malformed = 0;
    pv_get_int (pv_map_get (pv_map_get (data, "dropped"), "malformed"), &malformed);
    assert_true (malformed >= 5);
    pv_doc_destroy (&status);
    pv_doc_t *doc = s_run ("all", NULL, "test", "echo", "msg", "still here");
    assert_non_null (doc);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
}

static void
test_it_basic_broker_restart_keeps_jobs_and_nodes_return (void **state)
{
    pv_doc_t *doc = s_run ("all", NULL, "test", "echo", "msg", "before");
    char *job_id = pv_strdup (pv_map_get (s_data (doc), "id"));
    pv_doc_destroy (&doc);
    grid_stop_broker (&s_grid, true);
    assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
    //  The finished job is still there, intact.
    doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
    const pv_t *record = s_data (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    assert_true (grid_str_is (grid_cell (record, 0, "db-01"), "output", "before\n"));
    pv_doc_destroy (&doc);
    free (job_id);
    //  Agents register again by themselves.
    assert_true (grid_wait_node (&s_grid, "web-01", "online", 15000));
    assert_true (grid_wait_node (&s_grid, "web-02", "online", 15000));
    assert_true (grid_wait_node (&s_grid, "db-01", "online", 15000));
    doc = s_run ("group", "web", "test", "echo", "msg", "after");
    assert_non_null (doc);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_basic_all_target_reaches_every_node),
        cmocka_unit_test (test_it_basic_group_node_and_list_targets),
        cmocka_unit_test (test_it_basic_compound_targets),
        cmocka_unit_test (test_it_basic_failures_are_reported_per_node),
        cmocka_unit_test (test_it_basic_system_hostname_is_real),
        cmocka_unit_test (test_it_basic_invalid_jobs_are_refused_with_paths),
        cmocka_unit_test (test_it_basic_progress_counts_cells),
        cmocka_unit_test (test_it_basic_cli_runs_and_reports),
        cmocka_unit_test (test_it_basic_cli_without_broker_exits_3),
        cmocka_unit_test (test_it_basic_hostile_bytes_leave_broker_serving),
        cmocka_unit_test (test_it_basic_killed_agent_reads_lost),
        cmocka_unit_test (test_it_basic_broker_restart_keeps_jobs_and_nodes_return),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
