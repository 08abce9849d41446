/*  =========================================================================
    cli - gridcli status, queue stats, broker drain and resume
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

static int
s_render_broker_state (const pv_t *data, FILE *out)
{
    char state [64];
    if (pv_type (pv_map_get (data, "state")) != PV_STR)
        return -2;
    cli_field (data, "state", state, sizeof state);
    int64_t running = 0, pending = 0;
    pv_get_int (pv_map_get (data, "running"), &running);
    pv_get_int (pv_map_get (data, "pending"), &pending);
    char *state_text = cli_printable (state, strlen (state), SIZE_MAX, false);
    fprintf (out, "broker %s: %" PRId64 " job%s running, %" PRId64
             " queued%s\n", state_text, running, running == 1 ? "" : "s",
             pending, streq (state, "serving") ? ""
                      : " (no new jobs are admitted; gridcli broker resume "
                        "ends it)");
    free (state_text);
    return 0;
}

//  status.store: "ok, 1.2 MiB of 8.0 GiB (0%), disk 40.1 GiB free", and
//  while commits fail, since when and why.
static void
s_render_store (const pv_t *store, FILE *out)
{
    if (pv_type (store) != PV_MAP)
        return;
    char state [64], used [32], max [32], free_text [32], line [512];
    cli_field (store, "state", state, sizeof state);
    snprintf (line, sizeof line, "%s, %s of %s (%" PRId64 "%%), disk %s free",
              state,
              cli_human_bytes (cli_field_int (store, "used_bytes", 0), used,
                               sizeof used),
              cli_human_bytes (cli_field_int (store, "max_bytes", 0), max,
                               sizeof max),
              cli_field_int (store, "used_percent", 0),
              cli_human_bytes (cli_field_int (store, "disk_free_bytes", 0),
                               free_text, sizeof free_text));
    cli_print_field (out, "store", line);
    int64_t failed = cli_field_int (store, "failed_commits", 0);
    int64_t refused = cli_field_int (store, "refused", 0);
    if (failed || refused) {
        snprintf (line, sizeof line, "%" PRId64 " failed commit%s, %" PRId64
                  " request%s refused", failed, failed == 1 ? "" : "s",
                  refused, refused == 1 ? "" : "s");
        cli_print_field (out, "store counts", line);
    }
    if (pv_map_get (store, "error")) {
        char error [300];
        cli_print_field (out, "store error",
                         cli_field (store, "error", error, sizeof error));
    }
}

//  A relay's own status (gridrelay --client): its upstream, its agents
//  and topics, its counters.
static void
s_render_relay_status (const pv_t *data, FILE *out)
{
    const pv_t *upstream = pv_map_get (data, "upstream");
    char buf [256], endpoint [200], since [32];
    bool connected = false;
    pv_get_bool (pv_map_get (upstream, "connected"), &connected);
    cli_human_ms (cli_field_int (upstream, "since_ms", 0), since,
                  sizeof since);
    snprintf (buf, sizeof buf, "%s, %s for %s",
              cli_field (upstream, "endpoint", endpoint, sizeof endpoint),
              connected ? "connected" : "not connected", since);
    cli_print_field (out, "upstream", buf);
    bool serving = false;
    pv_get_bool (pv_map_get (data, "serving"), &serving);
    cli_print_field (out, "serving", serving ? "yes" : "no (upstream lost)");
    snprintf (buf, sizeof buf, "%" PRId64, cli_field_int (data, "agents", 0));
    cli_print_field (out, "agents", buf);
    snprintf (buf, sizeof buf, "%" PRId64, cli_field_int (data, "topics", 0));
    cli_print_field (out, "topics", buf);
    char *text = cli_counters (pv_map_get (data, "counters"));
    cli_print_field (out, "counters", *text ? text : "-");
    free (text);
}

static int
s_render_status (const pv_t *data, FILE *out)
{
    char buf [256];
    bool relay = pv_type (pv_map_get (data, "upstream")) == PV_MAP;
    if (relay)
        cli_print_field (out, "relay",
                         cli_field (data, "name", buf, sizeof buf));
    cli_print_field (out, "version",
                     cli_field (data, "version", buf, sizeof buf));
    if (pv_map_get (data, "state"))
        cli_print_field (out, "state",
                         cli_field (data, "state", buf, sizeof buf));
    int64_t uptime_ms = cli_field_int (data, "uptime_ms", -1);
    cli_print_field (out, "uptime", cli_human_ms (uptime_ms, buf, sizeof buf));
    const char *groups [] = { "nodes", "jobs", "queue", "dropped" };
    for (size_t index = 0; index < 4; index++) {
        if (!pv_map_get (data, groups [index]))
            continue;           //  An older broker
        char *text = cli_counters (pv_map_get (data, groups [index]));
        cli_print_field (out, groups [index], *text ? text : "-");
        free (text);
    }
    s_render_store (pv_map_get (data, "store"), out);
    const pv_t *rotation = pv_map_get (data, "broker_key");
    if (pv_type (rotation) == PV_MAP) {
        char next [64], when [64], line [256];
        const pv_t *deadline = pv_map_get (rotation, "deadline");
        snprintf (line, sizeof line, "rotating to %.8s...: %" PRId64 " of %"
                  PRId64 " nodes have the next key; the old one is retired "
                  "at the latest %s", cli_field (rotation, "next", next,
                                                 sizeof next),
                  cli_field_int (rotation, "acknowledged", 0),
                  cli_field_int (rotation, "nodes", 0),
                  deadline ? cli_time (deadline, false, when, sizeof when)
                           : "-");
        cli_print_field (out, "broker key", line);
    }
    if (relay)
        s_render_relay_status (data, out);
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
        cli_scalar (pv_map_key_at (windows, index), key, sizeof key);
        const pv_t *window = pv_map_value_at (windows, index);
        int64_t count = cli_field_int (window, "count", 0);
        cli_human_ms (cli_field_int (window, "p50", 0), p50, sizeof p50);
        cli_human_ms (cli_field_int (window, "p99", 0), p99, sizeof p99);
        used += (size_t) snprintf (line + used, sizeof line - used,
                                   "%slast %s: p50 %s, p99 %s (%" PRId64
                                   " samples)", index ? "; " : "", key,
                                   count ? p50 : "-", count ? p99 : "-",
                                   count);
        if (used >= sizeof line)
            break;
    }
    cli_print_field (out, label, *line ? line : "-");
}

static int
s_render_queue_stats (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "jobs")) != PV_MAP)
        return -2;
    char *text = cli_counters (pv_map_get (data, "jobs"));
    cli_print_field (out, "jobs", text);
    free (text);
    text = cli_counters (pv_map_get (data, "cells"));
    cli_print_field (out, "cells", text);
    free (text);
    const pv_t *oldest = pv_map_get (data, "oldest_pending");
    char buf [128], age [32];
    if (pv_type (oldest) == PV_MAP) {
        cli_human_ms (cli_field_int (oldest, "age_ms", 0), age, sizeof age);
        char job [64];
        snprintf (buf, sizeof buf, "%s (%s)",
                  cli_field (oldest, "job", job, sizeof job), age);
        cli_print_field (out, "oldest", buf);
    }
    else
        cli_print_field (out, "oldest", "no pending job");
    s_print_window (out, "wait", pv_map_get (data, "wait_ms"));
    s_print_window (out, "run", pv_map_get (data, "run_ms"));
    //  Figures other parts of the broker add (claims, limits...) as they
    //  come: every other scalar or flat map
    for (size_t index = 0; index < pv_size (data); index++) {
        char key [64];
        cli_scalar (pv_map_key_at (data, index), key, sizeof key);
        const pv_t *value = pv_map_value_at (data, index);
        if (streq (key, "jobs") || streq (key, "cells")
        ||  streq (key, "oldest_pending") || streq (key, "wait_ms")
        ||  streq (key, "run_ms") || pv_type (value) == PV_ARRAY)
            continue;
        if (pv_type (value) == PV_MAP) {
            text = cli_counters (value);
            cli_print_field (out, key, *text ? text : "-");
            free (text);
        }
        else
            cli_print_field (out, key, cli_scalar (value, buf, sizeof buf));
    }
    const char *headers [] = {
        "PRIORITY", "JOBS-PENDING", "JOBS-RUNNING", "JOBS-FINISHED",
        "CELLS-PENDING", "CELLS-RUNNING", "CELLS-FINISHED"
    };
    cli_table_t *table = cli_table_new (7, false, headers);
    const pv_t *by_priority = pv_map_get (data, "by_priority");
    for (size_t index = 0; index < pv_size (by_priority); index++) {
        const pv_t *row_data = pv_array_at (by_priority, index);
        const pv_t *jobs = pv_map_get (row_data, "jobs");
        const pv_t *cells = pv_map_get (row_data, "cells");
        char cols [7][32];
        cli_field (row_data, "priority", cols [0], sizeof cols [0]);
        cli_field (jobs, "pending", cols [1], sizeof cols [1]);
        cli_field (jobs, "running", cols [2], sizeof cols [2]);
        cli_field (jobs, "finished", cols [3], sizeof cols [3]);
        cli_field (cells, "pending", cols [4], sizeof cols [4]);
        cli_field (cells, "running", cols [5], sizeof cols [5]);
        cli_field (cells, "finished", cols [6], sizeof cols [6]);
        const char *row [] = {cols [0], cols [1], cols [2], cols [3],
                              cols [4], cols [5], cols [6]};
        cli_table_add (table, false, row);
    }
    if (table->rows > 1) {
        fputc ('\n', out);
        cli_table_print (table, out, false);
    }
    cli_table_destroy (&table);
    //  A per-node limit's RUNNING is its busiest node's count, which is
    //  what MAX bounds; TOTAL is the sum over the fleet
    const char *limit_headers [] = {"LIMIT", "SCOPE", "RUNNING", "MAX",
                                    "TOTAL"};
    table = cli_table_new (5, false, limit_headers);
    const pv_t *limits = pv_map_get (data, "limits");
    for (size_t index = 0; index < pv_size (limits); index++) {
        const pv_t *row_data = pv_array_at (limits, index);
        bool per_node = false;
        pv_get_bool (pv_map_get (row_data, "per_node"), &per_node);
        char cols [4][160], node [128];
        cli_field (row_data, "pattern", cols [0], sizeof cols [0]);
        cli_field (row_data, "max", cols [2], sizeof cols [2]);
        cli_field (row_data, "running", cols [3], sizeof cols [3]);
        if (per_node && pv_map_get (row_data, "busiest_node"))
            snprintf (cols [1], sizeof cols [1], "%" PRId64 " on %s",
                      cli_field_int (row_data, "busiest", 0),
                      cli_field (row_data, "busiest_node", node,
                                 sizeof node));
        else
            cli_field (row_data, per_node ? "busiest" : "running", cols [1],
                       sizeof cols [1]);
        const char *row [] = {cols [0], per_node ? "per node" : "fleet",
                              cols [1], cols [2], cols [3]};
        cli_table_add (table, false, row);
    }
    if (table->rows > 1) {
        fputc ('\n', out);
        cli_table_print (table, out, false);
    }
    cli_table_destroy (&table);
    const char *action_headers [] = {
        "ACTION", "CELLS-PENDING", "CELLS-RUNNING", "CELLS-FINISHED"
    };
    table = cli_table_new (4, false, action_headers);
    const pv_t *by_action = pv_map_get (data, "by_action");
    for (size_t index = 0; index < pv_size (by_action); index++) {
        const pv_t *row_data = pv_array_at (by_action, index);
        const pv_t *cells = pv_map_get (row_data, "cells");
        char cols [4][160];
        cli_field (row_data, "action", cols [0], sizeof cols [0]);
        cli_field (cells, "pending", cols [1], sizeof cols [1]);
        cli_field (cells, "running", cols [2], sizeof cols [2]);
        cli_field (cells, "finished", cols [3], sizeof cols [3]);
        const char *row [] = {cols [0], cols [1], cols [2], cols [3]};
        cli_table_add (table, false, row);
    }
    if (table->rows > 1) {
        fputc ('\n', out);
        cli_table_print (table, out, false);
    }
    cli_table_destroy (&table);
    return 0;
}

static const char s_help_broker [] =
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

static const char s_help_status [] =
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
"answers. At a relay's status endpoint (gridrelay --client, with\n"
"--broker-key its key) it prints the relay's name, upstream, agents,\n"
"topics and counters instead.\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli status\n"
"  gridcli --broker tcp://grid-ctl:7701 --output json status\n"
"  gridcli --broker tcp://relay-a:7714 --broker-key relay-a.key status\n";

static const char s_help_queue [] =
"gridcli queue - the broker's work queue at a glance\n"
"\n"
"Usage: gridcli queue stats\n"
"\n"
"Prints jobs (pending and running now, finished since the broker started,\n"
"by status), the cells of the live jobs (pending, running, finished), the\n"
"oldest pending job, wait times (submit to a job's first step starting,\n"
"per node) and run times (per attempt) at p50 and p99 over the last 5\n"
"minutes and the last hour, the dead-letter queue's size, the any-node\n"
"figures (any-node steps waiting for a free node, claims, reclaims, lease\n"
"expirations, late results), the cells waiting for a concurrency limit\n"
"(limit_waiting), then tables by priority, of the concurrency limits in\n"
"use (LIMIT SCOPE RUNNING MAX TOTAL: a per-node limit's RUNNING is its\n"
"busiest node's count, TOTAL the sum over all nodes) and by\n"
"backend.action. --output json gives every figure.\n"
"\n"
"Global options and exit codes: gridcli --help.\n";

//  ---------------------------------------------------------------------
//  Requests: none of them has fields

static int
s_build_status (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "status", id, 0);
    return 0;
}

static int
s_build_queue_stats (const cli_args_t *args, const job_spec_t *file_spec,
                     const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "queue.stats", id, 0);
    return 0;
}

static int
s_build_drain (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "broker.drain", id, 0);
    return 0;
}

static int
s_build_resume (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "broker.resume", id, 0);
    return 0;
}

static const cli_cmd_t s_status_cmds [] = {
    {.command = CLI_CMD_STATUS, .build = s_build_status,
     .render = s_render_status},
    {.command = CLI_CMD_NONE}
};
static const cli_cmd_t s_queue_cmds [] = {
    {.name = "stats", .command = CLI_CMD_QUEUE_STATS,
     .build = s_build_queue_stats, .render = s_render_queue_stats},
    {.command = CLI_CMD_NONE}
};
static const cli_cmd_t s_broker_cmds [] = {
    {.name = "drain", .command = CLI_CMD_BROKER_DRAIN,
     .build = s_build_drain, .render = s_render_broker_state},
    {.name = "resume", .command = CLI_CMD_BROKER_RESUME,
     .build = s_build_resume, .render = s_render_broker_state},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_status = {"status", s_help_status,
                                      s_status_cmds};
const cli_topic_t cli_topic_queue = {"queue", s_help_queue, s_queue_cmds};
const cli_topic_t cli_topic_broker = {"broker", s_help_broker,
                                      s_broker_cmds};
