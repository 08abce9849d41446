/*  =========================================================================
    migrate - this release's migration table, and store_open

    store.c holds the mechanism (store_open_with: the schema check, the
    copy aside, the steps in one transaction); this file holds what this
    release migrates. A release that changes what existing records mean
    raises STORE_SCHEMA_VERSION and adds here the step that converts them,
    written against the public store API like any other caller, so that a
    store of any earlier schema walks up one version at a time.
    =========================================================================
*/
#include "store.h"

//  The production table, oldest first: { from_version, what, rewrites,
//  fn }. Empty: schema 1 is the only one any release has written.
static const store_step_t s_steps[1];
static const size_t s_step_count = 0;

store_t *
store_open (const char *dir, size_t map_bytes, size_t max_map_bytes,
            char *err, size_t err_len)
{
    return store_open_with (dir, map_bytes, max_map_bytes,
                            STORE_SCHEMA_VERSION, s_steps, s_step_count, err,
                            err_len);
}
