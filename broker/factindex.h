/*  =========================================================================
    factindex - which nodes have which fact values, for targets by fact

    A fact target over a fleet must not test every node: the index keeps,
    per fact name, each distinct value with the nodes that report it, and
    the values that are numbers in order. So `fact:os=debian` is one hash
    lookup, `fact:mem_mb>=4096` a binary search and a walk of the values
    in range, and a glob or != one test per distinct value (a fleet has
    few distinct values for most facts), never one per node.

    Nodes are slots (nodeset.h), the numbers the registry gives them: it
    adds and removes a node's facts as they change, and a lookup marks
    the slots it finds in a bitmap, which the registry intersects with
    the lookups of a target's other terms.

    Threading: one index belongs to one thread.
    =========================================================================
*/
#ifndef GRID_FACTINDEX_H
#define GRID_FACTINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/facts.h"

typedef struct _factindex_t factindex_t;

//  A new, empty index; NULL when out of memory.
factindex_t *factindex_new (void);

//  Frees the index; NULL-safe, nulls *self_p.
void factindex_destroy (factindex_t **self_p);

//  The node at SLOT reports fact NAME with VALUE (copied). Returns 0 or
//  -1 (out of memory).
int factindex_add (factindex_t *self, const char *name, const char *value,
                   uint32_t slot);

//  The node at SLOT no longer reports NAME with VALUE (nothing when it
//  did not).
void factindex_remove (factindex_t *self, const char *name,
                       const char *value, uint32_t slot);

//  Sets in BITS (WORDS words, nodeset.h) the bit of each node whose fact
//  NAME passes TEST; clears none. Returns how many it set.
size_t factindex_mark (factindex_t *self, const char *name,
                       const fact_test_t *test, uint64_t *bits, size_t words);

//  How many distinct values fact NAME has (0 when no node reports it).
size_t factindex_values (factindex_t *self, const char *name);

#endif
