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

//  The bytes of a writer, the first member of every pw_t, so that the
//  inline writers below reach them without a call. Callers use pw_data
//  and pw_size.
typedef struct {
    uint8_t *data;              //  The bytes written so far, NULL before any
    size_t size;                //  How many
    size_t max;                 //  Bytes allocated
} pw_buffer_t;

//  A new empty writer.
pw_t *pw_new (void);

//  Destroys a writer; NULL-safe, nulls *self_p.
void pw_destroy (pw_t **self_p);

//  Empties the buffer, keeping its memory for reuse.
void pw_reset (pw_t *self);

//  Start a map of COUNT key/value pairs or an array of COUNT elements.
static inline void pw_map (pw_t *self, size_t count);
void pw_array (pw_t *self, size_t count);

//  Scalars. pw_str writes a NUL-terminated string (NULL writes nil);
//  pw_strn writes LEN bytes.
void pw_strn (pw_t *self, const char *text, size_t len);
static inline void pw_int (pw_t *self, int64_t value);
static inline void pw_bool (pw_t *self, bool value);
void pw_float (pw_t *self, double value);
void pw_nil (pw_t *self);
void pw_bin (pw_t *self, const void *data, size_t len);

//  Inline, so that a literal's length is known where it is written
//  (keys): a short string that fits the buffer takes a few stores.
static inline void
pw_str (pw_t *self, const char *text)
{
    if (!text) {
        pw_nil (self);
        return;
    }
    size_t len = strlen (text);
    pw_buffer_t *buffer = (pw_buffer_t *) (void *) self;
    if (len < 32 && buffer->max - buffer->size > len) {
        uint8_t *at = buffer->data + buffer->size;
        at [0] = (uint8_t) (0xa0 | len);
        memcpy (at + 1, text, len);
        buffer->size += 1 + len;
    }
    else
        pw_strn (self, text, len);
}

//  What pw_map, pw_int and pw_bool write when they take more than one
//  byte or the buffer must grow.
void pw_map_any (pw_t *self, size_t count);
void pw_int_any (pw_t *self, int64_t value);
void pw_bool_any (pw_t *self, bool value);

//  The one-byte forms inline: most keys' values, counts and flags.
static inline void
pw_map (pw_t *self, size_t count)
{
    pw_buffer_t *buffer = (pw_buffer_t *) (void *) self;
    if (count < 16 && buffer->size < buffer->max)
        buffer->data [buffer->size++] = (uint8_t) (0x80 | count);
    else
        pw_map_any (self, count);
}

static inline void
pw_int (pw_t *self, int64_t value)
{
    pw_buffer_t *buffer = (pw_buffer_t *) (void *) self;
    if (value >= -32 && value < 128 && buffer->size < buffer->max)
        buffer->data [buffer->size++] = (uint8_t) value;
    else
        pw_int_any (self, value);
}

static inline void
pw_bool (pw_t *self, bool value)
{
    pw_buffer_t *buffer = (pw_buffer_t *) (void *) self;
    if (buffer->size < buffer->max)
        buffer->data [buffer->size++] = value ? 0xc3 : 0xc2;
    else
        pw_bool_any (self, value);
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
