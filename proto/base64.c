/*  =========================================================================
    base64 - the standard alphabet (RFC 4648), with padding
    =========================================================================
*/
#include "base64.h"

#include <stdbool.h>

static const char s_digits [] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void
base64_encode (const void *data, size_t len, char *out)
{
    const uint8_t *bytes = (const uint8_t *) data;
    size_t at = 0;
    for (size_t index = 0; index < len; index += 3) {
        uint32_t bits = (uint32_t) bytes [index] << 16;
        if (index + 1 < len)
            bits |= (uint32_t) bytes [index + 1] << 8;
        if (index + 2 < len)
            bits |= bytes [index + 2];
        out [at++] = s_digits [(bits >> 18) & 63];
        out [at++] = s_digits [(bits >> 12) & 63];
        out [at++] = index + 1 < len ? s_digits [(bits >> 6) & 63] : '=';
        out [at++] = index + 2 < len ? s_digits [bits & 63] : '=';
    }
    out [at] = 0;
}

//  The value of base64 digit C, or -1.
static int
s_value (char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

long
base64_decode (const char *text, size_t text_len, uint8_t *out)
{
    if (text_len % 4)
        return -1;
    long at = 0;
    for (size_t index = 0; index < text_len; index += 4) {
        bool last = index + 4 == text_len;
        int pad = 0;
        uint32_t bits = 0;
        for (size_t k = 0; k < 4; k++) {
            char c = text [index + k];
            int value = s_value (c);
            if (c == '=' && last && k >= 2) {
                pad++;
                value = 0;
            }
            else
            if (value < 0 || pad)
                return -1;
            bits = bits << 6 | (uint32_t) value;
        }
        out [at++] = (uint8_t) (bits >> 16);
        if (pad < 2)
            out [at++] = (uint8_t) (bits >> 8);
        if (pad < 1)
            out [at++] = (uint8_t) bits;
    }
    return at;
}
