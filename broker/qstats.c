/*  =========================================================================
    qstats - timed samples and their percentiles (see qstats.h)
    =========================================================================
*/
#include <assert.h>
#include <stdlib.h>

#include "qstats.h"

typedef struct {
    int64_t at_ms;               //  When it was taken
    int64_t value_ms;            //  What it measured
} s_sample_t;

struct _qstats_t {
    s_sample_t *samples;         //  The ring
    size_t next;                 //  Where the next sample goes
    size_t count;                //  Samples held, at most QSTATS_CAPACITY
    int64_t *scratch;            //  Values of one query, sorted
};

qstats_t *
qstats_new (void)
{
    qstats_t *self = (qstats_t *) calloc (1, sizeof (qstats_t));
    assert (self);
    self->samples = (s_sample_t *) calloc (QSTATS_CAPACITY, sizeof (s_sample_t));
    self->scratch = (int64_t *) calloc (QSTATS_CAPACITY, sizeof (int64_t));
    assert (self->samples && self->scratch);
    return self;
}

void
qstats_destroy (qstats_t **self_p)
{
    if (self_p && *self_p) {
        free ((*self_p)->samples);
        free ((*self_p)->scratch);
        free (*self_p);
        *self_p = NULL;
    }
}

void
qstats_add (qstats_t *self, int64_t now_ms, int64_t value_ms)
{
    self->samples [self->next].at_ms = now_ms;
    self->samples [self->next].value_ms = value_ms > 0 ? value_ms : 0;
    self->next = (self->next + 1) % QSTATS_CAPACITY;
    if (self->count < QSTATS_CAPACITY)
        self->count++;
}

static int
s_compare (const void *a, const void *b)
{
    int64_t one = *(const int64_t *) a, other = *(const int64_t *) b;
    return one < other ? -1 : one > other;
}

//  Nearest rank: the smallest value with at least PERCENT % of the values
//  at or below it.
static int64_t
s_rank (const int64_t *sorted, size_t count, int percent)
{
    size_t rank = (count * (size_t) percent + 99) / 100;
    return sorted [rank ? rank - 1 : 0];
}

size_t
qstats_percentiles (qstats_t *self, int64_t now_ms, int64_t window_ms,
                    int64_t *p50_p, int64_t *p99_p)
{
    size_t found = 0;
    //  Newest first; samples come in time order, so stop at the first
    //  one older than the window
    for (size_t seen = 0; seen < self->count; seen++) {
        size_t at = (self->next + QSTATS_CAPACITY - 1 - seen) % QSTATS_CAPACITY;
        if (self->samples [at].at_ms < now_ms - window_ms)
            break;
        self->scratch [found++] = self->samples [at].value_ms;
    }
    *p50_p = *p99_p = 0;
    if (found) {
        qsort (self->scratch, found, sizeof (int64_t), s_compare);
        *p50_p = s_rank (self->scratch, found, 50);
        *p99_p = s_rank (self->scratch, found, 99);
    }
    return found;
}
