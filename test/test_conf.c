/*  =========================================================================
    test_conf - YAML documents as decoded values
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../proto/conf.h"
#include "../proto/pv.h"

//  Parses TEXT, which must succeed.
static pv_doc_t *
s_parse (const char *text)
{
    pv_doc_t *doc = NULL;
    char err [256] = "";
    int rc = conf_parse (text, strlen (text), &doc, err, sizeof (err));
    if (rc != 0)
        print_error ("unexpected error: %s\n", err);
    assert_int_equal (rc, 0);
    assert_non_null (doc);
    return doc;
}

//  Parses TEXT, which must fail with a sentence that starts with PREFIX.
static void
s_assert_refused (const char *text, size_t len, const char *prefix)
{
    pv_doc_t *doc = NULL;
    char err [256] = "";
    int rc = conf_parse (text, len, &doc, err, sizeof (err));
    if (rc == 0 || strncmp (err, prefix, strlen (prefix)) != 0)
        print_error ("rc %d, error '%s', expected '%s...'\n", rc, err,
                     prefix);
    assert_int_equal (rc, -1);
    assert_null (doc);
    assert_memory_equal (err, prefix, strlen (prefix));
}

static bool
s_str_is (const pv_t *value, const char *text)
{
    return pv_type (value) == PV_STR && pv_str_eq (value, text);
}

static void
test_conf_scalar_types (void **state)
{
    pv_doc_t *doc = s_parse ("int: 42\n"
                             "negative: -7\n"
                             "plus: +3\n"
                             "big: 9223372036854775807\n"
                             "small: -9223372036854775808\n"
                             "yes: true\n"
                             "no: FALSE\n"
                             "null1: null\n"
                             "null2: ~\n"
                             "empty:\n"
                             "word: hello world\n"
                             "float: 1.5\n"
                             "version: 1.10\n"
                             "hex: 0x1f\n"
                             "yaml11: yes\n"
                             "quoted_int: \"42\"\n"
                             "single_bool: 'true'\n"
                             "quoted_null: \"null\"\n"
                             "quoted_empty: ''\n"
                             "literal: |\n"
                             "  line one\n"
                             "  line two\n"
                             "folded: >\n"
                             "  a\n"
                             "  b\n"
                             "42: key\n");
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (pv_type (root), PV_MAP);
    int64_t number = 0;
    bool flag = false;
    assert_int_equal (pv_get_int (pv_map_get (root, "int"), &number), 0);
    assert_int_equal (number, 42);
    assert_int_equal (pv_get_int (pv_map_get (root, "negative"), &number), 0);
    assert_int_equal (number, -7);
    assert_int_equal (pv_get_int (pv_map_get (root, "plus"), &number), 0);
    assert_int_equal (number, 3);
    assert_int_equal (pv_get_int (pv_map_get (root, "big"), &number), 0);
    assert_true (number == INT64_MAX);
    assert_int_equal (pv_get_int (pv_map_get (root, "small"), &number), 0);
    assert_true (number == INT64_MIN);
    assert_int_equal (pv_get_bool (pv_map_get (root, "yes"), &flag), 0);
    assert_true (flag);
    assert_int_equal (pv_get_bool (pv_map_get (root, "no"), &flag), 0);
    assert_false (flag);
    assert_int_equal (pv_type (pv_map_get (root, "null1")), PV_NIL);
    assert_non_null (pv_map_get (root, "null2"));
    assert_int_equal (pv_type (pv_map_get (root, "null2")), PV_NIL);
    assert_non_null (pv_map_get (root, "empty"));
    assert_int_equal (pv_type (pv_map_get (root, "empty")), PV_NIL);
    assert_true (s_str_is (pv_map_get (root, "word"), "hello world"));
    //  Only integers are typed: "1.10" keeps its text
    assert_true (s_str_is (pv_map_get (root, "float"), "1.5"));
    assert_true (s_str_is (pv_map_get (root, "version"), "1.10"));
    assert_true (s_str_is (pv_map_get (root, "hex"), "0x1f"));
    assert_true (s_str_is (pv_map_get (root, "yaml11"), "yes"));
    //  Quoting always gives a string
    assert_true (s_str_is (pv_map_get (root, "quoted_int"), "42"));
    assert_true (s_str_is (pv_map_get (root, "single_bool"), "true"));
    assert_true (s_str_is (pv_map_get (root, "quoted_null"), "null"));
    assert_true (s_str_is (pv_map_get (root, "quoted_empty"), ""));
    assert_true (
        s_str_is (pv_map_get (root, "literal"), "line one\nline two\n"));
    assert_true (s_str_is (pv_map_get (root, "folded"), "a b\n"));
    //  Keys are strings whatever they look like
    assert_true (s_str_is (pv_map_get (root, "42"), "key"));
    pv_doc_destroy (&doc);
    assert_null (doc);
}

static void
test_conf_explicit_tags (void **state)
{
    pv_doc_t *doc = s_parse ("a: !!str 12\n"
                             "b: !!int \"12\"\n"
                             "c: !!bool \"true\"\n"
                             "d: !!null ''\n"
                             "e: !!float 2.5\n"
                             "f: !!map {x: 1}\n"
                             "g: !!seq [1]\n"
                             "h: ! 12\n");
    const pv_t *root = pv_doc_root (doc);
    int64_t number = 0;
    bool flag = false;
    double real = 0;
    assert_true (s_str_is (pv_map_get (root, "a"), "12"));
    assert_int_equal (pv_get_int (pv_map_get (root, "b"), &number), 0);
    assert_int_equal (number, 12);
    assert_int_equal (pv_get_bool (pv_map_get (root, "c"), &flag), 0);
    assert_true (flag);
    assert_int_equal (pv_type (pv_map_get (root, "d")), PV_NIL);
    assert_int_equal (pv_type (pv_map_get (root, "e")), PV_FLOAT);
    assert_int_equal (pv_get_float (pv_map_get (root, "e"), &real), 0);
    assert_true (real == 2.5);
    assert_int_equal (pv_type (pv_map_get (root, "f")), PV_MAP);
    assert_int_equal (pv_type (pv_map_get (root, "g")), PV_ARRAY);
    assert_true (s_str_is (pv_map_get (root, "h"), "12"));
    pv_doc_destroy (&doc);

    const char *refused [] [2] = {
        {"a: !foo 1\n", "line 1, column 4: tag '!foo' is not allowed"},
        {"a: !!binary aGk=\n", "line 1, column 4: tag '!!binary' is not "
                               "allowed"},
        {"a: !<tag:example.com,2024:x> 1\n", "line 1, column 4: tag "
                                             "'tag:example.com,2024:x' is "
                                             "not allowed"},
        {"a: !!int abc\n", "line 1, column 4: 'abc' is not an integer"},
        {"a: !!bool yes\n", "line 1, column 4: 'yes' is not true or false"},
        {"a: !!null x\n", "line 1, column 4: 'x' is not null"},
        {"a: !!float x\n", "line 1, column 4: 'x' is not a number"},
        {"a: !!map x\n", "line 1, column 4: tag '!!map' does not fit a "
                         "scalar"},
        {"a: !!seq {}\n", "line 1, column 4: tag '!!seq' does not fit a "
                          "mapping"},
        {"!!int 1: x\n", "line 1, column 1: a mapping key must be a "
                         "string"}};
    for (size_t i = 0; i < sizeof (refused) / sizeof (refused [0]); i++)
        s_assert_refused (refused [i] [0], strlen (refused [i] [0]),
                          refused [i] [1]);
}

static void
test_conf_nested (void **state)
{
    pv_doc_t *doc = s_parse ("broker:\n"
                             "  endpoints:\n"
                             "    - tcp://127.0.0.1:5555\n"
                             "    - {name: x, port: 80}\n"
                             "  groups: [web, db]\n"
                             "  empty_list: []\n"
                             "  empty_map: {}\n"
                             "top: 1\n");
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (pv_size (root), 2);
    const pv_t *broker = pv_map_get (root, "broker");
    assert_int_equal (pv_type (broker), PV_MAP);
    assert_int_equal (pv_size (broker), 4);
    const pv_t *endpoints = pv_map_get (broker, "endpoints");
    assert_int_equal (pv_type (endpoints), PV_ARRAY);
    assert_int_equal (pv_size (endpoints), 2);
    assert_true (s_str_is (pv_array_at (endpoints, 0), "tcp://127.0.0.1:5555"));
    const pv_t *inner = pv_array_at (endpoints, 1);
    assert_true (s_str_is (pv_map_get (inner, "name"), "x"));
    int64_t port = 0;
    assert_int_equal (pv_get_int (pv_map_get (inner, "port"), &port), 0);
    assert_int_equal (port, 80);
    const pv_t *groups = pv_map_get (broker, "groups");
    assert_int_equal (pv_size (groups), 2);
    assert_true (s_str_is (pv_array_at (groups, 1), "db"));
    assert_int_equal (pv_type (pv_map_get (broker, "empty_list")), PV_ARRAY);
    assert_int_equal (pv_size (pv_map_get (broker, "empty_list")), 0);
    assert_int_equal (pv_type (pv_map_get (broker, "empty_map")), PV_MAP);
    //  Map order is document order
    assert_true (s_str_is (pv_map_key_at (root, 0), "broker"));
    assert_true (s_str_is (pv_map_key_at (root, 1), "top"));
    pv_doc_destroy (&doc);

    //  A sequence at the root is a sequence
    doc = s_parse ("- 1\n- two\n");
    assert_int_equal (pv_type (pv_doc_root (doc)), PV_ARRAY);
    pv_doc_destroy (&doc);
}

static void
test_conf_empty_document (void **state)
{
    const char *empties [] = {"", "# only a comment\n", "---\n", "---\n...\n",
                              "\n\n"};
    for (size_t i = 0; i < sizeof (empties) / sizeof (empties [0]); i++) {
        pv_doc_t *doc = s_parse (empties [i]);
        assert_int_equal (pv_type (pv_doc_root (doc)), PV_MAP);
        assert_int_equal (pv_size (pv_doc_root (doc)), 0);
        pv_doc_destroy (&doc);
    }
    pv_doc_t *doc = NULL;
    char err [64];
    assert_int_equal (conf_parse (NULL, 0, &doc, err, sizeof (err)), 0);
    assert_int_equal (pv_type (pv_doc_root (doc)), PV_MAP);
    pv_doc_destroy (&doc);
}

static void
test_conf_syntax_errors (void **state)
{
    s_assert_refused ("a: 1\nb: [1, 2\n", 13,
                      "line 3, column 1: did not find expected ',' or ']' "
                      "(while parsing a flow sequence at line 2, column 4)");
    s_assert_refused ("a:\n  b: 1\n c: 2\n", 16, "line 3, column 2: ");
    s_assert_refused ("a: 1\n  b: 2\n", 11,
                      "line 2, column 4: mapping values are not allowed");
    s_assert_refused ("a: \"open\n", 9, "line 2, column 1: ");
    s_assert_refused ("a: \xff\n", 5,
                      "line 1, column 4: invalid leading UTF-8 octet");
    s_assert_refused ("a: b\x01\n", 6,
                      "line 1, column 5: control characters are not allowed");
    s_assert_refused ("a: b\0c\n", 7, "line 1, column 5: control "
                                      "characters are not allowed");
    s_assert_refused ("a: 1\n---\nb: 2\n", 14,
                      "line 2, column 1: only one document is allowed");
    s_assert_refused ("a: 99999999999999999999\n", 24,
                      "line 1, column 4: integer '99999999999999999999' is "
                      "out of range (quote it to keep it as text)");
    s_assert_refused ("a: -9223372036854775809\n", 24,
                      "line 1, column 4: integer");
}

static void
test_conf_duplicate_key (void **state)
{
    const char *text = "a: 1\n"
                       "b:\n"
                       "  x: 1\n"
                       "  y: 2\n"
                       "  x: 3\n";
    s_assert_refused (text, strlen (text),
                      "line 5, column 3: duplicate key 'x' (first at line 3, "
                      "column 3)");
    //  Quoting does not make a key different
    text = "a: 1\n'a': 2\n";
    s_assert_refused (text, strlen (text),
                      "line 2, column 1: duplicate key 'a' (first at line 1, "
                      "column 1)");
    //  The earliest repeat is reported
    text = "{c: 1, b: 2, a: 3, b: 4, a: 5}";
    s_assert_refused (text, strlen (text),
                      "line 1, column 20: duplicate key 'b' (first at line 1, "
                      "column 8)");
    //  The same key in different maps is fine
    pv_doc_t *doc = s_parse ("a: {x: 1}\nb: {x: 2}\n");
    pv_doc_destroy (&doc);

    //  A large map is checked too
    size_t size = 20 * 5000;
    char *big = malloc (size);
    assert_non_null (big);
    size_t used = 0;
    for (int i = 0; i < 5000; i++)
        used += (size_t) snprintf (big + used, size - used, "k%d: %d\n", i, i);
    doc = s_parse (big);
    assert_int_equal (pv_size (pv_doc_root (doc)), 5000);
    pv_doc_destroy (&doc);
    used += (size_t) snprintf (big + used, size - used, "k1234: 0\n");
    s_assert_refused (big, used,
                      "line 5001, column 1: duplicate key 'k1234' (first at "
                      "line 1235, column 1)");
    free (big);
}

static void
test_conf_aliases_refused (void **state)
{
    const char *text = "base: &base {a: 1}\nother: *base\n";
    s_assert_refused (text, strlen (text),
                      "line 1, column 7: anchors and aliases are not allowed");
    text = "a: &x 1\n";
    s_assert_refused (text, strlen (text),
                      "line 1, column 4: anchors and aliases are not allowed");
    text = "a: &x [1]\n";
    s_assert_refused (text, strlen (text),
                      "line 1, column 4: anchors and aliases are not allowed");
    //  A billion laughs never gets started
    text = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n";
    s_assert_refused (text, strlen (text), "line 1, column 4: anchors");
}

static void
test_conf_keys_must_be_scalars (void **state)
{
    const char *text = "? [a, b]\n: 1\n";
    s_assert_refused (text, strlen (text),
                      "line 1, column 3: a mapping key must be a scalar, not "
                      "a sequence");
    text = "{{a: 1}: 2}";
    s_assert_refused (text, strlen (text),
                      "line 1, column 2: a mapping key must be a scalar, not "
                      "a mapping");
}

static void
test_conf_depth_limit (void **state)
{
    char text [256];
    //  32 nested sequences are accepted, 33 are not
    memset (text, '[', 32);
    memset (text + 32, ']', 32);
    text [64] = '\0';
    pv_doc_t *doc = s_parse (text);
    pv_doc_destroy (&doc);
    memset (text, '[', 33);
    memset (text + 33, ']', 33);
    text [66] = '\0';
    s_assert_refused (text, strlen (text),
                      "line 1, column 33: nesting deeper than 32 levels");

    //  A hostile depth stops at once rather than after reading it all
    size_t size = 1000000;
    char *deep = malloc (size);
    assert_non_null (deep);
    memset (deep, '[', size);
    s_assert_refused (deep, size, "line 1, column 33: nesting deeper");
    free (deep);
}

static void
test_conf_size_limit (void **state)
{
    size_t size = 4 * 1024 * 1024 + 1;
    char *text = malloc (size);
    assert_non_null (text);
    memset (text, '#', size);
    s_assert_refused (text, size, "document is larger than 4 MiB");
    //  Exactly 4 MiB of comment is fine
    pv_doc_t *doc = NULL;
    char err [256] = "";
    assert_int_equal (conf_parse (text, size - 1, &doc, err, sizeof (err)),
                      0);
    pv_doc_destroy (&doc);
    free (text);
}

//  Makes a fresh directory under $TMPDIR (or /tmp) into DIR (DIR_LEN
//  bytes); mkdtemp wants a template that ends in six 'X'.
static void
s_make_temp_dir (char *dir, size_t dir_len, const char *prefix)
{
    const char *tmp = getenv ("TMPDIR");
    int used = snprintf (dir, dir_len, "%s/%s.", tmp && *tmp ? tmp : "/tmp",
                         prefix);
    assert_true (used > 0 && (size_t) used + 7 <= dir_len);
    memset (dir + used, 'X', 6);
    dir [used + 6] = '\0';
    assert_non_null (mkdtemp (dir));
}

//  Writes LEN bytes of TEXT to DIR/NAME; returns the path (caller frees).
static char *
s_write_file (const char *dir, const char *name, const char *text, size_t len)
{
    char *path = NULL;
    assert_true (asprintf (&path, "%s/%s", dir, name) > 0);
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (text, 1, len, file), len);
    assert_int_equal (fclose (file), 0);
    return path;
}

static void
test_conf_load_file (void **state)
{
    char dir [256];
    s_make_temp_dir (dir, sizeof (dir), "test_conf");
    pv_doc_t *doc = NULL;
    char err [512] = "";

    const char *good_text = "name: web-01\ngroups: [web]\n";
    char *good = s_write_file (dir, "good.yaml", good_text, strlen (good_text));
    assert_int_equal (conf_load_file (good, &doc, err, sizeof (err)), 0);
    assert_true (s_str_is (pv_map_get (pv_doc_root (doc), "name"), "web-01"));
    pv_doc_destroy (&doc);

    const char *bad_text = "name: web-01\n  groups: [web]\n";
    char *bad = s_write_file (dir, "bad.yaml", bad_text, strlen (bad_text));
    assert_int_equal (conf_load_file (bad, &doc, err, sizeof (err)), -1);
    assert_null (doc);
    char *expected = NULL;
    assert_true (asprintf (&expected, "%s: line 2, column 9: ", bad) > 0);
    assert_memory_equal (err, expected, strlen (expected));
    free (expected);

    char *missing = NULL;
    assert_true (asprintf (&missing, "%s/missing.yaml", dir) > 0);
    assert_int_equal (conf_load_file (missing, &doc, err, sizeof (err)), -1);
    expected = NULL;
    assert_true (
        asprintf (&expected, "%s: No such file or directory", missing) > 0);
    assert_string_equal (err, expected);
    free (expected);

    assert_int_equal (conf_load_file (dir, &doc, err, sizeof (err)), -1);
    assert_non_null (strstr (err, "not a regular file"));

    size_t size = 4 * 1024 * 1024 + 1;
    char *huge_text = malloc (size);
    assert_non_null (huge_text);
    memset (huge_text, '#', size);
    char *huge = s_write_file (dir, "huge.yaml", huge_text, size);
    free (huge_text);
    assert_int_equal (conf_load_file (huge, &doc, err, sizeof (err)), -1);
    assert_non_null (strstr (err, "larger than 4 MiB"));

    char *empty = s_write_file (dir, "empty.yaml", "", 0);
    assert_int_equal (conf_load_file (empty, &doc, err, sizeof (err)), 0);
    assert_int_equal (pv_type (pv_doc_root (doc)), PV_MAP);
    assert_int_equal (pv_size (pv_doc_root (doc)), 0);
    pv_doc_destroy (&doc);

    const char *files [] = {good, bad, huge, empty};
    for (size_t i = 0; i < sizeof (files) / sizeof (files [0]); i++)
        assert_int_equal (unlink (files [i]), 0);
    assert_int_equal (rmdir (dir), 0);
    free (good);
    free (bad);
    free (huge);
    free (empty);
    free (missing);
}

static void
test_conf_get_values (void **state)
{
    pv_doc_t *doc = s_parse ("name: web-01\n"
                             "port: 5555\n"
                             "debug: true\n"
                             "interval: 1m30s\n"
                             "bad_interval: 90\n"
                             "worse_interval: soon\n");
    const pv_t *root = pv_doc_root (doc);
    char err [256] = "";

    char *name = strdup ("old");
    assert_int_equal (conf_get_str (root, "name", &name, err, sizeof (err)),
                      0);
    assert_string_equal (name, "web-01");
    assert_int_equal (conf_get_str (root, "absent", &name, err, sizeof (err)),
                      0);
    assert_string_equal (name, "web-01");
    assert_int_equal (conf_get_str (root, "port", &name, err, sizeof (err)),
                      -1);
    assert_string_equal (err, "port: expected a string, got int");
    assert_string_equal (name, "web-01");
    free (name);

    int64_t port = 7;
    assert_int_equal (conf_get_int (root, "port", &port, err, sizeof (err)),
                      0);
    assert_int_equal (port, 5555);
    assert_int_equal (conf_get_int (root, "absent", &port, err, sizeof (err)),
                      0);
    assert_int_equal (port, 5555);
    assert_int_equal (conf_get_int (root, "name", &port, err, sizeof (err)),
                      -1);
    assert_string_equal (err, "name: expected an integer, got string");

    bool debug = false;
    assert_int_equal (conf_get_bool (root, "debug", &debug, err, sizeof (err)),
                      0);
    assert_true (debug);
    assert_int_equal (conf_get_bool (root, "port", &debug, err, sizeof (err)),
                      -1);
    assert_string_equal (err, "port: expected true or false, got int");

    int64_t ms = 0;
    assert_int_equal (
        conf_get_duration (root, "interval", &ms, err, sizeof (err)), 0);
    assert_int_equal (ms, 90000);
    assert_int_equal (
        conf_get_duration (root, "absent", &ms, err, sizeof (err)), 0);
    assert_int_equal (ms, 90000);
    assert_int_equal (
        conf_get_duration (root, "bad_interval", &ms, err, sizeof (err)), -1);
    assert_non_null (strstr (err, "bad_interval: expected a duration"));
    assert_int_equal (
        conf_get_duration (root, "worse_interval", &ms, err, sizeof (err)),
        -1);
    assert_non_null (
        strstr (err, "worse_interval: 'soon' is not a duration"));
    assert_int_equal (ms, 90000);
    pv_doc_destroy (&doc);
}

static void
test_conf_check_keys (void **state)
{
    pv_doc_t *doc = s_parse ("a: 1\nb: 2\n");
    const char *const known [] = {"a", "b", "c", NULL};
    char err [256] = "";
    assert_int_equal (
        conf_check_keys (pv_doc_root (doc), known, err, sizeof (err)), 0);
    pv_doc_destroy (&doc);

    doc = s_parse ("a: 1\nx: 2\n");
    assert_int_equal (
        conf_check_keys (pv_doc_root (doc), known, err, sizeof (err)), -1);
    assert_string_equal (err, "unknown key 'x' (known: a, b, c)");
    //  A short buffer gets a cut sentence, never an overflow
    char tiny [12];
    assert_int_equal (
        conf_check_keys (pv_doc_root (doc), known, tiny, sizeof (tiny)), -1);
    assert_string_equal (tiny, "unknown key");
    pv_doc_destroy (&doc);

    doc = s_parse ("- a\n");
    assert_int_equal (
        conf_check_keys (pv_doc_root (doc), known, err, sizeof (err)), -1);
    assert_string_equal (err, "expected a map, got array");
    pv_doc_destroy (&doc);
}

//  conf_get_string_maps: collects what EACH saw, and refuses a name "bad".
typedef struct {
    char seen [256];
    int calls;
} s_maps_t;

static int
s_maps_item (void *arg, char **values, char *why, size_t why_len)
{
    s_maps_t *maps = (s_maps_t *) arg;
    if (strcmp (values [1], "bad") == 0) {
        snprintf (why, why_len, "name '%s' is refused", values [1]);
        return -1;
    }
    snprintf (maps->seen + strlen (maps->seen),
              sizeof maps->seen - strlen (maps->seen), "%s/%s/%s;",
              values [0], values [1], values [2] ? values [2] : "-");
    maps->calls++;
    return 0;
}

//  One reader for lists of string maps (clients:, relays:): each item in
//  order, unknown keys, missing required ones, wrong shapes and the
//  item's own refusal, each named with the list and the index.
static void
test_conf_string_maps (void **state)
{
    const char *const fields [] = {"key", "name", "pool", NULL};
    s_maps_t maps;
    memset (&maps, 0, sizeof maps);
    char err [256] = "";
    assert_int_equal (conf_get_string_maps (NULL, "relays", fields, 2,
                                            s_maps_item, &maps, err,
                                            sizeof err), 0);
    assert_int_equal (maps.calls, 0);
    pv_doc_t *doc = s_parse ("relays:\n  - {key: k1, name: a}\n"
                             "  - {key: k2, name: b, pool: p}\n");
    const pv_t *list = pv_map_get (pv_doc_root (doc), "relays");
    assert_int_equal (conf_get_string_maps (list, "relays", fields, 2,
                                            s_maps_item, &maps, err,
                                            sizeof err), 0);
    assert_string_equal (maps.seen, "k1/a/-;k2/b/p;");
    pv_doc_destroy (&doc);
    struct {
        const char *yaml;
        const char *err;
    } cases [] = {
        {"relays: {key: k}\n", "relays: expected a list of {key, name, pool}"},
        {"relays: [x]\n", "relays[0]: expected a map {key, name, pool}"},
        {"relays: [{key: k, name: a}, {key: k}]\n",
         "relays[1]: key and name are required"},
        {"relays: [{key: k, name: a, port: 1}]\n",
         "relays[0]: unknown key 'port' (known: key, name, pool)"},
        {"relays: [{key: k, name: 7}]\n", "relays[0]: name: expected"},
        {"relays: [{key: k, name: bad}]\n", "relays[0]: name 'bad' is "
                                              "refused"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        doc = s_parse (cases [index].yaml);
        list = pv_map_get (pv_doc_root (doc), "relays");
        int rc = conf_get_string_maps (list, "relays", fields, 2, s_maps_item,
                                       &maps, err, sizeof err);
        if (rc != -1 || strncmp (err, cases [index].err,
                                 strlen (cases [index].err)) != 0)
            print_error ("%s: rc %d, '%s'\n", cases [index].yaml, rc, err);
        assert_int_equal (rc, -1);
        assert_memory_equal (err, cases [index].err,
                             strlen (cases [index].err));
        pv_doc_destroy (&doc);
    }
    //  One required field
    const char *const one [] = {"key", NULL};
    doc = s_parse ("clients: [{}]\n");
    assert_int_equal (conf_get_string_maps (pv_map_get (pv_doc_root (doc),
                                                        "clients"),
                                            "clients", one, 1, s_maps_item,
                                            &maps, err, sizeof err), -1);
    assert_string_equal (err, "clients[0]: key is required");
    pv_doc_destroy (&doc);
}

static void
test_conf_sizes (void **state)
{
    uint64_t bytes = 0;
    assert_int_equal (conf_size_parse ("4096", &bytes), 0);
    assert_int_equal (bytes, 4096);
    assert_int_equal (conf_size_parse ("8GiB", &bytes), 0);
    assert_int_equal (bytes, (uint64_t) 8 << 30);
    assert_int_equal (conf_size_parse ("512MiB", &bytes), 0);
    assert_int_equal (bytes, (uint64_t) 512 << 20);
    assert_int_equal (conf_size_parse ("2m", &bytes), 0);
    assert_int_equal (bytes, (uint64_t) 2 << 20);
    assert_int_equal (conf_size_parse ("1TB", &bytes), 0);
    assert_int_equal (bytes, (uint64_t) 1 << 40);
    assert_int_equal (conf_size_parse ("10B", &bytes), 0);
    assert_int_equal (bytes, 10);
    const char *bad [] = {"", "GiB", "-1", "1.5GiB", "8 GiB", "8GiBs", "8x",
                          "99999999999999999999", "20000000000TiB", NULL};
    for (size_t index = 0; bad [index]; index++)
        assert_int_equal (conf_size_parse (bad [index], &bytes), -1);

    pv_doc_t *doc = NULL;
    char err [256];
    const char *yaml = "a: 1GiB\nb: 1048576\nc: lots\nd: [1]\n";
    assert_int_equal (conf_parse (yaml, strlen (yaml), &doc, err, sizeof err), 0);
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (conf_get_size (root, "a", &bytes, err, sizeof err), 0);
    assert_int_equal (bytes, (uint64_t) 1 << 30);
    assert_int_equal (conf_get_size (root, "b", &bytes, err, sizeof err), 0);
    assert_int_equal (bytes, 1048576);
    assert_int_equal (conf_get_size (root, "c", &bytes, err, sizeof err), -1);
    assert_non_null (strstr (err, "c: expected a size like 512MiB or 8GiB, got 'lots'"));
    assert_int_equal (conf_get_size (root, "d", &bytes, err, sizeof err), -1);
    bytes = 7;
    assert_int_equal (conf_get_size (root, "none", &bytes, err, sizeof err), 0);
    assert_int_equal (bytes, 7);
    pv_doc_destroy (&doc);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_conf_scalar_types),
        cmocka_unit_test (test_conf_explicit_tags),
        cmocka_unit_test (test_conf_nested),
        cmocka_unit_test (test_conf_empty_document),
        cmocka_unit_test (test_conf_syntax_errors),
        cmocka_unit_test (test_conf_duplicate_key),
        cmocka_unit_test (test_conf_aliases_refused),
        cmocka_unit_test (test_conf_keys_must_be_scalars),
        cmocka_unit_test (test_conf_depth_limit),
        cmocka_unit_test (test_conf_size_limit),
        cmocka_unit_test (test_conf_load_file),
        cmocka_unit_test (test_conf_get_values),
        cmocka_unit_test (test_conf_check_keys),
        cmocka_unit_test (test_conf_string_maps),
        cmocka_unit_test (test_conf_sizes),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
