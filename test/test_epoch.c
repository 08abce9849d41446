/*  =========================================================================
    test_epoch - the fence a broker cluster's epoch puts at agents and
    relays: lower epochs refused and warned of once each, epoch 0 always
    taken, a higher one taken and kept in the file across a restart, a
    missing or corrupt file taken as 0, a welcome of a lower epoch taken
    only after the hold; and the epoch read from a message's bytes
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../proto/epoch.h"
#include "../proto/log.h"
#include "../proto/proto.h"
#include "../proto/pw.h"

//  A fresh file name in a fresh temporary directory (removed by
//  s_cleanup).
static char s_dir [64];
static char s_path [128];

static void
s_fresh (void)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/test_epoch.XXXXXX");
    assert_non_null (mkdtemp (s_dir));
    snprintf (s_path, sizeof s_path, "%s/epoch", s_dir);
}

static void
s_cleanup (void)
{
    char temp [160];
    snprintf (temp, sizeof temp, "%s.tmp", s_path);
    unlink (temp);
    unlink (s_path);
    rmdir (s_dir);
}

static void
s_write (const char *text, size_t len)
{
    FILE *file = fopen (s_path, "w");
    assert_non_null (file);
    assert_int_equal (fwrite (text, 1, len, file), len);
    fclose (file);
}

static void
test_epoch_gate_orders (void **state)
{
    epoch_gate_t *gate = epoch_gate_new (NULL);
    assert_non_null (gate);
    assert_int_equal (epoch_gate_highest (gate), 0);
    //  No epoch: a broker alone, always taken
    assert_int_equal (epoch_gate_judge (gate, 0, false, 1000), EPOCH_PASS);
    assert_int_equal (epoch_gate_judge (gate, 7, true, 1000), EPOCH_PASS);
    assert_int_equal (epoch_gate_judge (gate, 7, false, 1000), EPOCH_PASS);
    assert_int_equal (epoch_gate_highest (gate), 7);
    //  A failover: the higher one is the fence now
    assert_int_equal (epoch_gate_judge (gate, 12, false, 1000), EPOCH_PASS);
    assert_int_equal (epoch_gate_highest (gate), 12);
    //  The demoted active wakes up: each of its messages is refused, the
    //  first of its epoch with a warning
    assert_int_equal (epoch_gate_judge (gate, 7, false, 1000),
                      EPOCH_REFUSE_WARN);
    assert_int_equal (epoch_gate_judge (gate, 7, false, 1001), EPOCH_REFUSE);
    assert_int_equal (epoch_gate_judge (gate, 3, false, 1002),
                      EPOCH_REFUSE_WARN);
    assert_int_equal (epoch_gate_judge (gate, 3, false, 1003), EPOCH_REFUSE);
    assert_int_equal (epoch_gate_refused (gate), 4);
    //  A broker alone that replaced the cluster strands nobody, and
    //  changes nothing
    assert_int_equal (epoch_gate_judge (gate, 0, true, 1004), EPOCH_PASS);
    assert_int_equal (epoch_gate_judge (gate, 0, false, 1004), EPOCH_PASS);
    assert_int_equal (epoch_gate_highest (gate), 12);
    assert_int_equal (epoch_gate_judge (gate, 12, false, 1005), EPOCH_PASS);
    epoch_gate_destroy (&gate);
    assert_null (gate);
    epoch_gate_destroy (&gate);
}

//  A welcome of a lower epoch is refused until the hold has passed
//  since the first such refusal with no welcome of the highest between;
//  then it is the new highest (an etcd rebuilt from nothing).
static void
test_epoch_gate_welcome_hold (void **state)
{
    epoch_gate_t *gate = epoch_gate_new (NULL);
    assert_int_equal (epoch_gate_judge (gate, 500, true, 10), EPOCH_PASS);
    assert_int_equal (epoch_gate_judge (gate, 4, true, 100),
                      EPOCH_REFUSE_WARN);
    assert_int_equal (epoch_gate_judge (gate, 4, true,
                                        100 + EPOCH_WELCOME_HOLD_MS - 1),
                      EPOCH_REFUSE);
    //  A welcome of the highest epoch meanwhile starts the hold again
    assert_int_equal (epoch_gate_judge (gate, 500, true, 200), EPOCH_PASS);
    assert_int_equal (epoch_gate_judge (gate, 4, true,
                                        100 + EPOCH_WELCOME_HOLD_MS),
                      EPOCH_REFUSE);
    int64_t first = 100 + EPOCH_WELCOME_HOLD_MS;
    //  Other messages of the lower epoch never end the hold
    assert_int_equal (epoch_gate_judge (gate, 4, false,
                                        first + 2 * EPOCH_WELCOME_HOLD_MS),
                      EPOCH_REFUSE);
    assert_int_equal (epoch_gate_judge (gate, 4, true,
                                        first + EPOCH_WELCOME_HOLD_MS),
                      EPOCH_RESET);
    assert_int_equal (epoch_gate_highest (gate), 4);
    assert_int_equal (epoch_gate_judge (gate, 4, false,
                                        first + EPOCH_WELCOME_HOLD_MS),
                      EPOCH_PASS);
    epoch_gate_destroy (&gate);
}

//  The highest epoch outlives the gate in its file
static void
test_epoch_gate_file (void **state)
{
    s_fresh ();
    epoch_gate_t *gate = epoch_gate_new (s_path);
    assert_int_equal (epoch_gate_highest (gate), 0);
    assert_int_equal (access (s_path, F_OK), -1);
    assert_int_equal (epoch_gate_judge (gate, 42, true, 1), EPOCH_PASS);
    epoch_gate_destroy (&gate);
    gate = epoch_gate_new (s_path);
    assert_int_equal (epoch_gate_highest (gate), 42);
    assert_int_equal (epoch_gate_judge (gate, 41, false, 1),
                      EPOCH_REFUSE_WARN);
    epoch_gate_destroy (&gate);

    //  Corrupt files are taken as 0 (logged), never a crash
    const char *bad [] = {"", "x", "-3\n", "12abc\n", "99999999999999999999\n",
                          "18446744073709551615\n", "7\n8\n", " 7\n"};
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        s_write (bad [index], strlen (bad [index]));
        gate = epoch_gate_new (s_path);
        assert_non_null (gate);
        assert_int_equal (epoch_gate_highest (gate), 0);
        epoch_gate_destroy (&gate);
    }
    //  Binary junk with a NUL in it
    s_write ("5\0\n", 3);
    gate = epoch_gate_new (s_path);
    assert_int_equal (epoch_gate_highest (gate), 0);
    epoch_gate_destroy (&gate);
    //  The last line feed is optional
    s_write ("77", 2);
    gate = epoch_gate_new (s_path);
    assert_int_equal (epoch_gate_highest (gate), 77);
    epoch_gate_destroy (&gate);
    s_cleanup ();

    //  A file that cannot be written: the gate still fences in memory
    gate = epoch_gate_new ("/nonexistent-dir/epoch");
    assert_non_null (gate);
    assert_int_equal (epoch_gate_judge (gate, 9, false, 1), EPOCH_PASS);
    assert_int_equal (epoch_gate_highest (gate), 9);
    assert_int_equal (epoch_gate_judge (gate, 8, false, 1),
                      EPOCH_REFUSE_WARN);
    epoch_gate_destroy (&gate);
}

//  The epoch read from bytes is the one the codec writes
static void
test_epoch_of_body (void **state)
{
    uint64_t epochs [] = {0, 1, 127, 128, 255, 256, 65535, 65536,
                          UINT32_MAX, (uint64_t) UINT32_MAX + 1, INT64_MAX};
    pw_t *writer = pw_new ();
    for (size_t index = 0; index < sizeof epochs / sizeof epochs [0];
         index++) {
        proto_msg_t msg;
        memset (&msg, 0, sizeof msg);
        msg.type = PROTO_RESULT_ACK;
        msg.job = "j-0193a1b2c3d4-0001";
        msg.attempt = 1;
        msg.epoch = epochs [index];
        pw_reset (writer);
        assert_int_equal (proto_msg_encode (&msg, writer), 0);
        assert_true (epoch_of_body (pw_data (writer), pw_size (writer))
                     == epochs [index]);
    }
    //  Hostile bodies: not a map, a negative, a string, twice, truncated
    pw_reset (writer);
    pw_array (writer, 1);
    pw_int (writer, 5);
    assert_true (epoch_of_body (pw_data (writer), pw_size (writer)) == 0);
    pw_reset (writer);
    pw_map (writer, 1);
    pw_str (writer, "epoch");
    pw_int (writer, -5);
    assert_true (epoch_of_body (pw_data (writer), pw_size (writer)) == 0);
    pw_reset (writer);
    pw_map (writer, 1);
    pw_str (writer, "epoch");
    pw_str (writer, "5");
    assert_true (epoch_of_body (pw_data (writer), pw_size (writer)) == 0);
    pw_reset (writer);
    pw_map (writer, 2);
    pw_str (writer, "epoch");
    pw_int (writer, 5);
    pw_str (writer, "epoch");
    pw_int (writer, 6);
    assert_true (epoch_of_body (pw_data (writer), pw_size (writer)) == 0);
    pw_reset (writer);
    pw_map (writer, 1);
    pw_str (writer, "epoch");
    pw_int (writer, 1 << 20);
    for (size_t cut = 0; cut < pw_size (writer); cut++)
        assert_true (epoch_of_body (pw_data (writer), cut) == 0);
    assert_true (epoch_of_body (pw_data (writer), pw_size (writer))
                 == 1 << 20);
    assert_true (epoch_of_body (NULL, 0) == 0);
    pw_destroy (&writer);
}

int
main (void)
{
    log_set_level (LOG_LEVEL_ERROR);
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_epoch_gate_orders),
        cmocka_unit_test (test_epoch_gate_welcome_hold),
        cmocka_unit_test (test_epoch_gate_file),
        cmocka_unit_test (test_epoch_of_body),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
