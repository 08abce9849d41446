/*  =========================================================================
    pv - strictly decoded msgpack values

    msgpack-c is lenient where grid must be strict (ARCHITECTURE 5a), so a
    frame goes through three gates before anyone sees a value:

    1. s_prepass walks the msgpack grammar over the raw bytes itself. It
       refuses truncation, reserved bytes, ext types, integers that do not
       fit int64_t, non-string map keys, nesting deeper than PV_MAX_DEPTH,
       more than PV_MAX_OBJECTS objects, and any container whose declared
       count exceeds the bytes left (every element takes at least one
       byte). msgpack-c allocates a container's slots up front from the
       declared count, so this bound is what keeps a five-byte header from
       asking for gigabytes.
    2. msgpack_unpack must then return SUCCESS having used every byte.
    3. s_check_keys refuses duplicate keys in every map: a pairwise compare
       for small maps, a sort for larger ones.
    =========================================================================
*/
#include "pv.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <msgpack.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct _pv_doc_t {
    msgpack_zone zone;      //  Holds the object tree
    msgpack_object root;    //  The decoded value
    char *bytes;            //  Copy of the frame; strings point into it
    size_t size;            //  Its length
};

//  Maps with at most this many keys are checked pairwise for duplicates.
#define PV_SMALL_MAP 16

static void
s_why (char *why, size_t why_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_why (char *why, size_t why_len, const char *format, ...)
{
    if (!why || why_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (why, why_len, format, args);
    va_end (args);
}

//  Copies up to 40 bytes of a string key into BUF for an error message,
//  replacing anything unprintable so the message stays one clean line.
static const char *
s_printable (const char *data, size_t len, char *buf, size_t buf_len)
{
    size_t out = 0;
    size_t limit = buf_len > 4 ? buf_len - 4 : 0;
    size_t index;
    for (index = 0; index < len && out < limit && index < 40; index++) {
        unsigned char c = (unsigned char) data [index];
        buf [out++] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
    }
    if (index < len && out + 3 < buf_len) {
        memcpy (buf + out, "...", 3);
        out += 3;
    }
    if (buf_len > 0)
        buf [out < buf_len ? out : buf_len - 1] = 0;
    return buf;
}


//  ---------------------------------------------------------------------
//  Gate 1: the grammar walk

typedef struct {
    uint64_t remaining;     //  Items still to read (a map counts 2 per pair)
    bool is_map;            //  Keys are at even remaining counts
} s_level_t;

static uint64_t
s_read_be (const unsigned char *p, size_t width)
{
    uint64_t value = 0;
    for (size_t index = 0; index < width; index++)
        value = (value << 8) | p [index];
    return value;
}

static int
s_prepass (const unsigned char *data, size_t size, char *why, size_t why_len)
{
    s_level_t stack [PV_MAX_DEPTH];
    size_t depth = 0;
    size_t pos = 0;
    size_t objects = 0;

    while (true) {
        if (pos >= size) {
            s_why (why, why_len, "truncated at byte %zu", pos);
            return -2;
        }
        bool want_key = depth > 0 && stack [depth - 1].is_map
                        && stack [depth - 1].remaining % 2 == 0;
        if (++objects > PV_MAX_OBJECTS) {
            s_why (why, why_len, "more than %d objects", PV_MAX_OBJECTS);
            return -2;
        }
        size_t start = pos;
        unsigned char byte = data [pos++];
        size_t len_width = 0;       //  Width of a str/bin/container length
        size_t fixed = 0;           //  Payload bytes of a fixed-size scalar
        uint64_t length = 0;        //  str/bin payload length
        uint64_t count = 0;         //  Container element count
        bool is_string = false;
        bool is_bin = false;
        bool is_array = false;
        bool is_map = false;

        if (byte <= 0x7f || byte >= 0xe0)
            ;                       //  Positive or negative fixint
        else
        if (byte <= 0x8f) {
            is_map = true;
            count = byte & 0x0f;
        }
        else
        if (byte <= 0x9f) {
            is_array = true;
            count = byte & 0x0f;
        }
        else
        if (byte <= 0xbf) {
            is_string = true;
            length = byte & 0x1f;
        }
        else {
            switch (byte) {
                case 0xc0: case 0xc2: case 0xc3:
                    break;
                case 0xc4: is_bin = true; len_width = 1; break;
                case 0xc5: is_bin = true; len_width = 2; break;
                case 0xc6: is_bin = true; len_width = 4; break;
                case 0xca: fixed = 4; break;
                case 0xcb: fixed = 8; break;
                case 0xcc: case 0xd0: fixed = 1; break;
                case 0xcd: case 0xd1: fixed = 2; break;
                case 0xce: case 0xd2: fixed = 4; break;
                case 0xcf: case 0xd3: fixed = 8; break;
                case 0xd9: is_string = true; len_width = 1; break;
                case 0xda: is_string = true; len_width = 2; break;
                case 0xdb: is_string = true; len_width = 4; break;
                case 0xdc: is_array = true; len_width = 2; break;
                case 0xdd: is_array = true; len_width = 4; break;
                case 0xde: is_map = true; len_width = 2; break;
                case 0xdf: is_map = true; len_width = 4; break;
                case 0xc1:
                    s_why (why, why_len, "reserved byte 0xc1 at byte %zu",
                           start);
                    return -2;
                default:
                    //  0xc7..0xc9 ext 8/16/32, 0xd4..0xd8 fixext
                    s_why (why, why_len, "ext type at byte %zu", start);
                    return -2;
            }
        }
        if (want_key && !is_string) {
            s_why (why, why_len, "map key at byte %zu is not a string",
                   start);
            return -2;
        }
        if (size - pos < len_width + fixed) {
            s_why (why, why_len, "truncated at byte %zu", size);
            return -2;
        }
        if (fixed > 0) {
            if (byte == 0xcf && data [pos] >= 0x80) {
                s_why (why, why_len,
                       "integer at byte %zu does not fit int64", start);
                return -2;
            }
            pos += fixed;
        }
        if (len_width > 0) {
            uint64_t value = s_read_be (data + pos, len_width);
            pos += len_width;
            if (is_string || is_bin)
                length = value;
            else
                count = value;
        }
        if (is_string || is_bin) {
            if (length > size - pos) {
                s_why (why, why_len,
                       "%s at byte %zu claims %" PRIu64 " bytes but only "
                       "%zu remain", is_bin ? "binary" : "string", start,
                       length, size - pos);
                return -2;
            }
            pos += (size_t) length;
        }
        if (is_array || is_map) {
            uint64_t items = is_map ? count * 2 : count;
            if (depth >= PV_MAX_DEPTH) {
                s_why (why, why_len, "nesting deeper than %d at byte %zu",
                       PV_MAX_DEPTH, start);
                return -2;
            }
            if (items > size - pos) {
                s_why (why, why_len,
                       "%s at byte %zu claims %" PRIu64 " entries but only "
                       "%zu bytes remain", is_map ? "map" : "array", start,
                       count, size - pos);
                return -2;
            }
            if (items > 0) {
                stack [depth].remaining = items;
                stack [depth].is_map = is_map;
                depth++;
                continue;
            }
        }
        //  One value is complete: close every container it completes
        while (depth > 0) {
            if (--stack [depth - 1].remaining > 0)
                break;
            depth--;
        }
        if (depth == 0)
            break;
    }
    if (pos != size) {
        s_why (why, why_len, "%zu trailing bytes after the value",
               size - pos);
        return -2;
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  Gate 3: duplicate keys

static int
s_key_compare (const void *a, const void *b)
{
    const msgpack_object *left = *(const msgpack_object *const *) a;
    const msgpack_object *right = *(const msgpack_object *const *) b;
    uint32_t left_len = left->via.str.size;
    uint32_t right_len = right->via.str.size;
    if (left_len != right_len)
        return left_len < right_len ? -1 : 1;
    if (left_len == 0)
        return 0;
    return memcmp (left->via.str.ptr, right->via.str.ptr, left_len);
}

static bool
s_key_equal (const msgpack_object *a, const msgpack_object *b)
{
    const msgpack_object *pa = a, *pb = b;
    return s_key_compare (&pa, &pb) == 0;
}

static int
s_report_duplicate (const msgpack_object *key, char *why, size_t why_len)
{
    char text [64];
    s_why (why, why_len, "duplicate map key '%s'",
           s_printable (key->via.str.ptr, key->via.str.size, text,
                        sizeof text));
    return -2;
}

static int
s_check_keys (const msgpack_object *value, char *why, size_t why_len)
{
    if (value->type == MSGPACK_OBJECT_ARRAY) {
        for (uint32_t index = 0; index < value->via.array.size; index++)
            if (s_check_keys (&value->via.array.ptr [index], why, why_len))
                return -2;
        return 0;
    }
    if (value->type != MSGPACK_OBJECT_MAP)
        return 0;

    const msgpack_object_map *map = &value->via.map;
    if (map->size <= PV_SMALL_MAP) {
        for (uint32_t index = 1; index < map->size; index++)
            for (uint32_t other = 0; other < index; other++)
                if (s_key_equal (&map->ptr [index].key,
                                 &map->ptr [other].key))
                    return s_report_duplicate (&map->ptr [index].key, why,
                                               why_len);
    }
    else {
        const msgpack_object **keys = malloc (map->size * sizeof *keys);
        if (!keys) {
            s_why (why, why_len, "out of memory");
            return -2;
        }
        for (uint32_t index = 0; index < map->size; index++)
            keys [index] = &map->ptr [index].key;
        qsort (keys, map->size, sizeof *keys, s_key_compare);
        for (uint32_t index = 1; index < map->size; index++)
            if (s_key_equal (keys [index], keys [index - 1])) {
                s_report_duplicate (keys [index], why, why_len);
                free (keys);
                return -2;
            }
        free (keys);
    }
    for (uint32_t index = 0; index < map->size; index++)
        if (s_check_keys (&map->ptr [index].val, why, why_len))
            return -2;
    return 0;
}


//  ---------------------------------------------------------------------
//  Documents

int
pv_doc_decode (const void *data, size_t size, pv_doc_t **doc_p, char *why,
               size_t why_len)
{
    assert (doc_p);
    *doc_p = NULL;
    if (why && why_len > 0)
        why [0] = 0;
    if (!data && size > 0) {
        s_why (why, why_len, "no data");
        return -2;
    }
    if (s_prepass ((const unsigned char *) data, size, why, why_len))
        return -2;

    pv_doc_t *doc = calloc (1, sizeof *doc);
    if (!doc) {
        s_why (why, why_len, "out of memory");
        return -2;
    }
    //  msgpack-c points strings into the input, so the document keeps
    //  its own copy of the bytes
    doc->bytes = malloc (size);
    if (!doc->bytes || !msgpack_zone_init (&doc->zone,
                                           MSGPACK_ZONE_CHUNK_SIZE)) {
        free (doc->bytes);
        free (doc);
        s_why (why, why_len, "out of memory");
        return -2;
    }
    memcpy (doc->bytes, data, size);
    doc->size = size;

    size_t offset = 0;
    msgpack_unpack_return rc = msgpack_unpack (doc->bytes, size, &offset,
                                               &doc->zone, &doc->root);
    if (rc != MSGPACK_UNPACK_SUCCESS || offset != size) {
        s_why (why, why_len, "msgpack decoder refused the frame (%d)",
               (int) rc);
        pv_doc_destroy (&doc);
        return -2;
    }
    if (s_check_keys (&doc->root, why, why_len)) {
        pv_doc_destroy (&doc);
        return -2;
    }
    *doc_p = doc;
    return 0;
}

void
pv_doc_destroy (pv_doc_t **doc_p)
{
    assert (doc_p);
    pv_doc_t *doc = *doc_p;
    if (!doc)
        return;
    msgpack_zone_destroy (&doc->zone);
    free (doc->bytes);
    free (doc);
    *doc_p = NULL;
}

const pv_t *
pv_doc_root (const pv_doc_t *doc)
{
    assert (doc);
    return &doc->root;
}


//  ---------------------------------------------------------------------
//  Reading values

pv_type_t
pv_type (const pv_t *value)
{
    if (!value)
        return PV_NIL;
    switch (value->type) {
        case MSGPACK_OBJECT_NIL: return PV_NIL;
        case MSGPACK_OBJECT_BOOLEAN: return PV_BOOL;
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
        case MSGPACK_OBJECT_NEGATIVE_INTEGER: return PV_INT;
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64: return PV_FLOAT;
        case MSGPACK_OBJECT_STR: return PV_STR;
        case MSGPACK_OBJECT_BIN: return PV_BIN;
        case MSGPACK_OBJECT_ARRAY: return PV_ARRAY;
        case MSGPACK_OBJECT_MAP: return PV_MAP;
        case MSGPACK_OBJECT_EXT: return PV_EXT;
    }
    return PV_EXT;
}

const char *
pv_type_name (pv_type_t type)
{
    switch (type) {
        case PV_NIL: return "nil";
        case PV_BOOL: return "bool";
        case PV_INT: return "int";
        case PV_FLOAT: return "float";
        case PV_STR: return "string";
        case PV_BIN: return "binary";
        case PV_ARRAY: return "array";
        case PV_MAP: return "map";
        case PV_EXT: return "ext";
    }
    return "?";
}

size_t
pv_size (const pv_t *value)
{
    switch (pv_type (value)) {
        case PV_ARRAY: return value->via.array.size;
        case PV_MAP: return value->via.map.size;
        case PV_STR: return value->via.str.size;
        case PV_BIN: return value->via.bin.size;
        default: return 0;
    }
}

const pv_t *
pv_array_at (const pv_t *value, size_t index)
{
    if (pv_type (value) != PV_ARRAY || index >= value->via.array.size)
        return NULL;
    return &value->via.array.ptr [index];
}

static bool
s_key_is (const msgpack_object *key, const char *text, size_t text_len)
{
    return key->type == MSGPACK_OBJECT_STR
           && key->via.str.size == text_len
           && (text_len == 0
               || memcmp (key->via.str.ptr, text, text_len) == 0);
}

const pv_t *
pv_map_get (const pv_t *value, const char *key)
{
    if (pv_type (value) != PV_MAP || !key)
        return NULL;
    size_t key_len = strlen (key);
    for (uint32_t index = 0; index < value->via.map.size; index++)
        if (s_key_is (&value->via.map.ptr [index].key, key, key_len))
            return &value->via.map.ptr [index].val;
    return NULL;
}

const pv_t *
pv_map_key_at (const pv_t *value, size_t index)
{
    if (pv_type (value) != PV_MAP || index >= value->via.map.size)
        return NULL;
    return &value->via.map.ptr [index].key;
}

const pv_t *
pv_map_value_at (const pv_t *value, size_t index)
{
    if (pv_type (value) != PV_MAP || index >= value->via.map.size)
        return NULL;
    return &value->via.map.ptr [index].val;
}

int
pv_get_bool (const pv_t *value, bool *out)
{
    if (pv_type (value) != PV_BOOL)
        return -1;
    *out = value->via.boolean;
    return 0;
}

int
pv_get_int (const pv_t *value, int64_t *out)
{
    if (!value)
        return -1;
    if (value->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = value->via.i64;
        return 0;
    }
    if (value->type == MSGPACK_OBJECT_POSITIVE_INTEGER
    &&  value->via.u64 <= (uint64_t) INT64_MAX) {
        *out = (int64_t) value->via.u64;
        return 0;
    }
    return -1;
}

int
pv_get_float (const pv_t *value, double *out)
{
    if (!value)
        return -1;
    if (value->type == MSGPACK_OBJECT_FLOAT32
    ||  value->type == MSGPACK_OBJECT_FLOAT64) {
        *out = value->via.f64;
        return 0;
    }
    int64_t integer;
    if (pv_get_int (value, &integer) == 0) {
        *out = (double) integer;
        return 0;
    }
    return -1;
}

const char *
pv_str (const pv_t *value, size_t *len_p)
{
    pv_type_t type = pv_type (value);
    if (type != PV_STR && type != PV_BIN)
        return NULL;
    if (len_p)
        *len_p = type == PV_STR ? value->via.str.size : value->via.bin.size;
    //  An empty string may carry a NULL pointer; callers get "" instead
    const char *ptr = type == PV_STR ? value->via.str.ptr
                                     : value->via.bin.ptr;
    return ptr ? ptr : "";
}

char *
pv_strdup (const pv_t *value)
{
    if (pv_type (value) != PV_STR)
        return NULL;
    size_t len = value->via.str.size;
    if (len > 0 && memchr (value->via.str.ptr, 0, len))
        return NULL;
    char *copy = malloc (len + 1);
    if (!copy)
        return NULL;
    if (len > 0)
        memcpy (copy, value->via.str.ptr, len);
    copy [len] = 0;
    return copy;
}

bool
pv_str_eq (const pv_t *value, const char *text)
{
    return value && text && s_key_is (value, text, strlen (text));
}

int
pv_map_check (const pv_t *map, const pv_field_t *fields, size_t count,
              char *why, size_t why_len)
{
    char text [64];
    if (pv_type (map) != PV_MAP) {
        s_why (why, why_len, "expected map, got %s",
               pv_type_name (pv_type (map)));
        return -2;
    }
    for (uint32_t index = 0; index < map->via.map.size; index++) {
        const msgpack_object *key = &map->via.map.ptr [index].key;
        const msgpack_object *value = &map->via.map.ptr [index].val;
        if (key->type != MSGPACK_OBJECT_STR) {
            s_why (why, why_len, "map key is not a string");
            return -2;
        }
        const pv_field_t *field = NULL;
        for (size_t which = 0; which < count && !field; which++)
            if (s_key_is (key, fields [which].key,
                          strlen (fields [which].key)))
                field = &fields [which];
        if (!field) {
            s_why (why, why_len, "unknown key '%s'",
                   s_printable (key->via.str.ptr, key->via.str.size, text,
                                sizeof text));
            return -2;
        }
        pv_type_t type = pv_type (value);
        if (type != field->type
        &&  !(field->type == PV_FLOAT && type == PV_INT)) {
            s_why (why, why_len, "%s: expected %s, got %s", field->key,
                   pv_type_name (field->type), pv_type_name (type));
            return -2;
        }
    }
    for (size_t which = 0; which < count; which++)
        if (fields [which].required && !pv_map_get (map, fields [which].key)) {
            s_why (why, why_len, "%s: required", fields [which].key);
            return -2;
        }
    return 0;
}


//  ---------------------------------------------------------------------
//  JSON

typedef struct {
    FILE *file;         //  Destination
    int indent;         //  Spaces per level, 0 for one line
    bool failed;        //  A write failed
} s_json_t;

static void
s_put (s_json_t *json, const char *text)
{
    if (fputs (text, json->file) == EOF)
        json->failed = true;
}

static void
s_putc (s_json_t *json, char c)
{
    if (fputc (c, json->file) == EOF)
        json->failed = true;
}

static void
s_newline (s_json_t *json, int level)
{
    if (json->indent <= 0)
        return;
    s_putc (json, '\n');
    for (int spaces = 0; spaces < json->indent * level; spaces++)
        s_putc (json, ' ');
}

//  Length of the valid UTF-8 sequence at P (at most LEN bytes), or 0 when
//  the bytes there are not one: overlong forms, surrogates and code points
//  past U+10FFFF count as invalid.
static size_t
s_utf8_length (const unsigned char *p, size_t len)
{
    unsigned char c = p [0];
    size_t need;
    uint32_t min;
    uint32_t code;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
        min = 0x80;
        code = c & 0x1f;
    }
    else
    if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        min = 0x800;
        code = c & 0x0f;
    }
    else
    if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        min = 0x10000;
        code = c & 0x07;
    }
    else
        return 0;
    if (len < need)
        return 0;
    for (size_t index = 1; index < need; index++) {
        if ((p [index] & 0xc0) != 0x80)
            return 0;
        code = (code << 6) | (p [index] & 0x3f);
    }
    if (code < min || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff))
        return 0;
    return need;
}

static void
s_json_string (s_json_t *json, const char *data, size_t len)
{
    const unsigned char *p = (const unsigned char *) data;
    s_putc (json, '"');
    size_t index = 0;
    while (index < len) {
        unsigned char c = p [index];
        char escape [8];
        if (c == '"')
            s_put (json, "\\\"");
        else
        if (c == '\\')
            s_put (json, "\\\\");
        else
        if (c == '\n')
            s_put (json, "\\n");
        else
        if (c == '\r')
            s_put (json, "\\r");
        else
        if (c == '\t')
            s_put (json, "\\t");
        else
        if (c < 0x20 || c == 0x7f) {
            snprintf (escape, sizeof escape, "\\u%04x", c);
            s_put (json, escape);
        }
        else
        if (c < 0x80)
            s_putc (json, (char) c);
        else {
            size_t seq = s_utf8_length (p + index, len - index);
            if (seq == 0) {
                s_put (json, "\\ufffd");
                index++;
                continue;
            }
            if (fwrite (p + index, 1, seq, json->file) != seq)
                json->failed = true;
            index += seq;
            continue;
        }
        index++;
    }
    s_putc (json, '"');
}

static void
s_json_base64 (s_json_t *json, const unsigned char *data, size_t len)
{
    static const char alphabet [] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    s_putc (json, '"');
    for (size_t index = 0; index < len; index += 3) {
        uint32_t chunk = (uint32_t) data [index] << 16;
        if (index + 1 < len)
            chunk |= (uint32_t) data [index + 1] << 8;
        if (index + 2 < len)
            chunk |= data [index + 2];
        s_putc (json, alphabet [(chunk >> 18) & 0x3f]);
        s_putc (json, alphabet [(chunk >> 12) & 0x3f]);
        s_putc (json, index + 1 < len ? alphabet [(chunk >> 6) & 0x3f] : '=');
        s_putc (json, index + 2 < len ? alphabet [chunk & 0x3f] : '=');
    }
    s_putc (json, '"');
}

static void
s_json_value (s_json_t *json, const pv_t *value, int level)
{
    char number [40];
    switch (pv_type (value)) {
        case PV_NIL:
        case PV_EXT:
            s_put (json, "null");
            break;
        case PV_BOOL:
            s_put (json, value->via.boolean ? "true" : "false");
            break;
        case PV_INT:
            if (value->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                snprintf (number, sizeof number, "%" PRIu64, value->via.u64);
            else
                snprintf (number, sizeof number, "%" PRId64, value->via.i64);
            s_put (json, number);
            break;
        case PV_FLOAT: {
            double real = value->via.f64;
            //  JSON has no NaN or infinity
            if (!isfinite (real))
                s_put (json, "null");
            else {
                snprintf (number, sizeof number, "%.17g", real);
                s_put (json, number);
            }
            break;
        }
        case PV_STR:
            s_json_string (json, value->via.str.ptr, value->via.str.size);
            break;
        case PV_BIN:
            s_json_base64 (json, (const unsigned char *) value->via.bin.ptr,
                           value->via.bin.size);
            break;
        case PV_ARRAY: {
            uint32_t size = value->via.array.size;
            s_putc (json, '[');
            for (uint32_t index = 0; index < size; index++) {
                if (index > 0)
                    s_putc (json, ',');
                s_newline (json, level + 1);
                s_json_value (json, &value->via.array.ptr [index], level + 1);
            }
            if (size > 0)
                s_newline (json, level);
            s_putc (json, ']');
            break;
        }
        case PV_MAP: {
            uint32_t size = value->via.map.size;
            s_putc (json, '{');
            for (uint32_t index = 0; index < size; index++) {
                const msgpack_object *key = &value->via.map.ptr [index].key;
                if (index > 0)
                    s_putc (json, ',');
                s_newline (json, level + 1);
                if (key->type == MSGPACK_OBJECT_STR)
                    s_json_string (json, key->via.str.ptr, key->via.str.size);
                else
                    s_json_string (json, "", 0);
                s_put (json, json->indent > 0 ? ": " : ":");
                s_json_value (json, &value->via.map.ptr [index].val,
                              level + 1);
            }
            if (size > 0)
                s_newline (json, level);
            s_putc (json, '}');
            break;
        }
    }
}

int
pv_write_json (const pv_t *value, FILE *file, int indent)
{
    assert (file);
    s_json_t json = { file, indent, false };
    s_json_value (&json, value, 0);
    return json.failed || ferror (file) ? -1 : 0;
}
