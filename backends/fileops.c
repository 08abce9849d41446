/*  =========================================================================
    fileops - safe file operations under an operator's roots

    The rules are in fileops.h. Every path is walked from its root with
    openat(O_NOFOLLOW), one segment at a time; the leaf is looked at with
    fstatat(AT_SYMLINK_NOFOLLOW) before it is opened (a device or a fifo is
    never opened), and the open file is checked to be the inode looked at.
    =========================================================================
*/
#include "fileops.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_DIFF_MAX_BYTES (64 * 1024)    //  Larger files get no diff
#define S_DIFF_MAX_LINES 1000           //  Nor files of more lines
#define S_READ_BLOCK 65536

void (*fileops_test_before_rename) (const char *path) = NULL;

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

bool
fileops_changed (const fileops_change_t *change)
{
    return change->content || change->mode || change->owner;
}

void
fileops_change_clear (fileops_change_t *change)
{
    if (!change)
        return;
    free (change->diff);
    memset (change, 0, sizeof (*change));
}

int
fileops_path_check (const char *path, char *err, size_t err_len)
{
    if (!path || path [0] != '/') {
        s_err (err, err_len, "'%s' is not an absolute path",
               path ? path : "");
        return -1;
    }
    size_t len = strlen (path);
    if (len >= PATH_MAX) {
        s_err (err, err_len, "path is too long (%zu bytes)", len);
        return -1;
    }
    for (size_t index = 0; index < len; index++)
        if ((unsigned char) path [index] < 0x20 || path [index] == 0x7f) {
            s_err (err, err_len, "path holds a control character");
            return -1;
        }
    const char *segment = path + 1;
    while (true) {
        const char *slash = strchr (segment, '/');
        size_t seg_len = slash ? (size_t) (slash - segment) : strlen (segment);
        if (seg_len == 0 && !(segment == path + 1 && !slash)) {
            s_err (err, err_len, "'%s' is not canonical (an empty segment)",
                   path);
            return -1;
        }
        if ((seg_len == 1 && segment [0] == '.')
        ||  (seg_len == 2 && segment [0] == '.' && segment [1] == '.')) {
            s_err (err, err_len, "'%s' is not canonical (a '.' or '..' "
                   "segment)", path);
            return -1;
        }
        if (seg_len > NAME_MAX) {
            s_err (err, err_len, "'%s': a segment is longer than %d bytes",
                   path, NAME_MAX);
            return -1;
        }
        if (!slash)
            break;
        segment = slash + 1;
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  Walking a path from its root

typedef struct {
    int dir_fd;                  //  The leaf's directory, or -1 (missing)
    char leaf [NAME_MAX + 1];    //  The last segment
} s_walk_t;

//  The part of PATH under one of ROOTS (without the leading '/'), or NULL.
static const char *
s_under_root (const fileops_roots_t *roots, const char *path,
              const char **root_p)
{
    for (size_t index = 0; roots && index < roots->count; index++) {
        const char *root = roots->paths [index];
        size_t len = strlen (root);
        if (strcmp (root, "/") == 0) {
            *root_p = root;
            return path + 1;
        }
        if (strncmp (path, root, len) == 0 && path [len] == '/') {
            *root_p = root;
            return path + len + 1;
        }
    }
    return NULL;
}

//  Opens the directory that holds PATH's leaf into WALK. MAKEDIRS creates
//  missing directories; MISSING_OK (a dry run or a removal) stops at the
//  first missing one with walk->dir_fd -1 and no error. Returns 0, or -1
//  with ERR.
static int
s_walk (const fileops_roots_t *roots, const char *path, bool makedirs,
        bool missing_ok, s_walk_t *walk, char *err, size_t err_len)
{
    walk->dir_fd = -1;
    walk->leaf [0] = 0;
    if (fileops_path_check (path, err, err_len))
        return -1;
    if (!roots || roots->count == 0) {
        s_err (err, err_len, "the file backend is off on this node: its "
               "config opens no root (file.roots)");
        return -1;
    }
    const char *root = NULL;
    const char *rest = s_under_root (roots, path, &root);
    if (!rest || !*rest) {
        s_err (err, err_len, "'%s' is not under a root this node opens "
               "(file.roots)", path);
        return -1;
    }
    int fd = open (root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        s_err (err, err_len, "root '%s': %s", root, strerror (errno));
        return -1;
    }
    while (true) {
        const char *slash = strchr (rest, '/');
        if (!slash)
            break;
        char segment [NAME_MAX + 1];
        snprintf (segment, sizeof (segment), "%.*s", (int) (slash - rest),
                  rest);
        int shown = (int) (slash - path);
        int next = openat (fd, segment,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0 && errno == ENOENT && makedirs && !missing_ok) {
            if (mkdirat (fd, segment, FILEOPS_DIR_MODE) && errno != EEXIST) {
                s_err (err, err_len, "cannot create directory '%.*s': %s",
                       shown, path, strerror (errno));
                close (fd);
                return -1;
            }
            next = openat (fd, segment,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0) {
            int code = errno;
            struct stat info;
            bool is_link = fstatat (fd, segment, &info,
                                    AT_SYMLINK_NOFOLLOW) == 0
                        && S_ISLNK (info.st_mode);
            if (code == ENOENT && missing_ok) {
                close (fd);
                return 0;
            }
            if (code == ELOOP || is_link)
                s_err (err, err_len, "'%.*s' is a symlink: not followed",
                       shown, path);
            else
            if (code == ENOTDIR)
                s_err (err, err_len, "'%.*s' is not a directory", shown,
                       path);
            else
            if (code == ENOENT)
                s_err (err, err_len, "directory '%.*s' does not exist "
                       "(makedirs: true creates it)", shown, path);
            else
                s_err (err, err_len, "'%.*s': %s", shown, path,
                       strerror (code));
            close (fd);
            return -1;
        }
        close (fd);
        fd = next;
        rest = slash + 1;
    }
    snprintf (walk->leaf, sizeof (walk->leaf), "%s", rest);
    walk->dir_fd = fd;
    return 0;
}

static void
s_walk_close (s_walk_t *walk)
{
    if (walk->dir_fd >= 0)
        close (walk->dir_fd);
    walk->dir_fd = -1;
}

//  Opens the regular file LEAF of DIR_FD for reading: looked at first
//  without following (a symlink, directory, device or fifo is refused and
//  never opened), then opened with O_NOFOLLOW and checked to be the same
//  inode. *INFO gets its stat. Returns the fd; -1 with errno ENOENT when
//  there is none; -1 with ERR otherwise (errno not ENOENT).
static int
s_open_regular (int dir_fd, const char *leaf, const char *path,
                struct stat *info, char *err, size_t err_len)
{
    if (fstatat (dir_fd, leaf, info, AT_SYMLINK_NOFOLLOW)) {
        int code = errno;
        if (code != ENOENT)
            s_err (err, err_len, "'%s': %s", path, strerror (code));
        errno = code;
        return -1;
    }
    if (S_ISLNK (info->st_mode)) {
        s_err (err, err_len, "'%s' is a symlink: not followed", path);
        errno = ELOOP;
        return -1;
    }
    if (S_ISDIR (info->st_mode)) {
        s_err (err, err_len, "'%s' is a directory", path);
        errno = EISDIR;
        return -1;
    }
    if (!S_ISREG (info->st_mode)) {
        s_err (err, err_len, "'%s' is not a regular file", path);
        errno = EINVAL;
        return -1;
    }
    int fd = openat (dir_fd, leaf,
                     O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat opened;
    if (fd < 0 || fstat (fd, &opened)
    ||  opened.st_dev != info->st_dev || opened.st_ino != info->st_ino
    ||  !S_ISREG (opened.st_mode)) {
        int code = fd < 0 ? errno : EAGAIN;
        if (fd >= 0)
            close (fd);
        s_err (err, err_len, "'%s' changed while it was opened%s%s", path,
               code != EAGAIN ? ": " : "",
               code != EAGAIN ? strerror (code) : "");
        errno = code == ENOENT ? EAGAIN : code;
        return -1;
    }
    *info = opened;
    return fd;
}

//  Reads FD to its end: its digest into SHA256 and, when CONTENT_P, its
//  bytes (at most MAX_LEN; more is an error) malloc'd into *CONTENT_P.
static int
s_read_fd (int fd, const char *path, size_t max_len, char **content_p,
           size_t *len_p, char *sha256, char *err, size_t err_len)
{
    sha256_t digest;
    sha256_init (&digest);
    char *content = NULL;
    size_t len = 0, size = 0;
    char block [S_READ_BLOCK];
    while (true) {
        ssize_t got = read (fd, block, sizeof (block));
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            s_err (err, err_len, "reading '%s': %s", path, strerror (errno));
            free (content);
            return -1;
        }
        if (got == 0)
            break;
        sha256_update (&digest, block, (size_t) got);
        if (content_p) {
            if (len + (size_t) got > max_len) {
                s_err (err, err_len, "'%s' is larger than %zu bytes", path,
                       max_len);
                free (content);
                return -1;
            }
            if (len + (size_t) got + 1 > size) {
                size_t grown = size ? size * 2 : S_READ_BLOCK + 1;
                while (grown < len + (size_t) got + 1)
                    grown *= 2;
                char *bigger = (char *) realloc (content, grown);
                if (!bigger) {
                    s_err (err, err_len, "out of memory");
                    free (content);
                    return -1;
                }
                content = bigger;
                size = grown;
            }
            memcpy (content + len, block, (size_t) got);
        }
        len += (size_t) got;
    }
    uint8_t raw [SHA256_BYTES];
    sha256_final (&digest, raw);
    sha256_to_hex (raw, sha256);
    if (content_p) {
        if (!content)
            content = strdup ("");
        else
            content [len] = 0;
        if (!content) {
            s_err (err, err_len, "out of memory");
            return -1;
        }
        *content_p = content;
    }
    if (len_p)
        *len_p = len;
    return 0;
}


//  ---------------------------------------------------------------------
//  Owners

static void
s_user_name (uid_t uid, char *name, size_t name_len)
{
    struct passwd entry, *found = NULL;
    char buf [4096];
    if (getpwuid_r (uid, &entry, buf, sizeof (buf), &found) == 0 && found)
        snprintf (name, name_len, "%s", found->pw_name);
    else
        snprintf (name, name_len, "%u", (unsigned) uid);
}

static void
s_group_name (gid_t gid, char *name, size_t name_len)
{
    struct group entry, *found = NULL;
    char buf [4096];
    if (getgrgid_r (gid, &entry, buf, sizeof (buf), &found) == 0 && found)
        snprintf (name, name_len, "%s", found->gr_name);
    else
        snprintf (name, name_len, "%u", (unsigned) gid);
}

//  A whole decimal id of TEXT into *ID. Returns true when it is one.
static bool
s_numeric_id (const char *text, unsigned long *id)
{
    if (!*text || strlen (text) > 10)
        return false;
    for (const char *cursor = text; *cursor; cursor++)
        if (*cursor < '0' || *cursor > '9')
            return false;
    *id = strtoul (text, NULL, 10);
    return true;
}

static int
s_resolve_user (const char *name, uid_t *uid, char *err, size_t err_len)
{
    unsigned long id = 0;
    if (s_numeric_id (name, &id)) {
        *uid = (uid_t) id;
        return 0;
    }
    struct passwd entry, *found = NULL;
    char buf [4096];
    if (getpwnam_r (name, &entry, buf, sizeof (buf), &found) || !found) {
        s_err (err, err_len, "owner '%s': no such user on this node", name);
        return -1;
    }
    *uid = found->pw_uid;
    return 0;
}

static int
s_resolve_group (const char *name, gid_t *gid, char *err, size_t err_len)
{
    unsigned long id = 0;
    if (s_numeric_id (name, &id)) {
        *gid = (gid_t) id;
        return 0;
    }
    struct group entry, *found = NULL;
    char buf [4096];
    if (getgrnam_r (name, &entry, buf, sizeof (buf), &found) || !found) {
        s_err (err, err_len, "group '%s': no such group on this node", name);
        return -1;
    }
    *gid = found->gr_gid;
    return 0;
}


//  ---------------------------------------------------------------------
//  stat, get, absent

int
fileops_stat (const fileops_roots_t *roots, const char *path,
              fileops_stat_t *info, char *err, size_t err_len)
{
    memset (info, 0, sizeof (*info));
    info->type = "";
    s_walk_t walk;
    if (s_walk (roots, path, false, true, &walk, err, err_len))
        return -1;
    if (walk.dir_fd < 0)
        return 0;               //  A directory on the way is missing
    struct stat st;
    if (fstatat (walk.dir_fd, walk.leaf, &st, AT_SYMLINK_NOFOLLOW)) {
        int code = errno;
        s_walk_close (&walk);
        if (code == ENOENT)
            return 0;
        s_err (err, err_len, "'%s': %s", path, strerror (code));
        return -1;
    }
    info->exists = true;
    info->type = S_ISREG (st.st_mode) ? "file"
               : S_ISDIR (st.st_mode) ? "directory"
               : S_ISLNK (st.st_mode) ? "symlink" : "other";
    info->size = (int64_t) st.st_size;
    info->mode = (uint32_t) (st.st_mode & 07777);
    info->uid = st.st_uid;
    info->gid = st.st_gid;
    info->mtime = (int64_t) st.st_mtime;
    s_user_name (st.st_uid, info->owner, sizeof (info->owner));
    s_group_name (st.st_gid, info->group, sizeof (info->group));
    if (S_ISREG (st.st_mode)) {
        struct stat opened;
        int fd = s_open_regular (walk.dir_fd, walk.leaf, path, &opened, err,
                                 err_len);
        int rc = fd < 0 ? -1
               : s_read_fd (fd, path, 0, NULL, NULL, info->sha256, err,
                            err_len);
        if (fd >= 0)
            close (fd);
        if (rc) {
            s_walk_close (&walk);
            return -1;
        }
    }
    s_walk_close (&walk);
    return 0;
}

int
fileops_get (const fileops_roots_t *roots, const char *path, size_t max_len,
             char **content_p, size_t *len_p, char *sha256, char *err,
             size_t err_len)
{
    *content_p = NULL;
    *len_p = 0;
    s_walk_t walk;
    if (s_walk (roots, path, false, false, &walk, err, err_len))
        return -1;
    struct stat info;
    int fd = s_open_regular (walk.dir_fd, walk.leaf, path, &info, err,
                             err_len);
    if (fd < 0 && errno == ENOENT)
        s_err (err, err_len, "'%s' does not exist", path);
    s_walk_close (&walk);
    if (fd < 0)
        return -1;
    if ((uint64_t) info.st_size > max_len) {
        close (fd);
        s_err (err, err_len, "'%s' is larger than %zu bytes", path, max_len);
        return -1;
    }
    int rc = s_read_fd (fd, path, max_len, content_p, len_p, sha256, err,
                        err_len);
    close (fd);
    return rc;
}

int
fileops_absent (const fileops_roots_t *roots, const char *path,
                bool *changed_p, char *err, size_t err_len)
{
    *changed_p = false;
    s_walk_t walk;
    if (s_walk (roots, path, false, true, &walk, err, err_len))
        return -1;
    if (walk.dir_fd < 0)
        return 0;
    struct stat info;
    if (fstatat (walk.dir_fd, walk.leaf, &info, AT_SYMLINK_NOFOLLOW)) {
        int code = errno;
        s_walk_close (&walk);
        if (code == ENOENT)
            return 0;
        s_err (err, err_len, "'%s': %s", path, strerror (code));
        return -1;
    }
    if (S_ISDIR (info.st_mode)) {
        s_walk_close (&walk);
        s_err (err, err_len, "'%s' is a directory: file.absent removes "
               "files and symlinks only", path);
        return -1;
    }
    //  A symlink is removed itself, never what it points to
    if (unlinkat (walk.dir_fd, walk.leaf, 0) && errno != ENOENT) {
        s_err (err, err_len, "cannot remove '%s': %s", path,
               strerror (errno));
        s_walk_close (&walk);
        return -1;
    }
    *changed_p = true;
    fsync (walk.dir_fd);
    s_walk_close (&walk);
    return 0;
}


//  ---------------------------------------------------------------------
//  put

//  Everything a put decided, with the target held open.
typedef struct {
    s_walk_t walk;
    int file_fd;                 //  The target, or -1 when new
    struct stat info;            //  Its stat
    uid_t uid;                   //  The owner it must have
    gid_t gid;
    mode_t mode;                 //  The mode it must have
    char *old_content;           //  For a diff, or NULL
    size_t old_len;
} s_put_state_t;

static void
s_put_state_close (s_put_state_t *state)
{
    s_walk_close (&state->walk);
    if (state->file_fd >= 0)
        close (state->file_fd);
    state->file_fd = -1;
    free (state->old_content);
    state->old_content = NULL;
}

//  Checks PUT and fills STATE and CHANGE. DRY: creates nothing (a missing
//  directory means a new file). Returns 0, or -1 with ERR.
static int
s_put_prepare (const fileops_roots_t *roots, const fileops_put_t *put,
               bool dry, bool want_old, s_put_state_t *state,
               fileops_change_t *change, char *err, size_t err_len)
{
    memset (state, 0, sizeof (*state));
    state->file_fd = -1;
    memset (change, 0, sizeof (*change));
    if (!put->content && put->len) {
        s_err (err, err_len, "no content");
        return -1;
    }
    if (put->mode < -1 || put->mode > 07777) {
        s_err (err, err_len, "mode %o is out of range", put->mode);
        return -1;
    }
    //  Names first: an unknown owner refuses the put before anything
    uid_t want_uid = geteuid ();
    gid_t want_gid = getegid ();
    if ((put->owner && s_resolve_user (put->owner, &want_uid, err, err_len))
    ||  (put->group && s_resolve_group (put->group, &want_gid, err,
                                        err_len)))
        return -1;
    sha256_hex (put->content ? put->content : "", put->len,
                change->sha256_new);
    if (s_walk (roots, put->path, put->makedirs, dry || !put->makedirs,
                &state->walk, err, err_len))
        return -1;
    if (state->walk.dir_fd < 0) {
        if (!put->makedirs) {
            s_err (err, err_len, "the directory of '%s' does not exist "
                   "(makedirs: true creates it)", put->path);
            return -1;
        }
        //  Dry run: the directories and the file would be new
        change->content = true;
        state->uid = want_uid;
        state->gid = want_gid;
        state->mode = put->mode >= 0 ? (mode_t) put->mode : FILEOPS_FILE_MODE;
        return 0;
    }
    if (strlen (state->walk.leaf) + strlen (FILEOPS_BACKUP_SUFFIX) + 1
        > NAME_MAX) {
        s_err (err, err_len, "'%s': its name is too long for a temporary "
               "or backup file beside it", put->path);
        s_put_state_close (state);
        return -1;
    }
    state->file_fd = s_open_regular (state->walk.dir_fd, state->walk.leaf,
                                     put->path, &state->info, err, err_len);
    if (state->file_fd < 0 && errno != ENOENT) {
        s_put_state_close (state);
        return -1;
    }
    change->existed = state->file_fd >= 0;
    if (change->existed) {
        if (s_read_fd (state->file_fd, put->path, S_DIFF_MAX_BYTES,
                       want_old && state->info.st_size <= S_DIFF_MAX_BYTES
                       ? &state->old_content : NULL,
                       &state->old_len, change->sha256_old, err, err_len)) {
            s_put_state_close (state);
            return -1;
        }
        mode_t old_mode = state->info.st_mode & 07777;
        state->mode = put->mode >= 0 ? (mode_t) put->mode : old_mode;
        state->uid = put->owner ? want_uid : state->info.st_uid;
        state->gid = put->group ? want_gid : state->info.st_gid;
        change->content = strcmp (change->sha256_old, change->sha256_new) != 0;
        change->mode = state->mode != old_mode;
        change->owner = state->uid != state->info.st_uid
                     || state->gid != state->info.st_gid;
    }
    else {
        state->mode = put->mode >= 0 ? (mode_t) put->mode : FILEOPS_FILE_MODE;
        state->uid = want_uid;
        state->gid = want_gid;
        change->content = true;
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  A unified diff of two small texts (one hunk, the whole file as context)

typedef struct {
    const char *start;
    size_t len;                  //  Without its newline
} s_line_t;

//  Splits TEXT into lines; returns how many (-1 when over the limit).
static int
s_lines (const char *text, size_t len, s_line_t *lines, size_t max)
{
    size_t count = 0;
    const char *cursor = text, *end = text + len;
    while (cursor < end) {
        if (count == max)
            return -1;
        const char *newline = memchr (cursor, '\n', (size_t) (end - cursor));
        size_t line_len = newline ? (size_t) (newline - cursor)
                                  : (size_t) (end - cursor);
        lines [count].start = cursor;
        lines [count].len = line_len;
        count++;
        cursor += line_len + (newline ? 1 : 0);
    }
    return (int) count;
}

static bool
s_line_equal (const s_line_t *a, const s_line_t *b)
{
    return a->len == b->len && memcmp (a->start, b->start, a->len) == 0;
}

//  Appends "<mark><line>\n" to the string *OUT (grown with realloc).
static int
s_append (char **out, size_t *used, size_t *size, char mark,
          const char *text, size_t len)
{
    if (*used + len + 3 > *size) {
        size_t grown = *size ? *size * 2 : 4096;
        while (grown < *used + len + 3)
            grown *= 2;
        char *bigger = (char *) realloc (*out, grown);
        if (!bigger)
            return -1;
        *out = bigger;
        *size = grown;
    }
    size_t at = *used;
    if (mark)
        (*out) [at++] = mark;
    memcpy (*out + at, text, len);
    at += len;
    (*out) [at++] = '\n';
    (*out) [at] = 0;
    *used = at;
    return 0;
}

//  A unified diff from OLD to NEW (text of at most S_DIFF_MAX_LINES lines
//  each), or NULL when either is binary or too long.
static char *
s_diff (const char *path, const char *old_text, size_t old_len,
        const char *new_text, size_t new_len)
{
    if (memchr (old_text, 0, old_len) || memchr (new_text, 0, new_len)
    ||  old_len > S_DIFF_MAX_BYTES || new_len > S_DIFF_MAX_BYTES)
        return NULL;
    s_line_t *a = calloc (S_DIFF_MAX_LINES, sizeof (s_line_t));
    s_line_t *b = calloc (S_DIFF_MAX_LINES, sizeof (s_line_t));
    int na = a ? s_lines (old_text, old_len, a, S_DIFF_MAX_LINES) : -1;
    int nb = b ? s_lines (new_text, new_len, b, S_DIFF_MAX_LINES) : -1;
    uint16_t *lcs = NULL;
    char *out = NULL;
    if (na < 0 || nb < 0)
        goto done;
    //  lcs[i][j]: the longest common run of a[i..] and b[j..]
    size_t width = (size_t) nb + 1;
    lcs = calloc (((size_t) na + 1) * width, sizeof (uint16_t));
    if (!lcs)
        goto done;
    for (int i = na - 1; i >= 0; i--)
        for (int j = nb - 1; j >= 0; j--)
            lcs [i * width + j] = s_line_equal (&a [i], &b [j])
                ? (uint16_t) (lcs [(i + 1) * width + j + 1] + 1)
                : lcs [(i + 1) * width + j] > lcs [i * width + j + 1]
                ? lcs [(i + 1) * width + j] : lcs [i * width + j + 1];
    size_t used = 0, size = 0;
    char header [PATH_MAX * 2 + 128];
    snprintf (header, sizeof (header), "--- %s\n+++ %s\n@@ -%d,%d +%d,%d @@",
              path, path, na ? 1 : 0, na, nb ? 1 : 0, nb);
    if (s_append (&out, &used, &size, 0, header, strlen (header)))
        goto fail;
    int i = 0, j = 0;
    while (i < na || j < nb) {
        int rc;
        if (i < na && j < nb && s_line_equal (&a [i], &b [j])) {
            rc = s_append (&out, &used, &size, ' ', a [i].start, a [i].len);
            i++, j++;
        }
        else
        if (i < na && (j == nb || lcs [(i + 1) * width + j]
                                  >= lcs [i * width + j + 1])) {
            rc = s_append (&out, &used, &size, '-', a [i].start, a [i].len);
            i++;
        }
        else {
            rc = s_append (&out, &used, &size, '+', b [j].start, b [j].len);
            j++;
        }
        if (rc)
            goto fail;
    }
    goto done;
fail:
    free (out);
    out = NULL;
done:
    free (lcs);
    free (a);
    free (b);
    return out;
}

int
fileops_put_check (const fileops_roots_t *roots, const fileops_put_t *put,
                   bool want_diff, fileops_change_t *change, char *err,
                   size_t err_len)
{
    s_put_state_t state;
    if (s_put_prepare (roots, put, true, want_diff, &state, change, err,
                       err_len))
        return -1;
    if (want_diff && change->content
    &&  (!change->existed || state.old_content))
        change->diff = s_diff (put->path,
                               state.old_content ? state.old_content : "",
                               state.old_content ? state.old_len : 0,
                               put->content ? put->content : "", put->len);
    s_put_state_close (&state);
    return 0;
}

//  Writes LEN bytes of DATA to FD.
static int
s_write_all (int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t wrote = write (fd, data, len);
        if (wrote < 0 && errno == EINTR)
            continue;
        if (wrote <= 0)
            return -1;
        data += wrote;
        len -= (size_t) wrote;
    }
    return 0;
}

//  A fresh name ".<leaf>.grid-<random>" into NAME.
static void
s_temp_name (const char *leaf, char *name, size_t name_len)
{
    uint32_t random_bits = 0;
    if (getrandom (&random_bits, sizeof (random_bits), GRND_NONBLOCK)
        != (ssize_t) sizeof (random_bits))
        random_bits = (uint32_t) getpid () ^ (uint32_t) rand ();
    snprintf (name, name_len, ".%.*s.grid-%08x", NAME_MAX - 16, leaf,
              random_bits);
}

//  Keeps the target (the inode STATE holds) as "<leaf>.bak": a hard link
//  under a temporary name, checked to be that inode, then renamed.
static int
s_backup (s_put_state_t *state, const char *path, fileops_change_t *change,
          char *err, size_t err_len)
{
    int dir_fd = state->walk.dir_fd;
    const char *leaf = state->walk.leaf;
    char temp [NAME_MAX + 1], backup [NAME_MAX + 8];
    s_temp_name (leaf, temp, sizeof (temp));
    //  The leaf's length was checked: the name fits NAME_MAX
    snprintf (backup, sizeof (backup), "%s%s", leaf, FILEOPS_BACKUP_SUFFIX);
    if (linkat (dir_fd, leaf, dir_fd, temp, 0)) {
        s_err (err, err_len, "cannot keep a backup of '%s': %s", path,
               strerror (errno));
        return -1;
    }
    struct stat linked;
    if (fstatat (dir_fd, temp, &linked, AT_SYMLINK_NOFOLLOW)
    ||  linked.st_dev != state->info.st_dev
    ||  linked.st_ino != state->info.st_ino) {
        unlinkat (dir_fd, temp, 0);
        s_err (err, err_len, "'%s' was replaced while it was written: "
               "nothing changed", path);
        return -1;
    }
    if (renameat (dir_fd, temp, dir_fd, backup)) {
        int code = errno;
        unlinkat (dir_fd, temp, 0);
        s_err (err, err_len, "cannot keep a backup of '%s' as %s: %s", path,
               backup, strerror (code));
        return -1;
    }
    snprintf (change->backup, sizeof (change->backup), "%s%s", path,
              FILEOPS_BACKUP_SUFFIX);
    return 0;
}

//  Sets mode and owner on FD as STATE asks (owner first: chown may clear
//  set-id bits).
static int
s_set_attrs (int fd, const s_put_state_t *state, bool owner, const char *path,
             char *err, size_t err_len)
{
    if (owner && fchown (fd, state->uid, state->gid)) {
        s_err (err, err_len, "cannot set the owner of '%s': %s", path,
               strerror (errno));
        return -1;
    }
    if (fchmod (fd, state->mode)) {
        s_err (err, err_len, "cannot set the mode of '%s': %s", path,
               strerror (errno));
        return -1;
    }
    return 0;
}

int
fileops_put (const fileops_roots_t *roots, const fileops_put_t *put,
             fileops_change_t *change, char *err, size_t err_len)
{
    s_put_state_t state;
    if (s_put_prepare (roots, put, false, false, &state, change, err,
                       err_len))
        return -1;
    int rc = 0;
    if (!fileops_changed (change))
        ;                       //  Nothing to do: nothing written
    else
    if (!change->content) {
        //  Only mode or owner: on the very file that was checked
        rc = s_set_attrs (state.file_fd, &state, change->owner, put->path,
                          err, err_len);
        if (rc == 0)
            fsync (state.file_fd);
    }
    else {
        int dir_fd = state.walk.dir_fd;
        char temp [NAME_MAX + 1];
        s_temp_name (state.walk.leaf, temp, sizeof (temp));
        int fd = openat (dir_fd, temp, O_WRONLY | O_CREAT | O_EXCL
                         | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
            s_err (err, err_len, "cannot create a temporary file beside "
                   "'%s': %s", put->path, strerror (errno));
            s_put_state_close (&state);
            return -1;
        }
        bool owner = state.uid != geteuid () || state.gid != getegid ();
        if (s_write_all (fd, (const char *) put->content, put->len)) {
            int code = errno;
            s_err (err, err_len, "cannot write '%s'%s: %s", put->path,
                   code == ENOSPC || code == EDQUOT
                   ? " (the disk is full; the file is unchanged)" : "",
                   strerror (code));
            rc = -1;
        }
        else
        if (s_set_attrs (fd, &state, owner, put->path, err, err_len))
            rc = -1;
        else
        if (fsync (fd)) {
            s_err (err, err_len, "cannot sync '%s': %s", put->path,
                   strerror (errno));
            rc = -1;
        }
        close (fd);
        if (rc == 0 && put->backup && change->existed)
            rc = s_backup (&state, put->path, change, err, err_len);
        if (rc == 0 && fileops_test_before_rename)
            fileops_test_before_rename (put->path);
        if (rc == 0 && renameat (dir_fd, temp, dir_fd, state.walk.leaf)) {
            s_err (err, err_len, "cannot replace '%s': %s", put->path,
                   strerror (errno));
            rc = -1;
        }
        if (rc)
            unlinkat (dir_fd, temp, 0);
        else
            fsync (dir_fd);
    }
    s_put_state_close (&state);
    return rc;
}
