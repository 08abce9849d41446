/*  =========================================================================
    jobtrace - a job's W3C trace context: where it is kept, how it is shown
    =========================================================================
*/
#include "jobtrace.h"

#include <stdio.h>
#include <string.h>

#define S_MADE " made"

int
jobtrace_put (store_txn_t *txn, const char *job_id, const char *traceparent,
              bool made)
{
    char value [TRACE_PARENT_LEN + sizeof S_MADE];
    int length = snprintf (value, sizeof value, "%s%s", traceparent,
                           made ? S_MADE : "");
    return store_put (txn, STORE_DB_JOB_TRACES, job_id, strlen (job_id),
                      value, (size_t) length);
}

int
jobtrace_get (store_txn_t *txn, const char *job_id, char *traceparent,
              bool *made)
{
    const void *value;
    size_t size;
    int rc = store_get (txn, STORE_DB_JOB_TRACES, job_id, strlen (job_id),
                        &value, &size);
    if (rc != 0)
        return rc;
    bool is_made = size == TRACE_PARENT_LEN + strlen (S_MADE)
                   && memcmp ((const char *) value + TRACE_PARENT_LEN, S_MADE,
                              strlen (S_MADE)) == 0;
    if (size != TRACE_PARENT_LEN && !is_made)
        return STORE_ENOTFOUND;
    memcpy (traceparent, value, TRACE_PARENT_LEN);
    traceparent [TRACE_PARENT_LEN] = 0;
    if (!trace_valid (traceparent)) {
        traceparent [0] = 0;
        return STORE_ENOTFOUND;
    }
    if (made)
        *made = is_made;
    return 0;
}

int
jobtrace_delete (store_txn_t *txn, const char *job_id)
{
    int rc = store_del (txn, STORE_DB_JOB_TRACES, job_id, strlen (job_id));
    return rc == STORE_ENOTFOUND ? 0 : rc;
}

void
jobtrace_write (const char *job_id, const char *traceparent, bool made,
                pw_t *writer)
{
    trace_ctx_t ctx;
    char err [160];
    int rc = trace_parse (traceparent, &ctx, err, sizeof err);
    (void) rc;
    char trace_id [TRACE_ID_HEX + 1], span_id [TRACE_SPAN_HEX + 1];
    uint8_t span [8];
    trace_span_id (&ctx, job_id, -1, NULL, 0, span);
    pw_map (writer, 4);
    pw_str (writer, "traceparent");
    pw_str (writer, traceparent);
    pw_str (writer, "trace_id");
    pw_str (writer, trace_hex (ctx.trace_id, sizeof ctx.trace_id, trace_id));
    pw_str (writer, "span_id");
    pw_str (writer, trace_hex (span, sizeof span, span_id));
    pw_str (writer, "generated");
    pw_bool (writer, made);
}

char *
jobtrace_command (const char *job_id, const char *traceparent, uint32_t step,
                  char *text)
{
    trace_ctx_t ctx;
    char err [160];
    if (trace_parse (traceparent, &ctx, err, sizeof err) != 0)
        return NULL;
    trace_span_id (&ctx, job_id, step, NULL, 0, ctx.parent_id);
    return trace_format (&ctx, text);
}

int
jobtrace_make (char *text)
{
    trace_ctx_t ctx;
    if (trace_new (&ctx) != 0)
        return -1;
    trace_format (&ctx, text);
    return 0;
}

void
jobtrace_remember (const char *job_id, const char *traceparent)
{
    if (!traceparent || strlen (traceparent) != TRACE_PARENT_LEN)
        return;
    char trace_id [TRACE_ID_HEX + 1];
    memcpy (trace_id, traceparent + 3, TRACE_ID_HEX);
    trace_id [TRACE_ID_HEX] = 0;
    trace_job_remember (job_id, trace_id);
}
