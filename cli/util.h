/*  =========================================================================
    util - gridcli's small helpers: sentences, memory, whole numbers, and
    the option values and checks that several commands read (--target,
    --limit, an id that must be a name or a job id)

    They know no command table: a check names the command by
    ARGS->command_name, which cli_args_parse fills. Memory helpers end the
    program when memory runs out, as CZMQ and pw do.

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_UTIL_H
#define GRID_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

//  Formats a sentence into ERR; returns -1.
int cli_fail (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

//  realloc and strdup that end the program when memory runs out (as CZMQ
//  and pw do).
void *cli_realloc (void *ptr, size_t size);
char *cli_strdup (const char *text);

//  True when TEXT is one of LIST (NULL-terminated).
bool cli_in_list (const char *text, const char *const *list);

//  Reads a whole decimal integer in [MIN, MAX] into *OUT. Returns 0 or -1.
int cli_parse_int (const char *text, long min, long max, int *out);

//  Reads option NAME's duration TEXT, longer than 0. Returns 0, or -1
//  with a sentence in ERR.
int cli_opt_duration (const char *name, const char *text, int64_t *ms_p,
                      char *err, size_t err_len);

//  --target T: parses TEXT into ARGS->target and ->target_text (a later
//  --target replaces an earlier one). Returns 0 or -1.
int cli_opt_target (cli_args_t *args, const char *text, char *err,
                    size_t err_len);

//  --limit N: 1 to CLI_MAX_LIMIT. Returns 0 or -1.
#define CLI_MAX_LIMIT 10000
int cli_opt_limit (cli_args_t *args, const char *text, char *err,
                   size_t err_len);

//  Checks that ARGS->id is there (else "COMMAND needs WHAT") and a name
//  ([A-Za-z0-9_-]{1,64}; else "'ID' is not KIND ..."). Returns 0 or -1.
int cli_check_name_id (const cli_args_t *args, const char *what,
                       const char *kind, char *err, size_t err_len);

//  Checks that ARGS->id is there and a job id. Returns 0 or -1.
int cli_check_job_id (cli_args_t *args, char *err, size_t err_len);

#endif
