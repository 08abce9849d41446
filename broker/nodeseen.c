/*  =========================================================================
    nodeseen - nodes' last-seen times in the store (see nodeseen.h)
    =========================================================================
*/
#include <string.h>

#include "nodeseen.h"

bool
nodeseen_due (registry_t *registry, int64_t before_ms)
{
    registry_node_t *node = registry_unsaved_first (registry);
    return node && node->unsaved_since_ms <= before_ms;
}

int64_t
nodeseen_save (store_txn_t *txn, registry_t *registry, int64_t before_ms,
               size_t limit)
{
    int64_t saved = 0;
    registry_node_t *node;
    while ((size_t) saved < limit
           && (node = registry_unsaved_first (registry)) != NULL
           && node->unsaved_since_ms <= before_ms) {
        uint8_t value [8];
        uint64_t wall_ms = (uint64_t) node->last_seen_wall_ms;
        for (int index = 0; index < 8; index++)
            value [index] = (uint8_t) (wall_ms >> (56 - 8 * index));
        int rc = store_put (txn, STORE_DB_SEEN, node->id, strlen (node->id),
                            value, sizeof value);
        if (rc != 0)
            return rc;
        registry_seen_saved (node);
        saved++;
    }
    return saved;
}

size_t
nodeseen_restore (store_txn_t *txn, registry_t *registry)
{
    size_t changed = 0;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_SEEN);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        char id [NAME_MAX_LEN + 1];
        registry_node_t *node = NULL;
        if (k_len < sizeof id && v_len == 8) {
            memcpy (id, k, k_len);
            id [k_len] = 0;
            node = registry_lookup (registry, id);
        }
        if (node) {
            const uint8_t *value = (const uint8_t *) v;
            uint64_t wall_ms = 0;
            for (int index = 0; index < 8; index++)
                wall_ms = (wall_ms << 8) | value [index];
            if ((int64_t) wall_ms > node->last_seen_wall_ms) {
                node->last_seen_wall_ms = (int64_t) wall_ms;
                changed++;
            }
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    return changed;
}
