/*  =========================================================================
    fuzz_proto - libFuzzer target for every decoder of wire bytes

    Feeds one input to pv_doc_decode, proto_msg_decode (and apart to its
    direct and its schema decode, which must agree) and
    proto_request_decode, and a decoded map (or a submit's job) to
    job_spec_decode. Beyond "no crash, no leak" it checks that what was
    accepted survives a round trip: a decoded value re-encodes to bytes
    that decode again, a decoded message re-encodes (decode and encode
    apply the same rules) to the very bytes a second decode re-encodes to,
    and an accepted job spec re-encodes to a spec that is accepted again.
    The header-only scanner (mpscan) never reads past its input, agrees
    with the decoder on where an accepted value ends, and what it finds
    or cuts out is a whole value again.
    A broken invariant aborts, which the fuzzer reports as a crash.

    Built with -DGRID_FUZZ_LIBFUZZER and -fsanitize=fuzzer it is a libFuzzer
    binary. Without it, main() runs each file named on the command line
    (or stdin) once, so the normal build links it as a plain program that
    replays a corpus or a crash.
    =========================================================================
*/
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/job.h"
#include "../../proto/mpscan.h"
#include "../../proto/proto.h"
#include "../../proto/pv.h"
#include "../../proto/pw.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
s_broken (const char *invariant)
{
    fprintf (stderr, "fuzz_proto: invariant broken: %s\n", invariant);
    abort ();
}

static FILE *
s_sink (void)
{
    static FILE *sink = NULL;
    if (!sink)
        sink = fopen ("/dev/null", "w");
    return sink;
}

static void
s_check_job (const pv_t *value)
{
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    if (job_spec_decode (value, &spec, &errors) == 0) {
        if (!spec)
            s_broken ("job_spec_decode accepted without a spec");
        pw_t *writer = pw_new ();
        job_spec_encode (spec, writer);
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL,
                           0))
            s_broken ("an encoded job spec does not decode");
        job_spec_t *again = NULL;
        job_errors_t again_errors;
        memset (&again_errors, 0, sizeof again_errors);
        if (job_spec_decode (pv_doc_root (doc), &again, &again_errors))
            s_broken ("an encoded job spec is not accepted again");
        if (job_spec_step_count (again) != job_spec_step_count (spec))
            s_broken ("a job spec changed its step count on a round trip");
        job_spec_destroy (&again);
        job_errors_clear (&again_errors);
        pv_doc_destroy (&doc);
        pw_destroy (&writer);
    }
    job_spec_destroy (&spec);
    job_errors_clear (&errors);
}

static void
s_check_value (const uint8_t *data, size_t size)
{
    pv_doc_t *doc = NULL;
    char why [256];
    if (pv_doc_decode (data, size, &doc, why, sizeof why))
        return;
    const pv_t *root = pv_doc_root (doc);
    if (s_sink ())
        pv_write_json (root, s_sink (), 2);

    pw_t *writer = pw_new ();
    pw_pv (writer, root);
    pv_doc_t *again = NULL;
    if (pv_doc_decode (pw_data (writer), pw_size (writer), &again, NULL, 0))
        s_broken ("a decoded value does not re-encode to valid bytes");
    pv_doc_destroy (&again);
    pw_destroy (&writer);

    if (pv_type (root) == PV_MAP)
        s_check_job (root);
    pv_doc_destroy (&doc);
}

static void
s_check_message (const uint8_t *data, size_t size)
{
    proto_msg_t *msg = NULL;
    char why [256];
    if (proto_msg_decode (data, size, &msg, why, sizeof why))
        return;
    //  A results keeps its bad entries marked, each with a reason; the
    //  good ones, kept in order, make a message that round-trips
    if (msg->type == PROTO_RESULTS) {
        size_t kept = 0;
        for (size_t index = 0; index < msg->result_count; index++) {
            proto_msg_t *entry = &msg->results [index];
            if (entry->type == PROTO_RESULT) {
                if (!entry->node || strcmp (entry->node, msg->node) != 0)
                    s_broken ("a results entry does not speak for its node");
                msg->results [kept++] = *entry;
            }
            else
            if (entry->type != 0 || !entry->message || !*entry->message)
                s_broken ("a bad results entry has no reason");
        }
        msg->result_count = kept;
        if (kept == 0) {
            proto_msg_destroy (&msg);
            return;
        }
    }
    pw_t *writer = pw_new ();
    if (proto_msg_encode (msg, writer))
        s_broken ("a decoded message does not encode");
    proto_msg_t *again = NULL;
    if (proto_msg_decode (pw_data (writer), pw_size (writer), &again, why,
                          sizeof why))
        s_broken ("an encoded message does not decode");
    pw_t *second = pw_new ();
    if (proto_msg_encode (again, second))
        s_broken ("a re-decoded message does not encode");
    if (pw_size (second) != pw_size (writer)
    ||  memcmp (pw_data (second), pw_data (writer), pw_size (writer)) != 0)
        s_broken ("a message changed on a round trip");
    pw_destroy (&second);
    proto_msg_destroy (&again);
    pw_destroy (&writer);
    proto_msg_destroy (&msg);
}

//  Whether A and B encode to the same bytes (both NULL, or both messages
//  of one type whose fields are equal).
static bool
s_same_message (const proto_msg_t *a, const proto_msg_t *b)
{
    if (!a || !b)
        return a == b;
    if (a->type != b->type)
        return false;
    pw_t *left = pw_new ();
    pw_t *right = pw_new ();
    int left_rc = proto_msg_encode (a, left);
    int right_rc = proto_msg_encode (b, right);
    //  (A message that does not encode leaves its writer empty)
    bool same = left_rc == right_rc && pw_size (left) == pw_size (right)
                && (pw_size (left) == 0
                    || memcmp (pw_data (left), pw_data (right),
                               pw_size (left)) == 0);
    pw_destroy (&left);
    pw_destroy (&right);
    return same;
}

//  proto_msg_decode reads flat messages directly and gives the rest to
//  the schema decode: the direct decode accepts nothing the schema decode
//  refuses, both give the same message, and proto_msg_decode answers as
//  the schema decode does (code, reason and message). What the encoder
//  writes for a result, or a results of good entries, the direct decode
//  reads.
static void
s_check_decode_paths (const uint8_t *data, size_t size)
{
    proto_msg_t *direct = NULL;
    proto_msg_t *schema = NULL;
    proto_msg_t *decoded = NULL;
    char schema_why [256] = "unset";
    char why [256] = "unset";
    int direct_rc = proto_msg_decode_direct (data, size, &direct);
    int schema_rc = proto_msg_decode_schema (data, size, &schema, schema_why,
                                             sizeof schema_why);
    int rc = proto_msg_decode (data, size, &decoded, why, sizeof why);
    if (direct_rc != 0 && direct_rc != 1)
        s_broken ("the direct decode returned neither 0 nor 1");
    if ((direct_rc == 0) != (direct != NULL))
        s_broken ("the direct decode's message does not match its return");
    if (direct_rc == 0 && schema_rc != 0)
        s_broken ("the direct decode accepted what the schema decode "
                  "refuses");
    if (direct_rc == 0 && !s_same_message (direct, schema))
        s_broken ("the direct and the schema decode read different "
                  "messages");
    if (rc != schema_rc || strcmp (why, schema_why) != 0
    ||  !s_same_message (decoded, schema))
        s_broken ("proto_msg_decode does not answer as the schema decode");
    bool whole = schema_rc == 0 && (schema->type == PROTO_RESULT
                                    || schema->type == PROTO_RESULTS);
    for (size_t index = 0; whole && index < schema->result_count; index++)
        whole = schema->results [index].type == PROTO_RESULT;
    if (whole) {
        pw_t *writer = pw_new ();
        proto_msg_t *again = NULL;
        if (proto_msg_encode (schema, writer) == 0
        &&  proto_msg_decode_direct (pw_data (writer), pw_size (writer),
                                     &again) != 0)
            s_broken ("the direct decode declines an encoded result or "
                      "results");
        proto_msg_destroy (&again);
        pw_destroy (&writer);
    }
    proto_msg_destroy (&direct);
    proto_msg_destroy (&schema);
    proto_msg_destroy (&decoded);
}

static void
s_check_request (const uint8_t *data, size_t size)
{
    proto_request_t *req = NULL;
    const char *code = NULL;
    char *id = NULL;
    char why [256];
    if (proto_request_decode (data, size, &req, &code, &id, why,
                              sizeof why) == 0) {
        if (!req || !req->type || !req->id || !req->body)
            s_broken ("an accepted request is incomplete");
        if (strcmp (req->type, "job.submit") == 0)
            s_check_job (pv_map_get (req->body, "job"));
    }
    else
    if (!code || req)
        s_broken ("a refused request has no code");
    free (id);
    proto_request_destroy (&req);
}

//  mpscan against the decoder: on any input it stays within DATA; on a
//  value pv_doc_decode accepts (one value, no trailing bytes) it skips
//  exactly the whole of it; a key it finds is a whole value inside DATA,
//  and cutting that value out for an empty array leaves a map that
//  scans whole again.
static void
s_check_scan (const uint8_t *data, size_t size)
{
    size_t skip = mpscan_skip (data, size);
    if (skip > size)
        s_broken ("mpscan_skip ran past its input");
    pv_doc_t *doc = NULL;
    char why [256];
    bool accepted = pv_doc_decode (data, size, &doc, why, sizeof why) == 0;
    pv_doc_destroy (&doc);
    if (accepted && skip != size)
        s_broken ("mpscan_skip disagrees with the decoder on a value's end");

    const char *keys [] = { "backends", "type", "node" };
    for (size_t index = 0; index < 3; index++) {
        for (int first = 0; first < 2; first++) {
            size_t at = 0, len = 0;
            if (mpscan_map_find (data, size, keys [index], first != 0, &at,
                                 &len) != 0)
                continue;
            if (at > size || len > size - at || len == 0)
                s_broken ("mpscan_map_find gave a value outside its input");
            if (mpscan_skip (data + at, len) != len)
                s_broken ("mpscan_map_find gave a value that is not whole");
            uint8_t *out = malloc (size + 1);
            if (!out)
                return;
            const uint8_t empty = 0x90;
            size_t cut = mpscan_replace (data, size, at, len, &empty, 1, out,
                                         size + 1);
            if (cut != size - len + 1)
                s_broken ("mpscan_replace gave the wrong size");
            if (accepted && mpscan_skip (out, cut) != cut)
                s_broken ("a map with a value replaced does not scan whole");
            free (out);
        }
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    s_check_scan (data, size);
    s_check_value (data, size);
    s_check_message (data, size);
    s_check_decode_paths (data, size);
    s_check_request (data, size);
    return 0;
}

#ifndef GRID_FUZZ_LIBFUZZER

//  Reads all of FILE into a fresh buffer; returns 0, or -1.
static int
s_slurp (FILE *file, uint8_t **data_p, size_t *size_p)
{
    size_t size = 0;
    size_t room = 4096;
    uint8_t *data = malloc (room);
    if (!data)
        return -1;
    while (true) {
        if (size == room) {
            uint8_t *bigger = room > PROTO_MAX_FRAME ? NULL
                                                     : realloc (data, room * 2);
            if (!bigger) {
                free (data);
                return -1;
            }
            data = bigger;
            room *= 2;
        }
        size_t got = fread (data + size, 1, room - size, file);
        size += got;
        if (got == 0)
            break;
    }
    if (ferror (file)) {
        free (data);
        return -1;
    }
    *data_p = data;
    *size_p = size;
    return 0;
}

static int
s_run (const char *path)
{
    FILE *file = path ? fopen (path, "rb") : stdin;
    if (!file) {
        perror (path);
        return -1;
    }
    uint8_t *data = NULL;
    size_t size = 0;
    int rc = s_slurp (file, &data, &size);
    if (file != stdin)
        fclose (file);
    if (rc) {
        fprintf (stderr, "fuzz_proto: cannot read %s (or over %d bytes)\n",
                 path ? path : "stdin", PROTO_MAX_FRAME * 2);
        return -1;
    }
    LLVMFuzzerTestOneInput (data, size);
    free (data);
    return 0;
}

int
main (int argc, char *argv [])
{
    int failed = 0;
    if (argc < 2)
        failed = s_run (NULL) != 0;
    for (int index = 1; index < argc; index++)
        if (s_run (argv [index]))
            failed++;
    if (s_sink ())
        fclose (s_sink ());
    int inputs = argc < 2 ? 1 : argc - 1;
    printf ("fuzz_proto: ran %d input%s\n", inputs, inputs == 1 ? "" : "s");
    return failed ? 1 : 0;
}

#endif
