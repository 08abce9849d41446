/*  =========================================================================
    dlq - the dead-letter queue (see dlq.h)
    =========================================================================
*/
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlq.h"
#include "jobrec.h"

bool
dlq_status_lands (sched_cell_status_t status)
{
    return status == SCHED_CELL_FAILED || status == SCHED_CELL_TIMEOUT
           || status == SCHED_CELL_LOST || status == SCHED_CELL_INTERRUPTED
           || status == SCHED_CELL_OFFLINE;
}

//  Writes the last DLQ_TEXT_MAX bytes of TEXT (the end of an output or an
//  error says most), starting on a UTF-8 boundary.
static void
s_write_tail (pw_t *writer, const char *text)
{
    size_t len = text ? strlen (text) : 0;
    size_t from = len > DLQ_TEXT_MAX ? len - DLQ_TEXT_MAX : 0;
    while (from < len && from > 0 && ((uint8_t) text [from] & 0xC0) == 0x80)
        from++;
    pw_strn (writer, text ? text + from : "", len - from);
}

int
dlq_add (store_txn_t *txn, const sched_job_t *job, uint32_t step,
         const char *node, int64_t wall_ms, pw_t *scratch)
{
    ssize_t index = sched_job_node_index (job, node);
    const job_phase_t *leaf = job_spec_step (job->spec, step, NULL, NULL);
    if (index < 0 || !leaf || step >= job->step_count)
        return STORE_EINVAL;
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_cell_key (job->id, step, node, key);
    const void *value;
    size_t value_len;
    if (store_get (txn, STORE_DB_DLQ, key, key_len, &value, &value_len) == 0)
        return 0;
    const sched_cell_t *cell
        = &job->cells [step * job->expected_count + (size_t) index];
    const sched_attempt_t *last = cell->attempt_count
                                      ? &cell->attempts [cell->attempt_count - 1]
                                      : NULL;
    pw_reset (scratch);
    pw_map (scratch, 11);
    pw_str (scratch, "job");
    pw_str (scratch, job->id);
    pw_str (scratch, "step");
    pw_int (scratch, step);
    pw_str (scratch, "node");
    pw_str (scratch, node);
    pw_str (scratch, "backend");
    pw_str (scratch, leaf->backend);
    pw_str (scratch, "action");
    pw_str (scratch, leaf->action);
    pw_str (scratch, "status");
    pw_str (scratch, sched_cell_status_name (cell->status));
    pw_str (scratch, "error");
    s_write_tail (scratch, last ? last->error : NULL);
    pw_str (scratch, "output");
    s_write_tail (scratch, last ? last->output : NULL);
    pw_str (scratch, "exit_code");
    pw_int (scratch, last ? last->exit_code : -1);
    pw_str (scratch, "attempts");
    pw_int (scratch, cell->attempt > cell->attempt_count ? cell->attempt
                                                         : cell->attempt_count);
    pw_str (scratch, "time_ms");
    pw_int (scratch, wall_ms);
    int rc = store_put (txn, STORE_DB_DLQ, key, key_len, pw_data (scratch),
                        pw_size (scratch));
    return rc == 0 ? 1 : rc;
}

int
dlq_id_parse (const char *text, char *job, uint32_t *step, char *node)
{
    const char *first = text ? strchr (text, '/') : NULL;
    const char *second = first ? strchr (first + 1, '/') : NULL;
    if (!second || (size_t) (first - text) > JOB_ID_LEN
        || strlen (second + 1) > NAME_MAX_LEN || second - first < 2
        || second - first > 5)
        return -1;
    memcpy (job, text, (size_t) (first - text));
    job [first - text] = 0;
    uint32_t number = 0;
    for (const char *digit = first + 1; digit < second; digit++) {
        if (*digit < '0' || *digit > '9')
            return -1;
        number = number * 10 + (uint32_t) (*digit - '0');
    }
    strcpy (node, second + 1);
    if (!job_id_valid (job) || !name_valid (node) || number >= JOB_MAX_STEPS)
        return -1;
    *step = number;
    return 0;
}

int
dlq_get (store_txn_t *txn, const char *job, uint32_t step, const char *node,
         pv_doc_t **doc_p)
{
    uint8_t key [JOBREC_MAX_KEY];
    size_t key_len = jobrec_cell_key (job, step, node, key);
    const void *value;
    size_t value_len;
    int rc = store_get (txn, STORE_DB_DLQ, key, key_len, &value, &value_len);
    if (rc != 0)
        return rc;
    return pv_doc_decode (value, value_len, doc_p, NULL, 0) == 0
               ? 0 : STORE_EINVAL;
}

int
dlq_write_entry (const pv_t *record, pw_t *writer)
{
    const pv_t *job = pv_map_get (record, "job");
    const pv_t *node = pv_map_get (record, "node");
    int64_t step = -1, time_ms = 0;
    pv_get_int (pv_map_get (record, "step"), &step);
    pv_get_int (pv_map_get (record, "time_ms"), &time_ms);
    if (pv_type (job) != PV_STR || pv_type (node) != PV_STR || step < 0
        || step >= JOB_MAX_STEPS)
        return -2;
    static const char *const copied [] = {"job", "step", "node", "backend",
                                          "action", "status", "error",
                                          "output", "exit_code", "attempts"};
    size_t copied_count = sizeof copied / sizeof copied [0];
    const pv_t *retry_job = pv_map_get (record, "retry_job");
    bool has_retry = pv_type (retry_job) == PV_STR;
    pw_map (writer, copied_count + 2 + (has_retry ? 1 : 0));
    char id [DLQ_ID_MAX + 1];
    snprintf (id, sizeof id, "%.*s/%d/%.*s", (int) pv_size (job),
              pv_str (job, NULL), (int) step, (int) pv_size (node),
              pv_str (node, NULL));
    pw_str (writer, "id");
    pw_str (writer, id);
    for (size_t index = 0; index < copied_count; index++) {
        const pv_t *value = pv_map_get (record, copied [index]);
        pw_str (writer, copied [index]);
        if (value)
            pw_pv (writer, value);
        else
            pw_nil (writer);
    }
    char text [TIME_TEXT_LEN];
    time_format (time_ms, text, sizeof text);
    pw_str (writer, "time");
    pw_str (writer, text);
    if (has_retry) {
        pw_str (writer, "retry_job");
        pw_pv (writer, retry_job);
    }
    return 0;
}

//  Walks the entries of JOB_ID (every entry when NULL): calls FN with
//  each key and decoded record until it returns non-zero.
typedef int (s_visit_fn) (const void *key, size_t key_len, const pv_t *record,
                          void *arg);

static void
s_walk (store_txn_t *txn, const char *job_id, s_visit_fn *fn, void *arg)
{
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = job_id ? jobrec_prefix (job_id, prefix) : 0;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_DLQ);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, prefix_len ? prefix : NULL,
                                         prefix_len, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0 && (prefix_len == 0 || (k_len >= prefix_len
                                           && memcmp (k, prefix, prefix_len) == 0))) {
        pv_doc_t *doc = NULL;
        int stop = 0;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0)
            stop = fn (k, k_len, pv_doc_root (doc), arg);
        pv_doc_destroy (&doc);
        if (stop)
            break;
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
}

typedef struct {
    pw_t *items;
    size_t limit;
    size_t count;
    size_t total;
} s_list_t;

static int
s_list_one (const void *key, size_t key_len, const pv_t *record, void *arg)
{
    s_list_t *list = (s_list_t *) arg;
    list->total++;
    if (list->count < list->limit
        && dlq_write_entry (record, list->items) == 0)
        list->count++;
    return 0;
}

void
dlq_write_list (store_txn_t *txn, const char *job_id, size_t limit,
                pw_t *writer, size_t *total_p)
{
    s_list_t list = {pw_new (), limit, 0, 0};
    s_walk (txn, job_id, s_list_one, &list);
    pw_array (writer, list.count);
    if (list.count)
        pw_raw (writer, pw_data (list.items), pw_size (list.items));
    pw_destroy (&list.items);
    *total_p = list.total;
}

//  Keys collected during a walk, acted on after it (a cursor must not
//  see its own writes).
typedef struct {
    uint8_t (*keys) [JOBREC_MAX_KEY];
    size_t *lens;
    size_t count;
    size_t max;
    const char *retry_job;       //  s_clear_one: only entries naming it
    int64_t before_wall_ms;      //  s_purge_one: only entries this old
} s_keys_t;

static void
s_keys_add (s_keys_t *keys, const void *key, size_t key_len)
{
    if (key_len > JOBREC_MAX_KEY)
        return;
    if (keys->count == keys->max) {
        keys->max = keys->max ? keys->max * 2 : 16;
        keys->keys = realloc (keys->keys, keys->max * JOBREC_MAX_KEY);
        keys->lens = (size_t *) realloc (keys->lens, keys->max * sizeof (size_t));
        assert (keys->keys && keys->lens);
    }
    memcpy (keys->keys [keys->count], key, key_len);
    keys->lens [keys->count++] = key_len;
}

static void
s_keys_free (s_keys_t *keys)
{
    free (keys->keys);
    free (keys->lens);
}

static int
s_mark_one (const void *key, size_t key_len, const pv_t *record, void *arg)
{
    s_keys_add ((s_keys_t *) arg, key, key_len);
    return 0;
}

int
dlq_mark_retry (store_txn_t *txn, const char *job_id, const char *retry_job,
                pw_t *scratch)
{
    s_keys_t keys = {0};
    s_walk (txn, job_id, s_mark_one, &keys);
    int marked = 0, rc = 0;
    for (size_t index = 0; index < keys.count && rc == 0; index++) {
        const void *value;
        size_t value_len;
        pv_doc_t *doc = NULL;
        if (store_get (txn, STORE_DB_DLQ, keys.keys [index], keys.lens [index],
                       &value, &value_len) != 0
            || pv_doc_decode (value, value_len, &doc, NULL, 0) != 0) {
            pv_doc_destroy (&doc);
            continue;
        }
        //  The record with retry_job set (or replaced)
        const pv_t *record = pv_doc_root (doc);
        bool had = pv_map_get (record, "retry_job") != NULL;
        pw_reset (scratch);
        pw_map (scratch, pv_size (record) + (had ? 0 : 1));
        for (size_t at = 0; at < pv_size (record); at++) {
            const char *name = NULL;
            size_t name_len = 0;
            const pv_t *field = pv_map_entry (record, at, &name, &name_len);
            if (name && name_len == 9 && memcmp (name, "retry_job", 9) == 0)
                continue;
            pw_pv (scratch, pv_map_key_at (record, at));
            pw_pv (scratch, field);
        }
        pw_str (scratch, "retry_job");
        pw_str (scratch, retry_job);
        pv_doc_destroy (&doc);
        rc = store_put (txn, STORE_DB_DLQ, keys.keys [index], keys.lens [index],
                        pw_data (scratch), pw_size (scratch));
        if (rc == 0)
            marked++;
    }
    s_keys_free (&keys);
    return rc ? rc : marked;
}

static int
s_clear_one (const void *key, size_t key_len, const pv_t *record, void *arg)
{
    s_keys_t *keys = (s_keys_t *) arg;
    if (pv_str_eq (pv_map_get (record, "retry_job"), keys->retry_job))
        s_keys_add (keys, key, key_len);
    return 0;
}

static int
s_delete_keys (store_txn_t *txn, s_keys_t *keys)
{
    int deleted = 0, rc = 0;
    for (size_t index = 0; index < keys->count && rc == 0; index++) {
        rc = store_del (txn, STORE_DB_DLQ, keys->keys [index],
                        keys->lens [index]);
        if (rc == STORE_ENOTFOUND)
            rc = 0;
        else
        if (rc == 0)
            deleted++;
    }
    s_keys_free (keys);
    return rc ? rc : deleted;
}

int
dlq_clear_retried (store_txn_t *txn, const char *job_id,
                   const char *retry_job)
{
    s_keys_t keys = {0};
    keys.retry_job = retry_job;
    s_walk (txn, job_id, s_clear_one, &keys);
    return s_delete_keys (txn, &keys);
}

static int
s_purge_one (const void *key, size_t key_len, const pv_t *record, void *arg)
{
    s_keys_t *keys = (s_keys_t *) arg;
    int64_t time_ms = 0;
    pv_get_int (pv_map_get (record, "time_ms"), &time_ms);
    if (keys->before_wall_ms <= 0 || time_ms <= keys->before_wall_ms)
        s_keys_add (keys, key, key_len);
    return 0;
}

int
dlq_purge (store_txn_t *txn, const char *job_id, int64_t before_wall_ms)
{
    s_keys_t keys = {0};
    keys.before_wall_ms = before_wall_ms;
    s_walk (txn, job_id, s_purge_one, &keys);
    return s_delete_keys (txn, &keys);
}

bool
dlq_has_job (store_txn_t *txn, const char *job_id)
{
    uint8_t prefix [JOBREC_MAX_KEY];
    size_t prefix_len = jobrec_prefix (job_id, prefix);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_DLQ);
    const void *k, *v;
    size_t k_len, v_len;
    bool found = cursor
                 && store_cursor_seek (cursor, prefix, prefix_len, &k, &k_len,
                                       &v, &v_len) == 0
                 && k_len >= prefix_len && memcmp (k, prefix, prefix_len) == 0;
    store_cursor_destroy (&cursor);
    return found;
}

size_t
dlq_size (store_txn_t *txn)
{
    return store_count (txn, STORE_DB_DLQ);
}
