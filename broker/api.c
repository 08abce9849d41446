/*  =========================================================================
    api - client request handlers (see broker.h and proto/PROTOCOL.md)

    Each handler validates its request, acts through the registry, the
    scheduler and the store, and writes one whole reply. Replies leave only
    after the pass commits (broker.c).
    =========================================================================
*/
#include "../backends/backend.h"
#include "broker.h"
#include "dlq.h"
#include "jobrec.h"
#include "metrics.h"
#include "nodehist.h"

#define LIST_DEFAULT 50
#define LIST_MAX 10000
#define EVENTS_MAX 100000

typedef struct {
    const char *type;
    void (*handler) (api_call_t *call);
} api_route_t;

static const api_route_t s_routes [] = {
    {"job.submit", s_job_submit},   {"job.get", s_job_get},
    {"job.progress", s_job_progress},
    {"job.watch", s_job_watch},     {"job.check", s_job_check},
    {"job.list", s_job_list},       {"job.cancel", s_job_cancel},
    {"job.events", s_job_events},   {"job.delete", s_job_delete},
    {"job.output", s_job_output},
    {"node.list", s_node_list},     {"node.get", s_node_get},
    {"status", s_status},           {"node.drain", s_node_drain},
    {"node.resume", s_node_resume}, {"broker.drain", s_broker_drain},
    {"broker.resume", s_broker_resume},
    {"job.retry", s_job_retry},     {"dlq.list", s_dlq_list},
    {"dlq.get", s_dlq_get},         {"dlq.retry", s_dlq_retry},
    {"dlq.purge", s_dlq_purge},
    {"queue.stats", s_queue_stats}, {"node.workers", s_node_workers},
    {"node.history", s_node_history},
    {"metrics.get", s_metrics_get},
};

void
api_handle (broker_t *self, const proto_request_t *request, pw_t *reply)
{
    api_call_t call = {self, request, reply};
    if (schedrun_handle (self, request, reply))
        return;
    if (relays_handle (self, request, reply))
        return;
    for (size_t index = 0; index < sizeof s_routes / sizeof s_routes [0];
         index++)
        if (strcmp (s_routes [index].type, request->type) == 0) {
            s_routes [index].handler (&call);
            return;
        }
    s_error (&call, PROTO_ERR_UNKNOWN_TYPE, "unknown request type '%s'",
             request->type);
}
