/*  =========================================================================
    blobs - the broker's blob store: file contents by sha256

    The record of a blob (its value under the 64-byte name) is 33 bytes:
    a format byte (1), then size, received, created_ms, used_ms, each 8
    bytes big-endian. Chunk keys are the name and the offset (8 bytes
    big-endian), so a blob's chunks follow its record in key order.
    =========================================================================
*/
#include "blobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_NAME_LEN 64
#define S_KEY_LEN (S_NAME_LEN + 8)
#define S_RECORD_LEN 33
#define S_RECORD_FORMAT 1

static void
s_put_u64 (uint8_t *at, uint64_t value)
{
    for (int index = 7; index >= 0; index--) {
        at [index] = (uint8_t) value;
        value >>= 8;
    }
}

static uint64_t
s_get_u64 (const uint8_t *at)
{
    uint64_t value = 0;
    for (int index = 0; index < 8; index++)
        value = value << 8 | at [index];
    return value;
}

bool
blobs_name_valid (const char *text)
{
    if (!text || strlen (text) != S_NAME_LEN)
        return false;
    for (size_t index = 0; index < S_NAME_LEN; index++)
        if (!((text [index] >= '0' && text [index] <= '9')
           || (text [index] >= 'a' && text [index] <= 'f')))
            return false;
    return true;
}

static void
s_chunk_key (const char *sha256, uint64_t offset, uint8_t *key)
{
    memcpy (key, sha256, S_NAME_LEN);
    s_put_u64 (key + S_NAME_LEN, offset);
}

//  Reads a record VALUE of LEN bytes into INFO; -1 when it is not one.
static int
s_record_read (const void *value, size_t len, const char *sha256,
               blobs_info_t *info)
{
    const uint8_t *bytes = (const uint8_t *) value;
    if (len != S_RECORD_LEN || bytes [0] != S_RECORD_FORMAT)
        return -1;
    memset (info, 0, sizeof (*info));
    memcpy (info->sha256, sha256, S_NAME_LEN);
    info->sha256 [S_NAME_LEN] = 0;
    info->size = s_get_u64 (bytes + 1);
    info->received = s_get_u64 (bytes + 9);
    info->created_ms = (int64_t) s_get_u64 (bytes + 17);
    info->used_ms = (int64_t) s_get_u64 (bytes + 25);
    return 0;
}

static int
s_record_write (store_txn_t *txn, const blobs_info_t *info)
{
    uint8_t record [S_RECORD_LEN];
    record [0] = S_RECORD_FORMAT;
    s_put_u64 (record + 1, info->size);
    s_put_u64 (record + 9, info->received);
    s_put_u64 (record + 17, (uint64_t) info->created_ms);
    s_put_u64 (record + 25, (uint64_t) info->used_ms);
    return store_put (txn, STORE_DB_BLOBS, info->sha256, S_NAME_LEN, record,
                      sizeof (record));
}

int
blobs_stat (store_txn_t *txn, const char *sha256, blobs_info_t *info)
{
    if (!blobs_name_valid (sha256))
        return STORE_ENOTFOUND;
    const void *value = NULL;
    size_t len = 0;
    int rc = store_get (txn, STORE_DB_BLOBS, sha256, S_NAME_LEN, &value,
                        &len);
    if (rc)
        return rc;
    return s_record_read (value, len, sha256, info) ? STORE_ENOTFOUND : 0;
}

//  The digest of the chunks of SHA256 (SIZE bytes) into HEX; -1 when one
//  is missing or of the wrong length.
static int
s_digest (store_txn_t *txn, const char *sha256, uint64_t size, char *hex)
{
    sha256_t context;
    sha256_init (&context);
    for (uint64_t offset = 0; offset < size; offset += BLOBS_CHUNK) {
        uint8_t key [S_KEY_LEN];
        s_chunk_key (sha256, offset, key);
        const void *data = NULL;
        size_t len = 0;
        uint64_t want = size - offset < BLOBS_CHUNK ? size - offset
                                                     : BLOBS_CHUNK;
        if (store_get (txn, STORE_DB_BLOBS, key, sizeof (key), &data, &len)
        ||  len != want)
            return -1;
        sha256_update (&context, data, len);
    }
    uint8_t digest [SHA256_BYTES];
    sha256_final (&context, digest);
    sha256_to_hex (digest, hex);
    return 0;
}

int
blobs_put_piece (store_txn_t *txn, const char *sha256, uint64_t size,
                 uint64_t offset, const void *data, size_t len,
                 uint64_t max_size, int64_t wall_ms, blobs_info_t *info,
                 bool *stored_p, char *err, size_t err_len)
{
    *stored_p = false;
    if (!blobs_name_valid (sha256)) {
        snprintf (err, err_len, "a blob is named by its sha256: 64 "
                  "lowercase hex digits");
        return BLOBS_EBAD;
    }
    if (size > max_size) {
        snprintf (err, err_len, "the blob is %llu bytes, over the broker's "
                  "blobs.max_size of %llu bytes", (unsigned long long) size,
                  (unsigned long long) max_size);
        return BLOBS_ETOO_LARGE;
    }
    int rc = blobs_stat (txn, sha256, info);
    if (rc == 0 && info->received == info->size && info->size == size) {
        //  Stored already: nothing to do but note the use
        info->used_ms = wall_ms;
        return s_record_write (txn, info);
    }
    if (rc == 0 && info->size != size) {
        snprintf (err, err_len, "an upload of this blob with a size of %llu "
                  "bytes is under way (delete it to start again)",
                  (unsigned long long) info->size);
        return BLOBS_EBAD;
    }
    if (rc == STORE_ENOTFOUND) {
        memset (info, 0, sizeof (*info));
        memcpy (info->sha256, sha256, SHA256_HEX);
        info->size = size;
        info->created_ms = wall_ms;
    }
    else
    if (rc)
        return rc;
    if (offset < info->received && offset % BLOBS_CHUNK == 0) {
        //  A piece sent again (a retried request): stored already
        info->used_ms = wall_ms;
        return s_record_write (txn, info);
    }
    if (offset != info->received) {
        snprintf (err, err_len, "the upload goes on at offset %llu, not "
                  "%llu", (unsigned long long) info->received,
                  (unsigned long long) offset);
        return BLOBS_EOFFSET;
    }
    uint64_t want = size - offset < BLOBS_CHUNK ? size - offset : BLOBS_CHUNK;
    if (len != want) {
        snprintf (err, err_len, "a piece at offset %llu holds %llu bytes, "
                  "not %zu", (unsigned long long) offset,
                  (unsigned long long) want, len);
        return BLOBS_EBAD;
    }
    if (len) {
        uint8_t key [S_KEY_LEN];
        s_chunk_key (sha256, offset, key);
        rc = store_put (txn, STORE_DB_BLOBS, key, sizeof (key), data, len);
        if (rc)
            return rc;
    }
    info->received = offset + len;
    info->used_ms = wall_ms;
    if (info->received == size) {
        char hex [SHA256_HEX];
        if (s_digest (txn, sha256, size, hex) || strcmp (hex, sha256) != 0) {
            blobs_delete (txn, sha256);
            snprintf (err, err_len, "the content's sha256 is %s, not its "
                      "name: the blob is not kept", hex);
            return BLOBS_EMISMATCH;
        }
    }
    *stored_p = true;
    return s_record_write (txn, info);
}

int
blobs_read (store_txn_t *txn, const char *sha256, uint64_t offset,
            const void **data_p, size_t *len_p)
{
    uint8_t key [S_KEY_LEN];
    s_chunk_key (sha256, offset, key);
    return store_get (txn, STORE_DB_BLOBS, key, sizeof (key), data_p, len_p);
}

int
blobs_touch (store_txn_t *txn, const char *sha256, int64_t wall_ms)
{
    blobs_info_t info;
    int rc = blobs_stat (txn, sha256, &info);
    if (rc)
        return rc;
    //  Once a minute at most: a fleet fetching a blob writes little
    if (wall_ms - info.used_ms < 60 * 1000)
        return 0;
    info.used_ms = wall_ms;
    return s_record_write (txn, &info);
}

int
blobs_delete (store_txn_t *txn, const char *sha256)
{
    if (!blobs_name_valid (sha256))
        return STORE_ENOTFOUND;
    int rc = store_del_prefix (txn, STORE_DB_BLOBS, sha256, S_NAME_LEN);
    if (rc < 0)
        return rc;
    return rc == 0 ? STORE_ENOTFOUND : 0;
}

void
blobs_each (store_txn_t *txn,
            bool (*fn) (void *arg, const blobs_info_t *info), void *arg)
{
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_BLOBS);
    if (!cursor)
        return;
    const void *key = NULL, *value = NULL;
    size_t key_len = 0, value_len = 0;
    int rc = store_cursor_seek (cursor, NULL, 0, &key, &key_len, &value,
                                &value_len);
    while (rc == 0) {
        if (key_len == S_NAME_LEN) {
            char name [SHA256_HEX];
            memcpy (name, key, S_NAME_LEN);
            name [S_NAME_LEN] = 0;
            blobs_info_t info;
            if (s_record_read (value, value_len, name, &info) == 0
            &&  !fn (arg, &info))
                break;
        }
        rc = store_cursor_next (cursor, &key, &key_len, &value, &value_len);
    }
    store_cursor_destroy (&cursor);
}

typedef struct {
    int64_t before_ms;
    char (*names) [SHA256_HEX];
    size_t count;
    size_t room;
} s_purge_t;

static bool
s_purge_note (void *arg, const blobs_info_t *info)
{
    s_purge_t *purge = (s_purge_t *) arg;
    if (info->used_ms >= purge->before_ms)
        return true;
    if (purge->count == purge->room) {
        size_t room = purge->room ? purge->room * 2 : 16;
        void *bigger = realloc (purge->names, room * SHA256_HEX);
        if (!bigger)
            return false;
        purge->names = (char (*) [SHA256_HEX]) bigger;
        purge->room = room;
    }
    memcpy (purge->names [purge->count++], info->sha256, SHA256_HEX);
    return true;
}

size_t
blobs_purge (store_txn_t *txn, int64_t before_wall_ms)
{
    s_purge_t purge = { .before_ms = before_wall_ms };
    blobs_each (txn, s_purge_note, &purge);
    size_t purged = 0;
    for (size_t index = 0; index < purge.count; index++)
        if (blobs_delete (txn, purge.names [index]) == 0)
            purged++;
    free (purge.names);
    return purged;
}
