/*  =========================================================================
    held - acks and starteds held back for a result that implies them

    A result implies the ack and the started of its attempt (PROTOCOL.md
    4.1 rules 4 and 7), so the many actions that finish quickly cost the
    broker one message instead of three. What is held goes out from a
    timer that fires every HOLD_MS / 2 while anything is held and sends
    what was held before its previous firing: each ack or started waits
    from half the hold to the whole hold. Two firings also mean at least
    two loop passes, so the result of an in-loop action, which the
    executor produces on the pass after the command, always comes first
    and goes alone. Holding changes nothing in the spool: the agent
    records progress before it is held.

    Threading: one held_t per agent, used from its loop's thread.
    =========================================================================
*/
#ifndef GRID_HELD_H
#define GRID_HELD_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>

#include "../proto/proto.h"
#include "link.h"

typedef struct _held_t held_t;

//  A new hold on LOOP, sending through LINK (both borrowed: they must
//  outlive it) as NODE, each held message for at most HOLD_MS. NULL when
//  memory runs out.
held_t *held_new (zloop_t *loop, link_t *link, const char *node,
                  int hold_ms);

//  Forgets what is held without sending it; NULL-safe, nulls *self_p.
void held_destroy (held_t **self_p);

//  Holds an ack or started (TYPE, PROTO_ACK or PROTO_STARTED) of the
//  attempt KEY ("job|step|attempt") of JOB. Should memory run out it is
//  sent at once instead.
void held_hold (held_t *self, proto_type_t type, const char *key,
                const char *job, uint32_t step, uint32_t attempt);

//  True when something is held for KEY.
bool held_holds (held_t *self, const char *key);

//  The ack of KEY went out by other means: it is no longer held (a
//  started held for KEY stays).
void held_ack_sent (held_t *self, const char *key);

//  The result of KEY goes now: what is held for it is implied.
void held_drop (held_t *self, const char *key);

//  Sends everything held, oldest first, each ack before its started
//  (shutdown).
void held_flush (held_t *self);

#endif
