/*  =========================================================================
    jobrec - store layout of jobs, cells and events (see jobrec.h)
    =========================================================================
*/
#include <assert.h>
#include <inttypes.h>
#include <czmq.h>
#include <stdlib.h>
#include <string.h>

#include "jobrec.h"
#include "jobtrace.h"

void
jobrec_digest (const void *data, size_t size, uint8_t *digest)
{
    zdigest_t *hasher = zdigest_new ();
    assert (hasher);
    assert (zdigest_size (hasher) == JOBREC_DIGEST_LEN);
    zdigest_update (hasher, (const byte *) data, size);
    memcpy (digest, zdigest_data (hasher), JOBREC_DIGEST_LEN);
    zdigest_destroy (&hasher);
}

int
jobrec_idempotency_get (store_txn_t *txn, const char *key, char *job_id,
                        uint8_t *digest)
{
    const void *value;
    size_t value_len;
    int rc = store_get (txn, STORE_DB_IDEMPOTENCY, key, strlen (key), &value,
                        &value_len);
    if (rc != 0)
        return rc;
    if (value_len <= JOBREC_DIGEST_LEN
        || value_len > JOB_ID_LEN + JOBREC_DIGEST_LEN)
        return -2;
    size_t id_len = value_len - JOBREC_DIGEST_LEN;
    memcpy (job_id, value, id_len);
    job_id [id_len] = 0;
    if (!job_id_valid (job_id))
        return -2;
    memcpy (digest, (const uint8_t *) value + id_len, JOBREC_DIGEST_LEN);
    return 0;
}

int
jobrec_idempotency_put (store_txn_t *txn, const char *key, const char *job_id,
                        const uint8_t *digest)
{
    uint8_t value [JOB_ID_LEN + JOBREC_DIGEST_LEN];
    size_t id_len = strlen (job_id);
    assert (id_len > 0 && id_len <= JOB_ID_LEN);
    memcpy (value, job_id, id_len);
    memcpy (value + id_len, digest, JOBREC_DIGEST_LEN);
    return store_put (txn, STORE_DB_IDEMPOTENCY, key, strlen (key), value,
                      id_len + JOBREC_DIGEST_LEN);
}

size_t
jobrec_prefix (const char *job_id, uint8_t *key)
{
    size_t len = strlen (job_id);
    assert (len <= JOB_ID_LEN);
    memcpy (key, job_id, len);
    key [len] = 0;
    return len + 1;
}

size_t
jobrec_cell_key (const char *job_id, uint32_t step, const char *node,
                 uint8_t *key)
{
    size_t len = jobrec_prefix (job_id, key);
    key [len++] = (uint8_t) (step >> 8);
    key [len++] = (uint8_t) step;
    size_t node_len = strlen (node);
    assert (node_len <= NAME_MAX_LEN);
    memcpy (key + len, node, node_len);
    return len + node_len;
}

size_t
jobrec_event_key (const char *job_id, uint32_t seq, uint8_t *key)
{
    size_t len = jobrec_prefix (job_id, key);
    key [len++] = (uint8_t) (seq >> 24);
    key [len++] = (uint8_t) (seq >> 16);
    key [len++] = (uint8_t) (seq >> 8);
    key [len++] = (uint8_t) seq;
    return len;
}

static void
s_str_or_nil (pw_t *writer, const char *text)
{
    if (text)
        pw_str (writer, text);
    else
        pw_nil (writer);
}

int
jobrec_save_header (store_txn_t *txn, const sched_job_t *job, pw_t *scratch)
{
    pw_reset (scratch);
    //  submitted_by is new since 0.1.0, whose broker reads a header by
    //  its keys and passes over the others
    pw_map (scratch, 10 + (job->retry_of ? 1 : 0)
                         + (job->retried_by_count ? 1 : 0)
                         + (job->schedule ? 1 : 0)
                         + (job->submitted_by ? 1 : 0));
    pw_str (scratch, "id");
    pw_str (scratch, job->id);
    if (job->schedule) {
        pw_str (scratch, "schedule");
        pw_str (scratch, job->schedule);
    }
    if (job->submitted_by) {
        pw_str (scratch, "submitted_by");
        pw_str (scratch, job->submitted_by);
    }
    if (job->retry_of) {
        pw_str (scratch, "retry_of");
        pw_str (scratch, job->retry_of);
    }
    if (job->retried_by_count) {
        pw_str (scratch, "retried_by");
        pw_array (scratch, job->retried_by_count);
        for (size_t index = 0; index < job->retried_by_count; index++)
            pw_str (scratch, job->retried_by [index]);
    }
    pw_str (scratch, "spec");
    //  Its webhooks lie apart (notify_jobs), so that the previous
    //  release reads the header
    job_spec_encode_stored (job->spec, scratch);
    pw_str (scratch, "status");
    pw_str (scratch, sched_job_status_name (job->status));
    pw_str (scratch, "step");
    pw_int (scratch, (int64_t) job->step);
    pw_str (scratch, "steps");
    pw_int (scratch, (int64_t) job->step_count);
    pw_str (scratch, "expected");
    pw_array (scratch, job->expected_count);
    for (size_t index = 0; index < job->expected_count; index++)
        pw_str (scratch, job->expected [index]);
    pw_str (scratch, "reason");
    s_str_or_nil (scratch, job->reason);
    pw_str (scratch, "not_run");
    pw_array (scratch, job->not_run_count);
    for (size_t index = 0; index < job->not_run_count; index++) {
        const sched_not_run_t *entry = &job->not_run [index];
        pw_map (scratch, 4);
        pw_str (scratch, "node");
        pw_str (scratch, entry->node);
        pw_str (scratch, "status");
        pw_str (scratch, sched_cell_status_name (entry->status));
        pw_str (scratch, "reason");
        pw_str (scratch, entry->reason ? entry->reason : "");
        pw_str (scratch, "named");
        pw_bool (scratch, entry->named);
    }
    pw_str (scratch, "created_at_ms");
    pw_int (scratch, job->created_at_ms);
    pw_str (scratch, "updated_at_ms");
    pw_int (scratch, job->updated_at_ms);
    int rc = store_put (txn, STORE_DB_JOBS, job->id, strlen (job->id),
                        pw_data (scratch), pw_size (scratch));
    if (rc == 0 && job->spec->notify_count) {
        pw_reset (scratch);
        job_notify_encode (job->spec, scratch);
        rc = store_put (txn, STORE_DB_NOTIFY_JOBS, job->id, strlen (job->id),
                        pw_data (scratch), pw_size (scratch));
    }
    return rc;
}

//  The optional counts of an attempt, by record key
static const char *s_count_keys [] = {
    "output_size", "error_size", "output_dropped", "error_dropped"
};
#define S_COUNT_KEYS 4

static void
s_attempt_counts (const sched_attempt_t *attempt, uint64_t *counts)
{
    counts [0] = attempt->output_size;
    counts [1] = attempt->error_size;
    counts [2] = attempt->output_dropped;
    counts [3] = attempt->error_dropped;
}

static void
s_write_attempt (pw_t *writer, const sched_attempt_t *attempt)
{
    uint64_t counts [S_COUNT_KEYS];
    s_attempt_counts (attempt, counts);
    size_t present = 0;
    for (size_t index = 0; index < S_COUNT_KEYS; index++)
        if (counts [index])
            present++;
    pw_map (writer, 8 + present + (attempt->node ? 1 : 0)
                    + (attempt->late ? 1 : 0) + (attempt->has_late ? 1 : 0));
    if (attempt->has_late) {
        //  Beside the verdict, never in it (older brokers skip the key)
        pw_str (writer, "late_result");
        pw_map (writer, 3);
        pw_str (writer, "status");
        pw_str (writer, sched_cell_status_name (attempt->late_status));
        pw_str (writer, "exit_code");
        pw_int (writer, attempt->late_exit_code);
        pw_str (writer, "at_ms");
        pw_int (writer, attempt->late_at_ms);
    }
    if (attempt->node) {
        pw_str (writer, "node");
        pw_str (writer, attempt->node);
    }
    if (attempt->late) {
        pw_str (writer, "late");
        pw_bool (writer, true);
    }
    for (size_t index = 0; index < S_COUNT_KEYS; index++)
        if (counts [index]) {
            pw_str (writer, s_count_keys [index]);
            pw_int (writer, (int64_t) counts [index]);
        }
    pw_str (writer, "attempt");
    pw_int (writer, attempt->attempt);
    pw_str (writer, "status");
    pw_str (writer, sched_cell_status_name (attempt->status));
    pw_str (writer, "output");
    pw_str (writer, attempt->output ? attempt->output : "");
    pw_str (writer, "error");
    pw_str (writer, attempt->error ? attempt->error : "");
    pw_str (writer, "exit_code");
    pw_int (writer, attempt->exit_code);
    pw_str (writer, "duration_ms");
    pw_int (writer, attempt->duration_ms);
    pw_str (writer, "truncated");
    pw_bool (writer, attempt->truncated);
    pw_str (writer, "data");
    pw_map (writer, attempt->data_count);
    for (size_t item = 0; item < attempt->data_count; item++) {
        pw_str (writer, attempt->data [item].key);
        if (attempt->data [item].number)
            pw_int (writer, strtoll (attempt->data [item].value, NULL, 10));
        else
            pw_str (writer, attempt->data [item].value);
    }
}

//  The stored form of CELL, into SCRATCH (reset first).
static void
s_encode_cell (const sched_cell_t *cell, pw_t *scratch)
{
    pw_reset (scratch);
    pw_map (scratch, 3 + (cell->reason ? 1 : 0) + (cell->waiting ? 1 : 0));
    pw_str (scratch, "status");
    pw_str (scratch, sched_cell_status_name (cell->status));
    if (cell->reason) {
        pw_str (scratch, "reason");
        pw_str (scratch, cell->reason);
    }
    if (cell->waiting) {
        pw_str (scratch, "waiting");
        pw_str (scratch, cell->waiting);
    }
    pw_str (scratch, "attempt");
    pw_int (scratch, cell->attempt);
    pw_str (scratch, "attempts");
    pw_array (scratch, cell->attempt_count);
    for (size_t a = 0; a < cell->attempt_count; a++)
        s_write_attempt (scratch, &cell->attempts [a]);
}

static int
s_put_cell (store_txn_t *txn, const char *job_id, uint32_t step,
            const char *node, const sched_cell_t *cell, pw_t *scratch)
{
    s_encode_cell (cell, scratch);
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_cell_key (job_id, step, node, key);
    return store_put (txn, STORE_DB_RESULTS, key, key_len, pw_data (scratch),
                      pw_size (scratch));
}

int
jobrec_save_cell (store_txn_t *txn, const sched_job_t *job, uint32_t step,
                  const char *node, pw_t *scratch)
{
    ssize_t index = sched_job_node_index (job, node);
    if (index < 0 || step >= job->step_count)
        return STORE_EINVAL;
    return jobrec_save_cell_at (txn, job,
                                step * job->expected_count + (size_t) index,
                                scratch);
}

int
jobrec_save_cell_at (store_txn_t *txn, const sched_job_t *job, size_t cell,
                     pw_t *scratch)
{
    if (!job->cells || job->expected_count == 0
        || cell >= job->step_count * job->expected_count)
        return STORE_EINVAL;
    size_t step = cell / job->expected_count;
    return s_put_cell (txn, job->id, (uint32_t) step,
                       job->expected [cell % job->expected_count],
                       &job->cells [cell], scratch);
}

int
jobrec_forget_cells (store_txn_t *txn, const sched_job_t *job,
                     const char *node)
{
    uint8_t key [JOBREC_MAX_KEY];
    for (size_t step = 0; step < job->step_count; step++) {
        size_t key_len = jobrec_cell_key (job->id, (uint32_t) step, node, key);
        int rc = store_del (txn, STORE_DB_RESULTS, key, key_len);
        if (rc != 0 && rc != STORE_ENOTFOUND)
            return rc;
    }
    return 0;
}

int
jobrec_save_event (store_txn_t *txn, const char *job_id, uint32_t seq,
                   int64_t wall_ms, const char *event, const char *node,
                   int64_t step, const char *detail, pw_t *scratch)
{
    pw_reset (scratch);
    pw_map (scratch, 3 + (node ? 1 : 0) + (step >= 0 ? 1 : 0)
                     + (detail ? 1 : 0));
    pw_str (scratch, "seq");
    pw_int (scratch, seq);
    pw_str (scratch, "time_ms");
    pw_int (scratch, wall_ms);
    pw_str (scratch, "event");
    pw_str (scratch, event);
    if (node) {
        pw_str (scratch, "node");
        pw_str (scratch, node);
    }
    if (step >= 0) {
        pw_str (scratch, "step");
        pw_int (scratch, step);
    }
    if (detail) {
        pw_str (scratch, "detail");
        pw_str (scratch, detail);
    }
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_event_key (job_id, seq, key);
    return store_put (txn, STORE_DB_EVENTS, key, key_len, pw_data (scratch),
                      pw_size (scratch));
}

uint32_t
jobrec_next_event_seq (store_txn_t *txn, const char *job_id)
{
    //  Seek just past the job's last possible event, then step back.
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_event_key (job_id, 0xFFFFFFFFu, key);
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = jobrec_prefix (job_id, prefix);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_EVENTS);
    if (!cursor)
        return 1;
    const void *k, *v;
    size_t k_len, v_len;
    uint32_t next = 1;
    int rc = store_cursor_seek (cursor, key, key_len, &k, &k_len, &v, &v_len);
    if (rc == 0)
        rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
    else
        rc = store_cursor_last (cursor, &k, &k_len, &v, &v_len);
    if (rc == 0 && k_len == prefix_len + 4
        && memcmp (k, prefix, prefix_len) == 0) {
        const uint8_t *seq = (const uint8_t *) k + prefix_len;
        next = ((uint32_t) seq [0] << 24 | (uint32_t) seq [1] << 16
                | (uint32_t) seq [2] << 8 | seq [3]) + 1;
    }
    store_cursor_destroy (&cursor);
    return next;
}

static int
s_get_doc (store_txn_t *txn, store_db_t db, const void *key, size_t key_len,
           pv_doc_t **doc_p)
{
    const void *value;
    size_t value_len;
    int rc = store_get (txn, db, key, key_len, &value, &value_len);
    if (rc != 0)
        return rc;
    if (pv_doc_decode (value, value_len, doc_p, NULL, 0) != 0)
        return -2;
    return 0;
}

//  Copies the spec's fields that the job record shows at top level.
static size_t
s_spec_field_count (const pv_t *spec)
{
    static const char *fields [] = {"target",       "tasks",
                                    "strategy",     "timeout",
                                    "priority",     "idempotency_key",
                                    "lease_ms",     "limits",
                                    "stall_timeout", "batch",
                                    "max_failures", "canary"};
    size_t count = 0;
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++)
        if (pv_map_get (spec, fields [index]))
            count++;
    if (!pv_map_get (spec, "strategy"))
        count++;   //  Shown with its default
    if (!pv_map_get (spec, "priority"))
        count++;
    return count;
}

static void
s_write_spec_fields (const pv_t *spec, pw_t *writer)
{
    static const char *fields [] = {"target",       "tasks",
                                    "strategy",     "timeout",
                                    "priority",     "idempotency_key",
                                    "lease_ms",     "limits",
                                    "stall_timeout", "batch",
                                    "max_failures", "canary"};
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++) {
        const pv_t *value = pv_map_get (spec, fields [index]);
        if (value) {
            pw_str (writer, fields [index]);
            pw_pv (writer, value);
        }
    }
    if (!pv_map_get (spec, "strategy")) {
        pw_str (writer, "strategy");
        pw_str (writer, "fail-fast");
    }
    if (!pv_map_get (spec, "priority")) {
        pw_str (writer, "priority");
        pw_int (writer, 0);
    }
}

bool
jobrec_spec_dead_letter (const pv_t *spec)
{
    bool on = false;
    if (pv_get_bool (pv_map_get (spec, "dead_letter"), &on) == 0)
        return on;
    pv_get_bool (pv_map_get (pv_map_get (spec, "target"), "any"), &on);
    return on;
}

static void
s_write_time_field (pw_t *writer, const char *key, const pv_t *ms)
{
    int64_t wall_ms = 0;
    pw_str (writer, key);
    if (pv_get_int (ms, &wall_ms) == 0 && wall_ms > 0) {
        char text [TIME_TEXT_LEN];
        time_format (wall_ms, text, sizeof text);
        pw_str (writer, text);
    }
    else
        pw_nil (writer);
}

//  How many of the optional counts ATTEMPT holds.
static size_t
s_count_fields (const pv_t *attempt)
{
    size_t count = 0;
    for (size_t index = 0; index < S_COUNT_KEYS; index++)
        if (pv_map_get (attempt, s_count_keys [index]))
            count++;
    return count;
}

//  Writes the 6 result fields of ATTEMPT (defaults when NULL or absent),
//  then the optional counts it holds. An empty error reads WHY when given
//  (a skipped cell's reason: it never ran, so it has no error of its own).
//  NO_EXIT: the broker decided the outcome (lost), so the exit code reads
//  -1 whatever a late result brought, as for every status but a run's.
static void
s_write_attempt_fields (pw_t *writer, const pv_t *attempt, const pv_t *why,
                        bool no_exit)
{
    for (size_t index = 0; index < S_COUNT_KEYS; index++) {
        const pv_t *value = pv_map_get (attempt, s_count_keys [index]);
        if (value) {
            pw_str (writer, s_count_keys [index]);
            pw_pv (writer, value);
        }
    }
    static const char *fields [] = {"output", "error", "exit_code",
                                    "duration_ms", "truncated", "data"};
    for (size_t index = 0; index < 6; index++) {
        pw_str (writer, fields [index]);
        const pv_t *value = pv_map_get (attempt, fields [index]);
        if (index == 1 && why && !pv_size (value))
            pw_pv (writer, why);
        else
        if (index == 2 && no_exit)
            pw_int (writer, -1);
        else
        if (value)
            pw_pv (writer, value);
        else if (index < 2)
            pw_str (writer, "");
        else if (index < 4)
            pw_int (writer, index == 2 ? -1 : 0);
        else if (index == 4)
            pw_bool (writer, false);
        else
            pw_map (writer, 0);
    }
}

//  Where a stored cell lives, to read its streams' stored bytes
typedef struct {
    store_txn_t *txn;       //  The read transaction
    const char *job_id;     //  Its job
    uint32_t step;          //  Its step
    const char *node;       //  Its node
} s_cell_at_t;

static size_t s_output_prefix (const char *job_id, uint32_t step,
                               const char *node, uint32_t attempt,
                               bool stderr_, uint8_t *key);
static uint8_t *s_read_pieces (store_txn_t *txn, const uint8_t *prefix,
                               size_t prefix_len, uint64_t offset,
                               size_t limit, size_t *len_p);

//  True when ATTEMPT's stream (stdout, or stderr with STDERR_) went in
//  pieces and its head is not its first bytes: the agent put '?' for
//  bytes that are not UTF-8 text (or NUL), so the stream is binary. Only
//  a head with a '?' costs a read of the stored pieces.
static bool
s_stream_binary (const s_cell_at_t *at, const pv_t *attempt, bool stderr_)
{
    int64_t size = 0, number = 0;
    size_t head_len = 0;
    const char *head = pv_str (pv_map_get (attempt, stderr_ ? "error"
                                                            : "output"),
                               &head_len);
    //  A head without '?' is the stream's own bytes: no read needed
    if (!at || !head || !memchr (head, '?', head_len)
        || pv_get_int (pv_map_get (attempt, stderr_ ? "error_size"
                                                    : "output_size"),
                       &size) != 0
        || size <= 0
        || pv_get_int (pv_map_get (attempt, "attempt"), &number) != 0
        || number < 1 || number > UINT16_MAX)
        return false;
    size_t want = (uint64_t) size < head_len ? (size_t) size : head_len;
    uint8_t prefix [JOBREC_MAX_OUTPUT_KEY];
    size_t prefix_len = s_output_prefix (at->job_id, at->step, at->node,
                                         (uint32_t) number, stderr_, prefix);
    size_t len = 0;
    uint8_t *bytes = s_read_pieces (at->txn, prefix, prefix_len, 0, want,
                                    &len);
    //  Pieces not all stored yet say nothing either way
    bool binary = len == want && memcmp (bytes, head, want) != 0;
    free (bytes);
    return binary;
}

//  One cell in the client shape: the outcome's fields (the latest attempt
//  that is not a late result from a node the step was taken from), the
//  count, every other attempt as history, and why it waits, if it does.
//  AT (NULL for a cell of the scheduler's memory) lets it say that a
//  stream is binary (output_binary, error_binary).
static void
s_write_cell (pw_t *writer, const pv_t *cell, const s_cell_at_t *at)
{
    const pv_t *attempts = pv_map_get (cell, "attempts");
    const pv_t *waiting = pv_map_get (cell, "waiting");
    size_t count = pv_size (attempts);
    size_t main = count ? count - 1 : 0;
    bool moved = false;
    for (size_t index = 0; index < count; index++)
        if (pv_map_get (pv_array_at (attempts, index), "node"))
            moved = true;
    for (size_t index = count; index > 0; index--) {
        bool late = false;
        pv_get_bool (pv_map_get (pv_array_at (attempts, index - 1), "late"),
                     &late);
        if (!late) {
            main = index - 1;
            break;
        }
    }
    const pv_t *last = count ? pv_array_at (attempts, main) : NULL;
    bool has_waiting = pv_type (waiting) == PV_STR;
    const pv_t *reason = pv_map_get (cell, "reason");
    bool has_reason = pv_type (reason) == PV_STR;
    const pv_t *late = pv_type (pv_map_get (last, "late_result")) == PV_MAP
                           ? pv_map_get (last, "late_result")
                           : NULL;
    bool output_binary = s_stream_binary (at, last, false);
    bool error_binary = s_stream_binary (at, last, true);
    pw_map (writer, 8 + (count > 1 ? 1 : 0) + (has_reason ? 1 : 0)
                        + (has_waiting ? 1 : 0) + s_count_fields (last)
                        + (late ? 1 : 0)
                        + (output_binary ? 1 : 0) + (error_binary ? 1 : 0));
    if (output_binary) {
        pw_str (writer, "output_binary");
        pw_bool (writer, true);
    }
    if (error_binary) {
        pw_str (writer, "error_binary");
        pw_bool (writer, true);
    }
    pw_str (writer, "status");
    pw_pv (writer, pv_map_get (cell, "status"));
    if (has_reason) {
        pw_str (writer, "reason");
        pw_pv (writer, reason);
    }
    const pv_t *status = pv_map_get (cell, "status");
    s_write_attempt_fields (writer, last,
                            has_reason && pv_str_eq (status, "skipped")
                                ? reason : NULL,
                            pv_str_eq (status, "lost"));
    if (late) {
        //  The agent's result that came after the verdict, beside it
        pw_str (writer, "late");
        pw_map (writer, 3);
        pw_str (writer, "status");
        pw_pv (writer, pv_map_get (late, "status"));
        pw_str (writer, "exit_code");
        pw_pv (writer, pv_map_get (late, "exit_code"));
        s_write_time_field (writer, "at", pv_map_get (late, "at_ms"));
    }
    pw_str (writer, "attempts");
    int64_t attempt = 0;
    pv_get_int (pv_map_get (cell, "attempt"), &attempt);
    //  Any-node cells count attempts by number: a step taken back before
    //  it started, or a late result, is an entry but not an attempt
    pw_int (writer, moved || attempt > (int64_t) count ? attempt
                                                        : (int64_t) count);
    if (count > 1) {
        pw_str (writer, "history");
        pw_array (writer, count - 1);
        for (size_t index = 0; index < count; index++)
            if (index != main)
                pw_pv (writer, pv_array_at (attempts, index));
    }
    if (has_waiting) {
        pw_str (writer, "waiting");
        pw_pv (writer, waiting);
    }
}

static void
s_write_pending_cell (pw_t *writer)
{
    pw_map (writer, 8);
    pw_str (writer, "status");
    pw_str (writer, "pending");
    s_write_attempt_fields (writer, NULL, NULL, false);
    pw_str (writer, "attempts");
    pw_int (writer, 0);
}

//  The cell of LIVE at STEP and NODE when the scheduler has it in a
//  status it did not store (a broadcast's dispatch, R16), else NULL.
static const sched_cell_t *
s_live_cell (const sched_job_t *live, int64_t step, const char *node,
             size_t node_len)
{
    if (!live || !live->cells || !node || node_len > NAME_MAX_LEN
        || step < 0 || (size_t) step >= live->step_count)
        return NULL;
    char name [NAME_MAX_LEN + 1];
    memcpy (name, node, node_len);
    name [node_len] = 0;
    ssize_t index = sched_job_node_index (live, name);
    if (index < 0)
        return NULL;
    const sched_cell_t *cell
        = &live->cells [(size_t) step * live->expected_count + (size_t) index];
    return cell->status == SCHED_CELL_PENDING ? NULL : cell;
}

//  Writes CELL of the scheduler as a stored cell reads.
static void
s_write_live_cell (pw_t *writer, const sched_cell_t *cell)
{
    pw_t *scratch = pw_new ();
    pv_doc_t *doc = NULL;
    s_encode_cell (cell, scratch);
    if (pv_doc_decode (pw_data (scratch), pw_size (scratch), &doc, NULL, 0)
        == 0)
        s_write_cell (writer, pv_doc_root (doc), NULL);
    else
        s_write_pending_cell (writer);
    pv_doc_destroy (&doc);
    pw_destroy (&scratch);
}

//  The text form of SPEC's target ("group:web"), or NULL. Caller frees.
static char *
s_target_text (const pv_t *spec)
{
    const pv_t *target = pv_map_get (spec, "target");
    char *scope = pv_strdup (pv_map_get (target, "scope"));
    char *value = pv_strdup (pv_map_get (target, "value"));
    bool any = false;
    pv_get_bool (pv_map_get (target, "any"), &any);
    target_t parsed;
    memset (&parsed, 0, sizeof parsed);
    char *text = NULL;
    if (scope
        && target_from_parts (scope, value, any, &parsed, NULL, 0) == 0)
        text = target_format (&parsed);
    target_clear (&parsed);
    free (scope);
    free (value);
    return text;
}

int
jobrec_write_record (store_txn_t *txn, const char *job_id,
                     const sched_job_t *live, const char *traceparent,
                     bool trace_made, pw_t *writer)
{
    pv_doc_t *doc = NULL;
    int rc = s_get_doc (txn, STORE_DB_JOBS, job_id, strlen (job_id), &doc);
    if (rc != 0)
        return rc;
    const pv_t *header = pv_doc_root (doc);
    const pv_t *spec = pv_map_get (header, "spec");
    const pv_t *expected = pv_map_get (header, "expected");
    int64_t steps = 0;
    if (pv_type (spec) != PV_MAP || pv_type (expected) != PV_ARRAY
        || pv_get_int (pv_map_get (header, "steps"), &steps) != 0
        || steps < 0 || steps > JOB_MAX_STEPS) {
        pv_doc_destroy (&doc);
        return -2;
    }
    const pv_t *reason = pv_map_get (header, "reason");
    bool has_reason = pv_type (reason) == PV_STR;
    const pv_t *retry_of = pv_map_get (header, "retry_of");
    const pv_t *retried_by = pv_map_get (header, "retried_by");
    bool has_retry_of = pv_type (retry_of) == PV_STR;
    bool has_retried_by = pv_type (retried_by) == PV_ARRAY;
    const pv_t *schedule = pv_map_get (header, "schedule");
    bool has_schedule = pv_type (schedule) == PV_STR;
    const pv_t *submitted_by = pv_map_get (header, "submitted_by");
    bool has_submitted_by = pv_type (submitted_by) == PV_STR;
    bool check = false;
    pv_get_bool (pv_map_get (spec, "check"), &check);
    //  not_run lists the members a group, label or all did not run; the
    //  nodes a list names have their rows in results instead
    const pv_t *not_run = pv_map_get (header, "not_run");
    size_t members = 0;
    for (size_t index = 0; index < pv_size (not_run); index++) {
        bool named = false;
        pv_get_bool (pv_map_get (pv_array_at (not_run, index), "named"),
                     &named);
        if (!named)
            members++;
    }
    char *target_text = s_target_text (spec);
    pw_map (writer, 11 + s_spec_field_count (spec) + (has_reason ? 1 : 0)
                        + (has_retry_of ? 1 : 0) + (has_retried_by ? 1 : 0)
                        + (members ? 1 : 0) + (has_schedule ? 1 : 0)
                        + (has_submitted_by ? 1 : 0) + (live ? 1 : 0)
                        + (traceparent ? 1 : 0) + (check ? 1 : 0));
    pw_str (writer, "id");
    pw_str (writer, job_id);
    pw_str (writer, "target_text");
    pw_str (writer, target_text ? target_text : "?");
    free (target_text);
    pw_str (writer, "nodes");
    pw_int (writer, (int64_t) pv_size (expected));
    if (live) {
        //  What job.progress says of it: the batch, the running tasks
        pw_str (writer, "progress");
        jobrec_write_progress (live, writer);
    }
    if (has_schedule) {
        pw_str (writer, "schedule");
        pw_pv (writer, schedule);
    }
    if (has_submitted_by) {
        pw_str (writer, "submitted_by");
        pw_pv (writer, submitted_by);
    }
    if (check) {
        pw_str (writer, "check");
        pw_bool (writer, true);
    }
    if (traceparent) {
        pw_str (writer, "trace");
        jobtrace_write (job_id, traceparent, trace_made, writer);
    }
    s_write_spec_fields (spec, writer);
    pw_str (writer, "dead_letter");
    pw_bool (writer, jobrec_spec_dead_letter (spec));
    if (has_retry_of) {
        pw_str (writer, "retry_of");
        pw_pv (writer, retry_of);
    }
    if (has_retried_by) {
        pw_str (writer, "retried_by");
        pw_pv (writer, retried_by);
    }
    pw_str (writer, "status");
    pw_pv (writer, pv_map_get (header, "status"));
    pw_str (writer, "step");
    pw_pv (writer, pv_map_get (header, "step"));
    pw_str (writer, "steps");
    pw_int (writer, steps);
    pw_str (writer, "expected");
    pw_pv (writer, expected);
    if (has_reason) {
        pw_str (writer, "reason");
        pw_pv (writer, reason);
    }
    if (members) {
        pw_str (writer, "not_run");
        pw_array (writer, members);
        for (size_t index = 0; index < pv_size (not_run); index++) {
            const pv_t *entry = pv_array_at (not_run, index);
            bool named = false;
            pv_get_bool (pv_map_get (entry, "named"), &named);
            if (named)
                continue;
            pw_map (writer, 3);
            pw_str (writer, "node");
            pw_pv (writer, pv_map_get (entry, "node"));
            pw_str (writer, "status");
            pw_pv (writer, pv_map_get (entry, "status"));
            pw_str (writer, "reason");
            pw_pv (writer, pv_map_get (entry, "reason"));
        }
    }
    //  results: step -> node -> cell, for every expected node; cells not
    //  yet written read pending.
    size_t node_count = pv_size (expected);
    pw_str (writer, "results");
    pw_map (writer, node_count ? (size_t) steps : 0);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_RESULTS);
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = jobrec_prefix (job_id, prefix);
    const void *k = NULL, *v = NULL;
    size_t k_len = 0, v_len = 0;
    int crc = cursor ? store_cursor_seek (cursor, prefix, prefix_len, &k,
                                          &k_len, &v, &v_len)
                     : STORE_EIO;
    for (int64_t step = 0; node_count && step < steps; step++) {
        char step_text [16];
        snprintf (step_text, sizeof step_text, "%d", (int) step);
        pw_str (writer, step_text);
        pw_map (writer, node_count);
        //  Cells of one step sort by node id, as does expected.
        for (size_t n = 0; n < node_count; n++) {
            const pv_t *node = pv_array_at (expected, n);
            size_t node_len = 0;
            const char *node_id = pv_str (node, &node_len);
            pw_pv (writer, node);
            bool written = false;
            while (crc == 0 && k_len > prefix_len + 2
                   && memcmp (k, prefix, prefix_len) == 0) {
                const uint8_t *kb = (const uint8_t *) k;
                int64_t key_step = (int64_t) kb [prefix_len] << 8
                                   | kb [prefix_len + 1];
                const char *key_node = (const char *) kb + prefix_len + 2;
                size_t key_node_len = k_len - prefix_len - 2;
                int cmp = key_step < step ? -1 : key_step > step ? 1 : 0;
                if (cmp == 0 && node_id) {
                    size_t min = key_node_len < node_len ? key_node_len
                                                         : node_len;
                    cmp = memcmp (key_node, node_id, min);
                    if (cmp == 0)
                        cmp = key_node_len < node_len ? -1
                              : key_node_len > node_len ? 1 : 0;
                }
                if (cmp > 0)
                    break;
                if (cmp == 0) {
                    pv_doc_t *cell = NULL;
                    char node_name [NAME_MAX_LEN + 1];
                    snprintf (node_name, sizeof node_name, "%.*s",
                              (int) node_len, node_id ? node_id : "");
                    s_cell_at_t at = {txn, job_id, (uint32_t) step,
                                      node_name};
                    if (pv_doc_decode (v, v_len, &cell, NULL, 0) == 0) {
                        s_write_cell (writer, pv_doc_root (cell), &at);
                        written = true;
                    }
                    pv_doc_destroy (&cell);
                }
                crc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
                if (cmp == 0)
                    break;
            }
            const sched_cell_t *live_cell
                = written ? NULL : s_live_cell (live, step, node_id, node_len);
            if (live_cell)
                s_write_live_cell (writer, live_cell);
            else
            if (!written)
                s_write_pending_cell (writer);
        }
    }
    store_cursor_destroy (&cursor);
    s_write_time_field (writer, "created_at", pv_map_get (header, "created_at_ms"));
    s_write_time_field (writer, "updated_at", pv_map_get (header, "updated_at_ms"));
    pv_doc_destroy (&doc);
    return 0;
}

//  What a stored SPEC runs, in a few words: its first task's
//  "backend.action", and "+N" for the N tasks after it ("apt.install +2").
static void
s_runs_text (const pv_t *spec, char *text, size_t size)
{
    const pv_t *tasks = pv_map_get (spec, "tasks");
    const pv_t *first = NULL;
    size_t leaves = 0;
    for (size_t index = 0; index < pv_size (tasks); index++) {
        const pv_t *task = pv_array_at (tasks, index);
        const pv_t *inner = pv_map_get (task, "tasks");
        size_t count = inner ? pv_size (inner) : 1;
        if (!first && count)
            first = inner ? pv_array_at (inner, 0) : task;
        leaves += count;
    }
    size_t backend_len = 0, action_len = 0;
    const char *backend = pv_str (pv_map_get (first, "backend"), &backend_len);
    const char *action = pv_str (pv_map_get (first, "action"), &action_len);
    if (!backend || !action) {
        snprintf (text, size, "?");
        return;
    }
    int wrote = snprintf (text, size, "%.*s.%.*s", (int) backend_len, backend,
                          (int) action_len, action);
    if (leaves > 1 && wrote > 0 && (size_t) wrote < size)
        snprintf (text + wrote, size - (size_t) wrote, " +%zu", leaves - 1);
}

int
jobrec_write_summary (const pv_t *header, pw_t *writer)
{
    char *text = s_target_text (pv_map_get (header, "spec"));
    const pv_t *schedule = pv_map_get (header, "schedule");
    bool has_schedule = pv_type (schedule) == PV_STR;
    const pv_t *submitted_by = pv_map_get (header, "submitted_by");
    bool has_submitted_by = pv_type (submitted_by) == PV_STR;
    size_t nodes = pv_size (pv_map_get (header, "expected"));
    //  target and expected keep their first shapes (a text, a count) for
    //  the clients that read them; target_text and nodes are the names
    //  every reply shares (PROTOCOL.md, one shape per fact)
    char runs [NAME_MAX_LEN * 2 + 24];
    s_runs_text (pv_map_get (header, "spec"), runs, sizeof runs);
    pw_map (writer, 11 + (has_schedule ? 1 : 0) + (has_submitted_by ? 1 : 0));
    pw_str (writer, "id");
    pw_pv (writer, pv_map_get (header, "id"));
    pw_str (writer, "runs");
    pw_str (writer, runs);
    if (has_schedule) {
        pw_str (writer, "schedule");
        pw_pv (writer, schedule);
    }
    if (has_submitted_by) {
        pw_str (writer, "submitted_by");
        pw_pv (writer, submitted_by);
    }
    pw_str (writer, "target");
    pw_str (writer, text ? text : "?");
    pw_str (writer, "target_text");
    pw_str (writer, text ? text : "?");
    free (text);
    pw_str (writer, "status");
    pw_pv (writer, pv_map_get (header, "status"));
    pw_str (writer, "step");
    pw_pv (writer, pv_map_get (header, "step"));
    pw_str (writer, "steps");
    pw_pv (writer, pv_map_get (header, "steps"));
    pw_str (writer, "expected");
    pw_int (writer, (int64_t) nodes);
    pw_str (writer, "nodes");
    pw_int (writer, (int64_t) nodes);
    s_write_time_field (writer, "created_at", pv_map_get (header, "created_at_ms"));
    s_write_time_field (writer, "updated_at", pv_map_get (header, "updated_at_ms"));
    return 0;
}

int
jobrec_write_events (store_txn_t *txn, const char *job_id, uint32_t after,
                     size_t limit, pw_t *writer)
{
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = jobrec_prefix (job_id, prefix);
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_event_key (job_id, after + 1, key);
    //  Two passes: count, then write (msgpack needs the count first).
    size_t count = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            pw_array (writer, count);
        size_t seen = 0;
        store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_EVENTS);
        const void *k, *v;
        size_t k_len, v_len;
        int rc = cursor ? store_cursor_seek (cursor, key, key_len, &k, &k_len,
                                             &v, &v_len)
                        : STORE_EIO;
        while (rc == 0 && seen < limit && k_len == prefix_len + 4
               && memcmp (k, prefix, prefix_len) == 0) {
            pv_doc_t *doc = NULL;
            if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0) {
                if (pass == 1) {
                    //  Optional fields are left out, never nil (records
                    //  of older brokers hold nils)
                    const pv_t *event = pv_doc_root (doc);
                    static const char *optional [] = {"node", "step",
                                                      "detail"};
                    size_t fields = 3;
                    for (size_t at = 0; at < 3; at++) {
                        const pv_t *value = pv_map_get (event, optional [at]);
                        if (value && pv_type (value) != PV_NIL)
                            fields++;
                    }
                    pw_map (writer, fields);
                    pw_str (writer, "seq");
                    pw_pv (writer, pv_map_get (event, "seq"));
                    s_write_time_field (writer, "time",
                                        pv_map_get (event, "time_ms"));
                    pw_str (writer, "event");
                    pw_pv (writer, pv_map_get (event, "event"));
                    for (size_t at = 0; at < 3; at++) {
                        const pv_t *value = pv_map_get (event, optional [at]);
                        if (value && pv_type (value) != PV_NIL) {
                            pw_str (writer, optional [at]);
                            pw_pv (writer, value);
                        }
                    }
                }
                seen++;
            }
            pv_doc_destroy (&doc);
            rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
        }
        store_cursor_destroy (&cursor);
        count = seen;
    }
    return 0;
}

int
jobrec_header_status (const pv_t *header)
{
    char *name = pv_strdup (pv_map_get (header, "status"));
    sched_job_status_t status;
    int rc = name ? sched_job_status_parse (name, &status) : -1;
    free (name);
    return rc == 0 ? (int) status : -1;
}

//  Fills one cell of a rebuilt job from its record.
static int
s_load_cell (sched_cell_t *cell, const pv_t *record)
{
    char *name = pv_strdup (pv_map_get (record, "status"));
    int rc = name ? sched_cell_status_parse (name, &cell->status) : -1;
    free (name);
    int64_t attempt = 0;
    if (rc != 0 || pv_get_int (pv_map_get (record, "attempt"), &attempt) != 0
        || attempt < 0 || attempt > 1000)
        return -2;
    cell->attempt = (uint32_t) attempt;
    cell->reason = pv_strdup (pv_map_get (record, "reason"));
    const pv_t *attempts = pv_map_get (record, "attempts");
    size_t count = pv_size (attempts);
    if (pv_type (attempts) != PV_ARRAY || count > 1001)
        return -2;
    if (count) {
        cell->attempts = (sched_attempt_t *) calloc (count, sizeof (sched_attempt_t));
        assert (cell->attempts);
    }
    for (size_t index = 0; index < count; index++) {
        const pv_t *item = pv_array_at (attempts, index);
        sched_attempt_t *slot = &cell->attempts [index];
        int64_t number = 0, exit_code = -1, duration_ms = 0;
        char *status = pv_strdup (pv_map_get (item, "status"));
        int status_rc = status ? sched_cell_status_parse (status, &slot->status) : -1;
        free (status);
        pv_get_int (pv_map_get (item, "attempt"), &number);
        pv_get_int (pv_map_get (item, "exit_code"), &exit_code);
        pv_get_int (pv_map_get (item, "duration_ms"), &duration_ms);
        pv_get_bool (pv_map_get (item, "truncated"), &slot->truncated);
        uint64_t *counts [S_COUNT_KEYS] = {
            &slot->output_size, &slot->error_size, &slot->output_dropped,
            &slot->error_dropped
        };
        for (size_t key = 0; key < S_COUNT_KEYS; key++) {
            int64_t value = 0;
            pv_get_int (pv_map_get (item, s_count_keys [key]), &value);
            *counts [key] = value > 0 ? (uint64_t) value : 0;
        }
        slot->attempt = (uint32_t) number;
        slot->exit_code = (int32_t) exit_code;
        slot->duration_ms = duration_ms;
        slot->output = pv_strdup (pv_map_get (item, "output"));
        slot->error = pv_strdup (pv_map_get (item, "error"));
        slot->node = pv_strdup (pv_map_get (item, "node"));
        pv_get_bool (pv_map_get (item, "late"), &slot->late);
        const pv_t *late = pv_map_get (item, "late_result");
        char *late_status = pv_type (late) == PV_MAP
                                ? pv_strdup (pv_map_get (late, "status"))
                                : NULL;
        if (late_status
            && sched_cell_status_parse (late_status, &slot->late_status) == 0) {
            int64_t value = -1;
            pv_get_int (pv_map_get (late, "exit_code"), &value);
            slot->late_exit_code = (int32_t) value;
            value = 0;
            pv_get_int (pv_map_get (late, "at_ms"), &value);
            slot->late_at_ms = value;
            slot->has_late = true;
        }
        free (late_status);
        const pv_t *data = pv_map_get (item, "data");
        size_t data_count = pv_type (data) == PV_MAP ? pv_size (data) : 0;
        if (data_count) {
            slot->data = (proto_kv_t *) calloc (data_count, sizeof (proto_kv_t));
            assert (slot->data);
            for (size_t entry = 0; entry < data_count; entry++) {
                const pv_t *value = pv_map_value_at (data, entry);
                int64_t whole = 0;
                slot->data [entry].key = pv_strdup (pv_map_key_at (data, entry));
                if (pv_type (value) == PV_INT
                    && pv_get_int (value, &whole) == 0) {
                    //  A whole number an agent sent as one (typed_data)
                    if (asprintf (&slot->data [entry].value, "%" PRId64,
                                  whole) < 0)
                        slot->data [entry].value = NULL;
                    slot->data [entry].number = true;
                }
                else
                    slot->data [entry].value = pv_strdup (value);
                slot->data_count = entry + 1;
                if (!slot->data [entry].key || !slot->data [entry].value)
                    status_rc = -1;
            }
        }
        cell->attempt_count = index + 1;
        if (status_rc != 0)
            return -2;
    }
    return 0;
}

//  The not-run list of a header (absent in records of older brokers):
//  sorted by node, as the scheduler keeps it. Returns 0 or -2.
static int
s_load_not_run (sched_job_t *job, const pv_t *list)
{
    size_t count = pv_size (list);
    if (!list || count == 0)
        return 0;
    if (pv_type (list) != PV_ARRAY || count > (1u << 20))
        return -2;
    job->not_run = (sched_not_run_t *) calloc (count, sizeof (sched_not_run_t));
    assert (job->not_run);
    for (size_t index = 0; index < count; index++) {
        const pv_t *item = pv_array_at (list, index);
        sched_not_run_t *entry = &job->not_run [index];
        job->not_run_count = index + 1;
        entry->node = pv_strdup (pv_map_get (item, "node"));
        entry->reason = pv_strdup (pv_map_get (item, "reason"));
        pv_get_bool (pv_map_get (item, "named"), &entry->named);
        char *status = pv_strdup (pv_map_get (item, "status"));
        int rc = status ? sched_cell_status_parse (status, &entry->status) : -1;
        free (status);
        if (rc != 0 || !entry->node || !name_valid (entry->node)
            || (index > 0 && strcmp (job->not_run [index - 1].node,
                                     entry->node) >= 0))
            return -2;
    }
    return 0;
}

int
jobrec_load (store_txn_t *txn, const char *job_id, sched_job_t **job_p)
{
    *job_p = NULL;
    pv_doc_t *doc = NULL;
    int rc = s_get_doc (txn, STORE_DB_JOBS, job_id, strlen (job_id), &doc);
    if (rc != 0)
        return rc;
    const pv_t *header = pv_doc_root (doc);
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    if (job_spec_decode_stored (pv_map_get (header, "spec"), &spec, &errors)
        != 0) {
        job_errors_clear (&errors);
        pv_doc_destroy (&doc);
        return -2;
    }
    pv_doc_t *hooks = NULL;
    if (s_get_doc (txn, STORE_DB_NOTIFY_JOBS, job_id, strlen (job_id), &hooks)
        == 0)
        job_notify_decode (pv_doc_root (hooks), spec);
    pv_doc_destroy (&hooks);
    sched_job_t *job = sched_job_new (job_id, &spec);
    job_spec_destroy (&spec);
    int status = jobrec_header_status (header);
    const pv_t *expected = pv_map_get (header, "expected");
    int64_t step = 0, created = 0, updated = 0;
    pv_get_int (pv_map_get (header, "step"), &step);
    pv_get_int (pv_map_get (header, "created_at_ms"), &created);
    pv_get_int (pv_map_get (header, "updated_at_ms"), &updated);
    if (!job || status < 0 || pv_type (expected) != PV_ARRAY) {
        sched_job_destroy (&job);
        pv_doc_destroy (&doc);
        return -2;
    }
    job->status = (sched_job_status_t) status;
    //  A finished job's step is its step count (R15)
    job->step = step >= 0 && (size_t) step <= job->step_count ? (size_t) step
                                                              : 0;
    job->created_at_ms = created;
    job->updated_at_ms = updated;
    job->reason = pv_strdup (pv_map_get (header, "reason"));
    job->schedule = pv_strdup (pv_map_get (header, "schedule"));
    job->submitted_by = pv_strdup (pv_map_get (header, "submitted_by"));
    //  A job of an earlier release has none: it stays untraced
    if (jobtrace_get (txn, job_id, job->traceparent, &job->trace_made) == 0)
        jobtrace_remember (job_id, job->traceparent);
    rc = 0;
    const pv_t *retry_of = pv_map_get (header, "retry_of");
    if (retry_of) {
        job->retry_of = pv_strdup (retry_of);
        if (!job->retry_of || !job_id_valid (job->retry_of))
            rc = -2;
    }
    const pv_t *retried_by = pv_map_get (header, "retried_by");
    size_t retries = pv_size (retried_by);
    if (retried_by && pv_type (retried_by) != PV_ARRAY)
        rc = -2;
    else
    if (retries) {
        job->retried_by = (char **) calloc (retries, sizeof (char *));
        assert (job->retried_by);
        for (size_t index = 0; index < retries && rc == 0; index++) {
            job->retried_by [index] = pv_strdup (pv_array_at (retried_by, index));
            job->retried_by_count = index + 1;
            if (!job->retried_by [index]
                || !job_id_valid (job->retried_by [index]))
                rc = -2;
        }
    }
    if (rc == 0)
        rc = s_load_not_run (job, pv_map_get (header, "not_run"));
    size_t node_count = pv_size (expected);
    if (node_count) {
        job->expected = (char **) calloc (node_count, sizeof (char *));
        assert (job->expected);
        for (size_t n = 0; n < node_count && rc == 0; n++) {
            job->expected [n] = pv_strdup (pv_array_at (expected, n));
            job->expected_count = n + 1;
            if (!job->expected [n] || !name_valid (job->expected [n])
                || (n > 0 && strcmp (job->expected [n - 1], job->expected [n]) >= 0))
                rc = -2;
        }
        if (rc == 0) {
            job->cells = (sched_cell_t *) calloc (job->step_count * node_count,
                                                  sizeof (sched_cell_t));
            assert (job->cells);
        }
    }
    pv_doc_destroy (&doc);
    //  Cells that were never written stay pending, with stored false: the
    //  scheduler's restore tells a broadcast's unsaved dispatch by it (R16).
    store_cursor_t *cursor = rc == 0 ? store_cursor_new (txn, STORE_DB_RESULTS)
                                     : NULL;
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = jobrec_prefix (job_id, prefix);
    const void *k, *v;
    size_t k_len, v_len;
    int crc = cursor ? store_cursor_seek (cursor, prefix, prefix_len, &k,
                                          &k_len, &v, &v_len)
                     : STORE_ENOTFOUND;
    while (rc == 0 && crc == 0 && k_len > prefix_len + 2
           && memcmp (k, prefix, prefix_len) == 0) {
        const uint8_t *kb = (const uint8_t *) k;
        size_t cell_step = (size_t) kb [prefix_len] << 8 | kb [prefix_len + 1];
        char node [NAME_MAX_LEN + 1];
        size_t node_len = k_len - prefix_len - 2;
        if (node_len > NAME_MAX_LEN || cell_step >= job->step_count) {
            rc = -2;
            break;
        }
        memcpy (node, kb + prefix_len + 2, node_len);
        node [node_len] = 0;
        ssize_t index = sched_job_node_index (job, node);
        if (index >= 0) {
            pv_doc_t *cell = NULL;
            sched_cell_t *slot
                = &job->cells [cell_step * node_count + (size_t) index];
            if (pv_doc_decode (v, v_len, &cell, NULL, 0) != 0
                || s_load_cell (slot, pv_doc_root (cell)) != 0)
                rc = -2;
            slot->stored = true;
            pv_doc_destroy (&cell);
        }
        crc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    if (rc != 0) {
        sched_job_destroy (&job);
        return rc;
    }
    *job_p = job;
    return 0;
}

//  ---------------------------------------------------------------------
//  Outputs

//  Key of the output stream of a cell's attempt, up to the offset;
//  returns its length.
static size_t
s_output_prefix (const char *job_id, uint32_t step, const char *node,
                 uint32_t attempt, bool stderr_, uint8_t *key)
{
    size_t len = jobrec_cell_key (job_id, step, node, key);
    key [len++] = 0;
    key [len++] = (uint8_t) (attempt >> 8);
    key [len++] = (uint8_t) attempt;
    key [len++] = stderr_ ? 'e' : 'o';
    return len;
}

static size_t
s_put_offset (uint8_t *key, size_t len, uint64_t offset)
{
    key [len++] = (uint8_t) (offset >> 24);
    key [len++] = (uint8_t) (offset >> 16);
    key [len++] = (uint8_t) (offset >> 8);
    key [len++] = (uint8_t) offset;
    return len;
}

int
jobrec_save_output (store_txn_t *txn, const char *job_id, uint32_t step,
                    const char *node, uint32_t attempt, bool stderr_,
                    uint64_t offset, const void *data, size_t len)
{
    if (offset > UINT32_MAX || len == 0)
        return STORE_EINVAL;
    uint8_t key [JOBREC_MAX_OUTPUT_KEY];
    size_t key_len = s_output_prefix (job_id, step, node, attempt, stderr_,
                                      key);
    key_len = s_put_offset (key, key_len, offset);
    return store_put (txn, STORE_DB_OUTPUTS, key, key_len, data, len);
}

bool
jobrec_expects (store_txn_t *txn, const char *job_id, uint32_t step,
                const char *node)
{
    pv_doc_t *doc = NULL;
    if (s_get_doc (txn, STORE_DB_JOBS, job_id, strlen (job_id), &doc) != 0)
        return false;
    const pv_t *header = pv_doc_root (doc);
    int64_t steps = 0;
    bool found = pv_get_int (pv_map_get (header, "steps"), &steps) == 0
                 && (int64_t) step < steps;
    const pv_t *expected = pv_map_get (header, "expected");
    bool named = false;
    for (size_t index = 0; found && !named && index < pv_size (expected);
         index++)
        named = pv_str_eq (pv_array_at (expected, index), node);
    pv_doc_destroy (&doc);
    return found && named;
}

//  Where the stored piece K (K_LEN bytes) of the stream PREFIX starts, or
//  -1 when K is not a piece of that stream.
static int64_t
s_piece_start (const void *k, size_t k_len, const uint8_t *prefix,
               size_t prefix_len)
{
    if (k_len != prefix_len + 4 || memcmp (k, prefix, prefix_len) != 0)
        return -1;
    const uint8_t *kb = (const uint8_t *) k + prefix_len;
    return (int64_t) ((uint64_t) kb [0] << 24 | (uint64_t) kb [1] << 16
                      | (uint64_t) kb [2] << 8 | kb [3]);
}

bool
jobrec_output_fits (store_txn_t *txn, const char *job_id, uint32_t step,
                    const char *node, uint32_t attempt, bool stderr_,
                    uint64_t offset, size_t len, bool *repeat_p)
{
    if (repeat_p)
        *repeat_p = false;
    if (offset > UINT32_MAX)
        return false;
    uint8_t prefix [JOBREC_MAX_OUTPUT_KEY], key [JOBREC_MAX_OUTPUT_KEY];
    size_t prefix_len = s_output_prefix (job_id, step, node, attempt, stderr_,
                                         prefix);
    memcpy (key, prefix, prefix_len);
    size_t key_len = s_put_offset (key, prefix_len, offset);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_OUTPUTS);
    if (!cursor)
        return false;
    const void *k, *v;
    size_t k_len, v_len;
    //  The first piece at or after OFFSET: the same piece again replaces
    //  itself; any other must start past the new one's end
    int rc = store_cursor_seek (cursor, key, key_len, &k, &k_len, &v, &v_len);
    int64_t start = rc == 0 ? s_piece_start (k, k_len, prefix, prefix_len)
                            : -1;
    bool same = start == (int64_t) offset;
    if (same && repeat_p)
        *repeat_p = v_len == len;
    if (same) {
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
        start = rc == 0 ? s_piece_start (k, k_len, prefix, prefix_len) : -1;
    }
    bool fits = start < 0 || (uint64_t) start >= offset + len;
    if (fits && !same) {
        //  The piece before must end where this one starts, or before
        store_cursor_t *back = store_cursor_new (txn, STORE_DB_OUTPUTS);
        rc = back ? store_cursor_seek (back, key, key_len, &k, &k_len, &v,
                                       &v_len)
                  : STORE_EIO;
        rc = rc == 0 ? store_cursor_prev (back, &k, &k_len, &v, &v_len)
                     : back ? store_cursor_last (back, &k, &k_len, &v,
                                                 &v_len)
                            : STORE_EIO;
        int64_t before = rc == 0 ? s_piece_start (k, k_len, prefix,
                                                  prefix_len)
                                 : -1;
        fits = before < 0 || (uint64_t) before + v_len <= offset;
        store_cursor_destroy (&back);
    }
    store_cursor_destroy (&cursor);
    return fits;
}

uint64_t
jobrec_output_arrived (store_txn_t *txn, const char *job_id, uint32_t step,
                       const char *node, uint32_t attempt, bool stderr_)
{
    uint8_t prefix [JOBREC_MAX_OUTPUT_KEY], key [JOBREC_MAX_OUTPUT_KEY];
    size_t prefix_len = s_output_prefix (job_id, step, node, attempt, stderr_,
                                         prefix);
    memcpy (key, prefix, prefix_len);
    size_t key_len = s_put_offset (key, prefix_len, 0);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_OUTPUTS);
    if (!cursor)
        return 0;
    const void *k, *v;
    size_t k_len, v_len;
    uint64_t arrived = 0;
    int rc = store_cursor_seek (cursor, key, key_len, &k, &k_len, &v, &v_len);
    while (rc == 0) {
        int64_t start = s_piece_start (k, k_len, prefix, prefix_len);
        if (start < 0 || (uint64_t) start > arrived)
            break;          //  Past the stream, or a gap
        if ((uint64_t) start + v_len > arrived)
            arrived = (uint64_t) start + v_len;
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    return arrived;
}

//  Copies up to LIMIT contiguous stored bytes of a stream from OFFSET into
//  a new buffer; *LEN_P gets how many.
static uint8_t *
s_read_pieces (store_txn_t *txn, const uint8_t *prefix, size_t prefix_len,
               uint64_t offset, size_t limit, size_t *len_p)
{
    uint8_t *data = (uint8_t *) malloc (limit ? limit : 1);
    assert (data);
    size_t len = 0;
    uint8_t key [JOBREC_MAX_OUTPUT_KEY];
    memcpy (key, prefix, prefix_len);
    size_t key_len = s_put_offset (key, prefix_len, offset);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_OUTPUTS);
    const void *k, *v;
    size_t k_len, v_len;
    //  The piece holding OFFSET starts at it or before it
    int rc = cursor ? store_cursor_seek (cursor, key, key_len, &k, &k_len, &v,
                                         &v_len)
                    : STORE_EIO;
    if (rc != 0 || k_len != key_len || memcmp (k, key, key_len) != 0)
        rc = rc == 0 ? store_cursor_prev (cursor, &k, &k_len, &v, &v_len)
                     : cursor ? store_cursor_last (cursor, &k, &k_len, &v,
                                                   &v_len)
                              : STORE_EIO;
    uint64_t at = offset;
    while (rc == 0 && len < limit && k_len == prefix_len + 4
           && memcmp (k, prefix, prefix_len) == 0) {
        const uint8_t *kb = (const uint8_t *) k + prefix_len;
        uint64_t start = (uint64_t) kb [0] << 24 | (uint64_t) kb [1] << 16
                         | (uint64_t) kb [2] << 8 | kb [3];
        if (start > at)
            break;          //  A gap: that piece has not arrived
        if (start + v_len > at) {
            size_t skip = (size_t) (at - start);
            size_t take = v_len - skip;
            if (take > limit - len)
                take = limit - len;
            memcpy (data + len, (const uint8_t *) v + skip, take);
            len += take;
            at += take;
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    *len_p = len;
    return data;
}

//  Writes the page map: the fields of every page, then COMPLETE and,
//  when complete, STATUS and EXIT_CODE.
static void
s_write_page (pw_t *writer, const char *job_id, const char *node,
              uint32_t step, int64_t attempt, bool stderr_, uint64_t offset,
              const uint8_t *data, size_t len, int64_t size, int64_t dropped,
              bool complete, const char *status, int64_t exit_code)
{
    pw_map (writer, complete ? 13 : 12);
    pw_str (writer, "job");
    pw_str (writer, job_id);
    pw_str (writer, "node");
    pw_str (writer, node);
    pw_str (writer, "step");
    pw_int (writer, step);
    pw_str (writer, "attempt");
    pw_int (writer, attempt);
    pw_str (writer, "stream");
    pw_str (writer, stderr_ ? "stderr" : "stdout");
    pw_str (writer, "offset");
    pw_int (writer, (int64_t) offset);
    pw_str (writer, "data");
    pw_bin (writer, data, len);
    pw_str (writer, "next");
    pw_int (writer, (int64_t) (offset + len));
    pw_str (writer, "size");
    pw_int (writer, size);
    pw_str (writer, "dropped");
    pw_int (writer, dropped > 0 ? dropped : 0);
    pw_str (writer, "complete");
    pw_bool (writer, complete);
    pw_str (writer, "status");
    pw_str (writer, status ? status : "");
    if (complete) {
        pw_str (writer, "exit_code");
        pw_int (writer, exit_code);
    }
}

uint8_t *
jobrec_read_output (store_txn_t *txn, const char *job_id, uint32_t step,
                    const char *node, uint32_t attempt, bool stderr_,
                    uint64_t offset, size_t len, size_t *got_p)
{
    uint8_t prefix [JOBREC_MAX_OUTPUT_KEY];
    size_t prefix_len = s_output_prefix (job_id, step, node, attempt, stderr_,
                                         prefix);
    return s_read_pieces (txn, prefix, prefix_len, offset, len, got_p);
}

int
jobrec_write_live_page (store_txn_t *txn, const char *job_id, uint32_t step,
                        const char *node, uint32_t attempt, bool stderr_,
                        uint64_t offset, size_t limit, const char *status,
                        pw_t *writer)
{
    uint64_t arrived = jobrec_output_arrived (txn, job_id, step, node,
                                              attempt, stderr_);
    if (offset > arrived)
        return JOBREC_PAST_END;
    uint8_t prefix [JOBREC_MAX_OUTPUT_KEY];
    size_t prefix_len = s_output_prefix (job_id, step, node, attempt, stderr_,
                                         prefix);
    size_t want = arrived - offset < limit ? (size_t) (arrived - offset)
                                           : limit;
    size_t len = 0;
    uint8_t *data = s_read_pieces (txn, prefix, prefix_len, offset, want,
                                   &len);
    s_write_page (writer, job_id, node, step, attempt, stderr_, offset, data,
                  len, (int64_t) arrived, 0, false, status, -1);
    free (data);
    return 0;
}

int
jobrec_write_output_page (store_txn_t *txn, const char *job_id,
                          uint32_t step, const char *node, uint32_t attempt,
                          bool stderr_, uint64_t offset, size_t limit,
                          bool complete, pw_t *writer)
{
    uint8_t key [JOBREC_MAX_OUTPUT_KEY];
    size_t key_len = jobrec_cell_key (job_id, step, node, key);
    pv_doc_t *doc = NULL;
    int rc = s_get_doc (txn, STORE_DB_RESULTS, key, key_len, &doc);
    if (rc != 0)
        return rc;
    const pv_t *attempts = pv_map_get (pv_doc_root (doc), "attempts");
    const pv_t *chosen = NULL;
    for (size_t index = pv_size (attempts); index > 0 && !chosen; index--) {
        const pv_t *item = pv_array_at (attempts, index - 1);
        int64_t number = 0;
        pv_get_int (pv_map_get (item, "attempt"), &number);
        if (attempt == 0 || number == (int64_t) attempt)
            chosen = item;
    }
    int64_t number = 0, size = 0, dropped = 0;
    size_t head_len = 0;
    const char *head = pv_str (pv_map_get (chosen, stderr_ ? "error" : "output"),
                               &head_len);
    if (!chosen || pv_get_int (pv_map_get (chosen, "attempt"), &number) != 0
        || number < 1 || number > UINT16_MAX) {
        pv_doc_destroy (&doc);
        return chosen ? -2 : STORE_ENOTFOUND;
    }
    pv_get_int (pv_map_get (chosen, stderr_ ? "error_size" : "output_size"),
                &size);
    pv_get_int (pv_map_get (chosen, stderr_ ? "error_dropped"
                                            : "output_dropped"), &dropped);
    //  Without a size the stream is the head itself
    bool pieces = size > 0;
    if (!pieces)
        size = (int64_t) head_len;
    if (offset > (uint64_t) size) {
        pv_doc_destroy (&doc);
        return JOBREC_PAST_END;
    }
    uint8_t *data = NULL;
    size_t len = 0;
    if (offset < (uint64_t) size) {
        size_t want = (uint64_t) size - offset < limit
                          ? (size_t) ((uint64_t) size - offset) : limit;
        if (pieces) {
            uint8_t prefix [JOBREC_MAX_OUTPUT_KEY];
            size_t prefix_len = s_output_prefix (job_id, step, node,
                                                 (uint32_t) number, stderr_,
                                                 prefix);
            data = s_read_pieces (txn, prefix, prefix_len, offset, want, &len);
        }
        else {
            data = (uint8_t *) malloc (want ? want : 1);
            assert (data);
            memcpy (data, head + offset, want);
            len = want;
        }
    }
    int64_t exit_code = -1;
    pv_get_int (pv_map_get (chosen, "exit_code"), &exit_code);
    char *status = pv_strdup (pv_map_get (chosen, "status"));
    s_write_page (writer, job_id, node, step, number, stderr_, offset, data,
                  len, size, dropped, complete, status, exit_code);
    free (status);
    free (data);
    pv_doc_destroy (&doc);
    return 0;
}

//  Deletes the idempotency record of JOB_ID's spec when it still names
//  JOB_ID. Returns 0 or a STORE_ error.
static int
s_delete_idempotency (store_txn_t *txn, const char *job_id)
{
    pv_doc_t *doc = NULL;
    if (s_get_doc (txn, STORE_DB_JOBS, job_id, strlen (job_id), &doc) != 0)
        return 0;
    char *key = pv_strdup (pv_map_get (pv_map_get (pv_doc_root (doc), "spec"),
                                       "idempotency_key"));
    pv_doc_destroy (&doc);
    char owner [JOB_ID_LEN + 1];
    uint8_t digest [JOBREC_DIGEST_LEN];
    int rc = 0;
    if (key && *key && strlen (key) <= STORE_MAX_KEY
        && jobrec_idempotency_get (txn, key, owner, digest) == 0
        && strcmp (owner, job_id) == 0)
        rc = store_del (txn, STORE_DB_IDEMPOTENCY, key, strlen (key));
    free (key);
    return rc == STORE_ENOTFOUND ? 0 : rc;
}

//  A late result of an any-node job from a node its step was taken from:
//  the step's cell is stored under the node that held it last; the result
//  joins its history, marked late (sched_attempt_late). Returns as
//  jobrec_fill_cell.
static int
s_fill_moved_cell (store_txn_t *txn, const proto_msg_t *result, pw_t *scratch)
{
    pv_doc_t *doc = NULL;
    int rc = s_get_doc (txn, STORE_DB_JOBS, result->job, strlen (result->job),
                        &doc);
    if (rc != 0)
        return rc == STORE_ENOTFOUND ? 0 : rc;
    const pv_t *header = pv_doc_root (doc);
    const pv_t *expected = pv_map_get (header, "expected");
    bool any = false;
    pv_get_bool (pv_map_get (pv_map_get (pv_map_get (header, "spec"),
                                         "target"),
                             "any"),
                 &any);
    char *holder = pv_size (expected) == 1
                       ? pv_strdup (pv_array_at (expected, 0))
                       : NULL;
    pv_doc_destroy (&doc);
    if (!any || !holder || !name_valid (holder)
        || strcmp (holder, result->node) == 0) {
        free (holder);
        return 0;
    }
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_cell_key (result->job, result->step, holder, key);
    rc = s_get_doc (txn, STORE_DB_RESULTS, key, key_len, &doc);
    if (rc != 0) {
        free (holder);
        return rc == STORE_ENOTFOUND ? 0 : rc;
    }
    sched_cell_t cell;
    memset (&cell, 0, sizeof cell);
    rc = s_load_cell (&cell, pv_doc_root (doc));
    pv_doc_destroy (&doc);
    if (rc == 0) {
        int late = sched_attempt_late (&cell, result);
        rc = late == 0 ? s_put_cell (txn, result->job, result->step, holder,
                                     &cell, scratch)
                       : 0;
        if (rc == 0 && late >= 0)
            rc = 1;
    }
    sched_cell_clear (&cell);
    free (holder);
    return rc;
}

int
jobrec_fill_cell (store_txn_t *txn, const proto_msg_t *result, int64_t wall_ms,
                  pw_t *scratch)
{
    if (!result->job || !job_id_valid (result->job) || !result->node
        || !name_valid (result->node) || result->step > 0xFFFF)
        return 0;
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_cell_key (result->job, result->step, result->node,
                                      key);
    pv_doc_t *doc = NULL;
    int rc = s_get_doc (txn, STORE_DB_RESULTS, key, key_len, &doc);
    if (rc == STORE_ENOTFOUND)
        return s_fill_moved_cell (txn, result, scratch);
    if (rc != 0)
        return rc;
    sched_cell_t cell;
    memset (&cell, 0, sizeof cell);
    rc = s_load_cell (&cell, pv_doc_root (doc));
    pv_doc_destroy (&doc);
    int filled = rc == 0 ? sched_attempt_fill (&cell, result, wall_ms)
                         : SCHED_FILL_NONE;
    if (filled != SCHED_FILL_NONE) {
        rc = s_put_cell (txn, result->job, result->step, result->node, &cell,
                         scratch);
        if (rc == 0)
            rc = filled == SCHED_FILL_LATE ? 2 : 1;
    }
    sched_cell_clear (&cell);
    return rc;
}

int
jobrec_delete (store_txn_t *txn, const char *job_id)
{
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = jobrec_prefix (job_id, prefix);
    int rc = s_delete_idempotency (txn, job_id);
    if (rc >= 0)
        rc = store_del_prefix (txn, STORE_DB_RESULTS, prefix, prefix_len);
    if (rc >= 0)
        rc = store_del_prefix (txn, STORE_DB_OUTPUTS, prefix, prefix_len);
    if (rc >= 0)
        rc = store_del_prefix (txn, STORE_DB_EVENTS, prefix, prefix_len);
    if (rc >= 0)
        rc = jobtrace_delete (txn, job_id);
    if (rc >= 0)
        rc = store_del (txn, STORE_DB_JOBS, job_id, strlen (job_id));
    if (rc >= 0) {
        int gone = store_del (txn, STORE_DB_NOTIFY_JOBS, job_id,
                              strlen (job_id));
        rc = gone == STORE_ENOTFOUND ? 0 : gone;
    }
    return rc < 0 ? rc : 0;
}

void
jobrec_write_progress (const sched_job_t *job, pw_t *writer)
{
    size_t nodes = job->expected_count;
    size_t step = job->step < job->step_count ? job->step : 0;
    size_t by_status [SCHED_CELL_RETRY_WAIT + 1] = {0};
    size_t done = 0, failed = 0;
    for (size_t node = 0; node < nodes && job->cells; node++) {
        if (job->step_count) {
            sched_cell_status_t status
                = job->cells [step * nodes + node].status;
            by_status [status]++;
            if (sched_cell_status_final (status))
                done++;
        }
        for (size_t at = 0; at < job->step_count; at++)
            if (sched_cell_status_failed (job->cells [at * nodes + node].status)) {
                failed++;
                break;
            }
    }
    size_t kinds = 0;
    for (size_t status = 0; status <= SCHED_CELL_RETRY_WAIT; status++)
        if (by_status [status])
            kinds++;
    size_t batches = job->cells ? sched_job_batch_count (job) : 1;
    size_t budget = batches > 1 ? sched_job_budget (job) : SIZE_MAX;
    //  Running tasks that reported progress (kept in memory only)
    size_t reporting = 0;
    size_t cell_count = job->cells ? job->step_count * nodes : 0;
    for (size_t index = 0; index < cell_count; index++)
        if (job->cells [index].progress_ms > 0
            && reporting < JOBREC_PROGRESS_TASKS)
            reporting++;
    pw_map (writer, 8 + (job->reason ? 1 : 0) + (job->updated_at_ms > 0 ? 1 : 0)
                        + (reporting ? 1 : 0) + (batches > 1 ? 2 : 0)
                        + (budget != SIZE_MAX ? 1 : 0));
    pw_str (writer, "id");
    pw_str (writer, job->id);
    if (batches > 1) {
        //  1-based, as people count batches ("batch 3/10")
        pw_str (writer, "batch");
        pw_int (writer, (int64_t) sched_job_batch_current (job) + 1);
        pw_str (writer, "batches");
        pw_int (writer, (int64_t) batches);
    }
    if (budget != SIZE_MAX) {
        //  The failure budget in nodes (R26), set against `failed`
        pw_str (writer, "budget");
        pw_int (writer, (int64_t) budget);
    }
    pw_str (writer, "status");
    pw_str (writer, sched_job_status_name (job->status));
    pw_str (writer, "step");
    pw_int (writer, (int64_t) job->step);
    pw_str (writer, "steps");
    pw_int (writer, (int64_t) job->step_count);
    pw_str (writer, "nodes");
    pw_int (writer, (int64_t) nodes);
    pw_str (writer, "done");
    pw_int (writer, (int64_t) done);
    pw_str (writer, "failed");
    pw_int (writer, (int64_t) failed);
    pw_str (writer, "cells");
    pw_map (writer, kinds);
    for (size_t status = 0; status <= SCHED_CELL_RETRY_WAIT; status++)
        if (by_status [status]) {
            pw_str (writer, sched_cell_status_name ((sched_cell_status_t) status));
            pw_int (writer, (int64_t) by_status [status]);
        }
    if (job->reason) {
        pw_str (writer, "reason");
        pw_str (writer, job->reason);
    }
    if (job->updated_at_ms > 0) {
        char text [TIME_TEXT_LEN];
        time_format (job->updated_at_ms, text, sizeof text);
        pw_str (writer, "updated_at");
        pw_str (writer, text);
    }
    if (reporting) {
        pw_str (writer, "tasks");
        pw_array (writer, reporting);
        size_t written = 0;
        for (size_t index = 0; index < cell_count && written < reporting;
             index++) {
            const sched_cell_t *cell = &job->cells [index];
            if (cell->progress_ms <= 0)
                continue;
            written++;
            pw_map (writer, 3 + (cell->percent >= 0 ? 1 : 0)
                                + (cell->progress_kind ? 1 : 0)
                                + (cell->progress ? 1 : 0));
            pw_str (writer, "node");
            pw_str (writer, job->expected [index % nodes]);
            pw_str (writer, "step");
            pw_int (writer, (int64_t) (index / nodes));
            pw_str (writer, "attempt");
            pw_int (writer, cell->attempt);
            if (cell->percent >= 0) {
                pw_str (writer, "percent");
                pw_int (writer, cell->percent);
            }
            if (cell->progress_kind) {
                pw_str (writer, "kind");
                pw_str (writer, cell->progress_kind);
            }
            if (cell->progress) {
                pw_str (writer, "message");
                pw_str (writer, cell->progress);
            }
        }
    }
}
