/*  =========================================================================
    reload - gridbroker's SIGHUP: apply a configuration read again, as far
    as it can change while the broker runs, without dropping a session

    What is applied: the client keys and their roles (a key file named by
    --client-key or clients: is read again), the enrolled relays
    (relays: and --relay-key: a relay taken out is refused from then on
    and its nodes go offline), the allowlist, auto_accept,
    max_pending_keys, last_seen_save, results.output_rate, log_level and
    verbose. Everything
    else (endpoints, data dir, the broker's own key, insecure, log_format,
    timers and limits) takes effect at the next start; a reload that
    changes it says so in the log. The server owns the signal and reads
    the configuration; a read that fails is logged there and changes
    nothing.

    Not to be confused with the scheduler's rebuild after a failed commit
    (broker.c), which re-reads jobs, not the configuration.

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_RELOAD_H
#define GRID_BROKER_RELOAD_H

#include "ctx.h"

//  Applies the reloadable parts of FRESH to the running configuration
//  (ctx->config), to auth and to relays, taking them from FRESH, and logs
//  what changed and what waits for a restart. What it saves (a renamed
//  relay's nodes) goes into the pass. Returns 0.
int reload_apply (ctx_t *ctx, broker_config_t *fresh);

#endif
