/*  =========================================================================
    epoch - the fence a broker cluster's epoch puts at agents and relays

    A cluster's active is elected on etcd; the create revision of its
    leader key is the epoch of that leadership, and it only grows. What an
    active sends an agent that took the epoch feature carries its epoch
    (PROTOCOL.md 4.2, docs/HA.md). The gate remembers the highest epoch
    its owner has seen and refuses a message of a lower one: a demoted
    active that woke up (a paused VM, a stopped process) can neither
    acknowledge a result the new active never got nor start a step.

    The rules:
      - epoch 0 (a message that carries none) means "no cluster": a broker
        alone, or a broadcast that also reaches agents that do not take the
        key. It always passes and changes nothing, so a lone broker that
        replaces a cluster, or a cluster that replaces one, strands nobody.
      - a higher epoch passes and becomes the highest (a failover).
      - a lower one is refused, counted, and worth one warning per epoch
        (epoch_gate_judge tells when).
      - a welcome of a lower epoch is refused too, but only for
        EPOCH_WELCOME_HOLD_MS: if no broker of the highest epoch or a later
        one welcomed us since the first refusal, the cluster's etcd was
        rebuilt (its revisions start again), and the welcome's epoch is
        taken as the new highest.

    The highest epoch is kept in a file (one decimal line) when the gate has
    one: written (to a temporary file, then renamed) each time it rises, so
    a restarted agent keeps its fence. A missing file is epoch 0; an
    unreadable or corrupt one is logged and taken as 0.

    Threading: one owner thread per gate. The gate reads no clock: callers
    give the time.
    =========================================================================
*/
#ifndef GRID_PROTO_EPOCH_H
#define GRID_PROTO_EPOCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

//  How long welcomes of a lower epoch are refused before one is taken
#define EPOCH_WELCOME_HOLD_MS 60000

//  What the gate says of a message.
typedef enum {
    EPOCH_PASS = 0,       //  Take it
    EPOCH_REFUSE,         //  Drop it (lower epoch), already warned of
    EPOCH_REFUSE_WARN,    //  Drop it, the first of its epoch: warn
    EPOCH_RESET           //  A welcome taken after the hold: its epoch is
                          //  the new highest (warn)
} epoch_verdict_t;

typedef struct _epoch_gate_t epoch_gate_t;

//  A gate whose highest epoch lives in the file PATH (NULL: in memory
//  only), read now. Returns NULL only when out of memory.
epoch_gate_t *epoch_gate_new (const char *path);

//  Frees the gate; NULL-safe, nulls *self_p.
void epoch_gate_destroy (epoch_gate_t **self_p);

//  Judges a message of EPOCH (0: it carries none) that came at NOW_MS
//  (monotonic); WELCOME when it is a welcome. Passing a higher epoch
//  raises the highest (and writes the file).
epoch_verdict_t epoch_gate_judge (epoch_gate_t *self, uint64_t epoch,
                                  bool welcome, int64_t now_ms);

//  The highest epoch seen (0: none).
uint64_t epoch_gate_highest (const epoch_gate_t *self);

//  Messages refused so far.
uint64_t epoch_gate_refused (const epoch_gate_t *self);

//  The "epoch" of the msgpack map DATA (SIZE bytes), a message body, read
//  without decoding it: 0 when the map has no such key (or it is there
//  twice, or is not an unsigned int). For a relay that forwards bytes.
uint64_t epoch_of_body (const void *data, size_t size);

#endif
