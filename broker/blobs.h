/*  =========================================================================
    blobs - the broker's blob store: file contents by sha256

    A blob is a file's content, named by its SHA-256 (64 lowercase hex
    digits) and stored once however often it is uploaded: in the BLOBS
    database, a record per blob (sha256 hex -> size, bytes received,
    created, last used) and its chunks of BLOBS_CHUNK bytes (sha256 hex |
    offset, 8 bytes big-endian -> bytes; the last chunk may be shorter).
    Everything goes through the pass's write transaction, so a cluster's
    standbys get blobs as they get jobs (the pass journal).

    An upload sends the chunks in order (blobs_put_piece): each piece
    starts where the blob's received bytes end, so an upload cut short
    resumes from blobs_stat's received. When the last piece arrives the
    whole content is hashed: a blob whose digest is not its name is
    deleted, never kept. A complete blob is immutable; uploading it again
    stores nothing (dedup).

    Retention: a blob not used (uploaded, fetched by an agent or named by
    a submitted job) for the configured retention is purged, and so is an
    upload left incomplete that long (blobs_purge).

    Threading: the broker's thread only (a store transaction).
    =========================================================================
*/
#ifndef GRID_BROKER_BLOBS_H
#define GRID_BROKER_BLOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"
#include "../proto/sha256.h"
#include "../store/store.h"

#define BLOBS_CHUNK PROTO_BLOB_CHUNK_BYTES     //  Bytes per stored chunk
#define BLOBS_DEFAULT_MAX_SIZE ((uint64_t) 64 << 20)  //  blobs.max_size
#define BLOBS_MAX_MAX_SIZE ((uint64_t) 4 << 30)       //  Its ceiling
#define BLOBS_DEFAULT_RETENTION_MS ((int64_t) 7 * 24 * 3600 * 1000)
#define BLOBS_DEFAULT_MAX_INFLIGHT 64          //  blobs.max_inflight

//  Refusals of blobs_put_piece (besides the store's STORE_E* codes)
#define BLOBS_ETOO_LARGE -20      //  Over blobs.max_size
#define BLOBS_EOFFSET -21         //  Not where the received bytes end
#define BLOBS_EBAD -22            //  A bad name, size or piece length
#define BLOBS_EMISMATCH -23       //  The content's digest is not its name

//  One blob's record.
typedef struct {
    char sha256 [SHA256_HEX];    //  Its name
    uint64_t size;               //  Its whole size
    uint64_t received;           //  Bytes stored so far (size: complete)
    int64_t created_ms;          //  Wall clock of its first piece
    int64_t used_ms;             //  Wall clock it was last used
} blobs_info_t;

//  Whether TEXT is a blob name: 64 lowercase hex digits.
bool blobs_name_valid (const char *text);

//  Stores the piece of LEN bytes at DATA at OFFSET of blob SHA256 of SIZE
//  bytes (at most MAX_SIZE) at WALL_MS. OFFSET must be the blob's received
//  bytes, LEN BLOBS_CHUNK (or what remains). A complete blob, or a piece
//  stored already (a retry), takes nothing (*STORED_P false). Fills *INFO. Returns 0, a BLOBS_E* refusal or a
//  STORE_E* code, with a sentence in ERR.
int blobs_put_piece (store_txn_t *txn, const char *sha256, uint64_t size,
                     uint64_t offset, const void *data, size_t len,
                     uint64_t max_size, int64_t wall_ms, blobs_info_t *info,
                     bool *stored_p, char *err, size_t err_len);

//  Fills *INFO for SHA256. Returns 0 or STORE_ENOTFOUND.
int blobs_stat (store_txn_t *txn, const char *sha256, blobs_info_t *info);

//  The chunk of complete blob SHA256 at OFFSET (a multiple of
//  BLOBS_CHUNK): *DATA_P / *LEN_P point into the store (valid until the
//  transaction's next update or its end). Returns 0 or STORE_ENOTFOUND.
int blobs_read (store_txn_t *txn, const char *sha256, uint64_t offset,
                const void **data_p, size_t *len_p);

//  Marks SHA256 used at WALL_MS (retention). Returns 0 or a STORE_E* code.
int blobs_touch (store_txn_t *txn, const char *sha256, int64_t wall_ms);

//  Deletes SHA256 and its chunks. Returns 0 or STORE_ENOTFOUND (or < 0).
int blobs_delete (store_txn_t *txn, const char *sha256);

//  Calls FN for each blob in name order until it returns false.
void blobs_each (store_txn_t *txn, bool (*fn) (void *arg,
                                                const blobs_info_t *info),
                 void *arg);

//  Deletes every blob not used since BEFORE_WALL_MS; returns how many.
size_t blobs_purge (store_txn_t *txn, int64_t before_wall_ms);

#endif
