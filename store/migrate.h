/*  =========================================================================
    migrate - bringing a store of an older schema to the current one

    Internal to store/: store.c calls these while it opens a store (see
    "Schema and migration" in store.h). The production migration table
    lives in migrate.c; tests pass their own to store_open_with.

    Threading: as the store's (the thread that opens it).
    =========================================================================
*/
#ifndef GRID_STORE_MIGRATE_H
#define GRID_STORE_MIGRATE_H

#include "store.h"

struct MDB_env;

//  The steps of a migration: a run of the table.
typedef struct {
    size_t first;                //  Index in the table of the first step
    size_t count;                //  Steps to run (0: nothing to do)
    bool rewrites;               //  One of them rewrites records
} store_migrate_plan_t;

//  The production table, for STORE_SCHEMA_VERSION; sets *N_STEPS.
const store_step_t *store_migrate_steps (size_t *n_steps);

//  Chooses the steps of STEPS (N_STEPS) that bring schema FROM to TO
//  (FROM < TO). Returns 0 with PLAN, or -1 with the reason in ERR, as a
//  clause ("this release has no migration from schema 0"): a version with
//  no step from it, or a table out of order.
int store_migrate_plan (const store_step_t *steps, size_t n_steps,
                        uint32_t from, uint32_t to,
                        store_migrate_plan_t *plan, char *err,
                        size_t err_len);

//  Copies ENV, compacted, to the file PATH, unless PATH is there already
//  (a copy an earlier try made: kept as it is, *KEPT set). The copy is
//  written to PATH.tmp, synced, then renamed, so nothing half-written
//  ever carries the name PATH. Returns 0, or -1 with a sentence in ERR
//  (PATH.tmp is removed).
int store_migrate_copy (struct MDB_env *env, const char *path, bool *kept,
                        char *err, size_t err_len);

//  Runs PLAN's steps of STEPS in TXN, in order. Returns 0, or -1 with a
//  sentence in ERR naming the step that failed (TXN must then be
//  aborted; store_txn_failed tells a full map from the step's own
//  refusal).
int store_migrate_run (store_txn_t *txn, const store_step_t *steps,
                       const store_migrate_plan_t *plan, char *err,
                       size_t err_len);

#endif
