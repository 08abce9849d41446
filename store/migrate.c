/*  =========================================================================
    migrate - bringing a store of an older schema to the current one

    See migrate.h. The production table is below: a release that changes
    what existing records mean raises STORE_SCHEMA_VERSION and adds the
    step that converts them, so that a store of any earlier schema walks
    up one version at a time.
    =========================================================================
*/
#include "migrate.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

//  The production table, oldest first: { from_version, what, rewrites,
//  fn }. Empty: schema 1 is the only one any release has written.
static const store_step_t s_steps[1];
static const size_t s_step_count = 0;

const store_step_t *
store_migrate_steps (size_t *n_steps)
{
    *n_steps = s_step_count;
    return s_steps;
}

int
store_migrate_plan (const store_step_t *steps, size_t n_steps,
                    uint32_t from, uint32_t to, store_migrate_plan_t *plan,
                    char *err, size_t err_len)
{
    memset (plan, 0, sizeof *plan);
    for (size_t index = 0; index < n_steps; index++) {
        if (!steps[index].fn || !steps[index].what
            || (index > 0
                && steps[index].from_version
                       <= steps[index - 1].from_version)) {
            snprintf (err, err_len, "this release's migration table is out "
                      "of order at its step %zu", index);
            return -1;
        }
    }
    size_t first = 0;
    while (first < n_steps && steps[first].from_version < from)
        first++;
    for (uint32_t version = from; version < to; version++) {
        size_t index = first + (version - from);
        if (index >= n_steps || steps[index].from_version != version) {
            if (version == from)
                snprintf (err, err_len, "this release has no migration "
                          "from schema %u", (unsigned) version);
            else
                snprintf (err, err_len, "this release has no migration "
                          "from schema %u on the way to %u",
                          (unsigned) version, (unsigned) to);
            return -1;
        }
        if (steps[index].rewrites)
            plan->rewrites = true;
    }
    plan->first = first;
    plan->count = to - from;
    return 0;
}

//  Makes the rename of a file in PATH's directory durable.
static int
s_sync_parent (const char *path)
{
    char dir[PATH_MAX];
    snprintf (dir, sizeof dir, "%s", path);
    char *slash = strrchr (dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else
    if (slash)
        *slash = '\0';
    else
        snprintf (dir, sizeof dir, ".");
    int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int rc = fsync (fd) == 0 ? 0 : errno;
    close (fd);
    return rc;
}

int
store_migrate_copy (struct MDB_env *env, const char *path, bool *kept,
                    char *err, size_t err_len)
{
    *kept = false;
    struct stat info;
    if (lstat (path, &info) == 0) {
        *kept = true;
        return 0;
    }
    if (errno != ENOENT) {
        snprintf (err, err_len, "cannot look for a copy at %s: %s", path,
                  strerror (errno));
        return -1;
    }
    char temp[PATH_MAX];
    if (snprintf (temp, sizeof temp, "%s.tmp", path) >= (int) sizeof temp) {
        snprintf (err, err_len, "%s: %s", path, strerror (ENAMETOOLONG));
        return -1;
    }
    //  A .tmp file is what an earlier try left half-written, never a copy
    unlink (temp);
    int fd = open (temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf (err, err_len, "cannot copy the store to %s before "
                  "migrating it: %s", temp, strerror (errno));
        return -1;
    }
    int rc = mdb_env_copyfd2 (env, fd, MDB_CP_COMPACT);
    if (rc == MDB_SUCCESS && fsync (fd) != 0)
        rc = errno;
    if (close (fd) != 0 && rc == MDB_SUCCESS)
        rc = errno;
    if (rc == MDB_SUCCESS && rename (temp, path) != 0)
        rc = errno;
    if (rc != MDB_SUCCESS) {
        unlink (temp);
        snprintf (err, err_len, "cannot copy the store to %s before "
                  "migrating it: %s", path, mdb_strerror (rc));
        return -1;
    }
    rc = s_sync_parent (path);
    if (rc) {
        snprintf (err, err_len, "cannot sync the directory of %s: %s", path,
                  strerror (rc));
        return -1;
    }
    return 0;
}

int
store_migrate_run (store_txn_t *txn, const store_step_t *steps,
                   const store_migrate_plan_t *plan, char *err,
                   size_t err_len)
{
    for (size_t index = 0; index < plan->count; index++) {
        const store_step_t *step = &steps[plan->first + index];
        char why[300] = "";
        int rc = step->fn (txn, why, sizeof why);
        int failed = store_txn_failed (txn);
        if (rc != 0 || failed) {
            if (!*why)
                snprintf (why, sizeof why, "%s",
                          failed ? store_strerror (failed) : "no reason given");
            snprintf (err, err_len, "the migration from schema %u to %u "
                      "(%s) failed: %s", (unsigned) step->from_version,
                      (unsigned) step->from_version + 1, step->what, why);
            return -1;
        }
    }
    return 0;
}
