/*  =========================================================================
    nodefacts - nodes' facts in the store

    A node's facts come in their own message (facts, after the welcome
    granted them), change rarely, and must survive a broker restart so
    that a target by fact resolves before the fleet says hello again. They
    are kept apart from the node's record, which the previous release
    reads and would refuse with a key it does not know:

        node_facts  node id  ->  {name: value, ...}  (msgpack map)

    Threading: reentrant; store transactions follow store.h's rules.
    =========================================================================
*/
#ifndef GRID_NODEFACTS_H
#define GRID_NODEFACTS_H

#include <stddef.h>

#include "../proto/pw.h"
#include "../store/store.h"
#include "registry.h"

//  Writes NODE's facts (SCRATCH is a writer to reuse), or deletes them
//  when it has none. Returns 0 or a negative STORE_ error.
int nodefacts_save (store_txn_t *txn, const registry_node_t *node,
                    pw_t *scratch);

//  Gives every node of REGISTRY its saved facts (registry_set_facts);
//  records of nodes it does not hold, or that do not decode, are skipped.
//  Returns how many nodes got facts; *BROKEN_P (may be NULL) how many
//  records were skipped as broken.
size_t nodefacts_restore (store_txn_t *txn, registry_t *registry,
                          size_t *broken_p);

#endif
