/*  =========================================================================
    broker - gridbroker's server: the loop, its readers, timers and
    signals, the tick, start and stop (see broker.h)
    =========================================================================
*/
#include "broker.h"
#include "broker_int.h"
#include "listener.h"

static broker_io_t *
s_io_new (void)
{
    broker_io_t *io = (broker_io_t *) zmalloc (sizeof (broker_io_t));
    zmq_msg_init (&io->routing);
    zmq_msg_init (&io->via);
    zmq_msg_init (&io->body);
    io->batch_relays = zhashx_new ();
    return io;
}

static void
s_io_destroy (broker_io_t **io_p)
{
    broker_io_t *io = *io_p;
    if (io) {
        zmq_msg_close (&io->routing);
        zmq_msg_close (&io->via);
        zmq_msg_close (&io->body);
        free (io->bytes);
        free (io->sends);
        free (io->acks);
        free (io->ack_slots);
        free (io->ack_order);
        free (io->ack_batch);
        zhashx_destroy (&io->batch_relays);
        free (io);
        *io_p = NULL;
    }
}

int64_t
broker_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t
broker_wall_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

//  ---------------------------------------------------------------------
//  Saves NODE's record into the pass (relays' and reload's callback).

static void
s_save_node (void *arg, registry_node_t *node)
{
    ctx_save_node ((ctx_t *) arg, node);
}

//  ---------------------------------------------------------------------
//  Tick: liveness and scheduler deadlines

//  A node that stays offline past the grace has its in-flight work
//  declared lost; one that comes back within it reports what it ran
//  (results from its spool, or `interrupted` after a restart).
static void
s_report_offline (broker_t *self, int64_t now_ms)
{
    const char **ids = NULL;
    size_t count = registry_overdue (self->ctx.registry, now_ms,
                                     self->config.offline_grace_ms, &ids);
    for (size_t index = 0; index < count; index++) {
        if (self->config.verbose)
            log_node (LOG_LEVEL_INFO, ids [index], "node %s: offline past "
                      "the grace, its running steps are lost", ids [index]);
        sched_on_node_offline (self->ctx.sched, ids [index], now_ms);
    }
    free (ids);
}

//  The time by which the tick judges deadlines (acks, heartbeats, task
//  and job timeouts, backoffs). Acks, results and heartbeats that wait
//  unread in the agent socket were sent in time: a broker that has
//  fallen behind must not count its own backlog against its agents. So
//  a deadline passes only once a pass that began after it found the
//  agent socket empty; and at most BACKLOG_LAG_MAX_MS late, so that a
//  flood delays the timers but cannot stop them.
static int64_t
s_deadline_clock (broker_t *self, int64_t now_ms)
{
    int64_t clock_ms = self->io->agents_empty_ms;
    if (clock_ms < now_ms - BACKLOG_LAG_MAX_MS)
        clock_ms = now_ms - BACKLOG_LAG_MAX_MS;
    return clock_ms < now_ms ? clock_ms : now_ms;
}

//  Saves the last-seen times of the nodes heard from, at or before
//  BEFORE_MS, since theirs were saved: at most LIMIT of them, in the
//  pass's transaction (nodeseen.h). Returns how many.
static size_t
s_save_seen (broker_t *self, int64_t before_ms, size_t limit)
{
    if (!nodeseen_due (self->ctx.registry, before_ms))
        return 0;
    store_txn_t *txn = broker_txn (self);
    if (!txn)
        return 0;
    int64_t saved = nodeseen_save (txn, self->ctx.registry, before_ms, limit);
    if (saved < 0) {
        ctx_store_error ((int) saved, "last-seen times");
        return 0;
    }
    return (size_t) saved;
}

//  Warns once when the store passes STORE_NEARLY_FULL percent of
//  store.max_size (again after it fell below STORE_REARM_PERCENT).
static void
s_check_room (broker_t *self, int64_t now_ms)
{
    //  While commits fail, a small write now and then finds out when the
    //  room is back even if nothing else writes
    broker_storage_t *storage = &self->stats->storage;
    if (storage->code && now_ms - storage->failed_ms >= STORE_PROBE_MS
        && now_ms - storage->written_ms >= STORE_PROBE_MS && broker_txn (self)) {
        uint8_t stamp [8];
        uint64_t wall_ms = (uint64_t) broker_wall_ms ();
        for (int index = 0; index < 8; index++)
            stamp [index] = (uint8_t) (wall_ms >> (56 - 8 * index));
        store_put (self->txn, STORE_DB_META, META_PROBE, strlen (META_PROBE),
                   stamp, sizeof stamp);
    }
    store_info_t info;
    store_info (self->ctx.store, &info);
    if (info.max_bytes == 0)
        return;
    double percent = info.used_bytes * 100.0 / (double) info.max_bytes;
    if (!self->stats->storage.warned && percent >= STORE_NEARLY_FULL) {
        self->stats->storage.warned = true;
        log_warn ("store: %.0f%% of store.max_size used (%zu of %zu MiB): "
               "past 95%% new jobs are refused; purge old jobs or raise "
               "store.max_size", percent, info.used_bytes >> 20,
               info.max_bytes >> 20);
    }
    else
    if (self->stats->storage.warned && percent < STORE_REARM_PERCENT)
        self->stats->storage.warned = false;
}

static int
s_on_tick (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    //  Input first: zloop runs timers before readers, and a busy agent
    //  socket would otherwise hold the answers to the deadlines below.
    for (int pass = 0; pass < TICK_PASSES && !self->agents_resting; pass++)
        if (broker_agents_pass (self))
            break;
    int64_t now_ms = broker_now_ms ();
    int64_t deadline_ms = s_deadline_clock (self, now_ms);
    const char **offline = NULL;
    size_t count = registry_expire (self->ctx.registry, deadline_ms,
                                    self->config.heartbeat_ms
                                        * self->config.missed_heartbeats,
                                    &offline);
    for (size_t index = 0; index < count; index++) {
        log_node (LOG_LEVEL_INFO, offline [index],
                  "node %s is offline (no heartbeat for %" PRId64 " ms)",
                  offline [index],
               self->config.heartbeat_ms * self->config.missed_heartbeats);
        registry_node_t *node = registry_lookup (self->ctx.registry, offline [index]);
        if (node)
            ctx_save_node (&self->ctx, node);
        //  Any-node steps it holds go elsewhere now, not after the grace
        sched_on_node_down (self->ctx.sched, offline [index], deadline_ms);
    }
    free (offline);
    //  Last-seen times lag at most last_seen_save, plus a pass, plus two
    //  heartbeats (nodeseen.h)
    if (now_ms >= self->next_seen_save_ms) {
        int64_t every_ms = self->config.last_seen_save_ms;
        every_ms = every_ms < NODESEEN_EVERY_MS ? every_ms : NODESEEN_EVERY_MS;
        self->next_seen_save_ms = now_ms + every_ms;
        s_save_seen (self, now_ms - self->config.last_seen_save_ms,
                     NODESEEN_BATCH);
    }
    relays_tick (self->ctx.relays, self->ctx.auth, self->ctx.registry,
                 self->ctx.sched, now_ms, s_save_node, &self->ctx);
    broker_keys_tick (self);
    s_report_offline (self, deadline_ms);
    s_check_room (self, now_ms);
    //  The hold after a restore ends when its time is up, or as soon as
    //  every node the broker knows is back: the registry is whole (a
    //  failover in a cluster, a quick restart), nothing to wait for
    bool all_back = self->ctx.state.hold_until_ms
                    && registry_online_count (self->ctx.registry)
                           >= registry_size (self->ctx.registry);
    if (self->ctx.state.hold_until_ms
        && (all_back || now_ms >= self->ctx.state.hold_until_ms)) {
        if (all_back && now_ms < self->ctx.state.hold_until_ms)
            log_info ("every known node is back after the restart: queued "
                      "jobs start");
        self->ctx.state.hold_until_ms = 0;
        if (!self->ctx.state.maintenance)
            sched_set_paused (self->ctx.sched, false);
    }
    broker_gate_release (self);
    //  Every tick, not only at deadlines: it also admits queued jobs.
    sched_tick (self->ctx.sched, deadline_ms);
    int64_t retention_ms = self->config.retention_ms;
    if (self->config.dlq_retention_ms > 0
        && (retention_ms <= 0 || self->config.dlq_retention_ms < retention_ms))
        retention_ms = self->config.dlq_retention_ms;
    if (self->config.audit_retention_ms > 0
        && (retention_ms <= 0 || self->config.audit_retention_ms < retention_ms))
        retention_ms = self->config.audit_retention_ms;
    if (retention_ms > 0 && now_ms >= self->next_sweep_ms) {
        //  Sweep every minute, or more often for a short retention.
        int64_t every_ms = retention_ms / 2;
        every_ms = every_ms < 1000 ? 1000 : every_ms > 60000 ? 60000 : every_ms;
        self->next_sweep_ms = now_ms + every_ms;
        size_t purged = broker_sweep (self, broker_wall_ms (), 1000);
        if (purged)
            log_info ("purged %zu finished job%s older than the retention",
                   purged, purged == 1 ? "" : "s");
    }
    if (self->config.notify.retention_ms > 0 && now_ms >= self->next_notify_prune_ms) {
        self->next_notify_prune_ms = now_ms + 60000;
        store_txn_t *txn = broker_txn (self);
        int pruned = txn ? notify_prune (txn, broker_wall_ms ()
                                                  - self->config.notify.retention_ms,
                                         1000)
                         : 0;
        ctx_store_error (pruned < 0 ? pruned : 0, "webhook deliveries");
    }
    broker_blobs_tick (self, now_ms);
    broker_pass_end (self);
    broker_schedules_arm (self);
    //  Committed deliveries only: after the pass
    notify_dispatch (self->ctx.notify, self->ctx.store, &self->config.notify,
                     broker_wall_ms ());
    return 0;
}

//  A webhook worker's outcomes: each recorded in the pass (the delivery,
//  the job's timeline), then the next due deliveries go out.
static int
s_on_notify (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_t *self = (broker_t *) arg;
    notify_outcome_t outcome;
    for (int read = 0; read < 64; read++) {
        if (read > 0 && !(zsock_events (socket) & ZMQ_POLLIN))
            break;
        if (notify_outcome_recv (self->ctx.notify, &outcome) != 0)
            break;
        store_txn_t *txn = broker_txn (self);
        if (!txn)
            break;
        char job_id [JOB_ID_LEN + 1] = "";
        const char *event = NULL;
        char detail [768];
        int64_t wall_ms = broker_wall_ms ();
        int rc = notify_outcome_apply (self->ctx.notify, txn,
                                       &self->config.notify, &outcome, wall_ms,
                                       job_id, &event, detail, sizeof detail);
        ctx_store_error (rc < 0 ? rc : 0, "a webhook delivery");
        if (rc != 0 || !event)
            continue;
        //  A dead delivery is a warning; attempts are the timeline's
        bool dead = strcmp (event, "notify_dead") == 0;
        log_job (dead ? LOG_LEVEL_WARN : LOG_LEVEL_INFO, job_id, NULL,
                 "job %s: webhook %s: %s", job_id,
                 dead ? "dead-lettered"
                 : strcmp (event, "notify_sent") == 0 ? "sent" : "failed",
                 detail);
        //  Its timeline, while the job is still stored
        const void *header = NULL;
        size_t size = 0;
        if (store_get (txn, STORE_DB_JOBS, job_id, strlen (job_id), &header,
                       &size) == 0)
            ctx_job_event (&self->ctx, job_id, event, detail);
    }
    broker_pass_end (self);
    notify_dispatch (self->ctx.notify, self->ctx.store, &self->config.notify,
                     broker_wall_ms ());
    return 0;
}

//  ---------------------------------------------------------------------
//  The context's pass and clock (ctx.h): the handlers' view of the server

static broker_t *
s_broker_of (ctx_t *ctx)
{
    //  The context is the server's first member
    return (broker_t *) ctx;
}

static store_txn_t *
s_ctx_txn (ctx_t *ctx)
{
    return broker_txn (s_broker_of (ctx));
}

static void
s_ctx_drain (ctx_t *ctx)
{
    broker_drain (s_broker_of (ctx));
}

static int64_t
s_ctx_now_ms (ctx_t *ctx)
{
    return broker_now_ms ();
}

static int64_t
s_ctx_wall_ms (ctx_t *ctx)
{
    return broker_wall_ms ();
}

static uint64_t
s_ctx_job_version (ctx_t *ctx, const char *job_id)
{
    return broker_job_version (s_broker_of (ctx), job_id);
}

static size_t
s_ctx_watcher_count (ctx_t *ctx)
{
    return zlistx_size (s_broker_of (ctx)->watchers);
}

static void
s_ctx_job_event (ctx_t *ctx, const char *job_id, const char *event,
                 const char *detail)
{
    broker_t *self = s_broker_of (ctx);
    store_txn_t *txn = broker_txn (self);
    if (!txn)
        return;
    uint32_t seq = broker_next_event_seq (self, job_id);
    ctx_store_error (jobrec_save_event (txn, job_id, seq, broker_wall_ms (),
                                        event, NULL, -1, detail,
                                        self->ctx.scratch),
                     "an event");
    broker_job_changed (self, job_id);
}

static void
s_ctx_cluster (ctx_t *ctx, ctx_cluster_t *view)
{
    broker_t *self = (broker_t *) ctx;
    memset (view, 0, sizeof *view);
    if (!self->repl)
        return;
    int64_t now_ms = broker_now_ms ();
    view->enabled = true;
    view->cluster = self->config.cluster.cluster;
    view->name = self->config.cluster.name;
    view->epoch = self->epoch;
    view->last = repl_source_last (self->repl);
    view->released = repl_source_released (self->repl);
    view->valid_ms = self->valid_until - now_ms;
    view->strict = self->config.cluster.strict;
    view->sync_timeout_ms = self->config.cluster.sync_timeout_ms;
    while (view->standby_count < CTX_CLUSTER_STANDBYS
           && repl_source_standby_at (self->repl, view->standby_count, now_ms,
                                      &view->standbys [view->standby_count]))
        view->standby_count++;
}

static int
s_ctx_switchover (ctx_t *ctx, const char *to, char *err, size_t err_len)
{
    broker_t *self = (broker_t *) ctx;
    if (!self->repl) {
        snprintf (err, err_len, "this broker runs alone (no ha: in its "
                  "config): there is no standby to hand over to");
        return -1;
    }
    size_t sync = 0;
    bool named = false;
    repl_standby_info_t info;
    for (size_t index = 0;
         repl_source_standby_at (self->repl, index, broker_now_ms (), &info);
         index++)
        if (info.sync) {
            sync++;
            named = named || (to && strcmp (info.name, to) == 0);
        }
    if (sync == 0) {
        snprintf (err, err_len, "no standby is in sync: a switchover now "
                  "would leave the cluster without an active; see gridcli "
                  "cluster status");
        return -1;
    }
    if (to && !named) {
        snprintf (err, err_len, "%s is not a standby in sync (see gridcli "
                  "cluster status)", to);
        return -1;
    }
    if (to && sync > 1) {
        snprintf (err, err_len, "%zu standbys are in sync and either may "
                  "take over: --to cannot choose between them", sync);
        return -1;
    }
    self->switchover = true;
    return 0;
}

static const ctx_ops_t s_ctx_ops = {
    s_ctx_txn, s_ctx_drain, s_ctx_now_ms, s_ctx_wall_ms, s_ctx_job_version,
    s_ctx_watcher_count, s_ctx_job_event, s_ctx_cluster, s_ctx_switchover
};

//  ---------------------------------------------------------------------
//  The loop's other readers, timers and signals

//  A client's handshake refused (an unknown or revoked KEY) in the audit
//  trail: face "zmq", who the key, type "client.connect". Keys are cheap to
//  make, so such refusals are held to one entry every 10 s for all keys
//  together (suppressed says how many were left out).
static void
s_audit_handshake (void *arg, const char *key, const char *refusal)
{
    broker_t *self = (broker_t *) arg;
    int64_t suppressed = 0;
    if (!audit_refusal_admit (self->audit, "zmq handshake", broker_now_ms (),
                              &suppressed))
        return;
    broker_audit_record (self, "zmq", key, "client.connect", NULL,
                         PROTO_ERR_UNAUTHORIZED, refusal, suppressed);
}

//  The ZAP handler's socket: auth answers each handshake (a refused
//  client's is audited, and committed with this pass).
static int
s_on_zap (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_t *self = (broker_t *) arg;
    auth_zap_serve (self->ctx.auth, socket);
    if (zlistx_size (self->pass_audits))
        broker_pass_end (self);
    return 0;
}

#define COMMANDS_BATCH 256       //  Subscriptions read per pass at most

//  Grants a subscription to TOPIC (LEN bytes) on the commands XPUB to the
//  connection whose message FRAME is: a relay gets the topics of the
//  nodes behind it (relays.h), an agent those of its own node (auth.h).
static bool
s_grant (broker_t *self, zframe_t *frame, const char *topic, size_t len)
{
    if (self->config.auth.insecure)
        return true;
    const char *key = zframe_meta (frame, "User-Id");
    int relayed = relays_grant (self->ctx.relays, self->ctx.auth, key, topic,
                                len);
    if (relayed >= 0)
        return relayed == 1;
    return auth_topic_grant (self->ctx.auth, self->ctx.registry, key, topic,
                             len);
}

//  The commands XPUB: each (un)subscription is granted or refused before
//  the next one is read, since a grant applies to the connection of the
//  message just read.
static int
s_on_commands (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_t *self = (broker_t *) arg;
    void *handle = zsock_resolve (socket);
    for (int count = 0; count < COMMANDS_BATCH; count++) {
        if (count > 0 && !(zsock_events (socket) & ZMQ_POLLIN))
            break;
        zframe_t *frame = zframe_recv (socket);
        if (!frame)
            break;
        const char *data = (const char *) zframe_data (frame);
        size_t size = zframe_size (frame);
        if (size >= 1 && data [0] == 0) {
            zmq_setsockopt (handle, ZMQ_UNSUBSCRIBE, data + 1, size - 1);
            subgate_subscribed (self->gate, data + 1, size - 1, false);
        }
        else
        if (size >= 1 && data [0] == 1 && s_grant (self, frame, data + 1,
                                                   size - 1)) {
            zmq_setsockopt (handle, ZMQ_SUBSCRIBE, data + 1, size - 1);
            subgate_subscribed (self->gate, data + 1, size - 1, true);
        }
        zframe_destroy (&frame);
    }
    //  A node's first commands may wait for this subscription
    broker_gate_release (self);
    return 0;
}

static int s_on_schedules (zloop_t *loop, int timer_id, void *arg);

//  Sets the one schedules timer for the earliest due time (schedrun.h).
//  Schedules change by request and as their jobs end, so the client
//  socket's passes and the tick call this; the timer moves only when the
//  earliest due time did.
void
broker_schedules_arm (broker_t *self)
{
    int64_t due_ms = schedrun_next_ms (&self->ctx);
    if (self->schedule_timer && due_ms == self->schedule_due_ms)
        return;
    if (self->schedule_timer) {
        zloop_timer_end (self->loop, self->schedule_timer);
        self->schedule_timer = 0;
    }
    self->schedule_due_ms = due_ms;
    if (due_ms < 0)
        return;
    int64_t delay_ms = due_ms - broker_now_ms ();
    if (delay_ms < 1)
        delay_ms = 1;
    self->schedule_timer = zloop_timer (self->loop, (size_t) delay_ms, 1,
                                        s_on_schedules, self);
}

static int
s_on_schedules (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    self->schedule_timer = 0;
    schedrun_fire_due (&self->ctx);
    broker_pass_end (self);
    broker_schedules_arm (self);
    return 0;
}

//  A configuration reload in the audit trail: face "signal", the sender
//  of SIGHUP (INFO) as who, ERR the reason it failed ("": it applied).
static void
s_audit_reload (broker_t *self, const struct signalfd_siginfo *info,
                const char *err)
{
    char who [64];
    snprintf (who, sizeof who, "SIGHUP from pid %u (uid %u)",
              (unsigned) info->ssi_pid, (unsigned) info->ssi_uid);
    broker_audit_record (self, "signal", who, "config.reload", NULL,
                         *err ? "bad_config" : "ok", err, 0);
}

//  SIGHUP: the configuration is read again and applied (reload.h).
static int
s_on_signal (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    broker_t *self = (broker_t *) arg;
    struct signalfd_siginfo info, hup;
    bool hangup = false;
    while (read (self->sighup->signal_fd, &info, sizeof info) == sizeof info)
        if (info.ssi_signo == SIGHUP) {
            hangup = true;
            hup = info;
        }
    if (!hangup)
        return 0;
    broker_config_t fresh;
    broker_config_defaults (&fresh);
    char err [1024] = "";
    if (self->sighup->read (&fresh, self->sighup->arg, err, sizeof err) != 0) {
        log_error ("SIGHUP: reload failed, the running configuration "
                   "stays: %s", *err ? err : "see above");
        s_audit_reload (self, &hup, *err ? err : "the configuration could "
                                                 "not be read");
    }
    else {
        reload_apply (&self->ctx, &fresh);
        s_audit_reload (self, &hup, "");
    }
    //  A renamed relay's nodes were saved with its new name
    broker_pass_end (self);
    broker_config_clear (&fresh);
    return 0;
}

int
broker_reload_on_sighup (broker_t *self, broker_config_fn *read, void *arg)
{
    assert (self && read && !self->sighup);
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGHUP);
    int fd = signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        return -1;
    self->sighup = (s_sighup_t *) zmalloc (sizeof (s_sighup_t));
    self->sighup->read = read;
    self->sighup->arg = arg;
    self->sighup->signal_fd = fd;
    zmq_pollitem_t item = { NULL, fd, ZMQ_POLLIN, 0 };
    zloop_poller (self->loop, &item, s_on_signal, self);
    zloop_poller_set_tolerant (self->loop, &item);
    return 0;
}

static void
s_sighup_end (broker_t *self)
{
    if (!self->sighup)
        return;
    if (self->loop) {
        zmq_pollitem_t item = { NULL, self->sighup->signal_fd, ZMQ_POLLIN, 0 };
        zloop_poller_end (self->loop, &item);
    }
    close (self->sighup->signal_fd);
    free (self->sighup);
    self->sighup = NULL;
}

static zsock_t *
s_bind (auth_t *auth, int type, const char *domain, const char *endpoint,
        char *err, size_t err_len)
{
    zsock_t *socket = zsock_new (type);
    if (!socket) {
        snprintf (err, err_len, "cannot create a socket");
        return NULL;
    }
    zsock_set_maxmsgsize (socket, PROTO_MAX_FRAME);
    zsock_set_sndhwm (socket, 100000);
    zsock_set_rcvhwm (socket, 100000);
    zsock_set_linger (socket, 1000);
    zsock_set_handshake_ivl (socket, 10000);
    //  A registration storm must not overflow the listen queue (each
    //  dropped connection waits a reconnect interval).
    zsock_set_backlog (socket, 4096);
    //  ZMTP heartbeats only where no application heartbeat exists: with
    //  thousands of agents, libzmq's per-message timer cancels in its I/O
    //  thread cost more than all the rest (BENCHMARKS.md). Agents' own
    //  heartbeats carry liveness; agents still ping the broker themselves.
    if (strcmp (domain, KEYS_DOMAIN_CLIENTS) == 0) {
        zsock_set_heartbeat_ivl (socket, 5000);
        zsock_set_heartbeat_timeout (socket, 15000);
    }
    if (type == ZMQ_ROUTER) {
        zsock_set_sndtimeo (socket, 0);    //  Never block the loop on a slow peer
        zsock_set_rcvtimeo (socket, 0);    //  Read until empty, then return
    }
    if (auth_secure_socket (auth, socket, domain, err, err_len) != 0) {
        zsock_destroy (&socket);
        return NULL;
    }
    if (zsock_bind (socket, "%s", endpoint) < 0) {
        snprintf (err, err_len, "cannot bind %s: %s", endpoint,
                  zmq_strerror (zmq_errno ()));
        zsock_destroy (&socket);
    }
    return socket;
}

int
broker_rebind (broker_t *self, zcert_t *cert)
{
    zsock_t *sockets [3] = {self->client, self->agents, self->publish};
    static const char *const domains [3] = {
        KEYS_DOMAIN_CLIENTS, KEYS_DOMAIN_AGENTS, KEYS_DOMAIN_COMMANDS};
    for (int index = 0; index < 3; index++)
        if (self->bound [index])
            zsock_unbind (sockets [index], "%s", self->bound [index]);
    //  An unbind ends its listener in libzmq's I/O thread, which removes
    //  an ipc file and frees a TCP port after the call returns
    for (int index = 0; index < 3; index++)
        listener_released (self->bound [index]);
    int rc = 0;
    for (int index = 0; index < 3; index++) {
        const char *endpoint = self->bound [index];
        char why [256] = "";
        if (!endpoint
            || keys_curve_server (sockets [index], cert, domains [index], why,
                                  sizeof why) != 0) {
            log_error ("cannot secure the %s endpoint with the new key: %s",
                       domains [index], why);
            rc = -1;
            continue;
        }
        if (zsock_bind (sockets [index], "%s", endpoint) < 0) {
            log_error ("cannot bind %s again with the new key: %s", endpoint,
                       zmq_strerror (zmq_errno ()));
            rc = -1;
        }
    }
    return rc;
}

broker_t *
broker_new (const broker_config_t *config, char *err, size_t err_len)
{
    broker_t *self = (broker_t *) zmalloc (sizeof (broker_t));
    broker_config_copy (&self->config, config);
    self->stats = broker_stats_new (broker_now_ms ());
    assert (self->stats);
    self->ctx.ops = &s_ctx_ops;
    self->ctx.config = &self->config;
    self->ctx.stats = self->stats;
    self->outbox = zlistx_new ();
    //  A held command leaves no later than its re-send would
    self->gate = subgate_new (self->config.sched.ack_timeout_ms);
    zlistx_set_destructor (self->outbox,
                           (zlistx_destructor_fn *) broker_pending_destroy);
    self->io = s_io_new ();
    self->ctx.scratch = pw_new ();
    self->ctx.outlog = outlog_new (0);
    assert (self->ctx.outlog);
    self->blobserve = blobserve_new (self->config.blob_max_inflight);
    assert (self->blobserve);
    self->outpace = outpace_new ();
    assert (self->outpace);
    self->body = pw_new ();
    self->event_seq = zhashx_new ();
    zhashx_set_destructor (self->event_seq, (zhashx_destructor_fn *) zstr_free);
    self->replies = zhashx_new ();
    zhashx_set_destructor (self->replies, (zhashx_destructor_fn *) zchunk_destroy);
    self->reply_order = zlistx_new ();
    zlistx_set_destructor (self->reply_order, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_comparator (self->reply_order, (zlistx_comparator_fn *) strcmp);
    self->live_jobs = zhashx_new ();
    self->pass_jobs = zhashx_new ();
    self->watchers = zlistx_new ();
    zlistx_set_destructor (self->watchers,
                           (zlistx_destructor_fn *) broker_watcher_destroy);
    //  Versions of one run never repeat another run's: they start at the
    //  wall clock's microseconds
    self->jobs_version = (uint64_t) broker_wall_ms () * 1000;
    self->jobs_version_pass = self->jobs_version;
    self->nodes_version_base = self->jobs_version;
    self->job_versions = zhashx_new ();
    zhashx_set_destructor (self->job_versions,
                           (zhashx_destructor_fn *) zstr_free);
    self->pass_versions = zhashx_new ();
    zhashx_set_destructor (self->pass_versions,
                           (zhashx_destructor_fn *) zstr_free);
    self->pass_replies = zlistx_new ();
    zlistx_set_destructor (self->pass_replies, (zlistx_destructor_fn *) zstr_free);
    zlistx_set_comparator (self->pass_replies, (zlistx_comparator_fn *) strcmp);
    self->pass_logs = zlistx_new ();
    zlistx_set_destructor (self->pass_logs, (zlistx_destructor_fn *) zstr_free);
    self->audit = audit_new ();
    self->pass_audits = zlistx_new ();
    zlistx_set_destructor (self->pass_audits, (zlistx_destructor_fn *) zstr_free);
    //  Tables looked up by job id several times per result
    zhashx_set_key_hasher (self->event_seq, id_hash);
    zhashx_set_key_hasher (self->live_jobs, id_hash);
    zhashx_set_key_hasher (self->pass_jobs, id_hash);
    zhashx_set_key_hasher (self->job_versions, id_hash);
    zhashx_set_key_hasher (self->pass_versions, id_hash);
    self->ctx.registry = registry_new ();
    self->ctx.sched = broker_sched_new (self);
    self->ctx.schedules = zhashx_new ();
    zhashx_set_destructor (self->ctx.schedules,
                           (zhashx_destructor_fn *) schedule_destroy);
    //  One broker per data dir: two would interleave their writes.
    self->lock = store_lock (self->config.data_dir, "gridbroker", "data dir",
                             err, err_len);
    if (!self->lock) {
        broker_destroy (&self);
        return NULL;
    }
    self->ctx.store = store_open (self->config.data_dir, self->config.map_bytes,
                              self->config.max_map_bytes, err, err_len);
    if (!self->ctx.store) {
        broker_destroy (&self);
        return NULL;
    }
    const char *migrated;
    for (size_t index = 0;
         (migrated = store_migration (self->ctx.store, index)); index++)
        log_info ("data dir %s: %s", self->config.data_dir, migrated);
    if (broker_restore (self, err, err_len) != 0) {
        broker_destroy (&self);
        return NULL;
    }
    //  An elected member takes up the key rotation its store holds
    //  before the key files are read (brokerkey.h)
    if (self->config.cluster.enabled && !self->config.auth.insecure
        && brokerkey_adopt (self->config.auth.key_file
                            ? self->config.auth.key_file
                            : KEYS_DEFAULT_BROKER_KEY,
                            self->ctx.store, err, err_len) < 0) {
        broker_destroy (&self);
        return NULL;
    }
    //  The ZAP handler is bound before any endpoint (auth.h)
    self->ctx.auth = auth_new (&self->config.auth, self->ctx.store, err, err_len);
    if (!self->ctx.auth) {
        broker_destroy (&self);
        return NULL;
    }
    self->ctx.brokerkey = brokerkey_new (self->config.auth.insecure
                                         ? NULL : self->config.auth.key_file,
                                         err, err_len);
    if (!self->ctx.brokerkey) {
        broker_destroy (&self);
        return NULL;
    }
    self->ctx.relays = relays_new (&self->config.relays,
                               self->config.auth.insecure);
    self->client = s_bind (self->ctx.auth, ZMQ_ROUTER, KEYS_DOMAIN_CLIENTS,
                           self->config.client_ep, err, err_len);
    self->agents = self->client
                       ? s_bind (self->ctx.auth, ZMQ_ROUTER, KEYS_DOMAIN_AGENTS,
                                 self->config.agents_ep, err, err_len)
                       : NULL;
    if (self->agents)
        zsock_set_router_mandatory (self->agents, 1);
    self->publish = self->agents
                        ? s_bind (self->ctx.auth, ZMQ_XPUB, KEYS_DOMAIN_COMMANDS,
                                  self->config.publish_ep, err, err_len)
                        : NULL;
    if (!self->publish) {
        broker_destroy (&self);
        return NULL;
    }
    //  Kept to bind them again when the broker's key is rotated: a port
    //  the kernel chose stays the same
    self->bound [0] = zsock_last_endpoint (self->client);
    self->bound [1] = zsock_last_endpoint (self->agents);
    self->bound [2] = zsock_last_endpoint (self->publish);
    if (self->config.http.listen) {
        //  The HTTP face's requests come in by message, as a client's do
        char bridge_ep [64];
        snprintf (bridge_ep, sizeof bridge_ep, "inproc://grid-http-%p",
                  (void *) self);
        self->http = zsock_new (ZMQ_ROUTER);
        zsock_set_sndhwm (self->http, 100000);
        zsock_set_rcvhwm (self->http, 100000);
        zsock_set_sndtimeo (self->http, 0);
        zsock_set_rcvtimeo (self->http, 0);
        if (zsock_bind (self->http, "%s", bridge_ep) != 0) {
            snprintf (err, err_len, "cannot bind %s", bridge_ep);
            broker_destroy (&self);
            return NULL;
        }
        self->ctx.http_face = http_new (&self->config.http, bridge_ep, err,
                                    err_len);
        if (!self->ctx.http_face) {
            broker_destroy (&self);
            return NULL;
        }
    }
    if (self->config.tracing.otlp_endpoint) {
        self->ctx.tracer = tracing_exporter_new (&self->config.tracing, err,
                                                 err_len);
        if (!self->ctx.tracer) {
            broker_destroy (&self);
            return NULL;
        }
        log_info ("exporting spans over OTLP/HTTP (JSON) to the collector "
                  "at %s", self->config.tracing.otlp_endpoint);
    }
    self->loop = zloop_new ();
    zloop_reader (self->loop, self->client, broker_on_client, self);
    if (self->http)
        zloop_reader (self->loop, self->http, broker_on_client, self);
    zloop_reader (self->loop, self->agents, broker_on_agents, self);
    zsock_t *zap = auth_zap_socket (self->ctx.auth);
    if (zap) {
        zloop_reader (self->loop, zap, s_on_zap, self);
        auth_on_client_refused (self->ctx.auth, s_audit_handshake, self);
    }
    zloop_reader (self->loop, self->publish, s_on_commands, self);
    auth_log_start (self->ctx.auth);
    zloop_timer (self->loop, (size_t) self->config.tick_ms, 0, s_on_tick, self);
    //  Webhook deliveries: the pending ones of the store, and the workers
    self->ctx.notify = notify_new ();
    store_txn_t *notify_txn = self->ctx.notify
                                  ? store_begin (self->ctx.store, false)
                                  : NULL;
    int restored = notify_txn ? notify_restore (self->ctx.notify, notify_txn)
                              : STORE_EIO;
    store_abort (&notify_txn);
    zsock_t *outcomes = restored >= 0
                            ? notify_start (self->ctx.notify, &self->config.notify)
                            : NULL;
    if (!outcomes) {
        snprintf (err, err_len, "cannot start the webhook workers");
        broker_destroy (&self);
        return NULL;
    }
    if (restored > 0)
        log_info ("%d webhook deliver%s pending", restored,
                  restored == 1 ? "y" : "ies");
    zloop_reader (self->loop, outcomes, s_on_notify, self);
    if (self->config.notify.target_count && !self->config.notify.secret)
        log_warn ("notify: no secret (notify.secret_file): webhooks are sent "
                  "unsigned");
    if (schedrun_restore (&self->ctx, err, err_len) != 0) {
        broker_destroy (&self);
        return NULL;
    }
    broker_schedules_arm (self);
    return self;
}

//  The replication socket: standbys' hellos and acks move the release
//  point.
static int
s_on_repl (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_t *self = (broker_t *) arg;
    repl_source_read (self->repl, broker_now_ms ());
    broker_release (self);
    return self->demoted ? -1 : 0;
}

//  Has the elector record the sync set in etcd when it changed: a
//  standby leaves it (and the active acknowledges without it) only once
//  the sync key no longer names it.
static void
s_sync_ask (broker_t *self)
{
    char names [REPL_SYNC_NAMES];
    uint64_t gen;
    if (!repl_source_sync_wanted (self->repl, names, sizeof names, &gen))
        return;
    char epoch [32], number [32];
    snprintf (epoch, sizeof epoch, "%" PRIu64, self->epoch);
    snprintf (number, sizeof number, "%" PRIu64, gen);
    zstr_sendx (self->elector, "SYNC", epoch, number, names, NULL);
}

//  Every 100 ms: pings, the sync set's time, the validity of the lead.
static int
s_on_repl_tick (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    repl_source_tick (self->repl, broker_now_ms ());
    s_sync_ask (self);
    broker_release (self);
    return self->demoted ? -1 : 0;
}

//  The elector's word: renewals move the validity; anything that says
//  another leads, or that this one does not, demotes.
static int
s_on_elector (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_t *self = (broker_t *) arg;
    zmsg_t *msg = zmsg_recv (socket);
    if (!msg)
        return -1;
    char *what = zmsg_popstr (msg);
    char *first = zmsg_popstr (msg);
    char *second = zmsg_popstr (msg);
    if (what && streq (what, "RENEWED") && first && second
        && strtoull (first, NULL, 10) == self->epoch)
        self->valid_until = strtoll (second, NULL, 10);
    else
    if (what && streq (what, "SYNCED") && second) {
        repl_source_sync_recorded (self->repl, second, broker_now_ms ());
        broker_release (self);
    }
    else
    if (what && streq (what, "DEMOTED"))
        broker_demote (self, second && *second ? second : "demoted");
    else
    if (what && streq (what, "FOLLOWER"))
        broker_demote (self, "another member holds the leader key");
    else
    if (what && streq (what, "UNREACHABLE") && first && *first)
        log_warn ("cluster: etcd does not answer: %s; this active demotes "
                  "itself unless a renewal goes through in time", first);
    free (what);
    free (first);
    free (second);
    zmsg_destroy (&msg);
    return self->demoted ? -1 : 0;
}

bool
broker_lead_valid (broker_t *self)
{
    if (self->demoted)
        return false;
    if (elector_valid (self->valid_until, broker_now_ms ()))
        return true;
    //  Renewals may wait unread on the elector's pipe (a long pass, a
    //  slow start): read them before judging
    zsock_t *pipe = zactor_sock (self->elector);
    while (!self->demoted && (zsock_events (pipe) & ZMQ_POLLIN))
        s_on_elector (self->loop, pipe, self);
    return !self->demoted
           && elector_valid (self->valid_until, broker_now_ms ());
}

int
broker_lead (broker_t *self, zactor_t *elector, uint64_t epoch,
             int64_t valid_until, char *err, size_t err_len)
{
    const cluster_config_t *cluster = &self->config.cluster;
    const char *keys [CLUSTER_MAX_PEERS + 2];
    size_t count = 0;
    for (size_t index = 0; index < cluster->peer_count; index++)
        if (cluster->peers [index].key)
            keys [count++] = cluster->peers [index].key;
    //  Members that share this one's pair follow with it, or with the
    //  next pair once they hold it (a key rotation, brokerkey.h)
    if (!self->config.auth.insecure) {
        keys [count++] = zcert_public_txt (auth_cert (self->ctx.auth));
        if (brokerkey_next (self->ctx.brokerkey))
            keys [count++] = brokerkey_next (self->ctx.brokerkey);
    }
    auth_set_replication_keys (self->ctx.auth, keys, count);
    zsock_t *socket = s_bind (self->ctx.auth, ZMQ_ROUTER,
                              KEYS_DOMAIN_REPLICATION, cluster->replicate,
                              err, err_len);
    if (!socket)
        return -1;
    zsock_set_maxmsgsize (socket, -1);
    //  A pass dropped past this shows as a gap: the standby starts over
    zsock_set_sndhwm (socket, 100000);
    char snapshot [4200];
    snprintf (snapshot, sizeof snapshot, "%s/snapshot-out.mdb",
              self->config.data_dir);
    repl_source_config_t config = { epoch, cluster->sync_timeout_ms,
                                    cluster->strict, snapshot };
    self->repl = repl_source_new (&config, &socket, self->ctx.store);
    self->journal = pw_new ();
    self->held = zlistx_new ();
    self->epoch = epoch;
    self->elector = elector;
    self->valid_until = valid_until;
    snprintf (self->cluster_name, sizeof self->cluster_name, "%s",
              cluster->name);
    zloop_reader (self->loop, repl_source_socket (self->repl), s_on_repl,
                  self);
    zloop_reader (self->loop, zactor_sock (elector), s_on_elector, self);
    zloop_timer (self->loop, 100, 0, s_on_repl_tick, self);
    //  Nothing is released until the sync key says this leadership's set
    s_sync_ask (self);
    log_warn ("cluster: %s is the active of cluster %s (epoch %" PRIu64
              "); standbys follow on %s", cluster->name, cluster->cluster,
              epoch, cluster->replicate);
    return 0;
}

bool
broker_demoted (broker_t *self)
{
    return self->demoted;
}

int
broker_run (broker_t *self)
{
    log_info ("serving clients on %s, agents on %s, commands on %s; data in %s",
           self->config.client_ep, self->config.agents_ep,
           self->config.publish_ep, self->config.data_dir);
    //  Bound and restored: a service manager may start what depends on us
    service_notify_ready ("serving");
    if (service_watchdog_attach (self->loop) < 0)
        log_warn ("cannot arm the service watchdog timer");
    zloop_start (self->loop);
    service_notify_stopping ();
    log_info ("stopping");
    if (self->demoted)
        return 0;
    //  Every node's last-seen time, in one commit
    uint64_t failed = self->stats->storage.failed_commits;
    size_t saved = s_save_seen (self, INT64_MAX, SIZE_MAX);
    broker_pass_end (self);
    //  A failed commit saved nothing (and logged why)
    if (saved && self->stats->storage.failed_commits == failed)
        log_info ("saved the last-seen time of %zu node%s", saved,
               saved == 1 ? "" : "s");
    return 0;
}

void
broker_destroy (broker_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    broker_t *self = *self_p;
    if (self->ctx.store)
        broker_pass_end (self);
    s_sighup_end (self);
    zloop_destroy (&self->loop);
    //  Standbys hold what was released; what waits is never sent
    if (self->held) {
        self->demoted = true;
        broker_pass_end (self);
        zlistx_destroy (&self->held);
    }
    repl_source_destroy (&self->repl);
    pw_destroy (&self->journal);
    notify_destroy (&self->ctx.notify);
    http_destroy (&self->ctx.http_face);
    otlp_destroy (&self->ctx.tracer);
    zsock_destroy (&self->http);
    zsock_destroy (&self->client);
    zsock_destroy (&self->agents);
    zsock_destroy (&self->publish);
    subgate_destroy (&self->gate);
    relays_destroy (&self->ctx.relays);
    brokerkey_destroy (&self->ctx.brokerkey);
    for (int index = 0; index < 3; index++)
        zstr_free (&self->bound [index]);
    auth_destroy (&self->ctx.auth);
    store_abort (&self->txn);
    sched_destroy (&self->ctx.sched);
    registry_destroy (&self->ctx.registry);
    store_destroy (&self->ctx.store);
    store_unlock (&self->lock);
    zlistx_destroy (&self->outbox);
    s_io_destroy (&self->io);
    zhashx_destroy (&self->event_seq);
    broker_stats_destroy (&self->stats);
    zhashx_destroy (&self->replies);
    zhashx_destroy (&self->ctx.schedules);
    zlistx_destroy (&self->reply_order);
    zhashx_destroy (&self->live_jobs);
    zhashx_destroy (&self->pass_jobs);
    zlistx_destroy (&self->pass_replies);
    zlistx_destroy (&self->watchers);
    zhashx_destroy (&self->job_versions);
    zhashx_destroy (&self->pass_versions);
    zlistx_destroy (&self->pass_logs);
    zlistx_destroy (&self->pass_audits);
    audit_destroy (&self->audit);
    pw_destroy (&self->ctx.scratch);
    outlog_destroy (&self->ctx.outlog);
    blobserve_destroy (&self->blobserve);
    outpace_destroy (&self->outpace);
    pw_destroy (&self->body);
    broker_config_clear (&self->config);
    free (self);
    *self_p = NULL;
}

