/*  =========================================================================
    fixture - what the integration suites share (see fixture.h)
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <czmq.h>
#include <signal.h>

#include "fixture.h"

int
fixture_setup (void **state)
{
    grid_t *grid = (grid_t *) calloc (1, sizeof (grid_t));
    if (!grid)
        return -1;
    if (grid_init (grid) != 0) {
        free (grid);
        return -1;
    }
    *state = grid;
    return 0;
}

int
fixture_teardown (void **state)
{
    grid_t *grid = (grid_t *) *state;
    fixture_agents_forget ();
    //  A stopped broker would hold SIGTERM until grid_stop gives up on it
    if (grid->broker_pid)
        kill (grid->broker_pid, SIGCONT);
    grid_stop (grid);
    free (grid);
    return 0;
}

const pv_t *
fixture_data (const pv_doc_t *doc)
{
    const pv_t *data = NULL;
    assert_true (grid_reply_ok (doc, &data));
    return data;
}

void
fixture_assert_cells (const pv_t *record, const char *status)
{
    const pv_t *results = pv_map_get (record, "results");
    const pv_t *expected = pv_map_get (record, "expected");
    int64_t steps = 0;
    assert_int_equal (pv_get_int (pv_map_get (record, "steps"), &steps), 0);
    assert_int_equal (pv_size (results), (size_t) steps);
    assert_true (pv_size (expected) > 0);
    for (int64_t step = 0; step < steps; step++)
        for (size_t n = 0; n < pv_size (expected); n++) {
            char *node = pv_strdup (pv_array_at (expected, n));
            const pv_t *cell = grid_cell (record, (int) step, node);
            if (!cell || !grid_str_is (cell, "status", status)) {
                fprintf (stderr, "step %d node %s: ", (int) step, node);
                pv_write_json (cell, stderr, 0);
                fprintf (stderr, "\n");
            }
            assert_non_null (cell);
            assert_true (grid_str_is (cell, "status", status));
            int64_t attempts = 0;
            pv_get_int (pv_map_get (cell, "attempts"), &attempts);
            assert_int_equal (attempts, 1);
            free (node);
        }
}

const char *
fixture_relay_arg (grid_t *grid, const char *name, const char *pool,
                   char *arg, size_t arg_len)
{
    char path [400];
    assert_int_equal (grid_relay_keygen (grid, name, path, sizeof path, NULL),
                      0);
    snprintf (arg, arg_len, "%s%s%s:%s", name, pool ? "@" : "",
              pool ? pool : "", path);
    return arg;
}

void
fixture_start_relays (grid_t *grid, fixture_broker_t *broker,
                      const char *pool, const char *const *names,
                      const char *const *broker_extra, int *slots)
{
    memset (broker, 0, sizeof *broker);
    size_t argc = 0, count = 0;
    size_t max = sizeof broker->args / sizeof broker->args [0] - 1;
    for (; names [count]; count++) {
        assert_true (count < FIXTURE_RELAYS_MAX);
        broker->args [argc++] = "--relay-key";
        broker->args [argc++] = fixture_relay_arg (
            grid, names [count], pool, broker->keys [count],
            sizeof broker->keys [count]);
    }
    for (size_t index = 0; broker_extra && broker_extra [index]; index++) {
        assert_true (argc < max);
        broker->args [argc++] = broker_extra [index];
    }
    broker->args [argc] = NULL;
    assert_int_equal (grid_start_broker (grid, broker->args), 0);
    for (size_t index = 0; index < count; index++) {
        slots [index] = grid_start_relay (grid, names [index], -1, true, NULL);
        assert_true (slots [index] >= 0);
    }
}

//  Appends TEXT to the comma-separated LIST (LIST_LEN bytes).
static void
s_list_add (char *list, size_t list_len, const char *text)
{
    size_t used = strlen (list);
    snprintf (list + used, list_len - used, "%s%s", used ? "," : "", text);
}

const char *const *
fixture_via (grid_t *grid, fixture_via_t *via, const int *slots,
             size_t count, const char *const *more)
{
    memset (via, 0, sizeof *via);
    assert_true (count > 0 && count <= FIXTURE_VIA_MAX);
    for (size_t index = 0; index < count; index++) {
        int slot = slots [index];
        assert_true (slot >= 0 && (size_t) slot < grid->relay_count);
        s_list_add (via->brokers, sizeof via->brokers,
                    grid->relay_agents_ep [slot]);
        s_list_add (via->publishes, sizeof via->publishes,
                    grid->relay_publish_ep [slot]);
        s_list_add (via->keys, sizeof via->keys, grid->relay_key [slot]);
    }
    size_t argc = 0;
    via->extra [argc++] = "--broker";
    via->extra [argc++] = via->brokers;
    via->extra [argc++] = "--publish";
    via->extra [argc++] = via->publishes;
    via->extra [argc++] = "--broker-key";
    via->extra [argc++] = via->keys;
    size_t max = sizeof via->extra / sizeof via->extra [0] - 1;
    for (size_t index = 0; more && more [index]; index++) {
        assert_true (argc < max);
        via->extra [argc++] = more [index];
    }
    via->extra [argc] = NULL;
    return via->extra;
}

int
fixture_start_agent_via (grid_t *grid, const char *id, const char *groups,
                         int slot)
{
    fixture_via_t via;
    return grid_start_agent (grid, id, groups, NULL,
                             fixture_via (grid, &via, &slot, 1, NULL));
}

//  True when STATUS is one of STATUSES ("a|b").
static bool
s_one_of (const pv_t *status, const char *statuses)
{
    char *text = pv_strdup (status);
    bool found = false;
    size_t len = text ? strlen (text) : 0;
    for (const char *at = statuses; text && *at && !found;) {
        const char *end = strchr (at, '|');
        size_t at_len = end ? (size_t) (end - at) : strlen (at);
        found = at_len == len && memcmp (at, text, len) == 0;
        at += at_len + (end ? 1 : 0);
    }
    free (text);
    return found;
}

bool
fixture_wait_cells (grid_t *grid, const char *job_id, int step,
                    const char *const *nodes, const char *statuses,
                    int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (true) {
        pv_doc_t *doc = grid_call (grid, "job.get", "job", job_id, NULL);
        const pv_t *record = NULL;
        bool all = grid_reply_ok (doc, &record);
        for (size_t index = 0; all && nodes [index]; index++)
            all = s_one_of (pv_map_get (grid_cell (record, step,
                                                   nodes [index]),
                                        "status"), statuses);
        pv_doc_destroy (&doc);
        if (all)
            return true;
        if (grid_now_ms () > deadline)
            return false;
        zclock_sleep (20);
    }
}

int
fixture_file_count (const char *path, const char *text)
{
    char *content = grid_slurp (path);
    int seen = 0;
    size_t text_len = strlen (text);
    for (const char *at = content; at && text_len && (at = strstr (at, text));
         at += text_len)
        seen++;
    free (content);
    return seen;
}

bool
fixture_file_has (const char *path, const char *text)
{
    return fixture_file_count (path, text) > 0;
}

bool
fixture_wait_file (const char *path, const char *text, int count,
                   int timeout_ms)
{
    long long deadline = grid_now_ms () + timeout_ms;
    while (fixture_file_count (path, text) < count) {
        if (grid_now_ms () > deadline)
            return false;
        zclock_sleep (50);
    }
    return true;
}

bool
fixture_log_count (grid_t *grid, const char *name, const char *text,
                   int count, int timeout_ms)
{
    char path [400];
    snprintf (path, sizeof path, "%s/%s", grid->dir, name);
    return fixture_wait_file (path, text, count, timeout_ms);
}

bool
fixture_log_has (grid_t *grid, const char *name, const char *text,
                 int timeout_ms)
{
    return fixture_log_count (grid, name, text, 1, timeout_ms);
}

//  ---------------------------------------------------------------------
//  Hand-made agents

typedef struct {
    zsock_t *dealer;            //  Its connection
    char node [65];             //  The node it speaks for
} s_agent_t;

static s_agent_t s_agents [FIXTURE_AGENTS_MAX];
static size_t s_agent_count;
static int64_t s_beat_ms;       //  When they last beat
static char s_last_body [4096]; //  The last message fixture_recv read
static size_t s_last_size;

void
fixture_send_bytes (zsock_t *dealer, const void *data, size_t size)
{
    assert_int_equal (zsock_send (dealer, "b", data, size), 0);
}

void
fixture_send (zsock_t *dealer, const proto_msg_t *msg)
{
    pw_t *writer = pw_new ();
    assert_int_equal (proto_msg_encode (msg, writer), 0);
    fixture_send_bytes (dealer, pw_data (writer), pw_size (writer));
    pw_destroy (&writer);
}

void
fixture_beat (bool now)
{
    if (!now && grid_now_ms () - s_beat_ms < 200)
        return;
    s_beat_ms = grid_now_ms ();
    for (size_t index = 0; index < s_agent_count; index++) {
        proto_msg_t beat = {
            .type = PROTO_HEARTBEAT, .node = s_agents [index].node
        };
        fixture_send (s_agents [index].dealer, &beat);
    }
}

proto_msg_t *
fixture_recv (zsock_t *dealer, int timeout_ms)
{
    zpoller_t *poller = zpoller_new (dealer, NULL);
    proto_msg_t *decoded = NULL;
    int64_t deadline = grid_now_ms () + timeout_ms;
    void *ready = NULL;
    while (!ready && grid_now_ms () < deadline) {
        fixture_beat (false);
        int64_t left = deadline - grid_now_ms ();
        ready = zpoller_wait (poller, left < 100 ? (int) left : 100);
    }
    if (ready == dealer) {
        zmsg_t *msg = zmsg_recv (dealer);
        zframe_t *body = msg ? zmsg_last (msg) : NULL;
        if (body) {
            s_last_size = zframe_size (body) < sizeof s_last_body
                        ? zframe_size (body) : sizeof s_last_body;
            memcpy (s_last_body, zframe_data (body), s_last_size);
            proto_msg_decode (zframe_data (body), zframe_size (body),
                              &decoded, NULL, 0);
        }
        zmsg_destroy (&msg);
    }
    zpoller_destroy (&poller);
    return decoded;
}

const void *
fixture_last_body (size_t *size_p)
{
    *size_p = s_last_size;
    return s_last_body;
}

proto_msg_t *
fixture_recv_type (zsock_t *dealer, proto_type_t type, int timeout_ms)
{
    int64_t deadline = grid_now_ms () + timeout_ms;
    while (grid_now_ms () < deadline) {
        proto_msg_t *msg = fixture_recv (dealer,
                                         (int) (deadline - grid_now_ms ()));
        if (msg && msg->type == type)
            return msg;
        proto_msg_destroy (&msg);
    }
    return NULL;
}

void
fixture_hello (zsock_t *dealer, const char *node, size_t feature_count)
{
    proto_param_spec_t param = {
        .name = "msg", .required = true, .type = "text", .help = "text"
    };
    proto_action_spec_t action = {
        .name = "echo", .modify = false, .help = "print a message",
        .params = &param, .param_count = 1
    };
    proto_backend_spec_t backend = {
        .name = "test", .actions = &action, .action_count = 1
    };
    char *names [] = { PROTO_FEATURE_RESULT_ACKS, PROTO_FEATURE_RESULTS,
                       PROTO_FEATURE_LIVE_OUTPUT, PROTO_FEATURE_BLOBS };
    assert_true (feature_count <= sizeof names / sizeof names [0]);
    proto_msg_t hello = {
        .type = PROTO_HELLO, .node = (char *) node, .hostname = "hand-made",
        .version = "0.1.0", .concurrency = 64, .instance = "0123456789abcdef",
        .backends = &backend, .backend_count = 1,
        .features = feature_count ? names : NULL,
        .feature_count = feature_count
    };
    fixture_send (dealer, &hello);
}

zsock_t *
fixture_agent (grid_t *grid, const char *node, size_t feature_count,
               const char *endpoint, proto_msg_t **welcome_p)
{
    char key_file [400], name [100];
    snprintf (name, sizeof name, "agent-%s", node);
    assert_int_equal (grid_keygen (grid, name, key_file, sizeof key_file,
                                   NULL), 0);
    zsock_t *dealer = grid_dealer (grid, endpoint ? endpoint
                                                  : grid->agents_ep,
                                   key_file);
    assert_non_null (dealer);
    fixture_hello (dealer, node, feature_count);
    proto_msg_t *welcome = fixture_recv_type (dealer, PROTO_WELCOME, 20000);
    assert_non_null (welcome);
    if (welcome_p)
        *welcome_p = welcome;
    else
        proto_msg_destroy (&welcome);
    assert_true (s_agent_count < FIXTURE_AGENTS_MAX);
    s_agents [s_agent_count].dealer = dealer;
    snprintf (s_agents [s_agent_count].node,
              sizeof s_agents [s_agent_count].node, "%s", node);
    s_agent_count++;
    return dealer;
}

zsock_t *
fixture_agent_via (grid_t *grid, const char *node, size_t feature_count,
                   int slot, proto_msg_t **welcome_p)
{
    assert_true (slot >= 0 && (size_t) slot < grid->relay_count);
    //  The relay is the server the DEALER speaks CURVE with
    char broker_key [sizeof grid->broker_key];
    memcpy (broker_key, grid->broker_key, sizeof broker_key);
    snprintf (grid->broker_key, sizeof grid->broker_key, "%s",
              grid->relay_key [slot]);
    zsock_t *dealer = fixture_agent (grid, node, feature_count,
                                     grid->relay_agents_ep [slot], welcome_p);
    memcpy (grid->broker_key, broker_key, sizeof broker_key);
    return dealer;
}

void
fixture_take_commands (zsock_t *dealer, char jobs [][32], size_t count,
                       int timeout_ms)
{
    size_t taken = 0;
    bool seen [16] = { false };
    assert_true (count <= 16);
    int64_t deadline = grid_now_ms () + timeout_ms;
    while (taken < count && grid_now_ms () < deadline) {
        proto_msg_t *msg = fixture_recv (dealer, 500);
        for (size_t index = 0; msg && msg->type == PROTO_COMMAND
                               && index < count; index++)
            if (!seen [index] && strcmp (msg->job, jobs [index]) == 0) {
                seen [index] = true;
                taken++;
            }
        proto_msg_destroy (&msg);
    }
    assert_int_equal (taken, count);
}

void
fixture_assert_jobs (grid_t *grid, char jobs [][32], size_t count,
                     const char *node, bool output, int timeout_ms)
{
    for (size_t index = 0; index < count; index++) {
        pv_doc_t *doc = grid_wait_job (grid, jobs [index], timeout_ms);
        const pv_t *record = NULL;
        assert_true (grid_reply_ok (doc, &record));
        assert_true (grid_str_is (record, "status", "completed"));
        const pv_t *cell = grid_cell (record, 0, node);
        assert_non_null (cell);
        assert_true (grid_str_is (cell, "status", "success"));
        if (output)
            assert_true (grid_str_is (cell, "output", jobs [index]));
        int64_t attempts = 0;
        assert_int_equal (pv_get_int (pv_map_get (cell, "attempts"),
                                      &attempts), 0);
        assert_int_equal (attempts, 1);
        pv_doc_destroy (&doc);
    }
}

void
fixture_agents_forget (void)
{
    for (size_t index = 0; index < s_agent_count; index++)
        zsock_destroy (&s_agents [index].dealer);
    s_agent_count = 0;
}
