/*  =========================================================================
    cli - the table of topics and the main help
    =========================================================================
*/
#include "commands.h"

#include <string.h>

#include "render.h"
#include "request.h"

//  gridcli --help
static const char s_help_main [] =
"gridcli - run actions on grid nodes; inspect jobs, nodes and the broker\n"
"\n"
"Usage: gridcli [GLOBAL OPTIONS] COMMAND [ARGUMENTS]\n"
"\n"
"Commands:\n"
"  job run --target T [OPTIONS] BACKEND ACTION [--PARAM VALUE ...]\n"
"                        run one action on every node of target T\n"
"  job run -f FILE [--wait]\n"
"                        run the job described in a YAML job file\n"
"  job status ID         a job's status, per node and per step\n"
"  job list [--status S] [--limit N] [--schedule NAME]\n"
"                        jobs, newest first\n"
"  job cancel ID [--reason TEXT]\n"
"                        cancel a pending or running job\n"
"  job events ID         a job's timeline\n"
"  job delete ID         remove a finished job, its results and events\n"
"  job output ID [--node N] [--step S] [--stderr] [--follow]\n"
"                        a step's whole output, byte for byte (--follow:\n"
"                        as it comes, until the step ends)\n"
"  job retry ID [--failed-only] [--target T]\n"
"                        a new job with the same tasks (only on the nodes\n"
"                        that failed; or on T)\n"
"  dlq list|show|retry|purge\n"
"                        the dead-letter queue (gridcli dlq --help)\n"
"  node list [--where T] registered nodes (--where: those target T selects)\n"
"  node info ID          one node, its facts, backends and actions\n"
"  node workers ID       what each slot of the node runs now, its counters\n"
"  node history ID [--limit N]\n"
"                        what changed between the node's registrations\n"
"  queue stats           jobs and cells by priority and action, oldest\n"
"                        pending job, wait and run times, dead letters\n"
"  node drain ID         the node takes no new jobs (resume: it does again)\n"
"  node resume ID\n"
"  broker drain          maintenance: no new jobs admitted, running ones\n"
"                        finish, queued ones wait\n"
"  broker resume         leave maintenance\n"
"  key list              enrolled, pending and rejected keys (admin)\n"
"  key accept|reject|delete NODE|KEY\n"
"                        enrol, refuse or forget an agent's key (admin)\n"
"  keygen [--out DIR] [--name NAME]\n"
"                        write this client's key pair (default\n"
"                        ~/.config/grid/client.key)\n"
"  schedule add NAME (--cron EXPR | --every D) [--tz ZONE] [OPTIONS]\n"
"               (-f FILE | --target T [OPTIONS] BACKEND ACTION [--PARAM V])\n"
"                        run a job on a cron schedule or an interval\n"
"  schedule list | show NAME | pause NAME | resume NAME | delete NAME\n"
"  schedule run NAME     start one run now\n"
"  status                broker version, uptime, node and job counts, store\n"
"  metrics               the broker's figures, Prometheus text format\n"
"  relay list            the relays and the agents they carry\n"
"  token add NAME --role R\n"
"                        a bearer token for the HTTP API, shown only once\n"
"                        (admin)\n"
"  token list | revoke NAME\n"
"                        the tokens (never their values); refuse one\n"
"  audit list [--who K] [--type T] [--since T] [--object ID] [--limit N]\n"
"             [--json]   who changed what, newest first (admin)\n"
"  cluster status        a broker cluster's active and standbys, sync, lag\n"
"  cluster switchover [--to NAME]\n"
"                        hand the lead to a standby in sync (admin)\n"
"  notify list [--status S] [--job ID] | retry DELIVERY\n"
"                        the webhooks told of jobs' ends (admin)\n"
"  file upload PATH | list | delete SHA256\n"
"                        file contents stored in the broker for file put\n"
"  help [job|node|broker|key|dlq|queue|schedule|status|token|metrics|relay|\n"
"        audit|cluster|notify|file]\n"
"                        this help, or a command's (also -h, --help,\n"
"                        and COMMAND --help, e.g. gridcli job --help)\n"
"\n"
"Global options (before the command, or among the command's options):\n"
"  --broker EP[,EP...]   the broker's client endpoint (a cluster's members,\n"
"                        comma-separated: tried in turn, a standby's\n"
"                        not_leader followed to the active); default:\n"
"                        GRID_BROKER, else the config file's broker,\n"
"                        else tcp://127.0.0.1:7701\n"
"  --output table|json   human tables (default) or the answer's data as\n"
"                        JSON on stdout\n"
"  --request-timeout D   total wait for one answer, over 3 tries on fresh\n"
"                        connections (default 5s)\n"
"  --config FILE         config file; default: GRID_CONFIG, else\n"
"                        /etc/grid/gridcli.yaml when it exists\n"
"  --key FILE            this client's key pair; default: GRID_KEY, else\n"
"                        the config file's key, else\n"
"                        ~/.config/grid/client.key\n"
"  --broker-key KEY      the broker's public key (its broker.key file or\n"
"                        40 characters of Z85), or several, comma-separated\n"
"                        (at most 8: OLD,NEW while the broker rotates its\n"
"                        key; a failed handshake moves to the next one);\n"
"                        default: GRID_BROKER_KEY, else the config file's\n"
"                        broker_key, else /etc/grid/keys/broker.key,\n"
"                        ~/.config/grid/broker.key\n"
"  --insecure            plaintext, no keys: only for a broker that runs\n"
"                        --insecure\n"
"  -h, --help            print help (gridcli job --help: help on job)\n"
"  --print-config        print the settings gridcli would use (broker,\n"
"                        output, timeout, keys), each with where it came\n"
"                        from (flag, env, file, default), and exit\n"
"  --version             print the version and exit\n"
"\n"
"Options of job run (only before BACKEND):\n"
"  --target T            all, group:G, node:ID[,ID...],\n"
"                        label:KEY=V1[.V2...], fact:KEY=VALUE (or != >=\n"
"                        <= > <, ~= a glob: fact:mem_mb>=4096), any,\n"
"                        any:TARGET (one node\n"
"                        of the set does the work), or an expression of\n"
"                        those with not, and, or and parentheses:\n"
"                        'group:web and not node:web-03'\n"
"  -f, --file FILE       take the whole job from a YAML job file\n"
"  --wait                wait for the end, with progress on stderr; Ctrl-C\n"
"                        stops waiting and leaves the job running\n"
"  --timeout D           task timeout: the action is stopped after D\n"
"  --retries N           extra attempts on a node that fails, 0 to 10\n"
"  --strategy S          fail-fast (default) or continue\n"
"  --priority N          -100 to 100, higher runs first (default 0)\n"
"  --job-timeout D       stop what is left of the whole job after D\n"
"  --batch N|P%          roll through the nodes N (or P% of them) at a time\n"
"  --max-failures N|P%   failed nodes allowed before no new batch starts\n"
"  --canary N            the first batch is N nodes\n"
"  --limits P=N[,P=N]    the job's own concurrency limits (P is\n"
"                        BACKEND.ACTION, either part may be *)\n"
"  --lease D             an any job's lease on a node\n"
"  --stall-timeout D     a task silent for D reads timeout\n"
"  --check               a dry run: the nodes, the plan and the batches;\n"
"                        runs nothing\n"
"\n"
"After BACKEND ACTION every --NAME VALUE (or --NAME=VALUE) is a param of\n"
"the action, even when NAME is also an option's name; only --wait stays a\n"
"flag wherever it is written.\n"
"\n"
"Durations (D): a number and a unit, ms, s, m, h or d, or a sequence of\n"
"them such as 1h30m.\n"
"\n"
"Environment:\n"
"  GRID_BROKER           broker endpoint when --broker is not given\n"
"  GRID_CONFIG           config file when --config is not given\n"
"  GRID_KEY              key pair when --key is not given\n"
"  GRID_BROKER_KEY       broker public key when --broker-key is not given\n"
"  NO_COLOR              when set, failed rows are not coloured\n"
"\n"
"Config file (YAML) keys: broker, output, request_timeout, key,\n"
"broker_key, insecure. A flag wins over the config file, which wins over\n"
"the defaults; GRID_BROKER, GRID_KEY and GRID_BROKER_KEY come after their\n"
"flags and before the file.\n"
"\n"
"Exit codes:\n"
"  0    success; for job run --wait and job status, the job completed\n"
"       (job status of a job still pending or running also gives 0)\n"
"  1    the job failed, partially failed or was cancelled\n"
"  2    usage error: bad option, target, duration, config or job file\n"
"  3    the broker is unreachable, or its answer was missing or malformed\n"
"  4    the broker refused the request (its message and code are shown)\n"
"  130  interrupted (Ctrl-C)\n"
"\n"
"Examples:\n"
"  gridcli job run --target group:web --wait apt install --package nginx\n"
"  gridcli --output json job status j-0193a1b2c3d4-0001\n";

//  The topics, in the order of the help
const cli_topic_t *const cli_topics [] = {
    &cli_topic_job, &cli_topic_node, &cli_topic_broker, &cli_topic_key,
    &cli_topic_dlq, &cli_topic_queue, &cli_topic_schedule, &cli_topic_status,
    &cli_topic_token, &cli_topic_metrics, &cli_topic_relay, &cli_topic_audit,
    &cli_topic_cluster, &cli_topic_notify, &cli_topic_file
};
const size_t cli_topic_count = sizeof cli_topics / sizeof cli_topics [0];

const cli_topic_t *
cli_topic_find (const char *name)
{
    for (size_t index = 0; index < cli_topic_count; index++)
        if (streq (cli_topics [index]->name, name))
            return cli_topics [index];
    return NULL;
}

const cli_cmd_t *
cli_cmd_find (cli_command_t command, const cli_topic_t **topic_p)
{
    for (size_t index = 0; index < cli_topic_count; index++) {
        const cli_topic_t *topic = cli_topics [index];
        for (const cli_cmd_t *cmd = topic->cmds;
             cmd->command != CLI_CMD_NONE; cmd++)
            if (cmd->command == command) {
                if (topic_p)
                    *topic_p = topic;
                return cmd;
            }
    }
    return NULL;
}

const char *
cli_command_name (cli_command_t command)
{
    //  "job run": the topic and the subcommand, as typed
    static char name [64];
    const cli_topic_t *topic = NULL;
    const cli_cmd_t *cmd = cli_cmd_find (command, &topic);
    if (!cmd)
        return "gridcli";
    snprintf (name, sizeof name, "%s%s%s", topic->name, cmd->name ? " " : "",
              cmd->name ? cmd->name : "");
    return name;
}

void
cli_print_help (const char *topic_name, FILE *out)
{
    const cli_topic_t *topic = topic_name ? cli_topic_find (topic_name)
                                          : NULL;
    fputs (topic ? topic->help : s_help_main, out);
}

int
cli_render (cli_command_t command, const pv_t *data, cli_output_t output,
            FILE *out)
{
    return cli_render_cmd (cli_cmd_find (command, NULL), data, output, out);
}

int
cli_request_build (const cli_args_t *args, const job_spec_t *file_spec,
                   const char *id, pw_t *writer, job_errors_t *errors)
{
    return cli_request_build_cmd (cli_cmd_find (args->command, NULL), args,
                                  file_spec, id, writer, errors);
}

int
cli_request (const cli_args_t *args, const job_spec_t *file_spec,
             const cli_settings_t *settings, pv_doc_t **reply_p,
             const pv_t **data_p, FILE *err)
{
    return cli_request_cmd (cli_cmd_find (args->command, NULL), args,
                            file_spec, settings, reply_p, data_p, err);
}

int
cli_show (const cli_args_t *args, const cli_settings_t *settings,
          const pv_t *data, FILE *out, FILE *err)
{
    return cli_show_cmd (cli_cmd_find (args->command, NULL), args, settings,
                         data, out, err);
}
