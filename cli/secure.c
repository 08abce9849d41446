/*  =========================================================================
    cli - gridcli's keys: which key pair and broker key to use (see cli.h)
    =========================================================================
*/
#include <czmq.h>
#include <stdarg.h>

#include "../client/client.h"
#include "../proto/keys.h"
#include "cli.h"

static int
s_fail (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
s_fail (char *err, size_t err_len, const char *format, ...)
{
    if (err && err_len) {
        va_list args;
        va_start (args, format);
        vsnprintf (err, err_len, format, args);
        va_end (args);
    }
    return -1;
}

//  The first of the candidates that is set and not empty, or NULL.
static const char *
s_first (const char *a, const char *b, const char *c)
{
    if (a && *a)
        return a;
    if (b && *b)
        return b;
    if (c && *c)
        return c;
    return NULL;
}

void
cli_keys_default_dir (const char *home, char *buf, size_t buf_len)
{
    snprintf (buf, buf_len, "%s/.config/grid", home && *home ? home : ".");
}

int
cli_keys_load (const cli_args_t *args, const cli_settings_t *settings,
               const char *env_key, const char *env_broker_key,
               const char *home, cli_keys_t *keys, char *err, size_t err_len)
{
    memset (keys, 0, sizeof *keys);
    if (args->insecure || settings->insecure)
        return 0;
    char dir [512], default_key [600], default_broker [600];
    cli_keys_default_dir (home, dir, sizeof dir);
    snprintf (default_key, sizeof default_key, "%s/client.key", dir);
    char secret [700];
    keys_secret_path (default_key, secret, sizeof secret);
    const char *key_path = s_first (args->key, env_key, settings->key_path);
    if (!key_path && access (secret, F_OK) == 0)
        key_path = default_key;
    if (!key_path)
        return s_fail (err, err_len,
                       "no client key. Create one with 'gridcli keygen' "
                       "(it writes %s), ask the broker's admin to give its "
                       "public key a role (clients: in gridbroker.yaml), and "
                       "pass the broker's public key with --broker-key FILE "
                       "or GRID_BROKER_KEY. Only against a broker that runs "
                       "--insecure, pass --insecure.", default_key);
    const char *broker_key = s_first (args->broker_key, env_broker_key,
                                      settings->broker_key);
    snprintf (default_broker, sizeof default_broker, "%s/broker.key", dir);
    if (!broker_key && access (KEYS_DEFAULT_BROKER_KEY, R_OK) == 0)
        broker_key = KEYS_DEFAULT_BROKER_KEY;
    if (!broker_key && access (default_broker, R_OK) == 0)
        broker_key = default_broker;
    if (!broker_key)
        return s_fail (err, err_len,
                       "no broker public key: pass --broker-key FILE (the "
                       "broker's broker.key) or its 40 characters, or set "
                       "GRID_BROKER_KEY, or copy broker.key to %s or %s",
                       KEYS_DEFAULT_BROKER_KEY, default_broker);
    char why [1024];
    keys->cert = keys_load_pair (key_path, why, sizeof why);
    if (!keys->cert)
        return s_fail (err, err_len, "client key: %s", why);
    _Static_assert (sizeof keys->broker_key >= CLIENT_BROKER_KEYS_SIZE,
                    "room for every broker key");
    if (client_broker_keys_read (broker_key, keys->broker_key, why,
                                 sizeof why) < 0) {
        cli_keys_clear (keys);
        return s_fail (err, err_len, "broker key: %s", why);
    }
    return 0;
}

void
cli_keys_clear (cli_keys_t *keys)
{
    if (!keys)
        return;
    zcert_destroy (&keys->cert);
    memset (keys, 0, sizeof *keys);
}
