/*  =========================================================================
    cli - gridcli cluster: a broker cluster's members and its switchover
    =========================================================================
*/
#include "cmd.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/names.h"
#include "../proto/proto.h"
#include "render.h"
#include "util.h"

static const char s_help_cluster [] =
"gridcli cluster - a broker cluster (ha: in gridbroker's config)\n"
"\n"
"Usage: gridcli cluster status\n"
"       gridcli cluster switchover [--to NAME]\n"
"\n"
"A cluster is two or more gridbrokers on etcd: one active, the others\n"
"standbys that hold a copy of its store; a standby answers every\n"
"request not_leader, naming the active, and gridcli follows it there\n"
"(give --broker A,B to reach whichever is up). See docs/HA.md.\n"
"\n"
"cluster status      the active's view: cluster, this member, epoch, the\n"
"                    last pass it wrote and what the standbys let it\n"
"                    release, then each standby: STATE (snapshot, replay,\n"
"                    live), SYNC (in the sync set: it holds everything\n"
"                    acknowledged, and may take over), PASS and LAG\n"
"                    (passes, and ms its oldest unacknowledged pass has\n"
"                    waited). A broker alone says so (viewer role).\n"
"cluster switchover  hand the lead to a standby in sync, with nothing lost\n"
"                    and no lease to wait out: the active sends what it\n"
"                    answered, leaves the leader key and becomes a standby\n"
"                    (admin role). --to NAME checks that NAME is the one\n"
"                    that takes over; refused (conflict) when no standby is\n"
"                    in sync.\n"
"\n"
"Global options and exit codes: gridcli --help.\n"
"\n"
"Examples:\n"
"  gridcli --broker tcp://ctl-a:7701,tcp://ctl-b:7701 cluster status\n"
"  gridcli cluster switchover --to broker-b\n";

enum { S_OPT_TO = CLI_OPT_COMMAND };

static const struct option s_switchover_options [] = {
    {"to", required_argument, NULL, S_OPT_TO},
    {NULL, 0, NULL, 0}
};

static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    if (option == S_OPT_TO) {
        if (!name_valid (value))
            return cli_fail (err, err_len, "--to must be a member's name, "
                             "not '%.64s'", value);
        args->cluster_to = value;
        return 0;
    }
    return cli_fail (err, err_len, "unknown option");
}

static int
s_build_status (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "cluster.status", id, 0);
    return 0;
}

static int
s_build_switchover (const cli_args_t *args, const job_spec_t *file_spec,
                    const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "cluster.switchover", id,
                         args->cluster_to ? 1 : 0);
    if (args->cluster_to) {
        pw_str (writer, "to");
        pw_str (writer, args->cluster_to);
    }
    return 0;
}

static int
s_render_status (const pv_t *data, FILE *out)
{
    char role [32], text [160];
    cli_field (data, "role", role, sizeof role);
    if (strcmp (role, "active") != 0) {
        fprintf (out, "this broker runs alone (no ha: in its config)\n");
        return 0;
    }
    fprintf (out, "cluster   %s\n", cli_field (data, "cluster", text,
                                                sizeof text));
    fprintf (out, "active    %s (epoch %" PRId64 ", lease valid %" PRId64
             " ms more)\n", cli_field (data, "name", text, sizeof text),
             cli_field_int (data, "epoch", 0),
             cli_field_int (data, "lease_left_ms", 0));
    fprintf (out, "pass      %" PRId64 " written, %" PRId64 " released\n",
             cli_field_int (data, "pass", 0),
             cli_field_int (data, "released", 0));
    bool strict = false;
    pv_get_bool (pv_map_get (data, "strict"), &strict);
    fprintf (out, "mode      %s, sync timeout %" PRId64 " ms\n",
             strict ? "strict (with no standby in sync, nothing is "
                      "acknowledged)"
                    : "not strict (with no standby in sync, the active "
                      "acknowledges alone)",
             cli_field_int (data, "sync_timeout_ms", 0));
    const pv_t *standbys = pv_map_get (data, "standbys");
    if (pv_type (standbys) != PV_ARRAY)
        return -2;
    if (pv_size (standbys) == 0) {
        fprintf (out, "\nno standby is connected: a failover now would lose "
                 "what this broker acknowledged\n");
        return 0;
    }
    fprintf (out, "\n");
    const char *headers [] = {"STANDBY", "STATE", "SYNC", "PASS", "LAG",
                              "LAG-MS"};
    cli_table_t *table = cli_table_new (6, true, headers);
    for (size_t index = 0; index < pv_size (standbys); index++) {
        const pv_t *standby = pv_array_at (standbys, index);
        char name [80], state [32], pass [32], lag [32], lag_ms [32];
        bool sync = false;
        pv_get_bool (pv_map_get (standby, "sync"), &sync);
        const char *row [] = {
            cli_field (standby, "name", name, sizeof name),
            cli_field (standby, "state", state, sizeof state),
            sync ? "yes" : "no",
            cli_field (standby, "pass", pass, sizeof pass),
            cli_field (standby, "lag_passes", lag, sizeof lag),
            cli_field (standby, "lag_ms", lag_ms, sizeof lag_ms)
        };
        cli_table_add (table, !sync, row);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    return 0;
}

static int
s_render_switchover (const pv_t *data, FILE *out)
{
    fprintf (out, "switchover: the active hands the lead over; a standby in "
             "sync takes it within a few seconds (gridcli cluster status)\n");
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "status", .command = CLI_CMD_CLUSTER_STATUS,
     .build = s_build_status, .render = s_render_status},
    {.name = "switchover", .command = CLI_CMD_CLUSTER_SWITCHOVER,
     .options = s_switchover_options, .option = s_option,
     .build = s_build_switchover, .render = s_render_switchover},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_cluster = {"cluster", s_help_cluster, s_cmds};
