/*  =========================================================================
    rekey - gridagent's key rotation on disk: the next key pair beside the
    current one, and the rotate-key command

    For the pair whose public file is P (the config's key: P, or its
    secret file P_secret), the next pair is P.next and P.next_secret
    (mode 0600), each written to a temporary file and renamed, the public
    file first: a rotation is under way while P.next_secret exists. The
    running agent sends the next public key over its session (PROTOCOL.md
    4.3), connects with the next pair once the broker took it, and after
    the welcome on that session commits: P.next_secret is renamed over
    P_secret (the switch: keys_load_pair reads the secret file only), then
    P.next over P. rekey_recover finishes a commit cut short between the
    two renames, and drops a public file whose write was cut short.

    Crashes: before the commit the agent restarts with its current key and
    the next pair still beside it, and asks again (the broker answers a
    rekey it knows where it stands); if the broker had already switched
    the node, the current key is refused at the handshake and the link
    falls back to the next pair (link_rekey_fallback). After the commit
    the next pair is the pair.

    Threading: reentrant, except rekey_write_next (it sets the process
    umask for the time it writes).
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
#include "config.h"
#include "link.h"

//  The files of a rotation, from the config's key file.
typedef struct {
    char pub [1024];             //  P
    char secret [1024];          //  P_secret
    char next_pub [1024];        //  P.next
    char next_secret [1024];     //  P.next_secret
} rekey_paths_t;

//  Fills PATHS from KEY_FILE (P or P_secret). Returns 0, or -1 when a
//  path does not fit.
int rekey_paths (const char *key_file, rekey_paths_t *paths);

//  Writes a new next pair for KEY_FILE, replacing one not yet used.
//  PUBLIC_TXT (KEYS_TEXT_SIZE bytes) gets its public key. Returns 0, or -1
//  with a sentence in ERR.
int rekey_write_next (const char *key_file, char *public_txt, char *err,
                      size_t err_len);

//  The next pair of KEY_FILE: NULL when there is none (ERR empty), or
//  when it cannot be used (the sentence in ERR).
zcert_t *rekey_load_next (const char *key_file, char *err, size_t err_len);

//  Makes the next pair the pair (the two renames). Returns 0, or -1 with a
//  sentence in ERR.
int rekey_commit (const char *key_file, char *err, size_t err_len);

//  Removes the next pair (the broker refused it). Returns 0 or -1.
int rekey_drop (const char *key_file);

//  At start: finishes a commit cut short, or drops a next public file
//  whose pair was never written whole. Returns 1 when it changed a file,
//  0 when nothing was to do, -1 with a sentence in ERR.
int rekey_recover (const char *key_file, char *err, size_t err_len);

//  Milliseconds since the pair of KEY_FILE was written (its secret file's
//  modification time), or -1 when it cannot be read.
int64_t rekey_key_age_ms (const char *key_file);

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

//  A welcome (GRANTED: it granted rekey). When the link now uses the
//  next key (the welcome came on its session, or the fallback), the next
//  pair becomes the pair on disk (rekey_commit).
void rekey_welcomed (rekey_t *self, bool granted);

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
