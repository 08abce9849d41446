/*  =========================================================================
    jobtrace - a job's W3C trace context: where it is kept, how it is shown

    Every job has a trace context (proto/trace.h): the traceparent its
    submitter gave (job.submit `traceparent`, gridcli --traceparent, the
    HTTP `traceparent` header), or one the broker made (random ids; the
    job's span is then the root of its trace). It is kept apart from the
    job header, in the job_traces database (job id -> the traceparent,
    then " made" when the broker made it), so that the previous release
    reads job headers unchanged.

    The spans of a job (broker/otlp.h exports them) have ids derived from
    the trace and the job (trace_span_id): the job's span, a span per
    step (its child), a span per node attempt (the step's child). The
    command of a step carries a traceparent whose parent is the step's
    span (agents that announce the `trace` feature).

    Threading: reentrant; store transactions follow store.h's rules.
    =========================================================================
*/
#ifndef GRID_JOBTRACE_H
#define GRID_JOBTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pw.h"
#include "../proto/trace.h"
#include "../store/store.h"

//  Keeps JOB_ID's TRACEPARENT (valid; MADE: the broker made it) in TXN.
//  Returns 0 or a STORE_E* code.
int jobtrace_put (store_txn_t *txn, const char *job_id,
                  const char *traceparent, bool made);

//  Reads JOB_ID's traceparent into TRACEPARENT (TRACE_PARENT_LEN + 1
//  bytes) and whether the broker made it. Returns 0, STORE_ENOTFOUND (a
//  job of an earlier release, or a record that is not a traceparent), or
//  another STORE_E* code.
int jobtrace_get (store_txn_t *txn, const char *job_id, char *traceparent,
                  bool *made);

//  Deletes JOB_ID's record (none is fine). Returns 0 or a STORE_E* code.
int jobtrace_delete (store_txn_t *txn, const char *job_id);

//  Writes the client form of a job's trace as a map: {traceparent,
//  trace_id, span_id (the job's span), generated (the broker made it)}.
//  TRACEPARENT must be valid.
void jobtrace_write (const char *job_id, const char *traceparent, bool made,
                     pw_t *writer);

//  The traceparent a command of STEP of JOB_ID carries (its parent: the
//  step's span) into TEXT (TRACE_PARENT_LEN + 1 bytes). Returns TEXT, or
//  NULL when TRACEPARENT is not valid.
char *jobtrace_command (const char *job_id, const char *traceparent,
                        uint32_t step, char *text);

//  Makes a new traceparent into TEXT (TRACE_PARENT_LEN + 1 bytes).
//  Returns 0, or -1 when the kernel gave no random bytes.
int jobtrace_make (char *text);

//  Remembers JOB_ID's trace id for the log (trace_job_remember).
void jobtrace_remember (const char *job_id, const char *traceparent);

#endif
