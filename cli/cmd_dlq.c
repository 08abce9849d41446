/*  =========================================================================
    cli - gridcli dlq: the dead-letter queue
    =========================================================================
*/
#include "cmd.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/proto.h"
#include "render.h"
#include "render_job.h"
#include "util.h"

//  The first line of TEXT, printable and cut to WIDTH.
static char *
s_first_line (const pv_t *text, size_t width)
{
    size_t len = 0;
    const char *bytes = pv_str (text, &len);
    while (len && (*bytes == '\n' || *bytes == '\r' || *bytes == ' ')) {
        bytes++;
        len--;
    }
    return cli_printable (bytes ? bytes : "", len, width, true);
}

static int
s_render_dlq_list (const pv_t *data, FILE *out)
{
    const pv_t *entries = pv_map_get (data, "entries");
    if (pv_type (entries) != PV_ARRAY)
        return -2;
    const char *headers [] = {
        "ENTRY", "TASK", "STATUS", "ATTEMPTS", "TIME", "ERROR"
    };
    cli_table_t *table = cli_table_new (6, false, headers);
    for (size_t index = 0; index < pv_size (entries); index++) {
        const pv_t *entry = pv_array_at (entries, index);
        char id [160], backend [80], action [80], task [170], status [32];
        char attempts [32], time [64];
        snprintf (task, sizeof task, "%s %s",
                  cli_field (entry, "backend", backend, sizeof backend),
                  cli_field (entry, "action", action, sizeof action));
        char *error = s_first_line (pv_map_get (entry, "error"),
                                    CLI_OUTPUT_COLUMNS);
        const char *row [] = {
            cli_field (entry, "id", id, sizeof id), task,
            cli_field (entry, "status", status, sizeof status),
            cli_field (entry, "attempts", attempts, sizeof attempts),
            cli_time (pv_map_get (entry, "time"), false, time, sizeof time),
            *error ? error : "-"
        };
        cli_table_add (table, false, row);
        free (error);
    }
    if (table->rows > 1)
        cli_table_print (table, out, false);
    int64_t total = cli_field_int (data, "total", 0);
    fprintf (out, "%" PRId64 " entr%s in the dead-letter queue%s\n", total,
             total == 1 ? "y" : "ies",
             total > (int64_t) pv_size (entries) ? " (use --limit for more)"
                                                 : "");
    cli_table_destroy (&table);
    return 0;
}

static int
s_render_dlq_entry (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "id")) != PV_STR)
        return -2;
    static const char *fields [] = {"id", "job", "step", "node", "backend",
                                    "action", "status", "attempts",
                                    "exit_code", "retry_job"};
    char buf [512];
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++)
        if (pv_map_get (data, fields [index]))
            cli_print_field (out, fields [index],
                             cli_field (data, fields [index], buf, sizeof buf));
    cli_print_field (out, "time", cli_time (pv_map_get (data, "time"), false,
                                            buf, sizeof buf));
    static const char *texts [] = {"error", "output"};
    for (size_t index = 0; index < 2; index++) {
        size_t len = 0;
        const char *text = pv_str (pv_map_get (data, texts [index]), &len);
        if (!len)
            continue;
        char *shown = cli_printable (text, len, SIZE_MAX, false);
        fprintf (out, "\n%s:\n%s\n", texts [index], shown);
        free (shown);
    }
    return 0;
}

static int
s_render_purged (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "purged")) != PV_INT)
        return -2;
    int64_t purged = cli_field_int (data, "purged", 0);
    fprintf (out, "%" PRId64 " dead-letter entr%s purged\n", purged,
             purged == 1 ? "y" : "ies");
    return 0;
}

static const char s_help_dlq [] =
"gridcli dlq - the dead-letter queue: steps that failed for good\n"
"\n"
"Usage:\n"
"  gridcli dlq list [--job ID] [--limit N]\n"
"  gridcli dlq show ENTRY\n"
"  gridcli dlq retry ENTRY|JOB\n"
"  gridcli dlq purge ENTRY | --job ID | --older-than D | --all\n"
"\n"
"A job with dead_letter (on by default for any and any:TARGET jobs, off\n"
"for fleet jobs; set it in a job file) sends every step that ends failed,\n"
"timeout, lost, interrupted or offline after its last attempt here, with\n"
"its job, node, step, action, last error and output, attempts and time.\n"
"An ENTRY id is JOB/STEP/NODE. Entries survive broker restarts; they go\n"
"when a retry of their job completes, when purged, or after the broker's\n"
"dlq_retention (30 days by default). A job keeps its record while it has\n"
"entries, past its own retention.\n"
"\n"
"dlq list     ENTRY TASK STATUS ATTEMPTS TIME ERROR, oldest job first\n"
"  --job ID   only that job's entries\n"
"  --limit N  at most N entries, 1 to 10000 (default 50)\n"
"dlq show    one entry with its whole error and output\n"
"dlq retry   a new job as `gridcli job retry JOB --failed-only` makes it;\n"
"            the job's entries are cleared when that job completes\n"
"            (operator role)\n"
"dlq purge   remove one entry, a job's entries, entries older than D, or\n"
"            all of them (operator role)\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli dlq list\n"
"  gridcli dlq retry j-0193a1b2c3d4-0001/0/web-01\n"
"  gridcli dlq purge --older-than 7d\n";

//  ---------------------------------------------------------------------
//  Options, checks and requests

enum {
    S_OPT_JOB = CLI_OPT_COMMAND, S_OPT_LIMIT, S_OPT_OLDER_THAN, S_OPT_ALL
};

static const struct option s_list_options [] = {
    {"job", required_argument, NULL, S_OPT_JOB},
    {"limit", required_argument, NULL, S_OPT_LIMIT},
    {NULL, 0, NULL, 0}
};
static const struct option s_purge_options [] = {
    {"job", required_argument, NULL, S_OPT_JOB},
    {"older-than", required_argument, NULL, S_OPT_OLDER_THAN},
    {"all", no_argument, NULL, S_OPT_ALL},
    {NULL, 0, NULL, 0}
};

static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    int64_t ms = 0;
    switch (option) {
        case S_OPT_JOB:
            if (!job_id_valid (value))
                return cli_fail (err, err_len, "'%s' is not a job id (ids "
                                 "look like j-0193a1b2c3d4-0001)", value);
            args->job_filter = value;
            return 0;
        case S_OPT_LIMIT:
            return cli_opt_limit (args, value, err, err_len);
        case S_OPT_OLDER_THAN:
            if (cli_opt_duration ("--older-than", value, &ms, err, err_len))
                return -1;
            args->older_than = value;
            return 0;
        case S_OPT_ALL:
            args->all = true;
            return 0;
        default:
            return cli_fail (err, err_len, "unknown option");
    }
}

//  dlq show and retry need an entry (retry: or a job)
static int
s_check_entry (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id)
        return cli_fail (err, err_len, "%s needs an entry id (JOB/STEP/NODE, "
                         "see gridcli dlq list)%s",
                         args->command_name,
                         args->command == CLI_CMD_DLQ_RETRY ? " or a job id"
                                                           : "");
    return 0;
}

//  Purge never purges everything by accident
static int
s_check_purge (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id && !args->job_filter && !args->older_than && !args->all)
        return cli_fail (err, err_len, "dlq purge needs ENTRY, --job ID, "
                         "--older-than D or --all");
    return 0;
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "dlq.list", id,
                         (args->job_filter ? 1 : 0) + (args->limit ? 1 : 0));
    if (args->job_filter) {
        pw_str (writer, "job");
        pw_str (writer, args->job_filter);
    }
    if (args->limit) {
        pw_str (writer, "limit");
        pw_int (writer, args->limit);
    }
    return 0;
}

static int
s_build_show (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "dlq.get", id, 1);
    pw_str (writer, "entry");
    pw_str (writer, args->id);
    return 0;
}

static int
s_build_retry (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "dlq.retry", id, 1);
    pw_str (writer, "entry");
    pw_str (writer, args->id);
    return 0;
}

static int
s_build_purge (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "dlq.purge", id,
                         (args->id ? 1 : 0) + (args->job_filter ? 1 : 0)
                         + (args->older_than ? 1 : 0) + (args->all ? 1 : 0));
    if (args->id) {
        pw_str (writer, "entry");
        pw_str (writer, args->id);
    }
    if (args->job_filter) {
        pw_str (writer, "job");
        pw_str (writer, args->job_filter);
    }
    if (args->older_than) {
        pw_str (writer, "older_than");
        pw_str (writer, args->older_than);
    }
    if (args->all) {
        pw_str (writer, "all");
        pw_bool (writer, true);
    }
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "list", .command = CLI_CMD_DLQ_LIST, .options = s_list_options,
     .option = s_option, .build = s_build_list, .render = s_render_dlq_list},
    {.name = "show", .command = CLI_CMD_DLQ_SHOW, .args = CLI_ARG_ID,
     .check = s_check_entry, .build = s_build_show,
     .render = s_render_dlq_entry},
    {.name = "retry", .command = CLI_CMD_DLQ_RETRY, .args = CLI_ARG_ID,
     .check = s_check_entry, .build = s_build_retry,
     .render = cli_render_retry},
    {.name = "purge", .command = CLI_CMD_DLQ_PURGE, .args = CLI_ARG_ID,
     .options = s_purge_options, .option = s_option, .check = s_check_purge,
     .build = s_build_purge, .render = s_render_purged},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_dlq = {"dlq", s_help_dlq, s_cmds};
