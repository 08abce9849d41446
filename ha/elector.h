/*  =========================================================================
    elector - leader election of a broker cluster, on etcd

    Each broker of a cluster runs one elector, a thread (zactor) that
    campaigns for the leader key /grid/CLUSTER/leader: it grants itself a
    lease of TTL and creates the key under that lease only if no one holds
    it (etcd.h etcd_create). The key's create revision is the EPOCH of the
    leadership it won: it only ever grows, so every message of the leader
    can carry it and everyone can refuse a smaller one.

    A leader renews its lease every TTL/3. Its leadership is VALID until
    the time it SENT the last renewal that succeeded, plus TTL, minus a
    margin: the lease cannot lapse (and so no one else can be elected)
    before that, whatever the network did to the answer. When that time
    comes without a newer renewal, the elector says DEMOTED at once, and
    the broker must stop acting as leader then; since the elector may be
    blocked in a call, the broker also keeps the deadline itself
    (elector_valid) and never acts past it. This is the rule Patroni
    follows: step down before anyone else can step up.

    A follower WATCHES the key (ha/etcdwatch.h, a thread of its own): the
    moment etcd deletes it (its holder resigned, or its lease lapsed) or
    another member takes it, the follower reads it and campaigns. It also
    reads the key every TTL/3, the check of a watch that went silent;
    while the watch's stream is down, it falls back to polling: it reads
    the key and the time its holder's lease has left every TTL/3, and
    once that time is shorter, again when the lease can lapse and then
    every 250 ms (a holder that renews keeps its lease longer than TTL/3
    ahead). A leader that its watch tells its key was deleted or taken
    (an operator's etcdctl del) demotes at once ("the leader key was
    deleted"): from that moment another member may win.
    It campaigns as soon as the key is gone, and only when the
    SYNC KEY /grid/CLUSTER/sync allows it: that key, written by the
    leader, holds {"epoch": E, "leader": NAME, "sync": [NAME...]} (the
    standbys that hold every pass the leader released). A member may
    campaign when the key names it (the leader or one of the sync list),
    or when the key does not exist (a new cluster, or etcd lost its data:
    a cold start, first come first served). A key that is not grid's
    bars everyone until an operator deletes it. The leader key is created
    in one transaction with a compare on the sync key's mod revision as
    it was read: taken out of the sync set in between, a member does not
    win. Members are named by their VALUE (the member's name).

    A leader writes the sync set it is given (SYNC) with a compare on the
    sync key's mod revision and on its own leader key's create revision
    (a demoted leader never writes), retrying every TTL/10 until it is
    written or it demotes, and says SYNCED once written: the broker counts
    a standby out of the set (acknowledges without it) only then.

    The actor's pipe says (each a zmsg of strings; times are monotonic
    ms, zclock_mono):
        "LEADER" EPOCH VALID_UNTIL       won the key
        "RENEWED" EPOCH VALID_UNTIL      renewed the lease
        "DEMOTED" EPOCH WHY              no longer leader
        "FOLLOWER" EPOCH HOLDER          another holds the key (EPOCH its
                                         epoch, HOLDER the key's value);
                                         said when either changes
        "UNREACHABLE" WHY                no etcd endpoint answers (said
                                         when that starts and stops: WHY
                                         "" when it answers again)
        "BARRED" WHY                     the sync key does not name this
                                         member (WHY says what it names;
                                         said when it changes, "" when it
                                         may campaign again)
        "SYNCED" GEN NAMES               the sync key holds NAMES (comma-
                                         separated), as SYNC GEN asked
    and takes:
        "RESIGN"                         leave the key (a switchover):
                                         the key and the lease go at once;
                                         answered "DEMOTED" EPOCH
                                         "resigned", then it campaigns
                                         again only after "CAMPAIGN"
        "HOLD"                           a follower (or one that
                                         resigned) stops campaigning:
                                         it only reads the key (as a
                                         follower does) and says FOLLOWER when
                                         its holder changes (EPOCH 0 and
                                         HOLDER "" while no one holds
                                         it), until "CAMPAIGN" (a
                                         standby that is not in sync
                                         must not win)
        "CAMPAIGN"                       campaign again after a RESIGN
                                         or a HOLD
        "SYNC" EPOCH GEN NAMES           a leader of EPOCH: write the
                                         sync set NAMES (comma-separated
                                         member names) to the sync key;
                                         GEN grows with each (a later one
                                         replaces one not yet written)
        "$TERM"                          stop (a leader resigns first)

    Threading: the actor is its own thread; its config is copied.
    =========================================================================
*/
#ifndef GRID_ELECTOR_H
#define GRID_ELECTOR_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#define ELECTOR_MIN_TTL_MS 2000      //  etcd grants nothing shorter

typedef struct {
    const char *endpoints;   //  etcd endpoints (etcd.h)
    const char *cluster;     //  Cluster name (a grid name): the key's prefix
    const char *value;       //  What the leader key holds while this one
                             //  leads: the member's name, as the sync
                             //  key names members
    int64_t ttl_ms;          //  Lease TTL (>= ELECTOR_MIN_TTL_MS, whole s)
    bool held;               //  Start held (below), and be held again
                             //  after each demotion: campaign only
                             //  after "CAMPAIGN"
} elector_config_t;

//  Starts an elector for CONFIG. Returns NULL with a sentence in ERR when
//  CONFIG is wrong (no endpoint, a bad cluster name, a TTL too short).
zactor_t *elector_new (const elector_config_t *config, char *err,
                       size_t err_len);

//  The key an elector of CLUSTER campaigns for, into KEY (LEN bytes).
void elector_key (const char *cluster, char *key, size_t len);

//  The sync key of CLUSTER, into KEY (LEN bytes).
void elector_sync_key (const char *cluster, char *key, size_t len);

//  The sync key's value for the leader LEADER of EPOCH whose sync set is
//  NAMES (comma-separated), as a new string (free it), or NULL.
char *elector_sync_value (uint64_t epoch, const char *leader,
                          const char *names);

//  Whether the sync key's VALUE (SIZE bytes) lets member NAME campaign:
//  1 when it names it, 0 when not (WHY says what it names), -1 when the
//  value is not grid's (WHY says so).
int elector_sync_allows (const char *value, size_t size, const char *name,
                         char *why, size_t why_len);

//  How long before its lease could lapse a leader demotes itself, for a
//  lease of TTL_MS: a fifth of it, at least one second.
int64_t elector_margin_ms (int64_t ttl_ms);

//  Leadership won or renewed by a request sent at SENT_MS is valid until
//  this time (monotonic ms).
int64_t elector_valid_until (int64_t sent_ms, int64_t ttl_ms);

//  True while a leader whose last VALID_UNTIL is that may act at NOW_MS.
bool elector_valid (int64_t valid_until, int64_t now_ms);

#endif
