/*  =========================================================================
    schedrun - the broker's schedules: kept in the store, fired on the wall
    clock, and their runs followed

    The schedules live in ctx->schedules (name -> schedule_t, owned), one
    store record each (STORE_DB_SCHEDULES). The server keeps one timer for
    them all, never one per schedule: after every pass it asks
    schedrun_next_ms when to wake (at most a minute ahead, so a wall clock
    that jumps is followed within a minute), and then calls
    schedrun_fire_due and ends the pass. A run is an ordinary job whose
    record carries the schedule's name. The rules (overlap, catch-up) live
    in schedule.c; this module only applies them to the scheduler, the
    registry and the store, through the context. The schedule.* requests
    are served by req/schedules.c with the functions below.

    Every write goes into the pass's transaction (ctx_txn); the server
    commits it.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_SCHEDRUN_H
#define GRID_BROKER_SCHEDRUN_H

#include "ctx.h"
#include "schedule.h"

//  Loads the stored schedules into ctx->schedules, applying catch-up for
//  the times missed while the broker was down; the schedules whose next
//  time moved are saved in the pass, which the caller ends. Returns 0, or
//  -1 with a sentence in ERR when the store cannot be read.
int schedrun_restore (ctx_t *ctx, char *err, size_t err_len);

//  Replaces ctx->schedules with the records as the store holds them, no
//  catch-up applied: the server calls it after a failed commit, whose
//  schedule.set, schedule.delete or fired runs reached memory only.
//  Returns 0, or -1 (logged) when the store cannot be read, memory then
//  kept as it was.
int schedrun_reload (ctx_t *ctx);

//  The monotonic ms at which the server should call schedrun_fire_due
//  next: the earliest due time of a schedule not paused (now for a queued
//  run whose previous one ended), not before the restart hold ends
//  (ctx->state.hold_until_ms), at least 1 ms and at most a minute ahead.
//  -1 when no schedule is due ever.
int64_t schedrun_next_ms (ctx_t *ctx);

//  Applies the rules to every schedule at the wall clock: starts the runs
//  that are due, marks the skipped ones, and saves each schedule it
//  looked at in the pass. Nothing while the restart hold lasts. The
//  caller ends the pass.
void schedrun_fire_due (ctx_t *ctx);

//  JOB finished: when a schedule started it, its last status follows (and
//  is saved); a run it queued may start at the next schedrun_next_ms.
void schedrun_on_finished (ctx_t *ctx, const sched_job_t *job);

//  Writes SCHEDULE's record into the pass; a failure is logged.
void schedrun_save (ctx_t *ctx, const schedule_t *schedule);

//  Submits one run of SCHEDULE at WALL_MS as a job. Returns 0 with its id
//  in ID (JOB_ID_LEN + 1 bytes), or -1 with a PROTO_ERR_ code in *CODE_P
//  and a sentence in WHY (also kept as the schedule's last status):
//  maintenance, no online node matches, the queue is full. The caller
//  saves SCHEDULE (schedrun_save).
int schedrun_start (ctx_t *ctx, schedule_t *schedule, int64_t wall_ms,
                    char *id, const char **code_p, char *why,
                    size_t why_len);

#endif
