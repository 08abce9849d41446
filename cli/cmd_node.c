/*  =========================================================================
    cli - gridcli node: list, info, drain, resume, workers, history
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
#include "util.h"

static int
s_render_node_state (const pv_t *data, FILE *out)
{
    char id [128], status [64];
    if (pv_type (pv_map_get (data, "id")) != PV_STR)
        return -2;
    cli_field (data, "id", id, sizeof id);
    cli_field (data, "status", status, sizeof status);
    char *id_text = cli_printable (id, strlen (id), SIZE_MAX, false);
    char *status_text = cli_printable (status, strlen (status), SIZE_MAX,
                                       false);
    bool drained = false;
    pv_get_bool (pv_map_get (data, "drained"), &drained);
    fprintf (out, "node %s %s%s\n", id_text, status_text,
             drained ? " (takes no new jobs; gridcli node resume ends it)"
                     : "");
    free (id_text);
    free (status_text);
    return 0;
}

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
        "ID", "HOSTNAME", "STATUS", "GROUPS", "LABELS", "LAST-SEEN", "RUNNING",
        "VERSION"
    };
    cli_table_t *table = cli_table_new (8, false, headers);
    for (size_t index = 0; index < pv_size (nodes); index++) {
        const pv_t *node = pv_array_at (nodes, index);
        char id [128], hostname [256], status [64], seen [64], running [64];
        char version [64];
        char number [32];
        char *groups = cli_join (pv_map_get (node, "groups"));
        char *labels = cli_join (pv_map_get (node, "labels"));
        snprintf (running, sizeof running, "%s/",
                  cli_field (node, "running", number, sizeof number));
        cli_field (node, "concurrency", number, sizeof number);
        strncat (running, number, sizeof running - strlen (running) - 1);
        const char *row [] = {
            cli_field (node, "id", id, sizeof id),
            cli_field (node, "hostname", hostname, sizeof hostname),
            cli_field (node, "status", status, sizeof status),
            groups, labels,
            cli_time (pv_map_get (node, "last_seen"), false, seen, sizeof seen),
            running,
            cli_field (node, "version", version, sizeof version)
        };
        cli_table_add (table, false, row);
        free (groups);
        free (labels);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    return 0;
}

static int
s_render_node_info (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "id")) != PV_STR)
        return -2;
    char buf [512];
    cli_print_field (out, "id", cli_field (data, "id", buf, sizeof buf));
    cli_print_field (out, "hostname",
                     cli_field (data, "hostname", buf, sizeof buf));
    cli_print_field (out, "status",
                     cli_field (data, "status", buf, sizeof buf));
    char *joined = cli_join (pv_map_get (data, "groups"));
    cli_print_field (out, "groups", joined);
    free (joined);
    joined = cli_join (pv_map_get (data, "labels"));
    cli_print_field (out, "labels", joined);
    free (joined);
    cli_print_field (out, "version",
                     cli_field (data, "version", buf, sizeof buf));
    cli_print_field (out, "concurrency",
                     cli_field (data, "concurrency", buf, sizeof buf));
    cli_print_field (out, "running",
                     cli_field (data, "running", buf, sizeof buf));
    cli_print_field (out, "registered", cli_time (pv_map_get (data,
                       "registered_at"), false, buf, sizeof buf));
    cli_print_field (out, "last seen", cli_time (pv_map_get (data, "last_seen"),
                       false, buf, sizeof buf));
    //  What it reports about its host (a broker before facts has none)
    const pv_t *facts = pv_map_get (data, "facts");
    if (pv_type (facts) == PV_MAP && pv_size (facts) > 0) {
        char *joined_facts = cli_join (facts);
        cli_print_field (out, "facts", joined_facts);
        free (joined_facts);
    }
    //  A node that came through a gridrelay
    if (pv_map_get (data, "relay"))
        cli_print_field (out, "relay",
                         cli_field (data, "relay", buf, sizeof buf));
    const pv_t *duplicate = pv_map_get (data, "duplicate");
    if (duplicate) {
        //  Second agents refused this node (duplicate_node)
        char count [32], when [64], host [256];
        cli_field (duplicate, "count", count, sizeof count);
        cli_time (pv_map_get (duplicate, "last_at"), false, when, sizeof when);
        cli_field (duplicate, "hostname", host, sizeof host);
        snprintf (buf, sizeof buf, "%s refused, last %s from %s", count,
                  when, host);
        cli_print_field (out, "duplicates", buf);
    }

    const pv_t *backends = pv_map_get (data, "backends");
    const char *headers [] = {
        "BACKEND", "VERSION", "ACTION", "KIND", "PARAMS"
    };
    cli_table_t *table = cli_table_new (5, false, headers);
    for (size_t index = 0; index < pv_size (backends); index++) {
        const pv_t *backend = pv_array_at (backends, index);
        const pv_t *actions = pv_map_get (backend, "actions");
        char backend_name [128], version [128] = "-";
        cli_field (backend, "name", backend_name, sizeof backend_name);
        if (pv_map_get (backend, "version"))
            cli_field (backend, "version", version, sizeof version);
        for (size_t a = 0; a < pv_size (actions); a++) {
            const pv_t *action = pv_array_at (actions, a);
            const pv_t *params = pv_map_get (action, "params");
            char action_name [128], kind [32];
            //  name* marks a required param
            char *list = cli_strdup ("");
            for (size_t p = 0; p < pv_size (params); p++) {
                const pv_t *param = pv_array_at (params, p);
                bool required = false;
                char name [128];
                pv_get_bool (pv_map_get (param, "required"), &required);
                cli_field (param, "name", name, sizeof name);
                size_t used = strlen (list);
                list = cli_realloc (list, used + strlen (name) + 3);
                snprintf (list + used, strlen (name) + 3, "%s%s%s",
                          p ? "," : "", name, required ? "*" : "");
            }
            const char *row [] = {
                backend_name, version,
                cli_field (action, "name", action_name, sizeof action_name),
                cli_field (action, "kind", kind, sizeof kind),
                *list ? list : "-"
            };
            cli_table_add (table, false, row);
            free (list);
        }
    }
    fputc ('\n', out);
    if (table->rows > 1) {
        cli_table_print (table, out, false);
        fprintf (out, "(* = required param)\n");
    }
    else
        fprintf (out, "no backends\n");
    cli_table_destroy (&table);
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
    cli_print_field (out, "node", cli_field (data, "node", buf, sizeof buf));
    cli_print_field (out, "status",
                     cli_field (data, "status", buf, sizeof buf));
    snprintf (buf, sizeof buf, "%" PRId64 " running, %" PRId64
              " queued (heartbeat), %" PRId64 " slots",
              cli_field_int (data, "running", 0),
              cli_field_int (data, "queued", 0),
              cli_field_int (data, "concurrency", 0));
    cli_print_field (out, "load", buf);
    char *text = cli_counters (pv_map_get (data, "counters"));
    cli_print_field (out, "counters", *text ? text : "-");
    free (text);
    const char *headers [] = {
        "JOB", "STEP", "ATTEMPT", "ACTION", "STATUS", "SINCE", "PROGRESS"
    };
    cli_table_t *table = cli_table_new (7, false, headers);
    for (size_t index = 0; index < pv_size (slots); index++) {
        const pv_t *slot = pv_array_at (slots, index);
        char cols [7][160];
        cli_field (slot, "job", cols [0], sizeof cols [0]);
        cli_field (slot, "step", cols [1], sizeof cols [1]);
        cli_field (slot, "attempt", cols [2], sizeof cols [2]);
        cli_field (slot, "action", cols [3], sizeof cols [3]);
        cli_field (slot, "status", cols [4], sizeof cols [4]);
        cli_time (pv_map_get (slot, "since"), false, cols [5], sizeof cols [5]);
        //  "42% downloading nginx"
        char percent [16] = "", message [128] = "";
        if (pv_map_get (slot, "percent"))
            snprintf (percent, sizeof percent, "%" PRId64 "%%",
                      cli_field_int (slot, "percent", 0));
        if (pv_map_get (slot, "message"))
            cli_field (slot, "message", message, sizeof message);
        else
        if (pv_map_get (slot, "kind"))
            cli_field (slot, "kind", message, sizeof message);
        snprintf (cols [6], sizeof cols [6], "%s%s%s", percent,
                  *percent && *message ? " " : "", message);
        char *shown = cli_printable (cols [6], strlen (cols [6]), 48, false);
        snprintf (cols [6], sizeof cols [6], "%s", *shown ? shown : "-");
        free (shown);
        const char *row [] = {cols [0], cols [1], cols [2], cols [3],
                              cols [4], cols [5], cols [6]};
        cli_table_add (table, false, row);
    }
    fputc ('\n', out);
    if (table->rows > 1)
        cli_table_print (table, out, false);
    else
        fprintf (out, "nothing under way\n");
    cli_table_destroy (&table);
    return 0;
}

static int
s_render_node_history (const pv_t *data, FILE *out)
{
    const pv_t *history = pv_map_get (data, "history");
    if (pv_type (history) != PV_ARRAY)
        return -2;
    const char *headers [] = {"SEQ", "TIME", "EVENT", "AGENT", "CHANGES"};
    cli_table_t *table = cli_table_new (5, false, headers);
    for (size_t index = 0; index < pv_size (history); index++) {
        const pv_t *entry = pv_array_at (history, index);
        char seq [32], time [64], event [32], version [64], previous [64];
        char agent [160];
        cli_field (entry, "seq", seq, sizeof seq);
        cli_time (pv_map_get (entry, "time"), false, time, sizeof time);
        cli_field (entry, "event", event, sizeof event);
        cli_field (entry, "agent_version", version, sizeof version);
        if (pv_map_get (entry, "previous_agent_version")) {
            cli_field (entry, "previous_agent_version", previous,
                       sizeof previous);
            snprintf (agent, sizeof agent, "%s (was %s)", version, previous);
        }
        else
            snprintf (agent, sizeof agent, "%s", version);
        //  "+a.b -c.d apt 1.0->1.1", or the action count of a first one
        char *changes = cli_strdup ("");
        const char *lists [] = {"added", "removed"};
        for (int list = 0; list < 2; list++) {
            const pv_t *names = pv_map_get (entry, lists [list]);
            for (size_t at = 0; at < pv_size (names); at++) {
                char name [160];
                cli_scalar (pv_array_at (names, at), name, sizeof name);
                size_t used = strlen (changes);
                changes = cli_realloc (changes, used + strlen (name) + 3);
                snprintf (changes + used, strlen (name) + 3, "%s%c%s",
                          used ? " " : "", list ? '-' : '+', name);
            }
        }
        const pv_t *versions = pv_map_get (entry, "versions");
        for (size_t at = 0; at < pv_size (versions); at++) {
            const pv_t *item = pv_array_at (versions, at);
            char backend [80], from [64] = "-", to [64] = "-", part [240];
            cli_field (item, "backend", backend, sizeof backend);
            if (pv_type (pv_map_get (item, "from")) == PV_STR)
                cli_field (item, "from", from, sizeof from);
            if (pv_type (pv_map_get (item, "to")) == PV_STR)
                cli_field (item, "to", to, sizeof to);
            snprintf (part, sizeof part, "%s%s %s->%s", *changes ? " " : "",
                      backend, from, to);
            size_t used = strlen (changes);
            changes = cli_realloc (changes, used + strlen (part) + 1);
            memcpy (changes + used, part, strlen (part) + 1);
        }
        if (!*changes && pv_map_get (entry, "hostname")) {
            //  A second agent refused this node (duplicate_node)
            char host [256];
            cli_field (entry, "hostname", host, sizeof host);
            free (changes);
            changes = zsys_sprintf ("a second agent from %s", host);
        }
        if (!*changes) {
            free (changes);
            changes = zsys_sprintf ("%" PRId64 " actions",
                                    cli_field_int (entry, "actions", 0));
        }
        const char *row [] = {seq, time, event, agent, changes};
        cli_table_add (table, false, row);
        free (changes);
    }
    if (table->rows > 1)
        cli_table_print (table, out, false);
    else
        fprintf (out, "no registrations recorded\n");
    cli_table_destroy (&table);
    return 0;
}

static const char s_help_node [] =
"gridcli node - registered nodes\n"
"\n"
"Usage:\n"
"  gridcli node list [--where TARGET]\n"
"  gridcli node info ID\n"
"  gridcli node drain ID\n"
"  gridcli node resume ID\n"
"  gridcli node workers ID\n"
"  gridcli node history ID [--limit N]\n"
"\n"
"node list    ID HOSTNAME STATUS GROUPS LABELS LAST-SEEN RUNNING VERSION,\n"
"             sorted by id (RUNNING is tasks running / concurrency; VERSION\n"
"             the gridagent release, to follow an upgrade); --where TARGET\n"
"             lists only the nodes a target selects, online or not\n"
"             (fact:os=debian, group:web and fact:mem_mb>=4096)\n"
"node info    the node's fields (its facts among them), then BACKEND VERSION ACTION KIND PARAMS\n"
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
"  gridcli node list --where 'fact:os=debian and fact:arch=arm64'\n"
"  gridcli --output json node info web-01\n";

//  ---------------------------------------------------------------------
//  Options, checks and requests

enum { S_OPT_LIMIT = CLI_OPT_COMMAND, S_OPT_WHERE };

static const struct option s_history_options [] = {
    {"limit", required_argument, NULL, S_OPT_LIMIT},
    {NULL, 0, NULL, 0}
};

static const struct option s_list_options [] = {
    {"where", required_argument, NULL, S_OPT_WHERE},
    {NULL, 0, NULL, 0}
};

static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    if (option == S_OPT_WHERE) {
        //  Checked here, so a typo is named before anything is sent
        target_t target;
        char why [512];
        if (target_parse (value, &target, why, sizeof why) != 0) {
            snprintf (err, err_len, "--where: %s", why);
            return -1;
        }
        target_clear (&target);
        args->where = value;
        return 0;
    }
    return cli_opt_limit (args, value, err, err_len);
}

static int
s_check (cli_args_t *args, char *err, size_t err_len)
{
    return cli_check_name_id (args, "a node id", "a node id", err, err_len);
}

//  node.TYPE with the node's id, and ?limit
static void
s_build_node (const cli_args_t *args, const char *type, const char *id,
              pw_t *writer)
{
    proto_request_begin (writer, type, id, args->limit ? 2 : 1);
    pw_str (writer, "node");
    pw_str (writer, args->id);
    if (args->limit) {
        pw_str (writer, "limit");
        pw_int (writer, args->limit);
    }
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    //  where only when asked: a broker before it refuses the key
    proto_request_begin (writer, "node.list", id, args->where ? 1 : 0);
    if (args->where) {
        pw_str (writer, "where");
        pw_str (writer, args->where);
    }
    return 0;
}

static int
s_build_info (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_node (args, "node.get", id, writer);
    return 0;
}

static int
s_build_drain (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_node (args, "node.drain", id, writer);
    return 0;
}

static int
s_build_resume (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_node (args, "node.resume", id, writer);
    return 0;
}

static int
s_build_workers (const cli_args_t *args, const job_spec_t *file_spec,
                 const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_node (args, "node.workers", id, writer);
    return 0;
}

static int
s_build_history (const cli_args_t *args, const job_spec_t *file_spec,
                 const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_node (args, "node.history", id, writer);
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "list", .command = CLI_CMD_NODE_LIST, .options = s_list_options,
     .option = s_option, .build = s_build_list,
     .render = s_render_node_list},
    {.name = "info", .command = CLI_CMD_NODE_INFO, .args = CLI_ARG_ID,
     .check = s_check, .build = s_build_info, .render = s_render_node_info},
    {.name = "drain", .command = CLI_CMD_NODE_DRAIN, .args = CLI_ARG_ID,
     .check = s_check, .build = s_build_drain,
     .render = s_render_node_state},
    {.name = "resume", .command = CLI_CMD_NODE_RESUME, .args = CLI_ARG_ID,
     .check = s_check, .build = s_build_resume,
     .render = s_render_node_state},
    {.name = "workers", .command = CLI_CMD_NODE_WORKERS, .args = CLI_ARG_ID,
     .check = s_check, .build = s_build_workers,
     .render = s_render_node_workers},
    {.name = "history", .command = CLI_CMD_NODE_HISTORY, .args = CLI_ARG_ID,
     .options = s_history_options, .option = s_option, .check = s_check,
     .build = s_build_history, .render = s_render_node_history},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_node = {"node", s_help_node, s_cmds};
