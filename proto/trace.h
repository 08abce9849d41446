/*  =========================================================================
    trace - W3C trace context (traceparent) for jobs, and span ids

    A job carries a W3C `traceparent`, version 00 only:

        00-<trace id: 32 hex>-<parent id: 16 hex>-<flags: 2 hex>

    55 bytes exactly, lowercase hex, dashes where they belong; an all-zero
    trace id or parent id is invalid. Anything else (another version, a
    byte more or less, uppercase hex, a trailing byte) is refused with a
    sentence that says what is wrong: the value comes from people and
    other programs, and a job is refused rather than traced wrong.

    Span ids of a job's spans are derived from (trace id, job, step, node,
    attempt), so that a broker that restarts mid-job still closes its
    spans with the ids their children name as parents.

    Threading: reentrant (trace_new reads the kernel's random source); the
    table of jobs' trace ids is guarded by its own lock.
    =========================================================================
*/
#ifndef GRID_TRACE_H
#define GRID_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_PARENT_LEN 55       //  Length of a version-00 traceparent
#define TRACE_ID_HEX 32           //  Hex digits of a trace id
#define TRACE_SPAN_HEX 16         //  Hex digits of a span (parent) id

//  One trace context.
typedef struct {
    uint8_t trace_id [16];        //  Never all zero
    uint8_t parent_id [8];        //  The caller's span; never all zero
    uint8_t flags;                //  Trace flags (bit 0: sampled)
} trace_ctx_t;

//  Parses TEXT (a NUL-terminated traceparent) into *CTX. Returns 0, or -1
//  with a sentence in ERR ("traceparent: the trace id is all zeros").
int trace_parse (const char *text, trace_ctx_t *ctx, char *err, size_t err_len);

//  Whether TEXT is a valid traceparent.
bool trace_valid (const char *text);

//  Writes CTX as a traceparent into TEXT (TRACE_PARENT_LEN + 1 bytes).
//  Returns TEXT.
char *trace_format (const trace_ctx_t *ctx, char *text);

//  Fills *CTX with random trace and parent ids, flags 01 (sampled).
//  Returns 0, or -1 when the kernel gave no random bytes.
int trace_new (trace_ctx_t *ctx);

//  Writes SIZE bytes as lowercase hex into HEX (2 * SIZE + 1 bytes).
//  Returns HEX.
char *trace_hex (const uint8_t *bytes, size_t size, char *hex);

//  The span id of a job's span: JOB alone (STEP < 0), one step of it
//  (NODE NULL), or one attempt of a step on one node. The same inputs
//  give the same id; never all zero.
void trace_span_id (const trace_ctx_t *ctx, const char *job, int64_t step,
                    const char *node, uint32_t attempt, uint8_t span [8]);

//  The process's table of jobs' trace ids, read by the log (log.h: a
//  line about a job carries its trace id). Bounded: past TRACE_JOBS_MAX
//  jobs the oldest entry is forgotten. Any thread.
#define TRACE_JOBS_MAX 16384

//  Remembers that JOB's trace id is TRACE_ID (32 hex digits); replaces
//  an earlier entry for JOB.
void trace_job_remember (const char *job, const char *trace_id);

//  Copies JOB's trace id into TRACE_ID (TRACE_ID_HEX + 1 bytes) and
//  returns true, or returns false when JOB is not remembered.
bool trace_job_lookup (const char *job, char *trace_id);

//  Forgets every entry (tests, and a process's end).
void trace_jobs_clear (void);

#endif
