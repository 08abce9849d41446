/*  =========================================================================
    test_proto - every wire message and the client request envelope
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

#include "../proto/names.h"
#include "../proto/epoch.h"
#include "../proto/proto.h"

#define JOB_A "j-0193a1b2c3d4-0001"

static char *
s_dup (const char *text)
{
    char *copy = strdup (text);
    assert_non_null (copy);
    return copy;
}

static char **
s_list (size_t count, ...)
{
    char **list = calloc (count, sizeof (char *));
    assert_non_null (list);
    va_list args;
    va_start (args, count);
    for (size_t index = 0; index < count; index++)
        list [index] = s_dup (va_arg (args, const char *));
    va_end (args);
    return list;
}

//  COUNT key/value pairs from the arguments key, value, key, value...
static proto_kv_t *
s_pairs (size_t count, ...)
{
    proto_kv_t *pairs = calloc (count, sizeof (proto_kv_t));
    assert_non_null (pairs);
    va_list args;
    va_start (args, count);
    for (size_t index = 0; index < count; index++) {
        pairs [index].key = s_dup (va_arg (args, const char *));
        pairs [index].value = s_dup (va_arg (args, const char *));
    }
    va_end (args);
    return pairs;
}


//  ---------------------------------------------------------------------
//  One full message of each type

static proto_msg_t *
s_hello (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_HELLO);
    msg->node = s_dup ("web-01");
    msg->hostname = s_dup ("web-01.example.net");
    msg->groups = s_list (2, "web", "prod");
    msg->group_count = 2;
    msg->labels = s_pairs (2, "rack", "r1", "tier", "web.dev.us-east");
    msg->label_count = 2;
    msg->version = s_dup ("0.1.0");
    msg->concurrency = 4;
    msg->instance = s_dup ("9f2c4e81a07b3d55");
    msg->features = s_list (1, PROTO_FEATURE_RESULT_ACKS);
    msg->feature_count = 1;
    msg->backend_count = 2;
    msg->backends = calloc (2, sizeof (proto_backend_spec_t));
    assert_non_null (msg->backends);

    proto_backend_spec_t *apt = &msg->backends [0];
    apt->name = s_dup ("apt");
    apt->version = s_dup ("1.2");
    apt->action_count = 2;
    apt->actions = calloc (2, sizeof (proto_action_spec_t));
    assert_non_null (apt->actions);
    apt->actions [0].name = s_dup ("install");
    apt->actions [0].modify = true;
    apt->actions [0].help = s_dup ("Install a package");
    apt->actions [0].param_count = 2;
    apt->actions [0].params = calloc (2, sizeof (proto_param_spec_t));
    assert_non_null (apt->actions [0].params);
    proto_param_spec_t *param = &apt->actions [0].params [0];
    param->name = s_dup ("package");
    param->required = true;
    param->type = s_dup ("string");
    param->pattern = s_dup ("^[a-z0-9.+-]+$");
    param->help = s_dup ("Package name");
    param = &apt->actions [0].params [1];
    param->name = s_dup ("version");
    param->type = s_dup ("string");
    param->default_value = s_dup ("latest");
    param->help = s_dup ("");
    apt->actions [1].name = s_dup ("update");
    apt->actions [1].modify = true;
    apt->actions [1].help = s_dup ("Refresh the package index");
    apt->actions [1].param_count = 1;
    apt->actions [1].params = calloc (1, sizeof (proto_param_spec_t));
    assert_non_null (apt->actions [1].params);
    param = &apt->actions [1].params [0];
    param->name = s_dup ("retries");
    param->type = s_dup ("int");
    param->help = s_dup ("Attempts");
    param->min_value = -1;
    param->max_value = 5;

    proto_backend_spec_t *system = &msg->backends [1];
    system->name = s_dup ("system");
    system->action_count = 1;
    system->actions = calloc (1, sizeof (proto_action_spec_t));
    assert_non_null (system->actions);
    system->actions [0].name = s_dup ("uptime");
    system->actions [0].help = s_dup ("Seconds since boot");
    return msg;
}

static proto_msg_t *
s_heartbeat (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    msg->node = s_dup ("web-01");
    msg->running = 3;
    msg->queued = UINT32_MAX;
    return msg;
}

static proto_msg_t *
s_progress (proto_type_t type)
{
    proto_msg_t *msg = proto_msg_new (type);
    msg->node = s_dup ("db_2");
    msg->job = s_dup (JOB_A);
    msg->step = 1023;
    msg->attempt = 2;
    return msg;
}

static proto_msg_t *
s_ack (void)
{
    return s_progress (PROTO_ACK);
}

static proto_msg_t *
s_started (void)
{
    return s_progress (PROTO_STARTED);
}

static proto_msg_t *
s_task_progress (void)
{
    proto_msg_t *msg = s_progress (PROTO_PROGRESS);
    msg->percent = 42;
    msg->kind = s_dup ("downloading");
    msg->message = s_dup ("downloading nginx");
    return msg;
}

//  Progress with nothing but its place: percent -1, no kind, no message.
static proto_msg_t *
s_task_progress_bare (void)
{
    proto_msg_t *msg = s_progress (PROTO_PROGRESS);
    msg->percent = -1;
    return msg;
}

static proto_msg_t *
s_result (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
    msg->node = s_dup ("web-01");
    msg->job = s_dup (JOB_A);
    msg->step = 0;
    msg->attempt = 1;
    msg->status = s_dup ("failed");
    msg->output = s_dup ("line one\nline two \xc3\xa9\n");
    msg->error = s_dup ("E: Unable to locate package nginx-x");
    msg->exit_code = -1;
    msg->duration_ms = 1234567890123ULL;
    msg->truncated = true;
    msg->data = s_pairs (2, "load1", "0.42", "os", "Debian 12");
    msg->data_count = 2;
    return msg;
}

static proto_msg_t *
s_result_plain (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
    msg->node = s_dup ("web-01");
    msg->job = s_dup (JOB_A);
    msg->step = 5;
    msg->attempt = 1000;
    msg->status = s_dup ("success");
    msg->output = s_dup ("");
    msg->error = s_dup ("");
    msg->exit_code = INT32_MIN;
    return msg;
}

static proto_msg_t *
s_bye (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_BYE);
    msg->node = s_dup ("web-01");
    msg->reason = s_dup ("shutdown");
    return msg;
}

static proto_msg_t *
s_welcome (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_WELCOME);
    msg->node = s_dup ("web-01");
    msg->heartbeat_ms = 3600000;
    return msg;
}

static proto_msg_t *
s_result_ack (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT_ACK);
    msg->job = s_dup (JOB_A);
    msg->step = 7;
    msg->attempt = 3;
    return msg;
}

static proto_msg_t *
s_command (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_COMMAND);
    msg->job = s_dup (JOB_A);
    msg->step = 2;
    msg->attempt = 1;
    msg->backend = s_dup ("apt");
    msg->action = s_dup ("install");
    msg->params = s_pairs (2, "package", "nginx", "version", "1.22.1-9");
    msg->param_count = 2;
    msg->timeout_ms = 600000;
    msg->nodes = s_list (3, "web-01", "web-02", "web-03");
    msg->node_count = 3;
    msg->parallel = true;       //  A step of a DAG job
    //  To an agent that announced the trace feature
    msg->traceparent = s_dup ("00-4bf92f3577b34da6a3ce929d0e0e4736-"
                              "00f067aa0ba902b7-01");
    return msg;
}

static proto_msg_t *
s_command_broadcast (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_COMMAND);
    msg->job = s_dup (JOB_A);
    msg->step = 0;
    msg->attempt = 1;
    msg->backend = s_dup ("system");
    msg->action = s_dup ("uptime");
    msg->timeout_ms = 0;
    return msg;
}

static proto_msg_t *
s_cancel (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_CANCEL);
    msg->job = s_dup (JOB_A);
    msg->reason = s_dup ("cancelled by operator");
    msg->nodes = s_list (1, "web-02");
    msg->node_count = 1;
    return msg;
}

static proto_msg_t *
s_cancel_all (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_CANCEL);
    msg->job = s_dup (JOB_A);
    msg->reason = s_dup ("job timeout");
    return msg;
}

//  A reclaim: one attempt of one step on one node
static proto_msg_t *
s_cancel_attempt (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_CANCEL);
    msg->job = s_dup (JOB_A);
    msg->reason = s_dup ("reclaimed from web-02 (lease expired)");
    msg->nodes = s_list (1, "web-02");
    msg->node_count = 1;
    msg->step = 3;
    msg->attempt = 2;
    return msg;
}

static proto_msg_t *
s_error (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_ERROR);
    msg->code = s_dup ("unknown_node");
    msg->message = s_dup ("say hello first");
    return msg;
}

//  A standby's redirect (the redirect feature)
static proto_msg_t *
s_error_redirect (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_ERROR);
    msg->code = s_dup ("not_leader");
    msg->message = s_dup ("broker b is a standby; the active is a");
    msg->endpoint = s_dup ("tcp://10.0.0.1:7702");
    msg->epoch = 9;
    return msg;
}

//  A result whose streams went in output pieces
static proto_msg_t *
s_result_pieces (void)
{
    proto_msg_t *msg = s_result_plain ();
    free (msg->output);
    msg->output = s_dup ("the first 4 KiB...");
    msg->output_size = 3000000;
    msg->error_size = 1 << 20;
    msg->error_dropped = 123456789;
    msg->truncated = true;
    return msg;
}

static proto_msg_t *
s_welcome_capped (void)
{
    proto_msg_t *msg = s_welcome ();
    msg->max_output = 16 << 20;
    return msg;
}

static proto_msg_t *
s_output (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_OUTPUT);
    msg->node = s_dup ("web-01");
    msg->job = s_dup (JOB_A);
    msg->step = 2;
    msg->attempt = 1;
    msg->stream = s_dup ("stderr");
    msg->offset = 1 << 20;
    msg->chunk_len = 5;
    msg->chunk = (uint8_t *) malloc (5);
    memcpy (msg->chunk, "a\0\xff\xc3" "b", 5);
    msg->size = (1 << 20) + 5;
    return msg;
}

static proto_msg_t *
s_output_ack (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_OUTPUT_ACK);
    msg->job = s_dup (JOB_A);
    msg->step = 2;
    msg->attempt = 1;
    msg->stream = s_dup ("stdout");
    msg->offset = 0;
    return msg;
}

//  Results of two jobs, as the broker acknowledges them after a commit
#define JOB_B "j-0193a1b2c3d4-0002"

static proto_msg_t *
s_result_acks (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT_ACKS);
    const char *jobs = JOB_A "\0" JOB_B;
    size_t jobs_size = 2 * (strlen (JOB_A) + 1);
    msg->ack_count = 3;
    msg->acks = malloc (3 * sizeof (proto_ack_t) + jobs_size);
    assert_non_null (msg->acks);
    char *text = (char *) (msg->acks + 3);
    memcpy (text, jobs, jobs_size);
    msg->acks [0] = (proto_ack_t) { .job = text, .step = 2, .attempt = 1 };
    msg->acks [1] = (proto_ack_t) { .job = text + strlen (JOB_A) + 1,
                                    .step = 0, .attempt = 1000 };
    msg->acks [2] = (proto_ack_t) { .job = text, .step = 1023, .attempt = 3 };
    return msg;
}

//  Moves the result built by BUILDER into ENTRY (an entry of a results).
static void
s_entry_take (proto_msg_t *entry, proto_msg_t *(*builder) (void))
{
    proto_msg_t *result = builder ();
    *entry = *result;
    free (result);
}

//  Three results of one agent in one message: with data, plain, and one
//  whose streams went in output pieces
static proto_msg_t *
s_results (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULTS);
    msg->node = s_dup ("web-01");
    msg->result_count = 3;
    msg->results = calloc (3, sizeof (proto_msg_t));
    assert_non_null (msg->results);
    s_entry_take (&msg->results [0], s_result);
    s_entry_take (&msg->results [1], s_result_plain);
    s_entry_take (&msg->results [2], s_result_pieces);
    //  Each entry speaks for the message's node
    for (size_t index = 0; index < 3; index++) {
        free (msg->results [index].node);
        msg->results [index].node = s_dup ("web-01");
    }
    return msg;
}

//  A welcome that grants batched results
static proto_msg_t *
s_welcome_features (void)
{
    proto_msg_t *msg = s_welcome_capped ();
    msg->features = s_list (1, PROTO_FEATURE_RESULTS);
    msg->feature_count = 1;
    return msg;
}

//  An agent's facts
static proto_msg_t *
s_facts (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_FACTS);
    msg->node = s_dup ("web-01");
    msg->facts = s_pairs (3, "mem_mb", "8192", "os", "debian",
                          "pretty", "Debian GNU/Linux 12 (bookworm)");
    msg->fact_count = 3;
    return msg;
}

//  What a cluster's active sends an agent granted the epoch feature
#define S_EPOCH ((uint64_t) 1 << 40)

static proto_msg_t *
s_welcome_epoch (void)
{
    proto_msg_t *msg = s_welcome ();
    msg->features = s_list (1, PROTO_FEATURE_EPOCH);
    msg->feature_count = 1;
    msg->epoch = S_EPOCH;
    return msg;
}

static proto_msg_t *
s_command_epoch (void)
{
    proto_msg_t *msg = s_command ();
    msg->epoch = S_EPOCH;
    return msg;
}

static proto_msg_t *
s_cancel_epoch (void)
{
    proto_msg_t *msg = s_cancel_attempt ();
    msg->epoch = 7;
    return msg;
}

static proto_msg_t *
s_result_ack_epoch (void)
{
    proto_msg_t *msg = s_result_ack ();
    msg->epoch = 1;
    return msg;
}

static proto_msg_t *
s_result_acks_epoch (void)
{
    proto_msg_t *msg = s_result_acks ();
    msg->epoch = INT64_MAX;
    return msg;
}

static proto_msg_t *
s_output_ack_epoch (void)
{
    proto_msg_t *msg = s_output_ack ();
    msg->epoch = 300;
    return msg;
}

#define S_SHA "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

static proto_msg_t *
s_blob_get (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_BLOB_GET);
    msg->node = s_dup ("web-01");
    msg->sha256 = s_dup (S_SHA);
    msg->offset = PROTO_BLOB_CHUNK_BYTES;
    return msg;
}

static proto_msg_t *
s_blob_chunk (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_BLOB_CHUNK);
    msg->sha256 = s_dup (S_SHA);
    msg->offset = 0;
    msg->size = 4;
    msg->chunk = (uint8_t *) s_dup ("test");
    msg->chunk_len = 4;
    return msg;
}

static proto_msg_t *
s_blob_chunk_refused (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_BLOB_CHUNK);
    msg->sha256 = s_dup (S_SHA);
    msg->offset = 9;
    msg->size = 4;
    msg->error = s_dup ("offset 9 is past the blob's end (4 bytes)");
    return msg;
}

typedef proto_msg_t *(s_builder_fn) (void);

static s_builder_fn *s_builders [] = {
    s_hello, s_heartbeat, s_ack, s_started, s_result, s_result_plain,
    s_bye, s_welcome, s_result_ack, s_command, s_command_broadcast,
    s_cancel, s_cancel_all, s_cancel_attempt, s_error, s_error_redirect,
    s_task_progress, s_task_progress_bare,
    s_result_pieces, s_welcome_capped, s_output, s_output_ack,
    s_result_acks, s_results, s_welcome_features, s_facts,
        s_welcome_epoch,
    s_command_epoch, s_cancel_epoch, s_result_ack_epoch, s_result_acks_epoch,
    s_output_ack_epoch, s_blob_get, s_blob_chunk, s_blob_chunk_refused,
};
#define S_BUILDER_COUNT (sizeof s_builders / sizeof s_builders [0])

//  Encodes a message built by BUILDER into a new writer.
static pw_t *
s_encoded (s_builder_fn *builder)
{
    proto_msg_t *msg = builder ();
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    proto_msg_destroy (&msg);
    return writer;
}


//  ---------------------------------------------------------------------
//  Field-by-field comparison

static void
s_assert_text (const char *a, const char *b)
{
    if (!a || !b)
        assert_ptr_equal (a, b);
    else
        assert_string_equal (a, b);
}

static void
s_assert_strings (char **a, size_t a_count, char **b, size_t b_count)
{
    assert_int_equal (a_count, b_count);
    for (size_t index = 0; index < a_count; index++)
        s_assert_text (a [index], b [index]);
}

static void
s_assert_pairs (proto_kv_t *a, size_t a_count, proto_kv_t *b,
                size_t b_count)
{
    assert_int_equal (a_count, b_count);
    for (size_t index = 0; index < a_count; index++) {
        s_assert_text (a [index].key, b [index].key);
        s_assert_text (a [index].value, b [index].value);
    }
}

static void
s_assert_backends (const proto_msg_t *a, const proto_msg_t *b)
{
    assert_int_equal (a->backend_count, b->backend_count);
    for (size_t index = 0; index < a->backend_count; index++) {
        proto_backend_spec_t *x = &a->backends [index];
        proto_backend_spec_t *y = &b->backends [index];
        s_assert_text (x->name, y->name);
        assert_int_equal (x->action_count, y->action_count);
        for (size_t action = 0; action < x->action_count; action++) {
            proto_action_spec_t *p = &x->actions [action];
            proto_action_spec_t *q = &y->actions [action];
            s_assert_text (p->name, q->name);
            assert_int_equal (p->modify, q->modify);
            s_assert_text (p->help, q->help);
            assert_int_equal (p->param_count, q->param_count);
            for (size_t param = 0; param < p->param_count; param++) {
                proto_param_spec_t *m = &p->params [param];
                proto_param_spec_t *n = &q->params [param];
                s_assert_text (m->name, n->name);
                assert_int_equal (m->required, n->required);
                s_assert_text (m->type, n->type);
                s_assert_text (m->pattern, n->pattern);
                s_assert_text (m->default_value, n->default_value);
                s_assert_text (m->help, n->help);
                assert_true (m->min_value == n->min_value);
                assert_true (m->max_value == n->max_value);
            }
        }
    }
}

static void
s_assert_same (const proto_msg_t *a, const proto_msg_t *b)
{
    assert_int_equal (a->type, b->type);
    assert_int_equal (a->result_count, b->result_count);
    for (size_t index = 0; index < a->result_count; index++)
        s_assert_same (&a->results [index], &b->results [index]);
    s_assert_text (a->node, b->node);
    s_assert_text (a->hostname, b->hostname);
    s_assert_strings (a->groups, a->group_count, b->groups, b->group_count);
    s_assert_pairs (a->labels, a->label_count, b->labels, b->label_count);
    s_assert_backends (a, b);
    s_assert_text (a->version, b->version);
    assert_int_equal (a->concurrency, b->concurrency);
    assert_int_equal (a->running, b->running);
    assert_int_equal (a->queued, b->queued);
    s_assert_text (a->job, b->job);
    assert_int_equal (a->step, b->step);
    assert_int_equal (a->attempt, b->attempt);
    s_assert_text (a->status, b->status);
    s_assert_text (a->output, b->output);
    s_assert_text (a->error, b->error);
    s_assert_text (a->endpoint, b->endpoint);
    assert_int_equal (a->exit_code, b->exit_code);
    assert_true (a->duration_ms == b->duration_ms);
    assert_int_equal (a->truncated, b->truncated);
    s_assert_pairs (a->data, a->data_count, b->data, b->data_count);
    s_assert_pairs (a->facts, a->fact_count, b->facts, b->fact_count);
    s_assert_text (a->backend, b->backend);
    s_assert_text (a->action, b->action);
    s_assert_pairs (a->params, a->param_count, b->params, b->param_count);
    assert_true (a->timeout_ms == b->timeout_ms);
    assert_true (a->parallel == b->parallel);
    s_assert_text (a->traceparent, b->traceparent);
    s_assert_strings (a->nodes, a->node_count, b->nodes, b->node_count);
    assert_int_equal (a->heartbeat_ms, b->heartbeat_ms);
    s_assert_text (a->reason, b->reason);
    s_assert_text (a->code, b->code);
    s_assert_text (a->message, b->message);
    assert_true (a->output_size == b->output_size);
    assert_true (a->error_size == b->error_size);
    assert_true (a->output_dropped == b->output_dropped);
    assert_true (a->error_dropped == b->error_dropped);
    s_assert_text (a->stream, b->stream);
    s_assert_text (a->sha256, b->sha256);
    assert_true (a->offset == b->offset);
    assert_true (a->size == b->size);
    assert_true (a->max_output == b->max_output);
    assert_true (a->epoch == b->epoch);
    assert_int_equal (a->chunk_len, b->chunk_len);
    if (a->chunk_len)
        assert_memory_equal (a->chunk, b->chunk, a->chunk_len);
    s_assert_strings (a->features, a->feature_count, b->features,
                      b->feature_count);
    assert_int_equal (a->ack_count, b->ack_count);
    for (size_t index = 0; index < a->ack_count; index++) {
        s_assert_text (a->acks [index].job, b->acks [index].job);
        assert_int_equal (a->acks [index].step, b->acks [index].step);
        assert_int_equal (a->acks [index].attempt, b->acks [index].attempt);
    }
}


//  ---------------------------------------------------------------------
//  Round trips and truncation

static void
test_proto_round_trip (void **state)
{
    for (size_t index = 0; index < S_BUILDER_COUNT; index++) {
        proto_msg_t *sent = s_builders [index] ();
        pw_t *writer = pw_new ();
        assert_int_equal (proto_msg_encode (sent, writer), 0);

        proto_msg_t *got = NULL;
        char why [256] = "";
        int rc = proto_msg_decode (pw_data (writer), pw_size (writer), &got,
                                   why, sizeof why);
        if (rc != 0)
            fail_msg ("%s: %s", proto_type_name (sent->type), why);
        s_assert_same (sent, got);

        //  Encoding what was decoded gives the same bytes
        pw_t *again = pw_new ();
        assert_int_equal (proto_msg_encode (got, again), 0);
        assert_int_equal (pw_size (again), pw_size (writer));
        assert_memory_equal (pw_data (again), pw_data (writer),
                             pw_size (writer));
        pw_destroy (&again);
        pw_destroy (&writer);
        proto_msg_destroy (&got);
        proto_msg_destroy (&sent);
        assert_null (sent);
    }
    proto_msg_t *none = NULL;
    proto_msg_destroy (&none);
}

static void
test_proto_every_truncation_refused (void **state)
{
    for (size_t index = 0; index < S_BUILDER_COUNT; index++) {
        pw_t *writer = s_encoded (s_builders [index]);
        for (size_t size = 0; size < pw_size (writer); size++) {
            proto_msg_t *msg = NULL;
            char why [256];
            assert_int_equal (proto_msg_decode (pw_data (writer), size,
                                                &msg, why, sizeof why), -2);
            assert_null (msg);
            assert_true (strlen (why) > 0);
        }
        pw_destroy (&writer);
    }
}

static void
test_proto_trailing_bytes_refused (void **state)
{
    for (size_t index = 0; index < S_BUILDER_COUNT; index++) {
        pw_t *writer = s_encoded (s_builders [index]);
        pw_nil (writer);
        proto_msg_t *msg = NULL;
        assert_int_equal (proto_msg_decode (pw_data (writer),
                                            pw_size (writer), &msg, NULL, 0),
                          -2);
        assert_null (msg);
        pw_destroy (&writer);
    }
}

static void
test_proto_type_names (void **state)
{
    assert_string_equal (proto_type_name (PROTO_HELLO), "hello");
    assert_string_equal (proto_type_name (PROTO_RESULT_ACK), "result_ack");
    assert_string_equal (proto_type_name (PROTO_ERROR), "error");
    assert_string_equal (proto_type_name ((proto_type_t) 0), "?");
    assert_string_equal (proto_type_name ((proto_type_t) 99), "?");
}


//  ---------------------------------------------------------------------
//  Hostile and wrong input. s_mutate copies the top-level map of a valid
//  encoding, replacing KEY's value with RAW (or dropping KEY when RAW is
//  NULL, or adding KEY when it was absent).

static pw_t *
s_mutate (const pw_t *valid, const char *key, const void *raw,
          size_t raw_len)
{
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (valid), pw_size (valid), &doc,
                                     NULL, 0), 0);
    const pv_t *root = pv_doc_root (doc);
    bool present = pv_map_get (root, key) != NULL;
    size_t count = pv_size (root);
    if (!raw && present)
        count--;
    if (raw && !present)
        count++;
    pw_t *writer = pw_new ();
    pw_map (writer, count);
    for (size_t index = 0; index < pv_size (root); index++) {
        const pv_t *name = pv_map_key_at (root, index);
        if (pv_str_eq (name, key)) {
            if (raw) {
                pw_pv (writer, name);
                pw_raw (writer, raw, raw_len);
            }
            continue;
        }
        pw_pv (writer, name);
        pw_pv (writer, pv_map_value_at (root, index));
    }
    if (raw && !present) {
        pw_str (writer, key);
        pw_raw (writer, raw, raw_len);
    }
    pv_doc_destroy (&doc);
    return writer;
}

//  The encoding of one value, for s_mutate.
static pw_t *
s_value_str (const char *text, size_t len)
{
    pw_t *writer = pw_new ();
    pw_strn (writer, text, len);
    return writer;
}

static pw_t *
s_value_int (int64_t number)
{
    pw_t *writer = pw_new ();
    pw_int (writer, number);
    return writer;
}

//  Decodes the message of BUILDER with KEY set to VALUE (NULL: dropped)
//  and asserts a refusal whose reason contains EXPECT.
static void
s_expect_refused (s_builder_fn *builder, const char *key, pw_t *value,
                  const char *expect)
{
    pw_t *valid = s_encoded (builder);
    pw_t *bad = s_mutate (valid, key, value ? pw_data (value) : NULL,
                          value ? pw_size (value) : 0);
    proto_msg_t *msg = NULL;
    char why [256] = "";
    int rc = proto_msg_decode (pw_data (bad), pw_size (bad), &msg, why,
                               sizeof why);
    if (rc != -2)
        fail_msg ("%s=... was accepted", key);
    assert_null (msg);
    if (!strstr (why, expect))
        fail_msg ("reason '%s' lacks '%s'", why, expect);
    pw_destroy (&bad);
    pw_destroy (&valid);
    pw_destroy (&value);
}

//  Writes VALUE with the pairs of every map in reverse order.
static void
s_write_reversed (pw_t *writer, const pv_t *value)
{
    if (pv_type (value) == PV_MAP) {
        size_t count = pv_size (value);
        pw_map (writer, count);
        for (size_t index = count; index-- > 0;) {
            pw_pv (writer, pv_map_key_at (value, index));
            s_write_reversed (writer, pv_map_value_at (value, index));
        }
    }
    else
    if (pv_type (value) == PV_ARRAY) {
        pw_array (writer, pv_size (value));
        for (size_t index = 0; index < pv_size (value); index++)
            s_write_reversed (writer, pv_array_at (value, index));
    }
    else
        pw_pv (writer, value);
}

//  Keys may come in any order: the decoder finds each field wherever it
//  is, and reports problems in schema order all the same.
static void
test_proto_any_key_order (void **state)
{
    for (size_t index = 0; index < S_BUILDER_COUNT; index++) {
        proto_msg_t *sent = s_builders [index] ();
        pw_t *writer = pw_new ();
        assert_int_equal (proto_msg_encode (sent, writer), 0);
        pv_doc_t *doc = NULL;
        assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer),
                                         &doc, NULL, 0), 0);
        pw_t *reversed = pw_new ();
        s_write_reversed (reversed, pv_doc_root (doc));
        pv_doc_destroy (&doc);

        proto_msg_t *got = NULL;
        char why [256] = "";
        if (proto_msg_decode (pw_data (reversed), pw_size (reversed), &got,
                              why, sizeof why))
            fail_msg ("%s: %s", proto_type_name (sent->type), why);
        s_assert_same (sent, got);
        pw_t *again = pw_new ();
        assert_int_equal (proto_msg_encode (got, again), 0);
        assert_int_equal (pw_size (again), pw_size (writer));
        assert_memory_equal (pw_data (again), pw_data (writer),
                             pw_size (writer));
        pw_destroy (&again);
        proto_msg_destroy (&got);
        pw_destroy (&reversed);
        pw_destroy (&writer);
        proto_msg_destroy (&sent);
    }

    //  exit_code comes first on the wire, node first in the schema
    pw_t *valid = s_encoded (s_result);
    pw_t *value = s_value_str ("1", 1);
    pw_t *bad = s_mutate (valid, "exit_code", pw_data (value),
                          pw_size (value));
    pw_destroy (&value);
    value = s_value_str ("web 01", 6);
    pw_t *worse = s_mutate (bad, "node", pw_data (value), pw_size (value));
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (worse), pw_size (worse), &doc,
                                     NULL, 0), 0);
    pw_t *reversed = pw_new ();
    s_write_reversed (reversed, pv_doc_root (doc));
    proto_msg_t *msg = NULL;
    char why [256] = "";
    assert_int_equal (proto_msg_decode (pw_data (reversed),
                                        pw_size (reversed), &msg, why,
                                        sizeof why), -2);
    assert_null (msg);
    assert_non_null (strstr (why, "result.node: invalid name 'web 01'"));
    pv_doc_destroy (&doc);
    pw_destroy (&reversed);
    pw_destroy (&worse);
    pw_destroy (&bad);
    pw_destroy (&value);

    //  An unknown key wins over a missing field, wherever it is
    pw_t *dropped = s_mutate (valid, "truncated", NULL, 0);
    value = s_value_int (1);
    bad = s_mutate (dropped, "zzz", pw_data (value), pw_size (value));
    assert_int_equal (proto_msg_decode (pw_data (bad), pw_size (bad), &msg,
                                        why, sizeof why), -2);
    assert_string_equal (why, "result: unknown key 'zzz'");
    pw_destroy (&bad);
    pw_destroy (&value);
    pw_destroy (&dropped);
    pw_destroy (&valid);
}

static void
test_proto_version_and_type_refused (void **state)
{
    s_expect_refused (s_heartbeat, "v", s_value_int (7),
                      "unsupported version 7 (speaks 1 to 2)");
    s_expect_refused (s_heartbeat, "v", s_value_int (0),
                      "unsupported version 0 (speaks 1 to 2)");
    s_expect_refused (s_heartbeat, "v", s_value_str ("1", 1),
                      "v: expected int");
    s_expect_refused (s_heartbeat, "v", NULL, "v: required");
    s_expect_refused (s_heartbeat, "type", s_value_str ("bogus", 5),
                      "unknown type 'bogus'");
    s_expect_refused (s_heartbeat, "type", s_value_str ("ok", 2),
                      "unknown type 'ok'");
    s_expect_refused (s_heartbeat, "type", s_value_int (1),
                      "type: expected string");
    s_expect_refused (s_heartbeat, "type", NULL, "type: required");

    //  Not a map at all
    pw_t *writer = pw_new ();
    pw_array (writer, 0);
    proto_msg_t *msg = NULL;
    char why [256];
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &msg, why, sizeof why), -2);
    assert_non_null (strstr (why, "expected a map"));
    pw_destroy (&writer);
}

static void
test_proto_wrong_types_refused (void **state)
{
    s_expect_refused (s_result, "exit_code", s_value_str ("1", 1),
                      "result.exit_code: expected int");
    s_expect_refused (s_result, "truncated", s_value_str ("yes", 3),
                      "result.truncated: expected bool");
    s_expect_refused (s_result, "data", s_value_str ("x", 1),
                      "result.data: expected map");
    s_expect_refused (s_hello, "groups", s_value_str ("web", 3),
                      "hello.groups: expected array");
    s_expect_refused (s_hello, "labels", s_value_int (1),
                      "hello.labels: expected map");
    s_expect_refused (s_hello, "backends", s_value_int (1),
                      "hello.backends: expected array");
    s_expect_refused (s_command, "params", s_value_str ("x", 1),
                      "command.params: expected map");
    s_expect_refused (s_heartbeat, "node", s_value_int (3),
                      "heartbeat.node: expected string");

    //  Floats are not ints
    pw_t *real = pw_new ();
    pw_float (real, 1.0);
    s_expect_refused (s_ack, "step", real, "ack.step: expected int");

    //  Nested structures name the path
    pw_t *backends = pw_new ();
    pw_array (backends, 1);
    pw_map (backends, 2);
    pw_str (backends, "name");
    pw_str (backends, "apt");
    pw_str (backends, "actions");
    pw_array (backends, 1);
    pw_map (backends, 4);
    pw_str (backends, "name");
    pw_str (backends, "install");
    pw_str (backends, "kind");
    pw_str (backends, "delete");
    pw_str (backends, "help");
    pw_str (backends, "");
    pw_str (backends, "params");
    pw_array (backends, 0);
    s_expect_refused (s_hello, "backends", backends,
                      "hello.backends[0].actions[0].kind: expected "
                      "\"query\" or \"modify\"");

    backends = pw_new ();
    pw_array (backends, 1);
    pw_map (backends, 3);
    pw_str (backends, "name");
    pw_str (backends, "apt");
    pw_str (backends, "actions");
    pw_array (backends, 0);
    pw_str (backends, "extra");
    pw_nil (backends);
    s_expect_refused (s_hello, "backends", backends,
                      "hello.backends[0]: unknown key 'extra'");

    backends = pw_new ();
    pw_array (backends, 1);
    pw_map (backends, 1);
    pw_str (backends, "name");
    pw_str (backends, "apt");
    s_expect_refused (s_hello, "backends", backends,
                      "hello.backends[0].actions: required");

    //  A backend's version is text when given
    backends = pw_new ();
    pw_array (backends, 1);
    pw_map (backends, 3);
    pw_str (backends, "name");
    pw_str (backends, "apt");
    pw_str (backends, "actions");
    pw_array (backends, 0);
    pw_str (backends, "version");
    pw_int (backends, 2);
    s_expect_refused (s_hello, "backends", backends,
                      "hello.backends[0].version: expected string");
}

//  A backends list of one action with one param whose map has COUNT
//  extra int pairs from the arguments (key, value, ...).
static pw_t *
s_backends_with_param (size_t count, ...)
{
    pw_t *writer = pw_new ();
    pw_array (writer, 1);
    pw_map (writer, 2);
    pw_str (writer, "name");
    pw_str (writer, "test");
    pw_str (writer, "actions");
    pw_array (writer, 1);
    pw_map (writer, 4);
    pw_str (writer, "name");
    pw_str (writer, "sleep");
    pw_str (writer, "kind");
    pw_str (writer, "query");
    pw_str (writer, "help");
    pw_str (writer, "");
    pw_str (writer, "params");
    pw_array (writer, 1);
    pw_map (writer, 4 + count);
    pw_str (writer, "name");
    pw_str (writer, "seconds");
    pw_str (writer, "required");
    pw_bool (writer, true);
    pw_str (writer, "type");
    pw_str (writer, "int");
    pw_str (writer, "help");
    pw_str (writer, "");
    va_list args;
    va_start (args, count);
    for (size_t index = 0; index < count; index++) {
        pw_str (writer, va_arg (args, const char *));
        pw_int (writer, va_arg (args, int));
    }
    va_end (args);
    return writer;
}

static void
test_proto_param_range (void **state)
{
    const char *path = "hello.backends[0].actions[0].params[0]";
    char expect [128];
    snprintf (expect, sizeof expect, "%s: min and max come together", path);
    s_expect_refused (s_hello, "backends", s_backends_with_param (1, "min", 1),
                      expect);
    s_expect_refused (s_hello, "backends", s_backends_with_param (1, "max", 1),
                      expect);
    snprintf (expect, sizeof expect, "%s: min must be below max", path);
    s_expect_refused (s_hello, "backends",
                      s_backends_with_param (2, "min", 5, "max", 5), expect);
    s_expect_refused (s_hello, "backends",
                      s_backends_with_param (2, "min", 0, "max", 0), expect);

    //  A range is decoded into the spec
    pw_t *valid = s_encoded (s_hello);
    pw_t *value = s_backends_with_param (2, "max", 60, "min", -3);
    pw_t *ok = s_mutate (valid, "backends", pw_data (value), pw_size (value));
    proto_msg_t *msg = NULL;
    char why [256] = "";
    assert_int_equal (proto_msg_decode (pw_data (ok), pw_size (ok), &msg, why,
                                        sizeof why), 0);
    proto_param_spec_t *param = &msg->backends [0].actions [0].params [0];
    assert_true (param->min_value == -3);
    assert_true (param->max_value == 60);

    //  A range that is not in force (min >= max) is not sent at all
    param->min_value = 7;
    param->max_value = 7;
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    proto_msg_t *again = NULL;
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &again, NULL, 0), 0);
    param = &again->backends [0].actions [0].params [0];
    assert_true (param->min_value == 0 && param->max_value == 0);
    proto_msg_destroy (&again);
    proto_msg_destroy (&msg);
    pw_destroy (&writer);
    pw_destroy (&ok);
    pw_destroy (&value);
    pw_destroy (&valid);
}

//  Output pieces and the sizes a result gives them are checked strictly,
//  on the way in and on the way out.
static void
test_proto_output_pieces_refused (void **state)
{
    s_expect_refused (s_output, "stream", s_value_str ("stdin", 5),
                      "unknown stream");
    s_expect_refused (s_output, "data", s_value_str ("abc", 3),
                      "expected binary");
    pw_t *empty = pw_new ();
    pw_bin (empty, "", 0);
    s_expect_refused (s_output, "data", empty, "output.data");
    pw_t *huge = pw_new ();
    uint8_t *bytes = (uint8_t *) calloc (1, PROTO_MAX_CHUNK + 1);
    pw_bin (huge, bytes, PROTO_MAX_CHUNK + 1);
    free (bytes);
    s_expect_refused (s_output, "data", huge, "output.data");
    s_expect_refused (s_output, "size", s_value_int (1 << 20),
                      "past the stream's size");
    s_expect_refused (s_output, "size", s_value_int (PROTO_MAX_STREAM + 1),
                      "output.size");
    s_expect_refused (s_output, "offset", s_value_int (-1), "output.offset");
    s_expect_refused (s_output, "data", NULL, "required");
    s_expect_refused (s_output_ack, "offset", NULL, "required");
    s_expect_refused (s_result_pieces, "output_size", s_value_int (0),
                      "result.output_size");
    s_expect_refused (s_result_pieces, "error_size", NULL,
                      "a dropped count needs its stream's size");
    s_expect_refused (s_welcome_capped, "max_output",
                      s_value_int (PROTO_MAX_STREAM + 1),
                      "welcome.max_output");
    //  An epoch is a positive int: 0 is never written, so never read
    s_expect_refused (s_command_epoch, "epoch", s_value_int (0),
                      "command.epoch");
    s_expect_refused (s_welcome_epoch, "epoch", s_value_int (-1),
                      "welcome.epoch");
    s_expect_refused (s_result_ack_epoch, "epoch", s_value_str ("1", 1),
                      "result_ack.epoch");
    //  A piece that does not lie inside its stream is never encoded
    proto_msg_t *msg = s_output ();
    msg->size = msg->offset;
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    msg->size = msg->offset + msg->chunk_len;
    msg->chunk_len = 0;
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    pw_destroy (&writer);
    proto_msg_destroy (&msg);
}

static void
test_proto_ranges_refused (void **state)
{
    s_expect_refused (s_ack, "step", s_value_int (1024), "ack.step");
    s_expect_refused (s_ack, "step", s_value_int (-1), "out of range");
    s_expect_refused (s_started, "attempt", s_value_int (0),
                      "started.attempt");
    s_expect_refused (s_started, "attempt", s_value_int (1001),
                      "out of range 1..1000");
    s_expect_refused (s_task_progress, "percent", s_value_int (101),
                      "progress.percent");
    s_expect_refused (s_task_progress, "percent", s_value_int (-2),
                      "progress.percent");
    s_expect_refused (s_task_progress, "kind", s_value_int (3),
                      "progress.kind");
    s_expect_refused (s_hello, "concurrency", s_value_int (0),
                      "hello.concurrency");
    s_expect_refused (s_hello, "concurrency", s_value_int (1025),
                      "hello.concurrency");
    s_expect_refused (s_welcome, "heartbeat_ms", s_value_int (0),
                      "welcome.heartbeat_ms");
    s_expect_refused (s_welcome, "heartbeat_ms", s_value_int (3600001),
                      "welcome.heartbeat_ms");
    s_expect_refused (s_heartbeat, "running", s_value_int (-1),
                      "heartbeat.running");
    s_expect_refused (s_heartbeat, "queued", s_value_int (1LL << 32),
                      "heartbeat.queued");
    s_expect_refused (s_result, "exit_code", s_value_int (1LL << 31),
                      "result.exit_code");
    s_expect_refused (s_result, "duration_ms", s_value_int (-5),
                      "result.duration_ms");
    s_expect_refused (s_command, "timeout_ms", s_value_int (-1),
                      "command.timeout_ms");
    s_expect_refused (s_result, "status", s_value_str ("bogus", 5),
                      "result.status: unknown status 'bogus'");
    s_expect_refused (s_result_ack, "job", s_value_str ("job-1", 5),
                      "result_ack.job: invalid job id");

    //  Length caps
    size_t long_len = PROTO_MAX_TEXT + 1;
    char *text = malloc (PROTO_MAX_OUTPUT + 1);
    assert_non_null (text);
    memset (text, 'a', PROTO_MAX_OUTPUT + 1);
    s_expect_refused (s_hello, "hostname", s_value_str (text, long_len),
                      "hello.hostname: longer than 4096 bytes");
    s_expect_refused (s_result, "output",
                      s_value_str (text, PROTO_MAX_OUTPUT + 1),
                      "result.output: longer than");
    s_expect_refused (s_result, "error",
                      s_value_str (text, PROTO_MAX_OUTPUT + 1),
                      "result.error: longer than");
    //  The caps themselves are fine
    pw_t *valid = s_encoded (s_result);
    pw_t *value = s_value_str (text, PROTO_MAX_OUTPUT);
    pw_t *big = s_mutate (valid, "output", pw_data (value), pw_size (value));
    proto_msg_t *msg = NULL;
    assert_int_equal (proto_msg_decode (pw_data (big), pw_size (big), &msg,
                                        NULL, 0), 0);
    assert_int_equal (strlen (msg->output), PROTO_MAX_OUTPUT);
    proto_msg_destroy (&msg);
    pw_destroy (&big);
    pw_destroy (&value);
    pw_destroy (&valid);

    pw_t *params = pw_new ();
    pw_map (params, 1);
    pw_str (params, "package");
    pw_strn (params, text, PROTO_MAX_PARAM_VALUE + 1);
    s_expect_refused (s_command, "params", params,
                      "command.params.package: longer than 4096");
    free (text);

    //  Too many entries
    pw_t *groups = pw_new ();
    pw_array (groups, PROTO_MAX_LIST + 1);
    for (int index = 0; index <= PROTO_MAX_LIST; index++) {
        char name [16];
        snprintf (name, sizeof name, "g%d", index);
        pw_str (groups, name);
    }
    s_expect_refused (s_hello, "groups", groups, "more than 4096 entries");

    //  An empty nodes list would address nobody
    pw_t *nodes = pw_new ();
    pw_array (nodes, 0);
    s_expect_refused (s_cancel, "nodes", nodes, "cancel.nodes: at least 1");
}

static void
test_proto_keys_refused (void **state)
{
    s_expect_refused (s_hello, "foo", s_value_int (1),
                      "hello: unknown key 'foo'");
    s_expect_refused (s_result_ack, "node", s_value_str ("web-01", 6),
                      "result_ack: unknown key 'node'");
    s_expect_refused (s_heartbeat, "node", NULL, "heartbeat.node: required");
    s_expect_refused (s_result, "truncated", NULL,
                      "result.truncated: required");
    s_expect_refused (s_command, "params", NULL, "command.params: required");

    //  Duplicate keys at the top level
    pw_t *writer = pw_new ();
    pw_map (writer, 4);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "bye");
    pw_str (writer, "node");
    pw_str (writer, "a");
    pw_str (writer, "node");
    pw_str (writer, "b");
    proto_msg_t *msg = NULL;
    char why [256];
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &msg, why, sizeof why), -2);
    assert_non_null (strstr (why, "duplicate"));
    pw_destroy (&writer);

    //  Duplicates inside lists and specs
    pw_t *groups = pw_new ();
    pw_array (groups, 2);
    pw_str (groups, "web");
    pw_str (groups, "web");
    s_expect_refused (s_hello, "groups", groups,
                      "hello.groups: 'web' appears twice");
    pw_t *backends = pw_new ();
    pw_array (backends, 2);
    for (int index = 0; index < 2; index++) {
        pw_map (backends, 2);
        pw_str (backends, "name");
        pw_str (backends, "apt");
        pw_str (backends, "actions");
        pw_array (backends, 0);
    }
    s_expect_refused (s_hello, "backends", backends,
                      "hello.backends: 'apt' appears twice");
}

static void
test_proto_bad_names_refused (void **state)
{
    const char *bad [] = {
        "web 01", "../x", "", "a/b", "caf\xc3\xa9",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        const char *name = bad [index];
        size_t len = strlen (name);
        s_expect_refused (s_heartbeat, "node", s_value_str (name, len),
                          "heartbeat.node: invalid name");
        s_expect_refused (s_command, "backend", s_value_str (name, len),
                          "command.backend: invalid name");
        s_expect_refused (s_command, "action", s_value_str (name, len),
                          "command.action: invalid name");
        pw_t *groups = pw_new ();
        pw_array (groups, 1);
        pw_str (groups, name);
        s_expect_refused (s_hello, "groups", groups,
                          "hello.groups[0]: invalid name");
        pw_t *nodes = pw_new ();
        pw_array (nodes, 2);
        pw_str (nodes, "ok");
        pw_str (nodes, name);
        s_expect_refused (s_command, "nodes", nodes,
                          "command.nodes[1]: invalid name");
        pw_t *labels = pw_new ();
        pw_map (labels, 1);
        pw_str (labels, name);
        pw_str (labels, "web");
        s_expect_refused (s_hello, "labels", labels, "invalid name");
        pw_t *params = pw_new ();
        pw_map (params, 1);
        pw_str (params, name);
        pw_str (params, "x");
        s_expect_refused (s_command, "params", params, "invalid name");
    }
    //  A 64-byte name is the longest accepted
    char longest [NAME_MAX_LEN + 1];
    memset (longest, 'n', NAME_MAX_LEN);
    longest [NAME_MAX_LEN] = 0;
    pw_t *valid = s_encoded (s_bye);
    pw_t *value = s_value_str (longest, NAME_MAX_LEN);
    pw_t *ok = s_mutate (valid, "node", pw_data (value), pw_size (value));
    proto_msg_t *msg = NULL;
    assert_int_equal (proto_msg_decode (pw_data (ok), pw_size (ok), &msg,
                                        NULL, 0), 0);
    assert_string_equal (msg->node, longest);
    proto_msg_destroy (&msg);
    pw_destroy (&ok);
    pw_destroy (&value);
    pw_destroy (&valid);

    pw_t *labels = pw_new ();
    pw_map (labels, 1);
    pw_str (labels, "tier");
    pw_str (labels, "web..dev");
    s_expect_refused (s_hello, "labels", labels,
                      "hello.labels.tier: invalid label value");
}

//  A map {KEY: VALUE} whose strings are LEN bytes at KEY / VALUE.
static pw_t *
s_value_pair (const char *key, size_t key_len, const char *value,
              size_t value_len)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 1);
    pw_strn (writer, key, key_len);
    pw_strn (writer, value, value_len);
    return writer;
}

static void
test_proto_bad_text_refused (void **state)
{
    //  NUL, invalid UTF-8, overlong forms and surrogates in any string of
    //  any message: the frame is malformed
    s_expect_refused (s_hello, "hostname", s_value_str ("a\0b", 3), "NUL");
    s_expect_refused (s_hello, "instance", s_value_str ("a b", 3),
                      "hello.instance");
    s_expect_refused (s_result, "output", s_value_str ("ok\0", 3), "NUL");
    s_expect_refused (s_bye, "node", s_value_str ("web\0", 4), "NUL");
    pw_t *data = pw_new ();
    pw_map (data, 1);
    pw_str (data, "os");
    pw_strn (data, "De\0bian", 7);
    s_expect_refused (s_result, "data", data, "NUL");
    s_expect_refused (s_hello, "hostname", s_value_str ("web\xff", 4),
                      "UTF-8");
    s_expect_refused (s_hello, "version", s_value_str ("\xc0\xae", 2),
                      "UTF-8");
    s_expect_refused (s_hello, "labels",
                      s_value_pair ("rack", 4, "\xed\xa0\x80", 3), "UTF-8");
    s_expect_refused (s_hello, "labels",
                      s_value_pair ("r\xe0\x80\xaf", 4, "r1", 2), "UTF-8");
    s_expect_refused (s_result, "output",
                      s_value_str ("done \xf4\x90\x80\x80", 9), "UTF-8");
    s_expect_refused (s_result, "error", s_value_str ("\xc3", 1), "UTF-8");
    s_expect_refused (s_command, "params",
                      s_value_pair ("package", 7, "ngi\xf8nx", 6), "UTF-8");
    s_expect_refused (s_command, "params",
                      s_value_pair ("pack\x80", 5, "nginx", 5), "UTF-8");
    s_expect_refused (s_command, "job", s_value_str ("\xc1\x81", 2), "UTF-8");
    //  A traceparent is checked as job.submit checks it
    s_expect_refused (s_command, "traceparent",
                      s_value_str ("00-4BF92F3577B34DA6A3CE929D0E0E4736-"
                                   "00f067aa0ba902b7-01", 55), "uppercase");
    s_expect_refused (s_command, "traceparent",
                      s_value_str ("00-00000000000000000000000000000000-"
                                   "00f067aa0ba902b7-01", 55), "all zeros");
    s_expect_refused (s_command, "traceparent",
                      s_value_str ("ff-4bf92f3577b34da6a3ce929d0e0e4736-"
                                   "00f067aa0ba902b7-01", 55), "version ff");
    s_expect_refused (s_command, "traceparent",
                      s_value_str ("00-4bf92f3577b34da6a3ce929d0e0e4736-"
                                   "00f067aa0ba902b7-01\0", 56), "NUL");
    s_expect_refused (s_ack, "node", s_value_str ("web-\xed\xbf\xbf", 7),
                      "UTF-8");
    //  Valid multibyte text in free-text fields is fine
    pw_t *valid = s_encoded (s_result);
    pw_t *text = s_value_str ("caf\xc3\xa9 \xf0\x9f\x99\x82", 10);
    pw_t *good = s_mutate (valid, "output", pw_data (text), pw_size (text));
    proto_msg_t *msg = NULL;
    assert_int_equal (proto_msg_decode (pw_data (good), pw_size (good), &msg,
                                        NULL, 0), 0);
    proto_msg_destroy (&msg);
    pw_destroy (&good);
    pw_destroy (&text);
    pw_destroy (&valid);
}

static void
test_proto_hostile_bytes_refused (void **state)
{
    proto_msg_t *msg = NULL;
    char why [256];
    const unsigned char huge [] = { 0xdd, 0x00, 0xff, 0xff, 0xff };
    assert_int_equal (proto_msg_decode (huge, sizeof huge, &msg, why,
                                        sizeof why), -2);
    assert_null (msg);

    //  A hello whose groups header claims millions of entries
    pw_t *valid = s_encoded (s_hello);
    const unsigned char groups [] = { 0xdd, 0x00, 0xff, 0xff, 0xff, 0xa1,
                                      'x' };
    pw_t *bad = s_mutate (valid, "groups", groups, sizeof groups);
    assert_int_equal (proto_msg_decode (pw_data (bad), pw_size (bad), &msg,
                                        why, sizeof why), -2);
    assert_non_null (strstr (why, "claims"));
    pw_destroy (&bad);

    //  Labels nested 100 deep
    pw_t *deep = pw_new ();
    for (int level = 0; level < 100; level++) {
        pw_map (deep, 1);
        pw_str (deep, "k");
    }
    pw_str (deep, "v");
    bad = s_mutate (valid, "labels", pw_data (deep), pw_size (deep));
    assert_int_equal (proto_msg_decode (pw_data (bad), pw_size (bad), &msg,
                                        why, sizeof why), -2);
    assert_non_null (strstr (why, "nesting"));
    pw_destroy (&bad);
    pw_destroy (&deep);
    pw_destroy (&valid);

    assert_int_equal (proto_msg_decode ("", 0, &msg, why, sizeof why), -2);
    assert_int_equal (proto_msg_decode ("\xc1", 1, &msg, NULL, 0), -2);
    assert_null (msg);
}

//  ---------------------------------------------------------------------
//  The direct decode (flat messages straight from the bytes)

//  Encodes a result as the encoder does and then puts RAW in place of
//  KEY's value (see s_mutate).
static pw_t *
s_result_with (const char *key, const void *raw, size_t raw_len)
{
    pw_t *valid = s_encoded (s_result);
    pw_t *bad = s_mutate (valid, key, raw, raw_len);
    pw_destroy (&valid);
    return bad;
}

//  The direct decode of WRITER's bytes accepts them and reads what the
//  schema decode reads; returns the message.
static proto_msg_t *
s_direct_same (const pw_t *writer)
{
    proto_msg_t *direct = NULL;
    proto_msg_t *schema = NULL;
    char why [256] = "";
    assert_int_equal (proto_msg_decode_direct (pw_data (writer),
                                               pw_size (writer), &direct), 0);
    assert_non_null (direct);
    if (proto_msg_decode_schema (pw_data (writer), pw_size (writer), &schema,
                                 why, sizeof why))
        fail_msg ("schema decode refuses: %s", why);
    s_assert_same (direct, schema);
    proto_msg_destroy (&schema);
    return direct;
}

//  The direct decode declines the SIZE bytes at DATA, and proto_msg_decode
//  refuses them with the schema decode's very reason.
static void
s_direct_declines_bad (const void *data, size_t size)
{
    proto_msg_t *msg = NULL;
    assert_int_equal (proto_msg_decode_direct (data, size, &msg), 1);
    assert_null (msg);
    char schema_why [256] = "";
    char why [256] = "";
    assert_int_equal (proto_msg_decode_schema (data, size, &msg, schema_why,
                                               sizeof schema_why), -2);
    assert_null (msg);
    assert_int_equal (proto_msg_decode (data, size, &msg, why, sizeof why),
                      -2);
    assert_null (msg);
    assert_true (strlen (why) > 0);
    assert_string_equal (why, schema_why);
}

static void
test_proto_direct_decode_reads_flat_messages (void **state)
{
    for (size_t index = 0; index < S_BUILDER_COUNT; index++) {
        proto_msg_t *sent = s_builders [index] ();
        pw_t *writer = pw_new ();
        assert_int_equal (proto_msg_encode (sent, writer), 0);
        proto_msg_t *direct = NULL;
        int rc = proto_msg_decode_direct (pw_data (writer), pw_size (writer),
                                          &direct);
        switch (sent->type) {
            case PROTO_RESULT:
            case PROTO_ACK:
            case PROTO_STARTED:
            case PROTO_HEARTBEAT:
            case PROTO_BYE:
            case PROTO_RESULT_ACK:
            case PROTO_PROGRESS:
            case PROTO_RESULTS:
                //  What the broker reads most never takes the schema path
                if (rc != 0)
                    fail_msg ("%s declined", proto_type_name (sent->type));
                break;
            case PROTO_HELLO:
            case PROTO_OUTPUT:
            case PROTO_RESULT_ACKS:
                //  A hello's parts are allocations of their own; binary
                //  and lists are the schema decode's
                assert_int_equal (rc, 1);
                break;
            default:
                break;
        }
        if (rc == 0) {
            proto_msg_destroy (&direct);
            direct = s_direct_same (writer);
            s_assert_same (sent, direct);
            assert_true (direct->packed);
        }
        else
            assert_null (direct);
        proto_msg_destroy (&direct);
        pw_destroy (&writer);
        proto_msg_destroy (&sent);
    }
}

static void
test_proto_direct_decode_reads_every_encoding (void **state)
{
    //  Data keys out of order on the wire come out sorted, as the schema
    //  decode sorts them
    const unsigned char data [] = { 0x83, 0xa1, 'z', 0xa1, '1', 0xa1, 'a',
                                    0xd9, 0x01, '2', 0xa1, 'm', 0xa0 };
    pw_t *writer = s_result_with ("data", data, sizeof data);
    proto_msg_t *msg = s_direct_same (writer);
    assert_int_equal (msg->data_count, 3);
    assert_string_equal (msg->data [0].key, "a");
    assert_string_equal (msg->data [0].value, "2");
    assert_string_equal (msg->data [1].key, "m");
    assert_string_equal (msg->data [1].value, "");
    assert_string_equal (msg->data [2].key, "z");
    proto_msg_destroy (&msg);
    pw_destroy (&writer);

    //  An empty data map is no data
    const unsigned char none [] = { 0x80 };
    writer = s_result_with ("data", none, sizeof none);
    msg = s_direct_same (writer);
    assert_null (msg->data);
    assert_int_equal (msg->data_count, 0);
    proto_msg_destroy (&msg);
    pw_destroy (&writer);

    //  Ints in wider and signed encodings than needed
    const struct {
        const char *key;
        unsigned char raw [9];
        size_t len;
        int64_t value;
    } ints [] = {
        { "step", { 0xcd, 0x03, 0xff }, 3, 1023 },
        { "step", { 0xd0, 0x07 }, 2, 7 },
        { "attempt", { 0xd3, 0, 0, 0, 0, 0, 0, 0x03, 0xe8 }, 9, 1000 },
        { "attempt", { 0xce, 0, 0, 0, 0x02 }, 5, 2 },
        { "exit_code", { 0xd2, 0x80, 0, 0, 0 }, 5, INT32_MIN },
        { "exit_code", { 0xd1, 0xff, 0x85 }, 3, -123 },
        { "exit_code", { 0xf0 }, 1, -16 },
        { "exit_code", { 0xce, 0x7f, 0xff, 0xff, 0xff }, 5, INT32_MAX },
        { "duration_ms", { 0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                           0xff }, 9, INT64_MAX },
        { "duration_ms", { 0xcc, 0x00 }, 2, 0 },
    };
    for (size_t index = 0; index < sizeof ints / sizeof ints [0]; index++) {
        writer = s_result_with (ints [index].key, ints [index].raw,
                                ints [index].len);
        msg = s_direct_same (writer);
        int64_t got = strcmp (ints [index].key, "step") == 0
                      ? (int64_t) msg->step
                      : strcmp (ints [index].key, "attempt") == 0
                        ? (int64_t) msg->attempt
                        : strcmp (ints [index].key, "exit_code") == 0
                          ? (int64_t) msg->exit_code
                          : (int64_t) msg->duration_ms;
        assert_true (got == ints [index].value);
        proto_msg_destroy (&msg);
        pw_destroy (&writer);
    }

    //  Strings in wider encodings; the optional counts
    const unsigned char output [] = { 0xda, 0x00, 0x02, 'o', 'k' };
    writer = s_result_with ("output", output, sizeof output);
    msg = s_direct_same (writer);
    assert_string_equal (msg->output, "ok");
    proto_msg_destroy (&msg);
    pw_destroy (&writer);
    const unsigned char size [] = { 0xcd, 0x10, 0x00 };
    pw_t *sized = s_result_with ("output_size", size, sizeof size);
    const unsigned char dropped [] = { 0x05 };
    writer = s_mutate (sized, "output_dropped", dropped, sizeof dropped);
    msg = s_direct_same (writer);
    assert_true (msg->output_size == 4096);
    assert_true (msg->output_dropped == 5);
    proto_msg_destroy (&msg);
    pw_destroy (&writer);
    pw_destroy (&sized);

    //  What the direct decode does not read still decodes: a map32,
    //  "type" before "v"
    const unsigned char wide [] = { 0xdf, 0, 0, 0, 1, 0xa1, 'k', 0xa1, 'v' };
    writer = s_result_with ("data", wide, sizeof wide);
    assert_int_equal (proto_msg_decode_direct (pw_data (writer),
                                               pw_size (writer), &msg), 1);
    char why [256];
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &msg, why, sizeof why), 0);
    assert_int_equal (msg->type, PROTO_RESULT);
    proto_msg_destroy (&msg);
    pw_destroy (&writer);
    pw_t *plain = s_encoded (s_result);
    pw_t *no_v = s_mutate (plain, "v", NULL, 0);
    const unsigned char one [] = { 0x01 };
    writer = s_mutate (no_v, "v", one, sizeof one);
    assert_int_equal (proto_msg_decode_direct (pw_data (writer),
                                               pw_size (writer), &msg), 1);
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &msg, why, sizeof why), 0);
    proto_msg_destroy (&msg);
    pw_destroy (&writer);
    pw_destroy (&no_v);
    pw_destroy (&plain);
}

static void
test_proto_direct_decode_declines_hostile (void **state)
{
    const struct {
        const char *key;
        const char *raw;
        size_t len;
    } bad [] = {
        { "output", "\xa2\xc3\x28", 3 },               //  not UTF-8
        { "output", "\xa2" "a\x00", 3 },               //  NUL
        { "output", "\xa3\xed\xa0\x80", 4 },           //  a surrogate
        { "output", "\xc4\x01" "a", 3 },               //  binary
        { "status", "\xa4nope", 5 },
        { "status", "\xa6succes", 7 },                 //  cut short
        { "step", "\xcd\x04\x00", 3 },                 //  1024
        { "step", "\xff", 1 },                         //  -1
        { "attempt", "\x00", 1 },
        { "attempt", "\xcb\x3f\xf0\x00\x00\x00\x00\x00\x00", 9 },  //  1.0
        { "exit_code", "\xce\x80\x00\x00\x00", 5 },    //  2^31
        { "exit_code", "\xcf\x80\x00\x00\x00\x00\x00\x00\x00", 9 },
        { "duration_ms", "\xd0\xff", 2 },
        { "node", "\xa3" "a b", 4 },
        { "job", "\xa3" "abc", 4 },
        { "truncated", "\x01", 1 },
        { "truncated", "\xc0", 1 },
        { "data", "\x82\xa1k\xa1v\xa1k\xa1w", 9 },     //  key twice
        { "data", "\x81\xa1k\xca\x3f\x80\x00\x00", 8 },  //  a float
        { "data", "\x81\xa1k\x81\xa1k\xa1v", 7 },      //  nested
        { "data", "\x91\xa1k", 3 },                    //  an array
        { "data", "\x81\xa2k\x00\xa1v", 6 },           //  key with a NUL
        { "zzz", "\x01", 1 },                          //  unknown key
        { "output_dropped", "\x05", 1 },               //  without its size
        { "output_size", "\x00", 1 },
        { "error_size", "\xcf\x00\x00\x00\x00\x40\x00\x00\x01", 9 },
        { "v", "\x03", 1 },
        { "v", "\x00", 1 },
        { "type", "\xa7results", 8 },
        { "type", "\xa5hello", 6 },
        { "node", NULL, 0 },                           //  required
        { "status", NULL, 0 },
        { "truncated", NULL, 0 },
        { "type", NULL, 0 },
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        pw_t *writer = s_result_with (bad [index].key, bad [index].raw,
                                      bad [index].len);
        s_direct_declines_bad (pw_data (writer), pw_size (writer));
        pw_destroy (&writer);
    }

    //  Output longer than PROTO_MAX_OUTPUT
    size_t long_len = PROTO_MAX_OUTPUT + 1;
    char *text = malloc (long_len);
    assert_non_null (text);
    memset (text, 'x', long_len);
    pw_t *value = s_value_str (text, long_len);
    pw_t *writer = s_result_with ("error", pw_data (value), pw_size (value));
    s_direct_declines_bad (pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
    pw_destroy (&value);
    free (text);

    pw_t *valid = s_encoded (s_result);
    const unsigned char *bytes = pw_data (valid);
    size_t size = pw_size (valid);
    assert_true ((bytes [0] & 0xf0) == 0x80 && bytes [0] < 0x8f);
    unsigned char *copy = malloc (size + 16);
    assert_non_null (copy);

    //  A key twice: the map claims one more pair, which repeats "node"
    memcpy (copy, bytes, size);
    copy [0]++;
    memcpy (copy + size, "\xa4node\xa6web-01", 12);
    s_direct_declines_bad (copy, size + 12);
    //  "v" twice
    memcpy (copy + size, "\xa1v\x01", 3);
    s_direct_declines_bad (copy, size + 3);
    //  A map that claims more pairs than it holds, or fewer
    memcpy (copy, bytes, size);
    copy [0]++;
    s_direct_declines_bad (copy, size);
    copy [0] -= 2;
    s_direct_declines_bad (copy, size);
    //  Trailing bytes
    memcpy (copy, bytes, size);
    copy [size] = 0;
    s_direct_declines_bad (copy, size + 1);
    //  Every truncation
    for (size_t cut = 0; cut < size; cut++)
        s_direct_declines_bad (bytes, cut);
    free (copy);
    pw_destroy (&valid);

    //  A fact value with a control byte (the fuzzer's find): the direct
    //  decode once took what the encoder then refused
    const char facts [] =
        "\x84\xa1v\x02\xa4type\xa5" "facts\xa4node\xa6web-01\xa5" "facts"
        "\x83\xa6mem_mb\xa4" "81\x19" "2\xa2os\xa6" "debian"
        "\xaaos_version\xa2" "12";
    s_direct_declines_bad (facts, sizeof facts - 1);

    proto_msg_t *msg = NULL;
    assert_int_equal (proto_msg_decode_direct (NULL, 0, &msg), 1);
    assert_null (msg);
}

//  proto_result_acks_encode writes what proto_msg_encode writes for the
//  same result_acks, and refuses what it refuses.
static void
test_proto_result_acks_encode (void **state)
{
    proto_msg_t *msg = s_result_acks ();
    pw_t *expected = pw_new ();
    assert_int_equal (proto_msg_encode (msg, expected), 0);
    pw_t *writer = pw_new ();
    assert_int_equal (proto_result_acks_encode (msg->acks, msg->ack_count, 0, 0,
                                                writer), 0);
    assert_int_equal (pw_size (writer), pw_size (expected));
    assert_memory_equal (pw_data (writer), pw_data (expected),
                         pw_size (writer));
    pw_reset (writer);
    assert_int_equal (proto_result_acks_encode (msg->acks, 0, 0, 0, writer), -2);
    proto_ack_t bad = { .job = "not a job", .step = 0, .attempt = 1 };
    assert_int_equal (proto_result_acks_encode (&bad, 1, 0, 0, writer), -2);
    bad = (proto_ack_t) { .job = JOB_A, .step = 1024, .attempt = 1 };
    assert_int_equal (proto_result_acks_encode (&bad, 1, 0, 0, writer), -2);
    bad = (proto_ack_t) { .job = JOB_A, .step = 0, .attempt = 0 };
    assert_int_equal (proto_result_acks_encode (&bad, 1, 0, 0, writer), -2);
    assert_int_equal (pw_size (writer), 0);
    //  The most one message covers, and one more
    proto_ack_t *many = calloc (PROTO_MAX_ACKS + 1, sizeof (proto_ack_t));
    assert_non_null (many);
    for (size_t index = 0; index <= PROTO_MAX_ACKS; index++)
        many [index] = (proto_ack_t) {
            .job = JOB_A, .step = (uint32_t) (index % 1024),
            .attempt = (uint32_t) (1 + index / 1024) };
    assert_int_equal (proto_result_acks_encode (many, PROTO_MAX_ACKS + 1, 0, 0,
                                                writer), -2);
    assert_int_equal (proto_result_acks_encode (many, PROTO_MAX_ACKS, 0, 0,
                                                writer), 0);
    proto_msg_t *got = NULL;
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &got, NULL, 0), 0);
    assert_int_equal (got->ack_count, PROTO_MAX_ACKS);
    assert_string_equal (got->acks [PROTO_MAX_ACKS - 1].job, JOB_A);
    assert_int_equal (got->acks [PROTO_MAX_ACKS - 1].step, 1023);
    assert_int_equal (got->acks [PROTO_MAX_ACKS - 1].attempt, 4);
    proto_msg_destroy (&got);
    free (many);
    pw_destroy (&writer);
    pw_destroy (&expected);
    proto_msg_destroy (&msg);
}

//  Decodes an output_acks whose one entry has STREAM (a string, or an int
//  when NULL) and OFFSET, with WIDTH items; returns what decoding says.
static int
s_decode_output_ack (const char *stream, int64_t offset, size_t width,
                     char *why, size_t why_len)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 3);
    pw_str (writer, "v");
    pw_int (writer, 2);
    pw_str (writer, "type");
    pw_str (writer, "output_acks");
    pw_str (writer, "acks");
    pw_array (writer, 1);
    pw_array (writer, width);
    pw_str (writer, JOB_A);
    pw_int (writer, 0);
    pw_int (writer, 1);
    if (width > 3) {
        if (stream)
            pw_str (writer, stream);
        else
            pw_int (writer, 1);
    }
    if (width > 4)
        pw_int (writer, offset);
    proto_msg_t *msg = NULL;
    int rc = proto_msg_decode (pw_data (writer), pw_size (writer), &msg, why,
                               why_len);
    if (rc != 0)
        assert_null (msg);
    proto_msg_destroy (&msg);
    pw_destroy (&writer);
    return rc;
}

//  broker_key and broker_key_ack: node and key, both required; a body
//  without its key, or with a key of another type, is malformed.
static void
test_proto_broker_key (void **state)
{
    const char *key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    proto_type_t types [] = {PROTO_BROKER_KEY, PROTO_BROKER_KEY_ACK};
    for (int index = 0; index < 2; index++) {
        proto_msg_t msg = {.type = types [index], .node = "web-01",
                           .key = (char *) key};
        pw_t *writer = pw_new ();
        assert_int_equal (proto_msg_encode (&msg, writer), 0);
        proto_msg_t *got = NULL;
        assert_int_equal (proto_msg_decode (pw_data (writer),
                                            pw_size (writer), &got, NULL, 0),
                          0);
        assert_int_equal (got->type, types [index]);
        assert_string_equal (got->node, "web-01");
        assert_string_equal (got->key, key);
        proto_msg_destroy (&got);
        //  Without its key
        msg.key = NULL;
        pw_reset (writer);
        assert_int_not_equal (proto_msg_encode (&msg, writer), 0);
        pw_reset (writer);
        pw_map (writer, 3);
        pw_str (writer, "v");
        pw_int (writer, PROTO_VERSION);
        pw_str (writer, "type");
        pw_str (writer, proto_type_name (types [index]));
        pw_str (writer, "node");
        pw_str (writer, "web-01");
        assert_int_equal (proto_msg_decode (pw_data (writer),
                                            pw_size (writer), &got, NULL, 0),
                          PROTO_EMALFORMED);
        //  A key that is no text
        pw_reset (writer);
        pw_map (writer, 4);
        pw_str (writer, "v");
        pw_int (writer, PROTO_VERSION);
        pw_str (writer, "type");
        pw_str (writer, proto_type_name (types [index]));
        pw_str (writer, "node");
        pw_str (writer, "web-01");
        pw_str (writer, "key");
        pw_int (writer, 7);
        assert_int_equal (proto_msg_decode (pw_data (writer),
                                            pw_size (writer), &got, NULL, 0),
                          PROTO_EMALFORMED);
        pw_destroy (&writer);
    }
}

//  output_acks: proto_output_acks_encode writes what proto_msg_encode
//  writes, the entries come back with their streams and offsets, and
//  hostile entries (a result_acks' shape, an unknown stream, an offset
//  out of range) are refused whole.
static void
test_proto_output_acks (void **state)
{
    proto_ack_t acks [] = {
        {.job = JOB_A, .step = 2, .attempt = 1, .stream = "stdout",
         .offset = 0},
        {.job = JOB_B, .step = 1023, .attempt = 1000, .stream = "stderr",
         .offset = (uint64_t) PROTO_MAX_STREAM - 1}
    };
    proto_msg_t msg = {.type = PROTO_OUTPUT_ACKS, .acks = acks,
                       .ack_count = 2};
    pw_t *expected = pw_new ();
    assert_int_equal (proto_msg_encode (&msg, expected), 0);
    pw_t *writer = pw_new ();
    assert_int_equal (proto_output_acks_encode (acks, 2, 0, 0, writer), 0);
    assert_int_equal (pw_size (writer), pw_size (expected));
    assert_memory_equal (pw_data (writer), pw_data (expected),
                         pw_size (writer));
    proto_msg_t *got = NULL;
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &got, NULL, 0), 0);
    assert_int_equal (got->type, PROTO_OUTPUT_ACKS);
    assert_int_equal (got->ack_count, 2);
    assert_string_equal (got->acks [1].job, JOB_B);
    assert_int_equal (got->acks [1].step, 1023);
    assert_int_equal (got->acks [1].attempt, 1000);
    assert_string_equal (got->acks [0].stream, "stdout");
    assert_string_equal (got->acks [1].stream, "stderr");
    assert_int_equal (got->acks [1].offset, PROTO_MAX_STREAM - 1);
    assert_int_equal (got->epoch, 0);
    proto_msg_destroy (&got);
    //  With the epoch of a cluster's active, as proto_msg_encode writes it
    pw_reset (expected);
    pw_reset (writer);
    msg.epoch = 42;
    assert_int_equal (proto_msg_encode (&msg, expected), 0);
    assert_int_equal (proto_output_acks_encode (acks, 2, 42, 0, writer), 0);
    assert_int_equal (pw_size (writer), pw_size (expected));
    assert_memory_equal (pw_data (writer), pw_data (expected),
                         pw_size (writer));
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &got, NULL, 0), 0);
    assert_int_equal (got->epoch, 42);
    proto_msg_destroy (&got);
    assert_int_equal (epoch_of_body (pw_data (writer), pw_size (writer)), 42);
    pw_reset (writer);
    assert_int_equal (proto_output_acks_encode (acks, 2,
                                                (uint64_t) INT64_MAX + 1, 0,
                                                writer), -2);
    //  The encoder refuses what the decoder would
    pw_reset (writer);
    proto_ack_t bad = acks [0];
    bad.stream = "stdin";
    assert_int_equal (proto_output_acks_encode (&bad, 1, 0, 0, writer), -2);
    bad.stream = NULL;
    assert_int_equal (proto_output_acks_encode (&bad, 1, 0, 0, writer), -2);
    bad = acks [0];
    bad.offset = (uint64_t) PROTO_MAX_STREAM;
    assert_int_equal (proto_output_acks_encode (&bad, 1, 0, 0, writer), -2);
    assert_int_equal (proto_output_acks_encode (acks, 0, 0, 0, writer), -2);
    assert_int_equal (pw_size (writer), 0);
    //  Hostile entries
    char why [256];
    assert_int_equal (s_decode_output_ack ("stdout", 5, 5, why, sizeof why),
                      0);
    assert_int_equal (s_decode_output_ack ("stdout", 5, 3, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "output_acks.acks[0]: expected [job, "
                             "step, attempt, stream, offset]"));
    assert_int_equal (s_decode_output_ack ("stdin", 5, 5, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "stream 'stdout' or 'stderr'"));
    assert_int_equal (s_decode_output_ack (NULL, 5, 5, why, sizeof why), -2);
    assert_int_equal (s_decode_output_ack ("stderr", -1, 5, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "offset (0.."));
    assert_int_equal (s_decode_output_ack ("stderr", PROTO_MAX_STREAM, 5,
                                           why, sizeof why), -2);
    pw_destroy (&writer);
    pw_destroy (&expected);
}

//  Writes a result_acks whose acks are the COUNT values that WRITE_ENTRY
//  writes, and returns what decoding it says.
static int
s_decode_acks_with (void (*write_entry) (pw_t *, size_t), size_t count,
                    char *why, size_t why_len)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 3);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "result_acks");
    pw_str (writer, "acks");
    pw_array (writer, count);
    for (size_t index = 0; index < count; index++)
        write_entry (writer, index);
    proto_msg_t *msg = NULL;
    int rc = proto_msg_decode (pw_data (writer), pw_size (writer), &msg, why,
                               why_len);
    if (rc == 0)
        assert_non_null (msg);
    else
        assert_null (msg);
    proto_msg_destroy (&msg);
    pw_destroy (&writer);
    return rc;
}

static void
s_entry_good (pw_t *writer, size_t index)
{
    pw_array (writer, 3);
    pw_str (writer, JOB_A);
    pw_int (writer, (int64_t) (index % 1024));
    pw_int (writer, 1);
}

static void
s_entry_two (pw_t *writer, size_t index)
{
    pw_array (writer, 2);
    pw_str (writer, JOB_A);
    pw_int (writer, 1);
}

static void
s_entry_map (pw_t *writer, size_t index)
{
    pw_map (writer, 1);
    pw_str (writer, "job");
    pw_str (writer, JOB_A);
}

static void
s_entry_bad_job (pw_t *writer, size_t index)
{
    pw_array (writer, 3);
    pw_str (writer, index ? "j-0193a1b2c3d4-00zz" : JOB_A);
    pw_int (writer, 0);
    pw_int (writer, 1);
}

static void
s_entry_long_job (pw_t *writer, size_t index)
{
    char job [200];
    memset (job, 'a', sizeof job);
    pw_array (writer, 3);
    pw_strn (writer, job, sizeof job);
    pw_int (writer, 0);
    pw_int (writer, 1);
}

static void
s_entry_step (pw_t *writer, size_t index)
{
    pw_array (writer, 3);
    pw_str (writer, JOB_A);
    pw_int (writer, 1024);
    pw_int (writer, 1);
}

static void
s_entry_attempt (pw_t *writer, size_t index)
{
    pw_array (writer, 3);
    pw_str (writer, JOB_A);
    pw_int (writer, 0);
    pw_int (writer, 0);
}

static void
s_entry_text_step (pw_t *writer, size_t index)
{
    pw_array (writer, 3);
    pw_str (writer, JOB_A);
    pw_str (writer, "1");
    pw_int (writer, 1);
}

//  Hostile result_acks are refused whole: empty, oversized, entries of
//  the wrong shape, bad job ids, steps or attempts out of range.
static void
test_proto_result_acks_refused (void **state)
{
    char why [256];
    assert_int_equal (s_decode_acks_with (s_entry_good, PROTO_MAX_ACKS, why,
                                          sizeof why), 0);
    assert_int_equal (s_decode_acks_with (s_entry_good, PROTO_MAX_ACKS + 1,
                                          why, sizeof why), -2);
    assert_non_null (strstr (why, "result_acks.acks: more than 4096"));
    assert_int_equal (s_decode_acks_with (s_entry_good, 0, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "result_acks.acks: at least 1"));
    assert_int_equal (s_decode_acks_with (s_entry_two, 1, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "result_acks.acks[0]: expected [job"));
    assert_int_equal (s_decode_acks_with (s_entry_map, 1, why, sizeof why),
                      -2);
    assert_int_equal (s_decode_acks_with (s_entry_bad_job, 3, why,
                                          sizeof why), -2);
    assert_non_null (strstr (why, "result_acks.acks[1]: invalid job id"));
    assert_int_equal (s_decode_acks_with (s_entry_long_job, 1, why,
                                          sizeof why), -2);
    assert_int_equal (s_decode_acks_with (s_entry_step, 1, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "step (0..1023)"));
    assert_int_equal (s_decode_acks_with (s_entry_attempt, 1, why,
                                          sizeof why), -2);
    assert_int_equal (s_decode_acks_with (s_entry_text_step, 1, why,
                                          sizeof why), -2);
    //  acks missing, or not an array; an unknown key next to it
    s_expect_refused (s_result_acks, "acks", NULL, "result_acks.acks: "
                      "required");
    s_expect_refused (s_result_acks, "acks", s_value_int (1),
                      "expected array");
    s_expect_refused (s_result_acks, "job", s_value_str (JOB_A, 19),
                      "unknown key 'job'");
    //  hello's features: names, at most 64, no duplicates
    s_expect_refused (s_hello, "features", s_value_str ("x", 1),
                      "hello.features: expected array");
    pw_t *list = pw_new ();
    pw_array (list, 2);
    pw_str (list, "result_acks");
    pw_str (list, "result_acks");
    s_expect_refused (s_hello, "features", list, "appears twice");
    list = pw_new ();
    pw_array (list, 0);
    s_expect_refused (s_hello, "features", list, "at least 1");
    list = pw_new ();
    pw_array (list, 65);
    for (int index = 0; index < 65; index++) {
        char name [16];
        snprintf (name, sizeof name, "f%d", index);
        pw_str (list, name);
    }
    s_expect_refused (s_hello, "features", list, "more than 64");
}

static void
test_proto_hello_features (void **state)
{
    proto_msg_t *hello = s_hello ();
    assert_true (proto_hello_has_feature (hello, PROTO_FEATURE_RESULT_ACKS));
    assert_false (proto_hello_has_feature (hello, "result"));
    assert_false (proto_hello_has_feature (NULL, PROTO_FEATURE_RESULT_ACKS));
    proto_msg_destroy (&hello);
    //  An older agent's hello names none, and says nothing about them
    hello = s_hello ();
    char **features = hello->features;
    size_t count = hello->feature_count;
    hello->features = NULL;
    hello->feature_count = 0;
    assert_false (proto_hello_has_feature (hello, PROTO_FEATURE_RESULT_ACKS));
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (hello, writer), 0);
    assert_null (memmem (pw_data (writer), pw_size (writer), "features", 8));
    pw_destroy (&writer);
    hello->features = features;
    hello->feature_count = count;
    proto_msg_destroy (&hello);
}

//  Writes a results from "web-01" with COUNT entries, each written by
//  ENTRY (given its index), and decodes it; returns the decoder's code.
static int
s_decode_results_with (void (*entry) (pw_t *, size_t), size_t count,
                       proto_msg_t **msg_p, char *why, size_t why_len)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 4);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "results");
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    pw_str (writer, "results");
    pw_array (writer, count);
    for (size_t index = 0; index < count; index++)
        entry (writer, index);
    int rc = proto_msg_decode (pw_data (writer), pw_size (writer), msg_p,
                               why, why_len);
    pw_destroy (&writer);
    return rc;
}

//  A good entry: result step INDEX % 1024
static void
s_results_good (pw_t *writer, size_t index)
{
    proto_msg_t *result = s_result_plain ();
    result->step = (uint32_t) (index % 1024);
    assert_int_equal (proto_results_entry_encode (result, writer), 0);
    proto_msg_destroy (&result);
}

//  Entries 1 and 3 break a rule each (a status that is none, a node key
//  an entry may not carry), entry 4 is no map; 0 and 2 are good
static void
s_results_mixed (pw_t *writer, size_t index)
{
    if (index == 0 || index == 2) {
        s_results_good (writer, index);
        return;
    }
    if (index == 4) {
        pw_str (writer, "result");
        return;
    }
    proto_msg_t *result = s_result_plain ();
    pw_t *entry = pw_new ();
    assert_int_equal (proto_results_entry_encode (result, entry), 0);
    proto_msg_destroy (&result);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (entry), pw_size (entry), &doc,
                                     NULL, 0), 0);
    const pv_t *map = pv_doc_root (doc);
    pw_map (writer, pv_size (map) + (index == 3 ? 1 : 0));
    for (size_t at = 0; at < pv_size (map); at++) {
        const char *key;
        size_t key_len;
        const pv_t *value = pv_map_entry (map, at, &key, &key_len);
        pw_strn (writer, key, key_len);
        if (index == 1 && key_len == 6 && memcmp (key, "status", 6) == 0)
            pw_str (writer, "done");
        else
            pw_pv (writer, value);
    }
    if (index == 3) {
        pw_str (writer, "node");
        pw_str (writer, "web-02");
    }
    pv_doc_destroy (&doc);
    pw_destroy (&entry);
}

//  The bytes of a results from "web-01" with COUNT entries written by
//  ENTRY, with "node" before "results" or after it.
static pw_t *
s_results_bytes (void (*entry) (pw_t *, size_t), size_t count,
                 bool node_first)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 4);
    pw_str (writer, "v");
    pw_int (writer, 1);
    pw_str (writer, "type");
    pw_str (writer, "results");
    if (node_first) {
        pw_str (writer, "node");
        pw_str (writer, "web-01");
    }
    pw_str (writer, "results");
    pw_array (writer, count);
    for (size_t index = 0; index < count; index++)
        entry (writer, index);
    if (!node_first) {
        pw_str (writer, "node");
        pw_str (writer, "web-01");
    }
    return writer;
}

//  A results of good entries is read directly, each entry speaking for
//  the message's node wherever "node" came; one bad entry leaves the
//  whole message to the schema decode, which marks it.
static void
test_proto_direct_decode_reads_results (void **state)
{
    for (int node_first = 0; node_first < 2; node_first++) {
        pw_t *writer = s_results_bytes (s_results_good, 20, node_first);
        proto_msg_t *msg = s_direct_same (writer);
        assert_int_equal (msg->type, PROTO_RESULTS);
        assert_int_equal (msg->result_count, 20);
        for (size_t index = 0; index < msg->result_count; index++) {
            assert_int_equal (msg->results [index].type, PROTO_RESULT);
            assert_ptr_equal (msg->results [index].node, msg->node);
            assert_int_equal (msg->results [index].step, index);
        }
        proto_msg_destroy (&msg);
        pw_destroy (&writer);
    }
    pw_t *writer = s_results_bytes (s_results_mixed, 5, true);
    proto_msg_t *direct = NULL;
    assert_int_equal (proto_msg_decode_direct (pw_data (writer),
                                               pw_size (writer), &direct), 1);
    assert_null (direct);
    proto_msg_t *schema = NULL;
    proto_msg_t *msg = NULL;
    char why [256];
    assert_int_equal (proto_msg_decode_schema (pw_data (writer),
                                               pw_size (writer), &schema, why,
                                               sizeof why), 0);
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &msg, why, sizeof why), 0);
    s_assert_same (msg, schema);
    assert_int_equal (msg->results [1].type, 0);
    assert_non_null (msg->results [1].message);
    proto_msg_destroy (&msg);
    proto_msg_destroy (&schema);
    pw_destroy (&writer);

    //  Counts the bytes cannot hold, or past the bound, are declined
    const unsigned char claims [] = { 0x84, 0xa1, 'v', 0x01, 0xa4, 't', 'y',
        'p', 'e', 0xa7, 'r', 'e', 's', 'u', 'l', 't', 's', 0xa4, 'n', 'o',
        'd', 'e', 0xa2, 'w', '1', 0xa7, 'r', 'e', 's', 'u', 'l', 't', 's',
        0xdc, 0xff, 0xff, 0x80 };
    s_direct_declines_bad (claims, sizeof claims);
    writer = s_results_bytes (s_results_good, PROTO_MAX_RESULTS + 1, true);
    s_direct_declines_bad (pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
}

//  A results: written by proto_results_begin and proto_results_entry_encode
//  as proto_msg_encode writes it; a bad entry is kept marked with its
//  reason, the others whole; a bad envelope refuses the message whole.
static void
test_proto_results (void **state)
{
    proto_msg_t *msg = s_results ();
    pw_t *whole = pw_new ();
    assert_int_equal (proto_msg_encode (msg, whole), 0);
    pw_t *parts = pw_new ();
    assert_int_equal (proto_results_begin ("web-01", 3, parts), 0);
    for (size_t index = 0; index < 3; index++)
        assert_int_equal (proto_results_entry_encode (&msg->results [index],
                                                      parts), 0);
    assert_int_equal (pw_size (parts), pw_size (whole));
    assert_memory_equal (pw_data (parts), pw_data (whole), pw_size (whole));
    //  An entry that breaks a rule of result is not written
    size_t before = pw_size (parts);
    free (msg->results [1].status);
    msg->results [1].status = s_dup ("done");
    assert_int_equal (proto_results_entry_encode (&msg->results [1], parts),
                      -2);
    assert_int_equal (proto_msg_encode (msg, parts), -2);
    assert_int_equal (pw_size (parts), before);
    assert_int_equal (proto_results_entry_encode (NULL, parts), -2);
    msg->results [0].type = PROTO_ACK;
    assert_int_equal (proto_results_entry_encode (&msg->results [0], parts),
                      -2);
    assert_int_equal (proto_results_begin ("web-01", 0, parts), -2);
    assert_int_equal (proto_results_begin ("web-01", PROTO_MAX_RESULTS + 1,
                                           parts), -2);
    assert_int_equal (proto_results_begin ("web 01", 1, parts), -2);
    assert_int_equal (proto_results_begin (NULL, 1, parts), -2);
    assert_int_equal (pw_size (parts), before);
    pw_destroy (&parts);
    pw_destroy (&whole);
    proto_msg_destroy (&msg);

    //  The most entries, and one more
    char why [256] = "";
    assert_int_equal (s_decode_results_with (s_results_good,
                                             PROTO_MAX_RESULTS, &msg, why,
                                             sizeof why), 0);
    assert_int_equal (msg->result_count, PROTO_MAX_RESULTS);
    for (size_t index = 0; index < msg->result_count; index++) {
        assert_int_equal (msg->results [index].type, PROTO_RESULT);
        assert_string_equal (msg->results [index].node, "web-01");
        assert_int_equal (msg->results [index].step, index % 1024);
    }
    proto_msg_destroy (&msg);
    assert_int_equal (s_decode_results_with (s_results_good,
                                             PROTO_MAX_RESULTS + 1, &msg, why,
                                             sizeof why), -2);
    assert_null (msg);
    assert_non_null (strstr (why, "results.results: more than 4096"));
    assert_int_equal (s_decode_results_with (s_results_good, 0, &msg, why,
                                             sizeof why), -2);
    assert_non_null (strstr (why, "results.results: at least 1"));

    //  Bad entries among good ones: marked, each with its reason
    assert_int_equal (s_decode_results_with (s_results_mixed, 5, &msg, why,
                                             sizeof why), 0);
    assert_int_equal (msg->result_count, 5);
    assert_int_equal (msg->results [0].type, PROTO_RESULT);
    assert_int_equal (msg->results [2].type, PROTO_RESULT);
    assert_int_equal (msg->results [2].step, 2);
    assert_string_equal (msg->results [2].status, "success");
    assert_int_equal (msg->results [1].type, 0);
    assert_null (msg->results [1].job);
    assert_non_null (strstr (msg->results [1].message,
                             "results.results[1].status"));
    assert_int_equal (msg->results [3].type, 0);
    assert_non_null (strstr (msg->results [3].message, "unknown key 'node'"));
    assert_int_equal (msg->results [4].type, 0);
    assert_non_null (strstr (msg->results [4].message, "expected map"));
    proto_msg_destroy (&msg);

    //  The envelope: node and results required, results an array, no
    //  other key; an entry's own keys are a result's but node
    s_expect_refused (s_results, "node", NULL, "results.node: required");
    s_expect_refused (s_results, "node", s_value_str ("a b", 3),
                      "results.node");
    s_expect_refused (s_results, "results", NULL, "results.results: "
                      "required");
    s_expect_refused (s_results, "results", s_value_int (3),
                      "expected array");
    s_expect_refused (s_results, "job", s_value_str (JOB_A, 19),
                      "unknown key 'job'");
    //  A welcome's features: names, at most 64, no duplicates
    s_expect_refused (s_welcome_features, "features", s_value_str ("x", 1),
                      "welcome.features: expected array");
    pw_t *list = pw_new ();
    pw_array (list, 0);
    s_expect_refused (s_welcome_features, "features", list, "at least 1");
    msg = s_welcome_features ();
    assert_true (proto_msg_has_feature (msg, PROTO_FEATURE_RESULTS));
    assert_false (proto_msg_has_feature (msg, PROTO_FEATURE_RESULT_ACKS));
    proto_msg_destroy (&msg);
    //  A welcome that grants nothing says nothing of features (an agent
    //  before them refuses the key)
    msg = s_welcome ();
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    assert_null (memmem (pw_data (writer), pw_size (writer), "features", 8));
    pw_destroy (&writer);
    proto_msg_destroy (&msg);
}

//  With an epoch, the hand-written ack encoders still write what
//  proto_msg_encode writes.
static void
test_proto_ack_encoders_epoch (void **state)
{
    pw_t *expected = pw_new ();
    pw_t *writer = pw_new ();
    proto_msg_t *msg = s_result_ack_epoch ();
    assert_int_equal (proto_msg_encode (msg, expected), 0);
    assert_int_equal (proto_result_ack_encode (msg->job, msg->step,
                                               msg->attempt, msg->epoch, 0,
                                               writer), 0);
    assert_int_equal (pw_size (writer), pw_size (expected));
    assert_memory_equal (pw_data (writer), pw_data (expected),
                         pw_size (writer));
    proto_msg_destroy (&msg);
    pw_reset (expected);
    pw_reset (writer);
    msg = s_result_acks_epoch ();
    assert_int_equal (proto_msg_encode (msg, expected), 0);
    assert_int_equal (proto_result_acks_encode (msg->acks, msg->ack_count,
                                                msg->epoch, 0, writer), 0);
    assert_int_equal (pw_size (writer), pw_size (expected));
    assert_memory_equal (pw_data (writer), pw_data (expected),
                         pw_size (writer));
    proto_msg_destroy (&msg);
    //  Past the int range the codec reads, refused
    pw_reset (writer);
    assert_int_equal (proto_result_ack_encode (JOB_A, 0, 1,
                                               (uint64_t) INT64_MAX + 1, 0,
                                               writer), -2);
    pw_destroy (&writer);
    pw_destroy (&expected);
}

//  proto_result_ack_encode writes what proto_msg_encode writes for the
//  same result_ack, and refuses what it refuses.
static void
test_proto_result_ack_encode (void **state)
{
    pw_t *expected = pw_new ();
    pw_t *writer = pw_new ();
    const char *job = "j-0193a1b2c3d4-0001";
    uint32_t steps [] = {0, 7, 1023, 1024, 0};
    uint32_t attempts [] = {1, 3, 1000, 1, 0};
    for (size_t at = 0; at < 5; at++) {
        proto_msg_t msg;
        memset (&msg, 0, sizeof msg);
        msg.type = PROTO_RESULT_ACK;
        msg.job = (char *) job;
        msg.step = steps [at];
        msg.attempt = attempts [at];
        pw_reset (expected);
        pw_reset (writer);
        int rc = proto_msg_encode (&msg, expected);
        assert_int_equal (proto_result_ack_encode (job, steps [at],
                                                   attempts [at], 0, 0, writer),
                          rc);
        if (rc == 0) {
            assert_int_equal (pw_size (writer), pw_size (expected));
            assert_memory_equal (pw_data (writer), pw_data (expected),
                                 pw_size (expected));
        }
    }
    assert_int_equal (proto_result_ack_encode ("not a job", 0, 1, 0, 0, writer),
                      -2);
    assert_int_equal (proto_result_ack_encode (NULL, 0, 1, 0, 0, writer), -2);
    pw_destroy (&expected);
    pw_destroy (&writer);
}

static void
test_proto_encode_refuses_bad_messages (void **state)
{
    pw_t *writer = pw_new ();

    proto_msg_t *msg = s_heartbeat ();
    free (msg->node);
    msg->node = NULL;
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    msg->node = s_dup ("web 01");
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    proto_msg_destroy (&msg);

    msg = s_ack ();
    msg->step = 1024;
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    msg->step = 0;
    msg->attempt = 0;
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    proto_msg_destroy (&msg);

    msg = s_result ();
    free (msg->status);
    msg->status = s_dup ("great");
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    proto_msg_destroy (&msg);

    msg = s_command ();
    free (msg->params [1].key);
    msg->params [1].key = s_dup ("package");
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    proto_msg_destroy (&msg);

    msg = s_hello ();
    free (msg->backends [0].actions [0].params [0].name);
    msg->backends [0].actions [0].params [0].name = s_dup ("../x");
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    free (msg->labels [1].value);
    msg->labels [1].value = NULL;
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    proto_msg_destroy (&msg);

    msg = s_welcome ();
    msg->heartbeat_ms = 0;
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    proto_msg_destroy (&msg);

    msg = proto_msg_new ((proto_type_t) 0);
    assert_int_equal (proto_msg_encode (msg, writer), -2);
    proto_msg_destroy (&msg);
    assert_int_equal (proto_msg_encode (NULL, writer), -2);

    //  Nothing was written by any refused encode
    assert_int_equal (pw_size (writer), 0);
    pw_destroy (&writer);
}


//  ---------------------------------------------------------------------
//  Client requests

typedef struct {
    int rc;
    const char *code;
    char *id;
    char why [256];
    proto_request_t *req;
} s_outcome_t;

static void
s_request (const pw_t *writer, s_outcome_t *out)
{
    memset (out, 0, sizeof *out);
    out->rc = proto_request_decode (pw_data (writer), pw_size (writer),
                                    &out->req, &out->code, &out->id,
                                    out->why, sizeof out->why);
}

static void
s_outcome_clear (s_outcome_t *out)
{
    proto_request_destroy (&out->req);
    free (out->id);
    out->id = NULL;
}

static void
s_expect_request_ok (pw_t *writer, const char *type)
{
    s_outcome_t out;
    s_request (writer, &out);
    if (out.rc != 0)
        fail_msg ("%s refused: %s %s", type, out.code, out.why);
    assert_non_null (out.req);
    assert_null (out.id);
    assert_string_equal (out.req->type, type);
    assert_string_equal (out.req->id, "req-1");
    assert_true (pv_str_eq (pv_map_get (out.req->body, "type"), type));
    s_outcome_clear (&out);
    assert_null (out.req);
    pw_destroy (&writer);
}

static void
test_proto_request_each_type_accepted (void **state)
{
    pw_t *w = pw_new ();
    proto_request_begin (w, "job.submit", "req-1", 1);
    pw_str (w, "job");
    pw_map (w, 1);
    pw_str (w, "tasks");
    pw_array (w, 0);
    s_expect_request_ok (w, "job.submit");

    w = pw_new ();
    proto_request_begin (w, "job.get", "req-1", 1);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    s_expect_request_ok (w, "job.get");

    w = pw_new ();
    proto_request_begin (w, "job.list", "req-1", 0);
    s_expect_request_ok (w, "job.list");
    w = pw_new ();
    proto_request_begin (w, "job.list", "req-1", 2);
    pw_str (w, "status");
    pw_str (w, "running");
    pw_str (w, "limit");
    pw_int (w, 10000);
    s_expect_request_ok (w, "job.list");

    w = pw_new ();
    proto_request_begin (w, "job.cancel", "req-1", 2);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    pw_str (w, "reason");
    pw_str (w, "changed my mind");
    s_expect_request_ok (w, "job.cancel");

    w = pw_new ();
    proto_request_begin (w, "job.events", "req-1", 2);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    pw_str (w, "after");
    pw_int (w, 12);
    s_expect_request_ok (w, "job.events");

    w = pw_new ();
    proto_request_begin (w, "job.delete", "req-1", 1);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    s_expect_request_ok (w, "job.delete");

    w = pw_new ();
    proto_request_begin (w, "node.list", "req-1", 0);
    s_expect_request_ok (w, "node.list");

    w = pw_new ();
    proto_request_begin (w, "node.get", "req-1", 1);
    pw_str (w, "node");
    pw_str (w, "web-01");
    s_expect_request_ok (w, "node.get");

    w = pw_new ();
    proto_request_begin (w, "status", "req-1", 0);
    s_expect_request_ok (w, "status");

    const char *plain [] = { "queue.stats", "dlq.list", "metrics.get" };
    for (size_t index = 0; index < 3; index++) {
        w = pw_new ();
        proto_request_begin (w, plain [index], "req-1", 0);
        s_expect_request_ok (w, plain [index]);
    }
    const char *with_entry [] = { "dlq.get", "dlq.retry", "dlq.purge" };
    for (size_t index = 0; index < 3; index++) {
        w = pw_new ();
        proto_request_begin (w, with_entry [index], "req-1", 1);
        pw_str (w, "entry");
        pw_str (w, JOB_A "/0/web-01");
        s_expect_request_ok (w, with_entry [index]);
    }
    w = pw_new ();
    proto_request_begin (w, "job.retry", "req-1", 3);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    pw_str (w, "failed_only");
    pw_bool (w, true);
    pw_str (w, "target");
    pw_str (w, "any:group:web");
    s_expect_request_ok (w, "job.retry");
    w = pw_new ();
    proto_request_begin (w, "node.history", "req-1", 2);
    pw_str (w, "node");
    pw_str (w, "web-01");
    pw_str (w, "limit");
    pw_int (w, 5);
    s_expect_request_ok (w, "node.history");

    const char *with_node [] = { "node.drain", "node.resume", "key.accept",
                                 "key.reject", "key.delete", "node.workers" };
    for (size_t index = 0; index < 6; index++) {
        w = pw_new ();
        proto_request_begin (w, with_node [index], "req-1", 1);
        pw_str (w, "node");
        pw_str (w, "web-01");
        s_expect_request_ok (w, with_node [index]);
    }
    const char *key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
    assert_int_equal (strlen (key), 40);
    w = pw_new ();
    proto_request_begin (w, "key.accept", "req-1", 1);
    pw_str (w, "key");
    pw_str (w, key);
    s_expect_request_ok (w, "key.accept");

    const char *bare [] = { "broker.drain", "broker.resume", "key.list" };
    for (size_t index = 0; index < 3; index++) {
        w = pw_new ();
        proto_request_begin (w, bare [index], "req-1", 0);
        s_expect_request_ok (w, bare [index]);
    }
}

//  Asserts that WRITER's request is refused with CODE, a reason holding
//  EXPECT, and the echoed id ID (or none).
static void
s_expect_request_refused (pw_t *writer, const char *code, const char *expect,
                          const char *id)
{
    s_outcome_t out;
    s_request (writer, &out);
    assert_int_equal (out.rc, -2);
    assert_null (out.req);
    assert_non_null (out.code);
    if (strcmp (out.code, code) != 0)
        fail_msg ("code %s (%s), expected %s", out.code, out.why, code);
    if (!strstr (out.why, expect))
        fail_msg ("reason '%s' lacks '%s'", out.why, expect);
    s_assert_text (out.id, id);
    s_outcome_clear (&out);
    pw_destroy (&writer);
}

static void
test_proto_request_errors (void **state)
{
    //  Undecodable or not a map: malformed
    pw_t *w = pw_new ();
    pw_raw (w, "\xdd\x00\xff\xff\xff", 5);
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "claims", NULL);
    w = pw_new ();
    pw_str (w, "hello");
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "a request is a map",
                              NULL);
    w = pw_new ();
    proto_request_begin (w, "status", "req-1", 0);
    pw_nil (w);
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "trailing", NULL);

    //  Versions: the id is still echoed
    w = pw_new ();
    pw_map (w, 3);
    pw_str (w, "v");
    pw_int (w, 3);
    pw_str (w, "type");
    pw_str (w, "status");
    pw_str (w, "id");
    pw_str (w, "r7");
    s_expect_request_refused (w, PROTO_ERR_VERSION,
                              "unsupported version 3 (speaks 1 to 2)", "r7");
    w = pw_new ();
    pw_map (w, 2);
    pw_str (w, "type");
    pw_str (w, "status");
    pw_str (w, "id");
    pw_str (w, "r8");
    s_expect_request_refused (w, PROTO_ERR_VERSION, "speaks versions 1 to 2", "r8");

    //  Types
    w = pw_new ();
    proto_request_begin (w, "job.explode", "r9", 0);
    s_expect_request_refused (w, PROTO_ERR_UNKNOWN_TYPE,
                              "unknown type 'job.explode'", "r9");
    w = pw_new ();
    pw_map (w, 2);
    pw_str (w, "v");
    pw_int (w, 1);
    pw_str (w, "id");
    pw_str (w, "r10");
    s_expect_request_refused (w, PROTO_ERR_UNKNOWN_TYPE, "no 'type'", "r10");

    //  Fields
    w = pw_new ();
    proto_request_begin (w, "status", NULL, 0);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST, "id: required", NULL);
    char long_id [PROTO_MAX_REQUEST_ID + 2];
    memset (long_id, 'i', sizeof long_id - 1);
    long_id [sizeof long_id - 1] = 0;
    w = pw_new ();
    proto_request_begin (w, "status", long_id, 0);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST, "id: required", NULL);
    w = pw_new ();
    proto_request_begin (w, "status", "", 0);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST, "id: required", NULL);

    w = pw_new ();
    proto_request_begin (w, "node.list", "r11", 1);
    pw_str (w, "foo");
    pw_int (w, 1);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST,
                              "node.list: unknown key 'foo'", "r11");
    w = pw_new ();
    proto_request_begin (w, "job.get", "r12", 0);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST,
                              "job.get: job: required", "r12");
    w = pw_new ();
    proto_request_begin (w, "job.get", "r13", 1);
    pw_str (w, "job");
    pw_int (w, 5);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST,
                              "job.get: job: expected string, got int",
                              "r13");
    w = pw_new ();
    proto_request_begin (w, "job.submit", "r14", 1);
    pw_str (w, "job");
    pw_str (w, "group:web");
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST,
                              "job.submit: job: expected map", "r14");
    w = pw_new ();
    proto_request_begin (w, "job.list", "r15", 1);
    pw_str (w, "limit");
    pw_int (w, 0);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST, "out of range",
                              "r15");
    w = pw_new ();
    proto_request_begin (w, "job.events", "r16", 2);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    pw_str (w, "after");
    pw_int (w, -1);
    s_expect_request_refused (w, PROTO_ERR_BAD_REQUEST, "after", "r16");
    w = pw_new ();
    proto_request_begin (w, "node.get", "r17", 1);
    pw_str (w, "node");
    pw_strn (w, "a\0b", 3);
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "NUL", NULL);

    //  Bad text anywhere is malformed, and a bad id is never echoed
    w = pw_new ();
    proto_request_begin (w, "node.get", "r18\xc0\x80", 1);
    pw_str (w, "node");
    pw_str (w, "web-01");
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "UTF-8", NULL);
    w = pw_new ();
    proto_request_begin (w, "node.get", "r19\xff", 1);
    pw_str (w, "node");
    pw_str (w, "web-01");
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "UTF-8", NULL);
    w = pw_new ();
    proto_request_begin (w, "job.submit", "r20", 1);
    pw_str (w, "job");
    pw_map (w, 2);
    pw_str (w, "target");
    pw_map (w, 2);
    pw_str (w, "scope");
    pw_str (w, "node");
    pw_str (w, "value");
    pw_str (w, "web-\xed\xa0\x80");
    pw_str (w, "tasks");
    pw_array (w, 0);
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "UTF-8", NULL);
    w = pw_new ();
    proto_request_begin (w, "job.submit", "r21", 1);
    pw_str (w, "job");
    pw_map (w, 1);
    pw_str (w, "tasks");
    pw_array (w, 1);
    pw_map (w, 3);
    pw_str (w, "backend");
    pw_str (w, "test");
    pw_str (w, "action");
    pw_str (w, "echo");
    pw_str (w, "params");
    pw_map (w, 1);
    pw_str (w, "text");
    pw_str (w, "\xe0\x80\x80");
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "UTF-8", NULL);
    w = pw_new ();
    proto_request_begin (w, "job.cancel", "r22", 2);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    pw_str (w, "rea\xc3son");
    pw_str (w, "x");
    s_expect_request_refused (w, PROTO_ERR_MALFORMED, "UTF-8", NULL);

    //  NULL out-parameters are allowed
    w = pw_new ();
    pw_str (w, "x");
    proto_request_t *req = NULL;
    assert_int_equal (proto_request_decode (pw_data (w), pw_size (w), &req,
                                            NULL, NULL, NULL, 0), -2);
    assert_null (req);
    pw_destroy (&w);
}

//  The version window: bodies of v 1 and 2 are read and say their
//  version; each is written at the version asked for; replies are
//  answered at their request's version.
static void
test_proto_version_window (void **state)
{
    (void) state;
    for (int version = PROTO_VERSION_MIN; version <= PROTO_VERSION;
         version++) {
        proto_msg_t *msg = s_heartbeat ();
        msg->protocol = version;
        pw_t *writer = pw_new ();
        assert_int_equal (proto_msg_encode (msg, writer), 0);
        proto_msg_destroy (&msg);
        //  {v: N, ...}: the fixmap, "v", the fixint
        assert_int_equal (((const uint8_t *) pw_data (writer)) [3], version);
        assert_int_equal (proto_msg_decode (pw_data (writer),
                                            pw_size (writer), &msg, NULL, 0),
                          0);
        assert_int_equal (msg->protocol, version);
        proto_msg_destroy (&msg);
        assert_int_equal (proto_msg_decode_schema (pw_data (writer),
                                                   pw_size (writer), &msg,
                                                   NULL, 0), 0);
        assert_int_equal (msg->protocol, version);
        proto_msg_destroy (&msg);
        //  A hello says its version too (it decodes apart)
        msg = s_hello ();
        msg->protocol = version;
        pw_reset (writer);
        assert_int_equal (proto_msg_encode (msg, writer), 0);
        proto_msg_destroy (&msg);
        assert_int_equal (proto_msg_decode (pw_data (writer),
                                            pw_size (writer), &msg, NULL, 0),
                          0);
        assert_int_equal (msg->protocol, version);
        proto_msg_destroy (&msg);
        //  The acks' own encoders
        pw_reset (writer);
        assert_int_equal (proto_result_ack_encode (JOB_A, 1, 1, 0, version,
                                                   writer), 0);
        assert_int_equal (proto_msg_decode (pw_data (writer),
                                            pw_size (writer), &msg, NULL, 0),
                          0);
        assert_int_equal (msg->protocol, version);
        proto_msg_destroy (&msg);

        //  A request of each version is read, and its reply written at it
        pw_reset (writer);
        pw_map (writer, 3);
        pw_str (writer, "v");
        pw_int (writer, version);
        pw_str (writer, "type");
        pw_str (writer, "status");
        pw_str (writer, "id");
        pw_str (writer, "r1");
        s_outcome_t out;
        s_request (writer, &out);
        assert_int_equal (out.rc, 0);
        assert_int_equal (out.req->version, version);
        s_outcome_clear (&out);
        assert_int_equal (proto_reply_version (pw_data (writer),
                                               pw_size (writer)), version);
        pw_t *reply = pw_new ();
        proto_reply_error (reply, "r1", PROTO_ERR_CONFLICT, "no", NULL, 0);
        uint8_t *bytes = malloc (pw_size (reply));
        assert_non_null (bytes);
        memcpy (bytes, pw_data (reply), pw_size (reply));
        assert_int_equal (proto_reply_set_version (bytes, pw_size (reply),
                                                   version), 0);
        pv_doc_t *doc = NULL;
        assert_int_equal (pv_doc_decode (bytes, pw_size (reply), &doc, NULL,
                                         0), 0);
        int64_t number = 0;
        assert_int_equal (pv_get_int (pv_map_get (pv_doc_root (doc), "v"),
                                      &number), 0);
        assert_int_equal (number, version);
        pv_doc_destroy (&doc);
        free (bytes);
        pw_destroy (&reply);
        pw_destroy (&writer);
    }
    //  What is not spoken is answered at the nearest version spoken
    const int64_t far [] = { 0, -1, 3, 300, 70000 };
    const int nearest [] = { PROTO_VERSION_MIN, PROTO_VERSION_MIN,
                             PROTO_VERSION, PROTO_VERSION, PROTO_VERSION };
    for (size_t index = 0; index < sizeof far / sizeof far [0]; index++) {
        pw_t *writer = pw_new ();
        pw_map (writer, 2);
        pw_str (writer, "v");
        pw_int (writer, far [index]);
        pw_str (writer, "type");
        pw_str (writer, "status");
        assert_int_equal (proto_reply_version (pw_data (writer),
                                               pw_size (writer)),
                          nearest [index]);
        assert_int_equal (proto_version_for (far [index]), nearest [index]);
        assert_false (proto_version_spoken (far [index]));
        pw_destroy (&writer);
    }
    //  No readable v, or no map: the oldest reader gets it
    pw_t *writer = pw_new ();
    pw_map (writer, 1);
    pw_str (writer, "v");
    pw_str (writer, "2");
    assert_int_equal (proto_reply_version (pw_data (writer), pw_size (writer)),
                      PROTO_VERSION_MIN);
    assert_int_equal (proto_reply_version ("\x91\x01", 2), PROTO_VERSION_MIN);
    assert_int_equal (proto_reply_version (NULL, 0), PROTO_VERSION_MIN);
    //  A body that does not start {v: fixint} is left alone
    uint8_t odd [] = { 0x81, 0xa1, 'x', 0x02 };
    assert_int_equal (proto_reply_set_version (odd, sizeof odd, 1), -1);
    assert_int_equal (odd [3], 0x02);
    uint8_t short_one [] = { 0x81, 0xa1 };
    assert_int_equal (proto_reply_set_version (short_one, sizeof short_one, 1),
                      -1);
    char sentence [80];
    assert_string_equal (proto_version_refusal (9, sentence, sizeof sentence),
                         "unsupported version 9 (speaks 1 to 2)");
    pw_destroy (&writer);
}

static void
test_proto_replies (void **state)
{
    pw_t *w = pw_new ();
    proto_reply_ok_begin (w, "req-1");
    pw_map (w, 1);
    pw_str (w, "job");
    pw_str (w, JOB_A);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    const pv_t *root = pv_doc_root (doc);
    int64_t version = 0;
    assert_int_equal (pv_get_int (pv_map_get (root, "v"), &version), 0);
    assert_int_equal (version, PROTO_VERSION);
    assert_true (pv_str_eq (pv_map_get (root, "type"), "ok"));
    assert_true (pv_str_eq (pv_map_get (root, "id"), "req-1"));
    assert_true (pv_str_eq (pv_map_get (pv_map_get (root, "data"), "job"),
                            JOB_A));
    pv_doc_destroy (&doc);

    char *details [] = { "tasks[0].backend: required", "strategy: unknown" };
    pw_reset (w);
    proto_reply_error (w, "req-2", PROTO_ERR_INVALID_JOB, "job is invalid",
                       details, 2);
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    root = pv_doc_root (doc);
    assert_int_equal (pv_size (root), 6);
    assert_true (pv_str_eq (pv_map_get (root, "type"), "error"));
    assert_true (pv_str_eq (pv_map_get (root, "code"), "invalid_job"));
    assert_true (pv_str_eq (pv_map_get (root, "message"), "job is invalid"));
    assert_true (pv_str_eq (pv_array_at (pv_map_get (root, "details"), 1),
                            "strategy: unknown"));
    pv_doc_destroy (&doc);

    //  Without details and without an id
    pw_reset (w);
    proto_reply_error (w, NULL, PROTO_ERR_MALFORMED, "not msgpack", NULL, 0);
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    root = pv_doc_root (doc);
    assert_int_equal (pv_size (root), 5);
    assert_int_equal (pv_type (pv_map_get (root, "id")), PV_NIL);
    assert_null (pv_map_get (root, "details"));
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

//  typed_data: a data value marked a number goes as an int and comes
//  back marked; labels and params never take ints
static void
test_proto_data_numbers (void **state)
{
    proto_msg_t *sent = s_result ();
    sent->data [0].number = false;
    free (sent->data [1].value);
    sent->data [1].value = s_dup ("23639456");
    sent->data [1].number = true;
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (sent, writer), 0);
    proto_msg_t *got = NULL;
    char why [256];
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer),
                                        &got, why, sizeof why), 0);
    assert_int_equal (got->data_count, 2);
    assert_false (got->data [0].number);
    assert_true (got->data [1].number);
    assert_string_equal (got->data [1].value, "23639456");
    //  On the wire it is an int: "\xce" (uint32) after its key
    const uint8_t *bytes = pw_data (writer);
    bool found = false;
    for (size_t at = 0; at + 3 < pw_size (writer); at++)
        if (memcmp (bytes + at, "\xa2os\xce", 4) == 0)
            found = true;
    assert_true (found);
    proto_msg_destroy (&got);
    proto_msg_destroy (&sent);
    pw_destroy (&writer);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_proto_round_trip),
        cmocka_unit_test (test_proto_any_key_order),
        cmocka_unit_test (test_proto_every_truncation_refused),
        cmocka_unit_test (test_proto_trailing_bytes_refused),
        cmocka_unit_test (test_proto_type_names),
        cmocka_unit_test (test_proto_version_and_type_refused),
        cmocka_unit_test (test_proto_version_window),
        cmocka_unit_test (test_proto_wrong_types_refused),
        cmocka_unit_test (test_proto_ranges_refused),
        cmocka_unit_test (test_proto_param_range),
        cmocka_unit_test (test_proto_keys_refused),
        cmocka_unit_test (test_proto_bad_names_refused),
        cmocka_unit_test (test_proto_bad_text_refused),
        cmocka_unit_test (test_proto_hostile_bytes_refused),
        cmocka_unit_test (test_proto_direct_decode_reads_flat_messages),
        cmocka_unit_test (test_proto_direct_decode_reads_every_encoding),
        cmocka_unit_test (test_proto_direct_decode_declines_hostile),
        cmocka_unit_test (test_proto_direct_decode_reads_results),
        cmocka_unit_test (test_proto_encode_refuses_bad_messages),
        cmocka_unit_test (test_proto_result_ack_encode),
        cmocka_unit_test (test_proto_ack_encoders_epoch),
        cmocka_unit_test (test_proto_result_acks_encode),
        cmocka_unit_test (test_proto_output_acks),
        cmocka_unit_test (test_proto_broker_key),
        cmocka_unit_test (test_proto_result_acks_refused),
        cmocka_unit_test (test_proto_hello_features),
        cmocka_unit_test (test_proto_results),
        cmocka_unit_test (test_proto_request_each_type_accepted),
        cmocka_unit_test (test_proto_request_errors),
        cmocka_unit_test (test_proto_replies),
        cmocka_unit_test (test_proto_output_pieces_refused),
        cmocka_unit_test (test_proto_data_numbers),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
