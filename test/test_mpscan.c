/*  =========================================================================
    test_mpscan - finding values in msgpack bytes without decoding them:
    every encoding's size, a map's values found (first, unique, twice),
    every truncation refused, and a hello cut to its backends-free part
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

#include "../backends/backend.h"
#include "../proto/mpscan.h"
#include "../proto/proto.h"
#include "../proto/pv.h"
#include "../proto/pw.h"

//  The size mpscan_skip gives the value WRITER holds, which must be all of
//  it; and every shorter prefix must be refused.
static void
s_assert_whole (pw_t *writer)
{
    const uint8_t *data = (const uint8_t *) pw_data (writer);
    size_t size = pw_size (writer);
    assert_int_equal (mpscan_skip (data, size), size);
    for (size_t cut = 0; cut < size; cut++) {
        //  A copy of exactly CUT bytes, so that a read past it would show
        //  under the sanitizers
        uint8_t *copy = (uint8_t *) malloc (cut ? cut : 1);
        assert_non_null (copy);
        memcpy (copy, data, cut);
        assert_int_equal (mpscan_skip (copy, cut), 0);
        free (copy);
    }
}

static void
test_mpscan_every_encoding (void **state)
{
    pw_t *writer = pw_new ();
    //  Integers of every width, both signs
    int64_t ints [] = {0, 1, 127, 128, 255, 256, 65535, 65536,
                       4294967295LL, 4294967296LL, INT64_MAX, -1, -32, -33,
                       -128, -129, -32768, -32769, -2147483648LL,
                       -2147483649LL, INT64_MIN};
    for (size_t at = 0; at < sizeof ints / sizeof ints [0]; at++) {
        pw_reset (writer);
        pw_int (writer, ints [at]);
        s_assert_whole (writer);
    }
    //  Strings and binaries across their length boundaries
    static char text [70000];
    memset (text, 'x', sizeof text);
    size_t lens [] = {0, 1, 31, 32, 255, 256, 65535, 65536, 69999};
    for (size_t at = 0; at < sizeof lens / sizeof lens [0]; at++) {
        pw_reset (writer);
        pw_strn (writer, text, lens [at]);
        assert_int_equal (mpscan_skip (pw_data (writer), pw_size (writer)),
                          pw_size (writer));
        assert_int_equal (mpscan_skip (pw_data (writer),
                                       pw_size (writer) - 1), 0);
        pw_reset (writer);
        pw_bin (writer, text, lens [at]);
        assert_int_equal (mpscan_skip (pw_data (writer), pw_size (writer)),
                          pw_size (writer));
        assert_int_equal (mpscan_skip (pw_data (writer),
                                       pw_size (writer) - 1), 0);
    }
    //  Scalars, and arrays and maps of 0, 15, 16 and 65536 entries
    pw_reset (writer);
    pw_array (writer, 4);
    pw_nil (writer);
    pw_bool (writer, true);
    pw_bool (writer, false);
    pw_float (writer, 1.5);
    s_assert_whole (writer);
    size_t counts [] = {0, 15, 16, 65536};
    for (size_t at = 0; at < sizeof counts / sizeof counts [0]; at++) {
        pw_reset (writer);
        pw_array (writer, counts [at]);
        for (size_t item = 0; item < counts [at]; item++)
            pw_int (writer, (int64_t) item);
        assert_int_equal (mpscan_skip (pw_data (writer), pw_size (writer)),
                          pw_size (writer));
        pw_reset (writer);
        pw_map (writer, counts [at]);
        for (size_t item = 0; item < counts [at]; item++) {
            pw_int (writer, (int64_t) item);
            pw_str (writer, "v");
        }
        assert_int_equal (mpscan_skip (pw_data (writer), pw_size (writer)),
                          pw_size (writer));
        assert_int_equal (mpscan_skip (pw_data (writer),
                                       pw_size (writer) - 1), 0);
    }
    //  Extension types, which grid never sends, are skipped all the same
    uint8_t fixext [] = {0xd4, 0x01, 0x02};
    assert_int_equal (mpscan_skip (fixext, sizeof fixext), 3);
    uint8_t ext8 [] = {0xc7, 0x02, 0x01, 0xaa, 0xbb};
    assert_int_equal (mpscan_skip (ext8, sizeof ext8), 5);
    assert_int_equal (mpscan_skip (ext8, 4), 0);
    //  The reserved byte, and counts far past the bytes there are
    uint8_t reserved [] = {0x91, 0xc1};
    assert_int_equal (mpscan_skip (reserved, sizeof reserved), 0);
    uint8_t huge [] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x00};
    assert_int_equal (mpscan_skip (huge, sizeof huge), 0);
    uint8_t deep [4096];
    memset (deep, 0x91, sizeof deep);
    deep [sizeof deep - 1] = 0x00;
    assert_int_equal (mpscan_skip (deep, sizeof deep), sizeof deep);
    assert_int_equal (mpscan_skip (deep, sizeof deep - 1), 0);
    pw_destroy (&writer);
}

static void
test_mpscan_map_find (void **state)
{
    pw_t *writer = pw_new ();
    pw_map (writer, 3);
    pw_str (writer, "type");
    pw_str (writer, "hello");
    pw_str (writer, "list");
    pw_array (writer, 2);
    pw_str (writer, "a");
    pw_int (writer, 70000);
    pw_str (writer, "n");
    pw_int (writer, 7);
    const uint8_t *data = (const uint8_t *) pw_data (writer);
    size_t size = pw_size (writer);
    size_t at = 0, len = 0;
    assert_int_equal (mpscan_map_find (data, size, "type", false, &at, &len),
                      0);
    assert_true (mpscan_str_is (data + at, len, "hello"));
    assert_false (mpscan_str_is (data + at, len, "hell"));
    assert_false (mpscan_str_is (data + at, len, "hello!"));
    assert_int_equal (mpscan_map_find (data, size, "list", false, &at, &len),
                      0);
    assert_int_equal (len, 1 + 2 + 5);
    assert_int_equal (data [at], 0x92);
    assert_int_equal (mpscan_map_find (data, size, "n", true, &at, &len), 0);
    assert_int_equal (len, 1);
    assert_int_equal (mpscan_map_find (data, size, "none", false, &at, &len),
                      -1);
    assert_int_equal (mpscan_map_find (data, size, "typ", false, &at, &len),
                      -1);
    //  Unique: trailing bytes, or every cut, and it is not found
    for (size_t cut = 0; cut < size; cut++)
        assert_int_equal (mpscan_map_find (data, cut, "n", false, &at, &len),
                          -1);
    pw_int (writer, 1);
    assert_int_equal (mpscan_map_find (pw_data (writer), pw_size (writer),
                                       "n", false, &at, &len), -1);
    //  ...while the first one is found before what follows is read
    assert_int_equal (mpscan_map_find (pw_data (writer), pw_size (writer),
                                       "type", true, &at, &len), 0);
    //  A key twice is found only as a hint
    pw_reset (writer);
    pw_map (writer, 2);
    pw_str (writer, "k");
    pw_int (writer, 1);
    pw_str (writer, "k");
    pw_int (writer, 2);
    assert_int_equal (mpscan_map_find (pw_data (writer), pw_size (writer),
                                       "k", false, &at, &len), -1);
    assert_int_equal (mpscan_map_find (pw_data (writer), pw_size (writer),
                                       "k", true, &at, &len), 0);
    //  Not a map
    pw_reset (writer);
    pw_array (writer, 0);
    assert_int_equal (mpscan_map_find (pw_data (writer), pw_size (writer),
                                       "k", true, &at, &len), -1);
    assert_int_equal (mpscan_map_find ("", 0, "k", true, &at, &len), -1);
    pw_destroy (&writer);
}

static void
test_mpscan_replace (void **state)
{
    uint8_t out [16];
    size_t size = mpscan_replace ("abcdef", 6, 2, 3, "X", 1, out, sizeof out);
    assert_int_equal (size, 4);
    assert_memory_equal (out, "abXf", 4);
    assert_int_equal (mpscan_replace ("abcdef", 6, 4, 3, "X", 1, out,
                                      sizeof out), 0);
    assert_int_equal (mpscan_replace ("abcdef", 6, 7, 0, "X", 1, out,
                                      sizeof out), 0);
    assert_int_equal (mpscan_replace ("abcdef", 6, 0, 0, "0123456789abc", 13,
                                      out, sizeof out), 0);
    assert_int_equal (mpscan_replace ("abcdef", 6, 6, 0, "!", 1, out,
                                      sizeof out), 7);
    assert_memory_equal (out, "abcdef!", 7);
}

//  A hello with the real backends: its backends value found where the
//  codec put it, and the hello cut to an empty list decodes to the same
//  message without them.
static void
test_mpscan_hello_without_backends (void **state)
{
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    hello->node = strdup ("web-01");
    hello->hostname = strdup ("web-01.example");
    hello->groups = (char **) calloc (1, sizeof (char *));
    hello->groups [0] = strdup ("web");
    hello->group_count = 1;
    hello->labels = (proto_kv_t *) calloc (1, sizeof (proto_kv_t));
    hello->labels [0].key = strdup ("dc");
    hello->labels [0].value = strdup ("eu.paris");
    hello->label_count = 1;
    hello->version = strdup ("1.0");
    hello->concurrency = 4;
    assert_int_equal (backends_hello_specs (NULL, 0, &hello->backends,
                                            &hello->backend_count), 0);
    assert_true (hello->backend_count > 0);
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (hello, writer), 0);
    const uint8_t *data = (const uint8_t *) pw_data (writer);
    size_t size = pw_size (writer);
    size_t at = 0, len = 0;
    assert_int_equal (mpscan_map_find (data, size, "type", true, &at, &len),
                      0);
    assert_true (mpscan_str_is (data + at, len, "hello"));
    assert_int_equal (mpscan_map_find (data, size, "backends", false, &at,
                                       &len), 0);
    //  Most of the hello is its backends
    assert_true (len > size / 2);
    pw_t *list = pw_new ();
    pw_array (list, 0);
    uint8_t *cut = (uint8_t *) malloc (size);
    size_t cut_size = mpscan_replace (data, size, at, len, pw_data (list),
                                      pw_size (list), cut, size);
    assert_int_equal (cut_size, size - len + 1);
    proto_msg_t *decoded = NULL;
    assert_int_equal (proto_msg_decode (cut, cut_size, &decoded, NULL, 0), 0);
    assert_int_equal (decoded->type, PROTO_HELLO);
    assert_string_equal (decoded->node, "web-01");
    assert_int_equal (decoded->group_count, 1);
    assert_string_equal (decoded->labels [0].value, "eu.paris");
    assert_int_equal (decoded->backend_count, 0);
    proto_msg_destroy (&decoded);
    free (cut);
    pw_destroy (&list);
    pw_destroy (&writer);
    proto_msg_destroy (&hello);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_mpscan_every_encoding),
        cmocka_unit_test (test_mpscan_map_find),
        cmocka_unit_test (test_mpscan_replace),
        cmocka_unit_test (test_mpscan_hello_without_backends),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
