/*  =========================================================================
    test_it_dryrun - dry runs (job.submit with check, gridcli job run
    --check --diff) through a real gridbroker, real gridagents on the
    recording fakes of test/fakes, the real gridcli, and an agent made by
    hand that names no features (an agent of the release before).

    One broker for every case: real-01 and real-02 (group real) run the
    fakes, each logging its argv to <dir>/fake-<id>.log; old-01 is made by
    hand and offers test echo only. The cases: would change / no change
    with diffs (test mark), nothing ran (the mark's file never written,
    no apt-get, no systemctl start in the fakes' logs), cannot tell (an
    action without a check; an agent without the feature, which is never
    sent the command), --check alone unchanged, hostile requests.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>

#include "../proto/conf.h"
#include "../proto/proto.h"
#include "lib/fixture.h"

#define S_WAIT_MS 30000         //  Deadline for anything that should happen
#define S_CLI_MS 60000          //  Deadline for one gridcli run

static zsock_t *s_old;          //  old-01's DEALER (the fixture's)

static const char *
s_src (void)
{
    const char *src = getenv ("GRID_SRC");
    return src && *src ? src : ".";
}

//  Starts agent ID on the fakes with its own fake log
static int
s_start_agent (grid_t *grid, const char *id)
{
    char log [400], tool_dir [600];
    snprintf (log, sizeof log, "%s/fake-%s.log", grid->dir, id);
    snprintf (tool_dir, sizeof tool_dir, "%s/test/fakes", s_src ());
    //  Its own resolv.conf for network, and a config opening one root
    //  for file (<dir>/root-<id>)
    char resolv [400], config [400], root [400];
    snprintf (resolv, sizeof resolv, "%s/resolv-%s.conf", grid->dir, id);
    snprintf (config, sizeof config, "%s/agent-%s.yaml", grid->dir, id);
    snprintf (root, sizeof root, "%s/root-%s", grid->dir, id);
    if (mkdir (root, 0755) != 0 && errno != EEXIST)
        return -1;
    FILE *file = fopen (resolv, "w");
    if (!file)
        return -1;
    fputs ("nameserver 192.0.2.53\n", file);
    fclose (file);
    file = fopen (config, "w");
    if (!file)
        return -1;
    fprintf (file, "file:\n  roots: [%s]\n", root);
    fclose (file);
    const char *extra [] = {"--tool-dir", tool_dir, "--resolv-conf", resolv,
                            "--config", config, NULL};
    setenv ("GRID_FAKE_LOG", log, 1);
    int slot = grid_start_agent (grid, id, "real", NULL, extra);
    unsetenv ("GRID_FAKE_LOG");
    return slot;
}

static char *
s_fake_log (grid_t *grid, const char *id)
{
    char path [400];
    snprintf (path, sizeof path, "%s/fake-%s.log", grid->dir, id);
    return grid_slurp (path);
}

//  The file of test mark NAME on agent ID ("" when absent; caller frees)
static char *
s_mark (grid_t *grid, const char *id, const char *name)
{
    char path [600];
    snprintf (path, sizeof path, "%s/agent-%s/test/%s", grid->dir, id, name);
    return grid_slurp (path);
}

static bool
s_mark_exists (grid_t *grid, const char *id, const char *name)
{
    char path [600];
    snprintf (path, sizeof path, "%s/agent-%s/test/%s", grid->dir, id, name);
    return access (path, F_OK) == 0;
}

//  job.submit of the YAML job with check: CHECK (a msgpack bool when
//  CHECK_TEXT is NULL, else that string); the reply
static pv_doc_t *
s_submit (grid_t *grid, const char *yaml, bool check, const char *type,
          const char *check_text)
{
    pv_doc_t *job = NULL;
    char err [256];
    assert_int_equal (conf_parse (yaml, strlen (yaml), &job, err,
                                  sizeof err), 0);
    char id [64];
    snprintf (id, sizeof id, "it-dryrun-%d-%d", (int) getpid (),
              ++grid->request_seq);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, type, id, 2);
    pw_str (writer, "job");
    pw_pv (writer, pv_doc_root (job));
    pw_str (writer, "check");
    if (check_text)
        pw_str (writer, check_text);
    else
        pw_bool (writer, check);
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     GRID_CALL_MS);
    pw_destroy (&writer);
    pv_doc_destroy (&job);
    return reply;
}

//  Submits the YAML job as a dry run and waits for its end: the record
static pv_doc_t *
s_dry_run (grid_t *grid, const char *yaml)
{
    fixture_beat (true);
    pv_doc_t *reply = s_submit (grid, yaml, true, "job.submit", NULL);
    char *job = pv_strdup (pv_map_get (fixture_data (reply), "job"));
    pv_doc_destroy (&reply);
    assert_non_null (job);
    pv_doc_t *record = grid_wait_job (grid, job, S_WAIT_MS);
    assert_non_null (record);
    free (job);
    return record;
}

static const pv_t *
s_record (pv_doc_t *doc)
{
    return fixture_data (doc);
}

//  The data value KEY of STEP on NODE in RECORD, fresh ("" when none)
static char *
s_cell_data (const pv_t *record, int step, const char *node, const char *key)
{
    const pv_t *cell = grid_cell (record, step, node);
    char *text = pv_strdup (pv_map_get (pv_map_get (cell, "data"), key));
    return text ? text : strdup ("");
}

static void
s_assert_cell_data (const pv_t *record, int step, const char *node,
                    const char *key, const char *expected)
{
    char *got = s_cell_data (record, step, node, key);
    if (strcmp (got, expected) != 0)
        fail_msg ("step %d on %s: data %s is '%s', expected '%s'", step, node,
                  key, got, expected);
    free (got);
}

static int
s_group_setup (void **state)
{
    if (fixture_setup (state))
        return -1;
    grid_t *grid = (grid_t *) *state;
    //  old-01 beats only while the test waits on the fixture: a node
    //  goes offline after a minute of silence here, not a second
    const char *extra [] = {"--heartbeat", "1s", "--missed-heartbeats",
                            "60", NULL};
    if (grid_start_broker (grid, extra) != 0
        || s_start_agent (grid, "real-01") < 0
        || s_start_agent (grid, "real-02") < 0) {
        grid_dump_logs (grid);
        fixture_teardown (state);
        return -1;
    }
    //  An agent of the release before dry runs: no features at all
    s_old = fixture_agent (grid, "old-01", 0, NULL, NULL);
    return 0;
}

//  ---------------------------------------------------------------------
//  Cases

//  test mark as a dry run: would change with its diff on the agent that
//  runs checks, cannot tell on the one that does not (never sent the
//  command); nothing written. Then, done for real, no change; with
//  other text, would change again (gridcli --check --diff).
static void
test_it_dryrun_mark (void **state)
{
    grid_t *grid = (grid_t *) *state;
    pv_doc_t *doc = s_dry_run (grid,
        "target: node:real-01,old-01\n"
        "tasks:\n"
        "  - {backend: test, action: mark, params: {name: m1, text: one}}\n");
    const pv_t *record = s_record (doc);
    bool check = false;
    assert_int_equal (pv_get_bool (pv_map_get (record, "check"), &check), 0);
    assert_true (check);
    const pv_t *cell = grid_cell (record, 0, "real-01");
    assert_true (grid_str_is (cell, "status", "success"));
    s_assert_cell_data (record, 0, "real-01", "would_change", "true");
    s_assert_cell_data (record, 0, "real-01", "current", "m1 absent");
    char *diff = s_cell_data (record, 0, "real-01", "diff");
    assert_non_null (strstr (diff, "+one\n"));
    free (diff);
    //  The old agent: set apart, never dispatched
    cell = grid_cell (record, 0, "old-01");
    assert_true (grid_str_is (cell, "status", "unsupported"));
    char *reason = pv_strdup (pv_map_get (cell, "reason"));
    assert_non_null (reason);
    assert_non_null (strstr (reason, "runs no checks"));
    free (reason);
    int64_t attempts = -1;
    pv_get_int (pv_map_get (cell, "attempts"), &attempts);
    assert_int_equal (attempts, 0);
    proto_msg_t *command = fixture_recv_type (s_old, PROTO_COMMAND, 500);
    assert_null (command);
    pv_doc_destroy (&doc);
    assert_false (s_mark_exists (grid, "real-01", "m1"));

    //  The gridcli form, with the diff; the old agent cannot tell (exit 1)
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--check",
                         "--diff", "--target", "node:real-01,old-01", "test",
                         "mark", "--name", "m1", "--text", "one", NULL);
    if (code != 1)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 1);
    assert_true (grid_line_with (out, "real-01", "test mark", "would change",
                                 "m1 absent -> m1 holds \"one\"", NULL));
    assert_true (grid_line_with (out, "old-01", "cannot tell",
                                 "runs no checks", NULL));
    assert_true (grid_line_with (out, "+one", NULL));
    assert_true (grid_line_with (out, "1 would change, 0 no change, 1 "
                                      "cannot tell", NULL));
    assert_false (s_mark_exists (grid, "real-01", "m1"));
    free (out);
    free (err);

    //  Done for real: the file is written
    code = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--wait",
                     "--target", "node:real-01", "test", "mark", "--name",
                     "m1", "--text", "one", NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    char *text = s_mark (grid, "real-01", "m1");
    assert_string_equal (text, "one\n");
    free (text);

    code = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--check",
                     "--diff", "--target", "node:real-01", "test", "mark",
                     "--name", "m1", "--text", "one", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "real-01", "no change",
                                 "m1 holds \"one\"", NULL));
    assert_true (grid_line_with (out, "0 would change, 1 no change, 0 "
                                      "cannot tell", NULL));
    free (out);
    free (err);

    code = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--check",
                     "--diff", "--target", "node:real-01", "test", "mark",
                     "--name", "m1", "--text", "two", NULL);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "real-01", "would change", NULL));
    assert_true (grid_line_with (out, "-one", NULL));
    assert_true (grid_line_with (out, "+two", NULL));
    free (out);
    free (err);
    text = s_mark (grid, "real-01", "m1");
    assert_string_equal (text, "one\n");
    free (text);
}

//  apt and systemd through the fakes: the checks ask dpkg-query and
//  systemctl is-active / is-enabled; apt update has no check (cannot
//  tell); a query runs as itself (no change); nothing else runs
static void
test_it_dryrun_system (void **state)
{
    grid_t *grid = (grid_t *) *state;
    pv_doc_t *doc = s_dry_run (grid,
        "target: node:real-02\n"
        "tasks:\n"
        "  - {backend: apt, action: update}\n"
        "  - {backend: apt, action: install, params: {package: absent-tool}}\n"
        "  - {backend: apt, action: install, params: {package: nginx}}\n"
        "  - {backend: systemd, action: start, params: {unit: stopped.service}}\n"
        "  - {backend: systemd, action: enable, params: {unit: nginx}}\n"
        "  - {backend: system, action: hostname}\n");
    const pv_t *record = s_record (doc);
    assert_true (grid_str_is (record, "status", "completed"));
    s_assert_cell_data (record, 0, "real-02", "would_change", "unknown");
    s_assert_cell_data (record, 1, "real-02", "would_change", "true");
    s_assert_cell_data (record, 1, "real-02", "current",
                        "absent-tool not installed");
    s_assert_cell_data (record, 2, "real-02", "would_change", "false");
    s_assert_cell_data (record, 2, "real-02", "version", "1.2.3-1");
    s_assert_cell_data (record, 3, "real-02", "would_change", "true");
    s_assert_cell_data (record, 3, "real-02", "current",
                        "stopped.service inactive");
    s_assert_cell_data (record, 4, "real-02", "would_change", "false");
    s_assert_cell_data (record, 5, "real-02", "would_change", "false");
    const pv_t *cell = grid_cell (record, 1, "real-02");
    char *output = pv_strdup (pv_map_get (cell, "output"));
    assert_non_null (strstr (output, "would change: absent-tool not "
                                     "installed -> absent-tool installed"));
    free (output);
    pv_doc_destroy (&doc);

    char *log = s_fake_log (grid, "real-02");
    assert_non_null (strstr (log, "dpkg-query\n-W\n"));
    assert_non_null (strstr (log, "systemctl\nis-active\n--\n"
                                  "stopped.service\n"));
    assert_non_null (strstr (log, "systemctl\nis-enabled\n--\nnginx\n"));
    assert_null (strstr (log, "apt-get"));
    assert_null (strstr (log, "\nstart\n"));
    assert_null (strstr (log, "\nenable\n"));
    free (log);

    //  The JSON form: verdicts as true, false and null
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json",
                         "job", "run", "--check", "--diff", "--target",
                         "group:real", "apt", "update", NULL);
    assert_int_equal (code, 1);
    assert_non_null (strstr (out, "\"verdict\": \"cannot_tell\""));
    assert_non_null (strstr (out, "\"would_change\": null"));
    assert_non_null (strstr (out, "\"cannot_tell\": 2"));
    free (out);
    free (err);
    code = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json", "job",
                     "run", "--check", "--diff", "--target", "node:real-01",
                     "systemd", "stop", "--unit", "nginx", NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "\"verdict\": \"would_change\""));
    assert_non_null (strstr (out, "\"would_change\": true"));
    assert_non_null (strstr (out, "\"current\": \"nginx active\""));
    free (out);
    free (err);
    log = s_fake_log (grid, "real-01");
    assert_null (strstr (log, "\nstop\n"));
    free (log);
}

//  A fleet-wide dry run: a member that runs no checks is listed as
//  cannot tell; a dry run no node can answer is refused; --check alone
//  keeps its placement answer; hostile requests get clear errors
static void
test_it_dryrun_compat (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_beat (true);
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--check",
                         "--diff", "--target", "all", "test", "echo",
                         "--msg", "hi", NULL);
    if (code != 1 || !strstr (out, "runs no checks"))
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 1);
    assert_true (grid_line_with (out, "real-01", "no change", NULL));
    assert_true (grid_line_with (out, "real-02", "no change", NULL));
    assert_true (grid_line_with (out, "old-01", "cannot tell",
                                 "runs no checks", NULL));
    free (out);
    free (err);

    //  Only the old agent: nothing could answer, refused at submit
    fixture_beat (true);
    pv_doc_t *reply = s_submit (grid,
        "target: node:old-01\n"
        "tasks:\n"
        "  - {backend: test, action: echo, params: {msg: hi}}\n",
        true, "job.submit", NULL);
    char *code_text = grid_reply_code (reply);
    assert_string_equal (code_text, "no_nodes");
    free (code_text);
    pv_doc_destroy (&reply);

    //  --check alone: where it would run, nothing submitted
    code = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--check",
                     "--target", "node:real-01", "test", "mark", "--name",
                     "m2", NULL);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "runs on", "real-01", NULL));
    assert_null (strstr (out, "would change"));
    free (out);
    free (err);
    assert_false (s_mark_exists (grid, "real-01", "m2"));
    code = grid_cli (grid, &out, &err, S_CLI_MS, "job", "run", "--diff",
                     "--target", "node:real-01", "test", "mark", "--name",
                     "m2", NULL);
    assert_int_equal (code, 2);
    assert_non_null (strstr (err, "--diff goes with --check"));
    free (out);
    free (err);

    //  Hostile: check not a bool; check on job.check
    const char *yaml = "target: node:real-01\n"
                       "tasks:\n"
                       "  - {backend: test, action: mark, params: {name: m3}}\n";
    reply = s_submit (grid, yaml, true, "job.submit", "yes");
    code_text = grid_reply_code (reply);
    assert_string_equal (code_text, "bad_request");
    free (code_text);
    pv_doc_destroy (&reply);
    reply = s_submit (grid, yaml, true, "job.check", NULL);
    code_text = grid_reply_code (reply);
    assert_string_equal (code_text, "bad_request");
    free (code_text);
    pv_doc_destroy (&reply);
    //  One idempotency key for a dry run and a run of one spec: conflict
    const char *keyed = "target: node:real-02\n"
                        "idempotency_key: dry-key-1\n"
                        "tasks:\n"
                        "  - {backend: test, action: echo, params: {msg: k}}\n";
    reply = s_submit (grid, keyed, true, "job.submit", NULL);
    fixture_data (reply);
    pv_doc_destroy (&reply);
    reply = s_submit (grid, keyed, false, "job.submit", NULL);
    code_text = grid_reply_code (reply);
    assert_string_equal (code_text, "conflict");
    free (code_text);
    pv_doc_destroy (&reply);
    //  check: false is an ordinary job (it writes the mark)
    reply = s_submit (grid, yaml, false, "job.submit", NULL);
    char *job = pv_strdup (pv_map_get (fixture_data (reply), "job"));
    pv_doc_destroy (&reply);
    pv_doc_t *record = grid_wait_job (grid, job, S_WAIT_MS);
    assert_non_null (record);
    assert_null (pv_map_get (fixture_data (record), "check"));
    pv_doc_destroy (&record);
    free (job);
    assert_true (s_mark_exists (grid, "real-01", "m3"));
}

//  network dns_update and file put as dry runs through gridcli --output
//  json: the current value, a diff, would change / no change / cannot
//  tell; the agent's resolv.conf and the file are left as they were
static void
test_it_dryrun_dns_and_file_json (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_beat (true);
    char resolv [400];
    snprintf (resolv, sizeof resolv, "%s/resolv-real-01.conf", grid->dir);
    char *out = NULL, *err = NULL;
    int code = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json",
                         "job", "run", "--check", "--diff", "--target",
                         "node:real-01", "network", "dns_update",
                         "--servers", "10.0.0.9", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "\"verdict\": \"would_change\""));
    assert_non_null (strstr (out, "\"would_change\": true"));
    assert_non_null (strstr (out, "nameservers 192.0.2.53"));
    assert_non_null (strstr (out, "+nameserver 10.0.0.9"));
    free (out);
    free (err);
    code = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json", "job",
                     "run", "--check", "--diff", "--target", "node:real-01",
                     "network", "dns_update", "--servers", "192.0.2.53",
                     NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "\"verdict\": \"no_change\""));
    free (out);
    free (err);
    char *text = grid_slurp (resolv);
    assert_string_equal (text, "nameserver 192.0.2.53\n");
    free (text);

    //  file put: content and mode differ, with the text's diff
    char path [500];
    snprintf (path, sizeof path, "%s/root-real-01/app.conf", grid->dir);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs ("port 80\n", file);
    fclose (file);
    assert_int_equal (chmod (path, 0644), 0);
    code = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json", "job",
                     "run", "--check", "--diff", "--target", "node:real-01",
                     "file", "put", "--path", path, "--content", "port 8080\n",
                     "--mode", "0600", NULL);
    if (code != 0)
        fprintf (stderr, "%s%s", out, err);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "\"verdict\": \"would_change\""));
    assert_non_null (strstr (out, "content, mode"));
    assert_non_null (strstr (out, "-port 80\\n+port 8080"));
    free (out);
    free (err);
    text = grid_slurp (path);
    assert_string_equal (text, "port 80\n");
    free (text);
    struct stat info;
    assert_int_equal (stat (path, &info), 0);
    assert_int_equal (info.st_mode & 07777, 0644);
    //  The same content and mode: no change
    code = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json", "job",
                     "run", "--check", "--diff", "--target", "node:real-01",
                     "file", "put", "--path", path, "--content", "port 80\n",
                     "--mode", "0644", NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "\"verdict\": \"no_change\""));
    assert_non_null (strstr (out, "\"would_change\": false"));
    free (out);
    free (err);
    //  Out of the root: cannot tell, saying why; nothing written
    char outside [500];
    snprintf (outside, sizeof outside, "%s/outside.conf", grid->dir);
    code = grid_cli (grid, &out, &err, S_CLI_MS, "--output", "json", "job",
                     "run", "--check", "--diff", "--target", "node:real-01",
                     "file", "put", "--path", outside, "--content", "x",
                     NULL);
    assert_int_equal (code, 1);
    assert_non_null (strstr (out, "\"verdict\": \"cannot_tell\""));
    assert_non_null (strstr (out, "\"would_change\": null"));
    free (out);
    free (err);
    assert_int_not_equal (access (outside, F_OK), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_dryrun_mark),
        cmocka_unit_test (test_it_dryrun_system),
        cmocka_unit_test (test_it_dryrun_compat),
        cmocka_unit_test (test_it_dryrun_dns_and_file_json),
    };
    return cmocka_run_group_tests (tests, s_group_setup, fixture_teardown);
}
