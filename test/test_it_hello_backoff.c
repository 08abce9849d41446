/*  =========================================================================
    test_it_hello_backoff - how often agents say hello to a broker that
    does not welcome them: a real gridagent and a gridswarm agent against
    a stand-in broker (a ROUTER that never answers) back off, the wait
    doubling up to 30 s, while a gridagent whose hellos the broker refuses
    (pending) keeps asking every 2 s or so, and one whose broker speaks
    another protocol (unsupported_version) says so once at error level
    and asks again only once a minute.
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

#include "../proto/proto.h"
#include "../proto/pw.h"
#include "lib/harness.h"

//  Long enough for the old pace (every 2 s) to send twice what backing
//  off does: gridagent from 100 ms doubling (at most 10 hellos, counting
//  the one when the connection comes up, where every 2 s sends 12 or
//  more); gridswarm from 2 s doubling (at most 5, where 2 s sends 11)
#define S_WATCH_MS 25000

//  Starts gridswarm with one agent against GRID's endpoints; its pid.
static pid_t
s_spawn_swarm (grid_t *grid)
{
    char program [600], log [400];
    snprintf (program, sizeof program, "%s/gridswarm",
              getenv ("GRID_TOOLS") ? getenv ("GRID_TOOLS")
                                    : "build/test/tools");
    snprintf (log, sizeof log, "%s/swarm.log", grid->dir);
    pid_t pid = fork ();
    if (pid == 0) {
        FILE *out = freopen (log, "w", stderr);
        (void) out;
        execl (program, "gridswarm", "--agents", "1", "--prefix", "swarm",
               "--threads", "1", "--broker", grid->agents_ep, "--publish",
               grid->publish_ep, (char *) NULL);
        _exit (127);
    }
    return pid;
}

//  Answers the hello that came from ROUTING on ROUTER with an error CODE.
static void
s_refuse (zsock_t *router, zframe_t *routing, const char *code,
          const char *message)
{
    proto_msg_t error = {
        .type = PROTO_ERROR, .code = (char *) code, .message = (char *) message
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&error, writer), 0);
    zmsg_t *reply = zmsg_new ();
    zmsg_append (reply, &(zframe_t *) {zframe_dup (routing)});
    zmsg_addmem (reply, pw_data (writer), pw_size (writer));
    assert_int_equal (zmsg_send (&reply, router), 0);
    pw_destroy (&writer);
}

static void
test_it_hello_backoff_paces (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    grid.insecure = true;
    //  The stand-in broker: it reads hellos, answers only refused-01's
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    zsock_t *publisher = zsock_new (ZMQ_PUB);
    assert_non_null (router);
    assert_non_null (publisher);
    assert_int_equal (zsock_bind (router, "%s", grid.agents_ep), 0);
    assert_int_equal (zsock_bind (publisher, "%s", grid.publish_ep), 0);
    assert_true (grid_spawn_agent (&grid, "quiet-01", NULL, NULL, NULL) >= 0);
    assert_true (grid_spawn_agent (&grid, "refused-01", NULL, NULL, NULL)
                 >= 0);
    assert_true (grid_spawn_agent (&grid, "old-01", NULL, NULL, NULL) >= 0);
    pid_t swarm = s_spawn_swarm (&grid);
    assert_true (swarm > 0);

    int quiet = 0, refused = 0, swarmed = 0, other = 0, incompatible = 0;
    long long deadline = grid_now_ms () + S_WATCH_MS;
    zpoller_t *poller = zpoller_new (router, NULL);
    while (grid_now_ms () < deadline) {
        if (!zpoller_wait (poller, 100))
            continue;
        zmsg_t *msg = zmsg_recv (router);
        if (!msg)
            continue;
        zframe_t *routing = zmsg_first (msg);
        zframe_t *body = zmsg_last (msg);
        proto_msg_t *in = NULL;
        if (proto_msg_decode (zframe_data (body), zframe_size (body), &in,
                              NULL, 0) == 0
            && in->type == PROTO_HELLO) {
            if (strcmp (in->node, "quiet-01") == 0)
                quiet++;
            else
            if (strcmp (in->node, "refused-01") == 0) {
                refused++;
                s_refuse (router, routing, "pending",
                          "this key waits for acceptance");
            }
            else
            if (strcmp (in->node, "old-01") == 0) {
                incompatible++;
                s_refuse (router, routing, PROTO_ERR_VERSION,
                          "unsupported version 1 (speaks 2)");
            }
            else
            if (strncmp (in->node, "swarm-", 6) == 0) {
                swarmed++;
                //  A process id, as a real agent's: repeats can be told
                assert_non_null (in->instance);
            }
            else
                other++;
        }
        proto_msg_destroy (&in);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    grid_kill (swarm, SIGKILL);
    fprintf (stderr, "hellos in %d ms: gridagent %d, refused gridagent %d, "
             "incompatible gridagent %d, gridswarm %d\n", S_WATCH_MS, quiet,
             refused, incompatible, swarmed);
    //  Each keeps asking...
    assert_true (quiet >= 5);
    assert_true (swarmed >= 2);
    //  ... backing off while nothing answers
    assert_true (quiet <= 10);
    assert_true (swarmed <= 6);
    //  ... but not from a broker that answers
    assert_true (refused >= 10);
    //  ... unless it speaks another protocol: once a minute, said once
    assert_true (incompatible >= 1);
    assert_true (incompatible <= 3);
    char path [512];
    snprintf (path, sizeof path, "%s/agent-old-01.log", grid.dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    assert_true (grid_line_with (log, "error:", "does not speak this agent's "
                                 "protocol", "unsupported_version", NULL));
    size_t said = 0;
    for (const char *at = log; (at = strstr (at, "does not speak")); at++)
        said++;
    assert_int_equal (said, 1);
    free (log);
    assert_int_equal (other, 0);
    zsock_destroy (&router);
    zsock_destroy (&publisher);
    grid_stop (&grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_hello_backoff_paces),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
