/*  =========================================================================
    blobserve - which blob chunks the broker sends agents, and when

    Agents fetch a blob one chunk at a time: blob_get asks for the chunk
    at an offset and acknowledges the one before it, so a node has at most
    one chunk in flight. At most MAX_INFLIGHT nodes fetch at once: a node
    takes a slot with its first request and keeps it, each next chunk
    going at once, until its last chunk is sent (blobserve_forget); a
    request of a node without a slot waits its turn (one per node, oldest
    first). So however many agents fetch, the broker holds at most
    MAX_INFLIGHT chunks on their way, and as many connections keep their
    last chunk (libzmq holds a connection's last message until the next
    one). A node silent for BLOBSERVE_STALE_MS frees its slot.

    Pure: no socket, store or clock; the broker sends what
    blobserve_next hands out.

    Threading: one thread.
    =========================================================================
*/
#ifndef GRID_BROKER_BLOBSERVE_H
#define GRID_BROKER_BLOBSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/names.h"
#include "../proto/sha256.h"

#define BLOBSERVE_STALE_MS 30000    //  An unacknowledged chunk frees its slot

typedef struct _blobserve_t blobserve_t;

//  A chunk to send.
typedef struct {
    char node [NAME_MAX_LEN + 1];    //  To this node
    char sha256 [SHA256_HEX];        //  Of this blob
    uint64_t offset;                 //  At this offset
} blobserve_item_t;

//  A new server of at most MAX_INFLIGHT (>= 1) chunks in flight, or NULL.
blobserve_t *blobserve_new (size_t max_inflight);

//  Frees SELF; NULL-safe, nulls *self_p.
void blobserve_destroy (blobserve_t **self_p);

//  Changes the limit (a reload); chunks in flight stay.
void blobserve_set_max (blobserve_t *self, size_t max_inflight);

//  NODE asks for the chunk of SHA256 at OFFSET at NOW_MS (acknowledging
//  its chunk before). Returns 1 when it holds a slot: send it now; 0 when
//  it waits its turn (blobserve_next; a request it had waiting is
//  replaced); -1 when out of memory.
int blobserve_ask (blobserve_t *self, const char *node, const char *sha256,
                   uint64_t offset, int64_t now_ms);

//  NODE is done (its last chunk sent) or gone: its slot and its waiting
//  request are dropped.
void blobserve_forget (blobserve_t *self, const char *node);

//  Frees the slots of nodes that asked nothing since NOW_MS -
//  BLOBSERVE_STALE_MS.
void blobserve_expire (blobserve_t *self, int64_t now_ms);

//  The next request that may be sent now, into *ITEM (it is in flight
//  from NOW_MS on). Returns false when none may.
bool blobserve_next (blobserve_t *self, blobserve_item_t *item,
                     int64_t now_ms);

//  Nodes holding a slot now, and requests waiting.
size_t blobserve_inflight (const blobserve_t *self);
size_t blobserve_waiting (const blobserve_t *self);

#endif
