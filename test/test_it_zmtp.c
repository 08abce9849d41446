/*  =========================================================================
    test_it_zmtp - gridswarm's ZMTP transport (--transport zmtp) against
    the real gridbroker and gridrelay (libzmq 4.3 on the other side), on
    ipc:// endpoints, plaintext:

    - agents register directly, a broadcast reaches every one of them and
      every result is acknowledged back to the swarm;
    - with short ZMTP heartbeats (PINGs with a TTL the broker enforces, and
      a timeout the swarm enforces) the connections stay up for several
      timeouts: PINGs and PONGs both work;
    - the same through a gridrelay;
    - after the broker is killed and started again, every connection is
      made again, the SUBs subscribe again, and a new broadcast reaches
      every agent;
    - a swarm pointed at a CURVE broker has every handshake refused with a
      clear reason, counted and retried;
    - CURVE and unknown transports are refused with a clear error.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proto/pv.h"
#include "../proto/pw.h"
#include "lib/harness.h"

#define S_HEARTBEAT_MS "200"
#define S_TIMEOUT_MS "1000"     //  Both the swarm's silence limit and the
                                //  TTL the broker holds it to

//  The swarm running now, killed by the teardown if a test fails
static pid_t s_running;

typedef struct {
    pid_t pid;
    char control [400];         //  Its control endpoint
    zsock_t *dealer;            //  Talks to it
} s_swarm_t;

//  Starts gridswarm --transport zmtp with AGENTS agents against AGENTS_EP
//  and PUBLISH_EP.
static void
s_swarm_start (s_swarm_t *swarm, grid_t *grid, int agents,
               const char *agents_ep, const char *publish_ep)
{
    char program [600], log [400], count [16];
    snprintf (program, sizeof program, "%s/gridswarm",
              getenv ("GRID_TOOLS") ? getenv ("GRID_TOOLS")
                                    : "build/test/tools");
    snprintf (log, sizeof log, "%s/swarm.log", grid->dir);
    snprintf (swarm->control, sizeof swarm->control, "ipc://%s/swarm.ipc",
              grid->dir);
    snprintf (count, sizeof count, "%d", agents);
    swarm->pid = fork ();
    if (swarm->pid == 0) {
        FILE *out = freopen (log, "w", stderr);
        (void) out;
        execl (program, "gridswarm", "--transport", "zmtp", "--agents", count,
               "--threads", "2", "--test-only", "--broker", agents_ep,
               "--publish", publish_ep, "--control", swarm->control,
               "--zmtp-heartbeat-ms", S_HEARTBEAT_MS, "--zmtp-timeout-ms",
               S_TIMEOUT_MS, "--zmtp-ttl-ms", S_TIMEOUT_MS, (char *) NULL);
        _exit (127);
    }
    assert_true (swarm->pid > 0);
    s_running = swarm->pid;
    swarm->dealer = zsock_new_dealer (swarm->control);
    assert_non_null (swarm->dealer);
    zsock_set_rcvtimeo (swarm->dealer, 5000);
}

static void
s_swarm_stop (s_swarm_t *swarm)
{
    zsock_destroy (&swarm->dealer);
    if (swarm->pid > 0) {
        //  SIGTERM: the agents say bye; it must exit cleanly
        kill (swarm->pid, SIGTERM);
        int status = 0;
        long long deadline = grid_now_ms () + 10000;
        while (waitpid (swarm->pid, &status, WNOHANG) == 0
               && grid_now_ms () < deadline)
            zclock_sleep (20);
        if (grid_now_ms () >= deadline) {
            grid_kill (swarm->pid, SIGKILL);
            fail_msg ("gridswarm did not stop on SIGTERM");
        }
        assert_true (WIFEXITED (status));
        assert_int_equal (WEXITSTATUS (status), 0);
        swarm->pid = 0;
        s_running = 0;
    }
}

//  Sends {type: TYPE, job: JOB, count: COUNT} and waits up to TIMEOUT_MS
//  for the reply.
static pv_doc_t *
s_swarm_call (s_swarm_t *swarm, const char *type, const char *job,
              int64_t count, int timeout_ms)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 1 + (job ? 1 : 0) + (count ? 1 : 0));
    pw_str (writer, "type");
    pw_str (writer, type);
    if (job) {
        pw_str (writer, "job");
        pw_str (writer, job);
    }
    if (count) {
        pw_str (writer, "count");
        pw_int (writer, count);
    }
    zsock_set_rcvtimeo (swarm->dealer, timeout_ms);
    zframe_t *frame = zframe_new (pw_data (writer), pw_size (writer));
    zframe_send (&frame, swarm->dealer, 0);
    pw_destroy (&writer);
    zframe_t *reply = zframe_recv (swarm->dealer);
    if (!reply)
        return NULL;
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (zframe_data (reply), zframe_size (reply), &doc, NULL,
                       0) != 0)
        doc = NULL;
    zframe_destroy (&reply);
    return doc;
}

//  The swarm's counter NAME, or -1.
static int64_t
s_stat (s_swarm_t *swarm, const char *name)
{
    pv_doc_t *doc = s_swarm_call (swarm, "stats", NULL, 0, 5000);
    int64_t value = -1;
    if (doc)
        pv_get_int (pv_map_get (pv_doc_root (doc), name), &value);
    pv_doc_destroy (&doc);
    return value;
}

//  Waits up to TIMEOUT_MS for counter NAME to reach AT_LEAST.
static bool
s_wait_stat (s_swarm_t *swarm, const char *name, int64_t at_least,
             int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (grid_now_ms () < deadline) {
        if (s_stat (swarm, name) >= at_least)
            return true;
        zclock_sleep (50);
    }
    fprintf (stderr, "swarm counter %s stayed at %" PRId64 " (wanted %" PRId64
             ")\n", name, s_stat (swarm, name), at_least);
    return false;
}

//  A broadcast `test echo` to every agent: it completes, and the swarm
//  holds all AGENTS result_acks for it.
static void
s_broadcast (grid_t *grid, s_swarm_t *swarm, int agents)
{
    char *job_id = grid_submit_id (grid,
        "target: all\n"
        "tasks:\n"
        "  - {backend: test, action: echo, params: {msg: over-zmtp}}\n");
    assert_non_null (job_id);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = NULL;
    assert_true (grid_reply_ok (doc, &record));
    if (!grid_str_is (record, "status", "completed"))
        pv_write_json (record, stderr, 2);
    assert_true (grid_str_is (record, "status", "completed"));
    pv_doc_destroy (&doc);
    //  Every result_ack reached its agent
    doc = s_swarm_call (swarm, "watch", job_id, agents, 30000);
    assert_non_null (doc);
    int64_t acked = 0, results = 0;
    pv_get_int (pv_map_get (pv_doc_root (doc), "acked"), &acked);
    pv_get_int (pv_map_get (pv_doc_root (doc), "results"), &results);
    assert_int_equal (acked, agents);
    assert_int_equal (results, agents);
    pv_doc_destroy (&doc);
    free (job_id);
}

//  No frame the swarm could not read, no ZMTP error; with CONNECTED, no
//  send refused for want of a connection either.
static void
s_assert_clean (s_swarm_t *swarm, bool connected)
{
    assert_int_equal (s_stat (swarm, "malformed"), 0);
    assert_int_equal (s_stat (swarm, "protocol_errors"), 0);
    if (connected)
        assert_int_equal (s_stat (swarm, "send_failed"), 0);
}

//  The connections stay up for several heartbeat timeouts: nothing is
//  dropped on either side, and PONGs keep coming.
static void
s_assert_stays_up (s_swarm_t *swarm, int agents)
{
    int64_t pongs = s_stat (swarm, "pongs");
    long long until = grid_now_ms () + 3 * atoi (S_TIMEOUT_MS);
    while (grid_now_ms () < until) {
        assert_int_equal (s_stat (swarm, "disconnects"), 0);
        zclock_sleep (250);
    }
    assert_int_equal (s_stat (swarm, "disconnects"), 0);
    assert_int_equal (s_stat (swarm, "connected"), 2 * agents);
    //  Each connection pings every 200 ms: 3 s is about 15 each
    assert_true (s_stat (swarm, "pongs") >= pongs + 2 * agents * 5);
}

static void
test_zmtp_swarm_direct (void **state)
{
    const int agents = 40;
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    grid.insecure = true;
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    s_swarm_t swarm;
    s_swarm_start (&swarm, &grid, agents, grid.agents_ep, grid.publish_ep);
    assert_true (s_wait_stat (&swarm, "welcomed", agents, 30000));
    assert_true (grid_wait_node (&grid, "swarm-000040", "online", 5000));
    s_broadcast (&grid, &swarm, agents);
    s_assert_stays_up (&swarm, agents);
    s_broadcast (&grid, &swarm, agents);
    s_assert_clean (&swarm, true);
    assert_int_equal (s_stat (&swarm, "unacked"), 0);
    s_swarm_stop (&swarm);
    //  Its byes reached the broker: the nodes are offline at once
    assert_true (grid_wait_node (&grid, "swarm-000001", "offline", 10000));
    grid_stop (&grid);
}

static void
test_zmtp_swarm_through_relay (void **state)
{
    const int agents = 30;
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    grid.insecure = true;
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    int relay = grid_start_relay (&grid, "r1", -1, true, NULL);
    assert_true (relay >= 0);
    s_swarm_t swarm;
    s_swarm_start (&swarm, &grid, agents, grid.relay_agents_ep [relay],
                   grid.relay_publish_ep [relay]);
    assert_true (s_wait_stat (&swarm, "welcomed", agents, 30000));
    assert_true (grid_wait_node (&grid, "swarm-000030", "online", 5000));
    s_broadcast (&grid, &swarm, agents);
    s_assert_stays_up (&swarm, agents);
    s_assert_clean (&swarm, true);
    s_swarm_stop (&swarm);
    grid_stop (&grid);
}

static void
test_zmtp_swarm_broker_restart (void **state)
{
    const int agents = 20;
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    grid.insecure = true;
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    s_swarm_t swarm;
    s_swarm_start (&swarm, &grid, agents, grid.agents_ep, grid.publish_ep);
    assert_true (s_wait_stat (&swarm, "welcomed", agents, 30000));
    s_broadcast (&grid, &swarm, agents);

    //  Killed: every connection drops and is made again once it is back
    grid_stop_broker (&grid, true);
    assert_true (s_wait_stat (&swarm, "disconnects", 2 * agents, 10000));
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    assert_true (s_wait_stat (&swarm, "connected", 4 * agents, 30000));
    for (int at = 1; at <= agents; at++) {
        char node [32];
        snprintf (node, sizeof node, "swarm-%06d", at);
        assert_true (grid_wait_node (&grid, node, "online", 15000));
    }
    //  The SUBs subscribed again: a broadcast reaches every agent
    s_broadcast (&grid, &swarm, agents);
    //  (Heartbeats were refused while the broker was away, as with
    //  ZMQ_IMMEDIATE)
    s_assert_clean (&swarm, false);
    s_swarm_stop (&swarm);
    grid_stop (&grid);
}

//  Pointed at a CURVE broker by mistake: every handshake is refused with
//  a clear reason, counted, retried with backoff; nothing crashes.
static void
test_zmtp_swarm_at_curve_broker (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    assert_int_equal (grid_start_broker (&grid, NULL), 0);
    s_swarm_t swarm;
    s_swarm_start (&swarm, &grid, 2, grid.agents_ep, grid.publish_ep);
    assert_true (s_wait_stat (&swarm, "protocol_errors", 8, 20000));
    assert_int_equal (s_stat (&swarm, "connected"), 0);
    assert_int_equal (s_stat (&swarm, "welcomed"), 0);
    assert_true (s_stat (&swarm, "disconnects") >= 8);
    char path [400];
    snprintf (path, sizeof path, "%s/swarm.log", grid.dir);
    char *log = grid_slurp (path);
    assert_non_null (strstr (log, "(does it want CURVE?)"));
    free (log);
    s_swarm_stop (&swarm);
    grid_stop (&grid);
}

//  Runs gridswarm with ARGS (NULL-terminated) and returns its exit code;
//  its stderr into ERR.
static int
s_swarm_exit (grid_t *grid, char **err_p, ...)
{
    char program [600];
    snprintf (program, sizeof program, "%s/gridswarm",
              getenv ("GRID_TOOLS") ? getenv ("GRID_TOOLS")
                                    : "build/test/tools");
    va_list args;
    va_start (args, err_p);
    int rc = -1;
    const char *argv [16];
    size_t argc = 0;
    const char *arg;
    while ((arg = va_arg (args, const char *)) && argc < 15)
        argv [argc++] = arg;
    argv [argc] = NULL;
    va_end (args);
    char log [400];
    snprintf (log, sizeof log, "%s/refused.log", grid->dir);
    pid_t pid = fork ();
    if (pid == 0) {
        FILE *out = freopen (log, "w", stderr);
        (void) out;
        execv (program, (char *const *) argv);
        _exit (127);
    }
    int status = 0;
    waitpid (pid, &status, 0);
    if (WIFEXITED (status))
        rc = WEXITSTATUS (status);
    *err_p = grid_slurp (log);
    return rc;
}

static void
test_zmtp_swarm_refusals (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    char *err = NULL;
    assert_int_equal (s_swarm_exit (&grid, &err, "gridswarm", "--transport",
                                    "zmtp", "--curve",
                                    "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7",
                                    NULL), 2);
    assert_non_null (strstr (err, "CURVE runs use --transport libzmq"));
    free (err);
    assert_int_equal (s_swarm_exit (&grid, &err, "gridswarm", "--transport",
                                    "carrier-pigeon", NULL), 2);
    assert_non_null (strstr (err, "expected zmtp or libzmq"));
    free (err);
    assert_int_equal (s_swarm_exit (&grid, &err, "gridswarm", "--transport",
                                    "zmtp", "--broker", "inproc://nowhere",
                                    "--agents", "1", NULL), 1);
    assert_non_null (strstr (err, "only tcp:// and ipc://"));
    free (err);
    grid_stop (&grid);
}

static int
s_teardown (void **state)
{
    if (s_running > 0)
        grid_kill (s_running, SIGKILL);
    s_running = 0;
    return 0;
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_zmtp_swarm_refusals),
        cmocka_unit_test_teardown (test_zmtp_swarm_direct, s_teardown),
        cmocka_unit_test_teardown (test_zmtp_swarm_through_relay, s_teardown),
        cmocka_unit_test_teardown (test_zmtp_swarm_broker_restart,
                                   s_teardown),
        cmocka_unit_test_teardown (test_zmtp_swarm_at_curve_broker,
                                   s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
