/*  =========================================================================
    blobs - the agent's blob cache and the fetch of blobs from the broker

    A file.put of a blob (params sha256 and size instead of content)
    needs the blob on this host. The cache is a directory (under the
    state_dir, "<state_dir>/blobs"): a complete blob is the file named by
    its sha256, checked against it before it took that name; a fetch
    under way is "<sha256>.part". A blob in the cache is never fetched
    again; when the cache passes its cap, the least recently used blobs
    go (never one a task waits for).

    The fetch goes over the agent's connection, one chunk at a time:
    blob_get asks for the chunk at an offset (acknowledging the one
    before), the broker answers blob_chunk. Blobs are fetched one after
    the other. A fetch cut short (the link down, the agent restarted)
    goes on from the bytes the .part file holds. A blob_chunk that says
    why not (an unknown blob...), one of the wrong size, or a content
    whose digest is not its name fails every task that waits for it; such
    chunks (and chunks not asked for, dropped) are counted and logged.

    Waiters are opaque to this module (the agent's deferred tasks): READY
    hands each one back once, with NULL (the blob is in the cache) or a
    sentence (it cannot be had).

    Threading: the agent's loop only.
    =========================================================================
*/
#ifndef GRID_AGENT_BLOBS_H
#define GRID_AGENT_BLOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"
#include "link.h"

#define AGENT_BLOBS_DIR "blobs"                 //  Under the state_dir
#define AGENT_BLOBS_DEFAULT_CAP ((uint64_t) 1 << 30)  //  Cache cap (bytes)
#define AGENT_BLOBS_RETRY_MS 10000   //  A blob_get unanswered this long is
                                     //  asked again

typedef struct _agent_blobs_t agent_blobs_t;

//  WAITER's blob is in the cache (ERROR NULL) or cannot be had (ERROR).
typedef void (agent_blobs_ready_fn) (void *arg, void *waiter,
                                     const char *error);

//  A cache in DIR (made when missing) of at most CAP_BYTES, for node
//  NODE, fetching over LINK (both borrowed; they outlive the cache).
//  Returns it, or NULL with a sentence in ERR.
agent_blobs_t *agent_blobs_new (const char *dir, uint64_t cap_bytes,
                                const char *node, link_t *link,
                                agent_blobs_ready_fn *ready, void *arg,
                                char *err, size_t err_len);

//  Frees SELF (waiters are dropped unanswered); NULL-safe, nulls *self_p.
void agent_blobs_destroy (agent_blobs_t **self_p);

//  The cache's directory (what backend_context_t.blob_dir lends).
const char *agent_blobs_dir (const agent_blobs_t *self);

//  Whether SHA256 is in the cache (complete, checked).
bool agent_blobs_have (agent_blobs_t *self, const char *sha256);

//  WAITER waits for SHA256 of SIZE bytes; the fetch starts when the link
//  is welcomed with blobs granted. Returns 0, or -1 (out of memory, a
//  bad name, or a broker that did not grant blobs: then READY is not
//  called).
int agent_blobs_wait (agent_blobs_t *self, const char *sha256, uint64_t size,
                      void *waiter);

//  A blob_chunk from the broker.
void agent_blobs_on_chunk (agent_blobs_t *self, const proto_msg_t *chunk,
                           int64_t now_ms);

//  The link is welcomed (GRANTED: the broker granted blobs; when not,
//  every waiter fails), or down (WELCOMED false: nothing is asked until
//  the next welcome).
void agent_blobs_welcomed (agent_blobs_t *self, bool welcomed, bool granted,
                           int64_t now_ms);

//  Asks again for a chunk unanswered for AGENT_BLOBS_RETRY_MS.
void agent_blobs_tick (agent_blobs_t *self, int64_t now_ms);

//  Chunks received and blobs fetched whole since start (for logs, tests).
uint64_t agent_blobs_chunks (const agent_blobs_t *self);

//  blob_chunks refused since start: not asked for, of the wrong size, or
//  completing a content whose sha256 is not its name (each counted and
//  logged: the first ten, then every hundredth).
uint64_t agent_blobs_refused (const agent_blobs_t *self);

#endif
