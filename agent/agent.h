/*  =========================================================================
    agent - gridagent: registers with the broker, runs what it is sent,
    reports every result durably

    One zloop drives everything: a DEALER to the broker's agent endpoint
    (hello, heartbeat, ack, started, result, bye out; welcome, result_ack,
    direct commands, cancel, error in), a SUB to the broker's commands
    endpoint (commands and cancels by topic), the executor's pipes and
    SIGCHLD, SIGTERM/SIGINT, and a few timers.

    Session: subscribe first (all/, group/<g>/, label/<k>/<prefix>/ for
    every prefix of each dotted label value, node/<id>/), then hello, again
    every 2 s (jittered) until a welcome. Commands are ignored until then
    (the broker re-sends what is not acknowledged). After the welcome,
    heartbeats at the broker's interval. An error "unknown_node" (the
    broker forgot us) means hello again.

    Security: both sockets are CURVE clients with the agent's key pair,
    trusting the broker's public key (docs/SECURITY.md), unless insecure.
    The broker grants subscriptions only to an enrolled key, for its own
    topics, so after each welcome the agent subscribes again (unsubscribe,
    subscribe): a brand-new node's first subscriptions, sent before the
    broker knew it, were refused. An error "unauthorized" after a welcome
    (the key was deleted or rejected) means hello again; "pending" means
    the key waits for gridcli key accept, and hello goes on every 2 s.

    Commands are deduplicated by (job, step, attempt) through the spool:
    a duplicate of queued or running work is acked again, of finished work
    gets its result again; nothing runs twice. A new command is recorded
    as taken, checked against its backend's schema (refused: a result with
    status "refused"), and queued in the executor; "started" and "result"
    follow. Its ack and started are held up to 20 ms and left out when the
    result goes first, as the result implies them (PROTOCOL.md 4.1 rules 4
    and 7); a duplicate is acked at once. Results are in the spool before
    they are sent and stay there until the broker's result_ack; they are
    re-sent every few seconds and after each welcome, also across
    restarts.

    SIGHUP: agent_reload (the session stays up).

    SIGTERM/SIGINT: stop taking work, drop queued work, let running work
    finish for a few seconds (then cancel it), flush results, say bye,
    close with linger.

    Threading: one agent per process, on the main thread; call
    agent_signals_block first thing in main().
    =========================================================================
*/
#ifndef GRID_AGENT_H
#define GRID_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"
#include "config.h"

//  Blocks SIGCHLD, SIGTERM, SIGINT and SIGHUP in the calling thread (they are read
//  through signalfds in the loop) and ignores SIGPIPE. Call it first thing
//  in main(), before any thread exists. Returns 0 or -1.
int agent_signals_block (void);

typedef struct _agent_t agent_t;

//  Opens the spool (recovering interrupted work), creates the sockets
//  (subscribed, connected) and the executor. CONFIG is borrowed and must
//  outlive the agent; a reload (SIGHUP) updates it. Returns NULL with a
//  sentence in ERR.
agent_t *agent_new (agent_config_t *config, char *err, size_t err_len);

//  Reads the configuration again from CONFIG's command line (the config
//  file, then the flags) and applies what can change while the agent
//  runs: disabled_backends (the broker hears the new hello at once),
//  log_level, verbose and drain. Other changed settings take effect at the next
//  start and are logged as such. On an error nothing changes and the
//  error is logged. The session stays up. Returns 0, or -1 on an error.
int agent_reload (agent_t *self);

//  Runs until SIGTERM or SIGINT, then shuts down gracefully (see above).
//  Returns 0.
int agent_run (agent_t *self);

//  Destroys the agent: kills any task still running, closes the sockets
//  (with linger) and the spool; NULL-safe, nulls *self_p.
void agent_destroy (agent_t **self_p);

#endif
