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
#include "../store/store.h"

#define S_ROW "broker_key"           //  STORE_DB_META: the rotation's row

struct _brokerkey_t {
    char *key_file;              //  The broker's pair, NULL when insecure
    char next [KEYS_TEXT_SIZE];  //  The next public key, "" when none
    int64_t started_ms;          //  Wall
    int64_t deadline_ms;         //  Wall
    zhashx_t *acked;             //  Node id -> "1": has the next key
    zhashx_t *relays;            //  Relay key -> "1": has the next key
    uint64_t retired;
    uint64_t recorded_seq;       //  A cluster's pass that recorded the
                                 //  retirement (0: none yet)
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

//  Writes P.next_deadline (its path into PATH). Returns 0, or -1 with a
//  sentence in ERR.
static int
s_write_deadline (const brokerkey_t *self, int64_t started_ms,
                  int64_t deadline_ms, char *path, size_t path_len,
                  char *err, size_t err_len)
{
    char tmp [1200];
    if (s_deadline_path (self, path, path_len) != 0) {
        s_err (err, err_len, "%s: path too long", self->key_file);
        return -1;
    }
    snprintf (tmp, sizeof tmp, "%s.tmp", path);
    FILE *file = fopen (tmp, "w");
    int rc = file ? 0 : -1;
    if (file) {
        if (fprintf (file, "%" PRId64 " %" PRId64 "\n", started_ms,
                     deadline_ms) < 0
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
    return 0;
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
    char path [1100];
    if (s_write_deadline (self, now_wall_ms, deadline_wall_ms, path,
                          sizeof path, err, err_len) != 0)
        return -1;
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
    self->recorded_seq = 0;
    return next;
}

uint64_t
brokerkey_retired (const brokerkey_t *self)
{
    return self->retired;
}

//  ---------------------------------------------------------------------
//  A cluster's rotation, in the store (brokerkey_record, brokerkey_adopt)

int
brokerkey_record (brokerkey_t *self, store_txn_t *txn, bool retired)
{
    if (!self->key_file)
        return 0;
    char why [1024] = "";
    zcert_t *next = keynext_load (self->key_file, why, sizeof why);
    if (!next || !*self->next || !streq (zcert_public_txt (next), self->next)) {
        zcert_destroy (&next);
        return -1;
    }
    char row [400];
    snprintf (row, sizeof row, "1 %s %s %s %" PRId64 " %" PRId64,
              retired ? "retired" : "running", zcert_public_txt (next),
              zcert_secret_txt (next), self->started_ms, self->deadline_ms);
    int rc = store_put (txn, STORE_DB_META, S_ROW, strlen (S_ROW), row,
                        strlen (row));
    zcert_destroy (&next);
    return rc == 0 ? 0 : -1;
}

void
brokerkey_set_recorded (brokerkey_t *self, uint64_t seq)
{
    self->recorded_seq = seq;
}

uint64_t
brokerkey_recorded (const brokerkey_t *self)
{
    return self->recorded_seq;
}

//  The store's rotation row, read. Returns 1 with its fields, 0 when
//  there is none, or one that is not grid's (logged), -1 when the store
//  cannot be read (ERR).
typedef struct {
    bool running;                //  Else retired
    char public_txt [64];
    char secret_txt [64];
    uint8_t public_key [32];
    uint8_t secret_key [32];
    int64_t started_ms;
    int64_t deadline_ms;
} s_row_t;

static int
s_read_row (store_t *store, s_row_t *out, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (store, false);
    if (!txn) {
        s_err (err, err_len, "cannot read the store: %s",
               store_last_error (store));
        return -1;
    }
    const void *value = NULL;
    size_t size = 0;
    char row [400] = "";
    if (store_get (txn, STORE_DB_META, S_ROW, strlen (S_ROW), &value, &size)
        == 0 && size < sizeof row)
        memcpy (row, value, size);
    store_abort (&txn);
    if (!*row)
        return 0;
    char state [16];
    if (sscanf (row, "1 %15s %63s %63s %" SCNd64 " %" SCNd64, state,
                out->public_txt, out->secret_txt, &out->started_ms,
                &out->deadline_ms) != 5
        || (!streq (state, "running") && !streq (state, "retired"))
        || strlen (out->public_txt) != KEYS_Z85_LEN
        || strlen (out->secret_txt) != KEYS_Z85_LEN
        || !zmq_z85_decode (out->public_key, out->public_txt)
        || !zmq_z85_decode (out->secret_key, out->secret_txt)) {
        //  Not what brokerkey_record writes: the files stay as they are
        log_error ("the store's broker key rotation (meta %s) is not "
                   "grid's: left out, this member serves the key its files "
                   "hold", S_ROW);
        return 0;
    }
    out->running = streq (state, "running");
    return 1;
}

zcert_t *
brokerkey_retired_pair (store_t *store)
{
    s_row_t row;
    char err [256];
    if (s_read_row (store, &row, err, sizeof err) != 1 || row.running)
        return NULL;
    return zcert_new_from (row.public_key, row.secret_key);
}

int
brokerkey_adopt (const char *key_file, store_t *store, char *err,
                 size_t err_len)
{
    s_row_t row;
    int rc = s_read_row (store, &row, err, err_len);
    if (rc <= 0)
        return rc;
    const char *public_txt = row.public_txt;
    zcert_t *current = keys_load_pair (key_file, err, err_len);
    if (!current)
        return -1;
    bool running = row.running;
    bool is_current = streq (zcert_public_txt (current), public_txt);
    zcert_destroy (&current);
    char why [1024] = "";
    zcert_t *next = keynext_load (key_file, why, sizeof why);
    bool is_next = next && streq (zcert_public_txt (next), public_txt);
    zcert_destroy (&next);
    brokerkey_t files = {.key_file = (char *) key_file};
    char path [1100];
    if (is_current || (running && is_next)) {
        if (is_current && is_next)
            keynext_drop (key_file);
        return 0;
    }
    zcert_t *pair = zcert_new_from (row.public_key, row.secret_key);
    rc = pair ? keynext_write_pair (key_file, pair, err, err_len) : -1;
    zcert_destroy (&pair);
    if (rc == 0 && running)
        rc = s_write_deadline (&files, row.started_ms, row.deadline_ms, path,
                               sizeof path, err, err_len);
    if (rc == 0 && !running) {
        rc = keynext_commit (key_file, err, err_len);
        if (s_deadline_path (&files, path, sizeof path) == 0)
            unlink (path);
    }
    if (rc != 0)
        return -1;
    if (running)
        log_warn ("the broker's key: a rotation goes on (next key %s), as "
                  "the cluster's store says", public_txt);
    else
        log_warn ("the broker's key is now %s, as the cluster's store says "
                  "(a rotation retired the old one)", public_txt);
    return 1;
}
