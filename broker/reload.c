/*  =========================================================================
    reload - gridbroker's SIGHUP: read the configuration again and apply
    what can change while the broker runs, without dropping a session

    What is applied: the client keys and their roles (a key file named by
    --client-key or clients: is read again), the enrolled relays
    (relays: and --relay-key: a relay taken out is refused from then on
    and its nodes go offline), the allowlist, auto_accept,
    max_pending_keys, log_level and verbose. Everything else (endpoints,
    data dir, the broker's own key, insecure, log_format, timers and
    limits) takes effect at the next start; a reload that changes it says
    so in the log. A reload that fails (a bad file, an unreadable key) is
    logged and changes nothing.
    =========================================================================
*/
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "../proto/log.h"
#include "broker.h"

struct _broker_reload_t {
    broker_config_fn *read;      //  Reads a fresh configuration
    void *arg;                   //  For READ
    int signal_fd;               //  SIGHUP
};

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
    text [0] = 0;
    size_t used = 0;
    for (size_t index = 0; index < count && used < text_len; index++)
        used += (size_t) snprintf (text + used, text_len - used, "%s%s",
                                   index ? ", " : "", names [index]);
}

int
broker_reload (broker_t *self, broker_config_t *fresh)
{
    auth_config_t *running = &self->config.auth;
    char later [256];
    s_restart_only (&self->config, fresh, later, sizeof later);
    size_t allow_before = running->allow_count;
    size_t clients_before = running->client_count;
    size_t relays_added = 0, relays_removed = 0;
    relays_reload (self, &fresh->relays, &relays_added, &relays_removed);

    //  Move the reloadable parts of FRESH in, and the old ones out
    auth_config_t old = *running;
    running->clients = fresh->auth.clients;
    running->client_count = fresh->auth.client_count;
    running->allow = fresh->auth.allow;
    running->allow_count = fresh->auth.allow_count;
    running->auto_accept = fresh->auth.auto_accept;
    running->max_pending_keys = fresh->auth.max_pending_keys;
    fresh->auth.clients = NULL;
    fresh->auth.client_count = 0;
    fresh->auth.allow = NULL;
    fresh->auth.allow_count = 0;
    old.key_file = NULL;             //  Still the running one's
    auth_config_clear (&old);
    self->config.verbose = fresh->verbose;
    self->config.last_seen_save_ms = fresh->last_seen_save_ms;
    char *level = self->config.log_level;
    self->config.log_level = fresh->log_level;
    fresh->log_level = level;
    char err [256];
    if (log_configure (self->config.log_level ? self->config.log_level
                                              : "info",
                       NULL, self->config.verbose, err, sizeof err))
        log_warn ("SIGHUP: %s: the log level stays %s", err,
                  log_level_name (log_level ()));

    log_info ("SIGHUP: configuration reloaded: %zu client key%s (were "
              "%zu), %zu relay%s (%zu added, %zu removed), allowlist %zu "
              "item%s (were %zu)%s, auto_accept %s, log level %s",
              running->client_count, running->client_count == 1 ? "" : "s",
              clients_before, self->config.relays.count,
              self->config.relays.count == 1 ? "" : "s", relays_added,
              relays_removed, running->allow_count,
              running->allow_count == 1 ? "" : "s", allow_before,
              running->allow_count ? "" : " (every action allowed)",
              running->auto_accept ? "on" : "off",
              log_level_name (log_level ()));
    if (*later)
        log_warn ("SIGHUP: changed settings that take effect at the next "
                  "start: %s", later);
    return 0;
}

static int
s_signal_ready (zloop_t *loop, zmq_pollitem_t *item, void *arg)
{
    broker_t *self = (broker_t *) arg;
    struct signalfd_siginfo info;
    bool hangup = false;
    while (read (self->reload->signal_fd, &info, sizeof info) == sizeof info)
        hangup = hangup || info.ssi_signo == SIGHUP;
    if (!hangup)
        return 0;
    broker_config_t fresh;
    broker_config_defaults (&fresh);
    char err [1024] = "";
    if (self->reload->read (&fresh, self->reload->arg, err, sizeof err) != 0)
        log_error ("SIGHUP: reload failed, the running configuration "
                   "stays: %s", *err ? err : "see above");
    else {
        broker_reload (self, &fresh);
        //  A renamed relay's nodes were saved with its new name
        broker_pass_end (self);
    }
    broker_config_clear (&fresh);
    return 0;
}

int
broker_reload_on_sighup (broker_t *self, broker_config_fn *read, void *arg)
{
    assert (self && read && !self->reload);
    sigset_t mask;
    sigemptyset (&mask);
    sigaddset (&mask, SIGHUP);
    int fd = signalfd (-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        return -1;
    self->reload = (broker_reload_t *) zmalloc (sizeof (broker_reload_t));
    self->reload->read = read;
    self->reload->arg = arg;
    self->reload->signal_fd = fd;
    zmq_pollitem_t item = { NULL, fd, ZMQ_POLLIN, 0 };
    zloop_poller (self->loop, &item, s_signal_ready, self);
    zloop_poller_set_tolerant (self->loop, &item);
    return 0;
}

void
broker_reload_destroy (broker_t *self)
{
    if (!self->reload)
        return;
    if (self->loop) {
        zmq_pollitem_t item = { NULL, self->reload->signal_fd, ZMQ_POLLIN, 0 };
        zloop_poller_end (self->loop, &item);
    }
    close (self->reload->signal_fd);
    free (self->reload);
    self->reload = NULL;
}
