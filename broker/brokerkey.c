/*  =========================================================================
    brokerkey - the rotation of the broker's own key pair (brokerkey.h)
    =========================================================================
*/
#include "brokerkey.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "../proto/keynext.h"
#include "../proto/log.h"

struct _brokerkey_t {
    char *key_file;              //  The broker's pair, NULL when insecure
    char next [KEYS_TEXT_SIZE];  //  The next public key, "" when none
    int64_t started_ms;          //  Wall
    int64_t deadline_ms;         //  Wall
    zhashx_t *acked;             //  Node id -> "1": has the next key
    zhashx_t *relays;            //  Relay key -> "1": has the next key
    uint64_t retired;
};

static void
s_err (char *err, size_t err_len, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  P.next_deadline of the broker's pair into PATH.
static int
s_deadline_path (const brokerkey_t *self, char *path, size_t path_len)
{
    keynext_paths_t paths;
    if (keynext_paths (self->key_file, &paths) != 0)
        return -1;
    return snprintf (path, path_len, "%s_deadline", paths.next_pub)
                   < (int) path_len ? 0 : -1;
}

//  Reads the rotation under way, if any.
static int
s_load (brokerkey_t *self, char *err, size_t err_len)
{
    char why [1024] = "";
    zcert_t *next = keynext_load (self->key_file, why, sizeof why);
    if (!next) {
        if (*why) {
            s_err (err, err_len, "%s", why);
            return -1;
        }
        return 0;
    }
    snprintf (self->next, sizeof self->next, "%s", zcert_public_txt (next));
    zcert_destroy (&next);
    char path [1100];
    FILE *file = s_deadline_path (self, path, sizeof path) == 0
                     ? fopen (path, "r") : NULL;
    int64_t started = 0, deadline = 0;
    if (!file || fscanf (file, "%" SCNd64 " %" SCNd64, &started, &deadline)
                     != 2) {
        //  Cut short before it was written whole: a day from now
        started = zclock_time ();
        deadline = started + BROKERKEY_DEADLINE_MS;
    }
    if (file)
        fclose (file);
    self->started_ms = started;
    self->deadline_ms = deadline;
    log_warn ("the rotation of the broker's key goes on: next key %s, the "
              "old key is retired at the latest %" PRId64 " s from now",
              self->next, (deadline - zclock_time ()) / 1000);
    return 0;
}

brokerkey_t *
brokerkey_new (const char *key_file, char *err, size_t err_len)
{
    brokerkey_t *self = (brokerkey_t *) zmalloc (sizeof *self);
    self->acked = zhashx_new ();
    self->relays = zhashx_new ();
    if (key_file) {
        self->key_file = strdup (key_file);
        char why [1024];
        int rc = keynext_recover (key_file, why, sizeof why);
        if (rc < 0 || s_load (self, why, sizeof why) != 0) {
            s_err (err, err_len, "the broker's key rotation: %s", why);
            brokerkey_destroy (&self);
            return NULL;
        }
        if (rc == 1)
            log_warn ("the broker's key: finished a rotation cut short");
    }
    return self;
}

void
brokerkey_destroy (brokerkey_t **self_p)
{
    brokerkey_t *self = *self_p;
    if (!self)
        return;
    zhashx_destroy (&self->acked);
    zhashx_destroy (&self->relays);
    free (self->key_file);
    free (self);
    *self_p = NULL;
}

int
brokerkey_start (brokerkey_t *self, int64_t now_wall_ms,
                 int64_t deadline_wall_ms, char *err, size_t err_len)
{
    if (!self->key_file) {
        s_err (err, err_len, "this broker runs insecure: it has no key to "
               "rotate");
        return -1;
    }
    if (*self->next) {
        s_err (err, err_len, "a rotation of the broker's key runs already "
               "(next key %s, retired at the latest in %" PRId64 " s): see "
               "gridcli key rotate-broker --status", self->next,
               (self->deadline_ms - now_wall_ms) / 1000);
        return -1;
    }
    //  The deadline first: a next pair without it gets a day
    char path [1100], tmp [1200];
    if (s_deadline_path (self, path, sizeof path) != 0) {
        s_err (err, err_len, "%s: path too long", self->key_file);
        return -1;
    }
    snprintf (tmp, sizeof tmp, "%s.tmp", path);
    FILE *file = fopen (tmp, "w");
    int rc = file ? 0 : -1;
    if (file) {
        if (fprintf (file, "%" PRId64 " %" PRId64 "\n", now_wall_ms,
                     deadline_wall_ms) < 0
            || fflush (file) != 0 || fsync (fileno (file)) != 0)
            rc = -1;
        if (fclose (file) != 0)
            rc = -1;
    }
    if (rc == 0)
        rc = rename (tmp, path);
    if (rc != 0) {
        s_err (err, err_len, "cannot write %s: %s", path, strerror (errno));
        unlink (tmp);
        return -1;
    }
    char public_txt [KEYS_TEXT_SIZE];
    if (keynext_write (self->key_file, public_txt, err, err_len) != 0) {
        unlink (path);
        return -1;
    }
    snprintf (self->next, sizeof self->next, "%s", public_txt);
    self->started_ms = now_wall_ms;
    self->deadline_ms = deadline_wall_ms;
    zhashx_purge (self->acked);
    zhashx_purge (self->relays);
    return 0;
}

const char *
brokerkey_next (const brokerkey_t *self)
{
    return *self->next ? self->next : NULL;
}

int64_t
brokerkey_started_ms (const brokerkey_t *self)
{
    return self->started_ms;
}

int64_t
brokerkey_deadline_ms (const brokerkey_t *self)
{
    return self->deadline_ms;
}

bool
brokerkey_ack (brokerkey_t *self, const char *node, const char *key)
{
    if (!*self->next || !key || strcmp (key, self->next) != 0)
        return false;
    zhashx_update (self->acked, node, (void *) "1");
    return true;
}

bool
brokerkey_has (const brokerkey_t *self, const char *node)
{
    return zhashx_lookup (self->acked, node) != NULL;
}

size_t
brokerkey_ack_count (const brokerkey_t *self)
{
    return zhashx_size (self->acked);
}

bool
brokerkey_relay_ack (brokerkey_t *self, const char *relay, const char *key)
{
    if (!*self->next || !key || !relay || strcmp (key, self->next) != 0)
        return false;
    zhashx_update (self->relays, relay, (void *) "1");
    return true;
}

bool
brokerkey_relay_has (const brokerkey_t *self, const char *relay)
{
    return relay && zhashx_lookup (self->relays, relay) != NULL;
}

size_t
brokerkey_relay_count (const brokerkey_t *self)
{
    return zhashx_size (self->relays);
}

zcert_t *
brokerkey_commit (brokerkey_t *self, char *err, size_t err_len)
{
    if (!*self->next) {
        s_err (err, err_len, "no rotation runs");
        return NULL;
    }
    char why [1024] = "";
    zcert_t *next = keynext_load (self->key_file, why, sizeof why);
    if (!next || strcmp (zcert_public_txt (next), self->next) != 0) {
        s_err (err, err_len, "the next pair cannot be used: %s",
               *why ? why : "it changed on disk");
        zcert_destroy (&next);
        return NULL;
    }
    if (keynext_commit (self->key_file, err, err_len) != 0) {
        zcert_destroy (&next);
        return NULL;
    }
    char path [1100];
    if (s_deadline_path (self, path, sizeof path) == 0)
        unlink (path);
    *self->next = 0;
    zhashx_purge (self->acked);
    zhashx_purge (self->relays);
    self->retired++;
    return next;
}

uint64_t
brokerkey_retired (const brokerkey_t *self)
{
    return self->retired;
}
