/*  =========================================================================
    brokerkey - the rotation of the broker's own key pair

    `gridcli key rotate-broker` (broker.rekey) makes a next pair beside the
    broker's (P.next, P.next_secret: proto/keynext.h) and a deadline file
    P.next_deadline ("<started wall ms> <deadline wall ms>"), so that a
    rotation survives a restart. While it runs, the broker announces the
    next public key to every direct agent that was granted broker_rekey,
    over its authenticated session (broker_key), and counts those that
    answered broker_key_ack; and so to every relay connected to it whose
    own heartbeat asked for broker_rekey (a node behind a relay has the
    key when the relay connected to the broker has it: the relays below
    and the agents trust their relay's key, not the broker's). When all nodes acknowledged, or at the
    deadline, the rotation is retired: the next pair becomes the pair on
    disk (brokerkey_commit) and the server binds its endpoints again with
    it (broker.c); the old key is refused from then on.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_BROKERKEY_H
#define GRID_BROKER_BROKERKEY_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/keys.h"
#include "../store/store.h"

#define BROKERKEY_DEADLINE_MS (24LL * 3600 * 1000)  //  Without --deadline
#define BROKERKEY_ANNOUNCE_MS 10000  //  Announced again this often to the
                                     //  online nodes that did not answer
#define BROKERKEY_CHECK_MS 1000      //  Retirement looked at this often

typedef struct _brokerkey_t brokerkey_t;

//  KEY_FILE is the broker's pair (either file); NULL when the broker runs
//  insecure. Finishes a commit cut short and takes up a rotation under
//  way. Returns NULL with a sentence in ERR.
brokerkey_t *brokerkey_new (const char *key_file, char *err, size_t err_len);
void brokerkey_destroy (brokerkey_t **self_p);

//  Starts a rotation at NOW_WALL_MS that retires the old key at
//  DEADLINE_WALL_MS at the latest: writes the next pair and the deadline.
//  Returns 0, or -1 with a sentence in ERR (one runs already: its key;
//  insecure; a file that cannot be written).
int brokerkey_start (brokerkey_t *self, int64_t now_wall_ms,
                     int64_t deadline_wall_ms, char *err, size_t err_len);

//  The next public key (Z85), or NULL when no rotation runs.
const char *brokerkey_next (const brokerkey_t *self);

//  When the running rotation started and when its deadline falls (wall ms).
int64_t brokerkey_started_ms (const brokerkey_t *self);
int64_t brokerkey_deadline_ms (const brokerkey_t *self);

//  NODE answered broker_key_ack with KEY: true when KEY is the next key
//  (the node is counted), false for any other key (dropped).
bool brokerkey_ack (brokerkey_t *self, const char *node, const char *key);

//  True when NODE acknowledged the running rotation's key.
bool brokerkey_has (const brokerkey_t *self, const char *node);

//  Nodes that acknowledged the running rotation's key.
size_t brokerkey_ack_count (const brokerkey_t *self);

//  The relay RELAY (its key) connected to the broker answered
//  broker_key_ack with KEY: true when KEY is the next key (the relay, and
//  so every node that came through it, has it), false for any other.
bool brokerkey_relay_ack (brokerkey_t *self, const char *relay,
                          const char *key);

//  True when the relay RELAY acknowledged the running rotation's key.
bool brokerkey_relay_has (const brokerkey_t *self, const char *relay);

//  Relays that acknowledged the running rotation's key.
size_t brokerkey_relay_count (const brokerkey_t *self);

//  Retires the old key: the next pair becomes the pair on disk. Returns
//  the new pair (the caller owns it), or NULL with a sentence in ERR (the
//  rotation then goes on).
zcert_t *brokerkey_commit (brokerkey_t *self, char *err, size_t err_len);

//  Rotations retired since start.
uint64_t brokerkey_retired (const brokerkey_t *self);

//  A broker cluster's members share one key pair (docs/HA.md), so the
//  rotation lives in the store too, where replication and snapshots carry
//  it to every standby: the row META "broker_key" holds the next pair
//  (its secret key too: the data dir is guarded as the key files are),
//  its start and deadline, and whether it is running or retired.
//  brokerkey_record writes it in TXN: the running rotation (after
//  brokerkey_start), or, RETIRED, its retirement, written before the
//  commit and done only once the standbys hold that pass
//  (brokerkey_set_recorded: the pass's SEQ; brokerkey_recorded says it,
//  0 until then and after the commit), so that no member elected after
//  the active switched serves the old key. Returns 0 (also when
//  insecure), or -1 (no next pair on disk, or the store refused).
int brokerkey_record (brokerkey_t *self, store_txn_t *txn, bool retired);
void brokerkey_set_recorded (brokerkey_t *self, uint64_t seq);
uint64_t brokerkey_recorded (const brokerkey_t *self);

//  A member about to serve (elected) makes its key files say what STORE's
//  row says, before they are read: a running rotation's next pair (and
//  its deadline) beside KEY_FILE's pair, or a retired one's pair as
//  KEY_FILE's (keynext_commit). Returns 1 when it changed a file, 0 when
//  they agreed, the store holds no rotation or a row that is not grid's
//  (logged), -1 with a sentence in ERR (a file that cannot be written:
//  the member must not serve a key the fleet may have left).
int brokerkey_adopt (const char *key_file, store_t *store, char *err,
                     size_t err_len);

//  The pair STORE's row says a retired rotation left (the caller owns
//  it), or NULL (no row, a running rotation, a row that is not grid's):
//  what a standby's endpoints serve with, its files left alone.
zcert_t *brokerkey_retired_pair (store_t *store);

#endif
