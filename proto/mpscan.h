/*  =========================================================================
    mpscan - finding values in msgpack bytes without decoding them

    A hello with the seven real backends is about 4.7 KB, nearly all of it
    the backends list, and decoding it whole (proto_msg_decode) costs
    about 200,000 instructions. A relay needs only the hello's node,
    groups and labels (its topics), and a broker that already holds an
    identical backends list (registry.h) needs everything but the list.
    Both find the list's bytes here, by reading headers only (no
    allocation, no text check), and decode a copy of the message with the
    list cut out (mpscan_replace).

    Nothing here validates a value: what it finds is decoded, or compared
    byte for byte with bytes that were decoded, before it is trusted. It
    only never reads past the SIZE bytes it is given.

    Threading: reentrant.
    =========================================================================
*/
#ifndef GRID_MPSCAN_H
#define GRID_MPSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

//  The size in bytes of the one msgpack value at the start of DATA (SIZE
//  bytes available), or 0 when it runs past SIZE or holds the byte msgpack
//  reserves (0xc1).
size_t mpscan_skip (const void *data, size_t size);

//  In the msgpack map that is the whole of DATA (SIZE bytes), the value of
//  the string key KEY: its offset in *AT_P and its size in *LEN_P. With
//  FIRST, the first such key is taken and the rest of the map is not read
//  (a hint: the encoders put "v" and "type" first); without, the map is
//  read to its end, which must be the end of DATA, and a key that is there
//  twice is not found. Returns 0, or -1 when DATA is no such map or KEY is
//  not found.
int mpscan_map_find (const void *data, size_t size, const char *key,
                     bool first, size_t *at_p, size_t *len_p);

//  True when the LEN bytes at VALUE are the msgpack string TEXT.
bool mpscan_str_is (const void *value, size_t len, const char *text);

//  Writes into OUT (room for OUT_MAX bytes) DATA (SIZE bytes) with the LEN
//  bytes at AT replaced by the REPLACEMENT_LEN bytes of REPLACEMENT.
//  Returns the new size, or 0 when it does not fit or AT and LEN are not
//  within DATA.
size_t mpscan_replace (const void *data, size_t size, size_t at, size_t len,
                       const void *replacement, size_t replacement_len,
                       void *out, size_t out_max);

#endif
