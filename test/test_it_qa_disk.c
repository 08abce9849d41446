/*  =========================================================================
    test_it_qa_disk - the real gridbroker and gridagent started on a disk
    that is already full: with a new data or state dir each refuses to
    start with a sentence that says why (they used to die of SIGBUS while
    LMDB wrote its lock file through a map of a file with no blocks); with
    a dir in use before, the broker starts and serves as it did. The disk
    is a small tmpfs, so the tests run only as root.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <sys/mount.h>

#include "lib/fixture.h"

#define S_WAIT_MS 20000         //  Deadline for anything that should happen

//  Mounts a 1 MiB tmpfs at <grid dir>/disk into DISK. Returns false (the
//  test is skipped) when this process may not.
static bool
s_mount_disk (grid_t *grid, char *disk, size_t disk_len)
{
    if (geteuid () != 0) {
        fprintf (stderr, "    skipped: mounting a small tmpfs needs root\n");
        return false;
    }
    snprintf (disk, disk_len, "%s/disk", grid->dir);
    assert_int_equal (mkdir (disk, 0700), 0);
    if (mount ("tmpfs", disk, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") != 0) {
        fprintf (stderr, "    skipped: cannot mount a tmpfs: %s\n",
                 strerror (errno));
        return false;
    }
    return true;
}

//  Writes PATH until the disk is full.
static void
s_fill_disk (const char *path)
{
    FILE *file = fopen (path, "wb");
    assert_non_null (file);
    static char chunk [4096];
    while (fwrite (chunk, 1, sizeof chunk, file) == sizeof chunk)
        ;
    fclose (file);
}

//  The processes first (fixture_teardown), then the tmpfs.
static int
s_teardown (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char disk [400];
    snprintf (disk, sizeof disk, "%s/disk", grid->dir);
    grid_stop_broker (grid, true);
    for (size_t slot = 0; slot < grid->agent_count; slot++)
        grid_stop_agent (grid, (int) slot, true);
    umount2 (disk, MNT_DETACH);
    return fixture_teardown (state);
}

static void
test_it_qa_disk_full_at_start (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char disk [400];
    if (!s_mount_disk (grid, disk, sizeof disk))
        return;
    char filler [420], data_dir [420], state_dir [420];
    snprintf (filler, sizeof filler, "%s/filler", disk);
    snprintf (data_dir, sizeof data_dir, "%s/broker", disk);
    snprintf (state_dir, sizeof state_dir, "%s/agent", disk);
    s_fill_disk (filler);

    char *out = NULL, *err = NULL;
    int rc = grid_run (grid, "gridbroker", &out, &err, S_WAIT_MS,
                       "--data-dir", data_dir, "--client", grid->client_ep,
                       "--agents", grid->agents_ep, "--publish",
                       grid->publish_ep, "--insecure", NULL);
    if (rc != 1 || !strstr (err, "No space left on device"))
        fail_msg ("gridbroker on a full disk: exit %d, said: %s", rc, err);
    free (out);
    free (err);

    rc = grid_run (grid, "gridagent", &out, &err, S_WAIT_MS, "--id",
                   "web-01", "--state-dir", state_dir, "--broker",
                   grid->agents_ep, "--publish", grid->publish_ep,
                   "--insecure", "--config", "none", NULL);
    if (rc != 1 || !strstr (err, "No space left on device"))
        fail_msg ("gridagent on a full disk: exit %d, said: %s", rc, err);
    free (out);
    free (err);

    //  Room again: both start
    assert_int_equal (unlink (filler), 0);
    const char *extra [] = {"--data-dir", data_dir, NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
}

//  A data dir in use before starts on a full disk and serves reads.
static void
test_it_qa_disk_full_restart (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char disk [400];
    if (!s_mount_disk (grid, disk, sizeof disk))
        return;
    char filler [420], data_dir [420];
    snprintf (filler, sizeof filler, "%s/filler", disk);
    snprintf (data_dir, sizeof data_dir, "%s/broker", disk);
    const char *extra [] = {"--data-dir", data_dir, "--map-size-mb", "1",
                            NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    grid_stop_broker (grid, false);
    s_fill_disk (filler);
    assert_int_equal (grid_start_broker (grid, extra), 0);
    pv_doc_t *reply = grid_call (grid, "job.list", NULL);
    fixture_data (reply);
    pv_doc_destroy (&reply);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_qa_disk_full_at_start,
                                         fixture_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_it_qa_disk_full_restart,
                                         fixture_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
