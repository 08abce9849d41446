/*  =========================================================================
    keynext - a key pair's next pair on disk (see keynext.h)
    =========================================================================
*/
#include "keynext.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "keys.h"

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

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

int
keynext_paths (const char *key_file, keynext_paths_t *paths)
{
    size_t len = strlen (key_file);
    size_t suffix = strlen ("_secret");
    if (len > suffix && strcmp (key_file + len - suffix, "_secret") == 0)
        len -= suffix;
    if (len + 16 > sizeof paths->pub)
        return -1;
    char *names [4] = {paths->pub, paths->secret, paths->next_pub,
                       paths->next_secret};
    static const char *const suffixes [4] = {"", "_secret", ".next",
                                             ".next_secret"};
    for (int index = 0; index < 4; index++) {
        memcpy (names [index], key_file, len);
        strcpy (names [index] + len, suffixes [index]);
    }
    return 0;
}

//  Flushes PATH (a file just written, or a directory after a rename).
static void
s_sync (const char *path)
{
    int fd = open (path, O_RDONLY);
    if (fd >= 0) {
        fsync (fd);
        close (fd);
    }
}

//  The directory of PATH into BUF.
static const char *
s_dir (const char *path, char *buf, size_t buf_len)
{
    const char *slash = strrchr (path, '/');
    if (!slash)
        snprintf (buf, buf_len, ".");
    else
        snprintf (buf, buf_len, "%.*s", (int) (slash == path ? 1
                                                 : slash - path), path);
    return buf;
}

int
keynext_write (const char *key_file, char *public_txt, char *err,
                  size_t err_len)
{
    zcert_t *cert = zcert_new ();
    if (!cert) {
        s_err (err, err_len, "cannot make a key pair");
        return -1;
    }
    int rc = keynext_write_pair (key_file, cert, err, err_len);
    if (rc == 0)
        snprintf (public_txt, KEYS_TEXT_SIZE, "%s", zcert_public_txt (cert));
    zcert_destroy (&cert);
    return rc;
}

int
keynext_write_pair (const char *key_file, zcert_t *cert, char *err,
                    size_t err_len)
{
    keynext_paths_t paths;
    if (keynext_paths (key_file, &paths) != 0) {
        s_err (err, err_len, "%s: path too long", key_file);
        return -1;
    }
    char pub_tmp [1100], secret_tmp [1100];
    snprintf (pub_tmp, sizeof pub_tmp, "%s.tmp", paths.next_pub);
    snprintf (secret_tmp, sizeof secret_tmp, "%s.tmp", paths.next_secret);
    unlink (pub_tmp);
    unlink (secret_tmp);
    //  The secret file never exists with a looser mode, not even briefly
    mode_t old_mask = umask (077);
    int rc = zcert_save_secret (cert, secret_tmp);
    umask (old_mask);
    const char *failed = secret_tmp;
    if (rc == 0)
        rc = chmod (secret_tmp, 0600);
    if (rc == 0) {
        failed = pub_tmp;
        rc = zcert_save_public (cert, pub_tmp);
        if (rc == 0)
            rc = chmod (pub_tmp, 0644);
    }
    if (rc == 0) {
        s_sync (pub_tmp);
        s_sync (secret_tmp);
        //  The public file first: the secret one says the pair is whole
        failed = paths.next_pub;
        rc = rename (pub_tmp, paths.next_pub);
        if (rc == 0) {
            failed = paths.next_secret;
            rc = rename (secret_tmp, paths.next_secret);
        }
    }
    if (rc != 0) {
        s_err (err, err_len, "cannot write %s: %s", failed, strerror (errno));
        unlink (pub_tmp);
        unlink (secret_tmp);
    }
    else {
        char dir [1024];
        s_sync (s_dir (paths.pub, dir, sizeof dir));
    }
    return rc == 0 ? 0 : -1;
}

zcert_t *
keynext_load (const char *key_file, char *err, size_t err_len)
{
    if (err_len)
        *err = 0;
    keynext_paths_t paths;
    if (keynext_paths (key_file, &paths) != 0
        || access (paths.next_secret, F_OK) != 0)
        return NULL;
    char why [1024];
    zcert_t *cert = keys_load_pair (paths.next_secret, why, sizeof why);
    if (!cert)
        s_err (err, err_len, "the next key pair cannot be used: %s", why);
    return cert;
}

int
keynext_commit (const char *key_file, char *err, size_t err_len)
{
    keynext_paths_t paths;
    if (keynext_paths (key_file, &paths) != 0) {
        s_err (err, err_len, "%s: path too long", key_file);
        return -1;
    }
    if (rename (paths.next_secret, paths.secret) != 0) {
        s_err (err, err_len, "cannot rename %s to %s: %s", paths.next_secret,
               paths.secret, strerror (errno));
        return -1;
    }
    if (rename (paths.next_pub, paths.pub) != 0 && errno != ENOENT) {
        s_err (err, err_len, "cannot rename %s to %s: %s", paths.next_pub,
               paths.pub, strerror (errno));
        return -1;
    }
    char dir [1024];
    s_sync (s_dir (paths.pub, dir, sizeof dir));
    return 0;
}

int
keynext_drop (const char *key_file)
{
    keynext_paths_t paths;
    if (keynext_paths (key_file, &paths) != 0)
        return -1;
    int rc = unlink (paths.next_secret);
    unlink (paths.next_pub);
    return rc == 0 || errno == ENOENT ? 0 : -1;
}

//  The public key in the key file PATH (public or secret) into OUT.
static int
s_public_of (const char *path, char *out)
{
    char why [256];
    return access (path, R_OK) == 0
           && keys_read_public (path, out, why, sizeof why) == 0 ? 0 : -1;
}

int
keynext_recover (const char *key_file, char *err, size_t err_len)
{
    keynext_paths_t paths;
    if (keynext_paths (key_file, &paths) != 0
        || access (paths.next_pub, F_OK) != 0
        || access (paths.next_secret, F_OK) == 0)
        return 0;
    char current [KEYS_TEXT_SIZE], next [KEYS_TEXT_SIZE];
    if (s_public_of (paths.secret, current) == 0
        && s_public_of (paths.next_pub, next) == 0
        && strcmp (current, next) == 0) {
        //  The commit renamed the secret file, not yet the public one
        if (rename (paths.next_pub, paths.pub) != 0) {
            s_err (err, err_len, "cannot rename %s to %s: %s", paths.next_pub,
                   paths.pub, strerror (errno));
            return -1;
        }
        return 1;
    }
    //  Its secret file was never written: the pair was not whole
    if (unlink (paths.next_pub) != 0) {
        s_err (err, err_len, "cannot remove %s: %s", paths.next_pub,
               strerror (errno));
        return -1;
    }
    return 1;
}

int64_t
keynext_age_ms (const char *key_file)
{
    keynext_paths_t paths;
    struct stat info;
    if (keynext_paths (key_file, &paths) != 0
        || stat (paths.secret, &info) != 0)
        return -1;
    int64_t written_ms = (int64_t) info.st_mtim.tv_sec * 1000
                         + info.st_mtim.tv_nsec / 1000000;
    int64_t now_ms = zclock_time ();
    return now_ms > written_ms ? now_ms - written_ms : 0;
}

