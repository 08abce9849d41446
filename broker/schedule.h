/*  =========================================================================
    schedule - one named schedule: when it fires, what it runs, and what
    it does when a run is due while the last one still goes, or was missed
    while the broker was down

    A schedule is a cron expression in a time zone (proto/cron.h) or a
    fixed interval, plus a job spec (the wire form of proto/job.h) that is
    submitted as an ordinary job each time it fires. Interval schedules
    fire at created_at + k * every (k = 1, 2, ...), so their times do not
    drift with the broker's load.

    Rules (docs/SCHEDULING.md, "Schedules"):
    - Due: next_ms <= now. A due schedule computes its following time
      from NOW, so a broker that woke late (or several due times that
      passed at once) gives one run, never a burst.
    - Overlap, when the schedule's previous run is still pending or
      running: skip (default: the run is dropped and counted), queue (one
      run waits and starts when the previous one finishes; more due times
      while it waits add nothing), allow (runs side by side).
    - Catch-up, at broker start, for due times that passed while it was
      down: none (they are dropped), one (default: one run, if at least
      one of them lies within catch_up_window of now).
    - Paused schedules never fire and do not catch up; resume computes
      the next time from now.

    Pure: no clock, no store, no socket. The record codec writes and reads
    the store form; schedule_write_view writes the client API form.

    Threading: none of its own; one schedule belongs to one thread.
    =========================================================================
*/
#ifndef GRID_SCHEDULE_H
#define GRID_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/cron.h"
#include "../proto/job.h"
#include "../proto/pv.h"
#include "../proto/pw.h"

#define SCHEDULE_MAX 1024                      //  Schedules per broker
#define SCHEDULE_MIN_EVERY_MS 1000             //  Shortest interval
#define SCHEDULE_DEFAULT_WINDOW_MS 3600000     //  catch_up_window default (1h)

typedef enum {
    SCHEDULE_OVERLAP_SKIP = 0,   //  Drop the run (default)
    SCHEDULE_OVERLAP_QUEUE,      //  One run waits for the previous one
    SCHEDULE_OVERLAP_ALLOW       //  Run side by side
} schedule_overlap_t;

typedef enum {
    SCHEDULE_CATCH_UP_ONE = 0,   //  One run for the missed times (default)
    SCHEDULE_CATCH_UP_NONE       //  Drop missed times
} schedule_catch_up_t;

typedef struct {
    char *name;                  //  [A-Za-z0-9_-]{1,64} (owned)
    char *cron_text;             //  The cron expression, or NULL (owned)
    cron_t cron;                 //  Parsed cron_text
    int64_t every_ms;            //  Interval, 0 for a cron schedule
    char *tz;                    //  Time zone of the cron, NULL for UTC (owned)
    uint8_t *job;                //  The job spec, msgpack wire form (owned)
    size_t job_size;             //  Its bytes
    char *target;                //  The job's target as text (owned)
    schedule_overlap_t overlap;  //  When the previous run still goes
    schedule_catch_up_t catch_up;  //  After the broker was down
    int64_t catch_up_window_ms;  //  How old a missed time may be
    bool paused;                 //  Never fires while set
    int64_t created_at_ms;       //  Wall clock
    int64_t next_ms;             //  Next due time (wall), -1 when none
    int64_t last_run_ms;         //  Last run started (wall), 0 when none
    char *last_job;              //  Its job id, or NULL (owned)
    char *last_status;           //  Its job status, or why it did not run (owned)
    int64_t runs;                //  Runs started
    int64_t skipped;             //  Runs dropped (overlap skip)
    bool pending_run;            //  A run waits (queue, catch-up, run now)
} schedule_t;

//  What schedule_due says to do.
typedef enum {
    SCHEDULE_IDLE = 0,           //  Nothing due
    SCHEDULE_FIRE,               //  Submit a run now
    SCHEDULE_SKIPPED,            //  A run was due and dropped (counted)
    SCHEDULE_HOLD                //  A run waits for the previous one
} schedule_decision_t;

//  Builds a schedule from the fields of a schedule.add request BODY: name,
//  cron or every, ?tz, job (map), ?overlap, ?catch_up, ?catch_up_window.
//  NOW_MS is its creation time; its first run is the first due time after
//  it. Returns the schedule, or NULL with "field: reason" sentences in
//  ERRORS (the job's own problems as "job.PATH: reason").
schedule_t *schedule_from_request (const pv_t *body, int64_t now_ms,
                                   job_errors_t *errors);

//  Frees a schedule; NULL-safe, nulls *self_p.
void schedule_destroy (schedule_t **self_p);

//  A fresh copy of the schedule's job spec for one run (caller owns), or
//  NULL when the stored bytes no longer decode.
job_spec_t *schedule_job_spec (const schedule_t *self);

//  The first due time strictly after AFTER_MS, or -1 (a cron that never
//  fires again).
int64_t schedule_next_after (const schedule_t *self, int64_t after_ms);

//  At broker start, with NOW_MS the wall clock: moves next_ms past NOW_MS
//  and, for catch_up one, sets pending_run when a time missed while the
//  broker was down lies within catch_up_window. Returns true when it set
//  pending_run.
bool schedule_restart (schedule_t *self, int64_t now_ms);

//  Decides at NOW_MS (wall) whether to run. PREVIOUS_RUNNING says whether
//  the last run is still pending or running. Updates next_ms, pending_run
//  and skipped (see the rules above).
schedule_decision_t schedule_due (schedule_t *self, int64_t now_ms,
                                  bool previous_running);

//  Records that run JOB_ID started at NOW_MS.
void schedule_started (schedule_t *self, const char *job_id, int64_t now_ms);

//  Records a run that could not start, or was skipped: STATUS is the
//  sentence shown as the last status ("not run: no online node ...").
void schedule_set_status (schedule_t *self, const char *status);

//  Pauses or resumes; resuming computes the next time from NOW_MS.
void schedule_set_paused (schedule_t *self, bool paused, int64_t now_ms);

//  The store record: {name, ?cron, ?tz, ?every_ms, job, overlap,
//  catch_up, catch_up_window_ms, paused, created_at_ms, next_ms,
//  last_run_ms, ?last_job, ?last_status, runs, skipped, pending_run}.
void schedule_encode (const schedule_t *self, pw_t *writer);

//  Reads a store record; NULL when it is malformed.
schedule_t *schedule_decode (const pv_t *record);

//  The client API form (proto/PROTOCOL.md, schedule.get).
void schedule_write_view (const schedule_t *self, pw_t *writer);

//  "skip", "queue", "allow" / "one", "none".
const char *schedule_overlap_name (schedule_overlap_t overlap);
const char *schedule_catch_up_name (schedule_catch_up_t catch_up);

#endif
