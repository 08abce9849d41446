/*  =========================================================================
    executor - a bounded pool of tasks driven by the agent's zloop

    A task is a program (execve of an absolute path with an argv array,
    never a shell), a function run in a forked child, or a function run in
    the loop itself. A program's child is started with clone (CLONE_VM |
    CLONE_VFORK): it shares the agent's memory until its execve, the loop
    waiting meanwhile, so the agent's page tables are not copied and its
    pages take no copy-on-write faults after (a fork of the agent, ~190
    mappings, costs several times a small process's). At most `concurrency` tasks run at once; tasks
    of one job run one at a time, in step order (unless they are marked
    parallel: the steps of a DAG job, which the broker sends only when
    they may run); the rest wait in a FIFO.

    Each child gets its own process group, stdin from /dev/null, a clean
    environment (PATH=BACKEND_SAFE_PATH, LANG=C, the task's extra entries,
    and GRID_FAKE_LOG when the agent has it, for the test fakes), and its
    stdout and stderr on pipes the loop reads, each kept up to
    output_cap_bytes: past it the first half and the last half of the cap
    are kept, the middle is read and dropped, and the result says how much
    was dropped (and truncated). On timeout or cancel the group gets SIGTERM, then SIGKILL
    after kill_grace_ms. When the program exits, whatever it left running
    in its group is killed, so no stray process outlives its task. A child
    also gets SIGKILL if the agent process dies (PR_SET_PDEATHSIG), so a
    crashed agent leaves no task of its own running; what the child
    started in its group outlives it, so with group_dir set no child runs
    anything before its group is recorded there (orphans.h) for the next
    start to stop: a program's child writes the record itself before its
    execve, a child function's waits for the agent's go byte after the
    agent wrote it (a record that cannot be written, as on a full disk, is
    logged and the task runs all the same).

    Children are reaped through a signalfd for SIGCHLD registered with the
    loop: SIGCHLD must be blocked in every thread of the process, which
    executor_signals_block does when called first thing in main(), before
    any thread (ZeroMQ's included) exists. Nothing ever blocks the loop.

    Callbacks (started, done) are only ever called from the loop, never
    from inside an executor_ call, so a callback may call the executor.
    Every submitted task gets exactly one done call, unless the executor is
    destroyed first.

    Threading: one executor per process, used from the loop's thread.
    =========================================================================
*/
#ifndef GRID_EXECUTOR_H
#define GRID_EXECUTOR_H

#include <czmq.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXECUTOR_DEFAULT_GRACE_MS 5000       //  SIGTERM -> SIGKILL
#define EXECUTOR_DEFAULT_CAP_BYTES (16u << 20)  //  Per stream
#define EXECUTOR_EXEC_FAILED 127             //  Exit code when execve fails

typedef struct _executor_t executor_t;

typedef enum {
    EXECUTOR_SUCCESS = 0,        //  Exit code 0 (or the function said so)
    EXECUTOR_FAILED,             //  Non-zero exit, signal, or exec failed
    EXECUTOR_TIMEOUT,            //  Ran past its timeout and was killed
    EXECUTOR_CANCELLED           //  Cancelled, queued or running
} executor_status_t;

//  What a task came to. Strings are NUL-terminated; the done callback may
//  take OUTPUT or ERROR by setting the pointer to NULL (then it frees it),
//  otherwise the executor frees them after the callback.
typedef struct {
    executor_status_t status;    //  How it ended
    char *output;                //  Captured stdout (never NULL)
    size_t output_len;           //  Its length (bytes may include NUL)
    char *error;                 //  Captured stderr + why it ended (never NULL)
    size_t error_len;            //  Its length
    bool truncated;              //  A stream was cut at the cap
    size_t output_dropped;       //  Bytes dropped from the middle of stdout:
                                 //  OUTPUT is its first OUTPUT_LEN / 2
                                 //  bytes, then its last (rounded up)
    size_t error_dropped;        //  The same for stderr (before the reason
                                 //  that ERROR may end with)
    int32_t exit_code;           //  Exit code, or -1 (signal, never started)
    int term_signal;             //  Signal that ended it, or 0
    uint64_t duration_ms;        //  Wall time, start to end (0: never ran)
} executor_result_t;

//  Runs in a forked child (stdout/stderr are the capture pipes). Only
//  async-signal-safe calls are allowed. Returns the exit code.
typedef int (executor_child_fn) (void *arg);

//  Runs in the loop. Must set RESULT's status, exit_code and may set output
//  / error (malloc'd, NUL-terminated; lengths are computed with strlen).
typedef void (executor_inproc_fn) (void *arg, executor_result_t *result);

//  Called when a task starts (PID is 0 for in-loop tasks).
typedef void (executor_started_fn) (void *arg, pid_t pid);

//  Called once when a task ends, however it ends.
typedef void (executor_done_fn) (void *arg, executor_result_t *result);

//  Frees a task's ARG, after its done call or at executor_destroy.
typedef void (executor_free_fn) (void *arg);

typedef struct {
    uint32_t concurrency;        //  Tasks running at once (>= 1)
    size_t output_cap_bytes;     //  Kept per stream (>= 2)
    int64_t kill_grace_ms;       //  SIGTERM -> SIGKILL delay (>= 0)
    executor_started_fn *started;  //  May be NULL
    executor_done_fn *done;      //  Required
    const char *group_dir;       //  Running programs' process groups are
                                 //  recorded here (orphans.h), or NULL
} executor_config_t;

//  One task to run. Everything is copied at submit, except ARG, which the
//  executor hands back in every callback and frees with ARG_FREE.
typedef struct {
    const char *job;             //  Job id: one task per job at a time
    uint32_t step;               //  Order within the job
    uint32_t attempt;            //  Which attempt it is (0: not said), for
                                 //  executor_cancel_attempt
    bool parallel;               //  May run alongside the job's other tasks
    int64_t timeout_ms;          //  0 = no timeout
    const char *path;            //  Program: absolute path
    char *const *argv;           //  Program: NULL-terminated argv
    const char *env;             //  Program: one extra "K=V", or NULL
    executor_child_fn *child;    //  Or a function in a forked child
    executor_inproc_fn *inproc;  //  Or a function in the loop
    void *arg;                   //  Handed to every callback
    executor_free_fn *arg_free;  //  Frees ARG, or NULL
} executor_task_t;

//  Blocks SIGCHLD in the calling thread (and every thread it creates
//  after). Call it first thing in main(). Returns 0 or -1.
int executor_signals_block (void);

//  A new executor on LOOP (which must outlive it). Returns NULL on failure
//  (bad config, no signalfd).
executor_t *executor_new (zloop_t *loop, const executor_config_t *config);

//  Kills every running task's process group with SIGKILL, reaps the
//  children, drops queued tasks (no done calls; ARGs are freed);
//  NULL-safe, nulls *self_p. Destroy it before its loop.
void executor_destroy (executor_t **self_p);

//  Bytes kept per stream by tasks that start from now on (>= 2).
void executor_set_output_cap (executor_t *self, size_t bytes);

//  Queues TASK. It starts from the loop when a slot is free and no earlier
//  task of its job is queued or running. Returns 0, or -1 when the task is
//  malformed (nothing to run) or memory runs out (ARG is not taken then).
int executor_submit (executor_t *self, const executor_task_t *task);

//  The result status STATUS reads as: "success", "timeout", "cancelled"
//  or "failed".
const char *executor_status_name (executor_status_t status);

//  Cancels JOB's tasks: queued ones end CANCELLED at once (from the loop),
//  running ones get SIGTERM, then SIGKILL after the grace. REASON goes into
//  the error text. Returns how many tasks were affected.
int executor_cancel_job (executor_t *self, const char *job,
                         const char *reason);

//  Cancels only JOB's task STEP of ATTEMPT (queued or running), as
//  executor_cancel_job does; the job's other tasks go on. Returns how many
//  tasks were affected (0 or 1).
int executor_cancel_attempt (executor_t *self, const char *job, uint32_t step,
                             uint32_t attempt, const char *reason);

//  Cancels every queued task (running ones go on). Returns how many.
int executor_cancel_queued (executor_t *self, const char *reason);

//  Cancels every task, queued and running. Returns how many.
int executor_cancel_all (executor_t *self, const char *reason);

//  The last complete line the running task with ARG has written to its
//  standard output so far (bounded by output_cap_bytes), into BUF (at
//  most BUF_LEN - 1 bytes, NUL-terminated; "" when none or not running).
//  Returns its length.
size_t executor_last_line (executor_t *self, const void *arg, char *buf,
                           size_t buf_len);

//  The head of a stream of the running task with ARG: the first bytes it
//  wrote to its standard output (STDERR_: error), up to half of
//  output_cap_bytes, which stay in place whatever it writes after them.
//  *DATA_P is lent until the loop next reads the task's pipes; *LEN_P
//  gets its length (0, and NULL, when none or not running).
void executor_head (executor_t *self, const void *arg, bool stderr_,
                    const char **data_p, size_t *len_p);

//  Tasks running now / waiting to start.
size_t executor_running (executor_t *self);
size_t executor_queued (executor_t *self);

//  True when nothing is queued, running, or waiting for its done call.
bool executor_idle (executor_t *self);

//  True when a task of JOB (PARALLEL as in executor_task_t) submitted now
//  would start on the loop's next pass: nothing is queued, a slot is free,
//  and (unless PARALLEL) no task of JOB is running.
bool executor_starts_at_once (executor_t *self, const char *job,
                              bool parallel);

#endif
