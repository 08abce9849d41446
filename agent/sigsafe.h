/*  =========================================================================
    sigsafe - text for a child between its start and execve

    A task's child (executor.c) may run only async-signal-safe code until
    it calls execve: it shares the agent's memory or was forked from a
    process with threads, so no stdio, no allocation, no locks. What it
    writes (its group record, a sentence on stderr) is put together with
    these.

    Threading: none kept; safe in any thread and after fork or clone.
    =========================================================================
*/
#ifndef GRID_SIGSAFE_H
#define GRID_SIGSAFE_H

//  Decimal of VALUE into BUF (at least 24 bytes, a '-' first when
//  negative); returns BUF.
const char *sigsafe_decimal (long long value, char *buf);

#endif
