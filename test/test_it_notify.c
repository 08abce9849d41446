/*  =========================================================================
    test_it_notify - job notifications through a real gridbroker,
    gridagent and gridcli, told to a small HTTP receiver this test runs on
    127.0.0.1 (a thread with a listening socket).

    The receiver checks every request's HMAC-SHA256 signature with the
    broker's secret. A failing job is told to the broker-wide webhook that
    wants `failed`, a completed one is not; job-level webhooks (--notify)
    come in the order their jobs ended; a 500, a receiver that does not
    answer within notify.timeout and a redirect (never followed) are
    retried until a 2xx; a huge response is read no further than needed;
    an endpoint nobody listens on is dead-lettered after notify.retry_for
    and `gridcli notify retry` sends it again; a broker killed with
    SIGKILL while a delivery is under way sends it again after its
    restart, with the same X-Grid-Delivery (at-least-once). Bad URLs are
    refused at submit with the field named.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <gnutls/crypto.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#include "lib/harness.h"

#define S_SECRET "s3cret-for-the-test"
#define S_MAX_SEEN 64

//  How the receiver answers
typedef enum {
    S_ANSWER_OK = 0,             //  200
    S_ANSWER_500,                //  500
    S_ANSWER_SILENT,             //  Nothing, until the broker gives up
    S_ANSWER_REDIRECT,           //  302 to /redirected
    S_ANSWER_HUGE                //  200 with 8 MiB of body
} s_answer_t;

//  One request the receiver got
typedef struct {
    char path [64];
    char delivery [32];
    char job [40];
    int attempt;
    bool signed_ok;              //  The signature matched the body
    json_t *body;                //  The payload
} s_seen_t;

typedef struct {
    int fd;                      //  Listening socket
    int port;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t lock;
    s_answer_t answers [16];     //  How to answer the next requests, in turn
    size_t answer_count;         //  ... queued (then S_ANSWER_OK)
    s_seen_t seen [S_MAX_SEEN];  //  What came, in order
    size_t seen_count;
} s_receiver_t;

static bool
s_signature_ok (const char *header, const char *body, size_t len)
{
    long long stamp = 0;
    char hex [65] = "";
    if (!header || sscanf (header, "t=%lld,v1=%64s", &stamp, hex) != 2)
        return false;
    //  Against replay: the time is recent
    if (llabs ((long long) time (NULL) - stamp) > 300)
        return false;
    char *text = zsys_sprintf ("%lld.%.*s", stamp, (int) len, body);
    uint8_t digest [32];
    gnutls_hmac_fast (GNUTLS_MAC_SHA256, S_SECRET, strlen (S_SECRET), text,
                      strlen (text), digest);
    zstr_free (&text);
    char expected [65];
    for (int i = 0; i < 32; i++)
        snprintf (expected + 2 * i, 3, "%02x", digest [i]);
    return strcmp (expected, hex) == 0;
}

//  The value of header NAME in the request head HEAD (into BUF), or NULL.
static const char *
s_header (const char *head, const char *name, char *buf, size_t size)
{
    const char *at = head;
    size_t len = strlen (name);
    while ((at = strchr (at, '\n'))) {
        at++;
        if (strncasecmp (at, name, len) == 0 && at [len] == ':') {
            const char *value = at + len + 1;
            while (*value == ' ')
                value++;
            size_t end = strcspn (value, "\r\n");
            snprintf (buf, size, "%.*s", (int) end, value);
            return buf;
        }
    }
    return NULL;
}

static void
s_write_all (int fd, const char *data, size_t len)
{
    while (len) {
        ssize_t sent = send (fd, data, len, MSG_NOSIGNAL);
        if (sent <= 0)
            return;
        data += sent;
        len -= (size_t) sent;
    }
}

static void
s_serve (s_receiver_t *self, int fd)
{
    char buf [1 << 16];
    size_t got = 0;
    char *body = NULL;
    size_t want = 0;
    int64_t deadline = grid_now_ms () + 5000;
    while (grid_now_ms () < deadline && got < sizeof buf - 1) {
        struct pollfd item = {fd, POLLIN, 0};
        if (poll (&item, 1, 100) <= 0)
            continue;
        ssize_t n = recv (fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t) n;
        buf [got] = 0;
        char *end = strstr (buf, "\r\n\r\n");
        if (end) {
            char value [64];
            want = s_header (buf, "Content-Length", value, sizeof value)
                       ? (size_t) atol (value) : 0;
            body = end + 4;
            if ((size_t) (buf + got - body) >= want)
                break;
        }
    }
    if (!body)
        return;
    buf [got] = 0;
    s_seen_t seen;
    memset (&seen, 0, sizeof seen);
    sscanf (buf, "POST %63s", seen.path);
    s_header (buf, "X-Grid-Delivery", seen.delivery, sizeof seen.delivery);
    s_header (buf, "X-Grid-Job", seen.job, sizeof seen.job);
    char value [256];
    seen.attempt = s_header (buf, "X-Grid-Attempt", value, sizeof value)
                       ? atoi (value) : 0;
    seen.signed_ok = s_signature_ok (s_header (buf, "X-Grid-Signature", value,
                                               sizeof value),
                                     body, want);
    seen.body = json_loadb (body, want, 0, NULL);
    pthread_mutex_lock (&self->lock);
    s_answer_t answer = S_ANSWER_OK;
    if (self->answer_count) {
        answer = self->answers [0];
        memmove (self->answers, self->answers + 1,
                 --self->answer_count * sizeof (s_answer_t));
    }
    if (self->seen_count < S_MAX_SEEN)
        self->seen [self->seen_count++] = seen;
    else
        json_decref (seen.body);
    pthread_mutex_unlock (&self->lock);
    if (answer == S_ANSWER_SILENT) {
        //  Until the broker hangs up (or the test ends)
        char byte;
        while (!atomic_load (&self->stop)) {
            struct pollfd item = {fd, POLLIN, 0};
            if (poll (&item, 1, 100) > 0 && recv (fd, &byte, 1, 0) <= 0)
                break;
        }
        return;
    }
    if (answer == S_ANSWER_OK) {
        const char *reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                            "Connection: close\r\n\r\nok";
        s_write_all (fd, reply, strlen (reply));
    }
    else
    if (answer == S_ANSWER_500) {
        const char *reply = "HTTP/1.1 500 Internal Server Error\r\n"
                            "Content-Length: 0\r\nConnection: close\r\n\r\n";
        s_write_all (fd, reply, strlen (reply));
    }
    else
    if (answer == S_ANSWER_REDIRECT) {
        char reply [256];
        snprintf (reply, sizeof reply, "HTTP/1.1 302 Found\r\nLocation: "
                  "http://127.0.0.1:%d/redirected\r\nContent-Length: 0\r\n"
                  "Connection: close\r\n\r\n", self->port);
        s_write_all (fd, reply, strlen (reply));
    }
    else {
        size_t huge = (size_t) 8 << 20;
        char head [128];
        snprintf (head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Length: %zu"
                  "\r\nConnection: close\r\n\r\n", huge);
        s_write_all (fd, head, strlen (head));
        char chunk [65536];
        memset (chunk, 'x', sizeof chunk);
        for (size_t sent = 0; sent < huge; sent += sizeof chunk) {
            ssize_t n = send (fd, chunk, sizeof chunk, MSG_NOSIGNAL);
            if (n <= 0)
                break;
        }
    }
}

static void *
s_receiver_run (void *arg)
{
    s_receiver_t *self = (s_receiver_t *) arg;
    while (!atomic_load (&self->stop)) {
        struct pollfd item = {self->fd, POLLIN, 0};
        if (poll (&item, 1, 100) <= 0)
            continue;
        int fd = accept (self->fd, NULL, NULL);
        if (fd < 0)
            continue;
        s_serve (self, fd);
        close (fd);
    }
    return NULL;
}

//  A receiver on 127.0.0.1:PORT (0: any free port).
static s_receiver_t *
s_receiver_start (int port)
{
    s_receiver_t *self = (s_receiver_t *) calloc (1, sizeof *self);
    self->fd = socket (AF_INET, SOCK_STREAM, 0);
    int on = 1;
    setsockopt (self->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    addr.sin_port = htons ((uint16_t) port);
    socklen_t len = sizeof addr;
    assert_int_equal (bind (self->fd, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_int_equal (listen (self->fd, 16), 0);
    assert_int_equal (getsockname (self->fd, (struct sockaddr *) &addr, &len), 0);
    self->port = ntohs (addr.sin_port);
    pthread_mutex_init (&self->lock, NULL);
    atomic_init (&self->stop, false);
    assert_int_equal (pthread_create (&self->thread, NULL, s_receiver_run,
                                      self), 0);
    return self;
}

static void
s_receiver_stop (s_receiver_t **self_p)
{
    s_receiver_t *self = *self_p;
    if (!self)
        return;
    atomic_store (&self->stop, true);
    pthread_join (self->thread, NULL);
    close (self->fd);
    for (size_t i = 0; i < self->seen_count; i++)
        json_decref (self->seen [i].body);
    pthread_mutex_destroy (&self->lock);
    free (self);
    *self_p = NULL;
}

static void
s_answers (s_receiver_t *self, size_t count, ...)
{
    va_list args;
    va_start (args, count);
    pthread_mutex_lock (&self->lock);
    for (size_t i = 0; i < count; i++)
        self->answers [self->answer_count++] = (s_answer_t) va_arg (args, int);
    pthread_mutex_unlock (&self->lock);
    va_end (args);
}

static size_t
s_seen_count (s_receiver_t *self)
{
    pthread_mutex_lock (&self->lock);
    size_t count = self->seen_count;
    pthread_mutex_unlock (&self->lock);
    return count;
}

//  Waits until the receiver has seen COUNT requests.
static bool
s_wait_seen (s_receiver_t *self, size_t count, int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (grid_now_ms () < deadline) {
        if (s_seen_count (self) >= count)
            return true;
        zclock_sleep (20);
    }
    return s_seen_count (self) >= count;
}

static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_int_equal (getsockname (fd, (struct sockaddr *) &addr, &len), 0);
    close (fd);
    return ntohs (addr.sin_port);
}

//  gridcli with the NULL-terminated args: its stdout as JSON (asserting
//  exit code CODE).
static json_t *
s_cli_json_code (grid_t *grid, int code, ...)
{
    const char *argv [20] = {NULL};
    size_t argc = 0;
    argv [argc++] = "--output";
    argv [argc++] = "json";
    va_list args;
    va_start (args, code);
    const char *arg;
    while ((arg = va_arg (args, const char *)) && argc < 18)
        argv [argc++] = arg;
    va_end (args);
    char *out = NULL, *err = NULL;
    int got = grid_cli (grid, &out, &err, 30000, argv [0], argv [1],
                        argv [2], argv [3], argv [4], argv [5], argv [6],
                        argv [7], argv [8], argv [9], argv [10], argv [11],
                        argv [12], argv [13], argv [14], NULL);
    if (got != code)
        fprintf (stderr, "gridcli exit %d\nstdout:\n%s\nstderr:\n%s\n", got,
                 out, err);
    assert_int_equal (got, code);
    json_t *json = json_loads (out, 0, NULL);
    assert_non_null (json);
    free (out);
    free (err);
    return json;
}

#define s_cli_json(grid, ...) s_cli_json_code (grid, 0, __VA_ARGS__)

static const char *
s_str (json_t *object, const char *key)
{
    const char *text = json_string_value (json_object_get (object, key));
    return text ? text : "";
}

//  Runs `test echo` (or FAIL: `test fail`) on web-01 and waits for its end;
//  NOTIFY_URL: its --notify, or NULL. Returns its id (caller frees).
static char *
s_run (grid_t *grid, bool fail, const char *notify_url)
{
    int code = fail ? 1 : 0;
    json_t *run = notify_url
                      ? s_cli_json_code (grid, code, "job", "run", "--target",
                                    "node:web-01", "--wait", "--notify",
                                    notify_url, "test", fail ? "fail" : "echo",
                                    "--msg", "line one\nline two", NULL)
                      : s_cli_json_code (grid, code, "job", "run", "--target",
                                    "node:web-01", "--wait", "test",
                                    fail ? "fail" : "echo", "--msg",
                                    "line one\nline two", NULL);
    const char *id = s_str (run, "id");
    if (!*id)
        id = s_str (run, "job");
    char *copy = strdup (id);
    json_decref (run);
    assert_true (strlen (copy) > 0);
    return copy;
}

//  The deliveries of `gridcli notify list` with the extra args.
static json_t *
s_list (grid_t *grid, const char *a, const char *b)
{
    json_t *data = s_cli_json (grid, "notify", "list", a, b, NULL);
    json_t *deliveries = json_incref (json_object_get (data, "deliveries"));
    assert_true (json_is_array (deliveries));
    json_decref (data);
    return deliveries;
}

//  Waits until JOB's only delivery reads STATUS; returns it (a new ref).
static json_t *
s_wait_delivery (grid_t *grid, const char *job, const char *status,
                 int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (true) {
        json_t *list = s_list (grid, "--job", job);
        json_t *first = json_array_get (list, 0);
        if (first && streq (s_str (first, "status"), status)) {
            json_incref (first);
            json_decref (list);
            return first;
        }
        if (grid_now_ms () >= deadline) {
            char *text = json_dumps (list, JSON_INDENT (1));
            fprintf (stderr, "deliveries of %s: %s\n", job, text);
            free (text);
            json_decref (list);
            fail_msg ("job %s's delivery never read %s", job, status);
        }
        json_decref (list);
        zclock_sleep (100);
    }
}

//  True when JOB's timeline has EVENT COUNT times at least.
static bool
s_has_events (grid_t *grid, const char *job, const char *event, size_t count)
{
    json_t *events = s_cli_json (grid, "job", "events", job, NULL);
    json_t *list = json_is_array (events) ? events
                                          : json_object_get (events, "events");
    size_t index, found = 0;
    json_t *entry;
    json_array_foreach (list, index, entry)
        found += streq (s_str (entry, "event"), event);
    json_decref (events);
    return found >= count;
}

static void
test_it_notify (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    s_receiver_t *receiver = s_receiver_start (0);
    int dead_port = s_free_port ();
    char conf [400], hook [128], dead [128], broker_hook [128];
    snprintf (hook, sizeof hook, "http://127.0.0.1:%d/job", receiver->port);
    snprintf (broker_hook, sizeof broker_hook, "http://127.0.0.1:%d/broker",
              receiver->port);
    snprintf (dead, sizeof dead, "http://127.0.0.1:%d/dead", dead_port);
    snprintf (conf, sizeof conf, "%s/broker.yaml", grid.dir);
    FILE *file = fopen (conf, "w");
    assert_non_null (file);
    fprintf (file,
             "notify:\n"
             "  secret: \"%s\"\n"
             "  public_url: \"https://grid.example.com/\"\n"
             "  timeout: 1s\n"
             "  retry_base: 100ms\n"
             "  retry_cap: 300ms\n"
             "  retry_for: 4s\n"
             "  allow: [\"http://127.0.0.1:%d/\", \"http://127.0.0.1:%d/\"]\n"
             "  targets:\n"
             "    - {url: \"%s\", on: [failed]}\n",
             S_SECRET, receiver->port, dead_port, broker_hook);
    fclose (file);
    const char *extra [] = {"--config", conf, NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    assert_true (grid_start_agent (&grid, "web-01", "web", NULL, NULL) >= 0);

    //  A completed job is not told to a webhook that wants failed ends; a
    //  failed one is, signed, with its failed node, error and output
    char *done = s_run (&grid, false, NULL);
    char *failed = s_run (&grid, true, NULL);
    assert_true (s_wait_seen (receiver, 1, 20000));
    s_seen_t *seen = &receiver->seen [0];
    assert_string_equal (seen->path, "/broker");
    assert_string_equal (seen->job, failed);
    assert_true (seen->signed_ok);
    assert_int_equal (seen->attempt, 1);
    assert_string_equal (s_str (seen->body, "delivery"), seen->delivery);
    json_t *job = json_object_get (seen->body, "job");
    assert_string_equal (s_str (job, "id"), failed);
    assert_string_equal (s_str (job, "status"), "failed");
    json_t *bad = json_array_get (json_object_get (seen->body, "failed"), 0);
    assert_string_equal (s_str (bad, "node"), "web-01");
    assert_string_equal (s_str (bad, "task"), "test.fail");
    assert_non_null (strstr (s_str (bad, "error"), "line one"));
    assert_int_equal (json_integer_value (json_object_get (
                          json_object_get (seen->body, "counts"), "failed")), 1);
    char link [128];
    snprintf (link, sizeof link, "https://grid.example.com/api/v1/jobs/%s",
              failed);
    assert_string_equal (s_str (json_object_get (seen->body, "links"), "api"),
                         link);
    assert_true (s_has_events (&grid, failed, "notify_sent", 1));
    json_t *none = s_list (&grid, "--job", done);
    assert_int_equal (json_array_size (none), 0);
    json_decref (none);

    //  Job-level webhooks come in the order the jobs ended
    char *ids [3];
    for (int i = 0; i < 3; i++)
        ids [i] = s_run (&grid, false, hook);
    assert_true (s_wait_seen (receiver, 4, 20000));
    for (int i = 0; i < 3; i++) {
        assert_string_equal (receiver->seen [1 + i].path, "/job");
        assert_string_equal (receiver->seen [1 + i].job, ids [i]);
        assert_true (receiver->seen [1 + i].signed_ok);
        free (ids [i]);
    }

    //  Two 500s, then a 200: three attempts of one delivery
    s_answers (receiver, 2, S_ANSWER_500, S_ANSWER_500);
    char *retried = s_run (&grid, false, hook);
    json_t *sent = s_wait_delivery (&grid, retried, "sent", 20000);
    assert_int_equal (json_integer_value (json_object_get (sent, "attempts")), 3);
    json_decref (sent);
    assert_int_equal (s_seen_count (receiver), 7);
    for (int i = 4; i < 7; i++) {
        assert_string_equal (receiver->seen [i].delivery,
                             receiver->seen [4].delivery);
        assert_int_equal (receiver->seen [i].attempt, i - 3);
    }
    assert_true (s_has_events (&grid, retried, "notify_failed", 2));
    assert_true (s_has_events (&grid, retried, "notify_sent", 1));

    //  A receiver that never answers: the attempt times out, the broker
    //  answers meanwhile, and the next attempt goes through
    s_answers (receiver, 1, S_ANSWER_SILENT);
    char *slow = s_run (&grid, false, hook);
    assert_true (s_wait_seen (receiver, 8, 20000));
    pv_doc_t *status = grid_call (&grid, "status", NULL);
    assert_true (grid_reply_ok (status, NULL));
    pv_doc_destroy (&status);
    sent = s_wait_delivery (&grid, slow, "sent", 20000);
    assert_int_equal (json_integer_value (json_object_get (sent, "attempts")), 2);
    json_decref (sent);

    //  A redirect is not followed: it is a failed attempt
    s_answers (receiver, 1, S_ANSWER_REDIRECT);
    char *moved = s_run (&grid, false, hook);
    sent = s_wait_delivery (&grid, moved, "sent", 20000);
    assert_int_equal (json_integer_value (json_object_get (sent, "attempts")), 2);
    json_decref (sent);
    for (size_t i = 0; i < s_seen_count (receiver); i++)
        assert_string_not_equal (receiver->seen [i].path, "/redirected");

    //  A huge answer is read no further than needed
    s_answers (receiver, 1, S_ANSWER_HUGE);
    char *huge = s_run (&grid, false, hook);
    sent = s_wait_delivery (&grid, huge, "sent", 20000);
    assert_int_equal (json_integer_value (json_object_get (sent, "attempts")), 1);
    json_decref (sent);

    //  Nobody listens: dead after retry_for; notify retry sends it again
    char *lost = s_run (&grid, false, dead);
    json_t *gone = s_wait_delivery (&grid, lost, "dead", 20000);
    assert_true (json_integer_value (json_object_get (gone, "attempts")) >= 2);
    char delivery [32];
    snprintf (delivery, sizeof delivery, "%s", s_str (gone, "id"));
    json_decref (gone);
    assert_true (s_has_events (&grid, lost, "notify_dead", 1));
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&grid, &out, &err, 20000, "metrics", NULL), 0);
    assert_true (grid_line_with (out, "grid_notify_dead_total 1", NULL));
    assert_true (grid_line_with (out, "grid_notify_pending 0", NULL));
    free (out);
    free (err);
    s_receiver_t *late = s_receiver_start (dead_port);
    json_t *again = s_cli_json (&grid, "notify", "retry", delivery, NULL);
    assert_string_equal (s_str (again, "status"), "pending");
    json_decref (again);
    assert_true (s_wait_seen (late, 1, 20000));
    assert_string_equal (late->seen [0].delivery, delivery);
    sent = s_wait_delivery (&grid, lost, "sent", 20000);
    json_decref (sent);
    assert_true (s_has_events (&grid, lost, "notify_retried", 1));
    //  Named as jobs' events name who cancelled: with the role
    assert_int_equal (grid_cli (&grid, &out, &err, 20000, "job", "events",
                                lost, NULL), 0);
    assert_true (grid_line_with (out, "notify_retried", "queued again by",
                                 "(admin)", NULL));
    free (out);
    free (err);
    s_receiver_stop (&late);

    //  Bad URLs are refused at submit, the field named
    static const char *const refused [] = {
        "ftp://127.0.0.1/x", "http://user:pw@127.0.0.1/x", "http:///x",
        "https://hooks.example.com/x"
    };
    for (size_t i = 0; i < 4; i++) {
        char yaml [512];
        snprintf (yaml, sizeof yaml,
                  "target: node:web-01\n"
                  "notify: [{url: \"%s\"}]\n"
                  "tasks:\n  - {backend: test, action: echo, params: {msg: hi}}\n",
                  refused [i]);
        pv_doc_t *reply = grid_submit (&grid, yaml);
        char *code = grid_reply_code (reply);
        assert_non_null (code);
        assert_string_equal (code, "invalid_job");
        const pv_t *details = pv_map_get (pv_doc_root (reply), "details");
        char *text = pv_strdup (pv_array_at (details, 0));
        assert_non_null (text);
        if (!strstr (text, "notify[0].url"))
            fprintf (stderr, "refused: %s\n", text);
        assert_non_null (strstr (text, "notify[0].url"));
        free (text);
        free (code);
        pv_doc_destroy (&reply);
    }
    assert_int_equal (grid_cli (&grid, &out, &err, 20000, "job", "run",
                                "--target", "node:web-01", "--notify",
                                "gopher://x/", "test", "echo", NULL), 2);
    assert_non_null (strstr (err, "--notify"));
    free (out);
    free (err);
    //  A schedule's job names no webhooks (its record keeps the spec whole)
    assert_int_equal (grid_cli (&grid, &out, &err, 20000, "schedule", "add",
                                "hourly", "--every", "1h", "--target",
                                "node:web-01", "--notify", hook, "test", "echo",
                                "--msg", "x", NULL), 4);
    assert_non_null (strstr (err, "job.notify: a schedule's job names no "
                                  "webhooks"));
    free (out);
    free (err);

    //  Killed while a delivery is under way: sent again after the restart,
    //  with the same delivery id
    s_answers (receiver, 1, S_ANSWER_SILENT);
    size_t before = s_seen_count (receiver);
    char *killed = s_run (&grid, false, hook);
    assert_true (s_wait_seen (receiver, before + 1, 20000));
    grid_stop_broker (&grid, true);
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    assert_true (s_wait_seen (receiver, before + 2, 20000));
    assert_string_equal (receiver->seen [before].job, killed);
    assert_string_equal (receiver->seen [before + 1].delivery,
                         receiver->seen [before].delivery);
    sent = s_wait_delivery (&grid, killed, "sent", 20000);
    json_decref (sent);

    free (done);
    free (failed);
    free (retried);
    free (slow);
    free (moved);
    free (huge);
    free (lost);
    free (killed);
    grid_stop (&grid);
    s_receiver_stop (&receiver);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_notify),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
