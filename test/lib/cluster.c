/*  =========================================================================
    cluster - a two-member broker cluster on a real etcd for integration
    tests (see cluster.h)
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster.h"

const char *cluster_pair_names [2] = {"a", "b"};

void
cluster_pair_write_config (cluster_pair_t *self, int which, int64_t ttl_s)
{
    int other = 1 - which;
    FILE *file = fopen (self->config [which], "w");
    assert_non_null (file);
    fprintf (file,
             "ha:\n"
             "  cluster: lab\n"
             "  name: %s\n"
             "  etcd: %s\n"
             "  ttl: %llds\n"
             "  replicate: %s\n"
             "  sync_timeout: %s\n"
             "  peers:\n"
             "    - name: %s\n"
             "      client: %s\n"
             "      replicate: %s\n",
             cluster_pair_names [which], self->etcd.url, (long long) ttl_s,
             self->repl_ep [which],
             self->sync_timeout ? self->sync_timeout : "1s",
             cluster_pair_names [other],
             self->member [other].client_ep, self->repl_ep [other]);
    if (self->faces)
        fprintf (file,
                 "      agents: %s\n"
                 "      http: http://127.0.0.1:%d\n"
                 "  client: %s\n"
                 "  http: http://127.0.0.1:%d\n"
                 "http:\n"
                 "  listen: 127.0.0.1:%d\n",
                 self->member [other].agents_ep, self->http_port [other],
                 self->member [which].client_ep, self->http_port [which],
                 self->http_port [which]);
    fclose (file);
}

//  A free TCP port on loopback.
int
cluster_pair_free_port (void)
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

int
cluster_pair_setup (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) calloc (1, sizeof *self);
    snprintf (self->dir, sizeof self->dir, "/tmp/grid-test-cluster-XXXXXX");
    if (!mkdtemp (self->dir))
        return -1;
    *state = self;
    if (!etcdproc_available ())
        return 0;
    if (etcdproc_start (&self->etcd, self->dir) != 0)
        return -1;
    char dir [sizeof self->dir];
    snprintf (dir, sizeof dir, "%s", self->dir);
    for (int which = 0; which < 2; which++) {
        if (grid_init (&self->member [which]) != 0)
            return -1;
        self->member [which].insecure = true;
        snprintf (self->config [which], sizeof self->config [which],
                  "%s/%s.yaml", dir, cluster_pair_names [which]);
        //  The harness's directories are short (/tmp/grid-it-XXXXXX)
        char member [sizeof self->member [which].dir];
        snprintf (member, sizeof member, "%s", self->member [which].dir);
        snprintf (self->repl_ep [which], sizeof self->repl_ep [which],
                  "ipc://%.300s/repl.sock", member);
    }
    cluster_pair_write_configs (self);
    return 0;
}

void
cluster_pair_write_configs (cluster_pair_t *self)
{
    for (int which = 0; which < 2; which++)
        cluster_pair_write_config (self, which, 2);
}

void
cluster_pair_dump (cluster_pair_t *self)
{
    grid_dump_logs (&self->member [0]);
    grid_dump_logs (&self->member [1]);
}

//  What a wait gives, in ms.
static long long
s_wait_ms (cluster_pair_t *self)
{
    return self->wait_ms > 0 ? self->wait_ms : CLUSTER_PAIR_WAIT_MS;
}

int
cluster_pair_teardown (void **state)
{
    cluster_pair_t *self = (cluster_pair_t *) *state;
    for (int which = 0; which < 2; which++)
        if (self->member [which].dir [0])
            grid_stop (&self->member [which]);
    etcdproc_stop (&self->etcd, true);
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", self->dir);
    if (system (command) != 0)
        fprintf (stderr, "could not remove %s\n", self->dir);
    free (self);
    return 0;
}

bool
cluster_pair_skip (cluster_pair_t *self)
{
    if (self->etcd.pid > 0)
        return false;
    printf ("    skipped: etcd is not installed (make test-deps)\n");
    return true;
}

void
cluster_pair_spawn (cluster_pair_t *self, int which)
{
    const char *extra [24] = {"--config", self->config [which]};
    size_t count = 2;
    if (self->offline_grace) {
        extra [count++] = "--offline-grace";
        extra [count++] = self->offline_grace;
    }
    for (size_t index = 0; self->spawn_args && self->spawn_args [index]
                           && count + 1 < sizeof extra / sizeof extra [0];
         index++)
        extra [count++] = self->spawn_args [index];
    extra [count] = NULL;
    assert_int_equal (grid_spawn_broker (&self->member [which], extra), 0);
}

//  The code of a status request to member WHICH ("ok" when it serves),
//  or NULL when it did not answer.
char *
cluster_pair_status_code (cluster_pair_t *self, int which)
{
    pv_doc_t *reply = grid_call (&self->member [which], "status", NULL);
    if (!reply)
        return NULL;
    char *code = grid_reply_ok (reply, NULL) ? strdup ("ok")
                                             : grid_reply_code (reply);
    pv_doc_destroy (&reply);
    return code;
}

//  Waits until member WHICH answers status with CODE.
bool
cluster_pair_wait_code (cluster_pair_t *self, int which, const char *code)
{
    long long deadline = grid_now_ms () + s_wait_ms (self);
    char *got = NULL;
    while (grid_now_ms () < deadline) {
        free (got);
        got = cluster_pair_status_code (self, which);
        if (got && strcmp (got, code) == 0) {
            free (got);
            return true;
        }
        usleep (100 * 1000);
    }
    fprintf (stderr, "broker %s answers %s, not %s\n", cluster_pair_names [which],
             got ? got : "nothing", code);
    free (got);
    cluster_pair_dump (self);
    return false;
}

//  Waits until member WHICH's log holds TEXT.
bool
cluster_pair_wait_log (cluster_pair_t *self, int which, const char *text)
{
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", self->member [which].dir);
    long long deadline = grid_now_ms () + s_wait_ms (self);
    while (grid_now_ms () < deadline) {
        char *log = grid_slurp (path);
        bool found = strstr (log, text) != NULL;
        free (log);
        if (found)
            return true;
        usleep (100 * 1000);
    }
    fprintf (stderr, "broker %s never logged '%s'\n", cluster_pair_names [which], text);
    cluster_pair_dump (self);
    return false;
}

void
cluster_pair_faces (cluster_pair_t *self)
{
    self->faces = true;
    for (int which = 0; which < 2; which++)
        self->http_port [which] = cluster_pair_free_port ();
    cluster_pair_write_configs (self);
}
