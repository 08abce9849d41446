/*  =========================================================================
    mpscan - finding values in msgpack bytes without decoding them
    (see mpscan.h)
    =========================================================================
*/
#include "mpscan.h"

#include <string.h>

//  Big-endian reads of 1, 2 and 4 bytes
static uint32_t
s_be (const uint8_t *at, size_t bytes)
{
    uint32_t value = 0;
    for (size_t index = 0; index < bytes; index++)
        value = (value << 8) | at [index];
    return value;
}

//  Reads the header of the value at DATA [AT] (SIZE bytes in all): how
//  many bytes the header and any payload take (*STEP_P) and how many
//  values follow inside it (*ITEMS_P: an array's items, twice a map's
//  pairs). Returns 0, or -1 when it runs past SIZE or is reserved.
static int
s_header (const uint8_t *data, size_t size, size_t at, uint64_t *step_p,
          uint64_t *items_p)
{
    uint8_t byte = data [at];
    size_t left = size - at;
    uint64_t step = 1, items = 0, payload = 0;
    size_t width = 0;           //  Bytes of a length that follows
    int kind = 0;               //  0 scalar, 1 raw payload, 2 array, 3 map
    if (byte <= 0x7f || byte >= 0xe0 || byte == 0xc0 || byte == 0xc2
        || byte == 0xc3)
        ;
    else
    if (byte <= 0x8f)
        items = 2 * (uint64_t) (byte & 0x0f);
    else
    if (byte <= 0x9f)
        items = byte & 0x0f;
    else
    if (byte <= 0xbf)
        payload = byte & 0x1f;
    else
        switch (byte) {
            case 0xc4: case 0xd9: width = 1; kind = 1; break;
            case 0xc5: case 0xda: width = 2; kind = 1; break;
            case 0xc6: case 0xdb: width = 4; kind = 1; break;
            case 0xc7: width = 1; kind = 1; step = 2; break;
            case 0xc8: width = 2; kind = 1; step = 2; break;
            case 0xc9: width = 4; kind = 1; step = 2; break;
            case 0xca: case 0xce: case 0xd2: step = 5; break;
            case 0xcb: case 0xcf: case 0xd3: step = 9; break;
            case 0xcc: case 0xd0: step = 2; break;
            case 0xcd: case 0xd1: step = 3; break;
            case 0xd4: step = 3; break;
            case 0xd5: step = 4; break;
            case 0xd6: step = 6; break;
            case 0xd7: step = 10; break;
            case 0xd8: step = 18; break;
            case 0xdc: width = 2; kind = 2; break;
            case 0xdd: width = 4; kind = 2; break;
            case 0xde: width = 2; kind = 3; break;
            case 0xdf: width = 4; kind = 3; break;
            default: return -1;                 //  0xc1
        }
    if (width) {
        if (left < 1 + width)
            return -1;
        uint32_t length = s_be (data + at + 1, width);
        step += width;
        if (kind == 1)
            payload = length;
        else
            items = kind == 3 ? 2 * (uint64_t) length : length;
    }
    step += payload;
    if (step > left)
        return -1;
    *step_p = step;
    *items_p = items;
    return 0;
}

size_t
mpscan_skip (const void *data, size_t size)
{
    const uint8_t *bytes = (const uint8_t *) data;
    size_t at = 0;
    uint64_t pending = 1;       //  Values still to read
    while (pending > 0) {
        //  Every value takes a byte at least
        if (at >= size || pending > size - at)
            return 0;
        uint8_t byte = bytes [at];
        //  What a hello is made of, inline: short strings, small maps
        //  and arrays, small integers and booleans
        if (byte >= 0xa0 && byte <= 0xbf) {
            at += 1 + (size_t) (byte & 0x1f);
            pending--;
            continue;
        }
        if (byte >= 0x80 && byte <= 0x9f) {
            at++;
            pending += (byte <= 0x8f ? 2 * (uint64_t) (byte & 0x0f)
                                     : (uint64_t) (byte & 0x0f)) - 1;
            continue;
        }
        if (byte <= 0x7f || byte >= 0xe0 || byte == 0xc2 || byte == 0xc3) {
            at++;
            pending--;
            continue;
        }
        if (byte == 0xd9 && at + 1 < size) {
            at += 2 + (size_t) bytes [at + 1];
            pending--;
            continue;
        }
        uint64_t step, items;
        if (s_header (bytes, size, at, &step, &items) != 0)
            return 0;
        at += (size_t) step;
        pending += items - 1;
    }
    //  A fixstr's length is checked here, once: AT ran past SIZE
    return at <= size ? at : 0;
}

bool
mpscan_str_is (const void *value, size_t len, const char *text)
{
    const uint8_t *bytes = (const uint8_t *) value;
    size_t text_len = strlen (text);
    size_t header;
    if (len < 1)
        return false;
    if (bytes [0] >= 0xa0 && bytes [0] <= 0xbf)
        header = 1;
    else
    if (bytes [0] == 0xd9)
        header = 2;
    else
    if (bytes [0] == 0xda)
        header = 3;
    else
    if (bytes [0] == 0xdb)
        header = 5;
    else
        return false;
    return len == header + text_len
           && memcmp (bytes + header, text, text_len) == 0;
}

int
mpscan_map_find (const void *data, size_t size, const char *key,
                 bool first, size_t *at_p, size_t *len_p)
{
    const uint8_t *bytes = (const uint8_t *) data;
    if (size < 1)
        return -1;
    uint64_t step, items;
    if (s_header (bytes, size, 0, &step, &items) != 0)
        return -1;
    uint8_t byte = bytes [0];
    if (!((byte >= 0x80 && byte <= 0x8f) || byte == 0xde || byte == 0xdf))
        return -1;
    size_t at = (size_t) step;
    bool found = false;
    for (uint64_t pair = 0; pair < items / 2; pair++) {
        size_t key_len = mpscan_skip (bytes + at, size - at);
        if (key_len == 0)
            return -1;
        size_t value_at = at + key_len;
        size_t value_len = mpscan_skip (bytes + value_at, size - value_at);
        if (value_len == 0)
            return -1;
        if (mpscan_str_is (bytes + at, key_len, key)) {
            if (found)
                return -1;      //  Twice: let the decoder refuse it
            found = true;
            *at_p = value_at;
            *len_p = value_len;
            if (first)
                return 0;
        }
        at = value_at + value_len;
    }
    return found && at == size ? 0 : -1;
}

size_t
mpscan_replace (const void *data, size_t size, size_t at, size_t len,
                const void *replacement, size_t replacement_len, void *out,
                size_t out_max)
{
    if (at > size || len > size - at)
        return 0;
    size_t total = size - len + replacement_len;
    if (total > out_max)
        return 0;
    uint8_t *to = (uint8_t *) out;
    const uint8_t *from = (const uint8_t *) data;
    memcpy (to, from, at);
    memcpy (to + at, replacement, replacement_len);
    memcpy (to + at + replacement_len, from + at + len, size - at - len);
    return total;
}
