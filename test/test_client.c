/*  =========================================================================
    test_client - the client library: reply envelope, Lazy Pirate retries,
    typed requests, pipelining, CURVE

    The broker is a small fake in a CZMQ actor: a ROUTER on ipc:// in a
    temp dir (a CURVE server behind zauth when asked) that leaves the first
    requests unanswered when told to, records the ids it saw, and answers
    each request with its own body as data, so that a test reads back what
    was sent ("boom" requests get an error reply).
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <czmq.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../client/client.h"
#include "../proto/keys.h"
#include "../proto/proto.h"

static char s_dir [256];

typedef struct {
    char endpoint [300];       //  Where to bind
    int drop;                  //  Requests to leave unanswered first
    zcert_t *server_cert;      //  CURVE: the broker's pair, or NULL
    char allowed_dir [300];    //  CURVE: public keys zauth lets in
    //  Filled by the actor; read after zactor_destroy
    int requests;              //  Requests seen
    char ids [8][CLIENT_ID_LEN];
} s_fake_t;

static void
s_fake_broker (zsock_t *pipe, void *arg)
{
    s_fake_t *fake = arg;
    zactor_t *auth = NULL;
    zsock_t *router = zsock_new (ZMQ_ROUTER);
    assert_non_null (router);
    zsock_set_linger (router, 0);
    if (fake->server_cert) {
        auth = zactor_new (zauth, NULL);
        zstr_sendx (auth, "CURVE", fake->allowed_dir, NULL);
        zsock_wait (auth);
        char why [256];
        assert_int_equal (keys_curve_server (router, fake->server_cert,
                                             KEYS_DOMAIN_CLIENTS, why,
                                             sizeof why), 0);
    }
    assert_true (zsock_bind (router, "%s", fake->endpoint) != -1);
    zsock_signal (pipe, 0);

    zpoller_t *poller = zpoller_new (pipe, router, NULL);
    while (zpoller_wait (poller, -1) == router) {
        zmsg_t *msg = zmsg_recv (router);
        if (!msg)
            break;
        zframe_t *identity = zmsg_pop (msg);
        zframe_t *body = zmsg_last (msg);
        pv_doc_t *doc = NULL;
        pv_doc_decode (zframe_data (body), zframe_size (body), &doc, NULL, 0);
        const pv_t *root = pv_doc_root (doc);
        char *id = pv_strdup (pv_map_get (root, "id"));
        int seen = fake->requests++;
        if (seen < 8)
            snprintf (fake->ids [seen], sizeof fake->ids [seen], "%s",
                      id ? id : "");
        if (seen >= fake->drop) {
            pw_t *w = pw_new ();
            if (pv_str_eq (pv_map_get (root, "type"), "boom")) {
                char *details [] = { "first", "second" };
                proto_reply_error (w, id, PROTO_ERR_NOT_FOUND,
                                   "no such\x1b thing", details, 2);
            }
            else {
                proto_reply_ok_begin (w, id);
                pw_pv (w, root);
            }
            zmsg_t *reply = zmsg_new ();
            zmsg_append (reply, &identity);
            zmsg_addmem (reply, NULL, 0);
            zmsg_addmem (reply, pw_data (w), pw_size (w));
            zmsg_send (&reply, router);
            pw_destroy (&w);
        }
        free (id);
        pv_doc_destroy (&doc);
        zframe_destroy (&identity);
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    zsock_destroy (&router);
    zactor_destroy (&auth);
}

static void
s_fake_init (s_fake_t *fake, const char *name)
{
    memset (fake, 0, sizeof *fake);
    snprintf (fake->endpoint, sizeof fake->endpoint, "ipc://%s/%s", s_dir,
              name);
}

static pv_doc_t *
s_decode (pw_t *w)
{
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (pw_data (w), pw_size (w), &doc, NULL,
                                     0), 0);
    return doc;
}

//  ---------------------------------------------------------------------

static void
test_client_reply_decode (void **state)
{
    client_reply_t reply;
    char why [256];
    pw_t *w = pw_new ();

    //  ok, for our id
    proto_reply_ok_begin (w, "r1");
    pw_map (w, 1);
    pw_str (w, "job");
    pw_str (w, "j-0193a1b2c3d4-0001");
    pv_doc_t *doc = s_decode (w);
    assert_int_equal (client_reply_decode (doc, "r1", &reply, why,
                                           sizeof why), CLIENT_OK);
    assert_true (reply.ok);
    assert_true (pv_str_eq (pv_map_get (reply.data, "job"),
                            "j-0193a1b2c3d4-0001"));
    assert_string_equal (reply.code, "");
    client_reply_clear (&reply);
    //  ok, but for another request
    assert_int_equal (client_reply_decode (doc, "r2", &reply, why,
                                           sizeof why), CLIENT_ERR_MALFORMED);
    assert_non_null (strstr (why, "another request"));
    client_reply_clear (&reply);
    pv_doc_destroy (&doc);

    //  An error: code, sentence (made harmless), details
    pw_reset (w);
    char *details [] = { "web-0l: not registered" };
    proto_reply_error (w, "r1", PROTO_ERR_UNKNOWN_NODE, "unknown\x1b node",
                       details, 1);
    doc = s_decode (w);
    assert_int_equal (client_reply_decode (doc, "r1", &reply, why,
                                           sizeof why), CLIENT_OK);
    assert_false (reply.ok);
    assert_null (reply.data);
    assert_string_equal (reply.code, "unknown_node");
    assert_string_equal (reply.message, "unknown? node");
    assert_int_equal (pv_size (reply.details), 1);
    client_reply_clear (&reply);
    pv_doc_destroy (&doc);

    //  Shapes that are no answer
    pw_reset (w);
    pw_map (w, 3);
    pw_str (w, "v");
    pw_int (w, 7);
    pw_str (w, "type");
    pw_str (w, "ok");
    pw_str (w, "id");
    pw_str (w, "r1");
    doc = s_decode (w);
    assert_int_equal (client_reply_decode (doc, "r1", &reply, why,
                                           sizeof why), CLIENT_ERR_MALFORMED);
    assert_non_null (strstr (why, "protocol version 7"));
    client_reply_clear (&reply);
    pv_doc_destroy (&doc);

    pw_reset (w);
    pw_array (w, 0);
    doc = s_decode (w);
    assert_int_equal (client_reply_decode (doc, "r1", &reply, why,
                                           sizeof why), CLIENT_ERR_MALFORMED);
    assert_non_null (strstr (why, "not a grid protocol message"));
    client_reply_clear (&reply);
    pv_doc_destroy (&doc);

    pw_reset (w);
    pw_map (w, 3);
    pw_str (w, "v");
    pw_int (w, PROTO_VERSION);
    pw_str (w, "type");
    pw_str (w, "error");
    pw_str (w, "id");
    pw_str (w, "r1");
    doc = s_decode (w);
    assert_int_equal (client_reply_decode (doc, "r1", &reply, why,
                                           sizeof why), CLIENT_ERR_MALFORMED);
    assert_non_null (strstr (why, "code and a message"));
    client_reply_clear (&reply);
    pv_doc_destroy (&doc);

    pw_reset (w);
    pw_map (w, 3);
    pw_str (w, "v");
    pw_int (w, PROTO_VERSION);
    pw_str (w, "type");
    pw_str (w, "hello");
    pw_str (w, "id");
    pw_str (w, "r1");
    doc = s_decode (w);
    assert_int_equal (client_reply_decode (doc, "r1", &reply, why,
                                           sizeof why), CLIENT_ERR_MALFORMED);
    assert_non_null (strstr (why, "unknown type"));
    client_reply_clear (&reply);
    pv_doc_destroy (&doc);
    pw_destroy (&w);
}

static void
test_client_lazy_pirate (void **state)
{
    s_fake_t fake;
    s_fake_init (&fake, "pirate.ipc");
    fake.drop = 1;
    zactor_t *broker = zactor_new (s_fake_broker, &fake);
    client_t *client = client_new (fake.endpoint);
    assert_non_null (client);
    client_set_timeout (client, 3000);
    client_reply_t reply;
    assert_int_equal (client_job_get (client, "j-0193a1b2c3d4-0001", &reply),
                      CLIENT_OK);
    assert_true (reply.ok);
    assert_true (pv_str_eq (pv_map_get (reply.data, "type"), "job.get"));
    assert_true (pv_str_eq (pv_map_get (reply.data, "job"),
                            "j-0193a1b2c3d4-0001"));
    assert_string_equal (client_error (client), "");
    client_reply_clear (&reply);
    client_destroy (&client);
    assert_null (client);
    zactor_destroy (&broker);
    //  The first try went unanswered; the second carried the same id
    assert_int_equal (fake.requests, 2);
    assert_string_equal (fake.ids [0], fake.ids [1]);
    assert_true (strlen (fake.ids [0]) > 0);
}

static void
test_client_no_answer (void **state)
{
    char endpoint [300];
    snprintf (endpoint, sizeof endpoint, "ipc://%s/nobody.ipc", s_dir);
    client_t *client = client_new (endpoint);
    client_set_timeout (client, 300);
    client_set_tries (client, 3);
    assert_int_equal (client_timeout (client), 300);
    assert_int_equal (client_tries (client), 3);
    client_reply_t reply;
    int64_t start = zclock_mono ();
    assert_int_equal (client_status (client, &reply), CLIENT_ERR_NO_ANSWER);
    int64_t took = zclock_mono () - start;
    assert_true (took >= 250 && took < 3000);
    assert_non_null (strstr (client_error (client), "no answer from the "
                                                    "broker at ipc://"));
    assert_string_equal (client_handshake_error (client), "");
    client_reply_clear (&reply);
    client_destroy (&client);

    client = client_new ("bogus://nowhere");
    assert_int_equal (client_status (client, &reply), CLIENT_ERR_ENDPOINT);
    assert_non_null (strstr (client_error (client), "bogus://nowhere"));
    client_reply_clear (&reply);
    client_destroy (&client);
    client_destroy (&client);     //  NULL-safe
}

static void
test_client_typed_requests (void **state)
{
    s_fake_t fake;
    s_fake_init (&fake, "typed.ipc");
    zactor_t *broker = zactor_new (s_fake_broker, &fake);
    client_t *client = client_new (fake.endpoint);
    client_reply_t reply;
    int64_t value = 0;

    assert_int_equal (client_token_add (client, "ci", "operator", &reply),
                      CLIENT_OK);
    assert_true (pv_str_eq (pv_map_get (reply.data, "type"), "token.add"));
    assert_true (pv_str_eq (pv_map_get (reply.data, "name"), "ci"));
    assert_true (pv_str_eq (pv_map_get (reply.data, "role"), "operator"));
    assert_true (pv_str_eq (pv_map_get (reply.data, "id"),
                            client_request_id_last (client)));
    client_reply_clear (&reply);

    assert_int_equal (client_job_watch (client, "j-0193a1b2c3d4-0001", 4,
                                        2500, &reply), CLIENT_OK);
    assert_int_equal (pv_get_int (pv_map_get (reply.data, "after"), &value),
                      0);
    assert_int_equal (value, 4);
    assert_int_equal (pv_get_int (pv_map_get (reply.data, "timeout_ms"),
                                  &value), 0);
    assert_int_equal (value, 2500);
    client_reply_clear (&reply);
    assert_int_equal (client_job_watch (client, "j-0193a1b2c3d4-0001", -1,
                                        2500, &reply), CLIENT_OK);
    assert_null (pv_map_get (reply.data, "after"));
    client_reply_clear (&reply);

    assert_int_equal (client_job_output (client, "j-0193a1b2c3d4-0001",
                                         "web-01", 2, "stderr", 100, 4096,
                                         &reply), CLIENT_OK);
    assert_true (pv_str_eq (pv_map_get (reply.data, "stream"), "stderr"));
    assert_int_equal (pv_get_int (pv_map_get (reply.data, "offset"), &value),
                      0);
    assert_int_equal (value, 100);
    client_reply_clear (&reply);

    const char *bare [] = { "metrics.get", "relay.list", "token.list",
                            "status", "node.list", "queue.stats" };
    int (*calls []) (client_t *, client_reply_t *) = {
        client_metrics_get, client_relay_list, client_token_list,
        client_status, client_node_list, client_queue_stats
    };
    for (size_t index = 0; index < 6; index++) {
        assert_int_equal (calls [index] (client, &reply), CLIENT_OK);
        assert_true (pv_str_eq (pv_map_get (reply.data, "type"),
                                bare [index]));
        assert_int_equal (pv_size (reply.data), 3);   //  v, type, id
        client_reply_clear (&reply);
    }

    //  The generic form: any type, any fields
    pw_t *w = client_begin (client, "node.history", 2);
    pw_str (w, "node");
    pw_str (w, "web-01");
    pw_str (w, "limit");
    pw_int (w, 5);
    assert_int_equal (client_end (client, &reply), CLIENT_OK);
    assert_true (pv_str_eq (pv_map_get (reply.data, "node"), "web-01"));
    client_reply_clear (&reply);

    //  An error reply is an answer: code, sentence, details
    client_begin (client, "boom", 0);
    assert_int_equal (client_end (client, &reply), CLIENT_OK);
    assert_false (reply.ok);
    assert_string_equal (reply.code, "not_found");
    assert_string_equal (reply.message, "no such? thing");
    assert_int_equal (pv_size (reply.details), 2);
    client_reply_clear (&reply);

    //  job.submit carries the job as given
    pw_t *job = pw_new ();
    pw_map (job, 1);
    pw_str (job, "target");
    pw_str (job, "all");
    assert_int_equal (client_job_submit (client, job, &reply), CLIENT_OK);
    assert_true (pv_str_eq (pv_map_get (pv_map_get (reply.data, "job"),
                                        "target"), "all"));
    client_reply_clear (&reply);
    pw_destroy (&job);

    client_destroy (&client);
    zactor_destroy (&broker);
    assert_int_equal (fake.requests, 13);
}

static void
test_client_pipeline (void **state)
{
    s_fake_t fake;
    s_fake_init (&fake, "pipeline.ipc");
    zactor_t *broker = zactor_new (s_fake_broker, &fake);
    client_t *client = client_new (fake.endpoint);
    assert_null (client_recv (client, 10));       //  Nothing sent yet
    char ids [3][CLIENT_ID_LEN];
    pw_t *w = pw_new ();
    for (size_t index = 0; index < 3; index++) {
        client_request_id (ids [index], sizeof ids [index]);
        pw_reset (w);
        proto_request_begin (w, "status", ids [index], 0);
        assert_int_equal (client_send (client, pw_data (w), pw_size (w)), 0);
    }
    assert_non_null (client_dealer (client));
    size_t matched = 0;
    for (size_t index = 0; index < 3; index++) {
        pv_doc_t *doc = client_recv (client, 3000);
        assert_non_null (doc);
        client_reply_t reply;
        for (size_t at = 0; at < 3; at++) {
            char why [256];
            if (client_reply_decode (doc, ids [at], &reply, why, sizeof why)
                == CLIENT_OK && reply.ok)
                matched++;
            client_reply_clear (&reply);
        }
        pv_doc_destroy (&doc);
    }
    assert_int_equal (matched, 3);
    assert_null (client_recv (client, 50));
    pw_destroy (&w);
    client_destroy (&client);
    zactor_destroy (&broker);
    //  Request ids are all different, and valid names
    assert_string_not_equal (ids [0], ids [1]);
    assert_string_not_equal (ids [1], ids [2]);
}

static void
test_client_curve (void **state)
{
    char keys [300], allowed [300], why [512], public_txt [KEYS_TEXT_SIZE];
    snprintf (keys, sizeof keys, "%s/keys", s_dir);
    snprintf (allowed, sizeof allowed, "%s/allowed", s_dir);
    assert_int_equal (keys_generate (keys, "broker", false, NULL, public_txt,
                                     why, sizeof why), 0);
    assert_int_equal (keys_generate (keys, "admin", false, NULL, public_txt,
                                     why, sizeof why), 0);
    assert_int_equal (keys_generate (keys, "stranger", false, NULL,
                                     public_txt, why, sizeof why), 0);
    //  zauth lets in the public keys of a directory: only admin's
    char path [400];
    snprintf (path, sizeof path, "%s/admin.key", keys);
    zcert_t *admin = keys_load_pair (path, why, sizeof why);
    assert_non_null (admin);
    zsys_dir_create ("%s", allowed);
    snprintf (path, sizeof path, "%s/admin.cert", allowed);
    assert_int_equal (zcert_save_public (admin, path), 0);
    zcert_destroy (&admin);

    s_fake_t fake;
    s_fake_init (&fake, "curve.ipc");
    snprintf (path, sizeof path, "%s/broker.key", keys);
    fake.server_cert = keys_load_pair (path, why, sizeof why);
    assert_non_null (fake.server_cert);
    snprintf (fake.allowed_dir, sizeof fake.allowed_dir, "%s", allowed);
    zactor_t *broker = zactor_new (s_fake_broker, &fake);

    //  Our key, the broker's public key file: answered
    client_t *client = client_new (fake.endpoint);
    client_set_timeout (client, 5000);
    char key_path [400], broker_path [400];
    snprintf (key_path, sizeof key_path, "%s/admin.key", keys);
    snprintf (broker_path, sizeof broker_path, "%s/broker.key", keys);
    assert_int_equal (client_load_keys (client, key_path, broker_path), 0);
    assert_true (client_secure (client));
    client_reply_t reply;
    assert_int_equal (client_status (client, &reply), CLIENT_OK);
    assert_true (reply.ok);
    client_reply_clear (&reply);
    client_destroy (&client);

    //  Two broker keys, the wrong one first (a broker that has not yet
    //  switched to its next key): the handshake fails, the next key goes
    //  through within the same call, and stays the one in use
    client = client_new (fake.endpoint);
    client_set_timeout (client, 5000);
    char stranger_path [400], list [900], stranger_txt [KEYS_TEXT_SIZE];
    snprintf (stranger_path, sizeof stranger_path, "%s/stranger.key", keys);
    assert_int_equal (keys_read_public (stranger_path, stranger_txt, why,
                                        sizeof why), 0);
    snprintf (list, sizeof list, "%s,%s", stranger_path, broker_path);
    assert_int_equal (client_load_keys (client, key_path, list), 0);
    assert_string_equal (client_broker_key (client), stranger_txt);
    assert_int_equal (client_status (client, &reply), CLIENT_OK);
    assert_true (reply.ok);
    client_reply_clear (&reply);
    assert_string_not_equal (client_broker_key (client), stranger_txt);
    client_destroy (&client);
    //  Only wrong keys: given up at once, both named
    client = client_new (fake.endpoint);
    client_set_timeout (client, 20000);
    snprintf (list, sizeof list, "%s,%s", stranger_path, key_path);
    assert_int_equal (client_load_keys (client, key_path, list), 0);
    int64_t began = zclock_mono ();
    assert_int_equal (client_status (client, &reply), CLIENT_ERR_NO_ANSWER);
    assert_true (zclock_mono () - began < 10000);
    assert_non_null (strstr (client_error (client), stranger_txt));
    assert_non_null (strstr (client_error (client), "no handshake went "
                             "through"));
    client_reply_clear (&reply);
    //  Lists that are no lists of keys
    assert_int_equal (client_load_keys (client, key_path, ","), -1);
    assert_non_null (strstr (client_error (client), "is empty"));
    char text [900];
    snprintf (text, sizeof text, "%s,,%s", stranger_txt, stranger_txt);
    assert_int_equal (client_set_curve (client, fake.server_cert, text), -1);
    text [0] = 0;
    for (int index = 0; index <= CLIENT_BROKER_KEYS_MAX; index++)
        snprintf (text + strlen (text), sizeof text - strlen (text), "%s%s",
                  index ? "," : "", stranger_txt);
    assert_int_equal (client_set_curve (client, fake.server_cert, text), -1);
    assert_non_null (strstr (client_error (client), "more than"));
    client_destroy (&client);

    //  A key the broker does not know: refused at the handshake, at once
    client = client_new (fake.endpoint);
    client_set_timeout (client, 5000);
    snprintf (key_path, sizeof key_path, "%s/stranger.key", keys);
    assert_int_equal (client_load_keys (client, key_path, broker_path), 0);
    int64_t start = zclock_mono ();
    assert_int_equal (client_status (client, &reply), CLIENT_ERR_REFUSED);
    assert_true (zclock_mono () - start < 4000);
    assert_non_null (strstr (client_error (client), "refused this client"));
    client_reply_clear (&reply);

    //  Keys that cannot be read say so
    assert_int_equal (client_load_keys (client, "/nonexistent/x.key",
                                        broker_path), -1);
    assert_non_null (strstr (client_error (client), "client key"));
    assert_int_equal (client_load_keys (client, key_path, "not-a-key"), -1);
    assert_non_null (strstr (client_error (client), "broker key"));
    assert_int_equal (client_set_curve (client, fake.server_cert, "short"),
                      -1);
    //  Back to plaintext
    assert_int_equal (client_set_curve (client, NULL, NULL), 0);
    assert_false (client_secure (client));
    client_destroy (&client);
    zactor_destroy (&broker);
    zcert_destroy (&fake.server_cert);
}

static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "/tmp/test_client.XXXXXX");
    return mkdtemp (s_dir) ? 0 : -1;
}

static int
s_teardown (void **state)
{
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", s_dir);
    return system (command) == 0 ? 0 : -1;
}

int
main (void)
{
    zsys_init ();
    zsys_set_logsender (NULL);
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_client_reply_decode),
        cmocka_unit_test (test_client_lazy_pirate),
        cmocka_unit_test (test_client_no_answer),
        cmocka_unit_test (test_client_typed_requests),
        cmocka_unit_test (test_client_pipeline),
        cmocka_unit_test (test_client_curve),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
