/*  =========================================================================
    pieces - when each output piece was last sent, for the re-send round

    The agent's re-send timer sends again what the broker has not
    acknowledged. A live output piece may wait for its ack a while by
    design: the broker paces those acks (up to 2 s, broker/outpace.c), so
    sending every unacknowledged piece whatever its age would repeat pieces
    that are on their way. This module remembers when each piece went
    (first send or last re-send), so that a round re-sends only the pieces
    that have waited at least the re-send interval. Delivery does not
    depend on it: a piece it does not know (the agent restarted, or a new
    session began) is due at once, and every stamp expires after the
    interval, so a piece without its ack goes again in some later round.

    Threading: one pieces_t per agent, used from its loop's thread.
    =========================================================================
*/
#ifndef GRID_PIECES_H
#define GRID_PIECES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _pieces_t pieces_t;

//  A new record where a piece is due again INTERVAL_MS after it was
//  sent. NULL when memory runs out.
pieces_t *pieces_new (int64_t interval_ms);

//  Frees it; NULL-safe, nulls *self_p.
void pieces_destroy (pieces_t **self_p);

//  The piece whose spool key is KEY (spool_output_key) went at NOW_MS.
//  Should memory run out it is not remembered (then it is due at once).
void pieces_sent (pieces_t *self, const char *key, int64_t now_ms);

//  True when the piece KEY should go again at NOW_MS: it was not sent
//  within the interval (or is not known).
bool pieces_due (pieces_t *self, const char *key, int64_t now_ms);

//  The broker has the piece KEY: it is forgotten.
void pieces_acked (pieces_t *self, const char *key);

//  A new session: every piece is due (the broker may have lost them).
void pieces_reset (pieces_t *self);

//  Forgets the stamps older than the interval (they are due anyway), so
//  that the record holds at most what went within one interval.
void pieces_prune (pieces_t *self, int64_t now_ms);

//  How many pieces it remembers.
size_t pieces_size (pieces_t *self);

#endif
