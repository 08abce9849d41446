/*  =========================================================================
    cli - gridcli schedule: jobs on a cron schedule or an interval
    =========================================================================
*/
#include "cmd.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/cron.h"
#include "../proto/proto.h"
#include "jobopts.h"
#include "render.h"
#include "util.h"

//  Options of schedule add that job run does not have (it takes job run's
//  too: cli_run_options)
enum {
    S_OPT_CRON = CLI_OPT_COMMAND + 80, S_OPT_EVERY, S_OPT_TZ, S_OPT_OVERLAP,
    S_OPT_CATCH_UP, S_OPT_CATCH_UP_WINDOW
};

static const struct option s_add_options [] = {
    {"cron", required_argument, NULL, S_OPT_CRON},
    {"every", required_argument, NULL, S_OPT_EVERY},
    {"tz", required_argument, NULL, S_OPT_TZ},
    {"overlap", required_argument, NULL, S_OPT_OVERLAP},
    {"catch-up", required_argument, NULL, S_OPT_CATCH_UP},
    {"catch-up-window", required_argument, NULL, S_OPT_CATCH_UP_WINDOW},
    {NULL, 0, NULL, 0}
};

static int
s_add_option (cli_args_t *args, int option, const char *value, char *err,
              size_t err_len)
{
    switch (option) {
        case S_OPT_CRON:
            args->cron = value;
            return 0;
        case S_OPT_EVERY:
            args->every = value;
            return 0;
        case S_OPT_TZ:
            args->tz = value;
            return 0;
        case S_OPT_OVERLAP:
            args->overlap = value;
            return 0;
        case S_OPT_CATCH_UP:
            args->catch_up = value;
            return 0;
        case S_OPT_CATCH_UP_WINDOW:
            args->catch_up_window = value;
            return 0;
        default:
            return cli_run_option (args, option, value, err, err_len);
    }
}

//  Checks a complete schedule add: its name, when it fires, and its job
//  (as job run's).
static int
s_schedule_check (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id)
        return cli_fail (err, err_len, "schedule add needs a NAME, e.g. "
                         "gridcli schedule add nightly --cron '0 3 * * *' -f "
                         "job.yaml");
    if (!name_valid (args->id))
        return cli_fail (err, err_len, "'%s' is not a schedule name (letters, "
                         "digits, '_' and '-', at most %d)", args->id,
                         NAME_MAX_LEN);
    if (args->idempotency_key)
        return cli_fail (err, err_len, "schedule add takes no "
                         "--idempotency-key: each run is a new job");
    if (args->traceparent)
        return cli_fail (err, err_len, "schedule add takes no "
                         "--traceparent: each run is a new job with a trace "
                         "of its own");
    if (!args->cron == !args->every)
        return cli_fail (err, err_len, "schedule add needs one of --cron EXPR "
                         "and --every D");
    char why [256] = "";
    cron_t cron;
    if (args->cron && cron_parse (args->cron, &cron, why, sizeof why) != 0)
        return cli_fail (err, err_len, "bad --cron '%s': %s", args->cron, why);
    int64_t ms = 0;
    if (args->every && (duration_parse (args->every, &ms) != 0 || ms < 1000))
        return cli_fail (err, err_len, "--every must be an interval from 1s "
                         "to 30d (like 30s, 10m or 1h30m), not '%s'",
                         args->every);
    if (args->tz && args->every)
        return cli_fail (err, err_len, "--tz goes with --cron only");
    //  The zone is looked up here when this machine has the time zone
    //  database; the broker's own check stays the last word
    if (args->tz
        && (cron_tz_local () ? cron_tz_check (args->tz, why, sizeof why)
                             : cron_tz_name_check (args->tz, why, sizeof why))
               != 0)
        return cli_fail (err, err_len, "bad --tz: %s", why);
    const char *overlaps [] = {"skip", "queue", "allow", NULL};
    const char *catch_ups [] = {"one", "none", NULL};
    if (args->overlap && !cli_in_list (args->overlap, overlaps))
        return cli_fail (err, err_len, "--overlap must be skip, queue or "
                         "allow, not '%s'", args->overlap);
    if (args->catch_up && !cli_in_list (args->catch_up, catch_ups))
        return cli_fail (err, err_len, "--catch-up must be one or none, not "
                         "'%s'", args->catch_up);
    if (args->catch_up_window
        && duration_parse (args->catch_up_window, &ms) != 0)
        return cli_fail (err, err_len, "--catch-up-window must be a duration "
                         "up to 30d, not '%s'", args->catch_up_window);
    if (args->follow)
        return cli_fail (err, err_len, "--follow is for job run --wait and "
                         "job output");
    if (args->diff)
        return cli_fail (err, err_len, "--diff is for job run --check: a "
                         "schedule's runs are never dry runs");
    if (args->wait)
        return cli_fail (err, err_len, "--wait is for job run; schedule run "
                         "NAME starts a run now");
    if (args->file) {
        if (cli_job_inline_given (args))
            return cli_fail (err, err_len, "schedule add -f FILE takes the "
                             "target, tasks and options from the file");
        return 0;
    }
    if (!args->target_text)
        return cli_fail (err, err_len, "schedule add needs --target T or -f "
                         "FILE");
    if (!args->backend || !args->action)
        return cli_fail (err, err_len, "schedule add needs BACKEND and ACTION "
                         "after its options, e.g. gridcli schedule add beat "
                         "--every 10m --target all test echo --msg hi");
    if (!name_valid (args->backend) || !name_valid (args->action))
        return cli_fail (err, err_len, "'%s %s' is not a valid backend and "
                         "action", args->backend, args->action);
    return 0;
}

//  When a schedule fires, as text: "cron 0 3 * * * (Europe/Berlin)" or
//  "every 10m".
static const char *
s_schedule_when (const pv_t *schedule, char *buf, size_t buf_len)
{
    char cron [300], tz [80], every [40];
    cli_field (schedule, "cron", cron, sizeof cron);
    cli_field (schedule, "tz", tz, sizeof tz);
    cli_field (schedule, "every", every, sizeof every);
    if (pv_type (pv_map_get (schedule, "every")) == PV_STR)
        snprintf (buf, buf_len, "every %s", every);
    else
    if (pv_type (pv_map_get (schedule, "tz")) == PV_STR)
        snprintf (buf, buf_len, "%s (%s)", cron, tz);
    else
        snprintf (buf, buf_len, "%s (UTC)", cron);
    return buf;
}

//  "schedule show"'s line: LABEL, then VALUE made printable, every value
//  in the column after the widest label ("last status").
static void
s_show_line (FILE *out, const char *label, const char *value)
{
    char *text = cli_printable (value, strlen (value), SIZE_MAX, false);
    fprintf (out, "%-11s %s\n", label, text);
    free (text);
}

static int
s_render_schedule (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "name")) != PV_STR)
        return -2;
    char buf [512];
    bool paused = false;
    pv_get_bool (pv_map_get (data, "paused"), &paused);
    s_show_line (out, "name", cli_field (data, "name", buf, sizeof buf));
    s_show_line (out, "when", s_schedule_when (data, buf, sizeof buf));
    s_show_line (out, "target", cli_field (data, "target", buf, sizeof buf));
    s_show_line (out, "state", paused ? "paused" : "active");
    s_show_line (out, "overlap", cli_field (data, "overlap", buf, sizeof buf));
    char window [64];
    cli_field (data, "catch_up_window", window, sizeof window);
    char catch_up [128];
    snprintf (catch_up, sizeof catch_up, "%s (window %s)",
              cli_field (data, "catch_up", buf, sizeof buf), window);
    s_show_line (out, "catch-up", catch_up);
    s_show_line (out, "next run",
                 pv_map_get (data, "next_run")
                     ? cli_time (pv_map_get (data, "next_run"), false, buf,
                                 sizeof buf)
                     : "-");
    s_show_line (out, "last run",
                 pv_map_get (data, "last_run")
                     ? cli_time (pv_map_get (data, "last_run"), false, buf,
                                 sizeof buf)
                     : "-");
    s_show_line (out, "last job",
                 pv_map_get (data, "last_job")
                     ? cli_field (data, "last_job", buf, sizeof buf)
                     : "-");
    s_show_line (out, "last status",
                 pv_map_get (data, "last_status")
                     ? cli_field (data, "last_status", buf, sizeof buf)
                     : "-");
    snprintf (buf, sizeof buf, "%" PRId64 " started, %" PRId64 " skipped",
              cli_field_int (data, "runs", 0),
              cli_field_int (data, "skipped", 0));
    s_show_line (out, "runs", buf);
    return 0;
}

static int
s_render_schedule_list (const pv_t *data, FILE *out)
{
    const pv_t *schedules = pv_map_get (data, "schedules");
    if (pv_type (schedules) != PV_ARRAY)
        return -2;
    const char *headers [] = {"NAME", "WHEN", "TARGET", "STATE", "NEXT",
                              "LAST", "LAST-STATUS"};
    cli_table_t *table = cli_table_new (7, false, headers);
    for (size_t index = 0; index < pv_size (schedules); index++) {
        const pv_t *schedule = pv_array_at (schedules, index);
        char name [80], when [400], target [512], next [40], last [40],
            status [256];
        bool paused = false;
        pv_get_bool (pv_map_get (schedule, "paused"), &paused);
        const char *cells [] = {
            cli_field (schedule, "name", name, sizeof name),
            s_schedule_when (schedule, when, sizeof when),
            cli_field (schedule, "target", target, sizeof target),
            paused ? "paused" : "active",
            pv_map_get (schedule, "next_run")
                ? cli_time (pv_map_get (schedule, "next_run"), false, next,
                            sizeof next)
                : "-",
            pv_map_get (schedule, "last_run")
                ? cli_time (pv_map_get (schedule, "last_run"), false, last,
                            sizeof last)
                : "-",
            pv_map_get (schedule, "last_status")
                ? cli_field (schedule, "last_status", status, sizeof status)
                : "-"};
        cli_table_add (table, false, cells);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    return 0;
}

static const char s_help_schedule [] =
"gridcli schedule - run jobs on a cron schedule or an interval\n"
"\n"
"Usage:\n"
"  gridcli schedule add NAME (--cron EXPR | --every D) [--tz ZONE]\n"
"      [--overlap skip|queue|allow] [--catch-up one|none]\n"
"      [--catch-up-window D]\n"
"      (-f FILE | --target T [job run options] BACKEND ACTION [--PARAM V])\n"
"  gridcli schedule list\n"
"  gridcli schedule show NAME\n"
"  gridcli schedule pause NAME\n"
"  gridcli schedule resume NAME\n"
"  gridcli schedule delete NAME\n"
"  gridcli schedule run NAME\n"
"\n"
"The broker keeps schedules in its store and starts each run as an\n"
"ordinary job that carries the schedule's name (gridcli job list\n"
"--schedule NAME shows them). Changing a schedule needs the operator role;\n"
"reading it, the viewer role.\n"
"  --cron EXPR           5 fields: minute hour day-of-month month\n"
"                        day-of-week, with *, lists (1,15), ranges (1-5),\n"
"                        steps (*/15, 0-30/10) and names (jan-dec,\n"
"                        sun-sat); or @hourly, @daily, @weekly, @monthly,\n"
"                        @yearly. Day of month and day of week both\n"
"                        restricted: either matches (as Vixie cron)\n"
"  --every D             an interval from 1s, counted from the add\n"
"  --tz ZONE             the cron's time zone, e.g. Europe/Berlin (default\n"
"                        UTC), as /usr/share/zoneinfo names it (checked\n"
"                        before sending where that database is). A time\n"
"                        skipped by daylight saving runs once at the end\n"
"                        of the gap; a repeated time runs once (with * in\n"
"                        minute or hour: on both passes)\n"
"  --overlap O           when the previous run still goes: skip (default),\n"
"                        queue (one run waits for it) or allow\n"
"  --catch-up C          after the broker was down: one (default; one run\n"
"                        if a missed time is within the window) or none\n"
"  --catch-up-window D   how old a missed time may be (default 1h)\n"
"The job is given as for job run: -f FILE, or --target T with the job\n"
"run options, then BACKEND ACTION and its params.\n"
"\n"
"schedule list    NAME WHEN TARGET STATE NEXT LAST LAST-STATUS\n"
"schedule show    one schedule: when, target, state, next and last run,\n"
"                 last job and its status, runs started and skipped\n"
"schedule pause   no runs until resume (a missed time is not caught up)\n"
"schedule resume  runs again from the next due time\n"
"schedule delete  forget the schedule; its jobs stay\n"
"schedule run     start one run now, whatever the time and overlap\n"
"\n"
"Global options and exit codes: gridcli --help. See docs/SCHEDULING.md.\n"
"\n"
"Examples:\n"
"  gridcli schedule add nightly-update --cron '0 3 * * *' \\\n"
"      --tz Europe/Berlin --target group:web apt update\n"
"  gridcli schedule add heartbeat --every 10m -f ping-all.yaml\n"
"  gridcli job list --schedule nightly-update\n";

//  ---------------------------------------------------------------------
//  Checks and requests

static int
s_check_name (cli_args_t *args, char *err, size_t err_len)
{
    return cli_check_name_id (args, "a schedule name", "a schedule name",
                              err, err_len);
}

static int
s_build_add (const cli_args_t *args, const job_spec_t *file_spec,
             const char *id, pw_t *writer, job_errors_t *errors)
{
    pw_t *job = cli_job_bytes (args, file_spec, errors);
    if (!job)
        return -1;
    const char *keys [] = {"cron", "every", "tz", "overlap", "catch_up",
                           "catch_up_window"};
    const char *values [] = {args->cron, args->every, args->tz,
                             args->overlap, args->catch_up,
                             args->catch_up_window};
    size_t count = 2;
    for (size_t i = 0; i < 6; i++)
        count += values [i] ? 1 : 0;
    proto_request_begin (writer, "schedule.add", id, count);
    pw_str (writer, "name");
    pw_str (writer, args->id);
    for (size_t i = 0; i < 6; i++)
        if (values [i]) {
            pw_str (writer, keys [i]);
            pw_str (writer, values [i]);
        }
    pw_str (writer, "job");
    pw_raw (writer, pw_data (job), pw_size (job));
    pw_destroy (&job);
    return 0;
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "schedule.list", id, 0);
    return 0;
}

//  schedule.TYPE of one schedule
static void
s_build_named (const cli_args_t *args, const char *type, const char *id,
               pw_t *writer)
{
    proto_request_begin (writer, type, id, 1);
    pw_str (writer, "name");
    pw_str (writer, args->id);
}

static int
s_build_show (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_named (args, "schedule.get", id, writer);
    return 0;
}

static int
s_build_pause (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_named (args, "schedule.pause", id, writer);
    return 0;
}

static int
s_build_resume (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_named (args, "schedule.resume", id, writer);
    return 0;
}

static int
s_build_delete (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_named (args, "schedule.delete", id, writer);
    return 0;
}

static int
s_build_run (const cli_args_t *args, const job_spec_t *file_spec,
             const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_named (args, "schedule.run", id, writer);
    return 0;
}

static int
s_render_deleted (const pv_t *data, FILE *out)
{
    char name [80];
    if (pv_type (pv_map_get (data, "name")) != PV_STR)
        return -2;
    fprintf (out, "schedule %s deleted\n",
             cli_field (data, "name", name, sizeof name));
    return 0;
}

static int
s_render_started (const pv_t *data, FILE *out)
{
    char job [64], name [80];
    cli_field (data, "job", job, sizeof job);
    cli_field (data, "schedule", name, sizeof name);
    if (!job_id_valid (job))
        return -2;
    fprintf (out, "job %s started by schedule %s\n", job, name);
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "add", .command = CLI_CMD_SCHEDULE_ADD,
     .args = CLI_ARG_ID | CLI_ARG_JOB, .short_opts = "f:",
     .options = s_add_options, .more_options = cli_run_options,
     .option = s_add_option, .check = s_schedule_check,
     .build = s_build_add, .render = s_render_schedule},
    {.name = "list", .command = CLI_CMD_SCHEDULE_LIST,
     .build = s_build_list, .render = s_render_schedule_list},
    {.name = "show", .command = CLI_CMD_SCHEDULE_SHOW, .args = CLI_ARG_ID,
     .check = s_check_name, .build = s_build_show,
     .render = s_render_schedule},
    {.name = "pause", .command = CLI_CMD_SCHEDULE_PAUSE, .args = CLI_ARG_ID,
     .check = s_check_name, .build = s_build_pause,
     .render = s_render_schedule},
    {.name = "resume", .command = CLI_CMD_SCHEDULE_RESUME,
     .args = CLI_ARG_ID, .check = s_check_name, .build = s_build_resume,
     .render = s_render_schedule},
    {.name = "delete", .command = CLI_CMD_SCHEDULE_DELETE,
     .args = CLI_ARG_ID, .check = s_check_name, .build = s_build_delete,
     .render = s_render_deleted},
    {.name = "run", .command = CLI_CMD_SCHEDULE_RUN, .args = CLI_ARG_ID,
     .check = s_check_name, .build = s_build_run,
     .render = s_render_started},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_schedule = {"schedule", s_help_schedule,
                                        s_cmds};
