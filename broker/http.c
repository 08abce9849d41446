/*  =========================================================================
    http - the broker's HTTP face (see http.h)

    One thread (a CZMQ actor) polls three things: its pipe (the broker
    ends it with $TERM), the bridge DEALER (replies from the reactor) and
    the HTTP daemon's epoll descriptor (libmicrohttpd in external-poll
    mode). Every HTTP request is one s_call_t; an API request becomes one
    wire request whose reply, matched by its tag, is turned into JSON.

    A call's life: READING (the body comes in, up to max_body), then
    either ANSWERED at once (an error, a static file) or WAITING (sent to
    the reactor, its connection suspended), then ANSWERED when the reply
    comes (the connection resumed, the response queued). A stream
    (GET /api/v1/jobs/{id}/stream) stays open: job.watch, job.events and
    job.output_events requests follow each other, each answer is written
    as events (output pieces as `output` events), and the
    content reader suspends the connection whenever it has nothing to say.

    A call is freed when libmicrohttpd is done with its request, no
    reply is awaited for it, and (for a stream) its response is gone.
    =========================================================================
*/
#include <arpa/inet.h>
#include <czmq.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <sys/random.h>

#include "../proto/conf.h"
#include "../proto/log.h"
#include "../proto/pj.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "../proto/trace.h"
#include "http.h"
#include "http_int.h"
#include "webfiles.h"

#define S_CALL_TIMEOUT_MS 30000  //  A reply the reactor owes this long: 503
#define S_PROBE_TIMEOUT_MS 1000  //  /healthz: the reactor answers within this
#define S_WATCH_MS 15000         //  A stream's job.watch waits at most this long
                                 //  (a heartbeat; less with a short idle_timeout)
#define S_STREAM_BACKLOG (4 << 20)  //  A stream whose reader lags this far ends
#define S_QUERY_MAX 16           //  Query parameters at most
#define S_DISCARD_MAX 8          //  A body past max_body is read and dropped up to
                                 //  this many times max_body, then the connection
                                 //  is closed
#define S_REQUEST_ID_MAX 128     //  X-Request-Id: bytes at most

//  ---------------------------------------------------------------------
//  Routes

typedef enum {
    S_ROUTE_API,                 //  One wire request, its reply as JSON
    S_ROUTE_STREAM,              //  Server-Sent Events of a job
    S_ROUTE_METRICS,             //  metrics.get's text
    S_ROUTE_HEALTHZ,             //  The reactor answers
    S_ROUTE_READYZ,              //  ... and can take work
    S_ROUTE_LEADER,              //  ... and leads its cluster (or is alone)
    S_ROUTE_OPENAPI              //  The API's description
} s_route_kind_t;

typedef enum {
    S_BODY_NONE,                 //  The body is not read
    S_BODY_FIELDS,               //  A JSON object whose keys are request fields
    S_BODY_WRAP                  //  A JSON object that is one field's value
} s_body_t;

typedef struct {
    const char *method;          //  GET, POST, DELETE
    const char *path;            //  With at most one {param} ({param*}: the rest)
    const char *type;            //  The wire request, or NULL
    const char *param;           //  The wire field {param} fills
    const char *query;           //  Query parameters: "name:s,limit:i" (s, i, b)
    s_body_t body;               //  What the body is
    const char *wrap;            //  S_BODY_WRAP: the field it fills
    int ok_status;               //  The HTTP status of an ok reply
    s_route_kind_t kind;         //  How it is served
    bool rest;                   //  {param} takes the rest of the path,
                                 //  slashes and all
} s_route_t;

#define S_API(method, path, type, param, query, body, wrap, status) \
    { method, path, type, param, query, body, wrap, status, S_ROUTE_API, \
      false }

static const s_route_t s_routes [] = {
    //  ?check=true: a dry run (job.submit's check)
    S_API ("POST", "/api/v1/jobs", "job.submit", NULL, "check:b",
           S_BODY_WRAP, "job", 201),
    S_API ("GET", "/api/v1/jobs", "job.list", NULL,
           "status:s,limit:i,before:s,schedule:s", S_BODY_NONE, NULL, 200),
    S_API ("POST", "/api/v1/jobs/check", "job.check", NULL, NULL, S_BODY_WRAP,
           "job", 200),
    S_API ("GET", "/api/v1/jobs/changes", "job.changes", NULL,
           "after:i,timeout_ms:i", S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/jobs/{id}", "job.get", "job", NULL, S_BODY_NONE,
           NULL, 200),
    S_API ("DELETE", "/api/v1/jobs/{id}", "job.delete", "job", NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/jobs/{id}/progress", "job.progress", "job", NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/jobs/{id}/watch", "job.watch", "job",
           "after:i,timeout_ms:i", S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/jobs/{id}/events", "job.events", "job", "after:i",
           S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/jobs/{id}/output", "job.output", "job",
           "node:s,step:i,stream:s,attempt:i,offset:i,limit:i", S_BODY_NONE,
           NULL, 200),
    S_API ("POST", "/api/v1/jobs/{id}/cancel", "job.cancel", "job", NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("POST", "/api/v1/jobs/{id}/retry", "job.retry", "job", NULL,
           S_BODY_FIELDS, NULL, 201),
    { "GET", "/api/v1/jobs/{id}/stream", "job.watch", "job", "after:i",
      S_BODY_NONE, NULL, 200, S_ROUTE_STREAM, false },
    S_API ("GET", "/api/v1/nodes/changes", "node.changes", NULL,
           "after:i,timeout_ms:i", S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/nodes", "node.list", NULL, "where:s", S_BODY_NONE,
           NULL, 200),
    S_API ("GET", "/api/v1/nodes/{id}", "node.get", "node", NULL, S_BODY_NONE,
           NULL, 200),
    S_API ("GET", "/api/v1/nodes/{id}/workers", "node.workers", "node", NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/nodes/{id}/history", "node.history", "node",
           "limit:i", S_BODY_NONE, NULL, 200),
    S_API ("POST", "/api/v1/nodes/{id}/drain", "node.drain", "node", NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("POST", "/api/v1/nodes/{id}/resume", "node.resume", "node", NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("GET", "/api/v1/status", "status", NULL, NULL, S_BODY_NONE, NULL,
           200),
    S_API ("GET", "/api/v1/whoami", "whoami", NULL, NULL, S_BODY_NONE, NULL,
           200),
    S_API ("GET", "/api/v1/cluster", "cluster.status", NULL, NULL, S_BODY_NONE,
           NULL, 200),
    S_API ("POST", "/api/v1/broker/drain", "broker.drain", NULL, NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("POST", "/api/v1/broker/resume", "broker.resume", NULL, NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("GET", "/api/v1/broker/keys", "broker.keys", NULL, NULL,
           S_BODY_NONE, NULL, 200),
    //  An admin's, audited: the row of broker.rekey says so (requests.c)
    S_API ("POST", "/api/v1/broker/rekey", "broker.rekey", NULL, NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("GET", "/api/v1/queue/stats", "queue.stats", NULL, NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/relays", "relay.list", NULL, NULL, S_BODY_NONE,
           NULL, 200),
    S_API ("GET", "/api/v1/dlq", "dlq.list", NULL, "job:s,limit:i",
           S_BODY_NONE, NULL, 200),
    S_API ("POST", "/api/v1/dlq/retry", "dlq.retry", NULL, NULL,
           S_BODY_FIELDS, NULL, 201),
    S_API ("POST", "/api/v1/dlq/purge", "dlq.purge", NULL, NULL,
           S_BODY_FIELDS, NULL, 200),
    //  An entry id is "job/step/node"
    { "GET", "/api/v1/dlq/{entry}", "dlq.get", "entry", NULL, S_BODY_NONE,
      NULL, 200, S_ROUTE_API, true },
    S_API ("GET", "/api/v1/schedules", "schedule.list", NULL, NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("POST", "/api/v1/schedules", "schedule.add", NULL, NULL,
           S_BODY_FIELDS, NULL, 201),
    S_API ("GET", "/api/v1/schedules/{name}", "schedule.get", "name", NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("DELETE", "/api/v1/schedules/{name}", "schedule.delete", "name",
           NULL, S_BODY_NONE, NULL, 200),
    S_API ("POST", "/api/v1/schedules/{name}/pause", "schedule.pause", "name",
           NULL, S_BODY_FIELDS, NULL, 200),
    S_API ("POST", "/api/v1/schedules/{name}/resume", "schedule.resume",
           "name", NULL, S_BODY_FIELDS, NULL, 200),
    S_API ("POST", "/api/v1/schedules/{name}/run", "schedule.run", "name",
           NULL, S_BODY_FIELDS, NULL, 201),
    S_API ("GET", "/api/v1/keys", "key.list", NULL, NULL, S_BODY_NONE, NULL,
           200),
    S_API ("POST", "/api/v1/keys/accept", "key.accept", NULL, NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("POST", "/api/v1/keys/reject", "key.reject", NULL, NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("POST", "/api/v1/keys/delete", "key.delete", NULL, NULL,
           S_BODY_FIELDS, NULL, 200),
    S_API ("GET", "/api/v1/tokens", "token.list", NULL, NULL, S_BODY_NONE,
           NULL, 200),
    S_API ("POST", "/api/v1/tokens", "token.add", NULL, NULL, S_BODY_FIELDS,
           NULL, 201),
    S_API ("DELETE", "/api/v1/tokens/{name}", "token.revoke", "name", NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/audit", "audit.list", NULL,
           "who:s,request_type:s,object:s,outcome:s,since:i,before:s,limit:i",
           S_BODY_NONE, NULL, 200),
    S_API ("GET", "/api/v1/notify", "notify.list", NULL, "status:s,job:s,limit:i",
           S_BODY_NONE, NULL, 200),
    S_API ("POST", "/api/v1/notify/{id}/retry", "notify.retry", "delivery",
           NULL, S_BODY_FIELDS, NULL, 200),
    S_API ("GET", "/api/v1/blobs", "blob.list", NULL, NULL, S_BODY_NONE,
           NULL, 200),
    S_API ("POST", "/api/v1/blobs", "blob.put", NULL, NULL, S_BODY_FIELDS,
           NULL, 200),
    S_API ("GET", "/api/v1/blobs/{sha256}", "blob.stat", "sha256", NULL,
           S_BODY_NONE, NULL, 200),
    S_API ("DELETE", "/api/v1/blobs/{sha256}", "blob.delete", "sha256", NULL,
           S_BODY_NONE, NULL, 200),
    { "GET", "/api/v1/openapi.json", NULL, NULL, NULL, S_BODY_NONE, NULL, 200,
      S_ROUTE_OPENAPI, false },
    { "GET", "/metrics", "metrics.get", NULL, NULL, S_BODY_NONE, NULL, 200,
      S_ROUTE_METRICS, false },
    { "GET", "/healthz", NULL, NULL, NULL, S_BODY_NONE, NULL, 200,
      S_ROUTE_HEALTHZ, false },
    { "GET", "/readyz", NULL, NULL, NULL, S_BODY_NONE, NULL, 200,
      S_ROUTE_READYZ, false },
    //  A load balancer's health check: 200 on the active only
    { "GET", "/api/v1/leader", NULL, NULL, NULL, S_BODY_NONE, NULL, 200,
      S_ROUTE_LEADER, false },
};

#define S_ROUTE_COUNT (sizeof s_routes / sizeof s_routes [0])

//  The routes a probe answers: no token, the reactor's state only.
#define S_PROBE_ROUTE(kind) ((kind) == S_ROUTE_HEALTHZ \
                             || (kind) == S_ROUTE_READYZ \
                             || (kind) == S_ROUTE_LEADER)

//  A known path asked with a method it does not take: when the path needs
//  a token, whoami checks the caller's first, so that only a caller who
//  may use the path learns which methods it takes (405); any other gets
//  the 401 an unknown token gets.
static const s_route_t s_method_check = S_API ("", "", "whoami", NULL, NULL,
                                               S_BODY_NONE, NULL, 405);

//  The same for a path under /api/ that is no route: 404 only for a known
//  token, so that which paths exist is not told to just anyone.
static const s_route_t s_path_check = S_API ("", "", "whoami", NULL, NULL,
                                             S_BODY_NONE, NULL, 404);

bool
http_route_at (size_t index, const char **method_p, const char **path_p)
{
    if (index >= S_ROUTE_COUNT)
        return false;
    *method_p = s_routes [index].method;
    *path_p = s_routes [index].path;
    return true;
}

const char *
http_route_type (size_t index)
{
    return index < S_ROUTE_COUNT ? s_routes [index].type : NULL;
}

//  The OpenAPI text, built in from docs/openapi.json (openapi.S).
extern const char grid_openapi_json [];

const char *
http_openapi (void)
{
    return grid_openapi_json;
}

//  True when PATH matches PATTERN; then *PARAM_P is the {param} part
//  (a fresh string) or NULL when the pattern has none. REST: the param
//  takes the rest of the path.
static bool
s_path_match (const char *pattern, bool rest, const char *path,
              char **param_p)
{
    *param_p = NULL;
    while (*pattern && *path) {
        if (*pattern == '{') {
            const char *close = strchr (pattern, '}');
            size_t len = rest ? strlen (path) : strcspn (path, "/");
            if (len == 0 || !close)
                return false;
            free (*param_p);
            *param_p = strndup (path, len);
            pattern = close + 1;
            path += len;
            continue;
        }
        if (*pattern != *path)
            break;
        pattern++;
        path++;
    }
    if (*pattern || *path) {
        free (*param_p);
        *param_p = NULL;
        return false;
    }
    return true;
}

//  The wire error code's HTTP status.
static int
s_status_of (const char *code)
{
    static const struct {
        const char *code;
        int status;
    } map [] = {
        {PROTO_ERR_UNAUTHORIZED, 401}, {PROTO_ERR_FORBIDDEN, 403},
        {PROTO_ERR_NOT_FOUND, 404},    {PROTO_ERR_CONFLICT, 409},
        {PROTO_ERR_NO_NODES, 409},     {PROTO_ERR_QUEUE_FULL, 429},
        {PROTO_ERR_MAINTENANCE, 503},  {PROTO_ERR_STORAGE_FULL, 503},
        {PROTO_ERR_STORE, 503},        {PROTO_ERR_INTERNAL, 500},
        {PROTO_ERR_NOT_LEADER, 503},
    };
    for (size_t index = 0; index < sizeof map / sizeof map [0]; index++)
        if (strcmp (map [index].code, code) == 0)
            return map [index].status;
    //  malformed, unsupported_version, unknown_type, bad_request,
    //  invalid_job, unknown_node: the request is wrong
    return 400;
}

//  ---------------------------------------------------------------------
//  Calls

typedef struct _s_server_t s_server_t;

typedef enum {
    S_READING,                   //  The request comes in
    S_WAITING,                   //  Sent to the reactor; connection suspended
    S_ANSWERED,                  //  The answer is ready to be queued
    S_DONE                       //  A response is queued
} s_stage_t;

//  A stream's state (GET /api/v1/jobs/{id}/stream).
typedef struct {
    char *job;                   //  The job's id
    uint64_t version;            //  The job's version last seen
    int64_t after;               //  The last event seq written
    bool events_next;            //  The next request is job.events
    bool output_next;            //  ... is job.output_events
    uint64_t output_after;       //  The last output piece written (its seq)
    bool final;                  //  The job has ended: end after its events
    char status [32];            //  Its status in the last progress
    bool ended;                  //  The end is written; close once sent
    char *bytes;                 //  What waits to be sent
    size_t size;                 //  Bytes in it
    size_t sent;                 //  Bytes of it already sent
    size_t max;                  //  Bytes allocated
} s_stream_t;

typedef struct {
    s_server_t *server;          //  The face
    struct MHD_Connection *connection;  //  NULL once its request is over
    int refs;                    //  The request, an awaited reply, a stream
    s_stage_t stage;             //  Where it stands
    const s_route_t *route;      //  What it asks for
    char *param;                 //  The route's {param}, or NULL
    char *token;                 //  The bearer token, or NULL
    char *body;                  //  The request body
    size_t body_size;            //  Bytes of it
    bool too_large;              //  The body passed max_body
    uint64_t discarded;          //  ... and this much of it was dropped
    bool suspended;              //  We suspended its connection
    char tag [17];               //  The awaited reply's tag ("" when none)
    int64_t deadline_ms;         //  ... due by then
    int status;                  //  The answer's HTTP status
    char *answer;                //  The answer (owned)
    size_t answer_size;          //  Its bytes
    const char *content_type;    //  Its type
    char allow [64];             //  405: the methods the path takes
    const char *etag;            //  A dashboard file's ETag (static), or NULL
    const char *method;          //  The request's method and path (MHD's,
    const char *url;             //  valid until the request is over)
    s_stream_t *stream;          //  A stream's state, or NULL
} s_call_t;

struct _s_server_t {
    http_config_t config;        //  Copied configuration
    http_stats_t *stats;         //  The face's figures (http_t's; atomic)
    struct MHD_Daemon *daemon;   //  The HTTP server
    zsock_t *pipe;               //  The actor's pipe
    zsock_t *bridge;             //  DEALER to the reactor
    zhashx_t *awaited;           //  Tag -> call whose reply is due (borrowed)
    uint64_t next_tag;           //  Tags count up
    char id_prefix [24];         //  Random: request ids of this run
    uint64_t next_id;            //  Request ids count up
    bool stopping;               //  $TERM came
    int idle_timeout_s;          //  Connection timeout
    int64_t watch_ms;            //  A stream's heartbeat
    int64_t next_expire_ms;      //  Overdue replies are looked for then
};

static void
s_stream_destroy (s_stream_t **self_p)
{
    if (*self_p) {
        free ((*self_p)->job);
        free ((*self_p)->bytes);
        free (*self_p);
        *self_p = NULL;
    }
}

static void
s_call_unref (s_call_t *call)
{
    if (--call->refs > 0)
        return;
    free (call->param);
    free (call->token);
    free (call->body);
    free (call->answer);
    s_stream_destroy (&call->stream);
    free (call);
}

static void
s_resume (s_call_t *call)
{
    if (call->suspended && call->connection) {
        call->suspended = false;
        MHD_resume_connection (call->connection);
    }
}

//  The answer STATUS with the JSON VALUE (taken).
static void
s_answer_json (s_call_t *call, int status, json_t *value)
{
    free (call->answer);
    call->answer = json_dumps (value, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref (value);
    if (!call->answer)
        call->answer = strdup ("{\"code\":\"internal\",\"message\":"
                               "\"the answer could not be encoded\","
                               "\"details\":[]}");
    //  One line, as curl users like it
    size_t len = strlen (call->answer);
    char *line = (char *) realloc (call->answer, len + 2);
    if (line) {
        line [len] = '\n';
        line [len + 1] = 0;
        call->answer = line;
        len++;
    }
    call->answer_size = len;
    call->status = status;
    call->content_type = "application/json";
    call->stage = S_ANSWERED;
    s_resume (call);
}

//  The error {code, message, details} (DETAILS taken, may be NULL). A
//  MESSAGE that is not UTF-8 (it quotes a path or a query value, whose
//  bytes are the client's) has its bytes past ASCII shown as '?'.
static json_t *
s_error_json (const char *code, const char *message, json_t *details)
{
    json_t *text = json_string (message);
    if (!text) {
        char *ascii = strdup (message);
        if (ascii) {
            for (char *byte = ascii; *byte; byte++)
                if ((unsigned char) *byte >= 0x80)
                    *byte = '?';
            text = json_string (ascii);
            free (ascii);
        }
    }
    if (!text)
        text = json_string ("(the message could not be shown)");
    return json_pack ("{s:s, s:o, s:o}", "code", code, "message", text,
                      "details", details ? details : json_array ());
}

static void
s_answer_error (s_call_t *call, int status, const char *code,
                const char *format, ...) __attribute__ ((format (printf, 4, 5)));

static void
s_answer_error (s_call_t *call, int status, const char *code,
                const char *format, ...)
{
    char message [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (message, sizeof message, format, args);
    va_end (args);
    s_answer_json (call, status, s_error_json (code, message, NULL));
}

//  A text answer (the metrics, a file): DATA is copied.
static void
s_answer_text (s_call_t *call, int status, const char *content_type,
               const void *data, size_t size)
{
    free (call->answer);
    call->answer = (char *) malloc (size + 1);
    assert (call->answer);
    memcpy (call->answer, data, size);
    call->answer [size] = 0;
    call->answer_size = size;
    call->status = status;
    call->content_type = content_type;
    call->stage = S_ANSWERED;
    s_resume (call);
}

//  ---------------------------------------------------------------------
//  The bridge

//  Sends the request in BODY (or a probe when KIND says so) for CALL, due
//  within TIMEOUT_MS. Returns 0, or -1 when the bridge refused it.
static int
s_send (s_server_t *self, s_call_t *call, const char *kind, const pw_t *body,
        int64_t timeout_ms)
{
    snprintf (call->tag, sizeof call->tag, "%016" PRIx64, ++self->next_tag);
    const char *token = call->token ? call->token : "";
    void *handle = zsock_resolve (self->bridge);
    int rc = zmq_send (handle, call->tag, 16, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0)
        rc = zmq_send (handle, kind, strlen (kind), ZMQ_SNDMORE);
    if (rc >= 0)
        rc = zmq_send (handle, token, strlen (token), ZMQ_SNDMORE);
    if (rc >= 0)
        rc = zmq_send (handle, body ? pw_data (body) : "",
                       body ? pw_size (body) : 0, 0);
    if (rc < 0) {
        call->tag [0] = 0;
        return -1;
    }
    call->refs++;
    call->deadline_ms = zclock_mono () + timeout_ms;
    zhashx_insert (self->awaited, call->tag, call);
    return 0;
}

//  A fresh request id for a request that came without X-Request-Id.
static void
s_request_id (s_server_t *self, char *id, size_t id_len)
{
    snprintf (id, id_len, "http-%s-%" PRIu64, self->id_prefix,
              ++self->next_id);
}

//  ---------------------------------------------------------------------
//  Streams: progress and events of one job until it ends

static void
s_stream_write (s_call_t *call, const char *text, size_t len)
{
    s_stream_t *stream = call->stream;
    if (stream->sent == stream->size)
        stream->sent = stream->size = 0;
    if (stream->size + len > stream->max) {
        size_t max = stream->max ? stream->max : 4096;
        while (max < stream->size + len)
            max *= 2;
        stream->bytes = (char *) realloc (stream->bytes, max);
        assert (stream->bytes);
        stream->max = max;
    }
    memcpy (stream->bytes + stream->size, text, len);
    stream->size += len;
    s_resume (call);
}

//  Writes one event NAME with the JSON VALUE (taken) and, when ID >= 0,
//  an id line.
static void
s_stream_event (s_call_t *call, const char *name, json_t *value, int64_t id)
{
    char *data = json_dumps (value, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref (value);
    char head [96];
    int head_len = id >= 0
                       ? snprintf (head, sizeof head, "id: %" PRId64
                                   "\nevent: %s\ndata: ", id, name)
                       : snprintf (head, sizeof head, "event: %s\ndata: ",
                                   name);
    s_stream_write (call, head, (size_t) head_len);
    if (data)
        s_stream_write (call, data, strlen (data));
    s_stream_write (call, "\n\n", 2);
    free (data);
}

static void
s_stream_end (s_call_t *call, const char *status)
{
    s_stream_event (call, "end", json_pack ("{s:s, s:s}", "job",
                                            call->stream->job, "status",
                                            status),
                    -1);
    call->stream->ended = true;
}

//  Asks for what the stream needs next: the events after the last one
//  written, or the job's next change.
static void
s_stream_next (s_server_t *self, s_call_t *call)
{
    s_stream_t *stream = call->stream;
    char id [96];
    s_request_id (self, id, sizeof id);
    pw_t *request = pw_new ();
    if (stream->events_next) {
        proto_request_begin (request, "job.events", id, 2);
        pw_str (request, "job");
        pw_str (request, stream->job);
        pw_str (request, "after");
        pw_int (request, stream->after);
    }
    else
    if (stream->output_next) {
        proto_request_begin (request, "job.output_events", id, 2);
        pw_str (request, "job");
        pw_str (request, stream->job);
        pw_str (request, "after");
        pw_int (request, (int64_t) stream->output_after);
    }
    else {
        proto_request_begin (request, "job.watch", id, 3);
        pw_str (request, "job");
        pw_str (request, stream->job);
        pw_str (request, "after");
        pw_int (request, (int64_t) stream->version);
        pw_str (request, "timeout_ms");
        pw_int (request, self->watch_ms);
    }
    if (s_send (self, call, HTTP_KIND_REQUEST, request,
                self->watch_ms + S_CALL_TIMEOUT_MS) != 0) {
        s_stream_event (call, "error",
                        s_error_json ("unavailable", "the broker is busy",
                                      NULL),
                        -1);
        stream->ended = true;
        s_resume (call);
    }
    pw_destroy (&request);
}

static bool
s_status_final (const char *status)
{
    return status
           && (strcmp (status, "completed") == 0
               || strcmp (status, "partial_failure") == 0
               || strcmp (status, "failed") == 0
               || strcmp (status, "cancelled") == 0);
}

//  The reply REPLY (decoded) to a stream's request.
static void
s_stream_on_reply (s_server_t *self, s_call_t *call, const pv_t *reply)
{
    s_stream_t *stream = call->stream;
    bool opening = call->stage == S_WAITING;
    if (!pv_str_eq (pv_map_get (reply, "type"), "ok")) {
        char *code = pv_strdup (pv_map_get (reply, "code"));
        json_t *error = pj_from_pv (reply);
        json_object_del (error, "v");
        json_object_del (error, "type");
        json_object_del (error, "id");
        if (!json_object_get (error, "details"))
            json_object_set_new (error, "details", json_array ());
        if (opening)
            //  Nothing was sent yet: a plain error answer
            s_answer_json (call, s_status_of (code ? code : ""), error);
        else {
            s_stream_event (call, "error", error, -1);
            stream->ended = true;
            s_resume (call);
        }
        free (code);
        return;
    }
    const pv_t *data = pv_map_get (reply, "data");
    if (stream->events_next) {
        const pv_t *events = pv_map_get (data, "events");
        for (size_t index = 0; index < pv_size (events); index++) {
            const pv_t *event = pv_array_at (events, index);
            int64_t seq = -1;
            pv_get_int (pv_map_get (event, "seq"), &seq);
            s_stream_event (call, "event", pj_from_pv (event), seq);
            if (seq > stream->after)
                stream->after = seq;
        }
        stream->events_next = false;
        stream->output_next = true;
        s_stream_next (self, call);
        return;
    }
    if (stream->output_next) {
        //  {job, next, lost, events: [{seq, step, node, attempt, stream,
        //  offset, data}]}: each piece as an output event
        const pv_t *pieces = pv_map_get (data, "events");
        for (size_t index = 0; index < pv_size (pieces); index++) {
            json_t *piece = pj_from_pv (pv_array_at (pieces, index));
            json_object_del (piece, "seq");
            json_object_set_new (piece, "job", json_string (stream->job));
            s_stream_event (call, "output", piece, -1);
        }
        int64_t next = 0;
        if (pv_get_int (pv_map_get (data, "next"), &next) == 0
            && next > (int64_t) stream->output_after)
            stream->output_after = (uint64_t) next;
        //  Until a page brings nothing (one may stop short of the newest)
        if (pv_size (pieces) > 0) {
            s_stream_next (self, call);
            return;
        }
        stream->output_next = false;
        if (stream->final) {
            s_stream_end (call, stream->status);
            s_resume (call);
            return;
        }
        s_stream_next (self, call);
        return;
    }
    //  job.watch: {version, changed, progress}
    bool changed = true;
    int64_t version = 0;
    pv_get_bool (pv_map_get (data, "changed"), &changed);
    pv_get_int (pv_map_get (data, "version"), &version);
    const pv_t *progress = pv_map_get (data, "progress");
    if (opening) {
        //  The headers go out with the first answer
        call->status = 200;
        call->stage = S_ANSWERED;
        s_stream_write (call, "retry: 3000\n\n", 13);
    }
    stream->version = (uint64_t) version;
    if (!changed && !opening) {
        s_stream_write (call, ": keepalive\n\n", 13);
        s_stream_next (self, call);
        return;
    }
    s_stream_event (call, "progress", pj_from_pv (progress), -1);
    char *status = pv_strdup (pv_map_get (progress, "status"));
    stream->final = s_status_final (status);
    snprintf (stream->status, sizeof stream->status, "%s",
              status ? status : "");
    free (status);
    stream->events_next = true;
    s_stream_next (self, call);
}

//  MHD's content reader for a stream.
static ssize_t
s_stream_read (void *cls, uint64_t pos, char *buf, size_t max)
{
    s_call_t *call = (s_call_t *) cls;
    s_stream_t *stream = call->stream;
    if (stream->sent < stream->size) {
        size_t len = stream->size - stream->sent;
        if (len > max)
            len = max;
        memcpy (buf, stream->bytes + stream->sent, len);
        stream->sent += len;
        return (ssize_t) len;
    }
    if (stream->ended || call->server->stopping)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (!call->connection)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    //  Nothing to say: wait until the reactor answers
    MHD_suspend_connection (call->connection);
    call->suspended = true;
    return 0;
}

//  Adds DELTA to a figure (read by the broker's thread).
static void
s_count (uint64_t *figure, int64_t delta)
{
    __atomic_add_fetch (figure, (uint64_t) delta, __ATOMIC_RELAXED);
}

static void
s_stream_free (void *cls)
{
    s_call_t *call = (s_call_t *) cls;
    s_count (&call->server->stats->streams, -1);
    s_call_unref (call);
}

//  ---------------------------------------------------------------------
//  Replies

//  The reply to a plain API call.
static void
s_on_api_reply (s_call_t *call, const pv_t *reply)
{
    if (pv_str_eq (pv_map_get (reply, "type"), "ok")) {
        const pv_t *data = pv_map_get (reply, "data");
        if (call->route == &s_method_check) {
            s_answer_error (call, 405, "method_not_allowed",
                            "%s %s: this path takes %s", call->method,
                            call->url, call->allow);
            return;
        }
        if (call->route == &s_path_check) {
            s_answer_error (call, 404, PROTO_ERR_NOT_FOUND, "no route %s %s "
                            "(the API is under /api/v1: see "
                            "/api/v1/openapi.json)", call->method, call->url);
            return;
        }
        if (call->route->kind == S_ROUTE_METRICS) {
            size_t len = 0;
            const char *text = pv_str (pv_map_get (data, "text"), &len);
            if (text) {
                s_answer_text (call, 200, "text/plain; version=0.0.4; "
                               "charset=utf-8", text, len);
                return;
            }
        }
        s_answer_json (call, call->route->ok_status, pj_from_pv (data));
        return;
    }
    char *code = pv_strdup (pv_map_get (reply, "code"));
    json_t *error = pj_from_pv (reply);
    json_object_del (error, "v");
    json_object_del (error, "type");
    json_object_del (error, "id");
    if (!json_object_get (error, "details"))
        json_object_set_new (error, "details", json_array ());
    if (!json_object_get (error, "code"))
        json_object_set_new (error, "code", json_string ("internal"));
    s_answer_json (call, s_status_of (code ? code : ""), error);
    free (code);
}

//  The cluster part of a probe's reply PROBE as JSON: role ("alone",
//  "active" or "standby"), this member's name, the cluster, the epoch,
//  and the active's name, client endpoint and HTTP URL (those known).
static json_t *
s_leader_json (const pv_t *probe)
{
    json_t *leader = json_object ();
    const char *keys [] = {"role", "name", "cluster", "epoch", "leader",
                           "client", "http"};
    for (size_t index = 0; index < sizeof keys / sizeof keys [0]; index++) {
        const pv_t *value = pv_map_get (probe, keys [index]);
        if (value)
            json_object_set_new (leader, keys [index], pj_from_pv (value));
    }
    if (!json_object_get (leader, "role"))
        json_object_set_new (leader, "role", json_string ("alone"));
    return leader;
}

//  The reply to a probe: /healthz answers that the reactor lives;
//  /readyz whether it takes work; /api/v1/leader whether it leads (a
//  broker alone does).
static void
s_on_probe_reply (s_call_t *call, const pv_t *probe)
{
    bool maintenance = false;
    int64_t uptime_ms = 0;
    pv_get_bool (pv_map_get (probe, "maintenance"), &maintenance);
    pv_get_int (pv_map_get (probe, "uptime_ms"), &uptime_ms);
    char *storage = pv_strdup (pv_map_get (probe, "storage"));
    char *error = pv_strdup (pv_map_get (probe, "error"));
    bool standby = pv_str_eq (pv_map_get (probe, "role"), "standby");
    if (call->route->kind == S_ROUTE_HEALTHZ)
        s_answer_json (call, 200, json_pack ("{s:s, s:I}", "status", "ok",
                                             "uptime_ms",
                                             (json_int_t) uptime_ms));
    else
    if (call->route->kind == S_ROUTE_LEADER)
        s_answer_json (call, standby ? 503 : 200, s_leader_json (probe));
    else
    if (standby) {
        json_t *leader = s_leader_json (probe);
        const char *active = json_string_value (json_object_get (leader,
                                                                 "leader"));
        const char *url = json_string_value (json_object_get (leader,
                                                              "http"));
        char text [600];
        snprintf (text, sizeof text, "this broker is a standby of its "
                  "cluster; %s%s%s%s", active ? "the active is " : "no "
                  "active is known yet", active ? active : "",
                  url ? ", at " : "", url ? url : "");
        s_answer_json (call, 503, json_pack ("{s:s, s:[s], s:o}", "status",
                                             "standby", "reasons", text,
                                             "cluster", leader));
    }
    else {
        json_t *reasons = json_array ();
        if (maintenance)
            json_array_append_new (reasons, json_string (
                "the broker is in maintenance (drained): it admits no new "
                "jobs"));
        if (storage && strcmp (storage, "ok") != 0) {
            char text [600];
            snprintf (text, sizeof text, "the store %s: %s",
                      strcmp (storage, "full") == 0 ? "is full"
                                                    : "cannot be written",
                      error ? error : "");
            json_array_append_new (reasons, json_string (text));
        }
        bool ready = json_array_size (reasons) == 0;
        s_answer_json (call, ready ? 200 : 503,
                       json_pack ("{s:s, s:b, s:s, s:o}", "status",
                                  ready ? "ready" : "not_ready",
                                  "maintenance", maintenance, "storage",
                                  storage ? storage : "unknown", "reasons",
                                  reasons));
    }
    free (storage);
    free (error);
}

//  Reads the replies that wait on the bridge.
static void
s_on_bridge (s_server_t *self)
{
    while (true) {
        zmsg_t *msg = zmsg_recv_nowait (self->bridge);
        if (!msg)
            break;
        zframe_t *tag = zmsg_first (msg);
        zframe_t *body = zmsg_next (msg);
        char key [17] = "";
        if (tag && zframe_size (tag) == 16)
            memcpy (key, zframe_data (tag), 16);
        s_call_t *call = key [0] ? (s_call_t *) zhashx_lookup (self->awaited,
                                                               key)
                                 : NULL;
        if (!call || !body) {
            zmsg_destroy (&msg);
            continue;    //  Its time ran out, or it is not ours
        }
        zhashx_delete (self->awaited, key);
        call->tag [0] = 0;
        pv_doc_t *doc = NULL;
        if (!call->connection)
            ;   //  Its client is gone
        else
        if (pv_doc_decode (zframe_data (body), zframe_size (body), &doc, NULL,
                           0) != 0)
            s_answer_error (call, 500, "internal",
                            "the broker's reply could not be read");
        else
        if (call->stream)
            s_stream_on_reply (self, call, pv_doc_root (doc));
        else
        if (S_PROBE_ROUTE (call->route->kind))
            s_on_probe_reply (call, pv_doc_root (doc));
        else
            s_on_api_reply (call, pv_doc_root (doc));
        pv_doc_destroy (&doc);
        zmsg_destroy (&msg);
        s_call_unref (call);
    }
}

//  Calls whose reply is overdue are answered 503 (the reply, should it
//  come, is dropped).
static void
s_expire (s_server_t *self, int64_t now_ms)
{
    zlistx_t *late = NULL;
    for (s_call_t *call = (s_call_t *) zhashx_first (self->awaited); call;
         call = (s_call_t *) zhashx_next (self->awaited))
        if (now_ms >= call->deadline_ms) {
            if (!late)
                late = zlistx_new ();
            zlistx_add_end (late, call);
        }
    if (!late)
        return;
    for (s_call_t *call = (s_call_t *) zlistx_first (late); call;
         call = (s_call_t *) zlistx_next (late)) {
        s_count (&self->stats->late, 1);
        zhashx_delete (self->awaited, call->tag);
        call->tag [0] = 0;
        if (call->connection) {
            const char *what = S_PROBE_ROUTE (call->route->kind)
                                   ? "the broker's reactor did not answer "
                                     "within 1s"
                                   : "the broker did not answer in time";
            if (call->stream && call->stage != S_WAITING) {
                s_stream_event (call, "error",
                                s_error_json ("unavailable", what, NULL), -1);
                call->stream->ended = true;
                s_resume (call);
            }
            else
            if (S_PROBE_ROUTE (call->route->kind))
                s_answer_json (call, 503,
                               json_pack ("{s:s, s:s}", "status",
                                          "unavailable", "reason", what));
            else
                s_answer_error (call, 503, "unavailable", "%s", what);
        }
        s_call_unref (call);
    }
    zlistx_destroy (&late);
}

//  ---------------------------------------------------------------------
//  Requests

//  The dashboard's files, built into the broker (webfiles.h): 0 with the
//  file's bytes, size and type when PATH names one, else -1.
static int
s_webfile_find (const char *path, const void **data_p, size_t *size_p,
                const char **type_p)
{
    return webfiles_find (path, data_p, size_p, type_p);
}

typedef struct {
    const char *key [S_QUERY_MAX];   //  Query parameter names (MHD's)
    const char *value [S_QUERY_MAX]; //  Their values (may be NULL)
    size_t count;                    //  How many
    bool overflow;                   //  More than S_QUERY_MAX
} s_query_t;

static enum MHD_Result
s_query_item (void *cls, enum MHD_ValueKind kind, const char *key,
              const char *value)
{
    s_query_t *query = (s_query_t *) cls;
    if (query->count == S_QUERY_MAX) {
        query->overflow = true;
        return MHD_NO;
    }
    query->key [query->count] = key;
    query->value [query->count++] = value;
    return MHD_YES;
}

//  The type ('s', 'i', 'b') of query parameter NAME in the route's list,
//  or 0 when the route takes no such parameter.
static char
s_query_type (const char *list, const char *name)
{
    size_t len = strlen (name);
    while (list && *list) {
        const char *colon = strchr (list, ':');
        if (!colon)
            break;
        if ((size_t) (colon - list) == len && strncmp (list, name, len) == 0)
            return colon [1];
        list = strchr (colon, ',');
        list = list ? list + 1 : NULL;
    }
    return 0;
}

//  True when TEXT is UTF-8 text (what the wire's strings must be).
static bool
s_is_utf8 (const char *text)
{
    json_t *string = json_string (text);
    json_decref (string);
    return string != NULL;
}

//  Writes the value TEXT of query parameter NAME, of TYPE, to REQUEST.
//  Returns 0, or -1 after answering 400.
static int
s_query_write (s_call_t *call, pw_t *request, const char *name, char type,
               const char *text)
{
    if (!text)
        text = "";
    if (type == 'i') {
        char *end = NULL;
        errno = 0;
        long long number = strtoll (text, &end, 10);
        if (!*text || *end || errno) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "%s: expected an integer, got '%.64s'", name,
                            text);
            return -1;
        }
        pw_str (request, name);
        pw_int (request, number);
    }
    else
    if (type == 'b') {
        if (strcmp (text, "true") != 0 && strcmp (text, "false") != 0) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "%s: expected true or false, got '%.64s'", name,
                            text);
            return -1;
        }
        pw_str (request, name);
        pw_bool (request, strcmp (text, "true") == 0);
    }
    else {
        if (!s_is_utf8 (text)) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "query parameter '%s': its value is not UTF-8 "
                            "text", name);
            return -1;
        }
        pw_str (request, name);
        pw_str (request, text);
    }
    return 0;
}

//  Parses the body as a JSON object into *BODY_P. Returns 0, or -1 after
//  answering 400.
static int
s_parse_body (s_call_t *call, json_t **body_p)
{
    *body_p = NULL;
    if (call->body_size == 0) {
        if (call->route->body == S_BODY_WRAP) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "this request needs a JSON body (%s)",
                            call->route->wrap);
            return -1;
        }
        return 0;
    }
    json_error_t error;
    json_t *body = json_loadb (call->body, call->body_size,
                               JSON_REJECT_DUPLICATES, &error);
    if (!body) {
        char why [300];
        snprintf (why, sizeof why, "the body is not JSON: %s at line %d, "
                  "column %d (byte %d)", error.text, error.line, error.column,
                  error.position);
        s_answer_json (call, 400,
                       json_pack ("{s:s, s:s, s:[s], s:{s:i, s:i, s:i}}",
                                  "code", PROTO_ERR_MALFORMED, "message", why,
                                  "details", error.text, "position", "line",
                                  error.line, "column", error.column, "byte",
                                  error.position));
        return -1;
    }
    if (!json_is_object (body)) {
        json_decref (body);
        s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                        "the body must be a JSON object");
        return -1;
    }
    *body_p = body;
    return 0;
}

//  Builds the wire request of an API call and sends it. The answer, when
//  it comes at once (a bad request), is set on CALL.
static void
s_start_api (s_server_t *self, s_call_t *call)
{
    const s_route_t *route = call->route;
    struct MHD_Connection *connection = call->connection;
    s_query_t query;
    memset (&query, 0, sizeof query);
    MHD_get_connection_values (connection, MHD_GET_ARGUMENT_KIND,
                               s_query_item, &query);
    if (query.overflow) {
        s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                        "more than %d query parameters", S_QUERY_MAX);
        return;
    }
    for (size_t index = 0; index < query.count; index++) {
        if (!s_query_type (route->query, query.key [index])) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "unknown query parameter '%.64s' (%s takes %s)",
                            query.key [index], route->path,
                            route->query ? route->query : "none");
            return;
        }
        for (size_t other = 0; other < index; other++)
            if (strcmp (query.key [other], query.key [index]) == 0) {
                s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                                "query parameter '%.64s' given twice",
                                query.key [index]);
                return;
            }
    }
    json_t *body = NULL;
    if (route->body != S_BODY_NONE && s_parse_body (call, &body) != 0)
        return;
    size_t fields = (call->param ? 1 : 0) + query.count
                    + (route->body == S_BODY_WRAP ? 1
                       : body                     ? json_object_size (body)
                                                  : 0);
    if (body && route->body == S_BODY_FIELDS) {
        static const char *reserved [] = {"v", "type", "id"};
        for (size_t index = 0; index < 3; index++)
            if (json_object_get (body, reserved [index])) {
                s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                                "body: '%s' is not a field of this request "
                                "(the route sets it)", reserved [index]);
                json_decref (body);
                return;
            }
        if (route->param && json_object_get (body, route->param)) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "body: '%s' is given by the path", route->param);
            json_decref (body);
            return;
        }
    }
    //  A job's W3C trace context comes in the traceparent header; one
    //  that is not valid is refused, as job.submit refuses it
    const char *traceparent = NULL;
    if (strcmp (route->type, "job.submit") == 0)
        traceparent = MHD_lookup_connection_value (connection,
                                                   MHD_HEADER_KIND,
                                                   "traceparent");
    if (traceparent) {
        trace_ctx_t trace;
        char why [160];
        if (trace_parse (traceparent, &trace, why, sizeof why) != 0) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "header %s", why);
            json_decref (body);
            return;
        }
        fields++;
    }
    char id [S_REQUEST_ID_MAX + 1];
    const char *given = MHD_lookup_connection_value (connection,
                                                     MHD_HEADER_KIND,
                                                     "X-Request-Id");
    if (given && *given && strlen (given) <= S_REQUEST_ID_MAX
        && s_is_utf8 (given))
        snprintf (id, sizeof id, "%s", given);
    else
    if (given && *given) {
        if (strlen (given) > S_REQUEST_ID_MAX)
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "X-Request-Id: at most %d bytes",
                            S_REQUEST_ID_MAX);
        else
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "X-Request-Id: not UTF-8 text");
        json_decref (body);
        return;
    }
    else
        s_request_id (self, id, sizeof id);
    pw_t *request = pw_new ();
    proto_request_begin (request, route->type, id, fields);
    if (call->param) {
        pw_str (request, route->param);
        pw_str (request, call->param);
    }
    if (traceparent) {
        pw_str (request, "traceparent");
        pw_str (request, traceparent);
    }
    int rc = 0;
    for (size_t index = 0; index < query.count && rc == 0; index++)
        rc = s_query_write (call, request, query.key [index],
                            s_query_type (route->query, query.key [index]),
                            query.value [index]);
    char why [256];
    if (rc == 0 && route->body == S_BODY_WRAP) {
        pw_str (request, route->wrap);
        rc = pj_write (request, body, why, sizeof why);
    }
    else
    if (rc == 0 && body) {
        const char *key;
        size_t key_len;
        json_t *value;
        json_object_keylen_foreach (body, key, key_len, value) {
            pw_strn (request, key, key_len);
            if ((rc = pj_write (request, value, why, sizeof why)) != 0)
                break;
        }
    }
    if (rc == -2)
        s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST, "body: %s", why);
    else
    if (rc == 0) {
        int64_t timeout_ms = S_CALL_TIMEOUT_MS;
        if (strcmp (route->type, "job.watch") == 0
            || strcmp (route->type, "job.changes") == 0
            || strcmp (route->type, "node.changes") == 0)
            timeout_ms += 60000;
        //  The dashboard says so in a header: the audit trail names the
        //  face (it grants nothing; the token decides)
        const char *face = MHD_lookup_connection_value (connection,
                                                        MHD_HEADER_KIND,
                                                        "X-Grid-Face");
        const char *kind = route->kind == S_ROUTE_METRICS
                                   && self->config.metrics_public
                               ? HTTP_KIND_PUBLIC
                           : face && strcmp (face, "dashboard") == 0
                               ? HTTP_KIND_DASHBOARD
                               : HTTP_KIND_REQUEST;
        if (s_send (self, call, kind, request, timeout_ms) != 0)
            s_answer_error (call, 503, "unavailable", "the broker is busy");
        else
            call->stage = S_WAITING;
    }
    json_decref (body);
    pw_destroy (&request);
}

//  Opens a stream: its first job.watch answers at once.
static void
s_start_stream (s_server_t *self, s_call_t *call)
{
    int64_t after = 0;
    s_query_t query;
    memset (&query, 0, sizeof query);
    MHD_get_connection_values (call->connection, MHD_GET_ARGUMENT_KIND,
                               s_query_item, &query);
    //  Its one query parameter is after, as for the other routes an
    //  unknown one is refused
    if (query.overflow || query.count > 1
        || (query.count == 1 && strcmp (query.key [0], "after") != 0)) {
        s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                        "the stream takes one query parameter, after (got "
                        "'%.64s'%s)", query.key [0],
                        query.count > 1 ? " and more" : "");
        return;
    }
    const char *text = MHD_lookup_connection_value (call->connection,
                                                    MHD_GET_ARGUMENT_KIND,
                                                    "after");
    if (!text)
        text = MHD_lookup_connection_value (call->connection, MHD_HEADER_KIND,
                                            "Last-Event-ID");
    if (text) {
        char *end = NULL;
        long long number = strtoll (text, &end, 10);
        if (!*text || *end || number < 0 || number > UINT32_MAX) {
            s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                            "after: expected an event seq, got '%.64s'", text);
            return;
        }
        after = number;
    }
    call->stream = (s_stream_t *) zmalloc (sizeof (s_stream_t));
    call->stream->job = strdup (call->param);
    call->stream->after = after;
    char id [96];
    s_request_id (self, id, sizeof id);
    pw_t *request = pw_new ();
    proto_request_begin (request, "job.watch", id, 1);
    pw_str (request, "job");
    pw_str (request, call->param);
    if (s_send (self, call, HTTP_KIND_REQUEST, request, S_CALL_TIMEOUT_MS)
        != 0)
        s_answer_error (call, 503, "unavailable", "the broker is busy");
    else
        call->stage = S_WAITING;
    pw_destroy (&request);
}

//  Routes a whole request: answers it at once or sends it on.
static void
s_dispatch (s_server_t *self, s_call_t *call, const char *url,
            const char *method)
{
    bool head = strcmp (method, "HEAD") == 0;
    const char *as = head ? "GET" : method;
    bool path_known = false;
    bool path_public = false;
    char *allow = call->allow;
    allow [0] = 0;
    for (size_t index = 0; index < S_ROUTE_COUNT; index++) {
        char *param = NULL;
        if (!s_path_match (s_routes [index].path, s_routes [index].rest, url,
                           &param))
            continue;
        if (strcmp (s_routes [index].method, as) == 0) {
            call->route = &s_routes [index];
            call->param = param;
            break;
        }
        free (param);
        path_known = true;
        s_route_kind_t kind = s_routes [index].kind;
        if (S_PROBE_ROUTE (kind) || kind == S_ROUTE_OPENAPI
            || (kind == S_ROUTE_METRICS && self->config.metrics_public))
            path_public = true;
        size_t used = strlen (allow);
        snprintf (allow + used, sizeof call->allow - used, "%s%s",
                  used ? ", " : "", s_routes [index].method);
    }
    if (!call->route) {
        bool api = strncmp (url, "/api/", 5) == 0;
        if ((path_known && !path_public) || (!path_known && api)) {
            call->route = path_known ? &s_method_check : &s_path_check;
            char id [96];
            s_request_id (self, id, sizeof id);
            pw_t *request = pw_new ();
            proto_request_begin (request, "whoami", id, 0);
            if (s_send (self, call, HTTP_KIND_REQUEST, request,
                        S_CALL_TIMEOUT_MS) != 0)
                s_answer_error (call, 503, "unavailable", "the broker is busy");
            else
                call->stage = S_WAITING;
            pw_destroy (&request);
            return;
        }
        if (path_known) {
            s_answer_error (call, 405, "method_not_allowed",
                            "%s %s: this path takes %s", method, url, allow);
            return;
        }
        const void *data = NULL;
        size_t size = 0;
        const char *type = NULL;
        if (strncmp (url, "/api/", 5) != 0 && !strcmp (as, "GET")
            && s_webfile_find (url, &data, &size, &type) == 0) {
            //  The set's ETag: a browser that has it gets 304
            call->etag = webfiles_etag ();
            const char *match = MHD_lookup_connection_value (
                call->connection, MHD_HEADER_KIND, "If-None-Match");
            if (match && call->etag && strcmp (match, call->etag) == 0)
                s_answer_text (call, 304, type, "", 0);
            else
                s_answer_text (call, 200, type, data, size);
            return;
        }
        s_answer_error (call, 404, PROTO_ERR_NOT_FOUND, "no route %s %s "
                        "(the API is under /api/v1: see /api/v1/openapi.json)",
                        method, url);
        return;
    }
    if (call->too_large) {
        s_answer_error (call, 413, "payload_too_large",
                        "the body is larger than %" PRIu64 " bytes "
                        "(http.max_body)", self->config.max_body);
        return;
    }
    if (call->param && !s_is_utf8 (call->param)) {
        s_answer_error (call, 400, PROTO_ERR_BAD_REQUEST,
                        "%s (in the path): not UTF-8 text",
                        call->route->param ? call->route->param : "the path");
        return;
    }
    switch (call->route->kind) {
        case S_ROUTE_OPENAPI:
            s_answer_text (call, 200, "application/json", grid_openapi_json,
                           strlen (grid_openapi_json));
            return;
        case S_ROUTE_HEALTHZ:
        case S_ROUTE_READYZ:
        case S_ROUTE_LEADER:
            //  No token: the probe asks the reactor only how it is
            free (call->token);
            call->token = NULL;
            if (s_send (self, call, HTTP_KIND_PROBE, NULL, S_PROBE_TIMEOUT_MS)
                != 0)
                s_answer_json (call, 503,
                               json_pack ("{s:s, s:s}", "status",
                                          "unavailable", "reason",
                                          "the broker is busy"));
            else
                call->stage = S_WAITING;
            return;
        case S_ROUTE_STREAM:
            s_start_stream (self, call);
            return;
        case S_ROUTE_METRICS:
        case S_ROUTE_API:
            s_start_api (self, call);
            return;
    }
}

//  The bearer token of CONNECTION (a fresh string), or NULL when none
//  was sent; "-" (no token at all) for another scheme.
static char *
s_bearer (struct MHD_Connection *connection)
{
    const char *header = MHD_lookup_connection_value (connection,
                                                      MHD_HEADER_KIND,
                                                      "Authorization");
    if (!header)
        return NULL;
    if (strncasecmp (header, "Bearer ", 7) != 0)
        return strdup ("-");
    header += 7;
    while (*header == ' ')
        header++;
    size_t len = strlen (header);
    while (len && header [len - 1] == ' ')
        len--;
    if (len == 0 || len > HTTP_MAX_TOKEN)
        return strdup ("-");
    return strndup (header, len);
}

//  Queues CALL's answer.
static enum MHD_Result
s_queue (s_call_t *call)
{
    struct MHD_Response *response;
    call->stage = S_DONE;
    if (call->stream && call->status == 200) {
        response = MHD_create_response_from_callback (
            MHD_SIZE_UNKNOWN, 4096, s_stream_read, call, s_stream_free);
        if (!response)
            return MHD_NO;
        call->refs++;
        s_count (&call->server->stats->streams, 1);
        MHD_add_response_header (response, "Content-Type",
                                 "text/event-stream");
        MHD_add_response_header (response, "Cache-Control", "no-cache");
        MHD_add_response_header (response, "X-Accel-Buffering", "no");
    }
    else {
        response = MHD_create_response_from_buffer (
            call->answer_size, call->answer, MHD_RESPMEM_MUST_COPY);
        if (!response)
            return MHD_NO;
        MHD_add_response_header (response, "Content-Type",
                                 call->content_type ? call->content_type
                                                    : "application/json");
        //  Dashboard files are checked (ETag) before each use; API
        //  answers are never kept
        MHD_add_response_header (response, "Cache-Control",
                                 call->etag ? "no-cache" : "no-store");
        if (call->etag)
            MHD_add_response_header (response, "ETag", call->etag);
        if (call->status == 401)
            MHD_add_response_header (response, "WWW-Authenticate",
                                     "Bearer realm=\"grid\"");
        if (call->status == 405 && call->allow [0])
            MHD_add_response_header (response, "Allow", call->allow);
        if (call->status == 429 || call->status == 503)
            MHD_add_response_header (response, "Retry-After", "5");
        if (call->status == 413)
            MHD_add_response_header (response, "Connection", "close");
    }
    MHD_add_response_header (response, "X-Content-Type-Options", "nosniff");
    if (log_enabled (LOG_LEVEL_DEBUG))
        log_write (LOG_LEVEL_DEBUG, NULL, "http: %s %s: %d", call->method,
                   call->url, call->status);
    http_stats_t *stats = call->server->stats;
    s_count (&stats->requests, 1);
    if (call->status >= 400 && call->status < 500)
        s_count (&stats->client_errors, 1);
    if (call->status >= 500)
        s_count (&stats->server_errors, 1);
    if (call->status == 413)
        s_count (&stats->too_large, 1);
    enum MHD_Result rc = MHD_queue_response (call->connection,
                                             (unsigned int) call->status,
                                             response);
    MHD_destroy_response (response);
    return rc;
}

static enum MHD_Result
s_access (void *cls, struct MHD_Connection *connection, const char *url,
          const char *method, const char *version, const char *upload_data,
          size_t *upload_data_size, void **con_cls)
{
    s_server_t *self = (s_server_t *) cls;
    s_call_t *call = (s_call_t *) *con_cls;
    if (!call) {
        call = (s_call_t *) zmalloc (sizeof (s_call_t));
        call->server = self;
        call->connection = connection;
        call->refs = 1;
        call->stage = S_READING;
        call->method = method;
        call->url = url;
        *con_cls = call;
        //  A body declared too large is refused before it is read
        const char *length = MHD_lookup_connection_value (
            connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (length && strtoull (length, NULL, 10) > self->config.max_body) {
            call->too_large = true;
            s_answer_error (call, 413, "payload_too_large",
                            "the body is larger than %" PRIu64 " bytes "
                            "(http.max_body)", self->config.max_body);
            return s_queue (call);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t size = *upload_data_size;
        *upload_data_size = 0;
        if (call->stage != S_READING)
            return MHD_YES;
        if (call->too_large || call->body_size + size > self->config.max_body) {
            //  Read to its end (up to a bound) and dropped, so that the
            //  client, still sending, gets to read the 413
            call->too_large = true;
            call->discarded += size;
            free (call->body);
            call->body = NULL;
            call->body_size = 0;
            if (call->discarded <= S_DISCARD_MAX * self->config.max_body)
                return MHD_YES;
            s_answer_error (call, 413, "payload_too_large",
                            "the body is larger than %" PRIu64 " bytes "
                            "(http.max_body)", self->config.max_body);
            return s_queue (call);
        }
        char *body = (char *) realloc (call->body, call->body_size + size);
        if (!body)
            return MHD_NO;
        memcpy (body + call->body_size, upload_data, size);
        call->body = body;
        call->body_size += size;
        return MHD_YES;
    }
    if (call->stage == S_READING) {
        call->token = s_bearer (connection);
        s_dispatch (self, call, url, method);
    }
    if (call->stage == S_WAITING) {
        if (!call->suspended) {
            MHD_suspend_connection (connection);
            call->suspended = true;
        }
        return MHD_YES;
    }
    if (call->stage == S_ANSWERED)
        return s_queue (call);
    return MHD_YES;
}

static void
s_completed (void *cls, struct MHD_Connection *connection, void **con_cls,
             enum MHD_RequestTerminationCode toe)
{
    s_call_t *call = (s_call_t *) *con_cls;
    if (!call)
        return;
    *con_cls = NULL;
    call->connection = NULL;
    call->suspended = false;
    s_call_unref (call);
}

static void
s_connection (void *cls, struct MHD_Connection *connection,
              void **socket_context, enum MHD_ConnectionNotificationCode toe)
{
    s_server_t *self = (s_server_t *) cls;
    s_count (&self->stats->connections,
             toe == MHD_CONNECTION_NOTIFY_STARTED ? 1 : -1);
}

static void
s_mhd_log (void *cls, const char *format, va_list args)
{
    char line [512];
    vsnprintf (line, sizeof line, format, args);
    size_t len = strlen (line);
    while (len && line [len - 1] == '\n')
        line [--len] = 0;
    log_write (LOG_LEVEL_DEBUG, NULL, "http: %s", line);
}

//  ---------------------------------------------------------------------
//  The actor

typedef struct {
    const http_config_t *config; //  Borrowed during the start
    http_stats_t *stats;         //  The face's figures
    const char *bridge_ep;       //  The reactor's ROUTER
    char *cert_pem;              //  TLS certificate text, or NULL
    char *key_pem;               //  TLS key text, or NULL
    struct addrinfo *addr;       //  The address to listen on
} s_start_t;

//  Decodes the %HH escapes of a path or query value in place, as
//  libmicrohttpd does, but for %00: it stays as written, since the
//  path and values are read as C strings, and a NUL would cut them
//  (/api/v1/tokens/ci%00x must not mean /api/v1/tokens/ci).
static size_t
s_unescape (void *cls, struct MHD_Connection *connection, char *text)
{
    (void) cls;
    (void) connection;
    char *read = text, *write = text;
    while (*read) {
        if (read [0] == '%' && isxdigit ((unsigned char) read [1])
            && isxdigit ((unsigned char) read [2])) {
            char hex [3] = {read [1], read [2], 0};
            char byte = (char) strtol (hex, NULL, 16);
            if (byte) {
                *write++ = byte;
                read += 3;
                continue;
            }
        }
        *write++ = *read++;
    }
    *write = 0;
    return (size_t) (write - text);
}

static void
s_server_destroy (s_server_t **self_p)
{
    s_server_t *self = *self_p;
    if (!self)
        return;
    if (self->daemon) {
        //  Suspended connections are resumed to be closed
        self->stopping = true;
        for (s_call_t *call = (s_call_t *) zhashx_first (self->awaited); call;
             call = (s_call_t *) zhashx_next (self->awaited)) {
            if (call->stage == S_WAITING)
                s_answer_error (call, 503, "unavailable",
                                "the broker is stopping");
            s_resume (call);
        }
        MHD_run (self->daemon);
        MHD_stop_daemon (self->daemon);
    }
    for (s_call_t *call = (s_call_t *) zhashx_first (self->awaited); call;
         call = (s_call_t *) zhashx_next (self->awaited))
        s_call_unref (call);
    zhashx_destroy (&self->awaited);
    zsock_destroy (&self->bridge);
    http_config_clear (&self->config);
    free (self);
    *self_p = NULL;
}

static s_server_t *
s_server_new (s_start_t *start, zsock_t *pipe, char *err, size_t err_len)
{
    s_server_t *self = (s_server_t *) zmalloc (sizeof (s_server_t));
    http_config_copy (&self->config, start->config);
    self->stats = start->stats;
    self->pipe = pipe;
    self->awaited = zhashx_new ();
    self->idle_timeout_s = (int) ((self->config.idle_timeout_ms + 999) / 1000);
    //  A stream says something well within the idle timeout
    self->watch_ms = self->config.idle_timeout_ms / 2;
    if (self->watch_ms > S_WATCH_MS)
        self->watch_ms = S_WATCH_MS;
    uint8_t random [8];
    if (getrandom (random, sizeof random, 0) != (ssize_t) sizeof random)
        memset (random, 0, sizeof random);
    for (size_t index = 0; index < sizeof random; index++)
        snprintf (self->id_prefix + 2 * index, 3, "%02x", random [index]);
    self->bridge = zsock_new (ZMQ_DEALER);
    zsock_set_sndhwm (self->bridge, 100000);
    zsock_set_rcvhwm (self->bridge, 100000);
    zsock_set_linger (self->bridge, 0);
    if (zsock_connect (self->bridge, "%s", start->bridge_ep) != 0) {
        snprintf (err, err_len, "http: cannot reach the broker's bridge %s",
                  start->bridge_ep);
        s_server_destroy (&self);
        return NULL;
    }
    unsigned int flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME
                         | MHD_USE_ERROR_LOG;
    if (start->cert_pem)
        flags |= MHD_USE_TLS;
    if (start->addr->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem tls [] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, start->cert_pem},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, start->key_pem},
        {MHD_OPTION_END, 0, NULL},
    };
    self->daemon = MHD_start_daemon (
        flags, 0, NULL, NULL, s_access, self,
        MHD_OPTION_SOCK_ADDR, start->addr->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned int) HTTP_CONNECTIONS_MAX,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned int) self->config.max_connections_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int) self->idle_timeout_s,
        MHD_OPTION_NOTIFY_COMPLETED, s_completed, self,
        MHD_OPTION_NOTIFY_CONNECTION, s_connection, self,
        MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, self,
        MHD_OPTION_UNESCAPE_CALLBACK, s_unescape, self,
        MHD_OPTION_ARRAY, start->cert_pem ? tls : tls + 2,
        MHD_OPTION_END);
    if (!self->daemon) {
        snprintf (err, err_len, "http: cannot serve %s: %s",
                  self->config.listen, strerror (errno));
        s_server_destroy (&self);
        return NULL;
    }
    return self;
}

static void
s_actor (zsock_t *pipe, void *args)
{
    s_start_t *start = (s_start_t *) args;
    char err [512] = "";
    s_server_t *self = s_server_new (start, pipe, err, sizeof err);
    zsock_signal (pipe, 0);
    zstr_send (pipe, self ? "" : err);
    if (!self)
        return;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info (self->daemon, MHD_DAEMON_INFO_EPOLL_FD);
    int epoll_fd = info ? info->epoll_fd : -1;
    while (!self->stopping) {
        long timeout_ms = 1000;
        MHD_UNSIGNED_LONG_LONG mhd_ms = 0;
        if (MHD_get_timeout (self->daemon, &mhd_ms) == MHD_YES
            && (long long) mhd_ms < timeout_ms)
            timeout_ms = (long) mhd_ms;
        zmq_pollitem_t items [] = {
            {zsock_resolve (pipe), 0, ZMQ_POLLIN, 0},
            {zsock_resolve (self->bridge), 0, ZMQ_POLLIN, 0},
            {NULL, epoll_fd, ZMQ_POLLIN, 0},
        };
        if (zmq_poll (items, 3, timeout_ms) < 0 && zmq_errno () != EINTR)
            break;
        if (items [0].revents & ZMQ_POLLIN) {
            char *command = zstr_recv (pipe);
            if (!command || strcmp (command, "$TERM") == 0)
                self->stopping = true;
            zstr_free (&command);
            if (self->stopping)
                break;
        }
        if (items [1].revents & ZMQ_POLLIN)
            s_on_bridge (self);
        int64_t now_ms = zclock_mono ();
        if (now_ms >= self->next_expire_ms) {
            s_expire (self, now_ms);
            self->next_expire_ms = now_ms + 100;
        }
        MHD_run (self->daemon);
    }
    s_server_destroy (&self);
}

struct _http_t {
    zactor_t *actor;             //  The face's thread
    http_stats_t stats;          //  Its figures (atomic)
};

//  The whole file at PATH (caller frees), or NULL with a sentence in ERR.
static char *
s_read_file (const char *path, const char *what, char *err, size_t err_len)
{
    FILE *file = fopen (path, "rb");
    char *text = NULL;
    size_t size = 0;
    if (file) {
        text = (char *) malloc (1 << 20);
        size = text ? fread (text, 1, (1 << 20) - 1, file) : 0;
        fclose (file);
    }
    if (!text || size == 0) {
        snprintf (err, err_len, "http: cannot read the %s %s: %s", what, path,
                  file ? "empty" : strerror (errno));
        free (text);
        return NULL;
    }
    text [size] = 0;
    return text;
}

//  Checks that CERT_PEM and KEY_PEM load as a pair. Returns 0, or -1 with
//  GnuTLS's reason in ERR.
static int
s_check_pair (const char *cert_pem, const char *key_pem, char *err,
              size_t err_len)
{
    gnutls_certificate_credentials_t credentials;
    if (gnutls_certificate_allocate_credentials (&credentials) < 0) {
        snprintf (err, err_len, "http: cannot check the certificate");
        return -1;
    }
    gnutls_datum_t cert = {(unsigned char *) cert_pem,
                           (unsigned int) strlen (cert_pem)};
    gnutls_datum_t key = {(unsigned char *) key_pem,
                          (unsigned int) strlen (key_pem)};
    int rc = gnutls_certificate_set_x509_key_mem (credentials, &cert, &key,
                                                  GNUTLS_X509_FMT_PEM);
    gnutls_certificate_free_credentials (credentials);
    if (rc < 0) {
        snprintf (err, err_len, "http: the certificate and key do not load "
                  "as a pair (PEM): %s", gnutls_strerror (rc));
        return -1;
    }
    return 0;
}

http_t *
http_new (const http_config_t *config, const char *bridge_ep, char *err,
          size_t err_len)
{
    if (http_config_check (config, err, err_len) != 0)
        return NULL;
    s_start_t start;
    memset (&start, 0, sizeof start);
    start.config = config;
    start.bridge_ep = bridge_ep;
    if (config->cert
        && (!(start.cert_pem = s_read_file (config->cert, "certificate", err,
                                            err_len))
            || !(start.key_pem = s_read_file (config->key, "key", err,
                                              err_len))
            || s_check_pair (start.cert_pem, start.key_pem, err, err_len)
                   != 0)) {
        if (start.key_pem)
            explicit_bzero (start.key_pem, strlen (start.key_pem));
        free (start.key_pem);
        free (start.cert_pem);
        return NULL;
    }
    if (http_listen_resolve (config->listen, &start.addr, err, err_len) != 0) {
        free (start.cert_pem);
        free (start.key_pem);
        return NULL;
    }
    http_t *self = (http_t *) zmalloc (sizeof (http_t));
    start.stats = &self->stats;
    self->actor = zactor_new (s_actor, &start);
    char *status = self->actor ? zstr_recv (self->actor) : NULL;
    if (!status || *status) {
        snprintf (err, err_len, "%s", status ? status : "http: cannot start");
        http_destroy (&self);
    }
    zstr_free (&status);
    freeaddrinfo (start.addr);
    if (start.key_pem)
        explicit_bzero (start.key_pem, strlen (start.key_pem));
    free (start.cert_pem);
    free (start.key_pem);
    if (self)
        log_info ("serving HTTP%s on %s", config->cert ? "S" : "",
                  config->listen);
    return self;
}

void
http_stats (const http_t *self, http_stats_t *stats)
{
    const uint64_t *from = (const uint64_t *) &self->stats;
    uint64_t *to = (uint64_t *) stats;
    for (size_t index = 0; index < sizeof *stats / sizeof (uint64_t); index++)
        to [index] = __atomic_load_n (from + index, __ATOMIC_RELAXED);
}

void
http_destroy (http_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    zactor_destroy (&(*self_p)->actor);
    free (*self_p);
    *self_p = NULL;
}
