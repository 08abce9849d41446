/*  =========================================================================
    outpace - the pace of the acks of live output pieces, fleet-wide

    A live output piece (PROTOCOL.md 4.1 rule 8a) costs the broker the
    same whatever its size, and an agent keeps one live piece of a stream
    in flight: its next piece waits for the last one's output_ack and
    carries all that was printed meanwhile. So the broker sets how many
    pieces a fleet sends by when it acknowledges them: at most RATE acks
    of live pieces a second (results.output_rate), the rest held here,
    oldest first, and sent as the rate allows. A thousand agents that
    stream at once then send fewer, larger pieces, and the results of
    other jobs do not wait behind them. Nothing is lost or sent twice:
    a held ack stands for a piece stored in the pass that held it, is
    dropped with that pass when its commit fails, and waits at most
    OUTPACE_MAX_WAIT_MS (well within an agent's re-send interval, so the
    agent does not send the piece again meanwhile).

    Pure: no sockets, no store, no clock (the caller gives the time).
    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_OUTPACE_H
#define GRID_BROKER_OUTPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/names.h"

#define OUTPACE_MAX_WAIT_MS 2000     //  A held ack goes after this at most
#define OUTPACE_MAX_HELD 65536       //  Held acks at most; past it, at once
#define OUTPACE_TICK_MS 5            //  The broker looks at them this often
                                     //  at most when nothing else happens

typedef struct _outpace_t outpace_t;

//  The ack of one stored piece.
typedef struct {
    char node [NAME_MAX_LEN + 1];    //  The node that sent it
    char job [JOB_ID_LEN + 1];       //  Its cell: job, step, attempt
    uint32_t step;
    uint32_t attempt;
    bool stderr_;                    //  Standard error, else output
    uint64_t offset;                 //  Where it starts in its stream
    int64_t held_ms;                 //  When it was held
} outpace_ack_t;

//  A new pacer with no held acks and a full budget.
outpace_t *outpace_new (void);

//  Frees the pacer; NULL-safe, nulls *self_p.
void outpace_destroy (outpace_t **self_p);

//  Whether the ack of a live piece read at NOW_MS may go with its pass,
//  at RATE acks a second (0: no limit, always true): only when no ack is
//  held (they go first) and the budget, which refills at RATE and holds
//  a tenth of a second's worth, has one; that one is spent.
bool outpace_take (outpace_t *self, uint32_t rate, int64_t now_ms);

//  Holds ACK (copied), stored in the pass under way. Returns false when
//  OUTPACE_MAX_HELD are held already: then it is to go at once.
bool outpace_hold (outpace_t *self, const outpace_ack_t *ack);

//  The pass under way committed: its held acks stand.
void outpace_commit (outpace_t *self);

//  The pass under way was not stored: the acks it held are dropped (the
//  agents send those pieces again).
void outpace_abort (outpace_t *self);

//  The oldest held ack when it may go at NOW_MS (the budget at RATE has
//  one, which is spent, or it waited OUTPACE_MAX_WAIT_MS): copied into
//  *ACK and no longer held. False when none may go yet. An ack of the
//  pass under way may go too; it is sent after that pass's commit.
bool outpace_next (outpace_t *self, uint32_t rate, int64_t now_ms,
                   outpace_ack_t *ack);

//  When outpace_next will next give an ack (at RATE, seen at NOW_MS):
//  NOW_MS or later; INT64_MAX when none is held.
int64_t outpace_due_ms (const outpace_t *self, uint32_t rate,
                        int64_t now_ms);

//  Acks held now.
size_t outpace_held (const outpace_t *self);

#endif
