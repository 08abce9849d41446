/*  =========================================================================
    tracing - the broker's spans: its configuration (tracing:), and the
    spans of a finished job, handed to the OTLP exporter (otlp.h)
    =========================================================================
*/
#include "tracing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/conf.h"
#include "../proto/trace.h"
#include "jobrec.h"

#define S_MAX_EVENTS 100000       //  Events of one job read for its spans

//  ---------------------------------------------------------------------
//  Configuration

void
tracing_config_defaults (tracing_config_t *config)
{
    memset (config, 0, sizeof *config);
    config->batch_size = OTLP_DEFAULT_BATCH;
    config->batch_delay_ms = OTLP_DEFAULT_DELAY_MS;
    config->timeout_ms = OTLP_DEFAULT_TIMEOUT_MS;
    config->queue_size = OTLP_DEFAULT_QUEUE;
}

void
tracing_config_clear (tracing_config_t *config)
{
    free (config->otlp_endpoint);
    free (config->service_name);
    config->otlp_endpoint = config->service_name = NULL;
}

void
tracing_config_copy (tracing_config_t *dest, const tracing_config_t *src)
{
    *dest = *src;
    dest->otlp_endpoint = src->otlp_endpoint ? strdup (src->otlp_endpoint)
                                             : NULL;
    dest->service_name = src->service_name ? strdup (src->service_name)
                                           : NULL;
}

int
tracing_config_load (tracing_config_t *config, const pv_t *root, char *err,
                     size_t err_len)
{
    static const char *known [] = {"otlp_endpoint", "service_name",
                                   "batch_size", "batch_delay", "timeout",
                                   "queue_size", NULL};
    const pv_t *tracing = pv_map_get (root, "tracing");
    if (!tracing || pv_type (tracing) == PV_NIL)
        return 0;
    char why [512] = "";
    if (pv_type (tracing) != PV_MAP) {
        snprintf (err, err_len, "tracing: expected a mapping (otlp_endpoint, "
                  "service_name, batch_size, batch_delay, timeout, "
                  "queue_size)");
        return -1;
    }
    int rc = conf_check_keys (tracing, known, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (tracing, "otlp_endpoint", &config->otlp_endpoint,
                           why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (tracing, "service_name", &config->service_name,
                           why, sizeof why);
    if (rc == 0)
        rc = conf_get_int (tracing, "batch_size", &config->batch_size, why,
                           sizeof why);
    if (rc == 0)
        rc = conf_get_duration (tracing, "batch_delay",
                                &config->batch_delay_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (tracing, "timeout", &config->timeout_ms, why,
                                sizeof why);
    if (rc == 0)
        rc = conf_get_int (tracing, "queue_size", &config->queue_size, why,
                           sizeof why);
    const char *endpoint = config->otlp_endpoint;
    if (rc == 0 && endpoint && *endpoint
        && strncmp (endpoint, "http://", 7) != 0
        && strncmp (endpoint, "https://", 8) != 0) {
        snprintf (why, sizeof why, "otlp_endpoint: expected an http:// or "
                  "https:// URL (the collector's OTLP/HTTP base, like "
                  "http://127.0.0.1:4318), not '%.200s'", endpoint);
        rc = -1;
    }
    if (rc == 0 && (config->batch_size < 1 || config->batch_size > 10000)) {
        snprintf (why, sizeof why, "batch_size: expected 1 to 10000");
        rc = -1;
    }
    if (rc == 0
        && (config->batch_delay_ms < 10 || config->batch_delay_ms > 60000)) {
        snprintf (why, sizeof why, "batch_delay: expected 10ms to 1m");
        rc = -1;
    }
    if (rc == 0 && (config->timeout_ms < 100 || config->timeout_ms > 60000)) {
        snprintf (why, sizeof why, "timeout: expected 100ms to 1m");
        rc = -1;
    }
    if (rc == 0 && (config->queue_size < 1 || config->queue_size > 1000000)) {
        snprintf (why, sizeof why, "queue_size: expected 1 to 1000000");
        rc = -1;
    }
    if (rc != 0) {
        snprintf (err, err_len, "tracing.%s", why);
        return -1;
    }
    return 0;
}

otlp_t *
tracing_exporter_new (const tracing_config_t *config, char *err,
                      size_t err_len)
{
    if (!config->otlp_endpoint || !*config->otlp_endpoint)
        return NULL;
    otlp_config_t otlp = {
        .endpoint = config->otlp_endpoint,
        .service_name = config->service_name,
        .batch_size = (size_t) config->batch_size,
        .batch_delay_ms = config->batch_delay_ms,
        .timeout_ms = config->timeout_ms,
        .queue_size = (size_t) config->queue_size,
    };
    return otlp_new (&otlp, err, err_len);
}

//  ---------------------------------------------------------------------
//  A finished job's spans

//  One event of the job, as its spans need it.
typedef struct {
    int64_t time_ms;
    char event [16];              //  "dispatched", "succeeded", ...
    char node [NAME_MAX_LEN + 1]; //  "" when job- or step-level
    int64_t step;                 //  -1 when job-level
} s_event_t;

//  Reads JOB_ID's events (oldest first) into *EVENTS_P. Returns how many.
static size_t
s_read_events (store_txn_t *txn, const char *job_id, s_event_t **events_p)
{
    *events_p = NULL;
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = jobrec_prefix (job_id, prefix);
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_event_key (job_id, 0, key);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_EVENTS);
    if (!cursor)
        return 0;
    size_t count = 0, room = 0;
    s_event_t *events = NULL;
    const void *k, *v;
    size_t k_len, v_len;
    int rc = store_cursor_seek (cursor, key, key_len, &k, &k_len, &v, &v_len);
    while (rc == 0 && count < S_MAX_EVENTS && k_len == prefix_len + 4
           && memcmp (k, prefix, prefix_len) == 0) {
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0) {
            const pv_t *record = pv_doc_root (doc);
            if (count == room) {
                room = room ? room * 2 : 64;
                s_event_t *grown = (s_event_t *) realloc (events,
                                                          room * sizeof *events);
                if (!grown) {
                    pv_doc_destroy (&doc);
                    break;
                }
                events = grown;
            }
            s_event_t *event = &events [count];
            memset (event, 0, sizeof *event);
            event->step = -1;
            pv_get_int (pv_map_get (record, "time_ms"), &event->time_ms);
            pv_get_int (pv_map_get (record, "step"), &event->step);
            size_t len = 0;
            const char *text = pv_str (pv_map_get (record, "event"), &len);
            if (text && len < sizeof event->event)
                memcpy (event->event, text, len);
            text = pv_str (pv_map_get (record, "node"), &len);
            if (text && len < sizeof event->node)
                memcpy (event->node, text, len);
            count++;
            pv_doc_destroy (&doc);
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    *events_p = events;
    return count;
}

//  Whether EVENT ends an attempt.
static bool
s_ends_attempt (const char *event)
{
    static const char *ends [] = {"succeeded", "failed", "timeout", "lost",
                                  "interrupted", "cancelled", NULL};
    for (size_t index = 0; ends [index]; index++)
        if (strcmp (event, ends [index]) == 0)
            return true;
    return false;
}

//  Whether EVENT says an attempt is under way.
static bool
s_starts_attempt (const char *event)
{
    return strcmp (event, "dispatched") == 0
        || strcmp (event, "acknowledged") == 0
        || strcmp (event, "running") == 0;
}

//  A span of TRACE named NAME, from START_MS to END_MS, with ids SPAN and
//  PARENT (NULL: a root).
static otlp_span_t *
s_span (const trace_ctx_t *trace, const char *name, const uint8_t *span_id,
        const uint8_t *parent_id, int64_t start_ms, int64_t end_ms)
{
    otlp_span_t *span = otlp_span_new (name);
    if (!span)
        return NULL;
    memcpy (span->trace_id, trace->trace_id, 16);
    memcpy (span->span_id, span_id, 8);
    if (parent_id)
        memcpy (span->parent_id, parent_id, 8);
    span->kind = OTLP_KIND_INTERNAL;
    span->start_ms = start_ms;
    span->end_ms = end_ms >= start_ms ? end_ms : start_ms;
    return span;
}

static bool
s_cell_failed (sched_cell_status_t status)
{
    return status != SCHED_CELL_SUCCESS && status != SCHED_CELL_SKIPPED
        && status != SCHED_CELL_PENDING;
}

//  The spans of the attempts of (STEP, NODE), from EVENTS; STEP_SPAN is
//  their parent. Returns how many were queued.
static size_t
s_attempt_spans (otlp_t *exporter, const trace_ctx_t *trace,
                 const sched_job_t *job, uint32_t step, size_t node_index,
                 const s_event_t *events, size_t count,
                 const uint8_t *step_span)
{
    const char *node = job->expected [node_index];
    const sched_cell_t *cell = &job->cells [step * job->expected_count
                                            + node_index];
    size_t queued = 0, done = 0;
    int64_t start_ms = -1, broadcast_ms = -1, ended_ms = -1;
    for (size_t index = 0; index < count && done < cell->attempt_count;
         index++) {
        const s_event_t *event = &events [index];
        if (event->step != (int64_t) step)
            continue;
        if (!*event->node) {
            if (strcmp (event->event, "dispatched") == 0)
                broadcast_ms = event->time_ms;
            continue;
        }
        if (strcmp (event->node, node) != 0)
            continue;
        bool ends = s_ends_attempt (event->event);
        if (start_ms < 0 && (ends || s_starts_attempt (event->event)))
            start_ms = broadcast_ms > ended_ms ? broadcast_ms : event->time_ms;
        if (!ends)
            continue;
        const sched_attempt_t *attempt = &cell->attempts [done++];
        if (start_ms == event->time_ms && attempt->duration_ms > 0)
            start_ms = event->time_ms - attempt->duration_ms;
        const char *ran_on = attempt->node ? attempt->node : node;
        uint8_t span_id [8];
        trace_span_id (trace, job->id, step, ran_on, attempt->attempt,
                       span_id);
        char name [128];
        snprintf (name, sizeof name, "node %s attempt %u", ran_on,
                  attempt->attempt);
        otlp_span_t *span = s_span (trace, name, span_id, step_span, start_ms,
                                    event->time_ms);
        if (span) {
            otlp_span_text (span, "grid.job", job->id);
            otlp_span_int (span, "grid.step", step);
            otlp_span_text (span, "grid.node", ran_on);
            otlp_span_int (span, "grid.attempt", attempt->attempt);
            otlp_span_text (span, "grid.status",
                            sched_cell_status_name (attempt->status));
            otlp_span_int (span, "grid.exit_code", attempt->exit_code);
            otlp_span_int (span, "grid.duration_ms", attempt->duration_ms);
            span->status = attempt->status == SCHED_CELL_SUCCESS
                               ? OTLP_STATUS_OK : OTLP_STATUS_ERROR;
            if (attempt->error && *attempt->error
                && attempt->status != SCHED_CELL_SUCCESS)
                span->status_message = strndup (attempt->error, 256);
            queued += otlp_export (exporter, &span);
        }
        ended_ms = event->time_ms;
        start_ms = -1;
    }
    return queued;
}

size_t
tracing_job_finished (otlp_t *exporter, store_txn_t *txn,
                      const sched_job_t *job, int64_t end_ms)
{
    trace_ctx_t trace;
    char why [160];
    if (!exporter || !txn || !*job->traceparent
        || trace_parse (job->traceparent, &trace, why, sizeof why) != 0)
        return 0;
    s_event_t *events = NULL;
    size_t count = s_read_events (txn, job->id, &events);
    size_t queued = 0;
    uint8_t job_span [8];
    trace_span_id (&trace, job->id, -1, NULL, 0, job_span);
    char name [160];
    snprintf (name, sizeof name, "job %s", job->id);
    int64_t start_ms = job->created_at_ms ? job->created_at_ms : end_ms;
    otlp_span_t *span = s_span (&trace, name, job_span,
                                job->trace_made ? NULL : trace.parent_id,
                                start_ms, end_ms);
    if (span) {
        span->kind = OTLP_KIND_SERVER;
        otlp_span_text (span, "grid.job", job->id);
        otlp_span_text (span, "grid.status",
                        sched_job_status_name (job->status));
        otlp_span_int (span, "grid.steps", (int64_t) job->step_count);
        otlp_span_int (span, "grid.nodes", (int64_t) job->expected_count);
        if (job->submitted_by)
            otlp_span_text (span, "grid.submitted_by", job->submitted_by);
        span->status = job->status == SCHED_JOB_COMPLETED ? OTLP_STATUS_OK
                                                          : OTLP_STATUS_ERROR;
        if (job->reason)
            span->status_message = strndup (job->reason, 256);
        queued += otlp_export (exporter, &span);
    }
    for (uint32_t step = 0; step < job->step_count && job->cells; step++) {
        int64_t first_ms = -1, last_ms = -1;
        for (size_t index = 0; index < count; index++)
            if (events [index].step == (int64_t) step) {
                if (first_ms < 0)
                    first_ms = events [index].time_ms;
                last_ms = events [index].time_ms;
            }
        bool ran = false, failed = false;
        for (size_t node = 0; node < job->expected_count; node++) {
            const sched_cell_t *cell
                = &job->cells [step * job->expected_count + node];
            ran |= cell->attempt_count > 0;
            failed |= cell->attempt_count > 0 && s_cell_failed (cell->status);
        }
        if (first_ms < 0 || !ran)
            continue;
        const job_phase_t *leaf = job_spec_step (job->spec, step, NULL, NULL);
        uint8_t step_span [8];
        trace_span_id (&trace, job->id, step, NULL, 0, step_span);
        snprintf (name, sizeof name, "step %u %s.%s", step,
                  leaf ? leaf->backend : "?", leaf ? leaf->action : "?");
        span = s_span (&trace, name, step_span, job_span, first_ms, last_ms);
        if (span) {
            otlp_span_text (span, "grid.job", job->id);
            otlp_span_int (span, "grid.step", step);
            if (leaf) {
                otlp_span_text (span, "grid.backend", leaf->backend);
                otlp_span_text (span, "grid.action", leaf->action);
            }
            span->status = failed ? OTLP_STATUS_ERROR : OTLP_STATUS_OK;
            queued += otlp_export (exporter, &span);
        }
        for (size_t node = 0; node < job->expected_count; node++)
            queued += s_attempt_spans (exporter, &trace, job, step, node,
                                       events, count, step_span);
    }
    free (events);
    return queued;
}
