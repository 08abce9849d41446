/*  =========================================================================
    test_it_cluster_load - a broker cluster with a store that holds
    something, on a real etcd (loopback)

    One cluster for the whole suite (its tests run in order, each from
    where the one before left it: starting a cluster and filling a store
    is what takes the time):

    - An empty standby (b) joins an active (a) whose store holds 10,000
      jobs: it catches up from a snapshot while those jobs run and
      complete on a (the copy is taken apart from a's loop, which ships
      passes meanwhile), its store then holds exactly what a's holds
      (record by record, once every job ended), it takes
      over when a is killed, and answers job.get for a sample of those
      jobs.
    - a, back as a standby, catches up (a snapshot again); a switchover to
      it while a client submits: every submit answered ok is on the new
      active, nothing acknowledged is lost.
    =========================================================================
*/

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../client/client.h"
#include "../proto/proto.h"
#include "../store/store.h"
#include "lib/cluster.h"

#define S_WAIT_MS 30000
#define S_JOBS 10000            //  In the store the standby joins
#define S_WINDOW 500            //  Submits in flight while filling it
#define S_SAMPLE 50             //  Of them read back on the new active

static bool s_failed_over;        //  The first test left b the active

//  The brokers take more submits in flight than the harness's default
static const char *const s_spawn_args [] = {"--max-pending", "20000", NULL};

//  cmocka group setup: the cluster of lib/cluster.h, with waits and a
//  sync_timeout long enough for a snapshot of the whole store
static int
s_setup (void **state)
{
    if (cluster_pair_setup (state) != 0)
        return -1;
    cluster_pair_t *self = (cluster_pair_t *) *state;
    self->sync_timeout = "2s";
    self->spawn_args = s_spawn_args;
    self->wait_ms = S_WAIT_MS;
    if (self->etcd.pid > 0)
        cluster_pair_write_configs (self);
    return 0;
}

//  Agent ID, knowing both members: its slot.
static int
s_agent (cluster_pair_t *self, const char *id)
{
    char brokers [800], publishes [800];
    snprintf (brokers, sizeof brokers, "%s,%s", self->member [0].agents_ep,
              self->member [1].agents_ep);
    snprintf (publishes, sizeof publishes, "%s,%s",
              self->member [0].publish_ep, self->member [1].publish_ep);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            "--failover", "1s", NULL};
    int slot = grid_start_agent (&self->member [0], id, "web", NULL, extra);
    assert_true (slot >= 0);
    return slot;
}

//  Writes a job.submit of `test echo` on n1 with request id ID.
static void
s_write_submit (pw_t *writer, const char *id)
{
    pw_reset (writer);
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, 2);
    pw_str (writer, "scope");
    pw_str (writer, "node");
    pw_str (writer, "value");
    pw_str (writer, "n1");
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, "test");
    pw_str (writer, "action");
    pw_str (writer, "echo");
    pw_str (writer, "params");
    pw_map (writer, 1);
    pw_str (writer, "msg");
    pw_str (writer, "load");
}

//  The job id of an ok submit reply (caller frees), or NULL.
static char *
s_submitted (const pv_doc_t *doc)
{
    const pv_t *root = pv_doc_root (doc);
    if (!pv_str_eq (pv_map_get (root, "type"), "ok"))
        return NULL;
    return pv_strdup (pv_map_get (pv_map_get (root, "data"), "job"));
}

//  True when member WHICH answers job.get for JOB ok.
static bool
s_has_job (cluster_pair_t *self, int which, const char *job)
{
    pv_doc_t *reply = grid_call (&self->member [which], "job.get", "job",
                                 job, NULL);
    bool ok = reply && grid_reply_ok (reply, NULL);
    if (!ok && reply)
        fprintf (stderr, "job %s not on %s\n", job, cluster_pair_names [which]);
    pv_doc_destroy (&reply);
    return ok;
}

//  Submits pipelined to ENDPOINT until STOP: the active's passes while a
//  standby joins.
typedef struct {
    const char *endpoint;
    atomic_bool stop;
    size_t ok, refused;
} s_submitter_t;

static void *
s_submitter (void *args)
{
    s_submitter_t *submitter = (s_submitter_t *) args;
    client_t *client = client_new (submitter->endpoint);
    pw_t *writer = pw_new ();
    size_t sent = 0, answered = 0;
    while (client && (!atomic_load (&submitter->stop) || answered < sent)) {
        while (!atomic_load (&submitter->stop) && sent - answered < 32) {
            char id [32];
            snprintf (id, sizeof id, "join-%zu", sent);
            s_write_submit (writer, id);
            if (client_send (client, pw_data (writer), pw_size (writer)) != 0)
                break;
            sent++;
        }
        pv_doc_t *doc = client_recv (client, S_WAIT_MS);
        if (!doc)
            break;
        char *job = s_submitted (doc);
        if (job)
            submitter->ok++;
        else
            submitter->refused++;
        free (job);
        pv_doc_destroy (&doc);
        answered++;
    }
    submitter->refused += sent - answered;
    pw_destroy (&writer);
    client_destroy (&client);
    return NULL;
}

//  How many of member WHICH's jobs are in STATUS (job.list's by_status).
static int64_t
s_jobs_in (cluster_pair_t *self, int which, const char *status)
{
    pv_doc_t *reply = grid_call (&self->member [which], "job.list", NULL);
    const pv_t *data = NULL;
    int64_t count = -1;
    if (grid_reply_ok (reply, &data)
        && pv_get_int (pv_map_get (pv_map_get (data, "by_status"), status),
                       &count) != 0)
        count = -1;
    pv_doc_destroy (&reply);
    return count;
}

//  Every database of the stores in directories ONE and TWO, key by key:
//  true when they hold the same records (else, with SAY, says the first
//  difference).
static bool
s_same_stores (const char *one, const char *two, size_t *records, bool say)
{
    char err [512];
    store_t *stores [2] = {store_open (one, 0, 0, err, sizeof err), NULL};
    if (stores [0])
        stores [1] = store_open (two, 0, 0, err, sizeof err);
    if (!stores [1]) {
        fprintf (stderr, "cannot open a store: %s\n", err);
        store_destroy (&stores [0]);
        return false;
    }
    store_txn_t *txns [2] = {store_begin (stores [0], false),
                             store_begin (stores [1], false)};
    bool same = txns [0] && txns [1];
    *records = 0;
    for (int db = 0; same && db < STORE_DB_COUNT; db++) {
        store_cursor_t *cursors [2] = {
            store_cursor_new (txns [0], (store_db_t) db),
            store_cursor_new (txns [1], (store_db_t) db)};
        same = cursors [0] && cursors [1];
        while (same) {
            const void *keys [2], *values [2];
            size_t key_lens [2], value_lens [2];
            int rcs [2];
            for (int at = 0; at < 2; at++)
                rcs [at] = store_cursor_next (cursors [at], &keys [at],
                                              &key_lens [at], &values [at],
                                              &value_lens [at]);
            if (rcs [0] != rcs [1]) {
                if (say)
                        fprintf (stderr, "%s: one store has more records\n",
                             store_db_name ((store_db_t) db));
                same = false;
            }
            if (!same || rcs [0] != 0)
                break;
            if (key_lens [0] != key_lens [1] || value_lens [0] != value_lens [1]
                || memcmp (keys [0], keys [1], key_lens [0]) != 0
                || memcmp (values [0], values [1], value_lens [0]) != 0) {
                if (say)
                    fprintf (stderr, "%s: the stores differ at a key of %zu "
                             "bytes\n", store_db_name ((store_db_t) db),
                             key_lens [0]);
                same = false;
            }
            (*records)++;
        }
        store_cursor_destroy (&cursors [0]);
        store_cursor_destroy (&cursors [1]);
    }
    for (int at = 0; at < 2; at++) {
        store_abort (&txns [at]);
        store_destroy (&stores [at]);
    }
    return same;
}

static void
test_cluster_empty_standby_joins_a_big_store (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    cluster_pair_spawn (self, 0);
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    int agent = s_agent (self, "n1");
    //  n1's one slot taken for the whole test: every other job waits
    char *busy = grid_submit_id (&self->member [0],
                                 "target: {scope: node, value: n1}\n"
                                 "tasks:\n  - {backend: test, action: sleep, "
                                 "params: {seconds: 3600}}\n");
    assert_non_null (busy);
    //  10,000 submits pipelined over one DEALER
    client_t *client = client_new (self->member [0].client_ep);
    assert_non_null (client);
    pw_t *writer = pw_new ();
    char **sample = (char **) calloc (S_SAMPLE, sizeof (char *));
    size_t sent = 0, answered = 0, refused = 0, sampled = 0;
    while (answered < S_JOBS) {
        while (sent < S_JOBS && sent - answered < S_WINDOW) {
            char id [32];
            snprintf (id, sizeof id, "fill-%zu", sent);
            s_write_submit (writer, id);
            assert_int_equal (client_send (client, pw_data (writer),
                                           pw_size (writer)), 0);
            sent++;
        }
        pv_doc_t *doc = client_recv (client, S_WAIT_MS);
        assert_non_null (doc);
        char *job = s_submitted (doc);
        if (!job && refused++ == 0)
            pv_write_json (pv_doc_root (doc), stderr, 0);
        else
        if (answered % (S_JOBS / S_SAMPLE) == 0 && sampled < S_SAMPLE)
            sample [sampled++] = job;
        else
            free (job);
        answered++;
        pv_doc_destroy (&doc);
    }
    client_destroy (&client);
    pw_destroy (&writer);
    assert_int_equal (refused, 0);
    //  n1 is freed: the 10,000 jobs run, and complete while an empty
    //  standby joins (a snapshot, then in sync) and a client submits more
    pv_doc_t *cancel = grid_call (&self->member [0], "job.cancel", "job",
                                  busy, NULL);
    assert_true (grid_reply_ok (cancel, NULL));
    pv_doc_destroy (&cancel);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_jobs_in (self, 0, "completed") < 1 && grid_now_ms () < deadline)
        usleep (10 * 1000);
    s_submitter_t submitter = {.endpoint = self->member [0].client_ep};
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_submitter, &submitter),
                      0);
    cluster_pair_spawn (self, 1);
    assert_true (cluster_pair_wait_log (self, 1, "installed a snapshot"));
    assert_true (cluster_pair_wait_log (self, 0, "standby b is in sync"));
    atomic_store (&submitter.stop, true);
    pthread_join (thread, NULL);
    assert_int_equal (submitter.refused, 0);
    //  The copy was taken while a's loop went on: it committed and
    //  shipped passes (those jobs' results, the submits) before the copy
    //  was whole
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", self->member [0].dir);
    char *log = grid_slurp (path);
    const char *taken = strstr (log, "while the active served on (");
    assert_non_null (taken);
    unsigned long meanwhile = strtoul (taken + strlen ("while the active "
                                                       "served on ("),
                                       NULL, 10);
    free (log);
    printf ("    %lu passes shipped while the snapshot's copy was taken; "
            "%zu submits answered ok while b joined\n", meanwhile,
            submitter.ok);
    assert_true (meanwhile > 0);
    //  n1 stopped, a is soon idle: b's store then holds exactly what a's
    //  holds
    pid_t n1 = self->member [0].agent_pids [agent];
    assert_int_equal (grid_kill (n1, SIGSTOP), 0);
    char dirs [2][400];
    for (int which = 0; which < 2; which++)
        snprintf (dirs [which], sizeof dirs [which], "%.300s/broker-data",
                  self->member [which].dir);
    bool same = false;
    size_t records = 0;
    deadline = grid_now_ms () + S_WAIT_MS;
    while (!same && grid_now_ms () < deadline) {
        same = s_same_stores (dirs [0], dirs [1], &records,
                              grid_now_ms () + 300 > deadline);
        if (!same)
            usleep (200 * 1000);
    }
    if (!same)
        cluster_pair_dump (self);
    assert_true (same);
    printf ("    the standby's store equals the active's: %zu records\n",
            records);
    assert_int_equal (grid_kill (n1, SIGCONT), 0);
    //  ... and takes over with those jobs
    grid_kill (self->member [0].broker_pid, SIGKILL);
    waitpid (self->member [0].broker_pid, NULL, 0);
    self->member [0].broker_pid = 0;
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    for (size_t at = 0; at < sampled; at++) {
        assert_true (s_has_job (self, 1, sample [at]));
        free (sample [at]);
    }
    assert_true (s_has_job (self, 1, busy));
    free (sample);
    free (busy);
    //  The whole store came over
    pv_doc_t *reply = grid_call (&self->member [1], "job.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t total = 0;
    assert_int_equal (pv_get_int (pv_map_get (data, "total"), &total), 0);
    assert_true (total >= S_JOBS + 1);
    pv_doc_destroy (&reply);
    s_failed_over = true;
}

typedef struct {
    grid_t *grid;
    int code;
    char *out, *err;
} s_switch_t;

static void *
s_switchover (void *args)
{
    s_switch_t *call = (s_switch_t *) args;
    //  A few submits answered before it
    usleep (300 * 1000);
    call->code = grid_cli (call->grid, &call->out, &call->err, 30000,
                           "cluster", "switchover", "--to", "a", NULL);
    return NULL;
}

static void
test_cluster_switchover_under_load (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    assert_true (s_failed_over);
    //  The former active comes back: a standby, caught up from a snapshot
    //  of the 10,000 jobs (its own store's tail is never served)
    cluster_pair_spawn (self, 0);
    assert_true (cluster_pair_wait_log (self, 0, "installed a snapshot"));
    assert_true (cluster_pair_wait_log (self, 1, "standby a is in sync"));
    //  A client of both members submits while the lead moves
    char endpoints [800];
    snprintf (endpoints, sizeof endpoints, "%s,%s",
              self->member [0].client_ep, self->member [1].client_ep);
    client_t *client = client_new (endpoints);
    assert_non_null (client);
    client_set_timeout (client, 10000);
    pw_t *writer = pw_new ();
    size_t cap = 4096, oks = 0, others = 0;
    char **ids = (char **) calloc (cap, sizeof (char *));
    s_switch_t call = {&self->member [1], -1, NULL, NULL};
    pthread_t thread;
    assert_int_equal (pthread_create (&thread, NULL, s_switchover, &call), 0);
    long long until = 0;
    for (size_t count = 0; oks < cap; count++) {
        char id [32];
        snprintf (id, sizeof id, "load-%zu", count);
        s_write_submit (writer, id);
        pv_doc_t *doc = NULL;
        client_exchange (client, pw_data (writer), pw_size (writer), &doc);
        char *job = doc ? s_submitted (doc) : NULL;
        if (job)
            ids [oks++] = job;
        else
        if (others++ == 0 && doc) {
            fprintf (stderr, "    first not ok: ");
            pv_write_json (pv_doc_root (doc), stderr, 0);
            fprintf (stderr, "\n");
        }
        pv_doc_destroy (&doc);
        //  Until b has served a while as the active
        if (!until && __atomic_load_n (&call.code, __ATOMIC_ACQUIRE) >= 0)
            until = grid_now_ms () + 1000;
        if (until && grid_now_ms () > until)
            break;
        if (!until && count > 20000)
            break;
    }
    pthread_join (thread, NULL);
    client_destroy (&client);
    pw_destroy (&writer);
    if (call.code != 0)
        fprintf (stderr, "switchover: %s%s", call.out ? call.out : "",
                 call.err ? call.err : "");
    assert_int_equal (call.code, 0);
    free (call.out);
    free (call.err);
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    assert_true (oks > 0);
    printf ("    %zu submits answered ok, %zu not, around the switchover\n",
            oks, others);
    //  Every one answered ok is on the new active
    for (size_t at = 0; at < oks; at++) {
        assert_true (s_has_job (self, 0, ids [at]));
        free (ids [at]);
    }
    free (ids);
}

int
main (void)
{
    //  In this order, on one cluster (see above)
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_cluster_empty_standby_joins_a_big_store),
        cmocka_unit_test (test_cluster_switchover_under_load),
    };
    return cmocka_run_group_tests (tests, s_setup, cluster_pair_teardown);
}
