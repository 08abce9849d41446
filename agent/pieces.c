/*  =========================================================================
    pieces - when each output piece was last sent, for the re-send round
    =========================================================================
*/
#include "pieces.h"

#include <czmq.h>
#include <stdlib.h>

struct _pieces_t {
    int64_t interval_ms;        //  A piece is due again after this long
    zhashx_t *sent;             //  spool key -> int64_t * (when it went)
};

static void
s_stamp_free (void **stamp_p)
{
    free (*stamp_p);
    *stamp_p = NULL;
}

pieces_t *
pieces_new (int64_t interval_ms)
{
    pieces_t *self = (pieces_t *) calloc (1, sizeof (pieces_t));
    if (!self)
        return NULL;
    self->interval_ms = interval_ms;
    self->sent = zhashx_new ();
    if (!self->sent) {
        free (self);
        return NULL;
    }
    zhashx_set_destructor (self->sent, s_stamp_free);
    return self;
}

void
pieces_destroy (pieces_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    pieces_t *self = *self_p;
    zhashx_destroy (&self->sent);
    free (self);
    *self_p = NULL;
}

void
pieces_sent (pieces_t *self, const char *key, int64_t now_ms)
{
    int64_t *stamp = (int64_t *) zhashx_lookup (self->sent, key);
    if (stamp) {
        *stamp = now_ms;
        return;
    }
    stamp = (int64_t *) malloc (sizeof (int64_t));
    if (!stamp)
        return;
    *stamp = now_ms;
    if (zhashx_insert (self->sent, key, stamp))
        free (stamp);
}

bool
pieces_due (pieces_t *self, const char *key, int64_t now_ms)
{
    int64_t *stamp = (int64_t *) zhashx_lookup (self->sent, key);
    return !stamp || now_ms - *stamp >= self->interval_ms;
}

void
pieces_acked (pieces_t *self, const char *key)
{
    zhashx_delete (self->sent, key);
}

void
pieces_reset (pieces_t *self)
{
    zhashx_purge (self->sent);
}

void
pieces_prune (pieces_t *self, int64_t now_ms)
{
    zlistx_t *keys = zhashx_keys (self->sent);
    if (!keys)
        return;
    for (const char *key = (const char *) zlistx_first (keys); key;
         key = (const char *) zlistx_next (keys))
        if (pieces_due (self, key, now_ms))
            zhashx_delete (self->sent, key);
    zlistx_destroy (&keys);
}

size_t
pieces_size (pieces_t *self)
{
    return zhashx_size (self->sent);
}
