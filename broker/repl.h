/*  =========================================================================
    repl - a broker cluster's replication: the active's source, a
    standby's sink

    The active broker journals each pass's write transaction (store.h,
    store_txn_journal) and ships it to every standby with a sequence
    number just before its own commit, so that the two commits (and their
    fsyncs) run side by side; a pass shipped whose commit then fails here
    makes this broker leave the lead when a standby may hold it. The pass also puts the store's META "repl"
    key (REPL_META_KEY: epoch, then seq, 8 bytes big-endian each), so a
    store always says which pass it holds last, and a standby that applies
    the journal records it in the same transaction. A standby applies each
    pass in one transaction, commits it, and acknowledges its seq. The
    active sends what a pass answers (client replies, agent acks,
    commands) only once every standby of the SYNC SET acknowledged the
    pass (repl_source_released): nothing a client or agent saw can be lost
    by a failover to a sync standby.

    The sync set is recorded in etcd (the sync key, ha/elector.h): only
    members it names may be elected. The source says what it wants
    recorded (repl_source_sync_wanted: the standbys caught up), the
    broker has the elector write it, and tells the source once written
    (repl_source_sync_recorded). A standby is IN THE SYNC SET when it is
    caught up and the key names it. The release point waits for every
    member the key names and every standby caught up but not yet named:
    a standby added counts for acks at once and for "in sync" once named;
    a standby dropped holds releases back until the key no longer names
    it. Nothing is released before this leadership first wrote the key.

    A standby that connects says the (epoch, seq) its store holds last.
    When the active still holds the passes after it in memory (its log,
    REPL_LOG_MAX_BYTES at most), of its own epoch, it sends them; otherwise
    it sends a SNAPSHOT: a compacted copy of its store (store_copy_apart,
    taken by a thread of its own from one read transaction while the
    loop serves on; standbys that ask meanwhile share it), in chunks the
    standby acknowledges (a window of REPL_SNAP_WINDOW), then the passes
    after it (the copy may hold a few passes past the seq it announces:
    the standby acknowledges what it holds, and follows from there). A standby that caught up (acknowledged the last
    pass shipped) joins the sync set; one that leaves a pass unacknowledged
    past SYNC_TIMEOUT_MS, or is silent past REPL_SILENT_MS, leaves it
    (logged at warn). A standby that cannot apply or commit a pass (its
    map at its ceiling, its disk full) asks again at once the first time
    (a map that may grow has grown by then), then says why once, at
    error, with its map's size and ceiling, reads no pass, and asks again
    after REPL_RETRY_MS, doubling up to REPL_RETRY_MAX_MS: it falls out
    of the sync set without a storm of hellos and replays, and follows
    again once it has room (restarted with a larger map, it catches up
    from the log or a snapshot). With no sync standby, the active releases alone
    (logged at warn), unless STRICT: then it holds everything until a
    standby is in sync.

    Wire (ZeroMQ multipart; numbers 8 bytes big-endian), standby to
    active over a DEALER, active to standby over a ROUTER (CURVE: the
    active's key, the standbys' keys enrolled in the cluster's config):

        HELLO name epoch seq      the standby's last pass
        ACK seq                   applied and committed through seq
                                  (also the answer to a PING of its
                                  epoch: an idle standby is heard)
        SNAPACK offset            snapshot bytes received so far
        PASS epoch seq journal    a pass
        SNAP epoch seq offset bytes   a piece of a snapshot at seq
        SNAPEND epoch seq size    the snapshot is whole
        PING epoch seq sync       the active's last seq; sync: 1 when
                                  this standby is in the sync set
        REFUSED reason            the active will not serve this standby

    A standby refuses anything of an epoch lower than the highest it saw.

    Threading: the broker's thread only (the source's snapshot copy runs
    on a thread it starts and joins itself).
    =========================================================================
*/
#ifndef GRID_REPL_H
#define GRID_REPL_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "../store/store.h"

#define REPL_META_KEY "repl"              //  META: epoch | seq (16 bytes)
#define REPL_LOG_MAX_BYTES (64u << 20)    //  Passes kept for catching up
#define REPL_SNAP_CHUNK (1u << 20)        //  Snapshot piece
#define REPL_SNAP_WINDOW 8                //  Pieces in flight at most
#define REPL_PING_MS 1000                 //  The active pings this often
#define REPL_SILENT_MS 5000               //  Silent this long: gone
#define REPL_RETRY_MS 1000                //  A standby that cannot take a
#define REPL_RETRY_MAX_MS 30000           //  pass asks again after this,
                                          //  doubling up to that
#define REPL_MAX_SYNC 16                  //  Members a sync key names
#define REPL_SYNC_NAMES (REPL_MAX_SYNC * 64)  //  Their names, with commas

//  Reads the (epoch, seq) of the last pass STORE holds (0, 0 for none).
void repl_store_position (store_t *store, uint64_t *epoch, uint64_t *seq);

//  Puts the META "repl" key of pass (EPOCH, SEQ) in TXN.
int repl_store_mark (store_txn_t *txn, uint64_t epoch, uint64_t seq);

//  ---------------------------------------------------------------------
//  The active's side

typedef struct _repl_source_t repl_source_t;

typedef struct {
    uint64_t epoch;              //  This leadership's epoch
    int64_t sync_timeout_ms;     //  A sync standby acks a pass within this
    bool strict;                 //  No sync standby: hold, never act alone
    const char *snapshot_path;   //  Where snapshots are written
} repl_source_config_t;

//  A source on SOCKET (a bound ROUTER; taken), reading STORE (borrowed,
//  must outlive it), whose last pass is (epoch, SEQ) of its store.
repl_source_t *repl_source_new (const repl_source_config_t *config,
                                zsock_t **socket_p, store_t *store);

void repl_source_destroy (repl_source_t **self_p);

//  The socket, for the loop's reader.
zsock_t *repl_source_socket (repl_source_t *self);

//  The seq the next written pass takes.
uint64_t repl_source_next_seq (repl_source_t *self);

//  Ships pass SEQ (repl_source_next_seq), whose journal is JOURNAL (SIZE
//  bytes, copied), written whole in its transaction: before its commit,
//  so that the standbys commit it while this store does. Nothing of the
//  pass may be released before that commit returned (a failed one:
//  repl_source_unship).
void repl_source_ship (repl_source_t *self, uint64_t seq, const void *journal,
                       size_t size, int64_t now_ms);

//  Pass SEQ, shipped (the last), could not be committed here: returns 0
//  when no standby was sent it (it is forgotten: the next pass takes its
//  number), or -1 when one may hold it (this store and that one differ).
int repl_source_unship (repl_source_t *self, uint64_t seq);

//  Reads what waits on the socket.
void repl_source_read (repl_source_t *self, int64_t now_ms);

//  Pings, ends snapshots' and standbys' time, sends a snapshot whose copy
//  is taken: call about every 100 ms.
void repl_source_tick (repl_source_t *self, int64_t now_ms);

//  What the active may release: every pass up to this seq.
uint64_t repl_source_released (repl_source_t *self);

//  The sync set to record in etcd (names of the standbys caught up,
//  sorted, comma-separated) into BUF: true when it differs from what was
//  asked last, with *GEN_P its new number (1 up); false when nothing new
//  is to be written.
bool repl_source_sync_wanted (repl_source_t *self, char *buf, size_t len,
                              uint64_t *gen_p);

//  etcd's sync key now names NAMES (comma-separated; "" none): releases
//  and "in sync" follow it from now.
void repl_source_sync_recorded (repl_source_t *self, const char *names,
                                int64_t now_ms);

//  True once this leadership wrote the sync key.
bool repl_source_sync_written (repl_source_t *self);

//  The last seq shipped.
uint64_t repl_source_last (repl_source_t *self);

//  How many standbys are connected, and in the sync set (caught up and
//  named by the sync key).
size_t repl_source_standbys (repl_source_t *self);
size_t repl_source_sync_count (repl_source_t *self);

//  Writes the standbys as "name:state:acked" separated by commas into BUF.
void repl_source_describe (repl_source_t *self, char *buf, size_t len);

//  One standby, as cluster.status shows it.
typedef struct {
    char name [64];
    const char *state;           //  "snapshot", "replay", "live"
    bool sync;                   //  In the sync set
    uint64_t acked;              //  Applied through this pass
    int64_t heard_ms;            //  Monotonic: last heard
    int64_t lag_ms;              //  How long its oldest pass not yet
                                 //  acknowledged has waited (0: none)
} repl_standby_info_t;

//  Standby INDEX (0 up), or false past the last.
bool repl_source_standby_at (repl_source_t *self, size_t index,
                             int64_t now_ms, repl_standby_info_t *info);

//  ---------------------------------------------------------------------
//  A standby's side

typedef struct _repl_sink_t repl_sink_t;

//  A sink named NAME that keeps STORE_P's store (*STORE_P: it replaces
//  it by a snapshot's, closing the old; DIR, MAP_BYTES, MAX_MAP_BYTES
//  reopen it) up to date from the active.
repl_sink_t *repl_sink_new (const char *name, const char *dir,
                            size_t map_bytes, size_t max_map_bytes,
                            store_t **store_p);

void repl_sink_destroy (repl_sink_t **self_p);

//  Follows the active at ENDPOINT: CURVE with CERT (this broker's pair)
//  to SERVER_KEY (Z85), or plain text when CERT is NULL. A sink that
//  followed another drops it (and a snapshot half received). Returns 0,
//  or -1 with a sentence in ERR.
int repl_sink_follow (repl_sink_t *self, const char *endpoint, zcert_t *cert,
                      const char *server_key, char *err, size_t err_len);

//  Stops following (no socket).
void repl_sink_unfollow (repl_sink_t *self);

//  The socket while following, or NULL.
zsock_t *repl_sink_socket (repl_sink_t *self);

//  Reads what waits: applies passes and snapshots, acknowledges. Returns
//  0, or -1 when the store cannot be written or replaced (logged; the
//  sink says hello again later).
int repl_sink_read (repl_sink_t *self, int64_t now_ms);

//  Says hello again after silence: call about every 100 ms.
void repl_sink_tick (repl_sink_t *self, int64_t now_ms);

//  The last active's last word said this standby is in its sync set:
//  it holds every pass that active released. It stays so through the
//  active's silence (the active may be dead: this standby may then take
//  over), and ends with a PING that says otherwise or a snapshot begun.
bool repl_sink_in_sync (repl_sink_t *self);

//  The highest epoch seen, and the (epoch, seq) of the last pass applied.
uint64_t repl_sink_epoch_seen (repl_sink_t *self);
void repl_sink_position (repl_sink_t *self, uint64_t *epoch, uint64_t *seq);

//  When the active was last heard (monotonic ms; 0: never).
int64_t repl_sink_heard_ms (repl_sink_t *self);

#endif
