/*  =========================================================================
    pw - msgpack writer

    Maps, arrays, strings, integers, booleans and nil are written straight
    into the buffer, in the encodings msgpack-c's packer chooses (the
    shortest; str8 for strings of 32 to 255 bytes), so the bytes are the
    ones msgpack_pack_* would give. Floats, binaries and re-encoded decoded
    values go through a msgpack_packer that appends to the same buffer.
    A buffer that cannot grow aborts: callers never check a write, as with
    CZMQ's allocations.
    =========================================================================
*/
#include "pw.h"

#include <assert.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_FIRST_BYTES 8192      //  First allocation, as msgpack_sbuffer's

struct _pw_t {
    pw_buffer_t buffer;         //  First: pw.h's inline writers read it
    msgpack_packer packer;      //  Appends to data (floats, bin, pv values)
};

static void
s_out_of_memory (void)
{
    fprintf (stderr, "pw: out of memory\n");
    abort ();
}

//  Makes room for LEN more bytes.
static void
s_grow (pw_t *self, size_t len)
{
    size_t max = self->buffer.max ? self->buffer.max : S_FIRST_BYTES;
    while (max - self->buffer.size < len) {
        if (max > SIZE_MAX / 2)
            s_out_of_memory ();
        max *= 2;
    }
    uint8_t *data = (uint8_t *) realloc (self->buffer.data, max);
    if (!data)
        s_out_of_memory ();
    self->buffer.data = data;
    self->buffer.max = max;
}

//  LEN bytes at the end of the buffer, counted as written.
static inline uint8_t *
s_append (pw_t *self, size_t len)
{
    if (self->buffer.max - self->buffer.size < len)
        s_grow (self, len);
    uint8_t *at = self->buffer.data + self->buffer.size;
    self->buffer.size += len;
    return at;
}

static int
s_write (void *data, const char *buf, size_t len)
{
    if (len > 0)
        memcpy (s_append ((pw_t *) data, len), buf, len);
    return 0;
}

static inline void
s_store16 (uint8_t *at, uint16_t value)
{
    at [0] = (uint8_t) (value >> 8);
    at [1] = (uint8_t) value;
}

static inline void
s_store32 (uint8_t *at, uint32_t value)
{
    at [0] = (uint8_t) (value >> 24);
    at [1] = (uint8_t) (value >> 16);
    at [2] = (uint8_t) (value >> 8);
    at [3] = (uint8_t) value;
}

static inline void
s_store64 (uint8_t *at, uint64_t value)
{
    s_store32 (at, (uint32_t) (value >> 32));
    s_store32 (at + 4, (uint32_t) value);
}

//  A map or array header: FIX | count below 16, else the 16- or 32-bit
//  form.
static void
s_container (pw_t *self, size_t count, uint8_t fix, uint8_t tag16,
             uint8_t tag32)
{
    if (count < 16)
        *s_append (self, 1) = (uint8_t) (fix | count);
    else
    if (count < 65536) {
        uint8_t *at = s_append (self, 3);
        at [0] = tag16;
        s_store16 (at + 1, (uint16_t) count);
    }
    else {
        uint8_t *at = s_append (self, 5);
        at [0] = tag32;
        s_store32 (at + 1, (uint32_t) count);
    }
}

pw_t *
pw_new (void)
{
    pw_t *self = calloc (1, sizeof *self);
    if (!self)
        s_out_of_memory ();
    msgpack_packer_init (&self->packer, self, s_write);
    return self;
}

void
pw_destroy (pw_t **self_p)
{
    assert (self_p);
    pw_t *self = *self_p;
    if (!self)
        return;
    free (self->buffer.data);
    free (self);
    *self_p = NULL;
}

void
pw_reset (pw_t *self)
{
    assert (self);
    self->buffer.size = 0;
}

void
pw_map_any (pw_t *self, size_t count)
{
    assert (self);
    assert (count <= UINT32_MAX);
    s_container (self, count, 0x80, 0xde, 0xdf);
}

void
pw_array (pw_t *self, size_t count)
{
    assert (self);
    assert (count <= UINT32_MAX);
    s_container (self, count, 0x90, 0xdc, 0xdd);
}

void
pw_strn (pw_t *self, const char *text, size_t len)
{
    assert (self);
    assert (text || len == 0);
    assert (len <= UINT32_MAX);
    uint8_t *at;
    if (len < 32) {
        at = s_append (self, 1 + len);
        *at++ = (uint8_t) (0xa0 | len);
    }
    else
    if (len < 256) {
        at = s_append (self, 2 + len);
        *at++ = 0xd9;
        *at++ = (uint8_t) len;
    }
    else
    if (len < 65536) {
        at = s_append (self, 3 + len);
        *at++ = 0xda;
        s_store16 (at, (uint16_t) len);
        at += 2;
    }
    else {
        at = s_append (self, 5 + len);
        *at++ = 0xdb;
        s_store32 (at, (uint32_t) len);
        at += 4;
    }
    if (len > 0)
        memcpy (at, text, len);
}

void
pw_int_any (pw_t *self, int64_t value)
{
    assert (self);
    uint8_t *at;
    if (value >= -32 && value < 128)
        *s_append (self, 1) = (uint8_t) value;
    else
    if (value < 0) {
        if (value >= -128) {
            at = s_append (self, 2);
            at [0] = 0xd0;
            at [1] = (uint8_t) value;
        }
        else
        if (value >= -32768) {
            at = s_append (self, 3);
            at [0] = 0xd1;
            s_store16 (at + 1, (uint16_t) value);
        }
        else
        if (value >= INT32_MIN) {
            at = s_append (self, 5);
            at [0] = 0xd2;
            s_store32 (at + 1, (uint32_t) value);
        }
        else {
            at = s_append (self, 9);
            at [0] = 0xd3;
            s_store64 (at + 1, (uint64_t) value);
        }
    }
    else
    if (value < 256) {
        at = s_append (self, 2);
        at [0] = 0xcc;
        at [1] = (uint8_t) value;
    }
    else
    if (value < 65536) {
        at = s_append (self, 3);
        at [0] = 0xcd;
        s_store16 (at + 1, (uint16_t) value);
    }
    else
    if (value <= UINT32_MAX) {
        at = s_append (self, 5);
        at [0] = 0xce;
        s_store32 (at + 1, (uint32_t) value);
    }
    else {
        at = s_append (self, 9);
        at [0] = 0xcf;
        s_store64 (at + 1, (uint64_t) value);
    }
}

void
pw_bool_any (pw_t *self, bool value)
{
    assert (self);
    *s_append (self, 1) = value ? 0xc3 : 0xc2;
}

void
pw_float (pw_t *self, double value)
{
    assert (self);
    msgpack_pack_double (&self->packer, value);
}

void
pw_nil (pw_t *self)
{
    assert (self);
    *s_append (self, 1) = 0xc0;
}

void
pw_bin (pw_t *self, const void *data, size_t len)
{
    assert (self);
    assert (data || len == 0);
    assert (len <= UINT32_MAX);
    msgpack_pack_bin (&self->packer, len);
    if (len > 0)
        msgpack_pack_bin_body (&self->packer, data, len);
}

void
pw_raw (pw_t *self, const void *data, size_t len)
{
    assert (self);
    assert (data || len == 0);
    s_write (self, data, len);
}

void
pw_pv (pw_t *self, const pv_t *value)
{
    assert (self);
    if (value)
        msgpack_pack_object (&self->packer, *value);
    else
        pw_nil (self);
}

//  Orders map entries by their keys' bytes (keys are strings in every
//  decoded document; other kinds sort by type first).
static int
s_entry_compare (const void *left, const void *right)
{
    const msgpack_object *a = &(*(const msgpack_object_kv *const *) left)->key;
    const msgpack_object *b = &(*(const msgpack_object_kv *const *) right)->key;
    if (a->type != b->type)
        return a->type < b->type ? -1 : 1;
    if (a->type != MSGPACK_OBJECT_STR)
        return 0;
    uint32_t a_len = a->via.str.size, b_len = b->via.str.size;
    int cmp = memcmp (a->via.str.ptr, b->via.str.ptr,
                      a_len < b_len ? a_len : b_len);
    return cmp ? cmp : a_len < b_len ? -1 : a_len > b_len ? 1 : 0;
}

void
pw_pv_canonical (pw_t *self, const pv_t *value)
{
    assert (self);
    if (!value) {
        pw_nil (self);
        return;
    }
    switch (value->type) {
        case MSGPACK_OBJECT_ARRAY:
            pw_array (self, value->via.array.size);
            for (uint32_t index = 0; index < value->via.array.size; index++)
                pw_pv_canonical (self, &value->via.array.ptr [index]);
            break;
        case MSGPACK_OBJECT_MAP: {
            uint32_t count = value->via.map.size;
            const msgpack_object_kv **entries = NULL;
            if (count) {
                entries = malloc (count * sizeof *entries);
                if (!entries)
                    s_out_of_memory ();
                for (uint32_t index = 0; index < count; index++)
                    entries [index] = &value->via.map.ptr [index];
                qsort (entries, count, sizeof *entries, s_entry_compare);
            }
            pw_map (self, count);
            for (uint32_t index = 0; index < count; index++) {
                pw_pv_canonical (self, &entries [index]->key);
                pw_pv_canonical (self, &entries [index]->val);
            }
            free (entries);
            break;
        }
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
            msgpack_pack_uint64 (&self->packer, value->via.u64);
            break;
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
            msgpack_pack_int64 (&self->packer, value->via.i64);
            break;
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
            pw_float (self, value->via.f64);
            break;
        default:
            msgpack_pack_object (&self->packer, *value);
            break;
    }
}

const void *
pw_data (const pw_t *self)
{
    assert (self);
    return self->buffer.data;
}

size_t
pw_size (const pw_t *self)
{
    assert (self);
    return self->buffer.size;
}
