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
    self->blob_chunks = zhashx_new ();
    if (!self->wait_samples || !self->run_samples || !self->metrics
        || !self->node_stats || !self->blob_chunks) {
        broker_stats_destroy (&self);
        return NULL;
    }
    zhashx_set_destructor (self->node_stats, (zhashx_destructor_fn *) zstr_free);
    zhashx_set_key_hasher (self->node_stats, id_hash);
    zhashx_set_destructor (self->blob_chunks,
                           (zhashx_destructor_fn *) zstr_free);
    return self;
}

void
broker_stats_destroy (broker_stats_t **self_p)
{
    broker_stats_t *self = *self_p;
    if (self) {
        zhashx_destroy (&self->node_stats);
        zhashx_destroy (&self->blob_chunks);
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

void
broker_stats_blob_sent (broker_stats_t *self, const char *sha256)
{
    uint64_t *count = (uint64_t *) zhashx_lookup (self->blob_chunks, sha256);
    if (!count) {
        count = (uint64_t *) calloc (1, sizeof (uint64_t));
        if (!count || zhashx_insert (self->blob_chunks, sha256, count)) {
            free (count);
            return;
        }
    }
    (*count)++;
}

uint64_t
broker_stats_blob_chunks (broker_stats_t *self, const char *sha256)
{
    uint64_t *count = (uint64_t *) zhashx_lookup (self->blob_chunks, sha256);
    return count ? *count : 0;
}

void
broker_stats_blob_forget (broker_stats_t *self, const char *sha256)
{
    zhashx_delete (self->blob_chunks, sha256);
}
