/*  =========================================================================
    test_requests - the one request table (broker/requests.h) against the
    protocol's closed set of request types and the HTTP face's routes:
    every type has exactly one row, a role and a handler; no row serves a
    type the protocol does not know; every REST route names a row; and the
    roles and the reply cache's "mutates" column say what the docs say.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../broker/http.h"
#include "../broker/requests.h"

static size_t
s_rows_of (const char *type)
{
    size_t count = 0, found = 0;
    const requests_row_t *rows = requests_rows (&count);
    for (size_t index = 0; index < count; index++)
        if (strcmp (rows [index].type, type) == 0)
            found++;
    return found;
}

static bool
s_protocol_knows (const char *type)
{
    const char *known;
    for (size_t index = 0; (known = proto_request_type_at (index)); index++)
        if (strcmp (known, type) == 0)
            return true;
    return false;
}

static void
test_requests_every_type_has_one_row (void **state)
{
    const char *type;
    size_t types = 0;
    for (size_t index = 0; (type = proto_request_type_at (index)); index++) {
        types++;
        if (s_rows_of (type) != 1)
            fail_msg ("request type %s has %zu rows in the request table",
                      type, s_rows_of (type));
        const requests_row_t *row = requests_find (type);
        assert_non_null (row);
        assert_non_null (row->handler);
        assert_true (row->role == AUTH_ROLE_VIEWER
                     || row->role == AUTH_ROLE_OPERATOR
                     || row->role == AUTH_ROLE_ADMIN);
    }
    size_t count = 0;
    requests_rows (&count);
    assert_int_equal (count, types);
    assert_true (types >= 40);
}

static void
test_requests_no_row_outside_the_protocol (void **state)
{
    size_t count = 0;
    const requests_row_t *rows = requests_rows (&count);
    for (size_t index = 0; index < count; index++)
        if (!s_protocol_knows (rows [index].type))
            fail_msg ("row %s is no request type of the protocol",
                      rows [index].type);
    assert_null (requests_find ("job.nonesuch"));
    assert_null (requests_find (""));
}

static void
test_requests_rest_routes_name_rows (void **state)
{
    const char *method, *path;
    size_t typed = 0;
    for (size_t index = 0; http_route_at (index, &method, &path); index++) {
        const char *type = http_route_type (index);
        if (!type)
            continue;
        typed++;
        if (!requests_find (type))
            fail_msg ("%s %s serves %s, which has no row", method, path, type);
    }
    assert_true (typed >= 30);
    assert_null (http_route_type (100000));
}

static void
test_requests_roles (void **state)
{
    //  Reads are a viewer's; a viewer may also submit query actions (the
    //  row's check refuses modify actions for it)
    const char *viewer [] = {"status", "node.list", "job.get", "job.list",
                             "job.submit", "job.check", "job.watch",
                             "whoami", "metrics.get", "relay.list",
                             "schedule.list", "dlq.list"};
    for (size_t index = 0; index < sizeof viewer / sizeof viewer [0]; index++)
        assert_int_equal (requests_find (viewer [index])->role,
                          AUTH_ROLE_VIEWER);
    const char *operator [] = {"job.cancel", "job.retry", "job.delete",
                               "dlq.retry", "dlq.purge", "schedule.add",
                               "schedule.run"};
    for (size_t index = 0; index < sizeof operator / sizeof operator [0];
         index++)
        assert_int_equal (requests_find (operator [index])->role,
                          AUTH_ROLE_OPERATOR);
    const char *admin [] = {"key.list", "key.accept", "key.reject",
                            "key.delete", "token.add", "token.list",
                            "token.revoke", "node.drain", "node.resume",
                            "broker.drain", "broker.resume", "broker.rekey"};
    for (size_t index = 0; index < sizeof admin / sizeof admin [0]; index++)
        assert_int_equal (requests_find (admin [index])->role,
                          AUTH_ROLE_ADMIN);
    //  The submit's own check (allowlist, query-only viewers) is the only one
    assert_non_null (requests_find ("job.submit")->refused);
    size_t count = 0;
    const requests_row_t *rows = requests_rows (&count);
    for (size_t index = 0; index < count; index++)
        if (strcmp (rows [index].type, "job.submit") != 0)
            assert_null (rows [index].refused);
}

static void
test_requests_audited (void **state)
{
    //  What changes anything is in the audit trail: every row kept for
    //  retries, and the admin's changes of keys, tokens, nodes and the
    //  broker; reads are not, audit.list itself least of all
    const char *audited [] = {"node.drain", "node.resume", "broker.drain",
                              "broker.resume", "key.accept", "key.reject",
                              "key.delete", "token.add", "token.revoke",
                              "notify.retry", "broker.rekey", "blob.delete"};
    for (size_t index = 0; index < sizeof audited / sizeof audited [0];
         index++)
        assert_true (requests_find (audited [index])->audited);
    size_t count = 0, found = 0;
    const requests_row_t *rows = requests_rows (&count);
    for (size_t index = 0; index < count; index++) {
        if (rows [index].mutates)
            assert_true (rows [index].audited);
        if (rows [index].audited)
            found++;
    }
    assert_int_equal (found, 24);
    assert_false (requests_find ("audit.list")->audited);
    assert_false (requests_find ("broker.keys")->audited);
    assert_false (requests_find ("notify.list")->audited);
    assert_int_equal (requests_find ("notify.list")->role, AUTH_ROLE_ADMIN);
    assert_int_equal (requests_find ("notify.retry")->role, AUTH_ROLE_ADMIN);
    assert_false (requests_find ("job.get")->audited);
    assert_int_equal (requests_find ("audit.list")->role, AUTH_ROLE_ADMIN);
}

static void
test_requests_mutations (void **state)
{
    //  What changes jobs or schedules is kept for retries by request id
    const char *mutates [] = {"job.submit", "job.cancel", "job.delete",
                              "job.retry", "dlq.retry", "dlq.purge",
                              "schedule.add", "schedule.pause",
                              "schedule.resume", "schedule.delete",
                              "schedule.run", "notify.retry", "blob.delete"};
    size_t expected = sizeof mutates / sizeof mutates [0];
    for (size_t index = 0; index < expected; index++)
        assert_true (requests_find (mutates [index])->mutates);
    size_t count = 0, found = 0;
    const requests_row_t *rows = requests_rows (&count);
    for (size_t index = 0; index < count; index++) {
        found += rows [index].mutates;
        //  Reads never are
        const char *dot = strrchr (rows [index].type, '.');
        if (dot && (strcmp (dot, ".get") == 0 || strcmp (dot, ".list") == 0))
            assert_false (rows [index].mutates);
    }
    assert_int_equal (found, expected);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_requests_every_type_has_one_row),
        cmocka_unit_test (test_requests_no_row_outside_the_protocol),
        cmocka_unit_test (test_requests_rest_routes_name_rows),
        cmocka_unit_test (test_requests_roles),
        cmocka_unit_test (test_requests_mutations),
        cmocka_unit_test (test_requests_audited),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
