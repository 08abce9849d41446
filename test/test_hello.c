/*  =========================================================================
    test_hello - an agent's hello, below the server: the key rules of
    PROTOCOL.md rule 13 (auth_agent_check_relayed, the check the server's
    auth_agent_check makes once it read the key from the frame), the
    registration that follows an accepted hello (registry_hello and
    ctx_save_node, as broker_agents.c's s_on_hello does), what the
    scheduler then sees, and malformed hellos refused by the codec with
    nothing stored.

    What is not here: s_on_hello, s_duplicate_refused (rule 15,
    duplicate_node) and s_hello_repeated are static in the server's room
    broker_agents.c, take the server's struct and probe the agent socket,
    so they stay covered by the integration suites (test_it_agent,
    test_it_hello_backoff, test_it_security); only the registry's part of
    rule 15 (registry_session, registry_note_duplicate) is tested here.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "lib/ctxfake.h"

static int
s_auto_accept (broker_config_t *config, const char *dir, void *arg)
{
    config->auth.auto_accept = true;
    return 0;
}

static int
s_setup (void **state)
{
    *state = ctxfake_new (NULL, NULL);
    return *state ? 0 : -1;
}

static int
s_setup_auto (void **state)
{
    *state = ctxfake_new (s_auto_accept, NULL);
    return *state ? 0 : -1;
}

static int
s_teardown (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctxfake_destroy (&fake);
    return 0;
}

//  A new agent key pair NAME in the fake's directory; its public key
//  into KEY.
static void
s_agent_key (ctxfake_t *fake, const char *name, char *key)
{
    char err [256];
    assert_int_equal (keys_generate (ctxfake_dir (fake), name, false, NULL,
                                     key, err, sizeof err), 0);
}

//  The outcome of one hello's check.
typedef struct {
    int rc;                      //  0: go on, -1: refused
    const char *code;            //  The error to send back, or NULL
    char why [512];              //  Its sentence
    bool changed;                //  A key record changed (and was saved)
} s_checked_t;

//  What the server does with a hello for NODE from HOSTNAME (INSTANCE)
//  signed by KEY: the key check, its changed record saved into the pass
//  whether refused or not, and, when accepted, the registration
//  (routing id ROUTING) and its record; then the pass is committed.
static s_checked_t
s_hello (ctxfake_t *fake, const char *key, const char *node,
         const char *hostname, const char *instance, const char *routing)
{
    ctx_t *ctx = ctxfake_ctx (fake);
    proto_msg_t *hello = ctxfake_hello_new (node, hostname, instance);
    s_checked_t out;
    memset (&out, 0, sizeof out);
    const auth_key_t *changed = NULL;
    out.rc = auth_agent_check_relayed (ctx->auth, key, NULL, hello,
                                       ctx_wall_ms (ctx), &changed,
                                       &out.code, out.why, sizeof out.why);
    if (changed) {
        out.changed = true;
        auth_key_save (ctx->auth, ctx_txn (ctx), changed);
    }
    if (out.rc == 0) {
        registry_node_t *entry = registry_hello (
            ctx->registry, &hello, routing, strlen (routing),
            ctx_now_ms (ctx), ctx_wall_ms (ctx));
        assert_non_null (entry);
        ctx_save_node (ctx, entry);
    }
    proto_msg_destroy (&hello);
    assert_int_equal (ctxfake_commit (fake), 0);
    return out;
}

//  The stored record of KEY's status, or "" when none.
static void
s_stored_status (ctxfake_t *fake, const char *key, char *status,
                 size_t size)
{
    *status = 0;
    store_txn_t *txn = store_begin (ctxfake_ctx (fake)->store, false);
    assert_non_null (txn);
    const void *value = NULL;
    size_t len = 0;
    if (store_get (txn, STORE_DB_KEYS, key, strlen (key), &value, &len)
        == 0) {
        pv_doc_t *doc = NULL;
        assert_int_equal (pv_doc_decode (value, len, &doc, NULL, 0), 0);
        size_t text_len = 0;
        const char *text = pv_str (pv_map_get (pv_doc_root (doc), "status"),
                                   &text_len);
        snprintf (status, size, "%.*s", text ? (int) text_len : 0,
                  text ? text : "");
        pv_doc_destroy (&doc);
    }
    store_abort (&txn);
}

//  A first hello from a new key (auto_accept): the key is accepted and
//  bound, the node registered online and stored, and the scheduler
//  resolves the node and dispatches to it.
static void
test_hello_first_registers (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE];
    s_agent_key (fake, "agent-a", key);
    s_checked_t out = s_hello (fake, key, "web-01", "host-a", "i-1", "r-a");
    assert_int_equal (out.rc, 0);
    assert_true (out.changed);
    const auth_key_t *record = auth_key (ctx->auth, key);
    assert_non_null (record);
    assert_int_equal (record->status, AUTH_KEY_ACCEPTED);
    assert_string_equal (record->node, "web-01");
    assert_ptr_equal (auth_key_of_node (ctx->auth, "web-01", NULL), record);
    registry_node_t *node = registry_lookup (ctx->registry, "web-01");
    assert_non_null (node);
    assert_true (node->online);
    assert_int_equal (registry_online_count (ctx->registry), 1);
    assert_ptr_equal (registry_session (ctx->registry, "web-01", "r-a", 3),
                      node);
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_NODES), 1);
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_KEYS), 1);
    char status [32];
    s_stored_status (fake, key, status, sizeof status);
    assert_string_equal (status, "accepted");
    //  The scheduler sees it: a job on it is admitted and dispatched
    pw_t *writer = ctxfake_begin (fake, "job.submit", 1);
    ctxfake_write_job (writer, "node:web-01", "echo");
    pv_doc_t *doc = ctxfake_call_as (fake, AUTH_ROLE_ADMIN);
    assert_string_equal (ctxfake_reply_code (doc), "ok");
    pv_doc_destroy (&doc);
    assert_int_equal (sched_running_count (ctx->sched), 1);
    assert_true (ctxfake_sends (fake) >= 1);
}

//  Without auto_accept a new key waits: the hello is refused `pending`,
//  the key is stored pending with the node it claims, and no node is
//  registered.
static void
test_hello_new_key_waits (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE];
    s_agent_key (fake, "agent-a", key);
    s_checked_t out = s_hello (fake, key, "web-01", "host-a", "i-1", "r-a");
    assert_int_equal (out.rc, -1);
    assert_string_equal (out.code, "pending");
    assert_non_null (strstr (out.why, "gridcli key accept web-01"));
    assert_true (out.changed);
    assert_int_equal (auth_key (ctx->auth, key)->status, AUTH_KEY_PENDING);
    assert_null (registry_lookup (ctx->registry, "web-01"));
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_NODES), 0);
    char status [32];
    s_stored_status (fake, key, status, sizeof status);
    assert_string_equal (status, "pending");
    //  Said again unchanged: still pending, nothing new to save
    out = s_hello (fake, key, "web-01", "host-a", "i-1", "r-a");
    assert_string_equal (out.code, "pending");
    assert_false (out.changed);
}

//  Another key says hello for a node bound to a key: refused forbidden,
//  counted as impersonation, naming the rebuild's remedy; the intruder
//  is kept as a refused claim for key.list (in memory, not bound, not
//  found by the node's name), the node stays with its session, the store
//  is unchanged.
static void
test_hello_other_key_refused (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE], intruder [KEYS_TEXT_SIZE];
    s_agent_key (fake, "agent-a", key);
    s_agent_key (fake, "agent-b", intruder);
    assert_int_equal (s_hello (fake, key, "web-01", "host-a", "i-1", "r-a").rc,
                      0);
    uint64_t digest = ctxfake_store_digest (fake);
    uint64_t impersonation = auth_counters (ctx->auth)->impersonation;
    ctxfake_advance (fake, 1000);
    s_checked_t out = s_hello (fake, intruder, "web-01", "host-b", "i-2",
                               "r-b");
    assert_int_equal (out.rc, -1);
    assert_string_equal (out.code, PROTO_ERR_FORBIDDEN);
    assert_non_null (strstr (out.why, "node web-01 is bound to another key"));
    assert_non_null (strstr (out.why, "gridcli key delete web-01"));
    assert_false (out.changed);
    assert_int_equal (auth_counters (ctx->auth)->impersonation,
                      impersonation + 1);
    const auth_key_t *claim = auth_key (ctx->auth, intruder);
    assert_non_null (claim);
    assert_int_equal (claim->status, AUTH_KEY_REFUSED);
    assert_string_equal (claim->node, "web-01");
    assert_string_equal (auth_key_status_name (claim->status), "refused");
    assert_string_equal (auth_key_of_node (ctx->auth, "web-01", NULL)->key,
                         key);
    registry_node_t *node = registry_lookup (ctx->registry, "web-01");
    assert_ptr_equal (registry_session (ctx->registry, "web-01", "r-a", 3),
                      node);
    assert_null (registry_session (ctx->registry, "web-01", "r-b", 3));
    assert_string_equal (node->hello->hostname, "host-a");
    assert_true (ctxfake_store_digest (fake) == digest);
}

//  A key bound to one node may not register as another.
static void
test_hello_key_bound_elsewhere (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE];
    s_agent_key (fake, "agent-a", key);
    assert_int_equal (s_hello (fake, key, "web-01", "host-a", "i-1", "r-a").rc,
                      0);
    uint64_t digest = ctxfake_store_digest (fake);
    s_checked_t out = s_hello (fake, key, "web-02", "host-a", "i-1", "r-a");
    assert_int_equal (out.rc, -1);
    assert_string_equal (out.code, PROTO_ERR_FORBIDDEN);
    assert_non_null (strstr (out.why, "bound to node web-01"));
    assert_null (registry_lookup (ctx->registry, "web-02"));
    assert_true (ctxfake_store_digest (fake) == digest);
}

//  The same key says hello again (a new connection, a restarted agent):
//  accepted, the node is the same one, taken over by the new session;
//  nothing about the key is saved unless its hostname changed.
static void
test_hello_again_same_key (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE];
    s_agent_key (fake, "agent-a", key);
    assert_int_equal (s_hello (fake, key, "web-01", "host-a", "i-1", "r-a").rc,
                      0);
    registry_node_t *node = registry_lookup (ctx->registry, "web-01");
    ctxfake_advance (fake, 2000);
    s_checked_t out = s_hello (fake, key, "web-01", "host-a", "i-2", "r-c");
    assert_int_equal (out.rc, 0);
    assert_false (out.changed);
    assert_ptr_equal (registry_lookup (ctx->registry, "web-01"), node);
    assert_int_equal (registry_size (ctx->registry), 1);
    assert_ptr_equal (registry_session (ctx->registry, "web-01", "r-c", 3),
                      node);
    assert_null (registry_session (ctx->registry, "web-01", "r-a", 3));
    assert_string_equal (node->hello->instance, "i-2");
    assert_int_equal (node->last_seen_ms, CTXFAKE_NOW_MS + 2000);
    //  A new hostname is the key's news, saved
    out = s_hello (fake, key, "web-01", "host-a2", "i-2", "r-c");
    assert_int_equal (out.rc, 0);
    assert_true (out.changed);
    assert_string_equal (auth_key (ctx->auth, key)->hostname, "host-a2");
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_KEYS), 1);
}

//  A rejected key may not register: unauthorized, counted, nothing saved.
static void
test_hello_rejected_key (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE];
    s_agent_key (fake, "agent-a", key);
    assert_non_null (auth_key_reject (ctx->auth, ctx_txn (ctx), key,
                                      ctx_wall_ms (ctx), &(bool) {false}));
    assert_int_equal (ctxfake_commit (fake), 0);
    uint64_t digest = ctxfake_store_digest (fake);
    uint64_t unauthorized = auth_counters (ctx->auth)->unauthorized;
    s_checked_t out = s_hello (fake, key, "web-01", "host-a", "i-1", "r-a");
    assert_int_equal (out.rc, -1);
    assert_string_equal (out.code, PROTO_ERR_UNAUTHORIZED);
    assert_non_null (strstr (out.why, "was rejected"));
    assert_int_equal (auth_counters (ctx->auth)->unauthorized,
                      unauthorized + 1);
    assert_null (registry_lookup (ctx->registry, "web-01"));
    assert_true (ctxfake_store_digest (fake) == digest);
}

//  Rule 15's bookkeeping in the registry: a refused second agent is
//  counted on the node with its hostname and time (node.get shows them).
static void
test_hello_duplicate_noted (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    registry_node_t *node = ctxfake_register (fake, "web-01");
    assert_int_equal (node->duplicates, 0);
    registry_note_duplicate (node, "host-b", ctx_wall_ms (ctx));
    ctxfake_advance (fake, 5000);
    registry_note_duplicate (node, "host-c", ctx_wall_ms (ctx));
    assert_int_equal (node->duplicates, 2);
    assert_string_equal (node->duplicate_hostname, "host-c");
    assert_int_equal (node->duplicate_wall_ms, CTXFAKE_WALL_MS + 5000);
    pw_t *writer = pw_new ();
    registry_node_encode (node, writer, false);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_non_null (pv_map_get (pv_doc_root (doc), "duplicate"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
}

//  Hellos with a field missing or of the wrong type are refused whole by
//  the codec (-2, with the field named), so nothing reaches auth, the
//  registry or the store.
static void
test_hello_malformed_refused (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    uint64_t digest = ctxfake_store_digest (fake);
    proto_msg_t *hello = ctxfake_hello_new ("web-01", "host-a", "i-1");
    pw_t *good = pw_new ();
    assert_int_equal (proto_msg_encode (hello, good), 0);
    proto_msg_destroy (&hello);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (good), pw_size (good), &doc,
                                     NULL, 0), 0);
    const pv_t *root = pv_doc_root (doc);
    //  Each case: the good hello without KEY, or with KEY an int
    const char *fields [] = {"node", "hostname", "version", "backends"};
    pw_t *bad = pw_new ();
    for (size_t index = 0; index < 4; index++) {
        for (int wrong_type = 0; wrong_type < 2; wrong_type++) {
            pw_reset (bad);
            size_t count = pv_size (root);
            pw_map (bad, wrong_type ? count : count - 1);
            for (size_t at = 0; at < count; at++) {
                const pv_t *value = pv_map_value_at (root, at);
                bool hit = pv_str_eq (pv_map_key_at (root, at),
                                      fields [index]);
                if (hit && !wrong_type)
                    continue;
                pw_pv (bad, pv_map_key_at (root, at));
                if (hit)
                    pw_int (bad, 42);
                else
                    pw_pv (bad, value);
            }
            proto_msg_t *msg = NULL;
            char why [256] = "";
            int rc = proto_msg_decode (pw_data (bad), pw_size (bad), &msg, why,
                                       sizeof why);
            if (rc != -2)
                fail_msg ("a hello %s %s decoded (%d)",
                          wrong_type ? "with an int as" : "without",
                          fields [index], rc);
            assert_null (msg);
            assert_non_null (strstr (why, fields [index]));
        }
    }
    pw_destroy (&bad);
    pv_doc_destroy (&doc);
    pw_destroy (&good);
    assert_int_equal (registry_size (ctx->registry), 0);
    assert_false (ctxfake_pass_open (fake));
    assert_true (ctxfake_store_digest (fake) == digest);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_hello_first_registers,
                                         s_setup_auto, s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_new_key_waits, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_other_key_refused,
                                         s_setup_auto, s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_key_bound_elsewhere,
                                         s_setup_auto, s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_again_same_key,
                                         s_setup_auto, s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_rejected_key, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_duplicate_noted, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_hello_malformed_refused,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
