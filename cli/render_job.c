/*  =========================================================================
    cli - rendering of job records, dry runs and progress (cli.h, render_job.h)
    =========================================================================
*/
#include "render_job.h"

#include <czmq.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../proto/proto.h"
#include "../proto/pw.h"
#include "render.h"
#include "util.h"

static const char *s_final_job [] = {
    "completed", "partial_failure", "failed", "cancelled", NULL
};
static const char *s_final_cell [] = {
    "success", "failed", "timeout", "skipped", "lost", "cancelled",
    "interrupted", "offline", "drained", "unsupported", NULL
};
//  Every final status that is a failure of that node (a cancel or a skip
//  is not): marked ! and counted in "N steps failed"
static const char *s_bad_cell [] = {
    "failed", "timeout", "lost", "interrupted", "offline", "drained",
    "unsupported", NULL
};

bool
cli_is_job_record (const pv_t *record)
{
    return pv_type (record) == PV_MAP
        && pv_type (pv_map_get (record, "id")) == PV_STR
        && pv_type (pv_map_get (record, "status")) == PV_STR;
}

bool
cli_job_finished (const pv_t *record)
{
    return cli_str_in (pv_map_get (record, "status"), s_final_job);
}

int
cli_job_exit_code (const pv_t *record)
{
    const pv_t *status = pv_map_get (record, "status");
    if (pv_str_eq (status, "failed") || pv_str_eq (status, "partial_failure")
    ||  pv_str_eq (status, "cancelled"))
        return CLI_EXIT_JOB_FAILED;
    return CLI_EXIT_OK;
}

//  The leaf of flat step STEP: leaves are numbered depth-first, a branch
//  ({tasks: [...]}) holding its leaves in order.
static const pv_t *
s_step_leaf (const pv_t *tasks, int64_t step)
{
    int64_t first = 0;
    for (size_t index = 0; index < pv_size (tasks); index++) {
        const pv_t *phase = pv_array_at (tasks, index);
        const pv_t *branch = pv_map_get (phase, "tasks");
        if (pv_type (branch) == PV_ARRAY) {
            int64_t count = (int64_t) pv_size (branch);
            if (step < first + count)
                return pv_array_at (branch, (size_t) (step - first));
            first += count;
        }
        else {
            if (step == first)
                return phase;
            first++;
        }
    }
    return NULL;
}

//  Steps of a job: its `steps`, else the leaves of its tasks; never more
//  than a job may hold, whatever the record says.
int64_t
cli_step_count (const pv_t *record)
{
    int64_t steps = cli_field_int (record, "steps", -1);
    if (steps < 0) {
        const pv_t *tasks = pv_map_get (record, "tasks");
        steps = 0;
        for (size_t index = 0; index < pv_size (tasks); index++) {
            const pv_t *branch = pv_map_get (pv_array_at (tasks, index),
                                             "tasks");
            steps += pv_type (branch) == PV_ARRAY ? (int64_t) pv_size (branch)
                                                  : 1;
        }
    }
    return steps > JOB_MAX_STEPS ? JOB_MAX_STEPS : steps;
}

//  A job record's results laid out for display: the nodes in order, and
//  per step the leaf and a node -> cell index, so that a job on thousands
//  of nodes renders in linear time. Cells and leaves are borrowed from
//  the record.
typedef struct {
    char **nodes;           //  `expected` order, then any other with a result
    size_t node_count;      //  How many nodes
    int64_t step_count;     //  Steps of the job
    const pv_t **leaves;    //  Per step: its task, or NULL
    zhashx_t **cells;       //  Per step: node id -> cell
    zhashx_t *seen;         //  Node ids already in NODES
} s_grid_t;

static void
s_grid_add_node (s_grid_t *self, const char *node)
{
    if (zhashx_insert (self->seen, node, (void *) 1) != 0)
        return;              //  Already listed
    self->nodes = cli_realloc (self->nodes,
                               (self->node_count + 1) * sizeof (char *));
    self->nodes [self->node_count++] = cli_strdup (node);
}

static s_grid_t *
s_grid_new (const pv_t *record)
{
    s_grid_t *self = cli_realloc (NULL, sizeof *self);
    memset (self, 0, sizeof *self);
    self->seen = zhashx_new ();
    self->step_count = cli_step_count (record);
    size_t steps = (size_t) self->step_count;
    self->leaves = cli_realloc (NULL, steps * sizeof (pv_t *));
    self->cells = cli_realloc (NULL, steps * sizeof (zhashx_t *));

    const pv_t *expected = pv_map_get (record, "expected");
    for (size_t index = 0; index < pv_size (expected); index++) {
        char *node = pv_strdup (pv_array_at (expected, index));
        if (node)
            s_grid_add_node (self, node);
        free (node);
    }
    const pv_t *tasks = pv_map_get (record, "tasks");
    const pv_t *results = pv_map_get (record, "results");
    for (size_t step = 0; step < steps; step++) {
        self->leaves [step] = s_step_leaf (tasks, (int64_t) step);
        self->cells [step] = zhashx_new ();
        char key [32];
        snprintf (key, sizeof key, "%zu", step);
        const pv_t *row = pv_map_get (results, key);
        for (size_t index = 0; index < pv_size (row); index++) {
            const pv_t *cell = pv_map_value_at (row, index);
            char *node = pv_strdup (pv_map_key_at (row, index));
            if (node && pv_type (cell) == PV_MAP) {
                zhashx_insert (self->cells [step], node, (void *) cell);
                s_grid_add_node (self, node);
            }
            free (node);
        }
    }
    return self;
}

static void
s_grid_destroy (s_grid_t **self_p)
{
    s_grid_t *self = *self_p;
    if (!self)
        return;
    for (size_t index = 0; index < self->node_count; index++)
        free (self->nodes [index]);
    for (int64_t step = 0; step < self->step_count; step++)
        zhashx_destroy (&self->cells [step]);
    free (self->nodes);
    free (self->leaves);
    free (self->cells);
    zhashx_destroy (&self->seen);
    free (self);
    *self_p = NULL;
}

//  The cell of NODE at STEP, or NULL.
static const pv_t *
s_grid_cell (const s_grid_t *self, int64_t step, const char *node)
{
    if (step < 0 || step >= self->step_count)
        return NULL;
    return zhashx_lookup (self->cells [step], node);
}

//  The text a cell shows in OUTPUT: the error of a failed step (its output
//  when it has no error), else the output (its error when it printed
//  nothing). A new printable string, first line only, cut to fit.
static char *
s_cell_output (const pv_t *cell, bool bad)
{
    const pv_t *output = pv_map_get (cell, "output");
    const pv_t *error = pv_map_get (cell, "error");
    const pv_t *first = bad ? error : output;
    const pv_t *second = bad ? output : error;
    const pv_t *chosen = pv_size (first) ? first : second;
    //  A step that never ran says why (offline since ..., drained, ...)
    if (!pv_size (chosen) && pv_type (pv_map_get (cell, "reason")) == PV_STR)
        chosen = pv_map_get (cell, "reason");
    size_t len = 0;
    const char *bytes = pv_str (chosen, &len);
    //  Skip leading blank lines: the first line that says something
    while (len && (*bytes == '\n' || *bytes == '\r' || *bytes == ' ')) {
        bytes++;
        len--;
    }
    return cli_printable (bytes, len, CLI_OUTPUT_COLUMNS, true);
}

//  A result that came after the broker's verdict ("late": {status,
//  exit_code, at}) said before the cell's OUTPUT: "late: success at
//  22:41:07; node went offline". Takes OUTPUT; returns a new string.
static char *
s_with_late (const pv_t *cell, char *output)
{
    const pv_t *late = pv_map_get (cell, "late");
    if (pv_type (late) != PV_MAP)
        return output;
    char status [64], at [40], clock [16] = "";
    cli_scalar (pv_map_get (late, "status"), status, sizeof status);
    cli_scalar (pv_map_get (late, "at"), at, sizeof at);
    //  "2026-12-02T22:41:07.123Z": the time of day
    if (strlen (at) >= 19 && at [10] == 'T')
        snprintf (clock, sizeof clock, "%.8s", at + 11);
    char *text = NULL;
    if (asprintf (&text, "late: %s%s%s%s%s", status, *clock ? " at " : "",
                  clock, output && *output ? "; " : "",
                  output ? output : "") < 0)
        return output;
    free (output);
    return text;
}

#define S_NOT_RUN_SHOWN 10

//  "2 nodes not run: web-07 offline since 12:01:07, web-09 drained": the
//  members of a group, label or all that the job did not run on.
static void
s_print_not_run (const pv_t *not_run, FILE *out)
{
    size_t count = pv_type (not_run) == PV_ARRAY ? pv_size (not_run) : 0;
    if (count == 0)
        return;
    size_t size = 0;
    char *line = NULL;
    FILE *text = open_memstream (&line, &size);
    if (!text)
        return;
    fprintf (text, "%zu node%s not run: ", count, count == 1 ? "" : "s");
    //  A fleet-wide job may leave thousands out: name the first ones
    size_t shown = count > S_NOT_RUN_SHOWN ? S_NOT_RUN_SHOWN : count;
    for (size_t index = 0; index < shown; index++) {
        const pv_t *entry = pv_array_at (not_run, index);
        char node [128], reason [256];
        cli_field (entry, "node", node, sizeof node);
        cli_field (entry, "reason", reason, sizeof reason);
        fprintf (text, "%s%s %s", index ? ", " : "", node, reason);
    }
    if (shown < count)
        fprintf (text, " and %zu more (--output json lists them)",
                 count - shown);
    fclose (text);
    char *printable = cli_printable (line, size, SIZE_MAX, false);
    fprintf (out, "\n%s\n", printable);
    free (printable);
    free (line);
}

//  One line per stream that the table shows only the start of: "(… 2.3
//  MiB more: gridcli job output ID --node N)", or that is binary:
//  "(binary output, 64 B: gridcli job output ID --node N)", "(… 2.3 MiB
//  more: gridcli job output ID --node N; binary output)".
static void
s_more_output_notes (const pv_t *record, const s_grid_t *grid, FILE *out)
{
    char job [64];
    cli_field (record, "id", job, sizeof job);
    for (size_t node = 0; node < grid->node_count; node++)
        for (int64_t step = 0; step < grid->step_count; step++) {
            const pv_t *cell = s_grid_cell (grid, step, grid->nodes [node]);
            for (int stream = 0; cell && stream < 2; stream++) {
                int64_t size = cli_field_int (cell, stream ? "error_size"
                                                           : "output_size", 0);
                int64_t shown = (int64_t) pv_size (
                    pv_map_get (cell, stream ? "error" : "output"));
                bool binary = false;
                pv_get_bool (pv_map_get (cell, stream ? "error_binary"
                                                      : "output_binary"),
                             &binary);
                if (size <= shown && !binary)
                    continue;
                char more [32], step_text [32] = "";
                if (grid->step_count > 1)
                    snprintf (step_text, sizeof step_text, " --step %" PRId64,
                              step);
                if (binary && size > shown)
                    fprintf (out, "(\u2026 %s more: gridcli job output %s "
                             "--node %s%s%s; binary %s)\n",
                             cli_human_bytes (size - shown, more,
                                              sizeof more),
                             job, grid->nodes [node], step_text,
                             stream ? " --stderr" : "",
                             stream ? "error" : "output");
                else
                if (binary)
                    fprintf (out, "(binary %s, %s: gridcli job output %s "
                             "--node %s%s%s)\n",
                             stream ? "error" : "output",
                             cli_human_bytes (size, more, sizeof more), job,
                             grid->nodes [node], step_text,
                             stream ? " --stderr" : "");
                else
                    fprintf (out, "(\u2026 %s more: gridcli job output %s "
                             "--node %s%s%s)\n",
                             cli_human_bytes (size - shown, more,
                                              sizeof more), job,
                             grid->nodes [node], step_text,
                             stream ? " --stderr" : "");
            }
        }
}

//  The spec of a job record (its target and tasks, plus the batch
//  fields), through the same decoder the broker used; NULL when the record
//  does not hold a valid one.
static job_spec_t *
s_record_spec (const pv_t *record)
{
    static const char *fields [] = {"target", "tasks", "batch",
                                    "max_failures", "canary"};
    size_t count = 0;
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++)
        if (pv_map_get (record, fields [index]))
            count++;
    pw_t *writer = pw_new ();
    pw_map (writer, count);
    for (size_t index = 0; index < sizeof fields / sizeof fields [0]; index++) {
        const pv_t *value = pv_map_get (record, fields [index]);
        if (value) {
            pw_str (writer, fields [index]);
            pw_pv (writer, value);
        }
    }
    pv_doc_t *doc = NULL;
    job_spec_t *spec = NULL;
    char why [256];
    if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, why,
                       sizeof why) == 0)
        job_spec_decode (pv_doc_root (doc), &spec, NULL);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    return spec;
}

//  "fetch" for a named task, else "step 3".
static const char *
s_task_label (const job_spec_t *spec, size_t step, char *buf, size_t buf_len)
{
    const char *name = job_spec_step_name (spec, step);
    if (name)
        return name;
    snprintf (buf, buf_len, "step %zu", step);
    return buf;
}

//  Is the cell of a node final (not pending or under way)?
static bool
s_cell_final (const pv_t *cell)
{
    return cell && cli_str_in (pv_map_get (cell, "status"), s_final_cell);
}

//  The order of a DAG job: one row per step in the order they may start,
//  what each needs, and, while it runs, which needs its waiting nodes
//  still wait for.
static void
s_render_dag (const job_spec_t *spec, const s_grid_t *grid, FILE *out,
              bool color)
{
    job_graph_t *graph = job_graph_new (spec);
    if (!graph)
        return;
    const char *headers [] = {"STEP", "NAME", "TASK", "NEEDS", "WAITING"};
    cli_table_t *table = cli_table_new (5, false, headers);
    for (size_t at = 0; at < graph->step_count; at++) {
        size_t step = graph->order [at];
        const job_step_needs_t *needs = &graph->steps [step];
        const job_phase_t *leaf = job_spec_step (spec, step, NULL, NULL);
        char step_text [32], task [160], label [32], *list = NULL;
        size_t list_len = 0;
        FILE *stream = open_memstream (&list, &list_len);
        for (size_t k = 0; k < needs->need_count && stream; k++)
            fprintf (stream, "%s%s", k ? ", " : "",
                     s_task_label (spec, needs->needs [k], label,
                                   sizeof label));
        if (stream && needs->need_count == 0)
            fprintf (stream, "-");
        if (stream && needs->barrier)
            fprintf (stream, " (barrier)");
        if (stream)
            fclose (stream);
        //  Waiting: nodes whose cell is pending, and the needs not yet
        //  final there (the first such need names the row)
        size_t waiting = 0;
        size_t first_need = SIZE_MAX;
        for (size_t node = 0; node < grid->node_count; node++) {
            const pv_t *cell = s_grid_cell (grid, (int64_t) step,
                                            grid->nodes [node]);
            if (!cell || !pv_str_eq (pv_map_get (cell, "status"), "pending"))
                continue;
            for (size_t k = 0; k < needs->need_count; k++)
                if (!s_cell_final (s_grid_cell (grid,
                                                (int64_t) needs->needs [k],
                                                grid->nodes [node]))) {
                    if (first_need == SIZE_MAX)
                        first_need = needs->needs [k];
                    waiting++;
                    break;
                }
        }
        char wait_text [160] = "-";
        if (waiting)
            snprintf (wait_text, sizeof wait_text, "%zu node%s, for %s%s",
                      waiting, waiting == 1 ? "" : "s",
                      s_task_label (spec, first_need, label, sizeof label),
                      needs->need_count > 1 ? " and others" : "");
        snprintf (step_text, sizeof step_text, "%zu", step);
        snprintf (task, sizeof task, "%s %s", leaf->backend, leaf->action);
        const char *row [] = {
            step_text, leaf->name ? leaf->name : "-", task,
            list ? list : "-", wait_text
        };
        cli_table_add (table, false, row);
        free (list);
    }
    fprintf (out, "\norder (each task starts on a node once what it needs "
                  "is done there):\n");
    cli_table_print (table, out, color);
    cli_table_destroy (&table);
    job_graph_destroy (&graph);
}

int
cli_render_job (const pv_t *record, FILE *out, bool color)
{
    if (!cli_is_job_record (record))
        return -2;
    char buf [1024];
    cli_field (record, "id", buf, sizeof buf);
    cli_header_line (out, "job", buf);
    cli_header_line (out, "target", cli_target_text (pv_map_get (record,
                       "target"), buf, sizeof buf));
    cli_field (record, "status", buf, sizeof buf);
    cli_header_line (out, "status", buf);
    cli_header_line (out, "step", cli_step_text (record, buf, sizeof buf));
    bool dry_run = false;
    if (pv_get_bool (pv_map_get (record, "check"), &dry_run) == 0 && dry_run)
        cli_header_line (out, "dry run", "each node ran its actions' checks; "
                         "nothing changed (data: would_change)");
    cli_field (record, "strategy", buf, sizeof buf);
    cli_header_line (out, "strategy", buf);
    const pv_t *idempotency_key = pv_map_get (record, "idempotency_key");
    if (pv_size (idempotency_key))
        cli_header_line (out, "key", cli_scalar (idempotency_key, buf,
                                                 sizeof buf));
    if (pv_size (pv_map_get (record, "submitted_by")))
        cli_header_line (out, "submitted by",
                         cli_field (record, "submitted_by", buf, sizeof buf));
    const pv_t *trace = pv_map_get (record, "trace");
    if (pv_type (trace) == PV_MAP) {
        bool generated = false;
        pv_get_bool (pv_map_get (trace, "generated"), &generated);
        char line [200];
        snprintf (line, sizeof line, "%s%s",
                  cli_field (trace, "trace_id", buf, sizeof buf),
                  generated ? " (generated)" : "");
        cli_header_line (out, "trace", line);
        cli_header_line (out, "traceparent",
                         cli_field (trace, "traceparent", buf, sizeof buf));
    }
    cli_header_line (out, "created",
                     cli_time (pv_map_get (record, "created_at"), false, buf,
                               sizeof buf));
    cli_header_line (out, "updated",
                     cli_time (pv_map_get (record, "updated_at"), false, buf,
                               sizeof buf));
    const pv_t *reason = pv_map_get (record, "reason");
    if (pv_size (reason))
        cli_header_line (out, "reason", cli_scalar (reason, buf, sizeof buf));
    if (pv_type (pv_map_get (record, "retry_of")) == PV_STR)
        cli_header_line (out, "retry of", cli_field (record, "retry_of", buf,
                                                     sizeof buf));
    if (pv_size (pv_map_get (record, "retried_by"))) {
        char *joined = cli_join (pv_map_get (record, "retried_by"));
        cli_header_line (out, "retried by", joined);
        free (joined);
    }
    job_spec_t *spec = s_record_spec (record);
    if (spec && (spec->batch.set || spec->canary || spec->max_failures.set)) {
        char batch [32] = "all", budget [32] = "none";
        if (spec->batch.set)
            job_amount_format (&spec->batch, batch, sizeof batch);
        if (spec->max_failures.set)
            job_amount_format (&spec->max_failures, budget, sizeof budget);
        if (spec->canary)
            snprintf (buf, sizeof buf, "%s of the nodes at a time, canary "
                      "%u first; max_failures %s", batch, spec->canary,
                      budget);
        else
            snprintf (buf, sizeof buf, "%s of the nodes at a time; "
                      "max_failures %s", batch, budget);
        cli_header_line (out, "batches", buf);
    }
    //  The batch now running, from the progress a live job's record holds
    const pv_t *progress = pv_map_get (record, "progress");
    if (cli_field_int (progress, "batches", 0) > 1) {
        snprintf (buf, sizeof buf, "%" PRId64 "/%" PRId64,
                  cli_field_int (progress, "batch", 1),
                  cli_field_int (progress, "batches", 0));
        cli_header_line (out, "batch", buf);
    }

    s_grid_t *grid = s_grid_new (record);
    if (spec && job_spec_is_dag (spec))
        s_render_dag (spec, grid, out, color);
    job_spec_destroy (&spec);
    const char *headers [] = {
        "NODE", "STEP", "TASK", "STATUS", "EXIT", "DURATION", "OUTPUT"
    };
    cli_table_t *table = cli_table_new (7, true, headers);
    size_t failed_rows = 0;
    for (size_t node = 0; node < grid->node_count; node++) {
        for (int64_t step = 0; step < grid->step_count; step++) {
            const pv_t *cell = s_grid_cell (grid, step, grid->nodes [node]);
            if (!cell)
                continue;
            const pv_t *status = pv_map_get (cell, "status");
            bool bad = cli_str_in (status, s_bad_cell);
            bool ran = cli_str_in (status, s_final_cell)
                    && !pv_str_eq (status, "skipped")
                    && cli_field_int (cell, "attempts", 1) > 0;
            char step_text [32], task [160], backend [64], action [64];
            char status_text [128], exit_text [32], duration [32];
            snprintf (step_text, sizeof step_text, "%" PRId64, step);
            const pv_t *leaf = grid->leaves [step];
            if (leaf)
                snprintf (task, sizeof task, "%s %s",
                          cli_field (leaf, "backend", backend, sizeof backend),
                          cli_field (leaf, "action", action, sizeof action));
            else
                snprintf (task, sizeof task, "-");
            int64_t attempts = cli_field_int (cell, "attempts", 1);
            char status_name [64];
            cli_scalar (status, status_name, sizeof status_name);
            if (attempts > 1)
                snprintf (status_text, sizeof status_text,
                          "%s (%" PRId64 " attempts)", status_name, attempts);
            else
                snprintf (status_text, sizeof status_text, "%s", status_name);
            int64_t exit_code = cli_field_int (cell, "exit_code", -1);
            if (ran && exit_code >= 0)
                snprintf (exit_text, sizeof exit_text, "%" PRId64, exit_code);
            else
                snprintf (exit_text, sizeof exit_text, "-");
            int64_t duration_ms = cli_field_int (cell, "duration_ms", 0);
            if (ran || duration_ms > 0)
                cli_human_ms (duration_ms, duration, sizeof duration);
            else
                snprintf (duration, sizeof duration, "-");
            //  A step that waits for a slot says why instead
            const pv_t *waiting = pv_map_get (cell, "waiting");
            char *output = pv_type (waiting) == PV_STR
                               ? pv_strdup (waiting)
                               : s_with_late (cell, s_cell_output (cell, bad));
            const char *row [] = {
                grid->nodes [node], step_text, task, status_text, exit_text,
                duration, output
            };
            cli_table_add (table, bad, row);
            free (output);
            if (bad)
                failed_rows++;
        }
    }
    fputc ('\n', out);
    if (table->rows > 1)
        cli_table_print (table, out, color);
    else
    if (cli_job_finished (record))
        fprintf (out, "no node ran\n");
    else
        fprintf (out, "no results yet\n");
    s_more_output_notes (record, grid, out);
    if (failed_rows)
        fprintf (out, "\n%zu step%s failed (marked !)\n", failed_rows,
                 failed_rows == 1 ? "" : "s");
    s_print_not_run (pv_map_get (record, "not_run"), out);
    cli_table_destroy (&table);
    s_grid_destroy (&grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  Dry runs: the verdicts of a finished check job

typedef struct {
    char node [128];
    int64_t step;                 //  -1: the node did not take part
    char task [160];
    int would_change;             //  1, 0, -1 (cannot tell)
    char *current, *desired, *diff, *reason;   //  Raw (owned), or NULL
} s_verdict_t;

static const char *
s_verdict_name (int would_change)
{
    return would_change > 0 ? "would change"
         : would_change == 0 ? "no change" : "cannot tell";
}

//  A string field of MAP, fresh, or NULL when absent or empty
static char *
s_text_field (const pv_t *map, const char *key)
{
    const pv_t *value = pv_map_get (map, key);
    return pv_type (value) == PV_STR && pv_size (value)
               ? pv_strdup (value) : NULL;
}

//  The first line of a cell's error or output, fresh, or NULL
static char *
s_first_text (const pv_t *cell)
{
    char *text = s_text_field (cell, "reason");
    if (!text)
        text = s_text_field (cell, "error");
    if (!text)
        text = s_text_field (cell, "output");
    if (text)
        text [strcspn (text, "\n")] = 0;
    return text;
}

//  The verdict of CELL into VERDICT
static void
s_cell_verdict (const pv_t *cell, s_verdict_t *verdict)
{
    char status [64], would [32];
    cli_field (cell, "status", status, sizeof status);
    const pv_t *data = pv_map_get (cell, "data");
    cli_field (data, "would_change", would, sizeof would);
    verdict->would_change = -1;
    if (streq (status, "success") && streq (would, "true"))
        verdict->would_change = 1;
    else
    if (streq (status, "success") && streq (would, "false"))
        verdict->would_change = 0;
    verdict->current = s_text_field (data, "current");
    verdict->desired = s_text_field (data, "desired");
    verdict->diff = s_text_field (data, "diff");
    if (verdict->would_change >= 0)
        return;
    verdict->reason = s_text_field (data, "reason");
    if (!verdict->reason && streq (status, "success")
        && !pv_map_get (data, "would_change")) {
        //  An answer without a verdict: not a check's
        verdict->reason = cli_strdup ("the node gave no verdict");
        return;
    }
    if (!verdict->reason) {
        char *why = s_first_text (cell);
        if (streq (status, "success"))
            verdict->reason = why ? why : cli_strdup ("no check");
        else {
            size_t size = strlen (status) + (why ? strlen (why) : 0) + 8;
            verdict->reason = cli_realloc (NULL, size);
            snprintf (verdict->reason, size, "%s%s%s", status,
                      why ? ": " : "", why ? why : "");
            free (why);
        }
    }
}

static void
s_verdicts_free (s_verdict_t *verdicts, size_t count)
{
    for (size_t index = 0; index < count; index++) {
        free (verdicts [index].current);
        free (verdicts [index].desired);
        free (verdicts [index].diff);
        free (verdicts [index].reason);
    }
    free (verdicts);
}

static void
s_pw_text_or_nil (pw_t *writer, const char *text)
{
    if (text)
        pw_str (writer, text);
    else
        pw_nil (writer);
}

static int
s_check_run_json (const pv_t *record, const s_verdict_t *verdicts,
                  size_t count, const size_t *counts, FILE *out)
{
    pw_t *writer = pw_new ();
    char id [128], status [64];
    pw_map (writer, 5);
    pw_str (writer, "job");
    pw_str (writer, cli_field (record, "id", id, sizeof id));
    pw_str (writer, "status");
    pw_str (writer, cli_field (record, "status", status, sizeof status));
    pw_str (writer, "check");
    pw_bool (writer, true);
    pw_str (writer, "summary");
    pw_map (writer, 3);
    pw_str (writer, "would_change");
    pw_int (writer, (int64_t) counts [0]);
    pw_str (writer, "no_change");
    pw_int (writer, (int64_t) counts [1]);
    pw_str (writer, "cannot_tell");
    pw_int (writer, (int64_t) counts [2]);
    pw_str (writer, "nodes");
    pw_array (writer, count);
    for (size_t index = 0; index < count; index++) {
        const s_verdict_t *verdict = &verdicts [index];
        pw_map (writer, 9);
        pw_str (writer, "node");
        pw_str (writer, verdict->node);
        pw_str (writer, "step");
        if (verdict->step >= 0)
            pw_int (writer, verdict->step);
        else
            pw_nil (writer);
        pw_str (writer, "task");
        s_pw_text_or_nil (writer, *verdict->task ? verdict->task : NULL);
        pw_str (writer, "verdict");
        pw_str (writer, verdict->would_change > 0 ? "would_change"
                        : verdict->would_change == 0 ? "no_change"
                                                     : "cannot_tell");
        pw_str (writer, "would_change");
        if (verdict->would_change >= 0)
            pw_bool (writer, verdict->would_change > 0);
        else
            pw_nil (writer);
        pw_str (writer, "current");
        s_pw_text_or_nil (writer, verdict->current);
        pw_str (writer, "desired");
        s_pw_text_or_nil (writer, verdict->desired);
        pw_str (writer, "diff");
        s_pw_text_or_nil (writer, verdict->diff);
        pw_str (writer, "reason");
        s_pw_text_or_nil (writer, verdict->reason);
    }
    pv_doc_t *doc = NULL;
    int rc = pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0)
             == 0 ? pv_write_json (pv_doc_root (doc), out, 2) : -1;
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    return rc == 0 ? 0 : -1;
}

//  One diff, line by line, made printable; '-' lines red and '+' lines
//  green on a terminal
static void
s_print_diff (const char *diff, bool color, FILE *out)
{
    const char *line = diff;
    while (*line) {
        size_t len = strcspn (line, "\n");
        char *text = cli_printable (line, len, SIZE_MAX, true);
        const char *paint = !color ? NULL
                          : *line == '-' && strncmp (line, "---", 3)
                                ? "\033[31m"
                          : *line == '+' && strncmp (line, "+++", 3)
                                ? "\033[32m" : NULL;
        fprintf (out, "%s%s%s\n", paint ? paint : "", text,
                 paint ? "\033[0m" : "");
        free (text);
        line += len + (line [len] == '\n');
    }
}

int
cli_render_check_run (const pv_t *record, bool diff, bool json, bool color,
                      FILE *out)
{
    if (!cli_is_job_record (record))
        return -2;
    s_grid_t *grid = s_grid_new (record);
    const pv_t *not_run = pv_map_get (record, "not_run");
    size_t room = grid->node_count * (size_t) grid->step_count
                + pv_size (not_run) + 1;
    s_verdict_t *verdicts = cli_realloc (NULL, room * sizeof (s_verdict_t));
    memset (verdicts, 0, room * sizeof (s_verdict_t));
    size_t count = 0, counts [3] = { 0, 0, 0 };
    for (size_t node = 0; node < grid->node_count; node++)
        for (int64_t step = 0; step < grid->step_count; step++) {
            const pv_t *cell = s_grid_cell (grid, step, grid->nodes [node]);
            if (!cell)
                continue;
            s_verdict_t *verdict = &verdicts [count++];
            snprintf (verdict->node, sizeof verdict->node, "%s",
                      grid->nodes [node]);
            verdict->step = step;
            const pv_t *leaf = grid->leaves [step];
            char backend [64], action [64];
            if (leaf)
                snprintf (verdict->task, sizeof verdict->task, "%s %s",
                          cli_field (leaf, "backend", backend, sizeof backend),
                          cli_field (leaf, "action", action, sizeof action));
            s_cell_verdict (cell, verdict);
        }
    for (size_t index = 0; index < pv_size (not_run); index++) {
        const pv_t *entry = pv_array_at (not_run, index);
        s_verdict_t *verdict = &verdicts [count++];
        cli_field (entry, "node", verdict->node, sizeof verdict->node);
        verdict->step = -1;
        verdict->would_change = -1;
        verdict->reason = s_text_field (entry, "reason");
    }
    for (size_t index = 0; index < count; index++)
        counts [verdicts [index].would_change > 0 ? 0
                : verdicts [index].would_change == 0 ? 1 : 2]++;
    int rc = 0;
    if (json)
        rc = s_check_run_json (record, verdicts, count, counts, out);
    else {
        char id [128];
        fprintf (out, "dry run %s: nothing was changed\n\n",
                 cli_field (record, "id", id, sizeof id));
        const char *headers [] = {
            "NODE", "STEP", "TASK", "VERDICT", "DETAIL"
        };
        cli_table_t *table = cli_table_new (5, true, headers);
        for (size_t index = 0; index < count; index++) {
            const s_verdict_t *verdict = &verdicts [index];
            char step [32], detail [1024];
            if (verdict->step >= 0)
                snprintf (step, sizeof step, "%" PRId64, verdict->step);
            else
                snprintf (step, sizeof step, "-");
            if (verdict->would_change > 0)
                snprintf (detail, sizeof detail, "%s -> %s",
                          verdict->current ? verdict->current : "?",
                          verdict->desired ? verdict->desired : "?");
            else
            if (verdict->would_change == 0)
                snprintf (detail, sizeof detail, "%s",
                          verdict->current ? verdict->current
                                           : "nothing to change");
            else
                snprintf (detail, sizeof detail, "%s",
                          verdict->reason ? verdict->reason : "");
            char *shown = cli_printable (detail, strlen (detail),
                                         CLI_OUTPUT_COLUMNS + 40, true);
            const char *row [] = {
                verdict->node, step, *verdict->task ? verdict->task : "-",
                s_verdict_name (verdict->would_change), shown
            };
            cli_table_add (table, verdict->would_change < 0, row);
            free (shown);
        }
        if (count)
            cli_table_print (table, out, color);
        else
            fprintf (out, "no node answered\n");
        cli_table_destroy (&table);
        for (size_t index = 0; diff && index < count; index++) {
            const s_verdict_t *verdict = &verdicts [index];
            if (!verdict->diff)
                continue;
            fprintf (out, "\n%s step %" PRId64 " (%s):\n", verdict->node,
                     verdict->step, verdict->task);
            s_print_diff (verdict->diff, color, out);
        }
        fprintf (out, "\n%zu would change, %zu no change, %zu cannot tell\n",
                 counts [0], counts [1], counts [2]);
        rc = ferror (out) ? -1 : 0;
    }
    s_verdicts_free (verdicts, count);
    s_grid_destroy (&grid);
    return rc < 0 ? rc : (int) counts [2];
}

int
cli_render_check (const pv_t *data, FILE *out)
{
    const pv_t *nodes = pv_map_get (data, "nodes");
    const pv_t *not_run = pv_map_get (data, "not_run");
    const pv_t *plan = pv_map_get (data, "plan");
    const pv_t *batches = pv_map_get (data, "batches");
    if (pv_type (nodes) != PV_ARRAY || pv_type (not_run) != PV_ARRAY
        || pv_type (plan) != PV_ARRAY || pv_type (batches) != PV_ARRAY)
        return -2;
    char buf [1024];
    cli_header_line (out, "target",
                     cli_field (data, "target", buf, sizeof buf));
    cli_header_line (out, "strategy",
                     cli_field (data, "strategy", buf, sizeof buf));
    char *list = cli_join (nodes);
    bool any = false;
    if (pv_get_bool (pv_map_get (data, "any"), &any) != 0)
        any = false;
    snprintf (buf, sizeof buf, "%zu node%s%s: %s", pv_size (nodes),
              pv_size (nodes) == 1 ? "" : "s",
              any && pv_size (nodes) ? " (any: one of them takes it)" : "",
              list);
    cli_header_line (out, "runs on", buf);
    free (list);
    if (pv_size (not_run)) {
        fprintf (out, "\nwould not run on %zu node%s:\n", pv_size (not_run),
                 pv_size (not_run) == 1 ? "" : "s");
        const char *headers [] = {"NODE", "WHY"};
        cli_table_t *table = cli_table_new (2, false, headers);
        for (size_t index = 0; index < pv_size (not_run); index++) {
            const pv_t *item = pv_array_at (not_run, index);
            char node [128], why [256];
            const char *row [] = {
                cli_field (item, "node", node, sizeof node),
                cli_field (item, "reason", why, sizeof why)
            };
            cli_table_add (table, false, row);
        }
        cli_table_print (table, out, false);
        cli_table_destroy (&table);
    }
    bool dag = pv_str_eq (pv_map_get (data, "order"), "dag");
    fprintf (out, "\nplan (%s):\n", dag ? "DAG order: each task starts on a "
                                          "node once what it needs is done "
                                          "there"
                                        : "phases in order");
    const char *headers [] = {"STEP", "PHASE", "NAME", "TASK", "CONDITION",
                              "NEEDS"};
    cli_table_t *table = cli_table_new (6, false, headers);
    for (size_t index = 0; index < pv_size (plan); index++) {
        const pv_t *item = pv_array_at (plan, index);
        char step [32], phase [48], name [80], task [160], condition [32];
        char needs [512] = "-";
        snprintf (step, sizeof step, "%" PRId64,
                  cli_field_int (item, "step", 0));
        int64_t sub = cli_field_int (item, "sub", -1);
        if (sub >= 0)
            snprintf (phase, sizeof phase, "%" PRId64 ".%" PRId64,
                      cli_field_int (item, "phase", 0), sub);
        else
            snprintf (phase, sizeof phase, "%" PRId64,
                      cli_field_int (item, "phase", 0));
        if (!pv_map_get (item, "name"))
            snprintf (name, sizeof name, "-");
        else
            cli_field (item, "name", name, sizeof name);
        cli_field (item, "task", task, sizeof task);
        cli_field (item, "condition", condition, sizeof condition);
        const pv_t *list_value = pv_map_get (item, "needs");
        if (pv_size (list_value)) {
            char *joined = cli_join (list_value);
            snprintf (needs, sizeof needs, "steps %s%s", joined,
                      pv_map_get (item, "barrier") ? " (barrier)" : "");
            free (joined);
        }
        const char *row [] = {step, phase, name, task, condition, needs};
        cli_table_add (table, false, row);
    }
    cli_table_print (table, out, false);
    cli_table_destroy (&table);
    size_t count = pv_size (batches);
    if (count > 1) {
        fprintf (out, "\n%zu batches, each runs the whole job before the "
                      "next:\n", count);
        for (size_t index = 0; index < count; index++) {
            char *joined = cli_join (pv_array_at (batches, index));
            fprintf (out, "  batch %zu: %s\n", index + 1, joined);
            free (joined);
        }
    }
    if (pv_map_get (data, "max_failures"))
        fprintf (out, "failure budget: %" PRId64 " failed node%s allowed\n",
                 cli_field_int (data, "max_failures", 0),
                 cli_field_int (data, "max_failures", 0) == 1 ? "" : "s");
    fprintf (out, "\nnothing was run (a dry run)\n");
    return 0;
}

void
cli_task_progress_format (const pv_t *task, char *buf, size_t buf_len)
{
    char node [80], kind [64], message [PROTO_MAX_PROGRESS + 1];
    cli_field (task, "node", node, sizeof node);
    int64_t percent = cli_field_int (task, "percent", -1);
    const char *text = pv_map_get (task, "message")
                           ? cli_field (task, "message", message,
                                        sizeof message)
                           : cli_field (task, "kind", kind, sizeof kind);
    if (percent >= 0)
        snprintf (buf, buf_len, "%s %" PRId64 "%%%s%s", node, percent,
                  *text ? " " : "", text);
    else
        snprintf (buf, buf_len, "%s%s%s", node, *text ? " " : "", text);
    for (char *cursor = buf; *cursor; cursor++)
        if ((unsigned char) *cursor < 0x20 || *cursor == 0x7F)
            *cursor = '?';
}

void
cli_progress_format (const pv_t *progress, char *buf, size_t buf_len)
{
    char id [64], status [64], step_text [32];
    cli_field (progress, "id", id, sizeof id);
    cli_field (progress, "status", status, sizeof status);
    cli_step_text (progress, step_text, sizeof step_text);
    int64_t nodes = cli_field_int (progress, "nodes", 0);
    int64_t done = cli_field_int (progress, "done", 0);
    int64_t failed = cli_field_int (progress, "failed", 0);
    int used = snprintf (buf, buf_len, "%s %s  step %s", id, status,
                         step_text);
    int64_t batches = cli_field_int (progress, "batches", 0);
    if (batches > 1 && used > 0 && (size_t) used < buf_len)
        used += snprintf (buf + used, buf_len - (size_t) used,
                          "  batch %" PRId64 "/%" PRId64,
                          cli_field_int (progress, "batch", 1), batches);
    //  A whole job record (from a broker without job.progress) has no counts
    if (pv_map_get (progress, "nodes") && used > 0 && (size_t) used < buf_len)
        used += snprintf (buf + used, buf_len - (size_t) used, "  nodes %"
                          PRId64 "/%" PRId64 " done", done, nodes);
    if (failed > 0 && used > 0 && (size_t) used < buf_len)
        used += snprintf (buf + used, buf_len - (size_t) used,
                          "  %" PRId64 " failed", failed);
    //  The first running task that reports progress: "web-01 42% ..."
    const pv_t *tasks = pv_map_get (progress, "tasks");
    if (pv_size (tasks) > 0 && used > 0 && (size_t) used < buf_len) {
        char task [256];
        cli_task_progress_format (pv_array_at (tasks, 0), task, sizeof task);
        snprintf (buf + used, buf_len - (size_t) used, "  %s", task);
    }
    //  Node data is printed on the operator's terminal
    for (char *cursor = buf; *cursor; cursor++)
        if ((unsigned char) *cursor < 0x20 || *cursor == 0x7F)
            *cursor = '?';
}

int
cli_render_submitted (const pv_t *data, FILE *out)
{
    char job [128], status [64];
    if (pv_type (pv_map_get (data, "job")) != PV_STR)
        return -2;
    cli_field (data, "job", job, sizeof job);
    cli_field (data, "status", status, sizeof status);
    char *job_text = cli_printable (job, strlen (job), SIZE_MAX, false);
    char *status_text = cli_printable (status, strlen (status), SIZE_MAX,
                                       false);
    bool existing = false;
    pv_get_bool (pv_map_get (data, "existing"), &existing);
    if (existing) {
        char key [300];
        cli_field (data, "idempotency_key", key, sizeof key);
        char *key_text = cli_printable (key, strlen (key), SIZE_MAX, false);
        fprintf (out, "job %s already submitted with key %s (%s)\n",
                 job_text, key_text, status_text);
        free (key_text);
    }
    else
        fprintf (out, "job %s submitted (%s)\n", job_text, status_text);
    fprintf (out, "follow it with: gridcli job status %s\n", job_text);
    free (job_text);
    free (status_text);
    return 0;
}

int
cli_render_retry (const pv_t *data, FILE *out)
{
    char retry_of [128];
    if (cli_render_submitted (data, out) != 0)
        return -2;
    fprintf (out, "it retries job %s\n",
             cli_field (data, "retry_of", retry_of, sizeof retry_of));
    return 0;
}
