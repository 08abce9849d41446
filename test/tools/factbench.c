/*  =========================================================================
    factbench - how long targets by fact take to resolve over a large fleet

    Registers NODES nodes (50,000 by default) in a registry, each with the
    facts an agent reports (os, os_version, arch, mem_mb, cpus, rack,
    hostname, boot_time), then resolves targets by fact, alone and in
    expressions, and prints the registry's heap per node and one line per
    target: the nodes it matched and the best of several runs, in ms.
    make bench-facts runs it.

        factbench [NODES [TARGET...]]

    TARGETs given replace the built-in list (to look at one alone, under
    a profiler).
    =========================================================================
*/
#include <czmq.h>
#include <malloc.h>

#include "../../broker/registry.h"

#define S_RUNS 7

static proto_msg_t *
s_hello (const char *id, const char *group)
{
    proto_msg_t *hello = proto_msg_new (PROTO_HELLO);
    hello->node = strdup (id);
    hello->hostname = strdup (id);
    hello->version = strdup ("0.2.0");
    hello->concurrency = 1;
    hello->groups = (char **) calloc (1, sizeof (char *));
    hello->groups [0] = strdup (group);
    hello->group_count = 1;
    return hello;
}

int
main (int argc, char *argv [])
{
    size_t nodes = argc > 1 ? (size_t) atol (argv [1]) : 50000;
    if (nodes == 0 || nodes > 1000000) {
        fprintf (stderr, "factbench: NODES must be 1 to 1000000\n");
        return 2;
    }
    size_t heap_before = mallinfo2 ().uordblks;
    registry_t *registry = registry_new ();
    static const char *oses [] = {"debian", "ubuntu", "rocky", "alpine"};
    static const char *arches [] = {"x86_64", "arm64"};
    uint32_t seed = 42;
    for (size_t index = 0; index < nodes; index++) {
        char id [32], version [16], mem [16], cpus [8], rack [16], boot [16];
        seed = seed * 1103515245 + 12345;
        snprintf (id, sizeof id, "node-%06zu", index);
        snprintf (version, sizeof version, "%u.%u", 10 + seed % 4,
                  (seed >> 4) % 6);
        snprintf (mem, sizeof mem, "%u", 1024u << ((seed >> 8) % 6));
        snprintf (cpus, sizeof cpus, "%u", 1u << ((seed >> 12) % 6));
        snprintf (rack, sizeof rack, "r%u", (seed >> 16) % 200);
        snprintf (boot, sizeof boot, "%u", 1764000000u + (seed >> 8) % 864000);
        proto_msg_t *hello = s_hello (id, index % 10 ? "web" : "db");
        registry_node_t *node = registry_hello (registry, &hello, "r", 1, 1,
                                                1);
        proto_kv_t facts [] = {
            {.key = "arch", .value = (char *) arches [(seed >> 20) % 2]},
            {.key = "boot_time", .value = boot},
            {.key = "cpus", .value = cpus},
            {.key = "hostname", .value = id},
            {.key = "mem_mb", .value = mem},
            {.key = "os", .value = (char *) oses [(seed >> 24) % 4]},
            {.key = "os_version", .value = version},
            {.key = "rack", .value = rack},
        };
        if (!node
            || registry_set_facts (registry, node, facts,
                                   sizeof facts / sizeof facts [0]) != 1) {
            fprintf (stderr, "factbench: cannot register %s\n", id);
            return 1;
        }
    }
    static const char *built_in [] = {
        "fact:os=debian",
        "fact:mem_mb>=4096",
        "fact:os_version~=12.*",
        "fact:rack=r17",
        "fact:hostname=node-000123",
        "group:web and fact:arch=arm64",
        "fact:rack=r17 and fact:mem_mb>=8192",
        "fact:boot_time>1764800000",
        "fact:os=alpine or fact:rack=r1",
        "group:web and not fact:os=debian",
        "(group:db or fact:rack=r1) and fact:mem_mb>=8192",
    };
    const char *const *targets = built_in;
    size_t target_count = sizeof built_in / sizeof built_in [0];
    if (argc > 2) {
        targets = (const char *const *) argv + 2;
        target_count = (size_t) argc - 2;
    }
    //  What the registry holds: nodes, their hellos, facts and indexes
    size_t heap = mallinfo2 ().uordblks - heap_before;
    printf ("factbench: %zu nodes, %zu bytes of heap a node, best of %d "
            "runs\n", nodes, heap / nodes, S_RUNS);
    for (size_t t = 0; t < target_count; t++) {
        target_t target;
        char err [256];
        if (target_parse (targets [t], &target, err, sizeof err) != 0) {
            fprintf (stderr, "factbench: %s: %s\n", targets [t], err);
            return 1;
        }
        int64_t best_us = INT64_MAX;
        size_t matched = 0;
        for (int run = 0; run < S_RUNS; run++) {
            int64_t start = zclock_usecs ();
            char **ids = NULL;
            matched = registry_resolve (registry, &target, &ids);
            for (size_t index = 0; index < matched; index++)
                free (ids [index]);
            free (ids);
            int64_t took = zclock_usecs () - start;
            if (took < best_us)
                best_us = took;
        }
        printf ("  %-40s %6zu nodes  %7.2f ms\n", targets [t], matched,
                (double) best_us / 1000.0);
        target_clear (&target);
    }
    registry_destroy (&registry);
    return 0;
}
