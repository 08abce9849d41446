/*  =========================================================================
    test_fileops - the file backend's core: SHA-256, path rules, put (new,
    idempotent, backup, mode only, makedirs), get, stat, absent, the dry
    run's check and diff, and every hostile case: no root, outside a root,
    traversal, symlinks along the path and at the leaf, symlinks swapped in
    between the checks and the rename, a directory, a fifo, an unknown
    owner, a full disk (a small tmpfs, as root only). Then the backend's
    actions through backend_plan_new, as the agent runs them.
    =========================================================================
*/
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../backends/backend.h"
#include "../backends/fileops.h"
#include "../proto/sha256.h"

//  snprintf that must not truncate (its result used: no truncation warning)
#define S_FMT(buf, size, ...) \
    assert_true (snprintf (buf, size, __VA_ARGS__) < (int) (size))

static char s_base [PATH_MAX];       //  A fresh temp dir per test
static char s_root [PATH_MAX];       //  <base>/root: the only root
static char s_outside [PATH_MAX];    //  <base>/outside: not a root
static char *s_root_list [1];
static fileops_roots_t s_roots;

static void
s_path (char *buf, const char *dir, const char *name)
{
    S_FMT (buf, PATH_MAX, "%s/%s", dir, name);
}

static void
s_write (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
}

//  The whole content of PATH (static buffer), or NULL.
static const char *
s_read (const char *path)
{
    static char buf [65536];
    FILE *file = fopen (path, "r");
    if (!file)
        return NULL;
    size_t got = fread (buf, 1, sizeof (buf) - 1, file);
    buf [got] = 0;
    fclose (file);
    return buf;
}

//  Entries in DIR (. and .. aside).
static int
s_entries (const char *dir)
{
    char command [PATH_MAX + 64];
    S_FMT (command, sizeof (command), "ls -A '%s' | wc -l", dir);
    FILE *pipe = popen (command, "r");
    int count = -1;
    assert_int_equal (fscanf (pipe, "%d", &count), 1);
    pclose (pipe);
    return count;
}

static int
s_setup (void **state)
{
    S_FMT (s_base, sizeof (s_base), "/tmp/test_fileops.XXXXXX");
    assert_non_null (mkdtemp (s_base));
    s_path (s_root, s_base, "root");
    s_path (s_outside, s_base, "outside");
    assert_int_equal (mkdir (s_root, 0755), 0);
    assert_int_equal (mkdir (s_outside, 0755), 0);
    s_root_list [0] = s_root;
    s_roots.paths = s_root_list;
    s_roots.count = 1;
    fileops_test_before_rename = NULL;
    return 0;
}

static int
s_teardown (void **state)
{
    char command [PATH_MAX + 32];
    S_FMT (command, sizeof (command), "umount -q '%s/root/disk' "
              "2>/dev/null; rm -rf '%s'", s_base, s_base);
    assert_int_equal (system (command), 0);
    fileops_test_before_rename = NULL;
    return 0;
}

static fileops_put_t
s_put_of (const char *path, const char *content)
{
    fileops_put_t put = { .path = path, .content = content,
                          .len = strlen (content), .mode = -1 };
    return put;
}


//  ---------------------------------------------------------------------

static void
test_fileops_sha256 (void **unused)
{
    char hex [SHA256_HEX];
    sha256_hex ("", 0, hex);
    assert_string_equal (hex, "e3b0c44298fc1c149afbf4c8996fb924"
                              "27ae41e4649b934ca495991b7852b855");
    sha256_hex ("abc", 3, hex);
    assert_string_equal (hex, "ba7816bf8f01cfea414140de5dae2223"
                              "b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex (two, strlen (two), hex);
    assert_string_equal (hex, "248d6a61d20638b8e5c026930c3e6039"
                              "a33ce45964ff2167f6ecedd419db06c1");
    //  A million 'a's, fed in odd pieces
    sha256_t context;
    sha256_init (&context);
    char block [997];
    memset (block, 'a', sizeof (block));
    size_t left = 1000000;
    while (left) {
        size_t take = left < sizeof (block) ? left : sizeof (block);
        sha256_update (&context, block, take);
        left -= take;
    }
    uint8_t digest [SHA256_BYTES];
    sha256_final (&context, digest);
    sha256_to_hex (digest, hex);
    assert_string_equal (hex, "cdc76e5c9914fb9281a1c7e284d73e67"
                              "f1809a48a497200e046d39ccc7112cd0");
}

static void
test_fileops_path_rules (void **unused)
{
    char err [256];
    assert_int_equal (fileops_path_check ("/etc/x", err, sizeof (err)), 0);
    const char *bad [] = { "etc/x", "", "/etc//x", "/etc/x/", "/etc/./x",
                           "/etc/../x", "/..", "/etc/x\n", "/a/b/.." };
    for (size_t index = 0; index < sizeof (bad) / sizeof (bad [0]); index++)
        assert_int_equal (fileops_path_check (bad [index], err,
                                              sizeof (err)), -1);
    //  Not under a root; the root itself; no root at all
    char path [PATH_MAX];
    s_path (path, s_outside, "x");
    fileops_put_t put = s_put_of (path, "hello\n");
    fileops_change_t change;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "not under a root"));
    put.path = s_root;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    //  A sibling that shares the root's prefix is not under it
    char sibling [PATH_MAX];
    S_FMT (sibling, sizeof (sibling), "%s2/x", s_root);
    put.path = sibling;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    fileops_roots_t none = { NULL, 0 };
    s_path (path, s_root, "x");
    put.path = path;
    assert_int_equal (fileops_put (&none, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "file.roots"));
    //  Traversal out of the root
    char traversal [PATH_MAX];
    S_FMT (traversal, sizeof (traversal), "%s/../outside/x", s_root);
    put.path = traversal;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "canonical"));
    s_path (path, s_outside, "x");
    assert_int_equal (access (path, F_OK), -1);
    assert_int_equal (s_entries (s_root), 0);
}

static void
test_fileops_put (void **unused)
{
    char err [256], path [PATH_MAX], backup [PATH_MAX];
    s_path (path, s_root, "app.conf");
    fileops_put_t put = s_put_of (path, "one\n");
    put.mode = 0640;
    fileops_change_t change;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), 0);
    assert_true (fileops_changed (&change));
    assert_false (change.existed);
    assert_string_equal (s_read (path), "one\n");
    struct stat info;
    assert_int_equal (stat (path, &info), 0);
    assert_int_equal (info.st_mode & 07777, 0640);
    char hex [SHA256_HEX];
    sha256_hex ("one\n", 4, hex);
    assert_string_equal (change.sha256_new, hex);

    //  The same again: nothing written (the inode and mtime stay)
    struct stat before = info;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), 0);
    assert_false (fileops_changed (&change));
    assert_int_equal (stat (path, &info), 0);
    assert_int_equal (info.st_ino, before.st_ino);
    assert_int_equal (info.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

    //  Mode only: set on the same file
    put.mode = 0600;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), 0);
    assert_true (change.mode);
    assert_false (change.content);
    assert_int_equal (stat (path, &info), 0);
    assert_int_equal (info.st_ino, before.st_ino);
    assert_int_equal (info.st_mode & 07777, 0600);

    //  New content with a backup: the old inode is kept as .bak, the mode
    //  is kept when none is given
    fileops_put_t second = s_put_of (path, "two\n");
    second.backup = true;
    assert_int_equal (fileops_put (&s_roots, &second, &change, err,
                                   sizeof (err)), 0);
    assert_true (change.content);
    S_FMT (backup, sizeof (backup), "%s.bak", path);
    assert_string_equal (change.backup, backup);
    assert_string_equal (s_read (path), "two\n");
    assert_string_equal (s_read (backup), "one\n");
    struct stat kept;
    assert_int_equal (stat (backup, &kept), 0);
    assert_int_equal (kept.st_ino, before.st_ino);
    assert_int_equal (stat (path, &info), 0);
    assert_int_equal (info.st_mode & 07777, 0600);
    //  No temporary file left behind
    assert_int_equal (s_entries (s_root), 2);

    //  Owner and group by id (our own): no change
    fileops_put_t third = s_put_of (path, "two\n");
    char uid [16], gid [16];
    S_FMT (uid, sizeof (uid), "%u", (unsigned) geteuid ());
    S_FMT (gid, sizeof (gid), "%u", (unsigned) getegid ());
    third.owner = uid;
    third.group = gid;
    assert_int_equal (fileops_put (&s_roots, &third, &change, err,
                                   sizeof (err)), 0);
    assert_false (fileops_changed (&change));
    //  An unknown owner: refused, nothing written
    char fresh [PATH_MAX];
    s_path (fresh, s_root, "fresh");
    fileops_put_t unknown = s_put_of (fresh, "x");
    unknown.owner = "no-such-user-here";
    assert_int_equal (fileops_put (&s_roots, &unknown, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "no such user"));
    unknown.owner = NULL;
    unknown.group = "no-such-group-here";
    assert_int_equal (fileops_put (&s_roots, &unknown, &change, err,
                                   sizeof (err)), -1);
    assert_int_equal (access (fresh, F_OK), -1);
    assert_int_equal (s_entries (s_root), 2);
}

static void
test_fileops_makedirs (void **unused)
{
    char err [256], path [PATH_MAX];
    S_FMT (path, sizeof (path), "%s/a/b/c.txt", s_root);
    fileops_put_t put = s_put_of (path, "deep\n");
    fileops_change_t change;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "makedirs"));
    //  The check says it would be new, and creates nothing
    put.makedirs = true;
    assert_int_equal (fileops_put_check (&s_roots, &put, false, &change, err,
                                         sizeof (err)), 0);
    assert_true (change.content);
    assert_int_equal (s_entries (s_root), 0);
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), 0);
    assert_string_equal (s_read (path), "deep\n");
}

static void
test_fileops_symlinks (void **unused)
{
    char err [256], path [PATH_MAX], target [PATH_MAX], link [PATH_MAX];
    fileops_change_t change;
    //  A symlink at the leaf, to a file outside: refused, not followed
    s_path (target, s_outside, "secret");
    s_write (target, "outside\n");
    s_path (link, s_root, "leaf");
    assert_int_equal (symlink (target, link), 0);
    fileops_put_t put = s_put_of (link, "owned\n");
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "symlink"));
    assert_string_equal (s_read (target), "outside\n");
    char *content = NULL;
    size_t len = 0;
    char hex [SHA256_HEX];
    assert_int_equal (fileops_get (&s_roots, link, 1024, &content, &len, hex,
                                   err, sizeof (err)), -1);
    assert_null (content);
    //  stat reports the link itself
    fileops_stat_t info;
    assert_int_equal (fileops_stat (&s_roots, link, &info, err,
                                    sizeof (err)), 0);
    assert_true (info.exists);
    assert_string_equal (info.type, "symlink");
    assert_string_equal (info.sha256, "");
    //  absent removes the link, never its target
    bool changed = false;
    assert_int_equal (fileops_absent (&s_roots, link, &changed, err,
                                      sizeof (err)), 0);
    assert_true (changed);
    assert_string_equal (s_read (target), "outside\n");

    //  A symlinked directory on the way (even one inside the root)
    s_path (link, s_root, "dir");
    assert_int_equal (symlink (s_outside, link), 0);
    S_FMT (path, sizeof (path), "%s/dir/secret", s_root);
    put = s_put_of (path, "owned\n");
    put.makedirs = true;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "symlink"));
    assert_string_equal (s_read (target), "outside\n");
    assert_int_equal (fileops_absent (&s_roots, path, &changed, err,
                                      sizeof (err)), -1);
    assert_int_equal (fileops_stat (&s_roots, path, &info, err,
                                    sizeof (err)), -1);
    assert_int_equal (access (target, F_OK), 0);
}

//  Swaps: the leaf for a symlink to the file outside.
static char s_swap_target [PATH_MAX];
static char s_swap_what [PATH_MAX];

static void
s_swap_leaf (const char *path)
{
    assert_int_equal (unlink (path), 0);
    assert_int_equal (symlink (s_swap_target, path), 0);
}

//  Swaps the target's directory for a symlink to the outside directory.
static void
s_swap_dir (const char *path)
{
    char moved [PATH_MAX];
    S_FMT (moved, sizeof (moved), "%s.moved", s_swap_what);
    assert_int_equal (rename (s_swap_what, moved), 0);
    assert_int_equal (symlink (s_outside, s_swap_what), 0);
}

static void
test_fileops_swaps (void **unused)
{
    char err [256], path [PATH_MAX];
    fileops_change_t change;
    s_path (s_swap_target, s_outside, "secret");
    s_write (s_swap_target, "outside\n");

    //  The leaf becomes a symlink after the checks: the rename replaces
    //  the link itself, nothing is written through it
    s_path (path, s_root, "leaf");
    s_write (path, "old\n");
    fileops_put_t put = s_put_of (path, "new\n");
    fileops_test_before_rename = s_swap_leaf;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), 0);
    fileops_test_before_rename = NULL;
    assert_string_equal (s_read (s_swap_target), "outside\n");
    struct stat info;
    assert_int_equal (lstat (path, &info), 0);
    assert_true (S_ISREG (info.st_mode));
    assert_string_equal (s_read (path), "new\n");

    //  The directory becomes a symlink to outside after the walk: the
    //  write lands in the directory that was checked, never outside
    s_path (s_swap_what, s_root, "sub");
    assert_int_equal (mkdir (s_swap_what, 0755), 0);
    S_FMT (path, sizeof (path), "%s/secret", s_swap_what);
    put = s_put_of (path, "new\n");
    fileops_test_before_rename = s_swap_dir;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), 0);
    fileops_test_before_rename = NULL;
    assert_string_equal (s_read (s_swap_target), "outside\n");
    char moved [PATH_MAX];
    S_FMT (moved, sizeof (moved), "%s.moved/secret", s_swap_what);
    assert_string_equal (s_read (moved), "new\n");
    assert_int_equal (s_entries (s_outside), 1);

    //  The leaf swapped for a symlink between a dry run's check and the
    //  put: the put refuses it, nothing is written through it
    s_path (path, s_root, "kept");
    s_write (path, "old\n");
    put = s_put_of (path, "new\n");
    put.backup = true;
    assert_int_equal (fileops_put_check (&s_roots, &put, false, &change, err,
                                         sizeof (err)), 0);
    assert_true (change.content);
    fileops_change_clear (&change);
    s_swap_leaf (path);
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "symlink"));
    assert_string_equal (s_read (s_swap_target), "outside\n");
}

static void
test_fileops_not_files (void **unused)
{
    char err [256], path [PATH_MAX];
    fileops_change_t change;
    bool changed = false;
    //  A directory
    s_path (path, s_root, "adir");
    assert_int_equal (mkdir (path, 0755), 0);
    fileops_put_t put = s_put_of (path, "x");
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "is a directory"));
    assert_int_equal (fileops_absent (&s_roots, path, &changed, err,
                                      sizeof (err)), -1);
    assert_non_null (strstr (err, "is a directory"));
    char *content = NULL;
    size_t len = 0;
    char hex [SHA256_HEX];
    assert_int_equal (fileops_get (&s_roots, path, 1024, &content, &len, hex,
                                   err, sizeof (err)), -1);
    //  A file on the way where a directory should be
    char below [PATH_MAX];
    s_path (path, s_root, "plain");
    s_write (path, "x");
    S_FMT (below, sizeof (below), "%s/under", path);
    put = s_put_of (below, "x");
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "not a directory"));
    //  A fifo: refused without being opened (an open would block)
    s_path (path, s_root, "fifo");
    assert_int_equal (mkfifo (path, 0644), 0);
    put = s_put_of (path, "x");
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "not a regular file"));
    assert_int_equal (fileops_get (&s_roots, path, 1024, &content, &len, hex,
                                   err, sizeof (err)), -1);
    fileops_stat_t info;
    assert_int_equal (fileops_stat (&s_roots, path, &info, err,
                                    sizeof (err)), 0);
    assert_string_equal (info.type, "other");
}

static void
test_fileops_get_stat_absent (void **unused)
{
    char err [256], path [PATH_MAX];
    s_path (path, s_root, "data");
    char bytes [] = { 'a', 0, 'b', '\n' };
    FILE *file = fopen (path, "w");
    fwrite (bytes, 1, sizeof (bytes), file);
    fclose (file);
    char *content = NULL;
    size_t len = 0;
    char hex [SHA256_HEX], want [SHA256_HEX];
    sha256_hex (bytes, sizeof (bytes), want);
    assert_int_equal (fileops_get (&s_roots, path, 1024, &content, &len, hex,
                                   err, sizeof (err)), 0);
    assert_int_equal (len, 4);
    assert_memory_equal (content, bytes, 4);
    assert_string_equal (hex, want);
    free (content);
    //  Over the limit
    assert_int_equal (fileops_get (&s_roots, path, 3, &content, &len, hex,
                                   err, sizeof (err)), -1);
    assert_non_null (strstr (err, "larger"));

    fileops_stat_t info;
    assert_int_equal (fileops_stat (&s_roots, path, &info, err,
                                    sizeof (err)), 0);
    assert_true (info.exists);
    assert_string_equal (info.type, "file");
    assert_int_equal (info.size, 4);
    assert_string_equal (info.sha256, want);
    assert_true (info.mtime > 0);

    bool changed = false;
    assert_int_equal (fileops_absent (&s_roots, path, &changed, err,
                                      sizeof (err)), 0);
    assert_true (changed);
    assert_int_equal (access (path, F_OK), -1);
    assert_int_equal (fileops_absent (&s_roots, path, &changed, err,
                                      sizeof (err)), 0);
    assert_false (changed);
    assert_int_equal (fileops_stat (&s_roots, path, &info, err,
                                    sizeof (err)), 0);
    assert_false (info.exists);
    //  Below a missing directory: absent and not there
    S_FMT (path, sizeof (path), "%s/none/x", s_root);
    assert_int_equal (fileops_absent (&s_roots, path, &changed, err,
                                      sizeof (err)), 0);
    assert_false (changed);
    assert_int_equal (fileops_get (&s_roots, path, 1024, &content, &len, hex,
                                   err, sizeof (err)), -1);
}

static void
test_fileops_check_diff (void **unused)
{
    char err [256], path [PATH_MAX];
    s_path (path, s_root, "conf");
    s_write (path, "a\nb\nc\n");
    chmod (path, 0644);
    fileops_put_t put = s_put_of (path, "a\nB\nc\nd\n");
    put.mode = 0600;
    fileops_change_t change;
    assert_int_equal (fileops_put_check (&s_roots, &put, true, &change, err,
                                         sizeof (err)), 0);
    assert_true (change.existed);
    assert_true (change.content);
    assert_true (change.mode);
    assert_false (change.owner);
    assert_non_null (change.diff);
    char want [1024];
    S_FMT (want, sizeof (want), "--- %s\n+++ %s\n@@ -1,3 +1,4 @@\n"
              " a\n-b\n+B\n c\n+d\n", path, path);
    assert_string_equal (change.diff, want);
    fileops_change_clear (&change);
    //  Nothing was written
    assert_string_equal (s_read (path), "a\nb\nc\n");
    //  The same content: no change, no diff
    put = s_put_of (path, "a\nb\nc\n");
    assert_int_equal (fileops_put_check (&s_roots, &put, true, &change, err,
                                         sizeof (err)), 0);
    assert_false (fileops_changed (&change));
    assert_null (change.diff);
    //  Hostile paths are refused by the check as by the put
    put.path = "/etc/../etc/passwd";
    assert_int_equal (fileops_put_check (&s_roots, &put, true, &change, err,
                                         sizeof (err)), -1);
}

//  A full disk: a 64 KiB tmpfs under the root, filled up. The put fails
//  with a sentence that says so, the old file stays whole, no temporary
//  file is left. Root only (mount).
static void
test_fileops_full_disk (void **unused)
{
    if (geteuid () != 0) {
        fprintf (stderr, "    skipped: mounting a small tmpfs needs root\n");
        return;
    }
    char disk [PATH_MAX], path [PATH_MAX], filler [PATH_MAX], err [512];
    s_path (disk, s_root, "disk");
    assert_int_equal (mkdir (disk, 0755), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k")) {
        fprintf (stderr, "    skipped: cannot mount a tmpfs: %s\n",
                 strerror (errno));
        return;
    }
    s_path (path, disk, "app.conf");
    s_write (path, "old\n");
    s_path (filler, disk, "filler");
    int fd = open (filler, O_WRONLY | O_CREAT, 0600);
    assert_true (fd >= 0);
    char block [4096];
    memset (block, 'f', sizeof (block));
    while (write (fd, block, sizeof (block)) > 0)
        ;
    close (fd);
    size_t len = 256 * 1024;
    char *big = malloc (len + 1);
    memset (big, 'n', len);
    big [len] = 0;
    fileops_put_t put = s_put_of (path, big);
    fileops_change_t change;
    assert_int_equal (fileops_put (&s_roots, &put, &change, err,
                                   sizeof (err)), -1);
    assert_non_null (strstr (err, "disk is full"));
    assert_string_equal (s_read (path), "old\n");
    assert_int_equal (s_entries (disk), 2);
    free (big);
    assert_int_equal (umount (disk), 0);
}


//  ---------------------------------------------------------------------
//  The backend's actions, planned and run as the agent does

static backend_plan_t *
s_plan (const backend_context_t *context, const char *action, char *err,
        size_t err_len, ...)
{
    proto_kv_t params [8];
    size_t count = 0;
    va_list args;
    va_start (args, err_len);
    const char *key;
    while ((key = va_arg (args, const char *)) && count < 8) {
        params [count].key = (char *) key;
        params [count].value = va_arg (args, char *);
        count++;
    }
    va_end (args);
    const backend_ops_t *ops = backend_find ("file");
    assert_non_null (ops);
    return backend_plan_new (backend_action_find (ops, action), context,
                             params, count, err, err_len);
}

static const char *
s_data (const backend_outcome_t *outcome, const char *key)
{
    for (size_t index = 0; index < outcome->data_count; index++)
        if (strcmp (outcome->data [index].key, key) == 0)
            return outcome->data [index].value;
    return NULL;
}

static void
test_fileops_backend (void **unused)
{
    backend_context_t context = { .file_roots = s_root_list, .file_root_count = 1 };
    char err [512], path [PATH_MAX];
    s_path (path, s_root, "motd");
    backend_plan_t *plan = s_plan (&context, "put", err, sizeof (err),
                                   "path", path, "content", "hello\n",
                                   "mode", "0640", NULL);
    assert_non_null (plan);
    assert_int_equal (plan->run, BACKEND_RUN_INPROC);
    //  The dry run's view before it runs
    fileops_change_t change;
    assert_int_equal (fileops_plan_check (plan, true, &change, err,
                                          sizeof (err)), 0);
    assert_true (change.content);
    assert_non_null (change.diff);
    fileops_change_clear (&change);
    backend_outcome_t outcome;
    memset (&outcome, 0, sizeof (outcome));
    plan->inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "changed"), "true");
    backend_outcome_clear (&outcome);
    plan->inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "changed"), "false");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, "get", err, sizeof (err), "path", path, NULL);
    plan->inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (outcome.output, "hello\n");
    assert_string_equal (s_data (&outcome, "size"), "6");
    assert_string_equal (s_data (&outcome, "encoding"), "text");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, "stat", err, sizeof (err), "path", path, NULL);
    plan->inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "mode"), "0640");
    assert_string_equal (s_data (&outcome, "type"), "file");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, "absent", err, sizeof (err), "path", path, NULL);
    plan->inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "changed"), "true");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    //  Refused when planned: traversal, a relative path, shell characters
    assert_null (s_plan (&context, "put", err, sizeof (err), "path",
                         "/tmp/../etc/passwd", "content", "x", NULL));
    assert_non_null (strstr (err, "canonical"));
    assert_null (s_plan (&context, "stat", err, sizeof (err), "path",
                         "etc/passwd", NULL));
    assert_null (s_plan (&context, "put", err, sizeof (err), "path",
                         path, "content", "x", "mode", "999", NULL));
    assert_null (s_plan (&context, "put", err, sizeof (err), "path",
                         path, "content", "x", "owner", "$(id)", NULL));
    //  No roots: planned, but refused when run, with the reason
    backend_context_t closed = { .file_roots = NULL, .file_root_count = 0 };
    plan = s_plan (&closed, "stat", err, sizeof (err), "path", path, NULL);
    assert_non_null (plan);
    plan->inproc (plan, &outcome);
    assert_false (outcome.ok);
    assert_non_null (strstr (outcome.error, "file.roots"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_fileops_sha256),
#define S_TEST(name) cmocka_unit_test_setup_teardown (name, s_setup, \
                                                      s_teardown)
        S_TEST (test_fileops_path_rules),
        S_TEST (test_fileops_put),
        S_TEST (test_fileops_makedirs),
        S_TEST (test_fileops_symlinks),
        S_TEST (test_fileops_swaps),
        S_TEST (test_fileops_not_files),
        S_TEST (test_fileops_get_stat_absent),
        S_TEST (test_fileops_check_diff),
        S_TEST (test_fileops_full_disk),
        S_TEST (test_fileops_backend),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
