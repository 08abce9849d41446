/*  =========================================================================
    cli - the job options shared by job run and schedule add (jobopts.h)
    =========================================================================
*/
#include "jobopts.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/proto.h"
#include "../proto/trace.h"
#include "cmd.h"
#include "util.h"

#define S_MIN_PRIORITY -100
#define S_MAX_PRIORITY 100

enum {
    S_OPT_WAIT = CLI_OPT_COMMAND, S_OPT_CHECK, S_OPT_TARGET, S_OPT_TIMEOUT,
    S_OPT_JOB_TIMEOUT, S_OPT_RETRIES, S_OPT_STRATEGY, S_OPT_PRIORITY,
    S_OPT_BATCH, S_OPT_MAX_FAILURES, S_OPT_CANARY, S_OPT_LIMITS, S_OPT_LEASE,
    S_OPT_STALL_TIMEOUT, S_OPT_IDEMPOTENCY_KEY, S_OPT_TRACEPARENT, S_OPT_NOTIFY,
    S_OPT_FOLLOW, S_OPT_DIFF
};

//  Options of job run, read only before BACKEND (also schedule add's)
const struct option cli_run_options [] = {
    {"wait", no_argument, NULL, S_OPT_WAIT},
    {"follow", no_argument, NULL, S_OPT_FOLLOW},
    {"check", no_argument, NULL, S_OPT_CHECK},
    {"diff", no_argument, NULL, S_OPT_DIFF},
    {"target", required_argument, NULL, S_OPT_TARGET},
    {"file", required_argument, NULL, CLI_OPT_FILE},
    {"timeout", required_argument, NULL, S_OPT_TIMEOUT},
    {"job-timeout", required_argument, NULL, S_OPT_JOB_TIMEOUT},
    {"retries", required_argument, NULL, S_OPT_RETRIES},
    {"strategy", required_argument, NULL, S_OPT_STRATEGY},
    {"priority", required_argument, NULL, S_OPT_PRIORITY},
    {"batch", required_argument, NULL, S_OPT_BATCH},
    {"max-failures", required_argument, NULL, S_OPT_MAX_FAILURES},
    {"canary", required_argument, NULL, S_OPT_CANARY},
    {"limits", required_argument, NULL, S_OPT_LIMITS},
    {"lease", required_argument, NULL, S_OPT_LEASE},
    {"stall-timeout", required_argument, NULL, S_OPT_STALL_TIMEOUT},
    {"idempotency-key", required_argument, NULL, S_OPT_IDEMPOTENCY_KEY},
    {"traceparent", required_argument, NULL, S_OPT_TRACEPARENT},
    {"notify", required_argument, NULL, S_OPT_NOTIFY},
    {NULL, 0, NULL, 0}
};

//  Reads the first PATTERN=N of TEXT (up to a comma or the end) into
//  PATTERN and *MAX_P. Returns where the next one starts, or NULL when
//  it is not one.
static const char *
s_limit_next (const char *text, char *pattern, size_t pattern_len,
              int *max_p)
{
    const char *end = strchr (text, ',');
    size_t len = end ? (size_t) (end - text) : strlen (text);
    const char *equals = memchr (text, '=', len);
    if (!equals || (size_t) (equals - text) >= pattern_len)
        return NULL;
    memcpy (pattern, text, (size_t) (equals - text));
    pattern [equals - text] = 0;
    char number [16];
    size_t number_len = len - (size_t) (equals - text) - 1;
    if (number_len == 0 || number_len >= sizeof number)
        return NULL;
    memcpy (number, equals + 1, number_len);
    number [number_len] = 0;
    if (!job_limit_pattern_valid (pattern)
        || cli_parse_int (number, 1, 1000000, max_p))
        return NULL;
    return end ? end + 1 : text + len;
}

//  --limits PATTERN=N[,PATTERN=N...]: a job's own concurrency limits
static int
s_limits_check (const char *text, char *err, size_t err_len)
{
    size_t count = 0;
    const char *cursor = text;
    while (*cursor) {
        char pattern [NAME_MAX_LEN * 2 + 2];
        int max = 0;
        cursor = s_limit_next (cursor, pattern, sizeof pattern, &max);
        if (!cursor || ++count > JOB_MAX_LIMITS)
            return cli_fail (err, err_len, "--limits must be up to %d "
                             "BACKEND.ACTION=N separated by commas (either "
                             "part may be *, N at least 1), e.g. "
                             "apt.install=2,rke2.*=1; not '%s'",
                             JOB_MAX_LIMITS, text);
    }
    if (count == 0)
        return cli_fail (err, err_len, "--limits needs BACKEND.ACTION=N, "
                         "e.g. apt.install=2");
    return 0;
}

int
cli_run_option (cli_args_t *args, int option, const char *value, char *err,
                size_t err_len)
{
    int canary = 0;
    switch (option) {
        case S_OPT_WAIT:
            args->wait = true;
            return 0;
        case S_OPT_FOLLOW:
            args->follow = true;
            return 0;
        case S_OPT_CHECK:
            args->check = true;
            return 0;
        case S_OPT_DIFF:
            args->diff = true;
            return 0;
        case S_OPT_TARGET:
            return cli_opt_target (args, value, err, err_len);
        case CLI_OPT_FILE:
            if (!*value)
                return cli_fail (err, err_len, "-f needs a job file name");
            args->file = value;
            return 0;
        case S_OPT_TIMEOUT:
            return cli_opt_duration ("--timeout", value,
                                     &args->task_timeout_ms, err, err_len);
        case S_OPT_JOB_TIMEOUT:
            return cli_opt_duration ("--job-timeout", value,
                                     &args->job_timeout_ms, err, err_len);
        case S_OPT_RETRIES:
            if (cli_parse_int (value, 0, JOB_MAX_RETRIES, &args->retries))
                return cli_fail (err, err_len, "--retries must be a whole "
                                 "number from 0 to %d, not '%s'",
                                 JOB_MAX_RETRIES, value);
            return 0;
        case S_OPT_STRATEGY:
            if (!streq (value, "fail-fast") && !streq (value, "continue"))
                return cli_fail (err, err_len, "--strategy must be fail-fast "
                                 "or continue, not '%s'", value);
            args->strategy = value;
            return 0;
        case S_OPT_PRIORITY:
            if (cli_parse_int (value, S_MIN_PRIORITY, S_MAX_PRIORITY,
                               &args->priority))
                return cli_fail (err, err_len, "--priority must be a whole "
                                 "number from %d to %d, not '%s'",
                                 S_MIN_PRIORITY, S_MAX_PRIORITY, value);
            args->priority_given = true;
            return 0;
        case S_OPT_BATCH:
            if (job_amount_parse (value, true, &args->batch))
                return cli_fail (err, err_len, "--batch must be a node count "
                                 "(1 to %d) or a percent (1%% to 100%%), not "
                                 "'%s'", JOB_MAX_BATCH, value);
            return 0;
        case S_OPT_MAX_FAILURES:
            if (job_amount_parse (value, false, &args->max_failures))
                return cli_fail (err, err_len, "--max-failures must be a "
                                 "node count (0 to %d) or a percent (1%% to "
                                 "100%%), not '%s'", JOB_MAX_BATCH, value);
            return 0;
        case S_OPT_CANARY:
            if (cli_parse_int (value, 1, JOB_MAX_BATCH, &canary))
                return cli_fail (err, err_len, "--canary must be a whole "
                                 "number from 1 to %d, not '%s'",
                                 JOB_MAX_BATCH, value);
            args->canary = (uint32_t) canary;
            return 0;
        case S_OPT_LIMITS:
            if (s_limits_check (value, err, err_len))
                return -1;
            args->limits = value;
            return 0;
        case S_OPT_LEASE:
            if (cli_opt_duration ("--lease", value, &args->lease_ms, err,
                                  err_len))
                return -1;
            if (args->lease_ms < JOB_MIN_LEASE_MS
                || args->lease_ms > JOB_MAX_LEASE_MS)
                return cli_fail (err, err_len, "--lease must be from %dms "
                                 "to 1d, not '%s'", JOB_MIN_LEASE_MS, value);
            return 0;
        case S_OPT_STALL_TIMEOUT:
            return cli_opt_duration ("--stall-timeout", value,
                                     &args->stall_timeout_ms, err, err_len);
        case S_OPT_IDEMPOTENCY_KEY: {
            //  The broker's rule (job spec idempotency_key)
            size_t len = strlen (value);
            bool printable = len > 0 && len <= 256;
            for (size_t at = 0; at < len && printable; at++)
                printable = (unsigned char) value [at] >= 0x20
                            && value [at] != 0x7f;
            if (!printable)
                return cli_fail (err, err_len, "--idempotency-key must be 1 "
                                 "to 256 bytes of printable text");
            args->idempotency_key = value;
            return 0;
        }
        case S_OPT_TRACEPARENT: {
            trace_ctx_t ctx;
            char why [160];
            if (trace_parse (value, &ctx, why, sizeof why) != 0)
                return cli_fail (err, err_len, "--%s", why);
            args->traceparent = value;
            return 0;
        }
        case S_OPT_NOTIFY: {
            //  The broker's rule (job spec notify[].url); whether the URL
            //  is allowed is the broker's to say (notify.allow)
            char why [256];
            if (job_notify_url_check (value, why, sizeof why) != 0)
                return cli_fail (err, err_len, "--notify: %s", why);
            if (args->notify_count == JOB_MAX_NOTIFY)
                return cli_fail (err, err_len, "--notify: at most %d "
                                 "webhooks", JOB_MAX_NOTIFY);
            args->notify [args->notify_count++] = value;
            return 0;
        }
        default:
            return cli_fail (err, err_len, "unknown option");
    }
}

bool
cli_job_inline_given (const cli_args_t *args)
{
    return args->target_text || args->backend || args->param_count
        || args->task_timeout_ms || args->retries >= 0 || args->strategy
        || args->priority_given || args->job_timeout_ms || args->limits
        || args->lease_ms || args->stall_timeout_ms;
}

static void
s_write_duration (pw_t *writer, int64_t ms)
{
    char text [32];
    duration_format (ms, text, sizeof text);
    pw_str (writer, text);
}

void
cli_job_write (const cli_args_t *args, pw_t *writer)
{
    size_t fields = 2 + (args->strategy ? 1 : 0)
                  + (args->job_timeout_ms ? 1 : 0)
                  + (args->priority_given ? 1 : 0)
                  + (args->batch.set ? 1 : 0)
                  + (args->max_failures.set ? 1 : 0)
                  + (args->canary ? 1 : 0)
                  + (args->limits ? 1 : 0)
                  + (args->lease_ms ? 1 : 0)
                  + (args->stall_timeout_ms ? 1 : 0)
                  + (args->idempotency_key ? 1 : 0)
                  + (args->notify_count ? 1 : 0);
    pw_map (writer, fields);
    pw_str (writer, "target");
    job_target_encode (&args->target, writer);

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
    if (args->limits) {
        size_t count = 0;
        char pattern [NAME_MAX_LEN * 2 + 2];
        int max = 0;
        for (const char *cursor = args->limits; cursor && *cursor; count++)
            cursor = s_limit_next (cursor, pattern, sizeof pattern, &max);
        pw_str (writer, "limits");
        pw_map (writer, count);
        for (const char *cursor = args->limits; cursor && *cursor;) {
            cursor = s_limit_next (cursor, pattern, sizeof pattern, &max);
            pw_str (writer, pattern);
            pw_int (writer, max);
        }
    }
    if (args->lease_ms) {
        pw_str (writer, "lease_ms");
        pw_int (writer, args->lease_ms);
    }
    if (args->stall_timeout_ms) {
        pw_str (writer, "stall_timeout");
        s_write_duration (writer, args->stall_timeout_ms);
    }
    if (args->idempotency_key) {
        pw_str (writer, "idempotency_key");
        pw_str (writer, args->idempotency_key);
    }
    if (args->notify_count) {
        pw_str (writer, "notify");
        pw_array (writer, args->notify_count);
        for (size_t index = 0; index < args->notify_count; index++)
            pw_str (writer, args->notify [index]);
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
    if (args->idempotency_key) {
        free (spec->idempotency_key);
        spec->idempotency_key = cli_strdup (args->idempotency_key);
    }
    //  --notify adds to the job file's webhooks, up to JOB_MAX_NOTIFY
    for (size_t index = 0; index < args->notify_count
                           && spec->notify_count < JOB_MAX_NOTIFY; index++) {
        job_notify_t *grown = (job_notify_t *) realloc (
            spec->notify, (spec->notify_count + 1) * sizeof (job_notify_t));
        if (!grown)
            break;
        spec->notify = grown;
        spec->notify [spec->notify_count].url = cli_strdup (args->notify [index]);
        spec->notify [spec->notify_count].on = JOB_NOTIFY_ALL;
        spec->notify_count++;
    }
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
            errors->items [errors->count++] = cli_strdup (why);
        return -1;
    }
    job_spec_t *spec = NULL;
    int rc = job_spec_decode (pv_doc_root (doc), &spec, errors);
    job_spec_destroy (&spec);
    pv_doc_destroy (&doc);
    return rc == 0 ? 0 : -1;
}

//  The job of job run or schedule add in the wire form: the job file's
//  spec, or the inline job once it passed s_job_check. NULL with ERRORS
//  filled when the inline job is invalid.
pw_t *
cli_job_bytes (const cli_args_t *args, const job_spec_t *file_spec,
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

void
cli_print_job_errors (FILE *err, const char *file, const job_errors_t *errors)
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
