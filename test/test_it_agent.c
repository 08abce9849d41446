/*  =========================================================================
    test_it_agent - a real gridagent against a broker made by hand in the
    test: a ROUTER and a PUB on ipc:// that speak the protocol message by
    message, so the test can send what a real broker never would.

    That is how the agent's own checks are shown: commands whose params
    the broker would have refused at submit reach the agent directly, and
    the agent refuses each one with a clear error while its recording
    fakes (test/fakes) show that nothing ran.

    Every ack, started and result the agent sends is checked against
    PROTOCOL.md 4.1 rules 4, 6 and 7 as it arrives: at most one ack per
    command sent, at most one started and only after an ack, and after the
    result nothing but the ack of a command sent again.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen
#define S_NODE "edge-01"
#define S_SEEN_MAX 256          //  Attempts the test follows

static grid_t s_grid;
static zsock_t *s_router;       //  The agent endpoint
static zsock_t *s_pub;          //  The commands endpoint
static zframe_t *s_routing;     //  The agent's routing id
static pw_t *s_writer;
static int s_job_seq;

//  What the test saw of one attempt.
typedef struct {
    char job [32];
    uint32_t step;
    uint32_t attempt;
    int commands;               //  Commands sent
    int acks;                   //  Acks received
    int starteds;               //  Starteds received
    bool resulted;              //  A result came
    int acks_owed;              //  Commands sent again since the result
} s_seen_t;

static s_seen_t s_seen [S_SEEN_MAX];
static size_t s_seen_count;

//  ---------------------------------------------------------------------
//  Helpers

static const char *
s_src (void)
{
    const char *src = getenv ("GRID_SRC");
    return src && *src ? src : ".";
}

static char *
s_fake_log (void)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fake-%s.log", s_grid.dir, S_NODE);
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

static void
s_fake_clear (void)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fake-%s.log", s_grid.dir, S_NODE);
    FILE *file = fopen (path, "w");
    if (file)
        fclose (file);
}

//  The record of (JOB, STEP, ATTEMPT), made when new.
static s_seen_t *
s_seen_of (const char *job, uint32_t step, uint32_t attempt)
{
    for (size_t index = 0; index < s_seen_count; index++) {
        s_seen_t *seen = &s_seen [index];
        if (strcmp (seen->job, job) == 0 && seen->step == step
            && seen->attempt == attempt)
            return seen;
    }
    assert_true (s_seen_count < S_SEEN_MAX);
    s_seen_t *seen = &s_seen [s_seen_count++];
    snprintf (seen->job, sizeof seen->job, "%s", job);
    seen->step = step;
    seen->attempt = attempt;
    return seen;
}

//  Rules 4, 6 and 7 on MSG from the agent: at most one ack per command;
//  one started at most, after an ack and never after the result; after
//  the result an ack only answers a command sent again (rule 6).
static void
s_check_order (const proto_msg_t *msg)
{
    if (msg->type != PROTO_ACK && msg->type != PROTO_STARTED
        && msg->type != PROTO_RESULT)
        return;
    s_seen_t *seen = s_seen_of (msg->job, msg->step, msg->attempt);
    if (msg->type == PROTO_RESULT)
        seen->resulted = true;
    else
    if (msg->type == PROTO_STARTED) {
        if (seen->acks == 0 || seen->resulted || seen->starteds > 0)
            fail_msg ("started of %s/%u/%u %s", msg->job, msg->step,
                      msg->attempt,
                      seen->resulted ? "after its result"
                      : seen->acks == 0 ? "before its ack" : "twice");
        seen->starteds++;
    }
    else {
        if (++seen->acks > seen->commands)
            fail_msg ("ack of %s/%u/%u: %d acks for %d commands", msg->job,
                      msg->step, msg->attempt, seen->acks, seen->commands);
        if (seen->resulted && seen->acks_owed == 0)
            fail_msg ("ack of %s/%u/%u after its result", msg->job,
                      msg->step, msg->attempt);
        if (seen->resulted)
            seen->acks_owed--;
    }
}

//  Sends MSG to the agent over the ROUTER.
static void
s_send (const proto_msg_t *msg)
{
    pw_reset (s_writer);
    assert_int_equal (proto_msg_encode (msg, s_writer), 0);
    zmsg_t *out = zmsg_new ();
    zmsg_addmem (out, zframe_data (s_routing), zframe_size (s_routing));
    zmsg_addmem (out, pw_data (s_writer), pw_size (s_writer));
    assert_int_equal (zmsg_send (&out, s_router), 0);
}

//  The next message from the agent that is not a heartbeat, or NULL
//  after DEADLINE (grid_now_ms). Keeps the agent's routing id.
static proto_msg_t *
s_recv_by (long long deadline)
{
    while (grid_now_ms () < deadline) {
        zsock_set_rcvtimeo (s_router, 200);
        zmsg_t *in = zmsg_recv (s_router);
        if (!in)
            continue;
        zframe_t *routing = zmsg_pop (in);
        zframe_t *body = zmsg_pop (in);
        proto_msg_t *msg = NULL;
        char why [256];
        int rc = body ? proto_msg_decode (zframe_data (body),
                                          zframe_size (body), &msg, why,
                                          sizeof why)
                      : -2;
        zframe_destroy (&body);
        zmsg_destroy (&in);
        if (rc != 0) {
            fprintf (stderr, "the agent sent a malformed message: %s\n", why);
            zframe_destroy (&routing);
            return NULL;
        }
        zframe_destroy (&s_routing);
        s_routing = routing;
        if (msg->type == PROTO_HEARTBEAT) {
            proto_msg_destroy (&msg);
            continue;
        }
        s_check_order (msg);
        return msg;
    }
    return NULL;
}

//  s_recv within S_WAIT_MS.
static proto_msg_t *
s_recv (void)
{
    return s_recv_by (grid_now_ms () + S_WAIT_MS);
}

//  The next message about JOB. Results of earlier jobs that the agent
//  sends again (its timer re-sends what is not yet acknowledged) are
//  skipped.
static proto_msg_t *
s_recv_job (const char *job)
{
    while (true) {
        proto_msg_t *msg = s_recv ();
        if (!msg || (msg->job && strcmp (msg->job, job) == 0))
            return msg;
        if (msg->type != PROTO_RESULT)
            return msg;
        proto_msg_destroy (&msg);
    }
}

//  The next message, which must be of TYPE for (JOB, STEP, ATTEMPT).
static proto_msg_t *
s_expect (proto_type_t type, const char *job, uint32_t step,
          uint32_t attempt)
{
    proto_msg_t *msg = s_recv_job (job);
    assert_non_null (msg);
    if (msg->type != type || strcmp (msg->job, job) != 0
        || msg->step != step || msg->attempt != attempt)
        fprintf (stderr, "expected %s of %s/%u/%u, got %s of %s/%u/%u\n",
                 proto_type_name (type), job, step, attempt,
                 proto_type_name (msg->type), msg->job ? msg->job : "-",
                 msg->step, msg->attempt);
    assert_int_equal (msg->type, type);
    assert_string_equal (msg->job, job);
    assert_int_equal (msg->step, step);
    assert_int_equal (msg->attempt, attempt);
    return msg;
}

//  Acknowledges RESULT so that the agent drops it from its spool.
static void
s_result_ack (const proto_msg_t *result)
{
    proto_msg_t ack = {
        .type = PROTO_RESULT_ACK, .job = result->job, .step = result->step,
        .attempt = result->attempt
    };
    s_send (&ack);
}

static void
s_new_job (char *job, size_t len)
{
    snprintf (job, len, "j-0193a1b2c3d4-%04d", ++s_job_seq);
}

//  Sends a command straight to the agent: BACKEND ACTION with COUNT
//  params (KEYS, VALUES), to NODES (NULL: no filter).
static void
s_command (const char *job, uint32_t step, uint32_t attempt,
           const char *backend, const char *action, size_t count,
           const char *const *keys, const char *const *values,
           const char *only_node)
{
    proto_kv_t params [4];
    for (size_t index = 0; index < count; index++) {
        params [index].key = (char *) keys [index];
        params [index].value = (char *) values [index];
    }
    char *nodes [1] = {(char *) only_node};
    s_seen_t *seen = s_seen_of (job, step, attempt);
    seen->commands++;
    if (seen->resulted)
        seen->acks_owed++;
    proto_msg_t command = {
        .type = PROTO_COMMAND, .job = (char *) job, .step = step,
        .attempt = attempt, .backend = (char *) backend,
        .action = (char *) action, .params = count ? params : NULL,
        .param_count = count, .timeout_ms = 30000,
        .nodes = only_node ? nodes : NULL, .node_count = only_node ? 1 : 0
    };
    s_send (&command);
}

//  The result of (JOB, STEP, ATTEMPT), not yet acknowledged. An ack, and
//  a started after it, come first only when the result was not ready
//  within the agent's hold (rules 4 and 7); *PROGRESS_P, when given, gets
//  how many of them came.
static proto_msg_t *
s_result_of (const char *job, uint32_t step, uint32_t attempt,
             int *progress_p)
{
    int progress = 0;
    proto_msg_t *msg = s_recv_job (job);
    while (msg && (msg->type == PROTO_ACK || msg->type == PROTO_STARTED)) {
        progress++;
        proto_msg_destroy (&msg);
        msg = s_recv_job (job);
    }
    assert_non_null (msg);
    assert_int_equal (msg->type, PROTO_RESULT);
    assert_string_equal (msg->job, job);
    assert_int_equal (msg->step, step);
    assert_int_equal (msg->attempt, attempt);
    if (progress_p)
        *progress_p = progress;
    return msg;
}

//  Runs one command and returns its result (acked to the agent).
//  *PROGRESS_P as for s_result_of.
static proto_msg_t *
s_run (const char *job, uint32_t attempt, const char *backend,
       const char *action, size_t count, const char *const *keys,
       const char *const *values, int *progress_p)
{
    s_command (job, 0, attempt, backend, action, count, keys, values, NULL);
    proto_msg_t *msg = s_result_of (job, 0, attempt, progress_p);
    s_result_ack (msg);
    return msg;
}

//  Runs `test sleep` for a minute as JOB step 0, sent twice when
//  DUPLICATE; waits for its ack and started, then cancels it. The ack
//  comes while the step runs: the result comes only after the cancel.
static void
s_long_step (const char *job, bool duplicate)
{
    const char *keys [] = {"seconds"};
    const char *values [] = {"60"};
    s_command (job, 0, 1, "test", "sleep", 1, keys, values, NULL);
    if (duplicate)
        s_command (job, 0, 1, "test", "sleep", 1, keys, values, NULL);
    //  The held ack, or the one a duplicate gets at once, then started
    proto_msg_t *msg = s_expect (PROTO_ACK, job, 0, 1);
    proto_msg_destroy (&msg);
    do {
        proto_msg_destroy (&msg);
        msg = s_recv_job (job);
        assert_non_null (msg);
        assert_int_equal (msg->attempt, 1);
    } while (msg->type == PROTO_ACK);
    assert_int_equal (msg->type, PROTO_STARTED);
    proto_msg_destroy (&msg);

    proto_msg_t cancel = {
        .type = PROTO_CANCEL, .job = (char *) job, .reason = "test over"
    };
    s_send (&cancel);
    //  An ack may still answer the duplicate; nothing else comes first
    msg = s_recv_job (job);
    while (msg && duplicate && msg->type == PROTO_ACK) {
        proto_msg_destroy (&msg);
        msg = s_recv_job (job);
    }
    assert_non_null (msg);
    assert_int_equal (msg->type, PROTO_RESULT);
    assert_int_equal (msg->attempt, 1);
    assert_string_equal (msg->status, "cancelled");
    s_result_ack (msg);
    proto_msg_destroy (&msg);
}

//  ---------------------------------------------------------------------
//  Fixture: the hand-made broker and one agent, welcomed

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    s_grid.insecure = true;
    s_writer = pw_new ();
    s_router = zsock_new (ZMQ_ROUTER);
    s_pub = zsock_new (ZMQ_PUB);
    if (!s_router || !s_pub || zsock_bind (s_router, "%s", s_grid.agents_ep)
        || zsock_bind (s_pub, "%s", s_grid.publish_ep))
        return -1;
    zsock_set_linger (s_router, 0);
    zsock_set_linger (s_pub, 0);
    char log [400], tool_dir [600];
    snprintf (log, sizeof log, "%s/fake-%s.log", s_grid.dir, S_NODE);
    snprintf (tool_dir, sizeof tool_dir, "%s/test/fakes", s_src ());
    const char *extra [] = {"--tool-dir", tool_dir, "--disable", "rke2",
                            NULL};
    setenv ("GRID_FAKE_LOG", log, 1);
    int slot = grid_spawn_agent (&s_grid, S_NODE, "edge", NULL, extra);
    unsetenv ("GRID_FAKE_LOG");
    if (slot < 0)
        return -1;
    proto_msg_t *hello = s_recv ();
    if (!hello || hello->type != PROTO_HELLO || strcmp (hello->node, S_NODE)) {
        proto_msg_destroy (&hello);
        return -1;
    }
    proto_msg_destroy (&hello);
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = S_NODE, .heartbeat_ms = 1000
    };
    s_send (&welcome);
    return 0;
}

static int
s_teardown (void **state)
{
    //  The agent says bye on its way out; nothing is left unacknowledged
    for (size_t index = 0; index < s_grid.agent_count; index++)
        grid_stop_agent (&s_grid, (int) index, false);
    zsock_destroy (&s_router);
    zsock_destroy (&s_pub);
    zframe_destroy (&s_routing);
    pw_destroy (&s_writer);
    grid_stop (&s_grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  Tests

static void
test_it_agent_hello_advertises_schemas (void **state)
{
    //  A second hello on request: the agent sends one when the broker says
    //  it does not know the session
    proto_msg_t error = {
        .type = PROTO_ERROR, .code = "unknown_node",
        .message = "this broker does not know this session: send hello"
    };
    s_send (&error);
    proto_msg_t *hello = s_recv ();
    assert_non_null (hello);
    assert_int_equal (hello->type, PROTO_HELLO);
    assert_string_equal (hello->node, S_NODE);
    assert_int_equal (hello->group_count, 1);
    assert_string_equal (hello->groups [0], "edge");
    //  It takes several results' acks in one message
    assert_true (proto_hello_has_feature (hello, PROTO_FEATURE_RESULT_ACKS));
    //  Every built-in backend but the one switched off here
    const char *offered [] = {"test", "system", "ping", "network", "apt",
                              "systemd", "file"};
    assert_int_equal (hello->backend_count, 7);
    for (size_t index = 0; index < 7; index++)
        assert_string_equal (hello->backends [index].name, offered [index]);
    const proto_backend_spec_t *apt = &hello->backends [4];
    assert_string_equal (apt->actions [0].name, "install");
    assert_true (apt->actions [0].modify);
    assert_int_equal (apt->actions [0].param_count, 1);
    assert_string_equal (apt->actions [0].params [0].name, "package");
    assert_true (apt->actions [0].params [0].required);
    assert_non_null (apt->actions [0].params [0].pattern);
    proto_msg_destroy (&hello);
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = S_NODE, .heartbeat_ms = 1000
    };
    s_send (&welcome);
}

static void
test_it_agent_runs_a_valid_command (void **state)
{
    s_fake_clear ();
    char job [32];
    s_new_job (job, sizeof job);
    const char *keys [] = {"package"};
    const char *values [] = {"nginx"};
    proto_msg_t *result = s_run (job, 1, "apt", "install", 1, keys, values,
                                 NULL);
    assert_string_equal (result->status, "success");
    assert_int_equal (result->exit_code, 0);
    assert_non_null (strstr (result->output, "Setting up nginx"));
    proto_msg_destroy (&result);
    char *log = s_fake_log ();
    assert_string_equal (log, "apt-get\ninstall\n-y\n--\nnginx\n"
                              "---- end of argv\n");
    free (log);
}

static void
test_it_agent_refuses_hostile_params (void **state)
{
    struct {
        const char *backend, *action, *key, *value, *error;
    } cases [] = {
        {"apt", "install", "package", "nginx; rm -rf /",
         "param 'package': character ';' is not allowed"},
        {"apt", "install", "package", "-oAPT::Update::Pre-Invoke::=sh",
         "must not start with '-'"},
        {"apt", "install", "package", "NGINX", "does not match"},
        {"apt", "install", "package", "ngin\xd1\x85", "non-ASCII"},
        {"apt", "remove", "package", "../../etc/passwd", "does not match"},
        {"systemd", "start", "unit", "nginx$(reboot)", "'$'"},
        {"systemd", "stop", "unit", "a\tb", "control character"},
        {"ping", "ping", "address", "-f", "must not start with '-'"},
        {"system", "disk", "path", "/../etc", "'..'"},
        {"network", "dns_update", "servers", "1.2.3.4.5",
         "not a valid nameserver address"},
        {"apt", "install", "pkg", "nginx", "unknown param 'pkg'"},
        {"apt", "install", NULL, NULL, "param 'package' is required"},
        {"rke2", "start", "mode", "server",
         "backend 'rke2' is disabled on this node"},
        {"nosuch", "thing", NULL, NULL, "unknown backend 'nosuch'"},
        {"apt", "purge", "package", "nginx",
         "unknown action 'purge' for backend 'apt'"},
    };
    s_fake_clear ();
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        char job [32];
        s_new_job (job, sizeof job);
        const char *keys [] = {cases [index].key};
        const char *values [] = {cases [index].value};
        int progress = -1;
        proto_msg_t *result = s_run (job, 1, cases [index].backend,
                                     cases [index].action,
                                     cases [index].key ? 1 : 0, keys, values,
                                     &progress);
        //  Refused as it is taken: the result stands for the ack
        assert_int_equal (progress, 0);
        if (strcmp (result->status, "refused") != 0
            || !strstr (result->error, cases [index].error))
            fprintf (stderr, "case %zu: %s: %s\n", index, result->status,
                     result->error);
        assert_string_equal (result->status, "refused");
        assert_non_null (strstr (result->error, cases [index].error));
        assert_int_equal (result->exit_code, -1);
        proto_msg_destroy (&result);
    }
    char *log = s_fake_log ();
    assert_string_equal (log, "");
    free (log);
}

static void
test_it_agent_attempt_reaches_the_action (void **state)
{
    char job [32];
    s_new_job (job, sizeof job);
    const char *keys [] = {"failures"};
    const char *values [] = {"1"};
    proto_msg_t *result = s_run (job, 1, "test", "flaky", 1, keys, values,
                                 NULL);
    assert_string_equal (result->status, "failed");
    assert_string_equal (result->error, "attempt 1: failing as asked, "
                                        "failures 1\n");
    proto_msg_destroy (&result);
    result = s_run (job, 2, "test", "flaky", 1, keys, values, NULL);
    assert_string_equal (result->status, "success");
    assert_string_equal (result->output, "attempt 2: succeeded, failures 1\n");
    proto_msg_destroy (&result);
}

static void
test_it_agent_duplicates_and_filters (void **state)
{
    s_fake_clear ();
    //  A command for another node is ignored: the first answer is for the
    //  command that follows it
    char other [32], job [32];
    s_new_job (other, sizeof other);
    s_new_job (job, sizeof job);
    const char *keys [] = {"package"};
    const char *values [] = {"curl"};
    s_command (other, 0, 1, "apt", "install", 1, keys, values, "edge-99");
    proto_msg_t *result = s_run (job, 1, "apt", "install", 1, keys, values,
                                 NULL);
    assert_string_equal (result->status, "success");
    proto_msg_destroy (&result);

    //  The same (job, step, attempt) again while its result is not yet
    //  acknowledged: acked again and the result sent again
    s_new_job (job, sizeof job);
    s_command (job, 0, 1, "apt", "install", 1, keys, values, NULL);
    proto_msg_t *msg = s_result_of (job, 0, 1, NULL);
    proto_msg_destroy (&msg);
    s_command (job, 0, 1, "apt", "install", 1, keys, values, S_NODE);
    bool acked = false, resent = false;
    while (!acked || !resent) {
        msg = s_recv_job (job);
        assert_non_null (msg);
        assert_true (msg->type == PROTO_ACK || msg->type == PROTO_RESULT);
        if (msg->type == PROTO_ACK)
            acked = true;
        else {
            assert_string_equal (msg->status, "success");
            resent = true;
            s_result_ack (msg);
        }
        proto_msg_destroy (&msg);
    }
    //  ...and once acknowledged, a duplicate is acked again (a copy of
    //  the result the timer sent before our result_ack may still come)
    s_command (job, 0, 1, "apt", "install", 1, keys, values, NULL);
    do {
        proto_msg_destroy (&msg);
        msg = s_recv_job (job);
        assert_non_null (msg);
    } while (msg->type == PROTO_RESULT);
    assert_int_equal (msg->type, PROTO_ACK);
    assert_int_equal (msg->attempt, 1);
    proto_msg_destroy (&msg);
    //  Nothing ran twice
    char *log = s_fake_log ();
    assert_string_equal (log, "apt-get\ninstall\n-y\n--\ncurl\n"
                              "---- end of argv\n"
                              "apt-get\ninstall\n-y\n--\ncurl\n"
                              "---- end of argv\n");
    free (log);
}

static void
test_it_agent_in_loop_result_goes_alone (void **state)
{
    //  system hostname runs in the agent's loop: its result is ready on
    //  the loop pass after the command, well within the hold, and stands
    //  for the ack and the started
    char job [32];
    s_new_job (job, sizeof job);
    s_command (job, 0, 1, "system", "hostname", 0, NULL, NULL, NULL);
    proto_msg_t *result = s_expect (PROTO_RESULT, job, 0, 1);
    assert_string_equal (result->status, "success");
    assert_int_equal (result->data_count, 1);
    assert_string_equal (result->data [0].key, "hostname");
    s_result_ack (result);
    proto_msg_destroy (&result);
    //  ...and nothing of it stayed held: held messages leave oldest
    //  first, so a stray ack or started of that job would come before
    //  this one's ack and fail the order check
    s_new_job (job, sizeof job);
    s_long_step (job, false);
}

static void
test_it_agent_long_step_acks_first (void **state)
{
    //  A step that runs on past the hold is acked, then reported started,
    //  while it runs; a duplicate meanwhile is acked again, not run again
    char job [32];
    s_new_job (job, sizeof job);
    s_long_step (job, false);
    s_new_job (job, sizeof job);
    s_long_step (job, true);
}

//  Runs `test echo` as a new job and returns its id in JOB; the result is
//  left unacknowledged.
static void
s_unacked_echo (char *job, size_t len)
{
    s_new_job (job, len);
    const char *keys [] = {"msg"};
    const char *values [] = {"hi"};
    s_command (job, 0, 1, "test", "echo", 1, keys, values, NULL);
    proto_msg_t *msg = s_result_of (job, 0, 1, NULL);
    proto_msg_destroy (&msg);
}

//  Makes the agent say hello again (as after a broker restart) and
//  welcomes it: it then sends every result of its spool again. Reads
//  until the result of WANTED comes (NULL: none is wanted) and for a
//  moment after; fails when the result of any of the COUNT jobs of GONE
//  comes back.
static void
s_spool_holds (const char *wanted, char gone [][32], size_t count)
{
    proto_msg_t error = {
        .type = PROTO_ERROR, .code = "unknown_node",
        .message = "this broker does not know this session: send hello"
    };
    s_send (&error);
    proto_msg_t *msg = s_recv ();
    assert_non_null (msg);
    assert_int_equal (msg->type, PROTO_HELLO);
    proto_msg_destroy (&msg);
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = S_NODE, .heartbeat_ms = 1000
    };
    s_send (&welcome);
    bool found = wanted == NULL;
    long long quiet_until = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < quiet_until) {
        zsock_set_rcvtimeo (s_router, 100);
        zmsg_t *in = zmsg_recv (s_router);
        if (!in)
            continue;
        zframe_t *body = zmsg_last (in);
        proto_msg_t *got = NULL;
        if (proto_msg_decode (zframe_data (body), zframe_size (body), &got,
                              NULL, 0) == 0 && got->type == PROTO_RESULT) {
            for (size_t index = 0; index < count; index++)
                if (strcmp (got->job, gone [index]) == 0)
                    fail_msg ("the result of %s is still spooled", got->job);
            if (wanted && strcmp (got->job, wanted) == 0 && !found) {
                found = true;
                quiet_until = grid_now_ms () + 700;
            }
        }
        proto_msg_destroy (&got);
        zmsg_destroy (&in);
        if (found && quiet_until > grid_now_ms () + 700)
            quiet_until = grid_now_ms () + 700;
    }
    assert_true (found);
}

//  The timers of running work (progress, live output) stop while the
//  agent is idle and start again with its next task: a task taken after
//  a quiet spell still reports its progress.
static void
test_it_agent_progress_after_idle (void **state)
{
    char job [32];
    s_new_job (job, sizeof job);
    const char *keys [] = {"msg"};
    const char *values [] = {"hi"};
    proto_msg_t *msg = s_run (job, 1, "test", "echo", 1, keys, values, NULL);
    proto_msg_destroy (&msg);
    //  Longer than the progress interval (1 s): the timers went quiet
    zclock_sleep (1500);
    s_new_job (job, sizeof job);
    const char *sleep_keys [] = {"seconds"};
    const char *sleep_values [] = {"60"};
    s_command (job, 0, 1, "test", "sleep", 1, sleep_keys, sleep_values,
               NULL);
    bool progress = false;
    while (!progress) {
        msg = s_recv_job (job);
        assert_non_null (msg);
        assert_true (msg->type == PROTO_ACK || msg->type == PROTO_STARTED
                     || msg->type == PROTO_PROGRESS);
        progress = msg->type == PROTO_PROGRESS;
        proto_msg_destroy (&msg);
    }
    proto_msg_t cancel = {
        .type = PROTO_CANCEL, .job = job, .reason = "test over"
    };
    s_send (&cancel);
    msg = s_recv_job (job);
    while (msg && msg->type == PROTO_PROGRESS) {
        proto_msg_destroy (&msg);
        msg = s_recv_job (job);
    }
    assert_non_null (msg);
    assert_int_equal (msg->type, PROTO_RESULT);
    assert_string_equal (msg->status, "cancelled");
    s_result_ack (msg);
    proto_msg_destroy (&msg);
}

//  One result_acks acknowledges results of several jobs: they leave the
//  spool, the one it does not name stays (and a single result_ack still
//  works).
static void
test_it_agent_result_acks_batched (void **state)
{
    char jobs [3][32];
    for (size_t index = 0; index < 3; index++)
        s_unacked_echo (jobs [index], sizeof jobs [index]);
    proto_ack_t acks [] = {
        { .job = jobs [0], .step = 0, .attempt = 1 },
        { .job = jobs [1], .step = 0, .attempt = 1 }
    };
    proto_msg_t batch = {
        .type = PROTO_RESULT_ACKS, .acks = acks, .ack_count = 2
    };
    s_send (&batch);
    s_spool_holds (jobs [2], jobs, 2);
    proto_msg_t ack = {
        .type = PROTO_RESULT_ACK, .job = jobs [2], .step = 0, .attempt = 1
    };
    s_send (&ack);
    s_spool_holds (NULL, jobs, 3);
}

//  Sends the bytes in WRITER to the agent as they are.
static void
s_send_raw (pw_t *writer)
{
    zmsg_t *out = zmsg_new ();
    zmsg_addmem (out, zframe_data (s_routing), zframe_size (s_routing));
    zmsg_addmem (out, pw_data (writer), pw_size (writer));
    assert_int_equal (zmsg_send (&out, s_router), 0);
}

//  Starts a result_acks of COUNT entries in WRITER.
static void
s_acks_begin (pw_t *writer, size_t count)
{
    pw_reset (writer);
    pw_map (writer, 3);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "result_acks");
    pw_str (writer, "acks");
    pw_array (writer, count);
}

static void
s_acks_entry (pw_t *writer, const char *job, int64_t step, int64_t attempt)
{
    pw_array (writer, 3);
    pw_str (writer, job);
    pw_int (writer, step);
    pw_int (writer, attempt);
}

//  Hostile result_acks: malformed, oversized, and naming results the
//  agent never sent. Each is dropped and counted (the log says so), none
//  acknowledges anything, and the agent goes on working.
static void
test_it_agent_result_acks_hostile (void **state)
{
    char job [32];
    s_unacked_echo (job, sizeof job);
    pw_t *writer = pw_new ();
    //  An entry of two values, naming the waiting result
    s_acks_begin (writer, 2);
    s_acks_entry (writer, job, 0, 1);
    pw_array (writer, 2);
    pw_str (writer, job);
    pw_int (writer, 0);
    s_send_raw (writer);
    //  A step out of range, a job id that is none, a map for an entry
    s_acks_begin (writer, 2);
    s_acks_entry (writer, job, 0, 1);
    s_acks_entry (writer, job, 5000, 1);
    s_send_raw (writer);
    s_acks_begin (writer, 2);
    s_acks_entry (writer, job, 0, 1);
    s_acks_entry (writer, "../../etc/passwd", 0, 1);
    s_send_raw (writer);
    s_acks_begin (writer, 1);
    pw_map (writer, 1);
    pw_str (writer, "job");
    pw_str (writer, job);
    s_send_raw (writer);
    //  One more entry than a message may hold, the first naming it
    s_acks_begin (writer, PROTO_MAX_ACKS + 1);
    for (size_t index = 0; index <= PROTO_MAX_ACKS; index++)
        s_acks_entry (writer, job, (int64_t) (index % 1024),
                      1 + (int64_t) (index / 1024));
    s_send_raw (writer);
    //  Empty
    s_acks_begin (writer, 0);
    s_send_raw (writer);
    //  Well formed, for results it never sent (some twice)
    s_acks_begin (writer, 4);
    s_acks_entry (writer, "j-0000000000ff-0001", 0, 1);
    s_acks_entry (writer, "j-0000000000ff-0001", 0, 1);
    s_acks_entry (writer, job, 3, 1);
    s_acks_entry (writer, job, 0, 2);
    s_send_raw (writer);
    pw_destroy (&writer);
    //  Nothing of it acknowledged the waiting result
    char none [1][32] = { "" };
    s_spool_holds (job, none, 0);
    //  The agent still works, and its log counted what it dropped
    char other [32];
    s_new_job (other, sizeof other);
    const char *keys [] = {"msg"};
    const char *values [] = {"still here"};
    proto_msg_t *msg = s_run (other, 1, "test", "echo", 1, keys, values,
                              NULL);
    assert_string_equal (msg->output, "still here\n");
    proto_msg_destroy (&msg);
    char path [400];
    snprintf (path, sizeof path, "%s/agent-%s.log", s_grid.dir, S_NODE);
    char *log = grid_slurp (path);
    assert_true (grid_line_with (log, "dropped a malformed message (1 so far)",
                                 "result_acks.acks[1]", NULL));
    assert_true (grid_line_with (log, "result_acks named 4 results", NULL));
    free (log);
    //  A good one after all that
    proto_ack_t ack = { .job = job, .step = 0, .attempt = 1 };
    proto_msg_t batch = {
        .type = PROTO_RESULT_ACKS, .acks = &ack, .ack_count = 1
    };
    s_send (&batch);
    char gone [1][32];
    snprintf (gone [0], sizeof gone [0], "%s", job);
    s_spool_holds (NULL, gone, 1);
}

//  A broker older than hello's features refuses the key as malformed: the
//  agent says hello again without it (and takes single result_acks).
static void
test_it_agent_older_broker_hello (void **state)
{
    proto_msg_t error = {
        .type = PROTO_ERROR, .code = "unknown_node",
        .message = "this broker does not know this session: send hello"
    };
    s_send (&error);
    proto_msg_t *hello = s_recv ();
    assert_non_null (hello);
    assert_int_equal (hello->type, PROTO_HELLO);
    assert_true (proto_hello_has_feature (hello, PROTO_FEATURE_RESULT_ACKS));
    proto_msg_destroy (&hello);
    proto_msg_t refusal = {
        .type = PROTO_ERROR, .code = "malformed",
        .message = "hello: unknown key 'features'"
    };
    s_send (&refusal);
    hello = s_recv ();
    assert_non_null (hello);
    assert_int_equal (hello->type, PROTO_HELLO);
    assert_int_equal (hello->feature_count, 0);
    assert_int_equal (hello->backend_count, 7);
    proto_msg_destroy (&hello);
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = S_NODE, .heartbeat_ms = 1000
    };
    s_send (&welcome);
    char job [32];
    s_new_job (job, sizeof job);
    const char *keys [] = {"msg"};
    const char *values [] = {"old"};
    proto_msg_t *msg = s_run (job, 1, "test", "echo", 1, keys, values, NULL);
    proto_msg_destroy (&msg);
    char gone [1][32];
    snprintf (gone [0], sizeof gone [0], "%s", job);
    s_spool_holds (NULL, gone, 1);
}

//  True when the agent's log holds a line with TEXT.
static bool
s_agent_logged (const char *text)
{
    char path [600];
    snprintf (path, sizeof path, "%s/agent-%s.log", s_grid.dir, S_NODE);
    char *log = grid_slurp (path);
    bool found = log && strstr (log, text);
    free (log);
    return found;
}

//  The epoch fence: welcomed by a cluster's active of epoch 20, the agent
//  refuses what a demoted active of epoch 19 sends (a command, a
//  result_ack), takes what the active sends, keeps the epoch in its state
//  dir, and takes a welcome of a later epoch (a failover).
//  Live output to a broker that does not acknowledge its pieces (it
//  paces those acks, or loses them): the re-send timer sends a piece
//  again only once it has waited the re-send interval (5 s) since it
//  last went, never sooner, and keeps sending it until its ack comes; a
//  new session gets it at once.
#define S_LIVE_PIECES 64
static void
test_it_agent_live_resent_when_due (void **state)
{
    char *granted [] = {PROTO_FEATURE_LIVE_OUTPUT};
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = S_NODE, .heartbeat_ms = 1000,
        .features = granted, .feature_count = 1
    };
    s_send (&welcome);
    char job [32];
    s_new_job (job, sizeof job);
    const char *keys [] = {"count", "interval"};
    const char *values [] = {"150", "100ms"};
    s_command (job, 0, 1, "test", "lines", 2, keys, values, NULL);

    //  Every stdout piece: its offset, when it came last, how often
    uint64_t offsets [S_LIVE_PIECES];
    long long last_ms [S_LIVE_PIECES];
    int times [S_LIVE_PIECES];
    size_t count = 0;
    long long first_ms = 0;
    long long deadline = grid_now_ms () + 13000;
    while (grid_now_ms () < deadline) {
        proto_msg_t *msg = s_recv_by (deadline);
        if (!msg)
            break;
        if (msg->type == PROTO_OUTPUT && strcmp (msg->job, job) == 0
            && strcmp (msg->stream, "stdout") == 0) {
            long long now = grid_now_ms ();
            if (!first_ms)
                first_ms = now;
            size_t at = 0;
            while (at < count && offsets [at] != msg->offset)
                at++;
            if (at == count) {
                assert_true (count < S_LIVE_PIECES);
                offsets [count] = msg->offset;
                times [count++] = 0;
            }
            else
            if (now - last_ms [at] < 4500)
                fail_msg ("piece at %llu of %s sent again after %lld ms",
                          (unsigned long long) msg->offset, job,
                          now - last_ms [at]);
            last_ms [at] = now;
            times [at]++;
        }
        proto_msg_destroy (&msg);
    }
    //  The first piece went live (at offset 0) and, never acknowledged,
    //  went again
    assert_true (count >= 1);
    assert_int_equal (offsets [0], 0);
    assert_true (times [0] >= 2);

    //  A new session: what waits goes at once
    s_send (&welcome);
    long long welcomed_ms = grid_now_ms ();
    bool again = false;
    while (!again) {
        proto_msg_t *msg = s_recv_by (welcomed_ms + 2000);
        if (!msg)
            break;
        again = msg->type == PROTO_OUTPUT && strcmp (msg->job, job) == 0
                && strcmp (msg->stream, "stdout") == 0 && msg->offset == 0;
        proto_msg_destroy (&msg);
    }
    assert_true (again);

    //  Everything acknowledged: the task is cancelled, its result and the
    //  pieces of its output taken
    proto_msg_t cancel = {
        .type = PROTO_CANCEL, .job = job, .reason = "test over"
    };
    s_send (&cancel);
    proto_msg_t *result = NULL;
    while (!result) {
        proto_msg_t *msg = s_recv ();
        assert_non_null (msg);
        if (msg->type == PROTO_RESULT && strcmp (msg->job, job) == 0) {
            result = msg;
            break;
        }
        if (msg->type == PROTO_OUTPUT && strcmp (msg->job, job) == 0) {
            proto_msg_t ack = {
                .type = PROTO_OUTPUT_ACK, .job = job, .step = 0,
                .attempt = 1, .stream = msg->stream, .offset = msg->offset
            };
            s_send (&ack);
        }
        proto_msg_destroy (&msg);
    }
    s_result_ack (result);
    proto_msg_destroy (&result);
    for (size_t at = 0; at < count; at++) {
        proto_msg_t ack = {
            .type = PROTO_OUTPUT_ACK, .job = job, .step = 0, .attempt = 1,
            .stream = (char *) "stdout", .offset = offsets [at]
        };
        s_send (&ack);
    }
    proto_msg_t plain = {
        .type = PROTO_WELCOME, .node = S_NODE, .heartbeat_ms = 1000
    };
    s_send (&plain);
}

static void
test_it_agent_epoch_fence (void **state)
{
    proto_msg_t error = {
        .type = PROTO_ERROR, .code = "unknown_node",
        .message = "this broker does not know this session: send hello"
    };
    s_send (&error);
    proto_msg_t *hello = s_recv ();
    assert_non_null (hello);
    assert_int_equal (hello->type, PROTO_HELLO);
    assert_true (proto_hello_has_feature (hello, PROTO_FEATURE_EPOCH));
    proto_msg_destroy (&hello);
    char *granted [] = {PROTO_FEATURE_EPOCH};
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = S_NODE, .heartbeat_ms = 1000,
        .features = granted, .feature_count = 1, .epoch = 20
    };
    s_send (&welcome);

    //  A result the active has not acknowledged yet
    char kept [32];
    s_new_job (kept, sizeof kept);
    const char *echo_keys [] = {"msg"};
    const char *echo_values [] = {"kept"};
    s_command (kept, 0, 1, "test", "echo", 1, echo_keys, echo_values, NULL);
    proto_msg_t *result = s_result_of (kept, 0, 1, NULL);
    proto_msg_destroy (&result);

    //  The demoted active of epoch 19 acknowledges it and sends a command
    proto_msg_t stale_ack = {
        .type = PROTO_RESULT_ACK, .job = kept, .step = 0, .attempt = 1,
        .epoch = 19
    };
    s_send (&stale_ack);
    s_fake_clear ();
    char stale [32];
    s_new_job (stale, sizeof stale);
    const char *keys [] = {"package"};
    const char *old_values [] = {"stale-epoch"};
    const char *new_values [] = {"current-epoch"};
    proto_kv_t param = {(char *) keys [0], (char *) old_values [0], false};
    proto_msg_t command = {
        .type = PROTO_COMMAND, .job = stale, .step = 0, .attempt = 1,
        .backend = "apt", .action = "install", .params = &param,
        .param_count = 1, .timeout_ms = 30000, .epoch = 19
    };
    s_send (&command);

    //  The active's next command runs; the stale one, handled before it
    //  on the same socket, was dropped (logged) and never ran
    char current [32];
    s_new_job (current, sizeof current);
    param.value = (char *) new_values [0];
    command.job = current;
    command.epoch = 20;
    s_seen_of (current, 0, 1)->commands++;
    s_send (&command);
    result = s_result_of (current, 0, 1, NULL);
    assert_string_equal (result->status, "success");
    s_result_ack (result);
    proto_msg_destroy (&result);
    char *log = s_fake_log ();
    assert_null (strstr (log, "stale-epoch"));
    assert_non_null (strstr (log, "current-epoch"));
    free (log);
    s_seen_t *seen = s_seen_of (stale, 0, 1);
    assert_int_equal (seen->acks, 0);
    assert_false (seen->resulted);
    //  One warning for the epoch, at its first message
    assert_true (s_agent_logged ("dropped a result_ack of epoch 19"));
    assert_false (s_agent_logged ("dropped a command of epoch 19"));

    //  The epoch is kept beside the spool
    char path [600];
    snprintf (path, sizeof path, "%s/agent-%s/epoch", s_grid.dir, S_NODE);
    char *kept_epoch = grid_slurp (path);
    assert_non_null (kept_epoch);
    assert_string_equal (kept_epoch, "20\n");
    free (kept_epoch);

    //  The stale ack did not drop the result: the agent sends it again
    //  on its next session, here a failover to the active of epoch 31
    s_send (&error);
    hello = s_recv ();
    assert_non_null (hello);
    assert_int_equal (hello->type, PROTO_HELLO);
    proto_msg_destroy (&hello);
    welcome.epoch = 31;
    s_send (&welcome);
    bool resent = false;
    while (!resent) {
        result = s_recv_job (kept);
        assert_non_null (result);
        resent = result->type == PROTO_RESULT;
        if (resent) {
            proto_msg_t ack = {
                .type = PROTO_RESULT_ACK, .job = kept, .step = 0,
                .attempt = 1, .epoch = 31
            };
            s_send (&ack);
        }
        proto_msg_destroy (&result);
    }
    kept_epoch = grid_slurp (path);
    assert_non_null (kept_epoch);
    assert_string_equal (kept_epoch, "31\n");
    free (kept_epoch);
    //  The acknowledged result is gone for good
    char gone [1][32];
    snprintf (gone [0], sizeof gone [0], "%s", kept);
    s_spool_holds (NULL, gone, 1);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_agent_hello_advertises_schemas),
        cmocka_unit_test (test_it_agent_runs_a_valid_command),
        cmocka_unit_test (test_it_agent_refuses_hostile_params),
        cmocka_unit_test (test_it_agent_attempt_reaches_the_action),
        cmocka_unit_test (test_it_agent_duplicates_and_filters),
        cmocka_unit_test (test_it_agent_in_loop_result_goes_alone),
        cmocka_unit_test (test_it_agent_long_step_acks_first),
        cmocka_unit_test (test_it_agent_progress_after_idle),
        cmocka_unit_test (test_it_agent_result_acks_batched),
        cmocka_unit_test (test_it_agent_result_acks_hostile),
        cmocka_unit_test (test_it_agent_live_resent_when_due),
        cmocka_unit_test (test_it_agent_epoch_fence),
        cmocka_unit_test (test_it_agent_older_broker_hello),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
