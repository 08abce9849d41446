/*  =========================================================================
    test_it_security - every refusal of docs/SECURITY.md, end to end: a real
    gridbroker with CURVE, real gridagents, the real gridcli, and hand-made
    peers (raw CURVE sockets) that try what a real agent or client never
    would.

    The main fleet: a broker with --auto-accept, an admin, a viewer and an
    operator client key, an allowlist (test.*, system.*, systemd.*), and
    web-01 (group web, programs from the recording fakes of test/fakes).
    Enrolment and revocation run on a second broker without auto-accept.

    Nothing here sleeps hoping something happened: every wait polls with a
    deadline, and "X never arrived" is shown by something sent after X
    arriving first on the same connection.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "../backends/backend.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

static grid_t s_grid;
static char s_viewer [400];     //  Key pair with the viewer role
static char s_operator [400];   //  Key pair with the operator role

//  ---------------------------------------------------------------------
//  Helpers

static const char *
s_src (void)
{
    const char *src = getenv ("GRID_SRC");
    return src && *src ? src : ".";
}

static void
s_nap (int ms)
{
    zclock_sleep (ms);
}

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

//  Polls the counter NAME until it is above FLOOR. Returns its value.
static int64_t
s_counter_above (grid_t *grid, const char *name, int64_t floor)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    int64_t value = s_counter (grid, name);
    while (value <= floor && grid_now_ms () < deadline) {
        s_nap (20);
        value = s_counter (grid, name);
    }
    return value;
}

//  The error code of REPLY (a static copy), or "" when it is no error.
static const char *
s_code (pv_doc_t *reply)
{
    static char code [64];
    char *text = grid_reply_code (reply);
    snprintf (code, sizeof code, "%s", text ? text : "");
    free (text);
    return code;
}

//  Submits a one-task job as the client KEY_FILE; returns the reply.
static pv_doc_t *
s_submit_as (grid_t *grid, const char *key_file, const char *target,
             const char *backend, const char *action, const char *param,
             const char *value)
{
    char id [64];
    snprintf (id, sizeof id, "sec-%d-%d", (int) getpid (),
              ++grid->request_seq);
    const char *colon = strchr (target, ':');
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, colon ? 2 : 1);
    pw_str (writer, "scope");
    pw_strn (writer, target, colon ? (size_t) (colon - target)
                                   : strlen (target));
    if (colon) {
        pw_str (writer, "value");
        pw_str (writer, colon + 1);
    }
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, backend);
    pw_str (writer, "action");
    pw_str (writer, action);
    pw_str (writer, "params");
    pw_map (writer, param ? 1 : 0);
    if (param) {
        pw_str (writer, param);
        pw_str (writer, value);
    }
    pv_doc_t *reply = grid_call_raw_as (grid, key_file, pw_data (writer),
                                        pw_size (writer), 5000);
    pw_destroy (&writer);
    return reply;
}

//  The job id of an ok submit reply (caller frees), or NULL.
static char *
s_job_id (pv_doc_t *reply)
{
    const pv_t *data = NULL;
    return grid_reply_ok (reply, &data) ? pv_strdup (pv_map_get (data, "job"))
                                        : NULL;
}

//  Runs a one-task job as the admin and returns its final record document.
static pv_doc_t *
s_run (grid_t *grid, const char *target, const char *backend,
       const char *action, const char *param, const char *value)
{
    pv_doc_t *reply = s_submit_as (grid, grid->insecure ? NULL
                                                        : grid->admin_key,
                                   target, backend, action, param, value);
    char *job = s_job_id (reply);
    if (!job && reply)
        pv_write_json (pv_doc_root (reply), stderr, 0);
    pv_doc_destroy (&reply);
    if (!job)
        return NULL;
    pv_doc_t *record = grid_wait_job (grid, job, S_WAIT_MS);
    free (job);
    return record;
}

//  The key.list entry whose node is NODE and status STATUS, as a copy of
//  its key (caller frees), or NULL.
static char *
s_listed_key (grid_t *grid, const char *node, const char *status)
{
    pv_doc_t *reply = grid_call (grid, "key.list", NULL);
    const pv_t *data = NULL;
    char *found = NULL;
    if (grid_reply_ok (reply, &data)) {
        const pv_t *keys = pv_map_get (data, "keys");
        for (size_t index = 0; index < pv_size (keys) && !found; index++) {
            const pv_t *key = pv_array_at (keys, index);
            if (grid_str_is (key, "node", node)
                && grid_str_is (key, "status", status))
                found = pv_strdup (pv_map_get (key, "key"));
        }
    }
    pv_doc_destroy (&reply);
    return found;
}

//  The accepted_at key.list gives NODE's key, or NULL. Caller frees.
static char *
s_accepted_at (grid_t *grid, const char *node)
{
    pv_doc_t *reply = grid_call (grid, "key.list", NULL);
    const pv_t *data = NULL;
    char *found = NULL;
    if (grid_reply_ok (reply, &data)) {
        const pv_t *keys = pv_map_get (data, "keys");
        for (size_t index = 0; index < pv_size (keys) && !found; index++) {
            const pv_t *key = pv_array_at (keys, index);
            if (grid_str_is (key, "node", node))
                found = pv_strdup (pv_map_get (key, "accepted_at"));
        }
    }
    pv_doc_destroy (&reply);
    return found;
}

//  Polls until key.list shows NODE's key with STATUS; returns the key.
static char *
s_wait_listed_key (grid_t *grid, const char *node, const char *status)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    char *key = s_listed_key (grid, node, status);
    while (!key && grid_now_ms () < deadline) {
        s_nap (50);
        key = s_listed_key (grid, node, status);
    }
    return key;
}

//  Runs PROGRAM (in GRID's bin) with the NULL-terminated ARGS, stdin from
//  /dev/null; returns its exit code (-1 when it did not end within the
//  deadline, then it is killed) and its stderr (caller frees).
static int
s_program (grid_t *grid, const char *program, char **err_p, ...)
{
    char path [700], err_path [400];
    snprintf (path, sizeof path, "%s/%s", grid->bin, program);
    snprintf (err_path, sizeof err_path, "%s/%s.err", grid->dir, program);
    const char *argv [32] = {program};
    int argc = 1;
    va_list args;
    va_start (args, err_p);
    const char *arg;
    while ((arg = va_arg (args, const char *)) && argc < 31)
        argv [argc++] = arg;
    va_end (args);
    argv [argc] = NULL;
    pid_t pid = fork ();
    if (pid == 0) {
        int fd = open (err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2 (fd, 2);
        dup2 (fd, 1);
        close (fd);
        execv (path, (char *const *) argv);
        _exit (127);
    }
    long long deadline = grid_now_ms () + S_WAIT_MS;
    int status = 0, code = -1;
    while (grid_now_ms () < deadline) {
        if (waitpid (pid, &status, WNOHANG) == pid) {
            code = WIFEXITED (status) ? WEXITSTATUS (status) : -1;
            break;
        }
        s_nap (10);
    }
    if (code < 0 && waitpid (pid, NULL, WNOHANG) == 0) {
        kill (pid, SIGKILL);
        waitpid (pid, NULL, 0);
    }
    FILE *file = fopen (err_path, "r");
    char *text = NULL;
    size_t size = 0;
    FILE *memory = open_memstream (&text, &size);
    char buf [1024];
    size_t got;
    while (file && (got = fread (buf, 1, sizeof buf, file)) > 0)
        fwrite (buf, 1, got, memory);
    fclose (memory);
    if (file)
        fclose (file);
    *err_p = text;
    return code;
}

//  ---------------------------------------------------------------------
//  A hand-made agent: CURVE DEALER and SUB with a key pair of its own

typedef struct {
    zsock_t *dealer;            //  To the agent endpoint
    zsock_t *sub;               //  From the commands endpoint
    char key_file [400];        //  Its key pair
    char key [KEYS_TEXT_SIZE];  //  Its public key
} s_raw_t;

static void
s_raw_open (s_raw_t *raw, grid_t *grid, const char *key_name)
{
    memset (raw, 0, sizeof *raw);
    assert_int_equal (grid_keygen (grid, key_name, raw->key_file,
                                   sizeof raw->key_file, raw->key), 0);
    char why [512], server [KEYS_TEXT_SIZE];
    zcert_t *cert = keys_load_pair (raw->key_file, why, sizeof why);
    assert_non_null (cert);
    assert_int_equal (keys_read_public (grid->broker_key, server, why,
                                        sizeof why), 0);
    raw->dealer = zsock_new (ZMQ_DEALER);
    raw->sub = zsock_new (ZMQ_SUB);
    assert_non_null (raw->dealer);
    assert_non_null (raw->sub);
    keys_curve_client (raw->dealer, cert, server);
    keys_curve_client (raw->sub, cert, server);
    zcert_destroy (&cert);
    zsock_set_linger (raw->dealer, 0);
    zsock_set_linger (raw->sub, 0);
    assert_int_equal (zsock_connect (raw->dealer, "%s", grid->agents_ep), 0);
    assert_int_equal (zsock_connect (raw->sub, "%s", grid->publish_ep), 0);
}

static void
s_raw_close (s_raw_t *raw)
{
    zsock_destroy (&raw->dealer);
    zsock_destroy (&raw->sub);
}

static void
s_raw_send (s_raw_t *raw, const proto_msg_t *msg)
{
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    zframe_t *frame = zframe_new (pw_data (writer), pw_size (writer));
    assert_int_equal (zframe_send (&frame, raw->dealer, 0), 0);
    pw_destroy (&writer);
}

//  The next message from the broker on the dealer, or NULL after the
//  deadline.
static proto_msg_t *
s_raw_recv (s_raw_t *raw)
{
    zpoller_t *poller = zpoller_new (raw->dealer, NULL);
    proto_msg_t *msg = NULL;
    if (zpoller_wait (poller, S_WAIT_MS) == raw->dealer) {
        zframe_t *frame = zframe_recv (raw->dealer);
        if (frame)
            proto_msg_decode (zframe_data (frame), zframe_size (frame), &msg,
                              NULL, 0);
        zframe_destroy (&frame);
    }
    zpoller_destroy (&poller);
    return msg;
}

//  Says hello as NODE (in group GROUP, or none) and returns the broker's
//  answer (welcome or error), or NULL.
static proto_msg_t *
s_raw_hello (s_raw_t *raw, const char *node, const char *group)
{
    char *groups [] = {(char *) group};
    //  It offers what a real agent offers, so that jobs for it are taken
    proto_backend_spec_t *backends = NULL;
    size_t backend_count = 0;
    assert_int_equal (backends_hello_specs (NULL, 0, &backends,
                                            &backend_count), 0);
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = (char *) node, .hostname = "raw",
        .groups = group ? groups : NULL, .group_count = group ? 1 : 0,
        .version = "0.1.0", .concurrency = 1, .backends = backends,
        .backend_count = backend_count
    };
    s_raw_send (raw, &hello);
    backends_specs_free (&backends, backend_count);
    return s_raw_recv (raw);
}

//  Subscribes the raw SUB to TOPIC again (unsubscribe, subscribe), so the
//  broker judges it now.
static void
s_raw_subscribe (s_raw_t *raw, const char *topic)
{
    zsock_set_unsubscribe (raw->sub, topic);
    zsock_set_subscribe (raw->sub, topic);
}

//  ---------------------------------------------------------------------
//  Fixture

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    char viewer [500], operator_key [500];
    if (grid_keygen (&s_grid, "viewer", s_viewer, sizeof s_viewer, NULL)
        || grid_keygen (&s_grid, "operator", s_operator, sizeof s_operator,
                        NULL))
        return -1;
    snprintf (viewer, sizeof viewer, "viewer:%s", s_viewer);
    snprintf (operator_key, sizeof operator_key, "operator:%s", s_operator);
    const char *extra [] = {"--client-key", viewer, "--client-key",
                            operator_key, "--allow",
                            "test.*,system.*,systemd.*", NULL};
    if (grid_start_broker (&s_grid, extra) != 0)
        return -1;
    char tool_dir [600];
    snprintf (tool_dir, sizeof tool_dir, "%s/test/fakes", s_src ());
    const char *agent_extra [] = {"--tool-dir", tool_dir, NULL};
    if (grid_start_agent (&s_grid, "web-01", "web", NULL, agent_extra) < 0)
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
//  Clients

static void
test_it_security_client_without_key_is_refused (void **state)
{
    //  Plaintext against CURVE: no handshake, so no answer at all
    pv_doc_t *reply = grid_call_as (&s_grid, NULL, "status", NULL);
    assert_null (reply);

    //  gridcli without a key refuses to start and says what to run
    char *out = NULL, *err = NULL;
    int code = grid_cli_as (&s_grid, NULL, &out, &err, 15000, "status", NULL);
    assert_int_equal (code, 2);
    assert_non_null (strstr (err, "gridcli keygen"));
    free (out);
    free (err);

    //  ... and with --insecure gets no answer from a CURVE broker
    code = grid_cli_as (&s_grid, NULL, &out, &err, 15000, "--insecure",
                        "--request-timeout", "1s", "status", NULL);
    assert_int_equal (code, 3);
    assert_non_null (strstr (err, "--insecure"));
    free (out);
    free (err);
}

static void
test_it_security_unknown_client_key_is_refused (void **state)
{
    char stranger [400];
    assert_int_equal (grid_keygen (&s_grid, "stranger", stranger,
                                   sizeof stranger, NULL), 0);
    int64_t before = s_counter (&s_grid, "refused_handshakes");
    pv_doc_t *reply = grid_call_as (&s_grid, stranger, "status", NULL);
    assert_null (reply);
    assert_true (s_counter_above (&s_grid, "refused_handshakes", before)
                 > before);

    char *out = NULL, *err = NULL;
    int code = grid_cli_as (&s_grid, stranger, &out, &err, 15000, "node",
                            "list", NULL);
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "refused this client"));
    assert_string_equal (out, "");
    free (out);
    free (err);
}

static void
test_it_security_viewer_cannot_submit_modify_actions (void **state)
{
    int64_t before = s_counter (&s_grid, "forbidden");
    //  systemd restart changes the host: refused, and nothing runs
    pv_doc_t *reply = s_submit_as (&s_grid, s_viewer, "node:web-01",
                                   "systemd", "restart", "unit", "nginx");
    assert_non_null (reply);
    assert_string_equal (s_code (reply), "forbidden");
    pv_doc_destroy (&reply);
    assert_true (s_counter (&s_grid, "forbidden") > before);

    //  Through gridcli too: exit 4 with the reason
    char *out = NULL, *err = NULL;
    int code = grid_cli_as (&s_grid, s_viewer, &out, &err, 15000, "job",
                            "run", "--target", "all", "systemd", "restart",
                            "--unit", "nginx", NULL);
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "forbidden"));
    free (out);
    free (err);

    //  A query action is a viewer's to run, reads are too
    reply = s_submit_as (&s_grid, s_viewer, "node:web-01", "test", "echo",
                         "msg", "seen");
    char *job = s_job_id (reply);
    assert_non_null (job);
    pv_doc_destroy (&reply);
    pv_doc_t *record = grid_wait_job (&s_grid, job, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&record);

    //  Cancelling and key management are beyond a viewer
    reply = grid_call_as (&s_grid, s_viewer, "job.cancel", "job", job, NULL);
    assert_string_equal (s_code (reply), "forbidden");
    pv_doc_destroy (&reply);
    reply = grid_call_as (&s_grid, s_viewer, "key.list", NULL);
    assert_string_equal (s_code (reply), "forbidden");
    pv_doc_destroy (&reply);
    free (job);

    //  An operator may change hosts (here, the recording fake systemctl)
    reply = s_submit_as (&s_grid, s_operator, "node:web-01", "systemd",
                         "restart", "unit", "nginx");
    job = s_job_id (reply);
    assert_non_null (job);
    pv_doc_destroy (&reply);
    record = grid_wait_job (&s_grid, job, S_WAIT_MS);
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&record);
    free (job);
    //  ... but not manage keys
    reply = grid_call_as (&s_grid, s_operator, "key.list", NULL);
    assert_string_equal (s_code (reply), "forbidden");
    pv_doc_destroy (&reply);
}

static void
test_it_security_allowlist_refuses_other_actions (void **state)
{
    //  apt is not in test.*, system.*, systemd.*: even the admin is refused
    pv_doc_t *reply = s_submit_as (&s_grid, s_grid.admin_key, "all", "apt",
                                   "update", NULL, NULL);
    assert_string_equal (s_code (reply), "forbidden");
    const pv_t *message = pv_map_get (pv_doc_root (reply), "message");
    char *text = pv_strdup (message);
    assert_non_null (strstr (text, "allowlist"));
    free (text);
    pv_doc_destroy (&reply);
}

static void
test_it_security_agent_key_cannot_call_client_api (void **state)
{
    char agent_key [400];
    assert_int_equal (grid_keygen (&s_grid, "agent-web-01", agent_key,
                                   sizeof agent_key, NULL), 0);
    pv_doc_t *reply = grid_call_as (&s_grid, agent_key, "node.list", NULL);
    assert_null (reply);
    char *out = NULL, *err = NULL;
    int code = grid_cli_as (&s_grid, agent_key, &out, &err, 15000, "status",
                            NULL);
    assert_int_equal (code, 4);
    free (out);
    free (err);
}

//  ---------------------------------------------------------------------
//  Agents

static void
test_it_security_agent_cannot_speak_for_another_node (void **state)
{
    s_raw_t raw;
    s_raw_open (&raw, &s_grid, "evil");
    proto_msg_t *answer = s_raw_hello (&raw, "evil-01", NULL);
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_WELCOME);
    proto_msg_destroy (&answer);
    int64_t before = s_counter (&s_grid, "impersonation");

    //  Its key is bound to evil-01: hello as web-01 is refused
    answer = s_raw_hello (&raw, "web-01", "web");
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_ERROR);
    assert_string_equal (answer->code, "forbidden");
    proto_msg_destroy (&answer);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", 1000));

    //  So is any message in web-01's name: a forged result of a job that
    //  web-01 is running must not land
    pv_doc_t *reply = s_submit_as (&s_grid, s_grid.admin_key, "node:web-01",
                                   "test", "sleep", "seconds", "2");
    char *job = s_job_id (reply);
    assert_non_null (job);
    pv_doc_destroy (&reply);
    proto_msg_t forged = {
        .type = PROTO_RESULT, .node = "web-01", .job = job, .step = 0,
        .attempt = 1, .status = "failed", .output = "forged", .error = "",
        .exit_code = 1
    };
    s_raw_send (&raw, &forged);
    answer = s_raw_recv (&raw);
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_ERROR);
    assert_string_equal (answer->code, "forbidden");
    proto_msg_destroy (&answer);
    proto_msg_t beat = {
        .type = PROTO_HEARTBEAT, .node = "web-01", .running = 0, .queued = 0
    };
    s_raw_send (&raw, &beat);
    answer = s_raw_recv (&raw);
    assert_non_null (answer);
    assert_string_equal (answer->code, "forbidden");
    proto_msg_destroy (&answer);
    assert_true (s_counter (&s_grid, "impersonation") >= before + 3);

    pv_doc_t *record = grid_wait_job (&s_grid, job, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    assert_true (grid_str_is (grid_cell (data, 0, "web-01"), "status",
                              "success"));
    pv_doc_destroy (&record);
    free (job);

    //  A new key cannot take web-01 over either: its node is bound
    s_raw_t other;
    s_raw_open (&other, &s_grid, "rebuilt");
    answer = s_raw_hello (&other, "web-01", "web");
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_ERROR);
    assert_string_equal (answer->code, "forbidden");
    assert_non_null (strstr (answer->message, "gridcli key delete web-01"));
    proto_msg_destroy (&answer);
    //  ...which is logged at warn, with the node and the key, and listed
    //  as a refused key that claims web-01 without taking it
    char log_path [400];
    snprintf (log_path, sizeof log_path, "%s/broker.log", s_grid.dir);
    char *log = grid_slurp (log_path);
    char claim [200];
    snprintf (claim, sizeof claim, "refused key %s", other.key);
    assert_true (grid_line_with (log, "warn", claim, "node web-01", NULL));
    free (log);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 15000, "key", "list", NULL);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, other.key, "agent", "refused",
                                 "web-01", NULL));
    free (out);
    free (err);
    pv_doc_t *keys = grid_call (&s_grid, "key.accept", "node", "web-01",
                                NULL);
    assert_true (grid_reply_ok (keys, NULL));
    pv_doc_destroy (&keys);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", 1000));
    keys = grid_call (&s_grid, "key.accept", "key", other.key, NULL);
    assert_false (grid_reply_ok (keys, NULL));
    pv_doc_destroy (&keys);
    s_raw_close (&other);
    s_raw_close (&raw);
}

//  An agent message is one body frame. Anything else on the agent socket
//  (an empty delimiter first, as a REQ would send, or three frames) is
//  read whole, counted malformed and answered by nothing, and the next
//  message on the same connection is served as usual.
static void
test_it_security_misframed_agent_messages_are_dropped (void **state)
{
    s_raw_t raw;
    s_raw_open (&raw, &s_grid, "framing");
    proto_msg_t *answer = s_raw_hello (&raw, "frame-01", NULL);
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_WELCOME);
    proto_msg_destroy (&answer);
    int64_t before = s_counter (&s_grid, "malformed");
    assert_true (before >= 0);

    proto_msg_t beat = {
        .type = PROTO_HEARTBEAT, .node = "frame-01", .running = 0,
        .queued = 0
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&beat, writer), 0);
    const void *data = pw_data (writer);
    size_t size = pw_size (writer);
    assert_int_equal (zsock_send (raw.dealer, "zb", data, size), 0);
    assert_int_equal (zsock_send (raw.dealer, "bbb", data, size, data, size,
                                  data, size), 0);
    pw_destroy (&writer);

    //  The first answer after them is the welcome: neither got one
    answer = s_raw_hello (&raw, "frame-01", NULL);
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_WELCOME);
    proto_msg_destroy (&answer);
    assert_int_equal (s_counter (&s_grid, "malformed"), before + 2);
    assert_true (grid_wait_node (&s_grid, "frame-01", "online", S_WAIT_MS));

    proto_msg_t bye = {
        .type = PROTO_BYE, .node = "frame-01", .reason = "test over"
    };
    s_raw_send (&raw, &bye);
    assert_true (grid_wait_node (&s_grid, "frame-01", "offline", S_WAIT_MS));
    s_raw_close (&raw);
}

static void
test_it_security_agent_cannot_receive_other_nodes_commands (void **state)
{
    s_raw_t raw;
    s_raw_open (&raw, &s_grid, "snoop");
    proto_msg_t *answer = s_raw_hello (&raw, "snoop-01", NULL);
    assert_non_null (answer);
    assert_int_equal (answer->type, PROTO_WELCOME);
    proto_msg_destroy (&answer);

    //  Its own topic first, then two that are not its own
    int64_t before = s_counter (&s_grid, "refused_topics");
    s_raw_subscribe (&raw, "node/snoop-01/");
    s_raw_subscribe (&raw, "node/web-01/");
    s_raw_subscribe (&raw, "group/web/");
    //  The refusals are counted once the broker has judged all three
    assert_true (s_counter_above (&s_grid, "refused_topics", before + 1)
                 >= before + 2);

    //  web-01's command goes out, and is done...
    pv_doc_t *record = s_run (&s_grid, "node:web-01", "test", "echo", "msg",
                              "secret");
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&record);
    //  ...then one for snoop-01: the first thing its SUB receives must be
    //  its own command, so web-01's never reached it
    pv_doc_t *reply = s_submit_as (&s_grid, s_grid.admin_key,
                                   "node:snoop-01", "test", "echo", "msg",
                                   "mine");
    char *job = s_job_id (reply);
    assert_non_null (job);
    pv_doc_destroy (&reply);
    zpoller_t *poller = zpoller_new (raw.sub, NULL);
    assert_true (zpoller_wait (poller, S_WAIT_MS) == raw.sub);
    zpoller_destroy (&poller);
    zmsg_t *msg = zmsg_recv (raw.sub);
    assert_non_null (msg);
    char *topic = zmsg_popstr (msg);
    assert_string_equal (topic, "node/snoop-01/");
    zstr_free (&topic);
    zmsg_destroy (&msg);
    reply = grid_call (&s_grid, "job.cancel", "job", job, NULL);
    pv_doc_destroy (&reply);
    free (job);
    s_raw_close (&raw);
}

//  ---------------------------------------------------------------------
//  Enrolment and revocation, on a broker without auto-accept

static void
test_it_security_pending_agent_waits_and_revoked_key_stops (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    grid.manual_accept = true;
    char operator_key [500];
    snprintf (operator_key, sizeof operator_key, "operator:%s/keys/op.key",
              grid.dir);
    char op [400];
    assert_int_equal (grid_keygen (&grid, "op", op, sizeof op, NULL), 0);
    const char *extra [] = {"--client-key", operator_key, NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);

    //  A new agent's key waits as pending: the node gets no work
    int slot = grid_spawn_agent (&grid, "new-01", "web", NULL, NULL);
    assert_true (slot >= 0);
    char *key = s_wait_listed_key (&grid, "new-01", "pending");
    assert_non_null (key);
    pv_doc_t *reply = grid_call (&grid, "node.get", "node", "new-01", NULL);
    assert_string_equal (s_code (reply), "not_found");
    pv_doc_destroy (&reply);
    reply = s_submit_as (&grid, grid.admin_key, "node:new-01", "test",
                         "echo", "msg", "too early");
    //  No node is registered at all, so none offers test echo either
    assert_non_null (reply);
    assert_false (grid_reply_ok (reply, NULL));
    assert_true (streq (s_code (reply), "no_nodes")
                 || streq (s_code (reply), "invalid_job"));
    pv_doc_destroy (&reply);

    //  Accepted (by node id, through gridcli), it comes online and works
    char *out = NULL, *err = NULL;
    int code = grid_cli (&grid, &out, &err, 15000, "key", "accept", "new-01",
                         NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "accepted"));
    free (out);
    free (err);
    assert_true (grid_wait_node (&grid, "new-01", "online", S_WAIT_MS));
    pv_doc_t *record = s_run (&grid, "node:new-01", "test", "echo", "msg",
                              "welcome");
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&record);

    //  Accepted again: it says so and changes nothing (accepted_at stays)
    char *first_at = s_accepted_at (&grid, "new-01");
    assert_non_null (first_at);
    code = grid_cli (&grid, &out, &err, 15000, "key", "accept", "new-01",
                     NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "was already accepted (node new-01): "
                                  "nothing changed"));
    free (out);
    free (err);
    reply = grid_call (&grid, "key.accept", "node", "new-01", NULL);
    assert_true (grid_reply_ok (reply, &data));
    assert_true (grid_str_is (data, "status", "accepted"));
    bool already = false;
    assert_int_equal (pv_get_bool (pv_map_get (data, "already"), &already),
                      0);
    assert_true (already);
    pv_doc_destroy (&reply);
    char *again_at = s_accepted_at (&grid, "new-01");
    assert_non_null (again_at);
    assert_string_equal (again_at, first_at);
    free (again_at);
    free (first_at);

    //  An operator connection that is already open...
    char operator_public [KEYS_TEXT_SIZE], why [256], server [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (op, operator_public, why, sizeof why),
                      0);
    //  A client key never revoked is accepted already, too
    code = grid_cli (&grid, &out, &err, 15000, "key", "accept",
                     operator_public, NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "was already accepted: nothing changed"));
    free (out);
    free (err);
    zcert_t *cert = keys_load_pair (op, why, sizeof why);
    assert_non_null (cert);
    assert_int_equal (keys_read_public (grid.broker_key, server, why,
                                        sizeof why), 0);
    zsock_t *client = zsock_new (ZMQ_DEALER);
    keys_curve_client (client, cert, server);
    zcert_destroy (&cert);
    zsock_set_linger (client, 0);
    zsock_set_rcvtimeo (client, S_WAIT_MS);
    assert_int_equal (zsock_connect (client, "%s", grid.client_ep), 0);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "status", "open-1", 0);
    zsock_send (client, "zb", pw_data (writer), pw_size (writer));
    zmsg_t *answer = zmsg_recv (client);
    assert_non_null (answer);
    zmsg_destroy (&answer);

    //  Revoke both keys: the agent's node goes offline at once, its next
    //  messages are refused and counted
    int64_t before = s_counter (&grid, "unauthorized");
    code = grid_cli (&grid, &out, &err, 15000, "key", "reject", "new-01",
                     NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    code = grid_cli (&grid, &out, &err, 15000, "key", "reject",
                     operator_public, NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (grid_wait_node (&grid, "new-01", "offline", S_WAIT_MS));
    assert_true (s_counter_above (&grid, "unauthorized", before) > before);
    reply = s_submit_as (&grid, grid.admin_key, "node:new-01", "test",
                         "echo", "msg", "too late");
    assert_string_equal (s_code (reply), "no_nodes");
    pv_doc_destroy (&reply);

    //  ...the open operator connection gets "unauthorized" for its next
    //  request, and a new connection is refused at the handshake
    pw_reset (writer);
    proto_request_begin (writer, "status", "open-2", 0);
    zsock_send (client, "zb", pw_data (writer), pw_size (writer));
    answer = zmsg_recv (client);
    assert_non_null (answer);
    zframe_t *body = zmsg_last (answer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (zframe_data (body), zframe_size (body),
                                     &doc, NULL, 0), 0);
    assert_string_equal (s_code (doc), "unauthorized");
    pv_doc_destroy (&doc);
    zmsg_destroy (&answer);
    pw_destroy (&writer);
    zsock_destroy (&client);
    assert_null (grid_call_as (&grid, op, "status", NULL));

    //  The rejected agent key cannot connect again either
    char agent_key [400];
    assert_int_equal (grid_keygen (&grid, "agent-new-01", agent_key,
                                   sizeof agent_key, NULL), 0);
    cert = keys_load_pair (agent_key, why, sizeof why);
    zsock_t *again = zsock_new (ZMQ_DEALER);
    keys_curve_client (again, cert, server);
    zcert_destroy (&cert);
    zsock_set_linger (again, 0);
    zsock_t *monitor = keys_monitor_new (again);
    assert_non_null (monitor);
    assert_int_equal (zsock_connect (again, "%s", grid.agents_ep), 0);
    int event = 0;
    zpoller_t *poller = zpoller_new (monitor, NULL);
    while (event != 1 && zpoller_wait (poller, S_WAIT_MS) == monitor)
        event = keys_monitor_read (monitor, why, sizeof why);
    zpoller_destroy (&poller);
    assert_int_equal (event, 1);
    zsock_destroy (&monitor);
    zsock_destroy (&again);

    //  A rebuilt host: deleting the old key lets a new key enrol as new-01
    grid_stop_agent (&grid, slot, false);
    code = grid_cli (&grid, &out, &err, 15000, "key", "delete", key, NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    char fresh [400];
    assert_int_equal (grid_keygen (&grid, "fresh-new-01", fresh, sizeof fresh,
                                   NULL), 0);
    const char *fresh_extra [] = {"--key", fresh, NULL};
    slot = grid_spawn_agent (&grid, "new-01", "web", NULL, fresh_extra);
    assert_true (slot >= 0);
    char *fresh_key = s_wait_listed_key (&grid, "new-01", "pending");
    assert_non_null (fresh_key);
    assert_string_not_equal (fresh_key, key);
    code = grid_cli (&grid, &out, &err, 15000, "key", "accept", fresh_key,
                     NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (grid_wait_node (&grid, "new-01", "online", S_WAIT_MS));
    free (fresh_key);
    free (key);
    grid_stop (&grid);
}

//  ---------------------------------------------------------------------
//  Secure by default: no keys, no service; plaintext only when asked

static void
test_it_security_no_keys_no_service (void **state)
{
    char data_dir [400], missing [400];
    snprintf (data_dir, sizeof data_dir, "%s/lonely-broker", s_grid.dir);
    snprintf (missing, sizeof missing, "%s/none/broker.key", s_grid.dir);
    char *err = NULL;
    int code = s_program (&s_grid, "gridbroker", &err, "--data-dir",
                          data_dir, "--key", missing, "--client",
                          "ipc:///nonexistent/c", NULL);
    assert_int_equal (code, 1);
    assert_non_null (strstr (err, "gridbroker keygen"));
    assert_non_null (strstr (err, "--insecure"));
    free (err);

    char state_dir [400];
    snprintf (state_dir, sizeof state_dir, "%s/lonely-agent", s_grid.dir);
    code = s_program (&s_grid, "gridagent", &err, "--id", "lonely",
                      "--state-dir", state_dir, "--key", missing, NULL);
    assert_int_equal (code, 1);
    assert_non_null (strstr (err, "gridagent keygen"));
    free (err);

    //  A loose secret file is refused
    char loose [400], secret [420];
    assert_int_equal (grid_keygen (&s_grid, "loose", loose, sizeof loose,
                                   NULL), 0);
    snprintf (secret, sizeof secret, "%s_secret", loose);
    assert_int_equal (chmod (secret, 0644), 0);
    code = s_program (&s_grid, "gridagent", &err, "--id", "lonely",
                      "--state-dir", state_dir, "--key", loose,
                      "--broker-key", s_grid.broker_key, NULL);
    assert_int_equal (code, 1);
    assert_non_null (strstr (err, "chmod 600"));
    free (err);
}

static void
test_it_security_insecure_only_when_asked (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    grid.insecure = true;
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    assert_true (grid_start_agent (&grid, "plain-01", "web", NULL, NULL)
                 >= 0);
    pv_doc_t *record = s_run (&grid, "group:web", "test", "echo", "msg",
                              "in the clear");
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (record, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&record);
    //  No key to rotate: bad_request, as PROTOCOL.md says (conflict is
    //  for a rotation that runs already)
    pv_doc_t *reply = grid_call (&grid, "broker.rekey", NULL);
    char *code = grid_reply_code (reply);
    assert_string_equal (code, "bad_request");
    free (code);
    pv_doc_destroy (&reply);
    //  A CURVE client gets nothing from a plaintext broker
    assert_null (grid_call_as (&grid, grid.admin_key, "status", NULL));
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", grid.dir);
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    char line [1024];
    bool warned = false;
    while (fgets (line, sizeof line, file))
        warned = warned || strstr (line, "WARNING: --insecure");
    fclose (file);
    assert_true (warned);
    grid_stop (&grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_security_client_without_key_is_refused),
        cmocka_unit_test (test_it_security_unknown_client_key_is_refused),
        cmocka_unit_test (test_it_security_viewer_cannot_submit_modify_actions),
        cmocka_unit_test (test_it_security_allowlist_refuses_other_actions),
        cmocka_unit_test (test_it_security_agent_key_cannot_call_client_api),
        cmocka_unit_test (test_it_security_agent_cannot_speak_for_another_node),
        cmocka_unit_test (
            test_it_security_misframed_agent_messages_are_dropped),
        cmocka_unit_test (
            test_it_security_agent_cannot_receive_other_nodes_commands),
        cmocka_unit_test (
            test_it_security_pending_agent_waits_and_revoked_key_stops),
        cmocka_unit_test (test_it_security_no_keys_no_service),
        cmocka_unit_test (test_it_security_insecure_only_when_asked),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
