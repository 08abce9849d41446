/*  =========================================================================
    broker_clients - the client socket and the HTTP face's bridge:
    envelopes, the reply cache of requests that change state, and the
    dispatch through the request table (requests.h)

    One of the server's rooms: it shares the server's struct through
    broker_int.h, and no handler includes that header.
    =========================================================================
*/
#include "broker.h"
#include "broker_int.h"

//  ---------------------------------------------------------------------
//  Client socket

//  Keeps REPLY to request ID, whose body has digest DIGEST, for retries:
//  in memory (digest, then the reply) and, for a submit, in the store
//  (jobrec.h's request record).
static void
s_remember_reply (broker_t *self, const char *id, const char *type,
                  const uint8_t *digest, const pw_t *reply)
{
    if (zhashx_lookup (self->replies, id))
        return;
    if (zhashx_size (self->replies) >= REPLY_CACHE_MAX) {
        char *oldest = (char *) zlistx_first (self->reply_order);
        if (oldest) {
            zhashx_delete (self->replies, oldest);
            zlistx_delete (self->reply_order, zlistx_cursor (self->reply_order));
        }
    }
    zchunk_t *chunk = zchunk_new (digest, JOBREC_DIGEST_LEN);
    zchunk_extend (chunk, pw_data (reply), pw_size (reply));
    zhashx_insert (self->replies, id, chunk);
    zlistx_add_end (self->reply_order, strdup (id));
    zlistx_add_end (self->pass_replies, strdup (id));
    if (strcmp (type, "job.submit") != 0 || !self->txn)
        return;
    size_t size = 8 + 1 + JOBREC_DIGEST_LEN + pw_size (reply);
    uint8_t *record = (uint8_t *) malloc (size);
    assert (record);
    uint64_t stamp = (uint64_t) broker_wall_ms ();
    for (int index = 0; index < 8; index++)
        record [index] = (uint8_t) (stamp >> (56 - 8 * index));
    record [8] = JOBREC_DIGEST_LEN;
    memcpy (record + 9, digest, JOBREC_DIGEST_LEN);
    memcpy (record + 9 + JOBREC_DIGEST_LEN, pw_data (reply), pw_size (reply));
    ctx_store_error (store_put (self->txn, STORE_DB_REQUESTS, id,
                                    strlen (id), record, size),
                   "a request id");
    free (record);
}

//  The reply remembered for request ID, from memory or the store: 1 with
//  the reply in *REPLY_P / *SIZE_P (valid until the pass ends) and, when
//  it was kept with one, the request's digest in *DIGEST_P (else NULL);
//  0 when none is kept.
static int
s_recall_reply (broker_t *self, const char *id, const void **reply_p,
                size_t *size_p, const uint8_t **digest_p)
{
    zchunk_t *cached = (zchunk_t *) zhashx_lookup (self->replies, id);
    if (cached) {
        *digest_p = zchunk_data (cached);
        *reply_p = zchunk_data (cached) + JOBREC_DIGEST_LEN;
        *size_p = zchunk_size (cached) - JOBREC_DIGEST_LEN;
        return 1;
    }
    const void *stored = NULL;
    size_t stored_len = 0;
    if (!broker_txn (self)
        || store_get (self->txn, STORE_DB_REQUESTS, id, strlen (id), &stored,
                      &stored_len) != 0
        || stored_len <= 8)
        return 0;
    const uint8_t *bytes = (const uint8_t *) stored + 8;
    size_t len = stored_len - 8;
    *digest_p = NULL;
    if (bytes [0] == JOBREC_DIGEST_LEN) {
        if (len <= 1 + JOBREC_DIGEST_LEN)
            return 0;
        *digest_p = bytes + 1;
        bytes += 1 + JOBREC_DIGEST_LEN;
        len -= 1 + JOBREC_DIGEST_LEN;
    }
    *reply_p = bytes;
    *size_p = len;
    return 1;
}

//  Queues the reply DATA/SIZE to the client whose envelope is ENVELOPE
//  on SOCKET, sent after the pass commits, written at protocol VERSION
//  (the request's). REQUEST is the message it answers, ID its request
//  id, WROTE whether handling it changed the store.
void
broker_reply (broker_t *self, zsock_t *socket, zmsg_t *envelope, const void *data,
         size_t size, int version, zmsg_t *request, const char *id, bool wrote)
{
    s_pending_t *pending = (s_pending_t *) zmalloc (sizeof (s_pending_t));
    pending->socket = socket;
    pending->reply = zmsg_dup (envelope);
    zmsg_addmem (pending->reply, data, size);
    //  Replies are made (and remembered) at PROTO_VERSION; an older
    //  client reads them at its own (nothing else differs between them)
    zframe_t *body = zmsg_last (pending->reply);
    if (proto_version_for (version) != PROTO_VERSION)
        proto_reply_set_version (zframe_data (body), zframe_size (body),
                                 proto_version_for (version));
    pending->request = wrote ? zmsg_dup (request) : NULL;
    pending->id = strdup (id ? id : "");
    pending->wrote = wrote;
    zlistx_add_end (self->outbox, pending);
}

//  A client request is the routing id, at most one empty delimiter (REQ
//  adds it, a DEALER need not) and one body frame. A message with more
//  frames is refused whole and counted malformed: its extra frames are
//  never echoed, so the error goes back to the routing id (and delimiter)
//  alone. Returns true when MSG was refused.
static bool
s_client_envelope_refused (broker_t *self, zmsg_t *msg)
{
    size_t frames = zmsg_size (msg);
    zframe_t *routing = zmsg_first (msg);
    zframe_t *second = zmsg_next (msg);
    bool delimited = second && zframe_size (second) == 0;
    if (frames == 2 || (frames == 3 && delimited))
        return false;
    self->stats->counters.malformed++;
    zmsg_t *envelope = zmsg_new ();
    zmsg_addmem (envelope, zframe_data (routing), zframe_size (routing));
    if (delimited)
        zmsg_addmem (envelope, NULL, 0);
    char why [160];
    snprintf (why, sizeof why, "a request is one body frame after the "
              "envelope (the routing id and at most one empty delimiter); "
              "this message had %zu frames", frames);
    pw_t *reply = pw_new ();
    proto_reply_error (reply, "", PROTO_ERR_MALFORMED, why, NULL, 0);
    broker_reply (self, self->client, envelope, pw_data (reply), pw_size (reply),
             proto_reply_version (zframe_data (zmsg_last (msg)),
                                  zframe_size (zmsg_last (msg))),
             msg, "", false);
    pw_destroy (&reply);
    zmsg_destroy (&envelope);
    return true;
}

//  Names the client request CALL admitted as the scope of the log lines
//  its work writes (log.h): its id, who sent it (the client's or token's
//  name; an unnamed key by the key) and the role.
static void
s_log_scope (const req_call_t *call)
{
    const char *caller = call->name;
    if (caller && streq (caller, AUTH_UNNAMED))
        caller = call->caller->key ? call->caller->key : "an insecure client";
    log_scope_set (&(log_scope_t) {call->request->id, caller,
                                   auth_role_name (call->role)});
}

//  ---------------------------------------------------------------------
//  The audit trail (audit.h)

void
broker_audit_log (const audit_entry_t *entry)
{
    char suppressed [24];
    snprintf (suppressed, sizeof suppressed, "%" PRId64, entry->suppressed);
    const char *fields [] = {
        "face", entry->face, "who", entry->who, "who_role", entry->role,
        "request_id", entry->request, "type", entry->type,
        "object", entry->object [0] ? entry->object : NULL,
        "outcome", entry->outcome,
        "suppressed", entry->suppressed > 0 ? suppressed : NULL, NULL};
    char line [1024];
    snprintf (line, sizeof line, "audit: %s%s%s by %s (%s) via %s: %s%s%s",
              entry->type, entry->object [0] ? " " : "", entry->object,
              entry->who, entry->role, entry->face, entry->outcome,
              entry->message [0] ? ": " : "", entry->message);
    log_audit (line, fields);
}

void
broker_audit_keep (broker_t *self, store_txn_t *txn, audit_entry_t *entry)
{
    int rc = audit_put (self->audit, txn, entry);
    ctx_store_error (rc, "an audit entry");
    if (rc == 0)
        zlistx_add_end (self->pass_audits, entry);
    else
        free (entry);
}

void
broker_audit_record (broker_t *self, const char *face, const char *who,
                     const char *type, const char *object,
                     const char *outcome, const char *message,
                     int64_t suppressed)
{
    store_txn_t *txn = broker_txn (self);
    if (!txn)
        return;
    audit_entry_t *entry = (audit_entry_t *) zmalloc (sizeof *entry);
    entry->at_ms = broker_wall_ms ();
    entry->suppressed = suppressed;
    audit_text_set (entry->face, sizeof entry->face, face);
    audit_text_set (entry->who, sizeof entry->who, who);
    audit_text_set (entry->role, sizeof entry->role, "none");
    audit_text_set (entry->type, sizeof entry->type, type);
    audit_text_set (entry->object, sizeof entry->object, object);
    audit_text_set (entry->outcome, sizeof entry->outcome, outcome);
    audit_text_set (entry->message, sizeof entry->message, message);
    broker_audit_keep (self, txn, entry);
}

//  Who CALL's caller is, for the trail: the key's or token's name, an
//  unnamed key by the key, and, when it was not identified (unauthorized),
//  the key it used or "an unknown token" (a token's text is a secret).
static void
s_audit_who (const req_call_t *call, bool identified, char *buf, size_t size)
{
    const auth_caller_t *caller = call->caller;
    const char *who = identified ? call->name : NULL;
    if (who && streq (who, AUTH_UNNAMED))
        who = caller->http ? NULL
              : caller->key ? caller->key : "an insecure client";
    if (!who)
        who = caller->http ? (caller->token ? "an unknown token" : "no token")
              : caller->key ? caller->key : "an unknown client";
    audit_text_set (buf, size, who);
}

//  The object REQUEST acted on: its job, entry, node, key, name or
//  delivery field,
//  or, for a submit, the job its ok reply (DATA) names.
static void
s_audit_object (const proto_request_t *request, const pv_t *data, char *buf,
                size_t size)
{
    static const char *fields [] = {"job", "entry", "node", "key", "name",
                                    "delivery"};
    char *text = NULL;
    for (size_t index = 0; index < 6 && !text; index++)
        text = pv_strdup (pv_map_get (request->body, fields [index]));
    if (!text && data)
        text = pv_strdup (pv_map_get (data, "job"));
    audit_text_set (buf, size, text);
    free (text);
}

//  Records CALL's request in the trail, in the pass's transaction, with
//  the outcome its reply ANSWER (SIZE bytes) says. IDENTIFIED: the caller
//  was admitted or at least identified (a forbidden one). A refusal
//  (unauthorized, forbidden) is recorded for any request type, at most
//  one per caller per AUDIT_REFUSED_MS; other outcomes only when not
//  REFUSALS_ONLY (an audited row's request that was handled).
static void
s_audit (broker_t *self, const req_call_t *call, bool identified,
         bool refusals_only, const void *answer, size_t size)
{
    audit_entry_t *entry = (audit_entry_t *) zmalloc (sizeof *entry);
    pv_doc_t *doc = NULL;
    const pv_t *reply = NULL, *data = NULL;
    if (pv_doc_decode (answer, size, &doc, NULL, 0) == 0) {
        reply = pv_doc_root (doc);
        data = pv_map_get (reply, "data");
    }
    bool ok = reply && pv_str_eq (pv_map_get (reply, "type"), "ok");
    char *code = ok ? strdup ("ok")
                 : pv_strdup (pv_map_get (reply, "code"));
    char *message = ok ? NULL : pv_strdup (pv_map_get (reply, "message"));
    audit_text_set (entry->outcome, sizeof entry->outcome,
                    code ? code : PROTO_ERR_INTERNAL);
    audit_text_set (entry->message, sizeof entry->message, message);
    free (code);
    free (message);
    const auth_caller_t *caller = call->caller;
    audit_text_set (entry->face, sizeof entry->face,
                    !caller->http      ? "zmq"
                    : caller->dashboard ? "dashboard" : "http");
    s_audit_who (call, identified, entry->who, sizeof entry->who);
    audit_text_set (entry->role, sizeof entry->role,
                    identified ? auth_role_name (call->role) : "none");
    bool record = !refusals_only;
    if (audit_outcome_refused (entry->outcome)) {
        char key [AUDIT_TEXT_MAX + 32];
        snprintf (key, sizeof key, "%s %s", entry->face, entry->who);
        record = audit_refusal_admit (self->audit, key, broker_now_ms (),
                                      &entry->suppressed);
    }
    store_txn_t *txn = record ? broker_txn (self) : NULL;
    if (txn) {
        entry->at_ms = broker_wall_ms ();
        audit_text_set (entry->request, sizeof entry->request,
                        call->request->id);
        audit_text_set (entry->type, sizeof entry->type, call->request->type);
        s_audit_object (call->request, ok ? data : NULL, entry->object,
                        sizeof entry->object);
        broker_audit_keep (self, txn, entry);
        entry = NULL;
    }
    pv_doc_destroy (&doc);
    free (entry);
}

//  Handles one client request, whatever face it came through: BODY is its
//  body frame, *ENVELOPE_P (taken) the frames its reply goes back with on
//  SOCKET, CALLER who sent it, and MSG the whole message as it came (kept
//  to run again should the pass's commit fail on a map that grows).
static void
s_on_request (broker_t *self, zsock_t *socket, zmsg_t **envelope_p,
              zframe_t *body, const auth_caller_t *caller, zmsg_t *msg)
{
    zmsg_t *envelope = *envelope_p;
    *envelope_p = NULL;
    //  What this request writes is told apart from what came before it
    broker_drain (self);
    size_t changes_before = store_txn_changes (self->txn);
    bool had_txn = self->txn != NULL;
    proto_request_t *request = NULL;
    const char *code = NULL;
    char *id = NULL;
    char why [512];
    pw_t *reply = pw_new ();
    const void *answer = NULL;
    size_t answer_size = 0;
    bool same_pass = false;
    req_call_t call;
    memset (&call, 0, sizeof call);
    const requests_row_t *row = NULL;
    bool decoded = proto_request_decode (zframe_data (body), zframe_size (body),
                                         &request, &code, &id, why,
                                         sizeof why) == 0;
    if (decoded)
        metrics_request (self->stats->metrics, request->type);
    if (!decoded) {
        self->stats->counters.malformed++;
        proto_reply_error (reply, id ? id : "", code, why, NULL, 0);
    }
    else {
        //  Refused (unauthorized, forbidden, not a request type) before
        //  anything is looked up or changed
        call.ctx = &self->ctx;
        call.request = request;
        call.caller = caller;
        call.reply = reply;
        log_scope_set (&(log_scope_t) {request->id, NULL, NULL});
        row = requests_admit (&call);
        if (row)
            s_log_scope (&call);
        else
            s_audit (self, &call, call.name != NULL, true, pw_data (reply),
                     pw_size (reply));
    }
    if (row) {
        bool mutation = row->mutates;
        //  A retry carries the same request: what it says is compared by
        //  the digest of its canonical form (key order does not matter).
        uint8_t digest [JOBREC_DIGEST_LEN];
        if (mutation) {
            pw_reset (self->ctx.scratch);
            pw_pv_canonical (self->ctx.scratch, request->body);
            jobrec_digest (pw_data (self->ctx.scratch), pw_size (self->ctx.scratch),
                           digest);
        }
        const void *kept = NULL;
        size_t kept_size = 0;
        const uint8_t *kept_digest = NULL;
        if (mutation
            && s_recall_reply (self, request->id, &kept, &kept_size,
                               &kept_digest)) {
            //  The same request twice in one pass: it stands or falls
            //  with the first
            same_pass = zlistx_find (self->pass_replies, request->id) != NULL;
            if (!kept_digest
                || memcmp (kept_digest, digest, JOBREC_DIGEST_LEN) == 0) {
                answer = kept;
                answer_size = kept_size;
            }
            else
                proto_reply_error (reply, request->id, PROTO_ERR_CONFLICT,
                                   "this request id was already used for "
                                   "another request: a retry must resend "
                                   "the same request, a new request needs "
                                   "a new id", NULL, 0);
        }
        else {
            row->handler (&call);
            broker_drain (self);
            log_scope_set (NULL);
            if (mutation)
                s_remember_reply (self, request->id, request->type, digest,
                                  reply);
            //  In the pass's transaction: with the effect, or not at all
            if (row->audited && !call.park)
                s_audit (self, &call, true, false, pw_data (reply),
                         pw_size (reply));
        }
    }
    log_scope_set (NULL);
    if (call.park) {
        //  job.watch: answered when the job changes (broker_watch_wake)
        if (zlistx_size (self->watchers) < WATCHERS_MAX) {
            s_watcher_t *watcher = (s_watcher_t *) zmalloc (sizeof *watcher);
            watcher->socket = socket;
            watcher->envelope = envelope;
            envelope = NULL;
            watcher->id = strdup (request->id);
            watcher->version = request->version;
            snprintf (watcher->job, sizeof watcher->job, "%s", call.park_job);
            watcher->after = call.park_after;
            watcher->deadline_ms = broker_now_ms () + call.park_timeout_ms;
            zlistx_add_end (self->watchers, watcher);
        }
        else
            req_write_watch (&self->ctx, request->id, call.park_job,
                             broker_job_version (self, call.park_job),
                             false, reply);
        if (!envelope) {
            pw_destroy (&reply);
            free (id);
            proto_request_destroy (&request);
            return;
        }
    }
    if (!answer) {
        answer = pw_data (reply);
        answer_size = pw_size (reply);
    }
    //  A reply past ZMQ_MAXMSGSIZE would be dropped by the client's socket
    //  (which closes the connection: the client hears nothing and retries
    //  in vain); it gets an error that says why instead. The HTTP face
    //  has no such bound.
    if (socket == self->client && answer_size > PROTO_MAX_FRAME) {
        char too_large [400];
        snprintf (too_large, sizeof too_large,
                  "the reply is %.1f MiB, more than the %d MiB a message may "
                  "hold: ask for less (a lower limit, events after a seq, "
                  "one node's output with job.output), or use the HTTP "
                  "API, whose replies have no such bound",
                  (double) answer_size / (1024 * 1024),
                  PROTO_MAX_FRAME / (1024 * 1024));
        log_warn ("%s: %s", request ? request->type : "a request",
                  too_large);
        pw_reset (reply);
        proto_reply_error (reply, request ? request->id : id ? id : "",
                           PROTO_ERR_TOO_LARGE, too_large, NULL, 0);
        answer = pw_data (reply);
        answer_size = pw_size (reply);
    }
    //  A transaction begun by this request starts from zero changes
    bool wrote = self->pass_broken || same_pass
                 || (self->txn
                     && (store_txn_changes (self->txn)
                             > (had_txn ? changes_before : 0)
                         || store_txn_failed (self->txn)));
    broker_reply (self, socket, envelope, answer, answer_size,
             request ? request->version
                     : proto_reply_version (zframe_data (body),
                                            zframe_size (body)),
             msg, request ? request->id : id, wrote);
    pw_destroy (&reply);
    free (id);
    proto_request_destroy (&request);
    zmsg_destroy (&envelope);
}

//  A request on the client ROUTER: the routing id, at most one empty
//  delimiter and the body, sent by the CURVE key of its body frame.
static void
s_on_client_message (broker_t *self, zmsg_t *msg)
{
    //  Everything before the last frame is the envelope (REQ adds an
    //  empty delimiter; a DEALER may not).
    zframe_t *body = zmsg_last (msg);
    if (!body || zmsg_size (msg) < 2) {
        self->stats->counters.malformed++;
        return;
    }
    if (s_client_envelope_refused (self, msg))
        return;
    zmsg_t *envelope = zmsg_dup (msg);
    zframe_t *last = zmsg_last (envelope);
    zmsg_remove (envelope, last);
    zframe_destroy (&last);
    auth_caller_t caller = { NULL, NULL, false, false, false };
    if (!self->config.auth.insecure)
        caller.key = zframe_meta (body, "User-Id");
    s_on_request (self, self->client, &envelope, body, &caller, msg);
}

//  The HTTP face's probe (GET /healthz, /readyz): answered at once, from
//  the reactor, with what readiness needs.
static void
s_http_probe (broker_t *self, zmsg_t **envelope_p)
{
    pw_t *probe = pw_new ();
    bool failing = self->stats->storage.code != 0;
    const cluster_config_t *cluster = &self->config.cluster;
    bool member = self->repl != NULL;
    pw_map (probe, 3 + (failing ? 1 : 0) + (member ? 5 : 0)
                   + (member && cluster->client ? 1 : 0)
                   + (member && cluster->http ? 1 : 0));
    if (member) {
        //  /api/v1/leader: this active, as its peers reach it
        pw_str (probe, "role");
        pw_str (probe, "active");
        pw_str (probe, "name");
        pw_str (probe, cluster->name);
        pw_str (probe, "cluster");
        pw_str (probe, cluster->cluster);
        pw_str (probe, "epoch");
        pw_int (probe, (int64_t) self->epoch);
        pw_str (probe, "leader");
        pw_str (probe, cluster->name);
        if (cluster->client) {
            pw_str (probe, "client");
            pw_str (probe, cluster->client);
        }
        if (cluster->http) {
            pw_str (probe, "http");
            pw_str (probe, cluster->http);
        }
    }
    pw_str (probe, "maintenance");
    pw_bool (probe, self->ctx.state.maintenance);
    pw_str (probe, "storage");
    pw_str (probe, !failing ? "ok"
                   : self->stats->storage.code == STORE_EFULL ? "full" : "error");
    pw_str (probe, "uptime_ms");
    pw_int (probe, broker_now_ms () - self->stats->started_ms);
    if (failing) {
        pw_str (probe, "error");
        pw_str (probe, self->stats->storage.error);
    }
    zmsg_addmem (*envelope_p, pw_data (probe), pw_size (probe));
    if (zmsg_send (envelope_p, self->http) != 0)
        self->stats->counters.send_failed++;
    zmsg_destroy (envelope_p);
    pw_destroy (&probe);
}

//  A request from the HTTP face's bridge (http.h): the routing id, the
//  bridge's tag, the kind (HTTP_KIND_REQUEST or HTTP_KIND_PROBE), the
//  bearer token ("" when none was sent) and the body. The reply goes
//  back with the routing id and the tag.
static void
s_on_http_message (broker_t *self, zmsg_t *msg)
{
    if (zmsg_size (msg) != 5) {
        self->stats->counters.malformed++;
        return;
    }
    zframe_t *routing = zmsg_first (msg);
    zframe_t *tag = zmsg_next (msg);
    zframe_t *kind = zmsg_next (msg);
    zframe_t *token = zmsg_next (msg);
    zframe_t *body = zmsg_next (msg);
    zmsg_t *envelope = zmsg_new ();
    zmsg_addmem (envelope, zframe_data (routing), zframe_size (routing));
    zmsg_addmem (envelope, zframe_data (tag), zframe_size (tag));
    if (zframe_streq (kind, HTTP_KIND_PROBE)) {
        s_http_probe (self, &envelope);
        return;
    }
    //  A token is 69 bytes: anything much longer is no token at all
    char text [HTTP_MAX_TOKEN + 1];
    size_t size = zframe_size (token);
    if (size > HTTP_MAX_TOKEN)
        size = 0;
    memcpy (text, zframe_data (token), size);
    text [size] = 0;
    auth_caller_t caller = { NULL, size ? text : NULL, true,
                             zframe_streq (kind, HTTP_KIND_PUBLIC),
                             zframe_streq (kind, HTTP_KIND_DASHBOARD) };
    if (zframe_size (token) > HTTP_MAX_TOKEN)
        caller.token = "-";
    s_on_request (self, self->http, &envelope, body, &caller, msg);
}

void
broker_on_face_message (broker_t *self, zsock_t *socket, zmsg_t *msg)
{
    if (socket == self->http)
        s_on_http_message (self, msg);
    else
        s_on_client_message (self, msg);
}

int
broker_on_client (zloop_t *loop, zsock_t *socket, void *arg)
{
    broker_t *self = (broker_t *) arg;
    for (int count = 0; count < CLIENT_BATCH_MAX; count++) {
        zmsg_t *msg = zmsg_recv (socket);
        if (!msg)
            break;
        broker_on_face_message (self, socket, msg);
        zmsg_destroy (&msg);
        //  A transaction that failed (a full map) ends the pass here, so
        //  that the requests after it get a fresh one; so does a pass that
        //  carries much to the standbys (uploads of blobs side by side)
        if (self->pass_broken || (self->txn && store_txn_failed (self->txn))
            || (self->repl && self->txn
                && pw_size (self->journal) >= CLIENT_PASS_JOURNAL_MAX))
            broker_pass_end (self);
    }
    broker_pass_end (self);
    broker_schedules_arm (self);
    return 0;
}

