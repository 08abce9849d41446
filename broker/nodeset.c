/*  =========================================================================
    nodeset - a set of node slots (see nodeset.h)
    =========================================================================
*/
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "nodeset.h"

nodeset_t *
nodeset_new (void)
{
    return (nodeset_t *) calloc (1, sizeof (nodeset_t));
}

void
nodeset_destroy (nodeset_t **self_p)
{
    if (self_p && *self_p) {
        nodeset_clear (*self_p);
        free (*self_p);
        *self_p = NULL;
    }
}

void
nodeset_init (nodeset_t *self)
{
    memset (self, 0, sizeof *self);
}

void
nodeset_clear (nodeset_t *self)
{
    free (self->slots);
    free (self->bits);
    nodeset_init (self);
}

//  The array form's members: SLOTS, or ONE for a set of at most one
//  (most values of a fact such as hostname or boot_time have one node).
static inline const uint32_t *
s_members (const nodeset_t *self)
{
    return self->slots ? self->slots : &self->one;
}

static inline bool
s_bit (const uint64_t *bits, size_t words, uint32_t slot)
{
    return slot / 64 < words && (bits [slot / 64] >> (slot % 64)) & 1;
}

//  The array form as a bitmap of WORDS words (covering every member).
//  Returns 0 or -1 (out of memory: still an array).
static int
s_to_bits (nodeset_t *self, size_t words)
{
    uint64_t *bits = (uint64_t *) calloc (words, sizeof (uint64_t));
    if (!bits)
        return -1;
    const uint32_t *members = s_members (self);
    for (size_t index = 0; index < self->count; index++)
        bits [members [index] / 64] |= 1ULL << (members [index] % 64);
    free (self->slots);
    self->slots = NULL;
    self->room = 0;
    self->bits = bits;
    self->words = (uint32_t) words;
    return 0;
}

//  The bitmap form as an array. Returns 0 or -1 (out of memory: still a
//  bitmap).
static int
s_to_slots (nodeset_t *self)
{
    size_t room = self->count > 1 ? self->count * 2 : 0;
    uint32_t *slots = room ? (uint32_t *) malloc (room * sizeof (uint32_t))
                           : NULL;
    if (room && !slots)
        return -1;
    uint32_t *into = slots ? slots : &self->one;
    size_t count = 0;
    for (size_t word = 0; word < self->words; word++)
        for (uint64_t rest = self->bits [word]; rest; rest &= rest - 1)
            into [count++] = (uint32_t) (word * 64
                                         + (size_t) __builtin_ctzll (rest));
    assert (count == self->count);
    free (self->bits);
    self->bits = NULL;
    self->words = 0;
    self->slots = slots;
    self->room = (uint32_t) room;
    return 0;
}

//  Whether COUNT members in an array take less than half a bitmap of
//  WORDS words: the array form then (an array turns into a bitmap once
//  the bitmap is no larger, so a set near the line does not switch at
//  each change).
static inline bool
s_array_smaller (size_t count, size_t words)
{
    return count * sizeof (uint32_t) * 2 < words * sizeof (uint64_t);
}

int
nodeset_add (nodeset_t *self, uint32_t slot)
{
    if (nodeset_has (self, slot))
        return 0;
    if (self->bits && slot / 64 >= self->words) {
        size_t need = (size_t) slot / 64 + 1;
        if (s_array_smaller (self->count + 1, need)) {
            if (s_to_slots (self) != 0)
                return -1;
        }
        else {
            //  Slots are given out in order: grow ahead of them
            size_t words = need + need / 4;
            uint64_t *bits = (uint64_t *) realloc (self->bits,
                                                   words * sizeof (uint64_t));
            if (!bits)
                return -1;
            memset (bits + self->words, 0,
                    (words - self->words) * sizeof (uint64_t));
            self->bits = bits;
            self->words = (uint32_t) words;
        }
    }
    if (self->bits) {
        self->bits [slot / 64] |= 1ULL << (slot % 64);
        self->count++;
        return 0;
    }
    if (self->count == 0 && !self->slots) {
        self->one = slot;
        self->count = 1;
        return 0;
    }
    if (self->count == (self->slots ? self->room : 1)) {
        //  Full: a bitmap instead when it takes no more than the array
        const uint32_t *members = s_members (self);
        uint32_t high = slot;
        for (size_t index = 0; index < self->count; index++)
            if (members [index] > high)
                high = members [index];
        size_t words = (size_t) high / 64 + 1;
        if (words * sizeof (uint64_t) <= (self->count + 1) * sizeof (uint32_t)
            && s_to_bits (self, words) == 0)
            return nodeset_add (self, slot);
        size_t room = self->slots ? (size_t) self->room * 2 : 4;
        uint32_t *slots = (uint32_t *) realloc (self->slots,
                                                room * sizeof (uint32_t));
        if (!slots)
            return -1;
        if (!self->slots)
            slots [0] = self->one;
        self->slots = slots;
        self->room = (uint32_t) room;
    }
    self->slots [self->count++] = slot;
    return 0;
}

void
nodeset_remove (nodeset_t *self, uint32_t slot)
{
    if (self->bits) {
        if (!s_bit (self->bits, self->words, slot))
            return;
        self->bits [slot / 64] &= ~(1ULL << (slot % 64));
        self->count--;
        if (s_array_smaller (self->count, self->words))
            s_to_slots (self);
        return;
    }
    uint32_t *members = self->slots ? self->slots : &self->one;
    for (size_t index = 0; index < self->count; index++)
        if (members [index] == slot) {
            members [index] = members [--self->count];
            break;
        }
    if (self->count <= 1 && self->slots) {
        //  One left, or none: no array
        self->one = self->slots [0];
        free (self->slots);
        self->slots = NULL;
        self->room = 0;
    }
    else
    if (self->room > 8 && self->count < self->room / 4) {
        //  A set that shrank gives its room back
        uint32_t *slots = (uint32_t *) realloc (
            self->slots, self->room / 2 * sizeof (uint32_t));
        if (slots) {
            self->slots = slots;
            self->room /= 2;
        }
    }
}

bool
nodeset_has (const nodeset_t *self, uint32_t slot)
{
    if (self->bits)
        return s_bit (self->bits, self->words, slot);
    const uint32_t *members = s_members (self);
    for (size_t index = 0; index < self->count; index++)
        if (members [index] == slot)
            return true;
    return false;
}

size_t
nodeset_size (const nodeset_t *self)
{
    return self->count;
}

size_t
nodeset_bytes (const nodeset_t *self)
{
    return sizeof *self + self->room * sizeof (uint32_t)
         + self->words * sizeof (uint64_t);
}

void
nodeset_mark (const nodeset_t *self, uint64_t *bits, size_t words)
{
    if (self->bits) {
        size_t common = self->words < words ? self->words : words;
        for (size_t word = 0; word < common; word++)
            bits [word] |= self->bits [word];
        return;
    }
    const uint32_t *members = s_members (self);
    for (size_t index = 0; index < self->count; index++) {
        uint32_t slot = members [index];
        if (slot / 64 < words)
            bits [slot / 64] |= 1ULL << (slot % 64);
    }
}
