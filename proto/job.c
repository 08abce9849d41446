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
        job_param_kind_t kind = JOB_PARAM_STR;
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
            kind = JOB_PARAM_INT;
            break;
        case PV_BOOL:
            pv_get_bool (item, &flag);
            text = strdup (flag ? "true" : "false");
            kind = JOB_PARAM_BOOL;
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
        leaf->params [leaf->param_count].kind = kind;
        leaf->param_count++;
    }
    qsort (leaf->params, leaf->param_count, sizeof (job_param_t),
           s_compare_params);
}

//  Reads a task's name, needs and barrier flag.
static void
s_read_links (s_ctx_t *ctx, const pv_t *value, const char *path, int depth,
              job_phase_t *phase)
{
    char key_path [PATH_MAX_LEN];
    const pv_t *name = pv_map_get (value, "name");
    if (name) {
        s_path_key (key_path, path, "name");
        phase->name = s_read_name (ctx, name, key_path);
    }
    const pv_t *barrier = pv_map_get (value, "barrier");
    if (barrier) {
        s_path_key (key_path, path, "barrier");
        if (pv_get_bool (barrier, &phase->barrier) != 0)
            s_problem (ctx, key_path, "expected true or false, got %s",
                       s_type_name (barrier));
        else
        if (depth >= 2 && phase->barrier)
            s_problem (ctx, key_path, "only a top-level task can be a "
                                      "barrier (a pipeline runs per node)");
    }
    const pv_t *needs = pv_map_get (value, "needs");
    if (!needs)
        return;
    s_path_key (key_path, path, "needs");
    if (pv_type (needs) == PV_STR) {
        //  "needs: build" reads as a list of one
        phase->needs = calloc (1, sizeof (char *));
        if (!phase->needs) {
            s_problem (ctx, key_path, "out of memory");
            return;
        }
        if ((phase->needs [0] = s_read_name (ctx, needs, key_path)))
            phase->need_count = 1;
        return;
    }
    if (pv_type (needs) != PV_ARRAY) {
        s_problem (ctx, key_path, "expected a list of task names, got %s",
                   s_type_name (needs));
        return;
    }
    size_t count = pv_size (needs);
    if (count > JOB_MAX_NEEDS) {
        s_problem (ctx, key_path, "too many needs (%zu, at most %d)", count,
                   JOB_MAX_NEEDS);
        return;
    }
    if (count == 0)
        return;
    phase->needs = calloc (count, sizeof (char *));
    if (!phase->needs) {
        s_problem (ctx, key_path, "out of memory");
        return;
    }
    for (size_t i = 0; i < count; i++) {
        char item_path [PATH_MAX_LEN];
        s_path_index (item_path, key_path, i);
        char *text = s_read_name (ctx, pv_array_at (needs, i), item_path);
        if (!text)
            continue;
        bool repeated = false;
        for (size_t j = 0; j < phase->need_count && !repeated; j++)
            repeated = strcmp (phase->needs [j], text) == 0;
        if (repeated) {
            s_problem (ctx, item_path, "'%s' is listed twice", text);
            free (text);
            continue;
        }
        phase->needs [phase->need_count++] = text;
    }
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
                                        "stall_timeout", "name", "needs",
                                        "barrier", NULL};
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
    s_read_links (ctx, value, path, depth, phase);
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

//  ---------------------------------------------------------------------
//  The graph of a DAG job

//  One named task: where it is (SUB -1 for a top-level task).
typedef struct {
    const char *name;
    size_t top;
    int sub;
} s_named_t;

static int
s_compare_named (const void *a, const void *b)
{
    const s_named_t *x = (const s_named_t *) a, *y = (const s_named_t *) b;
    int rc = strcmp (x->name, y->name);
    if (rc)
        return rc;
    //  Same name: keep the order of the spec
    if (x->top != y->top)
        return x->top < y->top ? -1 : 1;
    return x->sub < y->sub ? -1 : x->sub > y->sub;
}

//  The path of a task: "tasks[2]" or "tasks[1].tasks[0]".
static void
s_task_path (char *path, size_t top, int sub)
{
    if (sub < 0)
        s_path_fit (path, snprintf (path, PATH_MAX_LEN, "tasks[%zu]", top));
    else
        s_path_fit (path, snprintf (path, PATH_MAX_LEN, "tasks[%zu].tasks[%d]",
                                    top, sub));
}

static const s_named_t *
s_find_named (const s_named_t *names, size_t count, const char *name)
{
    s_named_t key = {name, 0, -2};
    //  The first entry with this name (duplicates are reported apart)
    size_t low = 0, high = count;
    while (low < high) {
        size_t mid = (low + high) / 2;
        if (strcmp (names [mid].name, key.name) < 0)
            low = mid + 1;
        else
            high = mid;
    }
    return low < count && strcmp (names [low].name, name) == 0 ? &names [low]
                                                                : NULL;
}

//  The tasks of one level: the top-level list, or one pipeline's tasks.
static const job_phase_t *
s_level_task (const job_spec_t *spec, int sub_level, size_t index)
{
    return sub_level < 0 ? &spec->phases [index]
                         : &spec->phases [sub_level].tasks [index];
}

//  Finds a cycle among the COUNT tasks of one level, whose needs are
//  resolved to indices in EDGES (EDGE_COUNT per task, SIZE_MAX for
//  unresolved). Reports the first cycle with the names on it.
static void
s_check_cycles (s_ctx_t *ctx, const job_spec_t *spec, int sub_level,
                size_t count, size_t **edges, const size_t *edge_count)
{
    uint8_t *color = calloc (count ? count : 1, 1);
    size_t *stack = calloc (count ? count : 1, sizeof (size_t));
    size_t *cursor = calloc (count ? count : 1, sizeof (size_t));
    if (!color || !stack || !cursor) {
        s_problem (ctx, "tasks", "out of memory");
        goto cleanup;
    }
    for (size_t root = 0; root < count; root++) {
        if (color [root])
            continue;
        size_t depth = 0;
        stack [depth++] = root;
        cursor [root] = 0;
        color [root] = 1;
        while (depth > 0) {
            size_t at = stack [depth - 1];
            if (cursor [at] == edge_count [at]) {
                color [at] = 2;
                depth--;
                continue;
            }
            size_t next = edges [at][cursor [at]++];
            if (next == SIZE_MAX || color [next] == 2)
                continue;
            if (color [next] == 0) {
                color [next] = 1;
                cursor [next] = 0;
                stack [depth++] = next;
                continue;
            }
            //  A back edge: the cycle is the stack from NEXT up
            char text [PATH_MAX_LEN] = "";
            size_t used = 0;
            size_t from = 0;
            while (stack [from] != next)
                from++;
            for (size_t i = from; i <= depth && used < sizeof (text); i++) {
                size_t task = i < depth ? stack [i] : next;
                int rc = snprintf (text + used, sizeof (text) - used, "%s%s",
                                   i > from ? " -> " : "",
                                   s_level_task (spec, sub_level, task)
                                       ->name);
                if (rc < 0)
                    break;
                used += (size_t) rc;
            }
            if (used >= sizeof (text))
                memcpy (text + sizeof (text) - 4, "...", 4);
            char path [PATH_MAX_LEN];
            if (sub_level < 0)
                snprintf (path, sizeof (path), "tasks");
            else
                snprintf (path, sizeof (path), "tasks[%d].tasks", sub_level);
            s_problem (ctx, path, "needs form a cycle: %s", text);
            goto cleanup;
        }
    }
cleanup:
    free (color);
    free (stack);
    free (cursor);
}

//  Resolves the needs of the COUNT tasks of one level into EDGES and
//  reports unknown names, needs across a pipeline boundary and cycles.
static void
s_check_level (s_ctx_t *ctx, const job_spec_t *spec, int sub_level,
               const s_named_t *names, size_t name_count)
{
    size_t count = sub_level < 0 ? spec->phase_count
                                 : spec->phases [sub_level].task_count;
    size_t **edges = calloc (count ? count : 1, sizeof (size_t *));
    size_t *edge_count = calloc (count ? count : 1, sizeof (size_t));
    if (!edges || !edge_count) {
        s_problem (ctx, "tasks", "out of memory");
        free (edges);
        free (edge_count);
        return;
    }
    for (size_t index = 0; index < count; index++) {
        const job_phase_t *task = s_level_task (spec, sub_level, index);
        size_t top = sub_level < 0 ? index : (size_t) sub_level;
        int sub = sub_level < 0 ? -1 : (int) index;
        char path [PATH_MAX_LEN];
        s_task_path (path, top, sub);
        if (task->need_count && !(edges [index] = calloc (task->need_count,
                                                         sizeof (size_t)))) {
            s_problem (ctx, path, "out of memory");
            continue;
        }
        for (size_t k = 0; k < task->need_count; k++) {
            char need_path [PATH_MAX_LEN];
            s_path_fit (need_path, snprintf (need_path, PATH_MAX_LEN,
                                             "%s.needs[%zu]", path, k));
            const char *need = task->needs [k];
            const s_named_t *found = s_find_named (names, name_count, need);
            size_t target = SIZE_MAX;
            char where [PATH_MAX_LEN];
            if (!found)
                s_problem (ctx, need_path, "unknown task '%s'", need);
            else
            if (found->top == top && found->sub == sub)
                s_problem (ctx, need_path, "'%s' is this task itself", need);
            else
            if (sub_level < 0 && found->sub >= 0) {
                s_task_path (where, found->top, found->sub);
                s_problem (ctx, need_path,
                           "'%s' (%s) is inside a pipeline: a need cannot "
                           "cross a pipeline boundary; need the pipeline "
                           "tasks[%zu] by its name",
                           need, where, found->top);
            }
            else
            if (sub_level >= 0
                && (found->sub < 0 || found->top != (size_t) sub_level)) {
                s_task_path (where, found->top, found->sub);
                s_problem (ctx, need_path,
                           "'%s' (%s) is outside this pipeline: a need "
                           "cannot cross a pipeline boundary; put the need "
                           "on the pipeline tasks[%d]",
                           need, where, sub_level);
            }
            else
                target = sub_level < 0 ? found->top : (size_t) found->sub;
            edges [index][edge_count [index]++] = target;
        }
    }
    //  The needs that did not resolve are left out (SIZE_MAX): a cycle
    //  among the others is reported with their mistakes, not after them
    s_check_cycles (ctx, spec, sub_level, count, edges, edge_count);
    for (size_t index = 0; index < count; index++)
        free (edges [index]);
    free (edges);
    free (edge_count);
}

//  Names are unique; needs name tasks of the same level; no cycles.
static void
s_check_graph (s_ctx_t *ctx, const job_spec_t *spec)
{
    size_t total = 0;
    for (size_t top = 0; top < spec->phase_count; top++)
        total += 1 + spec->phases [top].task_count;
    s_named_t *names = calloc (total ? total : 1, sizeof (s_named_t));
    if (!names) {
        s_problem (ctx, "tasks", "out of memory");
        return;
    }
    size_t count = 0;
    for (size_t top = 0; top < spec->phase_count; top++) {
        const job_phase_t *phase = &spec->phases [top];
        if (phase->name)
            names [count++] = (s_named_t) {phase->name, top, -1};
        for (size_t sub = 0; sub < phase->task_count; sub++)
            if (phase->tasks [sub].name)
                names [count++] = (s_named_t) {phase->tasks [sub].name, top,
                                               (int) sub};
    }
    qsort (names, count, sizeof (s_named_t), s_compare_named);
    for (size_t i = 1; i < count; i++)
        if (strcmp (names [i - 1].name, names [i].name) == 0) {
            char first [PATH_MAX_LEN], task [PATH_MAX_LEN],
                path [PATH_MAX_LEN];
            s_task_path (first, names [i - 1].top, names [i - 1].sub);
            s_task_path (task, names [i].top, names [i].sub);
            s_path_key (path, task, "name");
            s_problem (ctx, path, "'%s' is already the name of %s",
                       names [i].name, first);
        }
    s_check_level (ctx, spec, -1, names, count);
    for (size_t top = 0; top < spec->phase_count; top++)
        if (spec->phases [top].tasks)
            s_check_level (ctx, spec, (int) top, names, count);
    free (names);
}

//  Reads "10" / 10 / "25%" into AMOUNT; KEY names it in problems.
static void
s_read_amount (s_ctx_t *ctx, const pv_t *value, const char *key,
               bool min_one, job_amount_t *amount)
{
    int64_t number = 0;
    const char *hint = min_one ? "1 or more" : "0 or more";
    if (pv_type (value) == PV_INT && pv_get_int (value, &number) == 0) {
        if (number < (min_one ? 1 : 0) || number > JOB_MAX_BATCH)
            s_problem (ctx, key, "%" PRId64 " is out of range (%s nodes, at "
                       "most %d, or a percent like \"10%%\")",
                       number, hint, JOB_MAX_BATCH);
        else
            *amount = (job_amount_t) {true, false, (uint32_t) number};
        return;
    }
    char *text = pv_type (value) == PV_STR ? pv_strdup (value) : NULL;
    if (!text || job_amount_parse (text, min_one, amount) != 0) {
        char show [NAME_SHOW_LEN] = "";
        size_t len = 0;
        const char *raw = pv_type (value) == PV_STR ? pv_str (value, &len)
                                                    : NULL;
        if (raw)
            s_problem (ctx, key, "'%s' is neither a count (%s, at most %d) "
                       "nor a percent from 1%% to 100%%",
                       name_show (raw, len, show, sizeof (show)), hint,
                       JOB_MAX_BATCH);
        else
            s_problem (ctx, key, "expected a count or a percent like "
                                 "\"10%%\", got %s", s_type_name (value));
    }
    free (text);
}

int
job_amount_parse (const char *text, bool min_one, job_amount_t *amount)
{
    if (!text || !*text)
        return -1;
    uint64_t number = 0;
    size_t at = 0;
    for (; text [at] >= '0' && text [at] <= '9'; at++) {
        number = number * 10 + (uint64_t) (text [at] - '0');
        if (number > JOB_MAX_BATCH)
            return -1;
    }
    if (at == 0)
        return -1;
    if (text [at] == '%' && text [at + 1] == '\0') {
        if (number < 1 || number > 100)
            return -1;
        *amount = (job_amount_t) {true, true, (uint32_t) number};
        return 0;
    }
    if (text [at] != '\0' || number < (min_one ? 1u : 0u))
        return -1;
    *amount = (job_amount_t) {true, false, (uint32_t) number};
    return 0;
}

size_t
job_amount_nodes (const job_amount_t *amount, size_t nodes)
{
    if (!amount->set)
        return nodes;
    if (!amount->percent)
        return amount->value < nodes ? amount->value : nodes;
    size_t count = (nodes * amount->value + 99) / 100;
    return count < 1 ? 1 : count;
}

void
job_amount_format (const job_amount_t *amount, char *text, size_t size)
{
    snprintf (text, size, "%" PRIu32 "%s", amount->value,
              amount->percent ? "%" : "");
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

//  ---------------------------------------------------------------------
//  Webhooks (notify)

static const char *const s_notify_on_names [] = {
    "completed", "partial_failure", "failed", "cancelled", "timeout"
};

uint32_t
job_notify_on_bit (const char *name)
{
    for (size_t i = 0; i < sizeof s_notify_on_names / sizeof (char *); i++)
        if (name && strcmp (name, s_notify_on_names [i]) == 0)
            return 1u << i;
    return 0;
}

const char *
job_notify_on_name (uint32_t bit)
{
    for (size_t i = 0; i < sizeof s_notify_on_names / sizeof (char *); i++)
        if (bit == 1u << i)
            return s_notify_on_names [i];
    return NULL;
}

int
job_notify_on_read (const pv_t *value, uint32_t *on_p, char *why,
                    size_t why_len)
{
    if (pv_type (value) != PV_ARRAY || pv_size (value) == 0) {
        snprintf (why, why_len, "expected a list of job ends (completed, "
                  "partial_failure, failed, cancelled, timeout)");
        return -1;
    }
    uint32_t on = 0;
    for (size_t i = 0; i < pv_size (value); i++) {
        char *name = pv_strdup (pv_array_at (value, i));
        uint32_t bit = job_notify_on_bit (name);
        if (!bit) {
            char show [NAME_SHOW_LEN];
            snprintf (why, why_len, "unknown job end '%s' (completed, "
                      "partial_failure, failed, cancelled, timeout)",
                      name ? name_show (name, strlen (name), show,
                                        sizeof show)
                           : "?");
            free (name);
            return -1;
        }
        free (name);
        on |= bit;
    }
    *on_p = on;
    return 0;
}

int
job_notify_url_check (const char *url, char *why, size_t why_len)
{
    size_t len = strlen (url);
    if (len > JOB_NOTIFY_URL_MAX) {
        snprintf (why, why_len, "too long (%zu bytes, at most %d)", len,
                  JOB_NOTIFY_URL_MAX);
        return -1;
    }
    for (size_t i = 0; i < len; i++)
        if ((unsigned char) url [i] <= 0x20 || (unsigned char) url [i] >= 0x7f) {
            snprintf (why, why_len, "must be printable ASCII without spaces");
            return -1;
        }
    const char *rest = NULL;
    if (strncmp (url, "http://", 7) == 0)
        rest = url + 7;
    else
    if (strncmp (url, "https://", 8) == 0)
        rest = url + 8;
    if (!rest) {
        snprintf (why, why_len, "must start with http:// or https://");
        return -1;
    }
    size_t authority = strcspn (rest, "/?#");
    if (memchr (rest, '@', authority)) {
        snprintf (why, why_len, "must not carry a user or password "
                  "(the signature authenticates the broker)");
        return -1;
    }
    if (authority == 0 || rest [0] == ':') {
        snprintf (why, why_len, "has no host");
        return -1;
    }
    return 0;
}

//  notify: [{url, ?on} | "url", ...]
static void
s_read_notify (s_ctx_t *ctx, const pv_t *value, job_spec_t *spec)
{
    if (pv_type (value) != PV_ARRAY) {
        s_problem (ctx, "notify", "expected a list of webhooks, got %s",
                   s_type_name (value));
        return;
    }
    size_t count = pv_size (value);
    if (count == 0 || count > JOB_MAX_NOTIFY) {
        s_problem (ctx, "notify", "1 to %d webhooks, got %zu", JOB_MAX_NOTIFY,
                   count);
        return;
    }
    spec->notify = (job_notify_t *) calloc (count, sizeof (job_notify_t));
    if (!spec->notify) {
        s_problem (ctx, "notify", "out of memory");
        return;
    }
    spec->notify_count = count;
    static const char *const keys [] = {"url", "on", NULL};
    for (size_t i = 0; i < count; i++) {
        const pv_t *entry = pv_array_at (value, i);
        char path [PATH_MAX_LEN], field [PATH_MAX_LEN + 8];
        s_path_index (path, "notify", i);
        job_notify_t *hook = &spec->notify [i];
        hook->on = JOB_NOTIFY_ALL;
        const pv_t *url = entry;
        if (pv_type (entry) == PV_MAP) {
            s_check_keys (ctx, entry, path, keys);
            url = pv_map_get (entry, "url");
            snprintf (field, sizeof field, "%s.url", path);
            if (!url) {
                s_problem (ctx, field, "required");
                continue;
            }
            const pv_t *on = pv_map_get (entry, "on");
            char why [256];
            if (on && job_notify_on_read (on, &hook->on, why, sizeof why)) {
                snprintf (field, sizeof field, "%s.on", path);
                s_problem (ctx, field, "%s", why);
            }
        }
        else
            snprintf (field, sizeof field, "%s", path);
        hook->url = s_read_string (ctx, url, field);
        char why [256];
        if (hook->url && job_notify_url_check (hook->url, why, sizeof why)) {
            s_problem (ctx, field, "%s", why);
        }
    }
}

//  STORED: the form a store keeps, which may say check (a dry run)
static int
s_spec_decode (const pv_t *value, job_spec_t **spec_p, job_errors_t *errors,
               bool stored)
{
    static const char *const keys [] = {"target",   "tasks",
                                        "strategy", "timeout",
                                        "priority", "idempotency_key",
                                        "dead_letter", "lease_ms",
                                        "limits", "stall_timeout", "batch",
                                        "max_failures", "canary", "notify",
                                        NULL};
    static const char *const stored_keys [] = {
        "target", "tasks", "strategy", "timeout", "priority",
        "idempotency_key", "dead_letter", "lease_ms", "limits",
        "stall_timeout", "batch", "max_failures", "canary", "notify",
        "check", NULL
    };
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
    s_check_keys (&ctx, value, "", stored ? stored_keys : keys);
    if (stored && pv_map_get (value, "check")
        && pv_get_bool (pv_map_get (value, "check"), &spec->check) != 0)
        s_problem (&ctx, "check", "expected a bool");

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
        else
            s_check_graph (&ctx, spec);
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
    const pv_t *batch = pv_map_get (value, "batch");
    if (batch)
        s_read_amount (&ctx, batch, "batch", true, &spec->batch);
    const pv_t *max_failures = pv_map_get (value, "max_failures");
    if (max_failures)
        s_read_amount (&ctx, max_failures, "max_failures", false,
                       &spec->max_failures);
    const pv_t *canary = pv_map_get (value, "canary");
    if (canary) {
        int number = 0;
        s_read_int (&ctx, canary, "canary", 1, JOB_MAX_BATCH, &number);
        spec->canary = (uint32_t) number;
    }
    const pv_t *notify = pv_map_get (value, "notify");
    if (notify)
        s_read_notify (&ctx, notify, spec);

    if (ctx.count > 0) {
        job_spec_destroy (&spec);
        return -1;
    }
    *spec_p = spec;
    return 0;
}

int
job_spec_decode (const pv_t *value, job_spec_t **spec_p,
                 job_errors_t *errors)
{
    return s_spec_decode (value, spec_p, errors, false);
}

int
job_spec_decode_stored (const pv_t *value, job_spec_t **spec_p,
                        job_errors_t *errors)
{
    return s_spec_decode (value, spec_p, errors, true);
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

void
job_target_encode (const target_t *target, pw_t *writer)
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

//  How many of name, needs, barrier a task carries.
static size_t
s_links_count (const job_phase_t *phase)
{
    return (phase->name ? 1 : 0) + (phase->need_count ? 1 : 0)
           + (phase->barrier ? 1 : 0);
}

static void
s_write_links (const job_phase_t *phase, pw_t *writer)
{
    if (phase->name) {
        pw_str (writer, "name");
        pw_str (writer, phase->name);
    }
    if (phase->need_count) {
        pw_str (writer, "needs");
        pw_array (writer, phase->need_count);
        for (size_t i = 0; i < phase->need_count; i++)
            pw_str (writer, phase->needs [i]);
    }
    if (phase->barrier) {
        pw_str (writer, "barrier");
        pw_bool (writer, true);
    }
}

static void
s_write_amount (pw_t *writer, const char *key, const job_amount_t *amount)
{
    pw_str (writer, key);
    if (amount->percent) {
        char text [32];
        job_amount_format (amount, text, sizeof (text));
        pw_str (writer, text);
    }
    else
        pw_int (writer, amount->value);
}

//  PARAMS_TEXT: every param as a string, as before params kept their type
static void
s_write_phase (const job_phase_t *phase, pw_t *writer, bool params_text)
{
    bool has_condition = phase->condition != JOB_COND_ALWAYS;
    if (phase->tasks) {
        pw_map (writer, 1 + (has_condition ? 1 : 0) + s_links_count (phase));
        pw_str (writer, "tasks");
        pw_array (writer, phase->task_count);
        for (size_t i = 0; i < phase->task_count; i++)
            s_write_phase (&phase->tasks [i], writer, params_text);
    }
    else {
        pw_map (writer, 2 + (phase->param_count > 0 ? 1 : 0)
                            + (phase->timeout_ms > 0 ? 1 : 0)
                            + (phase->max_retries > 0 ? 1 : 0)
                            + (phase->stall_timeout_ms > 0 ? 1 : 0)
                            + (has_condition ? 1 : 0) + s_links_count (phase));
        pw_str (writer, "backend");
        pw_str (writer, phase->backend);
        pw_str (writer, "action");
        pw_str (writer, phase->action);
        if (phase->param_count > 0) {
            pw_str (writer, "params");
            pw_map (writer, phase->param_count);
            for (size_t i = 0; i < phase->param_count; i++) {
                const job_param_t *param = &phase->params [i];
                pw_str (writer, param->name);
                if (params_text)
                    pw_str (writer, param->value);
                else
                if (param->kind == JOB_PARAM_INT)
                    pw_int (writer, strtoll (param->value, NULL, 10));
                else
                if (param->kind == JOB_PARAM_BOOL)
                    pw_bool (writer, strcmp (param->value, "true") == 0);
                else
                    pw_str (writer, param->value);
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
    s_write_links (phase, writer);
}

static void
s_spec_encode (const job_spec_t *spec, pw_t *writer, bool params_text,
               bool with_notify, bool stored)
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
                        + (spec->stall_timeout_ms > 0 ? 1 : 0)
                        + (spec->batch.set ? 1 : 0)
                        + (spec->max_failures.set ? 1 : 0)
                        + (spec->canary ? 1 : 0)
                        + (with_notify && spec->notify_count ? 1 : 0)
                        + (stored && spec->check ? 1 : 0));
    pw_str (writer, "target");
    job_target_encode (&spec->target, writer);
    pw_str (writer, "tasks");
    pw_array (writer, spec->phase_count);
    for (size_t i = 0; i < spec->phase_count; i++)
        s_write_phase (&spec->phases [i], writer, params_text);
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
    if (spec->batch.set)
        s_write_amount (writer, "batch", &spec->batch);
    if (spec->max_failures.set)
        s_write_amount (writer, "max_failures", &spec->max_failures);
    if (spec->canary) {
        pw_str (writer, "canary");
        pw_int (writer, spec->canary);
    }
    if (with_notify && spec->notify_count) {
        pw_str (writer, "notify");
        job_notify_encode (spec, writer);
    }
    if (stored && spec->check) {
        //  A release before dry runs refuses the key, so it never
        //  restores the job (and never runs its actions)
        pw_str (writer, "check");
        pw_bool (writer, true);
    }
}

void
job_notify_encode (const job_spec_t *spec, pw_t *writer)
{
    pw_array (writer, spec->notify_count);
    for (size_t i = 0; i < spec->notify_count; i++) {
        const job_notify_t *hook = &spec->notify [i];
        bool all = hook->on == JOB_NOTIFY_ALL;
        pw_map (writer, all ? 1 : 2);
        pw_str (writer, "url");
        pw_str (writer, hook->url);
        if (all)
            continue;
        size_t bits = 0;
        for (uint32_t bit = 1; bit <= JOB_NOTIFY_TIMEOUT; bit <<= 1)
            bits += (hook->on & bit) != 0;
        pw_str (writer, "on");
        pw_array (writer, bits);
        for (uint32_t bit = 1; bit <= JOB_NOTIFY_TIMEOUT; bit <<= 1)
            if (hook->on & bit)
                pw_str (writer, job_notify_on_name (bit));
    }
}

int
job_notify_decode (const pv_t *value, job_spec_t *spec)
{
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    s_ctx_t ctx = {&errors, 0};
    job_spec_t parsed;
    memset (&parsed, 0, sizeof parsed);
    s_read_notify (&ctx, value, &parsed);
    job_errors_clear (&errors);
    if (ctx.count > 0) {
        for (size_t i = 0; i < parsed.notify_count; i++)
            free (parsed.notify [i].url);
        free (parsed.notify);
        return -1;
    }
    for (size_t i = 0; i < spec->notify_count; i++)
        free (spec->notify [i].url);
    free (spec->notify);
    spec->notify = parsed.notify;
    spec->notify_count = parsed.notify_count;
    return 0;
}

void
job_spec_encode (const job_spec_t *spec, pw_t *writer)
{
    s_spec_encode (spec, writer, false, true, false);
}

void
job_spec_encode_stored (const job_spec_t *spec, pw_t *writer)
{
    s_spec_encode (spec, writer, false, false, true);
}

void
job_spec_encode_digest (const job_spec_t *spec, pw_t *writer)
{
    s_spec_encode (spec, writer, true, true, false);
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
    if (copy)
        copy->check = spec->check;
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
    free (phase->name);
    for (size_t i = 0; i < phase->need_count; i++)
        free (phase->needs [i]);
    free (phase->needs);
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
    for (size_t i = 0; i < spec->notify_count; i++)
        free (spec->notify [i].url);
    free (spec->notify);
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
    job_param_t key = {(char *) name, NULL, JOB_PARAM_STR};
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

//  ---------------------------------------------------------------------
//  DAG jobs

bool
job_spec_is_dag (const job_spec_t *spec)
{
    for (size_t top = 0; top < spec->phase_count; top++) {
        const job_phase_t *phase = &spec->phases [top];
        if (phase->need_count)
            return true;
        for (size_t sub = 0; sub < phase->task_count; sub++)
            if (phase->tasks [sub].need_count)
                return true;
    }
    return false;
}

const char *
job_spec_step_name (const job_spec_t *spec, size_t step)
{
    const job_phase_t *leaf = job_spec_step (spec, step, NULL, NULL);
    return leaf ? leaf->name : NULL;
}

void
job_graph_destroy (job_graph_t **graph_p)
{
    if (!graph_p || !*graph_p)
        return;
    job_graph_t *graph = *graph_p;
    for (size_t step = 0; graph->steps && step < graph->step_count; step++)
        free (graph->steps [step].needs);
    free (graph->steps);
    free (graph->order);
    free (graph);
    *graph_p = NULL;
}

//  Index of the top-level task named NAME, or SIZE_MAX.
static size_t
s_top_index (const job_spec_t *spec, const char *name)
{
    for (size_t top = 0; top < spec->phase_count; top++)
        if (spec->phases [top].name
            && strcmp (spec->phases [top].name, name) == 0)
            return top;
    return SIZE_MAX;
}

//  Index of the task named NAME in pipeline PHASE, or SIZE_MAX.
static size_t
s_sub_index (const job_phase_t *phase, const char *name)
{
    for (size_t sub = 0; sub < phase->task_count; sub++)
        if (phase->tasks [sub].name
            && strcmp (phase->tasks [sub].name, name) == 0)
            return sub;
    return SIZE_MAX;
}

//  Appends STEP to NEEDS (no repeats).
static int
s_need_add (job_step_needs_t *needs, size_t *cap, size_t step)
{
    for (size_t i = 0; i < needs->need_count; i++)
        if (needs->needs [i] == step)
            return 0;
    if (needs->need_count == *cap) {
        size_t new_cap = *cap ? *cap * 2 : 4;
        size_t *grown = realloc (needs->needs, new_cap * sizeof (size_t));
        if (!grown)
            return -1;
        needs->needs = grown;
        *cap = new_cap;
    }
    needs->needs [needs->need_count++] = step;
    return 0;
}

//  The outer needs of top-level task TOP (every step of each task it
//  needs) added to NEEDS.
static int
s_outer_needs (const job_spec_t *spec, size_t top, job_step_needs_t *needs,
               size_t *cap)
{
    const job_phase_t *phase = &spec->phases [top];
    for (size_t k = 0; k < phase->need_count; k++) {
        size_t other = s_top_index (spec, phase->needs [k]);
        if (other == SIZE_MAX)
            return -1;
        size_t first = job_spec_phase_first_step (spec, other);
        size_t count = s_phase_steps (&spec->phases [other]);
        for (size_t step = first; step < first + count; step++)
            if (s_need_add (needs, cap, step))
                return -1;
    }
    needs->barrier = phase->barrier;
    return 0;
}

job_graph_t *
job_graph_new (const job_spec_t *spec)
{
    if (!spec || !job_spec_is_dag (spec))
        return NULL;
    size_t count = job_spec_step_count (spec);
    job_graph_t *graph = calloc (1, sizeof (job_graph_t));
    size_t *pending = NULL, *start = NULL, *successors = NULL;
    bool *done = NULL;
    if (!graph)
        return NULL;
    graph->step_count = count;
    graph->steps = calloc (count ? count : 1, sizeof (job_step_needs_t));
    graph->order = calloc (count ? count : 1, sizeof (size_t));
    pending = calloc (count ? count : 1, sizeof (size_t));
    done = calloc (count ? count : 1, sizeof (bool));
    if (!graph->steps || !graph->order || !pending || !done)
        goto failed;
    for (size_t top = 0; top < spec->phase_count; top++) {
        const job_phase_t *phase = &spec->phases [top];
        size_t first = job_spec_phase_first_step (spec, top);
        if (!phase->tasks) {
            size_t cap = 0;
            if (s_outer_needs (spec, top, &graph->steps [first], &cap))
                goto failed;
            continue;
        }
        bool inner = false;
        for (size_t sub = 0; sub < phase->task_count; sub++)
            inner = inner || phase->tasks [sub].need_count > 0;
        for (size_t sub = 0; sub < phase->task_count; sub++) {
            const job_phase_t *task = &phase->tasks [sub];
            job_step_needs_t *needs = &graph->steps [first + sub];
            size_t cap = 0;
            if (inner && task->need_count) {
                for (size_t k = 0; k < task->need_count; k++) {
                    size_t other = s_sub_index (phase, task->needs [k]);
                    if (other == SIZE_MAX
                        || s_need_add (needs, &cap, first + other))
                        goto failed;
                }
            }
            else
            if (!inner && sub > 0) {
                if (s_need_add (needs, &cap, first + sub - 1))
                    goto failed;
            }
            else
            if (s_outer_needs (spec, top, needs, &cap))
                goto failed;
        }
    }
    //  Kahn's walk, lowest ready step first, over successor lists
    size_t edges = 0;
    for (size_t step = 0; step < count; step++)
        edges += graph->steps [step].need_count;
    start = calloc (count + 1, sizeof (size_t));
    successors = calloc (edges ? edges : 1, sizeof (size_t));
    if (!start || !successors)
        goto failed;
    for (size_t step = 0; step < count; step++) {
        pending [step] = graph->steps [step].need_count;
        for (size_t k = 0; k < graph->steps [step].need_count; k++)
            start [graph->steps [step].needs [k] + 1]++;
    }
    for (size_t step = 0; step < count; step++)
        start [step + 1] += start [step];
    size_t *fill = done ? (size_t *) calloc (count ? count : 1,
                                             sizeof (size_t))
                        : NULL;
    if (!fill)
        goto failed;
    for (size_t step = 0; step < count; step++)
        for (size_t k = 0; k < graph->steps [step].need_count; k++) {
            size_t need = graph->steps [step].needs [k];
            successors [start [need] + fill [need]++] = step;
        }
    free (fill);
    for (size_t placed = 0; placed < count; placed++) {
        size_t next = SIZE_MAX;
        for (size_t step = 0; step < count && next == SIZE_MAX; step++)
            if (!done [step] && pending [step] == 0)
                next = step;
        if (next == SIZE_MAX)
            goto failed;            //  A cycle: not a valid spec
        done [next] = true;
        graph->order [placed] = next;
        for (size_t at = start [next]; at < start [next + 1]; at++)
            pending [successors [at]]--;
    }
    free (start);
    free (successors);
    free (pending);
    free (done);
    return graph;
failed:
    free (pending);
    free (done);
    free (start);
    free (successors);
    job_graph_destroy (&graph);
    return NULL;
}
