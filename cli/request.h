/*  =========================================================================
    request - gridcli's calls to the broker: one request and its reply
    through the client library (client/client.h), the reply envelope,
    and a command's request and answer by its own row of the table

    The functions here take the command's row (cmd.h) instead of looking
    it up, so the topic files can use them without the table of every
    topic; cli_request and cli_show (commands.h) look the row up first.
    Replies and the data they lend are the caller's to destroy.

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_REQUEST_H
#define GRID_CLI_REQUEST_H

#include <stdio.h>

#include "../client/client.h"
#include "cli.h"
#include "cmd.h"

//  One request and its reply: sends WRITER (request id ID) through the
//  settings' client. Returns CLI_EXIT_OK with *DATA_P lent by *REPLY_P
//  (the caller destroys it), or an exit code after printing why to ERR.
int cli_call (const cli_settings_t *settings, const pw_t *request,
              const char *id, pv_doc_t **reply_p, const pv_t **data_p,
              FILE *err);

//  The exit code of a typed request of the client library that returned
//  RC with REPLY: CLI_EXIT_OK for an ok reply (its data in REPLY->data),
//  else an exit code after printing why to ERR, as cli_call.
int cli_answer (const cli_settings_t *settings, int rc,
                const client_reply_t *reply, FILE *err);

//  Writes CMD's request for ARGS with request id ID into WRITER (CMD's
//  build). Returns 0, or -1 with ERRORS filled (an invalid inline job),
//  or -1 with no errors when CMD is NULL or sends no request.
int cli_request_build_cmd (const cli_cmd_t *cmd, const cli_args_t *args,
                           const job_spec_t *file_spec, const char *id,
                           pw_t *writer, job_errors_t *errors);

//  CMD's request for ARGS (a fresh id), sent with cli_call. Returns as
//  cli_call; CLI_EXIT_USAGE after printing the problems of an inline job.
int cli_request_cmd (const cli_cmd_t *cmd, const cli_args_t *args,
                     const job_spec_t *file_spec,
                     const cli_settings_t *settings, pv_doc_t **reply_p,
                     const pv_t **data_p, FILE *err);

//  Writes DATA, the reply to ARGS's command, to OUT as the settings say
//  (cli_render_cmd with CMD). Returns CLI_EXIT_OK, or CLI_EXIT_UNREACHABLE
//  after saying on ERR that the data is malformed or could not be
//  written.
int cli_show_cmd (const cli_cmd_t *cmd, const cli_args_t *args,
                  const cli_settings_t *settings, const pv_t *data,
                  FILE *out, FILE *err);

#endif
