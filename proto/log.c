/*  =========================================================================
    log - one way to log for gridbroker, gridagent and gridcli (see log.h)
    =========================================================================
*/
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "trace.h"

#define S_LINE_MAX 8192          //  Longest line written (cut beyond)
#define S_JOB_ID_CHARS 19        //  "j-0193a1b2c3d4-0001"

static const char *s_program = "grid";
static log_level_t s_level = LOG_LEVEL_INFO;
static log_format_t s_format = LOG_FORMAT_TEXT;
static bool s_journal;           //  stderr is the systemd journal
static char s_instance [72];     //  The agent's node id, or ""
//  The scope (log_scope_set): "" when not set
static char s_scope_request [128];
static char s_scope_caller [128];
static char s_scope_role [16];

static const char *s_names [] = {"error", "warn", "info", "debug"};
static const int s_priority [] = {3, 4, 6, 7};    //  syslog's

//  True when JOURNAL_STREAM ("DEV:INODE") names what stderr is.
static bool
s_stderr_is_journal (void)
{
    const char *stream = getenv ("JOURNAL_STREAM");
    if (!stream || !*stream)
        return false;
    unsigned long long dev = 0, ino = 0;
    if (sscanf (stream, "%llu:%llu", &dev, &ino) != 2)
        return false;
    struct stat st;
    if (fstat (STDERR_FILENO, &st) != 0)
        return false;
    return (unsigned long long) st.st_dev == dev
        && (unsigned long long) st.st_ino == ino;
}

void
log_init (const char *program)
{
    if (program && *program)
        s_program = program;
    s_journal = s_stderr_is_journal ();
}

void
log_set_instance (const char *instance)
{
    snprintf (s_instance, sizeof s_instance, "%s", instance ? instance : "");
}

void
log_set_level (log_level_t level)
{
    if (level >= LOG_LEVEL_ERROR && level <= LOG_LEVEL_DEBUG)
        s_level = level;
}

log_level_t
log_level (void)
{
    return s_level;
}

void
log_set_format (log_format_t format)
{
    s_format = format;
}

int
log_level_parse (const char *name, log_level_t *level)
{
    if (!name)
        return -1;
    for (int index = 0; index <= LOG_LEVEL_DEBUG; index++)
        if (strcmp (name, s_names [index]) == 0) {
            *level = (log_level_t) index;
            return 0;
        }
    if (strcmp (name, "warning") == 0) {
        *level = LOG_LEVEL_WARN;
        return 0;
    }
    return -1;
}

int
log_format_parse (const char *name, log_format_t *format)
{
    if (name && strcmp (name, "text") == 0)
        *format = LOG_FORMAT_TEXT;
    else if (name && strcmp (name, "json") == 0)
        *format = LOG_FORMAT_JSON;
    else
        return -1;
    return 0;
}

int
log_check (const char *level, const char *format, char *err, size_t err_len)
{
    log_level_t parsed_level;
    log_format_t parsed_format;
    if (level && log_level_parse (level, &parsed_level) != 0) {
        snprintf (err, err_len, "log level '%s' is not one of error, warn, "
                  "info, debug", level);
        return -1;
    }
    if (format && log_format_parse (format, &parsed_format) != 0) {
        snprintf (err, err_len, "log format '%s' is not text or json",
                  format);
        return -1;
    }
    return 0;
}

int
log_configure (const char *level, const char *format, bool verbose,
               char *err, size_t err_len)
{
    if (log_check (level, format, err, err_len) != 0)
        return -1;
    log_level_t parsed_level = s_level;
    log_format_t parsed_format = s_format;
    if (level)
        log_level_parse (level, &parsed_level);
    if (format)
        log_format_parse (format, &parsed_format);
    if (verbose && parsed_level < LOG_LEVEL_DEBUG)
        parsed_level = LOG_LEVEL_DEBUG;
    s_level = parsed_level;
    s_format = parsed_format;
    return 0;
}

const char *
log_level_name (log_level_t level)
{
    return level >= LOG_LEVEL_ERROR && level <= LOG_LEVEL_DEBUG
         ? s_names [level] : "info";
}

bool
log_enabled (log_level_t level)
{
    return level <= s_level;
}

//  The length of the well-formed UTF-8 sequence at C (1 to 4), or 0
//  when C starts none (a stray, overlong or surrogate byte, a cut).
static size_t
s_utf8_length (const unsigned char *c)
{
    size_t len = *c < 0x80 ? 1 : *c >= 0xc2 && *c <= 0xdf ? 2
               : *c >= 0xe0 && *c <= 0xef ? 3
               : *c >= 0xf0 && *c <= 0xf4 ? 4 : 0;
    for (size_t index = 1; index < len; index++)
        if ((c [index] & 0xc0) != 0x80)
            return 0;
    if ((*c == 0xe0 && c [1] < 0xa0) || (*c == 0xed && c [1] > 0x9f)
    ||  (*c == 0xf0 && c [1] < 0x90) || (*c == 0xf4 && c [1] > 0x8f))
        return 0;
    return len;
}

//  Appends TEXT to BUF (of SIZE, used *USED) as a JSON string body, in
//  whole pieces while they fit: quotes, backslashes and control
//  characters escaped, a byte that is not UTF-8 as U+FFFD (a task's
//  output may hold anything), so the line is always valid JSON.
static void
s_json_append (char *buf, size_t size, size_t *used, const char *text)
{
    for (const unsigned char *c = (const unsigned char *) text; *c; ) {
        char esc [8];
        const char *piece = esc;
        size_t len, taken = 1;
        if (*c == '"' || *c == '\\') {
            esc [0] = '\\';
            esc [1] = (char) *c;
            len = 2;
        }
        else if (*c == '\n') {
            piece = "\\n";
            len = 2;
        }
        else if (*c == '\t') {
            piece = "\\t";
            len = 2;
        }
        else if (*c < 0x20 || *c == 0x7f) {
            len = (size_t) snprintf (esc, sizeof esc, "\\u%04x", *c);
        }
        else if ((taken = s_utf8_length (c)) == 0) {
            piece = "\\ufffd";
            len = 6;
            taken = 1;
        }
        else {
            piece = (const char *) c;
            len = taken;
        }
        if (*used + len + 1 >= size)
            break;
        memcpy (buf + *used, piece, len);
        *used += len;
        c += taken;
    }
    buf [*used] = 0;
}

//  Appends TEXT to BUF (of SIZE, used *USED) for a text line, in whole
//  pieces while they fit: a control byte is written escaped (\n, \t,
//  \r, \xHH; ESC as \x1b), so what a task printed can neither start a
//  line of its own nor drive the operator's terminal.
static void
s_text_append (char *buf, size_t size, size_t *used, const char *text)
{
    for (const unsigned char *c = (const unsigned char *) text; *c; c++) {
        char piece [8] = {(char) *c, 0};
        if (*c == '\n')
            strcpy (piece, "\\n");
        else if (*c == '\t')
            strcpy (piece, "\\t");
        else if (*c == '\r')
            strcpy (piece, "\\r");
        else if (*c < 0x20 || *c == 0x7f)
            snprintf (piece, sizeof piece, "\\x%02x", *c);
        size_t len = strlen (piece);
        if (*used + len + 1 >= size)
            break;
        memcpy (buf + *used, piece, len);
        *used += len;
    }
    buf [*used] = 0;
}

static void
s_append (char *buf, size_t size, size_t *used, const char *text)
{
    size_t len = strlen (text);
    if (*used + len + 1 >= size)
        len = size - *used - 1;
    memcpy (buf + *used, text, len);
    *used += len;
    buf [*used] = 0;
}

//  The first job id named in TEXT, copied into ID (JOB_ID_LEN + 1), or
//  false. Job ids have one strict shape, so a line that names a job can
//  carry it as a field without every caller passing it.
static bool
s_find_job (const char *text, char *id)
{
    for (const char *at = strstr (text, "j-"); at; at = strstr (at + 1, "j-")) {
        if (at > text && (isalnum ((unsigned char) at [-1]) || at [-1] == '-'))
            continue;
        if (strlen (at) < S_JOB_ID_CHARS)
            return false;
        memcpy (id, at, S_JOB_ID_CHARS);
        id [S_JOB_ID_CHARS] = 0;
        char after = at [S_JOB_ID_CHARS];
        if (job_id_valid (id) && !isalnum ((unsigned char) after) && after != '-')
            return true;
    }
    return false;
}

//  Appends ,"KEY":"VALUE" to BUF when VALUE is not NULL and the whole
//  field fits (a field is never cut, so the line stays valid JSON).
static void
s_json_field (char *buf, size_t size, size_t *used, const char *key,
              const char *value)
{
    if (!value)
        return;
    char field [1024];
    size_t len = 0;
    field [0] = 0;
    s_append (field, sizeof field, &len, ",\"");
    s_append (field, sizeof field, &len, key);
    s_append (field, sizeof field, &len, "\":\"");
    s_json_append (field, sizeof field - 1, &len, value);
    s_append (field, sizeof field, &len, "\"");
    if (*used + len + 1 < size)
        s_append (buf, size, used, field);
}

//  Ends a text line with " trace_id=..." when CTX names one (and it fits).
static void
s_trace_append (char *buf, size_t size, size_t *used, const log_ctx_t *ctx)
{
    if (!ctx || !ctx->trace_id
        || *used + strlen (ctx->trace_id) + 12 >= size)
        return;
    s_append (buf, size, used, " trace_id=");
    s_text_append (buf, size - 1, used, ctx->trace_id);
}

void
log_scope_set (const log_scope_t *scope)
{
    snprintf (s_scope_request, sizeof s_scope_request, "%s",
              scope && scope->request ? scope->request : "");
    snprintf (s_scope_caller, sizeof s_scope_caller, "%s",
              scope && scope->caller ? scope->caller : "");
    snprintf (s_scope_role, sizeof s_scope_role, "%s",
              scope && scope->role ? scope->role : "");
}

//  Writes the line MSG at LEVEL about CTX; FIELDS (NULL-terminated key,
//  value pairs, or NULL) go into the JSON form after "audit":true.
static void
s_write (log_level_t level, const log_ctx_t *ctx, const char *msg,
         const char *const *fields)
{
    struct timespec now;
    clock_gettime (CLOCK_REALTIME, &now);
    int64_t wall_ms = (int64_t) now.tv_sec * 1000 + now.tv_nsec / 1000000;
    char stamp [TIME_TEXT_LEN];
    time_format (wall_ms, stamp, sizeof stamp);

    char line [S_LINE_MAX + 512];
    size_t used = 0;
    line [0] = 0;
    if (s_format == LOG_FORMAT_JSON) {
        //  The fields after msg first, so a long message is cut to leave
        //  them room and the object always closes
        char tail [4096];
        size_t tail_used = 0;
        tail [0] = 0;
        const char *node = ctx && ctx->node ? ctx->node
                         : *s_instance ? s_instance : NULL;
        char found [JOB_ID_LEN + 1];
        const char *job = ctx && ctx->job ? ctx->job
                        : s_find_job (msg, found) ? found : NULL;
        s_json_field (tail, sizeof tail, &tail_used, "job", job);
        char remembered [TRACE_ID_HEX + 1];
        const char *trace_id = ctx && ctx->trace_id ? ctx->trace_id
                             : job && trace_job_lookup (job, remembered)
                                 ? remembered : NULL;
        s_json_field (tail, sizeof tail, &tail_used, "trace_id", trace_id);
        s_json_field (tail, sizeof tail, &tail_used, "node", node);
        const char *request = ctx && ctx->request ? ctx->request
                            : *s_scope_request ? s_scope_request : NULL;
        s_json_field (tail, sizeof tail, &tail_used, "request", request);
        s_json_field (tail, sizeof tail, &tail_used, "caller",
                      *s_scope_caller ? s_scope_caller : NULL);
        s_json_field (tail, sizeof tail, &tail_used, "role",
                      *s_scope_role ? s_scope_role : NULL);
        if (fields) {
            s_append (tail, sizeof tail, &tail_used, ",\"audit\":true");
            for (size_t index = 0; fields [index]; index += 2)
                s_json_field (tail, sizeof tail, &tail_used, fields [index],
                              fields [index + 1]);
        }
        s_append (tail, sizeof tail, &tail_used, "}\n");

        s_append (line, sizeof line, &used, "{\"ts\":\"");
        s_append (line, sizeof line, &used, stamp);
        s_append (line, sizeof line, &used, "\",\"level\":\"");
        s_append (line, sizeof line, &used, log_level_name (level));
        s_append (line, sizeof line, &used, "\"");
        s_json_field (line, sizeof line, &used, "program", s_program);
        s_append (line, sizeof line, &used, ",\"msg\":\"");
        s_json_append (line, sizeof line - tail_used - 1, &used, msg);
        s_append (line, sizeof line, &used, "\"");
        s_append (line, sizeof line, &used, tail);
    }
    else if (s_journal) {
        char prefix [8];
        snprintf (prefix, sizeof prefix, "<%d>", s_priority [level]);
        s_append (line, sizeof line, &used, prefix);
        s_text_append (line, sizeof line - 1, &used, msg);
        s_trace_append (line, sizeof line, &used, ctx);
        s_append (line, sizeof line, &used, "\n");
    }
    else {
        s_append (line, sizeof line, &used, stamp);
        s_append (line, sizeof line, &used, " ");
        s_append (line, sizeof line, &used, s_program);
        if (*s_instance) {
            s_append (line, sizeof line, &used, "[");
            s_append (line, sizeof line, &used, s_instance);
            s_append (line, sizeof line, &used, "]");
        }
        s_append (line, sizeof line, &used, " ");
        s_append (line, sizeof line, &used, log_level_name (level));
        s_append (line, sizeof line, &used, ": ");
        s_text_append (line, sizeof line - 1, &used, msg);
        s_trace_append (line, sizeof line, &used, ctx);
        s_append (line, sizeof line, &used, "\n");
    }
    //  One write, so concurrent writers never split a line
    ssize_t written = write (STDERR_FILENO, line, used);
    (void) written;
}

void
log_writev (log_level_t level, const log_ctx_t *ctx, const char *format,
            va_list args)
{
    if (!log_enabled (level))
        return;
    char msg [S_LINE_MAX];
    vsnprintf (msg, sizeof msg, format, args);
    s_write (level, ctx, msg, NULL);
}

void
log_audit (const char *msg, const char *const *fields)
{
    //  Whatever the level: the trail is not a matter of verbosity
    static const char *const none [] = {NULL};
    s_write (LOG_LEVEL_INFO, NULL, msg, fields ? fields : none);
}

void
log_lines (log_level_t level, const log_ctx_t *ctx, const char *text)
{
    while (text && *text) {
        size_t len = strcspn (text, "\n");
        if (len > 0)
            log_write (level, ctx, "%.*s", (int) len, text);
        text += len;
        if (*text == '\n')
            text++;
    }
}

void
log_write (log_level_t level, const log_ctx_t *ctx, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    log_writev (level, ctx, format, args);
    va_end (args);
}
