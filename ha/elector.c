/*  =========================================================================
    elector - leader election of a broker cluster, on etcd (see elector.h)
    =========================================================================
*/

#include "elector.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/names.h"
#include "etcd.h"
#include "etcdwatch.h"

#define S_LAPSE_POLL_MS 250    //  A follower reads the key this often
                                //  once the holder's lease can lapse

typedef enum {
    S_FOLLOWING,     //  Campaigns whenever the key is free
    S_LEADING,       //  Holds the key, renews its lease
    S_RESIGNED,      //  Left the key; waits for CAMPAIGN
    S_HELD           //  Watches the key, never takes it, until CAMPAIGN
} s_state_t;

typedef struct {
    zsock_t *pipe;
    etcd_t *etcd;
    char *value;
    int64_t ttl_ms;
    char key [NAME_MAX_LEN + 32];
    char sync_key [NAME_MAX_LEN + 32];
    s_state_t state;
    int64_t lease;               //  Our lease while leading (0: none)
    int64_t epoch;               //  Our epoch while leading
    int64_t valid_until;         //  While leading: act until then
    int64_t next_ms;             //  When to call etcd next
    int64_t holder_epoch;        //  The last FOLLOWER said
    char *holder_value;
    bool unreachable;            //  The last call reached no endpoint
    bool held_mode;              //  Campaigns only when told (config held)
    bool terminated;
    char *barred;                //  Why the sync key bars it ("" not)
    int64_t sync_rev;            //  The sync key's mod revision (0: none)
    uint64_t sync_gen;           //  The last SYNC asked (while leading)
    uint64_t synced_gen;         //  The last written
    char *sync_names;            //  What SYNC asked for
    int64_t sync_next_ms;        //  When to try writing it next
    zactor_t *watch;             //  The leader key's etcd watch
    bool watching;               //  Its stream is up
} s_elector_t;

void
elector_key (const char *cluster, char *key, size_t len)
{
    snprintf (key, len, "/grid/%s/leader", cluster);
}

void
elector_sync_key (const char *cluster, char *key, size_t len)
{
    snprintf (key, len, "/grid/%s/sync", cluster);
}

char *
elector_sync_value (uint64_t epoch, const char *leader, const char *names)
{
    json_t *list = json_array ();
    const char *at = names ? names : "";
    while (*at) {
        const char *end = strchr (at, ',');
        size_t len = end ? (size_t) (end - at) : strlen (at);
        if (len)
            json_array_append_new (list, json_stringn (at, len));
        at += len;
        if (*at == ',')
            at++;
    }
    json_t *value = json_pack ("{s:I,s:s,s:o}", "epoch", (json_int_t) epoch,
                               "leader", leader, "sync", list);
    char *text = value ? json_dumps (value, JSON_COMPACT) : NULL;
    json_decref (value);
    return text;
}

int
elector_sync_allows (const char *value, size_t size, const char *name,
                     char *why, size_t why_len)
{
    json_error_t error;
    json_t *root = json_loadb (value, size, 0, &error);
    json_t *leader = json_object_get (root, "leader");
    json_t *list = json_object_get (root, "sync");
    json_t *epoch = json_object_get (root, "epoch");
    if (!json_is_object (root) || !json_is_string (leader)
        || !json_is_array (list) || !json_is_integer (epoch)) {
        json_decref (root);
        snprintf (why, why_len, "the sync key is not grid's (expected "
                  "{\"epoch\": N, \"leader\": NAME, \"sync\": [NAME...]}): "
                  "no member campaigns until it is deleted");
        return -1;
    }
    int allows = streq (json_string_value (leader), name) ? 1 : 0;
    char names [512] = "";
    size_t used = 0;
    for (size_t index = 0; index < json_array_size (list); index++) {
        const char *listed = json_string_value (json_array_get (list, index));
        if (!listed)
            continue;
        if (streq (listed, name))
            allows = 1;
        int wrote = snprintf (names + used, sizeof names - used, "%s%s",
                              used ? ", " : "", listed);
        if (wrote > 0 && (size_t) wrote < sizeof names - used)
            used += (size_t) wrote;
    }
    if (!allows)
        snprintf (why, why_len, "the sync key of epoch %" PRId64 " names "
                  "the leader %s and the standbys in sync [%s], not %s",
                  (int64_t) json_integer_value (epoch),
                  json_string_value (leader), names, name);
    else
        why [0] = 0;
    json_decref (root);
    return allows;
}

int64_t
elector_margin_ms (int64_t ttl_ms)
{
    int64_t margin = ttl_ms / 5;
    return margin < 1000 ? 1000 : margin;
}

int64_t
elector_valid_until (int64_t sent_ms, int64_t ttl_ms)
{
    return sent_ms + ttl_ms - elector_margin_ms (ttl_ms);
}

bool
elector_valid (int64_t valid_until, int64_t now_ms)
{
    return now_ms < valid_until;
}

static void
s_say (s_elector_t *self, const char *what, int64_t number,
       const char *text)
{
    char digits [32];
    snprintf (digits, sizeof digits, "%" PRId64, number);
    zstr_sendx (self->pipe, what, digits, text, NULL);
}

//  Notes whether the last call reached etcd, saying so when it changes.
static void
s_reached (s_elector_t *self, bool reached)
{
    if (reached == !self->unreachable)
        return;
    self->unreachable = !reached;
    zstr_sendx (self->pipe, "UNREACHABLE",
                reached ? "" : etcd_error (self->etcd), NULL);
}

static void
s_demote (s_elector_t *self, const char *why)
{
    char digits [32];
    snprintf (digits, sizeof digits, "%" PRId64, self->epoch);
    zstr_sendx (self->pipe, "DEMOTED", digits, why, NULL);
    //  Best effort: a lease that cannot be revoked lapses by itself
    if (self->lease)
        etcd_lease_revoke (self->etcd, self->lease);
    self->lease = 0;
    self->epoch = 0;
    self->valid_until = 0;
    self->sync_gen = self->synced_gen = 0;
    self->state = self->held_mode ? S_HELD : S_FOLLOWING;
}

//  Leaves the key and its lease at once (a switchover, a stop).
static void
s_resign (s_elector_t *self)
{
    if (self->state == S_LEADING) {
        etcd_delete_own (self->etcd, self->key, self->epoch);
        s_demote (self, "resigned");
    }
    else
        zstr_sendx (self->pipe, "DEMOTED", "0", "resigned", NULL);
    self->state = S_RESIGNED;
}

static void
s_follow (s_elector_t *self, const etcd_kv_t *holder)
{
    const char *value = holder->value ? holder->value : "";
    if (holder->create_revision == self->holder_epoch && self->holder_value
        && strcmp (value, self->holder_value) == 0)
        return;
    self->holder_epoch = holder->create_revision;
    free (self->holder_value);
    self->holder_value = strdup (value);
    s_say (self, "FOLLOWER", holder->create_revision, value);
}

//  Says BARRED when why the sync key bars this member changes.
static void
s_bar (s_elector_t *self, const char *why)
{
    if (self->barred && streq (self->barred, why))
        return;
    free (self->barred);
    self->barred = strdup (why);
    zstr_sendx (self->pipe, "BARRED", why, NULL);
}

//  When a follower reads the key next, after NOW_MS, when HOLDER holds
//  it: every TTL/3 while its lease has longer to live than that, else
//  when the lease can lapse and then every S_LAPSE_POLL_MS, so a lapse
//  is noticed within that (etcd says the time left in whole seconds,
//  rounded down: the key may outlive what it says by up to a second).
static int64_t
s_next_read (s_elector_t *self, const etcd_kv_t *holder, int64_t now_ms)
{
    int64_t step_ms = self->ttl_ms / 3;
    //  The watch says when the key goes: the reads are its check
    if (!holder->create_revision || !holder->lease || self->watching)
        return now_ms + step_ms;
    int64_t ttl_s = 0;
    int rc = etcd_lease_ttl (self->etcd, holder->lease, &ttl_s);
    s_reached (self, rc != ETCD_EIO);
    if (rc < 0)
        return now_ms + step_ms;
    int64_t wait_ms = rc == 0 ? S_LAPSE_POLL_MS : ttl_s * 1000;
    if (wait_ms > step_ms)
        wait_ms = step_ms;
    if (wait_ms < S_LAPSE_POLL_MS)
        wait_ms = S_LAPSE_POLL_MS;
    return now_ms + wait_ms;
}

//  Held: reads who holds the key, says so when it changes.
static void
s_watch (s_elector_t *self, int64_t now_ms)
{
    etcd_kv_t holder;
    memset (&holder, 0, sizeof holder);
    int rc = etcd_get (self->etcd, self->key, &holder);
    s_reached (self, rc != ETCD_EIO);
    if (rc == 1 || rc == 0)
        s_follow (self, &holder);
    self->next_ms = rc == 1 ? s_next_read (self, &holder, now_ms)
                            : now_ms + self->ttl_ms / 3;
    etcd_kv_clear (&holder);
}

//  Campaigns, only when the sync key allows this member (elector.h).
static void
s_campaign (s_elector_t *self, int64_t now_ms)
{
    int64_t step_ms = self->ttl_ms / 3;
    etcd_kv_t sync;
    int rc = etcd_get (self->etcd, self->sync_key, &sync);
    s_reached (self, rc != ETCD_EIO);
    if (rc < 0) {
        self->next_ms = now_ms + step_ms;
        return;
    }
    int64_t guard = rc == 1 ? sync.mod_revision : 0;
    char why [700] = "";
    int allows = rc == 1 ? elector_sync_allows (sync.value, sync.size,
                                                self->value, why, sizeof why)
                         : 1;
    etcd_kv_clear (&sync);
    s_bar (self, why);
    if (allows != 1) {
        //  It still follows whoever leads
        s_watch (self, now_ms);
        return;
    }
    int64_t lease = 0;
    int64_t sent_ms = zclock_mono ();
    rc = etcd_lease_grant (self->etcd, self->ttl_ms / 1000, &lease);
    s_reached (self, rc != ETCD_EIO);
    if (rc != 0) {
        self->next_ms = now_ms + step_ms;
        return;
    }
    int64_t epoch = 0;
    etcd_kv_t holder;
    //  Won only if the sync key is still the one read: taken in between
    //  out of the sync set, this member does not win
    rc = etcd_create_guarded (self->etcd, self->key, self->value,
                              strlen (self->value), lease, self->sync_key,
                              guard, &epoch, &holder);
    s_reached (self, rc != ETCD_EIO);
    if (rc == 1) {
        //  The lease's clock started when it was granted
        self->state = S_LEADING;
        self->lease = lease;
        self->epoch = epoch;
        self->valid_until = elector_valid_until (sent_ms, self->ttl_ms);
        self->holder_epoch = 0;
        self->sync_rev = guard;
        self->sync_gen = self->synced_gen = 0;
        char until [32];
        snprintf (until, sizeof until, "%" PRId64, self->valid_until);
        s_say (self, "LEADER", epoch, until);
        self->next_ms = sent_ms + step_ms;
        return;
    }
    etcd_lease_revoke (self->etcd, lease);
    if (rc == 0 && holder.create_revision)
        s_follow (self, &holder);
    //  The sync key changed since it was read: read it again at once;
    //  held by another: again when its lease can lapse
    self->next_ms = rc == 0 && !holder.create_revision ? now_ms
                  : rc == 0 ? s_next_read (self, &holder, now_ms)
                            : now_ms + step_ms;
    etcd_kv_clear (&holder);
}

//  Leading: writes the sync set SYNC asked for, only while this leader
//  holds its key and the sync key is the one it knows.
static void
s_write_sync (s_elector_t *self, int64_t now_ms)
{
    uint64_t gen = self->sync_gen;
    char *value = elector_sync_value ((uint64_t) self->epoch, self->value,
                                      self->sync_names);
    int64_t revision = 0;
    int rc = value ? etcd_replace_fenced (self->etcd, self->sync_key, value,
                                          strlen (value), self->sync_rev,
                                          self->key, self->epoch, &revision)
                   : ETCD_EPROTO;
    free (value);
    s_reached (self, rc != ETCD_EIO);
    if (rc == 1) {
        self->sync_rev = revision;
        self->synced_gen = gen;
        char digits [32];
        snprintf (digits, sizeof digits, "%" PRIu64, gen);
        zstr_sendx (self->pipe, "SYNCED", digits, self->sync_names, NULL);
        return;
    }
    self->sync_next_ms = zclock_mono () + self->ttl_ms / 10;
    if (rc != 0)
        return;
    //  A compare failed: is the leader key still ours?
    etcd_kv_t kv;
    rc = etcd_get (self->etcd, self->key, &kv);
    int64_t holder = kv.create_revision;
    etcd_kv_clear (&kv);
    if (rc == 0 || (rc == 1 && holder != self->epoch)) {
        s_demote (self, rc == 0 ? "its lease lapsed"
                                : "another member holds the leader key");
        self->next_ms = now_ms;
        return;
    }
    //  Someone else wrote the sync key (an operator?): write over it
    if (rc == 1 && etcd_get (self->etcd, self->sync_key, &kv) >= 0) {
        self->sync_rev = kv.mod_revision;
        self->sync_next_ms = zclock_mono ();
    }
    etcd_kv_clear (&kv);
}

static void
s_renew (s_elector_t *self, int64_t now_ms)
{
    int64_t ttl = 0;
    int64_t sent_ms = zclock_mono ();
    int rc = etcd_lease_keepalive (self->etcd, self->lease, &ttl);
    s_reached (self, rc != ETCD_EIO);
    int64_t after_ms = zclock_mono ();
    if (rc == 1) {
        self->valid_until = elector_valid_until (sent_ms, self->ttl_ms);
        char epoch [32], until [32];
        snprintf (epoch, sizeof epoch, "%" PRId64, self->epoch);
        snprintf (until, sizeof until, "%" PRId64, self->valid_until);
        zstr_sendx (self->pipe, "RENEWED", epoch, until, NULL);
        self->next_ms = sent_ms + self->ttl_ms / 3;
    }
    else
    if (rc == 0) {
        s_demote (self, "its lease lapsed");
        self->next_ms = after_ms;
    }
    else
    if (!elector_valid (self->valid_until, after_ms)) {
        char why [600];
        snprintf (why, sizeof why, "cannot renew its lease in time: %s",
                  etcd_error (self->etcd));
        s_demote (self, why);
        self->next_ms = after_ms + self->ttl_ms / 3;
    }
    else
        //  Again soon: the margin is for this
        self->next_ms = after_ms + self->ttl_ms / 10;
    (void) now_ms;
}

static void
s_on_command (s_elector_t *self)
{
    char *command = zstr_recv (self->pipe);
    if (!command) {
        self->terminated = true;
        return;
    }
    if (streq (command, "$TERM")) {
        if (self->state == S_LEADING)
            s_resign (self);
        self->terminated = true;
    }
    else
    if (streq (command, "RESIGN"))
        s_resign (self);
    else
    if (streq (command, "SYNC")) {
        char *epoch = zstr_recv (self->pipe);
        char *gen = epoch ? zstr_recv (self->pipe) : NULL;
        char *names = gen ? zstr_recv (self->pipe) : NULL;
        if (names && self->state == S_LEADING
            && strtoll (epoch, NULL, 10) == self->epoch) {
            free (self->sync_names);
            self->sync_names = names;
            names = NULL;
            self->sync_gen = strtoull (gen, NULL, 10);
            self->sync_next_ms = zclock_mono ();
        }
        free (epoch);
        free (gen);
        free (names);
    }
    else
    if (streq (command, "HOLD")
        && (self->state == S_FOLLOWING || self->state == S_RESIGNED)) {
        self->state = S_HELD;
        self->next_ms = zclock_mono ();
    }
    else
    if (streq (command, "CAMPAIGN")
        && (self->state == S_RESIGNED || self->state == S_HELD)) {
        self->state = S_FOLLOWING;
        self->next_ms = zclock_mono ();
    }
    free (command);
}

//  What the leader key's watch says (ha/etcdwatch.h). A member that
//  does not lead reads the key at once on any change (the read decides,
//  as when it polls); a leader whose key was deleted or taken demotes at
//  once: another member may be elected from that moment.
static void
s_on_watch (s_elector_t *self)
{
    zmsg_t *msg = zmsg_recv (self->watch);
    char *what = msg ? zmsg_popstr (msg) : NULL;
    char *revision = msg ? zmsg_popstr (msg) : NULL;
    zmsg_destroy (&msg);
    if (!what || !revision) {
        free (what);
        free (revision);
        return;
    }
    //  PUT: the key's create revision; DELETE: the delete's revision
    int64_t number = strtoll (revision, NULL, 10);
    bool changed = streq (what, "PUT") || streq (what, "DELETE");
    if (streq (what, "WATCHING"))
        self->watching = true;
    else
    if (streq (what, "BROKEN"))
        self->watching = false;
    if (self->state == S_LEADING && changed && number > self->epoch)
        s_demote (self, streq (what, "DELETE")
                        ? "the leader key was deleted"
                        : "another member holds the leader key");
    //  A change, or a stream that starts or stops (the key may have
    //  changed unseen): read it now
    if (self->state == S_FOLLOWING || self->state == S_HELD)
        self->next_ms = zclock_mono ();
    free (what);
    free (revision);
}

static void
s_actor (zsock_t *pipe, void *arg)
{
    s_elector_t *self = (s_elector_t *) arg;
    self->pipe = pipe;
    self->next_ms = zclock_mono ();
    zsock_signal (pipe, 0);
    zpoller_t *poller = zpoller_new (pipe, self->watch, NULL);
    while (!self->terminated) {
        int64_t now_ms = zclock_mono ();
        //  Past its deadline a leader demotes, whatever else happens
        if (self->state == S_LEADING
            && !elector_valid (self->valid_until, now_ms))
            s_demote (self, "its lease could lapse: no renewal came in "
                      "time");
        if (self->state != S_RESIGNED && now_ms >= self->next_ms) {
            if (self->state == S_LEADING)
                s_renew (self, now_ms);
            else
            if (self->state == S_HELD)
                s_watch (self, now_ms);
            else
                s_campaign (self, now_ms);
            continue;
        }
        bool sync_due = self->state == S_LEADING
                        && self->sync_gen > self->synced_gen;
        if (sync_due && now_ms >= self->sync_next_ms) {
            s_write_sync (self, now_ms);
            continue;
        }
        int64_t wait_ms = self->state == S_RESIGNED ? 1000
                        : self->next_ms - now_ms;
        if (sync_due && self->sync_next_ms - now_ms < wait_ms)
            wait_ms = self->sync_next_ms - now_ms;
        if (self->state == S_LEADING
            && self->valid_until - now_ms < wait_ms)
            wait_ms = self->valid_until - now_ms;
        if (wait_ms < 0)
            wait_ms = 0;
        void *ready = zpoller_wait (poller, (int) wait_ms);
        if (ready == pipe)
            s_on_command (self);
        else
        if (ready && ready == (void *) self->watch)
            s_on_watch (self);
        else
        if (zpoller_terminated (poller))
            break;
    }
    zpoller_destroy (&poller);
    zactor_destroy (&self->watch);
    etcd_destroy (&self->etcd);
    free (self->value);
    free (self->holder_value);
    free (self->barred);
    free (self->sync_names);
    free (self);
}

zactor_t *
elector_new (const elector_config_t *config, char *err, size_t err_len)
{
    if (!config->cluster || !name_valid (config->cluster)) {
        snprintf (err, err_len, "cluster name '%s': expected a name "
                  "(letters, digits, '-', '_', '.')",
                  config->cluster ? config->cluster : "");
        return NULL;
    }
    if (config->ttl_ms < ELECTOR_MIN_TTL_MS || config->ttl_ms % 1000) {
        snprintf (err, err_len, "leader TTL: expected whole seconds, at "
                  "least %d s", ELECTOR_MIN_TTL_MS / 1000);
        return NULL;
    }
    s_elector_t *self = (s_elector_t *) calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_len, "out of memory");
        return NULL;
    }
    //  Each call waits at most a quarter of the TTL for an endpoint, so
    //  the deadline is looked at again well before it passes
    int64_t timeout_ms = config->ttl_ms / 4;
    self->etcd = etcd_new (config->endpoints, timeout_ms > 2000 ? 2000
                                                                : timeout_ms,
                           err, err_len);
    if (!self->etcd) {
        free (self);
        return NULL;
    }
    char key [NAME_MAX_LEN + 32];
    elector_key (config->cluster, key, sizeof key);
    self->watch = etcdwatch_new (config->endpoints, key, err, err_len);
    if (!self->watch) {
        etcd_destroy (&self->etcd);
        free (self);
        return NULL;
    }
    self->value = strdup (config->value ? config->value : "");
    self->ttl_ms = config->ttl_ms;
    self->held_mode = config->held;
    self->state = config->held ? S_HELD : S_FOLLOWING;
    elector_key (config->cluster, self->key, sizeof self->key);
    elector_sync_key (config->cluster, self->sync_key, sizeof self->sync_key);
    return zactor_new (s_actor, self);
}
