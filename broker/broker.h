/*  =========================================================================
    broker - gridbroker's server: sockets, the loop, its timers and
    signals, and the pass end

    One thread, one zloop. Three sockets: a ROUTER for clients, a ROUTER for
    agents (ZMQ_ROUTER_MANDATORY) and an XPUB for commands. Each loop pass
    (one socket reading up to a batch of messages, or one tick) decodes,
    feeds the registry and the scheduler with the monotonic clock, drains
    the scheduler's actions into ONE store write transaction and an outbox,
    commits, and only then sends the outbox (group commit: nothing is
    acknowledged before it is durable). A tick first reads what waits on
    the agent socket, and judges deadlines by the last time it found that
    socket empty, so a broker that falls behind does not time out acks
    that are already in its own queue.

    The server is the only owner of the loop, its timers and signals, and
    of the pass end. Handlers see it through a narrow context (ctx.h); the
    server's own struct is private to broker.c.

    Threading: the broker runs in the thread that calls broker_run.
    =========================================================================
*/
#ifndef GRID_BROKER_H
#define GRID_BROKER_H

#include <czmq.h>

#include "config.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct _broker_t broker_t;

//  Opens the store, restores nodes and jobs, binds the sockets. Returns
//  NULL with a sentence in ERR on failure. CONFIG is copied.
broker_t *broker_new (const broker_config_t *config, char *err, size_t err_len);

//  Makes SELF the active of a broker cluster (its config's ha:) for the
//  leadership of EPOCH, valid until VALID_UNTIL (monotonic ms), that
//  ELECTOR (borrowed; the cluster's runner owns it) won: binds the
//  replication endpoint, ships every written pass to the standbys and
//  sends nothing a pass answers before the sync standbys hold it
//  (repl.h). The elector's DEMOTED, or a validity that passes without a
//  renewal, stops the loop at once with nothing more sent (broker_demoted).
//  Returns 0, or -1 with a sentence in ERR.
int broker_lead (broker_t *self, zactor_t *elector, uint64_t epoch,
                 int64_t valid_until, char *err, size_t err_len);

//  True when SELF lost its leadership (broker_lead): its store may hold
//  passes no standby acknowledged; it must catch up from the new active.
bool broker_demoted (broker_t *self);

//  Runs until SIGINT/SIGTERM. Returns 0.
int broker_run (broker_t *self);

//  Commits what is pending, closes sockets and the store; NULL-safe.
void broker_destroy (broker_t **self_p);

//  Makes SIGHUP reload the configuration through READ (with ARG): what
//  can change while the broker runs changes at once and no session drops
//  (reload.h says what); a failed read is logged and changes nothing.
//  SIGHUP must be blocked in every thread (block it in main() before any
//  thread starts). Returns 0 or -1 (errno).
int broker_reload_on_sighup (broker_t *self, broker_config_fn *read,
                             void *arg);

//  The monotonic and the wall clock in ms, as the server reads them
//  (handlers read the context's clock).
int64_t broker_now_ms (void);
int64_t broker_wall_ms (void);

#endif
