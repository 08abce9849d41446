/*  =========================================================================
    test_it_lastseen - a node's last-seen time survives a broker restart,
    end to end: a real gridbroker and a real gridagent over ipc://.

    The broker saves the last-seen time of the nodes it hears from every
    `last_seen_save` (a few at a time) and all of them at a clean stop, so
    that after a restart, SIGKILL included, `node list` shows when a node
    that is not back yet was last heard from, not when it registered.

    Nothing here sleeps hoping something happened: every wait polls with a
    deadline.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <time.h>

#include "../store/store.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

static grid_t s_grid;

//  ---------------------------------------------------------------------
//  Helpers

//  Wall-clock ms of a time as replies give it ("2026-11-21T07:00:51.123Z"),
//  or -1.
static int64_t
s_time_ms (const pv_t *value)
{
    size_t len = 0;
    const char *text = pv_str (value, &len);
    char copy [64];
    if (!text || len >= sizeof copy)
        return -1;
    memcpy (copy, text, len);
    copy [len] = 0;
    struct tm tm;
    memset (&tm, 0, sizeof tm);
    int ms = 0;
    if (sscanf (copy, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
                &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms)
        != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t) timegm (&tm) * 1000 + ms;
}

//  The node's FIELD (a time) from node.get, in wall ms; *STATUS gets its
//  status when STATUS is not NULL.
static int64_t
s_node_time (const char *node, const char *field, char *status,
             size_t status_len)
{
    pv_doc_t *doc = grid_call (&s_grid, "node.get", "node", node, NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    int64_t ms = s_time_ms (pv_map_get (data, field));
    if (status) {
        size_t len = 0;
        const char *text = pv_str (pv_map_get (data, "status"), &len);
        snprintf (status, status_len, "%.*s", text ? (int) len : 0,
                  text ? text : "");
    }
    pv_doc_destroy (&doc);
    return ms;
}

//  The last-seen time the broker's store holds for NODE apart from its
//  record, read beside the running broker; -1 when there is none.
static int64_t
s_stored_seen (const char *node)
{
    char dir [400], err [256];
    snprintf (dir, sizeof dir, "%s/broker-data", s_grid.dir);
    store_t *store = store_open (dir, 0, 0, err, sizeof err);
    if (!store)
        return -1;
    int64_t ms = -1;
    store_txn_t *txn = store_begin (store, false);
    const void *value = NULL;
    size_t size = 0;
    if (txn && store_get (txn, STORE_DB_SEEN, node, strlen (node), &value,
                          &size) == 0
        && size == 8) {
        const uint8_t *byte = (const uint8_t *) value;
        ms = 0;
        for (int index = 0; index < 8; index++)
            ms = (ms << 8) | byte [index];
    }
    store_abort (&txn);
    store_destroy (&store);
    return ms;
}

//  Writes a broker config holding TEXT; its path goes into PATH.
static void
s_config (const char *text, char *path, size_t path_len)
{
    snprintf (path, path_len, "%s/broker.yaml", s_grid.dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
}

static int
s_slot (const char *id)
{
    for (size_t index = s_grid.agent_count; index-- > 0;)
        if (strcmp (s_grid.agent_ids [index], id) == 0
            && s_grid.agent_pids [index] > 0)
            return (int) index;
    return -1;
}

//  Waits until the broker has heard from NODE at least AFTER_MS after it
//  registered; returns that last-seen time.
static int64_t
s_wait_seen_after (const char *node, int64_t after_ms)
{
    int64_t registered = s_node_time (node, "registered_at", NULL, 0);
    assert_true (registered > 0);
    long long deadline = grid_now_ms () + S_WAIT_MS;
    int64_t seen = -1;
    while (grid_now_ms () < deadline) {
        seen = s_node_time (node, "last_seen", NULL, 0);
        if (seen >= registered + after_ms)
            return seen;
        zclock_sleep (50);
    }
    fail_msg ("%s was not heard from %lld ms after it registered", node,
              (long long) after_ms);
    return -1;
}

//  ---------------------------------------------------------------------
//  Fixture

static int
s_setup (void **state)
{
    return grid_init (&s_grid);
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  Tests

//  Killed with SIGKILL, the broker has saved the node's last-seen time
//  within last_seen_save: after the restart, with the agent gone too, the
//  node reads offline, last seen after it registered, as the store says.
static void
test_it_lastseen_survives_sigkill (void **state)
{
    char config [400];
    s_config ("last_seen_save: 300ms\n", config, sizeof config);
    const char *extra [] = {"--config", config, NULL};
    assert_int_equal (grid_start_broker (&s_grid, extra), 0);
    assert_true (grid_start_agent (&s_grid, "web-01", "web", NULL, NULL) >= 0);
    int64_t registered = s_node_time ("web-01", "registered_at", NULL, 0);
    //  The agent beats every 200 ms: its time is saved as it goes
    long long deadline = grid_now_ms () + S_WAIT_MS;
    int64_t stored = -1;
    while (grid_now_ms () < deadline) {
        stored = s_stored_seen ("web-01");
        if (stored >= registered + 1000)
            break;
        zclock_sleep (100);
    }
    assert_true (stored >= registered + 1000);
    grid_stop_broker (&s_grid, true);
    grid_stop_agent (&s_grid, s_slot ("web-01"), true);
    assert_int_equal (grid_start_broker (&s_grid, extra), 0);
    char status [32];
    int64_t seen = s_node_time ("web-01", "last_seen", status, sizeof status);
    assert_string_equal (status, "offline");
    assert_true (seen >= stored);
    assert_int_equal (s_node_time ("web-01", "registered_at", NULL, 0),
                      registered);
    //  gridcli shows it (LAST-SEEN to the second, in its own rendering)
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 10000, "node", "list",
                         "--output", "json", NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "\"web-01\""));
    assert_non_null (strstr (out, "\"offline\""));
    free (out);
    free (err);
}

//  A clean stop saves every node's last-seen time in its last commit,
//  whatever last_seen_save says (2 minutes by default, more than this
//  test takes): a node heard from after its last save reads last seen as
//  of the stop.
static void
test_it_lastseen_clean_stop_saves_all (void **state)
{
    assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
    assert_true (grid_start_agent (&s_grid, "web-02", "web", NULL, NULL) >= 0);
    int64_t seen = s_wait_seen_after ("web-02", 1000);
    //  Nothing saved yet but the record of its registration
    assert_int_equal (s_stored_seen ("web-02"), -1);
    grid_stop_broker (&s_grid, false);
    grid_stop_agent (&s_grid, s_slot ("web-02"), true);
    assert_true (s_stored_seen ("web-02") >= seen);
    assert_int_equal (grid_start_broker (&s_grid, NULL), 0);
    char status [32];
    int64_t restored = s_node_time ("web-02", "last_seen", status,
                                    sizeof status);
    assert_string_equal (status, "offline");
    assert_true (restored >= seen);
    char *log = NULL;
    {
        char path [400];
        snprintf (path, sizeof path, "%s/broker.log", s_grid.dir);
        log = grid_slurp (path);
    }
    assert_true (grid_line_with (log, "saved the last-seen time of 1 node",
                                 NULL));
    free (log);
}

//  A bad last_seen_save is refused at start, naming it.
static void
test_it_lastseen_setting_is_checked (void **state)
{
    char config [400];
    s_config ("last_seen_save: 0s\n", config, sizeof config);
    char *out = NULL, *err = NULL;
    char data_dir [400];
    snprintf (data_dir, sizeof data_dir, "%s/other-data", s_grid.dir);
    int code = grid_run (&s_grid, "gridbroker", &out, &err, 10000, "--config",
                         config, "--data-dir", data_dir, "--insecure",
                         "--print-config", NULL);
    assert_int_not_equal (code, 0);
    assert_non_null (strstr (err, "last_seen_save"));
    free (out);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_lastseen_survives_sigkill,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_lastseen_clean_stop_saves_all,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_lastseen_setting_is_checked,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
