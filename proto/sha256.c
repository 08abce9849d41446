/*  =========================================================================
    sha256 - the SHA-256 digest (FIPS 180-4)
    =========================================================================
*/
#include "sha256.h"

#include <string.h>

static const uint32_t s_k [64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
};

#define S_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
s_block (sha256_t *self, const uint8_t *block)
{
    uint32_t w [64];
    for (int index = 0; index < 16; index++)
        w [index] = (uint32_t) block [index * 4] << 24
                  | (uint32_t) block [index * 4 + 1] << 16
                  | (uint32_t) block [index * 4 + 2] << 8
                  | (uint32_t) block [index * 4 + 3];
    for (int index = 16; index < 64; index++) {
        uint32_t s0 = S_ROR (w [index - 15], 7) ^ S_ROR (w [index - 15], 18)
                    ^ (w [index - 15] >> 3);
        uint32_t s1 = S_ROR (w [index - 2], 17) ^ S_ROR (w [index - 2], 19)
                    ^ (w [index - 2] >> 10);
        w [index] = w [index - 16] + s0 + w [index - 7] + s1;
    }
    uint32_t a = self->state [0], b = self->state [1], c = self->state [2],
             d = self->state [3], e = self->state [4], f = self->state [5],
             g = self->state [6], h = self->state [7];
    for (int index = 0; index < 64; index++) {
        uint32_t s1 = S_ROR (e, 6) ^ S_ROR (e, 11) ^ S_ROR (e, 25);
        uint32_t choose = (e & f) ^ (~e & g);
        uint32_t t1 = h + s1 + choose + s_k [index] + w [index];
        uint32_t s0 = S_ROR (a, 2) ^ S_ROR (a, 13) ^ S_ROR (a, 22);
        uint32_t major = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = s0 + major;
        h = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    self->state [0] += a; self->state [1] += b; self->state [2] += c;
    self->state [3] += d; self->state [4] += e; self->state [5] += f;
    self->state [6] += g; self->state [7] += h;
}

void
sha256_init (sha256_t *self)
{
    static const uint32_t initial [8] = {
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
    };
    memcpy (self->state, initial, sizeof (initial));
    self->length = 0;
    self->used = 0;
}

void
sha256_update (sha256_t *self, const void *data, size_t len)
{
    const uint8_t *bytes = (const uint8_t *) data;
    self->length += len;
    while (len > 0) {
        size_t take = sizeof (self->block) - self->used;
        if (take > len)
            take = len;
        memcpy (self->block + self->used, bytes, take);
        self->used += take;
        bytes += take;
        len -= take;
        if (self->used == sizeof (self->block)) {
            s_block (self, self->block);
            self->used = 0;
        }
    }
}

void
sha256_final (sha256_t *self, uint8_t *digest)
{
    uint64_t bits = self->length * 8;
    uint8_t pad = 0x80;
    uint64_t length = self->length;
    sha256_update (self, &pad, 1);
    pad = 0;
    while (self->used != 56)
        sha256_update (self, &pad, 1);
    uint8_t tail [8];
    for (int index = 0; index < 8; index++)
        tail [index] = (uint8_t) (bits >> (56 - index * 8));
    sha256_update (self, tail, 8);
    self->length = length;
    for (int index = 0; index < 8; index++) {
        digest [index * 4] = (uint8_t) (self->state [index] >> 24);
        digest [index * 4 + 1] = (uint8_t) (self->state [index] >> 16);
        digest [index * 4 + 2] = (uint8_t) (self->state [index] >> 8);
        digest [index * 4 + 3] = (uint8_t) self->state [index];
    }
}

void
sha256_to_hex (const uint8_t *digest, char *hex)
{
    static const char digits [] = "0123456789abcdef";
    for (int index = 0; index < SHA256_BYTES; index++) {
        hex [index * 2] = digits [digest [index] >> 4];
        hex [index * 2 + 1] = digits [digest [index] & 15];
    }
    hex [SHA256_BYTES * 2] = 0;
}

void
sha256_hex (const void *data, size_t len, char *hex)
{
    sha256_t context;
    uint8_t digest [SHA256_BYTES];
    sha256_init (&context);
    sha256_update (&context, data, len);
    sha256_final (&context, digest);
    sha256_to_hex (digest, hex);
}
