/*  =========================================================================
    agent - gridagent: registers with the broker, runs what it is sent,
    reports every result durably

    One zloop drives everything: a DEALER to the broker's agent endpoint
    (hello, heartbeat, ack, started, result, bye out; welcome, result_ack,
    direct commands, cancel, error in), a SUB to the broker's commands
    endpoint (commands and cancels by topic), the executor's pipes and
    SIGCHLD, SIGTERM/SIGINT, and a few timers.

    Session: subscribe first (all/, group/<g>/, label/<k>/<prefix>/ for
    every prefix of each dotted label value, node/<id>/), then hello, again
    every 2 s (jittered) until a welcome. Commands are ignored until then
    (the broker re-sends what is not acknowledged). After the welcome,
    heartbeats at the broker's interval. An error "unknown_node" (the
    broker forgot us) means hello again.

    Security: both sockets are CURVE clients with the agent's key pair,
    trusting the broker's public key (docs/SECURITY.md), unless insecure.
    The broker grants subscriptions only to an enrolled key, for its own
    topics, so after each welcome the agent subscribes again (unsubscribe,
    subscribe): a brand-new node's first subscriptions, sent before the
    broker knew it, were refused. An error "unauthorized" after a welcome
    (the key was deleted or rejected) means hello again; "pending" means
    the key waits for gridcli key accept, and hello goes on every 2 s.

    Commands are deduplicated by (job, step, attempt) through the spool:
    a duplicate of queued or running work is acked again, of finished work
    gets its result again; nothing runs twice. A new command is recorded
    as taken, checked against its backend's schema (refused: a result with
    status "refused"), and queued in the executor; "started" and "result"
    follow. Its ack and started are held up to 20 ms and left out when the
    result goes first, as the result implies them (PROTOCOL.md 4.1 rules 4
    and 7); a duplicate is acked at once. Results are in the spool before
    they are sent and stay there until the broker's result_ack; they are
    re-sent every few seconds and after each welcome, also across
    restarts.

    SIGHUP: agent_reload (the session stays up).

    SIGTERM/SIGINT: stop taking work, drop queued work, let running work
    finish for a few seconds (then cancel it), flush results, say bye,
    close with linger.

    Threading: one agent per process, on the main thread; call
    agent_signals_block first thing in main().
    =========================================================================
*/
#ifndef GRID_AGENT_H
#define GRID_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
#define AGENT_DEFAULT_FAILOVER_MS 10000  //  Silence before the next endpoint
#define AGENT_DEFAULT_FAILBACK_MS 60000  //  How often the first is tried again
#define AGENT_MAX_ENDPOINTS 16           //  Broker endpoints listed at most
#define AGENT_MAX_CONCURRENCY 256

//  Everything gridagent can be told, by flags or by the config file.
typedef struct {
    char *id;                    //  Node id (default: the short hostname)
    char **groups;               //  Group names
    size_t group_count;
    proto_kv_t *labels;          //  key -> dotted value
    size_t label_count;
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
    int64_t kill_grace_ms;       //  SIGTERM -> SIGKILL for a task
    int64_t drain_ms;            //  Shutdown: how long running work may go on
    int64_t progress_ms;         //  At most one progress message per task this often (>= 100)
    bool verbose;                //  One log line per command event
    char *log_level;             //  error, warn, info or debug (NULL: info)
    char *log_format;            //  text or json (NULL: text)
    char *key_file;              //  This agent's key pair (either file)
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

//  Blocks SIGCHLD, SIGTERM, SIGINT and SIGHUP in the calling thread (they are read
//  through signalfds in the loop) and ignores SIGPIPE. Call it first thing
//  in main(), before any thread exists. Returns 0 or -1.
int agent_signals_block (void);

typedef struct _agent_t agent_t;

//  Opens the spool (recovering interrupted work), creates the sockets
//  (subscribed, connected) and the executor. CONFIG is borrowed and must
//  outlive the agent; a reload (SIGHUP) updates it. Returns NULL with a
//  sentence in ERR.
agent_t *agent_new (agent_config_t *config, char *err, size_t err_len);

//  Reads the configuration again from CONFIG's command line (the config
//  file, then the flags) and applies what can change while the agent
//  runs: disabled_backends (the broker hears the new hello at once),
//  log_level, verbose and drain. Other changed settings take effect at the next
//  start and are logged as such. On an error nothing changes and the
//  error is logged. The session stays up. Returns 0, or -1 on an error.
int agent_reload (agent_t *self);

//  Runs until SIGTERM or SIGINT, then shuts down gracefully (see above).
//  Returns 0.
int agent_run (agent_t *self);

//  Destroys the agent: kills any task still running, closes the sockets
//  (with linger) and the spool; NULL-safe, nulls *self_p.
void agent_destroy (agent_t **self_p);

#endif
