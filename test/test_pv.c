/*  =========================================================================
    test_pv - strict msgpack decoding, the writer, JSON output
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

#include "../proto/pv.h"
#include "../proto/pw.h"

//  Decodes BYTES and returns the code; the document is destroyed at once.
static int
s_decode (const void *bytes, size_t size, char *why, size_t why_len)
{
    pv_doc_t *doc = NULL;
    int rc = pv_doc_decode (bytes, size, &doc, why, why_len);
    if (rc == 0)
        assert_non_null (doc);
    else
        assert_null (doc);
    pv_doc_destroy (&doc);
    return rc;
}

//  A sample document with every type grid uses.
static pw_t *
s_sample (void)
{
    pw_t *w = pw_new ();
    pw_map (w, 9);
    pw_str (w, "name");
    pw_str (w, "web-01");
    pw_str (w, "count");
    pw_int (w, -42);
    pw_str (w, "big");
    pw_int (w, INT64_MAX);
    pw_str (w, "ok");
    pw_bool (w, true);
    pw_str (w, "ratio");
    pw_float (w, 0.5);
    pw_str (w, "none");
    pw_nil (w);
    pw_str (w, "list");
    pw_array (w, 3);
    pw_int (w, 1);
    pw_str (w, "two");
    pw_map (w, 1);
    pw_str (w, "three");
    pw_int (w, 3);
    pw_str (w, "blob");
    pw_bin (w, "\x00\x01\x02\xff", 4);
    pw_str (w, "text");
    pw_str (w, "a\"b\\c\n\x01\xc3\xa9\xff");
    return w;
}

static void
test_pv_decode_sample (void **state)
{
    pw_t *w = s_sample ();
    pv_doc_t *doc = NULL;
    char why [128];
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, why,
                                     sizeof why), 0);
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (pv_type (root), PV_MAP);
    assert_int_equal (pv_size (root), 9);
    assert_true (pv_str_eq (pv_map_get (root, "name"), "web-01"));
    assert_false (pv_str_eq (pv_map_get (root, "name"), "web-0"));
    int64_t number;
    assert_int_equal (pv_get_int (pv_map_get (root, "count"), &number), 0);
    assert_int_equal (number, -42);
    assert_int_equal (pv_get_int (pv_map_get (root, "big"), &number), 0);
    assert_true (number == INT64_MAX);
    bool flag = false;
    assert_int_equal (pv_get_bool (pv_map_get (root, "ok"), &flag), 0);
    assert_true (flag);
    double real;
    assert_int_equal (pv_get_float (pv_map_get (root, "ratio"), &real), 0);
    assert_true (real == 0.5);
    assert_int_equal (pv_get_float (pv_map_get (root, "count"), &real), 0);
    assert_true (real == -42.0);
    assert_int_equal (pv_get_int (pv_map_get (root, "ratio"), &number), -1);
    assert_int_equal (pv_type (pv_map_get (root, "none")), PV_NIL);
    assert_null (pv_map_get (root, "absent"));

    const pv_t *list = pv_map_get (root, "list");
    assert_int_equal (pv_type (list), PV_ARRAY);
    assert_int_equal (pv_size (list), 3);
    assert_true (pv_str_eq (pv_array_at (list, 1), "two"));
    assert_null (pv_array_at (list, 3));
    assert_int_equal (pv_type (pv_array_at (list, 2)), PV_MAP);

    size_t len = 0;
    const char *blob = pv_str (pv_map_get (root, "blob"), &len);
    assert_int_equal (len, 4);
    assert_memory_equal (blob, "\x00\x01\x02\xff", 4);
    assert_null (pv_strdup (pv_map_get (root, "blob")));

    char *name = pv_strdup (pv_map_get (root, "name"));
    assert_string_equal (name, "web-01");
    free (name);
    assert_true (pv_str_eq (pv_map_key_at (root, 0), "name"));
    assert_true (pv_str_eq (pv_map_value_at (root, 0), "web-01"));
    assert_null (pv_map_key_at (root, 9));

    //  Re-encoding gives the same bytes
    pw_t *again = pw_new ();
    pw_pv (again, root);
    assert_int_equal (pw_size (again), pw_size (w));
    assert_memory_equal (pw_data (again), pw_data (w), pw_size (w));
    pw_destroy (&again);
    assert_null (again);

    pv_doc_destroy (&doc);
    assert_null (doc);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_pv_every_truncation_refused (void **state)
{
    pw_t *w = s_sample ();
    for (size_t size = 0; size < pw_size (w); size++)
        assert_int_equal (s_decode (pw_data (w), size, NULL, 0), -2);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), 0);
    pw_destroy (&w);
}

static void
test_pv_trailing_bytes_refused (void **state)
{
    pw_t *w = s_sample ();
    pw_int (w, 1);
    char why [128];
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "trailing"));
    pw_destroy (&w);

    const unsigned char two_nils [] = { 0xc0, 0xc0 };
    assert_int_equal (s_decode (two_nils, 2, NULL, 0), -2);
}

static void
test_pv_huge_container_refused (void **state)
{
    char why [128];
    const unsigned char array32 [] = { 0xdd, 0x00, 0xff, 0xff, 0xff };
    assert_int_equal (s_decode (array32, sizeof array32, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "claims"));
    const unsigned char map32 [] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1,
                                     'a', 0xc0 };
    assert_int_equal (s_decode (map32, sizeof map32, NULL, 0), -2);
    const unsigned char str32 [] = { 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x' };
    assert_int_equal (s_decode (str32, sizeof str32, NULL, 0), -2);
    const unsigned char bin32 [] = { 0xc6, 0x7f, 0xff, 0xff, 0xff, 'x' };
    assert_int_equal (s_decode (bin32, sizeof bin32, NULL, 0), -2);
    //  A map of one pair needs two bytes, not one
    const unsigned char short_map [] = { 0x81, 0xa0 };
    assert_int_equal (s_decode (short_map, sizeof short_map, NULL, 0), -2);
}

static void
test_pv_too_many_objects_refused (void **state)
{
    size_t count = PV_MAX_OBJECTS;
    size_t size = 5 + count;
    unsigned char *bytes = malloc (size);
    assert_non_null (bytes);
    bytes [0] = 0xdd;
    bytes [1] = (unsigned char) (count >> 24);
    bytes [2] = (unsigned char) (count >> 16);
    bytes [3] = (unsigned char) (count >> 8);
    bytes [4] = (unsigned char) count;
    memset (bytes + 5, 0xc0, count);
    char why [128];
    assert_int_equal (s_decode (bytes, size, why, sizeof why), -2);
    assert_non_null (strstr (why, "objects"));
    free (bytes);
}

//  DEPTH nested one-element arrays around a nil.
static pw_t *
s_nested (size_t depth)
{
    pw_t *w = pw_new ();
    for (size_t level = 0; level < depth; level++)
        pw_array (w, 1);
    pw_nil (w);
    return w;
}

static void
test_pv_deep_nesting_refused (void **state)
{
    pw_t *w = s_nested (100);
    char why [128];
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "nesting"));
    pw_destroy (&w);

    w = s_nested (PV_MAX_DEPTH);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), 0);
    pw_destroy (&w);
    w = s_nested (PV_MAX_DEPTH + 1);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), -2);
    pw_destroy (&w);

    //  An empty container at the limit counts as a level too
    w = pw_new ();
    for (size_t level = 0; level < PV_MAX_DEPTH; level++)
        pw_array (w, 1);
    pw_map (w, 0);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), -2);
    pw_destroy (&w);
}

static void
test_pv_duplicate_keys_refused (void **state)
{
    char why [128];
    pw_t *w = pw_new ();
    pw_map (w, 2);
    pw_str (w, "a");
    pw_int (w, 1);
    pw_str (w, "a");
    pw_int (w, 2);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "duplicate"));

    //  A large map, nested inside an array, goes through the sorted check
    pw_reset (w);
    pw_array (w, 1);
    pw_map (w, 200);
    for (int index = 0; index < 200; index++) {
        char key [16];
        snprintf (key, sizeof key, "k%d", index == 150 ? 7 : index);
        pw_str (w, key);
        pw_int (w, index);
    }
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "'k7'"));

    //  The same map without the duplicate is fine
    pw_reset (w);
    pw_map (w, 200);
    for (int index = 0; index < 200; index++) {
        char key [16];
        snprintf (key, sizeof key, "k%d", index);
        pw_str (w, key);
        pw_int (w, index);
    }
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), 0);

    //  Keys that differ only in length or after a NUL are distinct
    pw_reset (w);
    pw_map (w, 3);
    pw_strn (w, "a", 1);
    pw_nil (w);
    pw_strn (w, "a\0", 2);
    pw_nil (w);
    pw_strn (w, "", 0);
    pw_nil (w);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), 0);
    pw_destroy (&w);
}

static void
test_pv_bad_bytes_refused (void **state)
{
    char why [128];
    //  Non-string key
    const unsigned char int_key [] = { 0x81, 0x01, 0xc0 };
    assert_int_equal (s_decode (int_key, sizeof int_key, why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "key"));
    //  Ext and fixext
    const unsigned char ext8 [] = { 0xc7, 0x01, 0x05, 0x00 };
    assert_int_equal (s_decode (ext8, sizeof ext8, NULL, 0), -2);
    const unsigned char fixext [] = { 0xd4, 0x01, 0x00 };
    assert_int_equal (s_decode (fixext, sizeof fixext, NULL, 0), -2);
    //  Reserved byte
    const unsigned char reserved [] = { 0xc1 };
    assert_int_equal (s_decode (reserved, 1, NULL, 0), -2);
    //  uint64 past INT64_MAX
    const unsigned char huge [] = { 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0 };
    assert_int_equal (s_decode (huge, sizeof huge, why, sizeof why), -2);
    assert_non_null (strstr (why, "int64"));
    const unsigned char max [] = { 0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff };
    assert_int_equal (s_decode (max, sizeof max, NULL, 0), 0);
    const unsigned char min [] = { 0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0 };
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (min, sizeof min, &doc, NULL, 0), 0);
    int64_t number = 0;
    assert_int_equal (pv_get_int (pv_doc_root (doc), &number), 0);
    assert_true (number == INT64_MIN);
    pv_doc_destroy (&doc);
    //  Nothing at all
    assert_int_equal (s_decode ("", 0, NULL, 0), -2);
    assert_int_equal (s_decode (NULL, 0, NULL, 0), -2);
}

static void
test_pv_nul_in_string (void **state)
{
    pw_t *w = pw_new ();
    pw_strn (w, "ab\0cd", 5);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (pv_size (root), 5);
    assert_null (pv_strdup (root));
    assert_false (pv_str_eq (root, "ab"));
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_pv_map_check (void **state)
{
    const pv_field_t fields [] = {
        { "name", PV_STR, true },
        { "count", PV_INT, false },
        { "ratio", PV_FLOAT, false },
    };
    pw_t *w = pw_new ();
    pw_map (w, 2);
    pw_str (w, "name");
    pw_str (w, "x");
    pw_str (w, "ratio");
    pw_int (w, 2);
    pv_doc_t *doc = NULL;
    char why [128];
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    assert_int_equal (pv_map_check (pv_doc_root (doc), fields, 3, why,
                                    sizeof why), 0);
    pv_doc_destroy (&doc);

    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "count");
    pw_int (w, 2);
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    assert_int_equal (pv_map_check (pv_doc_root (doc), fields, 3, why,
                                    sizeof why), -2);
    assert_string_equal (why, "name: required");
    pv_doc_destroy (&doc);

    pw_reset (w);
    pw_map (w, 2);
    pw_str (w, "name");
    pw_str (w, "x");
    pw_str (w, "bogus");
    pw_int (w, 2);
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    assert_int_equal (pv_map_check (pv_doc_root (doc), fields, 3, why,
                                    sizeof why), -2);
    assert_string_equal (why, "unknown key 'bogus'");
    pv_doc_destroy (&doc);

    pw_reset (w);
    pw_map (w, 1);
    pw_str (w, "name");
    pw_int (w, 2);
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    assert_int_equal (pv_map_check (pv_doc_root (doc), fields, 3, why,
                                    sizeof why), -2);
    assert_string_equal (why, "name: expected string, got int");
    assert_int_equal (pv_map_check (pv_map_get (pv_doc_root (doc), "name"),
                                    fields, 3, why, sizeof why), -2);
    assert_string_equal (why, "expected map, got int");
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

//  Writes VALUE as JSON into a fresh string (caller frees).
static char *
s_json (const pv_t *value, int indent)
{
    char *text = NULL;
    size_t size = 0;
    FILE *file = open_memstream (&text, &size);
    assert_non_null (file);
    assert_int_equal (pv_write_json (value, file, indent), 0);
    fclose (file);
    return text;
}

static void
test_pv_json_output (void **state)
{
    pw_t *w = s_sample ();
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    char *text = s_json (pv_doc_root (doc), 0);
    assert_string_equal (text,
        "{\"name\":\"web-01\",\"count\":-42,\"big\":9223372036854775807,"
        "\"ok\":true,\"ratio\":0.5,\"none\":null,"
        "\"list\":[1,\"two\",{\"three\":3}],\"blob\":\"AAEC/w==\","
        "\"text\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\\ufffd\"}");
    free (text);

    text = s_json (pv_map_get (pv_doc_root (doc), "list"), 2);
    assert_string_equal (text,
        "[\n  1,\n  \"two\",\n  {\n    \"three\": 3\n  }\n]");
    free (text);
    pv_doc_destroy (&doc);

    //  Floats keep every digit; empty containers stay compact
    pw_reset (w);
    pw_array (w, 4);
    pw_float (w, 0.1);
    pw_map (w, 0);
    pw_array (w, 0);
    pw_bin (w, "ab", 2);
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    text = s_json (pv_doc_root (doc), 2);
    assert_string_equal (text,
        "[\n  0.10000000000000001,\n  {},\n  [],\n  \"YWI=\"\n]");
    free (text);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_pv_writer_basics (void **state)
{
    pw_t *w = pw_new ();
    assert_int_equal (pw_size (w), 0);
    pw_str (w, NULL);
    assert_int_equal (pw_size (w), 1);
    assert_int_equal (((const unsigned char *) pw_data (w)) [0], 0xc0);
    pw_reset (w);
    assert_int_equal (pw_size (w), 0);
    const unsigned char raw [] = { 0x92, 0x01, 0xa1, 'x' };
    pw_array (w, 2);
    pw_raw (w, raw, sizeof raw);
    pw_pv (w, NULL);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    const pv_t *inner = pv_array_at (pv_doc_root (doc), 0);
    assert_true (pv_str_eq (pv_array_at (inner, 1), "x"));
    assert_int_equal (pv_type (pv_array_at (pv_doc_root (doc), 1)), PV_NIL);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
    pw_destroy (&w);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_pv_decode_sample),
        cmocka_unit_test (test_pv_every_truncation_refused),
        cmocka_unit_test (test_pv_trailing_bytes_refused),
        cmocka_unit_test (test_pv_huge_container_refused),
        cmocka_unit_test (test_pv_too_many_objects_refused),
        cmocka_unit_test (test_pv_deep_nesting_refused),
        cmocka_unit_test (test_pv_duplicate_keys_refused),
        cmocka_unit_test (test_pv_bad_bytes_refused),
        cmocka_unit_test (test_pv_nul_in_string),
        cmocka_unit_test (test_pv_map_check),
        cmocka_unit_test (test_pv_json_output),
        cmocka_unit_test (test_pv_writer_basics),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
