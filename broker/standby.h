/*  =========================================================================
    standby - what a broker cluster's standby serves besides `not_leader`
    to clients (cluster.c): its HTTP face and its agent endpoint, both
    pointing at the active

    - HTTP (when `http:` is configured): /healthz 200 (the process lives),
      /readyz and /api/v1/leader 503 naming the active (a load balancer's
      health check picks the active), /metrics the grid_ha_* figures of
      this standby (with a live token, or none when metrics_public), and
      every other route 503 with the error code not_leader, the active's
      HTTP URL in its details when the configuration gives it (ha: peers:
      http). The face is http.h's own, talking to this module over the
      same bridge the active's reactor serves.
    - Agents: the agent endpoint is bound, and a hello that names the
      feature `redirect` (PROTOCOL.md 4.2), said straight to this broker,
      is answered with an error not_leader carrying the active's agent
      endpoint (ha: peers: agents) and epoch, while the active is heard
      (a dead one is named by etcd until its lease lapses: no agent is
      sent there); the agent moves there if it is one of its own
      endpoints. A relay's own heartbeat that names `redirect` is
      answered the same way (the relay moves, and its agents with it).
      Every other message (an older agent's hello, an older relay's
      heartbeat, a relay's agents' traffic) is dropped unanswered, as when
      no standby listened there: those agents and relays fail over by
      their endpoint lists.

    Nothing here writes the store or acknowledges anything.

    Threading: the standby phase's loop thread (the HTTP face runs its
    own, http.h).
    =========================================================================
*/
#ifndef GRID_BROKER_STANDBY_H
#define GRID_BROKER_STANDBY_H

#include <czmq.h>
#include <stdint.h>

#include "auth.h"
#include "config.h"
#include "repl.h"

typedef struct _standby_t standby_t;

//  Binds CONFIG's agent endpoint (secured by AUTH, NULL when insecure)
//  and starts the HTTP face when CONFIG has one; registers their readers
//  on LOOP. CONFIG, AUTH, LOOP and SINK (read for the metrics) are
//  borrowed and must outlive it. A face that cannot open (an address in
//  use) is logged at error level and left out: the standby still
//  follows the active and may take over.
standby_t *standby_new (const broker_config_t *config, auth_t *auth,
                        zloop_t *loop, repl_sink_t *sink);

//  Ends the readers, stops the HTTP face and closes the agent endpoint
//  (its ipc:// path is gone on return); NULL-safe, nulls *self_p.
void standby_destroy (standby_t **self_p);

//  Binds the agent endpoint again, with the key AUTH holds now (a
//  rotation of the members' shared key retired: cluster.c).
void standby_rekey (standby_t *self);

//  The active is LEADER (a member's name, "" when none is known) of
//  EPOCH (0: not known).
void standby_set_leader (standby_t *self, const char *leader, uint64_t epoch);

//  Hellos answered with a redirect, and messages dropped unanswered.
uint64_t standby_redirected (const standby_t *self);
uint64_t standby_dropped (const standby_t *self);

#endif
