/*  =========================================================================
    cmd - gridcli's table of commands, and what its files share

    gridcli is a table of commands, as git's builtins or systemctl's verbs:
    each topic (job, node, key, ...) is one file, cmd_<topic>.c, that holds
    its --help text, the options of its subcommands, the checks of a
    complete command line, the request each one sends and the table each
    reply is rendered as; commands.c lists the topics. A new command is a
    row in its topic's table (and a new topic one file and one line in
    commands.c).

    This header holds the types of the table only. A topic file includes
    it and the modules it uses, each with its own header, none of which
    knows the table: util.h (sentences, numbers, shared option values and
    checks), request.h (the reply envelope, calls through
    client/client.h), render.h (printable text, aligned tables, JSON,
    fields of broker data), render_job.h (the job record, used by job
    status, job run --wait and --check) and jobopts.h (the job options of
    job run and schedule add). What goes through the whole table (the
    lookups, parse.c's getopt_long over the global options and the
    command's own, cli_request and cli_show) sits above the topic files:
    commands.h. So the include graph of cli/ has no circle.

    Threading: one thread, as gridcli.
    =========================================================================
*/
#ifndef GRID_CLI_CMD_H
#define GRID_CLI_CMD_H

#include <getopt.h>

#include "../client/client.h"
#include "cli.h"

//  getopt_long values of the global options (parse.c); a command's own
//  options use values from CLI_OPT_COMMAND on.
enum {
    CLI_OPT_HELP = 'h',
    CLI_OPT_FILE = 'f',
    CLI_OPT_VERSION = 256,
    CLI_OPT_PRINT_CONFIG,
    CLI_OPT_BROKER,
    CLI_OPT_OUTPUT,
    CLI_OPT_REQUEST_TIMEOUT,
    CLI_OPT_INSECURE,
    CLI_OPT_KEY,
    CLI_OPT_BROKER_KEY,
    CLI_OPT_CONFIG,
    CLI_OPT_COMMAND = 300
};

//  What the words of a command line that are not options are.
#define CLI_ARG_ID 1        //  One word: the job, node, key, entry or name
#define CLI_ARG_KEY 2       //  That word may be a public key starting '-'
#define CLI_ARG_JOB 4       //  BACKEND ACTION [--PARAM VALUE ...] (job run)

typedef struct {
    const char *name;         //  The subcommand ("run"), NULL for a topic
                              //  that is itself the command (status)
    cli_command_t command;    //  Its value in cli_args_t
    unsigned args;            //  CLI_ARG_ bits
    const char *short_opts;   //  getopt short options besides h, or NULL
    const struct option *options;  //  Its own options, or NULL
    const struct option *more_options;  //  A second table, or NULL
    //  Applies OPTION (a val of its tables) with VALUE (optarg). Returns 0
    //  or -1 with a sentence in ERR.
    int (*option) (cli_args_t *args, int option, const char *value,
                   char *err, size_t err_len);
    //  Checks the whole command line once parsed. Returns 0 or -1.
    int (*check) (cli_args_t *args, char *err, size_t err_len);
    //  Writes its request with id ID. FILE_SPEC: the loaded job file of
    //  job run and schedule add. Returns 0, or -1 (ERRORS filled).
    int (*build) (const cli_args_t *args, const job_spec_t *file_spec,
                  const char *id, pw_t *writer, job_errors_t *errors);
    //  Renders its reply's data as a table. Returns 0, -1 (writing
    //  failed) or -2 (DATA lacks the reply's shape).
    int (*render) (const pv_t *data, FILE *out);
    //  Rewrites its reply's data for --output json where the broker's
    //  wire keeps an older shape (docs/CLI.md): writes the document to
    //  WRITER. NULL: the data as it came.
    void (*json) (const pv_t *data, pw_t *writer);
    //  Commands that are more than one request and a table (job run,
    //  status, events, output): the whole run, FILE_SPEC as for build.
    //  Returns the exit code. NULL: cli_request, then cli_show.
    int (*run) (const cli_args_t *args, const job_spec_t *file_spec,
                const cli_settings_t *settings, FILE *out, FILE *err);
} cli_cmd_t;

typedef struct {
    const char *name;         //  The first word: "job"
    const char *help;         //  gridcli help job
    const cli_cmd_t *cmds;    //  Its commands, up to one with CLI_CMD_NONE
} cli_topic_t;

//  Each topic file's own row (cmd_<topic>.c); commands.c lists them in
//  the order the main help does (commands.h).
extern const cli_topic_t cli_topic_job, cli_topic_node, cli_topic_broker,
    cli_topic_key, cli_topic_dlq, cli_topic_queue, cli_topic_schedule,
    cli_topic_status, cli_topic_token, cli_topic_metrics, cli_topic_relay,
    cli_topic_audit, cli_topic_cluster, cli_topic_notify, cli_topic_file;

//  cmd_file.c: the sha256 and size of the local file PATH (for file put
//  --src). Returns 0, or -1 with ERR.
int cli_file_digest (const char *path, char *sha256, uint64_t *size_p,
                     char *err, size_t err_len);

//  cmd_file.c: stores the local file PATH in the broker as a blob (what
//  the broker has of it is not sent again): *STORED_P says whether any
//  piece went. Fills SHA256 (SHA256_HEX bytes) and *SIZE_P. Returns an
//  exit code, after saying why on ERR.
int cli_file_upload (const cli_settings_t *settings, const char *path,
                     char *sha256, uint64_t *size_p, bool *stored_p,
                     FILE *err);

#endif
