/*  =========================================================================
    cmdline - the command-line conventions of the three programs (see
    cmdline.h)
    =========================================================================
*/
#include "cmdline.h"

#include <getopt.h>
#include <stdarg.h>

#include "proto.h"

#ifndef GRID_VERSION
#define GRID_VERSION "0.0.0-dev"
#endif
#ifndef GRID_COMMIT
#define GRID_COMMIT "unknown"
#endif
#ifndef GRID_BUILD_DATE
#define GRID_BUILD_DATE "unknown"
#endif

const char *
cmdline_refused (int argc, char *const *argv)
{
    return optind > 0 && optind <= argc ? argv [optind - 1] : "?";
}

int
cmdline_usage_sentence (FILE *err, const char *program, const char *topic,
                        const char *sentence)
{
    fprintf (err, "%s: %s\nrun '%s %s%s--help' for usage\n", program,
             sentence, program, topic ? topic : "", topic ? " " : "");
    return CMDLINE_EXIT_USAGE;
}

int
cmdline_usage_error (FILE *err, const char *program, const char *topic,
                     const char *format, ...)
{
    char sentence [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (sentence, sizeof sentence, format, args);
    va_end (args);
    return cmdline_usage_sentence (err, program, topic, sentence);
}

void
cmdline_print_version (FILE *out, const char *program)
{
    fprintf (out, "%s %s (protocol %d, reads %d to %d)\n", program,
             GRID_VERSION, PROTO_VERSION, PROTO_VERSION_MIN, PROTO_VERSION);
    fprintf (out, "commit %s, built %s\n", GRID_COMMIT, GRID_BUILD_DATE);
    fprintf (out, "features: %s\n", PROTO_FEATURES_TEXT);
}
