/*  =========================================================================
    req/schedules - schedule.add schedule.list schedule.get schedule.pause
    schedule.resume schedule.delete schedule.run (see req.h)
    =========================================================================
*/

//  ---------------------------------------------------------------------
//  schedule.* requests

static void
s_error (pw_t *reply, const proto_request_t *request, const char *code,
         const char *format, ...)
{
    char message [1024];
    va_list args;
    va_start (args, format);
    vsnprintf (message, sizeof message, format, args);
    va_end (args);
    pw_reset (reply);
    proto_reply_error (reply, request->id, code, message, NULL, 0);
}

//  The schedule named by the request's "name", or NULL (error written).
static schedule_t *
s_named (broker_t *self, const proto_request_t *request, pw_t *reply)
{
    char *name = pv_strdup (pv_map_get (request->body, "name"));
    schedule_t *schedule
        = name ? (schedule_t *) zhashx_lookup (self->schedules, name) : NULL;
    if (!schedule) {
        char show [NAME_SHOW_LEN];
        s_error (reply, request, PROTO_ERR_NOT_FOUND, "no schedule '%s'",
                 name ? name_show (name, strlen (name), show, sizeof show)
                      : "");
    }
    free (name);
    return schedule;
}

static void
s_reply_view (pw_t *reply, const proto_request_t *request,
              const schedule_t *schedule)
{
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    schedule_write_view (schedule, reply);
}

//  Refuses a schedule whose job the registered nodes cannot run, or whose
//  actions the allowlist forbids. Returns 0 or -1 (error written).
static int
s_check_job (broker_t *self, const proto_request_t *request, pw_t *reply,
             const schedule_t *schedule)
{
    job_spec_t *spec = schedule_job_spec (schedule);
    if (!spec) {
        s_error (reply, request, PROTO_ERR_INTERNAL, "the job does not "
                                                     "encode");
        return -1;
    }
    size_t steps = job_spec_step_count (spec);
    for (size_t step = 0; step < steps; step++) {
        const job_phase_t *leaf = job_spec_step (spec, step, NULL, NULL);
        if (leaf && !auth_allowed (&self->config.auth, leaf->backend,
                                   leaf->action)) {
            s_error (reply, request, PROTO_ERR_FORBIDDEN,
                     "%s %s is not in the broker's allowlist", leaf->backend,
                     leaf->action);
            job_spec_destroy (&spec);
            return -1;
        }
    }
    zlistx_t *details = zlistx_new ();
    zlistx_set_destructor (details, (zlistx_destructor_fn *) zstr_free);
    api_check_actions (self, spec, details);
    job_spec_destroy (&spec);
    size_t count = zlistx_size (details);
    if (count) {
        char **items = (char **) calloc (count, sizeof (char *));
        assert (items);
        size_t index = 0;
        for (char *item = (char *) zlistx_first (details); item;
             item = (char *) zlistx_next (details))
            items [index++] = zsys_sprintf ("job.%s", item);
        pw_reset (reply);
        proto_reply_error (reply, request->id, PROTO_ERR_INVALID_JOB,
                           "the schedule's job is not valid (see details)",
                           items, count);
        for (index = 0; index < count; index++)
            zstr_free (&items [index]);
        free (items);
    }
    zlistx_destroy (&details);
    return count ? -1 : 0;
}

static void
s_add (broker_t *self, const proto_request_t *request, pw_t *reply)
{
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    schedule_t *schedule = schedule_from_request (request->body,
                                                  broker_wall_ms (), &errors);
    if (!schedule) {
        pw_reset (reply);
        proto_reply_error (reply, request->id, PROTO_ERR_BAD_REQUEST,
                           errors.count == 1 ? errors.items [0]
                                             : "the schedule is not valid "
                                               "(see details)",
                           errors.items, errors.count);
        job_errors_clear (&errors);
        return;
    }
    if (zhashx_lookup (self->schedules, schedule->name))
        s_error (reply, request, PROTO_ERR_CONFLICT,
                 "schedule %s exists (delete it first, or pick another name)",
                 schedule->name);
    else
    if (zhashx_size (self->schedules) >= SCHEDULE_MAX)
        s_error (reply, request, PROTO_ERR_CONFLICT,
                 "too many schedules (at most %d)", SCHEDULE_MAX);
    else
    if (s_check_job (self, request, reply, schedule) == 0) {
        zhashx_insert (self->schedules, schedule->name, schedule);
        s_save (self, schedule);
        s_reply_view (reply, request, schedule);
        schedrun_arm (self);
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

static void
s_list (broker_t *self, const proto_request_t *request, pw_t *reply)
{
    size_t count = zhashx_size (self->schedules);
    schedule_t **all = (schedule_t **) calloc (count + 1,
                                               sizeof (schedule_t *));
    assert (all);
    size_t index = 0;
    for (schedule_t *schedule = (schedule_t *) zhashx_first (self->schedules);
         schedule; schedule = (schedule_t *) zhashx_next (self->schedules))
        all [index++] = schedule;
    qsort (all, count, sizeof (schedule_t *), s_compare_names);
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    pw_map (reply, 1);
    pw_str (reply, "schedules");
    pw_array (reply, count);
    for (index = 0; index < count; index++)
        schedule_write_view (all [index], reply);
    free (all);
}

static void
s_pause (broker_t *self, const proto_request_t *request, pw_t *reply,
         bool paused)
{
    schedule_t *schedule = s_named (self, request, reply);
    if (!schedule)
        return;
    schedule_set_paused (schedule, paused, broker_wall_ms ());
    s_save (self, schedule);
    s_reply_view (reply, request, schedule);
    schedrun_arm (self);
}

static void
s_delete (broker_t *self, const proto_request_t *request, pw_t *reply)
{
    schedule_t *schedule = s_named (self, request, reply);
    if (!schedule)
        return;
    store_txn_t *txn = broker_txn (self);
    if (!txn
        || store_del (txn, STORE_DB_SCHEDULES, schedule->name,
                      strlen (schedule->name))
               == STORE_EIO) {
        s_error (reply, request, PROTO_ERR_STORE, "the store cannot be "
                                                  "written: %s",
                 store_last_error (self->store));
        return;
    }
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    pw_map (reply, 2);
    pw_str (reply, "name");
    pw_str (reply, schedule->name);
    pw_str (reply, "deleted");
    pw_bool (reply, true);
    char name [NAME_MAX_LEN + 1];
    snprintf (name, sizeof name, "%s", schedule->name);
    zhashx_delete (self->schedules, name);
    schedrun_arm (self);
}

static void
s_run_now (broker_t *self, const proto_request_t *request, pw_t *reply)
{
    schedule_t *schedule = s_named (self, request, reply);
    if (!schedule)
        return;
    char id [JOB_ID_LEN + 1], why [512];
    const char *code = NULL;
    int rc = s_start_run (self, schedule, broker_wall_ms (), id, &code, why,
                          sizeof why);
    s_save (self, schedule);
    if (rc != 0) {
        //  The reply says why without the "not run: " of the last status
        const char *sentence = strncmp (why, "not run: ", 9) == 0 ? why + 9
                                                                  : why;
        s_error (reply, request, code, "schedule %s: %s", schedule->name,
                 sentence);
        return;
    }
    pw_reset (reply);
    proto_reply_ok_begin (reply, request->id);
    pw_map (reply, 3);
    pw_str (reply, "job");
    pw_str (reply, id);
    pw_str (reply, "schedule");
    pw_str (reply, schedule->name);
    pw_str (reply, "status");
    const sched_job_t *live = sched_job (self->sched, id);
    pw_str (reply, live ? sched_job_status_name (live->status) : "running");
}

bool
schedrun_handle (broker_t *self, const proto_request_t *request, pw_t *reply)
{
    const char *type = request->type;
    if (streq (type, "schedule.add"))
        s_add (self, request, reply);
    else
    if (streq (type, "schedule.list"))
        s_list (self, request, reply);
    else
    if (streq (type, "schedule.get")) {
        schedule_t *schedule = s_named (self, request, reply);
        if (schedule)
            s_reply_view (reply, request, schedule);
    }
    else
    if (streq (type, "schedule.pause"))
        s_pause (self, request, reply, true);
    else
    if (streq (type, "schedule.resume"))
        s_pause (self, request, reply, false);
    else
    if (streq (type, "schedule.delete"))
        s_delete (self, request, reply);
    else
    if (streq (type, "schedule.run"))
        s_run_now (self, request, reply);
    else
        return false;
    return true;
}
