/*  =========================================================================
    test_it_backends - every action of every backend through a real
    gridbroker and real gridagents, against the recording fakes of
    test/fakes (the agents' --tool-dir), so that a test asserts exactly
    what would run and never changes the machine.

    The fleet: web-01, web-02 (group web) and db-01 (group db) offer every
    backend; nopkg-01 (group nopkg) runs with --disable apt. Each agent's
    fakes log their argv to <dir>/fake-<id>.log, and each agent manages its
    own <dir>/resolv-<id>.conf instead of /etc/resolv.conf.

    Hostile parameters are refused at submit (invalid_job, with the path of
    the param) and the fake logs stay empty: nothing was dispatched.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <limits.h>

#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

static grid_t s_grid;
static const char *s_nodes [] = {"web-01", "web-02", "db-01", "nopkg-01"};
#define S_NODE_COUNT 4

static const char *s_resolv_text =
    "# managed by hand\n"
    "nameserver 10.0.0.1\n"
    "search example.com\n"
    "options timeout:2\n";

//  ---------------------------------------------------------------------
//  Helpers

static const char *
s_src (void)
{
    const char *src = getenv ("GRID_SRC");
    return src && *src ? src : ".";
}

static char *
s_slurp (const char *path)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return strdup ("");
    char *text = NULL;
    size_t size = 0;
    FILE *memory = open_memstream (&text, &size);
    char buf [4096];
    size_t got;
    while ((got = fread (buf, 1, sizeof buf, file)) > 0)
        fwrite (buf, 1, got, memory);
    fclose (memory);
    fclose (file);
    return text;
}

static void
s_write_file (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
}

static void
s_resolv_path (grid_t *grid, const char *id, char *path, size_t len)
{
    snprintf (path, len, "%s/resolv-%s.conf", grid->dir, id);
}

//  Starts agent ID on the fakes, with its own fake log and resolv.conf,
//  and EXTRA arguments (NULL or one flag and its value).
static int
s_start_agent (grid_t *grid, const char *id, const char *groups,
               const char *flag, const char *value)
{
    char log [400], tool_dir [600], resolv [400];
    snprintf (log, sizeof log, "%s/fake-%s.log", grid->dir, id);
    snprintf (tool_dir, sizeof tool_dir, "%s/test/fakes", s_src ());
    s_resolv_path (grid, id, resolv, sizeof resolv);
    s_write_file (resolv, s_resolv_text);
    const char *extra [] = {"--tool-dir", tool_dir, "--resolv-conf", resolv,
                            flag, value, NULL};
    setenv ("GRID_FAKE_LOG", log, 1);
    int slot = grid_start_agent (grid, id, groups, NULL, extra);
    unsetenv ("GRID_FAKE_LOG");
    return slot;
}

static char *
s_fake_log (const char *id)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fake-%s.log", s_grid.dir, id);
    return s_slurp (path);
}

static void
s_fake_clear_all (void)
{
    for (int node = 0; node < S_NODE_COUNT; node++) {
        char path [400];
        snprintf (path, sizeof path, "%s/fake-%s.log", s_grid.dir,
                  s_nodes [node]);
        FILE *file = fopen (path, "w");
        if (file)
            fclose (file);
    }
}

//  Asserts node ID's fakes recorded exactly EXPECTED.
static void
s_assert_log (const char *id, const char *expected)
{
    char *log = s_fake_log (id);
    if (strcmp (log, expected) != 0)
        fprintf (stderr, "fake log of %s:\n%s---\nexpected:\n%s---\n", id,
                 log, expected);
    assert_string_equal (log, expected);
    free (log);
}

static void
s_assert_logs_empty (void)
{
    for (int node = 0; node < S_NODE_COUNT; node++)
        s_assert_log (s_nodes [node], "");
}

static const pv_t *
s_data (pv_doc_t *doc)
{
    const pv_t *data = NULL;
    if (!grid_reply_ok (doc, &data) && doc) {
        pv_write_json (pv_doc_root (doc), stderr, 2);
        fprintf (stderr, "\n");
    }
    assert_true (grid_reply_ok (doc, &data));
    return data;
}

//  Submits one task on TARGET (text form) with up to two params (NAME,
//  VALUE of VALUE_LEN bytes, which may hold a NUL; NULL names end the
//  list). Returns the reply.
static pv_doc_t *
s_submit (const char *target, const char *backend, const char *action,
          const char *name, const char *value, size_t value_len,
          const char *name2, const char *value2)
{
    pw_t *writer = pw_new ();
    char id [64];
    snprintf (id, sizeof id, "it-backends-%d-%d", (int) getpid (),
              ++s_grid.request_seq);
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_str (writer, target);
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, backend);
    pw_str (writer, "action");
    pw_str (writer, action);
    pw_str (writer, "params");
    pw_map (writer, (name ? 1 : 0) + (name2 ? 1 : 0));
    if (name) {
        pw_str (writer, name);
        pw_strn (writer, value, value_len);
    }
    if (name2) {
        pw_str (writer, name2);
        pw_str (writer, value2);
    }
    pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer),
                                     pw_size (writer), 5000);
    pw_destroy (&writer);
    return reply;
}

//  Runs one task with params NAME=VALUE and NAME2=VALUE2 (either may be
//  NULL) and waits for the end. Returns the final record's document.
static pv_doc_t *
s_run (const char *target, const char *backend, const char *action,
       const char *name, const char *value, const char *name2,
       const char *value2)
{
    pv_doc_t *reply = s_submit (target, backend, action, name, value,
                                value ? strlen (value) : 0, name2, value2);
    char *job_id = pv_strdup (pv_map_get (s_data (reply), "job"));
    pv_doc_destroy (&reply);
    pv_doc_t *doc = grid_wait_job (&s_grid, job_id, S_WAIT_MS);
    free (job_id);
    s_data (doc);
    return doc;
}

static const pv_t *
s_record (pv_doc_t *doc)
{
    return pv_map_get (pv_doc_root (doc), "data");
}

static void
s_assert_cell (const pv_t *record, const char *node, const char *status)
{
    const pv_t *cell = grid_cell (record, 0, node);
    if (!grid_str_is (cell, "status", status)) {
        fprintf (stderr, "%s: expected %s, got ", node, status);
        pv_write_json (cell, stderr, 0);
        fprintf (stderr, "\n");
    }
    assert_true (grid_str_is (cell, "status", status));
}

static char *
s_cell_text (const pv_t *record, const char *node, const char *key)
{
    char *text = pv_strdup (pv_map_get (grid_cell (record, 0, node), key));
    return text ? text : strdup ("");
}

static int64_t
s_int (const pv_t *map, const char *key)
{
    int64_t value = -1;
    pv_get_int (pv_map_get (map, key), &value);
    return value;
}

//  The expected node list of RECORD, comma-joined (caller frees).
static char *
s_expected (const pv_t *record)
{
    const pv_t *expected = pv_map_get (record, "expected");
    char *text = (char *) calloc (1, 1024);
    for (size_t index = 0; index < pv_size (expected); index++) {
        char *id = pv_strdup (pv_array_at (expected, index));
        if (index)
            strcat (text, ",");
        strncat (text, id ? id : "?", 100);
        free (id);
    }
    return text;
}

static int64_t
s_job_total (void)
{
    pv_doc_t *doc = grid_call (&s_grid, "job.list", NULL);
    int64_t total = s_int (s_data (doc), "total");
    pv_doc_destroy (&doc);
    return total;
}

static void
s_cli_expect (int code, char *out, char *err, int got)
{
    if (got != code)
        fprintf (stderr, "gridcli exit %d (expected %d)\nstdout:\n%s\n"
                 "stderr:\n%s\n", got, code, out, err);
    assert_int_equal (got, code);
}

//  True when some line of TEXT holds every NULL-terminated word.
static bool
s_line_with (const char *text, ...)
{
    const char *line = text;
    while (line && *line) {
        const char *end = strchr (line, '\n');
        size_t len = end ? (size_t) (end - line) : strlen (line);
        char *copy = strndup (line, len);
        bool all = true;
        va_list args;
        va_start (args, text);
        const char *word;
        while ((word = va_arg (args, const char *)))
            if (!strstr (copy, word))
                all = false;
        va_end (args);
        free (copy);
        if (all)
            return true;
        line = end ? end + 1 : NULL;
    }
    return false;
}

//  ---------------------------------------------------------------------
//  Fixture

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0)
        return -1;
    if (s_start_agent (&s_grid, "web-01", "web", NULL, NULL) < 0
        || s_start_agent (&s_grid, "web-02", "web", NULL, NULL) < 0
        || s_start_agent (&s_grid, "db-01", "db", NULL, NULL) < 0
        || s_start_agent (&s_grid, "nopkg-01", "nopkg", "--disable", "apt") < 0)
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  Every action

static void
test_it_backends_test_actions (void **state)
{
    s_fake_clear_all ();
    pv_doc_t *doc = s_run ("node:db-01", "test", "echo", "msg", "héllo, grid",
                           NULL, NULL);
    s_assert_cell (s_record (doc), "db-01", "success");
    char *text = s_cell_text (s_record (doc), "db-01", "output");
    assert_string_equal (text, "héllo, grid\n");
    free (text);
    pv_doc_destroy (&doc);

    doc = s_run ("node:db-01", "test", "sleep", "seconds", "0", "msg", "awake");
    s_assert_cell (s_record (doc), "db-01", "success");
    text = s_cell_text (s_record (doc), "db-01", "output");
    assert_string_equal (text, "awake\n");
    free (text);
    pv_doc_destroy (&doc);

    doc = s_run ("node:db-01", "test", "fail", "msg", "boom", NULL, NULL);
    s_assert_cell (s_record (doc), "db-01", "failed");
    text = s_cell_text (s_record (doc), "db-01", "error");
    assert_non_null (strstr (text, "boom"));
    free (text);
    assert_int_equal (s_int (grid_cell (s_record (doc), 0, "db-01"),
                             "exit_code"), 1);
    pv_doc_destroy (&doc);

    doc = s_run ("node:db-01", "test", "flaky", "failures", "0", NULL, NULL);
    s_assert_cell (s_record (doc), "db-01", "success");
    text = s_cell_text (s_record (doc), "db-01", "output");
    assert_string_equal (text, "attempt 1: succeeded, failures 0\n");
    free (text);
    pv_doc_destroy (&doc);

    //  More than a record carries: its first 4 KiB there, the whole kept
    //  apart (test_it_output reads it back), nothing cut
    doc = s_run ("node:db-01", "test", "output", "bytes", "200000", NULL,
                 NULL);
    const pv_t *cell = grid_cell (s_record (doc), 0, "db-01");
    s_assert_cell (s_record (doc), "db-01", "success");
    bool truncated = true;
    assert_int_equal (pv_get_bool (pv_map_get (cell, "truncated"), &truncated),
                      0);
    assert_false (truncated);
    size_t len = 0;
    pv_str (pv_map_get (cell, "output"), &len);
    assert_int_equal (len, PROTO_OUTPUT_HEAD);
    assert_int_equal (s_int (cell, "output_size"), 200000);
    pv_doc_destroy (&doc);
    s_assert_logs_empty ();
}

static void
test_it_backends_system_actions (void **state)
{
    char host [HOST_NAME_MAX + 2] = "";
    gethostname (host, sizeof host - 1);
    struct {
        const char *action, *param, *value, *output;
    } cases [] = {
        {"hostname", NULL, NULL, host},
        {"uptime", NULL, NULL, "up "},
        {"os", NULL, NULL, "Linux"},
        {"disk", NULL, NULL, "/: "},
        {"disk", "path", "/tmp", "/tmp: "},
        {"memory", NULL, NULL, "GiB available of"},
        {"load", NULL, NULL, "load average: "},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        pv_doc_t *doc = s_run ("all", "system", cases [index].action,
                               cases [index].param, cases [index].value, NULL,
                               NULL);
        const pv_t *record = s_record (doc);
        char *expected = s_expected (record);
        assert_string_equal (expected, "db-01,nopkg-01,web-01,web-02");
        free (expected);
        for (int node = 0; node < S_NODE_COUNT; node++) {
            s_assert_cell (record, s_nodes [node], "success");
            char *output = s_cell_text (record, s_nodes [node], "output");
            if (!strstr (output, cases [index].output))
                fprintf (stderr, "system %s on %s: %s\n",
                         cases [index].action, s_nodes [node], output);
            assert_non_null (strstr (output, cases [index].output));
            free (output);
        }
        pv_doc_destroy (&doc);
    }
}

static void
test_it_backends_ping (void **state)
{
    s_fake_clear_all ();
    pv_doc_t *doc = s_run ("node:web-01", "ping", "ping", "address",
                           "127.0.0.1", "count", "2");
    s_assert_cell (s_record (doc), "web-01", "success");
    char *output = s_cell_text (s_record (doc), "web-01", "output");
    assert_non_null (strstr (output, "2 packets transmitted, 2 received"));
    free (output);
    pv_doc_destroy (&doc);
    s_assert_log ("web-01",
                  "ping\n-c\n2\n-W\n2\n--\n127.0.0.1\n---- end of argv\n");

    //  The default count, a name, and an address that never answers
    s_fake_clear_all ();
    doc = s_run ("node:web-02", "ping", "ping", "address", "gateway.example",
                 NULL, NULL);
    s_assert_cell (s_record (doc), "web-02", "success");
    pv_doc_destroy (&doc);
    doc = s_run ("node:web-02", "ping", "ping", "address", "192.0.2.1", NULL,
                 NULL);
    s_assert_cell (s_record (doc), "web-02", "failed");
    assert_int_equal (s_int (grid_cell (s_record (doc), 0, "web-02"),
                             "exit_code"), 1);
    pv_doc_destroy (&doc);
    s_assert_log ("web-02",
                  "ping\n-c\n3\n-W\n2\n--\ngateway.example\n---- end of argv\n"
                  "ping\n-c\n3\n-W\n2\n--\n192.0.2.1\n---- end of argv\n");
    s_assert_log ("web-01", "");
    s_assert_log ("db-01", "");
}

static void
test_it_backends_network_dns (void **state)
{
    pv_doc_t *doc = s_run ("node:web-01", "network", "dns_get", NULL, NULL,
                           NULL, NULL);
    s_assert_cell (s_record (doc), "web-01", "success");
    char *output = s_cell_text (s_record (doc), "web-01", "output");
    assert_string_equal (output,
                         "nameservers: 10.0.0.1\nsearch: example.com\n");
    free (output);
    pv_doc_destroy (&doc);

    doc = s_run ("node:web-01", "network", "dns_update", "servers",
                 "192.0.2.53,2001:db8::53", "search",
                 "corp.example,example.net");
    s_assert_cell (s_record (doc), "web-01", "success");
    pv_doc_destroy (&doc);
    char path [400];
    s_resolv_path (&s_grid, "web-01", path, sizeof path);
    char *text = s_slurp (path);
    //  New servers and search first; the comment and options are kept
    assert_string_equal (text, "nameserver 192.0.2.53\n"
                               "nameserver 2001:db8::53\n"
                               "search corp.example example.net\n"
                               "# managed by hand\n"
                               "options timeout:2\n");
    free (text);
    doc = s_run ("node:web-01", "network", "dns_get", NULL, NULL, NULL, NULL);
    output = s_cell_text (s_record (doc), "web-01", "output");
    assert_string_equal (output, "nameservers: 192.0.2.53,2001:db8::53\n"
                                 "search: corp.example,example.net\n");
    free (output);
    pv_doc_destroy (&doc);
    //  Only the targeted node's file changed
    s_resolv_path (&s_grid, "web-02", path, sizeof path);
    text = s_slurp (path);
    assert_string_equal (text, s_resolv_text);
    free (text);

    //  A value that passes the schema but not the backend's own check is
    //  refused by the agent, and the file stays as it was
    doc = s_run ("node:web-02", "network", "dns_update", "servers",
                 "1.2.3.4.5", NULL, NULL);
    s_assert_cell (s_record (doc), "web-02", "failed");
    char *error = s_cell_text (s_record (doc), "web-02", "error");
    assert_non_null (strstr (error, "not a valid nameserver address"));
    free (error);
    pv_doc_destroy (&doc);
    text = s_slurp (path);
    assert_string_equal (text, s_resolv_text);
    free (text);
}

static void
test_it_backends_apt_on_web_nodes_only (void **state)
{
    struct {
        const char *action, *package, *argv;
    } cases [] = {
        {"install", "nginx", "apt-get\ninstall\n-y\n--\nnginx\n"},
        {"remove", "libfoo2.0+dfsg",
         "apt-get\nremove\n-y\n--\nlibfoo2.0+dfsg\n"},
        {"update", NULL, "apt-get\nupdate\n-y\n"},
        {"upgrade", NULL, "apt-get\nupgrade\n-y\n"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        s_fake_clear_all ();
        pv_doc_t *doc = s_run ("group:web", "apt", cases [index].action,
                               cases [index].package ? "package" : NULL,
                               cases [index].package, NULL, NULL);
        const pv_t *record = s_record (doc);
        char *expected = s_expected (record);
        assert_string_equal (expected, "web-01,web-02");
        free (expected);
        s_assert_cell (record, "web-01", "success");
        s_assert_cell (record, "web-02", "success");
        pv_doc_destroy (&doc);
        char argv [256];
        snprintf (argv, sizeof argv, "%s---- end of argv\n",
                  cases [index].argv);
        s_assert_log ("web-01", argv);
        s_assert_log ("web-02", argv);
        s_assert_log ("db-01", "");
        s_assert_log ("nopkg-01", "");
    }
    //  apt's own failure is the step's failure, with apt's words
    pv_doc_t *doc = s_run ("node:web-01", "apt", "install", "package",
                           "no-such-package", NULL, NULL);
    s_assert_cell (s_record (doc), "web-01", "failed");
    assert_int_equal (s_int (grid_cell (s_record (doc), 0, "web-01"),
                             "exit_code"), 100);
    char *error = s_cell_text (s_record (doc), "web-01", "error");
    assert_non_null (strstr (error, "Unable to locate package"));
    free (error);
    pv_doc_destroy (&doc);
}

static void
test_it_backends_systemd_and_rke2 (void **state)
{
    const char *verbs [] = {"start", "stop", "restart", "enable", "disable",
                            "status"};
    for (size_t index = 0; index < 6; index++) {
        s_fake_clear_all ();
        pv_doc_t *doc = s_run ("node:db-01", "systemd", verbs [index], "unit",
                               "nginx.service", NULL, NULL);
        s_assert_cell (s_record (doc), "db-01", "success");
        pv_doc_destroy (&doc);
        char argv [256];
        snprintf (argv, sizeof argv,
                  "systemctl\n%s\n--\nnginx.service\n---- end of argv\n",
                  verbs [index]);
        s_assert_log ("db-01", argv);
        s_assert_log ("web-01", "");
    }
    //  status of a stopped unit is an answer, not a failure
    pv_doc_t *doc = s_run ("node:db-01", "systemd", "status", "unit",
                           "stopped-app", NULL, NULL);
    s_assert_cell (s_record (doc), "db-01", "success");
    char *output = s_cell_text (s_record (doc), "db-01", "output");
    assert_non_null (strstr (output, "inactive"));
    free (output);
    pv_doc_destroy (&doc);
    //  A unit that does not exist fails with systemctl's words
    doc = s_run ("node:db-01", "systemd", "start", "unit", "missing-app",
                 NULL, NULL);
    s_assert_cell (s_record (doc), "db-01", "failed");
    char *error = s_cell_text (s_record (doc), "db-01", "error");
    assert_non_null (strstr (error, "not found"));
    free (error);
    pv_doc_destroy (&doc);

    //  rke2: the mode picks the unit, nothing free-form reaches argv
    struct {
        const char *action, *mode, *argv;
    } cases [] = {
        {"start", "server", "systemctl\nstart\n--\nrke2-server.service\n"},
        {"stop", "agent", "systemctl\nstop\n--\nrke2-agent.service\n"},
        {"start", "agent", "systemctl\nstart\n--\nrke2-agent.service\n"},
        {"stop", "server", "systemctl\nstop\n--\nrke2-server.service\n"},
    };
    for (size_t index = 0; index < 4; index++) {
        s_fake_clear_all ();
        doc = s_run ("node:web-02", "rke2", cases [index].action, "mode",
                     cases [index].mode, NULL, NULL);
        s_assert_cell (s_record (doc), "web-02", "success");
        pv_doc_destroy (&doc);
        char argv [256];
        snprintf (argv, sizeof argv, "%s---- end of argv\n",
                  cases [index].argv);
        s_assert_log ("web-02", argv);
    }
}

//  ---------------------------------------------------------------------
//  Hostile parameters

static void
test_it_backends_hostile_params_refused_at_submit (void **state)
{
    char long_value [5000];
    memset (long_value, 'a', sizeof long_value);
    static const char nul_value [] = "ngi\0nx";
    struct {
        const char *backend, *action, *name, *value;
        size_t len;             //  0: strlen (value)
        const char *reason;     //  In the detail
    } cases [] = {
        {"apt", "install", "package", "nginx; rm -rf /", 0, "';'"},
        {"apt", "install", "package", "nginx && reboot", 0, "'&'"},
        {"apt", "install", "package", "$(reboot)", 0, "'$'"},
        {"apt", "install", "package", "`reboot`", 0, "'`'"},
        {"apt", "install", "package", "nginx|sh", 0, "'|'"},
        {"apt", "install", "package", "nginx>/etc/passwd", 0, "'>'"},
        {"apt", "install", "package", "-oAPT::Update::Pre-Invoke::=sh", 0,
         "must not start with '-'"},
        {"apt", "remove", "package", "--purge", 0, "must not start with '-'"},
        {"apt", "install", "package", "NGINX", 0, "does not match"},
        {"apt", "install", "package", "Nginx", 0, "does not match"},
        //  Cyrillic 'х' (U+0445) for the Latin 'x'
        {"apt", "install", "package", "ngin\xd1\x85", 0, "non-ASCII"},
        {"apt", "install", "package", "nginx\n", 0, "control character"},
        {"apt", "install", "package", long_value, sizeof long_value, ""},
        {"apt", "install", "package", "../../etc/passwd", 0,
         "does not match"},
        {"system", "disk", "path", "/../etc", 0, "'..'"},
        {"system", "disk", "path", "/var/./lib", 0, "'.'"},
        {"system", "disk", "path", "relative/dir", 0, "absolute"},
        {"systemd", "start", "unit", "nginx;reboot", 0, "';'"},
        {"systemd", "stop", "unit", "-H", 0, "must not start with '-'"},
        {"systemd", "restart", "unit", "../../../bin/sh", 0, "does not match"},
        {"ping", "ping", "address", "-f", 0, "must not start with '-'"},
        {"ping", "ping", "address", "127.0.0.1 -f", 0, "not an IP address"},
        {"ping", "ping", "count", "1000", 0, "out of range"},
        {"rke2", "start", "mode", "server --disable", 0, "does not match"},
        {"network", "dns_update", "servers", "1.1.1.1\nnameserver 6.6.6.6", 0,
         "control character"},
        {"test", "sleep", "seconds", "1; reboot", 0, "';'"},
        {"test", "flaky", "failures", "11", 0, "out of range"},
    };
    s_fake_clear_all ();
    int64_t total = s_job_total ();
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        size_t len = cases [index].len ? cases [index].len
                                       : strlen (cases [index].value);
        //  rke2 and ping need nothing else; the others have one param
        pv_doc_t *reply = s_submit ("all", cases [index].backend,
                                    cases [index].action, cases [index].name,
                                    cases [index].value, len,
                                    strcmp (cases [index].name, "count") == 0
                                        ? "address" : NULL,
                                    "127.0.0.1");
        char *code = grid_reply_code (reply);
        const pv_t *details = pv_map_get (pv_doc_root (reply), "details");
        char *detail = pv_strdup (pv_array_at (details, 0));
        char path [64];
        snprintf (path, sizeof path, "tasks[0].params.%s",
                  cases [index].name);
        bool ok = code && strcmp (code, "invalid_job") == 0 && detail
                  && strncmp (detail, path, strlen (path)) == 0
                  && strstr (detail, cases [index].reason);
        if (!ok) {
            fprintf (stderr, "case %zu (%s %s %s): ", index,
                     cases [index].backend, cases [index].action,
                     cases [index].name);
            if (reply)
                pv_write_json (pv_doc_root (reply), stderr, 0);
            fprintf (stderr, "\n");
        }
        assert_true (ok);
        free (code);
        free (detail);
        pv_doc_destroy (&reply);
    }
    //  A NUL is not text: the whole request is malformed
    pv_doc_t *nul = s_submit ("all", "apt", "install", "package", nul_value,
                              sizeof nul_value - 1, NULL, NULL);
    char *nul_code = grid_reply_code (nul);
    assert_non_null (nul_code);
    assert_string_equal (nul_code, "malformed");
    free (nul_code);
    pv_doc_destroy (&nul);
    //  Unknown params are refused too
    pv_doc_t *reply = s_submit ("all", "apt", "install", "package", "nginx", 5,
                                "options", "Dpkg::Options::=--force-all");
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, "invalid_job");
    free (code);
    char *detail = pv_strdup (pv_array_at (pv_map_get (pv_doc_root (reply),
                                                       "details"), 0));
    assert_non_null (strstr (detail, "tasks[0].params.options: unknown param"));
    free (detail);
    pv_doc_destroy (&reply);

    //  Nothing was made, nothing ran anywhere
    assert_int_equal (s_job_total (), total);
    s_assert_logs_empty ();
}

//  The agent checks again: a node with apt switched off refuses it with a
//  clear error, and runs nothing.
static void
test_it_backends_agent_allowlist_refuses (void **state)
{
    s_fake_clear_all ();
    pv_doc_t *doc = grid_call (&s_grid, "node.get", "node", "nopkg-01", NULL);
    const pv_t *backends = pv_map_get (s_data (doc), "backends");
    assert_true (pv_size (backends) > 0);
    for (size_t index = 0; index < pv_size (backends); index++)
        assert_false (grid_str_is (pv_array_at (backends, index), "name",
                                   "apt"));
    pv_doc_destroy (&doc);

    //  Another node offers apt, so the job is valid; but no node of the
    //  target offers it, so the broker refuses it, naming the node and
    //  why, and nothing is sent
    doc = s_submit ("group:nopkg", "apt", "install", "package", "nginx",
                    strlen ("nginx"), NULL, NULL);
    char *refusal = grid_reply_code (doc);
    assert_non_null (refusal);
    assert_string_equal (refusal, "no_nodes");
    free (refusal);
    char *message = pv_strdup (pv_map_get (pv_doc_root (doc), "message"));
    assert_non_null (strstr (message, "nopkg-01 does not offer apt.install"));
    free (message);
    pv_doc_destroy (&doc);
    s_assert_logs_empty ();

    //  Where no node offers apt at all, the broker refuses at submit
    grid_t lonely;
    assert_int_equal (grid_init (&lonely), 0);
    assert_int_equal (grid_start_broker (&lonely, NULL), 0);
    const char *extra [] = {"--disable", "apt,rke2", NULL};
    assert_true (grid_start_agent (&lonely, "solo-01", NULL, NULL, extra) >= 0);
    pv_doc_t *reply = grid_submit (&lonely,
        "target: all\n"
        "tasks:\n"
        "  - {backend: test, action: echo, params: {msg: fine}}\n"
        "  - {backend: apt, action: install, params: {package: nginx}}\n"
        "  - {backend: rke2, action: start, params: {mode: server}}\n");
    char *code = grid_reply_code (reply);
    assert_non_null (code);
    assert_string_equal (code, "invalid_job");
    free (code);
    const pv_t *details = pv_map_get (pv_doc_root (reply), "details");
    assert_int_equal (pv_size (details), 2);
    char *first = pv_strdup (pv_array_at (details, 0));
    char *second = pv_strdup (pv_array_at (details, 1));
    assert_string_equal (first, "tasks[1]: no registered node offers apt "
                                "install");
    assert_string_equal (second, "tasks[2]: no registered node offers rke2 "
                                 "start");
    free (first);
    free (second);
    pv_doc_destroy (&reply);
    grid_stop (&lonely);
}

//  ---------------------------------------------------------------------
//  What nodes offer

static void
test_it_backends_node_info_lists_actions (void **state)
{
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "node", "info", "web-01",
                         NULL);
    s_cli_expect (0, out, err, code);
    struct {
        const char *backend, *action, *kind, *params;
    } rows [] = {
        {"test", "echo", "query", "msg*"},
        {"test", "sleep", "query", "seconds*,msg"},
        {"test", "fail", "query", "msg"},
        {"test", "flaky", "query", "failures*"},
        {"test", "output", "query", "bytes*"},
        {"system", "hostname", "query", "-"},
        {"system", "uptime", "query", "-"},
        {"system", "os", "query", "-"},
        {"system", "disk", "query", "path"},
        {"system", "memory", "query", "-"},
        {"system", "load", "query", "-"},
        {"ping", "ping", "query", "address*,count"},
        {"network", "dns_get", "query", "-"},
        {"network", "dns_update", "modify", "servers*,search"},
        {"apt", "install", "modify", "package*"},
        {"apt", "remove", "modify", "package*"},
        {"apt", "update", "modify", "-"},
        {"apt", "upgrade", "modify", "-"},
        {"systemd", "start", "modify", "unit*"},
        {"systemd", "stop", "modify", "unit*"},
        {"systemd", "restart", "modify", "unit*"},
        {"systemd", "enable", "modify", "unit*"},
        {"systemd", "disable", "modify", "unit*"},
        {"systemd", "status", "query", "unit*"},
        {"rke2", "start", "modify", "mode*"},
        {"rke2", "stop", "modify", "mode*"},
    };
    for (size_t index = 0; index < sizeof rows / sizeof rows [0]; index++) {
        char backend [32], action [32];
        snprintf (backend, sizeof backend, "%s ", rows [index].backend);
        snprintf (action, sizeof action, " %s ", rows [index].action);
        if (!s_line_with (out, backend, action, rows [index].kind,
                          rows [index].params, NULL))
            fprintf (stderr, "no row for %s %s in:\n%s\n",
                     rows [index].backend, rows [index].action, out);
        assert_true (s_line_with (out, backend, action, rows [index].kind,
                                  rows [index].params, NULL));
    }
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 10000, "node", "info", "nopkg-01",
                     NULL);
    s_cli_expect (0, out, err, code);
    assert_false (s_line_with (out, "apt ", NULL));
    assert_true (s_line_with (out, "systemd ", " start ", NULL));
    free (out);
    free (err);

    //  The schemas themselves, as a script reads them
    pv_doc_t *doc = grid_call (&s_grid, "node.get", "node", "web-01", NULL);
    const pv_t *backends = pv_map_get (s_data (doc), "backends");
    assert_int_equal (pv_size (backends), 8);
    bool seen = false;
    for (size_t b = 0; b < pv_size (backends); b++) {
        const pv_t *backend = pv_array_at (backends, b);
        if (!grid_str_is (backend, "name", "apt"))
            continue;
        const pv_t *install = pv_array_at (pv_map_get (backend, "actions"), 0);
        assert_true (grid_str_is (install, "name", "install"));
        assert_true (grid_str_is (install, "kind", "modify"));
        const pv_t *param = pv_array_at (pv_map_get (install, "params"), 0);
        assert_true (grid_str_is (param, "name", "package"));
        assert_true (grid_str_is (param, "type", "string"));
        bool required = false;
        pv_get_bool (pv_map_get (param, "required"), &required);
        assert_true (required);
        assert_non_null (pv_map_get (param, "pattern"));
        seen = true;
    }
    assert_true (seen);
    pv_doc_destroy (&doc);
}

//  ---------------------------------------------------------------------
//  The three "done when" commands

static void
test_it_backends_done_when_commands (void **state)
{
    s_fake_clear_all ();
    char host [HOST_NAME_MAX + 2] = "";
    gethostname (host, sizeof host - 1);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                         "all", "system", "hostname", "--wait", NULL);
    s_cli_expect (0, out, err, code);
    for (int node = 0; node < S_NODE_COUNT; node++)
        assert_true (s_line_with (out, s_nodes [node], "system hostname",
                                  "success", host, NULL));
    assert_true (s_line_with (out, "job j-", "completed", NULL));
    free (out);
    free (err);

    code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                     "group:web", "apt", "install", "--package", "nginx",
                     "--wait", NULL);
    s_cli_expect (0, out, err, code);
    assert_true (s_line_with (out, "web-01", "apt install", "success", NULL));
    assert_true (s_line_with (out, "web-02", "apt install", "success", NULL));
    assert_null (strstr (out, "db-01"));
    assert_null (strstr (out, "nopkg-01"));
    free (out);
    free (err);
    const char *argv = "apt-get\ninstall\n-y\n--\nnginx\n---- end of argv\n";
    s_assert_log ("web-01", argv);
    s_assert_log ("web-02", argv);
    s_assert_log ("db-01", "");
    s_assert_log ("nopkg-01", "");

    s_fake_clear_all ();
    int64_t total = s_job_total ();
    code = grid_cli (&s_grid, &out, &err, 30000, "job", "run", "--target",
                     "group:web", "apt", "install", "--package",
                     "nginx; rm -rf /", "--wait", NULL);
    s_cli_expect (4, out, err, code);
    assert_non_null (strstr (err, "(invalid_job)"));
    assert_true (s_line_with (err, "tasks[0].params.package", "';'", NULL));
    free (out);
    free (err);
    assert_int_equal (s_job_total (), total);
    s_assert_logs_empty ();
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_backends_test_actions),
        cmocka_unit_test (test_it_backends_system_actions),
        cmocka_unit_test (test_it_backends_ping),
        cmocka_unit_test (test_it_backends_network_dns),
        cmocka_unit_test (test_it_backends_apt_on_web_nodes_only),
        cmocka_unit_test (test_it_backends_systemd_and_rke2),
        cmocka_unit_test (test_it_backends_hostile_params_refused_at_submit),
        cmocka_unit_test (test_it_backends_agent_allowlist_refuses),
        cmocka_unit_test (test_it_backends_node_info_lists_actions),
        cmocka_unit_test (test_it_backends_done_when_commands),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
