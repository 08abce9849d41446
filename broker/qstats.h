/*  =========================================================================
    qstats - a ring of timed samples with percentiles over a window

    The broker keeps two: how long work waited (job submitted to step
    started) and how long it ran (as the agents measured it). Adding a
    sample is O(1) and allocates nothing; nothing is stored on disk. A
    query sorts the samples of the window: O(n log n) in the samples kept,
    at most the ring's capacity (the newest ones win).

    Threading: one ring belongs to one thread.
    =========================================================================
*/
#ifndef GRID_QSTATS_H
#define GRID_QSTATS_H

#include <stddef.h>
#include <stdint.h>

#define QSTATS_CAPACITY 65536    //  Samples a ring keeps

typedef struct _qstats_t qstats_t;

//  A new ring of QSTATS_CAPACITY samples.
qstats_t *qstats_new (void);

//  Frees the ring; NULL-safe, nulls *self_p.
void qstats_destroy (qstats_t **self_p);

//  Adds a sample VALUE_MS taken at NOW_MS (monotonic; samples come in
//  time order). Negative values count as 0.
void qstats_add (qstats_t *self, int64_t now_ms, int64_t value_ms);

//  The samples taken in the last WINDOW_MS before NOW_MS: how many, and
//  their 50th and 99th percentiles (nearest rank; 0 when none).
size_t qstats_percentiles (qstats_t *self, int64_t now_ms, int64_t window_ms,
                           int64_t *p50_p, int64_t *p99_p);

#endif
