/*  =========================================================================
    system backend - host facts, read in-process

    Every action is a query that needs no program: it reads the kernel's
    own files (/proc) or calls a system function and returns at once. The
    output is a readable line; data carries the facts, one key each, so a
    script never has to parse the text.
    =========================================================================
*/
#include "backend.h"
#include "hostinfo.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#define S_PROC_UPTIME "/proc/uptime"
#define S_PROC_MEMINFO "/proc/meminfo"
#define S_PROC_LOADAVG "/proc/loadavg"

static void
s_fail (backend_outcome_t *outcome, const char *what)
{
    outcome->ok = false;
    outcome->exit_code = 1;
    backend_outcome_error (outcome, "%s: %s", what, strerror (errno));
}

static void
s_hostname (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    char name [HOST_NAME_MAX + 1];
    if (gethostname (name, sizeof (name))) {
        s_fail (outcome, "gethostname");
        return;
    }
    name [HOST_NAME_MAX] = 0;
    backend_outcome_output (outcome, "%s\n", name);
    backend_outcome_data (outcome, "hostname", name);
    outcome->ok = true;
}

static void
s_uptime (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    FILE *file = fopen (S_PROC_UPTIME, "r");
    double seconds = 0;
    if (!file) {
        s_fail (outcome, S_PROC_UPTIME);
        return;
    }
    int got = fscanf (file, "%lf", &seconds);
    fclose (file);
    if (got != 1 || seconds < 0) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "%s: unreadable", S_PROC_UPTIME);
        return;
    }
    int64_t whole = (int64_t) seconds;
    backend_outcome_output (outcome, "up %" PRId64 " days, %02d:%02d:%02d "
                            "(%" PRId64 " s)\n", whole / 86400,
                            (int) (whole % 86400 / 3600),
                            (int) (whole % 3600 / 60), (int) (whole % 60),
                            whole);
    backend_outcome_data_int (outcome, "uptime_s", whole);
    outcome->ok = true;
}

static void
s_os (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    struct utsname names;
    if (uname (&names)) {
        s_fail (outcome, "uname");
        return;
    }
    char pretty [256];
    hostinfo_os_release ("", "PRETTY_NAME", pretty, sizeof (pretty));
    backend_outcome_output (outcome, "%s%s%s %s %s\n", pretty,
                            pretty [0] ? ", " : "", names.sysname,
                            names.release, names.machine);
    backend_outcome_data (outcome, "sysname", names.sysname);
    backend_outcome_data (outcome, "release", names.release);
    backend_outcome_data (outcome, "machine", names.machine);
    backend_outcome_data (outcome, "pretty_name", pretty);
    outcome->ok = true;
}

static void
s_disk (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    const char *path = backend_plan_param (plan, "path");
    struct statvfs info;
    if (statvfs (path, &info)) {
        s_fail (outcome, path);
        return;
    }
    uint64_t unit = info.f_frsize ? info.f_frsize : info.f_bsize;
    uint64_t total = (uint64_t) info.f_blocks * unit;
    uint64_t free_bytes = (uint64_t) info.f_bavail * unit;
    uint64_t used = ((uint64_t) info.f_blocks - info.f_bfree) * unit;
    //  As df computes it: used over what users can have, rounded up
    uint64_t usable = used + free_bytes;
    unsigned percent = usable
        ? (unsigned) ((used * 100 + usable - 1) / usable) : 0;
    backend_outcome_output (outcome, "%s: %.1f GiB free of %.1f GiB "
                            "(%u%% used)\n", path,
                            (double) free_bytes / (1 << 30),
                            (double) total / (1 << 30), percent);
    backend_outcome_data_int (outcome, "total_bytes", (int64_t) total);
    backend_outcome_data_int (outcome, "free_bytes", (int64_t) free_bytes);
    backend_outcome_data_int (outcome, "used_percent", percent);
    backend_outcome_data (outcome, "path", path);
    outcome->ok = true;
}

static void
s_memory (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    long long total = -1, available = -1;
    hostinfo_meminfo ("", &total, &available);
    if (total < 0 || available < 0) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "%s: no MemTotal/MemAvailable",
                               S_PROC_MEMINFO);
        return;
    }
    backend_outcome_output (outcome, "%.1f GiB available of %.1f GiB\n",
                            (double) available / (1 << 20),
                            (double) total / (1 << 20));
    backend_outcome_data_int (outcome, "total_kib", total);
    backend_outcome_data_int (outcome, "available_kib", available);
    outcome->ok = true;
}

static void
s_load (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    FILE *file = fopen (S_PROC_LOADAVG, "r");
    if (!file) {
        s_fail (outcome, S_PROC_LOADAVG);
        return;
    }
    char load [3][32];
    int got = fscanf (file, "%31s %31s %31s", load [0], load [1], load [2]);
    fclose (file);
    if (got != 3) {
        outcome->exit_code = 1;
        backend_outcome_error (outcome, "%s: unreadable", S_PROC_LOADAVG);
        return;
    }
    backend_outcome_output (outcome, "load average: %s %s %s\n", load [0],
                            load [1], load [2]);
    backend_outcome_data (outcome, "load1", load [0]);
    backend_outcome_data (outcome, "load5", load [1]);
    backend_outcome_data (outcome, "load15", load [2]);
    outcome->ok = true;
}

#define S_PLAN(fn) \
    static int \
    s_plan_##fn (backend_plan_t *plan, char *err, size_t err_len) \
    { \
        plan->run = BACKEND_RUN_INPROC; \
        plan->inproc = s_##fn; \
        return 0; \
    }

S_PLAN (hostname)
S_PLAN (uptime)
S_PLAN (os)
S_PLAN (disk)
S_PLAN (memory)
S_PLAN (load)

static const backend_param_t s_disk_params [] = {
    { .name = "path", .type = BACKEND_TYPE_PATH, .pattern = "^/",
      .default_value = "/",
      .help = "a path on the file system to measure (default /)" },
};

static const backend_action_t s_actions [] = {
    { "hostname", false, "the host's name", NULL, 0, s_plan_hostname, .idempotent = false },
    { "uptime", false, "seconds since boot", NULL, 0, s_plan_uptime, .idempotent = false },
    { "os", false, "kernel, architecture and distribution", NULL, 0,
      s_plan_os, .idempotent = false },
    { "disk", false, "size and free space of a file system", s_disk_params,
      sizeof (s_disk_params) / sizeof (s_disk_params [0]), s_plan_disk, .idempotent = false },
    { "memory", false, "total and available memory", NULL, 0,
      s_plan_memory, .idempotent = false },
    { "load", false, "load averages over 1, 5 and 15 minutes", NULL, 0,
      s_plan_load, .idempotent = false },
};

const backend_ops_t backend_system_ops = {
    "system", s_actions, sizeof (s_actions) / sizeof (s_actions [0]),
    "1.0"
};
