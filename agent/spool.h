/*  =========================================================================
    spool - the agent's durable record of the work it took

    Every command the agent takes leaves a trace here before the broker
    hears of it, so nothing is lost or run twice across a crash:

        ack sent        key -> the encoded ACK        (state ACKED)
        started sent    key -> the encoded STARTED    (state STARTED)
        result sent     key -> the encoded RESULT     (state RESULT)
        result_ack      key deleted, a done record kept (state DONE),
                        on disk with the next commit (below)

    A result whose output goes in pieces (PROTOCOL.md, `output`) leaves
    each piece here too, before it is sent, under "job|step|attempt|
    stream|offset" (stream 'o' or 'e'), until the broker's output_ack;
    pieces are re-sent with the results and count as unacknowledged.

    The key is "job|step|attempt". Results stay until the broker
    acknowledges them and are re-sent until it does. At start, an entry
    still ACKED or STARTED means the agent died with that task in hand: it
    becomes an "interrupted" result (spool_recover). Done records (the last
    done_keep of them) let a replayed command be recognised after a restart
    and never run again.

    Storage: STORE_DB_SPOOL of an LMDB environment (store.h) in the
    directory given to spool_open. Every record the agent announces (an
    ack, a started, a result, an output piece) is committed, durably,
    before the announcement. A result_ack is the one change nothing
    waits on: it takes effect in memory at once (the result is no longer
    re-sent, a replayed command is recognised as done) and reaches the
    disk with the next commit, or spool_flush, which the agent calls
    within a second and at close. Should the agent die before that, it
    finds the result still waiting and sends it again: the broker, which
    has it, acknowledges it again (as after a death between the broker's
    result_ack and its commit). One commit per job is saved so.
    Done records live under keys "#|job|step|attempt" (a job id never
    starts with '#'), valued by an 8-byte big-endian sequence number.

    Threading: one spool per process, used from one thread.
    =========================================================================
*/
#ifndef GRID_SPOOL_H
#define GRID_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"

#define SPOOL_DONE_KEEP 4096     //  Default number of done records kept
#define SPOOL_KEY_MAX 128        //  Longest "job|step|attempt" key

typedef struct _spool_t spool_t;

typedef enum {
    SPOOL_NONE = 0,              //  Never seen (or long forgotten)
    SPOOL_ACKED,                 //  Taken, not started
    SPOOL_STARTED,               //  Running
    SPOOL_RESULT,                //  Finished, result not yet acknowledged
    SPOOL_DONE,                  //  Finished and acknowledged
    SPOOL_OUTPUT                 //  An output piece not yet acknowledged
} spool_state_t;

//  Called for each unacknowledged result or output piece: KEY is its
//  spool key, DATA/SIZE its encoded body, valid during the call only.
//  Returns true when it counts towards spool_each_result's MAX (it sent
//  it), false when it passed it over.
typedef bool (spool_each_fn) (void *arg, const char *key, const void *data,
                              size_t size);

//  Opens (creating) the spool in directory DIR, keeping at most DONE_KEEP
//  done records (0: SPOOL_DONE_KEEP). Entries that do not decode are
//  dropped. Returns NULL with a sentence in ERR.
spool_t *spool_open (const char *dir, size_t done_keep, char *err,
                     size_t err_len);

//  What opening the spool's store did to migrate it, one sentence per
//  INDEX from 0, or NULL past the last (store_migration). Owned by SELF.
const char *spool_migration (spool_t *self, size_t index);

//  Closes the spool, committing what spool_flush would first; NULL-safe,
//  nulls *self_p.
void spool_destroy (spool_t **self_p);

//  Writes "job|step|attempt" into BUF (SPOOL_KEY_MAX bytes).
void spool_key (const char *job, uint32_t step, uint32_t attempt, char *buf,
                size_t buf_len);

//  Where (job, step, attempt) stands.
spool_state_t spool_state (spool_t *self, const char *job, uint32_t step,
                           uint32_t attempt);

//  True when KEY (of spool_each_result) is an output piece's.
bool spool_key_is_output (const char *key);

//  Writes the key of an output piece into BUF (SPOOL_KEY_MAX bytes).
void spool_output_key (const char *job, uint32_t step, uint32_t attempt,
                       const char *stream, uint64_t offset, char *buf,
                       size_t buf_len);

//  Records MSG (an ACK, STARTED, RESULT or OUTPUT) under its key,
//  replacing what was there, and commits (with the acknowledgements not
//  yet on disk). Returns 0, or -1 with a sentence in ERR (store full or
//  failing, or MSG does not encode).
int spool_put (spool_t *self, const proto_msg_t *msg, char *err,
               size_t err_len);

//  The encoded RESULT for (job, step, attempt), copied into a fresh
//  buffer (caller frees). Returns 0, or -1 when there is none.
int spool_result (spool_t *self, const char *job, uint32_t step,
                  uint32_t attempt, void **data_p, size_t *size_p);

//  The broker has the result: the entry goes and a done record stays
//  (trimming the oldest beyond done_keep), at once in memory, on disk
//  with the next commit (spool_flush). Returns 0 (also when there was no
//  such entry: a duplicate result_ack), or -1 when memory runs out.
int spool_ack (spool_t *self, const char *job, uint32_t step,
               uint32_t attempt);

//  spool_ack for the COUNT results in ACKS (a result_acks). *UNKNOWN_P
//  (may be NULL) gets how many named no result waiting for its ack
//  (unknown, already acknowledged, or repeated). Returns 0, or -1 when
//  memory runs out (then nothing changed).
int spool_ack_many (spool_t *self, const proto_ack_t *acks, size_t count,
                    size_t *unknown_p);

//  Commits the acknowledgements not yet on disk (none: nothing). Returns
//  0, or -1 on a store failure (they wait for the next commit then).
int spool_flush (spool_t *self);

//  How many changes of acknowledgements wait for a commit.
size_t spool_unflushed (spool_t *self);

//  The broker has the output piece: deletes it. Returns 0 (also when
//  there was none: a duplicate output_ack), or -1 on a store failure.
int spool_ack_output (spool_t *self, const char *job, uint32_t step,
                      uint32_t attempt, const char *stream, uint64_t offset);

//  Turns every ACKED or STARTED entry into an "interrupted" RESULT from
//  NODE. Returns how many, or -1 on a store failure.
int spool_recover (spool_t *self, const char *node);

//  Calls FN for the unacknowledged results and output pieces, in key
//  order, until up to MAX (0: all) of the calls returned true. Returns
//  how many did.
size_t spool_each_result (spool_t *self, spool_each_fn *fn, void *arg,
                          size_t max);

//  Number of unacknowledged results and output pieces.
size_t spool_unacked (spool_t *self);

#endif
