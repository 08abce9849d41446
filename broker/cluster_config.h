/*  =========================================================================
    cluster_config - the `ha:` map of the broker's config: a broker
    cluster on etcd (cluster.h). Absent, the broker runs alone, as ever.

        ha:
          cluster: prod                  # the cluster's name
          name: broker-a                 # this member's name
          etcd: http://10.0.0.9:2379,http://10.0.0.10:2379,...
          ttl: 10s                       # the leader's lease
          replicate: tcp://10.0.0.1:7704 # where this member's standbys
                                         # connect while it is active
          client: tcp://10.0.0.1:7701    # optional: this member's client
          http: https://10.0.0.1:8443    # endpoint and HTTP URL as the
                                         # others name them (/api/v1/leader)
          sync_timeout: 2s               # a sync standby acks within this
          strict: false                  # true: no sync standby, no ack
          peers:                         # the other members
            - name: broker-b
              client: tcp://10.0.0.2:7701
              replicate: tcp://10.0.0.2:7704
              key: /etc/grid/keys/broker-b.pub   # or its Z85 text
              agents: tcp://10.0.0.2:7702        # optional: agents are
              http: https://10.0.0.2:8443        # redirected there, HTTP
                                                 # callers told this URL

    Every member names the others under peers; a standby follows the
    active's `replicate` with the active's key, and the active lets in
    the keys of its peers only.
    =========================================================================
*/
#ifndef GRID_CLUSTER_CONFIG_H
#define GRID_CLUSTER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pv.h"

#define CLUSTER_DEFAULT_TTL_MS 10000
#define CLUSTER_DEFAULT_SYNC_TIMEOUT_MS 2000
#define CLUSTER_MAX_PEERS 8

typedef struct {
    char *name;                  //  A member's name
    char *client;                //  Its client endpoint (for redirects)
    char *replicate;             //  Its replication endpoint
    char *key;                   //  Its public key (Z85), or NULL
    char *agents;                //  Its agent endpoint (agents and relays
                                 //  are redirected there), or NULL
    char *http;                  //  Its HTTP URL (named to HTTP callers),
                                 //  or NULL
} cluster_peer_t;

typedef struct {
    bool enabled;                //  An ha: map was given
    char *cluster;               //  The cluster's name
    char *name;                  //  This member's
    char *etcd;                  //  etcd endpoints, comma-separated URLs
    int64_t ttl_ms;              //  The leader's lease
    char *replicate;             //  This member's replication endpoint
    char *client;                //  This member's client endpoint and HTTP
    char *http;                  //  URL as the others reach them, or NULL
    int64_t sync_timeout_ms;
    bool strict;
    cluster_peer_t peers [CLUSTER_MAX_PEERS];
    size_t peer_count;
} cluster_config_t;

void cluster_config_defaults (cluster_config_t *config);

//  Reads the ha: map of ROOT (the config file's root) into CONFIG. Keys
//  are read as given (a key file's text is read here). Returns 0, or -1
//  with a sentence in ERR.
int cluster_config_load (cluster_config_t *config, const pv_t *root,
                         char *err, size_t err_len);

//  Checks that CONFIG (enabled) names what a member needs, INSECURE or
//  not (keys). Returns 0, or -1 with a sentence in ERR.
int cluster_config_check (const cluster_config_t *config, bool insecure,
                          char *err, size_t err_len);

//  The peer named NAME, or NULL.
const cluster_peer_t *cluster_config_peer (const cluster_config_t *config,
                                           const char *name);

void cluster_config_copy (cluster_config_t *dest, const cluster_config_t *src);
void cluster_config_clear (cluster_config_t *config);

#endif
