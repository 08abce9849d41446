/*  =========================================================================
    test_it_files - the file backend through the real programs: a broker,
    an agent whose config opens one root (file.roots), and gridcli. put
    creates a file, a second put reports changed false, get answers the
    content and its sha256, stat reports it, absent removes it; hostile
    paths (outside the root, traversal, a symlink out of the root, a
    directory) are refused with a sentence that says why, and nothing
    outside the root is touched. A second agent without roots refuses
    every action. One broker serves every case.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <limits.h>

#include "../proto/sha256.h"
#include "lib/harness.h"

#define S_WAIT_MS 30000         //  Deadline for a job to end

static grid_t s_grid;
static char s_root [512];       //  The agent's only root
static char s_outside [512];    //  Beside it, not a root

//  snprintf that must not truncate
#define S_FMT(buf, size, ...) \
    assert_true (snprintf (buf, size, __VA_ARGS__) < (int) (size))

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0 || grid_start_broker (&s_grid, NULL) != 0)
        return -1;
    snprintf (s_root, sizeof (s_root), "%s/files", s_grid.dir);
    snprintf (s_outside, sizeof (s_outside), "%s/outside", s_grid.dir);
    char config [600];
    snprintf (config, sizeof (config), "%s/files-agent.yaml", s_grid.dir);
    FILE *file = fopen (config, "w");
    if (mkdir (s_root, 0755) || mkdir (s_outside, 0755) || !file)
        return -1;
    fprintf (file, "file:\n  roots: [\"%s\"]\n", s_root);
    fclose (file);
    const char *extra [] = { "--config", config, NULL };
    const char *none [] = { "--config", "none", NULL };
    if (grid_start_agent (&s_grid, "files-01", "files", NULL, extra) < 0
    ||  grid_start_agent (&s_grid, "closed-01", "closed", NULL, none) < 0)
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  Runs "gridcli job run --target node:NODE file ACTION ARGS... --wait
//  --output json" and returns its exit code; *OUT_P and *ERR_P get its
//  output (caller frees).
static int
s_file (const char *node, const char *action, char **out_p, char **err_p,
        const char *a1, const char *v1, const char *a2, const char *v2,
        const char *a3, const char *v3)
{
    char target [80];
    snprintf (target, sizeof (target), "node:%s", node);
    return grid_cli (&s_grid, out_p, err_p, S_WAIT_MS, "job", "run",
                     "--target", target, "file", action,
                     a1 ? a1 : "--wait", a1 ? v1 : NULL,
                     a2 ? a2 : "--wait", a2 ? v2 : NULL,
                     a3 ? a3 : "--wait", a3 ? v3 : NULL, "--wait", NULL);
}

//  The job id gridcli printed ("job       j-..."), as a new string.
static char *
s_job_id (const char *out)
{
    const char *at = out ? strstr (out, "j-") : NULL;
    assert_non_null (at);
    size_t len = strspn (at, "j-0123456789abcdef");
    return strndup (at, len);
}

//  The record of the job gridcli ran (OUT), waited for.
static pv_doc_t *
s_record (const char *out)
{
    char *job = s_job_id (out);
    pv_doc_t *doc = grid_wait_job (&s_grid, job, S_WAIT_MS);
    free (job);
    assert_non_null (doc);
    return doc;
}

static const pv_t *
s_cell (pv_doc_t *doc, const char *node)
{
    const pv_t *cell = grid_cell (pv_map_get (pv_doc_root (doc), "data"), 0,
                                  node);
    assert_non_null (cell);
    return cell;
}

//  Value KEY of the cell's data as text (numbers too), in BUF.
static const char *
s_datum (const pv_t *cell, const char *key, char *buf, size_t buf_len)
{
    const pv_t *value = pv_map_get (pv_map_get (cell, "data"), key);
    int64_t number = 0;
    buf [0] = 0;
    if (pv_get_int (value, &number) == 0)
        snprintf (buf, buf_len, "%lld", (long long) number);
    else {
        char *text = pv_strdup (value);
        snprintf (buf, buf_len, "%s", text ? text : "");
        free (text);
    }
    return buf;
}

//  Runs one action; asserts gridcli's exit code (WANT 0: 0, else a
//  failure, above 0); returns the job record.
static pv_doc_t *
s_expect (int want, const char *node, const char *action, const char *a1,
          const char *v1, const char *a2, const char *v2, const char *a3,
          const char *v3)
{
    char *out = NULL, *err = NULL;
    int code = s_file (node, action, &out, &err, a1, v1, a2, v2, a3, v3);
    bool as_wanted = want == 0 ? code == 0 : code > 0;
    if (!as_wanted)
        fprintf (stderr, "file %s: exit %d (expected %s)\nout:\n%s\n"
                 "err:\n%s\n", action, code, want ? "a failure" : "0",
                 out, err);
    assert_true (as_wanted);
    pv_doc_t *doc = s_record (out);
    free (out);
    free (err);
    return doc;
}

static void
test_it_files_put_get_stat_absent (void **state)
{
    char path [PATH_MAX], buf [128], hex [SHA256_HEX];
    const char *content = "port: 80\n";
    sha256_hex (content, strlen (content), hex);
    S_FMT (path, sizeof (path), "%s/etc/app.conf", s_root);

    pv_doc_t *doc = s_expect (0, "files-01", "put", "--path", path,
                              "--content", content, "--makedirs", "true");
    const pv_t *cell = s_cell (doc, "files-01");
    assert_true (grid_str_is (cell, "status", "success"));
    assert_string_equal (s_datum (cell, "changed", buf, sizeof buf), "true");
    assert_string_equal (s_datum (cell, "sha256", buf, sizeof buf), hex);
    pv_doc_destroy (&doc);
    char *text = grid_slurp (path);
    assert_string_equal (text, content);
    free (text);

    //  Again: nothing to do
    doc = s_expect (0, "files-01", "put", "--path", path, "--content",
                    content, NULL, NULL);
    cell = s_cell (doc, "files-01");
    assert_string_equal (s_datum (cell, "changed", buf, sizeof buf), "false");
    pv_doc_destroy (&doc);

    //  New content with a mode and a backup
    doc = s_expect (0, "files-01", "put", "--path", path, "--content",
                    "port: 8080\n", "--backup", "true");
    cell = s_cell (doc, "files-01");
    assert_string_equal (s_datum (cell, "changed", buf, sizeof buf), "true");
    pv_doc_destroy (&doc);
    char backup [PATH_MAX];
    S_FMT (backup, sizeof (backup), "%s.bak", path);
    text = grid_slurp (backup);
    assert_string_equal (text, content);
    free (text);

    doc = s_expect (0, "files-01", "get", "--path", backup, NULL, NULL, NULL,
                    NULL);
    cell = s_cell (doc, "files-01");
    text = pv_strdup (pv_map_get (cell, "output"));
    assert_string_equal (text, content);
    free (text);
    assert_string_equal (s_datum (cell, "sha256", buf, sizeof buf), hex);
    assert_string_equal (s_datum (cell, "size", buf, sizeof buf), "9");
    pv_doc_destroy (&doc);

    doc = s_expect (0, "files-01", "stat", "--path", path, NULL, NULL, NULL,
                    NULL);
    cell = s_cell (doc, "files-01");
    assert_string_equal (s_datum (cell, "exists", buf, sizeof buf), "true");
    assert_string_equal (s_datum (cell, "type", buf, sizeof buf), "file");
    assert_string_equal (s_datum (cell, "size", buf, sizeof buf), "11");
    assert_string_equal (s_datum (cell, "mode", buf, sizeof buf), "0644");
    pv_doc_destroy (&doc);

    //  From a local file: --src reads it, --dest names the path
    char local [PATH_MAX], dest [PATH_MAX];
    S_FMT (local, sizeof (local), "%s/local.conf", s_grid.dir);
    S_FMT (dest, sizeof (dest), "%s/from-src.conf", s_root);
    FILE *file = fopen (local, "w");
    assert_non_null (file);
    fputs ("from a file\n\n", file);
    fclose (file);
    doc = s_expect (0, "files-01", "put", "--src", local, "--dest", dest,
                    NULL, NULL);
    assert_string_equal (s_datum (s_cell (doc, "files-01"), "changed", buf,
                                  sizeof buf), "true");
    pv_doc_destroy (&doc);
    text = grid_slurp (dest);
    assert_string_equal (text, "from a file\n\n");
    free (text);
    char *out = NULL, *err = NULL;
    S_FMT (local, sizeof (local), "%s/missing.conf", s_grid.dir);
    int code = s_file ("files-01", "put", &out, &err, "--src", local,
                       "--dest", dest, NULL, NULL);
    assert_int_equal (code, 2);
    assert_non_null (strstr (err, "missing.conf"));
    free (out);
    free (err);

    doc = s_expect (0, "files-01", "absent", "--path", path, NULL, NULL,
                    NULL, NULL);
    assert_string_equal (s_datum (s_cell (doc, "files-01"), "changed", buf,
                                  sizeof buf), "true");
    pv_doc_destroy (&doc);
    assert_int_equal (access (path, F_OK), -1);
    doc = s_expect (0, "files-01", "stat", "--path", path, NULL, NULL, NULL,
                    NULL);
    assert_string_equal (s_datum (s_cell (doc, "files-01"), "exists", buf,
                                  sizeof buf), "false");
    pv_doc_destroy (&doc);
}

//  A refused or failed cell: its error holds WANT.
static void
s_assert_refused (pv_doc_t *doc, const char *node, const char *want)
{
    const pv_t *cell = s_cell (doc, node);
    char *error = pv_strdup (pv_map_get (cell, "error"));
    if (!error || !strstr (error, want)) {
        fprintf (stderr, "expected an error with '%s', got: ", want);
        pv_write_json (cell, stderr, 0);
        fprintf (stderr, "\n");
    }
    assert_non_null (error);
    assert_non_null (strstr (error, want));
    assert_false (grid_str_is (cell, "status", "success"));
    free (error);
}

static void
test_it_files_hostile (void **state)
{
    char path [PATH_MAX], secret [PATH_MAX], link [PATH_MAX];
    S_FMT (secret, sizeof (secret), "%s/secret", s_outside);
    FILE *file = fopen (secret, "w");
    assert_non_null (file);
    fputs ("outside\n", file);
    fclose (file);

    //  Outside the root
    pv_doc_t *doc = s_expect (1, "files-01", "put", "--path", secret,
                              "--content", "owned\n", NULL, NULL);
    s_assert_refused (doc, "files-01", "not under a root");
    pv_doc_destroy (&doc);
    //  Traversal: refused by the agent when planned
    S_FMT (path, sizeof (path), "%s/../outside/secret", s_root);
    doc = s_expect (1, "files-01", "put", "--path", path, "--content",
                    "owned\n", NULL, NULL);
    s_assert_refused (doc, "files-01", "canonical");
    pv_doc_destroy (&doc);
    //  A symlink out of the root, at the leaf and on the way
    S_FMT (link, sizeof (link), "%s/link", s_root);
    assert_int_equal (symlink (secret, link), 0);
    doc = s_expect (1, "files-01", "put", "--path", link, "--content",
                    "owned\n", NULL, NULL);
    s_assert_refused (doc, "files-01", "symlink");
    pv_doc_destroy (&doc);
    doc = s_expect (1, "files-01", "get", "--path", link, NULL, NULL, NULL,
                    NULL);
    s_assert_refused (doc, "files-01", "symlink");
    pv_doc_destroy (&doc);
    S_FMT (link, sizeof (link), "%s/dirlink", s_root);
    assert_int_equal (symlink (s_outside, link), 0);
    S_FMT (path, sizeof (path), "%s/secret", link);
    doc = s_expect (1, "files-01", "put", "--path", path, "--content",
                    "owned\n", NULL, NULL);
    s_assert_refused (doc, "files-01", "symlink");
    pv_doc_destroy (&doc);
    doc = s_expect (1, "files-01", "absent", "--path", path, NULL, NULL,
                    NULL, NULL);
    s_assert_refused (doc, "files-01", "symlink");
    pv_doc_destroy (&doc);
    //  A directory
    S_FMT (path, sizeof (path), "%s/adir", s_root);
    assert_int_equal (mkdir (path, 0755), 0);
    doc = s_expect (1, "files-01", "put", "--path", path, "--content",
                    "x\n", NULL, NULL);
    s_assert_refused (doc, "files-01", "is a directory");
    pv_doc_destroy (&doc);
    doc = s_expect (1, "files-01", "absent", "--path", path, NULL, NULL,
                    NULL, NULL);
    s_assert_refused (doc, "files-01", "is a directory");
    pv_doc_destroy (&doc);
    //  Nothing outside changed
    char *text = grid_slurp (secret);
    assert_string_equal (text, "outside\n");
    free (text);

    //  An agent without roots: every action refused, saying why
    S_FMT (path, sizeof (path), "%s/x", s_root);
    doc = s_expect (1, "closed-01", "stat", "--path", path, NULL, NULL, NULL,
                    NULL);
    s_assert_refused (doc, "closed-01", "file.roots");
    pv_doc_destroy (&doc);

    //  Refused by the broker at submit: shell characters in a path
    char *out = NULL, *err = NULL;
    int code = s_file ("files-01", "stat", &out, &err, "--path", "/tmp/$(id)",
                       NULL, NULL, NULL, NULL);
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "invalid_job"));
    free (out);
    free (err);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_files_put_get_stat_absent),
        cmocka_unit_test (test_it_files_hostile),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
