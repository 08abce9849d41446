/*  =========================================================================
    status - what a relay says of itself (see status.h)
    =========================================================================
*/
#include "status.h"

#include <czmq.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "../proto/proto.h"

void
relay_status_write (const relay_figures_t *figures, const char *id,
                    pw_t *writer)
{
    proto_reply_ok_begin (writer, id);
    pw_map (writer, 8);
    pw_str (writer, "name");
    pw_str (writer, figures->name);
    pw_str (writer, "version");
    pw_str (writer, GRID_VERSION);
    pw_str (writer, "uptime_ms");
    pw_int (writer, figures->uptime_ms);
    pw_str (writer, "upstream");
    pw_map (writer, 3);
    pw_str (writer, "endpoint");
    pw_str (writer, figures->upstream);
    pw_str (writer, "connected");
    pw_bool (writer, figures->connected);
    pw_str (writer, "since_ms");
    pw_int (writer, figures->since_ms);
    pw_str (writer, "serving");
    pw_bool (writer, figures->serving);
    pw_str (writer, "agents");
    pw_int (writer, (int64_t) figures->agents);
    pw_str (writer, "topics");
    pw_int (writer, (int64_t) figures->topics);
    pw_str (writer, "counters");
    pw_map (writer, 15);
    pw_str (writer, "peers");
    pw_int (writer, (int64_t) figures->peers);
    pw_str (writer, "up");
    pw_int (writer, (int64_t) figures->up);
    pw_str (writer, "down");
    pw_int (writer, (int64_t) figures->down);
    pw_str (writer, "commands");
    pw_int (writer, (int64_t) figures->commands);
    pw_str (writer, "malformed");
    pw_int (writer, (int64_t) figures->malformed);
    pw_str (writer, "unroutable");
    pw_int (writer, (int64_t) figures->unroutable);
    pw_str (writer, "dropped");
    pw_int (writer, (int64_t) figures->dropped);
    pw_str (writer, "refused_topics");
    pw_int (writer, (int64_t) figures->refused_topics);
    pw_str (writer, "refused");
    pw_int (writer, (int64_t) figures->refused);
    pw_str (writer, "batches");
    pw_int (writer, (int64_t) figures->batches);
    pw_str (writer, "batched");
    pw_int (writer, (int64_t) figures->batched);
    pw_str (writer, "batches_down");
    pw_int (writer, (int64_t) figures->batches_down);
    pw_str (writer, "redirects");
    pw_int (writer, (int64_t) figures->redirects);
    pw_str (writer, "failovers");
    pw_int (writer, (int64_t) figures->failovers);
    pw_str (writer, "key_swaps");
    pw_int (writer, (int64_t) figures->key_swaps);
}

//  Appends the formatted text to BUF (a growing string).
static void
s_text (zchunk_t *buf, const char *format, ...)
    __attribute__ ((format (printf, 2, 3)));

static void
s_text (zchunk_t *buf, const char *format, ...)
{
    char line [512];
    va_list args;
    va_start (args, format);
    int len = vsnprintf (line, sizeof line, format, args);
    va_end (args);
    if (len > 0)
        zchunk_extend (buf, line, (size_t) len < sizeof line
                                      ? (size_t) len : sizeof line - 1);
}

static void
s_metric (zchunk_t *buf, const char *name, const char *type,
          const char *help, uint64_t value)
{
    s_text (buf, "# HELP %s %s\n# TYPE %s %s\n%s %" PRIu64 "\n", name, help,
            name, type, name, value);
}

//  metrics.get: the relay's figures in the Prometheus text format, as the
//  broker gives its own (docs/METRICS.md): {text}.
void
relay_metrics_write (const relay_figures_t *figures, const char *id,
                     pw_t *writer)
{
    zchunk_t *buf = zchunk_new (NULL, 4096);
    s_metric (buf, "gridrelay_upstream_connected", "gauge",
              "1 while the upstream handshake stands, else 0",
              figures->connected ? 1 : 0);
    s_metric (buf, "gridrelay_serving", "gauge",
              "1 while the agent and commands endpoints are bound, else 0",
              figures->serving ? 1 : 0);
    s_metric (buf, "gridrelay_agents", "gauge",
              "Agents connected directly that the broker welcomed",
              figures->agents);
    s_metric (buf, "gridrelay_peers", "gauge",
              "Downstream peers (agents and relays below) heard from",
              figures->peers);
    s_metric (buf, "gridrelay_topics", "gauge",
              "Topics subscribed upstream", figures->topics);
    s_text (buf, "# HELP gridrelay_messages_total Messages forwarded, by "
            "direction\n# TYPE gridrelay_messages_total counter\n"
            "gridrelay_messages_total{direction=\"up\"} %" PRIu64 "\n"
            "gridrelay_messages_total{direction=\"down\"} %" PRIu64 "\n",
            figures->up, figures->down);
    s_metric (buf, "gridrelay_commands_total", "counter",
              "Commands received from upstream to republish",
              figures->commands);
    s_text (buf, "# HELP gridrelay_dropped_total Messages and subscriptions "
            "dropped, by reason\n# TYPE gridrelay_dropped_total counter\n"
            "gridrelay_dropped_total{reason=\"malformed\"} %" PRIu64 "\n"
            "gridrelay_dropped_total{reason=\"unroutable\"} %" PRIu64 "\n"
            "gridrelay_dropped_total{reason=\"not_sent\"} %" PRIu64 "\n"
            "gridrelay_dropped_total{reason=\"refused_topic\"} %" PRIu64
            "\n"
            "gridrelay_dropped_total{reason=\"stale_epoch\"} %" PRIu64 "\n",
            figures->malformed, figures->unroutable,
            figures->dropped, figures->refused_topics,
            figures->stale_epoch);
    s_text (buf, "# HELP gridrelay_upstream_moves_total Moves of the "
            "upstream connection, by reason\n# TYPE "
            "gridrelay_upstream_moves_total counter\n"
            "gridrelay_upstream_moves_total{reason=\"redirect\"} %" PRIu64
            "\n"
            "gridrelay_upstream_moves_total{reason=\"failover\"} %" PRIu64
            "\n"
            "gridrelay_upstream_moves_total{reason=\"key_swap\"} %" PRIu64
            "\n",
            figures->redirects, figures->failovers,
            figures->key_swaps);
    s_metric (buf, "gridrelay_upstream_errors_total", "counter",
              "Errors the upstream sent to the relay itself",
              figures->refused);
    s_text (buf, "# HELP gridrelay_uptime_seconds Seconds since the relay "
            "started\n# TYPE gridrelay_uptime_seconds gauge\n"
            "gridrelay_uptime_seconds %.3f\n",
            (double) figures->uptime_ms / 1000.0);
    proto_reply_ok_begin (writer, id);
    pw_map (writer, 1);
    pw_str (writer, "text");
    pw_strn (writer, (const char *) zchunk_data (buf), zchunk_size (buf));
    zchunk_destroy (&buf);
}
