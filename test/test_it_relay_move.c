/*  =========================================================================
    test_it_relay_move - gridrelay when its broker changes, through the
    real programs

    - A broker cluster (etcd on loopback, two gridbrokers): a relay that
      lists both members, the standby first, is redirected to the active
      and serves its agents there; the active killed (SIGKILL) with jobs
      running on a relayed agent, the relay fails over to the new active
      and the jobs finish there, each cell once.
    - The rotation of the broker's key with a relay and its agents: the
      relay learns the next key over its session and acknowledges it,
      so the broker counts its agents as having it and retires the old
      key early; the relay connects again with the new key without
      dropping its agents (no node goes offline) and the job running
      through it completes. A relay that was down through the whole
      rotation cannot connect with the old key and says what to do; given
      the key gridcli key fetch-broker writes, it serves again.
    - A relay restarted in the middle of the broker's key rotation takes
      the next key up from its state dir (relay/brokerkeys.h): when the
      broker retires the old key, it connects with the new one and its
      agents run a job; the record goes when the rotation ends, and a
      damaged one is ignored.
    - A blob (file put of a sha256, feature blobs: blob_get, blob_chunk)
      delivered to an agent through a relay.

    Every wait polls with a deadline.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <czmq.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/sha256.h"
#include "lib/cluster.h"
#include "lib/fixture.h"

#define S_WAIT_MS 40000          //  Generous: the machine may be busy
#define S_BLOB_SIZE (600 * 1024) //  Three chunks

//  ---------------------------------------------------------------------
//  A relay in front of a broker cluster

//  Waits until the log of relay NAME in GRID's directory holds TEXT.
static bool
s_wait_relay_log (grid_t *grid, const char *name, const char *text)
{
    char log [100];
    snprintf (log, sizeof log, "relay-%s.log", name);
    if (fixture_log_has (grid, log, text, S_WAIT_MS))
        return true;
    fprintf (stderr, "relay %s never logged '%s'\n", name, text);
    grid_dump_logs (grid);
    return false;
}

static void
test_relay_move_cluster_failover (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    if (cluster_pair_skip (self))
        return;
    //  The standby names the active's agent endpoint to whoever asks; a
    //  node waits for its agent as long as by default (the relay finds
    //  the new active, then its agents connect again)
    self->offline_grace = "15s";
    cluster_pair_faces (self);
    cluster_pair_spawn (self, 0);
    assert_true (cluster_pair_wait_code (self, 0, "ok"));
    cluster_pair_spawn (self, 1);
    assert_true (cluster_pair_wait_code (self, 1, "not_leader"));
    assert_true (cluster_pair_wait_log (self, 0, "standby b is in sync"));

    //  The relay lists the standby first: it is sent to the active
    grid_t *grid = &self->member [0];
    char ups [800], pubs [800];
    snprintf (ups, sizeof ups, "%s,%s", self->member [1].agents_ep,
              self->member [0].agents_ep);
    snprintf (pubs, sizeof pubs, "%s,%s", self->member [1].publish_ep,
              self->member [0].publish_ep);
    const char *extra [] = {"--upstream", ups, "--upstream-publish", pubs,
                            "--failover", "1s", NULL};
    int relay = grid_start_relay (grid, "hop", -1, true, extra);
    assert_true (relay >= 0);
    assert_true (s_wait_relay_log (grid, "hop", "is a standby: moving to "
                                                "the active"));
    assert_true (fixture_start_agent_via (grid, "n1", "web", relay) >= 0);

    //  Jobs running on n1 when the active dies; every ok is a promise
    const char *spec = "target: {scope: node, value: n1}\n"
                       "tasks:\n  - {backend: test, action: sleep, "
                       "params: {seconds: 1}}\n";
    char *ids [4];
    for (size_t index = 0; index < 4; index++) {
        ids [index] = grid_submit_id (grid, spec);
        assert_non_null (ids [index]);
    }
    long long killed_ms = grid_now_ms ();
    grid_kill (grid->broker_pid, SIGKILL);
    waitpid (grid->broker_pid, NULL, 0);
    grid->broker_pid = 0;
    assert_true (cluster_pair_wait_code (self, 1, "ok"));
    //  The relay leaves the dead member for the new active, its agent
    //  with it
    assert_true (s_wait_relay_log (grid, "hop", "has not served"));
    for (size_t index = 0; index < 4; index++) {
        pv_doc_t *doc = grid_wait_job (&self->member [1], ids [index],
                                       S_WAIT_MS);
        assert_non_null (doc);
        const pv_t *data = fixture_data (doc);
        if (!grid_str_is (data, "status", "completed")) {
            grid_dump_logs (&self->member [0]);
            grid_dump_logs (&self->member [1]);
        }
        assert_true (grid_str_is (data, "status", "completed"));
        fixture_assert_cells (data, "success");
        pv_doc_destroy (&doc);
        free (ids [index]);
    }
    //  A figure, not a goal: the lease TTL (2 s here), the relay's
    //  failover (1 s) and its agent's reconnect make it up
    printf ("    relayed jobs done on the new active %lld ms after the "
            "kill\n", grid_now_ms () - killed_ms);
}

//  ---------------------------------------------------------------------
//  One broker, a relay, agents behind it (secure)

static char s_root [400];   //  file.roots of the agents

//  The broker (blobs of 1 MiB at most) with relays "kr" and "kr2"
//  enrolled, both relays, and agents kr-01 and kr-02 through kr with a
//  file root.
static int
s_relay_setup (void **state)
{
    if (fixture_setup (state) != 0)
        return -1;
    grid_t *grid = (grid_t *) *state;
    char broker_config [600], agent_config [600];
    snprintf (broker_config, sizeof broker_config, "%s/broker.yaml",
              grid->dir);
    FILE *file = fopen (broker_config, "w");
    if (!file)
        return -1;
    fprintf (file, "blobs:\n  max_size: 1MiB\n");
    fclose (file);
    fixture_broker_t broker;
    const char *names [] = {"kr", "kr2", NULL};
    const char *broker_extra [] = {"--config", broker_config, NULL};
    int slots [2] = {-1, -1};
    fixture_start_relays (grid, &broker, NULL, names, broker_extra, slots);
    int slot = slots [0];
    snprintf (s_root, sizeof s_root, "%s/files", grid->dir);
    snprintf (agent_config, sizeof agent_config, "%s/agent.yaml", grid->dir);
    file = fopen (agent_config, "w");
    if (mkdir (s_root, 0755) != 0 || !file)
        return -1;
    fprintf (file, "file:\n  roots: [\"%s\"]\n", s_root);
    fclose (file);
    fixture_via_t via;
    const char *more [] = {"--config", agent_config, NULL};
    for (int index = 1; index <= 2; index++) {
        char id [16];
        snprintf (id, sizeof id, "kr-%02d", index);
        if (grid_start_agent (grid, id, "kr", NULL,
                              fixture_via (grid, &via, &slot, 1, more))
            < 0)
            return -1;
    }
    return 0;
}

//  broker.keys's integer NAME, or -1 (no answer: the broker may be
//  binding its endpoints again).
static int64_t
s_keys_int (grid_t *grid, const char *name)
{
    pv_doc_t *reply = grid_call (grid, "broker.keys", NULL);
    const pv_t *data = NULL;
    int64_t value = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (data, name), &value);
    pv_doc_destroy (&reply);
    return value;
}

static void
test_relay_move_broker_key_rotation (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char why [256], old [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (grid->broker_key, old, why,
                                        sizeof why), 0);
    //  Relay kr2 trusts a copy of the broker's key, and is down through
    //  the whole rotation
    char old_copy [400];
    snprintf (old_copy, sizeof old_copy, "%s/kr2-broker.key", grid->keys_dir);
    char *text = grid_slurp (grid->broker_key);
    FILE *file = fopen (old_copy, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
    free (text);
    const char *kr2_extra [] = {"--upstream-key", old_copy, NULL};
    grid_stop_relay (grid, 1, false);
    char *job = grid_submit_id (grid,
        "target: group:kr\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 2}}\n"
        "  - {backend: test, action: echo, params: {msg: two}}\n"
        "  - {backend: test, action: sleep, params: {seconds: 2}}\n"
        "  - {backend: test, action: echo, params: {msg: four}}\n");
    assert_non_null (job);
    //  A deadline far off: the old key goes early, because the relay,
    //  and so both its agents, have the new one
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, 20000, "key", "rotate-broker",
                         "--deadline", "10m", NULL);
    if (code != 0)
        fprintf (stderr, "rotate-broker: %s%s", out, err);
    assert_int_equal (code, 0);
    //  From what it prints: the key may be retired before a file is read
    const char *said = strstr (out, "next key");
    assert_non_null (said);
    said += strlen ("next key");
    while (*said == ' ')
        said++;
    assert_true (strlen (said) >= KEYS_Z85_LEN);
    snprintf (next, sizeof next, "%.*s", KEYS_Z85_LEN, said);
    free (out);
    free (err);
    assert_true (s_wait_relay_log (grid, "kr", "the broker's next key is"));
    assert_true (fixture_log_has (grid, "broker.log",
                                   "relay kr has the broker's next key",
                                   S_WAIT_MS));
    //  Retired early, for every node has it through the relay
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_keys_int (grid, "retired") != 1 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_keys_int (grid, "retired"), 1);
    char now [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (grid->broker_key, now, why,
                                        sizeof why), 0);
    assert_string_equal (now, next);
    assert_true (fixture_log_has (grid, "broker.log", "as every node has "
                                   "the new key", S_WAIT_MS));
    //  The relay is back on the new key, its agents kept
    assert_true (s_wait_relay_log (grid, "kr", "the broker's key is now"));

    pv_doc_t *doc = grid_wait_job (grid, job, S_WAIT_MS);
    const pv_t *data = fixture_data (doc);
    if (!grid_str_is (data, "status", "completed"))
        grid_dump_logs (grid);
    assert_true (grid_str_is (data, "status", "completed"));
    fixture_assert_cells (data, "success");
    pv_doc_destroy (&doc);
    free (job);
    //  Nothing went offline, and the relay never dropped its agents
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", grid->dir);
    assert_false (fixture_file_has (path, "node kr-01 is offline"));
    assert_false (fixture_file_has (path, "node kr-02 is offline"));
    snprintf (path, sizeof path, "%s/relay-kr.log", grid->dir);
    assert_false (fixture_file_has (path, "stopped serving agents"));
    //  Both still run commands, through the relay on the new key
    job = grid_submit_id (grid, "target: group:kr\n"
                          "tasks:\n  - {backend: test, action: echo, "
                          "params: {msg: x}}\n");
    assert_non_null (job);
    doc = grid_wait_job (grid, job, S_WAIT_MS);
    data = fixture_data (doc);
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&doc);
    free (job);

    //  kr2, back with the old key, cannot connect and says what to do;
    //  given the key gridcli key fetch-broker writes, it serves again
    assert_true (grid_start_relay (grid, "kr2", -1, false, kr2_extra) == 1);
    assert_true (s_wait_relay_log (grid, "kr2", "gridcli key fetch-broker)"));
    grid_stop_relay (grid, 1, false);
    code = grid_cli (grid, &out, &err, 20000, "key", "fetch-broker", "--out",
                     old_copy, NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (grid_start_relay (grid, "kr2", -1, true, kr2_extra) == 1);
}

//  Reads the record FILE of relay NAME's state dir (NULL: none).
static char *
s_relay_state (grid_t *grid, const char *name, const char *file)
{
    char path [600];
    snprintf (path, sizeof path, "%s/relay-%s.state/%s", grid->dir, name,
              file);
    if (access (path, F_OK) != 0)
        return NULL;
    return grid_slurp (path);
}

//  The relay restarted while the broker's key rotates: it takes the next
//  key up from its state dir, so that when the broker retires the old key
//  it connects with the new one, and its agents run jobs. The record
//  goes when the rotation ends; broker.keys lets a later restart, still
//  configured with the old key, connect; a damaged record is ignored.
static void
test_relay_move_broker_key_restart (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char why [256], old [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (grid->broker_key, old, why,
                                        sizeof why), 0);
    //  A direct agent, stopped: it holds the old key's retirement back
    //  until it comes back (every node must have the next key)
    int held = grid_start_agent (grid, "kd", "kd", NULL, NULL);
    assert_true (held >= 0);
    grid_stop_agent (grid, held, false);
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, 20000, "key", "rotate-broker",
                         "--deadline", "10m", NULL);
    if (code != 0)
        fprintf (stderr, "rotate-broker: %s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (s_wait_relay_log (grid, "kr", "the broker's next key is"));
    assert_true (fixture_log_has (grid, "broker.log",
                                   "relay kr has the broker's next key",
                                   S_WAIT_MS));
    //  On disk, for the relay's eyes only: "OLD NEXT"
    char path [600];
    snprintf (path, sizeof path, "%s/relay-kr.state/broker.key.next",
              grid->dir);
    struct stat info;
    assert_int_equal (stat (path, &info), 0);
    assert_int_equal (info.st_mode & 0777, 0600);
    char *record = s_relay_state (grid, "kr", "broker.key.next");
    assert_non_null (record);
    assert_int_equal (strlen (record), 2 * KEYS_Z85_LEN + 2);
    assert_memory_equal (record, old, KEYS_Z85_LEN);
    char next [KEYS_TEXT_SIZE];
    snprintf (next, sizeof next, "%.*s", KEYS_Z85_LEN,
              record + KEYS_Z85_LEN + 1);
    free (record);

    //  Restarted mid-rotation, configured with the old key only
    grid_stop_relay (grid, 0, false);
    assert_int_equal (grid_start_relay (grid, "kr", -1, true, NULL), 0);
    assert_true (s_wait_relay_log (grid, "kr", "has a next key"));
    //  The held agent back: every node has the key, the old one retires
    //  and the broker binds again with the new one
    held = grid_start_agent (grid, "kd", "kd", NULL, NULL);
    assert_true (held >= 0);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_keys_int (grid, "retired") != 1 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_keys_int (grid, "retired"), 1);
    assert_true (s_wait_relay_log (grid, "kr", "the broker's key is now"));
    assert_true (grid_wait_node (grid, "kr-01", "online", S_WAIT_MS));
    assert_true (grid_wait_node (grid, "kr-02", "online", S_WAIT_MS));
    char *job = grid_submit_id (grid, "target: group:kr\n"
                                "tasks:\n  - {backend: test, action: echo, "
                                "params: {msg: x}}\n");
    assert_non_null (job);
    pv_doc_t *doc = grid_wait_job (grid, job, S_WAIT_MS);
    const pv_t *data = fixture_data (doc);
    if (!grid_str_is (data, "status", "completed"))
        grid_dump_logs (grid);
    assert_true (grid_str_is (data, "status", "completed"));
    fixture_assert_cells (data, "success");
    pv_doc_destroy (&doc);
    free (job);
    //  The rotation is over: its record went, the one that ended stays
    record = s_relay_state (grid, "kr", "broker.key.next");
    assert_null (record);
    record = s_relay_state (grid, "kr", "broker.keys");
    assert_non_null (record);
    char line [2 * KEYS_TEXT_SIZE + 1];
    snprintf (line, sizeof line, "%s %s\n", old, next);
    assert_string_equal (record, line);
    free (record);

    //  Restarted again, still configured with the old key, over a
    //  damaged record of a rotation under way: the damage is said and
    //  ignored, and broker.keys makes the relay trust the new key
    grid_stop_relay (grid, 0, false);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "%s %.20s", old, next);
    fclose (file);
    assert_int_equal (grid_start_relay (grid, "kr", -1, true, NULL), 0);
    assert_true (s_wait_relay_log (grid, "kr", "broker.key.next: not two "
                                   "broker keys"));
    assert_true (s_wait_relay_log (grid, "kr", "the relay trusts"));
}

static void
test_relay_move_blob (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char local [PATH_MAX], dest [PATH_MAX], hex [SHA256_HEX],
         got [SHA256_HEX];
    snprintf (local, sizeof local, "%s/big.bin", grid->dir);
    uint8_t *bytes = (uint8_t *) malloc (S_BLOB_SIZE);
    assert_non_null (bytes);
    for (size_t index = 0; index < S_BLOB_SIZE; index++)
        bytes [index] = (uint8_t) ((index * 131 + 7) >> 3);
    FILE *file = fopen (local, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (bytes, 1, S_BLOB_SIZE, file), S_BLOB_SIZE);
    fclose (file);
    sha256_hex (bytes, S_BLOB_SIZE, hex);
    free (bytes);
    snprintf (dest, sizeof dest, "%s/big.bin", s_root);
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, S_WAIT_MS, "job", "run",
                         "--target", "node:kr-01", "file", "put", "--src",
                         local, "--dest", dest, "--wait", NULL);
    if (code != 0) {
        fprintf (stderr, "out:\n%s\nerr:\n%s\n", out, err);
        grid_dump_logs (grid);
    }
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (grid_file_sha256 (dest, got));
    assert_string_equal (got, hex);
    //  Fetched through the relay, chunk by chunk
    pv_doc_t *reply = grid_call (grid, "blob.list", NULL);
    int64_t sent = 0;
    pv_get_int (pv_map_get (fixture_data (reply), "chunks_sent"), &sent);
    pv_doc_destroy (&reply);
    assert_int_equal (sent, 3);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_relay_move_blob,
                                         s_relay_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_relay_move_broker_key_rotation,
                                         s_relay_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_relay_move_broker_key_restart,
                                         s_relay_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_relay_move_cluster_failover,
                                         cluster_pair_setup,
                                         cluster_pair_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
