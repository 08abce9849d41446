/*  =========================================================================
    link - gridagent's link to the broker: the DEALER to its agent endpoint
    and the SUB to its commands endpoint, the hello until a welcome, the
    heartbeats after it, reconnects, and the move between the broker
    endpoints of the configuration (failover and failback)

    The link connects to the first endpoint when it is made: the SUB first,
    subscribed to the agent's topics (agent_topics), then the DEALER
    (PROTOCOL.md rule 1). Both are CURVE clients with the agent's key pair,
    trusting the endpoint's public key, unless the configuration is
    insecure. A connection that comes up says hello at once; hello is said
    again with backoff (100 ms doubling up to 30 s, up to 2 s once the
    broker has refused one) until link_welcome. After it, heartbeats at the
    broker's interval. A lost connection means hello again. With several
    endpoints, a link not welcomed that heard nothing for failover_ms moves
    both sockets to the next endpoint, and one whose endpoint refuses
    connections (no process listens there: a broker that died, a standby)
    after a second; welcomed on a later one, it probes
    the earlier ones every failback_ms and moves back to the first that
    answers.

    The link does not read what the broker says, and never calls into the
    agent: every frame it receives goes to the loop through on_message,
    and the loop, which decodes it, tells the link of a welcome
    (link_welcome), a refusal (link_refused) or a broker that forgot it
    (link_unwelcome). What the link needs from the loop it asks through
    the other callbacks (link_callbacks_t): the hello to say, the load a
    heartbeat reports, and on_down when a welcomed session is lost.
    Callbacks run on the loop thread, from the link's loop handlers or
    from within a link_ call, never after link_destroy.

    The link registers on the agent's zloop, and removes in link_destroy,
    its readers (the DEALER, the SUB, the DEALER's monitor) and its timers
    (hello, heartbeat, failover). The agent registers everything else.

    Threading: the agent's loop thread only.
    =========================================================================
*/
#ifndef GRID_AGENT_LINK_H
#define GRID_AGENT_LINK_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"
#include "config.h"

typedef struct _link_t link_t;

//  What the link tells the loop and asks of it. Each gets the ARG given to
//  link_new. All are required.
typedef struct {
    //  A frame from the broker, DATA and SIZE (valid only during the
    //  call): from the commands endpoint (the SUB) when FROM_SUB, else from
    //  the agent endpoint (the DEALER). Up to 64 per socket wake-up.
    void (*on_message) (void *arg, const void *data, size_t size,
                        bool from_sub);
    //  A message from the broker that does not have the frames the
    //  protocol allows, dropped; WHY says how.
    void (*on_malformed) (void *arg, const char *why);
    //  The connection of a welcomed session was lost. Called before the
    //  link drops the session and says hello again (in the same call), so
    //  the loop can send what it holds for the session first.
    void (*on_down) (void *arg);
    //  The encoded hello to say now: its bytes, with the size in *SIZE_P.
    //  Borrowed: valid until the loop changes it, and the link sends it
    //  before it returns to the loop.
    const void *(*hello) (void *arg, size_t *size_p);
    //  The work a heartbeat reports: tasks running and queued.
    void (*load) (void *arg, uint32_t *running_p, uint32_t *queued_p);
} link_callbacks_t;

//  Splits CONFIG's endpoints, loads the keys (unless insecure) and
//  connects to the first endpoint on LOOP. CONFIG and LOOP are borrowed
//  and must outlive the link; CALLBACKS is copied. Says no hello yet
//  (link_hello). Returns NULL with a sentence in ERR.
link_t *link_new (zloop_t *loop, agent_config_t *config,
                  const link_callbacks_t *callbacks, void *arg, char *err,
                  size_t err_len);

//  Ends the link's readers and timers and closes its sockets (with
//  linger: what was sent last still goes out); NULL-safe, nulls *self_p.
void link_destroy (link_t **self_p);

//  Says hello now, and again with backoff until link_welcome.
void link_hello (link_t *self);

//  The broker welcomed us, with a heartbeat every HEARTBEAT_MS (held
//  within 100 ms .. 10 min): hello stops, heartbeats start, and when
//  secure the SUB subscribes again (the broker grants topics only to a
//  node it knows).
void link_welcome (link_t *self, uint32_t heartbeat_ms);

//  The heartbeat interval the last welcome set.
uint32_t link_heartbeat_ms (link_t *self);

//  The broker refused something with an error CODE and MESSAGE: logged,
//  but only once while the same refusal answers every hello; before a
//  welcome, hello goes on at the short pace (the broker is not busy).
//  A cluster's standby refuses hello with not_leader and, to an agent
//  that named the redirect feature, the active's agent ENDPOINT (else
//  NULL): the link moves there at once if it is one of its endpoints
//  (at most a few times a minute), else the standby counts as silent
//  and the failover leaves it.
void link_refused (link_t *self, const char *code, const char *message,
                   const char *endpoint);

//  The broker no longer knows us: heartbeats stop, hello again.
void link_unwelcome (link_t *self);

//  True between a welcome and the end of that session.
bool link_welcomed (link_t *self);

//  The agent is stopping: no hello on a new connection, no failover.
void link_stop (link_t *self);

//  Sends MSG encoded, or DATA as it is, to the broker now; dropped when
//  no broker is connected (the DEALER queues nothing). link_send returns
//  0, or -1 when MSG does not encode.
int link_send (link_t *self, const proto_msg_t *msg);
void link_send_bytes (link_t *self, const void *data, size_t size);

//  Key rotation (agent/rekey.h). link_rekey_connect opens a second
//  session (DEALER, SUB) to the endpoint in use with the pair *NEXT_P
//  (taken; *NEXT_P is nulled), and says hello there every second until
//  the welcome. Its frames go to on_message like the others, with
//  link_from_next true during the call; when the loop calls link_welcome
//  for one of them, that session becomes the session: the link takes
//  the next key as its own, closes the old DEALER at once and the old SUB
//  a few seconds later (commands already on their way are read; the
//  spool deduplicates). A failover or a failback ends the second session
//  (link_rekeying then reads false). link_rekey_abort ends it.
void link_rekey_connect (link_t *self, zcert_t **next_p);
void link_rekey_abort (link_t *self);
bool link_rekeying (link_t *self);
bool link_from_next (link_t *self);

//  The public key (Z85) of the pair the session uses, NULL when insecure.
const char *link_key (link_t *self);

//  A rotation was under way when the agent started: should the broker
//  refuse our key at the handshake before any welcome (it switched the
//  node to the next key and retired ours before we knew), the link takes
//  the pair *NEXT_P (taken) as its own and connects again.
void link_rekey_fallback (link_t *self, zcert_t **next_p);

//  The broker's key rotation (agent/rekey.h). link_broker_key_next: the
//  broker's key OLD has a next key NEXT (both NULL: no more); while it
//  has, a connection lost or a handshake that failed on an endpoint
//  trusted with one of the two is tried again with the other (the broker
//  retires the old key by binding its endpoints again with the new one).
//  link_broker_key_map: every endpoint trusted with OLD is trusted with
//  NEXT from now on (connecting again, when not welcomed, if the one in
//  use changed). link_broker_key: the broker's public key the session in
//  use trusts, NULL when insecure.
void link_broker_key_next (link_t *self, const char *old, const char *next);
void link_broker_key_map (link_t *self, const char *old, const char *next);
const char *link_broker_key (link_t *self);

//  Jitter: a value in [MS - MS/5, MS + MS/5], so a fleet that restarts
//  together does not hello, fail back or re-send in lockstep.
size_t link_jitter (uint32_t ms);

#endif
