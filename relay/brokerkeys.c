/*  =========================================================================
    brokerkeys - gridrelay's record of the broker's key rotations (see
    brokerkeys.h)
    =========================================================================
*/
#include "brokerkeys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "../proto/log.h"

#define S_LINE_LEN (2 * KEYS_Z85_LEN + 1)       //  "OLD NEW", no newline
#define S_PAIRS_MAX (BROKERKEYS_MAX_BYTES / (S_LINE_LEN + 1))

typedef struct {
    char old [KEYS_TEXT_SIZE];
    char next [KEYS_TEXT_SIZE];
} s_pair_t;

//  True when the LEN characters at TEXT are a public key in Z85.
static bool
s_z85_key (const char *text, size_t len)
{
    char copy [KEYS_TEXT_SIZE];
    uint8_t bytes [32];
    if (len != KEYS_Z85_LEN)
        return false;
    memcpy (copy, text, len);
    copy [len] = 0;
    return zmq_z85_decode (bytes, copy) != NULL;
}

//  Reads NAME in STATE_DIR into PAIRS (at most S_PAIRS_MAX, the last ones
//  kept), counting the lines that are not two keys in *BAD_P. Returns
//  how many pairs, 0 when there is no file, -1 when it is refused whole
//  (logged: not a regular file, too large, unreadable).
static int
s_read (const char *state_dir, const char *name, s_pair_t *pairs,
        size_t *bad_p)
{
    char path [1100];
    snprintf (path, sizeof path, "%s/%s", state_dir, name);
    *bad_p = 0;
    int fd = open (path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == ENOENT)
        return 0;
    struct stat info;
    if (fd < 0 || fstat (fd, &info) != 0 || !S_ISREG (info.st_mode)
        || info.st_size > BROKERKEYS_MAX_BYTES) {
        log_warn ("%s: %s: ignored", path,
                  fd < 0 ? strerror (errno)
                  : !S_ISREG (info.st_mode) ? "not a regular file"
                  : "larger than a record of the broker's keys can be");
        if (fd >= 0)
            close (fd);
        return -1;
    }
    char *text = (char *) malloc ((size_t) info.st_size + 1);
    ssize_t got = text ? read (fd, text, (size_t) info.st_size) : -1;
    int saved = errno;
    close (fd);
    if (got < 0) {
        log_warn ("%s: %s: ignored", path, strerror (saved));
        free (text);
        return -1;
    }
    text [got] = 0;
    size_t count = 0;
    const char *at = text, *end = text + got;
    while (at < end) {
        const char *eol = memchr (at, '\n', (size_t) (end - at));
        size_t len = eol ? (size_t) (eol - at) : (size_t) (end - at);
        if (len == S_LINE_LEN && at [KEYS_Z85_LEN] == ' '
            && s_z85_key (at, KEYS_Z85_LEN)
            && s_z85_key (at + KEYS_Z85_LEN + 1, KEYS_Z85_LEN)) {
            //  The oldest give way to the newest
            if (count == S_PAIRS_MAX) {
                memmove (pairs, pairs + 1, (count - 1) * sizeof *pairs);
                count--;
            }
            memcpy (pairs [count].old, at, KEYS_Z85_LEN);
            pairs [count].old [KEYS_Z85_LEN] = 0;
            memcpy (pairs [count].next, at + KEYS_Z85_LEN + 1, KEYS_Z85_LEN);
            pairs [count].next [KEYS_Z85_LEN] = 0;
            count++;
        }
        else
        if (len)
            (*bad_p)++;
        at += len + 1;
    }
    free (text);
    return (int) count;
}

//  Writes PAIRS (COUNT of them) to NAME in STATE_DIR whole: a temporary
//  file of mode 0600, flushed to disk, renamed over it, the directory
//  flushed. Returns 0, or -1 logged.
static int
s_write (const char *state_dir, const char *name, const s_pair_t *pairs,
         size_t count)
{
    char path [1100], tmp [1200];
    snprintf (path, sizeof path, "%s/%s", state_dir, name);
    snprintf (tmp, sizeof tmp, "%s.tmp", path);
    if (mkdir (state_dir, 0700) != 0 && errno != EEXIST) {
        log_error ("cannot make the state dir %s: %s", state_dir,
                   strerror (errno));
        return -1;
    }
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                   0600);
    int rc = fd < 0 ? -1 : 0;
    for (size_t index = 0; rc == 0 && index < count; index++) {
        char line [S_LINE_LEN + 2];
        int len = snprintf (line, sizeof line, "%s %s\n", pairs [index].old,
                            pairs [index].next);
        if (write (fd, line, (size_t) len) != len)
            rc = -1;
    }
    if (rc == 0 && fsync (fd) != 0)
        rc = -1;
    int saved = errno;
    if (fd >= 0 && close (fd) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    if (rc == 0 && rename (tmp, path) != 0) {
        rc = -1;
        saved = errno;
    }
    if (rc != 0) {
        log_error ("cannot write %s: %s", path, strerror (saved ? saved
                                                                : EIO));
        unlink (tmp);
        return -1;
    }
    int dir = open (state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
        fsync (dir);
        close (dir);
    }
    return 0;
}

int
brokerkeys_load (const char *state_dir, relay_upstream_t *upstream)
{
    if (!state_dir || !*state_dir)
        return 0;
    s_pair_t *pairs = (s_pair_t *) calloc (S_PAIRS_MAX, sizeof *pairs);
    if (!pairs)
        return 0;
    size_t bad = 0;
    int count = s_read (state_dir, BROKERKEYS_DONE, pairs, &bad);
    if (bad)
        log_warn ("%s/%s: %zu line%s not two broker keys: ignored", state_dir,
                  BROKERKEYS_DONE, bad, bad == 1 ? " is" : "s are");
    size_t mapped = 0;
    for (int index = 0; index < count; index++)
        mapped += relay_upstream_map (upstream, pairs [index].old,
                                      pairs [index].next);
    if (mapped)
        log_info ("the broker's key rotations recorded in %s/%s apply: "
                  "the relay trusts %s", state_dir, BROKERKEYS_DONE,
                  relay_upstream_key (upstream, 0));
    int taken = 0;
    count = s_read (state_dir, BROKERKEYS_NEXT, pairs, &bad);
    if (count > 0 && (bad || count != 1))
        log_warn ("%s/%s: not one line of two broker keys: ignored",
                  state_dir, BROKERKEYS_NEXT);
    else
    if (count == 0 && bad)
        log_warn ("%s/%s: not two broker keys (a truncated or damaged "
                  "file): ignored", state_dir, BROKERKEYS_NEXT);
    else
    if (count == 1
        && relay_upstream_resume (upstream, pairs [0].old, pairs [0].next)
           != 0)
        log_warn ("%s/%s: a rotation from %s to %s, keys no upstream "
                  "endpoint is given: ignored", state_dir, BROKERKEYS_NEXT,
                  pairs [0].old, pairs [0].next);
    else
    if (count == 1) {
        log_info ("the broker's key %s has a next key %s (kept in %s/%s): "
                  "tried whenever the upstream connection is lost",
                  pairs [0].old, pairs [0].next, state_dir, BROKERKEYS_NEXT);
        taken = 1;
    }
    free (pairs);
    return taken;
}

int
brokerkeys_save_next (const char *state_dir, const char *old,
                      const char *next)
{
    s_pair_t pair;
    if (!state_dir || !*state_dir || !old || !next
        || !s_z85_key (old, strlen (old)) || !s_z85_key (next, strlen (next)))
        return -1;
    memcpy (pair.old, old, KEYS_TEXT_SIZE);
    memcpy (pair.next, next, KEYS_TEXT_SIZE);
    return s_write (state_dir, BROKERKEYS_NEXT, &pair, 1);
}

int
brokerkeys_save_done (const char *state_dir, const char *old,
                      const char *next)
{
    if (!state_dir || !*state_dir || !old || !next
        || !s_z85_key (old, strlen (old)) || !s_z85_key (next, strlen (next)))
        return -1;
    s_pair_t *pairs = (s_pair_t *) calloc (S_PAIRS_MAX, sizeof *pairs);
    if (!pairs)
        return -1;
    //  What was recorded and is readable, then this one (the oldest give
    //  way when it is full)
    size_t bad = 0;
    int got = s_read (state_dir, BROKERKEYS_DONE, pairs, &bad);
    size_t count = got > 0 ? (size_t) got : 0;
    if (count == S_PAIRS_MAX) {
        memmove (pairs, pairs + 1, (count - 1) * sizeof *pairs);
        count--;
    }
    memcpy (pairs [count].old, old, KEYS_TEXT_SIZE);
    memcpy (pairs [count].next, next, KEYS_TEXT_SIZE);
    int rc = s_write (state_dir, BROKERKEYS_DONE, pairs, count + 1);
    free (pairs);
    if (rc != 0)
        return -1;
    char path [1100];
    snprintf (path, sizeof path, "%s/%s", state_dir, BROKERKEYS_NEXT);
    if (unlink (path) != 0 && errno != ENOENT) {
        log_error ("cannot remove %s: %s", path, strerror (errno));
        return -1;
    }
    return 0;
}
