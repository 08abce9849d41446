/*  =========================================================================
    cli - argument parsing: getopt_long over the table of commands

    A command line is: global options, the topic and its subcommand
    (commands.c), then the command's words and options, among which global
    options may come too. Both parts go through getopt_long in POSIX order
    ("+": it stops at the first word that is not an option), so a word is
    handed to the command as it comes (an id, BACKEND ACTION) and options
    are read wherever they are written. Options take --name VALUE or
    --name=VALUE, and an unambiguous prefix of a long name, as getopt_long
    reads them for gridbroker and gridagent. After `job run ... BACKEND
    ACTION` every --NAME VALUE is a param of the action (s_param_arg), read
    by hand since getopt_long knows no param names.
    =========================================================================
*/
#include "cmd.h"

#include <czmq.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "../proto/keys.h"
#include "../proto/sha256.h"
#include "commands.h"
#include "util.h"

#define S_FILE_CONTENT_MAX 4096  //  file put's content param, at most

//  The content of the local file PATH for file put's --src, as text into
//  CONTENT (S_FILE_CONTENT_MAX + 1 bytes). Returns 0, 1 when it is no
//  inline text (larger, or binary: it goes as a blob), or -1 with ERR.
static int
s_file_content (const char *path, char *content, char *err, size_t err_len)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return cli_fail (err, err_len, "--src %s: %s", path,
                         strerror (errno));
    size_t len = fread (content, 1, S_FILE_CONTENT_MAX + 1, file);
    bool failed = ferror (file) != 0;
    fclose (file);
    if (failed)
        return cli_fail (err, err_len, "--src %s: cannot read it", path);
    if (len > S_FILE_CONTENT_MAX || memchr (content, 0, len))
        return 1;
    content [len] = 0;
    return 0;
}

//  Adds param NAME=VALUE to ARGS. Returns 0, or -1 with ERR.
static int
s_param_add (cli_args_t *args, const char *name, const char *value,
             char *err, size_t err_len)
{
    for (size_t p = 0; p < args->param_count; p++)
        if (streq (args->params [p].name, name))
            return cli_fail (err, err_len, "param --%s is given twice", name);
    if (args->param_count >= JOB_MAX_PARAMS)
        return cli_fail (err, err_len, "too many params (at most %d)",
                         JOB_MAX_PARAMS);
    args->params = cli_realloc (args->params,
                                (args->param_count + 1) * sizeof (cli_param_t));
    args->params [args->param_count].name = cli_strdup (name);
    args->params [args->param_count].value = cli_strdup (value);
    args->param_count++;
    return 0;
}

//  file put --src PATH of a file that is no inline text: params sha256
//  and size, and PATH uploaded before the job is submitted
static int
s_file_blob (cli_args_t *args, const char *path, char *err, size_t err_len)
{
    char sha256 [SHA256_HEX], size [32];
    uint64_t bytes = 0;
    if (cli_file_digest (path, sha256, &bytes, err, err_len))
        return -1;
    snprintf (size, sizeof size, "%" PRIu64, bytes);
    args->upload_src = path;
    if (s_param_add (args, "sha256", sha256, err, err_len))
        return -1;
    return s_param_add (args, "size", size, err, err_len);
}

//  One argument after `job run ... BACKEND ACTION`: --wait, or a param
//  written --NAME VALUE or --NAME=VALUE.
static int
s_param_arg (cli_args_t *args, int argc, char *const *argv, int *index,
             char *err, size_t err_len)
{
    const char *arg = argv [*index];
    if (streq (arg, "--wait")) {
        args->wait = true;
        return 0;
    }
    if (strncmp (arg, "--", 2) != 0 || arg [2] == 0)
        return cli_fail (err, err_len,
                         "unexpected argument '%s' after the action; params "
                         "are written --NAME VALUE", arg);

    const char *equals = strchr (arg + 2, '=');
    size_t name_len = equals ? (size_t) (equals - arg - 2) : strlen (arg + 2);
    char name [NAME_MAX_LEN + 2];
    if (name_len == 0 || name_len > NAME_MAX_LEN)
        return cli_fail (err, err_len, "'%s' is not a valid param name "
                         "(letters, digits, '_' and '-', at most %d)", arg,
                         NAME_MAX_LEN);
    memcpy (name, arg + 2, name_len);
    name [name_len] = 0;
    if (!name_valid (name))
        return cli_fail (err, err_len, "'--%s' is not a valid param name "
                         "(letters, digits, '_' and '-')", name);

    const char *value;
    if (equals)
        value = equals + 1;
    else
    if (*index + 1 < argc && !streq (argv [*index + 1], "--wait"))
        value = argv [++*index];
    else
        return cli_fail (err, err_len, "param --%s needs a value "
                         "(write --%s VALUE)", name, name);

    //  file put: --src LOCAL sends the local file's content, --dest is
    //  the path on the nodes
    char content [S_FILE_CONTENT_MAX + 1];
    if (args->backend && args->action && streq (args->backend, "file")
        && streq (args->action, "put")) {
        if (streq (name, "src")) {
            int rc = s_file_content (value, content, err, err_len);
            if (rc < 0)
                return -1;
            if (rc > 0)
                return s_file_blob (args, value, err, err_len);
            snprintf (name, sizeof name, "content");
            value = content;
        }
        else
        if (streq (name, "dest"))
            snprintf (name, sizeof name, "path");
    }

    return s_param_add (args, name, value, err, err_len);
}

//  The global options: before the command, or among its options.
static const struct option s_global_options [] = {
    {"help", no_argument, NULL, CLI_OPT_HELP},
    {"version", no_argument, NULL, CLI_OPT_VERSION},
    {"print-config", no_argument, NULL, CLI_OPT_PRINT_CONFIG},
    {"broker", required_argument, NULL, CLI_OPT_BROKER},
    {"output", required_argument, NULL, CLI_OPT_OUTPUT},
    {"request-timeout", required_argument, NULL, CLI_OPT_REQUEST_TIMEOUT},
    {"insecure", no_argument, NULL, CLI_OPT_INSECURE},
    {"key", required_argument, NULL, CLI_OPT_KEY},
    {"broker-key", required_argument, NULL, CLI_OPT_BROKER_KEY},
    {"config", required_argument, NULL, CLI_OPT_CONFIG},
};
#define S_GLOBAL_COUNT (sizeof s_global_options / sizeof s_global_options [0])

//  Applies global option OPTION with VALUE. TOPIC is the help topic of
//  the command being parsed (NULL before the command).
static int
s_global_apply (cli_args_t *args, int option, const char *value,
                const char *topic, char *err, size_t err_len)
{
    switch (option) {
        case CLI_OPT_HELP:
            args->command = CLI_CMD_HELP;
            args->help_topic = topic;
            return 0;
        case CLI_OPT_VERSION:
            args->command = CLI_CMD_VERSION;
            return 0;
        case CLI_OPT_PRINT_CONFIG:
            args->command = CLI_CMD_PRINT_CONFIG;
            return 0;
        case CLI_OPT_BROKER:
            if (!*value)
                return cli_fail (err, err_len, "--broker needs an endpoint, "
                                 "e.g. tcp://127.0.0.1:7701");
            args->broker = value;
            return 0;
        case CLI_OPT_OUTPUT:
            if (streq (value, "table"))
                args->output = CLI_OUTPUT_TABLE;
            else
            if (streq (value, "json"))
                args->output = CLI_OUTPUT_JSON;
            else
                return cli_fail (err, err_len, "--output must be table or "
                                 "json, not '%s'", value);
            args->output_given = true;
            return 0;
        case CLI_OPT_REQUEST_TIMEOUT:
            return cli_opt_duration ("--request-timeout", value,
                                     &args->request_timeout_ms, err,
                                     err_len);
        case CLI_OPT_INSECURE:
            args->insecure = true;
            return 0;
        case CLI_OPT_KEY:
            if (!*value)
                return cli_fail (err, err_len, "--key needs a key file");
            args->key = value;
            return 0;
        case CLI_OPT_BROKER_KEY:
            if (!*value)
                return cli_fail (err, err_len, "--broker-key needs a key "
                                 "file or 40 characters of Z85");
            args->broker_key = value;
            return 0;
        case CLI_OPT_CONFIG:
            if (!*value)
                return cli_fail (err, err_len, "--config needs a file name");
            args->config = value;
            return 0;
        default:
            return cli_fail (err, err_len, "unknown option");
    }
}

//  True once ARGS asks for something other than a command: what it asks
//  for is done at once, whatever follows.
static bool
s_done (const cli_args_t *args)
{
    return args->command == CLI_CMD_HELP || args->command == CLI_CMD_VERSION
        || args->command == CLI_CMD_PRINT_CONFIG;
}

//  One pass over a part of the command line: before the command (TOPIC
//  and CMD NULL: global options only, a word ends it), or the command's
//  own arguments.
typedef struct {
    cli_args_t *args;
    const cli_topic_t *topic;     //  NULL before the command
    const cli_cmd_t *cmd;         //  NULL before the command
} s_pass_t;

static int
s_word (s_pass_t *pass, int argc, char *const *argv, int *index,
        char *err, size_t err_len);

//  Applies an option getopt_long read: a global one, or the command's.
static int
s_option (s_pass_t *pass, int option, const char *value, char *err,
          size_t err_len)
{
    if (option < CLI_OPT_COMMAND && option != CLI_OPT_FILE)
        return s_global_apply (pass->args, option, value,
                               pass->topic ? pass->topic->name : NULL, err,
                               err_len);
    return pass->cmd->option (pass->args, option, value, err, err_len);
}

//  The option getopt_long refused at ARGV [AT] as one sentence.
static int
s_refused (s_pass_t *pass, int option, const char *arg, char *err,
           size_t err_len)
{
    char name [256];
    const char *equals = strchr (arg, '=');
    snprintf (name, sizeof name, "%.*s",
              (int) (equals && strncmp (arg, "--", 2) == 0
                     ? equals - arg : (ptrdiff_t) strlen (arg)), arg);
    if (option == ':')
        return cli_fail (err, err_len, "option %s needs a value", name);
    if (!pass->cmd)
        return cli_fail (err, err_len, "unknown option '%s' (global options "
                         "are --broker, --output, --request-timeout, "
                         "--config, --key, --broker-key, --insecure, --help "
                         "and --version)", arg);
    return cli_fail (err, err_len, "unknown option '%s' for %s (see gridcli "
                     "%s --help)", arg, cli_command_name (pass->args->command),
                     pass->topic->name);
}

//  Parses ARGV [*INDEX ..] with getopt_long until the end, or (before the
//  command) the first word. *INDEX ends at the first argument not read.
static int
s_pass (s_pass_t *pass, int argc, char *const *argv, int *index, char *err,
        size_t err_len)
{
    //  The options of this pass: the global ones and the command's own
    size_t own = 0, more = 0;
    if (pass->cmd && pass->cmd->options)
        while (pass->cmd->options [own].name)
            own++;
    if (pass->cmd && pass->cmd->more_options)
        while (pass->cmd->more_options [more].name)
            more++;
    struct option *options = cli_realloc (NULL, (S_GLOBAL_COUNT + own + more
                                                 + 1) * sizeof *options);
    memcpy (options, s_global_options, sizeof s_global_options);
    if (own)
        memcpy (options + S_GLOBAL_COUNT, pass->cmd->options,
                own * sizeof *options);
    if (more)
        memcpy (options + S_GLOBAL_COUNT + own, pass->cmd->more_options,
                more * sizeof *options);
    memset (options + S_GLOBAL_COUNT + own + more, 0, sizeof *options);
    char shorts [32];
    snprintf (shorts, sizeof shorts, "+:h%s",
              pass->cmd && pass->cmd->short_opts ? pass->cmd->short_opts
                                                 : "");

    //  getopt_long is given one option at a time, as the first argument
    //  of the arguments from there on, and starts afresh each time
    //  (optind 0), so that the words between options are read here and
    //  no state of an earlier parse is ever used.
    int at = *index;
    int rc = 0;
    bool options_end = false;     //  After "--": words only
    while (rc == 0 && !s_done (pass->args) && at < argc) {
        const char *arg = argv [at];
        bool is_option = !options_end && arg [0] == '-' && arg [1];
        //  A public key may start with '-': 40 characters of Z85 are a key
        if (is_option && pass->cmd && (pass->cmd->args & CLI_ARG_KEY)
            && !pass->args->id && keys_z85_valid (arg))
            is_option = false;
        //  After BACKEND ACTION, everything is a param (s_param_arg)
        if (pass->cmd && (pass->cmd->args & CLI_ARG_JOB)
            && pass->args->action)
            is_option = false;
        if (is_option && streq (arg, "--")) {
            options_end = true;
            at++;
            continue;
        }
        if (!is_option) {
            if (!pass->cmd)
                break;           //  The command
            rc = s_word (pass, argc, argv, &at, err, err_len);
            at++;
            continue;
        }
        char *const *words = argv + at - 1;
        optind = 0;
        opterr = 0;
        int option = getopt_long (argc - at + 1, words, shorts, options,
                                  NULL);
        //  What it read: the option, and its value when that was the next
        //  argument (-h followed by more letters reads as -h alone)
        int read = optind > 1 ? optind - 1 : 1;
        if (option == '?' || option == ':' || option == -1)
            rc = s_refused (pass, option, arg, err, err_len);
        else
            rc = s_option (pass, option, optarg, err, err_len);
        at += read;
    }
    *index = at;
    free (options);
    return rc;
}

//  A word of the command at ARGV [*INDEX] (which it may move past the
//  words it reads too).
static int
s_word (s_pass_t *pass, int argc, char *const *argv, int *index,
        char *err, size_t err_len)
{
    cli_args_t *args = pass->args;
    const cli_cmd_t *cmd = pass->cmd;
    const char *arg = argv [*index];
    if ((cmd->args & CLI_ARG_JOB) && args->action)
        return s_param_arg (args, argc, argv, index, err, err_len);
    if ((cmd->args & CLI_ARG_ID) && (cmd->args & CLI_ARG_JOB) && !args->id) {
        args->id = arg;          //  schedule add NAME
        return 0;
    }
    if ((cmd->args & CLI_ARG_JOB) && !args->file) {
        if (!args->backend)
            args->backend = arg;
        else
            args->action = arg;
        return 0;
    }
    if (cmd->args & CLI_ARG_JOB)
        return cli_fail (err, err_len, "unexpected argument '%s': %s -f FILE "
                         "takes the whole job from the file", arg,
                         cli_command_name (args->command));
    if ((cmd->args & CLI_ARG_ID) && !args->id) {
        args->id = arg;
        return 0;
    }
    return cli_fail (err, err_len, "unexpected argument '%s' for %s", arg,
                     cli_command_name (args->command));
}

//  Sets the command from TOPIC's subcommand SUB (NULL: none given; -h,
//  --help and help: the topic's help). Returns the row, or NULL (help,
//  or an error with a sentence that lists the subcommands).
static const cli_cmd_t *
s_subcommand (cli_args_t *args, const cli_topic_t *topic, const char *sub,
              char *err, size_t err_len)
{
    if (sub && (streq (sub, "-h") || streq (sub, "--help")
                || streq (sub, "help"))) {
        args->command = CLI_CMD_HELP;
        return NULL;
    }
    char names [256] = "";
    size_t count = 0;
    while (topic->cmds [count].command != CLI_CMD_NONE)
        count++;
    for (size_t index = 0; index < count; index++) {
        if (sub && streq (sub, topic->cmds [index].name)) {
            args->command = topic->cmds [index].command;
            return &topic->cmds [index];
        }
        size_t used = strlen (names);
        snprintf (names + used, sizeof names - used, "%s%s",
                  index == 0 ? "" : !sub && index == count - 1 ? " or "
                                                              : ", ",
                  topic->cmds [index].name);
    }
    if (!sub)
        cli_fail (err, err_len, "%s needs a subcommand: %s", topic->name,
                  names);
    else
        cli_fail (err, err_len, "unknown %s subcommand '%s' (%s)",
                  topic->name, sub, names);
    return NULL;
}

int
cli_args_parse (cli_args_t *args, int argc, char *const *argv, char *err,
                size_t err_len)
{
    memset (args, 0, sizeof *args);
    args->retries = -1;
    if (err_len)
        err [0] = 0;

    //  Global options before the command
    s_pass_t pass = { args, NULL, NULL };
    int index = 1;
    if (s_pass (&pass, argc, argv, &index, err, err_len) != 0)
        return -1;
    if (args->command == CLI_CMD_HELP || args->command == CLI_CMD_VERSION)
        return 0;
    //  --print-config shows what the other global options make of the
    //  settings; it takes no command
    if (args->command == CLI_CMD_PRINT_CONFIG)
        return index < argc ? cli_fail (err, err_len, "--print-config takes "
                                        "no command ('%s')", argv [index])
                            : 0;
    if (index >= argc)
        return cli_fail (err, err_len, "no command given");

    const char *word = argv [index++];
    if (streq (word, "help")) {
        args->command = CLI_CMD_HELP;
        if (index < argc) {
            if (!cli_topic_find (argv [index])) {
                char names [256] = "";
                for (size_t at = 0; at < cli_topic_count; at++) {
                    size_t used = strlen (names);
                    snprintf (names + used, sizeof names - used, "%s%s",
                              at ? ", " : "", cli_topics [at]->name);
                }
                return cli_fail (err, err_len, "no help on '%s' (topics: %s)",
                                 argv [index], names);
            }
            args->help_topic = cli_topic_find (argv [index])->name;
        }
        return 0;
    }
    const cli_topic_t *topic = cli_topic_find (word);
    if (!topic) {
        if (streq (word, "keygen"))
            return cli_fail (err, err_len, "keygen takes no global options: "
                             "run gridcli keygen [--out DIR] [--name NAME]");
        char names [256] = "";
        for (size_t at = 0; at < cli_topic_count; at++) {
            size_t used = strlen (names);
            snprintf (names + used, sizeof names - used, "%s, ",
                      cli_topics [at]->name);
        }
        return cli_fail (err, err_len, "unknown command '%s' (commands: "
                         "%skeygen, help)", word, names);
    }
    args->help_topic = topic->name;
    const cli_cmd_t *cmd = NULL;
    if (topic->cmds [0].name == NULL) {
        //  A topic that is itself the command (status, metrics)
        cmd = &topic->cmds [0];
        args->command = cmd->command;
    }
    else {
        cmd = s_subcommand (args, topic, index < argc ? argv [index] : NULL,
                            err, err_len);
        if (!cmd)
            return args->command == CLI_CMD_HELP ? 0 : -1;
        index++;
    }
    pass.topic = topic;
    pass.cmd = cmd;
    snprintf (args->command_name, sizeof args->command_name, "%s",
              cli_command_name (cmd->command));
    if (s_pass (&pass, argc, argv, &index, err, err_len) != 0)
        return -1;
    if (s_done (args))
        return 0;
    return cmd->check ? cmd->check (args, err, err_len) : 0;
}

void
cli_args_clear (cli_args_t *args)
{
    if (!args)
        return;
    target_clear (&args->target);
    for (size_t index = 0; index < args->param_count; index++) {
        free (args->params [index].name);
        free (args->params [index].value);
    }
    free (args->params);
    memset (args, 0, sizeof *args);
}
