/*  =========================================================================
    test_auth - the broker's security rules that need no socket: config
    (client roles, allowlist), role names, which topics a node may
    receive, key records and their reload from the store (which role a request needs is the request
    table's, requests.h). The handshakes and refusals themselves are
    tested end to end in test_it_security.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>

#include "../broker/auth.h"
#include "../proto/conf.h"

static char s_dir [256];
static char s_key [KEYS_TEXT_SIZE];     //  Public key of <dir>/alice.key
static char s_key2 [KEYS_TEXT_SIZE];    //  Public key of <dir>/bob.key

static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "%s/grid-auth-XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (s_dir))
        return -1;
    char err [256];
    return keys_generate (s_dir, "alice", false, NULL, s_key, err,
                          sizeof err)
           || keys_generate (s_dir, "bob", false, NULL, s_key2, err,
                             sizeof err);
}

static int
s_teardown (void **state)
{
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", s_dir);
    return system (command) == 0 ? 0 : -1;
}

//  Loads YAML TEXT into CONFIG; returns auth_config_load's result.
static int
s_load (auth_config_t *config, const char *text, char *err, size_t err_len)
{
    pv_doc_t *doc = NULL;
    assert_int_equal (conf_parse (text, strlen (text), &doc, err, err_len),
                      0);
    int rc = auth_config_load (config, pv_doc_root (doc), err, err_len);
    pv_doc_destroy (&doc);
    return rc;
}

static void
test_auth_config_clients_and_allowlist (void **state)
{
    auth_config_t config;
    auth_config_defaults (&config);
    assert_false (config.insecure);
    assert_string_equal (config.key_file, KEYS_DEFAULT_BROKER_KEY);
    char text [1024], err [512];
    snprintf (text, sizeof text,
              "key: /srv/broker.key\n"
              "auto_accept: true\n"
              "max_pending_keys: 7\n"
              "clients:\n"
              "  - { key: %s/alice.key, role: admin, name: alice }\n"
              "  - { key: \"%s\", role: viewer }\n"
              "allow: [test.*, apt.install]\n",
              s_dir, s_key2);
    assert_int_equal (s_load (&config, text, err, sizeof err), 0);
    assert_string_equal (config.key_file, "/srv/broker.key");
    assert_true (config.auto_accept);
    assert_int_equal (config.max_pending_keys, 7);
    assert_int_equal (config.client_count, 2);
    assert_string_equal (config.clients [0].key, s_key);
    assert_int_equal (config.clients [0].role, AUTH_ROLE_ADMIN);
    assert_string_equal (config.clients [0].name, "alice");
    assert_int_equal (config.clients [1].role, AUTH_ROLE_VIEWER);
    assert_null (config.clients [1].name);
    assert_true (auth_allowed (&config, "test", "echo"));
    assert_true (auth_allowed (&config, "apt", "install"));
    assert_false (auth_allowed (&config, "apt", "remove"));
    assert_false (auth_allowed (&config, "tes", "echo"));
    assert_false (auth_allowed (&config, "testing", "echo"));

    //  A copy owns its own strings
    auth_config_t copy;
    auth_config_copy (&copy, &config);
    auth_config_clear (&config);
    assert_string_equal (copy.clients [0].name, "alice");
    assert_true (auth_allowed (&copy, "apt", "install"));
    auth_config_clear (&copy);

    //  Flags
    auth_config_defaults (&config);
    assert_true (auth_allowed (&config, "apt", "remove"));
    char flag [200];
    snprintf (flag, sizeof flag, "operator:%s", s_key);
    assert_int_equal (auth_config_add_client (&config, flag, err, sizeof err),
                      0);
    assert_int_equal (config.clients [0].role, AUTH_ROLE_OPERATOR);
    assert_int_equal (auth_config_add_client (&config, flag, err, sizeof err),
                      -1);
    assert_non_null (strstr (err, "twice"));
    assert_int_equal (auth_config_add_client (&config, "root:x", err,
                                              sizeof err), -1);
    assert_int_equal (auth_config_add_client (&config, s_key, err,
                                              sizeof err), -1);
    assert_int_equal (auth_config_set_allow (&config, "system.*,ping.host",
                                             err, sizeof err), 0);
    assert_true (auth_allowed (&config, "ping", "host"));
    assert_false (auth_allowed (&config, "apt", "update"));
    assert_int_equal (auth_config_set_allow (&config, "system", err,
                                             sizeof err), -1);
    assert_int_equal (auth_config_set_allow (&config, "a.b,,c.d", err,
                                             sizeof err), -1);
    auth_config_clear (&config);
}

static void
test_auth_config_refuses_bad_entries (void **state)
{
    char root_role [200], extra_key [200];
    snprintf (root_role, sizeof root_role,
              "clients:\n  - {key: \"%s\", role: root}\n", s_key2);
    snprintf (extra_key, sizeof extra_key,
              "clients:\n  - {key: \"%s\", role: admin, colour: red}\n",
              s_key2);
    const char *bad [] = {
        "clients: {key: x}\n",
        "clients:\n  - {key: nothing-here, role: admin}\n",
        root_role,
        "clients:\n  - {role: admin}\n",
        extra_key,
        "allow: test.*\n",
        "allow: [\"test\"]\n",
        "allow: [\"te st.*\"]\n",
        "max_pending_keys: -1\n",
        "insecure: maybe\n",
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        auth_config_t config;
        auth_config_defaults (&config);
        char err [512] = "";
        assert_int_equal (s_load (&config, bad [index], err, sizeof err), -1);
        assert_true (strlen (err) > 0);
        auth_config_clear (&config);
    }
}

static void
test_auth_roles (void **state)
{
    assert_int_equal (auth_role_parse ("viewer"), AUTH_ROLE_VIEWER);
    assert_int_equal (auth_role_parse ("operator"), AUTH_ROLE_OPERATOR);
    assert_int_equal (auth_role_parse ("admin"), AUTH_ROLE_ADMIN);
    assert_int_equal (auth_role_parse ("Admin"), AUTH_ROLE_NONE);
    assert_int_equal (auth_role_parse (NULL), AUTH_ROLE_NONE);
    assert_string_equal (auth_role_name (AUTH_ROLE_OPERATOR), "operator");
}

static void
test_auth_topics_of_a_node (void **state)
{
    registry_t *registry = registry_new ();
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    hello->node = strdup ("web-01");
    hello->hostname = strdup ("web-01.example.net");
    hello->version = strdup ("0.1.0");
    hello->concurrency = 1;
    hello->groups = (char **) calloc (2, sizeof (char *));
    hello->groups [0] = strdup ("web");
    hello->group_count = 1;
    hello->labels = (proto_kv_t *) calloc (1, sizeof (proto_kv_t));
    hello->labels [0].key = strdup ("tier");
    hello->labels [0].value = strdup ("web.dev.us-east");
    hello->label_count = 1;
    registry_node_t *node = registry_hello (registry, &hello, "r", 1, 0, 0);
    assert_non_null (node);

    const char *mine [] = {"all/", "node/web-01/", "group/web/",
                           "label/tier/web/", "label/tier/web.dev/",
                           "label/tier/web.dev.us-east/"};
    for (size_t index = 0; index < 6; index++)
        assert_true (auth_topic_allowed ("web-01", node, mine [index],
                                         strlen (mine [index])));
    const char *theirs [] = {"", "all", "node/web-02/", "node/web-0",
                             "node/", "group/webserver/", "group/db/",
                             "label/tier/web.prod/", "label/rack/web/",
                             "node/web-01/x", "group/web"};
    for (size_t index = 0; index < 11; index++)
        assert_false (auth_topic_allowed ("web-01", node, theirs [index],
                                          strlen (theirs [index])));
    //  Bytes after a NUL never match
    assert_false (auth_topic_allowed ("web-01", node, "all/\0x", 6));
    //  Before its first hello a node gets all/ and its own topic only
    assert_true (auth_topic_allowed ("web-09", NULL, "node/web-09/", 12));
    assert_false (auth_topic_allowed ("web-09", NULL, "group/web/", 10));
    registry_destroy (&registry);
}

static void
test_auth_key_records (void **state)
{
    auth_key_t key;
    memset (&key, 0, sizeof key);
    key.status = AUTH_KEY_ACCEPTED;
    key.node = "web-01";
    key.hostname = "web-01.example.net";
    key.first_seen_ms = 1000;
    key.accepted_at_ms = 2000;
    key.updated_at_ms = 3000;
    pw_t *writer = pw_new ();
    auth_key_encode (&key, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    auth_key_t back;
    memset (&back, 0, sizeof back);
    assert_int_equal (auth_key_decode (pv_doc_root (doc), &back), 0);
    assert_int_equal (back.status, AUTH_KEY_ACCEPTED);
    assert_string_equal (back.node, "web-01");
    assert_string_equal (back.hostname, "web-01.example.net");
    assert_int_equal (back.first_seen_ms, 1000);
    assert_int_equal (back.accepted_at_ms, 2000);
    free (back.node);
    free (back.hostname);
    pv_doc_destroy (&doc);

    //  Unknown status, bad node id, not a map: refused
    const char *bad [] = {
        "{status: maybe}", "{status: accepted, node: \"bad id\"}", "[1, 2]",
        "{node: web-01}"
    };
    for (size_t index = 0; index < 4; index++) {
        char err [256];
        assert_int_equal (conf_parse (bad [index], strlen (bad [index]), &doc,
                                      err, sizeof err), 0);
        memset (&back, 0, sizeof back);
        assert_int_equal (auth_key_decode (pv_doc_root (doc), &back), -1);
        assert_null (back.node);
        pv_doc_destroy (&doc);
    }
    pw_destroy (&writer);
}

//  After a failed commit the server reads the keys back: what a pass
//  changed in memory only (a reject, a new accepted key) is gone, what
//  was committed before stays.
static void
test_auth_reload_after_a_failed_commit (void **state)
{
    char dir [300], err [256];
    snprintf (dir, sizeof dir, "%s/store", s_dir);
    assert_int_equal (mkdir (dir, 0700), 0);
    store_t *store = store_open (dir, 1 << 20, 1 << 24, err, sizeof err);
    assert_non_null (store);
    auth_config_t config;
    auth_config_defaults (&config);
    config.insecure = true;
    auth_t *auth = auth_new (&config, store, err, sizeof err);
    assert_non_null (auth);

    const auth_key_t *record = NULL;
    char why [256];
    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (auth_key_accept (auth, txn, s_key, false, 1000, &record,
                                       why, sizeof why), 0);
    assert_int_equal (store_commit (&txn), 0);

    //  A pass that rejects the first key and accepts a second, then fails
    txn = store_begin (store, true);
    bool was_bound = false;
    assert_non_null (auth_key_reject (auth, txn, s_key, 2000, &was_bound));
    assert_int_equal (auth_key_accept (auth, txn, s_key2, false, 2000,
                                       &record, why, sizeof why), 0);
    store_abort (&txn);
    assert_int_equal (auth_key (auth, s_key)->status, AUTH_KEY_REJECTED);
    assert_non_null (auth_key (auth, s_key2));

    assert_int_equal (auth_reload (auth, store), 0);
    assert_non_null (auth_key (auth, s_key));
    assert_int_equal (auth_key (auth, s_key)->status, AUTH_KEY_ACCEPTED);
    assert_int_equal (auth_key (auth, s_key)->accepted_at_ms, 1000);
    assert_null (auth_key (auth, s_key2));
    size_t keys = 0;
    for (const auth_key_t *key = auth_key_first (auth); key;
         key = auth_key_next (auth))
        keys++;
    assert_int_equal (keys, 1);

    auth_destroy (&auth);
    auth_config_clear (&config);
    store_destroy (&store);
}

//  Key rotation: a node's accepted key names its next key (auto: next at
//  once); asking again changes nothing; the next key's hello switches the
//  node and retires the old key, whose records survive a reload; a
//  retired key can name no next key; manual keeps the next key pending
//  until key.accept.
static void
test_auth_rekey (void **state)
{
    char dir [300], err [256], why [256], key_file [300];
    snprintf (dir, sizeof dir, "%s/rekey-store", s_dir);
    assert_int_equal (mkdir (dir, 0700), 0);
    store_t *store = store_open (dir, 1 << 20, 1 << 24, err, sizeof err);
    assert_non_null (store);
    auth_config_t config;
    auth_config_defaults (&config);
    snprintf (key_file, sizeof key_file, "%s/alice.key", s_dir);
    free (config.key_file);
    config.key_file = strdup (key_file);
    auth_t *auth = auth_new (&config, store, err, sizeof err);
    assert_non_null (auth);
    char third [KEYS_TEXT_SIZE];
    assert_int_equal (keys_generate (s_dir, "carol", false, NULL, third, err,
                                     sizeof err), 0);

    //  alice's key is web-01's
    const auth_key_t *record = NULL;
    store_txn_t *txn = store_begin (store, true);
    assert_int_equal (auth_key_accept (auth, txn, s_key, false, 1000, &record,
                                       why, sizeof why), 0);
    proto_msg_t hello;
    memset (&hello, 0, sizeof hello);
    hello.type = PROTO_HELLO;
    hello.node = "web-01";
    hello.hostname = "web-01.example.net";
    const auth_key_t *changed = NULL;
    const char *code = NULL;
    assert_int_equal (auth_agent_check_relayed (auth, s_key, NULL, &hello,
                                                1100, &changed, &code, why,
                                                sizeof why), 0);
    auth_key_save (auth, txn, changed);

    //  bob's key is its next key: another node's key may not name one,
    //  and a key the broker knows is no next key
    bool fresh = false;
    assert_int_equal (auth_rekey (auth, txn, s_key, "web-02", s_key2, 1200,
                                  &fresh, why, sizeof why),
                      AUTH_REKEY_REFUSED);
    assert_int_equal (auth_rekey (auth, txn, s_key, "web-01", s_key, 1200,
                                  &fresh, why, sizeof why),
                      AUTH_REKEY_REFUSED);
    assert_int_equal (auth_rekey (auth, txn, s_key, "web-01", "short", 1200,
                                  &fresh, why, sizeof why),
                      AUTH_REKEY_REFUSED);
    assert_int_equal (auth_rekey (auth, txn, s_key, "web-01", s_key2, 1200,
                                  &fresh, why, sizeof why),
                      AUTH_REKEY_ACCEPTED);
    assert_true (fresh);
    assert_int_equal (auth_rekey (auth, txn, s_key, "web-01", s_key2, 1300,
                                  &fresh, why, sizeof why),
                      AUTH_REKEY_ACCEPTED);
    assert_false (fresh);
    assert_int_equal (auth_key (auth, s_key2)->status, AUTH_KEY_NEXT);
    assert_string_equal (auth_key (auth, s_key2)->replaces, s_key);
    assert_ptr_equal (auth_key_next_of (auth, "web-01"), auth_key (auth,
                                                                    s_key2));
    //  A next key speaks for its node only
    hello.node = "web-02";
    assert_int_equal (auth_agent_check_relayed (auth, s_key2, NULL, &hello,
                                                1400, &changed, &code, why,
                                                sizeof why), -1);
    assert_null (auth_take_retired (auth));
    //  Its hello switches web-01 to it
    hello.node = "web-01";
    assert_int_equal (auth_agent_check_relayed (auth, s_key2, NULL, &hello,
                                                1500, &changed, &code, why,
                                                sizeof why), 0);
    assert_ptr_equal (changed, auth_key (auth, s_key2));
    auth_key_save (auth, txn, changed);
    const auth_key_t *retired = auth_take_retired (auth);
    assert_ptr_equal (retired, auth_key (auth, s_key));
    assert_null (auth_take_retired (auth));
    auth_key_save (auth, txn, retired);
    assert_int_equal (store_commit (&txn), 0);
    assert_int_equal (auth_key (auth, s_key)->status, AUTH_KEY_RETIRED);
    assert_int_equal (auth_key (auth, s_key)->retired_at_ms, 1500);
    assert_int_equal (auth_key (auth, s_key2)->status, AUTH_KEY_ACCEPTED);
    assert_ptr_equal (auth_key_of_node (auth, "web-01", NULL),
                      auth_key (auth, s_key2));

    //  Read back from the store as they were
    assert_int_equal (auth_reload (auth, store), 0);
    assert_int_equal (auth_key (auth, s_key)->status, AUTH_KEY_RETIRED);
    assert_int_equal (auth_key (auth, s_key)->retired_at_ms, 1500);
    assert_string_equal (auth_key (auth, s_key2)->replaces, s_key);
    //  The retired key says hello in vain, and names no next key
    assert_int_equal (auth_agent_check_relayed (auth, s_key, NULL, &hello,
                                                1600, &changed, &code, why,
                                                sizeof why), -1);
    assert_string_equal (code, PROTO_ERR_UNAUTHORIZED);
    txn = store_begin (store, true);
    assert_int_equal (auth_rekey (auth, txn, s_key, "web-01", third, 1700,
                                  &fresh, why, sizeof why),
                      AUTH_REKEY_REFUSED);

    //  Manual: pending until key.accept, then next
    config.rekey = AUTH_REKEY_MANUAL;
    assert_int_equal (auth_rekey (auth, txn, s_key2, "web-01", third, 1800,
                                  &fresh, why, sizeof why),
                      AUTH_REKEY_PENDING);
    assert_int_equal (auth_key (auth, third)->status, AUTH_KEY_PENDING);
    //  Its hello waits (not an impersonation)
    assert_int_equal (auth_agent_check_relayed (auth, third, NULL, &hello,
                                                1900, &changed, &code, why,
                                                sizeof why), -1);
    assert_string_equal (code, "pending");
    assert_int_equal (auth_counters (auth)->impersonation, 1);
    assert_int_equal (auth_key_accept (auth, txn, third, false, 2000, &record,
                                       why, sizeof why), 0);
    assert_int_equal (auth_key (auth, third)->status, AUTH_KEY_NEXT);
    store_abort (&txn);

    auth_destroy (&auth);
    auth_config_clear (&config);
    store_destroy (&store);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_auth_config_clients_and_allowlist),
        cmocka_unit_test (test_auth_config_refuses_bad_entries),
        cmocka_unit_test (test_auth_roles),
        cmocka_unit_test (test_auth_topics_of_a_node),
        cmocka_unit_test (test_auth_key_records),
        cmocka_unit_test (test_auth_reload_after_a_failed_commit),
        cmocka_unit_test (test_auth_rekey),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
