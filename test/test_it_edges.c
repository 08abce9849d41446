/*  =========================================================================
    test_it_edges - hostile input and process edges, end to end: a real
    gridbroker with CURVE, real gridagents, and hand-made peers on raw
    sockets.

    Bytes that are not text, and messages with more frames than the
    envelope allows, are refused and counted while the broker keeps
    serving. SIGHUP reloads the broker's and the agent's configuration
    without dropping a session; a broken file changes nothing. An agent
    restarted after SIGKILL stops what its task left running before it
    reports the task interrupted. A node online from a live agent refuses a
    second agent (duplicate_node), and lets it in once that session ends.

    Nothing here sleeps hoping something happened: every wait polls with a
    deadline.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include "../agent/orphans.h"
#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

static grid_t s_grid;

//  ---------------------------------------------------------------------
//  Helpers

//  The counter NAME of the broker's status "dropped" map, or -1.
static int64_t
s_counter (grid_t *grid, const char *name)
{
    pv_doc_t *reply = grid_call (grid, "status", NULL);
    const pv_t *data = NULL;
    int64_t value = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (pv_map_get (data, "dropped"), name), &value);
    pv_doc_destroy (&reply);
    return value;
}

//  Polls the counter NAME until it is at least WANT. Returns its value.
static int64_t
s_counter_reaches (grid_t *grid, const char *name, int64_t want)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    int64_t value = s_counter (grid, name);
    while (value < want && grid_now_ms () < deadline) {
        zclock_sleep (20);
        value = s_counter (grid, name);
    }
    return value;
}

//  Receives one message on SOCKET within S_WAIT_MS, or NULL.
static zmsg_t *
s_recv (zsock_t *socket)
{
    zpoller_t *poller = zpoller_new (socket, NULL);
    zmsg_t *msg = NULL;
    if (zpoller_wait (poller, S_WAIT_MS) == socket)
        msg = zmsg_recv (socket);
    zpoller_destroy (&poller);
    return msg;
}

//  Decodes the last frame of MSG as a reply and checks it is an error
//  with CODE whose id is ID. Destroys MSG.
static void
s_expect_error (zmsg_t **msg_p, const char *code, const char *id)
{
    assert_non_null (*msg_p);
    zframe_t *body = zmsg_last (*msg_p);
    pv_doc_t *reply = NULL;
    assert_int_equal (pv_doc_decode (zframe_data (body), zframe_size (body),
                                     &reply, NULL, 0), 0);
    const pv_t *root = pv_doc_root (reply);
    assert_true (grid_str_is (root, "type", "error"));
    assert_true (grid_str_is (root, "code", code));
    assert_true (grid_str_is (root, "id", id));
    pv_doc_destroy (&reply);
    zmsg_destroy (msg_p);
}

//  ---------------------------------------------------------------------
//  Setup

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    if (grid_start_broker (&s_grid, NULL) != 0)
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
//  Strict input

static void
test_it_edges_bad_text_is_malformed (void **state)
{
    int64_t before = s_counter (&s_grid, "malformed");
    assert_true (before >= 0);
    zsock_t *client = grid_dealer (&s_grid, s_grid.client_ep,
                                   s_grid.admin_key);
    assert_non_null (client);

    //  An id that is not UTF-8 is never echoed
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "status", "bad-\xc0\xae-id", 0);
    assert_int_equal (zsock_send (client, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    zmsg_t *msg = s_recv (client);
    s_expect_error (&msg, PROTO_ERR_MALFORMED, "");

    //  A param that is a surrogate: refused, and no job is stored
    pw_reset (writer);
    proto_request_begin (writer, "job.submit", "edges-submit-1", 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, 1);
    pw_str (writer, "scope");
    pw_str (writer, "all");
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, "test");
    pw_str (writer, "action");
    pw_str (writer, "echo");
    pw_str (writer, "params");
    pw_map (writer, 1);
    pw_str (writer, "msg");
    pw_str (writer, "\xed\xa0\x80 and NUL");
    assert_int_equal (zsock_send (client, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    msg = s_recv (client);
    s_expect_error (&msg, PROTO_ERR_MALFORMED, "");
    pw_destroy (&writer);

    pv_doc_t *reply = grid_call (&s_grid, "job.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    assert_int_equal (pv_size (pv_map_get (data, "jobs")), 0);
    pv_doc_destroy (&reply);
    assert_true (s_counter_reaches (&s_grid, "malformed", before + 2)
                 >= before + 2);
    zsock_destroy (&client);
}

static void
test_it_edges_extra_frames_are_refused (void **state)
{
    int64_t before = s_counter (&s_grid, "malformed");
    zsock_t *client = grid_dealer (&s_grid, s_grid.client_ep,
                                   s_grid.admin_key);
    assert_non_null (client);
    zsock_set_sndtimeo (client, 5000);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "status", "edges-frames-1", 0);

    //  9,999 routing-like frames before a valid body
    zmsg_t *flood = zmsg_new ();
    for (int index = 0; index < 9999; index++)
        zmsg_addstr (flood, "hop");
    zmsg_addmem (flood, pw_data (writer), pw_size (writer));
    assert_int_equal (zmsg_send (&flood, client), 0);
    zmsg_t *msg = s_recv (client);
    assert_non_null (msg);
    //  Only the error comes back: nothing of the sender's frames
    assert_int_equal (zmsg_size (msg), 1);
    s_expect_error (&msg, PROTO_ERR_MALFORMED, "");

    //  Two frames that are not an empty delimiter are refused too
    zmsg_t *two = zmsg_new ();
    zmsg_addstr (two, "x");
    zmsg_addmem (two, pw_data (writer), pw_size (writer));
    assert_int_equal (zmsg_send (&two, client), 0);
    msg = s_recv (client);
    assert_non_null (msg);
    assert_int_equal (zmsg_size (msg), 1);
    s_expect_error (&msg, PROTO_ERR_MALFORMED, "");

    //  An empty delimiter and a body, as REQ sends it, is served
    zmsg_t *req = zmsg_new ();
    zmsg_addmem (req, NULL, 0);
    zmsg_addmem (req, pw_data (writer), pw_size (writer));
    assert_int_equal (zmsg_send (&req, client), 0);
    msg = s_recv (client);
    assert_non_null (msg);
    assert_int_equal (zmsg_size (msg), 2);
    zframe_t *body = zmsg_last (msg);
    pv_doc_t *reply = NULL;
    assert_int_equal (pv_doc_decode (zframe_data (body), zframe_size (body),
                                     &reply, NULL, 0), 0);
    assert_true (grid_str_is (pv_doc_root (reply), "type", "ok"));
    pv_doc_destroy (&reply);
    zmsg_destroy (&msg);
    pw_destroy (&writer);
    zsock_destroy (&client);

    //  Both were counted and the broker still serves
    assert_true (s_counter_reaches (&s_grid, "malformed", before + 2)
                 >= before + 2);
    reply = grid_call (&s_grid, "status", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
}

static void
test_it_edges_agent_bad_text_is_dropped (void **state)
{
    int64_t before = s_counter (&s_grid, "malformed");
    char key_file [400];
    assert_int_equal (grid_keygen (&s_grid, "rogue", key_file,
                                   sizeof key_file, NULL), 0);
    zsock_t *dealer = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    assert_non_null (dealer);
    //  A hello whose hostname is not UTF-8
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = "rogue-01", .hostname = "ok",
        .version = "0.1.0", .concurrency = 1
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&hello, writer), 0);
    //  "ok" becomes "o\xff": same length, so the frame stays well formed
    unsigned char *bytes = (unsigned char *) pw_data (writer);
    bool patched = false;
    for (size_t index = 0; index + 2 < pw_size (writer) && !patched; index++)
        if (bytes [index] == 0xa2 && bytes [index + 1] == 'o'
        &&  bytes [index + 2] == 'k') {
            bytes [index + 2] = 0xff;
            patched = true;
        }
    assert_true (patched);
    assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    assert_true (s_counter_reaches (&s_grid, "malformed", before + 1)
                 >= before + 1);
    //  Said at warn level with the node's name, once a minute at most:
    //  two more within the minute add no line
    char path [512];
    snprintf (path, sizeof path, "%s/broker.log", s_grid.dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    assert_true (grid_line_with (log, "warn:", "dropped a message from node "
                                 "rogue-01", "not valid UTF-8", NULL));
    free (log);
    for (int index = 0; index < 2; index++)
        assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                      pw_size (writer)), 0);
    pw_destroy (&writer);
    assert_true (s_counter_reaches (&s_grid, "malformed", before + 3)
                 >= before + 3);
    log = grid_slurp (path);
    assert_non_null (log);
    size_t lines = 0;
    for (const char *at = log; (at = strstr (at, "dropped a message from"));
         at++)
        lines++;
    free (log);
    assert_int_equal (lines, 1);
    pv_doc_t *reply = grid_call (&s_grid, "node.get", "node", "rogue-01",
                                 NULL);
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, PROTO_ERR_NOT_FOUND);
    free (code);
    pv_doc_destroy (&reply);
    zsock_destroy (&dealer);
}

//  ---------------------------------------------------------------------
//  SIGHUP

//  Writes TEXT to PATH.
static void
s_write_file (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    assert_true (fputs (text, file) >= 0);
    assert_int_equal (fclose (file), 0);
}

//  Whether the file PATH holds TEXT.
static bool
s_file_has (const char *path, const char *text)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return false;
    char line [2048];
    bool found = false;
    while (!found && fgets (line, sizeof line, file))
        found = strstr (line, text) != NULL;
    fclose (file);
    return found;
}

//  How many lines of the file PATH hold TEXT.
static int
s_file_count (const char *path, const char *text)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return 0;
    char line [2048];
    int count = 0;
    while (fgets (line, sizeof line, file))
        count += strstr (line, text) != NULL;
    fclose (file);
    return count;
}

//  Polls until the file PATH holds TEXT. Returns true when it does.
static bool
s_wait_file_has (const char *path, const char *text)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (!s_file_has (path, text) && grid_now_ms () < deadline)
        zclock_sleep (20);
    return s_file_has (path, text);
}

//  The error code of submitting BACKEND.ACTION to node NODE ("" when the
//  job was accepted), as a static string.
static const char *
s_submit_code (grid_t *grid, const char *node, const char *backend,
               const char *action)
{
    char yaml [256];
    snprintf (yaml, sizeof yaml, "target: node:%s\ntasks:\n"
              "  - {backend: %s, action: %s}\n", node, backend, action);
    pv_doc_t *reply = grid_submit (grid, yaml);
    static char code [64];
    char *text = grid_reply_code (reply);
    snprintf (code, sizeof code, "%s", reply ? (text ? text : "") : "none");
    free (text);
    pv_doc_destroy (&reply);
    return code;
}

//  Whether node NODE offers backend NAME, per node.get.
static bool
s_node_offers (grid_t *grid, const char *node, const char *name)
{
    pv_doc_t *reply = grid_call (grid, "node.get", "node", node, NULL);
    const pv_t *data = NULL;
    bool found = false;
    if (grid_reply_ok (reply, &data)) {
        const pv_t *backends = pv_map_get (data, "backends");
        for (size_t index = 0; index < pv_size (backends); index++)
            found = found || grid_str_is (pv_array_at (backends, index),
                                          "name", name);
    }
    pv_doc_destroy (&reply);
    return found;
}

static void
test_it_edges_sighup_reloads_without_dropping_sessions (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    char broker_conf [400], agent_conf [400], broker_log [400],
         agent_log [400], operator_key [400];
    snprintf (broker_conf, sizeof broker_conf, "%s/broker.yaml", grid.dir);
    snprintf (agent_conf, sizeof agent_conf, "%s/agent.yaml", grid.dir);
    snprintf (broker_log, sizeof broker_log, "%s/broker.log", grid.dir);
    snprintf (agent_log, sizeof agent_log, "%s/agent-hup-01.log", grid.dir);
    assert_int_equal (grid_keygen (&grid, "operator", operator_key,
                                   sizeof operator_key, NULL), 0);
    s_write_file (broker_conf, "allow: [test.*]\n");
    s_write_file (agent_conf, "disabled_backends: []\n");
    const char *broker_extra [] = {"--config", broker_conf, NULL};
    assert_int_equal (grid_start_broker (&grid, broker_extra), 0);
    const char *agent_extra [] = {"--config", agent_conf, NULL};
    int slot = grid_start_agent (&grid, "hup-01", NULL, NULL, agent_extra);
    assert_true (slot >= 0);
    assert_string_equal (s_submit_code (&grid, "hup-01", "system", "uptime"),
                         "forbidden");
    assert_null (grid_call_as (&grid, operator_key, "status", NULL));

    //  The allowlist grows and a client key file is added: both apply
    //  at once, and the agent's session stays up
    char text [1024];
    snprintf (text, sizeof text, "allow: [test.*, system.*]\n"
              "log_level: debug\n"
              "clients:\n  - {key: %s, role: operator}\n", operator_key);
    s_write_file (broker_conf, text);
    assert_int_equal (kill (grid.broker_pid, SIGHUP), 0);
    assert_true (s_wait_file_has (broker_log, "configuration reloaded"));
    assert_true (s_file_has (broker_log, "log level debug"));
    assert_string_equal (s_submit_code (&grid, "hup-01", "system", "uptime"),
                         "");
    pv_doc_t *reply = grid_call_as (&grid, operator_key, "status", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    assert_true (grid_wait_node (&grid, "hup-01", "online", S_WAIT_MS));
    assert_false (s_file_has (broker_log, "node hup-01 is offline"));

    //  A broken file changes nothing, and says so
    s_write_file (broker_conf, "allow: [test.*\n  nonsense: {\n");
    assert_int_equal (kill (grid.broker_pid, SIGHUP), 0);
    assert_true (s_wait_file_has (broker_log, "reload failed"));
    assert_string_equal (s_submit_code (&grid, "hup-01", "system", "uptime"),
                         "");
    reply = grid_call_as (&grid, operator_key, "status", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);

    //  A client key taken out is refused from its next request on, also
    //  on a connection it opened before
    zsock_t *operator = grid_dealer (&grid, grid.client_ep, operator_key);
    assert_non_null (operator);
    pw_t *request = pw_new ();
    proto_request_begin (request, "status", "hup-status-1", 0);
    assert_int_equal (zsock_send (operator, "b", pw_data (request),
                                  pw_size (request)), 0);
    zmsg_t *answer = s_recv (operator);
    assert_non_null (answer);
    zmsg_destroy (&answer);
    s_write_file (broker_conf, "allow: [test.*, system.*]\n");
    assert_int_equal (kill (grid.broker_pid, SIGHUP), 0);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_file_count (broker_log, "configuration reloaded") < 2
           && grid_now_ms () < deadline)
        zclock_sleep (20);
    assert_int_equal (s_file_count (broker_log, "configuration reloaded"),
                      2);
    pw_reset (request);
    proto_request_begin (request, "status", "hup-status-2", 0);
    assert_int_equal (zsock_send (operator, "b", pw_data (request),
                                  pw_size (request)), 0);
    answer = s_recv (operator);
    assert_non_null (answer);
    zframe_t *body = zmsg_last (answer);
    reply = NULL;
    assert_int_equal (pv_doc_decode (zframe_data (body), zframe_size (body),
                                     &reply, NULL, 0), 0);
    assert_true (grid_str_is (pv_doc_root (reply), "type", "error"));
    pv_doc_destroy (&reply);
    zmsg_destroy (&answer);
    pw_destroy (&request);
    zsock_destroy (&operator);
    assert_null (grid_call_as (&grid, operator_key, "status", NULL));

    //  The agent switches a backend off: the broker hears it at once
    assert_true (s_node_offers (&grid, "hup-01", "system"));
    s_write_file (agent_conf, "disabled_backends: [system]\n");
    assert_int_equal (kill (grid.agent_pids [slot], SIGHUP), 0);
    assert_true (s_wait_file_has (agent_log, "configuration reloaded"));
    deadline = grid_now_ms () + S_WAIT_MS;
    while (s_node_offers (&grid, "hup-01", "system")
           && grid_now_ms () < deadline)
        zclock_sleep (20);
    assert_false (s_node_offers (&grid, "hup-01", "system"));
    assert_true (s_node_offers (&grid, "hup-01", "test"));
    //  ... and a broken agent file changes nothing
    s_write_file (agent_conf, "disabled_backends: [nosuch]\n");
    assert_int_equal (kill (grid.agent_pids [slot], SIGHUP), 0);
    assert_true (s_wait_file_has (agent_log, "reload failed"));
    assert_false (s_node_offers (&grid, "hup-01", "system"));

    //  Both processes are alive, and work still runs end to end
    assert_int_equal (kill (grid.broker_pid, 0), 0);
    assert_int_equal (kill (grid.agent_pids [slot], 0), 0);
    char *id = grid_submit_id (&grid, "target: node:hup-01\ntasks:\n"
                                      "  - {backend: test, action: echo, "
                                      "params: {msg: still here}}\n");
    assert_non_null (id);
    pv_doc_t *record = grid_wait_job (&grid, id, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&record);
    free (id);
    assert_false (s_file_has (broker_log, "node hup-01 is offline"));
    grid_stop (&grid);
}

//  ---------------------------------------------------------------------
//  No orphans

//  The process group recorded in DIR (the first record), or 0.
static pid_t
s_recorded_group (const char *dir)
{
    DIR *records = opendir (dir);
    if (!records)
        return 0;
    pid_t pgid = 0;
    struct dirent *entry;
    while (!pgid && (entry = readdir (records)))
        if (entry->d_name [0] >= '1' && entry->d_name [0] <= '9')
            pgid = (pid_t) atoi (entry->d_name);
    closedir (records);
    return pgid;
}

static void
test_it_edges_restarted_agent_stops_what_a_killed_one_left (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    //  The node stays within the grace while the agent is down
    const char *broker_extra [] = {"--offline-grace", "60s", NULL};
    assert_int_equal (grid_start_broker (&grid, broker_extra), 0);
    int slot = grid_start_agent (&grid, "orphan-01", NULL, NULL, NULL);
    assert_true (slot >= 0);
    char groups [400];
    snprintf (groups, sizeof groups, "%s/agent-orphan-01/groups", grid.dir);

    char *id = grid_submit_id (&grid, "target: node:orphan-01\ntasks:\n"
                                      "  - {backend: test, action: sleep, "
                                      "params: {seconds: 60, spawn: 1}}\n");
    assert_non_null (id);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    pid_t pgid = s_recorded_group (groups);
    while (!pgid && grid_now_ms () < deadline) {
        zclock_sleep (20);
        pgid = s_recorded_group (groups);
    }
    assert_true (pgid > 1);
    assert_true (orphans_group_running (pgid));

    //  SIGKILL: the task's first process dies with the agent, its helper
    //  does not
    grid_stop_agent (&grid, slot, true);
    assert_true (orphans_group_running (pgid));

    //  The restarted agent stops the group before it reports the task
    slot = grid_start_agent (&grid, "orphan-01", NULL, NULL, NULL);
    assert_true (slot >= 0);
    deadline = grid_now_ms () + S_WAIT_MS;
    while (orphans_group_running (pgid) && grid_now_ms () < deadline)
        zclock_sleep (20);
    bool left = orphans_group_running (pgid);
    if (left)
        kill (-pgid, SIGKILL);
    assert_false (left);
    assert_int_equal (s_recorded_group (groups), 0);
    char log [400];
    snprintf (log, sizeof log, "%s/agent-orphan-01.log", grid.dir);
    assert_true (s_wait_file_has (log, "left running"));

    pv_doc_t *record = grid_wait_job (&grid, id, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (record, &data));
    const pv_t *cell = grid_cell (data, 0, "orphan-01");
    assert_true (grid_str_is (cell, "status", "interrupted"));
    pv_doc_destroy (&record);
    free (id);
    grid_stop (&grid);
}

//  ---------------------------------------------------------------------
//  One session per node

//  Sends a hello as NODE with INSTANCE (NULL: none) declaring CONCURRENCY
//  on DEALER.
static void
s_raw_hello_with (zsock_t *dealer, const char *node, const char *instance,
                  uint32_t concurrency)
{
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = (char *) node, .hostname = "raw-host",
        .version = "0.1.0", .concurrency = concurrency,
        .instance = (char *) instance
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&hello, writer), 0);
    assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    pw_destroy (&writer);
}

//  Sends a hello as NODE with INSTANCE (NULL: none) on DEALER.
static void
s_raw_hello (zsock_t *dealer, const char *node, const char *instance)
{
    s_raw_hello_with (dealer, node, instance, 1);
}

//  The next message on DEALER within S_WAIT_MS, decoded, or NULL.
static proto_msg_t *
s_raw_recv (zsock_t *dealer)
{
    zmsg_t *msg = s_recv (dealer);
    if (!msg)
        return NULL;
    zframe_t *body = zmsg_last (msg);
    proto_msg_t *decoded = NULL;
    proto_msg_decode (zframe_data (body), zframe_size (body), &decoded, NULL,
                      0);
    zmsg_destroy (&msg);
    return decoded;
}

//  Says hello as NODE with INSTANCE on DEALER and returns the answer's
//  type, and the error code in CODE (when it is an error).
static proto_type_t
s_raw_register (zsock_t *dealer, const char *node, const char *instance,
                char *code, size_t code_len)
{
    s_raw_hello (dealer, node, instance);
    proto_msg_t *answer = s_raw_recv (dealer);
    assert_non_null (answer);
    proto_type_t type = answer->type;
    snprintf (code, code_len, "%s", answer->code ? answer->code : "");
    proto_msg_destroy (&answer);
    return type;
}

//  The node.get "duplicate" count of NODE (0 when none).
static int64_t
s_duplicates (grid_t *grid, const char *node)
{
    pv_doc_t *reply = grid_call (grid, "node.get", "node", node, NULL);
    const pv_t *data = NULL;
    int64_t count = 0;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (pv_map_get (data, "duplicate"), "count"),
                    &count);
    pv_doc_destroy (&reply);
    return count;
}

static void
test_it_edges_live_session_keeps_its_node (void **state)
{
    char key_file [400], code [64];
    assert_int_equal (grid_keygen (&s_grid, "twin", key_file,
                                   sizeof key_file, NULL), 0);
    zsock_t *first = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    zsock_t *again = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    zsock_t *other = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    assert_non_null (first);
    assert_non_null (again);
    assert_non_null (other);
    assert_int_equal (s_raw_register (first, "twin-01", "aaaa1111", code,
                                      sizeof code), PROTO_WELCOME);

    //  Another process, while the first is live: refused, and the first
    //  hears of it
    assert_int_equal (s_raw_register (other, "twin-01", "cccc3333", code,
                                      sizeof code), PROTO_ERROR);
    assert_string_equal (code, PROTO_ERR_DUPLICATE_NODE);
    proto_msg_t *notice = s_raw_recv (first);
    assert_non_null (notice);
    assert_int_equal (notice->type, PROTO_ERROR);
    assert_string_equal (notice->code, PROTO_ERR_DUPLICATE_NODE);
    assert_non_null (strstr (notice->message, "cccc3333"));
    proto_msg_destroy (&notice);
    assert_int_equal (s_duplicates (&s_grid, "twin-01"), 1);
    //  ... and so is one without an instance id
    assert_int_equal (s_raw_register (other, "twin-01", NULL, code,
                                      sizeof code), PROTO_ERROR);
    assert_string_equal (code, PROTO_ERR_DUPLICATE_NODE);
    notice = s_raw_recv (first);
    proto_msg_destroy (&notice);

    //  The same process on a new connection (a network blip) gets in
    assert_int_equal (s_raw_register (again, "twin-01", "aaaa1111", code,
                                      sizeof code), PROTO_WELCOME);
    //  The old connection closes: the other process gets in at once
    zsock_destroy (&first);
    zsock_destroy (&again);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    proto_type_t type = PROTO_ERROR;
    while (type != PROTO_WELCOME && grid_now_ms () < deadline) {
        type = s_raw_register (other, "twin-01", "cccc3333", code,
                               sizeof code);
        if (type != PROTO_WELCOME)
            zclock_sleep (50);
    }
    assert_int_equal (type, PROTO_WELCOME);
    zsock_destroy (&other);
}

//  A known node whose agent comes back speaking another protocol reads
//  incompatible (node.get, status), a job names it unsupported with the
//  reason, and a welcomed hello of its clears it.
static void
test_it_edges_incompatible_agent_is_named (void **state)
{
    char key_file [400], code [64];
    assert_int_equal (grid_keygen (&s_grid, "oldver", key_file,
                                   sizeof key_file, NULL), 0);
    zsock_t *dealer = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    assert_non_null (dealer);
    assert_int_equal (s_raw_register (dealer, "oldver-01", "bbbb2222", code,
                                      sizeof code), PROTO_WELCOME);
    proto_msg_t bye = {
        .type = PROTO_BYE, .node = "oldver-01", .reason = "shutdown"
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&bye, writer), 0);
    assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    assert_true (grid_wait_node (&s_grid, "oldver-01", "offline", S_WAIT_MS));

    //  Back, speaking protocol 9: refused, and named
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = "oldver-01", .hostname = "raw-host",
        .version = "9.0.0", .concurrency = 1, .instance = "bbbb2222"
    };
    pw_reset (writer);
    assert_int_equal (proto_msg_encode (&hello, writer), 0);
    unsigned char *bytes = (unsigned char *) pw_data (writer);
    bool patched = false;
    for (size_t index = 0; index + 2 < pw_size (writer) && !patched; index++)
        if (bytes [index] == 0xa1 && bytes [index + 1] == 'v'
            && bytes [index + 2] == PROTO_VERSION) {
            bytes [index + 2] = 9;
            patched = true;
        }
    assert_true (patched);
    assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                  pw_size (writer)), 0);
    proto_msg_t *answer = s_raw_recv (dealer);
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_ERROR);
    assert_string_equal (answer->code, PROTO_ERR_VERSION);
    proto_msg_destroy (&answer);
    pv_doc_t *reply = grid_call (&s_grid, "node.get", "node", "oldver-01",
                                 NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    assert_true (grid_str_is (data, "status", "incompatible"));
    char *why = pv_strdup (pv_map_get (data, "incompatible"));
    assert_non_null (why);
    assert_non_null (strstr (why, "release 9.0.0"));
    assert_non_null (strstr (why, "unsupported version 9"));
    //  Newer than the broker: the broker is what to upgrade
    assert_non_null (strstr (why, "upgrade gridbroker"));
    free (why);
    pv_doc_destroy (&reply);
    reply = grid_call (&s_grid, "status", NULL);
    assert_true (grid_reply_ok (reply, &data));
    int64_t count = 0;
    assert_int_equal (pv_get_int (pv_map_get (pv_map_get (data, "nodes"),
                                              "incompatible"), &count), 0);
    assert_int_equal (count, 1);
    pv_doc_destroy (&reply);
    char path [512];
    snprintf (path, sizeof path, "%s/broker.log", s_grid.dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    assert_true (grid_line_with (log, "warn:", "node oldver-01 is "
                                 "incompatible", NULL));
    free (log);

    //  A job on it (an agent elsewhere offers the action): not run,
    //  unsupported, with the reason
    int peer = grid_start_agent (&s_grid, "peer-01", NULL, NULL, NULL);
    assert_true (peer >= 0);
    assert_true (grid_wait_node (&s_grid, "peer-01", "online", S_WAIT_MS));
    pv_doc_t *refused = grid_submit (&s_grid,
                                     "target: { scope: node, value: oldver-01 }\n"
                                     "tasks: [ { backend: test, action: echo, "
                                     "params: { msg: x } } ]\n");
    char *refusal = grid_reply_code (refused);
    assert_non_null (refusal);
    assert_string_equal (refusal, "no_nodes");
    free (refusal);
    pv_doc_destroy (&refused);
    char *job = grid_submit_id (&s_grid,
                                "target: { scope: node, value: \"oldver-01,peer-01\" }\n"
                                "tasks: [ { backend: test, action: echo, "
                                "params: { msg: x } } ]\n");
    assert_non_null (job);
    pv_doc_t *record = grid_wait_job (&s_grid, job, S_WAIT_MS);
    assert_non_null (record);
    const pv_t *cell = grid_cell (pv_map_get (pv_doc_root (record), "data"),
                                  0, "oldver-01");
    assert_non_null (cell);
    assert_true (grid_str_is (cell, "status", "unsupported"));
    char *reason = pv_strdup (pv_map_get (cell, "reason"));
    assert_non_null (reason);
    assert_non_null (strstr (reason, "incompatible"));
    free (reason);
    pv_doc_destroy (&record);
    free (job);
    grid_stop_agent (&s_grid, peer, false);

    //  Upgraded: welcomed, and no longer incompatible
    assert_int_equal (s_raw_register (dealer, "oldver-01", "cccc3333", code,
                                      sizeof code), PROTO_WELCOME);
    reply = grid_call (&s_grid, "node.get", "node", "oldver-01", NULL);
    assert_true (grid_reply_ok (reply, &data));
    assert_true (grid_str_is (data, "status", "online"));
    assert_null (pv_map_get (data, "incompatible"));
    pv_doc_destroy (&reply);
    pw_destroy (&writer);
    zsock_destroy (&dealer);
}

//  Each agent is answered in the protocol version of its hello: one of
//  protocol 1 (release 0.1.0) gets version 1 bodies only, one of 2 gets
//  2, and node.get says which; a message in a version the broker does
//  not speak is refused in the nearest one it does.
static void
test_it_edges_agents_are_answered_in_their_version (void **state)
{
    char key_file [400];
    assert_int_equal (grid_keygen (&s_grid, "proto", key_file,
                                   sizeof key_file, NULL), 0);
    for (int version = PROTO_VERSION_MIN; version <= PROTO_VERSION;
         version++) {
        zsock_t *dealer = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
        assert_non_null (dealer);
        proto_msg_t hello = {
            .type = PROTO_HELLO, .protocol = version, .node = "proto-01",
            .hostname = "raw-host", .version = "0.1.0", .concurrency = 1
        };
        pw_t *writer = pw_new ();
        assert_int_equal (proto_msg_encode (&hello, writer), 0);
        assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                      pw_size (writer)), 0);
        proto_msg_t *answer = s_raw_recv (dealer);
        assert_non_null (answer);
        assert_int_equal (answer->type, PROTO_WELCOME);
        assert_int_equal (answer->protocol, version);
        proto_msg_destroy (&answer);
        pv_doc_t *reply = grid_call (&s_grid, "node.get", "node", "proto-01",
                                     NULL);
        const pv_t *data = NULL;
        assert_true (grid_reply_ok (reply, &data));
        int64_t spoken = 0;
        assert_int_equal (pv_get_int (pv_map_get (data, "protocol"), &spoken),
                          0);
        assert_int_equal (spoken, version);
        pv_doc_destroy (&reply);
        //  A heartbeat of a version no one speaks: refused in the
        //  nearest the broker speaks
        proto_msg_t beat = {
            .type = PROTO_HEARTBEAT, .protocol = PROTO_VERSION + 5,
            .node = "proto-01"
        };
        pw_reset (writer);
        assert_int_equal (proto_msg_encode (&beat, writer), 0);
        assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                      pw_size (writer)), 0);
        answer = s_raw_recv (dealer);
        assert_non_null (answer);
        assert_int_equal (answer->type, PROTO_ERROR);
        assert_string_equal (answer->code, PROTO_ERR_VERSION);
        assert_int_equal (answer->protocol, PROTO_VERSION);
        assert_non_null (strstr (answer->message, "speaks 1 to 2"));
        proto_msg_destroy (&answer);
        proto_msg_t bye = {
            .type = PROTO_BYE, .protocol = version, .node = "proto-01",
            .reason = "shutdown"
        };
        pw_reset (writer);
        assert_int_equal (proto_msg_encode (&bye, writer), 0);
        assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                      pw_size (writer)), 0);
        assert_true (grid_wait_node (&s_grid, "proto-01", "offline",
                                     S_WAIT_MS));
        pw_destroy (&writer);
        zsock_destroy (&dealer);
    }
}

//  status's nodes.repeated_hellos.
static int64_t
s_repeated_hellos (grid_t *grid)
{
    pv_doc_t *reply = grid_call (grid, "status", NULL);
    const pv_t *data = NULL;
    int64_t count = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (pv_map_get (data, "nodes"),
                                "repeated_hellos"), &count);
    pv_doc_destroy (&reply);
    return count;
}

//  Says hello as NODE (INSTANCE, CONCURRENCY) on DEALER and expects a
//  welcome.
static void
s_raw_welcomed (zsock_t *dealer, const char *node, const char *instance,
                uint32_t concurrency)
{
    s_raw_hello_with (dealer, node, instance, concurrency);
    proto_msg_t *answer = s_raw_recv (dealer);
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_WELCOME);
    assert_string_equal (answer->node, node);
    proto_msg_destroy (&answer);
}

static void
test_it_edges_repeated_hello_is_welcomed_again (void **state)
{
    char key_file [400], log [400];
    snprintf (log, sizeof log, "%s/broker.log", s_grid.dir);
    assert_int_equal (grid_keygen (&s_grid, "echo", key_file,
                                   sizeof key_file, NULL), 0);
    zsock_t *dealer = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    zsock_t *other = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    assert_non_null (dealer);
    assert_non_null (other);
    s_raw_welcomed (dealer, "echo-01", "eeee5555", 2);
    assert_true (s_wait_file_has (log, "node echo-01 registered"));
    int64_t before = s_repeated_hellos (&s_grid);
    assert_true (before >= 0);

    //  The same hello on the same session: welcomed again, not registered
    s_raw_welcomed (dealer, "echo-01", "eeee5555", 2);
    s_raw_welcomed (dealer, "echo-01", "eeee5555", 2);
    assert_int_equal (s_repeated_hellos (&s_grid), before + 2);
    assert_int_equal (s_file_count (log, "node echo-01 re-registered"), 0);

    //  A changed declaration registers again
    s_raw_welcomed (dealer, "echo-01", "eeee5555", 3);
    assert_true (s_wait_file_has (log, "node echo-01 re-registered"));
    assert_int_equal (s_file_count (log, "node echo-01 re-registered"), 1);
    //  ... and so does a new process (a restart) on the same connection
    s_raw_welcomed (dealer, "echo-01", "ffff6666", 3);
    assert_int_equal (s_file_count (log, "node echo-01 re-registered"), 2);
    //  ... and the same process on a new connection (a new session)
    s_raw_welcomed (other, "echo-01", "ffff6666", 3);
    assert_int_equal (s_file_count (log, "node echo-01 re-registered"), 3);
    assert_int_equal (s_repeated_hellos (&s_grid), before + 2);
    //  The node is online, from its newest session, with its newest hello
    pv_doc_t *reply = grid_call (&s_grid, "node.get", "node", "echo-01",
                                 NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t concurrency = 0;
    assert_int_equal (pv_get_int (pv_map_get (data, "concurrency"),
                                  &concurrency), 0);
    assert_int_equal (concurrency, 3);
    pv_doc_destroy (&reply);
    zsock_destroy (&dealer);
    zsock_destroy (&other);
}

static void
test_it_edges_second_agent_is_refused_until_the_first_dies (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    int first = grid_start_agent (&grid, "dup-01", NULL, NULL, NULL);
    assert_true (first >= 0);
    //  A second gridagent as dup-01, with the same key, its own state dir
    char key_file [400];
    assert_int_equal (grid_keygen (&grid, "agent-dup-01", key_file,
                                   sizeof key_file, NULL), 0);
    const char *extra [] = {"--id", "dup-01", "--key", key_file, NULL};
    int second = grid_spawn_agent (&grid, "dup-01-twin", NULL, NULL, extra);
    assert_true (second >= 0);
    char first_log [400], second_log [400], broker_log [400];
    snprintf (first_log, sizeof first_log, "%s/agent-dup-01.log", grid.dir);
    snprintf (second_log, sizeof second_log, "%s/agent-dup-01-twin.log",
              grid.dir);
    snprintf (broker_log, sizeof broker_log, "%s/broker.log", grid.dir);
    assert_true (s_wait_file_has (second_log, "duplicate_node"));
    assert_true (s_wait_file_has (second_log, "is online from another "
                                              "agent"));
    //  It keeps saying hello, and says why it is refused once
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_duplicates (&grid, "dup-01") < 3 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_true (s_duplicates (&grid, "dup-01") >= 3);
    assert_int_equal (s_file_count (second_log, "is online from another "
                                                "agent"), 1);
    assert_int_equal (s_file_count (first_log, "tried to register as node "
                                               "dup-01"), 1);
    assert_true (s_wait_file_has (first_log, "tried to register as node "
                                             "dup-01"));
    assert_true (s_wait_file_has (broker_log, "refused a second agent"));
    assert_true (s_duplicates (&grid, "dup-01") >= 1);
    assert_false (s_file_has (second_log, "welcomed"));
    //  The node's history shows it once, however often the second retries
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&grid, &out, &err, 15000, "node", "history",
                                "dup-01", NULL), 0);
    assert_non_null (strstr (out, "refused_duplicate"));
    char *second_line = strstr (strstr (out, "refused_duplicate") + 1,
                                "refused_duplicate");
    assert_null (second_line);
    free (out);
    free (err);
    assert_true (grid_wait_node (&grid, "dup-01", "online", S_WAIT_MS));

    //  The first dies: the second takes the node over
    grid_stop_agent (&grid, first, true);
    assert_true (s_wait_file_has (second_log, "welcomed"));
    assert_true (grid_wait_node (&grid, "dup-01", "online", S_WAIT_MS));
    grid_stop (&grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_edges_bad_text_is_malformed),
        cmocka_unit_test (test_it_edges_extra_frames_are_refused),
        cmocka_unit_test (test_it_edges_agent_bad_text_is_dropped),
        cmocka_unit_test (
            test_it_edges_sighup_reloads_without_dropping_sessions),
        cmocka_unit_test (
            test_it_edges_restarted_agent_stops_what_a_killed_one_left),
        cmocka_unit_test (test_it_edges_live_session_keeps_its_node),
        cmocka_unit_test (test_it_edges_repeated_hello_is_welcomed_again),
        cmocka_unit_test (test_it_edges_incompatible_agent_is_named),
        cmocka_unit_test (test_it_edges_agents_are_answered_in_their_version),
        cmocka_unit_test (
            test_it_edges_second_agent_is_refused_until_the_first_dies),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
