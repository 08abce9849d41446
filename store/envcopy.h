/*  =========================================================================
    envcopy - a whole, durable single-file copy of an LMDB environment

    Internal to store/: store.c keeps one of a store before a migration
    rewrites its records (store.h, "Schema and migration"). The copy is
    written under a temporary name, synced, then renamed, so a file that
    carries the final name is always a complete copy; one already there
    is never written over.

    Threading: the environment's thread, with no transaction of its own
    open (the copy reads in a transaction of its own).
    =========================================================================
*/
#ifndef GRID_STORE_ENVCOPY_H
#define GRID_STORE_ENVCOPY_H

#include <stdbool.h>
#include <stddef.h>

struct MDB_env;

//  Copies ENV, compacted, to the file PATH, unless PATH is there already
//  (a copy an earlier try made: kept as it is, *KEPT set). The copy is
//  written to PATH.tmp (a PATH.tmp already there is what a try cut short
//  left, and is replaced), synced, renamed to PATH, and the rename
//  synced. Returns 0, or -1 with a sentence in ERR ("cannot copy the
//  store to PATH before migrating it: No space left on device"); PATH.tmp
//  is then removed.
int envcopy_write (struct MDB_env *env, const char *path, bool *kept,
                   char *err, size_t err_len);

#endif
