/*  =========================================================================
    status - what a relay says of itself: the replies to `status` and
    `metrics.get` on its status endpoint (PROTOCOL.md 4.3, docs/METRICS.md),
    written from a snapshot of its figures that the relay takes

    Nothing here touches a socket or the clock.

    Threading: the relay's thread only.
    =========================================================================
*/
#ifndef GRID_RELAY_STATUS_H
#define GRID_RELAY_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pw.h"

//  The relay's figures at one moment. The strings are borrowed from the
//  relay for the time of one reply.
typedef struct {
    const char *name;            //  The relay's name
    int64_t uptime_ms;           //  Since it started
    const char *upstream;        //  The upstream endpoint in use
    bool connected;              //  Its handshake stands
    int64_t since_ms;            //  Since connected changed
    bool serving;                //  The downstream endpoints are bound
    size_t agents;               //  Agents of its own that were welcomed
    size_t topics;               //  Topics subscribed upstream
    size_t peers;                //  Downstream peers heard from
    uint64_t up;                 //  Messages forwarded upstream
    uint64_t down;               //  Messages forwarded downstream
    uint64_t commands;           //  Commands republished
    uint64_t malformed;          //  Frames of a wrong shape, dropped
    uint64_t unroutable;         //  For a peer that is gone, dropped
    uint64_t dropped;            //  Not sent (upstream full or down)
    uint64_t refused_topics;     //  Subscriptions not granted
    uint64_t refused;            //  Errors the upstream sent the relay
    uint64_t stale_epoch;        //  From a demoted active, dropped
    uint64_t redirects;          //  A standby's redirects followed
    uint64_t failovers;          //  Moves to the next upstream
    uint64_t key_swaps;          //  Broker keys tried on reconnection
    size_t batches;              //  Result batches sent upstream
    size_t batched;              //  Results they carried
    size_t batches_down;         //  Batches read from upstream
} relay_figures_t;

//  Writes into WRITER (reset by the caller) the ok reply to the status
//  request ID: {name, version, uptime_ms, upstream {endpoint, connected,
//  since_ms}, serving, agents, topics, counters {...}}.
void relay_status_write (const relay_figures_t *figures, const char *id,
                         pw_t *writer);

//  Writes into WRITER the ok reply to the metrics.get request ID: {text},
//  the figures in the Prometheus text format (gridrelay_*).
void relay_metrics_write (const relay_figures_t *figures, const char *id,
                          pw_t *writer);

#endif
