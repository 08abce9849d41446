/*  =========================================================================
    test_spool - what the agent's spool keeps of a result

    The previous release reads the spool too (a downgrade): a result is
    kept at the oldest protocol, without traceparent and with its data as
    text, whatever the broker granted the agent that ran it.

    A result_ack takes effect in memory at once and reaches the disk with
    the next commit (or spool_flush, or the close): what another process
    opening the spool sees tells what an agent killed at that moment
    would find.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agent/spool.h"
#include "../proto/proto.h"

static char s_dir [64];

static int
s_setup (void **state)
{
    (void) state;
    strcpy (s_dir, "/tmp/grid-spool-XXXXXX");
    return mkdtemp (s_dir) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    (void) state;
    char command [128];
    snprintf (command, sizeof command, "rm -rf %s", s_dir);
    return system (command) == 0 ? 0 : -1;
}

static void
test_spool_keeps_what_the_previous_release_reads (void **state)
{
    (void) state;
    char err [256];
    spool_t *spool = spool_open (s_dir, 0, err, sizeof err);
    assert_non_null (spool);

    proto_msg_t *result = proto_msg_new (PROTO_RESULT);
    assert_non_null (result);
    result->node = strdup ("sp-01");
    result->job = strdup ("j-0193a1b2c3d4-0002");
    result->step = 0;
    result->attempt = 1;
    result->status = strdup ("success");
    result->output = strdup ("");
    result->error = strdup ("");
    result->exit_code = 0;
    result->traceparent =
        strdup ("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    result->data = (proto_kv_t *) calloc (2, sizeof (proto_kv_t));
    assert_non_null (result->data);
    result->data [0].key = strdup ("uptime_s");
    result->data [0].value = strdup ("4242");
    result->data [0].number = true;
    result->data [1].key = strdup ("kernel");
    result->data [1].value = strdup ("6.1.0");
    result->data_count = 2;
    int put = spool_put (spool, result, err, sizeof err);
    if (put)
        fprintf (stderr, "%s\n", err);
    assert_int_equal (put, 0);
    //  What the agent holds is untouched
    assert_true (result->data [0].number);
    assert_non_null (result->traceparent);

    void *data = NULL;
    size_t size = 0;
    assert_int_equal (spool_result (spool, "j-0193a1b2c3d4-0002", 0, 1,
                                    &data, &size), 0);
    proto_msg_t *kept = NULL;
    char why [128] = "";
    assert_int_equal (proto_msg_decode (data, size, &kept, why,
                                        sizeof why), 0);
    assert_int_equal (kept->protocol, PROTO_VERSION_MIN);
    assert_null (kept->traceparent);
    assert_int_equal (kept->data_count, 2);
    size_t found = 0;
    for (size_t index = 0; index < kept->data_count; index++) {
        proto_kv_t *fact = &kept->data [index];
        assert_false (fact->number);
        if (strcmp (fact->key, "uptime_s") == 0) {
            assert_string_equal (fact->value, "4242");
            found++;
        }
        else
        if (strcmp (fact->key, "kernel") == 0) {
            assert_string_equal (fact->value, "6.1.0");
            found++;
        }
    }
    assert_int_equal (found, 2);
    proto_msg_destroy (&kept);
    free (data);
    proto_msg_destroy (&result);
    spool_destroy (&spool);
}

//  A message of TYPE for job J, step 0, attempt 1, to put.
static proto_msg_t *
s_msg (proto_type_t type, const char *job)
{
    proto_msg_t *msg = proto_msg_new (type);
    assert_non_null (msg);
    msg->node = strdup ("sp-01");
    msg->job = strdup (job);
    msg->attempt = 1;
    if (type == PROTO_RESULT) {
        msg->status = strdup ("success");
        msg->output = strdup ("hi\n");
        msg->error = strdup ("");
    }
    return msg;
}

static void
s_put (spool_t *spool, proto_type_t type, const char *job)
{
    char err [256];
    proto_msg_t *msg = s_msg (type, job);
    assert_int_equal (spool_put (spool, msg, err, sizeof err), 0);
    proto_msg_destroy (&msg);
}

//  The state of JOB (step 0, attempt 1) on disk: what a process that
//  opens the spool now finds (the agent's own spool stays open).
static spool_state_t
s_state_on_disk (const char *job)
{
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        char err [256];
        spool_t *other = spool_open (s_dir, 0, err, sizeof err);
        int state = other ? (int) spool_state (other, job, 0, 1) : 99;
        spool_destroy (&other);
        _exit (state);
    }
    int status = 0;
    assert_int_equal (waitpid (pid, &status, 0), pid);
    assert_true (WIFEXITED (status));
    assert_int_not_equal (WEXITSTATUS (status), 99);
    return (spool_state_t) WEXITSTATUS (status);
}

//  An acknowledged result is done at once for the agent (never sent
//  again, a replay is recognised), and on disk with the next commit: until
//  then an agent killed finds it waiting and sends it again.
static void
test_spool_ack_rides_with_the_next_commit (void **state)
{
    (void) state;
    char err [256];
    spool_t *spool = spool_open (s_dir, 0, err, sizeof err);
    assert_non_null (spool);
    s_put (spool, PROTO_RESULT, "j-0193a1b2c3d4-0001");
    assert_int_equal (spool_unacked (spool), 1);
    assert_int_equal (spool_unflushed (spool), 0);

    assert_int_equal (spool_ack (spool, "j-0193a1b2c3d4-0001", 0, 1), 0);
    assert_int_equal (spool_state (spool, "j-0193a1b2c3d4-0001", 0, 1),
                      SPOOL_DONE);
    assert_int_equal (spool_unacked (spool), 0);
    assert_int_equal (spool_unflushed (spool), 1);
    void *data = NULL;
    size_t size = 0;
    assert_int_equal (spool_result (spool, "j-0193a1b2c3d4-0001", 0, 1,
                                    &data, &size), -1);
    assert_int_equal (s_state_on_disk ("j-0193a1b2c3d4-0001"),
                      SPOOL_RESULT);
    //  A repeated ack is unknown, and changes nothing
    size_t unknown = 0;
    proto_ack_t again = { .job = "j-0193a1b2c3d4-0001", .attempt = 1 };
    assert_int_equal (spool_ack_many (spool, &again, 1, &unknown), 0);
    assert_int_equal (unknown, 1);
    assert_int_equal (spool_unflushed (spool), 1);

    //  The next record commits it too, in the same transaction
    s_put (spool, PROTO_STARTED, "j-0193a1b2c3d4-0002");
    assert_int_equal (spool_unflushed (spool), 0);
    assert_int_equal (s_state_on_disk ("j-0193a1b2c3d4-0001"), SPOOL_DONE);
    assert_int_equal (s_state_on_disk ("j-0193a1b2c3d4-0002"),
                      SPOOL_STARTED);

    //  spool_flush commits alone; with nothing waiting it does nothing
    s_put (spool, PROTO_RESULT, "j-0193a1b2c3d4-0002");
    assert_int_equal (spool_ack (spool, "j-0193a1b2c3d4-0002", 0, 1), 0);
    assert_int_equal (s_state_on_disk ("j-0193a1b2c3d4-0002"),
                      SPOOL_RESULT);
    assert_int_equal (spool_flush (spool), 0);
    assert_int_equal (spool_unflushed (spool), 0);
    assert_int_equal (spool_flush (spool), 0);
    assert_int_equal (s_state_on_disk ("j-0193a1b2c3d4-0002"), SPOOL_DONE);

    //  Closing commits what waits
    s_put (spool, PROTO_RESULT, "j-0193a1b2c3d4-0003");
    assert_int_equal (spool_ack (spool, "j-0193a1b2c3d4-0003", 0, 1), 0);
    spool_destroy (&spool);
    assert_int_equal (s_state_on_disk ("j-0193a1b2c3d4-0003"), SPOOL_DONE);
}

//  Done records beyond done_keep go, on disk too, oldest first.
static void
test_spool_trims_done_records (void **state)
{
    (void) state;
    char err [256];
    spool_t *spool = spool_open (s_dir, 2, err, sizeof err);
    assert_non_null (spool);
    const char *jobs [] = {
        "j-0193a1b2c3d4-0001", "j-0193a1b2c3d4-0002", "j-0193a1b2c3d4-0003"
    };
    proto_ack_t acks [3];
    for (size_t index = 0; index < 3; index++) {
        s_put (spool, PROTO_RESULT, jobs [index]);
        acks [index] = (proto_ack_t) { .job = jobs [index], .attempt = 1 };
    }
    size_t unknown = 9;
    assert_int_equal (spool_ack_many (spool, acks, 3, &unknown), 0);
    assert_int_equal (unknown, 0);
    assert_int_equal (spool_state (spool, jobs [0], 0, 1), SPOOL_NONE);
    assert_int_equal (spool_state (spool, jobs [1], 0, 1), SPOOL_DONE);
    assert_int_equal (spool_state (spool, jobs [2], 0, 1), SPOOL_DONE);
    assert_int_equal (spool_flush (spool), 0);
    assert_int_equal (s_state_on_disk (jobs [0]), SPOOL_NONE);
    assert_int_equal (s_state_on_disk (jobs [1]), SPOOL_DONE);
    assert_int_equal (s_state_on_disk (jobs [2]), SPOOL_DONE);
    spool_destroy (&spool);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (
            test_spool_keeps_what_the_previous_release_reads, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown (
            test_spool_ack_rides_with_the_next_commit, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_spool_trims_done_records, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
