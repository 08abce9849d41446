/*  =========================================================================
    upstream - gridrelay's list of upstreams: which broker endpoints it may
    use, which one is in use, the redirects it follows, and the broker
    keys it trusts on each (with the next key of a rotation)

    The list comes from the config, as an agent's --broker list does:
    `upstream` is one agent endpoint or several, comma-separated, in
    order; `upstream_publish` names one commands endpoint per agent
    endpoint; `upstream_key` one public key for all, or one per endpoint.
    A broker cluster's members are listed so (docs/HA.md).

    The relay (relay.c) owns the sockets and asks this module what to do:
    - a standby's not_leader naming the active's agent endpoint is
      followed only to an endpoint of the list, other than the one in use,
      at most RELAY_UPSTREAM_REDIRECTS_MAX times a minute
      (relay_upstream_redirect); its epoch is judged by the caller;
    - with several endpoints, the relay moves to the next one in order
      when the one in use has not served for failover_ms
      (relay_upstream_next);
    - the broker's key rotation (PROTOCOL.md 4.3): the next key a broker
      announced is kept beside the key it replaces; while it is, a lost
      connection or a failed handshake tries the other of the two
      (relay_upstream_swap); a handshake that went through on the next
      key ends the rotation: every endpoint trusted with the old key is
      trusted with the new one (relay_upstream_settle). What a rotation
      leaves is recorded in the relay's state dir (relay/brokerkeys.h)
      and given back at start (relay_upstream_resume, relay_upstream_map).

    Nothing here touches a socket, the clock or a file.

    Threading: the relay's thread only.
    =========================================================================
*/
#ifndef GRID_RELAY_UPSTREAM_H
#define GRID_RELAY_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/keys.h"

#define RELAY_UPSTREAM_MAX 16                 //  Endpoints in the list, most
#define RELAY_UPSTREAM_REDIRECTS_MAX 4        //  Redirects followed...
#define RELAY_UPSTREAM_REDIRECT_WINDOW_MS 60000  //  ...in this long, most

typedef struct _relay_upstream_t relay_upstream_t;

//  Splits ENDPOINTS, PUBLISHES and KEYS (comma-separated; KEYS may be NULL
//  when insecure: nothing is trusted) into the list. A key is Z85 or a
//  public key file. Returns NULL with a sentence in ERR (counts that do
//  not match, an empty item, a bad key, more than RELAY_UPSTREAM_MAX).
relay_upstream_t *relay_upstream_new (const char *endpoints,
                                      const char *publishes,
                                      const char *keys, char *err,
                                      size_t err_len);

//  Frees everything; NULL-safe, nulls *self_p.
void relay_upstream_destroy (relay_upstream_t **self_p);

//  Checks the three lists as relay_upstream_new reads them, without
//  reading key files. Returns 0, or -1 with a sentence in ERR.
int relay_upstream_check (const char *endpoints, const char *publishes,
                          const char *keys, char *err, size_t err_len);

//  How many endpoints; the one in use (an index).
size_t relay_upstream_count (const relay_upstream_t *self);
size_t relay_upstream_index (const relay_upstream_t *self);

//  The agent endpoint, commands endpoint and trusted broker key (Z85, ""
//  when insecure) of endpoint INDEX. Borrowed until the list changes.
const char *relay_upstream_endpoint (const relay_upstream_t *self,
                                     size_t index);
const char *relay_upstream_publish (const relay_upstream_t *self,
                                    size_t index);
const char *relay_upstream_key (const relay_upstream_t *self, size_t index);

//  The endpoint in use becomes INDEX (the caller moves its sockets).
void relay_upstream_use (relay_upstream_t *self, size_t index);

//  The endpoint after the one in use, in the list's order (wrapping).
size_t relay_upstream_next (const relay_upstream_t *self);

//  A standby's redirect to ENDPOINT at NOW_MS (monotonic): 0 with its
//  index in *INDEX_P when the relay should move there (the move is
//  counted), else -1 with why not in *WHY_P (a static sentence): not one
//  of the list's, the one in use, or one redirect too many this minute.
int relay_upstream_redirect (relay_upstream_t *self, const char *endpoint,
                             int64_t now_ms, size_t *index_p,
                             const char **why_p);

//  The relay's own heartbeat was welcomed: redirects count from zero.
void relay_upstream_welcomed (relay_upstream_t *self);

//  The broker of the endpoint in use announced NEXT (Z85) to replace the
//  key trusted there. Returns 1 when it is news (kept), 0 when it is
//  known already, -1 when NEXT is no key or is the key trusted now.
int relay_upstream_next_key (relay_upstream_t *self, const char *next);

//  The next key announced (Z85), or NULL when no rotation is under way.
const char *relay_upstream_next_key_of (const relay_upstream_t *self);

//  The key it replaces while a rotation is under way, else NULL.
const char *relay_upstream_old_key_of (const relay_upstream_t *self);

//  A rotation recorded before a restart (relay/brokerkeys.h): OLD is to
//  be replaced by NEXT, as if NEXT had been announced while OLD was
//  trusted. Returns 0, or -1 when either is no key, they are the same, or
//  no endpoint trusts either (a record the config has moved past).
int relay_upstream_resume (relay_upstream_t *self, const char *old,
                           const char *next);

//  A rotation that ended before a restart: every endpoint trusted with
//  OLD is trusted with NEXT. Returns how many endpoints changed.
size_t relay_upstream_map (relay_upstream_t *self, const char *old,
                           const char *next);

//  A connection to the endpoint in use was lost or its handshake failed
//  while a rotation is under way: its trusted key becomes the other of
//  the two. Returns true when it changed (the caller connects again).
bool relay_upstream_swap (relay_upstream_t *self);

//  A handshake went through on the endpoint in use: when its key is the
//  next one, the rotation is over (every endpoint trusted with the old
//  key trusts the new one). Returns true then.
bool relay_upstream_settle (relay_upstream_t *self);

#endif
