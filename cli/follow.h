/*  =========================================================================
    follow - gridcli's live output: `job output --follow` and `job run
    --wait --follow`

    Reads a step's output while it runs: job.output pages from the offset
    reached so far (the broker serves what has arrived of the attempt in
    flight, and says when the step is complete, with its status and exit
    code), and between pages job.watch, which the broker answers when the
    job changes (an output piece arriving is a change), so nothing polls
    in a loop. A broker without job.watch is asked again every second. A
    retried step is followed into its next attempt; a line on ERR says so.

    Threading: gridcli's one thread.
    =========================================================================
*/
#ifndef GRID_CLI_FOLLOW_H
#define GRID_CLI_FOLLOW_H

#include <stdbool.h>
#include <stdio.h>

#include "cli.h"

//  Writes the output (STDERR_: standard error) of STEP of job JOB on NODE
//  to OUT as it arrives, until the step ends. Returns CLI_EXIT_OK when
//  the step succeeded, CLI_EXIT_JOB_FAILED when it ended otherwise, or
//  another exit code after a sentence on ERR.
int cli_follow_output (const cli_settings_t *settings, const char *job,
                       const char *node, int step, bool stderr_, FILE *out,
                       FILE *err);

//  Writes the standard output of every step of job JOB on each of its
//  nodes to OUT as it arrives, step after step, until the job ends; with
//  several nodes each line starts with its node ("web-01 | ..."). Returns
//  CLI_EXIT_OK once the job ended (its record says how), or an exit code
//  after a sentence on ERR.
int cli_follow_job (const cli_settings_t *settings, const char *job,
                    FILE *out, FILE *err);

#endif
