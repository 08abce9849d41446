/*  =========================================================================
    execbench - CPU per task of the agent's executor (developer tool)

    Runs COUNT tasks of each kind one at a time through the executor, in a
    process shaped like the agent (the libraries gridagent loads, a ZeroMQ
    context with its I/O and reaper threads, a zloop, a group dir for the
    process-group records): `program`, /bin/true by execve; `child`, a
    function in a forked child that writes one line, as `test echo` does.
    Prints per task the CPU of the process (every thread) and of its
    reaped children, and the load average beside them: the figures move
    with the machine's load, so compare builds in one session, alternated.

    usage: execbench [--count N] [KIND...]
        KIND is program or child (default: both)
    =========================================================================
*/
#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "../../agent/executor.h"

typedef struct {
    size_t left;                //  Tasks still to submit
    size_t failed;              //  Tasks that did not succeed
    executor_t *executor;
    const char *kind;
} s_bench_t;

static int
s_child_line (void *arg)
{
    ssize_t wrote = write (STDOUT_FILENO, "bench\n", 6);
    return wrote == 6 ? 0 : 1;
}

static void s_submit (s_bench_t *bench);

static void
s_done (void *arg, executor_result_t *result)
{
    s_bench_t *bench = (s_bench_t *) arg;
    if (result->status != EXECUTOR_SUCCESS)
        bench->failed++;
    s_submit (bench);
}

static void
s_submit (s_bench_t *bench)
{
    if (bench->left == 0)
        return;
    bench->left--;
    char *argv [] = { "/bin/true", NULL };
    executor_task_t task = { .job = "j-bench", .arg = bench };
    if (strcmp (bench->kind, "program") == 0) {
        task.path = "/bin/true";
        task.argv = argv;
    }
    else
        task.child = s_child_line;
    if (executor_submit (bench->executor, &task))
        bench->failed++;
}

static int
s_check_over (zloop_t *loop, int timer_id, void *arg)
{
    s_bench_t *bench = (s_bench_t *) arg;
    return bench->left == 0 && executor_idle (bench->executor) ? -1 : 0;
}

static double
s_ms (struct timeval time)
{
    return (double) time.tv_sec * 1e3 + (double) time.tv_usec / 1e3;
}

static int
s_run (const char *kind, size_t count, const char *group_dir)
{
    zloop_t *loop = zloop_new ();
    s_bench_t bench = { .left = count, .kind = kind };
    executor_config_t config = {
        .concurrency = 1, .output_cap_bytes = 65536, .kill_grace_ms = 1000,
        .done = s_done, .group_dir = group_dir
    };
    bench.executor = executor_new (loop, &config);
    if (!bench.executor) {
        fprintf (stderr, "execbench: cannot make an executor\n");
        zloop_destroy (&loop);
        return -1;
    }
    zloop_timer (loop, 1, 0, s_check_over, &bench);
    struct rusage self_before, self_after, children_before, children_after;
    getrusage (RUSAGE_SELF, &self_before);
    getrusage (RUSAGE_CHILDREN, &children_before);
    int64_t started_ms = zclock_mono ();
    s_submit (&bench);
    zloop_start (loop);
    int64_t wall_ms = zclock_mono () - started_ms;
    getrusage (RUSAGE_SELF, &self_after);
    getrusage (RUSAGE_CHILDREN, &children_after);
    executor_destroy (&bench.executor);
    zloop_destroy (&loop);

    double self_ms = s_ms (self_after.ru_utime) + s_ms (self_after.ru_stime)
                   - s_ms (self_before.ru_utime) - s_ms (self_before.ru_stime);
    double children_ms = s_ms (children_after.ru_utime)
                       + s_ms (children_after.ru_stime)
                       - s_ms (children_before.ru_utime)
                       - s_ms (children_before.ru_stime);
    double load [1] = { 0 };
    getloadavg (load, 1);
    printf ("%-8s %6zu tasks: per task %.3f ms CPU (the process %.3f, its "
            "children %.3f), %.3f ms wall, %ld minor faults; %zu failed "
            "(load %.2f)\n", kind, count, (self_ms + children_ms) / count,
            self_ms / count, children_ms / count, (double) wall_ms / count,
            (self_after.ru_minflt - self_before.ru_minflt) / (long) count,
            bench.failed, load [0]);
    return bench.failed ? -1 : 0;
}

int
main (int argc, char **argv)
{
    if (executor_signals_block ())
        return 1;
    size_t count = 2000;
    int first_kind = argc;
    for (int index = 1; index < argc; index++)
        if (strcmp (argv [index], "--count") == 0 && index + 1 < argc)
            count = (size_t) strtoul (argv [++index], NULL, 10);
        else
        if (strcmp (argv [index], "program") == 0
        ||  strcmp (argv [index], "child") == 0) {
            if (first_kind == argc)
                first_kind = index;
        }
        else {
            fprintf (stderr, "usage: execbench [--count N] [program|child]...\n");
            return 1;
        }
    if (count == 0)
        count = 1;
    //  Shaped like the agent: ZeroMQ's threads run, sockets are connected
    zsock_t *router = zsock_new_router ("inproc://execbench");
    zsock_t *dealer = zsock_new_dealer (">inproc://execbench");
    char group_dir [] = "/tmp/execbench-XXXXXX";
    if (!router || !dealer || !mkdtemp (group_dir)) {
        fprintf (stderr, "execbench: cannot set up\n");
        return 1;
    }
    int rc = 0;
    if (first_kind == argc) {
        rc |= s_run ("program", count, group_dir);
        rc |= s_run ("child", count, group_dir);
    }
    else
        for (int index = first_kind; index < argc; index++)
            if (strcmp (argv [index], "--count") == 0)
                index++;
            else
                rc |= s_run (argv [index], count, group_dir);
    rmdir (group_dir);
    zsock_destroy (&dealer);
    zsock_destroy (&router);
    return rc ? 1 : 0;
}
