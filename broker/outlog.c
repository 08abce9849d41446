/*  =========================================================================
    outlog - the output pieces the broker kept lately (outlog.h)
    =========================================================================
*/
#include "outlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct _outlog_t {
    outlog_entry_t *ring;        //  CAPACITY entries; seq S at (S - 1) % CAPACITY
    size_t capacity;
    uint64_t last;               //  The newest seq, 0 when empty
};

outlog_t *
outlog_new (size_t capacity)
{
    outlog_t *self = (outlog_t *) calloc (1, sizeof (outlog_t));
    if (!self)
        return NULL;
    self->capacity = capacity ? capacity : OUTLOG_ENTRIES;
    self->ring = (outlog_entry_t *) calloc (self->capacity,
                                            sizeof (outlog_entry_t));
    if (!self->ring) {
        free (self);
        return NULL;
    }
    return self;
}

void
outlog_destroy (outlog_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free ((*self_p)->ring);
    free (*self_p);
    *self_p = NULL;
}

uint64_t
outlog_add (outlog_t *self, const char *job, uint32_t step, const char *node,
            uint32_t attempt, bool stderr_, uint64_t offset, size_t len)
{
    uint64_t seq = ++self->last;
    outlog_entry_t *entry = &self->ring [(seq - 1) % self->capacity];
    entry->seq = seq;
    snprintf (entry->job, sizeof entry->job, "%s", job);
    entry->step = step;
    snprintf (entry->node, sizeof entry->node, "%s", node);
    entry->attempt = attempt;
    entry->stderr_ = stderr_;
    entry->offset = offset;
    entry->len = len;
    return seq;
}

//  The oldest seq the ring still holds (1 when it never wrapped).
static uint64_t
s_oldest (const outlog_t *self)
{
    return self->last > self->capacity ? self->last - self->capacity + 1 : 1;
}

const outlog_entry_t *
outlog_next (const outlog_t *self, const char *job, uint64_t after)
{
    uint64_t seq = after + 1 > s_oldest (self) ? after + 1 : s_oldest (self);
    for (; seq <= self->last; seq++) {
        const outlog_entry_t *entry
            = &self->ring [(seq - 1) % self->capacity];
        if (strcmp (entry->job, job) == 0)
            return entry;
    }
    return NULL;
}

uint64_t
outlog_last (const outlog_t *self)
{
    return self->last;
}

bool
outlog_lost (const outlog_t *self, uint64_t after)
{
    return after + 1 < s_oldest (self);
}
