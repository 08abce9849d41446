/*  =========================================================================
    cli - gridcli job: run, status, list, cancel, events, delete, retry, output
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
#include "../proto/sha256.h"
#include "follow.h"
#include "jobopts.h"
#include "render.h"
#include "render_job.h"
#include "request.h"
#include "util.h"

#define S_WAIT_FIRST_MS 250      //  First --wait poll interval
#define S_WAIT_MAX_MS 1000       //  --wait backs off to this
#define S_EVENT_PAGES 1000       //  Most job.events round trips for one call
#define S_OUTPUT_PAGE (1024 * 1024)  //  Bytes asked per job.output round trip

//  This topic's row of COMMAND: the job commands send and render through
//  their own rows, not through the table of every topic (commands.h).
static const cli_cmd_t *
s_cmd (cli_command_t command)
{
    for (const cli_cmd_t *cmd = cli_topic_job.cmds;
         cmd->command != CLI_CMD_NONE; cmd++)
        if (cmd->command == command)
            return cmd;
    return NULL;
}

static const char *s_job_statuses [] = {
    "pending", "running", "completed", "partial_failure", "failed",
    "cancelled", NULL
};

//  ---------------------------------------------------------------------
//  Options

//  Of the job commands but job run (its options are in jobopts.c, from
//  CLI_OPT_COMMAND on)
enum {
    S_OPT_STATUS = CLI_OPT_COMMAND + 40, S_OPT_LIMIT, S_OPT_SCHEDULE,
    S_OPT_FAILED_ONLY, S_OPT_REASON, S_OPT_NODE, S_OPT_STEP, S_OPT_STDERR,
    S_OPT_TARGET, S_OPT_OUTPUT_FOLLOW
};

static int
s_run_check (cli_args_t *args, char *err, size_t err_len)
{
    if (args->diff && !args->check)
        return cli_fail (err, err_len, "--diff goes with --check: job run "
                         "--check --diff runs each action's check on the "
                         "nodes and shows what would change");
    if (args->check && args->wait && !args->diff)
        return cli_fail (err, err_len, "--check runs nothing, so there is "
                         "nothing to --wait for (--check --diff waits for "
                         "the nodes' checks)");
    if (args->check && args->diff && args->follow)
        return cli_fail (err, err_len, "--follow streams a job's output; "
                         "--check --diff shows each node's verdict");
    if (args->follow && !args->wait)
        return cli_fail (err, err_len, "--follow goes with --wait: job run "
                         "--wait --follow streams the job's output");
    if (args->follow && args->output_given
        && args->output == CLI_OUTPUT_JSON)
        return cli_fail (err, err_len, "--follow prints the output as the "
                         "nodes print it, not JSON: leave out --output "
                         "json, or --follow");
    if (args->file) {
        if (cli_job_inline_given (args))
            return cli_fail (err, err_len,
                             "job run -f FILE takes the target, tasks and "
                             "options from the file; only --wait, --check, "
                             "--diff, --batch, --max-failures, --canary, "
                             "--idempotency-key, --traceparent and global "
                             "options may be added");
        return 0;
    }
    if (!args->target_text)
        return cli_fail (err, err_len, "job run needs --target (e.g. "
                         "--target group:web) or -f FILE");
    if (!args->backend || !args->action)
        return cli_fail (err, err_len,
                         "job run needs BACKEND and ACTION after its "
                         "options, e.g. gridcli job run --target all test "
                         "echo --msg hi");
    if (!name_valid (args->backend))
        return cli_fail (err, err_len, "'%s' is not a valid backend name",
                         args->backend);
    if (!name_valid (args->action))
        return cli_fail (err, err_len, "'%s' is not a valid action name",
                         args->action);
    return 0;
}

static const struct option s_list_options [] = {
    {"status", required_argument, NULL, S_OPT_STATUS},
    {"limit", required_argument, NULL, S_OPT_LIMIT},
    {"schedule", required_argument, NULL, S_OPT_SCHEDULE},
    {NULL, 0, NULL, 0}
};
static const struct option s_retry_options [] = {
    {"failed-only", no_argument, NULL, S_OPT_FAILED_ONLY},
    {"target", required_argument, NULL, S_OPT_TARGET},
    {NULL, 0, NULL, 0}
};
static const struct option s_cancel_options [] = {
    {"reason", required_argument, NULL, S_OPT_REASON},
    {NULL, 0, NULL, 0}
};
static const struct option s_output_options [] = {
    {"node", required_argument, NULL, S_OPT_NODE},
    {"step", required_argument, NULL, S_OPT_STEP},
    {"stderr", no_argument, NULL, S_OPT_STDERR},
    {"follow", no_argument, NULL, S_OPT_OUTPUT_FOLLOW},
    {NULL, 0, NULL, 0}
};

//  The options of job list, retry, cancel and output.
static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    switch (option) {
        case S_OPT_STATUS:
            if (!cli_in_list (value, s_job_statuses))
                return cli_fail (err, err_len,
                                 "--status must be one of pending, running, "
                                 "completed, partial_failure, failed, "
                                 "cancelled; not '%s'", value);
            args->status_filter = value;
            return 0;
        case S_OPT_LIMIT:
            return cli_opt_limit (args, value, err, err_len);
        case S_OPT_SCHEDULE:
            if (!name_valid (value))
                return cli_fail (err, err_len, "--schedule needs a schedule "
                                 "name, not '%s'", value);
            args->schedule_filter = value;
            return 0;
        case S_OPT_FAILED_ONLY:
            args->failed_only = true;
            return 0;
        case S_OPT_TARGET:
            return cli_opt_target (args, value, err, err_len);
        case S_OPT_REASON:
            args->reason = value;
            return 0;
        case S_OPT_NODE:
            if (!name_valid (value))
                return cli_fail (err, err_len, "--node: '%s' is not a node "
                                 "id", value);
            args->node = value;
            return 0;
        case S_OPT_STEP:
            if (cli_parse_int (value, 0, JOB_MAX_STEPS - 1, &args->step))
                return cli_fail (err, err_len, "--step must be a whole "
                                 "number from 0 to %d, not '%s'",
                                 JOB_MAX_STEPS - 1, value);
            args->step_given = true;
            return 0;
        case S_OPT_STDERR:
            args->stderr_stream = true;
            return 0;
        case S_OPT_OUTPUT_FOLLOW:
            args->follow = true;
            return 0;
        default:
            return cli_fail (err, err_len, "unknown option");
    }
}

//  ---------------------------------------------------------------------
//  Requests

//  job.submit, or job.check for a dry run
static int
s_build_run (const cli_args_t *args, const job_spec_t *file_spec,
             const char *id, pw_t *writer, job_errors_t *errors)
{
    pw_t *job = cli_job_bytes (args, file_spec, errors);
    if (!job)
        return -1;
    //  traceparent and check only when asked for: a broker of an earlier
    //  release does not know the keys. --check alone asks where the job
    //  would run (job.check); --check --diff submits a dry run the nodes
    //  answer (job.submit with check)
    bool dry_run = args->check && args->diff;
    bool placement = args->check && !dry_run;
    bool traced = args->traceparent && !placement;
    proto_request_begin (writer, placement ? "job.check" : "job.submit", id,
                         1 + (traced ? 1 : 0) + (dry_run ? 1 : 0));
    pw_str (writer, "job");
    pw_raw (writer, pw_data (job), pw_size (job));
    if (traced) {
        pw_str (writer, "traceparent");
        pw_str (writer, args->traceparent);
    }
    if (dry_run) {
        pw_str (writer, "check");
        pw_bool (writer, true);
    }
    pw_destroy (&job);
    return 0;
}

//  A request whose one field is "job": the id.
static void
s_build_job (pw_t *writer, const char *type, const char *id,
             const char *job)
{
    proto_request_begin (writer, type, id, 1);
    pw_str (writer, "job");
    pw_str (writer, job);
}

static int
s_build_status (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_job (writer, "job.get", id, args->id);
    return 0;
}

static int
s_build_events (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_job (writer, "job.events", id, args->id);
    return 0;
}

static int
s_build_delete (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_job (writer, "job.delete", id, args->id);
    return 0;
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "job.list", id,
                         (args->status_filter ? 1 : 0)
                         + (args->limit ? 1 : 0)
                         + (args->schedule_filter ? 1 : 0));
    if (args->schedule_filter) {
        pw_str (writer, "schedule");
        pw_str (writer, args->schedule_filter);
    }
    if (args->status_filter) {
        pw_str (writer, "status");
        pw_str (writer, args->status_filter);
    }
    if (args->limit) {
        pw_str (writer, "limit");
        pw_int (writer, args->limit);
    }
    return 0;
}

static int
s_build_cancel (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "job.cancel", id, args->reason ? 2 : 1);
    pw_str (writer, "job");
    pw_str (writer, args->id);
    if (args->reason) {
        pw_str (writer, "reason");
        pw_str (writer, args->reason);
    }
    return 0;
}

static int
s_build_retry (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "job.retry", id,
                         1 + (args->failed_only ? 1 : 0)
                         + (args->target_text ? 1 : 0));
    pw_str (writer, "job");
    pw_str (writer, args->id);
    if (args->failed_only) {
        pw_str (writer, "failed_only");
        pw_bool (writer, true);
    }
    if (args->target_text) {
        pw_str (writer, "target");
        pw_str (writer, args->target_text);
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  Rendering

static int
s_render_cancelled (const pv_t *data, FILE *out)
{
    char job [128], status [64];
    if (pv_type (pv_map_get (data, "job")) != PV_STR)
        return -2;
    cli_field (data, "job", job, sizeof job);
    cli_field (data, "status", status, sizeof status);
    char *job_text = cli_printable (job, strlen (job), SIZE_MAX, false);
    char *status_text = cli_printable (status, strlen (status), SIZE_MAX,
                                       false);
    fprintf (out, "job %s %s\n", job_text, status_text);
    free (job_text);
    free (status_text);
    return 0;
}

static int
s_render_deleted (const pv_t *data, FILE *out)
{
    char job [128];
    if (pv_type (pv_map_get (data, "job")) != PV_STR)
        return -2;
    cli_field (data, "job", job, sizeof job);
    char *job_text = cli_printable (job, strlen (job), SIZE_MAX, false);
    fprintf (out, "job %s deleted, with its results and events\n", job_text);
    free (job_text);
    return 0;
}

static int
s_render_job_list (const pv_t *data, FILE *out)
{
    const pv_t *jobs = pv_map_get (data, "jobs");
    if (pv_type (jobs) != PV_ARRAY)
        return -2;
    if (pv_size (jobs) == 0) {
        fprintf (out, "no jobs\n");
        return 0;
    }
    const char *headers [] = {
        "ID", "TARGET", "STATUS", "STEP", "NODES", "CREATED"
    };
    cli_table_t *table = cli_table_new (6, false, headers);
    for (size_t index = 0; index < pv_size (jobs); index++) {
        const pv_t *job = pv_array_at (jobs, index);
        char id [128], target [512], status [64], step [32], nodes [32];
        char created [64];
        const pv_t *expected = pv_map_get (job, "expected");
        if (pv_type (expected) == PV_ARRAY)
            snprintf (nodes, sizeof nodes, "%zu", pv_size (expected));
        else
            cli_scalar (expected, nodes, sizeof nodes);
        const char *row [] = {
            cli_field (job, "id", id, sizeof id),
            cli_target_text (pv_map_get (job, "target"), target, sizeof target),
            cli_field (job, "status", status, sizeof status),
            cli_step_text (job, step, sizeof step),
            nodes,
            cli_time (pv_map_get (job, "created_at"), false, created,
                      sizeof created)
        };
        cli_table_add (table, false, row);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    int64_t total = cli_field_int (data, "total", -1);
    if (total > (int64_t) pv_size (jobs))
        fprintf (out, "%zu of %" PRId64 " jobs shown (use --limit N or "
                 "--status S)\n", pv_size (jobs), total);
    return 0;
}

//  job list --output json: each job in the job record's shapes (one
//  shape per fact, PROTOCOL.md): target the {scope, value} map and
//  target_text its text, nodes the count (job.list's wire keeps the
//  text in target and the count in expected for older clients).
static void
s_json_job_list (const pv_t *data, pw_t *writer)
{
    pw_map (writer, pv_size (data));
    for (size_t index = 0; index < pv_size (data); index++) {
        const pv_t *key = pv_map_key_at (data, index);
        const pv_t *value = pv_map_value_at (data, index);
        pw_pv (writer, key);
        if (!pv_str_eq (key, "jobs") || pv_type (value) != PV_ARRAY) {
            pw_pv (writer, value);
            continue;
        }
        pw_array (writer, pv_size (value));
        for (size_t at = 0; at < pv_size (value); at++) {
            const pv_t *job = pv_array_at (value, at);
            const pv_t *target = pv_map_get (job, "target");
            char *text = pv_type (target) == PV_STR ? pv_strdup (target)
                                                    : NULL;
            target_t parsed;
            memset (&parsed, 0, sizeof parsed);
            bool object = text && target_parse (text, &parsed, NULL, 0) == 0;
            bool has_text = pv_map_get (job, "target_text") != NULL;
            bool has_nodes = pv_map_get (job, "nodes") != NULL;
            const pv_t *expected = pv_map_get (job, "expected");
            size_t fields = pv_size (job) + (text && !has_text ? 1 : 0)
                            + (!has_nodes && expected ? 1 : 0)
                            - (expected ? 1 : 0);
            pw_map (writer, fields);
            for (size_t field = 0; field < pv_size (job); field++) {
                const pv_t *name = pv_map_key_at (job, field);
                if (pv_str_eq (name, "expected"))
                    continue;
                pw_pv (writer, name);
                if (pv_str_eq (name, "target") && object)
                    job_target_encode (&parsed, writer);
                else
                    pw_pv (writer, pv_map_value_at (job, field));
                if (pv_str_eq (name, "target") && text && !has_text) {
                    pw_str (writer, "target_text");
                    pw_str (writer, text);
                }
            }
            if (!has_nodes && expected) {
                pw_str (writer, "nodes");
                pw_pv (writer, expected);
            }
            target_clear (&parsed);
            free (text);
        }
    }
}

//  EVENTS holds COUNT event maps, possibly from several replies.
static void
s_render_events (const pv_t *const *events, size_t count, FILE *out)
{
    if (count == 0) {
        fprintf (out, "no events\n");
        return;
    }
    const char *headers [] = { "TIME", "EVENT", "STEP", "NODE", "DETAIL" };
    cli_table_t *table = cli_table_new (5, false, headers);
    for (size_t index = 0; index < count; index++) {
        const pv_t *event = events [index];
        char time [64], name [128], step [32], node [128], detail_buf [1024];
        int64_t step_index;
        if (pv_get_int (pv_map_get (event, "step"), &step_index) == 0)
            snprintf (step, sizeof step, "%" PRId64, step_index);
        else
            snprintf (step, sizeof step, "-");
        cli_field (event, "detail", detail_buf, sizeof detail_buf);
        char *detail = cli_printable (detail_buf, strlen (detail_buf), 80,
                                      true);
        const char *row [] = {
            cli_time (pv_map_get (event, "time"), true, time, sizeof time),
            cli_field (event, "event", name, sizeof name),
            step,
            cli_field (event, "node", node, sizeof node),
            detail
        };
        cli_table_add (table, false, row);
        free (detail);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
}

//  Sleeps MS in short slices so that Ctrl-C is seen at once. Returns true
//  when interrupted.
//  job events: the reply's events
static int
s_render_events_reply (const pv_t *data, FILE *out)
{
    const pv_t *events = pv_map_get (data, "events");
    if (pv_type (events) != PV_ARRAY)
        return -2;
    size_t count = pv_size (events);
    const pv_t **list = cli_realloc (NULL, count * sizeof (pv_t *));
    for (size_t index = 0; index < count; index++)
        list [index] = pv_array_at (events, index);
    s_render_events (list, count, out);
    free (list);
    return 0;
}

static int
s_render_status (const pv_t *data, FILE *out)
{
    return cli_render_job (data, out, false);
}

//  ---------------------------------------------------------------------
//  Commands of more than one request

static bool
s_sleep (int64_t ms)
{
    int64_t deadline_ms = zclock_mono () + ms;
    while (!zsys_interrupted) {
        int64_t left_ms = deadline_ms - zclock_mono ();
        if (left_ms <= 0)
            return false;
        zclock_sleep ((int) (left_ms < 50 ? left_ms : 50));
    }
    return true;
}

static void
s_follow_up (FILE *err, const char *job)
{
    fprintf (err, "gridcli: stopped waiting; job %s keeps running\n"
             "  follow it:  gridcli job status %s\n"
             "  cancel it:  gridcli job cancel %s\n", job, job, job);
}

//  "job j-... completed", or "job j-... failed: <reason>".
static void
s_final_line (const pv_t *record, FILE *out)
{
    char id [128], status [64], reason [512], line [800];
    cli_field (record, "id", id, sizeof id);
    cli_field (record, "status", status, sizeof status);
    const pv_t *reason_field = pv_map_get (record, "reason");
    if (pv_size (reason_field))
        snprintf (line, sizeof line, "job %s %s: %s", id, status,
                  cli_scalar (reason_field, reason, sizeof reason));
    else
        snprintf (line, sizeof line, "job %s %s", id, status);
    char *text = cli_printable (line, strlen (line), SIZE_MAX, true);
    fprintf (out, "\n%s\n", text);
    free (text);
}

//  job status of a job not yet finished: its running tasks' progress
//  (the record's own progress; from a broker whose records have none,
//  job.progress; nothing when the broker has none to give).
static void
s_print_task_progress (const cli_settings_t *settings, const pv_t *record,
                       FILE *out)
{
    char job [64];
    cli_field (record, "id", job, sizeof job);
    if (!job_id_valid (job))
        return;
    client_reply_t reply;
    memset (&reply, 0, sizeof reply);
    const pv_t *tasks = NULL;
    if (pv_map_get (record, "progress"))
        tasks = pv_map_get (pv_map_get (record, "progress"), "tasks");
    else {
        int rc = client_job_progress (settings->client, job, &reply);
        tasks = rc == CLIENT_OK && reply.ok
                    ? pv_map_get (reply.data, "tasks") : NULL;
    }
    if (pv_size (tasks) > 0)
        fputc ('\n', out);
    for (size_t index = 0; index < pv_size (tasks); index++) {
        char line [300];
        cli_task_progress_format (pv_array_at (tasks, index), line,
                                  sizeof line);
        fprintf (out, "progress  %s (step %" PRId64 ")\n", line,
                 cli_field_int (pv_array_at (tasks, index), "step", 0));
    }
    client_reply_clear (&reply);
}

//  Waits until JOB ends, with progress on ERR: one line rewritten in place
//  on a terminal, else a new line only when it changes. job.watch answers
//  when the job changes (an older broker is polled with job.progress, or
//  job.get); then the whole record is fetched once (job.get) and
//  rendered: a wait costs the broker a count, not the record of every
//  node.
static int
s_wait (const cli_settings_t *settings, const char *job, bool dry_run,
        FILE *out, FILE *err)
{
    bool tty = isatty (fileno (err)) == 1;
    bool line_open = false;
    char last [512] = "";
    int64_t interval_ms = S_WAIT_FIRST_MS;
    client_t *client = settings->client;
    int rc;
    bool finished = false;
    bool watch = true;           //  job.watch: the broker answers on change
    bool whole = false;          //  A broker from before job.progress
    int64_t version = -1;        //  job.watch: the version last seen
    //  A parked job.watch must come back well inside one try of the
    //  request: each of the CLI_REQUEST_TRIES gets an equal share of the
    //  timeout, and a try that runs out is sent again, to be parked again
    int64_t watch_ms = settings->request_timeout_ms / CLI_REQUEST_TRIES / 2;
    if (watch_ms > 10000)
        watch_ms = 10000;
    while (true) {
        //  Diagnostics are held back so that they do not land in the
        //  middle of a progress line.
        char *held = NULL;
        size_t held_size = 0;
        FILE *hold = open_memstream (&held, &held_size);
        client_reply_t reply;
        int sent = finished || whole
                 ? client_job_get (client, job, &reply)
                 : watch ? client_job_watch (client, job, version, watch_ms,
                                             &reply)
                         : client_job_progress (client, job, &reply);
        rc = cli_answer (settings, sent, &reply, hold ? hold : err);
        if (hold)
            fclose (hold);
        const pv_t *data = rc == CLI_EXIT_OK ? reply.data : NULL;
        if (sent == CLIENT_OK && !reply.ok && !finished && !whole
            && streq (reply.code, PROTO_ERR_UNKNOWN_TYPE)) {
            //  The broker predates job.watch: poll job.progress; one that
            //  predates job.progress: poll the whole record
            free (held);
            client_reply_clear (&reply);
            if (watch)
                watch = false;
            else
                whole = true;
            continue;
        }
        if (rc == CLI_EXIT_OK && watch && !finished && !whole) {
            //  {version, changed, progress}: the progress is what counts
            int64_t seen = -1;
            if (pv_get_int (pv_map_get (data, "version"), &seen) == 0)
                version = seen;
            data = pv_map_get (data, "progress");
        }
        if (rc == CLI_EXIT_OK && whole && cli_job_finished (data))
            finished = true;
        if (rc == CLI_EXIT_OK && !cli_is_job_record (data)) {
            free (held);
            held = cli_strdup (finished ? "gridcli: the broker's job record "
                                          "is malformed\n"
                                        : "gridcli: the broker's job progress "
                                          "is malformed\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        if (rc == CLI_EXIT_OK && !finished && cli_job_finished (data)) {
            //  Ended: one more request for the whole record
            free (held);
            client_reply_clear (&reply);
            finished = true;
            continue;
        }
        if (rc != CLI_EXIT_OK || finished) {
            if (line_open)
                fputs ("\n", err);
            line_open = false;
        }
        if (rc != CLI_EXIT_OK) {
            if (held)
                fputs (held, err);
            free (held);
            client_reply_clear (&reply);
            if (rc == CLI_EXIT_INTERRUPTED)
                s_follow_up (err, job);
            else
            if (rc == CLI_EXIT_UNREACHABLE)
                fprintf (err, "gridcli: job %s may still be running; see "
                         "gridcli job status %s\n", job, job);
            break;
        }
        free (held);

        if (finished && dry_run) {
            //  Each node's verdict; exit 1 when some cannot tell
            int cannot = cli_render_check_run (
                data, true, settings->output == CLI_OUTPUT_JSON,
                cli_color (out), out);
            rc = cannot < 0 ? CLI_EXIT_UNREACHABLE
               : cannot > 0 ? CLI_EXIT_JOB_FAILED : CLI_EXIT_OK;
            if (cannot == -2)
                fprintf (err, "gridcli: the broker's job record is "
                         "malformed\n");
            client_reply_clear (&reply);
            break;
        }
        if (finished) {
            if (settings->output == CLI_OUTPUT_JSON)
                cli_render_cmd (s_cmd (CLI_CMD_JOB_STATUS), data,
                                CLI_OUTPUT_JSON, out);
            else {
                cli_render_job (data, out, cli_color (out));
                s_final_line (data, out);
            }
            rc = cli_job_exit_code (data);
            client_reply_clear (&reply);
            break;
        }
        char line [512];
        cli_progress_format (data, line, sizeof line);
        client_reply_clear (&reply);
        if (!streq (line, last)) {
            if (tty) {
                fprintf (err, "\r%s\033[K", line);
                line_open = true;
            }
            else
                fprintf (err, "%s\n", line);
            fflush (err);
            snprintf (last, sizeof last, "%s", line);
            interval_ms = S_WAIT_FIRST_MS;
        }
        else
            interval_ms = interval_ms * 2 > S_WAIT_MAX_MS ? S_WAIT_MAX_MS
                                                          : interval_ms * 2;
        //  job.watch waited in the broker already; polling sleeps
        if (!watch && s_sleep (interval_ms)) {
            if (line_open)
                fputs ("\n", err);
            s_follow_up (err, job);
            rc = CLI_EXIT_INTERRUPTED;
            break;
        }
    }
    return rc;
}

//  job events, page after page: the broker answers events with seq > after,
//  and may answer fewer than it holds, so ask again from the newest seen
//  until a page brings nothing new.
static int
s_events (const cli_settings_t *settings, const char *job, FILE *out,
          FILE *err)
{
    client_reply_t *replies = NULL;
    size_t reply_count = 0;
    const pv_t **events = NULL;
    size_t count = 0;
    int64_t after = -1;
    int rc = CLI_EXIT_OK;
    pw_t *writer = pw_new ();
    for (size_t page = 0; page < S_EVENT_PAGES; page++) {
        client_reply_t reply;
        rc = cli_answer (settings, client_job_events (settings->client, job,
                                                      after, &reply),
                         &reply, err);
        const pv_t *list = rc == CLI_EXIT_OK
                         ? pv_map_get (reply.data, "events") : NULL;
        if (rc == CLI_EXIT_OK && pv_type (list) != PV_ARRAY) {
            fprintf (err, "gridcli: the broker's answer to job.events is "
                     "malformed (no events list)\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        if (rc != CLI_EXIT_OK) {
            client_reply_clear (&reply);
            break;
        }
        //  The events stay in their replies until they are rendered
        replies = cli_realloc (replies, (reply_count + 1) * sizeof reply);
        replies [reply_count++] = reply;
        int64_t newest = after;
        size_t added = 0;
        for (size_t index = 0; index < pv_size (list); index++) {
            const pv_t *event = pv_array_at (list, index);
            int64_t seq = cli_field_int (event, "seq", -1);
            if (after >= 0 && seq <= after)
                continue;        //  Already shown
            events = cli_realloc (events, (count + 1) * sizeof (pv_t *));
            events [count++] = event;
            added++;
            if (seq > newest)
                newest = seq;
        }
        if (added == 0 || newest <= after)
            break;
        after = newest;
    }
    if (rc == CLI_EXIT_OK) {
        if (settings->output == CLI_OUTPUT_JSON) {
            //  One document, as if one reply had carried every event
            pw_reset (writer);
            pw_map (writer, 1);
            pw_str (writer, "events");
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                pw_pv (writer, events [index]);
            pv_doc_t *merged = NULL;
            char why [256];
            if (pv_doc_decode (pw_data (writer), pw_size (writer), &merged,
                               why, sizeof why) == 0) {
                cli_render_cmd (s_cmd (CLI_CMD_JOB_EVENTS),
                                pv_doc_root (merged), CLI_OUTPUT_JSON, out);
                pv_doc_destroy (&merged);
            }
            else {
                fprintf (err, "gridcli: cannot merge the events: %s\n", why);
                rc = CLI_EXIT_UNREACHABLE;
            }
        }
        else
            s_render_events (events, count, out);
    }
    for (size_t index = 0; index < reply_count; index++)
        client_reply_clear (&replies [index]);
    free (replies);
    free (events);
    pw_destroy (&writer);
    return rc;
}

//  Picks the node and step of `job output` that were not given, from the
//  job record: the job's only node; the last step that node ran. Returns
//  CLI_EXIT_OK, or an exit code with a sentence on ERR.
static int
s_output_cell (const cli_settings_t *settings, const cli_args_t *args,
               char *node, size_t node_len, int *step_p, FILE *err)
{
    if (args->node)
        snprintf (node, node_len, "%s", args->node);
    *step_p = args->step;
    if (args->node && args->step_given)
        return CLI_EXIT_OK;
    client_reply_t reply;
    int rc = cli_answer (settings, client_job_get (settings->client, args->id,
                                                   &reply),
                         &reply, err);
    const pv_t *record = rc == CLI_EXIT_OK ? reply.data : NULL;
    const pv_t *expected = pv_map_get (record, "expected");
    if (rc == CLI_EXIT_OK && !args->node) {
        if (pv_size (expected) == 1)
            cli_scalar (pv_array_at (expected, 0), node, node_len);
        else {
            char *list = cli_join (expected);
            fprintf (err, "gridcli: job %s ran on %zu nodes (%s): say which "
                     "with --node\n", args->id, pv_size (expected), list);
            free (list);
            rc = CLI_EXIT_USAGE;
        }
    }
    if (rc == CLI_EXIT_OK && !args->step_given) {
        const pv_t *results = pv_map_get (record, "results");
        *step_p = -1;
        for (int64_t step = cli_step_count (record) - 1;
             step >= 0 && *step_p < 0; step--) {
            char key [24];
            snprintf (key, sizeof key, "%" PRId64, step);
            const pv_t *cell = pv_map_get (pv_map_get (results, key), node);
            char status [32] = "";
            cli_field (cell, "status", status, sizeof status);
            //  A step that runs now counts: its output so far is there
            if (cli_field_int (cell, "attempts", 0) > 0
                || streq (status, "dispatched")
                || streq (status, "acknowledged")
                || streq (status, "running"))
                *step_p = (int) step;
        }
        bool listed = false;
        for (size_t index = 0; index < pv_size (expected); index++)
            listed = listed
                     || pv_str_eq (pv_array_at (expected, index), node);
        //  As the broker answers for a cell it does not hold (not_found)
        if (*step_p < 0 && !listed) {
            char *list = cli_join (expected);
            fprintf (err, "gridcli: node %s is not a node of job %s (it "
                     "runs on %s)\n", node, args->id,
                     *list ? list : "no node");
            free (list);
            rc = CLI_EXIT_REFUSED;
        }
        else
        if (*step_p < 0 && args->follow)
            *step_p = 0;         //  Followed from its first step on
        else
        if (*step_p < 0) {
            fprintf (err, "gridcli: node %s has run no step of job %s yet\n",
                     node, args->id);
            rc = CLI_EXIT_REFUSED;
        }
    }
    client_reply_clear (&reply);
    return rc;
}

//  `job output`: pages through a cell's stream with job.output and writes
//  its bytes, as they are, to OUT.
static int
s_job_output (const cli_settings_t *settings, const cli_args_t *args,
              FILE *out, FILE *err)
{
    char node [NAME_MAX_LEN + 1] = "";
    int step = 0;
    int rc = s_output_cell (settings, args, node, sizeof node, &step, err);
    if (rc == CLI_EXIT_OK && args->follow)
        return cli_follow_output (settings, args->id, node, step,
                                  args->stderr_stream, out, err);
    int64_t offset = 0;
    while (rc == CLI_EXIT_OK) {
        client_reply_t reply;
        int sent = client_job_output (settings->client, args->id, node, step,
                                      args->stderr_stream ? "stderr"
                                                          : "stdout",
                                      offset, S_OUTPUT_PAGE, &reply);
        rc = cli_answer (settings, sent, &reply, err);
        if (rc != CLI_EXIT_OK) {
            client_reply_clear (&reply);
            break;
        }
        const pv_t *data = reply.data;
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (data, "data"), &len);
        int64_t next = cli_field_int (data, "next", -1);
        int64_t size = cli_field_int (data, "size", -1);
        int64_t dropped = cli_field_int (data, "dropped", 0);
        if (pv_type (pv_map_get (data, "data")) != PV_BIN || size < 0
            || next != offset + (int64_t) len) {
            fprintf (err, "gridcli: the broker's answer to job.output is "
                     "malformed\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        else
        if (len && fwrite (bytes, 1, len, out) != len) {
            fprintf (err, "gridcli: cannot write the output: %s\n",
                     strerror (errno));
            rc = CLI_EXIT_UNREACHABLE;
        }
        else
        if (next >= size) {
            if (dropped > 0) {
                char text [32];
                fprintf (err, "gridcli: %s were dropped from the middle of "
                         "this output (after its first %" PRId64 " bytes): "
                         "the node kept its first and last bytes only\n",
                         cli_human_bytes (dropped, text, sizeof text),
                         size / 2);
            }
            //  A broker before live output says nothing of it
            bool complete = true;
            pv_get_bool (pv_map_get (data, "complete"), &complete);
            if (!complete)
                fprintf (err, "gridcli: step %d still runs on %s: this is "
                         "its output so far (--follow for the rest)\n",
                         step, node);
            client_reply_clear (&reply);
            break;
        }
        else
        if (len == 0) {
            fprintf (err, "gridcli: only %" PRId64 " of the %" PRId64
                     " bytes of this output have reached the broker so "
                     "far; try again later\n", offset, size);
            rc = CLI_EXIT_JOB_FAILED;
        }
        offset = next;
        client_reply_clear (&reply);
    }
    return rc;
}

static const char s_help_job [] =
"gridcli job - submit, inspect and cancel jobs\n"
"\n"
"Usage:\n"
"  gridcli job run --target T [OPTIONS] BACKEND ACTION [--PARAM VALUE ...]\n"
"  gridcli job run -f FILE [--wait]\n"
"  gridcli job run --check [--diff] (--target T BACKEND ACTION ... | -f FILE)\n"
"  gridcli job status ID\n"
"  gridcli job list [--status S] [--limit N] [--schedule NAME]\n"
"  gridcli job cancel ID [--reason TEXT]\n"
"  gridcli job events ID\n"
"  gridcli job delete ID\n"
"  gridcli job retry ID [--failed-only] [--target T]\n"
"  gridcli job output ID [--node N] [--step S] [--stderr] [--follow]\n"
"\n"
"job run sends one action (BACKEND ACTION and its params) to the nodes of\n"
"the target, or the phases of a job file. Without --wait it prints the new\n"
"job's id and exits 0; with --wait it shows progress on stderr until the\n"
"job ends, prints the per-node, per-step table and exits 0 (completed) or\n"
"1 (failed, partial_failure, cancelled). Ctrl-C stops waiting (exit 130)\n"
"and leaves the job running. Every node the target names is answered for:\n"
"an unregistered id refuses the job (unknown_node); a named node that is\n"
"offline, drained or lacks the action gets rows saying why and fails the\n"
"job; members of a group, label or all that cannot run it are listed as\n"
"\"N nodes not run: ...\" and are not sent it.\n"
"  --target T          all | group:G | node:ID[,ID...] |\n"
"                      label:KEY=V1[.V2...] | fact:KEY=VALUE (or != >=\n"
"                      <= > <, ~= a glob) | any | any:TARGET\n"
"                      (checked before anything is sent)\n"
"  -f FILE             a YAML job file (target, tasks, strategy, timeout,\n"
"                      priority), checked before anything is sent; each\n"
"                      problem is printed with its path; no other job\n"
"                      option may be added\n"
"  --wait              wait for the end (accepted anywhere)\n"
"  --follow            with --wait: print the job's standard output as it\n"
"                      comes, then the table (several nodes: each line\n"
"                      after its node, \"web-01 | ...\")\n"
"  --timeout D         task timeout\n"
"  --retries N         extra attempts on a failing node, 0 to 10\n"
"  --strategy S        fail-fast (after a failure only on_failure phases\n"
"                      run) or continue (failed nodes drop out, the rest\n"
"                      go on)\n"
"  --priority N        -100 to 100, higher runs first (default 0)\n"
"  --job-timeout D     timeout of the whole job\n"
"  --batch N|P%        rolling batches: N nodes (or P% of the job's nodes,\n"
"                      rounded up) at a time, in node-id order; each batch\n"
"                      runs the whole job before the next starts\n"
"  --max-failures N|P% the failure budget: once more nodes failed, no new\n"
"                      batch starts, the rest read skipped and the job\n"
"                      fails (default: 0 under fail-fast, none under\n"
"                      continue)\n"
"  --canary N          the first batch is N nodes, whatever --batch says\n"
"                      (--batch, --max-failures and --canary also go with\n"
"                      -f FILE, over what the file says)\n"
"  --limits P=N[,P=N]  the job's own concurrency limits, lower than the\n"
"                      broker's: P is BACKEND.ACTION (either part may be\n"
"                      *), N how many of its steps run at once\n"
"  --lease D           an any job's lease on a node (100ms to 1d; default\n"
"                      the broker's)\n"
"  --stall-timeout D   a running task the broker hears nothing of for D\n"
"                      reads timeout\n"
"  --idempotency-key K the job's idempotency key (also with -f FILE, over\n"
"                      the file's): a second run with the same K and job\n"
"                      makes no new job and prints \"job ID already\n"
"                      submitted with key K (STATUS)\" (JSON: existing\n"
"                      true); the same K with another job is a conflict\n"
"  --traceparent T     the job's W3C trace context (00-<32 hex>-<16 hex>-\n"
"                      <2 hex>, lowercase; also with -f FILE): its spans\n"
"                      are children of T's parent id. Without it the\n"
"                      broker makes one; job status shows it\n"
"  --notify URL        POST the job's summary to URL when it ends (http or\n"
"                      https; repeatable, up to 4; also with -f FILE, added\n"
"                      to the file's notify:). The broker takes it only\n"
"                      under a prefix of its notify.allow (docs/NOTIFY.md);\n"
"                      not for schedule add\n"
"  --check             a dry run (job.check): the nodes it would run on,\n"
"                      those it would not and why (offline, drained,\n"
"                      lacking the action), the plan (phases or DAG\n"
"                      order) and the batches, every param checked; runs\n"
"                      and stores nothing. Exit 0 when it would run, 1\n"
"                      when no node would\n""  --check --diff      a dry run on the nodes: each runs its action's check\n"
"                      instead of the action (apt install/remove, systemd\n"
"                      start/stop/restart/enable/disable, network\n"
"                      dns_update, test mark; queries run as themselves)\n"
"                      and nothing changes; waits, then prints per node\n"
"                      and step \"would change\" (current -> desired), \"no\n"
"                      change\" or \"cannot tell\" (an action without a\n"
"                      check, an agent of an earlier release: never sent\n"
"                      it) and each diff under the table (--output json:\n"
"                      would_change true|false|null). Exit 0 when every\n"
"                      node could tell, 1 when some cannot\n"
"Options are read only BEFORE BACKEND. After BACKEND ACTION every\n"
"--NAME VALUE or --NAME=VALUE is a param, so `--timeout 5` there is a\n"
"param named timeout; --wait is the one exception. For file put,\n"
"--src LOCAL sends a local file's content (text of at most 4096 bytes in\n"
"the command; a larger or binary file is uploaded to the broker first,\n"
"gridcli file upload, and the command names its sha256 and size: each\n"
"node fetches it once) and --dest PATH is the path on the nodes.\n"
"\n"
"job status ID        the job's target, status, step, strategy and times,\n"
"                     for a DAG job its order (STEP NAME TASK NEEDS\n"
"                     WAITING: what each task needs and how many nodes\n"
"                     still wait for which need), then NODE STEP TASK\n"
"                     STATUS EXIT DURATION OUTPUT;\n"
"                     failed, lost, interrupted, offline, drained and\n"
"                     unsupported rows are marked ! (and red on a\n"
"                     terminal);\n"
"                     steps count from 0. A step waiting for a free\n"
"                     slot or a concurrency limit says why in OUTPUT;\n"
"                     while the job runs, a progress line follows for\n"
"                     each task that reports it (web-01 42% ...).\n"
"                     Exits 1 when the job failed,\n"
"                     partially failed or was cancelled, else 0.\n"
"job list             ID TARGET STATUS STEP NODES CREATED, newest first\n"
"  --status S         pending, running, completed, partial_failure,\n"
"                     failed or cancelled\n"
"  --limit N          at most N jobs, 1 to 10000 (default 50)\n"
"  --schedule NAME    only the runs of schedule NAME\n"
"job cancel ID        cancel a pending or running job\n"
"  --reason TEXT      kept with the job\n"
"job events ID        TIME EVENT STEP NODE DETAIL, oldest first\n"
"job delete ID        remove a finished job with its results and events\n"
"                     (a pending or running job must be cancelled first)\n"
"                     and its dead-letter entries\n"
"job retry ID         a new job with the same tasks and options, linked\n"
"                     both ways (job status shows retry of / retried by);\n"
"                     operator role\n"
"  --failed-only      only the nodes with a failed, timeout, lost,\n"
"                     interrupted, offline or cancelled step (an any job\n"
"                     keeps its any target); refused when none failed\n"
"  --target T         run it on T instead\n"
"job output ID        a step's whole output, byte for byte, on stdout\n"
"                     (pipe it: | less, > file, | sha256sum)\n"
"  --node N           whose output (needed when the job has several nodes)\n"
"  --step S           which step (default: the last step the node ran)\n"
"  --stderr           its standard error instead\n"
"  --follow           of a running step: go on writing as more arrives,\n"
"                     until the step ends; exit 0 when it succeeded, 1\n"
"                     when it did not\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli job run --target label:tier=web --wait systemd restart \\\n"
"      --unit nginx\n"
"  gridcli job run -f deploy-web.yaml --wait\n"
"  gridcli job run --check --diff --target group:web apt install \\\n"
"      --package nginx\n"
"  gridcli job list --status failed --limit 10\n";

//  ---------------------------------------------------------------------
//  The runs of job run, status, events and output

static int
s_run_run (const cli_args_t *args, const job_spec_t *file_spec,
           const cli_settings_t *settings, FILE *out, FILE *err)
{
    pv_doc_t *reply = NULL;
    const pv_t *data = NULL;
    int rc = CLI_EXIT_OK;
    if (args->upload_src) {
        //  file put --src of a blob: the broker has it first (a dry run
        //  too: its nodes compare digests)
        char sha256 [SHA256_HEX];
        uint64_t size = 0;
        bool stored = false;
        rc = cli_file_upload (settings, args->upload_src, sha256, &size,
                              &stored, err);
        if (rc != CLI_EXIT_OK)
            return rc;
        if (stored)
            fprintf (err, "uploaded %s (%" PRIu64 " bytes) as blob %.12s\n",
                     args->upload_src, size, sha256);
    }
    rc = cli_request_cmd (s_cmd (args->command), args, file_spec,
                          settings, &reply, &data, err);
    if (rc == CLI_EXIT_INTERRUPTED)
        fprintf (err, "gridcli: the job may or may not have been "
                 "submitted; see gridcli job list\n");
    if (rc != CLI_EXIT_OK) {
        pv_doc_destroy (&reply);
        return rc;
    }
    if (args->check && !args->diff) {
        rc = settings->output == CLI_OUTPUT_TABLE
                 ? cli_render_check (data, out)
                 : cli_render_cmd (s_cmd (args->command), data,
                                   settings->output, out);
        if (rc == -2) {
            fprintf (err, "gridcli: the broker's answer is malformed (its "
                     "data does not have the shape of a job.check answer)\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        else
        if (rc == 0 && pv_size (pv_map_get (data, "nodes")) == 0)
            rc = CLI_EXIT_JOB_FAILED;   //  It would run nowhere
    }
    else
    if (args->wait || args->diff) {
        char job [64];
        cli_field (data, "job", job, sizeof job);
        if (!job_id_valid (job)) {
            fprintf (err, "gridcli: the broker's answer to job.submit "
                     "carries no job id\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        else {
            bool existing = false;
            pv_get_bool (pv_map_get (data, "existing"), &existing);
            fprintf (err, "%s %s %s; waiting (Ctrl-C stops waiting, "
                     "the job goes on)\n", args->diff ? "dry run" : "job",
                     job, existing ? "already submitted with this key"
                                   : "submitted");
            if (args->follow)
                rc = cli_follow_job (settings, job, out, err);
            if (rc == CLI_EXIT_OK)
                rc = s_wait (settings, job, args->diff, out, err);
        }
    }
    else
        rc = cli_show_cmd (s_cmd (args->command), args, settings, data, out,
                           err);
    pv_doc_destroy (&reply);
    return rc;
}

//  job status: the record, coloured on a terminal, with the progress of
//  running tasks; exits as the job ended
static int
s_run_status (const cli_args_t *args, const job_spec_t *file_spec,
              const cli_settings_t *settings, FILE *out, FILE *err)
{
    pv_doc_t *reply = NULL;
    const pv_t *data = NULL;
    int rc = cli_request_cmd (s_cmd (args->command), args, file_spec,
                              settings, &reply, &data, err);
    if (rc == CLI_EXIT_OK && settings->output == CLI_OUTPUT_TABLE) {
        rc = cli_render_job (data, out, cli_color (out));
        if (rc == 0 && !cli_job_finished (data))
            s_print_task_progress (settings, data, out);
        if (rc == -2) {
            fprintf (err, "gridcli: the broker's answer is malformed (its "
                     "data does not have the shape of a job status "
                     "answer)\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        else
        if (rc != 0) {
            fprintf (err, "gridcli: cannot write the output: %s\n",
                     strerror (errno));
            rc = CLI_EXIT_UNREACHABLE;
        }
    }
    else
    if (rc == CLI_EXIT_OK)
        rc = cli_show_cmd (s_cmd (args->command), args, settings, data, out,
                           err);
    if (rc == CLI_EXIT_OK)
        rc = cli_job_exit_code (data);
    pv_doc_destroy (&reply);
    return rc;
}

static int
s_run_events (const cli_args_t *args, const job_spec_t *file_spec,
              const cli_settings_t *settings, FILE *out, FILE *err)
{
    return s_events (settings, args->id, out, err);
}

static int
s_run_output (const cli_args_t *args, const job_spec_t *file_spec,
              const cli_settings_t *settings, FILE *out, FILE *err)
{
    return s_job_output (settings, args, out, err);
}

//  ---------------------------------------------------------------------
//  The table

static const cli_cmd_t s_cmds [] = {
    {.name = "run", .command = CLI_CMD_JOB_RUN, .args = CLI_ARG_JOB,
     .short_opts = "f:", .options = cli_run_options,
     .option = cli_run_option, .check = s_run_check, .build = s_build_run,
     .render = cli_render_submitted, .run = s_run_run},
    {.name = "status", .command = CLI_CMD_JOB_STATUS, .args = CLI_ARG_ID,
     .check = cli_check_job_id, .build = s_build_status,
     .render = s_render_status, .run = s_run_status},
    {.name = "list", .command = CLI_CMD_JOB_LIST, .options = s_list_options,
     .option = s_option, .build = s_build_list, .render = s_render_job_list,
     .json = s_json_job_list},
    {.name = "cancel", .command = CLI_CMD_JOB_CANCEL, .args = CLI_ARG_ID,
     .options = s_cancel_options, .option = s_option,
     .check = cli_check_job_id, .build = s_build_cancel,
     .render = s_render_cancelled},
    {.name = "events", .command = CLI_CMD_JOB_EVENTS, .args = CLI_ARG_ID,
     .check = cli_check_job_id, .build = s_build_events,
     .render = s_render_events_reply, .run = s_run_events},
    {.name = "delete", .command = CLI_CMD_JOB_DELETE, .args = CLI_ARG_ID,
     .check = cli_check_job_id, .build = s_build_delete,
     .render = s_render_deleted},
    {.name = "retry", .command = CLI_CMD_JOB_RETRY, .args = CLI_ARG_ID,
     .options = s_retry_options, .option = s_option,
     .check = cli_check_job_id, .build = s_build_retry,
     .render = cli_render_retry},
    {.name = "output", .command = CLI_CMD_JOB_OUTPUT, .args = CLI_ARG_ID,
     .options = s_output_options, .option = s_option,
     .check = cli_check_job_id, .run = s_run_output},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_job = {"job", s_help_job, s_cmds};
