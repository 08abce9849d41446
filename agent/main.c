/*  =========================================================================
    gridagent - main: flags and config, then the agent's loop

    Exit codes: 0 after a clean stop (or --help / --version), 1 when the
    agent cannot start (spool, sockets), 2 for a bad flag or config.
    =========================================================================
*/
#include <stdio.h>

#include "../proto/cmdline.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "agent.h"
#include "rekey.h"

int
main (int argc, char *argv [])
{
    if (argc > 1 && strcmp (argv [1], "keygen") == 0)
        return keys_keygen_main ("gridagent", KEYS_DEFAULT_DIR, "agent",
                                 argc - 1, argv + 1, stdout, stderr);
    if (argc > 1 && strcmp (argv [1], "rotate-key") == 0)
        return rekey_main (argc - 1, argv + 1, stdout, stderr);
    //  Before anything starts a thread: signals are read by the loop
    if (agent_signals_block ()) {
        fprintf (stderr, "gridagent: cannot block signals\n");
        return 1;
    }
    agent_config_t config;
    agent_config_init (&config);
    char err [1024] = "";
    int rc = agent_config_parse (&config, argc, argv, stdout, err,
                                 sizeof (err));
    if (rc != 0) {
        if (rc == -2)
            cmdline_usage_sentence (stderr, "gridagent", NULL, err);
        else
        if (rc < 0)
            fprintf (stderr, "gridagent: %s\n", err);
        agent_config_clear (&config);
        return rc < 0 ? 2 : 0;
    }
    //  Every line from here on is in the configured form
    log_init ("gridagent");
    log_set_instance (config.id);
    if (log_configure (config.log_level, config.log_format, config.verbose,
                       err, sizeof (err))) {
        fprintf (stderr, "gridagent: %s\n", err);
        agent_config_clear (&config);
        return 2;
    }
    agent_t *agent = agent_new (&config, err, sizeof (err));
    if (!agent) {
        char line [1100];
        snprintf (line, sizeof line, "cannot start: %s", err);
        log_lines (LOG_LEVEL_ERROR, NULL, line);
        agent_config_clear (&config);
        return 1;
    }
    rc = agent_run (agent);
    agent_destroy (&agent);
    agent_config_clear (&config);
    return rc == 0 ? 0 : 1;
}
