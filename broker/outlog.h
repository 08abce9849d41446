/*  =========================================================================
    outlog - the output pieces the broker kept lately, in arrival order

    Each piece of a running job's output that the broker stores (PROTOCOL.md
    4.1 rule 8a) is noted here with a sequence number, so that a client
    that follows a whole job (job.output_events, the HTTP event stream)
    learns which cells printed what since it last asked, without asking
    every cell. Only where the piece lies is noted; its bytes stay in the
    store. The log is a ring of a fixed number of entries: a client that
    falls that far behind is told it lost some (and reads them with
    job.output). Sequence numbers start at 1 with each broker run.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_OUTLOG_H
#define GRID_BROKER_OUTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/names.h"

#define OUTLOG_ENTRIES 8192      //  Pieces remembered, all jobs together

typedef struct _outlog_t outlog_t;

//  One piece noted.
typedef struct {
    uint64_t seq;                //  Its place in the log, from 1
    char job [JOB_ID_LEN + 1];   //  Job id
    uint32_t step;               //  Step
    char node [NAME_MAX_LEN + 1];  //  The node that printed it
    uint32_t attempt;            //  Attempt
    bool stderr_;                //  Standard error, else output
    uint64_t offset;             //  Where it starts in its stream
    size_t len;                  //  Its bytes
} outlog_entry_t;

//  A new empty log of CAPACITY entries (0: OUTLOG_ENTRIES).
outlog_t *outlog_new (size_t capacity);

//  Frees the log; NULL-safe, nulls *self_p.
void outlog_destroy (outlog_t **self_p);

//  Notes a piece; returns its sequence number.
uint64_t outlog_add (outlog_t *self, const char *job, uint32_t step,
                     const char *node, uint32_t attempt, bool stderr_,
                     uint64_t offset, size_t len);

//  The first entry of JOB with a sequence number above AFTER, or NULL.
//  Lent until the next outlog_add.
const outlog_entry_t *outlog_next (const outlog_t *self, const char *job,
                                   uint64_t after);

//  The newest sequence number (0: nothing noted yet).
uint64_t outlog_last (const outlog_t *self);

//  Whether entries above AFTER have already left the ring.
bool outlog_lost (const outlog_t *self, uint64_t after);

#endif
