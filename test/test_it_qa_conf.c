/*  =========================================================================
    test_it_qa_conf - the real gridbroker read a config file as a new
    operator writes one: a number out of range is named, with its value
    and its bound, instead of one sentence listing every bound there is.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "lib/fixture.h"

//  Runs gridbroker --config (a file holding TEXT) --print-config; returns
//  its exit code and its stderr in *ERR_P (caller frees).
static int
s_broker_with (grid_t *grid, const char *text, char **err_p)
{
    char path [400];
    snprintf (path, sizeof path, "%s/qa-broker.yaml", grid->dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
    char *out = NULL;
    int rc = grid_run (grid, "gridbroker", &out, err_p, 10000, "--config",
                       path, "--print-config", NULL);
    free (out);
    return rc;
}

static void
test_it_qa_conf_range_named (void **state)
{
    grid_t *grid = (grid_t *) *state;
    const struct {
        const char *text;     //  The file
        const char *said;     //  What the error must say
    } cases [] = {
        {"heartbeat: 0s\n", "heartbeat: 0ms is out of range (at least 10ms)"},
        {"missed_heartbeats: 0\n",
         "missed_heartbeats: 0 is out of range (at least 1)"},
        {"max_pending: -1\n", "max_pending: -1 is out of range (at least 0)"},
        {"max_concurrent: 0\n",
         "max_concurrent: 0 is out of range (at least 1)"},
        {"ack_resends: -2\n", "ack_resends: -2 is out of range (at least 0)"},
        {"lease: 10ms\n", "lease: 10ms is out of range (at least 100ms)"},
    };
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        char *err = NULL;
        int rc = s_broker_with (grid, cases [index].text, &err);
        if (rc != 2 || !strstr (err, cases [index].said))
            fail_msg ("for %s: exit %d, said: %s (wanted %s)",
                      cases [index].text, rc, err, cases [index].said);
        free (err);
    }
    //  A good file still loads
    char *err = NULL;
    assert_int_equal (s_broker_with (grid, "heartbeat: 10ms\nlease: 100ms\n",
                                     &err), 0);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_qa_conf_range_named,
                                         fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
