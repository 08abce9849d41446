/*  =========================================================================
    test_it_qa_relay - a relay and its agents as an operator meets them
    for the first time: a relay whose key is not enrolled says how to
    accept it with a command that a shell runs as written (the key's
    Z85 holds ( ) ! & < > and the like), and an agent whose key is not
    enrolled gets nothing through an enrolled relay until it is accepted.
    A second gridrelay on a relay's endpoints refuses to start and leaves
    the first one serving; a relay whose endpoint another process holds
    when its upstream comes says so and serves once it is free.
    What an admin accepted stays accepted across a broker restart: a relay
    accepted by its key, and an agent key first seen through a relay,
    come back through it. A host that enrolled directly, pointed at a
    relay, is told how an admin moves it, and that works. A status
    endpoint without a key that may use it is warned about. A hello of
    the largest size costs the relay little CPU, whether or not its key is
    enrolled, and so does its welcome (its 36,866 topics were once
    searched one by one: seconds each).
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "lib/fixture.h"

//  Accepts the relay in SLOT by its key (key.accept), as an admin does
//  for a relay not in the config; its public key goes into KEY.
static void
s_relay_accept (grid_t *grid, int slot, char *key)
{
    char why [256];
    assert_true (slot >= 0);
    assert_int_equal (keys_read_public (grid->relay_key [slot], key, why,
                                        sizeof why), 0);
    pv_doc_t *doc = grid_call (grid, "key.accept", "key", key, NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
}

//  A pending relay's logs (the broker's and its own) give the command
//  that accepts it with the key quoted for a shell
static void
test_qa_relay_pending_says_how (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "late", -1, true, NULL);
    assert_true (relay >= 0);
    char key [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (grid->relay_key [relay], key, why,
                                        sizeof why), 0);
    char command [KEYS_TEXT_SIZE + 40];
    snprintf (command, sizeof command, "gridcli key accept '%s'", key);
    bool said = fixture_log_has (grid, "broker.log", command, 10000);
    if (!said)
        grid_dump_logs (grid);
    assert_true (said);
    assert_true (fixture_log_has (grid, "relay-late.log", command, 10000));
    //  The command works as shown (gridcli's argument, unquoted)
    pv_doc_t *doc = grid_call (grid, "key.accept", "key", key, NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
}

//  An agent with a key nobody accepted, through an enrolled relay: pending,
//  never a node, until an admin accepts it
static void
test_qa_relay_unenrolled_agent (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->manual_accept = true;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "late", -1, true, NULL);
    char key [KEYS_TEXT_SIZE];
    s_relay_accept (grid, relay, key);
    pv_doc_t *doc = NULL;
    //  The broker accepts no agent key by itself here
    int slot = grid_spawn_agent (grid, "web-01", "web", NULL, (const char *[]) {
        "--broker", grid->relay_agents_ep [relay], "--publish",
        grid->relay_publish_ep [relay], "--broker-key",
        grid->relay_key [relay], NULL});
    assert_true (slot >= 0);
    assert_true (fixture_log_has (grid, "agent-web-01.log", "pending", 10000));
    doc = grid_call (grid, "node.get", "node", "web-01", NULL);
    assert_false (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    //  Accepted, it comes through the relay
    doc = grid_call (grid, "key.accept", "node", "web-01", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    assert_true (grid_wait_node (grid, "web-01", "online", 10000));
    doc = grid_call (grid, "node.get", "node", "web-01", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "relay", "late"));
    pv_doc_destroy (&doc);
}

//  The relay in SLOT is accepted (its key, by key.accept) and agent ID
//  comes online through it and runs a job there.
static void
s_agent_runs_through (grid_t *grid, int slot, const char *id)
{
    char key [KEYS_TEXT_SIZE];
    s_relay_accept (grid, slot, key);
    assert_true (grid_start_agent (grid, id, "web", NULL, (const char *[]) {
        "--broker", grid->relay_agents_ep [slot], "--publish",
        grid->relay_publish_ep [slot], "--broker-key",
        grid->relay_key [slot], NULL}) >= 0);
    assert_true (grid_wait_node (grid, id, "online", 20000));
    char target [80];
    snprintf (target, sizeof target, "node:%s", id);
    char *out = NULL, *err = NULL;
    int rc = grid_cli (grid, &out, &err, 30000, "job", "run", "--target",
                       target, "--wait", "test", "echo", "--msg", "through",
                       NULL);
    if (rc != 0)
        fprintf (stderr, "job run: %s%s", out, err);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "through"));
    free (out);
    free (err);
}

//  A second gridrelay started on the endpoints of one that serves stops
//  at once with an error that says so, before it goes upstream; the
//  first one's agents go on as before
static void
test_qa_relay_started_twice (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "twin", -1, true, NULL);
    assert_true (relay >= 0);
    char *out = NULL, *err = NULL;
    int rc = grid_run (grid, "gridrelay", &out, &err, 10000, "--config",
                       "none", "--name", "twin", "--agents",
                       grid->relay_agents_ep [relay], "--publish",
                       grid->relay_publish_ep [relay], "--upstream",
                       grid->agents_ep, "--upstream-publish",
                       grid->publish_ep, "--key", grid->relay_key [relay],
                       "--upstream-key", grid->broker_key, NULL);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (err, "is another gridrelay serving it?"));
    assert_non_null (strstr (err, grid->relay_agents_ep [relay]));
    //  A log line at error, like every other line
    assert_non_null (strstr (err, " gridrelay[twin] error: cannot start: "));
    free (out);
    free (err);
    //  The publish endpoint alone is checked too; in JSON, a JSON line
    char other [400];
    snprintf (other, sizeof other, "ipc://%s/other-agents.ipc", grid->dir);
    rc = grid_run (grid, "gridrelay", &out, &err, 10000, "--config", "none",
                   "--name", "twin", "--agents", other, "--publish",
                   grid->relay_publish_ep [relay], "--upstream",
                   grid->agents_ep, "--upstream-publish", grid->publish_ep,
                   "--key", grid->relay_key [relay], "--upstream-key",
                   grid->broker_key, "--log-format", "json", NULL);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (err, grid->relay_publish_ep [relay]));
    assert_int_equal (strncmp (err, "{\"ts\":\"", 7), 0);
    assert_non_null (strstr (err, "\"level\":\"error\",\"program\":"
                                  "\"gridrelay\",\"msg\":\"cannot start: "));
    free (out);
    free (err);
    s_agent_runs_through (grid, relay, "web-01");
}

//  An endpoint that another process took while the relay waited for its
//  upstream: the relay says it cannot serve, keeps trying, and serves
//  once the endpoint is free
static void
test_qa_relay_endpoint_taken (void **state)
{
    grid_t *grid = (grid_t *) *state;
    int relay = grid_start_relay (grid, "slow", -1, false, NULL);
    assert_true (relay >= 0);
    //  It has started (its endpoints were free then)
    assert_true (fixture_log_has (grid, "relay-slow.log", "relay slow ",
                                  20000));
    //  Someone listens on the relay's agent endpoint
    const char *path = grid->relay_agents_ep [relay] + strlen ("ipc://");
    int fd = socket (AF_UNIX, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_un address;
    memset (&address, 0, sizeof address);
    address.sun_family = AF_UNIX;
    snprintf (address.sun_path, sizeof address.sun_path, "%s", path);
    unlink (path);
    assert_int_equal (bind (fd, (struct sockaddr *) &address,
                            sizeof address), 0);
    assert_int_equal (listen (fd, 4), 0);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    bool said = fixture_log_has (
        grid, "relay-slow.log",
        "cannot serve agents (trying again every second)", 20000);
    if (!said)
        grid_dump_logs (grid);
    assert_true (said);
    //  The listener was left alone
    struct stat info;
    assert_int_equal (stat (path, &info), 0);
    assert_true (S_ISSOCK (info.st_mode));
    close (fd);
    unlink (path);
    assert_true (fixture_log_has (grid, "relay-slow.log", "serving agents on",
                                  20000));
    s_agent_runs_through (grid, relay, "web-02");
}

//  A relay enrolled with key.accept (not in the config) and an agent key
//  that enrolled through it, accepted by an admin: after a broker
//  restart, the relay is still a relay, the agent still of its pool, and
//  the agent comes back through it and runs a job
static void
test_qa_relay_accepted_survives_restart (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->manual_accept = true;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "kept", -1, true, NULL);
    char key [KEYS_TEXT_SIZE];
    s_relay_accept (grid, relay, key);
    pv_doc_t *doc = NULL;
    int slot = grid_spawn_agent (grid, "web-03", "web", NULL, (const char *[]) {
        "--broker", grid->relay_agents_ep [relay], "--publish",
        grid->relay_publish_ep [relay], "--broker-key",
        grid->relay_key [relay], NULL});
    assert_true (slot >= 0);
    assert_true (fixture_log_has (grid, "agent-web-03.log", "pending", 20000));
    doc = grid_call (grid, "key.accept", "node", "web-03", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    assert_true (grid_wait_node (grid, "web-03", "online", 20000));

    grid_stop_broker (grid, false);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    bool back = grid_wait_node (grid, "web-03", "online", 30000);
    if (!back)
        grid_dump_logs (grid);
    assert_true (back);
    doc = grid_call (grid, "node.get", "node", "web-03", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "relay", "kept"));
    pv_doc_destroy (&doc);
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (grid, &out, &err, 30000, "job", "run",
                                "--target", "node:web-03", "--wait", "test",
                                "echo", "--msg", "again", NULL), 0);
    assert_non_null (strstr (out, "again"));
    free (out);
    free (err);
    //  The relay's key reads as a relay's still
    doc = grid_call (grid, "key.list", NULL);
    assert_true (grid_reply_ok (doc, &data));
    const pv_t *keys = pv_map_get (data, "keys");
    bool relay_kind = false;
    for (size_t index = 0; index < pv_size (keys); index++) {
        const pv_t *entry = pv_array_at (keys, index);
        if (grid_str_is (entry, "key", key))
            relay_kind = grid_str_is (entry, "kind", "relay");
    }
    assert_true (relay_kind);
    pv_doc_destroy (&doc);
}

//  A node that enrolled directly, restarted behind a relay: refused, and
//  the refusal (the agent's log) says what an admin runs; once run, the
//  node comes back through the relay
static void
test_qa_relay_move_direct_node (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->manual_accept = true;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "site", -1, true, NULL);
    char key [KEYS_TEXT_SIZE];
    s_relay_accept (grid, relay, key);
    pv_doc_t *doc = NULL;
    //  Directly first
    int slot = grid_spawn_agent (grid, "db-01", "db", NULL, NULL);
    assert_true (slot >= 0);
    assert_true (fixture_log_has (grid, "agent-db-01.log", "pending", 20000));
    doc = grid_call (grid, "key.accept", "node", "db-01", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    assert_true (grid_wait_node (grid, "db-01", "online", 20000));
    assert_int_equal (grid_kill (grid->agent_pids [slot], SIGTERM), 0);
    grid->agent_pids [slot] = 0;
    //  Then behind the relay (same key, same state dir)
    slot = grid_spawn_agent (grid, "db-01", "db", NULL, (const char *[]) {
        "--broker", grid->relay_agents_ep [relay], "--publish",
        grid->relay_publish_ep [relay], "--broker-key",
        grid->relay_key [relay], NULL});
    assert_true (slot >= 0);
    bool said = fixture_log_has (grid, "agent-db-01.log",
                                 "an admin runs gridcli key delete db-01, then "
                                 "accepts its key again", 20000);
    if (!said)
        grid_dump_logs (grid);
    assert_true (said);
    //  As it says
    doc = grid_call (grid, "key.delete", "node", "db-01", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    assert_true (fixture_log_count (
        grid, "broker.log", "waits for acceptance: gridcli key accept db-01",
        2, 20000));
    doc = grid_call (grid, "key.accept", "node", "db-01", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    bool back = false;
    long long deadline = grid_now_ms () + 20000;
    while (!back && grid_now_ms () < deadline) {
        doc = grid_call (grid, "node.get", "node", "db-01", NULL);
        const pv_t *data = NULL;
        back = grid_reply_ok (doc, &data) && grid_str_is (data, "relay", "site")
               && grid_str_is (data, "status", "online");
        pv_doc_destroy (&doc);
        if (!back)
            zclock_sleep (100);
    }
    assert_true (back);
}

//  --client without --client-key: every key would be refused, and the
//  relay says so when it starts
static void
test_qa_relay_status_without_keys (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char key [400], agents [400], publish [400], client [400];
    assert_int_equal (grid_relay_keygen (grid, "lone", key, sizeof key,
                                         NULL), 0);
    snprintf (agents, sizeof agents, "ipc://%s/lone-agents.ipc", grid->dir);
    snprintf (publish, sizeof publish, "ipc://%s/lone-publish.ipc",
              grid->dir);
    snprintf (client, sizeof client, "ipc://%s/lone-client.ipc", grid->dir);
    char *out = NULL, *err = NULL;
    //  It runs until killed: the warning is in what it wrote meanwhile
    grid_run (grid, "gridrelay", &out, &err, 2000, "--config", "none",
              "--name", "lone", "--agents", agents, "--publish", publish,
              "--client", client, "--upstream", grid->agents_ep,
              "--upstream-publish", grid->publish_ep, "--key", key,
              "--upstream-key", grid->broker_key, NULL);
    assert_non_null (err);
    assert_non_null (strstr (err, "no --client-key given, so every key "
                                  "that asks is refused"));
    free (out);
    free (err);
}

//  CPU time (user + system, ms) the process PID used so far, or -1.
static long long
s_cpu_ms (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    char *text = grid_slurp (path);
    //  Fields after the command name, which ends at the last ')'
    const char *at = strrchr (text, ')');
    unsigned long long utime = 0, stime = 0;
    int got = at ? sscanf (at + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
                                    "%*u %*u %llu %llu", &utime, &stime)
                 : 0;
    free (text);
    long ticks = sysconf (_SC_CLK_TCK);
    return got == 2 && ticks > 0
           ? (long long) (utime + stime) * 1000 / ticks : -1;
}

//  The relay's figure NAME ("up": messages forwarded upstream, "topics":
//  topics subscribed upstream) from its status, or -1.
static long long
s_relay_figure (grid_t *grid, int slot, const char *name)
{
    char *out = NULL, *err = NULL;
    int rc = grid_cli (grid, &out, &err, 20000, "--broker",
                       grid->relay_client_ep [slot], "--broker-key",
                       grid->relay_key [slot], "--output", "json", "status",
                       NULL);
    char field [64];
    snprintf (field, sizeof field, "\"%s\": ", name);
    const char *at = rc == 0 ? strstr (out, field) : NULL;
    long long value = at ? atoll (at + strlen (field)) : -1;
    free (out);
    free (err);
    return value;
}

//  Polls the relay's figure NAME until it is at least AT_LEAST (or, when
//  AT_LEAST is negative, at most -AT_LEAST); true when it got there.
static bool
s_relay_figure_reaches (grid_t *grid, int slot, const char *name,
                        long long at_least)
{
    long long deadline = grid_now_ms () + 60000;
    while (true) {
        long long value = s_relay_figure (grid, slot, name);
        if (value >= 0 && (at_least >= 0 ? value >= at_least
                                         : value <= -at_least))
            return true;
        if (grid_now_ms () > deadline)
            return false;
        zclock_sleep (200);
    }
}

//  Ten hellos of 4096 groups and 4096 labels of eight segments (36,866
//  topics each): from a key nobody enrolled (the broker says pending),
//  then, accepted, three welcomed: all of it for a fraction of a second
//  of the relay's CPU
static void
test_qa_relay_big_hello (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->manual_accept = true;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "big", -1, true, NULL);
    char relay_key [KEYS_TEXT_SIZE];
    s_relay_accept (grid, relay, relay_key);
    pv_doc_t *doc = NULL;
    pw_t *w = pw_new ();
    pw_map (w, 9);
    pw_str (w, "v");
    pw_int (w, 1);
    pw_str (w, "type");
    pw_str (w, "hello");
    pw_str (w, "node");
    pw_str (w, "big-01");
    pw_str (w, "hostname");
    pw_str (w, "big");
    pw_str (w, "groups");
    pw_array (w, 4096);
    char name [32];
    for (int index = 0; index < 4096; index++) {
        snprintf (name, sizeof name, "g%04d", index);
        pw_str (w, name);
    }
    pw_str (w, "labels");
    pw_map (w, 4096);
    for (int index = 0; index < 4096; index++) {
        snprintf (name, sizeof name, "k%04d", index);
        pw_str (w, name);
        pw_str (w, "a.b.c.d.e.f.g.h");
    }
    pw_str (w, "backends");
    pw_array (w, 0);
    pw_str (w, "version");
    pw_str (w, "0");
    pw_str (w, "concurrency");
    pw_int (w, 1);

    long long up_before = s_relay_figure (grid, relay, "up");
    assert_true (up_before >= 0);
    long long cpu_before = s_cpu_ms (grid->relay_pids [relay]);
    assert_true (cpu_before >= 0);
    zcert_t *cert = zcert_new ();
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    zsock_set_linger (dealer, 0);
    zcert_apply (cert, dealer);
    zsock_set_curve_serverkey (dealer, relay_key);
    assert_int_equal (zsock_connect (dealer, "%s",
                                     grid->relay_agents_ep [relay]), 0);
    for (int count = 0; count < 10; count++) {
        zframe_t *frame = zframe_new (pw_data (w), pw_size (w));
        assert_int_equal (zframe_send (&frame, dealer, 0), 0);
    }
    //  All ten went up (status is answered between them, or after)
    assert_true (s_relay_figure_reaches (grid, relay, "up", up_before + 10));
    long long used_ms = s_cpu_ms (grid->relay_pids [relay]) - cpu_before;
    fprintf (stderr, "relay CPU for ten big hellos: %lld ms\n", used_ms);
    //  Once about 2 s each here; now about 10 ms each
    assert_true (used_ms < 5000);

    //  Accepted: three more, each welcomed (the broker's part of each is
    //  slow under the sanitizers: few, and time to wait)
    assert_true (fixture_log_has (grid, "broker.log",
                                  "gridcli key accept big-01", 20000));
    doc = grid_call (grid, "key.accept", "node", "big-01", NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    cpu_before = s_cpu_ms (grid->relay_pids [relay]);
    for (int count = 0; count < 3; count++) {
        zframe_t *frame = zframe_new (pw_data (w), pw_size (w));
        assert_int_equal (zframe_send (&frame, dealer, 0), 0);
    }
    int welcomes = 0;
    zsock_set_rcvtimeo (dealer, 120000);
    while (welcomes < 3) {
        char *reply = zstr_recv (dealer);
        assert_non_null (reply);
        if (strstr (reply, "welcome"))
            welcomes++;
        zstr_free (&reply);
    }
    used_ms = s_cpu_ms (grid->relay_pids [relay]) - cpu_before;
    fprintf (stderr, "relay CPU for three welcomes: %lld ms\n", used_ms);
    //  Once about 2 s a welcome
    assert_true (used_ms < 3000);
    zsock_destroy (&dealer);
    zcert_destroy (&cert);
    pw_destroy (&w);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_qa_relay_pending_says_how,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_qa_relay_unenrolled_agent,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_qa_relay_started_twice,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_qa_relay_endpoint_taken,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_qa_relay_accepted_survives_restart, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (test_qa_relay_move_direct_node,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_qa_relay_status_without_keys,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_qa_relay_big_hello, fixture_setup,
                                         fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
