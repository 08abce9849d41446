/*  =========================================================================
    gridrelay - main: flags and config, then the relay's loop

    Exit codes: 0 after a clean stop (or --help / --version), 1 when the
    relay cannot start (keys, sockets), 2 for a bad flag or config.
    =========================================================================
*/
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include "../proto/cmdline.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "relay.h"

int
main (int argc, char *argv [])
{
    if (argc > 1 && strcmp (argv [1], "keygen") == 0)
        return keys_keygen_main ("gridrelay", KEYS_DEFAULT_DIR, "relay",
                                 argc - 1, argv + 1, stdout, stderr);
    //  Before anything starts a thread: signals are read by the loop
    signal (SIGPIPE, SIG_IGN);
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGTERM);
    sigaddset (&mask, SIGINT);
    sigaddset (&mask, SIGHUP);
    if (pthread_sigmask (SIG_BLOCK, &mask, NULL) != 0) {
        fprintf (stderr, "gridrelay: cannot block signals\n");
        return 1;
    }
    relay_config_t config;
    relay_config_init (&config);
    char err [1024] = "";
    int rc = relay_config_parse (&config, argc, argv, stdout, err,
                                 sizeof err);
    if (rc != 0) {
        if (rc == -2)
            cmdline_usage_sentence (stderr, "gridrelay", NULL, err);
        else
        if (rc < 0)
            fprintf (stderr, "gridrelay: %s\n", err);
        relay_config_clear (&config);
        return rc < 0 ? CMDLINE_EXIT_USAGE : 0;
    }
    log_init ("gridrelay");
    log_set_instance (config.name);
    if (log_configure (config.log_level, config.log_format, config.verbose,
                       err, sizeof err) != 0) {
        fprintf (stderr, "gridrelay: %s\n", err);
        relay_config_clear (&config);
        return 2;
    }
    //  CZMQ's own SIGINT handler would end the loop behind our back
    zsys_handler_set (NULL);
    relay_t *relay = relay_new (&config, err, sizeof err);
    if (!relay) {
        char line [1100];
        snprintf (line, sizeof line, "cannot start: %s", err);
        log_lines (LOG_LEVEL_ERROR, NULL, line);
        relay_config_clear (&config);
        return 1;
    }
    rc = relay_run (relay);
    relay_destroy (&relay);
    relay_config_clear (&config);
    return rc == 0 ? 0 : 1;
}
