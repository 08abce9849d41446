/*  =========================================================================
    harness - integration test support: real gridbroker, gridagent and
    gridcli processes on ipc:// endpoints in a temporary directory

    Binaries come from $GRID_BIN (set by test/run_tests.sh; default
    build/bin). Every process started is recorded by pid and killed by
    grid_stop, which also removes the directory. Waiting is always polling
    with a deadline, never a fixed sleep.

    Everything runs with CURVE, as in production: grid_init makes a broker
    key pair and an admin client key pair in <dir>/keys; the broker starts
    with them (and --auto-accept, unless manual_accept is set), each agent
    gets its own key pair <dir>/keys/agent-<id>.key, and grid_call and
    grid_cli speak as the admin. Set insecure before starting anything to
    run plaintext instead.

    Threading: one grid_t per test, used from the test's thread.
    =========================================================================
*/
#ifndef GRID_HARNESS_H
#define GRID_HARNESS_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../../proto/pv.h"
#include "../../proto/pw.h"

#define GRID_MAX_AGENTS 32
//  How long the harness waits for a process it started to be ready, and
//  for one request's answer: generous, as a loaded machine (six builds and
//  test runs on two cores) once took 15 s to start a broker and over
//  500 ms for a CURVE handshake. Only a failing test waits that long.
#define GRID_START_MS 60000
#define GRID_CALL_MS 10000
#define GRID_MAX_RELAYS 8

typedef struct {
    char dir [256];                          //  Temporary directory
    char client_ep [320];                    //  Broker client endpoint
    char agents_ep [320];                    //  Broker agent endpoint
    char publish_ep [320];                   //  Broker commands endpoint
    char bin [512];                          //  Directory of the binaries
    pid_t broker_pid;                        //  0 when not running
    pid_t agent_pids [GRID_MAX_AGENTS];      //  0 when not running
    char agent_ids [GRID_MAX_AGENTS][65];    //  Their ids
    size_t agent_count;                      //  Slots used
    int request_seq;                         //  For request ids
    char keys_dir [300];                     //  Key pairs (under dir)
    char broker_key [320];                   //  The broker's key pair
    char admin_key [320];                    //  An admin client's key pair
    bool insecure;                           //  Run everything --insecure
    bool manual_accept;                      //  Broker without --auto-accept
    pid_t relay_pids [GRID_MAX_RELAYS];      //  gridrelays (0: not running)
    char relay_names [GRID_MAX_RELAYS][65];  //  Their names
    char relay_agents_ep [GRID_MAX_RELAYS][320];   //  Their agent endpoints
    char relay_publish_ep [GRID_MAX_RELAYS][320];  //  Their commands endpoints
    char relay_client_ep [GRID_MAX_RELAYS][320];   //  Their status endpoints
    char relay_key [GRID_MAX_RELAYS][320];   //  Their key pairs
    size_t relay_count;                      //  Slots used
} grid_t;

//  Makes the directory and endpoints (nothing started). Returns 0 or -1.
int grid_init (grid_t *grid);

//  Starts gridbroker with the standard endpoints and --data-dir, then
//  EXTRA (NULL-terminated, may be NULL); waits until it answers `status`
//  (up to GRID_START_MS).
//  Returns 0 or -1 (the log is printed).
int grid_start_broker (grid_t *grid, const char *const *extra);

//  Starts a broker as grid_start_broker does, without waiting for it to
//  answer (a cluster's standby answers not_leader). Returns 0 or -1.
int grid_spawn_broker (grid_t *grid, const char *const *extra);

//  Starts gridagent ID with GROUPS ("web,prod" or NULL), LABELS
//  ("tier=web.dev" or NULL) and EXTRA args; waits until the broker lists
//  it online (up to GRID_START_MS). Returns its slot or -1.
int grid_start_agent (grid_t *grid, const char *id, const char *groups,
                      const char *labels, const char *const *extra);

//  Starts gridagent like grid_start_agent without waiting for it to come
//  online (its key may wait as pending). Returns its slot or -1.
int grid_spawn_agent (grid_t *grid, const char *id, const char *groups,
                      const char *labels, const char *const *extra);

//  Makes (once) the key pair <keys_dir>/NAME.key; writes its public file's
//  path into PATH (PATH_LEN bytes) and, when PUBLIC_TXT is not NULL, its
//  public key (41 bytes). Returns 0 or -1.
int grid_keygen (grid_t *grid, const char *name, char *path, size_t path_len,
                 char *public_txt);

//  Starts gridrelay NAME (key pair <keys_dir>/relay-NAME.key, made when
//  missing; endpoints ipc://<dir>/relay-NAME-*.ipc) connected to the
//  relay in slot UPSTREAM, or to the broker when UPSTREAM is -1, with
//  EXTRA args; waits until it serves agents (WAIT, up to GRID_START_MS),
//  which needs its
//  upstream. Its key must be enrolled on the broker first (--relay-key,
//  grid_relay_keygen). Returns its slot (the same one again for a name
//  already used) or -1.
int grid_start_relay (grid_t *grid, const char *name, int upstream,
                      bool wait, const char *const *extra);

//  The key pair of relay NAME (made when missing): its public file's path
//  into PATH and, when PUBLIC_TXT is not NULL, its public key.
int grid_relay_keygen (grid_t *grid, const char *name, char *path,
                       size_t path_len, char *public_txt);

//  Kills the relay in SLOT (SIGKILL when HARD, else SIGTERM) and reaps it.
void grid_stop_relay (grid_t *grid, int slot, bool hard);

//  Kills process PID with SIGNAL and, for SIGKILL/SIGTERM, reaps it
//  (waiting up to 10 s). Returns 0.
int grid_kill (pid_t pid, int signal);

//  Kills the broker (SIGKILL when HARD, else SIGTERM) and reaps it.
void grid_stop_broker (grid_t *grid, bool hard);

//  Kills agent in SLOT the same way.
void grid_stop_agent (grid_t *grid, int slot, bool hard);

//  Kills everything started and removes the directory.
void grid_stop (grid_t *grid);

//  Sends one request (the bytes in REQUEST) on a fresh REQ socket and
//  waits up to TIMEOUT_MS. Returns the decoded reply or NULL.
pv_doc_t *grid_call_raw (grid_t *grid, const void *request, size_t size,
                         int timeout_ms);

//  Sends {type, id, key1: value1, ...} (string fields, NULL-terminated
//  pairs) and returns the decoded reply, or NULL when none came within
//  GRID_CALL_MS.
pv_doc_t *grid_call (grid_t *grid, const char *type, ...);

//  A DEALER connected to ENDPOINT as the key pair KEY_FILE (CURVE with the
//  broker's key; NULL: plaintext). Caller destroys it.
zsock_t *grid_dealer (grid_t *grid, const char *endpoint,
                      const char *key_file);

//  grid_call_raw and grid_call as the client whose key pair is KEY_FILE
//  (NULL: plaintext, no key at all).
pv_doc_t *grid_call_raw_as (grid_t *grid, const char *key_file,
                            const void *request, size_t size, int timeout_ms);
pv_doc_t *grid_call_as (grid_t *grid, const char *key_file,
                        const char *type, ...);

//  Submits the job written in YAML (the job-file form) and returns the
//  reply document (NULL when nothing answered within GRID_CALL_MS, in one
//  try: a submit is not sent twice; malformed YAML aborts).
pv_doc_t *grid_submit (grid_t *grid, const char *yaml);

//  Submits and returns the new job's id (caller frees), or NULL with the
//  reply printed to stderr.
char *grid_submit_id (grid_t *grid, const char *yaml);

//  True when REPLY is an ok reply; then *DATA_P is its data.
bool grid_reply_ok (const pv_doc_t *reply, const pv_t **data_p);

//  The error code of an error reply, or NULL.
char *grid_reply_code (const pv_doc_t *reply);

//  Polls job.get until the job's status is final (or TIMEOUT_MS passes).
//  Returns the last reply's document (NULL when nothing answered).
pv_doc_t *grid_wait_job (grid_t *grid, const char *job_id, int timeout_ms);

//  Polls node.get until the node's status is STATUS. Returns true on
//  success.
bool grid_wait_node (grid_t *grid, const char *node, const char *status,
                     int timeout_ms);

//  Runs gridcli with --broker <client_ep> and the NULL-terminated args;
//  captures stdout and stderr (caller frees); returns its exit code (or
//  -1 when it did not exit within TIMEOUT_MS, then it is killed).
int grid_cli (grid_t *grid, char **out_p, char **err_p, int timeout_ms, ...);

//  Runs PROGRAM of the binaries' directory (gridbroker, gridagent...)
//  with the NULL-terminated args and nothing added; captures stdout and
//  stderr (caller frees); returns its exit code, or -1 when it did not
//  exit within TIMEOUT_MS (then it is killed).
int grid_run (grid_t *grid, const char *program, char **out_p, char **err_p,
              int timeout_ms, ...);

//  grid_cli with --key KEY_FILE instead of the admin's (KEY_FILE NULL: no
//  key option at all, and no key in HOME or the environment either).
int grid_cli_as (grid_t *grid, const char *key_file, char **out_p,
                 char **err_p, int timeout_ms, ...);

//  The cell {status, output, ...} of STEP and NODE in a job record, or NULL.
const pv_t *grid_cell (const pv_t *record, int step, const char *node);

//  String field KEY of MAP compared with TEXT.
bool grid_str_is (const pv_t *map, const char *key, const char *text);

//  The whole file at PATH as a new string ("" when it cannot be read;
//  caller frees).
char *grid_slurp (const char *path);

//  The sha256 of the file at PATH into HEX (SHA256_HEX bytes, lower-case
//  hex); false when it cannot be read.
bool grid_file_sha256 (const char *path, char *hex);

//  True when some line of TEXT holds every one of the NULL-terminated
//  words that follow.
bool grid_line_with (const char *text, ...);

//  Prints the tail of every log in the directory to stderr (on failure).
void grid_dump_logs (grid_t *grid);

//  Current monotonic time in ms.
long long grid_now_ms (void);

#endif
