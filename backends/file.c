/*  =========================================================================
    file backend - files under the roots an operator opens

    put writes content to a path (mode, owner, group, backup, makedirs),
    idempotently: when the content's SHA-256, the mode and the owner match,
    nothing is written and data says changed false. get answers a file's
    content as the output (base64 when it holds a NUL byte, data encoding
    says so) with its size and sha256. stat reports exists, type, size,
    mode, owner, group, sha256 and mtime; absent removes a file or a
    symlink (never a directory).

    Every action runs in-process in the agent's loop through fileops (the
    safety rules are there): paths must be absolute, canonical and under
    one of the agent's file.roots; with no root, every action is refused.
    Paths are "string" params with a pattern, not "path" ones: a "path"
    param is canonicalised with realpath, which follows symlinks, and this
    backend must never follow one.
    =========================================================================
*/
#include "backend.h"
#include "fileops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_PATH_PATTERN "^(/[A-Za-z0-9._+,:=@%-]+)+$"
#define S_NAME_PATTERN "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}$"
#define S_MODE_PATTERN "^[0-7]{3,4}$"
#define S_GET_MAX (8u << 20)    //  Largest file get answers
#define S_SHA_PATTERN "^[0-9a-f]{64}$"
#define S_BLOB_MAX ((int64_t) 4 << 30)  //  Largest blob a put reads

static fileops_roots_t
s_roots (const backend_plan_t *plan)
{
    fileops_roots_t roots = { NULL, 0 };
    if (plan->context) {
        roots.paths = plan->context->file_roots;
        roots.count = plan->context->file_root_count;
    }
    return roots;
}

static void
s_fail (backend_outcome_t *outcome, const char *err)
{
    outcome->ok = false;
    outcome->exit_code = 1;
    backend_outcome_error (outcome, "%s", err);
}

//  The blob SHA256 of SIZE bytes from the agent's cache into *DATA_P
//  (malloc'd). Returns 0, or -1 with ERR (*MISSING_P: not in the cache).
static int
s_blob_read (const backend_plan_t *plan, const char *sha256, int64_t size,
             char **data_p, bool *missing_p, char *err, size_t err_len)
{
    *data_p = NULL;
    *missing_p = false;
    const char *dir = plan->context ? plan->context->blob_dir : NULL;
    char path [4096];
    snprintf (path, sizeof (path), "%s/%s", dir ? dir : "", sha256);
    int fd = dir ? open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    struct stat info;
    if (fd < 0 || fstat (fd, &info) || info.st_size != size) {
        *missing_p = fd < 0;
        snprintf (err, err_len, "blob %s is not in this node's cache%s",
                  sha256, fd < 0 ? "" : " whole");
        if (fd >= 0)
            close (fd);
        return -1;
    }
    char *data = (char *) malloc ((size_t) size + 1);
    size_t done = 0;
    while (data && done < (size_t) size) {
        ssize_t got = read (fd, data + done, (size_t) size - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        done += (size_t) got;
    }
    close (fd);
    char digest [SHA256_HEX];
    if (data && done == (size_t) size)
        sha256_hex (data, done, digest);
    if (!data || done != (size_t) size || strcmp (digest, sha256) != 0) {
        free (data);
        snprintf (err, err_len, "blob %s: the cached copy does not match "
                  "its sha256", sha256);
        return -1;
    }
    data [size] = 0;
    *data_p = data;
    return 0;
}

//  The put PLAN asks for into PUT (pointers into the plan's params, or
//  into *BLOB_P, the blob read from the cache: the caller frees it).
//  Returns 0, or -1 with ERR.
static int
s_put_args (const backend_plan_t *plan, fileops_put_t *put, char **blob_p,
            bool *missing_p, char *err, size_t err_len)
{
    memset (put, 0, sizeof (*put));
    *blob_p = NULL;
    *missing_p = false;
    put->path = backend_plan_param (plan, "path");
    put->content = backend_plan_param (plan, "content");
    put->len = put->content ? strlen ((const char *) put->content) : 0;
    const char *mode = backend_plan_param (plan, "mode");
    put->mode = mode ? (int) strtol (mode, NULL, 8) : -1;
    put->owner = backend_plan_param (plan, "owner");
    put->group = backend_plan_param (plan, "group");
    const char *backup = backend_plan_param (plan, "backup");
    const char *makedirs = backend_plan_param (plan, "makedirs");
    put->backup = backup && strcmp (backup, "true") == 0;
    put->makedirs = makedirs && strcmp (makedirs, "true") == 0;
    const char *sha256 = backend_plan_param (plan, "sha256");
    const char *size = backend_plan_param (plan, "size");
    if (sha256 && size) {
        int64_t bytes = strtoll (size, NULL, 10);
        if (s_blob_read (plan, sha256, bytes, blob_p, missing_p, err,
                         err_len))
            return -1;
        put->content = *blob_p;
        put->len = (size_t) bytes;
    }
    return 0;
}

//  A check of a put whose blob is not in the cache: the content compared
//  by sha256 (no diff); mode and owner as the put would set them
static int
s_check_by_digest (const backend_plan_t *plan, fileops_put_t *put,
                   fileops_change_t *change, char *err, size_t err_len)
{
    static const char empty [1] = "";
    put->content = empty;
    put->len = 0;
    fileops_roots_t roots = s_roots (plan);
    if (fileops_put_check (&roots, put, false, change, err, err_len))
        return -1;
    snprintf (change->sha256_new, sizeof (change->sha256_new), "%s",
              backend_plan_param (plan, "sha256"));
    change->content = strcmp (change->sha256_old, change->sha256_new) != 0;
    return 0;
}

int
fileops_plan_check (const backend_plan_t *plan, bool want_diff,
                        fileops_change_t *change, char *err, size_t err_len)
{
    fileops_put_t put;
    char *blob = NULL;
    bool missing = false;
    memset (change, 0, sizeof (*change));
    if (s_put_args (plan, &put, &blob, &missing, err, err_len))
        return missing ? s_check_by_digest (plan, &put, change, err, err_len)
                       : -1;
    fileops_roots_t roots = s_roots (plan);
    int rc = fileops_put_check (&roots, &put, want_diff, change, err,
                                err_len);
    free (blob);
    return rc;
}

//  "content, mode" of what CHANGE changes into BUF.
static void
s_what (const fileops_change_t *change, char *buf, size_t buf_len)
{
    snprintf (buf, buf_len, "%s%s%s%s%s",
              change->content ? "content" : "",
              change->content && (change->mode || change->owner) ? ", " : "",
              change->mode ? "mode" : "",
              change->mode && change->owner ? ", " : "",
              change->owner ? "owner" : "");
}

static void
s_put (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    fileops_put_t put;
    char *blob = NULL;
    bool missing = false;
    fileops_roots_t roots = s_roots (plan);
    fileops_change_t change;
    char err [1024];
    if (s_put_args (plan, &put, &blob, &missing, err, sizeof (err))
    ||  fileops_put (&roots, &put, &change, err, sizeof (err))) {
        s_fail (outcome, err);
        free (blob);
        return;
    }
    free (blob);
    bool changed = fileops_changed (&change);
    outcome->ok = true;
    outcome->exit_code = 0;
    backend_outcome_data (outcome, "changed", changed ? "true" : "false");
    backend_outcome_data (outcome, "sha256", change.sha256_new);
    backend_outcome_data_int (outcome, "size", (int64_t) put.len);
    if (change.backup [0])
        backend_outcome_data (outcome, "backup", change.backup);
    if (changed) {
        char what [64];
        s_what (&change, what, sizeof (what));
        backend_outcome_output (outcome, "%s %s (%s)", put.path,
                                change.existed ? "changed" : "created", what);
    }
    else
        backend_outcome_output (outcome, "%s unchanged", put.path);
    fileops_change_clear (&change);
}

//  Base64 of LEN bytes at DATA (malloc'd), or NULL.
static char *
s_base64 (const unsigned char *data, size_t len)
{
    static const char digits [] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = (char *) malloc ((len + 2) / 3 * 4 + 1);
    if (!out)
        return NULL;
    size_t at = 0;
    for (size_t index = 0; index < len; index += 3) {
        uint32_t bits = (uint32_t) data [index] << 16;
        if (index + 1 < len)
            bits |= (uint32_t) data [index + 1] << 8;
        if (index + 2 < len)
            bits |= data [index + 2];
        out [at++] = digits [(bits >> 18) & 63];
        out [at++] = digits [(bits >> 12) & 63];
        out [at++] = index + 1 < len ? digits [(bits >> 6) & 63] : '=';
        out [at++] = index + 2 < len ? digits [bits & 63] : '=';
    }
    out [at] = 0;
    return out;
}

static void
s_get (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    fileops_roots_t roots = s_roots (plan);
    char *content = NULL;
    size_t len = 0;
    char sha256 [SHA256_HEX];
    char err [1024];
    if (fileops_get (&roots, backend_plan_param (plan, "path"), S_GET_MAX,
                     &content, &len, sha256, err, sizeof (err))) {
        s_fail (outcome, err);
        return;
    }
    bool binary = memchr (content, 0, len) != NULL;
    if (binary) {
        char *encoded = s_base64 ((const unsigned char *) content, len);
        free (content);
        content = encoded;
        if (!content) {
            s_fail (outcome, "out of memory");
            return;
        }
    }
    outcome->ok = true;
    outcome->exit_code = 0;
    free (outcome->output);
    outcome->output = content;
    backend_outcome_data_int (outcome, "size", (int64_t) len);
    backend_outcome_data (outcome, "sha256", sha256);
    backend_outcome_data (outcome, "encoding", binary ? "base64" : "text");
}

static void
s_stat (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    fileops_roots_t roots = s_roots (plan);
    fileops_stat_t info;
    char err [1024];
    const char *path = backend_plan_param (plan, "path");
    if (fileops_stat (&roots, path, &info, err, sizeof (err))) {
        s_fail (outcome, err);
        return;
    }
    outcome->ok = true;
    outcome->exit_code = 0;
    backend_outcome_data (outcome, "exists", info.exists ? "true" : "false");
    if (!info.exists) {
        backend_outcome_output (outcome, "%s does not exist", path);
        return;
    }
    char mode [8];
    snprintf (mode, sizeof (mode), "%04o", (unsigned) info.mode);
    backend_outcome_data (outcome, "type", info.type);
    backend_outcome_data_int (outcome, "size", info.size);
    backend_outcome_data (outcome, "mode", mode);
    backend_outcome_data (outcome, "owner", info.owner);
    backend_outcome_data (outcome, "group", info.group);
    backend_outcome_data_int (outcome, "mtime", info.mtime);
    if (info.sha256 [0])
        backend_outcome_data (outcome, "sha256", info.sha256);
    backend_outcome_output (outcome, "%s: %s, %lld bytes, mode %s, %s:%s",
                            path, info.type, (long long) info.size, mode,
                            info.owner, info.group);
}

static void
s_absent (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    fileops_roots_t roots = s_roots (plan);
    bool changed = false;
    char err [1024];
    const char *path = backend_plan_param (plan, "path");
    if (fileops_absent (&roots, path, &changed, err, sizeof (err))) {
        s_fail (outcome, err);
        return;
    }
    outcome->ok = true;
    outcome->exit_code = 0;
    backend_outcome_data (outcome, "changed", changed ? "true" : "false");
    backend_outcome_output (outcome, "%s %s", path,
                            changed ? "removed" : "was not there");
}

//  The check of put: what would change (content, mode, owner), with a
//  unified diff when both old and new are small texts
static void
s_put_check (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    fileops_change_t change;
    char err [1024];
    if (fileops_plan_check (plan, true, &change, err, sizeof (err))) {
        s_fail (outcome, err);
        return;
    }
    const char *path = backend_plan_param (plan, "path");
    char what [64], current [128], desired [128];
    s_what (&change, what, sizeof (what));
    if (!change.existed)
        snprintf (current, sizeof (current), "absent");
    else
        snprintf (current, sizeof (current), "sha256 %.12s", change.sha256_old);
    if (fileops_changed (&change))
        snprintf (desired, sizeof (desired), "sha256 %.12s (%s)",
                  change.sha256_new, what);
    else
        snprintf (desired, sizeof (desired), "sha256 %.12s",
                  change.sha256_new);
    backend_check_verdict (outcome, fileops_changed (&change), current,
                           desired);
    backend_outcome_data (outcome, "path", path);
    backend_outcome_data (outcome, "content",
                          change.content ? "true" : "false");
    backend_outcome_data (outcome, "mode", change.mode ? "true" : "false");
    backend_outcome_data (outcome, "owner", change.owner ? "true" : "false");
    if (change.diff) {
        size_t len = strlen (change.diff);
        if (len > BACKEND_CHECK_MAX_DIFF) {
            //  Cut at a line end, and say so
            size_t cut = BACKEND_CHECK_MAX_DIFF - 64;
            while (cut > 0 && change.diff [cut - 1] != '\n')
                cut--;
            snprintf (change.diff + cut, len + 1 - cut,
                      "(diff cut at %u bytes)\n",
                      (unsigned) BACKEND_CHECK_MAX_DIFF);
        }
        backend_outcome_data (outcome, "diff", change.diff);
    }
    else
    if (change.content && change.existed)
        backend_outcome_data (outcome, "diff", "(no diff: binary content "
                              "or over 64 KiB)");
    fileops_change_clear (&change);
}

//  The check of absent: whether the path is there
static void
s_absent_check (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    fileops_roots_t roots = s_roots (plan);
    fileops_stat_t info;
    char err [1024];
    const char *path = backend_plan_param (plan, "path");
    if (fileops_stat (&roots, path, &info, err, sizeof (err))) {
        s_fail (outcome, err);
        return;
    }
    if (info.exists && strcmp (info.type, "directory") == 0) {
        s_fail (outcome, "is a directory: absent never removes one");
        return;
    }
    char current [96];
    snprintf (current, sizeof (current), "%s", info.exists ? info.type
                                                           : "absent");
    backend_check_verdict (outcome, info.exists, current, "absent");
    backend_outcome_data (outcome, "path", path);
}

//  Every action: the path's form is checked when the command comes, so a
//  hostile one is refused before it is queued.
static int
s_plan_path (backend_plan_t *plan, backend_inproc_fn *inproc, char *err,
             size_t err_len)
{
    if (fileops_path_check (backend_plan_param (plan, "path"), err, err_len))
        return -1;
    plan->run = BACKEND_RUN_INPROC;
    plan->inproc = inproc;
    return 0;
}

//  Either content or a blob (sha256 and size), never both
static int
s_put_source (backend_plan_t *plan, char *err, size_t err_len)
{
    bool content = backend_plan_param (plan, "content") != NULL;
    bool sha256 = backend_plan_param (plan, "sha256") != NULL;
    bool size = backend_plan_param (plan, "size") != NULL;
    if (content == sha256 || sha256 != size) {
        snprintf (err, err_len, "file.put takes content, or sha256 and size "
                  "(a blob uploaded to the broker), not both");
        return -1;
    }
    return 0;
}

static int
s_plan_put (backend_plan_t *plan, char *err, size_t err_len)
{
    if (s_put_source (plan, err, err_len))
        return -1;
    return s_plan_path (plan, s_put, err, err_len);
}

static int
s_check_put (backend_plan_t *plan, char *err, size_t err_len)
{
    if (s_put_source (plan, err, err_len))
        return -1;
    return s_plan_path (plan, s_put_check, err, err_len);
}

static int
s_check_absent (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan_path (plan, s_absent_check, err, err_len);
}

static int
s_plan_get (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan_path (plan, s_get, err, err_len);
}

static int
s_plan_stat (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan_path (plan, s_stat, err, err_len);
}

static int
s_plan_absent (backend_plan_t *plan, char *err, size_t err_len)
{
    return s_plan_path (plan, s_absent, err, err_len);
}

#define S_PATH_PARAM \
    { .name = "path", .type = BACKEND_TYPE_STRING, .required = true, \
      .pattern = S_PATH_PATTERN, \
      .help = "an absolute, canonical path under one of the node's " \
              "file.roots" }

static const backend_param_t s_put_params [] = {
    S_PATH_PARAM,
    { .name = "content", .type = BACKEND_TYPE_TEXT,
      .help = "the file's new content (text, at most 4096 bytes); or "
              "sha256 and size" },
    { .name = "sha256", .type = BACKEND_TYPE_STRING,
      .pattern = S_SHA_PATTERN,
      .help = "the content: a blob uploaded to the broker (gridcli file "
              "upload), fetched by the node once and cached" },
    { .name = "size", .type = BACKEND_TYPE_INT, .min_value = 0,
      .max_value = S_BLOB_MAX, .help = "the blob's size in bytes" },
    { .name = "mode", .type = BACKEND_TYPE_STRING, .pattern = S_MODE_PATTERN,
      .help = "permission bits in octal, e.g. 0644 (default: keep the "
              "file's, 0644 for a new one)" },
    { .name = "owner", .type = BACKEND_TYPE_STRING, .pattern = S_NAME_PATTERN,
      .help = "user name or id, resolved on the node (default: keep the "
              "file's, the agent's for a new one)" },
    { .name = "group", .type = BACKEND_TYPE_STRING, .pattern = S_NAME_PATTERN,
      .help = "group name or id, resolved on the node (default: keep the "
              "file's, the agent's for a new one)" },
    { .name = "backup", .type = BACKEND_TYPE_BOOL, .default_value = "false",
      .help = "keep the previous version beside it as <path>.bak" },
    { .name = "makedirs", .type = BACKEND_TYPE_BOOL, .default_value = "false",
      .help = "create missing directories (mode 0755) under the root" },
};

static const backend_param_t s_path_params [] = {
    S_PATH_PARAM,
};

#define S_PARAMS(list) list, sizeof (list) / sizeof (list [0])

static const backend_action_t s_actions [] = {
    { "put", true, "write content to a file atomically, unless it already "
      "matches (sha256, mode, owner)", S_PARAMS (s_put_params), s_plan_put,
      .idempotent = true, .check = s_check_put },
    { "get", false, "a file's content as the output, with its size and "
      "sha256", S_PARAMS (s_path_params), s_plan_get, .idempotent = false },
    { "stat", false, "whether a file exists, its type, size, mode, owner, "
      "sha256 and mtime", S_PARAMS (s_path_params), s_plan_stat,
      .idempotent = false },
    { "absent", true, "remove a file or symlink (never a directory)",
      S_PARAMS (s_path_params), s_plan_absent, .idempotent = true,
      .check = s_check_absent },
};

const backend_ops_t backend_file_ops = {
    "file", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.1"
};
