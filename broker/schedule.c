/*  =========================================================================
    schedule - one named schedule (see schedule.h)
    =========================================================================
*/
#include "schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *s_overlap_names [] = {"skip", "queue", "allow"};
static const char *s_catch_up_names [] = {"one", "none"};

const char *
schedule_overlap_name (schedule_overlap_t overlap)
{
    return (unsigned) overlap < 3 ? s_overlap_names [overlap] : "?";
}

const char *
schedule_catch_up_name (schedule_catch_up_t catch_up)
{
    return (unsigned) catch_up < 2 ? s_catch_up_names [catch_up] : "?";
}

//  Index of TEXT in NAMES (COUNT of them), or -1.
static int
s_lookup (const char *text, const char *const *names, int count)
{
    for (int i = 0; text && i < count; i++)
        if (strcmp (text, names [i]) == 0)
            return i;
    return -1;
}

static void
s_problem (job_errors_t *errors, const char *format, ...)
{
    if (!errors)
        return;
    if (errors->count >= JOB_MAX_ERRORS) {
        errors->truncated = true;
        return;
    }
    char text [512];
    va_list args;
    va_start (args, format);
    vsnprintf (text, sizeof text, format, args);
    va_end (args);
    errors->items [errors->count] = strdup (text);
    if (errors->items [errors->count])
        errors->count++;
}

//  The string field KEY of MAP (owned copy), NULL when absent; a present
//  field that is not a string is a problem.
static char *
s_text (const pv_t *map, const char *key, job_errors_t *errors)
{
    const pv_t *value = pv_map_get (map, key);
    if (!value)
        return NULL;
    if (pv_type (value) != PV_STR) {
        s_problem (errors, "%s: expected a string", key);
        return NULL;
    }
    return pv_strdup (value);
}

void
schedule_destroy (schedule_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    schedule_t *self = *self_p;
    free (self->name);
    free (self->cron_text);
    free (self->tz);
    free (self->job);
    free (self->target);
    free (self->last_job);
    free (self->last_status);
    free (self);
    *self_p = NULL;
}

//  Keeps SPEC's wire bytes and target text in SELF.
static int
s_set_job (schedule_t *self, const job_spec_t *spec)
{
    pw_t *writer = pw_new ();
    if (!writer)
        return -1;
    job_spec_encode (spec, writer);
    self->job_size = pw_size (writer);
    self->job = (uint8_t *) malloc (self->job_size ? self->job_size : 1);
    if (self->job)
        memcpy (self->job, pw_data (writer), self->job_size);
    pw_destroy (&writer);
    self->target = target_format (&spec->target);
    return self->job && self->target ? 0 : -1;
}

job_spec_t *
schedule_job_spec (const schedule_t *self)
{
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (self->job, self->job_size, &doc, NULL, 0) != 0)
        return NULL;
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    if (job_spec_decode (pv_doc_root (doc), &spec, &errors) != 0)
        spec = NULL;
    job_errors_clear (&errors);
    pv_doc_destroy (&doc);
    return spec;
}

//  Checks and sets when SELF fires: CRON_TEXT (with TZ) or EVERY_TEXT.
static void
s_set_timing (schedule_t *self, char *cron_text, const char *every_text,
              char *tz, job_errors_t *errors)
{
    char why [256] = "";
    if (cron_text && every_text) {
        s_problem (errors, "cron, every: give one of them, not both");
        free (cron_text);
        free (tz);
        return;
    }
    if (!cron_text && !every_text) {
        s_problem (errors, "cron, every: one is required (cron \"*/5 * * * "
                           "*\" or every \"10m\")");
        free (tz);
        return;
    }
    if (every_text) {
        if (tz)
            s_problem (errors, "tz: only a cron schedule has a time zone");
        free (tz);
        if (duration_parse (every_text, &self->every_ms) != 0
            || self->every_ms < SCHEDULE_MIN_EVERY_MS) {
            s_problem (errors, "every: '%.64s' is not an interval from 1s to "
                               "30d (like 30s, 10m or 1h30m)", every_text);
            self->every_ms = 0;
        }
        return;
    }
    self->cron_text = cron_text;
    if (cron_parse (cron_text, &self->cron, why, sizeof why) != 0)
        s_problem (errors, "cron: %s", why);
    if (tz && cron_tz_check (tz, why, sizeof why) != 0)
        s_problem (errors, "tz: %s", why);
    if (tz && strcmp (tz, "UTC") != 0 && *tz)
        self->tz = tz;
    else
        free (tz);
}

schedule_t *
schedule_from_request (const pv_t *body, int64_t now_ms,
                       job_errors_t *errors)
{
    schedule_t *self = (schedule_t *) calloc (1, sizeof (schedule_t));
    if (!self)
        return NULL;
    size_t before = errors->count;
    self->name = s_text (body, "name", errors);
    if (!self->name || !name_valid (self->name))
        s_problem (errors, "name: '%.64s' is not a schedule name (letters, "
                           "digits, '_' and '-', 1 to 64)",
                   self->name ? self->name : "");
    char *every_text = s_text (body, "every", errors);
    s_set_timing (self, s_text (body, "cron", errors), every_text,
                  s_text (body, "tz", errors), errors);
    free (every_text);
    char *overlap = s_text (body, "overlap", errors);
    int index = overlap ? s_lookup (overlap, s_overlap_names, 3) : 0;
    if (index < 0)
        s_problem (errors, "overlap: '%.32s' is not skip, queue or allow",
                   overlap);
    self->overlap = (schedule_overlap_t) (index < 0 ? 0 : index);
    free (overlap);
    char *catch_up = s_text (body, "catch_up", errors);
    index = catch_up ? s_lookup (catch_up, s_catch_up_names, 2) : 0;
    if (index < 0)
        s_problem (errors, "catch_up: '%.32s' is not one or none", catch_up);
    self->catch_up = (schedule_catch_up_t) (index < 0 ? 0 : index);
    free (catch_up);
    char *window = s_text (body, "catch_up_window", errors);
    self->catch_up_window_ms = SCHEDULE_DEFAULT_WINDOW_MS;
    if (window && duration_parse (window, &self->catch_up_window_ms) != 0)
        s_problem (errors, "catch_up_window: '%.64s' is not a duration up to "
                           "30d (like 10m or 1h)", window);
    free (window);

    const pv_t *job = pv_map_get (body, "job");
    job_spec_t *spec = NULL;
    job_errors_t job_errors;
    memset (&job_errors, 0, sizeof job_errors);
    if (!job)
        s_problem (errors, "job: required (the job spec each run submits)");
    else
    if (job_spec_decode (job, &spec, &job_errors) != 0) {
        for (size_t i = 0; i < job_errors.count; i++)
            s_problem (errors, "job.%s", job_errors.items [i]);
        if (job_errors.truncated)
            errors->truncated = true;
    }
    job_errors_clear (&job_errors);
    if (spec && s_set_job (self, spec) != 0)
        s_problem (errors, "job: out of memory");
    job_spec_destroy (&spec);

    self->created_at_ms = now_ms;
    self->next_ms = -1;
    if (errors->count == before && !errors->truncated) {
        self->next_ms = schedule_next_after (self, now_ms);
        if (self->next_ms < 0)
            s_problem (errors, "cron: '%s' never fires (no such date within "
                               "%d years)",
                       self->cron_text, CRON_SEARCH_YEARS);
    }
    if (errors->count > before || errors->truncated)
        schedule_destroy (&self);
    return self;
}

int64_t
schedule_next_after (const schedule_t *self, int64_t after_ms)
{
    if (self->every_ms > 0) {
        int64_t from = after_ms > self->created_at_ms ? after_ms
                                                      : self->created_at_ms;
        int64_t k = (from - self->created_at_ms) / self->every_ms + 1;
        return self->created_at_ms + k * self->every_ms;
    }
    return cron_next (&self->cron, self->tz, after_ms);
}

bool
schedule_restart (schedule_t *self, int64_t now_ms)
{
    if (self->paused || self->next_ms < 0 || self->next_ms > now_ms)
        return false;
    //  Missed at least one time; was one of them within the window?
    bool run = false;
    if (self->catch_up == SCHEDULE_CATCH_UP_ONE) {
        int64_t oldest = now_ms - self->catch_up_window_ms;
        int64_t from = self->next_ms - 1 > oldest - 1 ? self->next_ms - 1
                                                      : oldest - 1;
        int64_t missed = schedule_next_after (self, from);
        run = missed >= 0 && missed <= now_ms;
    }
    self->next_ms = schedule_next_after (self, now_ms);
    if (run)
        self->pending_run = true;
    return run;
}

schedule_decision_t
schedule_due (schedule_t *self, int64_t now_ms, bool previous_running)
{
    if (self->paused)
        return SCHEDULE_IDLE;
    bool due = self->next_ms >= 0 && self->next_ms <= now_ms;
    if (due)
        self->next_ms = schedule_next_after (self, now_ms);
    if (!due && !self->pending_run)
        return SCHEDULE_IDLE;
    if (previous_running && self->overlap == SCHEDULE_OVERLAP_QUEUE) {
        self->pending_run = true;
        return SCHEDULE_HOLD;
    }
    self->pending_run = false;
    if (previous_running && self->overlap == SCHEDULE_OVERLAP_SKIP) {
        self->skipped++;
        return SCHEDULE_SKIPPED;
    }
    return SCHEDULE_FIRE;
}

static void
s_replace (char **field, const char *text)
{
    char *copy = text ? strdup (text) : NULL;
    free (*field);
    *field = copy;
}

void
schedule_started (schedule_t *self, const char *job_id, int64_t now_ms)
{
    s_replace (&self->last_job, job_id);
    s_replace (&self->last_status, "pending");
    self->last_run_ms = now_ms;
    self->runs++;
}

void
schedule_set_status (schedule_t *self, const char *status)
{
    s_replace (&self->last_status, status);
}

void
schedule_set_paused (schedule_t *self, bool paused, int64_t now_ms)
{
    if (self->paused && !paused)
        self->next_ms = schedule_next_after (self, now_ms);
    self->paused = paused;
    if (paused)
        self->pending_run = false;
}

//  ---------------------------------------------------------------------
//  Records

static void
s_str_field (pw_t *writer, const char *key, const char *value)
{
    pw_str (writer, key);
    pw_str (writer, value);
}

static void
s_int_field (pw_t *writer, const char *key, int64_t value)
{
    pw_str (writer, key);
    pw_int (writer, value);
}

void
schedule_encode (const schedule_t *self, pw_t *writer)
{
    size_t count = 12 + (self->cron_text ? 1 : 0) + (self->tz ? 1 : 0)
                 + (self->every_ms ? 1 : 0) + (self->last_job ? 1 : 0)
                 + (self->last_status ? 1 : 0);
    pw_map (writer, count);
    s_str_field (writer, "name", self->name);
    if (self->cron_text)
        s_str_field (writer, "cron", self->cron_text);
    if (self->tz)
        s_str_field (writer, "tz", self->tz);
    if (self->every_ms)
        s_int_field (writer, "every_ms", self->every_ms);
    pw_str (writer, "job");
    pw_raw (writer, self->job, self->job_size);
    s_str_field (writer, "overlap", schedule_overlap_name (self->overlap));
    s_str_field (writer, "catch_up", schedule_catch_up_name (self->catch_up));
    s_int_field (writer, "catch_up_window_ms", self->catch_up_window_ms);
    pw_str (writer, "paused");
    pw_bool (writer, self->paused);
    s_int_field (writer, "created_at_ms", self->created_at_ms);
    s_int_field (writer, "next_ms", self->next_ms);
    s_int_field (writer, "last_run_ms", self->last_run_ms);
    if (self->last_job)
        s_str_field (writer, "last_job", self->last_job);
    if (self->last_status)
        s_str_field (writer, "last_status", self->last_status);
    s_int_field (writer, "runs", self->runs);
    s_int_field (writer, "skipped", self->skipped);
    pw_str (writer, "pending_run");
    pw_bool (writer, self->pending_run);
}

schedule_t *
schedule_decode (const pv_t *record)
{
    schedule_t *self = (schedule_t *) calloc (1, sizeof (schedule_t));
    if (!self || pv_type (record) != PV_MAP)
        goto fail;
    self->name = pv_strdup (pv_map_get (record, "name"));
    self->cron_text = pv_strdup (pv_map_get (record, "cron"));
    self->tz = pv_strdup (pv_map_get (record, "tz"));
    self->last_job = pv_strdup (pv_map_get (record, "last_job"));
    self->last_status = pv_strdup (pv_map_get (record, "last_status"));
    char *overlap = pv_strdup (pv_map_get (record, "overlap"));
    char *catch_up = pv_strdup (pv_map_get (record, "catch_up"));
    int overlap_index = s_lookup (overlap, s_overlap_names, 3);
    int catch_up_index = s_lookup (catch_up, s_catch_up_names, 2);
    free (overlap);
    free (catch_up);
    if (!self->name || !name_valid (self->name) || overlap_index < 0
        || catch_up_index < 0)
        goto fail;
    self->overlap = (schedule_overlap_t) overlap_index;
    self->catch_up = (schedule_catch_up_t) catch_up_index;
    pv_get_int (pv_map_get (record, "every_ms"), &self->every_ms);
    if (pv_get_int (pv_map_get (record, "catch_up_window_ms"),
                    &self->catch_up_window_ms)
            != 0
        || pv_get_bool (pv_map_get (record, "paused"), &self->paused) != 0
        || pv_get_int (pv_map_get (record, "created_at_ms"),
                       &self->created_at_ms)
               != 0
        || pv_get_int (pv_map_get (record, "next_ms"), &self->next_ms) != 0
        || pv_get_int (pv_map_get (record, "last_run_ms"),
                       &self->last_run_ms)
               != 0)
        goto fail;
    pv_get_int (pv_map_get (record, "runs"), &self->runs);
    pv_get_int (pv_map_get (record, "skipped"), &self->skipped);
    pv_get_bool (pv_map_get (record, "pending_run"), &self->pending_run);
    if (self->cron_text) {
        if (cron_parse (self->cron_text, &self->cron, NULL, 0) != 0
            || (self->tz && cron_tz_check (self->tz, NULL, 0) != 0))
            goto fail;
    }
    else
    if (self->every_ms < SCHEDULE_MIN_EVERY_MS)
        goto fail;
    //  The job: re-encode it, which also checks it still decodes
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    int rc = job_spec_decode (pv_map_get (record, "job"), &spec, &errors);
    job_errors_clear (&errors);
    if (rc != 0 || s_set_job (self, spec) != 0) {
        job_spec_destroy (&spec);
        goto fail;
    }
    job_spec_destroy (&spec);
    return self;
fail:
    schedule_destroy (&self);
    return NULL;
}

static void
s_time_field (pw_t *writer, const char *key, int64_t wall_ms)
{
    char text [TIME_TEXT_LEN];
    time_format (wall_ms, text, sizeof text);
    s_str_field (writer, key, text);
}

void
schedule_write_view (const schedule_t *self, pw_t *writer)
{
    bool has_next = self->next_ms >= 0 && !self->paused;
    size_t count = 11 + (self->cron_text ? 1 : 0) + (self->tz ? 1 : 0)
                 + (self->every_ms ? 1 : 0) + (has_next ? 1 : 0)
                 + (self->last_run_ms ? 1 : 0) + (self->last_job ? 1 : 0)
                 + (self->last_status ? 1 : 0);
    pw_map (writer, count);
    s_str_field (writer, "name", self->name);
    if (self->cron_text)
        s_str_field (writer, "cron", self->cron_text);
    if (self->tz)
        s_str_field (writer, "tz", self->tz);
    char text [32];
    if (self->every_ms) {
        duration_format (self->every_ms, text, sizeof text);
        s_str_field (writer, "every", text);
    }
    s_str_field (writer, "target", self->target);
    pw_str (writer, "job");
    pw_raw (writer, self->job, self->job_size);
    s_str_field (writer, "overlap", schedule_overlap_name (self->overlap));
    s_str_field (writer, "catch_up", schedule_catch_up_name (self->catch_up));
    duration_format (self->catch_up_window_ms, text, sizeof text);
    s_str_field (writer, "catch_up_window", text);
    pw_str (writer, "paused");
    pw_bool (writer, self->paused);
    s_time_field (writer, "created_at", self->created_at_ms);
    if (has_next)
        s_time_field (writer, "next_run", self->next_ms);
    if (self->last_run_ms)
        s_time_field (writer, "last_run", self->last_run_ms);
    if (self->last_job)
        s_str_field (writer, "last_job", self->last_job);
    if (self->last_status)
        s_str_field (writer, "last_status", self->last_status);
    s_int_field (writer, "runs", self->runs);
    s_int_field (writer, "skipped", self->skipped);
    pw_str (writer, "pending_run");
    pw_bool (writer, self->pending_run);
}
