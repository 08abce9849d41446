/*  =========================================================================
    dlq - the dead-letter queue: cells that ended failed for good

    A job that asks for it (`dead_letter`, on by default for `any` targets)
    sends every cell that ends failed after its last attempt here: status
    failed, timeout, lost, interrupted or offline (never cancelled, which an
    operator or the job timeout asked for, nor skipped). One entry per
    (job, step, node), in the store's dlq database:

        dlq  job id | 0x00 | step (2 bytes BE) | node  ->  entry record

    Entry record: {job, step, node, backend, action, status, error, output,
    exit_code, attempts, time_ms, ?retry_job}. `error` and `output` are the
    last attempt's, cut to DLQ_TEXT_MAX bytes. `retry_job` names the job
    made to retry it (job.retry or dlq.retry); when that job completes, the
    entries that name it are removed.

    An entry's client id is "<job>/<step>/<node>".

    Threading: reentrant; store transactions follow store.h's rules.
    =========================================================================
*/
#ifndef GRID_DLQ_H
#define GRID_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pv.h"
#include "../proto/pw.h"
#include "../store/store.h"
#include "sched.h"

#define DLQ_TEXT_MAX 4096        //  Longest error / output kept in an entry
#define DLQ_ID_MAX (JOB_ID_LEN + 1 + 5 + 1 + NAME_MAX_LEN)  //  strlen of the longest entry id

//  True for the cell statuses that land in the queue.
bool dlq_status_lands (sched_cell_status_t status);

//  Adds the cell (STEP, NODE) of JOB as it stands now, unless an entry for
//  it exists already. Returns 1 when added, 0 when it was there, or a
//  STORE_ error.
int dlq_add (store_txn_t *txn, const sched_job_t *job, uint32_t step,
             const char *node, int64_t wall_ms, pw_t *scratch);

//  Parses an entry id "<job>/<step>/<node>". Returns 0, or -1 when TEXT
//  is not one. JOB holds JOB_ID_LEN + 1 bytes, NODE NAME_MAX_LEN + 1.
int dlq_id_parse (const char *text, char *job, uint32_t *step, char *node);

//  Reads the entry (JOB, STEP, NODE). Returns 0 and a decoded record in
//  *DOC_P (caller destroys), STORE_ENOTFOUND, or STORE_EINVAL when the
//  record does not decode.
int dlq_get (store_txn_t *txn, const char *job, uint32_t step,
             const char *node, pv_doc_t **doc_p);

//  Writes a decoded entry RECORD in the client shape (PROTOCOL.md,
//  DLQ ENTRY). Returns 0, or -2 when the record is malformed.
int dlq_write_entry (const pv_t *record, pw_t *writer);

//  Writes up to LIMIT entries (of JOB_ID only, when not NULL), oldest job
//  first, as an array into WRITER; *TOTAL_P gets how many there are.
void dlq_write_list (store_txn_t *txn, const char *job_id, size_t limit,
                     pw_t *writer, size_t *total_p);

//  Sets retry_job to RETRY_JOB on every entry of JOB_ID. Returns how many
//  entries it marked, or a STORE_ error.
int dlq_mark_retry (store_txn_t *txn, const char *job_id,
                    const char *retry_job, pw_t *scratch);

//  Removes the entries of JOB_ID whose retry_job is RETRY_JOB (that job
//  completed). Returns how many, or a STORE_ error.
int dlq_clear_retried (store_txn_t *txn, const char *job_id,
                       const char *retry_job);

//  Removes entries: of JOB_ID only when not NULL; only those added at or
//  before BEFORE_WALL_MS when it is > 0. Returns how many, or a STORE_
//  error.
int dlq_purge (store_txn_t *txn, const char *job_id, int64_t before_wall_ms);

//  True when JOB_ID has at least one entry (retention keeps such jobs).
bool dlq_has_job (store_txn_t *txn, const char *job_id);

//  Entries in the queue.
size_t dlq_size (store_txn_t *txn);

#endif
