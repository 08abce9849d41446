/*  =========================================================================
    service - tell the service manager how a long-running program is doing

    gridbroker and gridagent run as systemd services of Type=notify: they
    say READY=1 once they serve (sockets bound, state restored), STOPPING=1
    when they begin to stop, and WATCHDOG=1 from their reactor at half the
    unit's WatchdogSec=, so a reactor that hangs is restarted. libsystemd's
    sd_notify does the talking; every call is a no-op when the program was
    not started by a service manager (NOTIFY_SOCKET unset), so the same
    binary runs by hand, in tests and under systemd.

    Threading: call from the thread that runs the program's zloop.
    =========================================================================
*/
#ifndef GRID_SERVICE_H
#define GRID_SERVICE_H

#include <czmq.h>
#include <stdint.h>

//  Tells the manager the program serves, with a one-line STATUS (may be
//  NULL). Returns 1 when a manager was told, 0 when none listens, -1 on
//  error (logged by the caller if it cares).
int service_notify_ready (const char *status);

//  Tells the manager the program is stopping (STOPPING=1). Same returns.
int service_notify_stopping (void);

//  Tells the manager the program re-read its configuration: RELOADING=1
//  before, READY=1 after (call it with RELOADING true, then false).
int service_notify_reloading (bool reloading);

//  The watchdog period the manager asked for (WATCHDOG_USEC, for this
//  process), in ms, or 0 when there is none.
int64_t service_watchdog_ms (void);

//  When the manager asked for a watchdog, adds a timer to LOOP that sends
//  WATCHDOG=1 at half the period, so the beats stop when the loop stops
//  turning. Returns the zloop timer id, 0 when no watchdog was asked for,
//  or -1 when the timer could not be added.
int service_watchdog_attach (zloop_t *loop);

#endif
