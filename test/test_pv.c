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
    pw_str (w, "a\"b\\c\n\x01\xc3\xa9\xf0\x9f\x99\x82");
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

    //  Keys that differ only in length or in their last byte are distinct
    pw_reset (w);
    pw_map (w, 3);
    pw_strn (w, "a", 1);
    pw_nil (w);
    pw_strn (w, "a\x01", 2);
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
    char why [128];
    pw_t *w = pw_new ();
    pw_strn (w, "ab\0cd", 5);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "NUL"));
    //  A NUL in a key, and in a long string, is refused the same way
    pw_reset (w);
    pw_map (w, 1);
    pw_strn (w, "k\0", 2);
    pw_int (w, 1);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), -2);
    char big [300];
    memset (big, 'x', sizeof big);
    big [299] = 0;
    pw_reset (w);
    pw_strn (w, big, sizeof big);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), -2);
    //  At every offset, wherever eight-byte steps of the check stop: a
    //  string alone, and a key with bytes after it (read a word at a time)
    char after [40];
    memset (after, 'z', sizeof after);
    for (size_t len = 1; len < 24; len++)
        for (size_t at = 0; at < len; at++) {
            char text [24];
            const char bytes [] = {0, (char) 0x80, (char) 0xff, '~'};
            for (size_t kind = 0; kind < 4; kind++) {
                int expect = bytes [kind] == '~' ? 0 : -2;
                memset (text, 'y', sizeof text);
                text [at] = bytes [kind];
                pw_reset (w);
                pw_strn (w, text, len);
                assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0),
                                  expect);
                pw_reset (w);
                pw_map (w, 1);
                pw_strn (w, text, len);
                pw_strn (w, after, sizeof after);
                assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0),
                                  expect);
            }
        }
    //  Binary may hold anything
    pw_reset (w);
    pw_bin (w, "ab\0\xff", 4);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), 0);
    pw_destroy (&w);
}

//  Decodes TEXT (LEN bytes) as a short string value, a map key, a str8
//  value deep in an array and a str16 value, and checks every form gives
//  EXPECT.
static void
s_expect_text (const char *text, size_t len, int expect)
{
    pw_t *w = pw_new ();
    pw_strn (w, text, len);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), expect);
    pw_reset (w);
    pw_map (w, 1);
    pw_strn (w, text, len);
    pw_nil (w);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), expect);
    char padded [400];
    memset (padded, 'a', sizeof padded);
    memcpy (padded + 40, text, len);
    pw_reset (w);
    pw_array (w, 1);
    pw_map (w, 1);
    pw_str (w, "params");
    pw_strn (w, padded, 40 + len);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), expect);
    pw_reset (w);
    pw_strn (w, padded, sizeof padded);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), NULL, 0), expect);
    pw_destroy (&w);
}

static void
test_pv_invalid_utf8_refused (void **state)
{
    static const char *bad [] = {
        "\x80",                    //  Stray continuation byte
        "a\xbf",
        "\xc0\x80",                //  Overlong NUL
        "\xc1\xbf",                //  Overlong U+007F
        "\xe0\x80\x80",            //  Overlong 3-byte
        "\xe0\x9f\xbf",
        "\xf0\x80\x80\x80",        //  Overlong 4-byte
        "\xf0\x8f\xbf\xbf",
        "\xed\xa0\x80",            //  Surrogates U+D800, U+DFFF
        "\xed\xbf\xbf",
        "\xf4\x90\x80\x80",        //  Past U+10FFFF
        "\xf5\x80\x80\x80",
        "\xfe", "\xff",
        "\xc3",                     //  Cut sequences
        "\xe2\x82",
        "\xf0\x9f\x99",
        "\xc3(",                    //  A lead byte without its follower
        "\xe2\x28\xa1",
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++)
        s_expect_text (bad [index], strlen (bad [index]), -2);
    static const char *good [] = {
        "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf",
        "\xee\x80\x80", "\xef\xbf\xbf", "\xf0\x90\x80\x80",
        "\xf4\x8f\xbf\xbf", "caf\xc3\xa9 \xe2\x82\xac", "",
    };
    for (size_t index = 0; index < sizeof good / sizeof good [0]; index++)
        s_expect_text (good [index], strlen (good [index]), 0);

    char why [128];
    pw_t *w = pw_new ();
    pw_str (w, "ok\xc0\xaf");
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_non_null (strstr (why, "UTF-8"));
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

//  Every encoding msgpack has for each type, including the wide forms
//  that a compact writer never uses for small values.
static void
test_pv_every_encoding (void **state)
{
    const unsigned char bytes [] = {
        0xdd, 0x00, 0x00, 0x00, 0x1a,           //  array32 of 26
        0x05,                                   //  0: fixint 5
        0xe0,                                   //  1: fixint -32
        0xcc, 0xff,                             //  2: uint8 255
        0xcd, 0x01, 0x00,                       //  3: uint16 256
        0xce, 0xff, 0xff, 0xff, 0xff,           //  4: uint32 4294967295
        0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
                                                //  5: uint64 4294967296
        0xd0, 0x80,                             //  6: int8 -128
        0xd0, 0x07,                             //  7: int8 7
        0xd1, 0x80, 0x00,                       //  8: int16 -32768
        0xd2, 0x80, 0x00, 0x00, 0x00,           //  9: int32 -2147483648
        0xd3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
                                                //  10: int64 -2
        0xca, 0x3f, 0x00, 0x00, 0x00,           //  11: float32 0.5
        0xcb, 0xc0, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                                //  12: float64 -3.125
        0xc0,                                   //  13: nil
        0xc3,                                   //  14: true
        0xc2,                                   //  15: false
        0xd9, 0x03, 'a', 'b', 'c',              //  16: str8
        0xda, 0x00, 0x01, 'x',                  //  17: str16
        0xdb, 0x00, 0x00, 0x00, 0x00,           //  18: str32, empty
        0xc4, 0x02, 0x00, 0xff,                 //  19: bin8
        0xc5, 0x00, 0x01, 0x7f,                 //  20: bin16
        0xc6, 0x00, 0x00, 0x00, 0x00,           //  21: bin32, empty
        0xdc, 0x00, 0x02, 0x01, 0xa1, 'y',      //  22: array16 [1, "y"]
        0xde, 0x00, 0x01, 0xa1, 'k', 0x02,      //  23: map16 {k: 2}
        0xdf, 0x00, 0x00, 0x00, 0x00,           //  24: map32, empty
        0x90,                                   //  25: fixarray, empty
    };
    pv_doc_t *doc = NULL;
    char why [128] = "";
    if (pv_doc_decode (bytes, sizeof bytes, &doc, why, sizeof why))
        fail_msg ("refused: %s", why);
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (pv_size (root), 26);
    const int64_t ints [] = {
        5, -32, 255, 256, 4294967295LL, 4294967296LL, -128, 7, -32768,
        -2147483648LL, -2
    };
    for (size_t index = 0; index < 11; index++) {
        int64_t number = 0;
        assert_int_equal (pv_type (pv_array_at (root, index)), PV_INT);
        assert_int_equal (pv_get_int (pv_array_at (root, index), &number), 0);
        assert_true (number == ints [index]);
    }
    double real = 0;
    assert_int_equal (pv_get_float (pv_array_at (root, 11), &real), 0);
    assert_true (real == 0.5);
    assert_int_equal (pv_get_float (pv_array_at (root, 12), &real), 0);
    assert_true (real == -3.125);
    assert_int_equal (pv_type (pv_array_at (root, 13)), PV_NIL);
    bool flag = false;
    assert_int_equal (pv_get_bool (pv_array_at (root, 14), &flag), 0);
    assert_true (flag);
    assert_int_equal (pv_get_bool (pv_array_at (root, 15), &flag), 0);
    assert_false (flag);
    assert_true (pv_str_eq (pv_array_at (root, 16), "abc"));
    assert_true (pv_str_eq (pv_array_at (root, 17), "x"));
    assert_true (pv_str_eq (pv_array_at (root, 18), ""));
    size_t len = 0;
    assert_int_equal (pv_type (pv_array_at (root, 19)), PV_BIN);
    assert_memory_equal (pv_str (pv_array_at (root, 19), &len), "\x00\xff", 2);
    assert_int_equal (len, 2);
    assert_memory_equal (pv_str (pv_array_at (root, 20), &len), "\x7f", 1);
    assert_int_equal (len, 1);
    assert_int_equal (pv_type (pv_array_at (root, 21)), PV_BIN);
    assert_int_equal (pv_size (pv_array_at (root, 21)), 0);
    const pv_t *inner = pv_array_at (root, 22);
    assert_int_equal (pv_size (inner), 2);
    assert_true (pv_str_eq (pv_array_at (inner, 1), "y"));
    int64_t number = 0;
    assert_int_equal (pv_get_int (pv_map_get (pv_array_at (root, 23), "k"),
                                  &number), 0);
    assert_int_equal (number, 2);
    assert_int_equal (pv_type (pv_array_at (root, 24)), PV_MAP);
    assert_int_equal (pv_size (pv_array_at (root, 24)), 0);
    assert_int_equal (pv_type (pv_array_at (root, 25)), PV_ARRAY);
    assert_int_equal (pv_size (pv_array_at (root, 25)), 0);
    pv_doc_destroy (&doc);
}

//  An array of COUNT maps {"i": index, "s": "<index>", "a": [index]}:
//  4 + 7 * COUNT objects.
static pw_t *
s_records (size_t count)
{
    pw_t *w = pw_new ();
    pw_map (w, 1);
    pw_str (w, "records");
    pw_array (w, count);
    for (size_t index = 0; index < count; index++) {
        char text [24];
        snprintf (text, sizeof text, "%zu", index);
        pw_map (w, 3);
        pw_str (w, "i");
        pw_int (w, (int64_t) index);
        pw_str (w, "s");
        pw_str (w, text);
        pw_str (w, "a");
        pw_array (w, 1);
        pw_int (w, (int64_t) index);
    }
    return w;
}

static void
s_check_records (const pv_t *root, size_t count)
{
    const pv_t *records = pv_map_get (root, "records");
    assert_int_equal (pv_size (records), count);
    for (size_t index = 0; index < count; index++) {
        const pv_t *record = pv_array_at (records, index);
        char text [24];
        snprintf (text, sizeof text, "%zu", index);
        int64_t number = -1;
        assert_int_equal (pv_get_int (pv_map_get (record, "i"), &number), 0);
        assert_true (number == (int64_t) index);
        assert_true (pv_str_eq (pv_map_get (record, "s"), text));
        number = -1;
        assert_int_equal (pv_get_int (pv_array_at (pv_map_get (record, "a"),
                                                   0), &number), 0);
        assert_true (number == (int64_t) index);
    }
}

//  Small and large documents (small ones are read in one walk, large ones
//  in two) decode alike, copied or borrowed, and re-encode to their bytes.
static void
test_pv_document_sizes (void **state)
{
    for (size_t count = 0; count < 40; count++) {
        pw_t *w = s_records (count);
        for (int borrowed = 0; borrowed < 2; borrowed++) {
            //  A copy the test can overwrite after decoding
            unsigned char *bytes = malloc (pw_size (w));
            assert_non_null (bytes);
            memcpy (bytes, pw_data (w), pw_size (w));
            pv_doc_t *doc = NULL;
            int rc = borrowed
                   ? pv_doc_decode_borrowed (bytes, pw_size (w), &doc, NULL, 0)
                   : pv_doc_decode (bytes, pw_size (w), &doc, NULL, 0);
            assert_int_equal (rc, 0);
            if (!borrowed)
                memset (bytes, 0xc1, pw_size (w));
            s_check_records (pv_doc_root (doc), count);
            pw_t *again = pw_new ();
            pw_pv (again, pv_doc_root (doc));
            assert_int_equal (pw_size (again), pw_size (w));
            assert_memory_equal (pw_data (again), pw_data (w), pw_size (w));
            pw_destroy (&again);
            pv_doc_destroy (&doc);
            free (bytes);
        }
        //  Every truncation of it is refused
        for (size_t size = 0; size < pw_size (w); size += 1 + size / 8)
            assert_int_equal (s_decode (pw_data (w), size, NULL, 0), -2);
        pw_destroy (&w);
    }
}

static void
test_pv_borrowed_strings_point_into_data (void **state)
{
    pw_t *w = s_sample ();
    const char *data = (const char *) pw_data (w);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode_borrowed (data, pw_size (w), &doc, NULL,
                                              0), 0);
    const char *name = pv_str (pv_map_get (pv_doc_root (doc), "name"), NULL);
    assert_true (name >= data && name < data + pw_size (w));
    pv_doc_destroy (&doc);

    assert_int_equal (pv_doc_decode (data, pw_size (w), &doc, NULL, 0), 0);
    name = pv_str (pv_map_get (pv_doc_root (doc), "name"), NULL);
    assert_false (name >= data && name < data + pw_size (w));
    pv_doc_destroy (&doc);

    //  The same refusals as a copying decode
    char why [128];
    const unsigned char trailing [] = { 0xc0, 0xc0 };
    assert_int_equal (pv_doc_decode_borrowed (trailing, 2, &doc, why,
                                              sizeof why), -2);
    assert_null (doc);
    assert_non_null (strstr (why, "trailing"));
    assert_int_equal (pv_doc_decode_borrowed (NULL, 0, &doc, NULL, 0), -2);
    pw_destroy (&w);
}

static void
test_pv_map_entry (void **state)
{
    pw_t *w = s_sample ();
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    const pv_t *root = pv_doc_root (doc);
    const char *key = NULL;
    size_t key_len = 0;
    const pv_t *value = pv_map_entry (root, 1, &key, &key_len);
    assert_int_equal (key_len, 5);
    assert_memory_equal (key, "count", 5);
    assert_ptr_equal (value, pv_map_get (root, "count"));
    key = NULL;
    assert_null (pv_map_entry (root, 9, &key, &key_len));
    assert_null (key);
    assert_null (pv_map_entry (pv_map_get (root, "list"), 0, &key, &key_len));
    assert_null (pv_map_entry (NULL, 0, &key, &key_len));
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

//  Of several maps with duplicate keys, the one that starts first is
//  reported, wherever the maps sit.
static void
test_pv_first_duplicate_reported (void **state)
{
    char why [128];
    pw_t *w = pw_new ();
    //  {"a": {"x": 1, "x": 2}, "b": {"y": 1, "y": 2}}
    pw_map (w, 2);
    pw_str (w, "a");
    pw_map (w, 2);
    pw_str (w, "x");
    pw_int (w, 1);
    pw_str (w, "x");
    pw_int (w, 2);
    pw_str (w, "b");
    pw_map (w, 2);
    pw_str (w, "y");
    pw_int (w, 1);
    pw_str (w, "y");
    pw_int (w, 2);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_string_equal (why, "duplicate map key 'x'");

    //  {"m": {"x": 1, "x": 2}, "m": 1}: the outer map starts first
    pw_reset (w);
    pw_map (w, 2);
    pw_str (w, "m");
    pw_map (w, 2);
    pw_str (w, "x");
    pw_int (w, 1);
    pw_str (w, "x");
    pw_int (w, 2);
    pw_str (w, "m");
    pw_int (w, 1);
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_string_equal (why, "duplicate map key 'm'");

    //  In a small map, the first key that repeats an earlier one
    pw_reset (w);
    pw_map (w, 5);
    const char *keys [] = { "b", "a", "c", "a", "b" };
    for (size_t index = 0; index < 5; index++) {
        pw_str (w, keys [index]);
        pw_nil (w);
    }
    assert_int_equal (s_decode (pw_data (w), pw_size (w), why, sizeof why),
                      -2);
    assert_string_equal (why, "duplicate map key 'a'");
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
        "\"text\":\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\xf0\x9f\x99\x82\"}");
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

//  The writer picks msgpack-c's packer encodings (the shortest, str8 for
//  strings of 32 to 255 bytes) at every boundary, and pw_pv gives back
//  the bytes it was decoded from.
static void
test_pv_writer_encodings (void **state)
{
    struct {
        int64_t value;
        size_t size;
        unsigned char bytes [9];
    } ints [] = {
        {0, 1, {0x00}}, {127, 1, {0x7f}}, {128, 2, {0xcc, 0x80}},
        {255, 2, {0xcc, 0xff}}, {256, 3, {0xcd, 0x01, 0x00}},
        {65535, 3, {0xcd, 0xff, 0xff}},
        {65536, 5, {0xce, 0x00, 0x01, 0x00, 0x00}},
        {4294967295LL, 5, {0xce, 0xff, 0xff, 0xff, 0xff}},
        {4294967296LL, 9, {0xcf, 0, 0, 0, 1, 0, 0, 0, 0}},
        {INT64_MAX, 9, {0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
        {-1, 1, {0xff}}, {-32, 1, {0xe0}}, {-33, 2, {0xd0, 0xdf}},
        {-128, 2, {0xd0, 0x80}}, {-129, 3, {0xd1, 0xff, 0x7f}},
        {-32768, 3, {0xd1, 0x80, 0x00}},
        {-32769, 5, {0xd2, 0xff, 0xff, 0x7f, 0xff}},
        {INT32_MIN, 5, {0xd2, 0x80, 0x00, 0x00, 0x00}},
        {(int64_t) INT32_MIN - 1, 9, {0xd3, 0xff, 0xff, 0xff, 0xff, 0x7f,
                                      0xff, 0xff, 0xff}},
        {INT64_MIN, 9, {0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}},
    };
    pw_t *w = pw_new ();
    for (size_t index = 0; index < sizeof ints / sizeof ints [0]; index++) {
        pw_reset (w);
        pw_int (w, ints [index].value);
        assert_int_equal (pw_size (w), ints [index].size);
        assert_memory_equal (pw_data (w), ints [index].bytes,
                             ints [index].size);
    }
    //  Strings: fixstr, str8, str16, str32 headers
    size_t lens [] = {0, 31, 32, 255, 256, 65535, 65536};
    unsigned char heads [][5] = {
        {0xa0}, {0xbf}, {0xd9, 32}, {0xd9, 255}, {0xda, 0x01, 0x00},
        {0xda, 0xff, 0xff}, {0xdb, 0x00, 0x01, 0x00, 0x00}
    };
    size_t head_sizes [] = {1, 1, 2, 2, 3, 3, 5};
    char *text = (char *) malloc (65536);
    memset (text, 'g', 65536);
    for (size_t index = 0; index < sizeof lens / sizeof lens [0]; index++) {
        pw_reset (w);
        pw_strn (w, text, lens [index]);
        assert_int_equal (pw_size (w), head_sizes [index] + lens [index]);
        assert_memory_equal (pw_data (w), heads [index], head_sizes [index]);
        assert_memory_equal ((const char *) pw_data (w) + head_sizes [index],
                             text, lens [index]);
    }
    free (text);
    //  Map and array headers
    size_t counts [] = {15, 16, 65535, 65536};
    unsigned char maps [][5] = {
        {0x8f}, {0xde, 0x00, 0x10}, {0xde, 0xff, 0xff},
        {0xdf, 0x00, 0x01, 0x00, 0x00}
    };
    unsigned char arrays [][5] = {
        {0x9f}, {0xdc, 0x00, 0x10}, {0xdc, 0xff, 0xff},
        {0xdd, 0x00, 0x01, 0x00, 0x00}
    };
    size_t container_sizes [] = {1, 3, 3, 5};
    for (size_t index = 0; index < 4; index++) {
        pw_reset (w);
        pw_map (w, counts [index]);
        pw_array (w, counts [index]);
        size_t size = container_sizes [index];
        assert_int_equal (pw_size (w), 2 * size);
        assert_memory_equal (pw_data (w), maps [index], size);
        assert_memory_equal ((const char *) pw_data (w) + size, arrays [index],
                             size);
    }
    //  A document written by calls reads back, and pw_pv gives its bytes
    pw_reset (w);
    pw_map (w, 5);
    pw_str (w, "status");
    pw_str (w, "success");
    pw_str (w, "exit_code");
    pw_int (w, -1);
    pw_str (w, "duration_ms");
    pw_int (w, 70000);
    pw_str (w, "truncated");
    pw_bool (w, false);
    pw_str (w, "error");
    pw_nil (w);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL, 0),
                      0);
    int64_t value = 0;
    assert_int_equal (pv_get_int (pv_map_get (pv_doc_root (doc), "duration_ms"),
                                  &value), 0);
    assert_int_equal (value, 70000);
    pw_t *again = pw_new ();
    pw_pv (again, pv_doc_root (doc));
    assert_int_equal (pw_size (again), pw_size (w));
    assert_memory_equal (pw_data (again), pw_data (w), pw_size (w));
    pw_destroy (&again);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

//  Two encodings of one meaning (keys in another order, an int written
//  as int64, a float32) give the same canonical bytes; another meaning
//  does not.
static void
test_pv_canonical_form (void **state)
{
    //  {"b": 1, "a": [{"z": 2, "y": "t"}]} with b as int64 and a float32
    const unsigned char one [] = {
        0x83, 0xa1, 'b', 0xd3, 0, 0, 0, 0, 0, 0, 0, 1,
        0xa1, 'a', 0x91, 0x82, 0xa1, 'z', 0x02, 0xa1, 'y', 0xa1, 't',
        0xa1, 'f', 0xca, 0x3f, 0xc0, 0x00, 0x00 };
    //  The same, keys in order, shortest ints, f as float64
    const unsigned char two [] = {
        0x83, 0xa1, 'a', 0x91, 0x82, 0xa1, 'y', 0xa1, 't', 0xa1, 'z', 0x02,
        0xa1, 'b', 0x01,
        0xa1, 'f', 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0 };
    //  b is 2
    const unsigned char three [] = {
        0x83, 0xa1, 'a', 0x91, 0x82, 0xa1, 'y', 0xa1, 't', 0xa1, 'z', 0x02,
        0xa1, 'b', 0x02,
        0xa1, 'f', 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0 };
    const unsigned char *inputs [] = { one, two, three };
    size_t sizes [] = { sizeof one, sizeof two, sizeof three };
    pw_t *forms [3];
    for (int index = 0; index < 3; index++) {
        pv_doc_t *doc = NULL;
        assert_int_equal (pv_doc_decode (inputs [index], sizes [index], &doc,
                                         NULL, 0), 0);
        forms [index] = pw_new ();
        pw_pv_canonical (forms [index], pv_doc_root (doc));
        pv_doc_destroy (&doc);
    }
    assert_int_equal (pw_size (forms [0]), pw_size (forms [1]));
    assert_memory_equal (pw_data (forms [0]), pw_data (forms [1]),
                         pw_size (forms [0]));
    //  Sorted keys, shortest encodings: the second input as it was
    assert_int_equal (pw_size (forms [1]), sizeof two);
    assert_memory_equal (pw_data (forms [1]), two, sizeof two);
    assert_true (pw_size (forms [2]) != pw_size (forms [1])
                 || memcmp (pw_data (forms [2]), pw_data (forms [1]),
                            pw_size (forms [1])) != 0);
    pw_pv_canonical (forms [2], NULL);
    for (int index = 0; index < 3; index++)
        pw_destroy (&forms [index]);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_pv_canonical_form),
        cmocka_unit_test (test_pv_decode_sample),
        cmocka_unit_test (test_pv_every_truncation_refused),
        cmocka_unit_test (test_pv_trailing_bytes_refused),
        cmocka_unit_test (test_pv_huge_container_refused),
        cmocka_unit_test (test_pv_too_many_objects_refused),
        cmocka_unit_test (test_pv_deep_nesting_refused),
        cmocka_unit_test (test_pv_duplicate_keys_refused),
        cmocka_unit_test (test_pv_bad_bytes_refused),
        cmocka_unit_test (test_pv_nul_in_string),
        cmocka_unit_test (test_pv_invalid_utf8_refused),
        cmocka_unit_test (test_pv_map_check),
        cmocka_unit_test (test_pv_every_encoding),
        cmocka_unit_test (test_pv_document_sizes),
        cmocka_unit_test (test_pv_borrowed_strings_point_into_data),
        cmocka_unit_test (test_pv_map_entry),
        cmocka_unit_test (test_pv_first_duplicate_reported),
        cmocka_unit_test (test_pv_json_output),
        cmocka_unit_test (test_pv_writer_basics),
        cmocka_unit_test (test_pv_writer_encodings),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
