/*  =========================================================================
    test_rekey - gridagent's key rotation on disk: the next pair's files,
    the commit, and the repair of a commit or a write cut short
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../agent/rekey.h"
#include "../proto/keys.h"

static char s_dir [256];

static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "%s/grid-rekey-XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    return mkdtemp (s_dir) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", s_dir);
    return system (command) == 0 ? 0 : -1;
}

//  The public key in the key file PATH.
static void
s_public (const char *path, char *out)
{
    char why [256];
    assert_int_equal (keys_read_public (path, out, why, sizeof why), 0);
}

static void
test_rekey_paths (void **state)
{
    keynext_paths_t paths;
    assert_int_equal (keynext_paths ("/k/agent.key", &paths), 0);
    assert_string_equal (paths.pub, "/k/agent.key");
    assert_string_equal (paths.secret, "/k/agent.key_secret");
    assert_string_equal (paths.next_pub, "/k/agent.key.next");
    assert_string_equal (paths.next_secret, "/k/agent.key.next_secret");
    //  The secret file names the same pair
    assert_int_equal (keynext_paths ("/k/agent.key_secret", &paths), 0);
    assert_string_equal (paths.next_secret, "/k/agent.key.next_secret");
}

//  Write, load, commit: the next pair becomes the pair; none is left.
static void
test_rekey_write_and_commit (void **state)
{
    char key [300], old [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE], err [512];
    assert_int_equal (keys_generate (s_dir, "one", false, NULL, old, err,
                                     sizeof err), 0);
    snprintf (key, sizeof key, "%s/one.key", s_dir);
    assert_null (keynext_load (key, err, sizeof err));
    assert_string_equal (err, "");
    assert_int_equal (keynext_write (key, next, err, sizeof err), 0);
    assert_string_not_equal (next, old);
    keynext_paths_t paths;
    keynext_paths (key, &paths);
    struct stat info;
    assert_int_equal (stat (paths.next_secret, &info), 0);
    assert_int_equal (info.st_mode & 077, 0);
    zcert_t *cert = keynext_load (key, err, sizeof err);
    assert_non_null (cert);
    assert_string_equal (zcert_public_txt (cert), next);
    zcert_destroy (&cert);
    //  Written again: a newer pair replaces the unused one
    char newer [KEYS_TEXT_SIZE];
    assert_int_equal (keynext_write (key, newer, err, sizeof err), 0);
    assert_string_not_equal (newer, next);

    assert_int_equal (keynext_commit (key, err, sizeof err), 0);
    char now [KEYS_TEXT_SIZE];
    s_public (paths.secret, now);
    assert_string_equal (now, newer);
    s_public (paths.pub, now);
    assert_string_equal (now, newer);
    assert_int_not_equal (access (paths.next_pub, F_OK), 0);
    assert_int_not_equal (access (paths.next_secret, F_OK), 0);
    assert_int_equal (keynext_recover (key, err, sizeof err), 0);
    assert_true (keynext_age_ms (key) >= 0);
}

//  A commit cut between its renames is finished; a public file whose
//  secret one was never written is dropped; a whole pair stays.
static void
test_rekey_recover (void **state)
{
    char key [300], old [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE], err [512];
    assert_int_equal (keys_generate (s_dir, "two", false, NULL, old, err,
                                     sizeof err), 0);
    snprintf (key, sizeof key, "%s/two.key", s_dir);
    keynext_paths_t paths;
    keynext_paths (key, &paths);

    assert_int_equal (keynext_write (key, next, err, sizeof err), 0);
    assert_int_equal (keynext_recover (key, err, sizeof err), 0);
    assert_int_equal (access (paths.next_secret, F_OK), 0);

    //  The secret renamed, not the public one
    assert_int_equal (rename (paths.next_secret, paths.secret), 0);
    assert_int_equal (keynext_recover (key, err, sizeof err), 1);
    char now [KEYS_TEXT_SIZE];
    s_public (paths.pub, now);
    assert_string_equal (now, next);
    assert_int_not_equal (access (paths.next_pub, F_OK), 0);

    //  A public file alone, of a pair never written whole
    assert_int_equal (keynext_write (key, old, err, sizeof err), 0);
    assert_int_equal (unlink (paths.next_secret), 0);
    assert_int_equal (keynext_recover (key, err, sizeof err), 1);
    assert_int_not_equal (access (paths.next_pub, F_OK), 0);
    s_public (paths.secret, now);
    assert_string_equal (now, next);

    //  A next pair dropped (the broker refused it)
    assert_int_equal (keynext_write (key, old, err, sizeof err), 0);
    assert_int_equal (keynext_drop (key), 0);
    assert_null (keynext_load (key, err, sizeof err));
    assert_int_not_equal (access (paths.next_pub, F_OK), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_rekey_paths),
        cmocka_unit_test (test_rekey_write_and_commit),
        cmocka_unit_test (test_rekey_recover),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
