/*  =========================================================================
    test_names - names, targets, topics, durations, ids and timestamps
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../proto/names.h"

//  Parses TEXT, which must fail with a sentence containing EXPECTED.
static void
s_assert_target_error (const char *text, const char *expected)
{
    target_t target;
    char err [256] = "";
    int rc = target_parse (text, &target, err, sizeof (err));
    if (rc == 0 || !strstr (err, expected))
        print_error ("target '%s': rc %d, error '%s', expected '%s'\n",
                     text ? text : "(null)", rc, err, expected);
    assert_int_equal (rc, -1);
    assert_non_null (strstr (err, expected));
    //  A failed parse leaves nothing to free
    assert_null (target.value);
    assert_null (target.nodes);
    assert_null (target.label_key);
}

static void
test_names_name_valid (void **state)
{
    char longest [NAME_MAX_LEN + 2];
    memset (longest, 'a', NAME_MAX_LEN);
    longest [NAME_MAX_LEN] = '\0';
    assert_true (name_valid ("web"));
    assert_true (name_valid ("a"));
    assert_true (name_valid ("Web-01_x"));
    assert_true (name_valid ("0"));
    assert_true (name_valid ("-"));
    assert_true (name_valid (longest));

    longest [NAME_MAX_LEN] = 'a';
    longest [NAME_MAX_LEN + 1] = '\0';
    assert_false (name_valid (longest));    //  65 characters
    assert_false (name_valid (""));
    assert_false (name_valid (NULL));
    assert_false (name_valid ("web 1"));
    assert_false (name_valid ("web.dev"));
    assert_false (name_valid ("."));
    assert_false (name_valid ("a/b"));
    assert_false (name_valid ("/"));
    assert_false (name_valid ("web\n"));
    assert_false (name_valid ("a:b"));
    assert_false (name_valid ("a=b"));
    //  Cyrillic 'а' (U+0430) and 'е' (U+0435) look like Latin letters
    assert_false (name_valid ("\xd0\xb0"));
    assert_false (name_valid ("w\xd0\xb5" "b"));
    assert_false (name_valid ("caf\xc3\xa9"));
}

static void
test_names_label_value_valid (void **state)
{
    assert_true (name_label_value_valid ("web"));
    assert_true (name_label_value_valid ("web.dev.us-east"));
    assert_true (name_label_value_valid ("a.b.c.d.e.f.g.h"));
    assert_false (name_label_value_valid ("a.b.c.d.e.f.g.h.i"));
    assert_false (name_label_value_valid (""));
    assert_false (name_label_value_valid (NULL));
    assert_false (name_label_value_valid ("."));
    assert_false (name_label_value_valid ("web."));
    assert_false (name_label_value_valid (".web"));
    assert_false (name_label_value_valid ("web..dev"));
    assert_false (name_label_value_valid ("web dev"));
    assert_false (name_label_value_valid ("web/dev"));
}

static void
test_names_target_forms (void **state)
{
    target_t target;
    char err [256] = "";

    assert_int_equal (target_parse ("all", &target, err, sizeof (err)), 0);
    assert_int_equal (target.scope, TARGET_ALL);
    assert_false (target.any);
    assert_null (target.value);
    target_clear (&target);

    assert_int_equal (target_parse ("group:web", &target, err, sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_GROUP);
    assert_string_equal (target.value, "web");
    target_clear (&target);
    assert_null (target.value);
    target_clear (&target);                 //  Safe on a cleared target

    assert_int_equal (target_parse ("node:web-01", &target, err, sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_NODE);
    assert_int_equal (target.node_count, 1);
    assert_string_equal (target.nodes [0], "web-01");
    target_clear (&target);

    assert_int_equal (
        target_parse ("node:c,a,b", &target, err, sizeof (err)), 0);
    assert_int_equal (target.node_count, 3);
    assert_string_equal (target.nodes [0], "c");    //  Order kept
    assert_string_equal (target.nodes [1], "a");
    assert_string_equal (target.nodes [2], "b");
    assert_string_equal (target.value, "c,a,b");
    target_clear (&target);

    assert_int_equal (target_parse ("label:tier=web.dev", &target, err,
                                    sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_LABEL);
    assert_string_equal (target.label_key, "tier");
    assert_string_equal (target.label_value, "web.dev");
    assert_string_equal (target.value, "tier=web.dev");
    target_clear (&target);

    assert_int_equal (target_parse ("any", &target, err, sizeof (err)), 0);
    assert_int_equal (target.scope, TARGET_ALL);
    assert_true (target.any);
    target_clear (&target);

    assert_int_equal (
        target_parse ("any:label:tier=web", &target, err, sizeof (err)), 0);
    assert_int_equal (target.scope, TARGET_LABEL);
    assert_true (target.any);
    assert_string_equal (target.label_value, "web");
    target_clear (&target);

    assert_int_equal (target_parse ("any:all", &target, err, sizeof (err)), 0);
    assert_int_equal (target.scope, TARGET_ALL);
    assert_true (target.any);
    target_clear (&target);
}

static void
test_names_target_node_list_bounds (void **state)
{
    //  TARGET_MAX_NODES ids fit; one more does not
    size_t size = 8 * (TARGET_MAX_NODES + 1) + 16;
    char *text = malloc (size);
    assert_non_null (text);
    size_t used = (size_t) snprintf (text, size, "node:");
    for (int i = 0; i < TARGET_MAX_NODES; i++)
        used += (size_t) snprintf (text + used, size - used, "%sn%d",
                                   i ? "," : "", i);
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse (text, &target, err, sizeof (err)), 0);
    assert_int_equal (target.node_count, TARGET_MAX_NODES);
    target_clear (&target);
    snprintf (text + used, size - used, ",extra");
    s_assert_target_error (text, "too many node ids (4097, at most 4096)");
    free (text);
}

static void
test_names_target_errors (void **state)
{
    s_assert_target_error ("group:web 1",
                           "bad target at column 11: expected 'and', 'or' "
                           "or the end after 'group:web', got '1'");
    s_assert_target_error ("group:w.b",
                           "group name 'w.b' is not valid: use letters, "
                           "digits, '_' and '-' (1 to 64)");
    s_assert_target_error ("grp:web", "unknown target scope 'grp' (all, "
                                      "group:G, node:ID[,ID...], "
                                      "label:KEY=V1.V2, fact:KEY=VALUE, "
                                      "any[:TARGET])");
    s_assert_target_error ("grp", "unknown target scope 'grp'");
    s_assert_target_error ("", "target is empty");
    s_assert_target_error (NULL, "target is empty");
    s_assert_target_error ("all:web", "target 'all' takes no value");
    s_assert_target_error ("group", "target 'group' needs a value");
    s_assert_target_error ("group:", "a group target needs a value");
    s_assert_target_error ("group:a.b", "group name 'a.b' is not valid");
    s_assert_target_error ("group:w\xd0\xb5" "b",
                           "group name 'w\xd0\xb5" "b' is not valid");
    s_assert_target_error ("node:", "a node target needs a value");
    s_assert_target_error ("node:a,,b", "node id '' is not valid");
    s_assert_target_error ("node:a,", "node id '' is not valid");
    s_assert_target_error ("node:a/b", "node id 'a/b' is not valid");
    s_assert_target_error ("node:a,b,a", "node id 'a' is listed twice");
    s_assert_target_error ("label:tier", "label target 'tier' needs "
                                         "KEY=VALUE");
    s_assert_target_error ("label:=web", "label key '' is not valid");
    s_assert_target_error ("label:ti er=web", "bad target at column 1: "
                                              "label target 'ti' needs "
                                              "KEY=VALUE");
    s_assert_target_error ("label:tier=", "label value '' is not valid");
    s_assert_target_error ("label:tier=web..dev",
                           "label value 'web..dev' is not valid");
    s_assert_target_error ("label:tier=a.b.c.d.e.f.g.h.i",
                           "label value 'a.b.c.d.e.f.g.h.i' is not valid");
    s_assert_target_error ("any:any", "'any' cannot be nested");
    s_assert_target_error ("any:any:all", "'any' cannot be nested");
    s_assert_target_error ("any:", "'any:' needs a target");
    s_assert_target_error ("any:grp:x", "unknown target scope 'grp'");
    //  Control bytes never reach the sentence
    s_assert_target_error ("group:a\nb", "group name 'a?b' is not valid");

    //  A long value is cut in the sentence, which still fits the buffer
    char text [200];
    memset (text, 'x', sizeof (text));
    memcpy (text, "group:", 6);
    text [sizeof (text) - 1] = '\0';
    s_assert_target_error (text, "...' is not valid");
}

static void
test_names_target_from_parts (void **state)
{
    target_t target;
    char err [256] = "";
    assert_int_equal (
        target_from_parts ("group", "web", false, &target, err, sizeof (err)),
        0);
    assert_int_equal (target.scope, TARGET_GROUP);
    assert_string_equal (target.value, "web");
    target_clear (&target);

    assert_int_equal (
        target_from_parts ("all", NULL, true, &target, err, sizeof (err)), 0);
    assert_int_equal (target.scope, TARGET_ALL);
    assert_true (target.any);
    target_clear (&target);

    //  GRID writes the value of an "all" target as ""
    assert_int_equal (
        target_from_parts ("all", "", false, &target, err, sizeof (err)), 0);
    target_clear (&target);

    assert_int_equal (target_from_parts ("node", "a,b", false, &target, err,
                                         sizeof (err)),
                      0);
    assert_int_equal (target.node_count, 2);
    target_clear (&target);

    assert_int_equal (target_from_parts ("label", "tier=web", false, &target,
                                         err, sizeof (err)),
                      0);
    assert_string_equal (target.label_key, "tier");
    target_clear (&target);

    assert_int_equal (
        target_from_parts ("grp", "web", false, &target, err, sizeof (err)),
        -1);
    assert_string_equal (err, "unknown target scope 'grp' (all, group, "
                              "node, label, fact, expr)");
    assert_int_equal (
        target_from_parts (NULL, "web", false, &target, err, sizeof (err)),
        -1);
    assert_non_null (strstr (err, "scope is missing"));
    assert_int_equal (
        target_from_parts ("group", NULL, false, &target, err, sizeof (err)),
        -1);
    assert_non_null (strstr (err, "needs a value"));
    assert_int_equal (
        target_from_parts ("all", "web", false, &target, err, sizeof (err)),
        -1);
    assert_non_null (strstr (err, "takes no value"));
    assert_int_equal (
        target_from_parts ("group", "group:web", false, &target, err,
                           sizeof (err)),
        -1);
    assert_non_null (strstr (err, "group name 'group:web' is not valid"));
}

//  Does a node labelled KEY=VALUE match TEXT?
static bool
s_label_matches (const char *text, const char *key, const char *value)
{
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse (text, &target, err, sizeof (err)), 0);
    char *keys [] = {"zone", (char *) key};
    char *values [] = {"eu", (char *) value};
    bool matches = target_matches (&target, "n1", NULL, 0, keys, values, 2);
    target_clear (&target);
    return matches;
}

static void
test_names_target_label_hierarchy (void **state)
{
    const char *have = "web.dev.us-east";
    assert_true (s_label_matches ("label:tier=web", "tier", have));
    assert_true (s_label_matches ("label:tier=web.dev", "tier", have));
    assert_true (s_label_matches ("label:tier=web.dev.us-east", "tier", have));
    assert_false (s_label_matches ("label:tier=we", "tier", have));
    assert_false (s_label_matches ("label:tier=web.prod", "tier", have));
    assert_false (s_label_matches ("label:tier=web.dev.us", "tier", have));
    assert_false (
        s_label_matches ("label:tier=web.dev.us-east.a", "tier", have));
    assert_false (s_label_matches ("label:role=web", "tier", have));
    assert_true (s_label_matches ("label:zone=eu", "tier", have));
    assert_true (s_label_matches ("any:label:tier=web", "tier", have));
}

static void
test_names_target_matches (void **state)
{
    char *groups [] = {"web", "prod"};
    target_t target;
    char err [256] = "";

    assert_int_equal (target_parse ("all", &target, err, sizeof (err)), 0);
    assert_true (target_matches (&target, "n1", NULL, 0, NULL, NULL, 0));
    target_clear (&target);

    assert_int_equal (target_parse ("group:prod", &target, err, sizeof (err)),
                      0);
    assert_true (target_matches (&target, "n1", groups, 2, NULL, NULL, 0));
    assert_false (target_matches (&target, "n1", groups, 1, NULL, NULL, 0));
    target_clear (&target);

    //  group/web/ never matches a node in group webserver
    assert_int_equal (target_parse ("group:we", &target, err, sizeof (err)),
                      0);
    assert_false (target_matches (&target, "n1", groups, 2, NULL, NULL, 0));
    target_clear (&target);

    assert_int_equal (target_parse ("node:a,n1", &target, err, sizeof (err)),
                      0);
    assert_true (target_matches (&target, "n1", NULL, 0, NULL, NULL, 0));
    assert_true (target_matches (&target, "a", NULL, 0, NULL, NULL, 0));
    assert_false (target_matches (&target, "n", NULL, 0, NULL, NULL, 0));
    assert_false (target_matches (&target, "n12", NULL, 0, NULL, NULL, 0));
    target_clear (&target);
}

//  The topic of target TEXT, compared with EXPECTED (NULL: no topic).
static void
s_assert_topic (const char *text, const char *expected)
{
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse (text, &target, err, sizeof (err)), 0);
    char *topic = target_topic (&target);
    if (expected)
        assert_string_equal (topic, expected);
    else
        assert_null (topic);
    free (topic);
    target_clear (&target);
}

static void
test_names_topics (void **state)
{
    s_assert_topic ("all", "all/");
    s_assert_topic ("any", "all/");
    s_assert_topic ("group:web", "group/web/");
    s_assert_topic ("label:tier=web.dev", "label/tier/web.dev/");
    s_assert_topic ("node:a", NULL);
    s_assert_topic ("node:a,b", NULL);
    char *topic = topic_for_node ("web-01");
    assert_string_equal (topic, "node/web-01/");
    free (topic);
}

static void
test_names_target_format_and_copy (void **state)
{
    const char *texts [] = {"all",        "any:all",        "group:web",
                            "node:a,b,c", "label:tier=web", "any:node:x",
                            "any:group:db"};
    for (size_t i = 0; i < sizeof (texts) / sizeof (texts [0]); i++) {
        target_t target, copy;
        char err [256] = "";
        assert_int_equal (target_parse (texts [i], &target, err, sizeof (err)),
                          0);
        assert_int_equal (target_copy (&copy, &target), 0);
        target_clear (&target);
        char *text = target_format (&copy);
        assert_string_equal (text, texts [i]);
        free (text);
        assert_non_null (strstr (texts [i], target_scope_name (copy.scope)));
        target_clear (&copy);
    }
    char *text = NULL;
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse ("any", &target, err, sizeof (err)), 0);
    text = target_format (&target);
    assert_string_equal (text, "any:all");
    free (text);
    target_clear (&target);
    assert_string_equal (target_scope_name (TARGET_LABEL), "label");
}

//  Parses TEXT, which must be an expression whose canonical text is
//  EXPECTED (or, when EXPECTED is a plain target, that plain target).
static void
s_assert_expression (const char *text, const char *expected)
{
    target_t target;
    char err [256] = "";
    int rc = target_parse (text, &target, err, sizeof (err));
    if (rc != 0)
        print_error ("target '%s': %s\n", text, err);
    assert_int_equal (rc, 0);
    char *formatted = target_format (&target);
    assert_string_equal (formatted, expected);
    //  The canonical text reads back to itself, and copies keep it
    target_t again, copy;
    assert_int_equal (target_parse (formatted, &again, err, sizeof (err)), 0);
    assert_int_equal (target_copy (&copy, &again), 0);
    char *twice = target_format (&copy);
    assert_string_equal (twice, expected);
    assert_int_equal (copy.scope, target.scope);
    assert_int_equal (copy.any, target.any);
    free (formatted);
    free (twice);
    target_clear (&target);
    target_clear (&again);
    target_clear (&copy);
}

static void
test_names_target_expressions (void **state)
{
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse ("group:web and label:tier=prod and not "
                                    "node:web-03",
                                    &target, err, sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_EXPR);
    assert_false (target.any);
    assert_non_null (target.expr);
    assert_string_equal (target.value, "group:web and label:tier=prod and "
                                       "not node:web-03");
    assert_string_equal (target_scope_name (TARGET_EXPR), "expr");
    //  An expression has no topic: it is sent to each node's own topic
    assert_null (target_topic (&target));
    target_clear (&target);
    assert_null (target.expr);

    //  Canonical text: one space around operators, parentheses only where
    //  precedence needs them, same-operator groups flattened
    s_assert_expression ("group:web   or\tgroup:db", "group:web or group:db");
    s_assert_expression ("(group:web or group:db) and not node:x",
                         "(group:web or group:db) and not node:x");
    s_assert_expression ("group:a or (group:b and group:c)",
                         "group:a or group:b and group:c");
    s_assert_expression ("group:a and (group:b and group:c)",
                         "group:a and group:b and group:c");
    s_assert_expression ("((group:a or group:b) or group:c)",
                         "group:a or group:b or group:c");
    s_assert_expression ("not (group:a or group:b)",
                         "not (group:a or group:b)");
    s_assert_expression ("not not group:a", "not not group:a");
    s_assert_expression ("not(group:a)and(group:b)",
                         "not group:a and group:b");
    s_assert_expression ("any:group:web and not node:web-03",
                         "any:group:web and not node:web-03");
    s_assert_expression ("any:(group:web or group:db)",
                         "any:group:web or group:db");
    s_assert_expression ("node:a,b and label:tier=web.dev",
                         "node:a,b and label:tier=web.dev");
    //  A single term reads as the plain target
    s_assert_expression ("(group:web)", "group:web");
    s_assert_expression (" all ", "all");
    assert_int_equal (target_parse ("( node:a,b )", &target, err,
                                    sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_NODE);
    assert_int_equal (target.node_count, 2);
    target_clear (&target);
    assert_int_equal (target_parse ("any:(label:tier=web)", &target, err,
                                    sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_LABEL);
    assert_true (target.any);
    target_clear (&target);

    //  The wire form {scope: "expr", value} and a plain scope both work
    assert_int_equal (target_from_parts ("expr", "group:a or group:b", true,
                                         &target, err, sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_EXPR);
    assert_true (target.any);
    assert_string_equal (target.value, "group:a or group:b");
    target_clear (&target);
    assert_int_equal (target_from_parts ("expr", "(group:a)", false, &target,
                                         err, sizeof (err)),
                      0);
    assert_int_equal (target.scope, TARGET_GROUP);
    target_clear (&target);
    assert_int_equal (target_from_parts ("expr", NULL, false, &target, err,
                                         sizeof (err)),
                      -1);
    assert_non_null (strstr (err, "an expr target needs a value"));
    assert_int_equal (target_from_parts ("expr", "group:a and", false,
                                         &target, err, sizeof (err)),
                      -1);
    assert_non_null (strstr (err, "column 12: expected a term after 'and'"));
    assert_null (target.value);
}

//  Does target TEXT match node ID with GROUPS (comma list) and one label?
static bool
s_expr_hits (const char *text, const char *id, const char *group_a,
             const char *group_b, const char *tier)
{
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse (text, &target, err, sizeof (err)), 0);
    char *groups [2] = {(char *) group_a, (char *) group_b};
    size_t group_count = group_b ? 2 : group_a ? 1 : 0;
    char *keys [1] = {"tier"};
    char *values [1] = {(char *) tier};
    bool hit = target_matches (&target, id, groups, group_count, keys, values,
                               tier ? 1 : 0);
    target_clear (&target);
    return hit;
}

static void
test_names_target_expression_matches (void **state)
{
    const char *text = "group:web and label:tier=prod and not node:web-03";
    assert_true (s_expr_hits (text, "web-01", "web", NULL, "prod"));
    assert_true (s_expr_hits (text, "web-02", "web", NULL, "prod.eu"));
    assert_false (s_expr_hits (text, "web-03", "web", NULL, "prod"));
    assert_false (s_expr_hits (text, "web-04", "web", NULL, "test"));
    assert_false (s_expr_hits (text, "web-05", "web", NULL, NULL));
    assert_false (s_expr_hits (text, "db-01", "db", NULL, "prod"));

    assert_true (s_expr_hits ("group:web or group:db", "a", "db", NULL,
                              NULL));
    assert_true (s_expr_hits ("group:web or group:db", "a", "x", "web",
                              NULL));
    assert_false (s_expr_hits ("group:web or group:db", "a", "x", NULL,
                               NULL));
    //  not > and > or: "a or b and not c" is "a or (b and (not c))"
    const char *mixed = "group:a or group:b and not node:n1";
    assert_true (s_expr_hits (mixed, "n1", "a", NULL, NULL));
    assert_false (s_expr_hits (mixed, "n1", "b", NULL, NULL));
    assert_true (s_expr_hits (mixed, "n2", "b", NULL, NULL));
    //  Parentheses change it
    const char *grouped = "(group:a or group:b) and not node:n1";
    assert_false (s_expr_hits (grouped, "n1", "a", NULL, NULL));
    assert_true (s_expr_hits (grouped, "n2", "a", NULL, NULL));
    assert_true (s_expr_hits ("not not group:a", "n", "a", NULL, NULL));
    assert_true (s_expr_hits ("all and not group:a", "n", "b", NULL, NULL));
    assert_false (s_expr_hits ("all and not group:a", "n", "a", NULL, NULL));
}

//  The ids a target names: a node list's, or every node: term's of an
//  expression, under not too; other scopes name none.
static void
test_names_target_named_nodes (void **state)
{
    target_t target;
    const char **ids = NULL;
    char err [256];
    assert_int_equal (target_parse ("node:a,b", &target, err, sizeof err), 0);
    assert_int_equal (target_named_nodes (&target, &ids), 2);
    assert_string_equal (ids [0], "a");
    assert_string_equal (ids [1], "b");
    free (ids);
    target_clear (&target);
    assert_int_equal (target_parse ("(group:web or node:x,y) and not node:z "
                                    "or label:k=v", &target, err, sizeof err),
                      0);
    assert_int_equal (target.scope, TARGET_EXPR);
    assert_int_equal (target_named_nodes (&target, &ids), 3);
    assert_string_equal (ids [0], "x");
    assert_string_equal (ids [1], "y");
    assert_string_equal (ids [2], "z");
    free (ids);
    target_clear (&target);
    assert_int_equal (target_parse ("group:web or label:k=v", &target, err,
                                    sizeof err), 0);
    assert_int_equal (target_named_nodes (&target, &ids), 0);
    assert_null (ids);
    target_clear (&target);
    assert_int_equal (target_parse ("all", &target, err, sizeof err), 0);
    assert_int_equal (target_named_nodes (&target, &ids), 0);
    assert_null (ids);
    target_clear (&target);
}

static void
test_names_target_expression_errors (void **state)
{
    s_assert_target_error ("group:web and",
                           "bad target at column 14: expected a term after "
                           "'and', got the end");
    s_assert_target_error ("group:web and label:tier=prod and",
                           "bad target at column 34: expected a term after "
                           "'and'");
    s_assert_target_error ("group:web or or group:db",
                           "bad target at column 14: expected a term after "
                           "'or', got 'or'");
    s_assert_target_error ("and group:web",
                           "bad target at column 1: expected a term, got "
                           "'and'");
    s_assert_target_error ("not", "bad target at column 4: expected a term "
                                  "after 'not', got the end");
    s_assert_target_error ("(group:web or group:db",
                           "bad target at column 23: expected ')' to close "
                           "the '(' at column 1, got the end");
    s_assert_target_error ("group:web)",
                           "bad target at column 10: ')' without a matching "
                           "'('");
    s_assert_target_error ("()", "bad target at column 2: expected a term "
                                 "after '(', got ')'");
    s_assert_target_error ("group:web and grp:db",
                           "bad target at column 15: unknown target scope "
                           "'grp'");
    s_assert_target_error ("group:web and node:a,a",
                           "bad target at column 15: node id 'a' is listed "
                           "twice");
    s_assert_target_error ("group:web and any:group:db",
                           "bad target at column 15: 'any' applies to the "
                           "whole target");
    s_assert_target_error ("group:web or any",
                           "bad target at column 14: 'any' applies");
    //  Columns count from the start of what was written, any: included
    s_assert_target_error ("any:group:web and",
                           "bad target at column 18: expected a term after "
                           "'and'");
    s_assert_target_error ("any:any:group:a and group:b",
                           "'any' cannot be nested");
    s_assert_target_error ("group:web\x01 or group:db",
                           "bad target at column 1: group name 'web?' is not "
                           "valid");
    s_assert_target_error ("   ", "bad target at column 4: expected a term, "
                                  "got the end");
}

static void
test_names_target_expression_bounds (void **state)
{
    //  TARGET_EXPR_MAX_DEPTH nested parentheses are fine, one more is not
    char text [TARGET_EXPR_MAX_LEN + 64];
    size_t at = 0;
    for (int i = 0; i < TARGET_EXPR_MAX_DEPTH; i++)
        text [at++] = '(';
    at += (size_t) sprintf (text + at, "group:a or group:b");
    for (int i = 0; i < TARGET_EXPR_MAX_DEPTH; i++)
        text [at++] = ')';
    text [at] = '\0';
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse (text, &target, err, sizeof (err)), 0);
    assert_string_equal (target.value, "group:a or group:b");
    target_clear (&target);
    memmove (text + 1, text, strlen (text) + 1);
    text [0] = '(';
    strcat (text, ")");
    s_assert_target_error (text, "bad target at column 17: nested too deep "
                                 "(at most 16 parentheses and nots)");
    at = 0;
    for (int i = 0; i <= TARGET_EXPR_MAX_DEPTH; i++)
        at += (size_t) sprintf (text + at, "not ");
    strcpy (text + at, "all");
    s_assert_target_error (text, "nested too deep");

    //  TARGET_EXPR_MAX_TERMS terms, then one too many
    at = 0;
    for (int i = 0; i < TARGET_EXPR_MAX_TERMS; i++)
        at += (size_t) sprintf (text + at, "%snode:n%d", i ? " or " : "", i);
    assert_int_equal (target_parse (text, &target, err, sizeof (err)), 0);
    assert_int_equal (target.scope, TARGET_EXPR);
    target_clear (&target);
    strcpy (text + at, " or node:last");
    s_assert_target_error (text, "too many terms (at most 64)");

    //  Length: one byte over the bound is refused before parsing
    memset (text, ' ', TARGET_EXPR_MAX_LEN + 1);
    memcpy (text, "all", 3);
    text [TARGET_EXPR_MAX_LEN + 1] = '\0';
    s_assert_target_error (text, "target expression is too long (4097 bytes, "
                                 "at most 4096)");
    text [TARGET_EXPR_MAX_LEN] = '\0';
    assert_int_equal (target_parse (text, &target, err, sizeof (err)), 0);
    assert_int_equal (target.scope, TARGET_ALL);
    target_clear (&target);
}

static void
test_names_duration_parse (void **state)
{
    int64_t ms = -1;
    assert_int_equal (duration_parse ("500ms", &ms), 0);
    assert_int_equal (ms, 500);
    assert_int_equal (duration_parse ("10s", &ms), 0);
    assert_int_equal (ms, 10000);
    assert_int_equal (duration_parse ("30m", &ms), 0);
    assert_int_equal (ms, 1800000);
    assert_int_equal (duration_parse ("1h30m", &ms), 0);
    assert_int_equal (ms, 5400000);
    assert_int_equal (duration_parse ("2d", &ms), 0);
    assert_int_equal (ms, 172800000);
    assert_int_equal (duration_parse ("1m30s250ms", &ms), 0);
    assert_int_equal (ms, 90250);
    assert_int_equal (duration_parse ("0s", &ms), 0);
    assert_int_equal (ms, 0);
    assert_int_equal (duration_parse ("30d", &ms), 0);
    assert_int_equal (ms, 30LL * 86400000);
    assert_int_equal (duration_parse ("720h", &ms), 0);

    const char *bad [] = {"",       "10",         "-1s",
                          "1.5s",   "10x",        "s",
                          " 10s",   "10s ",       "10 s",
                          "1S",     "30m1h",      "1h1h",
                          "31d",    "30d1ms",     "721h",
                          "2592000001ms",         "99999999999999999999s",
                          "9223372036854775807ms", "1h-30m", "+1s", "10sm"};
    for (size_t i = 0; i < sizeof (bad) / sizeof (bad [0]); i++) {
        ms = 7;
        if (duration_parse (bad [i], &ms) != -1)
            print_error ("duration '%s' was accepted\n", bad [i]);
        assert_int_equal (duration_parse (bad [i], &ms), -1);
        assert_int_equal (ms, 7);
    }
    assert_int_equal (duration_parse (NULL, &ms), -1);
}

static void
test_names_duration_format (void **state)
{
    const struct {
        int64_t ms;
        const char *text;
    } cases [] = {{0, "0s"},          {1, "1ms"},
                  {500, "500ms"},     {1500, "1500ms"},
                  {1000, "1s"},       {10000, "10s"},
                  {120000, "2m"},     {90000, "1m30s"},
                  {5400000, "1h30m"}, {172800000, "2d"},
                  {93784000, "1d2h3m4s"}, {-5, "0s"}};
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases [0]); i++) {
        char buf [32];
        duration_format (cases [i].ms, buf, sizeof (buf));
        assert_string_equal (buf, cases [i].text);
        //  And back
        int64_t ms = -1;
        assert_int_equal (duration_parse (buf, &ms), 0);
        assert_int_equal (ms, cases [i].ms < 0 ? 0 : cases [i].ms);
    }
}

//  Names and job ids take exactly their bytes, whatever the byte
static void
test_names_every_byte (void **state)
{
    for (int c = 1; c < 256; c++) {
        bool name_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                         || (c >= '0' && c <= '9') || c == '_' || c == '-';
        bool hex_char = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        char name [] = { 'a', (char) c, 'b', 0 };
        assert_int_equal (name_valid (name), name_char);
        char job [] = "j-0193a1b2c3d4-0001";
        job [5] = (char) c;
        assert_int_equal (job_id_valid (job), hex_char);
        job [5] = '3';
        job [17] = (char) c;
        assert_int_equal (job_id_valid (job), hex_char);
    }
}

//  Equal keys hash alike wherever they lie; a key is read up to its NUL
//  only; one byte changed at any place of any length changes the hash;
//  job ids spread over a table's buckets.
static void
test_names_id_hash (void **state)
{
    char text [41];
    for (size_t len = 0; len <= 40; len++) {
        for (size_t index = 0; index < len; index++)
            text [index] = (char) ('a' + (index * 7) % 26);
        text [len] = 0;
        char *copy = malloc (len + 1);
        assert_non_null (copy);
        memcpy (copy, text, len + 1);
        size_t hash = id_hash (text);
        assert_true (id_hash (copy) == hash);
        for (size_t index = 0; index < len; index++) {
            copy [index] ^= 1;
            assert_true (id_hash (copy) != hash);
            copy [index] ^= 1;
        }
        free (copy);
    }
    //  Job ids and numbered node names of every length spread over the
    //  buckets of a table, whether it takes the hash modulo a prime
    //  (CZMQ) or keeps its low bits (the scheduler's)
    enum { IDS = 10000, PRIME = 1021, MASK = 1023 };
    const char *formats [] = { "job", "n%d", "web-%d", "node-%05d",
                               "swarm-agent-%06d", "%d.rack-a.dc-east" };
    for (size_t form = 0; form < 6; form++) {
        size_t by_prime [PRIME] = { 0 };
        size_t by_mask [MASK + 1] = { 0 };
        int64_t last_ms = 0;
        uint32_t seq = 0;
        for (int i = 0; i < IDS; i++) {
            char id [64];
            if (form == 0)
                job_id_make (0x0193a1b2c3d4LL + i / 3, &last_ms, &seq, id,
                             sizeof id);
            else
                snprintf (id, sizeof id, formats [form], i);
            size_t hash = id_hash (id);
            by_prime [hash % PRIME]++;
            by_mask [hash & MASK]++;
        }
        size_t most = 0;
        for (size_t bucket = 0; bucket < PRIME; bucket++)
            most = by_prime [bucket] > most ? by_prime [bucket] : most;
        for (size_t bucket = 0; bucket <= MASK; bucket++)
            most = by_mask [bucket] > most ? by_mask [bucket] : most;
        //  About 10 a bucket: a poor hash piles them up
        if (most >= 30)
            fail_msg ("ids like '%s': %zu in one bucket", formats [form],
                      most);
    }
}

static void
test_names_job_ids (void **state)
{
    int64_t last_ms = 0;
    uint32_t seq = 0;
    enum { COUNT = 100000 };
    char (*ids) [JOB_ID_LEN + 1] = calloc (COUNT, JOB_ID_LEN + 1);
    assert_non_null (ids);
    //  100k ids in one millisecond: more than the 4-digit counter holds
    int64_t now_ms = 0x0193a1b2c3d4LL;
    for (int i = 0; i < COUNT; i++)
        job_id_make (now_ms, &last_ms, &seq, ids [i], JOB_ID_LEN + 1);
    assert_string_equal (ids [0], "j-0193a1b2c3d4-0000");
    assert_string_equal (ids [1], "j-0193a1b2c3d4-0001");
    for (int i = 0; i < COUNT; i++) {
        assert_true (job_id_valid (ids [i]));
        //  Strictly increasing also proves them unique
        if (i > 0)
            assert_true (strcmp (ids [i - 1], ids [i]) < 0);
    }
    //  Time moving on, or going back, keeps the order
    char later [JOB_ID_LEN + 1], earlier [JOB_ID_LEN + 1];
    job_id_make (now_ms + 10, &last_ms, &seq, later, sizeof (later));
    assert_true (strcmp (ids [COUNT - 1], later) < 0);
    assert_string_equal (later, "j-0193a1b2c3de-0000");
    job_id_make (now_ms - 1000, &last_ms, &seq, earlier, sizeof (earlier));
    assert_true (strcmp (later, earlier) < 0);
    free (ids);

    //  A later millisecond always sorts after
    last_ms = 0, seq = 0;
    char a [JOB_ID_LEN + 1], b [JOB_ID_LEN + 1];
    job_id_make (0xfff, &last_ms, &seq, a, sizeof (a));
    job_id_make (0x1000, &last_ms, &seq, b, sizeof (b));
    assert_true (strcmp (a, b) < 0);

    assert_true (job_id_valid ("j-0193a1b2c3d4-0001"));
    assert_false (job_id_valid ("j-0193a1b2c3d4-001"));
    assert_false (job_id_valid ("j-0193A1b2c3d4-0001"));
    assert_false (job_id_valid ("j-0193a1b2c3d4_0001"));
    assert_false (job_id_valid ("k-0193a1b2c3d4-0001"));
    assert_false (job_id_valid ("j-0193a1b2c3d4-0001x"));
    assert_false (job_id_valid ("j-0193a1b2c3g4-0001"));
    assert_false (job_id_valid (""));
    assert_false (job_id_valid (NULL));
}

static void
test_names_name_show (void **state)
{
    char buf [NAME_SHOW_LEN];
    assert_string_equal (name_show ("web", 3, buf, sizeof (buf)), "web");
    assert_string_equal (name_show ("a\0b\n", 4, buf, sizeof (buf)), "a?b?");
    assert_string_equal (name_show (NULL, 5, buf, sizeof (buf)), "");
    //  Long text is cut at 48 bytes and marked
    char text [100];
    memset (text, 'x', sizeof (text));
    name_show (text, sizeof (text), buf, sizeof (buf));
    assert_int_equal (strlen (buf), 51);
    assert_string_equal (buf + 48, "...");
    //  ...never inside a UTF-8 sequence
    for (size_t i = 0; i + 1 < sizeof (text); i += 2)
        text [i] = '\xd0', text [i + 1] = '\xb0';
    name_show (text + 1, sizeof (text) - 1, buf, sizeof (buf));
    assert_string_equal (buf + strlen (buf) - 3, "...");
    assert_true (((unsigned char) buf [strlen (buf) - 4] & 0xc0) == 0x80);
    //  A small buffer is respected
    char small [8];
    memset (text, 'y', sizeof (text));
    name_show (text, sizeof (text), small, sizeof (small));
    assert_string_equal (small, "yyyy...");
}

static void
test_names_time_format (void **state)
{
    char buf [TIME_TEXT_LEN];
    time_format (0, buf, sizeof (buf));
    assert_string_equal (buf, "1970-01-01T00:00:00.000Z");
    time_format (1795244451123LL, buf, sizeof (buf));
    assert_string_equal (buf, "2026-11-21T07:00:51.123Z");
    time_format (951782400007LL, buf, sizeof (buf));    //  Leap day
    assert_string_equal (buf, "2000-02-29T00:00:00.007Z");
    time_format (-1, buf, sizeof (buf));
    assert_string_equal (buf, "1969-12-31T23:59:59.999Z");
    assert_int_equal (strlen (buf) + 1, TIME_TEXT_LEN);
}

static void
test_hex_round_trip (void **state)
{
    const uint8_t bytes [] = {0x00, 0x9f, 0xa0, 0xff};
    char hex [9];
    assert_string_equal (hex_encode (bytes, 4, hex), "009fa0ff");
    uint8_t back [4];
    assert_int_equal (hex_decode ("009FA0ff", back, 4), 0);
    assert_memory_equal (back, bytes, 4);
    //  Not hex, too short, too long, NULL
    assert_int_equal (hex_decode ("009fa0fg", back, 4), -1);
    assert_int_equal (hex_decode ("009fa0f", back, 4), -1);
    assert_int_equal (hex_decode ("009fa0ff0", back, 4), -1);
    assert_int_equal (hex_decode (NULL, back, 4), -1);
}

//  A node's facts for target_matches_subject: "key=value" strings.
static const char *
s_fact_of (const void *arg, const char *key)
{
    size_t len = strlen (key);
    for (const char *const *fact = (const char *const *) arg; *fact; fact++)
        if (strncmp (*fact, key, len) == 0 && (*fact) [len] == '=')
            return *fact + len + 1;
    return NULL;
}

static bool
s_fact_match (const char *text, const char *const *facts)
{
    target_t target;
    char err [256] = "";
    if (target_parse (text, &target, err, sizeof err) != 0)
        print_error ("target '%s': %s\n", text, err);
    char *groups [] = {"web"};
    target_subject_t subject = {.node_id = "n1", .groups = groups,
                                .group_count = 1, .fact = s_fact_of,
                                .fact_arg = facts};
    bool hit = target_matches_subject (&target, &subject);
    target_clear (&target);
    return hit;
}

static void
test_names_target_facts (void **state)
{
    target_t target;
    char err [256] = "";
    assert_int_equal (target_parse ("fact:mem_mb>=4096", &target, err,
                                    sizeof err), 0);
    assert_int_equal (target.scope, TARGET_FACT);
    assert_string_equal (target.fact_key, "mem_mb");
    assert_int_equal (target.fact.op, FACT_OP_GE);
    assert_true (target.fact.numeric);
    char *text = target_format (&target);
    assert_string_equal (text, "fact:mem_mb>=4096");
    free (text);
    assert_null (target_topic (&target));
    target_t copy;
    assert_int_equal (target_copy (&copy, &target), 0);
    assert_string_equal (copy.fact_key, "mem_mb");
    assert_string_equal (copy.fact.value, "4096");
    target_clear (&copy);
    target_clear (&target);
    assert_int_equal (target_from_parts ("fact", "os_version~=12.*", true,
                                         &target, err, sizeof err), 0);
    assert_int_equal (target.fact.op, FACT_OP_GLOB);
    assert_true (target.any);
    target_clear (&target);

    const char *debian [] = {"os=debian", "mem_mb=8192", "arch=arm64",
                             "os_version=12.5", NULL};
    const char *small [] = {"os=ubuntu", "mem_mb=512", "arch=x86_64",
                            "os_version=22.04", NULL};
    assert_true (s_fact_match ("fact:os=debian", debian));
    assert_false (s_fact_match ("fact:os=debian", small));
    assert_true (s_fact_match ("fact:os!=debian", small));
    assert_false (s_fact_match ("fact:rack!=r1", small));   //  Lacks it
    assert_true (s_fact_match ("fact:mem_mb>=4096", debian));
    assert_false (s_fact_match ("fact:mem_mb>=4096", small));
    //  As numbers, not bytes: "512" > "4096" as text
    assert_true (s_fact_match ("fact:mem_mb<4096", small));
    assert_true (s_fact_match ("fact:mem_mb=8192.0", debian));
    assert_true (s_fact_match ("fact:mem_mb<=8192", debian));
    assert_false (s_fact_match ("fact:mem_mb>8192", debian));
    assert_true (s_fact_match ("fact:os_version~=12.*", debian));
    assert_false (s_fact_match ("fact:os_version~=12.*", small));
    assert_true (s_fact_match ("fact:os>d", small));      //  As bytes
    const char *odd [] = {"mem_mb=unknown", NULL};
    assert_false (s_fact_match ("fact:mem_mb>=4096", odd));
    assert_false (s_fact_match ("fact:mem_mb<4096", odd));
    assert_true (s_fact_match ("fact:mem_mb!=4096", odd));
    assert_true (s_fact_match ("group:web and fact:arch=arm64", debian));
    assert_false (s_fact_match ("group:web and fact:arch=arm64", small));
    assert_true (s_fact_match ("not fact:os=debian", small));
    assert_true (s_fact_match ("fact:os=ubuntu or fact:os=debian", debian));
    //  A node without facts matches no fact term
    assert_false (target_matches (&(target_t) {.scope = TARGET_FACT}, "n1",
                                  NULL, 0, NULL, NULL, 0));
}

static void
test_names_target_fact_errors (void **state)
{
    s_assert_target_error ("fact:", "a fact target needs a value");
    s_assert_target_error ("fact", "target 'fact' needs a value");
    s_assert_target_error ("fact:=debian", "a fact target needs a key");
    s_assert_target_error ("fact:os", "fact target 'os' needs an operator");
    s_assert_target_error ("fact:os=", "needs a value after '='");
    s_assert_target_error ("fact:os==debian",
                           "unknown fact operator '=='");
    s_assert_target_error ("fact:os=>1", "unknown fact operator '=>'");
    s_assert_target_error ("fact:os<>1", "unknown fact operator '<>'");
    s_assert_target_error ("fact:o.s=1", "fact key 'o.s' is not valid");
    s_assert_target_error ("fact:os=a\x01", "is not valid: no control");
    s_assert_target_error ("group:web and fact:os", "bad target at column "
                           "15: fact target 'os' needs an operator");
    char huge [FACT_MAX_VALUE_LEN + 16];
    strcpy (huge, "fact:os=");
    memset (huge + 8, 'x', FACT_MAX_VALUE_LEN + 1);
    huge [8 + FACT_MAX_VALUE_LEN + 1] = 0;
    s_assert_target_error (huge, "fact value is too long (257 bytes");
    char long_key [200];
    strcpy (long_key, "fact:");
    memset (long_key + 5, 'k', 100);
    strcpy (long_key + 105, "=1");
    s_assert_target_error (long_key, "is not valid: use letters");
    target_t target;
    char err [256];
    assert_int_equal (target_from_parts ("fact", NULL, false, &target, err,
                                         sizeof err), -1);
    assert_non_null (strstr (err, "needs a value"));
    //  Numbers as facts compare them
    double number = 0;
    assert_true (fact_number ("-12.50", &number));
    assert_true (number == -12.5);
    assert_false (fact_number ("1e3", NULL));
    assert_false (fact_number ("0x10", NULL));
    assert_false (fact_number ("12.", NULL));
    assert_false (fact_number ("", NULL));
    assert_false (fact_number ("nan", NULL));
    assert_false (fact_value_valid (""));
    assert_false (fact_value_valid ("a\tb"));
    assert_true (fact_value_valid ("Debian GNU/Linux 12 (bookworm)"));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_names_name_valid),
        cmocka_unit_test (test_names_label_value_valid),
        cmocka_unit_test (test_names_target_forms),
        cmocka_unit_test (test_names_target_node_list_bounds),
        cmocka_unit_test (test_names_target_errors),
        cmocka_unit_test (test_names_target_from_parts),
        cmocka_unit_test (test_names_target_label_hierarchy),
        cmocka_unit_test (test_names_target_matches),
        cmocka_unit_test (test_names_topics),
        cmocka_unit_test (test_names_target_format_and_copy),
        cmocka_unit_test (test_names_target_expressions),
        cmocka_unit_test (test_names_target_expression_matches),
        cmocka_unit_test (test_names_target_named_nodes),
        cmocka_unit_test (test_names_target_expression_errors),
        cmocka_unit_test (test_names_target_expression_bounds),
        cmocka_unit_test (test_names_target_facts),
        cmocka_unit_test (test_names_target_fact_errors),
        cmocka_unit_test (test_names_duration_parse),
        cmocka_unit_test (test_names_duration_format),
        cmocka_unit_test (test_names_job_ids),
        cmocka_unit_test (test_names_every_byte),
        cmocka_unit_test (test_names_id_hash),
        cmocka_unit_test (test_names_name_show),
        cmocka_unit_test (test_names_time_format),
        cmocka_unit_test (test_hex_round_trip),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
