/*  =========================================================================
    jobrec - how jobs, result cells and events are laid out in the store

    Keys (all sort bytewise in the order that matters):
        jobs     job id                                  -> header record
        results  job id | 0x00 | step (2 bytes BE) | node -> cell record
        events   job id | 0x00 | seq (4 bytes BE)         -> event record
        requests client request id                        -> reply record
        idempotency idempotency key                       -> job id | digest
        outputs  job id | 0x00 | step (2 BE) | node | 0x00 | attempt (2 BE)
                 | stream ('o' stdout, 'e' stderr) | offset (4 BE) -> bytes
        notify_jobs job id                             -> its spec's notify
                 value (the header's spec leaves it out, so that the
                 previous release, which refuses unknown spec keys,
                 reads the header)
    Job ids are time-sortable, so the jobs database lists oldest first.

    Header record: {id, ?schedule: name, spec: <job wire form>, status,
    step, steps, expected: [ids], reason: str|nil, not_run: [{node,
    status, reason, named}], created_at_ms, updated_at_ms, ?retry_of: id,
    ?retried_by: [ids]} (not_run is absent in records of older brokers;
    schedule names the schedule that started the job).
    Cell record: {status, ?reason, ?waiting, attempt, attempts: [{attempt,
    status, output, data, error, exit_code, duration_ms, truncated, ?node,
    ?late, ?late_result, ?output_size, ?error_size, ?output_dropped,
    ?error_dropped}]}
    (node: which node ran an any-node job's attempt; late: a result that
    came after the step was reclaimed from that node; late_result:
    {status, exit_code, at_ms}, the agent's result that came after the
    broker's verdict on this attempt and told another story, kept beside
    the verdict, which stands; older brokers skip it). An attempt with
    output_size (or error_size) keeps only the head of that stream in
    output (error); the whole stream lies in outputs, in pieces keyed by
    their offset.
    Event record: {seq, time_ms, event, ?node: str, ?step: int,
    ?detail: str} (records of older brokers hold nils there; the client
    form leaves them out either way).

    Request record: 8 bytes of wall-clock ms (big-endian), then a byte
    JOBREC_DIGEST_LEN and the digest of the request's canonical form, then
    the reply. (Records written before the digest have the reply right
    after the stamp; a reply is a msgpack map, whose first byte is never
    JOBREC_DIGEST_LEN.) Idempotency record: the job id,
    then the digest of the job spec's wire form.

    Also builds the client API's job record (proto/PROTOCOL.md) from these,
    and rebuilds a scheduler job from them after a restart.

    Threading: reentrant; store transactions follow store.h's rules.
    =========================================================================
*/
#ifndef GRID_JOBREC_H
#define GRID_JOBREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pv.h"
#include "../proto/pw.h"
#include "../store/store.h"
#include "sched.h"

#define JOBREC_PROGRESS_TASKS 32   //  Running tasks job.progress lists at most
#define JOBREC_MAX_KEY (JOB_ID_LEN + 1 + 4 + NAME_MAX_LEN)
#define JOBREC_DIGEST_LEN 20      //  SHA-1
#define JOBREC_MAX_OUTPUT_KEY (JOB_ID_LEN + 1 + 2 + NAME_MAX_LEN + 1 + 2 + 1 + 4)

//  The digest (SHA-1) of SIZE bytes at DATA into DIGEST (JOBREC_DIGEST_LEN
//  bytes): what tells two request bodies or two job specs apart.
void jobrec_digest (const void *data, size_t size, uint8_t *digest);

//  The job that idempotency key KEY made: its id into JOB_ID (JOB_ID_LEN
//  + 1 bytes) and its spec's digest into DIGEST. Returns 0,
//  STORE_ENOTFOUND, or -2 when the record is malformed.
int jobrec_idempotency_get (store_txn_t *txn, const char *key, char *job_id,
                            uint8_t *digest);

//  Records that KEY made JOB_ID from a spec of digest DIGEST. Returns 0
//  or a STORE_ error.
int jobrec_idempotency_put (store_txn_t *txn, const char *key,
                            const char *job_id, const uint8_t *digest);

//  Key of a cell; returns its length. KEY holds JOBREC_MAX_KEY bytes.
size_t jobrec_cell_key (const char *job_id, uint32_t step, const char *node,
                        uint8_t *key);

//  Key of an event; returns its length.
size_t jobrec_event_key (const char *job_id, uint32_t seq, uint8_t *key);

//  Prefix shared by all cells / events of a job ("id" + 0x00); returns
//  its length.
size_t jobrec_prefix (const char *job_id, uint8_t *key);

//  Writes JOB's header / one of its cells / one event into TXN. Return 0
//  or a STORE_ error.
int jobrec_save_header (store_txn_t *txn, const sched_job_t *job, pw_t *scratch);
int jobrec_save_cell (store_txn_t *txn, const sched_job_t *job, uint32_t step,
                      const char *node, pw_t *scratch);

//  Writes cell CELL of JOB (its index in job->cells, as a SAVE_CELL action
//  gives it) into TXN. Returns 0 or a STORE_ error.
int jobrec_save_cell_at (store_txn_t *txn, const sched_job_t *job,
                         size_t cell, pw_t *scratch);
//  Deletes JOB's cells stored under NODE (an any-node job moved to another
//  node). Returns 0 or a STORE_ error.
int jobrec_forget_cells (store_txn_t *txn, const sched_job_t *job,
                         const char *node);
int jobrec_save_event (store_txn_t *txn, const char *job_id, uint32_t seq,
                       int64_t wall_ms, const char *event, const char *node,
                       int64_t step, const char *detail, pw_t *scratch);

//  The next free event seq of a job (1 for a job with no events).
uint32_t jobrec_next_event_seq (store_txn_t *txn, const char *job_id);

//  Writes the client API job record of JOB_ID (header + every cell) into
//  WRITER. LIVE is the scheduler's job while it runs, else NULL: it gives
//  the cells the scheduler did not store (a broadcast's dispatched cells,
//  docs/SCHEDULING.md R16). TRACEPARENT, when not NULL, is written as
//  its trace (jobtrace_write; TRACE_MADE: the broker made it). Returns
//  0, STORE_ENOTFOUND, or -2 when a stored record does not decode
//  (logged by the caller as corruption).
int jobrec_write_record (store_txn_t *txn, const char *job_id,
                         const sched_job_t *live, const char *traceparent,
                         bool trace_made, pw_t *writer);

//  Writes a job.list summary from a decoded header record. Returns 0 or -2.
int jobrec_write_summary (const pv_t *header, pw_t *writer);

//  Writes the events of JOB_ID with seq > AFTER as an array (at most
//  LIMIT). Returns 0.
int jobrec_write_events (store_txn_t *txn, const char *job_id, uint32_t after,
                         size_t limit, pw_t *writer);

//  Rebuilds the scheduler job JOB_ID from its header and cells. Returns 0
//  and *JOB_P, or -2 when a record is malformed, STORE_ENOTFOUND.
int jobrec_load (store_txn_t *txn, const char *job_id, sched_job_t **job_p);

//  Whether a decoded spec sends failed cells to the dead-letter queue
//  (its `dead_letter`, else on for `any` targets).
bool jobrec_spec_dead_letter (const pv_t *spec);

//  The status named in a decoded header, or -1 when missing/unknown.
int jobrec_header_status (const pv_t *header);

//  Writes the client API progress record of JOB (proto/PROTOCOL.md,
//  `job.progress`): status, step, how many nodes are done with the
//  current step and how many failed anywhere, and the current step's
//  cells counted by status, and (as `tasks`) up to JOBREC_PROGRESS_TASKS
//  running tasks' latest progress. Reads only JOB; never the store.
void jobrec_write_progress (const sched_job_t *job, pw_t *writer);

//  The agent's late RESULT for an attempt the broker already ended (lost,
//  cancelled, timeout) of a job no longer live: fills the stored cell's
//  attempt with the output, exit code and duration the agent sent when it
//  tells the verdict's story, else records it beside the verdict, which
//  stands, with WALL_MS as the time it came (sched_attempt_fill). A late
//  result of an any-node job from a node its step was taken from joins
//  the history of the cell of the node that held it last, marked late
//  (sched_attempt_late). Returns 2 when it was recorded beside the
//  verdict, 1 when it filled the attempt (or already was taken), 0 when
//  there was nothing to do, or a STORE_ error / -2 (a malformed record).
int jobrec_fill_cell (store_txn_t *txn, const proto_msg_t *result,
                      int64_t wall_ms, pw_t *scratch);

//  Stores a piece of the output of (JOB_ID, STEP, NODE, ATTEMPT), stream
//  stdout or (STDERR) stderr, that starts at OFFSET. Returns 0 or a STORE_
//  error.
int jobrec_save_output (store_txn_t *txn, const char *job_id, uint32_t step,
                        const char *node, uint32_t attempt, bool stderr_,
                        uint64_t offset, const void *data, size_t len);

//  True when the stored job JOB_ID expects NODE and has step STEP (for
//  output pieces that arrive after the job left the scheduler).
bool jobrec_expects (store_txn_t *txn, const char *job_id, uint32_t step,
                     const char *node);

//  True when a piece of LEN bytes at OFFSET of the stream of (JOB_ID,
//  STEP, NODE, ATTEMPT, STDERR_) overlaps no stored piece but one at the
//  same offset (which it replaces): so the pieces of a stream, at any
//  offsets, never hold more than the stream (live output, rule 8a).
//  *REPEAT_P (may be NULL) is set when a piece of the same offset and
//  length is stored already: the agent sent it again.
bool jobrec_output_fits (store_txn_t *txn, const char *job_id, uint32_t step,
                         const char *node, uint32_t attempt, bool stderr_,
                         uint64_t offset, size_t len, bool *repeat_p);

//  How many bytes of that stream have arrived in a row from its start.
uint64_t jobrec_output_arrived (store_txn_t *txn, const char *job_id,
                               uint32_t step, const char *node,
                               uint32_t attempt, bool stderr_);

//  Up to LEN bytes of that stream from OFFSET, as far as they arrived
//  in a row, into a new buffer (caller frees); *GOT_P gets how many.
uint8_t *jobrec_read_output (store_txn_t *txn, const char *job_id,
                             uint32_t step, const char *node,
                             uint32_t attempt, bool stderr_, uint64_t offset,
                             size_t len, size_t *got_p);

//  An OFFSET past the end of what a page can serve
#define JOBREC_PAST_END 1

//  Writes one page of a cell's stream as the data of a job.output reply
//  (proto/PROTOCOL.md): {job, node, step, attempt, stream, offset, data,
//  next, size, dropped, complete, status, ?exit_code}. ATTEMPT 0 means
//  the latest finished one; status and exit_code are that attempt's,
//  COMPLETE says whether the step is done on NODE (exit_code only then).
//  DATA holds up to LIMIT bytes from OFFSET: contiguous bytes that have
//  arrived (fewer, or none, when a piece has not arrived yet). Returns 0,
//  STORE_ENOTFOUND (no such job, cell or attempt), JOBREC_PAST_END (OFFSET
//  is past the stream's size), or -2 when a record is malformed.
int jobrec_write_output_page (store_txn_t *txn, const char *job_id,
                              uint32_t step, const char *node,
                              uint32_t attempt, bool stderr_, uint64_t offset,
                              size_t limit, bool complete, pw_t *writer);

//  The same page for ATTEMPT while it runs, from the pieces that have
//  arrived (its size: how many in a row from the start), not complete,
//  its status STATUS ("running"...). Returns 0 or JOBREC_PAST_END (OFFSET
//  past what has arrived).
int jobrec_write_live_page (store_txn_t *txn, const char *job_id,
                            uint32_t step, const char *node, uint32_t attempt,
                            bool stderr_, uint64_t offset, size_t limit,
                            const char *status, pw_t *writer);

//  Deletes a job: header, cells, events, its idempotency record (when it
//  still names this job) and its outputs. Returns 0 or a STORE_ error.
int jobrec_delete (store_txn_t *txn, const char *job_id);

#endif
