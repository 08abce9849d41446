/*  =========================================================================
    otlp - exports spans to an OpenTelemetry collector (OTLP/HTTP, JSON)
    =========================================================================
*/
#include "otlp.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../proto/trace.h"

struct _otlp_t {
    char *url;                    //  {endpoint}/v1/traces
    char *service;                //  service.name
    size_t batch_size;
    int64_t batch_delay_ms;
    int64_t timeout_ms;
    size_t queue_size;
    pthread_t thread;             //  The worker
    otlp_span_t **batch;          //  The worker's batch_size spans
    pthread_mutex_t lock;         //  Guards what follows
    pthread_cond_t wake;          //  Signalled on a new span and on stop
    otlp_span_t **queue;          //  A ring of queue_size spans
    size_t head;                  //  Oldest span's slot
    size_t count;                 //  Spans queued
    bool stopping;                //  otlp_destroy was called
    _Atomic uint64_t exported;    //  Spans the collector took
    _Atomic uint64_t dropped;     //  Spans dropped
};

//  ---------------------------------------------------------------------
//  Spans

otlp_span_t *
otlp_span_new (const char *name)
{
    otlp_span_t *span = (otlp_span_t *) calloc (1, sizeof *span);
    if (span && !(span->name = strdup (name ? name : "span"))) {
        free (span);
        span = NULL;
    }
    return span;
}

void
otlp_span_text (otlp_span_t *span, const char *key, const char *text)
{
    if (!span || !text || span->attribute_count >= OTLP_MAX_ATTRIBUTES)
        return;
    char *copy = strdup (text);
    if (!copy)
        return;
    otlp_attribute_t *attribute = &span->attributes [span->attribute_count++];
    attribute->key = key;
    attribute->text = copy;
}

void
otlp_span_int (otlp_span_t *span, const char *key, int64_t number)
{
    if (!span || span->attribute_count >= OTLP_MAX_ATTRIBUTES)
        return;
    otlp_attribute_t *attribute = &span->attributes [span->attribute_count++];
    attribute->key = key;
    attribute->text = NULL;
    attribute->number = number;
}

void
otlp_span_destroy (otlp_span_t **span_p)
{
    otlp_span_t *span = *span_p;
    if (!span)
        return;
    for (size_t index = 0; index < span->attribute_count; index++)
        free (span->attributes [index].text);
    free (span->name);
    free (span->status_message);
    free (span);
    *span_p = NULL;
}

//  ---------------------------------------------------------------------
//  The JSON body

static json_t *
s_text_value (const char *text)
{
    return json_pack ("{s:s}", "stringValue", text);
}

//  OTLP JSON writes 64-bit ints and times as decimal strings
static json_t *
s_number_text (int64_t number)
{
    char text [32];
    snprintf (text, sizeof text, "%" PRId64, number);
    return json_string (text);
}

static json_t *
s_attribute (const char *key, json_t *value)
{
    return json_pack ("{s:s, s:o}", "key", key, "value", value);
}

static json_t *
s_span_json (const otlp_span_t *span)
{
    char trace_id [TRACE_ID_HEX + 1], span_id [TRACE_SPAN_HEX + 1],
         parent_id [TRACE_SPAN_HEX + 1];
    trace_hex (span->trace_id, 16, trace_id);
    trace_hex (span->span_id, 8, span_id);
    static const uint8_t zero [8] = {0};
    bool root = memcmp (span->parent_id, zero, 8) == 0;
    trace_hex (span->parent_id, 8, parent_id);
    json_t *attributes = json_array ();
    for (size_t index = 0; index < span->attribute_count; index++) {
        const otlp_attribute_t *attribute = &span->attributes [index];
        json_t *value = attribute->text
                            ? s_text_value (attribute->text)
                            : json_pack ("{s:o}", "intValue",
                                         s_number_text (attribute->number));
        json_array_append_new (attributes, s_attribute (attribute->key, value));
    }
    json_t *status = json_pack ("{s:i}", "code", span->status);
    if (span->status_message)
        json_object_set_new (status, "message",
                             json_string (span->status_message));
    int64_t end_ms = span->end_ms >= span->start_ms ? span->end_ms
                                                    : span->start_ms;
    json_t *object = json_pack (
        "{s:s, s:s, s:s, s:i, s:o, s:o, s:o, s:o}", "traceId", trace_id,
        "spanId", span_id, "name", span->name, "kind", span->kind,
        "startTimeUnixNano", s_number_text (span->start_ms * 1000000),
        "endTimeUnixNano", s_number_text (end_ms * 1000000), "attributes",
        attributes, "status", status);
    if (object && !root)
        json_object_set_new (object, "parentSpanId", json_string (parent_id));
    return object;
}

char *
otlp_body (const char *service, otlp_span_t *const *spans, size_t count)
{
    json_t *list = json_array ();
    for (size_t index = 0; index < count; index++) {
        json_t *span = s_span_json (spans [index]);
        if (span)
            json_array_append_new (list, span);
    }
    json_t *resource = json_pack (
        "{s:[o]}", "attributes",
        s_attribute ("service.name", s_text_value (service)));
    json_t *body = json_pack (
        "{s:[{s:o, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceSpans", "resource",
        resource, "scopeSpans", "scope", "name", "grid", "version",
        GRID_VERSION, "spans", list);
    if (!body)
        return NULL;
    char *text = json_dumps (body, JSON_COMPACT);
    json_decref (body);
    return text;
}

//  ---------------------------------------------------------------------
//  The worker

static size_t
s_discard (char *data, size_t size, size_t count, void *arg)
{
    return size * count;
}

//  POSTs COUNT spans. Returns true when the collector took them (2xx).
static bool
s_post (otlp_t *self, CURL *curl, otlp_span_t **spans, size_t count)
{
    char *body = otlp_body (self->service, spans, count);
    if (!body)
        return false;
    struct curl_slist *headers
        = curl_slist_append (NULL, "Content-Type: application/json");
    curl_easy_reset (curl);
    curl_easy_setopt (curl, CURLOPT_URL, self->url);
    curl_easy_setopt (curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt (curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt (curl, CURLOPT_TIMEOUT_MS, (long) self->timeout_ms);
    curl_easy_setopt (curl, CURLOPT_CONNECTTIMEOUT_MS, (long) self->timeout_ms);
    curl_easy_setopt (curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (curl, CURLOPT_WRITEFUNCTION, s_discard);
    CURLcode rc = curl_easy_perform (curl);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo (curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all (headers);
    free (body);
    return rc == CURLE_OK && status >= 200 && status < 300;
}

//  The wall clock plus MS, for pthread_cond_timedwait.
static struct timespec
s_deadline (int64_t ms)
{
    struct timespec at;
    clock_gettime (CLOCK_REALTIME, &at);
    at.tv_sec += ms / 1000;
    at.tv_nsec += (ms % 1000) * 1000000;
    if (at.tv_nsec >= 1000000000) {
        at.tv_sec++;
        at.tv_nsec -= 1000000000;
    }
    return at;
}

static void *
s_worker (void *arg)
{
    otlp_t *self = (otlp_t *) arg;
    CURL *curl = curl_easy_init ();
    otlp_span_t **batch = self->batch;
    bool last = false;            //  The POST after the stop was asked
    pthread_mutex_lock (&self->lock);
    while (true) {
        //  Wait for a span, then up to the delay for the batch to fill
        while (self->count == 0 && !self->stopping)
            pthread_cond_wait (&self->wake, &self->lock);
        if (self->count == 0 && self->stopping)
            break;
        if (last) {
            //  One POST at the stop, so a dead collector cannot hold
            //  the broker's exit for more than one timeout
            atomic_fetch_add (&self->dropped, self->count);
            break;
        }
        last = self->stopping;
        struct timespec until = s_deadline (self->batch_delay_ms);
        while (self->count < self->batch_size && !self->stopping)
            if (pthread_cond_timedwait (&self->wake, &self->lock, &until)
                == ETIMEDOUT)
                break;
        size_t taken = 0;
        while (self->count && taken < self->batch_size) {
            batch [taken++] = self->queue [self->head];
            self->queue [self->head] = NULL;
            self->head = (self->head + 1) % self->queue_size;
            self->count--;
        }
        pthread_mutex_unlock (&self->lock);
        bool sent = curl && s_post (self, curl, batch, taken);
        if (sent)
            atomic_fetch_add (&self->exported, taken);
        else
            atomic_fetch_add (&self->dropped, taken);
        for (size_t index = 0; index < taken; index++)
            otlp_span_destroy (&batch [index]);
        pthread_mutex_lock (&self->lock);
    }
    pthread_mutex_unlock (&self->lock);
    if (curl)
        curl_easy_cleanup (curl);
    return NULL;
}

//  ---------------------------------------------------------------------
//  The exporter

otlp_t *
otlp_new (const otlp_config_t *config, char *err, size_t err_len)
{
    static bool curl_ready = false;
    if (!curl_ready) {
        //  Not thread-safe itself: called before the worker starts
        curl_global_init (CURL_GLOBAL_DEFAULT);
        curl_ready = true;
    }
    otlp_t *self = (otlp_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_len, "out of memory");
        return NULL;
    }
    const char *endpoint = config->endpoint ? config->endpoint : "";
    size_t length = strlen (endpoint);
    while (length && endpoint [length - 1] == '/')
        length--;
    if (asprintf (&self->url, "%.*s/v1/traces", (int) length, endpoint) < 0)
        self->url = NULL;
    self->service = strdup (config->service_name ? config->service_name
                                                 : OTLP_DEFAULT_SERVICE);
    self->batch_size = config->batch_size ? config->batch_size
                                          : OTLP_DEFAULT_BATCH;
    self->batch_delay_ms = config->batch_delay_ms > 0 ? config->batch_delay_ms
                                                      : OTLP_DEFAULT_DELAY_MS;
    self->timeout_ms = config->timeout_ms > 0 ? config->timeout_ms
                                              : OTLP_DEFAULT_TIMEOUT_MS;
    self->queue_size = config->queue_size ? config->queue_size
                                          : OTLP_DEFAULT_QUEUE;
    self->queue = (otlp_span_t **) calloc (self->queue_size,
                                           sizeof (otlp_span_t *));
    self->batch = (otlp_span_t **) calloc (self->batch_size,
                                           sizeof (otlp_span_t *));
    if (!self->url || !self->service || !self->queue || !self->batch) {
        snprintf (err, err_len, "out of memory");
        free (self->url);
        free (self->service);
        free (self->queue);
        free (self->batch);
        free (self);
        return NULL;
    }
    pthread_mutex_init (&self->lock, NULL);
    pthread_cond_init (&self->wake, NULL);
    int rc = pthread_create (&self->thread, NULL, s_worker, self);
    if (rc != 0) {
        snprintf (err, err_len, "cannot start the span exporter's thread: "
                  "%s", strerror (rc));
        pthread_mutex_destroy (&self->lock);
        pthread_cond_destroy (&self->wake);
        free (self->url);
        free (self->service);
        free (self->queue);
        free (self->batch);
        free (self);
        return NULL;
    }
    return self;
}

void
otlp_destroy (otlp_t **self_p)
{
    otlp_t *self = *self_p;
    if (!self)
        return;
    pthread_mutex_lock (&self->lock);
    self->stopping = true;
    pthread_cond_signal (&self->wake);
    pthread_mutex_unlock (&self->lock);
    pthread_join (self->thread, NULL);
    for (size_t index = 0; index < self->queue_size; index++)
        otlp_span_destroy (&self->queue [index]);
    pthread_mutex_destroy (&self->lock);
    pthread_cond_destroy (&self->wake);
    free (self->queue);
    free (self->batch);
    free (self->url);
    free (self->service);
    free (self);
    *self_p = NULL;
}

bool
otlp_export (otlp_t *self, otlp_span_t **span_p)
{
    if (!*span_p)
        return false;
    if (!self) {
        otlp_span_destroy (span_p);
        return false;
    }
    pthread_mutex_lock (&self->lock);
    bool queued = self->count < self->queue_size && !self->stopping;
    if (queued) {
        self->queue [(self->head + self->count) % self->queue_size] = *span_p;
        self->count++;
        *span_p = NULL;
        if (self->count >= self->batch_size || self->count == 1)
            pthread_cond_signal (&self->wake);
    }
    pthread_mutex_unlock (&self->lock);
    if (!queued) {
        atomic_fetch_add (&self->dropped, 1);
        otlp_span_destroy (span_p);
    }
    return queued;
}

uint64_t
otlp_exported (const otlp_t *self)
{
    return self ? atomic_load (&((otlp_t *) self)->exported) : 0;
}

uint64_t
otlp_dropped (const otlp_t *self)
{
    return self ? atomic_load (&((otlp_t *) self)->dropped) : 0;
}
