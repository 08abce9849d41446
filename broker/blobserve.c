/*  =========================================================================
    blobserve - which blob chunks the broker sends agents, and when

    Per node: its chunk in flight (sent when) and its request waiting.
    The nodes waiting are in a FIFO, each once (queued), so a node that
    asks again while waiting keeps its turn.
    =========================================================================
*/
#include "blobserve.h"

#include <czmq.h>

typedef struct {
    blobserve_item_t want;       //  Its request waiting (when waiting)
    bool waiting;                //  It has one
    bool queued;                 //  Its id is in the FIFO
    bool inflight;               //  It holds a slot
    int64_t sent_ms;             //  When it last asked (or was served)
} s_node_t;

struct _blobserve_t {
    zhashx_t *nodes;             //  Node id -> s_node_t
    zlistx_t *fifo;              //  Node ids waiting, oldest first
    size_t max_inflight;         //  The limit
    size_t inflight;             //  Chunks in flight
    size_t waiting;              //  Requests waiting
};

static void
s_node_free (void **item_p)
{
    free (*item_p);
    *item_p = NULL;
}

blobserve_t *
blobserve_new (size_t max_inflight)
{
    blobserve_t *self = (blobserve_t *) calloc (1, sizeof (blobserve_t));
    if (!self)
        return NULL;
    self->nodes = zhashx_new ();
    self->fifo = zlistx_new ();
    if (!self->nodes || !self->fifo) {
        blobserve_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->nodes, s_node_free);
    zlistx_set_destructor (self->fifo, (zlistx_destructor_fn *) zstr_free);
    self->max_inflight = max_inflight ? max_inflight : 1;
    return self;
}

void
blobserve_destroy (blobserve_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    blobserve_t *self = *self_p;
    zhashx_destroy (&self->nodes);
    zlistx_destroy (&self->fifo);
    free (self);
    *self_p = NULL;
}

void
blobserve_set_max (blobserve_t *self, size_t max_inflight)
{
    self->max_inflight = max_inflight ? max_inflight : 1;
}

static void
s_acknowledge (blobserve_t *self, s_node_t *node)
{
    if (node->inflight) {
        node->inflight = false;
        self->inflight--;
    }
}

int
blobserve_ask (blobserve_t *self, const char *node_id, const char *sha256,
               uint64_t offset, int64_t now_ms)
{
    s_node_t *node = (s_node_t *) zhashx_lookup (self->nodes, node_id);
    if (!node) {
        node = (s_node_t *) calloc (1, sizeof (s_node_t));
        if (!node)
            return -1;
        zhashx_insert (self->nodes, node_id, node);
    }
    if (node->inflight) {
        //  A fetch under way: its next chunk goes at once
        node->sent_ms = now_ms;
        return 1;
    }
    snprintf (node->want.node, sizeof (node->want.node), "%s", node_id);
    snprintf (node->want.sha256, sizeof (node->want.sha256), "%s", sha256);
    node->want.offset = offset;
    if (!node->waiting)
        self->waiting++;
    node->waiting = true;
    if (!node->queued) {
        char *copy = strdup (node_id);
        if (!copy || !zlistx_add_end (self->fifo, copy)) {
            free (copy);
            node->waiting = false;
            self->waiting--;
            return -1;
        }
        node->queued = true;
    }
    return 0;
}

void
blobserve_forget (blobserve_t *self, const char *node_id)
{
    s_node_t *node = (s_node_t *) zhashx_lookup (self->nodes, node_id);
    if (!node)
        return;
    s_acknowledge (self, node);
    if (node->waiting)
        self->waiting--;
    //  Its FIFO entry finds no node and is skipped
    zhashx_delete (self->nodes, node_id);
}

void
blobserve_expire (blobserve_t *self, int64_t now_ms)
{
    if (!self->inflight)
        return;
    for (s_node_t *node = (s_node_t *) zhashx_first (self->nodes); node;
         node = (s_node_t *) zhashx_next (self->nodes))
        if (node->inflight && node->sent_ms < now_ms - BLOBSERVE_STALE_MS)
            s_acknowledge (self, node);
}

bool
blobserve_next (blobserve_t *self, blobserve_item_t *item, int64_t now_ms)
{
    while (self->inflight < self->max_inflight
           && zlistx_size (self->fifo) > 0) {
        char *node_id = (char *) zlistx_first (self->fifo);
        s_node_t *node = (s_node_t *) zhashx_lookup (self->nodes, node_id);
        zlistx_delete (self->fifo, zlistx_cursor (self->fifo));
        if (!node)
            continue;            //  Forgotten since
        node->queued = false;
        if (!node->waiting)
            continue;
        node->waiting = false;
        self->waiting--;
        node->inflight = true;
        node->sent_ms = now_ms;
        self->inflight++;
        *item = node->want;
        return true;
    }
    return false;
}

size_t
blobserve_inflight (const blobserve_t *self)
{
    return self->inflight;
}

size_t
blobserve_waiting (const blobserve_t *self)
{
    return self->waiting;
}
