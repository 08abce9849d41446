/*  =========================================================================
    audit - the audit trail (see audit.h)
    =========================================================================
*/
#include <assert.h>
#include <czmq.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/names.h"
#include "audit.h"

//  A caller's refusals (audit_refusal_admit).
typedef struct {
    int64_t recorded_ms;         //  Monotonic: its last recorded refusal
    int64_t suppressed;          //  Left out since
} s_caller_t;

//  Frees a caller (zhashx destructor).
static void
s_caller_destroy (s_caller_t **self_p)
{
    free (*self_p);
    *self_p = NULL;
}

struct _audit_t {
    bool loaded;                 //  last_ms and last_seq read from the store
    int64_t last_ms;             //  The last key's ms
    uint32_t last_seq;           //  ... and seq
    zhashx_t *callers;           //  Caller -> s_caller_t
};

//  ---------------------------------------------------------------------
//  Records

void
audit_key_make (int64_t ms, uint32_t seq, uint8_t *key)
{
    stamp_key_make (ms, seq, key);
}

int
audit_key_parse (const void *key, size_t key_len, int64_t *ms_p,
                 uint32_t *seq_p)
{
    return stamp_key_parse (key, key_len, ms_p, seq_p);
}

void
audit_id_format (const uint8_t *key, char *id)
{
    hex_encode (key, AUDIT_KEY_LEN, id);
}

int
audit_id_parse (const char *id, uint8_t *key)
{
    return hex_decode (id, key, AUDIT_KEY_LEN);
}

void
audit_text_set (char *buf, size_t size, const char *text)
{
    assert (size > 0);
    size_t len = text ? strlen (text) : 0;
    if (len >= size) {
        len = size - 1;
        //  Back off the continuation bytes of a character cut in two
        while (len > 0 && ((unsigned char) text [len] & 0xC0) == 0x80)
            len--;
    }
    if (len)
        memcpy (buf, text, len);
    buf [len] = 0;
}

//  The fields the stored and the client forms of ENTRY share, from face
//  on (the caller counted them in its map: 6, and one for each optional
//  field ENTRY holds).
static void
s_write_fields (const audit_entry_t *entry, pw_t *writer)
{
    bool object = entry->object [0] != 0;
    bool message = entry->message [0] != 0;
    bool suppressed = entry->suppressed > 0;
    pw_str (writer, "face");
    pw_str (writer, entry->face);
    pw_str (writer, "who");
    pw_str (writer, entry->who);
    pw_str (writer, "role");
    pw_str (writer, entry->role);
    pw_str (writer, "request");
    pw_str (writer, entry->request);
    pw_str (writer, "type");
    pw_str (writer, entry->type);
    if (object) {
        pw_str (writer, "object");
        pw_str (writer, entry->object);
    }
    pw_str (writer, "outcome");
    pw_str (writer, entry->outcome);
    if (message) {
        pw_str (writer, "message");
        pw_str (writer, entry->message);
    }
    if (suppressed) {
        pw_str (writer, "suppressed");
        pw_int (writer, entry->suppressed);
    }
}

void
audit_entry_encode (const audit_entry_t *entry, pw_t *writer)
{
    bool object = entry->object [0] != 0;
    bool message = entry->message [0] != 0;
    bool suppressed = entry->suppressed > 0;
    pw_map (writer, 7 + (object ? 1 : 0) + (message ? 1 : 0)
                        + (suppressed ? 1 : 0));
    pw_str (writer, "at_ms");
    pw_int (writer, entry->at_ms);
    s_write_fields (entry, writer);
}

//  Copies the string field KEY of RECORD into BUF (SIZE bytes). Returns 0,
//  or -1 when it is not a string (absent is "" when OPTIONAL).
static int
s_text_get (const pv_t *record, const char *key, char *buf, size_t size,
            bool optional)
{
    const pv_t *value = pv_map_get (record, key);
    buf [0] = 0;
    if (!value)
        return optional ? 0 : -1;
    char *text = pv_strdup (value);
    if (!text)
        return -1;
    audit_text_set (buf, size, text);
    free (text);
    return 0;
}

int
audit_entry_decode (const pv_t *record, audit_entry_t *entry)
{
    memset (entry, 0, sizeof *entry);
    if (pv_type (record) != PV_MAP
        || pv_get_int (pv_map_get (record, "at_ms"), &entry->at_ms) != 0
        || entry->at_ms < 0
        || s_text_get (record, "face", entry->face, sizeof entry->face,
                       false)
        || s_text_get (record, "who", entry->who, sizeof entry->who, false)
        || s_text_get (record, "role", entry->role, sizeof entry->role,
                       false)
        || s_text_get (record, "request", entry->request,
                       sizeof entry->request, false)
        || s_text_get (record, "type", entry->type, sizeof entry->type,
                       false)
        || s_text_get (record, "object", entry->object, sizeof entry->object,
                       true)
        || s_text_get (record, "outcome", entry->outcome,
                       sizeof entry->outcome, false)
        || s_text_get (record, "message", entry->message,
                       sizeof entry->message, true))
        return -2;
    const pv_t *suppressed = pv_map_get (record, "suppressed");
    if (suppressed
        && (pv_get_int (suppressed, &entry->suppressed) != 0
            || entry->suppressed < 0))
        return -2;
    return 0;
}

bool
audit_outcome_refused (const char *outcome)
{
    return outcome
           && (strcmp (outcome, "unauthorized") == 0
               || strcmp (outcome, "forbidden") == 0);
}

bool
audit_entry_matches (const audit_entry_t *entry, const audit_filter_t *filter)
{
    if (filter->who && strcmp (filter->who, entry->who) != 0)
        return false;
    if (filter->object && strcmp (filter->object, entry->object) != 0)
        return false;
    if (filter->type) {
        size_t len = strlen (filter->type);
        bool prefix = len > 0 && filter->type [len - 1] == '.';
        if (prefix ? strncmp (filter->type, entry->type, len) != 0
                   : strcmp (filter->type, entry->type) != 0)
            return false;
    }
    if (filter->outcome) {
        bool ok = strcmp (entry->outcome, "ok") == 0;
        if (strcmp (filter->outcome, "error") == 0)
            return !ok;
        if (strcmp (filter->outcome, "refused") == 0)
            return audit_outcome_refused (entry->outcome);
        return strcmp (filter->outcome, entry->outcome) == 0;
    }
    return true;
}

//  ---------------------------------------------------------------------
//  The trail

audit_t *
audit_new (void)
{
    audit_t *self = (audit_t *) zmalloc (sizeof (audit_t));
    self->callers = zhashx_new ();
    assert (self->callers);
    zhashx_set_destructor (self->callers,
                           (zhashx_destructor_fn *) s_caller_destroy);
    return self;
}

void
audit_destroy (audit_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    audit_t *self = *self_p;
    zhashx_destroy (&self->callers);
    free (self);
    *self_p = NULL;
}

int
audit_put (audit_t *self, store_txn_t *txn, const audit_entry_t *entry)
{
    if (!self->loaded) {
        store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_AUDIT);
        const void *k, *v;
        size_t k_len, v_len;
        if (cursor && store_cursor_last (cursor, &k, &k_len, &v, &v_len) == 0)
            audit_key_parse (k, k_len, &self->last_ms, &self->last_seq);
        store_cursor_destroy (&cursor);
        self->loaded = true;
    }
    //  Keys never go back, whatever the wall clock does
    int64_t ms = entry->at_ms > self->last_ms ? entry->at_ms : self->last_ms;
    uint32_t seq = 0;
    if (ms == self->last_ms) {
        if (self->last_seq == UINT32_MAX)
            ms++;
        else
            seq = self->last_seq + 1;
    }
    uint8_t key [AUDIT_KEY_LEN];
    audit_key_make (ms, seq, key);
    pw_t *writer = pw_new ();
    audit_entry_encode (entry, writer);
    int rc = store_put (txn, STORE_DB_AUDIT, key, sizeof key, pw_data (writer),
                        pw_size (writer));
    pw_destroy (&writer);
    if (rc == 0) {
        self->last_ms = ms;
        self->last_seq = seq;
    }
    return rc;
}

bool
audit_refusal_admit (audit_t *self, const char *caller, int64_t now_ms,
                     int64_t *suppressed_p)
{
    *suppressed_p = 0;
    s_caller_t *known = (s_caller_t *) zhashx_lookup (self->callers, caller);
    if (known && now_ms - known->recorded_ms < AUDIT_REFUSED_MS) {
        known->suppressed++;
        return false;
    }
    if (known) {
        *suppressed_p = known->suppressed;
        known->recorded_ms = now_ms;
        known->suppressed = 0;
        return true;
    }
    if (zhashx_size (self->callers) >= AUDIT_CALLERS_MAX) {
        //  Callers quiet for a while are forgotten first, then all
        zlistx_t *quiet = zlistx_new ();
        for (s_caller_t *item = (s_caller_t *) zhashx_first (self->callers);
             item; item = (s_caller_t *) zhashx_next (self->callers))
            if (now_ms - item->recorded_ms >= AUDIT_REFUSED_MS)
                zlistx_add_end (quiet, (void *) zhashx_cursor (self->callers));
        for (void *key = zlistx_first (quiet); key; key = zlistx_next (quiet))
            zhashx_delete (self->callers, key);
        zlistx_destroy (&quiet);
        if (zhashx_size (self->callers) >= AUDIT_CALLERS_MAX)
            zhashx_purge (self->callers);
    }
    s_caller_t *item = (s_caller_t *) zmalloc (sizeof (s_caller_t));
    item->recorded_ms = now_ms;
    zhashx_insert (self->callers, caller, item);
    return true;
}

//  Writes ENTRY, stored under KEY, as audit.list returns it.
static void
s_entry_write (const uint8_t *key, const audit_entry_t *entry, pw_t *writer)
{
    bool object = entry->object [0] != 0;
    bool message = entry->message [0] != 0;
    bool suppressed = entry->suppressed > 0;
    char id [AUDIT_ID_LEN + 1];
    audit_id_format (key, id);
    char time [TIME_TEXT_LEN];
    time_format (entry->at_ms, time, sizeof time);
    pw_map (writer, 8 + (object ? 1 : 0) + (message ? 1 : 0)
                        + (suppressed ? 1 : 0));
    pw_str (writer, "id");
    pw_str (writer, id);
    pw_str (writer, "time");
    pw_str (writer, time);
    s_write_fields (entry, writer);
}

int
audit_list (store_txn_t *txn, const audit_filter_t *filter, pw_t *writer)
{
    size_t limit = filter->limit ? filter->limit : AUDIT_LIST_DEFAULT;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_AUDIT);
    if (!cursor)
        return -1;
    const void *k, *v;
    size_t k_len, v_len;
    int rc;
    uint8_t before [AUDIT_KEY_LEN];
    if (filter->before && audit_id_parse (filter->before, before) == 0) {
        //  The first key at or after BEFORE, then one back (past the end:
        //  prev gives the last key)
        rc = store_cursor_seek (cursor, before, sizeof before, &k, &k_len, &v,
                                &v_len);
        rc = rc == 0 || rc == STORE_ENOTFOUND
                 ? store_cursor_prev (cursor, &k, &k_len, &v, &v_len)
                 : rc;
    }
    else
        rc = store_cursor_last (cursor, &k, &k_len, &v, &v_len);
    pw_t *entries = pw_new ();
    size_t count = 0, scanned = 0;
    bool more = false;
    uint8_t last [AUDIT_KEY_LEN];
    while (rc == 0) {
        int64_t ms;
        uint32_t seq;
        if (audit_key_parse (k, k_len, &ms, &seq) != 0) {
            rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
            continue;
        }
        if (filter->since_ms > 0 && ms < filter->since_ms)
            break;
        if (count == limit || scanned == AUDIT_SCAN_MAX) {
            more = true;
            break;
        }
        scanned++;
        memcpy (last, k, AUDIT_KEY_LEN);
        pv_doc_t *doc = NULL;
        audit_entry_t entry;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0
            && audit_entry_decode (pv_doc_root (doc), &entry) == 0
            && audit_entry_matches (&entry, filter)) {
            s_entry_write (last, &entry, entries);
            count++;
        }
        pv_doc_destroy (&doc);
        rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    if (rc != 0 && rc != STORE_ENOTFOUND) {
        pw_destroy (&entries);
        return -1;
    }
    pw_map (writer, more ? 2 : 1);
    pw_str (writer, "entries");
    pw_array (writer, count);
    pw_raw (writer, pw_data (entries), pw_size (entries));
    if (more) {
        char id [AUDIT_ID_LEN + 1];
        audit_id_format (last, id);
        pw_str (writer, "next");
        pw_str (writer, id);
    }
    pw_destroy (&entries);
    return 0;
}

int
audit_prune (store_txn_t *txn, int64_t cutoff_ms, size_t limit)
{
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_AUDIT);
    if (!cursor)
        return STORE_EIO;
    zlistx_t *doomed = zlistx_new ();
    zlistx_set_destructor (doomed, (zlistx_destructor_fn *) zchunk_destroy);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len);
    while (rc == 0 && zlistx_size (doomed) < limit) {
        int64_t ms;
        uint32_t seq;
        if (audit_key_parse (k, k_len, &ms, &seq) == 0 && ms >= cutoff_ms)
            break;
        zlistx_add_end (doomed, zchunk_new (k, k_len));
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    int purged = 0;
    for (zchunk_t *key = (zchunk_t *) zlistx_first (doomed); key;
         key = (zchunk_t *) zlistx_next (doomed)) {
        rc = store_del (txn, STORE_DB_AUDIT, zchunk_data (key),
                        zchunk_size (key));
        if (rc != 0 && rc != STORE_ENOTFOUND) {
            purged = rc;
            break;
        }
        purged++;
    }
    zlistx_destroy (&doomed);
    return purged;
}
