/*  =========================================================================
    subgate - commands to a node wait until the node's subscription came
    (see subgate.h)
    =========================================================================
*/
#include "subgate.h"

#include <czmq.h>
#include <string.h>

#define S_TOPIC_MAX 1024          //  Longer topics are never held

typedef struct {
    char *topic;                  //  NUL-terminated copy
    size_t topic_size;
    void *body;
    size_t body_size;
    int64_t held_ms;
} s_held_t;

struct _subgate_t {
    int64_t hold_ms;
    zhashx_t *subscribed;         //  Topic -> granted subscriptions (size_t)
    zhashx_t *waiting;            //  Topic -> held messages (size_t)
    zlistx_t *held;               //  s_held_t, in the order held
};

static void
s_held_free (void **item)
{
    s_held_t *held = (s_held_t *) *item;
    if (held) {
        free (held->topic);
        free (held->body);
        free (held);
    }
    *item = NULL;
}

static void
s_count_free (void **item)
{
    free (*item);
    *item = NULL;
}

subgate_t *
subgate_new (int64_t hold_ms)
{
    subgate_t *self = (subgate_t *) calloc (1, sizeof *self);
    assert (self);
    self->hold_ms = hold_ms;
    self->subscribed = zhashx_new ();
    self->waiting = zhashx_new ();
    self->held = zlistx_new ();
    assert (self->subscribed && self->waiting && self->held);
    zhashx_set_destructor (self->subscribed, s_count_free);
    zhashx_set_destructor (self->waiting, s_count_free);
    zlistx_set_destructor (self->held, s_held_free);
    return self;
}

void
subgate_destroy (subgate_t **self_p)
{
    subgate_t *self = *self_p;
    if (!self)
        return;
    zlistx_destroy (&self->held);
    zhashx_destroy (&self->waiting);
    zhashx_destroy (&self->subscribed);
    free (self);
    *self_p = NULL;
}

//  Adds DELTA to KEY's count in TABLE (never below 0; at 0 it goes).
static void
s_count (zhashx_t *table, const char *key, int delta)
{
    size_t *count = (size_t *) zhashx_lookup (table, key);
    if (!count && delta <= 0)
        return;
    if (!count) {
        count = (size_t *) calloc (1, sizeof *count);
        assert (count);
        zhashx_insert (table, key, count);
    }
    if (delta > 0)
        *count += (size_t) delta;
    else
    if (*count > (size_t) -delta)
        *count -= (size_t) -delta;
    else
        zhashx_delete (table, key);
}

//  TOPIC (SIZE bytes) into TEXT as a string; false when it does not fit
//  or holds a NUL.
static bool
s_text (const void *topic, size_t size, char *text)
{
    if (size >= S_TOPIC_MAX || memchr (topic, 0, size))
        return false;
    memcpy (text, topic, size);
    text [size] = 0;
    return true;
}

void
subgate_subscribed (subgate_t *self, const void *topic, size_t size,
                    bool on)
{
    char text [S_TOPIC_MAX];
    if (s_text (topic, size, text))
        s_count (self->subscribed, text, on ? 1 : -1);
}

//  True when a granted subscription covers TEXT (LEN bytes): the topic
//  itself or any prefix of it (the empty one too).
static bool
s_covered (subgate_t *self, char *text, size_t len)
{
    if (zhashx_lookup (self->subscribed, text))
        return true;
    bool covered = false;
    for (size_t cut = 0; cut < len && !covered; cut++) {
        char saved = text [cut];
        text [cut] = 0;
        covered = zhashx_lookup (self->subscribed, text) != NULL;
        text [cut] = saved;
    }
    return covered;
}

bool
subgate_must_wait (subgate_t *self, const void *topic, size_t size)
{
    char text [S_TOPIC_MAX];
    if (!s_text (topic, size, text))
        return false;
    if (zhashx_lookup (self->waiting, text))
        return true;
    if (zlistx_size (self->held) >= SUBGATE_MAX_HELD)
        return false;
    return !s_covered (self, text, size);
}

void
subgate_hold (subgate_t *self, const void *topic, size_t topic_size,
              const void *body, size_t body_size, int64_t now_ms)
{
    s_held_t *held = (s_held_t *) calloc (1, sizeof *held);
    assert (held);
    held->topic = (char *) malloc (topic_size + 1);
    held->body = malloc (body_size ? body_size : 1);
    assert (held->topic && held->body);
    memcpy (held->topic, topic, topic_size);
    held->topic [topic_size] = 0;
    held->topic_size = topic_size;
    memcpy (held->body, body, body_size);
    held->body_size = body_size;
    held->held_ms = now_ms;
    zlistx_add_end (self->held, held);
    s_count (self->waiting, held->topic, 1);
}

size_t
subgate_release (subgate_t *self, int64_t now_ms, subgate_send_fn *send,
                 void *arg)
{
    size_t count = 0;
    //  Topics whose first held message cannot go yet: the later ones
    //  wait behind it
    zhashx_t *blocked = NULL;
    s_held_t *held = (s_held_t *) zlistx_first (self->held);
    while (held) {
        bool go = (!blocked || !zhashx_lookup (blocked, held->topic))
                  && (now_ms - held->held_ms >= self->hold_ms
                      || s_covered (self, held->topic, held->topic_size));
        if (!go) {
            if (!blocked)
                blocked = zhashx_new ();
            zhashx_insert (blocked, held->topic, (void *) 1);
            held = (s_held_t *) zlistx_next (self->held);
            continue;
        }
        send (arg, held->topic, held->topic_size, held->body,
              held->body_size);
        s_count (self->waiting, held->topic, -1);
        zlistx_delete (self->held, zlistx_cursor (self->held));
        count++;
        //  After a delete the cursor is undefined: start again from the
        //  first (what is left before here is blocked, and skipped fast)
        held = (s_held_t *) zlistx_first (self->held);
        while (held && blocked && zhashx_lookup (blocked, held->topic))
            held = (s_held_t *) zlistx_next (self->held);
    }
    zhashx_destroy (&blocked);
    return count;
}

size_t
subgate_drop (subgate_t *self)
{
    size_t count = zlistx_size (self->held);
    zlistx_purge (self->held);
    zhashx_purge (self->waiting);
    return count;
}

size_t
subgate_held (const subgate_t *self)
{
    return zlistx_size (self->held);
}
