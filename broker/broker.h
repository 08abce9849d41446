/*  =========================================================================
    broker - gridbroker's server: sockets, loop, configuration, passes

    One thread, one zloop. Three sockets: a ROUTER for clients, a ROUTER for
    agents (ZMQ_ROUTER_MANDATORY) and a PUB for commands. Each loop pass
    (one socket reading up to a batch of messages, or one tick) decodes,
    feeds the registry and the scheduler with the monotonic clock, drains
    the scheduler's actions into ONE store write transaction and an outbox,
    commits, and only then sends the outbox (group commit: nothing is
    acknowledged before it is durable). A tick first reads what waits on
    the agent socket, and judges deadlines by the last time it found that
    socket empty, so a broker that falls behind does not time out acks
    that are already in its own queue.

    The broker_t fields are shared with api.c (client request handlers)
    and nothing else.

    Threading: the broker runs in the thread that calls broker_run.
    =========================================================================
*/
#ifndef GRID_BROKER_H
#define GRID_BROKER_H

#include <czmq.h>

#include "../proto/job.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "../store/store.h"
#include "auth.h"
#include "config.h"
#include "ctx.h"
#include "stats.h"
#include "http.h"
#include "metrics.h"
#include "qstats.h"
#include "registry.h"
#include "relays.h"
#include "sched.h"

typedef struct _broker_t broker_t;

//  Opens the store, restores nodes and jobs, binds the sockets. Returns
//  NULL with a sentence in ERR on failure. CONFIG is copied.
broker_t *broker_new (const broker_config_t *config, char *err, size_t err_len);

//  Runs until SIGINT/SIGTERM. Returns 0.
int broker_run (broker_t *self);

//  Commits what is pending, closes sockets and the store; NULL-safe.
void broker_destroy (broker_t **self_p);

//  Reads the whole configuration again (config file, then flags) into
//  CONFIG, which holds the defaults. Returns 0, or -1 with a sentence in
//  ERR (ERR_LEN bytes).
typedef int (broker_config_fn) (broker_config_t *config, void *arg,
                                char *err, size_t err_len);

//  Makes SIGHUP reload the configuration through READ (with ARG): the
//  client keys and roles, the allowlist, auto_accept, max_pending_keys and
//  verbose change at once and no session drops; other changed settings
//  are logged as taking effect at the next start; a failed read is logged
//  and changes nothing. SIGHUP must be blocked in every thread (block it
//  in main() before any thread starts). Returns 0 or -1 (errno).
int broker_reload_on_sighup (broker_t *self, broker_config_fn *read,
                             void *arg);

//  Applies the reloadable parts of FRESH (see above) to the running
//  broker, taking them from FRESH, and logs what changed. Returns 0.
int broker_reload (broker_t *self, broker_config_t *fresh);

//  ----------------------------------------------------------------------
//  Internals shared with api.c.

//  broker.c's own state for the agent and commands sockets.
typedef struct _broker_io_t broker_io_t;

//  reload.c's SIGHUP state.
typedef struct _broker_reload_t broker_reload_t;

struct _broker_t {
    broker_config_t config;      //  Copied configuration
    zloop_t *loop;               //  The reactor
    zsock_t *client;             //  Client API ROUTER
    zsock_t *agents;             //  Agent ROUTER
    zsock_t *publish;            //  Commands XPUB (subscriptions granted by auth)
    zsock_t *http;               //  The HTTP face's bridge (inproc ROUTER), or NULL
    http_t *http_face;           //  The HTTP server (http.h), or NULL
    auth_t *auth;                //  ZAP handler, key store, roles
    relays_t *relays;            //  Relays and the nodes behind them
    store_lock_t *lock;          //  The data dir's lock (one broker per dir)
    store_t *store;              //  Jobs, results, events, nodes
    registry_t *registry;        //  Nodes
    sched_t *sched;              //  The scheduler
    store_txn_t *txn;            //  This pass's write transaction, or NULL
    zlistx_t *outbox;            //  Client replies to send after commit
    broker_io_t *io;             //  Agent socket frames, and the agent and
                                 //  command sends that wait for the commit
    pw_t *scratch;               //  Encoding buffer for records
    pw_t *body;                  //  Encoding buffer for messages
    zhashx_t *event_seq;         //  Job id -> next event seq (uint32_t *)
    zhashx_t *replies;           //  Recent client request id -> reply (zchunk_t)
    zlistx_t *reply_order;       //  Request ids in arrival order, for eviction
    broker_counters_t counters;  //  Dropped things
    int64_t bad_entry_logged_ms; //  When a bad results entry was last logged
    broker_storage_t storage;    //  The store's health
    zhashx_t *live_jobs;         //  Ids of the pending and running jobs
    zhashx_t *pass_jobs;         //  Ids of jobs this pass changed
    zlistx_t *pass_replies;      //  Request ids this pass added to replies
    zlistx_t *watchers;          //  Parked job.watch requests (s_watcher_t)
    zhashx_t *job_versions;      //  Job id -> how often it changed in this run
    zhashx_t *pass_versions;     //  Job id -> its version before this pass
                                 //  (uint64_t *; 0: it had none)
    char *park_job;              //  Set by api.c: park the request being
    uint64_t park_after;         //  handled as a watcher of this job, seen
    int64_t park_timeout_ms;     //  at this version, for at most this long
    zlistx_t *pass_logs;         //  Log lines that wait for this pass's commit
    uint64_t pass_finished [6];  //  finished[] when this pass began
    bool pass_broken;            //  This pass could not begin a transaction
    bool agents_resting;         //  The agent socket is not read (a cooldown)
    uint64_t finished [6];       //  Jobs finished, by sched_job_status_t
    uint64_t finished_by_priority [BROKER_PRIORITIES];  //  Jobs finished since start, by priority + 100
    qstats_t *wait_samples;      //  Submitted -> first step started, per node (ms)
    qstats_t *run_samples;       //  Attempt durations the agents measured (ms)
    metrics_t *metrics;          //  Histograms and counters for metrics.get
    zhashx_t *node_stats;        //  Node id -> broker_node_stats_t
    int64_t started_ms;          //  Monotonic start time
    bool maintenance;            //  Drained: no new jobs admitted (persisted)
    int64_t hold_until_ms;       //  Queued jobs wait for agents after a restart
    int64_t next_sweep_ms;       //  Next retention sweep
    int64_t next_seen_save_ms;   //  Next save of last-seen times
    int64_t last_id_ms;          //  Job id state
    uint32_t id_seq;             //  Job id state
    broker_reload_t *reload;     //  SIGHUP reload, or NULL
    zhashx_t *schedules;         //  Schedule name -> schedule_t (schedrun.c)
    int schedule_timer;          //  The one zloop timer of schedules, or 0
};

//  Ends the SIGHUP reload (reload.c); called by broker_destroy.
void broker_reload_destroy (broker_t *self);

//  The pass's write transaction (begun on first use). NULL when the store
//  cannot start one (logged). A pass whose commit fails is undone: its
//  client replies that wrote become storage_full or storage_error errors,
//  its acknowledgements and commands are dropped, and the scheduler is
//  rebuilt from the store (jobs as after a restart), so that memory is
//  never ahead of what is on disk.
store_txn_t *broker_txn (broker_t *self);

//  Drains the scheduler's actions into the transaction and the outbox.
void broker_drain (broker_t *self);

//  Enters or leaves maintenance (persisted): no new jobs are admitted and
//  queued jobs wait; running jobs finish.
void broker_set_maintenance (broker_t *self, bool on);

//  NODE's counters (made at first use).
broker_node_stats_t *broker_node_stats (broker_t *self, const char *node);

//  Writes NODE's store record into the pass's transaction.
void broker_save_node (broker_t *self, registry_node_t *node);

//  Purges finished jobs older than the retention (at most LIMIT per
//  call). Returns how many were purged.
size_t broker_sweep (broker_t *self, int64_t wall_ms, size_t limit);

//  Monotonic and wall clocks in ms.
int64_t broker_now_ms (void);
int64_t broker_wall_ms (void);

//  Ends a loop pass: drains the scheduler, commits, then sends.
void broker_pass_end (broker_t *self);


//  api.c: handles one decoded client request; writes the whole reply
//  (ok or error) into REPLY.
void api_handle (broker_t *self, const proto_request_t *request, pw_t *reply);

//  api.c: the broker's state (serving, draining, maintenance) and its
//  store's (ok, nearly_full, full, error; INFO from store_info), as
//  status says them.
const char *api_broker_state (const broker_t *self);
const char *api_store_state (const broker_t *self, const store_info_t *info);

//  job.watch: how often JOB_ID changed in this broker's run (a number the
//  broker bumps whenever the scheduler acts on the job; 0 before the
//  first change, and again once a finished job has been answered for).
uint64_t broker_job_version (broker_t *self, const char *job_id);

//  job.watch: asks the broker to answer the request api.c is handling
//  later, when JOB_ID's version is no longer AFTER, the job ends, or
//  TIMEOUT_MS passes, instead of now. api.c leaves its reply empty.
void broker_watch_park (broker_t *self, const char *job_id, uint64_t after,
                        int64_t timeout_ms);

//  api.c: writes the whole job.watch reply to request REQUEST_ID about
//  JOB_ID at VERSION into REPLY: {version, changed, progress: PROGRESS}, or
//  not_found / storage_error.
void api_write_watch (broker_t *self, const char *request_id,
                      const char *job_id, uint64_t version, bool changed,
                      pw_t *reply);

//  api.c: checks every leaf of SPEC against what the registered nodes
//  offer (backend, action, params); adds "path: reason" sentences to
//  DETAILS (a zlistx of strings it owns).
void api_check_actions (broker_t *self, const job_spec_t *spec,
                        zlistx_t *details);

//  schedrun.c: loads the stored schedules (applying catch-up for times
//  missed while the broker was down) and sets the timer. Returns 0, or -1
//  with a sentence in ERR.
int schedrun_restore (broker_t *self, char *err, size_t err_len);

//  schedrun.c: sets the one schedules timer for the earliest due time.
void schedrun_arm (broker_t *self);

//  schedrun.c: a job finished; when a schedule started it, its last
//  status follows, and a run it queued may start.
void schedrun_on_finished (broker_t *self, const sched_job_t *job);

//  schedrun.c: handles a schedule.* request. Returns false when TYPE is
//  not one of them.
bool schedrun_handle (broker_t *self, const proto_request_t *request,
                      pw_t *reply);

#endif
