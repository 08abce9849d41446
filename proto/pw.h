/*  =========================================================================
    pw - msgpack writer (write side of the codec)

    A pw_t is a growing buffer into which callers write one msgpack object
    by calls in document order: pw_map (w, 2); pw_str (w, "k"); pw_int (w, 1);
    ... Container sizes are given up front, as msgpack requires. Writing never
    fails short of running out of memory, which aborts (as CZMQ does).

    Threading: one writer per thread.
    =========================================================================
*/
#ifndef GRID_PW_H
#define GRID_PW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pv.h"

typedef struct _pw_t pw_t;

//  A new empty writer.
pw_t *pw_new (void);

//  Destroys a writer; NULL-safe, nulls *self_p.
void pw_destroy (pw_t **self_p);

//  Empties the buffer, keeping its memory for reuse.
void pw_reset (pw_t *self);

//  Start a map of COUNT key/value pairs or an array of COUNT elements.
void pw_map (pw_t *self, size_t count);
void pw_array (pw_t *self, size_t count);

//  Scalars. pw_str writes a NUL-terminated string (NULL writes nil);
//  pw_strn writes LEN bytes.
void pw_strn (pw_t *self, const char *text, size_t len);
void pw_int (pw_t *self, int64_t value);
void pw_bool (pw_t *self, bool value);
void pw_float (pw_t *self, double value);
void pw_nil (pw_t *self);
void pw_bin (pw_t *self, const void *data, size_t len);

//  Inline, so that a literal's length is known where it is written (keys).
static inline void
pw_str (pw_t *self, const char *text)
{
    if (text)
        pw_strn (self, text, strlen (text));
    else
        pw_nil (self);
}

//  Appends LEN bytes that already hold exactly one encoded msgpack object.
void pw_raw (pw_t *self, const void *data, size_t len);

//  Re-encodes a decoded value (and everything inside it).
void pw_pv (pw_t *self, const pv_t *value);

//  Re-encodes a decoded value in one canonical form: map entries sorted
//  by their keys' bytes, every integer and float in its shortest
//  encoding. Two values that mean the same (keys in another order, an int
//  written as int64) give the same bytes, so their digests can be compared.
void pw_pv_canonical (pw_t *self, const pv_t *value);

//  The bytes written so far; valid until the next write, reset or destroy.
const void *pw_data (const pw_t *self);
size_t pw_size (const pw_t *self);

#endif
