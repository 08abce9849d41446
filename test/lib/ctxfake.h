/*  =========================================================================
    ctxfake - a real handler context (broker/ctx.h) for unit tests, with
    no socket and a clock the test sets

    Contract. ctxfake_new makes a temporary directory (mkdtemp under
    $TMPDIR or /tmp) with a broker key pair and three client key pairs,
    one per role (viewer, operator, admin, named so), opens a store there
    and builds over it what the server builds without sockets: the
    registry, a scheduler (its targets resolved, its unavailable nodes
    and fleet loads read from the registry, the configured limits set),
    auth (secure: the broker key is loaded and the ZAP handler bound on
    inproc, so only one secure fake may live at a time in a process),
    relays, the schedules table and the figures. A CONFIGURE callback may
    change the configuration first (insecure, auto_accept, relays,
    limits...); what it sets the fake frees.

    The context's clock is fake: ctx_now_ms and ctx_wall_ms read what
    ctxfake_set_now set (they start at 1,000,000 and 1,700,000,000,000 ms).
    Its pass is a write transaction of the fake's store, begun on first
    use (ctx_txn) and ended only by ctxfake_commit or ctxfake_abort;
    ctx_drain writes the scheduler's actions into it as the server does
    for records (job headers, cells, events, forgotten cells) and counts
    the sends (dispatches, re-sends, cancels) without sending anything.
    job_version is always 0 and no request is ever parked.

    ctxfake_call runs one encoded request through the request table as
    the server does: decode (proto_request_decode), admit
    (requests_admit: identify, role, the row's check), the row's handler,
    drain, then commit or abort the pass; the reply comes back decoded.

    ctxfake_destroy aborts a pass left open, frees everything and removes
    the directory. Nothing here includes the server's private header
    (broker_int.h).

    Threading: the test's thread.
    =========================================================================
*/
#ifndef GRID_CTXFAKE_H
#define GRID_CTXFAKE_H

#include <stdbool.h>
#include <stdint.h>

#include "../../broker/ctx.h"
#include "../../broker/requests.h"

#define CTXFAKE_NOW_MS 1000000               //  The monotonic clock at start
#define CTXFAKE_WALL_MS 1700000000000LL      //  The wall clock at start

typedef struct _ctxfake_t ctxfake_t;

//  Changes CONFIG (defaults, data dir in DIR, the clients of the three
//  roles already added) before anything is built; ARG is ctxfake_new's.
//  Returns 0, or -1 to make ctxfake_new fail.
typedef int (ctxfake_configure_fn) (broker_config_t *config, const char *dir,
                                    void *arg);

//  A new fake over a fresh store, CONFIGURE (may be NULL) called with ARG
//  first. Returns NULL when something cannot be built (printed on
//  stderr).
ctxfake_t *ctxfake_new (ctxfake_configure_fn *configure, void *arg);

//  Aborts a pass left open, frees everything, removes the directory;
//  NULL-safe, nulls *self_p.
void ctxfake_destroy (ctxfake_t **self_p);

//  The context (lent: valid until destroy). Its sched may be replaced by
//  the caller (as the server's undo does); the fake frees whatever sched
//  the context holds at destroy.
ctx_t *ctxfake_ctx (ctxfake_t *self);

//  The temporary directory (the store's data dir).
const char *ctxfake_dir (ctxfake_t *self);

//  The public key (Z85) of the client key pair of ROLE (viewer, operator
//  or admin), configured with that role and named after it.
const char *ctxfake_client_key (ctxfake_t *self, auth_role_t role);

//  Sets the fake clocks (monotonic and wall), or moves both by DELTA_MS.
void ctxfake_set_now (ctxfake_t *self, int64_t now_ms, int64_t wall_ms);
void ctxfake_advance (ctxfake_t *self, int64_t delta_ms);

//  Whether a pass's transaction is open now.
bool ctxfake_pass_open (ctxfake_t *self);

//  Drains the scheduler and commits the pass, if one is open. Returns 0
//  or the store's code.
int ctxfake_commit (ctxfake_t *self);

//  Drops the pass, if one is open: nothing it wrote reaches the store
//  (what a failed commit leaves on disk). In-memory state is untouched.
void ctxfake_abort (ctxfake_t *self);

//  Sends the scheduler's actions asked for since the fake was made:
//  dispatches, re-sends and cancels counted by ctx_drain.
size_t ctxfake_sends (ctxfake_t *self);

//  The ids of every job the scheduler's actions saved since the fake was
//  made (what the server tracks as live or touched by a pass), as a new
//  list of strings the caller destroys.
zlistx_t *ctxfake_jobs_seen (ctxfake_t *self);

//  Starts a request as a client does (proto_request_begin): {v, type:
//  TYPE, id} with room for FIELD_COUNT more pairs, which the caller
//  writes into the returned writer (lent until the next begin). The id
//  is "req-<n>", new each time.
pw_t *ctxfake_begin (ctxfake_t *self, const char *type, size_t field_count);

//  Runs the request in ctxfake_begin's writer from CALLER (NULL: a
//  ZeroMQ client with no key) through the request table, then commits
//  (COMMIT) or aborts the pass. Returns the decoded reply (caller
//  destroys), or NULL when the reply is not a valid msgpack map. A
//  request refused before the table (malformed) is answered as the
//  server answers it. *ROW_P, when not NULL, gets the row that served
//  it, or NULL when it was refused before its handler ran.
pv_doc_t *ctxfake_call (ctxfake_t *self, const auth_caller_t *caller,
                        bool commit, const requests_row_t **row_p);

//  ctxfake_call from the ZeroMQ client of ROLE (ctxfake_client_key),
//  committed.
pv_doc_t *ctxfake_call_as (ctxfake_t *self, auth_role_t role);

//  Of a reply: "ok", or the error code ("" when none); and its error
//  message, or "". Copied into a static buffer each: valid until the next
//  call of the same function.
const char *ctxfake_reply_code (const pv_doc_t *doc);
const char *ctxfake_reply_message (const pv_doc_t *doc);

//  Of an ok reply: its data map, or NULL. Borrowed from DOC.
const pv_t *ctxfake_reply_data (const pv_doc_t *doc);

//  A new hello (caller destroys) for node NODE from HOSTNAME, agent
//  process INSTANCE (may be NULL), declaring backend "test" with actions
//  "echo" (a query) and "write" (a modify action), concurrency 1.
proto_msg_t *ctxfake_hello_new (const char *node, const char *hostname,
                                const char *instance);

//  Registers node NODE as the server does after an accepted hello: into
//  the registry (routing id NODE) at the fake clock, its record written
//  into the pass (ctx_save_node), which is then committed. Returns the
//  node (borrowed from the registry).
registry_node_t *ctxfake_register (ctxfake_t *self, const char *node);

//  Writes "job": JOB (the key and the wire form of a job spec) into
//  WRITER: target TARGET (text form), one task test.ACTION.
void ctxfake_write_job (pw_t *writer, const char *target, const char *action);

//  How many records database DB of the store holds as committed (read in
//  a fresh read transaction).
size_t ctxfake_store_count (ctxfake_t *self, store_db_t db);

//  A digest of every committed record of every database (keys and
//  values), for asserting that the store did not change.
uint64_t ctxfake_store_digest (ctxfake_t *self);

#endif
