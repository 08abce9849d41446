/*  =========================================================================
    storestamp - stamps a grid store with another schema version

    usage: storestamp DIR SCHEMA [RELEASE]

    Opens the store in DIR (one this build opens: its schema is this
    release's), writes SCHEMA as its schema version and, with RELEASE,
    RELEASE as the last release to open it, in one commit. The store then
    reads as one a release of that schema wrote, for the checks that an
    older program refuses it (test/upgrade.sh) and a newer one migrates
    it. Nothing else of the store changes.

    Threading: single-threaded.
    =========================================================================
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/store.h"

int
main (int argc, char *argv[])
{
    if (argc < 3 || argc > 4) {
        fprintf (stderr, "usage: storestamp DIR SCHEMA [RELEASE]\n");
        return 2;
    }
    char *end;
    errno = 0;
    unsigned long schema = strtoul (argv[2], &end, 10);
    if (errno || *end || end == argv[2] || schema > UINT32_MAX) {
        fprintf (stderr, "storestamp: not a schema version: %s\n", argv[2]);
        return 2;
    }
    char err[600] = "";
    store_t *store = store_open (argv[1], 0, 0, err, sizeof err);
    if (!store) {
        fprintf (stderr, "storestamp: %s\n", err);
        return 1;
    }
    unsigned char bytes[4] = {
        (unsigned char) (schema >> 24), (unsigned char) (schema >> 16),
        (unsigned char) (schema >> 8), (unsigned char) schema
    };
    store_txn_t *txn = store_begin (store, true);
    int rc = txn ? store_put (txn, STORE_DB_META, "schema_version", 14, bytes,
                              sizeof bytes)
                 : STORE_EIO;
    if (rc == 0 && argc == 4)
        rc = store_put (txn, STORE_DB_META, "release", 7, argv[3],
                        strlen (argv[3]));
    if (rc == 0)
        rc = store_commit (&txn);
    store_abort (&txn);
    if (rc) {
        fprintf (stderr, "storestamp: %s: %s (%s)\n", argv[1],
                 store_strerror (rc), store_last_error (store));
        store_destroy (&store);
        return 1;
    }
    store_destroy (&store);
    return 0;
}
