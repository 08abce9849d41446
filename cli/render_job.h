/*  =========================================================================
    render_job - gridcli's rendering of job records, dry runs, progress
    and the answers that name a new job

    cli.h declares what the tests and the program see (cli_render_job,
    cli_render_check, cli_progress_format, ...); this header adds what the
    topic files share besides.

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_RENDER_JOB_H
#define GRID_CLI_RENDER_JOB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/pv.h"
#include "cli.h"

//  A job record: a map with a string id and status.
bool cli_is_job_record (const pv_t *record);
//  Steps of a job record: its `steps`, else the leaves of its tasks.
int64_t cli_step_count (const pv_t *record);

//  The reply to job.submit: "job ID submitted (STATUS)" and how to follow
//  it. Returns 0, or -2 when DATA names no job.
int cli_render_submitted (const pv_t *data, FILE *out);
//  The reply to job.retry and dlq.retry: the new job.
int cli_render_retry (const pv_t *data, FILE *out);

#endif
