/*  =========================================================================
    orphans - records of running tasks' process groups, so that an agent
    restarted after SIGKILL (or a crash) stops what its tasks left running

    A child dies with its agent (PR_SET_PDEATHSIG), but what the child
    started in its process group does not: apt-get's dpkg, a service
    script's daemon. So before a task's program runs, the executor writes
    one small file per task, named by its process group id, into a
    directory of the agent's state dir, holding the boot id and the group
    leader's start time (/proc/<pid>/stat, clock ticks since boot); the
    file goes when the task is over. On start the agent reads what is
    left, and stops each group that is still its own: SIGTERM to the group,
    up to a grace for it to go, then SIGKILL.

    A group is the agent's own only when the machine has not rebooted
    since (same boot id) and either its leader is alive with the recorded
    start time, or the leader is gone and every remaining member started
    after it. A leader alive with another start time means the id was
    reused: that group is never touched. (Linux does not reuse an id while
    any process of its group remains, so a leaderless group with members
    is the task's own, unless the whole group ended and a new process took
    the id and left its own group leaderless before the agent restarted.)

    The records are written without fsync: they guard against the agent's
    death, not the machine's, and a reboot ends every group anyway.

    Threading: plain functions; their one state is the boot id, read once
    per process. Call from one thread.
    =========================================================================
*/
#ifndef GRID_ORPHANS_H
#define GRID_ORPHANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

//  Writes DIR/<PGID> for the group whose leader PGID was just forked.
//  Returns 0, or -1 (errno) when the record cannot be written.
int orphans_record (const char *dir, pid_t pgid);

//  The same record, written by the group's leader itself: for a child
//  that shares the agent's memory until it calls execve (clone with
//  CLONE_VM | CLONE_VFORK), so that it may run only async-signal-safe
//  calls and allocate nothing. BOOT is orphans_boot_id () read by the
//  agent before. Returns 0, or -1 (errno).
int orphans_record_self (const char *dir, const char *boot);

//  The kernel's boot id as the records hold it ("" when it cannot be
//  read); read once per process.
const char *orphans_boot_id (void);

//  Removes DIR/<PGID>: the task is over and its group was killed.
void orphans_forget (const char *dir, pid_t pgid);

//  Stops every group recorded in DIR that is still the agent's own
//  (SIGTERM, GRACE_MS, SIGKILL; waits at most GRACE_MS + 2 s in all) and
//  removes every record. Writes the ids of the groups stopped into REPORT
//  ("4711, 4720"; REPORT_LEN bytes, "" when none). Returns how many
//  groups it stopped, or -1 when DIR cannot be read (a missing DIR is 0).
int orphans_stop (const char *dir, int64_t grace_ms, char *report,
                  size_t report_len);

//  Reads /proc/<PID>/stat: its process group, state letter and start
//  time. Returns 0, or -1 when there is no such process.
int orphans_proc_stat (pid_t pid, pid_t *pgrp_p, char *state_p,
                       uint64_t *start_p);

//  True when a process other than a zombie is in process group PGID.
bool orphans_group_running (pid_t pgid);

#endif
