/*  =========================================================================
    pv - strictly decoded msgpack values

    msgpack-c is lenient where grid must be strict (ARCHITECTURE 5a), so pv
    reads frames itself: one walker over the msgpack grammar, s_walk, that
    refuses truncation, reserved bytes, ext types, integers that do not fit
    int64_t, strings that are not UTF-8 text (overlong forms, surrogates,
    code points past U+10FFFF, NUL bytes), non-string map keys, nesting deeper than PV_MAX_DEPTH, more
    than PV_MAX_OBJECTS objects, any container whose declared count exceeds
    the bytes left (every element takes at least one byte) and trailing
    bytes, and that refuses duplicate keys in every map as the map
    completes (a hashed pairwise compare for small maps, a sort for larger
    ones). Nothing is ever allocated from a declared count, so a five-byte
    header cannot ask for gigabytes.

    A document is one allocation: a slot per object (msgpack-c's own
    msgpack_object, so pv_t stays that type) and, unless the caller lends
    the bytes, a copy of the frame that strings point into. A frame of at
    most PV_LOCAL_SLOTS objects, as most messages are, is read in one walk
    into slots on the stack that are then copied into the document; a
    larger one is walked twice, once to check it and count its objects,
    once to fill the document.

    msgpack_unpack is not used: with the zone it needs per frame it cost as
    much as both walks together. The fuzz build (GRID_FUZZ_LIBFUZZER) runs
    it on every accepted frame all the same, and aborts unless it reads the
    very same tree.
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
    msgpack_object root;        //  The decoded value
    msgpack_object slots [];    //  Every other object, each container's
                                //  items in a row; then the frame's copy,
                                //  if the document holds one
};

//  A map's pairs are two slots each, key then value.
_Static_assert (sizeof (msgpack_object_kv) == 2 * sizeof (msgpack_object),
                "a map pair is two slots");

//  Maps with at most this many keys are checked pairwise for duplicates.
#define PV_SMALL_MAP 16

//  Frames of at most this many objects are read in one walk, into 1.5 KB
//  of stack: acks, heartbeats, most results.
#define PV_LOCAL_SLOTS 64

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
//  Duplicate keys

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
    return a->via.str.size == b->via.str.size
           && (a->via.str.size == 0
               || memcmp (a->via.str.ptr, b->via.str.ptr, a->via.str.size)
                  == 0);
}

//  One of 64 buckets for a key, from its length and end bytes: equal keys
//  share a bucket, so only keys whose bucket is taken need comparing.
static unsigned
s_key_bucket (const msgpack_object *key)
{
    uint32_t len = key->via.str.size;
    if (len == 0)
        return 0;
    const unsigned char *text = (const unsigned char *) key->via.str.ptr;
    return (len * 7u + text [0] * 3u + text [len - 1]) & 63u;
}

//  A key of MAP that occurs twice, or NULL. Small maps report the first
//  key, in wire order, that repeats an earlier one, as a pairwise compare
//  would; large maps sort the keys. Sets *OUT_OF_MEMORY when the sort
//  cannot allocate.
static const msgpack_object *
s_duplicate_key (const msgpack_object_map *map, bool *out_of_memory)
{
    if (map->size <= PV_SMALL_MAP) {
        uint64_t taken = 0;
        for (uint32_t index = 0; index < map->size; index++) {
            const msgpack_object *key = &map->ptr [index].key;
            uint64_t bit = (uint64_t) 1 << s_key_bucket (key);
            if (taken & bit)
                for (uint32_t other = 0; other < index; other++)
                    if (s_key_equal (key, &map->ptr [other].key))
                        return key;
            taken |= bit;
        }
        return NULL;
    }
    const msgpack_object **keys = malloc (map->size * sizeof *keys);
    if (!keys) {
        *out_of_memory = true;
        return NULL;
    }
    for (uint32_t index = 0; index < map->size; index++)
        keys [index] = &map->ptr [index].key;
    qsort (keys, map->size, sizeof *keys, s_key_compare);
    const msgpack_object *found = NULL;
    for (uint32_t index = 1; index < map->size && !found; index++)
        if (s_key_equal (keys [index], keys [index - 1]))
            found = keys [index];
    free (keys);
    return found;
}


//  ---------------------------------------------------------------------
//  Text

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

//  Offset of the first byte of LEN bytes at P that is not part of valid
//  UTF-8 text, or LEN when all are. A NUL byte is not text: a string that
//  holds one could not be a C string on the other side.
static size_t
s_text_end (const unsigned char *p, size_t len)
{
    const uint64_t high = UINT64_C (0x8080808080808080);
    const uint64_t ones = UINT64_C (0x0101010101010101);
    size_t index = 0;
    //  Eight bytes at a time while they are ASCII and none is NUL
    while (len - index >= 8) {
        uint64_t word;
        memcpy (&word, p + index, 8);
        if ((word & high) || ((word - ones) & ~word & high))
            break;
        index += 8;
    }
    while (index < len) {
        if (p [index] - 1u < 0x7fu) {
            index++;
            continue;
        }
        size_t seq = p [index] ? s_utf8_length (p + index, len - index) : 0;
        if (seq == 0)
            return index;
        index += seq;
    }
    return len;
}

//  Whether the LEN (at most 31) bytes at P are ASCII text without a NUL,
//  read a word at a time; AVAIL bytes from P may be read (at least LEN).
//  False means "not known": s_text_check decides. Little-endian only.
static inline bool
s_short_ascii (const unsigned char *p, size_t len, size_t avail)
{
#if defined (__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t high = UINT64_C (0x8080808080808080);
    const uint64_t ones = UINT64_C (0x0101010101010101);
    if (avail < ((len + 7) & ~(size_t) 7))
        return false;
    for (size_t at = 0; at < len; at += 8) {
        uint64_t word;
        memcpy (&word, p + at, 8);
        //  Bytes past the string read as 0x01: ASCII, not NUL
        size_t left = len - at;
        uint64_t mask = left >= 8 ? ~UINT64_C (0)
                                  : (UINT64_C (1) << (8 * left)) - 1;
        word = (word & mask) | (ones & ~mask);
        if ((word & high) || ((word - ones) & ~word & high))
            return false;
    }
    return true;
#else
    (void) p;
    (void) len;
    (void) avail;
    return false;
#endif
}

bool
pv_text_valid (const void *bytes, size_t len)
{
    return s_text_end ((const unsigned char *) bytes, len) == len;
}

//  Checks that the string of LEN bytes at P (whose header is at byte
//  START) is text. Returns 0, or -2 with a reason in WHY.
static int
s_text_check (const unsigned char *p, size_t len, size_t start, char *why,
              size_t why_len)
{
    size_t bad = s_text_end (p, len);
    if (bad == len)
        return 0;
    if (p [bad] == 0)
        s_why (why, why_len, "string at byte %zu holds a NUL byte", start);
    else
        s_why (why, why_len, "string at byte %zu is not valid UTF-8 "
               "(byte 0x%02x at offset %zu)", start, p [bad], bad);
    return -2;
}


//  ---------------------------------------------------------------------
//  The grammar walk

//  A building walk's state (a checking walk has none).
typedef struct {
    msgpack_object *root;           //  Where the top value goes
    msgpack_object *free_slot;      //  Next unused slot
    msgpack_object *slot_end;       //  End of the slots
    const msgpack_object *dup_key;  //  Duplicate key to report, or NULL
    size_t dup_start;               //  Offset of the map that holds it
    bool out_of_memory;             //  A large map could not be checked
} s_build_t;

//  One open level of the walk; the top level holds a single item.
typedef struct {
    uint64_t remaining;             //  Items not yet read (2 per pair)
    bool is_map;                    //  Keys come when remaining is even
    size_t start;                   //  Offset of the container's header
    msgpack_object *container;      //  Building: the container
    msgpack_object *next;           //  Building: slot of the next item
} s_level_t;

//  Reads WIDTH (1, 2, 4 or 8) big-endian bytes at P.
static uint64_t
s_read_be (const unsigned char *p, size_t width)
{
    uint64_t value = 0;
    for (size_t index = 0; index < width; index++)
        value = (value << 8) | p [index];
    return value;
}

//  Fills TARGET from a header the walk has read: its TYPE, NUMBER (the
//  bits of a scalar), SIGNED_WIDTH (the width of an int8..int64, else 0),
//  PAYLOAD (a str/bin's bytes) and COUNT (a container's entries).
static void
s_fill (s_build_t *build, msgpack_object *target, msgpack_object_type type,
        uint64_t number, size_t signed_width, const unsigned char *payload,
        uint64_t count)
{
    switch (type) {
        case MSGPACK_OBJECT_BOOLEAN:
            target->via.boolean = number != 0;
            break;
        case MSGPACK_OBJECT_POSITIVE_INTEGER: {
            //  msgpack-c's rule: a signed encoding of a value >= 0 is a
            //  positive integer too
            int64_t value = (int64_t) number;
            if (signed_width == 1)
                value = (int8_t) number;
            else
            if (signed_width == 2)
                value = (int16_t) number;
            else
            if (signed_width == 4)
                value = (int32_t) number;
            if (signed_width && value < 0) {
                type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
                target->via.i64 = value;
            }
            else
                target->via.u64 = signed_width ? (uint64_t) value : number;
            break;
        }
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
            target->via.i64 = (int8_t) number;
            break;
        case MSGPACK_OBJECT_FLOAT32: {
            uint32_t bits = (uint32_t) number;
            float real;
            memcpy (&real, &bits, sizeof real);
            target->via.f64 = real;
            break;
        }
        case MSGPACK_OBJECT_FLOAT64:
            memcpy (&target->via.f64, &number, sizeof target->via.f64);
            break;
        case MSGPACK_OBJECT_STR:
        case MSGPACK_OBJECT_BIN:
            target->via.str.size = (uint32_t) count;
            target->via.str.ptr = (const char *) payload;
            break;
        case MSGPACK_OBJECT_ARRAY:
            //  An empty container still points somewhere valid
            target->via.array.size = (uint32_t) count;
            target->via.array.ptr = build->free_slot;
            build->free_slot += count;
            break;
        case MSGPACK_OBJECT_MAP:
            target->via.map.size = (uint32_t) count;
            target->via.map.ptr = (msgpack_object_kv *) (void *)
                                  build->free_slot;
            build->free_slot += 2 * count;
            break;
        default:
            break;
    }
    target->type = type;
}

//  A map has all its pairs: check its keys. Of several maps with
//  duplicates the one that starts first is reported, as a walk of the
//  finished tree from the top would.
static void
s_map_done (s_build_t *build, const s_level_t *level)
{
    const msgpack_object *key = s_duplicate_key (&level->container->via.map,
                                                 &build->out_of_memory);
    if (key && (!build->dup_key || level->start < build->dup_start)) {
        build->dup_key = key;
        build->dup_start = level->start;
    }
}

//  Walks the frame, checks the grammar and counts the objects into
//  *OBJECTS_P; with BUILD it also fills the slots and checks keys. Returns
//  0, -2 with a reason in WHY, or 1 when BUILD runs out of slots.
static int
s_walk (const unsigned char *data, size_t size, s_build_t *build,
        size_t *objects_p, char *why, size_t why_len)
{
    s_level_t stack [PV_MAX_DEPTH];     //  The levels around the current
    size_t depth = 0;                   //  Containers open
    s_level_t level = { 1, false, 0, NULL, build ? build->root : NULL };
    size_t pos = 0;
    size_t objects = 0;

    while (true) {
        if (pos >= size) {
            s_why (why, why_len, "truncated at byte %zu", pos);
            return -2;
        }
        if (++objects > PV_MAX_OBJECTS) {
            s_why (why, why_len, "more than %d objects", PV_MAX_OBJECTS);
            return -2;
        }
        size_t start = pos;
        unsigned char byte = data [pos++];
        if ((byte & 0xe0) == 0xa0) {
            //  A short string, as every key and most values: the fast path
            size_t len = byte & 0x1f;
            if (len > size - pos) {
                s_why (why, why_len, "string at byte %zu claims %zu bytes "
                       "but only %zu remain", start, len, size - pos);
                return -2;
            }
            if (!s_short_ascii (data + pos, len, size - pos)
                && s_text_check (data + pos, len, start, why, why_len))
                return -2;
            if (build) {
                msgpack_object *target = level.next++;
                target->type = MSGPACK_OBJECT_STR;
                target->via.str.size = (uint32_t) len;
                target->via.str.ptr = (const char *) data + pos;
            }
            pos += len;
        }
        else
        if (byte <= 0x7f && !(level.is_map && level.remaining % 2 == 0)) {
            //  A small int that is not in a key's place: the other one
            if (build) {
                msgpack_object *target = level.next++;
                target->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
                target->via.u64 = byte;
            }
        }
        else {
            msgpack_object_type type = MSGPACK_OBJECT_NIL;
            size_t width = 0;           //  Bytes after the header byte
            bool sized = false;         //  They hold a length, not a value
            size_t signed_width = 0;    //  Width of an int8..int64
            uint64_t number = 0;        //  Scalar bits
            uint64_t count = 0;         //  str/bin bytes, container entries
            if (byte <= 0x7f) {
                type = MSGPACK_OBJECT_POSITIVE_INTEGER;
                number = byte;
            }
            else
            if (byte >= 0xe0) {
                type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
                number = byte;
            }
            else
            if (byte <= 0x8f) {
                type = MSGPACK_OBJECT_MAP;
                count = byte & 0x0f;
            }
            else
            if (byte <= 0x9f) {
                type = MSGPACK_OBJECT_ARRAY;
                count = byte & 0x0f;
            }
            else
            switch (byte) {
                case 0xc0:
                    break;
                case 0xc2: case 0xc3:
                    type = MSGPACK_OBJECT_BOOLEAN;
                    number = byte == 0xc3;
                    break;
                case 0xc4: case 0xc5: case 0xc6:
                    type = MSGPACK_OBJECT_BIN;
                    width = (size_t) 1 << (byte - 0xc4);
                    sized = true;
                    break;
                case 0xca:
                    type = MSGPACK_OBJECT_FLOAT32;
                    width = 4;
                    break;
                case 0xcb:
                    type = MSGPACK_OBJECT_FLOAT64;
                    width = 8;
                    break;
                case 0xcc: case 0xcd: case 0xce: case 0xcf:
                    type = MSGPACK_OBJECT_POSITIVE_INTEGER;
                    width = (size_t) 1 << (byte - 0xcc);
                    break;
                case 0xd0: case 0xd1: case 0xd2: case 0xd3:
                    type = MSGPACK_OBJECT_POSITIVE_INTEGER;
                    width = signed_width = (size_t) 1 << (byte - 0xd0);
                    break;
                case 0xd9: case 0xda: case 0xdb:
                    type = MSGPACK_OBJECT_STR;
                    width = (size_t) 1 << (byte - 0xd9);
                    sized = true;
                    break;
                case 0xdc: case 0xdd:
                    type = MSGPACK_OBJECT_ARRAY;
                    width = byte == 0xdc ? 2 : 4;
                    sized = true;
                    break;
                case 0xde: case 0xdf:
                    type = MSGPACK_OBJECT_MAP;
                    width = byte == 0xde ? 2 : 4;
                    sized = true;
                    break;
                case 0xc1:
                    s_why (why, why_len, "reserved byte 0xc1 at byte %zu",
                           start);
                    return -2;
                default:
                    //  0xc7..0xc9 ext 8/16/32, 0xd4..0xd8 fixext
                    s_why (why, why_len, "ext type at byte %zu", start);
                    return -2;
            }
            if (type != MSGPACK_OBJECT_STR && level.is_map
            &&  level.remaining % 2 == 0) {
                s_why (why, why_len, "map key at byte %zu is not a string",
                       start);
                return -2;
            }
            if (width > 0) {
                if (size - pos < width) {
                    s_why (why, why_len, "truncated at byte %zu", size);
                    return -2;
                }
                if (byte == 0xcf && data [pos] >= 0x80) {
                    s_why (why, why_len,
                           "integer at byte %zu does not fit int64", start);
                    return -2;
                }
                uint64_t value = s_read_be (data + pos, width);
                pos += width;
                if (sized)
                    count = value;
                else
                    number = value;
            }
            const unsigned char *payload = data + pos;
            bool is_map = type == MSGPACK_OBJECT_MAP;
            uint64_t items = 0;
            if (type == MSGPACK_OBJECT_STR || type == MSGPACK_OBJECT_BIN) {
                if (count > size - pos) {
                    s_why (why, why_len,
                           "%s at byte %zu claims %" PRIu64 " bytes but "
                           "only %zu remain",
                           type == MSGPACK_OBJECT_BIN ? "binary" : "string",
                           start, count, size - pos);
                    return -2;
                }
                if (type == MSGPACK_OBJECT_STR
                &&  s_text_check (data + pos, (size_t) count, start, why,
                                  why_len))
                    return -2;
                pos += (size_t) count;
            }
            else
            if (is_map || type == MSGPACK_OBJECT_ARRAY) {
                items = is_map ? count * 2 : count;
                if (depth >= PV_MAX_DEPTH) {
                    s_why (why, why_len,
                           "nesting deeper than %d at byte %zu",
                           PV_MAX_DEPTH, start);
                    return -2;
                }
                if (items > size - pos) {
                    s_why (why, why_len,
                           "%s at byte %zu claims %" PRIu64 " entries but "
                           "only %zu bytes remain",
                           is_map ? "map" : "array", start, count,
                           size - pos);
                    return -2;
                }
                if (build && items > (uint64_t) (build->slot_end
                                                 - build->free_slot))
                    return 1;
            }
            msgpack_object *target = NULL;
            if (build) {
                target = level.next++;
                s_fill (build, target, type, number, signed_width, payload,
                        count);
            }
            if (items > 0) {
                stack [depth++] = level;
                level.remaining = items;
                level.is_map = is_map;
                level.start = start;
                level.container = target;
                level.next = NULL;
                if (target)
                    level.next = is_map ? (msgpack_object *) (void *)
                                          target->via.map.ptr
                                        : target->via.array.ptr;
                continue;
            }
        }
        //  One value is complete, and with it every container it ends
        while (--level.remaining == 0 && depth > 0) {
            if (build && level.is_map)
                s_map_done (build, &level);
            level = stack [--depth];
        }
        if (depth == 0 && level.remaining == 0)
            break;
    }
    if (pos != size) {
        s_why (why, why_len, "%zu trailing bytes after the value",
               size - pos);
        return -2;
    }
    if (build && build->out_of_memory) {
        s_why (why, why_len, "out of memory");
        return -2;
    }
    if (build && build->dup_key) {
        char text [64];
        s_why (why, why_len, "duplicate map key '%s'",
               s_printable (build->dup_key->via.str.ptr,
                            build->dup_key->via.str.size, text,
                            sizeof text));
        return -2;
    }
    if (objects_p)
        *objects_p = objects;
    return 0;
}


//  ---------------------------------------------------------------------
//  Documents

#ifdef GRID_FUZZ_LIBFUZZER
//  Whether two trees hold the same values, with strings at the same
//  addresses (both point into the same bytes).
static bool
s_same_tree (const msgpack_object *ours, const msgpack_object *theirs)
{
    if (ours->type != theirs->type)
        return false;
    switch (ours->type) {
        case MSGPACK_OBJECT_NIL:
            return true;
        case MSGPACK_OBJECT_BOOLEAN:
            return ours->via.boolean == theirs->via.boolean;
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
            return ours->via.u64 == theirs->via.u64;
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
            return ours->via.i64 == theirs->via.i64;
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
            return memcmp (&ours->via.f64, &theirs->via.f64,
                           sizeof ours->via.f64) == 0;
        case MSGPACK_OBJECT_STR:
        case MSGPACK_OBJECT_BIN:
            return ours->via.str.size == theirs->via.str.size
                   && (ours->via.str.size == 0
                       || ours->via.str.ptr == theirs->via.str.ptr);
        case MSGPACK_OBJECT_ARRAY:
            if (ours->via.array.size != theirs->via.array.size)
                return false;
            for (uint32_t index = 0; index < ours->via.array.size; index++)
                if (!s_same_tree (&ours->via.array.ptr [index],
                                  &theirs->via.array.ptr [index]))
                    return false;
            return true;
        case MSGPACK_OBJECT_MAP:
            if (ours->via.map.size != theirs->via.map.size)
                return false;
            for (uint32_t index = 0; index < ours->via.map.size; index++)
                if (!s_same_tree (&ours->via.map.ptr [index].key,
                                  &theirs->via.map.ptr [index].key)
                ||  !s_same_tree (&ours->via.map.ptr [index].val,
                                  &theirs->via.map.ptr [index].val))
                    return false;
            return true;
        default:
            return false;
    }
}

//  The fuzzer's check of the walker: msgpack-c must read the same tree
//  from the same bytes, or the walker has a bug.
static void
s_check_against_msgpack (const unsigned char *bytes, size_t size,
                         const msgpack_object *root)
{
    msgpack_zone zone;
    if (!msgpack_zone_init (&zone, MSGPACK_ZONE_CHUNK_SIZE))
        return;
    msgpack_object theirs;
    size_t offset = 0;
    msgpack_unpack_return rc = msgpack_unpack ((const char *) bytes, size,
                                               &offset, &zone, &theirs);
    if (rc != MSGPACK_UNPACK_SUCCESS || offset != size
    ||  !s_same_tree (root, &theirs)) {
        fprintf (stderr, "pv: msgpack-c reads another tree (%d, %zu of "
                 "%zu bytes)\n", (int) rc, offset, size);
        abort ();
    }
    msgpack_zone_destroy (&zone);
}
#endif

//  A document with OBJECTS slots (root included) and, when COPY, a copy of
//  the SIZE bytes at DATA; *BYTES_P gets the bytes its strings point into.
//  NULL when out of memory.
static pv_doc_t *
s_doc_new (size_t objects, const void *data, size_t size, bool copy,
           const unsigned char **bytes_p)
{
    //  At least the root and at most PV_MAX_OBJECTS: the slots fit
    size_t head = sizeof (pv_doc_t) + (objects - 1) * sizeof (msgpack_object);
    if (copy && size > SIZE_MAX - head)
        return NULL;
    pv_doc_t *doc = malloc (head + (copy ? size : 0));
    if (!doc)
        return NULL;
    *bytes_p = (const unsigned char *) data;
    if (copy) {
        unsigned char *bytes = (unsigned char *) doc + head;
        memcpy (bytes, data, size);
        *bytes_p = bytes;
    }
    return doc;
}

//  Moves the OBJECTS values built in LOCAL (root first) into DOC, whose
//  strings point into BYTES rather than FRAME.
static void
s_doc_move (pv_doc_t *doc, const msgpack_object *local, size_t objects,
            const unsigned char *frame, const unsigned char *bytes)
{
    doc->root = local [0];
    if (objects > 1)
        memcpy (doc->slots, local + 1, (objects - 1) * sizeof *local);
    const msgpack_object *old_slots = local + 1;
    bool moved = bytes != frame;
    for (size_t index = 0; index < objects; index++) {
        msgpack_object *value = index ? &doc->slots [index - 1] : &doc->root;
        switch (value->type) {
            case MSGPACK_OBJECT_ARRAY:
                value->via.array.ptr = doc->slots
                                       + (value->via.array.ptr - old_slots);
                break;
            case MSGPACK_OBJECT_MAP: {
                const msgpack_object *first = (const msgpack_object *)
                                              (void *) value->via.map.ptr;
                value->via.map.ptr = (msgpack_object_kv *) (void *)
                                     (doc->slots + (first - old_slots));
                break;
            }
            case MSGPACK_OBJECT_STR:
            case MSGPACK_OBJECT_BIN:
                if (moved)
                    value->via.str.ptr = (const char *) bytes
                                         + ((const unsigned char *)
                                            value->via.str.ptr - frame);
                break;
            default:
                break;
        }
    }
}

static int
s_doc_decode (const void *data, size_t size, bool copy, pv_doc_t **doc_p,
              char *why, size_t why_len)
{
    assert (doc_p);
    *doc_p = NULL;
    if (why && why_len > 0)
        why [0] = 0;
    if (!data && size > 0) {
        s_why (why, why_len, "no data");
        return -2;
    }
    const unsigned char *frame = (const unsigned char *) data;
    const unsigned char *bytes = NULL;
    pv_doc_t *doc = NULL;
    size_t objects = 0;
    msgpack_object local [PV_LOCAL_SLOTS];
    s_build_t build = { local, local + 1, local + PV_LOCAL_SLOTS, NULL, 0,
                        false };
    int rc = s_walk (frame, size, &build, &objects, why, why_len);
    if (rc < 0)
        return -2;
    if (rc == 0) {
        doc = s_doc_new (objects, data, size, copy, &bytes);
        if (doc)
            s_doc_move (doc, local, objects, frame, bytes);
    }
    else {
        if (s_walk (frame, size, NULL, &objects, why, why_len))
            return -2;
        doc = s_doc_new (objects, data, size, copy, &bytes);
        if (doc) {
            s_build_t whole = { &doc->root, doc->slots,
                                doc->slots + (objects - 1), NULL, 0, false };
            if (s_walk (bytes, size, &whole, &objects, why, why_len)) {
                free (doc);
                return -2;
            }
        }
    }
    if (!doc) {
        s_why (why, why_len, "out of memory");
        return -2;
    }
#ifdef GRID_FUZZ_LIBFUZZER
    s_check_against_msgpack (bytes, size, &doc->root);
#endif
    *doc_p = doc;
    return 0;
}

int
pv_doc_decode (const void *data, size_t size, pv_doc_t **doc_p, char *why,
               size_t why_len)
{
    return s_doc_decode (data, size, true, doc_p, why, why_len);
}

int
pv_doc_decode_borrowed (const void *data, size_t size, pv_doc_t **doc_p,
                        char *why, size_t why_len)
{
    return s_doc_decode (data, size, false, doc_p, why, why_len);
}

void
pv_doc_destroy (pv_doc_t **doc_p)
{
    assert (doc_p);
    free (*doc_p);
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

const pv_t *
pv_map_entry (const pv_t *map, size_t index, const char **key_p,
              size_t *key_len_p)
{
    if (pv_type (map) != PV_MAP || index >= map->via.map.size)
        return NULL;
    const msgpack_object_kv *pair = &map->via.map.ptr [index];
    *key_p = pair->key.via.str.ptr;
    *key_len_p = pair->key.via.str.size;
    return &pair->val;
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
