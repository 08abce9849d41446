/*  =========================================================================
    otlp - exports spans to an OpenTelemetry collector (OTLP/HTTP, JSON)

    The broker hands finished spans to otlp_export, which only queues
    them: a worker thread of this module takes them off the queue in
    batches and POSTs each batch to {endpoint}/v1/traces as OTLP JSON
    (resourceSpans / scopeSpans / spans, ids in lowercase hex, times in
    nanoseconds as strings), with libcurl. A slow or dead collector
    delays only that thread: the queue is bounded, and a span that finds
    it full is dropped and counted, as is every span of a batch the
    collector did not take (an HTTP status other than 2xx, a refused
    connection, a timeout). Nothing is retried: a trace is an aid, and
    the job's own record is the truth.

    Threading: otlp_new, otlp_export, otlp_destroy and the counters are
    called from one thread (the broker's loop); the worker thread is this
    module's own. otlp_export never blocks on the network.
    =========================================================================
*/
#ifndef GRID_OTLP_H
#define GRID_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OTLP_MAX_ATTRIBUTES 12     //  Most attributes of one span

//  Defaults of the tracing.* keys
#define OTLP_DEFAULT_SERVICE "gridbroker"
#define OTLP_DEFAULT_BATCH 256
#define OTLP_DEFAULT_DELAY_MS 1000
#define OTLP_DEFAULT_TIMEOUT_MS 5000
#define OTLP_DEFAULT_QUEUE 4096

typedef struct {
    const char *endpoint;         //  Collector base URL ("http://host:4318")
    const char *service_name;     //  resource service.name
    size_t batch_size;            //  Most spans in one POST (>= 1)
    int64_t batch_delay_ms;       //  Longest a span waits for its batch to fill
    int64_t timeout_ms;           //  Longest one POST may take
    size_t queue_size;            //  Most spans waiting (beyond: dropped)
} otlp_config_t;

//  Span kinds (OTLP's numbers)
#define OTLP_KIND_INTERNAL 1
#define OTLP_KIND_SERVER 2

//  Span status codes (OTLP's numbers)
#define OTLP_STATUS_UNSET 0
#define OTLP_STATUS_OK 1
#define OTLP_STATUS_ERROR 2

typedef struct {
    const char *key;              //  Borrowed: a literal
    char *text;                   //  A string value (owned), or NULL
    int64_t number;               //  An int value, when text is NULL
} otlp_attribute_t;

//  One finished span. Strings are owned by the span.
typedef struct {
    uint8_t trace_id [16];
    uint8_t span_id [8];
    uint8_t parent_id [8];        //  All zero: a root span
    char *name;                   //  "job j-...", "step 0 test.echo", ...
    int kind;                     //  OTLP_KIND_*
    int64_t start_ms;             //  Wall clock
    int64_t end_ms;               //  Wall clock, >= start_ms
    int status;                   //  OTLP_STATUS_*
    char *status_message;         //  Or NULL
    otlp_attribute_t attributes [OTLP_MAX_ATTRIBUTES];
    size_t attribute_count;
} otlp_span_t;

typedef struct _otlp_t otlp_t;

//  Starts an exporter for CONFIG (copied). Returns it, or NULL with a
//  sentence in ERR (the worker thread could not start).
otlp_t *otlp_new (const otlp_config_t *config, char *err, size_t err_len);

//  Stops the worker: the spans still queued get one last POST (bounded
//  by the timeout), then the thread ends. NULL-safe, nulls *self_p.
void otlp_destroy (otlp_t **self_p);

//  A new span (zeroed, NAME copied).
otlp_span_t *otlp_span_new (const char *name);

//  Adds a string or int attribute to SPAN (KEY is a literal; beyond
//  OTLP_MAX_ATTRIBUTES it is left out).
void otlp_span_text (otlp_span_t *span, const char *key, const char *text);
void otlp_span_int (otlp_span_t *span, const char *key, int64_t number);

//  Frees a span; NULL-safe, nulls *span_p.
void otlp_span_destroy (otlp_span_t **span_p);

//  Queues *SPAN_P (taken: nulled). Returns true, or false when the queue
//  was full and the span was dropped (counted). SELF NULL: the span is
//  freed, nothing counted.
bool otlp_export (otlp_t *self, otlp_span_t **span_p);

//  Spans the collector took, and spans dropped (queue full, or their
//  POST failed), since the exporter started.
uint64_t otlp_exported (const otlp_t *self);
uint64_t otlp_dropped (const otlp_t *self);

//  Writes the OTLP JSON body for COUNT spans of SERVICE into a new
//  string (caller frees), or NULL. For tests.
char *otlp_body (const char *service, otlp_span_t *const *spans,
                 size_t count);

#endif
