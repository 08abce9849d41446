/*  =========================================================================
    subgate - commands to a node wait until the node's subscription came

    A subscriber that has just connected to the commands XPUB (an agent
    that moved to a new active, reconnected, or started) receives
    nothing published before its subscription reached the broker: the
    "slow joiner" of PUB-SUB. The broker welcomes an agent over its
    other socket, and may publish the agent's first command (a step
    re-sent after a failover, a job submitted at once) before the
    agent's SUB has subscribed; that command would be lost, and sent
    again only after the ack timeout.

    The gate counts the subscriptions the XPUB granted, per topic, and
    holds a message to a topic that no granted subscription covers (the
    topic itself or a prefix of it) until one does, or until HOLD_MS
    have passed (then it goes anyway). The broker gives its ack timeout:
    a command it holds leaves no later than the re-send that would have
    followed its loss, and one to a node that never subscribes goes
    (into the void) as it always did. Behind a relay the same holds: a relay subscribes
    upstream to a node's topic once the node subscribed to it at the
    relay. Messages to one topic leave in the order they came. Old
    agents subscribe as new ones do: the gate needs nothing of them.

    Only the broker's commands to one node (topics node/ID/) pass the
    gate (broker_pass.c); broadcasts go as they always did.

    Pure: no sockets, no clock (times are given); the caller sends what
    subgate_release hands it.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_SUBGATE_H
#define GRID_SUBGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SUBGATE_MAX_HELD 100000   //  Beyond this many, none waits

typedef struct _subgate_t subgate_t;

//  Sends TOPIC (TOPIC_SIZE bytes) and BODY (BODY_SIZE bytes), with ARG.
typedef void (subgate_send_fn) (void *arg, const void *topic,
                                size_t topic_size, const void *body,
                                size_t body_size);

//  A gate whose messages wait HOLD_MS at most.
subgate_t *subgate_new (int64_t hold_ms);

//  Frees the gate and what it holds; NULL-safe, nulls *self_p.
void subgate_destroy (subgate_t **self_p);

//  The XPUB granted a subscription to TOPIC (SIZE bytes) when ON, or
//  one was ended (an unsubscribe, a subscriber gone) when not.
void subgate_subscribed (subgate_t *self, const void *topic, size_t size,
                         bool on);

//  True when a message to TOPIC must wait: no granted subscription
//  covers it, or messages to it wait already (order), unless the gate
//  is full.
bool subgate_must_wait (subgate_t *self, const void *topic, size_t size);

//  Keeps a copy of TOPIC and BODY, held since NOW_MS.
void subgate_hold (subgate_t *self, const void *topic, size_t topic_size,
                   const void *body, size_t body_size, int64_t now_ms);

//  Hands SEND every held message whose topic is covered now, or that
//  waited HOLD_MS by NOW_MS, in the order held. Returns how many.
size_t subgate_release (subgate_t *self, int64_t now_ms,
                        subgate_send_fn *send, void *arg);

//  Drops every held message (a demoted active sends nothing). Returns
//  how many.
size_t subgate_drop (subgate_t *self);

//  How many messages wait.
size_t subgate_held (const subgate_t *self);

#endif
