/*  =========================================================================
    metrics - the broker's figures as Prometheus text (see metrics.h and
    docs/METRICS.md)
    =========================================================================
*/
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <sys/resource.h>
#include <unistd.h>

#include "metrics.h"

//  Bucket bounds, microseconds. Jobs run from a fraction of a second to
//  hours; a result comes milliseconds to minutes after its dispatch; a
//  commit (one fsync) takes tens of microseconds to a second.
static const int64_t s_job_bounds [] = {
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 30000000,
    60000000, 120000000, 300000000, 600000000, 1800000000, 3600000000,
    10800000000
};
static const int64_t s_result_bounds [] = {
    1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000,
    2500000, 5000000, 10000000, 30000000, 60000000, 300000000, 1800000000
};
static const int64_t s_commit_bounds [] = {
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000,
    250000, 500000, 1000000, 2500000
};

#define S_COUNT_OF(array) (sizeof (array) / sizeof ((array) [0]))
#define S_AGENT_TYPES (PROTO_FACTS + 1)
#define S_JOB_STATUSES (SCHED_JOB_CANCELLED + 1)
#define S_CELL_STATUSES (SCHED_CELL_RETRY_WAIT + 1)

struct _metrics_t {
    metrics_hist_t job_duration;     //  Submit to end
    metrics_hist_t result_latency;   //  Dispatch of an attempt to its result
    metrics_hist_t commit_latency;   //  Commits that wrote
    uint64_t finished [S_JOB_STATUSES];  //  Jobs finished, by status
    uint64_t results;                //  Results applied to their cell
    uint64_t agent_messages [S_AGENT_TYPES];  //  Decoded, by type
    uint64_t ack_messages [2];       //  result_ack, result_acks sent
    uint64_t acked_results;          //  Results they acknowledged
    uint64_t batched_results;        //  Entries of results messages
    zhashx_t *requests;              //  Request type -> uint64_t count
};

//  ---------------------------------------------------------------------
//  Histograms

void
metrics_hist_init (metrics_hist_t *hist, const int64_t *bounds_us,
                   size_t count)
{
    memset (hist, 0, sizeof *hist);
    hist->bounds_us = bounds_us;
    hist->bound_count = count < METRICS_HIST_MAX_BOUNDS
                            ? count : METRICS_HIST_MAX_BOUNDS;
}

void
metrics_hist_observe (metrics_hist_t *hist, int64_t value_us)
{
    if (value_us < 0)
        value_us = 0;
    size_t bucket = 0;
    while (bucket < hist->bound_count && value_us > hist->bounds_us [bucket])
        bucket++;
    hist->counts [bucket]++;
    hist->count++;
    hist->sum_us += (uint64_t) value_us;
}

//  ---------------------------------------------------------------------
//  The broker's counters

metrics_t *
metrics_new (void)
{
    metrics_t *self = (metrics_t *) calloc (1, sizeof (metrics_t));
    if (!self)
        return NULL;
    metrics_hist_init (&self->job_duration, s_job_bounds,
                       S_COUNT_OF (s_job_bounds));
    metrics_hist_init (&self->result_latency, s_result_bounds,
                       S_COUNT_OF (s_result_bounds));
    metrics_hist_init (&self->commit_latency, s_commit_bounds,
                       S_COUNT_OF (s_commit_bounds));
    self->requests = zhashx_new ();
    if (!self->requests) {
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->requests, (zhashx_destructor_fn *) zstr_free);
    //  Every request type is a series from the start, at 0
    const char *type;
    for (size_t index = 0; (type = proto_request_type_at (index)); index++)
        zhashx_insert (self->requests, type, zmalloc (sizeof (uint64_t)));
    return self;
}

void
metrics_destroy (metrics_t **self_p)
{
    if (self_p && *self_p) {
        zhashx_destroy (&(*self_p)->requests);
        free (*self_p);
        *self_p = NULL;
    }
}

void
metrics_agent_message (metrics_t *self, proto_type_t type)
{
    if ((int) type >= 0 && (int) type < S_AGENT_TYPES)
        self->agent_messages [type]++;
}

void
metrics_results_batch (metrics_t *self, size_t count)
{
    self->batched_results += count;
}

void
metrics_result_ack (metrics_t *self, bool batched, size_t count)
{
    self->ack_messages [batched]++;
    self->acked_results += count;
}

void
metrics_request (metrics_t *self, const char *type)
{
    //  Only the closed set of request types is counted (the table is
    //  made whole by metrics_new), so the series stay few
    uint64_t *count = (uint64_t *) zhashx_lookup (self->requests, type);
    if (count)
        (*count)++;
}

void
metrics_result (metrics_t *self, int64_t latency_ms)
{
    self->results++;
    if (latency_ms >= 0)
        metrics_hist_observe (&self->result_latency, latency_ms * 1000);
}

void
metrics_job_finished (metrics_t *self, sched_job_status_t status,
                      int64_t duration_ms)
{
    if ((int) status >= 0 && (int) status < S_JOB_STATUSES)
        self->finished [status]++;
    metrics_hist_observe (&self->job_duration, duration_ms * 1000);
}

void
metrics_commit (metrics_t *self, int64_t duration_us)
{
    metrics_hist_observe (&self->commit_latency, duration_us);
}

const metrics_hist_t *
metrics_job_duration (const metrics_t *self)
{
    return &self->job_duration;
}

const metrics_hist_t *
metrics_result_latency (const metrics_t *self)
{
    return &self->result_latency;
}

const metrics_hist_t *
metrics_commit_latency (const metrics_t *self)
{
    return &self->commit_latency;
}

//  ---------------------------------------------------------------------
//  The writer

//  Writes TEXT with backslash and newline escaped, and double quotes too
//  when QUOTES (label values).
static void
s_write_escaped (FILE *out, const char *text, bool quotes)
{
    for (const char *at = text; *at; at++) {
        if (*at == '\\')
            fputs ("\\\\", out);
        else
        if (*at == '\n')
            fputs ("\\n", out);
        else
        if (*at == '"' && quotes)
            fputs ("\\\"", out);
        else
            fputc (*at, out);
    }
}

void
metrics_write_family (FILE *out, const char *name, const char *type,
                      const char *help)
{
    fprintf (out, "# HELP %s ", name);
    s_write_escaped (out, help, false);
    fprintf (out, "\n# TYPE %s %s\n", name, type);
}

static void
s_write_name (FILE *out, const char *name, const char *const *labels)
{
    fputs (name, out);
    if (!labels || !labels [0])
        return;
    fputc ('{', out);
    for (size_t index = 0; labels [index] && labels [index + 1]; index += 2) {
        fprintf (out, "%s%s=\"", index ? "," : "", labels [index]);
        s_write_escaped (out, labels [index + 1], true);
        fputc ('"', out);
    }
    fputc ('}', out);
}

void
metrics_write_uint (FILE *out, const char *name, const char *const *labels,
                    uint64_t value)
{
    s_write_name (out, name, labels);
    fprintf (out, " %" PRIu64 "\n", value);
}

void
metrics_write_double (FILE *out, const char *name, const char *const *labels,
                      double value)
{
    s_write_name (out, name, labels);
    if (isnan (value))
        fputs (" NaN\n", out);
    else
    if (isinf (value))
        fputs (value > 0 ? " +Inf\n" : " -Inf\n", out);
    else
        fprintf (out, " %.15g\n", value);
}

//  Microseconds as decimal seconds, exactly: 250 -> "0.00025",
//  3600000000 -> "3600".
static void
s_format_us (char *text, size_t size, uint64_t value_us)
{
    int length = snprintf (text, size, "%" PRIu64 ".%06" PRIu64,
                           value_us / 1000000, value_us % 1000000);
    while (length > 0 && text [length - 1] == '0')
        text [--length] = 0;
    if (length > 0 && text [length - 1] == '.')
        text [--length] = 0;
}

void
metrics_write_hist (FILE *out, const char *name, const char *help,
                    const metrics_hist_t *hist)
{
    metrics_write_family (out, name, "histogram", help);
    char series [128], bound [32];
    snprintf (series, sizeof series, "%s_bucket", name);
    uint64_t cumulative = 0;
    for (size_t index = 0; index < hist->bound_count; index++) {
        cumulative += hist->counts [index];
        s_format_us (bound, sizeof bound, (uint64_t) hist->bounds_us [index]);
        const char *labels [] = {"le", bound, NULL};
        metrics_write_uint (out, series, labels, cumulative);
    }
    const char *labels [] = {"le", "+Inf", NULL};
    metrics_write_uint (out, series, labels, hist->count);
    s_format_us (bound, sizeof bound, hist->sum_us);
    fprintf (out, "%s_sum %s\n", name, bound);
    fprintf (out, "%s_count %" PRIu64 "\n", name, hist->count);
}

//  ---------------------------------------------------------------------
//  The exposition

//  A family of one unlabelled sample.
static void
s_counter (FILE *out, const char *name, const char *help, uint64_t value)
{
    metrics_write_family (out, name, "counter", help);
    metrics_write_uint (out, name, NULL, value);
}

static void
s_gauge (FILE *out, const char *name, const char *help, uint64_t value)
{
    metrics_write_family (out, name, "gauge", help);
    metrics_write_uint (out, name, NULL, value);
}

static void
s_gauge_seconds (FILE *out, const char *name, const char *help,
                 int64_t value_ms)
{
    metrics_write_family (out, name, "gauge", help);
    metrics_write_double (out, name, NULL,
                          (double) (value_ms < 0 ? 0 : value_ms) / 1000.0);
}

//  One sample of family NAME with label LABEL=VALUE.
static void
s_labelled (FILE *out, const char *name, const char *label,
            const char *value, uint64_t count)
{
    const char *labels [] = {label, value, NULL};
    metrics_write_uint (out, name, labels, count);
}

static int
s_compare_names (const void *a, const void *b)
{
    return strcmp (*(const char *const *) a, *(const char *const *) b);
}

static void
s_write_requests (const metrics_t *self, FILE *out)
{
    metrics_write_family (out, "grid_client_requests_total", "counter",
                          "Client requests decoded, by request type (every "
                          "face: ZeroMQ and HTTP).");
    size_t count = zhashx_size (self->requests);
    const char **types = (const char **) calloc (count + 1, sizeof (char *));
    if (!types)
        return;
    size_t at = 0;
    for (void *item = zhashx_first (self->requests); item && at < count;
         item = zhashx_next (self->requests))
        types [at++] = (const char *) zhashx_cursor (self->requests);
    qsort (types, at, sizeof (char *), s_compare_names);
    for (size_t index = 0; index < at; index++)
        s_labelled (out, "grid_client_requests_total", "type", types [index],
                    *(uint64_t *) zhashx_lookup (self->requests,
                                                 types [index]));
    free (types);
}

static void
s_write_process (const metrics_figures_t *figures, FILE *out)
{
    metrics_write_family (out, "process_start_time_seconds", "gauge",
                          "Start time of the broker since the Unix epoch, "
                          "in seconds.");
    metrics_write_double (out, "process_start_time_seconds", NULL,
                          figures->start_time_s);
    if (!figures->have_process)
        return;
    metrics_write_family (out, "process_cpu_seconds_total", "counter",
                          "User and system CPU time the broker spent, in "
                          "seconds.");
    metrics_write_double (out, "process_cpu_seconds_total", NULL,
                          figures->cpu_s);
    s_gauge (out, "process_resident_memory_bytes",
             "Resident memory of the broker, in bytes.",
             figures->resident_bytes);
    s_gauge (out, "process_virtual_memory_bytes",
             "Virtual memory of the broker, in bytes.",
             figures->virtual_bytes);
    s_gauge (out, "process_open_fds",
             "Open file descriptors of the broker.", figures->open_fds);
    s_gauge (out, "process_max_fds",
             "The broker's limit of open file descriptors (RLIMIT_NOFILE).",
             figures->max_fds);
}

static void
s_write_jobs (const metrics_t *self, const metrics_figures_t *figures,
              FILE *out)
{
    s_counter (out, "grid_jobs_submitted_total",
               "Jobs admitted (queued or started) since the broker started.",
               figures->sched.submitted);
    metrics_write_family (out, "grid_jobs_refused_total", "counter",
                          "Submits the scheduler refused, by reason: "
                          "queue_full (max_pending jobs were queued).");
    s_labelled (out, "grid_jobs_refused_total", "reason", "queue_full",
                figures->sched.queue_full);
    metrics_write_family (out, "grid_jobs_finished_total", "counter",
                          "Jobs that reached a final status since the broker "
                          "started, by status.");
    for (int status = SCHED_JOB_COMPLETED; status <= SCHED_JOB_CANCELLED;
         status++)
        s_labelled (out, "grid_jobs_finished_total", "status",
                    sched_job_status_name ((sched_job_status_t) status),
                    self->finished [status]);
    s_gauge (out, "grid_jobs_pending", "Jobs queued, waiting to start.",
             figures->jobs_pending);
    s_gauge (out, "grid_jobs_running", "Jobs running.",
             figures->jobs_running);
    metrics_write_family (out, "grid_jobs_oldest_pending_age_seconds",
                          "gauge",
                          "Age of the oldest queued job in seconds (0 when "
                          "none is queued).");
    metrics_write_double (out, "grid_jobs_oldest_pending_age_seconds", NULL,
                          figures->oldest_pending_s);
    metrics_write_hist (out, "grid_job_duration_seconds",
                        "Time from a job's submit to its final status, in "
                        "seconds.", &self->job_duration);
}

static void
s_write_cells (const metrics_t *self, const metrics_figures_t *figures,
               FILE *out)
{
    metrics_write_family (out, "grid_cells_finished_total", "counter",
                          "Cells (one step on one node) that reached a final "
                          "status since the broker started, by status.");
    for (int status = 0; status < S_CELL_STATUSES; status++)
        if (sched_cell_status_final ((sched_cell_status_t) status))
            s_labelled (out, "grid_cells_finished_total", "status",
                        sched_cell_status_name ((sched_cell_status_t) status),
                        figures->sched.cells_final [status]);
    metrics_write_family (out, "grid_cells", "gauge",
                          "Cells of the pending and running jobs that are "
                          "not final, by state: pending (not sent yet, or "
                          "in a retry backoff) or running (dispatched, "
                          "acknowledged or running).");
    s_labelled (out, "grid_cells", "state", "pending", figures->cells_pending);
    s_labelled (out, "grid_cells", "state", "running", figures->cells_running);
    s_gauge (out, "grid_cells_waiting",
             "Cells waiting for a free slot (any-node steps with no free "
             "node, cells over a concurrency limit).", figures->cells_waiting);
    s_counter (out, "grid_results_ingested_total",
               "Results applied to their cell (duplicates and stale results "
               "are not counted).", self->results);
    metrics_write_hist (out, "grid_result_latency_seconds",
                        "Time from the dispatch of a cell's attempt to its "
                        "result, in seconds.", &self->result_latency);
    s_gauge_seconds (out, "grid_step_wait_p50_seconds",
                     "Median time from a job's submit to its first step "
                     "starting on a node, over the last 5 minutes.",
                     figures->wait_p50_ms);
    s_gauge_seconds (out, "grid_step_wait_p99_seconds",
                     "99th percentile of the time from a job's submit to its "
                     "first step starting on a node, over the last 5 "
                     "minutes.", figures->wait_p99_ms);
    s_gauge_seconds (out, "grid_attempt_run_p50_seconds",
                     "Median attempt duration as the agents measured it, "
                     "over the last 5 minutes.", figures->run_p50_ms);
    s_gauge_seconds (out, "grid_attempt_run_p99_seconds",
                     "99th percentile of the attempt durations the agents "
                     "measured, over the last 5 minutes.",
                     figures->run_p99_ms);
}

static void
s_write_queue (const metrics_figures_t *figures, FILE *out)
{
    s_counter (out, "grid_any_node_claims_total",
               "Any-node steps given to a node.", figures->sched.claims);
    s_counter (out, "grid_any_node_reclaims_total",
               "Any-node steps taken back from a node.",
               figures->sched.reclaims);
    s_counter (out, "grid_any_node_lease_expirations_total",
               "Any-node leases that ran out unrenewed.",
               figures->sched.lease_expirations);
    s_counter (out, "grid_any_node_late_results_total",
               "Results from a node an any-node step had been taken from.",
               figures->sched.late_results);
    s_gauge (out, "grid_dead_letter_entries",
             "Entries in the dead-letter queue.", figures->dead_letter);
    s_counter (out, "grid_notify_sent_total",
               "Webhook deliveries that got a 2xx answer.",
               figures->notify.sent);
    s_counter (out, "grid_notify_failed_total",
               "Webhook delivery attempts that failed.",
               figures->notify.failed);
    s_counter (out, "grid_notify_dead_total",
               "Webhook deliveries given up after notify.retry_for.",
               figures->notify.dead);
    s_gauge (out, "grid_notify_pending",
             "Webhook deliveries waiting to be sent or retried.",
             figures->notify.pending);
    if (figures->limit_count == 0)
        return;
    metrics_write_family (out, "grid_limit_running", "gauge",
                          "Cells in flight that a concurrency limit covers, "
                          "fleet-wide, by limit pattern and scope.");
    for (size_t index = 0; index < figures->limit_count; index++) {
        const sched_limit_use_t *use = &figures->limits [index];
        const char *labels [] = {"pattern", use->pattern, "scope",
                                 use->per_node ? "node" : "fleet", NULL};
        metrics_write_uint (out, "grid_limit_running", labels, use->running);
    }
    metrics_write_family (out, "grid_limit_max", "gauge",
                          "The cells a concurrency limit allows in flight "
                          "(per node for scope node), by limit pattern and "
                          "scope.");
    for (size_t index = 0; index < figures->limit_count; index++) {
        const sched_limit_use_t *use = &figures->limits [index];
        const char *labels [] = {"pattern", use->pattern, "scope",
                                 use->per_node ? "node" : "fleet", NULL};
        metrics_write_uint (out, "grid_limit_max", labels, use->max);
    }
}

static void
s_write_nodes (const metrics_figures_t *figures, FILE *out)
{
    metrics_write_family (out, "grid_nodes", "gauge",
                          "Registered nodes by state.");
    s_labelled (out, "grid_nodes", "state", "online", figures->nodes_online);
    s_labelled (out, "grid_nodes", "state", "offline", figures->nodes_offline);
    s_gauge (out, "grid_nodes_drained",
             "Registered nodes that are drained (take no new work).",
             figures->nodes_drained);
}

static void
s_write_messages (const metrics_t *self, const metrics_figures_t *figures,
                  FILE *out)
{
    metrics_write_family (out, "grid_agent_messages_total", "counter",
                          "Agent messages decoded, by type (malformed ones "
                          "are counted in grid_malformed_messages_total).");
    const proto_type_t types [] = {PROTO_HELLO, PROTO_HEARTBEAT, PROTO_ACK,
                                   PROTO_STARTED, PROTO_PROGRESS, PROTO_RESULT,
                                   PROTO_RESULTS, PROTO_OUTPUT, PROTO_BYE,
                                   PROTO_FACTS};
    for (size_t index = 0; index < S_COUNT_OF (types); index++)
        s_labelled (out, "grid_agent_messages_total", "type",
                    proto_type_name (types [index]),
                    self->agent_messages [types [index]]);
    metrics_write_family (out, "grid_result_ack_messages_total", "counter",
                          "Acknowledgements sent to agents after a commit: "
                          "one result_ack per result, or one result_acks "
                          "per agent and commit to agents that asked.");
    s_labelled (out, "grid_result_ack_messages_total", "type", "result_ack",
                self->ack_messages [0]);
    s_labelled (out, "grid_result_ack_messages_total", "type", "result_acks",
                self->ack_messages [1]);
    s_counter (out, "grid_batched_results_total",
               "Result entries that came in results messages (divide by "
               "grid_agent_messages_total{type=\"results\"} for the "
               "results per message).", self->batched_results);
    s_counter (out, "grid_acknowledged_results_total",
               "Results those acknowledgements covered.",
               self->acked_results);
    s_write_requests (self, out);
    s_counter (out, "grid_malformed_messages_total",
               "Messages refused as malformed (undecodable, invalid, or of a "
               "wrong shape), from agents and clients.", figures->malformed);
    metrics_write_family (out, "grid_dropped_messages_total", "counter",
                          "Messages dropped for another reason: from a "
                          "session the broker does not know (unknown_node), "
                          "matching no live cell (stale), output refused "
                          "(output_refused), entries of results that broke "
                          "a rule of result (bad_entry), or sends to "
                          "vanished agents (send_failed).");
    s_labelled (out, "grid_dropped_messages_total", "reason", "unknown_node",
                figures->unknown_node);
    s_labelled (out, "grid_dropped_messages_total", "reason", "stale",
                figures->stale);
    s_labelled (out, "grid_dropped_messages_total", "reason",
                "output_refused", figures->output_refused);
    s_labelled (out, "grid_dropped_messages_total", "reason", "bad_entry",
                figures->bad_entries);
    s_labelled (out, "grid_dropped_messages_total", "reason", "send_failed",
                figures->send_failed);
    s_counter (out, "grid_output_acks_paced_total",
               "Acks of live output pieces held for results.output_rate "
               "(the agent's next piece waits for its ack and carries more).",
               figures->output_paced);
    s_counter (out, "grid_blob_chunks_sent_total",
               "Blob chunks (file contents) sent to agents.",
               figures->blob_chunks_sent);
    s_counter (out, "grid_blob_bytes_sent_total",
               "Bytes of those chunks.", figures->blob_bytes_sent);
    s_counter (out, "grid_blob_requests_refused_total",
               "blob_get requests refused (an unknown blob, an offset past "
               "the end or off a chunk, a node not granted blobs).",
               figures->blob_refused);
    s_counter (out, "grid_blob_uploads_refused_total",
               "blob.put pieces refused (a bad name or no base64, over "
               "blobs.max_size, another offset or size, the wrong length, "
               "a content whose sha256 is not its name).",
               figures->blob_uploads_refused);
    s_gauge (out, "grid_watchers",
             "job.watch, job.changes and node.changes requests parked until "
             "what they watch changes.",
             figures->watchers);
}

static void
s_write_security (const metrics_figures_t *figures, FILE *out)
{
    s_counter (out, "grid_handshakes_refused_total",
               "CurveZMQ handshakes refused (unknown client key, rejected "
               "agent key).", figures->auth.refused_handshakes);
    metrics_write_family (out, "grid_auth_failures_total", "counter",
                          "Requests and messages refused by authentication "
                          "or authorisation, by face (zmq, http) and reason: "
                          "unauthorized (key or token unknown or revoked; "
                          "HTTP 401), forbidden (beyond the role or the "
                          "allowlist; HTTP 403), impersonation (a key "
                          "speaking for another key's node).");
    const auth_counters_t *auth = &figures->auth;
    //  auth counts forbidden requests of every face; HTTP's are its share
    uint64_t zmq_forbidden = auth->forbidden > auth->http_forbidden
                                 ? auth->forbidden - auth->http_forbidden : 0;
    const char *labels [] = {"face", "zmq", "reason", NULL, NULL};
    labels [3] = "unauthorized";
    metrics_write_uint (out, "grid_auth_failures_total", labels,
                        auth->unauthorized);
    labels [3] = "forbidden";
    metrics_write_uint (out, "grid_auth_failures_total", labels,
                        zmq_forbidden);
    labels [3] = "impersonation";
    metrics_write_uint (out, "grid_auth_failures_total", labels,
                        auth->impersonation);
    labels [1] = "http";
    labels [3] = "unauthorized";
    metrics_write_uint (out, "grid_auth_failures_total", labels,
                        auth->http_unauthorized);
    labels [3] = "forbidden";
    metrics_write_uint (out, "grid_auth_failures_total", labels,
                        auth->http_forbidden);
    s_counter (out, "grid_subscriptions_refused_total",
               "Command topic subscriptions refused to an accepted agent key.",
               figures->auth.refused_topics);
}

//  The rotation of the broker's own key: the node figures read 0 while
//  none runs.
static void
s_write_broker_key (const metrics_figures_t *figures, FILE *out)
{
    bool rotating = figures->key_rotating;
    s_gauge (out, "grid_broker_key_rotation_active",
             "1 while the broker's key rotates (gridcli key rotate-broker), "
             "else 0.", rotating);
    s_gauge (out, "grid_broker_key_nodes",
             "Nodes known while the broker's key rotates (0 when it does "
             "not).", rotating ? figures->key_nodes : 0);
    s_gauge (out, "grid_broker_key_nodes_acknowledged",
             "Of those, the nodes that hold the broker's next key.",
             rotating ? figures->key_acknowledged : 0);
    s_gauge (out, "grid_broker_key_nodes_unable",
             "Of those, the nodes connected directly whose release cannot "
             "take a new broker key (they need gridcli key fetch-broker).",
             rotating ? figures->key_unable : 0);
    s_gauge_seconds (out, "grid_broker_key_deadline_seconds",
                     "Seconds until the old key is retired at the latest "
                     "(0 when no rotation runs).",
                     rotating ? figures->key_deadline_ms : 0);
    s_counter (out, "grid_broker_key_rotations_retired_total",
               "Rotations of the broker's key retired (the old key "
               "refused from then on).", figures->key_retired);
}

//  The HTTP face's figures (only when it is on).
static void
s_write_http (const metrics_figures_t *figures, FILE *out)
{
    if (!figures->have_http)
        return;
    const http_stats_t *http = &figures->http;
    s_counter (out, "grid_http_requests_total",
               "Requests the HTTP face answered (an event stream once).",
               http->requests);
    metrics_write_family (out, "grid_http_errors_total", "counter",
                          "HTTP answers with an error status, by class: 4xx "
                          "(the request's fault) or 5xx (the broker's).");
    s_labelled (out, "grid_http_errors_total", "class", "4xx",
                http->client_errors);
    s_labelled (out, "grid_http_errors_total", "class", "5xx",
                http->server_errors);
    s_counter (out, "grid_http_bodies_refused_total",
               "HTTP request bodies refused for http.max_body (413).",
               http->too_large);
    s_counter (out, "grid_http_late_replies_total",
               "Replies the reactor owed the HTTP face past their time.",
               http->late);
    s_gauge (out, "grid_http_connections", "HTTP connections open.",
             http->connections);
    s_gauge (out, "grid_http_streams",
             "Job event streams (GET /api/v1/jobs/{id}/stream) open.",
             http->streams);
}

static void
s_write_store (const metrics_t *self, const metrics_figures_t *figures,
               FILE *out)
{
    s_gauge (out, "grid_store_used_bytes",
             "Bytes of the store in use (its highest page written).",
             figures->store.used_bytes);
    s_gauge (out, "grid_store_map_bytes",
             "The store's current map size in bytes (it doubles when needed).",
             figures->store.map_bytes);
    s_gauge (out, "grid_store_max_bytes",
             "The size the store may grow to (store.max_size), in bytes.",
             figures->store.max_bytes);
    s_gauge (out, "grid_store_disk_bytes",
             "Size of the filesystem holding the store, in bytes.",
             figures->store.disk_bytes);
    s_gauge (out, "grid_store_disk_free_bytes",
             "Free space on the filesystem holding the store, in bytes.",
             figures->store.disk_free_bytes);
    metrics_write_family (out, "grid_store_state", "gauge",
                          "The store's state: 1 for the current one of ok, "
                          "nearly_full, full and error, 0 for the others.");
    const char *states [] = {"ok", "nearly_full", "full", "error"};
    for (size_t index = 0; index < S_COUNT_OF (states); index++)
        s_labelled (out, "grid_store_state", "state", states [index],
                    streq (states [index], figures->store_state));
    s_counter (out, "grid_store_commit_failures_total",
               "Store commits that failed (nothing of their pass was "
               "applied).", figures->failed_commits);
    s_counter (out, "grid_store_refused_requests_total",
               "Requests answered storage_full or storage_error.",
               figures->storage_refused);
    s_counter (out, "grid_store_failure_episodes_total",
               "Runs of failing commits (each ends when writes succeed "
               "again).", figures->storage_episodes);
    metrics_write_hist (out, "grid_store_commit_seconds",
                        "Duration of the store commits that wrote, in "
                        "seconds.", &self->commit_latency);
}

int
metrics_render (const metrics_t *self, const metrics_figures_t *figures,
                FILE *out)
{
    metrics_write_family (out, "grid_build_info", "gauge",
                          "Always 1; the version label names the broker's "
                          "build.");
    const char *version [] = {"version", figures->version, NULL};
    metrics_write_uint (out, "grid_build_info", version, 1);
    s_write_process (figures, out);
    metrics_write_family (out, "grid_broker_state", "gauge",
                          "The broker's state: 1 for the current one of "
                          "serving, draining and maintenance, 0 for the "
                          "others.");
    const char *states [] = {"serving", "draining", "maintenance"};
    for (size_t index = 0; index < S_COUNT_OF (states); index++)
        s_labelled (out, "grid_broker_state", "state", states [index],
                    streq (states [index], figures->state));
    s_gauge (out, "grid_broker_maintenance",
             "1 while the broker admits no new jobs (broker drain), else 0.",
             !streq (figures->state, "serving"));
    s_write_jobs (self, figures, out);
    s_write_cells (self, figures, out);
    s_write_queue (figures, out);
    s_write_nodes (figures, out);
    s_write_messages (self, figures, out);
    s_write_security (figures, out);
    s_write_broker_key (figures, out);
    s_write_http (figures, out);
    s_write_store (self, figures, out);
    s_counter (out, "grid_trace_spans_exported_total",
               "Spans the OTLP collector took (tracing.otlp_endpoint).",
               figures->trace_exported);
    s_counter (out, "grid_trace_spans_dropped_total",
               "Spans dropped: the export queue was full, or the collector "
               "did not take their batch.", figures->trace_dropped);
    s_gauge (out, "grid_schedules", "Schedules kept by the broker.",
             figures->schedules);
    s_gauge (out, "grid_schedules_paused", "Schedules that are paused.",
             figures->schedules_paused);
    if (figures->have_cluster) {
        s_gauge (out, "grid_ha_role", "1 on a broker cluster's active, 0 "
                 "on a standby.", 1);
        s_gauge (out, "grid_ha_epoch", "The epoch of this active's "
                 "leadership.", figures->ha_epoch);
        s_gauge (out, "grid_ha_standbys", "Standbys connected to this "
                 "active.", figures->ha_standbys);
        s_gauge (out, "grid_ha_sync_standbys", "Standbys in the sync set: "
                 "what the active acknowledges, they hold.",
                 figures->ha_sync_standbys);
        metrics_write_family (out, "grid_ha_replication_lag_seconds", "gauge",
                              "How long the oldest pass not yet acknowledged "
                              "by a standby has waited.");
        metrics_write_double (out, "grid_ha_replication_lag_seconds", NULL,
                              figures->ha_lag_s);
    }
    return ferror (out) ? -1 : 0;
}

//  ---------------------------------------------------------------------
//  The process's own figures

bool
metrics_read_process (metrics_figures_t *figures)
{
    FILE *file = fopen ("/proc/self/stat", "r");
    if (!file)
        return false;
    char line [1024];
    bool read = fgets (line, sizeof line, file) != NULL;
    fclose (file);
    //  The command name may hold spaces: fields count from its ')'
    char *end = read ? strrchr (line, ')') : NULL;
    unsigned long utime = 0, stime = 0, vsize = 0;
    long rss = 0;
    if (!end
        || sscanf (end + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu "
                            "%lu %*d %*d %*d %*d %*d %*d %*u %lu %ld",
                   &utime, &stime, &vsize, &rss) != 4)
        return false;
    long ticks = sysconf (_SC_CLK_TCK);
    long page = sysconf (_SC_PAGESIZE);
    figures->cpu_s = ticks > 0 ? (double) (utime + stime) / (double) ticks : 0;
    figures->virtual_bytes = vsize;
    figures->resident_bytes = rss > 0 && page > 0 ? (uint64_t) rss * page : 0;
    DIR *dir = opendir ("/proc/self/fd");
    if (dir) {
        struct dirent *entry;
        while ((entry = readdir (dir)))
            if (entry->d_name [0] != '.')
                figures->open_fds++;
        closedir (dir);
        //  The directory's own descriptor
        if (figures->open_fds)
            figures->open_fds--;
    }
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) == 0)
        figures->max_fds = limit.rlim_cur == RLIM_INFINITY
                               ? UINT64_MAX : (uint64_t) limit.rlim_cur;
    return true;
}
