/*  =========================================================================
    notify - job notifications (see notify.h)
    =========================================================================
*/
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/names.h"
#include "notify.h"
#include "notify_post.h"

//  ---------------------------------------------------------------------
//  Ids, shown URLs, backoff

void
notify_id_format (const uint8_t *key, char *id)
{
    hex_encode (key, NOTIFY_KEY_LEN, id);
}

int
notify_id_parse (const char *id, uint8_t *key)
{
    return hex_decode (id, key, NOTIFY_KEY_LEN);
}

void
notify_url_show (const char *url, char *buf, size_t size)
{
    size_t len = strcspn (url, "?#");
    if (len >= size)
        len = size - 1;
    memcpy (buf, url, len);
    buf [len] = '\0';
    if (url [strcspn (url, "?#")] && len + 4 < size)
        strcat (buf, "?...");
}

int64_t
notify_backoff_ms (const notify_config_t *config, uint32_t attempts,
                   double random)
{
    int64_t backoff = config->retry_base_ms;
    for (uint32_t n = 1; n < attempts && backoff < config->retry_cap_ms; n++)
        backoff *= 2;
    if (backoff > config->retry_cap_ms)
        backoff = config->retry_cap_ms;
    //  Up to a quarter more, so that many deliveries that failed together
    //  do not all come back together
    return backoff + (int64_t) ((double) backoff / 4 * random);
}

//  ---------------------------------------------------------------------
//  Records

typedef struct {
    char job [JOB_ID_LEN + 1];   //  The job
    char *url;                   //  Where (owned)
    char source [8];             //  "job" or "broker"
    char status [8];             //  "pending", "sent" or "dead"
    int64_t attempts;            //  Attempts made
    int64_t created_ms;          //  Queued at (wall)
    int64_t since_ms;            //  retry_for counts from here (wall)
    int64_t next_ms;             //  Next attempt due (wall)
    int64_t updated_ms;          //  Last change (wall)
    int64_t code;                //  Last HTTP status, 0 none
    char error [NOTIFY_ERROR_MAX];  //  Last error, "" none
    char *body;                  //  The JSON payload (owned)
} s_record_t;

static void
s_record_clear (s_record_t *record)
{
    free (record->url);
    free (record->body);
    memset (record, 0, sizeof *record);
}

static void
s_copy (char *buf, size_t size, const pv_t *value)
{
    size_t len = 0;
    const char *text = pv_str (value, &len);
    if (!text)
        len = 0;
    if (len >= size)
        len = size - 1;
    if (len)
        memcpy (buf, text, len);
    buf [len] = '\0';
}

static int
s_record_decode (const void *data, size_t size, s_record_t *record)
{
    memset (record, 0, sizeof *record);
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (data, size, &doc, NULL, 0) != 0)
        return -2;
    const pv_t *root = pv_doc_root (doc);
    int rc = pv_type (root) == PV_MAP ? 0 : -2;
    if (rc == 0) {
        s_copy (record->job, sizeof record->job, pv_map_get (root, "job"));
        s_copy (record->source, sizeof record->source,
                pv_map_get (root, "source"));
        s_copy (record->status, sizeof record->status,
                pv_map_get (root, "status"));
        s_copy (record->error, sizeof record->error, pv_map_get (root, "error"));
        record->url = pv_strdup (pv_map_get (root, "url"));
        record->body = pv_strdup (pv_map_get (root, "body"));
        pv_get_int (pv_map_get (root, "attempts"), &record->attempts);
        pv_get_int (pv_map_get (root, "created_ms"), &record->created_ms);
        pv_get_int (pv_map_get (root, "since_ms"), &record->since_ms);
        pv_get_int (pv_map_get (root, "next_ms"), &record->next_ms);
        pv_get_int (pv_map_get (root, "updated_ms"), &record->updated_ms);
        pv_get_int (pv_map_get (root, "code"), &record->code);
        if (!record->url || !record->body || !*record->job)
            rc = -2;
    }
    pv_doc_destroy (&doc);
    if (rc != 0)
        s_record_clear (record);
    return rc;
}

static int
s_record_put (store_txn_t *txn, const uint8_t *key, const s_record_t *record)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 10 + (record->code ? 1 : 0) + (*record->error ? 1 : 0));
    pw_str (writer, "job");
    pw_str (writer, record->job);
    pw_str (writer, "url");
    pw_str (writer, record->url);
    pw_str (writer, "source");
    pw_str (writer, record->source);
    pw_str (writer, "status");
    pw_str (writer, record->status);
    pw_str (writer, "attempts");
    pw_int (writer, record->attempts);
    pw_str (writer, "created_ms");
    pw_int (writer, record->created_ms);
    pw_str (writer, "since_ms");
    pw_int (writer, record->since_ms);
    pw_str (writer, "next_ms");
    pw_int (writer, record->next_ms);
    pw_str (writer, "updated_ms");
    pw_int (writer, record->updated_ms);
    if (record->code) {
        pw_str (writer, "code");
        pw_int (writer, record->code);
    }
    if (*record->error) {
        pw_str (writer, "error");
        pw_str (writer, record->error);
    }
    pw_str (writer, "body");
    pw_str (writer, record->body);
    int rc = store_put (txn, STORE_DB_NOTIFY, key, NOTIFY_KEY_LEN,
                        pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
    return rc;
}

static int
s_record_get (store_txn_t *txn, const uint8_t *key, s_record_t *record)
{
    const void *data = NULL;
    size_t size = 0;
    int rc = store_get (txn, STORE_DB_NOTIFY, key, NOTIFY_KEY_LEN, &data, &size);
    if (rc != 0)
        return rc;
    return s_record_decode (data, size, record);
}

//  ---------------------------------------------------------------------
//  The payload

//  The first NOTIFY_OUTPUT_LINES lines of TEXT, in NOTIFY_OUTPUT_BYTES
//  at most (cut at a character boundary).
static json_t *
s_head (const char *text)
{
    if (!text)
        return json_null ();
    size_t len = 0;
    int lines = 0;
    while (text [len] && len < NOTIFY_OUTPUT_BYTES) {
        if (text [len] == '\n' && ++lines == NOTIFY_OUTPUT_LINES)
            break;
        len++;
    }
    while (len > 0 && text [len] && ((unsigned char) text [len] & 0xC0) == 0x80)
        len--;
    json_t *head = json_stringn_nocheck (text, len);
    return head ? head : json_null ();
}

static const char *
s_status_name (sched_job_status_t status)
{
    return sched_job_status_name (status);
}

static bool
s_cell_failed (sched_cell_status_t status)
{
    return status == SCHED_CELL_FAILED || status == SCHED_CELL_TIMEOUT
           || status == SCHED_CELL_LOST || status == SCHED_CELL_INTERRUPTED
           || status == SCHED_CELL_OFFLINE || status == SCHED_CELL_UNSUPPORTED;
}

static char *
s_iso (int64_t ms, char *buf, size_t size)
{
    time_t seconds = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r (&seconds, &tm);
    char date [24];
    strftime (date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf (buf, size, "%s.%03dZ", date, (int) ((ms % 1000 + 1000) % 1000));
    return buf;
}

//  The JSON payload of JOB's end for delivery ID (docs/NOTIFY.md); the
//  caller frees it.
static char *
s_payload (const notify_config_t *config, const sched_job_t *job,
           const char *id, int64_t wall_ms)
{
    json_t *root = json_object ();
    char when [40];
    json_object_set_new (root, "event", json_string ("job.finished"));
    json_object_set_new (root, "delivery", json_string (id));
    json_object_set_new (root, "queued_at", json_string (s_iso (wall_ms, when,
                                                                sizeof when)));
    json_t *info = json_object ();
    json_object_set_new (info, "id", json_string (job->id));
    json_object_set_new (info, "status",
                         json_string (s_status_name (job->status)));
    json_object_set_new (info, "reason", job->reason
                                             ? json_string (job->reason)
                                             : json_null ());
    json_object_set_new (info, "submitted_by", job->submitted_by
                                                   ? json_string (job->submitted_by)
                                                   : json_null ());
    if (job->schedule)
        json_object_set_new (info, "schedule", json_string (job->schedule));
    if (job->retry_of)
        json_object_set_new (info, "retry_of", json_string (job->retry_of));
    json_object_set_new (info, "created_at",
                         json_string (s_iso (job->created_at_ms, when,
                                             sizeof when)));
    json_object_set_new (info, "finished_at",
                         json_string (s_iso (wall_ms, when, sizeof when)));
    json_object_set_new (info, "nodes", json_integer ((json_int_t) job->expected_count));
    json_object_set_new (info, "steps", json_integer ((json_int_t) job->step_count));
    json_object_set_new (root, "job", info);
    json_t *counts = json_object ();
    json_t *failed = json_array ();
    size_t failed_nodes = 0;
    for (size_t node = 0; node < job->expected_count; node++) {
        bool named = false;
        for (size_t step = 0; step < job->step_count && job->cells; step++) {
            const sched_cell_t *cell = &job->cells [step * job->expected_count + node];
            const char *name = sched_cell_status_name (cell->status);
            json_t *count = json_object_get (counts, name);
            json_object_set_new (counts, name,
                                 json_integer (count ? json_integer_value (count) + 1 : 1));
            if (named || !s_cell_failed (cell->status))
                continue;
            named = true;
            if (++failed_nodes > NOTIFY_FAILED_MAX)
                continue;
            json_t *entry = json_object ();
            json_object_set_new (entry, "node", json_string (job->expected [node]));
            json_object_set_new (entry, "step", json_integer ((json_int_t) step));
            const job_phase_t *leaf = job_spec_step (job->spec, step, NULL, NULL);
            if (leaf && leaf->backend) {
                char task [2 * NAME_MAX_LEN + 2];
                snprintf (task, sizeof task, "%s.%s", leaf->backend, leaf->action);
                json_object_set_new (entry, "task", json_string (task));
            }
            json_object_set_new (entry, "status", json_string (name));
            const sched_attempt_t *last = cell->attempt_count
                                              ? &cell->attempts [cell->attempt_count - 1]
                                              : NULL;
            const char *error = last && last->error ? last->error : cell->reason;
            json_object_set_new (entry, "error", s_head (error));
            json_object_set_new (entry, "exit_code",
                                 last && last->exit_code >= 0
                                     ? json_integer (last->exit_code)
                                     : json_null ());
            json_object_set_new (entry, "output", s_head (last ? last->output : NULL));
            json_array_append_new (failed, entry);
        }
    }
    json_object_set_new (root, "counts", counts);
    json_object_set_new (root, "failed", failed);
    json_object_set_new (root, "failed_nodes", json_integer ((json_int_t) failed_nodes));
    if (config->public_url) {
        size_t len = strlen (config->public_url);
        while (len && config->public_url [len - 1] == '/')
            len--;
        json_t *links = json_object ();
        char *link = zsys_sprintf ("%.*s/api/v1/jobs/%s", (int) len,
                                   config->public_url, job->id);
        json_object_set_new (links, "api", json_string (link));
        zstr_free (&link);
        link = zsys_sprintf ("%.*s/#/jobs/%s", (int) len, config->public_url,
                             job->id);
        json_object_set_new (links, "dashboard", json_string (link));
        zstr_free (&link);
        json_object_set_new (root, "links", links);
    }
    char *text = json_dumps (root, JSON_COMPACT);
    json_decref (root);
    return text;
}

//  ---------------------------------------------------------------------
//  The loop side

//  A pending delivery, in memory.
typedef struct {
    uint8_t key [NOTIFY_KEY_LEN];  //  Its record's key
    char *url;                   //  Where it goes (owned)
    int64_t next_ms;             //  When it is due (wall)
    bool in_flight;              //  A worker has it
} s_pending_t;

struct _notify_t {
    zlistx_t *pending;           //  s_pending_t, by key
    zactor_t **workers;          //  The worker threads
    bool *busy;                  //  Which ones hold a delivery
    size_t worker_count;         //  How many
    zsock_t *outcomes;           //  PULL: the workers' outcomes
    char outcomes_ep [64];       //  Its endpoint
    notify_post_args_t args;     //  What the workers share
    atomic_bool stopping;        //  Set before they are stopped
    int64_t last_ms;             //  The last key's ms
    uint32_t last_seq;           //  ... and seq
    bool loaded;                 //  last_ms/last_seq read from the store
    notify_counters_t counters;  //  For the metrics
};

static void
s_pending_destroy (s_pending_t **self_p)
{
    if (self_p && *self_p) {
        free ((*self_p)->url);
        free (*self_p);
        *self_p = NULL;
    }
}

static int
s_pending_compare (const s_pending_t *a, const s_pending_t *b)
{
    return memcmp (a->key, b->key, NOTIFY_KEY_LEN);
}

notify_t *
notify_new (void)
{
    notify_t *self = (notify_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    self->pending = zlistx_new ();
    zlistx_set_destructor (self->pending,
                           (zlistx_destructor_fn *) s_pending_destroy);
    zlistx_set_comparator (self->pending,
                           (zlistx_comparator_fn *) s_pending_compare);
    atomic_init (&self->stopping, false);
    return self;
}

void
notify_destroy (notify_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    notify_t *self = *self_p;
    atomic_store (&self->stopping, true);
    for (size_t i = 0; i < self->worker_count; i++)
        zactor_destroy (&self->workers [i]);
    free (self->workers);
    free (self->busy);
    zsock_destroy (&self->outcomes);
    zlistx_destroy (&self->pending);
    free (self);
    *self_p = NULL;
}

zsock_t *
notify_start (notify_t *self, const notify_config_t *config)
{
    if (self->outcomes)
        return self->outcomes;
    notify_post_init ();
    snprintf (self->outcomes_ep, sizeof self->outcomes_ep,
              "inproc://grid-notify-%p", (void *) self);
    self->outcomes = zsock_new_pull (self->outcomes_ep);
    if (!self->outcomes)
        return NULL;
    size_t count = (size_t) config->workers;
    self->workers = (zactor_t **) calloc (count, sizeof (zactor_t *));
    self->busy = (bool *) calloc (count, sizeof (bool));
    if (!self->workers || !self->busy)
        return NULL;
    self->args.outcomes_ep = self->outcomes_ep;
    self->args.stopping = &self->stopping;
    for (size_t i = 0; i < count; i++) {
        self->workers [i] = zactor_new (notify_post_actor, &self->args);
        if (!self->workers [i])
            break;
        self->worker_count++;
    }
    return self->worker_count ? self->outcomes : NULL;
}

static void
s_pending_add (notify_t *self, const uint8_t *key, const char *url,
               int64_t next_ms)
{
    s_pending_t *entry = (s_pending_t *) calloc (1, sizeof *entry);
    if (!entry)
        return;
    memcpy (entry->key, key, NOTIFY_KEY_LEN);
    entry->url = strdup (url);
    entry->next_ms = next_ms;
    s_pending_t *last = (s_pending_t *) zlistx_last (self->pending);
    if (!last || s_pending_compare (last, entry) < 0)
        zlistx_add_end (self->pending, entry);
    else
        zlistx_insert (self->pending, entry, true);
}

static s_pending_t *
s_pending_find (notify_t *self, const uint8_t *key)
{
    for (s_pending_t *entry = (s_pending_t *) zlistx_first (self->pending);
         entry; entry = (s_pending_t *) zlistx_next (self->pending))
        if (memcmp (entry->key, key, NOTIFY_KEY_LEN) == 0)
            return entry;
    return NULL;
}

int
notify_restore (notify_t *self, store_txn_t *txn)
{
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NOTIFY);
    if (!cursor)
        return STORE_EIO;
    const void *k, *v;
    size_t k_len, v_len;
    int restored = 0;
    int rc = store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len);
    while (rc == 0) {
        s_record_t record;
        if (k_len == NOTIFY_KEY_LEN && s_record_decode (v, v_len, &record) == 0) {
            if (strcmp (record.status, "pending") == 0) {
                s_pending_add (self, (const uint8_t *) k, record.url,
                               record.next_ms);
                restored++;
            }
            s_record_clear (&record);
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    self->counters.pending = zlistx_size (self->pending);
    return restored;
}

void
notify_reload (notify_t *self, store_t *store)
{
    zlistx_t *flying = zlistx_new ();
    zlistx_set_destructor (flying, (zlistx_destructor_fn *) zchunk_destroy);
    for (s_pending_t *entry = (s_pending_t *) zlistx_first (self->pending);
         entry; entry = (s_pending_t *) zlistx_next (self->pending))
        if (entry->in_flight)
            zlistx_add_end (flying, zchunk_new (entry->key, NOTIFY_KEY_LEN));
    store_txn_t *txn = store_begin (store, false);
    if (txn) {
        zlistx_purge (self->pending);
        notify_restore (self, txn);
        store_abort (&txn);
        //  Its key sequence is read again too
        self->loaded = false;
    }
    for (zchunk_t *key = (zchunk_t *) zlistx_first (flying); key;
         key = (zchunk_t *) zlistx_next (flying)) {
        s_pending_t *entry = s_pending_find (self, zchunk_data (key));
        if (entry)
            entry->in_flight = true;
    }
    zlistx_destroy (&flying);
}

//  Whether a job of STATUS ended by REASON is an end ON asks for.
static bool
s_wants (uint32_t on, const sched_job_t *job)
{
    bool timeout = job->reason && strncmp (job->reason, "job timeout", 11) == 0;
    uint32_t bit = job->status == SCHED_JOB_COMPLETED ? JOB_NOTIFY_COMPLETED
                   : job->status == SCHED_JOB_PARTIAL_FAILURE
                       ? JOB_NOTIFY_PARTIAL_FAILURE
                   : job->status == SCHED_JOB_CANCELLED ? JOB_NOTIFY_CANCELLED
                                                        : JOB_NOTIFY_FAILED;
    return (on & bit) || (timeout && (on & JOB_NOTIFY_TIMEOUT));
}

static int
s_queue (notify_t *self, store_txn_t *txn, const notify_config_t *config,
         const sched_job_t *job, const char *url, const char *source,
         int64_t wall_ms)
{
    if (!self->loaded) {
        store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NOTIFY);
        const void *k, *v;
        size_t k_len, v_len;
        if (cursor && store_cursor_last (cursor, &k, &k_len, &v, &v_len) == 0
            && stamp_key_parse (k, k_len, &self->last_ms,
                                &self->last_seq) != 0) {
            self->last_ms = 0;
            self->last_seq = 0;
        }
        store_cursor_destroy (&cursor);
        self->loaded = true;
    }
    //  Keys never go back, whatever the wall clock does
    int64_t ms = wall_ms > self->last_ms ? wall_ms : self->last_ms;
    uint32_t seq = 0;
    if (ms == self->last_ms) {
        if (self->last_seq == UINT32_MAX)
            ms++;
        else
            seq = self->last_seq + 1;
    }
    uint8_t key [NOTIFY_KEY_LEN];
    stamp_key_make (ms, seq, key);
    char id [NOTIFY_ID_LEN + 1];
    notify_id_format (key, id);
    s_record_t record;
    memset (&record, 0, sizeof record);
    snprintf (record.job, sizeof record.job, "%s", job->id);
    record.url = (char *) url;
    snprintf (record.source, sizeof record.source, "%s", source);
    snprintf (record.status, sizeof record.status, "pending");
    record.created_ms = record.since_ms = record.next_ms = wall_ms;
    record.updated_ms = wall_ms;
    record.body = s_payload (config, job, id, wall_ms);
    if (!record.body)
        return STORE_EIO;
    int rc = s_record_put (txn, key, &record);
    free (record.body);
    if (rc != 0)
        return rc;
    self->last_ms = ms;
    self->last_seq = seq;
    s_pending_add (self, key, url, wall_ms);
    self->counters.pending = zlistx_size (self->pending);
    return 0;
}

int
notify_job_finished (notify_t *self, store_txn_t *txn,
                     const notify_config_t *config, const sched_job_t *job,
                     int64_t wall_ms)
{
    int queued = 0;
    for (size_t i = 0; i < config->target_count; i++)
        if (s_wants (config->targets [i].on, job)) {
            int rc = s_queue (self, txn, config, job, config->targets [i].url,
                              "broker", wall_ms);
            if (rc != 0)
                return rc;
            queued++;
        }
    for (size_t i = 0; job->spec && i < job->spec->notify_count; i++)
        if (s_wants (job->spec->notify [i].on, job)) {
            int rc = s_queue (self, txn, config, job, job->spec->notify [i].url,
                              "job", wall_ms);
            if (rc != 0)
                return rc;
            queued++;
        }
    return queued;
}

static ssize_t
s_free_worker (notify_t *self)
{
    for (size_t i = 0; i < self->worker_count; i++)
        if (!self->busy [i])
            return (ssize_t) i;
    return -1;
}

void
notify_dispatch (notify_t *self, store_t *store, const notify_config_t *config,
                 int64_t wall_ms)
{
    if (!self->worker_count || zlistx_size (self->pending) == 0
        || s_free_worker (self) < 0)
        return;
    //  The candidates, and the URLs a worker is busy with (the walk
    //  below moves the list's cursor)
    zlistx_t *due = zlistx_new ();
    zhashx_t *busy = zhashx_new ();
    for (s_pending_t *entry = (s_pending_t *) zlistx_first (self->pending);
         entry; entry = (s_pending_t *) zlistx_next (self->pending))
        if (entry->in_flight)
            zhashx_update (busy, entry->url, (void *) "");
        else
        if (entry->next_ms <= wall_ms)
            zlistx_add_end (due, entry);
    if (zlistx_size (due) == 0) {
        zlistx_destroy (&due);
        zhashx_destroy (&busy);
        return;
    }
    store_txn_t *txn = store_begin (store, false);
    for (s_pending_t *entry = (s_pending_t *) zlistx_first (due);
         entry && txn; entry = (s_pending_t *) zlistx_next (due)) {
        ssize_t worker = s_free_worker (self);
        if (worker < 0)
            break;
        //  One at a time per URL, in the order the jobs ended
        if (zhashx_lookup (busy, entry->url))
            continue;
        s_record_t record;
        int rc = s_record_get (txn, entry->key, &record);
        if (rc != 0 || strcmp (record.status, "pending") != 0) {
            //  Gone (pruned, or its pass was undone) or no longer pending
            if (rc == 0)
                s_record_clear (&record);
            void *handle = zlistx_find (self->pending, entry);
            if (handle)
                zlistx_delete (self->pending, handle);
            continue;
        }
        char id [NOTIFY_ID_LEN + 1];
        notify_id_format (entry->key, id);
        zmsg_t *msg = zmsg_new ();
        zmsg_addmem (msg, entry->key, NOTIFY_KEY_LEN);
        zmsg_addstrf (msg, "%zd", worker);
        zmsg_addstr (msg, record.url);
        zmsg_addstr (msg, record.body);
        zmsg_addstr (msg, config->secret ? config->secret : "");
        zmsg_addstrf (msg, "%" PRId64, config->timeout_ms);
        zmsg_addstr (msg, id);
        zmsg_addstr (msg, record.job);
        zmsg_addstrf (msg, "%" PRId64, record.attempts + 1);
        if (zmsg_send (&msg, zactor_sock (self->workers [worker])) == 0) {
            self->busy [worker] = true;
            entry->in_flight = true;
            zhashx_update (busy, entry->url, (void *) "");
        }
        zmsg_destroy (&msg);
        s_record_clear (&record);
    }
    store_abort (&txn);
    zlistx_destroy (&due);
    zhashx_destroy (&busy);
    self->counters.pending = zlistx_size (self->pending);
}

int
notify_outcome_recv (notify_t *self, notify_outcome_t *outcome)
{
    memset (outcome, 0, sizeof *outcome);
    zmsg_t *msg = zmsg_recv (self->outcomes);
    if (!msg)
        return -1;
    int rc = zmsg_size (msg) == 6 ? 0 : -1;
    zframe_t *key = zmsg_pop (msg);
    char *worker = zmsg_popstr (msg);
    char *ok = zmsg_popstr (msg);
    char *code = zmsg_popstr (msg);
    char *error = zmsg_popstr (msg);
    char *duration = zmsg_popstr (msg);
    if (rc == 0 && zframe_size (key) == NOTIFY_KEY_LEN) {
        memcpy (outcome->key, zframe_data (key), NOTIFY_KEY_LEN);
        outcome->ok = strcmp (ok, "1") == 0;
        outcome->code = atol (code);
        snprintf (outcome->error, sizeof outcome->error, "%s", error);
        outcome->duration_ms = atoll (duration);
        long index = atol (worker);
        if (index >= 0 && (size_t) index < self->worker_count)
            self->busy [index] = false;
        //  The delivery is free to go again, whether or not its outcome
        //  can be recorded
        s_pending_t *entry = s_pending_find (self, outcome->key);
        if (entry)
            entry->in_flight = false;
    }
    else
        rc = -1;
    zframe_destroy (&key);
    zstr_free (&worker);
    zstr_free (&ok);
    zstr_free (&code);
    zstr_free (&error);
    zstr_free (&duration);
    zmsg_destroy (&msg);
    return rc;
}

int
notify_outcome_apply (notify_t *self, store_txn_t *txn,
                      const notify_config_t *config,
                      const notify_outcome_t *outcome, int64_t wall_ms,
                      char *job_id, const char **event, char *detail,
                      size_t detail_len)
{
    s_pending_t *entry = s_pending_find (self, outcome->key);
    s_record_t record;
    int rc = s_record_get (txn, outcome->key, &record);
    if (rc != 0 || strcmp (record.status, "pending") != 0) {
        if (rc == 0)
            s_record_clear (&record);
        return rc == STORE_ENOTFOUND || rc == 0 || rc == -2 ? 1 : rc;
    }
    char id [NOTIFY_ID_LEN + 1], shown [256];
    notify_id_format (outcome->key, id);
    notify_url_show (record.url, shown, sizeof shown);
    record.attempts++;
    record.updated_ms = wall_ms;
    record.code = outcome->code;
    snprintf (record.error, sizeof record.error, "%s", outcome->error);
    bool done = true;
    if (outcome->ok) {
        snprintf (record.status, sizeof record.status, "sent");
        *event = "notify_sent";
        snprintf (detail, detail_len, "delivery %s to %s: HTTP %ld (attempt %"
                  PRId64 ", %" PRId64 " ms)", id, shown, outcome->code,
                  record.attempts, outcome->duration_ms);
        self->counters.sent++;
    }
    else
    if (wall_ms - record.since_ms >= config->retry_for_ms) {
        snprintf (record.status, sizeof record.status, "dead");
        *event = "notify_dead";
        snprintf (detail, detail_len, "delivery %s to %s: %s (attempt %" PRId64
                  "); given up after %" PRId64 " s", id, shown, outcome->error,
                  record.attempts, (wall_ms - record.since_ms) / 1000);
        self->counters.failed++;
        self->counters.dead++;
    }
    else {
        done = false;
        int64_t backoff = notify_backoff_ms (config, (uint32_t) record.attempts,
                                             (double) random () / RAND_MAX);
        record.next_ms = wall_ms + backoff;
        *event = "notify_failed";
        snprintf (detail, detail_len, "delivery %s to %s: %s (attempt %" PRId64
                  "); next in %" PRId64 " ms", id, shown, outcome->error,
                  record.attempts, backoff);
        self->counters.failed++;
        if (entry)
            entry->next_ms = record.next_ms;
    }
    snprintf (job_id, JOB_ID_LEN + 1, "%s", record.job);
    rc = s_record_put (txn, outcome->key, &record);
    s_record_clear (&record);
    if (rc == 0 && done && entry) {
        void *handle = zlistx_find (self->pending, entry);
        if (handle)
            zlistx_delete (self->pending, handle);
    }
    self->counters.pending = zlistx_size (self->pending);
    return rc;
}

notify_counters_t
notify_counters (const notify_t *self)
{
    return self->counters;
}

//  ---------------------------------------------------------------------
//  The operator's requests

static void
s_write_entry (const uint8_t *key, const s_record_t *record, pw_t *writer)
{
    char id [NOTIFY_ID_LEN + 1], shown [JOB_NOTIFY_URL_MAX + 8], when [40];
    notify_id_format (key, id);
    notify_url_show (record->url, shown, sizeof shown);
    pw_map (writer, 9 + (record->code ? 1 : 0) + (*record->error ? 1 : 0));
    pw_str (writer, "id");
    pw_str (writer, id);
    pw_str (writer, "job");
    pw_str (writer, record->job);
    pw_str (writer, "url");
    pw_str (writer, shown);
    pw_str (writer, "source");
    pw_str (writer, record->source);
    pw_str (writer, "status");
    pw_str (writer, record->status);
    pw_str (writer, "attempts");
    pw_int (writer, record->attempts);
    pw_str (writer, "created");
    pw_str (writer, s_iso (record->created_ms, when, sizeof when));
    pw_str (writer, "next");
    if (strcmp (record->status, "pending") == 0)
        pw_str (writer, s_iso (record->next_ms, when, sizeof when));
    else
        pw_nil (writer);
    pw_str (writer, "updated");
    pw_str (writer, s_iso (record->updated_ms, when, sizeof when));
    if (record->code) {
        pw_str (writer, "code");
        pw_int (writer, record->code);
    }
    if (*record->error) {
        pw_str (writer, "error");
        pw_str (writer, record->error);
    }
}

int
notify_list (store_txn_t *txn, const char *status, const char *job,
             size_t limit, pw_t *writer)
{
    if (limit == 0 || limit > NOTIFY_LIST_MAX)
        limit = NOTIFY_LIST_DEFAULT;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NOTIFY);
    if (!cursor)
        return -1;
    pw_t *entries = pw_new ();
    size_t count = 0;
    const void *k, *v;
    size_t k_len, v_len;
    int rc = store_cursor_last (cursor, &k, &k_len, &v, &v_len);
    while (rc == 0 && count < limit) {
        s_record_t record;
        if (k_len == NOTIFY_KEY_LEN && s_record_decode (v, v_len, &record) == 0) {
            if ((!status || strcmp (status, record.status) == 0)
                && (!job || strcmp (job, record.job) == 0)) {
                s_write_entry ((const uint8_t *) k, &record, entries);
                count++;
            }
            s_record_clear (&record);
        }
        rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    pw_map (writer, 1);
    pw_str (writer, "deliveries");
    pw_array (writer, count);
    pw_raw (writer, pw_data (entries), pw_size (entries));
    pw_destroy (&entries);
    return 0;
}

int
notify_retry (notify_t *self, store_txn_t *txn, const char *id,
              int64_t wall_ms, char *job_id)
{
    uint8_t key [NOTIFY_KEY_LEN];
    if (notify_id_parse (id, key) != 0)
        return STORE_ENOTFOUND;
    s_record_t record;
    int rc = s_record_get (txn, key, &record);
    if (rc != 0)
        return rc == -2 ? STORE_ENOTFOUND : rc;
    snprintf (job_id, JOB_ID_LEN + 1, "%s", record.job);
    if (strcmp (record.status, "pending") == 0) {
        s_record_clear (&record);
        return 1;
    }
    snprintf (record.status, sizeof record.status, "pending");
    record.since_ms = record.next_ms = record.updated_ms = wall_ms;
    rc = s_record_put (txn, key, &record);
    if (rc == 0) {
        s_pending_add (self, key, record.url, wall_ms);
        self->counters.pending = zlistx_size (self->pending);
    }
    s_record_clear (&record);
    return rc;
}

int
notify_prune (store_txn_t *txn, int64_t cutoff_ms, size_t limit)
{
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NOTIFY);
    if (!cursor)
        return STORE_EIO;
    zlistx_t *doomed = zlistx_new ();
    zlistx_set_destructor (doomed, (zlistx_destructor_fn *) zchunk_destroy);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len);
    while (rc == 0 && zlistx_size (doomed) < limit) {
        //  Keys go by the time a delivery was queued, and none changed
        //  before it was queued: the rest are all too young
        int64_t queued_ms;
        uint32_t seq;
        if (stamp_key_parse (k, k_len, &queued_ms, &seq) == 0
            && queued_ms >= cutoff_ms)
            break;
        s_record_t record;
        if (s_record_decode (v, v_len, &record) != 0)
            zlistx_add_end (doomed, zchunk_new (k, k_len));
        else {
            if (strcmp (record.status, "pending") != 0
                && record.updated_ms < cutoff_ms)
                zlistx_add_end (doomed, zchunk_new (k, k_len));
            s_record_clear (&record);
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    int purged = 0;
    for (zchunk_t *key = (zchunk_t *) zlistx_first (doomed); key;
         key = (zchunk_t *) zlistx_next (doomed)) {
        rc = store_del (txn, STORE_DB_NOTIFY, zchunk_data (key),
                        zchunk_size (key));
        if (rc != 0 && rc != STORE_ENOTFOUND) {
            zlistx_destroy (&doomed);
            return rc;
        }
        purged++;
    }
    zlistx_destroy (&doomed);
    return purged;
}
