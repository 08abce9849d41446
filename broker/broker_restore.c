/*  =========================================================================
    broker_restore - the store read back at start, the rebuild of the
    scheduler after a failed commit, and the retention sweep

    One of the server's rooms: it shares the server's struct through
    broker_int.h, and no handler includes that header.
    =========================================================================
*/
#include "broker.h"
#include "broker_int.h"

//  ---------------------------------------------------------------------
//  Start-up

static size_t
s_resolve (void *arg, const target_t *target, char ***ids_p)
{
    broker_t *self = (broker_t *) arg;
    return registry_resolve (self->ctx.registry, target, ids_p);
}

static size_t
s_unavailable (void *arg, const job_spec_t *spec, sched_not_run_t **list_p)
{
    broker_t *self = (broker_t *) arg;
    return registry_unavailable (self->ctx.registry, spec, broker_wall_ms (),
                                 list_p);
}

//  The load figures of a node for any-node claims (sched.h).
static bool
s_node_load (void *arg, const char *id, sched_load_t *load)
{
    broker_t *self = (broker_t *) arg;
    const registry_node_t *node = registry_lookup (self->ctx.registry, id);
    if (!node)
        return false;
    load->online = node->online && !node->drained;
    load->slots = node->hello && node->hello->concurrency
                      ? node->hello->concurrency
                      : 1;
    load->running = node->running;
    load->queued = node->queued;
    return true;
}

//  Whether an action may run twice: a query, or declared idempotent.
static bool
s_action_idempotent (void *arg, const char *backend, const char *action)
{
    broker_t *self = (broker_t *) arg;
    const proto_action_spec_t *spec
        = registry_find_action (self->ctx.registry, backend, action, true);
    return spec && (!spec->modify || spec->idempotent);
}

sched_t *
broker_sched_new (broker_t *self)
{
    //  R16: a step in flight when the broker stopped waits for its node's
    //  hello for the restart hold, then the offline grace, before its
    //  node is taken for gone
    sched_config_t config = self->config.sched;
    config.restore_wait_ms = self->config.heartbeat_ms
                                 * self->config.missed_heartbeats
                             + self->config.offline_grace_ms;
    sched_t *sched = sched_new (&config, s_resolve, self);
    sched_set_unavailable (sched, s_unavailable, self);
    sched_set_limits (sched, self->config.limits, self->config.limit_count);
    sched_set_fleet (sched, s_node_load, s_action_idempotent, self);
    return sched;
}

int
broker_restore (broker_t *self, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (self->ctx.store, false);
    if (!txn) {
        snprintf (err, err_len, "cannot read the store: %s",
                  store_last_error (self->ctx.store));
        return -1;
    }
    size_t nodes = 0, resumed = 0, broken = 0;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NODES);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0
            && registry_load (self->ctx.registry, pv_doc_root (doc)) == 0)
            nodes++;
        else
            broken++;
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    //  Their last-seen times saved since their records
    nodeseen_restore (txn, self->ctx.registry);
    //  And their facts, kept apart from their records
    size_t broken_facts = 0;
    nodefacts_restore (txn, self->ctx.registry, &broken_facts);
    broken += broken_facts;
    //  Collect unfinished job ids first: loading reads other databases.
    zlistx_t *live = zlistx_new ();
    zlistx_set_destructor (live, (zlistx_destructor_fn *) zstr_free);
    cursor = store_cursor_new (txn, STORE_DB_JOBS);
    rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                : STORE_EIO;
    char newest [JOB_ID_LEN + 1] = "";
    while (rc == 0) {
        //  Keys sort as ids do: the last valid one is the newest
        if (k_len <= JOB_ID_LEN) {
            char id [JOB_ID_LEN + 1];
            memcpy (id, k, k_len);
            id [k_len] = 0;
            if (job_id_valid (id))
                memcpy (newest, id, sizeof newest);
        }
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0) {
            int status = jobrec_header_status (pv_doc_root (doc));
            if (status >= 0 && sched_job_status_final ((sched_job_status_t) status))
                self->stats->finished [status]++;
            else if (status >= 0 && k_len <= JOB_ID_LEN)
                zlistx_add_end (live, zsys_sprintf ("%.*s", (int) k_len,
                                                    (const char *) k));
            else
                broken++;
        }
        else
            broken++;
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    //  New ids never go below the newest stored one, even when the clock
    //  is behind it (stepped back while the broker was down): an id of a
    //  kept job must never be made again, its records would be replaced
    if (*newest) {
        self->ctx.state.last_id_ms = (int64_t) strtoll (newest + 2, NULL, 16);
        self->ctx.state.id_seq = (uint32_t) strtoul (newest + 15, NULL, 16);
    }
    int64_t now_ms = broker_now_ms ();
    char *job_id = (char *) zlistx_first (live);
    while (job_id) {
        sched_job_t *job = NULL;
        if (jobrec_load (txn, job_id, &job) == 0
            && sched_restore (self->ctx.sched, &job, now_ms) == 0) {
            zhashx_update (self->live_jobs, job_id, (void *) "");
            resumed++;
        }
        else {
            log_info ("job %s could not be restored from the store", job_id);
            sched_job_destroy (&job);
            broken++;
        }
        job_id = (char *) zlistx_next (live);
    }
    zlistx_destroy (&live);
    const void *flag = NULL;
    size_t flag_len = 0;
    if (store_get (txn, STORE_DB_META, CTX_META_MAINTENANCE,
                   strlen (CTX_META_MAINTENANCE), &flag, &flag_len) == 0
        && flag_len == 1 && *(const char *) flag == '1')
        self->ctx.state.maintenance = true;
    store_abort (&txn);
    //  Queued jobs wait until the known agents have had time to say hello
    //  again; otherwise they would start on an empty registry.
    if (nodes) {
        self->ctx.state.hold_until_ms = broker_now_ms ()
                              + self->config.heartbeat_ms
                                    * self->config.missed_heartbeats;
    }
    sched_set_paused (self->ctx.sched, self->ctx.state.maintenance || self->ctx.state.hold_until_ms);
    if (self->ctx.state.maintenance)
        log_info ("in maintenance (gridcli broker resume ends it)");
    if (nodes || resumed || broken)
        log_info ("restored %zu node%s (offline until they say hello) and %zu "
               "unfinished job%s%s", nodes, nodes == 1 ? "" : "s", resumed,
               resumed == 1 ? "" : "s", broken ? "; some records were unreadable" : "");
    //  Restored jobs emit re-deliveries; they wait for the agents' hellos
    //  through the scheduler's ack timeouts.
    broker_pass_end (self);
    return 0;
}

//  Reads the node records' drained flags and the maintenance flag back
//  from TXN (a failed commit may have changed them in memory only).
static void
s_reload_flags (broker_t *self, store_txn_t *txn)
{
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_NODES);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        pv_doc_t *doc = NULL;
        bool drained = false;
        char *id = zsys_sprintf ("%.*s", (int) k_len, (const char *) k);
        registry_node_t *node = id ? registry_lookup (self->ctx.registry, id)
                                   : NULL;
        if (node && pv_doc_decode (v, v_len, &doc, NULL, 0) == 0
            && pv_get_bool (pv_map_get (pv_doc_root (doc), "drained"),
                            &drained) == 0)
            node->drained = drained;
        zstr_free (&id);
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    const void *flag = NULL;
    size_t flag_len = 0;
    self->ctx.state.maintenance = store_get (txn, STORE_DB_META, CTX_META_MAINTENANCE,
                                   strlen (CTX_META_MAINTENANCE), &flag,
                                   &flag_len) == 0
                        && flag_len == 1 && *(const char *) flag == '1';
}

//  Rebuilds the scheduler from the store after a failed commit: every
//  job that was live, or that the failed pass touched, is read back as it
//  stands on disk (a job that is not there is gone; one that is final
//  there stays final) and resumed as after a restart (in-flight steps are
//  re-sent; agents deduplicate them, and re-send results the broker has
//  not acknowledged).
void
broker_rebuild (broker_t *self)
{
    zlistx_t *ids = zlistx_new ();
    zlistx_set_destructor (ids, (zlistx_destructor_fn *) zstr_free);
    for (void *id = zhashx_first (self->live_jobs); id;
         id = zhashx_next (self->live_jobs))
        zlistx_add_end (ids, strdup ((const char *) zhashx_cursor (self->live_jobs)));
    for (void *id = zhashx_first (self->pass_jobs); id;
         id = zhashx_next (self->pass_jobs)) {
        const char *key = (const char *) zhashx_cursor (self->pass_jobs);
        if (!zhashx_lookup (self->live_jobs, key))
            zlistx_add_end (ids, strdup (key));
    }
    zhashx_purge (self->pass_jobs);
    zhashx_purge (self->live_jobs);
    zhashx_purge (self->event_seq);
    bool paused = sched_paused (self->ctx.sched);
    sched_destroy (&self->ctx.sched);
    self->ctx.sched = broker_sched_new (self);
    sched_set_paused (self->ctx.sched, paused);
    store_txn_t *txn = store_begin (self->ctx.store, false);
    if (!txn) {
        //  Nothing can be read: the jobs come back at the next start
        log_error ("store: cannot read the jobs back: %s",
               store_last_error (self->ctx.store));
        zlistx_destroy (&ids);
        return;
    }
    s_reload_flags (self, txn);
    sched_set_paused (self->ctx.sched, self->ctx.state.maintenance || self->ctx.state.hold_until_ms);
    int64_t now_ms = broker_now_ms ();
    size_t resumed = 0;
    for (char *id = (char *) zlistx_first (ids); id;
         id = (char *) zlistx_next (ids)) {
        sched_job_t *job = NULL;
        if (jobrec_load (txn, id, &job) == 0
            && !sched_job_status_final (job->status)
            && sched_restore (self->ctx.sched, &job, now_ms) == 0) {
            zhashx_update (self->live_jobs, id, (void *) "");
            resumed++;
        }
        sched_job_destroy (&job);
    }
    store_abort (&txn);
    zlistx_destroy (&ids);
    //  Keys, tokens and schedules, too, are what the store holds
    if (self->ctx.auth)
        auth_reload (self->ctx.auth, self->ctx.store);
    schedrun_reload (&self->ctx);
    if (self->config.verbose)
        log_info ("store: %zu live job%s read back from the store", resumed,
               resumed == 1 ? "" : "s");
}

//  ---------------------------------------------------------------------
//  The retention sweep

//  Wall-clock ms encoded in a job id ("j-" + 12 hex digits), or -1.
static int64_t
s_job_id_ms (const void *key, size_t key_len)
{
    if (key_len < 14 || memcmp (key, "j-", 2) != 0)
        return -1;
    int64_t ms = 0;
    for (size_t index = 2; index < 14; index++) {
        char c = ((const char *) key) [index];
        int digit = c >= '0' && c <= '9' ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (digit < 0)
            return -1;
        ms = ms * 16 + digit;
    }
    return ms;
}

size_t
broker_sweep (broker_t *self, int64_t wall_ms, size_t limit)
{
    store_txn_t *txn = broker_txn (self);
    if (txn && self->config.dlq_retention_ms > 0) {
        int purged = dlq_purge (txn, NULL,
                                wall_ms - self->config.dlq_retention_ms);
        if (purged > 0)
            log_info ("dead-letter: purged %d entr%s older than the dlq "
                   "retention", purged, purged == 1 ? "y" : "ies");
    }
    if (txn && self->config.audit_retention_ms > 0) {
        int pruned = audit_prune (txn, wall_ms - self->config.audit_retention_ms,
                                  limit);
        if (pruned > 0)
            log_info ("audit: purged %d entr%s older than the audit "
                      "retention", pruned, pruned == 1 ? "y" : "ies");
        ctx_store_error (pruned < 0 ? pruned : 0, "the audit trail");
    }
    if (!txn || self->config.retention_ms <= 0)
        return 0;
    int64_t cutoff = wall_ms - self->config.retention_ms;
    //  Ids sort by submission time: walk from the oldest and stop at the
    //  first job submitted after the cutoff. Collect first, delete after.
    zlistx_t *doomed = zlistx_new ();
    zlistx_set_destructor (doomed, (zlistx_destructor_fn *) zstr_free);
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_JOBS);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                    : STORE_EIO;
    while (rc == 0 && zlistx_size (doomed) < limit) {
        int64_t submitted = s_job_id_ms (k, k_len);
        if (submitted < 0 || submitted > cutoff)
            break;
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0) {
            const pv_t *header = pv_doc_root (doc);
            int status = jobrec_header_status (header);
            int64_t updated = 0;
            pv_get_int (pv_map_get (header, "updated_at_ms"), &updated);
            if (status >= 0 && sched_job_status_final ((sched_job_status_t) status)
                && updated <= cutoff && k_len <= JOB_ID_LEN)
                zlistx_add_end (doomed, zsys_sprintf ("%.*s", (int) k_len,
                                                      (const char *) k));
            //  A job with dead-letter entries stays until they go: a
            //  retry needs its spec
            char *last = (char *) zlistx_last (doomed);
            if (last && strlen (last) == k_len && memcmp (last, k, k_len) == 0
                && dlq_has_job (txn, last))
                zlistx_delete (doomed, zlistx_cursor (doomed));
        }
        pv_doc_destroy (&doc);
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    size_t purged = 0;
    for (char *id = (char *) zlistx_first (doomed); id;
         id = (char *) zlistx_next (doomed))
        if (jobrec_delete (txn, id) == 0)
            purged++;
    zlistx_destroy (&doomed);
    //  Remembered submit replies older than the retention go too.
    zlistx_t *old_requests = zlistx_new ();
    zlistx_set_destructor (old_requests, (zlistx_destructor_fn *) zstr_free);
    cursor = store_cursor_new (txn, STORE_DB_REQUESTS);
    rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v, &v_len)
                : STORE_EIO;
    while (rc == 0 && zlistx_size (old_requests) < limit) {
        int64_t stamp = 0;
        if (v_len >= 8)
            for (int index = 0; index < 8; index++)
                stamp = stamp << 8 | ((const uint8_t *) v) [index];
        if (v_len < 8 || stamp <= cutoff)
            zlistx_add_end (old_requests, zsys_sprintf ("%.*s", (int) k_len,
                                                        (const char *) k));
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    for (char *id = (char *) zlistx_first (old_requests); id;
         id = (char *) zlistx_next (old_requests))
        store_del (txn, STORE_DB_REQUESTS, id, strlen (id));
    zlistx_destroy (&old_requests);
    return purged;
}
