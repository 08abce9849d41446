/*  =========================================================================
    reload - gridbroker's SIGHUP (see reload.h)
    =========================================================================
*/
#include "../proto/log.h"
#include "reload.h"

static bool
s_text_differs (const char *a, const char *b)
{
    return (a == NULL) != (b == NULL) || (a && strcmp (a, b) != 0);
}

//  Names the settings of FRESH that differ from RUNNING and need a
//  restart, into TEXT ("" when none).
static void
s_restart_only (const broker_config_t *running, const broker_config_t *fresh,
                char *text, size_t text_len)
{
    const char *names [16];
    size_t count = 0;
    if (s_text_differs (running->data_dir, fresh->data_dir))
        names [count++] = "data_dir";
    if (s_text_differs (running->client_ep, fresh->client_ep)
    ||  s_text_differs (running->agents_ep, fresh->agents_ep)
    ||  s_text_differs (running->publish_ep, fresh->publish_ep))
        names [count++] = "endpoints";
    if (s_text_differs (running->auth.key_file, fresh->auth.key_file))
        names [count++] = "key";
    if (running->auth.insecure != fresh->auth.insecure)
        names [count++] = "insecure";
    if (running->heartbeat_ms != fresh->heartbeat_ms
    ||  running->missed_heartbeats != fresh->missed_heartbeats
    ||  running->offline_grace_ms != fresh->offline_grace_ms)
        names [count++] = "heartbeat";
    if (running->sched.max_concurrent != fresh->sched.max_concurrent
    ||  running->sched.max_pending != fresh->sched.max_pending
    ||  running->sched.ack_timeout_ms != fresh->sched.ack_timeout_ms
    ||  running->sched.ack_resends != fresh->sched.ack_resends
    ||  running->sched.default_timeout_ms != fresh->sched.default_timeout_ms
    ||  running->sched.grace_ms != fresh->sched.grace_ms
    ||  running->sched.retry_base_ms != fresh->sched.retry_base_ms
    ||  running->sched.retry_cap_ms != fresh->sched.retry_cap_ms)
        names [count++] = "scheduler limits";
    if (running->retention_ms != fresh->retention_ms)
        names [count++] = "retention";
    if (running->audit_retention_ms != fresh->audit_retention_ms)
        names [count++] = "audit_retention";
    if (s_text_differs (running->log_format, fresh->log_format))
        names [count++] = "log_format";
    if (running->map_bytes != fresh->map_bytes
    ||  running->max_map_bytes != fresh->max_map_bytes)
        names [count++] = "store size";
    const http_config_t *http = &running->http, *next = &fresh->http;
    if (s_text_differs (http->listen, next->listen)
    ||  s_text_differs (http->cert, next->cert)
    ||  s_text_differs (http->key, next->key)
    ||  http->insecure != next->insecure
    ||  http->metrics_public != next->metrics_public
    ||  http->max_body != next->max_body
    ||  http->idle_timeout_ms != next->idle_timeout_ms
    ||  http->max_connections_per_ip != next->max_connections_per_ip)
        names [count++] = "http";
    const tracing_config_t *tracing = &running->tracing;
    const tracing_config_t *next_tracing = &fresh->tracing;
    if (s_text_differs (tracing->otlp_endpoint, next_tracing->otlp_endpoint)
    ||  s_text_differs (tracing->service_name, next_tracing->service_name)
    ||  tracing->batch_size != next_tracing->batch_size
    ||  tracing->batch_delay_ms != next_tracing->batch_delay_ms
    ||  tracing->timeout_ms != next_tracing->timeout_ms
    ||  tracing->queue_size != next_tracing->queue_size)
        names [count++] = "tracing";
    text [0] = 0;
    size_t used = 0;
    for (size_t index = 0; index < count && used < text_len; index++)
        used += (size_t) snprintf (text + used, text_len - used, "%s%s",
                                   index ? ", " : "", names [index]);
}

static void
s_save_node (void *arg, registry_node_t *node)
{
    ctx_save_node ((ctx_t *) arg, node);
}

int
reload_apply (ctx_t *ctx, broker_config_t *fresh)
{
    broker_config_t *config = ctx->config;
    auth_config_t *running = &config->auth;
    char later [256];
    s_restart_only (config, fresh, later, sizeof later);
    size_t allow_before = running->allow_count;
    size_t clients_before = running->client_count;
    size_t relays_added = 0, relays_removed = 0;
    relays_reload (ctx->relays, &config->relays, &fresh->relays,
                   ctx->registry, s_save_node, ctx, &relays_added,
                   &relays_removed);

    //  Move the reloadable parts of FRESH in, and the old ones out
    auth_config_t old = *running;
    running->clients = fresh->auth.clients;
    running->client_count = fresh->auth.client_count;
    running->allow = fresh->auth.allow;
    running->allow_count = fresh->auth.allow_count;
    running->auto_accept = fresh->auth.auto_accept;
    running->rekey = fresh->auth.rekey;
    running->max_pending_keys = fresh->auth.max_pending_keys;
    fresh->auth.clients = NULL;
    fresh->auth.client_count = 0;
    fresh->auth.allow = NULL;
    fresh->auth.allow_count = 0;
    old.key_file = NULL;             //  Still the running one's
    auth_config_clear (&old);
    //  Webhooks, their secret and timings (not the worker count)
    notify_config_t notify = config->notify;
    config->notify = fresh->notify;
    config->notify.workers = notify.workers;
    fresh->notify = notify;
    config->verbose = fresh->verbose;
    config->output_rate = fresh->output_rate;
    config->last_seen_save_ms = fresh->last_seen_save_ms;
    char *level = config->log_level;
    config->log_level = fresh->log_level;
    fresh->log_level = level;
    char err [256];
    if (log_configure (config->log_level ? config->log_level
                                              : "info",
                       NULL, config->verbose, err, sizeof err))
        log_warn ("SIGHUP: %s: the log level stays %s", err,
                  log_level_name (log_level ()));

    log_info ("SIGHUP: configuration reloaded: %zu client key%s (were "
              "%zu), %zu relay%s (%zu added, %zu removed), allowlist %zu "
              "item%s (were %zu)%s, auto_accept %s, log level %s, "
              "results.output_rate %u",
              running->client_count, running->client_count == 1 ? "" : "s",
              clients_before, config->relays.count,
              config->relays.count == 1 ? "" : "s", relays_added,
              relays_removed, running->allow_count,
              running->allow_count == 1 ? "" : "s", allow_before,
              running->allow_count ? "" : " (every action allowed)",
              running->auto_accept ? "on" : "off",
              log_level_name (log_level ()), config->output_rate);
    if (*later)
        log_warn ("SIGHUP: changed settings that take effect at the next "
                  "start: %s", later);
    return 0;
}
