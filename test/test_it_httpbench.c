/*  =========================================================================
    test_it_httpbench - gridbench --http, small: the real gridbroker with
    its HTTP face, gridswarm, a real gridagent, httpload and gridcli on
    loopback, run by gridbench

    Half a second of job submits over HTTP (16 keep-alive connections)
    and over ZeroMQ, then three `gridcli --wait` runs: every HTTP answer
    is a 2xx, every ZeroMQ submit is admitted, every gridcli run ends, and
    the figures are written. Then httpload on its own: a route that needs
    a token answers 401 without one, and httpload says so in its exit
    code. No timing is asserted.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <czmq.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "lib/harness.h"

#define S_BENCH "../test/tools/gridbench"   //  From the binaries' directory
#define S_LOAD "../test/tools/httpload"
#define S_RUN_MS 120000

static grid_t s_grid;

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    //  gridbench keeps its own directory under ours
    setenv ("TMPDIR", s_grid.dir, 1);
    return 0;
}

static int
s_teardown (void **state)
{
    unsetenv ("TMPDIR");
    grid_stop (&s_grid);
    return 0;
}

//  The JSON number of KEY in TEXT (the first one), or -1 when absent.
static double
s_number (const char *text, const char *key)
{
    char quoted [128];
    snprintf (quoted, sizeof quoted, "\"%s\": ", key);
    const char *at = strstr (text, quoted);
    return at ? strtod (at + strlen (quoted), NULL) : -1;
}

static void
test_http_figures (void **state)
{
    char out [400];
    snprintf (out, sizeof out, "%s/http.json", s_grid.dir);
    char *stdout_text = NULL, *stderr_text = NULL;
    int code = grid_run (&s_grid, S_BENCH, &stdout_text, &stderr_text,
                         S_RUN_MS, "--http", "--http-s", "0.5",
                         "--http-connections", "16", "--cli-runs", "3",
                         "--out", out, NULL);
    if (code != 0)
        fprintf (stderr, "%s\n%s\n", stdout_text, stderr_text);
    assert_int_equal (code, 0);
    char *json = grid_slurp (out);
    assert_non_null (strstr (json, "\"error\": \"\""));
    assert_true (s_number (json, "connections") == 16);
    assert_true (s_number (json, "http_answers") > 0);
    assert_true (s_number (json, "http_ok") == s_number (json, "http_answers"));
    assert_true (s_number (json, "http_submits_per_s") > 0);
    assert_true (s_number (json, "zmq_ok") > 0);
    assert_true (s_number (json, "zmq_refused") == 0);
    assert_true (s_number (json, "zmq_submits_per_s") > 0);
    assert_true (s_number (json, "cli_wait_runs") == 3);
    assert_true (s_number (json, "cli_wait_p50_ms") > 0);
    assert_non_null (strstr (stdout_text, "http submits"));
    assert_non_null (strstr (stdout_text, "gridcli --wait"));
    free (json);
    free (stdout_text);
    free (stderr_text);
}

static void
test_httpload_reports_refusals (void **state)
{
    //  A broker with its HTTP face; no token is sent
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    assert_int_equal (bind (fd, (struct sockaddr *) &address, sizeof address),
                      0);
    assert_int_equal (getsockname (fd, (struct sockaddr *) &address, &len), 0);
    close (fd);
    int port = ntohs (address.sin_port);
    char listen [64];
    snprintf (listen, sizeof listen, "127.0.0.1:%d", port);
    const char *extra [] = {"--http", listen, NULL};
    assert_int_equal (grid_start_broker (&s_grid, extra), 0);
    char url [128];
    snprintf (url, sizeof url, "http://127.0.0.1:%d/api/v1/status", port);
    char *out = NULL, *err = NULL;
    int code = grid_run (&s_grid, S_LOAD, &out, &err, 30000, "--url", url,
                         "--connections", "4", "--requests", "20", "--json",
                         NULL);
    assert_int_equal (code, 1);
    assert_true (s_number (out, "answers") >= 20);
    assert_true (s_number (out, "ok") == 0);
    assert_true (s_number (out, "401") >= 20);
    free (out);
    free (err);
    //  Bad arguments are refused before anything is sent
    code = grid_run (&s_grid, S_LOAD, &out, &err, 10000, "--url",
                     "https://127.0.0.1:1/", NULL);
    assert_int_equal (code, 2);
    assert_non_null (strstr (err, "--url"));
    free (out);
    free (err);
    grid_stop_broker (&s_grid, false);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_http_figures),
        cmocka_unit_test (test_httpload_reports_refusals),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
