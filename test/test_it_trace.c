/*  =========================================================================
    test_it_trace - W3C trace context end to end: a real gridbroker that
    exports spans (tracing.otlp_endpoint) to a fake OTLP collector this
    test runs on 127.0.0.1, two real gridagents, the real gridcli.

    - gridcli job run --traceparent T: the collector gets the job's span
      (parent: T's parent id), a span per step (the job's children) and a
      span per node attempt (the step's children, with node, status, exit
      code and duration), all in T's trace; job status shows it; the
      agents' log lines about the task carry its trace id, and so do the
      broker's JSON lines about the job
    - the HTTP face's traceparent header does the same
    - a job without one gets one the broker made, shown by job status;
      its job span is a root
    - bad traceparents are refused (gridcli, job.submit, HTTP)
    - a dead collector neither slows nor breaks a job; its spans are
      counted dropped in the metrics
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#include "../proto/proto.h"
#include "../proto/names.h"
#include "../proto/trace.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000
#define S_TRACE "4bf92f3577b34da6a3ce929d0e0e4736"
#define S_PARENT "00f067aa0ba902b7"
#define S_TRACEPARENT "00-" S_TRACE "-" S_PARENT "-01"
#define S_HTTP_TRACE "0af7651916cd43dd8448eb211c80319c"
#define S_HTTP_PARENT "b7ad6b7169203331"

static grid_t s_grid;
static int s_http_port;           //  The broker's HTTP face
static char s_token [128];        //  An operator's HTTP token

//  ---------------------------------------------------------------------
//  The fake collector: takes POSTs on 127.0.0.1, keeps each body's
//  spans, answers 200.

static struct {
    int listener;                 //  Its socket
    int port;
    pthread_t thread;
    pthread_mutex_t lock;
    json_t *spans;                //  Every span received (an array)
    size_t posts;                 //  POSTs to /v1/traces
    size_t bad;                   //  Requests that were not that
    volatile bool stop;
} s_collector;

//  Reads one HTTP request from FD: returns its body (caller frees) or
//  NULL, and whether it was POST /v1/traces.
static char *
s_read_request (int fd, bool *traces)
{
    char *data = NULL;
    size_t size = 0, room = 0;
    char *body = NULL;
    long length = -1;
    while (true) {
        struct pollfd item = {fd, POLLIN, 0};
        if (poll (&item, 1, 5000) <= 0)
            break;
        if (size + 4096 + 1 > room) {
            room = room ? room * 2 : 16384;
            data = (char *) realloc (data, room);
        }
        ssize_t got = recv (fd, data + size, room - size - 1, 0);
        if (got <= 0)
            break;
        size += (size_t) got;
        data [size] = 0;
        char *end = strstr (data, "\r\n\r\n");
        if (!end)
            continue;
        if (length < 0) {
            const char *field = strcasestr (data, "Content-Length:");
            length = field && field < end ? atol (field + 15) : 0;
        }
        size_t head = (size_t) (end + 4 - data);
        if (size >= head + (size_t) length) {
            *traces = strncmp (data, "POST /v1/traces ", 16) == 0
                      && strcasestr (data, "Content-Type: application/json");
            body = strndup (end + 4, (size_t) length);
            break;
        }
    }
    free (data);
    return body;
}

static void *
s_collector_run (void *arg)
{
    while (!s_collector.stop) {
        struct pollfd item = {s_collector.listener, POLLIN, 0};
        if (poll (&item, 1, 100) <= 0)
            continue;
        int fd = accept (s_collector.listener, NULL, NULL);
        if (fd < 0)
            continue;
        bool traces = false;
        char *body = s_read_request (fd, &traces);
        json_t *root = body ? json_loads (body, 0, NULL) : NULL;
        pthread_mutex_lock (&s_collector.lock);
        if (traces && root) {
            s_collector.posts++;
            json_t *resource_spans = json_object_get (root, "resourceSpans");
            size_t index;
            json_t *resource;
            json_array_foreach (resource_spans, index, resource) {
                json_t *scopes = json_object_get (resource, "scopeSpans");
                size_t at;
                json_t *scope;
                json_array_foreach (scopes, at, scope)
                    json_array_extend (s_collector.spans,
                                       json_object_get (scope, "spans"));
            }
        }
        else
            s_collector.bad++;
        pthread_mutex_unlock (&s_collector.lock);
        json_decref (root);
        free (body);
        const char *answer = "HTTP/1.1 200 OK\r\nContent-Type: "
                             "application/json\r\nContent-Length: 2\r\n"
                             "Connection: close\r\n\r\n{}";
        ssize_t sent = send (fd, answer, strlen (answer), MSG_NOSIGNAL);
        (void) sent;
        close (fd);
    }
    return NULL;
}

//  A listening socket on a free port of 127.0.0.1 (its port in *PORT).
static int
s_listen (int *port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    if (fd < 0 || bind (fd, (struct sockaddr *) &address, sizeof address)
        || getsockname (fd, (struct sockaddr *) &address, &len)
        || listen (fd, 64))
        return -1;
    *port = ntohs (address.sin_port);
    return fd;
}

//  A free port nothing listens on.
static int
s_free_port (void)
{
    int port = 0;
    int fd = s_listen (&port);
    if (fd >= 0)
        close (fd);
    return port;
}

//  The spans of TRACE_ID the collector has, once it has at least COUNT
//  of them (a new reference), or NULL after the deadline.
static json_t *
s_spans_of (const char *trace_id, size_t count)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        json_t *found = json_array ();
        pthread_mutex_lock (&s_collector.lock);
        size_t index;
        json_t *span;
        json_array_foreach (s_collector.spans, index, span)
            if (strcmp (json_string_value (json_object_get (span, "traceId")),
                        trace_id) == 0)
                json_array_append (found, span);
        pthread_mutex_unlock (&s_collector.lock);
        if (json_array_size (found) >= count)
            return found;
        json_decref (found);
        zclock_sleep (50);
    }
    return NULL;
}

//  The span of SPANS named NAME, or NULL.
static json_t *
s_span_named (json_t *spans, const char *name)
{
    size_t index;
    json_t *span;
    json_array_foreach (spans, index, span)
        if (strcmp (json_string_value (json_object_get (span, "name")), name)
            == 0)
            return span;
    return NULL;
}

static const char *
s_field (json_t *span, const char *key)
{
    return json_string_value (json_object_get (span, key));
}

//  The value of SPAN's attribute KEY as text ("" when absent).
static const char *
s_attribute (json_t *span, const char *key)
{
    size_t index;
    json_t *attribute;
    json_array_foreach (json_object_get (span, "attributes"), index,
                        attribute) {
        if (strcmp (s_field (attribute, "key"), key) != 0)
            continue;
        json_t *value = json_object_get (attribute, "value");
        const char *text = s_field (value, "stringValue");
        return text ? text : s_field (value, "intValue");
    }
    return "";
}

//  Checks the spans of JOB_ID in SPANS: the job's span (its parent
//  PARENT, or none when NULL), one step span its child, one span per
//  node attempt (NODES of them) the step's child.
static void
s_check_tree (json_t *spans, const char *job_id, const char *parent,
              const char *const *nodes, size_t node_count)
{
    char name [128];
    snprintf (name, sizeof name, "job %s", job_id);
    json_t *job = s_span_named (spans, name);
    assert_non_null (job);
    if (parent)
        assert_string_equal (s_field (job, "parentSpanId"), parent);
    else
        assert_null (json_object_get (job, "parentSpanId"));
    assert_int_equal (json_integer_value (json_object_get (
                          json_object_get (job, "status"), "code")), 1);
    assert_string_equal (s_attribute (job, "grid.status"), "completed");
    //  Times are nanoseconds as text, the end not before the start
    assert_true (strlen (s_field (job, "startTimeUnixNano")) >= 19);
    assert_true (atoll (s_field (job, "endTimeUnixNano"))
                 >= atoll (s_field (job, "startTimeUnixNano")));
    json_t *step = s_span_named (spans, "step 0 test.echo");
    assert_non_null (step);
    assert_string_equal (s_field (step, "parentSpanId"),
                         s_field (job, "spanId"));
    for (size_t index = 0; index < node_count; index++) {
        snprintf (name, sizeof name, "node %s attempt 1", nodes [index]);
        json_t *node = s_span_named (spans, name);
        if (!node)
            fail_msg ("no span %s", name);
        assert_string_equal (s_field (node, "parentSpanId"),
                             s_field (step, "spanId"));
        assert_string_equal (s_attribute (node, "grid.node"), nodes [index]);
        assert_string_equal (s_attribute (node, "grid.status"), "success");
        assert_string_equal (s_attribute (node, "grid.exit_code"), "0");
        assert_true (*s_attribute (node, "grid.duration_ms"));
        assert_string_equal (s_field (node, "traceId"),
                             s_field (job, "traceId"));
    }
}

//  ---------------------------------------------------------------------
//  Helpers

//  Waits for JOB_ID to end; asserts it completed.
static void
s_wait_completed (const char *job_id)
{
    pv_doc_t *doc = grid_wait_job (&s_grid, job_id, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    if (!grid_str_is (data, "status", "completed")) {
        pv_write_json (data, stderr, 2);
        grid_dump_logs (&s_grid);
    }
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&doc);
}

//  The job id gridcli printed in OUT ("j-..." at the start of a line or
//  after "job "), copied into ID.
static void
s_job_id_in (const char *out, char *id)
{
    const char *at = strstr (out, "j-");
    assert_non_null (at);
    size_t length = strspn (at, "j-0123456789abcdef");
    assert_true (length > 2 && length <= JOB_ID_LEN);
    memcpy (id, at, length);
    id [length] = 0;
}

//  Whether the file PATH has a line holding every one of the texts.
static bool
s_log_has (const char *path, const char *one, const char *two)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        char *text = grid_slurp (path);
        bool found = false;
        for (char *line = text ? strtok (text, "\n") : NULL; line && !found;
             line = strtok (NULL, "\n"))
            found = strstr (line, one) && strstr (line, two);
        free (text);
        if (found)
            return true;
        zclock_sleep (50);
    }
    return false;
}

//  A metrics figure (the first sample of SERIES), or -1.
static double
s_metric (const char *series)
{
    pv_doc_t *doc = grid_call (&s_grid, "metrics.get", NULL);
    const pv_t *data = NULL;
    double value = -1;
    if (grid_reply_ok (doc, &data)) {
        char *text = pv_strdup (pv_map_get (data, "text"));
        char pattern [128];
        snprintf (pattern, sizeof pattern, "\n%s ", series);
        const char *at = text ? strstr (text, pattern) : NULL;
        if (at)
            value = strtod (at + strlen (pattern), NULL);
        free (text);
    }
    pv_doc_destroy (&doc);
    return value;
}

static size_t
s_keep (char *data, size_t size, size_t count, void *arg)
{
    FILE *out = (FILE *) arg;
    return fwrite (data, size, count, out);
}

//  POSTs BODY (NULL: GETs) to the broker's HTTP face at PATH with the
//  traceparent header TRACEPARENT (NULL: none). Returns the status; the
//  answer's body in *ANSWER_P (caller frees).
static long
s_http_post (const char *path, const char *body, const char *traceparent,
             char **answer_p)
{
    CURL *curl = curl_easy_init ();
    assert_non_null (curl);
    char url [256], auth [256], trace [128];
    snprintf (url, sizeof url, "http://127.0.0.1:%d%s", s_http_port, path);
    snprintf (auth, sizeof auth, "Authorization: Bearer %s", s_token);
    struct curl_slist *headers = curl_slist_append (NULL, auth);
    headers = curl_slist_append (headers, "Content-Type: application/json");
    if (traceparent) {
        snprintf (trace, sizeof trace, "traceparent: %s", traceparent);
        headers = curl_slist_append (headers, trace);
    }
    char *answer = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&answer, &size);
    curl_easy_setopt (curl, CURLOPT_URL, url);
    curl_easy_setopt (curl, CURLOPT_HTTPHEADER, headers);
    if (body)
        curl_easy_setopt (curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt (curl, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt (curl, CURLOPT_WRITEFUNCTION, s_keep);
    curl_easy_setopt (curl, CURLOPT_WRITEDATA, out);
    long status = 0;
    if (curl_easy_perform (curl) == CURLE_OK)
        curl_easy_getinfo (curl, CURLINFO_RESPONSE_CODE, &status);
    fclose (out);
    curl_slist_free_all (headers);
    curl_easy_cleanup (curl);
    *answer_p = answer;
    return status;
}

//  Writes the broker's config file (tracing to PORT) and (re)starts the
//  broker with it.
static int
s_start_broker (int port)
{
    char path [400];
    snprintf (path, sizeof path, "%s/gridbroker.yaml", s_grid.dir);
    FILE *file = fopen (path, "w");
    if (!file)
        return -1;
    fprintf (file, "tracing:\n  otlp_endpoint: http://127.0.0.1:%d/\n"
             "  service_name: grid-test\n  batch_delay: 50ms\n"
             "  timeout: 2s\n", port);
    fclose (file);
    char listen [64];
    snprintf (listen, sizeof listen, "127.0.0.1:%d", s_http_port);
    const char *extra [] = {"--config", path, "--http", listen,
                            "--log-format", "json", NULL};
    return grid_start_broker (&s_grid, extra);
}

//  ---------------------------------------------------------------------
//  Tests

static void
test_it_trace_from_gridcli (void **state)
{
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                         "--target", "group:web", "--traceparent",
                         S_TRACEPARENT, "test", "echo", "--msg", "hi", NULL);
    if (code != 0)
        fprintf (stderr, "%s\n%s\n", out, err);
    assert_int_equal (code, 0);
    char job_id [JOB_ID_LEN + 1];
    s_job_id_in (out, job_id);
    free (out);
    free (err);
    s_wait_completed (job_id);
    //  job, step, two node attempts
    json_t *spans = s_spans_of (S_TRACE, 4);
    assert_non_null (spans);
    const char *nodes [] = {"web-01", "web-02"};
    s_check_tree (spans, job_id, S_PARENT, nodes, 2);
    //  The agent's result named its attempt's span as the broker did
    json_t *node = s_span_named (spans, "node web-01 attempt 1");
    char returned [128];
    snprintf (returned, sizeof returned, "result traceparent 00-%s-%s-01",
              S_TRACE, s_field (node, "spanId"));
    char log_path [400];
    snprintf (log_path, sizeof log_path, "%s/agent-web-01.log", s_grid.dir);
    assert_true (s_log_has (log_path, job_id, returned));
    json_decref (spans);
    //  job status shows it, as given
    code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "status", job_id,
                     NULL);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "trace", S_TRACE, NULL));
    assert_true (grid_line_with (out, "traceparent", S_TRACEPARENT, NULL));
    assert_null (strstr (out, "(generated)"));
    free (out);
    free (err);
    //  job.get's trace (a client of this release)
    pv_doc_t *doc = grid_call (&s_grid, "job.get", "job", job_id, NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    const pv_t *trace = pv_map_get (data, "trace");
    assert_true (grid_str_is (trace, "traceparent", S_TRACEPARENT));
    assert_true (grid_str_is (trace, "trace_id", S_TRACE));
    bool generated = true;
    assert_int_equal (pv_get_bool (pv_map_get (trace, "generated"),
                                   &generated), 0);
    assert_false (generated);
    pv_doc_destroy (&doc);
    //  The agents' lines about the task carry the trace id (the text
    //  form: at the end of the line), and the broker's JSON lines about
    //  the job carry it as trace_id
    char path [400];
    snprintf (path, sizeof path, "%s/agent-web-01.log", s_grid.dir);
    assert_true (s_log_has (path, job_id, "trace_id=" S_TRACE));
    assert_true (s_log_has (path, "traceparent 00-" S_TRACE, job_id));
    snprintf (path, sizeof path, "%s/broker.log", s_grid.dir);
    assert_true (s_log_has (path, job_id, "\"trace_id\":\"" S_TRACE "\""));
    //  Its last line says it in words too
    assert_true (s_log_has (path, job_id, "completed (trace " S_TRACE ")"));
}

static void
test_it_trace_from_http (void **state)
{
    char *answer = NULL;
    const char *job = "{\"target\": \"node:web-01\", \"tasks\": [{\"backend\":"
                      " \"test\", \"action\": \"echo\", \"params\": "
                      "{\"msg\": \"hi\"}}]}";
    long status = s_http_post ("/api/v1/jobs", job,
                               "00-" S_HTTP_TRACE "-" S_HTTP_PARENT "-01",
                               &answer);
    if (status != 201)
        fprintf (stderr, "%ld %s\n", status, answer);
    assert_int_equal (status, 201);
    json_t *reply = json_loads (answer, 0, NULL);
    free (answer);
    assert_non_null (reply);
    char job_id [JOB_ID_LEN + 1];
    snprintf (job_id, sizeof job_id, "%s",
              json_string_value (json_object_get (reply, "job")));
    json_decref (reply);
    s_wait_completed (job_id);
    json_t *spans = s_spans_of (S_HTTP_TRACE, 3);
    assert_non_null (spans);
    const char *nodes [] = {"web-01"};
    s_check_tree (spans, job_id, S_HTTP_PARENT, nodes, 1);
    json_decref (spans);
    //  The HTTP job JSON shows it
    char path [64];
    snprintf (path, sizeof path, "/api/v1/jobs/%s", job_id);
    assert_int_equal (s_http_post (path, NULL, NULL, &answer), 200);
    json_t *record = json_loads (answer, 0, NULL);
    free (answer);
    json_t *trace = json_object_get (record, "trace");
    assert_string_equal (s_field (trace, "trace_id"), S_HTTP_TRACE);
    assert_string_equal (s_field (trace, "traceparent"),
                         "00-" S_HTTP_TRACE "-" S_HTTP_PARENT "-01");
    assert_true (json_is_false (json_object_get (trace, "generated")));
    json_decref (record);
    //  A header that is not a traceparent is refused, saying why
    status = s_http_post ("/api/v1/jobs", job,
                          "00-" S_HTTP_TRACE "-0000000000000000-01", &answer);
    assert_int_equal (status, 400);
    assert_non_null (strstr (answer, "parent id is all zeros"));
    free (answer);
    status = s_http_post ("/api/v1/jobs", job, "garbage", &answer);
    assert_int_equal (status, 400);
    assert_non_null (strstr (answer, "traceparent"));
    free (answer);
}

static void
test_it_trace_made_by_the_broker (void **state)
{
    char *id = grid_submit_id (&s_grid, "target: node:web-02\n"
                               "tasks:\n  - backend: test\n    action: echo\n"
                               "    params: {msg: hi}\n");
    assert_non_null (id);
    s_wait_completed (id);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "status", id,
                         NULL);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "trace", "(generated)", NULL));
    //  Its trace id, as job status shows it
    const char *at = strstr (out, "(generated)");
    assert_non_null (at);
    char trace_id [TRACE_ID_HEX + 1];
    memcpy (trace_id, at - 1 - TRACE_ID_HEX, TRACE_ID_HEX);
    trace_id [TRACE_ID_HEX] = 0;
    free (out);
    free (err);
    json_t *spans = s_spans_of (trace_id, 3);
    assert_non_null (spans);
    const char *nodes [] = {"web-02"};
    s_check_tree (spans, id, NULL, nodes, 1);
    json_decref (spans);
    free (id);
}

static void
test_it_trace_refused (void **state)
{
    static const char *bad [] = {
        "00-" S_TRACE "-" S_PARENT "-01x",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-" S_PARENT "-01",
        "ff-" S_TRACE "-" S_PARENT "-01",
        "00-00000000000000000000000000000000-" S_PARENT "-01",
        "00-" S_TRACE "-" S_PARENT,
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        //  gridcli refuses it before sending anything
        char *out = NULL, *err = NULL;
        int code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                             "--target", "all", "--traceparent", bad [index],
                             "test", "echo", "--msg", "hi", NULL);
        assert_int_not_equal (code, 0);
        assert_non_null (strstr (err, "traceparent"));
        free (out);
        free (err);
        //  and so does the broker
        pw_t *writer = pw_new ();
        char request_id [32];
        snprintf (request_id, sizeof request_id, "trace-bad-%zu", index);
        proto_request_begin (writer, "job.submit", request_id, 2);
        pw_str (writer, "job");
        pw_map (writer, 2);
        pw_str (writer, "target");
        pw_str (writer, "all");
        pw_str (writer, "tasks");
        pw_array (writer, 1);
        pw_map (writer, 2);
        pw_str (writer, "backend");
        pw_str (writer, "test");
        pw_str (writer, "action");
        pw_str (writer, "hostname");
        pw_str (writer, "traceparent");
        pw_str (writer, bad [index]);
        pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer),
                                         pw_size (writer), 5000);
        char *error = grid_reply_code (reply);
        assert_non_null (error);
        assert_string_equal (error, PROTO_ERR_BAD_REQUEST);
        free (error);
        pv_doc_destroy (&reply);
        pw_destroy (&writer);
    }
}

//  The broker killed mid-job: the one that starts on its store closes
//  the job's spans, with the parents the agents were given.
static void
test_it_trace_broker_restart (void **state)
{
    const char *trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                         "--target", "node:web-01", "--traceparent",
                         "00-5bf92f3577b34da6a3ce929d0e0e4737-"
                         "00f067aa0ba902b8-01", "test", "sleep", "--seconds",
                         "2", NULL);
    assert_int_equal (code, 0);
    char job_id [JOB_ID_LEN + 1];
    s_job_id_in (out, job_id);
    free (out);
    free (err);
    //  Once the agent runs it, the broker dies
    char path [400];
    snprintf (path, sizeof path, "%s/agent-web-01.log", s_grid.dir);
    assert_true (s_log_has (path, job_id, "taken"));
    grid_stop_broker (&s_grid, true);
    assert_int_equal (s_start_broker (s_collector.port), 0);
    s_wait_completed (job_id);
    json_t *spans = s_spans_of (trace, 3);
    assert_non_null (spans);
    char name [128];
    snprintf (name, sizeof name, "job %s", job_id);
    json_t *job = s_span_named (spans, name);
    assert_non_null (job);
    assert_string_equal (s_field (job, "parentSpanId"), "00f067aa0ba902b8");
    json_t *step = s_span_named (spans, "step 0 test.sleep");
    assert_non_null (step);
    assert_string_equal (s_field (step, "parentSpanId"),
                         s_field (job, "spanId"));
    json_t *node = s_span_named (spans, "node web-01 attempt 1");
    assert_non_null (node);
    assert_string_equal (s_field (node, "parentSpanId"),
                         s_field (step, "spanId"));
    //  The command the agent took named the same step span
    char given [128];
    snprintf (given, sizeof given, "traceparent 00-%s-%s-01", trace,
              s_field (step, "spanId"));
    assert_true (s_log_has (path, job_id, given));
    json_decref (spans);
}

//  Last: the broker restarts with a collector nobody listens on.
static void
test_it_trace_dead_collector (void **state)
{
    grid_stop_broker (&s_grid, false);
    assert_int_equal (s_start_broker (s_free_port ()), 0);
    assert_true (grid_wait_node (&s_grid, "web-01", "online", S_WAIT_MS));
    assert_true (grid_wait_node (&s_grid, "web-02", "online", S_WAIT_MS));
    for (int round = 0; round < 3; round++) {
        char *id = grid_submit_id (&s_grid, "target: group:web\n"
                                   "tasks:\n  - backend: test\n"
                                   "    action: echo\n    params: {msg: hi}\n");
        assert_non_null (id);
        s_wait_completed (id);
        free (id);
    }
    //  4 spans a job, none exported: all counted dropped
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline
           && s_metric ("grid_trace_spans_dropped_total") < 12)
        zclock_sleep (100);
    assert_true (s_metric ("grid_trace_spans_dropped_total") >= 12);
    assert_true (s_metric ("grid_trace_spans_exported_total") == 0);
}

//  ---------------------------------------------------------------------

static int
s_setup (void **state)
{
    curl_global_init (CURL_GLOBAL_DEFAULT);
    pthread_mutex_init (&s_collector.lock, NULL);
    s_collector.spans = json_array ();
    s_collector.listener = s_listen (&s_collector.port);
    if (s_collector.listener < 0
        || pthread_create (&s_collector.thread, NULL, s_collector_run, NULL))
        return -1;
    if (grid_init (&s_grid) != 0)
        return -1;
    s_http_port = s_free_port ();
    //  The agents log every line about a task (debug), in text
    const char *agent_extra [] = {"--log-level", "debug", NULL};
    if (s_start_broker (s_collector.port) != 0
        || grid_start_agent (&s_grid, "web-01", "web", NULL, agent_extra) < 0
        || grid_start_agent (&s_grid, "web-02", "web", NULL, agent_extra) < 0)
        return -1;
    pv_doc_t *reply = grid_call (&s_grid, "token.add", "name", "tracer",
                                 "role", "operator", NULL);
    const pv_t *data = NULL;
    char *token = grid_reply_ok (reply, &data)
                      ? pv_strdup (pv_map_get (data, "token")) : NULL;
    pv_doc_destroy (&reply);
    if (!token)
        return -1;
    snprintf (s_token, sizeof s_token, "%s", token);
    free (token);
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    s_collector.stop = true;
    pthread_join (s_collector.thread, NULL);
    close (s_collector.listener);
    json_decref (s_collector.spans);
    pthread_mutex_destroy (&s_collector.lock);
    curl_global_cleanup ();
    return 0;
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_trace_from_gridcli),
        cmocka_unit_test (test_it_trace_from_http),
        cmocka_unit_test (test_it_trace_made_by_the_broker),
        cmocka_unit_test (test_it_trace_refused),
        cmocka_unit_test (test_it_trace_broker_restart),
        cmocka_unit_test (test_it_trace_dead_collector),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
