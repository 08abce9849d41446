/*  =========================================================================
    test_pj - JSON <-> msgpack values: every JSON type in and back out,
    key order kept, the depth bound, binary as base64
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

#include "../proto/pj.h"
#include "../proto/pv.h"
#include "../proto/pw.h"

//  JSON TEXT -> msgpack -> JSON, as compact text (caller frees).
static char *
s_round_trip (const char *text)
{
    json_error_t error;
    json_t *in = json_loads (text, 0, &error);
    assert_non_null (in);
    pw_t *writer = pw_new ();
    char why [128];
    assert_int_equal (pj_write (writer, in, why, sizeof why), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0),
                      0);
    json_t *out = pj_from_pv (pv_doc_root (doc));
    char *result = json_dumps (out, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref (out);
    json_decref (in);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    return result;
}

static void
test_pj_every_type_round_trips (void **state)
{
    const char *text = "{\"z\":1,\"a\":[true,false,null,-5,2.5,\"x\"],"
                       "\"m\":{\"k\":\"v\"},\"big\":9007199254740993,"
                       "\"neg\":-9223372036854775808,\"u\":\"caf\\u00E9\"}";
    char *back = s_round_trip (text);
    assert_string_equal (back, text);
    free (back);
}

static void
test_pj_json_becomes_wire_types (void **state)
{
    json_t *in = json_pack ("{s:i, s:f, s:b, s:s, s:n}", "int", 7, "real",
                            0.5, "bool", 1, "str", "hi", "nil");
    pw_t *writer = pw_new ();
    char why [128];
    assert_int_equal (pj_write (writer, in, why, sizeof why), 0);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0),
                      0);
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (pv_type (pv_map_get (root, "int")), PV_INT);
    assert_int_equal (pv_type (pv_map_get (root, "real")), PV_FLOAT);
    assert_int_equal (pv_type (pv_map_get (root, "bool")), PV_BOOL);
    assert_true (pv_str_eq (pv_map_get (root, "str"), "hi"));
    assert_int_equal (pv_type (pv_map_get (root, "nil")), PV_NIL);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    json_decref (in);
}

static void
test_pj_depth_is_bounded (void **state)
{
    //  PV_MAX_DEPTH levels pass, one more is refused
    char text [256] = "";
    for (int level = 0; level < PV_MAX_DEPTH; level++)
        strcat (text, "[");
    for (int level = 0; level < PV_MAX_DEPTH; level++)
        strcat (text, "]");
    json_t *in = json_loads (text, 0, NULL);
    assert_non_null (in);
    pw_t *writer = pw_new ();
    char why [128];
    assert_int_equal (pj_write (writer, in, why, sizeof why), 0);
    json_t *deeper = json_array ();
    json_array_append_new (deeper, in);
    pw_reset (writer);
    assert_int_equal (pj_write (writer, deeper, why, sizeof why), -2);
    assert_non_null (strstr (why, "deeper"));
    json_decref (deeper);
    pw_destroy (&writer);
}

static void
test_pj_binary_as_base64 (void **state)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 3);
    pw_str (writer, "bin");
    pw_bin (writer, "hello http\n", 11);
    pw_str (writer, "empty");
    pw_bin (writer, "", 0);
    pw_str (writer, "text");
    pw_strn (writer, "caf\xc3\xa9", 5);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0),
                      0);
    json_t *out = pj_from_pv (pv_doc_root (doc));
    assert_string_equal (json_string_value (json_object_get (out, "bin")),
                         "aGVsbG8gaHR0cAo=");
    assert_string_equal (json_string_value (json_object_get (out, "empty")),
                         "");
    assert_string_equal (json_string_value (json_object_get (out, "text")),
                         "caf\xc3\xa9");
    json_decref (out);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    //  NULL is JSON null
    json_t *null_value = pj_from_pv (NULL);
    assert_true (json_is_null (null_value));
    json_decref (null_value);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_pj_every_type_round_trips),
        cmocka_unit_test (test_pj_json_becomes_wire_types),
        cmocka_unit_test (test_pj_depth_is_bounded),
        cmocka_unit_test (test_pj_binary_as_base64),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
