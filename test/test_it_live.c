/*  =========================================================================
    test_it_live - the output of running tasks, live (PROTOCOL.md 4.1 rule
    8a, live_output), through a real gridbroker, real gridagents and the
    real gridcli over ipc://, and agents made by hand: job.output of a
    running step gives what has arrived, page after page from increasing
    offsets, and says when the step is complete; `gridcli job output
    --follow` and `gridcli job run --wait --follow` print every line once,
    in order (prefixed by the node with several), and exit with the
    step's code, writing it as it comes (into a pipe as well); an agent
    killed and restarted mid-stream loses and repeats nothing; an agent
    without the feature gets its output taken at the end as ever; hostile offsets, nodes and steps get clear errors;
    a broker that paces the acks of live pieces (results.output_rate)
    gets fewer, larger pieces and every byte, and loses nothing when it
    is killed mid-stream.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proto/proto.h"
#include "lib/fixture.h"

#define S_WAIT_MS 30000         //  Deadline for anything that should happen
#define S_CLI_MS 60000          //  Deadline for one gridcli run

//  "line 1\n" .. "line COUNT\n", as test lines prints them (caller frees).
static char *
s_lines (int count)
{
    char *text = (char *) calloc ((size_t) count * 16 + 1, 1);
    assert_non_null (text);
    size_t used = 0;
    for (int line = 1; line <= count; line++)
        used += (size_t) sprintf (text + used, "line %d\n", line);
    return text;
}

//  A job.output request for JOB's STEP on NODE from OFFSET (ATTEMPT 0:
//  not said); the reply (caller destroys).
static pv_doc_t *
s_page (grid_t *grid, const char *job, const char *node, int step,
        int64_t offset, int attempt)
{
    static int seq = 0;
    char id [32];
    snprintf (id, sizeof id, "live-%d", ++seq);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.output", id, attempt ? 5 : 4);
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "node");
    pw_str (writer, node);
    pw_str (writer, "step");
    pw_int (writer, step);
    pw_str (writer, "offset");
    pw_int (writer, offset);
    if (attempt) {
        pw_str (writer, "attempt");
        pw_int (writer, attempt);
    }
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     GRID_CALL_MS);
    pw_destroy (&writer);
    return reply;
}

//  Asserts REPLY is an error of CODE whose message holds TEXT; destroys it.
static void
s_assert_error (pv_doc_t *reply, const char *code, const char *text)
{
    char *got = grid_reply_code (reply);
    const pv_t *message = pv_map_get (pv_doc_root (reply), "message");
    size_t len = 0;
    const char *sentence = pv_str (message, &len);
    char *copy = sentence ? strndup (sentence, len) : strdup ("");
    if (!got || strcmp (got, code) != 0 || !strstr (copy, text))
        fail_msg ("expected error %s with '%s', got %s: '%s'", code, text,
                  got ? got : "ok/none", copy);
    free (copy);
    free (got);
    pv_doc_destroy (&reply);
}

//  Reads the stream of STEP on NODE of JOB from offset 0, page after page
//  at increasing offsets, until the step is complete (ATTEMPT 0: the one
//  the broker serves). Returns what came (caller frees); *PARTIAL_P (may
//  be NULL) gets whether a page before the end held part of it while the
//  step was not complete; *EXIT_P (may be NULL) the step's exit code.
static char *
s_read_live (grid_t *grid, const char *job, const char *node, int step,
             int attempt, bool *partial_p, int64_t *exit_p)
{
    char *text = strdup ("");
    size_t text_len = 0;
    int64_t offset = 0;
    bool partial = false;
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *reply = s_page (grid, job, node, step, offset, attempt);
        char *code = grid_reply_code (reply);
        if (code && strcmp (code, "not_found") == 0) {
            //  Not dispatched yet
            free (code);
            pv_doc_destroy (&reply);
            zclock_sleep (20);
            continue;
        }
        free (code);
        const pv_t *data = fixture_data (reply);
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (data, "data"), &len);
        int64_t got = -1, next = -1, size = -1;
        pv_get_int (pv_map_get (data, "offset"), &got);
        pv_get_int (pv_map_get (data, "next"), &next);
        pv_get_int (pv_map_get (data, "size"), &size);
        assert_int_equal (got, offset);
        assert_int_equal (next, offset + (int64_t) len);
        bool complete = false;
        assert_int_equal (pv_get_bool (pv_map_get (data, "complete"),
                                       &complete), 0);
        text = (char *) realloc (text, text_len + len + 1);
        memcpy (text + text_len, bytes, len);
        text_len += len;
        text [text_len] = 0;
        offset = next;
        if (!complete && text_len > 0)
            partial = true;
        if (complete && next == size) {
            assert_true (grid_str_is (data, "status", "success"));
            if (exit_p)
                assert_int_equal (pv_get_int (pv_map_get (data, "exit_code"),
                                              exit_p), 0);
            pv_doc_destroy (&reply);
            if (partial_p)
                *partial_p = partial;
            return text;
        }
        if (!complete)
            assert_null (pv_map_get (data, "exit_code"));
        pv_doc_destroy (&reply);
        zclock_sleep (20);
    }
    fail_msg ("job %s step %d on %s did not complete", job, step, node);
    return NULL;
}

//  Submits `test lines` of COUNT lines every INTERVAL on TARGET (with
//  RETRIES extra attempts); the job id (caller frees).
static char *
s_submit_lines (grid_t *grid, const char *target, int count,
                const char *interval, int retries)
{
    char yaml [512];
    snprintf (yaml, sizeof yaml,
              "target: %s\n"
              "tasks:\n"
              "  - {backend: test, action: lines, max_retries: %d,\n"
              "     params: {count: %d, interval: %s}}\n",
              target, retries, count, interval);
    char *job = grid_submit_id (grid, yaml);
    assert_non_null (job);
    return job;
}

static int
s_setup (void **state)
{
    if (fixture_setup (state))
        return -1;
    grid_t *grid = (grid_t *) *state;
    if (grid_start_broker (grid, NULL) != 0
        || grid_start_agent (grid, "web-01", "web", NULL, NULL) < 0
        || grid_start_agent (grid, "web-02", "web", NULL, NULL) < 0) {
        grid_dump_logs (grid);
        fixture_teardown (state);
        return -1;
    }
    return 0;
}

//  job.output of a running `test lines` gives its output so far, from
//  increasing offsets, before the step ends; the whole of it once, in
//  order, when it has; the step's status and exit code then.
static void
test_it_live_pages (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_submit_lines (grid, "node:web-01", 20, "100ms", 0);
    bool partial = false;
    int64_t exit_code = -1;
    char *text = s_read_live (grid, job, "web-01", 0, 0, &partial,
                              &exit_code);
    char *want = s_lines (20);
    assert_string_equal (text, want);
    assert_true (partial);
    assert_int_equal (exit_code, 0);
    //  The finished step reads the same from the start
    pv_doc_t *reply = s_page (grid, job, "web-01", 0, 0, 0);
    const pv_t *data = fixture_data (reply);
    size_t len = 0;
    const char *bytes = pv_str (pv_map_get (data, "data"), &len);
    assert_int_equal (len, strlen (want));
    assert_memory_equal (bytes, want, len);
    pv_doc_destroy (&reply);
    free (want);
    free (text);
    free (job);
}

//  `gridcli job output --follow` of a running step prints every line
//  once, in order, and exits 0; of a failing step, exits 1.
static void
test_it_live_follow (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_submit_lines (grid, "node:web-01", 20, "100ms", 0);
    //  Once the step has started
    const char *nodes [] = { "web-01", NULL };
    assert_true (fixture_wait_cells (grid, job, 0, nodes,
                                     "acknowledged|running|success",
                                     S_WAIT_MS));
    char *out = NULL, *err = NULL;
    int rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "output", job,
                       "--node", "web-01", "--step", "0", "--follow", NULL);
    char *want = s_lines (20);
    if (rc != 0)
        fprintf (stderr, "%s", err);
    assert_int_equal (rc, 0);
    assert_string_equal (out, want);
    free (out);
    free (err);
    free (job);

    //  At once after the submit, without --node or --step: the job's only
    //  node, its first step, waited for
    job = s_submit_lines (grid, "node:web-01", 20, "100ms", 0);
    rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "output", job,
                   "--follow", NULL);
    if (rc != 0)
        fprintf (stderr, "%s", err);
    assert_int_equal (rc, 0);
    assert_string_equal (out, want);
    free (out);
    free (err);
    free (job);

    //  Without --follow, of a running step: what came so far, and a note
    job = s_submit_lines (grid, "node:web-01", 30, "100ms", 0);
    assert_true (fixture_wait_cells (grid, job, 0, nodes, "running",
                                     S_WAIT_MS));
    rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "output", job, NULL);
    assert_int_equal (rc, 0);
    char *all = s_lines (30);
    //  A part from the first line on (the whole when the machine was slow)
    assert_memory_equal (out, all, strlen (out));
    if (strlen (out) < strlen (all))
        assert_non_null (strstr (err, "still runs on web-01"));
    free (all);
    free (out);
    free (err);
    free (job);

    //  A step that fails: its code
    job = grid_submit_id (grid, "target: node:web-01\n"
                                "tasks:\n"
                                "  - {backend: test, action: fail, params: "
                                "{msg: broken}}\n");
    assert_non_null (job);
    rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "output", job,
                   "--node", "web-01", "--step", "0", "--stderr", "--follow",
                   NULL);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (out, "broken"));
    free (out);
    free (err);
    free (job);

    //  job run --wait --follow on one node: the lines, then the table
    rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--target",
                   "node:web-01", "--wait", "--follow", "test", "lines",
                   "--count", "20", "--interval", "100ms", NULL);
    if (rc != 0)
        fprintf (stderr, "%s", err);
    assert_int_equal (rc, 0);
    assert_memory_equal (out, want, strlen (want));
    assert_non_null (strstr (out + strlen (want), "completed"));
    free (out);
    free (err);
    free (want);
}

//  Starts `gridcli job output JOB --follow` with its standard output in
//  the file PATH (not a terminal, as when piped to grep). Returns its pid.
static pid_t
s_follow_into (grid_t *grid, const char *job, const char *path)
{
    char gridcli [700];
    snprintf (gridcli, sizeof gridcli, "%s/gridcli", grid->bin);
    pid_t pid = fork ();
    if (pid == 0) {
        int out = open (path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (out < 0)
            _exit (127);
        dup2 (out, 1);
        close (out);
        unsetenv ("GRID_BROKER");
        unsetenv ("GRID_CONFIG");
        unsetenv ("GRID_KEY");
        unsetenv ("GRID_BROKER_KEY");
        setenv ("HOME", grid->dir, 1);
        if (grid->insecure)
            execl (gridcli, "gridcli", "--broker", grid->client_ep,
                   "--insecure", "job", "output", job, "--follow", NULL);
        else
            execl (gridcli, "gridcli", "--broker", grid->client_ep, "--key",
                   grid->admin_key, "--broker-key", grid->broker_key, "job",
                   "output", job, "--follow", NULL);
        _exit (127);
    }
    return pid;
}

//  gridcli job output --follow into a file or a pipe writes each piece as
//  it comes, not all at its exit.
static void
test_it_live_follow_piped (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_submit_lines (grid, "node:web-01", 20, "500ms", 0);
    char path [600];
    snprintf (path, sizeof path, "%s/follow.out", grid->dir);
    pid_t pid = s_follow_into (grid, job, path);
    assert_true (pid > 0);
    //  The first line is in the file while gridcli still follows
    bool early = false;
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (!early && grid_now_ms () < deadline) {
        char *text = grid_slurp (path);
        early = strncmp (text, "line 1\n", 7) == 0;
        free (text);
        int status;
        if (!early && waitpid (pid, &status, WNOHANG) == pid) {
            pid = 0;
            break;
        }
        zclock_sleep (50);
    }
    int status = -1;
    bool running = pid > 0 && waitpid (pid, &status, WNOHANG) == 0;
    if (!early || !running) {
        char *text = grid_slurp (path);
        fprintf (stderr, "gridcli wrote \"%s\" %s\n", text,
                 running ? "(still following)" : "(exited)");
        free (text);
        if (running)
            grid_kill (pid, SIGKILL);
    }
    assert_true (early);
    assert_true (running);
    //  Then the rest, and the step's code
    deadline = grid_now_ms () + S_CLI_MS;
    while (waitpid (pid, &status, WNOHANG) == 0) {
        if (grid_now_ms () >= deadline) {
            grid_kill (pid, SIGKILL);
            fail_msg ("gridcli job output --follow did not end");
        }
        zclock_sleep (50);
    }
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    char *text = grid_slurp (path);
    char *want = s_lines (20);
    assert_string_equal (text, want);
    free (want);
    free (text);
    free (job);
}

//  With several nodes every line comes once, after its node, in order
//  for each node.
static void
test_it_live_follow_nodes (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *out = NULL, *err = NULL;
    int rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--target",
                       "group:web", "--wait", "--follow", "test", "lines",
                       "--count", "20", "--interval", "100ms", NULL);
    if (rc != 0)
        fprintf (stderr, "%s", err);
    assert_int_equal (rc, 0);
    const char *node_names [] = { "web-01", "web-02" };
    for (size_t node = 0; node < 2; node++) {
        const char *cursor = out;
        for (int line = 1; line <= 20; line++) {
            char text [64];
            snprintf (text, sizeof text, "%s | line %d\n", node_names [node],
                      line);
            const char *found = strstr (cursor, text);
            if (!found)
                fail_msg ("'%s' missing or out of order in:\n%s", text, out);
            //  Exactly once
            assert_null (strstr (found + 1, text));
            cursor = found + strlen (text);
        }
    }
    free (out);
    free (err);
}

//  An agent killed mid-stream and started again: the step's attempt that
//  it ran holds each line it printed once, in order (nothing repeated,
//  nothing lost that went out), and the retried attempt every line once.
static void
test_it_live_agent_killed (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_submit_lines (grid, "node:web-01", 20, "100ms", 1);
    //  Until part of it has arrived
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    int64_t arrived = 0;
    while (arrived < 14 && grid_now_ms () < deadline) {
        pv_doc_t *reply = s_page (grid, job, "web-01", 0, 0, 0);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data))
            pv_get_int (pv_map_get (data, "size"), &arrived);
        pv_doc_destroy (&reply);
        zclock_sleep (20);
    }
    assert_true (arrived >= 14);     //  "line 1\nline 2\n"
    int slot = -1;
    for (size_t index = 0; index < grid->agent_count; index++)
        if (strcmp (grid->agent_ids [index], "web-01") == 0)
            slot = (int) index;
    assert_true (slot >= 0);
    grid_stop_agent (grid, slot, true);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    pv_doc_t *doc = grid_wait_job (grid, job, S_WAIT_MS);
    const pv_t *record = NULL;
    assert_true (grid_reply_ok (doc, &record));
    pv_doc_destroy (&doc);
    //  The first attempt: a run of whole lines from the first, each once
    pv_doc_t *reply = s_page (grid, job, "web-01", 0, 0, 1);
    const pv_t *data = fixture_data (reply);
    size_t len = 0;
    const char *bytes = pv_str (pv_map_get (data, "data"), &len);
    char *first = strndup (bytes, len);
    pv_doc_destroy (&reply);
    assert_true (strlen (first) >= 14);
    char *all = s_lines (20);
    //  Only whole lines are compared: the kill may cut one
    char *last_newline = strrchr (first, '\n');
    assert_non_null (last_newline);
    last_newline [1] = 0;
    assert_memory_equal (first, all, strlen (first));
    free (first);
    //  The attempt that ran to the end: every line once
    char *text = s_read_live (grid, job, "web-01", 0, 2, NULL, NULL);
    assert_string_equal (text, all);
    free (text);
    free (all);
    free (job);
}

//  An agent without live_output (the release before) gets no grant; its
//  pieces at other offsets than a whole output's are refused; its
//  output is there when its result is. One that names the feature gets
//  it, and its pieces are served while its step runs; a piece that would
//  lie over another is refused.
static void
test_it_live_negotiated (void **state)
{
    grid_t *grid = (grid_t *) *state;
    proto_msg_t *welcome = NULL;
    zsock_t *old = fixture_agent (grid, "old-01", 2, NULL, &welcome);
    for (size_t index = 0; index < welcome->feature_count; index++)
        assert_string_not_equal (welcome->features [index],
                                 PROTO_FEATURE_LIVE_OUTPUT);
    proto_msg_destroy (&welcome);
    zsock_t *live = fixture_agent (grid, "live-01", 3, NULL, &welcome);
    bool granted = false;
    for (size_t index = 0; index < welcome->feature_count; index++)
        granted = granted || strcmp (welcome->features [index],
                                     PROTO_FEATURE_LIVE_OUTPUT) == 0;
    assert_true (granted);
    proto_msg_destroy (&welcome);

    char jobs [2][32];
    const char *names [] = { "old-01", "live-01" };
    zsock_t *dealers [] = { old, live };
    for (size_t index = 0; index < 2; index++) {
        char yaml [256];
        snprintf (yaml, sizeof yaml, "target: node:%s\ntasks:\n"
                  "  - {backend: test, action: echo, params: {msg: x}}\n",
                  names [index]);
        char *id = grid_submit_id (grid, yaml);
        assert_non_null (id);
        snprintf (jobs [index], 32, "%s", id);
        free (id);
        fixture_take_commands (dealers [index], &jobs [index], 1, S_WAIT_MS);
        proto_msg_t ack = {
            .type = PROTO_ACK, .node = (char *) names [index],
            .job = jobs [index], .step = 0, .attempt = 1
        };
        fixture_send (dealers [index], &ack);
    }
    //  Pieces of 5 and 3 bytes while the step runs
    for (size_t index = 0; index < 2; index++) {
        proto_msg_t piece = {
            .type = PROTO_OUTPUT, .node = (char *) names [index],
            .job = jobs [index], .step = 0, .attempt = 1,
            .stream = "stdout", .offset = 0, .chunk = (uint8_t *) "hello",
            .chunk_len = 5, .size = 5
        };
        fixture_send (dealers [index], &piece);
        proto_msg_destroy (&welcome);
        proto_msg_t *ack = fixture_recv_type (dealers [index],
                                              PROTO_OUTPUT_ACK, S_WAIT_MS);
        assert_non_null (ack);
        proto_msg_destroy (&ack);
        piece.offset = 5;
        piece.chunk = (uint8_t *) " yo";
        piece.chunk_len = 3;
        piece.size = 8;
        fixture_send (dealers [index], &piece);
        ack = fixture_recv_type (dealers [index], PROTO_OUTPUT_ACK, S_WAIT_MS);
        assert_non_null (ack);
        assert_int_equal (ack->offset, 5);
        proto_msg_destroy (&ack);
        //  Over the first: refused (acknowledged, not kept)
        piece.offset = 2;
        piece.chunk = (uint8_t *) "XXXXXX";
        piece.chunk_len = 6;
        fixture_send (dealers [index], &piece);
        ack = fixture_recv_type (dealers [index], PROTO_OUTPUT_ACK, S_WAIT_MS);
        assert_non_null (ack);
        proto_msg_destroy (&ack);
    }
    //  The old agent's piece at 0 is kept (a whole output's first), the
    //  others not; the live one's are served while it runs
    const char *want [] = { "hello", "hello yo" };
    for (size_t index = 0; index < 2; index++) {
        pv_doc_t *reply = s_page (grid, jobs [index], names [index], 0, 0, 0);
        const pv_t *data = fixture_data (reply);
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (data, "data"), &len);
        assert_int_equal (len, strlen (want [index]));
        assert_memory_equal (bytes, want [index], len);
        bool complete = true;
        assert_int_equal (pv_get_bool (pv_map_get (data, "complete"),
                                       &complete), 0);
        assert_false (complete);
        pv_doc_destroy (&reply);
        //  Past what has arrived
        s_assert_error (s_page (grid, jobs [index], names [index], 0, 100, 0),
                        "bad_request", "past the end");
    }
    //  The results: the old agent's output whole in the result, the live
    //  one's in the pieces it sent (its result says their size)
    for (size_t index = 0; index < 2; index++) {
        proto_msg_t result = {
            .type = PROTO_RESULT, .node = (char *) names [index],
            .job = jobs [index], .step = 0, .attempt = 1,
            .status = "success", .output = index ? "hello yo" : "the end",
            .error = "", .exit_code = 0, .duration_ms = 1,
            .output_size = index ? 8 : 0
        };
        fixture_send (dealers [index], &result);
    }
    const char *final [] = { "the end", "hello yo" };
    for (size_t index = 0; index < 2; index++) {
        pv_doc_t *doc = grid_wait_job (grid, jobs [index], S_WAIT_MS);
        pv_doc_destroy (&doc);
        pv_doc_t *reply = s_page (grid, jobs [index], names [index], 0, 0, 0);
        const pv_t *data = fixture_data (reply);
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (data, "data"), &len);
        assert_int_equal (len, strlen (final [index]));
        assert_memory_equal (bytes, final [index], len);
        bool complete = false;
        assert_int_equal (pv_get_bool (pv_map_get (data, "complete"),
                                       &complete), 0);
        assert_true (complete);
        int64_t exit_code = -1;
        assert_int_equal (pv_get_int (pv_map_get (data, "exit_code"),
                                      &exit_code), 0);
        assert_int_equal (exit_code, 0);
        pv_doc_destroy (&reply);
    }
    fixture_agents_forget ();
}

//  Hostile pages: past the end, negative, a node or step the job does
//  not have, a node id that is none, through the API and gridcli.
static void
test_it_live_hostile (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_submit_lines (grid, "node:web-01", 3, "0ms", 0);
    pv_doc_t *doc = grid_wait_job (grid, job, S_WAIT_MS);
    pv_doc_destroy (&doc);
    s_assert_error (s_page (grid, job, "web-01", 0, 22, 0), "bad_request",
                    "past the end");
    s_assert_error (s_page (grid, job, "web-01", 0, -1, 0), "bad_request",
                    "offset");
    s_assert_error (s_page (grid, job, "web 01", 0, 0, 0), "bad_request",
                    "not a node id");
    s_assert_error (s_page (grid, job, "web-02", 0, 0, 0), "not_found",
                    "web-02");
    s_assert_error (s_page (grid, job, "web-01", 5, 0, 0), "not_found",
                    "there is no step 5");
    //  At the end exactly: an empty last page
    pv_doc_t *reply = s_page (grid, job, "web-01", 0, 21, 0);
    const pv_t *data = fixture_data (reply);
    assert_int_equal (pv_size (pv_map_get (data, "data")), 0);
    pv_doc_destroy (&reply);

    char *out = NULL, *err = NULL;
    int rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "output", job,
                       "--node", "web-03", "--step", "0", "--follow", NULL);
    assert_int_equal (rc, 4);
    assert_non_null (strstr (err, "web-03"));
    free (out);
    free (err);
    rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--target",
                   "node:web-01", "--follow", "test", "lines", "--count",
                   "2", NULL);
    assert_int_equal (rc, 2);
    assert_non_null (strstr (err, "--wait"));
    free (out);
    free (err);
    rc = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json", "job",
                   "run", "--target", "node:web-01", "--wait", "--follow",
                   "test", "lines", "--count", "2", NULL);
    assert_int_equal (rc, 2);
    assert_non_null (strstr (err, "--follow"));
    free (out);
    free (err);
    //  The agent's output_rate: in range, or refused by name
    char path [400];
    snprintf (path, sizeof path, "%s/live-agent.yaml", grid->dir);
    const char *rates [] = { "output_rate: 10001\n", "output_rate: -1\n",
                             "output_rate: many\n", "output_rate: 7\n" };
    for (size_t index = 0; index < 4; index++) {
        FILE *file = fopen (path, "w");
        assert_non_null (file);
        fputs (rates [index], file);
        fclose (file);
        rc = grid_run (grid, "gridagent", &out, &err, S_CLI_MS, "--config",
                       path, "--print-config", NULL);
        if (index < 3) {
            assert_int_not_equal (rc, 0);
            assert_non_null (strstr (err, "output_rate"));
        }
        else {
            assert_int_equal (rc, 0);
            assert_non_null (strstr (out, "output_rate: 7"));
        }
        free (out);
        free (err);
    }
    rc = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--target",
                   "node:web-01", "test", "lines", "--count", "2",
                   "--interval", "soon", NULL);
    assert_int_equal (rc, 4);
    assert_non_null (strstr (err, "interval"));
    free (out);
    free (err);
    free (job);
}

//  A broker that stops for a second while a task prints a line every
//  10 ms gets fewer, larger pieces after it: the agent keeps one piece
//  in flight and coalesces what came meanwhile. Every byte arrives once,
//  in order, the pieces end to end.
static void
test_it_live_coalesced (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char *job = s_submit_lines (grid, "node:web-01", 200, "10ms", 0);
    //  Once the first piece is there, the broker stops for a second
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *reply = s_page (grid, job, "web-01", 0, 0, 0);
        const pv_t *data = fixture_data (reply);
        size_t len = 0;
        bool some = data && pv_str (pv_map_get (data, "data"), &len) && len;
        pv_doc_destroy (&reply);
        if (some)
            break;
        zclock_sleep (20);
    }
    assert_int_equal (grid_kill (grid->broker_pid, SIGSTOP), 0);
    zclock_sleep (1000);
    assert_int_equal (grid_kill (grid->broker_pid, SIGCONT), 0);
    char *text = s_read_live (grid, job, "web-01", 0, 0, NULL, NULL);
    char *want = s_lines (200);
    assert_string_equal (text, want);
    //  The pieces as they arrived
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.output_events", "events-1", 1);
    pw_str (writer, "job");
    pw_str (writer, job);
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     GRID_CALL_MS);
    pw_destroy (&writer);
    const pv_t *events = pv_map_get (fixture_data (reply), "events");
    assert_non_null (events);
    size_t count = pv_size (events);
    uint64_t end = 0;
    size_t largest = 0;
    for (size_t index = 0; index < count; index++) {
        const pv_t *event = pv_array_at (events, index);
        int64_t offset = -1;
        assert_int_equal (pv_get_int (pv_map_get (event, "offset"),
                                      &offset), 0);
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (event, "data"), &len);
        assert_non_null (bytes);
        //  End to end: each starts where the last ended, nothing twice
        assert_int_equal ((uint64_t) offset, end);
        assert_memory_equal (bytes, want + offset, len);
        end += len;
        if (len > largest)
            largest = len;
    }
    assert_int_equal (end, strlen (want));
    //  A piece carries what printed while the broker stood (about 100
    //  lines of 9 or 10 bytes); one round's worth is about ten lines
    if (largest < 300)
        fail_msg ("no coalesced piece: %zu pieces, the largest %zu bytes",
                  count, largest);
    assert_true (count < 200);
    pv_doc_destroy (&reply);
    free (want);
    free (text);
    free (job);
}

//  The value of the counter NAME in `gridcli metrics`.
static double
s_metric (grid_t *grid, const char *name)
{
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (grid, &out, &err, S_CLI_MS, "metrics", NULL),
                      0);
    char *line = strstr (out, name);
    while (line && line != out && line [-1] != '\n')
        line = strstr (line + 1, name);
    assert_non_null (line);
    double value = strtod (line + strlen (name), NULL);
    free (out);
    free (err);
    return value;
}

//  A broker whose results.output_rate is 2 (acks of live pieces a second,
//  the whole fleet) while two agents print a line every 10 ms for 1.5 s:
//  the acks wait their turn, so each agent sends a few large pieces
//  instead of one every 100 ms (about 15 each otherwise); every byte of
//  both streams arrives once, in order, end to end; the metrics count
//  the acks held. A rate out of range is refused by name; SIGHUP with
//  a rate of 0 lifts the pace.
static void
test_it_live_paced (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char path [400];
    snprintf (path, sizeof path, "%s/paced.yaml", grid->dir);
    char *out = NULL, *err = NULL;
    //  Out of range or not a number: refused by name
    const char *bad [] = {"-1", "1000001", "many"};
    for (size_t index = 0; index < 3; index++) {
        FILE *file = fopen (path, "w");
        assert_non_null (file);
        fprintf (file, "results:\n  output_rate: %s\n", bad [index]);
        fclose (file);
        assert_int_not_equal (grid_run (grid, "gridbroker", &out, &err,
                                        S_CLI_MS, "--config", path,
                                        "--print-config", NULL), 0);
        assert_non_null (strstr (err, "output_rate"));
        free (out);
        free (err);
    }
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "results:\n  output_rate: 2\n");
    fclose (file);
    grid_stop_broker (grid, false);
    const char *extra [] = {"--config", path, NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_wait_node (grid, "web-01", "online", S_WAIT_MS));
    assert_true (grid_wait_node (grid, "web-02", "online", S_WAIT_MS));
    assert_int_equal (grid_run (grid, "gridbroker", &out, &err, S_CLI_MS,
                                "--config", path, "--print-config", NULL),
                      0);
    assert_non_null (strstr (out, "output_rate: 2"));
    free (out);
    free (err);
    assert_true (s_metric (grid, "grid_output_acks_paced_total ") == 0);

    char *job = s_submit_lines (grid, "group:web", 150, "10ms", 0);
    char *want = s_lines (150);
    const char *nodes [] = {"web-01", "web-02"};
    for (size_t at = 0; at < 2; at++) {
        char *text = s_read_live (grid, job, nodes [at], 0, 0, NULL, NULL);
        assert_string_equal (text, want);
        free (text);
    }
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.output_events", "events-1", 1);
    pw_str (writer, "job");
    pw_str (writer, job);
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     GRID_CALL_MS);
    pw_destroy (&writer);
    const pv_t *events = pv_map_get (fixture_data (reply), "events");
    assert_non_null (events);
    uint64_t end [2] = {0, 0};
    size_t pieces [2] = {0, 0};
    for (size_t index = 0; index < pv_size (events); index++) {
        const pv_t *event = pv_array_at (events, index);
        size_t at = grid_str_is (event, "node", "web-01") ? 0 : 1;
        int64_t offset = -1;
        assert_int_equal (pv_get_int (pv_map_get (event, "offset"),
                                      &offset), 0);
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (event, "data"), &len);
        assert_non_null (bytes);
        assert_int_equal ((uint64_t) offset, end [at]);
        assert_memory_equal (bytes, want + offset, len);
        end [at] += len;
        pieces [at]++;
    }
    for (size_t at = 0; at < 2; at++) {
        assert_int_equal (end [at], strlen (want));
        if (pieces [at] > 8)
            fail_msg ("%s sent %zu pieces at 2 acks a second", nodes [at],
                      pieces [at]);
    }
    pv_doc_destroy (&reply);
    double paced = s_metric (grid, "grid_output_acks_paced_total ");
    assert_true (paced > 0);
    free (job);

    //  SIGHUP with output_rate 0: no ack waits any more, every byte still
    //  arrives
    file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "results:\n  output_rate: 0\n");
    fclose (file);
    assert_int_equal (grid_kill (grid->broker_pid, SIGHUP), 0);
    char log_path [400];
    snprintf (log_path, sizeof log_path, "%s/broker.log", grid->dir);
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    bool reloaded = false;
    while (!reloaded && grid_now_ms () < deadline) {
        char *text = NULL;
        size_t size = 0;
        FILE *log = fopen (log_path, "r");
        if (log) {
            FILE *copy = open_memstream (&text, &size);
            char buffer [4096];
            size_t got;
            while ((got = fread (buffer, 1, sizeof buffer, log)) > 0)
                fwrite (buffer, 1, got, copy);
            fclose (copy);
            fclose (log);
            reloaded = strstr (text, "results.output_rate 0") != NULL;
            free (text);
        }
        if (!reloaded)
            zclock_sleep (20);
    }
    assert_true (reloaded);
    job = s_submit_lines (grid, "group:web", 50, "10ms", 0);
    for (size_t at = 0; at < 2; at++) {
        char *text = s_read_live (grid, job, nodes [at], 0, 0, NULL, NULL);
        char *fifty = s_lines (50);
        assert_string_equal (text, fifty);
        free (fifty);
        free (text);
    }
    assert_true (s_metric (grid, "grid_output_acks_paced_total ") == paced);
    free (want);
    free (job);
}

//  A broker SIGKILLed while two agents stream, its acks of live pieces
//  held (results.output_rate 5): started again, it has each stream
//  whole, in order, nothing twice, for the attempt that ran (the agents
//  kept every piece it had not acknowledged, and send them again).
static void
test_it_live_broker_killed (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char path [400];
    snprintf (path, sizeof path, "%s/paced.yaml", grid->dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "results:\n  output_rate: 5\n");
    fclose (file);
    grid_stop_broker (grid, false);
    const char *extra [] = {"--config", path, NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_wait_node (grid, "web-01", "online", S_WAIT_MS));
    assert_true (grid_wait_node (grid, "web-02", "online", S_WAIT_MS));
    char *job = s_submit_lines (grid, "group:web", 200, "10ms", 0);
    int64_t deadline = grid_now_ms () + S_WAIT_MS;
    int64_t arrived = 0;
    while (arrived < 100 && grid_now_ms () < deadline) {
        pv_doc_t *reply = s_page (grid, job, "web-02", 0, 0, 0);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data))
            pv_get_int (pv_map_get (data, "size"), &arrived);
        pv_doc_destroy (&reply);
        zclock_sleep (10);
    }
    assert_true (arrived >= 100);
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, extra), 0);
    pv_doc_t *doc = grid_wait_job (grid, job, S_WAIT_MS);
    const pv_t *record = NULL;
    assert_true (grid_reply_ok (doc, &record));
    assert_true (grid_str_is (record, "status", "completed"));
    pv_doc_destroy (&doc);
    char *want = s_lines (200);
    const char *nodes [] = {"web-01", "web-02"};
    for (size_t at = 0; at < 2; at++) {
        char *text = s_read_live (grid, job, nodes [at], 0, 1, NULL, NULL);
        assert_string_equal (text, want);
        free (text);
    }
    free (want);
    free (job);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_live_pages, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_follow, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_follow_piped, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_follow_nodes, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_agent_killed, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_negotiated, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_hostile, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_coalesced, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_paced, s_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_live_broker_killed, s_setup,
                                         fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
