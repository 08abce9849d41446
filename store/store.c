/*  =========================================================================
    store - grid's durable key/value store (LMDB)

    See store.h for the contract. Everything LMDB-specific lives here: the
    environment, its named databases, the mapping of LMDB's many return
    codes onto the few STORE_E* codes, and growing the map; and bringing
    an older schema up at open (store_open_with). The copy kept before a
    migration is envcopy.c's; the production migration table, and
    store_open that passes it, are migrate.c's.

    A write transaction that meets an LMDB error (a full map, a failed page
    allocation) is marked failed: LMDB has already poisoned it, so every
    later call on it returns the first error and store_commit aborts it.
    That is what keeps a half-written pass of changes out of the store.
    =========================================================================
*/
#include "store.h"
#include "envcopy.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

//  A write transaction begins by growing the map once more than this
//  share of it is in use, so most passes never meet MDB_MAP_FULL at all.
#define STORE_GROW_PERCENT 80

#define STORE_SCHEMA_KEY "schema_version"
//  The release of the last program that opened the store (text), so that
//  an older one it refuses can say which release to install
#define STORE_RELEASE_KEY "release"
#ifndef GRID_VERSION
#define GRID_VERSION "0.0.0-dev"
#endif

//  Names of the databases, indexed by store_db_t.
static const char *s_db_names[STORE_DB_COUNT] = {
    "meta", "jobs", "results", "events", "nodes",
    "queue", "keys", "requests", "spool", "dlq", "node_history",
    "idempotency", "outputs", "schedules", "tokens", "node_seen", "audit",
    "job_traces", "notify", "notify_jobs", "node_facts", "blobs"
};

//  The bytes behind an empty value: LMDB copies from mv_data even when
//  mv_size is 0 on some paths, so it must never be NULL.
static const char s_empty_value[1] = { 0 };

struct _store_t {
    MDB_env *env;                    //  The environment
    char *dir;                       //  Its directory (for free space)
    int fail_code;                   //  Test hook: commits fail with this...
    int fail_count;                  //  ...this many more times (-1: always)
    MDB_dbi dbi[STORE_DB_COUNT];     //  Handles, opened once at open time
    size_t max_map_bytes;            //  Growth ceiling (0: never grow)
    size_t live_txns;                //  Open transactions (growth needs 0)
    bool writing;                    //  A write transaction is open
    bool grow_wanted;                //  A write met the end of the map
    size_t copies_apart;             //  Copies other threads take (no growth)
    char last_error[256];            //  Last LMDB error text, for logs
    char **migrations;               //  What opening it migrated (sentences)
    size_t migration_count;          //  How many
};

struct _store_txn_t {
    store_t *store;                  //  Owning store
    MDB_txn *handle;                 //  LMDB transaction
    bool write;                      //  Read-write (else read-only)
    int failed;                      //  First STORE_E* that poisoned it
    size_t changes;                  //  Puts and deletes asked of it
    store_cursor_t *cursors;         //  Open cursors, closed with the txn
    pw_t *journal;                   //  Its changes are written here, or NULL
};

//  Where a cursor stands after a move that found nothing. LMDB leaves
//  such a cursor in states that differ by operation (a seek past the end
//  reads as "before the first key"), so we keep our own.
typedef enum {
    S_AT_KEY,                        //  On a key (or never moved)
    S_PAST_END,                      //  Ran off the end: prev is the last
    S_BEFORE_START                   //  Ran off the start: next is the first
} s_position_t;

struct _store_cursor_t {
    store_txn_t *txn;                //  NULL once the transaction ended
    MDB_cursor *handle;              //  LMDB cursor, NULL once closed
    s_position_t position;           //  See s_position_t
    store_cursor_t *next;            //  Next cursor of the same txn
};


//  Maps an LMDB (or errno) code onto a STORE_E* code.
static int
s_code (int rc)
{
    switch (rc) {
        case MDB_SUCCESS:
            return STORE_OK;
        case MDB_NOTFOUND:
            return STORE_ENOTFOUND;
        case MDB_MAP_FULL:
        case MDB_TXN_FULL:
        case ENOSPC:
#ifdef EDQUOT
        case EDQUOT:
#endif
            return STORE_EFULL;
        case EINVAL:
        case MDB_BAD_VALSIZE:
            return STORE_EINVAL;
        default:
            return STORE_EIO;
    }
}

static void
s_set_error (store_t *self, const char *format, ...)
{
    va_list args;
    va_start (args, format);
    vsnprintf (self->last_error, sizeof self->last_error, format, args);
    va_end (args);
}

//  Records LMDB code RC against WHAT and returns its STORE_E* code. A
//  full map is remembered so that the next write transaction grows it.
static int
s_fail (store_t *self, int rc, const char *what)
{
    s_set_error (self, "%s: %s", what, mdb_strerror (rc));
    if (rc == MDB_MAP_FULL)
        self->grow_wanted = true;
    return s_code (rc);
}

//  Like s_fail, and poisons TXN: LMDB refuses any further use of a write
//  transaction after most errors, and we must never commit half a pass.
static int
s_txn_fail (store_txn_t *txn, int rc, const char *what)
{
    int code = s_fail (txn->store, rc, what);
    if (txn->write && txn->failed == 0)
        txn->failed = code;
    return code;
}

static bool
s_db_valid (store_db_t db)
{
    return (int) db >= 0 && db < STORE_DB_COUNT;
}

//  Checks the arguments every keyed call shares. Returns 0 or STORE_EINVAL.
static int
s_check_key (store_txn_t *txn, store_db_t db, const void *key,
             size_t key_len)
{
    if (!txn || !s_db_valid (db))
        return STORE_EINVAL;
    if (!key || key_len == 0 || key_len > STORE_MAX_KEY) {
        s_set_error (txn->store, "a key of %zu bytes (1 to %d allowed)",
                     key ? key_len : (size_t) 0, STORE_MAX_KEY);
        return STORE_EINVAL;
    }
    return 0;
}

//  Creates DIR and its missing parents with mode 0700 (mkdir -p).
static int
s_mkdir_p (const char *dir, char *err, size_t err_len)
{
    if (!dir || !*dir) {
        snprintf (err, err_len, "no store directory given");
        return -1;
    }
    char *path = strdup (dir);
    if (!path) {
        snprintf (err, err_len, "%s: %s", dir, strerror (ENOMEM));
        return -1;
    }
    int rc = 0;
    for (char *cursor = path + 1;; cursor++) {
        if (*cursor != '/' && *cursor != '\0')
            continue;
        char saved = *cursor;
        *cursor = '\0';
        if (mkdir (path, 0700) != 0) {
            //  An existing component is fine if it is a directory; any
            //  other failure (or a file in the way) ends the walk.
            int error = errno;
            struct stat info;
            if (stat (path, &info) != 0 || !S_ISDIR (info.st_mode)) {
                if (error == EEXIST)
                    snprintf (err, err_len, "%s: %s", path,
                              strerror (ENOTDIR));
                else
                    snprintf (err, err_len, "cannot create directory %s: %s",
                              path, strerror (error));
                rc = -1;
                break;
            }
        }
        *cursor = saved;
        if (saved == '\0')
            break;
    }
    free (path);
    return rc;
}

//  Reads the schema version from META into *VERSION. Returns 0, 1 when
//  there is none (a new store), or -1 with a sentence in ERR.
static int
s_read_schema (MDB_txn *txn, MDB_dbi meta, uint32_t *version, char *err,
               size_t err_len)
{
    MDB_val key = { strlen (STORE_SCHEMA_KEY), (void *) STORE_SCHEMA_KEY };
    MDB_val value;
    int rc = mdb_get (txn, meta, &key, &value);
    if (rc == MDB_NOTFOUND)
        return 1;
    if (rc != MDB_SUCCESS) {
        snprintf (err, err_len, "cannot read the schema version: %s",
                  mdb_strerror (rc));
        return -1;
    }
    if (value.mv_size != 4) {
        snprintf (err, err_len,
                  "schema version record is %zu bytes long, not 4: "
                  "this is not a grid store",
                  value.mv_size);
        return -1;
    }
    const unsigned char *bytes = value.mv_data;
    *version = (uint32_t) bytes[0] << 24 | (uint32_t) bytes[1] << 16
             | (uint32_t) bytes[2] << 8 | (uint32_t) bytes[3];
    return 0;
}

//  Writes VERSION as the schema version. Returns 0 or -1 with ERR.
static int
s_write_schema (MDB_txn *txn, MDB_dbi meta, uint32_t version, char *err,
                size_t err_len)
{
    MDB_val key = { strlen (STORE_SCHEMA_KEY), (void *) STORE_SCHEMA_KEY };
    unsigned char bytes[4] = {
        (unsigned char) (version >> 24), (unsigned char) (version >> 16),
        (unsigned char) (version >> 8), (unsigned char) version
    };
    MDB_val value = { sizeof bytes, bytes };
    int rc = mdb_put (txn, meta, &key, &value, 0);
    if (rc != MDB_SUCCESS) {
        snprintf (err, err_len, "cannot write the schema version: %s",
                  mdb_strerror (rc));
        return -1;
    }
    return 0;
}

//  The release that last opened the store, as printable text: "release
//  0.4.0", or WHEN_NONE when it did not say.
static void
s_read_release (MDB_txn *txn, MDB_dbi meta, const char *when_none,
                char *text, size_t text_len)
{
    MDB_val key = { strlen (STORE_RELEASE_KEY), (void *) STORE_RELEASE_KEY };
    MDB_val value;
    char release[64] = "";
    if (mdb_get (txn, meta, &key, &value) == MDB_SUCCESS
        && value.mv_size < sizeof release) {
        memcpy (release, value.mv_data, value.mv_size);
        release[value.mv_size] = 0;
        for (char *at = release; *at; at++)
            if (*at < 0x20 || *at > 0x7e)
                *at = '?';
    }
    if (*release)
        snprintf (text, text_len, "release %s", release);
    else
        snprintf (text, text_len, "%s", when_none);
}

//  The steps of a migration: a run of the table.
typedef struct {
    size_t first;                //  Index in the table of the first step
    size_t count;                //  Steps to run (0: nothing to do)
    bool rewrites;               //  One of them rewrites records
} s_plan_t;

//  Chooses the steps of STEPS (N_STEPS) that bring schema FROM to TO
//  (FROM < TO). Returns 0 with PLAN, or -1 with the reason in ERR, as a
//  clause ("this release has no migration from schema 0"): a version with
//  no step from it, or a table out of order.
static int
s_plan (const store_step_t *steps, size_t n_steps, uint32_t from,
        uint32_t to, s_plan_t *plan, char *err, size_t err_len)
{
    memset (plan, 0, sizeof *plan);
    for (size_t index = 0; index < n_steps; index++) {
        if (!steps[index].fn || !steps[index].what
            || (index > 0
                && steps[index].from_version
                       <= steps[index - 1].from_version)) {
            snprintf (err, err_len, "this release's migration table is out "
                      "of order or incomplete at its step %zu", index);
            return -1;
        }
    }
    size_t first = 0;
    while (first < n_steps && steps[first].from_version < from)
        first++;
    for (uint32_t version = from; version < to; version++) {
        size_t index = first + (version - from);
        if (index >= n_steps || steps[index].from_version != version) {
            if (version == from)
                snprintf (err, err_len, "this release has no migration "
                          "from schema %u", (unsigned) version);
            else
                snprintf (err, err_len, "this release has no migration "
                          "from schema %u on the way to %u",
                          (unsigned) version, (unsigned) to);
            return -1;
        }
        if (steps[index].rewrites)
            plan->rewrites = true;
    }
    plan->first = first;
    plan->count = to - from;
    return 0;
}

//  Checks the schema VERSION read from META against TARGET. Returns 0
//  when it is TARGET or can be migrated to it (PLAN then says how), or
//  -1 with a sentence in ERR.
static int
s_check_schema (MDB_txn *txn, MDB_dbi meta, uint32_t version,
                uint32_t target, const store_step_t *steps, size_t n_steps,
                s_plan_t *plan, char *err, size_t err_len)
{
    memset (plan, 0, sizeof *plan);
    char release[80];
    if (version > target) {
        s_read_release (txn, meta, "a later release", release,
                        sizeof release);
        snprintf (err, err_len,
                  "schema version %u is newer than this release's (%s reads "
                  "%u): the store was written by %s; install that release "
                  "or a later one (this one leaves the store as it is)",
                  (unsigned) version, GRID_VERSION, (unsigned) target,
                  release);
        return -1;
    }
    char why[200];
    if (version < target
        && s_plan (steps, n_steps, version, target, plan, why,
                   sizeof why)) {
        s_read_release (txn, meta, "an unknown release", release,
                        sizeof release);
        snprintf (err, err_len,
                  "schema version %u is older than this release's (%s reads "
                  "%u) and %s: the store was last opened by %s (this one "
                  "leaves the store as it is)",
                  (unsigned) version, GRID_VERSION, (unsigned) target, why,
                  release);
        return -1;
    }
    return 0;
}

//  Notes this program's release as the last to open the store, when it
//  is another, in a transaction of its own: a hint for an older program
//  that refuses the store, so a store that cannot take the write (a full
//  disk) opens all the same.
static void
s_note_release (store_t *self)
{
    MDB_txn *txn;
    if (mdb_txn_begin (self->env, NULL, 0, &txn) != MDB_SUCCESS)
        return;
    MDB_val key = { strlen (STORE_RELEASE_KEY), (void *) STORE_RELEASE_KEY };
    MDB_val value;
    if (mdb_get (txn, self->dbi[STORE_DB_META], &key, &value) == MDB_SUCCESS
        && value.mv_size == strlen (GRID_VERSION)
        && memcmp (value.mv_data, GRID_VERSION, value.mv_size) == 0) {
        mdb_txn_abort (txn);
        return;
    }
    value.mv_size = strlen (GRID_VERSION);
    value.mv_data = (void *) GRID_VERSION;
    if (mdb_put (txn, self->dbi[STORE_DB_META], &key, &value, 0)
        == MDB_SUCCESS)
        mdb_txn_commit (txn);
    else
        mdb_txn_abort (txn);
}

//  Adds a sentence to what opening SELF migrated. Returns 0 or -1.
static int
s_note_migration (store_t *self, const char *format, ...)
{
    char **grown = realloc (self->migrations, (self->migration_count + 1)
                                                  * sizeof *grown);
    if (!grown)
        return -1;
    self->migrations = grown;
    va_list args;
    va_start (args, format);
    int rc = vasprintf (&grown[self->migration_count], format, args);
    va_end (args);
    if (rc < 0)
        return -1;
    self->migration_count++;
    return 0;
}

static void
s_forget_migrations (store_t *self)
{
    for (size_t index = 0; index < self->migration_count; index++)
        free (self->migrations[index]);
    free (self->migrations);
    self->migrations = NULL;
    self->migration_count = 0;
}

static void s_txn_close_cursors (store_txn_t *txn);
static void s_txn_end (store_txn_t *txn);
static void s_grow (store_t *self);

//  Runs PLAN's steps of STEPS in TXN, in order. Returns 0, or -1 with a
//  sentence in ERR naming the step that failed (TXN must then be
//  aborted; TXN->failed tells a full map from the step's own refusal).
static int
s_run (store_txn_t *txn, const store_step_t *steps, const s_plan_t *plan,
       char *err, size_t err_len)
{
    for (size_t index = 0; index < plan->count; index++) {
        const store_step_t *step = &steps[plan->first + index];
        char why[300] = "";
        int rc = step->fn (txn, why, sizeof why);
        if (rc != 0 || txn->failed) {
            if (!*why)
                snprintf (why, sizeof why, "%s",
                          txn->failed ? store_strerror (txn->failed)
                                      : "no reason given");
            snprintf (err, err_len, "the migration from schema %u to %u "
                      "(%s) failed: %s", (unsigned) step->from_version,
                      (unsigned) step->from_version + 1, step->what, why);
            return -1;
        }
    }
    return 0;
}

//  What store_open_with was asked for
typedef struct {
    uint32_t version;                //  The schema to reach
    const store_step_t *steps;       //  The migration table
    size_t n_steps;                  //  Its length
} s_target_t;

//  store_open's one try at the databases (see s_open_databases). Returns
//  0, 1 to be tried again (the copy is made now, or the map grew), or -1
//  with ERR.
static int
s_open_pass (store_t *self, const char *dir, const s_target_t *target,
             bool *copied, char *err, size_t err_len)
{
    MDB_txn *txn;
    int rc = mdb_txn_begin (self->env, NULL, 0, &txn);
    if (rc != MDB_SUCCESS) {
        snprintf (err, err_len, "%s: %s", dir, mdb_strerror (rc));
        return -1;
    }
    MDB_dbi meta;
    rc = mdb_dbi_open (txn, s_db_names[STORE_DB_META], MDB_CREATE, &meta);
    if (rc != MDB_SUCCESS) {
        snprintf (err, err_len, "%s: cannot open database meta: %s", dir,
                  mdb_strerror (rc));
        mdb_txn_abort (txn);
        return -1;
    }
    self->dbi[STORE_DB_META] = meta;
    char why[600];
    uint32_t version = target->version;
    s_plan_t plan = { 0 };
    rc = s_read_schema (txn, meta, &version, why, sizeof why);
    if (rc == 1)
        rc = s_write_schema (txn, meta, target->version, why, sizeof why);
    else
    if (rc == 0)
        rc = s_check_schema (txn, meta, version, target->version,
                             target->steps, target->n_steps, &plan, why,
                             sizeof why);
    if (rc) {
        snprintf (err, err_len, "%s: %s", dir, why);
        mdb_txn_abort (txn);
        return -1;
    }
    char copy[PATH_MAX];
    if (snprintf (copy, sizeof copy, "%s/data.mdb.pre-v%s", dir, GRID_VERSION)
        >= (int) sizeof copy && plan.rewrites) {
        snprintf (err, err_len, "%s: %s: no room for the name of a copy "
                  "before migrating it", dir, strerror (ENAMETOOLONG));
        mdb_txn_abort (txn);
        return -1;
    }
    if (plan.rewrites && !*copied) {
        //  The copy reads the store in a transaction of its own; LMDB
        //  allows this thread no second one beside ours
        mdb_txn_abort (txn);
        bool kept;
        if (envcopy_write (self->env, copy, &kept, why, sizeof why)) {
            snprintf (err, err_len, "%s: %s; the store is left as it was",
                      dir, why);
            return -1;
        }
        *copied = true;
        s_note_migration (self, kept ? "kept the copy %s that an earlier "
                                       "try made of the store before "
                                       "migrating it"
                                     : "copied the store to %s before "
                                       "migrating it", copy);
        return 1;
    }

    for (int db = 0; db < STORE_DB_COUNT; db++) {
        if (db == STORE_DB_META)
            continue;
        rc = mdb_dbi_open (txn, s_db_names[db], MDB_CREATE, &self->dbi[db]);
        if (rc != MDB_SUCCESS) {
            snprintf (err, err_len, "%s: cannot open database %s: %s", dir,
                      s_db_names[db], mdb_strerror (rc));
            mdb_txn_abort (txn);
            return -1;
        }
    }
    if (plan.count) {
        //  The steps work through the store's own transaction type
        store_txn_t *migration = calloc (1, sizeof *migration);
        if (!migration) {
            snprintf (err, err_len, "%s: %s", dir, strerror (ENOMEM));
            mdb_txn_abort (txn);
            return -1;
        }
        migration->store = self;
        migration->handle = txn;
        migration->write = true;
        self->live_txns++;
        self->writing = true;
        rc = s_run (migration, target->steps, &plan, why, sizeof why);
        int failed = migration->failed;
        s_txn_close_cursors (migration);
        s_txn_end (migration);
        if (rc == 0)
            rc = s_write_schema (txn, meta, target->version, why,
                                 sizeof why);
        if (rc) {
            mdb_txn_abort (txn);
            if (failed == STORE_EFULL && store_can_grow (self)) {
                //  Nothing of it landed: grow the map and run it again
                self->grow_wanted = true;
                s_grow (self);
                return 1;
            }
            snprintf (err, err_len, "%s: %s; the store is left as it was%s%s",
                      dir, why, *copied ? ", and its copy is kept as " : "",
                      *copied ? copy : "");
            return -1;
        }
    }
    rc = mdb_txn_commit (txn);
    if (rc != MDB_SUCCESS) {
        snprintf (err, err_len, "%s: %s%s", dir, mdb_strerror (rc),
                  plan.count ? " (the migration is undone: the store is "
                               "left as it was)" : "");
        return -1;
    }
    for (size_t index = 0; index < plan.count; index++) {
        const store_step_t *step = &target->steps[plan.first + index];
        s_note_migration (self, "migrated the store from schema %u to %u: "
                          "%s", (unsigned) step->from_version,
                          (unsigned) step->from_version + 1, step->what);
    }
    return 0;
}

//  Opens every database in one write transaction (the meta database and
//  its schema version first, so a newer store is refused before anything
//  else is touched), migrating an older store in the same transaction,
//  and commits. Returns 0 or -1 with ERR.
static int
s_open_databases (store_t *self, const char *dir, const s_target_t *target,
                  char *err, size_t err_len)
{
    bool copied = false;
    int rc = 1;
    //  At most a copy and a map grown to its ceiling in doublings
    for (int pass = 0; rc == 1 && pass < 64; pass++)
        rc = s_open_pass (self, dir, target, &copied, err, err_len);
    if (rc == 1)
        snprintf (err, err_len, "%s: the store could not be opened",
                  dir);
    if (rc)
        return -1;
    s_note_release (self);
    return 0;
}

//  Bytes of LMDB's lock file with its default 126 reader slots
#define S_LOCK_BYTES 8192

//  LMDB sizes a new lock file with ftruncate and then writes it through a
//  shared map: on a full disk, a page of that hole has no block behind it
//  and the first write to it kills the process with SIGBUS. So the file's
//  blocks are reserved first (kept as they are when it is larger); a new
//  lock file on a disk without room for them is an error (one in use
//  before has the blocks LMDB wrote, and starts as it did). Returns 0 or
//  -1 (ERR set).
static int
s_lock_reserve (const char *dir, char *err, size_t err_len)
{
    char path[PATH_MAX];
    if (snprintf (path, sizeof path, "%s/lock.mdb", dir) >= (int) sizeof path) {
        snprintf (err, err_len, "%s: path too long", dir);
        return -1;
    }
    int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf (err, err_len, "%s: %s", path, strerror (errno));
        return -1;
    }
    struct stat info;
    bool fresh = fstat (fd, &info) == 0 && info.st_size == 0;
    off_t size = !fresh && info.st_size > S_LOCK_BYTES ? info.st_size
                                                       : S_LOCK_BYTES;
    int rc = posix_fallocate (fd, 0, size);
    close (fd);
    //  A file system that cannot reserve blocks leaves it to LMDB
    if (rc != 0 && fresh && rc != EOPNOTSUPP && rc != EINVAL) {
        snprintf (err, err_len, "%s: cannot reserve %lld bytes: %s (free "
                  "some space, then start again)", path, (long long) size,
                  strerror (rc));
        return -1;
    }
    return 0;
}

//  store_open, with the production migration table, is in migrate.c
store_t *
store_open_with (const char *dir, size_t map_bytes, size_t max_map_bytes,
                 uint32_t target_version, const store_step_t *steps,
                 size_t n_steps, char *err, size_t err_len)
{
    char scratch[1];
    if (!err || err_len == 0) {
        err = scratch;
        err_len = sizeof scratch;
    }
    *err = '\0';
    if (s_mkdir_p (dir, err, err_len) || s_lock_reserve (dir, err, err_len))
        return NULL;

    store_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_len, "%s: %s", dir, strerror (ENOMEM));
        return NULL;
    }
    self->dir = strdup (dir);
    if (!self->dir) {
        snprintf (err, err_len, "%s: %s", dir, strerror (ENOMEM));
        free (self);
        return NULL;
    }
    //  LMDB wants maps of whole pages: round the start up, the ceiling down
    long page_bytes = sysconf (_SC_PAGESIZE);
    size_t page = page_bytes > 0 ? (size_t) page_bytes : 4096;
    if (map_bytes % page && map_bytes < SIZE_MAX - page)
        map_bytes += page - map_bytes % page;
    self->max_map_bytes = max_map_bytes - max_map_bytes % page;
    int rc = mdb_env_create (&self->env);
    if (rc != MDB_SUCCESS) {
        snprintf (err, err_len, "%s: %s", dir, mdb_strerror (rc));
        free (self->dir);
        free (self);
        return NULL;
    }
    rc = mdb_env_set_maxdbs (self->env, STORE_DB_COUNT);
    if (rc == MDB_SUCCESS && map_bytes > 0)
        rc = mdb_env_set_mapsize (self->env, map_bytes);
    //  Flags 0: every commit is synced (no NOSYNC, NOMETASYNC, WRITEMAP).
    if (rc == MDB_SUCCESS)
        rc = mdb_env_open (self->env, dir, 0, 0600);
    if (rc == MDB_SUCCESS) {
        //  Free the reader slots of processes that died holding them, or
        //  their old snapshots would pin pages forever.
        int dead = 0;
        rc = mdb_reader_check (self->env, &dead);
    }
    if (rc != MDB_SUCCESS) {
        snprintf (err, err_len, "%s: %s", dir, mdb_strerror (rc));
        mdb_env_close (self->env);
        free (self->dir);
        free (self);
        return NULL;
    }
    if (mdb_env_get_maxkeysize (self->env) < STORE_MAX_KEY) {
        snprintf (err, err_len, "%s: LMDB allows keys of only %d bytes", dir,
                  mdb_env_get_maxkeysize (self->env));
        mdb_env_close (self->env);
        free (self->dir);
        free (self);
        return NULL;
    }
    s_target_t target = { target_version, steps, n_steps };
    if (s_open_databases (self, dir, &target, err, err_len)) {
        s_forget_migrations (self);
        mdb_env_close (self->env);
        free (self->dir);
        free (self);
        return NULL;
    }
    return self;
}

int
store_copy (store_t *self, const char *path, char *err, size_t err_len)
{
    assert (self->live_txns == 0);
    return store_copy_apart (self, path, err, err_len);
}

int
store_copy_apart (store_t *self, const char *path, char *err, size_t err_len)
{
    if (unlink (path) != 0 && errno != ENOENT) {
        snprintf (err, err_len, "cannot replace %s: %s", path,
                  strerror (errno));
        return -1;
    }
    bool kept;
    return envcopy_write (self->env, path, &kept, err, err_len);
}

void
store_apart_begin (store_t *self)
{
    self->copies_apart++;
}

void
store_apart_end (store_t *self)
{
    assert (self->copies_apart > 0);
    self->copies_apart--;
}

void
store_destroy (store_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    store_t *self = *self_p;
    //  LMDB frees transactions with the environment only in its own
    //  bookkeeping; our handles would dangle. A caller bug, not a condition.
    assert (self->live_txns == 0 && self->copies_apart == 0);
    mdb_env_close (self->env);
    s_forget_migrations (self);
    free (self->dir);
    free (self);
    *self_p = NULL;
}

const char *
store_strerror (int code)
{
    switch (code) {
        case STORE_OK:
            return "success";
        case STORE_EIO:
            return "store input/output error";
        case STORE_ENOTFOUND:
            return "not found";
        case STORE_EFULL:
            return "store is full";
        case STORE_EVERSION:
            return "store was written by an unknown schema version";
        case STORE_EINVAL:
            return "invalid argument to the store";
        default:
            return "unknown store error";
    }
}

const char *
store_migration (store_t *self, size_t index)
{
    return self && index < self->migration_count ? self->migrations[index]
                                                 : NULL;
}

const char *
store_last_error (store_t *self)
{
    return self ? self->last_error : "";
}

//  Doubles the map (up to the ceiling) when the last write ran out of room
//  or more than STORE_GROW_PERCENT of it is in use. Only called with no
//  transaction open in this process, as mdb_env_set_mapsize requires.
static void
s_grow (store_t *self)
{
    assert (self->live_txns == 0);
    if (self->copies_apart)
        return;     //  Once they end (grow_wanted stays)
    MDB_envinfo info;
    MDB_stat page_stat;
    if (mdb_env_info (self->env, &info)
        || mdb_env_stat (self->env, &page_stat))
        return;
    size_t map_bytes = info.me_mapsize;
    if (self->max_map_bytes <= map_bytes) {
        self->grow_wanted = false;
        return;
    }
    size_t used_bytes =
        (info.me_last_pgno + 1) * (size_t) page_stat.ms_psize;
    if (!self->grow_wanted
        && used_bytes <= map_bytes / 100 * STORE_GROW_PERCENT)
        return;
    size_t new_bytes = map_bytes > SIZE_MAX / 2 ? SIZE_MAX : map_bytes * 2;
    if (new_bytes > self->max_map_bytes)
        new_bytes = self->max_map_bytes;
    int rc = mdb_env_set_mapsize (self->env, new_bytes);
    if (rc != MDB_SUCCESS)
        s_fail (self, rc, "growing the map");
    else
        self->grow_wanted = false;
}

store_txn_t *
store_begin (store_t *self, bool write)
{
    if (!self)
        return NULL;
    if (write && self->writing) {
        s_set_error (self, "a write transaction is already open");
        return NULL;
    }
    if (write && self->live_txns == 0)
        s_grow (self);

    store_txn_t *txn = calloc (1, sizeof *txn);
    if (!txn) {
        s_set_error (self, "begin: %s", strerror (ENOMEM));
        return NULL;
    }
    unsigned int flags = write ? 0 : MDB_RDONLY;
    int rc = mdb_txn_begin (self->env, NULL, flags, &txn->handle);
    if (rc == MDB_MAP_RESIZED && self->live_txns == 0
        && self->copies_apart == 0) {
        //  Another process grew the map: adopt its size and try again.
        rc = mdb_env_set_mapsize (self->env, 0);
        if (rc == MDB_SUCCESS)
            rc = mdb_txn_begin (self->env, NULL, flags, &txn->handle);
    }
    if (rc != MDB_SUCCESS) {
        s_fail (self, rc, "begin");
        free (txn);
        return NULL;
    }
    txn->store = self;
    txn->write = write;
    self->live_txns++;
    if (write)
        self->writing = true;
    return txn;
}

//  Closes the cursors still open on TXN; the caller's cursor objects stay
//  allocated (it still owns them) but now refuse every operation.
static void
s_txn_close_cursors (store_txn_t *txn)
{
    store_cursor_t *cursor = txn->cursors;
    while (cursor) {
        store_cursor_t *next = cursor->next;
        mdb_cursor_close (cursor->handle);
        cursor->handle = NULL;
        cursor->txn = NULL;
        cursor->next = NULL;
        cursor = next;
    }
    txn->cursors = NULL;
}

//  Bookkeeping common to commit and abort; frees TXN.
static void
s_txn_end (store_txn_t *txn)
{
    store_t *self = txn->store;
    assert (self->live_txns > 0);
    self->live_txns--;
    if (txn->write)
        self->writing = false;
    free (txn);
}

//  True when the store's filesystem has (next to) no room left. LMDB
//  reports a write that the disk cut short as EIO, not ENOSPC; after
//  such a write the disk is full, and that is what the caller must hear.
static bool
s_disk_full (store_t *self)
{
    struct statvfs disk;
    if (statvfs (self->dir, &disk) != 0)
        return false;
    return (uint64_t) disk.f_bavail * disk.f_frsize < (uint64_t) 1 << 20;
}

int
store_commit (store_txn_t **txn_p)
{
    if (!txn_p || !*txn_p)
        return STORE_EINVAL;
    store_txn_t *txn = *txn_p;
    *txn_p = NULL;
    s_txn_close_cursors (txn);

    int code = STORE_OK;
    if (!txn->write)
        mdb_txn_abort (txn->handle);
    else
    if (txn->failed) {
        mdb_txn_abort (txn->handle);
        code = txn->failed;
    }
    else
    if (txn->store->fail_count != 0 && txn->changes > 0) {
        //  The test hook: fail as a real commit does, aborted whole
        mdb_txn_abort (txn->handle);
        code = txn->store->fail_code;
        if (txn->store->fail_count > 0)
            txn->store->fail_count--;
        s_set_error (txn->store, "commit: %s (injected)",
                     store_strerror (code));
    }
    else {
        //  mdb_txn_commit frees the transaction even when it fails
        //  (it aborts it), so nothing of a failed commit lands.
        int rc = mdb_txn_commit (txn->handle);
        if (rc == EIO && s_disk_full (txn->store))
            rc = ENOSPC;
        if (rc != MDB_SUCCESS)
            code = s_fail (txn->store, rc, "commit");
    }
    s_txn_end (txn);
    return code;
}

void
store_abort (store_txn_t **txn_p)
{
    if (!txn_p || !*txn_p)
        return;
    store_txn_t *txn = *txn_p;
    *txn_p = NULL;
    s_txn_close_cursors (txn);
    mdb_txn_abort (txn->handle);
    s_txn_end (txn);
}

void
store_txn_journal (store_txn_t *txn, pw_t *journal)
{
    if (txn && txn->write)
        txn->journal = journal;
}

store_db_t
store_db_named (const char *name, size_t len)
{
    for (int db = 0; db < STORE_DB_COUNT; db++)
        if (name && strlen (s_db_names[db]) == len
            && memcmp (s_db_names[db], name, len) == 0)
            return (store_db_t) db;
    return STORE_DB_COUNT;
}

const char *
store_db_name (store_db_t db)
{
    return s_db_valid (db) ? s_db_names[db] : "?";
}

int
store_put (store_txn_t *txn, store_db_t db, const void *key, size_t key_len,
           const void *value, size_t value_len)
{
    int rc = s_check_key (txn, db, key, key_len);
    if (rc)
        return rc;
    if (!value && value_len) {
        s_set_error (txn->store, "put: %zu bytes from a NULL value",
                     value_len);
        return STORE_EINVAL;
    }
    if (!txn->write) {
        s_set_error (txn->store, "put in a read-only transaction");
        return STORE_EINVAL;
    }
    txn->changes++;
    if (txn->failed)
        return txn->failed;
    MDB_val k = { key_len, (void *) key };
    MDB_val v = { value_len, value ? (void *) value : (void *) s_empty_value };
    rc = mdb_put (txn->handle, txn->store->dbi[db], &k, &v, 0);
    if (rc != MDB_SUCCESS)
        return s_txn_fail (txn, rc, "put");
    if (txn->journal) {
        pw_array (txn->journal, 4);
        pw_strn (txn->journal, "p", 1);
        pw_str (txn->journal, s_db_names[db]);
        pw_bin (txn->journal, key, key_len);
        pw_bin (txn->journal, value ? value : s_empty_value, value_len);
    }
    return STORE_OK;
}

int
store_get (store_txn_t *txn, store_db_t db, const void *key, size_t key_len,
           const void **value, size_t *value_len)
{
    int rc = s_check_key (txn, db, key, key_len);
    if (rc)
        return rc;
    if (txn->failed)
        return txn->failed;
    MDB_val k = { key_len, (void *) key };
    MDB_val v;
    rc = mdb_get (txn->handle, txn->store->dbi[db], &k, &v);
    if (rc == MDB_NOTFOUND)
        return STORE_ENOTFOUND;
    if (rc != MDB_SUCCESS)
        return s_fail (txn->store, rc, "get");
    if (value)
        *value = v.mv_data;
    if (value_len)
        *value_len = v.mv_size;
    return STORE_OK;
}

int
store_del (store_txn_t *txn, store_db_t db, const void *key, size_t key_len)
{
    int rc = s_check_key (txn, db, key, key_len);
    if (rc)
        return rc;
    if (!txn->write) {
        s_set_error (txn->store, "delete in a read-only transaction");
        return STORE_EINVAL;
    }
    txn->changes++;
    if (txn->failed)
        return txn->failed;
    MDB_val k = { key_len, (void *) key };
    rc = mdb_del (txn->handle, txn->store->dbi[db], &k, NULL);
    if (rc == MDB_NOTFOUND)
        return STORE_ENOTFOUND;
    if (rc != MDB_SUCCESS)
        return s_txn_fail (txn, rc, "delete");
    if (txn->journal) {
        pw_array (txn->journal, 3);
        pw_strn (txn->journal, "d", 1);
        pw_str (txn->journal, s_db_names[db]);
        pw_bin (txn->journal, key, key_len);
    }
    return STORE_OK;
}

int
store_del_prefix (store_txn_t *txn, store_db_t db, const void *prefix,
                  size_t prefix_len)
{
    if (!txn || !s_db_valid (db) || (!prefix && prefix_len)
        || prefix_len > STORE_MAX_KEY)
        return STORE_EINVAL;
    if (!txn->write) {
        s_set_error (txn->store, "delete in a read-only transaction");
        return STORE_EINVAL;
    }
    txn->changes++;
    if (txn->failed)
        return txn->failed;
    MDB_cursor *cursor;
    int rc = mdb_cursor_open (txn->handle, txn->store->dbi[db], &cursor);
    if (rc != MDB_SUCCESS)
        return s_txn_fail (txn, rc, "delete prefix");

    //  Seek afresh after every delete rather than lean on where LMDB
    //  leaves a cursor after mdb_cursor_del; each seek is O(log n).
    MDB_val start = { prefix_len, (void *) prefix };
    MDB_cursor_op op = prefix_len ? MDB_SET_RANGE : MDB_FIRST;
    size_t deleted = 0;
    MDB_val k, v;
    k = start;
    while ((rc = mdb_cursor_get (cursor, &k, &v, op)) == MDB_SUCCESS) {
        if (k.mv_size < prefix_len
            || (prefix_len && memcmp (k.mv_data, prefix, prefix_len) != 0))
            break;
        rc = mdb_cursor_del (cursor, 0);
        if (rc != MDB_SUCCESS)
            break;
        deleted++;
        k = start;
    }
    mdb_cursor_close (cursor);
    if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
        return s_txn_fail (txn, rc, "delete prefix");
    if (txn->journal && deleted) {
        pw_array (txn->journal, 3);
        pw_strn (txn->journal, "x", 1);
        pw_str (txn->journal, s_db_names[db]);
        pw_bin (txn->journal, prefix, prefix_len);
    }
    return deleted > INT_MAX ? INT_MAX : (int) deleted;
}

store_cursor_t *
store_cursor_new (store_txn_t *txn, store_db_t db)
{
    if (!txn || !s_db_valid (db))
        return NULL;
    if (txn->failed) {
        s_set_error (txn->store, "cursor on a failed transaction");
        return NULL;
    }
    store_cursor_t *self = calloc (1, sizeof *self);
    if (!self) {
        s_set_error (txn->store, "cursor: %s", strerror (ENOMEM));
        return NULL;
    }
    int rc = mdb_cursor_open (txn->handle, txn->store->dbi[db],
                              &self->handle);
    if (rc != MDB_SUCCESS) {
        s_fail (txn->store, rc, "cursor");
        free (self);
        return NULL;
    }
    self->txn = txn;
    self->next = txn->cursors;
    txn->cursors = self;
    return self;
}

void
store_cursor_destroy (store_cursor_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    store_cursor_t *self = *self_p;
    if (self->txn) {
        store_cursor_t **link = &self->txn->cursors;
        while (*link != self)
            link = &(*link)->next;
        *link = self->next;
        mdb_cursor_close (self->handle);
    }
    free (self);
    *self_p = NULL;
}

//  Moves SELF with OP (KEY is the seek key for MDB_SET_RANGE) and lends
//  the entry it lands on.
static int
s_cursor_move (store_cursor_t *self, MDB_cursor_op op, MDB_val *key,
               const void **k, size_t *k_len, const void **v, size_t *v_len)
{
    if (!self || !self->txn)
        return STORE_EINVAL;
    if (self->txn->failed)
        return self->txn->failed;
    if (self->position == S_PAST_END && op == MDB_NEXT)
        return STORE_ENOTFOUND;
    if (self->position == S_PAST_END && op == MDB_PREV)
        op = MDB_LAST;
    if (self->position == S_BEFORE_START && op == MDB_PREV)
        return STORE_ENOTFOUND;
    if (self->position == S_BEFORE_START && op == MDB_NEXT)
        op = MDB_FIRST;

    MDB_val mk = { 0, NULL }, mv = { 0, NULL };
    if (key)
        mk = *key;
    int rc = mdb_cursor_get (self->handle, &mk, &mv, op);
    if (rc == MDB_NOTFOUND) {
        //  An empty database is both; either answer reads the same.
        self->position = op == MDB_PREV ? S_BEFORE_START : S_PAST_END;
        return STORE_ENOTFOUND;
    }
    if (rc != MDB_SUCCESS)
        return s_fail (self->txn->store, rc, "cursor");
    self->position = S_AT_KEY;
    if (k)
        *k = mk.mv_data;
    if (k_len)
        *k_len = mk.mv_size;
    if (v)
        *v = mv.mv_data;
    if (v_len)
        *v_len = mv.mv_size;
    return STORE_OK;
}

int
store_cursor_seek (store_cursor_t *self, const void *key, size_t key_len,
                   const void **k, size_t *k_len, const void **v,
                   size_t *v_len)
{
    if (!key || key_len == 0)
        return s_cursor_move (self, MDB_FIRST, NULL, k, k_len, v, v_len);
    if (key_len > STORE_MAX_KEY)
        return STORE_EINVAL;
    MDB_val seek = { key_len, (void *) key };
    return s_cursor_move (self, MDB_SET_RANGE, &seek, k, k_len, v, v_len);
}

int
store_cursor_next (store_cursor_t *self, const void **k, size_t *k_len,
                   const void **v, size_t *v_len)
{
    return s_cursor_move (self, MDB_NEXT, NULL, k, k_len, v, v_len);
}

int
store_cursor_prev (store_cursor_t *self, const void **k, size_t *k_len,
                   const void **v, size_t *v_len)
{
    return s_cursor_move (self, MDB_PREV, NULL, k, k_len, v, v_len);
}

int
store_cursor_last (store_cursor_t *self, const void **k, size_t *k_len,
                   const void **v, size_t *v_len)
{
    return s_cursor_move (self, MDB_LAST, NULL, k, k_len, v, v_len);
}

size_t
store_count (store_txn_t *txn, store_db_t db)
{
    if (!txn || !s_db_valid (db) || txn->failed)
        return 0;
    MDB_stat db_stat;
    if (mdb_stat (txn->handle, txn->store->dbi[db], &db_stat) != MDB_SUCCESS)
        return 0;
    return db_stat.ms_entries;
}

void
store_usage (store_t *self, size_t *map_bytes, size_t *used_bytes)
{
    size_t map = 0, used = 0;
    MDB_envinfo info;
    MDB_stat page_stat;
    if (self && mdb_env_info (self->env, &info) == MDB_SUCCESS
        && mdb_env_stat (self->env, &page_stat) == MDB_SUCCESS) {
        map = info.me_mapsize;
        used = (info.me_last_pgno + 1) * (size_t) page_stat.ms_psize;
    }
    if (map_bytes)
        *map_bytes = map;
    if (used_bytes)
        *used_bytes = used;
}

bool
store_can_grow (store_t *self)
{
    size_t map_bytes;
    store_usage (self, &map_bytes, NULL);
    return self && map_bytes < self->max_map_bytes;
}

size_t
store_txn_changes (store_txn_t *txn)
{
    return txn ? txn->changes : 0;
}

int
store_txn_failed (store_txn_t *txn)
{
    return txn ? txn->failed : STORE_EINVAL;
}

void
store_info (store_t *self, store_info_t *info)
{
    memset (info, 0, sizeof *info);
    if (!self)
        return;
    store_usage (self, &info->map_bytes, &info->used_bytes);
    info->max_bytes = self->max_map_bytes > info->map_bytes
                    ? self->max_map_bytes : info->map_bytes;
    struct statvfs disk;
    if (statvfs (self->dir, &disk) == 0) {
        info->disk_bytes = (uint64_t) disk.f_blocks * disk.f_frsize;
        //  What an unprivileged writer may still use
        info->disk_free_bytes = (uint64_t) disk.f_bavail * disk.f_frsize;
    }
}

void
store_test_fail_commits (store_t *self, int code, int count)
{
    if (!self)
        return;
    self->fail_code = code;
    self->fail_count = code == STORE_OK ? 0 : count;
}

//  ---------------------------------------------------------------------
//  Directory ownership

#define STORE_LOCK_FILE "owner.lock"

struct _store_lock_t {
    int fd;                          //  The locked file
};

//  Reads who holds the lock of FD ("gridbroker 1234") into OWNER. The
//  holder writes it just after it locks, so an empty file is retried a
//  few times.
static void
s_lock_owner (int fd, char *owner, size_t owner_len)
{
    *owner = '\0';
    for (int tries = 0; tries < 20 && !*owner; tries++) {
        char text[128];
        ssize_t size = pread (fd, text, sizeof text - 1, 0);
        if (size > 0) {
            text[size] = '\0';
            char program[64];
            long pid = 0;
            if (sscanf (text, "%63s %ld", program, &pid) == 2 && pid > 0)
                snprintf (owner, owner_len, "%s pid %ld", program, pid);
        }
        if (!*owner) {
            struct timespec nap = { 0, 5 * 1000 * 1000 };
            nanosleep (&nap, NULL);
        }
    }
    if (!*owner)
        snprintf (owner, owner_len, "another process");
}

store_lock_t *
store_lock (const char *dir, const char *program, const char *what,
            char *err, size_t err_len)
{
    char scratch[1];
    if (!err || err_len == 0) {
        err = scratch;
        err_len = sizeof scratch;
    }
    *err = '\0';
    if (s_mkdir_p (dir, err, err_len))
        return NULL;
    char path[PATH_MAX];
    if ((size_t) snprintf (path, sizeof path, "%s/%s", dir, STORE_LOCK_FILE)
        >= sizeof path) {
        snprintf (err, err_len, "%s: %s", dir, strerror (ENAMETOOLONG));
        return NULL;
    }
    int fd = open (path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf (err, err_len, "cannot open %s: %s", path, strerror (errno));
        return NULL;
    }
    if (flock (fd, LOCK_EX | LOCK_NB) != 0) {
        int error = errno;
        if (error == EWOULDBLOCK) {
            char owner[96];
            s_lock_owner (fd, owner, sizeof owner);
            snprintf (err, err_len, "%s %s is in use by %s", what, dir, owner);
        }
        else
            snprintf (err, err_len, "cannot lock %s: %s", path,
                      strerror (error));
        close (fd);
        return NULL;
    }
    char text[96];
    int size = snprintf (text, sizeof text, "%s %ld\n", program,
                         (long) getpid ());
    if (ftruncate (fd, 0) != 0 || pwrite (fd, text, (size_t) size, 0) != size) {
        //  The pid is for messages only: a process that cannot write it
        //  (a full disk) still owns the directory; the other one reads
        //  "another process".
    }
    store_lock_t *self = calloc (1, sizeof *self);
    if (!self) {
        snprintf (err, err_len, "%s: %s", dir, strerror (ENOMEM));
        close (fd);
        return NULL;
    }
    self->fd = fd;
    return self;
}

void
store_unlock (store_lock_t **self_p)
{
    if (!self_p || !*self_p)
        return;
    store_lock_t *self = *self_p;
    flock (self->fd, LOCK_UN);
    close (self->fd);
    free (self);
    *self_p = NULL;
}
