/*  =========================================================================
    httpload - an HTTP/1.1 load generator for the broker's HTTP face

    Opens CONNECTIONS keep-alive connections to one address and sends the
    same request on each, one at a time per connection (no pipelining),
    for DURATION seconds or until REQUESTS answers came. A connection the
    server closes is opened again. Answers are read whole: Content-Length
    bodies, chunked bodies, or bodies that end with the connection.

    Prints requests per second, latency percentiles and the answers by
    status; with --json, one JSON object on stdout instead. Exits 0 when
    every answer was a 2xx, 1 when some were not (or failed), 2 on bad
    arguments.

        httpload --url http://127.0.0.1:8080/api/v1/jobs --method POST \
                 --header 'Authorization: Bearer TOKEN' \
                 --header 'Content-Type: application/json' \
                 --body-file job.json --connections 64 --duration 10

    gridbench runs it for its HTTP figures (gridbench --http).

    Threading: single-threaded, one epoll set.
    =========================================================================
*/
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_HEADERS 16
#define S_MAX_CONNECTIONS 20000
#define S_READ_CHUNK 65536
#define S_MAX_RESPONSE (64 << 20)   //  Larger answers count as errors
#define S_STATUSES 600

typedef struct {
    char host [256];                //  IPv4 address (dotted) or "localhost"
    int port;                       //  TCP port
    char *path;                     //  Request target
    char *method;                   //  GET, POST...
    char *headers [S_MAX_HEADERS];  //  Extra header lines
    size_t header_count;
    char *body;                     //  Request body, or NULL
    size_t body_len;
    size_t connections;             //  Concurrent connections
    double duration_s;              //  Run this long (when requests is 0)
    uint64_t requests;              //  Or until this many answers
    bool json;                      //  One JSON object on stdout
} s_options_t;

typedef struct {
    int fd;                         //  Socket, -1 when closed
    bool connecting;                //  Non-blocking connect under way
    size_t sent;                    //  Bytes of the request written
    char *in;                       //  Bytes of the answer read
    size_t in_len, in_max;
    double started_us;              //  When the request went out
} s_conn_t;

typedef struct {
    uint64_t answers;               //  Whole answers
    uint64_t ok;                    //  ... with a 2xx status
    uint64_t errors;                //  Connections that failed mid-request
    uint64_t reconnects;            //  Connections opened again
    uint64_t statuses [S_STATUSES]; //  Answers by status
    double *latencies_ms;           //  One per answer (grown)
    size_t latency_max;
} s_stats_t;

static char *s_request;             //  The request bytes
static size_t s_request_len;
static volatile sig_atomic_t s_interrupted;

static double
s_now_us (void)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    return (double) now.tv_sec * 1e6 + (double) now.tv_nsec / 1e3;
}

static void
s_on_signal (int signo)
{
    s_interrupted = 1;
}

//  ---------------------------------------------------------------------
//  Answers

//  Parses the chunked body at BODY (LEN bytes). Returns the bytes the
//  whole body takes, 0 when more is needed, -1 when it is not chunked
//  encoding.
static long
s_chunked_end (const char *body, size_t len)
{
    size_t at = 0;
    while (true) {
        const char *line_end = memmem (body + at, len - at, "\r\n", 2);
        if (!line_end)
            return 0;
        char *end = NULL;
        unsigned long size = strtoul (body + at, &end, 16);
        if (end == body + at)
            return -1;
        at = (size_t) (line_end - body) + 2;
        if (size == 0) {
            //  Trailers, then an empty line
            while (true) {
                const char *trailer = memmem (body + at, len - at, "\r\n", 2);
                if (!trailer)
                    return 0;
                bool empty = trailer == body + at;
                at = (size_t) (trailer - body) + 2;
                if (empty)
                    return (long) at;
            }
        }
        if (len - at < size + 2)
            return 0;
        at += size + 2;
    }
}

//  Looks at the answer read so far. Returns 1 when it is whole (*STATUS,
//  *CLOSE set; *USED its bytes), 0 when more is needed, -1 when it is not
//  HTTP. AT_EOF: the server closed the connection.
static int
s_answer_whole (const char *in, size_t len, bool at_eof, int *status,
                bool *close_after, size_t *used)
{
    const char *head_end = memmem (in, len, "\r\n\r\n", 4);
    if (!head_end)
        return len > 65536 || at_eof ? -1 : 0;
    if (len < 12 || strncmp (in, "HTTP/1.", 7) != 0)
        return -1;
    *status = atoi (in + 9);
    size_t head_len = (size_t) (head_end - in) + 4;
    long content_length = -1;
    bool chunked = false;
    *close_after = in [7] == '0';
    for (const char *line = strstr (in, "\r\n") + 2; line < head_end;
         line = strstr (line, "\r\n") + 2) {
        if (strncasecmp (line, "Content-Length:", 15) == 0)
            content_length = strtol (line + 15, NULL, 10);
        else
        if (strncasecmp (line, "Transfer-Encoding:", 18) == 0)
            chunked = memmem (line, (size_t) (strstr (line, "\r\n") - line),
                              "chunked", 7) != NULL;
        else
        if (strncasecmp (line, "Connection:", 11) == 0) {
            const char *value = line + 11;
            while (*value == ' ')
                value++;
            if (strncasecmp (value, "close", 5) == 0)
                *close_after = true;
            else
            if (strncasecmp (value, "keep-alive", 10) == 0)
                *close_after = false;
        }
    }
    if (*status == 204 || *status == 304 || (*status >= 100 && *status < 200)) {
        *used = head_len;
        return 1;
    }
    if (chunked) {
        long body = s_chunked_end (in + head_len, len - head_len);
        if (body < 0)
            return -1;
        if (body == 0)
            return at_eof ? -1 : 0;
        *used = head_len + (size_t) body;
        return 1;
    }
    if (content_length >= 0) {
        if (len - head_len < (size_t) content_length)
            return at_eof ? -1 : 0;
        *used = head_len + (size_t) content_length;
        return 1;
    }
    //  No length: the body ends with the connection
    if (!at_eof)
        return 0;
    *close_after = true;
    *used = len;
    return 1;
}

//  ---------------------------------------------------------------------
//  Connections

static int
s_connect (const s_options_t *options, int epoll_fd, s_conn_t *conn)
{
    conn->fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (conn->fd < 0)
        return -1;
    int one = 1;
    setsockopt (conn->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons ((uint16_t) options->port);
    inet_pton (AF_INET, strcmp (options->host, "localhost") == 0
                            ? "127.0.0.1" : options->host,
               &address.sin_addr);
    conn->connecting = true;
    conn->sent = 0;
    conn->in_len = 0;
    conn->started_us = s_now_us ();
    if (connect (conn->fd, (struct sockaddr *) &address, sizeof address) != 0
        && errno != EINPROGRESS) {
        close (conn->fd);
        conn->fd = -1;
        return -1;
    }
    struct epoll_event event = {EPOLLIN | EPOLLOUT, {.ptr = conn}};
    if (epoll_ctl (epoll_fd, EPOLL_CTL_ADD, conn->fd, &event) != 0) {
        close (conn->fd);
        conn->fd = -1;
        return -1;
    }
    return 0;
}

static void
s_close (int epoll_fd, s_conn_t *conn)
{
    if (conn->fd >= 0) {
        epoll_ctl (epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
        close (conn->fd);
        conn->fd = -1;
    }
}

//  Waits for writing (request under way) or reading (answer awaited).
static void
s_want (int epoll_fd, s_conn_t *conn, bool write)
{
    struct epoll_event event = {write ? EPOLLOUT : EPOLLIN, {.ptr = conn}};
    epoll_ctl (epoll_fd, EPOLL_CTL_MOD, conn->fd, &event);
}

static void
s_record (s_stats_t *stats, int status, double latency_ms)
{
    stats->answers++;
    if (status >= 200 && status < 300)
        stats->ok++;
    stats->statuses [status > 0 && status < S_STATUSES ? status : 0]++;
    if (stats->answers > stats->latency_max) {
        size_t max = stats->latency_max ? stats->latency_max * 2 : 65536;
        double *grown = (double *) realloc (stats->latencies_ms,
                                            max * sizeof (double));
        if (!grown)
            return;
        stats->latencies_ms = grown;
        stats->latency_max = max;
    }
    stats->latencies_ms [stats->answers - 1] = latency_ms;
}

//  Writes what is left of the request. Returns 0, or -1 when the
//  connection failed.
static int
s_write (int epoll_fd, s_conn_t *conn)
{
    while (conn->sent < s_request_len) {
        ssize_t wrote = send (conn->fd, s_request + conn->sent,
                              s_request_len - conn->sent, MSG_NOSIGNAL);
        if (wrote < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            s_want (epoll_fd, conn, true);
            return 0;
        }
        if (wrote <= 0)
            return -1;
        conn->sent += (size_t) wrote;
    }
    s_want (epoll_fd, conn, false);
    return 0;
}

//  Reads what came. Returns 1 when an answer is whole and the connection
//  may carry the next request, 2 when it is whole and the connection
//  must be opened again, 0 when more is needed, -1 on failure.
static int
s_read (s_conn_t *conn, s_stats_t *stats)
{
    bool at_eof = false;
    while (true) {
        if (conn->in_max - conn->in_len < S_READ_CHUNK) {
            size_t max = conn->in_max ? conn->in_max * 2 : 2 * S_READ_CHUNK;
            if (max > S_MAX_RESPONSE)
                return -1;
            char *grown = (char *) realloc (conn->in, max);
            if (!grown)
                return -1;
            conn->in = grown;
            conn->in_max = max;
        }
        ssize_t got = recv (conn->fd, conn->in + conn->in_len,
                            conn->in_max - conn->in_len - 1, 0);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (got < 0)
            return -1;
        if (got == 0) {
            at_eof = true;
            break;
        }
        conn->in_len += (size_t) got;
    }
    conn->in [conn->in_len] = 0;
    int status = 0;
    bool close_after = false;
    size_t used = 0;
    int rc = s_answer_whole (conn->in, conn->in_len, at_eof, &status,
                             &close_after, &used);
    if (rc <= 0)
        return at_eof || rc < 0 ? -1 : 0;
    s_record (stats, status, (s_now_us () - conn->started_us) / 1000.0);
    conn->in_len = 0;
    return close_after || at_eof ? 2 : 1;
}

//  ---------------------------------------------------------------------
//  Arguments

static const char s_usage [] =
"Usage: httpload --url http://HOST:PORT/PATH [options]\n"
"\n"
"Sends one request over many keep-alive connections and reports requests\n"
"per second and latency.\n"
"\n"
"  --url URL            http://IPv4-or-localhost:PORT/PATH (required)\n"
"  --method M           GET (default), POST, PUT, DELETE\n"
"  --header 'K: V'      an extra header (repeatable, at most 16)\n"
"  --body TEXT          the request body\n"
"  --body-file FILE     the request body, from FILE\n"
"  --connections N      concurrent connections [64]\n"
"  --duration S         run S seconds [5]\n"
"  --requests N         stop after N answers instead\n"
"  --json               one JSON object on stdout\n"
"  --help               this text\n";

static int
s_parse_url (s_options_t *options, const char *url)
{
    if (strncmp (url, "http://", 7) != 0)
        return -1;
    const char *host = url + 7;
    const char *colon = strchr (host, ':');
    const char *slash = strchr (host, '/');
    if (!colon || (slash && slash < colon) || (size_t) (colon - host) >= 255)
        return -1;
    memcpy (options->host, host, (size_t) (colon - host));
    options->host [colon - host] = 0;
    struct in_addr address;
    if (strcmp (options->host, "localhost") != 0
        && inet_pton (AF_INET, options->host, &address) != 1)
        return -1;
    char *end = NULL;
    long port = strtol (colon + 1, &end, 10);
    if (port < 1 || port > 65535 || (*end && *end != '/'))
        return -1;
    options->port = (int) port;
    options->path = strdup (*end ? end : "/");
    return 0;
}

static char *
s_slurp (const char *path, size_t *len)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return NULL;
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&text, &size);
    char buffer [65536];
    size_t got;
    while ((got = fread (buffer, 1, sizeof buffer, file)) > 0)
        fwrite (buffer, 1, got, out);
    fclose (file);
    fclose (out);
    *len = size;
    return text;
}

static int
s_parse (s_options_t *options, int argc, char *argv [])
{
    static const struct option longs [] = {
        {"url", required_argument, NULL, 'u'},
        {"method", required_argument, NULL, 'm'},
        {"header", required_argument, NULL, 'H'},
        {"body", required_argument, NULL, 'b'},
        {"body-file", required_argument, NULL, 'f'},
        {"connections", required_argument, NULL, 'c'},
        {"duration", required_argument, NULL, 'd'},
        {"requests", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    int option;
    while ((option = getopt_long (argc, argv, "", longs, NULL)) != -1) {
        char *end = NULL;
        switch (option) {
            case 'u':
                if (s_parse_url (options, optarg) != 0) {
                    fprintf (stderr, "httpload: --url: expected "
                             "http://IPv4-or-localhost:PORT/PATH\n");
                    return -1;
                }
                break;
            case 'm':
                options->method = optarg;
                break;
            case 'H':
                if (options->header_count == S_MAX_HEADERS
                    || !strchr (optarg, ':') || strpbrk (optarg, "\r\n")) {
                    fprintf (stderr, "httpload: --header: expected 'Name: "
                             "value' (at most %d)\n", S_MAX_HEADERS);
                    return -1;
                }
                options->headers [options->header_count++] = optarg;
                break;
            case 'b':
                free (options->body);
                options->body = strdup (optarg);
                options->body_len = strlen (optarg);
                break;
            case 'f':
                free (options->body);
                options->body = s_slurp (optarg, &options->body_len);
                if (!options->body) {
                    fprintf (stderr, "httpload: cannot read %s\n", optarg);
                    return -1;
                }
                break;
            case 'c':
                options->connections = strtoul (optarg, &end, 10);
                break;
            case 'd':
                options->duration_s = strtod (optarg, &end);
                break;
            case 'n':
                options->requests = strtoull (optarg, &end, 10);
                break;
            case 'j':
                options->json = true;
                break;
            case 'h':
                fputs (s_usage, stdout);
                exit (0);
            default:
                fprintf (stderr, "run 'httpload --help' for the options\n");
                return -1;
        }
        if (end && *end) {
            fprintf (stderr, "httpload: '%s' is not a number\n", optarg);
            return -1;
        }
    }
    if (optind < argc || !options->path) {
        fprintf (stderr, "httpload: %s\n", optind < argc
                 ? "unexpected argument" : "--url is required");
        return -1;
    }
    if (options->connections < 1 || options->connections > S_MAX_CONNECTIONS
        || options->duration_s <= 0) {
        fprintf (stderr, "httpload: --connections 1..%d and a positive "
                 "--duration\n", S_MAX_CONNECTIONS);
        return -1;
    }
    return 0;
}

//  The request bytes, built once.
static void
s_build_request (const s_options_t *options)
{
    FILE *out = open_memstream (&s_request, &s_request_len);
    fprintf (out, "%s %s HTTP/1.1\r\nHost: %s:%d\r\n", options->method,
             options->path, options->host, options->port);
    for (size_t index = 0; index < options->header_count; index++)
        fprintf (out, "%s\r\n", options->headers [index]);
    if (options->body)
        fprintf (out, "Content-Length: %zu\r\n", options->body_len);
    fputs ("\r\n", out);
    if (options->body)
        fwrite (options->body, 1, options->body_len, out);
    fclose (out);
}

static int
s_compare_doubles (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double
s_percentile (const double *sorted, size_t count, double p)
{
    if (count == 0)
        return -1;
    size_t rank = (size_t) ((p / 100.0) * (double) count + 0.999999);
    return sorted [rank ? rank - 1 : 0];
}

int
main (int argc, char *argv [])
{
    s_options_t options;
    memset (&options, 0, sizeof options);
    options.method = "GET";
    options.connections = 64;
    options.duration_s = 5;
    if (s_parse (&options, argc, argv) != 0)
        return 2;
    signal (SIGPIPE, SIG_IGN);
    signal (SIGINT, s_on_signal);
    signal (SIGTERM, s_on_signal);
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) == 0
        && limit.rlim_cur < options.connections + 64) {
        limit.rlim_cur = limit.rlim_max < options.connections + 64
                             ? limit.rlim_max : options.connections + 64;
        setrlimit (RLIMIT_NOFILE, &limit);
    }
    s_build_request (&options);
    int epoll_fd = epoll_create1 (EPOLL_CLOEXEC);
    s_conn_t *conns = (s_conn_t *) calloc (options.connections,
                                           sizeof (s_conn_t));
    s_stats_t stats;
    memset (&stats, 0, sizeof stats);
    if (epoll_fd < 0 || !conns) {
        fprintf (stderr, "httpload: out of resources\n");
        return 1;
    }
    double start_us = s_now_us ();
    double end_us = start_us + options.duration_s * 1e6;
    size_t open = 0;
    for (size_t index = 0; index < options.connections; index++)
        if (s_connect (&options, epoll_fd, &conns [index]) == 0)
            open++;
        else
            stats.errors++;
    if (open == 0) {
        fprintf (stderr, "httpload: cannot connect to %s:%d\n", options.host,
                 options.port);
        return 1;
    }
    struct epoll_event events [256];
    bool stopping = false;
    while (open > 0 && !s_interrupted) {
        double now_us = s_now_us ();
        stopping = stopping || (options.requests ? stats.answers >= options.requests
                                                 : now_us >= end_us);
        int timeout_ms = stopping ? 2000 : 100;
        int count = epoll_wait (epoll_fd, events, 256, timeout_ms);
        if (count < 0 && errno == EINTR)
            continue;
        if (count <= 0 && stopping)
            break;                  //  What is still in flight is not waited for
        for (int index = 0; index < count; index++) {
            s_conn_t *conn = (s_conn_t *) events [index].data.ptr;
            int rc = 0;
            if (conn->connecting) {
                int error = 0;
                socklen_t error_len = sizeof error;
                getsockopt (conn->fd, SOL_SOCKET, SO_ERROR, &error,
                            &error_len);
                conn->connecting = false;
                conn->started_us = s_now_us ();
                rc = error ? -1 : s_write (epoll_fd, conn);
            }
            else
            if (conn->sent < s_request_len)
                rc = s_write (epoll_fd, conn);
            else {
                rc = s_read (conn, &stats);
                if (rc >= 1) {
                    stopping = stopping
                               || (options.requests
                                       ? stats.answers >= options.requests
                                       : s_now_us () >= end_us);
                    if (stopping) {
                        s_close (epoll_fd, conn);
                        open--;
                        continue;
                    }
                    if (rc == 2) {
                        s_close (epoll_fd, conn);
                        stats.reconnects++;
                        if (s_connect (&options, epoll_fd, conn) != 0) {
                            stats.errors++;
                            open--;
                        }
                        continue;
                    }
                    conn->sent = 0;
                    conn->started_us = s_now_us ();
                    rc = s_write (epoll_fd, conn);
                }
            }
            if (rc < 0) {
                s_close (epoll_fd, conn);
                stats.errors++;
                if (stopping || s_connect (&options, epoll_fd, conn) != 0)
                    open--;
                else
                    stats.reconnects++;
            }
        }
    }
    double elapsed_s = (s_now_us () - start_us) / 1e6;
    for (size_t index = 0; index < options.connections; index++) {
        s_close (epoll_fd, &conns [index]);
        free (conns [index].in);
    }
    free (conns);
    close (epoll_fd);
    qsort (stats.latencies_ms, stats.answers, sizeof (double),
           s_compare_doubles);
    double p50 = s_percentile (stats.latencies_ms, stats.answers, 50);
    double p99 = s_percentile (stats.latencies_ms, stats.answers, 99);
    double per_s = elapsed_s > 0 ? (double) stats.answers / elapsed_s : 0;
    if (options.json) {
        printf ("{\"answers\": %" PRIu64 ", \"ok\": %" PRIu64
                ", \"errors\": %" PRIu64 ", \"reconnects\": %" PRIu64
                ", \"seconds\": %.3f, \"per_second\": %.1f, "
                "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"connections\": %zu, "
                "\"statuses\": {", stats.answers, stats.ok, stats.errors,
                stats.reconnects, elapsed_s, per_s, p50, p99,
                options.connections);
        bool first = true;
        for (int status = 0; status < S_STATUSES; status++)
            if (stats.statuses [status]) {
                printf ("%s\"%d\": %" PRIu64, first ? "" : ", ", status,
                        stats.statuses [status]);
                first = false;
            }
        printf ("}}\n");
    }
    else {
        printf ("%" PRIu64 " answers in %.2f s over %zu connections: %.0f/s; "
                "latency p50 %.2f ms, p99 %.2f ms\n", stats.answers,
                elapsed_s, options.connections, per_s, p50, p99);
        for (int status = 0; status < S_STATUSES; status++)
            if (stats.statuses [status])
                printf ("  %d: %" PRIu64 "\n", status, stats.statuses [status]);
        if (stats.errors || stats.reconnects)
            printf ("  failed connections %" PRIu64 ", reopened %" PRIu64
                    "\n", stats.errors, stats.reconnects);
    }
    free (stats.latencies_ms);
    free (s_request);
    free (options.body);
    free (options.path);
    return stats.answers > 0 && stats.ok == stats.answers && !stats.errors
           ? 0 : 1;
}
