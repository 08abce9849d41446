/*  =========================================================================
    journal - a write transaction's changes, applied to another store

    What a broker cluster ships from its active to its standbys for each
    pass: the journal store_txn_journal (store.h) wrote of the pass's
    transaction. Applying it in one transaction of a store that held the
    same content before makes that store hold the same content after, key
    for key and byte for byte.

    Threading: store transactions follow store.h's rules.
    =========================================================================
*/
#ifndef GRID_JOURNAL_H
#define GRID_JOURNAL_H

#include <stddef.h>

#include "store.h"

//  Applies the SIZE bytes of JOURNAL (store.h's form) in TXN, a write
//  transaction. Returns how many changes it made, or < 0: STORE_EINVAL
//  for a journal that is not one (a sentence in ERR: "journal entry 3:
//  unknown database 'jobz'"), or the STORE_E* code of a failed write
//  (then TXN can only be aborted). Nothing is applied of a journal that
//  is not whole: it is read to its end before the first change.
int store_apply (store_txn_t *txn, const void *journal, size_t size,
                 char *err, size_t err_len);

#endif
