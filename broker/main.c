/*  =========================================================================
    gridbroker - the control host's broker (see broker.h)
    =========================================================================
*/
#include "../proto/conf.h"
#include "../proto/log.h"
#include "../proto/names.h"
#include "broker.h"

static const char *s_usage =
    "usage: gridbroker [options]\n"
    "       gridbroker keygen [--out DIR] [--name NAME] [--force]\n"
    "\n"
    "Accepts jobs from gridcli and scripts, walks their phases across the\n"
    "registered gridagents, and keeps every result in an LMDB store.\n"
    "\n"
    "options (flags override --config, which overrides the defaults):\n"
    "  --config FILE          YAML config (see conf/gridbroker.yaml); default\n"
    "                         " BROKER_DEFAULT_CONFIG " when it exists,\n"
    "                         none: no file\n"
    "  --data-dir DIR         store directory        [/var/lib/grid/broker]\n"
    "  --client EP            client API endpoint    [tcp://127.0.0.1:7701]\n"
    "  --agents EP            agent endpoint         [tcp://127.0.0.1:7702]\n"
    "  --publish EP           commands endpoint      [tcp://127.0.0.1:7703]\n"
    "  --heartbeat D          agent heartbeat interval           [5s]\n"
    "  --missed-heartbeats N  offline after N missed heartbeats  [3]\n"
    "  --offline-grace D      an offline node's running steps read lost\n"
    "                         after D, unless it comes back     [15s]\n"
    "  --max-concurrent N     running jobs at most               [64]\n"
    "  --max-pending N        queued jobs at most                [1024]\n"
    "  --ack-timeout D        re-send a command not acked within D [2s]\n"
    "  --ack-resends N        re-sends before a step reads lost  [3]\n"
    "  --task-timeout D       task timeout when a job gives none [5m]\n"
    "  --grace D              extra time past a task timeout     [5s]\n"
    "  --retry-base D         first retry backoff                [1s]\n"
    "  --retry-cap D          largest retry backoff              [1m]\n"
    "  --retention D          purge finished jobs after D (0: keep) [30d]\n"
    "  --store-max-size SIZE  the store may grow to SIZE (512MiB, 8GiB) [8GiB]\n"
    "  --map-size-mb N        initial store size in MiB          [64]\n"
    "  --max-map-size-mb N    --store-max-size in MiB\n"
    "  --verbose              log every job event (--log-level debug)\n"
    "  --log-level LEVEL      error, warn, info or debug             [info]\n"
    "  --log-format FORMAT    text (journal-style under systemd) or json,\n"
    "                         one object a line                      [text]\n"
    "\n"
    "security (see docs/SECURITY.md; CURVE is on unless --insecure):\n"
    "  --key FILE             this broker's key pair\n"
    "                         [/etc/grid/keys/broker.key]\n"
    "  --client-key ROLE:KEY  a client key (Z85 or key file) with its role,\n"
    "                         viewer, operator or admin; repeatable\n"
    "  --auto-accept          enrol every new agent key at once (labs only)\n"
    "  --allow LIST           allowlist: backend.action,backend.*,... [all]\n"
    "  --insecure             plaintext, no keys, every client is admin:\n"
    "                         only on a trusted, isolated network\n"
    "  keygen                 write a key pair (gridbroker keygen --help)\n"
    "\n"
    "  --version              print the version\n"
    "  -h, --help             this text\n"
    "\n"
    "EP is a ZeroMQ endpoint (tcp://127.0.0.1:7701, ipc:///run/grid/client).\n"
    "D is a duration: 500ms, 10s, 30m, 1h30m.\n";

static int
s_bad (const char *format, const char *value)
{
    fprintf (stderr, "gridbroker: ");
    fprintf (stderr, format, value);
    fprintf (stderr, "\nrun 'gridbroker --help' for the options\n");
    return 2;
}

static int
s_duration (const char *flag, const char *value, int64_t *ms_p)
{
    if (duration_parse (value, ms_p) != 0) {
        fprintf (stderr, "gridbroker: %s: '%s' is not a duration (like 500ms, "
                 "10s, 30m)\n", flag, value);
        return -1;
    }
    return 0;
}

static int
s_count (const char *flag, const char *value, int64_t min, int64_t *out)
{
    char *end = NULL;
    long long number = strtoll (value, &end, 10);
    if (!*value || *end || number < min || number > 100000000) {
        fprintf (stderr, "gridbroker: %s: '%s' is not a whole number >= %lld\n",
                 flag, value, (long long) min);
        return -1;
    }
    *out = number;
    return 0;
}

static void
s_set (char **field, const char *value)
{
    free (*field);
    *field = strdup (value);
}

int
main (int argc, char *argv [])
{
    if (argc > 1 && strcmp (argv [1], "keygen") == 0)
        return keys_keygen_main ("gridbroker", KEYS_DEFAULT_DIR, "broker",
                                 argc - 1, argv + 1, stdout, stderr);
    broker_config_t config;
    broker_config_defaults (&config);
    //  The config file first, so that flags override it; without --config
    //  the system's file when there is one ("--config none": no file).
    const char *config_file = NULL;
    for (int index = 1; index < argc; index++) {
        if (strcmp (argv [index], "-h") == 0 || strcmp (argv [index], "--help") == 0) {
            fputs (s_usage, stdout);
            broker_config_clear (&config);
            return 0;
        }
        if (strcmp (argv [index], "--version") == 0) {
            printf ("gridbroker %s\n", GRID_VERSION);
            broker_config_clear (&config);
            return 0;
        }
        if (strcmp (argv [index], "--config") == 0 && index + 1 < argc)
            config_file = argv [index + 1];
    }
    if (!config_file && access (BROKER_DEFAULT_CONFIG, F_OK) == 0)
        config_file = BROKER_DEFAULT_CONFIG;
    if (config_file && strcmp (config_file, "none") != 0) {
        char err [1024];
        if (broker_config_load (&config, config_file, err, sizeof err) != 0) {
            fprintf (stderr, "gridbroker: %s\n", err);
            broker_config_clear (&config);
            return 2;
        }
    }
    int rc = 0;
    for (int index = 1; index < argc && rc == 0; index++) {
        const char *flag = argv [index];
        if (strcmp (flag, "--verbose") == 0) {
            config.verbose = true;
            continue;
        }
        if (strcmp (flag, "--insecure") == 0) {
            config.auth.insecure = true;
            continue;
        }
        if (strcmp (flag, "--auto-accept") == 0) {
            config.auth.auto_accept = true;
            continue;
        }
        if (strncmp (flag, "--", 2) != 0) {
            rc = s_bad ("unexpected argument '%s'", flag);
            break;
        }
        if (index + 1 >= argc) {
            rc = s_bad ("%s needs a value", flag);
            break;
        }
        const char *value = argv [++index];
        int64_t number = 0;
        if (strcmp (flag, "--config") == 0)
            ;   //  Read above
        else if (strcmp (flag, "--log-level") == 0
                 || strcmp (flag, "--log-format") == 0) {
            char err [256];
            bool level = strcmp (flag, "--log-level") == 0;
            if (log_check (level ? value : NULL, level ? NULL : value, err,
                           sizeof err) != 0) {
                fprintf (stderr, "gridbroker: %s: %s\n", flag, err);
                rc = 2;
            }
            else
                s_set (level ? &config.log_level : &config.log_format, value);
        }
        else if (strcmp (flag, "--data-dir") == 0)
            s_set (&config.data_dir, value);
        else if (strcmp (flag, "--key") == 0)
            s_set (&config.auth.key_file, value);
        else if (strcmp (flag, "--client-key") == 0
                 || strcmp (flag, "--allow") == 0) {
            char err [1024];
            int bad = strcmp (flag, "--allow") == 0
                          ? auth_config_set_allow (&config.auth, value, err,
                                                   sizeof err)
                          : auth_config_add_client (&config.auth, value, err,
                                                    sizeof err);
            if (bad) {
                fprintf (stderr, "gridbroker: %s\n", err);
                rc = 2;
            }
        }
        else if (strcmp (flag, "--client") == 0)
            s_set (&config.client_ep, value);
        else if (strcmp (flag, "--agents") == 0)
            s_set (&config.agents_ep, value);
        else if (strcmp (flag, "--publish") == 0)
            s_set (&config.publish_ep, value);
        else if (strcmp (flag, "--heartbeat") == 0)
            rc = s_duration (flag, value, &config.heartbeat_ms) ? 2 : 0;
        else if (strcmp (flag, "--offline-grace") == 0)
            rc = s_duration (flag, value, &config.offline_grace_ms) ? 2 : 0;
        else if (strcmp (flag, "--missed-heartbeats") == 0)
            rc = s_count (flag, value, 1, &config.missed_heartbeats) ? 2 : 0;
        else if (strcmp (flag, "--max-concurrent") == 0) {
            rc = s_count (flag, value, 1, &number) ? 2 : 0;
            config.sched.max_concurrent = (size_t) number;
        }
        else if (strcmp (flag, "--max-pending") == 0) {
            rc = s_count (flag, value, 0, &number) ? 2 : 0;
            config.sched.max_pending = (size_t) number;
        }
        else if (strcmp (flag, "--ack-timeout") == 0)
            rc = s_duration (flag, value, &config.sched.ack_timeout_ms) ? 2 : 0;
        else if (strcmp (flag, "--ack-resends") == 0) {
            rc = s_count (flag, value, 0, &number) ? 2 : 0;
            config.sched.ack_resends = (uint32_t) number;
        }
        else if (strcmp (flag, "--task-timeout") == 0)
            rc = s_duration (flag, value, &config.sched.default_timeout_ms) ? 2 : 0;
        else if (strcmp (flag, "--grace") == 0)
            rc = s_duration (flag, value, &config.sched.grace_ms) ? 2 : 0;
        else if (strcmp (flag, "--retry-base") == 0)
            rc = s_duration (flag, value, &config.sched.retry_base_ms) ? 2 : 0;
        else if (strcmp (flag, "--retry-cap") == 0)
            rc = s_duration (flag, value, &config.sched.retry_cap_ms) ? 2 : 0;
        else if (strcmp (flag, "--retention") == 0)
            rc = s_duration (flag, value, &config.retention_ms) ? 2 : 0;
        else if (strcmp (flag, "--map-size-mb") == 0) {
            rc = s_count (flag, value, 1, &number) ? 2 : 0;
            config.map_bytes = (size_t) number << 20;
        }
        else if (strcmp (flag, "--store-max-size") == 0) {
            uint64_t bytes = 0;
            if (conf_size_parse (value, &bytes) != 0 || bytes < (1 << 20)
                || bytes > SIZE_MAX) {
                fprintf (stderr, "gridbroker: --store-max-size: '%s' is not "
                         "a size of at least 1MiB (like 512MiB, 8GiB)\n",
                         value);
                rc = 2;
            }
            else
                config.max_map_bytes = (size_t) bytes;
        }
        else if (strcmp (flag, "--max-map-size-mb") == 0) {
            rc = s_count (flag, value, 1, &number) ? 2 : 0;
            config.max_map_bytes = (size_t) number << 20;
        }
        else
            rc = s_bad ("unknown option '%s'", flag);
    }
    if (rc == 0 && config.heartbeat_ms < 10) {
        fprintf (stderr, "gridbroker: --heartbeat must be at least 10ms\n");
        rc = 2;
    }
    if (rc != 0) {
        broker_config_clear (&config);
        return rc;
    }
    //  Random jitter seed per run (the scheduler itself reads no clock).
    config.sched.seed = (uint64_t) broker_wall_ms () ^ ((uint64_t) getpid () << 32);
    char err [1024];
    //  Every line from here on is in the configured form
    log_init ("gridbroker");
    log_configure (config.log_level, config.log_format, config.verbose, err,
                   sizeof err);
    zsys_init ();
    zsys_set_logsender (NULL);
    broker_t *broker = broker_new (&config, err, sizeof err);
    broker_config_clear (&config);
    if (!broker) {
        fprintf (stderr, "gridbroker: %s\n", err);
        return 1;
    }
    broker_run (broker);
    broker_destroy (&broker);
    return 0;
}
