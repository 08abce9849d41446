/*  =========================================================================
    test_it_http - the broker's HTTP face through a real gridbroker and
    gridagent, with curl as the client: tokens and roles, every route,
    errors as JSON, bad and oversized bodies, the job event stream,
    /healthz and /readyz, TLS, the OpenAPI description against the
    routes, and hostile clients (one that never reads, one that sends
    half a request and stalls) that must not slow anyone else down
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "../broker/http.h"
#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000

typedef struct {
    grid_t grid;                 //  Broker and agent
    int port;                    //  The HTTP port
    char base [64];              //  http://127.0.0.1:PORT
    char admin [128];            //  Tokens of each role
    char operator [128];
    char viewer [128];
} s_fixture_t;

//  An HTTP answer.
typedef struct {
    int status;                  //  0 when curl failed
    char *body;                  //  The body (owned)
    char *headers;               //  The headers (owned)
    json_t *json;                //  The body as JSON, or NULL
} s_answer_t;

static void
s_answer_clear (s_answer_t *answer)
{
    free (answer->body);
    free (answer->headers);
    json_decref (answer->json);
    memset (answer, 0, sizeof *answer);
}

//  A free TCP port on loopback.
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

//  Runs ARGV (argv [0] found in PATH) with stdout into OUT_PATH; returns
//  its exit code, or -1 when it ran past TIMEOUT_MS (it is killed).
static int
s_exec (const char *const *argv, const char *out_path, int timeout_ms)
{
    pid_t pid = fork ();
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2 (out, 1);
        close (out);
        int null_fd = open ("/dev/null", O_RDWR);
        dup2 (null_fd, 0);
        dup2 (null_fd, 2);
        close (null_fd);
        execvp (argv [0], (char *const *) argv);
        _exit (127);
    }
    long long deadline = grid_now_ms () + timeout_ms;
    int status = 0;
    while (true) {
        if (waitpid (pid, &status, WNOHANG) == pid)
            return WIFEXITED (status) ? WEXITSTATUS (status) : -1;
        if (grid_now_ms () > deadline) {
            kill (pid, SIGKILL);
            waitpid (pid, NULL, 0);
            return -1;
        }
        zclock_sleep (5);
    }
}

//  curl METHOD BASE+PATH with TOKEN (NULL: none) and BODY (NULL: none),
//  and the extra curl arguments that follow (NULL-terminated).
static void
s_curl (const char *base, s_answer_t *answer, const char *token,
        const char *method, const char *path, const char *body, ...)
{
    static int seq;
    char dir [] = "/tmp/grid-http-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char out [64], head [64], status [64], data [64], url [512], auth [300];
    snprintf (out, sizeof out, "%s/body", dir);
    snprintf (head, sizeof head, "%s/head", dir);
    snprintf (status, sizeof status, "%s/status", dir);
    snprintf (data, sizeof data, "%s/data", dir);
    snprintf (url, sizeof url, "%s%s", base, path);
    const char *argv [48] = {"curl", "-s", "-o", out, "-D", head, "-w",
                             "%{http_code}", "-X", method, "--max-time",
                             "20"};
    size_t argc = 12;
    if (token) {
        snprintf (auth, sizeof auth, "Authorization: Bearer %s", token);
        argv [argc++] = "-H";
        argv [argc++] = auth;
    }
    if (body) {
        FILE *file = fopen (data, "wb");
        fwrite (body, 1, strlen (body), file);
        fclose (file);
        argv [argc++] = "-H";
        argv [argc++] = "Content-Type: application/json";
        argv [argc++] = "--data-binary";
        static char at [80];
        snprintf (at, sizeof at, "@%s", data);
        argv [argc++] = at;
    }
    va_list args;
    va_start (args, body);
    const char *arg;
    while ((arg = va_arg (args, const char *)) && argc < 46)
        argv [argc++] = arg;
    va_end (args);
    argv [argc++] = url;
    argv [argc] = NULL;
    memset (answer, 0, sizeof *answer);
    s_exec (argv, status, 25000);
    char *code = grid_slurp (status);
    answer->status = atoi (code);
    free (code);
    answer->body = grid_slurp (out);
    answer->headers = grid_slurp (head);
    answer->json = json_loads (answer->body, 0, NULL);
    char command [200];
    snprintf (command, sizeof command, "rm -rf %s", dir);
    if (system (command) != 0)
        fprintf (stderr, "cannot remove %s\n", dir);
    seq++;
}

static const char *
s_str (json_t *object, const char *key)
{
    return json_string_value (json_object_get (object, key));
}

//  The error code of an answer's JSON body, or "".
static const char *
s_code (const s_answer_t *answer)
{
    const char *code = s_str (answer->json, "code");
    return code ? code : "";
}

//  Makes a token of ROLE over the ZeroMQ API into TOKEN.
static void
s_token (grid_t *grid, const char *name, const char *role, char *token,
         size_t token_len)
{
    pv_doc_t *reply = grid_call (grid, "token.add", "name", name, "role", role,
                                 NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    char *text = pv_strdup (pv_map_get (data, "token"));
    assert_non_null (text);
    assert_int_equal (strncmp (text, "grid_", 5), 0);
    snprintf (token, token_len, "%s", text);
    free (text);
    pv_doc_destroy (&reply);
}

//  A status counter of section dropped.
static int64_t
s_dropped (grid_t *grid, const char *key)
{
    pv_doc_t *reply = grid_call (grid, "status", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t value = -1;
    assert_int_equal (pv_get_int (pv_map_get (pv_map_get (data, "dropped"),
                                              key),
                                  &value),
                      0);
    pv_doc_destroy (&reply);
    return value;
}

//  A figure of status's http section.
static int64_t
s_http_stat (grid_t *grid, const char *key)
{
    pv_doc_t *reply = grid_call (grid, "status", NULL);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (reply, &data));
    int64_t value = -1;
    assert_int_equal (pv_get_int (pv_map_get (pv_map_get (data, "http"), key),
                                  &value),
                      0);
    pv_doc_destroy (&reply);
    return value;
}

static int
s_setup (void **state)
{
    s_fixture_t *fixture = (s_fixture_t *) calloc (1, sizeof (s_fixture_t));
    assert_int_equal (grid_init (&fixture->grid), 0);
    fixture->port = s_free_port ();
    snprintf (fixture->base, sizeof fixture->base, "http://127.0.0.1:%d",
              fixture->port);
    //  The http: section through a config file, flags for the rest
    char config [400], text [300];
    snprintf (config, sizeof config, "%s/broker.yaml", fixture->grid.dir);
    snprintf (text, sizeof text,
              "http:\n  listen: \"127.0.0.1:%d\"\n  max_body: 64KiB\n"
              "  idle_timeout: 2s\n", fixture->port);
    FILE *file = fopen (config, "w");
    fputs (text, file);
    fclose (file);
    const char *extra [] = {"--config", config, NULL};
    assert_int_equal (grid_start_broker (&fixture->grid, extra), 0);
    assert_true (grid_start_agent (&fixture->grid, "w-01", "web", NULL, NULL)
                 >= 0);
    s_token (&fixture->grid, "root", "admin", fixture->admin,
             sizeof fixture->admin);
    s_token (&fixture->grid, "ops", "operator", fixture->operator,
             sizeof fixture->operator);
    s_token (&fixture->grid, "eyes", "viewer", fixture->viewer,
             sizeof fixture->viewer);
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

static void
test_http_health_and_ready (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_curl (f->base, &answer, NULL, "GET", "/healthz", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "status"), "ok");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "GET", "/readyz", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "status"), "ready");
    s_answer_clear (&answer);
    //  Drained: not ready, and it says why
    s_curl (f->base, &answer, f->admin, "POST", "/api/v1/broker/drain", NULL,
            NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "GET", "/readyz", NULL, NULL);
    assert_int_equal (answer.status, 503);
    assert_string_equal (s_str (answer.json, "status"), "not_ready");
    assert_non_null (strstr (answer.body, "maintenance"));
    s_answer_clear (&answer);
    //  A submit now: 503 maintenance
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"all\", \"tasks\": [{\"backend\": \"test\", "
            "\"action\": \"echo\", \"params\": {\"msg\": \"hi\"}}]}",
            NULL);
    assert_int_equal (answer.status, 503);
    assert_string_equal (s_code (&answer), "maintenance");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "POST", "/api/v1/broker/resume",
            NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "state"), "serving");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "GET", "/readyz", NULL, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
}

static void
test_http_tokens_and_roles (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    int64_t refused = s_dropped (&f->grid, "http_unauthorized");
    int64_t forbidden = s_dropped (&f->grid, "http_forbidden");
    //  No token, another scheme, a wrong token: 401, counted
    s_curl (f->base, &answer, NULL, "GET", "/api/v1/status", NULL, NULL);
    assert_int_equal (answer.status, 401);
    assert_string_equal (s_code (&answer), "unauthorized");
    assert_non_null (strstr (answer.headers, "WWW-Authenticate: Bearer"));
    assert_non_null (json_object_get (answer.json, "details"));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "GET", "/api/v1/status", NULL, "-H",
            "Authorization: Basic dXNlcjpwYXNz", NULL);
    assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, "grid_0000000000000000000000000000000000000000"
            "000000000000000000000000", "GET", "/api/v1/status", NULL, NULL);
    assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
    assert_int_equal (s_dropped (&f->grid, "http_unauthorized"), refused + 3);
    //  Who a token is
    s_curl (f->base, &answer, f->operator, "GET", "/api/v1/whoami", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "name"), "ops");
    assert_string_equal (s_str (answer.json, "role"), "operator");
    assert_string_equal (s_str (answer.json, "via"), "token");
    s_answer_clear (&answer);
    //  A broker without ha: is alone, and a viewer may ask
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/cluster", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "role"), "alone");
    assert_int_equal (json_object_size (answer.json), 1);
    s_answer_clear (&answer);
    //  A viewer reads, and may not drain or make tokens: 403, counted
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/status", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_non_null (json_object_get (answer.json, "nodes"));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "POST", "/api/v1/nodes/w-01/drain",
            NULL, NULL);
    assert_int_equal (answer.status, 403);
    assert_string_equal (s_code (&answer), "forbidden");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/tokens",
            "{\"name\": \"x\", \"role\": \"admin\"}", NULL);
    assert_int_equal (answer.status, 403);
    s_answer_clear (&answer);
    assert_int_equal (s_dropped (&f->grid, "http_forbidden"), forbidden + 2);
    //  An admin makes, lists and revokes tokens; only a hash is kept
    s_curl (f->base, &answer, f->admin, "POST", "/api/v1/tokens",
            "{\"name\": \"temp\", \"role\": \"viewer\"}", NULL);
    assert_int_equal (answer.status, 201);
    assert_string_equal (s_str (answer.json, "role"), "viewer");
    char temp [128];
    snprintf (temp, sizeof temp, "%s", s_str (answer.json, "token"));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "POST", "/api/v1/tokens",
            "{\"name\": \"temp\", \"role\": \"viewer\"}", NULL);
    assert_int_equal (answer.status, 409);
    assert_string_equal (s_code (&answer), "conflict");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "POST", "/api/v1/tokens",
            "{\"name\": \"bad\", \"role\": \"king\"}", NULL);
    assert_int_equal (answer.status, 400);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, temp, "GET", "/api/v1/nodes", NULL, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "GET", "/api/v1/tokens", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_null (strstr (answer.body, temp));
    assert_null (strstr (answer.body, "grid_"));
    json_t *tokens = json_object_get (answer.json, "tokens");
    bool listed = false;
    for (size_t index = 0; index < json_array_size (tokens); index++) {
        json_t *token = json_array_get (tokens, index);
        if (strcmp (s_str (token, "name"), "temp") == 0) {
            listed = true;
            assert_non_null (s_str (token, "last_used"));
            assert_non_null (s_str (token, "created"));
        }
    }
    assert_true (listed);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "DELETE", "/api/v1/tokens/temp", NULL,
            NULL);
    assert_int_equal (answer.status, 200);
    assert_true (json_is_true (json_object_get (answer.json, "revoked")));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, temp, "GET", "/api/v1/nodes", NULL, NULL);
    assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "DELETE", "/api/v1/tokens/temp", NULL,
            NULL);
    assert_int_equal (answer.status, 404);
    s_answer_clear (&answer);
    //  The store holds no token text
    char command [600];
    snprintf (command, sizeof command, "grep -rq '%s' %s/broker-data", temp,
              f->grid.dir);
    assert_int_not_equal (system (command), 0);
}

//  As the README has it: gridcli token add, curl with the token, gridcli
//  token revoke.
static void
test_http_gridcli_tokens (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    char *out = NULL, *err = NULL;
    int rc = grid_cli (&f->grid, &out, &err, S_WAIT_MS, "token", "add",
                       "from-cli", "--role", "viewer", NULL);
    assert_int_equal (rc, 0);
    const char *at = strstr (out, "grid_");
    assert_non_null (at);
    char token [128];
    snprintf (token, sizeof token, "%.*s", (int) strspn (at,
              "grid_0123456789abcdef"), at);
    assert_int_equal (strlen (token), 69);
    free (out);
    free (err);
    s_answer_t answer;
    s_curl (f->base, &answer, token, "GET", "/api/v1/whoami", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "name"), "from-cli");
    assert_string_equal (s_str (answer.json, "role"), "viewer");
    s_answer_clear (&answer);
    rc = grid_cli (&f->grid, &out, &err, S_WAIT_MS, "token", "list", NULL);
    assert_int_equal (rc, 0);
    assert_true (grid_line_with (out, "from-cli", "viewer", NULL));
    assert_null (strstr (out, token));
    free (out);
    free (err);
    rc = grid_cli (&f->grid, &out, &err, S_WAIT_MS, "token", "revoke",
                   "from-cli", NULL);
    assert_int_equal (rc, 0);
    free (out);
    free (err);
    s_curl (f->base, &answer, token, "GET", "/api/v1/whoami", NULL, NULL);
    assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
}

static void
test_http_jobs (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    const char *spec = "{\"target\": \"node:w-01\", \"tasks\": [{\"backend\": "
                       "\"test\", \"action\": \"echo\", \"params\": "
                       "{\"msg\": \"hello http\"}}]}";
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs", spec,
            "-H", "X-Request-Id: http-submit-1", NULL);
    assert_int_equal (answer.status, 201);
    char job [64];
    snprintf (job, sizeof job, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    //  The same request again (a retry) makes no second job
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs", spec,
            "-H", "X-Request-Id: http-submit-1", NULL);
    assert_int_equal (answer.status, 201);
    assert_string_equal (s_str (answer.json, "job"), job);
    s_answer_clear (&answer);
    //  Another request under that id: conflict
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"all\", \"tasks\": [{\"backend\": \"test\", "
            "\"action\": \"echo\", \"params\": {\"msg\": \"other\"}}]}",
            "-H", "X-Request-Id: http-submit-1", NULL);
    assert_int_equal (answer.status, 409);
    assert_string_equal (s_code (&answer), "conflict");
    s_answer_clear (&answer);
    pv_doc_t *done = grid_wait_job (&f->grid, job, S_WAIT_MS);
    pv_doc_destroy (&done);
    char path [200];
    snprintf (path, sizeof path, "/api/v1/jobs/%s", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "status"), "completed");
    assert_string_equal (s_str (answer.json, "id"), job);
    s_answer_clear (&answer);
    snprintf (path, sizeof path, "/api/v1/jobs/%s/progress", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_int_equal (json_integer_value (json_object_get (answer.json,
                                                           "steps")), 1);
    s_answer_clear (&answer);
    snprintf (path, sizeof path, "/api/v1/jobs/%s/events?after=1", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    json_t *events = json_object_get (answer.json, "events");
    assert_true (json_array_size (events) > 0);
    assert_true (json_integer_value (json_object_get (
                     json_array_get (events, 0), "seq")) > 1);
    s_answer_clear (&answer);
    snprintf (path, sizeof path, "/api/v1/jobs/%s/output?node=w-01&step=0",
              job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    //  Output bytes are binary: base64 in JSON ("hello http\n")
    assert_string_equal (s_str (answer.json, "data"), "aGVsbG8gaHR0cAo=");
    s_answer_clear (&answer);
    //  Listing, paging with before
    //  (a viewer may submit a job of query actions, such as test.echo)
    s_curl (f->base, &answer, f->viewer, "POST", "/api/v1/jobs", spec, NULL);
    assert_int_equal (answer.status, 201);
    char newer [64];
    snprintf (newer, sizeof newer, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/jobs?limit=1", NULL,
            NULL);
    assert_int_equal (answer.status, 200);
    json_t *jobs = json_object_get (answer.json, "jobs");
    assert_int_equal (json_array_size (jobs), 1);
    assert_string_equal (s_str (json_array_get (jobs, 0), "id"), newer);
    s_answer_clear (&answer);
    snprintf (path, sizeof path, "/api/v1/jobs?limit=1&before=%s", newer);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    jobs = json_object_get (answer.json, "jobs");
    assert_int_equal (json_array_size (jobs), 1);
    assert_string_equal (s_str (json_array_get (jobs, 0), "id"), job);
    s_answer_clear (&answer);
    //  ?check=true: a dry run; its query runs as itself (no change)
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs?check=true",
            spec, NULL);
    assert_int_equal (answer.status, 201);
    char dry [64];
    snprintf (dry, sizeof dry, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    done = grid_wait_job (&f->grid, dry, S_WAIT_MS);
    pv_doc_destroy (&done);
    snprintf (path, sizeof path, "/api/v1/jobs/%s", dry);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_true (json_is_true (json_object_get (answer.json, "check")));
    json_t *dry_cell = json_object_get (json_object_get (json_object_get (
        answer.json, "results"), "0"), "w-01");
    assert_string_equal (s_str (json_object_get (dry_cell, "data"),
                                "would_change"), "false");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs?check=maybe",
            spec, NULL);
    assert_int_equal (answer.status, 400);
    s_answer_clear (&answer);
    //  Cancel a finished job: conflict; delete it; then it is gone
    snprintf (path, sizeof path, "/api/v1/jobs/%s/cancel", job);
    s_curl (f->base, &answer, f->operator, "POST", path,
            "{\"reason\": \"test\"}", NULL);
    assert_int_equal (answer.status, 409);
    s_answer_clear (&answer);
    snprintf (path, sizeof path, "/api/v1/jobs/%s", job);
    s_curl (f->base, &answer, f->operator, "DELETE", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_true (json_is_true (json_object_get (answer.json, "deleted")));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 404);
    assert_string_equal (s_code (&answer), "not_found");
    s_answer_clear (&answer);
    //  Nodes
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/nodes/w-01", NULL,
            NULL);
    assert_int_equal (answer.status, 200);
    assert_string_equal (s_str (answer.json, "id"), "w-01");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "POST", "/api/v1/nodes/w-01/drain",
            NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_true (json_is_true (json_object_get (answer.json, "drained")));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->admin, "POST", "/api/v1/nodes/w-01/resume",
            NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_true (json_is_false (json_object_get (answer.json, "drained")));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/nodes/nobody", NULL,
            NULL);
    assert_int_equal (answer.status, 404);
    s_answer_clear (&answer);
}

//  Issue 28's parts over HTTP: facts (a node's, ?where), a dry run
//  (?check=true) and a blob's life (POST, GET, DELETE), with the hostile
//  forms refused
static void
test_http_facts_dry_runs_and_blobs (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    //  The agent reports its facts after the welcome
    char arch [64] = "";
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (!*arch && grid_now_ms () < deadline) {
        s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/nodes/w-01",
                NULL, NULL);
        assert_int_equal (answer.status, 200);
        const char *have = json_string_value (json_object_get (
            json_object_get (answer.json, "facts"), "arch"));
        if (have)
            snprintf (arch, sizeof arch, "%s", have);
        s_answer_clear (&answer);
        if (!*arch)
            zclock_sleep (50);
    }
    assert_true (*arch);
    char path [300];
    snprintf (path, sizeof path, "/api/v1/nodes?where=group:web%%20and%%20"
              "fact:arch%%3D%s", arch);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    json_t *nodes = json_object_get (answer.json, "nodes");
    assert_int_equal (json_array_size (nodes), 1);
    assert_string_equal (s_str (json_array_get (nodes, 0), "id"), "w-01");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET",
            "/api/v1/nodes?where=fact:arch%3Dnone-such", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_int_equal (json_array_size (json_object_get (answer.json,
                                                        "nodes")), 0);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET",
            "/api/v1/nodes?where=fact:arch%3E%3Ex", NULL, NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "bad_request");
    s_answer_clear (&answer);

    //  A dry run by fact: the record says check, the cell would change
    char spec [400];
    snprintf (spec, sizeof spec, "{\"target\": \"fact:arch=%s\", \"tasks\": "
              "[{\"backend\": \"test\", \"action\": \"mark\", \"params\": "
              "{\"name\": \"http-dry\", \"text\": \"x\"}}]}", arch);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs?check=true",
            spec, NULL);
    assert_int_equal (answer.status, 201);
    char job [64];
    snprintf (job, sizeof job, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    pv_doc_t *done = grid_wait_job (&f->grid, job, S_WAIT_MS);
    pv_doc_destroy (&done);
    snprintf (path, sizeof path, "/api/v1/jobs/%s", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_true (json_is_true (json_object_get (answer.json, "check")));
    assert_non_null (strstr (answer.body, "would_change"));
    s_answer_clear (&answer);
    char mark [400];
    snprintf (mark, sizeof mark, "%s/agent-w-01/test/http-dry",
              f->grid.dir);
    assert_int_not_equal (access (mark, F_OK), 0);

    //  A blob: stored in one piece, read back, refused when its content
    //  is not its name or comes from a viewer, deleted
    const char *sha = "a0639d03e7e77d7630dffce7bfe26d51813d4c799f13821e5b6786e2736baaed";
    char piece [300];
    snprintf (piece, sizeof piece, "{\"sha256\": \"%s\", \"size\": 11, "
              "\"offset\": 0, \"data\": \"aGVsbG8gYmxvYgo=\"}", sha);
    s_curl (f->base, &answer, f->viewer, "POST", "/api/v1/blobs", piece,
            NULL);
    assert_int_equal (answer.status, 403);
    s_answer_clear (&answer);
    char lie [300];
    snprintf (lie, sizeof lie, "{\"sha256\": \"%s\", \"size\": 11, "
              "\"offset\": 0, \"data\": \"aGVsbG8gYmxvQgo=\"}", sha);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/blobs", lie,
            NULL);
    assert_true (answer.status >= 400 && answer.status < 500);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/blobs", piece,
            NULL);
    assert_true (answer.status == 200 || answer.status == 201);
    s_answer_clear (&answer);
    snprintf (path, sizeof path, "/api/v1/blobs/%s", sha);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_true (json_is_true (json_object_get (answer.json, "complete")));
    assert_int_equal (json_integer_value (json_object_get (answer.json,
                                                           "size")), 11);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "DELETE", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 404);
    s_answer_clear (&answer);
}

static void
test_http_bad_requests (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    //  Bad JSON: malformed, with where
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"all\",\n \"tasks\": [}", NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "malformed");
    json_t *position = json_object_get (answer.json, "position");
    assert_int_equal (json_integer_value (json_object_get (position, "line")),
                      2);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs", "[1, 2]",
            NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "bad_request");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"a\": 1, \"a\": 2}", NULL);
    assert_int_equal (answer.status, 400);
    s_answer_clear (&answer);
    //  A job that fails validation: invalid_job with details
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"all\", \"tasks\": [], \"strategy\": \"yolo\"}",
            NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "invalid_job");
    assert_true (json_array_size (json_object_get (answer.json, "details"))
                 > 0);
    s_answer_clear (&answer);
    //  Unknown field (the wire's check), reserved field, no body
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs/j-x/cancel",
            "{\"why\": \"x\"}", NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "bad_request");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs/j-x/cancel",
            "{\"type\": \"job.delete\"}", NULL);
    assert_int_equal (answer.status, 400);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs", NULL, NULL);
    assert_int_equal (answer.status, 400);
    s_answer_clear (&answer);
    //  Query parameters: unknown, not a number
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/jobs?colour=red",
            NULL, NULL);
    assert_int_equal (answer.status, 400);
    assert_non_null (strstr (s_str (answer.json, "message"), "colour"));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/jobs?limit=ten",
            NULL, NULL);
    assert_int_equal (answer.status, 400);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/jobs?limit=0", NULL,
            NULL);
    assert_int_equal (answer.status, 400);
    s_answer_clear (&answer);
    //  Unknown routes and methods
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/frobnicate", NULL,
            NULL);
    assert_int_equal (answer.status, 404);
    assert_string_equal (s_code (&answer), "not_found");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "PATCH", "/api/v1/jobs", NULL, NULL);
    assert_int_equal (answer.status, 405);
    assert_non_null (strstr (answer.headers, "Allow: "));
    assert_non_null (strstr (s_str (answer.json, "message"),
                             "PATCH /api/v1/jobs: this path takes POST, GET"));
    s_answer_clear (&answer);
    //  Without a token, or with one the broker does not know, a path that
    //  needs one answers 401 whatever the method: which methods it takes
    //  is for callers who may use it
    const char *methods [] = {"PATCH", "OPTIONS", "PUT"};
    for (size_t index = 0; index < 3; index++) {
        s_curl (f->base, &answer, NULL, methods [index], "/api/v1/jobs/j-x",
                NULL, NULL);
        assert_int_equal (answer.status, 401);
        assert_string_equal (s_code (&answer), "unauthorized");
        assert_non_null (strstr (answer.headers, "WWW-Authenticate: Bearer"));
        assert_null (strstr (answer.headers, "Allow: "));
        s_answer_clear (&answer);
    }
    s_curl (f->base, &answer, "grid_0123456789", "OPTIONS", "/api/v1/status",
            NULL, NULL);
    assert_int_equal (answer.status, 401);
    assert_null (strstr (answer.headers, "Allow: "));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "POST", "/metrics", NULL, NULL);
    assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
    //  Nor which paths under /api/ exist
    s_curl (f->base, &answer, NULL, "GET", "/api/v1/frobnicate", NULL, NULL);
    assert_int_equal (answer.status, 401);
    assert_string_equal (s_code (&answer), "unauthorized");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, "grid_0123456789", "GET", "/api/v2/jobs", NULL,
            NULL);
    assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v2/jobs", NULL, NULL);
    assert_int_equal (answer.status, 404);
    assert_non_null (strstr (s_str (answer.json, "message"),
                             "no route GET /api/v2/jobs"));
    s_answer_clear (&answer);
    //  The probes and the API's description need no token: 405 as before
    s_curl (f->base, &answer, NULL, "POST", "/healthz", NULL, NULL);
    assert_int_equal (answer.status, 405);
    assert_non_null (strstr (answer.headers, "Allow: GET"));
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "DELETE", "/api/v1/openapi.json", NULL,
            NULL);
    assert_int_equal (answer.status, 405);
    s_answer_clear (&answer);
    //  Text that is not UTF-8 is named where it was: a header, the path,
    //  a query parameter
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/status", NULL,
            "-H", "X-Request-Id: r-\xff\xfe", NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "bad_request");
    assert_string_equal (s_str (answer.json, "message"),
                         "X-Request-Id: not UTF-8 text");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/jobs/j-%ff", NULL,
            NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "bad_request");
    assert_string_equal (s_str (answer.json, "message"),
                         "job (in the path): not UTF-8 text");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/jobs?status=%c3",
            NULL, NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "bad_request");
    assert_string_equal (s_str (answer.json, "message"),
                         "query parameter 'status': its value is not UTF-8 "
                         "text");
    s_answer_clear (&answer);
    //  Outside the API: the dashboard's files, else 404 as JSON
    s_curl (f->base, &answer, NULL, "GET", "/", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_non_null (strstr (answer.headers, "text/html"));
    //  A browser that has the files is told they did not change
    const char *etag = strstr (answer.headers, "ETag: ");
    assert_non_null (etag);
    char match [128];
    snprintf (match, sizeof match, "If-None-Match: %.*s", (int) strcspn (
                  etag + 6, "\r\n"), etag + 6);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "GET", "/", NULL, "-H", match, NULL);
    assert_int_equal (answer.status, 304);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "GET", "/no-such-file.txt", NULL, NULL);
    assert_int_equal (answer.status, 404);
    assert_string_equal (s_code (&answer), "not_found");
    s_answer_clear (&answer);
    //  Bodies past max_body (64 KiB here): 413, declared or streamed
    size_t size = 100 * 1024;
    char *big = (char *) malloc (size + 1);
    memset (big, ' ', size);
    big [0] = '{';
    big [size - 1] = '}';
    big [size] = 0;
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs", big, NULL);
    assert_int_equal (answer.status, 413);
    assert_string_equal (s_code (&answer), "payload_too_large");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs", big, "-H",
            "Transfer-Encoding: chunked", NULL);
    assert_int_equal (answer.status, 413);
    s_answer_clear (&answer);
    free (big);
    //  Counted in status
    assert_true (s_http_stat (&f->grid, "too_large") >= 2);
    assert_true (s_http_stat (&f->grid, "client_errors") >= 10);
    assert_true (s_http_stat (&f->grid, "requests")
                 > s_http_stat (&f->grid, "client_errors"));
    //  And the broker is well
    s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/status", NULL, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
}

//  Every route answers with its own handler: no route is unwired, and
//  the OpenAPI description lists exactly the routes there are.
static void
test_http_routes_and_openapi (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_curl (f->base, &answer, NULL, "GET", "/api/v1/openapi.json", NULL,
            NULL);
    assert_int_equal (answer.status, 200);
    char path [600];
    snprintf (path, sizeof path, "%s/docs/openapi.json",
              getenv ("GRID_SRC") ? getenv ("GRID_SRC") : ".");
    json_t *kept = json_load_file (path, 0, NULL);
    assert_non_null (kept);
    assert_non_null (answer.json);
    assert_true (json_equal (kept, answer.json));
    s_answer_clear (&answer);
    json_t *paths = json_object_get (kept, "paths");
    size_t documented = 0;
    const char *key;
    json_t *item;
    json_object_foreach (paths, key, item)
        documented += json_object_size (item);
    const char *method, *route;
    size_t count = 0;
    for (size_t index = 0; http_route_at (index, &method, &route); index++) {
        count++;
        char lower [16];
        size_t len = strlen (method);
        for (size_t at = 0; at <= len; at++)
            lower [at] = (char) tolower ((unsigned char) method [at]);
        json_t *ops = json_object_get (paths, route);
        if (!ops || !json_object_get (ops, lower))
            fail_msg ("route %s %s is not in docs/openapi.json", method,
                      route);
        //  And it is served: a request gets an answer of the API, never
        //  "no route" or "method not allowed"
        char url [300];
        snprintf (url, sizeof url, "%s", route);
        char *brace = strchr (route, '{');
        if (brace)
            snprintf (url + (brace - route), sizeof url - (size_t) (brace - route),
                      "none-such%s", strchr (brace, '}') + 1);
        const char *body = strcmp (method, "POST") == 0 ? "{}" : NULL;
        //  A rotation of the broker's key would retire the key every
        //  client here trusts: a deadline that is no duration is refused
        //  by the handler, which shows the route is served
        if (strcmp (route, "/api/v1/broker/rekey") == 0)
            body = "{\"deadline\": \"soon\"}";
        if (strstr (route, "/stream"))
            continue;    //  test_http_stream
        s_curl (f->base, &answer, f->admin, method, url, body, NULL);
        assert_true (answer.status >= 200);
        bool unrouted = (answer.status == 404
                         && strstr (answer.body, "no route"))
                        || answer.status == 405;
        if (unrouted)
            fail_msg ("%s %s is not routed: %s", method, url, answer.body);
        s_answer_clear (&answer);
    }
    assert_int_equal (count, documented);
    json_decref (kept);
}

//  GET /api/v1/jobs/{id}/stream: progress and events until the end.
//  Decodes the base64 TEXT into BUF (at least strlen (TEXT) bytes);
//  returns how many bytes, or -1 when TEXT is not base64.
static long
s_base64 (const char *text, unsigned char *buf)
{
    static const char digits []
        = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    long len = 0;
    unsigned int bits = 0, count = 0;
    for (const char *c = text; *c && *c != '='; c++) {
        const char *at = strchr (digits, *c);
        if (!at)
            return -1;
        bits = bits << 6 | (unsigned int) (at - digits);
        count += 6;
        if (count >= 8) {
            count -= 8;
            buf [len++] = (unsigned char) (bits >> count);
        }
    }
    return len;
}

//  The stream carries each piece of a running step's output as an
//  output event {job, step, node, attempt, stream, offset, data}: in
//  order of offset, together the whole output; a page of it reads from
//  an offset.
static void
test_http_stream_output (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"node:w-01\", \"tasks\": [{\"backend\": \"test\", "
            "\"action\": \"lines\", \"params\": {\"count\": 10, "
            "\"interval\": \"100ms\"}}]}", NULL);
    assert_int_equal (answer.status, 201);
    char job [64];
    snprintf (job, sizeof job, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    char path [200];
    snprintf (path, sizeof path, "/api/v1/jobs/%s/stream", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, "-N", NULL);
    assert_int_equal (answer.status, 200);
    const char *want = "line 1\nline 2\nline 3\nline 4\nline 5\nline 6\n"
                       "line 7\nline 8\nline 9\nline 10\n";
    unsigned char got [256];
    long got_len = 0;
    int events = 0;
    const char *end = strstr (answer.body, "event: end\n");
    assert_non_null (end);
    for (const char *at = strstr (answer.body, "event: output\ndata: "); at;
         at = strstr (at + 1, "event: output\ndata: ")) {
        assert_true (at < end);
        const char *data = at + strlen ("event: output\ndata: ");
        json_error_t error;
        json_t *piece = json_loadb (data, strcspn (data, "\n"), 0, &error);
        assert_non_null (piece);
        assert_string_equal (s_str (piece, "job"), job);
        assert_string_equal (s_str (piece, "node"), "w-01");
        assert_string_equal (s_str (piece, "stream"), "stdout");
        assert_int_equal (json_integer_value (json_object_get (piece,
                                                               "step")), 0);
        //  Each starts where the one before ended
        assert_int_equal (json_integer_value (json_object_get (piece,
                                                               "offset")),
                          got_len);
        const char *text = s_str (piece, "data");
        assert_non_null (text);
        assert_true (got_len + (long) strlen (text) < (long) sizeof got);
        long len = s_base64 (text, got + got_len);
        assert_true (len > 0);
        got_len += len;
        events++;
        json_decref (piece);
    }
    assert_true (events >= 1);
    assert_int_equal (got_len, (long) strlen (want));
    assert_memory_equal (got, want, got_len);
    s_answer_clear (&answer);
    //  A page from an offset: line 2 on, and the step complete
    snprintf (path, sizeof path,
              "/api/v1/jobs/%s/output?node=w-01&step=0&offset=7", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 200);
    long len = s_base64 (s_str (answer.json, "data"), got);
    assert_int_equal (len, (long) strlen (want) - 7);
    assert_memory_equal (got, want + 7, len);
    assert_true (json_is_true (json_object_get (answer.json, "complete")));
    assert_int_equal (json_integer_value (json_object_get (answer.json,
                                                           "exit_code")), 0);
    s_answer_clear (&answer);
    snprintf (path, sizeof path,
              "/api/v1/jobs/%s/output?node=w-01&step=0&offset=500", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 400);
    assert_string_equal (s_code (&answer), "bad_request");
    s_answer_clear (&answer);
}

static void
test_http_stream (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"node:w-01\", \"tasks\": [{\"backend\": \"test\", "
            "\"action\": \"sleep\", \"params\": {\"seconds\": 2}}, "
            "{\"backend\": \"test\", \"action\": \"echo\", \"params\": "
            "{\"msg\": \"second\"}}]}", NULL);
    assert_int_equal (answer.status, 201);
    char job [64];
    snprintf (job, sizeof job, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    char path [200];
    snprintf (path, sizeof path, "/api/v1/jobs/%s/stream", job);
    long long started = grid_now_ms ();
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, "-N", NULL);
    assert_int_equal (answer.status, 200);
    assert_true (grid_now_ms () - started >= 1000);   //  It followed the job
    assert_non_null (strstr (answer.headers, "text/event-stream"));
    assert_non_null (strstr (answer.body, "event: progress\ndata: {"));
    assert_non_null (strstr (answer.body, "event: event\ndata: {"));
    assert_non_null (strstr (answer.body, "\"event\":\"submitted\""));
    assert_non_null (strstr (answer.body, "\"status\":\"completed\""));
    const char *end = strstr (answer.body, "event: end\n");
    assert_non_null (end);
    assert_non_null (strstr (end, "\"status\":\"completed\""));
    assert_null (strstr (end + 1, "event: "));    //  The end is last
    //  Event ids are the seqs, in order
    assert_non_null (strstr (answer.body, "id: 1\nevent: event"));
    s_answer_clear (&answer);
    //  Resuming after a seq gives only the later events
    snprintf (path, sizeof path, "/api/v1/jobs/%s/stream?after=3", job);
    s_curl (f->base, &answer, f->viewer, "GET", path, NULL, "-N", NULL);
    assert_int_equal (answer.status, 200);
    assert_null (strstr (answer.body, "id: 1\n"));
    assert_null (strstr (answer.body, "id: 3\n"));
    assert_non_null (strstr (answer.body, "id: 4\n"));
    s_answer_clear (&answer);
    //  No such job, no token: plain JSON errors
    s_curl (f->base, &answer, f->viewer, "GET",
            "/api/v1/jobs/j-000000000000-0000/stream", NULL, NULL);
    assert_int_equal (answer.status, 404);
    assert_string_equal (s_code (&answer), "not_found");
    s_answer_clear (&answer);
    s_curl (f->base, &answer, NULL, "GET", path, NULL, NULL);
    assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
}

static void
test_http_metrics (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    //  What the reactor answers to metrics.get, as text
    pv_doc_t *reply = grid_call (&f->grid, "metrics.get", NULL);
    const pv_t *data = NULL;
    bool served = grid_reply_ok (reply, &data);
    s_curl (f->base, &answer, NULL, "GET", "/metrics", NULL, NULL);
    if (served)
        assert_int_equal (answer.status, 401);
    s_answer_clear (&answer);
    s_curl (f->base, &answer, f->viewer, "GET", "/metrics", NULL, NULL);
    if (served) {
        assert_int_equal (answer.status, 200);
        assert_non_null (strstr (answer.headers, "text/plain"));
        assert_non_null (strstr (answer.body, "# TYPE "));
    }
    else {
        char *code = grid_reply_code (reply);
        assert_non_null (code);
        assert_string_equal (s_code (&answer), code);
        free (code);
    }
    pv_doc_destroy (&reply);
    s_answer_clear (&answer);
}

//  Connects a raw TCP socket to the face.
static int
s_connect (int port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons ((uint16_t) port);
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    return fd;
}

//  True when the server closes FD within TIMEOUT_MS (reads till EOF).
static bool
s_closed_within (int fd, int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    char buffer [65536];
    while (grid_now_ms () < deadline) {
        struct pollfd item = {fd, POLLIN, 0};
        if (poll (&item, 1, 100) > 0) {
            ssize_t got = recv (fd, buffer, sizeof buffer, 0);
            if (got <= 0)
                return true;
        }
    }
    return false;
}

//  A client that never reads its answers and one that sends half a
//  request: everyone else is answered at once, and both are closed after
//  the idle timeout (2 s here).
static void
test_http_hostile_clients (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    //  Never reads: asks for the 60 KB OpenAPI text again and again
    int greedy = s_connect (f->port);
    int size = 4096;
    setsockopt (greedy, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    const char *ask = "GET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n";
    fcntl (greedy, F_SETFL, O_NONBLOCK);
    for (int count = 0; count < 200; count++)
        if (send (greedy, ask, strlen (ask), MSG_NOSIGNAL) < 0)
            break;
    //  Half a request, then nothing
    int half = s_connect (f->port);
    const char *part = "POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: 500\r\n\r\n{\"target\":";
    assert_true (send (half, part, strlen (part), MSG_NOSIGNAL) > 0);
    int stalled = s_connect (f->port);
    assert_true (send (stalled, "GET /api/v1/st", 14, MSG_NOSIGNAL) > 0);
    //  Headers far past what a request needs: refused, nothing else hurt
    int bloated = s_connect (f->port);
    const char *start = "GET /api/v1/status HTTP/1.1\r\nHost: x\r\nX-Pad: ";
    assert_true (send (bloated, start, strlen (start), MSG_NOSIGNAL) > 0);
    char pad [4096];
    memset (pad, 'a', sizeof pad);
    for (int count = 0; count < 32; count++)
        if (send (bloated, pad, sizeof pad, MSG_NOSIGNAL) < 0)
            break;
    send (bloated, "\r\n\r\n", 4, MSG_NOSIGNAL);
    char head [256] = "";
    struct pollfd item = {bloated, POLLIN, 0};
    if (poll (&item, 1, 10000) > 0)
        recv (bloated, head, sizeof head - 1, 0);
    assert_true (strncmp (head, "HTTP/1.1 431", 12) == 0 || head [0] == 0);
    assert_true (s_closed_within (bloated, 10000));
    close (bloated);
    //  Everyone else is served
    for (int count = 0; count < 5; count++) {
        s_answer_t answer;
        long long started = grid_now_ms ();
        s_curl (f->base, &answer, f->viewer, "GET", "/api/v1/status", NULL,
                NULL);
        assert_int_equal (answer.status, 200);
        assert_true (grid_now_ms () - started < 5000);
        s_answer_clear (&answer);
    }
    pv_doc_t *reply = grid_call (&f->grid, "status", NULL);
    assert_true (grid_reply_ok (reply, NULL));
    pv_doc_destroy (&reply);
    //  The stalled ones are let go
    assert_true (s_closed_within (half, 10000));
    assert_true (s_closed_within (stalled, 10000));
    close (half);
    close (stalled);
    close (greedy);
    s_answer_t answer;
    s_curl (f->base, &answer, NULL, "GET", "/healthz", NULL, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
}

//  A TCP connection to 127.0.0.1:PORT from the loopback address FROM,
//  that sends nothing.
static int
s_connect_from (const char *from, int port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    assert_int_equal (inet_pton (AF_INET, from, &addr.sin_addr), 1);
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    addr.sin_port = htons ((uint16_t) port);
    assert_int_equal (connect (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    return fd;
}

//  One client that opens many connections and sends nothing on them gets
//  http.max_connections_per_ip of them; the others are closed at once, and
//  /healthz from another address is answered without waiting for the
//  idle timeout. A limit out of range is refused at start.
static void
test_http_probes_past_a_connection_hog (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    int port = s_free_port ();
    char config [400], text [300];
    snprintf (config, sizeof config, "%s/broker.yaml", grid.dir);
    snprintf (text, sizeof text,
              "http:\n  listen: \"127.0.0.1:%d\"\n  idle_timeout: 60s\n"
              "  max_connections_per_ip: 16\n", port);
    FILE *file = fopen (config, "w");
    fputs (text, file);
    fclose (file);
    char *out = NULL;
    int rc = grid_run (&grid, "gridbroker", &out, NULL, 10000, "--config",
                       config, "--insecure", "--print-config", NULL);
    assert_int_equal (rc, 0);
    assert_true (grid_line_with (out, "http.max_connections_per_ip:", "16",
                                 NULL));
    free (out);
    const char *extra [] = {"--config", config, NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    char base [64];
    snprintf (base, sizeof base, "http://127.0.0.1:%d", port);
    s_answer_t answer;
    s_curl (base, &answer, NULL, "GET", "/healthz", NULL, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
    //  The hog, from 127.0.0.2: 16 connections stay, the rest are closed
    enum { S_HOG = 64, S_KEPT = 16 };
    int hog [S_HOG];
    bool closed [S_HOG];
    for (int index = 0; index < S_HOG; index++) {
        hog [index] = s_connect_from ("127.0.0.2", port);
        closed [index] = false;
    }
    int closed_count = 0;
    long long deadline = grid_now_ms () + 15000;
    while (closed_count < S_HOG - S_KEPT && grid_now_ms () < deadline) {
        for (int index = 0; index < S_HOG; index++) {
            struct pollfd item = {hog [index], POLLIN, 0};
            char byte;
            if (!closed [index] && poll (&item, 1, 0) > 0
                && recv (hog [index], &byte, 1, 0) <= 0) {
                closed [index] = true;
                closed_count++;
            }
        }
        zclock_sleep (20);
    }
    assert_int_equal (closed_count, S_HOG - S_KEPT);
    //  The probe, from 127.0.0.1, is answered at once
    long long asked_ms = grid_now_ms ();
    s_curl (base, &answer, NULL, "GET", "/healthz", NULL, NULL);
    assert_int_equal (answer.status, 200);
    assert_true (grid_now_ms () - asked_ms < 10000);
    s_answer_clear (&answer);
    s_curl (base, &answer, NULL, "GET", "/readyz", NULL, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
    //  The kept ones are still open (idle_timeout is 60 s)
    int open_count = 0;
    for (int index = 0; index < S_HOG; index++) {
        struct pollfd item = {hog [index], POLLIN, 0};
        if (!closed [index] && poll (&item, 1, 0) == 0)
            open_count++;
        close (hog [index]);
    }
    assert_int_equal (open_count, S_KEPT);
    grid_stop_broker (&grid, false);
    //  Out of range: a clear error at start
    file = fopen (config, "w");
    fputs ("http:\n  listen: \"127.0.0.1:1\"\n"
           "  max_connections_per_ip: 5000\n", file);
    fclose (file);
    char *err = NULL;
    rc = grid_run (&grid, "gridbroker", NULL, &err, 10000, "--config", config,
                   "--insecure", "--print-config", NULL);
    assert_int_not_equal (rc, 0);
    if (!strstr (err, "http.max_connections_per_ip: expected 0 (no limit) "
                      "to 4096"))
        fprintf (stderr, "%s", err);
    assert_non_null (strstr (err, "http.max_connections_per_ip: expected 0 "
                                  "(no limit) to 4096"));
    free (err);
    grid_stop (&grid);
}

//  HTTPS with a self-signed certificate; plain HTTP beyond loopback is
//  refused at start.
static void
test_http_tls (void **state)
{
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    char cert [400], key [400], out [400];
    snprintf (cert, sizeof cert, "%s/cert.pem", grid.dir);
    snprintf (key, sizeof key, "%s/key.pem", grid.dir);
    snprintf (out, sizeof out, "%s/openssl.out", grid.dir);
    const char *openssl [] = {"openssl", "req", "-x509", "-newkey", "rsa:2048",
                              "-nodes", "-keyout", key, "-out", cert,
                              "-days", "1", "-subj", "/CN=localhost",
                              "-addext", "subjectAltName=DNS:localhost,"
                              "IP:127.0.0.1", NULL};
    assert_int_equal (s_exec (openssl, out, 60000), 0);
    int port = s_free_port ();
    char listen [64];
    snprintf (listen, sizeof listen, "127.0.0.1:%d", port);
    const char *extra [] = {"--http", listen, "--http-cert", cert,
                            "--http-key", key, NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    char base [64];
    snprintf (base, sizeof base, "https://localhost:%d", port);
    s_answer_t answer;
    s_curl (base, &answer, NULL, "GET", "/healthz", NULL, "--cacert", cert,
            NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
    char token [128];
    s_token (&grid, "tls", "viewer", token, sizeof token);
    s_curl (base, &answer, token, "GET", "/api/v1/status", NULL, "--cacert",
            cert, NULL);
    assert_int_equal (answer.status, 200);
    s_answer_clear (&answer);
    //  Without trusting the certificate, or in plain text: nothing
    s_curl (base, &answer, NULL, "GET", "/healthz", NULL, NULL);
    assert_int_equal (answer.status, 0);
    s_answer_clear (&answer);
    snprintf (base, sizeof base, "http://127.0.0.1:%d", port);
    s_curl (base, &answer, NULL, "GET", "/healthz", NULL, NULL);
    assert_int_not_equal (answer.status, 200);
    s_answer_clear (&answer);
    grid_stop_broker (&grid, false);
    //  Plain HTTP on every interface: refused, unless --http-insecure
    char *err = NULL;
    int rc = grid_run (&grid, "gridbroker", NULL, &err, 10000, "--config",
                       "none", "--insecure", "--http", "0.0.0.0:1",
                       "--print-config", NULL);
    assert_int_equal (rc, 2);
    assert_non_null (strstr (err, "--http-insecure"));
    free (err);
    char *text = NULL;
    rc = grid_run (&grid, "gridbroker", &text, NULL, 10000, "--config",
                   "none", "--insecure", "--http", "0.0.0.0:1",
                   "--http-insecure", "--print-config", NULL);
    assert_int_equal (rc, 0);
    assert_true (grid_line_with (text, "http.listen:", "0.0.0.0:1",
                                 "# flag --http", NULL));
    assert_true (grid_line_with (text, "http.insecure: true",
                                 "# flag --http-insecure", NULL));
    free (text);
    rc = grid_run (&grid, "gridbroker", NULL, &err, 10000, "--config", "none",
                   "--insecure", "--http", "127.0.0.1:1", "--http-cert",
                   cert, "--print-config", NULL);
    assert_int_equal (rc, 2);
    free (err);
    //  A key that is no key for the certificate: a clear refusal at start
    char data [400], endpoint [3][420];
    snprintf (data, sizeof data, "%s/other-data", grid.dir);
    const char *names [3] = {"c", "a", "p"};
    for (int index = 0; index < 3; index++)
        snprintf (endpoint [index], sizeof endpoint [index], "ipc://%s/o%s",
                  grid.dir, names [index]);
    rc = grid_run (&grid, "gridbroker", NULL, &err, 20000, "--config", "none",
                   "--insecure", "--data-dir", data, "--client", endpoint [0],
                   "--agents", endpoint [1], "--publish", endpoint [2],
                   "--http", listen, "--http-cert", cert, "--http-key", cert,
                   NULL);
    assert_int_equal (rc, 1);
    assert_non_null (strstr (err, "do not load as a pair"));
    free (err);
    grid_stop (&grid);
}

//  Threads of process PID (/proc), or -1.
static int
s_threads (pid_t pid)
{
    char path [64];
    snprintf (path, sizeof path, "/proc/%d/status", (int) pid);
    char *text = grid_slurp (path);
    const char *line = strstr (text, "Threads:");
    int threads = line ? atoi (line + 8) : -1;
    free (text);
    return threads;
}

#define S_STREAMS 200

//  Many streams at once cost no thread each: each is answered to its end
//  while the broker's thread count stays as it was.
static void
test_http_many_streams (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"node:w-01\", \"tasks\": [{\"backend\": \"test\", "
            "\"action\": \"sleep\", \"params\": {\"seconds\": 3}}]}", NULL);
    assert_int_equal (answer.status, 201);
    char job [64];
    snprintf (job, sizeof job, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    int threads = s_threads (f->grid.broker_pid);
    assert_true (threads > 0);
    char request [512];
    snprintf (request, sizeof request,
              "GET /api/v1/jobs/%s/stream HTTP/1.1\r\nHost: x\r\n"
              "Authorization: Bearer %s\r\n\r\n", job, f->viewer);
    static int fds [S_STREAMS];
    static char *got [S_STREAMS];
    static size_t got_size [S_STREAMS];
    static bool ended [S_STREAMS];
    for (int index = 0; index < S_STREAMS; index++) {
        fds [index] = s_connect (f->port);
        assert_true (send (fds [index], request, strlen (request),
                           MSG_NOSIGNAL) > 0);
        got [index] = (char *) calloc (1, 1);
        got_size [index] = 0;
        ended [index] = false;
    }
    int open_streams = S_STREAMS;
    int most_threads = threads;
    long long deadline = grid_now_ms () + 30000;
    while (open_streams > 0 && grid_now_ms () < deadline) {
        struct pollfd items [S_STREAMS];
        for (int index = 0; index < S_STREAMS; index++) {
            items [index].fd = ended [index] ? -1 : fds [index];
            items [index].events = POLLIN;
            items [index].revents = 0;
        }
        poll (items, S_STREAMS, 200);
        for (int index = 0; index < S_STREAMS; index++) {
            if (!(items [index].revents & (POLLIN | POLLHUP)))
                continue;
            char buffer [8192];
            ssize_t size = recv (fds [index], buffer, sizeof buffer, 0);
            if (size > 0) {
                got [index] = (char *) realloc (got [index],
                                                got_size [index] + size + 1);
                memcpy (got [index] + got_size [index], buffer, size);
                got_size [index] += size;
                got [index][got_size [index]] = 0;
            }
            if (size <= 0 || strstr (got [index], "event: end")) {
                ended [index] = true;
                open_streams--;
            }
        }
        int now = s_threads (f->grid.broker_pid);
        if (now > most_threads)
            most_threads = now;
    }
    int complete = 0;
    for (int index = 0; index < S_STREAMS; index++) {
        if (strstr (got [index], "200 OK")
            && strstr (got [index], "event: progress")
            && strstr (got [index], "event: end"))
            complete++;
        close (fds [index]);
        free (got [index]);
    }
    assert_int_equal (complete, S_STREAMS);
    assert_int_equal (most_threads, threads);
    //  Every stream is gone from the figures
    long long until = grid_now_ms () + 10000;
    while (s_http_stat (&f->grid, "streams") != 0 && grid_now_ms () < until)
        zclock_sleep (50);
    assert_int_equal (s_http_stat (&f->grid, "streams"), 0);
}

//  A broker stopped with streams open and requests waiting stops cleanly.
static void
test_http_stop_with_open_streams (void **state)
{
    s_fixture_t *f = (s_fixture_t *) *state;
    s_answer_t answer;
    s_curl (f->base, &answer, f->operator, "POST", "/api/v1/jobs",
            "{\"target\": \"node:w-01\", \"tasks\": [{\"backend\": \"test\", "
            "\"action\": \"sleep\", \"params\": {\"seconds\": 30}}]}", NULL);
    assert_int_equal (answer.status, 201);
    char job [64];
    snprintf (job, sizeof job, "%s", s_str (answer.json, "job"));
    s_answer_clear (&answer);
    char request [512];
    snprintf (request, sizeof request,
              "GET /api/v1/jobs/%s/stream HTTP/1.1\r\nHost: x\r\n"
              "Authorization: Bearer %s\r\n\r\n", job, f->viewer);
    int streams [5];
    for (int index = 0; index < 5; index++) {
        streams [index] = s_connect (f->port);
        assert_true (send (streams [index], request, strlen (request),
                           MSG_NOSIGNAL) > 0);
    }
    snprintf (request, sizeof request,
              "GET /api/v1/jobs/%s/watch?timeout_ms=60000&after=1 HTTP/1.1\r\n"
              "Host: x\r\nAuthorization: Bearer %s\r\n\r\n", job, f->viewer);
    int watcher = s_connect (f->port);
    assert_true (send (watcher, request, strlen (request), MSG_NOSIGNAL) > 0);
    //  Every stream has begun
    for (int index = 0; index < 5; index++) {
        char buffer [4096];
        struct pollfd item = {streams [index], POLLIN, 0};
        assert_true (poll (&item, 1, 10000) > 0);
        assert_true (recv (streams [index], buffer, sizeof buffer, 0) > 0);
    }
    pid_t pid = f->grid.broker_pid;
    kill (pid, SIGTERM);
    long long deadline = grid_now_ms () + 15000;
    int status = -1;
    while (grid_now_ms () < deadline)
        if (waitpid (pid, &status, WNOHANG) == pid)
            break;
        else
            zclock_sleep (20);
    assert_true (WIFEXITED (status));
    assert_int_equal (WEXITSTATUS (status), 0);
    f->grid.broker_pid = 0;
    for (int index = 0; index < 5; index++) {
        assert_true (s_closed_within (streams [index], 5000));
        close (streams [index]);
    }
    assert_true (s_closed_within (watcher, 5000));
    close (watcher);
}


//  Admission over HTTP: a submit past max_pending is 429 queue_full, with
//  the wire's code, and the queue takes work again once it drains.
static void
test_http_queue_full (void **state)
{
    (void) state;
    grid_t grid;
    assert_int_equal (grid_init (&grid), 0);
    char base [64], listen [40];
    int port = s_free_port ();
    snprintf (base, sizeof base, "http://127.0.0.1:%d", port);
    snprintf (listen, sizeof listen, "127.0.0.1:%d", port);
    const char *extra [] = {"--http", listen, "--max-concurrent", "1",
                            "--max-pending", "1", NULL};
    assert_int_equal (grid_start_broker (&grid, extra), 0);
    assert_true (grid_start_agent (&grid, "q-01", "web", NULL, NULL) >= 0);
    char token [128];
    s_token (&grid, "ops", "operator", token, sizeof token);
    const char *slow = "{\"target\": \"node:q-01\", \"tasks\": "
                       "[{\"backend\": \"test\", \"action\": \"sleep\", "
                       "\"params\": {\"seconds\": \"30\"}}]}";
    s_answer_t answer;
    //  One runs, one waits: both are taken
    for (int index = 0; index < 2; index++) {
        s_curl (base, &answer, token, "POST", "/api/v1/jobs", slow, NULL);
        assert_int_equal (answer.status, 201);
        s_answer_clear (&answer);
    }
    //  The third finds the queue full
    s_curl (base, &answer, token, "POST", "/api/v1/jobs", slow, NULL);
    assert_int_equal (answer.status, 429);
    assert_string_equal (s_code (&answer), "queue_full");
    assert_non_null (s_str (answer.json, "message"));
    s_answer_clear (&answer);
    grid_stop (&grid);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_http_health_and_ready),
        cmocka_unit_test (test_http_tokens_and_roles),
        cmocka_unit_test (test_http_gridcli_tokens),
        cmocka_unit_test (test_http_jobs),
        cmocka_unit_test (test_http_facts_dry_runs_and_blobs),
        cmocka_unit_test (test_http_bad_requests),
        cmocka_unit_test (test_http_routes_and_openapi),
        cmocka_unit_test (test_http_stream),
        cmocka_unit_test (test_http_stream_output),
        cmocka_unit_test (test_http_metrics),
        cmocka_unit_test (test_http_hostile_clients),
        cmocka_unit_test (test_http_many_streams),
        cmocka_unit_test (test_http_tls),
        cmocka_unit_test (test_http_probes_past_a_connection_hog),
        cmocka_unit_test (test_http_stop_with_open_streams),
        cmocka_unit_test (test_http_queue_full),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
