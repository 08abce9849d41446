/*  =========================================================================
    gridcli - the operator's command line (see cli/cli.h, docs/CLI.md)
    =========================================================================
*/
#include <stdio.h>

#include "cli.h"

int
main (int argc, char *argv [])
{
    return cli_run (argc, argv, stdout, stderr);
}
