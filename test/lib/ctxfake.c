/*  =========================================================================
    ctxfake - a real handler context for unit tests (see ctxfake.h)
    =========================================================================
*/
#include "ctxfake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/jobrec.h"
#include "../../broker/schedule.h"
#include "../../proto/keys.h"

struct _ctxfake_t {
    ctx_t ctx;                   //  What handlers see (first: s_self)
    ctx_ops_t ops;               //  The fake pass and clock
    char dir [256];              //  Temporary directory
    broker_config_t config;      //  The configuration
    store_txn_t *txn;            //  The pass's transaction, or NULL
    int64_t now_ms;              //  Fake monotonic clock
    int64_t wall_ms;             //  Fake wall clock
    size_t sends;                //  Dispatches, re-sends, cancels drained
    char keys [3][KEYS_TEXT_SIZE];  //  Clients: viewer, operator, admin
    pw_t *request;               //  The request being written
    unsigned request_seq;        //  For request ids
    zhashx_t *jobs_seen;         //  Ids of the jobs saved by drains
};

static ctxfake_t *
s_self (ctx_t *ctx)
{
    return (ctxfake_t *) ctx;
}

//  ---------------------------------------------------------------------
//  The fake pass and clock

static store_txn_t *
s_txn (ctx_t *ctx)
{
    ctxfake_t *self = s_self (ctx);
    if (!self->txn)
        self->txn = store_begin (ctx->store, true);
    return self->txn;
}

static int64_t
s_now_ms (ctx_t *ctx)
{
    return s_self (ctx)->now_ms;
}

static int64_t
s_wall_ms (ctx_t *ctx)
{
    return s_self (ctx)->wall_ms;
}

static uint64_t
s_job_version (ctx_t *ctx, const char *job_id)
{
    return 0;
}

static size_t
s_watcher_count (ctx_t *ctx)
{
    return 0;
}

//  Job events of handlers go into the pass, as the server writes them
static void
s_job_event (ctx_t *ctx, const char *job_id, const char *event,
             const char *detail)
{
    store_txn_t *txn = ctx_txn (ctx);
    if (txn)
        jobrec_save_event (txn, job_id, jobrec_next_event_seq (txn, job_id),
                           s_wall_ms (ctx), event, NULL, -1, detail,
                           ctx->scratch);
}

//  The scheduler's records go into the pass as the server writes them;
//  what would be sent is only counted.
static void
s_drain (ctx_t *ctx)
{
    ctxfake_t *self = s_self (ctx);
    sched_action_t action;
    while (ctx->sched && sched_next_action (ctx->sched, &action)) {
        store_txn_t *txn = s_txn (ctx);
        switch (action.type) {
            case SCHED_ACTION_DISPATCH:
            case SCHED_ACTION_RESEND:
            case SCHED_ACTION_CANCEL:
                self->sends++;
                break;
            case SCHED_ACTION_SAVE_JOB:
                zhashx_update (self->jobs_seen, action.job->id, (void *) "");
                action.job->updated_at_ms = self->wall_ms;
                if (txn)
                    ctx_store_error (jobrec_save_header (txn, action.job,
                                                         ctx->scratch),
                                     "a job");
                break;
            case SCHED_ACTION_SAVE_CELL:
                if (txn)
                    ctx_store_error (jobrec_save_cell_at (txn, action.job,
                                                          action.cell,
                                                          ctx->scratch),
                                     "a result");
                break;
            case SCHED_ACTION_EVENT:
                if (txn) {
                    bool step_event = action.node != NULL;
                    uint32_t seq = jobrec_next_event_seq (txn, action.job->id);
                    ctx_store_error (jobrec_save_event (
                                         txn, action.job->id, seq,
                                         self->wall_ms, action.event,
                                         action.node,
                                         step_event ? (int64_t) action.step
                                                    : -1,
                                         action.detail, ctx->scratch),
                                     "an event");
                }
                break;
            case SCHED_ACTION_FORGET_CELLS:
                if (txn)
                    ctx_store_error (jobrec_forget_cells (txn, action.job,
                                                          action.node),
                                     "a moved job's cells");
                break;
            case SCHED_ACTION_FINISHED:
                break;
        }
    }
}

//  ---------------------------------------------------------------------
//  The scheduler's view of the registry (what the server gives it)

static size_t
s_resolve (void *arg, const target_t *target, char ***ids_p)
{
    ctxfake_t *self = (ctxfake_t *) arg;
    return registry_resolve (self->ctx.registry, target, ids_p);
}

static size_t
s_unavailable (void *arg, const job_spec_t *spec, sched_not_run_t **list_p)
{
    ctxfake_t *self = (ctxfake_t *) arg;
    return registry_unavailable (self->ctx.registry, spec, self->wall_ms,
                                 list_p);
}

static bool
s_node_load (void *arg, const char *id, sched_load_t *load)
{
    ctxfake_t *self = (ctxfake_t *) arg;
    const registry_node_t *node = registry_lookup (self->ctx.registry, id);
    if (!node)
        return false;
    load->online = node->online && !node->drained;
    load->slots = node->hello && node->hello->concurrency
                      ? node->hello->concurrency : 1;
    load->running = node->running;
    load->queued = node->queued;
    return true;
}

static bool
s_idempotent (void *arg, const char *backend, const char *action)
{
    ctxfake_t *self = (ctxfake_t *) arg;
    const proto_action_spec_t *spec
        = registry_find_action (self->ctx.registry, backend, action, true);
    return spec && (!spec->modify || spec->idempotent);
}

//  ---------------------------------------------------------------------
//  Life

static const char *s_role_names [3] = {"viewer", "operator", "admin"};

static int
s_configure (ctxfake_t *self, ctxfake_configure_fn *configure, void *arg)
{
    char err [512];
    broker_config_defaults (&self->config);
    free (self->config.data_dir);
    self->config.data_dir = strdup (self->dir);
    self->config.map_bytes = (size_t) 8 << 20;
    self->config.max_map_bytes = (size_t) 64 << 20;
    char broker_key [KEYS_TEXT_SIZE];
    if (keys_generate (self->dir, "broker", false, NULL, broker_key, err,
                       sizeof err) != 0) {
        fprintf (stderr, "ctxfake: %s\n", err);
        return -1;
    }
    char path [400];
    snprintf (path, sizeof path, "%s/broker.key", self->dir);
    free (self->config.auth.key_file);
    self->config.auth.key_file = strdup (path);
    for (size_t index = 0; index < 3; index++) {
        if (keys_generate (self->dir, s_role_names [index], false, NULL,
                           self->keys [index], err, sizeof err) != 0) {
            fprintf (stderr, "ctxfake: %s\n", err);
            return -1;
        }
        char text [200];
        snprintf (text, sizeof text, "%s:%s", s_role_names [index],
                  self->keys [index]);
        if (auth_config_add_client (&self->config.auth, text, err,
                                    sizeof err) != 0) {
            fprintf (stderr, "ctxfake: %s\n", err);
            return -1;
        }
        auth_client_t *client
            = &self->config.auth.clients [self->config.auth.client_count - 1];
        free (client->name);
        client->name = strdup (s_role_names [index]);
    }
    if (configure && configure (&self->config, self->dir, arg) != 0)
        return -1;
    return 0;
}

ctxfake_t *
ctxfake_new (ctxfake_configure_fn *configure, void *arg)
{
    ctxfake_t *self = (ctxfake_t *) calloc (1, sizeof *self);
    if (!self)
        return NULL;
    const char *tmp = getenv ("TMPDIR");
    snprintf (self->dir, sizeof self->dir, "%s/grid-ctxfake-XXXXXX",
              tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp (self->dir)) {
        free (self);
        return NULL;
    }
    self->now_ms = CTXFAKE_NOW_MS;
    self->wall_ms = CTXFAKE_WALL_MS;
    self->ops.txn = s_txn;
    self->ops.drain = s_drain;
    self->ops.now_ms = s_now_ms;
    self->ops.wall_ms = s_wall_ms;
    self->ops.job_version = s_job_version;
    self->ops.watcher_count = s_watcher_count;
    self->ops.job_event = s_job_event;
    self->request = pw_new ();
    self->jobs_seen = zhashx_new ();
    ctx_t *ctx = &self->ctx;
    ctx->ops = &self->ops;
    ctx->config = &self->config;
    ctx->scratch = pw_new ();
    if (s_configure (self, configure, arg) != 0) {
        ctxfake_destroy (&self);
        return NULL;
    }
    char err [512] = "";
    ctx->stats = broker_stats_new (self->now_ms);
    ctx->store = store_open (self->dir, self->config.map_bytes,
                             self->config.max_map_bytes, err, sizeof err);
    ctx->registry = registry_new ();
    ctx->sched = sched_new (&self->config.sched, s_resolve, self);
    if (ctx->sched) {
        sched_set_unavailable (ctx->sched, s_unavailable, self);
        sched_set_fleet (ctx->sched, s_node_load, s_idempotent, self);
        if (sched_set_limits (ctx->sched, self->config.limits,
                              self->config.limit_count) != 0)
            snprintf (err, sizeof err, "the limits were refused");
    }
    ctx->schedules = zhashx_new ();
    zhashx_set_destructor (ctx->schedules,
                           (zhashx_destructor_fn *) schedule_destroy);
    if (ctx->store && !*err)
        ctx->auth = auth_new (&self->config.auth, ctx->store, err,
                              sizeof err);
    //  No rotation of the broker's key (no key file)
    ctx->brokerkey = brokerkey_new (NULL, NULL, 0);
    ctx->relays = relays_new (&self->config.relays,
                              self->config.auth.insecure);
    if (!ctx->stats || !ctx->store || !ctx->registry || !ctx->sched
        || !ctx->auth || !ctx->relays || *err) {
        fprintf (stderr, "ctxfake: %s\n", *err ? err : "out of memory");
        ctxfake_destroy (&self);
        return NULL;
    }
    return self;
}

void
ctxfake_destroy (ctxfake_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    ctxfake_t *self = *self_p;
    ctx_t *ctx = &self->ctx;
    store_abort (&self->txn);
    relays_destroy (&ctx->relays);
    brokerkey_destroy (&ctx->brokerkey);
    auth_destroy (&ctx->auth);
    zhashx_destroy (&ctx->schedules);
    sched_destroy (&ctx->sched);
    registry_destroy (&ctx->registry);
    store_destroy (&ctx->store);
    broker_stats_destroy (&ctx->stats);
    pw_destroy (&ctx->scratch);
    pw_destroy (&self->request);
    zhashx_destroy (&self->jobs_seen);
    broker_config_clear (&self->config);
    if (*self->dir) {
        char command [400];
        snprintf (command, sizeof command, "rm -rf '%s'", self->dir);
        if (system (command) != 0)
            fprintf (stderr, "ctxfake: cannot remove %s\n", self->dir);
    }
    free (self);
    *self_p = NULL;
}

ctx_t *
ctxfake_ctx (ctxfake_t *self)
{
    return &self->ctx;
}

const char *
ctxfake_dir (ctxfake_t *self)
{
    return self->dir;
}

const char *
ctxfake_client_key (ctxfake_t *self, auth_role_t role)
{
    assert (role >= AUTH_ROLE_VIEWER && role <= AUTH_ROLE_ADMIN);
    return self->keys [role - AUTH_ROLE_VIEWER];
}

void
ctxfake_set_now (ctxfake_t *self, int64_t now_ms, int64_t wall_ms)
{
    self->now_ms = now_ms;
    self->wall_ms = wall_ms;
}

void
ctxfake_advance (ctxfake_t *self, int64_t delta_ms)
{
    self->now_ms += delta_ms;
    self->wall_ms += delta_ms;
}

//  ---------------------------------------------------------------------
//  The pass

bool
ctxfake_pass_open (ctxfake_t *self)
{
    return self->txn != NULL;
}

int
ctxfake_commit (ctxfake_t *self)
{
    s_drain (&self->ctx);
    return self->txn ? store_commit (&self->txn) : 0;
}

void
ctxfake_abort (ctxfake_t *self)
{
    store_abort (&self->txn);
}

size_t
ctxfake_sends (ctxfake_t *self)
{
    return self->sends;
}

zlistx_t *
ctxfake_jobs_seen (ctxfake_t *self)
{
    zlistx_t *ids = zlistx_new ();
    zlistx_set_destructor (ids, (zlistx_destructor_fn *) zstr_free);
    for (void *item = zhashx_first (self->jobs_seen); item;
         item = zhashx_next (self->jobs_seen))
        zlistx_add_end (ids,
                        strdup ((const char *) zhashx_cursor (self->jobs_seen)));
    return ids;
}

//  ---------------------------------------------------------------------
//  Requests

pw_t *
ctxfake_begin (ctxfake_t *self, const char *type, size_t field_count)
{
    char id [32];
    snprintf (id, sizeof id, "req-%u", ++self->request_seq);
    pw_reset (self->request);
    proto_request_begin (self->request, type, id, field_count);
    return self->request;
}

pv_doc_t *
ctxfake_call (ctxfake_t *self, const auth_caller_t *caller, bool commit,
              const requests_row_t **row_p)
{
    auth_caller_t nobody;
    memset (&nobody, 0, sizeof nobody);
    if (!caller)
        caller = &nobody;
    ctx_t *ctx = &self->ctx;
    ctx_drain (ctx);
    proto_request_t *request = NULL;
    const char *code = NULL;
    char *id = NULL;
    char why [512];
    pw_t *reply = pw_new ();
    const requests_row_t *row = NULL;
    if (proto_request_decode (pw_data (self->request), pw_size (self->request),
                              &request, &code, &id, why, sizeof why) != 0) {
        ctx->stats->counters.malformed++;
        proto_reply_error (reply, id ? id : "", code, why, NULL, 0);
    }
    else {
        req_call_t call;
        memset (&call, 0, sizeof call);
        call.ctx = ctx;
        call.request = request;
        call.caller = caller;
        call.reply = reply;
        row = requests_admit (&call);
        if (row) {
            row->handler (&call);
            ctx_drain (ctx);
        }
    }
    if (commit)
        ctxfake_commit (self);
    else
        ctxfake_abort (self);
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (pw_data (reply), pw_size (reply), &doc, NULL, 0) != 0
        || pv_type (pv_doc_root (doc)) != PV_MAP)
        pv_doc_destroy (&doc);
    if (row_p)
        *row_p = row;
    pw_destroy (&reply);
    free (id);
    proto_request_destroy (&request);
    return doc;
}

pv_doc_t *
ctxfake_call_as (ctxfake_t *self, auth_role_t role)
{
    auth_caller_t caller;
    memset (&caller, 0, sizeof caller);
    caller.key = ctxfake_client_key (self, role);
    return ctxfake_call (self, &caller, true, NULL);
}

//  The string VALUE as a C string in BUF (SIZE bytes), "" when it is none.
static const char *
s_text (const pv_t *value, char *buf, size_t size)
{
    size_t len = 0;
    const char *text = value ? pv_str (value, &len) : NULL;
    snprintf (buf, size, "%.*s", text ? (int) len : 0, text ? text : "");
    return buf;
}

const char *
ctxfake_reply_code (const pv_doc_t *doc)
{
    static char code [64];
    const pv_t *root = doc ? pv_doc_root (doc) : NULL;
    if (root && pv_str_eq (pv_map_get (root, "type"), "ok"))
        return "ok";
    return s_text (root ? pv_map_get (root, "code") : NULL, code,
                   sizeof code);
}

const char *
ctxfake_reply_message (const pv_doc_t *doc)
{
    static char message [1024];
    const pv_t *root = doc ? pv_doc_root (doc) : NULL;
    return s_text (root ? pv_map_get (root, "message") : NULL, message,
                   sizeof message);
}

const pv_t *
ctxfake_reply_data (const pv_doc_t *doc)
{
    if (!doc || !pv_str_eq (pv_map_get (pv_doc_root (doc), "type"), "ok"))
        return NULL;
    return pv_map_get (pv_doc_root (doc), "data");
}

//  ---------------------------------------------------------------------
//  Nodes and jobs

static void
s_action (proto_action_spec_t *spec, const char *name, bool modify)
{
    spec->name = strdup (name);
    spec->help = strdup (name);
    spec->modify = modify;
}

proto_msg_t *
ctxfake_hello_new (const char *node, const char *hostname,
                   const char *instance)
{
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    assert (hello);
    hello->node = strdup (node);
    hello->hostname = strdup (hostname);
    hello->version = strdup ("1.0");
    hello->instance = instance ? strdup (instance) : NULL;
    hello->concurrency = 1;
    hello->backends = (proto_backend_spec_t *) calloc (
        1, sizeof (proto_backend_spec_t));
    assert (hello->backends);
    hello->backend_count = 1;
    hello->backends [0].name = strdup ("test");
    hello->backends [0].actions = (proto_action_spec_t *) calloc (
        2, sizeof (proto_action_spec_t));
    assert (hello->backends [0].actions);
    hello->backends [0].action_count = 2;
    s_action (&hello->backends [0].actions [0], "echo", false);
    s_action (&hello->backends [0].actions [1], "write", true);
    return hello;
}

registry_node_t *
ctxfake_register (ctxfake_t *self, const char *node)
{
    proto_msg_t *hello = ctxfake_hello_new (node, "host", "instance-1");
    registry_node_t *entry = registry_hello (self->ctx.registry, &hello, node,
                                             strlen (node), self->now_ms,
                                             self->wall_ms);
    ctx_save_node (&self->ctx, entry);
    ctxfake_commit (self);
    return entry;
}

void
ctxfake_write_job (pw_t *writer, const char *target, const char *action)
{
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_str (writer, target);
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 2);
    pw_str (writer, "backend");
    pw_str (writer, "test");
    pw_str (writer, "action");
    pw_str (writer, action);
}

//  ---------------------------------------------------------------------
//  The store as committed

size_t
ctxfake_store_count (ctxfake_t *self, store_db_t db)
{
    store_txn_t *txn = store_begin (self->ctx.store, false);
    size_t count = txn ? store_count (txn, db) : 0;
    store_abort (&txn);
    return count;
}

static uint64_t
s_fnv (uint64_t digest, const void *data, size_t size)
{
    const uint8_t *bytes = (const uint8_t *) data;
    for (size_t index = 0; index < size; index++) {
        digest ^= bytes [index];
        digest *= 1099511628211ULL;
    }
    return digest;
}

uint64_t
ctxfake_store_digest (ctxfake_t *self)
{
    uint64_t digest = 14695981039346656037ULL;
    store_txn_t *txn = store_begin (self->ctx.store, false);
    if (!txn)
        return 0;
    for (int db = 0; db < STORE_DB_COUNT; db++) {
        store_cursor_t *cursor = store_cursor_new (txn, (store_db_t) db);
        const void *k, *v;
        size_t k_len, v_len;
        int rc = cursor ? store_cursor_seek (cursor, NULL, 0, &k, &k_len, &v,
                                             &v_len)
                        : STORE_ENOTFOUND;
        digest = s_fnv (digest, &db, sizeof db);
        while (rc == 0) {
            digest = s_fnv (digest, &k_len, sizeof k_len);
            digest = s_fnv (digest, k, k_len);
            digest = s_fnv (digest, &v_len, sizeof v_len);
            digest = s_fnv (digest, v, v_len);
            rc = store_cursor_next (cursor, &k, &k_len, &v, &v_len);
        }
        store_cursor_destroy (&cursor);
    }
    store_abort (&txn);
    return digest;
}
