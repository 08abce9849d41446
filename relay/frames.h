/*  =========================================================================
    frames - the relay's framing: a message's parts read whole, its
    agents' results sent upstream several to a message, and batches from
    upstream split

    A relay that the broker granted `results` (a welcome for the relay
    itself, answering a heartbeat of its own that asked for it: PROTOCOL.md
    4.3) sends the results of its agents that one read of the downstream
    socket brought in one upstream message, [via] [body] [via] [body] ...,
    instead of one message each. Anything else (and everything before the
    grant, or to an upstream that never granted it) goes as it came, one
    [via] [body] message; a batch open then is closed first, so that what
    one agent sends keeps its order. From upstream, a message may hold
    several pairs (a broker that granted the relay `result_acks` sends
    what goes to its agents in a row so): relay_frames_up hands on each.

    Threading: the relay's thread only.
    =========================================================================
*/
#ifndef GRID_RELAY_FRAMES_H
#define GRID_RELAY_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <zmq.h>

#define RELAY_BATCH_MAX 1024        //  Pairs in one upstream message, most

typedef struct {
    bool granted;                   //  The upstream granted `results`
    bool open;                      //  A batch has begun upstream
    zmq_msg_t held;                 //  Its last body, not yet sent
    size_t pairs;                   //  Pairs in it
    size_t batches;                 //  Batches sent (counted)
    size_t batched;                 //  Pairs they carried
    size_t batches_down;            //  Batches read from upstream
} relay_frames_t;

//  What relay_frames_up hands over: a body for the relay itself, or a
//  via frame and a body for a peer.
typedef void (relay_frames_own_fn) (void *arg, zmq_msg_t *body);
typedef void (relay_frames_pair_fn) (void *arg, zmq_msg_t *via,
                                     zmq_msg_t *body);

//  Readies SELF (not granted).
void relay_frames_init (relay_frames_t *self);

//  Closes what SELF holds (its open batch is dropped).
void relay_frames_destroy (relay_frames_t *self);

//  Reads the frames of one waiting message of HANDLE into PARTS (at most
//  MAX), without blocking. Returns how many it read (0: nothing waiting);
//  the caller closes them. A message of more than MAX frames is read to
//  its end, the rest dropped, and *TOO_LONG set.
size_t relay_frames_recv (void *handle, zmq_msg_t *parts, size_t max,
                          bool *too_long);

//  Sends VIA (consumed) and BODY (moved from) to UP: into the open batch
//  when BATCHABLE (a result or results) and granted, else as a message of
//  its own after closing the batch. Returns 0, or -1 when UP would not
//  take it (dropped).
int relay_frames_send (relay_frames_t *self, void *up, zmq_msg_t *via,
                       zmq_msg_t *body, bool batchable);

//  Closes the open batch, if any: its last body goes.
void relay_frames_flush (relay_frames_t *self, void *up);

//  Reads up to MAX waiting messages of the upstream socket HANDLE, without
//  blocking: a lone body goes to ON_OWN, a via frame and a body to
//  ON_PAIR, and so does each further pair of a batch (an upstream that
//  granted result_acks sends [via] [body] [via] [body] ...: PROTOCOL.md
//  4.3). The callee may move the frames; they are closed after. Returns
//  how many frames of a wrong shape it dropped (a last via frame without
//  its body).
size_t relay_frames_up (relay_frames_t *self, void *handle, int max,
                        relay_frames_own_fn *on_own,
                        relay_frames_pair_fn *on_pair, void *arg);

//  Sets whether the upstream granted batches; losing the grant closes
//  nothing (call relay_frames_flush first).
void relay_frames_grant (relay_frames_t *self, bool granted);

#endif
