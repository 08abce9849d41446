/*  =========================================================================
    gridcli - the operator's command line (see cli/cli.h, docs/CLI.md)
    =========================================================================
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/keys.h"
#include "cli.h"

int
main (int argc, char *argv [])
{
    if (argc > 1 && strcmp (argv [1], "keygen") == 0) {
        char dir [512];
        cli_keys_default_dir (getenv ("HOME"), dir, sizeof dir);
        return keys_keygen_main ("gridcli", dir, "client", argc - 1, argv + 1,
                                 stdout, stderr);
    }
    return cli_run (argc, argv, stdout, stderr);
}
