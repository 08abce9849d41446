/*  =========================================================================
    nodehist - what changed in a node between its registrations

    Each hello is compared with the node's previous one: actions added and
    removed (as "backend.action"), backends whose version changed, and the
    agent's own version. A first registration, or a hello that changes any
    of these, appends one entry to the node's history in the store:

        node_history  node id | 0x00 | seq (4 bytes BE)  ->  entry record

    Entry record: {time_ms, event: "registered" | "changed", agent_version,
    ?previous_agent_version, added: [str], removed: [str], versions:
    [{backend, from: str|nil, to: str|nil}], actions: int}. A node keeps its
    last NODEHIST_KEEP entries.

    Threading: reentrant; store transactions follow store.h's rules.
    =========================================================================
*/
#ifndef GRID_NODEHIST_H
#define GRID_NODEHIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/names.h"
#include "../proto/proto.h"
#include "../proto/pw.h"
#include "../store/store.h"

#define NODEHIST_KEEP 100        //  Entries kept per node

//  Compares hello NEWER with OLDER (NULL: the node is new) and writes the
//  entry record into WRITER when they differ in what a history records.
//  Returns true when it wrote one.
bool nodehist_diff (const proto_msg_t *older, const proto_msg_t *newer,
                    int64_t wall_ms, pw_t *writer);

//  Appends the entry RECORD (SIZE bytes) to NODE's history, dropping the
//  entries beyond NODEHIST_KEEP. Returns 0 or a STORE_ error.
int nodehist_append (store_txn_t *txn, const char *node, const void *record,
                     size_t size);

//  Writes NODE's history, newest first, at most LIMIT entries, as an
//  array of client entries (PROTOCOL.md, HISTORY ENTRY). Returns how many.
size_t nodehist_write (store_txn_t *txn, const char *node, size_t limit,
                       pw_t *writer);

#endif
