/*  =========================================================================
    gridbroker - the control host's broker (see broker.h)
    =========================================================================
*/
#include <getopt.h>
#include <pthread.h>
#include <signal.h>

#include "../proto/cmdline.h"
#include "../proto/conf.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "../proto/names.h"
#include "broker.h"
#include "cluster.h"

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
    "  --lease D              any-node lease when a job sets no\n"
    "                         lease_ms                           [30s]\n"
    "  --retention D          purge finished jobs after D (0: keep) [30d]\n"
    "  --audit-retention D    purge audit trail entries after D, whole\n"
    "                         days beyond 30d (0: keep)          [90d]\n"
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
    "  --relay-key NAME[@POOL]:KEY  enrol a gridrelay (its key, Z85 or key\n"
    "                         file) under NAME, in POOL [NAME]; repeatable\n"
    "  --auto-accept          enrol every new agent key at once (labs only)\n"
    "  --allow LIST           allowlist: backend.action,backend.*,... [all]\n"
    "  --insecure             plaintext, no keys, every client is admin:\n"
    "                         only on a trusted, isolated network\n"
    "  keygen                 write a key pair (gridbroker keygen --help)\n"
    "\n"
    "HTTP API (see docs/HTTP.md; off unless --http or http.listen):\n"
    "  --http ADDR:PORT       serve the REST API, /metrics, /healthz and\n"
    "                         /readyz there (127.0.0.1:7780, [::1]:7780)\n"
    "  --http-cert FILE       TLS certificate (PEM); with --http-key: HTTPS\n"
    "  --http-key FILE        TLS private key (PEM)\n"
    "  --http-insecure        allow plain HTTP on a non-loopback address\n"
    "                         (a trusted network only)\n"
    "\n"
    "  --print-config         print the settings as they would be used, each\n"
    "                         with where it came from (flag, file, default)\n"
    "  --version              print the version\n"
    "  -h, --help             this text\n"
    "\n"
    "EP is a ZeroMQ endpoint (tcp://127.0.0.1:7701, ipc:///run/grid/client).\n"
    "D is a duration: 500ms, 10s, 30m, 1h30m.\n"
    "SIGHUP reads the config file and flags again, keeping every session:\n"
    "client keys, relays, allowlist, auto_accept, log level and verbose\n"
    "change at once.\n";

//  A mistake on the command line (proto/cmdline.h): exit 2.
static int
s_bad (const char *format, const char *value)
{
    return cmdline_usage_error (stderr, "gridbroker", NULL, format, value);
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

//  The options, getopt_long style (as gridagent and gridcli: --name VALUE
//  or --name=VALUE, -h, --help, --version, --config FILE).
enum {
    S_OPT_CONFIG = 256, S_OPT_DATA_DIR, S_OPT_CLIENT, S_OPT_AGENTS,
    S_OPT_PUBLISH, S_OPT_HEARTBEAT, S_OPT_MISSED, S_OPT_GRACE_OFFLINE,
    S_OPT_MAX_CONCURRENT, S_OPT_MAX_PENDING, S_OPT_ACK_TIMEOUT,
    S_OPT_ACK_RESENDS, S_OPT_TASK_TIMEOUT, S_OPT_GRACE, S_OPT_RETRY_BASE,
    S_OPT_RETRY_CAP, S_OPT_LEASE, S_OPT_RETENTION, S_OPT_STORE_MAX, S_OPT_MAP_MB,
    S_OPT_MAX_MAP_MB, S_OPT_VERBOSE, S_OPT_LOG_LEVEL, S_OPT_LOG_FORMAT,
    S_OPT_KEY, S_OPT_CLIENT_KEY, S_OPT_RELAY_KEY, S_OPT_AUTO_ACCEPT,
    S_OPT_ALLOW,
    S_OPT_INSECURE, S_OPT_VERSION, S_OPT_PRINT_CONFIG, S_OPT_HTTP,
    S_OPT_HTTP_CERT, S_OPT_HTTP_KEY, S_OPT_HTTP_INSECURE,
    S_OPT_AUDIT_RETENTION, S_OPT_END
};

static const struct option s_options [] = {
    {"config", required_argument, NULL, S_OPT_CONFIG},
    {"data-dir", required_argument, NULL, S_OPT_DATA_DIR},
    {"client", required_argument, NULL, S_OPT_CLIENT},
    {"agents", required_argument, NULL, S_OPT_AGENTS},
    {"publish", required_argument, NULL, S_OPT_PUBLISH},
    {"heartbeat", required_argument, NULL, S_OPT_HEARTBEAT},
    {"missed-heartbeats", required_argument, NULL, S_OPT_MISSED},
    {"offline-grace", required_argument, NULL, S_OPT_GRACE_OFFLINE},
    {"max-concurrent", required_argument, NULL, S_OPT_MAX_CONCURRENT},
    {"max-pending", required_argument, NULL, S_OPT_MAX_PENDING},
    {"ack-timeout", required_argument, NULL, S_OPT_ACK_TIMEOUT},
    {"ack-resends", required_argument, NULL, S_OPT_ACK_RESENDS},
    {"task-timeout", required_argument, NULL, S_OPT_TASK_TIMEOUT},
    {"grace", required_argument, NULL, S_OPT_GRACE},
    {"retry-base", required_argument, NULL, S_OPT_RETRY_BASE},
    {"retry-cap", required_argument, NULL, S_OPT_RETRY_CAP},
    {"lease", required_argument, NULL, S_OPT_LEASE},
    {"retention", required_argument, NULL, S_OPT_RETENTION},
    {"audit-retention", required_argument, NULL, S_OPT_AUDIT_RETENTION},
    {"store-max-size", required_argument, NULL, S_OPT_STORE_MAX},
    {"map-size-mb", required_argument, NULL, S_OPT_MAP_MB},
    {"max-map-size-mb", required_argument, NULL, S_OPT_MAX_MAP_MB},
    {"verbose", no_argument, NULL, S_OPT_VERBOSE},
    {"log-level", required_argument, NULL, S_OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, S_OPT_LOG_FORMAT},
    {"key", required_argument, NULL, S_OPT_KEY},
    {"client-key", required_argument, NULL, S_OPT_CLIENT_KEY},
    {"relay-key", required_argument, NULL, S_OPT_RELAY_KEY},
    {"auto-accept", no_argument, NULL, S_OPT_AUTO_ACCEPT},
    {"allow", required_argument, NULL, S_OPT_ALLOW},
    {"insecure", no_argument, NULL, S_OPT_INSECURE},
    {"version", no_argument, NULL, S_OPT_VERSION},
    {"print-config", no_argument, NULL, S_OPT_PRINT_CONFIG},
    {"http", required_argument, NULL, S_OPT_HTTP},
    {"http-cert", required_argument, NULL, S_OPT_HTTP_CERT},
    {"http-key", required_argument, NULL, S_OPT_HTTP_KEY},
    {"http-insecure", no_argument, NULL, S_OPT_HTTP_INSECURE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}
};

//  Applies one option to CONFIG. Returns 0, or 2 after printing why.
static int
s_apply (broker_config_t *config, int option, const char *flag,
         const char *value)
{
    int64_t number = 0;
    char err [1024];
    switch (option) {
        case S_OPT_CONFIG:
            return 0;   //  Read before every other option
        case S_OPT_DATA_DIR: s_set (&config->data_dir, value); return 0;
        case S_OPT_CLIENT: s_set (&config->client_ep, value); return 0;
        case S_OPT_AGENTS: s_set (&config->agents_ep, value); return 0;
        case S_OPT_PUBLISH: s_set (&config->publish_ep, value); return 0;
        case S_OPT_KEY: s_set (&config->auth.key_file, value); return 0;
        case S_OPT_VERBOSE: config->verbose = true; return 0;
        case S_OPT_INSECURE: config->auth.insecure = true; return 0;
        case S_OPT_AUTO_ACCEPT: config->auth.auto_accept = true; return 0;
        case S_OPT_HTTP: s_set (&config->http.listen, value); return 0;
        case S_OPT_HTTP_CERT: s_set (&config->http.cert, value); return 0;
        case S_OPT_HTTP_KEY: s_set (&config->http.key, value); return 0;
        case S_OPT_HTTP_INSECURE: config->http.insecure = true; return 0;
        case S_OPT_LOG_LEVEL:
        case S_OPT_LOG_FORMAT: {
            bool level = option == S_OPT_LOG_LEVEL;
            if (log_check (level ? value : NULL, level ? NULL : value, err,
                           sizeof err) != 0) {
                fprintf (stderr, "gridbroker: %s: %s\n", flag, err);
                return 2;
            }
            s_set (level ? &config->log_level : &config->log_format, value);
            return 0;
        }
        case S_OPT_RELAY_KEY:
            if (relays_config_add (&config->relays, value, err, sizeof err)
                != 0) {
                fprintf (stderr, "gridbroker: %s\n", err);
                return 2;
            }
            return 0;
        case S_OPT_CLIENT_KEY:
        case S_OPT_ALLOW:
            if ((option == S_OPT_ALLOW
                     ? auth_config_set_allow (&config->auth, value, err,
                                              sizeof err)
                     : auth_config_add_client (&config->auth, value, err,
                                               sizeof err)) != 0) {
                fprintf (stderr, "gridbroker: %s\n", err);
                return 2;
            }
            return 0;
        case S_OPT_HEARTBEAT:
            return s_duration (flag, value, &config->heartbeat_ms) ? 2 : 0;
        case S_OPT_GRACE_OFFLINE:
            return s_duration (flag, value, &config->offline_grace_ms) ? 2 : 0;
        case S_OPT_MISSED:
            return s_count (flag, value, 1, &config->missed_heartbeats) ? 2 : 0;
        case S_OPT_MAX_CONCURRENT:
            if (s_count (flag, value, 1, &number))
                return 2;
            config->sched.max_concurrent = (size_t) number;
            return 0;
        case S_OPT_MAX_PENDING:
            if (s_count (flag, value, 0, &number))
                return 2;
            config->sched.max_pending = (size_t) number;
            return 0;
        case S_OPT_ACK_TIMEOUT:
            return s_duration (flag, value, &config->sched.ack_timeout_ms) ? 2 : 0;
        case S_OPT_ACK_RESENDS:
            if (s_count (flag, value, 0, &number))
                return 2;
            config->sched.ack_resends = (uint32_t) number;
            return 0;
        case S_OPT_TASK_TIMEOUT:
            return s_duration (flag, value, &config->sched.default_timeout_ms) ? 2 : 0;
        case S_OPT_GRACE:
            return s_duration (flag, value, &config->sched.grace_ms) ? 2 : 0;
        case S_OPT_RETRY_BASE:
            return s_duration (flag, value, &config->sched.retry_base_ms) ? 2 : 0;
        case S_OPT_RETRY_CAP:
            return s_duration (flag, value, &config->sched.retry_cap_ms) ? 2 : 0;
        case S_OPT_LEASE:
            return s_duration (flag, value, &config->sched.lease_ms) ? 2 : 0;
        case S_OPT_RETENTION:
            return s_duration (flag, value, &config->retention_ms) ? 2 : 0;
        case S_OPT_AUDIT_RETENTION:
            if (broker_audit_retention_parse (value,
                                              &config->audit_retention_ms)) {
                fprintf (stderr, "gridbroker: %s: '%s' is not a duration "
                         "(like 12h or 90d; whole days up to %dd; 0 keeps "
                         "entries for ever)\n", flag, value,
                         BROKER_AUDIT_RETENTION_DAYS_MAX);
                return 2;
            }
            return 0;
        case S_OPT_MAP_MB:
            if (s_count (flag, value, 1, &number))
                return 2;
            config->map_bytes = (size_t) number << 20;
            return 0;
        case S_OPT_STORE_MAX: {
            uint64_t bytes = 0;
            if (conf_size_parse (value, &bytes) != 0 || bytes < (1 << 20)
                || bytes > SIZE_MAX) {
                fprintf (stderr, "gridbroker: --store-max-size: '%s' is not "
                         "a size of at least 1MiB (like 512MiB, 8GiB)\n",
                         value);
                return 2;
            }
            config->max_map_bytes = (size_t) bytes;
            return 0;
        }
        case S_OPT_MAX_MAP_MB:
            if (s_count (flag, value, 1, &number))
                return 2;
            config->max_map_bytes = (size_t) number << 20;
            return 0;
        default:
            return 0;
    }
}

//  A size in bytes as the config reads it ("8GiB", "640MiB", "4096").
static void
s_size_text (size_t bytes, char *buf, size_t buf_len)
{
    if (bytes && bytes % ((size_t) 1 << 30) == 0)
        snprintf (buf, buf_len, "%zuGiB", bytes >> 30);
    else if (bytes && bytes % ((size_t) 1 << 20) == 0)
        snprintf (buf, buf_len, "%zuMiB", bytes >> 20);
    else
        snprintf (buf, buf_len, "%zu", bytes);
}

//  --print-config: every setting as the broker will use it, as YAML that
//  reads back as a config file, each with where it came from.
static void
s_print_config (const broker_config_t *config, const bool *given,
                const char *config_file)
{
    pv_doc_t *doc = NULL;
    char err [512];
    if (config_file && strcmp (config_file, "none") != 0)
        conf_load_file (config_file, &doc, err, sizeof err);
    conf_origin_t origin = {stdout, doc ? pv_doc_root (doc) : NULL,
                            config_file};
    const conf_origin_t *o = &origin;
    printf ("# gridbroker %s: flags over %s over the defaults\n",
            GRID_VERSION, doc ? config_file : "(no config file)");
#define S_GIVEN(option) given [(option) - S_OPT_CONFIG]
    conf_print_setting (o, "data_dir", config->data_dir, true, "--data-dir",
                        S_GIVEN (S_OPT_DATA_DIR));
    conf_print_setting (o, "client", config->client_ep, true, "--client",
                        S_GIVEN (S_OPT_CLIENT));
    conf_print_setting (o, "agents", config->agents_ep, true, "--agents",
                        S_GIVEN (S_OPT_AGENTS));
    conf_print_setting (o, "publish", config->publish_ep, true, "--publish",
                        S_GIVEN (S_OPT_PUBLISH));
    conf_print_duration (o, "heartbeat", config->heartbeat_ms, "--heartbeat",
                         S_GIVEN (S_OPT_HEARTBEAT));
    conf_print_int (o, "missed_heartbeats", config->missed_heartbeats,
                    "--missed-heartbeats", S_GIVEN (S_OPT_MISSED));
    conf_print_duration (o, "offline_grace", config->offline_grace_ms,
                         "--offline-grace", S_GIVEN (S_OPT_GRACE_OFFLINE));
    conf_print_duration (o, "last_seen_save", config->last_seen_save_ms,
                         NULL, false);
    conf_print_int (o, "max_concurrent", (int64_t) config->sched.max_concurrent,
                    "--max-concurrent", S_GIVEN (S_OPT_MAX_CONCURRENT));
    conf_print_int (o, "max_pending", (int64_t) config->sched.max_pending,
                    "--max-pending", S_GIVEN (S_OPT_MAX_PENDING));
    conf_print_duration (o, "ack_timeout", config->sched.ack_timeout_ms,
                         "--ack-timeout", S_GIVEN (S_OPT_ACK_TIMEOUT));
    conf_print_int (o, "ack_resends", config->sched.ack_resends,
                    "--ack-resends", S_GIVEN (S_OPT_ACK_RESENDS));
    conf_print_duration (o, "task_timeout", config->sched.default_timeout_ms,
                         "--task-timeout", S_GIVEN (S_OPT_TASK_TIMEOUT));
    conf_print_duration (o, "grace", config->sched.grace_ms, "--grace",
                         S_GIVEN (S_OPT_GRACE));
    conf_print_duration (o, "retry_base", config->sched.retry_base_ms,
                         "--retry-base", S_GIVEN (S_OPT_RETRY_BASE));
    conf_print_duration (o, "retry_cap", config->sched.retry_cap_ms,
                         "--retry-cap", S_GIVEN (S_OPT_RETRY_CAP));
    conf_print_duration (o, "lease", config->sched.lease_ms, "--lease",
                         S_GIVEN (S_OPT_LEASE));
    char size [32];
    s_size_text (config->max_map_bytes, size, sizeof size);
    conf_print_setting (o, "store.max_size", size, true, "--store-max-size",
                        S_GIVEN (S_OPT_STORE_MAX) || S_GIVEN (S_OPT_MAX_MAP_MB));
    s_size_text (config->map_bytes, size, sizeof size);
    conf_print_setting (o, "store.initial_size", size, true, "--map-size-mb",
                        S_GIVEN (S_OPT_MAP_MB));
    s_size_text ((size_t) config->max_output, size, sizeof size);
    conf_print_setting (o, "results.max_output", size, true, NULL, false);
    conf_print_int (o, "results.output_rate", config->output_rate, NULL,
                    false);
    s_size_text ((size_t) config->blob_max_size, size, sizeof size);
    conf_print_setting (o, "blobs.max_size", size, true, NULL, false);
    conf_print_duration (o, "blobs.retention", config->blob_retention_ms, NULL,
                         false);
    char inflight [16];
    snprintf (inflight, sizeof inflight, "%u", config->blob_max_inflight);
    conf_print_setting (o, "blobs.max_inflight", inflight, false, NULL, false);
    conf_print_duration (o, "retention", config->retention_ms, "--retention",
                         S_GIVEN (S_OPT_RETENTION));
    conf_print_duration (o, "dlq_retention", config->dlq_retention_ms, NULL,
                         false);
    conf_print_duration (o, "audit_retention", config->audit_retention_ms,
                         "--audit-retention", S_GIVEN (S_OPT_AUDIT_RETENTION));
    conf_print_setting (o, "verbose", config->verbose ? "true" : "false",
                        false, "--verbose", S_GIVEN (S_OPT_VERBOSE));
    conf_print_setting (o, "log_level",
                        config->log_level ? config->log_level : "info", true,
                        "--log-level", S_GIVEN (S_OPT_LOG_LEVEL));
    conf_print_setting (o, "log_format",
                        config->log_format ? config->log_format : "text", true,
                        "--log-format", S_GIVEN (S_OPT_LOG_FORMAT));
    const auth_config_t *auth = &config->auth;
    conf_print_setting (o, "key", auth->key_file ? auth->key_file
                                                 : KEYS_DEFAULT_BROKER_KEY,
                        true, "--key", S_GIVEN (S_OPT_KEY));
    conf_print_setting (o, "insecure", auth->insecure ? "true" : "false",
                        false, "--insecure", S_GIVEN (S_OPT_INSECURE));
    conf_print_setting (o, "auto_accept", auth->auto_accept ? "true" : "false",
                        false, "--auto-accept", S_GIVEN (S_OPT_AUTO_ACCEPT));
    conf_print_int (o, "max_pending_keys", (int64_t) auth->max_pending_keys,
                    NULL, false);
    conf_print_setting (o, "rekey", auth->rekey == AUTH_REKEY_MANUAL
                                        ? "manual" : "auto",
                        true, NULL, false);
    //  Lists in YAML's flow form
    char list [4096];
    size_t used = (size_t) snprintf (list, sizeof list, "[");
    for (size_t index = 0; index < auth->client_count && used < sizeof list;
         index++) {
        const auth_client_t *client = &auth->clients [index];
        used += (size_t) snprintf (list + used, sizeof list - used,
                                   "%s{ key: \"%s\", role: %s%s%s }",
                                   index ? ", " : "", client->key,
                                   auth_role_name (client->role),
                                   client->name ? ", name: " : "",
                                   client->name ? client->name : "");
    }
    if (used < sizeof list)
        snprintf (list + used, sizeof list - used, "]");
    conf_print_setting (o, "clients", list, false, "--client-key",
                        S_GIVEN (S_OPT_CLIENT_KEY));
    used = (size_t) snprintf (list, sizeof list, "[");
    for (size_t index = 0; index < config->relays.count && used < sizeof list;
         index++) {
        const relays_entry_t *relay = &config->relays.entries [index];
        used += (size_t) snprintf (list + used, sizeof list - used,
                                   "%s{ key: \"%s\", name: %s, pool: %s }",
                                   index ? ", " : "", relay->key, relay->name,
                                   relay->pool);
    }
    if (used < sizeof list)
        snprintf (list + used, sizeof list - used, "]");
    conf_print_setting (o, "relays", list, false, "--relay-key",
                        S_GIVEN (S_OPT_RELAY_KEY));
    used = (size_t) snprintf (list, sizeof list, "[");
    for (size_t index = 0; index < auth->allow_count && used < sizeof list;
         index++)
        used += (size_t) snprintf (list + used, sizeof list - used, "%s%s",
                                   index ? ", " : "", auth->allow [index]);
    if (used < sizeof list)
        snprintf (list + used, sizeof list - used, "]");
    conf_print_setting (o, "allow", auth->allow_count ? list : "null", false,
                        "--allow", S_GIVEN (S_OPT_ALLOW));
    //  limits: {PATTERN: N, ..., per_node: {PATTERN: N, ...}} in flow style
    used = (size_t) snprintf (list, sizeof list, "{");
    size_t fleet = 0;
    for (size_t index = 0; index < config->limit_count && used < sizeof list;
         index++)
        if (!config->limits [index].per_node)
            used += (size_t) snprintf (list + used, sizeof list - used,
                                       "%s\"%s\": %" PRIu32,
                                       fleet++ ? ", " : "",
                                       config->limits [index].pattern,
                                       config->limits [index].max);
    size_t per_node = 0;
    for (size_t index = 0; index < config->limit_count && used < sizeof list;
         index++)
        if (config->limits [index].per_node)
            used += (size_t) snprintf (list + used, sizeof list - used,
                                       "%s\"%s\": %" PRIu32,
                                       per_node++ ? ", "
                                       : fleet ? ", per_node: {"
                                               : "per_node: {",
                                       config->limits [index].pattern,
                                       config->limits [index].max);
    if (used < sizeof list)
        snprintf (list + used, sizeof list - used, "%s}",
                  per_node ? "}" : "");
    conf_print_setting (o, "limits", list, false, NULL, false);
    const http_config_t *http = &config->http;
    conf_print_setting (o, "http.listen", http->listen ? http->listen : "null",
                        http->listen != NULL, "--http", S_GIVEN (S_OPT_HTTP));
    conf_print_setting (o, "http.insecure", http->insecure ? "true" : "false",
                        false, "--http-insecure",
                        S_GIVEN (S_OPT_HTTP_INSECURE));
    conf_print_setting (o, "http.cert", http->cert ? http->cert : "null",
                        http->cert != NULL, "--http-cert",
                        S_GIVEN (S_OPT_HTTP_CERT));
    conf_print_setting (o, "http.key", http->key ? http->key : "null",
                        http->key != NULL, "--http-key",
                        S_GIVEN (S_OPT_HTTP_KEY));
    conf_print_setting (o, "http.metrics_public",
                        http->metrics_public ? "true" : "false", false, NULL,
                        false);
    s_size_text ((size_t) http->max_body, size, sizeof size);
    conf_print_setting (o, "http.max_body", size, true, NULL, false);
    conf_print_duration (o, "http.idle_timeout", http->idle_timeout_ms, NULL,
                         false);
    conf_print_int (o, "http.max_connections_per_ip",
                    http->max_connections_per_ip, NULL, false);
    const tracing_config_t *tracing = &config->tracing;
    conf_print_setting (o, "tracing.otlp_endpoint",
                        tracing->otlp_endpoint ? tracing->otlp_endpoint
                                               : "null",
                        tracing->otlp_endpoint != NULL, NULL, false);
    conf_print_setting (o, "tracing.service_name",
                        tracing->service_name ? tracing->service_name
                                              : OTLP_DEFAULT_SERVICE,
                        true, NULL, false);
    conf_print_int (o, "tracing.batch_size", tracing->batch_size, NULL,
                    false);
    conf_print_duration (o, "tracing.batch_delay", tracing->batch_delay_ms,
                         NULL, false);
    conf_print_duration (o, "tracing.timeout", tracing->timeout_ms, NULL,
                         false);
    conf_print_int (o, "tracing.queue_size", tracing->queue_size, NULL,
                    false);
    const cluster_config_t *cluster = &config->cluster;
    conf_print_setting (o, "ha.cluster",
                        cluster->cluster ? cluster->cluster : "null",
                        cluster->cluster != NULL, NULL, false);
    conf_print_setting (o, "ha.name", cluster->name ? cluster->name : "null",
                        cluster->name != NULL, NULL, false);
    conf_print_setting (o, "ha.etcd", cluster->etcd ? cluster->etcd : "null",
                        cluster->etcd != NULL, NULL, false);
    conf_print_duration (o, "ha.ttl", cluster->ttl_ms, NULL, false);
    conf_print_setting (o, "ha.replicate",
                        cluster->replicate ? cluster->replicate : "null",
                        cluster->replicate != NULL, NULL, false);
    conf_print_duration (o, "ha.sync_timeout", cluster->sync_timeout_ms, NULL,
                         false);
    conf_print_setting (o, "ha.strict", cluster->strict ? "true" : "false",
                        false, NULL, false);
    for (size_t index = 0; index < cluster->peer_count; index++) {
        const cluster_peer_t *peer = &cluster->peers [index];
        char key [64], value [1200];
        snprintf (key, sizeof key, "ha.peers.%zu", index);
        snprintf (value, sizeof value, "%s client %s replicate %s",
                  peer->name, peer->client, peer->replicate);
        conf_print_setting (o, key, value, true, NULL, false);
    }
    //  notify: the webhooks shown without their queries, the secret
    //  never (only whether there is one)
    const notify_config_t *notify = &config->notify;
    used = (size_t) snprintf (list, sizeof list, "[");
    for (size_t index = 0; index < notify->target_count && used < sizeof list;
         index++) {
        char shown [256], on [128] = "";
        notify_url_show (notify->targets [index].url, shown, sizeof shown);
        size_t on_used = 0;
        for (uint32_t bit = 1; bit <= JOB_NOTIFY_TIMEOUT && on_used < sizeof on;
             bit <<= 1)
            if (notify->targets [index].on & bit)
                on_used += (size_t) snprintf (on + on_used, sizeof on - on_used,
                                              "%s%s", on_used ? ", " : "",
                                              job_notify_on_name (bit));
        used += (size_t) snprintf (list + used, sizeof list - used,
                                   "%s{ url: \"%s\", on: [%s] }",
                                   index ? ", " : "", shown, on);
    }
    if (used < sizeof list)
        snprintf (list + used, sizeof list - used, "]");
    conf_print_setting (o, "notify.targets",
                        notify->target_count ? list : "[]", false, NULL, false);
    used = (size_t) snprintf (list, sizeof list, "[");
    for (size_t index = 0; index < notify->allow_count && used < sizeof list;
         index++)
        used += (size_t) snprintf (list + used, sizeof list - used,
                                   "%s\"%s\"", index ? ", " : "",
                                   notify->allow [index]);
    if (used < sizeof list)
        snprintf (list + used, sizeof list - used, "]");
    conf_print_setting (o, "notify.allow", notify->allow_count ? list : "[]",
                        false, NULL, false);
    conf_print_setting (o, "notify.secret",
                        notify->secret ? "(set, not shown)" : "null",
                        notify->secret != NULL, NULL, false);
    conf_print_setting (o, "notify.public_url",
                        notify->public_url ? notify->public_url : "null",
                        notify->public_url != NULL, NULL, false);
    conf_print_duration (o, "notify.timeout", notify->timeout_ms, NULL, false);
    conf_print_duration (o, "notify.retry_base", notify->retry_base_ms, NULL,
                         false);
    conf_print_duration (o, "notify.retry_cap", notify->retry_cap_ms, NULL,
                         false);
    conf_print_duration (o, "notify.retry_for", notify->retry_for_ms, NULL,
                         false);
    conf_print_duration (o, "notify.retention", notify->retention_ms, NULL,
                         false);
    conf_print_int (o, "notify.workers", notify->workers, NULL, false);
#undef S_GIVEN
    pv_doc_destroy (&doc);
}

//  The flag getopt_long just refused, for the error message.
static const char *
s_refused (int argc, char *argv [])
{
    return optind > 0 && optind <= argc ? argv [optind - 1] : "?";
}

//  Reads the whole configuration into CONFIG (which holds the defaults):
//  the config file (--config FILE, else the system's file when there is
//  one; "--config none": no file), then every flag over it, in the order
//  given. GIVEN (may be NULL) marks the options given and *FILE_P (may be
//  NULL) gets the file read. Returns 0; 1 when -h or --version printed
//  what they print; 2 after printing why the configuration is wrong.
static int
s_config_read (broker_config_t *config, int argc, char *argv [],
               bool *given, const char **file_p)
{
    //  First pass: help, version, mistakes and --config, so the file is
    //  read before the flags that override it
    const char *config_file = NULL;
    int option;
    optind = 0;
    opterr = 0;
    while ((option = getopt_long (argc, argv, ":h", s_options, NULL)) != -1) {
        if (option == 'h') {
            fputs (s_usage, stdout);
            return 1;
        }
        if (option == S_OPT_VERSION) {
            cmdline_print_version (stdout, "gridbroker");
            return 1;
        }
        if (option == ':' || option == '?')
            return s_bad (option == ':' ? "option %s needs a value"
                                        : "unknown option '%s'",
                          s_refused (argc, argv));
        if (option == S_OPT_CONFIG)
            config_file = optarg;
    }
    if (optind < argc)
        return s_bad ("unexpected argument '%s'", argv [optind]);
    if (!config_file && access (BROKER_DEFAULT_CONFIG, F_OK) == 0)
        config_file = BROKER_DEFAULT_CONFIG;
    if (file_p)
        *file_p = config_file;
    if (config_file && strcmp (config_file, "none") != 0) {
        char err [1024];
        if (broker_config_load (config, config_file, err, sizeof err) != 0) {
            fprintf (stderr, "gridbroker: %s\n", err);
            return 2;
        }
    }
    //  Second pass: every flag over the file, in the order given
    int rc = 0;
    int index = 0;
    optind = 0;
    while (rc == 0
           && (option = getopt_long (argc, argv, ":h", s_options, &index)) != -1) {
        char flag [64];
        snprintf (flag, sizeof flag, "--%s", s_options [index].name);
        rc = s_apply (config, option, flag, optarg);
        if (given && option >= S_OPT_CONFIG && option < S_OPT_END)
            given [option - S_OPT_CONFIG] = true;
    }
    if (rc == 0 && config->heartbeat_ms < 10) {
        fprintf (stderr, "gridbroker: --heartbeat must be at least 10ms\n");
        rc = 2;
    }
    char why [512];
    if (rc == 0 && http_config_check (&config->http, why, sizeof why) != 0) {
        fprintf (stderr, "gridbroker: %s\n", why);
        rc = 2;
    }
    if (rc == 0 && config->sched.lease_ms < JOB_MIN_LEASE_MS) {
        fprintf (stderr, "gridbroker: --lease must be at least %dms\n",
                 JOB_MIN_LEASE_MS);
        rc = 2;
    }
    if (rc == 0 && config->sched.lease_ms < 2 * config->heartbeat_ms) {
        //  R18: heartbeats renew leases; a shorter one bounces every step
        fprintf (stderr, "gridbroker: lease %" PRId64 "ms is shorter than "
                 "the heartbeats can renew (at least %" PRId64 "ms, twice "
                 "the heartbeat)\n", config->sched.lease_ms,
                 2 * config->heartbeat_ms);
        rc = 2;
    }
    return rc;
}

//  The command line, kept for a reload.
typedef struct {
    int argc;
    char **argv;
} s_args_t;

static int
s_config_reread (broker_config_t *config, void *arg, char *err,
                 size_t err_len)
{
    s_args_t *args = (s_args_t *) arg;
    if (s_config_read (config, args->argc, args->argv, NULL, NULL) == 0)
        return 0;
    snprintf (err, err_len, "the configuration has errors (logged above)");
    return -1;
}

int
main (int argc, char *argv [])
{
    if (argc > 1 && strcmp (argv [1], "keygen") == 0)
        return keys_keygen_main ("gridbroker", KEYS_DEFAULT_DIR, "broker",
                                 argc - 1, argv + 1, stdout, stderr);
    //  SIGHUP is read by the loop (a reload): blocked before any thread
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGHUP);
    if (pthread_sigmask (SIG_BLOCK, &mask, NULL)) {
        fprintf (stderr, "gridbroker: cannot block SIGHUP\n");
        return 1;
    }
    broker_config_t config;
    broker_config_defaults (&config);
    bool given [S_OPT_END - S_OPT_CONFIG] = {false};
    const char *config_file = NULL;
    int rc = s_config_read (&config, argc, argv, given, &config_file);
    if (rc == 0 && given [S_OPT_PRINT_CONFIG - S_OPT_CONFIG]) {
        s_print_config (&config, given, config_file);
        broker_config_clear (&config);
        return 0;
    }
    if (rc != 0) {
        broker_config_clear (&config);
        return rc == 1 ? 0 : rc;
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
    s_args_t args = { argc, argv };
    if (config.cluster.enabled
        && cluster_config_check (&config.cluster, config.auth.insecure, err,
                                 sizeof err) != 0) {
        log_error ("%s", err);
        broker_config_clear (&config);
        return 2;
    }
    if (config.cluster.enabled) {
        //  A member of a broker cluster (cluster.h)
        int code = cluster_run (&config, s_config_reread, &args);
        broker_config_clear (&config);
        return code;
    }
    broker_t *broker = broker_new (&config, err, sizeof err);
    broker_config_clear (&config);
    if (!broker) {
        log_lines (LOG_LEVEL_ERROR, NULL, err);
        return 1;
    }
    if (broker_reload_on_sighup (broker, s_config_reread, &args) != 0)
        log_warn ("cannot catch SIGHUP: %s; a SIGHUP will not reload the "
                  "configuration", strerror (errno));
    broker_run (broker);
    broker_destroy (&broker);
    return 0;
}
