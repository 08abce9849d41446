/*  =========================================================================
    cli - gridcli relay: the gridrelays the broker knows
    =========================================================================
*/
#include "cmd.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/proto.h"
#include "render.h"

static const char s_help_relay [] =
"gridcli relay - the relays between the broker and its agents\n"
"\n"
"Usage: gridcli relay list\n"
"\n"
"A gridrelay carries many agents over one connection to the broker and\n"
"vouches for their keys; the broker trusts only relays it enrolled.\n"
"\n"
"relay list   NAME KEY AGENTS CONNECTED LAST-SEEN (and UPSTREAM when a\n"
"             relay sits behind another): each relay's public key, how\n"
"             many agents it carries now, whether it is connected, and\n"
"             when the broker last heard from it (viewer role). Relays\n"
"             that are not connected (or whose key was rejected: revoked)\n"
"             are marked !\n"
"\n"
"Global options and exit codes: gridcli --help. See docs/SECURITY.md.\n"
"\n"
"Examples:\n"
"  gridcli relay list\n"
"  gridcli --output json relay list\n";

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "relay.list", id, 0);
    return 0;
}

//  "yes" or "no" for a boolean; a time as a time; else the scalar.
static const char *
s_connected (const pv_t *value, char *buf, size_t buf_len)
{
    bool flag = false;
    if (pv_get_bool (value, &flag) == 0) {
        snprintf (buf, buf_len, "%s", flag ? "yes" : "no");
        return buf;
    }
    return cli_time (value, false, buf, buf_len);
}

//  relay list: NAME KEY AGENTS CONNECTED LAST-SEEN [UPSTREAM]
static int
s_render_list (const pv_t *data, FILE *out)
{
    const pv_t *relays = pv_map_get (data, "relays");
    if (pv_type (relays) != PV_ARRAY)
        return -2;
    if (pv_size (relays) == 0) {
        fprintf (out, "no relays\n");
        return 0;
    }
    bool upstream = false;
    for (size_t index = 0; index < pv_size (relays); index++)
        if (pv_map_get (pv_array_at (relays, index), "upstream"))
            upstream = true;
    const char *headers [] = {
        "NAME", "KEY", "AGENTS", "CONNECTED", "LAST-SEEN", "UPSTREAM"
    };
    cli_table_t *table = cli_table_new (upstream ? 6 : 5, true, headers);
    for (size_t index = 0; index < pv_size (relays); index++) {
        const pv_t *relay = pv_array_at (relays, index);
        char name [80], key [64], agents [32], connected [64], seen [64];
        char up [80];
        bool live = true, revoked = false;
        pv_get_bool (pv_map_get (relay, "connected"), &live);
        pv_get_bool (pv_map_get (relay, "revoked"), &revoked);
        //  A broker that runs --insecure knows relays by name only
        if (!*cli_field (relay, "key", key, sizeof key))
            snprintf (key, sizeof key, "-");
        const char *row [] = {
            cli_field (relay, "name", name, sizeof name),
            key,
            cli_field (relay, "agents", agents, sizeof agents),
            revoked ? "revoked"
                    : s_connected (pv_map_get (relay, "connected"), connected,
                                   sizeof connected),
            cli_time (pv_map_get (relay, "last_seen"), false, seen,
                      sizeof seen),
            cli_field (relay, "upstream", up, sizeof up)
        };
        cli_table_add (table, !live || revoked, row);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "list", .command = CLI_CMD_RELAY_LIST, .build = s_build_list,
     .render = s_render_list},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_relay = {"relay", s_help_relay, s_cmds};
