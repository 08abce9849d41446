/*  =========================================================================
    proto_int - what the files of the message codec share

    The codec is three files: proto.c (the message schemas, freeing,
    the checks and the encoders), decode.c (the schema decode and the
    direct decode of agent messages) and request.c (client requests and
    replies). This header holds the schema types and the helpers they
    share. Only proto's own files include it; everyone else uses
    proto.h. Nothing here keeps state: the one decode under way on a
    thread keeps its arena in a thread-local of decode.c.
    =========================================================================
*/
#ifndef PROTO_INT_H_INCLUDED
#define PROTO_INT_H_INCLUDED

#include <string.h>

#include "names.h"
#include "proto.h"

#define S_PATH_MAX 160      //  Longest field path in an error
#define S_SHOW_MAX 40       //  Longest user text quoted in an error

//  A further chunk of a decoded message's arena (see decode.c)
typedef struct s_chunk_s s_chunk_t;
struct s_chunk_s {
    s_chunk_t *next;            //  The chunk made before it
    uint64_t align;             //  Keeps what follows 16-byte aligned
};

//  Where a value sits, for error messages: "hello.backends[0].name". Each
//  level of the decode (or of the check before an encode) holds one link
//  on its stack, and the text is written only when an error is reported.
typedef struct s_path_s s_path_t;
struct s_path_s {
    const s_path_t *up;     //  The enclosing value, NULL at the top
    const char *key;        //  Its key (or the message name); NULL: index
    size_t key_len;         //  Bytes in key
    size_t index;           //  Array index, when key is NULL
    bool from_wire;         //  KEY is user text: shown through proto_show
};

typedef enum {
    S_TEXT_SHORT,       //  At most PROTO_MAX_TEXT bytes
    S_TEXT_NAME,        //  name_valid
    S_TEXT_LABEL,       //  name_label_value_valid
    S_TEXT_JOB,         //  job_id_valid
    S_TEXT_PARAM,       //  At most PROTO_MAX_PARAM_VALUE bytes
    S_TEXT_OUTPUT,      //  At most PROTO_MAX_OUTPUT bytes
    S_TEXT_PROGRESS,    //  At most PROTO_MAX_PROGRESS bytes
    S_TEXT_STATUS,      //  One of s_statuses
    S_TEXT_STREAM,      //  "stdout" or "stderr"
    S_TEXT_TRACE,       //  A W3C traceparent (trace_valid)
    S_TEXT_FACT         //  fact_value_valid
} s_text_t;

typedef enum {
    S_STR,          //  char *
    S_U32,          //  uint32_t
    S_I32,          //  int32_t
    S_U64,          //  uint64_t
    S_I64,          //  int64_t
    S_BOOL,         //  bool
    S_KIND,         //  bool, on the wire "modify" (true) or "query"
    S_LIST,         //  char ** + size_t count: array of strings
    S_MAP,          //  proto_kv_t * + size_t count: map of strings
    S_STRUCTS,      //  array of structs + size_t count, with a schema
    S_BIN,          //  uint8_t * + size_t count: binary, min..max bytes
    S_ACKS,         //  proto_ack_t * + size_t count: [[job, step, attempt]]
                    //  (text S_TEXT_STREAM: [[job, step, attempt, stream,
                    //  offset]], an output_acks')
    S_RESULTS       //  proto_msg_t * + size_t count: results' entries, each
                    //  decoded on its own (a bad one is marked, not fatal)
} s_kind_t;

typedef struct s_schema_s s_schema_t;

typedef struct {
    const char *key;            //  Wire key
    size_t key_len;             //  Its length (S_KEY sets both)
    s_kind_t kind;              //  Storage and wire shape
    s_text_t text;              //  Rule for strings, list items, map values
    s_text_t key_text;          //  S_MAP: rule for keys
    bool numbers;               //  S_MAP: values may be ints too
    bool required;              //  Must be present
    size_t offset;              //  Member in the struct
    size_t count_offset;        //  Lists, maps, structs: the count member
    int64_t min;                //  Ints: least value; lists: fewest entries
    int64_t max;                //  Ints: greatest value; lists: most entries
    const s_schema_t *schema;   //  S_STRUCTS: each element's schema
    //  Optional ints: whether the struct holds a value to send (NULL for
    //  other kinds, whose presence follows s_present's rules)
    bool (*present) (const void *item);
} s_field_t;

struct s_schema_s {
    const s_field_t *fields;    //  Its fields
    size_t count;               //  How many
    size_t size;                //  sizeof one element (S_STRUCTS)
    size_t name_offset;         //  char * member that must be unique
    //  Rules across the fields of a decoded map, checked after its fields
    //  were decoded into ITEM; VALUES holds each field's value (NULL when
    //  absent), in schema order. NULL when there are none
    int (*check) (const void *item, const pv_t *const *values,
                  const s_path_t *path, char *why, size_t why_len);
};

#define S_COUNT_OF(array) (sizeof (array) / sizeof ((array) [0]))

//  Most fields in one schema (the decoder keeps a value per field)
#define S_FIELDS_MAX 16

typedef struct {
    proto_type_t type;          //  Which message
    const char *name;           //  Its wire name
    size_t name_len;            //  Its length
    s_schema_t schema;          //  Its fields
} s_message_t;

//  Member access by offset
#define S_MEMBER(base, offset, type) ((type *) ((char *) (base) + (offset)))

//  Formats into BUF when there is one (reasons, paths); output that does
//  not fit is cut.
void proto_format (char *buf, size_t buf_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

//  Writes "PATH: " and then FORMAT into WHY, when there is one.
void proto_fail (char *why, size_t why_len, const s_path_t *path,
                 const char *format, ...)
    __attribute__ ((format (printf, 4, 5)));

//  Copies LEN bytes of user text into BUF (S_SHOW_MAX + 4 bytes) for an
//  error message, with anything unprintable replaced so that a hostile
//  value cannot break a log line. Returns BUF.
static inline const char *
proto_show (const char *text, size_t len, char *buf)
{
    return name_show (text, len, buf, S_SHOW_MAX + 4);
}

//  The most bytes a string under RULE may hold (the direct decode asks
//  for every string it reads).
static inline size_t
proto_text_max (s_text_t rule)
{
    switch (rule) {
        case S_TEXT_OUTPUT: return PROTO_MAX_OUTPUT;
        case S_TEXT_PROGRESS: return PROTO_MAX_PROGRESS;
        case S_TEXT_PARAM: return PROTO_MAX_PARAM_VALUE;
        default: return PROTO_MAX_TEXT;
    }
}

//  Checks TEXT (LEN bytes, NUL-terminated) against RULE. Returns 0, or -2
//  with "PATH: problem" in WHY.
int proto_text_check (s_text_t rule, const char *text, size_t len,
                      const s_path_t *path, char *why, size_t why_len);

//  Checks that no string occurs twice among COUNT strings, each at BASE +
//  index * STRIDE + OFFSET. Returns 0, or -2 with the first duplicate (in
//  strcmp order) in WHY.
int proto_check_unique (const void *base, size_t count, size_t stride,
                        size_t offset, const s_path_t *path, char *why,
                        size_t why_len);

//  Frees what an unpacked message owns (not the message itself).
void proto_msg_free_members (proto_msg_t *self);

//  Every message type: its wire name and schema (proto.c)
#define PROTO_MESSAGE_COUNT 24
extern const s_message_t proto_messages [];

//  The message whose wire name is the NAME_LEN bytes at NAME, or NULL.
//  Inline: the direct decode asks for every frame it reads.
static inline const s_message_t *
proto_message_named (const char *name, size_t name_len)
{
    for (size_t index = 0; index < PROTO_MESSAGE_COUNT; index++)
        if (proto_messages [index].name_len == name_len
        &&  memcmp (proto_messages [index].name, name, name_len) == 0)
            return &proto_messages [index];
    return NULL;
}

#endif
