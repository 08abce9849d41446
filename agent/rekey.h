/*  =========================================================================
    rekey - gridagent's key rotation: the next key pair beside the current
    one (its files: proto/keynext.h), and the rotate-key command

    For the pair whose public file is P (the config's key: P, or its
    secret file P_secret), the next pair is P.next and P.next_secret
    (mode 0600), each written to a temporary file and renamed, the public
    file first: a rotation is under way while P.next_secret exists. The
    running agent sends the next public key over its session (PROTOCOL.md
    4.3), connects with the next pair once the broker took it, and after
    the welcome on that session commits: P.next_secret is renamed over
    P_secret (the switch: keys_load_pair reads the secret file only), then
    P.next over P. keynext_recover finishes a commit cut short between the
    two renames, and drops a public file whose write was cut short.

    Crashes: before the commit the agent restarts with its current key and
    the next pair still beside it, and asks again (the broker answers a
    rekey it knows where it stands); if the broker had already switched
    the node, the current key is refused at the handshake and the link
    falls back to the next pair (link_rekey_fallback). After the commit
    the next pair is the pair.

    Threading: the agent's loop thread (rekey_t); rekey_main sets the
    process umask for the time it writes.
    =========================================================================
*/
#ifndef GRID_AGENT_REKEY_H
#define GRID_AGENT_REKEY_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/proto.h"
#include "../proto/keynext.h"
#include "config.h"
#include "link.h"

//  ---------------------------------------------------------------------
//  The running agent's side (the agent's loop thread only)

typedef struct _rekey_t rekey_t;

//  At start (secure agents only): finishes a commit cut short
//  (rekey_recover) and, when a next pair waits, goes on with it and gives
//  it to LINK as its fallback (link_rekey_fallback). CONFIG and LINK are
//  borrowed and must outlive the result.
rekey_t *rekey_new (agent_config_t *config, link_t *link);
void rekey_destroy (rekey_t **self_p);

//  Every second: looks for a next pair (every minute, or at once after
//  rekey_poke), or writes one when the key is older than key_rotate_days;
//  once welcomed with rekey granted, sends rekey (again every 5 s until
//  accepted); gives up a next key's session not welcomed in 30 s. A
//  welcome that did not grant rekey is logged once: this broker cannot
//  rotate keys.
void rekey_tick (rekey_t *self);

//  SIGHUP: look for a next pair at the next tick.
void rekey_poke (rekey_t *self);

//  A WELCOME (borrowed): whether it granted rekey and broker_rekey. When
//  the link now uses the next key (the welcome came on its session, or
//  the fallback), the next pair becomes the pair on disk (keynext_commit);
//  when it now trusts the broker's next key, that rotation is done.
void rekey_welcomed (rekey_t *self, const proto_msg_t *welcome);

//  The broker's key rotation (PROTOCOL.md 4.3): a broker_key MSG from the
//  broker over the session (granted by its welcome) names its next key:
//  kept in the state dir (broker.key.next: "OLD NEW"), given to the link
//  (link_broker_key_next), acknowledged (broker_key_ack). Once welcomed
//  on it, the pair is appended to broker.keys, which rekey_new applies at
//  start (link_broker_key_map): the configured broker key stays as it
//  was. Anything else is dropped and logged.
void rekey_on_broker_key (rekey_t *self, const proto_msg_t *msg);

//  A rekey_ack: accepted opens the next key's session
//  (link_rekey_connect), pending is logged once, refused drops the pair.
void rekey_on_ack (rekey_t *self, const proto_msg_t *ack);

//  A frame of the next key's session that is no welcome: an error ends
//  that session, and rekey is asked again.
void rekey_on_next_session (rekey_t *self, const proto_msg_t *msg);

//  "gridagent rotate-key [--config FILE] [--key FILE] [--no-signal]":
//  ARGV[0] is "rotate-key". Writes the next pair of the configured key,
//  and tells the agent running on the configured state dir (the pid in
//  its owner.lock) with SIGHUP to take it now (else it does within a
//  minute). Prints what it did to OUT, problems to ERR. Returns the exit
//  code (0, 1 failure, 2 usage).
int rekey_main (int argc, char **argv, FILE *out, FILE *err);

#endif
