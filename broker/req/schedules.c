/*  =========================================================================
    req/schedules - schedule.add schedule.list schedule.get schedule.pause
    schedule.resume schedule.delete schedule.run (see req.h)

    The schedules are schedrun's (schedrun.h): these handlers check the
    request, change ctx->schedules, save through schedrun_save and write
    the reply. The server asks schedrun_next_ms after the pass, so a
    schedule added, paused, resumed or deleted moves the timer.
    =========================================================================
*/
#include "../../proto/log.h"
#include "../schedrun.h"
#include "req.h"

//  The schedule named by the request's "name", or NULL (error written).
static schedule_t *
s_named (req_call_t *call)
{
    char *name = req_field (call, "name");
    schedule_t *schedule
        = name ? (schedule_t *) zhashx_lookup (call->ctx->schedules, name)
               : NULL;
    if (!schedule) {
        char show [NAME_SHOW_LEN];
        req_error (call, PROTO_ERR_NOT_FOUND, "no schedule '%s'",
                   name ? name_show (name, strlen (name), show, sizeof show)
                        : "");
    }
    free (name);
    return schedule;
}

static void
s_reply_view (req_call_t *call, const schedule_t *schedule)
{
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    schedule_write_view (schedule, call->reply);
}

//  Refuses a schedule whose job the registered nodes cannot run, or whose
//  actions the allowlist forbids. Returns 0 or -1 (error written).
static int
s_check_job (req_call_t *call, const schedule_t *schedule)
{
    ctx_t *ctx = call->ctx;
    job_spec_t *spec = schedule_job_spec (schedule);
    if (!spec) {
        req_error (call, PROTO_ERR_INTERNAL, "the job does not encode");
        return -1;
    }
    size_t steps = job_spec_step_count (spec);
    for (size_t step = 0; step < steps; step++) {
        const job_phase_t *leaf = job_spec_step (spec, step, NULL, NULL);
        if (leaf && !auth_allowed (&ctx->config->auth, leaf->backend,
                                   leaf->action)) {
            req_error (call, PROTO_ERR_FORBIDDEN,
                       "%s %s is not in the broker's allowlist",
                       leaf->backend, leaf->action);
            job_spec_destroy (&spec);
            return -1;
        }
    }
    zlistx_t *details = zlistx_new ();
    zlistx_set_destructor (details, (zlistx_destructor_fn *) zstr_free);
    req_check_actions (ctx, spec, details);
    //  A schedule's record keeps its job's spec whole, which the previous
    //  release reads: its runs tell of their ends through the broker's
    //  notify.targets only
    if (spec->notify_count)
        zlistx_add_end (details, strdup ("notify: a schedule's job names no "
                                         "webhooks (the broker's "
                                         "notify.targets tell of its runs)"));
    job_spec_destroy (&spec);
    size_t count = zlistx_size (details);
    if (count) {
        char **items = (char **) calloc (count, sizeof (char *));
        assert (items);
        size_t index = 0;
        for (char *item = (char *) zlistx_first (details); item;
             item = (char *) zlistx_next (details))
            items [index++] = zsys_sprintf ("job.%s", item);
        pw_reset (call->reply);
        proto_reply_error (call->reply, call->request->id,
                           PROTO_ERR_INVALID_JOB,
                           "the schedule's job is not valid (see details)",
                           items, count);
        for (index = 0; index < count; index++)
            zstr_free (&items [index]);
        free (items);
    }
    zlistx_destroy (&details);
    return count ? -1 : 0;
}

void
req_schedule_add (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    schedule_t *schedule = schedule_from_request (call->request->body,
                                                  ctx_wall_ms (ctx), &errors);
    if (!schedule) {
        pw_reset (call->reply);
        proto_reply_error (call->reply, call->request->id,
                           PROTO_ERR_BAD_REQUEST,
                           errors.count == 1 ? errors.items [0]
                                             : "the schedule is not valid "
                                               "(see details)",
                           errors.items, errors.count);
        job_errors_clear (&errors);
        return;
    }
    if (zhashx_lookup (ctx->schedules, schedule->name))
        req_error (call, PROTO_ERR_CONFLICT,
                   "schedule %s exists (delete it first, or pick another "
                   "name)", schedule->name);
    else
    if (zhashx_size (ctx->schedules) >= SCHEDULE_MAX)
        req_error (call, PROTO_ERR_CONFLICT,
                   "too many schedules (at most %d)", SCHEDULE_MAX);
    else
    if (s_check_job (call, schedule) == 0) {
        zhashx_insert (ctx->schedules, schedule->name, schedule);
        schedrun_save (ctx, schedule);
        s_reply_view (call, schedule);
        if (log_enabled (LOG_LEVEL_DEBUG)) {
            char next [TIME_TEXT_LEN];
            time_format (schedule->next_ms, next, sizeof next);
            log_write (LOG_LEVEL_DEBUG, NULL, "schedule %s added, next run %s",
                       schedule->name, next);
        }
        return;
    }
    schedule_destroy (&schedule);
}

static int
s_compare_names (const void *a, const void *b)
{
    return strcmp ((*(schedule_t *const *) a)->name,
                   (*(schedule_t *const *) b)->name);
}

void
req_schedule_list (req_call_t *call)
{
    zhashx_t *schedules = call->ctx->schedules;
    pw_t *reply = call->reply;
    size_t count = zhashx_size (schedules);
    schedule_t **all = (schedule_t **) calloc (count + 1,
                                               sizeof (schedule_t *));
    assert (all);
    size_t index = 0;
    for (schedule_t *schedule = (schedule_t *) zhashx_first (schedules);
         schedule; schedule = (schedule_t *) zhashx_next (schedules))
        all [index++] = schedule;
    qsort (all, count, sizeof (schedule_t *), s_compare_names);
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 1);
    pw_str (reply, "schedules");
    pw_array (reply, count);
    for (index = 0; index < count; index++)
        schedule_write_view (all [index], reply);
    free (all);
}

static void
s_pause (req_call_t *call, bool paused)
{
    schedule_t *schedule = s_named (call);
    if (!schedule)
        return;
    schedule_set_paused (schedule, paused, ctx_wall_ms (call->ctx));
    schedrun_save (call->ctx, schedule);
    s_reply_view (call, schedule);
}

void
req_schedule_get (req_call_t *call)
{
    schedule_t *schedule = s_named (call);
    if (schedule)
        s_reply_view (call, schedule);
}

void
req_schedule_pause (req_call_t *call)
{
    s_pause (call, true);
}

void
req_schedule_resume (req_call_t *call)
{
    s_pause (call, false);
}

void
req_schedule_delete (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    schedule_t *schedule = s_named (call);
    if (!schedule)
        return;
    store_txn_t *txn = ctx_txn (ctx);
    if (!txn
        || store_del (txn, STORE_DB_SCHEDULES, schedule->name,
                      strlen (schedule->name))
               == STORE_EIO) {
        req_error (call, PROTO_ERR_STORE, "the store cannot be written: %s",
                   store_last_error (ctx->store));
        return;
    }
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 2);
    pw_str (reply, "name");
    pw_str (reply, schedule->name);
    pw_str (reply, "deleted");
    pw_bool (reply, true);
    char name [NAME_MAX_LEN + 1];
    snprintf (name, sizeof name, "%s", schedule->name);
    zhashx_delete (ctx->schedules, name);
}

void
req_schedule_run (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    schedule_t *schedule = s_named (call);
    if (!schedule)
        return;
    char id [JOB_ID_LEN + 1], why [512];
    const char *code = NULL;
    int rc = schedrun_start (ctx, schedule, ctx_wall_ms (ctx), id, &code, why,
                             sizeof why);
    schedrun_save (ctx, schedule);
    if (rc != 0) {
        //  The reply says why without the "not run: " of the last status
        const char *sentence = strncmp (why, "not run: ", 9) == 0 ? why + 9
                                                                  : why;
        req_error (call, code, "schedule %s: %s", schedule->name, sentence);
        return;
    }
    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 3);
    pw_str (reply, "job");
    pw_str (reply, id);
    pw_str (reply, "schedule");
    pw_str (reply, schedule->name);
    pw_str (reply, "status");
    const sched_job_t *live = sched_job (ctx->sched, id);
    pw_str (reply, live ? sched_job_status_name (live->status) : "running");
}
