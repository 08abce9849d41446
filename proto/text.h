/*  =========================================================================
    text - text the wire accepts, made of any bytes

    Strings on the wire are valid UTF-8 without NUL, of bounded length
    (PROTOCOL.md 4.1). What a program prints or a host is named may be
    anything: proto_text_clean makes it such a string.

    Threading: pure functions, any thread.
    =========================================================================
*/
#ifndef GRID_TEXT_H
#define GRID_TEXT_H

#include <stdbool.h>
#include <stddef.h>

//  Makes LEN bytes at TEXT (taken) a string the wire accepts: valid UTF-8
//  without NUL (a bad byte becomes '?'), at most MAX bytes, cut on a
//  character boundary. Sets *CUT when it had to cut. Returns TEXT, or a
//  new empty string when TEXT is NULL.
char *proto_text_clean (char *text, size_t len, size_t max, bool *cut);

#endif
