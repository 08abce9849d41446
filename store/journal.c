/*  =========================================================================
    journal - a write transaction's changes, applied to another store
    (see journal.h)
    =========================================================================
*/

#include "journal.h"

#include <stdio.h>
#include <string.h>

#include "../proto/mpscan.h"
#include "../proto/pv.h"

//  Checks entry INDEX (VALUE) of a journal: its op, database and key.
//  Returns 0, or -1 with a sentence in ERR.
static int
s_check (const pv_t *value, size_t index, char *op, store_db_t *db,
         char *err, size_t err_len)
{
    size_t count = pv_type (value) == PV_ARRAY ? pv_size (value) : 0;
    size_t len = 0;
    const char *text = count ? pv_str (pv_array_at (value, 0), &len) : NULL;
    *op = text && len == 1 ? text [0] : 0;
    size_t want = *op == 'p' ? 4 : *op == 'd' || *op == 'x' ? 3 : 0;
    if (!want || count != want) {
        snprintf (err, err_len, "journal entry %zu: expected [op, db, key"
                  "(, value)] with op p, d or x", index);
        return -1;
    }
    const char *name = pv_str (pv_array_at (value, 1), &len);
    *db = store_db_named (name, len);
    if (*db == STORE_DB_COUNT) {
        snprintf (err, err_len, "journal entry %zu: unknown database '%.*s'",
                  index, name ? (int) (len > 40 ? 40 : len) : 0,
                  name ? name : "");
        return -1;
    }
    const pv_t *key = pv_array_at (value, 2);
    size_t key_len = 0;
    pv_str (key, &key_len);
    if (pv_type (key) != PV_BIN || key_len > STORE_MAX_KEY || (key_len == 0 && *op != 'x')) {
        snprintf (err, err_len, "journal entry %zu: a key is a bin of 1 to "
                  "%d bytes", index, STORE_MAX_KEY);
        return -1;
    }
    if (*op == 'p' && pv_type (pv_array_at (value, 3)) != PV_BIN) {
        snprintf (err, err_len, "journal entry %zu: a value is a bin", index);
        return -1;
    }
    return 0;
}

//  Calls FN on each entry of JOURNAL; stops at the first that returns
//  non-zero and returns that (or -1 for bytes that are no entry).
typedef int (s_entry_fn) (const pv_t *value, size_t index, void *arg);

static int
s_each (const void *journal, size_t size, s_entry_fn *fn, void *arg,
        char *err, size_t err_len)
{
    const char *bytes = (const char *) journal;
    size_t at = 0, index = 0;
    while (at < size) {
        size_t len = mpscan_skip (bytes + at, size - at);
        pv_doc_t *doc = NULL;
        if (len == 0
            || pv_doc_decode (bytes + at, len, &doc, NULL, 0) != 0) {
            snprintf (err, err_len, "journal entry %zu: not msgpack, or cut "
                      "short", index);
            return -1;
        }
        int rc = fn (pv_doc_root (doc), index, arg);
        pv_doc_destroy (&doc);
        if (rc)
            return rc;
        at += len;
        index++;
    }
    return 0;
}

typedef struct {
    store_txn_t *txn;
    char *err;
    size_t err_len;
    int applied;
} s_apply_t;

static int
s_checked (const pv_t *value, size_t index, void *arg)
{
    s_apply_t *self = (s_apply_t *) arg;
    char op;
    store_db_t db;
    return s_check (value, index, &op, &db, self->err, self->err_len);
}

static int
s_applied (const pv_t *value, size_t index, void *arg)
{
    s_apply_t *self = (s_apply_t *) arg;
    char op;
    store_db_t db;
    s_check (value, index, &op, &db, self->err, self->err_len);
    size_t key_len = 0, value_len = 0;
    const void *key = pv_str (pv_array_at (value, 2), &key_len);
    int rc = STORE_OK;
    if (op == 'p') {
        const void *data = pv_str (pv_array_at (value, 3), &value_len);
        rc = store_put (self->txn, db, key, key_len, data, value_len);
    }
    else
    if (op == 'd') {
        rc = store_del (self->txn, db, key, key_len);
        //  Deleted on the active: gone here too, whoever was first
        if (rc == STORE_ENOTFOUND)
            rc = STORE_OK;
    }
    else {
        rc = store_del_prefix (self->txn, db, key, key_len);
        if (rc > 0)
            rc = STORE_OK;
    }
    if (rc != STORE_OK) {
        snprintf (self->err, self->err_len, "journal entry %zu: %s", index,
                  store_strerror (rc));
        return rc;
    }
    self->applied++;
    return 0;
}

int
store_apply (store_txn_t *txn, const void *journal, size_t size, char *err,
             size_t err_len)
{
    char scratch [1];
    if (!err || !err_len) {
        err = scratch;
        err_len = sizeof scratch;
    }
    *err = 0;
    if (!txn || (!journal && size)) {
        snprintf (err, err_len, "no transaction, or no journal");
        return STORE_EINVAL;
    }
    s_apply_t self = { txn, err, err_len, 0 };
    //  Read whole first: nothing of a journal that is not one is applied
    if (s_each (journal, size, s_checked, &self, err, err_len))
        return STORE_EINVAL;
    int rc = s_each (journal, size, s_applied, &self, err, err_len);
    if (rc)
        return rc < 0 ? rc : STORE_EINVAL;
    return self.applied;
}
