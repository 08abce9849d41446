/*  =========================================================================
    cli - gridcli notify: the broker's webhook deliveries
    =========================================================================
*/
#include "cmd.h"

#include <czmq.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/proto.h"
#include "render.h"
#include "util.h"

static int
s_render_notify_list (const pv_t *data, FILE *out)
{
    const pv_t *deliveries = pv_map_get (data, "deliveries");
    if (pv_type (deliveries) != PV_ARRAY)
        return -2;
    const char *headers [] = {
        "DELIVERY", "JOB", "STATUS", "ATTEMPTS", "UPDATED", "URL", "LAST"
    };
    cli_table_t *table = cli_table_new (7, false, headers);
    for (size_t index = 0; index < pv_size (deliveries); index++) {
        const pv_t *entry = pv_array_at (deliveries, index);
        char id [64], job [64], status [16], attempts [32], time [64];
        char url [300], error [300], last [320];
        cli_field (entry, "error", error, sizeof error);
        int64_t code = cli_field_int (entry, "code", 0);
        if (*error)
            snprintf (last, sizeof last, "%s", error);
        else
        if (code)
            snprintf (last, sizeof last, "HTTP %" PRId64, code);
        else
            snprintf (last, sizeof last, "-");
        const char *row [] = {
            cli_field (entry, "id", id, sizeof id),
            cli_field (entry, "job", job, sizeof job),
            cli_field (entry, "status", status, sizeof status),
            cli_field (entry, "attempts", attempts, sizeof attempts),
            cli_time (pv_map_get (entry, "updated"), false, time, sizeof time),
            cli_field (entry, "url", url, sizeof url),
            last
        };
        cli_table_add (table, false, row);
    }
    if (table->rows > 1)
        cli_table_print (table, out, false);
    size_t count = pv_size (deliveries);
    fprintf (out, "%zu deliver%s, newest first\n", count,
             count == 1 ? "y" : "ies");
    cli_table_destroy (&table);
    return 0;
}

static int
s_render_retried (const pv_t *data, FILE *out)
{
    char id [64], job [64];
    if (pv_type (pv_map_get (data, "delivery")) != PV_STR)
        return -2;
    fprintf (out, "delivery %s (job %s) queued again\n",
             cli_field (data, "delivery", id, sizeof id),
             cli_field (data, "job", job, sizeof job));
    return 0;
}

static const char s_help_notify [] =
"gridcli notify - the webhooks told of jobs' ends\n"
"\n"
"Usage:\n"
"  gridcli notify list [--status pending|sent|dead] [--job ID] [--limit N]\n"
"  gridcli notify retry DELIVERY\n"
"\n"
"When a job ends, the broker POSTs its summary (JSON, signed with\n"
"HMAC-SHA256 when notify.secret_file is set) to the webhooks of its\n"
"configuration (notify.targets) that want that end, and to those the job\n"
"names (notify: in a job file, or --notify URL on job run and job submit,\n"
"allowed only under the prefixes of the broker's notify.allow). Each is a\n"
"delivery: queued with the job's end, retried with backoff for\n"
"notify.retry_for (24h by default), then dead. Every attempt is in the\n"
"job's timeline (gridcli job events). See docs/NOTIFY.md.\n"
"Admin role only.\n"
"\n"
"notify list      DELIVERY JOB STATUS ATTEMPTS UPDATED URL LAST, newest\n"
"                 first (a URL is shown without its query)\n"
"  --status S     only pending, sent or dead deliveries\n"
"  --job ID       only that job's\n"
"  --limit N      at most N, 1 to 1000 (default 100)\n"
"notify retry     send a sent or dead delivery again, now, with a new\n"
"                 retry window\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli notify list --status dead\n"
"  gridcli notify retry 00000193a1b2c3d400000000\n";

enum {
    S_OPT_STATUS = CLI_OPT_COMMAND, S_OPT_JOB, S_OPT_LIMIT
};

static const struct option s_list_options [] = {
    {"status", required_argument, NULL, S_OPT_STATUS},
    {"job", required_argument, NULL, S_OPT_JOB},
    {"limit", required_argument, NULL, S_OPT_LIMIT},
    {NULL, 0, NULL, 0}
};

static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    switch (option) {
        case S_OPT_STATUS:
            if (strcmp (value, "pending") != 0 && strcmp (value, "sent") != 0
                && strcmp (value, "dead") != 0)
                return cli_fail (err, err_len, "--status must be pending, "
                                 "sent or dead, not '%.64s'", value);
            args->status_filter = value;
            return 0;
        case S_OPT_JOB:
            if (!job_id_valid (value))
                return cli_fail (err, err_len, "'%.64s' is not a job id (ids "
                                 "look like j-0193a1b2c3d4-0001)", value);
            args->job_filter = value;
            return 0;
        case S_OPT_LIMIT:
            if (cli_parse_int (value, 1, 1000, &args->limit))
                return cli_fail (err, err_len, "--limit must be a whole "
                                 "number from 1 to 1000, not '%.64s'", value);
            return 0;
        default:
            return cli_fail (err, err_len, "unknown option");
    }
}

static int
s_check_retry (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id || strlen (args->id) != 24
        || strspn (args->id, "0123456789abcdefABCDEF") != 24)
        return cli_fail (err, err_len, "notify retry needs a delivery id (24 "
                         "hex digits, see gridcli notify list)");
    return 0;
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "notify.list", id,
                         (args->status_filter ? 1 : 0)
                             + (args->job_filter ? 1 : 0)
                             + (args->limit ? 1 : 0));
    if (args->status_filter) {
        pw_str (writer, "status");
        pw_str (writer, args->status_filter);
    }
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
s_build_retry (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "notify.retry", id, 1);
    pw_str (writer, "delivery");
    pw_str (writer, args->id);
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "list", .command = CLI_CMD_NOTIFY_LIST,
     .options = s_list_options, .option = s_option, .build = s_build_list,
     .render = s_render_notify_list},
    {.name = "retry", .command = CLI_CMD_NOTIFY_RETRY, .args = CLI_ARG_ID,
     .check = s_check_retry, .build = s_build_retry,
     .render = s_render_retried},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_notify = {"notify", s_help_notify, s_cmds};
