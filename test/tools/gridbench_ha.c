/*  =========================================================================
    gridbench_ha - gridbench's broker cluster (see gridbench_ha.h)
    =========================================================================
*/
#include "gridbench_ha.h"

#include <czmq.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../client/client.h"
#include "../../proto/pv.h"
#include "../../proto/pw.h"

#define S_ETCD "/usr/bin/etcd"
#define S_GRACE_MS 10000
#define S_AGENTS 3
#define S_FAILOVER_TTL_S 10         //  The default lease
#define S_FAILOVER_LIMIT_MS 120000  //  One failover at most
#define S_SYNC_LIMIT_MS 120000      //  A restarted member in sync at most

static const char *s_names [2] = {"a", "b"};

static int64_t
s_now_ms (void)
{
    return zclock_mono ();
}

#define S_PORT_LOW 20000        //  Ports are taken below Linux's ephemeral
#define S_PORT_HIGH 32767       //  range (32768 up), see s_free_port

//  A free loopback port (bound once, then released), or -1. A member is
//  killed and started again on its ports: while it is down, the agents
//  and clients that connect to it again and again could, were its port
//  an ephemeral one, be given that very port as their own (a TCP
//  connection to itself), and the member could not bind it again. So the
//  port is taken below the ephemeral range, at random; the kernel's
//  choice only when none is free there.
static int
s_free_port (void)
{
    int port = -1;
    for (int tries = 0; tries <= 200 && port < 0; tries++) {
        int fd = socket (AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return -1;
        struct sockaddr_in address;
        memset (&address, 0, sizeof address);
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
        if (tries < 200)
            address.sin_port = htons ((uint16_t) (S_PORT_LOW
                                      + randof (S_PORT_HIGH - S_PORT_LOW)));
        socklen_t len = sizeof address;
        if (bind (fd, (struct sockaddr *) &address, sizeof address) == 0
            && getsockname (fd, (struct sockaddr *) &address, &len) == 0)
            port = ntohs (address.sin_port);
        close (fd);
    }
    return port;
}

static bool
s_listening (int port)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in address;
    memset (&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    address.sin_port = htons ((uint16_t) port);
    bool up = connect (fd, (struct sockaddr *) &address, sizeof address) == 0;
    close (fd);
    return up;
}

static void
s_tcp (char *endpoint, size_t len, int port)
{
    snprintf (endpoint, len, "tcp://127.0.0.1:%d", port);
}

//  Starts etcd in SELF->dir/etcd; waits until it listens.
static int
s_etcd_start (bench_ha_t *self)
{
    if (access (S_ETCD, X_OK) != 0) {
        fprintf (stderr, "gridbench: the cluster run needs etcd (make "
                 "bench-ha installs etcd-server)\n");
        return -1;
    }
    int client = s_free_port (), peer = s_free_port ();
    if (client < 0 || peer < 0 || client == peer)
        return -1;
    snprintf (self->etcd_url, sizeof self->etcd_url, "http://127.0.0.1:%d",
              client);
    char peer_url [64], data [400], log [400], cluster [96];
    snprintf (peer_url, sizeof peer_url, "http://127.0.0.1:%d", peer);
    snprintf (data, sizeof data, "%s/etcd", self->dir);
    snprintf (log, sizeof log, "%s/etcd.log", self->dir);
    snprintf (cluster, sizeof cluster, "bench=%s", peer_url);
    char *argv [] = {S_ETCD, "--name", "bench", "--data-dir", data,
                     "--listen-client-urls", self->etcd_url,
                     "--advertise-client-urls", self->etcd_url,
                     "--listen-peer-urls", peer_url,
                     "--initial-advertise-peer-urls", peer_url,
                     "--initial-cluster", cluster, NULL};
    self->etcd_pid = self->procs->spawn (argv, log);
    if (self->etcd_pid < 0)
        return -1;
    int64_t deadline = s_now_ms () + 20000;
    while (s_now_ms () < deadline && !*self->procs->interrupted) {
        if (!self->procs->alive (self->etcd_pid))
            break;
        if (s_listening (client))
            return 0;
        zclock_sleep (100);
    }
    fprintf (stderr, "gridbench: etcd did not start (see %s)\n", log);
    return -1;
}

static int
s_write_config (bench_ha_t *self, int which)
{
    int other = 1 - which;
    FILE *file = fopen (self->config [which], "w");
    if (!file)
        return -1;
    fprintf (file,
             "ha:\n"
             "  cluster: bench\n"
             "  name: %s\n"
             "  etcd: %s\n"
             "  ttl: %ds\n"
             "  replicate: %s\n"
             "  peers:\n"
             "    - name: %s\n"
             "      client: %s\n"
             "      replicate: %s\n",
             s_names [which], self->etcd_url, self->ttl_s,
             self->repl_ep [which], s_names [other],
             self->client_ep [other], self->repl_ep [other]);
    if (self->broker_key [0])
        fprintf (file, "      key: %s\n", self->broker_key);
    return fclose (file) == 0 ? 0 : -1;
}

//  Endpoints of member WHICH (those not given yet), its config's path.
static int
s_member (bench_ha_t *self, int which)
{
    char *endpoints [] = {self->client_ep [which], self->agents_ep [which],
                          self->publish_ep [which], self->repl_ep [which]};
    for (size_t at = 0; at < 4; at++)
        if (!endpoints [at][0]) {
            int port = s_free_port ();
            if (port < 0)
                return -1;
            s_tcp (endpoints [at], 64, port);
        }
    snprintf (self->config [which], sizeof self->config [which], "%s/%s.yaml",
              self->dir, s_names [which]);
    if (!self->log [which][0])
        snprintf (self->log [which], sizeof self->log [which],
                  "%s/broker-%s.log", self->dir, s_names [which]);
    return 0;
}

static int
s_setup (bench_ha_t *self, const bench_ha_procs_t *procs, const char *bin,
         const char *dir, int ttl_s)
{
    self->procs = procs;
    self->bin = bin;
    self->ttl_s = ttl_s;
    snprintf (self->dir, sizeof self->dir, "%s", dir);
    if (mkdir (self->dir, 0700) != 0 && errno != EEXIST)
        return -1;
    if (s_etcd_start (self) != 0)
        return -1;
    for (int which = 0; which < 2; which++)
        if (s_member (self, which) != 0)
            return -1;
    for (int which = 0; which < 2; which++)
        if (s_write_config (self, which) != 0)
            return -1;
    return 0;
}

int
bench_ha_begin (bench_ha_t *self, const bench_ha_procs_t *procs,
                const char *bin, const char *dir, const char *client,
                const char *agents, const char *publish, const char *log_a,
                const char *broker_key, int ttl_s, const char **config_p)
{
    memset (self, 0, sizeof *self);
    snprintf (self->client_ep [0], 64, "%s", client);
    snprintf (self->agents_ep [0], 64, "%s", agents);
    snprintf (self->publish_ep [0], 64, "%s", publish);
    snprintf (self->log [0], sizeof self->log [0], "%s", log_a);
    if (broker_key)
        snprintf (self->broker_key, sizeof self->broker_key, "%s",
                  broker_key);
    char here [400];
    snprintf (here, sizeof here, "%s/ha", dir);
    if (s_setup (self, procs, bin, here, ttl_s) != 0) {
        bench_ha_end (self);
        return -1;
    }
    *config_p = self->config [0];
    return 0;
}

//  Starts member WHICH with EXTRA; its pid.
static pid_t
s_spawn_member (bench_ha_t *self, int which, char *const *extra)
{
    char program [600], data [400];
    snprintf (program, sizeof program, "%s/gridbroker", self->bin);
    snprintf (data, sizeof data, "%s/data-%s", self->dir, s_names [which]);
    char *argv [40];
    size_t argc = 0;
    argv [argc++] = program;
    argv [argc++] = "--config";
    argv [argc++] = self->config [which];
    argv [argc++] = "--data-dir";
    argv [argc++] = data;
    argv [argc++] = "--client";
    argv [argc++] = self->client_ep [which];
    argv [argc++] = "--agents";
    argv [argc++] = self->agents_ep [which];
    argv [argc++] = "--publish";
    argv [argc++] = self->publish_ep [which];
    for (size_t at = 0; extra && extra [at] && argc < 39; at++)
        argv [argc++] = extra [at];
    argv [argc] = NULL;
    return self->procs->spawn (argv, self->log [which]);
}

//  Waits until the log at PATH holds TEXT at least COUNT times.
static bool
s_wait_log (bench_ha_t *self, const char *path, const char *text,
            size_t count, int64_t limit_ms)
{
    int64_t deadline = s_now_ms () + limit_ms;
    while (s_now_ms () < deadline && !*self->procs->interrupted) {
        FILE *file = fopen (path, "r");
        size_t seen = 0;
        if (file) {
            char line [2048];
            while (fgets (line, sizeof line, file))
                if (strstr (line, text))
                    seen++;
            fclose (file);
        }
        if (seen >= count)
            return true;
        zclock_sleep (100);
    }
    return false;
}

int
bench_ha_standby (bench_ha_t *self, char *const *extra)
{
    self->standby_pid = s_spawn_member (self, 1, extra);
    if (self->standby_pid < 0)
        return -1;
    if (s_wait_log (self, self->log [0], "standby b is in sync", 1, 60000))
        return 0;
    fprintf (stderr, "gridbench: the standby did not come in sync (see %s "
             "and %s)\n", self->log [0], self->log [1]);
    return -1;
}

void
bench_ha_end (bench_ha_t *self)
{
    if (!self->procs)
        return;
    if (self->standby_pid > 0)
        self->procs->stop (&self->standby_pid, S_GRACE_MS);
    if (self->etcd_pid > 0)
        self->procs->stop (&self->etcd_pid, S_GRACE_MS);
}

//  ---------------------------------------------------------------------
//  Failover

//  The active's name as its cluster.status says (through CLIENT, which
//  follows not_leader), into NAME; false when none answered.
static bool
s_active (client_t *client, char *name, size_t len, bool *standby_sync)
{
    client_reply_t reply;
    memset (&reply, 0, sizeof reply);
    client_begin (client, "cluster.status", 0);
    bool found = false;
    if (client_end (client, &reply) == 0 && reply.ok
        && pv_str_eq (pv_map_get (reply.data, "role"), "active")) {
        char *text = pv_strdup (pv_map_get (reply.data, "name"));
        if (text) {
            snprintf (name, len, "%s", text);
            found = true;
        }
        free (text);
        const pv_t *standbys = pv_map_get (reply.data, "standbys");
        bool sync = false;
        for (size_t at = 0; at < pv_size (standbys); at++) {
            bool flag = false;
            if (pv_get_bool (pv_map_get (pv_array_at (standbys, at), "sync"),
                             &flag) == 0 && flag)
                sync = true;
        }
        if (standby_sync)
            *standby_sync = sync;
    }
    client_reply_clear (&reply);
    return found;
}

//  Submits test echo on NODE; the new job's id into ID. 0, or -1 (no
//  answer, or refused).
static int
s_submit (client_t *client, const char *node, char *id, size_t len)
{
    pw_t *writer = client_begin (client, "job.submit", 1);
    pw_str (writer, "job");
    pw_map (writer, 2);
    pw_str (writer, "target");
    pw_map (writer, 2);
    pw_str (writer, "scope");
    pw_str (writer, "node");
    pw_str (writer, "value");
    pw_str (writer, node);
    pw_str (writer, "tasks");
    pw_array (writer, 1);
    pw_map (writer, 3);
    pw_str (writer, "backend");
    pw_str (writer, "test");
    pw_str (writer, "action");
    pw_str (writer, "echo");
    pw_str (writer, "params");
    pw_map (writer, 1);
    pw_str (writer, "msg");
    pw_str (writer, "failover");
    client_reply_t reply;
    memset (&reply, 0, sizeof reply);
    int rc = -1;
    if (client_end (client, &reply) == 0 && reply.ok) {
        char *text = pv_strdup (pv_map_get (reply.data, "job"));
        if (text) {
            snprintf (id, len, "%s", text);
            rc = 0;
        }
        free (text);
    }
    client_reply_clear (&reply);
    return rc;
}

//  The job's status ("completed", ...) into STATUS; how many of its cells
//  ended twice into *TWICE (its events). False when it is not there.
static bool
s_job (client_t *client, const char *job, char *status, size_t len,
       size_t *twice)
{
    client_reply_t reply;
    memset (&reply, 0, sizeof reply);
    bool found = false;
    if (client_job_get (client, job, &reply) == 0 && reply.ok) {
        char *text = pv_strdup (pv_map_get (reply.data, "status"));
        snprintf (status, len, "%s", text ? text : "");
        free (text);
        found = true;
    }
    client_reply_clear (&reply);
    if (!found || !twice)
        return found;
    *twice = 0;
    if (client_job_events (client, job, 0, &reply) == 0 && reply.ok) {
        const pv_t *events = pv_map_get (reply.data, "events");
        size_t ends = 0;
        for (size_t at = 0; at < pv_size (events); at++) {
            const pv_t *event = pv_map_get (pv_array_at (events, at),
                                            "event");
            if (pv_str_eq (event, "succeeded") || pv_str_eq (event, "failed")
                || pv_str_eq (event, "timeout") || pv_str_eq (event, "lost"))
                ends++;
        }
        //  One node, one step: one end
        *twice = ends > 1 ? ends - 1 : 0;
    }
    client_reply_clear (&reply);
    return true;
}

static int
s_compare (const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static bool
s_finished (const char *status)
{
    return streq (status, "completed") || streq (status, "failed")
           || streq (status, "partial_failure") || streq (status, "cancelled");
}

void
bench_ha_failover (const bench_ha_procs_t *procs, const char *bin,
                   const char *dir, size_t kills, int signal,
                   bench_ha_failover_t *figures)
{
    memset (figures, 0, sizeof *figures);
    figures->kills = kills;
    bench_ha_t self;
    memset (&self, 0, sizeof self);
    char here [400];
    snprintf (here, sizeof here, "%s/failover", dir);
    pid_t members [2] = {0, 0};
    pid_t agents [S_AGENTS] = {0};
    client_t *client = NULL;
    client_t *direct [2] = {NULL, NULL};
    double *times = (double *) calloc (kills ? kills : 1, sizeof (double));
    size_t job_cap = 64, job_count = 0;
    char (*jobs) [64] = calloc (job_cap, 64);
    char *extra [] = {"--insecure", "--heartbeat", "1s", NULL};
    if (!times || !jobs || s_setup (&self, procs, bin, here,
                                    S_FAILOVER_TTL_S) != 0) {
        snprintf (figures->error, sizeof figures->error,
                  "the cluster did not start");
        goto done;
    }
    char endpoints [200];
    snprintf (endpoints, sizeof endpoints, "%s,%s", self.client_ep [0],
              self.client_ep [1]);
    client = client_new (endpoints);
    client_set_timeout (client, 3000);
    //  The probe asks the survivor itself, in short tries: a client of
    //  both would spend seconds on the dead member's timeouts, and count
    //  them as failover time
    for (int which = 0; which < 2; which++) {
        direct [which] = client_new (self.client_ep [which]);
        client_set_redirects (direct [which], false);
        client_set_timeout (direct [which], 500);
        client_set_tries (direct [which], 1);
    }
    members [0] = s_spawn_member (&self, 0, extra);
    char name [32] = "";
    int64_t deadline = s_now_ms () + 30000;
    while (s_now_ms () < deadline && !*procs->interrupted
           && !s_active (client, name, sizeof name, NULL))
        zclock_sleep (200);
    members [1] = s_spawn_member (&self, 1, extra);
    char brokers [200], publishes [200];
    snprintf (brokers, sizeof brokers, "%s,%s", self.agents_ep [0],
              self.agents_ep [1]);
    snprintf (publishes, sizeof publishes, "%s,%s", self.publish_ep [0],
              self.publish_ep [1]);
    for (size_t at = 0; at < S_AGENTS; at++) {
        char program [600], id [32], state [400], log [400];
        snprintf (program, sizeof program, "%s/gridagent", bin);
        snprintf (id, sizeof id, "node-%zu", at + 1);
        snprintf (state, sizeof state, "%s/%s", self.dir, id);
        snprintf (log, sizeof log, "%s/agent-%s.log", self.dir, id);
        char *argv [] = {program, "--id", id, "--broker", brokers,
                         "--publish", publishes, "--state-dir", state,
                         "--insecure", NULL};
        agents [at] = procs->spawn (argv, log);
    }
    bool sync = false;
    deadline = s_now_ms () + 60000;
    while (s_now_ms () < deadline && !*procs->interrupted
           && !(s_active (client, name, sizeof name, &sync) && sync))
        zclock_sleep (200);
    if (!sync) {
        snprintf (figures->error, sizeof figures->error,
                  "the standby did not come in sync (logs in %.180s)", self.dir);
        goto done;
    }
    for (size_t kill_at = 0; kill_at < kills && !*procs->interrupted;
         kill_at++) {
        if (!s_active (client, name, sizeof name, &sync) || !sync) {
            snprintf (figures->error, sizeof figures->error,
                      "no active with a standby in sync before kill %zu",
                      kill_at + 1);
            break;
        }
        int victim = streq (name, "a") ? 0 : 1;
        //  Each kill is measured the same way: one job done first
        char id [64], status [32];
        int64_t started = s_now_ms ();
        kill (members [victim], signal);
        procs->stop (&members [victim], S_GRACE_MS);
        //  Until a job submitted now completes on the new active
        bool done = false;
        char node [32];
        snprintf (node, sizeof node, "node-%zu", kill_at % S_AGENTS + 1);
        client_t *probe = direct [1 - victim];
        while (!done && !*procs->interrupted
               && s_now_ms () - started < S_FAILOVER_LIMIT_MS) {
            if (s_submit (probe, node, id, sizeof id) != 0) {
                zclock_sleep (100);
                continue;
            }
            if (job_count == job_cap) {
                job_cap *= 2;
                jobs = realloc (jobs, job_cap * 64);
                assert (jobs);
            }
            snprintf (jobs [job_count++], 64, "%s", id);
            while (!*procs->interrupted
                   && s_now_ms () - started < S_FAILOVER_LIMIT_MS) {
                if (!s_job (probe, id, status, sizeof status, NULL)) {
                    zclock_sleep (50);
                    continue;   //  A try that timed out: ask again
                }
                if (s_finished (status)) {
                    done = streq (status, "completed");
                    break;
                }
                zclock_sleep (50);
            }
        }
        if (!done) {
            snprintf (figures->error, sizeof figures->error,
                      "kill %zu: no job completed within %d s (logs in %.180s)",
                      kill_at + 1, S_FAILOVER_LIMIT_MS / 1000, self.dir);
            break;
        }
        times [figures->measured++] = (double) (s_now_ms () - started)
                                      / 1000.0;
        fprintf (stderr, "gridbench: failover %zu of %zu: %.1f s\n",
                 kill_at + 1, kills, times [figures->measured - 1]);
        //  The killed member back, in sync, before the next kill
        members [victim] = s_spawn_member (&self, victim, extra);
        deadline = s_now_ms () + S_SYNC_LIMIT_MS;
        sync = false;
        while (s_now_ms () < deadline && !*procs->interrupted
               && !(s_active (client, name, sizeof name, &sync) && sync))
            zclock_sleep (200);
    }
    //  Every acknowledged job read back
    figures->jobs = job_count;
    for (size_t at = 0; at < job_count && !*procs->interrupted; at++) {
        char status [32] = "";
        size_t twice = 0;
        bool found = false;
        deadline = s_now_ms () + 30000;
        while (s_now_ms () < deadline) {
            found = s_job (client, jobs [at], status, sizeof status, &twice);
            if (found && s_finished (status))
                break;
            zclock_sleep (200);
        }
        if (!found || !streq (status, "completed"))
            figures->lost++;
        figures->duplicated += twice;
    }
    if (figures->measured) {
        qsort (times, figures->measured, sizeof (double), s_compare);
        figures->min_s = times [0];
        figures->max_s = times [figures->measured - 1];
        figures->p50_s = times [figures->measured / 2];
    }
done:
    client_destroy (&client);
    client_destroy (&direct [0]);
    client_destroy (&direct [1]);
    for (size_t at = 0; at < S_AGENTS; at++)
        if (agents [at] > 0)
            procs->stop (&agents [at], S_GRACE_MS);
    for (int which = 0; which < 2; which++)
        if (members [which] > 0)
            procs->stop (&members [which], S_GRACE_MS);
    bench_ha_end (&self);
    free (times);
    free (jobs);
}
