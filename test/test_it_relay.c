/*  =========================================================================
    test_it_relay - gridrelay between agents and the broker, with CURVE on
    every hop: jobs through one relay and through two stacked relays,
    identities attested end to end, forged attestations refused and
    counted, a revoked relay, and the relay's command subscriptions; and
    under a broker made by hand, the epoch fence: what a demoted cluster
    active sends in an older epoch is dropped and counted at the relay,
    direct and on the commands socket.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>

#include "../broker/relays.h"
#include "../proto/keys.h"
#include "../proto/names.h"
#include "../proto/proto.h"
#include "lib/fixture.h"

//  The node record of ID (node.get), as a reply document.
static pv_doc_t *
s_node (grid_t *grid, const char *id)
{
    return grid_call (grid, "node.get", "node", id, NULL);
}

//  Agent ID through the relay in SLOT, logging every command it takes
//  (--verbose).
static int
s_start_verbose_agent_via (grid_t *grid, const char *id, const char *groups,
                           int slot)
{
    fixture_via_t via;
    const char *verbose [] = {"--verbose", NULL};
    return grid_start_agent (grid, id, groups, NULL,
                             fixture_via (grid, &via, &slot, 1, verbose));
}

//  The relay.list entry NAME in the reply DOC, or NULL.
static const pv_t *
s_relay_entry (pv_doc_t *doc, const char *name)
{
    const pv_t *data = fixture_data (doc);
    const pv_t *relays = pv_map_get (data, "relays");
    for (size_t index = 0; index < pv_size (relays); index++)
        if (grid_str_is (pv_array_at (relays, index), "name", name))
            return pv_array_at (relays, index);
    return NULL;
}

//  Polls relay.list until relay NAME reads AGENTS agents and CONNECTED.
static bool
s_wait_relay (grid_t *grid, const char *name, int64_t agents, bool connected)
{
    long long deadline = grid_now_ms () + 15000;
    while (grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (grid, "relay.list", NULL);
        const pv_t *entry = grid_reply_ok (doc, NULL)
                                ? s_relay_entry (doc, name) : NULL;
        int64_t count = -1;
        bool up = false;
        if (entry) {
            pv_get_int (pv_map_get (entry, "agents"), &count);
            pv_get_bool (pv_map_get (entry, "connected"), &up);
        }
        pv_doc_destroy (&doc);
        if (count == agents && up == connected)
            return true;
        zclock_sleep (50);
    }
    pv_doc_t *doc = grid_call (grid, "relay.list", NULL);
    fprintf (stderr, "relay.list: ");
    pv_write_json (pv_doc_root (doc), stderr, 0);
    fprintf (stderr, "\n");
    pv_doc_destroy (&doc);
    return false;
}

//  A request of TYPE (no fields) to the relay's status endpoint, as a
//  reply document.
static pv_doc_t *
s_relay_request (grid_t *grid, int slot, const char *type)
{
    zsock_t *req = zsock_new (ZMQ_REQ);
    assert_non_null (req);
    char why [512], server [KEYS_TEXT_SIZE];
    zcert_t *cert = keys_load_pair (grid->admin_key, why, sizeof why);
    assert_non_null (cert);
    assert_int_equal (keys_read_public (grid->relay_key [slot], server, why,
                                        sizeof why), 0);
    keys_curve_client (req, cert, server);
    zcert_destroy (&cert);
    zsock_set_linger (req, 0);
    zsock_set_rcvtimeo (req, 5000);
    assert_int_equal (zsock_connect (req, "%s", grid->relay_client_ep [slot]),
                      0);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, type, "s-1", 0);
    zframe_t *frame = zframe_new (pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
    assert_int_equal (zframe_send (&frame, req, 0), 0);
    zframe_t *reply = zframe_recv (req);
    zsock_destroy (&req);
    assert_non_null (reply);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (zframe_data (reply), zframe_size (reply),
                                     &doc, NULL, 0), 0);
    zframe_destroy (&reply);
    return doc;
}

//  The relay's own status (its status endpoint), as a reply document.
static pv_doc_t *
s_relay_status (grid_t *grid, int slot)
{
    return s_relay_request (grid, slot, "status");
}

static int64_t
s_relay_topics (grid_t *grid, int slot)
{
    pv_doc_t *doc = s_relay_status (grid, slot);
    int64_t topics = -1;
    pv_get_int (pv_map_get (fixture_data (doc), "topics"), &topics);
    pv_doc_destroy (&doc);
    return topics;
}

static int64_t
s_relay_counter (grid_t *grid, int slot, const char *name)
{
    pv_doc_t *doc = s_relay_status (grid, slot);
    int64_t value = -1;
    pv_get_int (pv_map_get (pv_map_get (fixture_data (doc), "counters"), name),
                &value);
    pv_doc_destroy (&doc);
    return value;
}

static int64_t
s_dropped (grid_t *grid, const char *name)
{
    pv_doc_t *doc = grid_call (grid, "status", NULL);
    int64_t value = -1;
    pv_get_int (pv_map_get (pv_map_get (fixture_data (doc), "dropped"), name),
                &value);
    pv_doc_destroy (&doc);
    return value;
}

static char *
s_run (grid_t *grid, const char *yaml)
{
    char *job_id = grid_submit_id (grid, yaml);
    assert_non_null (job_id);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = fixture_data (doc);
    if (!grid_str_is (record, "status", "completed"))
        pv_write_json (record, stderr, 2);
    assert_true (grid_str_is (record, "status", "completed"));
    fixture_assert_cells (record, "success");
    pv_doc_destroy (&doc);
    return job_id;
}

static const char *s_two_steps =
    "target: all\n"
    "tasks:\n"
    "  - {backend: test, action: echo, params: {msg: one}}\n"
    "  - {backend: test, action: echo, params: {msg: two}}\n";

//  A job over a direct agent and two agents behind one relay: every
//  result arrives once, node.get names the relay, relay.list counts its
//  agents, and the commands came through the relay's subscriptions.
static void
test_it_relay_one_relay (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relay;
    fixture_start_relays (grid, &broker, NULL, (const char *[]) {"r1", NULL},
                          NULL, &relay);
    assert_true (fixture_start_agent_via (grid, "web-01", "web", relay) >= 0);
    assert_true (fixture_start_agent_via (grid, "web-02", "web", relay) >= 0);
    assert_true (grid_start_agent (grid, "db-01", "db", NULL, NULL) >= 0);
    assert_true (s_wait_relay (grid, "r1", 2, true));
    free (s_run (grid, s_two_steps));

    pv_doc_t *doc = s_node (grid, "web-01");
    assert_true (grid_str_is (fixture_data (doc), "relay", "r1"));
    pv_doc_destroy (&doc);
    doc = s_node (grid, "db-01");
    assert_null (pv_map_get (fixture_data (doc), "relay"));
    pv_doc_destroy (&doc);

    doc = grid_call (grid, "relay.list", NULL);
    const pv_t *entry = s_relay_entry (doc, "r1");
    assert_non_null (entry);
    char key [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (grid->relay_key [relay], key, why,
                                        sizeof why), 0);
    assert_true (grid_str_is (entry, "key", key));
    assert_null (pv_map_get (entry, "upstream"));
    pv_doc_destroy (&doc);
    //  The commands went out on the relay's subscription, not one by one
    assert_true (s_relay_counter (grid, relay, "commands") >= 2);
    assert_int_equal (s_relay_counter (grid, relay, "malformed"), 0);
    //  Its metrics, in the Prometheus text format
    doc = s_relay_request (grid, relay, "metrics.get");
    char *text = pv_strdup (pv_map_get (fixture_data (doc), "text"));
    pv_doc_destroy (&doc);
    assert_non_null (text);
    assert_non_null (strstr (text, "\ngridrelay_upstream_connected 1\n"));
    assert_non_null (strstr (text, "\ngridrelay_agents 2\n"));
    assert_non_null (strstr (text, "gridrelay_messages_total{direction=\"up\"}"));
    if (system ("command -v promtool >/dev/null 2>&1") == 0) {
        char path [400], command [900];
        snprintf (path, sizeof path, "%s/relay-metrics.txt", grid->dir);
        FILE *file = fopen (path, "w");
        assert_non_null (file);
        fputs (text, file);
        fclose (file);
        snprintf (command, sizeof command,
                  "promtool check metrics <'%s' >'%s.out' 2>&1", path, path);
        int rc = system (command);
        if (rc != 0) {
            char *said = grid_slurp (strcat (path, ".out"));
            fprintf (stderr, "promtool: %s\n", said);
            free (said);
        }
        assert_int_equal (rc, 0);
    }
    free (text);
    //  As an operator sees it
    char *out = NULL, *err = NULL;
    assert_int_equal (grid_cli (grid, &out, &err, 15000, "relay", "list",
                                NULL), 0);
    assert_true (grid_line_with (out, "r1", key, "2", NULL));
    free (out);
    free (err);
    assert_int_equal (grid_cli (grid, &out, &err, 15000, "node", "info",
                                "web-01", NULL), 0);
    assert_true (grid_line_with (out, "relay", "r1", NULL));
    free (out);
    free (err);
}

//  Two relays stacked (agents -> rb -> ra -> broker), one pool: the job
//  runs once everywhere; relay.list shows rb above ra.
static void
test_it_relay_stacked (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char arg_a [600], arg_b [600];
    const char *broker_extra [] = {
        "--relay-key",
        fixture_relay_arg (grid, "ra", "dc1", arg_a, sizeof arg_a),
        "--relay-key",
        fixture_relay_arg (grid, "rb", "dc1", arg_b, sizeof arg_b),
        NULL};
    assert_int_equal (grid_start_broker (grid, broker_extra), 0);
    int ra = grid_start_relay (grid, "ra", -1, true, NULL);
    assert_true (ra >= 0);
    int rb = grid_start_relay (grid, "rb", ra, true, NULL);
    assert_true (rb >= 0);
    assert_true (fixture_start_agent_via (grid, "web-01", "web", rb) >= 0);
    assert_true (fixture_start_agent_via (grid, "web-02", "web", rb) >= 0);
    assert_true (fixture_start_agent_via (grid, "db-01", "db", ra) >= 0);
    assert_true (s_wait_relay (grid, "rb", 2, true));
    assert_true (s_wait_relay (grid, "ra", 1, true));
    free (s_run (grid, s_two_steps));
    free (s_run (grid, "target: {scope: group, value: web}\n"
                       "tasks:\n"
                       "  - {backend: test, action: echo, params: {msg: w}}\n"));
    pv_doc_t *doc = grid_call (grid, "relay.list", NULL);
    assert_true (grid_str_is (s_relay_entry (doc, "rb"), "upstream", "ra"));
    pv_doc_destroy (&doc);
    doc = s_node (grid, "web-02");
    assert_true (grid_str_is (fixture_data (doc), "relay", "rb"));
    pv_doc_destroy (&doc);
    assert_true (s_relay_counter (grid, rb, "commands") >= 2);
    //  Only the relay next to the broker batches: the one below it is not
    //  granted (ra would not read a batch)
    assert_int_equal (s_relay_counter (grid, rb, "batches"), 0);
    assert_true (s_relay_counter (grid, ra, "batches") >= 1);
}

//  Sends [via] [body] on DEALER and returns the error code of the answer
//  (caller frees), or NULL when none came. The answer comes back through
//  the via frame, or to the relay itself when the via frame is unusable.
static char *
s_attest (zsock_t *dealer, const char *via, const proto_msg_t *msg)
{
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    zmsg_t *out = zmsg_new ();
    zmsg_addmem (out, via, strlen (via));
    zmsg_addmem (out, pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
    assert_int_equal (zmsg_send (&out, dealer), 0);
    if (zsock_rcvtimeo (dealer) <= 0)
        zsock_set_rcvtimeo (dealer, 5000);
    zmsg_t *in = zmsg_recv (dealer);
    if (!in)
        return NULL;
    char *code = NULL;
    zframe_t *body = zmsg_last (in);
    proto_msg_t *reply = NULL;
    if (zmsg_size (in) >= 1 && zmsg_size (in) <= 2
        && proto_msg_decode (zframe_data (body), zframe_size (body), &reply,
                             NULL, 0) == 0) {
        code = strdup (reply->type == PROTO_ERROR ? reply->code
                                                  : proto_type_name (
                                                        reply->type));
        proto_msg_destroy (&reply);
    }
    zmsg_destroy (&in);
    return code;
}

//  An enrolled relay may speak only for keys that came through relays of
//  its pool: one that forges a direct agent's key is refused and counted,
//  and so is a key that is no relay's sending a via frame at all.
static void
test_it_relay_forged_attestation_refused (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char arg [600];
    const char *broker_extra [] = {
        "--relay-key", fixture_relay_arg (grid, "rogue", NULL, arg, sizeof arg),
        NULL};
    assert_int_equal (grid_start_broker (grid, broker_extra), 0);
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, NULL) >= 0);
    char victim [KEYS_TEXT_SIZE], path [400];
    assert_int_equal (grid_keygen (grid, "agent-web-01", path, sizeof path,
                                   victim), 0);
    char rogue_key [400];
    assert_int_equal (grid_relay_keygen (grid, "rogue", rogue_key,
                                         sizeof rogue_key, NULL), 0);
    zsock_t *rogue = grid_dealer (grid, grid->agents_ep, rogue_key);
    assert_non_null (rogue);
    proto_msg_t hello;
    memset (&hello, 0, sizeof hello);
    hello.type = PROTO_HELLO;
    hello.node = "web-01";
    hello.hostname = "forged";
    hello.version = "0.1.0";
    hello.concurrency = 1;
    int64_t before = s_dropped (grid, "impersonation");
    char *code = s_attest (rogue, victim, &hello);
    assert_non_null (code);
    assert_string_equal (code, PROTO_ERR_FORBIDDEN);
    free (code);
    assert_true (s_dropped (grid, "impersonation") > before);
    //  Nor may it speak as a heartbeat of that node
    proto_msg_t beat;
    memset (&beat, 0, sizeof beat);
    beat.type = PROTO_HEARTBEAT;
    beat.node = "web-01";
    code = s_attest (rogue, victim, &beat);
    assert_non_null (code);
    assert_string_equal (code, PROTO_ERR_FORBIDDEN);
    free (code);
    //  The victim stays where it was
    pv_doc_t *doc = s_node (grid, "web-01");
    assert_false (grid_str_is (fixture_data (doc), "hostname", "forged"));
    assert_null (pv_map_get (fixture_data (doc), "relay"));
    assert_true (grid_str_is (fixture_data (doc), "status", "online"));
    pv_doc_destroy (&doc);
    //  A via frame that holds no whole keys is dropped, counted, and
    //  answered by nothing
    int64_t malformed = s_dropped (grid, "malformed");
    zsock_set_rcvtimeo (rogue, 300);
    code = s_attest (rogue, "short", &beat);
    assert_null (code);
    assert_int_equal (s_dropped (grid, "malformed"), malformed + 1);
    zsock_destroy (&rogue);
    //  An agent's key is no relay: its via frame is refused and counted
    int64_t refused = s_dropped (grid, "relay_refused");
    zsock_t *agent = grid_dealer (grid, grid->agents_ep, path);
    assert_non_null (agent);
    char stranger [KEYS_TEXT_SIZE], other [400];
    assert_int_equal (grid_keygen (grid, "stranger", other, sizeof other,
                                   stranger), 0);
    hello.node = "stranger";
    code = s_attest (agent, stranger, &hello);
    assert_non_null (code);
    assert_string_equal (code, PROTO_ERR_FORBIDDEN);
    free (code);
    zsock_destroy (&agent);
    assert_true (s_dropped (grid, "relay_refused") > refused);
    doc = s_node (grid, "stranger");
    assert_false (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
}

//  Receives one message on DEALER (5 s at most): its frames, or NULL.
static zmsg_t *
s_recv_within (zsock_t *dealer)
{
    zsock_set_rcvtimeo (dealer, 5000);
    return zmsg_recv (dealer);
}

//  Relays batch results once the broker grants `results`: a relay of
//  this release asks in its own heartbeat, the broker answers with a
//  welcome that grants it, and its agents' results go up several pairs
//  of via and body to a message; a job through it completes everywhere.
//  Under a hand-made relay: the broker answers such a heartbeat (which
//  asks for result_acks too) with a welcome naming both, reads each pair
//  of a batch as a message of its own (two hellos), sends what goes to
//  the relay's agents in a row as one message (their two welcomes, each
//  with its via frame), and
//  drops the last pair of a batch when it lacks its body, counted as
//  malformed.
static void
test_it_relay_batches_results (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char arg [600], rogue_arg [600];
    const char *broker_extra [] = {
        "--relay-key", fixture_relay_arg (grid, "r1", NULL, arg, sizeof arg),
        "--relay-key",
        fixture_relay_arg (grid, "rogue", NULL, rogue_arg, sizeof rogue_arg),
        NULL};
    assert_int_equal (grid_start_broker (grid, broker_extra), 0);
    int relay = grid_start_relay (grid, "r1", -1, true, NULL);
    assert_true (relay >= 0);
    assert_true (fixture_start_agent_via (grid, "web-01", "web", relay) >= 0);
    assert_true (fixture_start_agent_via (grid, "web-02", "web", relay) >= 0);
    assert_true (fixture_start_agent_via (grid, "web-03", "web", relay) >= 0);
    assert_true (s_wait_relay (grid, "r1", 3, true));
    int64_t malformed = s_dropped (grid, "malformed");
    free (s_run (grid, s_two_steps));
    //  Six results, every one in a batch (a batch may carry one)
    assert_true (s_relay_counter (grid, relay, "batches") >= 1);
    assert_true (s_relay_counter (grid, relay, "batched") >= 6);
    assert_true (s_relay_counter (grid, relay, "batched")
                 >= s_relay_counter (grid, relay, "batches"));
    assert_int_equal (s_relay_counter (grid, relay, "malformed"), 0);
    assert_int_equal (s_relay_counter (grid, relay, "dropped"), 0);
    assert_int_equal (s_dropped (grid, "malformed"), malformed);

    //  The hand-made relay asks for results in its own heartbeat
    char rogue_key [400];
    assert_int_equal (grid_relay_keygen (grid, "rogue", rogue_key,
                                         sizeof rogue_key, NULL), 0);
    zsock_t *rogue = grid_dealer (grid, grid->agents_ep, rogue_key);
    assert_non_null (rogue);
    char *features [] = {PROTO_FEATURE_RESULTS, PROTO_FEATURE_RESULT_ACKS};
    proto_msg_t beat = {
        .type = PROTO_HEARTBEAT, .node = "rogue", .features = features,
        .feature_count = 2
    };
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (&beat, writer), 0);
    zmsg_t *out = zmsg_new ();
    zmsg_addstr (out, PROTO_RELAY_SELF);
    zmsg_addmem (out, pw_data (writer), pw_size (writer));
    assert_int_equal (zmsg_send (&out, rogue), 0);
    zmsg_t *in = s_recv_within (rogue);
    assert_non_null (in);
    assert_int_equal (zmsg_size (in), 1);
    proto_msg_t *welcome = NULL;
    zframe_t *frame = zmsg_first (in);
    assert_int_equal (proto_msg_decode (zframe_data (frame),
                                        zframe_size (frame), &welcome, NULL,
                                        0), 0);
    assert_int_equal (welcome->type, PROTO_WELCOME);
    assert_true (proto_msg_has_feature (welcome, PROTO_FEATURE_RESULTS));
    assert_true (proto_msg_has_feature (welcome, PROTO_FEATURE_RESULT_ACKS));
    proto_msg_destroy (&welcome);
    zmsg_destroy (&in);

    //  Two agents' hellos in one message: their two welcomes come back
    //  in one message too, a via frame and a body each (result_acks)
    char keys [2][KEYS_TEXT_SIZE], path [400];
    assert_int_equal (grid_keygen (grid, "batch-01", path, sizeof path,
                                   keys [0]), 0);
    assert_int_equal (grid_keygen (grid, "batch-02", path, sizeof path,
                                   keys [1]), 0);
    out = zmsg_new ();
    const char *nodes [] = {"batch-01", "batch-02"};
    for (int at = 0; at < 2; at++) {
        proto_msg_t hello = {
            .type = PROTO_HELLO, .node = (char *) nodes [at],
            .hostname = (char *) nodes [at], .version = "0.1.0",
            .concurrency = 1
        };
        pw_reset (writer);
        assert_int_equal (proto_msg_encode (&hello, writer), 0);
        zmsg_addstr (out, keys [at]);
        zmsg_addmem (out, pw_data (writer), pw_size (writer));
    }
    assert_int_equal (zmsg_send (&out, rogue), 0);
    bool welcomed [2] = {false, false};
    in = s_recv_within (rogue);
    assert_non_null (in);
    assert_int_equal (zmsg_size (in), 4);
    for (int count = 0; count < 2; count++) {
        char *via = zframe_strdup (zmsg_first (in));
        zframe_t *first = zmsg_pop (in);
        zframe_destroy (&first);
        frame = zmsg_pop (in);
        assert_int_equal (proto_msg_decode (zframe_data (frame),
                                            zframe_size (frame), &welcome,
                                            NULL, 0), 0);
        zframe_destroy (&frame);
        assert_int_equal (welcome->type, PROTO_WELCOME);
        for (int at = 0; at < 2; at++)
            if (streq (via, keys [at]) && streq (welcome->node, nodes [at]))
                welcomed [at] = true;
        proto_msg_destroy (&welcome);
        free (via);
    }
    zmsg_destroy (&in);
    assert_true (welcomed [0] && welcomed [1]);
    //  A batch whose last pair has no body: that pair is dropped, counted
    proto_msg_t hb = {.type = PROTO_HEARTBEAT, .node = "batch-01"};
    pw_reset (writer);
    assert_int_equal (proto_msg_encode (&hb, writer), 0);
    out = zmsg_new ();
    zmsg_addstr (out, keys [0]);
    zmsg_addmem (out, pw_data (writer), pw_size (writer));
    zmsg_addstr (out, keys [1]);
    malformed = s_dropped (grid, "malformed");
    assert_int_equal (zmsg_send (&out, rogue), 0);
    long long deadline = grid_now_ms () + 5000;
    while (s_dropped (grid, "malformed") == malformed
           && grid_now_ms () < deadline)
        zclock_sleep (20);
    assert_int_equal (s_dropped (grid, "malformed"), malformed + 1);
    pw_destroy (&writer);
    zsock_destroy (&rogue);
    //  The nodes it welcomed are online through it
    pv_doc_t *doc = s_node (grid, "batch-02");
    assert_true (grid_str_is (fixture_data (doc), "relay", "rogue"));
    pv_doc_destroy (&doc);
}

//  Rejecting a relay's key takes every node behind it offline at once;
//  its agents' messages are refused from then on.
static void
test_it_relay_revoked (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relay;
    fixture_start_relays (grid, &broker, NULL, (const char *[]) {"r1", NULL},
                          NULL, &relay);
    assert_true (fixture_start_agent_via (grid, "web-01", "web", relay) >= 0);
    assert_true (fixture_start_agent_via (grid, "web-02", "web", relay) >= 0);
    assert_true (s_wait_relay (grid, "r1", 2, true));
    char key [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (grid->relay_key [relay], key, why,
                                        sizeof why), 0);
    pv_doc_t *doc = grid_call (grid, "key.reject", "key", key, NULL);
    assert_true (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    assert_true (grid_wait_node (grid, "web-01", "offline", 5000));
    assert_true (grid_wait_node (grid, "web-02", "offline", 5000));
    doc = grid_call (grid, "relay.list", NULL);
    const pv_t *entry = s_relay_entry (doc, "r1");
    bool revoked = false, connected = true;
    pv_get_bool (pv_map_get (entry, "revoked"), &revoked);
    pv_get_bool (pv_map_get (entry, "connected"), &connected);
    assert_true (revoked);
    assert_false (connected);
    pv_doc_destroy (&doc);
    //  They do not come back through it
    zclock_sleep (1000);
    assert_true (grid_wait_node (grid, "web-01", "offline", 100));
}

//  The relay subscribes upstream to exactly the topics its agents hold,
//  and a group broadcast reaches only that group's agents.
static void
test_it_relay_subscriptions (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relay;
    fixture_start_relays (grid, &broker, NULL, (const char *[]) {"r1", NULL},
                          NULL, &relay);
    int web = s_start_verbose_agent_via (grid, "web-01", "web", relay);
    assert_true (web >= 0);
    int db = s_start_verbose_agent_via (grid, "db-01", "db", relay);
    assert_true (db >= 0);
    //  all/, node/web-01/, group/web/, node/db-01/, group/db/
    long long deadline = grid_now_ms () + 10000;
    while (s_relay_topics (grid, relay) != 5 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_relay_topics (grid, relay), 5);
    char *job_id = s_run (grid, "target: {scope: group, value: web}\n"
                                "tasks:\n"
                                "  - {backend: test, action: echo, params: "
                                "{msg: w}}\n");
    pv_doc_t *doc = grid_call (grid, "job.get", "job", job_id, NULL);
    const pv_t *expected = pv_map_get (fixture_data (doc), "expected");
    assert_int_equal (pv_size (expected), 1);
    assert_null (grid_cell (fixture_data (doc), 0, "db-01"));
    pv_doc_destroy (&doc);
    free (job_id);
    //  db-01's agent never saw the command
    char log_path [400];
    snprintf (log_path, sizeof log_path, "%s/agent-db-01.log", grid->dir);
    char *log = grid_slurp (log_path);
    assert_null (strstr (log, "test.echo"));
    free (log);
    //  When db-01 leaves, its topics go; the shared all/ stays
    grid_stop_agent (grid, db, false);
    deadline = grid_now_ms () + 10000;
    while (s_relay_topics (grid, relay) != 3 && grid_now_ms () < deadline)
        zclock_sleep (50);
    assert_int_equal (s_relay_topics (grid, relay), 3);
    free (s_run (grid, "target: all\n"
                       "tasks:\n"
                       "  - {backend: test, action: echo, params: {msg: a}}\n"));
}

//  A relay whose key is not in the config waits as a pending relay key
//  (key.list, kind relay) until an admin accepts it, by the name it gave
//  (gridcli key accept NAME) as by its key; then it carries agents like
//  an enrolled one.
static void
test_it_relay_accepted_by_name (void **state)
{
    grid_t *grid = (grid_t *) *state;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "late", -1, true, NULL);
    assert_true (relay >= 0);
    char key [KEYS_TEXT_SIZE], why [256];
    assert_int_equal (keys_read_public (grid->relay_key [relay], key, why,
                                        sizeof why), 0);
    //  It said who it is: pending, as a relay
    long long deadline = grid_now_ms () + 10000;
    bool pending = false;
    while (!pending && grid_now_ms () < deadline) {
        pv_doc_t *doc = grid_call (grid, "key.list", NULL);
        const pv_t *keys = pv_map_get (fixture_data (doc), "keys");
        for (size_t index = 0; index < pv_size (keys); index++) {
            const pv_t *entry = pv_array_at (keys, index);
            if (grid_str_is (entry, "key", key)) {
                assert_true (grid_str_is (entry, "kind", "relay"));
                assert_true (grid_str_is (entry, "name", "late"));
                pending = grid_str_is (entry, "status", "pending");
            }
        }
        pv_doc_destroy (&doc);
        if (!pending)
            zclock_sleep (50);
    }
    assert_true (pending);
    //  Its agents wait meanwhile
    int slot = grid_spawn_agent (grid, "web-01", "web", NULL, (const char *[]) {
        "--broker", grid->relay_agents_ep [relay], "--publish",
        grid->relay_publish_ep [relay], "--broker-key",
        grid->relay_key [relay], NULL});
    assert_true (slot >= 0);
    zclock_sleep (500);
    pv_doc_t *doc = s_node (grid, "web-01");
    assert_false (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    //  A name nobody goes by is not found
    char *out = NULL, *err = NULL;
    assert_int_not_equal (grid_cli (grid, &out, &err, 10000, "key", "accept",
                                    "early", NULL), 0);
    if (!strstr (err, "no key speaks for node or relay early"))
        fprintf (stderr, "%s", err);
    assert_non_null (strstr (err, "no key speaks for node or relay early"));
    free (out);
    free (err);
    assert_int_equal (grid_cli (grid, &out, &err, 10000, "key", "accept",
                                "late", NULL), 0);
    assert_non_null (strstr (out, key));
    free (out);
    free (err);
    assert_true (grid_wait_node (grid, "web-01", "online", 10000));
    assert_true (s_wait_relay (grid, "late", 1, true));
    free (s_run (grid, s_two_steps));
    doc = s_node (grid, "web-01");
    assert_true (grid_str_is (fixture_data (doc), "relay", "late"));
    pv_doc_destroy (&doc);
    //  After a broker restart the key is still a relay's, and its agent,
    //  bound to the relay's pool, is taken through it again
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    assert_true (grid_wait_node (grid, "web-01", "online", 20000));
    assert_true (s_wait_relay (grid, "late", 1, true));
}

//  Writes the broker's config at PATH: relays: with the one relay NAME
//  whose public key file is KEY.
static void
s_write_relays (const char *path, const char *name, const char *key)
{
    FILE *file = fopen (path, "w");
    assert_non_null (file);
    fprintf (file, "relays:\n  - {key: \"%s\", name: %s}\n", key, name);
    fclose (file);
}

//  SIGHUP reads relays: again: a relay taken out is refused and its nodes
//  go offline, one put in carries agents at once, one renamed is named so
//  by its nodes. A node keeps the name of its relay across a broker
//  restart, while it is offline.
static void
test_it_relay_reloaded_by_sighup (void **state)
{
    grid_t *grid = (grid_t *) *state;
    char key_1 [400], key_2 [400], config [400];
    assert_int_equal (grid_relay_keygen (grid, "r1", key_1, sizeof key_1,
                                         NULL), 0);
    assert_int_equal (grid_relay_keygen (grid, "r2", key_2, sizeof key_2,
                                         NULL), 0);
    snprintf (config, sizeof config, "%s/broker.yaml", grid->dir);
    s_write_relays (config, "r1", key_1);
    const char *extra [] = {"--config", config, NULL};
    assert_int_equal (grid_start_broker (grid, extra), 0);
    int r1 = grid_start_relay (grid, "r1", -1, true, NULL);
    assert_true (r1 >= 0);
    int r2 = grid_start_relay (grid, "r2", -1, true, NULL);
    assert_true (r2 >= 0);
    assert_true (fixture_start_agent_via (grid, "web-01", "web", r1) >= 0);
    assert_true (s_wait_relay (grid, "r1", 1, true));

    //  r1 out, r2 in
    s_write_relays (config, "r2", key_2);
    assert_int_equal (kill (grid->broker_pid, SIGHUP), 0);
    assert_true (grid_wait_node (grid, "web-01", "offline", 15000));
    int slot = fixture_start_agent_via (grid, "web-02", "web", r2);
    assert_true (slot >= 0);
    assert_true (s_wait_relay (grid, "r2", 1, true));
    pv_doc_t *doc = s_node (grid, "web-02");
    assert_true (grid_str_is (fixture_data (doc), "relay", "r2"));
    pv_doc_destroy (&doc);
    //  web-01 stays out: r1 speaks for nobody now
    doc = s_node (grid, "web-01");
    assert_true (grid_str_is (fixture_data (doc), "status", "offline"));
    pv_doc_destroy (&doc);
    char path [400];
    snprintf (path, sizeof path, "%s/broker.log", grid->dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    if (!strstr (log, "1 relay (1 added, 1 removed)"))
        fprintf (stderr, "%s", log);
    assert_non_null (strstr (log, "1 relay (1 added, 1 removed)"));
    assert_null (strstr (log, "take effect at the next start: relays"));
    free (log);
    //  r2 renamed: its node says the new name at once
    s_write_relays (config, "r2-east", key_2);
    assert_int_equal (kill (grid->broker_pid, SIGHUP), 0);
    assert_true (s_wait_relay (grid, "r2-east", 1, true));
    doc = s_node (grid, "web-02");
    assert_true (grid_str_is (fixture_data (doc), "relay", "r2-east"));
    pv_doc_destroy (&doc);

    //  After a restart, offline nodes still name their relay
    grid_stop_agent (grid, slot, false);
    grid_stop_broker (grid, true);
    assert_int_equal (grid_start_broker (grid, extra), 0);
    doc = s_node (grid, "web-02");
    assert_true (grid_str_is (fixture_data (doc), "status", "offline"));
    assert_true (grid_str_is (fixture_data (doc), "relay", "r2-east"));
    pv_doc_destroy (&doc);
    doc = s_node (grid, "web-01");
    assert_true (grid_str_is (fixture_data (doc), "relay", "r1"));
    pv_doc_destroy (&doc);
}

//  Agents list two relays; the first dies with SIGKILL while every agent
//  runs a step. They fail over to the second, re-send what they spooled,
//  the broker re-sends what was not acknowledged: every result arrives,
//  once.
static void
test_it_relay_killed_mid_job (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relays [2];
    //  A grace long enough for a failover: running steps of a node that
    //  comes back within it are not lost
    fixture_start_relays (grid, &broker, "dc1",
                          (const char *[]) {"r1", "r2", NULL},
                          (const char *[]) {"--offline-grace", "15s", NULL},
                          relays);
    int r1 = relays [0];
    fixture_via_t via;
    const char *failover [] = {"--failover", "1s", NULL};
    const char *const *extra = fixture_via (grid, &via, relays, 2, failover);
    const char *ids [] = {"web-01", "web-02", "web-03", NULL};
    for (size_t index = 0; index < 3; index++)
        assert_true (grid_start_agent (grid, ids [index], "web", NULL, extra)
                     >= 0);
    assert_true (s_wait_relay (grid, "r1", 3, true));
    //  Step 0 lasts long enough for all three to be seen running at once
    //  on a busy machine
    char *job_id = grid_submit_id (grid,
        "target: all\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 4}}\n"
        "  - tasks:\n"
        "      - {backend: test, action: echo, params: {msg: one}}\n"
        "      - {backend: test, action: echo, params: {msg: two}}\n"
        "  - {backend: test, action: echo, params: {msg: three}}\n");
    assert_non_null (job_id);
    //  Every agent runs step 0, then r1 dies under them
    assert_true (fixture_wait_cells (grid, job_id, 0, ids, "running",
                                     20000));
    grid_stop_relay (grid, r1, true);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = fixture_data (doc);
    if (!grid_str_is (record, "status", "completed"))
        pv_write_json (record, stderr, 2);
    assert_true (grid_str_is (record, "status", "completed"));
    fixture_assert_cells (record, "success");
    assert_true (grid_str_is (grid_cell (record, 3, "web-02"), "output",
                              "three\n"));
    pv_doc_destroy (&doc);
    free (job_id);
    for (size_t index = 0; index < 3; index++) {
        doc = s_node (grid, ids [index]);
        assert_true (grid_str_is (fixture_data (doc), "relay", "r2"));
        pv_doc_destroy (&doc);
    }
    assert_true (s_wait_relay (grid, "r2", 3, true));
    assert_true (s_wait_relay (grid, "r1", 0, false));
}

//  The only relay of its agents dies with SIGKILL mid-job and comes back:
//  they reconnect to it, re-send what they spooled, and every result
//  arrives once. The relay kept nothing.
static void
test_it_relay_restarted_mid_job (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relay;
    fixture_start_relays (grid, &broker, NULL, (const char *[]) {"r1", NULL},
                          (const char *[]) {"--offline-grace", "15s", NULL},
                          &relay);
    assert_true (fixture_start_agent_via (grid, "web-01", "web", relay) >= 0);
    assert_true (fixture_start_agent_via (grid, "web-02", "web", relay) >= 0);
    char *job_id = grid_submit_id (grid,
        "target: all\n"
        "tasks:\n"
        "  - {backend: test, action: sleep, params: {seconds: 4}}\n"
        "  - {backend: test, action: echo, params: {msg: after}}\n");
    assert_non_null (job_id);
    //  Both run step 0 (long enough to be seen running at once on a busy
    //  machine) when the relay dies
    assert_true (fixture_wait_cells (grid, job_id, 0,
                                     (const char *[]) {"web-01", "web-02",
                                                       NULL},
                                     "running", 20000));
    grid_stop_relay (grid, relay, true);
    assert_int_equal (grid_start_relay (grid, "r1", -1, true, NULL), relay);
    pv_doc_t *doc = grid_wait_job (grid, job_id, 30000);
    const pv_t *record = fixture_data (doc);
    if (!grid_str_is (record, "status", "completed"))
        pv_write_json (record, stderr, 2);
    assert_true (grid_str_is (record, "status", "completed"));
    fixture_assert_cells (record, "success");
    assert_true (grid_str_is (grid_cell (record, 1, "web-02"), "output",
                              "after\n"));
    pv_doc_destroy (&doc);
    free (job_id);
    assert_true (s_wait_relay (grid, "r1", 2, true));
}

//  Plaintext on every hop (--insecure): the relay is named by its own
//  heartbeat and the job runs through it.
static void
test_it_relay_insecure (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->insecure = true;
    assert_int_equal (grid_start_broker (grid, NULL), 0);
    int relay = grid_start_relay (grid, "plain", -1, true, NULL);
    assert_true (relay >= 0);
    const char *extra [] = {"--broker", grid->relay_agents_ep [relay],
                            "--publish", grid->relay_publish_ep [relay],
                            NULL};
    assert_true (grid_start_agent (grid, "web-01", "web", NULL, extra) >= 0);
    assert_true (grid_start_agent (grid, "web-02", "web", NULL, extra) >= 0);
    assert_true (s_wait_relay (grid, "plain", 2, true));
    free (s_run (grid, s_two_steps));
    pv_doc_t *doc = s_node (grid, "web-02");
    assert_true (grid_str_is (fixture_data (doc), "relay", "plain"));
    pv_doc_destroy (&doc);
}

//  A welcome entitles an agent's key, at the relay, to the topics of its
//  last hello only when it names that hello's node: a key that says hello
//  as x-01 and at once as y-01 (which the broker refuses) gets nothing of
//  y-01's from x-01's welcome, so its SUB cannot take y-01's commands.
static void
test_it_relay_welcome_names_the_hello (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_broker_t broker;
    int relay;
    fixture_start_relays (grid, &broker, NULL, (const char *[]) {"r1", NULL},
                          NULL, &relay);
    //  A raw agent of its own key, speaking CURVE to the relay
    char path [400], public_txt [KEYS_TEXT_SIZE], server [KEYS_TEXT_SIZE];
    char why [256];
    assert_int_equal (grid_keygen (grid, "agent-x-01", path, sizeof path,
                                   public_txt), 0);
    assert_int_equal (keys_read_public (grid->relay_key [relay], server, why,
                                        sizeof why), 0);
    zcert_t *cert = keys_load_pair (path, why, sizeof why);
    assert_non_null (cert);
    zsock_t *dealer = zsock_new (ZMQ_DEALER);
    zsock_t *sub = zsock_new (ZMQ_SUB);
    keys_curve_client (dealer, cert, server);
    keys_curve_client (sub, cert, server);
    zcert_destroy (&cert);
    zsock_set_linger (dealer, 0);
    zsock_set_linger (sub, 0);
    zsock_set_rcvtimeo (dealer, 10000);
    assert_int_equal (zsock_connect (dealer, "%s",
                                     grid->relay_agents_ep [relay]), 0);
    assert_int_equal (zsock_connect (sub, "%s",
                                     grid->relay_publish_ep [relay]), 0);
    proto_msg_t hello;
    memset (&hello, 0, sizeof hello);
    hello.type = PROTO_HELLO;
    hello.hostname = "raw";
    hello.version = "0.1.0";
    hello.concurrency = 1;
    const char *ids [] = {"x-01", "y-01"};
    pw_t *writer = pw_new ();
    for (int at = 0; at < 2; at++) {
        hello.node = (char *) ids [at];
        pw_reset (writer);
        assert_int_equal (proto_msg_encode (&hello, writer), 0);
        assert_int_equal (zsock_send (dealer, "b", pw_data (writer),
                                      pw_size (writer)), 0);
    }
    pw_destroy (&writer);
    //  x-01's welcome comes back
    bool welcomed = false;
    for (int count = 0; count < 4 && !welcomed; count++) {
        zframe_t *frame = zframe_recv (dealer);
        if (!frame)
            break;
        proto_msg_t *msg = NULL;
        if (proto_msg_decode (zframe_data (frame), zframe_size (frame), &msg,
                              NULL, 0) == 0)
            welcomed = msg->type == PROTO_WELCOME
                       && strcmp (msg->node, "x-01") == 0;
        proto_msg_destroy (&msg);
        zframe_destroy (&frame);
    }
    assert_true (welcomed);
    //  Its SUB asks for y-01's commands: refused and counted
    int64_t refused = s_relay_counter (grid, relay, "refused_topics");
    zsock_set_subscribe (sub, "node/y-01/");
    int64_t deadline = zclock_mono () + 10000;
    while (s_relay_counter (grid, relay, "refused_topics") <= refused
           && zclock_mono () < deadline)
        zclock_sleep (50);
    assert_true (s_relay_counter (grid, relay, "refused_topics") > refused);
    //  The broker never sends y-01 a command through it: no such node
    pv_doc_t *doc = s_node (grid, "y-01");
    assert_false (grid_reply_ok (doc, NULL));
    pv_doc_destroy (&doc);
    zsock_destroy (&sub);
    zsock_destroy (&dealer);
}

//  ---------------------------------------------------------------------
//  The epoch fence at the relay: a broker made by hand upstream (insecure)

typedef struct {
    zsock_t *router;             //  Its agent endpoint
    zsock_t *xpub;               //  Its commands endpoint
    zframe_t *routing;           //  The relay's connection
    zframe_t *via;               //  The agent's via frame
    pw_t *writer;
} s_upstream_t;

//  Sends MSG to the agent through the relay: direct, or on TOPIC.
static void
s_upstream_send (s_upstream_t *up, const proto_msg_t *msg, const char *topic)
{
    pw_reset (up->writer);
    assert_int_equal (proto_msg_encode (msg, up->writer), 0);
    zmsg_t *out = zmsg_new ();
    if (topic)
        zmsg_addstr (out, topic);
    else {
        zmsg_addmem (out, zframe_data (up->routing),
                     zframe_size (up->routing));
        zmsg_addmem (out, zframe_data (up->via), zframe_size (up->via));
    }
    zmsg_addmem (out, pw_data (up->writer), pw_size (up->writer));
    assert_int_equal (zmsg_send (&out, topic ? up->xpub : up->router), 0);
}

//  The next agent message of TYPE (through the relay) about JOB (NULL:
//  any), keeping its routing and via frames; NULL after 20 s.
static proto_msg_t *
s_upstream_recv (s_upstream_t *up, proto_type_t type, const char *job)
{
    long long deadline = grid_now_ms () + 20000;
    while (grid_now_ms () < deadline) {
        zsock_set_rcvtimeo (up->router, 200);
        zmsg_t *in = zmsg_recv (up->router);
        if (!in)
            continue;
        proto_msg_t *msg = NULL;
        if (zmsg_size (in) == 3) {
            zframe_t *routing = zmsg_pop (in);
            zframe_t *via = zmsg_pop (in);
            zframe_t *body = zmsg_pop (in);
            if (proto_msg_decode (zframe_data (body), zframe_size (body),
                                  &msg, NULL, 0) == 0
                && msg->type == type
                && (!job || (msg->job && strcmp (msg->job, job) == 0))) {
                zframe_destroy (&up->routing);
                zframe_destroy (&up->via);
                up->routing = routing;
                up->via = via;
            }
            else {
                proto_msg_destroy (&msg);
                zframe_destroy (&routing);
                zframe_destroy (&via);
            }
            zframe_destroy (&body);
        }
        zmsg_destroy (&in);
        if (msg)
            return msg;
    }
    return NULL;
}

//  The relay's count of messages dropped for a stale epoch (its metrics,
//  from its status endpoint, plain: the relay is insecure).
static int64_t
s_stale_epochs (grid_t *grid, int slot)
{
    zsock_t *req = zsock_new (ZMQ_REQ);
    assert_non_null (req);
    zsock_set_linger (req, 0);
    zsock_set_rcvtimeo (req, 5000);
    assert_int_equal (zsock_connect (req, "%s", grid->relay_client_ep [slot]),
                      0);
    pw_t *writer = pw_new ();
    proto_request_begin (writer, "metrics.get", "s-1", 0);
    zframe_t *frame = zframe_new (pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
    assert_int_equal (zframe_send (&frame, req, 0), 0);
    zframe_t *reply = zframe_recv (req);
    zsock_destroy (&req);
    assert_non_null (reply);
    pv_doc_t *doc = NULL;
    assert_int_equal (pv_doc_decode (zframe_data (reply), zframe_size (reply),
                                     &doc, NULL, 0), 0);
    zframe_destroy (&reply);
    char *text = pv_strdup (pv_map_get (fixture_data (doc), "text"));
    pv_doc_destroy (&doc);
    const char *mark = "gridrelay_dropped_total{reason=\"stale_epoch\"} ";
    const char *at = text ? strstr (text, mark) : NULL;
    int64_t count = at ? strtoll (at + strlen (mark), NULL, 10) : -1;
    free (text);
    return count;
}

//  A command of JOB (test echo), of EPOCH.
static proto_msg_t
s_echo_command (const char *job, uint64_t epoch)
{
    static proto_kv_t param = {"msg", "fenced", false};
    proto_msg_t command = {
        .type = PROTO_COMMAND, .job = (char *) job, .attempt = 1,
        .backend = "test", .action = "echo", .params = &param,
        .param_count = 1, .timeout_ms = 30000, .epoch = epoch
    };
    return command;
}

//  Welcomed in epoch 20 through the relay, the agent gets nothing of epoch
//  19 (a demoted active): the relay drops it, direct and on the commands
//  socket, and counts it; what comes in epoch 20 passes.
static void
test_it_relay_epoch_fence (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->insecure = true;
    s_upstream_t up = { zsock_new (ZMQ_ROUTER), zsock_new (ZMQ_XPUB), NULL,
                        NULL, pw_new () };
    assert_non_null (up.router);
    assert_non_null (up.xpub);
    zsock_set_linger (up.router, 0);
    zsock_set_linger (up.xpub, 0);
    assert_int_equal (zsock_bind (up.router, "%s", grid->agents_ep), 0);
    assert_int_equal (zsock_bind (up.xpub, "%s", grid->publish_ep), 0);
    int relay = grid_start_relay (grid, "plain", -1, true, NULL);
    assert_true (relay >= 0);
    const char *extra [] = {"--broker", grid->relay_agents_ep [relay],
                            "--publish", grid->relay_publish_ep [relay],
                            NULL};
    assert_true (grid_spawn_agent (grid, "web-01", "web", NULL, extra) >= 0);
    proto_msg_t *hello = s_upstream_recv (&up, PROTO_HELLO, NULL);
    assert_non_null (hello);
    assert_true (proto_hello_has_feature (hello, PROTO_FEATURE_EPOCH));
    proto_msg_destroy (&hello);
    char *granted [] = {PROTO_FEATURE_EPOCH};
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = "web-01", .heartbeat_ms = 1000,
        .features = granted, .feature_count = 1, .epoch = 20
    };
    s_upstream_send (&up, &welcome, NULL);
    assert_int_equal (s_stale_epochs (grid, relay), 0);

    //  Direct: the stale command is dropped at the relay, the next runs
    const char *stale_job = "j-0193a1b2c3d4-0001";
    const char *job = "j-0193a1b2c3d4-0002";
    proto_msg_t command = s_echo_command (stale_job, 19);
    s_upstream_send (&up, &command, NULL);
    command = s_echo_command (job, 20);
    s_upstream_send (&up, &command, NULL);
    proto_msg_t *result = s_upstream_recv (&up, PROTO_RESULT, job);
    assert_non_null (result);
    assert_string_equal (result->status, "success");
    proto_msg_destroy (&result);
    assert_int_equal (s_stale_epochs (grid, relay), 1);

    //  On the commands socket, once the agent's topic is subscribed
    char *topic = topic_for_node ("web-01");
    long long deadline = grid_now_ms () + 20000;
    bool subscribed = false;
    zsock_set_rcvtimeo (up.xpub, 200);
    while (!subscribed && grid_now_ms () < deadline) {
        zframe_t *frame = zframe_recv (up.xpub);
        subscribed = frame && zframe_size (frame) == 1 + strlen (topic)
                     && zframe_data (frame) [0] == 1
                     && memcmp (zframe_data (frame) + 1, topic,
                                strlen (topic)) == 0;
        zframe_destroy (&frame);
    }
    assert_true (subscribed);
    const char *stale_pub = "j-0193a1b2c3d4-0003";
    const char *pub = "j-0193a1b2c3d4-0004";
    command = s_echo_command (stale_pub, 19);
    s_upstream_send (&up, &command, topic);
    command = s_echo_command (pub, 20);
    s_upstream_send (&up, &command, topic);
    result = s_upstream_recv (&up, PROTO_RESULT, pub);
    assert_non_null (result);
    proto_msg_destroy (&result);
    assert_int_equal (s_stale_epochs (grid, relay), 2);
    free (topic);

    //  The agent never saw them: it dropped nothing itself
    char path [600];
    snprintf (path, sizeof path, "%s/agent-web-01.log", grid->dir);
    char *log = grid_slurp (path);
    assert_non_null (log);
    assert_null (strstr (log, "dropped a command"));
    free (log);
    grid_stop_agent (grid, 0, true);
    zframe_destroy (&up.routing);
    zframe_destroy (&up.via);
    pw_destroy (&up.writer);
    zsock_destroy (&up.router);
    zsock_destroy (&up.xpub);
}

//  A batch from upstream ([routing] [via] [body] [via] [body], what a
//  broker sends a relay granted result_acks) is split: each pair goes to
//  its peer as a message of its own. Under a broker made by hand: two
//  commands in one message both run.
static void
test_it_relay_splits_batches (void **state)
{
    grid_t *grid = (grid_t *) *state;
    grid->insecure = true;
    s_upstream_t up = { zsock_new (ZMQ_ROUTER), zsock_new (ZMQ_XPUB), NULL,
                        NULL, pw_new () };
    assert_non_null (up.router);
    zsock_set_linger (up.router, 0);
    zsock_set_linger (up.xpub, 0);
    assert_int_equal (zsock_bind (up.router, "%s", grid->agents_ep), 0);
    assert_int_equal (zsock_bind (up.xpub, "%s", grid->publish_ep), 0);
    int relay = grid_start_relay (grid, "plain", -1, true, NULL);
    assert_true (relay >= 0);
    const char *extra [] = {"--broker", grid->relay_agents_ep [relay],
                            "--publish", grid->relay_publish_ep [relay],
                            NULL};
    assert_true (grid_spawn_agent (grid, "web-01", "web", NULL, extra) >= 0);
    proto_msg_t *hello = s_upstream_recv (&up, PROTO_HELLO, NULL);
    assert_non_null (hello);
    proto_msg_destroy (&hello);
    proto_msg_t welcome = {
        .type = PROTO_WELCOME, .node = "web-01", .heartbeat_ms = 1000
    };
    s_upstream_send (&up, &welcome, NULL);
    const char *jobs [] = {"j-0193a1b2c3d4-0011", "j-0193a1b2c3d4-0012"};
    zmsg_t *out = zmsg_new ();
    zmsg_addmem (out, zframe_data (up.routing), zframe_size (up.routing));
    for (int at = 0; at < 2; at++) {
        proto_msg_t command = s_echo_command (jobs [at], 0);
        pw_reset (up.writer);
        assert_int_equal (proto_msg_encode (&command, up.writer), 0);
        zmsg_addmem (out, zframe_data (up.via), zframe_size (up.via));
        zmsg_addmem (out, pw_data (up.writer), pw_size (up.writer));
    }
    assert_int_equal (zmsg_send (&out, up.router), 0);
    //  One slot: the second runs after the first
    for (int at = 0; at < 2; at++) {
        proto_msg_t *result = s_upstream_recv (&up, PROTO_RESULT, jobs [at]);
        assert_non_null (result);
        assert_string_equal (result->status, "success");
        proto_msg_destroy (&result);
    }
    grid_stop_agent (grid, 0, true);
    zframe_destroy (&up.routing);
    zframe_destroy (&up.via);
    pw_destroy (&up.writer);
    zsock_destroy (&up.router);
    zsock_destroy (&up.xpub);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_it_relay_one_relay, fixture_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_batches_results,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_stacked, fixture_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (
            test_it_relay_forged_attestation_refused, fixture_setup,
            fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_revoked, fixture_setup,
                                         fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_subscriptions,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_accepted_by_name,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_reloaded_by_sighup,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_killed_mid_job,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_restarted_mid_job,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_welcome_names_the_hello,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_splits_batches,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_epoch_fence,
                                         fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown (test_it_relay_insecure, fixture_setup,
                                         fixture_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
