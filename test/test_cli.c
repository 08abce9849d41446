/*  =========================================================================
    test_cli - gridcli: parsing, settings, requests, rendering, transport

    Parsing, settings, request building and rendering are tested without
    sockets. The transport tests talk to nothing (an ipc:// path in a temp
    dir where no one listens) or to a small fake broker: a ROUTER in a
    CZMQ actor that answers from a script, checks every request with
    proto_request_decode, and records the ids it saw.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <czmq.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cli/cli.h"
#include "../cli/cmd.h"
#include "../cli/render.h"
#include "../proto/conf.h"
#include "../proto/job.h"
#include "../proto/keys.h"
#include "../proto/names.h"
#include "../proto/proto.h"
#include "../proto/pv.h"
#include "../proto/pw.h"

#define JOB_ID "j-0193a1b2c3d4-0001"

static char s_dir [256];     //  Temp dir of the whole group

//  ---------------------------------------------------------------------
//  Helpers

static char *
s_path (const char *name)
{
    static char path [512];
    snprintf (path, sizeof path, "%s/%s", s_dir, name);
    return path;
}

static void
s_write_file (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
}

//  Parses a command line given as a NULL-terminated list of words.
static int
s_parse (cli_args_t *args, char *err, size_t err_len, ...)
{
    char *argv [64];
    int argc = 0;
    argv [argc++] = "gridcli";
    va_list list;
    va_start (list, err_len);
    char *word;
    while ((word = va_arg (list, char *)) && argc < 63)
        argv [argc++] = word;
    va_end (list);
    argv [argc] = NULL;
    return cli_args_parse (args, argc, argv, err, err_len);
}

//  Output captured in memory
typedef struct {
    char *text;
    size_t size;
    FILE *file;
} s_capture_t;

static void
s_capture_open (s_capture_t *capture)
{
    capture->text = NULL;
    capture->size = 0;
    capture->file = open_memstream (&capture->text, &capture->size);
    assert_non_null (capture->file);
}

static const char *
s_capture_close (s_capture_t *capture)
{
    fclose (capture->file);
    capture->file = NULL;
    return capture->text;
}

//  A minimal JSON checker (RFC 8259 grammar): returns the end of one
//  value starting at TEXT, or NULL.
static const char *s_json_value (const char *text);

static const char *
s_json_ws (const char *text)
{
    while (*text == ' ' || *text == '\n' || *text == '\r' || *text == '\t')
        text++;
    return text;
}

static const char *
s_json_string (const char *text)
{
    if (*text++ != '"')
        return NULL;
    while (*text && *text != '"') {
        if ((unsigned char) *text < 0x20)
            return NULL;
        if (*text == '\\') {
            text++;
            if (*text == 'u') {
                for (int digit = 1; digit <= 4; digit++)
                    if (!strchr ("0123456789abcdefABCDEF", text [digit])
                    ||  !text [digit])
                        return NULL;
                text += 4;
            }
            else
            if (!*text || !strchr ("\"\\/bfnrt", *text))
                return NULL;
        }
        text++;
    }
    return *text == '"' ? text + 1 : NULL;
}

static const char *
s_json_value (const char *text)
{
    text = s_json_ws (text);
    if (*text == '{' || *text == '[') {
        char close = *text == '{' ? '}' : ']';
        bool object = *text == '{';
        text = s_json_ws (text + 1);
        if (*text == close)
            return text + 1;
        while (true) {
            if (object) {
                text = s_json_string (s_json_ws (text));
                if (!text)
                    return NULL;
                text = s_json_ws (text);
                if (*text++ != ':')
                    return NULL;
            }
            text = s_json_value (text);
            if (!text)
                return NULL;
            text = s_json_ws (text);
            if (*text == close)
                return text + 1;
            if (*text++ != ',')
                return NULL;
        }
    }
    if (*text == '"')
        return s_json_string (text);
    if (strncmp (text, "true", 4) == 0)
        return text + 4;
    if (strncmp (text, "false", 5) == 0)
        return text + 5;
    if (strncmp (text, "null", 4) == 0)
        return text + 4;
    char *end = NULL;
    if (*text == '-' || (*text >= '0' && *text <= '9')) {
        strtod (text, &end);
        return end;
    }
    return NULL;
}

static bool
s_json_valid (const char *text)
{
    const char *end = s_json_value (text);
    return end && *s_json_ws (end) == 0;
}

//  A result cell
static void
s_write_cell (pw_t *w, const char *status, const char *output,
              const char *error, int exit_code, int duration_ms,
              int attempts)
{
    pw_map (w, 7);
    pw_str (w, "status");
    pw_str (w, status);
    pw_str (w, "output");
    pw_str (w, output);
    pw_str (w, "error");
    pw_str (w, error);
    pw_str (w, "exit_code");
    pw_int (w, exit_code);
    pw_str (w, "duration_ms");
    pw_int (w, duration_ms);
    pw_str (w, "attempts");
    pw_int (w, attempts);
    pw_str (w, "truncated");
    pw_bool (w, false);
}

//  A job record: steps [test echo, branch [test sleep, test fail]] on
//  web-01 and web-02. When FINISHED, web-02 failed step 3 (of 3) with
//  exit 1 and the job has STATUS; else step 3 is running on both.
static void
s_write_record (pw_t *w, const char *status, bool finished)
{
    pw_map (w, 13);
    pw_str (w, "id");
    pw_str (w, JOB_ID);
    pw_str (w, "target");
    pw_map (w, 2);
    pw_str (w, "scope");
    pw_str (w, "group");
    pw_str (w, "value");
    pw_str (w, "web");
    pw_str (w, "tasks");
    pw_array (w, 2);
    pw_map (w, 3);
    pw_str (w, "backend");
    pw_str (w, "test");
    pw_str (w, "action");
    pw_str (w, "echo");
    pw_str (w, "params");
    pw_map (w, 1);
    pw_str (w, "msg");
    pw_str (w, "hi");
    pw_map (w, 1);
    pw_str (w, "tasks");
    pw_array (w, 2);
    pw_map (w, 2);
    pw_str (w, "backend");
    pw_str (w, "test");
    pw_str (w, "action");
    pw_str (w, "sleep");
    pw_map (w, 2);
    pw_str (w, "backend");
    pw_str (w, "test");
    pw_str (w, "action");
    pw_str (w, "fail");
    pw_str (w, "strategy");
    pw_str (w, "continue");
    pw_str (w, "priority");
    pw_int (w, 0);
    pw_str (w, "status");
    pw_str (w, status);
    pw_str (w, "step");
    pw_int (w, 2);
    pw_str (w, "steps");
    pw_int (w, 3);
    pw_str (w, "expected");
    pw_array (w, 2);
    pw_str (w, "web-01");
    pw_str (w, "web-02");
    pw_str (w, "reason");
    pw_str (w, finished ? "1 of 2 nodes failed" : "");
    pw_str (w, "results");
    pw_map (w, 3);
    pw_str (w, "0");
    pw_map (w, 2);
    pw_str (w, "web-01");
    s_write_cell (w, "success", "hi\n", "", 0, 12, 1);
    pw_str (w, "web-02");
    s_write_cell (w, "success", "hi\n", "", 0, 15, 1);
    pw_str (w, "1");
    pw_map (w, 2);
    pw_str (w, "web-01");
    s_write_cell (w, "success", "", "", 0, 1500, 1);
    pw_str (w, "web-02");
    s_write_cell (w, "success", "", "", 0, 1480, 1);
    pw_str (w, "2");
    pw_map (w, 2);
    pw_str (w, "web-01");
    if (finished)
        s_write_cell (w, "success", "fine\nsecond line\n", "", 0, 20, 1);
    else
        s_write_cell (w, "running", "", "", -1, 0, 1);
    pw_str (w, "web-02");
    if (finished)
        s_write_cell (w, "failed", "", "boom: \x1b[31mdisk full\nmore\n",
                      1, 30, 2);
    else
        s_write_cell (w, "running", "", "", -1, 0, 1);
    pw_str (w, "created_at");
    pw_str (w, "2026-11-21T07:00:51.123Z");
    pw_str (w, "updated_at");
    pw_str (w, "2026-11-21T07:01:09.870Z");
}

//  The job.progress answer that matches s_write_record's job.
static void
s_write_progress (pw_t *w, const char *status, bool finished)
{
    pw_map (w, 8);
    pw_str (w, "id");
    pw_str (w, JOB_ID);
    pw_str (w, "status");
    pw_str (w, status);
    pw_str (w, "step");
    pw_int (w, 2);
    pw_str (w, "steps");
    pw_int (w, 3);
    pw_str (w, "nodes");
    pw_int (w, 2);
    pw_str (w, "done");
    pw_int (w, finished ? 2 : 0);
    pw_str (w, "failed");
    pw_int (w, finished ? 1 : 0);
    pw_str (w, "cells");
    pw_map (w, 1);
    pw_str (w, finished ? "success" : "running");
    pw_int (w, 2);
}

static pv_doc_t *
s_decode (pw_t *w)
{
    pv_doc_t *doc = NULL;
    char why [256] = "";
    int rc = pv_doc_decode (pw_data (w), pw_size (w), &doc, why, sizeof why);
    if (rc != 0)
        fprintf (stderr, "decode: %s\n", why);
    assert_int_equal (rc, 0);
    return doc;
}

//  ---------------------------------------------------------------------
//  A fake broker: a ROUTER in an actor

typedef struct {
    char endpoint [300];     //  Where to bind
    int drop;                //  Requests to leave unanswered first
    int running_polls;       //  job.get answers running this many times
    const char *final;       //  then this job status
    //  Filled by the actor; read after zactor_destroy
    int requests;            //  Requests seen, dropped ones included
    int malformed;           //  Requests proto_request_decode refused
    char ids [8][CLI_REQUEST_ID_LEN];    //  Their ids, in order
    char types [8][32];                  //  Their types, in order
    int gets;                //  job.get answered
    int polls;               //  job.progress answered
    bool old_broker;         //  Answers job.progress (and job.watch) with unknown_type
    bool no_watch;           //  Answers job.watch with unknown_type
    int64_t watch_ms;        //  The largest timeout_ms a job.watch asked for
} s_fake_t;

static void
s_fake_answer (s_fake_t *fake, const proto_request_t *req, pw_t *w)
{
    if (streq (req->type, "job.submit")) {
        proto_reply_ok_begin (w, req->id);
        pw_map (w, 2);
        pw_str (w, "job");
        pw_str (w, JOB_ID);
        pw_str (w, "status");
        pw_str (w, "running");
    }
    else
    if (streq (req->type, "job.watch") && (fake->old_broker || fake->no_watch))
        proto_reply_error (w, req->id, PROTO_ERR_UNKNOWN_TYPE,
                           "unknown request type 'job.watch'", NULL, 0);
    else
    if (streq (req->type, "job.watch")) {
        //  Answered at once, as a broker does for a job that moved on
        int64_t watch_ms = 0;
        if (pv_get_int (pv_map_get (req->body, "timeout_ms"), &watch_ms) == 0
            && watch_ms > fake->watch_ms)
            fake->watch_ms = watch_ms;
        bool finished = fake->polls++ >= fake->running_polls;
        proto_reply_ok_begin (w, req->id);
        pw_map (w, 3);
        pw_str (w, "version");
        pw_int (w, fake->polls);
        pw_str (w, "changed");
        pw_bool (w, true);
        pw_str (w, "progress");
        s_write_progress (w, finished ? fake->final : "running", finished);
    }
    else
    if (streq (req->type, "job.progress") && fake->old_broker)
        proto_reply_error (w, req->id, PROTO_ERR_UNKNOWN_TYPE,
                           "unknown request type 'job.progress'", NULL, 0);
    else
    if (streq (req->type, "job.progress")) {
        bool finished = fake->polls++ >= fake->running_polls;
        proto_reply_ok_begin (w, req->id);
        s_write_progress (w, finished ? fake->final : "running", finished);
    }
    else
    if (streq (req->type, "job.get")) {
        bool finished = fake->gets++ >= fake->running_polls
                        || fake->polls > fake->running_polls;
        proto_reply_ok_begin (w, req->id);
        s_write_record (w, finished ? fake->final : "running", finished);
    }
    else
    if (streq (req->type, "status")) {
        proto_reply_ok_begin (w, req->id);
        pw_map (w, 2);
        pw_str (w, "version");
        pw_str (w, "0.1.0");
        pw_str (w, "uptime_ms");
        pw_int (w, 5000);
    }
    else {
        char *details [] = { "first detail", "second detail" };
        proto_reply_error (w, req->id, PROTO_ERR_NOT_FOUND, "no such thing",
                           details, 2);
    }
}

static void
s_fake_broker (zsock_t *pipe, void *arg)
{
    s_fake_t *fake = arg;
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    assert (router);
    zsock_set_linger (router, 0);
    int rc = zsock_bind (router, "%s", fake->endpoint);
    assert (rc != -1);
    zsock_signal (pipe, 0);

    zpoller_t *poller = zpoller_new (pipe, router, NULL);
    while (true) {
        void *which = zpoller_wait (poller, -1);
        if (which != router)
            break;               //  $TERM, or interrupted
        zmsg_t *msg = zmsg_recv (router);
        if (!msg)
            break;
        zframe_t *identity = zmsg_pop (msg);
        zframe_t *empty = zmsg_pop (msg);
        zframe_t *body = zmsg_pop (msg);
        proto_request_t *req = NULL;
        const char *code = NULL;
        char *id = NULL;
        char why [256] = "";
        int decoded = body ? proto_request_decode (zframe_data (body),
                                                   zframe_size (body), &req,
                                                   &code, &id, why,
                                                   sizeof why)
                           : -2;
        int seen = fake->requests++;
        if (decoded != 0) {
            fake->malformed++;
            fprintf (stderr, "fake broker: refused request: %s\n", why);
        }
        if (seen < 8) {
            const char *seen_id = req ? req->id : id;
            snprintf (fake->ids [seen], sizeof fake->ids [seen], "%s",
                      seen_id ? seen_id : "");
            snprintf (fake->types [seen], sizeof fake->types [seen], "%s",
                      req ? req->type : "?");
        }
        if (seen >= fake->drop) {
            pw_t *w = pw_new ();
            if (decoded != 0)
                proto_reply_error (w, id, code, why, NULL, 0);
            else
                s_fake_answer (fake, req, w);
            zmsg_t *reply = zmsg_new ();
            zmsg_append (reply, &identity);
            zmsg_addmem (reply, NULL, 0);
            zmsg_addmem (reply, pw_data (w), pw_size (w));
            zmsg_send (&reply, router);
            pw_destroy (&w);
        }
        free (id);
        proto_request_destroy (&req);
        zframe_destroy (&identity);
        zframe_destroy (&empty);
        zframe_destroy (&body);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    zsock_destroy (&router);
}

static void
s_fake_init (s_fake_t *fake, const char *name)
{
    memset (fake, 0, sizeof *fake);
    snprintf (fake->endpoint, sizeof fake->endpoint, "ipc://%s/%s", s_dir,
              name);
    fake->final = "completed";
}

//  ---------------------------------------------------------------------
//  Argument parsing

static void
test_cli_parse_params_after_action (void **state)
{
    cli_args_t args;
    char err [512];
    int rc = s_parse (&args, err, sizeof err, "job", "run", "--target",
                      "group:web", "test", "echo", "--msg", "hi",
                      "--timeout", "5", "--target=x", NULL);
    assert_int_equal (rc, 0);
    assert_int_equal (args.command, CLI_CMD_JOB_RUN);
    assert_string_equal (args.target_text, "group:web");
    assert_int_equal (args.target.scope, TARGET_GROUP);
    assert_string_equal (args.backend, "test");
    assert_string_equal (args.action, "echo");
    //  After the action, option names are params like any other
    assert_int_equal (args.param_count, 3);
    assert_string_equal (args.params [0].name, "msg");
    assert_string_equal (args.params [0].value, "hi");
    assert_string_equal (args.params [1].name, "timeout");
    assert_string_equal (args.params [1].value, "5");
    assert_string_equal (args.params [2].name, "target");
    assert_string_equal (args.params [2].value, "x");
    assert_int_equal (args.task_timeout_ms, 0);
    assert_false (args.wait);
    cli_args_clear (&args);
}

static void
test_cli_parse_wait_anywhere (void **state)
{
    const char *places [][9] = {
        { "--wait", "--target", "all", "test", "echo", "--msg", "hi", NULL },
        { "--target", "all", "--wait", "test", "echo", "--msg", "hi", NULL },
        { "--target", "all", "test", "echo", "--wait", "--msg", "hi", NULL },
        { "--target", "all", "test", "echo", "--msg", "hi", "--wait", NULL },
    };
    for (size_t place = 0; place < 4; place++) {
        char *argv [16] = { "gridcli", "job", "run" };
        int argc = 3;
        for (size_t word = 0; places [place][word]; word++)
            argv [argc++] = (char *) places [place][word];
        cli_args_t args;
        char err [512];
        assert_int_equal (cli_args_parse (&args, argc, argv, err, sizeof err),
                          0);
        assert_true (args.wait);
        assert_int_equal (args.param_count, 1);
        assert_string_equal (args.params [0].name, "msg");
        assert_string_equal (args.params [0].value, "hi");
        cli_args_clear (&args);
    }
    //  --wait is never a param's value
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                               "--target", "all", "test", "echo", "--msg",
                               "--wait", NULL), -1);
    assert_non_null (strstr (err, "--msg needs a value"));
    cli_args_clear (&args);
}

static void
test_cli_parse_run_options (void **state)
{
    cli_args_t args;
    char err [512];
    int rc = s_parse (&args, err, sizeof err, "--broker", "ipc:///x",
                      "--output=json", "job", "run", "--request-timeout",
                      "2s", "--target", "any:label:tier=web.dev",
                      "--timeout", "10s", "--retries", "2", "--strategy",
                      "continue", "--priority", "-5", "--job-timeout", "1m",
                      "apt", "install", "--package=nginx", NULL);
    assert_int_equal (rc, 0);
    assert_string_equal (args.broker, "ipc:///x");
    assert_true (args.output_given);
    assert_int_equal (args.output, CLI_OUTPUT_JSON);
    assert_int_equal (args.request_timeout_ms, 2000);
    assert_true (args.target.any);
    assert_int_equal (args.target.scope, TARGET_LABEL);
    assert_int_equal (args.task_timeout_ms, 10000);
    assert_int_equal (args.retries, 2);
    assert_string_equal (args.strategy, "continue");
    assert_true (args.priority_given);
    assert_int_equal (args.priority, -5);
    assert_int_equal (args.job_timeout_ms, 60000);
    assert_int_equal (args.param_count, 1);
    assert_string_equal (args.params [0].value, "nginx");
    cli_args_clear (&args);
}

static void
test_cli_parse_job_output (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "output",
                               "j-0193a1b2c3d4-0001", "--node", "web-01",
                               "--step=3", "--stderr", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_JOB_OUTPUT);
    assert_string_equal (args.id, "j-0193a1b2c3d4-0001");
    assert_string_equal (args.node, "web-01");
    assert_true (args.step_given);
    assert_int_equal (args.step, 3);
    assert_true (args.stderr_stream);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "output",
                               "j-0193a1b2c3d4-0001", NULL), 0);
    assert_null (args.node);
    assert_false (args.step_given);
    assert_false (args.stderr_stream);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "output", NULL),
                      -1);
    assert_non_null (strstr (err, "needs a job id"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "output",
                               "j-0193a1b2c3d4-0001", "--step", "1024", NULL),
                      -1);
    assert_non_null (strstr (err, "--step"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "output",
                               "j-0193a1b2c3d4-0001", "--node", "a b", NULL),
                      -1);
    assert_non_null (strstr (err, "--node"));
    cli_args_clear (&args);
}

static void
test_cli_parse_audit_list (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "audit", "list",
                               "--who", "alice", "--type", "job.", "--object",
                               "web-01", "--outcome", "refused", "--since",
                               "2026-11-21T07:00:00Z", "--before",
                               "000001a2382b416b00000000", "--limit", "7",
                               "--json", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_AUDIT_LIST);
    assert_int_equal (args.output, CLI_OUTPUT_JSON);
    pw_t *writer = pw_new ();
    assert_int_equal (cli_request_build (&args, NULL, "r1", writer, NULL), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    const pv_t *root = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (root, "type"), "audit.list"));
    assert_true (pv_str_eq (pv_map_get (root, "who"), "alice"));
    assert_true (pv_str_eq (pv_map_get (root, "request_type"), "job."));
    assert_true (pv_str_eq (pv_map_get (root, "object"), "web-01"));
    assert_true (pv_str_eq (pv_map_get (root, "outcome"), "refused"));
    assert_true (pv_str_eq (pv_map_get (root, "before"),
                            "000001a2382b416b00000000"));
    int64_t since = 0, limit = 0;
    pv_get_int (pv_map_get (root, "since"), &since);
    pv_get_int (pv_map_get (root, "limit"), &limit);
    assert_int_equal (since, 1795244400000);
    assert_int_equal (limit, 7);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    cli_args_clear (&args);
    //  A duration back from now
    assert_int_equal (s_parse (&args, err, sizeof err, "audit", "list",
                               "--since", "1h", NULL), 0);
    cli_args_clear (&args);
    const char *bad [][2] = {{"--limit", "0"}, {"--limit", "1001"},
                             {"--before", "xyz"}, {"--type", "nodot"},
                             {"--since", "yesterday"}, {"--who", ""}};
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        assert_int_equal (s_parse (&args, err, sizeof err, "audit", "list",
                                   bad [index][0], bad [index][1], NULL), -1);
        assert_non_null (strstr (err, bad [index][0]));
        cli_args_clear (&args);
    }
}

static void
test_cli_parse_retry_dlq_queue (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "retry",
                               "j-0193a1b2c3d4-0001", "--failed-only",
                               "--target", "any:group:web", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_JOB_RETRY);
    assert_true (args.failed_only);
    assert_string_equal (args.target_text, "any:group:web");
    pw_t *writer = pw_new ();
    assert_int_equal (cli_request_build (&args, NULL, "r1", writer, NULL), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "type"),
                            "job.retry"));
    bool failed_only = false;
    pv_get_bool (pv_map_get (pv_doc_root (doc), "failed_only"), &failed_only);
    assert_true (failed_only);
    pv_doc_destroy (&doc);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "retry", NULL),
                      -1);
    assert_non_null (strstr (err, "needs a job id"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "retry",
                               "j-0193a1b2c3d4-0001", "--target", "group:",
                               NULL), -1);
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "dlq", "list",
                               "--job", "j-0193a1b2c3d4-0001", "--limit", "5",
                               NULL), 0);
    assert_int_equal (args.command, CLI_CMD_DLQ_LIST);
    assert_int_equal (args.limit, 5);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "dlq", "list",
                               "--job", "nope", NULL), -1);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "dlq", "show", NULL),
                      -1);
    assert_non_null (strstr (err, "entry id"));
    cli_args_clear (&args);
    //  Purge never purges everything by accident
    assert_int_equal (s_parse (&args, err, sizeof err, "dlq", "purge", NULL),
                      -1);
    assert_non_null (strstr (err, "--all"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "dlq", "purge",
                               "--older-than", "7d", NULL), 0);
    pw_reset (writer);
    assert_int_equal (cli_request_build (&args, NULL, "r2", writer, NULL), 0);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "older_than"),
                            "7d"));
    pv_doc_destroy (&doc);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "dlq", "purge",
                               "--older-than", "soon", NULL), -1);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "dlq", "drop", NULL),
                      -1);
    assert_non_null (strstr (err, "unknown dlq subcommand"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "queue", "stats",
                               NULL), 0);
    assert_int_equal (args.command, CLI_CMD_QUEUE_STATS);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "queue", NULL), -1);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "node", "workers",
                               "web-01", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_NODE_WORKERS);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "node", "history",
                               "web/01", NULL), -1);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "node", "history",
                               "web-01", "--limit", "3", NULL), 0);
    pw_reset (writer);
    assert_int_equal (cli_request_build (&args, NULL, "r3", writer, NULL), 0);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "type"),
                            "node.history"));
    pv_doc_destroy (&doc);
    cli_args_clear (&args);
    pw_destroy (&writer);
}

static void
test_cli_parse_missing_target (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run", "test",
                               "echo", "--msg", "hi", NULL), -1);
    assert_non_null (strstr (err, "--target"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                               "--target", "all", "test", NULL), -1);
    assert_non_null (strstr (err, "BACKEND and ACTION"));
    cli_args_clear (&args);
}

static void
test_cli_parse_bad_target (void **state)
{
    const char *bad [] = { "group:", "sometimes", "node:a,,b", "label:x",
                           "group:web/1", NULL };
    for (size_t index = 0; bad [index]; index++) {
        cli_args_t args;
        char err [512] = "";
        assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                                   "--target", bad [index], "test", "echo",
                                   NULL), -1);
        assert_non_null (strstr (err, "bad target"));
        assert_non_null (strstr (err, bad [index]));
        //  The parser's own sentence follows
        assert_true (strlen (err) > strlen ("bad target '': ")
                                    + strlen (bad [index]));
        cli_args_clear (&args);
    }
}

static void
test_cli_parse_bad_duration (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                               "--target", "all", "--timeout", "5x", "test",
                               "echo", NULL), -1);
    assert_non_null (strstr (err, "--timeout"));
    assert_non_null (strstr (err, "not a duration"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "--request-timeout",
                               "soon", "status", NULL), -1);
    assert_non_null (strstr (err, "--request-timeout"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                               "--target", "all", "--job-timeout", "0s",
                               "test", "echo", NULL), -1);
    assert_non_null (strstr (err, "--job-timeout"));
    cli_args_clear (&args);
}

static void
test_cli_parse_unknown_command (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "jobs", NULL), -1);
    assert_non_null (strstr (err, "unknown command 'jobs'"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "frobnicate",
                               NULL), -1);
    assert_non_null (strstr (err, "unknown job subcommand"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "--verbose", "status",
                               NULL), -1);
    assert_non_null (strstr (err, "unknown option '--verbose'"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, NULL), -1);
    assert_non_null (strstr (err, "no command"));
    cli_args_clear (&args);
}

static void
test_cli_parse_file_extra_args (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run", "-f",
                               "deploy.yaml", "--wait", NULL), 0);
    assert_string_equal (args.file, "deploy.yaml");
    assert_true (args.wait);
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run", "-f",
                               "deploy.yaml", "test", "echo", NULL), -1);
    assert_non_null (strstr (err, "unexpected argument 'test'"));
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                               "--target", "all", "-f", "deploy.yaml", NULL),
                      -1);
    assert_non_null (strstr (err, "-f FILE"));
    cli_args_clear (&args);
}

static void
test_cli_parse_other_commands (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "status",
                               JOB_ID, "--output", "json", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_JOB_STATUS);
    assert_string_equal (args.id, JOB_ID);
    assert_int_equal (args.output, CLI_OUTPUT_JSON);
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "list",
                               "--status", "failed", "--limit", "5", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_JOB_LIST);
    assert_string_equal (args.status_filter, "failed");
    assert_int_equal (args.limit, 5);
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "cancel",
                               JOB_ID, "--reason", "wrong target", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_JOB_CANCEL);
    assert_string_equal (args.reason, "wrong target");
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "job", "events",
                               JOB_ID, NULL), 0);
    assert_int_equal (args.command, CLI_CMD_JOB_EVENTS);
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "node", "list", NULL),
                      0);
    assert_int_equal (args.command, CLI_CMD_NODE_LIST);
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "node", "info",
                               "web-01", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_NODE_INFO);
    assert_string_equal (args.id, "web-01");
    cli_args_clear (&args);

    assert_int_equal (s_parse (&args, err, sizeof err, "status", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_STATUS);
    cli_args_clear (&args);

    //  Help in its several spellings
    assert_int_equal (s_parse (&args, err, sizeof err, "--help", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_HELP);
    assert_null (args.help_topic);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "--help", NULL),
                      0);
    assert_int_equal (args.command, CLI_CMD_HELP);
    assert_string_equal (args.help_topic, "job");
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "node", "info", "-h",
                               NULL), 0);
    assert_int_equal (args.command, CLI_CMD_HELP);
    assert_string_equal (args.help_topic, "node");
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "help", "status",
                               NULL), 0);
    assert_string_equal (args.help_topic, "status");
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "--version", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_VERSION);
    cli_args_clear (&args);
}

static void
test_cli_parse_bad_values (void **state)
{
    struct {
        const char *words [12];
        const char *expect;
    } cases [] = {
        { { "job", "status", "42", NULL }, "not a job id" },
        { { "job", "status", NULL }, "needs a job id" },
        { { "job", "status", JOB_ID, JOB_ID, NULL }, "unexpected argument" },
        { { "node", "info", "web.01", NULL }, "not a node id" },
        { { "job", "list", "--limit", "0", NULL }, "--limit" },
        { { "job", "list", "--status", "done", NULL }, "--status" },
        { { "--output", "xml", "status", NULL }, "table or json" },
        { { "--broker", NULL }, "needs a value" },
        { { "job", "run", "--target", "all", "--retries", "11", "t", "a",
            NULL }, "--retries" },
        { { "job", "run", "--target", "all", "--priority", "high", "t", "a",
            NULL }, "--priority" },
        { { "job", "run", "--target", "all", "--strategy", "maybe", "t",
            "a", NULL }, "--strategy" },
        { { "job", "run", "--target", "all", "t", "a", "--x", "1", "--x",
            "2", NULL }, "twice" },
        { { "job", "run", "--target", "all", "t", "a", "--b@d", "1", NULL },
          "not a valid param name" },
        { { "job", "run", "--target", "all", "t", "a", "loose", NULL },
          "params are written --NAME VALUE" },
        { { "job", "run", "--target", "all", "t", "a", "--msg", NULL },
          "needs a value" },
        { { "job", "run", "--target", "all", "b@d", "a", NULL },
          "not a valid backend name" },
        { { "job", "list", "--reason", "x", NULL }, "unknown option" },
        { { "status", "now", NULL }, "unexpected argument" },
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        char *argv [16] = { "gridcli" };
        int argc = 1;
        for (size_t word = 0; cases [index].words [word]; word++)
            argv [argc++] = (char *) cases [index].words [word];
        cli_args_t args;
        char err [512] = "";
        int rc = cli_args_parse (&args, argc, argv, err, sizeof err);
        if (rc != -1 || !strstr (err, cases [index].expect))
            fprintf (stderr, "case %zu: rc %d, '%s'\n", index, rc, err);
        assert_int_equal (rc, -1);
        assert_non_null (strstr (err, cases [index].expect));
        cli_args_clear (&args);
    }
}

//  ---------------------------------------------------------------------
//  Settings

static void
test_cli_parse_schedule_errors (void **state)
{
    struct {
        const char *words [12];
        const char *message;
    } cases [] = {
        { { "schedule", NULL }, "schedule needs a subcommand" },
        { { "schedule", "add", NULL }, "schedule add needs a NAME" },
        { { "schedule", "add", "a b", "--every", "1m", NULL },
          "'a b' is not a schedule name" },
        { { "schedule", "add", "x", "-f", "j.yaml", NULL },
          "needs one of --cron EXPR and --every D" },
        { { "schedule", "add", "x", "--cron", "5/15 * * * *", "-f", "j.yaml",
            NULL },
          "bad --cron '5/15 * * * *': minute: a step needs a range or '*'" },
        { { "schedule", "add", "x", "--every", "500ms", "-f", "j.yaml", NULL },
          "--every must be an interval from 1s" },
        { { "schedule", "add", "x", "--every", "1m", "--tz", "UTC", "-f",
            "j.yaml", NULL },
          "--tz goes with --cron only" },
        { { "schedule", "add", "x", "--cron", "0 3 * * *", "--tz",
            "Mars/Olympus", "-f", "j.yaml", NULL },
          "bad --tz: unknown time zone 'Mars/Olympus'" },
        { { "schedule", "add", "x", "--cron", "0 3 * * *", "--tz",
            "../../../etc/passwd", "-f", "j.yaml", NULL },
          "bad --tz: time zone '../../../etc/passwd' is not a zone name" },
        { { "schedule", "add", "x", "--cron", "0 3 * * *", "--tz",
            "/etc/localtime", "-f", "j.yaml", NULL },
          "bad --tz: time zone '/etc/localtime' is not a zone name" },
        { { "schedule", "add", "x", "--every", "1m", "--overlap", "never",
            "-f", "j.yaml", NULL },
          "--overlap must be skip, queue or allow" },
        { { "schedule", "add", "x", "--every", "1m", "--catch-up", "all",
            "-f", "j.yaml", NULL },
          "--catch-up must be one or none" },
        { { "schedule", "add", "x", "--every", "1m", "-f", "j.yaml",
            "--target", "all", NULL },
          "takes the target, tasks and options from the file" },
        { { "schedule", "add", "x", "--every", "1m", "--wait", "-f", "j.yaml",
            NULL },
          "--wait is for job run" },
        { { "schedule", "show", NULL }, "schedule show needs a schedule name" },
        { { "schedule", "run", "a/b", NULL }, "'a/b' is not a schedule name" },
        { { "job", "list", "--schedule", "a b", NULL },
          "--schedule needs a schedule name" },
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        char *argv [14] = { "gridcli" };
        int argc = 1;
        for (size_t word = 0; cases [index].words [word]; word++)
            argv [argc++] = (char *) cases [index].words [word];
        cli_args_t args;
        char err [512] = "";
        int rc = cli_args_parse (&args, argc, argv, err, sizeof err);
        if (rc == 0 || !strstr (err, cases [index].message))
            fprintf (stderr, "case %zu: rc %d: %s\n", index, rc, err);
        assert_int_equal (rc, -1);
        assert_non_null (strstr (err, cases [index].message));
        cli_args_clear (&args);
    }
}

static void
test_cli_settings_precedence (void **state)
{
    char *file = strdup (s_path ("gridcli.yaml"));
    s_write_file (file, "broker: ipc:///from-file\noutput: json\n"
                        "request_timeout: 2s\n");
    cli_args_t args;
    cli_settings_t settings;
    char err [512];

    //  Defaults (no file at the default path)
    assert_int_equal (s_parse (&args, err, sizeof err, "status", NULL), 0);
    assert_int_equal (cli_settings_resolve (&args, NULL, NULL,
                                            s_path ("absent.yaml"), &settings,
                                            err, sizeof err), 0);
    assert_string_equal (settings.broker, CLI_DEFAULT_BROKER);
    assert_int_equal (settings.output, CLI_OUTPUT_TABLE);
    assert_int_equal (settings.request_timeout_ms,
                      CLI_DEFAULT_REQUEST_TIMEOUT_MS);
    assert_null (settings.config_path);
    cli_settings_clear (&settings);

    //  The default path, when it exists, is read
    assert_int_equal (cli_settings_resolve (&args, NULL, NULL, file,
                                            &settings, err, sizeof err), 0);
    assert_string_equal (settings.broker, "ipc:///from-file");
    assert_int_equal (settings.output, CLI_OUTPUT_JSON);
    assert_int_equal (settings.request_timeout_ms, 2000);
    cli_settings_clear (&settings);

    //  GRID_CONFIG names the file; GRID_BROKER beats the file's broker
    assert_int_equal (cli_settings_resolve (&args, "ipc:///from-env", file,
                                            NULL, &settings, err, sizeof err),
                      0);
    assert_string_equal (settings.broker, "ipc:///from-env");
    assert_int_equal (settings.output, CLI_OUTPUT_JSON);
    cli_settings_clear (&settings);
    cli_args_clear (&args);

    //  Flags beat both
    assert_int_equal (s_parse (&args, err, sizeof err, "--broker",
                               "ipc:///from-flag", "--output", "table",
                               "--request-timeout", "700ms", "status", NULL),
                      0);
    assert_int_equal (cli_settings_resolve (&args, "ipc:///from-env", file,
                                            NULL, &settings, err, sizeof err),
                      0);
    assert_string_equal (settings.broker, "ipc:///from-flag");
    assert_int_equal (settings.output, CLI_OUTPUT_TABLE);
    assert_int_equal (settings.request_timeout_ms, 700);
    cli_settings_clear (&settings);
    cli_args_clear (&args);

    //  A named file that is missing, or wrong, is an error
    assert_int_equal (s_parse (&args, err, sizeof err, "--config",
                               s_path ("absent.yaml"), "status", NULL), 0);
    assert_int_equal (cli_settings_resolve (&args, NULL, NULL, NULL,
                                            &settings, err, sizeof err), -1);
    assert_non_null (strstr (err, "absent.yaml"));
    cli_settings_clear (&settings);
    cli_args_clear (&args);

    s_write_file (file, "broker: ipc:///x\nbrokers: 2\n");
    assert_int_equal (s_parse (&args, err, sizeof err, "status", NULL), 0);
    assert_int_equal (cli_settings_resolve (&args, NULL, file, NULL,
                                            &settings, err, sizeof err), -1);
    assert_non_null (strstr (err, "brokers"));
    cli_settings_clear (&settings);

    s_write_file (file, "output: yaml\n");
    assert_int_equal (cli_settings_resolve (&args, NULL, file, NULL,
                                            &settings, err, sizeof err), -1);
    assert_non_null (strstr (err, "output"));
    cli_settings_clear (&settings);
    cli_args_clear (&args);
    unlink (file);
    free (file);
}

//  ---------------------------------------------------------------------
//  Requests

static void
test_cli_request_ids_unique (void **state)
{
    char first [CLI_REQUEST_ID_LEN], second [CLI_REQUEST_ID_LEN];
    cli_request_id_make (first, sizeof first);
    cli_request_id_make (second, sizeof second);
    assert_string_not_equal (first, second);
    assert_true (name_valid (first));
    assert_true (name_valid (second));
}

static void
test_cli_request_job_run (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                               "--target", "group:web", "--timeout", "90s",
                               "--retries", "1", "--priority", "7", "test",
                               "echo", "--msg", "hi", "--count", "3", NULL),
                      0);
    pw_t *w = pw_new ();
    job_errors_t errors = { .count = 0 };
    assert_int_equal (cli_request_build (&args, NULL, "req-1", w, &errors),
                      0);
    assert_int_equal (errors.count, 0);

    //  The broker's own decoder accepts it
    proto_request_t *req = NULL;
    const char *code = NULL;
    char *id = NULL;
    char why [256] = "";
    assert_int_equal (proto_request_decode (pw_data (w), pw_size (w), &req,
                                            &code, &id, why, sizeof why), 0);
    assert_string_equal (req->type, "job.submit");
    assert_string_equal (req->id, "req-1");

    const pv_t *job = pv_map_get (req->body, "job");
    const pv_t *target = pv_map_get (job, "target");
    assert_true (pv_str_eq (pv_map_get (target, "scope"), "group"));
    assert_true (pv_str_eq (pv_map_get (target, "value"), "web"));
    const pv_t *tasks = pv_map_get (job, "tasks");
    assert_int_equal (pv_size (tasks), 1);
    const pv_t *task = pv_array_at (tasks, 0);
    assert_true (pv_str_eq (pv_map_get (task, "backend"), "test"));
    assert_true (pv_str_eq (pv_map_get (task, "action"), "echo"));
    const pv_t *params = pv_map_get (task, "params");
    assert_int_equal (pv_size (params), 2);
    assert_true (pv_str_eq (pv_map_get (params, "msg"), "hi"));
    assert_true (pv_str_eq (pv_map_get (params, "count"), "3"));
    int64_t number = 0;
    assert_int_equal (pv_get_int (pv_map_get (task, "max_retries"), &number),
                      0);
    assert_int_equal (number, 1);
    int64_t ms = 0;
    char *timeout = pv_strdup (pv_map_get (task, "timeout"));
    assert_non_null (timeout);
    assert_int_equal (duration_parse (timeout, &ms), 0);
    assert_int_equal (ms, 90000);
    free (timeout);
    assert_int_equal (pv_get_int (pv_map_get (job, "priority"), &number), 0);
    assert_int_equal (number, 7);
    assert_null (pv_map_get (job, "strategy"));

    //  And so does the job validator
    job_spec_t *spec = NULL;
    assert_int_equal (job_spec_decode (job, &spec, &errors), 0);
    assert_int_equal (job_spec_step_count (spec), 1);
    job_spec_destroy (&spec);
    proto_request_destroy (&req);
    free (id);
    pw_destroy (&w);
    cli_args_clear (&args);
}

static void
test_cli_request_invalid_inline_job (void **state)
{
    //  A param longer than a job allows: the parser cannot know, the job
    //  validator does, before anything is sent
    char *long_value = malloc (JOB_MAX_PARAM_LEN + 2);
    memset (long_value, 'x', JOB_MAX_PARAM_LEN + 1);
    long_value [JOB_MAX_PARAM_LEN + 1] = 0;
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                               "--target", "all", "test", "echo", "--msg",
                               long_value, NULL), 0);
    pw_t *w = pw_new ();
    job_errors_t errors = { .count = 0 };
    assert_int_equal (cli_request_build (&args, NULL, "req-2", w, &errors),
                      -1);
    assert_true (errors.count >= 1);
    assert_non_null (strstr (errors.items [0], "msg"));
    job_errors_clear (&errors);
    pw_destroy (&w);
    cli_args_clear (&args);
    free (long_value);
}

static void
test_cli_request_other_commands (void **state)
{
    struct {
        const char *words [16];
        const char *type;
        const char *key;        //  A field the request must carry
    } cases [] = {
        { { "schedule", "add", "beat", "--every", "10m", "--target", "all",
            "test", "echo", "--msg", "hi", NULL }, "schedule.add", "every" },
        { { "schedule", "add", "n", "--cron", "0 3 * * mon-fri", "--tz",
            "Europe/Berlin", "--overlap", "queue", "--catch-up", "none",
            "--target", "group:web and not node:x", "apt", "update", NULL },
          "schedule.add", "tz" },
        { { "schedule", "list", NULL }, "schedule.list", NULL },
        { { "schedule", "show", "beat", NULL }, "schedule.get", "name" },
        { { "schedule", "pause", "beat", NULL }, "schedule.pause", "name" },
        { { "schedule", "resume", "beat", NULL }, "schedule.resume", "name" },
        { { "schedule", "delete", "beat", NULL }, "schedule.delete", "name" },
        { { "schedule", "run", "beat", NULL }, "schedule.run", "name" },
        { { "job", "list", "--schedule", "beat", NULL }, "job.list",
          "schedule" },
        { { "job", "status", JOB_ID, NULL }, "job.get", "job" },
        { { "job", "list", "--status", "running", "--limit", "20", NULL },
          "job.list", "limit" },
        { { "job", "cancel", JOB_ID, "--reason", "oops", NULL },
          "job.cancel", "reason" },
        { { "job", "events", JOB_ID, NULL }, "job.events", "job" },
        { { "node", "list", NULL }, "node.list", NULL },
        { { "node", "info", "web-01", NULL }, "node.get", "node" },
        { { "status", NULL }, "status", NULL },
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        char *argv [18] = { "gridcli" };
        int argc = 1;
        for (size_t word = 0; cases [index].words [word]; word++)
            argv [argc++] = (char *) cases [index].words [word];
        cli_args_t args;
        char err [512];
        assert_int_equal (cli_args_parse (&args, argc, argv, err, sizeof err),
                          0);
        pw_t *w = pw_new ();
        assert_int_equal (cli_request_build (&args, NULL, "req-3", w, NULL),
                          0);
        proto_request_t *req = NULL;
        const char *code = NULL;
        char *id = NULL;
        char why [256] = "";
        int rc = proto_request_decode (pw_data (w), pw_size (w), &req, &code,
                                       &id, why, sizeof why);
        if (rc)
            fprintf (stderr, "case %zu: %s\n", index, why);
        assert_int_equal (rc, 0);
        assert_string_equal (req->type, cases [index].type);
        if (cases [index].key)
            assert_non_null (pv_map_get (req->body, cases [index].key));
        proto_request_destroy (&req);
        free (id);
        pw_destroy (&w);
        cli_args_clear (&args);
    }
}

static void
test_cli_request_job_file (void **state)
{
    char *file = strdup (s_path ("deploy.yaml"));
    s_write_file (file,
        "target: group:web\n"
        "strategy: continue\n"
        "tasks:\n"
        "  - tasks:\n"
        "      - backend: apt\n"
        "        action: update\n"
        "      - backend: apt\n"
        "        action: install\n"
        "        params: { package: nginx }\n"
        "  - backend: systemd\n"
        "    action: start\n"
        "    params: { unit: nginx }\n");
    job_spec_t *spec = NULL;
    job_errors_t errors = { .count = 0 };
    assert_int_equal (job_spec_load_file (file, &spec, &errors), 0);

    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run", "-f",
                               file, NULL), 0);
    pw_t *w = pw_new ();
    assert_int_equal (cli_request_build (&args, spec, "req-4", w, &errors),
                      0);
    proto_request_t *req = NULL;
    const char *code = NULL;
    char *id = NULL;
    char why [256] = "";
    assert_int_equal (proto_request_decode (pw_data (w), pw_size (w), &req,
                                            &code, &id, why, sizeof why), 0);
    const pv_t *job = pv_map_get (req->body, "job");
    assert_int_equal (pv_size (pv_map_get (job, "tasks")), 2);
    assert_true (pv_str_eq (pv_map_get (pv_map_get (job, "target"), "scope"),
                            "group"));
    assert_true (pv_str_eq (pv_map_get (job, "strategy"), "continue"));
    proto_request_destroy (&req);
    free (id);
    pw_destroy (&w);
    cli_args_clear (&args);
    job_spec_destroy (&spec);
    unlink (file);
    free (file);
}

//  ---------------------------------------------------------------------
//  Rendering

static void
test_cli_render_job_table (void **state)
{
    pw_t *w = pw_new ();
    s_write_record (w, "partial_failure", true);
    pv_doc_t *doc = s_decode (w);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_JOB_STATUS, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    const char *text = s_capture_close (&out);

    assert_non_null (strstr (text, JOB_ID));
    assert_non_null (strstr (text, "group:web"));
    assert_non_null (strstr (text, "partial_failure"));
    assert_non_null (strstr (text, "step      2/3"));
    assert_non_null (strstr (text, "1 of 2 nodes failed"));
    assert_non_null (strstr (text, "NODE"));
    assert_non_null (strstr (text, "OUTPUT"));
    assert_non_null (strstr (text, "web-01"));
    assert_non_null (strstr (text, "web-02"));
    //  Tasks by flat step: step 3 is the second leaf of the branch
    assert_non_null (strstr (text, "test echo"));
    assert_non_null (strstr (text, "test sleep"));
    assert_non_null (strstr (text, "test fail"));
    //  The failed row is marked, shows its error's first line, made safe
    const char *failed = strstr (text, "! web-02");
    assert_non_null (failed);
    const char *line_end = strchr (failed, '\n');
    assert_non_null (line_end);
    char row [512];
    snprintf (row, sizeof row, "%.*s", (int) (line_end - failed), failed);
    assert_non_null (strstr (row, "failed (2 attempts)"));
    assert_non_null (strstr (row, "boom: ?[31mdisk full"));
    assert_null (strstr (row, "more"));
    assert_null (strchr (text, '\x1b'));
    //  First line of the output only
    assert_non_null (strstr (text, "fine"));
    assert_null (strstr (text, "second line"));
    assert_int_equal (cli_job_exit_code (pv_doc_root (doc)),
                      CLI_EXIT_JOB_FAILED);
    assert_true (cli_job_finished (pv_doc_root (doc)));
    free (out.text);
    pv_doc_destroy (&doc);

    //  Colour only when asked
    pw_reset (w);
    s_write_record (w, "failed", true);
    doc = s_decode (w);
    s_capture_open (&out);
    assert_int_equal (cli_render_job (pv_doc_root (doc), out.file, true), 0);
    text = s_capture_close (&out);
    assert_non_null (strstr (text, "\033[31m! web-02"));
    free (out.text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

//  Every failure kind is marked and counted; a row that never ran says
//  why; the members not run are listed under the table; the step is the
//  wire's.
static void
test_cli_render_job_not_run (void **state)
{
    pw_t *w = pw_new ();
    pw_map (w, 10);
    pw_str (w, "id");
    pw_str (w, JOB_ID);
    pw_str (w, "target");
    pw_map (w, 2);
    pw_str (w, "scope");
    pw_str (w, "node");
    pw_str (w, "value");
    pw_str (w, "db-01,web-01,web-02");
    pw_str (w, "tasks");
    pw_array (w, 1);
    pw_map (w, 2);
    pw_str (w, "backend");
    pw_str (w, "apt");
    pw_str (w, "action");
    pw_str (w, "update");
    pw_str (w, "status");
    pw_str (w, "partial_failure");
    pw_str (w, "step");
    pw_int (w, 1);
    pw_str (w, "steps");
    pw_int (w, 1);
    pw_str (w, "expected");
    pw_array (w, 3);
    pw_str (w, "db-01");
    pw_str (w, "web-01");
    pw_str (w, "web-02");
    pw_str (w, "reason");
    pw_str (w, "1 of 3 nodes failed at step 0 (apt update); 1 not run: db-01 "
               "offline since 12:01:07");
    pw_str (w, "not_run");
    pw_array (w, 2);
    const char *members [][3] = {{"web-07", "offline", "offline since 12:01:07"},
                                 {"web-09", "drained", "drained"}};
    for (int index = 0; index < 2; index++) {
        pw_map (w, 3);
        pw_str (w, "node");
        pw_str (w, members [index][0]);
        pw_str (w, "status");
        pw_str (w, members [index][1]);
        pw_str (w, "reason");
        pw_str (w, members [index][2]);
    }
    pw_str (w, "results");
    pw_map (w, 1);
    pw_str (w, "0");
    pw_map (w, 3);
    pw_str (w, "db-01");
    pw_map (w, 8);
    pw_str (w, "status");
    pw_str (w, "offline");
    pw_str (w, "reason");
    pw_str (w, "offline since 12:01:07");
    pw_str (w, "output");
    pw_str (w, "");
    pw_str (w, "error");
    pw_str (w, "");
    pw_str (w, "exit_code");
    pw_int (w, -1);
    pw_str (w, "duration_ms");
    pw_int (w, 0);
    pw_str (w, "attempts");
    pw_int (w, 0);
    pw_str (w, "truncated");
    pw_bool (w, false);
    pw_str (w, "web-01");
    s_write_cell (w, "success", "ok\n", "", 0, 12, 1);
    pw_str (w, "web-02");
    s_write_cell (w, "interrupted", "", "agent restarted", -1, 800, 1);
    pv_doc_t *doc = s_decode (w);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render_job (pv_doc_root (doc), out.file, false), 0);
    const char *text = s_capture_close (&out);
    assert_non_null (strstr (text, "step      1/1"));
    const char *row = strstr (text, "! db-01");
    assert_non_null (row);
    const char *end = strchr (row, '\n');
    char line [512];
    snprintf (line, sizeof line, "%.*s", (int) (end - row), row);
    assert_non_null (strstr (line, "offline"));
    assert_non_null (strstr (line, "offline since 12:01:07"));
    assert_null (strstr (line, "0ms"));
    assert_non_null (strstr (text, "! web-02"));
    assert_null (strstr (text, "! web-01"));
    assert_non_null (strstr (text, "2 steps failed (marked !)"));
    assert_non_null (strstr (text, "2 nodes not run: web-07 offline since "
                                   "12:01:07, web-09 drained"));
    assert_int_equal (cli_job_exit_code (pv_doc_root (doc)),
                      CLI_EXIT_JOB_FAILED);
    free (out.text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_cli_render_job_json (void **state)
{
    pw_t *w = pw_new ();
    s_write_record (w, "completed", true);
    pv_doc_t *doc = s_decode (w);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_JOB_STATUS, pv_doc_root (doc),
                                  CLI_OUTPUT_JSON, out.file), 0);
    const char *text = s_capture_close (&out);
    assert_true (s_json_valid (text));
    assert_non_null (strstr (text, "\"id\": \"" JOB_ID "\""));
    assert_non_null (strstr (text, "\"web-02\""));
    assert_int_equal (cli_job_exit_code (pv_doc_root (doc)), CLI_EXIT_OK);
    free (out.text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_cli_render_progress (void **state)
{
    pw_t *w = pw_new ();
    s_write_progress (w, "running", false);
    pv_doc_t *doc = s_decode (w);
    char line [256];
    cli_progress_format (pv_doc_root (doc), line, sizeof line);
    assert_string_equal (line, JOB_ID " running  step 2/3  nodes 0/2 done");
    assert_false (cli_job_finished (pv_doc_root (doc)));
    assert_int_equal (cli_job_exit_code (pv_doc_root (doc)), CLI_EXIT_OK);
    pv_doc_destroy (&doc);

    pw_reset (w);
    s_write_progress (w, "partial_failure", true);
    doc = s_decode (w);
    cli_progress_format (pv_doc_root (doc), line, sizeof line);
    assert_string_equal (line, JOB_ID " partial_failure  step 2/3  nodes 2/2 "
                               "done  1 failed");
    pv_doc_destroy (&doc);

    //  A job with rolling batches shows where it is
    pw_reset (w);
    pw_map (w, 6);
    pw_str (w, "id");
    pw_str (w, JOB_ID);
    pw_str (w, "status");
    pw_str (w, "running");
    pw_str (w, "step");
    pw_int (w, 0);
    pw_str (w, "steps");
    pw_int (w, 1);
    pw_str (w, "batch");
    pw_int (w, 3);
    pw_str (w, "batches");
    pw_int (w, 10);
    doc = s_decode (w);
    cli_progress_format (pv_doc_root (doc), line, sizeof line);
    assert_string_equal (line, JOB_ID " running  step 0/1  batch 3/10");
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

//  A header label of ten characters or more keeps a space before its value
static void
test_cli_header_line_long_label (void **state)
{
    (void) state;
    s_capture_t out;
    s_capture_open (&out);
    cli_header_line (out.file, "job", "j-1");
    cli_header_line (out.file, "last status", "completed");
    const char *text = s_capture_close (&out);
    assert_string_equal (text, "job       j-1\n"
                               "last status completed\n");
    free (out.text);
}

//  schedule show puts every value in one column, "last status"'s too
static void
test_cli_render_schedule_show (void **state)
{
    (void) state;
    pw_t *w = pw_new ();
    pw_map (w, 14);
    pw_str (w, "name");
    pw_str (w, "nightly");
    pw_str (w, "cron");
    pw_str (w, "0 3 * * *");
    pw_str (w, "tz");
    pw_str (w, "Europe/Berlin");
    pw_str (w, "target");
    pw_str (w, "group:web");
    pw_str (w, "paused");
    pw_bool (w, false);
    pw_str (w, "overlap");
    pw_str (w, "skip");
    pw_str (w, "catch_up");
    pw_str (w, "one");
    pw_str (w, "catch_up_window");
    pw_str (w, "1h");
    pw_str (w, "next_run");
    pw_str (w, "2026-11-27T02:00:00.000Z");
    pw_str (w, "last_run");
    pw_str (w, "2026-11-26T02:00:00.000Z");
    pw_str (w, "last_job");
    pw_str (w, JOB_ID);
    pw_str (w, "last_status");
    pw_str (w, "completed");
    pw_str (w, "runs");
    pw_int (w, 3);
    pw_str (w, "skipped");
    pw_int (w, 1);
    pv_doc_t *doc = s_decode (w);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_SCHEDULE_SHOW, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    const char *text = s_capture_close (&out);
    assert_string_equal (text,
                         "name        nightly\n"
                         "when        0 3 * * * (Europe/Berlin)\n"
                         "target      group:web\n"
                         "state       active\n"
                         "overlap     skip\n"
                         "catch-up    one (window 1h)\n"
                         "next run    2026-11-27 02:00:00\n"
                         "last run    2026-11-26 02:00:00\n"
                         "last job    " JOB_ID "\n"
                         "last status completed\n"
                         "runs        3 started, 1 skipped\n");
    free (out.text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_cli_render_lists (void **state)
{
    pw_t *w = pw_new ();
    //  job.list
    pw_map (w, 2);
    pw_str (w, "jobs");
    pw_array (w, 1);
    pw_map (w, 8);
    pw_str (w, "id");
    pw_str (w, JOB_ID);
    pw_str (w, "target");
    pw_str (w, "label:tier=web.dev");
    pw_str (w, "status");
    pw_str (w, "running");
    pw_str (w, "step");
    pw_int (w, 0);
    pw_str (w, "steps");
    pw_int (w, 4);
    pw_str (w, "expected");
    pw_int (w, 5);
    pw_str (w, "created_at");
    pw_str (w, "2026-11-21T07:00:51.123Z");
    pw_str (w, "updated_at");
    pw_str (w, "2026-11-21T07:00:52.000Z");
    pw_str (w, "total");
    pw_int (w, 9);
    pv_doc_t *doc = s_decode (w);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_JOB_LIST, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    const char *text = s_capture_close (&out);
    assert_non_null (strstr (text, "ID"));
    assert_non_null (strstr (text, "CREATED"));
    assert_non_null (strstr (text, "label:tier=web.dev"));
    assert_non_null (strstr (text, "0/4"));
    assert_non_null (strstr (text, "2026-11-21 07:00:51"));
    assert_non_null (strstr (text, "1 of 9 jobs"));
    free (out.text);
    pv_doc_destroy (&doc);

    //  node.list
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "nodes");
    pw_array (w, 1);
    pw_map (w, 10);
    pw_str (w, "id");
    pw_str (w, "web-01");
    pw_str (w, "hostname");
    pw_str (w, "web-01.example.net");
    pw_str (w, "groups");
    pw_array (w, 2);
    pw_str (w, "web");
    pw_str (w, "prod");
    pw_str (w, "labels");
    pw_map (w, 1);
    pw_str (w, "tier");
    pw_str (w, "web.dev");
    pw_str (w, "status");
    pw_str (w, "online");
    pw_str (w, "last_seen");
    pw_str (w, "2026-11-21T07:00:51.123Z");
    pw_str (w, "registered_at");
    pw_str (w, "2026-11-21T06:00:00.000Z");
    pw_str (w, "version");
    pw_str (w, "0.1.0");
    pw_str (w, "concurrency");
    pw_int (w, 4);
    pw_str (w, "running");
    pw_int (w, 1);
    doc = s_decode (w);
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_NODE_LIST, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    text = s_capture_close (&out);
    assert_non_null (strstr (text, "LAST-SEEN"));
    assert_non_null (strstr (text, "web-01.example.net"));
    assert_non_null (strstr (text, "web,prod"));
    assert_non_null (strstr (text, "tier=web.dev"));
    assert_non_null (strstr (text, "1/4"));
    //  The release each node runs, to follow an upgrade
    assert_non_null (strstr (text, "VERSION"));
    assert_non_null (strstr (text, " 0.1.0"));
    free (out.text);
    pv_doc_destroy (&doc);

    //  job.events
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "events");
    pw_array (w, 2);
    pw_map (w, 3);
    pw_str (w, "seq");
    pw_int (w, 1);
    pw_str (w, "time");
    pw_str (w, "2026-11-21T07:00:51.123Z");
    pw_str (w, "event");
    pw_str (w, "submitted");
    pw_map (w, 6);
    pw_str (w, "seq");
    pw_int (w, 2);
    pw_str (w, "time");
    pw_str (w, "2026-11-21T07:00:52.456Z");
    pw_str (w, "event");
    pw_str (w, "failed");
    pw_str (w, "node");
    pw_str (w, "web-02");
    pw_str (w, "step");
    pw_int (w, 0);
    pw_str (w, "detail");
    pw_str (w, "exit 1");
    doc = s_decode (w);
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_JOB_EVENTS, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    text = s_capture_close (&out);
    assert_non_null (strstr (text, "TIME"));
    assert_non_null (strstr (text, "DETAIL"));
    assert_non_null (strstr (text, "2026-11-21 07:00:52.456"));
    assert_non_null (strstr (text, "web-02"));
    assert_non_null (strstr (text, "exit 1"));
    free (out.text);
    pv_doc_destroy (&doc);

    //  node.get
    pw_reset (w);
    pw_map (w, 3);
    pw_str (w, "id");
    pw_str (w, "web-01");
    pw_str (w, "hostname");
    pw_str (w, "web-01.example.net");
    pw_str (w, "backends");
    pw_array (w, 1);
    pw_map (w, 2);
    pw_str (w, "name");
    pw_str (w, "apt");
    pw_str (w, "actions");
    pw_array (w, 1);
    pw_map (w, 4);
    pw_str (w, "name");
    pw_str (w, "install");
    pw_str (w, "kind");
    pw_str (w, "modify");
    pw_str (w, "help");
    pw_str (w, "Install a package");
    pw_str (w, "params");
    pw_array (w, 2);
    pw_map (w, 2);
    pw_str (w, "name");
    pw_str (w, "package");
    pw_str (w, "required");
    pw_bool (w, true);
    pw_map (w, 2);
    pw_str (w, "name");
    pw_str (w, "version");
    pw_str (w, "required");
    pw_bool (w, false);
    doc = s_decode (w);
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_NODE_INFO, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    text = s_capture_close (&out);
    assert_non_null (strstr (text, "BACKEND"));
    assert_non_null (strstr (text, "modify"));
    assert_non_null (strstr (text, "package*,version"));
    free (out.text);
    pv_doc_destroy (&doc);

    //  status
    pw_reset (w);
    pw_map (w, 4);
    pw_str (w, "version");
    pw_str (w, "0.1.0");
    pw_str (w, "uptime_ms");
    pw_int (w, 5400000);
    pw_str (w, "nodes");
    pw_map (w, 3);
    pw_str (w, "total");
    pw_int (w, 3);
    pw_str (w, "online");
    pw_int (w, 2);
    pw_str (w, "offline");
    pw_int (w, 1);
    pw_str (w, "dropped");
    pw_map (w, 1);
    pw_str (w, "malformed");
    pw_int (w, 4);
    doc = s_decode (w);
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_STATUS, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    text = s_capture_close (&out);
    assert_non_null (strstr (text, "1h30m"));
    assert_non_null (strstr (text, "2 online"));
    assert_non_null (strstr (text, "4 malformed"));
    free (out.text);
    pv_doc_destroy (&doc);

    //  status from a relay (gridrelay --client): its upstream, agents
    //  and counters are shown, not only its version
    pw_reset (w);
    pw_map (w, 7);
    pw_str (w, "name");
    pw_str (w, "relay-a");
    pw_str (w, "version");
    pw_str (w, "0.1.0");
    pw_str (w, "uptime_ms");
    pw_int (w, 60000);
    pw_str (w, "upstream");
    pw_map (w, 3);
    pw_str (w, "endpoint");
    pw_str (w, "tcp://broker:7702");
    pw_str (w, "connected");
    pw_bool (w, true);
    pw_str (w, "since_ms");
    pw_int (w, 30000);
    pw_str (w, "serving");
    pw_bool (w, true);
    pw_str (w, "agents");
    pw_int (w, 12);
    pw_str (w, "counters");
    pw_map (w, 2);
    pw_str (w, "up");
    pw_int (w, 139);
    pw_str (w, "malformed");
    pw_int (w, 7);
    doc = s_decode (w);
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_STATUS, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    text = s_capture_close (&out);
    assert_non_null (strstr (text, "relay-a"));
    assert_non_null (strstr (text, "tcp://broker:7702, connected for 30s"));
    assert_non_null (strstr (text, "agents       12"));
    assert_non_null (strstr (text, "139 up, 7 malformed"));
    free (out.text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_cli_render_malformed (void **state)
{
    pw_t *w = pw_new ();
    pw_map (w, 1);
    pw_str (w, "jobs");
    pw_str (w, "not a list");
    pv_doc_t *doc = s_decode (w);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_JOB_LIST, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), -2);
    assert_int_equal (cli_render (CLI_CMD_JOB_STATUS, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), -2);
    assert_int_equal (cli_render (CLI_CMD_NODE_LIST, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), -2);
    const char *text = s_capture_close (&out);
    assert_string_equal (text, "");
    free (out.text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_cli_reply_envelope (void **state)
{
    pw_t *w = pw_new ();
    char *details [] = { "tasks[0].params.msg: required", "second" };
    proto_reply_error (w, "req-5", PROTO_ERR_INVALID_JOB, "the job is invalid",
                       details, 2);
    pv_doc_t *doc = s_decode (w);
    const pv_t *data = NULL;
    s_capture_t err;
    s_capture_open (&err);
    assert_int_equal (cli_reply_data (doc, "req-5", &data, err.file),
                      CLI_EXIT_REFUSED);
    const char *text = s_capture_close (&err);
    assert_string_equal (text, "gridcli: the job is invalid (invalid_job)\n"
                               "  tasks[0].params.msg: required\n"
                               "  second\n");
    free (err.text);
    pv_doc_destroy (&doc);

    //  A job run option given after BACKEND ACTION came back as an unknown
    //  param: the error says where it goes; a param unknown by itself
    //  gets no such line
    pw_reset (w);
    char *unknown [] = { "tasks[0].params.timeout: unknown param of test echo",
                         "tasks[0].params.tmeout: unknown param of test echo" };
    proto_reply_error (w, "req-5", PROTO_ERR_INVALID_JOB, "the job is invalid",
                       unknown, 2);
    doc = s_decode (w);
    s_capture_open (&err);
    assert_int_equal (cli_reply_data (doc, "req-5", &data, err.file),
                      CLI_EXIT_REFUSED);
    text = s_capture_close (&err);
    assert_string_equal (text, "gridcli: the job is invalid (invalid_job)\n"
                               "  tasks[0].params.timeout: unknown param of "
                               "test echo\n"
                               "  (--timeout after BACKEND ACTION is read as a "
                               "param: give job run's options before "
                               "BACKEND)\n"
                               "  tasks[0].params.tmeout: unknown param of "
                               "test echo\n");
    free (err.text);
    pv_doc_destroy (&doc);

    //  An ok reply for another request id is malformed
    pw_reset (w);
    proto_reply_ok_begin (w, "req-other");
    pw_map (w, 0);
    doc = s_decode (w);
    s_capture_open (&err);
    assert_int_equal (cli_reply_data (doc, "req-5", &data, err.file),
                      CLI_EXIT_UNREACHABLE);
    s_capture_close (&err);
    free (err.text);
    pv_doc_destroy (&doc);

    pw_reset (w);
    proto_reply_ok_begin (w, "req-5");
    pw_map (w, 1);
    pw_str (w, "job");
    pw_str (w, JOB_ID);
    doc = s_decode (w);
    s_capture_open (&err);
    assert_int_equal (cli_reply_data (doc, "req-5", &data, err.file),
                      CLI_EXIT_OK);
    s_capture_close (&err);
    assert_true (pv_str_eq (pv_map_get (data, "job"), JOB_ID));
    free (err.text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

//  ---------------------------------------------------------------------
//  Transport

static void
test_cli_exchange_unreachable (void **state)
{
    char endpoint [300];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/nobody", s_dir);
    pw_t *w = pw_new ();
    proto_request_begin (w, "status", "req-6", 0);
    pv_doc_t *reply = NULL;
    char err [512] = "";
    int rc = cli_exchange (endpoint, pw_data (w), pw_size (w), 600, &reply,
                           err, sizeof err);
    assert_int_equal (rc, CLI_EXIT_UNREACHABLE);
    assert_null (reply);
    assert_non_null (strstr (err, "no answer from the broker at"));
    assert_non_null (strstr (err, endpoint));
    assert_non_null (strstr (err, "GRID_BROKER"));

    rc = cli_exchange ("nonsense://x", pw_data (w), pw_size (w), 600, &reply,
                       err, sizeof err);
    assert_int_equal (rc, CLI_EXIT_USAGE);
    pw_destroy (&w);
}

static void
test_cli_exchange_retry_same_id (void **state)
{
    s_fake_t fake;
    s_fake_init (&fake, "retry");
    fake.drop = 1;
    zactor_t *broker = zactor_new (s_fake_broker, &fake);
    assert_non_null (broker);

    char id [CLI_REQUEST_ID_LEN];
    cli_request_id_make (id, sizeof id);
    pw_t *w = pw_new ();
    proto_request_begin (w, "status", id, 0);
    pv_doc_t *reply = NULL;
    char err [512] = "";
    //  Generous: the first try is dropped on purpose, the second answered
    int rc = cli_exchange (fake.endpoint, pw_data (w), pw_size (w), 6000,
                           &reply, err, sizeof err);
    if (rc)
        fprintf (stderr, "exchange: %s\n", err);
    assert_int_equal (rc, CLI_EXIT_OK);
    const pv_t *data = NULL;
    assert_int_equal (cli_reply_data (reply, id, &data, stderr), CLI_EXIT_OK);
    assert_true (pv_str_eq (pv_map_get (data, "version"), "0.1.0"));
    pv_doc_destroy (&reply);
    pw_destroy (&w);
    zactor_destroy (&broker);

    assert_int_equal (fake.requests, 2);
    assert_int_equal (fake.malformed, 0);
    assert_string_equal (fake.ids [0], id);
    assert_string_equal (fake.ids [1], id);
}

//  ---------------------------------------------------------------------
//  The whole program against the fake broker

static int
s_run (s_capture_t *out, s_capture_t *err, ...)
{
    char *argv [32];
    int argc = 0;
    argv [argc++] = "gridcli";
    //  The fake broker speaks plaintext
    argv [argc++] = "--insecure";
    va_list list;
    va_start (list, err);
    char *word;
    while ((word = va_arg (list, char *)) && argc < 31)
        argv [argc++] = word;
    va_end (list);
    argv [argc] = NULL;
    s_capture_open (out);
    s_capture_open (err);
    int rc = cli_run (argc, argv, out->file, err->file);
    s_capture_close (out);
    s_capture_close (err);
    return rc;
}

static void
test_cli_run_wait (void **state)
{
    char *config = strdup (s_path ("empty.yaml"));
    s_write_file (config, "# nothing set\n");

    s_fake_t fake;
    s_fake_init (&fake, "wait");
    fake.running_polls = 2;
    fake.final = "completed";
    zactor_t *broker = zactor_new (s_fake_broker, &fake);
    s_capture_t out, err;
    int rc = s_run (&out, &err, "--config", config, "--broker", fake.endpoint,
                    "job", "run", "--target", "group:web", "test", "echo",
                    "--msg", "hi", "--wait", NULL);
    if (rc)
        fprintf (stderr, "%s%s", out.text, err.text);
    assert_int_equal (rc, CLI_EXIT_OK);
    assert_non_null (strstr (out.text, "web-01"));
    assert_non_null (strstr (out.text, "STATUS"));
    assert_non_null (strstr (out.text, "job " JOB_ID " completed"));
    //  Progress went to stderr, once per change (not a terminal)
    assert_non_null (strstr (err.text, JOB_ID " running  step 2/3"));
    free (out.text);
    free (err.text);
    zactor_destroy (&broker);
    assert_int_equal (fake.malformed, 0);
    assert_string_equal (fake.types [0], "job.submit");
    //  Watches ask for counts as the job changes; the whole record is
    //  fetched once, at the end
    assert_string_equal (fake.types [1], "job.watch");
    assert_string_equal (fake.types [2], "job.watch");
    assert_int_equal (fake.polls, 3);
    assert_string_equal (fake.types [4], "job.get");
    assert_int_equal (fake.gets, 1);
    //  A watch the broker holds until its timeout_ms comes back inside
    //  one try of the request (each try has a third of the 5 s)
    assert_true (fake.watch_ms > 0);
    assert_true (fake.watch_ms < 5000 / CLI_REQUEST_TRIES);

    //  A broker from before job.watch: --wait polls job.progress
    s_fake_init (&fake, "wait-nowatch");
    fake.running_polls = 2;
    fake.final = "completed";
    fake.no_watch = true;
    broker = zactor_new (s_fake_broker, &fake);
    rc = s_run (&out, &err, "--config", config, "--broker", fake.endpoint,
                "job", "run", "--target", "group:web", "test", "echo",
                "--msg", "hi", "--wait", NULL);
    if (rc)
        fprintf (stderr, "%s%s", out.text, err.text);
    assert_int_equal (rc, CLI_EXIT_OK);
    assert_non_null (strstr (out.text, "job " JOB_ID " completed"));
    assert_null (strstr (err.text, "unknown request type"));
    free (out.text);
    free (err.text);
    zactor_destroy (&broker);
    assert_string_equal (fake.types [1], "job.watch");
    assert_string_equal (fake.types [2], "job.progress");
    assert_int_equal (fake.polls, 3);
    assert_int_equal (fake.gets, 1);

    //  A broker from before job.progress: --wait polls the whole record
    s_fake_init (&fake, "wait-old");
    fake.running_polls = 2;
    fake.final = "completed";
    fake.old_broker = true;
    broker = zactor_new (s_fake_broker, &fake);
    rc = s_run (&out, &err, "--config", config, "--broker", fake.endpoint,
                "job", "run", "--target", "group:web", "test", "echo",
                "--msg", "hi", "--wait", NULL);
    if (rc)
        fprintf (stderr, "%s%s", out.text, err.text);
    assert_int_equal (rc, CLI_EXIT_OK);
    assert_non_null (strstr (out.text, "job " JOB_ID " completed"));
    assert_non_null (strstr (err.text, JOB_ID " running  step 2/3"));
    assert_null (strstr (err.text, "unknown request type"));
    free (out.text);
    free (err.text);
    zactor_destroy (&broker);
    assert_string_equal (fake.types [1], "job.watch");
    assert_string_equal (fake.types [2], "job.progress");
    assert_string_equal (fake.types [3], "job.get");
    assert_int_equal (fake.gets, 3);

    //  A failed job exits 1, in JSON too
    s_fake_init (&fake, "wait-failed");
    fake.final = "failed";
    broker = zactor_new (s_fake_broker, &fake);
    rc = s_run (&out, &err, "--config", config, "--broker", fake.endpoint,
                "--output", "json", "job", "run", "--wait", "--target", "all",
                "test", "fail", NULL);
    assert_int_equal (rc, CLI_EXIT_JOB_FAILED);
    assert_true (s_json_valid (out.text));
    free (out.text);
    free (err.text);

    //  job status of the same (failed) job exits 1 as well
    rc = s_run (&out, &err, "--config", config, "--broker", fake.endpoint,
                "job", "status", JOB_ID, NULL);
    assert_int_equal (rc, CLI_EXIT_JOB_FAILED);
    assert_non_null (strstr (out.text, "! web-02"));
    free (out.text);
    free (err.text);

    //  An error reply exits 4 with the message and the details
    rc = s_run (&out, &err, "--config", config, "--broker", fake.endpoint,
                "node", "info", "web-09", NULL);
    assert_int_equal (rc, CLI_EXIT_REFUSED);
    assert_non_null (strstr (err.text, "gridcli: no such thing (not_found)"));
    assert_non_null (strstr (err.text, "\n  second detail\n"));
    free (out.text);
    free (err.text);
    zactor_destroy (&broker);
    unlink (config);
    free (config);
}

static void
test_cli_run_unreachable (void **state)
{
    char *config = strdup (s_path ("empty.yaml"));
    s_write_file (config, "request_timeout: 600ms\n");
    char endpoint [300];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/none", s_dir);
    s_capture_t out, err;
    int rc = s_run (&out, &err, "--config", config, "--broker", endpoint,
                    "status", NULL);
    assert_int_equal (rc, CLI_EXIT_UNREACHABLE);
    assert_non_null (strstr (err.text, "gridcli: no answer from the broker"));
    assert_string_equal (out.text, "");
    free (out.text);
    free (err.text);
    unlink (config);
    free (config);
}

static void
test_cli_run_usage_errors (void **state)
{
    char *file = strdup (s_path ("bad-job.yaml"));
    s_write_file (file, "target: group:web\n"
                        "tasks:\n"
                        "  - backend: apt\n"
                        "    action: install\n"
                        "    condition: sometimes\n"
                        "strategy: whenever\n");
    s_capture_t out, err;
    int rc = s_run (&out, &err, "--broker", "ipc:///unused", "job", "run",
                    "-f", file, NULL);
    assert_int_equal (rc, CLI_EXIT_USAGE);
    //  Every problem, each with its path
    assert_non_null (strstr (err.text, "tasks[0].condition"));
    assert_non_null (strstr (err.text, "strategy"));
    free (out.text);
    free (err.text);

    rc = s_run (&out, &err, "job", "run", "--target", "group:", "t", "a",
                NULL);
    assert_int_equal (rc, CLI_EXIT_USAGE);
    assert_non_null (strstr (err.text, "gridcli: bad target"));
    assert_non_null (strstr (err.text, "gridcli job --help"));
    free (out.text);
    free (err.text);

    //  --print-config: the settings and where they came from, no command
    rc = s_run (&out, &err, "--config", "none", "--broker", "tcp://h:1",
                "--print-config", NULL);
    assert_int_equal (rc, CLI_EXIT_OK);
    assert_non_null (strstr (out.text, "broker: \"tcp://h:1\""));
    assert_non_null (strstr (out.text, "# flag --broker\n"));
    assert_non_null (strstr (out.text, "(no config file)"));
    free (out.text);
    free (err.text);
    rc = s_run (&out, &err, "--print-config", "job", "list", NULL);
    assert_int_equal (rc, CLI_EXIT_USAGE);
    assert_non_null (strstr (err.text, "takes no command"));
    free (out.text);
    free (err.text);

    rc = s_run (&out, &err, "--help", NULL);
    assert_int_equal (rc, CLI_EXIT_OK);
    assert_non_null (strstr (out.text, "Exit codes"));
    assert_non_null (strstr (out.text, "GRID_BROKER"));
    free (out.text);
    free (err.text);

    rc = s_run (&out, &err, "--version", NULL);
    assert_int_equal (rc, CLI_EXIT_OK);
    assert_non_null (strstr (out.text, "gridcli "));
    free (out.text);
    free (err.text);
    unlink (file);
    free (file);
}

//  ---------------------------------------------------------------------

//  ---------------------------------------------------------------------
//  Keys: the key commands, and which key pair gridcli speaks CURVE with

static void
test_cli_key_commands (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "key", "list", NULL),
                      0);
    assert_int_equal (args.command, CLI_CMD_KEY_LIST);
    pw_t *w = pw_new ();
    assert_int_equal (cli_request_build (&args, NULL, "k-1", w, NULL), 0);
    pv_doc_t *doc = s_decode (w);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "type"),
                            "key.list"));
    pv_doc_destroy (&doc);
    cli_args_clear (&args);

    //  A node id is sent as node, a public key as key
    assert_int_equal (s_parse (&args, err, sizeof err, "key", "accept",
                               "web-01", NULL), 0);
    assert_int_equal (args.command, CLI_CMD_KEY_ACCEPT);
    pw_reset (w);
    assert_int_equal (cli_request_build (&args, NULL, "k-2", w, NULL), 0);
    doc = s_decode (w);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "type"),
                            "key.accept"));
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "node"),
                            "web-01"));
    pv_doc_destroy (&doc);
    cli_args_clear (&args);
    zcert_t *cert = zcert_new ();
    char key [41];
    snprintf (key, sizeof key, "%s", zcert_public_txt (cert));
    zcert_destroy (&cert);
    assert_int_equal (s_parse (&args, err, sizeof err, "key", "reject", key,
                               NULL), 0);
    assert_int_equal (args.command, CLI_CMD_KEY_REJECT);
    pw_reset (w);
    assert_int_equal (cli_request_build (&args, NULL, "k-3", w, NULL), 0);
    doc = s_decode (w);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "key"), key));
    pv_doc_destroy (&doc);
    cli_args_clear (&args);
    pw_destroy (&w);

    //  A key that starts with '-' is a key, not an option
    const char *dashed = "-lK2fD.zR[Bx4&L1$Ni!yH]3{q8w*oP@cV%=/bT6";
    assert_int_equal (strlen (dashed), 40);
    assert_int_equal (s_parse (&args, err, sizeof err, "key", "delete",
                               dashed, NULL), 0);
    assert_string_equal (args.id, dashed);
    cli_args_clear (&args);

    //  Neither a node id nor a key; missing; unknown subcommand
    assert_int_equal (s_parse (&args, err, sizeof err, "key", "delete",
                               "web 01", NULL), -1);
    assert_non_null (strstr (err, "neither a node id nor a public key"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "key", "accept",
                               NULL), -1);
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "key", "grant", "x",
                               NULL), -1);
    cli_args_clear (&args);

    //  The key table marks pending keys
    const char *reply =
        "{keys: [{key: k1, kind: client, status: accepted, role: admin,"
        "         name: alice},"
        "        {key: k2, kind: agent, status: pending, node: web-01,"
        "         hostname: web-01.lan,"
        "         first_seen: \"2026-11-21T07:00:51.123Z\"}]}";
    char why [256];
    assert_int_equal (conf_parse (reply, strlen (reply), &doc, why,
                                  sizeof why), 0);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render (CLI_CMD_KEY_LIST, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), 0);
    s_capture_close (&out);
    assert_non_null (strstr (out.text, "  k1   client  accepted  admin"));
    assert_non_null (strstr (out.text, "! k2   agent   pending   web-01"));
    free (out.text);
    pv_doc_destroy (&doc);
}

static void
test_cli_keys_load (void **state)
{
    cli_args_t args;
    cli_settings_t settings;
    cli_keys_t keys;
    char err [1024];
    memset (&settings, 0, sizeof settings);
    assert_int_equal (s_parse (&args, err, sizeof err, "status", NULL), 0);

    //  No key anywhere: refused, with what to run
    assert_int_equal (cli_keys_load (&args, &settings, NULL, NULL, s_dir,
                                     &keys, err, sizeof err), -1);
    assert_non_null (strstr (err, "gridcli keygen"));

    //  --insecure (or the config file's insecure): no keys at all
    args.insecure = true;
    assert_int_equal (cli_keys_load (&args, &settings, NULL, NULL, s_dir,
                                     &keys, err, sizeof err), 0);
    assert_null (keys.cert);
    args.insecure = false;

    //  GRID_KEY and GRID_BROKER_KEY
    char client_key [KEYS_TEXT_SIZE], broker_key [KEYS_TEXT_SIZE];
    assert_int_equal (keys_generate (s_dir, "me", false, NULL, client_key,
                                     err, sizeof err), 0);
    assert_int_equal (keys_generate (s_dir, "broker", false, NULL,
                                     broker_key, err, sizeof err), 0);
    char me [600], broker [600];
    snprintf (me, sizeof me, "%s", s_path ("me.key"));
    snprintf (broker, sizeof broker, "%s", s_path ("broker.key"));
    //  A key pair but no broker key (HOME has none either)
    assert_int_equal (cli_keys_load (&args, &settings, me, NULL, s_dir,
                                     &keys, err, sizeof err), -1);
    assert_non_null (strstr (err, "--broker-key"));
    assert_int_equal (cli_keys_load (&args, &settings, me, broker, s_dir,
                                     &keys, err, sizeof err), 0);
    assert_non_null (keys.cert);
    assert_string_equal (zcert_public_txt (keys.cert), client_key);
    assert_string_equal (keys.broker_key, broker_key);
    cli_keys_clear (&keys);

    //  Flags win over the environment; a broker key may be given as text
    args.key = me;
    args.broker_key = broker_key;
    assert_int_equal (cli_keys_load (&args, &settings, "/nowhere.key",
                                     "/nowhere.key", s_dir, &keys, err,
                                     sizeof err), 0);
    assert_string_equal (keys.broker_key, broker_key);
    cli_keys_clear (&keys);

    //  Several broker keys (the broker's current and next one), each a
    //  file or Z85, in the flag and in GRID_BROKER_KEY
    char list [1400], both [200];
    snprintf (list, sizeof list, "%s,%s", broker, client_key);
    snprintf (both, sizeof both, "%s,%s", broker_key, client_key);
    args.broker_key = list;
    assert_int_equal (cli_keys_load (&args, &settings, NULL, NULL, s_dir,
                                     &keys, err, sizeof err), 0);
    assert_string_equal (keys.broker_key, both);
    cli_keys_clear (&keys);
    args.broker_key = NULL;
    assert_int_equal (cli_keys_load (&args, &settings, NULL, both, s_dir,
                                     &keys, err, sizeof err), 0);
    assert_string_equal (keys.broker_key, both);
    cli_keys_clear (&keys);
    //  Hostile lists: an empty element, one that is no key, more than 8
    const char *bad [] = {",", "KEY,", ",KEY", "KEY,,KEY", "KEY,nokey",
                          "MANY", NULL};
    for (int index = 0; bad [index]; index++) {
        char text [1000] = "";
        if (streq (bad [index], "MANY"))
            for (int key = 0; key < 9; key++)
                snprintf (text + strlen (text), sizeof text - strlen (text),
                          "%s%s", key ? "," : "", broker_key);
        else {
            const char *at = bad [index];
            while (*at) {
                if (strncmp (at, "KEY", 3) == 0) {
                    strcat (text, broker_key);
                    at += 3;
                }
                else {
                    size_t len = strlen (text);
                    text [len] = *at++;
                    text [len + 1] = 0;
                }
            }
        }
        args.broker_key = text;
        assert_int_equal (cli_keys_load (&args, &settings, NULL, NULL, s_dir,
                                         &keys, err, sizeof err), -1);
        assert_non_null (strstr (err, "broker key: "));
        if (streq (bad [index], "MANY"))
            assert_non_null (strstr (err, "more than 8"));
        else
        if (strstr (bad [index], "nokey"))
            assert_non_null (strstr (err, "key 2 of the list"));
        else
            assert_non_null (strstr (err, "is empty"));
    }
    args.broker_key = broker_key;

    //  A secret file others may read is refused
    assert_int_equal (chmod (s_path ("me.key_secret"), 0644), 0);
    assert_int_equal (cli_keys_load (&args, &settings, NULL, NULL, s_dir,
                                     &keys, err, sizeof err), -1);
    assert_non_null (strstr (err, "chmod 600"));
    cli_args_clear (&args);

    //  The config file's key, broker_key and insecure
    char *config = strdup (s_path ("keys.yaml"));
    char text [1400];
    snprintf (text, sizeof text, "key: %s\nbroker_key: %s\ninsecure: true\n",
              me, broker);
    s_write_file (config, text);
    assert_int_equal (s_parse (&args, err, sizeof err, "--config", config,
                               "status", NULL), 0);
    assert_int_equal (cli_settings_resolve (&args, NULL, NULL, NULL,
                                            &settings, err, sizeof err), 0);
    assert_string_equal (settings.key_path, me);
    assert_string_equal (settings.broker_key, broker);
    assert_true (settings.insecure);
    cli_settings_clear (&settings);
    cli_args_clear (&args);
    //  broker_key as a list, joined; a list of nothing or of a map refused
    snprintf (text, sizeof text, "key: %s\nbroker_key:\n  - %s\n  - '%s'\n",
              me, broker, client_key);
    s_write_file (config, text);
    assert_int_equal (s_parse (&args, err, sizeof err, "--config", config,
                               "status", NULL), 0);
    if (cli_settings_resolve (&args, NULL, NULL, NULL, &settings, err,
                              sizeof err) != 0)
        fail_msg ("%s", err);
    char joined [1400];
    snprintf (joined, sizeof joined, "%s,%s", broker, client_key);
    assert_string_equal (settings.broker_key, joined);
    cli_settings_clear (&settings);
    cli_args_clear (&args);
    const char *bad_lists [] = {"broker_key: []\n",
                                "broker_key:\n  - {a: b}\n",
                                "broker_key:\n  - 'A,B'\n", NULL};
    for (int index = 0; bad_lists [index]; index++) {
        s_write_file (config, bad_lists [index]);
        assert_int_equal (s_parse (&args, err, sizeof err, "--config",
                                   config, "status", NULL), 0);
        assert_int_equal (cli_settings_resolve (&args, NULL, NULL, NULL,
                                                &settings, err, sizeof err),
                          -1);
        assert_non_null (strstr (err, "broker_key"));
        cli_settings_clear (&settings);
        cli_args_clear (&args);
    }
    unlink (config);
    free (config);
    unlink (s_path ("me.key"));
    unlink (s_path ("me.key_secret"));
    unlink (s_path ("broker.key"));
    unlink (s_path ("broker.key_secret"));
}

static int
s_setup (void **state)
{
    //  The environment must not steer the program under test
    unsetenv ("GRID_BROKER");
    unsetenv ("GRID_CONFIG");
    unsetenv ("GRID_KEY");
    unsetenv ("GRID_BROKER_KEY");
    //  mkdtemp wants a template that ends in six 'X', which it replaces
    int len = snprintf (s_dir, sizeof s_dir, "/tmp/test_cli.");
    memset (s_dir + len, 'X', 6);
    s_dir [len + 6] = 0;
    return mkdtemp (s_dir) ? 0 : -1;
}

//  ---------------------------------------------------------------------
//  token, metrics, relay: parsing, requests, and rendering of canned
//  replies shaped as PROTOCOL.md 5.1 says

//  The request the command line ARGS builds, decoded; asserts its type.
static pv_doc_t *
s_request_of (const char *type, ...)
{
    char *argv [32];
    int argc = 0;
    argv [argc++] = "gridcli";
    va_list list;
    va_start (list, type);
    char *word;
    while ((word = va_arg (list, char *)) && argc < 31)
        argv [argc++] = word;
    va_end (list);
    argv [argc] = NULL;
    cli_args_t args;
    char err [512] = "";
    int rc = cli_args_parse (&args, argc, argv, err, sizeof err);
    if (rc != 0)
        fprintf (stderr, "parse: %s\n", err);
    assert_int_equal (rc, 0);
    pw_t *writer = pw_new ();
    assert_int_equal (cli_request_build (&args, NULL, "r1", writer, NULL), 0);
    pv_doc_t *doc = s_decode (writer);
    pw_destroy (&writer);
    cli_args_clear (&args);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "type"), type));
    return doc;
}

//  Renders DATA (the bytes in W) as COMMAND's table into a new string.
static char *
s_render_text (cli_command_t command, pw_t *w, int expect_rc)
{
    pv_doc_t *doc = s_decode (w);
    s_capture_t out;
    s_capture_open (&out);
    assert_int_equal (cli_render (command, pv_doc_root (doc),
                                  CLI_OUTPUT_TABLE, out.file), expect_rc);
    s_capture_close (&out);
    pv_doc_destroy (&doc);
    return out.text;
}

static void
test_cli_token_commands (void **state)
{
    cli_args_t args;
    char err [512];
    //  Parsing: a name and a role are needed, the role is one of three
    assert_int_equal (s_parse (&args, err, sizeof err, "token", "add", "ci",
                               NULL), -1);
    assert_non_null (strstr (err, "--role"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "token", "add", "ci",
                               "--role", "root", NULL), -1);
    assert_non_null (strstr (err, "viewer, operator or admin"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "token", "add",
                               "c/i", "--role", "admin", NULL), -1);
    assert_non_null (strstr (err, "not a token name"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "token", "revoke",
                               NULL), -1);
    assert_non_null (strstr (err, "needs a token name"));
    cli_args_clear (&args);
    assert_int_equal (s_parse (&args, err, sizeof err, "token", "drop",
                               NULL), -1);
    assert_non_null (strstr (err, "add, list, revoke"));
    cli_args_clear (&args);

    //  Requests
    pv_doc_t *doc = s_request_of ("token.add", "token", "add", "ci",
                                  "--role=operator", NULL);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "name"), "ci"));
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "role"),
                            "operator"));
    pv_doc_destroy (&doc);
    doc = s_request_of ("token.list", "token", "list", NULL);
    assert_int_equal (pv_size (pv_doc_root (doc)), 3);
    pv_doc_destroy (&doc);
    doc = s_request_of ("token.revoke", "token", "revoke", "ci", NULL);
    assert_true (pv_str_eq (pv_map_get (pv_doc_root (doc), "name"), "ci"));
    pv_doc_destroy (&doc);

    //  token.add: the token once, and that it cannot be shown again
    pw_t *w = pw_new ();
    pw_map (w, 4);
    pw_str (w, "name");
    pw_str (w, "ci");
    pw_str (w, "role");
    pw_str (w, "operator");
    pw_str (w, "token");
    pw_str (w, "gt_4f2c9a\x1b[2Jrest");
    pw_str (w, "created");
    pw_str (w, "2026-11-27T05:00:01.000Z");
    char *text = s_render_text (CLI_CMD_TOKEN_ADD, w, 0);
    assert_non_null (strstr (text, "token ci added (role operator, "
                                   "2026-11-27 05:00:01)"));
    //  Control characters never reach the terminal
    assert_non_null (strstr (text, "  gt_4f2c9a?[2Jrest\n"));
    assert_non_null (strstr (text, "cannot show it again"));
    assert_non_null (strstr (text, "gridcli token revoke ci"));
    free (text);
    //  No token in the reply: malformed
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "name");
    pw_str (w, "ci");
    free (s_render_text (CLI_CMD_TOKEN_ADD, w, -2));

    //  token.list
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "tokens");
    pw_array (w, 2);
    pw_map (w, 4);
    pw_str (w, "name");
    pw_str (w, "ci");
    pw_str (w, "role");
    pw_str (w, "operator");
    pw_str (w, "created");
    pw_str (w, "2026-11-27T05:00:01.000Z");
    pw_str (w, "last_used");
    pw_str (w, "2026-11-27T06:10:00.000Z");
    pw_map (w, 3);
    pw_str (w, "name");
    pw_str (w, "dashboard");
    pw_str (w, "role");
    pw_str (w, "viewer");
    pw_str (w, "created");
    pw_str (w, "2026-11-27T05:02:00.000Z");
    text = s_render_text (CLI_CMD_TOKEN_LIST, w, 0);
    assert_string_equal (text,
        "NAME       ROLE      CREATED              LAST-USED\n"
        "ci         operator  2026-11-27 05:00:01  2026-11-27 06:10:00\n"
        "dashboard  viewer    2026-11-27 05:02:00  -\n");
    //  The tokens themselves never appear in a list
    assert_null (strstr (text, "gt_"));
    free (text);
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "tokens");
    pw_array (w, 0);
    text = s_render_text (CLI_CMD_TOKEN_LIST, w, 0);
    assert_non_null (strstr (text, "no tokens"));
    free (text);
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "tokens");
    pw_str (w, "none");
    free (s_render_text (CLI_CMD_TOKEN_LIST, w, -2));

    //  token.revoke
    pw_reset (w);
    pw_map (w, 2);
    pw_str (w, "name");
    pw_str (w, "ci");
    pw_str (w, "revoked");
    pw_bool (w, true);
    text = s_render_text (CLI_CMD_TOKEN_REVOKE, w, 0);
    assert_string_equal (text, "token ci revoked\n");
    free (text);
    pw_destroy (&w);
}

static void
test_cli_metrics_command (void **state)
{
    cli_args_t args;
    char err [512];
    assert_int_equal (s_parse (&args, err, sizeof err, "metrics", "now",
                               NULL), -1);
    assert_non_null (strstr (err, "unexpected argument 'now'"));
    cli_args_clear (&args);
    pv_doc_t *doc = s_request_of ("metrics.get", "metrics", NULL);
    pv_doc_destroy (&doc);

    //  The text as it is, control characters but line breaks and tabs
    //  made harmless; a missing last newline is added
    pw_t *w = pw_new ();
    pw_map (w, 1);
    pw_str (w, "text");
    pw_str (w, "# HELP grid_nodes Nodes by status.\n"
               "# TYPE grid_nodes gauge\n"
               "grid_nodes{status=\"online\"} 3\n"
               "grid_jobs_total\t7\x07");
    char *text = s_render_text (CLI_CMD_METRICS, w, 0);
    assert_string_equal (text, "# HELP grid_nodes Nodes by status.\n"
                               "# TYPE grid_nodes gauge\n"
                               "grid_nodes{status=\"online\"} 3\n"
                               "grid_jobs_total\t7?\n");
    free (text);
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "text");
    pw_int (w, 3);
    free (s_render_text (CLI_CMD_METRICS, w, -2));
    pw_destroy (&w);
}

static void
test_cli_relay_command (void **state)
{
    pv_doc_t *doc = s_request_of ("relay.list", "relay", "list", NULL);
    pv_doc_destroy (&doc);

    pw_t *w = pw_new ();
    pw_map (w, 1);
    pw_str (w, "relays");
    pw_array (w, 2);
    pw_map (w, 5);
    pw_str (w, "name");
    pw_str (w, "rack-1");
    pw_str (w, "key");
    pw_str (w, "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID");
    pw_str (w, "agents");
    pw_int (w, 4800);
    pw_str (w, "connected");
    pw_bool (w, true);
    pw_str (w, "last_seen");
    pw_str (w, "2026-11-27T06:00:00.500Z");
    pw_map (w, 5);
    pw_str (w, "name");
    pw_str (w, "rack-2");
    pw_str (w, "key");
    pw_str (w, "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7");
    pw_str (w, "agents");
    pw_int (w, 0);
    pw_str (w, "connected");
    pw_bool (w, false);
    pw_str (w, "last_seen");
    pw_str (w, "2026-11-27T05:40:00.000Z");
    char *text = s_render_text (CLI_CMD_RELAY_LIST, w, 0);
    assert_string_equal (text,
        "  NAME    KEY                                       AGENTS  "
        "CONNECTED  LAST-SEEN\n"
        "  rack-1  Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID  4800    "
        "yes        2026-11-27 06:00:00\n"
        "! rack-2  rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7  0       "
        "no         2026-11-27 05:40:00\n");
    free (text);

    //  A relay behind another: an UPSTREAM column
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "relays");
    pw_array (w, 1);
    pw_map (w, 6);
    pw_str (w, "name");
    pw_str (w, "edge");
    pw_str (w, "key");
    pw_str (w, "k");
    pw_str (w, "agents");
    pw_int (w, 2);
    pw_str (w, "connected");
    pw_bool (w, true);
    pw_str (w, "last_seen");
    pw_str (w, "2026-11-27T06:00:00.000Z");
    pw_str (w, "upstream");
    pw_str (w, "rack-1");
    text = s_render_text (CLI_CMD_RELAY_LIST, w, 0);
    assert_non_null (strstr (text, "UPSTREAM"));
    assert_non_null (strstr (text, "rack-1"));
    free (text);

    //  A revoked relay, on a broker that knows relays by name only
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "relays");
    pw_array (w, 1);
    pw_map (w, 7);
    pw_str (w, "name");
    pw_str (w, "old");
    pw_str (w, "key");
    pw_str (w, "");
    pw_str (w, "agents");
    pw_int (w, 0);
    pw_str (w, "connected");
    pw_bool (w, false);
    pw_str (w, "last_seen");
    pw_nil (w);
    pw_str (w, "refused");
    pw_int (w, 2);
    pw_str (w, "revoked");
    pw_bool (w, true);
    text = s_render_text (CLI_CMD_RELAY_LIST, w, 0);
    assert_non_null (strstr (text, "! old   -    0       revoked    -\n"));
    free (text);

    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "relays");
    pw_array (w, 0);
    text = s_render_text (CLI_CMD_RELAY_LIST, w, 0);
    assert_string_equal (text, "no relays\n");
    free (text);
    pw_reset (w);
    pw_map (w, 0);
    free (s_render_text (CLI_CMD_RELAY_LIST, w, -2));

    //  key list: a relay's key shows its pool and its name
    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "keys");
    pw_array (w, 1);
    pw_map (w, 5);
    pw_str (w, "key");
    pw_str (w, "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID");
    pw_str (w, "kind");
    pw_str (w, "relay");
    pw_str (w, "status");
    pw_str (w, "accepted");
    pw_str (w, "name");
    pw_str (w, "rack-1");
    pw_str (w, "pool");
    pw_str (w, "rack1-*");
    text = s_render_text (CLI_CMD_KEY_LIST, w, 0);
    assert_true (strstr (text, "relay  accepted  rack1-*    rack-1")
                 != NULL);
    free (text);

    //  node info names the relay a node came through
    pw_reset (w);
    pw_map (w, 3);
    pw_str (w, "id");
    pw_str (w, "web-01");
    pw_str (w, "status");
    pw_str (w, "online");
    pw_str (w, "relay");
    pw_str (w, "rack-1");
    text = s_render_text (CLI_CMD_NODE_INFO, w, 0);
    assert_non_null (strstr (text, "relay"));
    assert_non_null (strstr (text, "rack-1"));
    free (text);
    pw_destroy (&w);
}

//  job run --limits, --lease, --stall-timeout: the job file fields
static void
test_cli_run_job_controls (void **state)
{
    pv_doc_t *doc = s_request_of ("job.submit", "job", "run", "--target",
                                  "any", "--limits", "apt.*=1,test.echo=2",
                                  "--lease", "2s", "--stall-timeout", "1m",
                                  "test", "echo", "--msg", "hi", NULL);
    const pv_t *job = pv_map_get (pv_doc_root (doc), "job");
    const pv_t *limits = pv_map_get (job, "limits");
    int64_t value = 0;
    assert_int_equal (pv_get_int (pv_map_get (limits, "apt.*"), &value), 0);
    assert_int_equal (value, 1);
    assert_int_equal (pv_get_int (pv_map_get (limits, "test.echo"), &value),
                      0);
    assert_int_equal (value, 2);
    assert_int_equal (pv_get_int (pv_map_get (job, "lease_ms"), &value), 0);
    assert_int_equal (value, 2000);
    assert_true (pv_str_eq (pv_map_get (job, "stall_timeout"), "1m"));
    //  The broker's own decoder takes it
    job_spec_t *spec = NULL;
    job_errors_t errors = { .count = 0 };
    assert_int_equal (job_spec_decode (job, &spec, &errors), 0);
    assert_int_equal (spec->lease_ms, 2000);
    assert_int_equal (spec->stall_timeout_ms, 60000);
    job_spec_destroy (&spec);
    job_errors_clear (&errors);
    pv_doc_destroy (&doc);

    cli_args_t args;
    char err [512];
    const char *bad [][2] = {
        {"--limits", "apt.install"}, {"--limits", "apt=2"},
        {"--limits", "apt.install=0"}, {"--lease", "10ms"},
        {"--lease", "2d"}, {"--stall-timeout", "soon"}
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        assert_int_equal (s_parse (&args, err, sizeof err, "job", "run",
                                   "--target", "all", bad [index][0],
                                   bad [index][1], "test", "echo", NULL), -1);
        assert_non_null (strstr (err, bad [index][0]));
        cli_args_clear (&args);
    }
    //  A job file has its own
    assert_int_equal (s_parse (&args, err, sizeof err, "job", "run", "-f",
                               "x.yaml", "--lease", "1s", NULL), -1);
    assert_non_null (strstr (err, "-f FILE"));
    cli_args_clear (&args);
}

static int
s_teardown (void **state)
{
    DIR *dir = opendir (s_dir);
    if (dir) {
        struct dirent *entry;
        while ((entry = readdir (dir)))
            if (!streq (entry->d_name, ".") && !streq (entry->d_name, ".."))
                unlink (s_path (entry->d_name));
        closedir (dir);
    }
    return rmdir (s_dir);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_cli_parse_params_after_action),
        cmocka_unit_test (test_cli_parse_wait_anywhere),
        cmocka_unit_test (test_cli_parse_run_options),
        cmocka_unit_test (test_cli_parse_missing_target),
        cmocka_unit_test (test_cli_parse_retry_dlq_queue),
        cmocka_unit_test (test_cli_parse_audit_list),
        cmocka_unit_test (test_cli_parse_job_output),
        cmocka_unit_test (test_cli_parse_bad_target),
        cmocka_unit_test (test_cli_parse_bad_duration),
        cmocka_unit_test (test_cli_parse_unknown_command),
        cmocka_unit_test (test_cli_parse_file_extra_args),
        cmocka_unit_test (test_cli_parse_other_commands),
        cmocka_unit_test (test_cli_parse_bad_values),
        cmocka_unit_test (test_cli_parse_schedule_errors),
        cmocka_unit_test (test_cli_settings_precedence),
        cmocka_unit_test (test_cli_request_ids_unique),
        cmocka_unit_test (test_cli_request_job_run),
        cmocka_unit_test (test_cli_request_invalid_inline_job),
        cmocka_unit_test (test_cli_request_other_commands),
        cmocka_unit_test (test_cli_request_job_file),
        cmocka_unit_test (test_cli_render_job_table),
        cmocka_unit_test (test_cli_render_job_not_run),
        cmocka_unit_test (test_cli_render_job_json),
        cmocka_unit_test (test_cli_render_progress),
        cmocka_unit_test (test_cli_header_line_long_label),
        cmocka_unit_test (test_cli_render_schedule_show),
        cmocka_unit_test (test_cli_render_lists),
        cmocka_unit_test (test_cli_render_malformed),
        cmocka_unit_test (test_cli_reply_envelope),
        cmocka_unit_test (test_cli_exchange_unreachable),
        cmocka_unit_test (test_cli_exchange_retry_same_id),
        cmocka_unit_test (test_cli_run_wait),
        cmocka_unit_test (test_cli_run_unreachable),
        cmocka_unit_test (test_cli_run_usage_errors),
        cmocka_unit_test (test_cli_key_commands),
        cmocka_unit_test (test_cli_keys_load),
        cmocka_unit_test (test_cli_token_commands),
        cmocka_unit_test (test_cli_metrics_command),
        cmocka_unit_test (test_cli_relay_command),
        cmocka_unit_test (test_cli_run_job_controls),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
