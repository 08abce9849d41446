/*  =========================================================================
    test_req_undo - a pass whose commit fails is undone in memory: after
    the store dropped what a request wrote, the server's undo
    (broker_rebuild, broker/broker_restore.c, called by s_pass_failed in
    broker_pass.c) must bring the in-memory state back to what the store
    holds.

    Each test runs a request through the request table over a real
    context (test/lib/ctxfake.h), aborts the pass instead of committing it
    (what a failed commit leaves on disk), runs the server's own
    broker_rebuild over that context, and compares memory with the store.
    broker_rebuild takes the server's struct: this file, and only this
    one, includes the server's private header to lend it a broker_t that
    holds the fake's context (ctxfake.c does not need it).

    Keys, schedules and the scheduler's settings (limits, the nodes that
    cannot run a job) are among what comes back: each has a test here.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../broker/broker_int.h"
#include "lib/ctxfake.h"

typedef struct {
    ctxfake_t *fake;             //  The context
    broker_t *server;            //  Lent to broker_rebuild (its sched's
                                 //  callbacks point at it: kept alive)
} s_state_t;

static int
s_limit_one (broker_config_t *config, const char *dir, void *arg)
{
    config->limits = (job_limit_t *) calloc (1, sizeof (job_limit_t));
    if (!config->limits)
        return -1;
    config->limits [0].pattern = strdup ("test.write");
    config->limits [0].max = 1;
    config->limit_count = 1;
    return 0;
}

static int
s_setup_with (void **state, ctxfake_configure_fn *configure)
{
    s_state_t *self = (s_state_t *) calloc (1, sizeof *self);
    if (!self)
        return -1;
    self->fake = ctxfake_new (configure, NULL);
    self->server = (broker_t *) calloc (1, sizeof (broker_t));
    if (!self->fake || !self->server)
        return -1;
    self->server->live_jobs = zhashx_new ();
    self->server->pass_jobs = zhashx_new ();
    self->server->event_seq = zhashx_new ();
    *state = self;
    return 0;
}

static int
s_setup (void **state)
{
    return s_setup_with (state, NULL);
}

static int
s_setup_limits (void **state)
{
    return s_setup_with (state, s_limit_one);
}

static int
s_teardown (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (self->server) {
        zhashx_destroy (&self->server->live_jobs);
        zhashx_destroy (&self->server->pass_jobs);
        zhashx_destroy (&self->server->event_seq);
        free (self->server);
    }
    ctxfake_destroy (&self->fake);
    free (self);
    return 0;
}

//  The server's undo over the fake's context: the server's struct holds
//  the context and the configuration (borrowed), and the ids of the jobs
//  saved so far (a superset of what the server tracks as live and as
//  touched by the pass: broker_rebuild resumes only those not final on
//  disk);
//  broker_rebuild replaces the scheduler and the schedules and reads
//  flags, jobs and keys back.
static void
s_rebuild (s_state_t *self)
{
    ctx_t *ctx = ctxfake_ctx (self->fake);
    broker_t *server = self->server;
    zlistx_t *ids = ctxfake_jobs_seen (self->fake);
    for (char *id = (char *) zlistx_first (ids); id;
         id = (char *) zlistx_next (ids))
        zhashx_update (server->pass_jobs, id, (void *) "");
    zlistx_destroy (&ids);
    server->ctx = *ctx;
    memcpy (&server->config, ctx->config, sizeof server->config);
    broker_rebuild (server);
    ctx->sched = server->ctx.sched;
    ctx->schedules = server->ctx.schedules;
    ctx->state = server->ctx.state;
    //  The configuration stays the fake's to free
    memset (&server->config, 0, sizeof server->config);
}

static void
s_assert_ok (pv_doc_t *doc)
{
    assert_non_null (doc);
    if (strcmp (ctxfake_reply_code (doc), "ok") != 0)
        fail_msg ("%s: %s", ctxfake_reply_code (doc),
                  ctxfake_reply_message (doc));
    pv_doc_destroy (&doc);
}

//  The request in the fake's writer from an admin, with its pass aborted.
static void
s_aborted (ctxfake_t *fake)
{
    auth_caller_t caller;
    memset (&caller, 0, sizeof caller);
    caller.key = ctxfake_client_key (fake, AUTH_ROLE_ADMIN);
    s_assert_ok (ctxfake_call (fake, &caller, false, NULL));
    assert_false (ctxfake_pass_open (fake));
}

//  Submits a job (test.ACTION on TARGET) as admin, committed; its id into
//  JOB.
static void
s_submit (ctxfake_t *fake, const char *target, const char *action,
          char *job, bool commit)
{
    pw_t *writer = ctxfake_begin (fake, "job.submit", 1);
    ctxfake_write_job (writer, target, action);
    auth_caller_t caller;
    memset (&caller, 0, sizeof caller);
    caller.key = ctxfake_client_key (fake, AUTH_ROLE_ADMIN);
    pv_doc_t *doc = ctxfake_call (fake, &caller, commit, NULL);
    const pv_t *id = pv_map_get (ctxfake_reply_data (doc), "job");
    size_t len = 0;
    const char *text = pv_str (id, &len);
    assert_non_null (text);
    snprintf (job, JOB_ID_LEN + 1, "%.*s", (int) len, text);
    s_assert_ok (doc);
}

//  The status ("pending", "accepted"...) of KEY's record as committed, or
//  "" when the store has none.
static const char *
s_stored_key_status (ctxfake_t *fake, const char *key, char *status,
                     size_t size)
{
    *status = 0;
    store_txn_t *txn = store_begin (ctxfake_ctx (fake)->store, false);
    assert_non_null (txn);
    const void *value = NULL;
    size_t value_len = 0;
    if (store_get (txn, STORE_DB_KEYS, key, strlen (key), &value,
                   &value_len) == 0) {
        pv_doc_t *doc = NULL;
        assert_int_equal (pv_doc_decode (value, value_len, &doc, NULL, 0), 0);
        size_t len = 0;
        const char *text = pv_str (pv_map_get (pv_doc_root (doc), "status"),
                                   &len);
        snprintf (status, size, "%.*s", text ? (int) len : 0,
                  text ? text : "");
        pv_doc_destroy (&doc);
    }
    store_abort (&txn);
    return status;
}

//  An agent key of node NODE that said hello and waits (pending),
//  committed. Its public key into KEY.
static void
s_pending_agent (ctxfake_t *fake, const char *node, char *key)
{
    ctx_t *ctx = ctxfake_ctx (fake);
    char err [256];
    assert_int_equal (keys_generate (ctxfake_dir (fake), node, false, NULL,
                                     key, err, sizeof err), 0);
    proto_msg_t *hello = ctxfake_hello_new (node, "host", "instance-1");
    const auth_key_t *changed = NULL;
    const char *code = NULL;
    char why [256];
    assert_int_equal (auth_agent_check_relayed (ctx->auth, key, NULL, hello,
                                                ctx_wall_ms (ctx), &changed,
                                                &code, why, sizeof why), -1);
    assert_string_equal (code, "pending");
    assert_non_null (changed);
    auth_key_save (ctx->auth, ctx_txn (ctx), changed);
    assert_int_equal (ctxfake_commit (fake), 0);
    proto_msg_destroy (&hello);
    char status [32];
    assert_string_equal (s_stored_key_status (fake, key, status,
                                              sizeof status), "pending");
}

//  ---------------------------------------------------------------------

//  A job submitted in the failed pass is gone from the scheduler; one
//  committed before stays live.
static void
test_req_undo_job_submit (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_register (fake, "web-01");
    char kept [JOB_ID_LEN + 1], undone [JOB_ID_LEN + 1];
    s_submit (fake, "node:web-01", "write", kept, true);
    s_submit (fake, "node:web-01", "write", undone, false);
    assert_non_null (sched_job (ctx->sched, undone));
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_JOBS), 1);
    s_rebuild (self);
    assert_null (sched_job (ctx->sched, undone));
    assert_non_null (sched_job (ctx->sched, kept));
    assert_int_equal (sched_pending_count (ctx->sched)
                      + sched_running_count (ctx->sched), 1);
}

//  A cancel in the failed pass: the job is live again, as stored.
static void
test_req_undo_job_cancel (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_register (fake, "web-01");
    char job [JOB_ID_LEN + 1];
    s_submit (fake, "node:web-01", "write", job, true);
    pw_t *writer = ctxfake_begin (fake, "job.cancel", 1);
    pw_str (writer, "job");
    pw_str (writer, job);
    s_aborted (fake);
    const sched_job_t *cancelled = sched_job (ctx->sched, job);
    assert_true (!cancelled || sched_job_status_final (cancelled->status));
    s_rebuild (self);
    const sched_job_t *back = sched_job (ctx->sched, job);
    assert_non_null (back);
    assert_false (sched_job_status_final (back->status));
}

//  node.drain in the failed pass: the node takes work again.
static void
test_req_undo_node_drain (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    registry_node_t *node = ctxfake_register (fake, "web-01");
    pw_t *writer = ctxfake_begin (fake, "node.drain", 1);
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    s_aborted (fake);
    assert_true (node->drained);
    s_rebuild (self);
    assert_false (node->drained);
    assert_int_equal (registry_drained_count (ctx->registry), 0);
}

//  broker.drain in the failed pass: the broker serves again and its
//  scheduler is not paused.
static void
test_req_undo_broker_drain (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_begin (fake, "broker.drain", 0);
    s_aborted (fake);
    assert_true (ctx->state.maintenance);
    assert_true (sched_paused (ctx->sched));
    s_rebuild (self);
    assert_false (ctx->state.maintenance);
    assert_false (sched_paused (ctx->sched));
    assert_string_equal (ctx_broker_state (ctx), "serving");
}

//  key.accept in the failed pass. The admin is told "nothing was
//  changed" (storage_error), and the store still holds the key pending,
//  but auth's key records (broker/auth.c, kept in memory and read only by
//  auth_new) are not read back by broker_rebuild (broker_restore.c): the
//  key stays accepted in memory, its agent is let in, and its next hello
//  binds it and saves it as accepted (s_agent_hello's changed record).
static void
test_req_undo_key_accept (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE];
    s_pending_agent (fake, "web-01", key);
    pw_t *writer = ctxfake_begin (fake, "key.accept", 1);
    pw_str (writer, "key");
    pw_str (writer, key);
    s_aborted (fake);
    s_rebuild (self);
    char status [32];
    assert_string_equal (s_stored_key_status (fake, key, status,
                                              sizeof status), "pending");
    const auth_key_t *record = auth_key (ctx->auth, key);
    assert_non_null (record);
    assert_string_equal (auth_key_status_name (record->status), "pending");
}

//  key.reject in the failed pass: the same, the other way. The store holds
//  the key accepted; memory keeps it rejected until the broker restarts,
//  when it is accepted again.
static void
test_req_undo_key_reject (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    char key [KEYS_TEXT_SIZE];
    s_pending_agent (fake, "web-01", key);
    pw_t *writer = ctxfake_begin (fake, "key.accept", 1);
    pw_str (writer, "key");
    pw_str (writer, key);
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    writer = ctxfake_begin (fake, "key.reject", 1);
    pw_str (writer, "key");
    pw_str (writer, key);
    s_aborted (fake);
    s_rebuild (self);
    char status [32];
    assert_string_equal (s_stored_key_status (fake, key, status,
                                              sizeof status), "accepted");
    assert_string_equal (auth_key_status_name (auth_key (ctx->auth,
                                                         key)->status),
                         "accepted");
}

//  The scheduler broker_rebuild makes keeps the configured concurrency
//  limits (`limits:`). It does not: broker_rebuild (broker_restore.c)
//  calls sched_new and sched_set_paused only, where broker_new
//  (broker.c) also calls sched_set_limits, sched_set_unavailable and
//  sched_set_fleet; after one failed commit every limit is gone until
//  the broker restarts.
static void
test_req_undo_keeps_limits (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    sched_limit_use_t uses [4];
    assert_int_equal (sched_limits (ctx->sched, uses, 4), 1);
    ctxfake_begin (fake, "broker.drain", 0);
    s_aborted (fake);
    s_rebuild (self);
    assert_int_equal (sched_limits (ctx->sched, uses, 4), 1);
    assert_string_equal (uses [0].pattern, "test.write");
    assert_int_equal (uses [0].max, 1);
}

//  The same for sched_set_unavailable: after a rebuild a job no longer
//  says which nodes of its target it did not run on (a drained one).
static void
test_req_undo_keeps_unavailable (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_register (fake, "web-01");
    ctxfake_register (fake, "web-02");
    pw_t *writer = ctxfake_begin (fake, "node.drain", 1);
    pw_str (writer, "node");
    pw_str (writer, "web-02");
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    char job [JOB_ID_LEN + 1];
    s_submit (fake, "all", "echo", job, true);
    assert_int_equal (sched_job (ctx->sched, job)->not_run_count, 1);
    ctxfake_begin (fake, "broker.drain", 0);
    s_aborted (fake);
    s_rebuild (self);
    ctxfake_begin (fake, "broker.resume", 0);
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    s_submit (fake, "all", "echo", job, true);
    assert_int_equal (sched_job (ctx->sched, job)->not_run_count, 1);
}

//  schedule.add in the failed pass: the store has no such schedule, but
//  ctx->schedules keeps it (broker_rebuild does not read the schedules
//  back), so it fires and starts jobs that no record stands for.
static void
test_req_undo_schedule_add (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_t *fake = self->fake;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_register (fake, "web-01");
    pw_t *writer = ctxfake_begin (fake, "schedule.add", 3);
    pw_str (writer, "name");
    pw_str (writer, "nightly");
    pw_str (writer, "every");
    pw_str (writer, "1h");
    ctxfake_write_job (writer, "node:web-01", "echo");
    s_aborted (fake);
    s_rebuild (self);
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_SCHEDULES), 0);
    assert_null (zhashx_lookup (ctx->schedules, "nightly"));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_req_undo_job_submit, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_job_cancel, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_node_drain, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_broker_drain,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_key_accept, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_key_reject, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_keeps_limits,
                                         s_setup_limits, s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_keeps_unavailable,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_req_undo_schedule_add,
                                         s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
