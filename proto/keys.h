/*  =========================================================================
    keys - CurveZMQ key pairs on disk, and CURVE on sockets

    gridbroker, gridagent and gridcli each own a key pair. A pair lives in
    two files in CZMQ's zcert format: NAME.key holds the public key (it is
    safe to copy to other hosts) and NAME.key_secret holds both keys. A
    secret file is written mode 0600 and is refused when group or others
    may read it, as ssh refuses a loose private key. Public keys travel as
    40 characters of Z85 text, or as the path of a public key file.

    Every broker endpoint is a CURVE server with a ZAP domain and ZAP
    enforced (socket option 93, ZMQ_ZAP_ENFORCE_DOMAIN): without a ZAP
    handler a handshake fails instead of letting every key in. CZMQ's
    zsock_set_zap_enforce_domain does nothing against this libzmq, so the
    option is set with zmq_setsockopt and its return checked.

    Threading: reentrant, except keys_generate, which sets the process
    umask for the time it writes (call it before starting threads).
    =========================================================================
*/
#ifndef GRID_KEYS_H
#define GRID_KEYS_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define KEYS_Z85_LEN 40             //  A 32-byte key as Z85 text
#define KEYS_TEXT_SIZE (KEYS_Z85_LEN + 1)

//  ZAP domains of the broker's three endpoints
#define KEYS_DOMAIN_CLIENTS "clients"
#define KEYS_DOMAIN_AGENTS "agents"
#define KEYS_DOMAIN_COMMANDS "commands"
#define KEYS_DOMAIN_REPLICATION "replication"   //  A cluster's standbys

//  Default places (documented in docs/SECURITY.md)
#define KEYS_DEFAULT_DIR "/etc/grid/keys"
#define KEYS_DEFAULT_BROKER_KEY KEYS_DEFAULT_DIR "/broker.key"
#define KEYS_DEFAULT_AGENT_KEY KEYS_DEFAULT_DIR "/agent.key"

//  True when TEXT is exactly 40 characters of the Z85 alphabet that decode
//  to a 32-byte key.
bool keys_z85_valid (const char *text);

//  Writes a new key pair: DIR/NAME.key (public, mode 0644) and
//  DIR/NAME.key_secret (mode 0600), creating DIR (mode 0700) when it is
//  missing. NAME is a grid name ([A-Za-z0-9_-]{1,64}). An existing file is
//  never overwritten unless FORCE. META is NULL or NULL-terminated
//  name, value pairs kept in both files (e.g. "role", "admin"). Fills
//  PUBLIC_TXT (KEYS_TEXT_SIZE bytes) with the public key. Returns 0, or
//  -1 with a sentence in ERR.
int keys_generate (const char *dir, const char *name, bool force,
                   const char *const *meta, char *public_txt, char *err,
                   size_t err_len);

//  The secret file of the pair at PATH: PATH itself when it ends in
//  "_secret", else PATH + "_secret". Writes it into BUF; returns BUF.
const char *keys_secret_path (const char *path, char *buf, size_t buf_len);

//  Loads the key pair whose public file or secret file is PATH (see
//  keys_secret_path). Refuses a secret file that group or others can read,
//  one that is not a regular file, or one whose keys do not match. Returns
//  a new certificate (caller destroys), or NULL with a sentence in ERR that
//  says what to do.
zcert_t *keys_load_pair (const char *path, char *err, size_t err_len);

//  Reads a public key: TEXT is 40 characters of Z85, or the path of a key
//  file (public or secret; only the public key is read). Fills PUBLIC_TXT
//  (KEYS_TEXT_SIZE bytes). Returns 0, or -1 with a sentence in ERR.
int keys_read_public (const char *text, char *public_txt, char *err,
                      size_t err_len);

//  Makes SOCK (not yet connected) a CURVE client with the pair CERT that
//  trusts the server key SERVER_TXT (Z85).
void keys_curve_client (zsock_t *sock, zcert_t *cert, const char *server_txt);

//  Makes SOCK (not yet bound) a CURVE server with the pair CERT whose
//  handshakes are checked by the ZAP handler under DOMAIN, failing closed
//  when no handler answers. Returns 0, or -1 with a sentence in ERR when
//  libzmq refuses an option.
int keys_curve_server (zsock_t *sock, zcert_t *cert, const char *domain,
                       char *err, size_t err_len);

//  Starts watching SOCK (before it connects) for failed handshakes. Returns
//  a PAIR socket that becomes readable on each failure (caller destroys it
//  before SOCK), or NULL.
zsock_t *keys_monitor_new (zsock_t *sock);

//  As keys_monitor_new, and also for connections that are lost (a peer
//  that went away), which keys_monitor_read reports as 4, and for the
//  transport's own news: a TCP (or ipc) connection made (5) and a
//  connect that failed or is to be tried again (6: the peer refused it,
//  or the connection was just lost). Several 6 without a 5 between them
//  say that no process listens there.
zsock_t *keys_monitor_new_lossy (zsock_t *sock);

//  Reads one event from MONITOR and writes what it means into WHY (e.g.
//  "the broker refused this key"). Returns 1 for a refused key, 2 for
//  another handshake failure (wrong broker key, CURVE on one side only,
//  or a connection lost mid-handshake, which blames no key), 3 for a
//  handshake that succeeded, 4 for a connection lost, 5 for a connection
//  made, 6 for a connect to be tried again (4 to 6: keys_monitor_new_lossy
//  only), 0 for an event that is no failure, -1 when nothing could be
//  read.
int keys_monitor_read (zsock_t *monitor, char *why, size_t why_len);

//  The "keygen" command of the three programs. ARGV[0] is "keygen";
//  options --out DIR (default DEFAULT_DIR), --name NAME (default
//  DEFAULT_NAME), --force, --help. Prints the files written and the public
//  key to OUT, problems to ERR. Returns the exit code (0, 1 failure,
//  2 usage).
int keys_keygen_main (const char *program, const char *default_dir,
                      const char *default_name, int argc, char **argv,
                      FILE *out, FILE *err);

#endif
