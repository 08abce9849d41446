/*  =========================================================================
    test_it_service - gridbroker and gridagent as systemd services

    The programs run under a listener that plays the service manager's
    part: a unix datagram socket named by NOTIFY_SOCKET, and a watchdog
    asked for with WATCHDOG_USEC. Each program must say READY=1 once it
    serves, WATCHDOG=1 from its reactor while it runs, and STOPPING=1 when
    it is told to stop. A program started without NOTIFY_SOCKET says
    nothing and runs as before (the other suites show that).
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <jansson.h>


#include "lib/fixture.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000

//  What the listener heard.
typedef struct {
    int fd;                    //  The notify socket
    char path [300];           //  Its path
    int ready;                 //  READY=1 datagrams
    int watchdog;              //  WATCHDOG=1 datagrams
    int stopping;              //  STOPPING=1 datagrams
    char status [256];         //  The last STATUS= text
} s_listener_t;

static void
s_listen (s_listener_t *self, const grid_t *grid, const char *name)
{
    memset (self, 0, sizeof *self);
    snprintf (self->path, sizeof self->path, "%s/%s.notify", grid->dir, name);
    self->fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true (self->fd >= 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    assert_true (strlen (self->path) < sizeof addr.sun_path);
    strcpy (addr.sun_path, self->path);
    assert_int_equal (bind (self->fd, (struct sockaddr *) &addr, sizeof addr), 0);
}

//  Reads datagrams for up to WAIT_MS or until UNTIL (a field of SELF)
//  reaches AT_LEAST. Counts every assignment it recognises.
static void
s_hear (s_listener_t *self, const int *until, int at_least, int wait_ms)
{
    int64_t deadline = zclock_mono () + wait_ms;
    while (*until < at_least && zclock_mono () < deadline) {
        struct pollfd pfd = {.fd = self->fd, .events = POLLIN};
        if (poll (&pfd, 1, 100) <= 0)
            continue;
        char buf [4096];
        ssize_t size = recv (self->fd, buf, sizeof buf - 1, 0);
        if (size <= 0)
            continue;
        buf [size] = 0;
        for (char *line = strtok (buf, "\n"); line; line = strtok (NULL, "\n")) {
            if (streq (line, "READY=1"))
                self->ready++;
            else if (streq (line, "WATCHDOG=1"))
                self->watchdog++;
            else if (streq (line, "STOPPING=1"))
                self->stopping++;
            else if (strncmp (line, "STATUS=", 7) == 0)
                snprintf (self->status, sizeof self->status, "%s", line + 7);
        }
    }
}

static void
s_listener_close (s_listener_t *self)
{
    close (self->fd);
    unlink (self->path);
}

static void
test_service_broker_says_ready_watchdog_stopping (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    s_listener_t manager;
    s_listen (&manager, &grid, "broker");
    setenv ("NOTIFY_SOCKET", manager.path, 1);
    setenv ("WATCHDOG_USEC", "400000", 1);    //  A beat every 200 ms
    int rc = grid_start_broker (&grid, NULL);
    unsetenv ("NOTIFY_SOCKET");
    unsetenv ("WATCHDOG_USEC");
    assert_int_equal (rc, 0);

    s_hear (&manager, &manager.ready, 1, S_WAIT_MS);
    assert_int_equal (manager.ready, 1);
    assert_string_equal (manager.status, "serving");
    //  The reactor keeps beating while it serves
    s_hear (&manager, &manager.watchdog, 3, S_WAIT_MS);
    assert_true (manager.watchdog >= 3);
    assert_int_equal (manager.stopping, 0);

    kill (grid.broker_pid, SIGTERM);
    s_hear (&manager, &manager.stopping, 1, S_WAIT_MS);
    assert_int_equal (manager.stopping, 1);
    grid_stop_broker (&grid, false);
    s_listener_close (&manager);
    grid_stop (&grid);
}

static void
test_service_agent_says_ready_watchdog_stopping (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    s_listener_t manager;
    s_listen (&manager, &grid, "agent");
    setenv ("NOTIFY_SOCKET", manager.path, 1);
    setenv ("WATCHDOG_USEC", "400000", 1);
    int slot = grid_start_agent (&grid, "svc-01", NULL, NULL, NULL);
    unsetenv ("NOTIFY_SOCKET");
    unsetenv ("WATCHDOG_USEC");
    assert_true (slot >= 0);

    s_hear (&manager, &manager.ready, 1, S_WAIT_MS);
    assert_int_equal (manager.ready, 1);
    s_hear (&manager, &manager.watchdog, 3, S_WAIT_MS);
    assert_true (manager.watchdog >= 3);

    kill (grid.agent_pids [slot], SIGTERM);
    s_hear (&manager, &manager.stopping, 1, S_WAIT_MS);
    assert_int_equal (manager.stopping, 1);
    grid_stop_agent (&grid, slot, false);
    s_listener_close (&manager);
    grid_stop (&grid);
}

//  A watchdog meant for another process (WATCHDOG_PID) is not ours: the
//  program says READY=1 and never beats.
static void
test_service_watchdog_for_another_pid_is_ignored (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    s_listener_t manager;
    s_listen (&manager, &grid, "broker");
    setenv ("NOTIFY_SOCKET", manager.path, 1);
    setenv ("WATCHDOG_USEC", "400000", 1);
    setenv ("WATCHDOG_PID", "1", 1);
    int rc = grid_start_broker (&grid, NULL);
    unsetenv ("NOTIFY_SOCKET");
    unsetenv ("WATCHDOG_USEC");
    unsetenv ("WATCHDOG_PID");
    assert_int_equal (rc, 0);
    s_hear (&manager, &manager.ready, 1, S_WAIT_MS);
    assert_int_equal (manager.ready, 1);
    //  A second of listening: five beats would have come by now
    s_hear (&manager, &manager.watchdog, 1, 1000);
    assert_int_equal (manager.watchdog, 0);
    grid_stop_broker (&grid, false);
    s_listener_close (&manager);
    grid_stop (&grid);
}

//  Reads FILE whole (caller frees), or NULL.
static char *
s_slurp (const char *path)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return NULL;
    char *text = (char *) calloc (1, 1 << 20);
    size_t size = fread (text, 1, (1 << 20) - 1, file);
    text [size] = 0;
    fclose (file);
    return text;
}

//  --log-format json: every line either program writes is one JSON
//  object, and the lines about a job carry its id as "job".
static void
test_service_json_logs_carry_the_job (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    const char *broker_extra [] = {"--log-format", "json", "--verbose", NULL};
    assert_int_equal (grid_start_broker (&grid, broker_extra), 0);
    const char *agent_extra [] = {"--log-format", "json", "--log-level",
                                  "debug", NULL};
    assert_true (grid_start_agent (&grid, "log-01", NULL, NULL, agent_extra) >= 0);
    char *job = grid_submit_id (&grid, "target: { scope: all }\n"
                                       "tasks: [ { backend: test, action: echo, "
                                       "params: { msg: hi } } ]\n");
    assert_non_null (job);
    pv_doc_t *record = grid_wait_job (&grid, job, S_WAIT_MS);
    assert_non_null (record);
    pv_doc_destroy (&record);
    grid_stop_agent (&grid, 0, false);
    grid_stop_broker (&grid, false);

    char path [512], needle [64];
    snprintf (needle, sizeof needle, "\"job\":\"%s\"", job);
    const char *logs [] = {"broker.log", "agent-log-01.log"};
    for (size_t index = 0; index < 2; index++) {
        snprintf (path, sizeof path, "%s/%s", grid.dir, logs [index]);
        char *text = s_slurp (path);
        assert_non_null (text);
        size_t lines = 0;
        for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
            if (strncmp (line, "{\"ts\":\"", 7) != 0
                || line [strlen (line) - 1] != '}')
                fail_msg ("%s: not a JSON line: %s", logs [index], line);
            lines++;
        }
        assert_true (lines > 0);
        free (text);
        text = s_slurp (path);
        if (!strstr (text, needle))
            fail_msg ("%s has no line with %s", logs [index], needle);
        free (text);
    }
    free (job);
    grid_stop (&grid);
}

//  Decodes each line of the log PATH as JSON (fails on one that is not)
//  and returns the FIELD of the first whose "msg" starts with PREFIX
//  ("" when it has none; caller frees), or NULL when no line does.
static char *
s_json_log_field (const char *path, const char *prefix, const char *field)
{
    char *text = s_slurp (path);
    assert_non_null (text);
    char *node = NULL;
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n")) {
        json_error_t error;
        json_t *object = json_loads (line, 0, &error);
        if (!object)
            fail_msg ("%s: not a JSON line (%s): %s", path, error.text, line);
        const char *msg = json_string_value (json_object_get (object, "msg"));
        const char *its = json_string_value (json_object_get (object, field));
        if (!node && msg && strncmp (msg, prefix, strlen (prefix)) == 0)
            node = strdup (its ? its : "");
        json_decref (object);
    }
    free (text);
    return node;
}

static char *
s_json_log_node (const char *path, const char *prefix)
{
    return s_json_log_field (path, prefix, "node");
}

//  --verbose: what a task printed on stderr (a newline, a terminal
//  escape) is logged escaped, on the line that reports its step, in
//  either format. The broker's JSON lines about one node carry it as
//  "node": registration, a node's failed step, a drain, going offline.
static void
test_service_logs_escape_output_and_name_nodes (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    const char *broker_extra [] = {"--log-format", "json", "--verbose", NULL};
    assert_int_equal (grid_start_broker (&grid, broker_extra), 0);
    const char *text_extra [] = {"--verbose", NULL};
    const char *json_extra [] = {"--verbose", "--log-format", "json", NULL};
    assert_true (grid_start_agent (&grid, "esc-01", NULL, NULL, text_extra) >= 0);
    assert_true (grid_start_agent (&grid, "esc-02", NULL, NULL, json_extra) >= 0);
    char *job = grid_submit_id (&grid, "target: { scope: all }\n"
                                       "tasks: [ { backend: test, action: fail, "
                                       "params: { msg: \"one\\ntwo \\e[31mred\" } } ]\n");
    assert_non_null (job);
    pv_doc_t *record = grid_wait_job (&grid, job, S_WAIT_MS);
    assert_non_null (record);
    pv_doc_destroy (&record);
    assert_true (fixture_log_has (&grid, "agent-esc-01.log",
                                  ": one\\ntwo \\x1b[31mred", S_WAIT_MS));
    pv_doc_t *reply = grid_call (&grid, "node.drain", "node", "esc-01", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    grid_stop_agent (&grid, 1, false);
    assert_true (grid_wait_node (&grid, "esc-02", "offline", S_WAIT_MS));
    grid_stop_agent (&grid, 0, false);
    grid_stop_broker (&grid, false);

    char path [512];
    snprintf (path, sizeof path, "%s/agent-esc-01.log", grid.dir);
    char *text = s_slurp (path);
    assert_non_null (text);
    if (strchr (text, '\x1b'))
        fail_msg ("agent-esc-01.log holds a raw ESC: %s", text);
    for (char *line = strtok (text, "\n"); line; line = strtok (NULL, "\n"))
        if (strncmp (line, "20", 2) != 0 || line [10] != 'T')
            fail_msg ("agent-esc-01.log: a line without a stamp: %s", line);
    free (text);
    snprintf (path, sizeof path, "%s/agent-esc-02.log", grid.dir);
    char *node = s_json_log_node (path, "job ");
    assert_non_null (node);
    free (node);
    snprintf (path, sizeof path, "%s/broker.log", grid.dir);
    const char *lines [][2] = {
        {"node esc-01 registered", "esc-01"},
        {"node esc-02 registered", "esc-02"},
        {"node esc-01 drained", "esc-01"},
        {"node esc-02 said bye", "esc-02"},
    };
    for (size_t index = 0; index < sizeof lines / sizeof lines [0]; index++) {
        node = s_json_log_node (path, lines [index][0]);
        if (!node || strcmp (node, lines [index][1]) != 0)
            fail_msg ("broker.log: '%s...' has node '%s', not '%s'",
                      lines [index][0], node ? node : "(no such line)",
                      lines [index][1]);
        free (node);
    }
    //  The drain was a client's request: its line says which and who;
    //  a registration was nobody's request
    const char *scoped [][2] = {
        {"request", NULL}, {"caller", NULL}, {"role", "admin"},
    };
    for (size_t index = 0; index < 3; index++) {
        char *value = s_json_log_field (path, "node esc-01 drained",
                                        scoped [index][0]);
        if (!value || !*value
            || (scoped [index][1] && strcmp (value, scoped [index][1]) != 0))
            fail_msg ("broker.log: the drain's line has %s '%s'",
                      scoped [index][0], value ? value : "(no such line)");
        free (value);
        value = s_json_log_field (path, "node esc-02 registered",
                                  scoped [index][0]);
        if (!value || *value)
            fail_msg ("broker.log: a registration has %s '%s'",
                      scoped [index][0], value ? value : "(no such line)");
        free (value);
    }
    char prefix [128];
    snprintf (prefix, sizeof prefix, "job %s: failed node esc-01", job);
    node = s_json_log_node (path, prefix);
    if (!node || strcmp (node, "esc-01") != 0)
        fail_msg ("broker.log: '%s' has node '%s'", prefix,
                  node ? node : "(no such line)");
    free (node);
    free (job);
    grid_stop (&grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_service_broker_says_ready_watchdog_stopping),
        cmocka_unit_test (test_service_agent_says_ready_watchdog_stopping),
        cmocka_unit_test (test_service_watchdog_for_another_pid_is_ignored),
        cmocka_unit_test (test_service_json_logs_carry_the_job),
        cmocka_unit_test (test_service_logs_escape_output_and_name_nodes),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
