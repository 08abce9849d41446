/*  =========================================================================
    test_it_rekey - an agent rotates its key without an outage, end to
    end: a real gridbroker, real gridagents and gridagent rotate-key.

    One broker (rekey from its config file, changed by SIGHUP) serves
    every case: a rotation while a multi-step job runs (every result
    kept, the node never offline, the old key retired and refused at the
    handshake, both changes in the audit trail); rekey: manual (the next
    key waits for gridcli key accept); forged rekeys (refused, counted);
    an agent killed in the middle of a rotation, and one restarted with
    the retired key beside the next pair; key_rotate_days (an agent whose
    key is older rotates by itself); last, a rotation of the broker's key
    (3 s deadline) that an agent which rotated its own key goes through.

    Nothing here sleeps hoping something happened: every wait polls with a
    deadline.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 30000         //  Deadline for anything that should happen

static grid_t s_grid;
static char s_config [400];     //  The broker's config file

//  ---------------------------------------------------------------------
//  Helpers

static void
s_nap (int ms)
{
    zclock_sleep (ms);
}

//  The broker's counter NAME (status dropped.NAME), or -1.
static int64_t
s_counter (const char *name)
{
    pv_doc_t *reply = grid_call (&s_grid, "status", NULL);
    const pv_t *data = NULL;
    int64_t value = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (pv_map_get (data, "dropped"), name), &value);
    pv_doc_destroy (&reply);
    return value;
}

//  The status of KEY in key.list into STATUS ("" when it is not listed);
//  its replaces into REPLACES when not NULL.
static void
s_key_status (const char *key, char *status, size_t status_len,
              char *replaces)
{
    *status = 0;
    if (replaces)
        *replaces = 0;
    pv_doc_t *reply = grid_call (&s_grid, "key.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    const pv_t *keys = pv_map_get (data, "keys");
    for (size_t index = 0; index < pv_size (keys); index++) {
        const pv_t *entry = pv_array_at (keys, index);
        if (!grid_str_is (entry, "key", key))
            continue;
        size_t len = 0;
        const char *text = pv_str (pv_map_get (entry, "status"), &len);
        snprintf (status, status_len, "%.*s", (int) len, text);
        text = pv_str (pv_map_get (entry, "replaces"), &len);
        if (replaces && text)
            snprintf (replaces, KEYS_TEXT_SIZE, "%.*s", (int) len, text);
    }
    pv_doc_destroy (&reply);
}

//  Polls until KEY's status is STATUS, asserting on the way (when NODE is
//  not NULL) that NODE never reads anything but online. True on success.
static bool
s_wait_key (const char *key, const char *status, const char *node)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    char now [32] = "";
    while (grid_now_ms () < deadline) {
        s_key_status (key, now, sizeof now, NULL);
        if (strcmp (now, status) == 0)
            return true;
        if (node) {
            pv_doc_t *reply = grid_call (&s_grid, "node.get", "node", node,
                                         NULL);
            const pv_t *data = NULL;
            assert_true (grid_reply_ok (reply, &data));
            if (!grid_str_is (data, "status", "online")) {
                fprintf (stderr, "node %s went offline during a rotation\n",
                         node);
                grid_dump_logs (&s_grid);
                fail ();
            }
            pv_doc_destroy (&reply);
        }
        s_nap (30);
    }
    fprintf (stderr, "key %.8s... is %s, not %s\n", key, now, status);
    return false;
}

//  The key pair file of agent ID, and its public key.
static void
s_agent_key (const char *id, char *path, size_t path_len, char *public_txt)
{
    char name [100];
    snprintf (name, sizeof name, "agent-%s", id);
    assert_int_equal (grid_keygen (&s_grid, name, path, path_len, public_txt),
                      0);
    char why [256];
    assert_int_equal (keys_read_public (path, public_txt, why, sizeof why), 0);
}

//  gridagent rotate-key for agent ID; the next public key into NEXT.
static void
s_rotate (const char *id, char *next)
{
    char key [400], pub [KEYS_TEXT_SIZE], state [400];
    s_agent_key (id, key, sizeof key, pub);
    snprintf (state, sizeof state, "%s/agent-%s", s_grid.dir, id);
    char *out = NULL, *err = NULL;
    int code = grid_run (&s_grid, "gridagent", &out, &err, 20000,
                         "rotate-key", "--id", id, "--key", key,
                         "--state-dir", state, NULL);
    if (code != 0)
        fprintf (stderr, "rotate-key: %s%s", out, err);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "told the running agent"));
    char path [420];
    snprintf (path, sizeof path, "%s.next", key);
    char why [256];
    assert_int_equal (keys_read_public (path, next, why, sizeof why), 0);
    free (out);
    free (err);
}

//  Rewrites the broker's config with REKEY and reloads it (SIGHUP).
static void
s_rekey_mode (const char *rekey)
{
    FILE *file = fopen (s_config, "w");
    assert_non_null (file);
    fprintf (file, "rekey: %s\n", rekey);
    fclose (file);
    assert_int_equal (kill (s_grid.broker_pid, SIGHUP), 0);
    //  The reload is logged; the next status answers after it
    char *out = NULL, *err = NULL;
    long long deadline = grid_now_ms () + S_WAIT_MS;
    bool reloaded = false;
    while (!reloaded && grid_now_ms () < deadline) {
        char log [400];
        snprintf (log, sizeof log, "%s/broker.log", s_grid.dir);
        char *text = grid_slurp (log);
        size_t count = 0;
        for (const char *at = strstr (text, "configuration reloaded"); at;
             at = strstr (at + 1, "configuration reloaded"))
            count++;
        static size_t seen = 0;
        reloaded = count > seen;
        if (reloaded)
            seen = count;
        free (text);
        if (!reloaded)
            s_nap (20);
    }
    free (out);
    free (err);
    assert_true (reloaded);
}

//  The file at PATH copied to COPY.
static void
s_copy (const char *path, const char *copy)
{
    char *text = grid_slurp (path);
    FILE *file = fopen (copy, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
    chmod (copy, 0600);
    free (text);
}

//  True when an audit entry of TYPE about OBJECT says OUTCOME.
static bool
s_audited (const char *type, const char *object, const char *outcome)
{
    pv_doc_t *reply = grid_call (&s_grid, "audit.list", "request_type", type,
                                 NULL);
    const pv_t *data = NULL;
    bool found = false;
    if (grid_reply_ok (reply, &data)) {
        const pv_t *entries = pv_map_get (data, "entries");
        for (size_t index = 0; index < pv_size (entries); index++) {
            const pv_t *entry = pv_array_at (entries, index);
            if (grid_str_is (entry, "object", object)
                && grid_str_is (entry, "outcome", outcome)
                && grid_str_is (entry, "face", "agent"))
                found = true;
        }
    }
    pv_doc_destroy (&reply);
    return found;
}

//  ---------------------------------------------------------------------
//  Setup

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    snprintf (s_config, sizeof s_config, "%s/broker.yaml", s_grid.dir);
    FILE *file = fopen (s_config, "w");
    if (!file)
        return -1;
    fprintf (file, "rekey: auto\n");
    fclose (file);
    const char *extra [] = {"--config", s_config, NULL};
    return grid_start_broker (&s_grid, extra);
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  Cases

//  A rotation while a multi-step job runs on the node: every result is
//  kept, the node never reads offline, the old key is retired (listed
//  with the time, refused at the handshake) and both changes are in the
//  audit trail.
static void
test_it_rekey_during_a_job (void **state)
{
    assert_true (grid_start_agent (&s_grid, "rk-01", NULL, NULL, NULL) >= 0);
    char key [400], old [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE];
    s_agent_key ("rk-01", key, sizeof key, old);
    assert_true (s_wait_key (old, "accepted", NULL));
    //  The old pair, kept aside to try it once it is retired
    char old_copy [420], secret [420], old_secret [440];
    snprintf (old_copy, sizeof old_copy, "%s/old-rk-01.key", s_grid.keys_dir);
    snprintf (secret, sizeof secret, "%s_secret", key);
    snprintf (old_secret, sizeof old_secret, "%s_secret", old_copy);
    s_copy (key, old_copy);
    s_copy (secret, old_secret);

    char *job = grid_submit_id (&s_grid,
        "target: node:rk-01\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}}\n"
        "  - {backend: test, action: echo, params: {msg: three}}\n"
        "  - {backend: test, action: sleep, params: {seconds: 1}}\n");
    assert_non_null (job);
    s_rotate ("rk-01", next);
    assert_true (s_wait_key (old, "retired", "rk-01"));
    char status [32], replaces [KEYS_TEXT_SIZE];
    s_key_status (next, status, sizeof status, replaces);
    assert_string_equal (status, "accepted");
    assert_string_equal (replaces, old);

    pv_doc_t *doc = grid_wait_job (&s_grid, job, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    for (int step = 0; step < 4; step++)
        assert_true (grid_str_is (grid_cell (data, step, "rk-01"), "status",
                                  "success"));
    pv_doc_destroy (&doc);
    free (job);
    assert_true (grid_wait_node (&s_grid, "rk-01", "online", S_WAIT_MS));

    //  The files followed: the key file holds the new pair, no next left
    char now [KEYS_TEXT_SIZE], why [256], next_file [420];
    long long deadline = grid_now_ms () + S_WAIT_MS;
    snprintf (next_file, sizeof next_file, "%s.next_secret", key);
    while (access (next_file, F_OK) == 0 && grid_now_ms () < deadline)
        s_nap (20);
    assert_int_not_equal (access (next_file, F_OK), 0);
    assert_int_equal (keys_read_public (secret, now, why, sizeof why), 0);
    assert_string_equal (now, next);

    assert_true (s_audited ("key.rekey", next, "ok"));
    assert_true (s_audited ("key.switch", next, "ok"));

    //  The retired key is refused at the handshake
    int64_t before = s_counter ("refused_handshakes");
    zsock_t *dealer = grid_dealer (&s_grid, s_grid.agents_ep, old_copy);
    assert_non_null (dealer);
    deadline = grid_now_ms () + S_WAIT_MS;
    while (s_counter ("refused_handshakes") <= before
           && grid_now_ms () < deadline)
        s_nap (20);
    assert_true (s_counter ("refused_handshakes") > before);
    zsock_destroy (&dealer);
}

//  rekey: manual: the next key waits as pending, the agent stays on its
//  key and online, until gridcli key accept NODE; then it switches. An
//  agent killed while its next key waits goes on after its restart.
static void
test_it_rekey_manual_and_restart (void **state)
{
    s_rekey_mode ("manual");
    int slot = grid_start_agent (&s_grid, "rk-02", NULL, NULL, NULL);
    assert_true (slot >= 0);
    char key [400], old [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE];
    s_agent_key ("rk-02", key, sizeof key, old);
    assert_true (s_wait_key (old, "accepted", NULL));
    s_rotate ("rk-02", next);
    assert_true (s_wait_key (next, "pending", "rk-02"));
    char status [32], replaces [KEYS_TEXT_SIZE];
    s_key_status (old, status, sizeof status, NULL);
    assert_string_equal (status, "accepted");
    s_key_status (next, status, sizeof status, replaces);
    assert_string_equal (replaces, old);

    //  Killed while it waits; accepted while it is down; back, it switches
    grid_stop_agent (&s_grid, slot, true);
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &out, &err, 20000, "key", "accept",
                                "rk-02", NULL), 0);
    free (out);
    free (err);
    assert_true (s_wait_key (next, "next", NULL));
    assert_true (grid_start_agent (&s_grid, "rk-02", NULL, NULL, NULL) >= 0);
    assert_true (s_wait_key (old, "retired", NULL));
    s_key_status (next, status, sizeof status, NULL);
    assert_string_equal (status, "accepted");
    assert_true (s_audited ("key.rekey", next, "pending"));
    s_rekey_mode ("auto");
}

//  The broker switched the node but the agent died before its files
//  followed: restarted with the retired key and the next pair beside it,
//  its key is refused at the handshake and it takes the next pair.
static void
test_it_rekey_restart_after_the_switch (void **state)
{
    int slot = grid_start_agent (&s_grid, "rk-03", NULL, NULL, NULL);
    assert_true (slot >= 0);
    char key [400], old [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE];
    s_agent_key ("rk-03", key, sizeof key, old);
    char secret [420], old_copy [420], old_secret [420];
    snprintf (secret, sizeof secret, "%s_secret", key);
    snprintf (old_copy, sizeof old_copy, "%s.old", key);
    snprintf (old_secret, sizeof old_secret, "%s.old_secret", key);
    s_copy (key, old_copy);
    s_copy (secret, old_secret);
    s_rotate ("rk-03", next);
    assert_true (s_wait_key (old, "retired", "rk-03"));
    grid_stop_agent (&s_grid, slot, true);
    //  As if the commit never happened: the old pair, the next beside it
    char next_pub [420], next_secret [420];
    snprintf (next_pub, sizeof next_pub, "%s.next", key);
    snprintf (next_secret, sizeof next_secret, "%s.next_secret", key);
    assert_int_equal (rename (key, next_pub), 0);
    assert_int_equal (rename (secret, next_secret), 0);
    assert_int_equal (rename (old_copy, key), 0);
    assert_int_equal (rename (old_secret, secret), 0);
    assert_true (grid_start_agent (&s_grid, "rk-03", NULL, NULL, NULL) >= 0);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (access (next_secret, F_OK) == 0 && grid_now_ms () < deadline)
        s_nap (20);
    assert_int_not_equal (access (next_secret, F_OK), 0);
    char now [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (secret, now, why, sizeof why), 0);
    assert_string_equal (now, next);
}

//  Sends a rekey for NODE naming KEY from a DEALER with the pair
//  KEY_FILE.
static void
s_forge (const char *key_file, const char *node, const char *key)
{
    zsock_t *dealer = grid_dealer (&s_grid, s_grid.agents_ep, key_file);
    assert_non_null (dealer);
    proto_msg_t msg = {
        .type = PROTO_REKEY, .node = (char *) node, .key = (char *) key
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&msg, writer), 0);
    //  Sent until the broker answers (the handshake takes a moment)
    long long deadline = grid_now_ms () + S_WAIT_MS;
    bool answered = false;
    while (!answered && grid_now_ms () < deadline) {
        zframe_t *frame = zframe_new (pw_data (writer), pw_size (writer));
        zframe_send (&frame, dealer, ZFRAME_DONTWAIT);
        zframe_destroy (&frame);
        zsock_set_rcvtimeo (dealer, 200);
        zmsg_t *reply = zmsg_recv (dealer);
        answered = reply != NULL;
        zmsg_destroy (&reply);
    }
    assert_true (answered);
    pw_destroy (&writer);
    zsock_destroy (&dealer);
}

//  A rekey from a key that is not enrolled, or from another node's key,
//  is refused and counted; the key it names is never listed.
static void
test_it_rekey_forged (void **state)
{
    assert_true (grid_start_agent (&s_grid, "rk-04", NULL, NULL, NULL) >= 0);
    assert_true (grid_start_agent (&s_grid, "rk-05", NULL, NULL, NULL) >= 0);
    char key4 [400], pub4 [KEYS_TEXT_SIZE], key5 [400], pub5 [KEYS_TEXT_SIZE];
    s_agent_key ("rk-04", key4, sizeof key4, pub4);
    s_agent_key ("rk-05", key5, sizeof key5, pub5);
    assert_true (s_wait_key (pub4, "accepted", NULL));
    assert_true (s_wait_key (pub5, "accepted", NULL));
    char stranger [400], wanted [KEYS_TEXT_SIZE];
    assert_int_equal (grid_keygen (&s_grid, "stranger", stranger,
                                   sizeof stranger, NULL), 0);
    char thief [400], thief_pub [KEYS_TEXT_SIZE];
    assert_int_equal (grid_keygen (&s_grid, "thief", thief, sizeof thief,
                                   thief_pub), 0);
    snprintf (wanted, sizeof wanted, "%s", thief_pub);

    int64_t unauthorized = s_counter ("unauthorized");
    s_forge (stranger, "rk-04", wanted);
    assert_true (s_counter ("unauthorized") > unauthorized);

    int64_t impersonation = s_counter ("impersonation");
    s_forge (key5, "rk-04", wanted);
    assert_true (s_counter ("impersonation") > impersonation);

    char status [32];
    s_key_status (wanted, status, sizeof status, NULL);
    assert_string_equal (status, "");
    s_key_status (pub4, status, sizeof status, NULL);
    assert_string_equal (status, "accepted");
}

//  key_rotate_days: an agent whose key is older makes the next pair
//  itself and rotates to it, its node online throughout
static void
test_it_rekey_on_schedule (void **state)
{
    char key [400], old [KEYS_TEXT_SIZE];
    s_agent_key ("rk-06", key, sizeof key, old);
    char secret [420];
    snprintf (secret, sizeof secret, "%s_secret", key);
    struct timeval aged [2] = {{.tv_sec = time (NULL) - 3 * 86400},
                               {.tv_sec = time (NULL) - 3 * 86400}};
    assert_int_equal (utimes (key, aged), 0);
    assert_int_equal (utimes (secret, aged), 0);
    char config [400];
    snprintf (config, sizeof config, "%s/agent-rk-06.yaml", s_grid.dir);
    FILE *file = fopen (config, "w");
    assert_non_null (file);
    fputs ("key_rotate_days: 2\n", file);
    fclose (file);
    const char *extra [] = {"--config", config, NULL};
    assert_true (grid_start_agent (&s_grid, "rk-06", NULL, NULL, extra) >= 0);
    assert_true (s_wait_key (old, "retired", "rk-06"));
    char now [KEYS_TEXT_SIZE], why [256];
    long long deadline = grid_now_ms () + S_WAIT_MS;
    do {
        if (keys_read_public (secret, now, why, sizeof why) == 0
            && strcmp (now, old) != 0)
            break;
        s_nap (20);
    } while (grid_now_ms () < deadline);
    assert_string_not_equal (now, old);
    char status [32];
    s_key_status (now, status, sizeof status, NULL);
    assert_string_equal (status, "accepted");
    assert_true (grid_wait_node (&s_grid, "rk-06", "online", S_WAIT_MS));
    char log [400];
    snprintf (log, sizeof log, "%s/agent-rk-06.log", s_grid.dir);
    char *text = grid_slurp (log);
    assert_non_null (strstr (text, "older than key_rotate_days"));
    free (text);
}

//  An agent that rotated its own key (rk-01: its session is the one the
//  next key opened) then goes through a rotation of the broker's key: it
//  sees the old key's session end at the retirement, takes the broker's
//  next key, and runs a job on it
static void
test_it_rekey_then_the_brokers_key (void **state)
{
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 20000, "key", "rotate-broker",
                         "--deadline", "3s", NULL);
    if (code != 0)
        fprintf (stderr, "rotate-broker: %s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    char next_file [420], next [KEYS_TEXT_SIZE], why [256];
    snprintf (next_file, sizeof next_file, "%s.next", s_grid.broker_key);
    assert_int_equal (keys_read_public (next_file, next, why, sizeof why), 0);
    //  The agent's log says it is on the broker's new key
    char log [400], line [600];
    snprintf (log, sizeof log, "%s/agent-rk-01.log", s_grid.dir);
    snprintf (line, sizeof line, "the broker's key is now %s", next);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    bool switched = false;
    while (!switched && grid_now_ms () < deadline) {
        char *text = grid_slurp (log);
        switched = text && strstr (text, line);
        free (text);
        if (!switched)
            s_nap (50);
    }
    if (!switched)
        grid_dump_logs (&s_grid);
    assert_true (switched);
    char *job = grid_submit_id (&s_grid,
        "target: node:rk-01\n"
        "tasks:\n"
        "  - {backend: test, action: echo, params: {msg: after}}\n");
    assert_non_null (job);
    pv_doc_t *doc = grid_wait_job (&s_grid, job, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    pv_doc_destroy (&doc);
    free (job);
    assert_true (grid_wait_node (&s_grid, "rk-01", "online", S_WAIT_MS));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_rekey_during_a_job),
        cmocka_unit_test (test_it_rekey_manual_and_restart),
        cmocka_unit_test (test_it_rekey_restart_after_the_switch),
        cmocka_unit_test (test_it_rekey_forged),
        cmocka_unit_test (test_it_rekey_on_schedule),
        cmocka_unit_test (test_it_rekey_then_the_brokers_key),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
