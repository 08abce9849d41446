/*  =========================================================================
    pw - msgpack writer over msgpack_sbuffer + msgpack_packer

    The packer writes through s_write, which aborts when the buffer cannot
    grow: callers never check a write, as with CZMQ's allocations.
    =========================================================================
*/
#include "pw.h"

#include <assert.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _pw_t {
    msgpack_sbuffer buffer;     //  The bytes written so far
    msgpack_packer packer;      //  Writes into buffer
};

static void
s_out_of_memory (void)
{
    fprintf (stderr, "pw: out of memory\n");
    abort ();
}

static int
s_write (void *data, const char *buf, size_t len)
{
    if (len > 0 && msgpack_sbuffer_write (data, buf, len) != 0)
        s_out_of_memory ();
    return 0;
}

pw_t *
pw_new (void)
{
    pw_t *self = calloc (1, sizeof *self);
    if (!self)
        s_out_of_memory ();
    msgpack_sbuffer_init (&self->buffer);
    msgpack_packer_init (&self->packer, &self->buffer, s_write);
    return self;
}

void
pw_destroy (pw_t **self_p)
{
    assert (self_p);
    pw_t *self = *self_p;
    if (!self)
        return;
    msgpack_sbuffer_destroy (&self->buffer);
    free (self);
    *self_p = NULL;
}

void
pw_reset (pw_t *self)
{
    assert (self);
    msgpack_sbuffer_clear (&self->buffer);
}

void
pw_map (pw_t *self, size_t count)
{
    assert (self);
    assert (count <= UINT32_MAX);
    msgpack_pack_map (&self->packer, count);
}

void
pw_array (pw_t *self, size_t count)
{
    assert (self);
    assert (count <= UINT32_MAX);
    msgpack_pack_array (&self->packer, count);
}

void
pw_str (pw_t *self, const char *text)
{
    assert (self);
    if (text)
        pw_strn (self, text, strlen (text));
    else
        pw_nil (self);
}

void
pw_strn (pw_t *self, const char *text, size_t len)
{
    assert (self);
    assert (text || len == 0);
    assert (len <= UINT32_MAX);
    msgpack_pack_str (&self->packer, len);
    if (len > 0)
        msgpack_pack_str_body (&self->packer, text, len);
}

void
pw_int (pw_t *self, int64_t value)
{
    assert (self);
    msgpack_pack_int64 (&self->packer, value);
}

void
pw_bool (pw_t *self, bool value)
{
    assert (self);
    if (value)
        msgpack_pack_true (&self->packer);
    else
        msgpack_pack_false (&self->packer);
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
    msgpack_pack_nil (&self->packer);
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
    s_write (&self->buffer, data, len);
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
