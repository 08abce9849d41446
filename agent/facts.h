/*  =========================================================================
    facts - the facts a gridagent reports about its host

    Built in, read from the host (backends/hostinfo.h): os (the ID of
    os-release), os_version (its VERSION_ID), os_family (its ID_LIKE, or
    the ID), arch, kernel, cpus, mem_mb, virtual (container, vm or none),
    hostname, fqdn, boot_time (Unix seconds) and agent_version (this
    release). Then the operator's: the config's `facts:` map, then one
    fact per file of `facts_dir` (the file's name is the fact's, its first
    line, trimmed, the value). A later source replaces a fact of an
    earlier one. A file that is not a valid fact (its name, an empty or
    too long value, control bytes, a directory) is skipped and counted.

    Threading: reentrant; a set belongs to one thread.
    =========================================================================
*/
#ifndef GRID_AGENT_FACTS_H
#define GRID_AGENT_FACTS_H

#include <stdbool.h>
#include <stddef.h>

#include "../proto/facts.h"
#include "config.h"

//  A set of facts, sorted by name, each name once.
typedef struct {
    proto_kv_t *facts;      //  name -> value (owned)
    size_t count;           //  How many
} agent_facts_t;

//  Reads the facts of the host under ROOT ("" for this host; a test gives
//  a directory with etc/os-release, proc/meminfo, proc/stat) and the
//  operator facts of CONFIG into *FACTS (cleared first). Returns how many
//  files of facts_dir were skipped (0 when none), with the first reason
//  in WHY; -1 when out of memory.
int agent_facts_collect (const agent_config_t *config, const char *root,
                         agent_facts_t *facts, char *why, size_t why_len);

//  The value of fact NAME, or NULL. Borrowed from FACTS.
const char *agent_facts_get (const agent_facts_t *facts, const char *name);

//  True when A and B hold the same facts.
bool agent_facts_equal (const agent_facts_t *a, const agent_facts_t *b);

//  Frees what FACTS holds and zeroes it.
void agent_facts_clear (agent_facts_t *facts);

//  Reads CONFIG's facts again into *FACTS; logs why some were skipped
//  when that is not LAST_WHY (LAST_LEN bytes; it keeps the reason). True
//  when they changed.
bool agent_facts_refresh (const agent_config_t *config, agent_facts_t *facts,
                          char *last_why, size_t last_len);

#endif
