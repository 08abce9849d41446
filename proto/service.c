/*  =========================================================================
    service - tell the service manager how a long-running program is doing
    (see service.h)
    =========================================================================
*/
#include <systemd/sd-daemon.h>

#include "service.h"

int
service_notify_ready (const char *status)
{
    if (status && *status)
        return sd_notifyf (0, "READY=1\nSTATUS=%s", status);
    return sd_notify (0, "READY=1");
}

int
service_notify_stopping (void)
{
    return sd_notify (0, "STOPPING=1");
}

int
service_notify_reloading (bool reloading)
{
    return sd_notify (0, reloading ? "RELOADING=1" : "READY=1");
}

int64_t
service_watchdog_ms (void)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled (0, &usec) <= 0 || usec == 0)
        return 0;
    int64_t ms = (int64_t) (usec / 1000);
    return ms > 0 ? ms : 1;
}

static int
s_watchdog_fired (zloop_t *loop, int timer_id, void *arg)
{
    sd_notify (0, "WATCHDOG=1");
    return 0;
}

int
service_watchdog_attach (zloop_t *loop)
{
    int64_t period_ms = service_watchdog_ms ();
    if (period_ms == 0)
        return 0;
    int64_t every_ms = period_ms / 2 > 0 ? period_ms / 2 : 1;
    //  One beat now, so a manager with a short period hears us at once
    sd_notify (0, "WATCHDOG=1");
    int id = zloop_timer (loop, (size_t) every_ms, 0, s_watchdog_fired, NULL);
    return id >= 0 ? id : -1;
}
