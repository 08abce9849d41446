/*  =========================================================================
    ctx - what a handler sees of the broker: the narrow context

    Every handler (client requests under broker/req/, agent messages,
    keys, tokens, relays, schedules, metrics) is handed a ctx_t, never the
    broker's own struct, which is private to broker.c. A context holds the
    pass and the clock (as functions, so a test fakes them), the running
    configuration, the store, the registry, the scheduler, auth, relays,
    schedules, the figures and the broker's small state.

    The pass is the current loop pass: its store write transaction (begun
    on first use) and the drain of the scheduler's actions into it and
    into the outbox. What a handler writes is committed with the pass;
    replies and sends leave only after the commit (broker.c). A pass whose
    commit fails is undone by the server, so a handler never undoes.

    test/lib/ctxfake.c builds a context over a temporary store with a fake
    clock and a pass that commits when asked, for unit tests.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_CTX_H
#define GRID_BROKER_CTX_H

#include <czmq.h>

#include "../proto/pw.h"
#include "../store/store.h"
#include "auth.h"
#include "brokerkey.h"
#include "config.h"
#include "http.h"
#include "notify.h"
#include "outlog.h"
#include "registry.h"
#include "relays.h"
#include "sched.h"
#include "repl.h"
#include "stats.h"

#define CTX_META_MAINTENANCE "maintenance"   //  meta key of the maintenance flag

typedef struct _ctx_t ctx_t;

//  A broker cluster as cluster.status shows it (cluster.h).
#define CTX_CLUSTER_STANDBYS 8
typedef struct {
    bool enabled;                //  A member of a cluster (else alone)
    const char *cluster;         //  Its name (lent by the config)
    const char *name;            //  This member's
    uint64_t epoch;              //  This leadership's
    uint64_t last;               //  The last pass shipped
    uint64_t released;           //  What the standbys let it release
    int64_t valid_ms;            //  How long its leadership is valid yet
    bool strict;
    int64_t sync_timeout_ms;
    size_t standby_count;
    repl_standby_info_t standbys [CTX_CLUSTER_STANDBYS];
} ctx_cluster_t;

//  The pass and the clock, as the server (or a test) provides them.
typedef struct {
    //  The pass's write transaction, begun on first use; NULL when the
    //  store cannot begin one (the server logs why).
    store_txn_t *(*txn) (ctx_t *ctx);
    //  Drains the scheduler's actions into the pass (records, events,
    //  commands to send after the commit).
    void (*drain) (ctx_t *ctx);
    //  The monotonic clock and the wall clock, in ms.
    int64_t (*now_ms) (ctx_t *ctx);
    int64_t (*wall_ms) (ctx_t *ctx);
    //  How often JOB_ID changed in this broker's run (job.watch): a number
    //  the server bumps whenever the scheduler acts on the job; 0 before
    //  the first change.
    uint64_t (*job_version) (ctx_t *ctx, const char *job_id);
    //  How many job.watch requests wait parked now (metrics.get).
    size_t (*watcher_count) (ctx_t *ctx);
    //  Appends the job-level EVENT with DETAIL to JOB_ID's timeline in the
    //  pass (a job the scheduler no longer holds: a retried one); its
    //  version moves on.
    void (*job_event) (ctx_t *ctx, const char *job_id, const char *event,
                       const char *detail);
    //  The cluster this broker is the active of, into VIEW (enabled false
    //  for a broker alone).
    void (*cluster) (ctx_t *ctx, ctx_cluster_t *view);
    //  Hands the lead over (cluster.switchover) once what waits for the
    //  standbys is sent: 0, or -1 with a sentence in ERR (no standby in
    //  sync; TO, when not NULL, is not the one).
    int (*switchover) (ctx_t *ctx, const char *to, char *err,
                       size_t err_len);
} ctx_ops_t;

//  The broker's small state that handlers read and change.
typedef struct {
    bool maintenance;            //  Drained: no new jobs admitted (persisted)
    int64_t hold_until_ms;       //  Monotonic: queued jobs wait for agents
                                 //  after a restart until then (0: no hold)
    int64_t last_id_ms;          //  Job id state (job_id_make)
    uint32_t id_seq;             //  Job id state
} ctx_state_t;

struct _ctx_t {
    const ctx_ops_t *ops;        //  The pass and the clock
    broker_config_t *config;     //  The running configuration (SIGHUP
                                 //  changes its reloadable parts)
    store_t *store;              //  Jobs, results, events, nodes, keys
    registry_t *registry;        //  Nodes
    sched_t *sched;              //  The scheduler
    auth_t *auth;                //  Keys, roles, allowlist, tokens
    brokerkey_t *brokerkey;      //  The rotation of the broker's own key
    relays_t *relays;            //  Relays and the nodes behind them
    zhashx_t *schedules;         //  Schedule name -> schedule_t (schedrun.h)
    broker_stats_t *stats;       //  Counters and figures
    ctx_state_t state;           //  Maintenance, the restart hold, job ids
    http_t *http_face;           //  The HTTP face (for its figures), or NULL
    otlp_t *tracer;              //  The span exporter (tracing:), or NULL
    notify_t *notify;            //  Job notifications: pending deliveries,
                                 //  workers, counters
    outlog_t *outlog;            //  Output pieces kept lately (live jobs)
    pw_t *scratch;               //  An encoding buffer any handler may reset
                                 //  and use until it returns
};

//  The pass's write transaction (ops->txn).
static inline store_txn_t *
ctx_txn (ctx_t *ctx)
{
    return ctx->ops->txn (ctx);
}

//  Drains the scheduler's actions into the pass (ops->drain).
static inline void
ctx_drain (ctx_t *ctx)
{
    ctx->ops->drain (ctx);
}

//  The monotonic clock, ms.
static inline int64_t
ctx_now_ms (ctx_t *ctx)
{
    return ctx->ops->now_ms (ctx);
}

//  The wall clock, ms since the epoch.
static inline int64_t
ctx_wall_ms (ctx_t *ctx)
{
    return ctx->ops->wall_ms (ctx);
}

//  How often JOB_ID changed in this run (ops->job_version).
static inline uint64_t
ctx_job_version (ctx_t *ctx, const char *job_id)
{
    return ctx->ops->job_version (ctx, job_id);
}

//  How many job.watch requests wait parked now (ops->watcher_count).
static inline size_t
ctx_watcher_count (ctx_t *ctx)
{
    return ctx->ops->watcher_count (ctx);
}

//  Appends a job-level event to JOB_ID's timeline (ops->job_event).
static inline void
ctx_job_event (ctx_t *ctx, const char *job_id, const char *event,
               const char *detail)
{
    ctx->ops->job_event (ctx, job_id, event, detail);
}

//  Logs a store write that failed for another reason than a full or
//  failing store (those end the pass, and the server reports them). WHAT
//  names the record ("a node").
void ctx_store_error (int rc, const char *what);

//  Writes NODE's registry record into the pass's transaction and marks
//  its last-seen time saved. Nothing when no transaction can be had.
void ctx_save_node (ctx_t *ctx, registry_node_t *node);

//  Takes node ID offline at once (logged with WHY), as when its key is
//  revoked: saved, and its in-flight cells handed to the scheduler.
void ctx_node_offline (ctx_t *ctx, const char *id, const char *why);

//  Enters or leaves maintenance (persisted in meta): no new jobs are
//  admitted and queued jobs wait; running jobs finish.
void ctx_set_maintenance (ctx_t *ctx, bool on);

//  A new job id made at WALL_MS into ID (JOB_ID_LEN + 1 bytes): time-
//  sortable and never one this broker made before.
void ctx_job_id (ctx_t *ctx, int64_t wall_ms, char *id);

//  The broker's state as status says it: serving, draining (maintenance
//  with jobs still running) or maintenance.
const char *ctx_broker_state (const ctx_t *ctx);

//  The store's state as status says it: ok, nearly_full, full or error
//  (INFO from store_info).
const char *ctx_store_state (const ctx_t *ctx, const store_info_t *info);

#endif
