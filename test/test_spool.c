/*  =========================================================================
    test_spool - what the agent's spool keeps of a result

    The previous release reads the spool too (a downgrade): a result is
    kept at the oldest protocol, without traceparent and with its data as
    text, whatever the broker granted the agent that ran it.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (
            test_spool_keeps_what_the_previous_release_reads, s_setup,
            s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
