/*  =========================================================================
    schedrun - the broker's schedules: kept in the store, fired from the
    reactor on the wall clock, and the schedule.* requests

    One zloop timer, set for the earliest due schedule (at most a minute
    ahead, so a wall clock that jumps is followed within a minute), never
    one per schedule. A run is an ordinary job whose record carries the
    schedule's name. The rules (overlap, catch-up) live in schedule.c;
    this file only applies them to the scheduler, the registry and the
    store.
    =========================================================================
*/
#include "../proto/log.h"
#include "broker.h"
#include "jobrec.h"
#include "schedule.h"

#define S_MAX_WAIT_MS 60000

static void
s_save (broker_t *self, const schedule_t *schedule)
{
    store_txn_t *txn = broker_txn (self);
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
s_running (broker_t *self, const schedule_t *schedule)
{
    if (!schedule->last_job)
        return false;
    const sched_job_t *job = sched_job (self->sched, schedule->last_job);
    return job && !sched_job_status_final (job->status);
}

//  Submits one run of SCHEDULE as a job. Returns 0 with its id in ID
//  (JOB_ID_LEN + 1 bytes), or -1 with a PROTO_ERR_ code in *CODE_P and a
//  sentence in WHY (also kept as the schedule's last status).
static int
s_start_run (broker_t *self, schedule_t *schedule, int64_t wall_ms, char *id,
             const char **code_p, char *why, size_t why_len)
{
    *code_p = PROTO_ERR_INTERNAL;
    job_spec_t *spec = NULL;
    if (self->maintenance) {
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
    size_t matched = registry_resolve (self->registry, &spec->target, &ids);
    for (size_t index = 0; index < matched; index++)
        free (ids [index]);
    free (ids);
    if (matched == 0) {
        *code_p = PROTO_ERR_NO_NODES;
        snprintf (why, why_len, "not run: no online node matches %s",
                  schedule->target);
        goto refused;
    }
    job_id_make (wall_ms, &self->last_id_ms, &self->id_seq, id,
                 JOB_ID_LEN + 1);
    sched_job_t *job = sched_job_new (id, &spec);
    job->schedule = strdup (schedule->name);
    job->created_at_ms = wall_ms;
    job->updated_at_ms = wall_ms;
    char reason [256];
    if (!job->schedule
        || sched_submit (self->sched, &job, broker_now_ms (), reason,
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
s_fire_due (broker_t *self, int64_t wall_ms)
{
    for (schedule_t *schedule = (schedule_t *) zhashx_first (self->schedules);
         schedule; schedule = (schedule_t *) zhashx_next (self->schedules)) {
        schedule_decision_t decision
            = schedule_due (schedule, wall_ms, s_running (self, schedule));
        if (decision == SCHEDULE_IDLE)
            continue;
        char id [JOB_ID_LEN + 1], why [512];
        const char *code = NULL;
        if (decision == SCHEDULE_FIRE) {
            if (s_start_run (self, schedule, wall_ms, id, &code, why,
                             sizeof why)
                == 0) {
                log_ctx_t ctx = {.job = id};
                log_write (LOG_LEVEL_DEBUG, &ctx, "schedule %s started job %s",
                           schedule->name, id);
            }
        }
        else
        if (decision == SCHEDULE_SKIPPED) {
            snprintf (why, sizeof why, "skipped: the previous run %s was "
                                       "still going",
                      schedule->last_job);
            schedule_set_status (schedule, why);
        }
        s_save (self, schedule);
    }
}

static int s_on_timer (zloop_t *loop, int timer_id, void *arg);

void
schedrun_arm (broker_t *self)
{
    if (self->schedule_timer) {
        zloop_timer_end (self->loop, self->schedule_timer);
        self->schedule_timer = 0;
    }
    int64_t wall_ms = broker_wall_ms ();
    int64_t wake_ms = INT64_MAX;
    for (schedule_t *schedule = (schedule_t *) zhashx_first (self->schedules);
         schedule; schedule = (schedule_t *) zhashx_next (self->schedules)) {
        if (schedule->paused)
            continue;
        if (schedule->pending_run && !s_running (self, schedule))
            wake_ms = wall_ms;
        else
        if (schedule->next_ms >= 0 && schedule->next_ms < wake_ms)
            wake_ms = schedule->next_ms;
    }
    if (wake_ms == INT64_MAX)
        return;
    int64_t delay_ms = wake_ms - wall_ms;
    //  Runs wait, like queued jobs, until the agents said hello again
    int64_t hold_ms = self->hold_until_ms ? self->hold_until_ms
                                                - broker_now_ms () + 1
                                          : 0;
    if (delay_ms < hold_ms)
        delay_ms = hold_ms;
    delay_ms = delay_ms < 1 ? 1 : delay_ms > S_MAX_WAIT_MS ? S_MAX_WAIT_MS
                                                           : delay_ms;
    self->schedule_timer = zloop_timer (self->loop, (size_t) delay_ms, 1,
                                        s_on_timer, self);
}

static int
s_on_timer (zloop_t *loop, int timer_id, void *arg)
{
    broker_t *self = (broker_t *) arg;
    self->schedule_timer = 0;        //  A one-shot timer ends by itself
    if (!self->hold_until_ms)
        s_fire_due (self, broker_wall_ms ());
    broker_pass_end (self);
    schedrun_arm (self);
    return 0;
}

void
schedrun_on_finished (broker_t *self, const sched_job_t *job)
{
    schedule_t *schedule = job->schedule ? (schedule_t *) zhashx_lookup (
                                               self->schedules, job->schedule)
                                         : NULL;
    if (!schedule || !schedule->last_job
        || strcmp (schedule->last_job, job->id) != 0)
        return;
    schedule_set_status (schedule, sched_job_status_name (job->status));
    s_save (self, schedule);
    //  A queued run may go now
    if (schedule->pending_run)
        schedrun_arm (self);
}

int
schedrun_restore (broker_t *self, char *err, size_t err_len)
{
    store_txn_t *txn = store_begin (self->store, false);
    if (!txn) {
        snprintf (err, err_len, "cannot read the store: %s",
                  store_last_error (self->store));
        return -1;
    }
    zlistx_t *changed = zlistx_new ();
    size_t loaded = 0, broken = 0, catch_up = 0;
    int64_t wall_ms = broker_wall_ms ();
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
        if (schedule && !zhashx_lookup (self->schedules, schedule->name)) {
            int64_t next_ms = schedule->next_ms;
            if (schedule_restart (schedule, wall_ms))
                catch_up++;
            if (schedule->next_ms != next_ms)
                zlistx_add_end (changed, schedule);
            zhashx_insert (self->schedules, schedule->name, schedule);
            loaded++;
        }
        else {
            schedule_destroy (&schedule);
            broken++;
        }
        rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    store_abort (&txn);
    for (schedule_t *schedule = (schedule_t *) zlistx_first (changed);
         schedule; schedule = (schedule_t *) zlistx_next (changed))
        s_save (self, schedule);
    zlistx_destroy (&changed);
    if (loaded || broken)
        log_write (LOG_LEVEL_INFO, NULL, "restored %zu schedule%s (%zu catch-up "
                   "run%s due)%s",
                   loaded, loaded == 1 ? "" : "s", catch_up,
                   catch_up == 1 ? "" : "s",
                   broken ? "; some records were unreadable" : "");
    broker_pass_end (self);
    schedrun_arm (self);
    return 0;
}
