/*  =========================================================================
    decode - agent messages from their bytes (part of proto)

    Two decodes under the same field tables (proto.c): the schema decode
    reads any message through a pv tree; the direct decode reads flat
    messages (nearly all a broker gets) straight from the bytes, and
    leaves the rest to the schema decode. A decoded message other than
    hello lives in one arena.
    =========================================================================
*/
#include "proto_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "job.h"

//  A decoded message other than hello is one allocation: the proto_msg_t,
//  then its strings and arrays, handed out in order (an arena); what does
//  not fit goes in further chunks, linked from the message. S_ARENA is the
//  arena of the decode under way on this thread, or NULL: then each
//  string and array is an allocation of its own, as in a hello (the
//  registry passes a hello's backends from message to message) and in
//  messages built by hand.
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

//  Reads a string VALUE under RULE into a fresh copy in *OUT.
static int
s_text_read (const pv_t *value, s_text_t rule, const s_path_t *path,
             char **out, char *why, size_t why_len)
{
    if (pv_type (value) != PV_STR) {
        proto_fail (why, why_len, path, "expected string, got %s",
                    pv_type_name (pv_type (value)));
        return -2;
    }
    size_t len = 0;
    const char *bytes = pv_str (value, &len);
    if (len > proto_text_max (rule)) {
        proto_fail (why, why_len, path, "longer than %zu bytes",
                    proto_text_max (rule));
        return -2;
    }
    if (len > 0 && memchr (bytes, 0, len)) {
        proto_fail (why, why_len, path, "contains a NUL byte");
        return -2;
    }
    char *text = (char *) s_alloc (len + 1, 1, false);
    if (!text) {
        proto_fail (why, why_len, path, "out of memory");
        return -2;
    }
    memcpy (text, bytes, len);
    text [len] = 0;
    if (proto_text_check (rule, text, len, path, why, why_len)) {
        s_release (text);
        return -2;
    }
    *out = text;
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
        proto_fail (why, why_len, path, "expected int, got %s",
                    pv_type_name (pv_type (value)));
        return -2;
    }
    if (number < field->min || number > field->max) {
        proto_fail (why, why_len, path, "%" PRId64 " is out of range %" PRId64
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
        proto_fail (why, why_len, path, "expected array, got %s",
                    pv_type_name (pv_type (value)));
        return -2;
    }
    *count = pv_size (value);
    if ((int64_t) *count > max) {
        proto_fail (why, why_len, path, "more than %" PRId64 " entries", max);
        return -2;
    }
    if ((int64_t) *count < min) {
        proto_fail (why, why_len, path, "at least %" PRId64 " %s needed", min,
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
        proto_fail (why, why_len, path, "out of memory");
        return -2;
    }
    *list_count = count;
    for (size_t index = 0; index < count; index++) {
        s_path_t item_path = { path, NULL, 0, index, false };
        if (s_text_read (pv_array_at (value, index), field->text, &item_path,
                         &(*list) [index], why, why_len))
            return -2;
    }
    return proto_check_unique (*list, count, sizeof (char *), 0, path, why,
                               why_len);
}

static int
s_decode_map (const pv_t *value, const s_field_t *field, void *item,
              const s_path_t *path, char *why, size_t why_len)
{
    if (pv_type (value) != PV_MAP) {
        proto_fail (why, why_len, path, "expected map, got %s",
                    pv_type_name (pv_type (value)));
        return -2;
    }
    size_t count = pv_size (value);
    if ((int64_t) count > field->max) {
        proto_fail (why, why_len, path, "more than %" PRId64 " entries",
                    field->max);
        return -2;
    }
    proto_kv_t **pairs = S_MEMBER (item, field->offset, proto_kv_t *);
    size_t *pair_count = S_MEMBER (item, field->count_offset, size_t);
    if (count == 0)
        return 0;
    *pairs = (proto_kv_t *) s_alloc (count * sizeof (proto_kv_t), 8, true);
    if (!*pairs) {
        proto_fail (why, why_len, path, "out of memory");
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
        const pv_t *item_value = pv_map_value_at (value, index);
        int64_t number = 0;
        if (field->numbers && pv_type (item_value) == PV_INT
            && pv_get_int (item_value, &number) == 0) {
            char text [24];
            int len = snprintf (text, sizeof text, "%" PRId64, number);
            char *copy = (char *) s_alloc ((size_t) len + 1, 1, false);
            if (!copy) {
                proto_fail (why, why_len, &item_path, "out of memory");
                return -2;
            }
            memcpy (copy, text, (size_t) len + 1);
            (*pairs) [index].value = copy;
            (*pairs) [index].number = true;
        }
        else
        if (s_text_read (item_value, field->text, &item_path,
                         &(*pairs) [index].value, why, why_len))
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
        proto_fail (why, why_len, path, "out of memory");
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
    return proto_check_unique (*array, count, schema->size, schema->name_offset,
                               path, why, why_len);
}

//  Longest job id an ack may name (job_id_valid says the rest)
#define S_ACK_JOB_MAX 63

//  Checks one [job, step, attempt] of a result_acks (WIDE: one [job,
//  step, attempt, stream, offset] of an output_acks); gives the job's
//  bytes, the step and the attempt, and when WIDE the stream (a
//  constant) and the offset into ACK.
static int
s_ack_read (const pv_t *entry, const s_path_t *path, bool wide,
            const char **job, size_t *job_len, proto_ack_t *ack, char *why,
            size_t why_len)
{
    char show [S_SHOW_MAX + 4];
    if (pv_type (entry) != PV_ARRAY || pv_size (entry) != (wide ? 5u : 3u)) {
        proto_fail (why, why_len, path, wide ? "expected [job, step, "
                    "attempt, stream, offset]" : "expected [job, step, "
                    "attempt]");
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
        proto_fail (why, why_len, path, "invalid job id '%s'",
                    *job ? proto_show (*job, *job_len, show) : "");
        return -2;
    }
    int64_t number [2];
    if (pv_get_int (pv_array_at (entry, 1), &number [0])
        || pv_get_int (pv_array_at (entry, 2), &number [1])
        || number [0] < 0 || number [0] > JOB_MAX_STEPS - 1
        || number [1] < 1 || number [1] > PROTO_MAX_ATTEMPT) {
        proto_fail (why, why_len, path, "step (0..%d) and attempt (1..%d) "
                    "expected", JOB_MAX_STEPS - 1, PROTO_MAX_ATTEMPT);
        return -2;
    }
    ack->step = (uint32_t) number [0];
    ack->attempt = (uint32_t) number [1];
    if (!wide)
        return 0;
    const pv_t *stream_value = pv_array_at (entry, 3);
    size_t stream_len = 0;
    const char *stream = pv_type (stream_value) == PV_STR
                             ? pv_str (stream_value, &stream_len)
                             : NULL;
    if (stream && stream_len == 6 && memcmp (stream, "stdout", 6) == 0)
        ack->stream = "stdout";
    else
    if (stream && stream_len == 6 && memcmp (stream, "stderr", 6) == 0)
        ack->stream = "stderr";
    else {
        proto_fail (why, why_len, path, "stream 'stdout' or 'stderr' "
                    "expected");
        return -2;
    }
    int64_t offset;
    if (pv_get_int (pv_array_at (entry, 4), &offset) || offset < 0
        || offset > PROTO_MAX_STREAM - 1) {
        proto_fail (why, why_len, path, "offset (0..%" PRId64 ") expected",
                    PROTO_MAX_STREAM - 1);
        return -2;
    }
    ack->offset = (uint64_t) offset;
    return 0;
}

//  result_acks' and output_acks' acks: checked whole first, then copied
//  into one block that holds the entries and, after them, their job ids.
static int
s_decode_acks (const pv_t *value, const s_field_t *field, void *item,
               const s_path_t *path, char *why, size_t why_len)
{
    size_t count;
    if (s_array_size (value, field->min, field->max, path, &count, why,
                      why_len))
        return -2;
    bool wide = field->text == S_TEXT_STREAM;
    size_t text_size = 0;
    for (size_t index = 0; index < count; index++) {
        s_path_t item_path = { path, NULL, 0, index, false };
        const char *job;
        size_t job_len;
        proto_ack_t ack;
        if (s_ack_read (pv_array_at (value, index), &item_path, wide, &job,
                        &job_len, &ack, why, why_len))
            return -2;
        text_size += job_len + 1;
    }
    proto_ack_t *acks = (proto_ack_t *) s_alloc (count * sizeof (proto_ack_t)
                                                 + text_size, 8, false);
    if (!acks) {
        proto_fail (why, why_len, path, "out of memory");
        return -2;
    }
    char *text = (char *) (acks + count);
    for (size_t index = 0; index < count; index++) {
        const char *job;
        size_t job_len;
        memset (&acks [index], 0, sizeof acks [index]);
        s_ack_read (pv_array_at (value, index), path, wide, &job, &job_len,
                    &acks [index], NULL, 0);
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
        proto_fail (why, why_len, path, "out of memory");
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
            proto_msg_free_members (entry);
        memset (entry, 0, sizeof *entry);
        size_t len = strlen (reason);
        entry->message = (char *) s_alloc (len + 1, 1, false);
        if (!entry->message) {
            proto_fail (why, why_len, path, "out of memory");
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
                proto_fail (why, why_len, path, "expected bool, got %s",
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
                proto_fail (why, why_len, path,
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
                proto_fail (why, why_len, path, "expected binary, got %s",
                            pv_type_name (pv_type (value)));
                return -2;
            }
            size_t len = 0;
            const char *bytes = pv_str (value, &len);
            if ((int64_t) len < field->min || (int64_t) len > field->max) {
                proto_fail (why, why_len, path, "%zu bytes (%" PRId64 "..%"
                            PRId64 ")", len, field->min, field->max);
                return -2;
            }
            uint8_t *copy = (uint8_t *) s_alloc (len ? len : 1, 1, false);
            if (!copy) {
                proto_fail (why, why_len, path, "out of memory");
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
        proto_fail (why, why_len, path, "expected map, got %s",
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
            proto_fail (why, why_len, path, "unknown key '%s'",
                        proto_show (key, key_len, show));
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
                proto_fail (why, why_len, &field_path, "required");
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
        proto_format (why, why_len, "expected a map, got %s",
                      pv_type_name (pv_type (root)));
        goto done;
    }
    const pv_t *version = pv_map_get (root, "v");
    int64_t number;
    if (!version) {
        proto_format (why, why_len, "v: required (protocol version, speaks "
                      "%d to %d)", PROTO_VERSION_MIN, PROTO_VERSION);
        goto done;
    }
    if (pv_get_int (version, &number)) {
        proto_format (why, why_len, "v: expected int, got %s",
                      pv_type_name (pv_type (version)));
        goto done;
    }
    if (!proto_version_spoken (number)) {
        proto_version_refusal (number, why, why_len);
        goto done;
    }
    const pv_t *type = pv_map_get (root, "type");
    if (!type) {
        proto_format (why, why_len, "type: required");
        goto done;
    }
    if (pv_type (type) != PV_STR) {
        proto_format (why, why_len, "type: expected string, got %s",
                      pv_type_name (pv_type (type)));
        goto done;
    }
    size_t type_len = 0;
    const char *type_text = pv_str (type, &type_len);
    const s_message_t *message = proto_message_named (type_text, type_len);
    if (!message) {
        proto_format (why, why_len, "unknown type '%s'",
                      proto_show (type_text, type_len, show));
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
        proto_format (why, why_len, "out of memory");
        goto done;
    }
    s_path_t path = { NULL, message->name, message->name_len, 0, false };
    int decoded = s_decode_fields (root, &message->schema, msg, &path, true,
                                   why, why_len);
    s_arena = NULL;
    if (decoded)
        goto done;
    msg->protocol = (int) number;
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
//  Results are nearly all the broker reads. The schema decode above
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
//  entry that breaks a rule, anything malformed) it declines and
//  proto_msg_decode gives the frame to the schema decode, which accepts
//  it or says why not: every error comes from one place. fuzz_proto checks on every input that the direct
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
                 || rule == S_TEXT_STREAM || rule == S_TEXT_TRACE;
    //  Rules that judge the text itself, beyond its length and UTF-8
    bool judged = named || rule == S_TEXT_FACT;
    if (s_read_str (reader, &bytes, &len) || len > proto_text_max (rule)
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
    if (judged && (strlen (text) != len
                   || proto_text_check (rule, text, len, &path, NULL, 0)))
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
    ||  s_read_int (&reader, &version) || !proto_version_spoken (version)
    ||  s_read_str (&reader, &key, &key_len) || key_len != 4
    ||  memcmp (key, "type", 4) != 0
    ||  s_read_str (&reader, &type_text, &type_len))
        return 1;
    const s_message_t *message = proto_message_named (type_text, type_len);
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
    msg->protocol = (int) version;
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
