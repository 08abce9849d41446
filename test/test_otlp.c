/*  =========================================================================
    test_otlp - the OTLP JSON body of spans, the exporter's bounded queue
    (drops counted, a dead collector never blocks a caller), and the
    tracing: map of the broker's config
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <jansson.h>

#include "../broker/otlp.h"
#include "../broker/tracing.h"
#include "../proto/pv.h"
#include "../proto/pw.h"

static otlp_span_t *
s_span (const char *name, bool root)
{
    otlp_span_t *span = otlp_span_new (name);
    assert_non_null (span);
    for (int index = 0; index < 16; index++)
        span->trace_id [index] = (uint8_t) (0xa0 + index);
    for (int index = 0; index < 8; index++) {
        span->span_id [index] = (uint8_t) (0x10 + index);
        span->parent_id [index] = root ? 0 : (uint8_t) (0x20 + index);
    }
    span->kind = OTLP_KIND_INTERNAL;
    span->start_ms = 1700000000000;
    span->end_ms = 1700000000250;
    span->status = OTLP_STATUS_ERROR;
    span->status_message = strdup ("exit 3");
    otlp_span_text (span, "grid.node", "web-01");
    otlp_span_int (span, "grid.exit_code", -3);
    return span;
}

static void
test_otlp_body (void **state)
{
    otlp_span_t *spans [2] = { s_span ("node web-01 attempt 1", false),
                               s_span ("job j-1", true) };
    char *text = otlp_body ("gridbroker", spans, 2);
    assert_non_null (text);
    json_error_t error;
    json_t *body = json_loads (text, 0, &error);
    assert_non_null (body);
    json_t *resource = json_array_get (json_object_get (body, "resourceSpans"), 0);
    json_t *service = json_array_get (json_object_get (json_object_get (
                          resource, "resource"), "attributes"), 0);
    assert_string_equal (json_string_value (json_object_get (service, "key")),
                         "service.name");
    assert_string_equal (json_string_value (json_object_get (json_object_get (
                             service, "value"), "stringValue")),
                         "gridbroker");
    json_t *list = json_object_get (json_array_get (json_object_get (
                       resource, "scopeSpans"), 0), "spans");
    assert_int_equal (json_array_size (list), 2);
    json_t *span = json_array_get (list, 0);
    assert_string_equal (json_string_value (json_object_get (span, "traceId")),
                         "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf");
    assert_string_equal (json_string_value (json_object_get (span, "spanId")),
                         "1011121314151617");
    assert_string_equal (json_string_value (json_object_get (span,
                                                             "parentSpanId")),
                         "2021222324252627");
    //  Times in nanoseconds, as text
    assert_string_equal (json_string_value (json_object_get (
                             span, "startTimeUnixNano")),
                         "1700000000000000000");
    assert_string_equal (json_string_value (json_object_get (
                             span, "endTimeUnixNano")),
                         "1700000000250000000");
    assert_int_equal (json_integer_value (json_object_get (span, "kind")), 1);
    json_t *status = json_object_get (span, "status");
    assert_int_equal (json_integer_value (json_object_get (status, "code")), 2);
    assert_string_equal (json_string_value (json_object_get (status,
                                                             "message")),
                         "exit 3");
    json_t *attributes = json_object_get (span, "attributes");
    assert_int_equal (json_array_size (attributes), 2);
    json_t *exit_code = json_object_get (json_array_get (attributes, 1),
                                         "value");
    assert_string_equal (json_string_value (json_object_get (exit_code,
                                                             "intValue")),
                         "-3");
    //  A root span has no parentSpanId
    assert_null (json_object_get (json_array_get (list, 1), "parentSpanId"));
    json_decref (body);
    free (text);
    otlp_span_destroy (&spans [0]);
    otlp_span_destroy (&spans [1]);
    assert_null (spans [0]);
}

//  A port nothing listens on, on 127.0.0.1.
static int
s_dead_port (void)
{
    zsock_t *probe = zsock_new (ZMQ_ROUTER);
    int port = zsock_bind (probe, "tcp://127.0.0.1:*");
    zsock_destroy (&probe);
    return port;
}

static void
test_otlp_dead_collector (void **state)
{
    char endpoint [64], err [256];
    snprintf (endpoint, sizeof endpoint, "http://127.0.0.1:%d", s_dead_port ());
    otlp_config_t config = {
        .endpoint = endpoint, .service_name = "test", .batch_size = 2,
        .batch_delay_ms = 10, .timeout_ms = 500, .queue_size = 4
    };
    otlp_t *exporter = otlp_new (&config, err, sizeof err);
    assert_non_null (exporter);
    //  The queue takes 4; the worker may already hold some, the rest are
    //  dropped at once: a caller never waits
    size_t queued = 0;
    for (int index = 0; index < 1000; index++) {
        otlp_span_t *span = s_span ("job j-1", true);
        queued += otlp_export (exporter, &span);
        assert_null (span);
    }
    assert_true (queued >= 4 && queued < 1000);
    //  Every span queued ends dropped: the collector takes nothing
    int64_t deadline = zclock_mono () + 10000;
    while (otlp_dropped (exporter) < 1000 && zclock_mono () < deadline)
        zclock_sleep (10);
    assert_int_equal (otlp_dropped (exporter), 1000);
    assert_int_equal (otlp_exported (exporter), 0);
    //  NULL-safe
    otlp_destroy (&exporter);
    otlp_destroy (&exporter);
    otlp_span_t *span = s_span ("job j-2", true);
    assert_false (otlp_export (NULL, &span));
    assert_null (span);
    assert_int_equal (otlp_dropped (NULL), 0);
}

//  Loads YAML-like TEXT (as msgpack) through tracing_config_load.
static int
s_load (const char *key, const char *value, bool number,
        tracing_config_t *config, char *err, size_t err_len)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 1);
    pw_str (writer, "tracing");
    pw_map (writer, 1);
    pw_str (writer, key);
    if (number)
        pw_int (writer, atoll (value));
    else
        pw_str (writer, value);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    tracing_config_defaults (config);
    int rc = tracing_config_load (config, pv_doc_root (doc), err, err_len);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    return rc;
}

static void
test_otlp_config (void **state)
{
    tracing_config_t config;
    char err [512];
    assert_int_equal (s_load ("otlp_endpoint", "http://127.0.0.1:4318",
                              false, &config, err, sizeof err), 0);
    assert_string_equal (config.otlp_endpoint, "http://127.0.0.1:4318");
    assert_int_equal (config.batch_size, OTLP_DEFAULT_BATCH);
    assert_int_equal (config.timeout_ms, OTLP_DEFAULT_TIMEOUT_MS);
    tracing_config_t copy;
    tracing_config_copy (&copy, &config);
    assert_string_equal (copy.otlp_endpoint, config.otlp_endpoint);
    tracing_config_clear (&copy);
    tracing_config_clear (&config);
    assert_int_equal (s_load ("batch_delay", "250ms", false, &config, err,
                              sizeof err), 0);
    assert_int_equal (config.batch_delay_ms, 250);
    assert_null (config.otlp_endpoint);
    //  No endpoint: no exporter
    assert_null (tracing_exporter_new (&config, err, sizeof err));
    tracing_config_clear (&config);
    //  Hostile values, each named
    struct {
        const char *key, *value;
        bool number;
        const char *words;
    } bad [] = {
        {"otlp_endpoint", "ftp://x", false, "tracing.otlp_endpoint"},
        {"otlp_endpoint", "127.0.0.1:4318", false, "http://"},
        {"batch_size", "0", true, "tracing.batch_size"},
        {"batch_size", "100000", true, "1 to 10000"},
        {"queue_size", "-1", true, "tracing.queue_size"},
        {"timeout", "1ms", false, "tracing.timeout"},
        {"batch_delay", "2h", false, "tracing.batch_delay"},
        {"service", "x", false, "service"},
        {"timeout", "soon", false, "timeout"},
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        err [0] = 0;
        assert_int_equal (s_load (bad [index].key, bad [index].value,
                                  bad [index].number, &config, err,
                                  sizeof err), -1);
        if (!strstr (err, bad [index].words))
            fail_msg ("%s: %s: \"%s\" does not say \"%s\"", bad [index].key,
                      bad [index].value, err, bad [index].words);
        tracing_config_clear (&config);
    }
}

int
main (void)
{
    zsys_init ();
    zsys_set_logsender (NULL);
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_otlp_body),
        cmocka_unit_test (test_otlp_dead_collector),
        cmocka_unit_test (test_otlp_config),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
