/*  =========================================================================
    stats - what the broker counts: dropped messages, the store's health,
    finished jobs, per-node figures, wait and run samples

    One broker_stats_t lives as long as the broker. The server and the
    handlers bump its counters; status, metrics.get and node.workers read
    them. Nothing here is persisted: the figures count since the start.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_STATS_H
#define GRID_BROKER_STATS_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "metrics.h"
#include "qstats.h"

//  The store's health, for status and the logs. An episode begins with
//  the first commit that fails and ends with the next one that succeeds.
#define STORE_NEARLY_FULL 90       //  Percent of store.max_size: warned, "nearly_full"

typedef struct {
    int code;                    //  STORE_EFULL or STORE_EIO while failing, else 0
    int64_t since_ms;            //  Wall clock: the episode began
    int64_t failed_ms;           //  Monotonic: the last failed commit
    int64_t written_ms;          //  Monotonic: the last commit that wrote
    uint64_t failed_commits;     //  Commits that failed, ever
    uint64_t refused;            //  Requests answered storage_full/storage_error
    uint64_t episodes;           //  Episodes, ever
    char error [256];            //  The last failure's text
    bool warned;                 //  The 90% warning was logged
} broker_storage_t;

//  Messages the broker dropped or could not deliver, by reason.
typedef struct {
    uint64_t malformed;          //  Undecodable or invalid frames
    uint64_t repeated_hellos;    //  Hellos repeated on their session, welcomed again
    uint64_t unknown_node;       //  Messages from unregistered sessions
    uint64_t stale;              //  Acks/results matching no live cell
    uint64_t send_failed;        //  Sends to vanished agents
    uint64_t output_refused;     //  Output pieces past max_output or for
                                 //  no cell of their node
    uint64_t output_paced;       //  Acks of live output pieces held for
                                 //  results.output_rate
    uint64_t bad_entries;        //  Entries of results that broke a rule
                                 //  of result (the rest were taken)
    uint64_t blob_chunks_sent;   //  Blob chunks sent to agents
    uint64_t blob_bytes_sent;    //  ... their bytes
    uint64_t blob_refused;       //  blob_get requests refused (unknown
                                 //  blob, bad offset, not granted)
    uint64_t blob_uploads_refused;  //  blob.put pieces refused
} broker_counters_t;

//  What one node did since the broker started (node.workers).
typedef struct {
    uint64_t run;                //  Attempts that ended with a result
    uint64_t failed;             //  ... of which failed, timed out or were interrupted
    uint64_t lost;               //  Cells that read lost
    uint64_t retried;            //  Retries it was given
} broker_node_stats_t;

#define BROKER_PRIORITIES 201    //  -100..100
#define BROKER_JOB_STATUSES 6    //  sched_job_status_t values

typedef struct {
    broker_counters_t counters;  //  Dropped things
    broker_storage_t storage;    //  The store's health
    uint64_t finished [BROKER_JOB_STATUSES];  //  Jobs finished, by sched_job_status_t
    uint64_t finished_by_priority [BROKER_PRIORITIES];  //  ... by priority + 100
    qstats_t *wait_samples;      //  Submitted -> first step started, per node (ms)
    qstats_t *run_samples;       //  Attempt durations the agents measured (ms)
    metrics_t *metrics;          //  Histograms and counters for metrics.get
    zhashx_t *node_stats;        //  Node id -> broker_node_stats_t
    zhashx_t *blob_chunks;       //  Blob sha256 -> chunks sent (uint64_t)
    int64_t started_ms;          //  Monotonic: the broker started
    int64_t bad_entry_logged_ms; //  When a bad results entry was last logged
    int64_t dropped_logged_ms;   //  When a dropped agent message was last logged
    uint64_t dropped_unlogged;   //  Dropped agent messages since that line
} broker_stats_t;

//  A new, zeroed set of figures (samples and metrics made); NULL when out
//  of memory.
broker_stats_t *broker_stats_new (int64_t started_ms);

//  Frees SELF; NULL-safe.
void broker_stats_destroy (broker_stats_t **self_p);

//  NODE's counters (made at first use; they live as long as SELF).
broker_node_stats_t *broker_stats_node (broker_stats_t *self, const char *node);

//  One chunk of blob SHA256 was sent to an agent (blob.list and blob.stat
//  say how many per blob: a fetch that resumed asks for none twice).
void broker_stats_blob_sent (broker_stats_t *self, const char *sha256);

//  Chunks of blob SHA256 sent since start (0 when none).
uint64_t broker_stats_blob_chunks (broker_stats_t *self, const char *sha256);

//  Blob SHA256 is gone (deleted, purged): its figure goes too.
void broker_stats_blob_forget (broker_stats_t *self, const char *sha256);

#endif
