/*  =========================================================================
    config - gridagent's configuration: defaults, the config file, the
    command line, the checks, and the topics a configuration subscribes to
    (config.h)
    =========================================================================
*/
#include "config.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "../proto/cmdline.h"
#include "../proto/conf.h"
#include "../proto/keys.h"
#include "../proto/log.h"
#include "../proto/names.h"
#include "executor.h"

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

static void
s_free_list (char ***list_p, size_t *count_p)
{
    for (size_t index = 0; *list_p && index < *count_p; index++)
        free ((*list_p) [index]);
    free (*list_p);
    *list_p = NULL;
    *count_p = 0;
}

static void
s_free_labels (proto_kv_t **labels_p, size_t *count_p)
{
    for (size_t index = 0; *labels_p && index < *count_p; index++) {
        free ((*labels_p) [index].key);
        free ((*labels_p) [index].value);
    }
    free (*labels_p);
    *labels_p = NULL;
    *count_p = 0;
}

//  s_err, returning -1.
static int
s_err_rc (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
s_err_rc (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
    return -1;
}

//  The comma-separated items of TEXT, trimmed of blanks, empty ones
//  left out: a malloc'd array of malloc'd strings in *LIST_P (free with
//  s_free_list). Returns how many.
static size_t
s_split (const char *text, char ***list_p)
{
    *list_p = NULL;
    size_t count = 0;
    for (const char *at = text; at && *at;) {
        const char *comma = strchr (at, ',');
        size_t len = comma ? (size_t) (comma - at) : strlen (at);
        while (len && isspace ((unsigned char) *at)) {
            at++;
            len--;
        }
        while (len && isspace ((unsigned char) at [len - 1]))
            len--;
        if (len) {
            char **list = (char **) realloc (*list_p,
                                             (count + 2) * sizeof (char *));
            assert (list);
            list [count++] = strndup (at, len);
            list [count] = NULL;
            *list_p = list;
        }
        at = comma ? comma + 1 : NULL;
    }
    return count;
}

static void
s_set_str (char **field, const char *value)
{
    free (*field);
    *field = value ? strdup (value) : NULL;
}

void
agent_config_init (agent_config_t *config)
{
    memset (config, 0, sizeof (*config));
    config->broker = strdup (AGENT_DEFAULT_BROKER);
    config->publish = strdup (AGENT_DEFAULT_PUBLISH);
    config->state_dir = strdup (AGENT_DEFAULT_STATE_DIR);
    config->resolv_conf = strdup (BACKEND_RESOLV_CONF);
    config->concurrency = 1;
    config->output_cap_bytes = EXECUTOR_DEFAULT_CAP_BYTES;
    config->blob_cache_bytes = (uint64_t) 1 << 30;
    config->kill_grace_ms = AGENT_DEFAULT_GRACE_MS;
    config->drain_ms = AGENT_DEFAULT_DRAIN_MS;
    config->progress_ms = AGENT_DEFAULT_PROGRESS_MS;
    config->output_rate = AGENT_DEFAULT_OUTPUT_RATE;
    config->key_file = strdup (KEYS_DEFAULT_AGENT_KEY);
    config->broker_key = strdup (KEYS_DEFAULT_BROKER_KEY);
    config->failover_ms = AGENT_DEFAULT_FAILOVER_MS;
    config->failback_ms = AGENT_DEFAULT_FAILBACK_MS;
    config->facts_ms = AGENT_DEFAULT_FACTS_MS;
}

void
agent_config_clear (agent_config_t *config)
{
    free (config->id);
    s_free_list (&config->groups, &config->group_count);
    s_free_labels (&config->labels, &config->label_count);
    s_free_labels (&config->facts, &config->fact_count);
    free (config->facts_dir);
    free (config->broker);
    free (config->publish);
    free (config->state_dir);
    free (config->config_file);
    free (config->tool_dir);
    s_free_list (&config->disabled, &config->disabled_count);
    free (config->resolv_conf);
    s_free_list (&config->file_roots, &config->file_root_count);
    free (config->key_file);
    free (config->broker_key);
    free (config->log_level);
    free (config->log_format);
    memset (config, 0, sizeof (*config));
}

//  Appends a copy of TEXT to LIST.
static int
s_list_add (char ***list_p, size_t *count_p, const char *text)
{
    char **list = (char **) realloc (*list_p,
                                     (*count_p + 2) * sizeof (char *));
    if (!list)
        return -1;
    *list_p = list;
    list [*count_p] = strdup (text);
    if (!list [*count_p])
        return -1;
    (*count_p)++;
    list [*count_p] = NULL;
    return 0;
}

static int
s_label_add (proto_kv_t **labels_p, size_t *count_p, const char *key,
             const char *value)
{
    proto_kv_t *labels = (proto_kv_t *) realloc (
        *labels_p, (*count_p + 1) * sizeof (proto_kv_t));
    if (!labels)
        return -1;
    *labels_p = labels;
    labels [*count_p].key = strdup (key);
    labels [*count_p].value = strdup (value);
    (*count_p)++;
    return labels [*count_p - 1].key && labels [*count_p - 1].value ? 0 : -1;
}

//  Splits "a,b,c" into a fresh list replacing *LIST_P. Empty items are
//  an error naming WHAT.
static int
s_list_from_csv (const char *text, char ***list_p, size_t *count_p,
                 const char *what, char *err, size_t err_len)
{
    s_free_list (list_p, count_p);
    if (!*text)
        return 0;
    const char *cursor = text;
    while (cursor) {
        const char *comma = strchr (cursor, ',');
        size_t len = comma ? (size_t) (comma - cursor) : strlen (cursor);
        if (len == 0) {
            s_err (err, err_len, "%s: empty item in '%s'", what, text);
            return -1;
        }
        char *item = strndup (cursor, len);
        int rc = item ? s_list_add (list_p, count_p, item) : -1;
        free (item);
        if (rc) {
            s_err (err, err_len, "out of memory");
            return -1;
        }
        cursor = comma ? comma + 1 : NULL;
    }
    return 0;
}

//  Splits "k=v,k2=v2" into fresh labels replacing *LABELS_P.
static int
s_labels_from_csv (const char *text, proto_kv_t **labels_p, size_t *count_p,
                   char *err, size_t err_len)
{
    char **items = NULL;
    size_t item_count = 0;
    s_free_labels (labels_p, count_p);
    if (s_list_from_csv (text, &items, &item_count, "--labels", err,
                         err_len))
        return -1;
    int rc = 0;
    for (size_t index = 0; index < item_count && rc == 0; index++) {
        char *equals = strchr (items [index], '=');
        if (!equals) {
            s_err (err, err_len, "--labels: '%s' is not key=value",
                   items [index]);
            rc = -1;
            break;
        }
        *equals = 0;
        rc = s_label_add (labels_p, count_p, items [index], equals + 1);
        if (rc)
            s_err (err, err_len, "out of memory");
    }
    s_free_list (&items, &item_count);
    return rc;
}

//  A string or integer scalar as fresh text (YAML reads "web: 1" as an
//  integer), else NULL.
static char *
s_pv_text (const pv_t *value)
{
    if (pv_type (value) == PV_STR)
        return pv_strdup (value);
    int64_t number = 0;
    char *text = NULL;
    if (pv_type (value) == PV_INT && pv_get_int (value, &number) == 0
    &&  asprintf (&text, "%lld", (long long) number) < 0)
        text = NULL;
    return text;
}

//  Reads the list of names under KEY of MAP into *LIST_P (replacing it).
static int
s_conf_list (const pv_t *map, const char *key, char ***list_p,
             size_t *count_p, char *err, size_t err_len)
{
    const pv_t *value = pv_map_get (map, key);
    if (!value)
        return 0;
    if (pv_type (value) != PV_ARRAY) {
        s_err (err, err_len, "%s: expected a list, got %s", key,
               pv_type_name (pv_type (value)));
        return -1;
    }
    s_free_list (list_p, count_p);
    for (size_t index = 0; index < pv_size (value); index++) {
        char *text = s_pv_text (pv_array_at (value, index));
        if (!text) {
            s_err (err, err_len, "%s[%zu]: expected a name", key, index);
            return -1;
        }
        int rc = s_list_add (list_p, count_p, text);
        free (text);
        if (rc) {
            s_err (err, err_len, "out of memory");
            return -1;
        }
    }
    return 0;
}

static const char *const s_config_keys [] = {
    "id", "groups", "labels", "broker", "publish", "state_dir",
    "concurrency", "tool_dir", "output_cap_bytes", "disabled_backends",
    "resolv_conf", "kill_grace", "drain", "progress_interval", "output_rate", "verbose", "key", "broker_key", "failover", "failback",
    "insecure", "log_level", "log_format", "facts", "facts_dir",
    "facts_interval", "file", "key_rotate_days", NULL
};

static const char *const s_file_keys [] = { "roots", "blob_cache", NULL };

//  The file: section (roots: a list of directories).
static int
s_conf_file (agent_config_t *config, const pv_t *root, char *err,
             size_t err_len)
{
    const pv_t *file = pv_map_get (root, "file");
    if (!file)
        return 0;
    if (pv_type (file) != PV_MAP) {
        s_err (err, err_len, "file: expected a map, got %s",
               pv_type_name (pv_type (file)));
        return -1;
    }
    char why [512];
    if (conf_check_keys (file, s_file_keys, why, sizeof (why))) {
        s_err (err, err_len, "file: %s", why);
        return -1;
    }
    if (s_conf_list (file, "roots", &config->file_roots,
                     &config->file_root_count, why, sizeof (why))) {
        s_err (err, err_len, "file.%s", why);
        return -1;
    }
    const pv_t *cache = pv_map_get (file, "blob_cache");
    char *text = cache ? pv_strdup (cache) : NULL;
    uint64_t bytes = 0;
    if (cache && (!text || conf_size_parse (text, &bytes) || bytes < 1)) {
        s_err (err, err_len, "file.blob_cache: expected a size like 1GiB "
               "(the most the blob cache keeps)");
        free (text);
        return -1;
    }
    free (text);
    if (cache)
        config->blob_cache_bytes = bytes;
    return 0;
}

//  Applies the keys of ROOT to CONFIG.
static int
s_conf_apply (agent_config_t *config, const pv_t *root, char *err,
              size_t err_len)
{
    if (conf_check_keys (root, s_config_keys, err, err_len))
        return -1;
    if (pv_type (root) != PV_MAP)
        return 0;
    int64_t number = -1;
    if (conf_get_str (root, "id", &config->id, err, err_len)
    ||  conf_get_str (root, "broker", &config->broker, err, err_len)
    ||  conf_get_str (root, "publish", &config->publish, err, err_len)
    ||  conf_get_str (root, "state_dir", &config->state_dir, err, err_len)
    ||  conf_get_str (root, "tool_dir", &config->tool_dir, err, err_len)
    ||  conf_get_str (root, "resolv_conf", &config->resolv_conf, err,
                      err_len)
    ||  conf_get_duration (root, "kill_grace", &config->kill_grace_ms, err,
                           err_len)
    ||  conf_get_duration (root, "drain", &config->drain_ms, err, err_len)
    ||  conf_get_duration (root, "progress_interval", &config->progress_ms,
                           err, err_len)
    ||  conf_get_bool (root, "verbose", &config->verbose, err, err_len)
    ||  conf_get_str (root, "key", &config->key_file, err, err_len)
    ||  conf_get_str (root, "broker_key", &config->broker_key, err, err_len)
    ||  conf_get_duration (root, "failback", &config->failback_ms, err,
                           err_len)
    ||  conf_get_duration (root, "failover", &config->failover_ms, err,
                           err_len)
    ||  conf_get_bool (root, "insecure", &config->insecure, err, err_len)
    ||  conf_get_str (root, "log_level", &config->log_level, err, err_len)
    ||  conf_get_str (root, "log_format", &config->log_format, err, err_len)
    ||  conf_get_str (root, "facts_dir", &config->facts_dir, err, err_len)
    ||  conf_get_duration (root, "facts_interval", &config->facts_ms, err,
                           err_len)
    ||  s_conf_list (root, "groups", &config->groups, &config->group_count,
                     err, err_len)
    ||  s_conf_list (root, "disabled_backends", &config->disabled,
                     &config->disabled_count, err, err_len))
        return -1;
    if (s_conf_file (config, root, err, err_len))
        return -1;
    if (conf_get_int (root, "key_rotate_days", &config->key_rotate_days, err,
                      err_len))
        return -1;
    if (config->key_rotate_days < 0 || config->key_rotate_days > 36500) {
        s_err (err, err_len, "key_rotate_days: expected 0 (never) to 36500");
        return -1;
    }
    if (conf_get_int (root, "concurrency", &number, err, err_len))
        return -1;
    if (number != -1) {
        if (number < 1 || number > AGENT_MAX_CONCURRENCY) {
            s_err (err, err_len, "concurrency: %lld is out of range (1..%d)",
                   (long long) number, AGENT_MAX_CONCURRENCY);
            return -1;
        }
        config->concurrency = (uint32_t) number;
    }
    //  -1 is a value given here (and refused), not "not given"
    number = INT64_MIN;
    if (conf_get_int (root, "output_rate", &number, err, err_len))
        return -1;
    if (number != INT64_MIN) {
        if (number < 0 || number > AGENT_MAX_OUTPUT_RATE) {
            s_err (err, err_len, "output_rate: %lld is out of range "
                   "(0..%d)", (long long) number, AGENT_MAX_OUTPUT_RATE);
            return -1;
        }
        config->output_rate = number;
    }
    number = -1;
    if (conf_get_int (root, "output_cap_bytes", &number, err, err_len))
        return -1;
    if (number != -1) {
        if (number < 2 || number > PROTO_MAX_STREAM) {
            s_err (err, err_len, "output_cap_bytes: %lld is out of range "
                   "(2..%lld)", (long long) number,
                   (long long) PROTO_MAX_STREAM);
            return -1;
        }
        config->output_cap_bytes = (size_t) number;
    }
    const pv_t *labels = pv_map_get (root, "labels");
    if (labels) {
        if (pv_type (labels) != PV_MAP) {
            s_err (err, err_len, "labels: expected a map, got %s",
                   pv_type_name (pv_type (labels)));
            return -1;
        }
        s_free_labels (&config->labels, &config->label_count);
        for (size_t index = 0; index < pv_size (labels); index++) {
            char *key = pv_strdup (pv_map_key_at (labels, index));
            char *value = s_pv_text (pv_map_value_at (labels, index));
            int rc = key && value
                   ? s_label_add (&config->labels, &config->label_count, key,
                                  value) : -1;
            if (rc)
                s_err (err, err_len, "labels.%s: expected a label value",
                       key ? key : "?");
            free (key);
            free (value);
            if (rc)
                return -1;
        }
    }
    const pv_t *facts = pv_map_get (root, "facts");
    if (facts) {
        if (pv_type (facts) != PV_MAP) {
            s_err (err, err_len, "facts: expected a map, got %s",
                   pv_type_name (pv_type (facts)));
            return -1;
        }
        if (pv_size (facts) > FACT_MAX_COUNT) {
            s_err (err, err_len, "facts: %zu facts, at most %d",
                   pv_size (facts), FACT_MAX_COUNT);
            return -1;
        }
        s_free_labels (&config->facts, &config->fact_count);
        for (size_t index = 0; index < pv_size (facts); index++) {
            char *key = pv_strdup (pv_map_key_at (facts, index));
            char *value = s_pv_text (pv_map_value_at (facts, index));
            int rc = -1;
            if (!key || !name_valid (key))
                s_err (err, err_len, "facts: '%s' is not a valid fact name "
                       "(letters, digits, '_' and '-', 1 to %d)",
                       key ? key : "?", NAME_MAX_LEN);
            else
            if (!value || !fact_value_valid (value))
                s_err (err, err_len, "facts.%s: expected a value of 1 to %d "
                       "bytes without control bytes", key,
                       FACT_MAX_VALUE_LEN);
            else
                rc = s_label_add (&config->facts, &config->fact_count, key,
                                  value);
            free (key);
            free (value);
            if (rc)
                return -1;
        }
    }
    return 0;
}

int
agent_config_load (agent_config_t *config, const char *path, char *err,
                   size_t err_len)
{
    pv_doc_t *doc = NULL;
    char why [512];
    if (conf_load_file (path, &doc, err, err_len))
        return -1;
    int rc = s_conf_apply (config, pv_doc_root (doc), why, sizeof (why));
    if (rc)
        s_err (err, err_len, "%s: %s", path, why);
    else
        s_set_str (&config->config_file, path);
    pv_doc_destroy (&doc);
    return rc;
}

//  Parses a whole decimal number in [MIN, MAX].
static int
s_parse_number (const char *text, long long min, long long max,
                long long *out)
{
    char *end = NULL;
    errno = 0;
    long long value = strtoll (text, &end, 10);
    if (errno || !end || end == text || *end || value < min || value > max)
        return -1;
    *out = value;
    return 0;
}

static void
s_usage (FILE *out)
{
    fprintf (out,
"usage: gridagent [options]\n"
"\n"
"Registers this host with a grid broker and runs the actions it is sent.\n"
"Flags override the config file, which overrides the defaults.\n"
"\n"
"  --id ID                 node id (default: the short hostname)\n"
"  --groups G1,G2          groups this node belongs to\n"
"  --labels K=V,K2=V2      labels; dotted values nest (tier=web.dev)\n"
"  --broker ENDPOINT       broker agent endpoint (default %s); a relay's\n"
"                          is the same; several, comma-separated, are\n"
"                          tried in order (failover)\n"
"  --publish ENDPOINT      broker commands endpoint (default %s); one\n"
"                          per --broker endpoint, in the same order\n"
"  --failover DURATION     with several endpoints: not welcomed and\n"
"                          nothing heard for DURATION, the next one\n"
"                          (default 10s); after 1s when the endpoint\n"
"                          refuses connections (nothing listens)\n"
"  --failback DURATION     welcomed on a later endpoint: try the first\n"
"                          ones again every DURATION (+-20%%), and go\n"
"                          back to the first that answers (default 1m;\n"
"                          0: stay)\n"
"  --state-dir DIR         spool directory (default %s)\n"
"  --config FILE           YAML config file (see conf/gridagent.yaml);\n"
"                          default " AGENT_DEFAULT_CONFIG "\n"
"                          when it exists, none: no file\n"
"  --concurrency N         tasks run at once (default 1)\n"
"  --tool-dir DIR          look up programs (apt-get, systemctl, ping)\n"
"                          only in DIR\n"
"  --output-cap BYTES      output kept per stream; past it the first and\n"
"                          last halves (default %d, at most what the\n"
"                          broker keeps)\n"
"  --disable B1,B2         switch these backends off on this node\n"
"  --resolv-conf FILE      file the network backend manages\n"
"                          (default %s)\n"
"  --kill-grace DURATION   SIGTERM to SIGKILL delay for a task (default 5s)\n"
"  --drain DURATION        on shutdown, how long running tasks may finish\n"
"                          (default 5s)\n"
"  --progress-interval D   at most one progress report per running task\n"
"                          this often (default 1s, at least 100ms)\n"
"  --verbose               log every command event (--log-level debug)\n"
"  --log-level LEVEL       error, warn, info (default) or debug\n"
"  --log-format FORMAT     text (default; journal-style under systemd)\n"
"                          or json (one object a line)\n"
"  --key FILE              this agent's key pair\n"
"                          (default " KEYS_DEFAULT_AGENT_KEY ")\n"
"  --broker-key KEY        the broker's public key: a key file or 40\n"
"                          characters of Z85; or one per --broker\n"
"                          endpoint, comma-separated\n"
"                          (default " KEYS_DEFAULT_BROKER_KEY ")\n"
"  --insecure              no CURVE: plaintext, for a broker that runs\n"
"                          --insecure on a trusted network only\n"
"  keygen                  write a key pair (gridagent keygen --help), then\n"
"                          an admin accepts it: gridcli key accept ID\n"
"  rotate-key              rotate this agent's key without an outage: a new\n"
"                          pair beside the key, sent to the running agent\n"
"                          (gridagent rotate-key --help)\n"
"  --print-config          print the settings as they would be used, each\n"
"                          with where it came from (flag, file, default)\n"
"  --version               print the version and exit\n"
"  --help                  print this help and exit\n"
"\n"
"SIGHUP reads the config file and flags again, keeping the session:\n"
"disabled_backends, log_level, verbose and drain change at once.\n",
             AGENT_DEFAULT_BROKER, AGENT_DEFAULT_PUBLISH,
             AGENT_DEFAULT_STATE_DIR, EXECUTOR_DEFAULT_CAP_BYTES,
             BACKEND_RESOLV_CONF);
}

typedef enum {
    S_OPT_ID = 256, S_OPT_GROUPS, S_OPT_LABELS, S_OPT_BROKER, S_OPT_PUBLISH,
    S_OPT_STATE_DIR, S_OPT_CONFIG, S_OPT_CONCURRENCY, S_OPT_TOOL_DIR,
    S_OPT_OUTPUT_CAP, S_OPT_DISABLE, S_OPT_RESOLV_CONF, S_OPT_KILL_GRACE,
    S_OPT_DRAIN, S_OPT_PROGRESS, S_OPT_VERBOSE, S_OPT_VERSION, S_OPT_HELP, S_OPT_KEY,
    S_OPT_BROKER_KEY, S_OPT_INSECURE, S_OPT_LOG_LEVEL, S_OPT_LOG_FORMAT,
    S_OPT_PRINT_CONFIG, S_OPT_FAILOVER, S_OPT_FAILBACK, S_OPT_END
} s_option_t;

static const struct option s_options [] = {
    { "id", required_argument, NULL, S_OPT_ID },
    { "groups", required_argument, NULL, S_OPT_GROUPS },
    { "labels", required_argument, NULL, S_OPT_LABELS },
    { "broker", required_argument, NULL, S_OPT_BROKER },
    { "publish", required_argument, NULL, S_OPT_PUBLISH },
    { "state-dir", required_argument, NULL, S_OPT_STATE_DIR },
    { "config", required_argument, NULL, S_OPT_CONFIG },
    { "concurrency", required_argument, NULL, S_OPT_CONCURRENCY },
    { "tool-dir", required_argument, NULL, S_OPT_TOOL_DIR },
    { "output-cap", required_argument, NULL, S_OPT_OUTPUT_CAP },
    { "disable", required_argument, NULL, S_OPT_DISABLE },
    { "resolv-conf", required_argument, NULL, S_OPT_RESOLV_CONF },
    { "kill-grace", required_argument, NULL, S_OPT_KILL_GRACE },
    { "drain", required_argument, NULL, S_OPT_DRAIN },
    { "progress-interval", required_argument, NULL, S_OPT_PROGRESS },
    { "verbose", no_argument, NULL, S_OPT_VERBOSE },
    { "key", required_argument, NULL, S_OPT_KEY },
    { "broker-key", required_argument, NULL, S_OPT_BROKER_KEY },
    { "failover", required_argument, NULL, S_OPT_FAILOVER },
    { "failback", required_argument, NULL, S_OPT_FAILBACK },
    { "insecure", no_argument, NULL, S_OPT_INSECURE },
    { "log-level", required_argument, NULL, S_OPT_LOG_LEVEL },
    { "log-format", required_argument, NULL, S_OPT_LOG_FORMAT },
    { "print-config", no_argument, NULL, S_OPT_PRINT_CONFIG },
    { "version", no_argument, NULL, S_OPT_VERSION },
    { "help", no_argument, NULL, S_OPT_HELP },
    { NULL, 0, NULL, 0 }
};

//  Applies one flag to CONFIG.
static int
s_apply_flag (agent_config_t *config, int option, const char *value,
              char *err, size_t err_len)
{
    long long number = 0;
    int64_t ms = 0;
    switch (option) {
        case S_OPT_ID: s_set_str (&config->id, value); return 0;
        case S_OPT_BROKER: s_set_str (&config->broker, value); return 0;
        case S_OPT_PUBLISH: s_set_str (&config->publish, value); return 0;
        case S_OPT_STATE_DIR: s_set_str (&config->state_dir, value); return 0;
        case S_OPT_TOOL_DIR: s_set_str (&config->tool_dir, value); return 0;
        case S_OPT_RESOLV_CONF:
            s_set_str (&config->resolv_conf, value);
            return 0;
        case S_OPT_VERBOSE: config->verbose = true; return 0;
        case S_OPT_KEY: s_set_str (&config->key_file, value); return 0;
        case S_OPT_BROKER_KEY: s_set_str (&config->broker_key, value); return 0;
        case S_OPT_LOG_LEVEL: s_set_str (&config->log_level, value); return 0;
        case S_OPT_LOG_FORMAT: s_set_str (&config->log_format, value); return 0;
        case S_OPT_GROUPS:
            return s_list_from_csv (value, &config->groups,
                                    &config->group_count, "--groups", err,
                                    err_len);
        case S_OPT_DISABLE:
            return s_list_from_csv (value, &config->disabled,
                                    &config->disabled_count, "--disable", err,
                                    err_len);
        case S_OPT_LABELS:
            return s_labels_from_csv (value, &config->labels,
                                      &config->label_count, err, err_len);
        case S_OPT_CONCURRENCY:
            if (s_parse_number (value, 1, AGENT_MAX_CONCURRENCY, &number)) {
                s_err (err, err_len, "--concurrency: '%s' is not a number "
                       "from 1 to %d", value, AGENT_MAX_CONCURRENCY);
                return -1;
            }
            config->concurrency = (uint32_t) number;
            return 0;
        case S_OPT_OUTPUT_CAP:
            if (s_parse_number (value, 2, PROTO_MAX_STREAM, &number)) {
                s_err (err, err_len, "--output-cap: '%s' is not a number "
                       "from 2 to %lld", value, (long long) PROTO_MAX_STREAM);
                return -1;
            }
            config->output_cap_bytes = (size_t) number;
            return 0;
        case S_OPT_KILL_GRACE:
        case S_OPT_DRAIN:
        case S_OPT_PROGRESS:
            if (duration_parse (value, &ms)) {
                s_err (err, err_len, "--%s: '%s' is not a duration (like "
                       "500ms, 5s, 1m)", option == S_OPT_DRAIN ? "drain"
                       : option == S_OPT_PROGRESS ? "progress-interval"
                                                  : "kill-grace",
                       value);
                return -1;
            }
            if (option == S_OPT_DRAIN)
                config->drain_ms = ms;
            else
            if (option == S_OPT_PROGRESS)
                config->progress_ms = ms;
            else
                config->kill_grace_ms = ms;
            return 0;
        case S_OPT_FAILOVER:
            if (duration_parse (value, &config->failover_ms)) {
                s_err (err, err_len, "--failover: '%s' is not a duration "
                       "(like 500ms, 5s, 1m)", value);
                return -1;
            }
            return 0;
        case S_OPT_FAILBACK:
            if (duration_parse (value, &config->failback_ms)) {
                s_err (err, err_len, "--failback: '%s' is not a duration "
                       "(like 30s, 1m; 0: never)", value);
                return -1;
            }
            return 0;
        default:
            return 0;
    }
}

//  "[a, b]" of a list, into BUF.
static void
s_flow_list (char *const *items, size_t count, char *buf, size_t buf_len)
{
    size_t used = (size_t) snprintf (buf, buf_len, "[");
    for (size_t index = 0; index < count && used < buf_len; index++)
        used += (size_t) snprintf (buf + used, buf_len - used, "%s%s",
                                   index ? ", " : "", items [index]);
    if (used < buf_len)
        snprintf (buf + used, buf_len - used, "]");
}

//  --print-config: every setting as the agent will use it, each with where
//  it came from. VALUES are the flags given (by option), FILE the config
//  file read or NULL.
static void
s_print_config (const agent_config_t *config, const char *const *values,
                bool verbose, bool insecure, const char *file, FILE *out)
{
    pv_doc_t *doc = NULL;
    char err [512];
    if (file)
        conf_load_file (file, &doc, err, sizeof err);
    conf_origin_t origin = {out, doc ? pv_doc_root (doc) : NULL, file};
    const conf_origin_t *o = &origin;
    fprintf (out, "# gridagent %s: flags over %s over the defaults\n",
             GRID_VERSION, doc ? file : "(no config file)");
#define S_GIVEN(option) (values [(option) - S_OPT_ID] != NULL)
    char text [4096];
    conf_print_setting (o, "id", config->id, true, "--id", S_GIVEN (S_OPT_ID));
    s_flow_list (config->groups, config->group_count, text, sizeof text);
    conf_print_setting (o, "groups", text, false, "--groups",
                        S_GIVEN (S_OPT_GROUPS));
    size_t used = (size_t) snprintf (text, sizeof text, "{");
    for (size_t index = 0; index < config->label_count && used < sizeof text;
         index++)
        used += (size_t) snprintf (text + used, sizeof text - used,
                                   "%s%s: %s", index ? ", " : " ",
                                   config->labels [index].key,
                                   config->labels [index].value);
    if (used < sizeof text)
        snprintf (text + used, sizeof text - used, " }");
    conf_print_setting (o, "labels", text, false, "--labels",
                        S_GIVEN (S_OPT_LABELS));
    used = (size_t) snprintf (text, sizeof text, "{");
    for (size_t index = 0; index < config->fact_count && used < sizeof text;
         index++)
        used += (size_t) snprintf (text + used, sizeof text - used,
                                   "%s%s: %s", index ? ", " : " ",
                                   config->facts [index].key,
                                   config->facts [index].value);
    if (used < sizeof text)
        snprintf (text + used, sizeof text - used, " }");
    conf_print_setting (o, "facts", text, false, NULL, false);
    conf_print_setting (o, "facts_dir", config->facts_dir, true, NULL,
                        false);
    conf_print_duration (o, "facts_interval", config->facts_ms, NULL, false);
    conf_print_setting (o, "broker", config->broker, true, "--broker",
                        S_GIVEN (S_OPT_BROKER));
    conf_print_setting (o, "publish", config->publish, true, "--publish",
                        S_GIVEN (S_OPT_PUBLISH));
    conf_print_duration (o, "failover", config->failover_ms, "--failover",
                         S_GIVEN (S_OPT_FAILOVER));
    conf_print_duration (o, "failback", config->failback_ms, "--failback",
                         S_GIVEN (S_OPT_FAILBACK));
    conf_print_setting (o, "state_dir", config->state_dir, true,
                        "--state-dir", S_GIVEN (S_OPT_STATE_DIR));
    conf_print_int (o, "concurrency", config->concurrency, "--concurrency",
                    S_GIVEN (S_OPT_CONCURRENCY));
    conf_print_setting (o, "tool_dir", config->tool_dir, true, "--tool-dir",
                        S_GIVEN (S_OPT_TOOL_DIR));
    conf_print_int (o, "output_cap_bytes", (int64_t) config->output_cap_bytes,
                    "--output-cap", S_GIVEN (S_OPT_OUTPUT_CAP));
    s_flow_list (config->disabled, config->disabled_count, text, sizeof text);
    conf_print_setting (o, "disabled_backends", text, false, "--disable",
                        S_GIVEN (S_OPT_DISABLE));
    conf_print_setting (o, "resolv_conf", config->resolv_conf, true,
                        "--resolv-conf", S_GIVEN (S_OPT_RESOLV_CONF));
    s_flow_list (config->file_roots, config->file_root_count, text,
                 sizeof text);
    conf_print_setting (o, "file.roots", text, false, NULL, false);
    conf_print_int (o, "file.blob_cache", (int64_t) config->blob_cache_bytes,
                    NULL, false);
    conf_print_duration (o, "kill_grace", config->kill_grace_ms,
                         "--kill-grace", S_GIVEN (S_OPT_KILL_GRACE));
    conf_print_duration (o, "drain", config->drain_ms, "--drain",
                         S_GIVEN (S_OPT_DRAIN));
    conf_print_duration (o, "progress_interval", config->progress_ms,
                         "--progress-interval", S_GIVEN (S_OPT_PROGRESS));
    conf_print_int (o, "output_rate", config->output_rate, NULL, false);
    conf_print_setting (o, "verbose", config->verbose ? "true" : "false",
                        false, "--verbose", verbose);
    conf_print_setting (o, "log_level",
                        config->log_level ? config->log_level : "info", true,
                        "--log-level", S_GIVEN (S_OPT_LOG_LEVEL));
    conf_print_setting (o, "log_format",
                        config->log_format ? config->log_format : "text", true,
                        "--log-format", S_GIVEN (S_OPT_LOG_FORMAT));
    conf_print_int (o, "key_rotate_days", config->key_rotate_days, NULL,
                    false);
    conf_print_setting (o, "key", config->key_file, true, "--key",
                        S_GIVEN (S_OPT_KEY));
    conf_print_setting (o, "broker_key", config->broker_key, true,
                        "--broker-key", S_GIVEN (S_OPT_BROKER_KEY));
    conf_print_setting (o, "insecure", config->insecure ? "true" : "false",
                        false, "--insecure", insecure);
#undef S_GIVEN
    pv_doc_destroy (&doc);
}

int
agent_config_parse (agent_config_t *config, int argc, char *argv [],
                    FILE *out, char *err, size_t err_len)
{
    //  Flags are collected first: the config file they name is read
    //  before them, whatever their order
    const char *values [S_OPT_END - S_OPT_ID];
    memset (values, 0, sizeof (values));
    bool verbose = false;
    bool insecure = false;
    bool print_config = false;
    optind = 0;
    opterr = 0;
    int option;
    while ((option = getopt_long (argc, argv, "h", s_options, NULL)) != -1) {
        if (option == 'h' || option == S_OPT_HELP) {
            s_usage (out);
            return 1;
        }
        if (option == S_OPT_VERSION) {
            cmdline_print_version (out, "gridagent");
            return 1;
        }
        if (option == S_OPT_VERBOSE) {
            verbose = true;
            continue;
        }
        if (option == S_OPT_INSECURE) {
            insecure = true;
            continue;
        }
        if (option == S_OPT_PRINT_CONFIG) {
            print_config = true;
            continue;
        }
        if (option == '?' || option == ':') {
            const char *bad = optind > 0 && optind <= argc
                            ? argv [optind - 1] : "?";
            if (optopt && optopt >= S_OPT_ID)
                s_err (err, err_len, "option %s needs a value", bad);
            else
                s_err (err, err_len, "unknown option '%s'", bad);
            return -2;
        }
        values [option - S_OPT_ID] = optarg;
    }
    if (optind < argc) {
        s_err (err, err_len, "unexpected argument '%s'", argv [optind]);
        return -2;
    }
    //  No --config: the system's file when there is one; "none": no file
    const char *file = values [S_OPT_CONFIG - S_OPT_ID];
    if (!file && access (AGENT_DEFAULT_CONFIG, F_OK) == 0)
        file = AGENT_DEFAULT_CONFIG;
    if (file && strcmp (file, "none") == 0)
        file = NULL;
    if (file && agent_config_load (config, file, err, err_len))
        return -1;
    for (int index = 0; index < S_OPT_END - S_OPT_ID; index++)
        if (values [index] && index + S_OPT_ID != S_OPT_CONFIG
        &&  s_apply_flag (config, index + S_OPT_ID, values [index], err,
                          err_len))
            return -1;
    if (verbose)
        config->verbose = true;
    if (insecure)
        config->insecure = true;
    config->argc = argc;
    config->argv = argv;
    if (agent_config_check (config, err, err_len))
        return -1;
    if (print_config) {
        s_print_config (config, values, verbose, insecure, file, out);
        return 1;
    }
    return 0;
}

//  "a, b, c" of the built-in backend names into BUF.
static void
s_backend_names (char *buf, size_t buf_len)
{
    size_t count = 0, used = 0;
    const backend_ops_t *const *all = backends_all (&count);
    buf [0] = 0;
    for (size_t index = 0; index < count; index++) {
        int wrote = snprintf (buf + used, buf_len - used, "%s%s",
                              index ? ", " : "", all [index]->name);
        if (wrote < 0 || (size_t) wrote >= buf_len - used)
            break;
        used += (size_t) wrote;
    }
}

int
agent_config_check (agent_config_t *config, char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    if (!config->id) {
        char host [HOST_NAME_MAX + 1];
        if (gethostname (host, sizeof (host))) {
            s_err (err, err_len, "cannot read the host name: %s; pass --id",
                   strerror (errno));
            return -1;
        }
        host [HOST_NAME_MAX] = 0;
        host [strcspn (host, ".")] = 0;
        if (!name_valid (host)) {
            s_err (err, err_len, "the host name '%s' is not a valid node "
                   "id: pass --id", name_show (host, strlen (host), show,
                                               sizeof (show)));
            return -1;
        }
        config->id = strdup (host);
    }
    if (!name_valid (config->id)) {
        s_err (err, err_len, "id: '%s' is not a valid node id (letters, "
               "digits, '_' and '-', 1 to %d)",
               name_show (config->id, strlen (config->id), show,
                          sizeof (show)), NAME_MAX_LEN);
        return -1;
    }
    for (size_t index = 0; index < config->group_count; index++) {
        const char *group = config->groups [index];
        if (!name_valid (group)) {
            s_err (err, err_len, "groups: '%s' is not a valid group name",
                   name_show (group, strlen (group), show, sizeof (show)));
            return -1;
        }
        for (size_t other = 0; other < index; other++)
            if (strcmp (config->groups [other], group) == 0) {
                s_err (err, err_len, "groups: '%s' is listed twice", group);
                return -1;
            }
    }
    for (size_t index = 0; index < config->label_count; index++) {
        const proto_kv_t *label = &config->labels [index];
        if (!name_valid (label->key)) {
            s_err (err, err_len, "labels: '%s' is not a valid label key",
                   name_show (label->key, strlen (label->key), show,
                              sizeof (show)));
            return -1;
        }
        if (!name_label_value_valid (label->value)) {
            s_err (err, err_len, "labels: '%s' is not a valid label value "
                   "(names joined by '.')",
                   name_show (label->value, strlen (label->value), show,
                              sizeof (show)));
            return -1;
        }
        for (size_t other = 0; other < index; other++)
            if (strcmp (config->labels [other].key, label->key) == 0) {
                s_err (err, err_len, "labels: key '%s' is given twice",
                       label->key);
                return -1;
            }
    }
    for (size_t index = 0; index < config->disabled_count; index++)
        if (!backend_find (config->disabled [index])) {
            char known [256];
            s_backend_names (known, sizeof (known));
            s_err (err, err_len, "disabled backends: unknown backend '%s' "
                   "(known: %s)",
                   name_show (config->disabled [index],
                              strlen (config->disabled [index]), show,
                              sizeof (show)), known);
            return -1;
        }
    if (log_check (config->log_level, config->log_format, err, err_len))
        return -1;
    if (config->concurrency < 1 || config->concurrency > AGENT_MAX_CONCURRENCY
    ||  config->output_cap_bytes < 2
    ||  config->output_cap_bytes > (size_t) PROTO_MAX_STREAM) {
        s_err (err, err_len, "concurrency or output cap out of range");
        return -1;
    }
    if (config->kill_grace_ms < 0 || config->drain_ms < 0) {
        s_err (err, err_len, "kill grace and drain must not be negative");
        return -1;
    }
    if (config->progress_ms < 100) {
        s_err (err, err_len, "progress_interval must be at least 100ms");
        return -1;
    }
    if (config->facts_ms != 0 && config->facts_ms < 1000) {
        s_err (err, err_len, "facts_interval must be 0 (never) or at least "
               "1s");
        return -1;
    }
    if (!config->broker || !*config->broker || !config->publish
    ||  !*config->publish) {
        s_err (err, err_len, "broker and publish endpoints are required");
        return -1;
    }
    char **brokers = NULL, **publishes = NULL, **keys = NULL;
    size_t broker_count = s_split (config->broker, &brokers);
    size_t publish_count = s_split (config->publish, &publishes);
    size_t key_count = s_split (config->broker_key ? config->broker_key : "",
                                &keys);
    int bad = 0;
    if (!broker_count || broker_count > AGENT_MAX_ENDPOINTS)
        bad = s_err_rc (err, err_len, "broker: 1 to %d endpoints, "
                        "comma-separated", AGENT_MAX_ENDPOINTS);
    else
    if (publish_count != broker_count)
        bad = s_err_rc (err, err_len, "publish: one commands endpoint per "
                        "broker endpoint (%zu given for %zu)", publish_count,
                        broker_count);
    else
    if (!config->insecure && key_count != 1 && key_count != broker_count)
        bad = s_err_rc (err, err_len, "broker_key: one key for every broker "
                        "endpoint, or one per endpoint (%zu given for %zu)",
                        key_count, broker_count);
    else
    if (config->failover_ms < 100)
        bad = s_err_rc (err, err_len, "failover must be at least 100ms");
    if (config->failback_ms != 0 && config->failback_ms < 1000)
        bad = s_err_rc (err, err_len, "failback must be 0 (never) or at "
                        "least 1s");
    s_free_list (&brokers, &broker_count);
    s_free_list (&publishes, &publish_count);
    s_free_list (&keys, &key_count);
    if (bad)
        return -1;
    if (!config->state_dir || !*config->state_dir) {
        s_err (err, err_len, "state_dir is required");
        return -1;
    }
    if (!config->resolv_conf || config->resolv_conf [0] != '/') {
        s_err (err, err_len, "resolv_conf must be an absolute path");
        return -1;
    }
    if (config->tool_dir) {
        //  Programs are run by absolute path: make the directory one
        char real [PATH_MAX];
        struct stat info;
        if (!realpath (config->tool_dir, real) || stat (real, &info)
        ||  !S_ISDIR (info.st_mode)) {
            s_err (err, err_len, "tool_dir: '%s' is not a directory",
                   config->tool_dir);
            return -1;
        }
        s_set_str (&config->tool_dir, real);
    }
    //  The file backend's roots: existing directories, made canonical
    //  (the backend compares paths with them as text)
    for (size_t index = 0; index < config->file_root_count; index++) {
        const char *given = config->file_roots [index];
        char real [PATH_MAX];
        struct stat info;
        if (given [0] != '/') {
            s_err (err, err_len, "file.roots: '%s' is not an absolute path",
                   given);
            return -1;
        }
        if (!realpath (given, real) || stat (real, &info)
        ||  !S_ISDIR (info.st_mode)) {
            s_err (err, err_len, "file.roots: '%s' is not a directory",
                   given);
            return -1;
        }
        s_set_str (&config->file_roots [index], real);
    }
    return 0;
}

char **
agent_topics (const agent_config_t *config, size_t *count_p)
{
    char **topics = NULL;
    size_t count = 0;
    char topic [512];
    bool ok = s_list_add (&topics, &count, "all/") == 0;
    for (size_t index = 0; ok && index < config->group_count; index++) {
        snprintf (topic, sizeof (topic), "group/%s/", config->groups [index]);
        ok = s_list_add (&topics, &count, topic) == 0;
    }
    for (size_t index = 0; ok && index < config->label_count; index++) {
        //  Every prefix of the dotted value: tier=web.dev gives
        //  label/tier/web/ and label/tier/web.dev/
        const char *value = config->labels [index].value;
        const char *dot = value;
        while (ok && dot) {
            dot = strchr (dot, '.');
            size_t len = dot ? (size_t) (dot - value) : strlen (value);
            snprintf (topic, sizeof (topic), "label/%s/%.*s/",
                      config->labels [index].key, (int) len, value);
            ok = s_list_add (&topics, &count, topic) == 0;
            if (dot)
                dot++;
        }
    }
    if (ok) {
        snprintf (topic, sizeof (topic), "node/%s/", config->id);
        ok = s_list_add (&topics, &count, topic) == 0;
    }
    if (!ok) {
        s_free_list (&topics, &count);
        return NULL;
    }
    if (count_p)
        *count_p = count;
    return topics;
}

void
agent_topics_free (char ***topics_p)
{
    if (!topics_p || !*topics_p)
        return;
    for (char **topic = *topics_p; *topic; topic++)
        free (*topic);
    free (*topics_p);
    *topics_p = NULL;
}

//  ---------------------------------------------------------------------
//  Lists, for the agent

size_t
agent_config_split (const char *text, char ***list_p)
{
    return s_split (text, list_p);
}

void
agent_config_list_free (char ***list_p, size_t *count_p)
{
    s_free_list (list_p, count_p);
}

int
agent_config_list_add (char ***list_p, size_t *count_p, const char *text)
{
    return s_list_add (list_p, count_p, text);
}

int
agent_config_label_add (proto_kv_t **labels_p, size_t *count_p,
                        const char *key, const char *value)
{
    return s_label_add (labels_p, count_p, key, value);
}


//  ---------------------------------------------------------------------
//  Reloads

static bool
s_text_differs (const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp (a, b) != 0);
}

bool
agent_config_lists_differ (char **a, size_t a_count, char **b, size_t b_count)
{
    if (a_count != b_count)
        return true;
    for (size_t index = 0; index < a_count; index++)
        if (strcmp (a [index], b [index]) != 0)
            return true;
    return false;
}

//  Names the settings of FRESH that differ from RUNNING and need a
//  restart, into TEXT ("" when none).
void
agent_config_restart_only (const agent_config_t *running, const agent_config_t *fresh,
                char *text, size_t text_len)
{
    bool labels = running->label_count != fresh->label_count;
    for (size_t index = 0; !labels && index < running->label_count; index++)
        labels = strcmp (running->labels [index].key,
                         fresh->labels [index].key) != 0
                 || strcmp (running->labels [index].value,
                            fresh->labels [index].value) != 0;
    const struct {
        const char *name;
        bool changed;
    } checks [] = {
        { "id", s_text_differs (running->id, fresh->id) },
        { "groups", agent_config_lists_differ (running->groups, running->group_count,
                                    fresh->groups, fresh->group_count) },
        { "labels", labels },
        { "broker", s_text_differs (running->broker, fresh->broker) },
        { "publish", s_text_differs (running->publish, fresh->publish) },
        { "state_dir", s_text_differs (running->state_dir,
                                       fresh->state_dir) },
        { "concurrency", running->concurrency != fresh->concurrency },
        { "tool_dir", s_text_differs (running->tool_dir, fresh->tool_dir) },
        { "output_cap_bytes",
          running->output_cap_bytes != fresh->output_cap_bytes },
        { "resolv_conf", s_text_differs (running->resolv_conf,
                                         fresh->resolv_conf) },
        { "file.roots", agent_config_lists_differ (running->file_roots,
                                        running->file_root_count,
                                        fresh->file_roots,
                                        fresh->file_root_count) },
        { "kill_grace", running->kill_grace_ms != fresh->kill_grace_ms },
        { "key", s_text_differs (running->key_file, fresh->key_file) },
        { "broker_key", s_text_differs (running->broker_key,
                                        fresh->broker_key) },
        { "insecure", running->insecure != fresh->insecure },
        { "log_format", s_text_differs (running->log_format,
                                        fresh->log_format) },
    };
    size_t used = 0;
    text [0] = 0;
    for (size_t index = 0; index < sizeof checks / sizeof checks [0]; index++)
        if (checks [index].changed && used < text_len)
            used += (size_t) snprintf (text + used, text_len - used, "%s%s",
                                       used ? ", " : "", checks [index].name);
}

bool
agent_config_names_us (const agent_config_t *config, char **nodes,
                       size_t count)
{
    if (!nodes)
        return true;
    for (size_t index = 0; index < count; index++)
        if (strcmp (nodes [index], config->id) == 0)
            return true;
    return false;
}

bool
agent_config_disabled (const agent_config_t *config, const char *name)
{
    for (size_t index = 0; index < config->disabled_count; index++)
        if (strcmp (config->disabled [index], name) == 0)
            return true;
    return false;
}
