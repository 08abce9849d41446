/*  =========================================================================
    relaywire - the via frame's limits and the self marker, shared by the
    broker (broker/relays.h) and gridrelay (relay/relay.h)

    A message that came through relays carries a via frame in front of its
    body: 1 to PROTO_RELAY_MAX_PATH public keys of KEYS_Z85_LEN characters
    of Z85 each, with no separator (proto/PROTOCOL.md, "Relays"). The last
    key names who speaks; PROTO_RELAY_SELF there means the relay before it
    speaks for itself (its heartbeat). A via frame outside these limits is
    malformed and dropped whole by whoever reads it.

    Constants only: no code, no state; any thread.
    =========================================================================
*/
#ifndef GRID_PROTO_RELAYWIRE_H
#define GRID_PROTO_RELAYWIRE_H

#include "keys.h"

#define PROTO_RELAY_MAX_PATH 4       //  Keys in a via frame, at most
//  Bytes of a via frame, at most
#define PROTO_RELAY_VIA_MAX (PROTO_RELAY_MAX_PATH * KEYS_Z85_LEN)
//  The last key of a relay's own message: 32 zero bytes, a key no peer
//  can hold (the identity point of Curve25519)
#define PROTO_RELAY_SELF "0000000000000000000000000000000000000000"

#endif
