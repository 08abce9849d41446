/*  =========================================================================
    test_relays - the broker's relay enrolment that needs no socket: the
    relays: config list and --relay-key, with their refusals. Attestation,
    subscriptions and revocation are tested end to end in test_it_relay.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "../broker/relays.h"
#include "../proto/conf.h"

static char s_dir [256];
static char s_key [KEYS_TEXT_SIZE];     //  Public key of <dir>/relay-a.key
static char s_key2 [KEYS_TEXT_SIZE];    //  Public key of <dir>/relay-b.key

static int
s_setup (void **state)
{
    snprintf (s_dir, sizeof s_dir, "%s/grid-relays-XXXXXX",
              getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp");
    if (!mkdtemp (s_dir))
        return -1;
    char err [256];
    return keys_generate (s_dir, "relay-a", false, NULL, s_key, err,
                          sizeof err)
           || keys_generate (s_dir, "relay-b", false, NULL, s_key2, err,
                             sizeof err);
}

static int
s_teardown (void **state)
{
    char command [400];
    snprintf (command, sizeof command, "rm -rf '%s'", s_dir);
    return system (command) == 0 ? 0 : -1;
}

static int
s_load (relays_config_t *config, const char *text, char *err, size_t err_len)
{
    pv_doc_t *doc = NULL;
    assert_int_equal (conf_parse (text, strlen (text), &doc, err, err_len),
                      0);
    int rc = relays_config_load (config, pv_map_get (pv_doc_root (doc),
                                                     "relays"),
                                 err, err_len);
    pv_doc_destroy (&doc);
    return rc;
}

static void
test_relays_config_list (void **state)
{
    relays_config_t config = {0};
    char text [1024], err [512];
    snprintf (text, sizeof text,
              "relays:\n"
              "  - {key: %s/relay-a.key, name: dc1-a, pool: dc1}\n"
              "  - {key: \"%s\", name: dc1-b}\n", s_dir, s_key2);
    assert_int_equal (s_load (&config, text, err, sizeof err), 0);
    assert_int_equal (config.count, 2);
    assert_string_equal (config.entries [0].key, s_key);
    assert_string_equal (config.entries [0].name, "dc1-a");
    assert_string_equal (config.entries [0].pool, "dc1");
    //  The pool defaults to the relay's own name
    assert_string_equal (config.entries [1].pool, "dc1-b");
    assert_ptr_equal (relays_config_find (&config, s_key2),
                      &config.entries [1]);
    assert_null (relays_config_find (&config, "nope"));
    relays_config_t copy = {0};
    relays_config_copy (&copy, &config);
    assert_int_equal (copy.count, 2);
    assert_string_equal (copy.entries [1].name, "dc1-b");
    relays_config_clear (&copy);
    relays_config_clear (&config);
    assert_int_equal (config.count, 0);
    //  No list: nothing, and no error
    assert_int_equal (s_load (&config, "client: x\n", err, sizeof err), 0);
    assert_int_equal (config.count, 0);
}

static void
test_relays_config_refusals (void **state)
{
    relays_config_t config = {0};
    char text [1024], err [512];
    const char *bad [] = {
        "relays: {key: x}\n",
        "relays: [\"text\"]\n",
        "relays: [{name: a}]\n",
        "relays: [{key: nothing-here, name: a}]\n",
        "relays: [{key: \"%s\", name: \"a b\"}]\n",
        "relays: [{key: \"%s\", name: a, pool: \"p/q\"}]\n",
        "relays: [{key: \"%s\", name: a, role: admin}]\n",
        "relays: [{key: \"%s\", name: a}, {key: \"%s\", name: b}]\n",
    };
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++) {
        snprintf (text, sizeof text, bad [index], s_key, s_key);
        err [0] = 0;
        assert_int_equal (s_load (&config, text, err, sizeof err), -1);
        assert_true (strncmp (err, "relays", 6) == 0);
        relays_config_clear (&config);
    }
    //  Two names for one relay, or one name for two
    snprintf (text, sizeof text, "relays: [{key: \"%s\", name: a}, "
              "{key: \"%s\", name: a}]\n", s_key, s_key2);
    assert_int_equal (s_load (&config, text, err, sizeof err), -1);
    assert_non_null (strstr (err, "twice"));
    relays_config_clear (&config);
}

static void
test_relays_config_flag (void **state)
{
    relays_config_t config = {0};
    char text [600], err [512];
    snprintf (text, sizeof text, "edge@dc2:%s/relay-a.key", s_dir);
    assert_int_equal (relays_config_add (&config, text, err, sizeof err), 0);
    assert_string_equal (config.entries [0].name, "edge");
    assert_string_equal (config.entries [0].pool, "dc2");
    assert_string_equal (config.entries [0].key, s_key);
    snprintf (text, sizeof text, "core:%s", s_key2);
    assert_int_equal (relays_config_add (&config, text, err, sizeof err), 0);
    assert_string_equal (config.entries [1].pool, "core");
    const char *bad [] = {"", "name-only", ":key", "a:", "a@:x", "a b:x",
                          "@pool:x"};
    for (size_t index = 0; index < sizeof bad / sizeof bad [0]; index++)
        assert_int_equal (relays_config_add (&config, bad [index], err,
                                             sizeof err), -1);
    assert_int_equal (config.count, 2);
    relays_config_clear (&config);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_relays_config_list),
        cmocka_unit_test (test_relays_config_refusals),
        cmocka_unit_test (test_relays_config_flag),
    };
    return cmocka_run_group_tests (tests, s_setup, s_teardown);
}
