/*  =========================================================================
    nodefacts - nodes' facts in the store (see nodefacts.h)
    =========================================================================
*/
#include <stdlib.h>
#include <string.h>

#include "../proto/pv.h"
#include "nodefacts.h"

int
nodefacts_save (store_txn_t *txn, const registry_node_t *node, pw_t *scratch)
{
    if (node->fact_count == 0) {
        int rc = store_del (txn, STORE_DB_NODE_FACTS, node->id,
                            strlen (node->id));
        return rc == STORE_ENOTFOUND ? 0 : rc;
    }
    pw_reset (scratch);
    pw_map (scratch, node->fact_count);
    for (size_t index = 0; index < node->fact_count; index++) {
        pw_str (scratch, node->facts [index].key);
        pw_str (scratch, node->facts [index].value);
    }
    return store_put (txn, STORE_DB_NODE_FACTS, node->id, strlen (node->id),
                      pw_data (scratch), pw_size (scratch));
}

//  Decodes one record's map into pairs and gives them to NODE. Returns 0
//  or -1 (not a map of strings, or refused by the registry).
static int
s_restore_one (registry_t *registry, registry_node_t *node, const void *data,
               size_t size)
{
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (data, size, &doc, NULL, 0) != 0)
        return -1;
    const pv_t *root = pv_doc_root (doc);
    int rc = -1;
    size_t count = pv_type (root) == PV_MAP ? pv_size (root) : 0;
    proto_kv_t *pairs = count ? (proto_kv_t *) calloc (count,
                                                       sizeof (proto_kv_t))
                              : NULL;
    if (pv_type (root) == PV_MAP && (pairs || count == 0)) {
        rc = 0;
        for (size_t index = 0; rc == 0 && index < count; index++) {
            pairs [index].key = pv_strdup (pv_map_key_at (root, index));
            pairs [index].value = pv_strdup (pv_map_value_at (root, index));
            if (!pairs [index].key || !pairs [index].value)
                rc = -1;
        }
        if (rc == 0 && registry_set_facts (registry, node, pairs, count) < 0)
            rc = -1;
    }
    for (size_t index = 0; pairs && index < count; index++) {
        free (pairs [index].key);
        free (pairs [index].value);
    }
    free (pairs);
    pv_doc_destroy (&doc);
    return rc;
}

size_t
nodefacts_restore (store_txn_t *txn, registry_t *registry, size_t *broken_p)
{
    size_t restored = 0, broken = 0;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NODE_FACTS);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v,
                                         &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        char id [NAME_MAX_LEN + 1];
        registry_node_t *node = NULL;
        if (k_len <= NAME_MAX_LEN) {
            memcpy (id, k, k_len);
            id [k_len] = 0;
            node = registry_lookup (registry, id);
        }
        if (node && s_restore_one (registry, node, v, v_len) == 0)
            restored++;
        else
            broken++;
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    if (broken_p)
        *broken_p = broken;
    return restored;
}
