/*  =========================================================================
    test_job - the job spec: decoding, validation, wire form, step numbers
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../proto/conf.h"
#include "../proto/job.h"
#include "../proto/pv.h"
#include "../proto/pw.h"

//  The path of a file under test/data, from the source tree the tests run
//  in (GRID_SRC, or the current directory). Caller frees.
static char *
s_data_path (const char *name)
{
    const char *src = getenv ("GRID_SRC");
    char *path = NULL;
    assert_true (asprintf (&path, "%s/test/data/%s", src ? src : ".", name)
                 > 0);
    return path;
}

//  Decodes the YAML TEXT as a job. Returns job_spec_decode's code.
static int
s_decode_yaml (const char *text, job_spec_t **spec_p, job_errors_t *errors)
{
    pv_doc_t *doc = NULL;
    char err [256] = "";
    int rc = conf_parse (text, strlen (text), &doc, err, sizeof (err));
    if (rc != 0)
        print_error ("YAML refused: %s\n", err);
    assert_int_equal (rc, 0);
    rc = job_spec_decode (pv_doc_root (doc), spec_p, errors);
    pv_doc_destroy (&doc);
    return rc;
}

//  Decodes msgpack bytes as a job.
static int
s_decode_wire (pw_t *writer, job_spec_t **spec_p, job_errors_t *errors)
{
    pv_doc_t *doc = NULL;
    char why [256] = "";
    int rc = pv_doc_decode (pw_data (writer), pw_size (writer), &doc, why,
                            sizeof (why));
    if (rc != 0)
        print_error ("msgpack refused: %s\n", why);
    assert_int_equal (rc, 0);
    rc = job_spec_decode (pv_doc_root (doc), spec_p, errors);
    pv_doc_destroy (&doc);
    return rc;
}

static bool
s_has_error (const job_errors_t *errors, const char *expected)
{
    for (size_t i = 0; i < errors->count; i++)
        if (strcmp (errors->items [i], expected) == 0)
            return true;
    return false;
}

static void
s_print_errors (const job_errors_t *errors)
{
    for (size_t i = 0; i < errors->count; i++)
        print_error ("    %s\n", errors->items [i]);
}

//  Decoding the YAML TEXT fails, and EXPECTED is among the sentences.
static void
s_assert_problem (const char *text, const char *expected)
{
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    int rc = s_decode_yaml (text, &spec, &errors);
    if (rc != -1 || !s_has_error (&errors, expected)) {
        print_error ("expected '%s'; got rc %d and:\n", expected, rc);
        s_print_errors (&errors);
    }
    assert_int_equal (rc, -1);
    assert_null (spec);
    assert_true (s_has_error (&errors, expected));
    job_errors_clear (&errors);
    assert_int_equal (errors.count, 0);
}

//  Decodes the YAML TEXT, which must be a valid job.
static job_spec_t *
s_valid_yaml (const char *text)
{
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    int rc = s_decode_yaml (text, &spec, &errors);
    if (rc != 0)
        s_print_errors (&errors);
    assert_int_equal (rc, 0);
    assert_int_equal (errors.count, 0);
    assert_non_null (spec);
    return spec;
}

//  Loads test/data/NAME, which must be a valid job.
static job_spec_t *
s_load (const char *name)
{
    char *path = s_data_path (name);
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    int rc = job_spec_load_file (path, &spec, &errors);
    if (rc != 0)
        s_print_errors (&errors);
    assert_int_equal (rc, 0);
    free (path);
    return spec;
}

//  Step STEP sits in top-level phase PHASE at SUB (-1: not in a branch).
static const job_phase_t *
s_assert_step (const job_spec_t *spec, size_t step, size_t phase, int sub)
{
    size_t phase_index = 999;
    int sub_index = 999;
    const job_phase_t *leaf = job_spec_step (spec, step, &phase_index,
                                             &sub_index);
    assert_non_null (leaf);
    assert_int_equal (phase_index, phase);
    assert_int_equal (sub_index, sub);
    assert_non_null (leaf->backend);
    return leaf;
}

static void
test_job_grid_flat (void **state)
{
    job_spec_t *spec = s_load ("grid-flat.yaml");
    assert_int_equal (spec->target.scope, TARGET_GROUP);
    assert_string_equal (spec->target.value, "web");
    assert_false (spec->target.any);
    assert_int_equal (spec->phase_count, 3);
    assert_int_equal (job_spec_step_count (spec), 3);
    assert_int_equal (spec->strategy, JOB_STRATEGY_FAIL_FAST);
    assert_int_equal (spec->timeout_ms, 0);
    assert_int_equal (spec->priority, 0);
    assert_null (spec->idempotency_key);

    const job_phase_t *leaf = s_assert_step (spec, 0, 0, -1);
    assert_string_equal (leaf->backend, "apt");
    assert_string_equal (leaf->action, "update");
    assert_int_equal (leaf->param_count, 0);
    assert_int_equal (leaf->condition, JOB_COND_ALWAYS);
    leaf = s_assert_step (spec, 1, 1, -1);
    assert_string_equal (leaf->action, "install");
    assert_string_equal (job_phase_param (leaf, "package"), "nginx");
    assert_null (job_phase_param (leaf, "unit"));
    leaf = s_assert_step (spec, 2, 2, -1);
    assert_string_equal (leaf->backend, "systemd");
    assert_string_equal (job_phase_param (leaf, "unit"), "nginx");
    assert_null (job_spec_step (spec, 3, NULL, NULL));
    for (size_t i = 0; i < 3; i++)
        assert_int_equal (job_spec_phase_first_step (spec, i), i);
    job_spec_destroy (&spec);
    assert_null (spec);
    job_spec_destroy (&spec);
}

static void
test_job_grid_hierarchical (void **state)
{
    job_spec_t *spec = s_load ("grid-hierarchical.yaml");
    assert_int_equal (spec->phase_count, 2);
    assert_int_equal (job_spec_step_count (spec), 4);
    //  The pipeline: steps 0, 1, 2 in the branch
    const job_phase_t *branch = &spec->phases [0];
    assert_null (branch->backend);
    assert_int_equal (branch->task_count, 3);
    const job_phase_t *leaf = s_assert_step (spec, 0, 0, 0);
    assert_string_equal (leaf->action, "update");
    assert_ptr_equal (leaf, &branch->tasks [0]);
    leaf = s_assert_step (spec, 1, 0, 1);
    assert_string_equal (leaf->action, "install");
    assert_string_equal (job_phase_param (leaf, "package"), "nginx");
    leaf = s_assert_step (spec, 2, 0, 2);
    assert_string_equal (leaf->action, "enable");
    //  Step 3 is the barrier
    leaf = s_assert_step (spec, 3, 1, -1);
    assert_string_equal (leaf->backend, "systemd");
    assert_string_equal (leaf->action, "start");
    assert_null (job_spec_step (spec, 4, NULL, NULL));
    assert_int_equal (job_spec_phase_first_step (spec, 0), 0);
    assert_int_equal (job_spec_phase_first_step (spec, 1), 3);
    assert_int_equal (job_spec_phase_first_step (spec, 2), 4);
    job_spec_destroy (&spec);
}

static void
test_job_grid_conditions (void **state)
{
    job_spec_t *spec = s_load ("grid-conditions.yaml");
    assert_int_equal (spec->target.scope, TARGET_ALL);
    assert_null (spec->target.value);
    assert_int_equal (spec->strategy, JOB_STRATEGY_FAIL_FAST);
    assert_int_equal (spec->phase_count, 3);
    assert_int_equal (job_spec_step_count (spec), 3);
    assert_int_equal (spec->phases [0].condition, JOB_COND_ALWAYS);
    assert_int_equal (spec->phases [2].condition, JOB_COND_ON_FAILURE);
    assert_int_equal (spec->phases [2].task_count, 1);
    const job_phase_t *leaf = s_assert_step (spec, 2, 2, 0);
    assert_string_equal (leaf->action, "remove");
    assert_string_equal (job_phase_param (leaf, "package"), "myapp");
    job_spec_destroy (&spec);
}

static void
test_job_step_numbering (void **state)
{
    //  [leaf, branch[leaf, leaf], leaf] gives steps 0, 1, 2, 3
    job_spec_t *spec = s_valid_yaml ("target: all\n"
                                     "tasks:\n"
                                     "  - {backend: test, action: a}\n"
                                     "  - tasks:\n"
                                     "      - {backend: test, action: b}\n"
                                     "      - {backend: test, action: c}\n"
                                     "  - {backend: test, action: d}\n");
    assert_int_equal (job_spec_step_count (spec), 4);
    const char *actions [] = {"a", "b", "c", "d"};
    const size_t phases [] = {0, 1, 1, 2};
    const int subs [] = {-1, 0, 1, -1};
    for (size_t step = 0; step < 4; step++) {
        const job_phase_t *leaf = s_assert_step (spec, step, phases [step],
                                                 subs [step]);
        assert_string_equal (leaf->action, actions [step]);
    }
    assert_int_equal (job_spec_phase_first_step (spec, 1), 1);
    assert_int_equal (job_spec_phase_first_step (spec, 2), 3);
    job_spec_destroy (&spec);
}

static void
test_job_params_as_text (void **state)
{
    job_spec_t *spec = s_valid_yaml ("target: node:web-01,web-02\n"
                                     "tasks:\n"
                                     "  - backend: test\n"
                                     "    action: echo\n"
                                     "    params:\n"
                                     "      zeta: hello\n"
                                     "      port: 80\n"
                                     "      force: true\n"
                                     "      quoted: \"80\"\n"
                                     "      negative: -3\n"
                                     "      version: 1.10\n"
                                     "      alpha: ''\n");
    assert_int_equal (spec->target.scope, TARGET_NODE);
    assert_int_equal (spec->target.node_count, 2);
    const job_phase_t *leaf = &spec->phases [0];
    assert_int_equal (leaf->param_count, 7);
    //  Sorted by name
    const char *names [] = {"alpha", "force", "negative", "port",
                            "quoted", "version", "zeta"};
    const char *values [] = {"", "true", "-3", "80", "80", "1.10", "hello"};
    for (size_t i = 0; i < 7; i++) {
        assert_string_equal (leaf->params [i].name, names [i]);
        assert_string_equal (leaf->params [i].value, values [i]);
        assert_string_equal (job_phase_param (leaf, names [i]), values [i]);
    }
    assert_null (job_phase_param (leaf, "missing"));
    assert_null (job_phase_param (leaf, NULL));
    job_spec_destroy (&spec);

    //  "params:" with nothing after it is no params
    spec = s_valid_yaml ("target: all\n"
                         "tasks:\n"
                         "  - {backend: test, action: echo, params: }\n");
    assert_int_equal (spec->phases [0].param_count, 0);
    job_spec_destroy (&spec);
}

static void
test_job_target_forms (void **state)
{
    job_spec_t *spec = s_valid_yaml ("target: any:label:tier=web.dev\n"
                                     "tasks: [{backend: test, action: a}]\n");
    assert_int_equal (spec->target.scope, TARGET_LABEL);
    assert_true (spec->target.any);
    assert_string_equal (spec->target.label_key, "tier");
    assert_string_equal (spec->target.label_value, "web.dev");
    job_spec_destroy (&spec);

    spec = s_valid_yaml ("target: {scope: node, value: 'a,b', any: true}\n"
                         "tasks: [{backend: test, action: a}]\n");
    assert_int_equal (spec->target.scope, TARGET_NODE);
    assert_true (spec->target.any);
    assert_int_equal (spec->target.node_count, 2);
    job_spec_destroy (&spec);

    //  GRID writes an "all" target's value as ""
    spec = s_valid_yaml ("target: {scope: all, value: ''}\n"
                         "tasks: [{backend: test, action: a}]\n");
    assert_int_equal (spec->target.scope, TARGET_ALL);
    job_spec_destroy (&spec);

    //  An expression as text or as {scope: expr, value}; on the wire it
    //  is always the map, with the canonical text
    const char *files [] = {
        "target: 'any:(group:web or group:db)  and not node:web-03'\n",
        "target: {scope: expr, value: '(group:web or group:db) and not "
        "node:web-03', any: true}\n"};
    for (size_t i = 0; i < 2; i++) {
        char text [512];
        snprintf (text, sizeof text, "%stasks: [{backend: test, action: a}]\n",
                  files [i]);
        spec = s_valid_yaml (text);
        assert_int_equal (spec->target.scope, TARGET_EXPR);
        assert_true (spec->target.any);
        assert_string_equal (spec->target.value,
                             "(group:web or group:db) and not node:web-03");
        pw_t *writer = pw_new ();
        job_spec_encode (spec, writer);
        job_spec_t *again = NULL;
        job_errors_t errors = {.count = 0};
        assert_int_equal (s_decode_wire (writer, &again, &errors), 0);
        assert_int_equal (again->target.scope, TARGET_EXPR);
        assert_true (again->target.any);
        assert_string_equal (again->target.value, spec->target.value);
        job_spec_destroy (&again);
        pw_destroy (&writer);
        job_spec_destroy (&spec);
    }
}

//  A job that uses every field, built on the wire.
static void
s_write_full_job (pw_t *writer)
{
    pw_map (writer, 6);
    pw_str (writer, "target");
    pw_map (writer, 3);
    pw_str (writer, "scope");
    pw_str (writer, "label");
    pw_str (writer, "value");
    pw_str (writer, "tier=web.dev");
    pw_str (writer, "any");
    pw_bool (writer, true);
    pw_str (writer, "tasks");
    pw_array (writer, 3);
    {
        pw_map (writer, 6);
        pw_str (writer, "backend");
        pw_str (writer, "apt");
        pw_str (writer, "action");
        pw_str (writer, "install");
        pw_str (writer, "params");
        pw_map (writer, 3);
        pw_str (writer, "package");
        pw_str (writer, "nginx");
        pw_str (writer, "force");
        pw_bool (writer, false);
        pw_str (writer, "count");
        pw_int (writer, 3);
        pw_str (writer, "timeout");
        pw_str (writer, "90s");
        pw_str (writer, "max_retries");
        pw_int (writer, 2);
        pw_str (writer, "condition");
        pw_str (writer, "on_success");
    }
    {
        pw_map (writer, 2);
        pw_str (writer, "condition");
        pw_str (writer, "on_failure");
        pw_str (writer, "tasks");
        pw_array (writer, 2);
        pw_map (writer, 2);
        pw_str (writer, "backend");
        pw_str (writer, "apt");
        pw_str (writer, "action");
        pw_str (writer, "remove");
        pw_map (writer, 3);
        pw_str (writer, "backend");
        pw_str (writer, "test");
        pw_str (writer, "action");
        pw_str (writer, "echo");
        pw_str (writer, "timeout");
        pw_str (writer, "1500ms");
    }
    {
        pw_map (writer, 2);
        pw_str (writer, "backend");
        pw_str (writer, "systemd");
        pw_str (writer, "action");
        pw_str (writer, "start");
    }
    pw_str (writer, "strategy");
    pw_str (writer, "continue");
    pw_str (writer, "timeout");
    pw_str (writer, "1h30m");
    pw_str (writer, "priority");
    pw_int (writer, -5);
    pw_str (writer, "idempotency_key");
    pw_str (writer, "deploy-2026-11-21");
}

//  Deep equality of two leaves or branches.
static void
s_assert_phase_equal (const job_phase_t *a, const job_phase_t *b)
{
    if (a->backend || b->backend)
        assert_string_equal (a->backend, b->backend);
    if (a->action || b->action)
        assert_string_equal (a->action, b->action);
    assert_int_equal (a->param_count, b->param_count);
    for (size_t i = 0; i < a->param_count; i++) {
        assert_string_equal (a->params [i].name, b->params [i].name);
        assert_string_equal (a->params [i].value, b->params [i].value);
    }
    assert_int_equal (a->timeout_ms, b->timeout_ms);
    assert_int_equal (a->max_retries, b->max_retries);
    assert_int_equal (a->condition, b->condition);
    assert_int_equal (a->task_count, b->task_count);
    for (size_t i = 0; i < a->task_count; i++)
        s_assert_phase_equal (&a->tasks [i], &b->tasks [i]);
}

static void
test_job_round_trip (void **state)
{
    pw_t *writer = pw_new ();
    s_write_full_job (writer);
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_wire (writer, &spec, &errors), 0);
    assert_int_equal (spec->strategy, JOB_STRATEGY_CONTINUE);
    assert_int_equal (spec->timeout_ms, 5400000);
    assert_int_equal (spec->priority, -5);
    assert_string_equal (spec->idempotency_key, "deploy-2026-11-21");
    assert_int_equal (job_spec_step_count (spec), 4);
    const job_phase_t *first = &spec->phases [0];
    assert_int_equal (first->timeout_ms, 90000);
    assert_int_equal (first->max_retries, 2);
    assert_int_equal (first->condition, JOB_COND_ON_SUCCESS);
    assert_string_equal (job_phase_param (first, "count"), "3");
    assert_string_equal (job_phase_param (first, "force"), "false");

    //  Encode, decode again: the same spec, and the same bytes
    pw_reset (writer);
    job_spec_encode (spec, writer);
    job_spec_t *again = NULL;
    assert_int_equal (s_decode_wire (writer, &again, &errors), 0);
    assert_int_equal (again->target.scope, spec->target.scope);
    assert_int_equal (again->target.any, spec->target.any);
    assert_string_equal (again->target.value, spec->target.value);
    assert_string_equal (again->target.label_key, "tier");
    assert_int_equal (again->phase_count, spec->phase_count);
    for (size_t i = 0; i < spec->phase_count; i++)
        s_assert_phase_equal (&again->phases [i], &spec->phases [i]);
    assert_int_equal (again->strategy, spec->strategy);
    assert_int_equal (again->timeout_ms, spec->timeout_ms);
    assert_int_equal (again->priority, spec->priority);
    assert_string_equal (again->idempotency_key, spec->idempotency_key);

    pw_t *second = pw_new ();
    job_spec_encode (again, second);
    assert_int_equal (pw_size (second), pw_size (writer));
    assert_memory_equal (pw_data (second), pw_data (writer), pw_size (writer));
    pw_destroy (&second);
    job_spec_destroy (&again);
    job_spec_destroy (&spec);
    pw_destroy (&writer);
}

//  lease_ms travels and comes back; 0 (unset) is left out.
static void
test_job_lease_round_trip (void **state)
{
    job_spec_t *spec = s_valid_yaml ("target: any:group:web\n"
                                     "lease_ms: 5000\n"
                                     "tasks: [{backend: a, action: b}]\n");
    assert_int_equal (spec->lease_ms, 5000);
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    job_spec_t *again = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_wire (writer, &again, &errors), 0);
    assert_int_equal (again->lease_ms, 5000);
    job_spec_destroy (&again);
    job_spec_destroy (&spec);
    //  Limits too, and the patterns they match
    spec = s_valid_yaml ("target: all\n"
                         "limits: {apt.install: 3, rke2.*: 1}\n"
                         "tasks: [{backend: a, action: b}]\n");
    assert_int_equal (spec->limit_count, 2);
    pw_reset (writer);
    job_spec_encode (spec, writer);
    assert_int_equal (s_decode_wire (writer, &again, &errors), 0);
    assert_int_equal (again->limit_count, 2);
    assert_string_equal (again->limits [1].pattern, "rke2.*");
    assert_int_equal (again->limits [1].max, 1);
    assert_false (again->limits [1].per_node);
    assert_true (job_limit_matches ("rke2.*", "rke2", "start"));
    assert_true (job_limit_matches ("*.install", "apt", "install"));
    assert_false (job_limit_matches ("apt.install", "apt", "remove"));
    assert_false (job_limit_matches ("apt.*", "apt2", "install"));
    assert_false (job_limit_pattern_valid ("apt.in.stall"));
    assert_false (job_limit_pattern_valid ("apt.**"));
    job_spec_destroy (&again);
    job_spec_destroy (&spec);
    pw_destroy (&writer);
}

static void
test_job_encode_omits_defaults (void **state)
{
    job_spec_t *spec = s_load ("grid-flat.yaml");
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (
        pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0), 0);
    const pv_t *root = pv_doc_root (doc);
    assert_int_equal (pv_size (root), 2);      //  target and tasks only
    const pv_t *target = pv_map_get (root, "target");
    assert_int_equal (pv_size (target), 2);
    assert_true (pv_str_eq (pv_map_get (target, "scope"), "group"));
    assert_true (pv_str_eq (pv_map_get (target, "value"), "web"));
    const pv_t *update = pv_array_at (pv_map_get (root, "tasks"), 0);
    assert_int_equal (pv_size (update), 2);    //  backend and action only
    const pv_t *install = pv_array_at (pv_map_get (root, "tasks"), 1);
    assert_true (pv_str_eq (
        pv_map_get (pv_map_get (install, "params"), "package"), "nginx"));
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    job_spec_destroy (&spec);

    //  A timeout is written as text
    spec = s_valid_yaml ("target: all\n"
                         "timeout: 2m\n"
                         "tasks: [{backend: a, action: b, timeout: 500ms}]\n");
    writer = pw_new ();
    job_spec_encode (spec, writer);
    assert_int_equal (
        pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0), 0);
    root = pv_doc_root (doc);
    assert_true (pv_str_eq (pv_map_get (root, "timeout"), "2m"));
    assert_true (pv_str_eq (
        pv_map_get (pv_array_at (pv_map_get (root, "tasks"), 0), "timeout"),
        "500ms"));
    assert_int_equal (pv_size (pv_map_get (root, "target")), 1);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    job_spec_destroy (&spec);
}

static void
test_job_invalid_shapes (void **state)
{
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - bakend: apt\n"
                      "    action: update\n",
                      "tasks[0].bakend: unknown key");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - bakend: apt\n"
                      "    action: update\n",
                      "tasks[0].backend: required");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: apt}]\n",
                      "tasks[0].action: required");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - backend: apt\n"
                      "    action: update\n"
                      "    tasks: [{backend: apt, action: update}]\n",
                      "tasks[0]: a phase has either backend/action or "
                      "tasks, not both");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - tasks: []\n",
                      "tasks[0].tasks: must not be empty");
    s_assert_problem ("target: all\ntasks: []\n", "tasks: must not be empty");
    s_assert_problem ("target: all\n", "tasks: required");
    s_assert_problem ("target: all\ntasks:\n",
                      "tasks: expected an array, got nil");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - {backend: a, action: b}\n"
                      "  - tasks:\n"
                      "      - tasks:\n"
                      "          - {backend: a, action: b}\n",
                      "tasks[1].tasks[0].tasks: nesting deeper than 2");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - tasks: [{backend: a, action: b}]\n"
                      "    timeout: 10s\n",
                      "tasks[0].timeout: belongs on a task, not on a phase "
                      "with tasks");
    s_assert_problem ("target: all\n"
                      "tasks: [apt]\n",
                      "tasks[0]: expected a map (a task, or a phase with "
                      "tasks), got string");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: a, action: b}]\n"
                      "retries: 3\n",
                      "retries: unknown key");
    s_assert_problem ("- 1\n", "job: expected a map, got array");
}

static void
test_job_invalid_values (void **state)
{
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: ap t, action: update}]\n",
                      "tasks[0].backend: 'ap t' is not a valid name: use "
                      "letters, digits, '_' and '-' (1 to 64)");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: apt, action: 12}]\n",
                      "tasks[0].action: expected a string, got int");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: apt, action: up.date}]\n",
                      "tasks[0].action: 'up.date' is not a valid name: use "
                      "letters, digits, '_' and '-' (1 to 64)");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - {backend: a, action: b, condition: sometimes}\n",
                      "tasks[0].condition: unknown condition 'sometimes' "
                      "(always, on_success, on_failure)");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - condition: maybe\n"
                      "    tasks: [{backend: a, action: b}]\n",
                      "tasks[0].condition: unknown condition 'maybe' "
                      "(always, on_success, on_failure)");
    s_assert_problem ("target: all\n"
                      "strategy: sometimes\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "strategy: unknown strategy 'sometimes' (fail-fast, "
                      "continue)");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: a, action: b, timeout: 10x}]\n",
                      "tasks[0].timeout: '10x' is not a duration (like "
                      "500ms, 10s, 5m or 1h30m; at most 30d)");
    s_assert_problem ("target: all\n"
                      "timeout: 31d\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "timeout: '31d' is not a duration (like 500ms, 10s, "
                      "5m or 1h30m; at most 30d)");
    s_assert_problem ("target: all\n"
                      "timeout: 10\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "timeout: 10 has no unit: write a duration like "
                      "500ms, 10s, 5m or 1h30m");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: a, action: b, max_retries: 11}]\n",
                      "tasks[0].max_retries: 11 is out of range (0 to 10)");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: a, action: b, max_retries: -1}]\n",
                      "tasks[0].max_retries: -1 is out of range (0 to 10)");
    s_assert_problem ("target: all\n"
                      "tasks: [{backend: a, action: b, max_retries: '2'}]\n",
                      "tasks[0].max_retries: expected an integer, got "
                      "string");
    s_assert_problem ("target: all\n"
                      "priority: 101\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "priority: 101 is out of range (-100 to 100)");
    s_assert_problem ("target: all\n"
                      "priority: -101\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "priority: -101 is out of range (-100 to 100)");
    s_assert_problem ("target: any:all\n"
                      "lease_ms: 99\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "lease_ms: 99 is out of range (100 to 86400000)");
    s_assert_problem ("target: all\n"
                      "limits: {apt: 2}\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "limits: 'apt' is not backend.action (each "
                      "part a name or *, like apt.install or rke2.*)");
    s_assert_problem ("target: all\n"
                      "limits: {apt.install: 0}\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "limits: apt.install: expected an integer "
                      "from 1 to 1000000");
    s_assert_problem ("target: any:all\n"
                      "lease_ms: 10s\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "lease_ms: expected an integer, got string");
    s_assert_problem ("target: all\n"
                      "idempotency_key: ''\n"
                      "tasks: [{backend: a, action: b}]\n",
                      "idempotency_key: must be 1 to 256 bytes of printable "
                      "text");
    //  The limits themselves are fine
    job_spec_t *spec = s_valid_yaml ("target: all\n"
                                     "priority: -100\n"
                                     "timeout: 30d\n"
                                     "tasks:\n"
                                     "  - backend: a\n"
                                     "    action: b\n"
                                     "    max_retries: 10\n");
    assert_int_equal (spec->priority, -100);
    assert_int_equal (spec->phases [0].max_retries, 10);
    job_spec_destroy (&spec);
}

static void
test_job_invalid_targets (void **state)
{
    const char *tasks = "tasks: [{backend: a, action: b}]\n";
    char text [512];
    const char *cases [] [2] = {
        {"", "target: required"},
        {"target: group:web 1\n",
         "target: bad target at column 11: expected 'and', 'or' or the end "
         "after 'group:web', got '1'"},
        {"target: group:w.b\n",
         "target: group name 'w.b' is not valid: use letters, digits, '_' "
         "and '-' (1 to 64)"},
        {"target: group:web and not\n",
         "target: bad target at column 18: expected a term after 'not', got "
         "the end"},
        {"target: {scope: expr, value: 'group:web or'}\n",
         "target: bad target at column 13: expected a term after 'or', got "
         "the end"},
        {"target: {scope: expr}\n",
         "target: an expr target needs a value (group:web and not "
         "node:web-03)"},
        {"target: grp:web\n",
         "target: unknown target scope 'grp' (all, group:G, "
         "node:ID[,ID...], label:KEY=V1.V2, fact:KEY=VALUE, any[:TARGET])"},
        {"target: {value: web}\n", "target.scope: required"},
        {"target: {scope: grp, value: web}\n",
         "target: unknown target scope 'grp' (all, group, node, label, "
         "fact, expr)"},
        {"target: {scope: group, value: web, any: 1}\n",
         "target.any: expected true or false, got int"},
        {"target: {scope: group, value: web, sope: x}\n",
         "target.sope: unknown key"},
        {"target: {scope: group}\n",
         "target: a group target needs a value (group:G)"},
        {"target: {scope: node, value: 'a,a'}\n",
         "target: node id 'a' is listed twice"},
        {"target: [all]\n",
         "target: expected a map {scope, value} or a text like "
         "\"group:web\", got array"}};
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases [0]); i++) {
        snprintf (text, sizeof (text), "%s%s", cases [i] [0], tasks);
        s_assert_problem (text, cases [i] [1]);
    }
}

static void
test_job_invalid_params (void **state)
{
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - {backend: a, action: b, params: {bad key: 1}}\n",
                      "tasks[0].params: 'bad key' is not a valid parameter "
                      "name: use letters, digits, '_' and '-' (1 to 64)");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - {backend: a, action: b, params: {x: [1]}}\n",
                      "tasks[0].params.x: expected a string, integer or "
                      "boolean, got array");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - {backend: a, action: b, params: {x: }}\n",
                      "tasks[0].params.x: expected a string, integer or "
                      "boolean, got nil");
    s_assert_problem ("target: all\n"
                      "tasks:\n"
                      "  - {backend: a, action: b, params: [x]}\n",
                      "tasks[0].params: expected a map, got array");
    //  A NUL is not text: the file is refused before it is a job
    const char *nul = "target: all\n"
                      "tasks:\n"
                      "  - {backend: a, action: b, params: {x: \"a\\0b\"}}\n";
    pv_doc_t *doc = NULL;
    char err [256] = "";
    assert_int_equal (conf_parse (nul, strlen (nul), &doc, err, sizeof err),
                      -1);
    assert_null (doc);
    assert_non_null (strstr (err, "NUL"));

    //  Value length: JOB_MAX_PARAM_LEN bytes fit, one more does not
    size_t size = JOB_MAX_PARAM_LEN + 256;
    char *text = malloc (size);
    assert_non_null (text);
    int prefix = snprintf (text, size, "target: all\ntasks:\n"
                                       "  - {backend: a, action: b, "
                                       "params: {x: '");
    memset (text + prefix, 'v', JOB_MAX_PARAM_LEN);
    snprintf (text + prefix + JOB_MAX_PARAM_LEN, 8, "'}}\n");
    job_spec_t *spec = s_valid_yaml (text);
    assert_int_equal (strlen (job_phase_param (&spec->phases [0], "x")),
                      JOB_MAX_PARAM_LEN);
    job_spec_destroy (&spec);
    memset (text + prefix, 'v', JOB_MAX_PARAM_LEN + 1);
    snprintf (text + prefix + JOB_MAX_PARAM_LEN + 1, 8, "'}}\n");
    s_assert_problem (text, "tasks[0].params.x: longer than 4096 bytes");
    free (text);

    //  Count: JOB_MAX_PARAMS fit, one more does not
    size = 32 * (JOB_MAX_PARAMS + 1) + 128;
    text = malloc (size);
    assert_non_null (text);
    size_t used = (size_t) snprintf (text, size, "target: all\ntasks:\n"
                                                 "  - backend: a\n"
                                                 "    action: b\n"
                                                 "    params:\n");
    for (int i = 0; i < JOB_MAX_PARAMS; i++)
        used += (size_t) snprintf (text + used, size - used,
                                   "      p%d: %d\n", i, i);
    spec = s_valid_yaml (text);
    assert_int_equal (spec->phases [0].param_count, JOB_MAX_PARAMS);
    job_spec_destroy (&spec);
    snprintf (text + used, size - used, "      extra: 1\n");
    s_assert_problem (text, "tasks[0].params: too many params (65, at most "
                            "64)");
    free (text);

    //  On the wire a float is not a param value
    pw_t *writer = pw_new ();
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_str (writer, "all");
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, "a");
    pw_str (writer, "action");
    pw_str (writer, "b");
    pw_str (writer, "params");
    pw_map (writer, 1);
    pw_str (writer, "ratio");
    pw_float (writer, 0.5);
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_wire (writer, &spec, &errors), -1);
    assert_true (s_has_error (&errors, "tasks[0].params.ratio: expected a "
                                       "string, integer or boolean, got "
                                       "float"));
    job_errors_clear (&errors);
    pw_destroy (&writer);
}

static void
test_job_dead_letter_defaults_by_target (void **state)
{
    const char *cases [][2] = {
        {"target: any:group:web\ntasks: [{backend: a, action: b}]\n", "1"},
        {"target: group:web\ntasks: [{backend: a, action: b}]\n", "0"},
        {"target: group:web\ndead_letter: true\n"
         "tasks: [{backend: a, action: b}]\n", "1"},
        {"target: any\ndead_letter: false\n"
         "tasks: [{backend: a, action: b}]\n", "0"},
    };
    for (size_t index = 0; index < 4; index++) {
        job_spec_t *spec = NULL;
        job_errors_t errors = {.count = 0};
        assert_int_equal (s_decode_yaml (cases [index][0], &spec, &errors), 0);
        assert_int_equal (spec->dead_letter, cases [index][1][0] == '1');
        //  The wire form keeps it (written only when not the default)
        job_spec_t *copy = job_spec_dup (spec);
        assert_non_null (copy);
        assert_int_equal (copy->dead_letter, spec->dead_letter);
        job_spec_destroy (&copy);
        job_spec_destroy (&spec);
    }
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_yaml ("target: all\ndead_letter: maybe\n"
                                     "tasks: [{backend: a, action: b}]\n",
                                     &spec, &errors), -1);
    assert_non_null (strstr (errors.items [0], "dead_letter"));
    job_errors_clear (&errors);
}

static void
test_job_bounds (void **state)
{
    //  Phases: JOB_MAX_PHASES fit, one more does not
    pw_t *writer = pw_new ();
    for (int extra = 0; extra <= 1; extra++) {
        pw_reset (writer);
        pw_map (writer, 2);
        pw_str (writer, "target");
        pw_str (writer, "all");
        pw_str (writer, "tasks");
        pw_array (writer, JOB_MAX_PHASES + extra);
        for (int i = 0; i < JOB_MAX_PHASES + extra; i++) {
            pw_map (writer, 2);
            pw_str (writer, "backend");
            pw_str (writer, "a");
            pw_str (writer, "action");
            pw_str (writer, "b");
        }
        job_spec_t *spec = NULL;
        job_errors_t errors = {.count = 0};
        int rc = s_decode_wire (writer, &spec, &errors);
        if (extra) {
            assert_int_equal (rc, -1);
            assert_true (s_has_error (&errors, "tasks: too many phases "
                                               "(257, at most 256)"));
        }
        else {
            assert_int_equal (rc, 0);
            assert_int_equal (job_spec_step_count (spec), JOB_MAX_PHASES);
        }
        job_errors_clear (&errors);
        job_spec_destroy (&spec);
    }

    //  Steps: 4 branches of 256 leaves fit, a fifth leaf does not
    for (int extra = 0; extra <= 1; extra++) {
        pw_reset (writer);
        pw_map (writer, 2);
        pw_str (writer, "target");
        pw_str (writer, "all");
        pw_str (writer, "tasks");
        pw_array (writer, 4 + extra);
        for (int i = 0; i < 4; i++) {
            pw_map (writer, 1);
            pw_str (writer, "tasks");
            pw_array (writer, 256);
            for (int j = 0; j < 256; j++) {
                pw_map (writer, 2);
                pw_str (writer, "backend");
                pw_str (writer, "a");
                pw_str (writer, "action");
                pw_str (writer, "b");
            }
        }
        if (extra) {
            pw_map (writer, 2);
            pw_str (writer, "backend");
            pw_str (writer, "a");
            pw_str (writer, "action");
            pw_str (writer, "b");
        }
        job_spec_t *spec = NULL;
        job_errors_t errors = {.count = 0};
        int rc = s_decode_wire (writer, &spec, &errors);
        if (extra) {
            assert_int_equal (rc, -1);
            assert_true (s_has_error (&errors, "tasks: too many steps "
                                               "(1025, at most 1024)"));
        }
        else {
            assert_int_equal (rc, 0);
            assert_int_equal (job_spec_step_count (spec), JOB_MAX_STEPS);
            size_t phase = 0;
            int sub = 0;
            assert_non_null (job_spec_step (spec, 1023, &phase, &sub));
            assert_int_equal (phase, 3);
            assert_int_equal (sub, 255);
            assert_int_equal (job_spec_phase_first_step (spec, 2), 512);
        }
        job_errors_clear (&errors);
        job_spec_destroy (&spec);
    }
    pw_destroy (&writer);
}

static void
test_job_every_problem_reported (void **state)
{
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    int rc = s_decode_yaml ("target: group:web 1\n"
                            "strategy: sometimes\n"
                            "priority: 500\n"
                            "tasks:\n"
                            "  - bakend: apt\n"
                            "    action: update\n"
                            "  - backend: apt\n"
                            "    action: install\n"
                            "    timeout: soon\n"
                            "    max_retries: 99\n"
                            "  - tasks:\n"
                            "      - {backend: a, action: b}\n"
                            "      - tasks: [{backend: a, action: b}]\n"
                            "    condition: whenever\n",
                            &spec, &errors);
    assert_int_equal (rc, -1);
    assert_null (spec);
    const char *expected [] = {
        "target: bad target at column 11: expected 'and', 'or' or the end "
        "after 'group:web', got '1'",
        "strategy: unknown strategy 'sometimes' (fail-fast, continue)",
        "priority: 500 is out of range (-100 to 100)",
        "tasks[0].bakend: unknown key",
        "tasks[0].backend: required",
        "tasks[1].timeout: 'soon' is not a duration (like 500ms, 10s, 5m or "
        "1h30m; at most 30d)",
        "tasks[1].max_retries: 99 is out of range (0 to 10)",
        "tasks[2].tasks[1].tasks: nesting deeper than 2",
        "tasks[2].condition: unknown condition 'whenever' (always, "
        "on_success, on_failure)"};
    size_t count = sizeof (expected) / sizeof (expected [0]);
    if (errors.count != count)
        s_print_errors (&errors);
    assert_int_equal (errors.count, count);
    for (size_t i = 0; i < count; i++) {
        if (!s_has_error (&errors, expected [i]))
            print_error ("missing: %s\n", expected [i]);
        assert_true (s_has_error (&errors, expected [i]));
    }
    assert_false (errors.truncated);
    job_errors_clear (&errors);

    //  Without an errors list, decoding still fails
    assert_int_equal (s_decode_yaml ("target: nowhere\n", &spec, NULL), -1);
    assert_null (spec);
}

static void
test_job_errors_truncated (void **state)
{
    //  40 phases, each missing its action: more than JOB_MAX_ERRORS
    size_t size = 64 * 40 + 64;
    char *text = malloc (size);
    assert_non_null (text);
    size_t used = (size_t) snprintf (text, size, "target: all\ntasks:\n");
    for (int i = 0; i < 40; i++)
        used += (size_t) snprintf (text + used, size - used,
                                   "  - {backend: a}\n");
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_yaml (text, &spec, &errors), -1);
    assert_int_equal (errors.count, JOB_MAX_ERRORS);
    assert_true (errors.truncated);
    assert_string_equal (errors.items [0], "tasks[0].action: required");
    assert_string_equal (errors.items [JOB_MAX_ERRORS - 1],
                         "tasks[31].action: required");
    job_errors_clear (&errors);
    assert_false (errors.truncated);
    free (text);
}

//  Makes a fresh directory under $TMPDIR (or /tmp) into DIR (DIR_LEN
//  bytes); mkdtemp wants a template that ends in six 'X'.
static void
s_make_temp_dir (char *dir, size_t dir_len, const char *prefix)
{
    const char *tmp = getenv ("TMPDIR");
    int used = snprintf (dir, dir_len, "%s/%s.", tmp && *tmp ? tmp : "/tmp",
                         prefix);
    assert_true (used > 0 && (size_t) used + 7 <= dir_len);
    memset (dir + used, 'X', 6);
    dir [used + 6] = '\0';
    assert_non_null (mkdtemp (dir));
}

static void
test_job_load_file_errors (void **state)
{
    char dir [256];
    s_make_temp_dir (dir, sizeof (dir), "test_job");
    char *path = NULL;
    assert_true (asprintf (&path, "%s/broken.yaml", dir) > 0);
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fputs ("target: all\ntasks:\n  - backend: a\n   action: b\n", file);
    assert_int_equal (fclose (file), 0);

    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (job_spec_load_file (path, &spec, &errors), -1);
    assert_null (spec);
    assert_int_equal (errors.count, 1);
    char *expected = NULL;
    assert_true (asprintf (&expected, "%s: line 4, column ", path) > 0);
    assert_memory_equal (errors.items [0], expected, strlen (expected));
    free (expected);
    job_errors_clear (&errors);

    //  A file that parses but is not a valid job: every problem, as usual
    file = fopen (path, "w");
    assert_non_null (file);
    fputs ("target: all\ntasks:\n  - {backend: a, acton: b}\n", file);
    assert_int_equal (fclose (file), 0);
    assert_int_equal (job_spec_load_file (path, &spec, &errors), -1);
    assert_true (s_has_error (&errors, "tasks[0].acton: unknown key"));
    assert_true (s_has_error (&errors, "tasks[0].action: required"));
    job_errors_clear (&errors);

    assert_int_equal (unlink (path), 0);
    assert_int_equal (job_spec_load_file (path, &spec, &errors), -1);
    assert_int_equal (errors.count, 1);
    assert_non_null (strstr (errors.items [0], "No such file or directory"));
    job_errors_clear (&errors);
    assert_int_equal (rmdir (dir), 0);
    free (path);
}

static void
test_job_names (void **state)
{
    assert_string_equal (job_condition_name (JOB_COND_ALWAYS), "always");
    assert_string_equal (job_condition_name (JOB_COND_ON_SUCCESS),
                         "on_success");
    assert_string_equal (job_condition_name (JOB_COND_ON_FAILURE),
                         "on_failure");
    assert_string_equal (job_strategy_name (JOB_STRATEGY_FAIL_FAST),
                         "fail-fast");
    assert_string_equal (job_strategy_name (JOB_STRATEGY_CONTINUE),
                         "continue");
}


//  A DAG job file: names, needs, barrier; the step graph and its order
static void
test_job_dag_file (void **state)
{
    job_spec_t *spec = s_load ("dag-join.yaml");
    assert_true (job_spec_is_dag (spec));
    assert_int_equal (job_spec_step_count (spec), 5);
    assert_string_equal (job_spec_step_name (spec, 2), "deploy");
    assert_true (spec->phases [3].barrier);
    job_graph_t *graph = job_graph_new (spec);
    assert_non_null (graph);
    assert_int_equal (graph->steps [0].need_count, 0);
    assert_int_equal (graph->steps [2].need_count, 2);
    assert_int_equal (graph->steps [2].needs [0], 0);
    assert_int_equal (graph->steps [2].needs [1], 1);
    assert_true (graph->steps [3].barrier);
    assert_false (graph->steps [4].barrier);
    for (size_t i = 0; i < 5; i++)
        assert_int_equal (graph->order [i], i);
    job_graph_destroy (&graph);
    assert_null (graph);

    //  Encode and decode again: the same links
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    job_spec_t *again = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_wire (writer, &again, &errors), 0);
    assert_string_equal (again->phases [2].needs [1], "build");
    assert_true (again->phases [3].barrier);
    assert_string_equal (again->phases [4].name, "rollback");
    job_spec_destroy (&again);
    pw_destroy (&writer);
    job_spec_destroy (&spec);

    //  A job without needs is not a DAG, even with names
    spec = s_valid_yaml ("target: all\ntasks:\n"
                         "  - {name: a, backend: x, action: y}\n");
    assert_false (job_spec_is_dag (spec));
    assert_null (job_graph_new (spec));
    job_spec_destroy (&spec);

    //  A pipeline without inner needs is a chain; its outer needs go to
    //  its first task; a task needing it needs all of it; needs may point
    //  forward (order: lowest ready step first)
    spec = s_valid_yaml ("target: all\ntasks:\n"
                         "  - {name: last, backend: x, action: y,"
                         " needs: [p]}\n"
                         "  - {name: first, backend: x, action: y}\n"
                         "  - name: p\n"
                         "    needs: [first]\n"
                         "    tasks:\n"
                         "      - {backend: x, action: one}\n"
                         "      - {backend: x, action: two}\n");
    graph = job_graph_new (spec);
    assert_non_null (graph);
    assert_int_equal (graph->steps [0].need_count, 2);
    assert_int_equal (graph->steps [2].needs [0], 1);
    assert_int_equal (graph->steps [3].needs [0], 2);
    size_t order [] = {1, 2, 3, 0};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal (graph->order [i], order [i]);
    job_graph_destroy (&graph);
    job_spec_destroy (&spec);
}

//  Every DAG mistake, each naming the tasks involved
static void
test_job_dag_invalid (void **state)
{
    char *path = s_data_path ("dag-invalid.yaml");
    job_spec_t *spec = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (job_spec_load_file (path, &spec, &errors), -1);
    free (path);
    const char *expected [] = {
        "tasks[3].tasks[1].name: 'a' is already the name of tasks[0]",
        "tasks[3].tasks[1].barrier: only a top-level task can be a barrier "
        "(a pipeline runs per node)",
        "tasks[1].needs[1]: unknown task 'ghost'",
        "tasks[4].needs[0]: 'inner' (tasks[3].tasks[0]) is inside a "
        "pipeline: a need cannot cross a pipeline boundary; need the "
        "pipeline tasks[3] by its name",
        "tasks[3].tasks[0].needs[0]: 'a' (tasks[0]) is outside this "
        "pipeline: a need cannot cross a pipeline boundary; put the need "
        "on the pipeline tasks[3]",
        //  The cycle among the needs that resolved, with the rest
        "tasks: needs form a cycle: a -> c -> b -> a",
    };
    for (size_t i = 0; i < sizeof (expected) / sizeof (expected [0]); i++) {
        if (!s_has_error (&errors, expected [i])) {
            print_error ("missing '%s'; got:\n", expected [i]);
            s_print_errors (&errors);
        }
        assert_true (s_has_error (&errors, expected [i]));
    }
    job_errors_clear (&errors);

    s_assert_problem ("target: all\ntasks:\n"
                      "  - {name: a, backend: x, action: y, needs: [c]}\n"
                      "  - {name: b, backend: x, action: y, needs: [a]}\n"
                      "  - {name: c, backend: x, action: y, needs: [b]}\n",
                      "tasks: needs form a cycle: a -> c -> b -> a");
    s_assert_problem ("target: all\ntasks:\n"
                      "  - tasks:\n"
                      "      - {name: x, backend: x, action: y, needs: y}\n"
                      "      - {name: y, backend: x, action: y, needs: x}\n",
                      "tasks[0].tasks: needs form a cycle: x -> y -> x");
    s_assert_problem ("target: all\ntasks:\n"
                      "  - {name: a, backend: x, action: y, needs: [a]}\n",
                      "tasks[0].needs[0]: 'a' is this task itself");
    s_assert_problem ("target: all\ntasks:\n"
                      "  - {name: a, backend: x, action: y}\n"
                      "  - {backend: x, action: y, needs: [a, a]}\n",
                      "tasks[1].needs[1]: 'a' is listed twice");
    s_assert_problem ("target: all\ntasks:\n"
                      "  - {backend: x, action: y, needs: {a: 1}}\n",
                      "tasks[0].needs: expected a list of task names, got "
                      "map");
    s_assert_problem ("target: all\ntasks:\n"
                      "  - {backend: x, action: y, needs: ['b c']}\n",
                      "tasks[0].needs[0]: 'b c' is not a valid name: use "
                      "letters, digits, '_' and '-' (1 to 64)");
    s_assert_problem ("target: all\ntasks:\n"
                      "  - {backend: x, action: y, barrier: 1}\n",
                      "tasks[0].barrier: expected true or false, got int");
}

//  batch, max_failures, canary: counts or percents, with their bounds
static void
test_job_batch_fields (void **state)
{
    job_spec_t *spec = s_load ("rolling-batch.yaml");
    assert_true (spec->batch.set && spec->batch.percent);
    assert_int_equal (spec->batch.value, 34);
    assert_true (spec->max_failures.set && !spec->max_failures.percent);
    assert_int_equal (spec->max_failures.value, 1);
    assert_int_equal (spec->canary, 1);
    assert_int_equal (job_amount_nodes (&spec->batch, 3), 2);
    assert_int_equal (job_amount_nodes (&spec->batch, 1), 1);
    char text [16];
    job_amount_format (&spec->batch, text, sizeof (text));
    assert_string_equal (text, "34%");
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    job_spec_t *again = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_wire (writer, &again, &errors), 0);
    assert_true (again->batch.percent);
    assert_int_equal (again->batch.value, 34);
    assert_int_equal (again->max_failures.value, 1);
    assert_int_equal (again->canary, 1);
    job_spec_destroy (&again);
    pw_destroy (&writer);
    job_spec_destroy (&spec);

    spec = s_valid_yaml ("target: all\nbatch: '10'\nmax_failures: 0\n"
                         "tasks: [{backend: x, action: y}]\n");
    assert_false (spec->batch.percent);
    assert_int_equal (spec->batch.value, 10);
    assert_true (spec->max_failures.set);
    assert_int_equal (spec->max_failures.value, 0);
    job_spec_destroy (&spec);

    const char *tasks = "tasks: [{backend: x, action: y}]\n";
    const char *cases [] [2] = {
        {"batch: 0\n", "batch: 0 is out of range (1 or more nodes, at most "
                       "100000, or a percent like \"10%\")"},
        {"batch: 0%\n", "batch: '0%' is neither a count (1 or more, at most "
                        "100000) nor a percent from 1% to 100%"},
        {"batch: 101%\n", "batch: '101%' is neither a count (1 or more, at "
                          "most 100000) nor a percent from 1% to 100%"},
        {"batch: [1]\n", "batch: expected a count or a percent like "
                         "\"10%\", got array"},
        {"max_failures: -1\n", "max_failures: -1 is out of range (0 or more "
                               "nodes, at most 100000, or a percent like "
                               "\"10%\")"},
        {"max_failures: 'x%'\n", "max_failures: 'x%' is neither a count (0 "
                                 "or more, at most 100000) nor a percent "
                                 "from 1% to 100%"},
        {"canary: 0\n", "canary: 0 is out of range (1 to 100000)"},
    };
    char text2 [256];
    for (size_t i = 0; i < sizeof (cases) / sizeof (cases [0]); i++) {
        snprintf (text2, sizeof (text2), "target: all\n%s%s", cases [i] [0],
                  tasks);
        s_assert_problem (text2, cases [i] [1]);
    }
    job_amount_t amount;
    assert_int_equal (job_amount_parse ("100%", true, &amount), 0);
    assert_int_equal (job_amount_parse ("0", true, &amount), -1);
    assert_int_equal (job_amount_parse ("0", false, &amount), 0);
    assert_int_equal (job_amount_parse ("5%x", true, &amount), -1);
    assert_int_equal (job_amount_parse ("", true, &amount), -1);
    assert_int_equal (job_amount_parse ("99999999999", true, &amount), -1);
}

//  notify: webhooks as maps or URLs, each URL checked with its path named;
//  the stored form leaves them out, job_notify_encode/decode keep them.
static void
test_job_notify (void **state)
{
    job_spec_t *spec = s_valid_yaml (
        "target: all\n"
        "notify:\n"
        "  - {url: \"https://hooks.example.com/a?k=1\", on: [failed, timeout]}\n"
        "  - http://127.0.0.1:8080/b\n"
        "tasks: [{backend: test, action: echo}]\n");
    assert_int_equal (spec->notify_count, 2);
    assert_string_equal (spec->notify [0].url, "https://hooks.example.com/a?k=1");
    assert_int_equal (spec->notify [0].on, JOB_NOTIFY_FAILED | JOB_NOTIFY_TIMEOUT);
    assert_int_equal (spec->notify [1].on, JOB_NOTIFY_ALL);
    //  The wire form round-trips; the stored form has no notify
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    job_spec_t *copy = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_wire (writer, &copy, &errors), 0);
    assert_int_equal (copy->notify_count, 2);
    assert_int_equal (copy->notify [0].on, spec->notify [0].on);
    job_spec_destroy (&copy);
    pw_reset (writer);
    job_spec_encode_stored (spec, writer);
    assert_int_equal (s_decode_wire (writer, &copy, &errors), 0);
    assert_int_equal (copy->notify_count, 0);
    pw_reset (writer);
    job_notify_encode (spec, writer);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_int_equal (job_notify_decode (pv_doc_root (doc), copy), 0);
    assert_int_equal (copy->notify_count, 2);
    assert_string_equal (copy->notify [1].url, "http://127.0.0.1:8080/b");
    pv_doc_destroy (&doc);
    job_spec_destroy (&copy);
    pw_destroy (&writer);
    job_spec_destroy (&spec);

    s_assert_problem ("target: all\nnotify: [\"ftp://x/\"]\n"
                      "tasks: [{backend: test, action: echo}]\n",
                      "notify[0]: must start with http:// or https://");
    s_assert_problem ("target: all\nnotify: [{url: \"http://u:p@x/\"}]\n"
                      "tasks: [{backend: test, action: echo}]\n",
                      "notify[0].url: must not carry a user or password "
                      "(the signature authenticates the broker)");
    s_assert_problem ("target: all\nnotify: [{url: \"http:///x\"}]\n"
                      "tasks: [{backend: test, action: echo}]\n",
                      "notify[0].url: has no host");
    s_assert_problem ("target: all\nnotify: [{url: \"http://x/\", on: [late]}]\n"
                      "tasks: [{backend: test, action: echo}]\n",
                      "notify[0].on: unknown job end 'late' (completed, "
                      "partial_failure, failed, cancelled, timeout)");
    s_assert_problem ("target: all\nnotify: [{url: \"http://x/\", to: y}]\n"
                      "tasks: [{backend: test, action: echo}]\n",
                      "notify[0].to: unknown key");
    s_assert_problem ("target: all\nnotify: []\n"
                      "tasks: [{backend: test, action: echo}]\n",
                      "notify: 1 to 4 webhooks, got 0");
    char url [JOB_NOTIFY_URL_MAX + 16];
    memset (url, 'a', sizeof url - 1);
    memcpy (url, "http://", 7);
    url [sizeof url - 1] = 0;
    char why [256];
    assert_int_equal (job_notify_url_check (url, why, sizeof why), -1);
    assert_non_null (strstr (why, "too long"));
    assert_int_equal (job_notify_url_check ("http://a b/", why, sizeof why), -1);
    assert_int_equal (job_notify_url_check ("https://h:8443/x", why, sizeof why), 0);
}

//  A dry run's check: kept in the stored form only, which the wire
//  decoder (a release before dry runs reads the store so) refuses;
//  job_spec_dup keeps it
static void
test_job_check_stored (void **state)
{
    job_spec_t *spec = s_valid_yaml ("target: all\n"
                                     "tasks: [{backend: test, action: echo}]\n");
    assert_false (spec->check);
    spec->check = true;
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    job_spec_t *copy = NULL;
    job_errors_t errors = {.count = 0};
    assert_int_equal (s_decode_wire (writer, &copy, &errors), 0);
    assert_false (copy->check);
    job_spec_destroy (&copy);
    pw_reset (writer);
    job_spec_encode_stored (spec, writer);
    assert_int_equal (s_decode_wire (writer, &copy, &errors), -1);
    job_errors_clear (&errors);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer), &doc,
                                     NULL, 0), 0);
    assert_int_equal (job_spec_decode_stored (pv_doc_root (doc), &copy,
                                              &errors), 0);
    assert_true (copy->check);
    job_spec_t *dup = job_spec_dup (copy);
    assert_non_null (dup);
    assert_true (dup->check);
    job_spec_destroy (&dup);
    job_spec_destroy (&copy);
    pv_doc_destroy (&doc);
    //  Without check, the stored form is as before
    spec->check = false;
    pw_reset (writer);
    job_spec_encode_stored (spec, writer);
    assert_int_equal (s_decode_wire (writer, &copy, &errors), 0);
    job_spec_destroy (&copy);
    //  check in a job file or the wire form is refused
    s_assert_problem ("target: all\ncheck: true\n"
                      "tasks: [{backend: test, action: echo}]\n",
                      "check: unknown key");
    pw_destroy (&writer);
    job_spec_destroy (&spec);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_job_notify),
        cmocka_unit_test (test_job_grid_flat),
        cmocka_unit_test (test_job_grid_hierarchical),
        cmocka_unit_test (test_job_grid_conditions),
        cmocka_unit_test (test_job_step_numbering),
        cmocka_unit_test (test_job_params_as_text),
        cmocka_unit_test (test_job_target_forms),
        cmocka_unit_test (test_job_round_trip),
        cmocka_unit_test (test_job_lease_round_trip),
        cmocka_unit_test (test_job_encode_omits_defaults),
        cmocka_unit_test (test_job_invalid_shapes),
        cmocka_unit_test (test_job_invalid_values),
        cmocka_unit_test (test_job_invalid_targets),
        cmocka_unit_test (test_job_invalid_params),
        cmocka_unit_test (test_job_bounds),
        cmocka_unit_test (test_job_dead_letter_defaults_by_target),
        cmocka_unit_test (test_job_every_problem_reported),
        cmocka_unit_test (test_job_errors_truncated),
        cmocka_unit_test (test_job_load_file_errors),
        cmocka_unit_test (test_job_names),
        cmocka_unit_test (test_job_dag_file),
        cmocka_unit_test (test_job_dag_invalid),
        cmocka_unit_test (test_job_batch_fields),
        cmocka_unit_test (test_job_check_stored),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
