/*  =========================================================================
    test_it_cluster_sync - a broker cluster's sync key in etcd, through
    the real programs: one etcd (loopback) for the suite, gridbrokers per
    case, each case a cluster of its own name

    - A standby stopped (SIGSTOP): the active acknowledges nothing without
      it until etcd's sync key no longer names it (with etcd stopped too,
      no answer comes at all); then it answers alone.
    - strict: a standby stopped, submits are not answered until it comes
      back; then they are.
    - A standby the sync key does not name never wins, even as the only
      member left; one it names does.
    - The active cut off from etcd (a TCP proxy the test controls): it
      demotes, the standby takes over, and the epochs of the ok answers
      seen never go back; with etcd down altogether, no member answers ok
      until it is back.
    =========================================================================
*/

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../ha/elector.h"
#include "../ha/etcd.h"
#include "lib/etcdproc.h"
#include "../proto/proto.h"
#include "lib/harness.h"

#define S_WAIT_MS 20000
#define S_MEMBERS 3

//  ---------------------------------------------------------------------
//  A TCP proxy on loopback, in a thread: cut, it drops every connection
//  and refuses new ones

#define S_PROXY_PAIRS 64

typedef struct {
    int listener;
    int port;
    int target_port;
    int pairs [S_PROXY_PAIRS][2];    //  Client side, etcd side (-1: free)
    atomic_int cut;
    atomic_int stop;
    pthread_t thread;
} s_proxy_t;

static void
s_proxy_close (s_proxy_t *self, int index)
{
    for (int side = 0; side < 2; side++) {
        if (self->pairs [index][side] >= 0)
            close (self->pairs [index][side]);
        self->pairs [index][side] = -1;
    }
}

static void
s_proxy_accept (s_proxy_t *self)
{
    int client = accept (self->listener, NULL, NULL);
    if (client < 0)
        return;
    int index = 0;
    while (index < S_PROXY_PAIRS && self->pairs [index][0] >= 0)
        index++;
    if (atomic_load (&self->cut) || index == S_PROXY_PAIRS) {
        close (client);
        return;
    }
    int server = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_port = htons ((uint16_t) self->target_port);
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    if (server < 0 || connect (server, (struct sockaddr *) &address,
                               sizeof address) != 0) {
        if (server >= 0)
            close (server);
        close (client);
        return;
    }
    self->pairs [index][0] = client;
    self->pairs [index][1] = server;
}

static void *
s_proxy_run (void *arg)
{
    s_proxy_t *self = (s_proxy_t *) arg;
    char buffer [16384];
    while (!atomic_load (&self->stop)) {
        if (atomic_load (&self->cut))
            for (int index = 0; index < S_PROXY_PAIRS; index++)
                s_proxy_close (self, index);
        struct pollfd fds [1 + 2 * S_PROXY_PAIRS];
        int owner [1 + 2 * S_PROXY_PAIRS];
        int count = 0;
        fds [count].fd = self->listener;
        fds [count].events = POLLIN;
        owner [count++] = -1;
        for (int index = 0; index < S_PROXY_PAIRS; index++)
            for (int side = 0; side < 2 && self->pairs [index][0] >= 0;
                 side++) {
                fds [count].fd = self->pairs [index][side];
                fds [count].events = POLLIN;
                owner [count++] = index * 2 + side;
            }
        if (poll (fds, (nfds_t) count, 20) <= 0)
            continue;
        for (int at = 0; at < count; at++) {
            if (!fds [at].revents)
                continue;
            if (owner [at] < 0) {
                s_proxy_accept (self);
                continue;
            }
            int index = owner [at] / 2, side = owner [at] % 2;
            if (self->pairs [index][side] != fds [at].fd)
                continue;    //  Closed in this round
            ssize_t got = read (fds [at].fd, buffer, sizeof buffer);
            if (got <= 0 || atomic_load (&self->cut)
                || write (self->pairs [index][1 - side], buffer,
                          (size_t) got) != got)
                s_proxy_close (self, index);
        }
    }
    for (int index = 0; index < S_PROXY_PAIRS; index++)
        s_proxy_close (self, index);
    return NULL;
}

static int
s_proxy_start (s_proxy_t *self, int target_port)
{
    memset (self, 0, sizeof *self);
    for (int index = 0; index < S_PROXY_PAIRS; index++)
        self->pairs [index][0] = self->pairs [index][1] = -1;
    self->target_port = target_port;
    self->listener = socket (AF_INET, SOCK_STREAM, 0);
    int yes = 1;
    setsockopt (self->listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof address;
    if (bind (self->listener, (struct sockaddr *) &address, sizeof address)
        || listen (self->listener, 16)
        || getsockname (self->listener, (struct sockaddr *) &address, &len))
        return -1;
    self->port = ntohs (address.sin_port);
    return pthread_create (&self->thread, NULL, s_proxy_run, self);
}

static void
s_proxy_stop (s_proxy_t *self)
{
    if (self->listener <= 0)
        return;
    atomic_store (&self->stop, 1);
    pthread_join (self->thread, NULL);
    close (self->listener);
    self->listener = 0;
}

//  ---------------------------------------------------------------------
//  A submit answered in a thread, so the test looks on while it waits

typedef struct {
    grid_t grid;                 //  A copy: the thread's own request ids
    pv_doc_t *reply;
    atomic_int done;
    pthread_t thread;
} s_submit_t;

static void *
s_submit_run (void *arg)
{
    s_submit_t *self = (s_submit_t *) arg;
    self->reply = grid_submit (&self->grid,
                               "target: {scope: node, value: n1}\n"
                               "tasks:\n  - {backend: test, action: echo, "
                               "params: {msg: hi}}\n");
    atomic_store (&self->done, 1);
    return NULL;
}

static void
s_submit_start (s_submit_t *self, grid_t *grid)
{
    memset (self, 0, sizeof *self);
    self->grid = *grid;
    self->grid.request_seq = 1000 + grid->request_seq++;
    assert_int_equal (pthread_create (&self->thread, NULL, s_submit_run,
                                      self), 0);
}

//  Waits for the submit's answer (at most MS): true when it came ok.
static bool
s_submit_ok (s_submit_t *self, int ms)
{
    long long deadline = grid_now_ms () + ms;
    while (!atomic_load (&self->done) && grid_now_ms () < deadline)
        usleep (20 * 1000);
    if (!atomic_load (&self->done))
        return false;
    pthread_join (self->thread, NULL);
    self->thread = 0;
    if (self->reply && !grid_reply_ok (self->reply, NULL)) {
        fprintf (stderr, "submit: ");
        pv_write_json (pv_doc_root (self->reply), stderr, 0);
        fprintf (stderr, "\n");
    }
    return grid_reply_ok (self->reply, NULL);
}

static void
s_submit_end (s_submit_t *self)
{
    if (self->thread)
        pthread_join (self->thread, NULL);
    pv_doc_destroy (&self->reply);
}

//  ---------------------------------------------------------------------
//  The suite: one etcd; each case a cluster of up to three members

typedef struct {
    char dir [300];
    etcdproc_t etcd;
    etcd_t *client;              //  The test's own etcd client
    char cluster [32];
    grid_t member [S_MEMBERS];
    size_t count;
    char config [S_MEMBERS][400];
    char repl_ep [S_MEMBERS][400];
    s_proxy_t proxy;
} s_state_t;

static const char *s_names [S_MEMBERS] = {"a", "b", "c"};
static int s_case;

static int
s_group_setup (void **state)
{
    s_state_t *self = (s_state_t *) calloc (1, sizeof *self);
    snprintf (self->dir, sizeof self->dir, "/tmp/grid-test-sync-XXXXXX");
    if (!mkdtemp (self->dir))
        return -1;
    *state = self;
    if (!etcdproc_available ())
        return 0;
    if (etcdproc_start (&self->etcd, self->dir) != 0)
        return -1;
    char err [256];
    self->client = etcd_new (self->etcd.url, 2000, err, sizeof err);
    return self->client ? 0 : -1;
}

static int
s_group_teardown (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    etcd_destroy (&self->client);
    etcdproc_stop (&self->etcd, true);
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", self->dir);
    if (system (command) != 0)
        fprintf (stderr, "could not remove %s\n", self->dir);
    free (self);
    return 0;
}

static int
s_case_teardown (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    for (size_t which = 0; which < S_MEMBERS; which++)
        if (self->member [which].dir [0]) {
            if (self->member [which].broker_pid > 0)
                grid_kill (self->member [which].broker_pid, SIGCONT);
            grid_stop (&self->member [which]);
        }
    memset (self->member, 0, sizeof self->member);
    s_proxy_stop (&self->proxy);
    if (self->etcd.pid > 0)
        etcdproc_signal (&self->etcd, SIGCONT);
    return 0;
}

static bool
s_skip (s_state_t *self)
{
    if (self->etcd.pid > 0)
        return false;
    printf ("    skipped: etcd is not installed (make test-deps)\n");
    return true;
}

static void
s_write_config (s_state_t *self, size_t which, int ttl_s, bool strict,
                const char *etcd_url)
{
    FILE *file = fopen (self->config [which], "w");
    assert_non_null (file);
    fprintf (file,
             "ha:\n"
             "  cluster: %s\n"
             "  name: %s\n"
             "  etcd: %s\n"
             "  ttl: %ds\n"
             "  replicate: %s\n"
             "  sync_timeout: 1s\n"
             "  strict: %s\n"
             "  peers:\n", self->cluster, s_names [which], etcd_url, ttl_s,
             self->repl_ep [which], strict ? "true" : "false");
    for (size_t other = 0; other < self->count; other++)
        if (other != which)
            fprintf (file,
                     "    - name: %s\n"
                     "      client: %s\n"
                     "      replicate: %s\n",
                     s_names [other], self->member [other].client_ep,
                     self->repl_ep [other]);
    fclose (file);
}

//  A new cluster of COUNT members, configured (member a through the
//  proxy when PROXIED), none started.
static void
s_cluster (s_state_t *self, size_t count, int ttl_s, bool strict,
           bool proxied)
{
    snprintf (self->cluster, sizeof self->cluster, "sync%d", ++s_case);
    self->count = count;
    for (size_t which = 0; which < count; which++) {
        assert_int_equal (grid_init (&self->member [which]), 0);
        self->member [which].insecure = true;
        snprintf (self->config [which], sizeof self->config [which],
                  "%s/%s-%s.yaml", self->dir, self->cluster, s_names [which]);
        char member [sizeof self->member [which].dir];
        snprintf (member, sizeof member, "%s", self->member [which].dir);
        snprintf (self->repl_ep [which], sizeof self->repl_ep [which],
                  "ipc://%.300s/repl.sock", member);
    }
    char proxy_url [64] = "";
    if (proxied) {
        assert_int_equal (s_proxy_start (&self->proxy,
                                         self->etcd.client_port), 0);
        snprintf (proxy_url, sizeof proxy_url, "http://127.0.0.1:%d",
                  self->proxy.port);
    }
    for (size_t which = 0; which < count; which++)
        s_write_config (self, which, ttl_s, strict,
                        proxied && which == 0 ? proxy_url : self->etcd.url);
}

static void
s_spawn (s_state_t *self, size_t which)
{
    const char *extra [] = {"--config", self->config [which], NULL};
    assert_int_equal (grid_spawn_broker (&self->member [which], extra), 0);
}

static void
s_dump (s_state_t *self)
{
    for (size_t which = 0; which < self->count; which++)
        if (self->member [which].dir [0])
            grid_dump_logs (&self->member [which]);
}

//  The code member WHICH answers status with ("ok" when it serves), or
//  NULL when it did not answer within MS.
static char *
s_status_code (s_state_t *self, size_t which, int ms)
{
    pw_t *writer = pw_new ();
    char id [32];
    snprintf (id, sizeof id, "sync-%d", ++self->member [which].request_seq);
    proto_request_begin (writer, "status", id, 0);
    pv_doc_t *reply = grid_call_raw (&self->member [which], pw_data (writer),
                           pw_size (writer), ms);
    pw_destroy (&writer);
    if (!reply)
        return NULL;
    char *code = grid_reply_ok (reply, NULL) ? strdup ("ok")
                                             : grid_reply_code (reply);
    pv_doc_destroy (&reply);
    return code;
}

static bool
s_wait_code (s_state_t *self, size_t which, const char *code)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    char *got = NULL;
    while (grid_now_ms () < deadline) {
        free (got);
        got = s_status_code (self, which, 2000);
        if (got && strcmp (got, code) == 0) {
            free (got);
            return true;
        }
        usleep (100 * 1000);
    }
    fprintf (stderr, "broker %s answers %s, not %s\n", s_names [which],
             got ? got : "nothing", code);
    free (got);
    s_dump (self);
    return false;
}

//  How many times member WHICH's log holds TEXT.
static int
s_log_count (s_state_t *self, size_t which, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", self->member [which].dir);
    char *log = grid_slurp (path);
    int count = 0;
    for (const char *at = log ? strstr (log, text) : NULL; at;
         at = strstr (at + 1, text))
        count++;
    free (log);
    return count;
}

//  Waits until member WHICH's log holds TEXT at least TIMES times.
static bool
s_wait_log (s_state_t *self, size_t which, const char *text, int times)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        if (s_log_count (self, which, text) >= times)
            return true;
        usleep (100 * 1000);
    }
    fprintf (stderr, "broker %s never logged '%s' %d times\n",
             s_names [which], text, times);
    s_dump (self);
    return false;
}

//  The sync key's value into BUF ("" when there is none); false when
//  etcd did not answer.
static bool
s_sync_key (s_state_t *self, char *buf, size_t len)
{
    char key [128];
    elector_sync_key (self->cluster, key, sizeof key);
    etcd_kv_t kv;
    int rc = etcd_get (self->client, key, &kv);
    snprintf (buf, len, "%s", rc == 1 ? kv.value : "");
    etcd_kv_clear (&kv);
    return rc >= 0;
}

//  True when the sync key lets member NAME campaign.
static bool
s_key_names (s_state_t *self, const char *name)
{
    char value [1024], why [512];
    assert_true (s_sync_key (self, value, sizeof value));
    return *value && elector_sync_allows (value, strlen (value), name, why,
                                          sizeof why) == 1;
}

//  Waits until the sync key names NAME (or, NAMED false, no longer).
static bool
s_wait_key (s_state_t *self, const char *name, bool named)
{
    long long deadline = grid_now_ms () + S_WAIT_MS;
    while (grid_now_ms () < deadline) {
        if (s_key_names (self, name) == named)
            return true;
        usleep (50 * 1000);
    }
    char value [1024];
    s_sync_key (self, value, sizeof value);
    fprintf (stderr, "the sync key still %s %s: %s\n",
             named ? "does not name" : "names", name, value);
    s_dump (self);
    return false;
}

//  Members 0..COUNT-1 up, a the active, the others named by the key.
static void
s_cluster_up (s_state_t *self)
{
    s_spawn (self, 0);
    assert_true (s_wait_code (self, 0, "ok"));
    for (size_t which = 1; which < self->count; which++) {
        s_spawn (self, which);
        assert_true (s_wait_code (self, which, "not_leader"));
    }
    for (size_t which = 1; which < self->count; which++)
        assert_true (s_wait_key (self, s_names [which], true));
    //  The key says the leader's epoch and name
    char value [1024];
    assert_true (s_sync_key (self, value, sizeof value));
    assert_non_null (strstr (value, "\"leader\":\"a\""));
    assert_non_null (strstr (value, "\"epoch\":"));
}

//  Agent n1, which knows members a and b, registered with a.
static void
s_agent (s_state_t *self)
{
    char brokers [800], publishes [800];
    snprintf (brokers, sizeof brokers, "%s,%s", self->member [0].agents_ep,
              self->member [1].agents_ep);
    snprintf (publishes, sizeof publishes, "%s,%s",
              self->member [0].publish_ep, self->member [1].publish_ep);
    const char *extra [] = {"--broker", brokers, "--publish", publishes,
                            NULL};
    assert_true (grid_start_agent (&self->member [0], "n1", "web", NULL, extra)
                 >= 0);
    assert_true (grid_wait_node (&self->member [0], "n1", "online", S_WAIT_MS));
}

static void
s_stop_member (s_state_t *self, size_t which)
{
    grid_kill (self->member [which].broker_pid, SIGKILL);
    waitpid (self->member [which].broker_pid, NULL, 0);
    self->member [which].broker_pid = 0;
}

//  ---------------------------------------------------------------------

static void
test_sync_standby_stopped_leaves_the_key_first (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    //  A long lease: etcd is stopped for a while without a demotion
    s_cluster (self, 2, 10, false, false);
    s_cluster_up (self);
    s_agent (self);
    //  The standby and etcd stopped: the sync key cannot drop b, and the
    //  active does not answer without b
    grid_kill (self->member [1].broker_pid, SIGSTOP);
    etcdproc_signal (&self->etcd, SIGSTOP);
    s_submit_t submit;
    s_submit_start (&submit, &self->member [0]);
    assert_false (s_submit_ok (&submit, 2500));
    assert_true (s_wait_log (self, 0, "standby b leaves the sync set", 1));
    //  etcd back: the key drops b first, then the submit is answered
    etcdproc_signal (&self->etcd, SIGCONT);
    bool ok = s_submit_ok (&submit, S_WAIT_MS);
    if (!ok)
        s_dump (self);
    assert_true (ok);
    assert_false (s_key_names (self, "b"));
    assert_true (s_key_names (self, "a"));
    s_submit_end (&submit);
    assert_true (s_wait_log (self, 0, "the sync key no longer names standby "
                             "b", 1));
    //  Continued, b catches up and the key names it again
    grid_kill (self->member [1].broker_pid, SIGCONT);
    assert_true (s_wait_key (self, "b", true));
}

static void
test_sync_strict_holds_until_a_standby_is_back (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    s_cluster (self, 2, 10, true, false);
    s_cluster_up (self);
    s_agent (self);
    grid_kill (self->member [1].broker_pid, SIGSTOP);
    s_submit_t submit;
    s_submit_start (&submit, &self->member [0]);
    //  b leaves the key, and still nothing is answered
    assert_true (s_wait_key (self, "b", false));
    assert_false (s_submit_ok (&submit, 1500));
    //  b back: in sync again, the submit completes
    grid_kill (self->member [1].broker_pid, SIGCONT);
    bool ok = s_submit_ok (&submit, S_WAIT_MS);
    if (!ok)
        s_dump (self);
    assert_true (ok);
    assert_true (s_key_names (self, "b"));
    s_submit_end (&submit);
}

static void
test_sync_unnamed_standby_never_wins (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    s_cluster (self, 3, 2, false, false);
    s_cluster_up (self);
    //  c stopped long enough to leave the key
    grid_kill (self->member [2].broker_pid, SIGSTOP);
    assert_true (s_wait_key (self, "c", false));
    //  a and b die; c continued is the only member left, and the key
    //  names a and b only: c does not stand for election
    s_stop_member (self, 0);
    s_stop_member (self, 1);
    grid_kill (self->member [2].broker_pid, SIGCONT);
    assert_true (s_wait_log (self, 2, "c may not stand for election", 1));
    //  Two leases long, it still serves nothing
    long long until = grid_now_ms () + 4000;
    while (grid_now_ms () < until) {
        char *code = s_status_code (self, 2, 2000);
        if (code && strcmp (code, "ok") == 0)
            s_dump (self);
        assert_false (code && strcmp (code, "ok") == 0);
        free (code);
        usleep (200 * 1000);
    }
    //  b, which the key names, comes back and wins; c follows it and is
    //  named again
    s_spawn (self, 1);
    assert_true (s_wait_code (self, 1, "ok"));
    assert_true (s_wait_code (self, 2, "not_leader"));
    assert_true (s_wait_key (self, "c", true));
    char value [1024];
    assert_true (s_sync_key (self, value, sizeof value));
    assert_non_null (strstr (value, "\"leader\":\"b\""));
}

//  One ok answer seen: who, and its epoch.
typedef struct {
    size_t which;
    int64_t epoch;
} s_seen_t;

//  Asks every member cluster.status; appends the ok answers to SEEN.
static void
s_look (s_state_t *self, s_seen_t *seen, size_t *count, size_t max)
{
    for (size_t which = 0; which < self->count; which++) {
        if (self->member [which].broker_pid <= 0)
            continue;
        pw_t *writer = pw_new ();
        char id [32];
        snprintf (id, sizeof id, "look-%d",
                  ++self->member [which].request_seq);
        proto_request_begin (writer, "cluster.status", id, 0);
        pv_doc_t *reply = grid_call_raw (&self->member [which],
                                         pw_data (writer), pw_size (writer),
                                         1000);
        pw_destroy (&writer);
        const pv_t *data = NULL;
        if (grid_reply_ok (reply, &data) && *count < max) {
            seen [*count].which = which;
            seen [*count].epoch = 0;
            pv_get_int (pv_map_get (data, "epoch"), &seen [*count].epoch);
            (*count)++;
        }
        pv_doc_destroy (&reply);
    }
}

//  The ok answers in the order seen never go back to an earlier epoch,
//  and each epoch is one member's.
static void
s_assert_epochs (s_state_t *self, const s_seen_t *seen, size_t count)
{
    for (size_t index = 1; index < count; index++) {
        bool back = seen [index].epoch < seen [index - 1].epoch;
        bool shared = seen [index].epoch == seen [index - 1].epoch
                      && seen [index].which != seen [index - 1].which;
        if (back || shared) {
            fprintf (stderr, "answer %zu: %s ok in epoch %lld after %s ok "
                     "in epoch %lld\n", index, s_names [seen [index].which],
                     (long long) seen [index].epoch,
                     s_names [seen [index - 1].which],
                     (long long) seen [index - 1].epoch);
            s_dump (self);
        }
        assert_false (back);
        assert_false (shared);
    }
}

static void
test_sync_active_cut_from_etcd (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    //  a reaches etcd through the proxy only
    s_cluster (self, 2, 2, false, true);
    s_cluster_up (self);
    static s_seen_t seen [2000];
    size_t count = 0;
    s_look (self, seen, &count, 2000);
    atomic_store (&self->proxy.cut, 1);
    //  a demotes; b takes over; a stays a standby
    long long deadline = grid_now_ms () + S_WAIT_MS;
    bool b_leads = false;
    while (grid_now_ms () < deadline && !b_leads) {
        size_t before = count;
        s_look (self, seen, &count, 2000);
        for (size_t index = before; index < count; index++)
            b_leads = b_leads || seen [index].which == 1;
        usleep (20 * 1000);
    }
    if (!b_leads)
        s_dump (self);
    assert_true (b_leads);
    assert_true (s_wait_log (self, 0, "is no longer the active", 1));
    for (int round = 0; round < 10; round++)
        s_look (self, seen, &count, 2000);
    s_assert_epochs (self, seen, count);
    assert_int_equal (seen [count - 1].which, 1);
    //  a cannot follow b's key (it reads etcd through the proxy), and
    //  stays out of the key: reconnected, it catches up and is named
    atomic_store (&self->proxy.cut, 0);
    assert_true (s_wait_key (self, "a", true));
    //  etcd down altogether: the active demotes within the lease and no
    //  member answers ok; back, one serves again
    etcdproc_signal (&self->etcd, SIGSTOP);
    assert_true (s_wait_log (self, 1, "is no longer the active", 1));
    for (int round = 0; round < 5; round++) {
        for (size_t which = 0; which < 2; which++) {
            char *code = s_status_code (self, which, 1000);
            assert_false (code && strcmp (code, "ok") == 0);
            free (code);
        }
        usleep (100 * 1000);
    }
    etcdproc_signal (&self->etcd, SIGCONT);
    deadline = grid_now_ms () + S_WAIT_MS;
    size_t before = count;
    while (grid_now_ms () < deadline && count == before) {
        s_look (self, seen, &count, 2000);
        usleep (50 * 1000);
    }
    assert_true (count > before);
    s_assert_epochs (self, seen, count);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_teardown (
            test_sync_standby_stopped_leaves_the_key_first, s_case_teardown),
        cmocka_unit_test_teardown (
            test_sync_strict_holds_until_a_standby_is_back, s_case_teardown),
        cmocka_unit_test_teardown (test_sync_unnamed_standby_never_wins,
                                   s_case_teardown),
        cmocka_unit_test_teardown (test_sync_active_cut_from_etcd,
                                   s_case_teardown),
    };
    return cmocka_run_group_tests (tests, s_group_setup, s_group_teardown);
}
