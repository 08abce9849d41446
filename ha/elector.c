/*  =========================================================================
    elector - leader election of a broker cluster, on etcd (see elector.h)
    =========================================================================
*/

#include "elector.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/names.h"
#include "etcd.h"

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
} s_elector_t;

void
elector_key (const char *cluster, char *key, size_t len)
{
    snprintf (key, len, "/grid/%s/leader", cluster);
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
    etcd_kv_clear (&holder);
    self->next_ms = now_ms + self->ttl_ms / 3;
}

static void
s_campaign (s_elector_t *self, int64_t now_ms)
{
    int64_t step_ms = self->ttl_ms / 3;
    int64_t lease = 0;
    int64_t sent_ms = zclock_mono ();
    int rc = etcd_lease_grant (self->etcd, self->ttl_ms / 1000, &lease);
    s_reached (self, rc != ETCD_EIO);
    if (rc != 0) {
        self->next_ms = now_ms + step_ms;
        return;
    }
    int64_t epoch = 0;
    etcd_kv_t holder;
    rc = etcd_create (self->etcd, self->key, self->value,
                      strlen (self->value), lease, &epoch, &holder);
    s_reached (self, rc != ETCD_EIO);
    if (rc == 1) {
        //  The lease's clock started when it was granted
        self->state = S_LEADING;
        self->lease = lease;
        self->epoch = epoch;
        self->valid_until = elector_valid_until (sent_ms, self->ttl_ms);
        self->holder_epoch = 0;
        char until [32];
        snprintf (until, sizeof until, "%" PRId64, self->valid_until);
        s_say (self, "LEADER", epoch, until);
        self->next_ms = sent_ms + step_ms;
        return;
    }
    etcd_lease_revoke (self->etcd, lease);
    if (rc == 0 && holder.create_revision)
        s_follow (self, &holder);
    etcd_kv_clear (&holder);
    self->next_ms = now_ms + step_ms;
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

static void
s_actor (zsock_t *pipe, void *arg)
{
    s_elector_t *self = (s_elector_t *) arg;
    self->pipe = pipe;
    self->next_ms = zclock_mono ();
    zsock_signal (pipe, 0);
    zpoller_t *poller = zpoller_new (pipe, NULL);
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
        int64_t wait_ms = self->state == S_RESIGNED ? 1000
                        : self->next_ms - now_ms;
        if (self->state == S_LEADING
            && self->valid_until - now_ms < wait_ms)
            wait_ms = self->valid_until - now_ms;
        if (wait_ms < 0)
            wait_ms = 0;
        if (zpoller_wait (poller, (int) wait_ms) == pipe)
            s_on_command (self);
        else
        if (zpoller_terminated (poller))
            break;
    }
    zpoller_destroy (&poller);
    etcd_destroy (&self->etcd);
    free (self->value);
    free (self->holder_value);
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
    self->value = strdup (config->value ? config->value : "");
    self->ttl_ms = config->ttl_ms;
    self->held_mode = config->held;
    self->state = config->held ? S_HELD : S_FOLLOWING;
    elector_key (config->cluster, self->key, sizeof self->key);
    return zactor_new (s_actor, self);
}
