/*  =========================================================================
    test_it_files - the file backend through the real programs: a broker,
    an agent whose config opens one root (file.roots), and gridcli. put
    creates a file, a second put reports changed false, get answers the
    content and its sha256, stat reports it, absent removes it; hostile
    paths (outside the root, traversal, a symlink out of the root, a
    directory) are refused with a sentence that says why, and nothing
    outside the root is touched. A second agent without roots refuses
    every action. One broker serves every case.

    Blobs: a blob goes to two agents in three chunks each, once (cached
    after); a fetch of a large blob (48 chunks) is cut by a SIGKILL of
    the agent while chunks flow, then of the broker: each time the
    restarted program goes on from the chunks the agent holds (the
    broker's count of chunks sent for that blob shows none was sent
    twice), the job completes and the file's sha256 is right. Hostile
    inputs: an upload over blobs.max_size, pieces out of order, again,
    of the wrong length, a content whose sha256 is not its name, a
    blob_get for an unknown blob or a bad offset, and a broker that
    answers a chunk of the wrong size: each refused with why, counted,
    nothing corrupt kept.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../proto/base64.h"
#include "../proto/proto.h"
#include "../proto/sha256.h"
#include "lib/fixture.h"
#include "lib/harness.h"

#define S_WAIT_MS 30000         //  Deadline for a job to end

static grid_t s_grid;
static char s_root [512];       //  The agent's only root
static char s_outside [512];    //  Beside it, not a root
static char s_broker_config [600];  //  The broker's config file

//  snprintf that must not truncate
#define S_FMT(buf, size, ...) \
    assert_true (snprintf (buf, size, __VA_ARGS__) < (int) (size))

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    //  Blobs of 16 MiB at most: the limit is tested
    snprintf (s_broker_config, sizeof (s_broker_config), "%s/broker.yaml",
              s_grid.dir);
    FILE *broker_file = fopen (s_broker_config, "w");
    if (!broker_file)
        return -1;
    fprintf (broker_file, "blobs:\n  max_size: 16MiB\n");
    fclose (broker_file);
    const char *broker_extra [] = { "--config", s_broker_config, NULL };
    if (grid_start_broker (&s_grid, broker_extra) != 0)
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
    ||  grid_start_agent (&s_grid, "files-02", "files", NULL, extra) < 0
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

//  ---------------------------------------------------------------------
//  Blobs

#define S_BLOB_SIZE (600 * 1024)    //  Three chunks: 256 + 256 + 88 KiB

//  Writes LEN bytes of a pattern (SEED) to PATH; their digest into HEX.
static void
s_write_blob (const char *path, size_t len, unsigned seed, char *hex)
{
    unsigned char *data = malloc (len);
    assert_non_null (data);
    for (size_t index = 0; index < len; index++)
        data [index] = (unsigned char) ((index * 131 + seed) >> 3);
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    assert_int_equal (fwrite (data, 1, len, file), len);
    fclose (file);
    sha256_hex (data, len, hex);
    free (data);
}

//  blob.list's figure KEY (chunks_sent, refused), and how many blobs
static int64_t
s_blob_figure (const char *key, size_t *count_p)
{
    pv_doc_t *reply = grid_call (&s_grid, "blob.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t value = -1;
    pv_get_int (pv_map_get (data, key), &value);
    if (count_p)
        *count_p = pv_size (pv_map_get (data, "blobs"));
    pv_doc_destroy (&reply);
    return value;
}

//  file put --src LOCAL --dest DEST on TARGET, waited for; exit code
static int
s_put_src (const char *target, const char *local, const char *dest,
           char **out_p, char **err_p)
{
    return grid_cli (&s_grid, out_p, err_p, S_WAIT_MS, "job", "run",
                     "--target", target, "file", "put", "--src", local,
                     "--dest", dest, "--wait", NULL);
}

static void
test_it_files_blobs (void **state)
{
    char local [PATH_MAX], dest [PATH_MAX], hex [SHA256_HEX],
         got [SHA256_HEX];
    S_FMT (local, sizeof (local), "%s/big.bin", s_grid.dir);
    s_write_blob (local, S_BLOB_SIZE, 7, hex);

    //  Uploaded once; the second upload stores nothing
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_WAIT_MS, "file",
                                "upload", local, NULL), 0);
    assert_non_null (strstr (out, hex));
    free (out);
    free (err);
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_WAIT_MS, "file",
                                "upload", local, NULL), 0);
    assert_non_null (strstr (out, "had it already"));
    free (out);
    free (err);
    size_t blobs = 0;
    int64_t sent = s_blob_figure ("chunks_sent", &blobs);
    assert_int_equal (blobs, 1);
    assert_int_equal (sent, 0);

    //  To two agents: each fetches the three chunks once
    S_FMT (dest, sizeof (dest), "%s/big.bin", s_root);
    int code = s_put_src ("group:files", local, dest, &out, &err);
    if (code != 0)
        fprintf (stderr, "out:\n%s\nerr:\n%s\n", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_true (grid_file_sha256 (dest, got));
    assert_string_equal (got, hex);
    assert_int_equal (s_blob_figure ("chunks_sent", NULL), sent + 6);

    //  Cached: another put of the same blob fetches nothing
    S_FMT (dest, sizeof (dest), "%s/big-again.bin", s_root);
    assert_int_equal (s_put_src ("node:files-01", local, dest, &out, &err),
                      0);
    free (out);
    free (err);
    assert_true (grid_file_sha256 (dest, got));
    assert_string_equal (got, hex);
    assert_int_equal (s_blob_figure ("chunks_sent", NULL), sent + 6);

    //  A dry run of the same put: no change on either node
    code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run", "--check",
                     "--diff", "--target", "group:files", "file", "put",
                     "--src", local, "--dest", dest, NULL);
    if (code != 0 || !grid_line_with (out, "files-02", "no change", NULL))
        fprintf (stderr, "out:\n%s\nerr:\n%s\n", out, err);
    assert_int_equal (code, 0);
    assert_true (grid_line_with (out, "files-01", "no change", NULL));
    assert_true (grid_line_with (out, "files-02", "no change", NULL));
    free (out);
    free (err);

    //  Over blobs.max_size: refused with the limit named
    char huge [PATH_MAX];
    S_FMT (huge, sizeof (huge), "%s/huge.bin", s_grid.dir);
    s_write_blob (huge, (16 << 20) + 1, 3, got);
    code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "file", "upload", huge,
                     NULL);
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "blobs.max_size"));
    free (out);
    free (err);

    //  A job naming a blob the broker lacks is refused at submit
    code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                     "--target", "node:files-01", "file", "put", "--path",
                     dest, "--sha256", got, "--size", "16777217", NULL);
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "not stored in the broker"));
    free (out);
    free (err);

    //  Hostile blob_get: unknown blob, offset past the end, off a chunk
    //  boundary, a huge offset; each answered with why and counted
    zsock_t *hand = fixture_agent (&s_grid, "hand-01", 4, NULL, NULL);
    int64_t refused = s_blob_figure ("refused", NULL);
    struct { const char *sha256; uint64_t offset; const char *why; } bad [] = {
        { "0000000000000000000000000000000000000000000000000000000000000000",
          0, "unknown blob" },
        { hex, 3 * PROTO_BLOB_CHUNK_BYTES, "past the blob's end" },
        { hex, 1000, "not a multiple" },
        { hex, (uint64_t) 1 << 40, "past the blob's end" },
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        proto_msg_t get = { .type = PROTO_BLOB_GET, .node = "hand-01",
                            .sha256 = (char *) bad [index].sha256,
                            .offset = bad [index].offset };
        fixture_send (hand, &get);
        proto_msg_t *answer = fixture_recv_type (hand, PROTO_BLOB_CHUNK,
                                                 S_WAIT_MS);
        assert_non_null (answer);
        assert_non_null (answer->error);
        if (!strstr (answer->error, bad [index].why))
            fprintf (stderr, "%zu: %s\n", index, answer->error);
        assert_non_null (strstr (answer->error, bad [index].why));
        assert_int_equal (answer->chunk_len, 0);
        proto_msg_destroy (&answer);
    }
    assert_int_equal (s_blob_figure ("refused", NULL), refused + 4);
    //  A good one: the last chunk, 88 KiB
    proto_msg_t get = { .type = PROTO_BLOB_GET, .node = "hand-01",
                        .sha256 = hex, .offset = 2 * PROTO_BLOB_CHUNK_BYTES };
    fixture_send (hand, &get);
    proto_msg_t *answer = fixture_recv_type (hand, PROTO_BLOB_CHUNK,
                                             S_WAIT_MS);
    assert_non_null (answer);
    assert_null (answer->error);
    assert_int_equal (answer->chunk_len,
                      S_BLOB_SIZE - 2 * PROTO_BLOB_CHUNK_BYTES);
    proto_msg_destroy (&answer);

    //  An agent without the feature is never sent the command: its cell
    //  says why
    fixture_agent (&s_grid, "old-01", 0, NULL, NULL);
    code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                     "--target", "node:old-01", "file", "put", "--path",
                     dest, "--sha256", hex, "--size", "614400", NULL);
    if (code == 0) {
        pv_doc_t *doc = s_record (out);
        const pv_t *cell = s_cell (doc, "old-01");
        char *error = pv_strdup (pv_map_get (cell, "error"));
        char *status = pv_strdup (pv_map_get (cell, "status"));
        fprintf (stderr, "old-01: %s %s\n", status, error);
        free (error);
        free (status);
        pv_doc_destroy (&doc);
    }
    assert_int_equal (code, 4);
    assert_non_null (strstr (err, "cannot fetch blobs"));
    free (out);
    free (err);
    fixture_agents_forget ();
}

//  ---------------------------------------------------------------------
//  Hostile uploads

//  blob.put of LEN bytes at DATA (base64; TEXT instead when not NULL) at
//  OFFSET of blob HEX of SIZE bytes; the reply's error code ("ok" when
//  taken), as a new string, and *STORED_P.
static char *
s_put_piece (const char *hex, uint64_t size, uint64_t offset,
             const void *data, size_t len, const char *text, bool *stored_p)
{
    char *encoded = (char *) malloc (BASE64_LEN (len) + 1);
    assert_non_null (encoded);
    base64_encode (data, len, encoded);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "blob.put", "hostile-put", 4);
    pw_str (writer, "sha256");
    pw_str (writer, hex);
    pw_str (writer, "size");
    pw_int (writer, (int64_t) size);
    pw_str (writer, "offset");
    pw_int (writer, (int64_t) offset);
    pw_str (writer, "data");
    pw_str (writer, text ? text : encoded);
    pv_doc_t *reply = grid_call_raw (&s_grid, pw_data (writer),
                                     pw_size (writer), GRID_CALL_MS);
    pw_destroy (&writer);
    free (encoded);
    assert_non_null (reply);
    const pv_t *answer = NULL;
    char *code = NULL;
    if (grid_reply_ok (reply, &answer)) {
        code = strdup ("ok");
        if (stored_p)
            pv_get_bool (pv_map_get (answer, "stored"), stored_p);
    }
    else
        code = grid_reply_code (reply);
    pv_doc_destroy (&reply);
    return code;
}

static void
s_expect_piece (const char *want, const char *hex, uint64_t size,
                uint64_t offset, const void *data, size_t len,
                const char *text, bool *stored_p)
{
    char *code = s_put_piece (hex, size, offset, data, len, text, stored_p);
    if (strcmp (code, want))
        fprintf (stderr, "blob.put at %llu: %s, not %s\n",
                 (unsigned long long) offset, code, want);
    assert_string_equal (code, want);
    free (code);
}

//  A client that uploads pieces out of order, twice, of the wrong length,
//  over blobs.max_size, in no base64, or whose content is not the name it
//  gave: each refused with its code, counted, nothing corrupt kept.
static void
test_it_files_hostile_uploads (void **state)
{
    size_t size = 2 * PROTO_BLOB_CHUNK_BYTES + 500;
    uint8_t *data = (uint8_t *) malloc (size);
    assert_non_null (data);
    for (size_t index = 0; index < size; index++)
        data [index] = (uint8_t) (index * 13 + 5);
    char hex [SHA256_HEX];
    sha256_hex (data, size, hex);
    const size_t chunk = PROTO_BLOB_CHUNK_BYTES;
    int64_t refused = s_blob_figure ("uploads_refused", NULL);
    bool stored = false;
    //  Out of order: the second piece first
    s_expect_piece ("conflict", hex, size, chunk, data + chunk, chunk, NULL,
                    NULL);
    s_expect_piece ("ok", hex, size, 0, data, chunk, NULL, &stored);
    assert_true (stored);
    //  The same piece again (a retry): taken, nothing stored
    s_expect_piece ("ok", hex, size, 0, data, chunk, NULL, &stored);
    assert_false (stored);
    //  Past where the upload goes on, off a chunk, of the wrong length
    s_expect_piece ("conflict", hex, size, 2 * chunk, data + 2 * chunk, 500,
                    NULL, NULL);
    s_expect_piece ("conflict", hex, size, 1000, data + 1000, chunk, NULL,
                    NULL);
    s_expect_piece ("bad_request", hex, size, chunk, data + chunk, 100, NULL,
                    NULL);
    //  Another size for the same name while the upload runs
    s_expect_piece ("bad_request", hex, size + 1, chunk, data + chunk, chunk,
                    NULL, NULL);
    //  No base64; a bad name; over blobs.max_size
    s_expect_piece ("bad_request", hex, size, chunk, NULL, 0, "not*base64!",
                    NULL);
    s_expect_piece ("bad_request", "../../etc/passwd", size, 0, data, chunk,
                    NULL, NULL);
    s_expect_piece ("bad_request", "ABCDEF0123456789ABCDEF0123456789ABCDEF"
                    "0123456789ABCDEF0123456789", size, 0, data, chunk, NULL,
                    NULL);
    s_expect_piece ("too_large", hex, (16 << 20) + 1, 0, data, chunk, NULL,
                    NULL);
    //  The upload under way is intact: it goes on from one chunk
    pv_doc_t *reply = grid_call (&s_grid, "blob.stat", "sha256", hex, NULL);
    const pv_t *blob = NULL;
    assert_true (grid_reply_ok (reply, &blob));
    int64_t received = 0;
    pv_get_int (pv_map_get (blob, "received"), &received);
    assert_int_equal (received, (int64_t) chunk);
    pv_doc_destroy (&reply);
    //  The rest, but the last piece lies: the sha256 of the whole is not
    //  its name, and nothing of it is kept
    s_expect_piece ("ok", hex, size, chunk, data + chunk, chunk, NULL,
                    &stored);
    assert_true (stored);
    uint8_t tail [500];
    memcpy (tail, data + 2 * chunk, sizeof tail);
    tail [100] ^= 0xff;
    s_expect_piece ("bad_request", hex, size, 2 * chunk, tail, sizeof tail,
                    NULL, NULL);
    reply = grid_call (&s_grid, "blob.stat", "sha256", hex, NULL);
    char *code = grid_reply_code (reply);
    assert_string_equal (code, "not_found");
    free (code);
    pv_doc_destroy (&reply);
    //  Every refusal counted (a name of another length than 64 is
    //  refused as malformed by the request's decoder, and counted there)
    assert_int_equal (s_blob_figure ("uploads_refused", NULL), refused + 9);
    //  Whole and in order, it is taken
    s_expect_piece ("ok", hex, size, 0, data, chunk, NULL, NULL);
    s_expect_piece ("ok", hex, size, chunk, data + chunk, chunk, NULL, NULL);
    s_expect_piece ("ok", hex, size, 2 * chunk, data + 2 * chunk, 500, NULL,
                    NULL);
    reply = grid_call (&s_grid, "blob.stat", "sha256", hex, NULL);
    assert_true (grid_reply_ok (reply, &blob));
    bool complete = false;
    pv_get_bool (pv_map_get (blob, "complete"), &complete);
    assert_true (complete);
    pv_doc_destroy (&reply);
    free (data);
}

//  ---------------------------------------------------------------------
//  A fetch cut by a SIGKILL while chunks flow

#define S_BIG_CHUNKS 48             //  12 MiB
#define S_BIG_SIZE ((size_t) S_BIG_CHUNKS * PROTO_BLOB_CHUNK_BYTES)

//  blob.stat's chunks_sent of SHA256 (asserting the blob is whole).
static int64_t
s_chunks_sent (const char *sha256)
{
    pv_doc_t *reply = grid_call (&s_grid, "blob.stat", "sha256", sha256,
                                 NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    bool complete = false;
    pv_get_bool (pv_map_get (data, "complete"), &complete);
    assert_true (complete);
    int64_t size = -1, received = -2, sent = -1;
    pv_get_int (pv_map_get (data, "size"), &size);
    pv_get_int (pv_map_get (data, "received"), &received);
    assert_int_equal (received, size);
    pv_get_int (pv_map_get (data, "chunks_sent"), &sent);
    pv_doc_destroy (&reply);
    return sent;
}

//  Waits until the .part file PART holds MIN_BYTES, then freezes PID
//  there (SIGSTOP, waited for): the fetch is stopped mid-way. Returns the
//  bytes PART holds then.
static long long
s_freeze_mid_fetch (const char *part, long long min_bytes, pid_t pid)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    struct stat info;
    while (grid_now_ms () < deadline
           && (stat (part, &info) || info.st_size < min_bytes))
        usleep (200);
    assert_int_equal (kill (pid, SIGSTOP), 0);
    int status = 0;
    assert_int_equal (waitpid (pid, &status, WUNTRACED), pid);
    assert_true (WIFSTOPPED (status));
    assert_int_equal (stat (part, &info), 0);
    return (long long) info.st_size;
}

//  Uploads a new large blob (SEED) as NAME; its digest into HEX.
static void
s_upload_large (const char *name, unsigned seed, char *hex)
{
    char local [PATH_MAX];
    S_FMT (local, sizeof (local), "%s/%s", s_grid.dir, name);
    s_write_blob (local, S_BIG_SIZE, seed, hex);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "file", "upload",
                         local, NULL);
    if (code != 0)
        fprintf (stderr, "upload: %s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);
}

//  Starts a put of blob HEX to DEST on NODE (not waited for); its job id.
//  An agent restarted hands its task back (interrupted, before it ran):
//  the retry runs it, from the chunks the agent kept.
static char *
s_start_put (const char *node, const char *dest, const char *hex)
{
    char target [80], size [32];
    snprintf (target, sizeof (target), "node:%s", node);
    snprintf (size, sizeof (size), "%zu", S_BIG_SIZE);
    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, S_WAIT_MS, "job", "run",
                         "--target", target, "--retries", "1", "file",
                         "put", "--path", dest, "--sha256", hex, "--size",
                         size, NULL);
    if (code != 0)
        fprintf (stderr, "job run: %s%s", out, err);
    assert_int_equal (code, 0);
    char *job = s_job_id (out);
    free (out);
    free (err);
    return job;
}

//  Job JOB ended completed, NODE's cell a success, DEST holds HEX.
static void
s_assert_put (const char *job, const char *node, const char *dest,
              const char *hex)
{
    pv_doc_t *doc = grid_wait_job (&s_grid, job, 3 * S_WAIT_MS);
    assert_non_null (doc);
    const pv_t *data = pv_map_get (pv_doc_root (doc), "data");
    const pv_t *cell = grid_cell (data, 0, node);
    if (!grid_str_is (data, "status", "completed")) {
        pv_write_json (data, stderr, 0);
        fprintf (stderr, "\n");
    }
    assert_true (grid_str_is (data, "status", "completed"));
    assert_true (grid_str_is (cell, "status", "success"));
    pv_doc_destroy (&doc);
    char got [SHA256_HEX];
    assert_true (grid_file_sha256 (dest, got));
    assert_string_equal (got, hex);
}

static void
test_it_files_kill_mid_fetch (void **state)
{
    char hex [SHA256_HEX], dest [PATH_MAX], part [PATH_MAX], line [128];
    const long long chunk = PROTO_BLOB_CHUNK_BYTES;

    //  The agent killed while chunks flow: the restarted agent asks from
    //  where its .part ends, and no chunk it held is sent again
    s_upload_large ("large-1.bin", 21, hex);
    assert_int_equal (s_chunks_sent (hex), 0);
    S_FMT (dest, sizeof (dest), "%s/large-1.bin", s_root);
    S_FMT (part, sizeof (part), "%s/agent-files-02/blobs/%s.part",
           s_grid.dir, hex);
    char *job = s_start_put ("files-02", dest, hex);
    long long held = s_freeze_mid_fetch (part, 2 * chunk,
                                         s_grid.agent_pids [1]);
    assert_true (held >= 2 * chunk && held < (long long) S_BIG_SIZE);
    grid_stop_agent (&s_grid, 1, true);
    char config [600];
    S_FMT (config, sizeof (config), "%s/files-agent.yaml", s_grid.dir);
    const char *extra [] = { "--config", config, NULL };
    assert_true (grid_start_agent (&s_grid, "files-02", "files", NULL,
                                   extra) >= 0);
    s_assert_put (job, "files-02", dest, hex);
    free (job);
    S_FMT (line, sizeof (line), "fetch goes on from %lld bytes",
           held - held % chunk);
    assert_true (fixture_log_has (&s_grid, "agent-files-02.log", line,
                                  5000));
    //  Every chunk once, and the one in flight at the kill at most twice
    int64_t sent = s_chunks_sent (hex);
    if (sent < S_BIG_CHUNKS || sent > S_BIG_CHUNKS + 1)
        fprintf (stderr, "chunks sent: %lld for %d chunks (held %lld)\n",
                 (long long) sent, S_BIG_CHUNKS, held);
    assert_true (sent >= S_BIG_CHUNKS && sent <= S_BIG_CHUNKS + 1);

    //  The broker killed while chunks flow: restarted on its store, it
    //  serves the rest; the job completes, the blob is whole in the store
    s_upload_large ("large-2.bin", 23, hex);
    S_FMT (dest, sizeof (dest), "%s/large-2.bin", s_root);
    S_FMT (part, sizeof (part), "%s/agent-files-01/blobs/%s.part",
           s_grid.dir, hex);
    job = s_start_put ("files-01", dest, hex);
    held = s_freeze_mid_fetch (part, 2 * chunk, s_grid.broker_pid);
    assert_true (held >= 2 * chunk && held < (long long) S_BIG_SIZE);
    grid_stop_broker (&s_grid, true);
    const char *broker_extra [] = { "--config", s_broker_config, NULL };
    assert_int_equal (grid_start_broker (&s_grid, broker_extra), 0);
    s_assert_put (job, "files-01", dest, hex);
    free (job);
    //  Since the restart: only what the agent did not hold (a chunk on
    //  its way when the broker stopped may have reached it)
    long long left = S_BIG_CHUNKS - held / chunk;
    sent = s_chunks_sent (hex);
    if (sent < left - 1 || sent > left)
        fprintf (stderr, "chunks sent since the restart: %lld, %lld were "
                 "left (held %lld)\n", (long long) sent, left, held);
    assert_true (sent >= left - 1 && sent <= left);
    char *out = NULL, *err = NULL, count [32];
    assert_int_equal (grid_cli (&s_grid, &out, &err, S_WAIT_MS, "file",
                                "list", NULL), 0);
    snprintf (count, sizeof count, " %lld", (long long) sent);
    assert_true (grid_line_with (out, "SHA256", "COMPLETE", "SENT", NULL));
    assert_true (grid_line_with (out, hex, count, NULL));
    free (out);
    free (err);
    //  Nothing stored is half: every blob is whole
    pv_doc_t *reply = grid_call (&s_grid, "blob.list", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    const pv_t *list = pv_map_get (data, "blobs");
    assert_true (pv_size (list) >= 3);
    for (size_t index = 0; index < pv_size (list); index++) {
        bool complete = false;
        pv_get_bool (pv_map_get (pv_array_at (list, index), "complete"),
                     &complete);
        assert_true (complete);
    }
    pv_doc_destroy (&reply);
}

//  ---------------------------------------------------------------------
//  A broker that sends what a real one never would: a real gridagent
//  against a ROUTER made by hand

typedef struct {
    grid_t grid;                 //  Its directory and endpoints
    zsock_t *router;             //  The agent endpoint
    zframe_t *routing;           //  The agent's routing id
    pw_t *writer;
} s_hand_t;

static void
s_hand_send (s_hand_t *hand, const proto_msg_t *msg)
{
    pw_reset (hand->writer);
    assert_int_equal (proto_msg_encode (msg, hand->writer), 0);
    zmsg_t *out = zmsg_new ();
    zmsg_addmem (out, zframe_data (hand->routing),
                 zframe_size (hand->routing));
    zmsg_addmem (out, pw_data (hand->writer), pw_size (hand->writer));
    assert_int_equal (zmsg_send (&out, hand->router), 0);
}

//  The next message of TYPE from the agent (others are skipped; a result
//  is acknowledged), or NULL after the deadline.
static proto_msg_t *
s_hand_recv (s_hand_t *hand, proto_type_t type)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    zsock_set_rcvtimeo (hand->router, 200);
    while (grid_now_ms () < deadline) {
        zmsg_t *in = zmsg_recv (hand->router);
        if (!in)
            continue;
        zframe_t *routing = zmsg_pop (in);
        zframe_t *body = zmsg_pop (in);
        proto_msg_t *msg = NULL;
        char why [256];
        int rc = body ? proto_msg_decode (zframe_data (body),
                                          zframe_size (body), &msg, why,
                                          sizeof why) : -2;
        zframe_destroy (&body);
        zmsg_destroy (&in);
        zframe_destroy (&hand->routing);
        hand->routing = routing;
        assert_int_equal (rc, 0);
        if (msg->type == PROTO_RESULT) {
            proto_msg_t ack = {
                .type = PROTO_RESULT_ACK, .job = msg->job, .step = msg->step,
                .attempt = msg->attempt
            };
            s_hand_send (hand, &ack);
        }
        if (msg->type == type)
            return msg;
        proto_msg_destroy (&msg);
    }
    return NULL;
}

//  Sends the agent a file put of blob HEX (SIZE bytes) to DEST as JOB.
static void
s_hand_put (s_hand_t *hand, const char *job, const char *dest,
            const char *hex, size_t size)
{
    char size_text [32];
    snprintf (size_text, sizeof size_text, "%zu", size);
    proto_kv_t params [3] = {
        { .key = "path", .value = (char *) dest },
        { .key = "sha256", .value = (char *) hex },
        { .key = "size", .value = size_text },
    };
    proto_msg_t command = {
        .type = PROTO_COMMAND, .job = (char *) job, .step = 0, .attempt = 1,
        .backend = "file", .action = "put", .params = params,
        .param_count = 3, .timeout_ms = 30000
    };
    s_hand_send (hand, &command);
}

//  Answers the agent's next blob_get (asserting it asks OFFSET of HEX)
//  with LEN bytes of DATA, or ERROR; SIZE is the blob's size said.
static void
s_hand_chunk (s_hand_t *hand, const char *hex, uint64_t offset,
              uint64_t size, const void *data, size_t len, const char *error)
{
    proto_msg_t *get = s_hand_recv (hand, PROTO_BLOB_GET);
    assert_non_null (get);
    assert_string_equal (get->sha256, hex);
    assert_int_equal (get->offset, offset);
    proto_msg_destroy (&get);
    proto_msg_t chunk = {
        .type = PROTO_BLOB_CHUNK, .sha256 = (char *) hex, .offset = offset,
        .size = size, .chunk = (uint8_t *) data, .chunk_len = len,
        .error = (char *) error
    };
    s_hand_send (hand, &chunk);
}

//  The result of JOB failed, its error holding WANT.
static void
s_hand_failed (s_hand_t *hand, const char *job, const char *want)
{
    proto_msg_t *result = s_hand_recv (hand, PROTO_RESULT);
    assert_non_null (result);
    assert_string_equal (result->job, job);
    if (!result->error || !strstr (result->error, want))
        fprintf (stderr, "%s: %s: %s\n", job, result->status,
                 result->error ? result->error : "no error");
    assert_string_not_equal (result->status, "success");
    assert_non_null (result->error);
    assert_non_null (strstr (result->error, want));
    proto_msg_destroy (&result);
}

static void
test_it_files_hostile_broker (void **state)
{
    s_hand_t hand = { .writer = pw_new () };
    assert_int_equal (grid_init (&hand.grid), 0);
    hand.grid.insecure = true;
    hand.router = zsock_new (ZMQ_ROUTER);
    zsock_t *pub = zsock_new (ZMQ_PUB);
    assert_int_equal (zsock_bind (hand.router, "%s", hand.grid.agents_ep), 0);
    assert_int_equal (zsock_bind (pub, "%s", hand.grid.publish_ep), 0);
    zsock_set_linger (hand.router, 0);
    zsock_set_linger (pub, 0);
    char root [PATH_MAX], config [PATH_MAX], dest [PATH_MAX], hex [SHA256_HEX];
    S_FMT (root, sizeof root, "%s/files", hand.grid.dir);
    S_FMT (config, sizeof config, "%s/agent.yaml", hand.grid.dir);
    assert_int_equal (mkdir (root, 0755), 0);
    FILE *file = fopen (config, "w");
    assert_non_null (file);
    fprintf (file, "file:\n  roots: [\"%s\"]\n", root);
    fclose (file);
    const char *extra [] = { "--config", config, NULL };
    assert_true (grid_spawn_agent (&hand.grid, "prey-01", NULL, NULL, extra)
                 >= 0);
    proto_msg_t *hello = s_hand_recv (&hand, PROTO_HELLO);
    assert_non_null (hello);
    proto_msg_destroy (&hello);
    char *granted [1] = { PROTO_FEATURE_BLOBS };
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = "prey-01", .heartbeat_ms = 1000,
        .features = granted, .feature_count = 1
    };
    s_hand_send (&hand, &welcome);

    //  A blob of two chunks
    size_t size = PROTO_BLOB_CHUNK_BYTES + 1000;
    uint8_t *data = (uint8_t *) malloc (size), *lie = (uint8_t *) malloc (size);
    assert_non_null (data);
    assert_non_null (lie);
    for (size_t index = 0; index < size; index++) {
        data [index] = (uint8_t) (index * 31 + 7);
        lie [index] = (uint8_t) (index * 29 + 1);
    }
    sha256_hex (data, size, hex);
    S_FMT (dest, sizeof dest, "%s/target.bin", root);

    //  A chunk of the wrong size
    s_hand_put (&hand, "j-0193a1b2c3d4-0001", dest, hex, size);
    s_hand_chunk (&hand, hex, 0, size, data, 1000, NULL);
    s_hand_failed (&hand, "j-0193a1b2c3d4-0001", "wrong size");
    //  A blob of another size than the command said
    s_hand_put (&hand, "j-0193a1b2c3d4-0002", dest, hex, size);
    s_hand_chunk (&hand, hex, 0, size + 1, data, PROTO_BLOB_CHUNK_BYTES,
                  NULL);
    s_hand_failed (&hand, "j-0193a1b2c3d4-0002", "the command said");
    //  The broker says why not
    s_hand_put (&hand, "j-0193a1b2c3d4-0003", dest, hex, size);
    s_hand_chunk (&hand, hex, 0, 0, NULL, 0, "unknown blob");
    s_hand_failed (&hand, "j-0193a1b2c3d4-0003", "unknown blob");
    //  Chunks of the right sizes whose content is not the blob's (an
    //  unasked chunk in between is dropped)
    s_hand_put (&hand, "j-0193a1b2c3d4-0004", dest, hex, size);
    s_hand_chunk (&hand, hex, 0, size, lie, PROTO_BLOB_CHUNK_BYTES, NULL);
    proto_msg_t stray = {
        .type = PROTO_BLOB_CHUNK, .sha256 = hex, .offset = 0, .size = size,
        .chunk = data, .chunk_len = PROTO_BLOB_CHUNK_BYTES
    };
    s_hand_send (&hand, &stray);
    s_hand_chunk (&hand, hex, PROTO_BLOB_CHUNK_BYTES, size,
                  lie + PROTO_BLOB_CHUNK_BYTES, 1000, NULL);
    s_hand_failed (&hand, "j-0193a1b2c3d4-0004", "not its name");

    //  Each hostile chunk counted and said in the agent's log: the wrong
    //  size, the other size, the stray one, the last of the false content
    //  (a broker that says why not is no hostile chunk)
    char log [PATH_MAX];
    S_FMT (log, sizeof log, "%s/agent-prey-01.log", hand.grid.dir);
    char *text = grid_slurp (log);
    assert_non_null (text);
    assert_true (grid_line_with (text, "refused a blob_chunk",
                                 "(1 refused so far)", "wrong size", NULL));
    assert_true (grid_line_with (text, "(2 refused so far)",
                                 "the command said", NULL));
    assert_true (grid_line_with (text, "(3 refused so far)",
                                 "not asked for", NULL));
    assert_true (grid_line_with (text, "(4 refused so far)", "not its name",
                                 NULL));
    assert_null (strstr (text, "(5 refused so far)"));
    free (text);

    //  Nothing written, nothing kept in the cache
    char cached [PATH_MAX];
    assert_int_equal (access (dest, F_OK), -1);
    S_FMT (cached, sizeof cached, "%s/agent-prey-01/blobs/%s",
           hand.grid.dir, hex);
    assert_int_equal (access (cached, F_OK), -1);
    S_FMT (cached, sizeof cached, "%s/agent-prey-01/blobs/%s.part",
           hand.grid.dir, hex);
    assert_int_equal (access (cached, F_OK), -1);

    //  And the real content is taken
    s_hand_put (&hand, "j-0193a1b2c3d4-0005", dest, hex, size);
    s_hand_chunk (&hand, hex, 0, size, data, PROTO_BLOB_CHUNK_BYTES, NULL);
    s_hand_chunk (&hand, hex, PROTO_BLOB_CHUNK_BYTES, size,
                  data + PROTO_BLOB_CHUNK_BYTES, 1000, NULL);
    proto_msg_t *result = s_hand_recv (&hand, PROTO_RESULT);
    assert_non_null (result);
    assert_string_equal (result->status, "success");
    proto_msg_destroy (&result);
    char got [SHA256_HEX];
    assert_true (grid_file_sha256 (dest, got));
    assert_string_equal (got, hex);
    free (data);
    free (lie);
    grid_stop_agent (&hand.grid, 0, true);
    zsock_destroy (&hand.router);
    zsock_destroy (&pub);
    zframe_destroy (&hand.routing);
    pw_destroy (&hand.writer);
    grid_stop (&hand.grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_files_put_get_stat_absent),
        cmocka_unit_test (test_it_files_hostile),
        cmocka_unit_test (test_it_files_blobs),
        cmocka_unit_test (test_it_files_hostile_uploads),
        cmocka_unit_test (test_it_files_kill_mid_fetch),
        cmocka_unit_test (test_it_files_hostile_broker),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
