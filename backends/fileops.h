/*  =========================================================================
    fileops - safe file operations under an operator's roots

    The core of the file backend, kept apart from its ops table so that a
    dry run (what a put would change) and the tests use the very same code.

    Every operation takes the roots the agent's config opens (absolute,
    canonical directories; none: every operation is refused) and a path
    that must be absolute and canonical (no "//", no trailing '/', no "."
    or ".." segment) and lie strictly under one of them. The path is
    walked from the root with openat and O_NOFOLLOW, one segment at a time:
    a symlink anywhere along it, the last segment included, is refused,
    never followed; the operation then works on the directory it holds
    open, so swapping a directory for a symlink after the walk changes
    nothing. Everything is checked before anything is written.

    put writes a temporary file in the target's directory, sets its mode
    and owner, syncs it, keeps the previous version as "<name>.bak" when
    asked (a hard link: the very inode that was there), renames it over the
    target and syncs the directory: a reader sees the old file or the new
    one, never half of one. When the content's SHA-256, the mode and the
    owner already match, nothing is written (changed false). When only the
    mode or owner differ, they are set on the file that is there.

    Owner and group are names (or numeric ids) resolved on this host.

    Threading: no state; call from any thread.
    =========================================================================
*/
#ifndef GRID_FILEOPS_H
#define GRID_FILEOPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/sha256.h"

#define FILEOPS_BACKUP_SUFFIX ".bak"     //  put's backup: beside the file
#define FILEOPS_DIR_MODE 0755            //  Directories makedirs creates
#define FILEOPS_FILE_MODE 0644           //  A new file's mode when none given

//  The roots operations may touch.
typedef struct {
    char *const *paths;          //  Absolute, canonical directories
    size_t count;                //  How many (0: every operation refused)
} fileops_roots_t;

//  What stat reports.
typedef struct {
    bool exists;
    const char *type;            //  "file", "directory", "symlink", "other"
    int64_t size;                //  Bytes
    uint32_t mode;               //  Permission bits (07777)
    uid_t uid;
    gid_t gid;
    char owner [64];             //  Name, or the id when it has none
    char group [64];
    int64_t mtime;               //  Seconds since the epoch
    char sha256 [SHA256_HEX];    //  Regular files only, else ""
} fileops_stat_t;

//  What a put asks for.
typedef struct {
    const char *path;            //  Target (see the path rules above)
    const void *content;         //  New content
    size_t len;                  //  Its length
    int mode;                    //  Permission bits, or -1: keep the file's
                                 //  (FILEOPS_FILE_MODE for a new file)
    const char *owner;           //  User name or id, or NULL: keep / ours
    const char *group;           //  Group name or id, or NULL: keep / ours
    bool backup;                 //  Keep the previous version as .bak
    bool makedirs;               //  Create missing directories (0755)
} fileops_put_t;

//  What a put changes (or would change).
typedef struct {
    bool existed;                //  The target was there
    bool content;                //  Its content differs (or it is new)
    bool mode;                   //  Its mode differs
    bool owner;                  //  Its owner or group differs
    char sha256_old [SHA256_HEX];  //  The target's digest, or ""
    char sha256_new [SHA256_HEX];  //  The content's digest
    char backup [4096];          //  put: the backup made, or ""
    char *diff;                  //  check: a unified diff for small text
                                 //  files (owned), or NULL
} fileops_change_t;

//  True when anything changes.
bool fileops_changed (const fileops_change_t *change);

//  Frees what CHANGE owns and zeroes it.
void fileops_change_clear (fileops_change_t *change);

//  Checks PATH's form (absolute, canonical). Returns 0, or -1 with a
//  sentence in ERR.
int fileops_path_check (const char *path, char *err, size_t err_len);

//  Fills *INFO for PATH (a symlink is reported, not followed). A missing
//  file is not an error (exists false). Returns 0, or -1 with ERR.
int fileops_stat (const fileops_roots_t *roots, const char *path,
                  fileops_stat_t *info, char *err, size_t err_len);

//  Reads the regular file PATH, at most MAX_LEN bytes, into *CONTENT_P
//  (malloc'd, NUL-terminated; *LEN_P bytes) and its digest into SHA256.
//  Returns 0, or -1 with ERR.
int fileops_get (const fileops_roots_t *roots, const char *path,
                 size_t max_len, char **content_p, size_t *len_p,
                 char *sha256, char *err, size_t err_len);

//  What PUT would change, without changing anything; with WANT_DIFF, a
//  unified diff in CHANGE->diff when both old and new are text of at most
//  64 KiB. Missing directories are fine when PUT->makedirs. Returns 0, or
//  -1 with ERR (the put would be refused).
int fileops_put_check (const fileops_roots_t *roots, const fileops_put_t *put,
                       bool want_diff, fileops_change_t *change, char *err,
                       size_t err_len);

//  Does PUT; CHANGE reports what changed. Returns 0, or -1 with ERR (then
//  the target is as it was).
int fileops_put (const fileops_roots_t *roots, const fileops_put_t *put,
                 fileops_change_t *change, char *err, size_t err_len);

//  Removes PATH (a file or a symlink, never followed; not a directory).
//  *CHANGED_P is false when it was not there. Returns 0, or -1 with ERR.
int fileops_absent (const fileops_roots_t *roots, const char *path,
                    bool *changed_p, char *err, size_t err_len);

//  The file backend's put (backends/file.c): what the put of PLAN (a plan
//  of file.put) would change, as fileops_put_check. For dry runs.
struct backend_plan_s;
int fileops_plan_check (const struct backend_plan_s *plan, bool want_diff,
                        fileops_change_t *change, char *err, size_t err_len);

//  Tests only: called by put between its checks and its rename, with the
//  target's path, so a test can swap things under it. NULL in programs.
extern void (*fileops_test_before_rename) (const char *path);

#endif
