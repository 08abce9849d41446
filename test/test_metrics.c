/*  =========================================================================
    test_metrics - the Prometheus exposition writer and the histograms
    behind metrics.get: bucket edges, cumulative buckets and exact second
    formatting, escaping, the whole rendering of a snapshot (every family
    declared once, before its samples, no series twice), and Debian's
    promtool on that text.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <math.h>
#include <sys/wait.h>

#include "../broker/metrics.h"

#define S_PROMTOOL "/usr/bin/promtool"

//  What WRITE wrote to a memory stream (caller frees).
typedef void (s_write_fn) (FILE *out, const void *arg);

static char *
s_capture (s_write_fn *write, const void *arg)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    assert_non_null (out);
    write (out, arg);
    fclose (out);
    return text;
}

static const int64_t s_bounds [] = {250, 1000, 2500000, 3600000000};

//  ---------------------------------------------------------------------

static void
test_metrics_hist_buckets_and_sum (void **state)
{
    metrics_hist_t hist;
    metrics_hist_init (&hist, s_bounds, 4);
    metrics_hist_observe (&hist, 250);          //  on a bound: that bucket
    metrics_hist_observe (&hist, 251);
    metrics_hist_observe (&hist, -7);           //  counts as 0
    metrics_hist_observe (&hist, 5000000000);   //  past the last: +Inf
    assert_int_equal (hist.count, 4);
    assert_int_equal (hist.counts [0], 2);
    assert_int_equal (hist.counts [1], 1);
    assert_int_equal (hist.counts [2], 0);
    assert_int_equal (hist.counts [3], 0);
    assert_int_equal (hist.counts [4], 1);
    assert_int_equal (hist.sum_us, 250 + 251 + 5000000000);
    //  No more bounds than it has room for
    int64_t many [METRICS_HIST_MAX_BOUNDS + 5];
    for (size_t index = 0; index < METRICS_HIST_MAX_BOUNDS + 5; index++)
        many [index] = (int64_t) index + 1;
    metrics_hist_init (&hist, many, METRICS_HIST_MAX_BOUNDS + 5);
    assert_int_equal (hist.bound_count, METRICS_HIST_MAX_BOUNDS);
    metrics_hist_observe (&hist, 1000);
    assert_int_equal (hist.counts [METRICS_HIST_MAX_BOUNDS], 1);
}

static void
s_write_hist (FILE *out, const void *arg)
{
    metrics_write_hist (out, "grid_x_seconds", "An example.",
                        (const metrics_hist_t *) arg);
}

static void
test_metrics_hist_text (void **state)
{
    metrics_hist_t hist;
    metrics_hist_init (&hist, s_bounds, 4);
    metrics_hist_observe (&hist, 100);
    metrics_hist_observe (&hist, 2000);
    metrics_hist_observe (&hist, 2000);
    metrics_hist_observe (&hist, 4000000000);
    char *text = s_capture (s_write_hist, &hist);
    assert_string_equal (text,
        "# HELP grid_x_seconds An example.\n"
        "# TYPE grid_x_seconds histogram\n"
        "grid_x_seconds_bucket{le=\"0.00025\"} 1\n"
        "grid_x_seconds_bucket{le=\"0.001\"} 1\n"
        "grid_x_seconds_bucket{le=\"2.5\"} 3\n"
        "grid_x_seconds_bucket{le=\"3600\"} 3\n"
        "grid_x_seconds_bucket{le=\"+Inf\"} 4\n"
        "grid_x_seconds_sum 4000.0041\n"
        "grid_x_seconds_count 4\n");
    free (text);
    //  Empty: every bucket and the sum read 0
    metrics_hist_init (&hist, s_bounds, 4);
    text = s_capture (s_write_hist, &hist);
    assert_non_null (strstr (text, "grid_x_seconds_bucket{le=\"+Inf\"} 0\n"
                                   "grid_x_seconds_sum 0\n"
                                   "grid_x_seconds_count 0\n"));
    free (text);
}

static void
s_write_escapes (FILE *out, const void *arg)
{
    metrics_write_family (out, "grid_y", "gauge",
                          "A back\\slash, a \"quote\" and a\nnewline.");
    const char *labels [] = {"name", "a\\b \"c\"\nd", "other", "x", NULL};
    metrics_write_uint (out, "grid_y", labels, 18446744073709551615ULL);
    metrics_write_double (out, "grid_y", NULL, 0.25);
    metrics_write_double (out, "grid_y", NULL, INFINITY);
}

static void
test_metrics_escapes_and_values (void **state)
{
    char *text = s_capture (s_write_escapes, NULL);
    assert_string_equal (text,
        "# HELP grid_y A back\\\\slash, a \"quote\" and a\\nnewline.\n"
        "# TYPE grid_y gauge\n"
        "grid_y{name=\"a\\\\b \\\"c\\\"\\nd\",other=\"x\"} "
        "18446744073709551615\n"
        "grid_y 0.25\n"
        "grid_y +Inf\n");
    free (text);
}

static void
test_metrics_counts_requests_and_messages (void **state)
{
    metrics_t *metrics = metrics_new ();
    assert_non_null (metrics);
    metrics_request (metrics, "job.submit");
    metrics_request (metrics, "job.submit");
    metrics_request (metrics, "no.such.type");   //  not a series
    metrics_agent_message (metrics, PROTO_RESULT);
    metrics_agent_message (metrics, (proto_type_t) 999);
    metrics_result (metrics, 40);
    metrics_result (metrics, -1);                 //  latency unknown
    metrics_job_finished (metrics, SCHED_JOB_FAILED, 1500);
    metrics_commit (metrics, 300);
    assert_int_equal (metrics_result_latency (metrics)->count, 1);
    assert_int_equal (metrics_result_latency (metrics)->sum_us, 40000);
    assert_int_equal (metrics_job_duration (metrics)->sum_us, 1500000);
    assert_int_equal (metrics_commit_latency (metrics)->count, 1);
    metrics_figures_t figures;
    memset (&figures, 0, sizeof figures);
    figures.version = "1.2.3";
    figures.state = "serving";
    figures.store_state = "ok";
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    assert_int_equal (metrics_render (metrics, &figures, out), 0);
    fclose (out);
    assert_non_null (strstr (text,
                             "grid_client_requests_total{type=\"job.submit\"} 2\n"));
    assert_non_null (strstr (text,
                             "grid_client_requests_total{type=\"status\"} 0\n"));
    assert_null (strstr (text, "no.such.type"));
    assert_non_null (strstr (text,
                             "grid_agent_messages_total{type=\"result\"} 1\n"));
    assert_non_null (strstr (text, "grid_results_ingested_total 2\n"));
    assert_non_null (strstr (text,
                             "grid_jobs_finished_total{status=\"failed\"} 1\n"));
    assert_non_null (strstr (text, "grid_build_info{version=\"1.2.3\"} 1\n"));
    //  Without /proc figures only the start time of the process_ family
    assert_null (strstr (text, "process_open_fds"));
    free (text);
    metrics_destroy (&metrics);
    metrics_destroy (&metrics);
    assert_null (metrics);
}

//  A whole exposition of busy figures (caller frees).
static char *
s_render_busy (void)
{
    metrics_t *metrics = metrics_new ();
    for (int64_t index = 0; index < 1000; index++) {
        metrics_result (metrics, index);
        metrics_commit (metrics, index * 17);
        metrics_job_finished (metrics, (sched_job_status_t) (2 + index % 4),
                              index * 100);
        metrics_agent_message (metrics, (proto_type_t) (1 + index % 13));
    }
    metrics_figures_t figures;
    memset (&figures, 0, sizeof figures);
    figures.version = "0.1.0";
    figures.start_time_s = 1795590000.123;
    figures.have_process = true;
    figures.cpu_s = 12.5;
    figures.resident_bytes = 50 << 20;
    figures.virtual_bytes = 500 << 20;
    figures.open_fds = 40;
    figures.max_fds = 20000;
    figures.state = "draining";
    figures.jobs_pending = 3;
    figures.jobs_running = 2;
    figures.oldest_pending_s = 4.5;
    figures.cells_pending = 10;
    figures.cells_running = 7;
    figures.wait_p50_ms = 12;
    figures.wait_p99_ms = 900;
    figures.sched.submitted = 1005;
    figures.sched.cells_final [SCHED_CELL_SUCCESS] = 4000;
    figures.sched.cells_final [SCHED_CELL_LOST] = 3;
    figures.limits [0].pattern = "apt.*";
    figures.limits [0].max = 20;
    figures.limits [0].running = 4;
    figures.limits [1].pattern = "test.sleep";
    figures.limits [1].max = 2;
    figures.limits [1].per_node = true;
    figures.limit_count = 2;
    figures.nodes_online = 49990;
    figures.nodes_offline = 10;
    figures.auth.forbidden = 2;
    figures.store.used_bytes = 3 << 20;
    figures.store.max_bytes = (size_t) 8 << 30;
    figures.store_state = "full";
    figures.schedules = 4;
    figures.schedules_paused = 1;
    figures.have_http = true;
    figures.http.requests = 1200;
    figures.http.client_errors = 7;
    figures.http.streams = 1000;
    figures.key_rotating = true;
    figures.key_nodes = 50000;
    figures.key_acknowledged = 49000;
    figures.key_unable = 3;
    figures.key_deadline_ms = 3600500;
    figures.key_retired = 2;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    assert_int_equal (metrics_render (metrics, &figures, out), 0);
    fclose (out);
    metrics_destroy (&metrics);
    return text;
}

//  The family a sample line belongs to: its name, less a histogram
//  suffix when BASE names a histogram.
static bool
s_belongs (const char *series, const char *family, bool histogram)
{
    size_t length = strlen (family);
    if (strncmp (series, family, length) != 0)
        return false;
    const char *rest = series + length;
    if (*rest == ' ' || *rest == '{')
        return !histogram;
    return histogram
           && (strncmp (rest, "_bucket{", 8) == 0
               || strncmp (rest, "_sum ", 5) == 0
               || strncmp (rest, "_count ", 7) == 0);
}

static void
test_metrics_render_is_well_formed (void **state)
{
    char *text = s_render_busy ();
    zhashx_t *families = zhashx_new ();
    zhashx_t *series = zhashx_new ();
    char family [128] = "";
    bool histogram = false;
    char *copy = strdup (text);
    size_t samples = 0;
    for (char *line = strtok (copy, "\n"); line; line = strtok (NULL, "\n")) {
        char name [128], type [32];
        if (strncmp (line, "# HELP ", 7) == 0) {
            assert_int_equal (sscanf (line + 7, "%127s", name), 1);
            //  Declared once
            assert_null (zhashx_lookup (families, name));
            zhashx_insert (families, name, (void *) "");
            snprintf (family, sizeof family, "%s", name);
            continue;
        }
        if (strncmp (line, "# TYPE ", 7) == 0) {
            assert_int_equal (sscanf (line + 7, "%127s %31s", name, type), 2);
            assert_string_equal (name, family);
            histogram = streq (type, "histogram");
            //  Counters end in _total; nothing else does
            size_t length = strlen (name);
            bool total = length > 6 && streq (name + length - 6, "_total");
            assert_true (total == streq (type, "counter"));
            continue;
        }
        //  A sample of the family declared last, each series once
        if (!s_belongs (line, family, histogram))
            fail_msg ("'%s' is not of family %s", line, family);
        char *space = strrchr (line, ' ');
        assert_non_null (space);
        *space = 0;
        assert_null (zhashx_lookup (series, line));
        zhashx_insert (series, line, (void *) "");
        samples++;
    }
    assert_true (samples > 100);
    //  Labels that name figures, never nodes
    assert_non_null (strstr (text, "grid_limit_max{pattern=\"test.sleep\","
                                   "scope=\"node\"} 2\n"));
    assert_non_null (strstr (text, "grid_store_state{state=\"full\"} 1\n"));
    assert_non_null (strstr (text, "grid_store_state{state=\"ok\"} 0\n"));
    assert_non_null (strstr (text, "grid_broker_maintenance 1\n"));
    assert_non_null (strstr (text, "grid_nodes{state=\"online\"} 49990\n"));
    assert_non_null (strstr (text, "grid_broker_key_rotation_active 1\n"));
    assert_non_null (strstr (text,
                             "grid_broker_key_nodes_acknowledged 49000\n"));
    assert_non_null (strstr (text,
                             "grid_broker_key_deadline_seconds 3600.5\n"));
    assert_non_null (strstr (text, "process_start_time_seconds "
                                   "1795590000.12"));
    free (copy);
    zhashx_destroy (&families);
    zhashx_destroy (&series);
    free (text);
}

static void
test_metrics_render_passes_promtool (void **state)
{
    if (access (S_PROMTOOL, X_OK) != 0)
        fail_msg ("%s is missing: make test-deps installs Debian's "
                  "prometheus package", S_PROMTOOL);
    char *text = s_render_busy ();
    char path [] = "/tmp/test_metrics-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    char command [256];
    snprintf (command, sizeof command, "%s check metrics <%s 2>&1",
              S_PROMTOOL, path);
    FILE *pipe = popen (command, "r");
    assert_non_null (pipe);
    char report [4096] = "";
    size_t got = fread (report, 1, sizeof report - 1, pipe);
    report [got] = 0;
    int status = pclose (pipe);
    unlink (path);
    if (got)
        fprintf (stderr, "promtool:\n%s\n", report);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
    assert_int_equal (got, 0);
    //  And promtool does catch what it must: a counter without _total
    const char *bad = "# HELP grid_bad A counter named badly.\n"
                      "# TYPE grid_bad counter\n"
                      "grid_bad 1\n";
    snprintf (path, sizeof path, "/tmp/test_metrics-XXXXXX");
    fd = mkstemp (path);
    assert_true (fd >= 0);
    assert_int_equal (write (fd, bad, strlen (bad)), (ssize_t) strlen (bad));
    close (fd);
    snprintf (command, sizeof command, "%s check metrics <%s >/dev/null 2>&1",
              S_PROMTOOL, path);
    status = system (command);
    unlink (path);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) != 0);
    free (text);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_metrics_hist_buckets_and_sum),
        cmocka_unit_test (test_metrics_hist_text),
        cmocka_unit_test (test_metrics_escapes_and_values),
        cmocka_unit_test (test_metrics_counts_requests_and_messages),
        cmocka_unit_test (test_metrics_render_is_well_formed),
        cmocka_unit_test (test_metrics_render_passes_promtool),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
