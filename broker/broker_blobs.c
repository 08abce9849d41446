/*  =========================================================================
    broker_blobs - blob chunks to agents (blob_get -> blob_chunk), the
    blob retention sweep, and which nodes can take a job of blobs

    One of the server's rooms: it shares the server's struct through
    broker_int.h. What is sent and when is blobserve's (pure); the store's
    side is blobs'. A refused request (unknown blob, offset off a chunk
    or past the end, a node not granted blobs) is answered with a
    blob_chunk that says why, and counted.
    =========================================================================
*/
#include "broker.h"
#include "broker_int.h"
#include "blobs.h"
#include "blobserve.h"

//  Sends NODE a blob_chunk of SHA256 at OFFSET: the chunk, or ERROR.
static void
s_send_chunk (broker_t *self, const registry_node_t *node,
              const char *sha256, uint64_t offset, uint64_t size,
              const void *data, size_t len, const char *error)
{
    proto_msg_t msg;
    memset (&msg, 0, sizeof msg);
    msg.type = PROTO_BLOB_CHUNK;
    msg.protocol = broker_node_protocol (node);
    msg.sha256 = (char *) sha256;
    msg.offset = offset;
    msg.size = size;
    msg.chunk = (uint8_t *) data;
    msg.chunk_len = len;
    msg.error = (char *) error;
    pw_reset (self->body);
    if (proto_msg_encode (&msg, self->body) == 0)
        broker_send_to_node (self, node, false);
}

static void
s_refuse (broker_t *self, const registry_node_t *node, const char *sha256,
          uint64_t offset, uint64_t size, const char *why)
{
    self->stats->counters.blob_refused++;
    log_node (LOG_LEVEL_DEBUG, node->id, "node %s: blob_get %.12s at %"
              PRIu64 " refused: %s", node->id, sha256, offset, why);
    s_send_chunk (self, node, sha256, offset, size, NULL, 0, why);
}

//  Sends ITEM's chunk, or says why not.
static void
s_send_item (broker_t *self, const blobserve_item_t *item)
{
    registry_node_t *node = registry_lookup (self->ctx.registry, item->node);
    store_txn_t *txn = broker_txn (self);
    if (!node || !node->online || !txn) {
        blobserve_forget (self->blobserve, item->node);
        return;
    }
    blobs_info_t info;
    const void *data = NULL;
    size_t len = 0;
    if (blobs_stat (txn, item->sha256, &info)
    ||  blobs_read (txn, item->sha256, item->offset, &data, &len)) {
        //  Deleted since it was asked for
        blobserve_forget (self->blobserve, item->node);
        s_refuse (self, node, item->sha256, item->offset, 0, "unknown blob");
        return;
    }
    s_send_chunk (self, node, item->sha256, item->offset, info.size, data,
                  len, NULL);
    self->stats->counters.blob_chunks_sent++;
    broker_stats_blob_sent (self->stats, item->sha256);
    self->stats->counters.blob_bytes_sent += len;
    //  The last chunk: nothing acknowledges it, its slot is free
    if (item->offset + len >= info.size)
        blobserve_forget (self->blobserve, item->node);
    if (item->offset == 0)
        ctx_store_error (blobs_touch (txn, item->sha256, broker_wall_ms ()),
                         "a blob's last use");
}

//  Sends what may go now (the fleet's limit of nodes fetching).
static void
s_serve (broker_t *self, int64_t now_ms)
{
    blobserve_item_t item;
    while (blobserve_next (self->blobserve, &item, now_ms))
        s_send_item (self, &item);
}

int
broker_blobs_on_get (broker_t *self, registry_node_t *node,
                     const proto_msg_t *in, int64_t now_ms)
{
    if (!registry_node_blobs (node)) {
        s_refuse (self, node, in->sha256, in->offset, 0,
                  "blobs were not granted in this session's welcome");
        return 0;
    }
    store_txn_t *txn = broker_txn (self);
    if (!txn)
        return 0;
    blobs_info_t info;
    if (!blobs_name_valid (in->sha256)
    ||  blobs_stat (txn, in->sha256, &info) || info.received != info.size) {
        blobserve_forget (self->blobserve, node->id);
        s_refuse (self, node, in->sha256, in->offset, 0, "unknown blob");
        return 0;
    }
    char why [128] = "";
    if (in->offset % BLOBS_CHUNK)
        snprintf (why, sizeof why, "offset %" PRIu64 " is not a multiple of "
                  "%d", in->offset, BLOBS_CHUNK);
    else
    if (in->offset >= info.size && !(in->offset == 0 && info.size == 0))
        snprintf (why, sizeof why, "offset %" PRIu64 " is past the blob's "
                  "end (%" PRIu64 " bytes)", in->offset, info.size);
    if (*why) {
        blobserve_forget (self->blobserve, node->id);
        s_refuse (self, node, in->sha256, in->offset, info.size, why);
        return 0;
    }
    int rc = blobserve_ask (self->blobserve, node->id, in->sha256,
                            in->offset, now_ms);
    if (rc == 1) {
        blobserve_item_t item = { .offset = in->offset };
        snprintf (item.node, sizeof item.node, "%s", node->id);
        snprintf (item.sha256, sizeof item.sha256, "%s", in->sha256);
        s_send_item (self, &item);
    }
    else
    if (rc == 0)
        s_serve (self, now_ms);
    return 0;
}

void
broker_blobs_tick (broker_t *self, int64_t now_ms)
{
    blobserve_set_max (self->blobserve, self->config.blob_max_inflight);
    blobserve_expire (self->blobserve, now_ms);
    s_serve (self, now_ms);
    if (self->config.blob_retention_ms <= 0 || now_ms < self->next_blob_sweep_ms)
        return;
    self->next_blob_sweep_ms = now_ms + 60000;
    store_txn_t *txn = broker_txn (self);
    if (!txn)
        return;
    size_t purged = blobs_purge (txn, broker_wall_ms ()
                                      - self->config.blob_retention_ms);
    if (!purged)
        return;
    log_info ("purged %zu blob%s unused for longer than blobs.retention",
              purged, purged == 1 ? "" : "s");
    //  The figures of the blobs purged go with them
    zlistx_t *names = zhashx_keys (self->stats->blob_chunks);
    blobs_info_t info;
    for (const char *name = names ? (const char *) zlistx_first (names)
                                  : NULL;
         name; name = (const char *) zlistx_next (names))
        if (blobs_stat (txn, name, &info))
            broker_stats_blob_forget (self->stats, name);
    zlistx_destroy (&names);
}

void
broker_blobs_node_gone (broker_t *self, const char *node)
{
    blobserve_forget (self->blobserve, node);
}
