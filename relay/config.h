/*  =========================================================================
    config - gridrelay's settings: defaults, the YAML file
    (conf/gridrelay.yaml), the command line and --print-config

    Flags override the config file, which overrides the defaults. Nothing
    here opens a socket or reads a key file (keys are only named).

    Threading: reentrant but for relay_config_parse (getopt's state).
    =========================================================================
*/
#ifndef GRID_RELAY_CONFIG_H
#define GRID_RELAY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define RELAY_DEFAULT_CONFIG GRID_SYSCONFDIR "/grid/gridrelay.yaml"
#define RELAY_DEFAULT_KEY "/etc/grid/keys/relay.key"
#define RELAY_DEFAULT_UPSTREAM_KEY "/etc/grid/keys/broker.key"
#define RELAY_DEFAULT_UPSTREAM_TIMEOUT_MS 15000  //  As agents wait for a broker
#define RELAY_DEFAULT_FAILOVER_MS 10000  //  As an agent's --failover
#define RELAY_DEFAULT_STATE_DIR "/var/lib/grid/relay"

typedef struct {
    char *name;                  //  This relay's name (default: host name)
    char *agents_ep;             //  Downstream agent endpoint (ROUTER, bound)
    char *publish_ep;            //  Downstream commands endpoint (XPUB, bound)
    char *client_ep;             //  Status endpoint (ROUTER, bound), or NULL
    char *upstream_ep;           //  Upstream agent endpoint (connected), or
                                 //  several, comma-separated, in order (a
                                 //  broker cluster's members: upstream.h)
    char *upstream_publish_ep;   //  Upstream commands endpoint (connected),
                                 //  one per upstream endpoint
    char *key_file;              //  Key pair: identity upstream, and the
                                 //  server key downstream
    char *server_key_file;       //  Downstream server key pair instead, or NULL
    char *upstream_key;          //  Upstream's public key (Z85 or key file),
                                 //  or one per upstream endpoint
    char *state_dir;             //  The broker's key rotations are kept
                                 //  here (relay/brokerkeys.h)
    char **client_keys;          //  Keys allowed to ask for status (Z85)
    size_t client_key_count;
    bool insecure;               //  Plaintext on both sides
    int64_t heartbeat_ms;        //  Own heartbeat upstream
    int64_t upstream_timeout_ms; //  Upstream silent this long: lost (ZMTP
                                 //  pings every second), agents dropped
    int64_t failover_ms;         //  With several upstream endpoints: the
                                 //  one in use not serving this long, the
                                 //  next one
    bool verbose;                //  --log-level debug
    char *log_level;             //  NULL: info
    char *log_format;            //  NULL: text
} relay_config_t;

//  Fills CONFIG with the defaults.
void relay_config_init (relay_config_t *config);

//  Frees what CONFIG owns.
void relay_config_clear (relay_config_t *config);

//  Reads a YAML config file (conf/gridrelay.yaml's keys) into CONFIG.
//  Returns 0, or -1 with a sentence in ERR.
int relay_config_load (relay_config_t *config, const char *path, char *err,
                       size_t err_len);

//  Parses the command line (the config file it names, or the default
//  one, first; then the flags), with the conventions of proto/cmdline.h.
//  Returns 0 to run, 1 when it printed what was asked (--help, --version,
//  --print-config) to OUT, -2 with a sentence in ERR for a mistake on the
//  command line (an unknown option), -1 with one for a bad setting.
int relay_config_parse (relay_config_t *config, int argc, char *argv [],
                        FILE *out, char *err, size_t err_len);

#endif
