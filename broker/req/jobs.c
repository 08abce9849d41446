/*  =========================================================================
    jobs - the job.* requests (see req.h and proto/PROTOCOL.md)
    =========================================================================
*/
#include "../../backends/backend.h"
#include "../blobs.h"
#include "../dlq.h"
#include "../jobrec.h"
#include "../jobtrace.h"
#include "req.h"

#define LIST_MAX 10000
#define EVENTS_MAX 100000

static int
s_job_id_field (req_call_t *call, char **job_id_p)
{
    *job_id_p = req_field (call, "job");
    if (!*job_id_p || !job_id_valid (*job_id_p)) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "job: '%s' is not a job id (like j-0193a1b2c3d4-0001)",
                   *job_id_p ? *job_id_p : "");
        free (*job_id_p);
        *job_id_p = NULL;
        return -1;
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  job.submit

//  Checks every leaf against what the registered nodes offer. Adds
//  "path: reason" sentences to DETAILS.
//  A file.put of a blob: the blob must be stored whole, of its size
//  (then it counts as used, for the retention).
static void
s_check_blob (ctx_t *ctx, const job_phase_t *leaf, const char *path,
              zlistx_t *details)
{
    const char *sha256 = NULL, *size = NULL;
    for (size_t k = 0; k < leaf->param_count; k++) {
        if (strcmp (leaf->params [k].name, "sha256") == 0)
            sha256 = leaf->params [k].value;
        if (strcmp (leaf->params [k].name, "size") == 0)
            size = leaf->params [k].value;
    }
    store_txn_t *txn = sha256 ? ctx_txn (ctx) : NULL;
    if (!txn || strcmp (leaf->backend, "file") != 0)
        return;
    blobs_info_t info;
    if (blobs_stat (txn, sha256, &info) || info.received != info.size)
        zlistx_add_end (details, zsys_sprintf (
            "%s: blob %s is not stored in the broker (gridcli file upload "
            "PATH stores it)", path, sha256));
    else
    if (!size || strtoull (size, NULL, 10) != info.size)
        zlistx_add_end (details, zsys_sprintf (
            "%s: blob %s is %llu bytes, not %s", path, sha256,
            (unsigned long long) info.size, size ? size : "(no size)"));
    else
        blobs_touch (txn, sha256, ctx_wall_ms (ctx));
}

static void
s_check_leaf (ctx_t *ctx, const job_phase_t *leaf, const char *path,
              zlistx_t *details)
{
    s_check_blob (ctx, leaf, path, details);
    //  An action that only offline nodes offer is still a valid job: the
    //  target check that follows says whether any node can run it now.
    const proto_action_spec_t *spec
        = registry_find_action (ctx->registry, leaf->backend, leaf->action,
                                true);
    if (!spec) {
        zlistx_add_end (details,
                        zsys_sprintf ("%s: no registered node offers %s %s",
                                      path, leaf->backend, leaf->action));
        return;
    }
    //  One "path.params.NAME: reason" per problem, so that an operator
    //  fixes them all in one go
    size_t problems = zlistx_size (details);
    char why [512];
    for (size_t index = 0; index < leaf->param_count; index++) {
        const char *name = leaf->params [index].name;
        const char *value = leaf->params [index].value;
        const proto_param_spec_t *param = NULL;
        for (size_t known = 0; known < spec->param_count && !param; known++)
            if (streq (spec->params [known].name, name))
                param = &spec->params [known];
        if (!param) {
            zlistx_add_end (details,
                            zsys_sprintf ("%s.params.%s: unknown param of "
                                          "%s %s", path, name, leaf->backend,
                                          leaf->action));
            continue;
        }
        if (backend_value_check (param, value, strlen (value), why,
                                 sizeof why) == 0)
            continue;
        //  The path names the param already
        char prefix [96];
        snprintf (prefix, sizeof prefix, "param '%s': ", name);
        const char *reason = strncmp (why, prefix, strlen (prefix)) == 0
                           ? why + strlen (prefix) : why;
        zlistx_add_end (details, zsys_sprintf ("%s.params.%s: %s", path, name,
                                               reason));
    }
    for (size_t known = 0; known < spec->param_count; known++) {
        const proto_param_spec_t *param = &spec->params [known];
        bool given = false;
        for (size_t index = 0; index < leaf->param_count && !given; index++)
            given = streq (leaf->params [index].name, param->name);
        if (param->required && !given)
            zlistx_add_end (details, zsys_sprintf ("%s.params.%s: required",
                                                   path, param->name));
    }
    if (zlistx_size (details) > problems)
        return;
    //  Whatever rule the per-param checks above do not cover
    proto_kv_t params [JOB_MAX_PARAMS];
    for (size_t index = 0; index < leaf->param_count; index++) {
        params [index].key = leaf->params [index].name;
        params [index].value = leaf->params [index].value;
    }
    if (backend_params_check (spec, params, leaf->param_count, why,
                              sizeof why) != 0)
        zlistx_add_end (details, zsys_sprintf ("%s.params: %s", path, why));
}

void
req_check_actions (ctx_t *ctx, const job_spec_t *spec, zlistx_t *details)
{
    for (size_t p = 0; p < spec->phase_count; p++) {
        const job_phase_t *phase = &spec->phases [p];
        char path [64];
        if (phase->tasks) {
            for (size_t t = 0; t < phase->task_count; t++) {
                snprintf (path, sizeof path, "tasks[%zu].tasks[%zu]", p, t);
                s_check_leaf (ctx, &phase->tasks [t], path, details);
            }
        }
        else {
            snprintf (path, sizeof path, "tasks[%zu]", p);
            s_check_leaf (ctx, phase, path, details);
        }
    }
}

//  R18: a lease the holder's heartbeats cannot renew would expire while
//  the node works on, and bounce the step between nodes: a lease_ms below
//  twice the agents' heartbeat is refused, with the bound.
static void
s_check_lease (ctx_t *ctx, const job_spec_t *spec, zlistx_t *details)
{
    int64_t least_ms = 2 * ctx->config->heartbeat_ms;
    if (spec->lease_ms <= 0 || spec->lease_ms >= least_ms)
        return;
    char lease [32], least [32], beat [32];
    duration_format (spec->lease_ms, lease, sizeof lease);
    duration_format (least_ms, least, sizeof least);
    duration_format (ctx->config->heartbeat_ms, beat, sizeof beat);
    zlistx_add_end (details,
                    zsys_sprintf ("lease_ms: %s is shorter than the agents' "
                                  "heartbeats can renew (at least %s, twice "
                                  "the heartbeat of %s)", lease, least, beat));
}

static void
s_invalid_job (req_call_t *call, zlistx_t *details)
{
    size_t count = zlistx_size (details);
    char **items = (char **) calloc (count + 1, sizeof (char *));
    assert (items);
    size_t index = 0;
    for (char *item = (char *) zlistx_first (details); item;
         item = (char *) zlistx_next (details))
        items [index++] = item;
    pw_reset (call->reply);
    proto_reply_error (call->reply, call->request->id, PROTO_ERR_INVALID_JOB,
                       count == 1 ? "the job is not valid"
                                  : "the job is not valid (see details)",
                       items, count);
    free (items);
}

static int s_admit (req_call_t *call, job_spec_t **spec_p,
                    const char *retry_of, char *id);

//  True (and the error reply) when the broker admits no new jobs.
static bool
s_refused_in_maintenance (req_call_t *call)
{
    if (!call->ctx->state.maintenance)
        return false;
    req_error (call, PROTO_ERR_MAINTENANCE,
               "the broker is in maintenance: no new jobs are admitted "
               "until 'gridcli broker resume'");
    return true;
}

//  Replies invalid_job and returns -1 when decoding found problems
//  (DECODED false, ERRORS) or *SPEC_P asks for what the nodes do not offer
//  (then *SPEC_P is destroyed); else returns 0. Clears ERRORS.
static int
s_job_validate (req_call_t *call, bool decoded, job_spec_t **spec_p,
                job_errors_t *errors)
{
    ctx_t *ctx = call->ctx;
    zlistx_t *details = zlistx_new ();
    zlistx_set_destructor (details, (zlistx_destructor_fn *) zstr_free);
    if (!decoded) {
        for (size_t index = 0; index < errors->count; index++)
            zlistx_add_end (details, zsys_sprintf ("%s", errors->items [index]));
        if (errors->truncated)
            zlistx_add_end (details, strdup ("(more problems not shown)"));
    }
    else {
        req_check_actions (ctx, *spec_p, details);
        s_check_lease (ctx, *spec_p, details);
        char why [512];
        if (notify_spec_check (&ctx->config->notify, *spec_p, why,
                               sizeof why) != 0)
            zlistx_add_end (details, strdup (why));
    }
    job_errors_clear (errors);
    int rc = 0;
    if (zlistx_size (details)) {
        s_invalid_job (call, details);
        job_spec_destroy (spec_p);
        rc = -1;
    }
    zlistx_destroy (&details);
    return rc;
}

//  The request's job, decoded and checked against what the nodes offer.
//  Returns 0 and a new spec in *SPEC_P, or -1 after an invalid_job reply.
static int
s_job_decode (req_call_t *call, job_spec_t **spec_p)
{
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    *spec_p = NULL;
    bool decoded = job_spec_decode (pv_map_get (call->request->body, "job"),
                                    spec_p, &errors) == 0;
    return s_job_validate (call, decoded, spec_p, &errors);
}

static int s_stored_status (req_call_t *call, const char *job_id);

//  The job an earlier submit with SPEC's idempotency key made, if it is
//  still kept: replies with its id and status (or conflict, when SPEC is
//  not the spec it was made from) and returns 1; returns 0 when the key
//  made no job that is kept, so the submit goes on. DIGEST is SPEC's.
static int
s_idempotent_submit (req_call_t *call, const job_spec_t *spec,
                     const uint8_t *digest)
{
    ctx_t *ctx = call->ctx;
    store_txn_t *txn = ctx_txn (ctx);
    char job_id [JOB_ID_LEN + 1];
    uint8_t first [JOBREC_DIGEST_LEN];
    if (!txn
        || jobrec_idempotency_get (txn, spec->idempotency_key, job_id,
                                   first) != 0)
        return 0;
    const sched_job_t *live = sched_job (ctx->sched, job_id);
    int status = live ? (int) live->status : s_stored_status (call, job_id);
    if (status < 0)
        return 0;    //  Deleted or purged: the key is free again
    if (memcmp (first, digest, JOBREC_DIGEST_LEN) != 0) {
        req_error (call, PROTO_ERR_CONFLICT,
                   "idempotency key '%s' already made job %s from another "
                   "spec", spec->idempotency_key, job_id);
        return 1;
    }
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    //  existing: this submit made no job, the key's earlier one answers
    pw_map (call->reply, 4);
    pw_str (call->reply, "job");
    pw_str (call->reply, job_id);
    pw_str (call->reply, "status");
    pw_str (call->reply, sched_job_status_name ((sched_job_status_t) status));
    pw_str (call->reply, "existing");
    pw_bool (call->reply, true);
    pw_str (call->reply, "idempotency_key");
    pw_str (call->reply, spec->idempotency_key);
    return 1;
}

//  The ids TARGET names (a node list, or the node: terms of an
//  expression) that are not registered, each once, in the order written.
//  Returns a new list of lent ids (valid while TARGET is).
static zlistx_t *
s_unknown_nodes (ctx_t *ctx, const target_t *target)
{
    zlistx_t *unknown = zlistx_new ();
    assert (unknown);
    const char **ids = NULL;
    size_t named = target_named_nodes (target, &ids);
    zhashx_t *seen = named > 1 ? zhashx_new () : NULL;
    for (size_t index = 0; index < named; index++) {
        if (registry_lookup (ctx->registry, ids [index]))
            continue;
        if (seen && zhashx_insert (seen, ids [index], (void *) ids [index]))
            continue;       //  Named by an earlier term too
        zlistx_add_end (unknown, (void *) ids [index]);
    }
    zhashx_destroy (&seen);
    free (ids);
    return unknown;
}

//  Refuses a target naming an id that is not registered, in a node list
//  or a node: term of an expression (a typo must never run a partial
//  job, nor quietly run on the rest): unknown_node, one detail per id.
static int
s_check_known_nodes (req_call_t *call, const target_t *target)
{
    zlistx_t *ids = s_unknown_nodes (call->ctx, target);
    zlistx_t *unknown = zlistx_new ();
    zlistx_set_destructor (unknown, (zlistx_destructor_fn *) zstr_free);
    for (const char *id = (const char *) zlistx_first (ids); id;
         id = (const char *) zlistx_next (ids))
        zlistx_add_end (unknown, zsys_sprintf ("%s: not registered", id));
    zlistx_destroy (&ids);
    size_t count = zlistx_size (unknown);
    if (count > 0) {
        char **items = (char **) calloc (count, sizeof (char *));
        assert (items);
        size_t index = 0;
        for (char *item = (char *) zlistx_first (unknown); item;
             item = (char *) zlistx_next (unknown))
            items [index++] = item;
        char *first = zsys_sprintf ("%s", items [0]);
        first [strcspn (first, ":")] = 0;
        char message [256];
        if (count == 1)
            snprintf (message, sizeof message,
                      "unknown node %s: no such node is registered (see "
                      "'gridcli node list')", first);
        else
            snprintf (message, sizeof message,
                      "%zu unknown nodes, first %s: no such node is "
                      "registered (see details)", count, first);
        zstr_free (&first);
        pw_reset (call->reply);
        proto_reply_error (call->reply, call->request->id,
                           PROTO_ERR_UNKNOWN_NODE, message, items, count);
        free (items);
    }
    zlistx_destroy (&unknown);
    return count > 0 ? -1 : 0;
}

//  Refuses a job that no node of its target can run now (no_nodes),
//  naming each node the target names or covers and why it cannot.
static int
s_check_target (req_call_t *call, const job_spec_t *spec)
{
    ctx_t *ctx = call->ctx;
    if (s_check_known_nodes (call, &spec->target) != 0)
        return -1;
    size_t matched = registry_resolve (ctx->registry, &spec->target, NULL);
    sched_not_run_t *list = NULL;
    size_t listed = registry_unavailable (ctx->registry, spec,
                                          ctx_wall_ms (ctx), &list);
    //  What the scheduler will run: resolved (online, not drained), less
    //  the nodes among them that lack an action of the job (an offline
    //  node of an incompatible release reads unsupported too, but was
    //  never among them)
    size_t runnable = matched;
    for (size_t index = 0; index < listed; index++) {
        const registry_node_t *node
            = list [index].status == SCHED_CELL_UNSUPPORTED
                  ? registry_lookup (ctx->registry, list [index].node)
                  : NULL;
        if (node && node->online && runnable > 0)
            runnable--;
    }
    if (runnable > 0) {
        sched_not_run_free (list, listed);
        return 0;
    }
    char *text = target_format (&spec->target);
    if (listed == 0) {
        req_error (call, PROTO_ERR_NO_NODES,
                   "no online node matches %s (%zu registered, %zu online)",
                   text, registry_size (ctx->registry),
                   registry_online_count (ctx->registry));
        free (text);
        return -1;
    }
    //  "no node of node:db-01,db-02 can run it: db-01 offline since
    //  12:01:07, db-02 drained"; details: one "node: why" per node
    char **items = (char **) calloc (listed, sizeof (char *));
    assert (items);
    char message [1024];
    int used = snprintf (message, sizeof message, "no node of %s can run it: ",
                         text);
    for (size_t index = 0; index < listed; index++) {
        items [index] = zsys_sprintf ("%s: %s", list [index].node,
                                      list [index].reason);
        if (used > 0 && (size_t) used < sizeof message) {
            if (index == 3 && listed > 4)
                used += snprintf (message + used, sizeof message - (size_t) used,
                                  ", and %zu more (see details)",
                                  listed - index);
            else
            if (index < 3 || listed == 4)
                used += snprintf (message + used, sizeof message - (size_t) used,
                                  "%s%s %s", index ? ", " : "",
                                  list [index].node, list [index].reason);
        }
    }
    pw_reset (call->reply);
    proto_reply_error (call->reply, call->request->id, PROTO_ERR_NO_NODES,
                       message, items, listed);
    for (size_t index = 0; index < listed; index++)
        zstr_free (&items [index]);
    free (items);
    free (text);
    sched_not_run_free (list, listed);
    return -1;
}

void
req_job_submit (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    //  The allowlist and the viewer's query-only rule were checked before
    //  the reply cache (the request table's check for job.submit)
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    //  The same idempotency key answers with its job even in maintenance
    uint8_t digest [JOBREC_DIGEST_LEN];
    //  A traceparent that is not valid is refused whole: a job is never
    //  traced under a context its submitter did not mean
    char *traceparent = req_field (call, "traceparent");
    char why [160];
    trace_ctx_t given;
    if (traceparent && trace_parse (traceparent, &given, why, sizeof why) != 0) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "%s (\"%.64s\")", why,
                   traceparent);
        free (traceparent);
        return;
    }
    free (traceparent);
    bool decoded = job_spec_decode (pv_map_get (call->request->body, "job"),
                                    &spec, &errors) == 0;
    //  A dry run (the request's keys were checked: a bool when present)
    bool check = false;
    pv_get_bool (pv_map_get (call->request->body, "check"), &check);
    if (decoded)
        spec->check = check;
    if (decoded && spec->idempotency_key) {
        pw_t *form = pw_new ();
        job_spec_encode_digest (spec, form);
        //  A dry run and a run of one spec under one key conflict
        if (spec->check)
            pw_str (form, "check");
        jobrec_digest (pw_data (form), pw_size (form), digest);
        pw_destroy (&form);
        if (s_idempotent_submit (call, spec, digest)) {
            job_spec_destroy (&spec);
            return;
        }
    }
    if (s_refused_in_maintenance (call)) {
        job_spec_destroy (&spec);
        job_errors_clear (&errors);
        return;
    }
    if (s_job_validate (call, decoded, &spec, &errors) != 0)
        return;
    char id [JOB_ID_LEN + 1];
    char *key = spec->idempotency_key ? strdup (spec->idempotency_key) : NULL;
    if (s_admit (call, &spec, NULL, id) == 0 && key) {
        store_txn_t *txn = ctx_txn (ctx);
        int rc = txn ? jobrec_idempotency_put (txn, key, id, digest)
                     : STORE_EIO;
        //  A full or failing store fails the pass, logged once there
        if (rc != 0 && rc != STORE_EFULL && rc != STORE_EIO)
            zsys_error ("store: cannot save the idempotency key of %s: %s",
                        id, store_strerror (rc));
    }
    free (key);
}

//  Admits SPEC (taken: *spec_p is nulled) as a new job, a retry of
//  RETRY_OF when not NULL: its target must match an online node, the store
//  must have room, the queue must take it. Writes the reply (ok: {job,
//  status, ?retry_of}) and returns 0 with the new id in ID (JOB_ID_LEN + 1
//  bytes), or -1.

//  Keeps the trace context of JOB, about to be admitted.
static void
s_keep_trace (ctx_t *ctx, const sched_job_t *job)
{
    if (!*job->traceparent)
        return;
    const char *id = job->id;
    jobtrace_remember (id, job->traceparent);
    store_txn_t *txn = ctx_txn (ctx);
    int rc = txn ? jobtrace_put (txn, id, job->traceparent, job->trace_made)
                 : STORE_EIO;
    //  A full or failing store fails the pass, logged once there
    if (rc != 0 && rc != STORE_EFULL && rc != STORE_EIO)
        zsys_error ("store: cannot save the trace context of %s: %s", id,
                    store_strerror (rc));
}

static int
s_admit (req_call_t *call, job_spec_t **spec_p, const char *retry_of, char *id)
{
    ctx_t *ctx = call->ctx;
    job_spec_t *spec = *spec_p;
    *spec_p = NULL;
    if (s_refused_in_maintenance (call)) {
        job_spec_destroy (&spec);
        return -1;
    }
    if (s_check_target (call, spec) != 0) {
        job_spec_destroy (&spec);
        return -1;
    }
    size_t used = 0, map = 0;
    store_usage (ctx->store, &map, &used);
    size_t limit = ctx->config->max_map_bytes > map
                       ? ctx->config->max_map_bytes : map;
    if (limit && used > limit / 100 * 95) {
        req_error (call, PROTO_ERR_STORAGE_FULL,
                   "the store is full (%zu of %zu MiB used, store.max_size): "
                   "new jobs are refused until old ones are purged; reads "
                   "still work", used >> 20, limit >> 20);
        ctx->stats->storage.refused++;
        job_spec_destroy (&spec);
        return -1;
    }
    int64_t wall_ms = ctx_wall_ms (ctx);
    ctx_job_id (ctx, wall_ms, id);
    sched_job_t *job = sched_job_new (id, &spec);
    job->created_at_ms = wall_ms;
    job->updated_at_ms = wall_ms;
    job->retry_of = retry_of ? strdup (retry_of) : NULL;
    job->submitted_by = req_caller_text (call);
    //  The submitter's trace context (checked by job.submit), else a new
    //  one: every job is traced
    char *traceparent = req_field (call, "traceparent");
    if (traceparent && trace_valid (traceparent))
        snprintf (job->traceparent, sizeof job->traceparent, "%s",
                  traceparent);
    else
    if (jobtrace_make (job->traceparent) == 0)
        job->trace_made = true;
    free (traceparent);
    char reason [256];
    s_keep_trace (ctx, job);
    if (sched_submit (ctx->sched, &job, ctx_now_ms (ctx), reason,
                      sizeof reason) != 0) {
        req_error (call, PROTO_ERR_QUEUE_FULL, "%s", reason);
        store_txn_t *txn = ctx_txn (ctx);
        if (txn)
            jobtrace_delete (txn, id);
        sched_job_destroy (&job);
        return -1;
    }
    const sched_job_t *live = sched_job (ctx->sched, id);
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    pw_map (call->reply, retry_of ? 4 : 3);
    pw_str (call->reply, "job");
    pw_str (call->reply, id);
    pw_str (call->reply, "status");
    //  A job can finish inside its own submit (e.g. nothing to run).
    pw_str (call->reply, live ? sched_job_status_name (live->status)
                              : "running");
    pw_str (call->reply, "existing");
    pw_bool (call->reply, false);
    if (retry_of) {
        pw_str (call->reply, "retry_of");
        pw_str (call->reply, retry_of);
    }
    return 0;
}

//  ---------------------------------------------------------------------
//  job.check: the dry run. Everything job.submit checks, the nodes the
//  job would run on and those it would not (and why), the plan and the
//  batches. Nothing runs, nothing is written, no job id is taken.

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

static int
s_compare_not_run (const void *a, const void *b)
{
    return strcmp (((const sched_not_run_t *) a)->node,
                   ((const sched_not_run_t *) b)->node);
}

//  One step of the plan: {step, task, phase, ?sub, condition, ?name,
//  ?needs, ?barrier}.
static void
s_write_plan_step (pw_t *writer, const job_spec_t *spec,
                   const job_graph_t *graph, size_t step)
{
    size_t phase = 0;
    int sub = -1;
    const job_phase_t *leaf = job_spec_step (spec, step, &phase, &sub);
    const job_step_needs_t *needs = graph ? &graph->steps [step] : NULL;
    pw_map (writer, 4 + (sub >= 0 ? 1 : 0) + (leaf->name ? 1 : 0)
                        + (needs ? 1 : 0) + (needs && needs->barrier ? 1 : 0));
    pw_str (writer, "step");
    pw_int (writer, (int64_t) step);
    char task [2 * NAME_MAX_LEN + 2];
    snprintf (task, sizeof task, "%s %s", leaf->backend, leaf->action);
    pw_str (writer, "task");
    pw_str (writer, task);
    pw_str (writer, "phase");
    pw_int (writer, (int64_t) phase);
    if (sub >= 0) {
        pw_str (writer, "sub");
        pw_int (writer, sub);
    }
    pw_str (writer, "condition");
    pw_str (writer, job_condition_name (leaf->condition));
    if (leaf->name) {
        pw_str (writer, "name");
        pw_str (writer, leaf->name);
    }
    if (needs) {
        pw_str (writer, "needs");
        pw_array (writer, needs->need_count);
        for (size_t k = 0; k < needs->need_count; k++)
            pw_int (writer, (int64_t) needs->needs [k]);
        if (needs->barrier) {
            pw_str (writer, "barrier");
            pw_bool (writer, true);
        }
    }
}

//  Appends to *SKIP_P (COUNT entries) the ids an expression's node: terms
//  name that are not registered, as "not registered" (registry_unavailable
//  lists those of a node list already). Returns the new count.
static size_t
s_check_unknown (ctx_t *ctx, const target_t *target, sched_not_run_t **skip_p,
                 size_t count)
{
    if (target->scope != TARGET_EXPR)
        return count;
    zlistx_t *ids = s_unknown_nodes (ctx, target);
    size_t more = zlistx_size (ids);
    if (more > 0) {
        *skip_p = (sched_not_run_t *) realloc (
            *skip_p, (count + more) * sizeof (sched_not_run_t));
        assert (*skip_p);
    }
    for (const char *id = (const char *) zlistx_first (ids); id;
         id = (const char *) zlistx_next (ids)) {
        sched_not_run_t *entry = &(*skip_p) [count++];
        entry->node = strdup (id);
        entry->reason = strdup ("not registered");
        assert (entry->node && entry->reason);
        entry->status = SCHED_CELL_OFFLINE;
        entry->named = false;
    }
    zlistx_destroy (&ids);
    return count;
}

void
req_job_check (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    job_spec_t *spec = NULL;
    if (s_job_decode (call, &spec) != 0)
        return;
    const target_t *target = &spec->target;
    //  As the scheduler will start it (R2): the online, non-drained nodes
    //  of the target, less those lacking an action of the job
    char **ids = NULL;
    size_t matched = registry_resolve (ctx->registry, target, &ids);
    sched_not_run_t *skip = NULL;
    size_t skip_count = registry_unavailable (ctx->registry, spec,
                                              ctx_wall_ms (ctx), &skip);
    skip_count = s_check_unknown (ctx, target, &skip, skip_count);
    if (skip_count > 1)
        qsort (skip, skip_count, sizeof (sched_not_run_t), s_compare_not_run);
    char **run = (char **) calloc (matched + 1, sizeof (char *));
    assert (run);
    size_t run_count = 0;
    for (size_t index = 0; index < matched; index++) {
        bool lacking = false;
        for (size_t at = 0; at < skip_count && !lacking; at++)
            lacking = streq (skip [at].node, ids [index]);
        if (lacking)
            free (ids [index]);
        else
            run [run_count++] = ids [index];
    }
    free (ids);
    bool dag = job_spec_is_dag (spec);
    job_graph_t *graph = dag ? job_graph_new (spec) : NULL;
    size_t steps = job_spec_step_count (spec);
    char *target_text = target_format (target);
    //  The batches, as the scheduler would cut them (its own functions,
    //  on a record that never reaches it): over the nodes it runs and the
    //  named nodes that get a row without running
    char **expected = (char **) calloc (run_count + skip_count + 1,
                                        sizeof (char *));
    assert (expected);
    size_t expected_count = 0;
    for (size_t index = 0; index < run_count; index++)
        expected [expected_count++] = strdup (run [index]);
    for (size_t index = 0; index < skip_count && run_count; index++)
        if (skip [index].named)
            expected [expected_count++] = strdup (skip [index].node);
    qsort (expected, expected_count, sizeof (char *), s_compare_strings);
    sched_job_t *job = sched_job_new ("j-check", &spec);
    assert (job);
    job->expected = expected;
    job->expected_count = expected_count;
    size_t batches = run_count ? sched_job_batch_count (job) : 0;
    size_t budget = sched_job_budget (job);

    pw_t *reply = call->reply;
    pw_reset (reply);
    proto_reply_ok_begin (reply, call->request->id);
    pw_map (reply, 9 + (budget != SIZE_MAX ? 1 : 0));
    pw_str (reply, "target");
    pw_str (reply, target_text ? target_text : "");
    pw_str (reply, "any");
    pw_bool (reply, target->any);
    pw_str (reply, "nodes");
    pw_array (reply, run_count);
    for (size_t index = 0; index < run_count; index++)
        pw_str (reply, run [index]);
    pw_str (reply, "not_run");
    pw_array (reply, skip_count);
    for (size_t index = 0; index < skip_count; index++) {
        pw_map (reply, 3);
        pw_str (reply, "node");
        pw_str (reply, skip [index].node);
        pw_str (reply, "status");
        pw_str (reply, sched_cell_status_name (skip [index].status));
        pw_str (reply, "reason");
        pw_str (reply, skip [index].reason);
    }
    pw_str (reply, "steps");
    pw_int (reply, (int64_t) steps);
    pw_str (reply, "order");
    pw_str (reply, dag ? "dag" : "phases");
    pw_str (reply, "plan");
    pw_array (reply, steps);
    for (size_t at = 0; at < steps; at++)
        s_write_plan_step (reply, job->spec, graph,
                           graph ? graph->order [at] : at);
    pw_str (reply, "batches");
    pw_array (reply, batches);
    for (size_t batch = 0; batch < batches; batch++) {
        size_t lo = batch ? sched_job_batch_end (job, batch - 1) : 0;
        size_t hi = sched_job_batch_end (job, batch);
        pw_array (reply, hi - lo);
        for (size_t node = lo; node < hi; node++)
            pw_str (reply, expected [node]);
    }
    pw_str (reply, "strategy");
    pw_str (reply, job_strategy_name (job->spec->strategy));
    if (budget != SIZE_MAX) {
        pw_str (reply, "max_failures");
        pw_int (reply, (int64_t) budget);
    }
    sched_not_run_free (skip, skip_count);
    for (size_t index = 0; index < run_count; index++)
        free (run [index]);
    free (run);
    free (target_text);
    job_graph_destroy (&graph);
    sched_job_destroy (&job);       //  Frees the spec and EXPECTED
}

//  ---------------------------------------------------------------------
//  job.get, job.list, job.events, job.cancel, job.delete

void
req_job_get (req_call_t *call)
{
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    ctx_t *ctx = call->ctx;
    store_txn_t *txn = req_txn (call);
    if (txn) {
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        //  The trace goes only to clients of this release: one of
        //  protocol 1 never asked for it
        char traceparent [TRACE_PARENT_LEN + 1] = "";
        bool made = false;
        if (call->request->version >= 2)
            jobtrace_get (txn, job_id, traceparent, &made);
        int rc = jobrec_write_record (txn, job_id,
                                      sched_job (ctx->sched, job_id),
                                      *traceparent ? traceparent : NULL, made,
                                      call->reply);
        if (rc == STORE_ENOTFOUND)
            req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
        else if (rc != 0)
            req_error (call, PROTO_ERR_STORE,
                       "job %s: its record is unreadable", job_id);
    }
    free (job_id);
}

//  A live job is counted from the scheduler's memory; a finished one is
//  rebuilt from the store once (its cells decoded, nothing rendered).
void
req_job_progress (req_call_t *call)
{
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    ctx_t *ctx = call->ctx;
    const sched_job_t *live = sched_job (ctx->sched, job_id);
    if (live) {
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        jobrec_write_progress (live, call->reply);
        free (job_id);
        return;
    }
    store_txn_t *txn = req_txn (call);
    if (txn) {
        sched_job_t *job = NULL;
        int rc = jobrec_load (txn, job_id, &job);
        if (rc == STORE_ENOTFOUND)
            req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
        else
        if (rc != 0)
            req_error (call, PROTO_ERR_STORE,
                       "job %s: its record is unreadable", job_id);
        else {
            pw_reset (call->reply);
            proto_reply_ok_begin (call->reply, call->request->id);
            jobrec_write_progress (job, call->reply);
        }
        sched_job_destroy (&job);
    }
    free (job_id);
}

void
req_write_watch (ctx_t *ctx, const char *request_id, const char *job_id,
                 uint64_t version, bool changed, pw_t *reply)
{
    pw_reset (reply);
    if (*job_id == 0 || strcmp (job_id, REQ_PARK_NODES) == 0) {
        //  job.changes, node.changes: {version, changed}
        proto_reply_ok_begin (reply, request_id);
        pw_map (reply, 2);
        pw_str (reply, "version");
        pw_int (reply, (int64_t) version);
        pw_str (reply, "changed");
        pw_bool (reply, changed);
        return;
    }
    const sched_job_t *live = sched_job (ctx->sched, job_id);
    sched_job_t *stored = NULL;
    if (!live) {
        store_txn_t *txn = ctx_txn (ctx);
        int rc = txn ? jobrec_load (txn, job_id, &stored) : STORE_EIO;
        if (rc == STORE_ENOTFOUND) {
            proto_reply_error (reply, request_id, PROTO_ERR_NOT_FOUND,
                               "no such job", NULL, 0);
            return;
        }
        if (rc != 0) {
            proto_reply_error (reply, request_id, PROTO_ERR_STORE,
                               "the job's record is unreadable", NULL, 0);
            return;
        }
    }
    proto_reply_ok_begin (reply, request_id);
    pw_map (reply, 3);
    pw_str (reply, "version");
    pw_int (reply, (int64_t) version);
    pw_str (reply, "changed");
    pw_bool (reply, changed);
    pw_str (reply, "progress");
    jobrec_write_progress (live ? live : stored, reply);
    sched_job_destroy (&stored);
}

//  job.watch: the job's progress once it changes past the version the
//  caller saw (at once when it already has, when the job is finished, or
//  without AFTER); else the request waits in the broker, parked, until it
//  does or TIMEOUT_MS (30 s by default) passes.
void
req_job_watch (req_call_t *call)
{
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    ctx_t *ctx = call->ctx;
    int64_t after = -1, timeout_ms = 30000;
    const pv_t *value = pv_map_get (call->request->body, "after");
    if (value)
        pv_get_int (value, &after);
    value = pv_map_get (call->request->body, "timeout_ms");
    if (value)
        pv_get_int (value, &timeout_ms);
    uint64_t version = ctx_job_version (ctx, job_id);
    bool live = sched_job (ctx->sched, job_id) != NULL;
    if (live) {
        //  Answered at the end of the pass, after its commit, even when it
        //  is due at once (no AFTER, a job that moved on, no TIMEOUT_MS):
        //  a watcher hears only what is stored. The reply stays empty.
        call->park = true;
        snprintf (call->park_job, sizeof call->park_job, "%s", job_id);
        call->park_after = after >= 0 ? (uint64_t) after : UINT64_MAX;
        call->park_timeout_ms = timeout_ms;
    }
    else
        req_write_watch (ctx, call->request->id, job_id, version,
                         after < 0 || (uint64_t) after != version || !live,
                         call->reply);
    free (job_id);
}

//  job.changes: answered once any job changed (was submitted, moved on,
//  ended or was deleted) past the version the caller saw, at the end of the
//  pass (at once without AFTER); else parked until one does or TIMEOUT_MS
//  (30 s by default) passes. A job list watches this, then reads.
void
req_job_changes (req_call_t *call)
{
    int64_t after = -1, timeout_ms = 30000;
    const pv_t *value = pv_map_get (call->request->body, "after");
    if (value)
        pv_get_int (value, &after);
    value = pv_map_get (call->request->body, "timeout_ms");
    if (value)
        pv_get_int (value, &timeout_ms);
    call->park = true;
    call->park_job [0] = 0;
    call->park_after = after >= 0 ? (uint64_t) after : UINT64_MAX;
    call->park_timeout_ms = timeout_ms;
}

void
req_job_list (req_call_t *call)
{
    char *status_name = req_field (call, "status");
    sched_job_status_t wanted = SCHED_JOB_PENDING;
    if (status_name && sched_job_status_parse (status_name, &wanted) != 0) {
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "status: unknown job status '%s' (pending, running, "
                   "completed, partial_failure, failed, cancelled)",
                   status_name);
        free (status_name);
        return;
    }
    int64_t limit = REQ_LIST_DEFAULT;
    const pv_t *limit_value = pv_map_get (call->request->body, "limit");
    if (limit_value
        && (pv_get_int (limit_value, &limit) != 0 || limit < 1
            || limit > LIST_MAX)) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "limit: expected 1 to %d",
                   LIST_MAX);
        free (status_name);
        return;
    }
    char *schedule = req_field (call, "schedule");
    char *before = req_field (call, "before");
    store_txn_t *txn = req_txn (call);
    if (!txn) {
        free (status_name);
        free (schedule);
        free (before);
        return;
    }
    //  Newest first: walk the time-sorted ids backwards. Two passes, since
    //  msgpack wants the count before the items. The same walk counts the
    //  stored jobs by status, whatever STATUS asks for: what a status
    //  filter would find now (a deleted job is no longer counted).
    pw_t *items = pw_new ();
    size_t count = 0, total = 0;
    size_t by_status [SCHED_JOB_CANCELLED + 1] = {0};
    store_cursor_t *cursor = store_cursor_new (txn, STORE_DB_JOBS);
    const void *k, *v;
    size_t k_len, v_len;
    int rc = STORE_EIO;
    if (cursor && before) {
        //  Paging: only ids older (smaller) than BEFORE
        rc = store_cursor_seek (cursor, before, strlen (before), &k, &k_len,
                                &v, &v_len);
        rc = rc == 0 ? store_cursor_prev (cursor, &k, &k_len, &v, &v_len)
                     : store_cursor_last (cursor, &k, &k_len, &v, &v_len);
    }
    else
    if (cursor)
        rc = store_cursor_last (cursor, &k, &k_len, &v, &v_len);
    while (rc == 0) {
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (v, v_len, &doc, NULL, 0) == 0) {
            const pv_t *header = pv_doc_root (doc);
            int status = jobrec_header_status (header);
            bool of_schedule = !schedule
                || pv_str_eq (pv_map_get (header, "schedule"), schedule);
            if (of_schedule && status >= SCHED_JOB_PENDING
                && status <= SCHED_JOB_CANCELLED)
                by_status [status]++;
            if (of_schedule && (!status_name || status == (int) wanted)) {
                total++;
                if ((int64_t) count < limit) {
                    jobrec_write_summary (header, items);
                    count++;
                }
            }
        }
        pv_doc_destroy (&doc);
        rc = store_cursor_prev (cursor, &k, &k_len, &v, &v_len);
    }
    store_cursor_destroy (&cursor);
    pw_reset (call->reply);
    proto_reply_ok_begin (call->reply, call->request->id);
    pw_map (call->reply, 3);
    pw_str (call->reply, "jobs");
    pw_array (call->reply, count);
    if (count)
        pw_raw (call->reply, pw_data (items), pw_size (items));
    pw_str (call->reply, "total");
    pw_int (call->reply, (int64_t) total);
    pw_str (call->reply, "by_status");
    pw_map (call->reply, SCHED_JOB_CANCELLED + 1);
    for (int status = SCHED_JOB_PENDING; status <= SCHED_JOB_CANCELLED;
         status++) {
        pw_str (call->reply,
                sched_job_status_name ((sched_job_status_t) status));
        pw_int (call->reply, (int64_t) by_status [status]);
    }
    pw_destroy (&items);
    free (status_name);
    free (schedule);
    free (before);
}

void
req_job_events (req_call_t *call)
{
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    int64_t after = 0;
    const pv_t *after_value = pv_map_get (call->request->body, "after");
    if (after_value && (pv_get_int (after_value, &after) != 0 || after < 0
                        || after > UINT32_MAX)) {
        req_error (call, PROTO_ERR_BAD_REQUEST, "after: expected an event seq");
        free (job_id);
        return;
    }
    store_txn_t *txn = req_txn (call);
    if (txn) {
        const void *value;
        size_t value_len;
        if (store_get (txn, STORE_DB_JOBS, job_id, strlen (job_id), &value,
                       &value_len) != 0)
            req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
        else {
            pw_reset (call->reply);
            proto_reply_ok_begin (call->reply, call->request->id);
            pw_map (call->reply, 1);
            pw_str (call->reply, "events");
            jobrec_write_events (txn, job_id, (uint32_t) after, EVENTS_MAX,
                                 call->reply);
        }
    }
    free (job_id);
}

//  The decoded header record of job JOB_ID as stored, or NULL when it
//  is not stored (or cannot be read). The caller destroys it.
static pv_doc_t *
s_stored_header (req_call_t *call, const char *job_id)
{
    store_txn_t *txn = req_txn (call);
    const void *value;
    size_t value_len;
    pv_doc_t *doc = NULL;
    if (!txn
        || store_get (txn, STORE_DB_JOBS, job_id, strlen (job_id), &value,
                      &value_len) != 0
        || pv_doc_decode (value, value_len, &doc, NULL, 0) != 0)
        pv_doc_destroy (&doc);
    return doc;
}

//  The stored status of a job that the scheduler no longer holds, or -1.
static int
s_stored_status (req_call_t *call, const char *job_id)
{
    pv_doc_t *doc = s_stored_header (call, job_id);
    int status = doc ? jobrec_header_status (pv_doc_root (doc)) : -1;
    pv_doc_destroy (&doc);
    return status;
}

void
req_job_cancel (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    char *reason = req_field (call, "reason");
    char *who = req_caller_text (call);
    char *text = zsys_sprintf ("cancelled by %s%s%s", who,
                               reason ? ": " : "", reason ? reason : "");
    zstr_free (&who);
    if (sched_cancel (ctx->sched, job_id, text, ctx_now_ms (ctx)) == 0) {
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        pw_map (call->reply, 2);
        pw_str (call->reply, "job");
        pw_str (call->reply, job_id);
        pw_str (call->reply, "status");
        pw_str (call->reply, "cancelled");
    }
    else {
        int status = s_stored_status (call, job_id);
        if (status >= 0)
            req_error (call, PROTO_ERR_CONFLICT, "job %s already ended (%s)",
                       job_id,
                       sched_job_status_name ((sched_job_status_t) status));
        else
            req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
    }
    zstr_free (&text);
    free (reason);
    free (job_id);
}

void
req_job_delete (req_call_t *call)
{
    ctx_t *ctx = call->ctx;
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    if (sched_job (ctx->sched, job_id))
        req_error (call, PROTO_ERR_CONFLICT,
                   "job %s has not ended: cancel it first", job_id);
    else if (s_stored_status (call, job_id) < 0)
        req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
    else {
        store_txn_t *txn = ctx_txn (ctx);
        int rc = jobrec_delete (txn, job_id);
        //  Its dead-letter entries go with it
        if (rc == 0) {
            int purged = dlq_purge (txn, job_id, 0);
            rc = purged < 0 ? purged : 0;
        }
        if (rc != 0)
            req_error (call, PROTO_ERR_STORE, "job %s: %s", job_id,
                       store_strerror (rc));
        else {
            pw_reset (call->reply);
            proto_reply_ok_begin (call->reply, call->request->id);
            pw_map (call->reply, 2);
            pw_str (call->reply, "job");
            pw_str (call->reply, job_id);
            pw_str (call->reply, "deleted");
            pw_bool (call->reply, true);
        }
    }
    free (job_id);
}

//  How many steps job JOB_ID has (the scheduler's, else its stored
//  header's), or -1 when it is neither held nor stored.
static int64_t
s_job_steps (req_call_t *call, const char *job_id)
{
    const sched_job_t *live = sched_job (call->ctx->sched, job_id);
    if (live)
        return (int64_t) live->step_count;
    pv_doc_t *doc = s_stored_header (call, job_id);
    int64_t steps = -1;
    if (!doc || pv_get_int (pv_map_get (pv_doc_root (doc), "steps"), &steps) != 0)
        steps = -1;
    pv_doc_destroy (&doc);
    return steps;
}

//  Refuses a STEP job JOB_ID does not have (not_found, saying how many
//  it has) and returns true; false when it has it or is not known (the
//  page lookup then answers "no job").
static bool
s_job_step_missing (req_call_t *call, const char *job_id, int64_t step)
{
    int64_t steps = s_job_steps (call, job_id);
    if (steps < 0 || (step >= 0 && step < steps))
        return false;
    if (steps == 0)
        req_error (call, PROTO_ERR_NOT_FOUND, "job %s has no step", job_id);
    else
    if (steps == 1)
        req_error (call, PROTO_ERR_NOT_FOUND,
                   "job %s has 1 step (step 0): there is no step %" PRId64,
                   job_id, step);
    else
        req_error (call, PROTO_ERR_NOT_FOUND,
                   "job %s has %" PRId64 " steps (0 to %" PRId64 "): there "
                   "is no step %" PRId64, job_id, steps, steps - 1, step);
    return true;
}

//  The live cell of NODE at STEP of job JOB_ID into *CELL_P (NULL when
//  the job is not live). Refuses a node the live job does not run on
//  (not_found) and returns true; false otherwise.
static bool
s_output_live (req_call_t *call, const char *job_id, const char *node,
               uint32_t step, const sched_cell_t **cell_p)
{
    *cell_p = NULL;
    const sched_job_t *job = sched_job (call->ctx->sched, job_id);
    if (!job || !job->cells || step >= job->step_count)
        return false;
    ssize_t index = sched_job_node_index (job, node);
    if (index < 0) {
        req_error (call, PROTO_ERR_NOT_FOUND,
                   "job %s does not run on node %s", job_id, node);
        return true;
    }
    *cell_p = &job->cells [step * job->expected_count + (size_t) index];
    return false;
}

//  One page of a cell's whole stdout or stderr (jobrec.h): of the attempt
//  in flight, what has arrived so far.
void
req_job_output (req_call_t *call)
{
    const sched_cell_t *cell = NULL;
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    const pv_t *body = call->request->body;
    char *node = req_field (call, "node");
    char *stream = req_field (call, "stream");
    int64_t step = 0, attempt = 0, offset = 0, limit = 1024 * 1024;
    pv_get_int (pv_map_get (body, "step"), &step);
    pv_get_int (pv_map_get (body, "attempt"), &attempt);
    pv_get_int (pv_map_get (body, "offset"), &offset);
    pv_get_int (pv_map_get (body, "limit"), &limit);
    if (!node || !name_valid (node))
        req_error (call, PROTO_ERR_BAD_REQUEST, "node: '%s' is not a node id",
                   node ? node : "");
    else
    if (stream && strcmp (stream, "stdout") != 0
        && strcmp (stream, "stderr") != 0)
        req_error (call, PROTO_ERR_BAD_REQUEST,
                   "stream: '%s' is neither stdout nor stderr", stream);
    else
    if (s_job_step_missing (call, job_id, step))
        ;   //  Answered
    else
    if (s_output_live (call, job_id, node, (uint32_t) step, &cell))
        ;   //  Answered: no such node
    else {
        bool stderr_ = stream && strcmp (stream, "stderr") == 0;
        store_txn_t *txn = req_txn (call);
        if (txn) {
            pw_reset (call->reply);
            proto_reply_ok_begin (call->reply, call->request->id);
            //  The attempt in flight: what has arrived of it so far
            bool in_flight = cell
                             && (cell->status == SCHED_CELL_DISPATCHED
                                 || cell->status == SCHED_CELL_ACKNOWLEDGED
                                 || cell->status == SCHED_CELL_RUNNING);
            int rc = in_flight
                     && (attempt == 0 || (uint32_t) attempt == cell->attempt)
                ? jobrec_write_live_page (
                      txn, job_id, (uint32_t) step, node, cell->attempt,
                      stderr_, (uint64_t) offset, (size_t) limit,
                      sched_cell_status_name (cell->status), call->reply)
                : jobrec_write_output_page (
                      txn, job_id, (uint32_t) step, node, (uint32_t) attempt,
                      stderr_, (uint64_t) offset, (size_t) limit,
                      !cell || sched_cell_status_final (cell->status),
                      call->reply);
            if (rc == JOBREC_PAST_END)
                req_error (call, PROTO_ERR_BAD_REQUEST,
                           "offset: %" PRId64 " is past the end of the %s of "
                           "job %s step %d on node %s (ask from the page's "
                           "next)", offset, stderr_ ? "stderr" : "stdout",
                           job_id, (int) step, node);
            else
            if (rc == STORE_ENOTFOUND
                && store_get (txn, STORE_DB_JOBS, job_id, strlen (job_id),
                              NULL, NULL) != 0)
                req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
            else
            if (rc == STORE_ENOTFOUND)
                req_error (call, PROTO_ERR_NOT_FOUND,
                           "job %s: node %s has no output for step %d%s yet",
                           job_id, node, (int) step,
                           attempt ? " at that attempt" : "");
            else
            if (rc != 0)
                req_error (call, PROTO_ERR_STORE,
                           "job %s: a result record is unreadable", job_id);
        }
    }
    free (stream);
    free (node);
    free (job_id);
}

//  The pieces of JOB's output kept since sequence number AFTER (outlog.h),
//  with their bytes, up to LIMIT bytes in all (at least one piece).
void
req_job_output_events (req_call_t *call)
{
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    int64_t after = 0, limit = 1024 * 1024;
    pv_get_int (pv_map_get (call->request->body, "after"), &after);
    pv_get_int (pv_map_get (call->request->body, "limit"), &limit);
    outlog_t *outlog = call->ctx->outlog;
    store_txn_t *txn = NULL;
    if (s_job_steps (call, job_id) < 0)
        req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
    else
    if ((txn = req_txn (call))) {
        //  The entries first (their count leads the list), then the reply
        size_t count = 0, bytes = 0;
        uint64_t next = (uint64_t) after;
        const outlog_entry_t *entry = NULL;
        for (uint64_t seq = (uint64_t) after;
             outlog && (entry = outlog_next (outlog, job_id, seq)); ) {
            if (count && bytes + entry->len > (uint64_t) limit)
                break;
            count++;
            bytes += entry->len;
            seq = next = entry->seq;
        }
        if (outlog && !entry && outlog_last (outlog) > next)
            next = outlog_last (outlog);
        pw_reset (call->reply);
        proto_reply_ok_begin (call->reply, call->request->id);
        pw_map (call->reply, 4);
        pw_str (call->reply, "job");
        pw_str (call->reply, job_id);
        pw_str (call->reply, "next");
        pw_int (call->reply, (int64_t) next);
        pw_str (call->reply, "lost");
        pw_bool (call->reply, outlog && outlog_lost (outlog,
                                                     (uint64_t) after));
        pw_str (call->reply, "events");
        pw_array (call->reply, count);
        uint64_t seq = (uint64_t) after;
        for (size_t index = 0; index < count; index++) {
            entry = outlog_next (outlog, job_id, seq);
            seq = entry->seq;
            size_t got = 0;
            uint8_t *data = jobrec_read_output (txn, job_id, entry->step,
                                                entry->node, entry->attempt,
                                                entry->stderr_, entry->offset,
                                                entry->len, &got);
            pw_map (call->reply, 7);
            pw_str (call->reply, "seq");
            pw_int (call->reply, (int64_t) entry->seq);
            pw_str (call->reply, "step");
            pw_int (call->reply, entry->step);
            pw_str (call->reply, "node");
            pw_str (call->reply, entry->node);
            pw_str (call->reply, "attempt");
            pw_int (call->reply, entry->attempt);
            pw_str (call->reply, "stream");
            pw_str (call->reply, entry->stderr_ ? "stderr" : "stdout");
            pw_str (call->reply, "offset");
            pw_int (call->reply, (int64_t) entry->offset);
            pw_str (call->reply, "data");
            pw_bin (call->reply, data, got);
            free (data);
        }
    }
    free (job_id);
}

//  ---------------------------------------------------------------------
//  job.retry (and dlq.retry)

//  Cell statuses that make a node's work worth a --failed-only retry:
//  every failure kind, and cancelled (stopped before it was done). A node
//  with only skipped cells is left out: it did not fail.
static bool
s_cell_retried (sched_cell_status_t status)
{
    return dlq_status_lands (status) || status == SCHED_CELL_CANCELLED;
}

//  Adds RETRY_ID to the retried_by list of JOB and saves its header.
static void
s_link_retry (req_call_t *call, sched_job_t *job, const char *retry_id)
{
    ctx_t *ctx = call->ctx;
    char **grown = (char **) realloc (job->retried_by,
                                      (job->retried_by_count + 1)
                                          * sizeof (char *));
    assert (grown);
    job->retried_by = grown;
    job->retried_by [job->retried_by_count++] = strdup (retry_id);
    store_txn_t *txn = ctx_txn (ctx);
    if (txn)
        jobrec_save_header (txn, job, ctx->scratch);
}

//  The ids of JOB's nodes with a cell worth retrying, joined by ','
//  (caller frees), or NULL when there is none. *COUNT_P gets how many.
static char *
s_failed_nodes (const sched_job_t *job, size_t *count_p)
{
    size_t nodes = job->expected_count, size = 0;
    *count_p = 0;
    char *list = NULL;
    for (size_t node = 0; node < nodes && job->cells; node++) {
        bool failed = false;
        for (size_t step = 0; step < job->step_count && !failed; step++)
            failed = s_cell_retried (job->cells [step * nodes + node].status);
        if (!failed)
            continue;
        size_t len = strlen (job->expected [node]);
        list = (char *) realloc (list, size + len + 2);
        assert (list);
        if (size)
            list [size++] = ',';
        memcpy (list + size, job->expected [node], len + 1);
        size += len;
        (*count_p)++;
    }
    return list;
}

void
req_retry (req_call_t *call, const char *job_id, bool failed_only,
           const char *target_text)
{
    ctx_t *ctx = call->ctx;
    sched_job_t *loaded = NULL;
    const sched_job_t *job = sched_job (ctx->sched, job_id);
    store_txn_t *txn = job ? NULL : req_txn (call);
    if (!job && !txn)
        return;
    if (!job) {
        int rc = jobrec_load (txn, job_id, &loaded);
        if (rc == STORE_ENOTFOUND) {
            req_error (call, PROTO_ERR_NOT_FOUND, "no job %s", job_id);
            return;
        }
        if (rc != 0) {
            req_error (call, PROTO_ERR_STORE,
                       "job %s: its record is unreadable", job_id);
            return;
        }
        job = loaded;
    }
    size_t failed = 0;
    char *nodes = failed_only ? s_failed_nodes (job, &failed) : NULL;
    job_spec_t *spec = job_spec_dup (job->spec);
    sched_job_destroy (&loaded);
    char err [256] = "";
    target_t target;
    memset (&target, 0, sizeof target);
    if (!spec)
        req_error (call, PROTO_ERR_INTERNAL,
                   "job %s: its spec cannot be copied", job_id);
    else
    if (failed_only && failed == 0)
        req_error (call, PROTO_ERR_CONFLICT,
                   "job %s has no failed node to retry", job_id);
    else
    if (target_text && target_parse (target_text, &target, err, sizeof err))
        req_error (call, PROTO_ERR_BAD_REQUEST, "target: %s", err);
    else
    if (!target_text && failed_only && !spec->target.any
        && target_from_parts ("node", nodes, false, &target, err, sizeof err))
        req_error (call, PROTO_ERR_CONFLICT,
                   "job %s: its %zu failed nodes do not fit a node list (%s); "
                   "retry it with --target", job_id, failed, err);
    else {
        if (target_text || (failed_only && !spec->target.any)) {
            target_clear (&spec->target);
            spec->target = target;
            memset (&target, 0, sizeof target);
        }
        //  The same key would name the original
        free (spec->idempotency_key);
        spec->idempotency_key = NULL;
        //  The allowlist binds retries as it binds submits
        for (size_t step = 0; step < job_spec_step_count (spec); step++) {
            const job_phase_t *leaf = job_spec_step (spec, step, NULL, NULL);
            if (!auth_allowed (&ctx->config->auth, leaf->backend,
                               leaf->action)) {
                req_error (call, PROTO_ERR_FORBIDDEN,
                           "%s.%s is not in this broker's allowlist",
                           leaf->backend, leaf->action);
                job_spec_destroy (&spec);
                break;
            }
        }
        char id [JOB_ID_LEN + 1];
        if (spec && s_admit (call, &spec, job_id, id) == 0) {
            //  Link the original (live in the scheduler, or in the store)
            sched_job_t *original = (sched_job_t *) sched_job (ctx->sched,
                                                               job_id);
            txn = ctx_txn (ctx);
            if (original)
                s_link_retry (call, original, id);
            else
            if (txn && jobrec_load (txn, job_id, &loaded) == 0) {
                s_link_retry (call, loaded, id);
                sched_job_destroy (&loaded);
            }
            if (txn)
                dlq_mark_retry (txn, job_id, id, ctx->scratch);
            //  The original's timeline says who retried it, and as what
            char *who = req_caller_text (call);
            char *detail = zsys_sprintf ("as %s by %s", id, who);
            ctx_job_event (ctx, job_id, "retried", detail);
            zstr_free (&detail);
            zstr_free (&who);
        }
    }
    target_clear (&target);
    job_spec_destroy (&spec);
    free (nodes);
}

void
req_job_retry (req_call_t *call)
{
    char *job_id = NULL;
    if (s_job_id_field (call, &job_id) != 0)
        return;
    bool failed_only = false;
    pv_get_bool (pv_map_get (call->request->body, "failed_only"),
                 &failed_only);
    char *target = req_field (call, "target");
    req_retry (call, job_id, failed_only, target);
    free (target);
    free (job_id);
}
