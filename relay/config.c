/*  =========================================================================
    config - gridrelay's settings (see config.h)
    =========================================================================
*/
#include "config.h"

#include <ctype.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "../proto/cmdline.h"
#include "../proto/conf.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "../proto/names.h"
#include "upstream.h"

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

static void
s_set (char **field, const char *value)
{
    free (*field);
    *field = value ? strdup (value) : NULL;
}

//  ---------------------------------------------------------------------
//  Configuration

void
relay_config_init (relay_config_t *config)
{
    memset (config, 0, sizeof *config);
    char host [HOST_NAME_MAX + 1] = "relay";
    if (gethostname (host, sizeof host) != 0)
        snprintf (host, sizeof host, "relay");
    host [HOST_NAME_MAX] = 0;
    //  A host name's first label, made a grid name
    char name [NAME_MAX_LEN + 1];
    size_t len = 0;
    for (const char *at = host; *at && *at != '.' && len < NAME_MAX_LEN; at++)
        name [len++] = (isalnum ((unsigned char) *at) || *at == '-'
                        || *at == '_') ? *at : '-';
    name [len] = 0;
    config->name = strdup (len ? name : "relay");
    config->agents_ep = strdup ("tcp://127.0.0.1:7712");
    config->publish_ep = strdup ("tcp://127.0.0.1:7713");
    config->upstream_ep = strdup ("tcp://127.0.0.1:7702");
    config->upstream_publish_ep = strdup ("tcp://127.0.0.1:7703");
    config->key_file = strdup (RELAY_DEFAULT_KEY);
    config->upstream_key = strdup (RELAY_DEFAULT_UPSTREAM_KEY);
    config->state_dir = strdup (RELAY_DEFAULT_STATE_DIR);
    config->heartbeat_ms = 5000;
    config->upstream_timeout_ms = RELAY_DEFAULT_UPSTREAM_TIMEOUT_MS;
    config->failover_ms = RELAY_DEFAULT_FAILOVER_MS;
}

void
relay_config_clear (relay_config_t *config)
{
    free (config->name);
    free (config->agents_ep);
    free (config->publish_ep);
    free (config->client_ep);
    free (config->upstream_ep);
    free (config->upstream_publish_ep);
    free (config->key_file);
    free (config->server_key_file);
    free (config->upstream_key);
    free (config->state_dir);
    for (size_t index = 0; index < config->client_key_count; index++)
        free (config->client_keys [index]);
    free (config->client_keys);
    free (config->log_level);
    free (config->log_format);
    memset (config, 0, sizeof *config);
}

static int
s_add_client_key (relay_config_t *config, const char *text, char *err,
                  size_t err_len)
{
    char key [KEYS_TEXT_SIZE], why [512];
    if (keys_read_public (text, key, why, sizeof why) != 0) {
        s_err (err, err_len, "client key: %s", why);
        return -1;
    }
    char **keys = (char **) realloc (config->client_keys,
                                     (config->client_key_count + 1)
                                         * sizeof (char *));
    assert (keys);
    config->client_keys = keys;
    keys [config->client_key_count++] = strdup (key);
    return 0;
}

int
relay_config_load (relay_config_t *config, const char *path, char *err,
                   size_t err_len)
{
    static const char *const known [] = {
        "name", "agents", "publish", "client", "upstream", "upstream_publish",
        "key", "server_key", "upstream_key", "client_keys", "insecure",
        "state_dir",
        "heartbeat", "upstream_timeout", "failover", "verbose", "log_level",
        "log_format", NULL};
    pv_doc_t *doc = NULL;
    char why [600];
    if (conf_load_file (path, &doc, err, err_len) != 0)
        return -1;
    const pv_t *root = pv_doc_root (doc);
    int rc = pv_type (root) == PV_MAP ? 0 : -1;
    if (rc != 0)
        snprintf (why, sizeof why, "expected a map of settings");
    if (rc == 0)
        rc = conf_check_keys (root, known, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (root, "name", &config->name, why, sizeof why)
             || conf_get_str (root, "agents", &config->agents_ep, why,
                              sizeof why)
             || conf_get_str (root, "publish", &config->publish_ep, why,
                              sizeof why)
             || conf_get_str (root, "client", &config->client_ep, why,
                              sizeof why)
             || conf_get_str (root, "upstream", &config->upstream_ep, why,
                              sizeof why)
             || conf_get_str (root, "upstream_publish",
                              &config->upstream_publish_ep, why, sizeof why)
             || conf_get_str (root, "key", &config->key_file, why, sizeof why)
             || conf_get_str (root, "server_key", &config->server_key_file,
                              why, sizeof why)
             || conf_get_str (root, "upstream_key", &config->upstream_key, why,
                              sizeof why)
             || conf_get_bool (root, "insecure", &config->insecure, why,
                               sizeof why)
             || conf_get_str (root, "state_dir", &config->state_dir, why,
                              sizeof why)
             || conf_get_duration (root, "heartbeat", &config->heartbeat_ms,
                                   why, sizeof why)
             || conf_get_duration (root, "upstream_timeout",
                                   &config->upstream_timeout_ms, why,
                                   sizeof why)
             || conf_get_duration (root, "failover", &config->failover_ms,
                                   why, sizeof why)
             || conf_get_bool (root, "verbose", &config->verbose, why,
                               sizeof why)
             || conf_get_str (root, "log_level", &config->log_level, why,
                              sizeof why)
             || conf_get_str (root, "log_format", &config->log_format, why,
                              sizeof why)
                 ? -1 : 0;
    const pv_t *clients = rc == 0 ? pv_map_get (root, "client_keys") : NULL;
    if (clients && pv_type (clients) != PV_ARRAY) {
        snprintf (why, sizeof why, "client_keys: expected a list of keys");
        rc = -1;
    }
    for (size_t index = 0; rc == 0 && clients && index < pv_size (clients);
         index++) {
        char *text = pv_strdup (pv_array_at (clients, index));
        rc = text ? s_add_client_key (config, text, why, sizeof why) : -1;
        if (!text)
            snprintf (why, sizeof why, "client_keys: expected a list of keys");
        free (text);
    }
    pv_doc_destroy (&doc);
    if (rc != 0) {
        s_err (err, err_len, "%s: %s", path, why);
        return -1;
    }
    return 0;
}

static const char *s_usage =
    "usage: gridrelay [options]\n"
    "       gridrelay keygen [--out DIR] [--name NAME] [--force]\n"
    "\n"
    "Stands between agents and the broker: a broker to its agents (the same\n"
    "protocol and endpoints), one connection pair to the broker or to\n"
    "another relay, with each agent's key passed up with its messages.\n"
    "\n"
    "options (flags override --config, which overrides the defaults):\n"
    "  --config FILE          YAML config (see conf/gridrelay.yaml); default\n"
    "                         " RELAY_DEFAULT_CONFIG " when it exists,\n"
    "                         none: no file\n"
    "  --name NAME            this relay's name, for logs [host name]\n"
    "  --agents EP            agent endpoint it binds    [tcp://127.0.0.1:7712]\n"
    "  --publish EP           commands endpoint it binds [tcp://127.0.0.1:7713]\n"
    "  --client EP            status endpoint it binds (gridcli status) [none]\n"
    "  --upstream EP[,EP...]  the broker's (or a relay's) agent endpoint;\n"
    "                         a cluster's members, comma-separated, in order,\n"
    "                         as an agent's --broker [tcp://127.0.0.1:7702]\n"
    "  --broker EP[,EP...]    the same as --upstream (an agent's spelling)\n"
    "  --upstream-publish EP[,EP...]  the commands endpoint, one per\n"
    "                         upstream endpoint    [tcp://127.0.0.1:7703]\n"
    "  --failover D           with several upstream endpoints: the one in\n"
    "                         use not serving this long, the next [10s]\n"
    "  --heartbeat D          own heartbeat to the broker            [5s]\n"
    "  --upstream-timeout D   upstream silent this long: lost, agents\n"
    "                         dropped until it is back               [15s]\n"
    "  --state-dir DIR        where the broker's key rotations are kept\n"
    "                         (made when first needed)\n"
    "                         [" RELAY_DEFAULT_STATE_DIR "]\n"
    "  --verbose              log every peer event (--log-level debug)\n"
    "  --log-level LEVEL      error, warn, info or debug             [info]\n"
    "  --log-format FORMAT    text (journal-style under systemd) or json\n"
    "\n"
    "security (see docs/SECURITY.md; CURVE is on unless --insecure):\n"
    "  --key FILE             this relay's key pair, enrolled on the broker\n"
    "                         as a relay       [" RELAY_DEFAULT_KEY "]\n"
    "  --server-key FILE      the key pair agents see instead (one for a\n"
    "                         pair of relays agents fail over between) [--key]\n"
    "  --upstream-key KEY[,KEY...]  the upstream's public key: a key file\n"
    "                         or 40 characters of Z85; one for all upstream\n"
    "                         endpoints or one each\n"
    "                         [" RELAY_DEFAULT_UPSTREAM_KEY "]\n"
    "  --client-key KEY       a key that may ask for status; repeatable\n"
    "  --insecure             plaintext on both sides: only on a trusted,\n"
    "                         isolated network, with an --insecure broker\n"
    "  keygen                 write a key pair (gridrelay keygen --help)\n"
    "\n"
    "  --print-config         print the settings as they would be used, each\n"
    "                         with where it came from (flag, file, default)\n"
    "  --version              print the version\n"
    "  -h, --help             this text\n"
    "\n"
    "EP is a ZeroMQ endpoint (tcp://0.0.0.0:7702, ipc:///run/grid/agents).\n"
    "D is a duration: 500ms, 10s, 30m.\n";

enum {
    S_OPT_CONFIG = 256, S_OPT_NAME, S_OPT_AGENTS, S_OPT_PUBLISH, S_OPT_CLIENT,
    S_OPT_UPSTREAM, S_OPT_UPSTREAM_PUBLISH, S_OPT_HEARTBEAT,
    S_OPT_UPSTREAM_TIMEOUT, S_OPT_FAILOVER, S_OPT_KEY,
    S_OPT_SERVER_KEY, S_OPT_UPSTREAM_KEY, S_OPT_CLIENT_KEY, S_OPT_LOG_LEVEL,
    S_OPT_LOG_FORMAT, S_OPT_VERBOSE, S_OPT_INSECURE, S_OPT_PRINT_CONFIG,
    S_OPT_VERSION, S_OPT_STATE_DIR, S_OPT_END
};

static const struct option s_options [] = {
    {"config", required_argument, NULL, S_OPT_CONFIG},
    {"name", required_argument, NULL, S_OPT_NAME},
    {"agents", required_argument, NULL, S_OPT_AGENTS},
    {"publish", required_argument, NULL, S_OPT_PUBLISH},
    {"client", required_argument, NULL, S_OPT_CLIENT},
    {"upstream", required_argument, NULL, S_OPT_UPSTREAM},
    {"broker", required_argument, NULL, S_OPT_UPSTREAM},
    {"upstream-publish", required_argument, NULL, S_OPT_UPSTREAM_PUBLISH},
    {"heartbeat", required_argument, NULL, S_OPT_HEARTBEAT},
    {"upstream-timeout", required_argument, NULL, S_OPT_UPSTREAM_TIMEOUT},
    {"failover", required_argument, NULL, S_OPT_FAILOVER},
    {"key", required_argument, NULL, S_OPT_KEY},
    {"server-key", required_argument, NULL, S_OPT_SERVER_KEY},
    {"upstream-key", required_argument, NULL, S_OPT_UPSTREAM_KEY},
    {"client-key", required_argument, NULL, S_OPT_CLIENT_KEY},
    {"log-level", required_argument, NULL, S_OPT_LOG_LEVEL},
    {"log-format", required_argument, NULL, S_OPT_LOG_FORMAT},
    {"verbose", no_argument, NULL, S_OPT_VERBOSE},
    {"insecure", no_argument, NULL, S_OPT_INSECURE},
    {"state-dir", required_argument, NULL, S_OPT_STATE_DIR},
    {"print-config", no_argument, NULL, S_OPT_PRINT_CONFIG},
    {"version", no_argument, NULL, S_OPT_VERSION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}
};

static int
s_apply (relay_config_t *config, int option, const char *value, char *err,
         size_t err_len)
{
    switch (option) {
        case S_OPT_NAME: s_set (&config->name, value); return 0;
        case S_OPT_AGENTS: s_set (&config->agents_ep, value); return 0;
        case S_OPT_PUBLISH: s_set (&config->publish_ep, value); return 0;
        case S_OPT_CLIENT: s_set (&config->client_ep, value); return 0;
        case S_OPT_UPSTREAM: s_set (&config->upstream_ep, value); return 0;
        case S_OPT_UPSTREAM_PUBLISH:
            s_set (&config->upstream_publish_ep, value);
            return 0;
        case S_OPT_KEY: s_set (&config->key_file, value); return 0;
        case S_OPT_SERVER_KEY: s_set (&config->server_key_file, value); return 0;
        case S_OPT_UPSTREAM_KEY: s_set (&config->upstream_key, value); return 0;
        case S_OPT_CLIENT_KEY:
            return s_add_client_key (config, value, err, err_len);
        case S_OPT_STATE_DIR: s_set (&config->state_dir, value); return 0;
        case S_OPT_LOG_LEVEL: s_set (&config->log_level, value); return 0;
        case S_OPT_LOG_FORMAT: s_set (&config->log_format, value); return 0;
        case S_OPT_HEARTBEAT:
            if (duration_parse (value, &config->heartbeat_ms) != 0) {
                s_err (err, err_len, "--heartbeat: '%s' is not a duration "
                       "(like 500ms, 5s)", value);
                return -1;
            }
            return 0;
        case S_OPT_UPSTREAM_TIMEOUT:
            if (duration_parse (value, &config->upstream_timeout_ms) != 0) {
                s_err (err, err_len, "--upstream-timeout: '%s' is not a "
                       "duration (like 15s, 1m)", value);
                return -1;
            }
            return 0;
        case S_OPT_FAILOVER:
            if (duration_parse (value, &config->failover_ms) != 0) {
                s_err (err, err_len, "--failover: '%s' is not a duration "
                       "(like 10s, 1m)", value);
                return -1;
            }
            return 0;
        default:
            return 0;
    }
}

static int
s_check (relay_config_t *config, char *err, size_t err_len)
{
    if (!config->name || !name_valid (config->name)) {
        s_err (err, err_len, "name '%s' is not a name ([A-Za-z0-9_-], 1 to "
               "64)", config->name ? config->name : "");
        return -1;
    }
    if (!config->agents_ep || !*config->agents_ep || !config->publish_ep
        || !*config->publish_ep || !config->upstream_ep
        || !*config->upstream_ep || !config->upstream_publish_ep
        || !*config->upstream_publish_ep) {
        s_err (err, err_len, "the agents, publish, upstream and "
               "upstream_publish endpoints are required");
        return -1;
    }
    if (!config->state_dir || !*config->state_dir) {
        s_err (err, err_len, "state_dir: expected a directory");
        return -1;
    }
    if (config->heartbeat_ms < 100 || config->heartbeat_ms > 3600000) {
        s_err (err, err_len, "heartbeat: expected 100ms to 1h");
        return -1;
    }
    //  Above the ZMTP ping interval (1 s), within what libzmq holds (int)
    if (config->upstream_timeout_ms < 2000
        || config->upstream_timeout_ms > 3600000) {
        s_err (err, err_len, "upstream_timeout: expected 2s to 1h");
        return -1;
    }
    if (config->failover_ms < 500 || config->failover_ms > 3600000) {
        s_err (err, err_len, "failover: expected 500ms to 1h");
        return -1;
    }
    if (relay_upstream_check (config->upstream_ep, config->upstream_publish_ep,
                              config->insecure ? NULL : config->upstream_key,
                              err, err_len) != 0)
        return -1;
    return log_check (config->log_level, config->log_format, err, err_len);
}

static void
s_print_config (const relay_config_t *config, const char *const *values,
                bool verbose, bool insecure, const char *file, FILE *out)
{
    pv_doc_t *doc = NULL;
    char ignored [256];
    if (file)
        conf_load_file (file, &doc, ignored, sizeof ignored);
    conf_origin_t origin = {out, doc ? pv_doc_root (doc) : NULL, file};
    const conf_origin_t *o = &origin;
#define S_GIVEN(option) (values [(option) - S_OPT_CONFIG] != NULL)
    fprintf (out, "# gridrelay %s: config file %s\n", GRID_VERSION,
             file ? file : "(none)");
    conf_print_setting (o, "name", config->name, true, "--name",
                        S_GIVEN (S_OPT_NAME));
    conf_print_setting (o, "agents", config->agents_ep, true, "--agents",
                        S_GIVEN (S_OPT_AGENTS));
    conf_print_setting (o, "publish", config->publish_ep, true, "--publish",
                        S_GIVEN (S_OPT_PUBLISH));
    conf_print_setting (o, "client", config->client_ep ? config->client_ep
                                                       : "",
                        true, "--client", S_GIVEN (S_OPT_CLIENT));
    conf_print_setting (o, "upstream", config->upstream_ep, true,
                        "--upstream", S_GIVEN (S_OPT_UPSTREAM));
    conf_print_setting (o, "upstream_publish", config->upstream_publish_ep,
                        true, "--upstream-publish",
                        S_GIVEN (S_OPT_UPSTREAM_PUBLISH));
    conf_print_duration (o, "heartbeat", config->heartbeat_ms, "--heartbeat",
                         S_GIVEN (S_OPT_HEARTBEAT));
    conf_print_duration (o, "upstream_timeout", config->upstream_timeout_ms,
                         "--upstream-timeout",
                         S_GIVEN (S_OPT_UPSTREAM_TIMEOUT));
    conf_print_duration (o, "failover", config->failover_ms, "--failover",
                         S_GIVEN (S_OPT_FAILOVER));
    conf_print_setting (o, "key", config->key_file, true, "--key",
                        S_GIVEN (S_OPT_KEY));
    conf_print_setting (o, "server_key",
                        config->server_key_file ? config->server_key_file
                                                : "",
                        true, "--server-key", S_GIVEN (S_OPT_SERVER_KEY));
    conf_print_setting (o, "upstream_key", config->upstream_key, true,
                        "--upstream-key", S_GIVEN (S_OPT_UPSTREAM_KEY));
    conf_print_setting (o, "state_dir", config->state_dir, true,
                        "--state-dir", S_GIVEN (S_OPT_STATE_DIR));
    char list [4096];
    size_t used = (size_t) snprintf (list, sizeof list, "[");
    for (size_t index = 0; index < config->client_key_count
                           && used < sizeof list; index++)
        used += (size_t) snprintf (list + used, sizeof list - used,
                                   "%s\"%s\"", index ? ", " : "",
                                   config->client_keys [index]);
    if (used < sizeof list)
        snprintf (list + used, sizeof list - used, "]");
    conf_print_setting (o, "client_keys", list, false, "--client-key",
                        S_GIVEN (S_OPT_CLIENT_KEY));
    conf_print_setting (o, "insecure", config->insecure ? "true" : "false",
                        false, "--insecure", insecure);
    conf_print_setting (o, "verbose", config->verbose ? "true" : "false",
                        false, "--verbose", verbose);
    conf_print_setting (o, "log_level",
                        config->log_level ? config->log_level : "info", true,
                        "--log-level", S_GIVEN (S_OPT_LOG_LEVEL));
    conf_print_setting (o, "log_format",
                        config->log_format ? config->log_format : "text", true,
                        "--log-format", S_GIVEN (S_OPT_LOG_FORMAT));
#undef S_GIVEN
    pv_doc_destroy (&doc);
}

int
relay_config_parse (relay_config_t *config, int argc, char *argv [],
                    FILE *out, char *err, size_t err_len)
{
    //  Flags are collected first: the config file they name is read
    //  before them, whatever their order. --client-key repeats: kept apart.
    const char *values [S_OPT_END - S_OPT_CONFIG];
    memset (values, 0, sizeof values);
    const char **client_keys = (const char **) calloc ((size_t) argc + 1,
                                                       sizeof (char *));
    size_t client_key_count = 0;
    bool verbose = false, insecure = false, print_config = false;
    optind = 0;
    opterr = 0;
    int option, rc = 0;
    while ((option = getopt_long (argc, argv, "h", s_options, NULL)) != -1) {
        if (option == 'h') {
            fputs (s_usage, out);
            free (client_keys);
            return 1;
        }
        if (option == S_OPT_VERSION) {
            cmdline_print_version (out, "gridrelay");
            free (client_keys);
            return 1;
        }
        if (option == S_OPT_VERBOSE)
            verbose = true;
        else
        if (option == S_OPT_INSECURE)
            insecure = true;
        else
        if (option == S_OPT_PRINT_CONFIG)
            print_config = true;
        else
        if (option == '?' || option == ':') {
            const char *bad = optind > 0 && optind <= argc
                            ? argv [optind - 1] : "?";
            if (optopt && optopt >= S_OPT_CONFIG)
                s_err (err, err_len, "option %s needs a value", bad);
            else
                s_err (err, err_len, "unknown option '%s'", bad);
            free (client_keys);
            return -2;
        }
        else {
            if (option == S_OPT_CLIENT_KEY)
                client_keys [client_key_count++] = optarg;
            values [option - S_OPT_CONFIG] = optarg;
        }
    }
    if (optind < argc) {
        s_err (err, err_len, "unexpected argument '%s'", argv [optind]);
        free (client_keys);
        return -2;
    }
    const char *file = values [0];
    if (!file && access (RELAY_DEFAULT_CONFIG, F_OK) == 0)
        file = RELAY_DEFAULT_CONFIG;
    if (file && strcmp (file, "none") == 0)
        file = NULL;
    if (file && relay_config_load (config, file, err, err_len) != 0)
        rc = -1;
    for (int index = 1; rc == 0 && index < S_OPT_END - S_OPT_CONFIG; index++)
        if (values [index] && index + S_OPT_CONFIG != S_OPT_CLIENT_KEY)
            rc = s_apply (config, index + S_OPT_CONFIG, values [index], err,
                          err_len);
    for (size_t index = 0; rc == 0 && index < client_key_count; index++)
        rc = s_apply (config, S_OPT_CLIENT_KEY, client_keys [index], err,
                      err_len);
    free (client_keys);
    if (rc != 0)
        return -1;
    if (verbose)
        config->verbose = true;
    if (insecure)
        config->insecure = true;
    if (s_check (config, err, err_len) != 0)
        return -1;
    if (print_config) {
        s_print_config (config, values, verbose, insecure, file, out);
        return 1;
    }
    return 0;
}
