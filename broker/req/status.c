/*  =========================================================================
    status - status, whoami, broker.drain, broker.resume, queue.stats
    and metrics.get (see req.h and proto/PROTOCOL.md)
    =========================================================================
*/
#include "../dlq.h"
#include "../metrics.h"
#include "../schedule.h"
#include "req.h"

//  ---------------------------------------------------------------------
//  status, whoami

//  The any-node figures: any-node steps waiting for a free node now (not
//  those over a concurrency limit), and since the broker started claims,
//  reclaims, lease expirations and late results.
static void
s_write_any_node (const ctx_t *ctx, pw_t *reply)
{
    sched_counters_t counters;
    sched_counters (ctx->sched, &counters);
    pw_map (reply, 5);
    pw_str (reply, "waiting");
    pw_int (reply, (int64_t) sched_waiting_any_count (ctx->sched));
    pw_str (reply, "claims");
    pw_int (reply, (int64_t) counters.claims);
    pw_str (reply, "reclaims");
    pw_int (reply, (int64_t) counters.reclaims);
    pw_str (reply, "lease_expirations");
    pw_int (reply, (int64_t) counters.lease_expirations);
    pw_str (reply, "late_results");
    pw_int (reply, (int64_t) counters.late_results);
}

//  status.store: the store's state, size and room (PROTOCOL.md).
static void
s_write_store (const ctx_t *ctx, pw_t *reply)
{
    const broker_storage_t *storage = &ctx->stats->storage;
    store_info_t info;
    store_info (ctx->store, &info);
    const char *state = ctx_store_state (ctx, &info);
    bool failing = storage->code != 0;
    pw_str (reply, "store");
    pw_map (reply, failing ? 12 : 10);
    pw_str (reply, "state");
    pw_str (reply, state);
    pw_str (reply, "used_bytes");
    pw_int (reply, (int64_t) info.used_bytes);
    pw_str (reply, "map_bytes");
    pw_int (reply, (int64_t) info.map_bytes);
    pw_str (reply, "max_bytes");
    pw_int (reply, (int64_t) info.max_bytes);
    pw_str (reply, "used_percent");
    pw_int (reply, info.max_bytes ? (int64_t) (info.used_bytes * 100.0
                                               / (double) info.max_bytes)
                                  : 0);
    pw_str (reply, "disk_bytes");
    pw_int (reply, (int64_t) info.disk_bytes);
    pw_str (reply, "disk_free_bytes");
    pw_int (reply, (int64_t) info.disk_free_bytes);
    pw_str (reply, "failed_commits");
    pw_int (reply, (int64_t) storage->failed_commits);
    pw_str (reply, "refused");
    pw_int (reply, (int64_t) storage->refused);
    pw_str (reply, "episodes");
    pw_int (reply, (int64_t) storage->episodes);
    if (failing) {
        pw_str (reply, "since_ms");
        pw_int (reply, storage->since_ms);
        pw_str (reply, "error");
        pw_str (reply, storage->error);
    }
}

//  {pending, running, completed, partial_failure, failed, cancelled}: jobs
//  queued and running now, and finished since the broker started.
static void
s_write_job_counts (const ctx_t *ctx, pw_t *reply)
{
    pw_map (reply, 6);
    pw_str (reply, "pending");
    pw_int (reply, (int64_t) sched_pending_count (ctx->sched));
    pw_str (reply, "running");
    pw_int (reply, (int64_t) sched_running_count (ctx->sched));
    for (int status = SCHED_JOB_COMPLETED; status <= SCHED_JOB_CANCELLED;
         status++) {
        pw_str (reply, sched_job_status_name ((sched_job_status_t) status));
        pw_int (reply, (int64_t) ctx->stats->finished [status]);
    }
}

void
req_status (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    pw_t *reply = call->reply;
    size_t total = registry_size (ctx->registry);
    size_t online = registry_online_count (ctx->registry);
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    const char *next = ctx->brokerkey ? brokerkey_next (ctx->brokerkey)
                                      : NULL;
    pw_map (reply, 8 + (ctx->http_face ? 1 : 0) + (next ? 1 : 0));
    if (next) {
        //  The rotation of the broker's key (broker.keys has the rest)
        req_broker_key_counts_t counts;
        req_broker_key_counts (ctx, &counts);
        char deadline [TIME_TEXT_LEN];
        time_format (brokerkey_deadline_ms (ctx->brokerkey), deadline,
                     sizeof deadline);
        pw_str (reply, "broker_key");
        pw_map (reply, 4);
        pw_str (reply, "next");
        pw_str (reply, next);
        pw_str (reply, "deadline");
        pw_str (reply, deadline);
        pw_str (reply, "nodes");
        pw_int (reply, (int64_t) counts.nodes);
        pw_str (reply, "acknowledged");
        pw_int (reply, (int64_t) counts.acknowledged);
    }
    pw_str (reply, "version");
    pw_str (reply, GRID_VERSION);
    pw_str (reply, "state");
    pw_str (reply, ctx_broker_state (ctx));
    pw_str (reply, "uptime_ms");
    pw_int (reply, ctx_now_ms (ctx) - ctx->stats->started_ms);
    pw_str (reply, "nodes");
    pw_map (reply, 5);
    pw_str (reply, "total");
    pw_int (reply, (int64_t) total);
    pw_str (reply, "online");
    pw_int (reply, (int64_t) online);
    pw_str (reply, "offline");
    pw_int (reply, (int64_t) (total - online));
    pw_str (reply, "repeated_hellos");
    pw_int (reply, (int64_t) ctx->stats->counters.repeated_hellos);
    pw_str (reply, "incompatible");
    pw_int (reply, (int64_t) registry_incompatible_count (ctx->registry));
    pw_str (reply, "jobs");
    s_write_job_counts (ctx, reply);
    pw_str (reply, "queue");
    s_write_any_node (ctx, reply);
    pw_str (reply, "dropped");
    pw_map (reply, 7 + AUTH_COUNTER_COUNT);
    pw_str (reply, "relay_refused");
    pw_int (reply, (int64_t) relays_refused (ctx->relays));
    pw_str (reply, "malformed");
    pw_int (reply, (int64_t) ctx->stats->counters.malformed);
    pw_str (reply, "unknown_node");
    pw_int (reply, (int64_t) ctx->stats->counters.unknown_node);
    pw_str (reply, "stale");
    pw_int (reply, (int64_t) ctx->stats->counters.stale);
    pw_str (reply, "send_failed");
    pw_int (reply, (int64_t) ctx->stats->counters.send_failed);
    pw_str (reply, "output_refused");
    pw_int (reply, (int64_t) ctx->stats->counters.output_refused);
    pw_str (reply, "bad_entries");
    pw_int (reply, (int64_t) ctx->stats->counters.bad_entries);
    auth_write_counters (ctx->auth, reply);
    s_write_store (ctx, reply);
    if (ctx->http_face) {
        http_stats_t http;
        http_stats (ctx->http_face, &http);
        pw_str (reply, "http");
        pw_map (reply, 8);
        pw_str (reply, "listen");
        pw_str (reply, ctx->config->http.listen);
        pw_str (reply, "requests");
        pw_int (reply, (int64_t) http.requests);
        pw_str (reply, "client_errors");
        pw_int (reply, (int64_t) http.client_errors);
        pw_str (reply, "server_errors");
        pw_int (reply, (int64_t) http.server_errors);
        pw_str (reply, "too_large");
        pw_int (reply, (int64_t) http.too_large);
        pw_str (reply, "late");
        pw_int (reply, (int64_t) http.late);
        pw_str (reply, "connections");
        pw_int (reply, (int64_t) http.connections);
        pw_str (reply, "streams");
        pw_int (reply, (int64_t) http.streams);
    }
}

//  whoami: the caller as the broker sees it: {name (nil for a client
//  without one), role, via (token over HTTP; insecure, or key)}.
void
req_whoami (req_call_t *call)
{
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 3);
    pw_str (reply, "name");
    if (strcmp (call->name, AUTH_UNNAMED) != 0)
        pw_str (reply, call->name);
    else
        pw_nil (reply);
    pw_str (reply, "role");
    pw_str (reply, auth_role_name (call->role));
    pw_str (reply, "via");
    pw_str (reply, call->caller->http ? "token"
                   : call->ctx->config->auth.insecure ? "insecure" : "key");
}

//  ---------------------------------------------------------------------
//  broker.drain, broker.resume

static void
s_broker_reply (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    pw_map (call->reply, 3);
    pw_str (call->reply, "state");
    pw_str (call->reply, ctx_broker_state (ctx));
    pw_str (call->reply, "running");
    pw_int (call->reply, (int64_t) sched_running_count (ctx->sched));
    pw_str (call->reply, "pending");
    pw_int (call->reply, (int64_t) sched_pending_count (ctx->sched));
}

void
req_broker_drain (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    if (!ctx->state.maintenance)
        ctx_set_maintenance (ctx, true);
    s_broker_reply (call);
}

void
req_broker_resume (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    if (ctx->state.maintenance)
        ctx_set_maintenance (ctx, false);
    s_broker_reply (call);
}

//  ---------------------------------------------------------------------
//  queue.stats

typedef struct {
    uint64_t pending;            //  Pending, or waiting out a retry backoff
    uint64_t running;            //  Dispatched, acknowledged or running
    uint64_t finished;           //  Final
} s_counts_t;

static void
s_count_cell (s_counts_t *counts, sched_cell_status_t status)
{
    if (sched_cell_status_final (status))
        counts->finished++;
    else
    if (status == SCHED_CELL_PENDING || status == SCHED_CELL_RETRY_WAIT)
        counts->pending++;
    else
        counts->running++;
}

static void
s_write_counts (pw_t *writer, const s_counts_t *counts)
{
    pw_map (writer, 3);
    pw_str (writer, "pending");
    pw_int (writer, (int64_t) counts->pending);
    pw_str (writer, "running");
    pw_int (writer, (int64_t) counts->running);
    pw_str (writer, "finished");
    pw_int (writer, (int64_t) counts->finished);
}

//  {count, p50, p99} of RING over the last WINDOW_MS.
static void
s_write_percentiles (pw_t *writer, qstats_t *ring, int64_t now_ms,
                     int64_t window_ms)
{
    int64_t p50 = 0, p99 = 0;
    size_t count = qstats_percentiles (ring, now_ms, window_ms, &p50, &p99);
    pw_map (writer, 3);
    pw_str (writer, "count");
    pw_int (writer, (int64_t) count);
    pw_str (writer, "p50");
    pw_int (writer, p50);
    pw_str (writer, "p99");
    pw_int (writer, p99);
}

static void
s_write_windows (pw_t *writer, qstats_t *ring, int64_t now_ms)
{
    pw_map (writer, 2);
    pw_str (writer, "5m");
    s_write_percentiles (writer, ring, now_ms, 5 * 60 * 1000);
    pw_str (writer, "1h");
    s_write_percentiles (writer, ring, now_ms, 60 * 60 * 1000);
}

static int
s_compare_keys (const void *a, const void *b)
{
    return strcmp (*(const char *const *) a, *(const char *const *) b);
}

void
req_queue_stats (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    int64_t now_ms = ctx_now_ms (ctx);
    s_counts_t jobs [BROKER_PRIORITIES], cells [BROKER_PRIORITIES];
    memset (jobs, 0, sizeof jobs);
    memset (cells, 0, sizeof cells);
    s_counts_t all_cells = {0};
    zhashx_t *by_action = zhashx_new ();
    zhashx_set_destructor (by_action, (zhashx_destructor_fn *) zstr_free);
    const sched_job_t **live = NULL;
    size_t live_count = sched_live_jobs (ctx->sched, &live);
    const sched_job_t *oldest = NULL;
    for (size_t index = 0; index < live_count; index++) {
        const sched_job_t *job = live [index];
        int priority = job->spec->priority + 100;
        if (priority < 0 || priority >= BROKER_PRIORITIES)
            continue;
        if (job->status == SCHED_JOB_PENDING) {
            jobs [priority].pending++;
            if (!oldest || job->submitted_ms < oldest->submitted_ms)
                oldest = job;
        }
        else
            jobs [priority].running++;
        for (size_t step = 0; step < job->step_count; step++) {
            const job_phase_t *leaf = job_spec_step (job->spec, step, NULL,
                                                     NULL);
            char name [2 * NAME_MAX_LEN + 2];
            snprintf (name, sizeof name, "%s.%s", leaf->backend, leaf->action);
            s_counts_t *counts = (s_counts_t *) zhashx_lookup (by_action, name);
            if (!counts) {
                counts = (s_counts_t *) zmalloc (sizeof (s_counts_t));
                zhashx_insert (by_action, name, counts);
            }
            //  A pending job's cells are not made yet: each will be one
            //  cell per node, counted as one pending cell per step here
            if (!job->cells) {
                counts->pending++;
                cells [priority].pending++;
                all_cells.pending++;
                continue;
            }
            for (size_t node = 0; node < job->expected_count; node++) {
                sched_cell_status_t status
                    = job->cells [step * job->expected_count + node].status;
                s_count_cell (counts, status);
                s_count_cell (&cells [priority], status);
                s_count_cell (&all_cells, status);
            }
        }
    }
    free (live);
    for (int priority = 0; priority < BROKER_PRIORITIES; priority++)
        jobs [priority].finished = ctx->stats->finished_by_priority [priority];
    store_txn_t *txn = req_txn (call);
    if (!txn) {
        zhashx_destroy (&by_action);
        return;
    }
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 11);
    pw_str (reply, "jobs");
    s_write_job_counts (ctx, reply);
    pw_str (reply, "cells");
    s_write_counts (reply, &all_cells);
    //  Highest priority first, only priorities with something to show
    size_t shown = 0;
    for (int priority = BROKER_PRIORITIES - 1; priority >= 0; priority--)
        if (jobs [priority].pending || jobs [priority].running
            || jobs [priority].finished)
            shown++;
    pw_str (reply, "by_priority");
    pw_array (reply, shown);
    for (int priority = BROKER_PRIORITIES - 1; priority >= 0; priority--) {
        if (!jobs [priority].pending && !jobs [priority].running
            && !jobs [priority].finished)
            continue;
        pw_map (reply, 3);
        pw_str (reply, "priority");
        pw_int (reply, priority - 100);
        pw_str (reply, "jobs");
        s_write_counts (reply, &jobs [priority]);
        pw_str (reply, "cells");
        s_write_counts (reply, &cells [priority]);
    }
    size_t action_count = zhashx_size (by_action);
    const char **names = (const char **) calloc (action_count + 1,
                                                 sizeof (char *));
    assert (names);
    size_t at = 0;
    for (void *item = zhashx_first (by_action); item;
         item = zhashx_next (by_action))
        names [at++] = (const char *) zhashx_cursor (by_action);
    qsort (names, action_count, sizeof (char *), s_compare_keys);
    pw_str (reply, "by_action");
    pw_array (reply, action_count);
    for (size_t index = 0; index < action_count; index++) {
        pw_map (reply, 2);
        pw_str (reply, "action");
        pw_str (reply, names [index]);
        pw_str (reply, "cells");
        s_write_counts (reply, (const s_counts_t *) zhashx_lookup (
                                   by_action, names [index]));
    }
    free (names);
    zhashx_destroy (&by_action);
    pw_str (reply, "oldest_pending");
    if (oldest) {
        pw_map (reply, 2);
        pw_str (reply, "job");
        pw_str (reply, oldest->id);
        pw_str (reply, "age_ms");
        pw_int (reply, now_ms - oldest->submitted_ms);
    }
    else
        pw_nil (reply);
    pw_str (reply, "wait_ms");
    s_write_windows (reply, ctx->stats->wait_samples, now_ms);
    pw_str (reply, "run_ms");
    s_write_windows (reply, ctx->stats->run_samples, now_ms);
    pw_str (reply, "dead_letter");
    pw_int (reply, (int64_t) dlq_size (txn));
    pw_str (reply, "any_node");
    s_write_any_node (ctx, reply);
    pw_str (reply, "limit_waiting");
    pw_int (reply, (int64_t) (sched_waiting_count (ctx->sched)
                              - sched_waiting_any_count (ctx->sched)));
    sched_limit_use_t uses [JOB_MAX_LIMITS];
    size_t limit_count = sched_limits (ctx->sched, uses, JOB_MAX_LIMITS);
    pw_str (reply, "limits");
    pw_array (reply, limit_count);
    for (size_t index = 0; index < limit_count; index++) {
        const sched_limit_use_t *use = &uses [index];
        pw_map (reply, 4 + (use->per_node ? 1 : 0)
                         + (use->busiest_node ? 1 : 0));
        pw_str (reply, "pattern");
        pw_str (reply, uses [index].pattern);
        pw_str (reply, "per_node");
        pw_bool (reply, uses [index].per_node);
        pw_str (reply, "max");
        pw_int (reply, uses [index].max);
        pw_str (reply, "running");
        pw_int (reply, uses [index].running);
        if (use->per_node) {
            pw_str (reply, "busiest");
            pw_int (reply, use->busiest);
        }
        if (use->busiest_node) {
            pw_str (reply, "busiest_node");
            pw_str (reply, use->busiest_node);
        }
    }
}

//  ---------------------------------------------------------------------
//  metrics.get

//  The live jobs: pending and running cells, the oldest queued job.
static void
s_read_live (ctx_t *ctx, int64_t now_ms, metrics_figures_t *figures)
{
    const sched_job_t **live = NULL;
    size_t count = sched_live_jobs (ctx->sched, &live);
    int64_t oldest_ms = 0;
    for (size_t index = 0; index < count; index++) {
        const sched_job_t *job = live [index];
        if (job->status == SCHED_JOB_PENDING) {
            if (!oldest_ms || job->submitted_ms < oldest_ms)
                oldest_ms = job->submitted_ms;
            //  Its cells are not made yet: one pending cell per step
            figures->cells_pending += job->step_count;
            continue;
        }
        if (!job->cells)
            continue;
        size_t cells = job->step_count * job->expected_count;
        for (size_t cell = 0; cell < cells; cell++) {
            sched_cell_status_t status = job->cells [cell].status;
            if (sched_cell_status_final (status))
                continue;
            if (status == SCHED_CELL_PENDING
                || status == SCHED_CELL_RETRY_WAIT)
                figures->cells_pending++;
            else
                figures->cells_running++;
        }
    }
    free (live);
    figures->oldest_pending_s = oldest_ms && now_ms > oldest_ms
                                    ? (double) (now_ms - oldest_ms) / 1000.0
                                    : 0;
}

//  Every figure of the exposition but metrics_t's, read from CTX (TXN: the
//  pass's transaction, for the dead-letter count).
static void
s_collect (ctx_t *ctx, store_txn_t *txn, metrics_figures_t *figures)
{
    memset (figures, 0, sizeof *figures);
    int64_t now_ms = ctx_now_ms (ctx);
    figures->version = GRID_VERSION;
    figures->start_time_s
        = (double) (ctx_wall_ms (ctx) - (now_ms - ctx->stats->started_ms))
          / 1000.0;
    figures->have_process = metrics_read_process (figures);
    figures->state = ctx_broker_state (ctx);
    figures->jobs_pending = sched_pending_count (ctx->sched);
    figures->jobs_running = sched_running_count (ctx->sched);
    s_read_live (ctx, now_ms, figures);
    figures->cells_waiting = sched_waiting_count (ctx->sched);
    const int64_t window_ms = 5 * 60 * 1000;
    qstats_percentiles (ctx->stats->wait_samples, now_ms, window_ms,
                        &figures->wait_p50_ms, &figures->wait_p99_ms);
    qstats_percentiles (ctx->stats->run_samples, now_ms, window_ms,
                        &figures->run_p50_ms, &figures->run_p99_ms);
    sched_counters (ctx->sched, &figures->sched);
    figures->limit_count = sched_limits (ctx->sched, figures->limits,
                                         JOB_MAX_LIMITS);
    figures->dead_letter = txn ? dlq_size (txn) : 0;
    if (ctx->notify)
        figures->notify = notify_counters (ctx->notify);
    size_t total = registry_size (ctx->registry);
    figures->nodes_online = registry_online_count (ctx->registry);
    figures->nodes_offline = total - figures->nodes_online;
    figures->nodes_drained = registry_drained_count (ctx->registry);
    figures->malformed = ctx->stats->counters.malformed;
    figures->unknown_node = ctx->stats->counters.unknown_node;
    figures->stale = ctx->stats->counters.stale;
    figures->send_failed = ctx->stats->counters.send_failed;
    figures->output_refused = ctx->stats->counters.output_refused;
    figures->output_paced = ctx->stats->counters.output_paced;
    figures->bad_entries = ctx->stats->counters.bad_entries;
    figures->blob_chunks_sent = ctx->stats->counters.blob_chunks_sent;
    figures->blob_bytes_sent = ctx->stats->counters.blob_bytes_sent;
    figures->blob_refused = ctx->stats->counters.blob_refused;
    figures->blob_uploads_refused = ctx->stats->counters.blob_uploads_refused;
    figures->auth = *auth_counters (ctx->auth);
    if (ctx->brokerkey) {
        figures->key_retired = brokerkey_retired (ctx->brokerkey);
        figures->key_rotating = brokerkey_next (ctx->brokerkey) != NULL;
    }
    if (figures->key_rotating) {
        req_broker_key_counts_t counts;
        req_broker_key_counts (ctx, &counts);
        figures->key_nodes = counts.nodes;
        figures->key_acknowledged = counts.acknowledged;
        figures->key_unable = counts.unable;
        figures->key_deadline_ms = brokerkey_deadline_ms (ctx->brokerkey)
                                   - ctx_wall_ms (ctx);
    }
    figures->trace_exported = otlp_exported (ctx->tracer);
    figures->trace_dropped = otlp_dropped (ctx->tracer);
    if (ctx->http_face) {
        figures->have_http = true;
        http_stats (ctx->http_face, &figures->http);
    }
    figures->watchers = ctx_watcher_count (ctx);
    figures->schedules = zhashx_size (ctx->schedules);
    for (schedule_t *schedule = (schedule_t *) zhashx_first (ctx->schedules);
         schedule; schedule = (schedule_t *) zhashx_next (ctx->schedules))
        figures->schedules_paused += schedule->paused;
    store_info (ctx->store, &figures->store);
    figures->store_state = ctx_store_state (ctx, &figures->store);
    const broker_storage_t *storage = &ctx->stats->storage;
    figures->failed_commits = storage->failed_commits;
    figures->storage_refused = storage->refused;
    figures->storage_episodes = storage->episodes;
    ctx_cluster_t cluster;
    ctx->ops->cluster (ctx, &cluster);
    if (cluster.enabled) {
        figures->have_cluster = true;
        figures->ha_epoch = cluster.epoch;
        figures->ha_standbys = cluster.standby_count;
        int64_t lag_ms = 0;
        for (size_t index = 0; index < cluster.standby_count; index++) {
            figures->ha_sync_standbys += cluster.standbys [index].sync;
            if (cluster.standbys [index].lag_ms > lag_ms)
                lag_ms = cluster.standbys [index].lag_ms;
        }
        figures->ha_lag_s = (double) lag_ms / 1000.0;
    }
}

//  The whole exposition into a new string: *TEXT_P (caller frees) of
//  *SIZE_P bytes. Returns 0, or -1 when out of memory.
static int
s_metrics_text (ctx_t *ctx, store_txn_t *txn, char **text_p, size_t *size_p)
{
    *text_p = NULL;
    *size_p = 0;
    metrics_figures_t figures;
    s_collect (ctx, txn, &figures);
    FILE *out = open_memstream (text_p, size_p);
    if (!out)
        return -1;
    int rc = metrics_render (ctx->stats->metrics, &figures, out);
    if (fclose (out) != 0)
        rc = -1;
    if (rc != 0) {
        free (*text_p);
        *text_p = NULL;
        *size_p = 0;
    }
    return rc;
}

void
req_metrics_get (req_call_t *call)
{
    store_txn_t *txn = req_txn (call);
    if (!txn)
        return;
    char *text = NULL;
    size_t size = 0;
    if (s_metrics_text (call->ctx, txn, &text, &size) != 0) {
        req_error (call, PROTO_ERR_INTERNAL, "metrics: out of memory");
        return;
    }
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    pw_map (call->reply, 1);
    pw_str (call->reply, "text");
    pw_strn (call->reply, text, size);
    free (text);
}
