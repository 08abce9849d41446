/*  =========================================================================
    config - gridbroker's configuration: defaults, the YAML file, copies

    broker_config_t holds every setting of conf/gridbroker.yaml and of the
    command line. This loader is the only broker code that reads the YAML
    file (through proto/conf.h); the server keeps a copy, and SIGHUP reads
    the whole configuration again (reload.h).

    Threading: plain data, no locking.
    =========================================================================
*/
#ifndef GRID_BROKER_CONFIG_H
#define GRID_BROKER_CONFIG_H

#include "../proto/job.h"
#include "auth.h"
#include "cluster_config.h"
#include "http.h"
#include "notify.h"
#include "relays.h"
#include "sched.h"
#include "tracing.h"

#define BROKER_DEFAULT_MAX_OUTPUT ((uint64_t) 16 << 20)  //  results.max_output
#define BROKER_DEFAULT_OUTPUT_RATE 2000  //  results.output_rate
#define BROKER_MAX_OUTPUT_RATE 1000000

typedef struct {
    char *data_dir;              //  LMDB environment directory
    char *client_ep;             //  Client API ROUTER endpoint
    char *agents_ep;             //  Agent ROUTER endpoint
    char *publish_ep;            //  Commands PUB endpoint
    int64_t heartbeat_ms;        //  Agents beat this often
    int64_t missed_heartbeats;   //  Offline after this many missed beats
    int64_t offline_grace_ms;    //  Offline this long: its running steps read lost
    int64_t last_seen_save_ms;   //  A node's saved last-seen time lags at most
                                 //  about this much (nodeseen.h)
    int64_t tick_ms;             //  Scheduler/liveness tick
    size_t map_bytes;            //  Initial LMDB map size
    size_t max_map_bytes;        //  LMDB map may grow to this
    sched_config_t sched;        //  Scheduler limits and timers
    int64_t retention_ms;        //  Finished jobs are purged after this (0 = never)
    int64_t dlq_retention_ms;    //  Dead-letter entries are purged after this (0 = never)
    int64_t audit_retention_ms;  //  Audit entries are purged after this (0 = never)
    uint64_t max_output;         //  Bytes of a cell's stdout (and of its
                                 //  stderr) kept; agents keep head and tail
    uint32_t output_rate;        //  Live output pieces acknowledged a
                                 //  second at once, fleet-wide (0: all)
    bool verbose;                //  Log every job and node event
    char *log_level;             //  error, warn, info or debug (NULL: info)
    char *log_format;            //  text or json (NULL: text)
    auth_config_t auth;          //  Keys, roles, allowlist (auth.h)
    relays_config_t relays;      //  Enrolled relays (relays.h)
    job_limit_t *limits;         //  Concurrency limits (`limits:`), fleet-wide and per node
    size_t limit_count;          //  How many
    http_config_t http;          //  The HTTP face (`http:`), off by default
    cluster_config_t cluster;    //  A broker cluster (`ha:`), off by default
    tracing_config_t tracing;    //  Span export (`tracing:`), off by default
    notify_config_t notify;      //  Job notifications (`notify:`), none by default
    uint64_t blob_max_size;      //  blobs.max_size: largest blob uploaded
    int64_t blob_retention_ms;   //  blobs.retention: unused blobs purged
                                 //  after this (0 = never)
    uint32_t blob_max_inflight;  //  blobs.max_inflight: chunks in flight
                                 //  to agents at once, fleet-wide
} broker_config_t;

//  The config file read when no --config is given and it exists
#define BROKER_DEFAULT_CONFIG GRID_SYSCONFDIR "/grid/gridbroker.yaml"

//  Fills CONFIG with defaults (endpoints on 127.0.0.1:7701/7702/7703,
//  data dir /var/lib/grid/broker).
void broker_config_defaults (broker_config_t *config);

//  Reads TEXT as audit_retention: a duration (at most 30d), or whole
//  days up to BROKER_AUDIT_RETENTION_DAYS_MAX ("90d"); "0" keeps for
//  ever. Returns 0 with *MS_P, or -1.
#define BROKER_AUDIT_RETENTION_DAYS_MAX 36500
int broker_audit_retention_parse (const char *text, int64_t *ms_p);

//  Reads a YAML config file into CONFIG (keys of conf/gridbroker.yaml).
//  Returns 0, or -1 with a sentence in ERR.
int broker_config_load (broker_config_t *config, const char *path,
                        char *err, size_t err_len);

//  Frees the strings of CONFIG.
void broker_config_clear (broker_config_t *config);

//  Reads the whole configuration again (config file, then flags) into
//  CONFIG, which holds the defaults. Returns 0, or -1 with a sentence in
//  ERR (ERR_LEN bytes).
typedef int (broker_config_fn) (broker_config_t *config, void *arg,
                                char *err, size_t err_len);

//  Copies SRC into DEST (a deep copy: DEST owns its strings). Returns 0,
//  or -1 when out of memory.
int broker_config_copy (broker_config_t *dest, const broker_config_t *src);

#endif
