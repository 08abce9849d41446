/*  =========================================================================
    proto - grid's wire messages (protocol version 1)

    Each message type is a schema: a table of fields, each naming its wire
    key, its storage in proto_msg_t (by offset), its shape and its bounds.
    One generic walker decodes a map against a schema, another checks and
    writes a struct against it, so decode and encode apply the very same
    rules and a new field is one table line. Backend specs in hello are
    arrays of structs with their own schemas.

    Client requests have a second, simpler table: per request type, the
    keys it may carry with their types and bounds.
    =========================================================================
*/
#include "proto.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "job.h"
#include "names.h"

#define S_PATH_MAX 160      //  Longest field path in an error
#define S_SHOW_MAX 40       //  Longest user text quoted in an error

//  Formats into BUF when there is one (reasons, paths); output that does
//  not fit is cut.
static void
s_format (char *buf, size_t buf_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_format (char *buf, size_t buf_len, const char *format, ...)
{
    if (!buf || buf_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (buf, buf_len, format, args);
    va_end (args);
}

//  Copies LEN bytes of user text into BUF (S_SHOW_MAX + 4 bytes) for an
//  error message, with anything unprintable replaced so that a hostile
//  value cannot break a log line.
static const char *
s_show (const char *text, size_t len, char *buf)
{
    return name_show (text, len, buf, S_SHOW_MAX + 4);
}

//  A decoded message other than hello is one allocation: the proto_msg_t,
//  then its strings and arrays, handed out in order (an arena); what does
//  not fit goes in further chunks, linked from the message. S_ARENA is the
//  arena of the decode under way on this thread, or NULL: then each
//  string and array is an allocation of its own, as in a hello (the
//  registry passes a hello's backends from message to message) and in
//  messages built by hand.
typedef struct s_chunk_s s_chunk_t;
struct s_chunk_s {
    s_chunk_t *next;            //  The chunk made before it
    uint64_t align;             //  Keeps what follows 16-byte aligned
};

typedef struct {
    char *next;                 //  Free space
    char *end;                  //  Its end
    s_chunk_t **chunks;         //  Where further chunks are linked
} s_arena_t;

static _Thread_local s_arena_t *s_arena;

//  SIZE bytes aligned to ALIGN (a power of 2 up to 16), from the arena of
//  the decode under way, else from malloc. Zeroed when ZERO.
static void *
s_alloc (size_t size, size_t align, bool zero)
{
    s_arena_t *arena = s_arena;
    if (!arena)
        return zero ? calloc (1, size ? size : 1) : malloc (size ? size : 1);
    uintptr_t at = ((uintptr_t) arena->next + align - 1) & ~(uintptr_t) (align - 1);
    if (at > (uintptr_t) arena->end || size > (uintptr_t) arena->end - at) {
        size_t room = size > 4096 ? size : 4096;
        s_chunk_t *chunk = (s_chunk_t *) malloc (sizeof (s_chunk_t) + room);
        if (!chunk)
            return NULL;
        chunk->next = *arena->chunks;
        *arena->chunks = chunk;
        arena->next = (char *) (chunk + 1);
        arena->end = arena->next + room;
        at = (uintptr_t) arena->next;
    }
    arena->next = (char *) at + size;
    if (zero)
        memset ((void *) at, 0, size);
    return (void *) at;
}

//  Gives back what s_alloc gave, when it was not from an arena.
static void
s_release (void *block)
{
    if (!s_arena)
        free (block);
}

//  Where a value sits, for error messages: "hello.backends[0].name". Each
//  level of the decode (or of the check before an encode) holds one link
//  on its stack, and the text is written only when an error is reported.
typedef struct s_path_s s_path_t;
struct s_path_s {
    const s_path_t *up;     //  The enclosing value, NULL at the top
    const char *key;        //  Its key (or the message name); NULL: index
    size_t key_len;         //  Bytes in key
    size_t index;           //  Array index, when key is NULL
    bool from_wire;         //  KEY is user text: shown through s_show
};

//  Writes PATH into BUF, cut to BUF_LEN - 1 bytes and NUL-terminated;
//  returns its length.
static size_t
s_path_write (const s_path_t *path, char *buf, size_t buf_len)
{
    size_t used = path->up ? s_path_write (path->up, buf, buf_len) : 0;
    char text [S_SHOW_MAX + 24];
    const char *part = path->key;
    size_t part_len = path->key_len;
    if (!part) {
        snprintf (text, sizeof text, "[%zu]", path->index);
        part = text;
        part_len = strlen (text);
    }
    else {
        if (path->from_wire) {
            part = s_show (path->key, path->key_len, text);
            part_len = strlen (part);
        }
        if (path->up && used + 1 < buf_len)
            buf [used++] = '.';
    }
    size_t take = part_len < buf_len - 1 - used ? part_len
                                                : buf_len - 1 - used;
    memcpy (buf + used, part, take);
    used += take;
    buf [used] = 0;
    return used;
}

//  Writes "PATH: " and then FORMAT into WHY.
static void
s_fail (char *why, size_t why_len, const s_path_t *path, const char *format,
        ...) __attribute__ ((format (printf, 4, 5)));

static void
s_fail (char *why, size_t why_len, const s_path_t *path, const char *format,
        ...)
{
    if (!why || why_len == 0)
        return;
    char where [S_PATH_MAX];
    s_path_write (path, where, sizeof where);
    char what [512];
    va_list args;
    va_start (args, format);
    vsnprintf (what, sizeof what, format, args);
    va_end (args);
    s_format (why, why_len, "%s: %s", where, what);
}


//  ---------------------------------------------------------------------
//  String rules

typedef enum {
    S_TEXT_SHORT,       //  At most PROTO_MAX_TEXT bytes
    S_TEXT_NAME,        //  name_valid
    S_TEXT_LABEL,       //  name_label_value_valid
    S_TEXT_JOB,         //  job_id_valid
    S_TEXT_PARAM,       //  At most PROTO_MAX_PARAM_VALUE bytes
    S_TEXT_OUTPUT,      //  At most PROTO_MAX_OUTPUT bytes
    S_TEXT_PROGRESS,    //  At most PROTO_MAX_PROGRESS bytes
    S_TEXT_STATUS,      //  One of s_statuses
    S_TEXT_STREAM       //  "stdout" or "stderr"
} s_text_t;

static const char *s_statuses [] = {
    "success", "failed", "timeout", "cancelled", "interrupted", "refused"
};
#define S_STATUS_COUNT (sizeof s_statuses / sizeof s_statuses [0])

static size_t
s_text_max (s_text_t rule)
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
static int
s_text_check (s_text_t rule, const char *text, size_t len,
              const s_path_t *path, char *why, size_t why_len)
{
    char show [S_SHOW_MAX + 4];
    if (len > s_text_max (rule)) {
        s_fail (why, why_len, path, "longer than %zu bytes",
                s_text_max (rule));
        return -2;
    }
    switch (rule) {
        case S_TEXT_NAME:
            if (!name_valid (text)) {
                s_fail (why, why_len, path, "invalid name '%s' (letters, "
                        "digits, '_' and '-', 1 to %d)",
                        s_show (text, len, show), NAME_MAX_LEN);
                return -2;
            }
            break;
        case S_TEXT_LABEL:
            if (!name_label_value_valid (text)) {
                s_fail (why, why_len, path, "invalid label value '%s'",
                        s_show (text, len, show));
                return -2;
            }
            break;
        case S_TEXT_JOB:
            if (!job_id_valid (text)) {
                s_fail (why, why_len, path, "invalid job id '%s'",
                        s_show (text, len, show));
                return -2;
            }
            break;
        case S_TEXT_STATUS: {
            for (size_t index = 0; index < S_STATUS_COUNT; index++)
                if (strcmp (text, s_statuses [index]) == 0)
                    return 0;
            s_fail (why, why_len, path, "unknown status '%s' (success, "
                    "failed, timeout, cancelled, interrupted, refused)",
                    s_show (text, len, show));
            return -2;
        }
        case S_TEXT_STREAM:
            if (strcmp (text, "stdout") != 0 && strcmp (text, "stderr") != 0) {
                s_fail (why, why_len, path, "unknown stream '%s' (stdout, "
                        "stderr)", s_show (text, len, show));
                return -2;
            }
            break;
        default:
            break;
    }
    return 0;
}

//  Reads a string VALUE under RULE into a fresh copy in *OUT.
static int
s_text_read (const pv_t *value, s_text_t rule, const s_path_t *path,
             char **out, char *why, size_t why_len)
{
    if (pv_type (value) != PV_STR) {
        s_fail (why, why_len, path, "expected string, got %s",
                pv_type_name (pv_type (value)));
        return -2;
    }
    size_t len = 0;
    const char *bytes = pv_str (value, &len);
    if (len > s_text_max (rule)) {
        s_fail (why, why_len, path, "longer than %zu bytes",
                s_text_max (rule));
        return -2;
    }
    if (len > 0 && memchr (bytes, 0, len)) {
        s_fail (why, why_len, path, "contains a NUL byte");
        return -2;
    }
    char *text = (char *) s_alloc (len + 1, 1, false);
    if (!text) {
        s_fail (why, why_len, path, "out of memory");
        return -2;
    }
    memcpy (text, bytes, len);
    text [len] = 0;
    if (s_text_check (rule, text, len, path, why, why_len)) {
        s_release (text);
        return -2;
    }
    *out = text;
    return 0;
}


//  ---------------------------------------------------------------------
//  Schemas

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

//  A field's wire key, a string literal, and its length
#define S_KEY(text) .key = text, .key_len = sizeof (text) - 1

#define S_TEXT(type, member, rule) \
    { S_KEY (#member), .kind = S_STR, .text = rule, .required = true, \
      .offset = offsetof (type, member) }
#define S_TEXT_OPT(type, key_, member, rule) \
    { S_KEY (key_), .kind = S_STR, .text = rule, .required = false, \
      .offset = offsetof (type, member) }
#define S_INT(type, member, kind_, min_, max_) \
    { S_KEY (#member), .kind = kind_, .required = true, \
      .offset = offsetof (type, member), .min = min_, .max = max_ }
#define S_FLAG(type, member) \
    { S_KEY (#member), .kind = S_BOOL, .required = true, \
      .offset = offsetof (type, member) }
#define S_LIST_OF(type, member, count, rule, required_, min_, max_) \
    { S_KEY (#member), .kind = S_LIST, .text = rule, .required = required_, \
      .offset = offsetof (type, member), \
      .count_offset = offsetof (type, count), .min = min_, .max = max_ }
#define S_MAP_OF(type, member, count, key_rule, rule, required_) \
    { S_KEY (#member), .kind = S_MAP, .text = rule, .key_text = key_rule, \
      .required = required_, .offset = offsetof (type, member), \
      .count_offset = offsetof (type, count), .max = PROTO_MAX_LIST }
#define S_STRUCTS_OF(type, member, count, schema_) \
    { S_KEY (#member), .kind = S_STRUCTS, .required = true, \
      .offset = offsetof (type, member), \
      .count_offset = offsetof (type, count), .max = PROTO_MAX_LIST, \
      .schema = &schema_ }

//  hello: backends [ {name, actions: [ {name, kind, help, params: [...]} ]} ]

//  An int param's range is in force when min_value < max_value; only then
//  are "min" and "max" sent, and they always travel together.
static bool
s_param_has_range (const void *item)
{
    const proto_param_spec_t *param = (const proto_param_spec_t *) item;
    return param->min_value < param->max_value;
}

//  Where "min" and "max" sit in s_param_fields, for s_param_check
#define S_PARAM_MIN 6
#define S_PARAM_MAX 7

static int
s_param_check (const void *item, const pv_t *const *values,
               const s_path_t *path, char *why, size_t why_len)
{
    const proto_param_spec_t *param = (const proto_param_spec_t *) item;
    bool has_min = values [S_PARAM_MIN] != NULL;
    bool has_max = values [S_PARAM_MAX] != NULL;
    if (has_min != has_max) {
        s_fail (why, why_len, path, "min and max come together");
        return -2;
    }
    if (has_min && param->min_value >= param->max_value) {
        s_fail (why, why_len, path, "min must be below max");
        return -2;
    }
    return 0;
}

static const s_field_t s_param_fields [] = {
    S_TEXT (proto_param_spec_t, name, S_TEXT_NAME),
    S_FLAG (proto_param_spec_t, required),
    S_TEXT (proto_param_spec_t, type, S_TEXT_SHORT),
    S_TEXT_OPT (proto_param_spec_t, "pattern", pattern, S_TEXT_SHORT),
    S_TEXT_OPT (proto_param_spec_t, "default", default_value, S_TEXT_SHORT),
    S_TEXT (proto_param_spec_t, help, S_TEXT_SHORT),
    [S_PARAM_MIN] = { S_KEY ("min"), .kind = S_I64, .required = false,
      .offset = offsetof (proto_param_spec_t, min_value),
      .min = INT64_MIN, .max = INT64_MAX, .present = s_param_has_range },
    [S_PARAM_MAX] = { S_KEY ("max"), .kind = S_I64, .required = false,
      .offset = offsetof (proto_param_spec_t, max_value),
      .min = INT64_MIN, .max = INT64_MAX, .present = s_param_has_range },
};
_Static_assert (S_COUNT_OF (s_param_fields) == S_PARAM_MAX + 1,
                "min and max are the last param fields");
static const s_schema_t s_param_schema = {
    s_param_fields, S_COUNT_OF (s_param_fields), sizeof (proto_param_spec_t),
    offsetof (proto_param_spec_t, name), s_param_check
};

//  "idempotent" travels only when true.
static bool
s_action_is_idempotent (const void *item)
{
    return ((const proto_action_spec_t *) item)->idempotent;
}

static const s_field_t s_action_fields [] = {
    S_TEXT (proto_action_spec_t, name, S_TEXT_NAME),
    { S_KEY ("kind"), .kind = S_KIND, .required = true,
      .offset = offsetof (proto_action_spec_t, modify) },
    S_TEXT (proto_action_spec_t, help, S_TEXT_SHORT),
    S_STRUCTS_OF (proto_action_spec_t, params, param_count, s_param_schema),
    { S_KEY ("idempotent"), .kind = S_BOOL, .required = false,
      .offset = offsetof (proto_action_spec_t, idempotent),
      .present = s_action_is_idempotent },
};
static const s_schema_t s_action_schema = {
    s_action_fields, S_COUNT_OF (s_action_fields),
    sizeof (proto_action_spec_t), offsetof (proto_action_spec_t, name), NULL
};

static const s_field_t s_backend_fields [] = {
    S_TEXT (proto_backend_spec_t, name, S_TEXT_NAME),
    S_STRUCTS_OF (proto_backend_spec_t, actions, action_count,
                  s_action_schema),
    S_TEXT_OPT (proto_backend_spec_t, "version", version, S_TEXT_SHORT),
};
static const s_schema_t s_backend_schema = {
    s_backend_fields, S_COUNT_OF (s_backend_fields),
    sizeof (proto_backend_spec_t), offsetof (proto_backend_spec_t, name),
    NULL
};

//  Fields shared by several messages
#define S_NODE S_TEXT (proto_msg_t, node, S_TEXT_NAME)
#define S_JOB S_TEXT (proto_msg_t, job, S_TEXT_JOB)
#define S_STEP S_INT (proto_msg_t, step, S_U32, 0, JOB_MAX_STEPS - 1)
#define S_ATTEMPT S_INT (proto_msg_t, attempt, S_U32, 1, PROTO_MAX_ATTEMPT)
#define S_NODES S_LIST_OF (proto_msg_t, nodes, node_count, S_TEXT_NAME, \
                           false, 1, PROTO_MAX_NODES)

static const s_field_t s_hello_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, hostname, S_TEXT_SHORT),
    S_LIST_OF (proto_msg_t, groups, group_count, S_TEXT_NAME, true, 0,
               PROTO_MAX_LIST),
    S_MAP_OF (proto_msg_t, labels, label_count, S_TEXT_NAME, S_TEXT_LABEL,
              true),
    S_STRUCTS_OF (proto_msg_t, backends, backend_count, s_backend_schema),
    S_TEXT (proto_msg_t, version, S_TEXT_SHORT),
    S_INT (proto_msg_t, concurrency, S_U32, 1, PROTO_MAX_CONCURRENCY),
    S_TEXT_OPT (proto_msg_t, "instance", instance, S_TEXT_NAME),
    S_LIST_OF (proto_msg_t, features, feature_count, S_TEXT_NAME, false, 1,
               PROTO_MAX_FEATURES),
};

static const s_field_t s_heartbeat_fields [] = {
    S_NODE,
    S_INT (proto_msg_t, running, S_U32, 0, UINT32_MAX),
    S_INT (proto_msg_t, queued, S_U32, 0, UINT32_MAX),
};

//  ack and started
static const s_field_t s_progress_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
};

//  Optional counts are sent when not 0
#define S_COUNT_PRESENT(member) \
    static bool s_has_##member (const void *item) \
    { return ((const proto_msg_t *) item)->member > 0; }
S_COUNT_PRESENT (output_size)
S_COUNT_PRESENT (error_size)
S_COUNT_PRESENT (output_dropped)
S_COUNT_PRESENT (error_dropped)
S_COUNT_PRESENT (max_output)
#define S_COUNT_OPT(member, min_, max_) \
    { S_KEY (#member), .kind = S_U64, .required = false, \
      .offset = offsetof (proto_msg_t, member), .min = min_, .max = max_, \
      .present = s_has_##member }

static const s_field_t s_result_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, status, S_TEXT_STATUS),
    S_TEXT (proto_msg_t, output, S_TEXT_OUTPUT),
    S_TEXT (proto_msg_t, error, S_TEXT_OUTPUT),
    S_INT (proto_msg_t, exit_code, S_I32, INT32_MIN, INT32_MAX),
    S_INT (proto_msg_t, duration_ms, S_U64, 0, INT64_MAX),
    S_FLAG (proto_msg_t, truncated),
    S_MAP_OF (proto_msg_t, data, data_count, S_TEXT_SHORT, S_TEXT_SHORT,
              false),
    S_COUNT_OPT (output_size, 1, PROTO_MAX_STREAM),
    S_COUNT_OPT (error_size, 1, PROTO_MAX_STREAM),
    S_COUNT_OPT (output_dropped, 1, INT64_MAX),
    S_COUNT_OPT (error_dropped, 1, INT64_MAX),
};

//  A result's dropped counts come with the size of what was kept
static int
s_result_check (const void *item, const pv_t *const *values,
                const s_path_t *path, char *why, size_t why_len)
{
    const proto_msg_t *msg = (const proto_msg_t *) item;
    if ((msg->output_dropped && !msg->output_size)
        || (msg->error_dropped && !msg->error_size)) {
        s_fail (why, why_len, path, "a dropped count needs its stream's "
                "size");
        return -2;
    }
    return 0;
}

static const s_field_t s_output_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, stream, S_TEXT_STREAM),
    S_INT (proto_msg_t, offset, S_U64, 0, PROTO_MAX_STREAM - 1),
    { S_KEY ("data"), .kind = S_BIN, .required = true,
      .offset = offsetof (proto_msg_t, chunk),
      .count_offset = offsetof (proto_msg_t, chunk_len), .min = 1,
      .max = PROTO_MAX_CHUNK },
    S_INT (proto_msg_t, size, S_U64, 1, PROTO_MAX_STREAM),
};

//  A piece lies inside its stream
static int
s_output_check (const void *item, const pv_t *const *values,
                const s_path_t *path, char *why, size_t why_len)
{
    const proto_msg_t *msg = (const proto_msg_t *) item;
    if (msg->offset + msg->chunk_len > msg->size) {
        s_fail (why, why_len, path, "offset %" PRIu64 " + %zu bytes is past "
                "the stream's size %" PRIu64, msg->offset, msg->chunk_len,
                msg->size);
        return -2;
    }
    return 0;
}

static const s_field_t s_output_ack_fields [] = {
    S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, stream, S_TEXT_STREAM),
    S_INT (proto_msg_t, offset, S_U64, 0, PROTO_MAX_STREAM - 1),
};

static const s_field_t s_bye_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, reason, S_TEXT_SHORT),
};

static const s_field_t s_welcome_fields [] = {
    S_NODE,
    S_INT (proto_msg_t, heartbeat_ms, S_U32, 1, PROTO_MAX_HEARTBEAT_MS),
    S_COUNT_OPT (max_output, 1, PROTO_MAX_STREAM),
    S_LIST_OF (proto_msg_t, features, feature_count, S_TEXT_NAME, false, 1,
               PROTO_MAX_FEATURES),
};

//  An entry of a results: a result's fields but its node (s_result_fields
//  starts with S_NODE), under the same rules
static const s_schema_t s_result_entry_schema = {
    s_result_fields + 1, S_COUNT_OF (s_result_fields) - 1,
    sizeof (proto_msg_t), 0, s_result_check
};

static const s_field_t s_results_fields [] = {
    S_NODE,
    { S_KEY ("results"), .kind = S_RESULTS, .required = true,
      .offset = offsetof (proto_msg_t, results),
      .count_offset = offsetof (proto_msg_t, result_count), .min = 1,
      .max = PROTO_MAX_RESULTS, .schema = &s_result_entry_schema },
};

static const s_field_t s_result_ack_fields [] = {
    S_JOB, S_STEP, S_ATTEMPT,
};

static const s_field_t s_result_acks_fields [] = {
    { S_KEY ("acks"), .kind = S_ACKS, .required = true,
      .offset = offsetof (proto_msg_t, acks),
      .count_offset = offsetof (proto_msg_t, ack_count), .min = 1,
      .max = PROTO_MAX_ACKS },
};

//  "parallel" is written only when true (steps of a DAG job)
static bool
s_command_parallel (const void *item)
{
    return ((const proto_msg_t *) item)->parallel;
}

static const s_field_t s_command_fields [] = {
    S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, backend, S_TEXT_NAME),
    S_TEXT (proto_msg_t, action, S_TEXT_NAME),
    S_MAP_OF (proto_msg_t, params, param_count, S_TEXT_NAME, S_TEXT_PARAM,
              true),
    S_INT (proto_msg_t, timeout_ms, S_U64, 0, INT64_MAX),
    S_NODES,
    { S_KEY ("parallel"), .kind = S_BOOL, .required = false,
      .offset = offsetof (proto_msg_t, parallel),
      .present = s_command_parallel },
};

static const s_field_t s_cancel_fields [] = {
    S_JOB,
    S_TEXT (proto_msg_t, reason, S_TEXT_SHORT),
    S_NODES,
};

//  progress: how far a running attempt has come
static const s_field_t s_task_progress_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
    S_INT (proto_msg_t, percent, S_I32, -1, 100),
    S_TEXT_OPT (proto_msg_t, "kind", kind, S_TEXT_NAME),
    S_TEXT_OPT (proto_msg_t, "message", message, S_TEXT_PROGRESS),
};

static const s_field_t s_error_fields [] = {
    S_TEXT (proto_msg_t, code, S_TEXT_SHORT),
    S_TEXT (proto_msg_t, message, S_TEXT_SHORT),
};

typedef struct {
    proto_type_t type;          //  Which message
    const char *name;           //  Its wire name
    size_t name_len;            //  Its length
    s_schema_t schema;          //  Its fields
} s_message_t;

#define S_MESSAGE(type, name, fields) \
    { type, name, sizeof (name) - 1, \
      { fields, S_COUNT_OF (fields), sizeof (proto_msg_t), 0, NULL } }
#define S_MESSAGE_CHECKED(type, name, fields, check) \
    { type, name, sizeof (name) - 1, \
      { fields, S_COUNT_OF (fields), sizeof (proto_msg_t), 0, check } }

static const s_message_t s_messages [] = {
    S_MESSAGE (PROTO_HELLO, "hello", s_hello_fields),
    S_MESSAGE (PROTO_HEARTBEAT, "heartbeat", s_heartbeat_fields),
    S_MESSAGE (PROTO_ACK, "ack", s_progress_fields),
    S_MESSAGE (PROTO_STARTED, "started", s_progress_fields),
    S_MESSAGE_CHECKED (PROTO_RESULT, "result", s_result_fields,
                       s_result_check),
    S_MESSAGE (PROTO_BYE, "bye", s_bye_fields),
    S_MESSAGE (PROTO_WELCOME, "welcome", s_welcome_fields),
    S_MESSAGE (PROTO_RESULT_ACK, "result_ack", s_result_ack_fields),
    S_MESSAGE (PROTO_COMMAND, "command", s_command_fields),
    S_MESSAGE (PROTO_CANCEL, "cancel", s_cancel_fields),
    S_MESSAGE (PROTO_ERROR, "error", s_error_fields),
    S_MESSAGE (PROTO_PROGRESS, "progress", s_task_progress_fields),
    S_MESSAGE_CHECKED (PROTO_OUTPUT, "output", s_output_fields,
                       s_output_check),
    S_MESSAGE (PROTO_OUTPUT_ACK, "output_ack", s_output_ack_fields),
    S_MESSAGE (PROTO_RESULT_ACKS, "result_acks", s_result_acks_fields),
    S_MESSAGE (PROTO_RESULTS, "results", s_results_fields),
};

static const s_message_t *
s_message_for (proto_type_t type)
{
    for (size_t index = 0; index < S_COUNT_OF (s_messages); index++)
        if (s_messages [index].type == type)
            return &s_messages [index];
    return NULL;
}

//  Member access by offset
#define S_MEMBER(base, offset, type) ((type *) ((char *) (base) + (offset)))


//  ---------------------------------------------------------------------
//  Freeing

static void s_free_struct (void *item, const s_schema_t *schema);
static void s_free_members (proto_msg_t *self);

static void
s_free_strings (char **list, size_t count)
{
    for (size_t index = 0; list && index < count; index++)
        free (list [index]);
    free (list);
}

static void
s_free_pairs (proto_kv_t *pairs, size_t count)
{
    for (size_t index = 0; pairs && index < count; index++) {
        free (pairs [index].key);
        free (pairs [index].value);
    }
    free (pairs);
}

static void
s_free_field (void *item, const s_field_t *field)
{
    size_t *count = S_MEMBER (item, field->count_offset, size_t);
    switch (field->kind) {
        case S_STR: {
            char **text = S_MEMBER (item, field->offset, char *);
            free (*text);
            *text = NULL;
            break;
        }
        case S_LIST: {
            char ***list = S_MEMBER (item, field->offset, char **);
            s_free_strings (*list, *count);
            *list = NULL;
            *count = 0;
            break;
        }
        case S_MAP: {
            proto_kv_t **pairs = S_MEMBER (item, field->offset, proto_kv_t *);
            s_free_pairs (*pairs, *count);
            *pairs = NULL;
            *count = 0;
            break;
        }
        case S_BIN:
        case S_ACKS: {
            void **block = S_MEMBER (item, field->offset, void *);
            free (*block);
            *block = NULL;
            *count = 0;
            break;
        }
        case S_RESULTS: {
            proto_msg_t **entries = S_MEMBER (item, field->offset,
                                              proto_msg_t *);
            for (size_t index = 0; *entries && index < *count; index++)
                s_free_members (&(*entries) [index]);
            free (*entries);
            *entries = NULL;
            *count = 0;
            break;
        }
        case S_STRUCTS: {
            char **array = S_MEMBER (item, field->offset, char *);
            for (size_t index = 0; *array && index < *count; index++)
                s_free_struct (*array + index * field->schema->size,
                               field->schema);
            free (*array);
            *array = NULL;
            *count = 0;
            break;
        }
        default:
            break;
    }
}

static void
s_free_struct (void *item, const s_schema_t *schema)
{
    for (size_t index = 0; index < schema->count; index++)
        s_free_field (item, &schema->fields [index]);
}

proto_msg_t *
proto_msg_new (proto_type_t type)
{
    proto_msg_t *self = calloc (1, sizeof *self);
    if (self)
        self->type = type;
    return self;
}

void
proto_msg_destroy (proto_msg_t **self_p)
{
    assert (self_p);
    proto_msg_t *self = *self_p;
    if (!self)
        return;
    if (self->packed) {
        s_chunk_t *chunk = (s_chunk_t *) self->chunks;
        while (chunk) {
            s_chunk_t *next = chunk->next;
            free (chunk);
            chunk = next;
        }
        free (self);
        *self_p = NULL;
        return;
    }
    s_free_members (self);
    free (self);
    *self_p = NULL;
}

//  Frees what an unpacked message owns (not the message itself).
static void
s_free_members (proto_msg_t *self)
{
    //  Free every member whatever the type: a caller may have set fields
    //  that its message type does not use
    for (size_t index = 0; self->results && index < self->result_count;
         index++)
        s_free_members (&self->results [index]);
    free (self->results);
    free (self->node);
    free (self->hostname);
    s_free_strings (self->groups, self->group_count);
    s_free_pairs (self->labels, self->label_count);
    for (size_t index = 0; self->backends && index < self->backend_count;
         index++)
        s_free_struct (&self->backends [index], &s_backend_schema);
    free (self->backends);
    free (self->version);
    free (self->instance);
    s_free_strings (self->features, self->feature_count);
    free ((void *) self->acks);
    free (self->job);
    free (self->status);
    free (self->output);
    free (self->error);
    s_free_pairs (self->data, self->data_count);
    free (self->backend);
    free (self->action);
    s_free_pairs (self->params, self->param_count);
    s_free_strings (self->nodes, self->node_count);
    free (self->reason);
    free (self->code);
    free (self->message);
    free (self->kind);
    free (self->stream);
    free (self->chunk);
}

const char *
proto_type_name (proto_type_t type)
{
    const s_message_t *message = s_message_for (type);
    return message ? message->name : "?";
}


//  ---------------------------------------------------------------------
//  Uniqueness (list items, map keys on encode, struct names)

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(const char *const *) a, *(const char *const *) b);
}

//  Up to this many strings are compared pairwise, without a sort
#define S_SMALL_UNIQUE 8

//  String INDEX of an array of structs, at BASE + INDEX * STRIDE + OFFSET.
static const char *
s_string_at (const void *base, size_t index, size_t stride, size_t offset)
{
    return *(char *const *) ((const char *) base + index * stride + offset);
}

//  Returns the first string, in strcmp order, that occurs twice among
//  COUNT strings, or NULL. Each string is found at BASE + index * STRIDE +
//  OFFSET.
static const char *
s_duplicate (const void *base, size_t count, size_t stride, size_t offset,
             bool *out_of_memory)
{
    *out_of_memory = false;
    if (count < 2)
        return NULL;
    if (count <= S_SMALL_UNIQUE) {
        const char *found = NULL;
        for (size_t index = 1; index < count; index++) {
            const char *text = s_string_at (base, index, stride, offset);
            for (size_t other = 0; other < index; other++) {
                const char *earlier = s_string_at (base, other, stride,
                                                    offset);
                if (text [0] == earlier [0] && strcmp (text, earlier) == 0) {
                    if (!found || strcmp (text, found) < 0)
                        found = text;
                    break;
                }
            }
        }
        return found;
    }
    const char **sorted = malloc (count * sizeof *sorted);
    if (!sorted) {
        *out_of_memory = true;
        return NULL;
    }
    for (size_t index = 0; index < count; index++)
        sorted [index] = s_string_at (base, index, stride, offset);
    qsort (sorted, count, sizeof *sorted, s_compare_strings);
    const char *found = NULL;
    for (size_t index = 1; index < count && !found; index++)
        if (strcmp (sorted [index], sorted [index - 1]) == 0)
            found = sorted [index];
    free (sorted);
    return found;
}

static int
s_check_unique (const void *base, size_t count, size_t stride, size_t offset,
                const s_path_t *path, char *why, size_t why_len)
{
    char show [S_SHOW_MAX + 4];
    bool out_of_memory;
    const char *found = s_duplicate (base, count, stride, offset,
                                     &out_of_memory);
    if (out_of_memory) {
        s_fail (why, why_len, path, "out of memory");
        return -2;
    }
    if (found) {
        s_fail (why, why_len, path, "'%s' appears twice",
                s_show (found, strlen (found), show));
        return -2;
    }
    return 0;
}

static int
s_compare_pairs (const void *a, const void *b)
{
    return strcmp (((const proto_kv_t *) a)->key,
                   ((const proto_kv_t *) b)->key);
}


//  ---------------------------------------------------------------------
//  Decoding against a schema

static int s_decode_fields (const pv_t *map, const s_schema_t *schema,
                            void *item, const s_path_t *path, bool envelope,
                            char *why, size_t why_len);

static int
s_decode_int (const pv_t *value, const s_field_t *field, void *item,
              const s_path_t *path, char *why, size_t why_len)
{
    int64_t number;
    if (pv_get_int (value, &number)) {
        s_fail (why, why_len, path, "expected int, got %s",
                pv_type_name (pv_type (value)));
        return -2;
    }
    if (number < field->min || number > field->max) {
        s_fail (why, why_len, path, "%" PRId64 " is out of range %" PRId64
                "..%" PRId64, number, field->min, field->max);
        return -2;
    }
    if (field->kind == S_U32)
        *S_MEMBER (item, field->offset, uint32_t) = (uint32_t) number;
    else
    if (field->kind == S_I32)
        *S_MEMBER (item, field->offset, int32_t) = (int32_t) number;
    else
    if (field->kind == S_I64)
        *S_MEMBER (item, field->offset, int64_t) = number;
    else
        *S_MEMBER (item, field->offset, uint64_t) = (uint64_t) number;
    return 0;
}

//  Checks that VALUE is an array of at most MAX elements (at least MIN),
//  and gives its count.
static int
s_array_size (const pv_t *value, int64_t min, int64_t max,
              const s_path_t *path, size_t *count, char *why, size_t why_len)
{
    if (pv_type (value) != PV_ARRAY) {
        s_fail (why, why_len, path, "expected array, got %s",
                pv_type_name (pv_type (value)));
        return -2;
    }
    *count = pv_size (value);
    if ((int64_t) *count > max) {
        s_fail (why, why_len, path, "more than %" PRId64 " entries", max);
        return -2;
    }
    if ((int64_t) *count < min) {
        s_fail (why, why_len, path, "at least %" PRId64 " %s needed", min,
                min == 1 ? "entry is" : "entries are");
        return -2;
    }
    return 0;
}

static int
s_decode_list (const pv_t *value, const s_field_t *field, void *item,
               const s_path_t *path, char *why, size_t why_len)
{
    size_t count;
    if (s_array_size (value, field->min, field->max, path, &count, why,
                      why_len))
        return -2;
    char ***list = S_MEMBER (item, field->offset, char **);
    size_t *list_count = S_MEMBER (item, field->count_offset, size_t);
    if (count == 0)
        return 0;
    *list = (char **) s_alloc (count * sizeof (char *), 8, true);
    if (!*list) {
        s_fail (why, why_len, path, "out of memory");
        return -2;
    }
    *list_count = count;
    for (size_t index = 0; index < count; index++) {
        s_path_t item_path = { path, NULL, 0, index, false };
        if (s_text_read (pv_array_at (value, index), field->text, &item_path,
                         &(*list) [index], why, why_len))
            return -2;
    }
    return s_check_unique (*list, count, sizeof (char *), 0, path, why,
                           why_len);
}

static int
s_decode_map (const pv_t *value, const s_field_t *field, void *item,
              const s_path_t *path, char *why, size_t why_len)
{
    if (pv_type (value) != PV_MAP) {
        s_fail (why, why_len, path, "expected map, got %s",
                pv_type_name (pv_type (value)));
        return -2;
    }
    size_t count = pv_size (value);
    if ((int64_t) count > field->max) {
        s_fail (why, why_len, path, "more than %" PRId64 " entries",
                field->max);
        return -2;
    }
    proto_kv_t **pairs = S_MEMBER (item, field->offset, proto_kv_t *);
    size_t *pair_count = S_MEMBER (item, field->count_offset, size_t);
    if (count == 0)
        return 0;
    *pairs = (proto_kv_t *) s_alloc (count * sizeof (proto_kv_t), 8, true);
    if (!*pairs) {
        s_fail (why, why_len, path, "out of memory");
        return -2;
    }
    *pair_count = count;
    for (size_t index = 0; index < count; index++) {
        const pv_t *key = pv_map_key_at (value, index);
        s_path_t item_path = { path, "", 0, 0, true };
        item_path.key = pv_str (key, &item_path.key_len);
        if (s_text_read (key, field->key_text, &item_path,
                         &(*pairs) [index].key, why, why_len))
            return -2;
        if (s_text_read (pv_map_value_at (value, index), field->text,
                         &item_path, &(*pairs) [index].value, why, why_len))
            return -2;
    }
    //  Keys are unique (the decoder refuses duplicates); keep them sorted
    //  so that readers can rely on one order
    if (count > 1)
        qsort (*pairs, count, sizeof (proto_kv_t), s_compare_pairs);
    return 0;
}

static int
s_decode_structs (const pv_t *value, const s_field_t *field, void *item,
                  const s_path_t *path, char *why, size_t why_len)
{
    size_t count;
    if (s_array_size (value, 0, field->max, path, &count, why, why_len))
        return -2;
    const s_schema_t *schema = field->schema;
    char **array = S_MEMBER (item, field->offset, char *);
    size_t *array_count = S_MEMBER (item, field->count_offset, size_t);
    if (count == 0)
        return 0;
    *array = (char *) s_alloc (count * schema->size, 8, true);
    if (!*array) {
        s_fail (why, why_len, path, "out of memory");
        return -2;
    }
    *array_count = count;
    for (size_t index = 0; index < count; index++) {
        s_path_t item_path = { path, NULL, 0, index, false };
        if (s_decode_fields (pv_array_at (value, index), schema,
                             *array + index * schema->size, &item_path,
                             false, why, why_len))
            return -2;
    }
    return s_check_unique (*array, count, schema->size, schema->name_offset,
                           path, why, why_len);
}

//  Longest job id an ack may name (job_id_valid says the rest)
#define S_ACK_JOB_MAX 63

//  Checks one [job, step, attempt] of a result_acks; gives the job's
//  bytes, the step and the attempt.
static int
s_ack_read (const pv_t *entry, const s_path_t *path, const char **job,
            size_t *job_len, uint32_t *step, uint32_t *attempt, char *why,
            size_t why_len)
{
    char show [S_SHOW_MAX + 4];
    if (pv_type (entry) != PV_ARRAY || pv_size (entry) != 3) {
        s_fail (why, why_len, path, "expected [job, step, attempt]");
        return -2;
    }
    const pv_t *job_value = pv_array_at (entry, 0);
    *job = pv_type (job_value) == PV_STR ? pv_str (job_value, job_len) : NULL;
    char text [S_ACK_JOB_MAX + 1];
    if (*job && *job_len <= S_ACK_JOB_MAX) {
        memcpy (text, *job, *job_len);
        text [*job_len] = 0;
    }
    if (!*job || *job_len > S_ACK_JOB_MAX || !job_id_valid (text)) {
        s_fail (why, why_len, path, "invalid job id '%s'",
                *job ? s_show (*job, *job_len, show) : "");
        return -2;
    }
    int64_t number [2];
    if (pv_get_int (pv_array_at (entry, 1), &number [0])
        || pv_get_int (pv_array_at (entry, 2), &number [1])
        || number [0] < 0 || number [0] > JOB_MAX_STEPS - 1
        || number [1] < 1 || number [1] > PROTO_MAX_ATTEMPT) {
        s_fail (why, why_len, path, "step (0..%d) and attempt (1..%d) "
                "expected", JOB_MAX_STEPS - 1, PROTO_MAX_ATTEMPT);
        return -2;
    }
    *step = (uint32_t) number [0];
    *attempt = (uint32_t) number [1];
    return 0;
}

//  result_acks' acks: checked whole first, then copied into one block
//  that holds the entries and, after them, their job ids.
static int
s_decode_acks (const pv_t *value, const s_field_t *field, void *item,
               const s_path_t *path, char *why, size_t why_len)
{
    size_t count;
    if (s_array_size (value, field->min, field->max, path, &count, why,
                      why_len))
        return -2;
    size_t text_size = 0;
    for (size_t index = 0; index < count; index++) {
        s_path_t item_path = { path, NULL, 0, index, false };
        const char *job;
        size_t job_len;
        uint32_t step, attempt;
        if (s_ack_read (pv_array_at (value, index), &item_path, &job,
                        &job_len, &step, &attempt, why, why_len))
            return -2;
        text_size += job_len + 1;
    }
    proto_ack_t *acks = (proto_ack_t *) s_alloc (count * sizeof (proto_ack_t)
                                                 + text_size, 8, false);
    if (!acks) {
        s_fail (why, why_len, path, "out of memory");
        return -2;
    }
    char *text = (char *) (acks + count);
    for (size_t index = 0; index < count; index++) {
        const char *job;
        size_t job_len;
        s_ack_read (pv_array_at (value, index), path, &job, &job_len,
                    &acks [index].step, &acks [index].attempt, NULL, 0);
        memcpy (text, job, job_len);
        text [job_len] = 0;
        acks [index].job = text;
        text += job_len + 1;
    }
    *S_MEMBER (item, field->offset, proto_ack_t *) = acks;
    *S_MEMBER (item, field->count_offset, size_t) = count;
    return 0;
}

//  results' entries: the array's bounds are the message's (a breach
//  refuses it whole); each entry is decoded on its own, and one that
//  breaks a rule of result is kept as type 0 with its reason in message.
static int
s_decode_results (const pv_t *value, const s_field_t *field, void *item,
                  const s_path_t *path, char *why, size_t why_len)
{
    size_t count;
    if (s_array_size (value, field->min, field->max, path, &count, why,
                      why_len))
        return -2;
    proto_msg_t *entries = (proto_msg_t *) s_alloc (count
                                                    * sizeof (proto_msg_t),
                                                    16, true);
    if (!entries) {
        s_fail (why, why_len, path, "out of memory");
        return -2;
    }
    proto_msg_t *batch = (proto_msg_t *) item;
    *S_MEMBER (item, field->offset, proto_msg_t *) = entries;
    *S_MEMBER (item, field->count_offset, size_t) = count;
    for (size_t index = 0; index < count; index++) {
        proto_msg_t *entry = &entries [index];
        s_path_t item_path = { path, NULL, 0, index, false };
        char reason [256];
        if (s_decode_fields (pv_array_at (value, index), field->schema,
                             entry, &item_path, false, reason,
                             sizeof reason) == 0) {
            entry->type = PROTO_RESULT;
            entry->node = batch->node;
            continue;
        }
        //  What the entry got before its error goes with the arena, or now
        if (!s_arena)
            s_free_members (entry);
        memset (entry, 0, sizeof *entry);
        size_t len = strlen (reason);
        entry->message = (char *) s_alloc (len + 1, 1, false);
        if (!entry->message) {
            s_fail (why, why_len, path, "out of memory");
            return -2;
        }
        memcpy (entry->message, reason, len + 1);
    }
    return 0;
}

static int
s_decode_field (const pv_t *value, const s_field_t *field, void *item,
                const s_path_t *path, char *why, size_t why_len)
{
    switch (field->kind) {
        case S_STR:
            return s_text_read (value, field->text, path,
                                S_MEMBER (item, field->offset, char *), why,
                                why_len);
        case S_U32:
        case S_I32:
        case S_U64:
        case S_I64:
            return s_decode_int (value, field, item, path, why, why_len);
        case S_BOOL:
            if (pv_get_bool (value, S_MEMBER (item, field->offset, bool))) {
                s_fail (why, why_len, path, "expected bool, got %s",
                        pv_type_name (pv_type (value)));
                return -2;
            }
            return 0;
        case S_KIND:
            if (pv_str_eq (value, "modify"))
                *S_MEMBER (item, field->offset, bool) = true;
            else
            if (pv_str_eq (value, "query"))
                *S_MEMBER (item, field->offset, bool) = false;
            else {
                s_fail (why, why_len, path,
                        "expected \"query\" or \"modify\"");
                return -2;
            }
            return 0;
        case S_LIST:
            return s_decode_list (value, field, item, path, why, why_len);
        case S_MAP:
            return s_decode_map (value, field, item, path, why, why_len);
        case S_STRUCTS:
            return s_decode_structs (value, field, item, path, why, why_len);
        case S_ACKS:
            return s_decode_acks (value, field, item, path, why, why_len);
        case S_RESULTS:
            return s_decode_results (value, field, item, path, why, why_len);
        case S_BIN: {
            if (pv_type (value) != PV_BIN) {
                s_fail (why, why_len, path, "expected binary, got %s",
                        pv_type_name (pv_type (value)));
                return -2;
            }
            size_t len = 0;
            const char *bytes = pv_str (value, &len);
            if ((int64_t) len < field->min || (int64_t) len > field->max) {
                s_fail (why, why_len, path, "%zu bytes (%" PRId64 "..%"
                        PRId64 ")", len, field->min, field->max);
                return -2;
            }
            uint8_t *copy = (uint8_t *) s_alloc (len ? len : 1, 1, false);
            if (!copy) {
                s_fail (why, why_len, path, "out of memory");
                return -2;
            }
            if (len)
                memcpy (copy, bytes, len);
            *S_MEMBER (item, field->offset, uint8_t *) = copy;
            *S_MEMBER (item, field->count_offset, size_t) = len;
            return 0;
        }
    }
    return -2;
}

//  Whether the LEN bytes at KEY are "v" or "type", the keys every message
//  carries besides its fields.
static bool
s_envelope_key (const char *key, size_t len)
{
    return (len == 1 && key [0] == 'v')
           || (len == 4 && memcmp (key, "type", 4) == 0);
}

//  The index of SCHEMA's field named by the LEN bytes at KEY, or the
//  field count when there is none. The search starts at FROM and wraps:
//  encoders write fields in schema order, so the field after the last one
//  found is nearly always the one.
static size_t
s_field_find (const s_schema_t *schema, const char *key, size_t len,
              size_t from)
{
    size_t count = schema->count;
    size_t at = from < count ? from : 0;
    for (size_t tried = 0; tried < count; tried++) {
        const s_field_t *field = &schema->fields [at];
        if (field->key_len == len && field->key [0] == key [0]
        &&  memcmp (field->key, key, len) == 0)
            return at;
        if (++at == count)
            at = 0;
    }
    return count;
}

//  Decodes MAP into ITEM, at PATH. With ENVELOPE the keys "v" and "type"
//  are allowed as well (a message's top level). One pass over the map
//  gives each field its value or refuses an unknown key; then the fields
//  are decoded in schema order, so the first error is the same whatever
//  order the keys came in.
static int
s_decode_fields (const pv_t *map, const s_schema_t *schema, void *item,
                 const s_path_t *path, bool envelope, char *why,
                 size_t why_len)
{
    char show [S_SHOW_MAX + 4];
    if (pv_type (map) != PV_MAP) {
        s_fail (why, why_len, path, "expected map, got %s",
                pv_type_name (pv_type (map)));
        return -2;
    }
    assert (schema->count <= S_FIELDS_MAX);
    const pv_t *values [S_FIELDS_MAX] = { NULL };
    size_t size = pv_size (map);
    size_t next = 0;
    for (size_t index = 0; index < size; index++) {
        const char *key = NULL;
        size_t key_len = 0;
        const pv_t *value = pv_map_entry (map, index, &key, &key_len);
        if (envelope && s_envelope_key (key, key_len))
            continue;
        size_t found = key_len > 0 ? s_field_find (schema, key, key_len,
                                                   next)
                                   : schema->count;
        if (found == schema->count) {
            s_fail (why, why_len, path, "unknown key '%s'",
                    s_show (key, key_len, show));
            return -2;
        }
        //  The document has no duplicate keys: each field comes once
        values [found] = value;
        next = found + 1;
    }
    for (size_t index = 0; index < schema->count; index++) {
        const s_field_t *field = &schema->fields [index];
        s_path_t field_path = { path, field->key, field->key_len, 0, false };
        if (!values [index]) {
            if (field->required) {
                s_fail (why, why_len, &field_path, "required");
                return -2;
            }
            continue;
        }
        if (s_decode_field (values [index], field, item, &field_path, why,
                            why_len))
            return -2;
    }
    if (schema->check)
        return schema->check (item, values, path, why, why_len);
    return 0;
}

int
proto_msg_decode_schema (const void *data, size_t size, proto_msg_t **msg_p,
                         char *why, size_t why_len)
{
    assert (msg_p);
    *msg_p = NULL;
    char show [S_SHOW_MAX + 4];
    pv_doc_t *doc = NULL;
    //  Every string is copied out, so the document need not copy the frame
    if (pv_doc_decode_borrowed (data, size, &doc, why, why_len))
        return PROTO_EMALFORMED;

    int rc = PROTO_EMALFORMED;
    proto_msg_t *msg = NULL;
    const pv_t *root = pv_doc_root (doc);
    if (pv_type (root) != PV_MAP) {
        s_format (why, why_len, "expected a map, got %s",
                  pv_type_name (pv_type (root)));
        goto done;
    }
    const pv_t *version = pv_map_get (root, "v");
    int64_t number;
    if (!version) {
        s_format (why, why_len, "v: required (protocol version, speaks %d)",
                  PROTO_VERSION);
        goto done;
    }
    if (pv_get_int (version, &number)) {
        s_format (why, why_len, "v: expected int, got %s",
                  pv_type_name (pv_type (version)));
        goto done;
    }
    if (number != PROTO_VERSION) {
        s_format (why, why_len, "unsupported version %" PRId64 " (speaks %d)",
                  number, PROTO_VERSION);
        goto done;
    }
    const pv_t *type = pv_map_get (root, "type");
    if (!type) {
        s_format (why, why_len, "type: required");
        goto done;
    }
    if (pv_type (type) != PV_STR) {
        s_format (why, why_len, "type: expected string, got %s",
                  pv_type_name (pv_type (type)));
        goto done;
    }
    size_t type_len = 0;
    const char *type_text = pv_str (type, &type_len);
    const s_message_t *message = NULL;
    for (size_t index = 0; index < S_COUNT_OF (s_messages) && !message;
         index++)
        if (s_messages [index].name_len == type_len
        &&  memcmp (s_messages [index].name, type_text, type_len) == 0)
            message = &s_messages [index];
    if (!message) {
        s_format (why, why_len, "unknown type '%s'",
                  s_show (type_text, type_len, show));
        goto done;
    }
    //  One allocation holds the message and, nearly always, all it owns:
    //  their bytes are at most the frame's, plus NULs and arrays
    s_arena_t arena;
    if (message->type == PROTO_HELLO)
        msg = proto_msg_new (message->type);
    else {
        size_t head = (sizeof (proto_msg_t) + 15) & ~(size_t) 15;
        size_t room = size + 256;
        msg = (proto_msg_t *) malloc (head + room);
        if (msg) {
            memset (msg, 0, sizeof (proto_msg_t));
            msg->type = message->type;
            msg->packed = true;
            arena.next = (char *) msg + head;
            arena.end = arena.next + room;
            arena.chunks = (s_chunk_t **) &msg->chunks;
            s_arena = &arena;
        }
    }
    if (!msg) {
        s_format (why, why_len, "out of memory");
        goto done;
    }
    s_path_t path = { NULL, message->name, message->name_len, 0, false };
    int decoded = s_decode_fields (root, &message->schema, msg, &path, true,
                                   why, why_len);
    s_arena = NULL;
    if (decoded)
        goto done;
    *msg_p = msg;
    msg = NULL;
    rc = PROTO_OK;
done:
    proto_msg_destroy (&msg);
    pv_doc_destroy (&doc);
    return rc;
}


//  ---------------------------------------------------------------------
//  The direct decode of flat messages
//
//  Results are nearly all the broker reads. The schema decode below
//  first builds a tree of the whole frame (pv), then reads the tree into
//  the message. The direct decode reads a message whose fields are all
//  strings, ints, bools and maps of strings (result, ack, started,
//  heartbeat, bye...), and a results whose entries are such maps,
//  straight from the bytes into the message, under the same field
//  tables, in the shape encoders write it: "v" and "type" first, then
//  the type's fields in any order. It accepts a frame only
//  when every rule of the schema decode holds (pv's grammar, text and
//  duplicate-key rules included). At the first thing it does not read (a
//  hello, a list, a float, a duplicate, a value out of range, a results
//  entry that breaks a rule, anything malformed) it declines and proto_msg_decode gives the frame to the
//  schema decode, which accepts it or says why not: every error comes
//  from one place. fuzz_proto checks on every input that the direct
//  decode accepts nothing the schema decode refuses and that both give
//  the same message.

typedef struct {
    const uint8_t *data;        //  The frame
    size_t size;                //  Its bytes
    size_t pos;                 //  Next byte to read (at most size)
} s_reader_t;

//  Whether the LEN bytes at A and B are the same (short keys: no call).
static inline bool
s_same_bytes (const char *a, const char *b, size_t len)
{
    uint64_t x, y;
    if (len >= 8 && len <= 16) {
        //  Two words that may overlap
        memcpy (&x, a, 8);
        memcpy (&y, b, 8);
        if (x != y)
            return false;
        memcpy (&x, a + len - 8, 8);
        memcpy (&y, b + len - 8, 8);
        return x == y;
    }
    if (len > 16)
        return memcmp (a, b, len) == 0;
    if (len >= 4) {
        uint32_t u, w;
        memcpy (&u, a, 4);
        memcpy (&w, b, 4);
        if (u != w)
            return false;
        memcpy (&u, a + len - 4, 4);
        memcpy (&w, b + len - 4, 4);
        return u == w;
    }
    for (size_t index = 0; index < len; index++)
        if (a [index] != b [index])
            return false;
    return true;
}

//  Reads a map header of at most 65535 entries into *COUNT. -1 when the
//  next value is not one.
static inline int
s_read_map (s_reader_t *reader, size_t *count)
{
    size_t left = reader->size - reader->pos;
    const uint8_t *at = reader->data + reader->pos;
    if (left >= 1 && (at [0] & 0xf0) == 0x80) {
        *count = at [0] & 0x0f;
        reader->pos += 1;
        return 0;
    }
    if (left >= 3 && at [0] == 0xde) {
        *count = ((size_t) at [1] << 8) | at [2];
        reader->pos += 3;
        return 0;
    }
    return -1;
}

//  Reads a string: its bytes (not checked as text) in *TEXT and *LEN. -1
//  when the next value is not a whole string.
static inline int
s_read_str (s_reader_t *reader, const char **text, size_t *len)
{
    size_t left = reader->size - reader->pos;
    const uint8_t *at = reader->data + reader->pos;
    size_t head;
    size_t bytes;
    if (left >= 1 && (at [0] & 0xe0) == 0xa0) {
        head = 1;
        bytes = at [0] & 0x1f;
    }
    else
    if (left >= 2 && at [0] == 0xd9) {
        head = 2;
        bytes = at [1];
    }
    else
    if (left >= 3 && at [0] == 0xda) {
        head = 3;
        bytes = ((size_t) at [1] << 8) | at [2];
    }
    else
    if (left >= 5 && at [0] == 0xdb) {
        head = 5;
        bytes = ((size_t) at [1] << 24) | ((size_t) at [2] << 16)
                | ((size_t) at [3] << 8) | at [4];
    }
    else
        return -1;
    if (bytes > left - head)
        return -1;
    *text = (const char *) at + head;
    *len = bytes;
    reader->pos += head + bytes;
    return 0;
}

//  Reads an integer of any msgpack encoding that fits int64_t, as pv
//  reads it. -1 when the next value is not one.
static inline int
s_read_int (s_reader_t *reader, int64_t *value)
{
    size_t left = reader->size - reader->pos;
    const uint8_t *at = reader->data + reader->pos;
    if (left == 0)
        return -1;
    uint8_t byte = at [0];
    if (byte <= 0x7f || byte >= 0xe0) {
        *value = (int8_t) byte;
        reader->pos += 1;
        return 0;
    }
    bool is_signed = byte >= 0xd0 && byte <= 0xd3;
    if (!is_signed && (byte < 0xcc || byte > 0xcf))
        return -1;
    size_t width = (size_t) 1 << (byte - (is_signed ? 0xd0 : 0xcc));
    if (left - 1 < width)
        return -1;
    uint64_t bits = 0;
    for (size_t index = 1; index <= width; index++)
        bits = (bits << 8) | at [index];
    if (!is_signed) {
        if (bits > (uint64_t) INT64_MAX)
            return -1;
        *value = (int64_t) bits;
    }
    else
    if (width == 1)
        *value = (int8_t) bits;
    else
    if (width == 2)
        *value = (int16_t) bits;
    else
    if (width == 4)
        *value = (int32_t) bits;
    else
        *value = (int64_t) bits;
    reader->pos += 1 + width;
    return 0;
}

//  Reads a string under RULE into a fresh copy in *OUT (from the arena of
//  the decode). -1 when the next value is not a string that rule accepts.
static int
s_direct_text (s_reader_t *reader, s_text_t rule, char **out)
{
    const char *bytes;
    size_t len;
    //  Names, job ids and the words of a closed set are ASCII letters,
    //  digits and a few marks: checked below, they are text
    bool named = rule == S_TEXT_NAME || rule == S_TEXT_LABEL
                 || rule == S_TEXT_JOB || rule == S_TEXT_STATUS
                 || rule == S_TEXT_STREAM;
    if (s_read_str (reader, &bytes, &len) || len > s_text_max (rule)
    ||  (!named && !pv_text_valid (bytes, len)))
        return -1;
    //  The arena's free space, else s_alloc's next chunk
    s_arena_t *arena = s_arena;
    char *text = arena->next;
    if (len + 1 <= (size_t) (arena->end - text))
        arena->next = text + len + 1;
    else
    if (!(text = (char *) s_alloc (len + 1, 1, false)))
        return -1;
    memcpy (text, bytes, len);
    text [len] = 0;
    //  The other rules are the length, checked above. A NUL inside
    //  would end the text those checks read before its end
    static const s_path_t path = { NULL, "", 0, 0, false };
    if (named && (strlen (text) != len
                  || s_text_check (rule, text, len, &path, NULL, 0)))
        return -1;
    *out = text;
    return 0;
}

//  Reads a map of strings into FIELD of ITEM. -1 when the schema decode
//  might not take it as it is.
static int
s_direct_map (s_reader_t *reader, const s_field_t *field, void *item)
{
    size_t count;
    if (s_read_map (reader, &count) || (int64_t) count > field->max)
        return -1;
    if (count == 0)
        return 0;
    proto_kv_t *pairs = (proto_kv_t *) s_alloc (count * sizeof (proto_kv_t),
                                                8, true);
    if (!pairs)
        return -1;
    for (size_t index = 0; index < count; index++)
        if (s_direct_text (reader, field->key_text, &pairs [index].key)
        ||  s_direct_text (reader, field->text, &pairs [index].value))
            return -1;
    if (count > 1) {
        qsort (pairs, count, sizeof (proto_kv_t), s_compare_pairs);
        //  pv refuses a map that holds a key twice
        for (size_t index = 1; index < count; index++)
            if (strcmp (pairs [index].key, pairs [index - 1].key) == 0)
                return -1;
    }
    *S_MEMBER (item, field->offset, proto_kv_t *) = pairs;
    *S_MEMBER (item, field->count_offset, size_t) = count;
    return 0;
}

static int s_direct_entries (s_reader_t *reader, const s_field_t *field,
                             void *item);

//  Reads the value of FIELD into ITEM. -1 when the schema decode might
//  not take it as it is.
static int
s_direct_field (s_reader_t *reader, const s_field_t *field, void *item)
{
    int64_t number;
    switch (field->kind) {
        case S_STR:
            return s_direct_text (reader, field->text,
                                  S_MEMBER (item, field->offset, char *));
        case S_U32:
        case S_I32:
        case S_U64:
        case S_I64:
            if (s_read_int (reader, &number) || number < field->min
            ||  number > field->max)
                return -1;
            if (field->kind == S_U32)
                *S_MEMBER (item, field->offset, uint32_t) = (uint32_t) number;
            else
            if (field->kind == S_I32)
                *S_MEMBER (item, field->offset, int32_t) = (int32_t) number;
            else
            if (field->kind == S_I64)
                *S_MEMBER (item, field->offset, int64_t) = number;
            else
                *S_MEMBER (item, field->offset, uint64_t) = (uint64_t) number;
            return 0;
        case S_BOOL:
            if (reader->pos == reader->size
            ||  (reader->data [reader->pos] & 0xfe) != 0xc2)
                return -1;
            *S_MEMBER (item, field->offset, bool) =
                reader->data [reader->pos++] == 0xc3;
            return 0;
        case S_MAP:
            return s_direct_map (reader, field, item);
        case S_RESULTS:
            return s_direct_entries (reader, field, item);
        default:
            return -1;
    }
}

//  Reads the PAIRS key/value pairs of a map of SCHEMA's fields into ITEM:
//  each field at most once, every required one, then the schema's own
//  rule. -1 when the schema decode might not take them as they are.
static int
s_direct_fields (s_reader_t *reader, const s_schema_t *schema, void *item,
                 size_t pairs)
{
    assert (schema->count <= S_FIELDS_MAX);
    uint32_t seen = 0;
    size_t next = 0;
    for (size_t index = 0; index < pairs; index++) {
        const char *key;
        size_t key_len;
        if (s_read_str (reader, &key, &key_len) || key_len == 0)
            return -1;
        //  Encoders write the fields in schema order
        const s_field_t *guess = &schema->fields [next < schema->count
                                                  ? next : 0];
        size_t found = guess->key_len == key_len
                       && s_same_bytes (guess->key, key, key_len)
                           ? (size_t) (guess - schema->fields)
                           : s_field_find (schema, key, key_len, next);
        //  Unknown keys, "v" or "type" again, a field twice: declined
        if (found == schema->count || (seen & (UINT32_C (1) << found)))
            return -1;
        if (s_direct_field (reader, &schema->fields [found], item))
            return -1;
        seen |= UINT32_C (1) << found;
        next = found + 1;
    }
    uint32_t missing = ~seen & ((UINT32_C (1) << schema->count) - 1);
    for (; missing; missing &= missing - 1)
        if (schema->fields [__builtin_ctz (missing)].required)
            return -1;
    //  Struct-level rules use no wire values (as in proto_msg_encode)
    static const s_path_t path = { NULL, "", 0, 0, false };
    if (schema->check && schema->check (item, NULL, &path, NULL, 0))
        return -1;
    return 0;
}

//  Reads results' entries into FIELD of ITEM: all good, or -1 (an entry
//  that breaks a rule is the schema decode's to mark).
static int
s_direct_entries (s_reader_t *reader, const s_field_t *field, void *item)
{
    size_t left = reader->size - reader->pos;
    const uint8_t *at = reader->data + reader->pos;
    size_t count, head;
    if (left >= 1 && (at [0] & 0xf0) == 0x90) {
        count = at [0] & 0x0f;
        head = 1;
    }
    else
    if (left >= 3 && at [0] == 0xdc) {
        count = ((size_t) at [1] << 8) | at [2];
        head = 3;
    }
    else
        return -1;
    //  Each entry takes a byte at least: no allocation for a false count
    if ((int64_t) count < field->min || (int64_t) count > field->max
    ||  count > left - head)
        return -1;
    reader->pos += head;
    proto_msg_t *entries = (proto_msg_t *) s_alloc (count
                                                    * sizeof (proto_msg_t),
                                                    16, true);
    if (!entries)
        return -1;
    for (size_t index = 0; index < count; index++) {
        size_t pairs;
        if (s_read_map (reader, &pairs)
        ||  s_direct_fields (reader, field->schema, &entries [index], pairs))
            return -1;
        entries [index].type = PROTO_RESULT;
    }
    *S_MEMBER (item, field->offset, proto_msg_t *) = entries;
    *S_MEMBER (item, field->count_offset, size_t) = count;
    return 0;
}

//  The direct decode of the SIZE bytes at DATA. Returns 0 and a new
//  message in *MSG_P, or 1 when it declines the frame (see above).
static int
s_decode_direct (const void *data, size_t size, proto_msg_t **msg_p)
{
    s_reader_t reader = { (const uint8_t *) data, size, 0 };
    size_t count;
    const char *key;
    size_t key_len;
    int64_t version;
    const char *type_text;
    size_t type_len;
    //  {"v": 1, "type": name, ...}
    if (!data || s_read_map (&reader, &count) || count < 2
    ||  s_read_str (&reader, &key, &key_len) || key_len != 1 || key [0] != 'v'
    ||  s_read_int (&reader, &version) || version != PROTO_VERSION
    ||  s_read_str (&reader, &key, &key_len) || key_len != 4
    ||  memcmp (key, "type", 4) != 0
    ||  s_read_str (&reader, &type_text, &type_len))
        return 1;
    const s_message_t *message = NULL;
    for (size_t index = 0; index < S_COUNT_OF (s_messages) && !message;
         index++)
        if (s_messages [index].name_len == type_len
        &&  memcmp (s_messages [index].name, type_text, type_len) == 0)
            message = &s_messages [index];
    //  A hello's parts are allocations of their own (see proto_msg_t)
    if (!message || message->type == PROTO_HELLO)
        return 1;
    const s_schema_t *schema = &message->schema;
    assert (schema->count <= S_FIELDS_MAX);

    size_t head = (sizeof (proto_msg_t) + 15) & ~(size_t) 15;
    size_t room = size + 256;
    proto_msg_t *msg = (proto_msg_t *) malloc (head + room);
    if (!msg)
        return 1;
    memset (msg, 0, sizeof (proto_msg_t));
    msg->type = message->type;
    msg->packed = true;
    s_arena_t arena;
    arena.next = (char *) msg + head;
    arena.end = arena.next + room;
    arena.chunks = (s_chunk_t **) &msg->chunks;
    s_arena = &arena;

    int rc = 1;
    if (s_direct_fields (&reader, schema, msg, count - 2)
    ||  reader.pos != size)
        goto done;
    //  results' entries speak for the message's node, whatever came first
    for (size_t index = 0; index < msg->result_count; index++)
        msg->results [index].node = msg->node;
    *msg_p = msg;
    msg = NULL;
    rc = 0;
done:
    s_arena = NULL;
    proto_msg_destroy (&msg);
    return rc;
}

int
proto_msg_decode_direct (const void *data, size_t size, proto_msg_t **msg_p)
{
    assert (msg_p);
    *msg_p = NULL;
    return s_decode_direct (data, size, msg_p);
}

int
proto_msg_decode (const void *data, size_t size, proto_msg_t **msg_p,
                  char *why, size_t why_len)
{
    assert (msg_p);
    *msg_p = NULL;
    if (s_decode_direct (data, size, msg_p) == 0) {
        if (why && why_len > 0)
            why [0] = 0;
        return PROTO_OK;
    }
    return proto_msg_decode_schema (data, size, msg_p, why, why_len);
}


//  ---------------------------------------------------------------------
//  Encoding against a schema: check everything first, then write, so a
//  message that breaks a rule never leaves half a map in the writer

static int s_check_struct (const void *item, const s_schema_t *schema,
                           const s_path_t *path, char *why, size_t why_len);

//  Is an optional field present? Optional strings are present when set,
//  optional lists and maps when not empty, optional ints as their field
//  says.
static bool
s_present (const void *item, const s_field_t *field)
{
    if (field->required)
        return true;
    if (field->present)
        return field->present (item);
    if (field->kind == S_STR)
        return *S_MEMBER (item, field->offset, char *) != NULL;
    if (field->kind == S_LIST || field->kind == S_MAP
    ||  field->kind == S_STRUCTS)
        return *S_MEMBER (item, field->count_offset, size_t) > 0;
    return true;
}

static int
s_check_text (const char *text, s_text_t rule, const s_path_t *path,
              char *why, size_t why_len)
{
    if (!text) {
        s_fail (why, why_len, path, "required");
        return -2;
    }
    return s_text_check (rule, text, strlen (text), path, why, why_len);
}

static int
s_check_field (const void *item, const s_field_t *field,
               const s_path_t *path, char *why, size_t why_len)
{
    const size_t *count = S_MEMBER (item, field->count_offset, size_t);
    int64_t number = 0;
    switch (field->kind) {
        case S_STR:
            return s_check_text (*S_MEMBER (item, field->offset, char *),
                                 field->text, path, why, why_len);
        case S_U32:
            number = *S_MEMBER (item, field->offset, uint32_t);
            break;
        case S_I32:
            number = *S_MEMBER (item, field->offset, int32_t);
            break;
        case S_U64: {
            uint64_t wide = *S_MEMBER (item, field->offset, uint64_t);
            if (wide > INT64_MAX) {
                s_fail (why, why_len, path, "%" PRIu64 " does not fit int64",
                        wide);
                return -2;
            }
            number = (int64_t) wide;
            break;
        }
        case S_I64:
            number = *S_MEMBER (item, field->offset, int64_t);
            break;
        case S_BOOL:
        case S_KIND:
            return 0;
        case S_ACKS: {
            const proto_ack_t *acks = *S_MEMBER (item, field->offset,
                                                 proto_ack_t *);
            if ((int64_t) *count < field->min || (int64_t) *count > field->max
                || !acks) {
                s_fail (why, why_len, path, "%zu entries (%" PRId64 "..%"
                        PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (!acks [index].job || !job_id_valid (acks [index].job)
                    || acks [index].step > JOB_MAX_STEPS - 1
                    || acks [index].attempt < 1
                    || acks [index].attempt > PROTO_MAX_ATTEMPT) {
                    s_fail (why, why_len, &item_path, "invalid entry");
                    return -2;
                }
            }
            return 0;
        }
        case S_RESULTS: {
            const proto_msg_t *entries = *S_MEMBER (item, field->offset,
                                                    proto_msg_t *);
            if ((int64_t) *count < field->min || (int64_t) *count > field->max
                || !entries) {
                s_fail (why, why_len, path, "%zu entries (%" PRId64 "..%"
                        PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_struct (&entries [index], field->schema,
                                    &item_path, why, why_len)
                    || field->schema->check (&entries [index], NULL,
                                             &item_path, why, why_len))
                    return -2;
            }
            return 0;
        }
        case S_BIN: {
            const uint8_t *bytes = *S_MEMBER (item, field->offset, uint8_t *);
            if ((int64_t) *count < field->min || (int64_t) *count > field->max
                || (*count > 0 && !bytes)) {
                s_fail (why, why_len, path, "%zu bytes (%" PRId64 "..%"
                        PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            return 0;
        }
        case S_LIST: {
            char **list = *S_MEMBER (item, field->offset, char **);
            if ((int64_t) *count > field->max
            ||  (int64_t) *count < field->min || (*count > 0 && !list)) {
                s_fail (why, why_len, path, "%zu entries (%" PRId64 "..%"
                        PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_text (list [index], field->text, &item_path, why,
                                  why_len))
                    return -2;
            }
            return s_check_unique (list, *count, sizeof (char *), 0, path,
                                   why, why_len);
        }
        case S_MAP: {
            proto_kv_t *pairs = *S_MEMBER (item, field->offset, proto_kv_t *);
            if ((int64_t) *count > field->max || (*count > 0 && !pairs)) {
                s_fail (why, why_len, path, "%zu entries (at most %" PRId64
                        ")", *count, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_text (pairs [index].key, field->key_text,
                                  &item_path, why, why_len)
                ||  s_check_text (pairs [index].value, field->text,
                                  &item_path, why, why_len))
                    return -2;
            }
            return s_check_unique (pairs, *count, sizeof (proto_kv_t),
                                   offsetof (proto_kv_t, key), path, why,
                                   why_len);
        }
        case S_STRUCTS: {
            const s_schema_t *schema = field->schema;
            const char *array = *S_MEMBER (item, field->offset, char *);
            if ((int64_t) *count > field->max || (*count > 0 && !array)) {
                s_fail (why, why_len, path, "%zu entries (at most %" PRId64
                        ")", *count, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_struct (array + index * schema->size, schema,
                                    &item_path, why, why_len))
                    return -2;
            }
            return s_check_unique (array, *count, schema->size,
                                   schema->name_offset, path, why, why_len);
        }
    }
    if (number < field->min || number > field->max) {
        s_fail (why, why_len, path, "%" PRId64 " is out of range %" PRId64
                "..%" PRId64, number, field->min, field->max);
        return -2;
    }
    return 0;
}

static int
s_check_struct (const void *item, const s_schema_t *schema,
                const s_path_t *path, char *why, size_t why_len)
{
    for (size_t index = 0; index < schema->count; index++) {
        const s_field_t *field = &schema->fields [index];
        if (!s_present (item, field))
            continue;
        s_path_t field_path = { path, field->key, field->key_len, 0, false };
        if (s_check_field (item, field, &field_path, why, why_len))
            return -2;
    }
    return 0;
}

static void s_write_struct (pw_t *writer, const void *item,
                            const s_schema_t *schema);

static void
s_write_field (pw_t *writer, const void *item, const s_field_t *field)
{
    size_t count = field->count_offset
                 ? *S_MEMBER (item, field->count_offset, size_t) : 0;
    switch (field->kind) {
        case S_STR:
            pw_str (writer, *S_MEMBER (item, field->offset, char *));
            break;
        case S_U32:
            pw_int (writer, *S_MEMBER (item, field->offset, uint32_t));
            break;
        case S_I32:
            pw_int (writer, *S_MEMBER (item, field->offset, int32_t));
            break;
        case S_U64:
            pw_int (writer,
                    (int64_t) *S_MEMBER (item, field->offset, uint64_t));
            break;
        case S_I64:
            pw_int (writer, *S_MEMBER (item, field->offset, int64_t));
            break;
        case S_BOOL:
            pw_bool (writer, *S_MEMBER (item, field->offset, bool));
            break;
        case S_KIND:
            pw_str (writer, *S_MEMBER (item, field->offset, bool)
                            ? "modify" : "query");
            break;
        case S_LIST: {
            char **list = *S_MEMBER (item, field->offset, char **);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                pw_str (writer, list [index]);
            break;
        }
        case S_MAP: {
            proto_kv_t *pairs = *S_MEMBER (item, field->offset, proto_kv_t *);
            pw_map (writer, count);
            for (size_t index = 0; index < count; index++) {
                pw_str (writer, pairs [index].key);
                pw_str (writer, pairs [index].value);
            }
            break;
        }
        case S_BIN:
            pw_bin (writer, *S_MEMBER (item, field->offset, uint8_t *), count);
            break;
        case S_ACKS: {
            const proto_ack_t *acks = *S_MEMBER (item, field->offset,
                                                 proto_ack_t *);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++) {
                pw_array (writer, 3);
                pw_str (writer, acks [index].job);
                pw_int (writer, acks [index].step);
                pw_int (writer, acks [index].attempt);
            }
            break;
        }
        case S_RESULTS: {
            const proto_msg_t *entries = *S_MEMBER (item, field->offset,
                                                    proto_msg_t *);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                s_write_struct (writer, &entries [index], field->schema);
            break;
        }
        case S_STRUCTS: {
            const char *array = *S_MEMBER (item, field->offset, char *);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                s_write_struct (writer, array + index * field->schema->size,
                                field->schema);
            break;
        }
    }
}

//  Writes the present fields of ITEM as map pairs (no map header).
static void
s_write_pairs (pw_t *writer, const void *item, const s_schema_t *schema)
{
    for (size_t index = 0; index < schema->count; index++) {
        const s_field_t *field = &schema->fields [index];
        if (!s_present (item, field))
            continue;
        pw_str (writer, field->key);
        s_write_field (writer, item, field);
    }
}

static size_t
s_present_count (const void *item, const s_schema_t *schema)
{
    size_t count = 0;
    for (size_t index = 0; index < schema->count; index++)
        if (s_present (item, &schema->fields [index]))
            count++;
    return count;
}

static void
s_write_struct (pw_t *writer, const void *item, const s_schema_t *schema)
{
    pw_map (writer, s_present_count (item, schema));
    s_write_pairs (writer, item, schema);
}

int
proto_msg_encode (const proto_msg_t *msg, pw_t *writer)
{
    assert (writer);
    if (!msg)
        return PROTO_EMALFORMED;
    const s_message_t *message = s_message_for (msg->type);
    if (!message)
        return PROTO_EMALFORMED;
    char why [256];
    s_path_t path = { NULL, message->name, message->name_len, 0, false };
    if (s_check_struct (msg, &message->schema, &path, why, sizeof why))
        return PROTO_EMALFORMED;
    //  Message-level rules use no wire values (those of nested structs do)
    if (message->schema.check
        && message->schema.check (msg, NULL, &path, why, sizeof why))
        return PROTO_EMALFORMED;
    pw_map (writer, 2 + s_present_count (msg, &message->schema));
    pw_str (writer, "v");
    pw_int (writer, PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, message->name);
    s_write_pairs (writer, msg, &message->schema);
    return PROTO_OK;
}

int
proto_result_ack_encode (const char *job, uint32_t step, uint32_t attempt,
                         pw_t *writer)
{
    assert (writer);
    //  The rules of s_result_ack_fields (S_JOB, S_STEP, S_ATTEMPT)
    if (!job || !job_id_valid (job) || step > JOB_MAX_STEPS - 1
        || attempt < 1 || attempt > PROTO_MAX_ATTEMPT)
        return PROTO_EMALFORMED;
    pw_map (writer, 5);
    pw_strn (writer, "v", 1);
    pw_int (writer, PROTO_VERSION);
    pw_strn (writer, "type", 4);
    pw_strn (writer, "result_ack", 10);
    pw_strn (writer, "job", 3);
    pw_str (writer, job);
    pw_strn (writer, "step", 4);
    pw_int (writer, step);
    pw_strn (writer, "attempt", 7);
    pw_int (writer, attempt);
    return PROTO_OK;
}

int
proto_result_acks_encode (const proto_ack_t *acks, size_t count,
                          pw_t *writer)
{
    assert (writer);
    //  The rules of s_result_acks_fields
    if (!acks || count < 1 || count > PROTO_MAX_ACKS)
        return PROTO_EMALFORMED;
    for (size_t index = 0; index < count; index++)
        if (!acks [index].job || !job_id_valid (acks [index].job)
            || acks [index].step > JOB_MAX_STEPS - 1
            || acks [index].attempt < 1
            || acks [index].attempt > PROTO_MAX_ATTEMPT)
            return PROTO_EMALFORMED;
    pw_map (writer, 3);
    pw_strn (writer, "v", 1);
    pw_int (writer, PROTO_VERSION);
    pw_strn (writer, "type", 4);
    pw_strn (writer, "result_acks", 11);
    pw_strn (writer, "acks", 4);
    pw_array (writer, count);
    for (size_t index = 0; index < count; index++) {
        pw_array (writer, 3);
        pw_str (writer, acks [index].job);
        pw_int (writer, acks [index].step);
        pw_int (writer, acks [index].attempt);
    }
    return PROTO_OK;
}

int
proto_results_begin (const char *node, size_t count, pw_t *writer)
{
    assert (writer);
    if (!node || !name_valid (node) || count < 1 || count > PROTO_MAX_RESULTS)
        return PROTO_EMALFORMED;
    pw_map (writer, 4);
    pw_strn (writer, "v", 1);
    pw_int (writer, PROTO_VERSION);
    pw_strn (writer, "type", 4);
    pw_strn (writer, "results", 7);
    pw_strn (writer, "node", 4);
    pw_str (writer, node);
    pw_strn (writer, "results", 7);
    pw_array (writer, count);
    return PROTO_OK;
}

int
proto_results_entry_encode (const proto_msg_t *result, pw_t *writer)
{
    assert (writer);
    if (!result || result->type != PROTO_RESULT)
        return PROTO_EMALFORMED;
    char why [256];
    s_path_t path = { NULL, "results", 7, 0, false };
    if (s_check_struct (result, &s_result_entry_schema, &path, why,
                        sizeof why)
        || s_result_check (result, NULL, &path, why, sizeof why))
        return PROTO_EMALFORMED;
    s_write_struct (writer, result, &s_result_entry_schema);
    return PROTO_OK;
}

bool
proto_msg_has_feature (const proto_msg_t *msg, const char *feature)
{
    return proto_hello_has_feature (msg, feature);
}

bool
proto_hello_has_feature (const proto_msg_t *hello, const char *feature)
{
    for (size_t index = 0; hello && index < hello->feature_count; index++)
        if (strcmp (hello->features [index], feature) == 0)
            return true;
    return false;
}

//  ---------------------------------------------------------------------
//  Client requests. Each request type lists the keys it may carry besides
//  v, type and id. To add a request type, add its fields and one line to
//  s_requests.

typedef struct {
    const char *key;    //  Wire key
    pv_type_t type;     //  PV_STR, PV_INT, PV_BOOL, PV_MAP or PV_ARRAY
    bool required;      //  Must be present
    int64_t min;        //  Int: least value; string: fewest bytes
    int64_t max;        //  Int: greatest value; string: most bytes
} s_request_field_t;

typedef struct {
    const char *type;                   //  Request type
    const s_request_field_t *fields;    //  Its fields
    size_t count;                       //  How many
} s_request_t;

#define S_REQ_JOB { "job", PV_STR, true, 1, PROTO_MAX_TEXT }

static const s_request_field_t s_req_job_submit [] = {
    { "job", PV_MAP, true, 0, 0 },
};
static const s_request_field_t s_req_job [] = {
    S_REQ_JOB,
};
static const s_request_field_t s_req_job_list [] = {
    { "status", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "limit", PV_INT, false, 1, 10000 },
    { "schedule", PV_STR, false, 1, NAME_MAX_LEN },
    { "before", PV_STR, false, 1, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_job_cancel [] = {
    S_REQ_JOB,
    { "reason", PV_STR, false, 0, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_job_events [] = {
    S_REQ_JOB,
    { "after", PV_INT, false, 0, INT64_MAX },
};
static const s_request_field_t s_req_job_watch [] = {
    S_REQ_JOB,
    { "after", PV_INT, false, 0, INT64_MAX },
    { "timeout_ms", PV_INT, false, 0, 60000 },
};
static const s_request_field_t s_req_job_retry [] = {
    S_REQ_JOB,
    { "failed_only", PV_BOOL, false, 0, 0 },
    { "target", PV_STR, false, 1, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_dlq_list [] = {
    { "job", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "limit", PV_INT, false, 1, 10000 },
};
static const s_request_field_t s_req_dlq_entry [] = {
    { "entry", PV_STR, true, 1, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_dlq_purge [] = {
    { "entry", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "job", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "older_than", PV_STR, false, 1, 64 },
    { "all", PV_BOOL, false, 0, 0 },
};
static const s_request_field_t s_req_job_output [] = {
    S_REQ_JOB,
    { "node", PV_STR, true, 1, PROTO_MAX_TEXT },
    { "step", PV_INT, true, 0, JOB_MAX_STEPS - 1 },
    { "stream", PV_STR, false, 6, 6 },
    { "attempt", PV_INT, false, 1, PROTO_MAX_ATTEMPT },
    { "offset", PV_INT, false, 0, PROTO_MAX_STREAM },
    { "limit", PV_INT, false, 1, PROTO_MAX_PAGE },
};
static const s_request_field_t s_req_node [] = {
    { "node", PV_STR, true, 1, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_node_history [] = {
    { "node", PV_STR, true, 1, PROTO_MAX_TEXT },
    { "limit", PV_INT, false, 1, 1000 },
};
//  key.accept, key.reject, key.delete: exactly one of the two
static const s_request_field_t s_req_key [] = {
    { "key", PV_STR, false, 40, 40 },
    { "node", PV_STR, false, 1, PROTO_MAX_TEXT },
};

static const s_request_field_t s_req_schedule [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
};
static const s_request_field_t s_req_schedule_add [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
    { "cron", PV_STR, false, 1, CRON_MAX_LEN },
    { "every", PV_STR, false, 1, 64 },
    { "tz", PV_STR, false, 1, CRON_TZ_MAX_LEN },
    { "job", PV_MAP, true, 0, 0 },
    { "overlap", PV_STR, false, 1, 16 },
    { "catch_up", PV_STR, false, 1, 16 },
    { "catch_up_window", PV_STR, false, 1, 64 },
};

static const s_request_field_t s_req_token_add [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
    { "role", PV_STR, true, 1, 16 },
};
static const s_request_field_t s_req_token_revoke [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
};

#define S_REQUEST(type, fields) { type, fields, S_COUNT_OF (fields) }
#define S_REQUEST_BARE(type) { type, NULL, 0 }

static const s_request_t s_requests [] = {
    S_REQUEST ("job.submit", s_req_job_submit),
    S_REQUEST ("job.check", s_req_job_submit),
    S_REQUEST ("job.get", s_req_job),
    S_REQUEST ("job.progress", s_req_job),
    S_REQUEST ("job.watch", s_req_job_watch),
    S_REQUEST ("job.list", s_req_job_list),
    S_REQUEST ("job.cancel", s_req_job_cancel),
    S_REQUEST ("job.events", s_req_job_events),
    S_REQUEST ("job.delete", s_req_job),
    S_REQUEST ("job.output", s_req_job_output),
    S_REQUEST_BARE ("node.list"),
    S_REQUEST ("node.get", s_req_node),
    S_REQUEST_BARE ("status"),
    S_REQUEST ("node.drain", s_req_node),
    S_REQUEST ("node.resume", s_req_node),
    S_REQUEST_BARE ("broker.drain"),
    S_REQUEST_BARE ("broker.resume"),
    S_REQUEST_BARE ("key.list"),
    S_REQUEST_BARE ("relay.list"),
    S_REQUEST ("key.accept", s_req_key),
    S_REQUEST ("key.reject", s_req_key),
    S_REQUEST ("key.delete", s_req_key),
    S_REQUEST ("job.retry", s_req_job_retry),
    S_REQUEST ("dlq.list", s_req_dlq_list),
    S_REQUEST ("dlq.get", s_req_dlq_entry),
    S_REQUEST ("dlq.retry", s_req_dlq_entry),
    S_REQUEST ("dlq.purge", s_req_dlq_purge),
    S_REQUEST_BARE ("queue.stats"),
    S_REQUEST ("node.workers", s_req_node),
    S_REQUEST ("node.history", s_req_node_history),
    S_REQUEST_BARE ("metrics.get"),
    S_REQUEST ("schedule.add", s_req_schedule_add),
    S_REQUEST_BARE ("schedule.list"),
    S_REQUEST ("schedule.get", s_req_schedule),
    S_REQUEST ("schedule.pause", s_req_schedule),
    S_REQUEST ("schedule.resume", s_req_schedule),
    S_REQUEST ("schedule.delete", s_req_schedule),
    S_REQUEST ("schedule.run", s_req_schedule),
    S_REQUEST ("token.add", s_req_token_add),
    S_REQUEST_BARE ("token.list"),
    S_REQUEST_BARE ("whoami"),
    S_REQUEST ("token.revoke", s_req_token_revoke),
};

const char *
proto_request_type_at (size_t index)
{
    return index < S_COUNT_OF (s_requests) ? s_requests [index].type : NULL;
}

//  Is VALUE a client request id: a string of 1..PROTO_MAX_REQUEST_ID
//  bytes without NUL?
static bool
s_request_id_valid (const pv_t *value)
{
    size_t len = pv_size (value);
    const char *text = pv_str (value, NULL);
    return pv_type (value) == PV_STR && len >= 1
           && len <= PROTO_MAX_REQUEST_ID && !memchr (text, 0, len);
}

static int
s_request_field_check (const pv_t *value, const s_request_field_t *field,
                       const char *type, char *why, size_t why_len)
{
    pv_type_t actual = pv_type (value);
    if (actual != field->type) {
        s_format (why, why_len, "%s: %s: expected %s, got %s", type, field->key,
                  pv_type_name (field->type), pv_type_name (actual));
        return -2;
    }
    if (actual == PV_INT) {
        int64_t number = 0;
        pv_get_int (value, &number);
        if (number < field->min || number > field->max) {
            s_format (why, why_len, "%s: %s: %" PRId64 " is out of range %"
                      PRId64 "..%" PRId64, type, field->key, number,
                      field->min, field->max);
            return -2;
        }
    }
    if (actual == PV_STR) {
        size_t len = 0;
        const char *text = pv_str (value, &len);
        if ((int64_t) len < field->min || (int64_t) len > field->max) {
            s_format (why, why_len, "%s: %s: length %zu is out of range %"
                      PRId64 "..%" PRId64, type, field->key, len, field->min,
                      field->max);
            return -2;
        }
        if (len > 0 && memchr (text, 0, len)) {
            s_format (why, why_len, "%s: %s: contains a NUL byte", type,
                      field->key);
            return -2;
        }
    }
    return 0;
}

int
proto_request_decode (const void *data, size_t size, proto_request_t **req_p,
                      const char **code, char **id_p, char *why,
                      size_t why_len)
{
    assert (req_p);
    *req_p = NULL;
    if (id_p)
        *id_p = NULL;
    const char *error = PROTO_ERR_MALFORMED;
    char show [S_SHOW_MAX + 4];
    char *id = NULL;
    proto_request_t *req = NULL;
    pv_doc_t *doc = NULL;
    char reason [200];

    if (pv_doc_decode (data, size, &doc, reason, sizeof reason)) {
        s_format (why, why_len, "malformed frame: %s", reason);
        goto failed;
    }
    const pv_t *root = pv_doc_root (doc);
    if (pv_type (root) != PV_MAP) {
        s_format (why, why_len, "a request is a map, got %s",
                  pv_type_name (pv_type (root)));
        goto failed;
    }
    //  Take the id first, so that even a refusal can echo it
    const pv_t *id_value = pv_map_get (root, "id");
    if (s_request_id_valid (id_value)) {
        id = pv_strdup (id_value);
        if (!id) {
            error = PROTO_ERR_INTERNAL;
            s_format (why, why_len, "out of memory");
            goto failed;
        }
    }
    const pv_t *version = pv_map_get (root, "v");
    int64_t number = 0;
    if (!version || pv_get_int (version, &number) || number != PROTO_VERSION) {
        error = PROTO_ERR_VERSION;
        if (!version)
            s_format (why, why_len, "the request has no version 'v'; this "
                      "broker speaks version %d", PROTO_VERSION);
        else
        if (pv_type (version) != PV_INT)
            s_format (why, why_len, "v: expected int, got %s; this broker "
                      "speaks version %d", pv_type_name (pv_type (version)),
                      PROTO_VERSION);
        else
            s_format (why, why_len, "unsupported version %" PRId64
                      " (speaks %d)", number, PROTO_VERSION);
        goto failed;
    }
    const pv_t *type = pv_map_get (root, "type");
    const s_request_t *request = NULL;
    for (size_t index = 0; index < S_COUNT_OF (s_requests) && !request;
         index++)
        if (pv_str_eq (type, s_requests [index].type))
            request = &s_requests [index];
    if (!request) {
        error = PROTO_ERR_UNKNOWN_TYPE;
        size_t len = 0;
        const char *text = pv_str (type, &len);
        if (!type)
            s_format (why, why_len, "the request has no 'type'");
        else
        if (pv_type (type) != PV_STR)
            s_format (why, why_len, "type: expected string, got %s",
                      pv_type_name (pv_type (type)));
        else
            s_format (why, why_len, "unknown type '%s'",
                      s_show (text, len, show));
        goto failed;
    }
    error = PROTO_ERR_BAD_REQUEST;
    if (!id) {
        s_format (why, why_len, "id: required, a string of 1 to %d bytes",
                  PROTO_MAX_REQUEST_ID);
        goto failed;
    }
    for (size_t index = 0; index < pv_size (root); index++) {
        const pv_t *key = pv_map_key_at (root, index);
        bool known = pv_str_eq (key, "v") || pv_str_eq (key, "type")
                     || pv_str_eq (key, "id");
        for (size_t which = 0; which < request->count && !known; which++)
            known = pv_str_eq (key, request->fields [which].key);
        if (!known) {
            size_t len = 0;
            const char *text = pv_str (key, &len);
            s_format (why, why_len, "%s: unknown key '%s'", request->type,
                      s_show (text, len, show));
            goto failed;
        }
    }
    for (size_t which = 0; which < request->count; which++) {
        const s_request_field_t *field = &request->fields [which];
        const pv_t *value = pv_map_get (root, field->key);
        if (!value) {
            if (field->required) {
                s_format (why, why_len, "%s: %s: required", request->type,
                          field->key);
                goto failed;
            }
            continue;
        }
        if (s_request_field_check (value, field, request->type, why,
                                   why_len))
            goto failed;
    }
    req = calloc (1, sizeof *req);
    if (!req || !(req->type = strdup (request->type))) {
        error = PROTO_ERR_INTERNAL;
        s_format (why, why_len, "out of memory");
        goto failed;
    }
    req->id = id;
    req->body = root;
    req->doc = doc;
    *req_p = req;
    if (code)
        *code = NULL;
    return PROTO_OK;

failed:
    if (req)
        free (req->type);
    free (req);
    pv_doc_destroy (&doc);
    if (code)
        *code = error;
    if (id_p)
        *id_p = id;
    else
        free (id);
    return PROTO_EMALFORMED;
}

void
proto_request_destroy (proto_request_t **req_p)
{
    assert (req_p);
    proto_request_t *req = *req_p;
    if (!req)
        return;
    free (req->type);
    free (req->id);
    pv_doc_destroy (&req->doc);
    free (req);
    *req_p = NULL;
}

void
proto_request_begin (pw_t *writer, const char *type, const char *id,
                     size_t field_count)
{
    assert (writer);
    pw_map (writer, 3 + field_count);
    pw_str (writer, "v");
    pw_int (writer, PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, type);
    pw_str (writer, "id");
    pw_str (writer, id);
}

void
proto_reply_ok_begin (pw_t *writer, const char *id)
{
    assert (writer);
    pw_map (writer, 4);
    pw_str (writer, "v");
    pw_int (writer, PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, "ok");
    pw_str (writer, "id");
    pw_str (writer, id);
    pw_str (writer, "data");
}

void
proto_reply_error (pw_t *writer, const char *id, const char *code,
                   const char *message, char *const *details,
                   size_t detail_count)
{
    assert (writer);
    bool with_details = details && detail_count > 0;
    pw_map (writer, with_details ? 6 : 5);
    pw_str (writer, "v");
    pw_int (writer, PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, "error");
    pw_str (writer, "id");
    pw_str (writer, id);
    pw_str (writer, "code");
    pw_str (writer, code ? code : PROTO_ERR_INTERNAL);
    pw_str (writer, "message");
    pw_str (writer, message ? message : "");
    if (with_details) {
        pw_str (writer, "details");
        pw_array (writer, detail_count);
        for (size_t index = 0; index < detail_count; index++)
            pw_str (writer, details [index] ? details [index] : "");
    }
}
