/*  =========================================================================
    fixture - what the integration suites share on top of the harness:
    one grid per test as cmocka setup and teardown, replies asserted ok,
    logs polled for a line, job records checked cell by cell, relays
    (their enrolment argument, agents that connect through one or more),
    and hand-made agents: DEALERs that speak the agent protocol message by
    message, beating while the test waits for an answer.

    Functions that assert fail the calling test the cmocka way, so call
    them only from a test (or its setup). Polling always has a deadline.

    Threading: the test's thread, like the harness.
    =========================================================================
*/
#ifndef GRID_FIXTURE_H
#define GRID_FIXTURE_H

#include "harness.h"
#include "../../proto/proto.h"

#define FIXTURE_VIA_MAX 4   //  Relays one agent may list

//  An agent's options to reach the broker through relays (fixture_via).
typedef struct {
    char brokers [FIXTURE_VIA_MAX * 330];      //  --broker A,B,...
    char publishes [FIXTURE_VIA_MAX * 330];    //  --publish A,B,...
    char keys [FIXTURE_VIA_MAX * 330];         //  --broker-key A,B,...
    const char *extra [32];                    //  NULL-terminated args
} fixture_via_t;

#define FIXTURE_RELAYS_MAX 4  //  Relays fixture_start_relays enrols

//  The broker's arguments that enrol relays (fixture_start_relays), kept
//  for a restart with the same ones.
typedef struct {
    char keys [FIXTURE_RELAYS_MAX][600];       //  NAME[@POOL]:FILE each
    const char *args [64];                     //  NULL-terminated args
} fixture_broker_t;

//  cmocka setup: a new grid_t (grid_init: directory and endpoints,
//  nothing started) into *STATE. Returns 0, or -1 when it cannot.
int fixture_setup (void **state);

//  cmocka teardown: wakes a broker the test left stopped (SIGSTOP), then
//  grid_stop (every process killed by pid, the directory removed) and
//  frees the grid. Returns 0.
int fixture_teardown (void **state);

//  The data of the reply DOC, asserting that it is an ok reply. Lent:
//  valid until DOC is destroyed.
const pv_t *fixture_data (const pv_doc_t *doc);

//  Asserts that every (step, expected node) cell of the job RECORD has
//  STATUS and exactly one attempt, and that there is a result map per
//  step: nothing missing, nothing run or counted twice. Prints the cell
//  that differs.
void fixture_assert_cells (const pv_t *record, const char *status);

//  "NAME@POOL:FILE" (POOL NULL: "NAME:FILE") for the broker's
//  --relay-key, with relay NAME's key pair made when missing, in ARG
//  (ARG_LEN bytes). Returns ARG.
const char *fixture_relay_arg (grid_t *grid, const char *name,
                               const char *pool, char *arg, size_t arg_len);

//  Starts the broker with --relay-key for each relay of NAMES
//  (NULL-terminated; fixture_relay_arg with POOL) then BROKER_EXTRA (may
//  be NULL), all kept in BROKER (grid_start_broker (grid, broker->args)
//  starts it again alike); then each relay connected to the broker,
//  waiting until it serves agents. Their slots into SLOTS, one per name.
//  Asserts that everything started.
void fixture_start_relays (grid_t *grid, fixture_broker_t *broker,
                           const char *pool, const char *const *names,
                           const char *const *broker_extra, int *slots);

//  Fills VIA with an agent's --broker, --publish and --broker-key for the
//  COUNT relays in SLOTS (in that order: the agent fails over down the
//  list), then the NULL-terminated MORE (may be NULL). Returns VIA->extra,
//  valid as long as VIA.
const char *const *fixture_via (grid_t *grid, fixture_via_t *via,
                                const int *slots, size_t count,
                                const char *const *more);

//  Starts agent ID in GROUPS (may be NULL) through the relay in SLOT and
//  waits until the broker lists it online (grid_start_agent). Returns
//  its slot or -1.
int fixture_start_agent_via (grid_t *grid, const char *id,
                             const char *groups, int slot);

//  Polls job JOB_ID until the cell (STEP, NODE) of every node of NODES
//  (NULL-terminated) has one of STATUSES ("running|acknowledged").
//  Returns true when they did within TIMEOUT_MS.
bool fixture_wait_cells (grid_t *grid, const char *job_id, int step,
                         const char *const *nodes, const char *statuses,
                         int timeout_ms);

//  How many times the file at PATH holds TEXT now (0 when it cannot be
//  read).
int fixture_file_count (const char *path, const char *text);

//  True when the file at PATH holds TEXT now.
bool fixture_file_has (const char *path, const char *text);

//  Polls the file at PATH until it holds TEXT at least COUNT times.
//  Returns true when it did within TIMEOUT_MS.
bool fixture_wait_file (const char *path, const char *text, int count,
                        int timeout_ms);

//  Polls the log NAME ("broker.log", "relay-r1.log", "agent-web-01.log")
//  in the grid's directory until it holds TEXT. Returns true when it did
//  within TIMEOUT_MS.
bool fixture_log_has (grid_t *grid, const char *name, const char *text,
                      int timeout_ms);

//  The same until the log holds TEXT at least COUNT times.
bool fixture_log_count (grid_t *grid, const char *name, const char *text,
                        int count, int timeout_ms);

//  Hand-made agents. Each one fixture_agent makes sends a heartbeat every
//  200 ms while fixture_recv waits on any of them (the harness's broker
//  marks a node silent for a second offline); fixture_teardown forgets
//  them all.
#define FIXTURE_AGENTS_MAX 4

//  Encodes MSG and sends it on DEALER (asserts both went).
void fixture_send (zsock_t *dealer, const proto_msg_t *msg);

//  Sends the SIZE bytes at DATA on DEALER as one message.
void fixture_send_bytes (zsock_t *dealer, const void *data, size_t size);

//  Sends every hand-made agent's heartbeat: at once when NOW, else only
//  when 200 ms passed since the last ones.
void fixture_beat (bool now);

//  The next message on DEALER within TIMEOUT_MS, decoded (caller
//  destroys), or NULL; hand-made agents beat meanwhile.
proto_msg_t *fixture_recv (zsock_t *dealer, int timeout_ms);

//  The body of the last message fixture_recv read (its first SIZE_P
//  bytes, at most 4096), valid until the next fixture_recv.
const void *fixture_last_body (size_t *size_p);

//  The next message of TYPE on DEALER within TIMEOUT_MS (others are
//  skipped and destroyed), or NULL.
proto_msg_t *fixture_recv_type (zsock_t *dealer, proto_type_t type,
                                int timeout_ms);

//  Sends hello as NODE declaring the test backend's echo (so that jobs
//  may target it) and naming the first FEATURE_COUNT of result_acks,
//  results, live_output and blobs (0: an older agent that names none).
void fixture_hello (zsock_t *dealer, const char *node, size_t feature_count);

//  A DEALER (key pair agent-NODE) that said hello as NODE (fixture_hello)
//  at ENDPOINT (NULL: the broker's agent endpoint) and was welcomed; its
//  welcome into *WELCOME_P when that is not NULL (caller destroys). It
//  beats from now on; it belongs to the fixture (fixture_agents_forget).
zsock_t *fixture_agent (grid_t *grid, const char *node, size_t feature_count,
                        const char *endpoint, proto_msg_t **welcome_p);

//  fixture_agent through the relay in SLOT (its agent endpoint, CURVE
//  with its key).
zsock_t *fixture_agent_via (grid_t *grid, const char *node,
                            size_t feature_count, int slot,
                            proto_msg_t **welcome_p);

//  Reads DEALER until it took a command of each of the COUNT jobs JOBS
//  (at most 16; others are skipped), asserting it did within TIMEOUT_MS.
void fixture_take_commands (zsock_t *dealer, char jobs [][32], size_t count,
                            int timeout_ms);

//  Asserts that each of the COUNT jobs JOBS completed within TIMEOUT_MS,
//  its one cell of NODE success with exactly one attempt and, when OUTPUT,
//  the job's id as its output (what the tests' hand-made agents send).
void fixture_assert_jobs (grid_t *grid, char jobs [][32], size_t count,
                          const char *node, bool output, int timeout_ms);

//  Destroys every hand-made agent's DEALER; they beat no more.
void fixture_agents_forget (void);

#endif
