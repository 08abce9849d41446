/*  =========================================================================
    test_registry - the broker's node table: registration, sessions,
    liveness, target resolution, records.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../broker/registry.h"

static proto_msg_t *
s_hello (const char *id, const char *group, const char *label_key,
         const char *label_value)
{
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    hello->node = strdup (id);
    hello->hostname = strdup ("host");
    hello->version = strdup ("1.0");
    hello->concurrency = 1;
    if (group) {
        hello->groups = (char **) calloc (1, sizeof (char *));
        hello->groups [0] = strdup (group);
        hello->group_count = 1;
    }
    if (label_key) {
        hello->labels = (proto_kv_t *) calloc (1, sizeof (proto_kv_t));
        hello->labels [0].key = strdup (label_key);
        hello->labels [0].value = strdup (label_value);
        hello->label_count = 1;
    }
    hello->backends = (proto_backend_spec_t *) calloc (1, sizeof (proto_backend_spec_t));
    hello->backend_count = 1;
    hello->backends [0].name = strdup ("test");
    hello->backends [0].actions = (proto_action_spec_t *) calloc (1, sizeof (proto_action_spec_t));
    hello->backends [0].action_count = 1;
    hello->backends [0].actions [0].name = strdup ("echo");
    hello->backends [0].actions [0].help = strdup ("say it");
    return hello;
}

static registry_t *
s_fleet (void)
{
    registry_t *registry = registry_new ();
    const char *nodes [][4] = {{"web-01", "web", "tier", "web.dev.us-east"},
                               {"web-02", "web", "tier", "web.prod"},
                               {"webserver-01", "webserver", NULL, NULL},
                               {"db-01", "db", "tier", "data"}};
    for (int index = 0; index < 4; index++) {
        proto_msg_t *hello = s_hello (nodes [index][0], nodes [index][1],
                                      nodes [index][2], nodes [index][3]);
        char routing [16];
        snprintf (routing, sizeof routing, "r%d", index);
        assert_non_null (registry_hello (registry, &hello, NULL, 0, routing, 2, 1000, 5000));
        assert_null (hello);
    }
    return registry;
}

static char *
s_resolve_text (registry_t *registry, const char *target_text)
{
    target_t target;
    char err [256];
    assert_int_equal (target_parse (target_text, &target, err, sizeof err), 0);
    char **ids = NULL;
    size_t count = registry_resolve (registry, &target, &ids);
    char *text = (char *) calloc (1, 512);
    for (size_t index = 0; index < count; index++) {
        if (index)
            strcat (text, ",");
        strcat (text, ids [index]);
        free (ids [index]);
    }
    free (ids);
    target_clear (&target);
    return text;
}

static void
test_registry_resolves_targets_exactly (void **state)
{
    registry_t *registry = s_fleet ();
    struct {
        const char *target, *expected;
    } cases [] = {
        {"all", "db-01,web-01,web-02,webserver-01"},
        {"group:web", "web-01,web-02"},          //  never webserver
        {"group:webserver", "webserver-01"},
        {"node:db-01", "db-01"},
        {"node:web-02,db-01,nobody", "db-01,web-02"},
        {"label:tier=web", "web-01,web-02"},
        {"label:tier=web.dev", "web-01"},
        {"label:tier=web.dev.us-east", "web-01"},
        {"label:tier=we", ""},
        {"group:nobody", ""},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        char *got = s_resolve_text (registry, cases [index].target);
        assert_string_equal (got, cases [index].expected);
        free (got);
    }
    registry_destroy (&registry);
    assert_null (registry);
}

static void
test_registry_offline_and_drained_nodes_are_not_resolved (void **state)
{
    registry_t *registry = s_fleet ();
    registry_set_offline (registry_lookup (registry, "web-01"), 2000);
    registry_lookup (registry, "web-02")->drained = true;
    char *got = s_resolve_text (registry, "group:web");
    assert_string_equal (got, "");
    free (got);
    //  Members still count every registered node of the topic.
    target_t target;
    assert_int_equal (target_parse ("group:web", &target, NULL, 0), 0);
    assert_int_equal (registry_members (registry, &target), 2);
    target_clear (&target);
    assert_int_equal (registry_online_count (registry), 3);
    registry_destroy (&registry);
}

static void
test_registry_sessions_are_bound_to_their_connection (void **state)
{
    registry_t *registry = s_fleet ();
    assert_non_null (registry_session (registry, "web-01", "r0", 2));
    assert_null (registry_session (registry, "web-01", "r1", 2));
    assert_null (registry_session (registry, "nobody", "r0", 2));
    //  A re-registration moves the session to the new connection.
    proto_msg_t *hello = s_hello ("web-01", "web", NULL, NULL);
    registry_hello (registry, &hello, NULL, 0, "zz", 2, 2000, 6000);
    assert_null (registry_session (registry, "web-01", "r0", 2));
    assert_non_null (registry_session (registry, "web-01", "zz", 2));
    registry_destroy (&registry);
}

static void
test_registry_expires_silent_nodes (void **state)
{
    registry_t *registry = s_fleet ();
    registry_touch (registry_lookup (registry, "db-01"), 4000, 8000);
    const char **ids = NULL;
    size_t count = registry_expire (registry, 4500, 3000, &ids);
    assert_int_equal (count, 3);
    for (size_t index = 0; index < count; index++)
        assert_string_not_equal (ids [index], "db-01");
    free (ids);
    assert_false (registry_lookup (registry, "web-01")->online);
    assert_true (registry_lookup (registry, "db-01")->online);
    //  Already offline: not reported twice.
    count = registry_expire (registry, 9000, 3000, &ids);
    assert_int_equal (count, 1);
    free (ids);
    registry_destroy (&registry);
}

static void
test_registry_record_round_trip (void **state)
{
    registry_t *registry = s_fleet ();
    registry_node_t *node = registry_lookup (registry, "web-01");
    node->drained = true;
    pw_t *writer = pw_new ();
    registry_node_encode_record (node, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0), 0);
    registry_t *restored = registry_new ();
    assert_int_equal (registry_load (restored, pv_doc_root (doc)), 0);
    registry_node_t *copy = registry_lookup (restored, "web-01");
    assert_non_null (copy);
    assert_false (copy->online);       //  Offline until it says hello
    assert_true (copy->drained);
    assert_int_equal (copy->registered_wall_ms, 5000);
    assert_string_equal (copy->hello->groups [0], "web");
    assert_string_equal (copy->hello->labels [0].value, "web.dev.us-east");
    assert_non_null (registry_find_action (restored, "test", "echo", true));
    assert_null (registry_find_action (restored, "test", "echo", false));
    //  A broken record is refused.
    pw_reset (writer);
    pw_map (writer, 1);
    pw_str (writer, "hello");
    pw_bin (writer, "\x81\xa1v\x01", 4);
    pv_doc_t *bad = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &bad, NULL, 0), 0);
    assert_int_equal (registry_load (restored, pv_doc_root (bad)), -1);
    pv_doc_destroy (&bad);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    registry_destroy (&restored);
    registry_destroy (&registry);
}

static void
test_registry_lists_nodes_sorted_and_encodes_them (void **state)
{
    registry_t *registry = s_fleet ();
    registry_node_t **nodes = NULL;
    size_t count = registry_list (registry, &nodes);
    assert_int_equal (count, 4);
    assert_string_equal (nodes [0]->id, "db-01");
    assert_string_equal (nodes [3]->id, "webserver-01");
    pw_t *writer = pw_new ();
    registry_node_encode (nodes [1], writer, true);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0), 0);
    const pv_t *root = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (root, "id"), "web-01"));
    assert_true (pv_str_eq (pv_map_get (root, "status"), "online"));
    assert_true (pv_str_eq (pv_map_get (pv_array_at (pv_map_get (root, "backends"), 0), "name"), "test"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    free (nodes);
    registry_destroy (&registry);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_registry_resolves_targets_exactly),
        cmocka_unit_test (test_registry_offline_and_drained_nodes_are_not_resolved),
        cmocka_unit_test (test_registry_sessions_are_bound_to_their_connection),
        cmocka_unit_test (test_registry_expires_silent_nodes),
        cmocka_unit_test (test_registry_record_round_trip),
        cmocka_unit_test (test_registry_lists_nodes_sorted_and_encodes_them),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
