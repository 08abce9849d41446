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

#include "../backends/backend.h"
#include "../broker/registry.h"
#include "../proto/mpscan.h"

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

static char *
s_strdup_or_null (const char *text)
{
    return text ? strdup (text) : NULL;
}

//  Appends backend NAME to HELLO, with one action ACTION (HELP) whose
//  params use every optional key of the wire form: pattern, default, and
//  an int range.
static void
s_add_backend (proto_msg_t *hello, const char *name, const char *action,
               const char *help)
{
    hello->backends = (proto_backend_spec_t *) realloc (
        hello->backends, (hello->backend_count + 1) * sizeof (proto_backend_spec_t));
    assert_non_null (hello->backends);
    proto_backend_spec_t *backend = &hello->backends [hello->backend_count++];
    memset (backend, 0, sizeof *backend);
    backend->name = strdup (name);
    backend->actions = (proto_action_spec_t *) calloc (1, sizeof (proto_action_spec_t));
    backend->action_count = 1;
    proto_action_spec_t *spec = &backend->actions [0];
    spec->name = strdup (action);
    spec->modify = true;
    spec->help = strdup (help);
    const struct {
        const char *name, *type, *pattern, *fallback;
        bool required;
        int64_t min, max;
    } params [] = {
        {"package", "string", "^[a-z0-9.+-]+$", NULL, true, 0, 0},
        {"version", "string", NULL, "latest", false, 0, 0},
        {"retries", "int", NULL, "1", false, 0, 5},
    };
    spec->param_count = sizeof params / sizeof params [0];
    spec->params = (proto_param_spec_t *) calloc (spec->param_count, sizeof (proto_param_spec_t));
    for (size_t index = 0; index < spec->param_count; index++) {
        proto_param_spec_t *param = &spec->params [index];
        param->name = strdup (params [index].name);
        param->type = strdup (params [index].type);
        param->pattern = s_strdup_or_null (params [index].pattern);
        param->default_value = s_strdup_or_null (params [index].fallback);
        param->required = params [index].required;
        param->min_value = params [index].min;
        param->max_value = params [index].max;
        param->help = strdup ("a param");
    }
}

//  HELLO as proto_msg_encode writes it for a node's record (at the
//  oldest version spoken), in WRITER (reset first).
static void
s_encode (const proto_msg_t *hello, pw_t *writer)
{
    proto_msg_t copy = *hello;
    copy.protocol = PROTO_VERSION_MIN;
    pw_reset (writer);
    assert_int_equal (proto_msg_encode (&copy, writer), 0);
}

//  Asserts that two hellos encode to the same bytes.
static void
s_assert_same_hello (const proto_msg_t *one, const proto_msg_t *other)
{
    pw_t *a = pw_new (), *b = pw_new ();
    s_encode (one, a);
    s_encode (other, b);
    assert_int_equal (pw_size (a), pw_size (b));
    assert_memory_equal (pw_data (a), pw_data (b), pw_size (a));
    pw_destroy (&a);
    pw_destroy (&b);
}

//  A deep copy of HELLO, through the codec.
static proto_msg_t *
s_copy (const proto_msg_t *hello)
{
    pw_t *writer = pw_new ();
    s_encode (hello, writer);
    proto_msg_t *copy = NULL;
    assert_int_equal (proto_msg_decode (pw_data (writer), pw_size (writer), &copy, NULL, 0), 0);
    pw_destroy (&writer);
    return copy;
}

static void
s_say_hello (registry_t *registry, proto_msg_t **hello_p, int64_t now_ms)
{
    assert_non_null (registry_hello (registry, hello_p, "rr", 2, now_ms, now_ms + 4000));
    assert_null (*hello_p);
}

//  A record of NODE, decoded: its root in *DOC_P.
static const pv_t *
s_record (const registry_node_t *node, pv_doc_t **doc_p)
{
    pw_t *writer = pw_new ();
    registry_node_encode_record (node, writer);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), doc_p, NULL, 0), 0);
    pw_destroy (&writer);
    return pv_doc_root (*doc_p);
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
        assert_non_null (registry_hello (registry, &hello, routing, 2, 1000, 5000));
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
    //  Counting alone gives the same count
    assert_int_equal (registry_resolve (registry, &target, NULL), count);
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

static int
s_compare_ids (const void *a, const void *b)
{
    return strcmp (*(const char *const *) a, *(const char *const *) b);
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
        //  Expressions are matched node by node against the registry
        {"group:web or group:db", "db-01,web-01,web-02"},
        {"group:web and label:tier=web.prod", "web-02"},
        {"all and not group:web", "db-01,webserver-01"},
        {"(group:web or group:db) and not node:web-01", "db-01,web-02"},
        {"label:tier=web or node:webserver-01,nobody",
         "web-01,web-02,webserver-01"},
        {"group:web and group:db", ""},
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
    assert_int_equal (target_parse ("group:web or group:db", &target, NULL,
                                    0),
                      0);
    assert_int_equal (registry_members (registry, &target), 3);
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
    registry_hello (registry, &hello, "zz", 2, 2000, 6000);
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

//  The ids in IDS (COUNT of them), sorted and joined by commas.
static char *
s_ids_text (const char **ids, size_t count)
{
    if (count > 1)
        qsort (ids, count, sizeof (char *), s_compare_ids);
    char *text = (char *) calloc (1, count * 16 + 1);
    assert_non_null (text);
    for (size_t index = 0; index < count; index++) {
        if (index)
            strcat (text, ",");
        strcat (text, ids [index]);
    }
    return text;
}

//  What a walk of every node finds due, as the checks did before they
//  kept deadlines in order: online nodes silent past TIMEOUT_MS
//  (EXPIRED), or offline ones past the grace with work not yet declared
//  lost.
static char *
s_scan (registry_t *registry, int64_t now_ms, int64_t timeout_ms,
        bool expired)
{
    registry_node_t **nodes = NULL;
    size_t count = registry_list (registry, &nodes);
    const char **ids = (const char **) calloc (count + 1, sizeof (char *));
    size_t due = 0;
    for (size_t index = 0; index < count; index++) {
        registry_node_t *node = nodes [index];
        if (expired ? node->online && now_ms - node->last_seen_ms > timeout_ms
                    : !node->online && !node->offline_reported && node->hello
                          && now_ms - node->offline_since_ms >= timeout_ms)
            ids [due++] = node->id;
    }
    char *text = s_ids_text (ids, due);
    free (ids);
    free (nodes);
    return text;
}

//  Random refreshes, hellos, byes, lost connections and checks (with a
//  clock that lags, as the broker's deadline clock does, and messages
//  whose times arrive slightly out of order): the ordered checks find
//  exactly what a walk of every node finds.
static void
test_registry_deadlines_match_a_full_walk (void **state)
{
    registry_t *registry = registry_new ();
    unsigned seed = 20261127;
    int64_t clock_ms = 1000;
    const int64_t timeout_ms = 900, grace_ms = 1500;
    size_t expired = 0, overdue = 0;
    for (int round = 0; round < 20000; round++) {
        char id [16];
        snprintf (id, sizeof id, "n-%02d", rand_r (&seed) % 40);
        registry_node_t *node = registry_lookup (registry, id);
        int64_t jitter_ms = rand_r (&seed) % 60 - 30;
        int op = rand_r (&seed) % 100;
        if (op < 10 || !node) {
            proto_msg_t *hello = s_hello (id, "web", NULL, NULL);
            registry_hello (registry, &hello, "rr", 2, clock_ms + jitter_ms,
                            clock_ms + 4000);
        }
        else
        if (op < 70)
            registry_touch (node, clock_ms + jitter_ms, clock_ms + 4000);
        else
        if (op < 74)
            registry_set_offline (node, clock_ms);
        else
        if (op < 77 && node->online) {
            //  A bye: offline, its work declared lost at once
            registry_set_offline (node, clock_ms);
            node->offline_reported = true;
        }
        else
        if (op < 90) {
            int64_t now_ms = clock_ms - rand_r (&seed) % 300;
            char *want = s_scan (registry, now_ms, timeout_ms, true);
            const char **ids = NULL;
            size_t count = registry_expire (registry, now_ms, timeout_ms, &ids);
            char *got = s_ids_text (ids, count);
            assert_string_equal (got, want);
            expired += count;
            free (got);
            free (want);
            free (ids);
        }
        else {
            int64_t now_ms = clock_ms - rand_r (&seed) % 300;
            char *want = s_scan (registry, now_ms, grace_ms, false);
            const char **ids = NULL;
            size_t count = registry_overdue (registry, now_ms, grace_ms, &ids);
            char *got = s_ids_text (ids, count);
            assert_string_equal (got, want);
            overdue += count;
            free (got);
            free (want);
            free (ids);
            //  Reported once only
            char *again = s_scan (registry, now_ms, grace_ms, false);
            assert_string_equal (again, "");
            free (again);
        }
        clock_ms += rand_r (&seed) % 40;
    }
    //  Every path was taken
    assert_true (expired > 100);
    assert_true (overdue > 20);
    registry_destroy (&registry);
}

//  A check looks at the first node in line and at the nodes whose
//  deadline passed, whatever the size of the fleet: 10,000 nodes
//  checked every 100 ms for a minute cost a look per check until their
//  deadline passes, then one each.
static void
test_registry_deadlines_cost_only_what_passed (void **state)
{
    registry_t *registry = registry_new ();
    for (int index = 0; index < 10000; index++) {
        char id [16];
        snprintf (id, sizeof id, "n-%05d", index);
        proto_msg_t *hello = s_hello (id, "web", NULL, NULL);
        registry_hello (registry, &hello, "rr", 2, 1000 + index, 5000);
    }
    const int64_t timeout_ms = 15000, grace_ms = 15000;
    uint64_t before = registry_deadline_visits (registry);
    size_t expired = 0, overdue = 0;
    for (int64_t now_ms = 1000; now_ms < 61000; now_ms += 100) {
        //  Everyone but n-00000 keeps beating every 5 s
        if (now_ms % 5000 == 0)
            for (int index = 1; index < 10000; index++) {
                char id [16];
                snprintf (id, sizeof id, "n-%05d", index);
                registry_touch (registry_lookup (registry, id), now_ms, now_ms);
            }
        const char **ids = NULL;
        expired += registry_expire (registry, now_ms, timeout_ms, &ids);
        free (ids);
        overdue += registry_overdue (registry, now_ms, grace_ms, &ids);
        free (ids);
    }
    assert_int_equal (expired, 1);
    assert_int_equal (overdue, 1);
    assert_false (registry_lookup (registry, "n-00000")->online);
    assert_true (registry_lookup (registry, "n-00001")->online);
    //  600 checks of each kind, two nodes whose deadline passed
    uint64_t visits = registry_deadline_visits (registry) - before;
    assert_true (visits <= 2 * 600 + 2);
    registry_destroy (&registry);
}

//  A node heard from queues for a save of its last-seen time once, at its
//  first message since its last save, in the order of those messages.
static void
test_registry_unsaved_nodes_in_order (void **state)
{
    registry_t *registry = s_fleet ();
    //  Every hello counts as a message
    registry_node_t *first = registry_unsaved_first (registry);
    assert_non_null (first);
    while ((first = registry_unsaved_first (registry)))
        registry_seen_saved (first);
    registry_touch (registry_lookup (registry, "db-01"), 2000, 6000);
    registry_touch (registry_lookup (registry, "web-02"), 2100, 6100);
    registry_touch (registry_lookup (registry, "db-01"), 2200, 6200);
    first = registry_unsaved_first (registry);
    assert_string_equal (first->id, "db-01");
    assert_int_equal (first->unsaved_since_ms, 2000);
    registry_seen_saved (first);
    first = registry_unsaved_first (registry);
    assert_string_equal (first->id, "web-02");
    registry_seen_saved (first);
    assert_null (registry_unsaved_first (registry));
    //  Saved twice: no harm
    registry_seen_saved (first);
    assert_null (registry_unsaved_first (registry));
    registry_destroy (&registry);
}

static void
test_registry_record_round_trip (void **state)
{
    registry_t *registry = s_fleet ();
    registry_node_t *node = registry_lookup (registry, "web-01");
    node->drained = true;
    snprintf (node->relay, sizeof node->relay, "dc1-a");
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
    assert_string_equal (copy->relay, "dc1-a");   //  As of its last hello
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

static void
test_registry_equal_backends_are_kept_once (void **state)
{
    registry_t *registry = s_fleet ();
    assert_int_equal (registry_backend_sets (registry), 1);
    const proto_backend_spec_t *shared = registry_lookup (registry, "web-01")->hello->backends;
    const char *ids [] = {"web-02", "webserver-01", "db-01"};
    for (size_t index = 0; index < 3; index++) {
        registry_node_t *node = registry_lookup (registry, ids [index]);
        assert_ptr_equal (node->hello->backends, shared);
        assert_int_equal (node->hello->backend_count, 1);
    }
    assert_string_equal (shared [0].actions [0].help, "say it");
    assert_non_null (registry_find_action (registry, "test", "echo", false));
    registry_destroy (&registry);
}

static void
test_registry_other_backends_make_another_list (void **state)
{
    registry_t *registry = s_fleet ();
    //  web-01 says hello again with one more backend.
    proto_msg_t *hello = s_hello ("web-01", "web", NULL, NULL);
    s_add_backend (hello, "pkg", "install", "Install a package");
    proto_msg_t *expected = s_copy (hello);
    s_say_hello (registry, &hello, 2000);
    assert_int_equal (registry_backend_sets (registry), 2);
    registry_node_t *web_01 = registry_lookup (registry, "web-01");
    registry_node_t *web_02 = registry_lookup (registry, "web-02");
    assert_ptr_not_equal (web_01->hello->backends, web_02->hello->backends);
    assert_int_equal (web_01->hello->backend_count, 2);
    s_assert_same_hello (web_01->hello, expected);
    const proto_action_spec_t *install = registry_find_action (registry, "pkg", "install", false);
    assert_non_null (install);
    assert_int_equal (install->param_count, 3);
    assert_string_equal (install->params [0].pattern, "^[a-z0-9.+-]+$");
    assert_null (registry_find_action (registry, "pkg", "remove", true));
    //  The same list again: the node keeps it.
    const proto_backend_spec_t *kept = web_01->hello->backends;
    hello = s_hello ("web-01", "web", NULL, NULL);
    s_add_backend (hello, "pkg", "install", "Install a package");
    s_say_hello (registry, &hello, 2500);
    assert_ptr_equal (web_01->hello->backends, kept);
    assert_int_equal (registry_backend_sets (registry), 2);
    //  Only web-01 offers pkg: once it is offline, only any_state finds it.
    registry_set_offline (web_01, 3000);
    assert_null (registry_find_action (registry, "pkg", "install", false));
    assert_ptr_equal (registry_find_action (registry, "pkg", "install", true), install);
    //  When every node has moved on, the first list is freed.
    const char *others [] = {"web-02", "webserver-01", "db-01"};
    for (size_t index = 0; index < 3; index++) {
        hello = s_hello (others [index], "web", NULL, NULL);
        s_add_backend (hello, "pkg", "install", "Install a package");
        s_say_hello (registry, &hello, 4000);
        assert_ptr_equal (registry_lookup (registry, others [index])->hello->backends, kept);
    }
    assert_int_equal (registry_backend_sets (registry), 1);
    assert_ptr_equal (registry_find_action (registry, "pkg", "install", false), install);
    //  Lists are equal only when everything is: another help text makes
    //  another list.
    hello = s_hello ("db-01", "db", NULL, NULL);
    s_add_backend (hello, "pkg", "install", "Install one package");
    s_say_hello (registry, &hello, 5000);
    assert_int_equal (registry_backend_sets (registry), 2);
    assert_string_equal (registry_lookup (registry, "db-01")->hello->backends [1].actions [0].help,
                         "Install one package");
    assert_string_equal (web_01->hello->backends [1].actions [0].help,
                         "Install a package");
    //  db-01 goes back to echo alone: its last list goes, the list of
    //  echo alone comes back.
    hello = s_hello ("db-01", "db", NULL, NULL);
    s_say_hello (registry, &hello, 6000);
    assert_int_equal (registry_backend_sets (registry), 2);
    assert_int_equal (registry_lookup (registry, "db-01")->hello->backend_count, 1);
    assert_ptr_equal (registry_find_action (registry, "pkg", "install", false), install);
    proto_msg_destroy (&expected);
    registry_destroy (&registry);
}

//  A hello whose "backends" value is, byte for byte, the encoding of a
//  list a node declares is found by its bytes, and a hello decoded
//  without them declares that list: the same record as a whole decode
//  gives, and the list goes with its last node.
static void
test_registry_known_backends_by_their_bytes (void **state)
{
    registry_t *registry = registry_new ();
    proto_msg_t *hello = s_hello ("web-01", "web", "tier", "web.dev");
    s_add_backend (hello, "pkg", "install", "Install a package");
    pw_t *writer = pw_new ();
    s_encode (hello, writer);
    //  The "backends" value of the encoded hello
    size_t at = 0, len = 0;
    assert_int_equal (mpscan_map_find (pw_data (writer), pw_size (writer),
                                       "backends", false, &at, &len), 0);
    const uint8_t *list = (const uint8_t *) pw_data (writer) + at;
    //  Nobody declares it yet
    assert_null (registry_backends_find (registry, list, len));
    proto_msg_t *expected = s_copy (hello);
    s_say_hello (registry, &hello, 1000);
    const registry_backend_set_t *known
        = registry_backends_find (registry, list, len);
    assert_non_null (known);
    size_t count = 0;
    const proto_backend_spec_t *specs = registry_backends_list (known, &count);
    assert_int_equal (count, 2);
    assert_ptr_equal (specs, registry_lookup (registry, "web-01")->hello->backends);
    //  One byte off, or one byte short: not that list
    uint8_t *other = (uint8_t *) malloc (len);
    memcpy (other, list, len);
    other [len - 1] ^= 1;
    assert_null (registry_backends_find (registry, other, len));
    assert_null (registry_backends_find (registry, list, len - 1));
    free (other);
    //  web-02's hello, decoded without its backends, declares the list
    proto_msg_t *named = s_copy (expected);
    free (named->node);
    named->node = strdup ("web-02");
    s_encode (named, writer);
    assert_int_equal (mpscan_map_find (pw_data (writer), pw_size (writer),
                                       "backends", false, &at, &len), 0);
    assert_ptr_equal (registry_backends_find (
                          registry, (const uint8_t *) pw_data (writer) + at,
                          len),
                      known);
    uint8_t *rest = (uint8_t *) malloc (pw_size (writer));
    const uint8_t empty_list = 0x90;
    size_t rest_size = mpscan_replace (pw_data (writer), pw_size (writer), at,
                                       len, &empty_list, 1, rest,
                                       pw_size (writer));
    proto_msg_t *bare = NULL;
    assert_int_equal (proto_msg_decode (rest, rest_size, &bare, NULL, 0), 0);
    free (rest);
    assert_int_equal (bare->backend_count, 0);
    registry_node_t *node = registry_hello_declaring (registry, &bare, known,
                                                      "r2", 2, 1000, 5000);
    assert_non_null (node);
    assert_null (bare);
    assert_int_equal (registry_backend_sets (registry), 1);
    assert_ptr_equal (node->hello->backends, specs);
    //  Its record holds the hello as it came, as after a whole decode
    pv_doc_t *doc = NULL;
    const pv_t *record = s_record (node, &doc);
    size_t size = 0;
    const char *bytes = pv_str (pv_map_get (record, "hello"), &size);
    assert_int_equal (size, pw_size (writer));
    assert_memory_equal (bytes, pw_data (writer), size);
    pv_doc_destroy (&doc);
    //  Both nodes move to echo alone: the list goes, and its bytes with it
    proto_msg_t *plain = s_hello ("web-01", "web", NULL, NULL);
    s_say_hello (registry, &plain, 2000);
    assert_non_null (registry_backends_find (registry, list, len));
    plain = s_hello ("web-02", "web", NULL, NULL);
    s_say_hello (registry, &plain, 2000);
    assert_int_equal (registry_backend_sets (registry), 1);
    assert_null (registry_backends_find (registry, list, len));
    proto_msg_destroy (&named);
    proto_msg_destroy (&expected);
    pw_destroy (&writer);
    registry_destroy (&registry);
}

static void
test_registry_record_holds_the_hello_as_encoded (void **state)
{
    registry_t *registry = registry_new ();
    proto_msg_t *hello = s_hello ("web-01", "web", "tier", "web.dev");
    s_add_backend (hello, "pkg", "install", "Install a package");
    proto_msg_t *expected = s_copy (hello);
    s_say_hello (registry, &hello, 1000);
    hello = s_copy (expected);
    free (hello->node);
    hello->node = strdup ("web-02");
    s_say_hello (registry, &hello, 1000);
    assert_int_equal (registry_backend_sets (registry), 1);

    //  The record's hello is what the codec writes for it.
    pv_doc_t *doc = NULL;
    const pv_t *record = s_record (registry_lookup (registry, "web-01"), &doc);
    pw_t *writer = pw_new ();
    s_encode (expected, writer);
    size_t size = 0;
    const char *bytes = pv_str (pv_map_get (record, "hello"), &size);
    assert_int_equal (size, pw_size (writer));
    assert_memory_equal (bytes, pw_data (writer), size);

    //  Restored, both nodes hold the same backends, once.
    registry_t *restored = registry_new ();
    assert_int_equal (registry_load (restored, record), 0);
    pv_doc_t *other = NULL;
    assert_int_equal (registry_load (restored, s_record (registry_lookup (registry, "web-02"), &other)), 0);
    assert_int_equal (registry_size (restored), 2);
    assert_int_equal (registry_backend_sets (restored), 1);
    registry_node_t *copy = registry_lookup (restored, "web-01");
    assert_false (copy->online);
    assert_int_equal (copy->registered_wall_ms, 5000);
    s_assert_same_hello (copy->hello, expected);
    assert_ptr_equal (copy->hello->backends, registry_lookup (restored, "web-02")->hello->backends);
    //  A record loaded again replaces the node and keeps one list.
    assert_int_equal (registry_load (restored, record), 0);
    assert_int_equal (registry_size (restored), 2);
    assert_int_equal (registry_backend_sets (restored), 1);
    const proto_action_spec_t *install = registry_find_action (restored, "pkg", "install", true);
    assert_non_null (install);
    assert_int_equal (install->params [2].max_value, 5);
    assert_null (registry_find_action (restored, "pkg", "install", false));
    pv_doc_destroy (&other);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    proto_msg_destroy (&expected);
    registry_destroy (&restored);
    registry_destroy (&registry);
}

static void
test_registry_restores_records_of_the_earlier_layout (void **state)
{
    //  The earlier registry stored the hello's bytes as received. A
    //  script may order its keys as it likes: this one sends them in
    //  reverse, and its backends hold keys in another order too.
    pw_t *hello = pw_new ();
    pw_map (hello, 9);
    pw_str (hello, "concurrency");
    pw_int (hello, 2);
    pw_str (hello, "version");
    pw_str (hello, "0.0.9");
    pw_str (hello, "backends");
    pw_array (hello, 1);
    pw_map (hello, 2);
    pw_str (hello, "actions");
    pw_array (hello, 1);
    pw_map (hello, 4);
    pw_str (hello, "params");
    pw_array (hello, 1);
    pw_map (hello, 6);
    pw_str (hello, "max");
    pw_int (hello, 9);
    pw_str (hello, "min");
    pw_int (hello, 1);
    pw_str (hello, "help");
    pw_str (hello, "how many");
    pw_str (hello, "type");
    pw_str (hello, "int");
    pw_str (hello, "required");
    pw_bool (hello, false);
    pw_str (hello, "name");
    pw_str (hello, "count");
    pw_str (hello, "help");
    pw_str (hello, "say it");
    pw_str (hello, "kind");
    pw_str (hello, "query");
    pw_str (hello, "name");
    pw_str (hello, "echo");
    pw_str (hello, "name");
    pw_str (hello, "test");
    pw_str (hello, "labels");
    pw_map (hello, 1);
    pw_str (hello, "tier");
    pw_str (hello, "web.prod");
    pw_str (hello, "groups");
    pw_array (hello, 1);
    pw_str (hello, "web");
    pw_str (hello, "hostname");
    pw_str (hello, "old-host");
    pw_str (hello, "node");
    pw_str (hello, "web-09");
    pw_str (hello, "type");
    pw_str (hello, "hello");
    pw_str (hello, "v");
    pw_int (hello, 1);
    pw_t *writer = pw_new ();
    pw_map (writer, 4);
    pw_str (writer, "hello");
    pw_bin (writer, pw_data (hello), pw_size (hello));
    pw_str (writer, "registered_at_ms");
    pw_int (writer, 1700000000000);
    pw_str (writer, "last_seen_ms");
    pw_int (writer, 1700000001000);
    pw_str (writer, "drained");
    pw_bool (writer, true);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0), 0);

    registry_t *registry = registry_new ();
    assert_int_equal (registry_load (registry, pv_doc_root (doc)), 0);
    registry_node_t *node = registry_lookup (registry, "web-09");
    assert_non_null (node);
    assert_false (node->online);
    assert_true (node->drained);
    assert_int_equal (node->registered_wall_ms, 1700000000000);
    assert_int_equal (node->last_seen_wall_ms, 1700000001000);
    assert_string_equal (node->hello->hostname, "old-host");
    assert_int_equal (node->hello->concurrency, 2);
    assert_int_equal (registry_backend_sets (registry), 1);
    const proto_action_spec_t *echo = registry_find_action (registry, "test", "echo", true);
    assert_non_null (echo);
    assert_int_equal (echo->params [0].min_value, 1);
    assert_int_equal (echo->params [0].max_value, 9);
    //  node.get shows the backends in the hello form, bounds included
    pw_t *shown = pw_new ();
    registry_node_encode (node, shown, true);
    pv_doc_t *shown_doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (shown), pw_size (shown),
                                     &shown_doc, NULL, 0), 0);
    const pv_t *backends = pv_map_get (pv_doc_root (shown_doc), "backends");
    const pv_t *param = NULL;
    for (size_t b = 0; b < pv_size (backends); b++) {
        const pv_t *backend = pv_array_at (backends, b);
        const pv_t *actions = pv_map_get (backend, "actions");
        for (size_t a = 0; a < pv_size (actions); a++)
            if (pv_str_eq (pv_map_get (backend, "name"), "test")
            &&  pv_str_eq (pv_map_get (pv_array_at (actions, a), "name"),
                           "echo"))
                param = pv_array_at (pv_map_get (pv_array_at (actions, a),
                                                 "params"), 0);
    }
    assert_non_null (param);
    int64_t bound = 0;
    assert_int_equal (pv_get_int (pv_map_get (param, "min"), &bound), 0);
    assert_int_equal (bound, 1);
    assert_int_equal (pv_get_int (pv_map_get (param, "max"), &bound), 0);
    assert_int_equal (bound, 9);
    pv_doc_destroy (&shown_doc);
    pw_destroy (&shown);
    //  The node says hello with the same backends: it keeps their list.
    proto_msg_t *decoded = NULL;
    assert_int_equal (proto_msg_decode (pw_data (hello), pw_size (hello), &decoded, NULL, 0), 0);
    const proto_backend_spec_t *list = node->hello->backends;
    s_say_hello (registry, &decoded, 1000);
    assert_ptr_equal (node->hello->backends, list);
    assert_int_equal (registry_backend_sets (registry), 1);
    //  Written again, the record reads back the same node.
    pv_doc_t *again = NULL;
    const pv_t *record = s_record (node, &again);
    registry_t *restored = registry_new ();
    assert_int_equal (registry_load (restored, record), 0);
    registry_node_t *copy = registry_lookup (restored, "web-09");
    s_assert_same_hello (copy->hello, node->hello);
    assert_true (copy->drained);
    pv_doc_destroy (&again);
    registry_destroy (&restored);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    pw_destroy (&hello);
    registry_destroy (&registry);
}

static void
test_registry_record_of_every_built_in_backend (void **state)
{
    //  What a real agent declares: the record's hello must still be the
    //  codec's own bytes.
    proto_msg_t *hello = s_hello ("node-1", "web", "tier", "web");
    proto_msg_t *spare = proto_msg_new (PROTO_HELLO);
    spare->backends = hello->backends;
    spare->backend_count = hello->backend_count;
    proto_msg_destroy (&spare);
    assert_int_equal (backends_hello_specs (NULL, 0, &hello->backends, &hello->backend_count), 0);
    assert_true (hello->backend_count > 1);
    proto_msg_t *expected = s_copy (hello);
    registry_t *registry = registry_new ();
    s_say_hello (registry, &hello, 1000);
    pv_doc_t *doc = NULL;
    const pv_t *record = s_record (registry_lookup (registry, "node-1"), &doc);
    pw_t *writer = pw_new ();
    s_encode (expected, writer);
    size_t size = 0;
    const char *bytes = pv_str (pv_map_get (record, "hello"), &size);
    assert_int_equal (size, pw_size (writer));
    assert_memory_equal (bytes, pw_data (writer), size);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    proto_msg_destroy (&expected);
    registry_destroy (&registry);
}

//  A spec of TARGET_TEXT with the leaves test.echo and apt.install.
static job_spec_t *
s_two_step_spec (const char *target_text)
{
    job_spec_t *spec = (job_spec_t *) calloc (1, sizeof (job_spec_t));
    char err [256];
    assert_int_equal (target_parse (target_text, &spec->target, err,
                                    sizeof err), 0);
    spec->phases = (job_phase_t *) calloc (2, sizeof (job_phase_t));
    spec->phase_count = 2;
    spec->phases [0].backend = strdup ("test");
    spec->phases [0].action = strdup ("echo");
    spec->phases [1].backend = strdup ("apt");
    spec->phases [1].action = strdup ("install");
    return spec;
}

//  Every node a job names or covers that cannot run it is answered for:
//  offline (since its last message), drained, or lacking an action.
static void
test_registry_unavailable_says_why (void **state)
{
    registry_t *registry = s_fleet ();
    //  web-01 and web-02 offer apt.install; web-02 is drained;
    //  webserver-01 went offline
    const char *with_apt [] = {"web-01", "web-02"};
    for (int index = 0; index < 2; index++) {
        proto_msg_t *hello = s_hello (with_apt [index], "web", NULL, NULL);
        s_add_backend (hello, "apt", "install", "install a package");
        assert_non_null (registry_hello (registry, &hello, "rx", 2, 1000,
                                         43267000));   //  12:01:07 UTC
    }
    registry_lookup (registry, "web-02")->drained = true;
    registry_node_t *gone = registry_lookup (registry, "webserver-01");
    gone->last_seen_wall_ms = 43267000;
    registry_set_offline (gone, 2000);

    job_spec_t *spec = s_two_step_spec ("node:web-01,web-02,webserver-01,db-01");
    sched_not_run_t *list = NULL;
    size_t count = registry_unavailable (registry, spec, 43300000, &list);
    assert_int_equal (count, 3);
    assert_string_equal (list [0].node, "web-02");
    assert_int_equal (list [0].status, SCHED_CELL_DRAINED);
    assert_string_equal (list [0].reason, "drained");
    assert_true (list [0].named);
    assert_string_equal (list [1].node, "webserver-01");
    assert_int_equal (list [1].status, SCHED_CELL_OFFLINE);
    assert_string_equal (list [1].reason, "offline since 12:01:07");
    assert_string_equal (list [2].node, "db-01");
    assert_int_equal (list [2].status, SCHED_CELL_UNSUPPORTED);
    assert_string_equal (list [2].reason, "does not offer apt.install");
    sched_not_run_free (list, count);
    //  More than a day later the date is given too
    count = registry_unavailable (registry, spec, 43267000 + 90000000LL, &list);
    assert_string_equal (list [1].reason,
                         "offline since 1970-01-01 12:01:07");
    sched_not_run_free (list, count);
    job_spec_destroy (&spec);

    //  A group's members are listed, not named
    spec = s_two_step_spec ("group:web");
    count = registry_unavailable (registry, spec, 43300000, &list);
    assert_int_equal (count, 1);
    assert_string_equal (list [0].node, "web-02");
    assert_false (list [0].named);
    sched_not_run_free (list, count);
    job_spec_destroy (&spec);
    //  Every node can run it: nothing
    spec = s_two_step_spec ("node:web-01");
    assert_int_equal (registry_unavailable (registry, spec, 43300000, &list), 0);
    assert_null (list);
    job_spec_destroy (&spec);
    registry_destroy (&registry);
}

//  ---------------------------------------------------------------------
//  Facts and targets by fact

//  Registers node ID (group GROUP) with facts "k=v" ... NULL.
static registry_node_t *
s_fact_node (registry_t *registry, const char *id, const char *group, ...)
{
    proto_msg_t *hello = s_hello (id, group, NULL, NULL);
    registry_node_t *node = registry_hello (registry, &hello, "rr", 2, 1000,
                                            5000);
    assert_non_null (node);
    proto_kv_t facts [16];
    size_t count = 0;
    va_list args;
    va_start (args, group);
    const char *pair;
    char keys [16][64];
    while ((pair = va_arg (args, const char *)) != NULL) {
        const char *equals = strchr (pair, '=');
        snprintf (keys [count], sizeof keys [count], "%.*s",
                  (int) (equals - pair), pair);
        facts [count].key = keys [count];
        facts [count].value = (char *) equals + 1;
        count++;
    }
    va_end (args);
    assert_int_equal (registry_set_facts (registry, node, facts, count), 1);
    return node;
}

//  The ids TEXT resolves to, joined by ','.
static char *
s_resolved (registry_t *registry, const char *text)
{
    target_t target;
    char err [256];
    if (target_parse (text, &target, err, sizeof err) != 0)
        fail_msg ("%s: %s", text, err);
    char **ids = NULL;
    size_t count = registry_resolve (registry, &target, &ids);
    char *joined = calloc (1, 1024);
    for (size_t index = 0; index < count; index++) {
        if (index)
            strcat (joined, ",");
        strcat (joined, ids [index]);
        free (ids [index]);
    }
    free (ids);
    //  Counting alone gives as many
    assert_int_equal (registry_resolve (registry, &target, NULL), count);
    target_clear (&target);
    return joined;
}

static void
s_assert_resolves (registry_t *registry, const char *text,
                   const char *expected)
{
    char *got = s_resolved (registry, text);
    if (strcmp (got, expected))
        fail_msg ("%s: resolved '%s', expected '%s'", text, got, expected);
    free (got);
}

static void
test_registry_fact_targets (void **state)
{
    registry_t *registry = registry_new ();
    s_fact_node (registry, "a", "web", "os=debian", "mem_mb=8192",
                 "arch=arm64", "os_version=12.5", NULL);
    s_fact_node (registry, "b", "web", "os=debian", "mem_mb=2048",
                 "arch=x86_64", "os_version=11", NULL);
    s_fact_node (registry, "c", "db", "os=ubuntu", "mem_mb=4096.0",
                 "arch=arm64", "os_version=22.04", NULL);
    s_fact_node (registry, "d", "db", "os=rocky", "mem_mb=lots", NULL);
    s_assert_resolves (registry, "fact:os=debian", "a,b");
    s_assert_resolves (registry, "fact:os!=debian", "c,d");
    s_assert_resolves (registry, "fact:mem_mb>=4096", "a,c");
    s_assert_resolves (registry, "fact:mem_mb=4096", "c");
    s_assert_resolves (registry, "fact:mem_mb<4096", "b");
    s_assert_resolves (registry, "fact:mem_mb>4096", "a");   //  Not "lots"
    s_assert_resolves (registry, "fact:mem_mb<=8192", "a,b,c");
    s_assert_resolves (registry, "fact:os_version~=12.*", "a");
    s_assert_resolves (registry, "fact:os~=*u*", "c");
    s_assert_resolves (registry, "fact:os>=r", "c,d");
    s_assert_resolves (registry, "fact:rack=r1", "");
    s_assert_resolves (registry, "group:web and fact:arch=arm64", "a");
    s_assert_resolves (registry,
                       "fact:arch=arm64 and fact:os=ubuntu and group:db", "c");
    s_assert_resolves (registry, "fact:os=rocky or fact:arch=arm64", "a,c,d");
    s_assert_resolves (registry, "not fact:arch=arm64", "b,d");
    s_assert_resolves (registry, "group:db and not fact:os=rocky", "c");

    //  A change moves the node in the index; the same facts change nothing
    registry_node_t *b = registry_lookup (registry, "b");
    proto_kv_t moved [] = {{.key = "os", .value = "ubuntu"},
                           {.key = "arch", .value = "arm64"}};
    assert_int_equal (registry_set_facts (registry, b, moved, 2), 1);
    assert_int_equal (registry_set_facts (registry, b, moved, 2), 0);
    assert_string_equal (registry_node_fact (b, "arch"), "arm64");
    assert_null (registry_node_fact (b, "mem_mb"));
    s_assert_resolves (registry, "fact:os=debian", "a");
    s_assert_resolves (registry, "fact:os=ubuntu", "b,c");
    s_assert_resolves (registry, "fact:mem_mb<4096", "");
    //  Offline and drained nodes are not resolved, but selected
    registry_set_offline (registry_lookup (registry, "c"), 2000);
    s_assert_resolves (registry, "fact:os=ubuntu", "b");
    target_t target;
    assert_int_equal (target_parse ("fact:os=ubuntu", &target, NULL, 0), 0);
    char **ids = NULL;
    assert_int_equal (registry_select (registry, &target, &ids), 2);
    free (ids [0]);
    free (ids [1]);
    free (ids);
    assert_int_equal (registry_members (registry, &target), 2);
    target_clear (&target);

    //  Refused whole: a name twice, a bad name or value, too many
    proto_kv_t twice [] = {{.key = "os", .value = "a"},
                           {.key = "os", .value = "b"}};
    assert_int_equal (registry_set_facts (registry, b, twice, 2), -1);
    proto_kv_t bad_name [] = {{.key = "o.s", .value = "a"}};
    assert_int_equal (registry_set_facts (registry, b, bad_name, 1), -1);
    proto_kv_t bad_value [] = {{.key = "os", .value = "a\nb"}};
    assert_int_equal (registry_set_facts (registry, b, bad_value, 1), -1);
    assert_int_equal (registry_set_facts (registry, b, twice,
                                          FACT_MAX_COUNT + 1), -1);
    assert_string_equal (registry_node_fact (b, "os"), "ubuntu");
    //  None at all: out of the index
    assert_int_equal (registry_set_facts (registry, b, NULL, 0), 1);
    s_assert_resolves (registry, "fact:arch=arm64", "a");
    registry_destroy (&registry);
}

//  ---------------------------------------------------------------------
//  The indexes against a walk of every node: random fleets that change
//  (nodes that join, change groups, labels and facts, say hello again,
//  are restored from their record, go offline, expire, are drained) and
//  random expressions of every kind of term under not, and and or.

static uint32_t
s_random (uint32_t *seed)
{
    //  xorshift32: the same sequence on every machine
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    return *seed;
}

#define S_PICK(seed, list) (list [s_random (seed) % (sizeof list / sizeof list [0])])

static const char *s_groups [] = {"web", "db", "api", "edge", "cache"};
static const char *s_label_keys [] = {"tier", "env"};
static const char *s_label_values [] = {"web", "web.dev", "web.dev.us",
                                        "web.prod", "data", "data.x", "dev"};
static const char *s_fact_names [] = {"os", "mem_mb", "arch", "rack"};
static const char *s_fact_values [][6] = {
    {"debian", "ubuntu", "rocky", "debian", "alpine", "ubuntu"},
    {"1024", "2048", "4096", "8192.0", "16384", "lots"},
    {"x86_64", "arm64", "arm64", "x86_64", "riscv64", "arm64"},
    {"r0", "r1", "r2", "r3", "r10", "r1"},
};

//  A hello for node ID with a few random groups and labels (each once,
//  as a hello must name them).
static proto_msg_t *
s_random_hello (uint32_t *seed, const char *id)
{
    proto_msg_t *hello = s_hello (id, NULL, NULL, NULL);
    size_t groups = s_random (seed) % 4, labels = s_random (seed) % 3;
    size_t first = s_random (seed);
    hello->groups = (char **) calloc (groups + 1, sizeof (char *));
    for (size_t index = 0; index < groups; index++)
        hello->groups [index] = strdup (s_groups [(first + index) % 5]);
    hello->group_count = groups;
    hello->labels = (proto_kv_t *) calloc (labels + 1, sizeof (proto_kv_t));
    for (size_t index = 0; index < labels; index++) {
        hello->labels [index].key = strdup (s_label_keys [(first + index) % 2]);
        hello->labels [index].value = strdup (S_PICK (seed, s_label_values));
    }
    hello->label_count = labels;
    return hello;
}

//  Gives NODE a random subset of the facts.
static void
s_random_facts (uint32_t *seed, registry_t *registry, registry_node_t *node)
{
    proto_kv_t facts [4];
    size_t count = 0;
    for (size_t name = 0; name < 4; name++)
        if (s_random (seed) % 4)
            facts [count++] = (proto_kv_t) {
                .key = (char *) s_fact_names [name],
                .value = (char *) s_fact_values [name][s_random (seed) % 6]};
    assert_true (registry_set_facts (registry, node, facts, count) >= 0);
}

//  Appends a random term to TEXT (of SIZE).
static void
s_random_term (uint32_t *seed, char *text, size_t size)
{
    static const char *ops [] = {"=", "!=", ">=", "<=", ">", "<", "~="};
    static const char *globs [] = {"deb*", "*u*", "r?", "arm*", "*"};
    size_t used = strlen (text);
    switch (s_random (seed) % 9) {
    case 0:
        snprintf (text + used, size - used, "all");
        break;
    case 1:
    case 2:
        snprintf (text + used, size - used, "group:%s",
                  S_PICK (seed, s_groups));
        break;
    case 3:
    case 4:
        snprintf (text + used, size - used, "label:%s=%s",
                  S_PICK (seed, s_label_keys), S_PICK (seed, s_label_values));
        break;
    case 5: {
        //  Two ids, some never registered
        uint32_t first = s_random (seed) % 160;
        snprintf (text + used, size - used, "node:n%03u,n%03u", first,
                  (first + 1 + s_random (seed) % 20) % 160);
        break;
    }
    default: {
        size_t name = s_random (seed) % 4;
        const char *op = S_PICK (seed, ops);
        const char *value = strcmp (op, "~=") == 0
                                ? S_PICK (seed, globs)
                                : s_fact_values [name][s_random (seed) % 6];
        snprintf (text + used, size - used, "fact:%s%s%s",
                  s_fact_names [name], op, value);
    }
    }
}

//  Appends a random expression of at most DEPTH levels to TEXT.
static void
s_random_expr (uint32_t *seed, char *text, size_t size, int depth)
{
    uint32_t shape = depth > 0 ? s_random (seed) % 5 : 0;
    size_t used = strlen (text);
    if (shape == 0) {
        s_random_term (seed, text, size);
        return;
    }
    if (shape == 1) {
        snprintf (text + used, size - used, "not (");
        s_random_expr (seed, text, size, depth - 1);
        strncat (text, ")", size - strlen (text) - 1);
        return;
    }
    size_t kids = 2 + s_random (seed) % 3;
    const char *op = shape % 2 ? " or " : " and ";
    for (size_t kid = 0; kid < kids; kid++) {
        if (kid)
            strncat (text, op, size - strlen (text) - 1);
        strncat (text, "(", size - strlen (text) - 1);
        s_random_expr (seed, text, size, depth - 1);
        strncat (text, ")", size - strlen (text) - 1);
    }
}

static const char *
s_node_fact (const void *node, const char *name)
{
    return registry_node_fact ((const registry_node_t *) node, name);
}

//  Whether NODE matches TARGET, by its own groups, labels and facts.
static bool
s_walk_matches (const registry_node_t *node, const target_t *target)
{
    const proto_msg_t *hello = node->hello;
    char *keys [8], *values [8];
    assert_true (hello->label_count <= 8);
    for (size_t index = 0; index < hello->label_count; index++) {
        keys [index] = hello->labels [index].key;
        values [index] = hello->labels [index].value;
    }
    target_subject_t subject = {.node_id = node->id, .groups = hello->groups,
                                .group_count = hello->group_count,
                                .label_keys = keys, .label_values = values,
                                .label_count = hello->label_count,
                                .fact = s_node_fact, .fact_arg = node};
    return target_matches_subject (target, &subject);
}

//  Asserts that TARGET resolves, selects and counts as a walk of every
//  node says.
static void
s_assert_walk_agrees (registry_t *registry, const char *text)
{
    target_t target;
    char err [256];
    if (target_parse (text, &target, err, sizeof err) != 0)
        fail_msg ("%s: %s", text, err);
    registry_node_t **nodes = NULL;
    size_t count = registry_list (registry, &nodes);
    char **resolved = NULL, **selected = NULL;
    size_t resolved_count = registry_resolve (registry, &target, &resolved);
    size_t selected_count = registry_select (registry, &target, &selected);
    size_t resolve_at = 0, select_at = 0;
    for (size_t index = 0; index < count; index++) {
        const registry_node_t *node = nodes [index];
        if (!s_walk_matches (node, &target))
            continue;
        //  Both lists are sorted, as registry_list is
        if (select_at >= selected_count
            || strcmp (selected [select_at], node->id) != 0)
            fail_msg ("%s: selects %s, a walk %s", text,
                      select_at < selected_count ? selected [select_at]
                                                 : "(none)", node->id);
        select_at++;
        if (!node->online || node->drained)
            continue;
        if (resolve_at >= resolved_count
            || strcmp (resolved [resolve_at], node->id) != 0)
            fail_msg ("%s: resolves %s, a walk %s", text,
                      resolve_at < resolved_count ? resolved [resolve_at]
                                                  : "(none)", node->id);
        resolve_at++;
    }
    if (select_at != selected_count || resolve_at != resolved_count)
        fail_msg ("%s: selects %zu and resolves %zu, a walk %zu and %zu",
                  text, selected_count, resolved_count, select_at,
                  resolve_at);
    if (target.scope != TARGET_NODE)
        assert_int_equal (registry_members (registry, &target), select_at);
    assert_int_equal (registry_resolve (registry, &target, NULL),
                      resolved_count);
    for (size_t index = 0; index < resolved_count; index++)
        free (resolved [index]);
    for (size_t index = 0; index < selected_count; index++)
        free (selected [index]);
    free (resolved);
    free (selected);
    free (nodes);
    target_clear (&target);
}

//  The index answers as a test of every node would, over many nodes and
//  values (a fixed pseudo-random fleet): fact terms alone, with a group,
//  two of them, an "or" of them (a node passing both counted once) and
//  an "or" with a group.
static void
test_registry_fact_index_agrees (void **state)
{
    registry_t *registry = registry_new ();
    uint32_t seed = 12345;
    for (int index = 0; index < 500; index++) {
        char id [16], mem [32], version [32], rack [32];
        seed = seed * 1103515245 + 12345;
        snprintf (id, sizeof id, "n%03d", index);
        snprintf (mem, sizeof mem, "mem_mb=%u", 512 * (1 + seed % 16));
        snprintf (version, sizeof version, "os_version=%u.%u",
                  10 + seed % 4, (seed >> 8) % 3);
        snprintf (rack, sizeof rack, "rack=r%u", (seed >> 4) % 7);
        s_fact_node (registry, id, (seed >> 12) % 2 ? "web" : "db", mem,
                     version, rack, NULL);
    }
    const char *targets [] = {
        "fact:mem_mb>=4096", "fact:mem_mb<1024", "fact:mem_mb=2048",
        "fact:mem_mb!=512", "fact:os_version>11.1", "fact:os_version~=12.*",
        "fact:rack=r3", "fact:rack<=r2", "group:web and fact:rack=r1",
        "fact:rack=r1 and fact:mem_mb>4000", "fact:rack=r9",
        "fact:rack=r1 or fact:mem_mb<1024", "fact:rack=r1 or fact:rack<=r2",
        "fact:rack=r9 or fact:os_version~=12.*",
        "fact:rack=r9 or fact:mem_mb=99", "fact:rack=r1 or group:web",
    };
    for (size_t t = 0; t < sizeof targets / sizeof targets [0]; t++)
        s_assert_walk_agrees (registry, targets [t]);
    registry_destroy (&registry);
}

//  Expressions answered from the group, label and fact indexes, named
//  one by one; a node that says hello with other groups and labels, or
//  is restored from its record, moves in them.
static void
test_registry_expressions_from_the_indexes (void **state)
{
    registry_t *registry = s_fleet ();
    const char *facts [][2] = {{"web-01", "arm64"}, {"web-02", "x86_64"},
                               {"webserver-01", "arm64"},
                               {"db-01", "arm64"}};
    for (size_t index = 0; index < 4; index++) {
        proto_kv_t fact = {.key = "arch", .value = (char *) facts [index][1]};
        assert_int_equal (registry_set_facts (
                              registry, registry_lookup (registry,
                                                         facts [index][0]),
                              &fact, 1), 1);
    }
    //  A second group for web-02
    proto_msg_t *hello = s_hello ("web-02", "web", "tier", "web.prod");
    hello->groups = (char **) realloc (hello->groups, 2 * sizeof (char *));
    hello->groups [1] = strdup ("edge");
    hello->group_count = 2;
    s_say_hello (registry, &hello, 1100);
    s_assert_resolves (registry, "label:tier=web and fact:arch=arm64",
                       "web-01");
    s_assert_resolves (registry, "label:tier=web.dev.us-east", "web-01");
    s_assert_resolves (registry, "label:tier=web.de", "");
    s_assert_resolves (registry, "group:web and group:edge", "web-02");
    s_assert_resolves (registry, "group:web and not group:edge", "web-01");
    s_assert_resolves (registry, "not (group:web or fact:arch=arm64)", "");
    s_assert_resolves (registry, "not group:web and fact:arch=arm64",
                       "db-01,webserver-01");
    s_assert_resolves (registry, "group:db or label:tier=web.prod",
                       "db-01,web-02");
    s_assert_resolves (registry, "all and not node:web-01,db-01",
                       "web-02,webserver-01");
    s_assert_resolves (registry, "not all", "");
    s_assert_resolves (registry, "all or group:nothing",
                       "db-01,web-01,web-02,webserver-01");
    s_assert_resolves (registry, "(group:web or group:db) and not "
                                 "label:tier=data and fact:arch!=x86_64",
                       "web-01");
    //  web-01 leaves web for db, its label goes
    hello = s_hello ("web-01", "db", NULL, NULL);
    s_say_hello (registry, &hello, 1200);
    s_assert_resolves (registry, "group:web", "web-02");
    s_assert_resolves (registry, "group:db and fact:arch=arm64",
                       "db-01,web-01");
    s_assert_resolves (registry, "label:tier=web", "web-02");
    //  Restored from an older record: back in web, with its label
    proto_msg_t *old = s_hello ("web-01", "web", "tier", "web.dev");
    pw_t *writer = pw_new ();
    s_encode (old, writer);
    proto_msg_destroy (&old);
    pw_t *record = pw_new ();
    pw_map (record, 1);
    pw_str (record, "hello");
    pw_bin (record, pw_data (writer), pw_size (writer));
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (record), pw_size (record), &doc,
                                     NULL, 0), 0);
    assert_int_equal (registry_load (registry, pv_doc_root (doc)), 0);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    pw_destroy (&record);
    //  Offline now: selected, not resolved
    s_assert_resolves (registry, "label:tier=web.dev", "");
    target_t target;
    assert_int_equal (target_parse ("label:tier=web.dev and group:web",
                                    &target, NULL, 0), 0);
    assert_int_equal (registry_members (registry, &target), 1);
    assert_int_equal (registry_select (registry, &target, NULL), 1);
    target_clear (&target);
    s_assert_resolves (registry, "group:db", "db-01");
    registry_destroy (&registry);
}

static void
test_registry_index_agrees_with_a_walk (void **state)
{
    uint32_t seed = 2026;
    registry_t *registry = registry_new ();
    int64_t now_ms = 1000;
    pw_t *writer = pw_new ();
    //  No node yet: nothing, whatever the target
    s_assert_walk_agrees (registry, "not (group:web and fact:os=debian)");
    s_assert_walk_agrees (registry, "all or label:tier=web");
    size_t cases = 0;
    for (int round = 0; round < 60; round++) {
        //  Changes: 150 ids, so that slots run over several words
        for (int change = 0; change < 40; change++) {
            char id [16];
            snprintf (id, sizeof id, "n%03u", s_random (&seed) % 150);
            registry_node_t *node = registry_lookup (registry, id);
            now_ms += 10;
            switch (node ? s_random (&seed) % 7 : 0) {
            case 0:
            case 1: {
                //  Joins, or says hello again with other groups and labels
                proto_msg_t *hello = s_random_hello (&seed, id);
                node = registry_hello (registry, &hello, "rr", 2, now_ms,
                                       now_ms);
                assert_non_null (node);
                if (s_random (&seed) % 2)
                    s_random_facts (&seed, registry, node);
                break;
            }
            case 2:
                s_random_facts (&seed, registry, node);
                break;
            case 3:
                registry_set_offline (node, now_ms);
                break;
            case 4:
                registry_set_drained (node, !node->drained);
                break;
            case 5: {
                //  Restored from its record, as at a broker's start
                pv_doc_t *doc = NULL;
                pw_reset (writer);
                registry_node_encode_record (node, writer);
                assert_int_equal (pv_doc_decode (pw_data (writer),
                                                 pw_size (writer), &doc,
                                                 NULL, 0), 0);
                assert_int_equal (registry_load (registry,
                                                 pv_doc_root (doc)), 0);
                pv_doc_destroy (&doc);
                break;
            }
            default: {
                //  The silent ones expire
                const char **ids = NULL;
                registry_expire (registry, now_ms, 200, &ids);
                free (ids);
            }
            }
        }
        for (int query = 0; query < 60; query++) {
            char text [TARGET_EXPR_MAX_LEN] = "";
            s_random_expr (&seed, text, sizeof text, 3);
            s_assert_walk_agrees (registry, text);
            cases++;
        }
    }
    assert_true (cases >= 3000);
    pw_destroy (&writer);
    registry_destroy (&registry);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_registry_resolves_targets_exactly),
        cmocka_unit_test (test_registry_unavailable_says_why),
        cmocka_unit_test (test_registry_offline_and_drained_nodes_are_not_resolved),
        cmocka_unit_test (test_registry_sessions_are_bound_to_their_connection),
        cmocka_unit_test (test_registry_expires_silent_nodes),
        cmocka_unit_test (test_registry_deadlines_match_a_full_walk),
        cmocka_unit_test (test_registry_deadlines_cost_only_what_passed),
        cmocka_unit_test (test_registry_unsaved_nodes_in_order),
        cmocka_unit_test (test_registry_record_round_trip),
        cmocka_unit_test (test_registry_lists_nodes_sorted_and_encodes_them),
        cmocka_unit_test (test_registry_equal_backends_are_kept_once),
        cmocka_unit_test (test_registry_other_backends_make_another_list),
        cmocka_unit_test (test_registry_known_backends_by_their_bytes),
        cmocka_unit_test (test_registry_record_holds_the_hello_as_encoded),
        cmocka_unit_test (test_registry_restores_records_of_the_earlier_layout),
        cmocka_unit_test (test_registry_record_of_every_built_in_backend),
        cmocka_unit_test (test_registry_fact_targets),
        cmocka_unit_test (test_registry_fact_index_agrees),
        cmocka_unit_test (test_registry_expressions_from_the_indexes),
        cmocka_unit_test (test_registry_index_agrees_with_a_walk),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
