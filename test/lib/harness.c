/*  =========================================================================
    harness - integration test support (see harness.h)
    =========================================================================
*/
#include <czmq.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "../../client/client.h"
#include "../../proto/conf.h"
#include "../../proto/keys.h"
#include "../../proto/proto.h"
#include "../../proto/sha256.h"
#include "harness.h"

long long
grid_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
s_nap (int ms)
{
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    nanosleep (&ts, NULL);
}

int
grid_init (grid_t *grid)
{
    memset (grid, 0, sizeof *grid);
    const char *tmp = getenv ("TMPDIR");
    snprintf (grid->dir, sizeof grid->dir, "%s/grid-it-XXXXXX",
              tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp (grid->dir))
        return -1;
    snprintf (grid->client_ep, sizeof grid->client_ep, "ipc://%s/client.ipc", grid->dir);
    snprintf (grid->agents_ep, sizeof grid->agents_ep, "ipc://%s/agents.ipc", grid->dir);
    snprintf (grid->publish_ep, sizeof grid->publish_ep, "ipc://%s/publish.ipc", grid->dir);
    const char *bin = getenv ("GRID_BIN");
    snprintf (grid->bin, sizeof grid->bin, "%s", bin && *bin ? bin : "build/bin");
    zsys_init ();
    zsys_set_logsender (NULL);
    //  A killed child's broken pipe must not kill the test.
    signal (SIGPIPE, SIG_IGN);
    snprintf (grid->keys_dir, sizeof grid->keys_dir, "%s/keys", grid->dir);
    if (grid_keygen (grid, "broker", grid->broker_key,
                     sizeof grid->broker_key, NULL) != 0
        || grid_keygen (grid, "admin", grid->admin_key,
                        sizeof grid->admin_key, NULL) != 0)
        return -1;
    return 0;
}

int
grid_keygen (grid_t *grid, const char *name, char *path, size_t path_len,
             char *public_txt)
{
    char why [512];
    snprintf (path, path_len, "%s/%s.key", grid->keys_dir, name);
    if (access (path, F_OK) != 0) {
        char text [KEYS_TEXT_SIZE];
        if (keys_generate (grid->keys_dir, name, false, NULL, text, why,
                           sizeof why) != 0) {
            fprintf (stderr, "grid_keygen: %s\n", why);
            return -1;
        }
    }
    if (public_txt
        && keys_read_public (path, public_txt, why, sizeof why) != 0) {
        fprintf (stderr, "grid_keygen: %s\n", why);
        return -1;
    }
    return 0;
}

static pid_t
s_spawn (grid_t *grid, const char *program, const char *log_name,
         char *const *argv)
{
    char path [700];
    snprintf (path, sizeof path, "%s/%s", grid->bin, program);
    char log_path [400];
    snprintf (log_path, sizeof log_path, "%s/%s", grid->dir, log_name);
    pid_t pid = fork ();
    if (pid == 0) {
        //  A test that dies (a crash, or the runner's SIGKILL) takes its
        //  broker and agents with it.
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        int fd = open (log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2 (fd, 1);
            dup2 (fd, 2);
            close (fd);
        }
        int null_fd = open ("/dev/null", O_RDONLY);
        if (null_fd >= 0) {
            dup2 (null_fd, 0);
            close (null_fd);
        }
        execv (path, argv);
        fprintf (stderr, "cannot run %s: %s\n", path, strerror (errno));
        _exit (127);
    }
    return pid;
}

int
grid_kill (pid_t pid, int signal_number)
{
    if (pid <= 0)
        return 0;
    kill (pid, signal_number);
    if (signal_number != SIGKILL && signal_number != SIGTERM)
        return 0;
    long long deadline = grid_now_ms () + 10000;
    while (grid_now_ms () < deadline) {
        pid_t done = waitpid (pid, NULL, WNOHANG);
        if (done == pid || (done < 0 && errno == ECHILD))
            return 0;
        s_nap (10);
    }
    kill (pid, SIGKILL);
    waitpid (pid, NULL, 0);
    return 0;
}

int
grid_start_broker (grid_t *grid, const char *const *extra)
{
    if (grid_spawn_broker (grid, extra) != 0)
        return -1;
    long long deadline = grid_now_ms () + GRID_START_MS;
    while (grid_now_ms () < deadline) {
        pv_doc_t *reply = grid_call (grid, "status", NULL);
        bool ok = grid_reply_ok (reply, NULL);
        pv_doc_destroy (&reply);
        if (ok)
            return 0;
        if (waitpid (grid->broker_pid, NULL, WNOHANG) == grid->broker_pid) {
            grid->broker_pid = 0;
            break;
        }
    }
    fprintf (stderr, "gridbroker did not start\n");
    grid_dump_logs (grid);
    return -1;
}

int
grid_spawn_broker (grid_t *grid, const char *const *extra)
{
    char data_dir [300];
    snprintf (data_dir, sizeof data_dir, "%s/broker-data", grid->dir);
    const char *argv [64] = {"gridbroker", "--data-dir", data_dir, "--client",
                             grid->client_ep, "--agents", grid->agents_ep,
                             "--publish", grid->publish_ep, "--heartbeat",
                             "200ms", "--missed-heartbeats", "5",
                             "--offline-grace", "1s", "--ack-timeout", "500ms",
                             "--retry-base", "100ms"};
    size_t argc = 19;
    char client_key [400];
    snprintf (client_key, sizeof client_key, "admin:%s", grid->admin_key);
    if (grid->insecure)
        argv [argc++] = "--insecure";
    else {
        argv [argc++] = "--key";
        argv [argc++] = grid->broker_key;
        argv [argc++] = "--client-key";
        argv [argc++] = client_key;
        if (!grid->manual_accept)
            argv [argc++] = "--auto-accept";
    }
    for (size_t index = 0; extra && extra [index] && argc < 62; index++)
        argv [argc++] = extra [index];
    argv [argc] = NULL;
    grid->broker_pid = s_spawn (grid, "gridbroker", "broker.log",
                                (char *const *) argv);
    return grid->broker_pid > 0 ? 0 : -1;
}

int
grid_start_agent (grid_t *grid, const char *id, const char *groups,
                  const char *labels, const char *const *extra)
{
    int slot = grid_spawn_agent (grid, id, groups, labels, extra);
    if (slot < 0)
        return -1;
    if (!grid_wait_node (grid, id, "online", GRID_START_MS)) {
        fprintf (stderr, "gridagent %s did not come online\n", id);
        grid_dump_logs (grid);
        return -1;
    }
    return slot;
}

int
grid_spawn_agent (grid_t *grid, const char *id, const char *groups,
                  const char *labels, const char *const *extra)
{
    if (grid->agent_count >= GRID_MAX_AGENTS)
        return -1;
    int slot = -1;
    for (size_t index = 0; index < grid->agent_count; index++)
        if (strcmp (grid->agent_ids [index], id) == 0)
            slot = (int) index;
    if (slot < 0) {
        slot = (int) grid->agent_count++;
        snprintf (grid->agent_ids [slot], sizeof grid->agent_ids [slot], "%s", id);
    }
    char state_dir [300], log_name [100];
    snprintf (state_dir, sizeof state_dir, "%s/agent-%s", grid->dir, id);
    snprintf (log_name, sizeof log_name, "agent-%s.log", id);
    const char *argv [64] = {"gridagent", "--id", id, "--broker",
                             grid->agents_ep, "--publish", grid->publish_ep,
                             "--state-dir", state_dir};
    size_t argc = 9;
    char key_name [100], key_path [400];
    snprintf (key_name, sizeof key_name, "agent-%s", id);
    if (grid->insecure)
        argv [argc++] = "--insecure";
    else {
        if (grid_keygen (grid, key_name, key_path, sizeof key_path, NULL))
            return -1;
        argv [argc++] = "--key";
        argv [argc++] = key_path;
        argv [argc++] = "--broker-key";
        argv [argc++] = grid->broker_key;
    }
    if (groups) {
        argv [argc++] = "--groups";
        argv [argc++] = groups;
    }
    if (labels) {
        argv [argc++] = "--labels";
        argv [argc++] = labels;
    }
    for (size_t index = 0; extra && extra [index] && argc < 62; index++)
        argv [argc++] = extra [index];
    argv [argc] = NULL;
    grid->agent_pids [slot] = s_spawn (grid, "gridagent", log_name,
                                       (char *const *) argv);
    return slot;
}

int
grid_relay_keygen (grid_t *grid, const char *name, char *path,
                   size_t path_len, char *public_txt)
{
    char key_name [100];
    snprintf (key_name, sizeof key_name, "relay-%s", name);
    return grid_keygen (grid, key_name, path, path_len, public_txt);
}

int
grid_start_relay (grid_t *grid, const char *name, int upstream, bool wait,
                  const char *const *extra)
{
    int slot = -1;
    for (size_t index = 0; index < grid->relay_count; index++)
        if (strcmp (grid->relay_names [index], name) == 0)
            slot = (int) index;
    if (slot < 0) {
        if (grid->relay_count >= GRID_MAX_RELAYS)
            return -1;
        slot = (int) grid->relay_count++;
        snprintf (grid->relay_names [slot], sizeof grid->relay_names [slot],
                  "%s", name);
        char dir [sizeof grid->dir];
        memcpy (dir, grid->dir, sizeof dir);
        snprintf (grid->relay_agents_ep [slot],
                  sizeof grid->relay_agents_ep [slot],
                  "ipc://%s/relay-%s-agents.ipc", dir, name);
        snprintf (grid->relay_publish_ep [slot],
                  sizeof grid->relay_publish_ep [slot],
                  "ipc://%s/relay-%s-publish.ipc", dir, name);
        snprintf (grid->relay_client_ep [slot],
                  sizeof grid->relay_client_ep [slot],
                  "ipc://%s/relay-%s-client.ipc", dir, name);
        if (grid_relay_keygen (grid, name, grid->relay_key [slot],
                               sizeof grid->relay_key [slot], NULL) != 0)
            return -1;
    }
    bool to_relay = upstream >= 0 && (size_t) upstream < grid->relay_count;
    char log_name [100];
    snprintf (log_name, sizeof log_name, "relay-%s.log", name);
    const char *argv [64] = {
        "gridrelay", "--config", "none", "--name", name, "--agents",
        grid->relay_agents_ep [slot], "--publish",
        grid->relay_publish_ep [slot], "--client",
        grid->relay_client_ep [slot], "--upstream",
        to_relay ? grid->relay_agents_ep [upstream] : grid->agents_ep,
        "--upstream-publish",
        to_relay ? grid->relay_publish_ep [upstream] : grid->publish_ep,
        "--heartbeat", "200ms"};
    size_t argc = 17;
    //  Its record of the broker's key rotations (relay/brokerkeys.h)
    char state_dir [sizeof grid->dir + 100];
    snprintf (state_dir, sizeof state_dir, "%s/relay-%s.state", grid->dir,
              name);
    argv [argc++] = "--state-dir";
    argv [argc++] = state_dir;
    if (grid->insecure)
        argv [argc++] = "--insecure";
    else {
        argv [argc++] = "--key";
        argv [argc++] = grid->relay_key [slot];
        argv [argc++] = "--upstream-key";
        argv [argc++] = to_relay ? grid->relay_key [upstream]
                                 : grid->broker_key;
        argv [argc++] = "--client-key";
        argv [argc++] = grid->admin_key;
    }
    for (size_t index = 0; extra && extra [index] && argc < 62; index++)
        argv [argc++] = extra [index];
    argv [argc] = NULL;
    //  A log of an earlier run of this relay must not count
    char log_path [400];
    snprintf (log_path, sizeof log_path, "%s/%s", grid->dir, log_name);
    char *before = grid_slurp (log_path);
    size_t skip = strlen (before);
    free (before);
    grid->relay_pids [slot] = s_spawn (grid, "gridrelay", log_name,
                                       (char *const *) argv);
    long long deadline = grid_now_ms () + GRID_START_MS;
    while (wait && grid_now_ms () < deadline) {
        char *log = grid_slurp (log_path);
        bool serving = strlen (log) > skip
                       && strstr (log + skip, "serving agents") != NULL;
        free (log);
        if (serving)
            return slot;
        if (waitpid (grid->relay_pids [slot], NULL, WNOHANG)
            == grid->relay_pids [slot]) {
            grid->relay_pids [slot] = 0;
            break;
        }
        s_nap (20);
    }
    if (!wait)
        return slot;
    fprintf (stderr, "gridrelay %s did not start serving\n", name);
    grid_dump_logs (grid);
    return -1;
}

void
grid_stop_relay (grid_t *grid, int slot, bool hard)
{
    if (slot < 0 || (size_t) slot >= grid->relay_count)
        return;
    grid_kill (grid->relay_pids [slot], hard ? SIGKILL : SIGTERM);
    grid->relay_pids [slot] = 0;
}

void
grid_stop_broker (grid_t *grid, bool hard)
{
    grid_kill (grid->broker_pid, hard ? SIGKILL : SIGTERM);
    grid->broker_pid = 0;
}

void
grid_stop_agent (grid_t *grid, int slot, bool hard)
{
    if (slot < 0 || (size_t) slot >= grid->agent_count)
        return;
    grid_kill (grid->agent_pids [slot], hard ? SIGKILL : SIGTERM);
    grid->agent_pids [slot] = 0;
}

void
grid_stop (grid_t *grid)
{
    for (size_t index = 0; index < grid->agent_count; index++)
        grid_stop_agent (grid, (int) index, false);
    for (size_t index = 0; index < grid->relay_count; index++)
        grid_stop_relay (grid, (int) index, false);
    grid_stop_broker (grid, false);
    //  GRID_KEEP=1 keeps the directory (logs, stores) for a post-mortem.
    const char *keep = getenv ("GRID_KEEP");
    if (grid->dir [0] && keep && *keep == '1')
        fprintf (stderr, "kept %s\n", grid->dir);
    else
    if (grid->dir [0]) {
        char command [400];
        snprintf (command, sizeof command, "rm -rf '%s'", grid->dir);
        if (system (command) != 0)
            fprintf (stderr, "could not remove %s\n", grid->dir);
        grid->dir [0] = 0;
    }
}

pv_doc_t *
grid_call_raw (grid_t *grid, const void *request, size_t size, int timeout_ms)
{
    return grid_call_raw_as (grid, grid->insecure ? NULL : grid->admin_key,
                             request, size, timeout_ms);
}

zsock_t *
grid_dealer (grid_t *grid, const char *endpoint, const char *key_file)
{
    zcert_t *cert = NULL;
    char server [KEYS_TEXT_SIZE], why [512];
    if (key_file) {
        cert = keys_load_pair (key_file, why, sizeof why);
        if (!cert || keys_read_public (grid->broker_key, server, why,
                                       sizeof why) != 0) {
            fprintf (stderr, "grid_dealer: %s\n", why);
            zcert_destroy (&cert);
            return NULL;
        }
    }
    zsock_t *socket = zsock_new (ZMQ_DEALER);
    if (socket && cert)
        keys_curve_client (socket, cert, server);
    zcert_destroy (&cert);
    if (socket) {
        zsock_set_linger (socket, 0);
        //  A peer that refuses us must not block a test's send
        zsock_set_sndtimeo (socket, 1000);
        if (zsock_connect (socket, "%s", endpoint) != 0)
            zsock_destroy (&socket);
    }
    return socket;
}

pv_doc_t *
grid_call_raw_as (grid_t *grid, const char *key_file, const void *request,
                  size_t size, int timeout_ms)
{
    //  One try: a test that sends hostile bytes wants to see what one
    //  request gets
    client_t *client = client_new (grid->client_ep);
    if (!client)
        return NULL;
    //  ... from this broker: a cluster's standby answers not_leader
    client_set_redirects (client, false);
    if (key_file && client_load_keys (client, key_file, grid->broker_key)) {
        fprintf (stderr, "grid_call_raw_as: %s\n", client_error (client));
        client_destroy (&client);
        return NULL;
    }
    client_set_timeout (client, timeout_ms);
    client_set_tries (client, 1);
    pv_doc_t *doc = NULL;
    client_exchange (client, request, size, &doc);
    client_destroy (&client);
    return doc;
}

static pv_doc_t *
s_call_v (grid_t *grid, const char *key_file, const char *type, va_list list)
{
    va_list args;
    size_t pairs = 0;
    va_copy (args, list);
    while (va_arg (args, const char *)) {
        va_arg (args, const char *);
        pairs++;
    }
    va_end (args);
    char id [64];
    snprintf (id, sizeof id, "it-%d-%d", (int) getpid (), ++grid->request_seq);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, type, id, pairs);
    va_copy (args, list);
    const char *key;
    while ((key = va_arg (args, const char *))) {
        pw_str (writer, key);
        pw_str (writer, va_arg (args, const char *));
    }
    va_end (args);
    pv_doc_t *doc = grid_call_raw_as (grid, key_file, pw_data (writer),
                                      pw_size (writer), GRID_CALL_MS);
    pw_destroy (&writer);
    return doc;
}

pv_doc_t *
grid_call (grid_t *grid, const char *type, ...)
{
    va_list args;
    va_start (args, type);
    pv_doc_t *doc = s_call_v (grid, grid->insecure ? NULL : grid->admin_key,
                              type, args);
    va_end (args);
    return doc;
}

pv_doc_t *
grid_call_as (grid_t *grid, const char *key_file, const char *type, ...)
{
    va_list args;
    va_start (args, type);
    pv_doc_t *doc = s_call_v (grid, key_file, type, args);
    va_end (args);
    return doc;
}

pv_doc_t *
grid_submit (grid_t *grid, const char *yaml)
{
    pv_doc_t *job = NULL;
    char err [256];
    if (conf_parse (yaml, strlen (yaml), &job, err, sizeof err) != 0) {
        fprintf (stderr, "bad YAML in a test: %s\n", err);
        abort ();
    }
    char id [64];
    snprintf (id, sizeof id, "it-submit-%d-%d", (int) getpid (),
              ++grid->request_seq);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "job.submit", id, 1);
    pw_str (writer, "job");
    pw_pv (writer, pv_doc_root (job));
    pv_doc_t *reply = grid_call_raw (grid, pw_data (writer), pw_size (writer),
                                     GRID_CALL_MS);
    pw_destroy (&writer);
    pv_doc_destroy (&job);
    return reply;
}

char *
grid_submit_id (grid_t *grid, const char *yaml)
{
    pv_doc_t *reply = grid_submit (grid, yaml);
    const pv_t *data = NULL;
    char *id = NULL;
    if (grid_reply_ok (reply, &data))
        id = pv_strdup (pv_map_get (data, "job"));
    else if (reply) {
        fprintf (stderr, "submit refused: ");
        pv_write_json (pv_doc_root (reply), stderr, 0);
        fprintf (stderr, "\n");
    }
    else
        fprintf (stderr, "submit: no answer\n");
    pv_doc_destroy (&reply);
    return id;
}

bool
grid_reply_ok (const pv_doc_t *reply, const pv_t **data_p)
{
    if (!reply)
        return false;
    const pv_t *root = pv_doc_root (reply);
    if (!pv_str_eq (pv_map_get (root, "type"), "ok"))
        return false;
    if (data_p)
        *data_p = pv_map_get (root, "data");
    return true;
}

char *
grid_reply_code (const pv_doc_t *reply)
{
    if (!reply)
        return NULL;
    return pv_strdup (pv_map_get (pv_doc_root (reply), "code"));
}

static bool
s_final (const pv_t *status)
{
    return pv_str_eq (status, "completed") || pv_str_eq (status, "failed")
           || pv_str_eq (status, "partial_failure")
           || pv_str_eq (status, "cancelled");
}

pv_doc_t *
grid_wait_job (grid_t *grid, const char *job_id, int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    pv_doc_t *reply = NULL;
    while (true) {
        pv_doc_destroy (&reply);
        reply = grid_call (grid, "job.get", "job", job_id, NULL);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data) && s_final (pv_map_get (data, "status")))
            return reply;
        if (grid_now_ms () > deadline)
            return reply;
        s_nap (50);
    }
}

bool
grid_wait_node (grid_t *grid, const char *node, const char *status,
                int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (grid_now_ms () <= deadline) {
        pv_doc_t *reply = grid_call (grid, "node.get", "node", node, NULL);
        const pv_t *data = NULL;
        bool done = grid_reply_ok (reply, &data)
                    && grid_str_is (data, "status", status);
        pv_doc_destroy (&reply);
        if (done)
            return true;
        s_nap (50);
    }
    return false;
}

static char *
s_slurp (const char *path)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return strdup ("");
    fseek (file, 0, SEEK_END);
    long size = ftell (file);
    fseek (file, 0, SEEK_SET);
    char *text = (char *) malloc ((size_t) (size > 0 ? size : 0) + 1);
    size_t got = size > 0 ? fread (text, 1, (size_t) size, file) : 0;
    text [got] = 0;
    fclose (file);
    return text;
}

//  Runs PROGRAM (in the binaries' directory) with ARGV, stdout and stderr
//  captured into OUT_P and ERR_P (when not NULL). Returns its exit code,
//  or -1 when it did not exit within TIMEOUT_MS (it is killed).
static int
s_run_argv (grid_t *grid, const char *program, const char *const *argv,
            char **out_p, char **err_p, int timeout_ms)
{
    char out_path [400], err_path [400], path [700];
    snprintf (out_path, sizeof out_path, "%s/cli.out", grid->dir);
    snprintf (err_path, sizeof err_path, "%s/cli.err", grid->dir);
    snprintf (path, sizeof path, "%s/%s", grid->bin, program);
    pid_t pid = fork ();
    if (pid == 0) {
        prctl (PR_SET_PDEATHSIG, SIGKILL);
        int out = open (out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int err = open (err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2 (out, 1);
        dup2 (err, 2);
        close (out);
        close (err);
        unsetenv ("GRID_BROKER");
        unsetenv ("GRID_CONFIG");
        unsetenv ("GRID_KEY");
        unsetenv ("GRID_BROKER_KEY");
        //  No key may come from the home of whoever runs the tests
        setenv ("HOME", grid->dir, 1);
        execv (path, (char *const *) argv);
        _exit (127);
    }
    long long deadline = grid_now_ms () + timeout_ms;
    int status = 0, code = -1;
    while (true) {
        pid_t done = waitpid (pid, &status, WNOHANG);
        if (done == pid) {
            code = WIFEXITED (status) ? WEXITSTATUS (status) : 128 + WTERMSIG (status);
            break;
        }
        if (grid_now_ms () > deadline) {
            kill (pid, SIGKILL);
            waitpid (pid, NULL, 0);
            break;
        }
        s_nap (10);
    }
    if (out_p)
        *out_p = s_slurp (out_path);
    if (err_p)
        *err_p = s_slurp (err_path);
    return code;
}

static int
s_cli_v (grid_t *grid, const char *key_file, bool with_keys, char **out_p,
         char **err_p, int timeout_ms, va_list args)
{
    const char *argv [64] = {"gridcli", "--broker", grid->client_ep};
    size_t argc = 3;
    if (with_keys && grid->insecure)
        argv [argc++] = "--insecure";
    else
    if (with_keys) {
        argv [argc++] = "--key";
        argv [argc++] = key_file;
        argv [argc++] = "--broker-key";
        argv [argc++] = grid->broker_key;
    }
    const char *arg;
    while ((arg = va_arg (args, const char *)) && argc < 62)
        argv [argc++] = arg;
    argv [argc] = NULL;
    return s_run_argv (grid, "gridcli", argv, out_p, err_p, timeout_ms);
}

int
grid_run (grid_t *grid, const char *program, char **out_p, char **err_p,
          int timeout_ms, ...)
{
    const char *argv [64] = {program};
    size_t argc = 1;
    va_list args;
    va_start (args, timeout_ms);
    const char *arg;
    while ((arg = va_arg (args, const char *)) && argc < 63)
        argv [argc++] = arg;
    va_end (args);
    argv [argc] = NULL;
    return s_run_argv (grid, program, argv, out_p, err_p, timeout_ms);
}

int
grid_cli (grid_t *grid, char **out_p, char **err_p, int timeout_ms, ...)
{
    va_list args;
    va_start (args, timeout_ms);
    int code = s_cli_v (grid, grid->admin_key, true, out_p, err_p,
                        timeout_ms, args);
    va_end (args);
    return code;
}

int
grid_cli_as (grid_t *grid, const char *key_file, char **out_p, char **err_p,
             int timeout_ms, ...)
{
    va_list args;
    va_start (args, timeout_ms);
    int code = s_cli_v (grid, key_file, key_file != NULL, out_p, err_p,
                        timeout_ms, args);
    va_end (args);
    return code;
}

const pv_t *
grid_cell (const pv_t *record, int step, const char *node)
{
    char key [16];
    snprintf (key, sizeof key, "%d", step);
    return pv_map_get (pv_map_get (pv_map_get (record, "results"), key), node);
}

bool
grid_str_is (const pv_t *map, const char *key, const char *text)
{
    return pv_str_eq (pv_map_get (map, key), text);
}

bool
grid_file_sha256 (const char *path, char *hex)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return false;
    sha256_t context;
    sha256_init (&context);
    char buffer [65536];
    size_t got;
    while ((got = fread (buffer, 1, sizeof buffer, file)) > 0)
        sha256_update (&context, buffer, got);
    fclose (file);
    uint8_t digest [SHA256_BYTES];
    sha256_final (&context, digest);
    sha256_to_hex (digest, hex);
    return true;
}

char *
grid_slurp (const char *path)
{
    FILE *file = fopen (path, "rb");
    if (!file)
        return strdup ("");
    char *text = NULL;
    size_t size = 0;
    FILE *memory = open_memstream (&text, &size);
    char buf [4096];
    size_t got;
    while (memory && (got = fread (buf, 1, sizeof buf, file)) > 0)
        fwrite (buf, 1, got, memory);
    if (memory)
        fclose (memory);
    fclose (file);
    return text ? text : strdup ("");
}

bool
grid_line_with (const char *text, ...)
{
    const char *line = text;
    while (line && *line) {
        const char *end = strchr (line, '\n');
        size_t len = end ? (size_t) (end - line) : strlen (line);
        char *copy = strndup (line, len);
        bool all = copy != NULL;
        va_list args;
        va_start (args, text);
        const char *word;
        while ((word = va_arg (args, const char *)))
            if (!copy || !strstr (copy, word))
                all = false;
        va_end (args);
        free (copy);
        if (all)
            return true;
        line = end ? end + 1 : NULL;
    }
    return false;
}

void
grid_dump_logs (grid_t *grid)
{
    char command [600];
    snprintf (command, sizeof command,
              "for f in '%s'/*.log; do echo \"--- $f\"; tail -n 25 \"$f\"; done >&2",
              grid->dir);
    if (system (command) != 0)
        fprintf (stderr, "(no logs)\n");
}
