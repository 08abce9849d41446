/*  =========================================================================
    cli - gridcli: the program (see cli.h)

    cli_run strings the parts together: parse the command line (parse.c),
    resolve the settings (settings.c) and keys (secure.c), make the client
    (client/client.h), then run the command's row of the table (cmd.h):
    its own run, or one request and its table.
    =========================================================================
*/
#include "commands.h"

#include <stdlib.h>
#include <string.h>

#include "../proto/cmdline.h"
#include "jobopts.h"

int
cli_run (int argc, char **argv, FILE *out, FILE *err)
{
    cli_args_t args;
    cli_settings_t settings = { .broker = NULL };
    job_spec_t *spec = NULL;
    job_errors_t errors = { .count = 0 };
    char why [1024] = "";
    int rc = CLI_EXIT_OK;
    const cli_cmd_t *cmd = NULL;

    if (cli_args_parse (&args, argc, argv, why, sizeof why) != 0) {
        rc = cmdline_usage_sentence (err, "gridcli", args.help_topic, why);
        goto done;
    }
    if (args.command == CLI_CMD_HELP) {
        cli_print_help (args.help_topic, out);
        goto done;
    }
    if (args.command == CLI_CMD_VERSION) {
        cmdline_print_version (out, "gridcli");
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
        cli_print_config (&args, &settings, out);
        goto done;
    }
    cmd = cli_cmd_find (args.command, NULL);
    if ((cmd->args & CLI_ARG_JOB) && args.file
    &&  job_spec_load_file (args.file, &spec, &errors) != 0) {
        cli_print_job_errors (err, args.file, &errors);
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
    settings.client = client_new (settings.broker);
    if (!settings.client) {
        fprintf (err, "gridcli: out of memory\n");
        rc = CLI_EXIT_UNREACHABLE;
        goto done;
    }
    if (settings.keys.cert)
        client_set_curve (settings.client, settings.keys.cert,
                          settings.keys.broker_key);
    client_set_timeout (settings.client, settings.request_timeout_ms);
    client_set_tries (settings.client, CLI_REQUEST_TRIES);

    if (cmd->run)
        rc = cmd->run (&args, spec, &settings, out, err);
    else {
        pv_doc_t *reply = NULL;
        const pv_t *data = NULL;
        rc = cli_request (&args, spec, &settings, &reply, &data, err);
        if (rc == CLI_EXIT_OK)
            rc = cli_show (&args, &settings, data, out, err);
        pv_doc_destroy (&reply);
    }

done:
    fflush (out);
    job_spec_destroy (&spec);
    job_errors_clear (&errors);
    cli_settings_clear (&settings);
    cli_args_clear (&args);
    return rc;
}
