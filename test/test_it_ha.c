/*  =========================================================================
    test_it_ha - the broker cluster's coordinator: etcd's JSON gateway
    client and the leader elector, against a real etcd on loopback

    Skipped (each test passes with a line saying so) when etcd is not
    installed; make test installs it (etcd-server).
    =========================================================================
*/

#include <czmq.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../ha/elector.h"
#include "../ha/etcd.h"
#include "../ha/etcdwatch.h"
#include "lib/etcdproc.h"

#define S_WAIT_MS 20000

typedef struct {
    char dir [300];
    etcdproc_t etcd;
} s_state_t;

static int
s_setup (void **state)
{
    s_state_t *self = (s_state_t *) calloc (1, sizeof *self);
    snprintf (self->dir, sizeof self->dir, "/tmp/grid-test-ha-XXXXXX");
    if (!mkdtemp (self->dir))
        return -1;
    *state = self;
    if (!etcdproc_available ())
        return 0;
    return etcdproc_start (&self->etcd, self->dir);
}

static int
s_teardown (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    etcdproc_stop (&self->etcd, true);
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", self->dir);
    if (system (command) != 0)
        fprintf (stderr, "could not remove %s\n", self->dir);
    free (self);
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
test_ha_etcd_client (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    char err [300];
    //  Endpoints that are no URL are refused up front
    assert_null (etcd_new ("", 1000, err, sizeof err));
    assert_non_null (strstr (err, "no etcd endpoint"));
    assert_null (etcd_new ("127.0.0.1:2379", 1000, err, sizeof err));
    assert_non_null (strstr (err, "expected http://"));
    assert_null (etcd_new ("file:///etc/passwd", 1000, err, sizeof err));
    assert_null (etcd_new ("http://a b", 1000, err, sizeof err));

    //  A dead endpoint first: the next one answers, and is kept
    char endpoints [200];
    snprintf (endpoints, sizeof endpoints, "http://127.0.0.1:1,%s/",
              self->etcd.url);
    etcd_t *etcd = etcd_new (endpoints, 2000, err, sizeof err);
    assert_non_null (etcd);
    int64_t lease = 0;
    assert_int_equal (etcd_lease_grant (etcd, 5, &lease), 0);
    assert_true (lease != 0);
    assert_string_equal (etcd_endpoint (etcd), self->etcd.url);

    //  Create only once; the second learns who holds it
    int64_t revision = 0;
    etcd_kv_t holder;
    assert_int_equal (etcd_create (etcd, "/grid/t/leader", "one", 3, lease,
                                   &revision, &holder), 1);
    assert_true (revision > 0);
    assert_null (holder.value);
    int64_t other = 0;
    assert_int_equal (etcd_create (etcd, "/grid/t/leader", "two", 3, 0,
                                   &other, &holder), 0);
    assert_int_equal (other, 0);
    assert_string_equal (holder.value, "one");
    assert_int_equal (holder.create_revision, revision);
    assert_int_equal (holder.lease, lease);
    etcd_kv_clear (&holder);

    //  Read; replace only at the revision read; bytes of any kind
    etcd_kv_t kv;
    assert_int_equal (etcd_get (etcd, "/grid/t/leader", &kv), 1);
    assert_string_equal (kv.value, "one");
    int64_t mod = kv.mod_revision;
    etcd_kv_clear (&kv);
    const char binary [] = { 'a', 0, (char) 0xff, '\n', 'z' };
    int64_t changed = 0;
    assert_int_equal (etcd_replace (etcd, "/grid/t/sync", binary,
                                    sizeof binary, 0, &changed), 1);
    assert_int_equal (etcd_replace (etcd, "/grid/t/sync", "x", 1, 0,
                                    &other), 0);
    assert_int_equal (etcd_get (etcd, "/grid/t/sync", &kv), 1);
    assert_int_equal (kv.size, sizeof binary);
    assert_memory_equal (kv.value, binary, sizeof binary);
    assert_int_equal (kv.mod_revision, changed);
    etcd_kv_clear (&kv);
    assert_int_equal (etcd_replace (etcd, "/grid/t/sync", "x", 1, mod,
                                    &other), 0);
    assert_int_equal (etcd_replace (etcd, "/grid/t/sync", "y", 1, changed,
                                    &other), 1);
    assert_true (other > changed);

    //  Delete only one's own key
    assert_int_equal (etcd_delete_own (etcd, "/grid/t/leader", revision + 1),
                      0);
    assert_int_equal (etcd_lease_keepalive (etcd, lease, &other), 1);
    assert_true (other > 0);
    assert_int_equal (etcd_delete_own (etcd, "/grid/t/leader", revision), 1);
    assert_int_equal (etcd_get (etcd, "/grid/t/leader", &kv), 0);
    assert_null (kv.value);

    //  A revoked lease takes its keys; renewing it says it is gone
    assert_int_equal (etcd_create (etcd, "/grid/t/leader", "three", 5, lease,
                                   &revision, NULL), 1);
    assert_int_equal (etcd_lease_revoke (etcd, lease), 0);
    assert_int_equal (etcd_lease_revoke (etcd, lease), 0);
    assert_int_equal (etcd_lease_keepalive (etcd, lease, &other), 0);
    assert_int_equal (etcd_get (etcd, "/grid/t/leader", &kv), 0);
    etcd_destroy (&etcd);

    //  No endpoint answers: an error that names one
    etcd = etcd_new ("http://127.0.0.1:1", 500, err, sizeof err);
    assert_non_null (etcd);
    assert_int_equal (etcd_get (etcd, "/x", &kv), ETCD_EIO);
    assert_non_null (strstr (etcd_error (etcd), "127.0.0.1:1"));
    etcd_destroy (&etcd);
}

//  One message of an elector, with the time it was read.
typedef struct {
    char what [16];
    int64_t number;
    char text [300];
    int64_t at_ms;
} s_said_t;

//  The next message of ACTOR within WAIT_MS whose kind is WHAT (others
//  are skipped, but UNREACHABLE). Returns false when none came.
static bool
s_expect (zactor_t *actor, const char *what, int64_t wait_ms, s_said_t *said)
{
    int64_t deadline = zclock_mono () + wait_ms;
    zpoller_t *poller = zpoller_new (actor, NULL);
    bool found = false;
    while (!found && zclock_mono () < deadline) {
        if (!zpoller_wait (poller, (int) (deadline - zclock_mono ())))
            break;
        zmsg_t *msg = zmsg_recv (actor);
        if (!msg)
            break;
        char *kind = zmsg_popstr (msg);
        char *number = zmsg_popstr (msg);
        char *text = zmsg_popstr (msg);
        memset (said, 0, sizeof *said);
        snprintf (said->what, sizeof said->what, "%s", kind ? kind : "");
        said->number = number ? strtoll (number, NULL, 10) : 0;
        //  BARRED says a sentence only
        snprintf (said->text, sizeof said->text, "%s",
                  kind && streq (kind, "BARRED") ? (number ? number : "")
                                                 : text ? text : "");
        said->at_ms = zclock_mono ();
        found = kind && streq (kind, what);
        free (kind);
        free (number);
        free (text);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    return found;
}

static zactor_t *
s_elector (s_state_t *self, const char *value)
{
    char err [300];
    elector_config_t config = { self->etcd.url, "lab", value, 2000, false };
    zactor_t *actor = elector_new (&config, err, sizeof err);
    if (!actor)
        fail_msg ("%s", err);
    return actor;
}

static void
test_ha_elector_config_refused (void **state)
{
    char err [300];
    elector_config_t config = { "http://127.0.0.1:1", "bad name!", "x", 2000, false };
    assert_null (elector_new (&config, err, sizeof err));
    assert_non_null (strstr (err, "cluster name"));
    config.cluster = "lab";
    config.ttl_ms = 1000;
    assert_null (elector_new (&config, err, sizeof err));
    assert_non_null (strstr (err, "TTL"));
    config.ttl_ms = 2500;
    assert_null (elector_new (&config, err, sizeof err));
    config.ttl_ms = 10000;
    config.endpoints = "nope";
    assert_null (elector_new (&config, err, sizeof err));
    //  The Patroni rule in numbers: a fifth of the TTL, at least 1 s
    assert_int_equal (elector_margin_ms (10000), 2000);
    assert_int_equal (elector_margin_ms (2000), 1000);
    assert_int_equal (elector_valid_until (500, 10000), 8500);
    assert_true (elector_valid (8500, 8499));
    assert_false (elector_valid (8500, 8500));
}

//  Two electors: one leads, the other follows it and learns its value;
//  the leader resigns and the other takes over in a later epoch.
static void
test_ha_elector_one_leader (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    zactor_t *first = s_elector (self, "first");
    s_said_t said;
    assert_true (s_expect (first, "LEADER", S_WAIT_MS, &said));
    int64_t epoch = said.number;
    assert_true (epoch > 0);
    assert_true (strtoll (said.text, NULL, 10) > zclock_mono ());
    zactor_t *second = s_elector (self, "second");
    assert_true (s_expect (second, "FOLLOWER", S_WAIT_MS, &said));
    assert_int_equal (said.number, epoch);
    assert_string_equal (said.text, "first");
    //  The leader renews, in its epoch
    assert_true (s_expect (first, "RENEWED", S_WAIT_MS, &said));
    assert_int_equal (said.number, epoch);

    zstr_send (first, "RESIGN");
    assert_true (s_expect (first, "DEMOTED", S_WAIT_MS, &said));
    assert_string_equal (said.text, "resigned");
    int64_t resigned_ms = said.at_ms;
    assert_true (s_expect (second, "LEADER", S_WAIT_MS, &said));
    assert_true (said.number > epoch);
    assert_true (said.at_ms >= resigned_ms);
    epoch = said.number;
    //  ... and the first, campaigning again, follows it
    zstr_send (first, "CAMPAIGN");
    assert_true (s_expect (first, "FOLLOWER", S_WAIT_MS, &said));
    assert_int_equal (said.number, epoch);
    assert_string_equal (said.text, "second");
    //  A leader that stops leaves the key: the other leads again
    zactor_destroy (&second);
    assert_true (s_expect (first, "LEADER", S_WAIT_MS, &said));
    assert_true (said.number > epoch);
    zactor_destroy (&first);
}

//  The leader cut off from etcd (SIGSTOP) demotes itself; only after that
//  can another be elected (etcd back).
static void
test_ha_elector_demotes_before_another_leads (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    zactor_t *first = s_elector (self, "first");
    s_said_t said;
    assert_true (s_expect (first, "LEADER", S_WAIT_MS, &said));
    int64_t epoch = said.number;
    zactor_t *second = s_elector (self, "second");
    assert_true (s_expect (second, "FOLLOWER", S_WAIT_MS, &said));

    etcdproc_signal (&self->etcd, SIGSTOP);
    assert_true (s_expect (first, "DEMOTED", S_WAIT_MS, &said));
    assert_int_equal (said.number, epoch);
    assert_non_null (strstr (said.text, "in time"));
    int64_t demoted_ms = said.at_ms;
    etcdproc_signal (&self->etcd, SIGCONT);
    //  Someone leads again, in a later epoch, after the demotion
    zpoller_t *poller = zpoller_new (first, second, NULL);
    int64_t deadline = zclock_mono () + S_WAIT_MS;
    bool led = false;
    while (!led && zclock_mono () < deadline) {
        zactor_t *which = (zactor_t *) zpoller_wait (poller, 1000);
        if (!which)
            continue;
        led = s_expect (which, "LEADER", 1, &said);
    }
    zpoller_destroy (&poller);
    assert_true (led);
    assert_true (said.number > epoch);
    assert_true (said.at_ms >= demoted_ms);
    zactor_destroy (&first);
    zactor_destroy (&second);
}

//  A held elector never takes a free key: it says who holds it (no one)
//  and leads only after CAMPAIGN; demoted, it is held again.
static void
test_ha_elector_held (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    char err [300];
    elector_config_t config = { self->etcd.url, "lab", "held", 2000, true };
    zactor_t *held = elector_new (&config, err, sizeof err);
    assert_non_null (held);
    s_said_t said;
    assert_true (s_expect (held, "FOLLOWER", S_WAIT_MS, &said));
    assert_int_equal (said.number, 0);
    assert_string_equal (said.text, "");
    assert_false (s_expect (held, "LEADER", 1500, &said));
    zstr_send (held, "CAMPAIGN");
    assert_true (s_expect (held, "LEADER", S_WAIT_MS, &said));
    int64_t epoch = said.number;
    //  Cut off, it demotes, and stays held when etcd is back
    etcdproc_signal (&self->etcd, SIGSTOP);
    assert_true (s_expect (held, "DEMOTED", S_WAIT_MS, &said));
    etcdproc_signal (&self->etcd, SIGCONT);
    assert_false (s_expect (held, "LEADER", 3000, &said));
    zstr_send (held, "CAMPAIGN");
    assert_true (s_expect (held, "LEADER", S_WAIT_MS, &said));
    assert_true (said.number > epoch);
    zactor_destroy (&held);
}

//  The sync key: a member it does not name never campaigns; named, it
//  wins; leading, it writes the sync set it is given, fenced by its own
//  leader key, over an operator's write too; a value that is not grid's
//  bars everyone.
static void
test_ha_elector_sync_key (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    //  The value's rule, without etcd
    char why [300];
    char *value = elector_sync_value (7, "a", "b,c");
    assert_string_equal (value, "{\"epoch\":7,\"leader\":\"a\","
                                "\"sync\":[\"b\",\"c\"]}");
    assert_int_equal (elector_sync_allows (value, strlen (value), "a", why,
                                           sizeof why), 1);
    assert_int_equal (elector_sync_allows (value, strlen (value), "c", why,
                                           sizeof why), 1);
    assert_int_equal (elector_sync_allows (value, strlen (value), "d", why,
                                           sizeof why), 0);
    assert_non_null (strstr (why, "names the leader a and the standbys in "
                                  "sync [b, c], not d"));
    free (value);
    const char *hostile [] = {"", "[]", "{\"leader\":\"d\"}", "not json",
                              "{\"epoch\":1,\"leader\":5,\"sync\":[]}"};
    for (size_t index = 0; index < sizeof hostile / sizeof hostile [0];
         index++)
        assert_int_equal (elector_sync_allows (hostile [index],
                                               strlen (hostile [index]), "d",
                                               why, sizeof why), -1);
    //  A key naming others: "m" does not campaign
    char err [300], key [64];
    etcd_t *etcd = etcd_new (self->etcd.url, 2000, err, sizeof err);
    assert_non_null (etcd);
    elector_sync_key ("lab", key, sizeof key);
    value = elector_sync_value (3, "x", "y");
    int64_t revision = 0;
    assert_int_equal (etcd_replace (etcd, key, value, strlen (value), 0,
                                    &revision), 1);
    free (value);
    zactor_t *member = s_elector (self, "m");
    s_said_t said;
    assert_true (s_expect (member, "BARRED", S_WAIT_MS, &said));
    assert_non_null (strstr (said.text, "not m"));
    assert_false (s_expect (member, "LEADER", 1500, &said));
    //  Not grid's: still barred, saying so
    assert_int_equal (etcd_replace (etcd, key, "junk", 4, revision,
                                    &revision), 1);
    assert_true (s_expect (member, "BARRED", S_WAIT_MS, &said));
    assert_non_null (strstr (said.text, "not grid's"));
    //  Named: it wins
    value = elector_sync_value (3, "x", "m");
    assert_int_equal (etcd_replace (etcd, key, value, strlen (value), revision,
                                    &revision), 1);
    free (value);
    assert_true (s_expect (member, "LEADER", S_WAIT_MS, &said));
    int64_t epoch = said.number;
    //  Leading, it writes the set it is given
    char digits [32];
    snprintf (digits, sizeof digits, "%lld", (long long) epoch);
    zstr_sendx (member, "SYNC", digits, "1", "p,q", NULL);
    assert_true (s_expect (member, "SYNCED", S_WAIT_MS, &said));
    assert_int_equal (said.number, 1);
    assert_string_equal (said.text, "p,q");
    etcd_kv_t kv;
    assert_int_equal (etcd_get (etcd, key, &kv), 1);
    assert_non_null (strstr (kv.value, "\"leader\":\"m\""));
    assert_non_null (strstr (kv.value, "[\"p\",\"q\"]"));
    //  An operator wrote over it: the next set is written all the same
    assert_int_equal (etcd_replace (etcd, key, "junk", 4, kv.mod_revision,
                                    &revision), 1);
    etcd_kv_clear (&kv);
    zstr_sendx (member, "SYNC", digits, "2", "", NULL);
    assert_true (s_expect (member, "SYNCED", S_WAIT_MS, &said));
    assert_int_equal (said.number, 2);
    assert_int_equal (etcd_get (etcd, key, &kv), 1);
    assert_non_null (strstr (kv.value, "\"sync\":[]"));
    etcd_kv_clear (&kv);
    //  A SYNC of another epoch is not this leader's: ignored
    zstr_sendx (member, "SYNC", "1", "3", "z", NULL);
    assert_false (s_expect (member, "SYNCED", 1000, &said));
    zactor_destroy (&member);
    etcd_destroy (&etcd);
}

//  The stream's objects are cut where each ends, strings and nesting
//  taken into account; what is not an object is one byte long.
static void
test_ha_watch_objects (void **state)
{
    (void) state;
    const char *two = " {\"a\":{\"b\":\"}{\\\"\"}}\n{\"c\":[1,{}]}";
    size_t end = etcdwatch_object_end (two, strlen (two));
    assert_int_equal (end, strlen (" {\"a\":{\"b\":\"}{\\\"\"}}"));
    assert_int_equal (etcdwatch_object_end (two + end, strlen (two + end)),
                      strlen (two + end));
    assert_int_equal (etcdwatch_object_end ("{\"a\":", 5), 0);
    assert_int_equal (etcdwatch_object_end ("  \n", 3), 0);
    assert_int_equal (etcdwatch_object_end ("\n]x", 3), 2);
}

//  Reads the next message of WATCH into its frames (up to 4, "" missing).
static bool
s_watch_said (zactor_t *watch, int64_t wait_ms, char frames [4][128])
{
    zpoller_t *poller = zpoller_new (watch, NULL);
    bool got = zpoller_wait (poller, (int) wait_ms) != NULL;
    zpoller_destroy (&poller);
    zmsg_t *msg = got ? zmsg_recv (watch) : NULL;
    for (int at = 0; at < 4; at++) {
        char *frame = msg ? zmsg_popstr (msg) : NULL;
        snprintf (frames [at], 128, "%s", frame ? frame : "");
        free (frame);
    }
    zmsg_destroy (&msg);
    return got;
}

//  A watch says when the stream is up, each write and delete of its key
//  (a lease that lapses deletes it too), and when the stream breaks.
static void
test_ha_watch_stream (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    char err [300];
    assert_null (etcdwatch_new ("ftp://x", "/k", err, sizeof err));
    zactor_t *watch = etcdwatch_new (self->etcd.url, "/grid/lab/leader", err,
                                     sizeof err);
    assert_non_null (watch);
    char said [4][128];
    assert_true (s_watch_said (watch, S_WAIT_MS, said));
    assert_string_equal (said [0], "WATCHING");
    etcd_t *etcd = etcd_new (self->etcd.url, 2000, err, sizeof err);
    assert_non_null (etcd);
    int64_t lease = 0, revision = 0;
    assert_int_equal (etcd_lease_grant (etcd, 2, &lease), 0);
    etcd_kv_t holder;
    assert_int_equal (etcd_create (etcd, "/grid/lab/other", "x", 1, 0,
                                   &revision, &holder), 1);
    assert_int_equal (etcd_create (etcd, "/grid/lab/leader", "a", 1, lease,
                                   &revision, &holder), 1);
    assert_true (s_watch_said (watch, S_WAIT_MS, said));
    assert_string_equal (said [0], "PUT");
    assert_int_equal (strtoll (said [1], NULL, 10), revision);
    assert_int_equal (strtoll (said [2], NULL, 10), lease);
    assert_string_equal (said [3], "a");
    assert_int_equal (etcd_delete_own (etcd, "/grid/lab/leader", revision),
                      1);
    assert_true (s_watch_said (watch, S_WAIT_MS, said));
    assert_string_equal (said [0], "DELETE");
    assert_true (strtoll (said [1], NULL, 10) > revision);
    //  A lease that lapses
    assert_int_equal (etcd_lease_grant (etcd, 2, &lease), 0);
    assert_int_equal (etcd_create (etcd, "/grid/lab/leader", "b", 1, lease,
                                   &revision, &holder), 1);
    assert_true (s_watch_said (watch, S_WAIT_MS, said));
    assert_string_equal (said [0], "PUT");
    assert_true (s_watch_said (watch, S_WAIT_MS, said));
    assert_string_equal (said [0], "DELETE");
    etcd_destroy (&etcd);
    //  etcd gone: said once, and the watch goes on trying
    etcdproc_stop (&self->etcd, false);
    assert_true (s_watch_said (watch, S_WAIT_MS, said));
    assert_string_equal (said [0], "BROKEN");
    assert_non_null (strstr (said [1], self->etcd.url));
    assert_false (s_watch_said (watch, 2500, said));
    zactor_destroy (&watch);
}

//  A fake gateway on loopback: a child that answers every connection
//  with ANSWER (after an HTTP 200 head) and then keeps it open. Returns
//  its pid; its URL into URL.
static pid_t
s_fake_gateway (const char *answer, char *url, size_t url_len)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    struct sockaddr_in addr;
    memset (&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    assert_int_equal (bind (fd, (struct sockaddr *) &addr, sizeof addr), 0);
    assert_int_equal (listen (fd, 8), 0);
    assert_int_equal (getsockname (fd, (struct sockaddr *) &addr, &len), 0);
    snprintf (url, url_len, "http://127.0.0.1:%d", ntohs (addr.sin_port));
    pid_t pid = fork ();
    assert_true (pid >= 0);
    if (pid == 0) {
        while (1) {
            int peer = accept (fd, NULL, NULL);
            if (peer < 0)
                _exit (0);
            char request [4096];
            if (read (peer, request, sizeof request) <= 0) {
                close (peer);
                continue;
            }
            char head [200];
            snprintf (head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: "
                      "application/json\r\nTransfer-Encoding: chunked"
                      "\r\n\r\n%zx\r\n", strlen (answer));
            if (write (peer, head, strlen (head)) < 0
                || write (peer, answer, strlen (answer)) < 0
                || write (peer, "\r\n", 2) < 0)
                _exit (1);
            //  Left open: the watch decides
        }
    }
    close (fd);
    return pid;
}

//  Hostile streams: bytes that are not JSON, and JSON that is not the
//  gateway's, each break the stream (said once, with why); nothing else
//  is said of them.
static void
test_ha_watch_hostile (void **state)
{
    const char *answers [] = {"not json at all\n", "{\"x\": 1}\n",
                              "{\"result\": {\"events\": [{\"kv\": 7}]}}\n"};
    const char *whys [] = {"not JSON", "not the gateway's watch",
                           "an event that is not the gateway's"};
    for (size_t index = 0; index < 3; index++) {
        char url [64], err [300];
        pid_t gateway = s_fake_gateway (answers [index], url, sizeof url);
        zactor_t *watch = etcdwatch_new (url, "/grid/lab/leader", err,
                                         sizeof err);
        assert_non_null (watch);
        char said [4][128];
        assert_true (s_watch_said (watch, S_WAIT_MS, said));
        assert_string_equal (said [0], "BROKEN");
        if (!strstr (said [1], whys [index]))
            fprintf (stderr, "BROKEN said '%s'\n", said [1]);
        assert_non_null (strstr (said [1], whys [index]));
        //  It tries again every second: not said again
        assert_false (s_watch_said (watch, 2500, said));
        zactor_destroy (&watch);
        kill (gateway, SIGKILL);
        waitpid (gateway, NULL, 0);
    }
}

//  A leader whose key is deleted under it (an operator's etcdctl del)
//  demotes at once; the key is taken again, in a later epoch, by one of
//  the two (both campaign the moment it goes: the follower told by its
//  watch, the former leader as it demotes).
static void
test_ha_elector_key_deleted (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    if (s_skip (self))
        return;
    zactor_t *first = s_elector (self, "first");
    s_said_t said;
    assert_true (s_expect (first, "LEADER", S_WAIT_MS, &said));
    int64_t epoch = said.number;
    zactor_t *second = s_elector (self, "second");
    assert_true (s_expect (second, "FOLLOWER", S_WAIT_MS, &said));
    char err [300];
    etcd_t *etcd = etcd_new (self->etcd.url, 2000, err, sizeof err);
    assert_non_null (etcd);
    assert_int_equal (etcd_delete_own (etcd, "/grid/lab/leader", epoch), 1);
    etcd_destroy (&etcd);
    assert_true (s_expect (first, "DEMOTED", S_WAIT_MS, &said));
    assert_string_equal (said.text, "the leader key was deleted");
    zpoller_t *poller = zpoller_new (first, second, NULL);
    int64_t deadline = zclock_mono () + S_WAIT_MS;
    bool led = false;
    while (!led && zclock_mono () < deadline) {
        zactor_t *which = (zactor_t *) zpoller_wait (poller, 1000);
        if (which)
            led = s_expect (which, "LEADER", 1, &said);
    }
    zpoller_destroy (&poller);
    assert_true (led);
    assert_true (said.number > epoch);
    zactor_destroy (&first);
    zactor_destroy (&second);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_ha_elector_config_refused),
        cmocka_unit_test (test_ha_watch_objects),
        cmocka_unit_test_setup_teardown (test_ha_watch_stream, s_setup,
                                         s_teardown),
        cmocka_unit_test (test_ha_watch_hostile),
        cmocka_unit_test_setup_teardown (test_ha_elector_key_deleted, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_ha_etcd_client, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_ha_elector_one_leader, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (
            test_ha_elector_demotes_before_another_leads, s_setup,
            s_teardown),
        cmocka_unit_test_setup_teardown (test_ha_elector_sync_key, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_ha_elector_held, s_setup,
                                         s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
