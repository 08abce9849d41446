/*  =========================================================================
    test_executor - the task pool, with real child processes

    Every test drives a real zloop until a condition holds or a deadline
    passes (a short repeating check timer ends the loop), never sleeping a
    fixed time. Children are real forks: programs run with execve, test
    functions in forked children.
    =========================================================================
*/
#include <czmq.h>

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../agent/executor.h"
#include "../agent/orphans.h"

#define S_DEADLINE_MS 20000     //  Far beyond what any test needs
#define S_MAX_TASKS 16

//  What one task reported.
typedef struct {
    int index;                  //  Task number in the test
    bool started;               //  started callback seen
    bool done;                  //  done callback seen
    pid_t pid;                  //  From started
    executor_status_t status;   //  From done
    char *output;               //  Taken from the result
    size_t output_len;
    char *error;                //  Taken from the result
    bool truncated;
    size_t output_dropped;      //  From the result
    int32_t exit_code;
} s_record_t;

typedef struct {
    executor_t *executor;
    s_record_t records [S_MAX_TASKS];
    int started_order [S_MAX_TASKS];   //  Task numbers in start order
    int started_count;
    int done_count;
    int running_now;            //  started - done
    int running_max;            //  Highest running_now seen
    size_t pool_max;            //  Highest executor_running () at a start
    int expected;               //  Done calls that end the test
} s_state_t;

typedef struct {
    s_state_t *state;
    int index;
    int64_t number;             //  Child functions' argument
} s_arg_t;

static void
s_started (void *arg, pid_t pid)
{
    s_arg_t *task = (s_arg_t *) arg;
    s_state_t *state = task->state;
    s_record_t *record = &state->records [task->index];
    record->started = true;
    record->pid = pid;
    state->started_order [state->started_count++] = task->index;
    state->running_now++;
    if (state->running_now > state->running_max)
        state->running_max = state->running_now;
    size_t pool = executor_running (state->executor);
    if (pool > state->pool_max)
        state->pool_max = pool;
}

static void
s_done (void *arg, executor_result_t *result)
{
    s_arg_t *task = (s_arg_t *) arg;
    s_state_t *state = task->state;
    s_record_t *record = &state->records [task->index];
    record->done = true;
    record->status = result->status;
    record->output = result->output;
    record->output_len = result->output_len;
    result->output = NULL;
    record->error = result->error;
    result->error = NULL;
    record->truncated = result->truncated;
    record->output_dropped = result->output_dropped;
    record->exit_code = result->exit_code;
    state->done_count++;
    if (record->started)
        state->running_now--;
}

static int
s_check (zloop_t *loop, int timer_id, void *arg)
{
    s_state_t *state = (s_state_t *) arg;
    return state->done_count >= state->expected ? -1 : 0;
}

static int
s_deadline (zloop_t *loop, int timer_id, void *arg)
{
    return -1;
}

//  Runs LOOP until EXPECTED done calls or the deadline.
static void
s_run (zloop_t *loop, s_state_t *state, int expected)
{
    state->expected = expected;
    int check = zloop_timer (loop, 5, 0, s_check, state);
    int deadline = zloop_timer (loop, S_DEADLINE_MS, 1, s_deadline, NULL);
    zloop_start (loop);
    zloop_timer_end (loop, check);
    zloop_timer_end (loop, deadline);
    assert_int_equal (state->done_count, expected);
}

static int
s_check_started (zloop_t *loop, int timer_id, void *arg)
{
    return ((s_record_t *) arg)->started ? -1 : 0;
}

//  Runs LOOP until RECORD's task has started, or the deadline.
static void
s_run_until_started (zloop_t *loop, s_record_t *record)
{
    int check = zloop_timer (loop, 5, 0, s_check_started, record);
    int deadline = zloop_timer (loop, S_DEADLINE_MS, 1, s_deadline, NULL);
    zloop_start (loop);
    zloop_timer_end (loop, check);
    zloop_timer_end (loop, deadline);
    assert_true (record->started);
}

static executor_t *
s_executor (zloop_t *loop, s_state_t *state, uint32_t concurrency,
            size_t cap, int64_t grace_ms)
{
    executor_config_t config = {
        .concurrency = concurrency,
        .output_cap_bytes = cap,
        .kill_grace_ms = grace_ms,
        .started = s_started,
        .done = s_done
    };
    memset (state, 0, sizeof (*state));
    state->executor = executor_new (loop, &config);
    assert_non_null (state->executor);
    return state->executor;
}

static void
s_cleanup (s_state_t *state)
{
    for (int index = 0; index < S_MAX_TASKS; index++) {
        free (state->records [index].output);
        free (state->records [index].error);
    }
    executor_destroy (&state->executor);
}

//  No child of ours is left unreaped.
static void
s_assert_no_zombies (void)
{
    int status;
    pid_t pid = waitpid (-1, &status, WNOHANG);
    assert_true (pid == -1 || pid == 0);
    if (pid == -1)
        assert_int_equal (errno, ECHILD);
}

static s_arg_t *
s_arg (s_state_t *state, int index, int64_t number)
{
    s_arg_t *arg = (s_arg_t *) calloc (1, sizeof (s_arg_t));
    assert_non_null (arg);
    arg->state = state;
    arg->index = index;
    arg->number = number;
    return arg;
}

static void
s_submit_child (s_state_t *state, int index, const char *job, uint32_t step,
                executor_child_fn *child, int64_t number, int64_t timeout_ms)
{
    executor_task_t task = {
        .job = job, .step = step, .timeout_ms = timeout_ms, .child = child,
        .arg = s_arg (state, index, number), .arg_free = free
    };
    assert_int_equal (executor_submit (state->executor, &task), 0);
}

static void
s_submit_program (s_state_t *state, int index, const char *job,
                  const char *path, char *const *argv, const char *env)
{
    executor_task_t task = {
        .job = job, .path = path, .argv = argv, .env = env,
        .arg = s_arg (state, index, 0), .arg_free = free
    };
    assert_int_equal (executor_submit (state->executor, &task), 0);
}


//  ---------------------------------------------------------------------
//  Child functions: async-signal-safe only

static void
s_write_text (int fd, const char *text)
{
    ssize_t ignored = write (fd, text, strlen (text));
    (void) ignored;
}

static void
s_sleep_ms (int64_t ms)
{
    struct timespec left = { (time_t) (ms / 1000),
                             (long) (ms % 1000) * 1000000 };
    while (nanosleep (&left, &left) == -1 && errno == EINTR)
        ;
}

static int
s_child_both (void *arg)
{
    s_write_text (1, "to stdout\n");
    s_write_text (2, "to stderr\n");
    return 3;
}

static int
s_child_flood (void *arg)
{
    char block [4096];
    memset (block, 'x', sizeof (block));
    int64_t left = ((s_arg_t *) arg)->number;
    while (left > 0) {
        size_t take = left < 4096 ? (size_t) left : 4096;
        ssize_t wrote = write (1, block, take);
        if (wrote <= 0)
            return 1;
        left -= wrote;
    }
    return 0;
}

//  Writes a line, then sleeps NUMBER ms (a task whose output comes before
//  its end).
static int
s_child_line_then_sleep (void *arg)
{
    s_write_text (1, "first line\n");
    s_sleep_ms (((s_arg_t *) arg)->number);
    return 0;
}

static int
s_child_sleep (void *arg)
{
    s_sleep_ms (((s_arg_t *) arg)->number);
    return 0;
}

//  Ignores SIGTERM, starts a grandchild that ignores it too, prints the
//  grandchild's pid and sleeps: only SIGKILL of the whole group ends both.
static int
s_child_ignores_term (void *arg)
{
    struct sigaction ignore;
    memset (&ignore, 0, sizeof (ignore));
    ignore.sa_handler = SIG_IGN;
    sigemptyset (&ignore.sa_mask);
    sigaction (SIGTERM, &ignore, NULL);
    pid_t grandchild = fork ();
    if (grandchild == 0) {
        while (true)
            s_sleep_ms (1000);
    }
    char digits [24], text [32];
    int count = 0, used = 0;
    long value = (long) grandchild;
    do {
        digits [count++] = (char) ('0' + value % 10);
        value /= 10;
    } while (value);
    while (count)
        text [used++] = digits [--count];
    text [used++] = '\n';
    text [used] = 0;
    s_write_text (1, text);
    while (true)
        s_sleep_ms (1000);
    return 0;
}

//  A process that is gone, or a zombie waiting for a parent that is not
//  us, is no longer running.
static bool
s_process_gone (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof (path), "/proc/%d/stat", (int) pid);
    FILE *file = fopen (path, "r");
    if (!file)
        return true;
    char line [512] = "";
    char *ok = fgets (line, sizeof (line), file);
    fclose (file);
    const char *close_paren = ok ? strrchr (line, ')') : NULL;
    return !close_paren || close_paren [2] == 'Z' || close_paren [2] == 'X';
}


//  ---------------------------------------------------------------------
//  Tests

static void
test_executor_output_captured (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 2, 65536, 1000);
    char *echo_argv [] = { "echo", "hello", "world", NULL };
    s_submit_program (&state, 0, "j-1", "/bin/echo", echo_argv, NULL);
    s_submit_child (&state, 1, "j-2", 0, s_child_both, 0, 0);
    s_run (loop, &state, 2);

    s_record_t *echo = &state.records [0];
    assert_int_equal (echo->status, EXECUTOR_SUCCESS);
    assert_int_equal (echo->exit_code, 0);
    assert_string_equal (echo->output, "hello world\n");
    assert_string_equal (echo->error, "");
    assert_false (echo->truncated);
    assert_true (echo->pid > 0);

    s_record_t *both = &state.records [1];
    assert_int_equal (both->status, EXECUTOR_FAILED);
    assert_int_equal (both->exit_code, 3);
    assert_string_equal (both->output, "to stdout\n");
    assert_string_equal (both->error, "to stderr\n");
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

//  A program starts with no signal blocked or ignored, whatever the agent
//  has (SIGPIPE ignored, SIGHUP under nohup, SIGCHLD blocked). Signals 32
//  and 33 are glibc's own, which it lets no one change: a program gets
//  them as the agent got them.
static void
test_executor_program_signals_clean (void **unused)
{
    struct sigaction ignored, old_hup, old_pipe;
    memset (&ignored, 0, sizeof ignored);
    ignored.sa_handler = SIG_IGN;
    sigemptyset (&ignored.sa_mask);
    assert_int_equal (sigaction (SIGHUP, &ignored, &old_hup), 0);
    assert_int_equal (sigaction (SIGPIPE, &ignored, &old_pipe), 0);
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    char *grep_argv [] = { "grep", "-E", "^Sig(Blk|Ign)",
                           "/proc/self/status", NULL };
    s_submit_program (&state, 0, "j-1", "/bin/grep", grep_argv, NULL);
    s_run (loop, &state, 1);
    assert_int_equal (state.records [0].status, EXECUTOR_SUCCESS);
    unsigned long long blocked = 1, ignored_set = 1;
    assert_int_equal (sscanf (state.records [0].output,
                              "SigBlk: %llx SigIgn: %llx", &blocked,
                              &ignored_set), 2);
    unsigned long long glibc_own = (1ULL << (32 - 1)) | (1ULL << (33 - 1));
    assert_int_equal (blocked & ~glibc_own, 0);
    assert_int_equal (ignored_set & ~glibc_own, 0);
    s_cleanup (&state);
    zloop_destroy (&loop);
    sigaction (SIGHUP, &old_hup, NULL);
    sigaction (SIGPIPE, &old_pipe, NULL);
    s_assert_no_zombies ();
}

static void
test_executor_environment_clean (void **unused)
{
    setenv ("GRID_FAKE_LOG", "/tmp/fake.log", 1);
    setenv ("GRID_SECRET_TOKEN", "must-not-leak", 1);
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    char *env_argv [] = { "env", NULL };
    s_submit_program (&state, 0, "j-1", "/usr/bin/env", env_argv,
                      "DEBIAN_FRONTEND=noninteractive");
    s_run (loop, &state, 1);
    const char *output = state.records [0].output;
    assert_non_null (strstr (output, "PATH=/usr/local/sbin:/usr/local/bin:"
                                     "/usr/sbin:/usr/bin:/sbin:/bin\n"));
    assert_non_null (strstr (output, "LANG=C\n"));
    assert_non_null (strstr (output, "DEBIAN_FRONTEND=noninteractive\n"));
    assert_non_null (strstr (output, "GRID_FAKE_LOG=/tmp/fake.log\n"));
    assert_null (strstr (output, "GRID_SECRET_TOKEN"));
    //  Exactly those four lines
    int lines = 0;
    for (const char *cursor = output; *cursor; cursor++)
        lines += *cursor == '\n';
    assert_int_equal (lines, 4);
    s_cleanup (&state);
    zloop_destroy (&loop);
    unsetenv ("GRID_FAKE_LOG");
    unsetenv ("GRID_SECRET_TOKEN");
    s_assert_no_zombies ();
}

static void
test_executor_stdin_is_devnull (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    char *cat_argv [] = { "cat", NULL };
    s_submit_program (&state, 0, "j-1", "/bin/cat", cat_argv, NULL);
    s_run (loop, &state, 1);
    assert_int_equal (state.records [0].status, EXECUTOR_SUCCESS);
    assert_string_equal (state.records [0].output, "");
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
test_executor_cap_truncates (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 1000, 1000);
    s_submit_child (&state, 0, "j-1", 0, s_child_flood, 300000, 0);
    s_submit_child (&state, 1, "j-2", 0, s_child_flood, 1000, 0);
    s_run (loop, &state, 2);
    s_record_t *big = &state.records [0];
    assert_int_equal (big->status, EXECUTOR_SUCCESS);
    assert_int_equal (big->output_len, 1000);
    assert_int_equal (strlen (big->output), 1000);
    assert_true (big->truncated);
    s_record_t *exact = &state.records [1];
    assert_int_equal (exact->output_len, 1000);
    assert_false (exact->truncated);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

//  Writes NUMBER bytes, byte I being I % 251, in odd-sized writes.
static int
s_child_counter (void *arg)
{
    char block [777];
    int64_t total = ((s_arg_t *) arg)->number;
    int64_t at = 0;
    while (at < total) {
        size_t take = total - at < (int64_t) sizeof block
                    ? (size_t) (total - at) : sizeof block;
        for (size_t index = 0; index < take; index++)
            block [index] = (char) ((at + (int64_t) index) % 251);
        ssize_t wrote = write (1, block, take);
        if (wrote <= 0)
            return 1;
        at += wrote;
    }
    return 0;
}

//  Past the cap the first half and the last half are kept, in order, and
//  the result says how much was dropped between them; a new cap applies
//  to the tasks that start after it.
static void
test_executor_cap_keeps_head_and_tail (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 1000, 1000);
    s_submit_child (&state, 0, "j-1", 0, s_child_counter, 300001, 0);
    s_run (loop, &state, 1);
    s_record_t *big = &state.records [0];
    assert_int_equal (big->output_len, 1000);
    assert_int_equal (big->output_dropped, 299001);
    assert_true (big->truncated);
    for (size_t index = 0; index < 500; index++)
        assert_int_equal ((uint8_t) big->output [index], index % 251);
    for (size_t index = 0; index < 500; index++)
        assert_int_equal ((uint8_t) big->output [500 + index],
                          (300001 - 500 + index) % 251);
    executor_set_output_cap (state.executor, 101);
    s_submit_child (&state, 1, "j-2", 0, s_child_counter, 5000, 0);
    s_run (loop, &state, 2);
    s_record_t *small = &state.records [1];
    assert_int_equal (small->output_len, 101);
    assert_int_equal (small->output_dropped, 4899);
    assert_int_equal ((uint8_t) small->output [49], 49);
    assert_int_equal ((uint8_t) small->output [50], (5000 - 51) % 251);
    assert_int_equal ((uint8_t) small->output [100], 4999 % 251);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

//  What a task has written so far is there while it runs (its head);
//  nothing for a task that does not run.
typedef struct {
    executor_t *executor;
    void *arg;
} s_head_wait_t;

static int
s_check_head (zloop_t *loop, int timer_id, void *arg)
{
    s_head_wait_t *wait = (s_head_wait_t *) arg;
    const char *data = NULL;
    size_t len = 0;
    executor_head (wait->executor, wait->arg, false, &data, &len);
    return len >= 11 ? -1 : 0;
}

static void
test_executor_head_while_running (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 1000, 1000);
    s_arg_t *arg = s_arg (&state, 0, 10000);
    executor_task_t task = {
        .job = "j-1", .step = 0, .child = s_child_line_then_sleep,
        .arg = arg, .arg_free = free
    };
    assert_int_equal (executor_submit (state.executor, &task), 0);
    s_head_wait_t wait = { state.executor, arg };
    int check = zloop_timer (loop, 5, 0, s_check_head, &wait);
    int deadline = zloop_timer (loop, S_DEADLINE_MS, 1, s_deadline, NULL);
    zloop_start (loop);
    zloop_timer_end (loop, check);
    zloop_timer_end (loop, deadline);
    const char *data = NULL;
    size_t len = 0;
    executor_head (state.executor, arg, false, &data, &len);
    assert_int_equal (len, 11);
    assert_memory_equal (data, "first line\n", 11);
    executor_head (state.executor, arg, true, &data, &len);
    assert_int_equal (len, 0);
    executor_head (state.executor, &state, false, &data, &len);
    assert_int_equal (len, 0);
    assert_null (data);
    executor_cancel_job (state.executor, "j-1", "seen");
    s_run (loop, &state, 1);
    assert_int_equal (state.records [0].status, EXECUTOR_CANCELLED);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
test_executor_timeout_kills_group (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 200);
    s_submit_child (&state, 0, "j-1", 0, s_child_ignores_term, 0, 300);
    s_run (loop, &state, 1);
    s_record_t *record = &state.records [0];
    assert_int_equal (record->status, EXECUTOR_TIMEOUT);
    assert_int_equal (record->exit_code, -1);
    assert_non_null (strstr (record->error, "timed out after 300 ms"));
    pid_t grandchild = (pid_t) atoi (record->output);
    assert_true (grandchild > 0);
    //  The leader was reaped by the executor
    assert_int_equal (kill (record->pid, 0), -1);
    //  The grandchild was killed with the group (it may linger briefly as
    //  a zombie of its new parent)
    int64_t deadline = zclock_mono () + S_DEADLINE_MS;
    while (!s_process_gone (grandchild) && zclock_mono () < deadline)
        zclock_sleep (10);
    assert_true (s_process_gone (grandchild));
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

//  With a group dir, each running task's process group is on record
//  there (orphans.h) until the task is over; a record that cannot be
//  written does not keep the task from running.
static void
test_executor_groups_recorded (void **unused)
{
    char dir [] = "/tmp/test-executor-XXXXXX";
    assert_non_null (mkdtemp (dir));
    zloop_t *loop = zloop_new ();
    s_state_t state;
    memset (&state, 0, sizeof (state));
    executor_config_t config = {
        .concurrency = 1, .output_cap_bytes = 65536, .kill_grace_ms = 1000,
        .started = s_started, .done = s_done, .group_dir = dir
    };
    state.executor = executor_new (loop, &config);
    assert_non_null (state.executor);
    s_submit_child (&state, 0, "j-1", 0, s_child_sleep, 60000, 0);
    s_run_until_started (loop, &state.records [0]);
    char path [256];
    snprintf (path, sizeof (path), "%s/%d", dir, (int) state.records [0].pid);
    assert_int_equal (access (path, F_OK), 0);
    executor_cancel_job (state.executor, "j-1", "done looking");
    s_run (loop, &state, 1);
    assert_int_equal (access (path, F_OK), -1);
    s_cleanup (&state);

    //  A program's child writes its record itself before execve: the
    //  boot id and its start time, as the agent would have
    memset (&state, 0, sizeof (state));
    state.executor = executor_new (loop, &config);
    assert_non_null (state.executor);
    char *sleep_argv [] = { "/bin/sleep", "60", NULL };
    s_submit_program (&state, 0, "j-3", "/bin/sleep", sleep_argv, NULL);
    s_run_until_started (loop, &state.records [0]);
    pid_t pid = state.records [0].pid;
    snprintf (path, sizeof (path), "%s/%d", dir, (int) pid);
    FILE *file = fopen (path, "r");
    assert_non_null (file);
    char line [128] = "";
    assert_non_null (fgets (line, sizeof line, file));
    fclose (file);
    pid_t pgrp = 0;
    uint64_t start = 0;
    assert_int_equal (orphans_proc_stat (pid, &pgrp, NULL, &start), 0);
    assert_int_equal (pgrp, pid);
    char expected [128];
    snprintf (expected, sizeof expected, "%s %llu\n", orphans_boot_id (),
              (unsigned long long) start);
    assert_string_equal (line, expected);
    executor_cancel_job (state.executor, "j-3", "done looking");
    s_run (loop, &state, 1);
    assert_int_equal (state.records [0].status, EXECUTOR_CANCELLED);
    assert_int_equal (access (path, F_OK), -1);
    s_cleanup (&state);
    assert_int_equal (rmdir (dir), 0);

    //  The directory is gone (as good as a full disk): the task runs
    //  unrecorded all the same
    memset (&state, 0, sizeof (state));
    state.executor = executor_new (loop, &config);
    assert_non_null (state.executor);
    s_submit_child (&state, 0, "j-2", 0, s_child_sleep, 0, 0);
    char *echo_argv [] = { "/bin/echo", "unrecorded", NULL };
    s_submit_program (&state, 1, "j-4", "/bin/echo", echo_argv, NULL);
    s_run (loop, &state, 2);
    assert_int_equal (state.records [0].status, EXECUTOR_SUCCESS);
    assert_int_equal (state.records [1].status, EXECUTOR_SUCCESS);
    assert_string_equal (state.records [1].output, "unrecorded\n");
    assert_int_equal (access (dir, F_OK), -1);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
test_executor_cancel_stops (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    s_submit_child (&state, 0, "j-1", 0, s_child_sleep, 60000, 0);
    s_submit_child (&state, 1, "j-1", 1, s_child_sleep, 60000, 0);
    s_submit_child (&state, 2, "j-2", 0, s_child_sleep, 0, 0);
    //  Run until the first is running, then cancel its job
    s_run_until_started (loop, &state.records [0]);
    assert_int_equal (executor_cancel_job (state.executor, "j-1",
                                           "operator said so"), 2);
    s_run (loop, &state, 3);
    assert_int_equal (state.records [0].status, EXECUTOR_CANCELLED);
    assert_non_null (strstr (state.records [0].error,
                             "cancelled: operator said so"));
    assert_int_equal (state.records [1].status, EXECUTOR_CANCELLED);
    assert_false (state.records [1].started);
    assert_int_equal (state.records [2].status, EXECUTOR_SUCCESS);
    assert_int_equal (kill (state.records [0].pid, 0), -1);
    assert_true (executor_idle (state.executor));
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

//  A cancel of one attempt stops that task only: the job's next step runs
//  after it, and another attempt number matches nothing.
static void
test_executor_cancel_attempt_only (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    s_submit_child (&state, 0, "j-1", 0, s_child_sleep, 60000, 0);
    s_submit_child (&state, 1, "j-1", 1, s_child_sleep, 50, 0);
    s_run_until_started (loop, &state.records [0]);
    assert_int_equal (executor_cancel_attempt (state.executor, "j-1", 0, 5,
                                               "reclaimed"), 0);
    assert_int_equal (executor_cancel_attempt (state.executor, "j-1", 0, 0,
                                               "reclaimed"), 1);
    s_run (loop, &state, 2);
    assert_int_equal (state.records [0].status, EXECUTOR_CANCELLED);
    assert_int_equal (state.records [1].status, EXECUTOR_SUCCESS);
    assert_true (executor_idle (state.executor));
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
test_executor_pool_bounded (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 2, 65536, 1000);
    char job [16];
    for (int index = 0; index < 5; index++) {
        snprintf (job, sizeof (job), "j-%d", index);
        s_submit_child (&state, index, job, 0, s_child_sleep, 50, 0);
    }
    assert_int_equal (executor_queued (state.executor), 5);
    s_run (loop, &state, 5);
    assert_true (state.running_max <= 2);
    assert_true (state.pool_max <= 2);
    //  And the pool was used: two ran side by side at some point
    assert_int_equal (state.running_max, 2);
    for (int index = 0; index < 5; index++)
        assert_int_equal (state.records [index].status, EXECUTOR_SUCCESS);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
test_executor_steps_ordered (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 4, 65536, 1000);
    //  Steps of one job arrive out of order; another job runs alongside
    s_submit_child (&state, 0, "j-a", 0, s_child_sleep, 20, 0);
    s_submit_child (&state, 2, "j-a", 2, s_child_sleep, 20, 0);
    s_submit_child (&state, 1, "j-a", 1, s_child_sleep, 20, 0);
    s_submit_child (&state, 3, "j-a", 3, s_child_sleep, 20, 0);
    s_submit_child (&state, 4, "j-b", 0, s_child_sleep, 20, 0);
    s_run (loop, &state, 5);
    int position = 0;
    for (int index = 0; index < state.started_count; index++)
        if (state.started_order [index] != 4)
            assert_int_equal (state.started_order [index], position++);
    assert_int_equal (position, 4);
    //  j-a never had two steps at once; j-b ran beside it
    assert_int_equal (state.running_max, 2);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

//  Steps of a DAG job are marked parallel: they run side by side, up to
//  the pool size, and the rest wait
static void
test_executor_parallel_steps (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 2, 65536, 1000);
    for (int index = 0; index < 3; index++) {
        executor_task_t task = {
            .job = "j-dag", .step = (uint32_t) index, .parallel = true,
            .child = s_child_sleep, .arg = s_arg (&state, index, 50),
            .arg_free = free
        };
        assert_int_equal (executor_submit (state.executor, &task), 0);
    }
    s_run (loop, &state, 3);
    assert_int_equal (state.started_count, 3);
    //  Two at once (the pool), never three
    assert_int_equal (state.running_max, 2);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

//  executor_starts_at_once says whether a task submitted now starts on
//  the next pass: a free slot, nothing queued, no step of its job running
//  (unless parallel).
static void
test_executor_starts_at_once (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 2, 65536, 1000);
    assert_true (executor_starts_at_once (state.executor, "j-a", false));
    s_submit_child (&state, 0, "j-a", 0, s_child_sleep, 300, 0);
    //  Queued, not yet started: whatever comes next waits behind it
    assert_false (executor_starts_at_once (state.executor, "j-b", false));
    s_run_until_started (loop, &state.records [0]);
    //  One slot left: not for j-a's next step, but for a parallel one of
    //  j-a and for another job
    assert_false (executor_starts_at_once (state.executor, "j-a", false));
    assert_true (executor_starts_at_once (state.executor, "j-a", true));
    assert_true (executor_starts_at_once (state.executor, "j-b", false));
    s_submit_child (&state, 1, "j-b", 0, s_child_sleep, 300, 0);
    s_run_until_started (loop, &state.records [1]);
    //  The pool is full
    assert_false (executor_starts_at_once (state.executor, "j-c", true));
    s_run (loop, &state, 2);
    assert_true (executor_starts_at_once (state.executor, "j-a", false));
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
s_inproc_ok (void *arg, executor_result_t *result)
{
    result->status = EXECUTOR_SUCCESS;
    result->exit_code = 0;
    result->output = strdup ("in the loop\n");
}

static void
test_executor_inproc_runs_in_order (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 2, 65536, 1000);
    s_submit_child (&state, 0, "j-a", 0, s_child_sleep, 20, 0);
    executor_task_t task = {
        .job = "j-a", .step = 1, .inproc = s_inproc_ok,
        .arg = s_arg (&state, 1, 0), .arg_free = free
    };
    assert_int_equal (executor_submit (state.executor, &task), 0);
    s_run (loop, &state, 2);
    assert_int_equal (state.started_order [0], 0);
    assert_int_equal (state.started_order [1], 1);
    assert_int_equal (state.records [1].pid, 0);
    assert_string_equal (state.records [1].output, "in the loop\n");
    assert_int_equal (state.records [1].status, EXECUTOR_SUCCESS);
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
test_executor_exec_failure (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    char *argv [] = { "nothing", NULL };
    s_submit_program (&state, 0, "j-1", "/nonexistent/nothing", argv, NULL);
    s_run (loop, &state, 1);
    assert_int_equal (state.records [0].status, EXECUTOR_FAILED);
    assert_int_equal (state.records [0].exit_code, EXECUTOR_EXEC_FAILED);
    assert_non_null (strstr (state.records [0].error, "cannot execute"));
    s_cleanup (&state);
    zloop_destroy (&loop);
    s_assert_no_zombies ();
}

static void
test_executor_submit_refuses_malformed (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    char *argv [] = { "echo", NULL };
    executor_task_t relative = { .job = "j-1", .path = "bin/echo",
                                 .argv = argv };
    assert_int_equal (executor_submit (state.executor, &relative), -1);
    executor_task_t nothing = { .job = "j-1" };
    assert_int_equal (executor_submit (state.executor, &nothing), -1);
    executor_task_t two = { .job = "j-1", .path = "/bin/echo", .argv = argv,
                            .inproc = s_inproc_ok };
    assert_int_equal (executor_submit (state.executor, &two), -1);
    s_cleanup (&state);
    zloop_destroy (&loop);
}

static void
test_executor_destroy_kills_running (void **unused)
{
    zloop_t *loop = zloop_new ();
    s_state_t state;
    s_executor (loop, &state, 1, 65536, 1000);
    s_submit_child (&state, 0, "j-1", 0, s_child_sleep, 60000, 0);
    s_submit_child (&state, 1, "j-1", 1, s_child_sleep, 60000, 0);
    s_run_until_started (loop, &state.records [0]);
    pid_t pid = state.records [0].pid;
    s_cleanup (&state);
    zloop_destroy (&loop);
    assert_int_equal (kill (pid, 0), -1);
    s_assert_no_zombies ();
}

int
main (void)
{
    //  Before any thread exists, so none of them takes SIGCHLD
    executor_signals_block ();
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_executor_output_captured),
        cmocka_unit_test (test_executor_cap_keeps_head_and_tail),
        cmocka_unit_test (test_executor_head_while_running),
        cmocka_unit_test (test_executor_environment_clean),
        cmocka_unit_test (test_executor_program_signals_clean),
        cmocka_unit_test (test_executor_stdin_is_devnull),
        cmocka_unit_test (test_executor_cap_truncates),
        cmocka_unit_test (test_executor_timeout_kills_group),
        cmocka_unit_test (test_executor_cancel_stops),
        cmocka_unit_test (test_executor_cancel_attempt_only),
        cmocka_unit_test (test_executor_groups_recorded),
        cmocka_unit_test (test_executor_pool_bounded),
        cmocka_unit_test (test_executor_steps_ordered),
        cmocka_unit_test (test_executor_parallel_steps),
        cmocka_unit_test (test_executor_starts_at_once),
        cmocka_unit_test (test_executor_inproc_runs_in_order),
        cmocka_unit_test (test_executor_exec_failure),
        cmocka_unit_test (test_executor_submit_refuses_malformed),
        cmocka_unit_test (test_executor_destroy_kills_running),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
