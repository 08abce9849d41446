/*  =========================================================================
    relay - gridrelay: a broker to its agents, one connection pair upstream
    (to one of the brokers of its list)

    Downstream the relay binds what a broker binds for agents: a ROUTER
    (the agent session, proto/PROTOCOL.md section 4) and an XPUB (the
    commands), both CURVE servers with the relay's own key, so an agent
    cannot tell it from a broker. Upstream it connects a DEALER and an
    XSUB to a broker (or to another relay: relays stack), with a key the
    broker enrols as a relay (broker/relays.h).

    Every message of a downstream peer goes upstream with one frame in
    front of its body, the via frame: the peer's CURVE key (Z85, as its
    handshake proved it), then the via frame the peer sent (a relay below
    sends one; an agent none). Every message from upstream carries a via
    frame whose first key names the downstream peer it is for: the relay
    takes that key off and sends the rest on. The relay's own heartbeat
    goes up as [PROTO_RELAY_SELF] [heartbeat]. The relay keeps no job state:
    acks, results and re-sends stay between the agents and the broker.

    Commands: the relay grants each downstream subscription only when the
    subscriber's key was welcomed by the broker for a hello whose topics
    include it (ZMQ_XPUB_MANUAL, as the broker does), and subscribes
    upstream to the union of the topics granted to its live peers, counted:
    the first holder subscribes it, the last one leaving unsubscribes it.
    A broadcast costs the broker one send per relay.

    Upstream loss: the connection closed, or nothing came back for
    upstream_timeout (ZMTP pings every second; 15 s by default, so that a
    broker busy registering thousands of agents is waited for). While the
    relay has no upstream connection it does not serve its agents at all (its downstream endpoints are unbound), so
    their connections drop and they fail over to their next endpoint; it
    binds again once the upstream handshake succeeds.

    Several upstreams (a broker cluster's members, upstream.h): the relay
    serves once its own heartbeat is welcomed, follows a standby's
    redirect (not_leader naming the active) into its list, and leaves a
    member that does not serve for failover_ms for the next one; its
    agents reconnect after each move. A rotation of the broker's key:
    the relay learns the next key over its session (broker_key), tries
    it whenever the connection is lost, and keeps its agents served
    meanwhile (PROTOCOL.md 4.3).

    Threading: one thread, one zloop.
    =========================================================================
*/
#ifndef GRID_RELAY_H
#define GRID_RELAY_H

#include <czmq.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"

typedef struct _relay_t relay_t;

//  Makes the relay: keys, sockets (upstream connected; downstream bound
//  once upstream answers). CONFIG is borrowed and must outlive it.
//  Returns NULL with a sentence in ERR.
relay_t *relay_new (const relay_config_t *config, char *err, size_t err_len);

//  Runs until SIGINT or SIGTERM. Returns 0.
int relay_run (relay_t *self);

//  Frees everything; NULL-safe.
void relay_destroy (relay_t **self_p);

#endif
