/*  =========================================================================
    cmdline - the command-line conventions of gridbroker, gridagent and
    gridcli

    The three programs read their arguments the same way (docs/DESIGN.md,
    "Command lines"): getopt_long, long options written --name VALUE or
    --name=VALUE (or an unambiguous prefix of the name), -h and --help
    print the usage to stdout and exit 0, --version prints "PROGRAM
    VERSION (protocol N)", then the commit and build date and the
    protocol's feature names, and exits 0, --config FILE names the YAML file
    that flags override ("none": no file), --print-config shows every
    setting with where it came from. A mistake on the command line prints
    one sentence naming it, "PROGRAM: unknown option '--x'", then "run
    'PROGRAM --help' for usage", both on stderr, and exits 2
    (CMDLINE_EXIT_USAGE). This module holds the pieces they share.

    Threading: reentrant, except that cmdline_refused reads getopt's
    globals (optind) just after getopt_long returned.
    =========================================================================
*/
#ifndef GRID_CMDLINE_H
#define GRID_CMDLINE_H

#include <stdarg.h>
#include <stdio.h>

#define CMDLINE_EXIT_USAGE 2          //  A mistake on the command line

//  The argument getopt_long refused just now (it returned '?' or ':'),
//  e.g. "--bogus" or "--config", for the sentence; "?" when unknown.
const char *cmdline_refused (int argc, char *const *argv);

//  Prints "PROGRAM: <FORMAT...>" and "run 'PROGRAM [TOPIC ]--help' for
//  usage" to ERR (TOPIC may be NULL). Returns CMDLINE_EXIT_USAGE.
int cmdline_usage_error (FILE *err, const char *program, const char *topic,
                         const char *format, ...)
    __attribute__ ((format (printf, 4, 5)));

//  The same with the sentence already written (SENTENCE, no newline).
int cmdline_usage_sentence (FILE *err, const char *program,
                            const char *topic, const char *sentence);

//  Prints "PROGRAM VERSION (protocol N)" to OUT.
void cmdline_print_version (FILE *out, const char *program);

#endif
