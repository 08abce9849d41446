/*  =========================================================================
    backends - the list of built-in backends, parameter checking, hello
    specs and plans

    The checking rules are documented in backend.h. They work on the proto
    form (proto_action_spec_t) so the broker and the agent apply one code
    path; the agent-only step (canonicalising paths, which needs the host's
    file system) lives in backend_plan_new.
    =========================================================================
*/
#include "backend.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../proto/names.h"

#define S_REGEX_CACHE 64        //  Distinct patterns compiled once
#define S_SHOW_MAX 40           //  Longest value quoted in an error

//  Characters no value may hold unless its type is free text: every one
//  means something to a shell, a glob or a quoting scheme, and none is
//  needed by a package, unit, host or path name.
static const char s_forbidden [] = ";|&$`<>(){}[]*?!~'\"\\";

static const backend_ops_t *const s_backends [] = {
    &backend_test_ops,
    &backend_system_ops,
    &backend_ping_ops,
    &backend_network_ops,
    &backend_apt_ops,
    &backend_systemd_ops,
    &backend_rke2_ops,
    &backend_file_ops,
};
#define S_BACKEND_COUNT (sizeof (s_backends) / sizeof (s_backends [0]))

const backend_ops_t *const *
backends_all (size_t *count_p)
{
    if (count_p)
        *count_p = S_BACKEND_COUNT;
    return s_backends;
}

const backend_ops_t *
backend_find (const char *name)
{
    if (!name)
        return NULL;
    for (size_t index = 0; index < S_BACKEND_COUNT; index++)
        if (strcmp (s_backends [index]->name, name) == 0)
            return s_backends [index];
    return NULL;
}

const backend_action_t *
backend_action_find (const backend_ops_t *ops, const char *name)
{
    if (!ops || !name)
        return NULL;
    for (size_t index = 0; index < ops->action_count; index++)
        if (strcmp (ops->actions [index].name, name) == 0)
            return &ops->actions [index];
    return NULL;
}


//  ---------------------------------------------------------------------
//  Error text

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  A printable, bounded copy of LEN bytes of VALUE for an error message, so
//  a hostile value cannot break a log line. BUF holds S_SHOW_MAX + 4.
static const char *
s_show (const char *value, size_t len, char *buf)
{
    return name_show (value, len, buf, S_SHOW_MAX + 4);
}


//  ---------------------------------------------------------------------
//  Patterns, compiled once per process. The cache is shared by every
//  caller (agent or broker), hence the lock; regexec runs under it too.

typedef struct {
    char *pattern;              //  Source text (owned)
    regex_t regex;              //  Compiled form
    bool valid;                 //  regcomp succeeded
} s_regex_t;

static s_regex_t s_regex_cache [S_REGEX_CACHE];
static size_t s_regex_count;
static pthread_mutex_t s_regex_lock = PTHREAD_MUTEX_INITIALIZER;

//  Returns 1 when VALUE matches PATTERN, 0 when not, -1 when PATTERN does
//  not compile.
static int
s_pattern_match (const char *pattern, const char *value)
{
    int rc = -1;
    pthread_mutex_lock (&s_regex_lock);
    s_regex_t *entry = NULL;
    for (size_t index = 0; index < s_regex_count; index++)
        if (strcmp (s_regex_cache [index].pattern, pattern) == 0) {
            entry = &s_regex_cache [index];
            break;
        }
    s_regex_t scratch;
    memset (&scratch, 0, sizeof (scratch));
    if (!entry) {
        entry = s_regex_count < S_REGEX_CACHE
              ? &s_regex_cache [s_regex_count] : &scratch;
        entry->valid = regcomp (&entry->regex, pattern,
                                REG_EXTENDED | REG_NOSUB) == 0;
        if (entry != &scratch) {
            entry->pattern = strdup (pattern);
            if (entry->pattern)
                s_regex_count++;
            else {
                //  Out of memory: use it once, keep nothing
                scratch = *entry;
                entry = &scratch;
            }
        }
    }
    if (entry->valid)
        rc = regexec (&entry->regex, value, 0, NULL, 0) == 0 ? 1 : 0;
    if (entry == &scratch && scratch.valid)
        regfree (&scratch.regex);
    pthread_mutex_unlock (&s_regex_lock);
    return rc;
}


//  ---------------------------------------------------------------------
//  Value checks

//  Parses a whole decimal integer (optional '-'). Returns 0 or -1.
static int
s_parse_int (const char *text, int64_t *out)
{
    const char *digits = text [0] == '-' ? text + 1 : text;
    if (*digits == 0 || strlen (digits) > 19)
        return -1;
    for (const char *cursor = digits; *cursor; cursor++)
        if (*cursor < '0' || *cursor > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    long long value = strtoll (text, &end, 10);
    if (errno || !end || *end)
        return -1;
    *out = (int64_t) value;
    return 0;
}

//  True when TEXT is a DNS name: labels of letters, digits and '-' (not at
//  either end), 1..63 bytes each, 253 in all.
static bool
s_hostname_valid (const char *text)
{
    size_t len = strlen (text);
    if (len == 0 || len > 253)
        return false;
    size_t label = 0;
    for (size_t index = 0; index <= len; index++) {
        char c = text [index];
        if (c == '.' || c == 0) {
            if (label == 0 || label > 63 || text [index - 1] == '-')
                return false;
            label = 0;
            continue;
        }
        bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                  || (c >= '0' && c <= '9');
        if (!alnum && c != '-')
            return false;
        if (label == 0 && c == '-')
            return false;
        label++;
    }
    return true;
}

//  True when TEXT is an IPv4 or IPv6 literal.
static bool
s_ip_literal (const char *text)
{
    unsigned char buf [sizeof (struct in6_addr)];
    return inet_pton (AF_INET, text, buf) == 1
        || inet_pton (AF_INET6, text, buf) == 1;
}

//  True when TEXT is an absolute path without "." or ".." segments.
static bool
s_path_lexical_ok (const char *text)
{
    if (text [0] != '/')
        return false;
    const char *segment = text + 1;
    while (*segment) {
        const char *slash = strchr (segment, '/');
        size_t len = slash ? (size_t) (slash - segment) : strlen (segment);
        if ((len == 1 && segment [0] == '.')
        ||  (len == 2 && segment [0] == '.' && segment [1] == '.'))
            return false;
        if (!slash)
            break;
        segment = slash + 1;
    }
    return true;
}

int
backend_value_check (const proto_param_spec_t *param, const char *value,
                     size_t len, char *err, size_t err_len)
{
    char show [S_SHOW_MAX + 4];
    const char *name = param->name;
    const char *type = param->type ? param->type : BACKEND_TYPE_STRING;
    if (len > BACKEND_MAX_VALUE) {
        s_err (err, err_len, "param '%s': too long (%zu bytes, at most %d)",
               name, len, BACKEND_MAX_VALUE);
        return -1;
    }
    if (len > 0 && memchr (value, 0, len)) {
        s_err (err, err_len, "param '%s': contains a NUL byte", name);
        return -1;
    }
    if (strcmp (type, BACKEND_TYPE_TEXT) == 0)
        return 0;

    bool is_int = strcmp (type, BACKEND_TYPE_INT) == 0;
    bool negative_ok = is_int && param->min_value < param->max_value
                    && param->min_value < 0;
    if (len == 0) {
        s_err (err, err_len, "param '%s': empty value", name);
        return -1;
    }
    if (value [0] == '-' && !negative_ok) {
        s_err (err, err_len, "param '%s': '%s' must not start with '-'",
               name, s_show (value, len, show));
        return -1;
    }
    for (size_t index = 0; index < len; index++) {
        unsigned char c = (unsigned char) value [index];
        if (c < 0x20 || c == 0x7f) {
            s_err (err, err_len, "param '%s': contains a control character",
                   name);
            return -1;
        }
        if (c >= 0x80) {
            s_err (err, err_len, "param '%s': '%s' holds a non-ASCII byte",
                   name, s_show (value, len, show));
            return -1;
        }
        if (strchr (s_forbidden, (int) c)) {
            s_err (err, err_len, "param '%s': character '%c' is not allowed",
                   name, (char) c);
            return -1;
        }
    }
    if (is_int) {
        int64_t number = 0;
        if (s_parse_int (value, &number)) {
            s_err (err, err_len, "param '%s': '%s' is not an integer",
                   name, s_show (value, len, show));
            return -1;
        }
        if (param->min_value < param->max_value
        && (number < param->min_value || number > param->max_value)) {
            s_err (err, err_len, "param '%s': %" PRId64 " is out of range "
                   "(%" PRId64 "..%" PRId64 ")", name, number,
                   param->min_value, param->max_value);
            return -1;
        }
    }
    else
    if (strcmp (type, BACKEND_TYPE_BOOL) == 0) {
        if (strcmp (value, "true") && strcmp (value, "false")) {
            s_err (err, err_len, "param '%s': expected true or false", name);
            return -1;
        }
    }
    else
    if (strcmp (type, BACKEND_TYPE_PATH) == 0) {
        if (!s_path_lexical_ok (value)) {
            s_err (err, err_len, "param '%s': '%s' is not an absolute path "
                   "without '.' or '..' segments", name,
                   s_show (value, len, show));
            return -1;
        }
    }
    else
    if (strcmp (type, BACKEND_TYPE_HOST) == 0) {
        if (!s_ip_literal (value) && !s_hostname_valid (value)) {
            s_err (err, err_len, "param '%s': '%s' is not an IP address or "
                   "a host name", name, s_show (value, len, show));
            return -1;
        }
    }
    else
    if (strcmp (type, BACKEND_TYPE_DURATION) == 0) {
        int64_t ms = 0;
        if (duration_parse (value, &ms)) {
            s_err (err, err_len, "param '%s': '%s' is not a duration "
                   "(e.g. 500ms, 10s, 1h30m)", name,
                   s_show (value, len, show));
            return -1;
        }
    }
    else
    if (strcmp (type, BACKEND_TYPE_STRING) != 0) {
        s_err (err, err_len, "param '%s': unknown type '%s'", name, type);
        return -1;
    }
    if (param->pattern) {
        int match = s_pattern_match (param->pattern, value);
        if (match < 0) {
            s_err (err, err_len, "param '%s': its pattern does not compile",
                   name);
            return -1;
        }
        if (match == 0) {
            s_err (err, err_len, "param '%s': '%s' does not match %s", name,
                   s_show (value, len, show), param->pattern);
            return -1;
        }
    }
    return 0;
}

static const proto_param_spec_t *
s_spec_param (const proto_action_spec_t *spec, const char *name)
{
    for (size_t index = 0; index < spec->param_count; index++)
        if (spec->params [index].name
        &&  strcmp (spec->params [index].name, name) == 0)
            return &spec->params [index];
    return NULL;
}

//  "a, b, c" of SPEC's param names into BUF.
static void
s_param_names (const proto_action_spec_t *spec, char *buf, size_t buf_len)
{
    size_t used = 0;
    buf [0] = 0;
    for (size_t index = 0; index < spec->param_count; index++) {
        int wrote = snprintf (buf + used, buf_len - used, "%s%s",
                              index ? ", " : "", spec->params [index].name);
        if (wrote < 0 || (size_t) wrote >= buf_len - used)
            break;
        used += (size_t) wrote;
    }
    if (spec->param_count == 0)
        snprintf (buf, buf_len, "none");
}

int
backend_params_check (const proto_action_spec_t *spec,
                      const proto_kv_t *params, size_t count,
                      char *err, size_t err_len)
{
    char show [S_SHOW_MAX + 4];
    if (!spec) {
        s_err (err, err_len, "no such action");
        return -1;
    }
    for (size_t index = 0; index < count; index++) {
        const char *key = params [index].key;
        const char *value = params [index].value;
        if (!key || !value) {
            s_err (err, err_len, "param %zu: missing name or value", index);
            return -1;
        }
        const proto_param_spec_t *param = s_spec_param (spec, key);
        if (!param) {
            char known [512];
            s_param_names (spec, known, sizeof (known));
            s_err (err, err_len, "unknown param '%s' for %s (known: %s)",
                   s_show (key, strlen (key), show), spec->name, known);
            return -1;
        }
        for (size_t other = 0; other < index; other++)
            if (strcmp (params [other].key, key) == 0) {
                s_err (err, err_len, "param '%s' given twice", key);
                return -1;
            }
        if (backend_value_check (param, value, strlen (value), err, err_len))
            return -1;
    }
    for (size_t index = 0; index < spec->param_count; index++) {
        const proto_param_spec_t *param = &spec->params [index];
        if (!param->required)
            continue;
        bool given = false;
        for (size_t other = 0; other < count && !given; other++)
            given = strcmp (params [other].key, param->name) == 0;
        if (!given) {
            s_err (err, err_len, "param '%s' is required for %s",
                   param->name, spec->name);
            return -1;
        }
    }
    return 0;
}


//  ---------------------------------------------------------------------
//  The proto form of every built-in action, built once. The strings point
//  at the constant tables (never freed), hence the casts.

typedef struct {
    const backend_action_t *action;  //  Key
    proto_action_spec_t spec;        //  Its proto form
} s_spec_entry_t;

static s_spec_entry_t *s_specs;
static size_t s_spec_count;
static pthread_once_t s_specs_once = PTHREAD_ONCE_INIT;

static void
s_param_to_proto (const backend_param_t *from, proto_param_spec_t *to)
{
    to->name = (char *) from->name;
    to->required = from->required;
    to->type = (char *) from->type;
    to->pattern = (char *) from->pattern;
    to->default_value = (char *) from->default_value;
    to->help = (char *) from->help;
    to->min_value = from->min_value;
    to->max_value = from->max_value;
}

//  Fills SPEC with a view of ACTION: strings borrowed, params malloc'd
//  (the caller frees spec->params; NULL on no memory).
static void
s_action_view (const backend_action_t *action, proto_action_spec_t *spec)
{
    memset (spec, 0, sizeof (*spec));
    spec->name = (char *) action->name;
    spec->modify = action->modify;
    spec->idempotent = action->idempotent;
    spec->help = (char *) action->help;
    spec->param_count = action->param_count;
    if (action->param_count == 0)
        return;
    spec->params = (proto_param_spec_t *) calloc (action->param_count,
                                                  sizeof (proto_param_spec_t));
    for (size_t index = 0; spec->params && index < action->param_count;
         index++)
        s_param_to_proto (&action->params [index], &spec->params [index]);
}

static void
s_specs_build (void)
{
    size_t total = 0;
    for (size_t index = 0; index < S_BACKEND_COUNT; index++)
        total += s_backends [index]->action_count;
    s_specs = (s_spec_entry_t *) calloc (total, sizeof (s_spec_entry_t));
    if (!s_specs)
        return;
    for (size_t index = 0; index < S_BACKEND_COUNT; index++) {
        const backend_ops_t *ops = s_backends [index];
        for (size_t action_nbr = 0; action_nbr < ops->action_count;
             action_nbr++) {
            const backend_action_t *action = &ops->actions [action_nbr];
            s_spec_entry_t *entry = &s_specs [s_spec_count];
            entry->action = action;
            s_action_view (action, &entry->spec);
            if (action->param_count && !entry->spec.params)
                return;
            s_spec_count++;
        }
    }
}

const proto_action_spec_t *
backend_action_spec (const backend_action_t *action)
{
    pthread_once (&s_specs_once, s_specs_build);
    for (size_t index = 0; index < s_spec_count; index++)
        if (s_specs [index].action == action)
            return &s_specs [index].spec;
    return NULL;
}


//  ---------------------------------------------------------------------
//  Hello specs: deep copies that proto_msg_destroy may free

static char *
s_dup (const char *text)
{
    return text ? strdup (text) : NULL;
}

static bool
s_disabled (const char *name, char *const *disabled, size_t disabled_count)
{
    for (size_t index = 0; index < disabled_count; index++)
        if (disabled [index] && strcmp (disabled [index], name) == 0)
            return true;
    return false;
}

static int
s_action_copy (const backend_action_t *action, proto_action_spec_t *to)
{
    to->name = s_dup (action->name);
    to->modify = action->modify;
    to->idempotent = action->idempotent;
    to->help = s_dup (action->help);
    if (!to->name || !to->help)
        return -1;
    if (action->param_count == 0)
        return 0;
    to->params = (proto_param_spec_t *) calloc (action->param_count,
                                                sizeof (proto_param_spec_t));
    if (!to->params)
        return -1;
    to->param_count = action->param_count;
    for (size_t index = 0; index < action->param_count; index++) {
        const backend_param_t *from = &action->params [index];
        proto_param_spec_t *param = &to->params [index];
        param->name = s_dup (from->name);
        param->required = from->required;
        param->type = s_dup (from->type);
        param->pattern = s_dup (from->pattern);
        param->default_value = s_dup (from->default_value);
        param->help = s_dup (from->help);
        param->min_value = from->min_value;
        param->max_value = from->max_value;
        if (!param->name || !param->type || !param->help
        || (from->pattern && !param->pattern)
        || (from->default_value && !param->default_value))
            return -1;
    }
    return 0;
}

int
backends_hello_specs (char *const *disabled, size_t disabled_count,
                      proto_backend_spec_t **specs_p, size_t *count_p)
{
    *specs_p = NULL;
    *count_p = 0;
    proto_backend_spec_t *specs = (proto_backend_spec_t *) calloc (
        S_BACKEND_COUNT, sizeof (proto_backend_spec_t));
    if (!specs)
        return -1;
    size_t count = 0;
    for (size_t index = 0; index < S_BACKEND_COUNT; index++) {
        const backend_ops_t *ops = s_backends [index];
        if (s_disabled (ops->name, disabled, disabled_count))
            continue;
        proto_backend_spec_t *spec = &specs [count++];
        spec->name = s_dup (ops->name);
        spec->version = s_dup (ops->version);
        spec->actions = (proto_action_spec_t *) calloc (
            ops->action_count, sizeof (proto_action_spec_t));
        if (!spec->name || !spec->actions) {
            backends_specs_free (&specs, count);
            return -1;
        }
        spec->action_count = ops->action_count;
        for (size_t action = 0; action < ops->action_count; action++)
            if (s_action_copy (&ops->actions [action],
                               &spec->actions [action])) {
                backends_specs_free (&specs, count);
                return -1;
            }
    }
    *specs_p = specs;
    *count_p = count;
    return 0;
}

void
backends_specs_free (proto_backend_spec_t **specs_p, size_t count)
{
    if (!specs_p || !*specs_p)
        return;
    proto_backend_spec_t *specs = *specs_p;
    for (size_t index = 0; index < count; index++) {
        proto_backend_spec_t *spec = &specs [index];
        for (size_t action = 0; spec->actions && action < spec->action_count;
             action++) {
            proto_action_spec_t *act = &spec->actions [action];
            for (size_t param = 0; act->params && param < act->param_count;
                 param++) {
                proto_param_spec_t *p = &act->params [param];
                free (p->name);
                free (p->type);
                free (p->pattern);
                free (p->default_value);
                free (p->help);
            }
            free (act->params);
            free (act->name);
            free (act->help);
        }
        free (spec->actions);
        free (spec->name);
        free (spec->version);
    }
    free (specs);
    *specs_p = NULL;
}


//  ---------------------------------------------------------------------
//  Plans

//  Canonicalises an absolute path: realpath of its parent joined with its
//  last segment, so a symlinked parent cannot lead outside the prefix the
//  pattern allows. Returns a fresh string, or NULL with ERR.
static char *
s_path_canonical (const proto_param_spec_t *param, const char *value,
                  char *err, size_t err_len)
{
    char show [S_SHOW_MAX + 4];
    size_t len = strlen (value);
    while (len > 1 && value [len - 1] == '/')
        len--;
    char *copy = strndup (value, len);
    if (!copy)
        return NULL;
    char *result = NULL;
    if (strcmp (copy, "/") == 0)
        result = strdup ("/");
    else {
        char *slash = strrchr (copy, '/');
        const char *base = slash + 1;
        *slash = 0;
        const char *parent = copy [0] ? copy : "/";
        char real [PATH_MAX];
        if (!realpath (parent, real))
            s_err (err, err_len, "param '%s': directory '%s' cannot be "
                   "resolved: %s", param->name,
                   s_show (parent, strlen (parent), show), strerror (errno));
        else
        if (asprintf (&result, "%s/%s", strcmp (real, "/") ? real : "",
                      base) < 0)
            result = NULL;
    }
    free (copy);
    if (result && param->pattern
    &&  s_pattern_match (param->pattern, result) != 1) {
        s_err (err, err_len, "param '%s': '%s' leads outside %s",
               param->name, s_show (result, strlen (result), show),
               param->pattern);
        free (result);
        result = NULL;
    }
    return result;
}

//  Checks PARAMS against ACTION, copies them with defaults applied and
//  canonical paths, and fills the plan with PLAN_FN.
static backend_plan_t *
s_plan_new (const backend_action_t *action, backend_plan_fn *plan_fn,
            const backend_context_t *context, const proto_kv_t *params,
            size_t count, char *err, size_t err_len)
{
    //  A view of ACTION in the proto form (any action, built-in or not)
    proto_action_spec_t view;
    s_action_view (action, &view);
    if (action->param_count && !view.params) {
        s_err (err, err_len, "out of memory");
        return NULL;
    }
    const proto_action_spec_t *spec = &view;
    if (backend_params_check (spec, params, count, err, err_len)) {
        free (view.params);
        return NULL;
    }
    backend_plan_t *plan = (backend_plan_t *) calloc (1, sizeof (*plan));
    if (!plan) {
        free (view.params);
        s_err (err, err_len, "out of memory");
        return NULL;
    }
    plan->context = context;
    plan->params = (proto_kv_t *) calloc (spec->param_count + 1,
                                          sizeof (proto_kv_t));
    if (!plan->params) {
        s_err (err, err_len, "out of memory");
        backend_plan_destroy (&plan);
        free (view.params);
        return NULL;
    }
    for (size_t index = 0; index < spec->param_count; index++) {
        const proto_param_spec_t *param = &spec->params [index];
        const char *value = NULL;
        for (size_t given = 0; given < count && !value; given++)
            if (strcmp (params [given].key, param->name) == 0)
                value = params [given].value;
        if (!value)
            value = param->default_value;
        if (!value)
            continue;
        proto_kv_t *pair = &plan->params [plan->param_count];
        pair->key = strdup (param->name);
        if (strcmp (param->type, BACKEND_TYPE_PATH) == 0) {
            pair->value = s_path_canonical (param, value, err, err_len);
            if (!pair->value) {
                free (pair->key);
                pair->key = NULL;
                backend_plan_destroy (&plan);
                free (view.params);
                return NULL;
            }
        }
        else
            pair->value = strdup (value);
        plan->param_count++;
        if (!pair->key || !pair->value) {
            s_err (err, err_len, "out of memory");
            backend_plan_destroy (&plan);
            free (view.params);
            return NULL;
        }
    }
    if (plan_fn (plan, err, err_len))
        backend_plan_destroy (&plan);
    free (view.params);
    return plan;
}

backend_plan_t *
backend_plan_new (const backend_action_t *action,
                  const backend_context_t *context,
                  const proto_kv_t *params, size_t count,
                  char *err, size_t err_len)
{
    return s_plan_new (action, action->plan, context, params, count, err,
                       err_len);
}

//  A modify action without a check: nothing runs, the answer is unknown
static void
s_cannot_tell (const backend_plan_t *plan, backend_outcome_t *outcome)
{
    backend_check_verdict (outcome, -1, NULL, NULL);
    backend_outcome_output (outcome, "cannot tell: %s has no check; "
                            "nothing was run\n",
                            plan->text ? plan->text : "the action");
    backend_outcome_data (outcome, "reason", "the action has no check");
}

static int
s_plan_cannot_tell (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_INPROC;
    plan->inproc = s_cannot_tell;
    return 0;
}

backend_plan_t *
backend_check_plan_new (const backend_action_t *action,
                        const backend_context_t *context,
                        const proto_kv_t *params, size_t count,
                        char *err, size_t err_len)
{
    backend_plan_fn *plan_fn = !action->modify ? action->plan
                             : action->check ? action->check
                                             : s_plan_cannot_tell;
    backend_plan_t *plan = s_plan_new (action, plan_fn, context, params,
                                       count, err, err_len);
    if (plan)
        plan->checking = true;
    if (plan && !action->modify)
        plan->check_query = true;
    if (plan && plan_fn == s_plan_cannot_tell) {
        plan->text = action->name;
        plan->text_len = strlen (action->name);
    }
    return plan;
}

//  ---------------------------------------------------------------------
//  Check verdicts and diffs

void
backend_check_verdict (backend_outcome_t *outcome, int would_change,
                       const char *current, const char *desired)
{
    outcome->ok = true;
    outcome->exit_code = 0;
    backend_outcome_data (outcome, "would_change",
                          would_change > 0 ? "true"
                          : would_change == 0 ? "false" : "unknown");
    if (current)
        backend_outcome_data (outcome, "current", current);
    if (desired)
        backend_outcome_data (outcome, "desired", desired);
    if (would_change > 0)
        backend_outcome_output (outcome, "would change: %s -> %s\n",
                                current ? current : "?",
                                desired ? desired : "?");
    else
    if (would_change == 0)
        backend_outcome_output (outcome, "no change: %s\n",
                                current ? current : "as desired");
    else
        backend_outcome_output (outcome, "cannot tell%s%s\n",
                                current ? ": " : "", current ? current : "");
}

//  The lines of TEXT (LEN bytes): starts and lengths (without the
//  newline) in fresh arrays. Returns the count, or -1 (no memory).
static ssize_t
s_lines (const char *text, size_t len, size_t **starts_p, size_t **lens_p)
{
    size_t count = 0;
    for (size_t at = 0; at < len; at++)
        if (text [at] == '\n')
            count++;
    if (len && text [len - 1] != '\n')
        count++;
    *starts_p = (size_t *) calloc (count + 1, sizeof (size_t));
    *lens_p = (size_t *) calloc (count + 1, sizeof (size_t));
    if (!*starts_p || !*lens_p) {
        free (*starts_p);
        free (*lens_p);
        *starts_p = *lens_p = NULL;
        return -1;
    }
    size_t line = 0, start = 0;
    for (size_t at = 0; at <= len && line < count; at++)
        if (at == len || text [at] == '\n') {
            (*starts_p) [line] = start;
            (*lens_p) [line++] = at - start;
            start = at + 1;
        }
    return (ssize_t) count;
}

//  Appends to the diff being built: stops at the bound, saying so once.
typedef struct {
    char *text;
    size_t used;
    bool cut;
} s_diff_t;

static void
s_diff_add (s_diff_t *diff, char mark, const char *line, size_t len)
{
    if (diff->cut)
        return;
    const char *note = "... (diff cut)\n";
    size_t room = BACKEND_CHECK_MAX_DIFF - strlen (note) - diff->used;
    size_t need = (mark ? 1 : 0) + len + 1;
    if (need > room || diff->used + need > BACKEND_CHECK_MAX_DIFF) {
        memcpy (diff->text + diff->used, note, strlen (note));
        diff->used += strlen (note);
        diff->cut = true;
        return;
    }
    if (mark)
        diff->text [diff->used++] = mark;
    memcpy (diff->text + diff->used, line, len);
    diff->used += len;
    diff->text [diff->used++] = '\n';
}

int
backend_check_diff (backend_outcome_t *outcome, const char *label,
                    const char *old, size_t old_len, const char *new_,
                    size_t new_len)
{
    if (old_len == new_len && memcmp (old, new_, old_len) == 0)
        return 0;
    if (memchr (old, 0, old_len) || memchr (new_, 0, new_len))
        return backend_outcome_data (outcome, "diff", "(binary content: "
                                     "no diff)");
    size_t *a_start = NULL, *a_len = NULL, *b_start = NULL, *b_len = NULL;
    ssize_t a_count = s_lines (old, old_len, &a_start, &a_len);
    ssize_t b_count = a_count < 0 ? -1
                    : s_lines (new_, new_len, &b_start, &b_len);
    if (b_count < 0) {
        free (a_start);
        free (a_len);
        return -1;
    }
    int rc = 0;
    if (a_count > BACKEND_CHECK_MAX_LINES || b_count > BACKEND_CHECK_MAX_LINES) {
        char text [128];
        snprintf (text, sizeof text, "(more than %d lines: no diff)",
                  BACKEND_CHECK_MAX_LINES);
        rc = backend_outcome_data (outcome, "diff", text);
        goto done;
    }
    //  The longest common subsequence of lines, from the ends: lcs[i][j]
    //  is that of a[i..] and b[j..]
    size_t n = (size_t) a_count, m = (size_t) b_count;
    uint16_t *lcs = (uint16_t *) calloc ((n + 1) * (m + 1), sizeof (uint16_t));
    s_diff_t diff = { (char *) malloc (BACKEND_CHECK_MAX_DIFF + 1), 0, false };
    //  Each line's mark: ' ', '-' (a only), '+' (b only), in output order
    char *marks = (char *) malloc (n + m + 1);
    size_t *which = (size_t *) malloc ((n + m + 1) * sizeof (size_t));
    if (!lcs || !diff.text || !marks || !which) {
        free (lcs);
        free (diff.text);
        free (marks);
        free (which);
        rc = -1;
        goto done;
    }
#define S_EQ(i, j) (a_len [i] == b_len [j] \
    && memcmp (old + a_start [i], new_ + b_start [j], a_len [i]) == 0)
    for (size_t i = n; i-- > 0;)
        for (size_t j = m; j-- > 0;)
            lcs [i * (m + 1) + j]
                = S_EQ (i, j) ? lcs [(i + 1) * (m + 1) + j + 1] + 1
                : lcs [(i + 1) * (m + 1) + j] >= lcs [i * (m + 1) + j + 1]
                    ? lcs [(i + 1) * (m + 1) + j]
                    : lcs [i * (m + 1) + j + 1];
    size_t count = 0, i = 0, j = 0;
    while (i < n || j < m) {
        if (i < n && j < m && S_EQ (i, j)) {
            marks [count] = ' ';
            which [count++] = i++;
            j++;
        }
        else
        if (i < n && (j == m || lcs [(i + 1) * (m + 1) + j]
                                >= lcs [i * (m + 1) + j + 1])) {
            marks [count] = '-';
            which [count++] = i++;
        }
        else {
            marks [count] = '+';
            which [count++] = j++;
        }
    }
#undef S_EQ
    char head [256];
    int head_len = snprintf (head, sizeof head, "--- %s (current)\n+++ %s "
                             "(desired)", label, label);
    s_diff_add (&diff, 0, head, (size_t) head_len);
    //  Hunks: changed lines with up to 3 lines of context around them
    size_t at = 0, a_line = 0, b_line = 0;
    while (at < count) {
        size_t change = at;
        while (change < count && marks [change] == ' ')
            change++;
        if (change == count)
            break;
        size_t first = change >= at + 3 ? change - 3 : at;
        //  The hunk runs to 3 lines past its last change, a change being
        //  its last when 7 unchanged lines follow it (or the end)
        size_t last_change = change;
        for (size_t k = change + 1; k < count && k - last_change <= 6; k++)
            if (marks [k] != ' ')
                last_change = k;
        size_t last = last_change + 3 < count ? last_change + 3 : count - 1;
        //  Line numbers of the hunk's first line in a and b
        for (size_t k = at; k < first; k++) {
            a_line += marks [k] != '+';
            b_line += marks [k] != '-';
        }
        size_t a_n = 0, b_n = 0;
        for (size_t k = first; k <= last; k++) {
            a_n += marks [k] != '+';
            b_n += marks [k] != '-';
        }
        head_len = snprintf (head, sizeof head, "@@ -%zu,%zu +%zu,%zu @@",
                             a_line + (a_n ? 1 : 0), a_n,
                             b_line + (b_n ? 1 : 0), b_n);
        s_diff_add (&diff, 0, head, (size_t) head_len);
        for (size_t k = first; k <= last; k++) {
            bool from_b = marks [k] == '+';
            const char *base = from_b ? new_ : old;
            size_t start = from_b ? b_start [which [k]] : a_start [which [k]];
            size_t len = from_b ? b_len [which [k]] : a_len [which [k]];
            s_diff_add (&diff, marks [k], base + start, len);
        }
        a_line += a_n;
        b_line += b_n;
        at = last + 1;
    }
    diff.text [diff.used] = 0;
    rc = backend_outcome_data (outcome, "diff", diff.text);
    free (lcs);
    free (diff.text);
    free (marks);
    free (which);
done:
    free (a_start);
    free (a_len);
    free (b_start);
    free (b_len);
    return rc;
}

void
backend_plan_destroy (backend_plan_t **plan_p)
{
    if (!plan_p || !*plan_p)
        return;
    backend_plan_t *plan = *plan_p;
    for (size_t index = 0; index < plan->argc; index++)
        free (plan->argv [index]);
    for (size_t index = 0; plan->params && index < plan->param_count;
         index++) {
        free (plan->params [index].key);
        free (plan->params [index].value);
    }
    free (plan->params);
    free (plan);
    *plan_p = NULL;
}

const char *
backend_plan_param (const backend_plan_t *plan, const char *name)
{
    for (size_t index = 0; index < plan->param_count; index++)
        if (strcmp (plan->params [index].key, name) == 0)
            return plan->params [index].value;
    return NULL;
}

int
backend_plan_arg (backend_plan_t *plan, const char *arg)
{
    if (plan->argc >= BACKEND_MAX_ARGV)
        return -1;
    char *copy = strdup (arg);
    if (!copy)
        return -1;
    plan->argv [plan->argc++] = copy;
    plan->argv [plan->argc] = NULL;
    plan->run = BACKEND_RUN_PROGRAM;
    return 0;
}


//  ---------------------------------------------------------------------
//  Programs

static bool
s_executable_file (const char *path)
{
    struct stat info;
    return stat (path, &info) == 0 && S_ISREG (info.st_mode)
        && access (path, X_OK) == 0;
}

int
backend_tool_path (const char *tool_dir, const char *name, char *path_buf,
                   size_t path_len, char *err, size_t err_len)
{
    if (!name || !*name || strchr (name, '/')) {
        s_err (err, err_len, "'%s' is not a bare program name",
               name ? name : "");
        return -1;
    }
    const char *search = tool_dir ? tool_dir : BACKEND_SAFE_PATH;
    const char *dir = search;
    while (dir && *dir) {
        const char *colon = tool_dir ? NULL : strchr (dir, ':');
        size_t dir_len = colon ? (size_t) (colon - dir) : strlen (dir);
        int wrote = snprintf (path_buf, path_len, "%.*s/%s", (int) dir_len,
                              dir, name);
        if (wrote > 0 && (size_t) wrote < path_len && path_buf [0] == '/'
        &&  s_executable_file (path_buf))
            return 0;
        dir = colon ? colon + 1 : NULL;
    }
    s_err (err, err_len, "%s: no executable found in %s", name, search);
    if (path_len)
        path_buf [0] = 0;
    return -1;
}


//  ---------------------------------------------------------------------
//  Outcomes

int
backend_outcome_data (backend_outcome_t *outcome, const char *key,
                      const char *value)
{
    proto_kv_t *data = (proto_kv_t *) realloc (
        outcome->data, (outcome->data_count + 1) * sizeof (proto_kv_t));
    if (!data)
        return -1;
    outcome->data = data;
    char *key_copy = strdup (key);
    char *value_copy = strdup (value ? value : "");
    if (!key_copy || !value_copy) {
        free (key_copy);
        free (value_copy);
        return -1;
    }
    data [outcome->data_count].key = key_copy;
    data [outcome->data_count].value = value_copy;
    data [outcome->data_count].number = false;
    outcome->data_count++;
    return 0;
}

int
backend_outcome_data_int (backend_outcome_t *outcome, const char *key,
                          int64_t value)
{
    char text [24];
    snprintf (text, sizeof text, "%" PRId64, value);
    if (backend_outcome_data (outcome, key, text) != 0)
        return -1;
    outcome->data [outcome->data_count - 1].number = true;
    return 0;
}

static char *
s_vformat (const char *format, va_list args)
{
    char *text = NULL;
    if (vasprintf (&text, format, args) < 0)
        return NULL;
    return text;
}

void
backend_outcome_output (backend_outcome_t *outcome, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    char *text = s_vformat (format, args);
    va_end (args);
    free (outcome->output);
    outcome->output = text;
}

void
backend_outcome_error (backend_outcome_t *outcome, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    char *text = s_vformat (format, args);
    va_end (args);
    free (outcome->error);
    outcome->error = text;
}

void
backend_outcome_clear (backend_outcome_t *outcome)
{
    free (outcome->output);
    free (outcome->error);
    for (size_t index = 0; outcome->data && index < outcome->data_count;
         index++) {
        free (outcome->data [index].key);
        free (outcome->data [index].value);
    }
    free (outcome->data);
    memset (outcome, 0, sizeof (*outcome));
}

void
backend_progress_say (backend_progress_t *progress, const char *text)
{
    size_t len = 0;
    for (const char *at = text; at && *at
                                && len < sizeof (progress->message) - 1;
         at++) {
        unsigned char byte = (unsigned char) *at;
        progress->message [len++] = byte < 0x20 || byte == 0x7F ? ' '
                                                                 : (char) byte;
    }
    //  Never end inside a UTF-8 sequence
    if (text && text [len]) {
        while (len > 0 && ((unsigned char) progress->message [len - 1] & 0xC0)
                              == 0x80)
            len--;
        if (len > 0 && ((unsigned char) progress->message [len - 1] & 0xC0)
                           == 0xC0)
            len--;
    }
    progress->message [len] = '\0';
    //  Trailing blanks say nothing
    while (len > 0 && progress->message [len - 1] == ' ')
        progress->message [--len] = '\0';
}

bool
backend_progress (const backend_plan_t *plan, int64_t elapsed_ms,
                  const char *last_line, backend_progress_t *progress)
{
    if (plan && plan->progress)
        return plan->progress (plan, elapsed_ms, last_line ? last_line : "",
                               progress);
    if (!last_line || !*last_line)
        return false;
    snprintf (progress->kind, sizeof (progress->kind), "output");
    backend_progress_say (progress, last_line);
    return progress->message [0] != '\0';
}
