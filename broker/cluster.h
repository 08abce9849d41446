/*  =========================================================================
    cluster - a broker cluster's member: standby until elected, then the
    active, then (demoted) a standby again

    With `ha:` in the config (cluster_config.h) gridbroker runs this
    instead of serving alone. Each member runs an elector on etcd
    (ha/elector.h) for the whole run, and goes through two phases:

    - STANDBY: it follows the active named by the leader key, keeping its
      store a copy of the active's (repl.h: passes, or a snapshot first),
      and answers every client request with `not_leader`, naming the
      active's client endpoint. It campaigns for the key only when etcd's
      sync key names it (the elector reads it at each try: it then holds
      everything the active released), or when there is no sync key (a
      new cluster); a former active of this run waits, besides, a
      lease's time or until the new active counts it in its sync set.
    - ACTIVE: once elected, it opens its store as after a crash (the
      scheduler restored, in-flight steps re-sent, agents re-send what was
      not acknowledged) and serves, shipping every pass to the standbys
      (broker_lead). When it loses the key (its lease could lapse, etcd
      says another holds it) it stops at once and becomes a standby
      again, catching up from the new active with a snapshot: a former
      active never serves from its own store's tail.

    Threading: the main thread.
    =========================================================================
*/
#ifndef GRID_CLUSTER_H
#define GRID_CLUSTER_H

#include "config.h"

//  Runs the member CONFIG (ha: enabled) until SIGINT/SIGTERM; READ with
//  ARG rereads the configuration on SIGHUP while active. Returns the
//  process's exit code (0, or 1 after a start-up error, logged).
int cluster_run (const broker_config_t *config, broker_config_fn *read,
                 void *arg);

#endif
