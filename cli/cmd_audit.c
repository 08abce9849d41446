/*  =========================================================================
    cli - gridcli audit: the broker's audit trail
    =========================================================================
*/
#include "cmd.h"

#include <czmq.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../proto/proto.h"
#include "render.h"
#include "util.h"

#define S_LIMIT_MAX 1000         //  audit.list's limit at most

static int
s_render_audit_list (const pv_t *data, FILE *out)
{
    const pv_t *entries = pv_map_get (data, "entries");
    if (pv_type (entries) != PV_ARRAY)
        return -2;
    const char *headers [] = {
        "TIME", "WHO", "ROLE", "FACE", "REQUEST", "OBJECT", "OUTCOME"
    };
    cli_table_t *table = cli_table_new (7, false, headers);
    for (size_t index = 0; index < pv_size (entries); index++) {
        const pv_t *entry = pv_array_at (entries, index);
        char time [64], who [300], role [32], face [32], type [80];
        char object [300], outcome [96], shown [160];
        cli_field (entry, "outcome", outcome, sizeof outcome);
        int64_t suppressed = cli_field_int (entry, "suppressed", 0);
        if (suppressed > 0)
            snprintf (shown, sizeof shown, "%s (+%" PRId64 " not recorded)",
                      outcome, suppressed);
        else
            snprintf (shown, sizeof shown, "%s", outcome);
        const char *row [] = {
            cli_time (pv_map_get (entry, "time"), false, time, sizeof time),
            cli_field (entry, "who", who, sizeof who),
            cli_field (entry, "role", role, sizeof role),
            cli_field (entry, "face", face, sizeof face),
            cli_field (entry, "type", type, sizeof type),
            cli_field (entry, "object", object, sizeof object),
            shown
        };
        cli_table_add (table, false, row);
    }
    if (table->rows > 1)
        cli_table_print (table, out, false);
    size_t count = pv_size (entries);
    fprintf (out, "%zu entr%s, newest first\n", count,
             count == 1 ? "y" : "ies");
    char next [64];
    if (pv_map_get (data, "next"))
        fprintf (out, "older entries: gridcli audit list --before %s (and the "
                 "same filters)\n", cli_field (data, "next", next, sizeof next));
    cli_table_destroy (&table);
    return 0;
}

static const char s_help_audit [] =
"gridcli audit - the broker's audit trail: who changed what, and when\n"
"\n"
"Usage:\n"
"  gridcli audit list [--who NAME] [--type T] [--object ID] [--since T]\n"
"                     [--outcome O] [--before ID] [--limit N] [--json]\n"
"\n"
"Every request that changes something (job submit, cancel, retry and\n"
"delete; dlq retry and purge; key accept, reject and delete; token add and\n"
"revoke; node and broker drain and resume; schedule add, pause, resume,\n"
"delete and run) is recorded by the broker together with its effect: the\n"
"time, the face it came through (zmq, http, dashboard), who sent it (the\n"
"client key's or token's name) with their role, the request id, the\n"
"request type, what it acted on and how it ended (ok, or the error code).\n"
"Refused attempts (unauthorized, forbidden) of any request are recorded\n"
"too, at most one per caller per 10 seconds; the next one says how many\n"
"were left out. A configuration reload (SIGHUP) is recorded as\n"
"config.reload, face signal; a client key refused at the handshake as\n"
"client.connect, face zmq, who the key. Entries are kept for the broker's\n"
"audit_retention (90 days by default); no request edits or deletes them.\n"
"Admin role only.\n"
"\n"
"audit list        TIME WHO ROLE FACE REQUEST OBJECT OUTCOME, newest first\n"
"  --who NAME      only this caller (a key's or token's name)\n"
"  --type T        only this request type (job.cancel), or a prefix\n"
"                  ending in a dot (job.)\n"
"  --object ID     only about this job, node, key, token or schedule\n"
"  --since T       only entries since T: a duration back from now (1h,\n"
"                  7d) or a UTC time (2026-11-21 or 2026-11-21T07:00:00Z)\n"
"  --outcome O     ok, error (any error), refused (unauthorized or\n"
"                  forbidden) or an error code\n"
"  --before ID     only entries older than this entry id (the next page)\n"
"  --limit N       at most N entries, 1 to 1000 (default 50)\n"
"  --json          the answer as JSON (as --output json)\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli audit list --since 1d\n"
"  gridcli audit list --who alice --type job.\n"
"  gridcli audit list --outcome refused --json\n";

//  ---------------------------------------------------------------------
//  Options, checks and requests

enum {
    S_OPT_WHO = CLI_OPT_COMMAND, S_OPT_TYPE, S_OPT_OBJECT, S_OPT_SINCE,
    S_OPT_OUTCOME, S_OPT_BEFORE, S_OPT_LIMIT, S_OPT_JSON
};

static const struct option s_list_options [] = {
    {"who", required_argument, NULL, S_OPT_WHO},
    {"type", required_argument, NULL, S_OPT_TYPE},
    {"object", required_argument, NULL, S_OPT_OBJECT},
    {"since", required_argument, NULL, S_OPT_SINCE},
    {"outcome", required_argument, NULL, S_OPT_OUTCOME},
    {"before", required_argument, NULL, S_OPT_BEFORE},
    {"limit", required_argument, NULL, S_OPT_LIMIT},
    {"json", no_argument, NULL, S_OPT_JSON},
    {NULL, 0, NULL, 0}
};

//  TEXT as a UTC time (2026-11-21, 2026-11-21T07:00, 2026-11-21T07:00:51,
//  with an optional Z; a space for the T): 0 with the wall ms in *MS_P,
//  or -1.
static int
s_parse_time (const char *text, int64_t *ms_p)
{
    static const char *formats [] = {
        "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M", "%Y-%m-%d"
    };
    for (size_t index = 0; index < 5; index++) {
        struct tm tm;
        memset (&tm, 0, sizeof tm);
        const char *end = strptime (text, formats [index], &tm);
        if (!end || (*end && strcmp (end, "Z") != 0))
            continue;
        time_t seconds = timegm (&tm);
        if (seconds < 0)
            return -1;
        *ms_p = (int64_t) seconds * 1000;
        return 0;
    }
    return -1;
}

//  --since TEXT as wall ms: a duration back from now, or a UTC time.
//  Returns 0, or -1 with a sentence in ERR.
static int
s_since_ms (const char *text, int64_t *ms_p, char *err, size_t err_len)
{
    int64_t ago_ms = 0;
    char ignored [256];
    if (cli_opt_duration ("--since", text, &ago_ms, ignored,
                          sizeof ignored) == 0) {
        struct timespec now;
        clock_gettime (CLOCK_REALTIME, &now);
        int64_t now_ms = (int64_t) now.tv_sec * 1000 + now.tv_nsec / 1000000;
        *ms_p = now_ms > ago_ms ? now_ms - ago_ms : 0;
        return 0;
    }
    if (s_parse_time (text, ms_p) == 0)
        return 0;
    return cli_fail (err, err_len, "--since must be a duration back from now "
                     "(1h, 7d) or a UTC time (2026-11-21, "
                     "2026-11-21T07:00:00Z), not '%.64s'", text);
}

static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    int64_t ms = 0;
    switch (option) {
        case S_OPT_WHO:
            if (!*value || strlen (value) > 256)
                return cli_fail (err, err_len, "--who must be a name of 1 to "
                                 "256 bytes");
            args->audit_who = value;
            return 0;
        case S_OPT_TYPE:
            if (!strchr (value, '.') || strlen (value) > 64)
                return cli_fail (err, err_len, "--type must be a request "
                                 "type (job.cancel) or a prefix ending in a "
                                 "dot (job.), not '%.64s'", value);
            args->audit_type = value;
            return 0;
        case S_OPT_OBJECT:
            if (!*value || strlen (value) > 256)
                return cli_fail (err, err_len, "--object must be an id of 1 "
                                 "to 256 bytes");
            args->audit_object = value;
            return 0;
        case S_OPT_SINCE:
            if (s_since_ms (value, &ms, err, err_len) != 0)
                return -1;
            args->audit_since = value;
            return 0;
        case S_OPT_OUTCOME:
            if (!*value || strlen (value) > 64)
                return cli_fail (err, err_len, "--outcome must be ok, error, "
                                 "refused or an error code");
            args->audit_outcome = value;
            return 0;
        case S_OPT_BEFORE:
            if (strlen (value) != 24
                || strspn (value, "0123456789abcdefABCDEF") != 24)
                return cli_fail (err, err_len, "--before must be an entry id "
                                 "(24 hex digits, as the last list printed), "
                                 "not '%.64s'", value);
            args->audit_before = value;
            return 0;
        case S_OPT_LIMIT:
            if (cli_parse_int (value, 1, S_LIMIT_MAX, &args->limit))
                return cli_fail (err, err_len, "--limit must be a whole "
                                 "number from 1 to %d, not '%.64s'",
                                 S_LIMIT_MAX, value);
            return 0;
        case S_OPT_JSON:
            args->output = CLI_OUTPUT_JSON;
            args->output_given = true;
            return 0;
        default:
            return cli_fail (err, err_len, "unknown option");
    }
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    int64_t since_ms = 0;
    char err [256];
    if (args->audit_since
        && s_since_ms (args->audit_since, &since_ms, err, sizeof err) != 0)
        return -1;
    const char *texts [] = {"who", args->audit_who, "request_type",
                            args->audit_type,
                            "object", args->audit_object, "outcome",
                            args->audit_outcome, "before",
                            args->audit_before};
    size_t fields = (args->audit_since ? 1 : 0) + (args->limit ? 1 : 0);
    for (size_t index = 1; index < 10; index += 2)
        fields += texts [index] ? 1 : 0;
    proto_request_begin (writer, "audit.list", id, fields);
    for (size_t index = 0; index < 10; index += 2)
        if (texts [index + 1]) {
            pw_str (writer, texts [index]);
            pw_str (writer, texts [index + 1]);
        }
    if (args->audit_since) {
        pw_str (writer, "since");
        pw_int (writer, since_ms);
    }
    if (args->limit) {
        pw_str (writer, "limit");
        pw_int (writer, args->limit);
    }
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "list", .command = CLI_CMD_AUDIT_LIST, .options = s_list_options,
     .option = s_option, .build = s_build_list,
     .render = s_render_audit_list},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_audit = {"audit", s_help_audit, s_cmds};
