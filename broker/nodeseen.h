/*  =========================================================================
    nodeseen - nodes' last-seen times in the store, between their records

    A node's record (ctx_save_node) is written when it registers, says
    bye, goes offline or is drained; its last-seen time moves with every
    message. Writing the record at every heartbeat would cost a write per
    heartbeat (and a record holds the node's whole hello, kilobytes); never
    writing it in between would show, after a broker restart, a node's
    last-seen time as of its registration. So the time is kept apart, 8
    bytes a node:

        node_seen  node id  ->  wall ms (8 bytes, big-endian)

    written for the nodes heard from since their time was last saved,
    oldest first, a bounded number at a time (the broker's tick, every
    `last_seen_save`), and for all of them at a clean stop. At start a
    node's saved time replaces its record's when it is later.

    Threading: reentrant; store transactions follow store.h's rules.
    =========================================================================
*/
#ifndef GRID_NODESEEN_H
#define GRID_NODESEEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../store/store.h"
#include "registry.h"

//  The tick saves every NODESEEN_EVERY_MS (or last_seen_save, when
//  shorter) at most NODESEEN_BATCH nodes, about 2,300 instructions each:
//  a few ms at most. Rare, large batches write each page of node_seen
//  once for many nodes: LMDB copies a whole page per commit that changes
//  it.
#define NODESEEN_DEFAULT_MS 120000  //  Default last_seen_save (2 min)
#define NODESEEN_EVERY_MS 5000      //  The tick saves at most this often...
#define NODESEEN_BATCH 5000         //  ...at most this many nodes a time

//  True when a node of REGISTRY heard from at or before BEFORE_MS (its
//  unsaved_since_ms, monotonic) has its last-seen time unsaved.
bool nodeseen_due (registry_t *registry, int64_t before_ms);

//  Writes the last-seen time of the nodes heard from at or before
//  BEFORE_MS since it was last saved, oldest first, at most LIMIT of them,
//  and notes each saved (registry_seen_saved). Returns how many, or a
//  negative STORE_ error (those written so far are noted; the rest wait).
int64_t nodeseen_save (store_txn_t *txn, registry_t *registry,
                       int64_t before_ms, size_t limit);

//  Gives every node of REGISTRY whose saved time is later than its
//  record's last_seen_wall_ms that time. Returns how many it changed.
size_t nodeseen_restore (store_txn_t *txn, registry_t *registry);

#endif
