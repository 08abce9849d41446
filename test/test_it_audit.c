/*  =========================================================================
    test_it_audit - the audit trail through a real gridbroker, gridagent,
    gridcli and curl: an admin with a name submits, cancels, drains and
    accepts a key, and `gridcli audit list` shows each with who, face,
    object and outcome; refused attempts by an operator and a viewer are
    recorded once per caller per 10 s, and so is a client key refused at
    the handshake (by the key); audit.list is an admin's; the
    filters; the HTTP route gives the same entries with a token and names
    the dashboard's requests; the entries survive a restart and each is a
    JSON log line with "audit":true. On a full disk a change and its entry
    are refused together, and land together once there is room.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <jansson.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/socket.h>

#include "lib/harness.h"

typedef struct {
    grid_t grid;
    char alice [400];            //  Admin key pair, named alice
    char olga [400];             //  Operator, named olga
    char vic [400];              //  Viewer, named vic
    char stranger [41];          //  An agent key nobody runs (Z85)
    char base [64];              //  http://127.0.0.1:PORT
    const char *extra [8];       //  The broker's arguments
    char conf [400];
} s_fixture_t;

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

//  gridcli as KEY with the NULL-terminated ARGS; its stdout as JSON
//  (asserting exit code CODE), or NULL when CODE is not 0.
static json_t *
s_cli_json (s_fixture_t *f, const char *key, int code, ...)
{
    const char *argv [24] = {NULL};
    size_t argc = 0;
    argv [argc++] = "--output";
    argv [argc++] = "json";
    va_list args;
    va_start (args, code);
    const char *arg;
    while ((arg = va_arg (args, const char *)) && argc < 22)
        argv [argc++] = arg;
    va_end (args);
    argv [argc] = NULL;
    char *out = NULL, *err = NULL;
    int got = grid_cli_as (&f->grid, key, &out, &err, 20000, argv [0],
                           argv [1], argv [2], argv [3], argv [4], argv [5],
                           argv [6], argv [7], argv [8], argv [9], argv [10],
                           argv [11], argv [12], argv [13], NULL);
    if (got != code)
        fprintf (stderr, "gridcli exit %d (expected %d)\nstdout:\n%s\n"
                 "stderr:\n%s\n", got, code, out, err);
    assert_int_equal (got, code);
    json_t *json = code == 0 ? json_loads (out, 0, NULL) : NULL;
    if (code == 0)
        assert_non_null (json);
    free (out);
    free (err);
    return json;
}

//  The entries of `gridcli audit list` as alice with the NULL-terminated
//  filter arguments (up to six).
static json_t *
s_audit (s_fixture_t *f, const char *a, const char *b, const char *c,
         const char *d)
{
    json_t *data = s_cli_json (f, f->alice, 0, "audit", "list", "--limit",
                               "1000", a, b, c, d, NULL);
    json_t *entries = json_incref (json_object_get (data, "entries"));
    assert_true (json_is_array (entries));
    json_decref (data);
    return entries;
}

static const char *
s_str (json_t *object, const char *key)
{
    const char *text = json_string_value (json_object_get (object, key));
    return text ? text : "";
}

//  The first (newest) entry of ENTRIES of request TYPE about OBJECT (NULL:
//  any), or NULL.
static json_t *
s_find (json_t *entries, const char *type, const char *object)
{
    size_t index;
    json_t *entry;
    json_array_foreach (entries, index, entry)
        if (streq (s_str (entry, "type"), type)
            && (!object || streq (s_str (entry, "object"), object)))
            return entry;
    return NULL;
}

//  How many of ENTRIES are of TYPE by WHO.
static size_t
s_count (json_t *entries, const char *type, const char *who)
{
    size_t index, count = 0;
    json_t *entry;
    json_array_foreach (entries, index, entry)
        if (streq (s_str (entry, "type"), type)
            && streq (s_str (entry, "who"), who))
            count++;
    return count;
}

static void
s_expect (json_t *entry, const char *who, const char *role, const char *face,
          const char *outcome)
{
    assert_non_null (entry);
    assert_string_equal (s_str (entry, "who"), who);
    assert_string_equal (s_str (entry, "role"), role);
    assert_string_equal (s_str (entry, "face"), face);
    assert_string_equal (s_str (entry, "outcome"), outcome);
    assert_int_equal (strlen (s_str (entry, "id")), 24);
    if (!streq (face, "signal"))
        assert_true (strlen (s_str (entry, "request")) > 0);
    assert_non_null (strchr (s_str (entry, "time"), 'T'));
}

//  curl METHOD PATH with TOKEN (NULL: none) and, when DASHBOARD, the
//  dashboard's face header; the answer's JSON into *JSON_P; returns the
//  HTTP status.
static int
s_curl (s_fixture_t *f, const char *token, bool dashboard,
        const char *method, const char *path, json_t **json_p)
{
    char command [1024];
    snprintf (command, sizeof command,
              "curl -s --max-time 20 -X %s %s%s%s %s -H 'Content-Type: "
              "application/json' %s -w '\\n%%{http_code}' '%s%s'",
              method, token ? "-H 'Authorization: Bearer " : "",
              token ? token : "", token ? "'" : "",
              dashboard ? "-H 'X-Grid-Face: dashboard'" : "",
              streq (method, "POST") ? "--data '{}'" : "", f->base, path);
    FILE *pipe = popen (command, "r");
    assert_non_null (pipe);
    char *text = (char *) calloc (1, 1 << 20);
    size_t size = fread (text, 1, (1 << 20) - 1, pipe);
    pclose (pipe);
    text [size] = 0;
    char *last = strrchr (text, '\n');
    int status = last ? atoi (last + 1) : 0;
    if (last)
        *last = 0;
    *json_p = json_loads (text, 0, NULL);
    free (text);
    return status;
}

static int
s_setup (void **state)
{
    s_fixture_t *f = (s_fixture_t *) calloc (1, sizeof (s_fixture_t));
    assert_int_equal (grid_init (&f->grid), 0);
    char stranger [400];
    assert_int_equal (grid_keygen (&f->grid, "alice", f->alice,
                                   sizeof f->alice, NULL), 0);
    assert_int_equal (grid_keygen (&f->grid, "olga", f->olga, sizeof f->olga,
                                   NULL), 0);
    assert_int_equal (grid_keygen (&f->grid, "vic", f->vic, sizeof f->vic,
                                   NULL), 0);
    assert_int_equal (grid_keygen (&f->grid, "stranger", stranger,
                                   sizeof stranger, f->stranger), 0);
    int port = s_free_port ();
    snprintf (f->base, sizeof f->base, "http://127.0.0.1:%d", port);
    snprintf (f->conf, sizeof f->conf, "%s/broker.yaml", f->grid.dir);
    FILE *file = fopen (f->conf, "w");
    assert_non_null (file);
    fprintf (file,
             "clients:\n"
             "  - {key: %s, role: admin, name: alice}\n"
             "  - {key: %s, role: operator, name: olga}\n"
             "  - {key: %s, role: viewer, name: vic}\n"
             "http:\n  listen: \"127.0.0.1:%d\"\n"
             "audit_retention: 365d\n",
             f->alice, f->olga, f->vic, port);
    fclose (file);
    f->extra [0] = "--config";
    f->extra [1] = f->conf;
    f->extra [2] = "--log-format";
    f->extra [3] = "json";
    f->extra [4] = NULL;
    assert_int_equal (grid_start_broker (&f->grid, f->extra), 0);
    assert_true (grid_start_agent (&f->grid, "web-01", "web", NULL, NULL)
                 >= 0);
    *state = f;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    grid_stop (&f->grid);
    free (f);
    return 0;
}

static void
test_it_audit_trail (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    //  alice, an admin with a name, changes things through gridcli
    json_t *run = s_cli_json (f, f->alice, 0, "job", "run", "--target",
                              "node:web-01", "test", "sleep", "--seconds",
                              "60", NULL);
    char job [64];
    snprintf (job, sizeof job, "%s", s_str (run, "job"));
    json_decref (run);
    assert_int_equal (strlen (job), 19);
    json_decref (s_cli_json (f, f->alice, 0, "job", "cancel", job, NULL));
    //  The job names who submitted it, its events who submitted and
    //  cancelled it
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli_as (&f->grid, f->alice, &out, &err, 20000,
                                   "job", "status", job, NULL), 1);
    assert_true (grid_line_with (out, "submitted by", "alice (admin)", NULL));
    free (out);
    free (err);
    assert_int_equal (grid_cli_as (&f->grid, f->alice, &out, &err, 20000,
                                   "job", "events", job, NULL), 0);
    assert_true (grid_line_with (out, "submitted", "by alice (admin)", NULL));
    assert_true (grid_line_with (out, "cancelled by alice (admin)", NULL));
    free (out);
    free (err);
    json_t *record = s_cli_json (f, f->alice, 1, "job", "status", job, NULL);
    assert_null (record);
    pv_doc_t *doc = grid_call (&f->grid, "job.get", "job", job, NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "submitted_by", "alice (admin)"));
    pv_doc_destroy (&doc);
    doc = grid_call (&f->grid, "job.list", NULL);
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (pv_array_at (pv_map_get (data, "jobs"), 0),
                              "submitted_by", "alice (admin)"));
    pv_doc_destroy (&doc);
    json_decref (s_cli_json (f, f->alice, 0, "node", "drain", "web-01", NULL));
    json_decref (s_cli_json (f, f->alice, 0, "node", "resume", "web-01",
                             NULL));
    json_decref (s_cli_json (f, f->alice, 0, "key", "accept", f->stranger,
                             NULL));
    json_decref (s_cli_json (f, f->alice, 0, "broker", "drain", NULL));
    json_decref (s_cli_json (f, f->alice, 0, "broker", "resume", NULL));
    //  A change that fails is recorded with its error
    s_cli_json (f, f->alice, 4, "job", "cancel", job, NULL);
    json_t *token = s_cli_json (f, f->alice, 0, "token", "add", "root",
                                "--role", "admin", NULL);
    char root [128];
    snprintf (root, sizeof root, "%s", s_str (token, "token"));
    json_decref (token);

    //  Refused: an operator drains (twice at once: one entry), a viewer
    //  reads the trail; audit.list is an admin's
    s_cli_json (f, f->olga, 4, "node", "drain", "web-01", NULL);
    s_cli_json (f, f->olga, 4, "node", "drain", "web-01", NULL);
    s_cli_json (f, f->olga, 4, "audit", "list", NULL);
    s_cli_json (f, f->vic, 4, "audit", "list", NULL);
    //  A read is not recorded
    json_decref (s_cli_json (f, f->alice, 0, "status", NULL));

    json_t *entries = s_audit (f, NULL, NULL, NULL, NULL);
    s_expect (s_find (entries, "job.submit", job), "alice", "admin", "zmq",
              "ok");
    json_t *cancel = s_find (entries, "job.cancel", job);
    s_expect (cancel, "alice", "admin", "zmq", "conflict");
    assert_true (strlen (s_str (cancel, "message")) > 0);
    assert_int_equal (s_count (entries, "job.cancel", "alice"), 2);
    s_expect (s_find (entries, "node.drain", "web-01"), "olga", "operator",
              "zmq", "forbidden");
    assert_int_equal (s_count (entries, "node.drain", "olga"), 1);
    assert_int_equal (s_count (entries, "node.drain", "alice"), 1);
    s_expect (s_find (entries, "node.resume", "web-01"), "alice", "admin",
              "zmq", "ok");
    s_expect (s_find (entries, "key.accept", f->stranger), "alice", "admin",
              "zmq", "ok");
    s_expect (s_find (entries, "broker.drain", NULL), "alice", "admin", "zmq",
              "ok");
    s_expect (s_find (entries, "broker.resume", NULL), "alice", "admin",
              "zmq", "ok");
    s_expect (s_find (entries, "token.add", "root"), "alice", "admin", "zmq",
              "ok");
    //  olga's audit.list came within 10 s of her refused drain: left out
    assert_int_equal (s_count (entries, "audit.list", "olga"), 0);
    s_expect (s_find (entries, "audit.list", NULL), "vic", "viewer", "zmq",
              "forbidden");
    assert_null (s_find (entries, "status", NULL));
    assert_int_equal (s_count (entries, "audit.list", "alice"), 0);
    //  Newest first
    assert_string_equal (s_str (json_array_get (entries, 0), "who"), "vic");
    size_t total = json_array_size (entries);
    assert_int_equal (total, 11);

    //  Filters
    json_t *some = s_audit (f, "--who", "alice", "--type", "job.");
    assert_int_equal (json_array_size (some), 3);
    json_decref (some);
    some = s_audit (f, "--object", "web-01", NULL, NULL);
    assert_int_equal (json_array_size (some), 3);
    json_decref (some);
    some = s_audit (f, "--outcome", "refused", "--since", "1h");
    assert_int_equal (json_array_size (some), 2);
    json_decref (some);
    some = s_audit (f, "--type", "job.cancel", "--outcome", "ok");
    assert_int_equal (json_array_size (some), 1);
    json_decref (some);
    //  Pages: two of the newest, then the rest before them
    json_t *page = s_cli_json (f, f->alice, 0, "audit", "list", "--limit",
                               "2", NULL);
    assert_int_equal (json_array_size (json_object_get (page, "entries")), 2);
    char next [32];
    snprintf (next, sizeof next, "%s", s_str (page, "next"));
    json_decref (page);
    page = s_cli_json (f, f->alice, 0, "audit", "list", "--before", next,
                       "--limit", "1000", NULL);
    assert_int_equal (json_array_size (json_object_get (page, "entries")),
                      total - 2);
    json_decref (page);
    //  Hostile filters: clear errors, from gridcli and from the broker
    s_cli_json (f, f->alice, 2, "audit", "list", "--limit", "100000", NULL);
    s_cli_json (f, f->alice, 2, "audit", "list", "--before", "xyz", NULL);
    s_cli_json (f, f->alice, 2, "audit", "list", "--since", "yesterday",
                NULL);

    //  HTTP: the same entries with a token; the dashboard named as such
    json_t *answer = NULL;
    assert_int_equal (s_curl (f, root, false, "GET", "/api/v1/audit?limit=1000",
                              &answer), 200);
    json_t *http_entries = json_object_get (answer, "entries");
    assert_int_equal (json_array_size (http_entries), total);
    for (size_t index = 0; index < total; index++)
        assert_string_equal (
            s_str (json_array_get (http_entries, index), "id"),
            s_str (json_array_get (entries, index), "id"));
    json_decref (answer);
    assert_int_equal (s_curl (f, root, true, "POST", "/api/v1/broker/drain",
                              &answer), 200);
    json_decref (answer);
    assert_int_equal (s_curl (f, root, false, "POST", "/api/v1/broker/resume",
                              &answer), 200);
    json_decref (answer);
    assert_int_equal (s_curl (f, "grid_nosuch_token", false, "POST",
                              "/api/v1/broker/drain", &answer), 401);
    json_decref (answer);
    assert_int_equal (s_curl (f, root, false, "GET",
                              "/api/v1/audit?request_type=broker.&who=root",
                              &answer), 200);
    http_entries = json_object_get (answer, "entries");
    assert_int_equal (json_array_size (http_entries), 2);
    s_expect (json_array_get (http_entries, 0), "root", "admin", "http", "ok");
    assert_string_equal (s_str (json_array_get (http_entries, 0), "type"),
                         "broker.resume");
    s_expect (json_array_get (http_entries, 1), "root", "admin", "dashboard",
              "ok");
    json_decref (answer);
    assert_int_equal (s_curl (f, root, false, "GET",
                              "/api/v1/audit?outcome=unauthorized", &answer),
                      200);
    http_entries = json_object_get (answer, "entries");
    assert_int_equal (json_array_size (http_entries), 1);
    s_expect (json_array_get (http_entries, 0), "an unknown token", "none",
              "http", "unauthorized");
    //  A token's text is a secret: never in the trail
    char *dumped = json_dumps (answer, 0);
    assert_null (strstr (dumped, "nosuch"));
    free (dumped);
    json_decref (answer);
    assert_int_equal (s_curl (f, root, false, "GET",
                              "/api/v1/audit?limit=0", &answer), 400);
    json_decref (answer);
    assert_int_equal (s_curl (f, root, false, "GET", "/api/v1/audit?since=x",
                              &answer), 400);
    json_decref (answer);
    //  Only admins read it over HTTP too
    token = s_cli_json (f, f->alice, 0, "token", "add", "eyes", "--role",
                        "viewer", NULL);
    char eyes [128];
    snprintf (eyes, sizeof eyes, "%s", s_str (token, "token"));
    json_decref (token);
    assert_int_equal (s_curl (f, eyes, false, "GET", "/api/v1/audit",
                              &answer), 403);
    json_decref (answer);

    //  Each entry was a JSON log line with "audit":true
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", f->grid.dir);
    char *log = grid_slurp (path);
    assert_true (grid_line_with (log, "\"audit\":true", "\"type\":\"job.cancel\"",
                                 "\"who\":\"alice\"", job, NULL));
    assert_true (grid_line_with (log, "\"audit\":true", "\"face\":\"dashboard\"",
                                 NULL));
    free (log);

    //  A configuration reload by SIGHUP is recorded with who sent it
    assert_int_equal (kill (f->grid.broker_pid, SIGHUP), 0);
    json_t *reloads = NULL;
    int64_t deadline = zclock_mono () + 20000;
    while (true) {
        reloads = s_audit (f, "--type", "config.reload", NULL, NULL);
        if (json_array_size (reloads) || zclock_mono () > deadline)
            break;
        json_decref (reloads);
        zclock_sleep (100);
    }
    assert_int_equal (json_array_size (reloads), 1);
    json_t *reload = json_array_get (reloads, 0);
    s_expect (reload, s_str (reload, "who"), "none", "signal", "ok");
    assert_non_null (strstr (s_str (reload, "who"), "SIGHUP from pid"));
    json_decref (reloads);

    //  A retry names who asked for it on the original's timeline, and on
    //  its own (submitted)
    json_t *retry = s_cli_json (f, f->alice, 0, "job", "retry", job, NULL);
    char again [64];
    snprintf (again, sizeof again, "%s", s_str (retry, "job"));
    json_decref (retry);
    assert_int_equal (grid_cli_as (&f->grid, f->alice, &out, &err, 20000,
                                   "job", "events", job, NULL), 0);
    assert_true (grid_line_with (out, "retried", again, "by alice (admin)",
                                 NULL));
    free (out);
    free (err);
    json_decref (s_cli_json (f, f->alice, 0, "job", "cancel", again, NULL));
    json_t *about = s_audit (f, "--object", job, NULL, NULL);
    s_expect (s_find (about, "job.retry", job), "alice", "admin", "zmq",
              "ok");
    json_decref (about);

    //  The trail survives a restart, and goes on after it
    size_t before_restart = total + 8;
    grid_stop_broker (&f->grid, true);
    assert_int_equal (grid_start_broker (&f->grid, f->extra), 0);
    json_decref (entries);
    entries = s_audit (f, NULL, NULL, NULL, NULL);
    assert_int_equal (json_array_size (entries), before_restart);
    json_decref (s_cli_json (f, f->alice, 0, "broker", "drain", NULL));
    json_decref (entries);
    entries = s_audit (f, NULL, NULL, NULL, NULL);
    assert_int_equal (json_array_size (entries), before_restart + 1);
    assert_string_equal (s_str (json_array_get (entries, 0), "type"),
                         "broker.drain");
    assert_true (strcmp (s_str (json_array_get (entries, 0), "id"),
                         s_str (json_array_get (entries, 1), "id")) > 0);
    json_decref (entries);

    //  A client key the broker does not know is refused at the handshake
    //  and recorded by the key, once for the attempts within 10 s
    char mallory [400], mallory_public [41];
    assert_int_equal (grid_keygen (&f->grid, "mallory", mallory,
                                   sizeof mallory, mallory_public), 0);
    for (int attempt = 0; attempt < 2; attempt++) {
        assert_true (grid_cli_as (&f->grid, mallory, &out, &err, 20000,
                                  "status", NULL) != 0);
        assert_non_null (strstr (err, "refused"));
        free (out);
        free (err);
    }
    json_t *refused = s_audit (f, "--type", "client.connect", NULL, NULL);
    assert_int_equal (json_array_size (refused), 1);
    json_t *entry = json_array_get (refused, 0);
    assert_string_equal (s_str (entry, "who"), mallory_public);
    assert_string_equal (s_str (entry, "role"), "none");
    assert_string_equal (s_str (entry, "face"), "zmq");
    assert_string_equal (s_str (entry, "outcome"), "unauthorized");
    assert_true (strlen (s_str (entry, "message")) > 0);
    json_decref (refused);
    refused = s_audit (f, "--who", mallory_public, NULL, NULL);
    assert_int_equal (json_array_size (refused), 1);
    json_decref (refused);
}

//  A full disk: the change and its entry land together or not at all
static void
test_it_audit_full_store (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    if (geteuid () != 0) {
        fprintf (stderr, "    skipped: mounting a small tmpfs needs root\n");
        grid_stop (&grid);
        return;
    }
    char disk [400], filler [420], data_dir [420];
    snprintf (disk, sizeof disk, "%s/disk", grid.dir);
    assert_int_equal (mkdir (disk, 0700), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m")
        != 0) {
        fprintf (stderr, "    skipped: cannot mount a tmpfs: %s\n",
                 strerror (errno));
        grid_stop (&grid);
        return;
    }
    snprintf (filler, sizeof filler, "%s/filler", disk);
    snprintf (data_dir, sizeof data_dir, "%s/broker", disk);
    const char *extra [] = {"--data-dir", data_dir, "--map-size-mb", "1",
                            NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    FILE *file = fopen (filler, "wb");
    assert_non_null (file);
    static char chunk [4096];
    while (fwrite (chunk, 1, sizeof chunk, file) == sizeof chunk)
        ;
    fclose (file);
    pv_doc_t *reply = grid_call (&grid, "token.add", "name", "late", "role",
                                 "viewer", NULL);
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_true (streq (code, "storage_full") || streq (code, "storage_error"));
    free (code);
    pv_doc_destroy (&reply);
    //  Room again: the next try lands, with one entry
    assert_int_equal (unlink (filler), 0);
    int64_t deadline = zclock_mono () + 20000;
    const pv_t *data = NULL;
    while (true) {
        reply = grid_call (&grid, "token.add", "name", "late", "role",
                           "viewer", NULL);
        if (grid_reply_ok (reply, &data) || zclock_mono () > deadline)
            break;
        pv_doc_destroy (&reply);
        zclock_sleep (100);
    }
    assert_true (grid_reply_ok (reply, &data));
    pv_doc_destroy (&reply);
    reply = grid_call (&grid, "audit.list", "request_type", "token.add",
                       NULL);
    assert_true (grid_reply_ok (reply, &data));
    const pv_t *entries = pv_map_get (data, "entries");
    size_t ok = 0;
    for (size_t index = 0; index < pv_size (entries); index++)
        if (grid_str_is (pv_array_at (entries, index), "outcome", "ok")) {
            assert_true (grid_str_is (pv_array_at (entries, index), "object",
                                      "late"));
            ok++;
        }
    //  The refused try left no entry: its transaction held both
    assert_int_equal (ok, 1);
    assert_int_equal (pv_size (entries), 1);
    pv_doc_destroy (&reply);
    reply = grid_call (&grid, "token.list", NULL);
    assert_true (grid_reply_ok (reply, &data));
    assert_int_equal (pv_size (pv_map_get (data, "tokens")), 1);
    pv_doc_destroy (&reply);
    grid_stop_broker (&grid, true);
    umount2 (disk, MNT_DETACH);
    grid_stop (&grid);
}

//  The number of entries audit.list gives GRID.
static size_t
s_entry_count (grid_t *grid)
{
    pv_doc_t *reply = grid_call (grid, "audit.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    size_t count = pv_size (pv_map_get (data, "entries"));
    pv_doc_destroy (&reply);
    return count;
}

//  The retention sweep prunes entries past audit_retention
static void
test_it_audit_retention (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    const char *extra [] = {"--audit-retention", "2s", NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    pv_doc_t *reply = grid_call (&grid, "broker.drain", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    reply = grid_call (&grid, "broker.resume", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    assert_int_equal (s_entry_count (&grid), 2);
    //  Hostile filters get clear errors
    char huge [400];
    memset (huge, 'a', sizeof huge - 1);
    huge [sizeof huge - 1] = 0;
    const char *bad [][2] = {{"who", huge}, {"object", huge},
                             {"request_type", "nodot"},
                             {"request_type", huge},
                             {"before", "zz"},
                             {"before", "zzzzzzzzzzzzzzzzzzzzzzzz"},
                             {"outcome", ""}};
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        reply = grid_call (&grid, "audit.list", bad [index][0],
                           bad [index][1], NULL);
        char *code = grid_reply_code (reply);
        if (!code || !streq (code, "bad_request"))
            fail_msg ("audit.list %s=%.20s: %s", bad [index][0],
                      bad [index][1], code ? code : "ok");
        free (code);
        pv_doc_destroy (&reply);
    }
    int64_t deadline = zclock_mono () + 20000;
    while (s_entry_count (&grid) > 0 && zclock_mono () < deadline)
        zclock_sleep (200);
    assert_int_equal (s_entry_count (&grid), 0);
    char *log = NULL;
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", grid.dir);
    log = grid_slurp (path);
    assert_true (grid_line_with (log, "audit: purged", "older than the audit", NULL));
    free (log);
    grid_stop (&grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_audit_trail, s_setup,
                                         s_teardown),
        cmocka_unit_test (test_it_audit_full_store),
        cmocka_unit_test (test_it_audit_retention),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
