/*  =========================================================================
    held - acks and starteds held back for a result that implies them
    =========================================================================
*/
#include "held.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spool.h"

//  What is held for one attempt.
typedef struct {
    char key [SPOOL_KEY_MAX];   //  job|step|attempt
    char *job;
    uint32_t step;
    uint32_t attempt;
    bool ack;                   //  An ack waits
    bool started;               //  A started waits (sent after the ack)
    uint64_t round;             //  The firing count when first held
    void *handle;               //  Its place in order
} s_item_t;

struct _held_t {
    zloop_t *loop;
    link_t *link;
    char *node;                 //  Our node id (a copy)
    int hold_ms;
    zhashx_t *items;            //  key -> s_item_t (owned)
    zlistx_t *order;            //  The same items, oldest first
    uint64_t round;             //  Timer firings so far
    int timer;                  //  -1 when nothing is held
};

static void
s_item_free (void **item_p)
{
    s_item_t *item = (s_item_t *) *item_p;
    if (item) {
        free (item->job);
        free (item);
        *item_p = NULL;
    }
}

//  ack or started for (job, step, attempt), sent now.
static void
s_send (held_t *self, proto_type_t type, const char *job, uint32_t step,
        uint32_t attempt)
{
    proto_msg_t msg = {
        .type = type, .node = self->node, .job = (char *) job,
        .step = step, .attempt = attempt
    };
    link_send (self->link, &msg);
}

held_t *
held_new (zloop_t *loop, link_t *link, const char *node, int hold_ms)
{
    held_t *self = (held_t *) calloc (1, sizeof (held_t));
    if (!self)
        return NULL;
    self->loop = loop;
    self->link = link;
    self->node = strdup (node);
    self->hold_ms = hold_ms;
    self->timer = -1;
    self->items = zhashx_new ();
    self->order = zlistx_new ();
    if (!self->node || !self->items || !self->order) {
        held_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->items, s_item_free);
    return self;
}

void
held_destroy (held_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    held_t *self = *self_p;
    if (self->timer >= 0)
        zloop_timer_end (self->loop, self->timer);
    zlistx_destroy (&self->order);
    zhashx_destroy (&self->items);
    free (self->node);
    free (self);
    *self_p = NULL;
}

//  Forgets ITEM without sending it.
static void
s_remove (held_t *self, s_item_t *item)
{
    zlistx_delete (self->order, item->handle);
    zhashx_delete (self->items, item->key);
}

//  Sends what ITEM holds, the ack first, and forgets it.
static void
s_item_send (held_t *self, s_item_t *item)
{
    if (item->ack)
        s_send (self, PROTO_ACK, item->job, item->step, item->attempt);
    if (item->started)
        s_send (self, PROTO_STARTED, item->job, item->step, item->attempt);
    s_remove (self, item);
}

static int
s_fired (zloop_t *loop, int timer_id, void *arg)
{
    held_t *self = (held_t *) arg;
    if (timer_id != self->timer)
        return 0;
    self->round++;
    s_item_t *item;
    while ((item = (s_item_t *) zlistx_first (self->order))
           && item->round + 2 <= self->round)
        s_item_send (self, item);
    if (zlistx_size (self->order) == 0) {
        zloop_timer_end (self->loop, self->timer);
        self->timer = -1;
    }
    return 0;
}

void
held_hold (held_t *self, proto_type_t type, const char *key, const char *job,
           uint32_t step, uint32_t attempt)
{
    s_item_t *item = (s_item_t *) zhashx_lookup (self->items, key);
    if (!item) {
        item = (s_item_t *) calloc (1, sizeof (s_item_t));
        if (item)
            item->job = strdup (job);
        if (!item || !item->job) {
            free (item);
            s_send (self, type, job, step, attempt);
            return;
        }
        snprintf (item->key, sizeof (item->key), "%s", key);
        item->step = step;
        item->attempt = attempt;
        item->round = self->round;
        item->handle = zlistx_add_end (self->order, item);
        zhashx_insert (self->items, item->key, item);
    }
    if (type == PROTO_ACK)
        item->ack = true;
    else
        item->started = true;
    if (self->timer < 0)
        self->timer = zloop_timer (self->loop, (size_t) self->hold_ms / 2, 0,
                                   s_fired, self);
}

bool
held_holds (held_t *self, const char *key)
{
    return zhashx_lookup (self->items, key) != NULL;
}

void
held_ack_sent (held_t *self, const char *key)
{
    s_item_t *item = (s_item_t *) zhashx_lookup (self->items, key);
    if (item) {
        item->ack = false;
        if (!item->started)
            s_remove (self, item);
    }
}

void
held_drop (held_t *self, const char *key)
{
    s_item_t *item = (s_item_t *) zhashx_lookup (self->items, key);
    if (item)
        s_remove (self, item);
}

void
held_flush (held_t *self)
{
    s_item_t *item;
    while ((item = (s_item_t *) zlistx_first (self->order)))
        s_item_send (self, item);
}
