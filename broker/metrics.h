/*  =========================================================================
    metrics - the broker's figures in the Prometheus text exposition
    format (version 0.0.4)

    `metrics.get` (proto/PROTOCOL.md 5.1) answers with the text this module
    writes, and the HTTP face serves the same text at GET /metrics;
    docs/METRICS.md lists every metric with its type, labels and meaning.
    Only fleet-wide aggregates are exported: no label ever names a node or
    a job, so the number of series does not grow with the fleet.

    Three parts:

    - metrics_hist_t: a histogram with fixed buckets (upper bounds in
      microseconds, ascending), a count per bucket and a sum. Observing
      scans at most METRICS_HIST_MAX_BOUNDS integers and allocates nothing.
    - metrics_t: what the broker counts only for this exposition: job
      durations, dispatch-to-result latencies and commit latencies
      (histograms), finished jobs by status, applied results, agent
      messages by type and client requests by type. broker.c feeds it at
      those points with the times it already has; the scheduler never
      sees it.
    - the writer: families (# HELP and # TYPE lines), samples with escaped
      label values, histograms; metrics_render writes a whole exposition
      from a metrics_figures_t snapshot (pure: unit-tested without a
      broker). metrics.get's handler (req/status.c) takes that snapshot
      from the broker's context.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_METRICS_H
#define GRID_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/proto.h"
#include "../store/store.h"
#include "auth.h"
#include "http.h"
#include "notify.h"
#include "sched.h"

#define METRICS_HIST_MAX_BOUNDS 20       //  Finite buckets a histogram may have
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

//  A histogram: COUNTS[i] holds the observations <= BOUNDS_US[i] and
//  > BOUNDS_US[i - 1]; COUNTS[BOUND_COUNT] those above the last bound
//  (+Inf). Written cumulatively, in seconds.
typedef struct {
    const int64_t *bounds_us;    //  Upper bounds, microseconds (borrowed, static)
    size_t bound_count;          //  How many (at most METRICS_HIST_MAX_BOUNDS)
    uint64_t counts [METRICS_HIST_MAX_BOUNDS + 1];  //  Per bucket, not cumulative
    uint64_t count;              //  Observations
    uint64_t sum_us;             //  Their sum, microseconds
} metrics_hist_t;

//  Sets HIST empty with BOUNDS_US (COUNT of them, ascending, static
//  storage; at most METRICS_HIST_MAX_BOUNDS are used).
void metrics_hist_init (metrics_hist_t *hist, const int64_t *bounds_us,
                        size_t count);

//  Adds one observation of VALUE_US microseconds (negative counts as 0).
void metrics_hist_observe (metrics_hist_t *hist, int64_t value_us);

//  ---------------------------------------------------------------------
//  The broker's own counters

typedef struct _metrics_t metrics_t;

//  New, all zero. Returns NULL when out of memory.
metrics_t *metrics_new (void);

//  Frees it; NULL-safe, nulls *self_p.
void metrics_destroy (metrics_t **self_p);

//  An agent message of TYPE was decoded (whatever became of it).
void metrics_agent_message (metrics_t *self, proto_type_t type);

//  Counts a results message of COUNT entries.
void metrics_results_batch (metrics_t *self, size_t count);

//  One acknowledgement message went to an agent for COUNT results: a
//  result_acks when BATCHED, else a result_ack (COUNT 1).
void metrics_result_ack (metrics_t *self, bool batched, size_t count);

//  A client request of TYPE (a request type proto_request_decode
//  accepted) arrived, from any face.
void metrics_request (metrics_t *self, const char *type);

//  A result was applied to its cell; LATENCY_MS is the time from the
//  dispatch of that attempt to the result, or negative when unknown.
void metrics_result (metrics_t *self, int64_t latency_ms);

//  A job finished with STATUS (a final sched_job_status_t) DURATION_MS
//  after it was submitted.
void metrics_job_finished (metrics_t *self, sched_job_status_t status,
                           int64_t duration_ms);

//  A store commit that wrote took DURATION_US microseconds.
void metrics_commit (metrics_t *self, int64_t duration_us);

//  The histograms (borrowed for the life of SELF).
const metrics_hist_t *metrics_job_duration (const metrics_t *self);
const metrics_hist_t *metrics_result_latency (const metrics_t *self);
const metrics_hist_t *metrics_commit_latency (const metrics_t *self);

//  ---------------------------------------------------------------------
//  A snapshot of everything else, read from the broker at scrape time

typedef struct {
    const char *version;         //  Build version (grid_build_info)
    double start_time_s;         //  Wall clock the broker started, seconds
    bool have_process;           //  /proc/self was readable: the process_ figures hold
    double cpu_s;                //  User + system CPU time, seconds
    uint64_t resident_bytes;     //  Resident memory
    uint64_t virtual_bytes;      //  Virtual memory
    uint64_t open_fds;           //  Open file descriptors
    uint64_t max_fds;            //  RLIMIT_NOFILE soft limit
    const char *state;           //  serving, draining or maintenance
    uint64_t jobs_pending;       //  Queued now
    uint64_t jobs_running;       //  Running now
    double oldest_pending_s;     //  Age of the oldest queued job, 0 when none
    uint64_t cells_pending;      //  Cells of live jobs not sent yet (or in a retry backoff)
    uint64_t cells_running;      //  ... dispatched, acknowledged or running
    uint64_t cells_waiting;      //  ... waiting for a free slot (any-node, limits)
    int64_t wait_p50_ms;         //  Submit to first start, last 5 minutes
    int64_t wait_p99_ms;
    int64_t run_p50_ms;          //  Attempt durations the agents measured, last 5 minutes
    int64_t run_p99_ms;
    sched_counters_t sched;      //  Submits, refusals, final cells, any-node figures
    sched_limit_use_t limits [JOB_MAX_LIMITS];  //  Concurrency limits in use
    size_t limit_count;          //  How many
    uint64_t dead_letter;        //  Dead-letter entries
    notify_counters_t notify;    //  Webhook deliveries (notify.h)
    uint64_t nodes_online;       //  Registered nodes online
    uint64_t nodes_offline;      //  ... offline
    uint64_t nodes_drained;      //  ... drained (online or not)
    uint64_t malformed;          //  Malformed messages, both sockets
    uint64_t unknown_node;       //  Messages from sessions the broker does not know
    uint64_t stale;              //  Acks and results for no live cell
    uint64_t send_failed;        //  Sends to vanished agents
    uint64_t output_refused;     //  Output pieces refused
    uint64_t output_paced;       //  Acks of live pieces held (outpace.h)
    uint64_t bad_entries;        //  Entries of results dropped
    uint64_t blob_chunks_sent;   //  Blob chunks sent to agents
    uint64_t blob_bytes_sent;    //  ... their bytes
    uint64_t blob_refused;       //  blob_get requests refused
    uint64_t blob_uploads_refused;  //  blob.put pieces refused
    bool key_rotating;           //  The broker's key rotates: key_ hold
    uint64_t key_nodes;          //  Nodes known
    uint64_t key_acknowledged;   //  ... that hold the next key
    uint64_t key_unable;         //  ... that cannot take it (older release)
    int64_t key_deadline_ms;     //  Until the old key is retired at the latest
    uint64_t key_retired;        //  Rotations retired since start
    auth_counters_t auth;        //  Security counters, ZeroMQ and HTTP
    bool have_http;              //  The HTTP face is on: http holds
    http_stats_t http;           //  The HTTP face's figures
    uint64_t watchers;           //  job.watch requests parked
    uint64_t schedules;          //  Schedules
    uint64_t schedules_paused;   //  ... of which paused
    store_info_t store;          //  Store sizes
    const char *store_state;     //  ok, nearly_full, full or error
    uint64_t failed_commits;     //  Commits that failed
    uint64_t storage_refused;    //  Requests answered storage_full / storage_error
    uint64_t storage_episodes;   //  Runs of failing commits
    bool have_cluster;           //  The active of a broker cluster: ha_ hold
    uint64_t ha_epoch;           //  Its leadership's epoch
    uint64_t ha_standbys;        //  Standbys connected
    uint64_t ha_sync_standbys;   //  ... in the sync set
    double ha_lag_s;             //  The longest a pass has waited for a
                                 //  standby's acknowledgement, now
    uint64_t trace_exported;     //  Spans the OTLP collector took
    uint64_t trace_dropped;      //  Spans dropped (queue full, POST failed)
} metrics_figures_t;

//  Writes the whole exposition of FIGURES and SELF to OUT. Returns 0, or
//  -1 when OUT failed.
int metrics_render (const metrics_t *self, const metrics_figures_t *figures,
                    FILE *out);

//  Reads the process_ figures of FIGURES, which starts zeroed (cpu_s,
//  resident_bytes, virtual_bytes, open_fds, max_fds), from /proc/self and
//  getrlimit. Returns false when /proc/self cannot be read.
bool metrics_read_process (metrics_figures_t *figures);

//  ---------------------------------------------------------------------
//  The writer (used by metrics_render; public for tests and other faces)

//  # HELP and # TYPE lines of family NAME; TYPE is counter, gauge or
//  histogram. HELP is escaped (backslash, newline).
void metrics_write_family (FILE *out, const char *name, const char *type,
                           const char *help);

//  One sample line NAME{LABEL="VALUE",...} of an integer. LABELS holds
//  label names and values in turn (NULL-terminated, may be NULL); values
//  are escaped (backslash, double quote, newline).
void metrics_write_uint (FILE *out, const char *name, const char *const *labels,
                         uint64_t value);

//  The same with a float value (written with up to 15 significant digits).
void metrics_write_double (FILE *out, const char *name,
                           const char *const *labels, double value);

//  A whole histogram family NAME (in seconds): family lines, then
//  NAME_bucket{le} for each bound and +Inf (cumulative), NAME_sum and
//  NAME_count.
void metrics_write_hist (FILE *out, const char *name, const char *help,
                         const metrics_hist_t *hist);

#endif
