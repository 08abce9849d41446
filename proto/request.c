/*  =========================================================================
    request - client requests and replies (part of proto)

    Client requests have a simpler table than agent messages' schemas
    (proto.c): per request type, the keys it may carry with their types
    and bounds. A request is checked on its pv tree and handed over as
    that tree.
    =========================================================================
*/
#include "proto_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cron.h"
#include "job.h"
#include "mpscan.h"
#include "names.h"

//  ---------------------------------------------------------------------
//  Client requests. Each request type lists the keys it may carry besides
//  v, type and id. To add a request type, add its fields and one line to
//  s_requests.

typedef struct {
    const char *key;    //  Wire key
    pv_type_t type;     //  PV_STR, PV_INT, PV_BOOL, PV_MAP or PV_ARRAY
    bool required;      //  Must be present
    int64_t min;        //  Int: least value; string: fewest bytes
    int64_t max;        //  Int: greatest value; string: most bytes
} s_request_field_t;

typedef struct {
    const char *type;                   //  Request type
    const s_request_field_t *fields;    //  Its fields
    size_t count;                       //  How many
} s_request_t;

#define S_REQ_JOB { "job", PV_STR, true, 1, PROTO_MAX_TEXT }

static const s_request_field_t s_req_job_submit [] = {
    { "job", PV_MAP, true, 0, 0 },
    { "traceparent", PV_STR, false, 1, 64 },
};
//  job.submit: job.check's keys and check (a dry run, PROTOCOL.md 5.1)
static const s_request_field_t s_req_job_submit_run [] = {
    { "job", PV_MAP, true, 0, 0 },
    { "traceparent", PV_STR, false, 1, 64 },
    { "check", PV_BOOL, false, 0, 0 },
};
static const s_request_field_t s_req_job [] = {
    S_REQ_JOB,
};
static const s_request_field_t s_req_job_list [] = {
    { "status", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "limit", PV_INT, false, 1, 10000 },
    { "schedule", PV_STR, false, 1, NAME_MAX_LEN },
    { "before", PV_STR, false, 1, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_job_cancel [] = {
    S_REQ_JOB,
    { "reason", PV_STR, false, 0, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_job_events [] = {
    S_REQ_JOB,
    { "after", PV_INT, false, 0, INT64_MAX },
};
static const s_request_field_t s_req_job_watch [] = {
    S_REQ_JOB,
    { "after", PV_INT, false, 0, INT64_MAX },
    { "timeout_ms", PV_INT, false, 0, 60000 },
};
static const s_request_field_t s_req_job_changes [] = {
    { "after", PV_INT, false, 0, INT64_MAX },
    { "timeout_ms", PV_INT, false, 0, 60000 },
};
static const s_request_field_t s_req_job_retry [] = {
    S_REQ_JOB,
    { "failed_only", PV_BOOL, false, 0, 0 },
    { "target", PV_STR, false, 1, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_dlq_list [] = {
    { "job", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "limit", PV_INT, false, 1, 10000 },
};
static const s_request_field_t s_req_dlq_entry [] = {
    { "entry", PV_STR, true, 1, PROTO_MAX_TEXT },
};
static const s_request_field_t s_req_dlq_purge [] = {
    { "entry", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "job", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "older_than", PV_STR, false, 1, 64 },
    { "all", PV_BOOL, false, 0, 0 },
};
static const s_request_field_t s_req_job_output [] = {
    S_REQ_JOB,
    { "node", PV_STR, true, 1, PROTO_MAX_TEXT },
    { "step", PV_INT, true, 0, JOB_MAX_STEPS - 1 },
    { "stream", PV_STR, false, 6, 6 },
    { "attempt", PV_INT, false, 1, PROTO_MAX_ATTEMPT },
    { "offset", PV_INT, false, 0, PROTO_MAX_STREAM },
    { "limit", PV_INT, false, 1, PROTO_MAX_PAGE },
};
static const s_request_field_t s_req_job_output_events [] = {
    S_REQ_JOB,
    { "after", PV_INT, false, 0, INT64_MAX },
    { "limit", PV_INT, false, 1, PROTO_MAX_PAGE },
};
static const s_request_field_t s_req_node [] = {
    { "node", PV_STR, true, 1, PROTO_MAX_TEXT },
};
//  node.list: where is a target (names.h)
static const s_request_field_t s_req_node_list [] = {
    { "where", PV_STR, false, 1, TARGET_EXPR_MAX_LEN },
};
static const s_request_field_t s_req_node_history [] = {
    { "node", PV_STR, true, 1, PROTO_MAX_TEXT },
    { "limit", PV_INT, false, 1, 1000 },
};
//  key.accept, key.reject, key.delete: exactly one of the two
static const s_request_field_t s_req_key [] = {
    { "key", PV_STR, false, 40, 40 },
    { "node", PV_STR, false, 1, PROTO_MAX_TEXT },
};

//  broker.rekey: the old key is retired at this deadline at the latest
static const s_request_field_t s_req_broker_rekey [] = {
    { "deadline", PV_STR, false, 1, 64 },
};

static const s_request_field_t s_req_schedule [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
};
static const s_request_field_t s_req_schedule_add [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
    { "cron", PV_STR, false, 1, CRON_MAX_LEN },
    { "every", PV_STR, false, 1, 64 },
    { "tz", PV_STR, false, 1, CRON_TZ_MAX_LEN },
    { "job", PV_MAP, true, 0, 0 },
    { "overlap", PV_STR, false, 1, 16 },
    { "catch_up", PV_STR, false, 1, 16 },
    { "catch_up_window", PV_STR, false, 1, 64 },
};

static const s_request_field_t s_req_token_add [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
    { "role", PV_STR, true, 1, 16 },
};
static const s_request_field_t s_req_token_revoke [] = {
    { "name", PV_STR, true, 1, NAME_MAX_LEN },
};

static const s_request_field_t s_req_audit_list [] = {
    { "who", PV_STR, false, 1, 256 },
    { "request_type", PV_STR, false, 1, 64 },
    { "object", PV_STR, false, 1, 256 },
    { "outcome", PV_STR, false, 1, 64 },
    { "since", PV_INT, false, 0, INT64_MAX },
    { "before", PV_STR, false, 24, 24 },
    { "limit", PV_INT, false, 1, 1000 },
};

static const s_request_field_t s_req_cluster_switchover [] = {
    { "to", PV_STR, false, 1, NAME_MAX_LEN },
};

static const s_request_field_t s_req_notify_list [] = {
    { "status", PV_STR, false, 1, 16 },
    { "job", PV_STR, false, 1, PROTO_MAX_TEXT },
    { "limit", PV_INT, false, 1, 1000 },
};
static const s_request_field_t s_req_notify_retry [] = {
    { "delivery", PV_STR, true, 24, 24 },
};
#define S_REQ_SHA256 { "sha256", PV_STR, true, 64, 64 }
static const s_request_field_t s_req_blob_put [] = {
    S_REQ_SHA256,
    { "size", PV_INT, true, 0, PROTO_MAX_BLOB },
    { "offset", PV_INT, true, 0, PROTO_MAX_BLOB },
    { "data", PV_STR, true, 0, BASE64_LEN (PROTO_BLOB_CHUNK_BYTES) },
};
static const s_request_field_t s_req_blob [] = {
    S_REQ_SHA256,
};
#define S_REQUEST(type, fields) { type, fields, S_COUNT_OF (fields) }
#define S_REQUEST_BARE(type) { type, NULL, 0 }

static const s_request_t s_requests [] = {
    S_REQUEST ("job.submit", s_req_job_submit_run),
    S_REQUEST ("job.check", s_req_job_submit),
    S_REQUEST ("job.get", s_req_job),
    S_REQUEST ("job.progress", s_req_job),
    S_REQUEST ("job.watch", s_req_job_watch),
    S_REQUEST ("job.changes", s_req_job_changes),
    S_REQUEST ("job.list", s_req_job_list),
    S_REQUEST ("job.cancel", s_req_job_cancel),
    S_REQUEST ("job.events", s_req_job_events),
    S_REQUEST ("job.delete", s_req_job),
    S_REQUEST ("job.output", s_req_job_output),
    S_REQUEST ("job.output_events", s_req_job_output_events),
    S_REQUEST ("node.changes", s_req_job_changes),
    S_REQUEST ("node.list", s_req_node_list),
    S_REQUEST ("node.get", s_req_node),
    S_REQUEST_BARE ("status"),
    S_REQUEST ("node.drain", s_req_node),
    S_REQUEST ("node.resume", s_req_node),
    S_REQUEST_BARE ("broker.drain"),
    S_REQUEST_BARE ("broker.resume"),
    S_REQUEST_BARE ("key.list"),
    S_REQUEST_BARE ("relay.list"),
    S_REQUEST ("key.accept", s_req_key),
    S_REQUEST ("key.reject", s_req_key),
    S_REQUEST ("key.delete", s_req_key),
    S_REQUEST ("broker.rekey", s_req_broker_rekey),
    S_REQUEST_BARE ("broker.keys"),
    S_REQUEST ("job.retry", s_req_job_retry),
    S_REQUEST ("dlq.list", s_req_dlq_list),
    S_REQUEST ("dlq.get", s_req_dlq_entry),
    S_REQUEST ("dlq.retry", s_req_dlq_entry),
    S_REQUEST ("dlq.purge", s_req_dlq_purge),
    S_REQUEST_BARE ("queue.stats"),
    S_REQUEST ("node.workers", s_req_node),
    S_REQUEST ("node.history", s_req_node_history),
    S_REQUEST_BARE ("metrics.get"),
    S_REQUEST ("schedule.add", s_req_schedule_add),
    S_REQUEST_BARE ("schedule.list"),
    S_REQUEST ("schedule.get", s_req_schedule),
    S_REQUEST ("schedule.pause", s_req_schedule),
    S_REQUEST ("schedule.resume", s_req_schedule),
    S_REQUEST ("schedule.delete", s_req_schedule),
    S_REQUEST ("schedule.run", s_req_schedule),
    S_REQUEST ("token.add", s_req_token_add),
    S_REQUEST_BARE ("token.list"),
    S_REQUEST_BARE ("whoami"),
    S_REQUEST ("token.revoke", s_req_token_revoke),
    S_REQUEST ("audit.list", s_req_audit_list),
    S_REQUEST_BARE ("cluster.status"),
    S_REQUEST ("cluster.switchover", s_req_cluster_switchover),
    S_REQUEST ("notify.list", s_req_notify_list),
    S_REQUEST ("notify.retry", s_req_notify_retry),
    S_REQUEST ("blob.put", s_req_blob_put),
    S_REQUEST ("blob.stat", s_req_blob),
    S_REQUEST_BARE ("blob.list"),
    S_REQUEST ("blob.delete", s_req_blob),
};

const char *
proto_request_type_at (size_t index)
{
    return index < S_COUNT_OF (s_requests) ? s_requests [index].type : NULL;
}

//  Is VALUE a client request id: a string of 1..PROTO_MAX_REQUEST_ID
//  bytes without NUL?
static bool
s_request_id_valid (const pv_t *value)
{
    size_t len = pv_size (value);
    const char *text = pv_str (value, NULL);
    return pv_type (value) == PV_STR && len >= 1
           && len <= PROTO_MAX_REQUEST_ID && !memchr (text, 0, len);
}

static int
s_request_field_check (const pv_t *value, const s_request_field_t *field,
                       const char *type, char *why, size_t why_len)
{
    pv_type_t actual = pv_type (value);
    if (actual != field->type) {
        proto_format (why, why_len, "%s: %s: expected %s, got %s", type,
                      field->key, pv_type_name (field->type),
                      pv_type_name (actual));
        return -2;
    }
    if (actual == PV_INT) {
        int64_t number = 0;
        pv_get_int (value, &number);
        if (number < field->min || number > field->max) {
            proto_format (why, why_len, "%s: %s: %" PRId64 " is out of range %"
                          PRId64 "..%" PRId64, type, field->key, number,
                          field->min, field->max);
            return -2;
        }
    }
    if (actual == PV_STR) {
        size_t len = 0;
        const char *text = pv_str (value, &len);
        if ((int64_t) len < field->min || (int64_t) len > field->max) {
            proto_format (why, why_len, "%s: %s: length %zu is out of range %"
                          PRId64 "..%" PRId64, type, field->key, len,
                          field->min, field->max);
            return -2;
        }
        if (len > 0 && memchr (text, 0, len)) {
            proto_format (why, why_len, "%s: %s: contains a NUL byte", type,
                          field->key);
            return -2;
        }
    }
    return 0;
}

int
proto_request_decode (const void *data, size_t size, proto_request_t **req_p,
                      const char **code, char **id_p, char *why,
                      size_t why_len)
{
    assert (req_p);
    *req_p = NULL;
    if (id_p)
        *id_p = NULL;
    const char *error = PROTO_ERR_MALFORMED;
    char show [S_SHOW_MAX + 4];
    char *id = NULL;
    proto_request_t *req = NULL;
    pv_doc_t *doc = NULL;
    char reason [200];

    if (pv_doc_decode (data, size, &doc, reason, sizeof reason)) {
        proto_format (why, why_len, "malformed frame: %s", reason);
        goto failed;
    }
    const pv_t *root = pv_doc_root (doc);
    if (pv_type (root) != PV_MAP) {
        proto_format (why, why_len, "a request is a map, got %s",
                      pv_type_name (pv_type (root)));
        goto failed;
    }
    //  Take the id first, so that even a refusal can echo it
    const pv_t *id_value = pv_map_get (root, "id");
    if (s_request_id_valid (id_value)) {
        id = pv_strdup (id_value);
        if (!id) {
            error = PROTO_ERR_INTERNAL;
            proto_format (why, why_len, "out of memory");
            goto failed;
        }
    }
    const pv_t *version = pv_map_get (root, "v");
    int64_t number = 0;
    if (!version || pv_get_int (version, &number)
        || !proto_version_spoken (number)) {
        error = PROTO_ERR_VERSION;
        if (!version)
            proto_format (why, why_len, "the request has no version 'v'; this "
                          "broker speaks versions %d to %d", PROTO_VERSION_MIN,
                          PROTO_VERSION);
        else
        if (pv_type (version) != PV_INT)
            proto_format (why, why_len, "v: expected int, got %s; this broker "
                          "speaks versions %d to %d",
                          pv_type_name (pv_type (version)), PROTO_VERSION_MIN,
                          PROTO_VERSION);
        else
            proto_version_refusal (number, why, why_len);
        goto failed;
    }
    const pv_t *type = pv_map_get (root, "type");
    const s_request_t *request = NULL;
    for (size_t index = 0; index < S_COUNT_OF (s_requests) && !request;
         index++)
        if (pv_str_eq (type, s_requests [index].type))
            request = &s_requests [index];
    if (!request) {
        error = PROTO_ERR_UNKNOWN_TYPE;
        size_t len = 0;
        const char *text = pv_str (type, &len);
        if (!type)
            proto_format (why, why_len, "the request has no 'type'");
        else
        if (pv_type (type) != PV_STR)
            proto_format (why, why_len, "type: expected string, got %s",
                          pv_type_name (pv_type (type)));
        else
            proto_format (why, why_len, "unknown type '%s'",
                          proto_show (text, len, show));
        goto failed;
    }
    error = PROTO_ERR_BAD_REQUEST;
    if (!id) {
        proto_format (why, why_len, "id: required, a string of 1 to %d bytes",
                      PROTO_MAX_REQUEST_ID);
        goto failed;
    }
    for (size_t index = 0; index < pv_size (root); index++) {
        const pv_t *key = pv_map_key_at (root, index);
        bool known = pv_str_eq (key, "v") || pv_str_eq (key, "type")
                     || pv_str_eq (key, "id");
        for (size_t which = 0; which < request->count && !known; which++)
            known = pv_str_eq (key, request->fields [which].key);
        if (!known) {
            size_t len = 0;
            const char *text = pv_str (key, &len);
            proto_format (why, why_len, "%s: unknown key '%s'", request->type,
                          proto_show (text, len, show));
            goto failed;
        }
    }
    for (size_t which = 0; which < request->count; which++) {
        const s_request_field_t *field = &request->fields [which];
        const pv_t *value = pv_map_get (root, field->key);
        if (!value) {
            if (field->required) {
                proto_format (why, why_len, "%s: %s: required", request->type,
                              field->key);
                goto failed;
            }
            continue;
        }
        if (s_request_field_check (value, field, request->type, why,
                                   why_len))
            goto failed;
    }
    req = calloc (1, sizeof *req);
    if (!req || !(req->type = strdup (request->type))) {
        error = PROTO_ERR_INTERNAL;
        proto_format (why, why_len, "out of memory");
        goto failed;
    }
    req->id = id;
    req->version = (int) number;
    req->body = root;
    req->doc = doc;
    *req_p = req;
    if (code)
        *code = NULL;
    return PROTO_OK;

failed:
    if (req)
        free (req->type);
    free (req);
    pv_doc_destroy (&doc);
    if (code)
        *code = error;
    if (id_p)
        *id_p = id;
    else
        free (id);
    return PROTO_EMALFORMED;
}

void
proto_request_destroy (proto_request_t **req_p)
{
    assert (req_p);
    proto_request_t *req = *req_p;
    if (!req)
        return;
    free (req->type);
    free (req->id);
    pv_doc_destroy (&req->doc);
    free (req);
    *req_p = NULL;
}

void
proto_request_begin (pw_t *writer, const char *type, const char *id,
                     size_t field_count)
{
    assert (writer);
    pw_map (writer, 3 + field_count);
    pw_str (writer, "v");
    pw_int (writer, PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, type);
    pw_str (writer, "id");
    pw_str (writer, id);
}

void
proto_reply_ok_begin (pw_t *writer, const char *id)
{
    assert (writer);
    pw_map (writer, 4);
    pw_str (writer, "v");
    pw_int (writer, PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, "ok");
    pw_str (writer, "id");
    pw_str (writer, id);
    pw_str (writer, "data");
}

void
proto_reply_error (pw_t *writer, const char *id, const char *code,
                   const char *message, char *const *details,
                   size_t detail_count)
{
    assert (writer);
    bool with_details = details && detail_count > 0;
    pw_map (writer, with_details ? 6 : 5);
    pw_str (writer, "v");
    pw_int (writer, PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, "error");
    pw_str (writer, "id");
    pw_str (writer, id);
    pw_str (writer, "code");
    pw_str (writer, code ? code : PROTO_ERR_INTERNAL);
    pw_str (writer, "message");
    pw_str (writer, message ? message : "");
    if (with_details) {
        pw_str (writer, "details");
        pw_array (writer, detail_count);
        for (size_t index = 0; index < detail_count; index++)
            pw_str (writer, details [index] ? details [index] : "");
    }
}

int
proto_reply_version (const void *data, size_t size)
{
    size_t at = 0, len = 0;
    if (!data || mpscan_map_find (data, size, "v", true, &at, &len) != 0)
        return PROTO_VERSION_MIN;
    const uint8_t *value = (const uint8_t *) data + at;
    //  A positive fixint holds every version spoken; a wider positive int
    //  is newer than all of them, anything else older
    if (len == 1 && value [0] <= 0x7f)
        return proto_version_for (value [0]);
    return len >= 1 && value [0] >= 0xcc && value [0] <= 0xcf
           ? PROTO_VERSION : PROTO_VERSION_MIN;
}

int
proto_reply_set_version (void *reply, size_t size, int version)
{
    //  {v: N, ...}: a fixmap or map16/32 header, the fixstr "v", a fixint
    uint8_t *bytes = (uint8_t *) reply;
    size_t at = 0;
    if (!bytes || size < 4 || version < 0 || version > 0x7f)
        return -1;
    if (bytes [0] >= 0x80 && bytes [0] <= 0x8f)
        at = 1;
    else
    if (bytes [0] == 0xde)
        at = 3;
    else
    if (bytes [0] == 0xdf)
        at = 5;
    else
        return -1;
    if (size < at + 3 || bytes [at] != 0xa1 || bytes [at + 1] != 'v'
        || bytes [at + 2] > 0x7f)
        return -1;
    bytes [at + 2] = (uint8_t) version;
    return 0;
}
