/*  =========================================================================
    gridbench_raw - the raw limits of this machine's libzmq under CURVE,
    measured in gridbench's own run

    A part of gridbench (linked into it, not a tool of its own). What a
    broker's broadcast and result ingest are judged against, with nothing
    of grid in the path: one PUB and N SUBs, one ROUTER and N DEALERs, on
    loopback TCP, every connection CURVE (fresh key pairs made in memory).

    Fan-out: one command-sized message (256 bytes) published to N
    subscribers; the time from the send until the last subscriber has it.
    ROUNDS rounds, one at a time; p50 and p99 of the rounds.

    Ingest: N DEALERs (all connected and past the handshake first) each
    send one result-sized message (160 bytes) to the ROUTER at once; the
    time from the first send to the ROUTER's Nth receive gives messages
    per second. ROUNDS rounds; the median rate.

    The PUB and the ROUTER live in a context of one I/O thread (as the
    broker's sockets do); the N peers in another context, read by two
    threads of their own.

    Threading: bench_raw_curve starts and joins its own threads; one call
    at a time.
    =========================================================================
*/
#ifndef GRID_GRIDBENCH_RAW_H
#define GRID_GRIDBENCH_RAW_H

#include <stddef.h>

typedef struct {
    size_t peers;               //  N
    size_t rounds;              //  Rounds measured
    double fanout_p50_ms;       //  -1: not measured
    double fanout_p99_ms;
    double ingest_per_s;        //  Median over the rounds, -1: not measured
    double connect_s;           //  N handshakes, both sets, wall time
    char error [256];           //  Why it stopped, "" when it did not
} bench_raw_t;

//  Measures both figures with PEERS subscribers and PEERS dealers, ROUNDS
//  rounds each, into FIGURES. Needs about 6 * PEERS open files.
void bench_raw_curve (size_t peers, size_t rounds, bench_raw_t *figures);

#endif
