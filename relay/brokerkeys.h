/*  =========================================================================
    brokerkeys - gridrelay's record of the broker's key rotations, in its
    state dir, so that a relay restarted in the middle of one keeps the
    broker's next key (as an agent does: agent/rekey.c)

    Two files, each line "OLD NEW" (two public keys in Z85, one space):
    - broker.key.next: the rotation under way, one line, written whole
      when the broker announces its next key (a temporary file, flushed to
      disk, renamed; mode 0600) and removed when the rotation ends;
    - broker.keys: a line per rotation that ended while the relay ran,
      appended then; applied in order at start, for the config may still
      name the first key.

    At start, brokerkeys_load gives both to the upstream list
    (relay_upstream_map, relay_upstream_resume). A file that is not a
    regular file, is too large, or holds a line that is not two keys (a
    truncated write, garbage) is refused with a log line and ignored: the
    relay starts as it would without it. A write that fails is logged:
    the rotation goes on in memory, as it did before this record existed.

    Threading: the relay's thread only.
    =========================================================================
*/
#ifndef GRID_RELAY_BROKERKEYS_H
#define GRID_RELAY_BROKERKEYS_H

#include <stddef.h>

#include "upstream.h"

#define BROKERKEYS_NEXT "broker.key.next"  //  The rotation under way
#define BROKERKEYS_DONE "broker.keys"      //  The rotations that ended
#define BROKERKEYS_MAX_BYTES 65536         //  Larger: refused

//  Reads the record in STATE_DIR into UPSTREAM: the rotations that ended,
//  then the one under way. A missing directory or file is no record.
//  Returns 1 when a rotation under way was taken up, else 0.
int brokerkeys_load (const char *state_dir, relay_upstream_t *upstream);

//  The broker announced NEXT to replace OLD: broker.key.next holds "OLD
//  NEXT" (STATE_DIR made, mode 0700, when missing). Returns 0, or -1
//  logged.
int brokerkeys_save_next (const char *state_dir, const char *old,
                          const char *next);

//  The rotation of OLD to NEXT ended: appended to broker.keys, and
//  broker.key.next removed. Returns 0, or -1 logged.
int brokerkeys_save_done (const char *state_dir, const char *old,
                          const char *next);

#endif
