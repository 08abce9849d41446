/*  =========================================================================
    cluster_config - the `ha:` map of the broker's config (cluster_config.h)
    =========================================================================
*/
#include "cluster_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/conf.h"
#include "../proto/keys.h"
#include "../proto/names.h"

void
cluster_config_defaults (cluster_config_t *config)
{
    memset (config, 0, sizeof *config);
    config->ttl_ms = CLUSTER_DEFAULT_TTL_MS;
    config->sync_timeout_ms = CLUSTER_DEFAULT_SYNC_TIMEOUT_MS;
}

static void
s_peer_clear (cluster_peer_t *peer)
{
    free (peer->name);
    free (peer->client);
    free (peer->replicate);
    free (peer->key);
    free (peer->agents);
    free (peer->http);
    memset (peer, 0, sizeof *peer);
}

void
cluster_config_clear (cluster_config_t *config)
{
    free (config->cluster);
    free (config->name);
    free (config->etcd);
    free (config->replicate);
    free (config->client);
    free (config->http);
    for (size_t index = 0; index < config->peer_count; index++)
        s_peer_clear (&config->peers [index]);
    cluster_config_defaults (config);
}

static char *
s_dup (const char *text)
{
    return text ? strdup (text) : NULL;
}

void
cluster_config_copy (cluster_config_t *dest, const cluster_config_t *src)
{
    *dest = *src;
    dest->cluster = s_dup (src->cluster);
    dest->name = s_dup (src->name);
    dest->etcd = s_dup (src->etcd);
    dest->replicate = s_dup (src->replicate);
    dest->client = s_dup (src->client);
    dest->http = s_dup (src->http);
    for (size_t index = 0; index < src->peer_count; index++) {
        dest->peers [index].name = s_dup (src->peers [index].name);
        dest->peers [index].client = s_dup (src->peers [index].client);
        dest->peers [index].replicate = s_dup (src->peers [index].replicate);
        dest->peers [index].key = s_dup (src->peers [index].key);
        dest->peers [index].agents = s_dup (src->peers [index].agents);
        dest->peers [index].http = s_dup (src->peers [index].http);
    }
}

static int
s_peer_load (cluster_peer_t *peer, const pv_t *map, size_t index, char *err,
             size_t err_len)
{
    static const char *known [] = {"name", "client", "replicate", "key",
                                   "agents", "http", NULL};
    char why [512];
    char *key = NULL;
    int rc = pv_type (map) == PV_MAP ? 0 : -1;
    if (rc != 0)
        snprintf (why, sizeof why, "expected a mapping (name, client, "
                  "replicate, key, agents, http)");
    if (rc == 0)
        rc = conf_check_keys (map, known, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (map, "name", &peer->name, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (map, "client", &peer->client, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (map, "replicate", &peer->replicate, why,
                           sizeof why);
    if (rc == 0)
        rc = conf_get_str (map, "key", &key, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (map, "agents", &peer->agents, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (map, "http", &peer->http, why, sizeof why);
    if (rc == 0 && (!peer->name || !name_valid (peer->name))) {
        snprintf (why, sizeof why, "name: expected a member's name");
        rc = -1;
    }
    if (rc == 0 && (!peer->client || !peer->replicate)) {
        snprintf (why, sizeof why, "client and replicate: both are needed");
        rc = -1;
    }
    if (rc == 0 && key) {
        char text [KEYS_TEXT_SIZE];
        rc = keys_read_public (key, text, why, sizeof why);
        if (rc == 0)
            peer->key = strdup (text);
    }
    free (key);
    if (rc != 0)
        snprintf (err, err_len, "ha: peers: %zu: %s", index + 1, why);
    return rc;
}

int
cluster_config_load (cluster_config_t *config, const pv_t *root, char *err,
                     size_t err_len)
{
    static const char *known [] = {"cluster", "name", "etcd", "ttl",
                                   "replicate", "sync_timeout", "strict",
                                   "peers", "client", "http", NULL};
    const pv_t *ha = pv_map_get (root, "ha");
    if (!ha || pv_type (ha) == PV_NIL)
        return 0;
    char why [512];
    int rc = pv_type (ha) == PV_MAP ? 0 : -1;
    if (rc != 0)
        snprintf (why, sizeof why, "expected a mapping (cluster, name, etcd, "
                  "ttl, replicate, sync_timeout, strict, peers, client, "
                  "http)");
    if (rc == 0)
        rc = conf_check_keys (ha, known, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (ha, "cluster", &config->cluster, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (ha, "name", &config->name, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (ha, "etcd", &config->etcd, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (ha, "ttl", &config->ttl_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (ha, "replicate", &config->replicate, why,
                           sizeof why);
    if (rc == 0)
        rc = conf_get_duration (ha, "sync_timeout", &config->sync_timeout_ms,
                                why, sizeof why);
    if (rc == 0)
        rc = conf_get_bool (ha, "strict", &config->strict, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (ha, "client", &config->client, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (ha, "http", &config->http, why, sizeof why);
    if (rc != 0) {
        snprintf (err, err_len, "ha: %s", why);
        return -1;
    }
    const pv_t *peers = pv_map_get (ha, "peers");
    if (peers && pv_type (peers) != PV_ARRAY) {
        snprintf (err, err_len, "ha: peers: expected a list of members");
        return -1;
    }
    for (size_t index = 0; index < config->peer_count; index++)
        s_peer_clear (&config->peers [index]);
    config->peer_count = 0;
    size_t count = peers ? pv_size (peers) : 0;
    if (count > CLUSTER_MAX_PEERS) {
        snprintf (err, err_len, "ha: peers: %zu members; at most %d", count,
                  CLUSTER_MAX_PEERS);
        return -1;
    }
    for (size_t index = 0; index < count; index++) {
        if (s_peer_load (&config->peers [index], pv_array_at (peers, index),
                         index, err, err_len) != 0) {
            config->peer_count = index + 1;
            return -1;
        }
        config->peer_count = index + 1;
    }
    config->enabled = true;
    return 0;
}

int
cluster_config_check (const cluster_config_t *config, bool insecure,
                      char *err, size_t err_len)
{
    if (!config->cluster || !name_valid (config->cluster)) {
        snprintf (err, err_len, "ha: cluster: expected the cluster's name");
        return -1;
    }
    if (!config->name || !name_valid (config->name)) {
        snprintf (err, err_len, "ha: name: expected this member's name");
        return -1;
    }
    if (!config->etcd || !*config->etcd) {
        snprintf (err, err_len, "ha: etcd: expected etcd's endpoints "
                  "(http://host:2379, comma-separated)");
        return -1;
    }
    if (!config->replicate) {
        snprintf (err, err_len, "ha: replicate: expected this member's "
                  "replication endpoint (tcp://host:7704)");
        return -1;
    }
    if (config->ttl_ms < 2000 || config->ttl_ms % 1000) {
        snprintf (err, err_len, "ha: ttl: expected whole seconds, at least "
                  "2s");
        return -1;
    }
    if (config->sync_timeout_ms < 10) {
        snprintf (err, err_len, "ha: sync_timeout: expected at least 10ms");
        return -1;
    }
    if (config->peer_count == 0) {
        snprintf (err, err_len, "ha: peers: a cluster needs at least one "
                  "other member");
        return -1;
    }
    for (size_t index = 0; index < config->peer_count; index++) {
        const cluster_peer_t *peer = &config->peers [index];
        if (strcmp (peer->name, config->name) == 0) {
            snprintf (err, err_len, "ha: peers: '%s' is this member's own "
                      "name", peer->name);
            return -1;
        }
        for (size_t other = 0; other < index; other++)
            if (strcmp (config->peers [other].name, peer->name) == 0) {
                snprintf (err, err_len, "ha: peers: '%s' is named twice",
                          peer->name);
                return -1;
            }
        if (!insecure && !peer->key) {
            snprintf (err, err_len, "ha: peers: %s: key: expected its "
                      "public key (a key file or Z85): replication is "
                      "CURVE-authenticated", peer->name);
            return -1;
        }
    }
    return 0;
}

const cluster_peer_t *
cluster_config_peer (const cluster_config_t *config, const char *name)
{
    for (size_t index = 0; index < config->peer_count; index++)
        if (name && strcmp (config->peers [index].name, name) == 0)
            return &config->peers [index];
    return NULL;
}
