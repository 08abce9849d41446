/*  =========================================================================
    fixture - what the integration suites share on top of the harness:
    one grid per test as cmocka setup and teardown, replies asserted ok,
    logs polled for a line, job records checked cell by cell, and relays
    (their enrolment argument, agents that connect through one or more).

    Functions that assert fail the calling test the cmocka way, so call
    them only from a test (or its setup). Polling always has a deadline.

    Threading: the test's thread, like the harness.
    =========================================================================
*/
#ifndef GRID_FIXTURE_H
#define GRID_FIXTURE_H

#include "harness.h"

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

#endif
