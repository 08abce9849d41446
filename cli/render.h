/*  =========================================================================
    render - gridcli's rendering helpers: printable text, aligned tables,
    fields of broker data, JSON

    Broker data is shown to a terminal, so every text that came from it is
    made printable first. The helpers know no command table: a command's
    renderer is handed in (cli_render_cmd); cli_render (cli.h) looks it up.

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_RENDER_H
#define GRID_CLI_RENDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/pv.h"
#include "cli.h"
#include "cmd.h"

#define CLI_PRINTABLE_ALL ((size_t) -1)

//  Display columns of LEN bytes of UTF-8: one per character.
size_t cli_columns (const char *text, size_t len);

//  A printable copy of LEN bytes of TEXT (NULL reads as ""). Broker data
//  holds whatever a node's program printed, so control characters, which
//  could drive the operator's terminal, become '?' and tabs and line
//  breaks become spaces; with FIRST_LINE only the first line is kept. A
//  text wider than MAX_COLUMNS is cut and ends in "...". Caller frees.
char *cli_printable (const char *text, size_t len, size_t max_columns,
                     bool first_line);

//  An aligned table: left-aligned columns two spaces apart, with no
//  trailing spaces; cells are made printable as they are added.
typedef struct {
    size_t columns;     //  Cells per row
    char **cells;       //  Printable cells, row after row (owned)
    bool *marked;       //  Per row: a row to draw attention to
    size_t rows;        //  Rows so far, the header first
    size_t capacity;    //  Rows allocated
    bool gutter;        //  Print a "!" gutter before marked rows
} cli_table_t;

//  A table of COLUMNS columns whose first row is HEADERS; with GUTTER,
//  marked rows start "! " (others "  ").
cli_table_t *cli_table_new (size_t columns, bool gutter,
                            const char *const *headers);
//  Adds a row of CELLS (NULL cells read as ""); MARKED draws attention.
void cli_table_add (cli_table_t *self, bool marked, const char *const *cells);
//  Writes the table to OUT; COLOR paints marked rows red.
void cli_table_print (const cli_table_t *self, FILE *out, bool color);
void cli_table_destroy (cli_table_t **self_p);

//  A scalar as text in BUF ("-" when absent or not a scalar). Strings
//  are copied raw; tables make them printable. Returns BUF.
const char *cli_scalar (const pv_t *value, char *buf, size_t buf_len);
//  cli_scalar of MAP's KEY.
const char *cli_field (const pv_t *map, const char *key, char *buf,
                       size_t buf_len);
//  MAP's KEY as an integer, or FALLBACK.
int64_t cli_field_int (const pv_t *map, const char *key, int64_t fallback);
//  True when VALUE is a string of LIST (NULL-terminated).
bool cli_str_in (const pv_t *value, const char *const *list);
//  An RFC 3339 time as "2026-11-21 07:00:51" (UTC), with ".123" when
//  WITH_MS; other text is shown as it came.
const char *cli_time (const pv_t *value, bool with_ms, char *buf,
                      size_t buf_len);
//  A duration for people: "850ms", "1.5s", "42s", "3m05s", "2h10m".
const char *cli_human_ms (int64_t ms, char *buf, size_t buf_len);
//  A size for people: "512 B", "3.0 MiB".
const char *cli_human_bytes (int64_t bytes, char *buf, size_t buf_len);
//  A target (the summary string, or the record's {scope, ?value, ?any})
//  as text.
const char *cli_target_text (const pv_t *target, char *buf, size_t buf_len);
//  "i/n": a job's step over its steps, "-" when it has none.
const char *cli_step_text (const pv_t *job, char *buf, size_t buf_len);
//  The scalars of an array ("web,prod") or the pairs of a map
//  ("tier=web,dc=par") joined into a new string, "-" when empty. Caller
//  frees.
char *cli_join (const pv_t *value);
//  "label     value" and "label:       value" lines, the value made
//  printable.
void cli_header_line (FILE *out, const char *label, const char *value);
void cli_print_field (FILE *out, const char *label, const char *value);
//  "name N, name N" from a map of counters, or NULL when none is set.
//  Caller frees.
char *cli_counters (const pv_t *map);
//  True when FILE is a terminal and NO_COLOR is not set.
bool cli_color (FILE *file);

//  Writes DATA, the data of the reply to CMD's command, to OUT: as pretty
//  JSON when OUTPUT is CLI_OUTPUT_JSON, else with CMD's render. Returns 0,
//  -1 when writing failed, or -2 when DATA lacks the reply's shape or CMD
//  (NULL for none) renders no table (nothing is written then).
int cli_render_cmd (const cli_cmd_t *cmd, const pv_t *data,
                    cli_output_t output, FILE *out);

#endif
