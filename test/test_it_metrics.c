/*  =========================================================================
    test_it_metrics - metrics.get end to end: a real gridbroker and two
    real gridagents over ipc://, jobs that succeed and fail, hostile and
    refused input; the figures of the Prometheus text move as they should,
    and Debian's promtool (`promtool check metrics`) finds nothing wrong
    with the text. Over the HTTP face: GET /metrics with a token serves
    the same text, and 401 and 403 answers are counted by face.

    The fleet: web-01 and web-02 (group web). The broker knows a viewer
    client key besides the harness's admin.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <math.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen
#define S_PROMTOOL "/usr/bin/promtool"

static grid_t s_grid;
static char s_viewer [400];     //  Key pair with the viewer role
static char s_viewer_arg [500];
static int s_port;              //  The broker's HTTP face
static char s_token [128];      //  An HTTP token with the viewer role

//  ---------------------------------------------------------------------
//  Helpers

//  The text of a metrics.get as KEY_FILE (caller frees), or a failed test.
static char *
s_scrape_as (const char *key_file)
{
    pv_doc_t *doc = grid_call_as (&s_grid, key_file, "metrics.get", NULL);
    const pv_t *data = NULL;
    if (!grid_reply_ok (doc, &data) && doc) {
        pv_write_json (pv_doc_root (doc), stderr, 2);
        fprintf (stderr, "\n");
    }
    assert_true (grid_reply_ok (doc, &data));
    char *text = pv_strdup (pv_map_get (data, "text"));
    assert_non_null (text);
    pv_doc_destroy (&doc);
    return text;
}

static char *
s_scrape (void)
{
    return s_scrape_as (s_viewer);
}

//  The value of the sample SERIES (its name and labels, exactly as
//  written) in TEXT; NAN when there is no such line.
static double
s_value (const char *text, const char *series)
{
    size_t length = strlen (series);
    const char *line = text;
    while (line && *line) {
        if (*line != '#' && strncmp (line, series, length) == 0
            && line [length] == ' ')
            return strtod (line + length + 1, NULL);
        line = strchr (line, '\n');
        if (line)
            line++;
    }
    return NAN;
}

//  Asserts that SERIES is there in both texts and moved by DELTA.
static void
s_expect_delta (const char *before, const char *after, const char *series,
                double delta)
{
    double old_value = s_value (before, series);
    double new_value = s_value (after, series);
    if (isnan (old_value) || isnan (new_value)
        || new_value - old_value != delta)
        fprintf (stderr, "%s: %g -> %g, expected a change of %g\n", series,
                 old_value, new_value, delta);
    assert_false (isnan (old_value));
    assert_false (isnan (new_value));
    assert_true (new_value - old_value == delta);
}

//  Asserts that SERIES is there and holds VALUE.
static void
s_expect_value (const char *text, const char *series, double value)
{
    double actual = s_value (text, series);
    if (actual != value)
        fprintf (stderr, "%s: %g, expected %g\n", series, actual, value);
    assert_true (actual == value);
}

//  Runs promtool check metrics on TEXT; returns its exit code and puts
//  what it printed into *REPORT_P (caller frees).
static int
s_promtool (const char *text, char **report_p)
{
    char path [400], command [1000];
    snprintf (path, sizeof path, "%s/metrics.txt", s_grid.dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
    snprintf (command, sizeof command, "%s check metrics <'%s' 2>&1",
              S_PROMTOOL, path);
    FILE *pipe = popen (command, "r");
    assert_non_null (pipe);
    char *report = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&report, &size);
    char buffer [4096];
    size_t got;
    while ((got = fread (buffer, 1, sizeof buffer, pipe)) > 0)
        fwrite (buffer, 1, got, out);
    fclose (out);
    int status = pclose (pipe);
    *report_p = report;
    return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
}

//  Asserts that promtool accepts TEXT without a single complaint.
static void
s_expect_promtool_clean (const char *text)
{
    if (access (S_PROMTOOL, X_OK) != 0)
        fail_msg ("%s is missing: make test-deps installs Debian's "
                  "prometheus package", S_PROMTOOL);
    char *report = NULL;
    int code = s_promtool (text, &report);
    if (code != 0 || strlen (report) > 0)
        fprintf (stderr, "promtool check metrics (exit %d):\n%s\n", code,
                 report);
    assert_int_equal (code, 0);
    assert_int_equal (strlen (report), 0);
    free (report);
}

//  No series and no family declaration twice in TEXT (promtool of
//  Debian 12 does not look for duplicates).
static void
s_expect_unique (const char *text)
{
    zhashx_t *seen = zhashx_new ();
    char *copy = strdup (text);
    for (char *line = strtok (copy, "\n"); line; line = strtok (NULL, "\n")) {
        if (strncmp (line, "# ", 2) != 0) {
            char *space = strrchr (line, ' ');
            assert_non_null (space);
            *space = 0;
        }
        if (zhashx_lookup (seen, line))
            fail_msg ("'%s' appears twice", line);
        zhashx_insert (seen, line, (void *) "");
    }
    free (copy);
    zhashx_destroy (&seen);
}

//  Submits YAML and waits until the job ends with STATUS.
static void
s_run_job (const char *yaml, const char *status)
{
    char *id = grid_submit_id (&s_grid, yaml);
    assert_non_null (id);
    pv_doc_t *doc = grid_wait_job (&s_grid, id, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    if (!grid_str_is (data, "status", status)) {
        pv_write_json (data, stderr, 2);
        grid_dump_logs (&s_grid);
    }
    assert_true (grid_str_is (data, "status", status));
    pv_doc_destroy (&doc);
    free (id);
}

//  Every histogram NAME in TEXT: buckets do not go down, +Inf equals
//  _count.
static void
s_expect_histogram_sane (const char *text, const char *name)
{
    char prefix [128];
    snprintf (prefix, sizeof prefix, "%s_bucket{le=\"", name);
    double previous = 0, inf = NAN;
    size_t buckets = 0;
    for (const char *line = strstr (text, prefix); line;
         line = strstr (line + 1, prefix)) {
        const char *space = strchr (line, ' ');
        assert_non_null (space);
        double value = strtod (space + 1, NULL);
        assert_true (value >= previous);
        previous = value;
        buckets++;
        if (strncmp (line + strlen (prefix), "+Inf\"", 5) == 0)
            inf = value;
    }
    assert_true (buckets >= 2);
    char series [128];
    snprintf (series, sizeof series, "%s_count", name);
    assert_true (inf == s_value (text, series));
}

//  ---------------------------------------------------------------------
//  Tests

static void
test_it_metrics_figures_move (void **state)
{
    char *before = s_scrape ();
    s_expect_promtool_clean (before);

    //  One job that succeeds on both nodes, one that fails on one
    s_run_job ("target: group:web\n"
               "tasks:\n"
               "  - {backend: test, action: echo, params: {msg: hello}}\n",
               "completed");
    s_run_job ("target: node:web-01\n"
               "tasks:\n"
               "  - {backend: test, action: fail, params: {msg: broken}}\n",
               "failed");
    //  Malformed bytes on the client socket: refused, counted
    const char garbage [] = {(char) 0xc1, 0x00, 0x7f};
    pv_doc_t *reply = grid_call_raw (&s_grid, garbage, sizeof garbage, 5000);
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, PROTO_ERR_MALFORMED);
    free (code);
    pv_doc_destroy (&reply);
    //  A viewer may not cancel: forbidden, counted
    reply = grid_call_as (&s_grid, s_viewer, "job.cancel", "job",
                          "j-0193a1b2c3d4-0001", NULL);
    code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, PROTO_ERR_FORBIDDEN);
    free (code);
    pv_doc_destroy (&reply);
    //  A key the broker does not know is refused at the handshake
    char stranger [400];
    assert_int_equal (grid_keygen (&s_grid, "stranger", stranger,
                                   sizeof stranger, NULL), 0);
    reply = grid_call_as (&s_grid, stranger, "metrics.get", NULL);
    assert_null (reply);

    char *after = s_scrape ();
    s_expect_delta (before, after, "grid_jobs_submitted_total", 2);
    s_expect_delta (before, after,
                    "grid_jobs_finished_total{status=\"completed\"}", 1);
    s_expect_delta (before, after,
                    "grid_jobs_finished_total{status=\"failed\"}", 1);
    s_expect_delta (before, after,
                    "grid_jobs_finished_total{status=\"cancelled\"}", 0);
    s_expect_delta (before, after, "grid_job_duration_seconds_count", 2);
    s_expect_delta (before, after,
                    "grid_cells_finished_total{status=\"success\"}", 2);
    s_expect_delta (before, after,
                    "grid_cells_finished_total{status=\"failed\"}", 1);
    s_expect_delta (before, after, "grid_results_ingested_total", 3);
    s_expect_delta (before, after, "grid_result_latency_seconds_count", 3);
    s_expect_delta (before, after,
                    "grid_client_requests_total{type=\"job.submit\"}", 2);
    s_expect_delta (before, after, "grid_malformed_messages_total", 1);
    s_expect_delta (before, after, "grid_auth_failures_total{face=\"zmq\","
                                   "reason=\"forbidden\"}", 1);
    assert_true (s_value (after, "grid_handshakes_refused_total")
                 >= s_value (before, "grid_handshakes_refused_total") + 1);
    //  gridagent sends its results in results messages (their entries
    //  counted in grid_batched_results_total), or one by one
    assert_true (s_value (after, "grid_agent_messages_total{type=\"result\"}")
                 + s_value (after, "grid_batched_results_total")
                 >= s_value (before,
                             "grid_agent_messages_total{type=\"result\"}")
                        + s_value (before, "grid_batched_results_total") + 3);
    assert_true (s_value (after, "grid_store_commit_seconds_count")
                 > s_value (before, "grid_store_commit_seconds_count"));
    //  The durations are real: a job takes some time, a result too
    assert_true (s_value (after, "grid_job_duration_seconds_sum") > 0);
    assert_true (s_value (after, "grid_result_latency_seconds_sum") > 0);
    s_expect_value (after, "grid_jobs_pending", 0);
    s_expect_value (after, "grid_jobs_running", 0);
    s_expect_value (after, "grid_nodes{state=\"online\"}", 2);
    s_expect_value (after, "grid_nodes{state=\"offline\"}", 0);
    s_expect_value (after, "grid_broker_state{state=\"serving\"}", 1);
    s_expect_value (after, "grid_broker_maintenance", 0);
    s_expect_value (after, "grid_store_state{state=\"ok\"}", 1);
    s_expect_value (after, "grid_build_info{version=\"" GRID_VERSION "\"}",
                    1);
    assert_true (s_value (after, "grid_store_used_bytes") > 0);
    assert_true (s_value (after, "process_open_fds") > 0);
    assert_true (s_value (after, "process_start_time_seconds") > 1.7e9);
    s_expect_histogram_sane (after, "grid_job_duration_seconds");
    s_expect_histogram_sane (after, "grid_result_latency_seconds");
    s_expect_histogram_sane (after, "grid_store_commit_seconds");
    //  Aggregates only: no series names a node
    assert_null (strstr (after, "web-01"));
    s_expect_unique (after);
    s_expect_promtool_clean (after);
    free (before);
    free (after);
}

static void
test_it_metrics_drain_and_dead_letter (void **state)
{
    char *before = s_scrape ();
    //  A failed cell of a job that keeps dead letters lands in the queue
    s_run_job ("target: node:web-02\n"
               "dead_letter: true\n"
               "tasks:\n"
               "  - {backend: test, action: fail, params: {msg: lands}}\n",
               "failed");
    pv_doc_t *reply = grid_call (&s_grid, "broker.drain", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    char *drained = s_scrape ();
    s_expect_delta (before, drained, "grid_dead_letter_entries", 1);
    s_expect_value (drained, "grid_broker_maintenance", 1);
    s_expect_value (drained, "grid_broker_state{state=\"maintenance\"}", 1);
    s_expect_value (drained, "grid_broker_state{state=\"serving\"}", 0);
    reply = grid_call (&s_grid, "broker.resume", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    char *after = s_scrape ();
    s_expect_value (after, "grid_broker_maintenance", 0);
    s_expect_promtool_clean (drained);
    free (before);
    free (drained);
    free (after);
}

static void
test_it_metrics_request_is_strict (void **state)
{
    //  No fields but the envelope's
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "metrics.get", "m-1", 1);
    pw_str (writer, "format");
    pw_str (writer, "json");
    pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer),
                                     pw_size (writer), 5000);
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, PROTO_ERR_BAD_REQUEST);
    free (code);
    pv_doc_destroy (&reply);
    pw_destroy (&writer);
    //  The admin may read it as the viewer does
    char *text = s_scrape_as (s_grid.admin_key);
    assert_non_null (strstr (text, "# TYPE grid_jobs_finished_total counter"));
    free (text);
}

//  One HTTP request on a fresh connection to the broker's HTTP face:
//  METHOD PATH with TOKEN (NULL: none). Returns the status (0 when
//  nothing came) and the whole answer in *ANSWER_P (caller frees).
static int
s_http (const char *method, const char *path, const char *token,
        char **answer_p)
{
    *answer_p = NULL;
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons ((uint16_t) s_port);
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    struct timeval timeout = {10, 0};
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (connect (fd, (struct sockaddr *) &address, sizeof address) != 0) {
        close (fd);
        return 0;
    }
    char request [512], auth [300] = "";
    if (token)
        snprintf (auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
    snprintf (request, sizeof request, "%s %s HTTP/1.1\r\nHost: x\r\n%s"
              "Connection: close\r\nContent-Length: 0\r\n\r\n", method, path,
              auth);
    assert_int_equal (send (fd, request, strlen (request), MSG_NOSIGNAL),
                      (ssize_t) strlen (request));
    char *answer = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&answer, &size);
    char buffer [8192];
    ssize_t got;
    while ((got = recv (fd, buffer, sizeof buffer, 0)) > 0)
        fwrite (buffer, 1, (size_t) got, out);
    fclose (out);
    close (fd);
    *answer_p = answer;
    return strncmp (answer, "HTTP/1.1 ", 9) == 0 ? atoi (answer + 9) : 0;
}

static void
test_it_metrics_over_http (void **state)
{
    char *before = s_scrape ();
    char *answer = NULL;
    //  No token, and a token beyond its role: refused and counted by face
    assert_int_equal (s_http ("GET", "/metrics", NULL, &answer), 401);
    free (answer);
    assert_int_equal (s_http ("GET", "/api/v1/status", "grid_nope", &answer),
                      401);
    free (answer);
    assert_int_equal (s_http ("POST", "/api/v1/broker/drain", s_token,
                              &answer), 403);
    free (answer);
    //  The text over HTTP, with its content type
    int status = s_http ("GET", "/metrics", s_token, &answer);
    if (status != 200)
        fprintf (stderr, "%s\n", answer);
    assert_int_equal (status, 200);
    assert_non_null (strstr (answer, "text/plain; version=0.0.4"));
    char *text = strstr (answer, "\r\n\r\n");
    assert_non_null (text);
    text += 4;
    s_expect_delta (before, text, "grid_auth_failures_total{face=\"http\","
                                  "reason=\"unauthorized\"}", 2);
    s_expect_delta (before, text, "grid_auth_failures_total{face=\"http\","
                                  "reason=\"forbidden\"}", 1);
    s_expect_delta (before, text, "grid_auth_failures_total{face=\"zmq\","
                                  "reason=\"forbidden\"}", 0);
    //  HTTP requests are client requests like any other
    s_expect_delta (before, text,
                    "grid_client_requests_total{type=\"broker.drain\"}", 1);
    //  The face's own figures: the three refusals before are 4xx answers
    assert_true (s_value (text, "grid_http_requests_total") >= 3);
    assert_true (s_value (text, "grid_http_errors_total{class=\"4xx\"}")
                 >= 3);
    assert_true (s_value (text, "grid_http_connections") >= 1);
    assert_true (s_value (text, "grid_http_streams") == 0);
    s_expect_unique (text);
    s_expect_promtool_clean (text);
    free (answer);
    free (before);
}

//  ---------------------------------------------------------------------

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    if (grid_keygen (&s_grid, "viewer", s_viewer, sizeof s_viewer, NULL))
        return -1;
    snprintf (s_viewer_arg, sizeof s_viewer_arg, "viewer:%s", s_viewer);
    //  A free port for the HTTP face
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    if (fd < 0 || bind (fd, (struct sockaddr *) &address, sizeof address)
        || getsockname (fd, (struct sockaddr *) &address, &len))
        return -1;
    close (fd);
    s_port = ntohs (address.sin_port);
    char listen [64];
    snprintf (listen, sizeof listen, "127.0.0.1:%d", s_port);
    const char *extra [] = {"--client-key", s_viewer_arg, "--http", listen,
                            NULL};
    if (grid_start_broker (&s_grid, extra) != 0
        || grid_start_agent (&s_grid, "web-01", "web", NULL, NULL) < 0
        || grid_start_agent (&s_grid, "web-02", "web", NULL, NULL) < 0)
        return -1;
    pv_doc_t *reply = grid_call (&s_grid, "token.add", "name", "scraper",
                                 "role", "viewer", NULL);
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
    return 0;
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_metrics_figures_move),
        cmocka_unit_test (test_it_metrics_drain_and_dead_letter),
        cmocka_unit_test (test_it_metrics_request_is_strict),
        cmocka_unit_test (test_it_metrics_over_http),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
