/*  =========================================================================
    cli - gridcli: argument parsing, requests, transport, rendering

    gridcli is the operator's command line. It turns argv into a plain
    cli_args_t (a pure parser over getopt_long that reports problems as
    sentences), resolves the broker endpoint and output settings from
    flags, environment and a YAML config file, builds one client API
    request (proto/PROTOCOL.md) with pw, sends it through the client
    library (client/client.h: a REQ socket, Lazy Pirate retries with the
    same client request id on every try, so the broker deduplicates), and
    renders the reply's data as aligned tables or as JSON.

    The parts are kept apart so each can be tested alone: parsing and
    settings touch no socket, request building writes bytes only, rendering
    reads a decoded pv_t and writes to a FILE *. Each command is a row of
    the table in cmd.h, kept with its topic's help, options, request and
    renderer in cli/cmd_<topic>.c (docs/DESIGN.md). docs/CLI.md is the
    operator's reference; cli_print_help prints the same contract.

    Exit codes are the program's public interface (scripts branch on them):
        0  success; for `job run --wait` and `job status`, the job completed
           (a job still pending or running also gives 0 for `job status`)
        1  the job failed, partially failed or was cancelled
        2  usage error: bad flags, target, duration, config or job file
        3  broker unreachable, or its answer was missing or malformed
        4  the broker refused the request (an error reply)
      130  interrupted (Ctrl-C); `job run --wait` leaves the job running

    Threading: one thread. cli_exchange relies on CZMQ's interrupt handler
    (zsys_interrupted), which CZMQ installs when the first socket is made.
    =========================================================================
*/
#ifndef GRID_CLI_H
#define GRID_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/job.h"
#include "../proto/names.h"
#include "../proto/pv.h"
#include "../proto/pw.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_JOB_FAILED 1
#define CLI_EXIT_USAGE 2
#define CLI_EXIT_UNREACHABLE 3
#define CLI_EXIT_REFUSED 4
#define CLI_EXIT_INTERRUPTED 130

#define CLI_DEFAULT_BROKER "tcp://127.0.0.1:7701"
#define CLI_DEFAULT_CONFIG "/etc/grid/gridcli.yaml"
#define CLI_DEFAULT_REQUEST_TIMEOUT_MS 5000
#define CLI_REQUEST_TRIES 3          //  Lazy Pirate tries per request
#define CLI_REQUEST_ID_LEN 64        //  Buffer size for a client request id
#define CLI_OUTPUT_COLUMNS 60        //  Widest OUTPUT cell of `job status`

typedef enum {
    CLI_CMD_NONE = 0,     //  Nothing parsed yet
    CLI_CMD_HELP,         //  help, --help, -h, or `COMMAND --help`
    CLI_CMD_VERSION,      //  --version
    CLI_CMD_JOB_RUN,      //  job run
    CLI_CMD_JOB_STATUS,   //  job status ID
    CLI_CMD_JOB_LIST,     //  job list
    CLI_CMD_JOB_CANCEL,   //  job cancel ID
    CLI_CMD_JOB_EVENTS,   //  job events ID
    CLI_CMD_NODE_LIST,    //  node list
    CLI_CMD_NODE_INFO,    //  node info ID
    CLI_CMD_STATUS,       //  status
    CLI_CMD_JOB_DELETE,   //  job delete ID
    CLI_CMD_NODE_DRAIN,   //  node drain ID
    CLI_CMD_NODE_RESUME,  //  node resume ID
    CLI_CMD_BROKER_DRAIN, //  broker drain
    CLI_CMD_BROKER_RESUME, //  broker resume
    CLI_CMD_KEY_LIST,     //  key list
    CLI_CMD_KEY_ACCEPT,   //  key accept KEY|NODE
    CLI_CMD_KEY_REJECT,   //  key reject KEY|NODE
    CLI_CMD_KEY_DELETE,   //  key delete KEY|NODE
    CLI_CMD_KEY_ROTATE_BROKER,  //  key rotate-broker [--deadline D|--status]
    CLI_CMD_KEY_FETCH_BROKER,   //  key fetch-broker [--out FILE]
    CLI_CMD_JOB_RETRY,    //  job retry ID [--failed-only] [--target T]
    CLI_CMD_DLQ_LIST,     //  dlq list [--job ID] [--limit N]
    CLI_CMD_DLQ_SHOW,     //  dlq show ENTRY
    CLI_CMD_DLQ_RETRY,    //  dlq retry ENTRY|JOB
    CLI_CMD_DLQ_PURGE,    //  dlq purge ENTRY | --job ID | --older-than D | --all
    CLI_CMD_QUEUE_STATS,  //  queue stats
    CLI_CMD_NODE_WORKERS, //  node workers ID
    CLI_CMD_NODE_HISTORY, //  node history ID [--limit N]
    CLI_CMD_PRINT_CONFIG, //  --print-config
    CLI_CMD_JOB_OUTPUT,   //  job output ID
    CLI_CMD_SCHEDULE_ADD,     //  schedule add NAME ...
    CLI_CMD_SCHEDULE_LIST,    //  schedule list
    CLI_CMD_SCHEDULE_SHOW,    //  schedule show NAME
    CLI_CMD_SCHEDULE_PAUSE,   //  schedule pause NAME
    CLI_CMD_SCHEDULE_RESUME,  //  schedule resume NAME
    CLI_CMD_SCHEDULE_DELETE,  //  schedule delete NAME
    CLI_CMD_SCHEDULE_RUN,     //  schedule run NAME
    CLI_CMD_TOKEN_ADD,        //  token add NAME --role R
    CLI_CMD_TOKEN_LIST,       //  token list
    CLI_CMD_TOKEN_REVOKE,     //  token revoke NAME
    CLI_CMD_METRICS,          //  metrics
    CLI_CMD_RELAY_LIST,       //  relay list
    CLI_CMD_AUDIT_LIST,       //  audit list [--who K] [--type T] ...
    CLI_CMD_CLUSTER_STATUS,   //  cluster status
    CLI_CMD_CLUSTER_SWITCHOVER, //  cluster switchover [--to NAME]
    CLI_CMD_NOTIFY_LIST,      //  notify list [--status S] [--job ID]
    CLI_CMD_NOTIFY_RETRY,     //  notify retry DELIVERY
    CLI_CMD_FILE_UPLOAD,      //  file upload PATH
    CLI_CMD_FILE_LIST,        //  file list
    CLI_CMD_FILE_DELETE       //  file delete SHA256
} cli_command_t;

typedef enum {
    CLI_OUTPUT_TABLE = 0,    //  Aligned human tables
    CLI_OUTPUT_JSON          //  The reply's data as pretty JSON
} cli_output_t;

typedef struct {
    char *name;     //  Param name, without the leading "--" (owned)
    char *value;    //  Its value, verbatim (owned)
} cli_param_t;

//  What the command line asked for. Strings are borrowed from argv and live
//  as long as argv; the params and the parsed target are owned and released
//  by cli_args_clear.
typedef struct {
    cli_command_t command;        //  What to do
    char command_name [64];       //  How messages name it: "job run"
    const char *help_topic;       //  "job", "node", "status" or NULL: its help
    //  Global options (NULL / 0 / false when not given)
    const char *broker;           //  --broker EP
    const char *config;           //  --config FILE
    bool output_given;            //  --output was given
    cli_output_t output;          //  --output table|json
    int64_t request_timeout_ms;   //  --request-timeout D, 0 when not given
    const char *key;              //  --key FILE: our key pair, or NULL
    const char *broker_key;       //  --broker-key FILE|Z85, or NULL
    bool insecure;                //  --insecure: plaintext
    //  job run
    const char *file;             //  -f FILE, or NULL for an inline job
    const char *target_text;      //  --target T as typed
    target_t target;              //  --target T, parsed (owned)
    const char *backend;          //  BACKEND
    const char *action;           //  ACTION
    cli_param_t *params;          //  --NAME VALUE after the action (owned)
    size_t param_count;           //  How many params
    bool wait;                    //  --wait
    bool follow;                  //  --follow (job run --wait, job output)
    int64_t task_timeout_ms;      //  --timeout D, 0 when not given
    int retries;                  //  --retries N, -1 when not given
    const char *strategy;         //  --strategy, NULL when not given
    bool priority_given;          //  --priority was given
    int priority;                 //  --priority N
    int64_t job_timeout_ms;       //  --job-timeout D, 0 when not given
    job_amount_t batch;           //  --batch N|P%, .set when given
    job_amount_t max_failures;    //  --max-failures N|P%, .set when given
    uint32_t canary;              //  --canary N, 0 when not given
    const char *idempotency_key;  //  --idempotency-key KEY, or NULL
    const char *traceparent;      //  --traceparent TEXT (W3C), or NULL
    const char *notify [JOB_MAX_NOTIFY];  //  --notify URL (repeatable)
    size_t notify_count;          //  How many
    bool check;                   //  --check: a dry run (job.check)
    bool diff;                    //  --diff: with --check, the nodes run
                                  //  each action's check (job.submit with
                                  //  check) and show the diffs
    //  job status / cancel / events, node info
    const char *id;               //  The job or node id
    const char *reason;           //  job cancel --reason TEXT, or NULL
    //  job output
    const char *node;             //  --node N, or NULL
    bool step_given;              //  --step was given
    int step;                     //  --step S
    bool stderr_stream;           //  --stderr
    //  node list
    const char *where;            //  --where TARGET, or NULL
    //  job list
    const char *status_filter;    //  --status S, or NULL
    int limit;                    //  --limit N, 0 for the broker's default
    //  job retry, dlq
    bool failed_only;             //  job retry --failed-only
    const char *job_filter;       //  dlq list/purge --job ID, or NULL
    const char *older_than;       //  dlq purge --older-than D, or NULL
    bool all;                     //  dlq purge --all
    //  key rotate-broker, fetch-broker
    const char *deadline;         //  --deadline D, or NULL
    bool key_status;              //  --status
    const char *out_file;         //  --out FILE, or NULL
    const char *schedule_filter;  //  --schedule NAME, or NULL
    //  schedule add (the job as job run's: -f FILE or --target ... BACKEND
    //  ACTION; the schedule's name is ID)
    const char *cron;             //  --cron EXPR, or NULL
    const char *every;            //  --every D, or NULL
    const char *tz;               //  --tz ZONE, or NULL
    const char *overlap;          //  --overlap skip|queue|allow, or NULL
    const char *catch_up;         //  --catch-up one|none, or NULL
    const char *catch_up_window;  //  --catch-up-window D, or NULL
    //  token add
    const char *role;             //  --role viewer|operator|admin, or NULL
    //  job run: the job options that had only job files before
    const char *limits;           //  --limits SPEC, or NULL
    int64_t lease_ms;             //  --lease D, 0 when not given
    int64_t stall_timeout_ms;     //  --stall-timeout D, 0 when not given
    //  audit list (NULL when not given)
    const char *audit_who;        //  --who NAME
    const char *cluster_to;       //  cluster switchover --to NAME
    const char *audit_type;       //  --type T
    const char *audit_object;     //  --object ID
    const char *upload_src;       //  job run file put --src of more than
                                  //  the inline 4 KiB: uploaded first
    const char *audit_since;      //  --since T (a duration or a UTC time)
    const char *audit_outcome;    //  --outcome O
    const char *audit_before;     //  --before ID
} cli_args_t;

//  Parses ARGC/ARGV (ARGV[0] is the program name) into ARGS, which it
//  zeroes first. Touches no socket, file or environment. Returns 0, or -1
//  with one sentence in ERR (a usage error). Release ARGS with
//  cli_args_clear in both cases.
int cli_args_parse (cli_args_t *args, int argc, char *const *argv,
                    char *err, size_t err_len);

//  Frees what ARGS owns and zeroes it; safe on a zeroed struct.
void cli_args_clear (cli_args_t *args);

//  The keys gridcli speaks CURVE with (cert NULL: plaintext).
typedef struct {
    struct _zcert_t *cert;        //  Our key pair (owned), or NULL
    char broker_key [8 * 41];     //  The broker's public keys, Z85,
                                  //  comma-separated (CLIENT_BROKER_KEYS_*)
} cli_keys_t;

//  Effective settings once flags, environment and config file are merged.
typedef struct {
    char *broker;                 //  Endpoint to connect to (owned)
    cli_output_t output;          //  table or json
    int64_t request_timeout_ms;   //  Total time for one request, all tries
    char *config_path;            //  Config file that was read, or NULL (owned)
    char *key_path;               //  The config file's key, or NULL (owned)
    char *broker_key;             //  The file's broker_key, or NULL (owned)
    bool insecure;                //  The config file's insecure
    cli_keys_t keys;              //  Loaded by cli_keys_load (owned)
    struct _client_t *client;     //  Made by cli_run from the above (owned)
} cli_settings_t;

//  Merges settings: flags in ARGS win over the config file, the file over
//  the defaults; the broker endpoint is --broker, else ENV_BROKER (the
//  GRID_BROKER value, may be NULL or ""), else the file's `broker`, else
//  CLI_DEFAULT_BROKER. The file is --config, else ENV_CONFIG (GRID_CONFIG),
//  else DEFAULT_CONFIG when that file exists (a missing explicit file is
//  an error). Returns 0, or -1 with a sentence in ERR. Release with
//  cli_settings_clear.
int cli_settings_resolve (const cli_args_t *args, const char *env_broker,
                          const char *env_config, const char *default_config,
                          cli_settings_t *settings, char *err, size_t err_len);

//  Frees what SETTINGS owns and zeroes it.
void cli_settings_clear (cli_settings_t *settings);

//  --print-config: the settings as flags, environment and the config
//  file made them (settings.c).
void cli_print_config (const cli_args_t *args,
                       const cli_settings_t *settings, FILE *out);

//  Renders the answer to job.check (a dry run) for people: the target,
//  the nodes it would run on, those it would not and why, the plan and
//  the batches. Returns 0, -1 when writing failed, -2 when DATA is not
//  shaped like a job.check answer.
int cli_render_check (const pv_t *data, FILE *out);

//  Renders a finished dry run's record (job.submit with check, job run
//  --check --diff): one row per node and step, its verdict (would
//  change, no change, cannot tell) and what it rests on (current ->
//  desired, or why it cannot tell), nodes the job set apart as cannot
//  tell too; with DIFF each diff under the table (coloured with COLOR).
//  JSON: {job, status, check: true, summary: {would_change, no_change,
//  cannot_tell}, nodes: [{node, step, task, verdict, would_change:
//  true|false|null, ?current, ?desired, ?diff, ?reason}]}, diffs always.
//  Returns how many rows cannot tell, -1 when writing failed, -2 when
//  RECORD is not a job record.
int cli_render_check_run (const pv_t *record, bool diff, bool json,
                          bool color, FILE *out);

//  Puts the rolling-batch options of ARGS (--batch, --max-failures,
//  --canary) into SPEC, over what a job file said.
void cli_job_apply_options (const cli_args_t *args, job_spec_t *spec);

//  Writes a new client request id into BUF (CLI_REQUEST_ID_LEN bytes):
//  "<host>-<pid>-<counter>-<random hex>", unique across processes and
//  calls, and a valid name ([A-Za-z0-9_-], at most 64 characters).
void cli_request_id_make (char *buf, size_t buf_len);

//  Writes the inline job of `job run` (no -f) in the wire form of job.h:
//  target map, one task {backend, action, params, ?timeout, ?max_retries},
//  and the strategy, timeout and priority that were given.
void cli_job_write (const cli_args_t *args, pw_t *writer);

//  Writes the request for the command in ARGS with request id ID into
//  WRITER. For `job run`, FILE_SPEC is the loaded job file, or NULL to
//  build the inline job, which is first validated through job_spec_decode
//  so that mistakes are caught before anything is sent. Returns 0, or -1
//  with ERRORS filled (the inline job is invalid), or -1 with no errors
//  when the command sends no request (help, version).
int cli_request_build (const cli_args_t *args, const job_spec_t *file_spec,
                       const char *id, pw_t *writer, job_errors_t *errors);

//  Sends REQUEST (SIZE bytes) to ENDPOINT and waits for one reply, Lazy
//  Pirate style: up to CLI_REQUEST_TRIES tries within TIMEOUT_MS in total,
//  each on a fresh REQ socket and resending the same bytes (so the same
//  client request id, which lets the broker deduplicate). Returns
//  CLI_EXIT_OK with the decoded reply in *REPLY_P (caller destroys), or
//  one of these with a sentence in ERR: CLI_EXIT_UNREACHABLE (no answer,
//  or a malformed one), CLI_EXIT_USAGE (the endpoint is not valid),
//  CLI_EXIT_INTERRUPTED (Ctrl-C).
int cli_exchange (const char *endpoint, const void *request, size_t size,
                  int64_t timeout_ms, pv_doc_t **reply_p, char *err,
                  size_t err_len);

//  cli_exchange over CURVE with KEYS (NULL, or no cert: plaintext). A
//  broker that refuses the key at the handshake gives CLI_EXIT_REFUSED at
//  once; a handshake that keeps failing (wrong broker key, CURVE on one
//  side only) is named in the sentence when no answer comes.
int cli_exchange_keys (const cli_keys_t *keys, const char *endpoint,
                       const void *request, size_t size, int64_t timeout_ms,
                       pv_doc_t **reply_p, char *err, size_t err_len);

//  Finds and loads the keys (cli/secure.c): the key pair from --key, else
//  ENV_KEY (GRID_KEY), else the config file's key, else
//  <HOME>/.config/grid/client.key when it exists; the broker's public key
//  from --broker-key, else ENV_BROKER_KEY (GRID_BROKER_KEY), else the
//  config file's broker_key, else /etc/grid/keys/broker.key or
//  <HOME>/.config/grid/broker.key when one exists; the first three may
//  list keys, comma-separated (each a file or Z85, at most 8: the
//  broker's current and next key while it rotates its key). Nothing is loaded with
//  --insecure or the config file's insecure. Returns 0 with KEYS filled
//  (release with cli_keys_clear), or -1 with a sentence in ERR that says
//  what to run.
int cli_keys_load (const cli_args_t *args, const cli_settings_t *settings,
                   const char *env_key, const char *env_broker_key,
                   const char *home, cli_keys_t *keys, char *err,
                   size_t err_len);

//  Frees the key pair of KEYS and zeroes it; NULL-safe.
void cli_keys_clear (cli_keys_t *keys);

//  Where gridcli keeps its keys by default: <HOME>/.config/grid.
void cli_keys_default_dir (const char *home, char *buf, size_t buf_len);

//  Checks the envelope of REPLY against request id ID. Returns CLI_EXIT_OK
//  and lends the data map in *DATA_P (valid while REPLY lives); or prints
//  "gridcli: <message> (<code>)" and each detail indented to ERR and
//  returns CLI_EXIT_REFUSED for an error reply; or prints why and returns
//  CLI_EXIT_UNREACHABLE for a reply of the wrong shape.
int cli_reply_data (const pv_doc_t *reply, const char *id,
                    const pv_t **data_p, FILE *err);

//  Writes DATA, the data of the reply to COMMAND, to OUT: as pretty JSON
//  when OUTPUT is CLI_OUTPUT_JSON, else as the command's table. Returns 0,
//  or -2 when DATA lacks the shape the command's reply must have (nothing
//  is written then).
int cli_render (cli_command_t command, const pv_t *data, cli_output_t output,
                FILE *out);

//  Writes the job record RECORD (a job.get reply) as header lines and the
//  NODE STEP TASK STATUS EXIT DURATION OUTPUT table. COLOR marks failed
//  rows with ANSI red as well as the "!" gutter. Returns 0 or -2.
int cli_render_job (const pv_t *record, FILE *out, bool color);

//  Writes the one-line progress summary of a job.progress answer into
//  BUF: "j-... running  step 2/4  nodes 3/5 done  1 failed".
void cli_progress_format (const pv_t *progress, char *buf, size_t buf_len);

//  One running task's progress (an entry of job.progress's `tasks`) as
//  "web-01 42% downloading nginx" into BUF (control characters become ?).
void cli_task_progress_format (const pv_t *task, char *buf, size_t buf_len);

//  True when RECORD's status is final: completed, partial_failure, failed
//  or cancelled.
bool cli_job_finished (const pv_t *record);

//  The exit code a job record stands for: CLI_EXIT_JOB_FAILED for failed,
//  partial_failure and cancelled, else CLI_EXIT_OK.
int cli_job_exit_code (const pv_t *record);

//  Writes the help for TOPIC (NULL for the whole program, or "job",
//  "node", "status") to OUT.
void cli_print_help (const char *topic, FILE *out);

//  The whole program: parses ARGV, reads GRID_BROKER, GRID_CONFIG and the
//  config file, talks to the broker, writes results to OUT and diagnostics
//  and progress to ERR. Returns the exit code.
int cli_run (int argc, char **argv, FILE *out, FILE *err);

#endif
