/*  =========================================================================
    outpace - the pace of the acks of live output pieces (outpace.h)
    =========================================================================
*/
#include "outpace.h"

#include <stdlib.h>
#include <string.h>

struct _outpace_t {
    outpace_ack_t *ring;         //  MAX entries; the oldest at HEAD
    size_t max;
    size_t head;
    size_t count;                //  Held
    size_t pending;              //  ...of which the newest, of the pass
                                 //  under way
    double tokens;               //  Acks that may go now
    bool refilled;               //  TOKENS was set once (else: full)
    int64_t refilled_ms;         //  ...when it was last refilled
};

outpace_t *
outpace_new (void)
{
    return (outpace_t *) calloc (1, sizeof (outpace_t));
}

void
outpace_destroy (outpace_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    free ((*self_p)->ring);
    free (*self_p);
    *self_p = NULL;
}

//  The budget's size at RATE: a tenth of a second's acks, one at least.
static double
s_burst (uint32_t rate)
{
    return rate >= 10 ? (double) rate / 10.0 : 1.0;
}

//  The budget at NOW_MS, refilled at RATE since it was last.
static double
s_tokens (const outpace_t *self, uint32_t rate, int64_t now_ms)
{
    if (!self->refilled)
        return s_burst (rate);
    double tokens = self->tokens;
    if (now_ms > self->refilled_ms)
        tokens += (double) (now_ms - self->refilled_ms) * (double) rate
                  / 1000.0;
    return tokens < s_burst (rate) ? tokens : s_burst (rate);
}

static void
s_refill (outpace_t *self, uint32_t rate, int64_t now_ms)
{
    self->tokens = s_tokens (self, rate, now_ms);
    self->refilled = true;
    self->refilled_ms = now_ms;
}

bool
outpace_take (outpace_t *self, uint32_t rate, int64_t now_ms)
{
    if (rate == 0)
        return true;
    if (self->count)
        return false;
    s_refill (self, rate, now_ms);
    if (self->tokens < 1.0)
        return false;
    self->tokens -= 1.0;
    return true;
}

bool
outpace_hold (outpace_t *self, const outpace_ack_t *ack)
{
    if (self->count == OUTPACE_MAX_HELD)
        return false;
    if (self->count == self->max) {
        //  Grow, the oldest first again
        size_t max = self->max ? self->max * 2 : 1024;
        if (max > OUTPACE_MAX_HELD)
            max = OUTPACE_MAX_HELD;
        outpace_ack_t *ring = (outpace_ack_t *) malloc (max * sizeof *ring);
        if (!ring)
            return false;
        for (size_t index = 0; index < self->count; index++)
            ring [index] = self->ring [(self->head + index) % self->max];
        free (self->ring);
        self->ring = ring;
        self->max = max;
        self->head = 0;
    }
    self->ring [(self->head + self->count) % self->max] = *ack;
    self->count++;
    self->pending++;
    return true;
}

void
outpace_commit (outpace_t *self)
{
    self->pending = 0;
}

void
outpace_abort (outpace_t *self)
{
    self->count -= self->pending;
    self->pending = 0;
}

bool
outpace_next (outpace_t *self, uint32_t rate, int64_t now_ms,
              outpace_ack_t *ack)
{
    if (self->count == 0)
        return false;
    const outpace_ack_t *oldest = &self->ring [self->head];
    bool waited = now_ms - oldest->held_ms >= OUTPACE_MAX_WAIT_MS;
    if (rate > 0 && !waited) {
        s_refill (self, rate, now_ms);
        if (self->tokens < 1.0)
            return false;
        self->tokens -= 1.0;
    }
    *ack = *oldest;
    self->head = (self->head + 1) % self->max;
    self->count--;
    if (self->pending > self->count)
        self->pending = self->count;
    return true;
}

int64_t
outpace_due_ms (const outpace_t *self, uint32_t rate, int64_t now_ms)
{
    if (self->count == 0)
        return INT64_MAX;
    int64_t due_ms = self->ring [self->head].held_ms + OUTPACE_MAX_WAIT_MS;
    double tokens = s_tokens (self, rate, now_ms);
    if (rate == 0 || tokens >= 1.0)
        return now_ms;
    int64_t refill_ms = now_ms
                        + (int64_t) ((1.0 - tokens) * 1000.0 / (double) rate)
                        + 1;
    if (refill_ms < due_ms)
        due_ms = refill_ms;
    return due_ms > now_ms ? due_ms : now_ms;
}

size_t
outpace_held (const outpace_t *self)
{
    return self->count;
}
