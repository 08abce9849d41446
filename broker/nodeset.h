/*  =========================================================================
    nodeset - a set of node slots, for the registry's indexes

    A registry numbers its nodes with small slots (0, 1, 2, ...); an index
    keeps, per group, label value or fact value, the set of slots of the
    nodes that have it. A set is an array of its slots while it is small
    and a bitmap over the slots once the bitmap is no larger than the
    array would be, so it never takes more than 4 bytes a member (plus a
    few words), adding and removing cost O(1) for a large set and
    O(members) for a small one, and a resolver marks a set's members in a
    bitmap of its own in one pass (nodeset_mark).

    Bitmaps are arrays of uint64_t words: slot S is bit S % 64 of word
    S / 64.

    Threading: one set belongs to one thread.
    =========================================================================
*/
#ifndef GRID_NODESET_H
#define GRID_NODESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct _nodeset_t nodeset_t;

//  A new, empty set; NULL when out of memory.
nodeset_t *nodeset_new (void);

//  Frees the set; NULL-safe, nulls *self_p.
void nodeset_destroy (nodeset_t **self_p);

//  Adds SLOT (nothing when it is in already). Returns 0, or -1 when out
//  of memory (the set is unchanged then).
int nodeset_add (nodeset_t *self, uint32_t slot);

//  Removes SLOT (nothing when it is not in).
void nodeset_remove (nodeset_t *self, uint32_t slot);

//  Whether SLOT is in the set.
bool nodeset_has (const nodeset_t *self, uint32_t slot);

//  How many slots are in the set.
size_t nodeset_size (const nodeset_t *self);

//  The bytes the set holds on the heap (itself included).
size_t nodeset_bytes (const nodeset_t *self);

//  Sets the bit of each member in BITS (WORDS words; members at or
//  beyond WORDS * 64 are left out). Clears no bit.
void nodeset_mark (const nodeset_t *self, uint64_t *bits, size_t words);

#endif
