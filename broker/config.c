/*  =========================================================================
    config - gridbroker's configuration (see config.h)
    =========================================================================
*/
#include <errno.h>

#include "../proto/conf.h"
#include "../proto/log.h"
#include "audit.h"
#include "blobs.h"
#include "config.h"
#include "nodeseen.h"

//  ---------------------------------------------------------------------
//  Configuration

void
broker_config_defaults (broker_config_t *config)
{
    memset (config, 0, sizeof *config);
    config->data_dir = strdup ("/var/lib/grid/broker");
    config->client_ep = strdup ("tcp://127.0.0.1:7701");
    config->agents_ep = strdup ("tcp://127.0.0.1:7702");
    config->publish_ep = strdup ("tcp://127.0.0.1:7703");
    config->heartbeat_ms = 5000;
    config->missed_heartbeats = 3;
    config->offline_grace_ms = 15000;
    config->last_seen_save_ms = NODESEEN_DEFAULT_MS;
    config->tick_ms = 100;
    config->map_bytes = (size_t) 64 << 20;
    config->max_map_bytes = (size_t) 8 << 30;
    config->retention_ms = (int64_t) 30 * 24 * 3600 * 1000;
    config->dlq_retention_ms = (int64_t) 30 * 24 * 3600 * 1000;
    config->audit_retention_ms = AUDIT_DEFAULT_RETENTION_MS;
    config->max_output = BROKER_DEFAULT_MAX_OUTPUT;
    config->output_rate = BROKER_DEFAULT_OUTPUT_RATE;
    config->blob_max_size = BLOBS_DEFAULT_MAX_SIZE;
    config->blob_retention_ms = BLOBS_DEFAULT_RETENTION_MS;
    config->blob_max_inflight = BLOBS_DEFAULT_MAX_INFLIGHT;
    sched_config_defaults (&config->sched);
    auth_config_defaults (&config->auth);
    http_config_defaults (&config->http);
    cluster_config_defaults (&config->cluster);
    tracing_config_defaults (&config->tracing);
    notify_config_defaults (&config->notify);
}

void
broker_config_clear (broker_config_t *config)
{
    free (config->data_dir);
    free (config->client_ep);
    free (config->agents_ep);
    free (config->publish_ep);
    free (config->log_level);
    free (config->log_format);
    config->data_dir = config->client_ep = NULL;
    config->agents_ep = config->publish_ep = NULL;
    config->log_level = config->log_format = NULL;
    auth_config_clear (&config->auth);
    relays_config_clear (&config->relays);
    http_config_clear (&config->http);
    cluster_config_clear (&config->cluster);
    tracing_config_clear (&config->tracing);
    notify_config_clear (&config->notify);
    job_limits_free (config->limits, config->limit_count);
    config->limits = NULL;
    config->limit_count = 0;
}

int
broker_config_copy (broker_config_t *dest, const broker_config_t *src)
{
    *dest = *src;
    dest->data_dir = strdup (src->data_dir);
    dest->client_ep = strdup (src->client_ep);
    dest->agents_ep = strdup (src->agents_ep);
    dest->publish_ep = strdup (src->publish_ep);
    dest->log_level = src->log_level ? strdup (src->log_level) : NULL;
    dest->log_format = src->log_format ? strdup (src->log_format) : NULL;
    auth_config_copy (&dest->auth, &src->auth);
    relays_config_copy (&dest->relays, &src->relays);
    http_config_copy (&dest->http, &src->http);
    cluster_config_copy (&dest->cluster, &src->cluster);
    tracing_config_copy (&dest->tracing, &src->tracing);
    if (notify_config_copy (&dest->notify, &src->notify) != 0)
        return -1;
    dest->limits = NULL;
    if (src->limit_count) {
        dest->limits = (job_limit_t *) calloc (src->limit_count,
                                               sizeof (job_limit_t));
        if (!dest->limits)
            return -1;
        for (size_t index = 0; index < src->limit_count; index++) {
            dest->limits [index] = src->limits [index];
            dest->limits [index].pattern = strdup (src->limits [index].pattern);
        }
    }
    return 0;
}

//  `limits: {PATTERN: N, ..., per_node: {PATTERN: N, ...}}` (R21).
static int
s_read_limits (broker_config_t *config, const pv_t *limits, char *why,
               size_t why_len)
{
    if (!limits)
        return 0;
    if (pv_type (limits) != PV_MAP) {
        snprintf (why, why_len, "limits: expected a map of backend.action: "
                  "count (and per_node: a map of the same)");
        return -1;
    }
    job_limits_free (config->limits, config->limit_count);
    config->limits = NULL;
    config->limit_count = 0;
    char reason [256];
    const char *where = "limits";
    int rc = job_limits_read (limits, false, "per_node", &config->limits,
                              &config->limit_count, reason, sizeof reason);
    const pv_t *per_node = pv_map_get (limits, "per_node");
    if (rc == 0 && per_node) {
        where = "limits.per_node";
        rc = job_limits_read (per_node, true, NULL, &config->limits,
                              &config->limit_count, reason, sizeof reason);
    }
    if (rc != 0)
        snprintf (why, why_len, "%s: %s", where, reason);
    return rc;
}

//  A byte count: an int, or a string of digits with an optional unit
//  (KiB, MiB, GiB, or K, M, G: powers of 1024). Returns 0, or -1.
static int
s_parse_bytes (const pv_t *value, uint64_t *bytes)
{
    int64_t number = 0;
    if (pv_get_int (value, &number) == 0) {
        *bytes = number > 0 ? (uint64_t) number : 0;
        return number > 0 ? 0 : -1;
    }
    char *text = pv_strdup (value);
    char *end = NULL;
    unsigned long long base = text ? strtoull (text, &end, 10) : 0;
    int rc = text && end != text && *text >= '0' && *text <= '9' ? 0 : -1;
    uint64_t scale = 1;
    if (rc == 0 && *end) {
        if (strcmp (end, "K") == 0 || strcmp (end, "KiB") == 0)
            scale = 1024;
        else if (strcmp (end, "M") == 0 || strcmp (end, "MiB") == 0)
            scale = 1024 * 1024;
        else if (strcmp (end, "G") == 0 || strcmp (end, "GiB") == 0)
            scale = 1024 * 1024 * 1024;
        else
            rc = -1;
    }
    free (text);
    if (rc == 0 && (base == 0 || base > UINT64_MAX / scale))
        rc = -1;
    if (rc == 0)
        *bytes = base * scale;
    return rc;
}

//  The `results:` map: max_output, output_rate.
static int
s_load_results (broker_config_t *config, const pv_t *root, char *why,
                size_t why_len)
{
    static const char *known [] = {"max_output", "output_rate", NULL};
    const pv_t *results = pv_map_get (root, "results");
    if (!results)
        return 0;
    if (pv_type (results) != PV_MAP) {
        snprintf (why, why_len, "results: expected a mapping (max_output, "
                  "output_rate)");
        return -1;
    }
    if (conf_check_keys (results, known, why, why_len) != 0)
        return -1;
    const pv_t *value = pv_map_get (results, "max_output");
    uint64_t bytes = 0;
    if (value
        && (s_parse_bytes (value, &bytes) != 0 || bytes < 2
            || bytes > (uint64_t) PROTO_MAX_STREAM)) {
        snprintf (why, why_len, "results.max_output: expected bytes, like "
                  "16MiB (2 bytes to 1GiB)");
        return -1;
    }
    if (value)
        config->max_output = bytes;
    int64_t rate = config->output_rate;
    if (conf_get_int (results, "output_rate", &rate, why, why_len))
        return -1;
    if (rate < 0 || rate > BROKER_MAX_OUTPUT_RATE) {
        snprintf (why, why_len, "results.output_rate: 0 to %d live output "
                  "pieces a second (0: no limit)", BROKER_MAX_OUTPUT_RATE);
        return -1;
    }
    config->output_rate = (uint32_t) rate;
    return 0;
}

//  The `blobs:` map: max_size, retention, max_inflight.
static int
s_load_blobs (broker_config_t *config, const pv_t *root, char *why,
              size_t why_len)
{
    static const char *known [] = {"max_size", "retention", "max_inflight",
                                   NULL};
    const pv_t *blobs = pv_map_get (root, "blobs");
    if (!blobs)
        return 0;
    if (pv_type (blobs) != PV_MAP) {
        snprintf (why, why_len, "blobs: expected a mapping (max_size, "
                  "retention, max_inflight)");
        return -1;
    }
    if (conf_check_keys (blobs, known, why, why_len) != 0)
        return -1;
    const pv_t *value = pv_map_get (blobs, "max_size");
    uint64_t bytes = 0;
    if (value
        && (s_parse_bytes (value, &bytes) != 0
            || bytes > ((uint64_t) 4 << 30))) {
        snprintf (why, why_len, "blobs.max_size: expected bytes, like 64MiB "
                  "(0 to 4GiB; 0: no uploads)");
        return -1;
    }
    if (value)
        config->blob_max_size = bytes;
    if (conf_get_duration (blobs, "retention", &config->blob_retention_ms,
                           why, why_len))
        return -1;
    int64_t inflight = config->blob_max_inflight;
    if (conf_get_int (blobs, "max_inflight", &inflight, why, why_len))
        return -1;
    if (inflight < 1 || inflight > 65536) {
        snprintf (why, why_len, "blobs.max_inflight: 1 to 65536 agents");
        return -1;
    }
    config->blob_max_inflight = (uint32_t) inflight;
    return 0;
}

int
broker_audit_retention_parse (const char *text, int64_t *ms_p)
{
    if (strcmp (text, "0") == 0) {
        *ms_p = 0;
        return 0;
    }
    if (duration_parse (text, ms_p) == 0)
        return 0;
    char *end = NULL;
    errno = 0;
    long long days = strtoll (text, &end, 10);
    if (errno || end == text || strcmp (end, "d") != 0 || days < 1
        || days > BROKER_AUDIT_RETENTION_DAYS_MAX || *text == '+')
        return -1;
    *ms_p = (int64_t) days * 24 * 3600 * 1000;
    return 0;
}

int
broker_config_load (broker_config_t *config, const char *path, char *err,
                    size_t err_len)
{
    static const char *known [] = {
        "data_dir", "client", "agents", "publish", "heartbeat",
        "missed_heartbeats", "max_concurrent", "max_pending", "ack_timeout",
        "ack_resends", "task_timeout", "grace", "retry_base", "retry_cap",
        "lease", "limits",
        "map_size_mb", "max_map_size_mb", "retention", "offline_grace",
        "last_seen_save",
        "verbose", "dlq_retention", "audit_retention", "store", "log_level", "log_format",
        "results", "http", "ha", "tracing", "notify", "blobs",
        //  Read by auth_config_load
        "key", "insecure", "auto_accept", "max_pending_keys", "clients",
        "allow", "rekey",
        //  Read by relays_config_load
        "relays", NULL};
    pv_doc_t *doc = NULL;
    char why [512];
    if (conf_load_file (path, &doc, err, err_len) != 0)
        return -1;
    const pv_t *root = pv_doc_root (doc);
    int rc = pv_type (root) == PV_MAP ? 0 : -1;
    if (rc != 0)
        snprintf (why, sizeof why, "the file must be a mapping of keys");
    if (rc == 0)
        rc = conf_check_keys (root, known, why, sizeof why);
    int64_t max_concurrent = (int64_t) config->sched.max_concurrent;
    int64_t max_pending = (int64_t) config->sched.max_pending;
    int64_t ack_resends = config->sched.ack_resends;
    int64_t map_mb = (int64_t) (config->map_bytes >> 20);
    int64_t max_map_mb = (int64_t) (config->max_map_bytes >> 20);
    if (rc == 0)
        rc = conf_get_str (root, "data_dir", &config->data_dir, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (root, "client", &config->client_ep, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (root, "agents", &config->agents_ep, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (root, "publish", &config->publish_ep, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "heartbeat", &config->heartbeat_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_int (root, "missed_heartbeats", &config->missed_heartbeats, why, sizeof why);
    if (rc == 0)
        rc = conf_get_int (root, "max_concurrent", &max_concurrent, why, sizeof why);
    if (rc == 0)
        rc = conf_get_int (root, "max_pending", &max_pending, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "ack_timeout", &config->sched.ack_timeout_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_int (root, "ack_resends", &ack_resends, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "task_timeout", &config->sched.default_timeout_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "grace", &config->sched.grace_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "retry_base", &config->sched.retry_base_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "retry_cap", &config->sched.retry_cap_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "lease", &config->sched.lease_ms, why, sizeof why);
    if (rc == 0)
        rc = s_read_limits (config, pv_map_get (root, "limits"), why,
                            sizeof why);
    if (rc == 0)
        rc = conf_get_int (root, "map_size_mb", &map_mb, why, sizeof why);
    if (rc == 0)
        rc = conf_get_int (root, "max_map_size_mb", &max_map_mb, why, sizeof why);
    //  store: {max_size, initial_size} (sizes like 8GiB); the older
    //  map_size_mb and max_map_size_mb say the same in MiB
    const pv_t *store = pv_map_get (root, "store");
    uint64_t max_size = 0, initial_size = 0;
    static const char *store_known [] = {"max_size", "initial_size", NULL};
    if (rc == 0 && store && pv_type (store) != PV_MAP) {
        snprintf (why, sizeof why, "store: expected a mapping (max_size, "
                  "initial_size)");
        rc = -1;
    }
    if (rc == 0 && store)
        rc = conf_check_keys (store, store_known, why, sizeof why);
    if (rc == 0 && store)
        rc = conf_get_size (store, "max_size", &max_size, why, sizeof why);
    if (rc == 0 && store)
        rc = conf_get_size (store, "initial_size", &initial_size, why,
                            sizeof why);
    if (rc == 0 && max_size)
        max_map_mb = (int64_t) (max_size >> 20);
    if (rc == 0 && initial_size)
        map_mb = (int64_t) (initial_size >> 20);
    if (rc == 0 && ((max_size && max_size < ((uint64_t) 1 << 20))
                    || (initial_size && initial_size < ((uint64_t) 1 << 20)))) {
        snprintf (why, sizeof why, "store: max_size and initial_size are at "
                  "least 1MiB");
        rc = -1;
    }
    if (rc == 0)
        rc = conf_get_duration (root, "retention", &config->retention_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "offline_grace", &config->offline_grace_ms, why, sizeof why);
    if (rc == 0)
        rc = conf_get_duration (root, "last_seen_save",
                                &config->last_seen_save_ms, why, sizeof why);
    if (rc == 0 && config->last_seen_save_ms <= 0) {
        snprintf (why, sizeof why, "last_seen_save: a duration of at least "
                  "1ms");
        rc = -1;
    }
    if (rc == 0)
        rc = conf_get_duration (root, "dlq_retention", &config->dlq_retention_ms, why, sizeof why);
    const pv_t *audit_retention = pv_map_get (root, "audit_retention");
    if (rc == 0 && audit_retention) {
        char *text = pv_strdup (audit_retention);
        if (!text
            || broker_audit_retention_parse (text,
                                             &config->audit_retention_ms)) {
            snprintf (why, sizeof why, "audit_retention: expected a duration "
                      "like 12h or 90d (whole days up to %dd), or 0 to keep "
                      "entries for ever", BROKER_AUDIT_RETENTION_DAYS_MAX);
            rc = -1;
        }
        free (text);
    }
    if (rc == 0)
        rc = conf_get_bool (root, "verbose", &config->verbose, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (root, "log_level", &config->log_level, why, sizeof why);
    if (rc == 0)
        rc = conf_get_str (root, "log_format", &config->log_format, why, sizeof why);
    if (rc == 0)
        rc = log_check (config->log_level, config->log_format, why, sizeof why);
    if (rc == 0)
        rc = s_load_results (config, root, why, sizeof why);
    if (rc == 0)
        rc = s_load_blobs (config, root, why, sizeof why);
    if (rc == 0)
        rc = auth_config_load (&config->auth, root, why, sizeof why);
    if (rc == 0)
        rc = relays_config_load (&config->relays, pv_map_get (root, "relays"),
                                 why, sizeof why);
    if (rc == 0)
        rc = http_config_load (&config->http, root, why, sizeof why);
    if (rc == 0)
        rc = cluster_config_load (&config->cluster, root, why, sizeof why);
    if (rc == 0)
        rc = tracing_config_load (&config->tracing, root, why, sizeof why);
    if (rc == 0)
        rc = notify_config_load (&config->notify, root, why, sizeof why);
    //  The first number out of range, named with its bound
    const struct {
        const char *key;      //  Its key in the file
        int64_t value;        //  What the file (or the default) gave
        int64_t least;        //  Its least allowed value
        const char *unit;     //  "ms" for durations
    } bounds [] = {
        {"max_concurrent", max_concurrent, 1, ""},
        {"max_pending", max_pending, 0, ""},
        {"ack_resends", ack_resends, 0, ""},
        {"map_size_mb", map_mb, 1, ""},
        {"max_map_size_mb", max_map_mb, 0, ""},
        {"missed_heartbeats", config->missed_heartbeats, 1, ""},
        {"heartbeat", config->heartbeat_ms, 10, "ms"},
        {"lease", config->sched.lease_ms, JOB_MIN_LEASE_MS, "ms"},
    };
    for (size_t index = 0;
         rc == 0 && index < sizeof bounds / sizeof bounds [0]; index++)
        if (bounds [index].value < bounds [index].least) {
            snprintf (why, sizeof why, "%s: %" PRId64 "%s is out of range "
                      "(at least %" PRId64 "%s)", bounds [index].key,
                      bounds [index].value, bounds [index].unit,
                      bounds [index].least, bounds [index].unit);
            rc = -1;
        }
    if (rc == 0) {
        config->sched.max_concurrent = (size_t) max_concurrent;
        config->sched.max_pending = (size_t) max_pending;
        config->sched.ack_resends = (uint32_t) ack_resends;
        config->map_bytes = (size_t) map_mb << 20;
        config->max_map_bytes = (size_t) max_map_mb << 20;
    }
    else
        snprintf (err, err_len, "%s: %s", path, why);
    pv_doc_destroy (&doc);
    return rc;
}

