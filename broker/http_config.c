/*  =========================================================================
    http_config - the HTTP face's configuration: defaults, the http: map
    of the config file, and the checks made before the face starts (the
    listen address resolves; TLS unless on loopback). See http.h.
    =========================================================================
*/
#include <arpa/inet.h>
#include <czmq.h>
#include <netdb.h>

#include "../proto/conf.h"
#include "http.h"
#include "http_int.h"

void
http_config_defaults (http_config_t *config)
{
    memset (config, 0, sizeof *config);
    config->max_body = HTTP_DEFAULT_MAX_BODY;
    config->idle_timeout_ms = HTTP_IDLE_TIMEOUT_S * 1000;
    config->max_connections_per_ip = HTTP_PER_IP_DEFAULT;
}

void
http_config_clear (http_config_t *config)
{
    free (config->listen);
    free (config->cert);
    free (config->key);
    config->listen = config->cert = config->key = NULL;
}

static char *
s_dup (const char *text)
{
    return text ? strdup (text) : NULL;
}

void
http_config_copy (http_config_t *dest, const http_config_t *src)
{
    *dest = *src;
    dest->listen = s_dup (src->listen);
    dest->cert = s_dup (src->cert);
    dest->key = s_dup (src->key);
}

int
http_config_load (http_config_t *config, const pv_t *root, char *err,
                  size_t err_len)
{
    static const char *known [] = {"listen", "insecure", "cert", "key",
                                   "metrics_public", "max_body",
                                   "idle_timeout", "max_connections_per_ip",
                                   NULL};
    const pv_t *http = pv_map_get (root, "http");
    if (!http || pv_type (http) == PV_NIL)
        return 0;
    char why [512];
    if (pv_type (http) != PV_MAP) {
        snprintf (err, err_len, "http: expected a mapping (listen, insecure, "
                  "cert, key, metrics_public, max_body, idle_timeout, "
                  "max_connections_per_ip)");
        return -1;
    }
    uint64_t max_body = config->max_body;
    int rc = conf_check_keys (http, known, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (http, "listen", &config->listen, why, sizeof why);
    if (rc == 0)
        rc = conf_get_bool (http, "insecure", &config->insecure, why,
                            sizeof why);
    if (rc == 0)
        rc = conf_get_str (http, "cert", &config->cert, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (http, "key", &config->key, why, sizeof why);
    if (rc == 0)
        rc = conf_get_bool (http, "metrics_public", &config->metrics_public,
                            why, sizeof why);
    if (rc == 0)
        rc = conf_get_size (http, "max_body", &max_body, why, sizeof why);
    int64_t idle_ms = config->idle_timeout_ms;
    if (rc == 0)
        rc = conf_get_duration (http, "idle_timeout", &idle_ms, why,
                                sizeof why);
    int64_t per_ip = config->max_connections_per_ip;
    if (rc == 0)
        rc = conf_get_int (http, "max_connections_per_ip", &per_ip, why,
                           sizeof why);
    if (rc == 0 && (per_ip < 0 || per_ip > HTTP_CONNECTIONS_MAX)) {
        snprintf (why, sizeof why, "max_connections_per_ip: expected 0 (no "
                  "limit) to %d", HTTP_CONNECTIONS_MAX);
        rc = -1;
    }
    if (rc == 0 && (idle_ms < 1000 || idle_ms > 3600000)) {
        snprintf (why, sizeof why, "idle_timeout: expected 1s to 1h");
        rc = -1;
    }
    if (rc == 0 && (max_body < 1024 || max_body > ((uint64_t) 64 << 20))) {
        snprintf (why, sizeof why, "max_body: expected 1KiB to 64MiB");
        rc = -1;
    }
    if (rc != 0) {
        snprintf (err, err_len, "http.%s", why);
        return -1;
    }
    config->max_body = max_body;
    config->idle_timeout_ms = idle_ms;
    config->max_connections_per_ip = per_ip;
    return 0;
}

//  Splits "ADDR:PORT" or "[V6]:PORT" into HOST and PORT. Returns 0 or -1.
static int
s_split_listen (const char *listen, char *host, size_t host_len, char *port,
                size_t port_len)
{
    const char *colon = strrchr (listen, ':');
    if (!colon || colon == listen || !colon [1])
        return -1;
    const char *start = listen;
    size_t len = (size_t) (colon - listen);
    if (*listen == '[') {
        if (colon [-1] != ']' || len < 3)
            return -1;
        start++;
        len -= 2;
    }
    if (len >= host_len || strlen (colon + 1) >= port_len)
        return -1;
    memcpy (host, start, len);
    host [len] = 0;
    snprintf (port, port_len, "%s", colon + 1);
    for (const char *at = port; *at; at++)
        if (*at < '0' || *at > '9')
            return -1;
    long number = strtol (port, NULL, 10);
    return number >= 1 && number <= 65535 ? 0 : -1;
}

int
http_listen_resolve (const char *listen, struct addrinfo **addr_p, char *err,
                     size_t err_len)
{
    char host [256], port [16];
    if (s_split_listen (listen, host, sizeof host, port, sizeof port) != 0) {
        snprintf (err, err_len, "http.listen: '%s' is not ADDR:PORT (like "
                  "127.0.0.1:7780 or [::1]:7780)", listen);
        return -1;
    }
    struct addrinfo hints;
    memset (&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int rc = getaddrinfo (host, port, &hints, addr_p);
    if (rc != 0) {
        snprintf (err, err_len, "http.listen: cannot resolve '%s': %s", host,
                  gai_strerror (rc));
        return -1;
    }
    return 0;
}

static bool
s_loopback (const struct sockaddr *addr)
{
    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) addr;
        return (ntohl (in->sin_addr.s_addr) >> 24) == 127;
    }
    if (addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) addr;
        return IN6_IS_ADDR_LOOPBACK (&in6->sin6_addr);
    }
    return false;
}

int
http_config_check (const http_config_t *config, char *err, size_t err_len)
{
    if (!config->listen)
        return 0;
    if (!config->cert != !config->key) {
        snprintf (err, err_len, "http: TLS needs both a certificate and a "
                  "key (--http-cert and --http-key, or http.cert and "
                  "http.key)");
        return -1;
    }
    struct addrinfo *addr = NULL;
    if (http_listen_resolve (config->listen, &addr, err, err_len) != 0)
        return -1;
    bool loopback = s_loopback (addr->ai_addr);
    freeaddrinfo (addr);
    if (!config->cert && !loopback && !config->insecure) {
        snprintf (err, err_len, "http: plain HTTP on %s would carry tokens "
                  "unencrypted beyond this host: give a certificate and key "
                  "(--http-cert, --http-key) for TLS, listen on a loopback "
                  "address, or pass --http-insecure (a trusted network only)",
                  config->listen);
        return -1;
    }
    return 0;
}

