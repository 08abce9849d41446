/*  =========================================================================
    base64 - the standard alphabet (RFC 4648), with padding

    Blob pieces travel as base64 text in client requests (blob.put), so
    that the JSON of the HTTP face and the msgpack of the ZeroMQ face
    carry them alike.

    Threading: no state; call from any thread.
    =========================================================================
*/
#ifndef GRID_BASE64_H
#define GRID_BASE64_H

#include <stddef.h>
#include <stdint.h>

//  Bytes the base64 text of LEN bytes takes, without its NUL.
#define BASE64_LEN(len) (((len) + 2) / 3 * 4)

//  Writes the base64 text of LEN bytes at DATA into OUT (BASE64_LEN (LEN)
//  + 1 bytes, NUL-terminated).
void base64_encode (const void *data, size_t len, char *out);

//  Decodes TEXT (TEXT_LEN bytes; its length a multiple of 4, padding
//  only at the end) into OUT (at least TEXT_LEN / 4 * 3 bytes). Returns
//  the bytes written, or -1 when TEXT is not base64.
long base64_decode (const char *text, size_t text_len, uint8_t *out);

#endif
