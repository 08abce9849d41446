/*  =========================================================================
    executor - a bounded pool of tasks driven by the agent's zloop

    Life of a task:  submit -> QUEUED -> (pump) RUNNING -> ENDED -> done
    A program or child task is RUNNING from its start until its process is
    reaped and both capture pipes are closed. An in-loop task runs inside
    the pump and is ENDED at once. Cancelled queued tasks go straight to
    ENDED. ENDED tasks get their done call from s_service, which the loop
    reaches through the kick timer or a pipe / signal / timer handler, so
    no callback ever runs inside an executor_ call.

    Timers and pipes find their task by timer id or fd, never through a
    pointer kept by zloop, so a task freed in one loop pass cannot be
    reached from a stale registration in the same pass.
    =========================================================================
*/
#include "executor.h"
#include "orphans.h"
#include "sigsafe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../backends/backend.h"
#include "../proto/log.h"

#define S_READ_CHUNK 65536      //  Bytes per read from a capture pipe
#define S_READS_PER_WAKE 16     //  Reads per pipe per loop pass (fairness)
#define S_DRAIN_READS 256       //  Reads when draining after exit
#define S_FAKE_LOG "GRID_FAKE_LOG"
#define S_LAUNCH_STACK (256 * 1024)  //  Stack of a program's child until execve

typedef enum {
    S_QUEUED,
    S_RUNNING,
    S_ENDED
} s_state_t;

//  A captured stream: the head in DATA until it holds HEAD_CAP bytes,
//  then the newest TAIL_CAP bytes in a ring, so that whatever the stream's
//  length the first and the last bytes are kept.
typedef struct {
    char *data;                 //  Head bytes (NUL-terminated)
    size_t len;                 //  Bytes in the head
    size_t size;                //  Allocated
    size_t head_cap;            //  Most head bytes (cap / 2)
    size_t tail_cap;            //  Most ring bytes (cap - head_cap)
    char *ring;                 //  Tail bytes, a ring of tail_cap
    size_t ring_len;            //  Bytes in the ring
    size_t ring_start;          //  Where its oldest byte is
    size_t total;               //  Bytes the stream wrote in all
} s_buf_t;

typedef struct {
    s_state_t state;            //  Where it is
    char *job;                  //  Job id
    uint32_t step;              //  Order within the job
    uint32_t attempt;           //  The caller's attempt number, 0 = none
    bool parallel;              //  May run alongside its job's other tasks
    int64_t timeout_ms;         //  0 = none
    char *path;                 //  Program path, or NULL
    char **argv;                //  Program argv (owned, NULL-terminated)
    char *env;                  //  Extra "K=V", or NULL
    executor_child_fn *child;   //  Child function, or NULL
    executor_inproc_fn *inproc;  //  In-loop function, or NULL
    void *arg;                  //  Caller's
    executor_free_fn *arg_free;  //  Frees arg
    pid_t pid;                  //  Child, 0 before start
    bool reaped;                //  waitpid collected it
    bool recorded;              //  Its group is in config.group_dir
    int wait_status;            //  From waitpid
    int out_fd;                 //  stdout pipe, -1 when closed
    int err_fd;                 //  stderr pipe, -1 when closed
    s_buf_t out;                //  Captured stdout
    s_buf_t err;                //  Captured stderr
    bool truncated;             //  A stream hit the cap
    int64_t started_ms;         //  Monotonic start
    int timeout_timer;          //  zloop timer id, -1 if none
    int grace_timer;            //  zloop timer id, -1 if none
    bool forced;                //  We ended it (timeout or cancel)
    executor_status_t forced_status;  //  TIMEOUT or CANCELLED
    char *reason;               //  Cancel reason
    executor_result_t result;   //  Filled when ENDED
    void *handle;               //  In the list that holds it now
} s_task_t;

struct _executor_t {
    zloop_t *loop;              //  Not owned
    executor_config_t config;   //  Copy
    zlistx_t *queued;           //  s_task_t, in run order
    zlistx_t *running;          //  s_task_t
    zlistx_t *ended;            //  s_task_t waiting for their done call
    int signal_fd;              //  SIGCHLD signalfd
    int kick_timer;             //  Pending kick timer id, or -1
    char *fake_log;             //  "GRID_FAKE_LOG=..." or NULL
    int max_fd;                 //  Highest fd a child may need to close
    char *launch_stack;         //  Mapped at the first program, or NULL
};

static void s_service (executor_t *self);


//  ---------------------------------------------------------------------
//  Tasks

static void
s_task_destroy (s_task_t **task_p)
{
    s_task_t *task = *task_p;
    if (!task)
        return;
    if (task->arg_free && task->arg)
        task->arg_free (task->arg);
    free (task->job);
    free (task->path);
    for (size_t index = 0; task->argv && task->argv [index]; index++)
        free (task->argv [index]);
    free (task->argv);
    free (task->env);
    free (task->out.data);
    free (task->err.data);
    free (task->out.ring);
    free (task->err.ring);
    free (task->reason);
    free (task->result.output);
    free (task->result.error);
    free (task);
    *task_p = NULL;
}

static s_task_t *
s_task_new (const executor_task_t *spec)
{
    s_task_t *task = (s_task_t *) calloc (1, sizeof (s_task_t));
    if (!task)
        return NULL;
    task->out_fd = -1;
    task->err_fd = -1;
    task->timeout_timer = -1;
    task->grace_timer = -1;
    task->step = spec->step;
    task->attempt = spec->attempt;
    task->parallel = spec->parallel;
    task->timeout_ms = spec->timeout_ms > 0 ? spec->timeout_ms : 0;
    task->child = spec->child;
    task->inproc = spec->inproc;
    task->job = strdup (spec->job);
    bool ok = task->job != NULL;
    if (ok && spec->path) {
        size_t count = 0;
        while (spec->argv [count])
            count++;
        task->path = strdup (spec->path);
        task->argv = (char **) calloc (count + 1, sizeof (char *));
        ok = task->path && task->argv;
        for (size_t index = 0; ok && index < count; index++)
            ok = (task->argv [index] = strdup (spec->argv [index])) != NULL;
    }
    if (ok && spec->env)
        ok = (task->env = strdup (spec->env)) != NULL;
    if (!ok) {
        s_task_destroy (&task);
        return NULL;
    }
    //  Only now: a failed submit leaves ARG with the caller
    task->arg = spec->arg;
    task->arg_free = spec->arg_free;
    return task;
}

//  A task is in one list at a time; its handle makes removal O(1).
static void
s_attach (zlistx_t *list, s_task_t *task)
{
    task->handle = zlistx_add_end (list, task);
}

static void
s_detach (zlistx_t *list, s_task_t *task)
{
    if (task->handle)
        zlistx_detach (list, task->handle);
    task->handle = NULL;
}

//  Sets BUF up to keep CAP bytes (>= 2): half head, half tail.
static void
s_buf_init (s_buf_t *buf, size_t cap)
{
    memset (buf, 0, sizeof *buf);
    buf->head_cap = cap / 2;
    buf->tail_cap = cap - buf->head_cap;
}

//  Appends LEN bytes to BUF: to the head while it has room, then to the
//  ring (which overwrites its oldest bytes); returns true when memory ran
//  out and bytes were lost.
static bool
s_buf_append (s_buf_t *buf, const char *data, size_t len)
{
    buf->total += len;
    size_t room = buf->len < buf->head_cap ? buf->head_cap - buf->len : 0;
    size_t take = len < room ? len : room;
    if (take > 0) {
        if (buf->len + take + 1 > buf->size) {
            size_t size = buf->size ? buf->size : 4096;
            while (size < buf->len + take + 1)
                size *= 2;
            if (size > buf->head_cap + 1)
                size = buf->head_cap + 1;
            char *grown = (char *) realloc (buf->data, size);
            if (!grown)
                return true;
            buf->data = grown;
            buf->size = size;
        }
        memcpy (buf->data + buf->len, data, take);
        buf->len += take;
        buf->data [buf->len] = 0;
        data += take;
        len -= take;
    }
    if (len == 0 || buf->tail_cap == 0)
        return false;
    if (!buf->ring) {
        buf->ring = (char *) malloc (buf->tail_cap);
        if (!buf->ring)
            return true;
    }
    //  Only the last tail_cap bytes of DATA can stay
    if (len > buf->tail_cap) {
        data += len - buf->tail_cap;
        len = buf->tail_cap;
    }
    size_t at = (buf->ring_start + buf->ring_len) % buf->tail_cap;
    for (size_t done = 0; done < len;) {
        size_t run = buf->tail_cap - at < len - done ? buf->tail_cap - at
                                                     : len - done;
        memcpy (buf->ring + at, data + done, run);
        done += run;
        at = (at + run) % buf->tail_cap;
    }
    if (buf->ring_len + len > buf->tail_cap) {
        buf->ring_start = (buf->ring_start + buf->ring_len + len
                           - buf->tail_cap) % buf->tail_cap;
        buf->ring_len = buf->tail_cap;
    }
    else
        buf->ring_len += len;
    return false;
}

//  Head and tail as one string (the head's buffer, grown); *LEN_P gets its
//  length, *DROPPED_P the bytes the stream lost between them.
static char *
s_buf_take (s_buf_t *buf, size_t *len_p, size_t *dropped_p)
{
    size_t len = buf->len + buf->ring_len;
    char *text = (char *) realloc (buf->data, len + 1);
    if (!text) {
        text = buf->data;
        len = buf->len;
    }
    else
    if (buf->ring_len) {
        size_t first = buf->tail_cap - buf->ring_start < buf->ring_len
                           ? buf->tail_cap - buf->ring_start : buf->ring_len;
        memcpy (text + buf->len, buf->ring + buf->ring_start, first);
        memcpy (text + buf->len + first, buf->ring, buf->ring_len - first);
    }
    if (text)
        text [len] = 0;
    *len_p = text ? len : 0;
    *dropped_p = buf->total - *len_p;
    buf->data = NULL;
    buf->len = buf->size = 0;
    return text ? text : strdup ("");
}


//  ---------------------------------------------------------------------
//  Finding tasks

static s_task_t *
s_running_by_fd (executor_t *self, int fd)
{
    s_task_t *task = (s_task_t *) zlistx_first (self->running);
    while (task) {
        if (task->out_fd == fd || task->err_fd == fd)
            return task;
        task = (s_task_t *) zlistx_next (self->running);
    }
    return NULL;
}

static s_task_t *
s_running_by_timer (executor_t *self, int timer_id)
{
    s_task_t *task = (s_task_t *) zlistx_first (self->running);
    while (task) {
        if (task->timeout_timer == timer_id || task->grace_timer == timer_id)
            return task;
        task = (s_task_t *) zlistx_next (self->running);
    }
    return NULL;
}

static bool
s_job_running (executor_t *self, const char *job)
{
    s_task_t *task = (s_task_t *) zlistx_first (self->running);
    while (task) {
        if (strcmp (task->job, job) == 0)
            return true;
        task = (s_task_t *) zlistx_next (self->running);
    }
    return false;
}

static void
s_kick (executor_t *self);


//  ---------------------------------------------------------------------
//  Ending tasks

static void
s_close_pipe (executor_t *self, int *fd)
{
    if (*fd < 0)
        return;
    zmq_pollitem_t item = { NULL, *fd, ZMQ_POLLIN, 0 };
    zloop_poller_end (self->loop, &item);
    close (*fd);
    *fd = -1;
}

//  Reads what FD has now into BUF. Returns 1 at end of file, 0 when it
//  would block (or after MAX_READS reads), -1 on a read error.
static int
s_read_pipe (executor_t *self, s_task_t *task, int fd, s_buf_t *buf,
             int max_reads)
{
    char chunk [S_READ_CHUNK];
    for (int reads = 0; reads < max_reads; reads++) {
        ssize_t got = read (fd, chunk, sizeof (chunk));
        if (got > 0) {
            if (s_buf_append (buf, chunk, (size_t) got))
                task->truncated = true;
            continue;
        }
        if (got == 0)
            return 1;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    }
    return 0;
}

//  "A\nB" (either may be empty) into a fresh string; *LEN_P gets its
//  length.
static char *
s_join (const char *first, size_t first_len, const char *second,
        size_t *len_p)
{
    size_t second_len = second ? strlen (second) : 0;
    bool newline = first_len > 0 && second_len > 0
                && first [first_len - 1] != '\n';
    size_t len = first_len + (newline ? 1 : 0) + second_len;
    char *text = (char *) malloc (len + 1);
    if (!text) {
        *len_p = 0;
        return strdup ("");
    }
    if (first_len)
        memcpy (text, first, first_len);
    if (newline)
        text [first_len] = '\n';
    if (second_len)
        memcpy (text + first_len + (newline ? 1 : 0), second, second_len);
    text [len] = 0;
    *len_p = len;
    return text;
}

//  Moves a finished process task from running to ended and fills its
//  result.
static void
s_process_ended (executor_t *self, s_task_t *task)
{
    if (task->timeout_timer >= 0)
        zloop_timer_end (self->loop, task->timeout_timer);
    if (task->grace_timer >= 0)
        zloop_timer_end (self->loop, task->grace_timer);
    task->timeout_timer = task->grace_timer = -1;

    executor_result_t *result = &task->result;
    int status = task->wait_status;
    char sentence [256] = "";
    result->exit_code = WIFEXITED (status) ? WEXITSTATUS (status) : -1;
    result->term_signal = WIFSIGNALED (status) ? WTERMSIG (status) : 0;
    if (task->forced) {
        result->status = task->forced_status;
        if (task->forced_status == EXECUTOR_TIMEOUT)
            snprintf (sentence, sizeof (sentence), "timed out after %lld ms",
                      (long long) task->timeout_ms);
        else
            snprintf (sentence, sizeof (sentence), "cancelled: %s",
                      task->reason ? task->reason : "on request");
    }
    else
    if (WIFSIGNALED (status)) {
        result->status = EXECUTOR_FAILED;
        snprintf (sentence, sizeof (sentence), "killed by signal %d (%s)",
                  result->term_signal, strsignal (result->term_signal));
    }
    else
    if (result->exit_code != 0) {
        result->status = EXECUTOR_FAILED;
        if (task->err.len == 0)
            snprintf (sentence, sizeof (sentence), "exit code %d",
                      result->exit_code);
    }
    else
        result->status = EXECUTOR_SUCCESS;

    result->output = s_buf_take (&task->out, &result->output_len,
                                 &result->output_dropped);
    size_t err_len = 0;
    char *err = s_buf_take (&task->err, &err_len, &result->error_dropped);
    result->error = s_join (err, err_len, sentence, &result->error_len);
    free (err);
    result->truncated = task->truncated || result->output_dropped
                        || result->error_dropped;
    result->duration_ms = (uint64_t) (zclock_mono () - task->started_ms);

    s_detach (self->running, task);
    task->state = S_ENDED;
    s_attach (self->ended, task);
}

//  A task is over when its process is reaped and both pipes are closed.
static void
s_check_done (executor_t *self, s_task_t *task)
{
    if (task->reaped && task->out_fd < 0 && task->err_fd < 0)
        s_process_ended (self, task);
}

//  The leader is gone: kill what it left in its group (nothing may outlive
//  its task, and a stray holding a pipe would keep the task open), read
//  what is left in the pipes, close them.
static void
s_after_exit (executor_t *self, s_task_t *task)
{
    kill (-task->pid, SIGKILL);
    if (task->recorded) {
        orphans_forget (self->config.group_dir, task->pid);
        task->recorded = false;
    }
    if (task->out_fd >= 0) {
        s_read_pipe (self, task, task->out_fd, &task->out, S_DRAIN_READS);
        s_close_pipe (self, &task->out_fd);
    }
    if (task->err_fd >= 0) {
        s_read_pipe (self, task, task->err_fd, &task->err, S_DRAIN_READS);
        s_close_pipe (self, &task->err_fd);
    }
    s_check_done (self, task);
}

//  Reaps every running child that has exited.
static void
s_reap (executor_t *self)
{
    s_task_t *task = (s_task_t *) zlistx_first (self->running);
    while (task) {
        s_task_t *next = (s_task_t *) zlistx_next (self->running);
        if (task->pid > 0 && !task->reaped) {
            int status = 0;
            pid_t got = waitpid (task->pid, &status, WNOHANG);
            if (got == task->pid) {
                task->reaped = true;
                task->wait_status = status;
                s_after_exit (self, task);
            }
        }
        task = next;
    }
}

static int
s_signal_ready (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    executor_t *self = (executor_t *) arg;
    struct signalfd_siginfo info;
    while (read (self->signal_fd, &info, sizeof (info)) == sizeof (info))
        ;
    s_reap (self);
    s_service (self);
    return 0;
}

static int
s_pipe_ready (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    executor_t *self = (executor_t *) arg;
    int fd = item->fd;
    s_task_t *task = s_running_by_fd (self, fd);
    if (!task) {
        //  Not ours any more: never leave a dead fd in the poll set
        zmq_pollitem_t stale = { NULL, fd, ZMQ_POLLIN, 0 };
        zloop_poller_end (loop, &stale);
        return 0;
    }
    bool is_out = fd == task->out_fd;
    int rc = s_read_pipe (self, task, fd, is_out ? &task->out : &task->err,
                          S_READS_PER_WAKE);
    if (rc != 0) {
        s_close_pipe (self, is_out ? &task->out_fd : &task->err_fd);
        //  Both pipes at end of file usually means the child exited; look
        //  now rather than wait for the signal
        if (task->out_fd < 0 && task->err_fd < 0 && !task->reaped)
            s_reap (self);
        else
            s_check_done (self, task);
        s_service (self);
    }
    return 0;
}

//  Sends SIG to the task's process group.
static void
s_signal_group (s_task_t *task, int sig)
{
    if (task->pid <= 0 || task->reaped)
        return;
    if (kill (-task->pid, sig) && errno == ESRCH)
        kill (task->pid, sig);
}

static int
s_grace_expired (zloop_t *loop, int timer_id, void *arg)
{
    executor_t *self = (executor_t *) arg;
    s_task_t *task = s_running_by_timer (self, timer_id);
    if (task && task->grace_timer == timer_id) {
        task->grace_timer = -1;
        s_signal_group (task, SIGKILL);
    }
    return 0;
}

//  SIGTERM now, SIGKILL after the grace unless the process is gone.
static void
s_terminate (executor_t *self, s_task_t *task)
{
    if (task->reaped || task->grace_timer >= 0)
        return;
    s_signal_group (task, SIGTERM);
    if (self->config.kill_grace_ms <= 0)
        s_signal_group (task, SIGKILL);
    else
        task->grace_timer = zloop_timer (self->loop,
                                         (size_t) self->config.kill_grace_ms,
                                         1, s_grace_expired, self);
}

static int
s_timeout_expired (zloop_t *loop, int timer_id, void *arg)
{
    executor_t *self = (executor_t *) arg;
    s_task_t *task = s_running_by_timer (self, timer_id);
    if (task && task->timeout_timer == timer_id) {
        task->timeout_timer = -1;
        if (!task->forced) {
            task->forced = true;
            task->forced_status = EXECUTOR_TIMEOUT;
        }
        s_terminate (self, task);
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  Starting tasks

static void
s_child_say (const char *text)
{
    ssize_t ignored = write (STDERR_FILENO, text, strlen (text));
    (void) ignored;
}

//  A child function's child, after fork: only async-signal-safe calls
//  from here on.
static void
s_child_run (executor_t *self, s_task_t *task, pid_t parent, int null_fd,
             int out_fd, int err_fd, int go_fd)
{
    setpgid (0, 0);
    //  Should the agent die (even by SIGKILL), its task dies with it
    //  rather than run on behind the "interrupted" result the restarted
    //  agent reports. The parent may already be gone: then stop here.
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != parent)
        _exit (EXECUTOR_EXEC_FAILED);
    //  Nothing runs before the group is on record (orphans.h): a byte
    //  means go; end of file means the agent could not record it, or died
    if (go_fd >= 0) {
        char go = 0;
        ssize_t got;
        while ((got = read (go_fd, &go, 1)) < 0 && errno == EINTR)
            ;
        if (got != 1)
            _exit (EXECUTOR_EXEC_FAILED);
    }
    //  Leave nothing of the agent's signal setup to the program
    struct sigaction action;
    memset (&action, 0, sizeof (action));
    action.sa_handler = SIG_DFL;
    sigemptyset (&action.sa_mask);
    int reset [] = { SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGQUIT };
    for (size_t index = 0; index < sizeof (reset) / sizeof (reset [0]);
         index++)
        sigaction (reset [index], &action, NULL);
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);

    if (dup2 (null_fd, STDIN_FILENO) < 0 || dup2 (out_fd, STDOUT_FILENO) < 0
    ||  dup2 (err_fd, STDERR_FILENO) < 0)
        _exit (EXECUTOR_EXEC_FAILED);
    if (syscall (SYS_close_range, 3U, ~0U, 0U) != 0)
        for (int fd = 3; fd <= self->max_fd; fd++)
            close (fd);

    _exit (task->child (task->arg));
}

//  What a program's child gets from the agent, and tells it back: the
//  child shares the agent's memory until it calls execve (or exits),
//  while the thread that started it waits.
typedef struct {
    executor_t *self;
    s_task_t *task;
    pid_t parent;
    int null_fd, out_fd, err_fd;
    char *const *envp;
    const char *group_dir;      //  Where to record its group, or NULL
    const char *boot;           //  orphans_boot_id ()
    bool recorded;              //  Its group is on record
    int record_errno;           //  Why not, when it is not
} s_launch_t;

//  A program's child: started with CLONE_VM | CLONE_VFORK (no copy of
//  the agent's page tables, no copy-on-write faults after), so it may run
//  only async-signal-safe calls, allocate nothing and write only its
//  stack and LAUNCH. It records its own group before execve: nothing runs
//  unrecorded should the agent die, and the agent waits for no go byte.
//  Not instrumented: a sanitizer's no-return hook would see a stack it
//  does not know.
__attribute__((no_sanitize_address))
static int
s_program_child (void *arg)
{
    s_launch_t *launch = (s_launch_t *) arg;
    setpgid (0, 0);
    prctl (PR_SET_PDEATHSIG, SIGKILL);
    if (getppid () != launch->parent)
        _exit (EXECUTOR_EXEC_FAILED);
    if (launch->group_dir) {
        if (orphans_record_self (launch->group_dir, launch->boot) == 0)
            launch->recorded = true;
        else
            launch->record_errno = errno;
    }
    //  Every signal the agent catches or ignores back to its default: a
    //  handler of the agent's must never run in this child, which shares
    //  its memory (all are blocked until here), and the program gets
    //  nothing of the agent's signal setup
    struct sigaction action;
    memset (&action, 0, sizeof (action));
    action.sa_handler = SIG_DFL;
    sigemptyset (&action.sa_mask);
    for (int sig = 1; sig < _NSIG; sig++) {
        struct sigaction current;
        if (sig == SIGKILL || sig == SIGSTOP
        ||  sigaction (sig, NULL, &current) != 0)
            continue;
        if (current.sa_handler != SIG_DFL)
            sigaction (sig, &action, NULL);
    }
    sigset_t none;
    sigemptyset (&none);
    sigprocmask (SIG_SETMASK, &none, NULL);

    if (dup2 (launch->null_fd, STDIN_FILENO) < 0
    ||  dup2 (launch->out_fd, STDOUT_FILENO) < 0
    ||  dup2 (launch->err_fd, STDERR_FILENO) < 0)
        _exit (EXECUTOR_EXEC_FAILED);
    if (syscall (SYS_close_range, 3U, ~0U, 0U) != 0)
        for (int fd = 3; fd <= launch->self->max_fd; fd++)
            close (fd);
    execve (launch->task->path, launch->task->argv, launch->envp);
    char number [24];
    s_child_say ("cannot execute ");
    s_child_say (launch->task->path);
    s_child_say (": errno ");
    s_child_say (sigsafe_decimal (errno, number));
    s_child_say ("\n");
    _exit (EXECUTOR_EXEC_FAILED);
}

//  Starts TASK's program in a child that shares the agent's memory until
//  execve (s_program_child), the calling thread waiting meanwhile with
//  every signal blocked. Returns its pid, or -1 (errno).
static pid_t
s_launch_program (executor_t *self, s_task_t *task, s_launch_t *launch)
{
    if (!self->launch_stack) {
        void *stack = mmap (NULL, S_LAUNCH_STACK, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED)
            return -1;
        //  A guard page at the end it grows towards
        mprotect (stack, 4096, PROT_NONE);
        self->launch_stack = (char *) stack;
    }
    sigset_t all, saved;
    sigfillset (&all);
    pthread_sigmask (SIG_SETMASK, &all, &saved);
    pid_t pid = clone (s_program_child, self->launch_stack + S_LAUNCH_STACK,
                       CLONE_VM | CLONE_VFORK | SIGCHLD, launch);
    int error = errno;
    pthread_sigmask (SIG_SETMASK, &saved, NULL);
    errno = error;
    return pid;
}

//  Ends a task that could not start.
static void
s_start_failed (executor_t *self, s_task_t *task, const char *what)
{
    char text [256];
    snprintf (text, sizeof (text), "cannot start: %s: %s", what,
              strerror (errno));
    task->result.status = EXECUTOR_FAILED;
    task->result.exit_code = -1;
    task->result.output = strdup ("");
    task->result.error = strdup (text);
    task->result.error_len = task->result.error ? strlen (text) : 0;
    task->state = S_ENDED;
    s_attach (self->ended, task);
}

static void
s_start_process (executor_t *self, s_task_t *task)
{
    int out_pipe [2] = { -1, -1 }, err_pipe [2] = { -1, -1 };
    int go_pipe [2] = { -1, -1 };
    //  A program records its own group (s_program_child); a child
    //  function waits for the agent's go once its group is on record
    bool program = task->path != NULL;
    int null_fd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || pipe2 (out_pipe, O_CLOEXEC)
    ||  pipe2 (err_pipe, O_CLOEXEC)
    ||  (self->config.group_dir && !program
         && pipe2 (go_pipe, O_CLOEXEC))) {
        int saved = errno;
        for (int index = 0; index < 2; index++) {
            if (out_pipe [index] >= 0)
                close (out_pipe [index]);
            if (err_pipe [index] >= 0)
                close (err_pipe [index]);
            if (go_pipe [index] >= 0)
                close (go_pipe [index]);
        }
        if (null_fd >= 0)
            close (null_fd);
        errno = saved;
        s_start_failed (self, task, "pipe");
        return;
    }
    //  The environment is built before fork: the child may not allocate
    char *envp [6];
    size_t envc = 0;
    envp [envc++] = (char *) "PATH=" BACKEND_SAFE_PATH;
    envp [envc++] = (char *) "LANG=C";
    if (task->env)
        envp [envc++] = task->env;
    if (self->fake_log)
        envp [envc++] = self->fake_log;
    envp [envc] = NULL;

    task->started_ms = zclock_mono ();
    s_buf_init (&task->out, self->config.output_cap_bytes);
    s_buf_init (&task->err, self->config.output_cap_bytes);
    pid_t parent = getpid ();
    s_launch_t launch = {
        .self = self, .task = task, .parent = parent, .null_fd = null_fd,
        .out_fd = out_pipe [1], .err_fd = err_pipe [1], .envp = envp,
        .group_dir = self->config.group_dir,
        .boot = self->config.group_dir ? orphans_boot_id () : NULL
    };
    pid_t pid = program ? s_launch_program (self, task, &launch) : fork ();
    if (pid == 0)
        s_child_run (self, task, parent, null_fd, out_pipe [1], err_pipe [1],
                     go_pipe [0]);
    int saved = errno;
    close (null_fd);
    close (out_pipe [1]);
    close (err_pipe [1]);
    if (go_pipe [0] >= 0)
        close (go_pipe [0]);
    if (pid < 0) {
        close (out_pipe [0]);
        close (err_pipe [0]);
        if (go_pipe [1] >= 0)
            close (go_pipe [1]);
        errno = saved;
        s_start_failed (self, task, "fork");
        return;
    }
    if (program && launch.recorded)
        task->recorded = true;
    else
    if (program && self->config.group_dir && launch.record_errno)
        log_warn ("cannot record the process group of a task of job %s "
                  "in %s (%s): should the agent die, what the task "
                  "starts is not stopped at its next start",
                  task->job, self->config.group_dir,
                  strerror (launch.record_errno));
    //  Both sides set a child function's group, so it exists before
    //  either needs it (a program's child did before execve)
    if (!program)
        setpgid (pid, pid);
    if (go_pipe [1] >= 0) {
        //  On record first, then go. A record that cannot be written (a
        //  full disk) does not keep the task from running: it runs
        //  unrecorded, and says so in the log.
        if (orphans_record (self->config.group_dir, pid) == 0)
            task->recorded = true;
        else
            log_warn ("cannot record the process group of a task of job %s "
                      "in %s (%s): should the agent die, what the task "
                      "starts is not stopped at its next start",
                      task->job, self->config.group_dir, strerror (errno));
        ssize_t wrote;
        while ((wrote = write (go_pipe [1], "g", 1)) < 0 && errno == EINTR)
            ;
        close (go_pipe [1]);
    }
    task->pid = pid;
    task->out_fd = out_pipe [0];
    task->err_fd = err_pipe [0];
    fcntl (task->out_fd, F_SETFL, fcntl (task->out_fd, F_GETFL) | O_NONBLOCK);
    fcntl (task->err_fd, F_SETFL, fcntl (task->err_fd, F_GETFL) | O_NONBLOCK);
    zmq_pollitem_t out_item = { NULL, task->out_fd, ZMQ_POLLIN, 0 };
    zmq_pollitem_t err_item = { NULL, task->err_fd, ZMQ_POLLIN, 0 };
    zloop_poller (self->loop, &out_item, s_pipe_ready, self);
    zloop_poller (self->loop, &err_item, s_pipe_ready, self);
    if (task->timeout_ms > 0)
        task->timeout_timer = zloop_timer (self->loop,
                                           (size_t) task->timeout_ms, 1,
                                           s_timeout_expired, self);
    task->state = S_RUNNING;
    s_attach (self->running, task);
    if (self->config.started)
        self->config.started (task->arg, pid);
}

static void
s_start_inproc (executor_t *self, s_task_t *task)
{
    task->state = S_RUNNING;
    task->started_ms = zclock_mono ();
    s_attach (self->running, task);
    if (self->config.started)
        self->config.started (task->arg, 0);
    executor_result_t *result = &task->result;
    result->exit_code = -1;
    task->inproc (task->arg, result);
    if (!result->output)
        result->output = strdup ("");
    if (!result->error)
        result->error = strdup ("");
    result->output_len = result->output ? strlen (result->output) : 0;
    result->error_len = result->error ? strlen (result->error) : 0;
    result->duration_ms = (uint64_t) (zclock_mono () - task->started_ms);
    s_detach (self->running, task);
    task->state = S_ENDED;
    s_attach (self->ended, task);
}

//  The first queued task that may start now: a parallel task, or one
//  whose job has nothing running and nothing queued ahead of it. NULL
//  when none (or the pool is full).
static s_task_t *
s_next_startable (executor_t *self)
{
    if (zlistx_size (self->running) >= self->config.concurrency)
        return NULL;
    zhashx_t *seen = zhashx_new ();
    if (!seen)
        return NULL;
    s_task_t *found = NULL;
    s_task_t *task = (s_task_t *) zlistx_first (self->queued);
    while (task && !found) {
        if (task->parallel)
            found = task;
        else
        if (!zhashx_lookup (seen, task->job)) {
            zhashx_insert (seen, task->job, task);
            if (!s_job_running (self, task->job))
                found = task;
        }
        task = (s_task_t *) zlistx_next (self->queued);
    }
    zhashx_destroy (&seen);
    return found;
}

//  Starts what may start. A started callback may change the queue, so the
//  scan begins again after each start.
static void
s_pump (executor_t *self)
{
    s_task_t *task;
    while ((task = s_next_startable (self))) {
        s_detach (self->queued, task);
        if (task->inproc)
            s_start_inproc (self, task);
        else
            s_start_process (self, task);
    }
}

//  Done calls for ended tasks, then starts, until both settle.
static void
s_service (executor_t *self)
{
    while (true) {
        s_task_t *task;
        while ((task = (s_task_t *) zlistx_first (self->ended))) {
            s_detach (self->ended, task);
            self->config.done (task->arg, &task->result);
            s_task_destroy (&task);
        }
        s_pump (self);
        if (zlistx_size (self->ended) == 0)
            break;
    }
}

static int
s_kick_fired (zloop_t *loop, int timer_id, void *arg)
{
    executor_t *self = (executor_t *) arg;
    if (self->kick_timer == timer_id)
        self->kick_timer = -1;
    s_service (self);
    return 0;
}

//  Asks the loop to service the executor on its next pass.
static void
s_kick (executor_t *self)
{
    if (self->kick_timer < 0)
        self->kick_timer = zloop_timer (self->loop, 0, 1, s_kick_fired, self);
}


//  ---------------------------------------------------------------------
//  Public API

int
executor_signals_block (void)
{
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGCHLD);
    return pthread_sigmask (SIG_BLOCK, &mask, NULL) == 0 ? 0 : -1;
}

executor_t *
executor_new (zloop_t *loop, const executor_config_t *config)
{
    if (!loop || !config || !config->done || config->concurrency < 1
    ||  config->output_cap_bytes < 2 || config->kill_grace_ms < 0)
        return NULL;
    //  A SIGCHLD left ignored by our parent would auto-reap children and
    //  hide their exit codes
    struct sigaction action;
    memset (&action, 0, sizeof (action));
    action.sa_handler = SIG_DFL;
    sigemptyset (&action.sa_mask);
    sigaction (SIGCHLD, &action, NULL);
    if (executor_signals_block ())
        return NULL;

    executor_t *self = (executor_t *) calloc (1, sizeof (executor_t));
    if (!self)
        return NULL;
    self->loop = loop;
    self->config = *config;
    self->kick_timer = -1;
    self->queued = zlistx_new ();
    self->running = zlistx_new ();
    self->ended = zlistx_new ();
    long open_max = sysconf (_SC_OPEN_MAX);
    self->max_fd = open_max > 0 && open_max < 65536 ? (int) open_max : 65536;
    const char *fake_log = getenv (S_FAKE_LOG);
    if (fake_log && asprintf (&self->fake_log, "%s=%s", S_FAKE_LOG,
                              fake_log) < 0)
        self->fake_log = NULL;

    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGCHLD);
    self->signal_fd = signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    zmq_pollitem_t item = { NULL, self->signal_fd, ZMQ_POLLIN, 0 };
    if (!self->queued || !self->running || !self->ended
    ||  self->signal_fd < 0
    ||  zloop_poller (loop, &item, s_signal_ready, self)) {
        executor_destroy (&self);
        return NULL;
    }
    zloop_poller_set_tolerant (loop, &item);
    return self;
}

static void
s_destroy_list (zlistx_t **list_p)
{
    if (!*list_p)
        return;
    s_task_t *task;
    while ((task = (s_task_t *) zlistx_first (*list_p))) {
        s_detach (*list_p, task);
        s_task_destroy (&task);
    }
    zlistx_destroy (list_p);
}

void
executor_destroy (executor_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    executor_t *self = *self_p;
    s_task_t *task = self->running
                   ? (s_task_t *) zlistx_first (self->running) : NULL;
    while (task) {
        if (task->pid > 0 && !task->reaped) {
            kill (-task->pid, SIGKILL);
            kill (task->pid, SIGKILL);
            while (waitpid (task->pid, NULL, 0) < 0 && errno == EINTR)
                ;
            task->reaped = true;
        }
        if (task->recorded) {
            kill (-task->pid, SIGKILL);
            orphans_forget (self->config.group_dir, task->pid);
            task->recorded = false;
        }
        s_close_pipe (self, &task->out_fd);
        s_close_pipe (self, &task->err_fd);
        if (task->timeout_timer >= 0)
            zloop_timer_end (self->loop, task->timeout_timer);
        if (task->grace_timer >= 0)
            zloop_timer_end (self->loop, task->grace_timer);
        task = (s_task_t *) zlistx_next (self->running);
    }
    s_destroy_list (&self->running);
    s_destroy_list (&self->queued);
    s_destroy_list (&self->ended);
    if (self->kick_timer >= 0)
        zloop_timer_end (self->loop, self->kick_timer);
    if (self->signal_fd >= 0) {
        zmq_pollitem_t item = { NULL, self->signal_fd, ZMQ_POLLIN, 0 };
        zloop_poller_end (self->loop, &item);
        close (self->signal_fd);
    }
    if (self->launch_stack)
        munmap (self->launch_stack, S_LAUNCH_STACK);
    free (self->fake_log);
    free (self);
    *self_p = NULL;
}

void
executor_set_output_cap (executor_t *self, size_t bytes)
{
    if (self && bytes >= 2)
        self->config.output_cap_bytes = bytes;
}

int
executor_submit (executor_t *self, const executor_task_t *spec)
{
    int kinds = (spec->path ? 1 : 0) + (spec->child ? 1 : 0)
              + (spec->inproc ? 1 : 0);
    if (!spec->job || kinds != 1
    || (spec->path && (spec->path [0] != '/' || !spec->argv
                    || !spec->argv [0])))
        return -1;
    s_task_t *task = s_task_new (spec);
    if (!task)
        return -1;
    //  Keep a job's steps in order even if they arrive out of order: go
    //  before the first queued task of the same job with a later step
    s_task_t *later = (s_task_t *) zlistx_first (self->queued);
    while (later && !(strcmp (later->job, task->job) == 0
                      && later->step > task->step))
        later = (s_task_t *) zlistx_next (self->queued);
    task->state = S_QUEUED;
    if (later) {
        //  Rare: rebuild the queue with TASK in its place
        zlistx_t *rebuilt = zlistx_new ();
        if (!rebuilt) {
            task->arg = NULL;
            s_task_destroy (&task);
            return -1;
        }
        s_task_t *item;
        while ((item = (s_task_t *) zlistx_first (self->queued))) {
            s_detach (self->queued, item);
            if (item == later)
                s_attach (rebuilt, task);
            s_attach (rebuilt, item);
        }
        zlistx_destroy (&self->queued);
        self->queued = rebuilt;
    }
    else
        s_attach (self->queued, task);
    s_kick (self);
    return 0;
}

//  Cancels one task wherever it is. Returns 1 when it was affected.
static int
s_cancel_task (executor_t *self, s_task_t *task, const char *reason)
{
    if (task->state == S_ENDED)
        return 0;
    free (task->reason);
    task->reason = strdup (reason ? reason : "on request");
    if (task->state == S_QUEUED) {
        s_detach (self->queued, task);
        char text [512];
        snprintf (text, sizeof (text), "cancelled: %s",
                  reason ? reason : "on request");
        task->result.status = EXECUTOR_CANCELLED;
        task->result.exit_code = -1;
        task->result.output = strdup ("");
        task->result.error = strdup (text);
        task->result.error_len = task->result.error ? strlen (text) : 0;
        task->state = S_ENDED;
        s_attach (self->ended, task);
        s_kick (self);
        return 1;
    }
    if (task->reaped)
        return 0;
    if (!task->forced) {
        task->forced = true;
        task->forced_status = EXECUTOR_CANCELLED;
    }
    s_terminate (self, task);
    return 1;
}

//  Cancels tasks of JOB (NULL: all) in LIST; with STEP, only its task of
//  ATTEMPT.
static int
s_cancel_in (executor_t *self, zlistx_t *list, const char *job,
             const uint32_t *step, uint32_t attempt, const char *reason)
{
    //  Collect first: cancelling moves queued tasks between lists
    zlistx_t *picked = zlistx_new ();
    if (!picked)
        return 0;
    s_task_t *task = (s_task_t *) zlistx_first (list);
    while (task) {
        if (!job
        ||  (strcmp (task->job, job) == 0
             && (!step || (task->step == *step && task->attempt == attempt))))
            zlistx_add_end (picked, task);
        task = (s_task_t *) zlistx_next (list);
    }
    int count = 0;
    while ((task = (s_task_t *) zlistx_first (picked))) {
        zlistx_detach_cur (picked);
        count += s_cancel_task (self, task, reason);
    }
    zlistx_destroy (&picked);
    return count;
}

int
executor_cancel_job (executor_t *self, const char *job, const char *reason)
{
    if (!job)
        return 0;
    return s_cancel_in (self, self->queued, job, NULL, 0, reason)
         + s_cancel_in (self, self->running, job, NULL, 0, reason);
}

int
executor_cancel_attempt (executor_t *self, const char *job, uint32_t step,
                         uint32_t attempt, const char *reason)
{
    if (!job)
        return 0;
    return s_cancel_in (self, self->queued, job, &step, attempt, reason)
         + s_cancel_in (self, self->running, job, &step, attempt, reason);
}

int
executor_cancel_queued (executor_t *self, const char *reason)
{
    return s_cancel_in (self, self->queued, NULL, NULL, 0, reason);
}

int
executor_cancel_all (executor_t *self, const char *reason)
{
    return s_cancel_in (self, self->queued, NULL, NULL, 0, reason)
         + s_cancel_in (self, self->running, NULL, NULL, 0, reason);
}

size_t
executor_running (executor_t *self)
{
    return zlistx_size (self->running);
}

size_t
executor_queued (executor_t *self)
{
    return zlistx_size (self->queued);
}

bool
executor_idle (executor_t *self)
{
    return zlistx_size (self->queued) == 0 && zlistx_size (self->running) == 0
        && zlistx_size (self->ended) == 0;
}

bool
executor_starts_at_once (executor_t *self, const char *job, bool parallel)
{
    return zlistx_size (self->queued) == 0
        && zlistx_size (self->running) < self->config.concurrency
        && (parallel || !s_job_running (self, job));
}

void
executor_head (executor_t *self, const void *arg, bool stderr_,
               const char **data_p, size_t *len_p)
{
    *data_p = NULL;
    *len_p = 0;
    s_task_t *task = (s_task_t *) zlistx_first (self->running);
    while (task && task->arg != arg)
        task = (s_task_t *) zlistx_next (self->running);
    const s_buf_t *buf = task ? (stderr_ ? &task->err : &task->out) : NULL;
    if (!buf || !buf->data)
        return;
    *data_p = buf->data;
    *len_p = buf->len;
}

size_t
executor_last_line (executor_t *self, const void *arg, char *buf,
                    size_t buf_len)
{
    if (!buf || buf_len == 0)
        return 0;
    buf [0] = '\0';
    s_task_t *task = (s_task_t *) zlistx_first (self->running);
    while (task && task->arg != arg)
        task = (s_task_t *) zlistx_next (self->running);
    if (!task || !task->out.data || task->out.len == 0)
        return 0;
    //  The last complete line: up to the last newline, from the one before
    const char *data = task->out.data;
    size_t end = task->out.len;
    while (end > 0 && data [end - 1] != '\n')
        end--;
    while (end > 0 && (data [end - 1] == '\n' || data [end - 1] == '\r'))
        end--;
    size_t start = end;
    while (start > 0 && data [start - 1] != '\n')
        start--;
    size_t len = end - start < buf_len - 1 ? end - start : buf_len - 1;
    memcpy (buf, data + start, len);
    buf [len] = '\0';
    return len;
}

const char *
executor_status_name (executor_status_t status)
{
    switch (status) {
        case EXECUTOR_SUCCESS: return "success";
        case EXECUTOR_TIMEOUT: return "timeout";
        case EXECUTOR_CANCELLED: return "cancelled";
        default: return "failed";
    }
}
