/*  =========================================================================
    test_facts - the facts an agent reports (agent/facts.h) and the host
    readings they come from (backends/hostinfo.h), over a directory that
    stands for the host's root
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "../agent/facts.h"
#include "../backends/hostinfo.h"

typedef struct {
    char root [128];             //  A fake host's root
    char dir [160];              //  A facts_dir under it
} s_fixture_t;

static void
s_write (const char *root, const char *path, const char *text)
{
    char full [512];
    snprintf (full, sizeof full, "%s%s", root, path);
    //  Make each parent
    for (char *slash = strchr (full + strlen (root) + 1, '/'); slash;
         slash = strchr (slash + 1, '/')) {
        *slash = 0;
        mkdir (full, 0700);
        *slash = '/';
    }
    FILE *file = fopen (full, "w");
    assert_non_null (file);
    fputs (text, file);
    fclose (file);
}

static int
s_setup (void **state)
{
    s_fixture_t *self = calloc (1, sizeof *self);
    snprintf (self->root, sizeof self->root, "/tmp/test_facts.XXXXXX");
    assert_non_null (mkdtemp (self->root));
    snprintf (self->dir, sizeof self->dir, "%s/facts.d", self->root);
    s_write (self->root, "/etc/os-release",
             "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"
             "ID=debian\nVERSION_ID=\"12\"\n");
    s_write (self->root, "/proc/meminfo",
             "MemTotal:        8155120 kB\nMemFree: 1 kB\n"
             "MemAvailable:    4000000 kB\n");
    s_write (self->root, "/proc/stat", "cpu 1 2 3\nbtime 1764700000\n");
    s_write (self->root, "/proc/cpuinfo", "flags : fpu vme\n");
    mkdir (self->dir, 0700);
    *state = self;
    return 0;
}

static int
s_teardown (void **state)
{
    s_fixture_t *self = *state;
    char command [256];
    snprintf (command, sizeof command, "rm -rf '%s'", self->root);
    assert_int_equal (system (command), 0);
    free (self);
    return 0;
}

static void
test_facts_hostinfo (void **state)
{
    s_fixture_t *self = *state;
    char text [256];
    assert_int_equal (hostinfo_os_release (self->root, "PRETTY_NAME", text,
                                           sizeof text), 0);
    assert_string_equal (text, "Debian GNU/Linux 12 (bookworm)");
    assert_int_equal (hostinfo_os_release (self->root, "ID_LIKE", text,
                                           sizeof text), -1);
    assert_string_equal (text, "");
    hostinfo_os_family (self->root, text, sizeof text);
    assert_string_equal (text, "debian");
    long long total = 0, available = 0;
    assert_int_equal (hostinfo_meminfo (self->root, &total, &available), 0);
    assert_true (total == 8155120 && available == 4000000);
    assert_true (hostinfo_boot_time (self->root) == 1764700000);
    assert_string_equal (hostinfo_virtual (self->root), "none");
    s_write (self->root, "/proc/cpuinfo", "flags : fpu hypervisor\n");
    assert_string_equal (hostinfo_virtual (self->root), "vm");
    s_write (self->root, "/.dockerenv", "");
    assert_string_equal (hostinfo_virtual (self->root), "container");
    //  Ubuntu's family is debian
    s_write (self->root, "/etc/os-release", "ID=ubuntu\nID_LIKE=debian\n");
    hostinfo_os_family (self->root, text, sizeof text);
    assert_string_equal (text, "debian");
    //  Nothing to read
    assert_int_equal (hostinfo_meminfo ("/nonexistent", &total, &available),
                      -1);
    assert_true (hostinfo_boot_time ("/nonexistent") == -1);
}

static void
test_facts_builtin (void **state)
{
    s_fixture_t *self = *state;
    agent_config_t config;
    agent_config_init (&config);
    agent_facts_t facts = {0};
    char why [256];
    assert_int_equal (agent_facts_collect (&config, self->root, &facts, why,
                                           sizeof why), 0);
    assert_string_equal (agent_facts_get (&facts, "os"), "debian");
    assert_string_equal (agent_facts_get (&facts, "os_version"), "12");
    assert_string_equal (agent_facts_get (&facts, "os_family"), "debian");
    assert_string_equal (agent_facts_get (&facts, "mem_mb"), "7963");
    assert_string_equal (agent_facts_get (&facts, "boot_time"), "1764700000");
    assert_string_equal (agent_facts_get (&facts, "virtual"), "none");
    assert_string_equal (agent_facts_get (&facts, "agent_version"),
                         GRID_VERSION);
    assert_non_null (agent_facts_get (&facts, "arch"));
    assert_non_null (agent_facts_get (&facts, "kernel"));
    assert_non_null (agent_facts_get (&facts, "cpus"));
    assert_non_null (agent_facts_get (&facts, "hostname"));
    assert_non_null (agent_facts_get (&facts, "fqdn"));
    //  Sorted by name
    for (size_t index = 1; index < facts.count; index++)
        assert_true (strcmp (facts.facts [index - 1].key,
                             facts.facts [index].key) < 0);
    agent_facts_clear (&facts);
    agent_config_clear (&config);
}

static void
test_facts_operator (void **state)
{
    s_fixture_t *self = *state;
    char path [256];
    snprintf (path, sizeof path, "%s/agent.yaml", self->root);
    char yaml [512];
    snprintf (yaml, sizeof yaml,
              "facts:\n  rack: r12\n  os: custom\n  tier: 3\n"
              "facts_dir: %s\n", self->dir);
    s_write ("", path, yaml);
    agent_config_t config;
    agent_config_init (&config);
    char err [512];
    assert_int_equal (agent_config_load (&config, path, err, sizeof err), 0);
    assert_int_equal (config.fact_count, 3);
    s_write (self->dir, "/rack", "  r14 \nsecond line ignored\n");
    s_write (self->dir, "/owner", "team-a\n");
    s_write (self->dir, "/bad.name", "x\n");
    s_write (self->dir, "/empty", "\n");
    s_write (self->dir, "/.hidden", "x\n");
    char sub [256];
    snprintf (sub, sizeof sub, "%s/subdir", self->dir);
    mkdir (sub, 0700);
    agent_facts_t facts = {0}, again = {0};
    char why [512];
    //  Three skipped: bad.name, empty, subdir
    assert_int_equal (agent_facts_collect (&config, self->root, &facts, why,
                                           sizeof why), 3);
    assert_non_null (strstr (why, self->dir));
    assert_string_equal (agent_facts_get (&facts, "rack"), "r14");
    assert_string_equal (agent_facts_get (&facts, "owner"), "team-a");
    assert_string_equal (agent_facts_get (&facts, "os"), "custom");
    assert_string_equal (agent_facts_get (&facts, "tier"), "3");
    assert_null (agent_facts_get (&facts, "bad.name"));
    assert_null (agent_facts_get (&facts, "hidden"));
    assert_int_equal (agent_facts_collect (&config, self->root, &again, why,
                                           sizeof why), 3);
    assert_true (agent_facts_equal (&facts, &again));
    s_write (self->dir, "/owner", "team-b\n");
    assert_int_equal (agent_facts_collect (&config, self->root, &again, why,
                                           sizeof why), 3);
    assert_false (agent_facts_equal (&facts, &again));
    //  A huge file: its value is too long
    char huge [FACT_MAX_VALUE_LEN + 2];
    memset (huge, 'x', sizeof huge - 1);
    huge [sizeof huge - 1] = 0;
    s_write (self->dir, "/huge", huge);
    assert_int_equal (agent_facts_collect (&config, self->root, &again, why,
                                           sizeof why), 4);
    assert_null (agent_facts_get (&again, "huge"));
    agent_facts_clear (&facts);
    agent_facts_clear (&again);
    agent_config_clear (&config);
    //  A missing directory is one skip, with its reason
    agent_config_init (&config);
    config.facts_dir = strdup ("/nonexistent/facts.d");
    assert_int_equal (agent_facts_collect (&config, self->root, &facts, why,
                                           sizeof why), 1);
    assert_non_null (strstr (why, "cannot be read"));
    agent_facts_clear (&facts);
    agent_config_clear (&config);
}

static void
test_facts_config_errors (void **state)
{
    s_fixture_t *self = *state;
    static const struct {
        const char *yaml;
        const char *error;
    } cases [] = {
        {"facts: [a, b]\n", "facts: expected a map, got array"},
        {"facts:\n  bad.name: x\n", "'bad.name' is not a valid fact name"},
        {"facts:\n  rack: [1]\n", "facts.rack: expected a value"},
        {"facts:\n  rack: \"\"\n", "facts.rack: expected a value"},
        {"facts_interval: 10ms\n", NULL},
    };
    char path [256];
    snprintf (path, sizeof path, "%s/bad.yaml", self->root);
    for (size_t index = 0; index < sizeof cases / sizeof cases [0]; index++) {
        s_write ("", path, cases [index].yaml);
        agent_config_t config;
        agent_config_init (&config);
        char err [512] = "";
        int rc = agent_config_load (&config, path, err, sizeof err);
        if (cases [index].error) {
            if (rc == 0 || !strstr (err, cases [index].error))
                print_error ("%s: rc %d, '%s'\n", cases [index].yaml, rc, err);
            assert_int_equal (rc, -1);
            assert_non_null (strstr (err, cases [index].error));
        }
        else {
            assert_int_equal (rc, 0);
            config.id = strdup ("n1");
            assert_int_equal (agent_config_check (&config, err, sizeof err),
                              -1);
            assert_non_null (strstr (err, "facts_interval"));
        }
        agent_config_clear (&config);
    }
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup_teardown (test_facts_hostinfo, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_facts_builtin, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_facts_operator, s_setup,
                                         s_teardown),
        cmocka_unit_test_setup_teardown (test_facts_config_errors, s_setup,
                                         s_teardown),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
