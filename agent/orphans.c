/*  =========================================================================
    orphans - records of running tasks' process groups (see orphans.h)
    =========================================================================
*/
#include "orphans.h"
#include "sigsafe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_GROUPS 4096        //  Records handled per start at most
#define S_KILL_WAIT_MS 2000      //  After SIGKILL, how long to wait
#define S_POLL_MS 20             //  How often to look

//  The kernel's boot id (36 characters), or "" when it cannot be read. It
//  stays the same while the machine runs: read once per process
//  (orphans_record runs for every task).
const char *
orphans_boot_id (void)
{
    static char s_known [64];
    if (*s_known)
        return s_known;
    FILE *file = fopen ("/proc/sys/kernel/random/boot_id", "re");
    if (!file)
        return s_known;
    char buf [64];
    if (!fgets (buf, (int) sizeof buf, file))
        buf [0] = 0;
    fclose (file);
    buf [strcspn (buf, "\n")] = 0;
    snprintf (s_known, sizeof s_known, "%s", buf);
    return s_known;
}

int
orphans_proc_stat (pid_t pid, pid_t *pgrp_p, char *state_p,
                   uint64_t *start_p)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/stat", (int) pid);
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text [1024];
    ssize_t size = read (fd, text, sizeof text - 1);
    close (fd);
    if (size <= 0)
        return -1;
    text [size] = 0;
    //  The command name may hold spaces and parentheses: fields start
    //  after the last ')'. Then: state (3), ppid, pgrp (5), ... start (22).
    char *end = strrchr (text, ')');
    if (!end)
        return -1;
    char state = 0;
    int pgrp = 0;
    unsigned long long start = 0;
    if (sscanf (end + 1, " %c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
                "%*d %*d %*d %*d %*d %*d %llu", &state, &pgrp, &start) != 3)
        return -1;
    if (pgrp_p)
        *pgrp_p = (pid_t) pgrp;
    if (state_p)
        *state_p = state;
    if (start_p)
        *start_p = (uint64_t) start;
    return 0;
}

int
orphans_record (const char *dir, pid_t pgid)
{
    uint64_t start = 0;
    if (orphans_proc_stat (pgid, NULL, NULL, &start))
        return -1;
    const char *boot = orphans_boot_id ();
    char path [4096];
    snprintf (path, sizeof path, "%s/%d", dir, (int) pgid);
    int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    char text [128];
    int len = snprintf (text, sizeof text, "%s %llu\n", boot,
                        (unsigned long long) start);
    bool ok = write (fd, text, (size_t) len) == len;
    int saved = errno;
    close (fd);
    if (!ok) {
        unlink (path);
        errno = saved;
        return -1;
    }
    return 0;
}

//  Appends TEXT to BUF (of SIZE bytes) at *AT; false when it does not fit.
static bool
s_append (char *buf, size_t size, size_t *at, const char *text)
{
    size_t len = strlen (text);
    if (*at + len + 1 > size)
        return false;
    memcpy (buf + *at, text, len + 1);
    *at += len;
    return true;
}

//  Runs in a child that shares the agent's memory: system calls and plain
//  code only (no stdio, no allocation, no locks).
int
orphans_record_self (const char *dir, const char *boot)
{
    int fd = open ("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text [1024];
    ssize_t size = read (fd, text, sizeof text - 1);
    close (fd);
    if (size <= 0) {
        errno = EIO;
        return -1;
    }
    text [size] = 0;
    //  The start time is field 22: the 20th after the ')' that ends the
    //  command name (the name may hold spaces and parentheses)
    char *cursor = strrchr (text, ')');
    for (int field = 2; cursor && field < 22; field++)
        cursor = strchr (cursor + 1, ' ');
    if (!cursor || cursor [1] < '0' || cursor [1] > '9') {
        errno = EIO;
        return -1;
    }
    unsigned long long start = 0;
    for (cursor++; *cursor >= '0' && *cursor <= '9'; cursor++)
        start = start * 10 + (unsigned long long) (*cursor - '0');

    char number [24], path [4096], line [128];
    size_t path_len = 0, line_len = 0;
    if (!s_append (path, sizeof path, &path_len, dir)
    ||  !s_append (path, sizeof path, &path_len, "/")
    ||  !s_append (path, sizeof path, &path_len,
                   sigsafe_decimal (getpid (), number))
    ||  !s_append (line, sizeof line, &line_len, boot)
    ||  !s_append (line, sizeof line, &line_len, " ")
    ||  !s_append (line, sizeof line, &line_len,
                   sigsafe_decimal ((long long) start, number))
    ||  !s_append (line, sizeof line, &line_len, "\n")) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    bool ok = write (fd, line, line_len) == (ssize_t) line_len;
    int saved = errno;
    close (fd);
    if (!ok) {
        unlink (path);
        errno = saved ? saved : EIO;
        return -1;
    }
    return 0;
}

void
orphans_forget (const char *dir, pid_t pgid)
{
    char path [4096];
    snprintf (path, sizeof path, "%s/%d", dir, (int) pgid);
    unlink (path);
}

//  One recorded group.
typedef struct {
    pid_t pgid;                  //  Group id (its leader's pid)
    uint64_t start;              //  The leader's start time
    bool live;                   //  Still has members that are ours
} s_group_t;

//  Marks each group of GROUPS (COUNT) live when a process other than a
//  zombie is in it and is its own (orphans.h). Returns how many are live.
static size_t
s_scan (s_group_t *groups, size_t count)
{
    for (size_t index = 0; index < count; index++)
        groups [index].live = false;
    DIR *proc = opendir ("/proc");
    if (!proc)
        return 0;
    struct dirent *entry;
    while ((entry = readdir (proc))) {
        char *end = NULL;
        long pid = strtol (entry->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        pid_t pgrp = 0;
        char state = 0;
        uint64_t start = 0;
        if (orphans_proc_stat ((pid_t) pid, &pgrp, &state, &start)
        ||  state == 'Z')
            continue;
        for (size_t index = 0; index < count; index++) {
            s_group_t *group = &groups [index];
            if (group->pgid == pgrp && start >= group->start)
                group->live = true;
        }
    }
    closedir (proc);
    size_t live = 0;
    for (size_t index = 0; index < count; index++)
        live += groups [index].live;
    return live;
}

bool
orphans_group_running (pid_t pgid)
{
    s_group_t group = { pgid, 0, false };
    return s_scan (&group, 1) > 0;
}

//  Polls until no group of GROUPS is live or WAIT_MS pass. Returns how
//  many are live.
static size_t
s_wait_gone (s_group_t *groups, size_t count, int64_t wait_ms)
{
    size_t live = s_scan (groups, count);
    struct timespec nap = { 0, S_POLL_MS * 1000000L };
    for (int64_t waited = 0; live > 0 && waited < wait_ms;
         waited += S_POLL_MS) {
        nanosleep (&nap, NULL);
        live = s_scan (groups, count);
    }
    return live;
}

static void
s_signal_live (s_group_t *groups, size_t count, int signo)
{
    for (size_t index = 0; index < count; index++)
        if (groups [index].live)
            kill (-groups [index].pgid, signo);
}

int
orphans_stop (const char *dir, int64_t grace_ms, char *report,
              size_t report_len)
{
    if (report && report_len)
        report [0] = 0;
    DIR *records = opendir (dir);
    if (!records)
        return errno == ENOENT ? 0 : -1;
    s_group_t *groups = (s_group_t *) calloc (S_MAX_GROUPS,
                                              sizeof (s_group_t));
    if (!groups) {
        closedir (records);
        return -1;
    }
    const char *boot = orphans_boot_id ();
    size_t count = 0;
    struct dirent *entry;
    while ((entry = readdir (records))) {
        char *end = NULL;
        long pgid = strtol (entry->d_name, &end, 10);
        if (*end || pgid <= 1)
            continue;
        char path [4096], text [128] = "", their_boot [64] = "";
        snprintf (path, sizeof path, "%s/%s", dir, entry->d_name);
        FILE *file = fopen (path, "re");
        if (file) {
            if (!fgets (text, sizeof text, file))
                text [0] = 0;
            fclose (file);
        }
        unsigned long long start = 0;
        bool same_boot = sscanf (text, "%63s %llu", their_boot, &start) == 2
                         && *boot && strcmp (their_boot, boot) == 0;
        unlink (path);
        //  A leader alive (or a zombie) with another start time: the id
        //  was reused, and that group is someone else's
        uint64_t leader_start = 0;
        if (same_boot
        &&  orphans_proc_stat ((pid_t) pgid, NULL, NULL, &leader_start) == 0
        &&  leader_start != (uint64_t) start)
            same_boot = false;
        if (same_boot && count < S_MAX_GROUPS) {
            groups [count].pgid = (pid_t) pgid;
            groups [count].start = (uint64_t) start;
            count++;
        }
    }
    closedir (records);
    int stopped = (int) s_scan (groups, count);
    size_t used = 0;
    for (size_t index = 0; index < count && report; index++)
        if (groups [index].live && used < report_len)
            used += (size_t) snprintf (report + used, report_len - used,
                                       "%s%d", used ? ", " : "",
                                       (int) groups [index].pgid);
    if (stopped > 0) {
        s_signal_live (groups, count, SIGTERM);
        if (s_wait_gone (groups, count, grace_ms) > 0) {
            s_signal_live (groups, count, SIGKILL);
            s_wait_gone (groups, count, S_KILL_WAIT_MS);
        }
    }
    free (groups);
    return stopped;
}
