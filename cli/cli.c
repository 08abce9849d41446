/*  =========================================================================
    cli - gridcli: argument parsing, requests, transport, rendering

    Reading order: argument parsing, settings, request ids and requests,
    transport (Lazy Pirate), reply envelope, rendering (tables, then one
    function per reply shape), help, and cli_run, which strings them
    together and owns the --wait loop.
    =========================================================================
*/
#include "cli.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "../proto/conf.h"
#include "../proto/cron.h"
#include "../proto/keys.h"
#include "../proto/proto.h"

#ifndef GRID_VERSION
#define GRID_VERSION "0.0.0-dev"
#endif

#define S_MIN_PRIORITY -100
#define S_MAX_PRIORITY 100
#define S_MAX_LIMIT 10000
#define S_WAIT_FIRST_MS 250      //  First --wait poll interval
#define S_WAIT_MAX_MS 1000       //  --wait backs off to this
#define S_EVENT_PAGES 1000       //  Most job.events round trips for one call
#define S_OUTPUT_PAGE (1024 * 1024)  //  Bytes asked per job.output round trip

static const char *s_job_statuses [] = {
    "pending", "running", "completed", "partial_failure", "failed",
    "cancelled", NULL
};

//  ---------------------------------------------------------------------
//  Small helpers

static int
s_fail (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
    return -1;
}

static void *
s_realloc (void *ptr, size_t size)
{
    void *fresh = realloc (ptr, size ? size : 1);
    if (!fresh) {
        //  Out of memory is not recoverable for a command line tool; CZMQ
        //  and pw make the same choice.
        fprintf (stderr, "gridcli: out of memory\n");
        abort ();
    }
    return fresh;
}

static char *
s_strdup (const char *text)
{
    size_t len = strlen (text);
    char *copy = s_realloc (NULL, len + 1);
    memcpy (copy, text, len + 1);
    return copy;
}

static bool
s_in_list (const char *text, const char *const *list)
{
    for (size_t index = 0; list [index]; index++)
        if (streq (text, list [index]))
            return true;
    return false;
}

//  Reads a whole decimal integer in [MIN, MAX].
static int
s_parse_int (const char *text, long min, long max, int *out)
{
    char *end = NULL;
    errno = 0;
    long value = strtol (text, &end, 10);
    if (errno || end == text || *end || value < min || value > max)
        return -1;
    *out = (int) value;
    return 0;
}

//  ---------------------------------------------------------------------
//  Argument parsing

//  True when ARG is option NAME, alone ("--broker") or with an inline value
//  ("--broker=tcp://x"), which *INLINE_P then points at.
static bool
s_is_option (const char *arg, const char *name, const char **inline_p)
{
    size_t len = strlen (name);
    *inline_p = NULL;
    if (strncmp (arg, name, len) != 0)
        return false;
    if (arg [len] == 0)
        return true;
    if (arg [len] == '=') {
        *inline_p = arg + len + 1;
        return true;
    }
    return false;
}

//  The value of an option: its inline part, else the next argument.
static int
s_option_value (int argc, char *const *argv, int *index, const char *name,
                const char *inline_value, const char **value_p, char *err,
                size_t err_len)
{
    if (inline_value)
        *value_p = inline_value;
    else
    if (*index + 1 < argc)
        *value_p = argv [++*index];
    else
        return s_fail (err, err_len, "option %s needs a value", name);
    return 0;
}

static int
s_duration_option (const char *name, const char *text, int64_t *ms_p,
                   char *err, size_t err_len)
{
    if (duration_parse (text, ms_p) != 0)
        return s_fail (err, err_len,
                       "%s: '%s' is not a duration (write a number and a "
                       "unit ms, s, m, h or d, e.g. 500ms, 10s, 1h30m; at "
                       "most 30d)", name, text);
    if (*ms_p <= 0)
        return s_fail (err, err_len, "%s must be longer than 0", name);
    return 0;
}

//  Global options. Returns 1 when ARGV[*INDEX] was one (consumed), 0 when
//  it is not a global option, -1 on a bad value.
static int
s_global_option (cli_args_t *args, int argc, char *const *argv, int *index,
                 const char *topic, char *err, size_t err_len)
{
    const char *arg = argv [*index];
    const char *inline_value = NULL, *value = NULL;

    if (streq (arg, "-h") || streq (arg, "--help")) {
        args->command = CLI_CMD_HELP;
        args->help_topic = topic;
        return 1;
    }
    if (streq (arg, "--version")) {
        args->command = CLI_CMD_VERSION;
        return 1;
    }
    if (streq (arg, "--print-config")) {
        args->command = CLI_CMD_PRINT_CONFIG;
        return 1;
    }
    if (s_is_option (arg, "--broker", &inline_value)) {
        if (s_option_value (argc, argv, index, "--broker", inline_value,
                            &value, err, err_len))
            return -1;
        if (!*value)
            return s_fail (err, err_len, "--broker needs an endpoint, e.g. "
                           "tcp://127.0.0.1:7701");
        args->broker = value;
        return 1;
    }
    if (s_is_option (arg, "--output", &inline_value)) {
        if (s_option_value (argc, argv, index, "--output", inline_value,
                            &value, err, err_len))
            return -1;
        if (streq (value, "table"))
            args->output = CLI_OUTPUT_TABLE;
        else
        if (streq (value, "json"))
            args->output = CLI_OUTPUT_JSON;
        else
            return s_fail (err, err_len,
                           "--output must be table or json, not '%s'", value);
        args->output_given = true;
        return 1;
    }
    if (s_is_option (arg, "--request-timeout", &inline_value)) {
        if (s_option_value (argc, argv, index, "--request-timeout",
                            inline_value, &value, err, err_len)
        ||  s_duration_option ("--request-timeout", value,
                               &args->request_timeout_ms, err, err_len))
            return -1;
        return 1;
    }
    if (streq (arg, "--insecure")) {
        args->insecure = true;
        return 1;
    }
    if (s_is_option (arg, "--key", &inline_value)
    ||  s_is_option (arg, "--broker-key", &inline_value)) {
        bool own = s_is_option (arg, "--key", &inline_value);
        const char *name = own ? "--key" : "--broker-key";
        if (s_option_value (argc, argv, index, name, inline_value, &value,
                            err, err_len))
            return -1;
        if (!*value)
            return s_fail (err, err_len, "%s needs a key file%s", name,
                           own ? "" : " or 40 characters of Z85");
        if (own)
            args->key = value;
        else
            args->broker_key = value;
        return 1;
    }
    if (s_is_option (arg, "--config", &inline_value)) {
        if (s_option_value (argc, argv, index, "--config", inline_value,
                            &value, err, err_len))
            return -1;
        if (!*value)
            return s_fail (err, err_len, "--config needs a file name");
        args->config = value;
        return 1;
    }
    return 0;
}

//  Options of `job run` that are only read before BACKEND. Returns 1, 0 or
//  -1 as s_global_option.
static int
s_run_option (cli_args_t *args, int argc, char *const *argv, int *index,
              char *err, size_t err_len)
{
    const char *arg = argv [*index];
    const char *inline_value = NULL, *value = NULL;

    if (streq (arg, "--wait")) {
        args->wait = true;
        return 1;
    }
    if (streq (arg, "--check")) {
        args->check = true;
        return 1;
    }
    if (s_is_option (arg, "--target", &inline_value)) {
        if (s_option_value (argc, argv, index, "--target", inline_value,
                            &value, err, err_len))
            return -1;
        //  A later --target replaces an earlier one, as shells expect
        target_clear (&args->target);
        args->target_text = NULL;
        char why [256] = "";
        if (target_parse (value, &args->target, why, sizeof why) != 0) {
            //  An expression's sentence already says where it went wrong
            if (strncmp (why, "bad target", 10) == 0)
                return s_fail (err, err_len, "%s (in '%s')", why, value);
            return s_fail (err, err_len, "bad target '%s': %s", value, why);
        }
        args->target_text = value;
        return 1;
    }
    if (s_is_option (arg, "-f", &inline_value)
    ||  s_is_option (arg, "--file", &inline_value)) {
        if (s_option_value (argc, argv, index, "-f", inline_value, &value,
                            err, err_len))
            return -1;
        if (!*value)
            return s_fail (err, err_len, "-f needs a job file name");
        args->file = value;
        return 1;
    }
    if (s_is_option (arg, "--timeout", &inline_value)) {
        if (s_option_value (argc, argv, index, "--timeout", inline_value,
                            &value, err, err_len)
        ||  s_duration_option ("--timeout", value, &args->task_timeout_ms,
                               err, err_len))
            return -1;
        return 1;
    }
    if (s_is_option (arg, "--job-timeout", &inline_value)) {
        if (s_option_value (argc, argv, index, "--job-timeout", inline_value,
                            &value, err, err_len)
        ||  s_duration_option ("--job-timeout", value, &args->job_timeout_ms,
                               err, err_len))
            return -1;
        return 1;
    }
    if (s_is_option (arg, "--retries", &inline_value)) {
        if (s_option_value (argc, argv, index, "--retries", inline_value,
                            &value, err, err_len))
            return -1;
        if (s_parse_int (value, 0, JOB_MAX_RETRIES, &args->retries))
            return s_fail (err, err_len,
                           "--retries must be a whole number from 0 to %d, "
                           "not '%s'", JOB_MAX_RETRIES, value);
        return 1;
    }
    if (s_is_option (arg, "--strategy", &inline_value)) {
        if (s_option_value (argc, argv, index, "--strategy", inline_value,
                            &value, err, err_len))
            return -1;
        if (!streq (value, "fail-fast") && !streq (value, "continue"))
            return s_fail (err, err_len, "--strategy must be fail-fast or "
                           "continue, not '%s'", value);
        args->strategy = value;
        return 1;
    }
    if (s_is_option (arg, "--priority", &inline_value)) {
        if (s_option_value (argc, argv, index, "--priority", inline_value,
                            &value, err, err_len))
            return -1;
        if (s_parse_int (value, S_MIN_PRIORITY, S_MAX_PRIORITY,
                         &args->priority))
            return s_fail (err, err_len,
                           "--priority must be a whole number from %d to %d, "
                           "not '%s'", S_MIN_PRIORITY, S_MAX_PRIORITY, value);
        args->priority_given = true;
        return 1;
    }
    if (s_is_option (arg, "--batch", &inline_value)) {
        if (s_option_value (argc, argv, index, "--batch", inline_value,
                            &value, err, err_len))
            return -1;
        if (job_amount_parse (value, true, &args->batch))
            return s_fail (err, err_len, "--batch must be a node count (1 to "
                           "%d) or a percent (1%% to 100%%), not '%s'",
                           JOB_MAX_BATCH, value);
        return 1;
    }
    if (s_is_option (arg, "--max-failures", &inline_value)) {
        if (s_option_value (argc, argv, index, "--max-failures",
                            inline_value, &value, err, err_len))
            return -1;
        if (job_amount_parse (value, false, &args->max_failures))
            return s_fail (err, err_len, "--max-failures must be a node "
                           "count (0 to %d) or a percent (1%% to 100%%), "
                           "not '%s'", JOB_MAX_BATCH, value);
        return 1;
    }
    if (s_is_option (arg, "--canary", &inline_value)) {
        int canary = 0;
        if (s_option_value (argc, argv, index, "--canary", inline_value,
                            &value, err, err_len))
            return -1;
        if (s_parse_int (value, 1, JOB_MAX_BATCH, &canary))
            return s_fail (err, err_len, "--canary must be a whole number "
                           "from 1 to %d, not '%s'", JOB_MAX_BATCH, value);
        args->canary = (uint32_t) canary;
        return 1;
    }
    return 0;
}

//  Options of schedule add that job run does not have. Returns 1, 0 or
//  -1.
static int
s_schedule_option (cli_args_t *args, int argc, char *const *argv,
                   int *index, char *err, size_t err_len)
{
    static const struct {
        const char *name;
        size_t offset;
    } options [] = {
        {"--cron", offsetof (cli_args_t, cron)},
        {"--every", offsetof (cli_args_t, every)},
        {"--tz", offsetof (cli_args_t, tz)},
        {"--overlap", offsetof (cli_args_t, overlap)},
        {"--catch-up", offsetof (cli_args_t, catch_up)},
        {"--catch-up-window", offsetof (cli_args_t, catch_up_window)}};
    const char *inline_value = NULL, *value = NULL;
    for (size_t i = 0; i < sizeof options / sizeof options [0]; i++) {
        if (!s_is_option (argv [*index], options [i].name, &inline_value))
            continue;
        if (s_option_value (argc, argv, index, options [i].name,
                            inline_value, &value, err, err_len))
            return -1;
        *(const char **) ((char *) args + options [i].offset) = value;
        return 1;
    }
    return 0;
}

//  Checks a complete schedule add: its name, when it fires, and its job
//  (as job run's).
static int
s_schedule_check (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id)
        return s_fail (err, err_len, "schedule add needs a NAME, e.g. "
                       "gridcli schedule add nightly --cron '0 3 * * *' -f "
                       "job.yaml");
    if (!name_valid (args->id))
        return s_fail (err, err_len, "'%s' is not a schedule name (letters, "
                       "digits, '_' and '-', at most %d)", args->id,
                       NAME_MAX_LEN);
    if (!args->cron == !args->every)
        return s_fail (err, err_len, "schedule add needs one of --cron EXPR "
                       "and --every D");
    char why [256] = "";
    cron_t cron;
    if (args->cron && cron_parse (args->cron, &cron, why, sizeof why) != 0)
        return s_fail (err, err_len, "bad --cron '%s': %s", args->cron, why);
    int64_t ms = 0;
    if (args->every && (duration_parse (args->every, &ms) != 0 || ms < 1000))
        return s_fail (err, err_len, "--every must be an interval from 1s "
                       "to 30d (like 30s, 10m or 1h30m), not '%s'",
                       args->every);
    if (args->tz && args->every)
        return s_fail (err, err_len, "--tz goes with --cron only");
    const char *overlaps [] = {"skip", "queue", "allow", NULL};
    const char *catch_ups [] = {"one", "none", NULL};
    if (args->overlap && !s_in_list (args->overlap, overlaps))
        return s_fail (err, err_len, "--overlap must be skip, queue or "
                       "allow, not '%s'", args->overlap);
    if (args->catch_up && !s_in_list (args->catch_up, catch_ups))
        return s_fail (err, err_len, "--catch-up must be one or none, not "
                       "'%s'", args->catch_up);
    if (args->catch_up_window
        && duration_parse (args->catch_up_window, &ms) != 0)
        return s_fail (err, err_len, "--catch-up-window must be a duration "
                       "up to 30d, not '%s'", args->catch_up_window);
    if (args->wait)
        return s_fail (err, err_len, "--wait is for job run; schedule run "
                       "NAME starts a run now");
    if (args->file) {
        if (args->target_text || args->backend || args->param_count
            || args->task_timeout_ms || args->retries >= 0 || args->strategy
            || args->priority_given || args->job_timeout_ms)
            return s_fail (err, err_len, "schedule add -f FILE takes the "
                           "target, tasks and options from the file");
        return 0;
    }
    if (!args->target_text)
        return s_fail (err, err_len, "schedule add needs --target T or -f "
                       "FILE");
    if (!args->backend || !args->action)
        return s_fail (err, err_len, "schedule add needs BACKEND and ACTION "
                       "after its options, e.g. gridcli schedule add beat "
                       "--every 10m --target all test echo --msg hi");
    if (!name_valid (args->backend) || !name_valid (args->action))
        return s_fail (err, err_len, "'%s %s' is not a valid backend and "
                       "action", args->backend, args->action);
    return 0;
}

//  Options of the other subcommands. Returns 1, 0 or -1.
static int
s_command_option (cli_args_t *args, int argc, char *const *argv, int *index,
                  char *err, size_t err_len)
{
    const char *arg = argv [*index];
    const char *inline_value = NULL, *value = NULL;

    if (args->command == CLI_CMD_JOB_RUN)
        return s_run_option (args, argc, argv, index, err, err_len);
    if (args->command == CLI_CMD_SCHEDULE_ADD) {
        int rc = s_schedule_option (args, argc, argv, index, err, err_len);
        return rc ? rc : s_run_option (args, argc, argv, index, err, err_len);
    }
    if (args->command == CLI_CMD_JOB_LIST
    &&  s_is_option (arg, "--schedule", &inline_value)) {
        if (s_option_value (argc, argv, index, "--schedule", inline_value,
                            &value, err, err_len))
            return -1;
        if (!name_valid (value))
            return s_fail (err, err_len, "--schedule needs a schedule name, "
                           "not '%s'", value);
        args->schedule_filter = value;
        return 1;
    }

    if (args->command == CLI_CMD_JOB_LIST
    &&  s_is_option (arg, "--status", &inline_value)) {
        if (s_option_value (argc, argv, index, "--status", inline_value,
                            &value, err, err_len))
            return -1;
        if (!s_in_list (value, s_job_statuses))
            return s_fail (err, err_len,
                           "--status must be one of pending, running, "
                           "completed, partial_failure, failed, cancelled; "
                           "not '%s'", value);
        args->status_filter = value;
        return 1;
    }
    if (args->command == CLI_CMD_JOB_LIST
    &&  s_is_option (arg, "--limit", &inline_value)) {
        if (s_option_value (argc, argv, index, "--limit", inline_value,
                            &value, err, err_len))
            return -1;
        if (s_parse_int (value, 1, S_MAX_LIMIT, &args->limit))
            return s_fail (err, err_len, "--limit must be a whole number "
                           "from 1 to %d, not '%s'", S_MAX_LIMIT, value);
        return 1;
    }
    if (args->command == CLI_CMD_JOB_RETRY && streq (arg, "--failed-only")) {
        args->failed_only = true;
        return 1;
    }
    if (args->command == CLI_CMD_JOB_RETRY
    &&  s_is_option (arg, "--target", &inline_value))
        return s_run_option (args, argc, argv, index, err, err_len);
    if ((args->command == CLI_CMD_DLQ_LIST || args->command == CLI_CMD_DLQ_PURGE)
    &&  s_is_option (arg, "--job", &inline_value)) {
        if (s_option_value (argc, argv, index, "--job", inline_value, &value,
                            err, err_len))
            return -1;
        if (!job_id_valid (value))
            return s_fail (err, err_len, "'%s' is not a job id (ids look "
                           "like j-0193a1b2c3d4-0001)", value);
        args->job_filter = value;
        return 1;
    }
    if ((args->command == CLI_CMD_DLQ_LIST
    ||   args->command == CLI_CMD_NODE_HISTORY)
    &&  s_is_option (arg, "--limit", &inline_value)) {
        if (s_option_value (argc, argv, index, "--limit", inline_value,
                            &value, err, err_len))
            return -1;
        if (s_parse_int (value, 1, S_MAX_LIMIT, &args->limit))
            return s_fail (err, err_len, "--limit must be a whole number "
                           "from 1 to %d, not '%s'", S_MAX_LIMIT, value);
        return 1;
    }
    if (args->command == CLI_CMD_DLQ_PURGE
    &&  s_is_option (arg, "--older-than", &inline_value)) {
        int64_t ms = 0;
        if (s_option_value (argc, argv, index, "--older-than", inline_value,
                            &value, err, err_len)
        ||  s_duration_option ("--older-than", value, &ms, err, err_len))
            return -1;
        args->older_than = value;
        return 1;
    }
    if (args->command == CLI_CMD_DLQ_PURGE && streq (arg, "--all")) {
        args->all = true;
        return 1;
    }
    if (args->command == CLI_CMD_JOB_OUTPUT
    &&  s_is_option (arg, "--node", &inline_value)) {
        if (s_option_value (argc, argv, index, "--node", inline_value,
                            &value, err, err_len))
            return -1;
        if (!name_valid (value))
            return s_fail (err, err_len, "--node: '%s' is not a node id",
                           value);
        args->node = value;
        return 1;
    }
    if (args->command == CLI_CMD_JOB_OUTPUT
    &&  s_is_option (arg, "--step", &inline_value)) {
        if (s_option_value (argc, argv, index, "--step", inline_value,
                            &value, err, err_len))
            return -1;
        if (s_parse_int (value, 0, JOB_MAX_STEPS - 1, &args->step))
            return s_fail (err, err_len, "--step must be a whole number "
                           "from 0 to %d, not '%s'", JOB_MAX_STEPS - 1,
                           value);
        args->step_given = true;
        return 1;
    }
    if (args->command == CLI_CMD_JOB_OUTPUT && streq (arg, "--stderr")) {
        args->stderr_stream = true;
        return 1;
    }
    if (args->command == CLI_CMD_JOB_CANCEL
    &&  s_is_option (arg, "--reason", &inline_value)) {
        if (s_option_value (argc, argv, index, "--reason", inline_value,
                            &value, err, err_len))
            return -1;
        args->reason = value;
        return 1;
    }
    return 0;
}

//  One argument after `job run ... BACKEND ACTION`: --wait, or a param
//  written --NAME VALUE or --NAME=VALUE.
static int
s_param_arg (cli_args_t *args, int argc, char *const *argv, int *index,
             char *err, size_t err_len)
{
    const char *arg = argv [*index];
    if (streq (arg, "--wait")) {
        args->wait = true;
        return 0;
    }
    if (strncmp (arg, "--", 2) != 0 || arg [2] == 0)
        return s_fail (err, err_len,
                       "unexpected argument '%s' after the action; params "
                       "are written --NAME VALUE", arg);

    const char *equals = strchr (arg + 2, '=');
    size_t name_len = equals ? (size_t) (equals - arg - 2) : strlen (arg + 2);
    char name [NAME_MAX_LEN + 2];
    if (name_len == 0 || name_len > NAME_MAX_LEN)
        return s_fail (err, err_len, "'%s' is not a valid param name "
                       "(letters, digits, '_' and '-', at most %d)", arg,
                       NAME_MAX_LEN);
    memcpy (name, arg + 2, name_len);
    name [name_len] = 0;
    if (!name_valid (name))
        return s_fail (err, err_len, "'--%s' is not a valid param name "
                       "(letters, digits, '_' and '-')", name);

    const char *value;
    if (equals)
        value = equals + 1;
    else
    if (*index + 1 < argc && !streq (argv [*index + 1], "--wait"))
        value = argv [++*index];
    else
        return s_fail (err, err_len, "param --%s needs a value "
                       "(write --%s VALUE)", name, name);

    for (size_t p = 0; p < args->param_count; p++)
        if (streq (args->params [p].name, name))
            return s_fail (err, err_len, "param --%s is given twice", name);
    if (args->param_count >= JOB_MAX_PARAMS)
        return s_fail (err, err_len, "too many params (at most %d)",
                       JOB_MAX_PARAMS);

    args->params = s_realloc (args->params,
                              (args->param_count + 1) * sizeof (cli_param_t));
    args->params [args->param_count].name = s_strdup (name);
    args->params [args->param_count].value = s_strdup (value);
    args->param_count++;
    return 0;
}

static const char *
s_command_name (cli_command_t command)
{
    switch (command) {
        case CLI_CMD_JOB_RUN: return "job run";
        case CLI_CMD_JOB_STATUS: return "job status";
        case CLI_CMD_JOB_LIST: return "job list";
        case CLI_CMD_JOB_CANCEL: return "job cancel";
        case CLI_CMD_JOB_EVENTS: return "job events";
        case CLI_CMD_NODE_LIST: return "node list";
        case CLI_CMD_NODE_INFO: return "node info";
        case CLI_CMD_STATUS: return "status";
        case CLI_CMD_JOB_DELETE: return "job delete";
        case CLI_CMD_NODE_DRAIN: return "node drain";
        case CLI_CMD_NODE_RESUME: return "node resume";
        case CLI_CMD_BROKER_DRAIN: return "broker drain";
        case CLI_CMD_BROKER_RESUME: return "broker resume";
        case CLI_CMD_KEY_LIST: return "key list";
        case CLI_CMD_KEY_ACCEPT: return "key accept";
        case CLI_CMD_KEY_REJECT: return "key reject";
        case CLI_CMD_KEY_DELETE: return "key delete";
        case CLI_CMD_JOB_RETRY: return "job retry";
        case CLI_CMD_DLQ_LIST: return "dlq list";
        case CLI_CMD_DLQ_SHOW: return "dlq show";
        case CLI_CMD_DLQ_RETRY: return "dlq retry";
        case CLI_CMD_DLQ_PURGE: return "dlq purge";
        case CLI_CMD_QUEUE_STATS: return "queue stats";
        case CLI_CMD_NODE_WORKERS: return "node workers";
        case CLI_CMD_NODE_HISTORY: return "node history";
        case CLI_CMD_JOB_OUTPUT: return "job output";
        case CLI_CMD_SCHEDULE_ADD: return "schedule add";
        case CLI_CMD_SCHEDULE_LIST: return "schedule list";
        case CLI_CMD_SCHEDULE_SHOW: return "schedule show";
        case CLI_CMD_SCHEDULE_PAUSE: return "schedule pause";
        case CLI_CMD_SCHEDULE_RESUME: return "schedule resume";
        case CLI_CMD_SCHEDULE_DELETE: return "schedule delete";
        case CLI_CMD_SCHEDULE_RUN: return "schedule run";
        default: return "gridcli";
    }
}

//  Checks what a complete command line must hold.
static int
s_args_check (cli_args_t *args, char *err, size_t err_len)
{
    switch (args->command) {
        case CLI_CMD_JOB_RUN:
            if (args->check && args->wait)
                return s_fail (err, err_len, "--check runs nothing, so there "
                               "is nothing to --wait for");
            if (args->file) {
                if (args->target_text || args->backend
                ||  args->param_count || args->task_timeout_ms
                ||  args->retries >= 0 || args->strategy
                ||  args->priority_given || args->job_timeout_ms)
                    return s_fail (err, err_len,
                                   "job run -f FILE takes the target, tasks "
                                   "and options from the file; only --wait, "
                                   "--check, --batch, --max-failures, "
                                   "--canary and global options may be "
                                   "added");
                return 0;
            }
            if (!args->target_text)
                return s_fail (err, err_len, "job run needs --target "
                               "(e.g. --target group:web) or -f FILE");
            if (!args->backend || !args->action)
                return s_fail (err, err_len,
                               "job run needs BACKEND and ACTION after its "
                               "options, e.g. gridcli job run --target all "
                               "test echo --msg hi");
            if (!name_valid (args->backend))
                return s_fail (err, err_len, "'%s' is not a valid backend "
                               "name", args->backend);
            if (!name_valid (args->action))
                return s_fail (err, err_len, "'%s' is not a valid action "
                               "name", args->action);
            return 0;
        case CLI_CMD_DLQ_SHOW:
        case CLI_CMD_DLQ_RETRY:
            if (!args->id)
                return s_fail (err, err_len, "%s needs an entry id (JOB/STEP/"
                               "NODE, see gridcli dlq list)%s",
                               s_command_name (args->command),
                               args->command == CLI_CMD_DLQ_RETRY
                                   ? " or a job id" : "");
            return 0;
        case CLI_CMD_DLQ_PURGE:
            if (!args->id && !args->job_filter && !args->older_than
            &&  !args->all)
                return s_fail (err, err_len, "dlq purge needs ENTRY, --job "
                               "ID, --older-than D or --all");
            return 0;
        case CLI_CMD_JOB_RETRY:
        case CLI_CMD_JOB_STATUS:
        case CLI_CMD_JOB_CANCEL:
        case CLI_CMD_JOB_EVENTS:
        case CLI_CMD_JOB_DELETE:
        case CLI_CMD_JOB_OUTPUT:
            if (!args->id)
                return s_fail (err, err_len, "%s needs a job id",
                               s_command_name (args->command));
            if (!job_id_valid (args->id))
                return s_fail (err, err_len, "'%s' is not a job id (ids look "
                               "like j-0193a1b2c3d4-0001)", args->id);
            return 0;
        case CLI_CMD_KEY_ACCEPT:
        case CLI_CMD_KEY_REJECT:
        case CLI_CMD_KEY_DELETE:
            if (!args->id)
                return s_fail (err, err_len, "%s needs a node id or a public "
                               "key (see gridcli key list)",
                               s_command_name (args->command));
            if (!keys_z85_valid (args->id) && !name_valid (args->id))
                return s_fail (err, err_len, "'%s' is neither a node id nor a "
                               "public key (40 characters of Z85)", args->id);
            return 0;
        case CLI_CMD_SCHEDULE_ADD:
            return s_schedule_check (args, err, err_len);
        case CLI_CMD_SCHEDULE_SHOW:
        case CLI_CMD_SCHEDULE_PAUSE:
        case CLI_CMD_SCHEDULE_RESUME:
        case CLI_CMD_SCHEDULE_DELETE:
        case CLI_CMD_SCHEDULE_RUN:
            if (!args->id)
                return s_fail (err, err_len, "%s needs a schedule name",
                               s_command_name (args->command));
            if (!name_valid (args->id))
                return s_fail (err, err_len, "'%s' is not a schedule name "
                               "(letters, digits, '_' and '-', at most %d)",
                               args->id, NAME_MAX_LEN);
            return 0;
        case CLI_CMD_NODE_INFO:
        case CLI_CMD_NODE_DRAIN:
        case CLI_CMD_NODE_RESUME:
        case CLI_CMD_NODE_WORKERS:
        case CLI_CMD_NODE_HISTORY:
            if (!args->id)
                return s_fail (err, err_len, "%s needs a node id",
                               s_command_name (args->command));
            if (!name_valid (args->id))
                return s_fail (err, err_len, "'%s' is not a node id (letters, "
                               "digits, '_' and '-', at most %d)", args->id,
                               NAME_MAX_LEN);
            return 0;
        default:
            return 0;
    }
}

//  The subcommand's own arguments, from ARGV[INDEX] on.
static int
s_parse_command_args (cli_args_t *args, int argc, char *const *argv,
                      int index, const char *topic, char *err, size_t err_len)
{
    bool params = false;         //  Past `job run BACKEND ACTION`
    for (; index < argc; index++) {
        const char *arg = argv [index];
        if (params) {
            if (s_param_arg (args, argc, argv, &index, err, err_len))
                return -1;
            continue;
        }
        //  A public key may start with '-': 40 characters of Z85 are a key
        if ((args->command == CLI_CMD_KEY_ACCEPT
        ||   args->command == CLI_CMD_KEY_REJECT
        ||   args->command == CLI_CMD_KEY_DELETE)
        &&  !args->id && keys_z85_valid (arg)) {
            args->id = arg;
            continue;
        }
        if (arg [0] == '-' && arg [1]) {
            int rc = s_global_option (args, argc, argv, &index, topic, err,
                                      err_len);
            if (rc == 0)
                rc = s_command_option (args, argc, argv, &index, err,
                                       err_len);
            if (rc < 0)
                return -1;
            if (rc == 0)
                return s_fail (err, err_len, "unknown option '%s' for %s "
                               "(see gridcli %s --help)", arg,
                               s_command_name (args->command), topic);
            if (args->command == CLI_CMD_HELP
            ||  args->command == CLI_CMD_VERSION
            ||  args->command == CLI_CMD_PRINT_CONFIG)
                return 0;
            continue;
        }
        if (args->command == CLI_CMD_SCHEDULE_ADD && !args->id) {
            args->id = arg;
            continue;
        }
        if ((args->command == CLI_CMD_JOB_RUN
        ||   args->command == CLI_CMD_SCHEDULE_ADD) && !args->file) {
            if (!args->backend)
                args->backend = arg;
            else {
                args->action = arg;
                params = true;
            }
            continue;
        }
        if (args->command == CLI_CMD_JOB_RUN
        ||  args->command == CLI_CMD_SCHEDULE_ADD)
            return s_fail (err, err_len,
                           "unexpected argument '%s': %s -f FILE takes "
                           "the whole job from the file", arg,
                           s_command_name (args->command));
        if ((args->command == CLI_CMD_JOB_STATUS
        ||   args->command == CLI_CMD_JOB_CANCEL
        ||   args->command == CLI_CMD_JOB_EVENTS
        ||   args->command == CLI_CMD_JOB_DELETE
        ||   args->command == CLI_CMD_JOB_OUTPUT
        ||   args->command == CLI_CMD_NODE_INFO
        ||   args->command == CLI_CMD_NODE_DRAIN
        ||   args->command == CLI_CMD_NODE_RESUME
        ||   args->command == CLI_CMD_KEY_ACCEPT
        ||   args->command == CLI_CMD_KEY_REJECT
        ||   args->command == CLI_CMD_KEY_DELETE
        ||   args->command == CLI_CMD_JOB_RETRY
        ||   args->command == CLI_CMD_DLQ_SHOW
        ||   args->command == CLI_CMD_DLQ_RETRY
        ||   args->command == CLI_CMD_DLQ_PURGE
        ||   args->command == CLI_CMD_NODE_WORKERS
        ||   args->command == CLI_CMD_NODE_HISTORY
        ||   args->command == CLI_CMD_SCHEDULE_SHOW
        ||   args->command == CLI_CMD_SCHEDULE_PAUSE
        ||   args->command == CLI_CMD_SCHEDULE_RESUME
        ||   args->command == CLI_CMD_SCHEDULE_DELETE
        ||   args->command == CLI_CMD_SCHEDULE_RUN) && !args->id) {
            args->id = arg;
            continue;
        }
        return s_fail (err, err_len, "unexpected argument '%s' for %s", arg,
                       s_command_name (args->command));
    }
    return s_args_check (args, err, err_len);
}

//  The commands that take a subcommand, as one table: TOPIC SUB -> command.
typedef struct {
    const char *topic;            //  The first word
    const char *subs [10];        //  Its subcommands, in help order
    cli_command_t commands [10];  //  The command each names
} s_topic_t;

static const s_topic_t s_topics [] = {
    {"job", {"run", "status", "list", "cancel", "events", "delete", "retry",
             "output"},
     {CLI_CMD_JOB_RUN, CLI_CMD_JOB_STATUS, CLI_CMD_JOB_LIST,
      CLI_CMD_JOB_CANCEL, CLI_CMD_JOB_EVENTS, CLI_CMD_JOB_DELETE,
      CLI_CMD_JOB_RETRY, CLI_CMD_JOB_OUTPUT}},
    {"node", {"list", "info", "drain", "resume", "workers", "history"},
     {CLI_CMD_NODE_LIST, CLI_CMD_NODE_INFO, CLI_CMD_NODE_DRAIN,
      CLI_CMD_NODE_RESUME, CLI_CMD_NODE_WORKERS, CLI_CMD_NODE_HISTORY}},
    {"broker", {"drain", "resume"},
     {CLI_CMD_BROKER_DRAIN, CLI_CMD_BROKER_RESUME}},
    {"key", {"list", "accept", "reject", "delete"},
     {CLI_CMD_KEY_LIST, CLI_CMD_KEY_ACCEPT, CLI_CMD_KEY_REJECT,
      CLI_CMD_KEY_DELETE}},
    {"queue", {"stats"}, {CLI_CMD_QUEUE_STATS}},
    {"dlq", {"list", "show", "retry", "purge"},
     {CLI_CMD_DLQ_LIST, CLI_CMD_DLQ_SHOW, CLI_CMD_DLQ_RETRY,
      CLI_CMD_DLQ_PURGE}},
    {"schedule", {"add", "list", "show", "pause", "resume", "delete", "run"},
     {CLI_CMD_SCHEDULE_ADD, CLI_CMD_SCHEDULE_LIST, CLI_CMD_SCHEDULE_SHOW,
      CLI_CMD_SCHEDULE_PAUSE, CLI_CMD_SCHEDULE_RESUME,
      CLI_CMD_SCHEDULE_DELETE, CLI_CMD_SCHEDULE_RUN}},
};

//  The table row of TOPIC, or NULL.
static const s_topic_t *
s_topic_subcommands (const char *topic)
{
    for (size_t index = 0; index < sizeof s_topics / sizeof s_topics [0];
         index++)
        if (streq (s_topics [index].topic, topic))
            return &s_topics [index];
    return NULL;
}

//  Sets ARGS->command from TOPIC's subcommand SUB (NULL: none given; -h,
//  --help and help: the topic's help). Returns 0, or -1 with a sentence
//  that lists the subcommands.
static int
s_subcommand (cli_args_t *args, const char *topic, const char *sub,
              char *err, size_t err_len)
{
    const s_topic_t *row = s_topic_subcommands (topic);
    char names [256] = "";
    size_t count = 0;
    while (count < 10 && row->subs [count])
        count++;
    if (sub && (streq (sub, "-h") || streq (sub, "--help") || streq (sub, "help"))) {
        args->command = CLI_CMD_HELP;
        return 0;
    }
    for (size_t index = 0; index < count; index++) {
        if (sub && streq (sub, row->subs [index])) {
            args->command = row->commands [index];
            return 0;
        }
        size_t used = strlen (names);
        snprintf (names + used, sizeof names - used, "%s%s",
                  index == 0 ? "" : !sub && index == count - 1 ? " or "
                                                              : ", ",
                  row->subs [index]);
    }
    if (!sub)
        return s_fail (err, err_len, "%s needs a subcommand: %s", topic,
                       names);
    return s_fail (err, err_len, "unknown %s subcommand '%s' (%s)", topic, sub,
                   names);
}

int
cli_args_parse (cli_args_t *args, int argc, char *const *argv, char *err,
                size_t err_len)
{
    memset (args, 0, sizeof *args);
    args->retries = -1;
    if (err_len)
        err [0] = 0;

    //  Global options before the command
    int index = 1;
    for (; index < argc; index++) {
        const char *arg = argv [index];
        if (arg [0] != '-' || arg [1] == 0)
            break;
        int rc = s_global_option (args, argc, argv, &index, NULL, err,
                                  err_len);
        if (rc < 0)
            return -1;
        if (rc == 0)
            return s_fail (err, err_len,
                           "unknown option '%s' (global options are "
                           "--broker, --output, --request-timeout, --config, "
                           "--key, --broker-key, --insecure, --help and "
                           "--version)", arg);
        if (args->command == CLI_CMD_HELP || args->command == CLI_CMD_VERSION)
            return 0;
    }
    //  --print-config shows what the other global options make of the
    //  settings; it takes no command
    if (args->command == CLI_CMD_PRINT_CONFIG)
        return index < argc ? s_fail (err, err_len, "--print-config takes no "
                                      "command ('%s')", argv [index])
                            : 0;
    if (index >= argc)
        return s_fail (err, err_len, "no command given");

    const char *word = argv [index++];
    if (streq (word, "help")) {
        args->command = CLI_CMD_HELP;
        if (index < argc) {
            const char *topics [] = { "job", "node", "broker", "status",
                                      "key", "dlq", "queue", "schedule",
                                      NULL };
            if (!s_in_list (argv [index], topics))
                return s_fail (err, err_len, "no help on '%s' (topics: job, "
                               "node, broker, key, dlq, queue, schedule, "
                               "status)",
                               argv [index]);
            args->help_topic = argv [index];
        }
        return 0;
    }
    if (streq (word, "status")) {
        args->command = CLI_CMD_STATUS;
        args->help_topic = "status";
        return s_parse_command_args (args, argc, argv, index, "status", err,
                                     err_len);
    }
    if (s_topic_subcommands (word)) {
        args->help_topic = s_topic_subcommands (word)->topic;
        if (s_subcommand (args, word, index < argc ? argv [index] : NULL,
                          err, err_len) != 0)
            return -1;
        if (args->command == CLI_CMD_HELP)
            return 0;
        return s_parse_command_args (args, argc, argv, index + 1,
                                     args->help_topic, err, err_len);
    }
    if (streq (word, "keygen"))
        return s_fail (err, err_len, "keygen takes no global options: run "
                       "gridcli keygen [--out DIR] [--name NAME]");
    return s_fail (err, err_len,
                   "unknown command '%s' (commands: job, node, broker, key, "
                   "dlq, queue, keygen, schedule, status, help)",
                   word);
}

void
cli_args_clear (cli_args_t *args)
{
    if (!args)
        return;
    target_clear (&args->target);
    for (size_t index = 0; index < args->param_count; index++) {
        free (args->params [index].name);
        free (args->params [index].value);
    }
    free (args->params);
    memset (args, 0, sizeof *args);
}

//  ---------------------------------------------------------------------
//  Settings: flags > environment > config file > defaults

static int
s_settings_load (const char *path, cli_settings_t *settings, char *err,
                 size_t err_len)
{
    pv_doc_t *doc = NULL;
    char why [512] = "";
    if (conf_load_file (path, &doc, why, sizeof why) != 0)
        return s_fail (err, err_len, "config: %s", why);

    static const char *const known [] = {
        "broker", "output", "request_timeout", "key", "broker_key",
        "insecure", NULL
    };
    const pv_t *root = pv_doc_root (doc);
    char *broker = NULL;
    char *output = NULL;
    int64_t timeout_ms = 0;
    int rc = -1;
    if (pv_type (root) != PV_MAP)
        s_fail (err, err_len, "config %s: expected a mapping of keys", path);
    else
    if (conf_check_keys (root, known, why, sizeof why)
    ||  conf_get_str (root, "broker", &broker, why, sizeof why)
    ||  conf_get_str (root, "output", &output, why, sizeof why)
    ||  conf_get_str (root, "key", &settings->key_path, why, sizeof why)
    ||  conf_get_str (root, "broker_key", &settings->broker_key, why,
                      sizeof why)
    ||  conf_get_bool (root, "insecure", &settings->insecure, why, sizeof why)
    ||  conf_get_duration (root, "request_timeout", &timeout_ms, why,
                           sizeof why))
        s_fail (err, err_len, "config %s: %s", path, why);
    else
    if (broker && !*broker)
        s_fail (err, err_len, "config %s: broker: expected an endpoint such "
                "as tcp://127.0.0.1:7701", path);
    else
    if (output && !streq (output, "table") && !streq (output, "json"))
        s_fail (err, err_len, "config %s: output: expected table or json, "
                "not '%s'", path, output);
    else
    if (pv_map_get (root, "request_timeout") && timeout_ms <= 0)
        s_fail (err, err_len, "config %s: request_timeout: must be longer "
                "than 0", path);
    else {
        if (broker) {
            free (settings->broker);
            settings->broker = broker;
            broker = NULL;
        }
        if (output)
            settings->output = streq (output, "json") ? CLI_OUTPUT_JSON
                                                      : CLI_OUTPUT_TABLE;
        if (timeout_ms > 0)
            settings->request_timeout_ms = timeout_ms;
        settings->config_path = s_strdup (path);
        rc = 0;
    }
    free (broker);
    free (output);
    pv_doc_destroy (&doc);
    return rc;
}

int
cli_settings_resolve (const cli_args_t *args, const char *env_broker,
                      const char *env_config, const char *default_config,
                      cli_settings_t *settings, char *err, size_t err_len)
{
    memset (settings, 0, sizeof *settings);
    settings->output = CLI_OUTPUT_TABLE;
    settings->request_timeout_ms = CLI_DEFAULT_REQUEST_TIMEOUT_MS;

    const char *path = NULL;
    if (args->config)
        path = args->config;
    else
    if (env_config && *env_config)
        path = env_config;
    else
    if (default_config && access (default_config, F_OK) == 0)
        path = default_config;
    if (path && streq (path, "none"))
        path = NULL;             //  --config none: no file at all
    if (path && s_settings_load (path, settings, err, err_len)) {
        cli_settings_clear (settings);
        return -1;
    }

    if (args->broker) {
        free (settings->broker);
        settings->broker = s_strdup (args->broker);
    }
    else
    if (env_broker && *env_broker) {
        free (settings->broker);
        settings->broker = s_strdup (env_broker);
    }
    else
    if (!settings->broker)
        settings->broker = s_strdup (CLI_DEFAULT_BROKER);
    if (args->output_given)
        settings->output = args->output;
    if (args->request_timeout_ms > 0)
        settings->request_timeout_ms = args->request_timeout_ms;
    return 0;
}

void
cli_settings_clear (cli_settings_t *settings)
{
    if (!settings)
        return;
    free (settings->broker);
    free (settings->config_path);
    free (settings->key_path);
    free (settings->broker_key);
    cli_keys_clear (&settings->keys);
    memset (settings, 0, sizeof *settings);
}

//  ---------------------------------------------------------------------
//  Request ids and requests

void
cli_request_id_make (char *buf, size_t buf_len)
{
    static uint32_t counter = 0;

    //  The short host name, kept to name characters so that the whole id
    //  is a valid name and stays well under 64 characters.
    char host [256] = "";
    char clean [25] = "";
    if (gethostname (host, sizeof host - 1) != 0)
        host [0] = 0;
    size_t used = 0;
    for (size_t index = 0; host [index] && host [index] != '.'
                           && used < sizeof clean - 1; index++) {
        char c = host [index];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
               || (c >= '0' && c <= '9') || c == '_' || c == '-';
        clean [used++] = ok ? c : '-';
    }
    clean [used] = 0;
    if (!used)
        strcpy (clean, "host");

    uint32_t random_part = 0;
    if (getrandom (&random_part, sizeof random_part, GRND_NONBLOCK)
        != (ssize_t) sizeof random_part)
        random_part = (uint32_t) zclock_usecs ()
                    ^ ((uint32_t) getpid () << 16) ^ (counter * 2654435761u);
    counter++;
    snprintf (buf, buf_len, "%s-%u-%" PRIu32 "-%08" PRIx32, clean,
              (unsigned) getpid () % 10000000u, counter, random_part);
}

static void
s_write_duration (pw_t *writer, int64_t ms)
{
    char text [32];
    duration_format (ms, text, sizeof text);
    pw_str (writer, text);
}

static void
s_write_target (pw_t *writer, const target_t *target)
{
    bool has_value = target->scope != TARGET_ALL && target->value;
    pw_map (writer, 1 + (has_value ? 1 : 0) + (target->any ? 1 : 0));
    pw_str (writer, "scope");
    pw_str (writer, target_scope_name (target->scope));
    if (has_value) {
        pw_str (writer, "value");
        pw_str (writer, target->value);
    }
    if (target->any) {
        pw_str (writer, "any");
        pw_bool (writer, true);
    }
}

void
cli_job_write (const cli_args_t *args, pw_t *writer)
{
    size_t fields = 2 + (args->strategy ? 1 : 0)
                  + (args->job_timeout_ms ? 1 : 0)
                  + (args->priority_given ? 1 : 0)
                  + (args->batch.set ? 1 : 0)
                  + (args->max_failures.set ? 1 : 0)
                  + (args->canary ? 1 : 0);
    pw_map (writer, fields);
    pw_str (writer, "target");
    s_write_target (writer, &args->target);

    pw_str (writer, "tasks");
    pw_array (writer, 1);
    size_t task_fields = 2 + (args->param_count ? 1 : 0)
                       + (args->task_timeout_ms ? 1 : 0)
                       + (args->retries >= 0 ? 1 : 0);
    pw_map (writer, task_fields);
    pw_str (writer, "backend");
    pw_str (writer, args->backend);
    pw_str (writer, "action");
    pw_str (writer, args->action);
    if (args->param_count) {
        pw_str (writer, "params");
        pw_map (writer, args->param_count);
        for (size_t index = 0; index < args->param_count; index++) {
            pw_str (writer, args->params [index].name);
            pw_str (writer, args->params [index].value);
        }
    }
    if (args->task_timeout_ms) {
        pw_str (writer, "timeout");
        s_write_duration (writer, args->task_timeout_ms);
    }
    if (args->retries >= 0) {
        pw_str (writer, "max_retries");
        pw_int (writer, args->retries);
    }

    if (args->strategy) {
        pw_str (writer, "strategy");
        pw_str (writer, args->strategy);
    }
    if (args->job_timeout_ms) {
        pw_str (writer, "timeout");
        s_write_duration (writer, args->job_timeout_ms);
    }
    if (args->priority_given) {
        pw_str (writer, "priority");
        pw_int (writer, args->priority);
    }
    char text [32];
    if (args->batch.set) {
        job_amount_format (&args->batch, text, sizeof text);
        pw_str (writer, "batch");
        pw_str (writer, text);
    }
    if (args->max_failures.set) {
        job_amount_format (&args->max_failures, text, sizeof text);
        pw_str (writer, "max_failures");
        pw_str (writer, text);
    }
    if (args->canary) {
        pw_str (writer, "canary");
        pw_int (writer, args->canary);
    }
}

void
cli_job_apply_options (const cli_args_t *args, job_spec_t *spec)
{
    if (args->batch.set)
        spec->batch = args->batch;
    if (args->max_failures.set)
        spec->max_failures = args->max_failures;
    if (args->canary)
        spec->canary = args->canary;
}

//  Runs the inline job through the same validation the broker applies, so
//  a mistake is reported with its path before anything is sent.
static int
s_job_check (const pw_t *job, job_errors_t *errors)
{
    pv_doc_t *doc = NULL;
    char why [256] = "";
    if (pv_doc_decode (pw_data (job), pw_size (job), &doc, why, sizeof why)) {
        if (errors->count < JOB_MAX_ERRORS)
            errors->items [errors->count++] = s_strdup (why);
        return -1;
    }
    job_spec_t *spec = NULL;
    int rc = job_spec_decode (pv_doc_root (doc), &spec, errors);
    job_spec_destroy (&spec);
    pv_doc_destroy (&doc);
    return rc == 0 ? 0 : -1;
}

static void
s_request_job_get (pw_t *writer, const char *id, const char *job)
{
    proto_request_begin (writer, "job.get", id, 1);
    pw_str (writer, "job");
    pw_str (writer, job);
}

static void
s_request_job_progress (pw_t *writer, const char *id, const char *job)
{
    proto_request_begin (writer, "job.progress", id, 1);
    pw_str (writer, "job");
    pw_str (writer, job);
}

//  job.watch: answered when JOB changes past VERSION (any change when
//  VERSION < 0), or after TIMEOUT_MS.
static void
s_request_job_watch (pw_t *writer, const char *id, const char *job,
                     int64_t version, int64_t timeout_ms)
{
    proto_request_begin (writer, "job.watch", id, version >= 0 ? 3 : 2);
    pw_str (writer, "job");
    pw_str (writer, job);
    pw_str (writer, "timeout_ms");
    pw_int (writer, timeout_ms);
    if (version >= 0) {
        pw_str (writer, "after");
        pw_int (writer, version);
    }
}

static void
s_request_job_events (pw_t *writer, const char *id, const char *job,
                      int64_t after)
{
    proto_request_begin (writer, "job.events", id, after >= 0 ? 2 : 1);
    pw_str (writer, "job");
    pw_str (writer, job);
    if (after >= 0) {
        pw_str (writer, "after");
        pw_int (writer, after);
    }
}

//  The job of job run or schedule add in the wire form: the job file's
//  spec, or the inline job once it passed s_job_check. NULL with ERRORS
//  filled when the inline job is invalid.
static pw_t *
s_job_bytes (const cli_args_t *args, const job_spec_t *file_spec,
             job_errors_t *errors)
{
    pw_t *job = pw_new ();
    if (file_spec)
        job_spec_encode (file_spec, job);
    else {
        cli_job_write (args, job);
        if (s_job_check (job, errors))
            pw_destroy (&job);
    }
    return job;
}

int
cli_request_build (const cli_args_t *args, const job_spec_t *file_spec,
                   const char *id, pw_t *writer, job_errors_t *errors)
{
    job_errors_t local = { .count = 0 };
    if (!errors)
        errors = &local;

    switch (args->command) {
        case CLI_CMD_JOB_RUN: {
            pw_t *job = s_job_bytes (args, file_spec, errors);
            if (!job) {
                job_errors_clear (&local);
                return -1;
            }
            proto_request_begin (writer, args->check ? "job.check"
                                                     : "job.submit",
                                 id, 1);
            pw_str (writer, "job");
            pw_raw (writer, pw_data (job), pw_size (job));
            pw_destroy (&job);
            return 0;
        }
        case CLI_CMD_SCHEDULE_ADD: {
            pw_t *job = s_job_bytes (args, file_spec, errors);
            if (!job) {
                job_errors_clear (&local);
                return -1;
            }
            const char *keys [] = {"cron", "every", "tz", "overlap",
                                   "catch_up", "catch_up_window"};
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
        case CLI_CMD_SCHEDULE_LIST:
            proto_request_begin (writer, "schedule.list", id, 0);
            return 0;
        case CLI_CMD_SCHEDULE_SHOW:
        case CLI_CMD_SCHEDULE_PAUSE:
        case CLI_CMD_SCHEDULE_RESUME:
        case CLI_CMD_SCHEDULE_DELETE:
        case CLI_CMD_SCHEDULE_RUN: {
            const char *type
                = args->command == CLI_CMD_SCHEDULE_SHOW ? "schedule.get"
                : args->command == CLI_CMD_SCHEDULE_PAUSE ? "schedule.pause"
                : args->command == CLI_CMD_SCHEDULE_RESUME ? "schedule.resume"
                : args->command == CLI_CMD_SCHEDULE_DELETE ? "schedule.delete"
                                                           : "schedule.run";
            proto_request_begin (writer, type, id, 1);
            pw_str (writer, "name");
            pw_str (writer, args->id);
            return 0;
        }
        case CLI_CMD_JOB_STATUS:
            s_request_job_get (writer, id, args->id);
            return 0;
        case CLI_CMD_JOB_LIST:
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
        case CLI_CMD_JOB_CANCEL:
            proto_request_begin (writer, "job.cancel", id,
                                 args->reason ? 2 : 1);
            pw_str (writer, "job");
            pw_str (writer, args->id);
            if (args->reason) {
                pw_str (writer, "reason");
                pw_str (writer, args->reason);
            }
            return 0;
        case CLI_CMD_JOB_EVENTS:
            s_request_job_events (writer, id, args->id, -1);
            return 0;
        case CLI_CMD_NODE_LIST:
            proto_request_begin (writer, "node.list", id, 0);
            return 0;
        case CLI_CMD_NODE_INFO:
            proto_request_begin (writer, "node.get", id, 1);
            pw_str (writer, "node");
            pw_str (writer, args->id);
            return 0;
        case CLI_CMD_STATUS:
            proto_request_begin (writer, "status", id, 0);
            return 0;
        case CLI_CMD_JOB_DELETE:
            proto_request_begin (writer, "job.delete", id, 1);
            pw_str (writer, "job");
            pw_str (writer, args->id);
            return 0;
        case CLI_CMD_NODE_DRAIN:
        case CLI_CMD_NODE_RESUME:
            proto_request_begin (writer, args->command == CLI_CMD_NODE_DRAIN
                                             ? "node.drain" : "node.resume",
                                 id, 1);
            pw_str (writer, "node");
            pw_str (writer, args->id);
            return 0;
        case CLI_CMD_BROKER_DRAIN:
            proto_request_begin (writer, "broker.drain", id, 0);
            return 0;
        case CLI_CMD_BROKER_RESUME:
            proto_request_begin (writer, "broker.resume", id, 0);
            return 0;
        case CLI_CMD_KEY_LIST:
            proto_request_begin (writer, "key.list", id, 0);
            return 0;
        case CLI_CMD_KEY_ACCEPT:
        case CLI_CMD_KEY_REJECT:
        case CLI_CMD_KEY_DELETE:
            proto_request_begin (writer,
                                 args->command == CLI_CMD_KEY_ACCEPT
                                     ? "key.accept"
                                 : args->command == CLI_CMD_KEY_REJECT
                                     ? "key.reject" : "key.delete", id, 1);
            pw_str (writer, keys_z85_valid (args->id) ? "key" : "node");
            pw_str (writer, args->id);
            return 0;
        case CLI_CMD_JOB_RETRY:
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
        case CLI_CMD_DLQ_LIST:
            proto_request_begin (writer, "dlq.list", id,
                                 (args->job_filter ? 1 : 0)
                                 + (args->limit ? 1 : 0));
            if (args->job_filter) {
                pw_str (writer, "job");
                pw_str (writer, args->job_filter);
            }
            if (args->limit) {
                pw_str (writer, "limit");
                pw_int (writer, args->limit);
            }
            return 0;
        case CLI_CMD_QUEUE_STATS:
            proto_request_begin (writer, "queue.stats", id, 0);
            return 0;
        case CLI_CMD_NODE_WORKERS:
            proto_request_begin (writer, "node.workers", id, 1);
            pw_str (writer, "node");
            pw_str (writer, args->id);
            return 0;
        case CLI_CMD_NODE_HISTORY:
            proto_request_begin (writer, "node.history", id,
                                 args->limit ? 2 : 1);
            pw_str (writer, "node");
            pw_str (writer, args->id);
            if (args->limit) {
                pw_str (writer, "limit");
                pw_int (writer, args->limit);
            }
            return 0;
        case CLI_CMD_DLQ_SHOW:
        case CLI_CMD_DLQ_RETRY:
            proto_request_begin (writer, args->command == CLI_CMD_DLQ_SHOW
                                             ? "dlq.get" : "dlq.retry", id, 1);
            pw_str (writer, "entry");
            pw_str (writer, args->id);
            return 0;
        case CLI_CMD_DLQ_PURGE:
            proto_request_begin (writer, "dlq.purge", id,
                                 (args->id ? 1 : 0) + (args->job_filter ? 1 : 0)
                                 + (args->older_than ? 1 : 0)
                                 + (args->all ? 1 : 0));
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
        default:
            return -1;
    }
}

//  ---------------------------------------------------------------------
//  Transport: Lazy Pirate over REQ

static zsock_t *
s_socket_new (const char *endpoint, const cli_keys_t *keys,
              int64_t timeout_ms, zsock_t **monitor_p, char *err,
              size_t err_len)
{
    zsock_t *sock = zsock_new (ZMQ_REQ);
    if (!sock) {
        s_fail (err, err_len, "cannot create a socket: %s",
                zmq_strerror (zmq_errno ()));
        return NULL;
    }
    int timeout = timeout_ms > INT32_MAX ? INT32_MAX : (int) timeout_ms;
    //  Linger 0: a request nobody took must not hold the process at exit.
    zsock_set_linger (sock, 0);
    zsock_set_maxmsgsize (sock, PROTO_MAX_FRAME);
    zsock_set_sndhwm (sock, 16);
    zsock_set_rcvhwm (sock, 16);
    zsock_set_sndtimeo (sock, timeout);
    zsock_set_handshake_ivl (sock, timeout);
    zsock_set_heartbeat_ivl (sock, 1000);
    zsock_set_heartbeat_timeout (sock, 3000);
    if (keys && keys->cert) {
        keys_curve_client (sock, keys->cert, keys->broker_key);
        //  A refused key shows only as a failed handshake: watch for it
        *monitor_p = keys_monitor_new (sock);
    }
    if (zsock_connect (sock, "%s", endpoint) != 0) {
        s_fail (err, err_len, "cannot use broker endpoint '%s': %s (endpoints "
                "look like tcp://HOST:PORT or ipc:///PATH)", endpoint,
                zmq_strerror (zmq_errno ()));
        zsock_destroy (&sock);
    }
    return sock;
}

//  Reads the reply waiting on SOCK. Returns CLI_EXIT_OK or
//  CLI_EXIT_UNREACHABLE (malformed).
static int
s_reply_read (zsock_t *sock, const char *endpoint, pv_doc_t **reply_p,
              char *err, size_t err_len)
{
    zmsg_t *msg = zmsg_recv (sock);
    if (!msg) {
        s_fail (err, err_len, "lost the answer from the broker at %s",
                endpoint);
        return CLI_EXIT_UNREACHABLE;
    }
    int rc = CLI_EXIT_OK;
    char why [256] = "";
    if (zmsg_size (msg) != 1) {
        s_fail (err, err_len, "the broker at %s sent a malformed answer "
                "(%zu frames, expected one)", endpoint, zmsg_size (msg));
        rc = CLI_EXIT_UNREACHABLE;
    }
    else {
        zframe_t *frame = zmsg_first (msg);
        if (pv_doc_decode (zframe_data (frame), zframe_size (frame), reply_p,
                           why, sizeof why) != 0) {
            s_fail (err, err_len, "the broker at %s sent a malformed answer "
                    "(%s)", endpoint, why);
            rc = CLI_EXIT_UNREACHABLE;
        }
    }
    zmsg_destroy (&msg);
    return rc;
}

int
cli_exchange (const char *endpoint, const void *request, size_t size,
              int64_t timeout_ms, pv_doc_t **reply_p, char *err,
              size_t err_len)
{
    return cli_exchange_keys (NULL, endpoint, request, size, timeout_ms,
                              reply_p, err, err_len);
}

int
cli_exchange_keys (const cli_keys_t *keys, const char *endpoint,
                   const void *request, size_t size, int64_t timeout_ms,
                   pv_doc_t **reply_p, char *err, size_t err_len)
{
    *reply_p = NULL;
    char handshake [512] = "";
    if (timeout_ms <= 0)
        timeout_ms = CLI_DEFAULT_REQUEST_TIMEOUT_MS;
    int64_t start_ms = zclock_mono ();
    int64_t deadline_ms = start_ms + timeout_ms;

    for (int attempt = 1; attempt <= CLI_REQUEST_TRIES; attempt++) {
        //  Each try gets an equal share of the total; the last one gets
        //  whatever is left, so the total never exceeds TIMEOUT_MS.
        int64_t try_deadline_ms = attempt == CLI_REQUEST_TRIES
            ? deadline_ms
            : start_ms + timeout_ms * attempt / CLI_REQUEST_TRIES;
        int64_t try_ms = try_deadline_ms - zclock_mono ();
        if (try_ms <= 0)
            continue;

        zsock_t *monitor = NULL;
        zsock_t *sock = s_socket_new (endpoint, keys, try_ms, &monitor, err,
                                      err_len);
        if (!sock) {
            zsock_destroy (&monitor);
            return CLI_EXIT_USAGE;
        }
        zframe_t *frame = zframe_new (request, size);
        if (zframe_send (&frame, sock, 0) != 0) {
            //  Nothing queued (send timed out): wait out this try anyway so
            //  that a broker coming up has its chance on the next one.
            zframe_destroy (&frame);
        }
        zpoller_t *poller = zpoller_new (sock, NULL);
        if (monitor)
            zpoller_add (poller, monitor);
        int rc = -1;
        while (rc < 0) {
            int64_t left_ms = try_deadline_ms - zclock_mono ();
            if (left_ms <= 0)
                break;
            void *which = zpoller_wait (poller, (int) left_ms);
            if (which == sock)
                rc = s_reply_read (sock, endpoint, reply_p, err, err_len);
            else
            if (which == monitor && monitor) {
                char why [512] = "";
                int event = keys_monitor_read (monitor, why, sizeof why);
                if (event == 1) {
                    s_fail (err, err_len, "the broker at %s refused this "
                            "client: %s (ask its admin for a role, see "
                            "docs/SECURITY.md)", endpoint, why);
                    rc = CLI_EXIT_REFUSED;
                }
                else
                if (event == 2)
                    snprintf (handshake, sizeof handshake, "%s", why);
            }
            else
            if (zpoller_terminated (poller) || zsys_interrupted) {
                s_fail (err, err_len, "interrupted");
                rc = CLI_EXIT_INTERRUPTED;
            }
            //  Else the try expired, or another signal woke the poll: the
            //  loop looks at the clock again.
        }
        zpoller_destroy (&poller);
        zsock_destroy (&monitor);
        zsock_destroy (&sock);
        if (rc >= 0)
            return rc;
    }
    if (*handshake) {
        s_fail (err, err_len, "no answer from the broker at %s: %s",
                endpoint, handshake);
        return CLI_EXIT_UNREACHABLE;
    }
    if (keys && !keys->cert) {
        char waited [32];
        duration_format (timeout_ms, waited, sizeof waited);
        s_fail (err, err_len, "no answer from the broker at %s after %s; "
                "check that gridbroker is running and that this is its "
                "--client endpoint (set --broker or GRID_BROKER). This "
                "client runs --insecure: a broker with CURVE keys does not "
                "answer plaintext", endpoint, waited);
        return CLI_EXIT_UNREACHABLE;
    }
    char waited [32];
    duration_format (timeout_ms, waited, sizeof waited);
    s_fail (err, err_len, "no answer from the broker at %s after %s; check "
            "that gridbroker is running and that this is its --client "
            "endpoint (set --broker or GRID_BROKER)", endpoint, waited);
    return CLI_EXIT_UNREACHABLE;
}

//  ---------------------------------------------------------------------
//  Printable text and aligned tables

//  Display columns of LEN bytes of UTF-8: one per character.
static size_t
s_columns (const char *text, size_t len)
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
static char *
s_printable (const char *text, size_t len, size_t max_columns,
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
    bool cut = s_columns (text, len) > max_columns;
    size_t keep = cut ? (max_columns > 3 ? max_columns - 3 : 0) : SIZE_MAX;
    char *copy = s_realloc (NULL, len + 4);
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

typedef struct {
    size_t columns;     //  Cells per row
    char **cells;       //  Printable cells, row after row (owned)
    bool *marked;       //  Per row: a row to draw attention to
    size_t rows;        //  Rows so far, the header first
    size_t capacity;    //  Rows allocated
    bool gutter;        //  Print a "!" gutter before marked rows
} s_table_t;

static void
s_table_add (s_table_t *self, bool marked, const char *const *cells)
{
    if (self->rows == self->capacity) {
        self->capacity = self->capacity ? self->capacity * 2 : 16;
        self->cells = s_realloc (self->cells, self->capacity * self->columns
                                              * sizeof (char *));
        self->marked = s_realloc (self->marked,
                                  self->capacity * sizeof (bool));
    }
    for (size_t column = 0; column < self->columns; column++) {
        const char *cell = cells [column] ? cells [column] : "";
        self->cells [self->rows * self->columns + column]
            = s_printable (cell, strlen (cell), SIZE_MAX, false);
    }
    self->marked [self->rows] = marked;
    self->rows++;
}

static s_table_t *
s_table_new (size_t columns, bool gutter, const char *const *headers)
{
    s_table_t *self = s_realloc (NULL, sizeof *self);
    memset (self, 0, sizeof *self);
    self->columns = columns;
    self->gutter = gutter;
    s_table_add (self, false, headers);
    return self;
}

static void
s_table_destroy (s_table_t **self_p)
{
    s_table_t *self = *self_p;
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
static void
s_table_print (const s_table_t *self, FILE *out, bool color)
{
    size_t *widths = s_realloc (NULL, self->columns * sizeof (size_t));
    for (size_t column = 0; column < self->columns; column++) {
        widths [column] = 0;
        for (size_t row = 0; row < self->rows; row++) {
            const char *cell = self->cells [row * self->columns + column];
            size_t width = s_columns (cell, strlen (cell));
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
            size_t width = s_columns (cell, strlen (cell));
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

//  ---------------------------------------------------------------------
//  Reading fields of broker data for display

//  A scalar as text in BUF ("-" when absent or not a scalar). Strings are
//  copied raw; tables make them printable.
static const char *
s_scalar (const pv_t *value, char *buf, size_t buf_len)
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

static const char *
s_field (const pv_t *map, const char *key, char *buf, size_t buf_len)
{
    return s_scalar (pv_map_get (map, key), buf, buf_len);
}

static int64_t
s_field_int (const pv_t *map, const char *key, int64_t fallback)
{
    int64_t value;
    return pv_get_int (pv_map_get (map, key), &value) == 0 ? value : fallback;
}

static bool
s_str_in (const pv_t *value, const char *const *list)
{
    for (size_t index = 0; list [index]; index++)
        if (pv_str_eq (value, list [index]))
            return true;
    return false;
}

//  An RFC 3339 time as "2026-11-21 07:00:51" (UTC), with ".123" when
//  WITH_MS; other text is shown as it came.
static const char *
s_time (const pv_t *value, bool with_ms, char *buf, size_t buf_len)
{
    s_scalar (value, buf, buf_len);
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
static const char *
s_human_ms (int64_t ms, char *buf, size_t buf_len)
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

//  A target as text: the summary form is already a string; the record
//  form is {scope, ?value, ?any}.
static const char *
s_target_text (const pv_t *target, char *buf, size_t buf_len)
{
    if (pv_type (target) != PV_MAP)
        return s_scalar (target, buf, buf_len);
    char scope [64], value [512];
    bool any = false;
    pv_get_bool (pv_map_get (target, "any"), &any);
    s_field (target, "scope", scope, sizeof scope);
    const pv_t *value_field = pv_map_get (target, "value");
    if (streq (scope, "all"))
        snprintf (buf, buf_len, "%s", any ? "any" : "all");
    else
    if (streq (scope, "expr") && pv_type (value_field) == PV_STR)
        snprintf (buf, buf_len, "%s%s", any ? "any:" : "",
                  s_scalar (value_field, value, sizeof value));
    else
    if (pv_type (value_field) == PV_STR)
        snprintf (buf, buf_len, "%s%s:%s", any ? "any:" : "", scope,
                  s_scalar (value_field, value, sizeof value));
    else
        snprintf (buf, buf_len, "%s%s", any ? "any:" : "", scope);
    return buf;
}

//  "i/n" for a job's progress: the step the wire says it is at (numbered
//  from 0, as in the API, the events and the results), which is also how
//  many steps are behind it, over the number of steps; a job that went
//  through every step reads n/n. Only a value out of range is clamped.
static const char *
s_step_text (const pv_t *job, char *buf, size_t buf_len)
{
    int64_t step = s_field_int (job, "step", 0);
    int64_t steps = s_field_int (job, "steps", 0);
    if (steps <= 0)
        snprintf (buf, buf_len, "-");
    else
        snprintf (buf, buf_len, "%" PRId64 "/%" PRId64,
                  step < 0 ? 0 : step > steps ? steps : step, steps);
    return buf;
}

//  Joins the scalars of an array ("web,prod") or the pairs of a map
//  ("tier=web,dc=par") into a new string, "-" when empty. Caller frees.
static char *
s_join (const pv_t *value)
{
    char *text = s_realloc (NULL, 1);
    size_t used = 0;
    text [0] = 0;
    bool is_map = pv_type (value) == PV_MAP;
    for (size_t index = 0; index < pv_size (value); index++) {
        char key [256] = "", item [512];
        if (is_map) {
            s_scalar (pv_map_key_at (value, index), key, sizeof key);
            s_scalar (pv_map_value_at (value, index), item, sizeof item);
        }
        else
            s_scalar (pv_array_at (value, index), item, sizeof item);
        size_t grow = strlen (key) + strlen (item) + 3;
        text = s_realloc (text, used + grow + 1);
        used += (size_t) snprintf (text + used, grow + 1, "%s%s%s%s",
                                   index ? "," : "", key, is_map ? "=" : "",
                                   item);
    }
    if (!used) {
        free (text);
        text = s_strdup ("-");
    }
    return text;
}

//  ---------------------------------------------------------------------
//  Reply envelope

int
cli_reply_data (const pv_doc_t *reply, const char *id, const pv_t **data_p,
                FILE *err)
{
    *data_p = NULL;
    const pv_t *root = pv_doc_root (reply);
    int64_t version = 0;
    if (pv_type (root) != PV_MAP
    ||  pv_get_int (pv_map_get (root, "v"), &version) != 0) {
        fprintf (err, "gridcli: the broker's answer is not a grid protocol "
                 "message\n");
        return CLI_EXIT_UNREACHABLE;
    }
    if (version != PROTO_VERSION) {
        fprintf (err, "gridcli: the broker answered in protocol version %"
                 PRId64 "; this gridcli speaks %d\n", version, PROTO_VERSION);
        return CLI_EXIT_UNREACHABLE;
    }
    const pv_t *type = pv_map_get (root, "type");
    if (pv_str_eq (type, "ok")) {
        const pv_t *data = pv_map_get (root, "data");
        if (!pv_str_eq (pv_map_get (root, "id"), id)) {
            fprintf (err, "gridcli: the broker's answer is for another "
                     "request (its id is not %s)\n", id);
            return CLI_EXIT_UNREACHABLE;
        }
        if (!data) {
            fprintf (err, "gridcli: the broker's answer carries no data\n");
            return CLI_EXIT_UNREACHABLE;
        }
        *data_p = data;
        return CLI_EXIT_OK;
    }
    if (pv_str_eq (type, "error")) {
        const pv_t *code = pv_map_get (root, "code");
        const pv_t *message = pv_map_get (root, "message");
        const pv_t *details = pv_map_get (root, "details");
        if (pv_type (code) != PV_STR || pv_type (message) != PV_STR
        ||  (details && pv_type (details) != PV_ARRAY)) {
            fprintf (err, "gridcli: the broker's error answer is malformed "
                     "(it needs a code and a message)\n");
            return CLI_EXIT_UNREACHABLE;
        }
        char *message_text = NULL;
        char *code_text = NULL;
        size_t len;
        const char *bytes = pv_str (message, &len);
        message_text = s_printable (bytes, len, SIZE_MAX, false);
        bytes = pv_str (code, &len);
        code_text = s_printable (bytes, len, SIZE_MAX, false);
        fprintf (err, "gridcli: %s (%s)\n", message_text, code_text);
        free (message_text);
        free (code_text);
        for (size_t index = 0; index < pv_size (details); index++) {
            bytes = pv_str (pv_array_at (details, index), &len);
            char *detail = s_printable (bytes, len, SIZE_MAX, false);
            fprintf (err, "  %s\n", detail);
            free (detail);
        }
        return CLI_EXIT_REFUSED;
    }
    fprintf (err, "gridcli: the broker's answer has an unknown type\n");
    return CLI_EXIT_UNREACHABLE;
}

//  ---------------------------------------------------------------------
//  Rendering: jobs

static const char *s_final_job [] = {
    "completed", "partial_failure", "failed", "cancelled", NULL
};
static const char *s_final_cell [] = {
    "success", "failed", "timeout", "skipped", "lost", "cancelled",
    "interrupted", "offline", "drained", "unsupported", NULL
};
//  Every final status that is a failure of that node (a cancel or a skip
//  is not): marked ! and counted in "N steps failed"
static const char *s_bad_cell [] = {
    "failed", "timeout", "lost", "interrupted", "offline", "drained",
    "unsupported", NULL
};

static bool
s_is_job_record (const pv_t *record)
{
    return pv_type (record) == PV_MAP
        && pv_type (pv_map_get (record, "id")) == PV_STR
        && pv_type (pv_map_get (record, "status")) == PV_STR;
}

bool
cli_job_finished (const pv_t *record)
{
    return s_str_in (pv_map_get (record, "status"), s_final_job);
}

int
cli_job_exit_code (const pv_t *record)
{
    const pv_t *status = pv_map_get (record, "status");
    if (pv_str_eq (status, "failed") || pv_str_eq (status, "partial_failure")
    ||  pv_str_eq (status, "cancelled"))
        return CLI_EXIT_JOB_FAILED;
    return CLI_EXIT_OK;
}

//  The leaf of flat step STEP: leaves are numbered depth-first, a branch
//  ({tasks: [...]}) holding its leaves in order.
static const pv_t *
s_step_leaf (const pv_t *tasks, int64_t step)
{
    int64_t first = 0;
    for (size_t index = 0; index < pv_size (tasks); index++) {
        const pv_t *phase = pv_array_at (tasks, index);
        const pv_t *branch = pv_map_get (phase, "tasks");
        if (pv_type (branch) == PV_ARRAY) {
            int64_t count = (int64_t) pv_size (branch);
            if (step < first + count)
                return pv_array_at (branch, (size_t) (step - first));
            first += count;
        }
        else {
            if (step == first)
                return phase;
            first++;
        }
    }
    return NULL;
}

//  Steps of a job: its `steps`, else the leaves of its tasks; never more
//  than a job may hold, whatever the record says.
static int64_t
s_step_count (const pv_t *record)
{
    int64_t steps = s_field_int (record, "steps", -1);
    if (steps < 0) {
        const pv_t *tasks = pv_map_get (record, "tasks");
        steps = 0;
        for (size_t index = 0; index < pv_size (tasks); index++) {
            const pv_t *branch = pv_map_get (pv_array_at (tasks, index),
                                             "tasks");
            steps += pv_type (branch) == PV_ARRAY ? (int64_t) pv_size (branch)
                                                  : 1;
        }
    }
    return steps > JOB_MAX_STEPS ? JOB_MAX_STEPS : steps;
}

//  A job record's results laid out for display: the nodes in order, and
//  per step the leaf and a node -> cell index, so that a job on thousands
//  of nodes renders in linear time. Cells and leaves are borrowed from
//  the record.
typedef struct {
    char **nodes;           //  `expected` order, then any other with a result
    size_t node_count;      //  How many nodes
    int64_t step_count;     //  Steps of the job
    const pv_t **leaves;    //  Per step: its task, or NULL
    zhashx_t **cells;       //  Per step: node id -> cell
    zhashx_t *seen;         //  Node ids already in NODES
} s_grid_t;

static void
s_grid_add_node (s_grid_t *self, const char *node)
{
    if (zhashx_insert (self->seen, node, (void *) 1) != 0)
        return;              //  Already listed
    self->nodes = s_realloc (self->nodes,
                             (self->node_count + 1) * sizeof (char *));
    self->nodes [self->node_count++] = s_strdup (node);
}

static s_grid_t *
s_grid_new (const pv_t *record)
{
    s_grid_t *self = s_realloc (NULL, sizeof *self);
    memset (self, 0, sizeof *self);
    self->seen = zhashx_new ();
    self->step_count = s_step_count (record);
    size_t steps = (size_t) self->step_count;
    self->leaves = s_realloc (NULL, steps * sizeof (pv_t *));
    self->cells = s_realloc (NULL, steps * sizeof (zhashx_t *));

    const pv_t *expected = pv_map_get (record, "expected");
    for (size_t index = 0; index < pv_size (expected); index++) {
        char *node = pv_strdup (pv_array_at (expected, index));
        if (node)
            s_grid_add_node (self, node);
        free (node);
    }
    const pv_t *tasks = pv_map_get (record, "tasks");
    const pv_t *results = pv_map_get (record, "results");
    for (size_t step = 0; step < steps; step++) {
        self->leaves [step] = s_step_leaf (tasks, (int64_t) step);
        self->cells [step] = zhashx_new ();
        char key [32];
        snprintf (key, sizeof key, "%zu", step);
        const pv_t *row = pv_map_get (results, key);
        for (size_t index = 0; index < pv_size (row); index++) {
            const pv_t *cell = pv_map_value_at (row, index);
            char *node = pv_strdup (pv_map_key_at (row, index));
            if (node && pv_type (cell) == PV_MAP) {
                zhashx_insert (self->cells [step], node, (void *) cell);
                s_grid_add_node (self, node);
            }
            free (node);
        }
    }
    return self;
}

static void
s_grid_destroy (s_grid_t **self_p)
{
    s_grid_t *self = *self_p;
    if (!self)
        return;
    for (size_t index = 0; index < self->node_count; index++)
        free (self->nodes [index]);
    for (int64_t step = 0; step < self->step_count; step++)
        zhashx_destroy (&self->cells [step]);
    free (self->nodes);
    free (self->leaves);
    free (self->cells);
    zhashx_destroy (&self->seen);
    free (self);
    *self_p = NULL;
}

//  The cell of NODE at STEP, or NULL.
static const pv_t *
s_grid_cell (const s_grid_t *self, int64_t step, const char *node)
{
    if (step < 0 || step >= self->step_count)
        return NULL;
    return zhashx_lookup (self->cells [step], node);
}

//  The text a cell shows in OUTPUT: the error of a failed step (its output
//  when it has no error), else the output (its error when it printed
//  nothing). A new printable string, first line only, cut to fit.
static char *
s_cell_output (const pv_t *cell, bool bad)
{
    const pv_t *output = pv_map_get (cell, "output");
    const pv_t *error = pv_map_get (cell, "error");
    const pv_t *first = bad ? error : output;
    const pv_t *second = bad ? output : error;
    const pv_t *chosen = pv_size (first) ? first : second;
    //  A step that never ran says why (offline since ..., drained, ...)
    if (!pv_size (chosen) && pv_type (pv_map_get (cell, "reason")) == PV_STR)
        chosen = pv_map_get (cell, "reason");
    size_t len = 0;
    const char *bytes = pv_str (chosen, &len);
    //  Skip leading blank lines: the first line that says something
    while (len && (*bytes == '\n' || *bytes == '\r' || *bytes == ' ')) {
        bytes++;
        len--;
    }
    return s_printable (bytes, len, CLI_OUTPUT_COLUMNS, true);
}

//  "label     value", the value made printable.
static void
s_header_line (FILE *out, const char *label, const char *value)
{
    char *text = s_printable (value, strlen (value), SIZE_MAX, false);
    fprintf (out, "%-10s%s\n", label, text);
    free (text);
}

#define S_NOT_RUN_SHOWN 10

//  "2 nodes not run: web-07 offline since 12:01:07, web-09 drained": the
//  members of a group, label or all that the job did not run on.
static void
s_print_not_run (const pv_t *not_run, FILE *out)
{
    size_t count = pv_type (not_run) == PV_ARRAY ? pv_size (not_run) : 0;
    if (count == 0)
        return;
    size_t size = 0;
    char *line = NULL;
    FILE *text = open_memstream (&line, &size);
    if (!text)
        return;
    fprintf (text, "%zu node%s not run: ", count, count == 1 ? "" : "s");
    //  A fleet-wide job may leave thousands out: name the first ones
    size_t shown = count > S_NOT_RUN_SHOWN ? S_NOT_RUN_SHOWN : count;
    for (size_t index = 0; index < shown; index++) {
        const pv_t *entry = pv_array_at (not_run, index);
        char node [128], reason [256];
        s_field (entry, "node", node, sizeof node);
        s_field (entry, "reason", reason, sizeof reason);
        fprintf (text, "%s%s %s", index ? ", " : "", node, reason);
    }
    if (shown < count)
        fprintf (text, " and %zu more (--output json lists them)",
                 count - shown);
    fclose (text);
    char *printable = s_printable (line, size, SIZE_MAX, false);
    fprintf (out, "\n%s\n", printable);
    free (printable);
    free (line);
}

static const char *s_human_bytes (int64_t bytes, char *buf, size_t buf_len);

//  One line per stream that the table shows only the start of: "(… 2.3
//  MiB more: gridcli job output ID --node N)".
static void
s_more_output_notes (const pv_t *record, const s_grid_t *grid, FILE *out)
{
    char job [64];
    s_field (record, "id", job, sizeof job);
    for (size_t node = 0; node < grid->node_count; node++)
        for (int64_t step = 0; step < grid->step_count; step++) {
            const pv_t *cell = s_grid_cell (grid, step, grid->nodes [node]);
            for (int stream = 0; cell && stream < 2; stream++) {
                int64_t size = s_field_int (cell, stream ? "error_size"
                                                         : "output_size", 0);
                int64_t shown = (int64_t) pv_size (
                    pv_map_get (cell, stream ? "error" : "output"));
                if (size <= shown)
                    continue;
                char more [32], step_text [32] = "";
                if (grid->step_count > 1)
                    snprintf (step_text, sizeof step_text, " --step %" PRId64,
                              step);
                fprintf (out, "(\u2026 %s more: gridcli job output %s --node "
                         "%s%s%s)\n",
                         s_human_bytes (size - shown, more, sizeof more), job,
                         grid->nodes [node], step_text,
                         stream ? " --stderr" : "");
            }
        }
}

//  The spec of a job record (its target and tasks, plus the batch
//  fields), through the same decoder the broker used; NULL when the record
//  does not hold a valid one.
static job_spec_t *
s_record_spec (const pv_t *record)
{
    static const char *fields [] = {"target", "tasks", "batch",
                                    "max_failures", "canary"};
    size_t count = 0;
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++)
        if (pv_map_get (record, fields [index]))
            count++;
    pw_t *writer = pw_new ();
    pw_map (writer, count);
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++) {
        const pv_t *value = pv_map_get (record, fields [index]);
        if (value) {
            pw_str (writer, fields [index]);
            pw_pv (writer, value);
        }
    }
    pv_doc_t *doc = NULL;
    job_spec_t *spec = NULL;
    char why [256];
    if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, why,
                       sizeof why) == 0)
        job_spec_decode (pv_doc_root (doc), &spec, NULL);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    return spec;
}

//  "fetch" for a named task, else "step 3".
static const char *
s_task_label (const job_spec_t *spec, size_t step, char *buf, size_t buf_len)
{
    const char *name = job_spec_step_name (spec, step);
    if (name)
        return name;
    snprintf (buf, buf_len, "step %zu", step);
    return buf;
}

//  Is the cell of a node final (not pending or under way)?
static bool
s_cell_final (const pv_t *cell)
{
    return cell && s_str_in (pv_map_get (cell, "status"), s_final_cell);
}

//  The order of a DAG job: one row per step in the order they may start,
//  what each needs, and, while it runs, which needs its waiting nodes
//  still wait for.
static void
s_render_dag (const job_spec_t *spec, const s_grid_t *grid, FILE *out,
              bool color)
{
    job_graph_t *graph = job_graph_new (spec);
    if (!graph)
        return;
    const char *headers [] = {"STEP", "NAME", "TASK", "NEEDS", "WAITING"};
    s_table_t *table = s_table_new (5, false, headers);
    for (size_t at = 0; at < graph->step_count; at++) {
        size_t step = graph->order [at];
        const job_step_needs_t *needs = &graph->steps [step];
        const job_phase_t *leaf = job_spec_step (spec, step, NULL, NULL);
        char step_text [32], task [160], label [32], *list = NULL;
        size_t list_len = 0;
        FILE *stream = open_memstream (&list, &list_len);
        for (size_t k = 0; k < needs->need_count && stream; k++)
            fprintf (stream, "%s%s", k ? ", " : "",
                     s_task_label (spec, needs->needs [k], label,
                                   sizeof label));
        if (stream && needs->need_count == 0)
            fprintf (stream, "-");
        if (stream && needs->barrier)
            fprintf (stream, " (barrier)");
        if (stream)
            fclose (stream);
        //  Waiting: nodes whose cell is pending, and the needs not yet
        //  final there (the first such need names the row)
        size_t waiting = 0;
        size_t first_need = SIZE_MAX;
        for (size_t node = 0; node < grid->node_count; node++) {
            const pv_t *cell = s_grid_cell (grid, (int64_t) step,
                                            grid->nodes [node]);
            if (!cell || !pv_str_eq (pv_map_get (cell, "status"), "pending"))
                continue;
            for (size_t k = 0; k < needs->need_count; k++)
                if (!s_cell_final (s_grid_cell (grid,
                                                (int64_t) needs->needs [k],
                                                grid->nodes [node]))) {
                    if (first_need == SIZE_MAX)
                        first_need = needs->needs [k];
                    waiting++;
                    break;
                }
        }
        char wait_text [160] = "-";
        if (waiting)
            snprintf (wait_text, sizeof wait_text, "%zu node%s, for %s%s",
                      waiting, waiting == 1 ? "" : "s",
                      s_task_label (spec, first_need, label, sizeof label),
                      needs->need_count > 1 ? " and others" : "");
        snprintf (step_text, sizeof step_text, "%zu", step);
        snprintf (task, sizeof task, "%s %s", leaf->backend, leaf->action);
        const char *row [] = {
            step_text, leaf->name ? leaf->name : "-", task,
            list ? list : "-", wait_text
        };
        s_table_add (table, false, row);
        free (list);
    }
    fprintf (out, "\norder (each task starts on a node once what it needs "
                  "is done there):\n");
    s_table_print (table, out, color);
    s_table_destroy (&table);
    job_graph_destroy (&graph);
}

int
cli_render_job (const pv_t *record, FILE *out, bool color)
{
    if (!s_is_job_record (record))
        return -2;
    char buf [1024];
    s_field (record, "id", buf, sizeof buf);
    s_header_line (out, "job", buf);
    s_header_line (out, "target", s_target_text (pv_map_get (record,
                   "target"), buf, sizeof buf));
    s_field (record, "status", buf, sizeof buf);
    s_header_line (out, "status", buf);
    s_header_line (out, "step", s_step_text (record, buf, sizeof buf));
    s_field (record, "strategy", buf, sizeof buf);
    s_header_line (out, "strategy", buf);
    const pv_t *idempotency_key = pv_map_get (record, "idempotency_key");
    if (pv_size (idempotency_key))
        s_header_line (out, "key", s_scalar (idempotency_key, buf,
                                             sizeof buf));
    s_header_line (out, "created", s_time (pv_map_get (record, "created_at"),
                   false, buf, sizeof buf));
    s_header_line (out, "updated", s_time (pv_map_get (record, "updated_at"),
                   false, buf, sizeof buf));
    const pv_t *reason = pv_map_get (record, "reason");
    if (pv_size (reason))
        s_header_line (out, "reason", s_scalar (reason, buf, sizeof buf));
    if (pv_type (pv_map_get (record, "retry_of")) == PV_STR)
        s_header_line (out, "retry of", s_field (record, "retry_of", buf,
                                                 sizeof buf));
    if (pv_size (pv_map_get (record, "retried_by"))) {
        char *joined = s_join (pv_map_get (record, "retried_by"));
        s_header_line (out, "retried by", joined);
        free (joined);
    }
    job_spec_t *spec = s_record_spec (record);
    if (spec && (spec->batch.set || spec->canary || spec->max_failures.set)) {
        char batch [32] = "all", budget [32] = "none";
        if (spec->batch.set)
            job_amount_format (&spec->batch, batch, sizeof batch);
        if (spec->max_failures.set)
            job_amount_format (&spec->max_failures, budget, sizeof budget);
        if (spec->canary)
            snprintf (buf, sizeof buf, "%s of the nodes at a time, canary "
                      "%u first; max_failures %s", batch, spec->canary,
                      budget);
        else
            snprintf (buf, sizeof buf, "%s of the nodes at a time; "
                      "max_failures %s", batch, budget);
        s_header_line (out, "batches", buf);
    }

    s_grid_t *grid = s_grid_new (record);
    if (spec && job_spec_is_dag (spec))
        s_render_dag (spec, grid, out, color);
    job_spec_destroy (&spec);
    const char *headers [] = {
        "NODE", "STEP", "TASK", "STATUS", "EXIT", "DURATION", "OUTPUT"
    };
    s_table_t *table = s_table_new (7, true, headers);
    size_t failed_rows = 0;
    for (size_t node = 0; node < grid->node_count; node++) {
        for (int64_t step = 0; step < grid->step_count; step++) {
            const pv_t *cell = s_grid_cell (grid, step, grid->nodes [node]);
            if (!cell)
                continue;
            const pv_t *status = pv_map_get (cell, "status");
            bool bad = s_str_in (status, s_bad_cell);
            bool ran = s_str_in (status, s_final_cell)
                    && !pv_str_eq (status, "skipped")
                    && s_field_int (cell, "attempts", 1) > 0;
            char step_text [32], task [160], backend [64], action [64];
            char status_text [128], exit_text [32], duration [32];
            snprintf (step_text, sizeof step_text, "%" PRId64, step);
            const pv_t *leaf = grid->leaves [step];
            if (leaf)
                snprintf (task, sizeof task, "%s %s",
                          s_field (leaf, "backend", backend, sizeof backend),
                          s_field (leaf, "action", action, sizeof action));
            else
                snprintf (task, sizeof task, "-");
            int64_t attempts = s_field_int (cell, "attempts", 1);
            char status_name [64];
            s_scalar (status, status_name, sizeof status_name);
            if (attempts > 1)
                snprintf (status_text, sizeof status_text,
                          "%s (%" PRId64 " attempts)", status_name, attempts);
            else
                snprintf (status_text, sizeof status_text, "%s", status_name);
            int64_t exit_code = s_field_int (cell, "exit_code", -1);
            if (ran && exit_code >= 0)
                snprintf (exit_text, sizeof exit_text, "%" PRId64, exit_code);
            else
                snprintf (exit_text, sizeof exit_text, "-");
            int64_t duration_ms = s_field_int (cell, "duration_ms", 0);
            if (ran || duration_ms > 0)
                s_human_ms (duration_ms, duration, sizeof duration);
            else
                snprintf (duration, sizeof duration, "-");
            //  A step that waits for a slot says why instead
            const pv_t *waiting = pv_map_get (cell, "waiting");
            char *output = pv_type (waiting) == PV_STR
                               ? pv_strdup (waiting)
                               : s_cell_output (cell, bad);
            const char *row [] = {
                grid->nodes [node], step_text, task, status_text, exit_text,
                duration, output
            };
            s_table_add (table, bad, row);
            free (output);
            if (bad)
                failed_rows++;
        }
    }
    fputc ('\n', out);
    if (table->rows > 1)
        s_table_print (table, out, color);
    else
    if (cli_job_finished (record))
        fprintf (out, "no node ran\n");
    else
        fprintf (out, "no results yet\n");
    s_more_output_notes (record, grid, out);
    if (failed_rows)
        fprintf (out, "\n%zu step%s failed (marked !)\n", failed_rows,
                 failed_rows == 1 ? "" : "s");
    s_print_not_run (pv_map_get (record, "not_run"), out);
    s_table_destroy (&table);
    s_grid_destroy (&grid);
    return 0;
}

int
cli_render_check (const pv_t *data, FILE *out)
{
    const pv_t *nodes = pv_map_get (data, "nodes");
    const pv_t *not_run = pv_map_get (data, "not_run");
    const pv_t *plan = pv_map_get (data, "plan");
    const pv_t *batches = pv_map_get (data, "batches");
    if (pv_type (nodes) != PV_ARRAY || pv_type (not_run) != PV_ARRAY
        || pv_type (plan) != PV_ARRAY || pv_type (batches) != PV_ARRAY)
        return -2;
    char buf [1024];
    s_header_line (out, "target", s_field (data, "target", buf, sizeof buf));
    s_header_line (out, "strategy",
                   s_field (data, "strategy", buf, sizeof buf));
    char *list = s_join (nodes);
    bool any = false;
    if (pv_get_bool (pv_map_get (data, "any"), &any) != 0)
        any = false;
    snprintf (buf, sizeof buf, "%zu node%s%s: %s", pv_size (nodes),
              pv_size (nodes) == 1 ? "" : "s",
              any && pv_size (nodes) ? " (any: one of them takes it)" : "",
              list);
    s_header_line (out, "runs on", buf);
    free (list);
    if (pv_size (not_run)) {
        fprintf (out, "\nwould not run on %zu node%s:\n", pv_size (not_run),
                 pv_size (not_run) == 1 ? "" : "s");
        const char *headers [] = {"NODE", "WHY"};
        s_table_t *table = s_table_new (2, false, headers);
        for (size_t index = 0; index < pv_size (not_run); index++) {
            const pv_t *item = pv_array_at (not_run, index);
            char node [128], why [256];
            const char *row [] = {
                s_field (item, "node", node, sizeof node),
                s_field (item, "reason", why, sizeof why)
            };
            s_table_add (table, false, row);
        }
        s_table_print (table, out, false);
        s_table_destroy (&table);
    }
    bool dag = pv_str_eq (pv_map_get (data, "order"), "dag");
    fprintf (out, "\nplan (%s):\n", dag ? "DAG order: each task starts on a "
                                          "node once what it needs is done "
                                          "there"
                                        : "phases in order");
    const char *headers [] = {"STEP", "PHASE", "NAME", "TASK", "CONDITION",
                              "NEEDS"};
    s_table_t *table = s_table_new (6, false, headers);
    for (size_t index = 0; index < pv_size (plan); index++) {
        const pv_t *item = pv_array_at (plan, index);
        char step [32], phase [48], name [80], task [160], condition [32];
        char needs [512] = "-";
        snprintf (step, sizeof step, "%" PRId64, s_field_int (item, "step", 0));
        int64_t sub = s_field_int (item, "sub", -1);
        if (sub >= 0)
            snprintf (phase, sizeof phase, "%" PRId64 ".%" PRId64,
                      s_field_int (item, "phase", 0), sub);
        else
            snprintf (phase, sizeof phase, "%" PRId64,
                      s_field_int (item, "phase", 0));
        if (!pv_map_get (item, "name"))
            snprintf (name, sizeof name, "-");
        else
            s_field (item, "name", name, sizeof name);
        s_field (item, "task", task, sizeof task);
        s_field (item, "condition", condition, sizeof condition);
        const pv_t *list_value = pv_map_get (item, "needs");
        if (pv_size (list_value)) {
            char *joined = s_join (list_value);
            snprintf (needs, sizeof needs, "steps %s%s", joined,
                      pv_map_get (item, "barrier") ? " (barrier)" : "");
            free (joined);
        }
        const char *row [] = {step, phase, name, task, condition, needs};
        s_table_add (table, false, row);
    }
    s_table_print (table, out, false);
    s_table_destroy (&table);
    size_t count = pv_size (batches);
    if (count > 1) {
        fprintf (out, "\n%zu batches, each runs the whole job before the "
                      "next:\n", count);
        for (size_t index = 0; index < count; index++) {
            char *joined = s_join (pv_array_at (batches, index));
            fprintf (out, "  batch %zu: %s\n", index + 1, joined);
            free (joined);
        }
    }
    if (pv_map_get (data, "max_failures"))
        fprintf (out, "failure budget: %" PRId64 " failed node%s allowed\n",
                 s_field_int (data, "max_failures", 0),
                 s_field_int (data, "max_failures", 0) == 1 ? "" : "s");
    fprintf (out, "\nnothing was run (a dry run)\n");
    return 0;
}

void
cli_task_progress_format (const pv_t *task, char *buf, size_t buf_len)
{
    char node [80], kind [64], message [PROTO_MAX_PROGRESS + 1];
    s_field (task, "node", node, sizeof node);
    int64_t percent = s_field_int (task, "percent", -1);
    const char *text = pv_map_get (task, "message")
                           ? s_field (task, "message", message, sizeof message)
                           : s_field (task, "kind", kind, sizeof kind);
    if (percent >= 0)
        snprintf (buf, buf_len, "%s %" PRId64 "%%%s%s", node, percent,
                  *text ? " " : "", text);
    else
        snprintf (buf, buf_len, "%s%s%s", node, *text ? " " : "", text);
    for (char *cursor = buf; *cursor; cursor++)
        if ((unsigned char) *cursor < 0x20 || *cursor == 0x7F)
            *cursor = '?';
}

void
cli_progress_format (const pv_t *progress, char *buf, size_t buf_len)
{
    char id [64], status [64], step_text [32];
    s_field (progress, "id", id, sizeof id);
    s_field (progress, "status", status, sizeof status);
    s_step_text (progress, step_text, sizeof step_text);
    int64_t nodes = s_field_int (progress, "nodes", 0);
    int64_t done = s_field_int (progress, "done", 0);
    int64_t failed = s_field_int (progress, "failed", 0);
    int used = snprintf (buf, buf_len, "%s %s  step %s", id, status,
                         step_text);
    int64_t batches = s_field_int (progress, "batches", 0);
    if (batches > 1 && used > 0 && (size_t) used < buf_len)
        used += snprintf (buf + used, buf_len - (size_t) used,
                          "  batch %" PRId64 "/%" PRId64,
                          s_field_int (progress, "batch", 1), batches);
    //  A whole job record (from a broker without job.progress) has no counts
    if (pv_map_get (progress, "nodes") && used > 0 && (size_t) used < buf_len)
        used += snprintf (buf + used, buf_len - (size_t) used, "  nodes %"
                          PRId64 "/%" PRId64 " done", done, nodes);
    if (failed > 0 && used > 0 && (size_t) used < buf_len)
        used += snprintf (buf + used, buf_len - (size_t) used,
                          "  %" PRId64 " failed", failed);
    //  The first running task that reports progress: "web-01 42% ..."
    const pv_t *tasks = pv_map_get (progress, "tasks");
    if (pv_size (tasks) > 0 && used > 0 && (size_t) used < buf_len) {
        char task [256];
        cli_task_progress_format (pv_array_at (tasks, 0), task, sizeof task);
        snprintf (buf + used, buf_len - (size_t) used, "  %s", task);
    }
    //  Node data is printed on the operator's terminal
    for (char *cursor = buf; *cursor; cursor++)
        if ((unsigned char) *cursor < 0x20 || *cursor == 0x7F)
            *cursor = '?';
}

static int
s_render_submitted (const pv_t *data, FILE *out)
{
    char job [128], status [64];
    if (pv_type (pv_map_get (data, "job")) != PV_STR)
        return -2;
    s_field (data, "job", job, sizeof job);
    s_field (data, "status", status, sizeof status);
    char *job_text = s_printable (job, strlen (job), SIZE_MAX, false);
    char *status_text = s_printable (status, strlen (status), SIZE_MAX, false);
    fprintf (out, "job %s submitted (%s)\n", job_text, status_text);
    fprintf (out, "follow it with: gridcli job status %s\n", job_text);
    free (job_text);
    free (status_text);
    return 0;
}

static int
s_render_cancelled (const pv_t *data, FILE *out)
{
    char job [128], status [64];
    if (pv_type (pv_map_get (data, "job")) != PV_STR)
        return -2;
    s_field (data, "job", job, sizeof job);
    s_field (data, "status", status, sizeof status);
    char *job_text = s_printable (job, strlen (job), SIZE_MAX, false);
    char *status_text = s_printable (status, strlen (status), SIZE_MAX, false);
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
    s_field (data, "job", job, sizeof job);
    char *job_text = s_printable (job, strlen (job), SIZE_MAX, false);
    fprintf (out, "job %s deleted, with its results and events\n", job_text);
    free (job_text);
    return 0;
}

static int
s_render_node_state (const pv_t *data, FILE *out)
{
    char id [128], status [64];
    if (pv_type (pv_map_get (data, "id")) != PV_STR)
        return -2;
    s_field (data, "id", id, sizeof id);
    s_field (data, "status", status, sizeof status);
    char *id_text = s_printable (id, strlen (id), SIZE_MAX, false);
    char *status_text = s_printable (status, strlen (status), SIZE_MAX, false);
    bool drained = false;
    pv_get_bool (pv_map_get (data, "drained"), &drained);
    fprintf (out, "node %s %s%s\n", id_text, status_text,
             drained ? " (takes no new jobs; gridcli node resume ends it)" : "");
    free (id_text);
    free (status_text);
    return 0;
}

//  key list: KEY KIND STATUS NODE/ROLE HOSTNAME/NAME SINCE
static int
s_render_keys (const pv_t *data, FILE *out)
{
    const pv_t *keys = pv_map_get (data, "keys");
    if (pv_type (keys) != PV_ARRAY)
        return -2;
    if (pv_size (keys) == 0) {
        fprintf (out, "no keys\n");
        return 0;
    }
    const char *headers [] = {
        "KEY", "KIND", "STATUS", "NODE/ROLE", "HOST/NAME", "SINCE"
    };
    s_table_t *table = s_table_new (6, true, headers);
    for (size_t index = 0; index < pv_size (keys); index++) {
        const pv_t *key = pv_array_at (keys, index);
        char text [128], kind [32], status [32], who [128], host [256];
        char since [64];
        bool client = pv_str_eq (pv_map_get (key, "kind"), "client");
        const pv_t *when = pv_map_get (key, "accepted_at");
        if (!when)
            when = pv_map_get (key, "first_seen");
        const char *row [] = {
            s_field (key, "key", text, sizeof text),
            s_field (key, "kind", kind, sizeof kind),
            s_field (key, "status", status, sizeof status),
            s_field (key, client ? "role" : "node", who, sizeof who),
            s_field (key, client ? "name" : "hostname", host, sizeof host),
            when ? s_time (when, false, since, sizeof since) : "-"
        };
        s_table_add (table, pv_str_eq (pv_map_get (key, "status"),
                                       "pending"), row);
    }
    s_table_print (table, out, false);
    s_table_destroy (&table);
    return 0;
}

//  key accept / reject / delete: one line.
static int
s_render_key (const pv_t *data, FILE *out)
{
    char key [128], status [64], node [128];
    if (pv_type (pv_map_get (data, "key")) != PV_STR)
        return -2;
    s_field (data, "key", key, sizeof key);
    if (pv_map_get (data, "deleted"))
        snprintf (status, sizeof status, "deleted");
    else
        s_field (data, "status", status, sizeof status);
    const pv_t *node_value = pv_map_get (data, "node");
    if (node_value)
        s_field (data, "node", node, sizeof node);
    char *text = s_printable (key, strlen (key), SIZE_MAX, false);
    fprintf (out, "key %s %s%s%s%s\n", text, status,
             node_value ? " (node " : "", node_value ? node : "",
             node_value ? ")" : "");
    free (text);
    return 0;
}

static int
s_render_broker_state (const pv_t *data, FILE *out)
{
    char state [64];
    if (pv_type (pv_map_get (data, "state")) != PV_STR)
        return -2;
    s_field (data, "state", state, sizeof state);
    int64_t running = 0, pending = 0;
    pv_get_int (pv_map_get (data, "running"), &running);
    pv_get_int (pv_map_get (data, "pending"), &pending);
    char *state_text = s_printable (state, strlen (state), SIZE_MAX, false);
    fprintf (out, "broker %s: %" PRId64 " job%s running, %" PRId64
             " queued%s\n", state_text, running, running == 1 ? "" : "s",
             pending, streq (state, "serving") ? ""
                      : " (no new jobs are admitted; gridcli broker resume "
                        "ends it)");
    free (state_text);
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
    s_table_t *table = s_table_new (6, false, headers);
    for (size_t index = 0; index < pv_size (jobs); index++) {
        const pv_t *job = pv_array_at (jobs, index);
        char id [128], target [512], status [64], step [32], nodes [32];
        char created [64];
        const pv_t *expected = pv_map_get (job, "expected");
        if (pv_type (expected) == PV_ARRAY)
            snprintf (nodes, sizeof nodes, "%zu", pv_size (expected));
        else
            s_scalar (expected, nodes, sizeof nodes);
        const char *row [] = {
            s_field (job, "id", id, sizeof id),
            s_target_text (pv_map_get (job, "target"), target, sizeof target),
            s_field (job, "status", status, sizeof status),
            s_step_text (job, step, sizeof step),
            nodes,
            s_time (pv_map_get (job, "created_at"), false, created,
                    sizeof created)
        };
        s_table_add (table, false, row);
    }
    s_table_print (table, out, false);
    s_table_destroy (&table);
    int64_t total = s_field_int (data, "total", -1);
    if (total > (int64_t) pv_size (jobs))
        fprintf (out, "%zu of %" PRId64 " jobs shown (use --limit N or "
                 "--status S)\n", pv_size (jobs), total);
    return 0;
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
    s_table_t *table = s_table_new (5, false, headers);
    for (size_t index = 0; index < count; index++) {
        const pv_t *event = events [index];
        char time [64], name [128], step [32], node [128], detail_buf [1024];
        int64_t step_index;
        if (pv_get_int (pv_map_get (event, "step"), &step_index) == 0)
            snprintf (step, sizeof step, "%" PRId64, step_index);
        else
            snprintf (step, sizeof step, "-");
        s_field (event, "detail", detail_buf, sizeof detail_buf);
        char *detail = s_printable (detail_buf, strlen (detail_buf), 80,
                                    true);
        const char *row [] = {
            s_time (pv_map_get (event, "time"), true, time, sizeof time),
            s_field (event, "event", name, sizeof name),
            step,
            s_field (event, "node", node, sizeof node),
            detail
        };
        s_table_add (table, false, row);
        free (detail);
    }
    s_table_print (table, out, false);
    s_table_destroy (&table);
}

//  ---------------------------------------------------------------------
//  Rendering: nodes and broker status

static int
s_render_node_list (const pv_t *data, FILE *out)
{
    const pv_t *nodes = pv_map_get (data, "nodes");
    if (pv_type (nodes) != PV_ARRAY)
        return -2;
    if (pv_size (nodes) == 0) {
        fprintf (out, "no nodes registered\n");
        return 0;
    }
    const char *headers [] = {
        "ID", "HOSTNAME", "STATUS", "GROUPS", "LABELS", "LAST-SEEN", "RUNNING"
    };
    s_table_t *table = s_table_new (7, false, headers);
    for (size_t index = 0; index < pv_size (nodes); index++) {
        const pv_t *node = pv_array_at (nodes, index);
        char id [128], hostname [256], status [64], seen [64], running [64];
        char number [32];
        char *groups = s_join (pv_map_get (node, "groups"));
        char *labels = s_join (pv_map_get (node, "labels"));
        snprintf (running, sizeof running, "%s/",
                  s_field (node, "running", number, sizeof number));
        s_field (node, "concurrency", number, sizeof number);
        strncat (running, number, sizeof running - strlen (running) - 1);
        const char *row [] = {
            s_field (node, "id", id, sizeof id),
            s_field (node, "hostname", hostname, sizeof hostname),
            s_field (node, "status", status, sizeof status),
            groups, labels,
            s_time (pv_map_get (node, "last_seen"), false, seen, sizeof seen),
            running
        };
        s_table_add (table, false, row);
        free (groups);
        free (labels);
    }
    s_table_print (table, out, false);
    s_table_destroy (&table);
    return 0;
}

static void
s_print_field (FILE *out, const char *label, const char *value)
{
    char *text = s_printable (value, strlen (value), SIZE_MAX, false);
    fprintf (out, "%-13s%s\n", label, text);
    free (text);
}

static int
s_render_node_info (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "id")) != PV_STR)
        return -2;
    char buf [512];
    s_print_field (out, "id", s_field (data, "id", buf, sizeof buf));
    s_print_field (out, "hostname",
                   s_field (data, "hostname", buf, sizeof buf));
    s_print_field (out, "status", s_field (data, "status", buf, sizeof buf));
    char *joined = s_join (pv_map_get (data, "groups"));
    s_print_field (out, "groups", joined);
    free (joined);
    joined = s_join (pv_map_get (data, "labels"));
    s_print_field (out, "labels", joined);
    free (joined);
    s_print_field (out, "version", s_field (data, "version", buf, sizeof buf));
    s_print_field (out, "concurrency",
                   s_field (data, "concurrency", buf, sizeof buf));
    s_print_field (out, "running", s_field (data, "running", buf, sizeof buf));
    s_print_field (out, "registered", s_time (pv_map_get (data,
                   "registered_at"), false, buf, sizeof buf));
    s_print_field (out, "last seen", s_time (pv_map_get (data, "last_seen"),
                   false, buf, sizeof buf));
    const pv_t *duplicate = pv_map_get (data, "duplicate");
    if (duplicate) {
        //  Second agents refused this node (duplicate_node)
        char count [32], when [64], host [256];
        s_field (duplicate, "count", count, sizeof count);
        s_time (pv_map_get (duplicate, "last_at"), false, when, sizeof when);
        s_field (duplicate, "hostname", host, sizeof host);
        snprintf (buf, sizeof buf, "%s refused, last %s from %s", count,
                  when, host);
        s_print_field (out, "duplicates", buf);
    }

    const pv_t *backends = pv_map_get (data, "backends");
    const char *headers [] = {
        "BACKEND", "VERSION", "ACTION", "KIND", "PARAMS"
    };
    s_table_t *table = s_table_new (5, false, headers);
    for (size_t index = 0; index < pv_size (backends); index++) {
        const pv_t *backend = pv_array_at (backends, index);
        const pv_t *actions = pv_map_get (backend, "actions");
        char backend_name [128], version [128] = "-";
        s_field (backend, "name", backend_name, sizeof backend_name);
        if (pv_map_get (backend, "version"))
            s_field (backend, "version", version, sizeof version);
        for (size_t a = 0; a < pv_size (actions); a++) {
            const pv_t *action = pv_array_at (actions, a);
            const pv_t *params = pv_map_get (action, "params");
            char action_name [128], kind [32];
            //  name* marks a required param
            char *list = s_strdup ("");
            for (size_t p = 0; p < pv_size (params); p++) {
                const pv_t *param = pv_array_at (params, p);
                bool required = false;
                char name [128];
                pv_get_bool (pv_map_get (param, "required"), &required);
                s_field (param, "name", name, sizeof name);
                size_t used = strlen (list);
                list = s_realloc (list, used + strlen (name) + 3);
                snprintf (list + used, strlen (name) + 3, "%s%s%s",
                          p ? "," : "", name, required ? "*" : "");
            }
            const char *row [] = {
                backend_name, version,
                s_field (action, "name", action_name, sizeof action_name),
                s_field (action, "kind", kind, sizeof kind),
                *list ? list : "-"
            };
            s_table_add (table, false, row);
            free (list);
        }
    }
    fputc ('\n', out);
    if (table->rows > 1) {
        s_table_print (table, out, false);
        fprintf (out, "(* = required param)\n");
    }
    else
        fprintf (out, "no backends\n");
    s_table_destroy (&table);
    return 0;
}

//  "3 online, 0 offline, 3 total" from a map of counters, in wire order.
static char *
s_counters (const pv_t *map)
{
    char *text = s_strdup ("");
    for (size_t index = 0; index < pv_size (map); index++) {
        char key [128], value [64];
        s_scalar (pv_map_key_at (map, index), key, sizeof key);
        s_scalar (pv_map_value_at (map, index), value, sizeof value);
        size_t used = strlen (text);
        size_t grow = strlen (key) + strlen (value) + 4;
        text = s_realloc (text, used + grow + 1);
        snprintf (text + used, grow + 1, "%s%s %s", index ? ", " : "", value,
                  key);
    }
    return text;
}

//  "1.5 MiB" and the like, into BUF.
static const char *
s_human_bytes (int64_t bytes, char *buf, size_t buf_len)
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

//  status.store: "ok, 1.2 MiB of 8.0 GiB (0%), disk 40.1 GiB free", and
//  while commits fail, since when and why.
static void
s_render_store (const pv_t *store, FILE *out)
{
    if (pv_type (store) != PV_MAP)
        return;
    char state [64], used [32], max [32], free_text [32], line [512];
    s_field (store, "state", state, sizeof state);
    snprintf (line, sizeof line, "%s, %s of %s (%" PRId64 "%%), disk %s free",
              state,
              s_human_bytes (s_field_int (store, "used_bytes", 0), used,
                             sizeof used),
              s_human_bytes (s_field_int (store, "max_bytes", 0), max,
                             sizeof max),
              s_field_int (store, "used_percent", 0),
              s_human_bytes (s_field_int (store, "disk_free_bytes", 0),
                             free_text, sizeof free_text));
    s_print_field (out, "store", line);
    int64_t failed = s_field_int (store, "failed_commits", 0);
    int64_t refused = s_field_int (store, "refused", 0);
    if (failed || refused) {
        snprintf (line, sizeof line, "%" PRId64 " failed commit%s, %" PRId64
                  " request%s refused", failed, failed == 1 ? "" : "s",
                  refused, refused == 1 ? "" : "s");
        s_print_field (out, "store counts", line);
    }
    if (pv_map_get (store, "error")) {
        char error [300];
        s_print_field (out, "store error",
                       s_field (store, "error", error, sizeof error));
    }
}

static int
s_render_status (const pv_t *data, FILE *out)
{
    char buf [256];
    s_print_field (out, "version", s_field (data, "version", buf, sizeof buf));
    if (pv_map_get (data, "state"))
        s_print_field (out, "state", s_field (data, "state", buf, sizeof buf));
    int64_t uptime_ms = s_field_int (data, "uptime_ms", -1);
    s_print_field (out, "uptime", s_human_ms (uptime_ms, buf, sizeof buf));
    const char *groups [] = { "nodes", "jobs", "queue", "dropped" };
    for (size_t index = 0; index < 4; index++) {
        if (!pv_map_get (data, groups [index]))
            continue;           //  An older broker
        char *text = s_counters (pv_map_get (data, groups [index]));
        s_print_field (out, groups [index], *text ? text : "-");
        free (text);
    }
    s_render_store (pv_map_get (data, "store"), out);
    return 0;
}

static int
s_render_retry (const pv_t *data, FILE *out)
{
    char retry_of [128];
    if (s_render_submitted (data, out) != 0)
        return -2;
    fprintf (out, "it retries job %s\n",
             s_field (data, "retry_of", retry_of, sizeof retry_of));
    return 0;
}

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
    return s_printable (bytes ? bytes : "", len, width, true);
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
    s_table_t *table = s_table_new (6, false, headers);
    for (size_t index = 0; index < pv_size (entries); index++) {
        const pv_t *entry = pv_array_at (entries, index);
        char id [160], backend [80], action [80], task [170], status [32];
        char attempts [32], time [64];
        snprintf (task, sizeof task, "%s %s",
                  s_field (entry, "backend", backend, sizeof backend),
                  s_field (entry, "action", action, sizeof action));
        char *error = s_first_line (pv_map_get (entry, "error"),
                                    CLI_OUTPUT_COLUMNS);
        const char *row [] = {
            s_field (entry, "id", id, sizeof id), task,
            s_field (entry, "status", status, sizeof status),
            s_field (entry, "attempts", attempts, sizeof attempts),
            s_time (pv_map_get (entry, "time"), false, time, sizeof time),
            *error ? error : "-"
        };
        s_table_add (table, false, row);
        free (error);
    }
    if (table->rows > 1)
        s_table_print (table, out, false);
    int64_t total = s_field_int (data, "total", 0);
    fprintf (out, "%" PRId64 " entr%s in the dead-letter queue%s\n", total,
             total == 1 ? "y" : "ies",
             total > (int64_t) pv_size (entries) ? " (use --limit for more)"
                                                 : "");
    s_table_destroy (&table);
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
            s_print_field (out, fields [index],
                           s_field (data, fields [index], buf, sizeof buf));
    s_print_field (out, "time", s_time (pv_map_get (data, "time"), false, buf,
                                        sizeof buf));
    static const char *texts [] = {"error", "output"};
    for (size_t index = 0; index < 2; index++) {
        size_t len = 0;
        const char *text = pv_str (pv_map_get (data, texts [index]), &len);
        if (!len)
            continue;
        char *shown = s_printable (text, len, SIZE_MAX, false);
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
    int64_t purged = s_field_int (data, "purged", 0);
    fprintf (out, "%" PRId64 " dead-letter entr%s purged\n", purged,
             purged == 1 ? "y" : "ies");
    return 0;
}

static void
s_print_window (FILE *out, const char *label, const pv_t *windows)
{
    char line [256], p50 [32], p99 [32];
    size_t used = 0;
    line [0] = 0;
    for (size_t index = 0; index < pv_size (windows); index++) {
        char key [16];
        s_scalar (pv_map_key_at (windows, index), key, sizeof key);
        const pv_t *window = pv_map_value_at (windows, index);
        int64_t count = s_field_int (window, "count", 0);
        s_human_ms (s_field_int (window, "p50", 0), p50, sizeof p50);
        s_human_ms (s_field_int (window, "p99", 0), p99, sizeof p99);
        used += (size_t) snprintf (line + used, sizeof line - used,
                                   "%slast %s: p50 %s, p99 %s (%" PRId64
                                   " samples)", index ? "; " : "", key,
                                   count ? p50 : "-", count ? p99 : "-",
                                   count);
        if (used >= sizeof line)
            break;
    }
    s_print_field (out, label, *line ? line : "-");
}

static int
s_render_queue_stats (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "jobs")) != PV_MAP)
        return -2;
    char *text = s_counters (pv_map_get (data, "jobs"));
    s_print_field (out, "jobs", text);
    free (text);
    text = s_counters (pv_map_get (data, "cells"));
    s_print_field (out, "cells", text);
    free (text);
    const pv_t *oldest = pv_map_get (data, "oldest_pending");
    char buf [128], age [32];
    if (pv_type (oldest) == PV_MAP) {
        s_human_ms (s_field_int (oldest, "age_ms", 0), age, sizeof age);
        char job [64];
        snprintf (buf, sizeof buf, "%s (%s)",
                  s_field (oldest, "job", job, sizeof job), age);
        s_print_field (out, "oldest", buf);
    }
    else
        s_print_field (out, "oldest", "no pending job");
    s_print_window (out, "wait", pv_map_get (data, "wait_ms"));
    s_print_window (out, "run", pv_map_get (data, "run_ms"));
    //  Figures other parts of the broker add (claims, limits...) as they
    //  come: every other scalar or flat map
    for (size_t index = 0; index < pv_size (data); index++) {
        char key [64];
        s_scalar (pv_map_key_at (data, index), key, sizeof key);
        const pv_t *value = pv_map_value_at (data, index);
        if (streq (key, "jobs") || streq (key, "cells")
        ||  streq (key, "oldest_pending") || streq (key, "wait_ms")
        ||  streq (key, "run_ms") || pv_type (value) == PV_ARRAY)
            continue;
        if (pv_type (value) == PV_MAP) {
            text = s_counters (value);
            s_print_field (out, key, *text ? text : "-");
            free (text);
        }
        else
            s_print_field (out, key, s_scalar (value, buf, sizeof buf));
    }
    const char *headers [] = {
        "PRIORITY", "JOBS-PENDING", "JOBS-RUNNING", "JOBS-FINISHED",
        "CELLS-PENDING", "CELLS-RUNNING", "CELLS-FINISHED"
    };
    s_table_t *table = s_table_new (7, false, headers);
    const pv_t *by_priority = pv_map_get (data, "by_priority");
    for (size_t index = 0; index < pv_size (by_priority); index++) {
        const pv_t *row_data = pv_array_at (by_priority, index);
        const pv_t *jobs = pv_map_get (row_data, "jobs");
        const pv_t *cells = pv_map_get (row_data, "cells");
        char cols [7][32];
        s_field (row_data, "priority", cols [0], sizeof cols [0]);
        s_field (jobs, "pending", cols [1], sizeof cols [1]);
        s_field (jobs, "running", cols [2], sizeof cols [2]);
        s_field (jobs, "finished", cols [3], sizeof cols [3]);
        s_field (cells, "pending", cols [4], sizeof cols [4]);
        s_field (cells, "running", cols [5], sizeof cols [5]);
        s_field (cells, "finished", cols [6], sizeof cols [6]);
        const char *row [] = {cols [0], cols [1], cols [2], cols [3],
                              cols [4], cols [5], cols [6]};
        s_table_add (table, false, row);
    }
    if (table->rows > 1) {
        fputc ('\n', out);
        s_table_print (table, out, false);
    }
    s_table_destroy (&table);
    const char *limit_headers [] = {"LIMIT", "SCOPE", "RUNNING", "MAX"};
    table = s_table_new (4, false, limit_headers);
    const pv_t *limits = pv_map_get (data, "limits");
    for (size_t index = 0; index < pv_size (limits); index++) {
        const pv_t *row_data = pv_array_at (limits, index);
        bool per_node = false;
        pv_get_bool (pv_map_get (row_data, "per_node"), &per_node);
        char cols [3][160];
        s_field (row_data, "pattern", cols [0], sizeof cols [0]);
        s_field (row_data, "running", cols [1], sizeof cols [1]);
        s_field (row_data, "max", cols [2], sizeof cols [2]);
        const char *row [] = {cols [0], per_node ? "per node" : "fleet",
                              cols [1], cols [2]};
        s_table_add (table, false, row);
    }
    if (table->rows > 1) {
        fputc ('\n', out);
        s_table_print (table, out, false);
    }
    s_table_destroy (&table);
    const char *action_headers [] = {
        "ACTION", "CELLS-PENDING", "CELLS-RUNNING", "CELLS-FINISHED"
    };
    table = s_table_new (4, false, action_headers);
    const pv_t *by_action = pv_map_get (data, "by_action");
    for (size_t index = 0; index < pv_size (by_action); index++) {
        const pv_t *row_data = pv_array_at (by_action, index);
        const pv_t *cells = pv_map_get (row_data, "cells");
        char cols [4][160];
        s_field (row_data, "action", cols [0], sizeof cols [0]);
        s_field (cells, "pending", cols [1], sizeof cols [1]);
        s_field (cells, "running", cols [2], sizeof cols [2]);
        s_field (cells, "finished", cols [3], sizeof cols [3]);
        const char *row [] = {cols [0], cols [1], cols [2], cols [3]};
        s_table_add (table, false, row);
    }
    if (table->rows > 1) {
        fputc ('\n', out);
        s_table_print (table, out, false);
    }
    s_table_destroy (&table);
    return 0;
}

static int
s_render_node_workers (const pv_t *data, FILE *out)
{
    const pv_t *slots = pv_map_get (data, "slots");
    if (pv_type (pv_map_get (data, "node")) != PV_STR
        || pv_type (slots) != PV_ARRAY)
        return -2;
    char buf [256];
    s_print_field (out, "node", s_field (data, "node", buf, sizeof buf));
    s_print_field (out, "status", s_field (data, "status", buf, sizeof buf));
    snprintf (buf, sizeof buf, "%" PRId64 " running, %" PRId64
              " queued (heartbeat), %" PRId64 " slots",
              s_field_int (data, "running", 0), s_field_int (data, "queued", 0),
              s_field_int (data, "concurrency", 0));
    s_print_field (out, "load", buf);
    char *text = s_counters (pv_map_get (data, "counters"));
    s_print_field (out, "counters", *text ? text : "-");
    free (text);
    const char *headers [] = {
        "JOB", "STEP", "ATTEMPT", "ACTION", "STATUS", "SINCE", "PROGRESS"
    };
    s_table_t *table = s_table_new (7, false, headers);
    for (size_t index = 0; index < pv_size (slots); index++) {
        const pv_t *slot = pv_array_at (slots, index);
        char cols [7][160];
        s_field (slot, "job", cols [0], sizeof cols [0]);
        s_field (slot, "step", cols [1], sizeof cols [1]);
        s_field (slot, "attempt", cols [2], sizeof cols [2]);
        s_field (slot, "action", cols [3], sizeof cols [3]);
        s_field (slot, "status", cols [4], sizeof cols [4]);
        s_time (pv_map_get (slot, "since"), false, cols [5], sizeof cols [5]);
        //  "42% downloading nginx"
        char percent [16] = "", message [128] = "";
        if (pv_map_get (slot, "percent"))
            snprintf (percent, sizeof percent, "%" PRId64 "%%",
                      s_field_int (slot, "percent", 0));
        if (pv_map_get (slot, "message"))
            s_field (slot, "message", message, sizeof message);
        else
        if (pv_map_get (slot, "kind"))
            s_field (slot, "kind", message, sizeof message);
        snprintf (cols [6], sizeof cols [6], "%s%s%s", percent,
                  *percent && *message ? " " : "", message);
        char *shown = s_printable (cols [6], strlen (cols [6]), 48, false);
        snprintf (cols [6], sizeof cols [6], "%s", *shown ? shown : "-");
        free (shown);
        const char *row [] = {cols [0], cols [1], cols [2], cols [3],
                              cols [4], cols [5], cols [6]};
        s_table_add (table, false, row);
    }
    fputc ('\n', out);
    if (table->rows > 1)
        s_table_print (table, out, false);
    else
        fprintf (out, "nothing under way\n");
    s_table_destroy (&table);
    return 0;
}

static int
s_render_node_history (const pv_t *data, FILE *out)
{
    const pv_t *history = pv_map_get (data, "history");
    if (pv_type (history) != PV_ARRAY)
        return -2;
    const char *headers [] = {"SEQ", "TIME", "EVENT", "AGENT", "CHANGES"};
    s_table_t *table = s_table_new (5, false, headers);
    for (size_t index = 0; index < pv_size (history); index++) {
        const pv_t *entry = pv_array_at (history, index);
        char seq [32], time [64], event [32], version [64], previous [64];
        char agent [160];
        s_field (entry, "seq", seq, sizeof seq);
        s_time (pv_map_get (entry, "time"), false, time, sizeof time);
        s_field (entry, "event", event, sizeof event);
        s_field (entry, "agent_version", version, sizeof version);
        if (pv_map_get (entry, "previous_agent_version")) {
            s_field (entry, "previous_agent_version", previous,
                     sizeof previous);
            snprintf (agent, sizeof agent, "%s (was %s)", version, previous);
        }
        else
            snprintf (agent, sizeof agent, "%s", version);
        //  "+a.b -c.d apt 1.0->1.1", or the action count of a first one
        char *changes = s_strdup ("");
        const char *lists [] = {"added", "removed"};
        for (int list = 0; list < 2; list++) {
            const pv_t *names = pv_map_get (entry, lists [list]);
            for (size_t at = 0; at < pv_size (names); at++) {
                char name [160];
                s_scalar (pv_array_at (names, at), name, sizeof name);
                size_t used = strlen (changes);
                changes = s_realloc (changes, used + strlen (name) + 3);
                snprintf (changes + used, strlen (name) + 3, "%s%c%s",
                          used ? " " : "", list ? '-' : '+', name);
            }
        }
        const pv_t *versions = pv_map_get (entry, "versions");
        for (size_t at = 0; at < pv_size (versions); at++) {
            const pv_t *item = pv_array_at (versions, at);
            char backend [80], from [64] = "-", to [64] = "-", part [240];
            s_field (item, "backend", backend, sizeof backend);
            if (pv_type (pv_map_get (item, "from")) == PV_STR)
                s_field (item, "from", from, sizeof from);
            if (pv_type (pv_map_get (item, "to")) == PV_STR)
                s_field (item, "to", to, sizeof to);
            snprintf (part, sizeof part, "%s%s %s->%s", *changes ? " " : "",
                      backend, from, to);
            size_t used = strlen (changes);
            changes = s_realloc (changes, used + strlen (part) + 1);
            memcpy (changes + used, part, strlen (part) + 1);
        }
        if (!*changes && pv_map_get (entry, "hostname")) {
            //  A second agent refused this node (duplicate_node)
            char host [256];
            s_field (entry, "hostname", host, sizeof host);
            free (changes);
            changes = zsys_sprintf ("a second agent from %s", host);
        }
        if (!*changes) {
            free (changes);
            changes = zsys_sprintf ("%" PRId64 " actions",
                                    s_field_int (entry, "actions", 0));
        }
        const char *row [] = {seq, time, event, agent, changes};
        s_table_add (table, false, row);
        free (changes);
    }
    if (table->rows > 1)
        s_table_print (table, out, false);
    else
        fprintf (out, "no registrations recorded\n");
    s_table_destroy (&table);
    return 0;
}

//  When a schedule fires, as text: "cron 0 3 * * * (Europe/Berlin)" or
//  "every 10m".
static const char *
s_schedule_when (const pv_t *schedule, char *buf, size_t buf_len)
{
    char cron [300], tz [80], every [40];
    s_field (schedule, "cron", cron, sizeof cron);
    s_field (schedule, "tz", tz, sizeof tz);
    s_field (schedule, "every", every, sizeof every);
    if (pv_type (pv_map_get (schedule, "every")) == PV_STR)
        snprintf (buf, buf_len, "every %s", every);
    else
    if (pv_type (pv_map_get (schedule, "tz")) == PV_STR)
        snprintf (buf, buf_len, "%s (%s)", cron, tz);
    else
        snprintf (buf, buf_len, "%s (UTC)", cron);
    return buf;
}

static int
s_render_schedule (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "name")) != PV_STR)
        return -2;
    char buf [512];
    bool paused = false;
    pv_get_bool (pv_map_get (data, "paused"), &paused);
    s_header_line (out, "name", s_field (data, "name", buf, sizeof buf));
    s_header_line (out, "when", s_schedule_when (data, buf, sizeof buf));
    s_header_line (out, "target", s_field (data, "target", buf, sizeof buf));
    s_header_line (out, "state", paused ? "paused" : "active");
    s_header_line (out, "overlap", s_field (data, "overlap", buf,
                                            sizeof buf));
    char window [64];
    s_field (data, "catch_up_window", window, sizeof window);
    char catch_up [128];
    snprintf (catch_up, sizeof catch_up, "%s (window %s)",
              s_field (data, "catch_up", buf, sizeof buf), window);
    s_header_line (out, "catch-up", catch_up);
    s_header_line (out, "next run",
                   pv_map_get (data, "next_run")
                       ? s_time (pv_map_get (data, "next_run"), false, buf,
                                 sizeof buf)
                       : "-");
    s_header_line (out, "last run",
                   pv_map_get (data, "last_run")
                       ? s_time (pv_map_get (data, "last_run"), false, buf,
                                 sizeof buf)
                       : "-");
    s_header_line (out, "last job", pv_map_get (data, "last_job")
                                        ? s_field (data, "last_job", buf,
                                                   sizeof buf)
                                        : "-");
    s_header_line (out, "last status", pv_map_get (data, "last_status")
                                           ? s_field (data, "last_status",
                                                      buf, sizeof buf)
                                           : "-");
    snprintf (buf, sizeof buf, "%" PRId64 " started, %" PRId64 " skipped",
              s_field_int (data, "runs", 0), s_field_int (data, "skipped", 0));
    s_header_line (out, "runs", buf);
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
    s_table_t *table = s_table_new (7, false, headers);
    for (size_t index = 0; index < pv_size (schedules); index++) {
        const pv_t *schedule = pv_array_at (schedules, index);
        char name [80], when [400], target [512], next [40], last [40],
            status [256];
        bool paused = false;
        pv_get_bool (pv_map_get (schedule, "paused"), &paused);
        const char *cells [] = {
            s_field (schedule, "name", name, sizeof name),
            s_schedule_when (schedule, when, sizeof when),
            s_field (schedule, "target", target, sizeof target),
            paused ? "paused" : "active",
            pv_map_get (schedule, "next_run")
                ? s_time (pv_map_get (schedule, "next_run"), false, next,
                          sizeof next)
                : "-",
            pv_map_get (schedule, "last_run")
                ? s_time (pv_map_get (schedule, "last_run"), false, last,
                          sizeof last)
                : "-",
            pv_map_get (schedule, "last_status")
                ? s_field (schedule, "last_status", status, sizeof status)
                : "-"};
        s_table_add (table, false, cells);
    }
    s_table_print (table, out, false);
    s_table_destroy (&table);
    return 0;
}

int
cli_render (cli_command_t command, const pv_t *data, cli_output_t output,
            FILE *out)
{
    if (pv_type (data) != PV_MAP)
        return -2;
    if (output == CLI_OUTPUT_JSON) {
        if (pv_write_json (data, out, 2) != 0)
            return -1;
        fputc ('\n', out);
        return 0;
    }
    switch (command) {
        case CLI_CMD_JOB_RUN:
            return s_render_submitted (data, out);
        case CLI_CMD_JOB_STATUS:
            return cli_render_job (data, out, false);
        case CLI_CMD_JOB_LIST:
            return s_render_job_list (data, out);
        case CLI_CMD_JOB_CANCEL:
            return s_render_cancelled (data, out);
        case CLI_CMD_JOB_EVENTS: {
            const pv_t *events = pv_map_get (data, "events");
            if (pv_type (events) != PV_ARRAY)
                return -2;
            size_t count = pv_size (events);
            const pv_t **list = s_realloc (NULL, count * sizeof (pv_t *));
            for (size_t index = 0; index < count; index++)
                list [index] = pv_array_at (events, index);
            s_render_events (list, count, out);
            free (list);
            return 0;
        }
        case CLI_CMD_NODE_LIST:
            return s_render_node_list (data, out);
        case CLI_CMD_NODE_INFO:
            return s_render_node_info (data, out);
        case CLI_CMD_STATUS:
            return s_render_status (data, out);
        case CLI_CMD_JOB_DELETE:
            return s_render_deleted (data, out);
        case CLI_CMD_NODE_DRAIN:
        case CLI_CMD_NODE_RESUME:
            return s_render_node_state (data, out);
        case CLI_CMD_BROKER_DRAIN:
        case CLI_CMD_BROKER_RESUME:
            return s_render_broker_state (data, out);
        case CLI_CMD_KEY_LIST:
            return s_render_keys (data, out);
        case CLI_CMD_KEY_ACCEPT:
        case CLI_CMD_KEY_REJECT:
        case CLI_CMD_KEY_DELETE:
            return s_render_key (data, out);
        case CLI_CMD_JOB_RETRY:
        case CLI_CMD_DLQ_RETRY:
            return s_render_retry (data, out);
        case CLI_CMD_DLQ_LIST:
            return s_render_dlq_list (data, out);
        case CLI_CMD_DLQ_SHOW:
            return s_render_dlq_entry (data, out);
        case CLI_CMD_DLQ_PURGE:
            return s_render_purged (data, out);
        case CLI_CMD_QUEUE_STATS:
            return s_render_queue_stats (data, out);
        case CLI_CMD_NODE_WORKERS:
            return s_render_node_workers (data, out);
        case CLI_CMD_NODE_HISTORY:
            return s_render_node_history (data, out);
        case CLI_CMD_SCHEDULE_ADD:
        case CLI_CMD_SCHEDULE_SHOW:
        case CLI_CMD_SCHEDULE_PAUSE:
        case CLI_CMD_SCHEDULE_RESUME:
            return s_render_schedule (data, out);
        case CLI_CMD_SCHEDULE_LIST:
            return s_render_schedule_list (data, out);
        case CLI_CMD_SCHEDULE_DELETE:
        {
            char name [80];
            if (pv_type (pv_map_get (data, "name")) != PV_STR)
                return -2;
            fprintf (out, "schedule %s deleted\n",
                     s_field (data, "name", name, sizeof name));
            return 0;
        }
        case CLI_CMD_SCHEDULE_RUN: {
            char job [64], name [80];
            s_field (data, "job", job, sizeof job);
            s_field (data, "schedule", name, sizeof name);
            if (!job_id_valid (job))
                return -2;
            fprintf (out, "job %s started by schedule %s\n", job, name);
            return 0;
        }
        default:
            return -2;
    }
}

//  ---------------------------------------------------------------------
//  Help

static const char *s_help_main =
"gridcli - run actions on grid nodes; inspect jobs, nodes and the broker\n"
"\n"
"Usage: gridcli [GLOBAL OPTIONS] COMMAND [ARGUMENTS]\n"
"\n"
"Commands:\n"
"  job run --target T [OPTIONS] BACKEND ACTION [--PARAM VALUE ...]\n"
"                        run one action on every node of target T\n"
"  job run -f FILE [--wait]\n"
"                        run the job described in a YAML job file\n"
"  job status ID         a job's status, per node and per step\n"
"  job list [--status S] [--limit N] [--schedule NAME]\n"
"                        jobs, newest first\n"
"  job cancel ID [--reason TEXT]\n"
"                        cancel a pending or running job\n"
"  job events ID         a job's timeline\n"
"  job delete ID         remove a finished job, its results and events\n"
"  job output ID [--node N] [--step S] [--stderr]\n"
"                        a step's whole output, byte for byte\n"
"  job retry ID [--failed-only] [--target T]\n"
"                        a new job with the same tasks (only on the nodes\n"
"                        that failed; or on T)\n"
"  dlq list|show|retry|purge\n"
"                        the dead-letter queue (gridcli dlq --help)\n"
"  node list             registered nodes\n"
"  node info ID          one node, its backends and the actions it offers\n"
"  node workers ID       what each slot of the node runs now, its counters\n"
"  node history ID [--limit N]\n"
"                        what changed between the node's registrations\n"
"  queue stats           jobs and cells by priority and action, oldest\n"
"                        pending job, wait and run times, dead letters\n"
"  node drain ID         the node takes no new jobs (resume: it does again)\n"
"  node resume ID\n"
"  broker drain          maintenance: no new jobs admitted, running ones\n"
"                        finish, queued ones wait\n"
"  broker resume         leave maintenance\n"
"  key list              enrolled, pending and rejected keys (admin)\n"
"  key accept|reject|delete NODE|KEY\n"
"                        enrol, refuse or forget an agent's key (admin)\n"
"  keygen [--out DIR] [--name NAME]\n"
"                        write this client's key pair (default\n"
"                        ~/.config/grid/client.key)\n"
"  schedule add NAME (--cron EXPR | --every D) [--tz ZONE] [OPTIONS]\n"
"               (-f FILE | --target T [OPTIONS] BACKEND ACTION [--PARAM V])\n"
"                        run a job on a cron schedule or an interval\n"
"  schedule list | show NAME | pause NAME | resume NAME | delete NAME\n"
"  schedule run NAME     start one run now\n"
"  status                broker version, uptime, node and job counts, store\n"
"  help [job|node|broker|key|dlq|queue|schedule|status]\n"
"                        this help, or a command's (also -h, --help,\n"
"                        and COMMAND --help, e.g. gridcli job --help)\n"
"\n"
"Global options (before the command, or among the command's options):\n"
"  --broker EP           the broker's client endpoint; default: GRID_BROKER,\n"
"                        else the config file's broker, else\n"
"                        tcp://127.0.0.1:7701\n"
"  --output table|json   human tables (default) or the answer's data as\n"
"                        JSON on stdout\n"
"  --request-timeout D   total wait for one answer, over 3 tries on fresh\n"
"                        connections (default 5s)\n"
"  --config FILE         config file; default: GRID_CONFIG, else\n"
"                        /etc/grid/gridcli.yaml when it exists\n"
"  --key FILE            this client's key pair; default: GRID_KEY, else\n"
"                        the config file's key, else\n"
"                        ~/.config/grid/client.key\n"
"  --broker-key KEY      the broker's public key (its broker.key file or\n"
"                        40 characters of Z85); default: GRID_BROKER_KEY,\n"
"                        else the config file's broker_key, else\n"
"                        /etc/grid/keys/broker.key, ~/.config/grid/broker.key\n"
"  --insecure            plaintext, no keys: only for a broker that runs\n"
"                        --insecure\n"
"  -h, --help            print help (gridcli job --help: help on job)\n"
"  --print-config        print the settings gridcli would use (broker,\n"
"                        output, timeout, keys), each with where it came\n"
"                        from (flag, env, file, default), and exit\n"
"  --version             print the version and exit\n"
"\n"
"Options of job run (only before BACKEND):\n"
"  --target T            all, group:G, node:ID[,ID...],\n"
"                        label:KEY=V1[.V2...], any, any:TARGET (one node\n"
"                        of the set does the work), or an expression of\n"
"                        those with not, and, or and parentheses:\n"
"                        'group:web and not node:web-03'\n"
"  -f, --file FILE       take the whole job from a YAML job file\n"
"  --wait                wait for the end, with progress on stderr; Ctrl-C\n"
"                        stops waiting and leaves the job running\n"
"  --timeout D           task timeout: the action is stopped after D\n"
"  --retries N           extra attempts on a node that fails, 0 to 10\n"
"  --strategy S          fail-fast (default) or continue\n"
"  --priority N          -100 to 100, higher runs first (default 0)\n"
"  --job-timeout D       stop what is left of the whole job after D\n"
"  --batch N|P%          roll through the nodes N (or P% of them) at a time\n"
"  --max-failures N|P%   failed nodes allowed before no new batch starts\n"
"  --canary N            the first batch is N nodes\n"
"  --check               a dry run: the nodes, the plan and the batches;\n"
"                        runs nothing"
"After BACKEND ACTION every --NAME VALUE (or --NAME=VALUE) is a param of\n"
"the action, even when NAME is also an option's name; only --wait stays a\n"
"flag wherever it is written.\n"
"\n"
"Durations (D): a number and a unit, ms, s, m, h or d, or a sequence of\n"
"them such as 1h30m.\n"
"\n"
"Environment:\n"
"  GRID_BROKER           broker endpoint when --broker is not given\n"
"  GRID_CONFIG           config file when --config is not given\n"
"  GRID_KEY              key pair when --key is not given\n"
"  GRID_BROKER_KEY       broker public key when --broker-key is not given\n"
"  NO_COLOR              when set, failed rows are not coloured\n"
"\n"
"Config file (YAML) keys: broker, output, request_timeout, key,\n"
"broker_key, insecure. A flag wins over the config file, which wins over\n"
"the defaults; GRID_BROKER, GRID_KEY and GRID_BROKER_KEY come after their\n"
"flags and before the file.\n"
"\n"
"Exit codes:\n"
"  0    success; for job run --wait and job status, the job completed\n"
"       (job status of a job still pending or running also gives 0)\n"
"  1    the job failed, partially failed or was cancelled\n"
"  2    usage error: bad option, target, duration, config or job file\n"
"  3    the broker is unreachable, or its answer was missing or malformed\n"
"  4    the broker refused the request (its message and code are shown)\n"
"  130  interrupted (Ctrl-C)\n"
"\n"
"Examples:\n"
"  gridcli job run --target group:web --wait apt install --package nginx\n"
"  gridcli --output json job status j-0193a1b2c3d4-0001\n";

static const char *s_help_job =
"gridcli job - submit, inspect and cancel jobs\n"
"\n"
"Usage:\n"
"  gridcli job run --target T [OPTIONS] BACKEND ACTION [--PARAM VALUE ...]\n"
"  gridcli job run -f FILE [--wait]\n"
"  gridcli job status ID\n"
"  gridcli job list [--status S] [--limit N] [--schedule NAME]\n"
"  gridcli job cancel ID [--reason TEXT]\n"
"  gridcli job events ID\n"
"  gridcli job delete ID\n"
"  gridcli job retry ID [--failed-only] [--target T]\n"
"  gridcli job output ID [--node N] [--step S] [--stderr]\n"
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
"                      label:KEY=V1[.V2...] | any | any:TARGET\n"
"                      (checked before anything is sent)\n"
"  -f FILE             a YAML job file (target, tasks, strategy, timeout,\n"
"                      priority), checked before anything is sent; each\n"
"                      problem is printed with its path; no other job\n"
"                      option may be added\n"
"  --wait              wait for the end (accepted anywhere)\n"
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
"                      -f FILE, over what the file says)\n""  --check             a dry run (job.check): the nodes it would run on,\n"
"                      those it would not and why (offline, drained,\n"
"                      lacking the action), the plan (phases or DAG\n"
"                      order) and the batches, every param checked; runs\n"
"                      and stores nothing. Exit 0 when it would run, 1\n"
"                      when no node would\n"
"Options are read only BEFORE BACKEND. After BACKEND ACTION every\n"
"--NAME VALUE or --NAME=VALUE is a param, so `--timeout 5` there is a\n"
"param named timeout; --wait is the one exception.\n"
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
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli job run --target label:tier=web --wait systemd restart \\\n"
"      --unit nginx\n"
"  gridcli job run -f deploy-web.yaml --wait\n"
"  gridcli job list --status failed --limit 10\n";

static const char *s_help_node =
"gridcli node - registered nodes\n"
"\n"
"Usage:\n"
"  gridcli node list\n"
"  gridcli node info ID\n"
"  gridcli node drain ID\n"
"  gridcli node resume ID\n"
"  gridcli node workers ID\n"
"  gridcli node history ID [--limit N]\n"
"\n"
"node list    ID HOSTNAME STATUS GROUPS LABELS LAST-SEEN RUNNING, sorted by\n"
"             id (RUNNING is tasks running / concurrency)\n"
"node info    the node's fields, then BACKEND VERSION ACTION KIND PARAMS\n"
"             for each action it offers (KIND query only reads, modify\n"
"             changes the host; a param marked * is required)\n"
"node drain   the node takes no new jobs; what it runs goes on; it reads\n"
"             draining until its work is done, then drained\n"
"node resume  the node takes new jobs again\n"
"node workers the node's load (running and queued from its heartbeat, its\n"
"             slots) and counters since the broker started (any-node\n"
"             claims, reclaimed, lease expirations; run, failed, lost,\n"
"             retried), then JOB STEP ATTEMPT ACTION STATUS SINCE PROGRESS\n"
"             for each step sent to it and not yet ended\n"
"node history SEQ TIME EVENT AGENT CHANGES, newest first: the first\n"
"             registration, then each one that added (+b.a) or removed\n"
"             (-b.a) actions or changed a backend's (b 1.0->1.1) or the\n"
"             agent's version; --limit N, 1 to 1000 (default 50)\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli node list\n"
"  gridcli --output json node info web-01\n";

static const char *s_help_broker =
"gridcli broker - broker maintenance\n"
"\n"
"Usage:\n"
"  gridcli broker drain\n"
"  gridcli broker resume\n"
"\n"
"broker drain   maintenance mode: new submits are refused (maintenance),\n"
"               running jobs finish, queued jobs wait; the broker reads\n"
"               draining, then maintenance once nothing runs. It survives\n"
"               a broker restart.\n"
"broker resume  admit jobs again; queued jobs start\n"
"\n"
"Global options and exit codes: gridcli --help.\n";

static const char *s_help_key =
"gridcli key - enrol agents' keys, revoke keys (admin role)\n"
"\n"
"Usage:\n"
"  gridcli key list\n"
"  gridcli key accept NODE|KEY\n"
"  gridcli key reject NODE|KEY\n"
"  gridcli key delete NODE|KEY\n"
"  gridcli keygen [--out DIR] [--name NAME] [--force]\n"
"\n"
"A new agent's key waits as pending until an admin accepts it; then the\n"
"key is bound to the node id it registered with, and no other key may\n"
"speak for that node. NODE names the key bound to that node (or the one\n"
"pending key that claims it); KEY is the 40-character public key.\n"
"\n"
"key list     KEY KIND STATUS NODE/ROLE HOST/NAME SINCE: agent keys\n"
"             (pending rows marked !) and the client keys of the\n"
"             broker's config with their roles\n"
"key accept   enrol a pending key (a KEY never seen before is enrolled\n"
"             ahead of its agent); a client key revoked by key reject\n"
"             may connect again\n"
"key reject   refuse the key, now and at every later connection; its node\n"
"             goes offline\n"
"key delete   forget the key: its node goes offline and the next key\n"
"             that says hello for it waits as pending (a rebuilt host)\n"
"keygen       write this client's key pair and print its public key\n"
"\n"
"Global options and exit codes: gridcli --help. See docs/SECURITY.md.\n"
"\n"
"Examples:\n"
"  gridcli key list\n"
"  gridcli key accept web-01\n";

static const char *s_help_schedule =
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
"                        UTC). A time skipped by daylight saving runs once\n"
"                        at the end of the gap; a repeated time runs once\n"
"                        (with * in minute or hour: on both passes)\n"
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

static const char *s_help_status =
"gridcli status - the broker at a glance\n"
"\n"
"Usage: gridcli status\n"
"\n"
"Prints the broker's version and uptime, its nodes (online, offline,\n"
"total), its jobs by status, its work queue (steps waiting for a free\n"
"slot; any-node claims, reclaims, lease expirations, late results), and\n"
"its counters of dropped messages\n"
"(malformed, from unknown nodes, stale) and of refusals (handshakes,\n"
"unauthorized keys, impersonation, forbidden requests, refused topics;\n"
"see docs/SECURITY.md), then its store: state (ok, nearly_full, full,\n"
"error), what it uses of store.max_size, the disk's free space, and after\n"
"failed commits how many there were and why. Exits 0 when the broker\n"
"answers.\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli status\n"
"  gridcli --broker tcp://grid-ctl:7701 --output json status\n";

static const char *s_help_queue =
"gridcli queue - the broker's work queue at a glance\n"
"\n"
"Usage: gridcli queue stats\n"
"\n"
"Prints jobs (pending and running now, finished since the broker started,\n"
"by status), the cells of the live jobs (pending, running, finished), the\n"
"oldest pending job, wait times (submit to a job's first step starting,\n"
"per node) and run times (per attempt) at p50 and p99 over the last 5\n"
"minutes and the last hour, the dead-letter queue's size, the any-node\n"
"figures (waiting, claims, reclaims, lease expirations, late results),\n"
"then tables by priority, of the concurrency limits in use (LIMIT SCOPE\n"
"RUNNING MAX) and by backend.action. --output json gives every figure.\n"
"\n"
"Global options and exit codes: gridcli --help.\n";

static const char *s_help_dlq =
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

void
cli_print_help (const char *topic, FILE *out)
{
    if (topic && streq (topic, "job"))
        fputs (s_help_job, out);
    else
    if (topic && streq (topic, "node"))
        fputs (s_help_node, out);
    else
    if (topic && streq (topic, "status"))
        fputs (s_help_status, out);
    else
    if (topic && streq (topic, "broker"))
        fputs (s_help_broker, out);
    else
    if (topic && streq (topic, "key"))
        fputs (s_help_key, out);
    else
    if (topic && streq (topic, "dlq"))
        fputs (s_help_dlq, out);
    else
    if (topic && streq (topic, "queue"))
        fputs (s_help_queue, out);
    else
    if (topic && streq (topic, "schedule"))
        fputs (s_help_schedule, out);
    else
        fputs (s_help_main, out);
}

//  ---------------------------------------------------------------------
//  The program

static bool
s_color (FILE *file)
{
    int fd = fileno (file);
    const char *no_color = getenv ("NO_COLOR");
    return fd >= 0 && isatty (fd) && !(no_color && *no_color);
}

//  One request and its reply. Returns CLI_EXIT_OK with *DATA_P lent by
//  *REPLY_P (the caller destroys it), or an exit code after printing why
//  to ERR.
static int
s_call (const cli_settings_t *settings, const pw_t *request, const char *id,
        pv_doc_t **reply_p, const pv_t **data_p, FILE *err)
{
    char why [1024] = "";
    *data_p = NULL;
    int rc = cli_exchange_keys (&settings->keys, settings->broker,
                                pw_data (request), pw_size (request),
                                settings->request_timeout_ms, reply_p, why,
                                sizeof why);
    if (rc != CLI_EXIT_OK) {
        fprintf (err, "gridcli: %s\n", why);
        return rc;
    }
    return cli_reply_data (*reply_p, id, data_p, err);
}

//  Sleeps MS in short slices so that Ctrl-C is seen at once. Returns true
//  when interrupted.
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
    s_field (record, "id", id, sizeof id);
    s_field (record, "status", status, sizeof status);
    const pv_t *reason_field = pv_map_get (record, "reason");
    if (pv_size (reason_field))
        snprintf (line, sizeof line, "job %s %s: %s", id, status,
                  s_scalar (reason_field, reason, sizeof reason));
    else
        snprintf (line, sizeof line, "job %s %s", id, status);
    char *text = s_printable (line, strlen (line), SIZE_MAX, true);
    fprintf (out, "\n%s\n", text);
    free (text);
}

//  Polls job.progress until JOB ends, with progress on ERR: one line
//  rewritten in place on a terminal, else a new line only when it
//  changes. Then fetches the whole record once (job.get) and renders it:
//  a poll costs the broker a count, not the record of every node.
//  job status of a job not yet finished: its running tasks' progress
//  (job.progress; nothing when the broker has none to give).
static void
s_print_task_progress (const cli_settings_t *settings, const pv_t *record,
                       FILE *out)
{
    char job [64];
    s_field (record, "id", job, sizeof job);
    if (!job_id_valid (job))
        return;
    char id [CLI_REQUEST_ID_LEN];
    cli_request_id_make (id, sizeof id);
    pw_t *writer = pw_new ();
    s_request_job_progress (writer, id, job);
    pv_doc_t *reply = NULL;
    const pv_t *data = NULL;
    FILE *quiet = fopen ("/dev/null", "w");
    int rc = s_call (settings, writer, id, &reply, &data,
                     quiet ? quiet : stderr);
    if (quiet)
        fclose (quiet);
    const pv_t *tasks = rc == CLI_EXIT_OK ? pv_map_get (data, "tasks") : NULL;
    if (pv_size (tasks) > 0)
        fputc ('\n', out);
    for (size_t index = 0; index < pv_size (tasks); index++) {
        char line [300];
        cli_task_progress_format (pv_array_at (tasks, index), line,
                                  sizeof line);
        fprintf (out, "progress  %s (step %" PRId64 ")\n", line,
                 s_field_int (pv_array_at (tasks, index), "step", 0));
    }
    pv_doc_destroy (&reply);
    pw_destroy (&writer);
}

static int
s_wait (const cli_settings_t *settings, const char *job, FILE *out,
        FILE *err)
{
    bool tty = isatty (fileno (err)) == 1;
    bool line_open = false;
    char last [512] = "";
    int64_t interval_ms = S_WAIT_FIRST_MS;
    pw_t *writer = pw_new ();
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
        char id [CLI_REQUEST_ID_LEN];
        cli_request_id_make (id, sizeof id);
        pw_reset (writer);
        if (finished || whole)
            s_request_job_get (writer, id, job);
        else
        if (watch)
            s_request_job_watch (writer, id, job, version, watch_ms);
        else
            s_request_job_progress (writer, id, job);

        //  Diagnostics are held back so that they do not land in the
        //  middle of a progress line.
        char *held = NULL;
        size_t held_size = 0;
        FILE *hold = open_memstream (&held, &held_size);
        pv_doc_t *reply = NULL;
        const pv_t *data = NULL;
        rc = s_call (settings, writer, id, &reply, &data, hold ? hold : err);
        if (hold)
            fclose (hold);
        if (rc != CLI_EXIT_OK && !finished && !whole && reply
            && pv_str_eq (pv_map_get (pv_doc_root (reply), "code"),
                          PROTO_ERR_UNKNOWN_TYPE)) {
            //  The broker predates job.watch: poll job.progress; one that
            //  predates job.progress: poll the whole record
            free (held);
            pv_doc_destroy (&reply);
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
        if (rc == CLI_EXIT_OK && !s_is_job_record (data)) {
            free (held);
            held = s_strdup (finished ? "gridcli: the broker's job record "
                                        "is malformed\n"
                                      : "gridcli: the broker's job progress "
                                        "is malformed\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        if (rc == CLI_EXIT_OK && !finished && cli_job_finished (data)) {
            //  Ended: one more request for the whole record
            free (held);
            pv_doc_destroy (&reply);
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
            pv_doc_destroy (&reply);
            if (rc == CLI_EXIT_INTERRUPTED)
                s_follow_up (err, job);
            else
            if (rc == CLI_EXIT_UNREACHABLE)
                fprintf (err, "gridcli: job %s may still be running; see "
                         "gridcli job status %s\n", job, job);
            break;
        }
        free (held);

        if (finished) {
            if (settings->output == CLI_OUTPUT_JSON)
                cli_render (CLI_CMD_JOB_STATUS, data, CLI_OUTPUT_JSON, out);
            else {
                cli_render_job (data, out, s_color (out));
                s_final_line (data, out);
            }
            rc = cli_job_exit_code (data);
            pv_doc_destroy (&reply);
            break;
        }
        char line [512];
        cli_progress_format (data, line, sizeof line);
        pv_doc_destroy (&reply);
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
    pw_destroy (&writer);
    return rc;
}

//  job events, page after page: the broker answers events with seq > after,
//  and may answer fewer than it holds, so ask again from the newest seen
//  until a page brings nothing new.
static int
s_events (const cli_settings_t *settings, const char *job, FILE *out,
          FILE *err)
{
    pv_doc_t **docs = NULL;
    size_t doc_count = 0;
    const pv_t **events = NULL;
    size_t count = 0;
    int64_t after = -1;
    int rc = CLI_EXIT_OK;
    pw_t *writer = pw_new ();
    for (size_t page = 0; page < S_EVENT_PAGES; page++) {
        char id [CLI_REQUEST_ID_LEN];
        cli_request_id_make (id, sizeof id);
        pw_reset (writer);
        s_request_job_events (writer, id, job, after);
        pv_doc_t *reply = NULL;
        const pv_t *data = NULL;
        rc = s_call (settings, writer, id, &reply, &data, err);
        const pv_t *list = pv_map_get (data, "events");
        if (rc == CLI_EXIT_OK && pv_type (list) != PV_ARRAY) {
            fprintf (err, "gridcli: the broker's answer to job.events is "
                     "malformed (no events list)\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        if (rc != CLI_EXIT_OK) {
            pv_doc_destroy (&reply);
            break;
        }
        docs = s_realloc (docs, (doc_count + 1) * sizeof (pv_doc_t *));
        docs [doc_count++] = reply;
        int64_t newest = after;
        size_t added = 0;
        for (size_t index = 0; index < pv_size (list); index++) {
            const pv_t *event = pv_array_at (list, index);
            int64_t seq = s_field_int (event, "seq", -1);
            if (after >= 0 && seq <= after)
                continue;        //  Already shown
            events = s_realloc (events, (count + 1) * sizeof (pv_t *));
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
                cli_render (CLI_CMD_JOB_EVENTS, pv_doc_root (merged),
                            CLI_OUTPUT_JSON, out);
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
    for (size_t index = 0; index < doc_count; index++)
        pv_doc_destroy (&docs [index]);
    free (docs);
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
    char id [CLI_REQUEST_ID_LEN];
    cli_request_id_make (id, sizeof id);
    pw_t *writer = pw_new ();
    s_request_job_get (writer, id, args->id);
    pv_doc_t *reply = NULL;
    const pv_t *record = NULL;
    int rc = s_call (settings, writer, id, &reply, &record, err);
    pw_destroy (&writer);
    const pv_t *expected = pv_map_get (record, "expected");
    if (rc == CLI_EXIT_OK && !args->node) {
        if (pv_size (expected) == 1)
            s_scalar (pv_array_at (expected, 0), node, node_len);
        else {
            char *list = s_join (expected);
            fprintf (err, "gridcli: job %s ran on %zu nodes (%s): say which "
                     "with --node\n", args->id, pv_size (expected), list);
            free (list);
            rc = CLI_EXIT_USAGE;
        }
    }
    if (rc == CLI_EXIT_OK && !args->step_given) {
        const pv_t *results = pv_map_get (record, "results");
        *step_p = -1;
        for (int64_t step = s_step_count (record) - 1; step >= 0 && *step_p < 0;
             step--) {
            char key [24];
            snprintf (key, sizeof key, "%" PRId64, step);
            const pv_t *cell = pv_map_get (pv_map_get (results, key), node);
            if (s_field_int (cell, "attempts", 0) > 0)
                *step_p = (int) step;
        }
        if (*step_p < 0) {
            fprintf (err, "gridcli: node %s has run no step of job %s yet\n",
                     node, args->id);
            rc = CLI_EXIT_JOB_FAILED;
        }
    }
    pv_doc_destroy (&reply);
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
    pw_t *writer = pw_new ();
    int64_t offset = 0;
    while (rc == CLI_EXIT_OK) {
        char id [CLI_REQUEST_ID_LEN];
        cli_request_id_make (id, sizeof id);
        pw_reset (writer);
        proto_request_begin (writer, "job.output", id, 6);
        pw_str (writer, "job");
        pw_str (writer, args->id);
        pw_str (writer, "node");
        pw_str (writer, node);
        pw_str (writer, "step");
        pw_int (writer, step);
        pw_str (writer, "stream");
        pw_str (writer, args->stderr_stream ? "stderr" : "stdout");
        pw_str (writer, "offset");
        pw_int (writer, offset);
        pw_str (writer, "limit");
        pw_int (writer, S_OUTPUT_PAGE);
        pv_doc_t *reply = NULL;
        const pv_t *data = NULL;
        rc = s_call (settings, writer, id, &reply, &data, err);
        if (rc != CLI_EXIT_OK) {
            pv_doc_destroy (&reply);
            break;
        }
        size_t len = 0;
        const char *bytes = pv_str (pv_map_get (data, "data"), &len);
        int64_t next = s_field_int (data, "next", -1);
        int64_t size = s_field_int (data, "size", -1);
        int64_t dropped = s_field_int (data, "dropped", 0);
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
                         s_human_bytes (dropped, text, sizeof text),
                         size / 2);
            }
            pv_doc_destroy (&reply);
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
        pv_doc_destroy (&reply);
    }
    pw_destroy (&writer);
    return rc;
}

static void
s_print_job_errors (FILE *err, const char *file, const job_errors_t *errors)
{
    for (size_t index = 0; index < errors->count; index++) {
        const char *item = errors->items [index];
        if (file && strncmp (item, file, strlen (file)) != 0)
            fprintf (err, "gridcli: %s: %s\n", file, item);
        else
        if (file)
            fprintf (err, "gridcli: %s\n", item);
        else
            fprintf (err, "gridcli: invalid job: %s\n", item);
    }
    if (errors->truncated)
        fprintf (err, "gridcli: (more problems not shown)\n");
}

//  Where a setting came from: its flag, else its environment variable,
//  else the config file (conf_print_setting tells file from default).
static const char *
s_origin (bool flag_given, const char *flag, const char *env_name,
          char *buf, size_t buf_len)
{
    if (flag_given)
        return flag;
    const char *env = env_name ? getenv (env_name) : NULL;
    if (env && *env) {
        snprintf (buf, buf_len, "env %s", env_name);
        return buf;
    }
    return NULL;
}

//  --print-config: the settings gridcli would use, each with where it came
//  from (flag, environment, config file or default).
static void
s_print_config (const cli_args_t *args, const cli_settings_t *settings,
                FILE *out)
{
    pv_doc_t *doc = NULL;
    char why [512];
    if (settings->config_path)
        conf_load_file (settings->config_path, &doc, why, sizeof why);
    conf_origin_t origin = {out, doc ? pv_doc_root (doc) : NULL,
                            settings->config_path};
    const conf_origin_t *o = &origin;
    fprintf (out, "# gridcli %s: flags over the environment over %s over the "
             "defaults\n", GRID_VERSION,
             settings->config_path ? settings->config_path
                                   : "(no config file)");
    char env [64];
    const char *by = s_origin (args->broker != NULL, "--broker", "GRID_BROKER",
                               env, sizeof env);
    conf_print_setting (o, "broker", settings->broker, true, by, by != NULL);
    conf_print_setting (o, "output", settings->output == CLI_OUTPUT_JSON
                                     ? "json" : "table",
                        true, "--output", args->output_given);
    conf_print_duration (o, "request_timeout", settings->request_timeout_ms,
                         "--request-timeout", args->request_timeout_ms > 0);
    //  The keys as cli_keys_load looks for them
    char dir [512], default_key [600], default_broker [600];
    cli_keys_default_dir (getenv ("HOME"), dir, sizeof dir);
    snprintf (default_key, sizeof default_key, "%s/client.key", dir);
    snprintf (default_broker, sizeof default_broker, "%s/broker.key", dir);
    by = s_origin (args->key != NULL, "--key", "GRID_KEY", env, sizeof env);
    const char *key = args->key ? args->key
                    : by ? getenv ("GRID_KEY")
                    : settings->key_path ? settings->key_path : default_key;
    conf_print_setting (o, "key", key, true, by, by != NULL);
    by = s_origin (args->broker_key != NULL, "--broker-key", "GRID_BROKER_KEY",
                   env, sizeof env);
    const char *broker_key = args->broker_key ? args->broker_key
                           : by ? getenv ("GRID_BROKER_KEY")
                           : settings->broker_key ? settings->broker_key
                           : access (KEYS_DEFAULT_BROKER_KEY, R_OK) == 0
                           ? KEYS_DEFAULT_BROKER_KEY : default_broker;
    conf_print_setting (o, "broker_key", broker_key, true, by, by != NULL);
    conf_print_setting (o, "insecure",
                        args->insecure || settings->insecure ? "true"
                                                             : "false",
                        false, "--insecure", args->insecure);
    pv_doc_destroy (&doc);
}

int
cli_run (int argc, char **argv, FILE *out, FILE *err)
{
    cli_args_t args;
    cli_settings_t settings = { .broker = NULL };
    job_spec_t *spec = NULL;
    job_errors_t errors = { .count = 0 };
    pw_t *writer = NULL;
    pv_doc_t *reply = NULL;
    char why [1024] = "";
    int rc = CLI_EXIT_OK;

    if (cli_args_parse (&args, argc, argv, why, sizeof why) != 0) {
        fprintf (err, "gridcli: %s\nrun 'gridcli %s%s--help' for usage\n",
                 why, args.help_topic ? args.help_topic : "",
                 args.help_topic ? " " : "");
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (args.command == CLI_CMD_HELP) {
        cli_print_help (args.help_topic, out);
        goto done;
    }
    if (args.command == CLI_CMD_VERSION) {
        fprintf (out, "gridcli %s (protocol %d)\n", GRID_VERSION,
                 PROTO_VERSION);
        goto done;
    }
    if (cli_settings_resolve (&args, getenv ("GRID_BROKER"),
                              getenv ("GRID_CONFIG"), CLI_DEFAULT_CONFIG,
                              &settings, why, sizeof why) != 0) {
        fprintf (err, "gridcli: %s\n", why);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (args.command == CLI_CMD_PRINT_CONFIG) {
        s_print_config (&args, &settings, out);
        goto done;
    }
    if ((args.command == CLI_CMD_JOB_RUN
    ||   args.command == CLI_CMD_SCHEDULE_ADD) && args.file
    &&  job_spec_load_file (args.file, &spec, &errors) != 0) {
        s_print_job_errors (err, args.file, &errors);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (spec)
        cli_job_apply_options (&args, spec);
    if (cli_keys_load (&args, &settings, getenv ("GRID_KEY"),
                       getenv ("GRID_BROKER_KEY"), getenv ("HOME"),
                       &settings.keys, why, sizeof why) != 0) {
        fprintf (err, "gridcli: %s\n", why);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    if (args.command == CLI_CMD_JOB_EVENTS) {
        rc = s_events (&settings, args.id, out, err);
        goto done;
    }
    if (args.command == CLI_CMD_JOB_OUTPUT) {
        rc = s_job_output (&settings, &args, out, err);
        goto done;
    }

    char id [CLI_REQUEST_ID_LEN];
    cli_request_id_make (id, sizeof id);
    writer = pw_new ();
    if (cli_request_build (&args, spec, id, writer, &errors) != 0) {
        s_print_job_errors (err, NULL, &errors);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    const pv_t *data = NULL;
    rc = s_call (&settings, writer, id, &reply, &data, err);
    if (rc == CLI_EXIT_INTERRUPTED && args.command == CLI_CMD_JOB_RUN)
        fprintf (err, "gridcli: the job may or may not have been "
                 "submitted; see gridcli job list\n");
    if (rc != CLI_EXIT_OK)
        goto done;

    if (args.command == CLI_CMD_JOB_RUN && args.check) {
        rc = settings.output == CLI_OUTPUT_TABLE
                 ? cli_render_check (data, out)
                 : cli_render (args.command, data, settings.output, out);
        if (rc == -2) {
            fprintf (err, "gridcli: the broker's answer is malformed (its "
                     "data does not have the shape of a job.check answer)\n");
            rc = CLI_EXIT_UNREACHABLE;
        }
        else
        if (rc == 0 && pv_size (pv_map_get (data, "nodes")) == 0)
            rc = CLI_EXIT_JOB_FAILED;   //  It would run nowhere
        goto done;
    }
    if (args.command == CLI_CMD_JOB_RUN && args.wait) {
        char job [64];
        s_field (data, "job", job, sizeof job);
        if (!job_id_valid (job)) {
            fprintf (err, "gridcli: the broker's answer to job.submit "
                     "carries no job id\n");
            rc = CLI_EXIT_UNREACHABLE;
            goto done;
        }
        fprintf (err, "job %s submitted; waiting (Ctrl-C stops waiting, the "
                 "job goes on)\n", job);
        rc = s_wait (&settings, job, out, err);
        goto done;
    }
    if (args.command == CLI_CMD_JOB_STATUS
    &&  settings.output == CLI_OUTPUT_TABLE) {
        rc = cli_render_job (data, out, s_color (out));
        if (rc == 0 && !cli_job_finished (data))
            s_print_task_progress (&settings, data, out);
    }
    else
        rc = cli_render (args.command, data, settings.output, out);
    if (rc == -2) {
        fprintf (err, "gridcli: the broker's answer is malformed (its data "
                 "does not have the shape of a %s answer)\n",
                 s_command_name (args.command));
        rc = CLI_EXIT_UNREACHABLE;
    }
    else
    if (rc != 0) {
        fprintf (err, "gridcli: cannot write the output: %s\n",
                 strerror (errno));
        rc = CLI_EXIT_UNREACHABLE;
    }
    else
    if (args.command == CLI_CMD_JOB_STATUS)
        rc = cli_job_exit_code (data);

done:
    fflush (out);
    pv_doc_destroy (&reply);
    pw_destroy (&writer);
    job_spec_destroy (&spec);
    job_errors_clear (&errors);
    cli_settings_clear (&settings);
    cli_args_clear (&args);
    return rc;
}
