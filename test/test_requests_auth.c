/*  =========================================================================
    test_requests_auth - who may send what, through the request table
    (broker/requests.h) over a real context (test/lib/ctxfake.h): every
    row against every role, what a viewer, an operator and an admin may
    run, the refusal's code and words (the role needed, the caller's),
    unknown types and unknown or revoked keys; a refusal changes nothing.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "lib/ctxfake.h"

static int
s_setup (void **state)
{
    *state = ctxfake_new (NULL, NULL);
    return *state ? 0 : -1;
}

static int
s_teardown (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctxfake_destroy (&fake);
    return 0;
}

static int
s_insecure (broker_config_t *config, const char *dir, void *arg)
{
    config->auth.insecure = true;
    return 0;
}

static int
s_setup_insecure (void **state)
{
    *state = ctxfake_new (s_insecure, NULL);
    return *state ? 0 : -1;
}

//  Asserts that DOC is the error CODE whose message holds TEXT (may be
//  NULL), then destroys DOC.
static void
s_assert_error (pv_doc_t *doc, const char *code, const char *text)
{
    assert_non_null (doc);
    assert_string_equal (ctxfake_reply_code (doc), code);
    if (text && !strstr (ctxfake_reply_message (doc), text))
        fail_msg ("'%s' does not say '%s'", ctxfake_reply_message (doc),
                  text);
    pv_doc_destroy (&doc);
}

//  Asserts that DOC is an ok reply, then destroys DOC.
static void
s_assert_ok (pv_doc_t *doc)
{
    assert_non_null (doc);
    if (strcmp (ctxfake_reply_code (doc), "ok") != 0)
        fail_msg ("%s: %s", ctxfake_reply_code (doc),
                  ctxfake_reply_message (doc));
    pv_doc_destroy (&doc);
}

//  A request {v, type: TYPE, id} decoded as the server decodes a frame,
//  except that the type is not checked against the protocol's set (the
//  table is what is tested). Caller destroys.
static proto_request_t *
s_request (const char *type)
{
    pw_t *writer = pw_new ();
    proto_request_begin (writer, type, "req-1", 0);
    proto_request_t *request = (proto_request_t *) calloc (1, sizeof *request);
    assert_non_null (request);
    assert_int_equal (pv_doc_decode (pw_data (writer), pw_size (writer),
                                     &request->doc, NULL, 0), 0);
    pw_destroy (&writer);
    request->body = pv_doc_root (request->doc);
    request->type = strdup (type);
    request->id = strdup ("req-1");
    return request;
}

//  requests_admit of REQUEST from the ZeroMQ client with KEY; the reply
//  (when refused) into REPLY.
static const requests_row_t *
s_admit (ctx_t *ctx, const proto_request_t *request, const char *key,
         pw_t *reply)
{
    auth_caller_t caller;
    memset (&caller, 0, sizeof caller);
    caller.key = key;
    req_call_t call;
    memset (&call, 0, sizeof call);
    call.ctx = ctx;
    call.request = request;
    call.caller = &caller;
    call.reply = reply;
    pw_reset (reply);
    return requests_admit (&call);
}

//  Every row, from every role: admitted exactly when the role is at
//  least the row's; refused as forbidden, naming the role it needs and
//  the caller's, with nothing written and the refusal counted.
static void
test_requests_auth_every_row_every_role (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    size_t count = 0;
    const requests_row_t *rows = requests_rows (&count);
    pw_t *reply = pw_new ();
    uint64_t digest = ctxfake_store_digest (fake);
    size_t refused = 0;
    for (size_t index = 0; index < count; index++) {
        proto_request_t *request = s_request (rows [index].type);
        for (auth_role_t role = AUTH_ROLE_VIEWER; role <= AUTH_ROLE_ADMIN;
             role++) {
            const requests_row_t *row
                = s_admit (ctx, request, ctxfake_client_key (fake, role),
                           reply);
            if (role >= rows [index].role) {
                if (row != &rows [index])
                    fail_msg ("%s was refused to %s", rows [index].type,
                              auth_role_name (role));
                assert_int_equal (pw_size (reply), 0);
                continue;
            }
            if (row)
                fail_msg ("%s (needs %s) was admitted from %s",
                          rows [index].type,
                          auth_role_name (rows [index].role),
                          auth_role_name (role));
            refused++;
            pv_doc_t *doc = NULL;
            assert_int_equal (pv_doc_decode (pw_data (reply), pw_size (reply),
                                             &doc, NULL, 0), 0);
            char words [200];
            snprintf (words, sizeof words, "%s needs the %s role; %s has the "
                      "%s role", rows [index].type,
                      auth_role_name (rows [index].role),
                      auth_role_name (role), auth_role_name (role));
            s_assert_error (doc, PROTO_ERR_FORBIDDEN, words);
        }
        proto_request_destroy (&request);
    }
    pw_destroy (&reply);
    assert_true (refused > 0);
    assert_int_equal (auth_counters (ctx->auth)->forbidden, refused);
    assert_false (ctxfake_pass_open (fake));
    assert_true (ctxfake_store_digest (fake) == digest);
}

//  A viewer reads: node.list, status, key-less reads all answer ok.
static void
test_requests_auth_viewer_reads (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctxfake_register (fake, "web-01");
    ctxfake_begin (fake, "node.list", 0);
    pv_doc_t *doc = ctxfake_call_as (fake, AUTH_ROLE_VIEWER);
    const pv_t *nodes = pv_map_get (ctxfake_reply_data (doc), "nodes");
    assert_int_equal (pv_size (nodes), 1);
    s_assert_ok (doc);
    ctxfake_begin (fake, "status", 0);
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_VIEWER));
    pw_t *writer = ctxfake_begin (fake, "node.get", 1);
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_VIEWER));
    //  job.submit of a query action is a viewer's, too
    writer = ctxfake_begin (fake, "job.submit", 1);
    ctxfake_write_job (writer, "node:web-01", "echo");
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_VIEWER));
}

//  A viewer may not change anything: a modify action, a cancel, a drain
//  or a key change is forbidden with the role it needs, and the store
//  and the broker's state stay as they were.
static void
test_requests_auth_viewer_refused_changes (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_register (fake, "web-01");
    uint64_t digest = ctxfake_store_digest (fake);
    pw_t *writer = ctxfake_begin (fake, "job.submit", 1);
    ctxfake_write_job (writer, "node:web-01", "write");
    s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_VIEWER),
                    PROTO_ERR_FORBIDDEN, "modify");
    writer = ctxfake_begin (fake, "job.cancel", 1);
    pw_str (writer, "job");
    pw_str (writer, "J-0000000000000-0000");
    s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_VIEWER),
                    PROTO_ERR_FORBIDDEN,
                    "job.cancel needs the operator role; viewer has the "
                    "viewer role");
    ctxfake_begin (fake, "broker.drain", 0);
    s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_VIEWER),
                    PROTO_ERR_FORBIDDEN, "broker.drain needs the admin role");
    writer = ctxfake_begin (fake, "node.drain", 1);
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_VIEWER),
                    PROTO_ERR_FORBIDDEN, "node.drain needs the admin role");
    writer = ctxfake_begin (fake, "key.accept", 1);
    pw_str (writer, "key");
    pw_str (writer, ctxfake_client_key (fake, AUTH_ROLE_VIEWER));
    s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_VIEWER),
                    PROTO_ERR_FORBIDDEN, "key.accept needs the admin role");
    assert_int_equal (auth_counters (ctx->auth)->forbidden, 5);
    assert_false (ctx->state.maintenance);
    assert_false (registry_lookup (ctx->registry, "web-01")->drained);
    assert_int_equal (sched_pending_count (ctx->sched)
                      + sched_running_count (ctx->sched), 0);
    assert_true (ctxfake_store_digest (fake) == digest);
}

//  An operator submits and cancels jobs, but may not manage keys,
//  tokens, nodes or the broker.
static void
test_requests_auth_operator_jobs_not_keys (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_register (fake, "web-01");
    pw_t *writer = ctxfake_begin (fake, "job.submit", 1);
    ctxfake_write_job (writer, "node:web-01", "write");
    pv_doc_t *doc = ctxfake_call_as (fake, AUTH_ROLE_OPERATOR);
    char *job = pv_strdup (pv_map_get (ctxfake_reply_data (doc), "job"));
    s_assert_ok (doc);
    assert_non_null (job);
    assert_non_null (sched_job (ctx->sched, job));
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_JOBS), 1);
    writer = ctxfake_begin (fake, "job.cancel", 1);
    pw_str (writer, "job");
    pw_str (writer, job);
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_OPERATOR));
    free (job);
    const char *admin_only [] = {"key.list", "token.list", "broker.drain"};
    for (size_t index = 0; index < 3; index++) {
        ctxfake_begin (fake, admin_only [index], 0);
        char words [120];
        snprintf (words, sizeof words, "%s needs the admin role; operator "
                  "has the operator role", admin_only [index]);
        s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_OPERATOR),
                        PROTO_ERR_FORBIDDEN, words);
    }
    writer = ctxfake_begin (fake, "key.reject", 1);
    pw_str (writer, "key");
    pw_str (writer, ctxfake_client_key (fake, AUTH_ROLE_VIEWER));
    s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_OPERATOR),
                    PROTO_ERR_FORBIDDEN, "key.reject needs the admin role");
    assert_null (auth_key (ctx->auth,
                           ctxfake_client_key (fake, AUTH_ROLE_VIEWER)));
    assert_int_equal (ctxfake_store_count (fake, STORE_DB_KEYS), 0);
    assert_false (ctx->state.maintenance);
}

//  An admin does all: keys, the broker's drain, jobs.
static void
test_requests_auth_admin_does_all (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_register (fake, "web-01");
    ctxfake_begin (fake, "key.list", 0);
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    pw_t *writer = ctxfake_begin (fake, "job.submit", 1);
    ctxfake_write_job (writer, "node:web-01", "write");
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    writer = ctxfake_begin (fake, "node.drain", 1);
    pw_str (writer, "node");
    pw_str (writer, "web-01");
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    assert_true (registry_lookup (ctx->registry, "web-01")->drained);
    ctxfake_begin (fake, "broker.drain", 0);
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    assert_true (ctx->state.maintenance);
    assert_int_equal (auth_counters (ctx->auth)->forbidden, 0);
}

//  A type the table lacks is refused as unknown_type, naming it, by the
//  table (requests_admit) and, before it, by the decoder.
static void
test_requests_auth_unknown_type (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    assert_null (requests_find ("job.frobnicate"));
    proto_request_t *request = s_request ("job.frobnicate");
    pw_t *reply = pw_new ();
    assert_null (s_admit (ctx, request,
                          ctxfake_client_key (fake, AUTH_ROLE_ADMIN), reply));
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (reply), pw_size (reply), &doc,
                                     NULL, 0), 0);
    s_assert_error (doc, PROTO_ERR_UNKNOWN_TYPE, "'job.frobnicate'");
    //  Identified first: an unknown key hears unauthorized, not the type
    assert_null (s_admit (ctx, request, NULL, reply));
    assert_int_equal (pv_doc_decode (pw_data (reply), pw_size (reply), &doc,
                                     NULL, 0), 0);
    s_assert_error (doc, PROTO_ERR_UNAUTHORIZED, NULL);
    pw_destroy (&reply);
    proto_request_destroy (&request);
    const requests_row_t *row = (const requests_row_t *) &row;
    ctxfake_begin (fake, "job.frobnicate", 0);
    auth_caller_t caller;
    memset (&caller, 0, sizeof caller);
    caller.key = ctxfake_client_key (fake, AUTH_ROLE_ADMIN);
    s_assert_error (ctxfake_call (fake, &caller, true, &row),
                    PROTO_ERR_UNKNOWN_TYPE, "job.frobnicate");
    assert_null (row);
}

//  A key the config does not know, no key at all, and a client key an
//  admin revoked (key.reject) are unauthorized, whatever the request.
static void
test_requests_auth_unknown_and_revoked_keys (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_begin (fake, "status", 0);
    s_assert_error (ctxfake_call (fake, NULL, true, NULL),
                    PROTO_ERR_UNAUTHORIZED, "not known to the broker");
    auth_caller_t stranger;
    memset (&stranger, 0, sizeof stranger);
    stranger.key = RELAYS_SELF;
    ctxfake_begin (fake, "status", 0);
    s_assert_error (ctxfake_call (fake, &stranger, true, NULL),
                    PROTO_ERR_UNAUTHORIZED, NULL);
    assert_int_equal (auth_counters (ctx->auth)->unauthorized, 2);
    pw_t *writer = ctxfake_begin (fake, "key.reject", 1);
    pw_str (writer, "key");
    pw_str (writer, ctxfake_client_key (fake, AUTH_ROLE_OPERATOR));
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    ctxfake_begin (fake, "status", 0);
    s_assert_error (ctxfake_call_as (fake, AUTH_ROLE_OPERATOR),
                    PROTO_ERR_UNAUTHORIZED, "revoked");
    //  Lifted by key.accept: the role comes back
    writer = ctxfake_begin (fake, "key.accept", 1);
    pw_str (writer, "key");
    pw_str (writer, ctxfake_client_key (fake, AUTH_ROLE_OPERATOR));
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_ADMIN));
    ctxfake_begin (fake, "status", 0);
    s_assert_ok (ctxfake_call_as (fake, AUTH_ROLE_OPERATOR));
}

//  Insecure: every ZeroMQ client is admin, whatever key it has or not;
//  the HTTP face still needs a token.
static void
test_requests_auth_insecure_is_admin (void **state)
{
    ctxfake_t *fake = (ctxfake_t *) *state;
    ctx_t *ctx = ctxfake_ctx (fake);
    ctxfake_begin (fake, "broker.drain", 0);
    s_assert_ok (ctxfake_call (fake, NULL, true, NULL));
    assert_true (ctx->state.maintenance);
    auth_caller_t http;
    memset (&http, 0, sizeof http);
    http.http = true;
    ctxfake_begin (fake, "status", 0);
    s_assert_error (ctxfake_call (fake, &http, true, NULL),
                    PROTO_ERR_UNAUTHORIZED, "needs a token");
    assert_int_equal (auth_counters (ctx->auth)->http_unauthorized, 1);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (
            test_requests_auth_every_row_every_role, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_requests_auth_viewer_reads,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_requests_auth_viewer_refused_changes, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_requests_auth_operator_jobs_not_keys, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_requests_auth_admin_does_all,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_requests_auth_unknown_type,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_requests_auth_unknown_and_revoked_keys, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown (test_requests_auth_insecure_is_admin,
                                         s_setup_insecure, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
