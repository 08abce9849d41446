/*  =========================================================================
    sha256 - the SHA-256 digest (FIPS 180-4)

    Content travels and is compared by its SHA-256: a file backend's put
    compares a file's digest with the one asked for. Streaming: init, any
    number of updates, final; or sha256_hex for one buffer.

    Threading: a context belongs to one thread; the functions keep no state.
    =========================================================================
*/
#ifndef GRID_SHA256_H
#define GRID_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32          //  A digest
#define SHA256_HEX 65            //  Its lowercase hex form with the NUL

typedef struct {
    uint32_t state [8];
    uint64_t length;             //  Bytes hashed so far
    uint8_t block [64];          //  Bytes waiting for a whole block
    size_t used;                 //  How many
} sha256_t;

//  Starts a digest.
void sha256_init (sha256_t *self);

//  Adds LEN bytes at DATA.
void sha256_update (sha256_t *self, const void *data, size_t len);

//  Ends the digest into DIGEST (SHA256_BYTES); the context is spent.
void sha256_final (sha256_t *self, uint8_t *digest);

//  The lowercase hex form of DIGEST into HEX (SHA256_HEX bytes).
void sha256_to_hex (const uint8_t *digest, char *hex);

//  The hex digest of LEN bytes at DATA into HEX (SHA256_HEX bytes).
void sha256_hex (const void *data, size_t len, char *hex);

#endif
