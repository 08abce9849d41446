/*  =========================================================================
    cli - rendering: printable text, aligned tables, fields, JSON (render.h)
    =========================================================================
*/
#include "render.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/proto.h"
#include "util.h"

//  Display columns of LEN bytes of UTF-8: one per character.
size_t
cli_columns (const char *text, size_t len)
{
    size_t columns = 0;
    for (size_t index = 0; index < len; index++)
        if (((unsigned char) text [index] & 0xC0) != 0x80)
            columns++;
    return columns;
}

//  A printable copy of LEN bytes of TEXT (NULL reads as ""). Broker data
//  holds whatever a node's program printed, so control characters, which
//  could drive the operator's terminal, become '?' and tabs and line
//  breaks become spaces; with FIRST_LINE only the first line is kept. A
//  text wider than MAX_COLUMNS is cut and ends in "...". Caller frees.
char *
cli_printable (const char *text, size_t len, size_t max_columns,
               bool first_line)
{
    if (!text) {
        text = "";
        len = 0;
    }
    if (first_line) {
        const char *newline = memchr (text, '\n', len);
        if (newline)
            len = (size_t) (newline - text);
        if (len && text [len - 1] == '\r')
            len--;
    }
    bool cut = cli_columns (text, len) > max_columns;
    size_t keep = cut ? (max_columns > 3 ? max_columns - 3 : 0) : SIZE_MAX;
    char *copy = cli_realloc (NULL, len + 4);
    size_t used = 0;
    size_t columns = 0;
    for (size_t index = 0; index < len; index++) {
        unsigned char c = (unsigned char) text [index];
        if ((c & 0xC0) != 0x80) {
            if (columns == keep)
                break;
            columns++;
        }
        if (c == 0xC2 && index + 1 < len
        &&  (unsigned char) text [index + 1] >= 0x80
        &&  (unsigned char) text [index + 1] <= 0x9F) {
            //  C1 controls (U+0080..U+009F) include the 8-bit CSI
            copy [used++] = '?';
            index++;
        }
        else
        if (c == '\t' || c == '\n' || c == '\r')
            copy [used++] = ' ';
        else
        if (c < 0x20 || c == 0x7F)
            copy [used++] = '?';
        else
            copy [used++] = (char) c;
    }
    if (cut) {
        memcpy (copy + used, "...", 3);
        used += 3;
    }
    copy [used] = 0;
    return copy;
}

void
cli_table_add (cli_table_t *self, bool marked, const char *const *cells)
{
    if (self->rows == self->capacity) {
        self->capacity = self->capacity ? self->capacity * 2 : 16;
        self->cells = cli_realloc (self->cells, self->capacity * self->columns
                                                * sizeof (char *));
        self->marked = cli_realloc (self->marked,
                                    self->capacity * sizeof (bool));
    }
    for (size_t column = 0; column < self->columns; column++) {
        const char *cell = cells [column] ? cells [column] : "";
        self->cells [self->rows * self->columns + column]
            = cli_printable (cell, strlen (cell), SIZE_MAX, false);
    }
    self->marked [self->rows] = marked;
    self->rows++;
}

cli_table_t *
cli_table_new (size_t columns, bool gutter, const char *const *headers)
{
    cli_table_t *self = cli_realloc (NULL, sizeof *self);
    memset (self, 0, sizeof *self);
    self->columns = columns;
    self->gutter = gutter;
    cli_table_add (self, false, headers);
    return self;
}

void
cli_table_destroy (cli_table_t **self_p)
{
    cli_table_t *self = *self_p;
    if (!self)
        return;
    for (size_t index = 0; index < self->rows * self->columns; index++)
        free (self->cells [index]);
    free (self->cells);
    free (self->marked);
    free (self);
    *self_p = NULL;
}

//  Left-aligned columns two spaces apart, with no trailing spaces; COLOR
//  paints marked rows red.
void
cli_table_print (const cli_table_t *self, FILE *out, bool color)
{
    size_t *widths = cli_realloc (NULL, self->columns * sizeof (size_t));
    for (size_t column = 0; column < self->columns; column++) {
        widths [column] = 0;
        for (size_t row = 0; row < self->rows; row++) {
            const char *cell = self->cells [row * self->columns + column];
            size_t width = cli_columns (cell, strlen (cell));
            if (width > widths [column])
                widths [column] = width;
        }
    }
    for (size_t row = 0; row < self->rows; row++) {
        bool marked = self->marked [row];
        if (marked && color)
            fputs ("\033[31m", out);
        if (self->gutter)
            fputs (marked ? "! " : "  ", out);
        //  Padding is written only before a cell that has text, so that
        //  rows ending in empty cells carry no trailing spaces.
        size_t pad = 0;
        for (size_t column = 0; column < self->columns; column++) {
            const char *cell = self->cells [row * self->columns + column];
            size_t width = cli_columns (cell, strlen (cell));
            if (width) {
                fprintf (out, "%*s%s", (int) pad, "", cell);
                pad = 0;
            }
            pad += widths [column] - width + 2;
        }
        if (marked && color)
            fputs ("\033[0m", out);
        fputc ('\n', out);
    }
    free (widths);
}

//  A scalar as text in BUF ("-" when absent or not a scalar). Strings are
//  copied raw; tables make them printable.
const char *
cli_scalar (const pv_t *value, char *buf, size_t buf_len)
{
    size_t len = 0;
    const char *bytes;
    int64_t number;
    double real;
    bool flag;
    switch (pv_type (value)) {
        case PV_STR:
            bytes = pv_str (value, &len);
            if (len >= buf_len)
                len = buf_len - 1;
            memcpy (buf, bytes, len);
            buf [len] = 0;
            break;
        case PV_INT:
            pv_get_int (value, &number);
            snprintf (buf, buf_len, "%" PRId64, number);
            break;
        case PV_FLOAT:
            pv_get_float (value, &real);
            snprintf (buf, buf_len, "%g", real);
            break;
        case PV_BOOL:
            pv_get_bool (value, &flag);
            snprintf (buf, buf_len, "%s", flag ? "true" : "false");
            break;
        default:
            snprintf (buf, buf_len, "-");
    }
    return buf;
}

const char *
cli_field (const pv_t *map, const char *key, char *buf, size_t buf_len)
{
    return cli_scalar (pv_map_get (map, key), buf, buf_len);
}

int64_t
cli_field_int (const pv_t *map, const char *key, int64_t fallback)
{
    int64_t value;
    return pv_get_int (pv_map_get (map, key), &value) == 0 ? value : fallback;
}

bool
cli_str_in (const pv_t *value, const char *const *list)
{
    for (size_t index = 0; list [index]; index++)
        if (pv_str_eq (value, list [index]))
            return true;
    return false;
}

//  An RFC 3339 time as "2026-11-21 07:00:51" (UTC), with ".123" when
//  WITH_MS; other text is shown as it came.
const char *
cli_time (const pv_t *value, bool with_ms, char *buf, size_t buf_len)
{
    cli_scalar (value, buf, buf_len);
    size_t len = strlen (buf);
    if (len >= 19 && buf [10] == 'T') {
        buf [10] = ' ';
        size_t keep = with_ms && len >= 23 && buf [19] == '.' ? 23 : 19;
        if (keep < buf_len)
            buf [keep] = 0;
    }
    return buf;
}

//  A duration for people: "850ms", "1.5s", "42s", "3m05s", "2h10m", "3d04h".
const char *
cli_human_ms (int64_t ms, char *buf, size_t buf_len)
{
    if (ms < 0)
        snprintf (buf, buf_len, "-");
    else
    if (ms < 1000)
        snprintf (buf, buf_len, "%" PRId64 "ms", ms);
    else
    if (ms < 10000)
        snprintf (buf, buf_len, "%" PRId64 ".%" PRId64 "s", ms / 1000,
                  ms % 1000 / 100);
    else
    if (ms < 60000)
        snprintf (buf, buf_len, "%" PRId64 "s", ms / 1000);
    else
    if (ms < 3600000)
        snprintf (buf, buf_len, "%" PRId64 "m%02" PRId64 "s", ms / 60000,
                  ms / 1000 % 60);
    else
    if (ms < 86400000)
        snprintf (buf, buf_len, "%" PRId64 "h%02" PRId64 "m", ms / 3600000,
                  ms / 60000 % 60);
    else
        snprintf (buf, buf_len, "%" PRId64 "d%02" PRId64 "h", ms / 86400000,
                  ms / 3600000 % 24);
    return buf;
}

//  "1.5 MiB" and the like, into BUF.
const char *
cli_human_bytes (int64_t bytes, char *buf, size_t buf_len)
{
    static const char *units [] = { "B", "KiB", "MiB", "GiB", "TiB" };
    double value = bytes < 0 ? 0 : (double) bytes;
    size_t unit = 0;
    while (value >= 1024 && unit < 4) {
        value /= 1024;
        unit++;
    }
    snprintf (buf, buf_len, unit ? "%.1f %s" : "%.0f %s", value, units [unit]);
    return buf;
}

//  A target as text: the summary form is already a string; the record
//  form is {scope, ?value, ?any}.
const char *
cli_target_text (const pv_t *target, char *buf, size_t buf_len)
{
    if (pv_type (target) != PV_MAP)
        return cli_scalar (target, buf, buf_len);
    char scope [64], value [512];
    bool any = false;
    pv_get_bool (pv_map_get (target, "any"), &any);
    cli_field (target, "scope", scope, sizeof scope);
    const pv_t *value_field = pv_map_get (target, "value");
    if (streq (scope, "all"))
        snprintf (buf, buf_len, "%s", any ? "any" : "all");
    else
    if (streq (scope, "expr") && pv_type (value_field) == PV_STR)
        snprintf (buf, buf_len, "%s%s", any ? "any:" : "",
                  cli_scalar (value_field, value, sizeof value));
    else
    if (pv_type (value_field) == PV_STR)
        snprintf (buf, buf_len, "%s%s:%s", any ? "any:" : "", scope,
                  cli_scalar (value_field, value, sizeof value));
    else
        snprintf (buf, buf_len, "%s%s", any ? "any:" : "", scope);
    return buf;
}

//  "i/n" for a job's progress: the step the wire says it is at (numbered
//  from 0, as in the API, the events and the results), which is also how
//  many steps are behind it, over the number of steps; a job that went
//  through every step reads n/n. Only a value out of range is clamped.
const char *
cli_step_text (const pv_t *job, char *buf, size_t buf_len)
{
    int64_t step = cli_field_int (job, "step", 0);
    int64_t steps = cli_field_int (job, "steps", 0);
    if (steps <= 0)
        snprintf (buf, buf_len, "-");
    else
        snprintf (buf, buf_len, "%" PRId64 "/%" PRId64,
                  step < 0 ? 0 : step > steps ? steps : step, steps);
    return buf;
}

//  Joins the scalars of an array ("web,prod") or the pairs of a map
//  ("tier=web,dc=par") into a new string, "-" when empty. Caller frees.
char *
cli_join (const pv_t *value)
{
    char *text = cli_realloc (NULL, 1);
    size_t used = 0;
    text [0] = 0;
    bool is_map = pv_type (value) == PV_MAP;
    for (size_t index = 0; index < pv_size (value); index++) {
        char key [256] = "", item [512];
        if (is_map) {
            cli_scalar (pv_map_key_at (value, index), key, sizeof key);
            cli_scalar (pv_map_value_at (value, index), item, sizeof item);
        }
        else
            cli_scalar (pv_array_at (value, index), item, sizeof item);
        size_t grow = strlen (key) + strlen (item) + 3;
        text = cli_realloc (text, used + grow + 1);
        used += (size_t) snprintf (text + used, grow + 1, "%s%s%s%s",
                                   index ? "," : "", key, is_map ? "=" : "",
                                   item);
    }
    if (!used) {
        free (text);
        text = cli_strdup ("-");
    }
    return text;
}

//  "label     value", the value made printable.
void
cli_header_line (FILE *out, const char *label, const char *value)
{
    char *text = cli_printable (value, strlen (value), SIZE_MAX, false);
    //  At least one space after the label, however long it is
    fprintf (out, "%-9s %s\n", label, text);
    free (text);
}

void
cli_print_field (FILE *out, const char *label, const char *value)
{
    char *text = cli_printable (value, strlen (value), SIZE_MAX, false);
    //  At least one space after the label, however long it is
    fprintf (out, "%-12s %s\n", label, text);
    free (text);
}

//  "3 online, 0 offline, 3 total" from a map of counters, in wire order.
char *
cli_counters (const pv_t *map)
{
    char *text = cli_strdup ("");
    for (size_t index = 0; index < pv_size (map); index++) {
        char key [128], value [64];
        cli_scalar (pv_map_key_at (map, index), key, sizeof key);
        cli_scalar (pv_map_value_at (map, index), value, sizeof value);
        size_t used = strlen (text);
        size_t grow = strlen (key) + strlen (value) + 4;
        text = cli_realloc (text, used + grow + 1);
        snprintf (text + used, grow + 1, "%s%s %s", index ? ", " : "", value,
                  key);
    }
    return text;
}

bool
cli_color (FILE *file)
{
    int fd = fileno (file);
    const char *no_color = getenv ("NO_COLOR");
    return fd >= 0 && isatty (fd) && !(no_color && *no_color);
}

int
cli_render_cmd (const cli_cmd_t *cmd, const pv_t *data, cli_output_t output,
                FILE *out)
{
    if (pv_type (data) != PV_MAP)
        return -2;
    if (output == CLI_OUTPUT_JSON) {
        pv_doc_t *doc = NULL;
        if (cmd && cmd->json) {
            pw_t *writer = pw_new ();
            cmd->json (data, writer);
            if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                               NULL, 0) == 0)
                data = pv_doc_root (doc);
            pw_destroy (&writer);
        }
        int rc = pv_write_json (data, out, 2);
        pv_doc_destroy (&doc);
        if (rc != 0)
            return -1;
        fputc ('\n', out);
        return 0;
    }
    if (!cmd || !cmd->render)
        return -2;
    return cmd->render (data, out);
}
