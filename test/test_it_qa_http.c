/*  =========================================================================
    test_it_qa_http - the broker's HTTP face against hostile bytes sent
    over a raw socket: paths and query values that are not UTF-8, bodies
    nested deep or holding NUL, numbers past 64 bits; every answer must
    be a JSON error {code, message, details} with the right status, and
    the broker must keep answering
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "../proto/proto.h"
#include "lib/harness.h"

typedef struct {
    grid_t grid;                 //  The broker
    int port;                    //  Its HTTP port
    char token [128];            //  An operator's token
} s_fixture_t;

//  An HTTP answer read off a raw socket.
typedef struct {
    int status;                  //  0 when there was none
    json_t *json;                //  The body as JSON, or NULL
    char raw [8192];             //  The answer as it came (cut)
} s_answer_t;

static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_int_equal (getsockname (fd, (struct sockaddr *) &addr, &len), 0);
    close (fd);
    return ntohs (addr.sin_port);
}

//  Sends the request REQUEST (LEN bytes, "Connection: close" in it) and
//  reads the answer until the broker closes, within ten seconds.
static void
s_raw (s_fixture_t *f, const char *request, size_t len, s_answer_t *answer)
{
    memset (answer, 0, sizeof *answer);
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    addr.sin_port = htons ((uint16_t) f->port);
    assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_true (send (fd, request, len, MSG_NOSIGNAL) == (ssize_t) len);
    size_t used = 0;
    long long deadline = grid_now_ms () + 10000;
    while (used < sizeof answer->raw - 1 && grid_now_ms () < deadline) {
        struct pollfd item = {fd, POLLIN, 0};
        if (poll (&item, 1, 200) <= 0)
            continue;
        ssize_t got = recv (fd, answer->raw + used,
                            sizeof answer->raw - 1 - used, 0);
        if (got <= 0)
            break;
        used += (size_t) got;
    }
    close (fd);
    answer->raw [used] = 0;
    sscanf (answer->raw, "HTTP/1.1 %d", &answer->status);
    const char *body = strstr (answer->raw, "\r\n\r\n");
    if (body)
        answer->json = json_loads (body + 4, JSON_DISABLE_EOF_CHECK, NULL);
}

//  GET PATH (raw bytes) with the operator's token.
static void
s_get (s_fixture_t *f, const char *method, const char *path,
       s_answer_t *answer)
{
    char request [1024];
    int len = snprintf (request, sizeof request,
                        "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
                        method, path, f->token);
    s_raw (f, request, (size_t) len, answer);
}

//  POST BODY (LEN bytes) to PATH with the operator's token.
static void
s_post (s_fixture_t *f, const char *path, const char *body, size_t len,
        s_answer_t *answer)
{
    size_t size = len + 512;
    char *request = (char *) malloc (size);
    int head = snprintf (request, size,
                         "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         "Authorization: Bearer %s\r\nConnection: close\r\n"
                         "Content-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n",
                         path, f->token, len);
    memcpy (request + head, body, len);
    s_raw (f, request, (size_t) head + len, answer);
    free (request);
}

//  Checks that ANSWER is the JSON error CODE with STATUS: an object
//  with a string code and message and an array of details.
static void
s_expect_error (s_answer_t *answer, int status, const char *code)
{
    if (answer->status != status || !answer->json)
        fprintf (stderr, "answer: %.600s\n", answer->raw);
    assert_int_equal (answer->status, status);
    assert_non_null (answer->json);
    json_t *value = json_object_get (answer->json, "code");
    assert_true (json_is_string (value));
    assert_string_equal (json_string_value (value), code);
    assert_true (json_is_string (json_object_get (answer->json, "message")));
    assert_true (json_is_array (json_object_get (answer->json, "details")));
    json_decref (answer->json);
    answer->json = NULL;
}

static int
s_setup (void **state)
{
    s_fixture_t *fixture = (s_fixture_t *) calloc (1, sizeof (s_fixture_t));
    assert_int_equal (grid_init (&fixture->grid), 0);
    fixture->port = s_free_port ();
    char listen [64];
    snprintf (listen, sizeof listen, "127.0.0.1:%d", fixture->port);
    const char *extra [] = {"--http", listen, NULL};
    assert_int_equal (grid_start_broker (&fixture->grid, extra), 0);
    pv_doc_t *reply = grid_call (&fixture->grid, "token.add", "name", "qa",
                                 "role", "operator", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    char *text = pv_strdup (pv_map_get (data, "token"));
    assert_non_null (text);
    snprintf (fixture->token, sizeof fixture->token, "%s", text);
    free (text);
    pv_doc_destroy (&reply);
    *state = fixture;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *fixture = (s_fixture_t *) *state;
    grid_stop (&fixture->grid);
    free (fixture);
    return 0;
}

//  ---------------------------------------------------------------------

//  A path or query value whose bytes, once decoded, are not UTF-8 is
//  quoted in the error's message: the answer stays a JSON error
static void
test_qa_http_not_utf8 (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_get (f, "GET", "/api/v1/nope%ff", &answer);
    s_expect_error (&answer, 404, "not_found");
    s_get (f, "GET", "/nope%c3", &answer);
    s_expect_error (&answer, 404, "not_found");
    s_get (f, "PUT", "/api/v1/jobs/%fe%ff", &answer);
    s_expect_error (&answer, 405, "method_not_allowed");
    assert_non_null (strstr (answer.raw, "Allow: "));
    s_get (f, "GET", "/api/v1/jobs?limit=%ff", &answer);
    s_expect_error (&answer, 400, "bad_request");
    //  A long value cut in the middle of a character
    char path [400] = "/api/v1/jobs?limit=1";
    for (int index = 0; index < 60; index++)
        strcat (path, "%c3%a9");
    s_get (f, "GET", path, &answer);
    s_expect_error (&answer, 400, "bad_request");
    //  The same bytes in a job id are named as the path's job
    s_get (f, "GET", "/api/v1/jobs/%ff", &answer);
    s_expect_error (&answer, 400, "bad_request");
    //  And the broker answers as before
    s_get (f, "GET", "/api/v1/status", &answer);
    assert_int_equal (answer.status, 200);
    json_decref (answer.json);
}

//  Bodies a hostile client makes: each one a JSON error, none a crash
static void
test_qa_http_hostile_bodies (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    size_t deep = 100000;
    char *body = (char *) malloc (deep + 1);
    memset (body, '[', deep);
    body [deep] = 0;
    s_post (f, "/api/v1/jobs", body, deep, &answer);
    s_expect_error (&answer, 400, "malformed");
    free (body);
    const char *const bodies [] = {
        "{\"target\": \"all\", \"priority\": 99999999999999999999999}",
        "{\"target\": \"all\", \"priority\": 1e999}",
        "{\"target\": \"a\\u0000b\", \"tasks\": []}",
        "{\"tar\\u0000get\": \"all\", \"tasks\": []}",
        "{\"target\": \"\\ud800\", \"tasks\": []}",
        "{\"target\": \"\xff\xfe\", \"tasks\": []}",
        "{\"target\": \"all\", \"target\": \"all\"}",
        "{\"target\":",
    };
    for (size_t index = 0; index < sizeof bodies / sizeof bodies [0];
         index++) {
        s_post (f, "/api/v1/jobs", bodies [index], strlen (bodies [index]),
                &answer);
        s_expect_error (&answer, 400, "malformed");
    }
    //  A raw NUL inside a string
    s_post (f, "/api/v1/jobs", "{\"target\": \"a\0b\"}", 17, &answer);
    s_expect_error (&answer, 400, "malformed");
    //  Numbers that fit JSON but not the field
    const char *range = "{\"target\": \"all\", \"priority\": "
                        "9223372036854775807, \"tasks\": [{\"backend\": "
                        "\"test\", \"action\": \"echo\", \"params\": "
                        "{\"msg\": \"x\"}}]}";
    s_post (f, "/api/v1/jobs", range, strlen (range), &answer);
    s_expect_error (&answer, 400, "invalid_job");
    s_get (f, "GET", "/api/v1/status", &answer);
    assert_int_equal (answer.status, 200);
    json_decref (answer.json);
}

//  The event stream refuses a query parameter it does not take, as the
//  other routes do, before it looks for the job
static void
test_qa_http_stream_query (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_get (f, "GET", "/api/v1/jobs/j-000000000000-0000/stream?bogus=1",
           &answer);
    s_expect_error (&answer, 400, "bad_request");
    s_get (f, "GET", "/api/v1/jobs/j-000000000000-0000/stream?after=1&after=2",
           &answer);
    s_expect_error (&answer, 400, "bad_request");
    s_get (f, "GET", "/api/v1/jobs/j-000000000000-0000/stream?after=-1",
           &answer);
    s_expect_error (&answer, 400, "bad_request");
    s_get (f, "GET", "/api/v1/jobs/j-000000000000-0000/stream?after=1",
           &answer);
    s_expect_error (&answer, 404, "not_found");
}

//  An escaped NUL does not cut a path or a value short: the request is
//  refused as written, not run as its part before the NUL
static void
test_qa_http_escaped_nul (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_get (f, "GET", "/api/v1/jobs%00/anything", &answer);
    s_expect_error (&answer, 404, "not_found");
    s_get (f, "GET", "/api/v1/status%00", &answer);
    s_expect_error (&answer, 404, "not_found");
    s_get (f, "GET", "/index.html%00.js", &answer);
    s_expect_error (&answer, 404, "not_found");
    s_get (f, "GET", "/api/v1/jobs?limit=1%00x", &answer);
    s_expect_error (&answer, 400, "bad_request");
    //  Other escapes still decode
    s_get (f, "GET", "/api/v1/st%61tus", &answer);
    assert_int_equal (answer.status, 200);
    json_decref (answer.json);
    s_get (f, "GET", "/api/v1/jobs?limit=%31", &answer);
    assert_int_equal (answer.status, 200);
    json_decref (answer.json);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_qa_http_not_utf8),
        cmocka_unit_test (test_qa_http_hostile_bodies),
        cmocka_unit_test (test_qa_http_stream_query),
        cmocka_unit_test (test_qa_http_escaped_nul),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
