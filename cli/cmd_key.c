/*  =========================================================================
    cli - gridcli key: list, accept, reject, delete (admin); the broker's
    own key: rotate-broker, fetch-broker
    =========================================================================
*/
#include "cmd.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "render.h"
#include "request.h"
#include "util.h"

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
    cli_table_t *table = cli_table_new (6, true, headers);
    for (size_t index = 0; index < pv_size (keys); index++) {
        const pv_t *key = pv_array_at (keys, index);
        char text [128], kind [32], status [32], who [128], host [256];
        char since [64];
        bool client = pv_str_eq (pv_map_get (key, "kind"), "client");
        //  A relay's key: its pool (the relays that may speak for the same
        //  agents, docs/SECURITY.md) and its name
        bool relay = pv_str_eq (pv_map_get (key, "kind"), "relay");
        //  A retired key: since its node switched to its next key
        const pv_t *when = pv_map_get (key, "retired_at");
        if (!when)
            when = pv_map_get (key, "accepted_at");
        if (!when)
            when = pv_map_get (key, "first_seen");
        const char *row [] = {
            cli_field (key, "key", text, sizeof text),
            cli_field (key, "kind", kind, sizeof kind),
            cli_field (key, "status", status, sizeof status),
            cli_field (key, client ? "role" : relay ? "pool" : "node", who,
                       sizeof who),
            cli_field (key, client || relay ? "name" : "hostname", host,
                       sizeof host),
            when ? cli_time (when, false, since, sizeof since) : "-"
        };
        cli_table_add (table, pv_str_eq (pv_map_get (key, "status"),
                                         "pending"), row);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    return 0;
}

//  key accept / reject / delete: one line.
static int
s_render_key (const pv_t *data, FILE *out)
{
    char key [128], status [64], node [128];
    if (pv_type (pv_map_get (data, "key")) != PV_STR)
        return -2;
    cli_field (data, "key", key, sizeof key);
    if (pv_map_get (data, "deleted"))
        snprintf (status, sizeof status, "deleted");
    else
        cli_field (data, "status", status, sizeof status);
    const pv_t *node_value = pv_map_get (data, "node");
    if (node_value)
        cli_field (data, "node", node, sizeof node);
    char *text = cli_printable (key, strlen (key), SIZE_MAX, false);
    bool already = false;
    pv_get_bool (pv_map_get (data, "already"), &already);
    fprintf (out, "key %s %s%s%s%s%s%s\n", text, already ? "was already " : "",
             status, node_value ? " (node " : "", node_value ? node : "",
             node_value ? ")" : "", already ? ": nothing changed" : "");
    free (text);
    return 0;
}

static const char s_help_key [] =
"gridcli key - enrol agents' keys, revoke keys (admin role)\n"
"\n"
"Usage:\n"
"  gridcli key list\n"
"  gridcli key accept NODE|KEY\n"
"  gridcli key reject NODE|KEY\n"
"  gridcli key delete NODE|KEY\n"
"  gridcli key rotate-broker [--deadline DURATION] | --status\n"
"  gridcli key fetch-broker [--out FILE]\n"
"  gridcli keygen [--out DIR] [--name NAME] [--force]\n"
"\n"
"A new agent's key waits as pending until an admin accepts it; then the\n"
"key is bound to the node id it registered with, and no other key may\n"
"speak for that node. NODE names the key bound to that node (or the one\n"
"pending key that claims it), or a relay's key by the relay's name; KEY\n"
"is the 40-character public key.\n"
"\n"
"key list     KEY KIND STATUS NODE/ROLE HOST/NAME SINCE: agent keys\n"
"             (pending rows marked !; refused: claimed a node bound to\n"
"             another key; next: a node's next key, taken at its first\n"
"             hello; retired: replaced by its node's next key, SINCE the\n"
"             switch, refused at every connection), the client keys of\n"
"             the broker's config with their roles, and its relays'\n"
"             keys with their pools and names\n"
"key accept   enrol a pending key (a KEY never seen before is enrolled\n"
"             ahead of its agent); a client key revoked by key reject\n"
"             may connect again. A key accepted already is left as\n"
"             it is (\"was already accepted\"). NODE with a next key\n"
"             pending (gridagent rotate-key, rekey: manual) accepts that\n"
"             one: the node switches to it without going offline\n"
"key reject   refuse the key, now and at every later connection; its node\n"
"             goes offline\n"
"key delete   forget the key: its node goes offline and the next key\n"
"             that says hello for it waits as pending (a rebuilt host)\n"
"key rotate-broker\n"
"             start the rotation of the broker's own key: it makes a next\n"
"             pair, announces its public key to every agent over its\n"
"             session, and retires the old key when every node has the\n"
"             new one, or at the deadline (--deadline, default 24h, at\n"
"             most 30d); then it serves its endpoints with the new key\n"
"             and the agents connect again with it. --status: how far\n"
"             it has come (nodes that acknowledged the next key, nodes\n"
"             that cannot: an earlier release, behind a relay). It\n"
"             prints how clients keep both keys until the retirement:\n"
"             --broker-key OLD,NEW (broker_key: OLD,NEW), with which\n"
"             gridcli goes on before and after it\n"
"key fetch-broker\n"
"             ask the broker for its public key, and the next one while a\n"
"             rotation runs, over this client's session; --out FILE\n"
"             writes the one to trust (the next one while a rotation\n"
"             runs) as a public key file, for --broker-key or the config's\n"
"             broker_key; while a rotation runs, trust both until the\n"
"             retirement: --broker-key OLD,NEW, as it prints\n"
"keygen       write this client's key pair and print its public key\n"
"\n"
"Global options and exit codes: gridcli --help. See docs/SECURITY.md.\n"
"\n"
"Examples:\n"
"  gridcli key list\n"
"  gridcli key accept web-01\n"
"  gridcli key rotate-broker --deadline 2h\n"
"  gridcli key fetch-broker --out ~/.config/grid/broker.key\n";

//  ---------------------------------------------------------------------
//  Checks and requests

static int
s_check (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id)
        return cli_fail (err, err_len, "%s needs a node id or a public key "
                         "(see gridcli key list)",
                         args->command_name);
    if (!keys_z85_valid (args->id) && !name_valid (args->id))
        return cli_fail (err, err_len, "'%s' is neither a node id nor a "
                         "public key (40 characters of Z85)", args->id);
    return 0;
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "key.list", id, 0);
    return 0;
}

//  key.TYPE of a key, or of the key bound to a node
static void
s_build_key (const cli_args_t *args, const char *type, const char *id,
             pw_t *writer)
{
    proto_request_begin (writer, type, id, 1);
    pw_str (writer, keys_z85_valid (args->id) ? "key" : "node");
    pw_str (writer, args->id);
}

static int
s_build_accept (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_key (args, "key.accept", id, writer);
    return 0;
}

static int
s_build_reject (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_key (args, "key.reject", id, writer);
    return 0;
}

static int
s_build_delete (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    s_build_key (args, "key.delete", id, writer);
    return 0;
}

//  ---------------------------------------------------------------------
//  The broker's own key

enum { S_OPT_DEADLINE = CLI_OPT_COMMAND, S_OPT_STATUS, S_OPT_OUT };

static const struct option s_rotate_options [] = {
    {"deadline", required_argument, NULL, S_OPT_DEADLINE},
    {"status", no_argument, NULL, S_OPT_STATUS},
    {NULL, 0, NULL, 0}
};
static const struct option s_fetch_options [] = {
    {"out", required_argument, NULL, S_OPT_OUT},
    {NULL, 0, NULL, 0}
};

static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    int64_t ms = 0;
    switch (option) {
        case S_OPT_DEADLINE:
            if (cli_opt_duration ("--deadline", value, &ms, err, err_len))
                return -1;
            args->deadline = value;
            return 0;
        case S_OPT_STATUS:
            args->key_status = true;
            return 0;
        case S_OPT_OUT:
            args->out_file = value;
            return 0;
        default:
            return cli_fail (err, err_len, "unknown option");
    }
}

static int
s_check_rotate (cli_args_t *args, char *err, size_t err_len)
{
    if (args->key_status && args->deadline)
        return cli_fail (err, err_len, "--status starts nothing: it takes "
                         "no --deadline");
    return 0;
}

static int
s_build_rotate (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    if (args->key_status) {
        proto_request_begin (writer, "broker.keys", id, 0);
        return 0;
    }
    proto_request_begin (writer, "broker.rekey", id, args->deadline ? 1 : 0);
    if (args->deadline) {
        pw_str (writer, "deadline");
        pw_str (writer, args->deadline);
    }
    return 0;
}

static int
s_build_fetch (const cli_args_t *args, const job_spec_t *file_spec,
               const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "broker.keys", id, 0);
    return 0;
}

//  broker.rekey and broker.keys: KEY NEXT DEADLINE and the counts.
static int
s_render_broker_keys (const pv_t *data, FILE *out)
{
    char key [64], next [64], when [64];
    if (pv_type (pv_map_get (data, "key")) != PV_STR)
        return -2;
    fprintf (out, "broker key   %s\n", cli_field (data, "key", key,
                                                    sizeof key));
    if (!pv_map_get (data, "next")) {
        fprintf (out, "no rotation runs\n");
        return 0;
    }
    fprintf (out, "next key     %s\n", cli_field (data, "next", next,
                                                    sizeof next));
    const pv_t *deadline = pv_map_get (data, "deadline");
    fprintf (out, "retired at   the latest %s\n",
             deadline ? cli_time (deadline, false, when, sizeof when) : "-");
    //  A client that trusts both keys goes on through the retirement
    fprintf (out, "clients      keep both until the retirement: --broker-key "
             "%s,%s\n             (or broker_key: %s,%s in gridcli.yaml, "
             "or GRID_BROKER_KEY)\n", key, next, key, next);
    int64_t nodes = 0, acked = 0, unable = 0, relayed = 0;
    if (pv_get_int (pv_map_get (data, "nodes"), &nodes) == 0) {
        pv_get_int (pv_map_get (data, "acknowledged"), &acked);
        pv_get_int (pv_map_get (data, "unable"), &unable);
        pv_get_int (pv_map_get (data, "relayed"), &relayed);
        fprintf (out, "nodes        %" PRId64 ": %" PRId64 " have the next "
                 "key, %" PRId64 " cannot learn it (an earlier release), %"
                 PRId64 " behind relays\n", nodes, acked, unable, relayed);
    }
    return 0;
}

//  key fetch-broker's request and table, for its run
static const cli_cmd_t s_fetch = {
    .name = "fetch-broker", .command = CLI_CMD_KEY_FETCH_BROKER,
    .build = s_build_fetch, .render = s_render_broker_keys
};

//  key fetch-broker: prints the keys, and writes the one to trust.
static int
s_run_fetch (const cli_args_t *args, const job_spec_t *file_spec,
             const cli_settings_t *settings, FILE *out, FILE *err)
{
    pv_doc_t *reply = NULL;
    const pv_t *data = NULL;
    int code = cli_request_cmd (&s_fetch, args, file_spec, settings, &reply,
                                &data, err);
    if (code != CLI_EXIT_OK) {
        pv_doc_destroy (&reply);
        return code;
    }
    char key [64] = "";
    cli_field (data, pv_map_get (data, "next") ? "next" : "key", key,
               sizeof key);
    if (args->out_file) {
        if (!keys_z85_valid (key)) {
            fprintf (err, "gridcli: the broker has no key to fetch (it runs "
                     "--insecure)\n");
            pv_doc_destroy (&reply);
            return CLI_EXIT_JOB_FAILED;
        }
        char tmp [4200];
        snprintf (tmp, sizeof tmp, "%s.tmp", args->out_file);
        FILE *file = fopen (tmp, "w");
        bool ok = file && fprintf (file, "#   ZeroMQ CURVE Public Certificate\n"
                                   "#   The broker's key, as gridcli key "
                                   "fetch-broker wrote it\n\n"
                                   "metadata\ncurve\n    public-key = "
                                   "\"%s\"\n", key) > 0;
        if (file && fclose (file) != 0)
            ok = false;
        if (!ok || rename (tmp, args->out_file) != 0) {
            fprintf (err, "gridcli: cannot write %s: %s\n", args->out_file,
                     strerror (errno));
            unlink (tmp);
            pv_doc_destroy (&reply);
            return CLI_EXIT_JOB_FAILED;
        }
    }
    code = cli_show_cmd (&s_fetch, args, settings, data, out, err);
    if (code == CLI_EXIT_OK && args->out_file)
        fprintf (err, "wrote the broker's key %s to %s\n", key,
                 args->out_file);
    pv_doc_destroy (&reply);
    return code;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "list", .command = CLI_CMD_KEY_LIST, .build = s_build_list,
     .render = s_render_keys},
    {.name = "accept", .command = CLI_CMD_KEY_ACCEPT,
     .args = CLI_ARG_ID | CLI_ARG_KEY, .check = s_check,
     .build = s_build_accept, .render = s_render_key},
    {.name = "reject", .command = CLI_CMD_KEY_REJECT,
     .args = CLI_ARG_ID | CLI_ARG_KEY, .check = s_check,
     .build = s_build_reject, .render = s_render_key},
    {.name = "delete", .command = CLI_CMD_KEY_DELETE,
     .args = CLI_ARG_ID | CLI_ARG_KEY, .check = s_check,
     .build = s_build_delete, .render = s_render_key},
    {.name = "rotate-broker", .command = CLI_CMD_KEY_ROTATE_BROKER,
     .options = s_rotate_options, .option = s_option,
     .check = s_check_rotate, .build = s_build_rotate,
     .render = s_render_broker_keys},
    {.name = "fetch-broker", .command = CLI_CMD_KEY_FETCH_BROKER,
     .options = s_fetch_options, .option = s_option, .build = s_build_fetch,
     .render = s_render_broker_keys, .run = s_run_fetch},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_key = {"key", s_help_key, s_cmds};
