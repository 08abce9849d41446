/*  =========================================================================
    test_orphans - process group records and the start-up stop
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../agent/orphans.h"

//  A child in a process group of its own that sleeps until killed; with
//  HELPER it also forks one that does the same. Returns its pid (= pgid).
static pid_t
s_spawn_group (bool helper)
{
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        setpgid (0, 0);
        if (helper && fork () == 0)
            for (;;)
                pause ();
        for (;;)
            pause ();
    }
    setpgid (pid, pid);
    return pid;
}

static void
s_write (const char *path, const char *text)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
}

static void
test_orphans_record_and_stop (void **state)
{
    char dir [] = "/tmp/test-orphans-XXXXXX";
    assert_non_null (mkdtemp (dir));
    pid_t pgid = s_spawn_group (false);
    assert_int_equal (orphans_record (dir, pgid), 0);
    char path [256];
    snprintf (path, sizeof path, "%s/%d", dir, (int) pgid);
    assert_int_equal (access (path, F_OK), 0);

    char report [64];
    assert_int_equal (orphans_stop (dir, 2000, report, sizeof report), 1);
    char expect [32];
    snprintf (expect, sizeof expect, "%d", (int) pgid);
    assert_string_equal (report, expect);
    int status = 0;
    assert_int_equal (waitpid (pgid, &status, 0), pgid);
    assert_true (WIFSIGNALED (status));
    assert_int_equal (WTERMSIG (status), SIGTERM);
    //  The record is gone, and a second start finds nothing
    assert_int_equal (access (path, F_OK), -1);
    assert_int_equal (orphans_stop (dir, 2000, report, sizeof report), 0);
    assert_string_equal (report, "");
    rmdir (dir);
}

static void
test_orphans_leaderless_group_is_stopped (void **state)
{
    char dir [] = "/tmp/test-orphans-XXXXXX";
    assert_non_null (mkdtemp (dir));
    //  A leader that forks a helper, then dies: the helper keeps the group
    pid_t pgid = s_spawn_group (true);
    assert_int_equal (orphans_record (dir, pgid), 0);
    zclock_sleep (50);
    kill (pgid, SIGKILL);
    assert_int_equal (waitpid (pgid, NULL, 0), pgid);
    assert_int_equal (kill (-pgid, 0), 0);
    assert_true (orphans_group_running (pgid));
    assert_int_equal (orphans_stop (dir, 2000, NULL, 0), 1);
    assert_false (orphans_group_running (pgid));
    rmdir (dir);
}

static void
test_orphans_foreign_groups_are_never_touched (void **state)
{
    char dir [] = "/tmp/test-orphans-XXXXXX";
    assert_non_null (mkdtemp (dir));
    pid_t pgid = s_spawn_group (false);
    char path [256], text [128], boot [64] = "";
    FILE *file = fopen ("/proc/sys/kernel/random/boot_id", "r");
    assert_non_null (file);
    assert_non_null (fgets (boot, sizeof boot, file));
    fclose (file);
    boot [strcspn (boot, "\n")] = 0;
    uint64_t start = 0;
    assert_int_equal (orphans_proc_stat (pgid, NULL, NULL, &start), 0);

    //  The same id with another start time: a reused id
    snprintf (path, sizeof path, "%s/%d", dir, (int) pgid);
    snprintf (text, sizeof text, "%s %llu\n", boot,
              (unsigned long long) start - 1);
    s_write (path, text);
    assert_int_equal (orphans_stop (dir, 100, NULL, 0), 0);
    assert_true (orphans_group_running (pgid));
    assert_int_equal (access (path, F_OK), -1);

    //  Another boot
    snprintf (text, sizeof text, "00000000-0000-0000-0000-000000000000 %llu\n",
              (unsigned long long) start);
    s_write (path, text);
    assert_int_equal (orphans_stop (dir, 100, NULL, 0), 0);
    assert_true (orphans_group_running (pgid));

    //  Garbage and stray names are dropped without harm
    s_write (path, "not a record\n");
    snprintf (path, sizeof path, "%s/stray", dir);
    s_write (path, "x");
    assert_int_equal (orphans_stop (dir, 100, NULL, 0), 0);
    assert_true (orphans_group_running (pgid));
    unlink (path);

    kill (pgid, SIGKILL);
    waitpid (pgid, NULL, 0);
    rmdir (dir);
    //  A missing directory is nothing to do
    assert_int_equal (orphans_stop (dir, 100, NULL, 0), 0);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_orphans_record_and_stop),
        cmocka_unit_test (test_orphans_leaderless_group_is_stopped),
        cmocka_unit_test (test_orphans_foreign_groups_are_never_touched),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
