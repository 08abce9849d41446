/*  =========================================================================
    test_it_cluster_keys - a broker cluster with CURVE on every endpoint:
    two gridbrokers that share one broker key pair (docs/HA.md), agents
    that trust it at each member's endpoint, gridcli with both members,
    on a real etcd (loopback)

    - Redirects with CURVE: an agent whose list starts with the standby is
      moved to the active by its redirect; gridcli given the standby
      first follows not_leader; after a SIGKILL of the active the agents
      are welcomed by the new one, and an agent that starts with the
      former active (now a standby) is redirected to the new one.
    - The broker key rotated in a cluster: started on the active, the
      active killed in the overlap; the new active takes the rotation up
      from its store (the same next key), the agents come back on the old
      key and acknowledge the next one again, the rotation retires on the
      new active (its files hold the new pair), the agents come back on
      the new key, nothing of the running job is lost; the former active,
      back as a standby before the retirement, serves its endpoints with
      the new key once its store says so (an agent that knows only the
      new key is redirected by it); handed the lead back (switchover),
      it serves with the new key, which its files took from its store.
    - Members with key pairs of their own: a rotation is refused.
    =========================================================================
*/

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "lib/etcdproc.h"
#include "lib/harness.h"

#define S_WAIT_MS 30000

typedef struct {
    char dir [300];
    etcdproc_t etcd;
    grid_t member [2];           //  Brokers "a" and "b", each its own dir
    char config [2][400];
    char repl_ep [2][400];
    char agent_key [400];        //  The agents' copy of the broker key
    bool own_keys;               //  Each member its own pair (peers' key:
                                 //  the other's public file)
} s_state_t;

static const char *s_names [2] = {"a", "b"};

static void
s_write_config (s_state_t *self, int which)
{
    int other = 1 - which;
    FILE *file = fopen (self->config [which], "w");
    assert_non_null (file);
    //  Every peer's key is the one pair the members share
    fprintf (file,
             "ha:\n"
             "  cluster: lab\n"
             "  name: %s\n"
             "  etcd: %s\n"
             "  ttl: 2s\n"
             "  replicate: %s\n"
             "  sync_timeout: 1s\n"
             "  client: %s\n"
             "  peers:\n"
             "    - name: %s\n"
             "      client: %s\n"
             "      replicate: %s\n"
             "      key: %s\n"
             "      agents: %s\n",
             s_names [which], self->etcd.url, self->repl_ep [which],
             self->member [which].client_ep, s_names [other],
             self->member [other].client_ep, self->repl_ep [other],
             self->member [self->own_keys ? other : which].broker_key,
             self->member [other].agents_ep);
    fclose (file);
}

static void
s_copy (const char *from, const char *to)
{
    char command [1000];
    snprintf (command, sizeof command, "cp -p '%s' '%s'", from, to);
    assert_int_equal (system (command), 0);
}

static int
s_setup (void **state)
{
    s_state_t *self = (s_state_t *) calloc (1, sizeof *self);
    snprintf (self->dir, sizeof self->dir, "/tmp/grid-test-ckeys-XXXXXX");
    if (!mkdtemp (self->dir))
        return -1;
    *state = self;
    if (!etcdproc_available ())
        return 0;
    if (etcdproc_start (&self->etcd, self->dir) != 0)
        return -1;
    char dir [sizeof self->dir];
    snprintf (dir, sizeof dir, "%s", self->dir);
    for (int which = 0; which < 2; which++) {
        if (grid_init (&self->member [which]) != 0)
            return -1;
        snprintf (self->config [which], sizeof self->config [which],
                  "%.280s/%s.yaml", dir, s_names [which]);
        char member [sizeof self->member [which].dir];
        snprintf (member, sizeof member, "%s", self->member [which].dir);
        snprintf (self->repl_ep [which], sizeof self->repl_ep [which],
                  "ipc://%.300s/repl.sock", member);
    }
    //  One broker pair and one admin for both members, as on two hosts
    //  given the same files
    char from [400], to [400];
    const char *files [] = {"broker.key", "broker.key_secret", "admin.key",
                            "admin.key_secret"};
    for (size_t index = 0; index < 4; index++) {
        snprintf (from, sizeof from, "%.300s/%s",
                  self->member [0].keys_dir, files [index]);
        snprintf (to, sizeof to, "%.300s/%s", self->member [1].keys_dir,
                  files [index]);
        s_copy (from, to);
    }
    snprintf (self->agent_key, sizeof self->agent_key,
              "%.300s/agents-broker.key", self->member [0].keys_dir);
    s_copy (self->member [0].broker_key, self->agent_key);
    for (int which = 0; which < 2; which++)
        s_write_config (self, which);
    return 0;
}

static int
s_teardown (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    for (int which = 0; which < 2; which++)
        if (self->member [which].dir [0])
            grid_stop (&self->member [which]);
    etcdproc_stop (&self->etcd, true);
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", self->dir);
    if (system (command) != 0)
        fprintf (stderr, "could not remove %s\n", self->dir);
    free (self);
    return 0;
}

static bool
s_skip (s_state_t *self)
{
    if (self->etcd.pid > 0)
        return false;
    printf ("    skipped: etcd is not installed (make test-deps)\n");
    return true;
}

static void
s_spawn (s_state_t *self, int which)
{
    const char *extra [] = {"--config", self->config [which], NULL};
    assert_int_equal (grid_spawn_broker (&self->member [which], extra), 0);
}

static void
s_dump (s_state_t *self)
{
    grid_dump_logs (&self->member [0]);
    grid_dump_logs (&self->member [1]);
}

//  Waits until member WHICH answers status with CODE ("ok" when it
//  serves).
static bool
s_wait_code (s_state_t *self, int which, const char *code)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    char *got = NULL;
    while (grid_now_ms () < deadline) {
        free (got);
        got = NULL;
        pv_doc_t *reply = grid_call (&self->member [which], "status", NULL);
        if (reply)
            got = grid_reply_ok (reply, NULL) ? strdup ("ok")
                                              : grid_reply_code (reply);
        pv_doc_destroy (&reply);
        if (got && strcmp (got, code) == 0) {
            free (got);
            return true;
        }
        usleep (100 * 1000);
    }
    fprintf (stderr, "broker %s answers %s, not %s\n", s_names [which],
             got ? got : "nothing", code);
    free (got);
    s_dump (self);
    return false;
}

//  Waits until PATH holds TEXT.
static bool
s_wait_file (s_state_t *self, const char *path, const char *text)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        char *log = grid_slurp (path);
        bool found = log && strstr (log, text) != NULL;
        free (log);
        if (found)
            return true;
        usleep (100 * 1000);
    }
    fprintf (stderr, "%s never held '%s'\n", path, text);
    s_dump (self);
    return false;
}

static bool
s_wait_broker_log (s_state_t *self, int which, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%.300s/broker.log",
              self->member [which].dir);
    return s_wait_file (self, path, text);
}

static bool
s_wait_agent_log (s_state_t *self, const char *id, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%.300s/agent-%s.log",
              self->member [0].dir, id);
    return s_wait_file (self, path, text);
}

//  A and B up, A the active, B in its sync set.
static void
s_cluster_up (s_state_t *self)
{
    s_spawn (self, 0);
    assert_true (s_wait_code (self, 0, "ok"));
    s_spawn (self, 1);
    assert_true (s_wait_code (self, 1, "not_leader"));
    assert_true (s_wait_broker_log (self, 0, "standby b is in sync"));
}

//  Starts agent ID (its processes under member 0) with the members'
//  endpoints in the order FIRST, then the other, each with the broker key.
static int
s_agent (s_state_t *self, const char *id, int first)
{
    int second = 1 - first;
    char brokers [800], publishes [800], keys [900];
    snprintf (brokers, sizeof brokers, "%s,%s",
              self->member [first].agents_ep, self->member [second].agents_ep);
    snprintf (publishes, sizeof publishes, "%s,%s",
              self->member [first].publish_ep,
              self->member [second].publish_ep);
    snprintf (keys, sizeof keys, "%s,%s", self->agent_key, self->agent_key);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--broker-key", keys, "--failover", "60s", NULL};
    int slot = grid_spawn_agent (&self->member [0], id, "web", NULL, extra);
    assert_true (slot >= 0);
    return slot;
}

//  A job of one echo on NODE submitted to member WHICH completes there.
static void
s_job_completes (s_state_t *self, int which, const char *node)
{
    char yaml [300];
    snprintf (yaml, sizeof yaml, "target: node:%s\ntasks:\n  - {backend: "
              "test, action: echo, params: {msg: hi}}\n", node);
    char *id = grid_submit_id (&self->member [which], yaml);
    assert_non_null (id);
    pv_doc_t *doc = grid_wait_job (&self->member [which], id, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    if (!grid_str_is (data, "status", "completed"))
        s_dump (self);
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&doc);
    free (id);
}

static void
test_cluster_keys_redirects (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    s_cluster_up (self);
    //  The standby first: its redirect moves the agent to the active,
    //  long before its failover (60 s)
    s_agent (self, "n1", 1);
    assert_true (grid_wait_node (&self->member [0], "n1", "online",
                                 S_WAIT_MS));
    assert_true (s_wait_agent_log (self, "n1", "is a standby: moving to the "
                                   "active"));
    //  gridcli given the standby first follows its not_leader
    char both [800];
    snprintf (both, sizeof both, "%s,%s", self->member [1].client_ep,
              self->member [0].client_ep);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&self->member [0], &out, &err, 20000, "--broker",
                         both, "status", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    s_job_completes (self, 0, "n1");

    //  The active killed: b takes over, n1 is welcomed there
    grid_stop_broker (&self->member [0], true);
    long long killed = grid_now_ms ();
    assert_true (s_wait_code (self, 1, "ok"));
    assert_true (grid_wait_node (&self->member [1], "n1", "online",
                                 S_WAIT_MS));
    printf ("    n1 online on the new active %lld ms after the kill\n",
            grid_now_ms () - killed);
    s_job_completes (self, 1, "n1");
    //  a back, a standby; an agent that starts with it is redirected
    s_spawn (self, 0);
    assert_true (s_wait_code (self, 0, "not_leader"));
    assert_true (s_wait_broker_log (self, 1, "standby a is in sync"));
    s_agent (self, "n2", 0);
    assert_true (grid_wait_node (&self->member [1], "n2", "online",
                                 S_WAIT_MS));
    assert_true (s_wait_agent_log (self, "n2", "is a standby: moving to the "
                                   "active"));
    //  gridcli given the former active first follows it to b
    snprintf (both, sizeof both, "%s,%s", self->member [0].client_ep,
              self->member [1].client_ep);
    code = grid_cli (&self->member [0], &out, &err, 20000, "--broker", both,
                     "node", "list", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "n2"));
    free (out);
    free (err);
}

//  An integer of member WHICH's broker.keys answer (-1: none).
static int64_t
s_keys_int (s_state_t *self, int which, const char *name)
{
    pv_doc_t *reply = grid_call (&self->member [which], "broker.keys", NULL);
    const pv_t *data = NULL;
    int64_t value = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (data, name), &value);
    pv_doc_destroy (&reply);
    return value;
}

static bool
s_wait_keys_int (s_state_t *self, int which, const char *name, int64_t want)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        if (s_keys_int (self, which, name) == want)
            return true;
        usleep (100 * 1000);
    }
    fprintf (stderr, "broker %s: broker.keys %s is %lld, not %lld\n",
             s_names [which], name,
             (long long) s_keys_int (self, which, name), (long long) want);
    s_dump (self);
    return false;
}

static void
test_cluster_keys_rotation (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    char why [256], old [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (self->member [0].broker_key, old, why,
                                        sizeof why), 0);
    s_cluster_up (self);
    //  r3 registered, then offline: the overlap stays open until it is
    //  back
    int r3 = s_agent (self, "r3", 0);
    assert_true (grid_wait_node (&self->member [0], "r3", "online",
                                 S_WAIT_MS));
    grid_stop_agent (&self->member [0], r3, false);
    s_agent (self, "r1", 0);
    s_agent (self, "r2", 1);
    assert_true (grid_wait_node (&self->member [0], "r1", "online",
                                 S_WAIT_MS));
    assert_true (grid_wait_node (&self->member [0], "r2", "online",
                                 S_WAIT_MS));
    char *out = NULL, *err = NULL;
    int code = grid_cli (&self->member [0], &out, &err, 20000, "key",
                         "rotate-broker", "--deadline", "10m", NULL);
    if (code != 0)
        fprintf (stderr, "rotate-broker: %s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    char next_file [420], next [KEYS_TEXT_SIZE];
    snprintf (next_file, sizeof next_file, "%s.next",
              self->member [0].broker_key);
    assert_int_equal (keys_read_public (next_file, next, why, sizeof why), 0);
    assert_true (s_wait_keys_int (self, 0, "acknowledged", 2));
    char *job = grid_submit_id (&self->member [0],
        "target: node:r1,r2\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 2}}\n"
        "  - {backend: test, action: echo, params: {msg: two}}\n");
    assert_non_null (job);

    //  The active killed in the overlap: b serves the old key and goes
    //  on with the same rotation, which its store held
    grid_stop_broker (&self->member [0], true);
    long long killed = grid_now_ms ();
    assert_true (s_wait_code (self, 1, "ok"));
    pv_doc_t *keys = grid_call (&self->member [1], "broker.keys", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (keys, &data));
    assert_true (grid_str_is (data, "key", old));
    assert_true (grid_str_is (data, "next", next));
    pv_doc_destroy (&keys);
    assert_true (grid_wait_node (&self->member [1], "r1", "online",
                                 S_WAIT_MS));
    assert_true (grid_wait_node (&self->member [1], "r2", "online",
                                 S_WAIT_MS));
    printf ("    r1 and r2 online on the new active %lld ms after the "
            "kill\n", grid_now_ms () - killed);
    assert_true (s_wait_keys_int (self, 1, "acknowledged", 2));

    //  a back, a standby (on the old key), in sync with b
    s_spawn (self, 0);
    assert_true (s_wait_code (self, 0, "not_leader"));
    assert_true (s_wait_broker_log (self, 1, "standby a is in sync"));

    //  r3 back (on the old key, still current): every node has the next
    //  key and b retires the old one
    s_agent (self, "r3", 1);
    assert_true (s_wait_keys_int (self, 1, "retired", 1));
    char now [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (self->member [1].broker_key, now, why,
                                        sizeof why), 0);
    assert_string_equal (now, next);
    const char *ids [] = {"r1", "r2", "r3", "r4"};
    for (int index = 0; index < 3; index++)
        assert_true (grid_wait_node (&self->member [1], ids [index],
                                     "online", S_WAIT_MS));
    pv_doc_t *doc = grid_wait_job (&self->member [1], job, S_WAIT_MS);
    assert_true (grid_reply_ok (doc, &data));
    if (!grid_str_is (data, "status", "completed"))
        s_dump (self);
    assert_true (grid_str_is (data, "status", "completed"));
    for (int step = 0; step < 2; step++) {
        assert_true (grid_str_is (grid_cell (data, step, "r1"), "status",
                                  "success"));
        assert_true (grid_str_is (grid_cell (data, step, "r2"), "status",
                                  "success"));
    }
    pv_doc_destroy (&doc);
    free (job);

    //  The standby a serves its endpoints with the new key: an agent that
    //  knows only that one, a first in its list, is redirected to b
    char line [200];
    snprintf (line, sizeof line, "serves its standby endpoints with the "
              "broker's key %s", next);
    assert_true (s_wait_broker_log (self, 0, line));
    char only_new [400];
    snprintf (only_new, sizeof only_new, "%.300s/agents-new.key",
              self->member [0].keys_dir);
    s_copy (next_file, only_new);
    snprintf (self->agent_key, sizeof self->agent_key, "%s", only_new);
    s_agent (self, "r4", 0);
    assert_true (grid_wait_node (&self->member [1], "r4", "online",
                                 S_WAIT_MS));
    assert_true (s_wait_agent_log (self, "r4", "is a standby: moving to the "
                                   "active"));
    //  Handed the lead, a serves the new key (its store said the rotation
    //  retired: its files take it) and the agents follow
    code = grid_cli (&self->member [1], &out, &err, 20000, "cluster",
                     "switchover", NULL);
    if (code != 0)
        fprintf (stderr, "switchover: %s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (s_wait_code (self, 0, "ok"));
    assert_int_equal (keys_read_public (self->member [0].broker_key, now, why,
                                        sizeof why), 0);
    assert_string_equal (now, next);
    for (int index = 0; index < 4; index++)
        assert_true (grid_wait_node (&self->member [0], ids [index],
                                     "online", S_WAIT_MS));
    s_job_completes (self, 0, "r3");
}

//  Members with keys of their own: a rotation is refused with a clear
//  error (it needs the pair they share), nothing written.
static void
test_cluster_keys_own_pairs_refused (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    char why [256], text [KEYS_TEXT_SIZE];
    assert_int_equal (keys_generate (self->member [1].keys_dir, "broker",
                                     true, NULL, text, why, sizeof why), 0);
    self->own_keys = true;
    for (int which = 0; which < 2; which++)
        s_write_config (self, which);
    s_cluster_up (self);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&self->member [0], &out, &err, 20000, "key",
                         "rotate-broker", NULL);
    assert_int_not_equal (code, 0);
    assert_non_null (strstr (err, "keys of their own"));
    free (out);
    free (err);
    char next_file [420];
    snprintf (next_file, sizeof next_file, "%s.next",
              self->member [0].broker_key);
    assert_int_not_equal (access (next_file, F_OK), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_cluster_keys_redirects, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_keys_rotation, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_cluster_keys_own_pairs_refused,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
