/*  =========================================================================
    test_nodeset - sets of node slots, in either form, against a plain
    array of flags.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../broker/nodeset.h"

#define S_SLOTS 3000

static uint32_t
s_random (uint32_t *seed)
{
    *seed ^= *seed << 13;
    *seed ^= *seed >> 17;
    *seed ^= *seed << 5;
    return *seed;
}

//  Asserts that SET holds exactly the slots flagged in HAS.
static void
s_assert_same (const nodeset_t *set, const bool *has)
{
    size_t words = S_SLOTS / 64 + 1;
    uint64_t bits [S_SLOTS / 64 + 1];
    memset (bits, 0, sizeof bits);
    nodeset_mark (set, bits, words);
    size_t count = 0;
    for (uint32_t slot = 0; slot < S_SLOTS; slot++) {
        bool marked = (bits [slot / 64] >> (slot % 64)) & 1;
        if (marked != has [slot] || nodeset_has (set, slot) != has [slot])
            fail_msg ("slot %u: marked %d, has %d, expected %d", slot, marked,
                      nodeset_has (set, slot), has [slot]);
        count += has [slot];
    }
    assert_int_equal (nodeset_size (set), count);
    //  Never much more than an array of the members would take
    if (nodeset_bytes (set) > 64 + count * 16)
        fail_msg ("%zu bytes for %zu slots", nodeset_bytes (set), count);
}

//  Random adds and removes, now sparse (an array), now dense (a bitmap),
//  growing from small slots to large ones as a registry gives them out.
static void
test_nodeset_agrees_with_flags (void **state)
{
    uint32_t seed = 7;
    for (int round = 0; round < 20; round++) {
        nodeset_t *set = nodeset_new ();
        assert_non_null (set);
        bool has [S_SLOTS];
        memset (has, 0, sizeof has);
        uint32_t span = 16;
        for (int step = 0; step < 4000; step++) {
            if (span < S_SLOTS && step % 8 == 0)
                span++;
            //  Rounds differ in how full the set runs
            uint32_t fill = 1 + (uint32_t) round % 5;
            uint32_t slot = s_random (&seed) % span;
            if (s_random (&seed) % 6 < fill) {
                assert_int_equal (nodeset_add (set, slot), 0);
                has [slot] = true;
            }
            else {
                nodeset_remove (set, slot);
                has [slot] = false;
            }
            if (step % 97 == 0)
                s_assert_same (set, has);
        }
        s_assert_same (set, has);
        //  Emptied whole, whatever its form
        for (uint32_t slot = 0; slot < S_SLOTS; slot++)
            nodeset_remove (set, slot);
        memset (has, 0, sizeof has);
        s_assert_same (set, has);
        nodeset_destroy (&set);
        assert_null (set);
    }
    nodeset_destroy (NULL);
}

//  A mark into fewer words than the set spans leaves the rest out, and
//  clears nothing.
static void
test_nodeset_marks_within_its_words (void **state)
{
    nodeset_t *dense = nodeset_new (), *sparse = nodeset_new ();
    for (uint32_t slot = 0; slot < 1000; slot++)
        assert_int_equal (nodeset_add (dense, slot), 0);
    assert_int_equal (nodeset_add (dense, 5), 0);   //  Once only
    assert_int_equal (nodeset_size (dense), 1000);
    assert_int_equal (nodeset_add (sparse, 3), 0);
    assert_int_equal (nodeset_add (sparse, 900), 0);
    //  A bitmap is no larger than the array it replaced
    assert_true (nodeset_bytes (dense) < 1000 * sizeof (uint32_t));
    uint64_t bits [2] = {0, 1ULL << 63};
    nodeset_mark (sparse, bits, 2);
    assert_true (bits [0] == 1ULL << 3 && bits [1] == 1ULL << 63);
    nodeset_mark (dense, bits, 2);
    assert_true (bits [0] == UINT64_MAX && bits [1] == UINT64_MAX);
    nodeset_remove (dense, 4000);   //  Beyond it: nothing
    assert_int_equal (nodeset_size (dense), 1000);
    nodeset_destroy (&dense);
    nodeset_destroy (&sparse);
}

//  A set of one node takes no heap of its own, in a struct of the
//  caller's; a second member moves both to an array, and back.
static void
test_nodeset_of_one_takes_no_heap (void **state)
{
    struct {
        const char *value;
        nodeset_t nodes;
    } holder = {.value = "node-000123"};
    nodeset_init (&holder.nodes);
    assert_int_equal (nodeset_add (&holder.nodes, 123456), 0);
    assert_int_equal (nodeset_bytes (&holder.nodes), sizeof (nodeset_t));
    assert_true (nodeset_has (&holder.nodes, 123456));
    assert_false (nodeset_has (&holder.nodes, 0));
    assert_int_equal (nodeset_add (&holder.nodes, 7), 0);
    assert_int_equal (nodeset_size (&holder.nodes), 2);
    assert_true (nodeset_bytes (&holder.nodes) > sizeof (nodeset_t));
    nodeset_remove (&holder.nodes, 123456);
    assert_int_equal (nodeset_bytes (&holder.nodes), sizeof (nodeset_t));
    assert_true (nodeset_has (&holder.nodes, 7));
    assert_false (nodeset_has (&holder.nodes, 123456));
    uint64_t bits [1] = {0};
    nodeset_mark (&holder.nodes, bits, 1);
    assert_true (bits [0] == 1ULL << 7);
    nodeset_remove (&holder.nodes, 7);
    assert_int_equal (nodeset_size (&holder.nodes), 0);
    assert_false (nodeset_has (&holder.nodes, 7));
    nodeset_clear (&holder.nodes);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_nodeset_agrees_with_flags),
        cmocka_unit_test (test_nodeset_marks_within_its_words),
        cmocka_unit_test (test_nodeset_of_one_takes_no_heap),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
