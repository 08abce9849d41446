/*  =========================================================================
    req - the client request handlers, one file per topic

    Each handler serves one request type of proto/PROTOCOL.md: it reads
    the decoded request, acts through the context (ctx.h: the pass and its
    transaction, the clock, the registry, the scheduler, the store...) and
    writes ONE whole reply, ok or error, into call->reply. Replies leave
    only after the pass commits (the server's business, not theirs).

    The request table (requests.h) maps each type to its handler, the role
    it needs and whether it changes state; the server has already checked
    the caller's role against it when a handler runs. A handler never sees
    the broker's own struct.

        jobs.c       job.submit job.check job.get job.progress job.watch
                     job.changes
                     job.list job.cancel job.events job.delete job.output
                     job.output_events job.retry
        nodes.c      node.list node.changes node.get node.drain node.resume
                     node.workers node.history
        status.c     status whoami broker.drain broker.resume queue.stats
                     metrics.get
        dlq.c        dlq.list dlq.get dlq.retry dlq.purge
        keys.c       key.list key.accept key.reject key.delete
        brokerkey.c  broker.rekey broker.keys
        tokens.c     token.add token.list token.revoke
        relays.c     relay.list
        schedules.c  schedule.add schedule.list schedule.get
                     schedule.pause schedule.resume schedule.delete
                     schedule.run
        audit.c      audit.list
        cluster.c    cluster.status cluster.switchover
        notify.c     notify.list notify.retry
        blobs.c      blob.put blob.stat blob.list blob.delete

    Threading: the broker's thread only.
    =========================================================================
*/
#ifndef GRID_BROKER_REQ_H
#define GRID_BROKER_REQ_H

#include "../../proto/job.h"
#include "../../proto/names.h"
#include "../../proto/proto.h"
#include "../../proto/pw.h"
#include "../auth.h"
#include "../ctx.h"

//  One request being handled.
typedef struct {
    ctx_t *ctx;                  //  The broker, as handlers see it
    const proto_request_t *request;  //  The decoded request
    const auth_caller_t *caller; //  Who sent it, and through which face
    auth_role_t role;            //  The caller's role
    const char *name;            //  The caller's name (a client's or a
                                 //  token's), or "this client"
    pw_t *reply;                 //  The whole reply goes here
    //  Out: a handler that wants its request answered later (job.watch)
    //  sets PARK and leaves REPLY empty; the server answers when the job
    //  changes, ends, or the time runs out (req_write_watch).
    bool park;                   //  Answer later
    char park_job [JOB_ID_LEN + 1];  //  ... when this job ("": any job,
                                     //  REQ_PARK_NODES: any node)
    uint64_t park_after;         //  ... is no longer at this version,
    int64_t park_timeout_ms;     //  ... or after this long at most
} req_call_t;

typedef void (req_handler_fn) (req_call_t *call);

//  The park_job of node.changes: no job id looks like it.
#define REQ_PARK_NODES "~nodes"

//  ---------------------------------------------------------------------
//  Helpers every handler file uses (req.c)

//  Replaces the reply with the error CODE and a sentence (printf FORMAT).
void req_error (req_call_t *call, const char *code, const char *format, ...)
    __attribute__ ((format (printf, 3, 4)));

//  The string field KEY of the request, as a new string (caller frees),
//  or NULL when absent.
char *req_field (const req_call_t *call, const char *key);

//  Who sent CALL, as a job's record and events name them (caller frees):
//  "alice (admin)" for a named client key, "token ci (operator)" for an
//  HTTP token, "key Abc12345... (admin)" for a key with no name. The
//  request table's admission identified the caller (requests_admit).
char *req_caller_text (const req_call_t *call);

//  The pass's transaction; NULL after writing a storage_error reply.
store_txn_t *req_txn (req_call_t *call);

//  Items a list request (job.list, dlq.list, node.history) returns when
//  it names no limit.
#define REQ_LIST_DEFAULT 50

//  ---------------------------------------------------------------------
//  Shared with the server and other handler files

//  jobs.c: checks every leaf of SPEC against what the registered nodes
//  offer (backend, action, params); adds "path: reason" sentences to
//  DETAILS (a zlistx of strings it owns).
void req_check_actions (ctx_t *ctx, const job_spec_t *spec, zlistx_t *details);

//  jobs.c: writes the whole job.watch reply to request REQUEST_ID about
//  JOB_ID at VERSION into REPLY: {version, changed, progress}, or
//  not_found / storage_error; of "" (job.changes) or REQ_PARK_NODES
//  (node.changes), {version, changed}.
void req_write_watch (ctx_t *ctx, const char *request_id, const char *job_id,
                      uint64_t version, bool changed, pw_t *reply);

//  jobs.c: makes a new job that retries JOB_ID (the same tasks;
//  PROTOCOL.md job.retry) and links the two both ways, replying as
//  job.retry does. FAILED_ONLY: only the nodes whose cells failed (for an
//  `any` job, the same `any` target, since the work failed, not a node).
//  TARGET_TEXT, when given, replaces the target. The job's dead-letter
//  entries are marked with the new job, which clears them when it
//  completes. dlq.retry is served by it too.
void req_retry (req_call_t *call, const char *job_id, bool failed_only,
                const char *target_text);

//  ---------------------------------------------------------------------
//  The handlers (one per request type; requests.c names each once)

void req_job_submit (req_call_t *call);
void req_job_check (req_call_t *call);
void req_job_get (req_call_t *call);
void req_job_progress (req_call_t *call);
void req_job_watch (req_call_t *call);
void req_job_changes (req_call_t *call);
void req_job_list (req_call_t *call);
void req_job_cancel (req_call_t *call);
void req_job_events (req_call_t *call);
void req_job_delete (req_call_t *call);
void req_job_output (req_call_t *call);
void req_job_output_events (req_call_t *call);
void req_job_retry (req_call_t *call);

void req_node_list (req_call_t *call);
void req_node_changes (req_call_t *call);
void req_node_get (req_call_t *call);
void req_node_drain (req_call_t *call);
void req_node_resume (req_call_t *call);
void req_node_workers (req_call_t *call);
void req_node_history (req_call_t *call);

void req_status (req_call_t *call);
void req_whoami (req_call_t *call);
void req_broker_drain (req_call_t *call);
void req_broker_resume (req_call_t *call);
void req_queue_stats (req_call_t *call);
void req_metrics_get (req_call_t *call);

void req_dlq_list (req_call_t *call);
void req_dlq_get (req_call_t *call);
void req_dlq_retry (req_call_t *call);
void req_dlq_purge (req_call_t *call);

void req_key_list (req_call_t *call);
void req_key_accept (req_call_t *call);
void req_key_reject (req_call_t *call);
void req_key_delete (req_call_t *call);

void req_broker_rekey (req_call_t *call);
void req_broker_keys (req_call_t *call);

//  While the broker's key rotates: the nodes known, those that
//  acknowledged its next key, those connected directly that cannot (a
//  release before broker_rekey) and those behind relays (brokerkey.c;
//  status uses it too).
typedef struct {
    size_t nodes;
    size_t acknowledged;
    size_t unable;
    size_t relayed;
} req_broker_key_counts_t;
void req_broker_key_counts (ctx_t *ctx, req_broker_key_counts_t *counts);

void req_token_add (req_call_t *call);
void req_token_list (req_call_t *call);
void req_token_revoke (req_call_t *call);

void req_relay_list (req_call_t *call);

void req_schedule_add (req_call_t *call);
void req_schedule_list (req_call_t *call);
void req_schedule_get (req_call_t *call);
void req_schedule_pause (req_call_t *call);
void req_schedule_resume (req_call_t *call);
void req_schedule_delete (req_call_t *call);
void req_schedule_run (req_call_t *call);

void req_audit_list (req_call_t *call);
void req_notify_list (req_call_t *call);
void req_notify_retry (req_call_t *call);

void req_blob_put (req_call_t *call);
void req_blob_stat (req_call_t *call);
void req_blob_list (req_call_t *call);
void req_blob_delete (req_call_t *call);

//  cluster.c
void req_cluster_status (req_call_t *call);
void req_cluster_switchover (req_call_t *call);

#endif
