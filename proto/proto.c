/*  =========================================================================
    proto - grid's wire messages (protocol version 1)

    Each message type is a schema: a table of fields, each naming its wire
    key, its storage in proto_msg_t (by offset), its shape and its bounds.
    One generic walker decodes a map against a schema (decode.c), another
    checks and writes a struct against it, so decode and encode apply the
    very same rules and a new field is one table line. Backend specs in hello are
    arrays of structs with their own schemas.
    =========================================================================
*/
#include "proto_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cron.h"
#include "job.h"
#include "names.h"
#include "trace.h"

//  Formats into BUF when there is one (reasons, paths); output that does
//  not fit is cut.
void
proto_format (char *buf, size_t buf_len, const char *format, ...)
{
    if (!buf || buf_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (buf, buf_len, format, args);
    va_end (args);
}

//  Writes PATH into BUF, cut to BUF_LEN - 1 bytes and NUL-terminated;
//  returns its length.
static size_t
s_path_write (const s_path_t *path, char *buf, size_t buf_len)
{
    size_t used = path->up ? s_path_write (path->up, buf, buf_len) : 0;
    char text [S_SHOW_MAX + 24];
    const char *part = path->key;
    size_t part_len = path->key_len;
    if (!part) {
        snprintf (text, sizeof text, "[%zu]", path->index);
        part = text;
        part_len = strlen (text);
    }
    else {
        if (path->from_wire) {
            part = proto_show (path->key, path->key_len, text);
            part_len = strlen (part);
        }
        if (path->up && used + 1 < buf_len)
            buf [used++] = '.';
    }
    size_t take = part_len < buf_len - 1 - used ? part_len
                                                : buf_len - 1 - used;
    memcpy (buf + used, part, take);
    used += take;
    buf [used] = 0;
    return used;
}

//  Writes "PATH: " and then FORMAT into WHY.
void
proto_fail (char *why, size_t why_len, const s_path_t *path, const char *format,
            ...)
{
    if (!why || why_len == 0)
        return;
    char where [S_PATH_MAX];
    s_path_write (path, where, sizeof where);
    char what [512];
    va_list args;
    va_start (args, format);
    vsnprintf (what, sizeof what, format, args);
    va_end (args);
    proto_format (why, why_len, "%s: %s", where, what);
}


//  ---------------------------------------------------------------------
//  String rules

static const char *s_statuses [] = {
    "success", "failed", "timeout", "cancelled", "interrupted", "refused"
};
#define S_STATUS_COUNT (sizeof s_statuses / sizeof s_statuses [0])

//  Checks TEXT (LEN bytes, NUL-terminated) against RULE. Returns 0, or -2
//  with "PATH: problem" in WHY.
int
proto_text_check (s_text_t rule, const char *text, size_t len,
                  const s_path_t *path, char *why, size_t why_len)
{
    char show [S_SHOW_MAX + 4];
    if (len > proto_text_max (rule)) {
        proto_fail (why, why_len, path, "longer than %zu bytes",
                    proto_text_max (rule));
        return -2;
    }
    switch (rule) {
        case S_TEXT_NAME:
            if (!name_valid (text)) {
                proto_fail (why, why_len, path, "invalid name '%s' (letters, "
                            "digits, '_' and '-', 1 to %d)",
                            proto_show (text, len, show), NAME_MAX_LEN);
                return -2;
            }
            break;
        case S_TEXT_LABEL:
            if (!name_label_value_valid (text)) {
                proto_fail (why, why_len, path, "invalid label value '%s'",
                            proto_show (text, len, show));
                return -2;
            }
            break;
        case S_TEXT_JOB:
            if (!job_id_valid (text)) {
                proto_fail (why, why_len, path, "invalid job id '%s'",
                            proto_show (text, len, show));
                return -2;
            }
            break;
        case S_TEXT_STATUS: {
            for (size_t index = 0; index < S_STATUS_COUNT; index++)
                if (strcmp (text, s_statuses [index]) == 0)
                    return 0;
            proto_fail (why, why_len, path, "unknown status '%s' (success, "
                        "failed, timeout, cancelled, interrupted, refused)",
                        proto_show (text, len, show));
            return -2;
        }
        case S_TEXT_TRACE: {
            char reason [160];
            trace_ctx_t ctx;
            if (trace_parse (text, &ctx, reason, sizeof reason) != 0) {
                proto_fail (why, why_len, path, "%s", reason);
                return -2;
            }
            break;
        }
        case S_TEXT_FACT:
            if (!fact_value_valid (text)) {
                proto_fail (why, why_len, path, "invalid fact value '%s' (1 "
                            "to %d bytes, no control bytes)",
                            proto_show (text, len, show), FACT_MAX_VALUE_LEN);
                return -2;
            }
            break;
        case S_TEXT_STREAM:
            if (strcmp (text, "stdout") != 0 && strcmp (text, "stderr") != 0) {
                proto_fail (why, why_len, path, "unknown stream '%s' (stdout, "
                            "stderr)", proto_show (text, len, show));
                return -2;
            }
            break;
        default:
            break;
    }
    return 0;
}



//  ---------------------------------------------------------------------
//  Schemas

//  A field's wire key, a string literal, and its length
#define S_KEY(text) .key = text, .key_len = sizeof (text) - 1

#define S_TEXT(type, member, rule) \
    { S_KEY (#member), .kind = S_STR, .text = rule, .required = true, \
      .offset = offsetof (type, member) }
#define S_TEXT_OPT(type, key_, member, rule) \
    { S_KEY (key_), .kind = S_STR, .text = rule, .required = false, \
      .offset = offsetof (type, member) }
#define S_INT(type, member, kind_, min_, max_) \
    { S_KEY (#member), .kind = kind_, .required = true, \
      .offset = offsetof (type, member), .min = min_, .max = max_ }
#define S_FLAG(type, member) \
    { S_KEY (#member), .kind = S_BOOL, .required = true, \
      .offset = offsetof (type, member) }
#define S_LIST_OF(type, member, count, rule, required_, min_, max_) \
    { S_KEY (#member), .kind = S_LIST, .text = rule, .required = required_, \
      .offset = offsetof (type, member), \
      .count_offset = offsetof (type, count), .min = min_, .max = max_ }
#define S_MAP_OF(type, member, count, key_rule, rule, required_) \
    { S_KEY (#member), .kind = S_MAP, .text = rule, .key_text = key_rule, \
      .required = required_, .offset = offsetof (type, member), \
      .count_offset = offsetof (type, count), .max = PROTO_MAX_LIST }
#define S_STRUCTS_OF(type, member, count, schema_) \
    { S_KEY (#member), .kind = S_STRUCTS, .required = true, \
      .offset = offsetof (type, member), \
      .count_offset = offsetof (type, count), .max = PROTO_MAX_LIST, \
      .schema = &schema_ }

//  hello: backends [ {name, actions: [ {name, kind, help, params: [...]} ]} ]

//  An int param's range is in force when min_value < max_value; only then
//  are "min" and "max" sent, and they always travel together.
static bool
s_param_has_range (const void *item)
{
    const proto_param_spec_t *param = (const proto_param_spec_t *) item;
    return param->min_value < param->max_value;
}

//  Where "min" and "max" sit in s_param_fields, for s_param_check
#define S_PARAM_MIN 6
#define S_PARAM_MAX 7

static int
s_param_check (const void *item, const pv_t *const *values,
               const s_path_t *path, char *why, size_t why_len)
{
    const proto_param_spec_t *param = (const proto_param_spec_t *) item;
    bool has_min = values [S_PARAM_MIN] != NULL;
    bool has_max = values [S_PARAM_MAX] != NULL;
    if (has_min != has_max) {
        proto_fail (why, why_len, path, "min and max come together");
        return -2;
    }
    if (has_min && param->min_value >= param->max_value) {
        proto_fail (why, why_len, path, "min must be below max");
        return -2;
    }
    return 0;
}

static const s_field_t s_param_fields [] = {
    S_TEXT (proto_param_spec_t, name, S_TEXT_NAME),
    S_FLAG (proto_param_spec_t, required),
    S_TEXT (proto_param_spec_t, type, S_TEXT_SHORT),
    S_TEXT_OPT (proto_param_spec_t, "pattern", pattern, S_TEXT_SHORT),
    S_TEXT_OPT (proto_param_spec_t, "default", default_value, S_TEXT_SHORT),
    S_TEXT (proto_param_spec_t, help, S_TEXT_SHORT),
    [S_PARAM_MIN] = { S_KEY ("min"), .kind = S_I64, .required = false,
      .offset = offsetof (proto_param_spec_t, min_value),
      .min = INT64_MIN, .max = INT64_MAX, .present = s_param_has_range },
    [S_PARAM_MAX] = { S_KEY ("max"), .kind = S_I64, .required = false,
      .offset = offsetof (proto_param_spec_t, max_value),
      .min = INT64_MIN, .max = INT64_MAX, .present = s_param_has_range },
};
_Static_assert (S_COUNT_OF (s_param_fields) == S_PARAM_MAX + 1,
                "min and max are the last param fields");
static const s_schema_t s_param_schema = {
    s_param_fields, S_COUNT_OF (s_param_fields), sizeof (proto_param_spec_t),
    offsetof (proto_param_spec_t, name), s_param_check
};

//  "idempotent" travels only when true.
static bool
s_action_is_idempotent (const void *item)
{
    return ((const proto_action_spec_t *) item)->idempotent;
}

static const s_field_t s_action_fields [] = {
    S_TEXT (proto_action_spec_t, name, S_TEXT_NAME),
    { S_KEY ("kind"), .kind = S_KIND, .required = true,
      .offset = offsetof (proto_action_spec_t, modify) },
    S_TEXT (proto_action_spec_t, help, S_TEXT_SHORT),
    S_STRUCTS_OF (proto_action_spec_t, params, param_count, s_param_schema),
    { S_KEY ("idempotent"), .kind = S_BOOL, .required = false,
      .offset = offsetof (proto_action_spec_t, idempotent),
      .present = s_action_is_idempotent },
};
static const s_schema_t s_action_schema = {
    s_action_fields, S_COUNT_OF (s_action_fields),
    sizeof (proto_action_spec_t), offsetof (proto_action_spec_t, name), NULL
};

static const s_field_t s_backend_fields [] = {
    S_TEXT (proto_backend_spec_t, name, S_TEXT_NAME),
    S_STRUCTS_OF (proto_backend_spec_t, actions, action_count,
                  s_action_schema),
    S_TEXT_OPT (proto_backend_spec_t, "version", version, S_TEXT_SHORT),
};
static const s_schema_t s_backend_schema = {
    s_backend_fields, S_COUNT_OF (s_backend_fields),
    sizeof (proto_backend_spec_t), offsetof (proto_backend_spec_t, name),
    NULL
};

//  Fields shared by several messages
#define S_NODE S_TEXT (proto_msg_t, node, S_TEXT_NAME)
#define S_JOB S_TEXT (proto_msg_t, job, S_TEXT_JOB)
#define S_STEP S_INT (proto_msg_t, step, S_U32, 0, JOB_MAX_STEPS - 1)
#define S_ATTEMPT S_INT (proto_msg_t, attempt, S_U32, 1, PROTO_MAX_ATTEMPT)
#define S_NODES S_LIST_OF (proto_msg_t, nodes, node_count, S_TEXT_NAME, \
                           false, 1, PROTO_MAX_NODES)

static const s_field_t s_hello_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, hostname, S_TEXT_SHORT),
    S_LIST_OF (proto_msg_t, groups, group_count, S_TEXT_NAME, true, 0,
               PROTO_MAX_LIST),
    S_MAP_OF (proto_msg_t, labels, label_count, S_TEXT_NAME, S_TEXT_LABEL,
              true),
    S_STRUCTS_OF (proto_msg_t, backends, backend_count, s_backend_schema),
    S_TEXT (proto_msg_t, version, S_TEXT_SHORT),
    S_INT (proto_msg_t, concurrency, S_U32, 1, PROTO_MAX_CONCURRENCY),
    S_TEXT_OPT (proto_msg_t, "instance", instance, S_TEXT_NAME),
    S_LIST_OF (proto_msg_t, features, feature_count, S_TEXT_NAME, false, 1,
               PROTO_MAX_FEATURES),
};

static const s_field_t s_heartbeat_fields [] = {
    S_NODE,
    S_INT (proto_msg_t, running, S_U32, 0, UINT32_MAX),
    S_INT (proto_msg_t, queued, S_U32, 0, UINT32_MAX),
    //  A relay's own heartbeat only: what it asks the broker to grant
    S_LIST_OF (proto_msg_t, features, feature_count, S_TEXT_NAME, false, 1,
               PROTO_MAX_FEATURES),
};

//  ack and started
static const s_field_t s_progress_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
};

//  Optional counts are sent when not 0
#define S_COUNT_PRESENT(member) \
    static bool s_has_##member (const void *item) \
    { return ((const proto_msg_t *) item)->member > 0; }
S_COUNT_PRESENT (output_size)
S_COUNT_PRESENT (error_size)
S_COUNT_PRESENT (output_dropped)
S_COUNT_PRESENT (error_dropped)
S_COUNT_PRESENT (max_output)
S_COUNT_PRESENT (epoch)
#define S_COUNT_OPT(member, min_, max_) \
    { S_KEY (#member), .kind = S_U64, .required = false, \
      .offset = offsetof (proto_msg_t, member), .min = min_, .max = max_, \
      .present = s_has_##member }
//  The broker's leadership epoch: only to an agent granted the epoch
//  feature, and only from a cluster's active (0, "no cluster", is not
//  written)
#define S_EPOCH S_COUNT_OPT (epoch, 1, INT64_MAX)

static const s_field_t s_result_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, status, S_TEXT_STATUS),
    S_TEXT (proto_msg_t, output, S_TEXT_OUTPUT),
    S_TEXT (proto_msg_t, error, S_TEXT_OUTPUT),
    S_INT (proto_msg_t, exit_code, S_I32, INT32_MIN, INT32_MAX),
    S_INT (proto_msg_t, duration_ms, S_U64, 0, INT64_MAX),
    S_FLAG (proto_msg_t, truncated),
    { S_KEY ("data"), .kind = S_MAP, .text = S_TEXT_SHORT,
      .key_text = S_TEXT_SHORT, .required = false,
      .offset = offsetof (proto_msg_t, data),
      .count_offset = offsetof (proto_msg_t, data_count),
      .max = PROTO_MAX_LIST, .numbers = true },
    S_COUNT_OPT (output_size, 1, PROTO_MAX_STREAM),
    S_COUNT_OPT (error_size, 1, PROTO_MAX_STREAM),
    S_COUNT_OPT (output_dropped, 1, INT64_MAX),
    S_COUNT_OPT (error_dropped, 1, INT64_MAX),
    //  Only to a broker that granted the trace feature
    S_TEXT_OPT (proto_msg_t, "traceparent", traceparent, S_TEXT_TRACE),
};

//  A result's dropped counts come with the size of what was kept
static int
s_result_check (const void *item, const pv_t *const *values,
                const s_path_t *path, char *why, size_t why_len)
{
    const proto_msg_t *msg = (const proto_msg_t *) item;
    if ((msg->output_dropped && !msg->output_size)
        || (msg->error_dropped && !msg->error_size)) {
        proto_fail (why, why_len, path, "a dropped count needs its stream's "
                    "size");
        return -2;
    }
    return 0;
}

static const s_field_t s_output_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, stream, S_TEXT_STREAM),
    S_INT (proto_msg_t, offset, S_U64, 0, PROTO_MAX_STREAM - 1),
    { S_KEY ("data"), .kind = S_BIN, .required = true,
      .offset = offsetof (proto_msg_t, chunk),
      .count_offset = offsetof (proto_msg_t, chunk_len), .min = 1,
      .max = PROTO_MAX_CHUNK },
    S_INT (proto_msg_t, size, S_U64, 1, PROTO_MAX_STREAM),
};

//  A piece lies inside its stream
static int
s_output_check (const void *item, const pv_t *const *values,
                const s_path_t *path, char *why, size_t why_len)
{
    const proto_msg_t *msg = (const proto_msg_t *) item;
    if (msg->offset + msg->chunk_len > msg->size) {
        proto_fail (why, why_len, path, "offset %" PRIu64 " + %zu bytes is "
                    "past the stream's size %" PRIu64, msg->offset,
                    msg->chunk_len, msg->size);
        return -2;
    }
    return 0;
}

//  An output_acks entry's stream and offset keep output_ack's rules.
static bool
s_ack_stream_valid (const proto_ack_t *ack)
{
    return ack->stream
           && (strcmp (ack->stream, "stdout") == 0
               || strcmp (ack->stream, "stderr") == 0)
           && ack->offset <= (uint64_t) PROTO_MAX_STREAM - 1;
}

static const s_field_t s_output_ack_fields [] = {
    S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, stream, S_TEXT_STREAM),
    S_INT (proto_msg_t, offset, S_U64, 0, PROTO_MAX_STREAM - 1),
    S_EPOCH,
};

static const s_field_t s_bye_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, reason, S_TEXT_SHORT),
};

static const s_field_t s_welcome_fields [] = {
    S_NODE,
    S_INT (proto_msg_t, heartbeat_ms, S_U32, 1, PROTO_MAX_HEARTBEAT_MS),
    S_COUNT_OPT (max_output, 1, PROTO_MAX_STREAM),
    S_LIST_OF (proto_msg_t, features, feature_count, S_TEXT_NAME, false, 1,
               PROTO_MAX_FEATURES),
    S_EPOCH,
};

//  An entry of a results: a result's fields but its node (s_result_fields
//  starts with S_NODE), under the same rules
static const s_schema_t s_result_entry_schema = {
    s_result_fields + 1, S_COUNT_OF (s_result_fields) - 1,
    sizeof (proto_msg_t), 0, s_result_check
};

static const s_field_t s_results_fields [] = {
    S_NODE,
    { S_KEY ("results"), .kind = S_RESULTS, .required = true,
      .offset = offsetof (proto_msg_t, results),
      .count_offset = offsetof (proto_msg_t, result_count), .min = 1,
      .max = PROTO_MAX_RESULTS, .schema = &s_result_entry_schema },
};

static const s_field_t s_facts_fields [] = {
    S_NODE,
    { S_KEY ("facts"), .kind = S_MAP, .text = S_TEXT_FACT,
      .key_text = S_TEXT_NAME, .required = true,
      .offset = offsetof (proto_msg_t, facts),
      .count_offset = offsetof (proto_msg_t, fact_count),
      .max = FACT_MAX_COUNT },
};

static const s_field_t s_result_ack_fields [] = {
    S_JOB, S_STEP, S_ATTEMPT, S_EPOCH,
};

static const s_field_t s_result_acks_fields [] = {
    { S_KEY ("acks"), .kind = S_ACKS, .required = true,
      .offset = offsetof (proto_msg_t, acks),
      .count_offset = offsetof (proto_msg_t, ack_count), .min = 1,
      .max = PROTO_MAX_ACKS },
    S_EPOCH,
};

//  Entries of five: [job, step, attempt, stream, offset]
static const s_field_t s_output_acks_fields [] = {
    { S_KEY ("acks"), .kind = S_ACKS, .text = S_TEXT_STREAM,
      .required = true, .offset = offsetof (proto_msg_t, acks),
      .count_offset = offsetof (proto_msg_t, ack_count), .min = 1,
      .max = PROTO_MAX_ACKS },
    S_EPOCH,
};

//  "parallel" is written only when true (steps of a DAG job)
static bool
s_command_parallel (const void *item)
{
    return ((const proto_msg_t *) item)->parallel;
}

//  "check" is written only when true (a dry run's commands)
static bool
s_command_check (const void *item)
{
    return ((const proto_msg_t *) item)->check;
}

static const s_field_t s_command_fields [] = {
    S_JOB, S_STEP, S_ATTEMPT,
    S_TEXT (proto_msg_t, backend, S_TEXT_NAME),
    S_TEXT (proto_msg_t, action, S_TEXT_NAME),
    S_MAP_OF (proto_msg_t, params, param_count, S_TEXT_NAME, S_TEXT_PARAM,
              true),
    S_INT (proto_msg_t, timeout_ms, S_U64, 0, INT64_MAX),
    S_NODES,
    { S_KEY ("parallel"), .kind = S_BOOL, .required = false,
      .offset = offsetof (proto_msg_t, parallel),
      .present = s_command_parallel },
    //  Only to agents that announced the trace feature
    S_TEXT_OPT (proto_msg_t, "traceparent", traceparent, S_TEXT_TRACE),
    //  Only to agents that announced the check feature
    { S_KEY ("check"), .kind = S_BOOL, .required = false,
      .offset = offsetof (proto_msg_t, check),
      .present = s_command_check },
    S_EPOCH,
};

//  A cancel that names one attempt (a reclaim) carries step and attempt;
//  without them it stops the whole job's work
static bool
s_cancel_targeted (const void *item)
{
    return ((const proto_msg_t *) item)->attempt > 0;
}

static const s_field_t s_cancel_fields [] = {
    S_JOB,
    S_TEXT (proto_msg_t, reason, S_TEXT_SHORT),
    S_NODES,
    { S_KEY ("step"), .kind = S_U32, .required = false,
      .offset = offsetof (proto_msg_t, step), .min = 0,
      .max = JOB_MAX_STEPS - 1, .present = s_cancel_targeted },
    { S_KEY ("attempt"), .kind = S_U32, .required = false,
      .offset = offsetof (proto_msg_t, attempt), .min = 1,
      .max = PROTO_MAX_ATTEMPT, .present = s_cancel_targeted },
    S_EPOCH,
};

//  progress: how far a running attempt has come
static const s_field_t s_task_progress_fields [] = {
    S_NODE, S_JOB, S_STEP, S_ATTEMPT,
    S_INT (proto_msg_t, percent, S_I32, -1, 100),
    S_TEXT_OPT (proto_msg_t, "kind", kind, S_TEXT_NAME),
    S_TEXT_OPT (proto_msg_t, "message", message, S_TEXT_PROGRESS),
};

//  error: endpoint and epoch only in a redirect (PROTO_FEATURE_REDIRECT)
static const s_field_t s_error_fields [] = {
    S_TEXT (proto_msg_t, code, S_TEXT_SHORT),
    S_TEXT (proto_msg_t, message, S_TEXT_SHORT),
    S_TEXT_OPT (proto_msg_t, "endpoint", endpoint, S_TEXT_SHORT),
    S_EPOCH,
};

//  rekey: the next key of the node (PROTO_FEATURE_REKEY)
static const s_field_t s_rekey_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, key, S_TEXT_SHORT),
};

//  rekey_ack: "accepted", "pending" or "refused", and why
static const s_field_t s_rekey_ack_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, key, S_TEXT_SHORT),
    S_TEXT (proto_msg_t, status, S_TEXT_NAME),
    S_TEXT_OPT (proto_msg_t, "message", message, S_TEXT_SHORT),
};

//  blob_get: the piece of a blob at offset (PROTO_FEATURE_BLOBS); it
//  acknowledges every piece before it
static const s_field_t s_blob_get_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, sha256, S_TEXT_NAME),
    S_INT (proto_msg_t, offset, S_U64, 0, PROTO_MAX_BLOB),
};

//  blob_chunk: the piece at offset (at most PROTO_BLOB_CHUNK_BYTES bytes), or,
//  with error, none and why
static const s_field_t s_blob_chunk_fields [] = {
    S_TEXT (proto_msg_t, sha256, S_TEXT_NAME),
    S_INT (proto_msg_t, offset, S_U64, 0, PROTO_MAX_BLOB),
    S_INT (proto_msg_t, size, S_U64, 0, PROTO_MAX_BLOB),
    { S_KEY ("data"), .kind = S_BIN, .required = true,
      .offset = offsetof (proto_msg_t, chunk),
      .count_offset = offsetof (proto_msg_t, chunk_len), .min = 0,
      .max = PROTO_BLOB_CHUNK_BYTES },
    S_TEXT_OPT (proto_msg_t, "error", error, S_TEXT_SHORT),
};

//  broker_key: the broker's next public key (PROTO_FEATURE_BROKER_REKEY);
//  broker_key_ack: the agent keeps it
static const s_field_t s_broker_key_fields [] = {
    S_NODE,
    S_TEXT (proto_msg_t, key, S_TEXT_SHORT),
};

#define S_MESSAGE(type, name, fields) \
    { type, name, sizeof (name) - 1, \
      { fields, S_COUNT_OF (fields), sizeof (proto_msg_t), 0, NULL } }
#define S_MESSAGE_CHECKED(type, name, fields, check) \
    { type, name, sizeof (name) - 1, \
      { fields, S_COUNT_OF (fields), sizeof (proto_msg_t), 0, check } }

const s_message_t proto_messages [] = {
    S_MESSAGE (PROTO_HELLO, "hello", s_hello_fields),
    S_MESSAGE (PROTO_HEARTBEAT, "heartbeat", s_heartbeat_fields),
    S_MESSAGE (PROTO_ACK, "ack", s_progress_fields),
    S_MESSAGE (PROTO_STARTED, "started", s_progress_fields),
    S_MESSAGE_CHECKED (PROTO_RESULT, "result", s_result_fields,
                       s_result_check),
    S_MESSAGE (PROTO_BYE, "bye", s_bye_fields),
    S_MESSAGE (PROTO_WELCOME, "welcome", s_welcome_fields),
    S_MESSAGE (PROTO_RESULT_ACK, "result_ack", s_result_ack_fields),
    S_MESSAGE (PROTO_COMMAND, "command", s_command_fields),
    S_MESSAGE (PROTO_CANCEL, "cancel", s_cancel_fields),
    S_MESSAGE (PROTO_ERROR, "error", s_error_fields),
    S_MESSAGE (PROTO_PROGRESS, "progress", s_task_progress_fields),
    S_MESSAGE_CHECKED (PROTO_OUTPUT, "output", s_output_fields,
                       s_output_check),
    S_MESSAGE (PROTO_OUTPUT_ACK, "output_ack", s_output_ack_fields),
    S_MESSAGE (PROTO_RESULT_ACKS, "result_acks", s_result_acks_fields),
    S_MESSAGE (PROTO_RESULTS, "results", s_results_fields),
    S_MESSAGE (PROTO_FACTS, "facts", s_facts_fields),
    S_MESSAGE (PROTO_REKEY, "rekey", s_rekey_fields),
    S_MESSAGE (PROTO_REKEY_ACK, "rekey_ack", s_rekey_ack_fields),
    S_MESSAGE (PROTO_OUTPUT_ACKS, "output_acks", s_output_acks_fields),
    S_MESSAGE (PROTO_BLOB_GET, "blob_get", s_blob_get_fields),
    S_MESSAGE (PROTO_BLOB_CHUNK, "blob_chunk", s_blob_chunk_fields),
    S_MESSAGE (PROTO_BROKER_KEY, "broker_key", s_broker_key_fields),
    S_MESSAGE (PROTO_BROKER_KEY_ACK, "broker_key_ack", s_broker_key_fields),
};
_Static_assert (S_COUNT_OF (proto_messages) == PROTO_MESSAGE_COUNT,
                "PROTO_MESSAGE_COUNT counts proto_messages");

static const s_message_t *
s_message_for (proto_type_t type)
{
    for (size_t index = 0; index < S_COUNT_OF (proto_messages); index++)
        if (proto_messages [index].type == type)
            return &proto_messages [index];
    return NULL;
}


//  ---------------------------------------------------------------------
//  Freeing

static void s_free_struct (void *item, const s_schema_t *schema);

static void
s_free_strings (char **list, size_t count)
{
    for (size_t index = 0; list && index < count; index++)
        free (list [index]);
    free (list);
}

static void
s_free_pairs (proto_kv_t *pairs, size_t count)
{
    for (size_t index = 0; pairs && index < count; index++) {
        free (pairs [index].key);
        free (pairs [index].value);
    }
    free (pairs);
}

static void
s_free_field (void *item, const s_field_t *field)
{
    size_t *count = S_MEMBER (item, field->count_offset, size_t);
    switch (field->kind) {
        case S_STR: {
            char **text = S_MEMBER (item, field->offset, char *);
            free (*text);
            *text = NULL;
            break;
        }
        case S_LIST: {
            char ***list = S_MEMBER (item, field->offset, char **);
            s_free_strings (*list, *count);
            *list = NULL;
            *count = 0;
            break;
        }
        case S_MAP: {
            proto_kv_t **pairs = S_MEMBER (item, field->offset, proto_kv_t *);
            s_free_pairs (*pairs, *count);
            *pairs = NULL;
            *count = 0;
            break;
        }
        case S_BIN:
        case S_ACKS: {
            void **block = S_MEMBER (item, field->offset, void *);
            free (*block);
            *block = NULL;
            *count = 0;
            break;
        }
        case S_RESULTS: {
            proto_msg_t **entries = S_MEMBER (item, field->offset,
                                              proto_msg_t *);
            for (size_t index = 0; *entries && index < *count; index++)
                proto_msg_free_members (&(*entries) [index]);
            free (*entries);
            *entries = NULL;
            *count = 0;
            break;
        }
        case S_STRUCTS: {
            char **array = S_MEMBER (item, field->offset, char *);
            for (size_t index = 0; *array && index < *count; index++)
                s_free_struct (*array + index * field->schema->size,
                               field->schema);
            free (*array);
            *array = NULL;
            *count = 0;
            break;
        }
        default:
            break;
    }
}

static void
s_free_struct (void *item, const s_schema_t *schema)
{
    for (size_t index = 0; index < schema->count; index++)
        s_free_field (item, &schema->fields [index]);
}

proto_msg_t *
proto_msg_new (proto_type_t type)
{
    proto_msg_t *self = calloc (1, sizeof *self);
    if (self)
        self->type = type;
    return self;
}

void
proto_msg_destroy (proto_msg_t **self_p)
{
    assert (self_p);
    proto_msg_t *self = *self_p;
    if (!self)
        return;
    if (self->packed) {
        s_chunk_t *chunk = (s_chunk_t *) self->chunks;
        while (chunk) {
            s_chunk_t *next = chunk->next;
            free (chunk);
            chunk = next;
        }
        free (self);
        *self_p = NULL;
        return;
    }
    proto_msg_free_members (self);
    free (self);
    *self_p = NULL;
}

//  Frees what an unpacked message owns (not the message itself).
void
proto_msg_free_members (proto_msg_t *self)
{
    //  Free every member whatever the type: a caller may have set fields
    //  that its message type does not use
    for (size_t index = 0; self->results && index < self->result_count;
         index++)
        proto_msg_free_members (&self->results [index]);
    free (self->results);
    free (self->node);
    free (self->hostname);
    s_free_strings (self->groups, self->group_count);
    s_free_pairs (self->labels, self->label_count);
    for (size_t index = 0; self->backends && index < self->backend_count;
         index++)
        s_free_struct (&self->backends [index], &s_backend_schema);
    free (self->backends);
    free (self->version);
    free (self->instance);
    s_free_strings (self->features, self->feature_count);
    free ((void *) self->acks);
    free (self->job);
    free (self->status);
    free (self->output);
    free (self->error);
    s_free_pairs (self->data, self->data_count);
    s_free_pairs (self->facts, self->fact_count);
    free (self->sha256);
    free (self->backend);
    free (self->action);
    free (self->traceparent);
    s_free_pairs (self->params, self->param_count);
    s_free_strings (self->nodes, self->node_count);
    free (self->reason);
    free (self->code);
    free (self->message);
    free (self->key);
    free (self->endpoint);
    free (self->kind);
    free (self->stream);
    free (self->chunk);
}

const char *
proto_type_name (proto_type_t type)
{
    const s_message_t *message = s_message_for (type);
    return message ? message->name : "?";
}


//  ---------------------------------------------------------------------
//  Uniqueness (list items, map keys on encode, struct names)

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(const char *const *) a, *(const char *const *) b);
}

//  Up to this many strings are compared pairwise, without a sort
#define S_SMALL_UNIQUE 8

//  String INDEX of an array of structs, at BASE + INDEX * STRIDE + OFFSET.
static const char *
s_string_at (const void *base, size_t index, size_t stride, size_t offset)
{
    return *(char *const *) ((const char *) base + index * stride + offset);
}

//  Returns the first string, in strcmp order, that occurs twice among
//  COUNT strings, or NULL. Each string is found at BASE + index * STRIDE +
//  OFFSET.
static const char *
s_duplicate (const void *base, size_t count, size_t stride, size_t offset,
             bool *out_of_memory)
{
    *out_of_memory = false;
    if (count < 2)
        return NULL;
    if (count <= S_SMALL_UNIQUE) {
        const char *found = NULL;
        for (size_t index = 1; index < count; index++) {
            const char *text = s_string_at (base, index, stride, offset);
            for (size_t other = 0; other < index; other++) {
                const char *earlier = s_string_at (base, other, stride,
                                                    offset);
                if (text [0] == earlier [0] && strcmp (text, earlier) == 0) {
                    if (!found || strcmp (text, found) < 0)
                        found = text;
                    break;
                }
            }
        }
        return found;
    }
    const char **sorted = malloc (count * sizeof *sorted);
    if (!sorted) {
        *out_of_memory = true;
        return NULL;
    }
    for (size_t index = 0; index < count; index++)
        sorted [index] = s_string_at (base, index, stride, offset);
    qsort (sorted, count, sizeof *sorted, s_compare_strings);
    const char *found = NULL;
    for (size_t index = 1; index < count && !found; index++)
        if (strcmp (sorted [index], sorted [index - 1]) == 0)
            found = sorted [index];
    free (sorted);
    return found;
}

int
proto_check_unique (const void *base, size_t count, size_t stride,
                    size_t offset, const s_path_t *path, char *why,
                    size_t why_len)
{
    char show [S_SHOW_MAX + 4];
    bool out_of_memory;
    const char *found = s_duplicate (base, count, stride, offset,
                                     &out_of_memory);
    if (out_of_memory) {
        proto_fail (why, why_len, path, "out of memory");
        return -2;
    }
    if (found) {
        proto_fail (why, why_len, path, "'%s' appears twice",
                    proto_show (found, strlen (found), show));
        return -2;
    }
    return 0;
}



//  ---------------------------------------------------------------------
//  Encoding against a schema: check everything first, then write, so a
//  message that breaks a rule never leaves half a map in the writer

static int s_check_struct (const void *item, const s_schema_t *schema,
                           const s_path_t *path, char *why, size_t why_len);

//  Is an optional field present? Optional strings are present when set,
//  optional lists and maps when not empty, optional ints as their field
//  says.
static bool
s_present (const void *item, const s_field_t *field)
{
    if (field->required)
        return true;
    if (field->present)
        return field->present (item);
    if (field->kind == S_STR)
        return *S_MEMBER (item, field->offset, char *) != NULL;
    if (field->kind == S_LIST || field->kind == S_MAP
    ||  field->kind == S_STRUCTS)
        return *S_MEMBER (item, field->count_offset, size_t) > 0;
    return true;
}

static int
s_check_text (const char *text, s_text_t rule, const s_path_t *path,
              char *why, size_t why_len)
{
    if (!text) {
        proto_fail (why, why_len, path, "required");
        return -2;
    }
    return proto_text_check (rule, text, strlen (text), path, why, why_len);
}

static int
s_check_field (const void *item, const s_field_t *field,
               const s_path_t *path, char *why, size_t why_len)
{
    const size_t *count = S_MEMBER (item, field->count_offset, size_t);
    int64_t number = 0;
    switch (field->kind) {
        case S_STR:
            return s_check_text (*S_MEMBER (item, field->offset, char *),
                                 field->text, path, why, why_len);
        case S_U32:
            number = *S_MEMBER (item, field->offset, uint32_t);
            break;
        case S_I32:
            number = *S_MEMBER (item, field->offset, int32_t);
            break;
        case S_U64: {
            uint64_t wide = *S_MEMBER (item, field->offset, uint64_t);
            if (wide > INT64_MAX) {
                proto_fail (why, why_len, path, "%" PRIu64 " does not fit "
                            "int64", wide);
                return -2;
            }
            number = (int64_t) wide;
            break;
        }
        case S_I64:
            number = *S_MEMBER (item, field->offset, int64_t);
            break;
        case S_BOOL:
        case S_KIND:
            return 0;
        case S_ACKS: {
            const proto_ack_t *acks = *S_MEMBER (item, field->offset,
                                                 proto_ack_t *);
            if ((int64_t) *count < field->min || (int64_t) *count > field->max
                || !acks) {
                proto_fail (why, why_len, path, "%zu entries (%" PRId64 "..%"
                            PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (!acks [index].job || !job_id_valid (acks [index].job)
                    || acks [index].step > JOB_MAX_STEPS - 1
                    || acks [index].attempt < 1
                    || acks [index].attempt > PROTO_MAX_ATTEMPT
                    || (field->text == S_TEXT_STREAM
                        && !s_ack_stream_valid (&acks [index]))) {
                    proto_fail (why, why_len, &item_path, "invalid entry");
                    return -2;
                }
            }
            return 0;
        }
        case S_RESULTS: {
            const proto_msg_t *entries = *S_MEMBER (item, field->offset,
                                                    proto_msg_t *);
            if ((int64_t) *count < field->min || (int64_t) *count > field->max
                || !entries) {
                proto_fail (why, why_len, path, "%zu entries (%" PRId64 "..%"
                            PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_struct (&entries [index], field->schema,
                                    &item_path, why, why_len)
                    || field->schema->check (&entries [index], NULL,
                                             &item_path, why, why_len))
                    return -2;
            }
            return 0;
        }
        case S_BIN: {
            const uint8_t *bytes = *S_MEMBER (item, field->offset, uint8_t *);
            if ((int64_t) *count < field->min || (int64_t) *count > field->max
                || (*count > 0 && !bytes)) {
                proto_fail (why, why_len, path, "%zu bytes (%" PRId64 "..%"
                            PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            return 0;
        }
        case S_LIST: {
            char **list = *S_MEMBER (item, field->offset, char **);
            if ((int64_t) *count > field->max
            ||  (int64_t) *count < field->min || (*count > 0 && !list)) {
                proto_fail (why, why_len, path, "%zu entries (%" PRId64 "..%"
                            PRId64 ")", *count, field->min, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_text (list [index], field->text, &item_path, why,
                                  why_len))
                    return -2;
            }
            return proto_check_unique (list, *count, sizeof (char *), 0, path,
                                       why, why_len);
        }
        case S_MAP: {
            proto_kv_t *pairs = *S_MEMBER (item, field->offset, proto_kv_t *);
            if ((int64_t) *count > field->max || (*count > 0 && !pairs)) {
                proto_fail (why, why_len, path, "%zu entries (at most %" PRId64
                            ")", *count, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_text (pairs [index].key, field->key_text,
                                  &item_path, why, why_len)
                ||  s_check_text (pairs [index].value, field->text,
                                  &item_path, why, why_len))
                    return -2;
            }
            return proto_check_unique (pairs, *count, sizeof (proto_kv_t),
                                       offsetof (proto_kv_t, key), path, why,
                                       why_len);
        }
        case S_STRUCTS: {
            const s_schema_t *schema = field->schema;
            const char *array = *S_MEMBER (item, field->offset, char *);
            if ((int64_t) *count > field->max || (*count > 0 && !array)) {
                proto_fail (why, why_len, path, "%zu entries (at most %" PRId64
                            ")", *count, field->max);
                return -2;
            }
            for (size_t index = 0; index < *count; index++) {
                s_path_t item_path = { path, NULL, 0, index, false };
                if (s_check_struct (array + index * schema->size, schema,
                                    &item_path, why, why_len))
                    return -2;
            }
            return proto_check_unique (array, *count, schema->size,
                                       schema->name_offset, path, why, why_len);
        }
    }
    if (number < field->min || number > field->max) {
        proto_fail (why, why_len, path, "%" PRId64 " is out of range %" PRId64
                    "..%" PRId64, number, field->min, field->max);
        return -2;
    }
    return 0;
}

static int
s_check_struct (const void *item, const s_schema_t *schema,
                const s_path_t *path, char *why, size_t why_len)
{
    for (size_t index = 0; index < schema->count; index++) {
        const s_field_t *field = &schema->fields [index];
        if (!s_present (item, field))
            continue;
        s_path_t field_path = { path, field->key, field->key_len, 0, false };
        if (s_check_field (item, field, &field_path, why, why_len))
            return -2;
    }
    return 0;
}

static void s_write_struct (pw_t *writer, const void *item,
                            const s_schema_t *schema);

static void
s_write_field (pw_t *writer, const void *item, const s_field_t *field)
{
    size_t count = field->count_offset
                 ? *S_MEMBER (item, field->count_offset, size_t) : 0;
    switch (field->kind) {
        case S_STR:
            pw_str (writer, *S_MEMBER (item, field->offset, char *));
            break;
        case S_U32:
            pw_int (writer, *S_MEMBER (item, field->offset, uint32_t));
            break;
        case S_I32:
            pw_int (writer, *S_MEMBER (item, field->offset, int32_t));
            break;
        case S_U64:
            pw_int (writer,
                    (int64_t) *S_MEMBER (item, field->offset, uint64_t));
            break;
        case S_I64:
            pw_int (writer, *S_MEMBER (item, field->offset, int64_t));
            break;
        case S_BOOL:
            pw_bool (writer, *S_MEMBER (item, field->offset, bool));
            break;
        case S_KIND:
            pw_str (writer, *S_MEMBER (item, field->offset, bool)
                            ? "modify" : "query");
            break;
        case S_LIST: {
            char **list = *S_MEMBER (item, field->offset, char **);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                pw_str (writer, list [index]);
            break;
        }
        case S_MAP: {
            proto_kv_t *pairs = *S_MEMBER (item, field->offset, proto_kv_t *);
            pw_map (writer, count);
            for (size_t index = 0; index < count; index++) {
                pw_str (writer, pairs [index].key);
                if (field->numbers && pairs [index].number)
                    pw_int (writer, strtoll (pairs [index].value, NULL, 10));
                else
                    pw_str (writer, pairs [index].value);
            }
            break;
        }
        case S_BIN:
            pw_bin (writer, *S_MEMBER (item, field->offset, uint8_t *), count);
            break;
        case S_ACKS: {
            const proto_ack_t *acks = *S_MEMBER (item, field->offset,
                                                 proto_ack_t *);
            bool wide = field->text == S_TEXT_STREAM;
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++) {
                pw_array (writer, wide ? 5 : 3);
                pw_str (writer, acks [index].job);
                pw_int (writer, acks [index].step);
                pw_int (writer, acks [index].attempt);
                if (wide) {
                    pw_str (writer, acks [index].stream);
                    pw_int (writer, (int64_t) acks [index].offset);
                }
            }
            break;
        }
        case S_RESULTS: {
            const proto_msg_t *entries = *S_MEMBER (item, field->offset,
                                                    proto_msg_t *);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                s_write_struct (writer, &entries [index], field->schema);
            break;
        }
        case S_STRUCTS: {
            const char *array = *S_MEMBER (item, field->offset, char *);
            pw_array (writer, count);
            for (size_t index = 0; index < count; index++)
                s_write_struct (writer, array + index * field->schema->size,
                                field->schema);
            break;
        }
    }
}

//  Writes the present fields of ITEM as map pairs (no map header).
static void
s_write_pairs (pw_t *writer, const void *item, const s_schema_t *schema)
{
    for (size_t index = 0; index < schema->count; index++) {
        const s_field_t *field = &schema->fields [index];
        if (!s_present (item, field))
            continue;
        pw_str (writer, field->key);
        s_write_field (writer, item, field);
    }
}

static size_t
s_present_count (const void *item, const s_schema_t *schema)
{
    size_t count = 0;
    for (size_t index = 0; index < schema->count; index++)
        if (s_present (item, &schema->fields [index]))
            count++;
    return count;
}

static void
s_write_struct (pw_t *writer, const void *item, const s_schema_t *schema)
{
    pw_map (writer, s_present_count (item, schema));
    s_write_pairs (writer, item, schema);
}

int
proto_msg_encode (const proto_msg_t *msg, pw_t *writer)
{
    assert (writer);
    if (!msg)
        return PROTO_EMALFORMED;
    const s_message_t *message = s_message_for (msg->type);
    if (!message)
        return PROTO_EMALFORMED;
    char why [256];
    s_path_t path = { NULL, message->name, message->name_len, 0, false };
    if (s_check_struct (msg, &message->schema, &path, why, sizeof why))
        return PROTO_EMALFORMED;
    //  Message-level rules use no wire values (those of nested structs do)
    if (message->schema.check
        && message->schema.check (msg, NULL, &path, why, sizeof why))
        return PROTO_EMALFORMED;
    pw_map (writer, 2 + s_present_count (msg, &message->schema));
    pw_str (writer, "v");
    pw_int (writer, msg->protocol ? msg->protocol : PROTO_VERSION);
    pw_str (writer, "type");
    pw_str (writer, message->name);
    s_write_pairs (writer, msg, &message->schema);
    return PROTO_OK;
}

bool
proto_version_spoken (int64_t version)
{
    return version >= PROTO_VERSION_MIN && version <= PROTO_VERSION;
}

int
proto_version_for (int64_t version)
{
    return version > PROTO_VERSION ? PROTO_VERSION
         : version < PROTO_VERSION_MIN ? PROTO_VERSION_MIN
         : (int) version;
}

const char *
proto_version_refusal (int64_t version, char *text, size_t len)
{
    if (PROTO_VERSION_MIN == PROTO_VERSION)
        proto_format (text, len, "unsupported version %" PRId64
                      " (speaks %d)", version, PROTO_VERSION);
    else
        proto_format (text, len, "unsupported version %" PRId64
                      " (speaks %d to %d)", version, PROTO_VERSION_MIN,
                      PROTO_VERSION);
    return text;
}

//  The epoch key of an ack, when there is one (a broker alone has none)
static void
s_put_epoch (pw_t *writer, uint64_t epoch)
{
    if (epoch) {
        pw_strn (writer, "epoch", 5);
        pw_int (writer, (int64_t) epoch);
    }
}

int
proto_result_ack_encode (const char *job, uint32_t step, uint32_t attempt,
                         uint64_t epoch, int version, pw_t *writer)
{
    assert (writer);
    //  The rules of s_result_ack_fields (S_JOB, S_STEP, S_ATTEMPT)
    if (!job || !job_id_valid (job) || step > JOB_MAX_STEPS - 1
        || attempt < 1 || attempt > PROTO_MAX_ATTEMPT
        || epoch > INT64_MAX)
        return PROTO_EMALFORMED;
    pw_map (writer, epoch ? 6 : 5);
    pw_strn (writer, "v", 1);
    pw_int (writer, version ? version : PROTO_VERSION);
    pw_strn (writer, "type", 4);
    pw_strn (writer, "result_ack", 10);
    pw_strn (writer, "job", 3);
    pw_str (writer, job);
    pw_strn (writer, "step", 4);
    pw_int (writer, step);
    pw_strn (writer, "attempt", 7);
    pw_int (writer, attempt);
    s_put_epoch (writer, epoch);
    return PROTO_OK;
}

//  result_acks, or with OUTPUT output_acks: the rules of their fields
//  (s_result_acks_fields, s_output_acks_fields), then the message.
static int
s_acks_encode (const proto_ack_t *acks, size_t count, uint64_t epoch,
               int version, bool output, pw_t *writer)
{
    assert (writer);
    if (!acks || count < 1 || count > PROTO_MAX_ACKS || epoch > INT64_MAX)
        return PROTO_EMALFORMED;
    for (size_t index = 0; index < count; index++)
        if (!acks [index].job || !job_id_valid (acks [index].job)
            || acks [index].step > JOB_MAX_STEPS - 1
            || acks [index].attempt < 1
            || acks [index].attempt > PROTO_MAX_ATTEMPT
            || (output && !s_ack_stream_valid (&acks [index])))
            return PROTO_EMALFORMED;
    pw_map (writer, epoch ? 4 : 3);
    pw_strn (writer, "v", 1);
    pw_int (writer, version ? version : PROTO_VERSION);
    pw_strn (writer, "type", 4);
    if (output)
        pw_strn (writer, "output_acks", 11);
    else
        pw_strn (writer, "result_acks", 11);
    pw_strn (writer, "acks", 4);
    pw_array (writer, count);
    for (size_t index = 0; index < count; index++) {
        pw_array (writer, output ? 5 : 3);
        pw_str (writer, acks [index].job);
        pw_int (writer, acks [index].step);
        pw_int (writer, acks [index].attempt);
        if (output) {
            pw_str (writer, acks [index].stream);
            pw_int (writer, (int64_t) acks [index].offset);
        }
    }
    s_put_epoch (writer, epoch);
    return PROTO_OK;
}

int
proto_result_acks_encode (const proto_ack_t *acks, size_t count,
                          uint64_t epoch, int version, pw_t *writer)
{
    return s_acks_encode (acks, count, epoch, version, false, writer);
}

int
proto_output_acks_encode (const proto_ack_t *acks, size_t count,
                          uint64_t epoch, int version, pw_t *writer)
{
    return s_acks_encode (acks, count, epoch, version, true, writer);
}

int
proto_results_begin (const char *node, size_t count, pw_t *writer)
{
    assert (writer);
    if (!node || !name_valid (node) || count < 1 || count > PROTO_MAX_RESULTS)
        return PROTO_EMALFORMED;
    pw_map (writer, 4);
    pw_strn (writer, "v", 1);
    pw_int (writer, PROTO_VERSION);
    pw_strn (writer, "type", 4);
    pw_strn (writer, "results", 7);
    pw_strn (writer, "node", 4);
    pw_str (writer, node);
    pw_strn (writer, "results", 7);
    pw_array (writer, count);
    return PROTO_OK;
}

int
proto_results_entry_encode (const proto_msg_t *result, pw_t *writer)
{
    assert (writer);
    if (!result || result->type != PROTO_RESULT)
        return PROTO_EMALFORMED;
    char why [256];
    s_path_t path = { NULL, "results", 7, 0, false };
    if (s_check_struct (result, &s_result_entry_schema, &path, why,
                        sizeof why)
        || s_result_check (result, NULL, &path, why, sizeof why))
        return PROTO_EMALFORMED;
    s_write_struct (writer, result, &s_result_entry_schema);
    return PROTO_OK;
}

bool
proto_msg_has_feature (const proto_msg_t *msg, const char *feature)
{
    return proto_hello_has_feature (msg, feature);
}

bool
proto_hello_has_feature (const proto_msg_t *hello, const char *feature)
{
    for (size_t index = 0; hello && index < hello->feature_count; index++)
        if (strcmp (hello->features [index], feature) == 0)
            return true;
    return false;
}
