/*  =========================================================================
    pv - strictly decoded msgpack values (read side of the codec)

    A pv_doc_t owns one decoded msgpack frame; pv_t is a read-only view of
    one value inside it. Decoding is strict (see ARCHITECTURE 5a): a frame is
    accepted only when it is exactly one msgpack object that uses every byte,
    whose container counts fit in the bytes that remain, whose nesting depth
    is at most PV_MAX_DEPTH, whose total object count is at most
    PV_MAX_OBJECTS, whose maps have no duplicate keys and string keys only,
    and whose integers fit in int64_t. Anything else is malformed (-2).

    A document is one allocation: the decoded values and, unless the
    caller lends the bytes (pv_doc_decode_borrowed), a copy of the frame.
    Every pv_t pointer lent by a document is valid until the document is
    destroyed. Strings are NOT NUL-terminated inside the document: use
    pv_str / pv_strdup / pv_str_eq.

    Threading: a document may be read from one thread at a time.
    Only proto/ includes <msgpack.h>; this header does not.
    =========================================================================
*/
#ifndef GRID_PV_H
#define GRID_PV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PV_MAX_DEPTH 32            //  Deepest container nesting accepted
#define PV_MAX_OBJECTS (1 << 22)   //  Most objects in one frame

typedef enum {
    PV_NIL,
    PV_BOOL,
    PV_INT,     //  Any msgpack integer that fits int64_t
    PV_FLOAT,   //  float32 or float64
    PV_STR,
    PV_BIN,
    PV_ARRAY,
    PV_MAP,     //  Keys are always strings
    PV_EXT      //  Never produced: ext types are malformed
} pv_type_t;

typedef struct _pv_doc_t pv_doc_t;
typedef struct msgpack_object pv_t;    //  Opaque view of one value

//  Decodes SIZE bytes at DATA. On success returns 0 and gives *DOC_P a new
//  document (the bytes are copied; the caller keeps DATA). On malformed input
//  returns -2, leaves *DOC_P NULL and, when WHY is not NULL, writes a short
//  reason into WHY (WHY_LEN bytes, NUL-terminated).
int pv_doc_decode (const void *data, size_t size, pv_doc_t **doc_p,
                   char *why, size_t why_len);

//  As pv_doc_decode, but the document borrows DATA instead of copying it:
//  DATA must stay unchanged and alive until the document is destroyed. For
//  a frame that is decoded, read and dropped at once.
int pv_doc_decode_borrowed (const void *data, size_t size, pv_doc_t **doc_p,
                            char *why, size_t why_len);

//  Destroys a document and every value it lent; NULL-safe, nulls *doc_p.
void pv_doc_destroy (pv_doc_t **doc_p);

//  The root value of a document (never NULL for a decoded document).
const pv_t *pv_doc_root (const pv_doc_t *doc);

//  Type of a value; PV_NIL for a NULL pointer.
pv_type_t pv_type (const pv_t *value);

//  Name of a type for error messages: "nil", "bool", "int", "float",
//  "string", "binary", "array", "map".
const char *pv_type_name (pv_type_t type);

//  Element count of an array or map, byte length of a string or binary,
//  0 for anything else.
size_t pv_size (const pv_t *value);

//  Element I of an array, or NULL when VALUE is not an array or I is out
//  of range.
const pv_t *pv_array_at (const pv_t *value, size_t index);

//  Value under KEY in a map, or NULL when VALUE is not a map or KEY is
//  absent.
const pv_t *pv_map_get (const pv_t *value, const char *key);

//  Key / value of entry I of a map (in wire order), or NULL.
const pv_t *pv_map_key_at (const pv_t *value, size_t index);
const pv_t *pv_map_value_at (const pv_t *value, size_t index);

//  Entry I of MAP: returns its value and lends its key's bytes (not
//  NUL-terminated) in *KEY_P and their length in *KEY_LEN_P; NULL when MAP
//  is not a map or I is out of range (*KEY_P and *KEY_LEN_P untouched).
const pv_t *pv_map_entry (const pv_t *map, size_t index, const char **key_p,
                          size_t *key_len_p);

//  Reads a bool / int / float. Returns 0, or -1 when VALUE has another type
//  (an int is accepted where a float is asked for).
int pv_get_bool (const pv_t *value, bool *out);
int pv_get_int (const pv_t *value, int64_t *out);
int pv_get_float (const pv_t *value, double *out);

//  Bytes of a string or binary (not NUL-terminated) and their length, or
//  NULL when VALUE is neither.
const char *pv_str (const pv_t *value, size_t *len_p);

//  A fresh NUL-terminated copy of a string (caller frees), or NULL when
//  VALUE is not a string or the string holds a NUL byte.
char *pv_strdup (const pv_t *value);

//  True when VALUE is a string equal to TEXT.
bool pv_str_eq (const pv_t *value, const char *text);

//  One field of a map schema, for pv_map_check.
typedef struct {
    const char *key;     //  Field name
    pv_type_t type;      //  Required type (PV_FLOAT also accepts PV_INT)
    bool required;       //  Must be present
} pv_field_t;

//  Checks that MAP is a map whose keys are all listed in FIELDS (COUNT
//  entries), each of the listed type, with every required key present.
//  Returns 0, or -2 with a sentence in WHY naming the offending key.
int pv_map_check (const pv_t *map, const pv_field_t *fields, size_t count,
                  char *why, size_t why_len);

//  Whether the LEN bytes at BYTES are text as the decoder accepts it in a
//  string: valid UTF-8 (no overlong forms, surrogates or code points past
//  U+10FFFF) without a NUL byte.
bool pv_text_valid (const void *bytes, size_t len);

//  Writes VALUE as JSON to FILE. INDENT > 0 pretty-prints with that many
//  spaces per level; 0 writes one line. Binary is written as a base64
//  string. Returns 0 or -1 on a write error.
int pv_write_json (const pv_t *value, FILE *file, int indent);

#endif
