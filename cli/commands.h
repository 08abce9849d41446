/*  =========================================================================
    commands - gridcli's table of every topic, and what goes through it

    commands.c lists the topic files' rows (cmd.h) in the order the main
    help shows them, finds a command's row, and sends and renders a
    command's request through its row. Only what runs a whole command line
    includes this header (parse.c, run.c): a topic file uses its own row,
    so no topic depends on the table that lists it.

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_COMMANDS_H
#define GRID_CLI_COMMANDS_H

#include <stddef.h>
#include <stdio.h>

#include "cli.h"
#include "cmd.h"

//  The topics, in the order the main help lists them.
extern const cli_topic_t *const cli_topics [];
extern const size_t cli_topic_count;


//  The topic named NAME, or NULL.
const cli_topic_t *cli_topic_find (const char *name);

//  The command COMMAND's row, with its topic in *TOPIC_P (may be NULL);
//  NULL for help, version and print-config.
const cli_cmd_t *cli_cmd_find (cli_command_t command,
                               const cli_topic_t **topic_p);

//  "job run", "status": how messages name COMMAND.
const char *cli_command_name (cli_command_t command);

//  The request of the command in ARGS (its row's build, a fresh id), sent
//  with cli_call. Returns as cli_call; CLI_EXIT_USAGE after printing the
//  problems of an inline job.
int cli_request (const cli_args_t *args, const job_spec_t *file_spec,
                 const cli_settings_t *settings, pv_doc_t **reply_p,
                 const pv_t **data_p, FILE *err);

//  Writes DATA, the reply to the command in ARGS, to OUT as the settings
//  say (cli_render). Returns CLI_EXIT_OK, or CLI_EXIT_UNREACHABLE after
//  saying on ERR that the data is malformed or could not be written.
int cli_show (const cli_args_t *args, const cli_settings_t *settings,
              const pv_t *data, FILE *out, FILE *err);

#endif
