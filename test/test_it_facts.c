/*  =========================================================================
    test_it_facts - targets by fact, end to end: a real gridbroker and
    real gridagents over ipc://, each with operator facts from its config
    (facts: and facts_dir)

    The agents report their facts after the welcome; node info shows
    them, node list --where filters by them, a job targeted by fact runs
    only where they hold, --check shows the resolution, a SIGHUP sends a
    changed fact, and the broker keeps them across a restart. One broker
    serves every case, in order.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>

#include "lib/harness.h"

#define S_WAIT_MS 30000         //  Deadline for anything that should happen
#define S_CLI_MS 20000

static grid_t s_grid;

//  Writes TEXT to the file PATH.
static void
s_write (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
}

//  Starts agent ID (group GROUP) whose config says facts rack: RACK and
//  whose facts_dir holds owner: OWNER.
static int
s_agent (const char *id, const char *group, const char *rack,
         const char *owner)
{
    char dir [512], path [600], config [600], yaml [1400];
    snprintf (dir, sizeof dir, "%s/facts-%s", s_grid.dir, id);
    assert_int_equal (zsys_dir_create ("%s", dir), 0);
    snprintf (path, sizeof path, "%s/owner", dir);
    s_write (path, owner);
    snprintf (config, sizeof config, "%s/%s.yaml", s_grid.dir, id);
    snprintf (yaml, sizeof yaml,
              "facts:\n  rack: %s\n  tier: \"3\"\nfacts_dir: %s\n", rack, dir);
    s_write (config, yaml);
    const char *extra [] = {"--config", config, NULL};
    return grid_start_agent (&s_grid, id, group, NULL, extra);
}

//  Polls node.get until fact NAME of NODE reads VALUE.
static bool
s_wait_fact (const char *node, const char *name, const char *value)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (&s_grid, "node.get", "node", node, NULL);
        const pv_t *data = NULL;
        bool same = grid_reply_ok (doc, &data)
                    && grid_str_is (pv_map_get (data, "facts"), name, value);
        pv_doc_destroy (&doc);
        if (same)
            return true;
        zclock_sleep (50);
    }
    return false;
}

static void
s_assert_has (const char *text, const char *part)
{
    if (!strstr (text, part))
        fail_msg ("'%s' is not in:\n%s", part, text);
}

static int
s_setup (void **state)
{
    assert_int_equal (grid_init (&s_grid), 0);
    assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
    assert_true (s_agent ("f-01", "web", "r1", "team-a\n") >= 0);
    assert_true (s_agent ("f-02", "web", "r2", "team-b\n") >= 0);
    assert_true (s_agent ("f-03", "db", "r1", "team-b\n") >= 0);
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  Built-in and operator facts reach the broker; node info shows them
static void
test_facts_reported (void **state)
{
    assert_true (s_wait_fact ("f-01", "rack", "r1"));
    assert_true (s_wait_fact ("f-02", "owner", "team-b"));
    assert_true (s_wait_fact ("f-03", "tier", "3"));
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "node", "info", "f-01",
                       NULL);
    assert_int_equal (rc, 0);
    s_assert_has (out, "rack=r1");
    s_assert_has (out, "owner=team-a");
    s_assert_has (out, "agent_version=");
    s_assert_has (out, "mem_mb=");
    free (out);
    free (err);
}

//  node list --where filters; a bad target is named before anything is sent
static void
test_facts_node_list_where (void **state)
{
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "node", "list",
                       "--where", "fact:rack=r1", NULL);
    assert_int_equal (rc, 0);
    s_assert_has (out, "f-01");
    s_assert_has (out, "f-03");
    assert_null (strstr (out, "f-02"));
    free (out);
    free (err);
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "node", "list", "--where",
                   "group:web and fact:owner=team-b", NULL);
    assert_int_equal (rc, 0);
    s_assert_has (out, "f-02");
    assert_null (strstr (out, "f-01"));
    assert_null (strstr (out, "f-03"));
    free (out);
    free (err);
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "node", "list", "--where",
                   "fact:rack==r1", NULL);
    assert_int_equal (rc, 2);
    s_assert_has (err, "unknown fact operator '=='");
    free (out);
    free (err);
    //  The wire refuses it too, as a bad request
    pv_doc_t *doc = grid_call (&s_grid, "node.list", "where", "fact:=x",
                               NULL);
    char *code = grid_reply_code (doc);
    assert_non_null (code);
    assert_string_equal (code, "bad_request");
    free (code);
    pv_doc_destroy (&doc);
}

//  --check shows what a fact target resolves to; the job runs only there
static void
test_facts_job_by_fact (void **state)
{
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "job", "run", "--check",
                       "--target", "fact:rack=r1 and fact:owner=team-b",
                       "test", "echo", "--msg", "hi", NULL);
    if (rc != 0)
        fprintf (stderr, "out: %s\nerr: %s\n", out, err);
    assert_int_equal (rc, 0);
    s_assert_has (out, "1 node: f-03");
    s_assert_has (out, "nothing was run");
    free (out);
    free (err);
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "job", "run", "--target",
                   "fact:rack=r1", "--wait", "test", "echo", "--msg",
                   "by-fact", NULL);
    if (rc != 0)
        fprintf (stderr, "out: %s\nerr: %s\n", out, err);
    assert_int_equal (rc, 0);
    assert_true (grid_line_with (out, "f-01", "success", "by-fact", NULL));
    assert_true (grid_line_with (out, "f-03", "success", "by-fact", NULL));
    assert_null (strstr (out, "f-02"));
    free (out);
    free (err);
    //  A number compares as a number; nothing matches: the job is refused
    rc = grid_cli (&s_grid, &out, &err, S_CLI_MS, "job", "run", "--check",
                   "--target", "fact:tier>=10", "test", "echo", "--msg",
                   "none", NULL);
    assert_int_not_equal (rc, 0);
    free (out);
    free (err);
}

//  A SIGHUP reads the facts again and sends the change
static void
test_facts_sighup (void **state)
{
    char path [600];
    snprintf (path, sizeof path, "%s/facts-f-02/owner", s_grid.dir);
    s_write (path, "team-c\n");
    int slot = -1;
    for (size_t index = 0; index < s_grid.agent_count; index++)
        if (strcmp (s_grid.agent_ids [index], "f-02") == 0)
            slot = (int) index;
    assert_true (slot >= 0);
    assert_int_equal (kill (s_grid.agent_pids [slot], SIGHUP), 0);
    assert_true (s_wait_fact ("f-02", "owner", "team-c"));
    pv_doc_t *doc = grid_call (&s_grid, "node.list", "where",
                               "fact:owner=team-c", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_int_equal (pv_size (pv_map_get (data, "nodes")), 1);
    pv_doc_destroy (&doc);
}

//  The broker keeps the facts across a restart: a node that is not back
//  is still selected by them
static void
test_facts_survive_restart (void **state)
{
    for (size_t index = 0; index < s_grid.agent_count; index++)
        if (s_grid.agent_pids [index] > 0)
            grid_stop_agent (&s_grid, (int) index, true);
    grid_stop_broker (&s_grid, false);
    assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
    pv_doc_t *doc = grid_call (&s_grid, "node.list", "where", "fact:rack=r1",
                               NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    const pv_t *nodes = pv_map_get (data, "nodes");
    assert_int_equal (pv_size (nodes), 2);
    assert_true (grid_str_is (pv_array_at (nodes, 0), "id", "f-01"));
    assert_true (grid_str_is (pv_array_at (nodes, 0), "status", "offline"));
    pv_doc_destroy (&doc);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_facts_reported),
        cmocka_unit_test (test_facts_node_list_where),
        cmocka_unit_test (test_facts_job_by_fact),
        cmocka_unit_test (test_facts_sighup),
        cmocka_unit_test (test_facts_survive_restart),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
