/*  =========================================================================
    stats - what the broker counts (see stats.h)
    =========================================================================
*/
#include "../proto/names.h"
#include "stats.h"

broker_stats_t *
broker_stats_new (int64_t started_ms)
{
    broker_stats_t *self = (broker_stats_t *) zmalloc (sizeof (broker_stats_t));
    self->started_ms = started_ms;
    self->wait_samples = qstats_new ();
    self->run_samples = qstats_new ();
    self->metrics = metrics_new ();
    self->node_stats = zhashx_new ();
    if (!self->wait_samples || !self->run_samples || !self->metrics
        || !self->node_stats) {
        broker_stats_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->node_stats, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_key_hasher (self->node_stats, id_hash);
    return self;
}

void
broker_stats_destroy (broker_stats_t **self_p)
{
    broker_stats_t *self = *self_p;
    if (self) {
        zhashx_destroy (&self->node_stats);
        qstats_destroy (&self->wait_samples);
        qstats_destroy (&self->run_samples);
        metrics_destroy (&self->metrics);
        free (self);
        *self_p = NULL;
    }
}

broker_node_stats_t *
broker_stats_node (broker_stats_t *self, const char *node)
{
    broker_node_stats_t *stats
        = (broker_node_stats_t *) zhashx_lookup (self->node_stats, node);
    if (!stats) {
        stats = (broker_node_stats_t *) zmalloc (sizeof (broker_node_stats_t));
        zhashx_insert (self->node_stats, node, stats);
    }
    return stats;
}
