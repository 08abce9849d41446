/*  =========================================================================
    text - text the wire accepts, made of any bytes

    See text.h.
    =========================================================================
*/
#include "text.h"

#include <stdlib.h>
#include <string.h>

//  Makes LEN bytes at TEXT (taken) a string the wire accepts: valid UTF-8
//  without NUL (a bad byte becomes '?'), at most MAX bytes, cut on a
//  character boundary. Sets *CUT when it had to cut.
char *
proto_text_clean (char *text, size_t len, size_t max, bool *cut)
{
    if (!text)
        return strdup ("");
    unsigned char *bytes = (unsigned char *) text;
    size_t index = 0;
    while (index < len) {
        unsigned char c = bytes [index];
        size_t follow = 0;
        unsigned char low = 0x80, high = 0xBF;
        if (c == 0) {
            bytes [index++] = '?';
            continue;
        }
        if (c < 0x80) {
            index++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF)
            follow = 1;
        else
        if (c >= 0xE0 && c <= 0xEF) {
            follow = 2;
            low = c == 0xE0 ? 0xA0 : 0x80;
            high = c == 0xED ? 0x9F : 0xBF;
        }
        else
        if (c >= 0xF0 && c <= 0xF4) {
            follow = 3;
            low = c == 0xF0 ? 0x90 : 0x80;
            high = c == 0xF4 ? 0x8F : 0xBF;
        }
        bool valid = follow > 0 && index + follow < len;
        for (size_t next = 1; valid && next <= follow; next++) {
            unsigned char b = bytes [index + next];
            unsigned char lo = next == 1 ? low : 0x80;
            unsigned char hi = next == 1 ? high : 0xBF;
            valid = b >= lo && b <= hi;
        }
        if (!valid) {
            bytes [index++] = '?';
            continue;
        }
        index += follow + 1;
    }
    if (len > max) {
        size_t end = max;
        while (end > 0 && (bytes [end] & 0xC0) == 0x80)
            end--;
        len = end;
        *cut = true;
    }
    text [len] = 0;
    return text;
}
