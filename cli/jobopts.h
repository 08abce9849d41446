/*  =========================================================================
    jobopts - the job options that job run and schedule add share:
    --target, --batch, --max-failures, --canary, the timeouts, retries,
    strategy, priority, limits, lease, and the inline job they make

    Both commands take the options of cli_run_options with cli_run_option
    as their handler (its values run from CLI_OPT_COMMAND up to
    CLI_OPT_COMMAND + 39; a command that adds options of its own uses
    values above). The inline job is written in the wire form of job.h and
    run through the checks the broker applies before anything is sent.
    cli_job_write and cli_job_apply_options are declared in cli.h.

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_JOBOPTS_H
#define GRID_CLI_JOBOPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../proto/job.h"
#include "../proto/pw.h"
#include "cli.h"

//  The options of job run, which schedule add takes too, and their
//  handler: applies OPTION (a val of cli_run_options) with VALUE to ARGS.
//  Returns 0 or -1 with a sentence in ERR.
extern const struct option cli_run_options [];
int cli_run_option (cli_args_t *args, int option, const char *value,
                    char *err, size_t err_len);
//  The job of job run or schedule add in the wire form: the job file's
//  spec, or the inline job once it passed the checks the broker applies.
//  NULL with ERRORS filled when the inline job is invalid.
pw_t *cli_job_bytes (const cli_args_t *args, const job_spec_t *file_spec,
                     job_errors_t *errors);
//  True when ARGS holds a job option that a job file replaces.
bool cli_job_inline_given (const cli_args_t *args);
//  Prints the problems of a job file (FILE) or inline job (NULL) to ERR.
void cli_print_job_errors (FILE *err, const char *file,
                           const job_errors_t *errors);

#endif
