/*  =========================================================================
    cli - settings: flags > environment > config file > defaults
    =========================================================================
*/
#include "cli.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/client.h"
#include "../proto/conf.h"
#include "../proto/keys.h"
#include "util.h"

#ifndef GRID_VERSION
#define GRID_VERSION "0.0.0-dev"
#endif

//  The config file's broker_key into *OUT: a string ("A" or "A,B"), or a
//  list of strings, joined with commas (the broker's current and next
//  key). Returns 0, or -1 with "broker_key: ..." in WHY.
static int
s_get_broker_keys (const pv_t *root, char **out, char *why, size_t why_len)
{
    const pv_t *list = pv_map_get (root, "broker_key");
    if (pv_type (list) != PV_ARRAY)
        return conf_get_str (root, "broker_key", out, why, why_len);
    size_t count = pv_size (list);
    if (count == 0 || count > CLIENT_BROKER_KEYS_MAX) {
        snprintf (why, why_len, "broker_key: expected 1 to %d keys, not %zu",
                  CLIENT_BROKER_KEYS_MAX, count);
        return -1;
    }
    char *joined = NULL;
    size_t size = 0;
    FILE *text = open_memstream (&joined, &size);
    if (!text) {
        snprintf (why, why_len, "broker_key: out of memory");
        return -1;
    }
    int rc = 0;
    for (size_t index = 0; index < count && rc == 0; index++) {
        char *key = pv_strdup (pv_array_at (list, index));
        if (!key || !*key || strchr (key, ',')) {
            snprintf (why, why_len, "broker_key: item %zu: expected a key "
                      "file or 40 characters of Z85", index + 1);
            rc = -1;
        }
        else
            fprintf (text, "%s%s", index ? "," : "", key);
        free (key);
    }
    fclose (text);
    if (rc == 0) {
        free (*out);
        *out = joined;
    }
    else
        free (joined);
    return rc;
}

static int
s_settings_load (const char *path, cli_settings_t *settings, char *err,
                 size_t err_len)
{
    pv_doc_t *doc = NULL;
    char why [512] = "";
    if (conf_load_file (path, &doc, why, sizeof why) != 0)
        return cli_fail (err, err_len, "config: %s", why);

    static const char *const known [] = {
        "broker", "output", "request_timeout", "key", "broker_key",
        "insecure", NULL
    };
    const pv_t *root = pv_doc_root (doc);
    char *broker = NULL;
    char *output = NULL;
    int64_t timeout_ms = 0;
    int rc = -1;
    if (pv_type (root) != PV_MAP)
        cli_fail (err, err_len, "config %s: expected a mapping of keys", path);
    else
    if (conf_check_keys (root, known, why, sizeof why)
    ||  conf_get_str (root, "broker", &broker, why, sizeof why)
    ||  conf_get_str (root, "output", &output, why, sizeof why)
    ||  conf_get_str (root, "key", &settings->key_path, why, sizeof why)
    ||  s_get_broker_keys (root, &settings->broker_key, why, sizeof why)
    ||  conf_get_bool (root, "insecure", &settings->insecure, why, sizeof why)
    ||  conf_get_duration (root, "request_timeout", &timeout_ms, why,
                           sizeof why))
        cli_fail (err, err_len, "config %s: %s", path, why);
    else
    if (broker && !*broker)
        cli_fail (err, err_len, "config %s: broker: expected an endpoint such "
                  "as tcp://127.0.0.1:7701", path);
    else
    if (output && !streq (output, "table") && !streq (output, "json"))
        cli_fail (err, err_len, "config %s: output: expected table or json, "
                  "not '%s'", path, output);
    else
    if (pv_map_get (root, "request_timeout") && timeout_ms <= 0)
        cli_fail (err, err_len, "config %s: request_timeout: must be longer "
                  "than 0", path);
    else {
        if (broker) {
            free (settings->broker);
            settings->broker = broker;
            broker = NULL;
        }
        if (output)
            settings->output = streq (output, "json") ? CLI_OUTPUT_JSON
                                                      : CLI_OUTPUT_TABLE;
        if (timeout_ms > 0)
            settings->request_timeout_ms = timeout_ms;
        settings->config_path = cli_strdup (path);
        rc = 0;
    }
    free (broker);
    free (output);
    pv_doc_destroy (&doc);
    return rc;
}

int
cli_settings_resolve (const cli_args_t *args, const char *env_broker,
                      const char *env_config, const char *default_config,
                      cli_settings_t *settings, char *err, size_t err_len)
{
    memset (settings, 0, sizeof *settings);
    settings->output = CLI_OUTPUT_TABLE;
    settings->request_timeout_ms = CLI_DEFAULT_REQUEST_TIMEOUT_MS;

    const char *path = NULL;
    if (args->config)
        path = args->config;
    else
    if (env_config && *env_config)
        path = env_config;
    else
    if (default_config && access (default_config, F_OK) == 0)
        path = default_config;
    if (path && streq (path, "none"))
        path = NULL;             //  --config none: no file at all
    if (path && s_settings_load (path, settings, err, err_len)) {
        cli_settings_clear (settings);
        return -1;
    }

    if (args->broker) {
        free (settings->broker);
        settings->broker = cli_strdup (args->broker);
    }
    else
    if (env_broker && *env_broker) {
        free (settings->broker);
        settings->broker = cli_strdup (env_broker);
    }
    else
    if (!settings->broker)
        settings->broker = cli_strdup (CLI_DEFAULT_BROKER);
    if (args->output_given)
        settings->output = args->output;
    if (args->request_timeout_ms > 0)
        settings->request_timeout_ms = args->request_timeout_ms;
    return 0;
}

void
cli_settings_clear (cli_settings_t *settings)
{
    if (!settings)
        return;
    free (settings->broker);
    free (settings->config_path);
    free (settings->key_path);
    free (settings->broker_key);
    cli_keys_clear (&settings->keys);
    client_destroy (&settings->client);
    memset (settings, 0, sizeof *settings);
}

//  Where a setting came from: its flag, else its environment variable,
//  else the config file (conf_print_setting tells file from default).
static const char *
s_origin (bool flag_given, const char *flag, const char *env_name,
          char *buf, size_t buf_len)
{
    if (flag_given)
        return flag;
    const char *env = env_name ? getenv (env_name) : NULL;
    if (env && *env) {
        snprintf (buf, buf_len, "env %s", env_name);
        return buf;
    }
    return NULL;
}

//  --print-config: the settings gridcli would use, each with where it came
//  from (flag, environment, config file or default).
void
cli_print_config (const cli_args_t *args, const cli_settings_t *settings,
                  FILE *out)
{
    pv_doc_t *doc = NULL;
    char why [512];
    if (settings->config_path)
        conf_load_file (settings->config_path, &doc, why, sizeof why);
    conf_origin_t origin = {out, doc ? pv_doc_root (doc) : NULL,
                            settings->config_path};
    const conf_origin_t *o = &origin;
    fprintf (out, "# gridcli %s: flags over the environment over %s over the "
             "defaults\n", GRID_VERSION,
             settings->config_path ? settings->config_path
                                   : "(no config file)");
    char env [64];
    const char *by = s_origin (args->broker != NULL, "--broker", "GRID_BROKER",
                               env, sizeof env);
    conf_print_setting (o, "broker", settings->broker, true, by, by != NULL);
    conf_print_setting (o, "output", settings->output == CLI_OUTPUT_JSON
                                     ? "json" : "table",
                        true, "--output", args->output_given);
    conf_print_duration (o, "request_timeout", settings->request_timeout_ms,
                         "--request-timeout", args->request_timeout_ms > 0);
    //  The keys as cli_keys_load looks for them
    char dir [512], default_key [600], default_broker [600];
    cli_keys_default_dir (getenv ("HOME"), dir, sizeof dir);
    snprintf (default_key, sizeof default_key, "%s/client.key", dir);
    snprintf (default_broker, sizeof default_broker, "%s/broker.key", dir);
    by = s_origin (args->key != NULL, "--key", "GRID_KEY", env, sizeof env);
    const char *key = args->key ? args->key
                    : by ? getenv ("GRID_KEY")
                    : settings->key_path ? settings->key_path : default_key;
    conf_print_setting (o, "key", key, true, by, by != NULL);
    by = s_origin (args->broker_key != NULL, "--broker-key", "GRID_BROKER_KEY",
                   env, sizeof env);
    const char *broker_key = args->broker_key ? args->broker_key
                           : by ? getenv ("GRID_BROKER_KEY")
                           : settings->broker_key ? settings->broker_key
                           : access (KEYS_DEFAULT_BROKER_KEY, R_OK) == 0
                           ? KEYS_DEFAULT_BROKER_KEY : default_broker;
    conf_print_setting (o, "broker_key", broker_key, true, by, by != NULL);
    conf_print_setting (o, "insecure",
                        args->insecure || settings->insecure ? "true"
                                                             : "false",
                        false, "--insecure", args->insecure);
    pv_doc_destroy (&doc);
}
