/*  =========================================================================
    schedrun - the broker's schedules (see schedrun.h)
    =========================================================================
*/
#include "../proto/log.h"
#include "schedrun.h"

#define S_MAX_WAIT_MS 60000

void
schedrun_save (ctx_t *ctx, const schedule_t *schedule)
{
    store_txn_t *txn = ctx_txn (ctx);
    if (!txn)
        return;
    pw_t *writer = pw_new ();
    schedule_encode (schedule, writer);
    int rc = store_put (txn, STORE_DB_SCHEDULES, schedule->name,
                        strlen (schedule->name), pw_data (writer),
                        pw_size (writer));
    if (rc != 0)
        log_write (LOG_LEVEL_ERROR, NULL, "store: cannot save schedule %s: %s",
                    schedule->name, store_strerror (rc));
    pw_destroy (&writer);
}

//  Is the schedule's last run still pending or running?
static bool
s_running (ctx_t *ctx, const schedule_t *schedule)
{
    if (!schedule->last_job)
        return false;
    const sched_job_t *job = sched_job (ctx->sched, schedule->last_job);
    return job && !sched_job_status_final (job->status);
}

int
schedrun_start (ctx_t *ctx, schedule_t *schedule, int64_t wall_ms, char *id,
                const char **code_p, char *why, size_t why_len)
{
    *code_p = PROTO_ERR_INTERNAL;
    job_spec_t *spec = NULL;
    if (ctx->state.maintenance) {
        *code_p = PROTO_ERR_MAINTENANCE;
        snprintf (why, why_len, "not run: the broker is in maintenance");
        goto refused;
    }
    spec = schedule_job_spec (schedule);
    if (!spec) {
        snprintf (why, why_len, "not run: the stored job does not decode");
        goto refused;
    }
    char **ids = NULL;
    size_t matched = registry_resolve (ctx->registry, &spec->target, &ids);
    for (size_t index = 0; index < matched; index++)
        free (ids [index]);
    free (ids);
    if (matched == 0) {
        *code_p = PROTO_ERR_NO_NODES;
        snprintf (why, why_len, "not run: no online node matches %s",
                  schedule->target);
        goto refused;
    }
    ctx_job_id (ctx, wall_ms, id);
    sched_job_t *job = sched_job_new (id, &spec);
    job->schedule = strdup (schedule->name);
    job->created_at_ms = wall_ms;
    job->updated_at_ms = wall_ms;
    char reason [256];
    if (!job->schedule
        || sched_submit (ctx->sched, &job, ctx_now_ms (ctx), reason,
                         sizeof reason)
               != 0) {
        sched_job_destroy (&job);
        *code_p = PROTO_ERR_QUEUE_FULL;
        snprintf (why, why_len, "not run: %s", reason);
        goto refused;
    }
    schedule_started (schedule, id, wall_ms);
    return 0;
refused:
    job_spec_destroy (&spec);
    schedule_set_status (schedule, why);
    return -1;
}

//  Applies the rules to every schedule at WALL_MS.
static void
s_fire_due (ctx_t *ctx, int64_t wall_ms)
{
    for (schedule_t *schedule = (schedule_t *) zhashx_first (ctx->schedules);
         schedule; schedule = (schedule_t *) zhashx_next (ctx->schedules)) {
        schedule_decision_t decision
            = schedule_due (schedule, wall_ms, s_running (ctx, schedule));
        if (decision == SCHEDULE_IDLE)
            continue;
        char id [JOB_ID_LEN + 1], why [512];
        const char *code = NULL;
        if (decision == SCHEDULE_FIRE) {
            if (schedrun_start (ctx, schedule, wall_ms, id, &code, why,
                                sizeof why)
                == 0) {
                log_ctx_t log_ctx = {.job = id};
                log_write (LOG_LEVEL_DEBUG, &log_ctx,
                           "schedule %s started job %s", schedule->name, id);
            }
        }
        else
        if (decision == SCHEDULE_SKIPPED) {
            snprintf (why, sizeof why, "skipped: the previous run %s was "
                                       "still going",
                      schedule->last_job);
            schedule_set_status (schedule, why);
        }
        schedrun_save (ctx, schedule);
    }
}

int64_t
schedrun_next_ms (ctx_t *ctx)
{
    int64_t wall_ms = ctx_wall_ms (ctx);
    int64_t wake_ms = INT64_MAX;
    for (schedule_t *schedule = (schedule_t *) zhashx_first (ctx->schedules);
         schedule; schedule = (schedule_t *) zhashx_next (ctx->schedules)) {
        if (schedule->paused)
            continue;
        if (schedule->pending_run && !s_running (ctx, schedule))
            wake_ms = wall_ms;
        else
        if (schedule->next_ms >= 0 && schedule->next_ms < wake_ms)
            wake_ms = schedule->next_ms;
    }
    if (wake_ms == INT64_MAX)
        return -1;
    int64_t now_ms = ctx_now_ms (ctx);
    int64_t delay_ms = wake_ms - wall_ms;
    //  Runs wait, like queued jobs, until the agents said hello again
    int64_t hold_ms = ctx->state.hold_until_ms
                          ? ctx->state.hold_until_ms - now_ms + 1
                          : 0;
    if (delay_ms < hold_ms)
        delay_ms = hold_ms;
    delay_ms = delay_ms < 1 ? 1 : delay_ms > S_MAX_WAIT_MS ? S_MAX_WAIT_MS
                                                           : delay_ms;
    return now_ms + delay_ms;
}

void
schedrun_fire_due (ctx_t *ctx)
{
    if (!ctx->state.hold_until_ms)
        s_fire_due (ctx, ctx_wall_ms (ctx));
}

void
schedrun_on_finished (ctx_t *ctx, const sched_job_t *job)
{
    schedule_t *schedule = job->schedule ? (schedule_t *) zhashx_lookup (
                                               ctx->schedules, job->schedule)
                                         : NULL;
    if (!schedule || !schedule->last_job
        || strcmp (schedule->last_job, job->id) != 0)
        return;
    schedule_set_status (schedule, sched_job_status_name (job->status));
    schedrun_save (ctx, schedule);
}

//  Reads the stored schedules into TABLE (name -> schedule_t), counting
//  the unreadable records in *BROKEN_P; with WALL_MS >= 0 each one's
//  catch-up is applied and those whose next time moved are listed in
//  CHANGED. Returns how many were read, or -1 with a sentence in ERR when
//  the store cannot be read.
static ssize_t
s_read (ctx_t *ctx, zhashx_t *table, int64_t wall_ms, zlistx_t *changed,
        size_t *catch_up_p, size_t *broken_p, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (ctx->store, false);
    if (!txn) {
        snprintf (err, err_len, "cannot read the store: %s",
                  store_last_error (ctx->store));
        return -1;
    }
    ssize_t loaded = 0;
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_SCHEDULES);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v,
                                         &v_len)
                    : STORE_EIO;
    while (rc == 0) {
        pv_doc_t *doc = NULL;
        schedule_t *schedule = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0)
            schedule = schedule_decode (pv_doc_root (doc));
        pv_doc_destroy (&doc);
        if (schedule && !zhashx_lookup (table, schedule->name)) {
            int64_t next_ms = schedule->next_ms;
            if (wall_ms >= 0 && schedule_restart (schedule, wall_ms))
                (*catch_up_p)++;
            if (changed && schedule->next_ms != next_ms)
                zlistx_add_end (changed, schedule);
            zhashx_insert (table, schedule->name, schedule);
            loaded++;
        }
        else {
            schedule_destroy (&schedule);
            (*broken_p)++;
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    store_abort (&txn);
    return loaded;
}

int
schedrun_restore (ctx_t *ctx, char *err, size_t err_len)
{
    zlistx_t *changed = zlistx_new ();
    size_t catch_up = 0, broken = 0;
    ssize_t loaded = s_read (ctx, ctx->schedules, ctx_wall_ms (ctx), changed,
                             &catch_up, &broken, err, err_len);
    if (loaded < 0) {
        zlistx_destroy (&changed);
        return -1;
    }
    for (schedule_t *schedule = (schedule_t *) zlistx_first (changed);
         schedule; schedule = (schedule_t *) zlistx_next (changed))
        schedrun_save (ctx, schedule);
    zlistx_destroy (&changed);
    if (loaded || broken)
        log_write (LOG_LEVEL_INFO, NULL, "restored %zd schedule%s (%zu catch-up "
                   "run%s due)%s",
                   loaded, loaded == 1 ? "" : "s", catch_up,
                   catch_up == 1 ? "" : "s",
                   broken ? "; some records were unreadable" : "");
    return 0;
}

int
schedrun_reload (ctx_t *ctx)
{
    zhashx_t *table = zhashx_new ();
    zhashx_set_destructor (table, (zhashx_destructor_fn *) schedule_destroy);
    size_t catch_up = 0, broken = 0;
    char err [256];
    if (s_read (ctx, table, -1, NULL, &catch_up, &broken, err, sizeof err) < 0) {
        log_write (LOG_LEVEL_ERROR, NULL, "store: schedules: %s", err);
        zhashx_destroy (&table);
        return -1;
    }
    zhashx_destroy (&ctx->schedules);
    ctx->schedules = table;
    return 0;
}
