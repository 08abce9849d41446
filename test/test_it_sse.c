/*  =========================================================================
    test_it_sse - a thousand event streams on one job: a real gridbroker
    with its HTTP face on loopback and a real gridagent

    1,000 clients open GET /api/v1/jobs/{id}/stream of one running job at
    once, over plain sockets. While they are all connected the broker
    still answers (a `status` over ZeroMQ, GET /healthz over HTTP); when
    the job ends every client sees its `end` event; once the clients hang
    up, the broker's open descriptors (/proc/PID/fd) drop back to what
    they were before the streams.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "../proto/proto.h"
#include "lib/harness.h"

#define S_STREAMS 1000
#define S_WAIT_MS 30000         //  Deadline for anything that should happen
#define S_FD_SLACK 8            //  Descriptors the broker may open meanwhile

typedef enum {
    S_CONNECTING,               //  Non-blocking connect under way
    S_STREAMING,                //  Request sent, reading the stream
    S_ENDED                     //  Saw `event: end`, or the peer closed
} s_state_t;

typedef struct {
    int fd;
    s_state_t state;
    char *got;                  //  What came so far (NUL-terminated)
    size_t got_size;
    bool started;               //  200 and the first progress event came
    bool ended;                 //  `event: end` came
} s_stream_t;

static grid_t s_grid;
static int s_port;
static char s_viewer [128];     //  An HTTP token with the viewer role
static s_stream_t s_streams [S_STREAMS];

//  ---------------------------------------------------------------------
//  Helpers

static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    if (fd < 0 || bind (fd, (struct sockaddr *) &address, sizeof address) != 0
        || getsockname (fd, (struct sockaddr *) &address, &len) != 0) {
        if (fd >= 0)
            close (fd);
        return -1;
    }
    close (fd);
    return ntohs (address.sin_port);
}

//  A non-blocking TCP connection to the HTTP face under way, or -1.
static int
s_connect (void)
{
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons ((uint16_t) s_port);
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (connect (fd, (struct sockaddr *) &address, sizeof address) != 0
        && errno != EINPROGRESS) {
        close (fd);
        return -1;
    }
    return fd;
}

//  Open descriptors of process PID.
static int
s_fd_count (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/fd", (int) pid);
    DIR *dir = opendir (path);
    if (!dir)
        return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir (dir)))
        if (entry->d_name [0] != '.')
            count++;
    closedir (dir);
    return count;
}

//  Open descriptors of process PID once they stay the same for 300 ms
//  (a client connection the broker is still closing is not counted).
static int
s_fd_steady (pid_t pid)
{
    int count = s_fd_count (pid);
    long long deadline = grid_now_ms () + 10000;
    while (grid_now_ms () < deadline) {
        zclock_sleep (300);
        int now = s_fd_count (pid);
        if (now == count)
            break;
        count = now;
    }
    return count;
}

//  One GET of PATH with the viewer's token on a fresh blocking
//  connection; returns the HTTP status (0 when nothing came in time).
static int
s_http_get (const char *path)
{
    int fd = s_connect ();
    if (fd < 0)
        return 0;
    struct pollfd item = {fd, POLLOUT, 0};
    poll (&item, 1, 5000);
    char request [512];
    snprintf (request, sizeof request, "GET %s HTTP/1.1\r\nHost: x\r\n"
              "Authorization: Bearer %s\r\nConnection: close\r\n\r\n", path,
              s_viewer);
    int status = 0;
    if (send (fd, request, strlen (request), MSG_NOSIGNAL) > 0) {
        item.events = POLLIN;
        char answer [256] = "";
        if (poll (&item, 1, 10000) == 1
            && recv (fd, answer, sizeof answer - 1, 0) > 12
            && strncmp (answer, "HTTP/1.1 ", 9) == 0)
            status = atoi (answer + 9);
    }
    close (fd);
    return status;
}

//  Sends the stream request of JOB on STREAM once it is connected.
static void
s_stream_send (s_stream_t *stream, const char *job)
{
    int error = 0;
    socklen_t error_len = sizeof error;
    getsockopt (stream->fd, SOL_SOCKET, SO_ERROR, &error, &error_len);
    assert_int_equal (error, 0);
    char request [512];
    snprintf (request, sizeof request,
              "GET /api/v1/jobs/%s/stream HTTP/1.1\r\nHost: x\r\n"
              "Authorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n",
              job, s_viewer);
    assert_int_equal (send (stream->fd, request, strlen (request),
                            MSG_NOSIGNAL),
                      (ssize_t) strlen (request));
    stream->state = S_STREAMING;
}

//  Reads what STREAM has; notes its start and end.
static void
s_stream_read (s_stream_t *stream)
{
    char buffer [16384];
    ssize_t size = recv (stream->fd, buffer, sizeof buffer, 0);
    if (size < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (size <= 0) {
        stream->state = S_ENDED;
        return;
    }
    stream->got = (char *) realloc (stream->got, stream->got_size + size + 1);
    assert_non_null (stream->got);
    memcpy (stream->got + stream->got_size, buffer, (size_t) size);
    stream->got_size += (size_t) size;
    stream->got [stream->got_size] = 0;
    if (!stream->started)
        stream->started = strncmp (stream->got, "HTTP/1.1 200", 12) == 0
                          && strstr (stream->got, "event: progress");
    if (strstr (stream->got, "event: end")) {
        stream->ended = true;
        stream->state = S_ENDED;
    }
}

//  Polls every stream once (up to TIMEOUT_MS); sends the requests of
//  those that connected.
static void
s_streams_poll (const char *job, int timeout_ms)
{
    static struct pollfd items [S_STREAMS];
    for (int index = 0; index < S_STREAMS; index++) {
        s_stream_t *stream = &s_streams [index];
        items [index].fd = stream->state == S_ENDED ? -1 : stream->fd;
        items [index].events = stream->state == S_CONNECTING ? POLLOUT
                                                             : POLLIN;
        items [index].revents = 0;
    }
    if (poll (items, S_STREAMS, timeout_ms) <= 0)
        return;
    for (int index = 0; index < S_STREAMS; index++) {
        if (!items [index].revents)
            continue;
        s_stream_t *stream = &s_streams [index];
        if (stream->state == S_CONNECTING)
            s_stream_send (stream, job);
        else
            s_stream_read (stream);
    }
}

static int
s_count (bool started)
{
    int count = 0;
    for (int index = 0; index < S_STREAMS; index++)
        count += started ? s_streams [index].started : s_streams [index].ended;
    return count;
}

//  ---------------------------------------------------------------------
//  Tests

static void
test_it_sse_thousand_streams (void **state)
{
    //  A job that runs until it is cancelled
    char *job = grid_submit_id (&s_grid,
                                "target: node:web-01\n"
                                "tasks:\n"
                                "  - {backend: test, action: sleep, "
                                "params: {seconds: 120}}\n");
    assert_non_null (job);
    pid_t broker = s_grid.broker_pid;
    int before = s_fd_steady (broker);
    assert_true (before > 0);

    //  A thousand clients at once
    for (int index = 0; index < S_STREAMS; index++) {
        s_streams [index].fd = s_connect ();
        assert_true (s_streams [index].fd >= 0);
        s_streams [index].state = S_CONNECTING;
    }
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_count (true) < S_STREAMS && grid_now_ms () < deadline)
        s_streams_poll (job, 200);
    if (s_count (true) < S_STREAMS)
        grid_dump_logs (&s_grid);
    assert_int_equal (s_count (true), S_STREAMS);
    assert_int_equal (s_count (false), 0);
    //  The broker holds every one of them...
    int during = s_fd_count (broker);
    if (during < before + S_STREAMS - S_FD_SLACK)
        fprintf (stderr, "broker fds: %d before, %d with %d streams\n",
                 before, during, S_STREAMS);
    assert_true (during >= before + S_STREAMS - S_FD_SLACK);
    //  ...and still answers, over ZeroMQ and over HTTP
    long long asked_ms = grid_now_ms ();
    pv_doc_t *reply = grid_call (&s_grid, "status", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    pv_doc_destroy (&reply);
    assert_int_equal (s_http_get ("/healthz"), 200);
    assert_int_equal (s_http_get ("/api/v1/status"), 200);
    fprintf (stderr, "  %d streams: broker fds %d -> %d; status and healthz "
             "answered in %lld ms\n", S_STREAMS, before, during,
             grid_now_ms () - asked_ms);

    //  The job ends: every stream sees it
    reply = grid_call (&s_grid, "job.cancel", "job", job, NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    deadline = grid_now_ms () + S_WAIT_MS;
    while (s_count (false) < S_STREAMS && grid_now_ms () < deadline)
        s_streams_poll (job, 200);
    assert_int_equal (s_count (false), S_STREAMS);
    for (int index = 0; index < S_STREAMS; index++)
        assert_non_null (strstr (s_streams [index].got, "\"cancelled\""));

    //  The clients hang up: every descriptor is freed
    for (int index = 0; index < S_STREAMS; index++) {
        close (s_streams [index].fd);
        free (s_streams [index].got);
        memset (&s_streams [index], 0, sizeof s_streams [index]);
    }
    deadline = grid_now_ms () + S_WAIT_MS;
    int after = s_fd_count (broker);
    while (after > before + S_FD_SLACK && grid_now_ms () < deadline) {
        zclock_sleep (50);
        after = s_fd_count (broker);
    }
    fprintf (stderr, "  after the clients left: broker fds %d\n", after);
    assert_true (after <= before + S_FD_SLACK);
    //  And it serves as before
    assert_int_equal (s_http_get ("/healthz"), 200);
    free (job);
}

//  ---------------------------------------------------------------------

static int
s_setup (void **state)
{
    //  The test and the broker (which inherits it) hold a descriptor per
    //  stream
    struct rlimit limit;
    if (getrlimit (RLIMIT_NOFILE, &limit) == 0
        && limit.rlim_cur < 4 * S_STREAMS) {
        limit.rlim_cur = limit.rlim_max < 4 * S_STREAMS ? limit.rlim_max
                                                        : 4 * S_STREAMS;
        setrlimit (RLIMIT_NOFILE, &limit);
    }
    if (getrlimit (RLIMIT_NOFILE, &limit) != 0
        || limit.rlim_cur < 2 * S_STREAMS + 100) {
        fprintf (stderr, "the open-file limit (%llu) is too low for %d "
                 "streams\n", (unsigned long long) limit.rlim_cur, S_STREAMS);
        return -1;
    }
    if (grid_init (&s_grid) != 0)
        return -1;
    s_port = s_free_port ();
    char listen [64];
    snprintf (listen, sizeof listen, "127.0.0.1:%d", s_port);
    const char *extra [] = {"--http", listen, NULL};
    if (s_port < 0 || grid_start_broker (&s_grid, extra) != 0
        || grid_start_agent (&s_grid, "web-01", "web", NULL, NULL) < 0)
        return -1;
    pv_doc_t *reply = grid_call (&s_grid, "token.add", "name", "watchers",
                                 "role", "viewer", NULL);
    const pv_t *data = NULL;
    char *token = grid_reply_ok (reply, &data)
                      ? pv_strdup (pv_map_get (data, "token")) : NULL;
    pv_doc_destroy (&reply);
    if (!token)
        return -1;
    snprintf (s_viewer, sizeof s_viewer, "%s", token);
    free (token);
    return 0;
}

static int
s_teardown (void **state)
{
    for (int index = 0; index < S_STREAMS; index++)
        if (s_streams [index].fd > 0) {
            close (s_streams [index].fd);
            free (s_streams [index].got);
        }
    grid_stop (&s_grid);
    return 0;
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_sse_thousand_streams),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
