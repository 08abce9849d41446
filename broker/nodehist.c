/*  =========================================================================
    nodehist - a node's registration history (see nodehist.h)
    =========================================================================
*/
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nodehist.h"

#define S_KEY_MAX (NAME_MAX_LEN + 1 + 4)

//  "backend.action" for every action of HELLO. Returns the count;
//  *LIST_P gets a malloc'd array of malloc'd strings.
static size_t
s_actions (const proto_msg_t *hello, char ***list_p)
{
    size_t count = 0;
    for (size_t b = 0; hello && b < hello->backend_count; b++)
        count += hello->backends [b].action_count;
    char **list = (char **) calloc (count ? count : 1, sizeof (char *));
    assert (list);
    size_t at = 0;
    for (size_t b = 0; hello && b < hello->backend_count; b++) {
        const proto_backend_spec_t *backend = &hello->backends [b];
        for (size_t a = 0; a < backend->action_count; a++) {
            size_t len = strlen (backend->name)
                         + strlen (backend->actions [a].name) + 2;
            list [at] = (char *) malloc (len);
            assert (list [at]);
            snprintf (list [at++], len, "%s.%s", backend->name,
                      backend->actions [a].name);
        }
    }
    *list_p = list;
    return count;
}

static int
s_compare (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static void
s_free_list (char **list, size_t count)
{
    for (size_t index = 0; index < count; index++)
        free (list [index]);
    free (list);
}

static const proto_backend_spec_t *
s_backend (const proto_msg_t *hello, const char *name)
{
    for (size_t b = 0; hello && b < hello->backend_count; b++)
        if (strcmp (hello->backends [b].name, name) == 0)
            return &hello->backends [b];
    return NULL;
}

static bool
s_same (const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp (a, b) == 0;
}

static void
s_str_or_nil (pw_t *writer, const char *text)
{
    if (text)
        pw_str (writer, text);
    else
        pw_nil (writer);
}

bool
nodehist_diff (const proto_msg_t *older, const proto_msg_t *newer,
               int64_t wall_ms, pw_t *writer)
{
    //  A first registration names no action, and two lists of one
    //  interned declaration (registry.h) are one pointer and differ in
    //  nothing: only a hello that brings another list is compared by name
    bool compare = older && (older->backends != newer->backends
                             || older->backend_count != newer->backend_count);
    char **was = NULL, **now = NULL;
    size_t was_count = compare ? s_actions (older, &was) : 0;
    size_t now_count = compare ? s_actions (newer, &now) : 0;
    if (!compare)
        for (size_t b = 0; newer && b < newer->backend_count; b++)
            now_count += newer->backends [b].action_count;
    if (compare) {
        qsort (was, was_count, sizeof (char *), s_compare);
        qsort (now, now_count, sizeof (char *), s_compare);
    }
    //  Merge: what only one side has
    char **added = (char **) calloc (now_count + 1, sizeof (char *));
    char **removed = (char **) calloc (was_count + 1, sizeof (char *));
    assert (added && removed);
    size_t added_count = 0, removed_count = 0, i = 0, j = 0;
    while (compare && (i < was_count || j < now_count)) {
        int cmp = i == was_count ? 1 : j == now_count ? -1
                                     : strcmp (was [i], now [j]);
        if (cmp < 0)
            removed [removed_count++] = was [i++];
        else
        if (cmp > 0)
            added [added_count++] = now [j++];
        else {
            i++;
            j++;
        }
    }
    //  Backends on both sides whose version moved
    size_t changed = 0;
    for (size_t b = 0; newer && b < newer->backend_count; b++) {
        const proto_backend_spec_t *before = s_backend (older,
                                                        newer->backends [b].name);
        if (before && !s_same (before->version, newer->backends [b].version))
            changed++;
    }
    const char *old_version = older ? older->version : NULL;
    bool agent_changed = older && !s_same (old_version, newer->version);
    bool wrote = !older || added_count || removed_count || changed
                 || agent_changed;
    if (wrote) {
        pw_map (writer, 7 + (agent_changed ? 1 : 0));
        pw_str (writer, "time_ms");
        pw_int (writer, wall_ms);
        pw_str (writer, "event");
        pw_str (writer, older ? "changed" : "registered");
        pw_str (writer, "agent_version");
        s_str_or_nil (writer, newer->version);
        if (agent_changed) {
            pw_str (writer, "previous_agent_version");
            s_str_or_nil (writer, old_version);
        }
        pw_str (writer, "actions");
        pw_int (writer, (int64_t) now_count);
        pw_str (writer, "added");
        //  A first registration names no action as added: `actions` says
        //  how many it brought
        size_t listed = older ? added_count : 0;
        pw_array (writer, listed);
        for (size_t index = 0; index < listed; index++)
            pw_str (writer, added [index]);
        pw_str (writer, "removed");
        pw_array (writer, removed_count);
        for (size_t index = 0; index < removed_count; index++)
            pw_str (writer, removed [index]);
        pw_str (writer, "versions");
        pw_array (writer, changed);
        for (size_t b = 0; newer && b < newer->backend_count; b++) {
            const proto_backend_spec_t *now_backend = &newer->backends [b];
            const proto_backend_spec_t *before = s_backend (older,
                                                            now_backend->name);
            if (!before || s_same (before->version, now_backend->version))
                continue;
            pw_map (writer, 3);
            pw_str (writer, "backend");
            pw_str (writer, now_backend->name);
            pw_str (writer, "from");
            s_str_or_nil (writer, before->version);
            pw_str (writer, "to");
            s_str_or_nil (writer, now_backend->version);
        }
    }
    free (added);
    free (removed);
    if (compare) {
        s_free_list (was, was_count);
        s_free_list (now, now_count);
    }
    return wrote;
}

static size_t
s_key (const char *node, uint32_t seq, uint8_t *key)
{
    size_t len = strlen (node);
    assert (len <= NAME_MAX_LEN);
    memcpy (key, node, len);
    key [len++] = 0;
    key [len++] = (uint8_t) (seq >> 24);
    key [len++] = (uint8_t) (seq >> 16);
    key [len++] = (uint8_t) (seq >> 8);
    key [len++] = (uint8_t) seq;
    return len;
}

static uint32_t
s_seq (const void *key, size_t key_len)
{
    const uint8_t *bytes = (const uint8_t *) key + key_len - 4;
    return (uint32_t) bytes [0] << 24 | (uint32_t) bytes [1] << 16
           | (uint32_t) bytes [2] << 8 | bytes [3];
}

//  The newest entry's seq of NODE, 0 when it has none.
static uint32_t
s_last_seq (store_txn_t *txn, const char *node)
{
    uint8_t key [S_KEY_MAX];
    size_t key_len = s_key (node, UINT32_MAX, key);
    size_t prefix_len = key_len - 4;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_HISTORY);
    const void *k, *v;
    size_t k_len, v_len;
    uint32_t last = 0;
    int rc = cursor ? store_cursor_seek (cursor, key, key_len, &k, &k_len, &v,
                                         &v_len)
                    : STORE_EIO;
    //  UINT32_MAX itself is never used, so the seek lands past the node
    if (rc == 0)
        rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
    else
    if (cursor)
        rc = store_cursor_last (cursor, &k, &k_len, &v, &v_len);
    if (rc == 0 && k_len == key_len && memcmp (k, key, prefix_len) == 0)
        last = s_seq (k, k_len);
    store_cursor_destroy (&cursor);
    return last;
}

int
nodehist_append (store_txn_t *txn, const char *node, const void *record,
                 size_t size)
{
    uint32_t seq = s_last_seq (txn, node) + 1;
    if (seq == UINT32_MAX)
        return STORE_EINVAL;
    uint8_t key [S_KEY_MAX];
    size_t key_len = s_key (node, seq, key);
    int rc = store_put (txn, STORE_DB_HISTORY, key, key_len, record, size);
    if (rc == 0 && seq > NODEHIST_KEEP) {
        key_len = s_key (node, seq - NODEHIST_KEEP, key);
        rc = store_del (txn, STORE_DB_HISTORY, key, key_len);
        if (rc == STORE_ENOTFOUND)
            rc = 0;
    }
    return rc;
}

//  One stored entry in the client shape, with its SEQ.
static void
s_write_entry (const pv_t *record, uint32_t seq, pw_t *writer)
{
    size_t count = pv_size (record);
    pw_map (writer, count + 1);
    pw_str (writer, "seq");
    pw_int (writer, seq);
    for (size_t index = 0; index < count; index++) {
        const char *name = NULL;
        size_t name_len = 0;
        const pv_t *value = pv_map_entry (record, index, &name, &name_len);
        if (name_len == 7 && memcmp (name, "time_ms", 7) == 0) {
            int64_t wall_ms = 0;
            pv_get_int (value, &wall_ms);
            char text [TIME_TEXT_LEN];
            time_format (wall_ms, text, sizeof text);
            pw_str (writer, "time");
            pw_str (writer, text);
        }
        else {
            pw_strn (writer, name, name_len);
            pw_pv (writer, value);
        }
    }
}

size_t
nodehist_write (store_txn_t *txn, const char *node, size_t limit,
                pw_t *writer)
{
    pw_t *items = pw_new ();
    size_t count = 0;
    uint8_t key [S_KEY_MAX];
    size_t key_len = s_key (node, UINT32_MAX, key);
    size_t prefix_len = key_len - 4;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_HISTORY);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, key, key_len, &k, &k_len, &v,
                                         &v_len)
                    : STORE_EIO;
    if (rc == 0)
        rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
    else
    if (cursor)
        rc = store_cursor_last (cursor, &k, &k_len, &v, &v_len);
    while (rc == 0 && count < limit && k_len == key_len
           && memcmp (k, key, prefix_len) == 0) {
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0
            && pv_type (pv_doc_root (doc)) == PV_MAP) {
            s_write_entry (pv_doc_root (doc), s_seq (k, k_len), items);
            count++;
        }
        pv_doc_destroy (&doc);
        rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    pw_array (writer, count);
    if (count)
        pw_raw (writer, pw_data (items), pw_size (items));
    pw_destroy (&items);
    return count;
}
