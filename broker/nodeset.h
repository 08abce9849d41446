/*  =========================================================================
    nodeset - a set of node slots, for the registry's indexes

    A registry numbers its nodes with small slots (0, 1, 2, ...); an index
    keeps, per group, label value or fact value, the set of slots of the
    nodes that have it. A set is an array of its slots while it is small
    (a set of one keeps it in itself, no heap) and a bitmap over the slots
    once the bitmap is no larger than the array would be; it goes back to
    an array when that would take under half the bitmap. So a set takes
    about 4 bytes a member or less (at most 16 while it shrinks, before
    it gives room back), adding and removing cost O(1) for a large set
    and O(members) for a small one, and a resolver marks a set's members
    in a bitmap of its own in one pass (nodeset_mark).

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

//  A set can live inside another struct (an index keeps one per value,
//  and most values of a fact such as hostname have one node): its fields
//  are kept by nodeset alone. One form at a time: SLOTS or BITS.
typedef struct {
    uint32_t *slots;             //  Array form: the members, in no order
    uint64_t *bits;              //  Bitmap form: a bit per slot
    uint32_t room;               //  Array form: slots allocated
    uint32_t words;              //  Bitmap form: words in bits
    uint32_t count;              //  Members, in either form
    uint32_t one;                //  Array form without slots (at most
                                 //  one member): that member
} nodeset_t;

//  A new, empty set; NULL when out of memory.
nodeset_t *nodeset_new (void);

//  Frees the set; NULL-safe, nulls *self_p.
void nodeset_destroy (nodeset_t **self_p);

//  Makes the set at SELF (in a struct of the caller) empty, as it was
//  never used: all zeroes is an empty set too.
void nodeset_init (nodeset_t *self);

//  Frees what the set at SELF holds; it is empty after.
void nodeset_clear (nodeset_t *self);

//  Adds SLOT (nothing when it is in already). Returns 0, or -1 when out
//  of memory (the set is unchanged then).
int nodeset_add (nodeset_t *self, uint32_t slot);

//  Removes SLOT (nothing when it is not in).
void nodeset_remove (nodeset_t *self, uint32_t slot);

//  Whether SLOT is in the set.
bool nodeset_has (const nodeset_t *self, uint32_t slot);

//  How many slots are in the set.
size_t nodeset_size (const nodeset_t *self);

//  The bytes the set takes: itself and what it holds on the heap.
size_t nodeset_bytes (const nodeset_t *self);

//  Sets the bit of each member in BITS (WORDS words; members at or
//  beyond WORDS * 64 are left out). Clears no bit.
void nodeset_mark (const nodeset_t *self, uint64_t *bits, size_t words);

#endif
