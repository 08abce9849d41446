/*  =========================================================================
    conf - YAML documents as decoded values

    libyaml's event API is used rather than its document API because only
    events say whether a scalar was plain or tagged, and whether a node
    came from an alias: the document API resolves both away.

    msgpack needs a container's size before its items, but YAML tells it
    only at the container's end. So the events are first recorded in a flat
    list, in document order, with each container's count filled in when it
    closes; that list is already msgpack's order, and one pass writes it.
    The bytes then go through pv_doc_decode, the same strict decoder the
    wire uses, so a job file and a wire job are checked by one code path.
    =========================================================================
*/
#include "conf.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <yaml.h>

#include "names.h"
#include "pw.h"

#define CONF_MAX_BYTES (4 * 1024 * 1024)
#define CONF_MAX_DEPTH PV_MAX_DEPTH

#define TAG_PREFIX "tag:yaml.org,2002:"

typedef enum {
    S_MAP,
    S_ARRAY,
    S_STR,
    S_INT,
    S_BOOL,
    S_NIL,
    S_FLOAT
} s_kind_t;

//  One recorded value, in document order.
typedef struct {
    s_kind_t kind;      //  What to write
    uint32_t line;      //  Where it starts (1-based), for messages
    uint32_t column;
    union {
        size_t count;   //  S_MAP: pairs; S_ARRAY: items
        int64_t integer;
        double real;
        bool flag;
    } u;
    size_t offset;      //  S_STR: text in the arena
    size_t length;      //  S_STR: its length
} s_entry_t;

//  An open container.
typedef struct {
    size_t entry;       //  Its entry
    bool is_map;        //  Mapping (keys and values alternate)
    size_t children;    //  Values recorded inside it so far
    size_t *keys;       //  Mapping: entry index of each key
    size_t key_count;
    size_t key_cap;
} s_frame_t;

typedef struct {
    s_entry_t *entries;
    size_t entry_count;
    size_t entry_cap;
    char *arena;        //  Text of every string, back to back
    size_t arena_size;
    size_t arena_cap;
    s_frame_t stack [CONF_MAX_DEPTH];
    size_t depth;
    char *err;
    size_t err_len;
} s_builder_t;

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  An error at LINE and COLUMN (1-based). Always returns -1.
static int
s_fail (s_builder_t *self, size_t line, size_t column, const char *format,
        ...)
{
    if (!self->err || self->err_len == 0)
        return -1;
    int used = snprintf (self->err, self->err_len, "line %zu, column %zu: ",
                         line, column);
    if (used >= 0 && (size_t) used < self->err_len) {
        va_list args;
        va_start (args, format);
        vsnprintf (self->err + used, self->err_len - (size_t) used, format,
                   args);
        va_end (args);
    }
    return -1;
}

//  The short form of a tag for messages ("!!int" for the standard ones)
//  in BUF of NAME_SHOW_LEN bytes.
static const char *
s_tag_show (const char *tag, char *buf)
{
    //  libyaml decodes %-escapes in tags, so a tag may hold any byte
    if (strncmp (tag, TAG_PREFIX, strlen (TAG_PREFIX)) == 0) {
        const char *rest = tag + strlen (TAG_PREFIX);
        memcpy (buf, "!!", 2);
        name_show (rest, strlen (rest), buf + 2, NAME_SHOW_LEN - 2);
        return buf;
    }
    return name_show (tag, strlen (tag), buf, NAME_SHOW_LEN);
}

//  The standard name of TAG ("str", "int", ...), "" for the non-specific
//  tag "!", or NULL for any other tag.
static const char *
s_tag_kind (const char *tag)
{
    static const char *known [] = {"str",   "int", "bool", "null",
                                   "float", "map", "seq"};
    if (strcmp (tag, "!") == 0)
        return "";
    if (strncmp (tag, TAG_PREFIX, strlen (TAG_PREFIX)) != 0)
        return NULL;
    const char *rest = tag + strlen (TAG_PREFIX);
    for (size_t i = 0; i < sizeof (known) / sizeof (known [0]); i++)
        if (strcmp (rest, known [i]) == 0)
            return known [i];
    return NULL;
}

static bool
s_text_is (const char *text, size_t len, const char *const *words)
{
    for (; *words; words++)
        if (strlen (*words) == len && memcmp (*words, text, len) == 0)
            return true;
    return false;
}

static const char *const s_null_words [] = {"", "~", "null", "Null", "NULL",
                                            NULL};
static const char *const s_true_words [] = {"true", "True", "TRUE", NULL};
static const char *const s_false_words [] = {"false", "False", "FALSE",
                                             NULL};

//  Reads a decimal integer [-+]?[0-9]+. Returns 1 when TEXT has that
//  form and fits int64_t, 0 when it is not of that form, -1 when it has the
//  form but overflows.
static int
s_read_int (const char *text, size_t len, int64_t *out)
{
    size_t i = 0;
    bool negative = false;
    if (len > 0 && (text [0] == '-' || text [0] == '+')) {
        negative = text [0] == '-';
        i = 1;
    }
    if (i == len)
        return 0;
    uint64_t magnitude = 0;
    bool overflow = false;
    for (; i < len; i++) {
        if (text [i] < '0' || text [i] > '9')
            return 0;
        unsigned digit = (unsigned) (text [i] - '0');
        if (magnitude > (UINT64_MAX - digit) / 10)
            overflow = true;
        else
            magnitude = magnitude * 10 + digit;
    }
    uint64_t limit = negative ? (uint64_t) INT64_MAX + 1 : INT64_MAX;
    if (overflow || magnitude > limit)
        return -1;
    if (negative)
        *out = magnitude == (uint64_t) INT64_MAX + 1
                   ? INT64_MIN
                   : -(int64_t) magnitude;
    else
        *out = (int64_t) magnitude;
    return 1;
}

//  Reads a YAML float (decimal, or .inf/.nan forms). Returns 0 or -1.
static int
s_read_float (const char *text, size_t len, double *out)
{
    static const char *const inf_words [] = {".inf", ".Inf", ".INF", "+.inf",
                                             "+.Inf", "+.INF", NULL};
    static const char *const minus_inf_words [] = {"-.inf", "-.Inf", "-.INF",
                                                   NULL};
    static const char *const nan_words [] = {".nan", ".NaN", ".NAN", NULL};
    if (s_text_is (text, len, inf_words))
        *out = HUGE_VAL;
    else
    if (s_text_is (text, len, minus_inf_words))
        *out = -HUGE_VAL;
    else
    if (s_text_is (text, len, nan_words))
        *out = NAN;
    else {
        //  strtod would also take "inf", "nan" and hex: allow only the
        //  characters of a decimal number, then let strtod check the form
        if (len == 0 || len > 64 || memchr (text, '\0', len))
            return -1;
        char buf [65];
        memcpy (buf, text, len);
        buf [len] = '\0';
        size_t digits = 0;
        for (size_t i = 0; i < len; i++) {
            char c = buf [i];
            if (c >= '0' && c <= '9')
                digits++;
            else
            if (!(c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+'))
                return -1;
        }
        char *end = NULL;
        errno = 0;
        double value = strtod (buf, &end);
        if (digits == 0 || end != buf + len || errno == ERANGE)
            return -1;
        *out = value;
    }
    return 0;
}

//  Appends a new entry at LINE, COLUMN; returns its index or -1 (out of
//  memory).
static ssize_t
s_push_entry (s_builder_t *self, s_kind_t kind, size_t line, size_t column)
{
    if (self->entry_count == self->entry_cap) {
        size_t cap = self->entry_cap ? self->entry_cap * 2 : 64;
        s_entry_t *grown = realloc (self->entries, cap * sizeof (s_entry_t));
        if (!grown)
            return -1;
        self->entries = grown;
        self->entry_cap = cap;
    }
    s_entry_t *entry = &self->entries [self->entry_count];
    memset (entry, 0, sizeof (*entry));
    entry->kind = kind;
    entry->line = (uint32_t) line;
    entry->column = (uint32_t) column;
    return (ssize_t) self->entry_count++;
}

static int
s_store_text (s_builder_t *self, s_entry_t *entry, const char *text,
              size_t len)
{
    //  Allocated on the first string, even an empty one: offsets into a
    //  NULL arena would be undefined
    if (!self->arena || self->arena_size + len > self->arena_cap) {
        size_t cap = self->arena_cap ? self->arena_cap : 4096;
        while (cap < self->arena_size + len)
            cap *= 2;
        char *grown = realloc (self->arena, cap);
        if (!grown)
            return -1;
        self->arena = grown;
        self->arena_cap = cap;
    }
    if (len > 0)
        memcpy (self->arena + self->arena_size, text, len);
    entry->offset = self->arena_size;
    entry->length = len;
    self->arena_size += len;
    return 0;
}

//  True when the next value recorded in the innermost container is a key.
static bool
s_expects_key (const s_builder_t *self)
{
    if (self->depth == 0)
        return false;
    const s_frame_t *frame = &self->stack [self->depth - 1];
    return frame->is_map && frame->children % 2 == 0;
}

//  Counts a new value (entry INDEX) in the innermost container.
static int
s_count_child (s_builder_t *self, size_t index)
{
    if (self->depth == 0)
        return 0;
    s_frame_t *frame = &self->stack [self->depth - 1];
    if (frame->is_map && frame->children % 2 == 0) {
        if (frame->key_count == frame->key_cap) {
            size_t cap = frame->key_cap ? frame->key_cap * 2 : 8;
            size_t *grown = realloc (frame->keys, cap * sizeof (size_t));
            if (!grown)
                return -1;
            frame->keys = grown;
            frame->key_cap = cap;
        }
        frame->keys [frame->key_count++] = index;
    }
    frame->children++;
    return 0;
}

//  Records one scalar event.
static int
s_on_scalar (s_builder_t *self, const yaml_event_t *event)
{
    char show [NAME_SHOW_LEN];
    char tag_show [NAME_SHOW_LEN];
    const char *text = (const char *) event->data.scalar.value;
    size_t len = event->data.scalar.length;
    const char *tag = (const char *) event->data.scalar.tag;
    bool plain = event->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    size_t line = event->start_mark.line + 1;
    size_t column = event->start_mark.column + 1;

    if (event->data.scalar.anchor)
        return s_fail (self, line, column,
                       "anchors and aliases are not allowed");
    //  KIND: NULL untagged, "" the non-specific tag "!", else a standard tag
    const char *kind = NULL;
    if (tag) {
        kind = s_tag_kind (tag);
        if (!kind)
            return s_fail (self, line, column,
                           "tag '%s' is not allowed (only !!str, !!int, "
                           "!!float, !!bool, !!null, !!map, !!seq)",
                           s_tag_show (tag, tag_show));
        if (strcmp (kind, "map") == 0 || strcmp (kind, "seq") == 0)
            return s_fail (self, line, column,
                           "tag '%s' does not fit a scalar",
                           s_tag_show (tag, tag_show));
    }
    bool is_key = s_expects_key (self);
    s_kind_t result = S_STR;
    int64_t integer = 0;
    double real = 0;
    bool flag = false;
    if (is_key) {
        //  Keys are always strings (pv maps have string keys)
        if (kind && *kind && strcmp (kind, "str") != 0)
            return s_fail (self, line, column,
                           "a mapping key must be a string, not '%s'",
                           s_tag_show (tag, tag_show));
    }
    else
    if (!kind && plain) {
        //  Implicit typing of plain scalars (YAML 1.2 core schema, less
        //  floats: "1.10" stays the text "1.10")
        int rc;
        if (s_text_is (text, len, s_null_words))
            result = S_NIL;
        else
        if (s_text_is (text, len, s_true_words))
            result = S_BOOL, flag = true;
        else
        if (s_text_is (text, len, s_false_words))
            result = S_BOOL, flag = false;
        else
        if ((rc = s_read_int (text, len, &integer)) == 1)
            result = S_INT;
        else
        if (rc == -1)
            return s_fail (self, line, column,
                           "integer '%s' is out of range (quote it to keep "
                           "it as text)",
                           name_show (text, len, show, sizeof (show)));
    }
    else
    if (kind && strcmp (kind, "int") == 0) {
        int rc = s_read_int (text, len, &integer);
        if (rc != 1)
            return s_fail (self, line, column, "'%s' is %s",
                           name_show (text, len, show, sizeof (show)),
                           rc == 0 ? "not an integer" : "out of range");
        result = S_INT;
    }
    else
    if (kind && strcmp (kind, "bool") == 0) {
        if (s_text_is (text, len, s_true_words))
            flag = true;
        else
        if (!s_text_is (text, len, s_false_words))
            return s_fail (self, line, column, "'%s' is not true or false",
                           name_show (text, len, show, sizeof (show)));
        result = S_BOOL;
    }
    else
    if (kind && strcmp (kind, "null") == 0) {
        if (!s_text_is (text, len, s_null_words))
            return s_fail (self, line, column, "'%s' is not null",
                           name_show (text, len, show, sizeof (show)));
        result = S_NIL;
    }
    else
    if (kind && strcmp (kind, "float") == 0) {
        if (s_read_float (text, len, &real) != 0)
            return s_fail (self, line, column, "'%s' is not a number",
                           name_show (text, len, show, sizeof (show)));
        result = S_FLOAT;
    }
    ssize_t index = s_push_entry (self, result, line, column);
    if (index < 0)
        return s_fail (self, line, column, "out of memory");
    s_entry_t *entry = &self->entries [index];
    if (result == S_INT)
        entry->u.integer = integer;
    else
    if (result == S_BOOL)
        entry->u.flag = flag;
    else
    if (result == S_FLOAT)
        entry->u.real = real;
    else
    if (result == S_STR && s_store_text (self, entry, text, len) != 0)
        return s_fail (self, line, column, "out of memory");
    if (s_count_child (self, (size_t) index) != 0)
        return s_fail (self, line, column, "out of memory");
    return 0;
}

//  Records the start of a mapping (IS_MAP) or a sequence.
static int
s_on_start (s_builder_t *self, const yaml_event_t *event, bool is_map)
{
    char tag_show [NAME_SHOW_LEN];
    const yaml_char_t *anchor = is_map ? event->data.mapping_start.anchor
                                       : event->data.sequence_start.anchor;
    const char *tag = is_map ? (const char *) event->data.mapping_start.tag
                             : (const char *) event->data.sequence_start.tag;
    size_t line = event->start_mark.line + 1;
    size_t column = event->start_mark.column + 1;
    const char *what = is_map ? "mapping" : "sequence";

    if (anchor)
        return s_fail (self, line, column,
                       "anchors and aliases are not allowed");
    if (tag) {
        const char *kind = s_tag_kind (tag);
        if (!kind)
            return s_fail (self, line, column,
                           "tag '%s' is not allowed (only !!str, !!int, "
                           "!!float, !!bool, !!null, !!map, !!seq)",
                           s_tag_show (tag, tag_show));
        if (*kind && strcmp (kind, is_map ? "map" : "seq") != 0)
            return s_fail (self, line, column, "tag '%s' does not fit a %s",
                           s_tag_show (tag, tag_show), what);
    }
    if (s_expects_key (self))
        return s_fail (self, line, column,
                       "a mapping key must be a scalar, not a %s", what);
    if (self->depth == CONF_MAX_DEPTH)
        return s_fail (self, line, column, "nesting deeper than %d levels",
                       CONF_MAX_DEPTH);
    ssize_t index = s_push_entry (self, is_map ? S_MAP : S_ARRAY, line,
                                  column);
    if (index < 0 || s_count_child (self, (size_t) index) != 0)
        return s_fail (self, line, column, "out of memory");
    s_frame_t *frame = &self->stack [self->depth++];
    memset (frame, 0, sizeof (*frame));
    frame->entry = (size_t) index;
    frame->is_map = is_map;
    return 0;
}

typedef struct {
    const char *text;
    size_t len;
    size_t index;       //  Entry index, which is document order
} s_key_ref_t;

static int
s_compare_keys (const void *a, const void *b)
{
    const s_key_ref_t *left = a;
    const s_key_ref_t *right = b;
    size_t common = left->len < right->len ? left->len : right->len;
    int rc = common ? memcmp (left->text, right->text, common) : 0;
    if (rc == 0 && left->len != right->len)
        rc = left->len < right->len ? -1 : 1;
    if (rc == 0 && left->index != right->index)
        rc = left->index < right->index ? -1 : 1;
    return rc;
}

//  Finds the first repeated key of FRAME in document order and reports it
//  with the place of its first use.
static int
s_check_duplicates (s_builder_t *self, const s_frame_t *frame)
{
    if (frame->key_count < 2)
        return 0;
    s_key_ref_t *refs = malloc (frame->key_count * sizeof (s_key_ref_t));
    if (!refs) {
        const s_entry_t *entry = &self->entries [frame->entry];
        return s_fail (self, entry->line, entry->column, "out of memory");
    }
    for (size_t i = 0; i < frame->key_count; i++) {
        const s_entry_t *key = &self->entries [frame->keys [i]];
        refs [i].text = self->arena + key->offset;
        refs [i].len = key->length;
        refs [i].index = frame->keys [i];
    }
    qsort (refs, frame->key_count, sizeof (s_key_ref_t), s_compare_keys);
    size_t group = 0;             //  First ref of the current run of equals
    size_t repeat = SIZE_MAX;     //  Earliest repeated key, entry index
    size_t original = SIZE_MAX;   //  Its first use, entry index
    for (size_t i = 1; i < frame->key_count; i++) {
        if (refs [i].len != refs [group].len
            || memcmp (refs [i].text, refs [group].text, refs [i].len) != 0) {
            group = i;
            continue;
        }
        if (refs [i].index < repeat) {
            repeat = refs [i].index;
            original = refs [group].index;
        }
    }
    free (refs);
    if (repeat == SIZE_MAX)
        return 0;
    char show [NAME_SHOW_LEN];
    const s_entry_t *key = &self->entries [repeat];
    const s_entry_t *first = &self->entries [original];
    return s_fail (self, key->line, key->column,
                   "duplicate key '%s' (first at line %u, column %u)",
                   name_show (self->arena + key->offset, key->length, show,
                              sizeof (show)),
                   (unsigned) first->line, (unsigned) first->column);
}

//  Closes the innermost container.
static int
s_on_end (s_builder_t *self)
{
    s_frame_t *frame = &self->stack [--self->depth];
    s_entry_t *entry = &self->entries [frame->entry];
    entry->u.count = frame->is_map ? frame->children / 2 : frame->children;
    int rc = frame->is_map ? s_check_duplicates (self, frame) : 0;
    free (frame->keys);
    frame->keys = NULL;
    return rc;
}

//  Turns a libyaml failure into "line L, column C: problem".
static int
s_on_parser_error (s_builder_t *self, const yaml_parser_t *parser,
                   const char *text, size_t len)
{
    const char *problem = parser->problem ? parser->problem : "syntax error";
    if (parser->error == YAML_MEMORY_ERROR) {
        s_err (self->err, self->err_len, "out of memory");
        return -1;
    }
    if (parser->error == YAML_READER_ERROR) {
        //  The reader knows only a byte offset
        size_t line = 1;
        size_t column = 1;
        size_t offset = parser->problem_offset < len ? parser->problem_offset
                                                     : len;
        for (size_t i = 0; i < offset; i++) {
            if (text [i] == '\n')
                line++, column = 1;
            else
                column++;
        }
        if (parser->problem_value >= 0)
            return s_fail (self, line, column, "%s (byte 0x%02x)", problem,
                           (unsigned) parser->problem_value);
        return s_fail (self, line, column, "%s", problem);
    }
    size_t line = parser->problem_mark.line + 1;
    size_t column = parser->problem_mark.column + 1;
    if (parser->context)
        return s_fail (self, line, column, "%s (%s at line %zu, column %zu)",
                       problem, parser->context,
                       parser->context_mark.line + 1,
                       parser->context_mark.column + 1);
    return s_fail (self, line, column, "%s", problem);
}

//  Writes the recorded values as msgpack and decodes them into *DOC_P.
static int
s_finish (s_builder_t *self, pv_doc_t **doc_p)
{
    pw_t *writer = pw_new ();
    if (!writer) {
        s_err (self->err, self->err_len, "out of memory");
        return -1;
    }
    bool empty = self->entry_count == 0
              || (self->entry_count == 1 && self->entries [0].kind == S_NIL);
    if (empty)
        pw_map (writer, 0);     //  An empty document is an empty map
    for (size_t i = 0; !empty && i < self->entry_count; i++) {
        const s_entry_t *entry = &self->entries [i];
        switch (entry->kind) {
        case S_MAP:
            pw_map (writer, entry->u.count);
            break;
        case S_ARRAY:
            pw_array (writer, entry->u.count);
            break;
        case S_STR:
            pw_strn (writer, self->arena + entry->offset, entry->length);
            break;
        case S_INT:
            pw_int (writer, entry->u.integer);
            break;
        case S_BOOL:
            pw_bool (writer, entry->u.flag);
            break;
        case S_NIL:
            pw_nil (writer);
            break;
        case S_FLOAT:
            pw_float (writer, entry->u.real);
            break;
        }
    }
    char why [256] = "";
    int rc = pv_doc_decode (pw_data (writer), pw_size (writer), doc_p, why,
                            sizeof (why));
    pw_destroy (&writer);
    if (rc != 0) {
        s_err (self->err, self->err_len, "document refused: %s", why);
        return -1;
    }
    return 0;
}

static void
s_builder_clear (s_builder_t *self)
{
    while (self->depth > 0)
        free (self->stack [--self->depth].keys);
    free (self->entries);
    free (self->arena);
}

int
conf_parse (const char *text, size_t len, pv_doc_t **doc_p, char *err,
            size_t err_len)
{
    *doc_p = NULL;
    if (err && err_len > 0)
        err [0] = '\0';
    if (len > CONF_MAX_BYTES) {
        s_err (err, err_len, "document is larger than 4 MiB (%zu bytes)",
               len);
        return -1;
    }
    if (!text)
        text = "", len = 0;
    yaml_parser_t parser;
    if (!yaml_parser_initialize (&parser)) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string (&parser, (const unsigned char *) text,
                                  len);
    s_builder_t builder;
    memset (&builder, 0, sizeof (builder));
    builder.err = err;
    builder.err_len = err_len;

    int rc = 0;
    int documents = 0;
    bool done = false;
    while (rc == 0 && !done) {
        yaml_event_t event;
        if (!yaml_parser_parse (&parser, &event)) {
            rc = s_on_parser_error (&builder, &parser, text, len);
            break;
        }
        switch (event.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++documents > 1)
                rc = s_fail (&builder, event.start_mark.line + 1,
                             event.start_mark.column + 1,
                             "only one document is allowed");
            break;
        case YAML_ALIAS_EVENT:
            rc = s_fail (&builder, event.start_mark.line + 1,
                         event.start_mark.column + 1,
                         "anchors and aliases are not allowed");
            break;
        case YAML_SCALAR_EVENT:
            rc = s_on_scalar (&builder, &event);
            break;
        case YAML_SEQUENCE_START_EVENT:
            rc = s_on_start (&builder, &event, false);
            break;
        case YAML_MAPPING_START_EVENT:
            rc = s_on_start (&builder, &event, true);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            rc = s_on_end (&builder);
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete (&event);
    }
    yaml_parser_delete (&parser);
    if (rc == 0)
        rc = s_finish (&builder, doc_p);
    s_builder_clear (&builder);
    return rc;
}

int
conf_load_file (const char *path, pv_doc_t **doc_p, char *err,
                size_t err_len)
{
    char reason [512] = "";
    char errno_buf [128];
    *doc_p = NULL;
    FILE *file = fopen (path, "rb");
    if (!file) {
        s_err (err, err_len, "%s: %s", path,
               strerror_r (errno, errno_buf, sizeof (errno_buf)));
        return -1;
    }
    struct stat st;
    if (fstat (fileno (file), &st) != 0 || !S_ISREG (st.st_mode)) {
        s_err (err, err_len, "%s: not a regular file", path);
        fclose (file);
        return -1;
    }
    if (st.st_size > CONF_MAX_BYTES) {
        s_err (err, err_len, "%s: larger than 4 MiB", path);
        fclose (file);
        return -1;
    }
    //  Read one byte past the limit, in case the file grew since fstat
    size_t cap = (size_t) st.st_size + 1;
    char *text = malloc (cap);
    size_t len = 0;
    int rc = 0;
    while (text) {
        len += fread (text + len, 1, cap - len, file);
        if (len < cap || cap > CONF_MAX_BYTES)
            break;
        size_t grown_cap = cap * 2 > CONF_MAX_BYTES + 1 ? CONF_MAX_BYTES + 1
                                                        : cap * 2;
        char *grown = realloc (text, grown_cap);
        if (!grown) {
            free (text);
            text = NULL;
        }
        else {
            text = grown;
            cap = grown_cap;
        }
    }
    if (!text) {
        s_err (err, err_len, "%s: out of memory", path);
        rc = -1;
    }
    else
    if (ferror (file)) {
        s_err (err, err_len, "%s: %s", path,
               strerror_r (errno, errno_buf, sizeof (errno_buf)));
        rc = -1;
    }
    else
    if (len > CONF_MAX_BYTES) {
        s_err (err, err_len, "%s: larger than 4 MiB", path);
        rc = -1;
    }
    else
    if (conf_parse (text, len, doc_p, reason, sizeof (reason)) != 0) {
        s_err (err, err_len, "%s: %s", path, reason);
        rc = -1;
    }
    free (text);
    fclose (file);
    return rc;
}

//  ---------------------------------------------------------------------
//  Typed reads for config readers

int
conf_get_str (const pv_t *map, const char *key, char **out, char *err,
              size_t err_len)
{
    const pv_t *value = pv_map_get (map, key);
    if (!value)
        return 0;
    if (pv_type (value) != PV_STR) {
        s_err (err, err_len, "%s: expected a string, got %s", key,
               pv_type_name (pv_type (value)));
        return -1;
    }
    char *copy = pv_strdup (value);
    if (!copy) {
        s_err (err, err_len, "%s: a string may not hold a NUL byte", key);
        return -1;
    }
    free (*out);
    *out = copy;
    return 0;
}

int
conf_get_int (const pv_t *map, const char *key, int64_t *out, char *err,
              size_t err_len)
{
    const pv_t *value = pv_map_get (map, key);
    if (!value)
        return 0;
    if (pv_type (value) != PV_INT || pv_get_int (value, out) != 0) {
        s_err (err, err_len, "%s: expected an integer, got %s", key,
               pv_type_name (pv_type (value)));
        return -1;
    }
    return 0;
}

int
conf_size_parse (const char *text, uint64_t *bytes)
{
    if (!text || *text < '0' || *text > '9')
        return -1;
    uint64_t number = 0;
    const char *at = text;
    for (; *at >= '0' && *at <= '9'; at++) {
        if (number > (UINT64_MAX - 9) / 10)
            return -1;
        number = number * 10 + (uint64_t) (*at - '0');
    }
    static const struct {
        const char *units [3];
        int shift;
    } scales [] = {
        {{"", "B", NULL}, 0},
        {{"K", "KiB", "KB"}, 10},
        {{"M", "MiB", "MB"}, 20},
        {{"G", "GiB", "GB"}, 30},
        {{"T", "TiB", "TB"}, 40},
    };
    for (size_t scale = 0; scale < sizeof scales / sizeof scales [0]; scale++)
        for (size_t unit = 0; unit < 3 && scales [scale].units [unit]; unit++)
            if (strcasecmp (at, scales [scale].units [unit]) == 0) {
                int shift = scales [scale].shift;
                if (shift && number > (UINT64_MAX >> shift))
                    return -1;
                *bytes = number << shift;
                return 0;
            }
    return -1;
}

int
conf_get_size (const pv_t *map, const char *key, uint64_t *out, char *err,
               size_t err_len)
{
    const pv_t *value = pv_map_get (map, key);
    if (!value)
        return 0;
    int64_t number = 0;
    if (pv_type (value) == PV_INT && pv_get_int (value, &number) == 0
        && number >= 0) {
        *out = (uint64_t) number;
        return 0;
    }
    char *text = pv_type (value) == PV_STR ? pv_strdup (value) : NULL;
    int rc = text && conf_size_parse (text, out) == 0 ? 0 : -1;
    if (rc != 0)
        s_err (err, err_len, "%s: expected a size like 512MiB or 8GiB, got "
               "%s%s%s", key, text ? "'" : "", text ? text
                                         : pv_type_name (pv_type (value)),
               text ? "'" : "");
    free (text);
    return rc;
}

int
conf_get_bool (const pv_t *map, const char *key, bool *out, char *err,
               size_t err_len)
{
    const pv_t *value = pv_map_get (map, key);
    if (!value)
        return 0;
    if (pv_type (value) != PV_BOOL || pv_get_bool (value, out) != 0) {
        s_err (err, err_len, "%s: expected true or false, got %s", key,
               pv_type_name (pv_type (value)));
        return -1;
    }
    return 0;
}

int
conf_get_duration (const pv_t *map, const char *key, int64_t *ms_out,
                   char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    const pv_t *value = pv_map_get (map, key);
    if (!value)
        return 0;
    if (pv_type (value) != PV_STR) {
        s_err (err, err_len,
               "%s: expected a duration like 500ms, 10s, 5m or 1h30m, got %s",
               key, pv_type_name (pv_type (value)));
        return -1;
    }
    size_t len = 0;
    const char *text = pv_str (value, &len);
    char *copy = pv_strdup (value);
    int64_t ms = 0;
    int rc = copy ? duration_parse (copy, &ms) : -1;
    free (copy);
    if (rc != 0) {
        s_err (err, err_len,
               "%s: '%s' is not a duration (like 500ms, 10s, 5m or 1h30m; "
               "at most 30d)",
               key, name_show (text, len, show, sizeof (show)));
        return -1;
    }
    *ms_out = ms;
    return 0;
}

int
conf_check_keys (const pv_t *map, const char *const *known, char *err,
                 size_t err_len)
{
    char show [NAME_SHOW_LEN];
    if (pv_type (map) == PV_NIL)
        return 0;
    if (pv_type (map) != PV_MAP) {
        s_err (err, err_len, "expected a map, got %s",
               pv_type_name (pv_type (map)));
        return -1;
    }
    for (size_t i = 0; i < pv_size (map); i++) {
        const pv_t *key = pv_map_key_at (map, i);
        bool found = false;
        for (const char *const *name = known; *name && !found; name++)
            found = pv_str_eq (key, *name);
        if (found)
            continue;
        size_t len = 0;
        const char *text = pv_str (key, &len);
        if (!err || err_len == 0)
            return -1;
        int used = snprintf (err, err_len, "unknown key '%s' (known:",
                             name_show (text, len, show, sizeof (show)));
        for (const char *const *name = known;
             *name && used >= 0 && (size_t) used < err_len; name++)
            used += snprintf (err + used, err_len - (size_t) used, "%s %s",
                              name == known ? "" : ",", *name);
        if (used >= 0 && (size_t) used < err_len)
            snprintf (err + used, err_len - (size_t) used, ")");
        return -1;
    }
    return 0;
}

int
conf_get_string_maps (const pv_t *list, const char *name,
                      const char *const *fields, size_t required,
                      conf_item_fn *each, void *arg, char *err,
                      size_t err_len)
{
    char shape [256] = "{";
    size_t count = 0;
    for (; fields [count] && count < 8; count++)
        snprintf (shape + strlen (shape), sizeof shape - strlen (shape),
                  "%s%s", count ? ", " : "", fields [count]);
    assert (count > 0 && !fields [count] && required <= count);
    snprintf (shape + strlen (shape), sizeof shape - strlen (shape), "}");
    if (!list)
        return 0;
    if (pv_type (list) != PV_ARRAY) {
        s_err (err, err_len, "%s: expected a list of %s", name, shape);
        return -1;
    }
    for (size_t index = 0; index < pv_size (list); index++) {
        const pv_t *entry = pv_array_at (list, index);
        char why [600] = "";
        char *values [8] = {NULL};
        int rc = pv_type (entry) == PV_MAP ? 0 : -1;
        if (rc != 0)
            snprintf (why, sizeof why, "expected a map %s", shape);
        if (rc == 0)
            rc = conf_check_keys (entry, fields, why, sizeof why);
        for (size_t field = 0; rc == 0 && field < count; field++)
            rc = conf_get_str (entry, fields [field], &values [field], why,
                               sizeof why);
        bool missing = false;
        for (size_t field = 0; rc == 0 && field < required; field++)
            missing = missing || !values [field];
        if (missing) {
            //  "key and role are required", "a, b and c are required"
            why [0] = 0;
            for (size_t field = 0; field < required; field++)
                snprintf (why + strlen (why), sizeof why - strlen (why),
                          "%s%s", field == 0 ? ""
                                  : field + 1 == required ? " and " : ", ",
                          fields [field]);
            snprintf (why + strlen (why), sizeof why - strlen (why), " %s "
                      "required", required == 1 ? "is" : "are");
            rc = -1;
        }
        if (rc == 0)
            rc = each (arg, values, why, sizeof why);
        for (size_t field = 0; field < count; field++)
            free (values [field]);
        if (rc != 0) {
            s_err (err, err_len, "%s[%zu]: %s", name, index, why);
            return -1;
        }
    }
    return 0;
}

//  --print-config

//  True when ROOT sets KEY (dotted: nested maps).
static bool
s_file_sets (const pv_t *root, const char *key)
{
    if (!root)
        return false;
    char part [128];
    const char *rest = key;
    const pv_t *map = root;
    while (map && pv_type (map) == PV_MAP) {
        size_t len = strcspn (rest, ".");
        if (len >= sizeof part)
            return false;
        memcpy (part, rest, len);
        part [len] = 0;
        const pv_t *value = pv_map_get (map, part);
        if (!value)
            return false;
        if (!rest [len])
            return true;
        map = value;
        rest += len + 1;
    }
    return false;
}

void
conf_print_setting (const conf_origin_t *origin, const char *key,
                    const char *value, bool quote, const char *flag,
                    bool flag_given)
{
    char text [4200];
    if (!value)
        snprintf (text, sizeof text, "null");
    else if (quote) {
        size_t used = 0;
        text [used++] = '"';
        for (const char *c = value; *c && used < sizeof text - 3; c++) {
            if (*c == '"' || *c == '\\')
                text [used++] = '\\';
            text [used++] = *c;
        }
        text [used++] = '"';
        text [used] = 0;
    }
    else
        snprintf (text, sizeof text, "%s", value);
    char where [600];
    if (flag_given && flag)
        snprintf (where, sizeof where, "%s%s", *flag == '-' ? "flag " : "",
                  flag);
    else if (s_file_sets (origin->file_root, key))
        snprintf (where, sizeof where, "file %s", origin->file_path);
    else
        snprintf (where, sizeof where, "default");
    char line [4300];
    snprintf (line, sizeof line, "%s: %s", key, text);
    fprintf (origin->out, "%-48s # %s\n", line, where);
}

void
conf_print_int (const conf_origin_t *origin, const char *key, int64_t value,
                const char *flag, bool flag_given)
{
    char text [32];
    snprintf (text, sizeof text, "%lld", (long long) value);
    conf_print_setting (origin, key, text, false, flag, flag_given);
}

void
conf_print_duration (const conf_origin_t *origin, const char *key,
                     int64_t ms, const char *flag, bool flag_given)
{
    char text [64];
    duration_format (ms, text, sizeof text);
    conf_print_setting (origin, key, text, true, flag, flag_given);
}
