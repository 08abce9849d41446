/*  =========================================================================
    spool - the agent's durable record of the work it took

    The store holds the truth; an in-memory index (key -> state) answers
    the dedup questions of every incoming command without a transaction,
    and an ordered list of done keys makes trimming the oldest cheap.
    =========================================================================
*/
#include "spool.h"

#include <czmq.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../store/store.h"

#define S_MAP_BYTES (32u << 20)         //  Initial LMDB map
#define S_MAX_MAP_BYTES (1024u << 20)   //  It may grow to this
#define S_DONE_PREFIX "#|"
#define S_DONE_PREFIX_LEN 2
#define S_ENTRIES_FROM "$"              //  First key after every done record

//  One change an acknowledgement makes, waiting for the next commit: the
//  entry KEY goes and its done record SEQ comes, or (TRIM) the done
//  record of KEY goes.
typedef struct {
    char key [SPOOL_KEY_MAX];
    uint64_t seq;
    bool trim;
} s_forget_t;

//  The changes of one commit, made in TXN. Returns 0 or a store error.
typedef int (s_change_fn) (store_txn_t *txn, void *arg);

struct _spool_t {
    store_t *store;             //  The LMDB environment
    zhashx_t *index;            //  key -> spool_state_t (as a pointer)
    zhashx_t *done;             //  key -> its handle in done_order
    zlistx_t *done_order;       //  Done keys, oldest first (owned strings)
    size_t done_keep;           //  Most done records kept
    uint64_t done_seq;          //  Sequence of the newest done record
    size_t unacked;             //  Entries in state RESULT
    s_forget_t *forgets;        //  Acknowledgements not yet on disk,
    size_t forget_count;        //  applied by the next commit, oldest
    size_t forget_size;         //  first (spool_flush)
};

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

void
spool_key (const char *job, uint32_t step, uint32_t attempt, char *buf,
           size_t buf_len)
{
    snprintf (buf, buf_len, "%s|%u|%u", job, step, attempt);
}

void
spool_output_key (const char *job, uint32_t step, uint32_t attempt,
                  const char *stream, uint64_t offset, char *buf,
                  size_t buf_len)
{
    snprintf (buf, buf_len, "%s|%u|%u|%c|%" PRIu64, job, step, attempt,
              stream && strcmp (stream, "stderr") == 0 ? 'e' : 'o', offset);
}

bool
spool_key_is_output (const char *key)
{
    //  job|step|attempt|stream|offset, where an attempt's key has three
    size_t bars = 0;
    for (const char *at = key; *at; at++)
        bars += *at == '|';
    return bars == 4;
}

static spool_state_t
s_state_of (proto_type_t type)
{
    switch (type) {
        case PROTO_ACK: return SPOOL_ACKED;
        case PROTO_STARTED: return SPOOL_STARTED;
        case PROTO_RESULT: return SPOOL_RESULT;
        case PROTO_OUTPUT: return SPOOL_OUTPUT;
        default: return SPOOL_NONE;
    }
}

//  States that wait for the broker's acknowledgement
static bool
s_unacked (spool_state_t state)
{
    return state == SPOOL_RESULT || state == SPOOL_OUTPUT;
}

static void
s_index_set (spool_t *self, const char *key, spool_state_t state)
{
    spool_state_t old = (spool_state_t) (uintptr_t) zhashx_lookup (
        self->index, key);
    if (s_unacked (old))
        self->unacked--;
    if (s_unacked (state))
        self->unacked++;
    if (state == SPOOL_NONE)
        zhashx_delete (self->index, key);
    else
        zhashx_update (self->index, key, (void *) (uintptr_t) state);
}

static void
s_seq_encode (uint64_t seq, unsigned char *buf)
{
    for (int index = 7; index >= 0; index--) {
        buf [index] = (unsigned char) (seq & 0xff);
        seq >>= 8;
    }
}

static uint64_t
s_seq_decode (const unsigned char *buf)
{
    uint64_t seq = 0;
    for (int index = 0; index < 8; index++)
        seq = (seq << 8) | buf [index];
    return seq;
}

//  The waiting acknowledgements, into TXN.
static int
s_forgets_apply (spool_t *self, store_txn_t *txn)
{
    int rc = 0;
    for (size_t index = 0; rc == 0 && index < self->forget_count; index++) {
        s_forget_t *forget = &self->forgets [index];
        char done_key [SPOOL_KEY_MAX + S_DONE_PREFIX_LEN];
        snprintf (done_key, sizeof (done_key), S_DONE_PREFIX "%s",
                  forget->key);
        if (forget->trim)
            rc = store_del (txn, STORE_DB_SPOOL, done_key, strlen (done_key));
        else {
            unsigned char seq [8];
            s_seq_encode (forget->seq, seq);
            rc = store_del (txn, STORE_DB_SPOOL, forget->key,
                            strlen (forget->key));
            if (rc == STORE_ENOTFOUND)
                rc = 0;
            if (rc == 0)
                rc = store_put (txn, STORE_DB_SPOOL, done_key,
                                strlen (done_key), seq, sizeof (seq));
        }
        if (rc == STORE_ENOTFOUND)
            rc = 0;
    }
    return rc;
}

//  One durable commit of CHANGE (may be NULL) with the waiting
//  acknowledgements; should that fail, CHANGE alone is tried again (the
//  acknowledgements wait on). Returns 0 or a store error.
static int
s_commit (spool_t *self, s_change_fn *change, void *arg)
{
    int rc = STORE_EIO;
    for (int pass = self->forget_count ? 0 : 1; pass < 2; pass++) {
        if (pass == 1 && !change)
            break;
        store_txn_t *txn = store_begin (self->store, true);
        rc = txn ? 0 : STORE_EIO;
        if (rc == 0 && pass == 0)
            rc = s_forgets_apply (self, txn);
        if (rc == 0 && change)
            rc = change (txn, arg);
        if (rc == 0)
            rc = store_commit (&txn);
        else
            store_abort (&txn);
        if (rc == 0) {
            if (pass == 0)
                self->forget_count = 0;
            return 0;
        }
    }
    return rc;
}

//  Queues FORGET for the next commit. Returns 0, or -1 when memory runs
//  out.
static int
s_forget_add (spool_t *self, const char *key, uint64_t seq, bool trim)
{
    if (self->forget_count == self->forget_size) {
        size_t size = self->forget_size ? self->forget_size * 2 : 16;
        s_forget_t *grown = (s_forget_t *) realloc (
            self->forgets, size * sizeof (s_forget_t));
        if (!grown)
            return -1;
        self->forgets = grown;
        self->forget_size = size;
    }
    s_forget_t *forget = &self->forgets [self->forget_count++];
    snprintf (forget->key, sizeof (forget->key), "%s", key);
    forget->seq = seq;
    forget->trim = trim;
    return 0;
}

//  Remembers KEY as done, newest.
static void
s_done_remember (spool_t *self, const char *key)
{
    if (zhashx_lookup (self->done, key))
        return;
    char *copy = strdup (key);
    if (!copy)
        return;
    void *handle = zlistx_add_end (self->done_order, copy);
    zhashx_insert (self->done, key, handle);
}

typedef struct {
    char *key;                  //  Entry key (without the prefix)
    uint64_t seq;               //  Its sequence
} s_done_item_t;

static int
s_done_compare (const void *left, const void *right)
{
    uint64_t a = ((const s_done_item_t *) left)->seq;
    uint64_t b = ((const s_done_item_t *) right)->seq;
    return a < b ? -1 : a > b ? 1 : 0;
}

//  Reads every record into the index; drops entries that do not decode.
static int
s_load (spool_t *self, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (self->store, true);
    if (!txn) {
        s_err (err, err_len, "spool: %s", store_last_error (self->store));
        return -1;
    }
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_SPOOL);
    if (!cursor) {
        store_abort (&txn);
        s_err (err, err_len, "spool: %s", store_last_error (self->store));
        return -1;
    }
    zlistx_t *bad = zlistx_new ();
    zlistx_set_destructor (bad, (zlistx_destructor_fn *) zstr_free);
    s_done_item_t *items = NULL;
    size_t item_count = 0, item_size = 0;
    const void *k, *v;
    size_t k_len, v_len;
    int rc = store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len);
    while (rc == 0) {
        char key [SPOOL_KEY_MAX + S_DONE_PREFIX_LEN + 1];
        if (k_len >= sizeof (key)) {
            zlistx_add_end (bad, strndup ((const char *) k, sizeof (key) - 1));
            rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
            continue;
        }
        memcpy (key, k, k_len);
        key [k_len] = 0;
        if (strncmp (key, S_DONE_PREFIX, S_DONE_PREFIX_LEN) == 0) {
            if (v_len == 8) {
                if (item_count == item_size) {
                    item_size = item_size ? item_size * 2 : 64;
                    items = (s_done_item_t *) realloc (
                        items, item_size * sizeof (s_done_item_t));
                }
                if (items) {
                    items [item_count].key = strdup (key + S_DONE_PREFIX_LEN);
                    items [item_count].seq = s_seq_decode (
                        (const unsigned char *) v);
                    item_count++;
                }
            }
            else
                zlistx_add_end (bad, strdup (key));
        }
        else {
            proto_msg_t *msg = NULL;
            spool_state_t state = SPOOL_NONE;
            if (proto_msg_decode (v, v_len, &msg, NULL, 0) == 0)
                state = s_state_of (msg->type);
            proto_msg_destroy (&msg);
            if (state == SPOOL_NONE)
                zlistx_add_end (bad, strdup (key));
            else
                s_index_set (self, key, state);
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    char *key = (char *) zlistx_first (bad);
    while (key) {
        store_del (txn, STORE_DB_SPOOL, key, strlen (key));
        key = (char *) zlistx_next (bad);
    }
    zlistx_destroy (&bad);
    rc = store_commit (&txn);
    if (items) {
        qsort (items, item_count, sizeof (s_done_item_t), s_done_compare);
        for (size_t index = 0; index < item_count; index++) {
            if (items [index].key)
                s_done_remember (self, items [index].key);
            free (items [index].key);
        }
        if (item_count)
            self->done_seq = items [item_count - 1].seq;
    }
    free (items);
    if (rc) {
        s_err (err, err_len, "spool: %s", store_strerror (rc));
        return -1;
    }
    return 0;
}

spool_t *
spool_open (const char *dir, size_t done_keep, char *err, size_t err_len)
{
    spool_t *self = (spool_t *) calloc (1, sizeof (spool_t));
    if (!self) {
        s_err (err, err_len, "out of memory");
        return NULL;
    }
    self->done_keep = done_keep ? done_keep : SPOOL_DONE_KEEP;
    self->index = zhashx_new ();
    self->done = zhashx_new ();
    self->done_order = zlistx_new ();
    if (!self->index || !self->done || !self->done_order) {
        s_err (err, err_len, "out of memory");
        spool_destroy (&self);
        return NULL;
    }
    zlistx_set_destructor (self->done_order,
                           (zlistx_destructor_fn *) zstr_free);
    self->store = store_open (dir, S_MAP_BYTES, S_MAX_MAP_BYTES, err,
                              err_len);
    if (!self->store || s_load (self, err, err_len)) {
        spool_destroy (&self);
        return NULL;
    }
    return self;
}

const char *
spool_migration (spool_t *self, size_t index)
{
    return store_migration (self->store, index);
}

void
spool_destroy (spool_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    spool_t *self = *self_p;
    if (self->store && self->forget_count)
        s_commit (self, NULL, NULL);
    store_destroy (&self->store);
    free (self->forgets);
    zhashx_destroy (&self->index);
    zhashx_destroy (&self->done);
    zlistx_destroy (&self->done_order);
    free (self);
    *self_p = NULL;
}

spool_state_t
spool_state (spool_t *self, const char *job, uint32_t step,
             uint32_t attempt)
{
    char key [SPOOL_KEY_MAX];
    spool_key (job, step, attempt, key, sizeof (key));
    spool_state_t state = (spool_state_t) (uintptr_t) zhashx_lookup (
        self->index, key);
    if (state != SPOOL_NONE)
        return state;
    return zhashx_lookup (self->done, key) ? SPOOL_DONE : SPOOL_NONE;
}

typedef struct {
    const char *key;
    pw_t *writer;
} s_put_t;

static int
s_put_change (store_txn_t *txn, void *arg)
{
    s_put_t *put = (s_put_t *) arg;
    return store_put (txn, STORE_DB_SPOOL, put->key, strlen (put->key),
                      pw_data (put->writer), pw_size (put->writer));
}

int
spool_put (spool_t *self, const proto_msg_t *msg, char *err, size_t err_len)
{
    spool_state_t state = s_state_of (msg->type);
    if (state == SPOOL_NONE || !msg->job) {
        s_err (err, err_len, "spool: cannot keep a %s message",
               proto_type_name (msg->type));
        return -1;
    }
    //  Kept at the oldest protocol version: the agent's previous release
    //  reads the spool too (and the broker takes any spoken version). It
    //  knows no traceparent and refuses ints in data (typed_data): kept
    //  without the one, the other as text
    proto_msg_t kept = *msg;
    kept.protocol = PROTO_VERSION_MIN;
    kept.traceparent = NULL;
    proto_kv_t *text_data = NULL;
    if (msg->data_count) {
        text_data = (proto_kv_t *) malloc (msg->data_count
                                           * sizeof (proto_kv_t));
        if (!text_data) {
            s_err (err, err_len, "spool: out of memory");
            return -1;
        }
        for (size_t index = 0; index < msg->data_count; index++) {
            text_data [index] = msg->data [index];
            text_data [index].number = false;
        }
        kept.data = text_data;
    }
    pw_t *writer = pw_new ();
    int encoded = proto_msg_encode (&kept, writer);
    free (text_data);
    if (encoded) {
        pw_destroy (&writer);
        s_err (err, err_len, "spool: the %s message does not encode",
               proto_type_name (msg->type));
        return -1;
    }
    char key [SPOOL_KEY_MAX];
    if (msg->type == PROTO_OUTPUT)
        spool_output_key (msg->job, msg->step, msg->attempt, msg->stream,
                          msg->offset, key, sizeof (key));
    else
        spool_key (msg->job, msg->step, msg->attempt, key, sizeof (key));
    s_put_t put = { .key = key, .writer = writer };
    int rc = s_commit (self, s_put_change, &put);
    pw_destroy (&writer);
    if (rc) {
        s_err (err, err_len, "spool: %s (%s)", store_strerror (rc),
               store_last_error (self->store));
        return -1;
    }
    s_index_set (self, key, state);
    return 0;
}

int
spool_result (spool_t *self, const char *job, uint32_t step,
              uint32_t attempt, void **data_p, size_t *size_p)
{
    *data_p = NULL;
    *size_p = 0;
    if (spool_state (self, job, step, attempt) != SPOOL_RESULT)
        return -1;
    char key [SPOOL_KEY_MAX];
    spool_key (job, step, attempt, key, sizeof (key));
    store_txn_t *txn = store_begin (self->store, false);
    if (!txn)
        return -1;
    const void *value;
    size_t value_len;
    int rc = store_get (txn, STORE_DB_SPOOL, key, strlen (key), &value,
                        &value_len);
    if (rc == 0) {
        *data_p = malloc (value_len ? value_len : 1);
        if (*data_p) {
            memcpy (*data_p, value, value_len);
            *size_p = value_len;
        }
        else
            rc = -1;
    }
    store_abort (&txn);
    return rc == 0 ? 0 : -1;
}

int
spool_ack (spool_t *self, const char *job, uint32_t step, uint32_t attempt)
{
    proto_ack_t ack = { .job = job, .step = step, .attempt = attempt };
    return spool_ack_many (self, &ack, 1, NULL);
}

int
spool_ack_many (spool_t *self, const proto_ack_t *acks, size_t count,
                size_t *unknown_p)
{
    size_t unknown = 0;
    if (unknown_p)
        *unknown_p = 0;
    //  Room first, so that nothing changes when memory runs out: each
    //  ack may also trim one old done record
    size_t need = self->forget_count + 2 * count;
    while (self->forget_size < need) {
        size_t size = self->forget_size ? self->forget_size * 2 : 16;
        s_forget_t *grown = (s_forget_t *) realloc (
            self->forgets, size * sizeof (s_forget_t));
        if (!grown)
            return -1;
        self->forgets = grown;
        self->forget_size = size;
    }
    for (size_t index = 0; index < count; index++) {
        char key [SPOOL_KEY_MAX];
        spool_key (acks [index].job, acks [index].step, acks [index].attempt,
                   key, sizeof (key));
        //  Out of the index at once: a repeated entry counts as unknown
        if ((spool_state_t) (uintptr_t) zhashx_lookup (self->index, key)
            != SPOOL_RESULT) {
            unknown++;
            continue;
        }
        s_forget_add (self, key, ++self->done_seq, false);
        s_index_set (self, key, SPOOL_NONE);
        s_done_remember (self, key);
    }
    //  Forget the oldest done records beyond the bound
    while (zlistx_size (self->done_order) > self->done_keep) {
        char *oldest = (char *) zlistx_first (self->done_order);
        s_forget_add (self, oldest, 0, true);
        zhashx_delete (self->done, oldest);
        zlistx_delete (self->done_order, zlistx_cursor (self->done_order));
    }
    if (unknown_p)
        *unknown_p = unknown;
    return 0;
}

int
spool_flush (spool_t *self)
{
    if (self->forget_count == 0)
        return 0;
    return s_commit (self, NULL, NULL) == 0 ? 0 : -1;
}

size_t
spool_unflushed (spool_t *self)
{
    return self->forget_count;
}

static int
s_del_change (store_txn_t *txn, void *arg)
{
    const char *key = (const char *) arg;
    int rc = store_del (txn, STORE_DB_SPOOL, key, strlen (key));
    return rc == STORE_ENOTFOUND ? 0 : rc;
}

int
spool_ack_output (spool_t *self, const char *job, uint32_t step,
                  uint32_t attempt, const char *stream, uint64_t offset)
{
    char key [SPOOL_KEY_MAX];
    spool_output_key (job, step, attempt, stream, offset, key, sizeof (key));
    if ((spool_state_t) (uintptr_t) zhashx_lookup (self->index, key)
        != SPOOL_OUTPUT)
        return 0;
    if (s_commit (self, s_del_change, key))
        return -1;
    s_index_set (self, key, SPOOL_NONE);
    return 0;
}

int
spool_recover (spool_t *self, const char *node)
{
    //  Collect first: spool_put changes the index
    zlistx_t *keys = zlistx_new ();
    zlistx_set_destructor (keys, (zlistx_destructor_fn *) zstr_free);
    void *state = zhashx_first (self->index);
    while (state) {
        spool_state_t value = (spool_state_t) (uintptr_t) state;
        if (value == SPOOL_ACKED || value == SPOOL_STARTED)
            zlistx_add_end (keys, strdup ((const char *) zhashx_cursor (
                self->index)));
        state = zhashx_next (self->index);
    }
    int count = 0;
    char *key = (char *) zlistx_first (keys);
    while (key && count >= 0) {
        char job [SPOOL_KEY_MAX];
        unsigned step = 0, attempt = 0;
        char *bar = strchr (key, '|');
        if (bar && (size_t) (bar - key) < sizeof (job)
        &&  sscanf (bar, "|%u|%u", &step, &attempt) == 2) {
            memcpy (job, key, (size_t) (bar - key));
            job [bar - key] = 0;
            bool started = (spool_state_t) (uintptr_t) zhashx_lookup (
                self->index, key) == SPOOL_STARTED;
            proto_msg_t *result = proto_msg_new (PROTO_RESULT);
            result->node = strdup (node);
            result->job = strdup (job);
            result->step = step;
            result->attempt = attempt;
            result->status = strdup ("interrupted");
            result->output = strdup ("");
            result->error = strdup (started
                ? "agent restarted while the task ran"
                : "agent restarted before the task ran");
            result->exit_code = -1;
            if (spool_put (self, result, NULL, 0))
                count = -1;
            else
                count++;
            proto_msg_destroy (&result);
        }
        key = (char *) zlistx_next (keys);
    }
    zlistx_destroy (&keys);
    return count;
}

size_t
spool_each_result (spool_t *self, spool_each_fn *fn, void *arg, size_t max)
{
    if (self->unacked == 0)
        return 0;
    store_txn_t *txn = store_begin (self->store, false);
    if (!txn)
        return 0;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_SPOOL);
    size_t count = 0;
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, S_ENTRIES_FROM, 1, &k,
                                         &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0 && (max == 0 || count < max)) {
        char key [SPOOL_KEY_MAX];
        if (k_len < sizeof (key)) {
            memcpy (key, k, k_len);
            key [k_len] = 0;
            if (s_unacked ((spool_state_t) (uintptr_t) zhashx_lookup (
                    self->index, key))) {
                if (fn (arg, key, v, v_len))
                    count++;
            }
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    store_abort (&txn);
    return count;
}

size_t
spool_unacked (spool_t *self)
{
    return self->unacked;
}
