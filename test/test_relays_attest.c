/*  =========================================================================
    test_relays_attest - relays_attest (broker/relays.h) over a real
    context (test/lib/ctxfake.h): an enrolled relay vouches for the agents
    behind it and for itself; a key that is not an enrolled relay, or a
    relay an admin revoked, is refused; the via frame's bounds
    (RELAYS_MAX_PATH keys of KEYS_Z85_LEN characters), one pool per path,
    and no relay speaking as a relay's or a client's key. Every check
    leaves the store as it was: relays never write it.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "lib/ctxfake.h"

#define S_RELAYS 5                   //  r0..r3 in pool "east", r4 in "west"

typedef struct {
    ctxfake_t *fake;
    char relay [S_RELAYS][KEYS_TEXT_SIZE];   //  Enrolled relays' keys
    char stranger [KEYS_TEXT_SIZE];  //  A key no one enrolled
    char agent [KEYS_TEXT_SIZE];     //  An agent's key
} s_state_t;

static int
s_enrol (broker_config_t *config, const char *dir, void *arg)
{
    s_state_t *self = (s_state_t *) arg;
    char err [256];
    config->auth.auto_accept = true;
    for (size_t index = 0; index < S_RELAYS; index++) {
        char name [16], text [400];
        snprintf (name, sizeof name, "r%zu", index);
        if (keys_generate (dir, name, false, NULL, self->relay [index], err,
                           sizeof err) != 0)
            return -1;
        snprintf (text, sizeof text, "%s@%s:%s", name,
                  index < 4 ? "east" : "west", self->relay [index]);
        if (relays_config_add (&config->relays, text, err, sizeof err) != 0)
            return -1;
    }
    return keys_generate (dir, "stranger", false, NULL, self->stranger, err,
                          sizeof err)
           || keys_generate (dir, "agent", false, NULL, self->agent, err,
                             sizeof err);
}

static int
s_setup (void **state)
{
    s_state_t *self = (s_state_t *) calloc (1, sizeof *self);
    if (!self)
        return -1;
    self->fake = ctxfake_new (s_enrol, self);
    *state = self;
    return self->fake ? 0 : -1;
}

static int
s_teardown (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctxfake_destroy (&self->fake);
    free (self);
    return 0;
}

//  One attestation: the connection's key CONN, the via frame of the
//  COUNT keys KEYS (NULL entries: RELAYS_SELF). Asserts that it opened
//  no pass and left the store as it was.
typedef struct {
    int rc;
    const char *code;
    char why [256];
    relays_path_t path;
} s_attested_t;

static s_attested_t
s_attest (s_state_t *self, const char *conn, const char *const *keys,
          size_t count)
{
    ctx_t *ctx = ctxfake_ctx (self->fake);
    char via [(RELAYS_MAX_PATH + 2) * KEYS_Z85_LEN];
    assert_true (count <= RELAYS_MAX_PATH + 2);
    for (size_t index = 0; index < count; index++)
        memcpy (via + index * KEYS_Z85_LEN,
                keys [index] ? keys [index] : RELAYS_SELF, KEYS_Z85_LEN);
    uint64_t digest = ctxfake_store_digest (self->fake);
    s_attested_t out;
    memset (&out, 0, sizeof out);
    out.rc = relays_attest (ctx->relays, ctx->auth, "route", 5, conn, via,
                            count * KEYS_Z85_LEN, &out.path, &out.code,
                            out.why, sizeof out.why);
    assert_false (ctxfake_pass_open (self->fake));
    assert_true (ctxfake_store_digest (self->fake) == digest);
    return out;
}

//  Asserts that OUT was refused with CODE and a sentence holding TEXT.
static void
s_assert_refused (const s_attested_t *out, const char *code, const char *text)
{
    assert_int_equal (out->rc, -1);
    assert_non_null (out->code);
    assert_string_equal (out->code, code);
    if (!strstr (out->why, text))
        fail_msg ("'%s' does not say '%s'", out->why, text);
}

//  An enrolled relay vouches for the agent behind it: the agent's key,
//  the relay's name and pool, and the bytes of the via frame that reach
//  the agent; the agent's hello is then judged by auth as a direct one,
//  and its key remembers the pool.
static void
test_relays_attest_enrolled_vouches (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctx_t *ctx = ctxfake_ctx (self->fake);
    const char *keys [] = {self->agent};
    s_attested_t out = s_attest (self, self->relay [0], keys, 1);
    assert_int_equal (out.rc, 0);
    assert_null (out.code);
    assert_string_equal (out.path.key, self->agent);
    assert_string_equal (out.path.relay, "r0");
    assert_string_equal (out.path.pool, "east");
    assert_false (out.path.self);
    assert_int_equal (out.path.answer_size, KEYS_Z85_LEN);
    proto_msg_t *hello = ctxfake_hello_new ("web-01", "host", "i-1");
    const auth_key_t *changed = NULL;
    const char *code = NULL;
    char why [256];
    assert_int_equal (auth_agent_check_relayed (ctx->auth, out.path.key,
                                                out.path.pool, hello,
                                                ctx_wall_ms (ctx), &changed,
                                                &code, why, sizeof why), 0);
    proto_msg_destroy (&hello);
    assert_non_null (changed);
    assert_string_equal (changed->pool, "east");
    assert_int_equal (relays_refused (ctx->relays), 0);
}

//  A relay's own message ends with RELAYS_SELF: it speaks for itself.
//  Stacked relays of one pool carry each other, up to RELAYS_MAX_PATH
//  keys in the via frame.
static void
test_relays_attest_self_and_stacked (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    const char *own [] = {NULL};
    s_attested_t out = s_attest (self, self->relay [0], own, 1);
    assert_int_equal (out.rc, 0);
    assert_true (out.path.self);
    assert_string_equal (out.path.relay, "r0");
    assert_int_equal (out.path.answer_size, 0);
    const char *stacked [RELAYS_MAX_PATH] = {self->relay [1], self->relay [2],
                                             self->relay [3], self->agent};
    out = s_attest (self, self->relay [0], stacked, RELAYS_MAX_PATH);
    assert_int_equal (out.rc, 0);
    assert_string_equal (out.path.key, self->agent);
    assert_string_equal (out.path.relay, "r3");
    assert_int_equal (out.path.answer_size, RELAYS_MAX_PATH * KEYS_Z85_LEN);
    const char *upper [] = {self->relay [1], NULL};
    out = s_attest (self, self->relay [0], upper, 2);
    assert_int_equal (out.rc, 0);
    assert_true (out.path.self);
    assert_string_equal (out.path.relay, "r1");
}

//  A relay's own messages: a heartbeat and a broker_key_ack pass (the
//  broker judges the ack's key, brokerkey.h); anything else is refused.
static void
test_relays_attest_own_messages (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctx_t *ctx = ctxfake_ctx (self->fake);
    const char *own [] = {NULL};
    s_attested_t out = s_attest (self, self->relay [0], own, 1);
    assert_int_equal (out.rc, 0);
    assert_true (out.path.self);
    proto_type_t types [] = {PROTO_HEARTBEAT, PROTO_BROKER_KEY_ACK,
                             PROTO_ACK, PROTO_HELLO, PROTO_RESULT};
    int expected [] = {0, 0, -1, -1, -1};
    for (size_t index = 0; index < 5; index++) {
        proto_msg_t *msg = proto_msg_new (types [index]);
        msg->node = strdup ("r0");
        const auth_key_t *changed = NULL;
        const char *code = NULL;
        char why [256] = "";
        int rc = relays_on_own (ctx->relays, ctx->auth, ctx->registry,
                                &out.path, msg, ctx_now_ms (ctx),
                                ctx_wall_ms (ctx), &changed, &code, why,
                                sizeof why);
        proto_msg_destroy (&msg);
        assert_int_equal (rc, expected [index]);
        if (rc != 0) {
            assert_string_equal (code, PROTO_ERR_BAD_REQUEST);
            assert_non_null (strstr (why, "broker_key_acks"));
        }
    }
}

//  A key that is not an enrolled relay may not speak for another key;
//  nor may a connection with no key at all.
static void
test_relays_attest_unenrolled_refused (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctx_t *ctx = ctxfake_ctx (self->fake);
    const char *keys [] = {self->agent};
    s_attested_t out = s_attest (self, self->stranger, keys, 1);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN, "is not an enrolled relay");
    out = s_attest (self, NULL, keys, 1);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN, "is not an enrolled relay");
    //  An agent's own key may not pose as a relay either
    out = s_attest (self, self->agent, keys, 1);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN, "is not an enrolled relay");
    assert_int_equal (relays_refused (ctx->relays), 3);
}

static void
s_save_node (void *arg, registry_node_t *node)
{
    ctx_save_node ((ctx_t *) arg, node);
}

//  A relay whose key an admin rejected is revoked: what it attests is
//  refused and counted on it. Its own heartbeat passes the attestation
//  as any unenrolled relay's introduction does (path.self, no relay
//  vouched for it) and is refused by relays_on_own, saving nothing.
static void
test_relays_attest_revoked_refused (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctx_t *ctx = ctxfake_ctx (self->fake);
    bool was_bound = false;
    assert_non_null (auth_key_reject (ctx->auth, ctx_txn (ctx),
                                      self->relay [0], ctx_wall_ms (ctx),
                                      &was_bound));
    assert_int_equal (ctxfake_commit (self->fake), 0);
    const char *keys [] = {self->agent};
    s_attested_t out = s_attest (self, self->relay [0], keys, 1);
    s_assert_refused (&out, PROTO_ERR_UNAUTHORIZED, "relay r0 was revoked");
    const char *own [] = {NULL};
    out = s_attest (self, self->relay [0], own, 1);
    assert_int_equal (out.rc, 0);
    assert_true (out.path.self);
    assert_null (out.path.next);
    assert_null (out.path.pool);
    uint64_t digest = ctxfake_store_digest (self->fake);
    proto_msg_t *beat = proto_msg_new (PROTO_HEARTBEAT);
    beat->node = strdup ("r0");
    const auth_key_t *changed = NULL;
    const char *code = NULL;
    char why [256];
    assert_int_equal (relays_on_own (ctx->relays, ctx->auth, ctx->registry,
                                     &out.path, beat, ctx_now_ms (ctx),
                                     ctx_wall_ms (ctx), &changed, &code, why,
                                     sizeof why), -1);
    proto_msg_destroy (&beat);
    assert_string_equal (code, PROTO_ERR_UNAUTHORIZED);
    assert_non_null (strstr (why, "it was rejected"));
    assert_null (changed);
    assert_true (ctxfake_store_digest (self->fake) == digest);
    //  A revoked relay in the middle of a path breaks it too (counted on
    //  the relay that connects)
    const char *through [] = {self->relay [0], self->agent};
    out = s_attest (self, self->relay [1], through, 2);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN, "not (or no longer)");
    assert_int_equal (relays_refused (ctx->relays), 3);
    //  The tick marks it revoked (and would take its nodes offline)
    relays_tick (ctx->relays, ctx->auth, ctx->registry, ctx->sched,
                 ctx_now_ms (ctx), s_save_node, ctx);
    assert_int_equal (ctxfake_commit (self->fake), 0);
    size_t count = 0;
    relays_info_t *infos = relays_list (ctx->relays, ctx->registry, &count);
    uint64_t refused_r0 = 0, refused_r1 = 0;
    bool revoked_r0 = false;
    for (size_t index = 0; index < count; index++) {
        if (strcmp (infos [index].name, "r0") == 0) {
            refused_r0 = infos [index].refused;
            revoked_r0 = infos [index].revoked;
        }
        if (strcmp (infos [index].name, "r1") == 0)
            refused_r1 = infos [index].refused;
    }
    free (infos);
    assert_int_equal (refused_r0, 1);
    assert_int_equal (refused_r1, 1);
    assert_true (revoked_r0);
}

//  The via frame's bounds: 1 to RELAYS_MAX_PATH whole keys of Z85.
static void
test_relays_attest_path_limits (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctx_t *ctx = ctxfake_ctx (self->fake);
    const char *too_long [RELAYS_MAX_PATH + 1] = {
        self->relay [1], self->relay [2], self->relay [3], self->relay [1],
        self->agent};
    s_attested_t out = s_attest (self, self->relay [0], too_long,
                                 RELAYS_MAX_PATH + 1);
    char words [64];
    snprintf (words, sizeof words, "1 to %d keys", RELAYS_MAX_PATH);
    s_assert_refused (&out, PROTO_ERR_MALFORMED, words);
    //  Not a whole number of keys
    relays_path_t path;
    const char *code = NULL;
    char why [256];
    char via [2 * KEYS_Z85_LEN];
    memcpy (via, self->agent, KEYS_Z85_LEN);
    uint64_t digest = ctxfake_store_digest (self->fake);
    assert_int_equal (relays_attest (ctx->relays, ctx->auth, "route", 5,
                                     self->relay [0], via, KEYS_Z85_LEN - 1,
                                     &path, &code, why, sizeof why), -1);
    assert_string_equal (code, PROTO_ERR_MALFORMED);
    //  Something that is not Z85
    memset (via, '"', KEYS_Z85_LEN);
    assert_int_equal (relays_attest (ctx->relays, ctx->auth, "route", 5,
                                     self->relay [0], via, KEYS_Z85_LEN,
                                     &path, &code, why, sizeof why), -1);
    assert_string_equal (code, PROTO_ERR_MALFORMED);
    assert_non_null (strstr (why, "not a key"));
    assert_true (ctxfake_store_digest (self->fake) == digest);
    assert_int_equal (RELAYS_VIA_MAX, RELAYS_MAX_PATH * KEYS_Z85_LEN);
    assert_true (RELAYS_VIA_MAX <= REGISTRY_MAX_VIA);
}

//  One pool per path; a relay may not speak as a relay's or a client's
//  key; an enrolled relay's key connected directly (no via frame) is no
//  agent.
static void
test_relays_attest_pool_and_identity (void **state)
{
    s_state_t *self = (s_state_t *) *state;
    ctx_t *ctx = ctxfake_ctx (self->fake);
    const char *west [] = {self->relay [4], self->agent};
    s_attested_t out = s_attest (self, self->relay [0], west, 2);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN,
                      "relay r0 (pool east) may not carry relay r4 (pool "
                      "west)");
    const char *stranger [] = {self->stranger, self->agent};
    out = s_attest (self, self->relay [0], stranger, 2);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN, "as a relay, which it is not");
    const char *relay_as_agent [] = {self->relay [1]};
    out = s_attest (self, self->relay [0], relay_as_agent, 1);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN,
                      "may not speak as a relay's or a client's key");
    const char *client_as_agent [] = {
        ctxfake_client_key (self->fake, AUTH_ROLE_ADMIN)};
    out = s_attest (self, self->relay [0], client_as_agent, 1);
    s_assert_refused (&out, PROTO_ERR_FORBIDDEN,
                      "may not speak as a relay's or a client's key");
    out = s_attest (self, self->relay [0], NULL, 0);
    s_assert_refused (&out, PROTO_ERR_BAD_REQUEST, "behind a via frame");
    //  A direct agent is not a relay's business
    out = s_attest (self, self->agent, NULL, 0);
    assert_int_equal (out.rc, 0);
    assert_string_equal (out.path.key, self->agent);
    assert_null (out.path.pool);
    assert_int_equal (relays_refused (ctx->relays), 5);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_relays_attest_enrolled_vouches,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_relays_attest_self_and_stacked,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_relays_attest_unenrolled_refused, s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_relays_attest_revoked_refused,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_relays_attest_path_limits,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (test_relays_attest_own_messages,
                                         s_setup, s_teardown),
        cmocka_unit_test_setup_teardown (
            test_relays_attest_pool_and_identity, s_setup, s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
