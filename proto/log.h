/*  =========================================================================
    log - one way to log for gridbroker, gridagent and gridcli

    Four levels (error, warn, info, debug); a line below the process's
    level is not written. Every line goes to stderr in one of three forms:

      text     "2026-11-21T07:00:51.123Z gridbroker info: job j-... started"
               (RFC 3339 UTC with milliseconds, program, level, message)
      journal  "<6>job j-... started": when stderr is the systemd journal
               (JOURNAL_STREAM names stderr's device and inode), the
               journal stamps the time itself and reads the <N> prefix as
               the syslog priority (3 error, 4 warn, 6 info, 7 debug)
      json     {"ts":"...","level":"info","program":"gridbroker",
                "msg":"...","job":"j-...","node":"web-01","request":"..."}
               one object per line, so logs can be joined with a job's
               events; job, node and request appear when the line is about
               one (a line whose words name a job id carries it as job
               even when the caller passed none), and a line a client's
               request caused carries its request, caller and role
               (log_scope_set); a line about a job carries its W3C
               trace id as "trace_id" (the caller's, or the one the
               process remembers for that job, trace.h); a text line
               ends with " trace_id=..." when the caller gave it

    A message is one line whatever it holds: in the text and journal forms
    its control bytes are written escaped (\n, \t, \r, \xHH: ESC reads
    \x1b), so a task's output neither starts a line of its own nor drives
    a terminal; a JSON line is always one valid object (control bytes as
    \u00HH, a byte that is not UTF-8 as U+FFFD, a long message cut so the
    fields after it still fit).

    The level and the format come from --log-level / --log-format (and the
    config files' log_level / log_format); the level may change at run time
    (SIGHUP reload). Messages keep their words whatever the form. The
    programs set both before they start, so an error that stops a start
    is a line like any other (log_lines).

    Threading: the settings are process-wide; set them from the main thread
    before other threads log. Each line is written with one write(2), so
    lines from several threads never interleave within a line.
    =========================================================================
*/
#ifndef GRID_LOG_H
#define GRID_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

typedef enum {
    LOG_LEVEL_ERROR = 0,     //  Something failed and was not recovered
    LOG_LEVEL_WARN,          //  Something is wrong or risky, work goes on
    LOG_LEVEL_INFO,          //  What an operator wants to see (default)
    LOG_LEVEL_DEBUG          //  Every event (the programs' --verbose)
} log_level_t;

typedef enum {
    LOG_FORMAT_TEXT = 0,     //  Timestamped lines (journal-style when stderr is the journal)
    LOG_FORMAT_JSON          //  One JSON object per line
} log_format_t;

//  What a line is about; any field may be NULL.
typedef struct {
    const char *job;         //  A job id
    const char *node;        //  A node id
    const char *request;     //  A client request id
    const char *trace_id;    //  The job's trace id (32 hex), or NULL: a
                             //  line about a job the process remembers
                             //  (trace.h) carries its trace id anyway
} log_ctx_t;

//  Who caused the lines written until the scope is cleared: a client
//  request (its id), and who sent it (the client key's name, a token's
//  name, or the key itself) with that caller's role. Any field may be
//  NULL.
typedef struct {
    const char *request;     //  The request's id
    const char *caller;      //  Who sent it
    const char *role;        //  The caller's role ("viewer", "operator", "admin")
} log_scope_t;

//  Sets the scope of the lines that follow (copied), or clears it (NULL).
//  JSON lines carry its fields as request (unless the line names its
//  own), caller and role; the text and journal forms are unchanged (their
//  words already say who did what where it matters). The broker sets it
//  around one client request's work. Main thread only.
void log_scope_set (const log_scope_t *scope);

//  Names the program in every line ("gridbroker"); PROGRAM is borrowed
//  for the life of the process. Also detects the journal.
void log_init (const char *program);

//  Tags every line with this process's instance (the agent's node id):
//  text lines read "gridagent[web-01] info: ...", and JSON lines carry it
//  as "node" unless the line names another. INSTANCE is copied.
void log_set_instance (const char *instance);

//  Sets / reads the process's level and format.
void log_set_level (log_level_t level);
log_level_t log_level (void);
void log_set_format (log_format_t format);

//  Parses "error", "warn" (or "warning"), "info", "debug" / "text",
//  "json". Returns 0 or -1.
int log_level_parse (const char *name, log_level_t *level);
int log_format_parse (const char *name, log_format_t *format);

//  Checks LEVEL and FORMAT names (either may be NULL: not given). Returns
//  0, or -1 with a sentence in ERR naming WHERE ("--log-level",
//  "log_level").
int log_check (const char *level, const char *format, char *err,
               size_t err_len);

//  Applies a program's settings: LEVEL and FORMAT names (NULL: keep),
//  and VERBOSE (the programs' --verbose: at least debug). Returns 0 or -1
//  with a sentence in ERR.
int log_configure (const char *level, const char *format, bool verbose,
                   char *err, size_t err_len);

//  The name of a level ("error", "warn", "info", "debug").
const char *log_level_name (log_level_t level);

//  True when a line at LEVEL would be written.
bool log_enabled (log_level_t level);

//  Writes one line at LEVEL about CTX (may be NULL).
void log_write (log_level_t level, const log_ctx_t *ctx, const char *format,
                ...) __attribute__ ((format (printf, 3, 4)));
void log_writev (log_level_t level, const log_ctx_t *ctx, const char *format,
                 va_list args);

//  Writes MSG as an info line of the audit trail, whatever the level: in
//  the JSON form it carries "audit":true and FIELDS, NULL-terminated key,
//  value pairs (a NULL value leaves its key out), for a log shipper.
void log_audit (const char *msg, const char *const *fields);

//  Writes TEXT, a message of one line or more (a start-up error and the
//  hints under it), as one line at LEVEL per line of TEXT.
void log_lines (log_level_t level, const log_ctx_t *ctx, const char *text);

#define log_error(...) log_write (LOG_LEVEL_ERROR, NULL, __VA_ARGS__)
#define log_warn(...) log_write (LOG_LEVEL_WARN, NULL, __VA_ARGS__)
#define log_info(...) log_write (LOG_LEVEL_INFO, NULL, __VA_ARGS__)
#define log_debug(...) log_write (LOG_LEVEL_DEBUG, NULL, __VA_ARGS__)

//  A line about job JOB (and NODE, may be NULL).
#define log_job(level, job, node, ...) \
    log_write ((level), &(log_ctx_t) {(job), (node), NULL, NULL}, __VA_ARGS__)

//  A line about node NODE (carried as "node" in the JSON form).
#define log_node(level, node, ...) \
    log_write ((level), &(log_ctx_t) {NULL, (node), NULL, NULL}, __VA_ARGS__)

#endif
