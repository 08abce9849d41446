/*  =========================================================================
    frames - the relay's framing (see frames.h)
    =========================================================================
*/
#include "frames.h"

#include <string.h>

void
relay_frames_init (relay_frames_t *self)
{
    memset (self, 0, sizeof *self);
    zmq_msg_init (&self->held);
}

void
relay_frames_destroy (relay_frames_t *self)
{
    zmq_msg_close (&self->held);
    self->open = false;
    self->pairs = 0;
}

size_t
relay_frames_recv (void *handle, zmq_msg_t *parts, size_t max,
                   bool *too_long)
{
    size_t got = 0;
    bool more = true;
    while (more && got < max) {
        zmq_msg_init (&parts [got]);
        if (zmq_msg_recv (&parts [got], handle, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&parts [got]);
            break;
        }
        more = zmq_msg_more (&parts [got]);
        got++;
    }
    if (got > 0 && more) {
        zmq_msg_t rest;
        zmq_msg_init (&rest);
        while (zmq_msg_recv (&rest, handle, ZMQ_DONTWAIT) >= 0
               && zmq_msg_more (&rest))
            ;
        zmq_msg_close (&rest);
        *too_long = true;
    }
    return got;
}

void
relay_frames_flush (relay_frames_t *self, void *up)
{
    if (!self->open)
        return;
    //  Once a message's first frame is taken, libzmq takes the rest of it
    if (zmq_msg_send (&self->held, up, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close (&self->held);
        zmq_msg_init (&self->held);
    }
    self->batches++;
    self->batched += self->pairs;
    self->open = false;
    self->pairs = 0;
}

int
relay_frames_send (relay_frames_t *self, void *up, zmq_msg_t *via,
                   zmq_msg_t *body, bool batchable)
{
    if (!batchable || !self->granted || self->pairs == RELAY_BATCH_MAX)
        relay_frames_flush (self, up);
    if (self->open) {
        //  The batch goes on: the body before this pair's via
        zmq_msg_send (&self->held, up, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_msg_send (via, up, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_msg_move (&self->held, body);
        self->pairs++;
        return 0;
    }
    if (zmq_msg_send (via, up, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        zmq_msg_close (via);
        return -1;
    }
    if (batchable && self->granted) {
        //  A batch begins: its body waits for the next pair, or the flush
        zmq_msg_move (&self->held, body);
        self->open = true;
        self->pairs = 1;
        return 0;
    }
    return zmq_msg_send (body, up, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

size_t
relay_frames_up (relay_frames_t *self, void *handle, int max,
                 relay_frames_own_fn *on_own, relay_frames_pair_fn *on_pair,
                 void *arg)
{
    size_t malformed = 0;
    for (int count = 0; count < max; count++) {
        zmq_msg_t via, body;
        zmq_msg_init (&via);
        if (zmq_msg_recv (&via, handle, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close (&via);
            break;
        }
        if (!zmq_msg_more (&via)) {
            on_own (arg, &via);
            zmq_msg_close (&via);
            continue;
        }
        //  Pair after pair: the parts of one message are all there
        bool more = true;
        bool batch = false;
        while (more) {
            zmq_msg_init (&body);
            if (zmq_msg_recv (&body, handle, ZMQ_DONTWAIT) < 0) {
                zmq_msg_close (&body);
                break;
            }
            more = zmq_msg_more (&body);
            on_pair (arg, &via, &body);
            zmq_msg_close (&body);
            zmq_msg_close (&via);
            zmq_msg_init (&via);
            if (more && !batch) {
                batch = true;
                self->batches_down++;
            }
            if (more && (zmq_msg_recv (&via, handle, ZMQ_DONTWAIT) < 0
                         || !zmq_msg_more (&via))) {
                malformed++;
                more = false;
            }
        }
        zmq_msg_close (&via);
    }
    return malformed;
}

void
relay_frames_grant (relay_frames_t *self, bool granted)
{
    self->granted = granted;
}
