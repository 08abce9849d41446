/*  =========================================================================
    tracing - the broker's spans: its configuration (tracing:), and the
    spans of a finished job, handed to the OTLP exporter (otlp.h)

    A job that reaches a final status gets its spans built at once from
    what the store holds: its events (their times) and its cells (each
    attempt's status, exit code and duration). So a broker that restarted
    mid-job still closes every span, with the ids its children name
    (trace_span_id over trace, job, step, node, attempt):

        job j-...                 parent: the submitter's span (its
                                  traceparent's parent id), or none
          step N backend.action   one per step that was sent
            node ID attempt K     one per attempt of the step on a node:
                                  node, status, exit code, duration

    Threading: the broker's loop thread.
    =========================================================================
*/
#ifndef GRID_TRACING_H
#define GRID_TRACING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pv.h"
#include "../store/store.h"
#include "otlp.h"
#include "sched.h"

//  The tracing: map of gridbroker.yaml.
typedef struct {
    char *otlp_endpoint;          //  Collector base URL, or NULL: no export
    char *service_name;           //  resource service.name (NULL: gridbroker)
    int64_t batch_size;           //  Spans per POST (1..10000, default 256)
    int64_t batch_delay_ms;       //  Longest a span waits (10ms..1m, default 1s)
    int64_t timeout_ms;           //  One POST's limit (100ms..1m, default 5s)
    int64_t queue_size;           //  Spans waiting at most (1..1000000,
                                  //  default 4096); beyond, dropped
} tracing_config_t;

//  Fills CONFIG with the defaults (no export).
void tracing_config_defaults (tracing_config_t *config);

//  Frees what CONFIG owns and nulls it.
void tracing_config_clear (tracing_config_t *config);

//  Copies SRC into DEST (its own strings).
void tracing_config_copy (tracing_config_t *dest, const tracing_config_t *src);

//  Reads the tracing: map of the config file's ROOT (absent: nothing
//  changes). Returns 0, or -1 with "tracing.KEY: ..." in ERR.
int tracing_config_load (tracing_config_t *config, const pv_t *root,
                         char *err, size_t err_len);

//  The exporter CONFIG asks for, or NULL when it names no endpoint (or
//  the exporter could not start: ERR says why, and the caller refuses to
//  start).
otlp_t *tracing_exporter_new (const tracing_config_t *config, char *err,
                              size_t err_len);

//  JOB (final, with its trace context) ended at END_MS (wall clock):
//  builds its spans from its events and cells in TXN and queues them on
//  EXPORTER (NULL: nothing is done). Returns how many spans it queued.
size_t tracing_job_finished (otlp_t *exporter, store_txn_t *txn,
                             const sched_job_t *job, int64_t end_ms);

#endif
