/*  =========================================================================
    envcopy - a whole, durable single-file copy of an LMDB environment

    See envcopy.h.
    =========================================================================
*/
#include "envcopy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
envcopy_write (struct MDB_env *env, const char *path, bool *kept,
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
