/*  =========================================================================
    store - grid's durable key/value store (LMDB)

    The only module that includes <lmdb.h>. One environment per data
    directory, with a fixed set of named databases. Keys are byte strings
    that sort bytewise (so time-sortable ids list in order); values are
    opaque bytes (grid writes msgpack).

    Durability: every commit is fully durable (no MDB_NOSYNC, MDB_NOMETASYNC
    or MDB_WRITEMAP). mdb_reader_check runs at open. When the map is full a
    write returns STORE_EFULL and the transaction must be aborted: nothing
    of it lands, the store stays consistent and readable.

    Growth: LMDB can resize the map only while no transaction is open, so
    a transaction that ran out of room cannot be rescued; it fails and the
    next one gets the room. If the map may grow (max_map_bytes > map_bytes),
    store_begin (write), when no other transaction is open, doubles the map
    (capped at max_map_bytes) once more than 80% of it is in use, or after
    any write that returned STORE_EFULL. A caller that gets STORE_EFULL
    aborts and, while store_can_grow says so, may replay the same changes
    in a new transaction; when the map is at its ceiling STORE_EFULL is
    final and new work must be refused. A transaction that failed (full
    map, I/O error) keeps returning that code and store_commit aborts it.

    Group commit: open one write transaction per loop pass, put every change
    into it, commit once, and only then acknowledge to peers.

    Schema and migration: META holds the schema version the records are
    written in (STORE_SCHEMA_VERSION for this release) and the release that
    last opened the store. A newer schema is refused, naming that release;
    an older one is migrated at open by the steps of the migration table
    (store/migrate.c), all in one write transaction with the new version,
    after a compacted copy of the store is kept as DIR/data.mdb.pre-vRELEASE
    when a step rewrites records. A step that fails, or a copy that cannot
    be made, leaves the store as it was and the open fails. Additive changes
    (a new database, a new key, a new field readers skip) need no step and
    keep the version. This release's table is empty: schema 1 is the only
    one there has been.

    Threading: one store per process; one write transaction at a time;
    the store and its transactions belong to one thread (MDB_NOTLS not used,
    so that thread may hold at most one read transaction at a time, next to
    at most one write transaction).
    =========================================================================
*/
#ifndef GRID_STORE_H
#define GRID_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/pw.h"

//  Return codes (verbs return 0 or one of these)
#define STORE_OK 0
#define STORE_EIO -1          //  Disk or LMDB failure
#define STORE_ENOTFOUND -2    //  No such key
#define STORE_EFULL -3        //  Map (disk quota) full: abort and refuse new work
#define STORE_EVERSION -4     //  Data dir written by an unknown schema version
#define STORE_EINVAL -5       //  Bad argument (key too long, empty key...)

//  The schema this release writes and reads. Raised only when a release
//  changes what existing records mean, with a step in the migration table
//  that converts them (store/migrate.c; empty: no such change yet).
#define STORE_SCHEMA_VERSION 1
#define STORE_MAX_KEY 511     //  LMDB's default max key size

typedef enum {
    STORE_DB_META = 0,   //  schema version, counters
    STORE_DB_JOBS,       //  job id -> job header record
    STORE_DB_RESULTS,    //  job id | step | node -> result record
    STORE_DB_EVENTS,     //  job id | seq -> event record
    STORE_DB_NODES,      //  node id -> node record
    STORE_DB_QUEUE,      //  priority | job id -> "" (pending jobs in run order)
    STORE_DB_KEYS,       //  public key -> key record (enrolment)
    STORE_DB_REQUESTS,   //  client request id -> reply (idempotent submit)
    STORE_DB_SPOOL,      //  agent: job | step | attempt -> unacknowledged result
    STORE_DB_DLQ,        //  job | step | node -> dead-letter entry
    STORE_DB_HISTORY,    //  node | seq -> what changed at a registration
    STORE_DB_IDEMPOTENCY, //  idempotency key -> job id | spec digest
    STORE_DB_OUTPUTS,    //  job id | step | node | attempt | stream | offset -> bytes
    STORE_DB_SCHEDULES,  //  schedule name -> schedule record
    STORE_DB_TOKENS,     //  HTTP token name -> {role, hash, created}
    STORE_DB_SEEN,       //  node id -> last seen, wall ms (8 bytes BE)
    STORE_DB_AUDIT,      //  wall ms (8 bytes BE) | seq (4 bytes BE) -> audit
                         //  entry (broker/audit.h); last, so that an older
                         //  release opens the store without knowing it
    STORE_DB_JOB_TRACES, //  job id -> its W3C traceparent (broker/jobtrace.h);
                         //  apart from the job header, which an older
                         //  release reads unchanged
    STORE_DB_NOTIFY,     //  wall ms (8 bytes BE) | seq (4 bytes BE) ->
                         //  webhook delivery (broker/notify.h)
    STORE_DB_NOTIFY_JOBS, //  job id -> the webhooks its spec names (kept
                         //  out of the job header, which 0.1.0 reads)
    STORE_DB_NODE_FACTS, //  node id -> its facts, a msgpack map (broker/
                         //  nodefacts.h; out of the node record, which
                         //  0.1.0 reads)
    STORE_DB_BLOBS,      //  sha256 hex -> blob record, sha256 hex | offset
                         //  (8 bytes BE) -> a chunk (broker/blobs.h)
    STORE_DB_COUNT
} store_db_t;

typedef struct _store_t store_t;
typedef struct _store_txn_t store_txn_t;
typedef struct _store_cursor_t store_cursor_t;

//  Opens (creating if needed, mode 0700) the environment in directory DIR
//  with an initial map of MAP_BYTES that may grow up to MAX_MAP_BYTES
//  (0 = never grow). Checks/writes the schema version, migrating an older
//  store (see above; store_migration tells what was done), and writes this
//  program's release (GRID_VERSION) as the last to open it. Returns the
//  store, or NULL with a sentence in ERR (e.g. "/x: Permission denied",
//  "schema version 7 is newer than this release's (0.1.0 reads 1): the
//  store was written by release 0.4.0; install that release or a later
//  one (this one leaves the store as it is)").
//  MAP_BYTES 0 keeps the size an existing environment was last given (10
//  MiB, LMDB's default, for a new one); a map smaller than the data already
//  stored is widened to fit it.
store_t *store_open (const char *dir, size_t map_bytes, size_t max_map_bytes,
                     char *err, size_t err_len);

//  One step of the migration table: it converts the records of schema
//  FROM_VERSION into those of FROM_VERSION + 1.
typedef struct {
    uint32_t from_version;   //  The schema it reads (it leaves the next)
    const char *what;        //  One sentence for the log: what it changes
    bool rewrites;           //  Changes or deletes existing records
    //  Does it in TXN (the one transaction of the whole migration, with
    //  every database open; no other may begin). Returns 0, or -1 with a
    //  sentence in ERR; the whole migration is then aborted. When the
    //  map fills and may grow, the migration is aborted and run again from
    //  its first step, so a step reads what it converts from TXN only.
    int (*fn) (store_txn_t *txn, char *err, size_t err_len);
} store_step_t;

//  store_open with the schema TARGET_VERSION and the migration table STEPS
//  (N_STEPS, in order of from_version; the steps from the stored version
//  up to TARGET_VERSION run, and must all be there). store_open passes
//  STORE_SCHEMA_VERSION and the production table; tests and tools pass
//  their own.
store_t *store_open_with (const char *dir, size_t map_bytes,
                          size_t max_map_bytes, uint32_t target_version,
                          const store_step_t *steps, size_t n_steps,
                          char *err, size_t err_len);

//  What opening SELF did to migrate it, one sentence per INDEX from 0
//  ("copied the store to /d/data.mdb.pre-v0.2.0 before migrating it",
//  "migrated the store from schema 1 to 2: ..."), or NULL past the last
//  (at once when nothing was migrated). Owned by SELF, valid until
//  store_destroy. The caller logs them.
const char *store_migration (store_t *self, size_t index);

//  Closes the environment; NULL-safe, nulls *self_p. Open transactions must
//  be finished first.
void store_destroy (store_t **self_p);

//  A sentence for a return code ("store is full", "not found", ...).
const char *store_strerror (int code);

//  The last LMDB error text seen by this store, for logs.
const char *store_last_error (store_t *self);

//  Begins a transaction. Returns it, or NULL (see store_last_error), also
//  when a write transaction is already open. May grow the map (see above).
store_txn_t *store_begin (store_t *self, bool write);

//  Commits and frees a transaction (a read transaction is just ended).
//  Returns 0, STORE_EFULL (the map at its ceiling, or the disk full: LMDB
//  reports a write cut short as an I/O error, which counts as full when
//  less than 1 MiB is left on the disk) or STORE_EIO; *txn_p is NULL
//  afterwards in every case (a failed commit is aborted).
int store_commit (store_txn_t **txn_p);

//  Aborts and frees a transaction; NULL-safe, nulls *txn_p.
void store_abort (store_txn_t **txn_p);

//  Writes KEY -> VALUE. Returns 0, STORE_EFULL (abort the transaction),
//  STORE_EINVAL or STORE_EIO.
int store_put (store_txn_t *txn, store_db_t db, const void *key,
               size_t key_len, const void *value, size_t value_len);

//  Reads KEY. Returns 0 with *VALUE/*VALUE_LEN pointing into the map (valid
//  only until a subsequent update operation, or the end of the transaction),
//  or STORE_ENOTFOUND.
int store_get (store_txn_t *txn, store_db_t db, const void *key,
               size_t key_len, const void **value, size_t *value_len);

//  Deletes KEY. Returns 0 or STORE_ENOTFOUND (or STORE_EIO).
int store_del (store_txn_t *txn, store_db_t db, const void *key,
               size_t key_len);

//  Deletes every key that starts with PREFIX (PREFIX_LEN 0: every key of
//  DB); returns how many, or < 0 (a STORE_E* code).
int store_del_prefix (store_txn_t *txn, store_db_t db, const void *prefix,
                      size_t prefix_len);

//  A cursor over DB inside TXN. Returns NULL on failure.
store_cursor_t *store_cursor_new (store_txn_t *txn, store_db_t db);

//  Frees a cursor (before its transaction ends); NULL-safe. A cursor still
//  open when its transaction ends is closed with it: every call on it then
//  returns STORE_EINVAL, and it must still be destroyed.
void store_cursor_destroy (store_cursor_t **self_p);

//  Positions at the first key >= KEY (KEY NULL: the first key) and reads it.
//  Returns 0 with key/value (lifetimes as store_get) or STORE_ENOTFOUND at
//  the end.
int store_cursor_seek (store_cursor_t *self, const void *key, size_t key_len,
                       const void **k, size_t *k_len, const void **v,
                       size_t *v_len);

//  Moves to the next / previous key and reads it. Same returns. A cursor
//  never positioned starts from the first / last key; one that ran off the
//  end (or the start) answers prev with the last key (next with the first).
int store_cursor_next (store_cursor_t *self, const void **k, size_t *k_len,
                       const void **v, size_t *v_len);
int store_cursor_prev (store_cursor_t *self, const void **k, size_t *k_len,
                       const void **v, size_t *v_len);

//  Positions at the last key and reads it. Same returns.
int store_cursor_last (store_cursor_t *self, const void **k, size_t *k_len,
                       const void **v, size_t *v_len);

//  Number of entries in DB (in TXN's view).
size_t store_count (store_txn_t *txn, store_db_t db);

//  Current map size and bytes in use (pages in use x page size). "In use"
//  is the highest page ever allocated: pages freed below it are reused
//  before the map needs to grow.
void store_usage (store_t *self, size_t *map_bytes, size_t *used_bytes);

//  True when the map is below its ceiling, so a transaction that failed
//  with STORE_EFULL may be retried after it is aborted (the map grows when
//  the retry begins with no other transaction open).
bool store_can_grow (store_t *self);

//  Puts and deletes asked of TXN so far (failed ones too): a caller that
//  notes it before and after some work knows whether that work wrote.
size_t store_txn_changes (store_txn_t *txn);

//  0 while TXN is usable, else the STORE_E* code that poisoned it (a full
//  map, an I/O error): it can only be aborted (store_commit returns the
//  code). Read-only transactions never fail this way.
int store_txn_failed (store_txn_t *txn);

//  Replication (a broker cluster): while TXN (a write transaction) has a
//  JOURNAL, each change that lands in it is appended to JOURNAL, in order,
//  as one msgpack value: ["p", DB, KEY, VALUE] (a put), ["d", DB, KEY] (a
//  delete that found its key), ["x", DB, PREFIX] (a prefix delete that
//  deleted something); DB is the database's name, KEY, VALUE and PREFIX
//  bins. store_apply (journal.h) of those bytes on another store of the
//  same content makes it the same. NULL stops it. The journal is the
//  caller's; a transaction that fails leaves in it what it wrote before.
void store_txn_journal (store_txn_t *txn, pw_t *journal);

//  Writes a compacted copy of SELF, as it stands after its last commit,
//  to the file PATH (PATH.tmp, synced, then renamed; a file at PATH is
//  replaced): a data.mdb that store_open of a directory holding it opens
//  as the same store. What a broker cluster sends a standby that must
//  catch up (a snapshot). No transaction of this thread may be open.
//  Returns 0, or -1 with a sentence in ERR.
int store_copy (store_t *self, const char *path, char *err, size_t err_len);

//  The same copy, taken by a thread other than the one that uses SELF,
//  while that one reads and commits on: the copy is of one read
//  transaction of the calling thread (LMDB gives each thread its own
//  reader slot), so of one committed state. The owner brackets it with
//  store_apart_begin before the thread starts and store_apart_end after
//  it was joined, and keeps SELF open in between. Touches nothing of
//  SELF but its environment. Returns 0, or -1 with a sentence in ERR.
int store_copy_apart (store_t *self, const char *path, char *err,
                      size_t err_len);

//  A copy apart begins or ended (the owner's thread): while one runs the
//  map does not grow (LMDB must not move it under the copy's reader), so
//  a write that would need more room fails as a full map does.
void store_apart_begin (store_t *self);
void store_apart_end (store_t *self);

//  The database named NAME (LEN bytes), or STORE_DB_COUNT when none is.
store_db_t store_db_named (const char *name, size_t len);

//  The name of DB.
const char *store_db_name (store_db_t db);

//  The store's size and its disk's room.
typedef struct {
    size_t map_bytes;            //  Current map size
    size_t used_bytes;           //  In use (see store_usage)
    size_t max_bytes;            //  Ceiling the map may grow to
    uint64_t disk_bytes;         //  Size of the filesystem holding it
    uint64_t disk_free_bytes;    //  Free on it (for an unprivileged writer)
} store_info_t;

//  Fills INFO (zeros for what cannot be read).
void store_info (store_t *self, store_info_t *info);

//  Test hook: the next COUNT write commits that change something (-1:
//  every one, until called again with STORE_OK) fail with CODE
//  (STORE_EFULL or STORE_EIO), aborted whole as a real failed commit is,
//  with "commit: ... (injected)" as the last error. Compiled in always so
//  that tests exercise the real binary; nothing but tests calls it (no
//  flag, variable or config reaches it).
void store_test_fail_commits (store_t *self, int code, int count);

//  ----------------------------------------------------------------------
//  Directory ownership: one process per data or state directory.

typedef struct _store_lock_t store_lock_t;

//  Takes the lock file DIR/owner.lock (creating DIR, mode 0700, and the
//  file as needed) with flock (LOCK_EX | LOCK_NB) and writes "PROGRAM
//  PID" into it. The lock is held until store_unlock or the process ends
//  (the descriptor is close-on-exec, so children never hold it). Returns
//  the lock, or NULL with a sentence in ERR: "WHAT DIR is in use by
//  PROGRAM pid N" when another process holds it (WHAT is "data dir",
//  "state dir"...), or why the file could not be opened.
store_lock_t *store_lock (const char *dir, const char *program,
                          const char *what, char *err, size_t err_len);

//  Releases the lock and closes its file; NULL-safe, nulls *self_p. The
//  file stays (removing it would race with a process about to lock it).
void store_unlock (store_lock_t **self_p);

#endif
