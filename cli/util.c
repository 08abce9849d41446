/*  =========================================================================
    cli - small helpers: sentences, memory, numbers, and the option values
    and checks that several commands share (util.h)
    =========================================================================
*/
#include "util.h"

#include <czmq.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int
cli_fail (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
    return -1;
}

void *
cli_realloc (void *ptr, size_t size)
{
    void *fresh = realloc (ptr, size ? size : 1);
    if (!fresh) {
        //  Out of memory is not recoverable for a command line tool; CZMQ
        //  and pw make the same choice.
        fprintf (stderr, "gridcli: out of memory\n");
        abort ();
    }
    return fresh;
}

char *
cli_strdup (const char *text)
{
    size_t len = strlen (text);
    char *copy = cli_realloc (NULL, len + 1);
    memcpy (copy, text, len + 1);
    return copy;
}

bool
cli_in_list (const char *text, const char *const *list)
{
    for (size_t index = 0; list [index]; index++)
        if (streq (text, list [index]))
            return true;
    return false;
}

//  Reads a whole decimal integer in [MIN, MAX].
int
cli_parse_int (const char *text, long min, long max, int *out)
{
    char *end = NULL;
    errno = 0;
    long value = strtol (text, &end, 10);
    if (errno || end == text || *end || value < min || value > max)
        return -1;
    *out = (int) value;
    return 0;
}

int
cli_opt_duration (const char *name, const char *text, int64_t *ms_p,
                  char *err, size_t err_len)
{
    if (duration_parse (text, ms_p) != 0)
        return cli_fail (err, err_len,
                         "%s: '%s' is not a duration (write a number and a "
                         "unit ms, s, m, h or d, e.g. 500ms, 10s, 1h30m; at "
                         "most 30d)", name, text);
    if (*ms_p <= 0)
        return cli_fail (err, err_len, "%s must be longer than 0", name);
    return 0;
}

//  ---------------------------------------------------------------------
//  Option values that several commands read

int
cli_opt_target (cli_args_t *args, const char *value, char *err,
                size_t err_len)
{
    //  A later --target replaces an earlier one, as shells expect
    target_clear (&args->target);
    args->target_text = NULL;
    char why [256] = "";
    if (target_parse (value, &args->target, why, sizeof why) != 0) {
        //  An expression's sentence already says where it went wrong
        if (strncmp (why, "bad target", 10) == 0)
            return cli_fail (err, err_len, "%s (in '%s')", why, value);
        return cli_fail (err, err_len, "bad target '%s': %s", value, why);
    }
    args->target_text = value;
    return 0;
}

int
cli_opt_limit (cli_args_t *args, const char *value, char *err,
               size_t err_len)
{
    if (cli_parse_int (value, 1, CLI_MAX_LIMIT, &args->limit))
        return cli_fail (err, err_len, "--limit must be a whole number from "
                         "1 to %d, not '%s'", CLI_MAX_LIMIT, value);
    return 0;
}

int
cli_check_name_id (const cli_args_t *args, const char *what,
                   const char *kind, char *err, size_t err_len)
{
    if (!args->id)
        return cli_fail (err, err_len, "%s needs %s",
                         args->command_name, what);
    if (!name_valid (args->id))
        return cli_fail (err, err_len, "'%s' is not %s (letters, digits, "
                         "'_' and '-', at most %d)", args->id, kind,
                         NAME_MAX_LEN);
    return 0;
}

int
cli_check_job_id (cli_args_t *args, char *err, size_t err_len)
{
    if (!args->id)
        return cli_fail (err, err_len, "%s needs a job id",
                         args->command_name);
    if (!job_id_valid (args->id))
        return cli_fail (err, err_len, "'%s' is not a job id (ids look like "
                         "j-0193a1b2c3d4-0001)", args->id);
    return 0;
}
