/*  =========================================================================
    req/blobs - blob.put blob.stat blob.list blob.delete (see req.h)

    The blobs are the blob store's (blobs.h), written into the pass. A
    blob.put carries one piece (base64 text, at most one chunk) at the
    offset where the blob's received bytes end; its reply says how far
    the blob is, so an upload cut short goes on from there.
    =========================================================================
*/
#include "../../proto/base64.h"
#include "../blobs.h"
#include "req.h"

static void
s_write_time (pw_t *writer, const char *key, int64_t wall_ms)
{
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    pw_str (writer, key);
    pw_str (writer, text);
}

//  INFO as a map of its 6 fields, chunks_sent when CTX is given (blob.list,
//  blob.stat) and EXTRA more the caller writes.
static void
s_write_info (pw_t *reply, const blobs_info_t *info, ctx_t *ctx, int extra)
{
    pw_map (reply, 6 + (ctx ? 1 : 0) + extra);
    if (ctx) {
        pw_str (reply, "chunks_sent");
        pw_int (reply, (int64_t) broker_stats_blob_chunks (ctx->stats,
                                                           info->sha256));
    }
    pw_str (reply, "sha256");
    pw_str (reply, info->sha256);
    pw_str (reply, "size");
    pw_int (reply, (int64_t) info->size);
    pw_str (reply, "received");
    pw_int (reply, (int64_t) info->received);
    pw_str (reply, "complete");
    pw_bool (reply, info->received == info->size);
    s_write_time (reply, "created", info->created_ms);
    s_write_time (reply, "used", info->used_ms);
}

//  The sha256 field of the request (a blob name), or NULL after an error.
static char *
s_name (req_call_t *call)
{
    char *sha256 = req_field (call, "sha256");
    if (!blobs_name_valid (sha256)) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "sha256: expected 64 "
                   "lowercase hex digits");
        free (sha256);
        return NULL;
    }
    return sha256;
}

static int64_t
s_int (req_call_t *call, const char *key)
{
    int64_t number = 0;
    const pv_t *value = pv_map_get (call->request->body, key);
    if (value)
        pv_get_int (value, &number);
    return number;
}

void
req_blob_put (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char *sha256 = s_name (call);
    if (!sha256) {
        ctx->stats->counters.blob_uploads_refused++;
        return;
    }
    int64_t size = s_int (call, "size");
    int64_t offset = s_int (call, "offset");
    const pv_t *data = pv_map_get (call->request->body, "data");
    size_t text_len = data ? pv_size (data) : 0;
    const char *text = data ? pv_str (data, NULL) : "";
    uint8_t *piece = (uint8_t *) malloc (text_len / 4 * 3 + 1);
    long len = piece ? base64_decode (text, text_len, piece) : -1;
    store_txn_t *txn = len >= 0 ? req_txn (call) : NULL;
    if (len < 0 && piece) {
        ctx->stats->counters.blob_uploads_refused++;
        req_error (call, PROTO_ERR_BAD_REQUEST, "data: expected base64 text");
    }
    else
    if (!piece)
        req_error (call, PROTO_ERR_INTERNAL, "out of memory");
    if (txn) {
        blobs_info_t info;
        bool stored = false;
        char why [256] = "";
        int rc = blobs_put_piece (txn, sha256, (uint64_t) size,
                                  (uint64_t) offset, piece, (size_t) len,
                                  ctx->config->blob_max_size,
                                  ctx_wall_ms (ctx), &info, &stored, why,
                                  sizeof why);
        if (rc == BLOBS_ETOO_LARGE) {
            ctx->stats->counters.blob_uploads_refused++;
            req_error (call, PROTO_ERR_TOO_LARGE, "%s", why);
        }
        else
        if (rc == BLOBS_EOFFSET || rc == BLOBS_EBAD) {
            ctx->stats->counters.blob_uploads_refused++;
            req_error (call, rc == BLOBS_EOFFSET ? PROTO_ERR_CONFLICT
                                                 : PROTO_ERR_BAD_REQUEST,
                       "%s", why);
        }
        else
        if (rc == BLOBS_EMISMATCH) {
            ctx->stats->counters.blob_uploads_refused++;
            req_error (call, PROTO_ERR_BAD_REQUEST, "%s", why);
        }
        else
        if (rc == STORE_EFULL)
            req_error (call, PROTO_ERR_STORAGE_FULL, "the store is full: "
                       "the blob piece was not stored");
        else
        if (rc)
            req_error (call, PROTO_ERR_STORE, "the blob piece was not "
                       "stored: %s", store_strerror (rc));
        else {
            pw_t *reply = call->reply;
            pw_reset (reply);
            proto_reply_ok_begin (reply, call->request->id);
            s_write_info (reply, &info, NULL, 1);
            pw_str (reply, "stored");
            pw_bool (reply, stored);
        }
    }
    free (piece);
    free (sha256);
}

void
req_blob_stat (req_call_t *call)
{
    char *sha256 = s_name (call);
    store_txn_t *txn = sha256 ? req_txn (call) : NULL;
    blobs_info_t info;
    if (txn && blobs_stat (txn, sha256, &info))
        req_error (call, PROTO_ERR_NOT_FOUND, "no blob %s", sha256);
    else
    if (txn) {
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        s_write_info (call->reply, &info, call->ctx, 0);
    }
    free (sha256);
}

typedef struct {
    blobs_info_t *items;
    size_t count;
    size_t room;
} s_list_t;

static bool
s_list_add (void *arg, const blobs_info_t *info)
{
    s_list_t *list = (s_list_t *) arg;
    if (list->count == list->room) {
        size_t room = list->room ? list->room * 2 : 32;
        void *bigger = realloc (list->items, room * sizeof (blobs_info_t));
        if (!bigger)
            return false;
        list->items = (blobs_info_t *) bigger;
        list->room = room;
    }
    list->items [list->count++] = *info;
    //  A reply stays well under a frame
    return list->count < 10000;
}

void
req_blob_list (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    store_txn_t *txn = req_txn (call);
    if (!txn)
        return;
    s_list_t list = { NULL, 0, 0 };
    blobs_each (txn, s_list_add, &list);
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 5);
    pw_str (reply, "blobs");
    pw_array (reply, list.count);
    for (size_t index = 0; index < list.count; index++)
        s_write_info (reply, &list.items [index], ctx, 0);
    pw_str (reply, "chunks_sent");
    pw_int (reply, (int64_t) ctx->stats->counters.blob_chunks_sent);
    pw_str (reply, "bytes_sent");
    pw_int (reply, (int64_t) ctx->stats->counters.blob_bytes_sent);
    pw_str (reply, "refused");
    pw_int (reply, (int64_t) ctx->stats->counters.blob_refused);
    pw_str (reply, "uploads_refused");
    pw_int (reply, (int64_t) ctx->stats->counters.blob_uploads_refused);
    free (list.items);
}

void
req_blob_delete (req_call_t *call)
{
    char *sha256 = s_name (call);
    store_txn_t *txn = sha256 ? req_txn (call) : NULL;
    if (txn && blobs_delete (txn, sha256))
        req_error (call, PROTO_ERR_NOT_FOUND, "no blob %s", sha256);
    else
    if (txn) {
        broker_stats_blob_forget (call->ctx->stats, sha256);
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        pw_map (call->reply, 2);
        pw_str (call->reply, "sha256");
        pw_str (call->reply, sha256);
        pw_str (call->reply, "deleted");
        pw_bool (call->reply, true);
    }
    free (sha256);
}
