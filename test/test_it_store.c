/*  =========================================================================
    test_it_store - the store at its edges, through the real programs: one
    owner per data and state directory, and a disk or a map that fills up
    while jobs come and go.

    The full-disk tests mount a small tmpfs and so run only as root; as
    any other user they say so and pass without checking anything.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include "../proto/proto.h"
#include "../store/store.h"
#include "lib/harness.h"

static int
s_setup (void **state)
{
    grid_t *grid = (grid_t *) zmalloc (sizeof (grid_t));
    if (grid_init (grid) != 0)
        return -1;
    *state = grid;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_t *grid = (grid_t *) *state;
    //  Processes first, then the tmpfs a test may have mounted, then the
    //  directory
    for (size_t index = 0; index < grid->agent_count; index++)
        grid_stop_agent (grid, (int) index, false);
    grid_stop_broker (grid, false);
    char disk [400];
    snprintf (disk, sizeof disk, "%s/disk", grid->dir);
    umount2 (disk, MNT_DETACH);
    grid_stop (grid);
    free (grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  One owner per directory

//  True when every line of TEXT is a JSON log line at error ("{"ts":...,
//  "level":"error",...}") and one of them says WORDS.
static bool
s_json_error_lines (const char *text, const char *words)
{
    bool said = false;
    for (const char *line = text; *line; ) {
        const char *end = strchr (line, '\n');
        if (!end || strncmp (line, "{\"ts\":\"", 7) != 0
        ||  end [-1] != '}')
            return false;
        const char *level = strstr (line, "\"level\":\"error\"");
        if (!level || level > end)
            return false;
        const char *found = strstr (line, words);
        said = said || (found && found < end);
        line = end + 1;
    }
    return said;
}

//  A second broker on a running broker's data dir refuses to start and
//  names the first one; the first goes on serving. It says so in a log
//  line at error, in the log format it was given.
static void
test_it_store_second_broker_is_refused (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    char data_dir [400], client [400], agents [400], publish [400];
    snprintf (data_dir, sizeof data_dir, "%s/broker-data", grid->dir);
    snprintf (client, sizeof client, "ipc://%s/client2.ipc", grid->dir);
    snprintf (agents, sizeof agents, "ipc://%s/agents2.ipc", grid->dir);
    snprintf (publish, sizeof publish, "ipc://%s/publish2.ipc", grid->dir);
    char *out = NULL, *err = NULL;
    int code = grid_run (grid, "gridbroker", &out, &err, 10000, "--data-dir",
                         data_dir, "--client", client, "--agents", agents,
                         "--publish", publish, "--insecure", NULL);
    assert_int_equal (code, 1);
    char expected [600];
    snprintf (expected, sizeof expected,
              "data dir %s is in use by gridbroker pid %d", data_dir,
              (int) grid->broker_pid);
    if (!strstr (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_non_null (strstr (err, expected));
    assert_non_null (strstr (err, " gridbroker error: data dir "));
    free (out);
    free (err);
    code = grid_run (grid, "gridbroker", &out, &err, 10000, "--data-dir",
                     data_dir, "--client", client, "--agents", agents,
                     "--publish", publish, "--insecure", "--log-format",
                     "json", NULL);
    assert_int_equal (code, 1);
    if (!s_json_error_lines (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_true (s_json_error_lines (err, expected));
    free (out);
    free (err);
    pv_doc_t *reply = grid_call (grid, "status", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    //  Once the first is gone the directory is free again.
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
}

//  A second agent on a running agent's state dir refuses to start.
static void
test_it_store_second_agent_is_refused (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int slot = grid_start_agent (grid, "web-01", NULL, NULL, NULL);
    assert_true (slot >= 0);
    char state_dir [400];
    snprintf (state_dir, sizeof state_dir, "%s/agent-web-01", grid->dir);
    char *out = NULL, *err = NULL;
    int code = grid_run (grid, "gridagent", &out, &err, 10000, "--id",
                         "web-02", "--broker", grid->agents_ep, "--publish",
                         grid->publish_ep, "--state-dir", state_dir,
                         "--insecure", NULL);
    assert_int_not_equal (code, 0);
    char expected [600];
    snprintf (expected, sizeof expected,
              "state dir %s is in use by gridagent pid %d", state_dir,
              (int) grid->agent_pids [slot]);
    if (!strstr (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_non_null (strstr (err, expected));
    assert_non_null (strstr (err, " gridagent[web-02] error: cannot start: "));
    free (out);
    free (err);
    code = grid_run (grid, "gridagent", &out, &err, 10000, "--id", "web-02",
                     "--broker", grid->agents_ep, "--publish",
                     grid->publish_ep, "--state-dir", state_dir,
                     "--insecure", "--log-format", "json", NULL);
    assert_int_not_equal (code, 0);
    if (!s_json_error_lines (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_true (s_json_error_lines (err, expected));
    free (out);
    free (err);
    assert_true (grid_wait_node (grid, "web-01", "online", 5000));
    //  A SIGKILLed agent leaves no lock behind: its successor starts.
    grid_stop_agent (grid, slot, true);
    assert_true (grid_start_agent (grid, "web-01", NULL, NULL, NULL) >= 0);
}

//  Stamps the store in DIR, at schema FROM (a new one is made at FROM),
//  with schema VERSION and, unless NULL, RELEASE as the last release to
//  open it.
static void
s_stamp_store (const char *dir, uint32_t from, uint32_t version,
               const char *release)
{
    char err [600] = "";
    store_t *store = store_open_with (dir, 0, 0, from, NULL, 0, err,
                                      sizeof err);
    if (!store)
        fail_msg ("store_open %s: %s", dir, err);
    unsigned char bytes [4] = {
        (unsigned char) (version >> 24), (unsigned char) (version >> 16),
        (unsigned char) (version >> 8), (unsigned char) version
    };
    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (store_put (txn, STORE_DB_META, "schema_version", 14,
                                 bytes, sizeof bytes), 0);
    if (release)
        assert_int_equal (store_put (txn, STORE_DB_META, "release", 7,
                                     release, strlen (release)), 0);
    assert_int_equal (store_commit (&txn), 0);
    store_destroy (&store);
}

//  The SHA-1 of the file PATH (freshly allocated), to tell it unchanged.
static char *
s_file_digest (const char *path)
{
    zchunk_t *chunk = zchunk_slurp (path, 0);
    assert_non_null (chunk);
    char *digest = strdup (zchunk_digest (chunk));
    zchunk_destroy (&chunk);
    return digest;
}

//  An agent's spool is a store as the broker's data is: a spool of a
//  newer schema (a later release's agent left it) stops gridagent at
//  start with the store's sentence naming that release, in its error
//  line, and stays as it was; an older schema no migration leads from is
//  refused the same way.
static void
test_it_store_newer_spool_is_refused (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    char state_dir [400], spool [420], data [440];
    snprintf (state_dir, sizeof state_dir, "%s/agent-sp-01", grid->dir);
    snprintf (spool, sizeof spool, "%s/spool", state_dir);
    snprintf (data, sizeof data, "%s/data.mdb", spool);
    s_stamp_store (spool, STORE_SCHEMA_VERSION, STORE_SCHEMA_VERSION + 1,
                   "9.0.0");
    char *before = s_file_digest (data);
    char *out = NULL, *err = NULL;
    int code = grid_run (grid, "gridagent", &out, &err, 10000, "--id",
                         "sp-01", "--broker", grid->agents_ep, "--publish",
                         grid->publish_ep, "--state-dir", state_dir,
                         "--insecure", NULL);
    assert_int_not_equal (code, 0);
    char expected [800];
    snprintf (expected, sizeof expected,
              " gridagent[sp-01] error: cannot start: %s: schema version %d "
              "is newer than this release's (%s reads %d): the store was "
              "written by release 9.0.0; install that release or a later "
              "one (this one leaves the store as it is)", spool,
              STORE_SCHEMA_VERSION + 1, GRID_VERSION, STORE_SCHEMA_VERSION);
    if (!strstr (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_non_null (strstr (err, expected));
    free (out);
    free (err);
    char *after = s_file_digest (data);
    assert_string_equal (before, after);
    free (before);
    free (after);

    //  Schema 0: older, and no step leads from it
    s_stamp_store (spool, STORE_SCHEMA_VERSION + 1, 0, NULL);
    code = grid_run (grid, "gridagent", &out, &err, 10000, "--id", "sp-01",
                     "--broker", grid->agents_ep, "--publish",
                     grid->publish_ep, "--state-dir", state_dir, "--insecure",
                     NULL);
    assert_int_not_equal (code, 0);
    snprintf (expected, sizeof expected,
              " gridagent[sp-01] error: cannot start: %s: schema version 0 "
              "is older than this release's (%s reads %d) and this release "
              "has no migration from schema 0", spool, GRID_VERSION,
              STORE_SCHEMA_VERSION);
    if (!strstr (err, expected))
        fprintf (stderr, "stderr: %s\n", err);
    assert_non_null (strstr (err, expected));
    free (out);
    free (err);
}

//  ---------------------------------------------------------------------
//  A full disk

static const pv_t *
s_data (const pv_doc_t *doc)
{
    const pv_t *data = NULL;
    return grid_reply_ok (doc, &data) ? data : NULL;
}

//  The broker's status.store map's KEY as an integer (-1 when missing).
static int64_t
s_store_int (grid_t *grid, const char *key)
{
    pv_doc_t *doc = grid_call (grid, "status", NULL);
    int64_t value = -1;
    const pv_t *store = pv_map_get (s_data (doc), "store");
    if (pv_get_int (pv_map_get (store, key), &value) != 0)
        value = -1;
    pv_doc_destroy (&doc);
    return value;
}

static bool
s_store_state_is (grid_t *grid, const char *state)
{
    pv_doc_t *doc = grid_call (grid, "status", NULL);
    bool is = grid_str_is (pv_map_get (s_data (doc), "store"), "state", state);
    pv_doc_destroy (&doc);
    return is;
}

//  Writes PATH until the disk is full. Returns 0 or -1.
static int
s_fill_disk (const char *path)
{
    FILE *file = fopen (path, "wb");
    if (!file)
        return -1;
    static char chunk [4096];
    while (fwrite (chunk, 1, sizeof chunk, file) == sizeof chunk)
        ;
    fclose (file);
    return 0;
}

//  A snapshot of the store in DIR that this process holds: while its read
//  transaction is open, LMDB reuses no page that a later commit freed, so
//  every commit needs pages it has never used before (a full disk then
//  refuses every write, small or large, not only those that outgrow the
//  pages freed so far).
typedef struct {
    store_t *store;
    store_txn_t *txn;
} s_snapshot_t;

static void
s_snapshot_hold (s_snapshot_t *snapshot, const char *dir)
{
    char err [256] = "";
    snapshot->store = store_open (dir, 0, 0, err, sizeof err);
    if (!snapshot->store)
        fprintf (stderr, "store_open %s: %s\n", dir, err);
    assert_non_null (snapshot->store);
    snapshot->txn = store_begin (snapshot->store, false);
    assert_non_null (snapshot->txn);
}

static void
s_snapshot_release (s_snapshot_t *snapshot)
{
    if (snapshot->txn)
        store_commit (&snapshot->txn);
    store_destroy (&snapshot->store);
}

//  A free TCP port on loopback.
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

//  GET PATH from the HTTP face on 127.0.0.1:PORT: the status (0 when
//  there was no answer within 5 s), the body into BODY (BODY_LEN bytes).
static int
s_http_get (int port, const char *path, char *body, size_t body_len)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct timeval timeout = {5, 0};
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    addr.sin_port = htons ((uint16_t) port);
    int status = 0;
    body [0] = 0;
    if (connect (fd, (struct sockaddr *) &addr, sizeof addr) == 0) {
        char request [256];
        int len = snprintf (request, sizeof request, "GET %s HTTP/1.1\r\n"
                            "Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
                            path);
        assert_int_equal (write (fd, request, (size_t) len), len);
        char answer [8192];
        size_t size = 0;
        ssize_t got;
        while (size < sizeof answer - 1
               && (got = read (fd, answer + size, sizeof answer - 1 - size))
                      > 0)
            size += (size_t) got;
        answer [size] = 0;
        sscanf (answer, "HTTP/1.1 %d", &status);
        const char *start = strstr (answer, "\r\n\r\n");
        snprintf (body, body_len, "%s", start ? start + 4 : "");
    }
    close (fd);
    return status;
}

static char *
s_job_status (grid_t *grid, const char *id)
{
    pv_doc_t *doc = grid_call (grid, "job.get", "job", id, NULL);
    char *status = pv_strdup (pv_map_get (s_data (doc), "status"));
    pv_doc_destroy (&doc);
    return status;
}

//  job.watch on JOB: answered at once without AFTER (-1), else when the
//  job moves past AFTER or TIMEOUT_MS passes. Caller destroys the reply.
static pv_doc_t *
s_watch (grid_t *grid, const char *job, int64_t after, int64_t timeout_ms)
{
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.watch", "store-watch",
                         after >= 0 ? 3 : 2);
    pw_str (writer, "job");
    pw_str (writer, job);
    if (after >= 0) {
        pw_str (writer, "after");
        pw_int (writer, after);
    }
    pw_str (writer, "timeout_ms");
    pw_int (writer, timeout_ms);
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     (int) timeout_ms + 5000);
    pw_destroy (&writer);
    assert_non_null (reply);
    return reply;
}

//  The broker's data dir and the agent's state dir on a 4 MiB tmpfs,
//  filled up while one job is
//  acknowledged, one runs and one is submitted: the submit is refused
//  with storage_full, /readyz answers 503, the running job's result is
//  not acknowledged until the space is back, then it completes without a
//  restart and /readyz answers 200 again; after a restart every
//  acknowledged job is there and the refused one is not.
static void
test_it_store_full_disk_loses_nothing (void **state)
{
    grid_t *grid = (grid_t *) *state;
    if (geteuid () != 0) {
        fprintf (stderr, "    skipped: mounting a small tmpfs needs root\n");
        return;
    }
    char disk [400], data_dir [420], filler [420];
    snprintf (disk, sizeof disk, "%s/disk", grid->dir);
    snprintf (data_dir, sizeof data_dir, "%s/broker", disk);
    snprintf (filler, sizeof filler, "%s/filler", disk);
    assert_int_equal (mkdir (disk, 0700), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m") != 0) {
        fprintf (stderr, "    skipped: cannot mount a tmpfs: %s\n",
                 strerror (errno));
        return;
    }
    int port = s_free_port ();
    char http [64];
    snprintf (http, sizeof http, "127.0.0.1:%d", port);
    const char *extra [] = {"--data-dir", data_dir, "--http", http, NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    //  From here on no commit reuses a page (see s_snapshot_hold): the
    //  pages freed before are few and the first commits take them
    s_snapshot_t snapshot = {NULL, NULL};
    s_snapshot_hold (&snapshot, data_dir);
    char body [8192];
    assert_int_equal (s_http_get (port, "/readyz", body, sizeof body), 200);
    //  The agent's spool is on the same disk, as on a single host: a
    //  result it cannot spool is kept in memory until the broker has it
    char state_dir [420];
    snprintf (state_dir, sizeof state_dir, "%s/agent", disk);
    const char *agent_extra [] = {"--state-dir", state_dir, NULL};
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, agent_extra)
                 >= 0);
    assert_true (s_store_state_is (grid, "ok"));

    const char *echo = "target: {scope: node, value: web-01}\n"
                       "tasks:\n  - {backend: test, action: echo, params: {msg: hi}}\n";
    const char *sleepy = "target: {scope: node, value: web-01}\n"
                         "tasks:\n"
                         "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
                         "  - {backend: test, action: output, params: {bytes: 60000}}\n";
    char *done = grid_submit_id (grid, echo);
    assert_non_null (done);
    pv_doc_t *doc = grid_wait_job (grid, done, 15000);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    char *running = grid_submit_id (grid, sleepy);
    assert_non_null (running);

    //  The disk fills while the sleep runs. A change may still fit in
    //  what is left of pages freed before the snapshot (then it is stored
    //  and answered ok, and must be there in the end); submits go on
    //  until one is refused.
    assert_int_equal (s_fill_disk (filler), 0);
    char *accepted [200];
    size_t accepted_count = 0;
    bool refused = false;
    while (!refused && accepted_count < 200) {
        pv_doc_t *reply = grid_submit (grid, echo);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data))
            accepted [accepted_count++] = pv_strdup (pv_map_get (data, "job"));
        else {
            char *code = grid_reply_code (reply);
            assert_non_null (code);
            assert_string_equal (code, "storage_full");
            free (code);
            refused = true;
        }
        pv_doc_destroy (&reply);
    }
    assert_true (refused);
    assert_true (s_store_int (grid, "refused") >= 1);
    //  Reads go on
    doc = grid_call (grid, "job.get", "job", done, NULL);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    doc = grid_call (grid, "job.list", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    //  The sleep's result comes while the disk is full: it is not taken
    long long deadline = grid_now_ms () + 15000;
    while (s_store_int (grid, "failed_commits") < 2 && grid_now_ms () < deadline)
        usleep (50 * 1000);
    assert_true (s_store_int (grid, "failed_commits") >= 2);
    assert_true (s_store_state_is (grid, "full"));
    //  The broker is not ready: /readyz says 503 and why; /healthz is 200
    int ready = s_http_get (port, "/readyz", body, sizeof body);
    if (ready != 503)
        fprintf (stderr, "/readyz on a full disk: %d %s\n", ready, body);
    assert_int_equal (ready, 503);
    assert_non_null (strstr (body, "\"storage\":\"full\""));
    assert_non_null (strstr (body, "the store is full"));
    assert_int_equal (s_http_get (port, "/healthz", body, sizeof body), 200);
    //  gridcli status says so
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "status", NULL), 0);
    assert_non_null (strstr (out, "store        full, "));
    if (!strstr (out, "store error  "))
        fprintf (stderr, "%s", out);
    assert_non_null (strstr (out, "store error  "));
    free (out);
    free (err);
    char *status = s_job_status (grid, running);
    assert_non_null (status);
    assert_string_equal (status, "running");
    free (status);
    //  A watcher hears only what is on disk: the agent sends its result
    //  again and again, and each time it does not finish the job for them
    int64_t version = -1;
    for (int round = 0; round < 4; round++) {
        pv_doc_t *watch = s_watch (grid, running, version, 1500);
        const pv_t *progress = pv_map_get (s_data (watch), "progress");
        if (!grid_str_is (progress, "status", "running"))
            fprintf (stderr, "job.watch on a full disk said %s\n",
                     pv_str (pv_map_get (progress, "status"), NULL));
        assert_true (grid_str_is (progress, "status", "running"));
        assert_int_equal (pv_get_int (pv_map_get (s_data (watch), "version"),
                                      &version), 0);
        pv_doc_destroy (&watch);
    }

    //  Space comes back: the job completes, no restart needed
    s_snapshot_release (&snapshot);
    assert_int_equal (unlink (filler), 0);
    doc = grid_wait_job (grid, running, 20000);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    assert_true (grid_str_is (grid_cell (s_data (doc), 1, "web-01"), "status",
                              "success"));
    pv_doc_destroy (&doc);
    char *after = grid_submit_id (grid, echo);
    assert_non_null (after);
    doc = grid_wait_job (grid, after, 15000);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    //  The state reads ok again once writes have gone through for a while
    deadline = grid_now_ms () + 15000;
    while (!s_store_state_is (grid, "ok") && grid_now_ms () < deadline)
        usleep (100 * 1000);
    assert_true (s_store_state_is (grid, "ok"));
    assert_true (s_store_int (grid, "episodes") >= 1);
    assert_int_equal (s_http_get (port, "/readyz", body, sizeof body), 200);
    assert_non_null (strstr (body, "\"storage\":\"ok\""));

    for (size_t index = 0; index < accepted_count; index++) {
        doc = grid_wait_job (grid, accepted [index], 20000);
        assert_true (grid_str_is (s_data (doc), "status", "completed"));
        pv_doc_destroy (&doc);
    }

    //  After a hard restart every acknowledged job is there, intact, and
    //  nothing else
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, extra), 0);
    const char *ids [] = {done, running, after};
    for (size_t index = 0; index < 3 + accepted_count; index++) {
        const char *id = index < 3 ? ids [index] : accepted [index - 3];
        doc = grid_call (grid, "job.get", "job", id, NULL);
        assert_true (grid_str_is (s_data (doc), "status", "completed"));
        assert_true (grid_str_is (grid_cell (s_data (doc), 0, "web-01"),
                                  "status", "success"));
        pv_doc_destroy (&doc);
    }
    doc = grid_call (grid, "job.list", NULL);
    int64_t total = -1;
    pv_get_int (pv_map_get (s_data (doc), "total"), &total);
    assert_int_equal (total, (int64_t) (3 + accepted_count));
    pv_doc_destroy (&doc);
    for (size_t index = 0; index < accepted_count; index++)
        free (accepted [index]);
    free (done);
    free (running);
    free (after);
}

//  Two nodes' results arrive on a full disk while a client watches the
//  job, asking again as soon as it is answered (as gridcli --wait does).
//  A failed commit undoes the job's changes: the watcher must neither be
//  answered with them nor woken by their undoing, or it asks again at
//  once, and each of its passes fails the next commit, thousands a second.
static void
test_it_store_full_disk_watchers_stay_calm (void **state)
{
    grid_t *grid = (grid_t *) *state;
    if (geteuid () != 0) {
        fprintf (stderr, "    skipped: mounting a small tmpfs needs root\n");
        return;
    }
    char disk [400], data_dir [420], filler [420];
    snprintf (disk, sizeof disk, "%s/disk", grid->dir);
    snprintf (data_dir, sizeof data_dir, "%s/broker", disk);
    snprintf (filler, sizeof filler, "%s/filler", disk);
    assert_int_equal (mkdir (disk, 0700), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m") != 0) {
        fprintf (stderr, "    skipped: cannot mount a tmpfs: %s\n",
                 strerror (errno));
        return;
    }
    const char *extra [] = {"--data-dir", data_dir, NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    assert_true (grid_start_agent (grid, "web-02", "web", NULL, NULL) >= 0);
    char *job = grid_submit_id (grid,
        "target: {scope: group, value: web}\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
        "  - {backend: test, action: output, params: {bytes: 60000}}\n");
    assert_non_null (job);
    assert_int_equal (s_fill_disk (filler), 0);
    long long deadline = grid_now_ms () + 15000;
    while (s_store_int (grid, "failed_commits") < 1 && grid_now_ms () < deadline)
        usleep (50 * 1000);
    assert_true (s_store_int (grid, "failed_commits") >= 1);
    int64_t failed_before = s_store_int (grid, "failed_commits");
    int64_t version = -1;
    deadline = grid_now_ms () + 3000;
    while (grid_now_ms () < deadline) {
        pv_doc_t *watch = s_watch (grid, job, version, 1000);
        assert_int_equal (pv_get_int (pv_map_get (s_data (watch), "version"),
                                      &version), 0);
        pv_doc_destroy (&watch);
    }
    int64_t failed = s_store_int (grid, "failed_commits") - failed_before;
    if (failed >= 100)
        fprintf (stderr, "%lld commits failed while a watcher waited 3 s\n",
                 (long long) failed);
    assert_true (failed < 100);
    //  Space comes back: the job completes
    assert_int_equal (unlink (filler), 0);
    pv_doc_t *doc = grid_wait_job (grid, job, 20000);
    assert_true (grid_str_is (s_data (doc), "status", "completed"));
    pv_doc_destroy (&doc);
    free (job);
}

//  ---------------------------------------------------------------------
//  A full map

//  The broker's log so far, as one string (fails the test when unreadable).
static char *
s_broker_log (grid_t *grid)
{
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", grid->dir);
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    size_t size = 0, limit = 1 << 20;
    char *text = (char *) zmalloc (limit + 1);
    size = fread (text, 1, limit, file);
    text [size] = '\0';
    fclose (file);
    return text;
}

static const char *s_bulky = "target: {scope: node, value: web-01}\n"
    "tasks:\n  - {backend: test, action: output, params: {bytes: 60000}}\n";

//  Submits COUNT bulky jobs back to back, then waits for each accepted
//  one. Every accepted job must end completed; refusals must be
//  storage_full. Returns how many were accepted; their ids go to IDS.
static size_t
s_submit_bulky (grid_t *grid, size_t count, char **ids, size_t *refused_p)
{
    size_t accepted = 0, refused = 0;
    for (size_t index = 0; index < count; index++) {
        pv_doc_t *reply = grid_submit (grid, s_bulky);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data))
            ids [accepted++] = pv_strdup (pv_map_get (data, "job"));
        else {
            char *code = grid_reply_code (reply);
            assert_non_null (code);
            assert_string_equal (code, "storage_full");
            free (code);
            refused++;
        }
        pv_doc_destroy (&reply);
    }
    for (size_t index = 0; index < accepted; index++) {
        pv_doc_t *doc = grid_wait_job (grid, ids [index], 20000);
        if (!grid_str_is (s_data (doc), "status", "completed"))
            grid_dump_logs (grid);
        assert_true (grid_str_is (s_data (doc), "status", "completed"));
        pv_doc_destroy (&doc);
    }
    *refused_p = refused;
    return accepted;
}

//  A map that may grow grows: nothing is refused, the map doubled. Jobs
//  on six nodes bring their results back at once, so that one pass may
//  outgrow the room left: it is undone and done again in a larger map.
static void
test_it_store_map_grows (void **state)
{
    grid_t *grid = (grid_t *) *state;
    const char *extra [] = {"--map-size-mb", "1", "--store-max-size", "64MiB",
                            NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    char *ids [40];
    size_t refused = 0;
    size_t accepted = s_submit_bulky (grid, 10, ids, &refused);
    assert_int_equal (accepted, 10);
    assert_int_equal (refused, 0);
    for (size_t index = 0; index < accepted; index++)
        free (ids [index]);
    char name [16];
    for (int index = 2; index <= 6; index++) {
        snprintf (name, sizeof name, "web-%02d", index);
        assert_true (grid_start_agent (grid, name, "web", NULL, NULL) >= 0);
    }
    const char *wide = "target: {scope: group, value: web}\n"
                       "tasks:\n  - {backend: test, action: output, params: {bytes: 60000}}\n";
    for (size_t index = 0; index < 12; index++) {
        ids [index] = grid_submit_id (grid, wide);
        assert_non_null (ids [index]);
    }
    for (size_t index = 0; index < 12; index++) {
        pv_doc_t *doc = grid_wait_job (grid, ids [index], 30000);
        assert_true (grid_str_is (s_data (doc), "status", "completed"));
        pv_doc_destroy (&doc);
        free (ids [index]);
    }
    assert_true (s_store_int (grid, "map_bytes") >= 4 << 20);
    assert_int_equal (s_store_int (grid, "max_bytes"), 64 << 20);
    assert_int_equal (s_store_int (grid, "refused"), 0);
    assert_true (s_store_state_is (grid, "ok"));
}

//  A map at its ceiling: submits past it are refused with storage_full
//  and reads go on; a job whose result does not fit waits, not lost, and
//  completes once deleting old jobs made room; after a restart every
//  accepted job is intact.
static void
test_it_store_map_at_ceiling (void **state)
{
    grid_t *grid = (grid_t *) *state;
    //  At --log-level warn the broker still says that the store fills up
    const char *extra [] = {"--map-size-mb", "1", "--store-max-size", "2MiB",
                            "--log-level", "warn", NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    char *ids [100];
    size_t accepted = 0;
    bool refused = false;
    while (accepted < 100 && !refused) {
        pv_doc_t *reply = grid_submit (grid, s_bulky);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data)) {
            ids [accepted++] = pv_strdup (pv_map_get (data, "job"));
            pv_doc_t *doc = grid_wait_job (grid, ids [accepted - 1], 3000);
            pv_doc_destroy (&doc);
        }
        else {
            char *code = grid_reply_code (reply);
            assert_non_null (code);
            assert_string_equal (code, "storage_full");
            free (code);
            refused = true;
        }
        pv_doc_destroy (&reply);
    }
    assert_true (refused);
    assert_true (accepted >= 3);
    assert_int_equal (s_store_int (grid, "max_bytes"), 2 << 20);
    assert_true (s_store_int (grid, "refused") >= 1);
    assert_true (s_store_int (grid, "used_percent") >= 90);
    assert_true (s_store_state_is (grid, "nearly_full")
                 || s_store_state_is (grid, "full"));
    char *log = s_broker_log (grid);
    assert_non_null (strstr (log, "gridbroker warn: store: "));
    assert_non_null (strstr (log, "% of store.max_size used"));
    if (s_store_int (grid, "failed_commits") > 0)
        assert_non_null (strstr (log, "gridbroker error: store: commit failed"));
    //  No info chatter at warn; the audit trail's lines are written
    //  whatever the level
    for (const char *at = strstr (log, "gridbroker info: "); at;
         at = strstr (at + 1, "gridbroker info: "))
        assert_int_equal (strncmp (at + strlen ("gridbroker info: "),
                                   "audit: ", 7), 0);
    free (log);
    pv_doc_t *doc = grid_call (grid, "job.list", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    //  Room is made by deleting the first finished jobs; every other
    //  accepted job then completes
    size_t deleted = 0;
    for (size_t index = 0; index < accepted && deleted < 3; index++) {
        char *status = s_job_status (grid, ids [index]);
        if (status && strcmp (status, "completed") == 0) {
            doc = grid_call (grid, "job.delete", "job", ids [index], NULL);
            assert_true (grid_reply_ok (doc, NULL));
            pv_doc_destroy (&doc);
            free (ids [index]);
            ids [index] = NULL;
            deleted++;
        }
        free (status);
    }
    assert_int_equal (deleted, 3);
    for (size_t index = 0; index < accepted; index++) {
        if (!ids [index])
            continue;
        doc = grid_wait_job (grid, ids [index], 20000);
        assert_true (grid_str_is (s_data (doc), "status", "completed"));
        pv_doc_destroy (&doc);
    }
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, extra), 0);
    for (size_t index = 0; index < accepted; index++) {
        if (!ids [index])
            continue;
        doc = grid_call (grid, "job.get", "job", ids [index], NULL);
        const pv_t *record = s_data (doc);
        assert_true (grid_str_is (record, "status", "completed"));
        assert_true (grid_str_is (grid_cell (record, 0, "web-01"), "status",
                                  "success"));
        pv_doc_destroy (&doc);
        free (ids [index]);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_store_second_broker_is_refused,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_store_second_agent_is_refused,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_store_newer_spool_is_refused,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_store_full_disk_loses_nothing,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_store_full_disk_watchers_stay_calm,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_store_map_grows,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_store_map_at_ceiling,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
