/*  =========================================================================
    job - the job spec: tasks, phases, jobs; validation; wire and YAML forms

    Decoding does not stop at the first problem: an operator who fixes a
    job file wants every mistake in one go, each with the path that leads
    to it ("tasks[1].tasks[0].action: required"). So each reader records a
    problem and carries on with what it can still check, and the spec is
    thrown away at the end if anything was found.

    Per-backend parameter checks are not done here: the schemas come from
    the agents, so the broker applies them at submit.
    =========================================================================
*/
#include "job.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"

#define PATH_MAX_LEN 256                 //  Longest path in a sentence
#define IDEMPOTENCY_KEY_MAX 256          //  Longest idempotency key

//  Problems found so far. ERRORS may be NULL: then they are only counted.
typedef struct {
    job_errors_t *errors;
    size_t count;
} s_ctx_t;

static const char *s_name_rule =
    "use letters, digits, '_' and '-' (1 to 64)";
static const char *s_duration_hint = "like 500ms, 10s, 5m or 1h30m";

//  Records "PATH: sentence".
static void
s_problem (s_ctx_t *ctx, const char *path, const char *format, ...)
{
    ctx->count++;
    job_errors_t *errors = ctx->errors;
    if (!errors)
        return;
    if (errors->count == JOB_MAX_ERRORS) {
        errors->truncated = true;
        return;
    }
    char sentence [512];
    int used = snprintf (sentence, sizeof (sentence), "%s: ", path);
    if (used < 0)
        return;
    if ((size_t) used < sizeof (sentence)) {
        va_list args;
        va_start (args, format);
        vsnprintf (sentence + used, sizeof (sentence) - (size_t) used, format,
                   args);
        va_end (args);
    }
    char *item = strdup (sentence);
    if (item)
        errors->items [errors->count++] = item;
    else
        errors->truncated = true;
}

//  Marks a path that did not fit (USED is snprintf's return).
static void
s_path_fit (char *path, int used)
{
    if (used < 0)
        path [0] = '\0';
    else
    if (used >= PATH_MAX_LEN)
        memcpy (path + PATH_MAX_LEN - 4, "...", 4);
}

//  PREFIX + "." + KEY, or KEY at the root (empty PREFIX).
static void
s_path_key (char *path, const char *prefix, const char *key)
{
    s_path_fit (path, snprintf (path, PATH_MAX_LEN, "%s%s%s", prefix,
                                *prefix ? "." : "", key));
}

//  PREFIX + "[INDEX]".
static void
s_path_index (char *path, const char *prefix, size_t index)
{
    s_path_fit (path, snprintf (path, PATH_MAX_LEN, "%s[%zu]", prefix, index));
}

//  Reports every key of MAP that is not in the NULL-terminated KNOWN.
static void
s_check_keys (s_ctx_t *ctx, const pv_t *map, const char *prefix,
              const char *const *known)
{
    for (size_t i = 0; i < pv_size (map); i++) {
        const pv_t *key = pv_map_key_at (map, i);
        bool found = false;
        for (const char *const *name = known; *name && !found; name++)
            found = pv_str_eq (key, *name);
        if (found)
            continue;
        size_t len = 0;
        const char *text = pv_str (key, &len);
        char show [NAME_SHOW_LEN];
        char path [PATH_MAX_LEN];
        s_path_key (path, prefix, name_show (text, len, show, sizeof (show)));
        s_problem (ctx, path, "unknown key");
    }
}

static const char *
s_type_name (const pv_t *value)
{
    return pv_type_name (pv_type (value));
}

//  Reads a string into a fresh copy. Returns NULL after reporting a
//  problem (wrong type, or a NUL byte inside).
static char *
s_read_string (s_ctx_t *ctx, const pv_t *value, const char *path)
{
    if (pv_type (value) != PV_STR) {
        s_problem (ctx, path, "expected a string, got %s",
                   s_type_name (value));
        return NULL;
    }
    char *text = pv_strdup (value);
    if (!text)
        s_problem (ctx, path, "contains a NUL byte");
    return text;
}

//  Reads a name (backend, action). Returns a fresh copy or NULL.
static char *
s_read_name (s_ctx_t *ctx, const pv_t *value, const char *path)
{
    char *text = s_read_string (ctx, value, path);
    if (text && !name_valid (text)) {
        char show [NAME_SHOW_LEN];
        s_problem (ctx, path, "'%s' is not a valid name: %s",
                   name_show (text, strlen (text), show, sizeof (show)),
                   s_name_rule);
        free (text);
        text = NULL;
    }
    return text;
}

//  Reads an integer in MIN..MAX into *OUT.
static void
s_read_int (s_ctx_t *ctx, const pv_t *value, const char *path, int64_t min,
            int64_t max, int *out)
{
    int64_t number = 0;
    if (pv_type (value) != PV_INT || pv_get_int (value, &number) != 0)
        s_problem (ctx, path, "expected an integer, got %s",
                   s_type_name (value));
    else
    if (number < min || number > max)
        s_problem (ctx, path, "%" PRId64 " is out of range (%" PRId64
                   " to %" PRId64 ")", number, min, max);
    else
        *out = (int) number;
}

//  Reads a duration text into *MS_OUT.
static void
s_read_duration (s_ctx_t *ctx, const pv_t *value, const char *path,
                 int64_t *ms_out)
{
    int64_t number = 0;
    if (pv_type (value) == PV_INT && pv_get_int (value, &number) == 0) {
        s_problem (ctx, path, "%" PRId64 " has no unit: write a duration %s",
                   number, s_duration_hint);
        return;
    }
    if (pv_type (value) != PV_STR) {
        s_problem (ctx, path, "expected a duration %s, got %s",
                   s_duration_hint, s_type_name (value));
        return;
    }
    size_t len = 0;
    const char *raw = pv_str (value, &len);
    char *text = pv_strdup (value);
    if (!text || duration_parse (text, ms_out) != 0) {
        char show [NAME_SHOW_LEN];
        s_problem (ctx, path, "'%s' is not a duration (%s; at most 30d)",
                   name_show (raw, len, show, sizeof (show)),
                   s_duration_hint);
    }
    free (text);
}

static void
s_read_condition (s_ctx_t *ctx, const pv_t *value, const char *path,
                  job_condition_t *out)
{
    static const job_condition_t all [] = {
        JOB_COND_ALWAYS, JOB_COND_ON_SUCCESS, JOB_COND_ON_FAILURE};
    if (pv_type (value) == PV_STR)
        for (size_t i = 0; i < sizeof (all) / sizeof (all [0]); i++)
            if (pv_str_eq (value, job_condition_name (all [i]))) {
                *out = all [i];
                return;
            }
    char show [NAME_SHOW_LEN];
    size_t len = 0;
    const char *text = pv_str (value, &len);
    if (pv_type (value) != PV_STR)
        s_problem (ctx, path, "expected a condition (always, on_success, "
                              "on_failure), got %s",
                   s_type_name (value));
    else
        s_problem (ctx, path,
                   "unknown condition '%s' (always, on_success, on_failure)",
                   name_show (text, len, show, sizeof (show)));
}

static void
s_read_strategy (s_ctx_t *ctx, const pv_t *value, job_strategy_t *out)
{
    if (pv_str_eq (value, "fail-fast"))
        *out = JOB_STRATEGY_FAIL_FAST;
    else
    if (pv_str_eq (value, "continue"))
        *out = JOB_STRATEGY_CONTINUE;
    else
    if (pv_type (value) != PV_STR)
        s_problem (ctx, "strategy",
                   "expected a strategy (fail-fast, continue), got %s",
                   s_type_name (value));
    else {
        char show [NAME_SHOW_LEN];
        size_t len = 0;
        const char *text = pv_str (value, &len);
        s_problem (ctx, "strategy",
                   "unknown strategy '%s' (fail-fast, continue)",
                   name_show (text, len, show, sizeof (show)));
    }
}

static int
s_compare_params (const void *a, const void *b)
{
    return strcmp (((const job_param_t *) a)->name,
                   ((const job_param_t *) b)->name);
}

//  Reads a params map into LEAF: names are names, values are strings,
//  integers or booleans kept as text.
static void
s_read_params (s_ctx_t *ctx, const pv_t *value, const char *prefix,
               job_phase_t *leaf)
{
    char path [PATH_MAX_LEN];
    s_path_key (path, prefix, "params");
    if (pv_type (value) == PV_NIL)
        return;                 //  "params:" with nothing after it
    if (pv_type (value) != PV_MAP) {
        s_problem (ctx, path, "expected a map, got %s", s_type_name (value));
        return;
    }
    size_t count = pv_size (value);
    if (count > JOB_MAX_PARAMS) {
        s_problem (ctx, path, "too many params (%zu, at most %d)", count,
                   JOB_MAX_PARAMS);
        return;
    }
    if (count == 0)
        return;
    leaf->params = calloc (count, sizeof (job_param_t));
    if (!leaf->params) {
        s_problem (ctx, path, "out of memory");
        return;
    }
    for (size_t i = 0; i < count; i++) {
        const pv_t *key = pv_map_key_at (value, i);
        const pv_t *item = pv_map_value_at (value, i);
        size_t key_len = 0;
        const char *key_text = pv_str (key, &key_len);
        char show [NAME_SHOW_LEN];
        name_show (key_text, key_len, show, sizeof (show));
        char *name = pv_strdup (key);
        if (!name || !name_valid (name)) {
            s_problem (ctx, path, "'%s' is not a valid parameter name: %s",
                       show, s_name_rule);
            free (name);
            continue;
        }
        char item_path [PATH_MAX_LEN];
        s_path_key (item_path, path, name);
        char *text = NULL;
        int64_t number = 0;
        bool flag = false;
        size_t len = 0;
        switch (pv_type (item)) {
        case PV_STR:
            pv_str (item, &len);
            if (len > JOB_MAX_PARAM_LEN)
                s_problem (ctx, item_path, "longer than %d bytes",
                           JOB_MAX_PARAM_LEN);
            else
            if (!(text = pv_strdup (item)))
                s_problem (ctx, item_path, "contains a NUL byte");
            break;
        case PV_INT:
            pv_get_int (item, &number);
            if (asprintf (&text, "%" PRId64, number) < 0)
                text = NULL;
            break;
        case PV_BOOL:
            pv_get_bool (item, &flag);
            text = strdup (flag ? "true" : "false");
            break;
        default:
            s_problem (ctx, item_path,
                       "expected a string, integer or boolean, got %s",
                       s_type_name (item));
            break;
        }
        if (!text) {
            free (name);
            continue;
        }
        leaf->params [leaf->param_count].name = name;
        leaf->params [leaf->param_count].value = text;
        leaf->param_count++;
    }
    qsort (leaf->params, leaf->param_count, sizeof (job_param_t),
           s_compare_params);
}

//  Reads one phase at PATH. DEPTH is 1 for a top-level phase, 2 inside a
//  branch. Adds the leaves it holds to *STEPS.
static void
s_read_phase (s_ctx_t *ctx, const pv_t *value, const char *path, int depth,
              job_phase_t *phase, size_t *steps)
{
    static const char *const keys [] = {"backend", "action", "params",
                                        "timeout", "max_retries",
                                        "condition", "tasks",
                                        "stall_timeout", NULL};
    static const char *const leaf_only [] = {"params", "timeout",
                                             "max_retries", "stall_timeout",
                                             NULL};
    char key_path [PATH_MAX_LEN];
    if (pv_type (value) != PV_MAP) {
        s_problem (ctx, path,
                   "expected a map (a task, or a phase with tasks), got %s",
                   s_type_name (value));
        return;
    }
    s_check_keys (ctx, value, path, keys);
    const pv_t *condition = pv_map_get (value, "condition");
    if (condition) {
        s_path_key (key_path, path, "condition");
        s_read_condition (ctx, condition, key_path, &phase->condition);
    }
    const pv_t *backend = pv_map_get (value, "backend");
    const pv_t *action = pv_map_get (value, "action");
    const pv_t *tasks = pv_map_get (value, "tasks");
    if (tasks) {
        s_path_key (key_path, path, "tasks");
        if (depth >= 2) {
            s_problem (ctx, key_path, "nesting deeper than 2");
            return;
        }
        if (backend || action) {
            s_problem (ctx, path, "a phase has either backend/action or "
                                  "tasks, not both");
            return;
        }
        for (const char *const *key = leaf_only; *key; key++)
            if (pv_map_get (value, *key)) {
                char leaf_path [PATH_MAX_LEN];
                s_path_key (leaf_path, path, *key);
                s_problem (ctx, leaf_path, "belongs on a task, not on a "
                                           "phase with tasks");
            }
        if (pv_type (tasks) != PV_ARRAY) {
            s_problem (ctx, key_path, "expected an array, got %s",
                       s_type_name (tasks));
            return;
        }
        size_t count = pv_size (tasks);
        if (count == 0) {
            s_problem (ctx, key_path, "must not be empty");
            return;
        }
        if (count > JOB_MAX_STEPS) {
            s_problem (ctx, key_path, "too many tasks (%zu, at most %d)",
                       count, JOB_MAX_STEPS);
            return;
        }
        phase->tasks = calloc (count, sizeof (job_phase_t));
        if (!phase->tasks) {
            s_problem (ctx, key_path, "out of memory");
            return;
        }
        phase->task_count = count;
        for (size_t i = 0; i < count; i++) {
            char item_path [PATH_MAX_LEN];
            s_path_index (item_path, key_path, i);
            s_read_phase (ctx, pv_array_at (tasks, i), item_path, depth + 1,
                          &phase->tasks [i], steps);
        }
        return;
    }
    (*steps)++;
    s_path_key (key_path, path, "backend");
    if (!backend)
        s_problem (ctx, key_path, "required");
    else
        phase->backend = s_read_name (ctx, backend, key_path);
    s_path_key (key_path, path, "action");
    if (!action)
        s_problem (ctx, key_path, "required");
    else
        phase->action = s_read_name (ctx, action, key_path);

    const pv_t *params = pv_map_get (value, "params");
    if (params)
        s_read_params (ctx, params, path, phase);
    const pv_t *timeout = pv_map_get (value, "timeout");
    if (timeout) {
        s_path_key (key_path, path, "timeout");
        s_read_duration (ctx, timeout, key_path, &phase->timeout_ms);
    }
    const pv_t *retries = pv_map_get (value, "max_retries");
    if (retries) {
        s_path_key (key_path, path, "max_retries");
        s_read_int (ctx, retries, key_path, 0, JOB_MAX_RETRIES,
                    &phase->max_retries);
    }
    const pv_t *stall = pv_map_get (value, "stall_timeout");
    if (stall) {
        s_path_key (key_path, path, "stall_timeout");
        s_read_duration (ctx, stall, key_path, &phase->stall_timeout_ms);
    }
}

//  Reads the target: a map {scope, ?value, ?any} or a text "group:web".
static void
s_read_target (s_ctx_t *ctx, const pv_t *value, target_t *target)
{
    static const char *const keys [] = {"scope", "value", "any", NULL};
    char err [256] = "";
    if (pv_type (value) == PV_STR) {
        char *text = s_read_string (ctx, value, "target");
        if (text && target_parse (text, target, err, sizeof (err)) != 0)
            s_problem (ctx, "target", "%s", err);
        free (text);
        return;
    }
    if (pv_type (value) != PV_MAP) {
        s_problem (ctx, "target",
                   "expected a map {scope, value} or a text like "
                   "\"group:web\", got %s",
                   s_type_name (value));
        return;
    }
    size_t before = ctx->count;
    s_check_keys (ctx, value, "target", keys);
    const pv_t *scope_value = pv_map_get (value, "scope");
    const pv_t *value_value = pv_map_get (value, "value");
    const pv_t *any_value = pv_map_get (value, "any");
    char *scope = NULL;
    char *text = NULL;
    bool any = false;
    if (!scope_value)
        s_problem (ctx, "target.scope", "required");
    else
        scope = s_read_string (ctx, scope_value, "target.scope");
    //  An "all" target written with an empty "value:" reads as nil
    if (value_value && pv_type (value_value) != PV_NIL)
        text = s_read_string (ctx, value_value, "target.value");
    if (any_value && pv_get_bool (any_value, &any) != 0)
        s_problem (ctx, "target.any", "expected true or false, got %s",
                   s_type_name (any_value));
    if (ctx->count == before
        && target_from_parts (scope, text, any, target, err, sizeof (err))
               != 0)
        s_problem (ctx, "target", "%s", err);
    free (scope);
    free (text);
}

static void
s_read_idempotency_key (s_ctx_t *ctx, const pv_t *value, char **out)
{
    char *text = s_read_string (ctx, value, "idempotency_key");
    if (!text)
        return;
    size_t len = strlen (text);
    bool printable = len > 0 && len <= IDEMPOTENCY_KEY_MAX;
    for (size_t i = 0; i < len && printable; i++)
        printable = (unsigned char) text [i] >= 0x20 && text [i] != 0x7f;
    if (!printable) {
        s_problem (ctx, "idempotency_key",
                   "must be 1 to %d bytes of printable text",
                   IDEMPOTENCY_KEY_MAX);
        free (text);
        return;
    }
    *out = text;
}

void
job_errors_clear (job_errors_t *errors)
{
    if (!errors)
        return;
    for (size_t i = 0; i < errors->count; i++)
        free (errors->items [i]);
    memset (errors, 0, sizeof (*errors));
}

int
job_spec_decode (const pv_t *value, job_spec_t **spec_p,
                 job_errors_t *errors)
{
    static const char *const keys [] = {"target",   "tasks",
                                        "strategy", "timeout",
                                        "priority", "idempotency_key",
                                        "dead_letter", "lease_ms",
                                        "limits", "stall_timeout", NULL};
    *spec_p = NULL;
    s_ctx_t ctx = {errors, 0};
    if (pv_type (value) != PV_MAP) {
        s_problem (&ctx, "job", "expected a map, got %s",
                   s_type_name (value));
        return -1;
    }
    job_spec_t *spec = calloc (1, sizeof (job_spec_t));
    if (!spec) {
        s_problem (&ctx, "job", "out of memory");
        return -1;
    }
    s_check_keys (&ctx, value, "", keys);

    const pv_t *target = pv_map_get (value, "target");
    if (!target)
        s_problem (&ctx, "target", "required");
    else
        s_read_target (&ctx, target, &spec->target);

    const pv_t *tasks = pv_map_get (value, "tasks");
    size_t count = pv_size (tasks);
    if (!tasks)
        s_problem (&ctx, "tasks", "required");
    else
    if (pv_type (tasks) != PV_ARRAY)
        s_problem (&ctx, "tasks", "expected an array, got %s",
                   s_type_name (tasks));
    else
    if (count == 0)
        s_problem (&ctx, "tasks", "must not be empty");
    else
    if (count > JOB_MAX_PHASES)
        s_problem (&ctx, "tasks", "too many phases (%zu, at most %d)", count,
                   JOB_MAX_PHASES);
    else
    if (!(spec->phases = calloc (count, sizeof (job_phase_t))))
        s_problem (&ctx, "tasks", "out of memory");
    else {
        spec->phase_count = count;
        size_t steps = 0;
        for (size_t i = 0; i < count; i++) {
            char path [PATH_MAX_LEN];
            s_path_index (path, "tasks", i);
            s_read_phase (&ctx, pv_array_at (tasks, i), path, 1,
                          &spec->phases [i], &steps);
        }
        if (steps > JOB_MAX_STEPS)
            s_problem (&ctx, "tasks", "too many steps (%zu, at most %d)",
                       steps, JOB_MAX_STEPS);
    }

    const pv_t *strategy = pv_map_get (value, "strategy");
    if (strategy)
        s_read_strategy (&ctx, strategy, &spec->strategy);
    const pv_t *timeout = pv_map_get (value, "timeout");
    if (timeout)
        s_read_duration (&ctx, timeout, "timeout", &spec->timeout_ms);
    const pv_t *priority = pv_map_get (value, "priority");
    if (priority)
        s_read_int (&ctx, priority, "priority", -100, 100, &spec->priority);
    const pv_t *key = pv_map_get (value, "idempotency_key");
    if (key)
        s_read_idempotency_key (&ctx, key, &spec->idempotency_key);
    const pv_t *dead_letter = pv_map_get (value, "dead_letter");
    spec->dead_letter = spec->target.any;
    if (dead_letter && pv_get_bool (dead_letter, &spec->dead_letter) != 0)
        s_problem (&ctx, "dead_letter", "expected true or false, got %s",
                   s_type_name (dead_letter));
    const pv_t *lease = pv_map_get (value, "lease_ms");
    if (lease) {
        int lease_ms = 0;
        s_read_int (&ctx, lease, "lease_ms", JOB_MIN_LEASE_MS,
                    JOB_MAX_LEASE_MS, &lease_ms);
        spec->lease_ms = lease_ms;
    }
    const pv_t *stall = pv_map_get (value, "stall_timeout");
    if (stall)
        s_read_duration (&ctx, stall, "stall_timeout",
                         &spec->stall_timeout_ms);
    const pv_t *limits = pv_map_get (value, "limits");
    char why [256];
    if (limits
        && job_limits_read (limits, false, NULL, &spec->limits,
                            &spec->limit_count, why, sizeof why) != 0)
        s_problem (&ctx, "limits", "%s", why);

    if (ctx.count > 0) {
        job_spec_destroy (&spec);
        return -1;
    }
    *spec_p = spec;
    return 0;
}

int
job_spec_load_file (const char *path, job_spec_t **spec_p,
                    job_errors_t *errors)
{
    *spec_p = NULL;
    pv_doc_t *doc = NULL;
    char err [512] = "";
    if (conf_load_file (path, &doc, err, sizeof (err)) != 0) {
        if (errors && errors->count < JOB_MAX_ERRORS) {
            char *item = strdup (err);
            if (item)
                errors->items [errors->count++] = item;
            else
                errors->truncated = true;
        }
        else
        if (errors)
            errors->truncated = true;
        return -1;
    }
    int rc = job_spec_decode (pv_doc_root (doc), spec_p, errors);
    pv_doc_destroy (&doc);
    return rc;
}

//  ---------------------------------------------------------------------
//  Writing

static void
s_write_target (const target_t *target, pw_t *writer)
{
    bool has_value = target->scope != TARGET_ALL && target->value;
    pw_map (writer, 1 + (has_value ? 1 : 0) + (target->any ? 1 : 0));
    pw_str (writer, "scope");
    pw_str (writer, target_scope_name (target->scope));
    if (has_value) {
        pw_str (writer, "value");
        pw_str (writer, target->value);
    }
    if (target->any) {
        pw_str (writer, "any");
        pw_bool (writer, true);
    }
}

static void
s_write_duration (pw_t *writer, const char *key, int64_t ms)
{
    char text [32];
    duration_format (ms, text, sizeof (text));
    pw_str (writer, key);
    pw_str (writer, text);
}

static void
s_write_phase (const job_phase_t *phase, pw_t *writer)
{
    bool has_condition = phase->condition != JOB_COND_ALWAYS;
    if (phase->tasks) {
        pw_map (writer, 1 + (has_condition ? 1 : 0));
        pw_str (writer, "tasks");
        pw_array (writer, phase->task_count);
        for (size_t i = 0; i < phase->task_count; i++)
            s_write_phase (&phase->tasks [i], writer);
    }
    else {
        pw_map (writer, 2 + (phase->param_count > 0 ? 1 : 0)
                            + (phase->timeout_ms > 0 ? 1 : 0)
                            + (phase->max_retries > 0 ? 1 : 0)
                            + (phase->stall_timeout_ms > 0 ? 1 : 0)
                            + (has_condition ? 1 : 0));
        pw_str (writer, "backend");
        pw_str (writer, phase->backend);
        pw_str (writer, "action");
        pw_str (writer, phase->action);
        if (phase->param_count > 0) {
            pw_str (writer, "params");
            pw_map (writer, phase->param_count);
            for (size_t i = 0; i < phase->param_count; i++) {
                pw_str (writer, phase->params [i].name);
                pw_str (writer, phase->params [i].value);
            }
        }
        if (phase->timeout_ms > 0)
            s_write_duration (writer, "timeout", phase->timeout_ms);
        if (phase->max_retries > 0) {
            pw_str (writer, "max_retries");
            pw_int (writer, phase->max_retries);
        }
        if (phase->stall_timeout_ms > 0)
            s_write_duration (writer, "stall_timeout",
                              phase->stall_timeout_ms);
    }
    if (has_condition) {
        pw_str (writer, "condition");
        pw_str (writer, job_condition_name (phase->condition));
    }
}

void
job_spec_encode (const job_spec_t *spec, pw_t *writer)
{
    bool has_strategy = spec->strategy != JOB_STRATEGY_FAIL_FAST;
    //  Written only when it differs from its default, so older readers
    //  and records stay as they were
    bool has_dead_letter = spec->dead_letter != spec->target.any;
    pw_map (writer, 2 + (has_strategy ? 1 : 0) + (spec->timeout_ms > 0 ? 1 : 0)
                        + (spec->priority != 0 ? 1 : 0)
                        + (spec->idempotency_key ? 1 : 0)
                        + (has_dead_letter ? 1 : 0)
                        + (spec->lease_ms > 0 ? 1 : 0)
                        + (spec->limit_count > 0 ? 1 : 0)
                        + (spec->stall_timeout_ms > 0 ? 1 : 0));
    pw_str (writer, "target");
    s_write_target (&spec->target, writer);
    pw_str (writer, "tasks");
    pw_array (writer, spec->phase_count);
    for (size_t i = 0; i < spec->phase_count; i++)
        s_write_phase (&spec->phases [i], writer);
    if (has_strategy) {
        pw_str (writer, "strategy");
        pw_str (writer, job_strategy_name (spec->strategy));
    }
    if (spec->timeout_ms > 0)
        s_write_duration (writer, "timeout", spec->timeout_ms);
    if (spec->priority != 0) {
        pw_str (writer, "priority");
        pw_int (writer, spec->priority);
    }
    if (spec->idempotency_key) {
        pw_str (writer, "idempotency_key");
        pw_str (writer, spec->idempotency_key);
    }
    if (has_dead_letter) {
        pw_str (writer, "dead_letter");
        pw_bool (writer, spec->dead_letter);
    }
    if (spec->lease_ms > 0) {
        pw_str (writer, "lease_ms");
        pw_int (writer, spec->lease_ms);
    }
    if (spec->stall_timeout_ms > 0)
        s_write_duration (writer, "stall_timeout", spec->stall_timeout_ms);
    if (spec->limit_count > 0) {
        pw_str (writer, "limits");
        pw_map (writer, spec->limit_count);
        for (size_t i = 0; i < spec->limit_count; i++) {
            pw_str (writer, spec->limits [i].pattern);
            pw_int (writer, spec->limits [i].max);
        }
    }
}

job_spec_t *
job_spec_dup (const job_spec_t *spec)
{
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    pv_doc_t *doc = NULL;
    job_spec_t *copy = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0) == 0
        && job_spec_decode (pv_doc_root (doc), &copy, &errors) != 0)
        copy = NULL;
    job_errors_clear (&errors);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    return copy;
}

//  ---------------------------------------------------------------------
//  Lifetime and lookups

static void
s_phase_clear (job_phase_t *phase)
{
    free (phase->backend);
    free (phase->action);
    for (size_t i = 0; i < phase->param_count; i++) {
        free (phase->params [i].name);
        free (phase->params [i].value);
    }
    free (phase->params);
    for (size_t i = 0; i < phase->task_count; i++)
        s_phase_clear (&phase->tasks [i]);
    free (phase->tasks);
}

void
job_spec_destroy (job_spec_t **spec_p)
{
    if (!spec_p || !*spec_p)
        return;
    job_spec_t *spec = *spec_p;
    target_clear (&spec->target);
    for (size_t i = 0; i < spec->phase_count; i++)
        s_phase_clear (&spec->phases [i]);
    free (spec->phases);
    free (spec->idempotency_key);
    job_limits_free (spec->limits, spec->limit_count);
    free (spec);
    *spec_p = NULL;
}

//  One part of a limit pattern: a name or "*".
static bool
s_limit_part_valid (const char *part, size_t len)
{
    if (len == 1 && part [0] == '*')
        return true;
    char name [NAME_MAX_LEN + 1];
    if (len == 0 || len > NAME_MAX_LEN)
        return false;
    memcpy (name, part, len);
    name [len] = '\0';
    return name_valid (name);
}

bool
job_limit_pattern_valid (const char *pattern)
{
    const char *dot = pattern ? strchr (pattern, '.') : NULL;
    return dot && !strchr (dot + 1, '.')
           && s_limit_part_valid (pattern, (size_t) (dot - pattern))
           && s_limit_part_valid (dot + 1, strlen (dot + 1));
}

bool
job_limit_matches (const char *pattern, const char *backend,
                   const char *action)
{
    const char *dot = strchr (pattern, '.');
    if (!dot || !backend || !action)
        return false;
    size_t len = (size_t) (dot - pattern);
    bool backend_ok = (len == 1 && pattern [0] == '*')
                      || (strlen (backend) == len
                          && memcmp (pattern, backend, len) == 0);
    return backend_ok
           && (strcmp (dot + 1, "*") == 0 || strcmp (dot + 1, action) == 0);
}

int
job_limits_read (const pv_t *map, bool per_node,
                 const char *skip, job_limit_t **limits_p, size_t *count_p,
                 char *why, size_t why_len)
{
    if (pv_type (map) != PV_MAP) {
        snprintf (why, why_len, "expected a map of backend.action: count");
        return -1;
    }
    size_t count = pv_size (map);
    if (*count_p + count > JOB_MAX_LIMITS) {
        snprintf (why, why_len, "too many limits (%zu, at most %d)",
                  *count_p + count, JOB_MAX_LIMITS);
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        if (skip && pv_str_eq (pv_map_key_at (map, i), skip))
            continue;
        char *pattern = pv_strdup (pv_map_key_at (map, i));
        const pv_t *value = pv_map_value_at (map, i);
        int64_t max = 0;
        if (!pattern || !job_limit_pattern_valid (pattern)) {
            char show [NAME_SHOW_LEN];
            snprintf (why, why_len, "'%s' is not backend.action (each "
                      "part a name or *, like apt.install or rke2.*)",
                      name_show (pattern ? pattern : "",
                                 pattern ? strlen (pattern) : 0, show,
                                 sizeof show));
            free (pattern);
            return -1;
        }
        if (pv_type (value) != PV_INT || pv_get_int (value, &max) != 0
            || max < 1 || max > JOB_MAX_LIMIT) {
            snprintf (why, why_len, "%s: expected an integer from 1 to %d",
                      pattern, JOB_MAX_LIMIT);
            free (pattern);
            return -1;
        }
        job_limit_t *grown = (job_limit_t *) realloc (
            *limits_p, (*count_p + 1) * sizeof (job_limit_t));
        if (!grown) {
            free (pattern);
            snprintf (why, why_len, "out of memory");
            return -1;
        }
        *limits_p = grown;
        grown [*count_p].pattern = pattern;
        grown [*count_p].max = (uint32_t) max;
        grown [*count_p].per_node = per_node;
        (*count_p)++;
    }
    return 0;
}

void
job_limits_free (job_limit_t *limits, size_t count)
{
    for (size_t i = 0; i < count; i++)
        free (limits [i].pattern);
    free (limits);
}

//  Leaves in one top-level phase.
static size_t
s_phase_steps (const job_phase_t *phase)
{
    return phase->tasks ? phase->task_count : 1;
}

size_t
job_spec_step_count (const job_spec_t *spec)
{
    size_t steps = 0;
    for (size_t i = 0; i < spec->phase_count; i++)
        steps += s_phase_steps (&spec->phases [i]);
    return steps;
}

const job_phase_t *
job_spec_step (const job_spec_t *spec, size_t step, size_t *phase_index,
               int *sub_index)
{
    size_t first = 0;
    for (size_t i = 0; i < spec->phase_count; i++) {
        const job_phase_t *phase = &spec->phases [i];
        size_t count = s_phase_steps (phase);
        if (step < first + count) {
            if (phase_index)
                *phase_index = i;
            if (sub_index)
                *sub_index = phase->tasks ? (int) (step - first) : -1;
            return phase->tasks ? &phase->tasks [step - first] : phase;
        }
        first += count;
    }
    return NULL;
}

size_t
job_spec_phase_first_step (const job_spec_t *spec, size_t phase_index)
{
    size_t first = 0;
    for (size_t i = 0; i < phase_index && i < spec->phase_count; i++)
        first += s_phase_steps (&spec->phases [i]);
    return first;
}

const char *
job_phase_param (const job_phase_t *leaf, const char *name)
{
    if (!leaf || !name || leaf->param_count == 0)
        return NULL;
    job_param_t key = {(char *) name, NULL};
    const job_param_t *found =
        bsearch (&key, leaf->params, leaf->param_count, sizeof (job_param_t),
                 s_compare_params);
    return found ? found->value : NULL;
}

const char *
job_condition_name (job_condition_t condition)
{
    switch (condition) {
    case JOB_COND_ALWAYS:
        return "always";
    case JOB_COND_ON_SUCCESS:
        return "on_success";
    case JOB_COND_ON_FAILURE:
        return "on_failure";
    }
    return "?";
}

const char *
job_strategy_name (job_strategy_t strategy)
{
    switch (strategy) {
    case JOB_STRATEGY_FAIL_FAST:
        return "fail-fast";
    case JOB_STRATEGY_CONTINUE:
        return "continue";
    }
    return "?";
}
