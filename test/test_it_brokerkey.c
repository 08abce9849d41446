/*  =========================================================================
    test_it_brokerkey - the broker's own key rotates without an outage, end
    to end: a real gridbroker, real gridagents and gridcli.

    One broker and one rotation: two agents online with a job running
    (every result kept, both acknowledge the next key, both end on it and
    stay online), a third one registered but offline through the whole
    overlap (it keeps its old broker key and cannot connect after the
    retirement; gridcli key fetch-broker --out gives it the new key, and
    it is back), an agent that does not speak broker_rekey (gridswarm, as
    an agent of the previous release: counted as unable, never sent the
    key, cut off by the retirement, the broker unharmed), the old key
    refused after the retirement; a viewer's
    rotation, a deadline that is no duration and a second rotation while
    one runs are refused with clear errors. The HTTP face serves the
    same: POST /api/v1/broker/rekey (a viewer's token refused, a bad
    deadline and a second rotation too, each audited) and GET
    /api/v1/broker/keys, and /metrics follows the rotation
    (grid_broker_key_rotation_active, the nodes with the next key, the
    deadline) until it is retired. A second rotation, held back by a node
    offline through it: gridcli trusting "OLD,NEW" or "NEW,OLD" (flag or
    config list) is answered before and after the retirement, and one
    that waits for a job through the retirement goes on; one that
    trusts only wrong keys fails at once with the keys named, and hostile
    key lists are usage errors.

    Nothing here sleeps hoping something happened: every wait polls with a
    deadline.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../proto/keys.h"
#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 30000         //  Deadline for anything that should happen

static grid_t s_grid;
static char s_viewer [400];     //  Key pair with the viewer role
static char s_viewer_arg [500]; //  --client-key viewer:FILE
static char s_http_arg [64];    //  --http 127.0.0.1:PORT
static int s_http_port;         //  The HTTP face's port
static char s_admin_token [128];   //  Bearer tokens of the HTTP face
static char s_viewer_token [128];

//  ---------------------------------------------------------------------
//  Helpers

//  broker.keys's integer NAME, or -1 (no answer: the broker may be
//  binding its endpoints again).
static int64_t
s_keys_int (const char *name)
{
    pv_doc_t *reply = grid_call (&s_grid, "broker.keys", NULL);
    const pv_t *data = NULL;
    int64_t value = -1;
    if (grid_reply_ok (reply, &data))
        pv_get_int (pv_map_get (data, name), &value);
    pv_doc_destroy (&reply);
    return value;
}

//  True when a status request signed by the admin and trusting the broker
//  key SERVER is answered within TIMEOUT_MS.
static bool
s_answers_with (const char *server, int timeout_ms)
{
    char why [256];
    zcert_t *cert = keys_load_pair (s_grid.admin_key, why, sizeof why);
    assert_non_null (cert);
    zsock_t *req = zsock_new (ZMQ_REQ);
    keys_curve_client (req, cert, server);
    zsock_set_linger (req, 0);
    zsock_set_rcvtimeo (req, timeout_ms);
    assert_int_equal (zsock_connect (req, "%s", s_grid.client_ep), 0);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "status", "bk-status", 0);
    zframe_t *frame = zframe_new (pw_data (writer), pw_size (writer));
    zframe_send (&frame, req, 0);
    zmsg_t *reply = zmsg_recv (req);
    bool answered = reply != NULL;
    zmsg_destroy (&reply);
    pw_destroy (&writer);
    zsock_destroy (&req);
    zcert_destroy (&cert);
    return answered;
}

//  The file at PATH copied to COPY.
static void
s_copy (const char *path, const char *copy)
{
    char *text = grid_slurp (path);
    FILE *file = fopen (copy, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
    free (text);
}

//  True when an audit entry of TYPE says OUTCOME.
static bool
s_audited (const char *type, const char *outcome)
{
    pv_doc_t *reply = grid_call (&s_grid, "audit.list", "request_type", type,
                                 NULL);
    const pv_t *data = NULL;
    bool found = false;
    if (grid_reply_ok (reply, &data)) {
        const pv_t *entries = pv_map_get (data, "entries");
        for (size_t index = 0; index < pv_size (entries); index++)
            if (grid_str_is (pv_array_at (entries, index), "outcome",
                             outcome))
                found = true;
    }
    pv_doc_destroy (&reply);
    return found;
}

//  Starts gridswarm with one agent, ID, as a CURVE client trusting the
//  broker key file SERVER: an agent whose hello does not name
//  broker_rekey, as one of the previous release. Returns its pid.
static pid_t
s_spawn_swarm (const char *id, const char *server)
{
    char swarm [700], log [400];
    const char *tools = getenv ("GRID_TOOLS");
    if (tools)
        snprintf (swarm, sizeof swarm, "%s/gridswarm", tools);
    else
        snprintf (swarm, sizeof swarm, "%s/../test/tools/gridswarm",
                  s_grid.bin);
    snprintf (log, sizeof log, "%s/swarm-%s.log", s_grid.dir, id);
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        int fd = open (log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2 (fd, 1);
            dup2 (fd, 2);
        }
        execl (swarm, "gridswarm", "--agents", "1", "--prefix", id,
               "--broker", s_grid.agents_ep, "--publish", s_grid.publish_ep,
               "--curve", server, (char *) NULL);
        _exit (127);
    }
    return pid;
}

//  The id gridswarm gives its one agent of PREFIX: the first node whose
//  id starts with PREFIX, into ID, waiting for it to be online.
static bool
s_swarm_node (const char *prefix, char *id, size_t id_len)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *reply = grid_call (&s_grid, "node.list", NULL);
        const pv_t *data = NULL;
        bool found = false;
        if (grid_reply_ok (reply, &data)) {
            const pv_t *nodes = pv_map_get (data, "nodes");
            for (size_t index = 0; index < pv_size (nodes); index++) {
                const pv_t *node = pv_array_at (nodes, index);
                size_t len = 0;
                const char *text = pv_str (pv_map_get (node, "id"), &len);
                if (text && len > strlen (prefix)
                    && strncmp (text, prefix, strlen (prefix)) == 0
                    && grid_str_is (node, "status", "online")) {
                    snprintf (id, id_len, "%.*s", (int) len, text);
                    found = true;
                }
            }
        }
        pv_doc_destroy (&reply);
        if (found)
            return true;
        zclock_sleep (50);
    }
    return false;
}

//  A free TCP port on loopback.
static int
s_free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_int_equal (getsockname (fd, (struct sockaddr *) &addr, &len), 0);
    close (fd);
    return ntohs (addr.sin_port);
}

//  METHOD PATH with TOKEN and BODY (or NULL) over plain HTTP/1.0 on
//  loopback; returns the status (-1: no answer) and the answer's body in
//  *ANSWER_P (caller frees).
static int
s_http (const char *method, const char *path, const char *token,
        const char *body, char **answer_p)
{
    *answer_p = NULL;
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons ((uint16_t) s_http_port)};
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    struct timeval timeout = {.tv_sec = 20};
    setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    if (connect (fd, (struct sockaddr *) &addr, sizeof addr)) {
        close (fd);
        return -1;
    }
    char *request = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&request, &size);
    fprintf (out, "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n"
             "Authorization: Bearer %s\r\n", method, path, token);
    if (body)
        fprintf (out, "Content-Type: application/json\r\n"
                 "Content-Length: %zu\r\n", strlen (body));
    fprintf (out, "\r\n%s", body ? body : "");
    fclose (out);
    bool sent = send (fd, request, size, MSG_NOSIGNAL) == (ssize_t) size;
    free (request);
    char *answer = NULL;
    size = 0;
    out = open_memstream (&answer, &size);
    char buffer [4096];
    ssize_t got;
    while (sent && (got = recv (fd, buffer, sizeof buffer, 0)) > 0)
        fwrite (buffer, 1, (size_t) got, out);
    fclose (out);
    close (fd);
    int status = -1;
    if (sscanf (answer, "HTTP/1.%*d %d", &status) != 1)
        status = -1;
    char *start = strstr (answer, "\r\n\r\n");
    *answer_p = strdup (start ? start + 4 : "");
    free (answer);
    return status;
}

//  The value of sample NAME (a line "NAME VALUE") in metrics.get's text,
//  or -1.
static double
s_metric (const char *name)
{
    pv_doc_t *reply = grid_call (&s_grid, "metrics.get", NULL);
    const pv_t *data = NULL;
    double value = -1;
    if (grid_reply_ok (reply, &data)) {
        char *text = pv_strdup (pv_map_get (data, "text"));
        char line [200];
        snprintf (line, sizeof line, "\n%s ", name);
        const char *at = text ? strstr (text, line) : NULL;
        if (at)
            value = strtod (at + strlen (line), NULL);
        free (text);
    }
    pv_doc_destroy (&reply);
    return value;
}

//  A bearer token of ROLE named NAME, into TOKEN.
static int
s_token (const char *name, const char *role, char *token, size_t token_len)
{
    pv_doc_t *reply = grid_call (&s_grid, "token.add", "name", name, "role",
                                 role, NULL);
    const pv_t *data = NULL;
    int rc = -1;
    if (grid_reply_ok (reply, &data)) {
        char *text = pv_strdup (pv_map_get (data, "token"));
        if (text) {
            snprintf (token, token_len, "%s", text);
            rc = 0;
        }
        free (text);
    }
    pv_doc_destroy (&reply);
    return rc;
}

//  ---------------------------------------------------------------------
//  Setup

static int
s_setup (void **state)
{
    if (grid_init (&s_grid) != 0)
        return -1;
    if (grid_keygen (&s_grid, "viewer", s_viewer, sizeof s_viewer, NULL) != 0)
        return -1;
    snprintf (s_viewer_arg, sizeof s_viewer_arg, "viewer:%s", s_viewer);
    s_http_port = s_free_port ();
    snprintf (s_http_arg, sizeof s_http_arg, "127.0.0.1:%d", s_http_port);
    const char *extra [] = {"--client-key", s_viewer_arg, "--http",
                            s_http_arg, NULL};
    if (grid_start_broker (&s_grid, extra) != 0)
        return -1;
    if (s_token ("bk-admin", "admin", s_admin_token, sizeof s_admin_token)
    ||  s_token ("bk-viewer", "viewer", s_viewer_token,
                 sizeof s_viewer_token))
        return -1;
    return 0;
}

static int
s_teardown (void **state)
{
    grid_stop (&s_grid);
    return 0;
}

//  ---------------------------------------------------------------------
//  The case

static void
test_it_brokerkey_rotation (void **state)
{
    char why [256], old [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (s_grid.broker_key, old, why,
                                        sizeof why), 0);
    //  bk-03 trusts a copy of the broker's key of its own, and is offline
    //  through the whole overlap
    char old_copy [400];
    snprintf (old_copy, sizeof old_copy, "%s/bk-03-broker.key",
              s_grid.keys_dir);
    s_copy (s_grid.broker_key, old_copy);
    const char *own_key [] = {"--broker-key", old_copy, NULL};
    int slot = grid_start_agent (&s_grid, "bk-03", NULL, NULL, own_key);
    assert_true (slot >= 0);
    grid_stop_agent (&s_grid, slot, false);
    assert_true (grid_start_agent (&s_grid, "bk-01", NULL, NULL, NULL) >= 0);
    assert_true (grid_start_agent (&s_grid, "bk-02", NULL, NULL, NULL) >= 0);
    //  An agent that does not speak broker_rekey (as the previous release)
    char swarm_key [420], old_node [80];
    snprintf (swarm_key, sizeof swarm_key, "%s/swarm-broker.key",
              s_grid.keys_dir);
    s_copy (s_grid.broker_key, swarm_key);
    pid_t swarm = s_spawn_swarm ("bkold", swarm_key);
    assert_true (s_swarm_node ("bkold", old_node, sizeof old_node));
    char *job = grid_submit_id (&s_grid,
        "target: node:bk-01,bk-02\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 2}}\n"
        "  - {backend: test, action: echo, params: {msg: two}}\n"
        "  - {backend: test, action: sleep, params: {seconds: 3}}\n"
        "  - {backend: test, action: echo, params: {msg: four}}\n");
    assert_non_null (job);

    //  No rotation yet: the metrics say so
    assert_true (s_metric ("grid_broker_key_rotation_active") == 0);
    assert_true (s_metric ("grid_broker_key_rotations_retired_total") == 0);
    char *answer = NULL;
    int status = s_http ("GET", "/api/v1/broker/keys", s_viewer_token, NULL,
                         &answer);
    assert_int_equal (status, 200);
    assert_non_null (strstr (answer, old));
    assert_non_null (strstr (answer, "\"rotating\":false"));
    free (answer);
    //  Over HTTP: a viewer's token may not start a rotation, a deadline
    //  that is no duration is refused; both are audited
    status = s_http ("POST", "/api/v1/broker/rekey", s_viewer_token, "{}",
                     &answer);
    assert_int_equal (status, 403);
    free (answer);
    status = s_http ("POST", "/api/v1/broker/rekey", s_admin_token,
                     "{\"deadline\": \"soon\"}", &answer);
    assert_int_equal (status, 400);
    assert_non_null (strstr (answer, "deadline 'soon'"));
    free (answer);
    assert_true (s_audited ("broker.rekey", "forbidden"));

    //  A viewer may not start a rotation
    char *out = NULL, *err = NULL;
    int code = grid_cli_as (&s_grid, s_viewer, &out, &err, 20000, "key",
                            "rotate-broker", NULL);
    assert_int_not_equal (code, 0);
    assert_non_null (strstr (err, "forbidden"));
    free (out);
    free (err);
    //  An admin may; a second one while it runs is refused
    code = grid_cli (&s_grid, &out, &err, 20000, "key", "rotate-broker",
                     "--deadline", "15s", NULL);
    if (code != 0)
        fprintf (stderr, "rotate-broker: %s%s", out, err);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "next key"));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 20000, "key", "rotate-broker",
                     NULL);
    assert_int_not_equal (code, 0);
    assert_non_null (strstr (err, "runs already"));
    free (out);
    free (err);
    status = s_http ("POST", "/api/v1/broker/rekey", s_admin_token,
                     "{\"deadline\": \"1h\"}", &answer);
    assert_int_equal (status, 409);
    assert_non_null (strstr (answer, "runs already"));
    free (answer);
    char next_file [420], next [KEYS_TEXT_SIZE];
    snprintf (next_file, sizeof next_file, "%s.next", s_grid.broker_key);
    assert_int_equal (keys_read_public (next_file, next, why, sizeof why), 0);

    //  A deadline that is no duration is refused before anything is sent
    code = grid_cli (&s_grid, &out, &err, 20000, "key", "rotate-broker",
                     "--deadline", "soon", NULL);
    assert_int_equal (code, 2);
    assert_non_null (strstr (err, "--deadline"));
    free (out);
    free (err);

    //  Both online agents have the next key; bk-03 holds the old one
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (s_keys_int ("acknowledged") < 2 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_keys_int ("acknowledged"), 2);
    code = grid_cli (&s_grid, &out, &err, 20000, "key", "rotate-broker",
                     "--status", NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "4: 2 have the next key, 1 cannot"));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 20000, "status", NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, "2 of 4 nodes have the next key"));
    free (out);
    free (err);
    //  The HTTP face and the metrics say the same
    status = s_http ("GET", "/api/v1/broker/keys", s_admin_token, NULL,
                     &answer);
    assert_int_equal (status, 200);
    assert_non_null (strstr (answer, next));
    assert_non_null (strstr (answer, "\"rotating\":true"));
    assert_non_null (strstr (answer, "\"acknowledged\":2"));
    assert_non_null (strstr (answer, "\"unable\":1"));
    free (answer);
    assert_true (s_metric ("grid_broker_key_rotation_active") == 1);
    assert_true (s_metric ("grid_broker_key_nodes") == 4);
    assert_true (s_metric ("grid_broker_key_nodes_acknowledged") == 2);
    assert_true (s_metric ("grid_broker_key_nodes_unable") == 1);
    double left = s_metric ("grid_broker_key_deadline_seconds");
    assert_true (left > 0 && left <= 15);

    //  A restart of the broker in the middle goes on with the same
    //  rotation; the agents come back on the old key, still the current
    //  one, and acknowledge the next key again
    grid_stop_broker (&s_grid, false);
    const char *extra [] = {"--client-key", s_viewer_arg, NULL};
    assert_int_equal (grid_start_broker (&s_grid, extra), 0);
    pv_doc_t *keys = grid_call (&s_grid, "broker.keys", NULL);
    const pv_t *keys_data = NULL;
    assert_true (grid_reply_ok (keys, &keys_data));
    assert_true (grid_str_is (keys_data, "next", next));
    assert_true (grid_str_is (keys_data, "key", old));
    pv_doc_destroy (&keys);
    deadline = grid_now_ms () + S_WAIT_MS;
    while (s_keys_int ("acknowledged") < 2 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_keys_int ("acknowledged"), 2);

    //  Retired at the deadline (bk-03 never came): the new key on disk
    deadline = grid_now_ms () + S_WAIT_MS;
    while (access (next_file, F_OK) == 0 && grid_now_ms () < deadline)
        zclock_sleep (50);
    char now [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (s_grid.broker_key, now, why,
                                        sizeof why), 0);
    assert_string_equal (now, next);
    deadline = grid_now_ms () + S_WAIT_MS;
    while (s_keys_int ("retired") != 1 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_keys_int ("retired"), 1);
    assert_true (s_metric ("grid_broker_key_rotation_active") == 0);
    assert_true (s_metric ("grid_broker_key_nodes_acknowledged") == 0);
    assert_true (s_metric ("grid_broker_key_rotations_retired_total") == 1);
    assert_true (s_answers_with (next, 10000));
    assert_false (s_answers_with (old, 1500));

    //  Nothing lost: the job finished everywhere, both agents online on
    //  the new key, which they keep in their state dirs
    pv_doc_t *doc = grid_wait_job (&s_grid, job, S_WAIT_MS);
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    assert_true (grid_str_is (data, "status", "completed"));
    for (int step = 0; step < 4; step++) {
        assert_true (grid_str_is (grid_cell (data, step, "bk-01"), "status",
                                  "success"));
        assert_true (grid_str_is (grid_cell (data, step, "bk-02"), "status",
                                  "success"));
    }
    pv_doc_destroy (&doc);
    free (job);
    const char *ids [] = {"bk-01", "bk-02"};
    for (int index = 0; index < 2; index++) {
        assert_true (grid_wait_node (&s_grid, ids [index], "online",
                                     S_WAIT_MS));
        char path [400];
        snprintf (path, sizeof path, "%s/agent-%s/broker.keys", s_grid.dir,
                  ids [index]);
        deadline = grid_now_ms () + S_WAIT_MS;
        char *text = grid_slurp (path);
        while (!strstr (text, next) && grid_now_ms () < deadline) {
            free (text);
            zclock_sleep (50);
            text = grid_slurp (path);
        }
        assert_non_null (strstr (text, next));
        free (text);
    }
    assert_true (s_audited ("broker.rekey", "ok"));
    //  The agent that could not learn the key was never sent it; it is
    //  cut off by the retirement and reads offline, the broker unharmed
    assert_true (grid_wait_node (&s_grid, old_node, "offline", S_WAIT_MS));
    grid_kill (swarm, SIGKILL);
    assert_true (s_audited ("key.retire", "ok"));

    //  The node offline through the overlap cannot connect with the old
    //  key; with the file gridcli key fetch-broker writes, it is back
    slot = grid_spawn_agent (&s_grid, "bk-03", NULL, NULL, own_key);
    assert_true (slot >= 0);
    assert_false (grid_wait_node (&s_grid, "bk-03", "online", 2000));
    grid_stop_agent (&s_grid, slot, false);
    code = grid_cli (&s_grid, &out, &err, 20000, "key", "fetch-broker",
                     "--out", old_copy, NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);
    assert_int_equal (keys_read_public (old_copy, now, why, sizeof why), 0);
    assert_string_equal (now, next);
    assert_true (grid_start_agent (&s_grid, "bk-03", NULL, NULL, own_key)
                 >= 0);
}

//  gridcli "Z85,Z85" with the admin's key and the --request-timeout
//  TIMEOUT: its exit code, OUT and ERR as grid_cli gives them.
static int
s_cli_keys (const char *keys, const char *timeout, char **out_p,
            char **err_p)
{
    return grid_run (&s_grid, "gridcli", out_p, err_p, 40000, "--broker",
                     s_grid.client_ep, "--key", s_grid.admin_key,
                     "--broker-key", keys, "--request-timeout", timeout,
                     "status", NULL);
}

//  True when gridcli trusting KEYS (a comma-separated list) is answered.
static bool
s_cli_answers (const char *keys)
{
    char *out = NULL, *err = NULL;
    int code = s_cli_keys (keys, "10s", &out, &err);
    if (code != 0)
        fprintf (stderr, "gridcli --broker-key %s: %s%s", keys, out, err);
    free (out);
    free (err);
    return code == 0;
}

//  A client that trusts the broker's current and next key goes on before
//  and after the retirement, in either order, from the flag and from a
//  YAML list in its config file; one that trusts only keys the broker
//  does not have fails without waiting out its timeout, and says which
//  keys it tried; hostile lists are usage errors.
static void
test_it_brokerkey_clients (void **state)
{
    char why [256], old [KEYS_TEXT_SIZE], other [KEYS_TEXT_SIZE];
    assert_int_equal (keys_read_public (s_grid.broker_key, old, why,
                                        sizeof why), 0);
    assert_int_equal (keys_read_public (s_viewer, other, why, sizeof why),
                      0);
    //  A node offline through the overlap holds the retirement back to
    //  the deadline
    int slot = grid_start_agent (&s_grid, "bk-04", NULL, NULL, NULL);
    assert_true (slot >= 0);
    grid_stop_agent (&s_grid, slot, false);
    assert_true (grid_wait_node (&s_grid, "bk-04", "offline", S_WAIT_MS));

    char *out = NULL, *err = NULL;
    int code = grid_cli (&s_grid, &out, &err, 20000, "key", "rotate-broker",
                         "--deadline", "8s", NULL);
    assert_int_equal (code, 0);
    char next_file [420], next [KEYS_TEXT_SIZE];
    snprintf (next_file, sizeof next_file, "%s.next", s_grid.broker_key);
    assert_int_equal (keys_read_public (next_file, next, why, sizeof why), 0);
    //  It says how clients keep both
    char old_new [100], new_old [100], hint [120];
    snprintf (old_new, sizeof old_new, "%s,%s", old, next);
    snprintf (new_old, sizeof new_old, "%s,%s", next, old);
    snprintf (hint, sizeof hint, "--broker-key %s", old_new);
    assert_non_null (strstr (out, hint));
    free (out);
    free (err);
    code = grid_cli (&s_grid, &out, &err, 20000, "key", "fetch-broker",
                     NULL);
    assert_int_equal (code, 0);
    assert_non_null (strstr (out, hint));
    free (out);
    free (err);

    //  Before the retirement: the old key goes through, first or second
    assert_true (access (next_file, F_OK) == 0);
    assert_true (s_cli_answers (old_new));
    assert_true (s_cli_answers (new_old));
    //  The same from the config file, as a YAML list
    char config [420], text [300];
    snprintf (config, sizeof config, "%s/gridcli-keys.yaml", s_grid.dir);
    snprintf (text, sizeof text, "broker_key:\n  - '%s'\n  - '%s'\n", old,
              next);
    FILE *file = fopen (config, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
    code = grid_run (&s_grid, "gridcli", &out, &err, 40000, "--broker",
                     s_grid.client_ep, "--key", s_grid.admin_key, "--config",
                     config, "status", NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);

    //  One gridcli that waits for a job through the retirement: its
    //  connection is cut at the switch, and it goes on with the new key
    code = grid_run (&s_grid, "gridcli", &out, &err, 60000, "--broker",
                     s_grid.client_ep, "--key", s_grid.admin_key,
                     "--broker-key", old_new, "--request-timeout", "10s",
                     "job", "run", "--target", "node:bk-01", "--wait", "test",
                     "sleep", "--seconds", "10", NULL);
    if (code != 0)
        fprintf (stderr, "job run --wait: %s%s", out, err);
    assert_int_equal (code, 0);
    free (out);
    free (err);

    //  Retired at the deadline (within the job's 10 s): the new key goes
    //  through, first or second
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (access (next_file, F_OK) == 0 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_false (access (next_file, F_OK) == 0);
    deadline = grid_now_ms () + S_WAIT_MS;
    while (s_keys_int ("retired") != 2 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_keys_int ("retired"), 2);
    assert_true (s_cli_answers (old_new));
    assert_true (s_cli_answers (new_old));
    code = grid_run (&s_grid, "gridcli", &out, &err, 40000, "--broker",
                     s_grid.client_ep, "--key", s_grid.admin_key, "--config",
                     config, "status", NULL);
    assert_int_equal (code, 0);
    free (out);
    free (err);

    //  Only keys the broker does not have: every handshake fails, and
    //  gridcli says so at once, naming the keys, instead of waiting out
    //  its minute
    char wrong [100];
    snprintf (wrong, sizeof wrong, "%s,%s", old, other);
    long long start = grid_now_ms ();
    code = s_cli_keys (wrong, "60s", &out, &err);
    long long took_ms = grid_now_ms () - start;
    assert_int_equal (code, 3);
    assert_non_null (strstr (err, "no handshake went through"));
    assert_non_null (strstr (err, old));
    assert_non_null (strstr (err, other));
    assert_non_null (strstr (err, "fetch-broker"));
    assert_null (strstr (err, "after 1m"));
    assert_true (took_ms < 30000);
    free (out);
    free (err);

    //  Hostile lists: usage errors before anything is sent
    char many [500] = "";
    for (int index = 0; index < 9; index++)
        snprintf (many + strlen (many), sizeof many - strlen (many), "%s%s",
                  index ? "," : "", next);
    char empty [100], bad [100];
    snprintf (empty, sizeof empty, "%s,,%s", old, next);
    snprintf (bad, sizeof bad, "%s,not-a-key", next);
    const char *hostile [] = {many, empty, bad, ",", NULL};
    const char *says [] = {"more than 8", "is empty", "key 2 of the list",
                           "is empty"};
    for (int index = 0; hostile [index]; index++) {
        code = s_cli_keys (hostile [index], "5s", &out, &err);
        assert_int_equal (code, 2);
        assert_non_null (strstr (err, says [index]));
        free (out);
        free (err);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_it_brokerkey_rotation),
        cmocka_unit_test (test_it_brokerkey_clients),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
