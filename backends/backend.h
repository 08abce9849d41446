/*  =========================================================================
    backend - the closed set of actions an agent can run

    A backend is an ops table (nng style): a name and a fixed list of
    actions. Each action declares whether it is a query (read-only) or
    modifies the host, a one-line help, its parameters (name, required,
    type, pattern, range, default, help), and how it runs:

      - a program: the action builds an argv array; the program is found
        in the tool directory (or a fixed safe PATH) and run with execve,
        never through a shell;
      - a child function: run in a forked child that may only do
        async-signal-safe work (the test backend, so that timeouts and
        cancels take the same kill path as programs);
      - an in-process function: run in the agent's loop, returns at once
        (system facts, resolv.conf).

    Parameter checking (backend_params_check) works on the proto_*_spec_t
    form that travels in hello, so the broker can run the very same check
    at submit time; it holds no agent state. Rules: unknown params are
    refused; required ones must be present; values of every type except
    "text" may not start with '-', may not hold control characters,
    non-ASCII bytes or any of ;|&$`<>(){}[]*?!~'"\ ; no value may hold a
    NUL byte or exceed BACKEND_MAX_VALUE bytes; then the type (int range,
    bool, absolute path, host) and the pattern (POSIX extended regex,
    compiled once per process) are checked.

    Param types: "string", "text" (free text: only the NUL and length rules
    apply), "int" (decimal, within [min_value, max_value] when
    min_value < max_value), "bool" (true|false), "path" (absolute, no "."
    or ".." segments; canonicalised on the agent), "host" (IPv4 or IPv6
    literal, or a DNS name), "duration" (names.h duration_parse).

    Checks (dry runs): a modify action may declare a check, a plan
    function like its own that fills the plan to run something that
    changes nothing (a query program with a parser, or an in-process
    function) and reports whether the action would change the host:
    backend_check_verdict writes the verdict (data would_change "true",
    "false" or "unknown", current, desired) and backend_check_diff a
    bounded line diff (data diff). backend_check_plan_new makes the plan a
    check command runs: the action's check; a query action itself (it
    changes nothing; its result says would_change "false"); a modify
    action without a check, a plan that answers "unknown" and runs
    nothing. Whatever it is, the action's own plan never runs.

    Threading: the tables are constant; backend_params_check may be called
    from any thread; a plan belongs to one thread.
    =========================================================================
*/
#ifndef GRID_BACKEND_H
#define GRID_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"

#define BACKEND_MAX_VALUE 4096     //  Longest param value in bytes
#define BACKEND_MAX_ARGV 16        //  Most argv entries of a program action
#define BACKEND_SAFE_PATH \
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define BACKEND_RESOLV_CONF "/etc/resolv.conf"
#define BACKEND_CHECK_MAX_DIFF 3800   //  Longest diff a check reports (bytes)
#define BACKEND_CHECK_MAX_LINES 2000  //  Texts longer than this get no diff

//  Param type names (the "type" of proto_param_spec_t)
#define BACKEND_TYPE_STRING "string"
#define BACKEND_TYPE_TEXT "text"
#define BACKEND_TYPE_INT "int"
#define BACKEND_TYPE_BOOL "bool"
#define BACKEND_TYPE_PATH "path"
#define BACKEND_TYPE_HOST "host"
#define BACKEND_TYPE_DURATION "duration"

//  What the agent lends to every plan; it outlives the plans.
typedef struct {
    const char *tool_dir;       //  Programs only from here, or NULL: safe PATH
    const char *resolv_conf;    //  File the network backend reads and writes
    char *const *file_roots;    //  Directories the file backend may touch
    size_t file_root_count;     //  How many (0: the file backend is off)
    const char *test_dir;       //  Where test mark writes, or NULL: nowhere
    const char *blob_dir;       //  The agent's blob cache (file.put of a
                                //  sha256 reads the blob there), or NULL
} backend_context_t;

//  What an in-process action (or a program's output parser) reports.
typedef struct {
    bool ok;                    //  The action did what was asked
    char *output;               //  Text for operators (owned, may be NULL)
    char *error;                //  Why it failed (owned, may be NULL)
    int32_t exit_code;          //  0, or a failure code; -1 when none
    proto_kv_t *data;           //  Structured facts (owned)
    size_t data_count;          //  How many
} backend_outcome_t;

typedef enum {
    BACKEND_RUN_PROGRAM = 1,    //  execve argv[0] resolved in the tool dir
    BACKEND_RUN_CHILD,          //  a function in a forked child
    BACKEND_RUN_INPROC          //  a function in the agent's loop
} backend_run_t;

typedef struct backend_plan_s backend_plan_t;

//  How far a running task has come: what the agent sends in a progress
//  message (proto/PROTOCOL.md).
typedef struct {
    int32_t percent;             //  0..100, or -1 when unknown
    char kind [32];              //  What it does now, a name ("downloading"), or ""
    char message [PROTO_MAX_PROGRESS + 1];  //  A short line, or ""
} backend_progress_t;

//  The progress API. Called by the agent on its loop, at most once per
//  progress interval, for a task of PLAN that started ELAPSED_MS ago and
//  whose standard output's last complete line so far is LAST_LINE (""
//  when none). Fills PROGRESS (zeroed, percent -1, by the caller) and
//  returns true when there is something to report. A backend sets
//  plan->progress in its plan function; without one, backend_progress
//  reports the last line (kind "output").
typedef bool (backend_progress_fn) (const backend_plan_t *plan,
                                    int64_t elapsed_ms, const char *last_line,
                                    backend_progress_t *progress);

//  Runs in a forked child with stdout/stderr on the capture pipes. Only
//  async-signal-safe calls are allowed (write, nanosleep, fork...). Returns
//  the exit code.
typedef int (backend_child_fn) (const backend_plan_t *plan);

//  Runs in the agent's loop and fills OUTCOME (zeroed by the caller).
typedef void (backend_inproc_fn) (const backend_plan_t *plan,
                                  backend_outcome_t *outcome);

//  After a program ended: OUTPUT is its captured stdout, OUTCOME holds
//  ok (exit code 0) and exit_code; the parser may add data and change ok
//  (a query that answers "inactive" with code 3 still worked).
typedef void (backend_parse_fn) (const backend_plan_t *plan,
                                 const char *output,
                                 backend_outcome_t *outcome);

//  How one checked command runs. Made by backend_plan_new.
struct backend_plan_s {
    backend_run_t run;           //  Which kind of run
    char *argv [BACKEND_MAX_ARGV + 1];  //  PROGRAM: argv[0] the tool (owned)
    size_t argc;                 //  PROGRAM: entries in argv
    const char *env;             //  PROGRAM: an extra "K=V", or NULL
    backend_child_fn *child;     //  CHILD: the function
    backend_inproc_fn *inproc;   //  INPROC: the function
    backend_parse_fn *parse;     //  PROGRAM: output parser, or NULL
    const char *text;            //  CHILD: a text argument (in params)
    size_t text_len;             //  CHILD: its length
    int64_t number;              //  CHILD: a number argument
    int64_t interval_ms;         //  CHILD: a time argument
    proto_kv_t *params;          //  With defaults, paths canonical (owned)
    size_t param_count;          //  How many
    const backend_context_t *context;  //  Borrowed from the agent
    uint32_t attempt;            //  The command's attempt, from 1 (0: unknown)
    backend_progress_fn *progress;  //  Progress reporter, or NULL (the last line)
    bool checking;               //  The plan of a check command: a
                                 //  program's parser writes the output
    bool check_query;            //  A query run for a check command: its
                                 //  result says would_change "false"
};

//  One declared parameter.
typedef struct {
    const char *name;            //  Param name
    const char *type;            //  BACKEND_TYPE_*
    bool required;               //  Must be given
    const char *pattern;         //  POSIX extended regex, or NULL
    int64_t min_value;           //  int: smallest value (when < max_value)
    int64_t max_value;           //  int: largest value
    const char *default_value;   //  When not given, or NULL
    const char *help;            //  One line
} backend_param_t;

//  Fills PLAN's run fields from PLAN->params (checked, defaults applied).
//  Returns 0, or -1 with a sentence in ERR (the command is refused).
typedef int (backend_plan_fn) (backend_plan_t *plan, char *err,
                               size_t err_len);

//  One action.
typedef struct {
    const char *name;            //  Action name
    bool modify;                 //  Changes the host (else a query)
    const char *help;            //  One line
    const backend_param_t *params;  //  Its params
    size_t param_count;          //  How many
    backend_plan_fn *plan;       //  How it runs
    //  Running it twice does no harm (installing an installed package,
    //  starting a running unit): a broker may run it again elsewhere after
    //  taking it back from a node that went silent. Queries are always so.
    bool idempotent;
    //  Modify actions: how its check runs (see the top), or NULL: a check
    //  command answers "unknown" (cannot tell) and runs nothing
    backend_plan_fn *check;
} backend_action_t;

//  One backend: the ops table.
typedef struct {
    const char *name;            //  Backend name
    const backend_action_t *actions;  //  Its closed set of actions
    size_t action_count;         //  How many
    const char *version;         //  Its version (in the hello; bump it when an
                                 //  action, a param or a behaviour changes)
} backend_ops_t;

//  The built-in backends (one file each).
extern const backend_ops_t backend_test_ops;
extern const backend_ops_t backend_system_ops;
extern const backend_ops_t backend_ping_ops;
extern const backend_ops_t backend_network_ops;
extern const backend_ops_t backend_apt_ops;
extern const backend_ops_t backend_systemd_ops;
extern const backend_ops_t backend_rke2_ops;
extern const backend_ops_t backend_file_ops;

//  ---------------------------------------------------------------------
//  backends.c: the list, lookup, checking, hello specs, plans

//  PLAN's progress after ELAPSED_MS with LAST_LINE (see backend_progress_fn):
//  its backend's reporter, or the last line. Fills *PROGRESS; returns true
//  when there is something to report.
bool backend_progress (const backend_plan_t *plan, int64_t elapsed_ms,
                       const char *last_line, backend_progress_t *progress);

//  Copies TEXT into the progress message, cut at a character boundary and
//  without control characters.
void backend_progress_say (backend_progress_t *progress, const char *text);

//  The built-in backends, in a fixed order; *COUNT_P gets how many.
const backend_ops_t *const *backends_all (size_t *count_p);

//  A built-in backend by name, or NULL.
const backend_ops_t *backend_find (const char *name);

//  An action of OPS by name, or NULL.
const backend_action_t *backend_action_find (const backend_ops_t *ops,
                                             const char *name);

//  The proto form of ACTION (built once per process, never freed; valid
//  for the life of the process).
const proto_action_spec_t *backend_action_spec (const backend_action_t *action);

//  Checks PARAMS (COUNT entries) against SPEC: see the rules at the top.
//  Returns 0, or -1 with a sentence naming the param in ERR.
int backend_params_check (const proto_action_spec_t *spec,
                          const proto_kv_t *params, size_t count,
                          char *err, size_t err_len);

//  Checks one value of LEN bytes (which may hold a NUL, unlike a C string)
//  against PARAM. Returns 0, or -1 with a sentence in ERR.
int backend_value_check (const proto_param_spec_t *param, const char *value,
                         size_t len, char *err, size_t err_len);

//  The hello form of every built-in backend not named in DISABLED
//  (DISABLED_COUNT names): a malloc'd array of deep copies, as
//  proto_msg_t.backends owns them. Returns 0 or -1 (out of memory).
int backends_hello_specs (char *const *disabled, size_t disabled_count,
                          proto_backend_spec_t **specs_p, size_t *count_p);

//  Frees what backends_hello_specs made; NULL-safe, nulls *specs_p.
void backends_specs_free (proto_backend_spec_t **specs_p, size_t count);

//  Checks PARAMS against ACTION, copies them with defaults applied,
//  canonicalises "path" params (realpath of the parent; the result must
//  still match the param's pattern), and asks the action how it runs.
//  CONTEXT is borrowed for the life of the plan. Returns a new plan, or
//  NULL with a sentence in ERR (the command is refused).
backend_plan_t *backend_plan_new (const backend_action_t *action,
                                  const backend_context_t *context,
                                  const proto_kv_t *params, size_t count,
                                  char *err, size_t err_len);

//  The plan of a check command for ACTION (see the top): the same param
//  checks as backend_plan_new, then the action's check, the query itself,
//  or a plan that answers "unknown". Never the modify action's own plan.
//  Returns a new plan, or NULL with a sentence in ERR.
backend_plan_t *backend_check_plan_new (const backend_action_t *action,
                                        const backend_context_t *context,
                                        const proto_kv_t *params,
                                        size_t count, char *err,
                                        size_t err_len);

//  Writes a check's verdict into OUTCOME: ok, exit code 0, data
//  would_change ("true" when WOULD_CHANGE > 0, "false" when 0, "unknown"
//  when < 0), current and desired (each when not NULL), and one line of
//  output ("would change: CURRENT -> DESIRED", "no change: CURRENT",
//  "cannot tell: CURRENT").
void backend_check_verdict (backend_outcome_t *outcome, int would_change,
                            const char *current, const char *desired);

//  Adds to OUTCOME's data "diff": a unified line diff (3 lines of context,
//  "--- LABEL (current)" / "+++ LABEL (desired)" headers) of OLD to NEW_,
//  cut at BACKEND_CHECK_MAX_DIFF bytes (then it ends with a line saying
//  so); when either text has more than BACKEND_CHECK_MAX_LINES lines or
//  holds a NUL byte the diff is a sentence saying why none is given.
//  Adds nothing when the texts are equal. Returns 0, or -1 (no memory).
int backend_check_diff (backend_outcome_t *outcome, const char *label,
                        const char *old, size_t old_len, const char *new_,
                        size_t new_len);

//  Frees a plan; NULL-safe, nulls *plan_p.
void backend_plan_destroy (backend_plan_t **plan_p);

//  Value of param NAME in PLAN (after defaults), or NULL.
const char *backend_plan_param (const backend_plan_t *plan, const char *name);

//  Appends one argument to a PROGRAM plan's argv (copied). Returns 0, or
//  -1 when argv is full or memory runs out.
int backend_plan_arg (backend_plan_t *plan, const char *arg);

//  Resolves program NAME (a bare name, no '/') to an absolute path in
//  PATH_BUF: in TOOL_DIR only when TOOL_DIR is not NULL, else in
//  BACKEND_SAFE_PATH. The file must be a regular executable file.
//  Returns 0, or -1 with a sentence in ERR.
int backend_tool_path (const char *tool_dir, const char *name,
                       char *path_buf, size_t path_len, char *err,
                       size_t err_len);

//  Adds KEY=VALUE to OUTCOME's data (both copied). Returns 0 or -1.
int backend_outcome_data (backend_outcome_t *outcome, const char *key,
                          const char *value);
//  Adds KEY=VALUE, a whole number: sent as a msgpack int to a broker that
//  takes typed data, so that JSON readers get a number. Returns 0 or -1.
int backend_outcome_data_int (backend_outcome_t *outcome, const char *key,
                              int64_t value);

//  Sets OUTCOME's output / error to a formatted string (replacing any).
void backend_outcome_output (backend_outcome_t *outcome, const char *format,
                             ...) __attribute__ ((format (printf, 2, 3)));
void backend_outcome_error (backend_outcome_t *outcome, const char *format,
                            ...) __attribute__ ((format (printf, 2, 3)));

//  Frees what OUTCOME owns and zeroes it.
void backend_outcome_clear (backend_outcome_t *outcome);

#endif
