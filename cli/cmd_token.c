/*  =========================================================================
    cli - gridcli token: add, list, revoke the HTTP API's bearer tokens
    (admin role)
    =========================================================================
*/
#include "cmd.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/proto.h"
#include "render.h"
#include "util.h"

static const char s_help_token [] =
"gridcli token - bearer tokens for the broker's HTTP API (admin role)\n"
"\n"
"Usage:\n"
"  gridcli token add NAME --role viewer|operator|admin\n"
"  gridcli token list\n"
"  gridcli token revoke NAME\n"
"\n"
"A token lets an HTTP client (a script, the dashboard) call the broker's\n"
"REST API as the role it was given: it sends the token as\n"
"\"Authorization: Bearer TOKEN\". The broker keeps only a hash of each\n"
"token, so a token is shown once, when it is added, and cannot be shown\n"
"again: keep it then, or revoke it and add another.\n"
"\n"
"token add     make a token named NAME (letters, digits, '_' and '-')\n"
"  --role R    what it may do: viewer (read), operator (submit, cancel),\n"
"              admin (keys, tokens, drain)\n"
"token list    NAME ROLE CREATED LAST-USED (never the tokens themselves;\n"
"              LAST-USED counts since the broker started)\n"
"token revoke  the token is refused from its next request on\n"
"\n"
"Global options and exit codes: gridcli --help. See docs/SECURITY.md.\n"
"\n"
"Examples:\n"
"  gridcli token add dashboard --role viewer\n"
"  gridcli token revoke dashboard\n";

static const char *s_roles [] = {"viewer", "operator", "admin", NULL};

enum { S_OPT_ROLE = CLI_OPT_COMMAND };

static const struct option s_add_options [] = {
    {"role", required_argument, NULL, S_OPT_ROLE},
    {NULL, 0, NULL, 0}
};

static int
s_option (cli_args_t *args, int option, const char *value, char *err,
          size_t err_len)
{
    if (!cli_in_list (value, s_roles))
        return cli_fail (err, err_len, "--role must be viewer, operator or "
                         "admin, not '%s'", value);
    args->role = value;
    return 0;
}

static int
s_check_name (cli_args_t *args, char *err, size_t err_len)
{
    return cli_check_name_id (args, "a token name", "a token name", err,
                              err_len);
}

static int
s_check_add (cli_args_t *args, char *err, size_t err_len)
{
    if (s_check_name (args, err, err_len))
        return -1;
    if (!args->role)
        return cli_fail (err, err_len, "token add needs --role viewer, "
                         "operator or admin");
    return 0;
}

static int
s_build_add (const cli_args_t *args, const job_spec_t *file_spec,
             const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "token.add", id, 2);
    pw_str (writer, "name");
    pw_str (writer, args->id);
    pw_str (writer, "role");
    pw_str (writer, args->role);
    return 0;
}

static int
s_build_list (const cli_args_t *args, const job_spec_t *file_spec,
              const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "token.list", id, 0);
    return 0;
}

static int
s_build_revoke (const cli_args_t *args, const job_spec_t *file_spec,
                const char *id, pw_t *writer, job_errors_t *errors)
{
    proto_request_begin (writer, "token.revoke", id, 1);
    pw_str (writer, "name");
    pw_str (writer, args->id);
    return 0;
}

//  token add: the token, once, and what that means
static int
s_render_added (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "name")) != PV_STR
        || pv_type (pv_map_get (data, "token")) != PV_STR)
        return -2;
    char name [80], role [32], created [64];
    size_t len = 0;
    const char *bytes = pv_str (pv_map_get (data, "token"), &len);
    char *token = cli_printable (bytes, len, SIZE_MAX, false);
    cli_field (data, "name", name, sizeof name);
    char *name_text = cli_printable (name, strlen (name), SIZE_MAX, false);
    cli_field (data, "role", role, sizeof role);
    char *role_text = cli_printable (role, strlen (role), SIZE_MAX, false);
    cli_time (pv_map_get (data, "created"), false, created, sizeof created);
    fprintf (out, "token %s added (role %s, %s)\n\n  %s\n\n"
             "This is the only time the token is shown: the broker keeps "
             "only its hash\nand cannot show it again. Keep it now; if it "
             "is lost, revoke it\n(gridcli token revoke %s) and add "
             "another.\n", name_text, role_text, created, token, name_text);
    free (token);
    free (name_text);
    free (role_text);
    return 0;
}

//  token list: NAME ROLE CREATED LAST-USED
static int
s_render_list (const pv_t *data, FILE *out)
{
    const pv_t *tokens = pv_map_get (data, "tokens");
    if (pv_type (tokens) != PV_ARRAY)
        return -2;
    if (pv_size (tokens) == 0) {
        fprintf (out, "no tokens (add one with gridcli token add NAME "
                 "--role R)\n");
        return 0;
    }
    const char *headers [] = {"NAME", "ROLE", "CREATED", "LAST-USED"};
    cli_table_t *table = cli_table_new (4, false, headers);
    for (size_t index = 0; index < pv_size (tokens); index++) {
        const pv_t *token = pv_array_at (tokens, index);
        char name [80], role [32], created [64], used [64];
        const pv_t *last_used = pv_map_get (token, "last_used");
        const char *row [] = {
            cli_field (token, "name", name, sizeof name),
            cli_field (token, "role", role, sizeof role),
            cli_time (pv_map_get (token, "created"), false, created,
                      sizeof created),
            last_used ? cli_time (last_used, false, used, sizeof used) : "-"
        };
        cli_table_add (table, false, row);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    return 0;
}

static int
s_render_revoked (const pv_t *data, FILE *out)
{
    if (pv_type (pv_map_get (data, "name")) != PV_STR)
        return -2;
    char name [80];
    cli_field (data, "name", name, sizeof name);
    char *text = cli_printable (name, strlen (name), SIZE_MAX, false);
    fprintf (out, "token %s revoked\n", text);
    free (text);
    return 0;
}

static const cli_cmd_t s_cmds [] = {
    {.name = "add", .command = CLI_CMD_TOKEN_ADD, .args = CLI_ARG_ID,
     .options = s_add_options, .option = s_option, .check = s_check_add,
     .build = s_build_add, .render = s_render_added},
    {.name = "list", .command = CLI_CMD_TOKEN_LIST, .build = s_build_list,
     .render = s_render_list},
    {.name = "revoke", .command = CLI_CMD_TOKEN_REVOKE, .args = CLI_ARG_ID,
     .check = s_check_name, .build = s_build_revoke,
     .render = s_render_revoked},
    {.command = CLI_CMD_NONE}
};

const cli_topic_t cli_topic_token = {"token", s_help_token, s_cmds};
