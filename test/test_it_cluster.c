/*  =========================================================================
    test_it_cluster - a broker cluster on a real etcd (loopback): two
    gridbrokers and a gridagent that knows both

    - The active killed (SIGKILL) with jobs running: the standby takes
      over, every submit that was answered ok is there and completes with
      one result per node; the former active comes back as a standby,
      catches up from a snapshot, and takes over in turn.
    - The active stopped (SIGSTOP) past its lease: the standby takes over;
      continued, the former active has demoted itself and answers only
      not_leader; the agent moved to the new active and keeps its epoch
      (the fence against the former one), and runs what it sends.
    - A standby answers not_leader naming the active's client endpoint.
    - A standby's HTTP face: /readyz and /api/v1/leader 503 naming the
      active (200 on the active), a job submitted there 503 not_leader
      with the active's URL, its grid_ha_* metrics; an agent whose list
      starts with the standby is redirected to the active at once (long
      before its failover), and one whose list lacks the active is not.
    - Two fake standbys that name each other: the agent follows a few
      redirects, then no more (its failover order takes over); a
      redirect of an epoch lower than the agent saw is dropped.
    - Bad ha: configurations are refused at start with a clear error.
    - A blob uploaded to the active is on the standby (the blobs database
      is replicated with the pass that wrote it), and so are 300 blobs
      uploaded side by side (the passes that carry them stay small enough
      for the standby to apply each in turn: it never falls out of sync);
      after a SIGKILL of the active, a file put of that blob on the new
      active delivers it, right to the byte, without uploading it again.
    - The active's store on a small disk (a tmpfs: root only) filled up:
      the commit of a pass it already shipped fails, so it leaves the
      lead; the standby takes over at once, holds every job the active
      answered ok, and the former active never answers ok again.
    - A standby whose map is at its ceiling when a pass comes: it says so
      once, the active drops it from the sync set and answers on alone,
      the standby asks again now and then (no storm of hellos); restarted
      with a larger ceiling it catches up, and, switched over to, holds
      every job answered ok.
    =========================================================================
*/

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proto/base64.h"
#include "../proto/conf.h"
#include "../proto/proto.h"
#include "../proto/sha256.h"
#include "lib/cluster.h"

#define S_WAIT_MS 20000

//  curl METHOD http://127.0.0.1:PORT/PATH (with BODY, JSON, unless NULL):
//  returns the status (0 when curl failed); the body into *BODY_P.
static int
s_http (int port, const char *method, const char *path, const char *body,
        char **body_p)
{
    char command [1200];
    snprintf (command, sizeof command, "curl -s --max-time 10 -X %s "
              "-w '\n%%{http_code}' %s%s%s http://127.0.0.1:%d%s", method,
              body ? "-H 'Content-Type: application/json' --data '" : "",
              body ? body : "", body ? "'" : "", port, path);
    FILE *pipe = popen (command, "r");
    assert_non_null (pipe);
    size_t size = 0, used = 0;
    char *text = NULL;
    char chunk [4096];
    size_t got;
    while ((got = fread (chunk, 1, sizeof chunk, pipe)) > 0) {
        if (used + got + 1 > size) {
            size = (used + got + 1) * 2;
            text = (char *) realloc (text, size);
            assert_non_null (text);
        }
        memcpy (text + used, chunk, got);
        used += got;
    }
    pclose (pipe);
    if (!text)
        text = strdup ("");
    text [used] = 0;
    char *last = strrchr (text, '\n');
    int status = last ? atoi (last + 1) : 0;
    if (last)
        *last = 0;
    *body_p = text;
    return status;
}

//  A and B up (B with the flags B_ARGS, NULL-ended, or none), A the
//  active, B in its sync set; agent n1 knows both.
static void
s_cluster_up_with (cluster_pair_t *self, const char *const *b_args)
{
    cluster_pair_spawn (self, 0);
    //  A status asked while A restarts as the active would wait out its
    //  whole timeout
    assert_true (cluster_pair_wait_log (self, 0, "a is the active"));
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    self->spawn_args = b_args;
    cluster_pair_spawn (self, 1);
    self->spawn_args = NULL;
    assert_true (cluster_pair_wait_code (self, 1, "not_leader"));
    assert_true (cluster_pair_wait_log (self, 0, "standby b is in sync"));
    char brokers [800], publishes [800];
    snprintf (brokers, sizeof brokers, "%s,%s", self->member [0].agents_ep,
              self->member [1].agents_ep);
    snprintf (publishes, sizeof publishes, "%s,%s",
              self->member [0].publish_ep, self->member [1].publish_ep);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--failover", "1s", NULL};
    assert_true (grid_start_agent (&self->member [0], "n1", "web", NULL, extra)
                 >= 0);
}

static void
s_cluster_up (cluster_pair_t *self)
{
    s_cluster_up_with (self, NULL);
}

//  Every job of IDS (COUNT) exists on member WHICH, completes there, and
//  has one result for n1.
static void
s_assert_jobs_complete (cluster_pair_t *self, int which, char **ids, size_t count)
{
    for (size_t index = 0; index < count; index++) {
        pv_doc_t *doc = grid_wait_job (&self->member [which], ids [index],
                                       S_WAIT_MS);
        assert_non_null (doc);
        const pv_t *data = pv_map_get (pv_doc_root (doc), "data");
        if (!grid_str_is (data, "status", "completed")) {
            grid_dump_logs (&self->member [0]);
            grid_dump_logs (&self->member [1]);
        }
        assert_true (grid_str_is (data, "status", "completed"));
        const pv_t *cell = grid_cell (data, 0, "n1");
        assert_non_null (cell);
        assert_true (grid_str_is (cell, "status", "success"));
        pv_doc_destroy (&doc);
    }
}

static void
test_cluster_standby_says_not_leader (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    cluster_pair_spawn (self, 0);
    if (!cluster_pair_wait_code (self, 0, "ok")) {
        grid_dump_logs (&self->member [0]);
    }
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    cluster_pair_spawn (self, 1);
    assert_true (cluster_pair_wait_code (self, 1, "not_leader"));
    //  It names the active and its client endpoint, for a client to follow
    pv_doc_t *reply = grid_call (&self->member [1], "job.list", NULL);
    assert_non_null (reply);
    const pv_t *root = pv_doc_root (reply);
    char *message = pv_strdup (pv_map_get (root, "message"));
    assert_non_null (message);
    assert_non_null (strstr (message, "the active is a"));
    free (message);
    const pv_t *details = pv_map_get (root, "details");
    assert_int_equal (pv_size (details), 1);
    assert_true (pv_str_eq (pv_array_at (details, 0),
                            self->member [0].client_ep));
    pv_doc_destroy (&reply);
    //  gridcli follows it to the active
    char *out = NULL, *err = NULL;
    int code = grid_cli (&self->member [1], &out, &err, 10000, "status",
                         NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    //  ... and with both members listed, takes turns past a dead one
    char both [800];
    snprintf (both, sizeof both, "ipc://%.300s/nothing.ipc,%s",
              self->dir, self->member [1].client_ep);
    code = grid_cli (&self->member [1], &out, &err, 20000, "--broker", both,
                     "status", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
}

//  Waits until the log of agent ID (of member 0's directory) holds TEXT.
static bool
s_wait_agent_log (cluster_pair_t *self, const char *id, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%s/agent-%s.log", self->member [0].dir, id);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        char *log = grid_slurp (path);
        bool found = log && strstr (log, text) != NULL;
        free (log);
        if (found)
            return true;
        usleep (100 * 1000);
    }
    fprintf (stderr, "agent %s never logged '%s'\n", id, text);
    grid_dump_logs (&self->member [0]);
    return false;
}

static void
test_cluster_standby_faces (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    cluster_pair_faces (self);
    cluster_pair_spawn (self, 0);
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    cluster_pair_spawn (self, 1);
    assert_true (cluster_pair_wait_code (self, 1, "not_leader"));
    int active = self->http_port [0], standby = self->http_port [1];
    char url [64];
    snprintf (url, sizeof url, "http://127.0.0.1:%d", active);
    //  A load balancer's health check: 200 on the active only
    char *body = NULL;
    long long deadline = grid_now_ms () + S_WAIT_MS;
    int status = 0;
    while (grid_now_ms () < deadline) {
        free (body);
        status = s_http (standby, "GET", "/api/v1/leader", NULL, &body);
        if (status == 503 && strstr (body, "\"leader\":\"a\""))
            break;
        usleep (100 * 1000);
    }
    if (status != 503)
        fprintf (stderr, "standby /api/v1/leader: %d %s\n", status, body);
    assert_int_equal (status, 503);
    assert_non_null (strstr (body, "\"role\":\"standby\""));
    assert_non_null (strstr (body, url));
    free (body);
    status = s_http (active, "GET", "/api/v1/leader", NULL, &body);
    if (status != 200)
        fprintf (stderr, "active /api/v1/leader: %d %s\n", status, body);
    assert_int_equal (status, 200);
    assert_non_null (strstr (body, "\"role\":\"active\""));
    assert_non_null (strstr (body, self->member [0].client_ep));
    free (body);
    //  /readyz: 503 on the standby, naming the active; /healthz lives
    assert_int_equal (s_http (standby, "GET", "/readyz", NULL, &body), 503);
    assert_non_null (strstr (body, "standby"));
    assert_non_null (strstr (body, url));
    free (body);
    assert_int_equal (s_http (active, "GET", "/readyz", NULL, &body), 200);
    free (body);
    assert_int_equal (s_http (standby, "GET", "/healthz", NULL, &body), 200);
    free (body);
    //  A job submitted to the standby: 503 not_leader, the active's URL
    status = s_http (standby, "POST", "/api/v1/jobs",
                     "{\"target\": {\"scope\": \"all\"}, \"tasks\": "
                     "[{\"backend\": \"test\", \"action\": \"echo\"}]}",
                     &body);
    if (status != 503 || !strstr (body, "not_leader"))
        fprintf (stderr, "submit to the standby: %d %s\n", status, body);
    assert_int_equal (status, 503);
    assert_non_null (strstr (body, "\"not_leader\""));
    assert_non_null (strstr (body, url));
    free (body);
    //  Its metrics say what it is
    assert_int_equal (s_http (standby, "GET", "/metrics", NULL, &body), 200);
    assert_true (grid_line_with (body, "grid_ha_role 0", NULL));
    assert_true (grid_line_with (body, "grid_ha_epoch", NULL));
    free (body);
    //  An agent whose list starts with the standby: redirected to the
    //  active at once, long before its failover (60 s) would move it
    char brokers [800], publishes [800];
    snprintf (brokers, sizeof brokers, "%s,%s", self->member [1].agents_ep,
              self->member [0].agents_ep);
    snprintf (publishes, sizeof publishes, "%s,%s",
              self->member [1].publish_ep, self->member [0].publish_ep);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--failover", "60s", NULL};
    long long started = grid_now_ms ();
    assert_true (grid_spawn_agent (&self->member [0], "n1", "web", NULL,
                                   extra) >= 0);
    assert_true (grid_wait_node (&self->member [0], "n1", "online", 15000));
    printf ("    the redirected agent was online on the active after "
            "%lld ms\n", grid_now_ms () - started);
    assert_true (s_wait_agent_log (self, "n1", "is a standby: moving to the "
                                   "active"));
    //  One that was not given the active's endpoint stays put: it never
    //  dials an endpoint it was not configured with
    const char *alone [] = {"--broker", self->member [1].agents_ep,
                            "--publish", self->member [1].publish_ep, NULL};
    assert_true (grid_spawn_agent (&self->member [0], "n2", "web", NULL,
                                   alone) >= 0);
    assert_true (s_wait_agent_log (self, "n2", "is not one of this agent's "
                                   "--broker endpoints"));
    //  The active killed: the standby takes over, and its HTTP port (the
    //  standby's face closed, the active's opened) leads now
    grid_kill (self->member [0].broker_pid, SIGKILL);
    waitpid (self->member [0].broker_pid, NULL, 0);
    self->member [0].broker_pid = 0;
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        status = s_http (standby, "GET", "/api/v1/leader", NULL, &body);
        bool leads = status == 200 && strstr (body, "\"leader\":\"b\"");
        free (body);
        if (leads)
            break;
        usleep (100 * 1000);
    }
    assert_int_equal (status, 200);
}

//  Answers every hello on SOCKET with a redirect to OTHER of EPOCH;
//  returns how many it answered.
static int
s_fake_standby (zsock_t *socket, const char *other, uint64_t epoch)
{
    int answered = 0;
    zmsg_t *msg;
    while ((msg = zmsg_recv_nowait (socket))) {
        zframe_t *routing = zmsg_first (msg);
        zframe_t *body = zmsg_next (msg);
        proto_msg_t *hello = NULL;
        if (body && proto_msg_decode (zframe_data (body), zframe_size (body),
                                      &hello, NULL, 0) == 0
            && hello->type == PROTO_HELLO) {
            proto_msg_t error = {
                .type = PROTO_ERROR, .code = (char *) "not_leader",
                .message = (char *) "a standby", .endpoint = (char *) other,
                .epoch = epoch,
            };
            pw_t *writer = pw_new ();
            assert_int_equal (proto_msg_encode (&error, writer), 0);
            zmsg_t *reply = zmsg_new ();
            zmsg_addmem (reply, zframe_data (routing), zframe_size (routing));
            zmsg_addmem (reply, pw_data (writer), pw_size (writer));
            zmsg_send (&reply, socket);
            pw_destroy (&writer);
            answered++;
        }
        proto_msg_destroy (&hello);
        zmsg_destroy (&msg);
    }
    return answered;
}

static void
test_cluster_redirect_loop_bounded (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    char ep [2][400], pub [400];
    zsock_t *fake [2];
    for (int which = 0; which < 2; which++) {
        snprintf (ep [which], sizeof ep [which], "ipc://%.300s/fake-%d.ipc",
                  self->dir, which);
        fake [which] = zsock_new (ZMQ_ROUTER);
        assert_non_null (fake [which]);
        assert_true (zsock_bind (fake [which], "%s", ep [which]) >= 0);
    }
    snprintf (pub, sizeof pub, "ipc://%.300s/fake-pub.ipc", self->dir);
    char brokers [900], publishes [900];
    snprintf (brokers, sizeof brokers, "%s,%s", ep [0], ep [1]);
    snprintf (publishes, sizeof publishes, "%s,%s", pub, pub);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--failover", "60s", NULL};
    assert_true (grid_spawn_agent (&self->member [0], "n1", "web", NULL,
                                   extra) >= 0);
    long long deadline = grid_now_ms () + 6000;
    int answered = 0;
    while (grid_now_ms () < deadline) {
        answered += s_fake_standby (fake [0], ep [1], 0);
        answered += s_fake_standby (fake [1], ep [0], 0);
        usleep (20 * 1000);
    }
    zsock_destroy (&fake [0]);
    zsock_destroy (&fake [1]);
    //  A few redirects followed, then refused: the loop is bounded
    char path [400];
    snprintf (path, sizeof path, "%s/agent-n1.log", self->member [0].dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    int moved = 0;
    for (const char *at = strstr (log, "is a standby: moving"); at;
         at = strstr (at + 1, "is a standby: moving"))
        moved++;
    if (moved != 4 || !strstr (log, "one redirect too many"))
        fprintf (stderr, "%d hellos answered, %d redirects followed:\n%s",
                 answered, moved, log);
    assert_int_equal (moved, 4);
    assert_non_null (strstr (log, "one redirect too many"));
    free (log);
}

static void
test_cluster_redirect_of_lower_epoch_dropped (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    char ep [2][400], pub [400], path [400];
    for (int which = 0; which < 2; which++)
        snprintf (ep [which], sizeof ep [which], "ipc://%.300s/fake-%d.ipc",
                  self->dir, which);
    snprintf (pub, sizeof pub, "ipc://%.300s/fake-pub.ipc", self->dir);
    zsock_t *fake = zsock_new (ZMQ_ROUTER);
    assert_true (zsock_bind (fake, "%s", ep [0]) >= 0);
    //  The agent saw epoch 100 once; a standby of epoch 5 redirects it
    snprintf (path, sizeof path, "%s/agent-n1", self->member [0].dir);
    assert_int_equal (mkdir (path, 0700), 0);
    snprintf (path, sizeof path, "%s/agent-n1/epoch", self->member [0].dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs ("100\n", file);
    fclose (file);
    char brokers [900], publishes [900];
    snprintf (brokers, sizeof brokers, "%s,%s", ep [0], ep [1]);
    snprintf (publishes, sizeof publishes, "%s,%s", pub, pub);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--failover", "60s", NULL};
    assert_true (grid_spawn_agent (&self->member [0], "n1", "web", NULL,
                                   extra) >= 0);
    long long deadline = grid_now_ms () + 3000;
    int answered = 0;
    while (grid_now_ms () < deadline) {
        answered += s_fake_standby (fake, ep [1], 5);
        usleep (20 * 1000);
    }
    zsock_destroy (&fake);
    snprintf (path, sizeof path, "%s/agent-n1.log", self->member [0].dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    if (answered == 0 || strstr (log, "moving to the active")
        || !strstr (log, "of epoch 5"))
        fprintf (stderr, "%d hellos answered:\n%s", answered, log);
    assert_true (answered > 0);
    assert_null (strstr (log, "moving to the active"));
    assert_non_null (strstr (log, "of epoch 5"));
    free (log);
}

static void
test_cluster_failover_after_sigkill (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    s_cluster_up (self);
    //  Jobs running on n1 when the active dies; every ok is a promise
    const char *spec = "target: {scope: node, value: n1}\n"
                       "tasks:\n  - {backend: test, action: sleep, "
                       "params: {seconds: 1}}\n";
    char *ids [6];
    for (size_t index = 0; index < 6; index++) {
        ids [index] = grid_submit_id (&self->member [0], spec);
        assert_non_null (ids [index]);
    }
    grid_kill (self->member [0].broker_pid, SIGKILL);
    waitpid (self->member [0].broker_pid, NULL, 0);
    self->member [0].broker_pid = 0;
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    s_assert_jobs_complete (self, 1, ids, 6);
    //  The former active comes back as a standby and catches up with a
    //  snapshot (its store's tail is never served)
    cluster_pair_spawn (self, 0);
    assert_true (cluster_pair_wait_code (self, 0, "not_leader"));
    assert_true (cluster_pair_wait_log (self, 1, "standby a is in sync"));
    assert_true (cluster_pair_wait_log (self, 0, "installed a snapshot"));
    char *late = grid_submit_id (&self->member [1], spec);
    assert_non_null (late);
    pv_doc_t *doc = grid_wait_job (&self->member [1], late, S_WAIT_MS);
    pv_doc_destroy (&doc);
    //  ... and takes over in turn, with everything
    grid_kill (self->member [1].broker_pid, SIGKILL);
    waitpid (self->member [1].broker_pid, NULL, 0);
    self->member [1].broker_pid = 0;
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    s_assert_jobs_complete (self, 0, ids, 6);
    s_assert_jobs_complete (self, 0, &late, 1);
    for (size_t index = 0; index < 6; index++)
        free (ids [index]);
    free (late);
}

//  The epoch member WHICH last became the active of (its log says), or 0.
static uint64_t
s_epoch_of (cluster_pair_t *self, int which)
{
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", self->member [which].dir);
    char *log = grid_slurp (path);
    const char *mark = "is the active of cluster lab (epoch ";
    uint64_t epoch = 0;
    for (const char *at = log ? strstr (log, mark) : NULL; at;
         at = strstr (at + 1, mark))
        epoch = strtoull (at + strlen (mark), NULL, 10);
    free (log);
    return epoch;
}

//  Waits until agent n1 keeps EPOCH in its state dir (it took a welcome
//  of that epoch).
static bool
s_wait_agent_epoch (cluster_pair_t *self, uint64_t epoch)
{
    char path [400];
    snprintf (path, sizeof path, "%s/agent-n1/epoch", self->member [0].dir);
    long long deadline = grid_now_ms () + 3 * S_WAIT_MS;
    uint64_t kept = 0;
    while (grid_now_ms () < deadline) {
        char *text = grid_slurp (path);
        kept = text ? strtoull (text, NULL, 10) : 0;
        free (text);
        if (kept == epoch)
            return true;
        usleep (100 * 1000);
    }
    fprintf (stderr, "agent n1 keeps epoch %llu, not %llu\n",
             (unsigned long long) kept, (unsigned long long) epoch);
    grid_dump_logs (&self->member [0]);
    grid_dump_logs (&self->member [1]);
    return false;
}

static void
test_cluster_stopped_active_demotes (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    s_cluster_up (self);
    //  The agent took the active's epoch from its welcome
    uint64_t first = s_epoch_of (self, 0);
    assert_true (first > 0);
    assert_true (s_wait_agent_epoch (self, first));
    grid_kill (self->member [0].broker_pid, SIGSTOP);
    //  The standby took over (the agent comes over later: it leaves a
    //  stopped broker when its ZMTP heartbeats time out, 15 s)
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    uint64_t second = s_epoch_of (self, 1);
    assert_true (second > first);
    grid_kill (self->member [0].broker_pid, SIGCONT);
    //  Continued, it knows it lost the lead before doing anything
    assert_true (cluster_pair_wait_log (self, 0, "is no longer the active"));
    assert_true (cluster_pair_wait_code (self, 0, "not_leader"));
    //  The agent moved to the new active and fences at its epoch: what
    //  the former one might still send is refused (test_it_agent and
    //  test_epoch show the refusal), what the new one sends runs
    assert_true (s_wait_agent_epoch (self, second));
    const char *spec = "target: {scope: node, value: n1}\n"
                       "tasks:\n  - {backend: test, action: echo, "
                       "params: {msg: fenced}}\n";
    char *id = grid_submit_id (&self->member [1], spec);
    assert_non_null (id);
    s_assert_jobs_complete (self, 1, &id, 1);
    free (id);
}

static void
test_cluster_status_and_switchover (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    s_cluster_up (self);
    //  Asked through the standby, the active answers
    char *out = NULL, *err = NULL;
    int code = grid_cli (&self->member [1], &out, &err, 10000, "cluster",
                         "status", NULL);
    if (code != 0 || !grid_line_with (out, "active", "a", "epoch", NULL))
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "active", "a", "epoch", NULL));
    assert_true (grid_line_with (out, "b", "live", "yes", NULL));
    free (out);
    free (err);
    //  ... and its metrics say so
    code = grid_cli (&self->member [0], &out, &err, 10000, "metrics", NULL);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "grid_ha_sync_standbys 1", NULL));
    assert_true (grid_line_with (out, "grid_ha_role 1", NULL));
    free (out);
    free (err);
    //  A name that is not the standby in sync is refused
    code = grid_cli (&self->member [0], &out, &err, 10000, "cluster",
                     "switchover", "--to", "c", NULL);
    assert_int_not_equal (code, 0);
    assert_non_null (strstr (err, "not a standby in sync"));
    free (out);
    free (err);
    code = grid_cli (&self->member [0], &out, &err, 10000, "cluster",
                     "switchover", "--to", "b", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    assert_true (cluster_pair_wait_code (self, 0, "not_leader"));
    assert_true (cluster_pair_wait_log (self, 1, "standby a is in sync"));
    //  Nothing was lost, and the fleet follows
    assert_true (grid_wait_node (&self->member [1], "n1", "online", 40000));
    char *id = grid_submit_id (&self->member [1],
                               "target: {scope: node, value: n1}\n"
                               "tasks:\n  - {backend: test, action: echo, "
                               "params: {msg: hi}}\n");
    assert_non_null (id);
    s_assert_jobs_complete (self, 1, &id, 1);
    free (id);
    //  A broker alone says so
    pv_doc_t *reply = grid_call (&self->member [1], "cluster.status", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    assert_true (grid_str_is (data, "role", "active"));
    assert_true (grid_str_is (data, "name", "b"));
    pv_doc_destroy (&reply);
}

static void
test_cluster_bad_config_refused (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    struct {
        const char *yaml;
        const char *says;
    } cases [] = {
        {"ha:\n  cluster: lab\n  name: a\n  etcd: http://127.0.0.1:1\n"
         "  replicate: ipc:///tmp/x\n", "a cluster needs at least one other"},
        {"ha:\n  cluster: 'bad name'\n  name: a\n  etcd: http://127.0.0.1:1\n"
         "  replicate: ipc:///tmp/x\n"
         "  peers: [{name: b, client: ipc:///tmp/c, replicate: ipc:///tmp/r}]\n",
         "cluster: expected"},
        {"ha:\n  cluster: lab\n  name: a\n  etcd: http://127.0.0.1:1\n"
         "  replicate: ipc:///tmp/x\n"
         "  peers: [{name: a, client: ipc:///tmp/c, replicate: ipc:///tmp/r}]\n",
         "own name"},
        {"ha:\n  cluster: lab\n  name: a\n  etcd: http://127.0.0.1:1\n"
         "  replicate: ipc:///tmp/x\n  ttl: 1s\n"
         "  peers: [{name: b, client: ipc:///tmp/c, replicate: ipc:///tmp/r}]\n",
         "ttl"},
        {"ha:\n  cluster: lab\n  name: a\n  etcd: http://127.0.0.1:1\n"
         "  replicate: ipc:///tmp/x\n  colour: blue\n", "colour"},
        {"ha:\n  cluster: lab\n  name: a\n  etcd: http://127.0.0.1:1\n"
         "  replicate: ipc:///tmp/x\n"
         "  peers: [{name: b, client: ipc:///tmp/c}]\n", "replicate"},
    };
    char path [400], data [400];
    snprintf (path, sizeof path, "%s/bad.yaml", self->dir);
    snprintf (data, sizeof data, "%s/bad-data", self->dir);
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        FILE *file = fopen (path, "w");
        assert_non_null (file);
        fputs (cases [index].yaml, file);
        fclose (file);
        char *out = NULL, *err = NULL;
        int code = grid_run (&self->member [0], "gridbroker", &out, &err,
                             10000, "--config", path, "--data-dir", data,
                             "--insecure", NULL);
        if (code == 0 || !strstr (err, cases [index].says))
            fprintf (stderr, "case %zu: exit %d: %s\n", index, code, err);
        assert_int_not_equal (code, 0);
        assert_non_null (strstr (err, cases [index].says));
        free (out);
        free (err);
    }
}

#define S_BURST 300                 //  Uploads side by side

//  Waits until member WHICH (the active) counts standby NAME in its sync
//  set and NAME has every pass it released.
static bool
s_wait_standby_sync (cluster_pair_t *self, int which, const char *name)
{
    long long deadline = grid_now_ms () + 3 * S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *reply = grid_call (&self->member [which], "cluster.status",
                                     NULL);
        const pv_t *data = NULL;
        bool in_sync = false;
        if (grid_reply_ok (reply, &data)) {
            int64_t released = -1;
            pv_get_int (pv_map_get (data, "released"), &released);
            const pv_t *standbys = pv_map_get (data, "standbys");
            for (size_t index = 0; index < pv_size (standbys); index++) {
                const pv_t *standby = pv_array_at (standbys, index);
                bool sync = false;
                int64_t pass = -2;
                pv_get_bool (pv_map_get (standby, "sync"), &sync);
                pv_get_int (pv_map_get (standby, "pass"), &pass);
                if (grid_str_is (standby, "name", name) && sync
                    && pass >= released)
                    in_sync = true;
            }
        }
        pv_doc_destroy (&reply);
        if (in_sync)
            return true;
        usleep (100 * 1000);
    }
    fprintf (stderr, "standby %s is not in sync\n", name);
    grid_dump_logs (&self->member [0]);
    grid_dump_logs (&self->member [1]);
    return false;
}

//  S_BURST clients each upload a blob of one chunk to member WHICH at
//  once; every answer is ok.
static void
s_upload_burst (cluster_pair_t *self, int which)
{
    zsock_t **dealers = (zsock_t **) calloc (S_BURST, sizeof (zsock_t *));
    size_t len = PROTO_BLOB_CHUNK_BYTES;
    uint8_t *data = (uint8_t *) malloc (len);
    char *text = (char *) malloc (BASE64_LEN (len) + 1);
    assert_true (dealers && data && text);
    pw_t *writer = pw_new ();
    for (int index = 0; index < S_BURST; index++) {
        dealers [index] = zsock_new (ZMQ_DEALER);
        assert_non_null (dealers [index]);
        zsock_set_linger (dealers [index], 0);
        assert_int_equal (zsock_connect (dealers [index], "%s",
                                         self->member [which].client_ep), 0);
    }
    char hex [SHA256_HEX];
    for (int index = 0; index < S_BURST; index++) {
        for (size_t at = 0; at < len; at++)
            data [at] = (uint8_t) (at * 7 + (at >> 9));
        memcpy (data, &index, sizeof index);    //  Each its own content
        sha256_hex (data, len, hex);
        base64_encode (data, len, text);
        pw_reset (writer);
        proto_request_begin (writer, "blob.put", "burst", 4);
        pw_str (writer, "sha256");
        pw_str (writer, hex);
        pw_str (writer, "size");
        pw_int (writer, (int64_t) len);
        pw_str (writer, "offset");
        pw_int (writer, 0);
        pw_str (writer, "data");
        pw_str (writer, text);
        assert_int_equal (zsock_send (dealers [index], "b",
                                      pw_data (writer), pw_size (writer)), 0);
    }
    for (int index = 0; index < S_BURST; index++) {
        zsock_set_rcvtimeo (dealers [index], S_WAIT_MS);
        zframe_t *body = zframe_recv (dealers [index]);
        assert_non_null (body);
        pv_doc_t *reply = NULL;
        assert_int_equal (pv_doc_decode (zframe_data (body),
                                         zframe_size (body), &reply, NULL,
                                         0), 0);
        if (!grid_reply_ok (reply, NULL))
            pv_write_json (pv_doc_root (reply), stderr, 0);
        assert_true (grid_reply_ok (reply, NULL));
        pv_doc_destroy (&reply);
        zframe_destroy (&body);
        zsock_destroy (&dealers [index]);
    }
    pw_destroy (&writer);
    free (dealers);
    free (data);
    free (text);
}

static void
test_cluster_blob_after_failover (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    cluster_pair_spawn (self, 0);
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    cluster_pair_spawn (self, 1);
    assert_true (cluster_pair_wait_code (self, 1, "not_leader"));
    assert_true (cluster_pair_wait_log (self, 0, "standby b is in sync"));
    //  Agent f1 knows both, with one root open for the file backend
    char root [400], config [400], brokers [800], publishes [800];
    snprintf (root, sizeof root, "%s/files", self->dir);
    snprintf (config, sizeof config, "%s/f1.yaml", self->dir);
    assert_int_equal (mkdir (root, 0755), 0);
    FILE *file = fopen (config, "w");
    assert_non_null (file);
    fprintf (file, "file:\n  roots: [\"%s\"]\n", root);
    fclose (file);
    snprintf (brokers, sizeof brokers, "%s,%s", self->member [0].agents_ep,
              self->member [1].agents_ep);
    snprintf (publishes, sizeof publishes, "%s,%s",
              self->member [0].publish_ep, self->member [1].publish_ep);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--failover", "1s", "--config", config, NULL};
    assert_true (grid_start_agent (&self->member [0], "f1", "files", NULL,
                                   extra) >= 0);
    //  Five chunks (four of 256 KiB and a short one), uploaded to the
    //  active: each piece is answered once the standby has it
    size_t size = 4 * PROTO_BLOB_CHUNK_BYTES + 1000;
    unsigned char *data = (unsigned char *) malloc (size);
    assert_non_null (data);
    for (size_t index = 0; index < size; index++)
        data [index] = (unsigned char) ((index * 7919 + 13) >> 5);
    char local [400], hex [SHA256_HEX], got [SHA256_HEX];
    snprintf (local, sizeof local, "%s/blob.bin", self->dir);
    file = fopen (local, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (data, 1, size, file), size);
    fclose (file);
    sha256_hex (data, size, hex);
    free (data);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&self->member [0], &out, &err, S_WAIT_MS, "file",
                         "upload", local, NULL);
    if (code != 0)
        fprintf (stderr, "upload: %s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    //  Many side by side: the standby applies every pass as it comes
    //  (a standby slower than sync_timeout may leave the sync set for a
    //  while: it is waited for, back in sync, before the kill)
    s_upload_burst (self, 0);
    assert_true (s_wait_standby_sync (self, 0, "b"));
    char path [600];
    snprintf (path, sizeof path, "%.300s/broker.log", self->member [1].dir);
    char *log = grid_slurp (path);
    assert_null (strstr (log, "cannot apply pass"));
    free (log);

    //  The active killed: the standby takes over with the blob whole
    grid_kill (self->member [0].broker_pid, SIGKILL);
    waitpid (self->member [0].broker_pid, NULL, 0);
    self->member [0].broker_pid = 0;
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    pv_doc_t *reply = grid_call (&self->member [1], "blob.stat", "sha256",
                                 hex, NULL);
    const pv_t *blob = NULL;
    assert_true (grid_reply_ok (reply, &blob));
    bool complete = false;
    int64_t received = 0;
    pv_get_bool (pv_map_get (blob, "complete"), &complete);
    pv_get_int (pv_map_get (blob, "received"), &received);
    assert_true (complete);
    assert_int_equal (received, (int64_t) size);
    pv_doc_destroy (&reply);
    //  A file put of it on the new active: f1 fetches it from there
    char dest [500], size_text [32];
    snprintf (dest, sizeof dest, "%s/delivered.bin", root);
    snprintf (size_text, sizeof size_text, "%zu", size);
    code = grid_cli (&self->member [1], &out, &err, 3 * S_WAIT_MS, "job",
                     "run", "--target", "node:f1", "file", "put", "--path",
                     dest, "--sha256", hex, "--size", size_text, "--wait",
                     NULL);
    if (code != 0) {
        fprintf (stderr, "file put: %s%s", out, err);
        grid_dump_logs (&self->member [1]);
    }
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (grid_file_sha256 (dest, got));
    assert_string_equal (got, hex);
    reply = grid_call (&self->member [1], "blob.stat", "sha256", hex, NULL);
    assert_true (grid_reply_ok (reply, &blob));
    int64_t sent = 0;
    pv_get_int (pv_map_get (blob, "chunks_sent"), &sent);
    assert_int_equal (sent, 5);
    pv_doc_destroy (&reply);
    //  ... and the burst's
    reply = grid_call (&self->member [1], "blob.list", NULL);
    assert_true (grid_reply_ok (reply, &blob));
    assert_int_equal (pv_size (pv_map_get (blob, "blobs")), S_BURST + 1);
    pv_doc_destroy (&reply);
}

//  ---------------------------------------------------------------------
//  The active's disk full

#define S_DISK_JOBS 2000        //  Submits at most, before the disk fills
#define S_DISK_MSG 2000         //  Bytes of each job's message
#define S_DISK_CALL_MS 3000     //  A submit's answer waited for

//  Submits JOB to member A as request SEQ: its reply, or NULL when none
//  came in S_DISK_CALL_MS.
static pv_doc_t *
s_disk_submit_one (cluster_pair_t *self, pv_doc_t *job, int seq)
{
    char id [64];
    snprintf (id, sizeof id, "disk-%d", seq);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_pv (writer, pv_doc_root (job));
    pv_doc_t *reply = grid_call_raw (&self->member [0], pw_data (writer),
                                     pw_size (writer), S_DISK_CALL_MS);
    pw_destroy (&writer);
    return reply;
}

//  Submits jobs of S_DISK_MSG bytes to member A until one is not answered
//  ok or LIMIT were; the ids answered ok go to ACKED from *COUNT_P on.
//  Returns true when one was not answered ok.
static bool
s_disk_submit (cluster_pair_t *self, char **acked, size_t *count_p,
               size_t limit)
{
    size_t yaml_size = S_DISK_MSG + 200;
    char *yaml = (char *) malloc (yaml_size);
    assert_non_null (yaml);
    int len = snprintf (yaml, yaml_size, "target: node:n1\ntasks:\n  - "
                        "{backend: test, action: echo, params: {msg: ");
    memset (yaml + len, 'x', S_DISK_MSG);
    snprintf (yaml + len + S_DISK_MSG, yaml_size - (size_t) len - S_DISK_MSG,
              "}}\n");
    pv_doc_t *job = NULL;
    char err [256];
    assert_int_equal (conf_parse (yaml, strlen (yaml), &job, err, sizeof err),
                      0);
    static int seq = 0;
    bool failed = false;
    for (size_t sent = 0; sent < limit && *count_p < S_DISK_JOBS && !failed;
         sent++) {
        pv_doc_t *reply = s_disk_submit_one (self, job, seq++);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data))
            acked [(*count_p)++] = pv_strdup (pv_map_get (data, "job"));
        else {
            char *code = reply ? grid_reply_code (reply) : NULL;
            printf ("    submit %zu: %s\n", *count_p, code ? code
                                                        : "no answer");
            free (code);
            failed = true;
        }
        pv_doc_destroy (&reply);
    }
    free (yaml);
    pv_doc_destroy (&job);
    return failed;
}

//  The members first, then member A's tmpfs (its data dir), then the
//  rest.
static int
s_disk_teardown (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    char disk [400];
    snprintf (disk, sizeof disk, "%s/broker-data", self->member [0].dir);
    for (int which = 0; which < 2; which++)
        if (self->member [which].dir [0])
            grid_stop_broker (&self->member [which], true);
    umount2 (disk, MNT_DETACH);
    return cluster_pair_teardown (state);
}

static void
test_cluster_active_disk_full (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    if (geteuid () != 0) {
        printf ("    skipped: mounting a small tmpfs needs root\n");
        return;
    }
    //  A's data dir is a tmpfs of 4 MiB
    char disk [400], filler [420];
    snprintf (disk, sizeof disk, "%s/broker-data", self->member [0].dir);
    assert_int_equal (mkdir (disk, 0700), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m")
        != 0) {
        printf ("    skipped: cannot mount a tmpfs: %s\n", strerror (errno));
        return;
    }
    s_cluster_up (self);
    //  Jobs answered ok before the disk fills
    char *acked [S_DISK_JOBS];
    size_t count = 0;
    assert_false (s_disk_submit (self, acked, &count, 20));
    size_t before_fill = count;
    //  Nothing left on A's disk
    snprintf (filler, sizeof filler, "%s/filler", disk);
    FILE *file = fopen (filler, "wb");
    assert_non_null (file);
    static char chunk [4096];
    while (fwrite (chunk, 1, sizeof chunk, file) == sizeof chunk)
        ;
    fclose (file);
    //  Jobs: soon one needs a page the disk has no room for, and the
    //  commit of its pass, shipped already, fails
    bool failed = s_disk_submit (self, acked, &count, S_DISK_JOBS);
    size_t after_fill = count - before_fill;
    if (!failed)
        cluster_pair_dump (self);
    assert_true (failed);
    assert_true (cluster_pair_wait_log (self, 0, "its store could not "
                                        "commit a pass already sent to its "
                                        "standbys"));
    //  B takes over, and holds every job A answered ok
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    for (size_t index = 0; index < count; index++) {
        pv_doc_t *reply = grid_call (&self->member [1], "job.get", "job",
                                     acked [index], NULL);
        if (!grid_reply_ok (reply, NULL))
            fail_msg ("job %s, answered ok by the former active, is not on "
                      "the new one", acked [index]);
        pv_doc_destroy (&reply);
        free (acked [index]);
    }
    //  A answers nothing ok any more
    char *code = cluster_pair_status_code (self, 0);
    assert_true (!code || strcmp (code, "ok") != 0);
    free (code);
    size_t late = count;
    assert_true (s_disk_submit (self, acked, &late, 1));
    assert_int_equal (late, count);
    printf ("    %zu jobs answered ok before the active's disk filled, %zu "
            "after, the next one failed\n", before_fill, after_fill);
}

//  ---------------------------------------------------------------------
//  A standby's map full

//  How many times member WHICH's log holds TEXT.
static int
s_log_count (cluster_pair_t *self, int which, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", self->member [which].dir);
    char *log = grid_slurp (path);
    int count = 0;
    for (const char *at = strstr (log, text); at;
         at = strstr (at + 1, text))
        count++;
    free (log);
    return count;
}

//  Waits until member WHICH's log holds TEXT COUNT times.
static bool
s_wait_log_count (cluster_pair_t *self, int which, const char *text,
                  int count)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_log_count (self, which, text) < count
           && grid_now_ms () < deadline)
        usleep (100 * 1000);
    if (s_log_count (self, which, text) >= count)
        return true;
    fprintf (stderr, "broker %s logged '%s' %d times, not %d\n",
             cluster_pair_names [which], text,
             s_log_count (self, which, text), count);
    cluster_pair_dump (self);
    return false;
}

static void
test_cluster_standby_map_full (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    //  B's map: 1 MiB, at its ceiling
    const char *small [] = {"--map-size-mb", "1", "--max-map-size-mb", "1",
                            NULL};
    s_cluster_up_with (self, small);
    char **acked = (char **) calloc (S_DISK_JOBS, sizeof (char *));
    assert_non_null (acked);
    size_t count = 0;
    while (count < S_DISK_JOBS - 100
           && s_log_count (self, 1, "cannot take the active's passes") == 0)
        assert_false (s_disk_submit (self, acked, &count, 20));
    assert_true (cluster_pair_wait_log (self, 1, "cannot take the active's "
                                        "passes"));
    assert_true (cluster_pair_wait_log (self, 1, "1 MiB at most, reached"));
    //  Out of the sync set, the active answers alone
    assert_true (cluster_pair_wait_log (self, 0, "the sync key no longer "
                                        "names standby b"));
    size_t full_at = count;
    assert_false (s_disk_submit (self, acked, &count, 20));
    //  The standby asks again now and then, not in a loop (it used to
    //  ask again at once, thousands of times a second)
    int hellos = s_log_count (self, 0, "standby b follows from pass");
    zclock_sleep (2500);
    int more = s_log_count (self, 0, "standby b follows from pass") - hellos;
    assert_true (more <= 10);
    assert_true (s_log_count (self, 1, "cannot take the active's passes")
                 == 1);
    //  Given room, it catches up
    grid_stop_broker (&self->member [1], false);
    const char *room [] = {"--map-size-mb", "1", "--max-map-size-mb", "64",
                           NULL};
    self->spawn_args = room;
    cluster_pair_spawn (self, 1);
    self->spawn_args = NULL;
    assert_true (s_wait_log_count (self, 0, "standby b is in sync (the sync "
                                   "key names it)", 2));
    //  ... and holds every job answered ok
    char *out = NULL, *err = NULL;
    int code = grid_cli (&self->member [0], &out, &err, 10000, "cluster",
                         "switchover", "--to", "b", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    //  (a status asked while B restarts as the active would wait out its
    //  whole timeout)
    assert_true (cluster_pair_wait_log (self, 1, "b is the active"));
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.list", "all", 1);
    pw_str (writer, "limit");
    pw_int (writer, 10000);
    pv_doc_t *reply = grid_call_raw (&self->member [1], pw_data (writer),
                                     pw_size (writer), GRID_CALL_MS);
    pw_destroy (&writer);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    const pv_t *jobs = pv_map_get (data, "jobs");
    zhashx_t *held = zhashx_new ();
    for (size_t index = 0; index < pv_size (jobs); index++) {
        char *id = pv_strdup (pv_map_get (pv_array_at (jobs, index), "id"));
        if (id)
            zhashx_insert (held, id, (void *) 1);
        free (id);
    }
    pv_doc_destroy (&reply);
    for (size_t index = 0; index < count; index++) {
        if (!zhashx_lookup (held, acked [index]))
            fail_msg ("job %s, answered ok, is not on the standby that "
                      "caught up", acked [index]);
        free (acked [index]);
    }
    zhashx_destroy (&held);
    free (acked);
    printf ("    the standby's map was full after %zu jobs; %d hellos in "
            "2.5 s after; %zu jobs on the standby once it had room\n",
            full_at, more, count);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_cluster_bad_config_refused,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_standby_says_not_leader,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_standby_faces,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_redirect_loop_bounded,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (
            test_cluster_redirect_of_lower_epoch_dropped, cluster_pair_setup,
            cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_failover_after_sigkill,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_stopped_active_demotes,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_status_and_switchover,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_blob_after_failover,
                                         cluster_pair_setup, cluster_pair_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_active_disk_full,
                                         cluster_pair_setup, s_disk_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_standby_map_full,
                                         cluster_pair_setup,
                                         cluster_pair_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
