/*  =========================================================================
    cmd - gridcli's table of commands, and what its files share

    gridcli is a table of commands, as git's builtins or systemctl's verbs:
    each topic (job, node, key, ...) is one file, cmd_<topic>.c, that holds
    its --help text, the options of its subcommands, the checks of a
    complete command line, the request each one sends and the table each
    reply is rendered as; commands.c lists the topics. A new command is a
    row in its topic's table (and a new topic one file and one line in
    commands.c).

    Shared by every command: parse.c (getopt_long over the global options
    and the command's own), request.c (the reply envelope, calls through
    client/client.h), render.c (printable text, aligned tables, JSON,
    fields of broker data) and render_job.c (the job record, used by job
    status, job run --wait and --check).

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_CMD_H
#define GRID_CLI_CMD_H

#include <getopt.h>

#include "../client/client.h"
#include "cli.h"

//  getopt_long values of the global options (parse.c); a command's own
//  options use values from CLI_OPT_COMMAND on.
enum {
    CLI_OPT_HELP = 'h',
    CLI_OPT_FILE = 'f',
    CLI_OPT_VERSION = 256,
    CLI_OPT_PRINT_CONFIG,
    CLI_OPT_BROKER,
    CLI_OPT_OUTPUT,
    CLI_OPT_REQUEST_TIMEOUT,
    CLI_OPT_INSECURE,
    CLI_OPT_KEY,
    CLI_OPT_BROKER_KEY,
    CLI_OPT_CONFIG,
    CLI_OPT_COMMAND = 300
};

//  What the words of a command line that are not options are.
#define CLI_ARG_ID 1        //  One word: the job, node, key, entry or name
#define CLI_ARG_KEY 2       //  That word may be a public key starting '-'
#define CLI_ARG_JOB 4       //  BACKEND ACTION [--PARAM VALUE ...] (job run)

typedef struct {
    const char *name;         //  The subcommand ("run"), NULL for a topic
                              //  that is itself the command (status)
    cli_command_t command;    //  Its value in cli_args_t
    unsigned args;            //  CLI_ARG_ bits
    const char *short_opts;   //  getopt short options besides h, or NULL
    const struct option *options;  //  Its own options, or NULL
    const struct option *more_options;  //  A second table, or NULL
    //  Applies OPTION (a val of its tables) with VALUE (optarg). Returns 0
    //  or -1 with a sentence in ERR.
    int (*option) (cli_args_t *args, int option, const char *value,
                   char *err, size_t err_len);
    //  Checks the whole command line once parsed. Returns 0 or -1.
    int (*check) (cli_args_t *args, char *err, size_t err_len);
    //  Writes its request with id ID. FILE_SPEC: the loaded job file of
    //  job run and schedule add. Returns 0, or -1 (ERRORS filled).
    int (*build) (const cli_args_t *args, const job_spec_t *file_spec,
                  const char *id, pw_t *writer, job_errors_t *errors);
    //  Renders its reply's data as a table. Returns 0, -1 (writing
    //  failed) or -2 (DATA lacks the reply's shape).
    int (*render) (const pv_t *data, FILE *out);
    //  Commands that are more than one request and a table (job run,
    //  status, events, output): the whole run, FILE_SPEC as for build.
    //  Returns the exit code. NULL: cli_request, then cli_show.
    int (*run) (const cli_args_t *args, const job_spec_t *file_spec,
                const cli_settings_t *settings, FILE *out, FILE *err);
} cli_cmd_t;

typedef struct {
    const char *name;         //  The first word: "job"
    const char *help;         //  gridcli help job
    const cli_cmd_t *cmds;    //  Its commands, up to one with CLI_CMD_NONE
} cli_topic_t;

//  The topics, in the order the main help lists them (commands.c), and
//  each topic file's own row.
extern const cli_topic_t *const cli_topics [];
extern const size_t cli_topic_count;
extern const cli_topic_t cli_topic_job, cli_topic_node, cli_topic_broker,
    cli_topic_key, cli_topic_dlq, cli_topic_queue, cli_topic_schedule,
    cli_topic_status, cli_topic_token, cli_topic_metrics, cli_topic_relay;

//  The topic named NAME, or NULL.
const cli_topic_t *cli_topic_find (const char *name);

//  The command COMMAND's row, with its topic in *TOPIC_P (may be NULL);
//  NULL for help, version and print-config.
const cli_cmd_t *cli_cmd_find (cli_command_t command,
                               const cli_topic_t **topic_p);

//  "job run", "status": how messages name COMMAND.
const char *cli_command_name (cli_command_t command);

//  ---------------------------------------------------------------------
//  Small helpers (parse.c)

//  Formats a sentence into ERR; returns -1.
int cli_fail (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

//  realloc and strdup that end the program when memory runs out (as CZMQ
//  and pw do).
void *cli_realloc (void *ptr, size_t size);
char *cli_strdup (const char *text);

//  True when TEXT is one of LIST (NULL-terminated).
bool cli_in_list (const char *text, const char *const *list);

//  Reads a whole decimal integer in [MIN, MAX] into *OUT. Returns 0 or -1.
int cli_parse_int (const char *text, long min, long max, int *out);

//  Reads option NAME's duration TEXT, longer than 0. Returns 0, or -1
//  with a sentence in ERR.
int cli_opt_duration (const char *name, const char *text, int64_t *ms_p,
                      char *err, size_t err_len);

//  --target T: parses TEXT into ARGS->target and ->target_text (a later
//  --target replaces an earlier one). Returns 0 or -1.
int cli_opt_target (cli_args_t *args, const char *text, char *err,
                    size_t err_len);

//  --limit N: 1 to CLI_MAX_LIMIT. Returns 0 or -1.
#define CLI_MAX_LIMIT 10000
int cli_opt_limit (cli_args_t *args, const char *text, char *err,
                   size_t err_len);

//  Checks that ARGS->id is there (else "COMMAND needs WHAT") and a name
//  ([A-Za-z0-9_-]{1,64}; else "'ID' is not KIND ..."). Returns 0 or -1.
int cli_check_name_id (const cli_args_t *args, const char *what,
                       const char *kind, char *err, size_t err_len);

//  Checks that ARGS->id is there and a job id. Returns 0 or -1.
int cli_check_job_id (cli_args_t *args, char *err, size_t err_len);

//  ---------------------------------------------------------------------
//  Requests (request.c)

//  One request and its reply: sends WRITER (request id ID) through the
//  settings' client. Returns CLI_EXIT_OK with *DATA_P lent by *REPLY_P
//  (the caller destroys it), or an exit code after printing why to ERR.
int cli_call (const cli_settings_t *settings, const pw_t *request,
              const char *id, pv_doc_t **reply_p, const pv_t **data_p,
              FILE *err);

//  The request of the command in ARGS (cli_request_build, a fresh id),
//  sent with cli_call. Returns as cli_call; CLI_EXIT_USAGE after printing
//  the problems of an inline job.
int cli_request (const cli_args_t *args, const job_spec_t *file_spec,
                 const cli_settings_t *settings, pv_doc_t **reply_p,
                 const pv_t **data_p, FILE *err);

//  Writes DATA, the reply to the command in ARGS, to OUT as the settings
//  say (cli_render). Returns CLI_EXIT_OK, or CLI_EXIT_UNREACHABLE after
//  saying on ERR that the data is malformed or could not be written.
int cli_show (const cli_args_t *args, const cli_settings_t *settings,
              const pv_t *data, FILE *out, FILE *err);

//  The exit code of a typed request of the client library that returned
//  RC with REPLY: CLI_EXIT_OK for an ok reply (its data in REPLY->data),
//  else an exit code after printing why to ERR, as cli_call.
int cli_answer (const cli_settings_t *settings, int rc,
                const client_reply_t *reply, FILE *err);

//  ---------------------------------------------------------------------
//  Rendering (render.c, render_job.c)

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

//  A job record: a map with a string id and status.
bool cli_is_job_record (const pv_t *record);
//  Steps of a job record: its `steps`, else the leaves of its tasks.
int64_t cli_step_count (const pv_t *record);

//  ---------------------------------------------------------------------
//  What topic files lend each other

//  The options of job run (cmd_job.c), which schedule add and job retry
//  take too, and their handler.
extern const struct option cli_run_options [];
int cli_run_option (cli_args_t *args, int option, const char *value,
                    char *err, size_t err_len);
//  The job of job run or schedule add in the wire form: the job file's
//  spec, or the inline job once it passed the checks the broker applies.
//  NULL with ERRORS filled when the inline job is invalid.
pw_t *cli_job_bytes (const cli_args_t *args, const job_spec_t *file_spec,
                     job_errors_t *errors);
//  True when ARGS holds a job option that a job file replaces.
bool cli_job_inline_given (const cli_args_t *args);
//  The reply to job.retry and dlq.retry: the new job.
int cli_render_retry (const pv_t *data, FILE *out);
//  Prints the problems of a job file (FILE) or inline job (NULL) to ERR.
void cli_print_job_errors (FILE *err, const char *file,
                           const job_errors_t *errors);
//  --print-config (settings.c).
void cli_print_config (const cli_args_t *args,
                       const cli_settings_t *settings, FILE *out);

#endif
