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

    A follower reads the key every TTL/3 and campaigns as soon as it is
    gone (its holder resigned, or its lease lapsed).

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
    and takes:
        "RESIGN"                         leave the key (a switchover):
                                         the key and the lease go at once;
                                         answered "DEMOTED" EPOCH
                                         "resigned", then it campaigns
                                         again only after "CAMPAIGN"
        "HOLD"                           a follower (or one that
                                         resigned) stops campaigning:
                                         it only reads the key (every
                                         TTL/3) and says FOLLOWER when
                                         its holder changes (EPOCH 0 and
                                         HOLDER "" while no one holds
                                         it), until "CAMPAIGN" (a
                                         standby that is not in sync
                                         must not win)
        "CAMPAIGN"                       campaign again after a RESIGN
                                         or a HOLD
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
                             //  leads (its client endpoint, say)
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

//  How long before its lease could lapse a leader demotes itself, for a
//  lease of TTL_MS: a fifth of it, at least one second.
int64_t elector_margin_ms (int64_t ttl_ms);

//  Leadership won or renewed by a request sent at SENT_MS is valid until
//  this time (monotonic ms).
int64_t elector_valid_until (int64_t sent_ms, int64_t ttl_ms);

//  True while a leader whose last VALID_UNTIL is that may act at NOW_MS.
bool elector_valid (int64_t valid_until, int64_t now_ms);

#endif
