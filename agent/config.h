/*  =========================================================================
    config - gridagent's configuration: everything the agent can be told,
    by flags or by the config file, and the checks it must pass

    agent_config_parse reads the defaults, then the --config file (or
    AGENT_DEFAULT_CONFIG when it exists), then the other flags, and checks
    the result; agent_reload (agent.h) calls it again on SIGHUP with the
    command line it kept. A configuration owns every string it points to
    and is released with agent_config_clear. Nothing here touches a
    socket, the spool or a process: the agent (agent.h) applies what the
    configuration says.

    Threading: reentrant; a configuration belongs to one thread.
    =========================================================================
*/
#ifndef GRID_AGENT_CONFIG_H
#define GRID_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/proto.h"

#ifndef GRID_VERSION
#define GRID_VERSION "0.0.0"
#endif

#define AGENT_DEFAULT_BROKER "tcp://127.0.0.1:7702"
#define AGENT_DEFAULT_PUBLISH "tcp://127.0.0.1:7703"
#define AGENT_DEFAULT_STATE_DIR "/var/lib/grid/agent"
//  The config file read when no --config is given and it exists
#define AGENT_DEFAULT_CONFIG GRID_SYSCONFDIR "/grid/gridagent.yaml"
#define AGENT_DEFAULT_GRACE_MS 5000      //  SIGTERM -> SIGKILL for a task
#define AGENT_DEFAULT_DRAIN_MS 5000      //  Shutdown: running work may finish
#define AGENT_DEFAULT_PROGRESS_MS 1000   //  At most one progress message per task this often
#define AGENT_DEFAULT_OUTPUT_RATE 50     //  Live output messages a second, at most
#define AGENT_MAX_OUTPUT_RATE 10000
#define AGENT_DEFAULT_FAILOVER_MS 10000  //  Silence before the next endpoint
#define AGENT_DEFAULT_FAILBACK_MS 60000  //  How often the first is tried again
#define AGENT_MAX_ENDPOINTS 16           //  Broker endpoints listed at most
#define AGENT_MAX_CONCURRENCY 256
#define AGENT_DEFAULT_FACTS_MS 900000    //  Facts are read again this often

//  Everything gridagent can be told, by flags or by the config file.
typedef struct {
    char *id;                    //  Node id (default: the short hostname)
    char **groups;               //  Group names
    size_t group_count;
    proto_kv_t *labels;          //  key -> dotted value
    size_t label_count;
    proto_kv_t *facts;           //  Operator facts: name -> value (facts.h)
    size_t fact_count;
    char *facts_dir;             //  A directory of operator facts (one
                                 //  file a fact), or NULL
    int64_t facts_ms;            //  Facts are read again this often (0: at
                                 //  start and on SIGHUP only)
    char *broker;                //  Broker agent endpoint (DEALER connects),
                                 //  or several, comma-separated, in order
    char *publish;               //  Broker commands endpoint (SUB connects),
                                 //  one per broker endpoint
    int64_t failover_ms;         //  With several endpoints: not welcomed and
                                 //  nothing heard this long, the next one
    int64_t failback_ms;         //  Welcomed on a later endpoint: an earlier
                                 //  one is tried again this often (jittered),
                                 //  and taken when it answers (0: never)
    char *state_dir;             //  Spool lives in <state_dir>/spool
    char *config_file;           //  The file read, or NULL
    uint32_t concurrency;        //  Executor pool size
    char *tool_dir;              //  Programs only from here, or NULL
    size_t output_cap_bytes;     //  Captured per stream
    char **disabled;             //  Backends switched off here
    size_t disabled_count;
    char *resolv_conf;           //  File the network backend manages
    char **file_roots;           //  file.roots: directories the file backend
    size_t file_root_count;      //  may touch (none: it is off)
    uint64_t blob_cache_bytes;   //  file.blob_cache: the most the blob
                                 //  cache keeps (bytes)
    int64_t kill_grace_ms;       //  SIGTERM -> SIGKILL for a task
    int64_t drain_ms;            //  Shutdown: how long running work may go on
    int64_t progress_ms;         //  At most one progress message per task this often (>= 100)
    int64_t output_rate;         //  Live output messages a second, all tasks
                                 //  together (0: none, output at the end)
    bool verbose;                //  One log line per command event
    char *log_level;             //  error, warn, info or debug (NULL: info)
    char *log_format;            //  text or json (NULL: text)
    char *key_file;              //  This agent's key pair (either file)
    int64_t key_rotate_days;     //  Rotate the key when older (0: never)
    char *broker_key;            //  The broker's public key: Z85 or a key
                                 //  file; or one per endpoint, comma-separated
    bool insecure;               //  Plaintext, no keys (--insecure)
    int argc;                    //  The command line parsed (borrowed),
    char **argv;                 //  read again on SIGHUP
} agent_config_t;

//  Fills CONFIG with the defaults (every pointer owned, may be NULL).
void agent_config_init (agent_config_t *config);

//  Frees what CONFIG owns and zeroes it.
void agent_config_clear (agent_config_t *config);

//  Reads the YAML file PATH over CONFIG (keys in conf/gridagent.yaml).
//  Unknown keys, wrong types and bad names are errors. Returns 0, or -1
//  with "PATH: reason" in ERR.
int agent_config_load (agent_config_t *config, const char *path, char *err,
                       size_t err_len);

//  Parses the command line over CONFIG: defaults, then the --config file,
//  then the other flags, and keeps ARGC and ARGV (borrowed: they must
//  outlive CONFIG) for a reload. Checks the result (agent_config_check).
//  Returns
//  0 to run, 1 when --help or --version was printed to OUT (exit 0), -1
//  with a sentence in ERR (exit 2), -2 with a sentence in ERR about a
//  mistake on the command line (exit 2 after cmdline_usage_sentence).
int agent_config_parse (agent_config_t *config, int argc, char *argv [],
                        FILE *out, char *err, size_t err_len);

//  Fills the default id from the host name, and checks every name, label,
//  number and backend name. Returns 0, or -1 with a sentence in ERR.
int agent_config_check (agent_config_t *config, char *err, size_t err_len);

//  The topics an agent with CONFIG subscribes to, in subscription order:
//  a NULL-terminated malloc'd array of malloc'd strings (free with
//  agent_topics_free). *COUNT_P gets how many.
char **agent_topics (const agent_config_t *config, size_t *count_p);
void agent_topics_free (char ***topics_p);

//  The comma-separated items of TEXT (a broker, publish or broker_key
//  list), trimmed of blanks, empty ones left out: a NULL-terminated
//  malloc'd array of malloc'd strings in *LIST_P (free with
//  agent_config_list_free). Returns how many.
size_t agent_config_split (const char *text, char ***list_p);

//  Frees the COUNT_P strings of *LIST_P and the array; nulls both.
void agent_config_list_free (char ***list_p, size_t *count_p);

//  Appends a copy of TEXT to *LIST_P (NULL-terminated). Returns 0 or -1.
int agent_config_list_add (char ***list_p, size_t *count_p,
                           const char *text);

//  Appends a copy of KEY=VALUE to *LABELS_P. Returns 0 or -1.
int agent_config_label_add (proto_kv_t **labels_p, size_t *count_p,
                            const char *key, const char *value);

//  True when the COUNT-long lists A and B differ (in order).
bool agent_config_lists_differ (char **a, size_t a_count, char **b,
                                size_t b_count);

//  True when NODES (COUNT ids; NULL: everyone) names CONFIG's node.
bool agent_config_names_us (const agent_config_t *config, char **nodes,
                            size_t count);

//  True when CONFIG disables backend NAME.
bool agent_config_disabled (const agent_config_t *config, const char *name);

//  Names the settings of FRESH that differ from RUNNING and take effect
//  only at a restart (a reload leaves them), into TEXT ("" when none).
void agent_config_restart_only (const agent_config_t *running,
                                const agent_config_t *fresh, char *text,
                                size_t text_len);

#endif
