/*  =========================================================================
    http - the broker's HTTP face: a REST API under /api/v1 (JSON in and
    out), a Server-Sent Events stream per job, /metrics, /healthz,
    /readyz, and the dashboard's files

    libmicrohttpd parses HTTP (and speaks TLS through GnuTLS); jansson
    parses request bodies. Nothing here touches the store or the
    scheduler: each API request becomes the same msgpack request a
    ZeroMQ client sends (proto/pj.h converts), goes to the reactor over
    an inproc socket with the caller's bearer token, and runs through the
    same path as the client socket's requests (decode, the token's role,
    dedup of retried mutations, the request table, job.watch parking, a reply
    only after the commit). The reply comes back as JSON; an error is
    {code, message, details} with the HTTP status its code maps to.

    Threading: one thread of its own (a CZMQ actor) runs the HTTP daemon
    in its external-poll mode together with the bridge socket, so one
    thread serves every connection: a request waiting for the reactor is
    suspended (MHD_suspend_connection), and resumed when its reply comes.
    A slow or stalled HTTP client costs that thread a socket buffer, never
    the reactor a wait. The bridge (a DEALER) talks to the broker's
    inproc ROUTER with frames:

        request = tag kind token body      (kind HTTP_KIND_REQUEST,
                                        HTTP_KIND_DASHBOARD, or
                                        HTTP_KIND_PUBLIC: metrics.get
                                        needs no token)
        probe   = tag kind token ""        (kind HTTP_KIND_PROBE)
        reply   = tag body

    where the ROUTER adds and strips the routing id, tag is the bridge's
    number for the call, token the bearer token ("" when none) and body a
    msgpack client request (PROTOCOL.md 5) or, for a probe's reply,
    {maintenance, storage, uptime_ms, ?error} and, from a broker
    cluster's member, {role ("active" or "standby"), name, cluster,
    epoch, leader, ?client, ?http} (the active's name, client endpoint
    and URL: /api/v1/leader and a standby's /readyz name them).
    =========================================================================
*/
#ifndef GRID_HTTP_H
#define GRID_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pv.h"

#define HTTP_KIND_REQUEST "R"        //  A client request, judged by its token
#define HTTP_KIND_PROBE "P"          //  /healthz, /readyz, /api/v1/leader:
                                     //  the reactor's state
#define HTTP_KIND_PUBLIC "M"         //  metrics.get without a token
                                     //  (http.metrics_public)
#define HTTP_KIND_DASHBOARD "D"      //  A client request from the dashboard
                                     //  (X-Grid-Face: dashboard), judged
                                     //  by its token as any other
#define HTTP_MAX_TOKEN 256           //  Longer Authorization values are no token
#define HTTP_DEFAULT_MAX_BODY ((uint64_t) 1 << 20)   //  http.max_body

//  The `http:` part of the broker's configuration.
typedef struct {
    char *listen;                //  ADDR:PORT to serve on, or NULL: no HTTP
    bool insecure;               //  Plain HTTP allowed beyond loopback
    char *cert;                  //  TLS certificate (PEM file), or NULL
    char *key;                   //  TLS private key (PEM file), or NULL
    bool metrics_public;         //  GET /metrics needs no token
    uint64_t max_body;           //  Larger request bodies get 413
    int64_t idle_timeout_ms;     //  A connection silent this long is closed
    int64_t max_connections_per_ip;  //  Open at once from one client address
                                 //  (0: no limit but the face's 4,096)
} http_config_t;

//  Fills CONFIG with the defaults: off, max_body 1 MiB, idle_timeout 30 s,
//  max_connections_per_ip 1024 (a quarter of the face's connections, so
//  that one client cannot hold every slot and starve /healthz).
void http_config_defaults (http_config_t *config);

//  Frees what CONFIG owns (its strings become NULL).
void http_config_clear (http_config_t *config);

//  Deep copy of SRC into DEST (which holds nothing).
void http_config_copy (http_config_t *dest, const http_config_t *src);

//  Reads the `http:` map of the config ROOT (keys listen, insecure, cert,
//  key, metrics_public, max_body, idle_timeout, max_connections_per_ip)
//  into CONFIG. Returns 0, or -1 with
//  "http.KEY: reason" in ERR.
int http_config_load (http_config_t *config, const pv_t *root, char *err,
                      size_t err_len);

//  Checks CONFIG as a whole: a listen address that parses, cert and key
//  given together and readable, and plain HTTP only on a loopback
//  address unless insecure. Returns 0, or -1 with a sentence in ERR.
int http_config_check (const http_config_t *config, char *err,
                       size_t err_len);

typedef struct _http_t http_t;

//  What the face did since it started, and what is open now.
typedef struct {
    uint64_t requests;           //  Requests answered (a stream once)
    uint64_t client_errors;      //  ... with a 4xx status
    uint64_t server_errors;      //  ... with a 5xx status
    uint64_t too_large;          //  Bodies refused for max_body (413)
    uint64_t late;               //  Replies the broker owed past their time
    uint64_t connections;        //  Connections open now
    uint64_t streams;            //  Event streams open now
} http_stats_t;

//  Starts the HTTP face on CONFIG's listen address (copied), talking to
//  the reactor through the ROUTER bound at BRIDGE_EP. Returns NULL with
//  a sentence in ERR when the address cannot be served (bad address, port
//  in use, unreadable certificate).
http_t *http_new (const http_config_t *config, const char *bridge_ep,
                  char *err, size_t err_len);

//  Stops the face: open connections are closed, its thread ends; NULL-safe.
void http_destroy (http_t **self_p);

//  Reads the face's figures into STATS (from any thread: the counters are
//  atomic, and a read sees each one whole).
void http_stats (const http_t *self, http_stats_t *stats);

//  The API's routes, for the OpenAPI check: route INDEX's METHOD and
//  PATH ("/api/v1/jobs/{id}"). Returns false past the last one.
bool http_route_at (size_t index, const char **method_p, const char **path_p);

//  The wire request type route INDEX serves (a row of requests.h), or
//  NULL for a route of its own (probes, the OpenAPI text) or past the last.
const char *http_route_type (size_t index);

//  The OpenAPI description served at /api/v1/openapi.json (a NUL-terminated
//  JSON text built into the program from docs/openapi.json).
const char *http_openapi (void);

#endif
