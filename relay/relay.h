/*  =========================================================================
    relay - gridrelay: a broker to its agents, one connection pair upstream

    Downstream the relay binds what a broker binds for agents: a ROUTER
    (the agent session, proto/PROTOCOL.md section 4) and an XPUB (the
    commands), both CURVE servers with the relay's own key, so an agent
    cannot tell it from a broker. Upstream it connects a DEALER and an
    XSUB to a broker (or to another relay: relays stack), with a key the
    broker enrols as a relay (broker/relays.h).

    Every message of a downstream peer goes upstream with one frame in
    front of its body, the via frame: the peer's CURVE key (Z85, as its
    handshake proved it), then the via frame the peer sent (a relay below
    sends one; an agent none). Every message from upstream carries a via
    frame whose first key names the downstream peer it is for: the relay
    takes that key off and sends the rest on. The relay's own heartbeat
    goes up as [PROTO_RELAY_SELF] [heartbeat]. The relay keeps no job state:
    acks, results and re-sends stay between the agents and the broker.

    Commands: the relay grants each downstream subscription only when the
    subscriber's key was welcomed by the broker for a hello whose topics
    include it (ZMQ_XPUB_MANUAL, as the broker does), and subscribes
    upstream to the union of the topics granted to its live peers, counted:
    the first holder subscribes it, the last one leaving unsubscribes it.
    A broadcast costs the broker one send per relay.

    Upstream loss: the connection closed, or nothing came back for
    upstream_timeout (ZMTP pings every second; 15 s by default, so that a
    broker busy registering thousands of agents is waited for). While the
    relay has no upstream connection it does not serve its agents at all (its downstream endpoints are unbound), so
    their connections drop and they fail over to their next endpoint; it
    binds again once the upstream handshake succeeds.

    Threading: one thread, one zloop.
    =========================================================================
*/
#ifndef GRID_RELAY_H
#define GRID_RELAY_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define RELAY_DEFAULT_CONFIG GRID_SYSCONFDIR "/grid/gridrelay.yaml"
#define RELAY_DEFAULT_KEY "/etc/grid/keys/relay.key"
#define RELAY_DEFAULT_UPSTREAM_KEY "/etc/grid/keys/broker.key"
#define RELAY_DEFAULT_UPSTREAM_TIMEOUT_MS 15000  //  As agents wait for a broker

typedef struct {
    char *name;                  //  This relay's name (default: host name)
    char *agents_ep;             //  Downstream agent endpoint (ROUTER, bound)
    char *publish_ep;            //  Downstream commands endpoint (XPUB, bound)
    char *client_ep;             //  Status endpoint (ROUTER, bound), or NULL
    char *upstream_ep;           //  Upstream agent endpoint (connected)
    char *upstream_publish_ep;   //  Upstream commands endpoint (connected)
    char *key_file;              //  Key pair: identity upstream, and the
                                 //  server key downstream
    char *server_key_file;       //  Downstream server key pair instead, or NULL
    char *upstream_key;          //  Upstream's public key (Z85 or key file)
    char **client_keys;          //  Keys allowed to ask for status (Z85)
    size_t client_key_count;
    bool insecure;               //  Plaintext on both sides
    int64_t heartbeat_ms;        //  Own heartbeat upstream
    int64_t upstream_timeout_ms; //  Upstream silent this long: lost (ZMTP
                                 //  pings every second), agents dropped
    bool verbose;                //  --log-level debug
    char *log_level;             //  NULL: info
    char *log_format;            //  NULL: text
} relay_config_t;

typedef struct _relay_t relay_t;

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

//  Makes the relay: keys, sockets (upstream connected; downstream bound
//  once upstream answers). CONFIG is borrowed and must outlive it.
//  Returns NULL with a sentence in ERR.
relay_t *relay_new (const relay_config_t *config, char *err, size_t err_len);

//  Runs until SIGINT or SIGTERM. Returns 0.
int relay_run (relay_t *self);

//  Frees everything; NULL-safe.
void relay_destroy (relay_t **self_p);

#endif
