/*  =========================================================================
    keynext - a key pair's next pair on disk: the files of a rotation

    For the pair whose public file is P (or its secret file P_secret), the
    next pair is P.next and P.next_secret (mode 0600), each written to a
    temporary file and renamed, the public file first: a rotation is under
    way while P.next_secret exists. The commit renames P.next_secret over
    P_secret (the switch: keys_load_pair reads the secret file only), then
    P.next over P; keynext_recover finishes a commit cut short between the
    two renames, and drops a public file whose write was cut short.

    Used by gridagent for its own key (agent/rekey.h) and by gridbroker for
    the broker's key (broker/brokerkey.h).

    Threading: reentrant, except keynext_write (it sets the process umask
    for the time it writes).
    =========================================================================
*/
#ifndef GRID_PROTO_KEYNEXT_H
#define GRID_PROTO_KEYNEXT_H

#include <czmq.h>
#include <stddef.h>
#include <stdint.h>

//  The files of a rotation, from a key file.
typedef struct {
    char pub [1024];             //  P
    char secret [1024];          //  P_secret
    char next_pub [1024];        //  P.next
    char next_secret [1024];     //  P.next_secret
} keynext_paths_t;

//  Fills PATHS from KEY_FILE (P or P_secret). Returns 0, or -1 when a
//  path does not fit.
int keynext_paths (const char *key_file, keynext_paths_t *paths);

//  Writes a new next pair for KEY_FILE, replacing one not yet used.
//  PUBLIC_TXT (KEYS_TEXT_SIZE bytes) gets its public key. Returns 0, or -1
//  with a sentence in ERR.
int keynext_write (const char *key_file, char *public_txt, char *err,
                   size_t err_len);

//  Writes CERT (a pair made elsewhere: a broker cluster's active made it,
//  broker/brokerkey.h) as the next pair of KEY_FILE, as keynext_write.
int keynext_write_pair (const char *key_file, zcert_t *cert, char *err,
                        size_t err_len);

//  The next pair of KEY_FILE: NULL when there is none (ERR empty), or
//  when it cannot be used (the sentence in ERR).
zcert_t *keynext_load (const char *key_file, char *err, size_t err_len);

//  Makes the next pair the pair (the two renames). Returns 0, or -1 with a
//  sentence in ERR.
int keynext_commit (const char *key_file, char *err, size_t err_len);

//  Removes the next pair. Returns 0 or -1.
int keynext_drop (const char *key_file);

//  At start: finishes a commit cut short, or drops a next public file
//  whose pair was never written whole. Returns 1 when it changed a file,
//  0 when nothing was to do, -1 with a sentence in ERR.
int keynext_recover (const char *key_file, char *err, size_t err_len);

//  Milliseconds since the pair of KEY_FILE was written (its secret file's
//  modification time), or -1 when it cannot be read.
int64_t keynext_age_ms (const char *key_file);

#endif
