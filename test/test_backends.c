/*  =========================================================================
    test_backends - schemas, parameter checks, argv building, in-process
    actions, and program actions run against the recording fakes in
    test/fakes (through the real executor, with GRID_FAKE_LOG).
    =========================================================================
*/
#include <czmq.h>

#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../agent/executor.h"
#include "../backends/backend.h"
#include "../proto/names.h"

#define S_DEADLINE_MS 20000

static char s_fakes [PATH_MAX];     //  Absolute path of test/fakes

//  test/fakes, found from GRID_SRC (set by run_tests.sh) or from this
//  file's path relative to where the build ran.
static void
s_find_fakes (void)
{
    const char *source = getenv ("GRID_SRC");
    char candidate [PATH_MAX];
    if (source)
        snprintf (candidate, sizeof (candidate), "%s/test/fakes", source);
    else {
        snprintf (candidate, sizeof (candidate), "%s", __FILE__);
        char *slash = strrchr (candidate, '/');
        if (slash)
            snprintf (slash, sizeof (candidate) - (size_t) (slash - candidate),
                      "/fakes");
        else
            snprintf (candidate, sizeof (candidate), "fakes");
    }
    if (!realpath (candidate, s_fakes))
        s_fakes [0] = 0;
}

static const backend_action_t *
s_action (const char *backend, const char *action)
{
    const backend_ops_t *ops = backend_find (backend);
    assert_non_null (ops);
    const backend_action_t *found = backend_action_find (ops, action);
    assert_non_null (found);
    return found;
}

//  A plan for BACKEND ACTION with params "k", "v", ..., NULL. NULL when
//  refused (ERR says why).
static backend_plan_t *
s_plan (const backend_context_t *context, char *err, size_t err_len,
        const char *backend, const char *action, ...)
{
    proto_kv_t params [8];
    size_t count = 0;
    va_list args;
    va_start (args, action);
    const char *key;
    while ((key = va_arg (args, const char *)) && count < 8) {
        params [count].key = (char *) key;
        params [count].value = va_arg (args, char *);
        count++;
    }
    va_end (args);
    err [0] = 0;
    return backend_plan_new (s_action (backend, action), context, params,
                             count, err, err_len);
}

static void
s_assert_argv (const backend_plan_t *plan, const char *const *expected)
{
    size_t count = 0;
    while (expected [count])
        count++;
    assert_int_equal (plan->run, BACKEND_RUN_PROGRAM);
    assert_int_equal (plan->argc, count);
    for (size_t index = 0; index < count; index++)
        assert_string_equal (plan->argv [index], expected [index]);
    assert_null (plan->argv [count]);
}

static const char *
s_data (const backend_outcome_t *outcome, const char *key)
{
    for (size_t index = 0; index < outcome->data_count; index++)
        if (strcmp (outcome->data [index].key, key) == 0)
            return outcome->data [index].value;
    return NULL;
}


//  ---------------------------------------------------------------------
//  Schemas

static void
test_backends_schemas (void **unused)
{
    size_t count = 0;
    const backend_ops_t *const *all = backends_all (&count);
    assert_int_equal (count, 8);
    const char *names [] = { "test", "system", "ping", "network", "apt",
                             "systemd", "rke2", "file" };
    for (size_t index = 0; index < count; index++) {
        const backend_ops_t *ops = all [index];
        assert_string_equal (ops->name, names [index]);
        assert_true (name_valid (ops->name));
        assert_true (ops->action_count > 0);
        for (size_t action = 0; action < ops->action_count; action++) {
            const backend_action_t *act = &ops->actions [action];
            assert_true (name_valid (act->name));
            assert_non_null (act->help);
            assert_non_null (act->plan);
            const proto_action_spec_t *spec = backend_action_spec (act);
            assert_non_null (spec);
            assert_string_equal (spec->name, act->name);
            assert_int_equal (spec->param_count, act->param_count);
            for (size_t param = 0; param < spec->param_count; param++) {
                const proto_param_spec_t *p = &spec->params [param];
                assert_true (name_valid (p->name));
                assert_non_null (p->type);
                assert_non_null (p->help);
                //  A default must pass its own check
                if (p->default_value)
                    assert_int_equal (backend_value_check (
                        p, p->default_value, strlen (p->default_value),
                        NULL, 0), 0);
            }
        }
    }
    assert_null (backend_find ("shell"));
    assert_null (backend_action_find (backend_find ("apt"), "purge"));
    //  Query or modify, as declared
    assert_false (s_action ("system", "disk")->modify);
    assert_true (s_action ("apt", "install")->modify);
    assert_true (s_action ("apt", "update")->modify);
    assert_false (s_action ("systemd", "status")->modify);
    assert_true (s_action ("systemd", "restart")->modify);
    assert_false (s_action ("network", "dns_get")->modify);
    assert_true (s_action ("network", "dns_update")->modify);
}

static void
test_backends_hello_specs (void **unused)
{
    char *disabled [] = { "apt", "rke2" };
    proto_backend_spec_t *specs = NULL;
    size_t count = 0;
    assert_int_equal (backends_hello_specs (disabled, 2, &specs, &count), 0);
    assert_int_equal (count, 6);
    for (size_t index = 0; index < count; index++) {
        assert_string_not_equal (specs [index].name, "apt");
        assert_string_not_equal (specs [index].name, "rke2");
    }
    assert_string_equal (specs [0].name, "test");
    const proto_action_spec_t *sleep = NULL;
    for (size_t index = 0; index < specs [0].action_count; index++)
        if (strcmp (specs [0].actions [index].name, "sleep") == 0)
            sleep = &specs [0].actions [index];
    assert_non_null (sleep);
    assert_int_equal (sleep->param_count, 3);
    assert_string_equal (sleep->params [0].name, "seconds");
    assert_string_equal (sleep->params [0].type, "int");
    assert_true (sleep->params [0].required);
    assert_int_equal (sleep->params [0].min_value, 0);
    assert_int_equal (sleep->params [0].max_value, 86400);
    //  The copy is checkable exactly like the built-in form
    proto_kv_t good = { "seconds", "5", false }, bad = { "seconds", "86401", false };
    char err [256];
    assert_int_equal (backend_params_check (sleep, &good, 1, err,
                                            sizeof (err)), 0);
    assert_int_equal (backend_params_check (sleep, &bad, 1, err,
                                            sizeof (err)), -1);
    backends_specs_free (&specs, count);
    assert_null (specs);
}


//  ---------------------------------------------------------------------
//  Parameter checks

static void
test_backends_hostile_values_refused (void **unused)
{
    const proto_action_spec_t *install
        = backend_action_spec (s_action ("apt", "install"));
    char long_value [5001];
    memset (long_value, 'a', 5000);
    long_value [5000] = 0;
    const char *hostile [] = {
        "nginx; rm -rf /", "-rf", "../../etc/passwd", "a\nb",
        long_value, "ngin\xd1\x85", "Nginx", "nginx|true", "$(reboot)",
        "`id`", "nginx&", "nginx>x", "nginx*", "nginx?", "!nginx", "~root",
        "'nginx'", "\"nginx\"", "ng\\inx", "nginx{a,b}", "[nginx]", "",
        " nginx", "nginx\t", "nginx\r", "\x7fnginx"
    };
    char err [256];
    for (size_t index = 0; index < sizeof (hostile) / sizeof (hostile [0]);
         index++) {
        proto_kv_t param = { "package", (char *) hostile [index], false };
        err [0] = 0;
        assert_int_equal (backend_params_check (install, &param, 1, err,
                                                sizeof (err)), -1);
        //  Every refusal names the param
        assert_non_null (strstr (err, "'package'"));
    }
    //  A NUL inside a value (possible on the wire, not in a C string)
    const proto_param_spec_t *package = &install->params [0];
    assert_int_equal (backend_value_check (package, "ngi\0nx", 6, err,
                                           sizeof (err)), -1);
    assert_non_null (strstr (err, "NUL"));
    //  The good one passes
    proto_kv_t nginx = { "package", "nginx", false };
    assert_int_equal (backend_params_check (install, &nginx, 1, err,
                                            sizeof (err)), 0);
    proto_kv_t dotted = { "package", "libstdc++6", false };
    assert_int_equal (backend_params_check (install, &dotted, 1, err,
                                            sizeof (err)), 0);

    //  The same values on other actions
    const proto_action_spec_t *start
        = backend_action_spec (s_action ("systemd", "start"));
    const proto_action_spec_t *ping
        = backend_action_spec (s_action ("ping", "ping"));
    const proto_action_spec_t *disk
        = backend_action_spec (s_action ("system", "disk"));
    for (size_t index = 0; index < sizeof (hostile) / sizeof (hostile [0]);
         index++) {
        if (strcmp (hostile [index], "Nginx") == 0)
            continue;       //  A fine unit name and host name
        proto_kv_t unit = { "unit", (char *) hostile [index], false };
        assert_int_equal (backend_params_check (start, &unit, 1, err,
                                                sizeof (err)), -1);
        proto_kv_t address = { "address", (char *) hostile [index], false };
        assert_int_equal (backend_params_check (ping, &address, 1, err,
                                                sizeof (err)), -1);
        proto_kv_t path = { "path", (char *) hostile [index], false };
        assert_int_equal (backend_params_check (disk, &path, 1, err,
                                                sizeof (err)), -1);
    }
    proto_kv_t escape = { "path", "/var/../etc", false };
    assert_int_equal (backend_params_check (disk, &escape, 1, err,
                                            sizeof (err)), -1);
    proto_kv_t dot = { "path", "/var/./log", false };
    assert_int_equal (backend_params_check (disk, &dot, 1, err,
                                            sizeof (err)), -1);
}

static void
test_backends_params_rules (void **unused)
{
    char err [256];
    const proto_action_spec_t *install
        = backend_action_spec (s_action ("apt", "install"));
    //  Unknown param
    proto_kv_t extra [] = { { "package", "nginx", false }, { "force", "yes", false } };
    assert_int_equal (backend_params_check (install, extra, 2, err,
                                            sizeof (err)), -1);
    assert_non_null (strstr (err, "unknown param 'force'"));
    //  Missing required
    assert_int_equal (backend_params_check (install, NULL, 0, err,
                                            sizeof (err)), -1);
    assert_non_null (strstr (err, "'package' is required"));
    //  Twice
    proto_kv_t twice [] = { { "package", "nginx", false }, { "package", "curl", false } };
    assert_int_equal (backend_params_check (install, twice, 2, err,
                                            sizeof (err)), -1);

    //  int ranges and syntax
    const proto_action_spec_t *sleep
        = backend_action_spec (s_action ("test", "sleep"));
    const char *bad_ints [] = { "-1", "86401", "abc", "1.5", "+3", "0x10",
                                "99999999999999999999", "" };
    for (size_t index = 0; index < sizeof (bad_ints) / sizeof (bad_ints [0]);
         index++) {
        proto_kv_t seconds = { "seconds", (char *) bad_ints [index], false };
        assert_int_equal (backend_params_check (sleep, &seconds, 1, err,
                                                sizeof (err)), -1);
    }
    proto_kv_t zero = { "seconds", "0", false }, max = { "seconds", "86400", false };
    assert_int_equal (backend_params_check (sleep, &zero, 1, err,
                                            sizeof (err)), 0);
    assert_int_equal (backend_params_check (sleep, &max, 1, err,
                                            sizeof (err)), 0);
    const proto_action_spec_t *output
        = backend_action_spec (s_action ("test", "output"));
    proto_kv_t too_many = { "bytes", "67108865", false };
    assert_int_equal (backend_params_check (output, &too_many, 1, err,
                                            sizeof (err)), -1);

    //  test lines: a count and an interval such as 100ms or 0.5s
    const proto_action_spec_t *lines
        = backend_action_spec (s_action ("test", "lines"));
    const char *good_intervals [] = { "100ms", "0ms", "0.5s", "2s", "99.999s",
                                      "99999ms" };
    for (size_t index = 0; index < 6; index++) {
        proto_kv_t pair [2] = { { "count", "20", false },
                                { "interval", (char *) good_intervals [index],
                                  false } };
        assert_int_equal (backend_params_check (lines, pair, 2, err,
                                                sizeof (err)), 0);
    }
    const char *bad_intervals [] = { "", "abc", "-1s", "1.s", ".5s", "5",
                                     "100000ms", "1m", "0.0001s", "1 s" };
    for (size_t index = 0; index < 10; index++) {
        proto_kv_t pair [2] = { { "count", "20", false },
                                { "interval", (char *) bad_intervals [index],
                                  false } };
        assert_int_equal (backend_params_check (lines, pair, 2, err,
                                                sizeof (err)), -1);
        assert_non_null (strstr (err, "interval"));
    }
    const char *bad_counts [] = { "0", "-1", "100001", "x" };
    for (size_t index = 0; index < 4; index++) {
        proto_kv_t count = { "count", (char *) bad_counts [index], false };
        assert_int_equal (backend_params_check (lines, &count, 1, err,
                                                sizeof (err)), -1);
        assert_non_null (strstr (err, "count"));
    }

    //  Free text takes shell-looking text but not NUL or 5000 bytes
    const proto_action_spec_t *echo
        = backend_action_spec (s_action ("test", "echo"));
    proto_kv_t text = { "msg", "hello; rm -rf / | `id` $(x) -n", false };
    assert_int_equal (backend_params_check (echo, &text, 1, err,
                                            sizeof (err)), 0);
    assert_int_equal (backend_value_check (&echo->params [0], "a\0b", 3, err,
                                           sizeof (err)), -1);
    char long_text [5001];
    memset (long_text, 'a', 5000);
    long_text [5000] = 0;
    proto_kv_t too_long = { "msg", long_text, false };
    assert_int_equal (backend_params_check (echo, &too_long, 1, err,
                                            sizeof (err)), -1);

    //  Hosts
    const proto_action_spec_t *ping
        = backend_action_spec (s_action ("ping", "ping"));
    const char *good_hosts [] = { "127.0.0.1", "::1", "fe80::1",
                                  "web-01.example.com", "localhost" };
    for (size_t index = 0; index < 5; index++) {
        proto_kv_t address = { "address", (char *) good_hosts [index], false };
        assert_int_equal (backend_params_check (ping, &address, 1, err,
                                                sizeof (err)), 0);
    }
    const char *bad_hosts [] = { "web..example", "-web", "web-", "a_b",
                                 "1.2.3.4/8", "host name" };
    for (size_t index = 0; index < 6; index++) {
        proto_kv_t address = { "address", (char *) bad_hosts [index], false };
        assert_int_equal (backend_params_check (ping, &address, 1, err,
                                                sizeof (err)), -1);
    }
    proto_kv_t count [] = { { "address", "::1", false }, { "count", "21", false } };
    assert_int_equal (backend_params_check (ping, count, 2, err,
                                            sizeof (err)), -1);

    //  Types a built-in action does not use yet
    proto_param_spec_t flag = { .name = "flag", .type = "bool",
                                .help = "x" };
    assert_int_equal (backend_value_check (&flag, "true", 4, err,
                                           sizeof (err)), 0);
    assert_int_equal (backend_value_check (&flag, "yes", 3, err,
                                           sizeof (err)), -1);
    proto_param_spec_t wait = { .name = "wait", .type = "duration",
                                .help = "x" };
    assert_int_equal (backend_value_check (&wait, "1h30m", 5, err,
                                           sizeof (err)), 0);
    assert_int_equal (backend_value_check (&wait, "soon", 4, err,
                                           sizeof (err)), -1);
    proto_param_spec_t offset = { .name = "offset", .type = "int",
                                  .min_value = -10, .max_value = 10,
                                  .help = "x" };
    assert_int_equal (backend_value_check (&offset, "-5", 2, err,
                                           sizeof (err)), 0);
    assert_int_equal (backend_value_check (&offset, "-11", 3, err,
                                           sizeof (err)), -1);
    proto_param_spec_t odd = { .name = "odd", .type = "blob", .help = "x" };
    assert_int_equal (backend_value_check (&odd, "a", 1, err,
                                           sizeof (err)), -1);
}


//  ---------------------------------------------------------------------
//  argv building

static void
test_backends_argv (void **unused)
{
    backend_context_t context = { .tool_dir = s_fakes, .resolv_conf = NULL };
    char err [256];
    char path [PATH_MAX];
    backend_plan_t *plan;

    plan = s_plan (&context, err, sizeof (err), "apt", "install", "package",
                   "nginx", NULL);
    assert_non_null (plan);
    s_assert_argv (plan, (const char *[]) { "apt-get", "install", "-y", "--",
                                            "nginx", NULL });
    assert_string_equal (plan->env, "DEBIAN_FRONTEND=noninteractive");
    assert_int_equal (backend_tool_path (context.tool_dir, plan->argv [0],
                                         path, sizeof (path), err,
                                         sizeof (err)), 0);
    char expected [PATH_MAX + 16];
    snprintf (expected, sizeof (expected), "%s/apt-get", s_fakes);
    assert_string_equal (path, expected);
    backend_plan_destroy (&plan);
    assert_null (plan);

    plan = s_plan (&context, err, sizeof (err), "apt", "remove", "package",
                   "nginx", NULL);
    s_assert_argv (plan, (const char *[]) { "apt-get", "remove", "-y", "--",
                                            "nginx", NULL });
    backend_plan_destroy (&plan);
    plan = s_plan (&context, err, sizeof (err), "apt", "update", NULL);
    s_assert_argv (plan, (const char *[]) { "apt-get", "update", "-y",
                                            NULL });
    backend_plan_destroy (&plan);
    plan = s_plan (&context, err, sizeof (err), "apt", "upgrade", NULL);
    s_assert_argv (plan, (const char *[]) { "apt-get", "upgrade", "-y",
                                            NULL });
    backend_plan_destroy (&plan);

    const char *verbs [] = { "start", "stop", "restart", "enable", "disable",
                             "status" };
    for (size_t index = 0; index < 6; index++) {
        plan = s_plan (&context, err, sizeof (err), "systemd", verbs [index],
                       "unit", "nginx.service", NULL);
        assert_non_null (plan);
        s_assert_argv (plan, (const char *[]) { "systemctl", verbs [index],
                                                "--", "nginx.service",
                                                NULL });
        assert_null (plan->env);
        backend_plan_destroy (&plan);
    }
    plan = s_plan (&context, err, sizeof (err), "systemd", "start", "unit",
                   "getty@tty1.service", NULL);
    assert_non_null (plan);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "rke2", "start", "mode",
                   "server", NULL);
    s_assert_argv (plan, (const char *[]) { "systemctl", "start", "--",
                                            "rke2-server.service", NULL });
    backend_plan_destroy (&plan);
    plan = s_plan (&context, err, sizeof (err), "rke2", "stop", "mode",
                   "agent", NULL);
    s_assert_argv (plan, (const char *[]) { "systemctl", "stop", "--",
                                            "rke2-agent.service", NULL });
    backend_plan_destroy (&plan);
    assert_null (s_plan (&context, err, sizeof (err), "rke2", "start",
                         "mode", "both", NULL));
    assert_null (s_plan (&context, err, sizeof (err), "rke2", "start",
                         NULL));

    //  Defaults are applied
    plan = s_plan (&context, err, sizeof (err), "ping", "ping", "address",
                   "10.0.0.1", NULL);
    s_assert_argv (plan, (const char *[]) { "ping", "-c", "3", "-W", "2",
                                            "--", "10.0.0.1", NULL });
    assert_string_equal (backend_plan_param (plan, "count"), "3");
    backend_plan_destroy (&plan);
    plan = s_plan (&context, err, sizeof (err), "ping", "ping", "address",
                   "::1", "count", "5", NULL);
    s_assert_argv (plan, (const char *[]) { "ping", "-c", "5", "-W", "2",
                                            "--", "::1", NULL });
    backend_plan_destroy (&plan);

    //  Test and system actions run as children / in the loop
    plan = s_plan (&context, err, sizeof (err), "test", "sleep", "seconds",
                   "7", NULL);
    assert_int_equal (plan->run, BACKEND_RUN_CHILD);
    assert_int_equal (plan->number, 7);
    assert_null (plan->text);
    backend_plan_destroy (&plan);
    plan = s_plan (&context, err, sizeof (err), "system", "load", NULL);
    assert_int_equal (plan->run, BACKEND_RUN_INPROC);
    backend_plan_destroy (&plan);

    //  A hostile value never gets as far as a plan
    assert_null (s_plan (&context, err, sizeof (err), "apt", "install",
                         "package", "nginx; rm -rf /", NULL));
    assert_non_null (strstr (err, "';'"));
}

static void
test_backends_tool_lookup (void **unused)
{
    char path [PATH_MAX], err [256];
    //  With a tool dir: only there
    assert_int_equal (backend_tool_path (s_fakes, "systemctl", path,
                                         sizeof (path), err, sizeof (err)), 0);
    assert_int_equal (strncmp (path, s_fakes, strlen (s_fakes)), 0);
    assert_int_equal (backend_tool_path (s_fakes, "sh", path, sizeof (path),
                                         err, sizeof (err)), -1);
    assert_non_null (strstr (err, "sh: no executable found"));
    //  Without: the fixed safe PATH, never the caller's
    char *saved = getenv ("PATH") ? strdup (getenv ("PATH")) : NULL;
    setenv ("PATH", s_fakes, 1);
    assert_int_equal (backend_tool_path (NULL, "sh", path, sizeof (path), err,
                                         sizeof (err)), 0);
    assert_int_equal (backend_tool_path (NULL, "apt-get", path, sizeof (path),
                                         err, sizeof (err)) == 0
                      && strncmp (path, s_fakes, strlen (s_fakes)) == 0, 0);
    if (saved)
        setenv ("PATH", saved, 1);
    free (saved);
    assert_int_equal (backend_tool_path (NULL, "sh", path, sizeof (path), err,
                                         sizeof (err)), 0);
    assert_true (strcmp (path, "/usr/local/bin/sh") == 0
              || strcmp (path, "/usr/bin/sh") == 0
              || strcmp (path, "/bin/sh") == 0);
    //  Names with a slash are never looked up
    assert_int_equal (backend_tool_path (NULL, "../bin/sh", path,
                                         sizeof (path), err, sizeof (err)),
                      -1);
    assert_int_equal (backend_tool_path (NULL, "/bin/sh", path, sizeof (path),
                                         err, sizeof (err)), -1);
}


//  ---------------------------------------------------------------------
//  In-process actions

static void
s_run_inproc (backend_plan_t *plan, backend_outcome_t *outcome)
{
    assert_non_null (plan);
    assert_int_equal (plan->run, BACKEND_RUN_INPROC);
    memset (outcome, 0, sizeof (*outcome));
    plan->inproc (plan, outcome);
}

static void
test_backends_system_data (void **unused)
{
    backend_context_t context = { .tool_dir = NULL, .resolv_conf = NULL };
    char err [256];
    backend_outcome_t outcome;
    struct {
        const char *action;
        const char *keys [5];
    } cases [] = {
        { "hostname", { "hostname" } },
        { "uptime", { "uptime_s" } },
        { "os", { "sysname", "release", "machine", "pretty_name" } },
        { "disk", { "total_bytes", "free_bytes", "used_percent" } },
        { "memory", { "total_kib", "available_kib" } },
        { "load", { "load1", "load5", "load15" } },
    };
    for (size_t index = 0; index < sizeof (cases) / sizeof (cases [0]);
         index++) {
        backend_plan_t *plan = s_plan (&context, err, sizeof (err), "system",
                                       cases [index].action, NULL);
        s_run_inproc (plan, &outcome);
        assert_true (outcome.ok);
        assert_non_null (outcome.output);
        assert_true (strlen (outcome.output) > 0);
        for (size_t key = 0; key < 5 && cases [index].keys [key]; key++)
            assert_non_null (s_data (&outcome, cases [index].keys [key]));
        backend_outcome_clear (&outcome);
        backend_plan_destroy (&plan);
    }
    //  The facts are right
    backend_plan_t *plan = s_plan (&context, err, sizeof (err), "system",
                                   "hostname", NULL);
    s_run_inproc (plan, &outcome);
    char name [256];
    gethostname (name, sizeof (name));
    assert_string_equal (s_data (&outcome, "hostname"), name);
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "system", "disk", "path",
                   "/proc", NULL);
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "path"), "/proc");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "system", "disk", "path",
                   "/no/such/dir/at/all", NULL);
    assert_null (plan);
    assert_non_null (strstr (err, "cannot be resolved"));
}

//  A local action whose path must stay under /srv, to test that
//  canonicalisation stops a symlink from leading elsewhere.
static int
s_plan_nothing (backend_plan_t *plan, char *err, size_t err_len)
{
    plan->run = BACKEND_RUN_INPROC;
    return 0;
}

static void
test_backends_path_canonical (void **unused)
{
    char template_dir [] = "/tmp/grid-backends-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char link [PATH_MAX], inside [PATH_MAX];
    snprintf (link, sizeof (link), "%s/etc-link", dir);
    assert_int_equal (symlink ("/etc", link), 0);
    snprintf (inside, sizeof (inside), "%s/etc-link/hostname", dir);

    backend_context_t context = { .tool_dir = NULL, .resolv_conf = NULL };
    char err [256];
    //  The disk action allows any absolute path: the symlink is resolved
    backend_plan_t *plan = s_plan (&context, err, sizeof (err), "system",
                                   "disk", "path", inside, NULL);
    assert_non_null (plan);
    assert_string_equal (backend_plan_param (plan, "path"), "/etc/hostname");
    backend_plan_destroy (&plan);
    //  Trailing slashes and the root itself
    plan = s_plan (&context, err, sizeof (err), "system", "disk", "path",
                   "/", NULL);
    assert_string_equal (backend_plan_param (plan, "path"), "/");
    backend_plan_destroy (&plan);

    //  Under a prefix: the link's target is outside it
    char prefix [PATH_MAX + 8];
    snprintf (prefix, sizeof (prefix), "^%s/", dir);
    backend_param_t params [] = {
        { .name = "path", .type = BACKEND_TYPE_PATH, .required = true,
          .pattern = prefix, .help = "a path under the test dir" },
    };
    backend_action_t action = { "probe", false, "test", params, 1,
                                s_plan_nothing, .idempotent = false };
    proto_kv_t param = { "path", inside, false };
    plan = backend_plan_new (&action, &context, &param, 1, err, sizeof (err));
    assert_null (plan);
    assert_non_null (strstr (err, "leads outside"));
    //  A path that really is under the prefix passes, canonical
    char real_dir [PATH_MAX], plain [PATH_MAX + 16], expected [PATH_MAX + 16];
    assert_non_null (realpath (dir, real_dir));
    snprintf (prefix, sizeof (prefix), "^%s/", real_dir);
    snprintf (plain, sizeof (plain), "%s/data/", real_dir);
    snprintf (expected, sizeof (expected), "%s/data", real_dir);
    param.value = plain;
    plan = backend_plan_new (&action, &context, &param, 1, err, sizeof (err));
    assert_non_null (plan);
    assert_string_equal (backend_plan_param (plan, "path"), expected);
    backend_plan_destroy (&plan);
    unlink (link);
    rmdir (dir);
}

static void
test_backends_dns (void **unused)
{
    char template_dir [] = "/tmp/grid-dns-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char file [PATH_MAX], link [PATH_MAX];
    snprintf (file, sizeof (file), "%s/resolv.conf", dir);
    snprintf (link, sizeof (link), "%s/resolv-link.conf", dir);
    FILE *out = fopen (file, "w");
    assert_non_null (out);
    fputs ("# managed by hand\nnameserver 10.0.0.1\nnameserver 10.0.0.2\n"
           "search old.example\noptions edns0 timeout:2\n", out);
    fclose (out);
    assert_int_equal (chmod (file, 0640), 0);
    assert_int_equal (symlink (file, link), 0);

    backend_context_t context = { .tool_dir = NULL, .resolv_conf = link };
    char err [256];
    backend_outcome_t outcome;
    backend_plan_t *plan = s_plan (&context, err, sizeof (err), "network",
                                   "dns_get", NULL);
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "nameservers"),
                         "10.0.0.1,10.0.0.2");
    assert_string_equal (s_data (&outcome, "search"), "old.example");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "network", "dns_update",
                   "servers", "192.0.2.53,2001:db8::53", "search",
                   "a.example,b.example", NULL);
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    //  The link still points at the file, which was replaced whole
    struct stat info;
    assert_int_equal (lstat (link, &info), 0);
    assert_true (S_ISLNK (info.st_mode));
    assert_int_equal (stat (file, &info), 0);
    assert_int_equal (info.st_mode & 0777, 0640);
    char text [1024] = "";
    FILE *in = fopen (file, "r");
    size_t got = fread (text, 1, sizeof (text) - 1, in);
    fclose (in);
    text [got] = 0;
    assert_string_equal (text, "nameserver 192.0.2.53\n"
                               "nameserver 2001:db8::53\n"
                               "search a.example b.example\n"
                               "# managed by hand\n"
                               "options edns0 timeout:2\n");

    plan = s_plan (&context, err, sizeof (err), "network", "dns_get", NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "nameservers"),
                         "192.0.2.53,2001:db8::53");
    assert_string_equal (s_data (&outcome, "search"), "a.example,b.example");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    //  Refused before anything runs
    const char *bad_servers [] = { "1.2.3", "10.0.0.1;reboot",
                                   "1.1.1.1,2.2.2.2,3.3.3.3,4.4.4.4",
                                   "-1.1.1.1", "::g" };
    for (size_t index = 0; index < 5; index++)
        assert_null (s_plan (&context, err, sizeof (err), "network",
                             "dns_update", "servers", bad_servers [index],
                             NULL));
    assert_null (s_plan (&context, err, sizeof (err), "network",
                         "dns_update", "servers", "10.0.0.1", "search",
                         "-bad.example", NULL));
    assert_null (s_plan (&context, err, sizeof (err), "network",
                         "dns_update", "servers", "10.0.0.1", "search",
                         "a..example", NULL));
    unlink (link);
    unlink (file);
    rmdir (dir);
}


//  ---------------------------------------------------------------------
//  Programs against the recording fakes

typedef struct {
    bool done;
    executor_status_t status;
    int32_t exit_code;
    char *output;
} s_ran_t;

static void
s_ran (void *arg, executor_result_t *result)
{
    s_ran_t *ran = (s_ran_t *) arg;
    ran->done = true;
    ran->status = result->status;
    ran->exit_code = result->exit_code;
    ran->output = result->output;
    result->output = NULL;
}

static int
s_ran_check (zloop_t *loop, int timer_id, void *arg)
{
    return ((s_ran_t *) arg)->done ? -1 : 0;
}

static int
s_ran_deadline (zloop_t *loop, int timer_id, void *arg)
{
    return -1;
}

//  Runs PLAN through a real executor; fills RAN.
static void
s_run_program (const backend_plan_t *plan, s_ran_t *ran)
{
    char path [PATH_MAX], err [256];
    assert_int_equal (backend_tool_path (plan->context->tool_dir,
                                         plan->argv [0], path, sizeof (path),
                                         err, sizeof (err)), 0);
    zloop_t *loop = zloop_new ();
    executor_config_t config = { 1, 65536, 1000, NULL, s_ran, NULL };
    executor_t *executor = executor_new (loop, &config);
    assert_non_null (executor);
    memset (ran, 0, sizeof (*ran));
    executor_task_t task = { .job = "j-1", .path = path, .argv = plan->argv,
                             .env = plan->env, .arg = ran };
    assert_int_equal (executor_submit (executor, &task), 0);
    int check = zloop_timer (loop, 5, 0, s_ran_check, ran);
    int deadline = zloop_timer (loop, S_DEADLINE_MS, 1, s_ran_deadline, NULL);
    zloop_start (loop);
    zloop_timer_end (loop, check);
    zloop_timer_end (loop, deadline);
    executor_destroy (&executor);
    zloop_destroy (&loop);
    assert_true (ran->done);
}

static char *
s_slurp (const char *path)
{
    FILE *file = fopen (path, "r");
    if (!file)
        return strdup ("");
    char *text = (char *) calloc (1, 65536);
    size_t got = fread (text, 1, 65535, file);
    text [got] = 0;
    fclose (file);
    return text;
}

static void
test_backends_fakes_record (void **unused)
{
    char template_dir [] = "/tmp/grid-fakes-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char log [PATH_MAX];
    snprintf (log, sizeof (log), "%s/argv.log", dir);
    setenv ("GRID_FAKE_LOG", log, 1);

    backend_context_t context = { .tool_dir = s_fakes, .resolv_conf = NULL };
    char err [256];
    s_ran_t ran;

    backend_plan_t *plan = s_plan (&context, err, sizeof (err), "apt",
                                   "install", "package", "nginx", NULL);
    s_run_program (plan, &ran);
    assert_int_equal (ran.status, EXECUTOR_SUCCESS);
    assert_non_null (strstr (ran.output, "Setting up nginx"));
    free (ran.output);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "systemd", "restart", "unit",
                   "nginx.service", NULL);
    s_run_program (plan, &ran);
    assert_int_equal (ran.status, EXECUTOR_SUCCESS);
    free (ran.output);
    backend_plan_destroy (&plan);

    char *text = s_slurp (log);
    assert_string_equal (text, "apt-get\ninstall\n-y\n--\nnginx\n"
                               "---- end of argv\n"
                               "systemctl\nrestart\n--\nnginx.service\n"
                               "---- end of argv\n");
    free (text);

    //  ping's summary becomes data
    plan = s_plan (&context, err, sizeof (err), "ping", "ping", "address",
                   "127.0.0.1", "count", "4", NULL);
    s_run_program (plan, &ran);
    assert_int_equal (ran.status, EXECUTOR_SUCCESS);
    backend_outcome_t outcome = { .ok = true, .exit_code = ran.exit_code };
    plan->parse (plan, ran.output, &outcome);
    assert_string_equal (s_data (&outcome, "transmitted"), "4");
    assert_string_equal (s_data (&outcome, "received"), "4");
    assert_string_equal (s_data (&outcome, "loss_percent"), "0");
    assert_string_equal (s_data (&outcome, "rtt_min_ms"), "0.045");
    assert_string_equal (s_data (&outcome, "rtt_avg_ms"), "0.061");
    assert_string_equal (s_data (&outcome, "rtt_max_ms"), "0.080");
    backend_outcome_clear (&outcome);
    free (ran.output);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "ping", "ping", "address",
                   "192.0.2.7", NULL);
    s_run_program (plan, &ran);
    assert_int_equal (ran.status, EXECUTOR_FAILED);
    assert_int_equal (ran.exit_code, 1);
    outcome = (backend_outcome_t) { .ok = false, .exit_code = 1 };
    plan->parse (plan, ran.output, &outcome);
    assert_string_equal (s_data (&outcome, "received"), "0");
    assert_string_equal (s_data (&outcome, "loss_percent"), "100");
    assert_null (s_data (&outcome, "rtt_avg_ms"));
    backend_outcome_clear (&outcome);
    free (ran.output);
    backend_plan_destroy (&plan);

    //  systemctl status: 3 (inactive) is an answer, 4 (no unit) a failure
    plan = s_plan (&context, err, sizeof (err), "systemd", "status", "unit",
                   "stopped.service", NULL);
    s_run_program (plan, &ran);
    assert_int_equal (ran.exit_code, 3);
    outcome = (backend_outcome_t) { .ok = false, .exit_code = 3 };
    plan->parse (plan, ran.output, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "active"), "no");
    assert_string_equal (s_data (&outcome, "state"), "inactive (dead)");
    backend_outcome_clear (&outcome);
    free (ran.output);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "systemd", "status", "unit",
                   "missing.service", NULL);
    s_run_program (plan, &ran);
    outcome = (backend_outcome_t) { .ok = false, .exit_code = ran.exit_code };
    plan->parse (plan, ran.output, &outcome);
    assert_false (outcome.ok);
    backend_outcome_clear (&outcome);
    free (ran.output);
    backend_plan_destroy (&plan);

    unsetenv ("GRID_FAKE_LOG");
    unlink (log);
    rmdir (dir);
}


//  ---------------------------------------------------------------------
//  Checks (dry runs)

//  The check plan of BACKEND ACTION with params "k", "v", ..., NULL
static backend_plan_t *
s_check_plan (const backend_context_t *context, const char *backend,
              const char *action, ...)
{
    proto_kv_t params [8];
    size_t count = 0;
    va_list args;
    va_start (args, action);
    const char *key;
    while ((key = va_arg (args, const char *)) && count < 8) {
        params [count].key = (char *) key;
        params [count].value = va_arg (args, char *);
        count++;
    }
    va_end (args);
    char err [256] = "";
    backend_plan_t *plan = backend_check_plan_new (s_action (backend, action),
                                                   context, params, count,
                                                   err, sizeof (err));
    assert_non_null (plan);
    assert_true (plan->checking);
    return plan;
}

//  Runs a program check PLAN against the fakes and its parser; fills
//  OUTCOME (the caller clears it).
static void
s_run_check (backend_plan_t *plan, backend_outcome_t *outcome)
{
    s_ran_t ran;
    s_run_program (plan, &ran);
    memset (outcome, 0, sizeof (*outcome));
    outcome->ok = ran.status == EXECUTOR_SUCCESS;
    outcome->exit_code = ran.exit_code;
    assert_non_null (plan->parse);
    plan->parse (plan, ran.output, outcome);
    free (ran.output);
}

//  The verdict of BACKEND ACTION on PARAM=VALUE through the fakes
static void
s_assert_verdict (const backend_context_t *context, const char *backend,
                  const char *action, const char *param, const char *value,
                  const char *would_change, const char *current)
{
    backend_plan_t *plan = s_check_plan (context, backend, action, param,
                                         value, NULL);
    backend_outcome_t outcome;
    s_run_check (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "would_change"), would_change);
    if (current)
        assert_string_equal (s_data (&outcome, "current"), current);
    assert_non_null (outcome.output);
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
}

//  Which modify actions declare a check: all but those that cannot say
//  ahead what they would do
static void
test_backends_check_declared (void **unused)
{
    const char *none [] = { "apt.update", "apt.upgrade", "rke2.start",
                            "rke2.stop", NULL };
    size_t count = 0;
    const backend_ops_t *const *all = backends_all (&count);
    for (size_t index = 0; index < count; index++)
        for (size_t at = 0; at < all [index]->action_count; at++) {
            const backend_action_t *action = &all [index]->actions [at];
            char name [128];
            snprintf (name, sizeof name, "%s.%s", all [index]->name,
                      action->name);
            bool listed = false;
            for (size_t k = 0; none [k]; k++)
                listed = listed || strcmp (none [k], name) == 0;
            if (!action->modify)
                assert_null (action->check);
            else
            if (listed)
                assert_null (action->check);
            else
                assert_non_null (action->check);
        }
}

static void
test_backends_check_apt (void **unused)
{
    char template_dir [] = "/tmp/grid-check-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char log [PATH_MAX];
    snprintf (log, sizeof (log), "%s/argv.log", dir);
    setenv ("GRID_FAKE_LOG", log, 1);
    backend_context_t context = { .tool_dir = s_fakes };

    //  The check asks dpkg-query, "--" before the name; apt-get never runs
    backend_plan_t *plan = s_check_plan (&context, "apt", "install",
                                         "package", "nginx", NULL);
    const char *argv [] = { "dpkg-query", "-W", "-f=${Status}\t${Version}\n",
                            "--", "nginx", NULL };
    s_assert_argv (plan, argv);
    backend_plan_destroy (&plan);
    s_assert_verdict (&context, "apt", "install", "package", "nginx",
                      "false", "nginx installed, version 1.2.3-1");
    s_assert_verdict (&context, "apt", "install", "package", "absent-tool",
                      "true", "absent-tool not installed");
    s_assert_verdict (&context, "apt", "install", "package", "removed-tool",
                      "true", "removed-tool not installed");
    s_assert_verdict (&context, "apt", "remove", "package", "nginx", "true",
                      NULL);
    s_assert_verdict (&context, "apt", "remove", "package", "absent-tool",
                      "false", NULL);
    plan = s_check_plan (&context, "apt", "install", "package", "nginx",
                         NULL);
    backend_outcome_t outcome;
    s_run_check (plan, &outcome);
    assert_string_equal (s_data (&outcome, "installed"), "true");
    assert_string_equal (s_data (&outcome, "version"), "1.2.3-1");
    assert_string_equal (s_data (&outcome, "desired"), "nginx installed");
    assert_string_equal (outcome.output,
                         "no change: nginx installed, version 1.2.3-1\n");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    //  update has no check: cannot tell, and nothing runs
    plan = s_check_plan (&context, "apt", "update", NULL);
    assert_int_equal (plan->run, BACKEND_RUN_INPROC);
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "would_change"), "unknown");
    assert_non_null (strstr (outcome.output, "update has no check"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    //  Params are checked as for the action itself
    char err [256];
    proto_kv_t bad = { "package", "-oops", false };
    assert_null (backend_check_plan_new (s_action ("apt", "install"),
                                         &context, &bad, 1, err,
                                         sizeof (err)));

    char *text = s_slurp (log);
    assert_null (strstr (text, "apt-get"));
    assert_non_null (strstr (text, "dpkg-query\n-W\n"));
    free (text);
    unsetenv ("GRID_FAKE_LOG");
    unlink (log);
    rmdir (dir);
}

static void
test_backends_check_systemd (void **unused)
{
    char template_dir [] = "/tmp/grid-check-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char log [PATH_MAX];
    snprintf (log, sizeof (log), "%s/argv.log", dir);
    setenv ("GRID_FAKE_LOG", log, 1);
    backend_context_t context = { .tool_dir = s_fakes };

    backend_plan_t *plan = s_check_plan (&context, "systemd", "start",
                                         "unit", "nginx", NULL);
    const char *active [] = { "systemctl", "is-active", "--", "nginx", NULL };
    s_assert_argv (plan, active);
    backend_plan_destroy (&plan);
    plan = s_check_plan (&context, "systemd", "disable", "unit", "nginx",
                         NULL);
    const char *enabled [] = { "systemctl", "is-enabled", "--", "nginx",
                               NULL };
    s_assert_argv (plan, enabled);
    backend_plan_destroy (&plan);

    s_assert_verdict (&context, "systemd", "start", "unit", "nginx", "false",
                      "nginx active");
    s_assert_verdict (&context, "systemd", "start", "unit", "stopped.service",
                      "true", "stopped.service inactive");
    s_assert_verdict (&context, "systemd", "stop", "unit", "nginx", "true",
                      NULL);
    s_assert_verdict (&context, "systemd", "stop", "unit", "stopped.service",
                      "false", NULL);
    s_assert_verdict (&context, "systemd", "restart", "unit",
                      "stopped.service", "true", NULL);
    s_assert_verdict (&context, "systemd", "enable", "unit", "nginx", "false",
                      "nginx enabled");
    s_assert_verdict (&context, "systemd", "enable", "unit",
                      "stopped.service", "true", "stopped.service disabled");
    s_assert_verdict (&context, "systemd", "disable", "unit", "nginx", "true",
                      NULL);
    s_assert_verdict (&context, "systemd", "disable", "unit",
                      "stopped.service", "false", NULL);
    s_assert_verdict (&context, "systemd", "enable", "unit",
                      "static.service", "false", NULL);
    s_assert_verdict (&context, "systemd", "enable", "unit",
                      "masked.service", "unknown", NULL);
    s_assert_verdict (&context, "systemd", "enable", "unit",
                      "missing.service", "unknown", NULL);

    char *text = s_slurp (log);
    //  Only the queries ran
    assert_null (strstr (text, "\nstart\n"));
    assert_null (strstr (text, "\nenable\n"));
    assert_null (strstr (text, "\ndisable\n"));
    free (text);
    unsetenv ("GRID_FAKE_LOG");
    unlink (log);
    rmdir (dir);
}

static void
test_backends_check_dns (void **unused)
{
    char template_dir [] = "/tmp/grid-check-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char file [PATH_MAX];
    snprintf (file, sizeof (file), "%s/resolv.conf", dir);
    const char *before = "# by hand\nnameserver 10.0.0.1\nsearch a.example\n";
    FILE *out = fopen (file, "w");
    assert_non_null (out);
    fputs (before, out);
    fclose (out);
    backend_context_t context = { .resolv_conf = file };

    backend_plan_t *plan = s_check_plan (&context, "network", "dns_update",
                                         "servers", "192.0.2.53", NULL);
    backend_outcome_t outcome;
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "would_change"), "true");
    assert_string_equal (s_data (&outcome, "current"),
                         "nameservers 10.0.0.1; search a.example");
    assert_string_equal (s_data (&outcome, "desired"),
                         "nameservers 192.0.2.53; search a.example");
    const char *diff = s_data (&outcome, "diff");
    assert_non_null (diff);
    assert_non_null (strstr (diff, "+nameserver 192.0.2.53\n"));
    assert_non_null (strstr (diff, "-nameserver 10.0.0.1\n"));
    assert_non_null (strstr (diff, "(current)"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    //  The check wrote nothing
    char *text = s_slurp (file);
    assert_string_equal (text, before);
    free (text);

    //  Once done, the same check says no change, with no diff
    plan = s_plan (&context, (char [256]) {0}, 256, "network", "dns_update",
                   "servers", "192.0.2.53", NULL);
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    plan = s_check_plan (&context, "network", "dns_update", "servers",
                         "192.0.2.53", NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "would_change"), "false");
    assert_null (s_data (&outcome, "diff"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    unlink (file);
    rmdir (dir);
}

static void
test_backends_check_test_mark (void **unused)
{
    char template_dir [] = "/tmp/grid-check-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char test_dir [PATH_MAX], mark [PATH_MAX + 8];
    snprintf (test_dir, sizeof (test_dir), "%s/test", dir);
    snprintf (mark, sizeof (mark), "%s/m1", test_dir);
    backend_context_t context = { .test_dir = test_dir };
    backend_outcome_t outcome;

    backend_plan_t *plan = s_check_plan (&context, "test", "mark", "name",
                                         "m1", "text", "one", NULL);
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "would_change"), "true");
    assert_string_equal (s_data (&outcome, "current"), "m1 absent");
    assert_string_equal (s_data (&outcome, "desired"), "m1 holds \"one\"");
    assert_non_null (strstr (s_data (&outcome, "diff"), "+one\n"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    struct stat info;
    assert_int_equal (stat (mark, &info), -1);

    char err [256];
    plan = s_plan (&context, err, sizeof (err), "test", "mark", "name", "m1",
                   "text", "one", NULL);
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    assert_int_equal (stat (mark, &info), 0);

    plan = s_check_plan (&context, "test", "mark", "name", "m1", "text",
                         "one", NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "would_change"), "false");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    plan = s_check_plan (&context, "test", "mark", "name", "m1", "text",
                         "two", NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "would_change"), "true");
    assert_non_null (strstr (s_data (&outcome, "diff"),
                             "@@ -1,1 +1,1 @@\n-one\n+two\n"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    char *text = s_slurp (mark);
    assert_string_equal (text, "one\n");
    free (text);

    //  A query in a dry run is itself, marked so
    plan = s_check_plan (&context, "test", "echo", "msg", "hi", NULL);
    assert_true (plan->check_query);
    assert_int_equal (plan->run, BACKEND_RUN_CHILD);
    backend_plan_destroy (&plan);
    //  Without a test directory mark fails, as a check too
    backend_context_t bare = { .tool_dir = NULL };
    plan = s_check_plan (&bare, "test", "mark", "name", "m1", NULL);
    s_run_inproc (plan, &outcome);
    assert_false (outcome.ok);
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    unlink (mark);
    rmdir (test_dir);
    rmdir (dir);
}

//  backend_check_diff: hunks with context, bounds, binary
static void
test_backends_check_diff (void **unused)
{
    backend_outcome_t outcome;
    memset (&outcome, 0, sizeof (outcome));
    assert_int_equal (backend_check_diff (&outcome, "f", "a\n", 2, "a\n", 2),
                      0);
    assert_int_equal (outcome.data_count, 0);

    //  Twenty lines, the 3rd and the 18th changed: two hunks
    char old [512] = "", new_ [512] = "";
    for (int line = 1; line <= 20; line++) {
        char text [32];
        snprintf (text, sizeof text, "l%d\n", line);
        strcat (old, text);
        if (line == 3)
            strcat (new_, "changed\n");
        else
        if (line != 18)
            strcat (new_, text);
    }
    assert_int_equal (backend_check_diff (&outcome, "f", old, strlen (old),
                                          new_, strlen (new_)), 0);
    const char *diff = s_data (&outcome, "diff");
    assert_string_equal (diff,
        "--- f (current)\n+++ f (desired)\n"
        "@@ -1,6 +1,6 @@\n l1\n l2\n-l3\n+changed\n l4\n l5\n l6\n"
        "@@ -15,6 +15,5 @@\n l15\n l16\n l17\n-l18\n l19\n l20\n");
    backend_outcome_clear (&outcome);

    //  Cut at the bound, saying so
    size_t big = 3000 * 3;
    char *many = (char *) malloc (big + 1);
    for (size_t at = 0; at < 1500; at++)
        memcpy (many + at * 3, "xx\n", 3);
    many [1500 * 3] = 0;
    assert_int_equal (backend_check_diff (&outcome, "f", "", 0, many,
                                          strlen (many)), 0);
    diff = s_data (&outcome, "diff");
    assert_true (strlen (diff) <= BACKEND_CHECK_MAX_DIFF);
    assert_non_null (strstr (diff, "(diff cut)"));
    backend_outcome_clear (&outcome);
    //  Too many lines: no diff, said so
    char *huge = (char *) malloc (2 * (BACKEND_CHECK_MAX_LINES + 2));
    for (size_t at = 0; at < BACKEND_CHECK_MAX_LINES + 1; at++)
        memcpy (huge + at * 2, "y\n", 2);
    size_t huge_len = 2 * (BACKEND_CHECK_MAX_LINES + 1);
    assert_int_equal (backend_check_diff (&outcome, "f", "", 0, huge,
                                          huge_len), 0);
    assert_non_null (strstr (s_data (&outcome, "diff"), "no diff"));
    backend_outcome_clear (&outcome);
    //  Binary: no diff
    assert_int_equal (backend_check_diff (&outcome, "f", "a\0b", 3, "a", 1),
                      0);
    assert_string_equal (s_data (&outcome, "diff"),
                         "(binary content: no diff)");
    backend_outcome_clear (&outcome);
    free (many);
    free (huge);
}

//  The progress API: test sleep reports its percent, apt its phases from
//  its last line, anything else its last line; messages are cut and
//  cleaned.
static void
test_backends_progress (void **state)
{
    backend_context_t context = { .tool_dir = NULL, .resolv_conf = NULL };
    char err [256];
    backend_plan_t *plan = s_plan (&context, err, sizeof (err), "test",
                                   "sleep", "seconds", "4", NULL);
    assert_non_null (plan);
    backend_progress_t progress;
    memset (&progress, 0, sizeof (progress));
    progress.percent = -1;
    assert_true (backend_progress (plan, 1000, "", &progress));
    assert_int_equal (progress.percent, 25);
    assert_string_equal (progress.kind, "sleeping");
    assert_string_equal (progress.message, "sleeping 1 of 4 s");
    assert_true (backend_progress (plan, 9000, "", &progress));
    assert_int_equal (progress.percent, 100);
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "apt", "install", "package",
                   "nginx", NULL);
    assert_non_null (plan);
    memset (&progress, 0, sizeof (progress));
    assert_true (backend_progress (plan, 10, "Get:1 http://deb.debian.org "
                                   "bookworm/main amd64 nginx 1.22", &progress));
    assert_string_equal (progress.kind, "downloading");
    assert_string_equal (progress.message, "downloading nginx");
    assert_true (backend_progress (plan, 10, "Setting up nginx (1.22.1-9)",
                                   &progress));
    assert_string_equal (progress.kind, "configuring");
    assert_string_equal (progress.message, "configuring nginx");
    assert_true (backend_progress (plan, 10, "something else", &progress));
    assert_string_equal (progress.kind, "output");
    backend_plan_destroy (&plan);

    plan = s_plan (&context, err, sizeof (err), "test", "echo", "msg", "hi",
                   NULL);
    assert_non_null (plan);
    memset (&progress, 0, sizeof (progress));
    assert_false (backend_progress (plan, 10, "", &progress));
    assert_true (backend_progress (plan, 10, "step 3\tof 9", &progress));
    assert_string_equal (progress.kind, "output");
    assert_string_equal (progress.message, "step 3 of 9");
    backend_plan_destroy (&plan);
    //  Long text is cut at a character boundary
    char text [400];
    memset (text, 'a', sizeof (text));
    memcpy (text + 198, "\xc3\xa9\xc3\xa9", 4);
    text [sizeof (text) - 1] = '\0';
    backend_progress_say (&progress, text);
    assert_int_equal (strlen (progress.message), 198);
}

//  file.put's check: new, unchanged, changed content (with a diff) or mode;
//  file.absent's: there or not. Nothing is written.
static void
test_backends_check_file (void **unused)
{
    char template_dir [] = "/tmp/grid-check-XXXXXX";
    char *dir = mkdtemp (template_dir);
    assert_non_null (dir);
    char real [PATH_MAX];
    assert_non_null (realpath (dir, real));
    char *roots [] = { real };
    backend_context_t context = { .file_roots = roots, .file_root_count = 1 };
    char path [PATH_MAX + 16];
    snprintf (path, sizeof (path), "%s/app.conf", real);

    backend_plan_t *plan = s_check_plan (&context, "file", "put", "path",
                                         path, "content", "a\nb\n", NULL);
    backend_outcome_t outcome;
    s_run_inproc (plan, &outcome);
    assert_true (outcome.ok);
    assert_string_equal (s_data (&outcome, "would_change"), "true");
    assert_string_equal (s_data (&outcome, "current"), "absent");
    assert_non_null (strstr (s_data (&outcome, "diff"), "+a\n+b\n"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    assert_int_equal (access (path, F_OK), -1);

    FILE *out = fopen (path, "w");
    assert_non_null (out);
    fputs ("a\nb\n", out);
    fclose (out);
    assert_int_equal (chmod (path, 0644), 0);
    plan = s_check_plan (&context, "file", "put", "path", path, "content",
                         "a\nb\n", "mode", "0644", NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "would_change"), "false");
    assert_null (s_data (&outcome, "diff"));
    assert_non_null (strstr (outcome.output, "no change"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    plan = s_check_plan (&context, "file", "put", "path", path, "content",
                         "a\nc\n", "mode", "0600", NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "would_change"), "true");
    assert_string_equal (s_data (&outcome, "content"), "true");
    assert_string_equal (s_data (&outcome, "mode"), "true");
    assert_string_equal (s_data (&outcome, "owner"), "false");
    const char *diff = s_data (&outcome, "diff");
    assert_non_null (strstr (diff, "-b\n"));
    assert_non_null (strstr (diff, "+c\n"));
    assert_non_null (strstr (outcome.output, "content, mode"));
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    char *text = s_slurp (path);
    assert_string_equal (text, "a\nb\n");
    free (text);

    plan = s_check_plan (&context, "file", "absent", "path", path, NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "would_change"), "true");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    assert_int_equal (unlink (path), 0);
    plan = s_check_plan (&context, "file", "absent", "path", path, NULL);
    s_run_inproc (plan, &outcome);
    assert_string_equal (s_data (&outcome, "would_change"), "false");
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);

    //  Outside the roots: the check fails, as the put would
    plan = s_check_plan (&context, "file", "put", "path", "/etc/grid-x",
                         "content", "x", NULL);
    s_run_inproc (plan, &outcome);
    assert_false (outcome.ok);
    backend_outcome_clear (&outcome);
    backend_plan_destroy (&plan);
    rmdir (dir);
}

int
main (void)
{
    executor_signals_block ();
    s_find_fakes ();
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_backends_schemas),
        cmocka_unit_test (test_backends_hello_specs),
        cmocka_unit_test (test_backends_hostile_values_refused),
        cmocka_unit_test (test_backends_params_rules),
        cmocka_unit_test (test_backends_argv),
        cmocka_unit_test (test_backends_tool_lookup),
        cmocka_unit_test (test_backends_system_data),
        cmocka_unit_test (test_backends_path_canonical),
        cmocka_unit_test (test_backends_dns),
        cmocka_unit_test (test_backends_fakes_record),
        cmocka_unit_test (test_backends_progress),
        cmocka_unit_test (test_backends_check_declared),
        cmocka_unit_test (test_backends_check_apt),
        cmocka_unit_test (test_backends_check_systemd),
        cmocka_unit_test (test_backends_check_dns),
        cmocka_unit_test (test_backends_check_test_mark),
        cmocka_unit_test (test_backends_check_diff),
        cmocka_unit_test (test_backends_check_file),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
