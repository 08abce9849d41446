/*  =========================================================================
    fuzz_job - libFuzzer target for the msgpack maps grid decodes beyond the
    wire messages: the job spec of a job.submit (job_spec_decode) and the
    broker's key record (auth_key_decode)

    An input is decoded strictly (pv_doc_decode) and, when it is a value,
    handed to both decoders. Beyond "no crash, no leak": an accepted spec
    re-encodes to bytes that decode to a spec with the same steps, target
    and strategy; an accepted key record re-encodes to one that decodes to
    the same record. A broken invariant aborts, which libFuzzer reports as
    a crash.

    Built with -DGRID_FUZZ_LIBFUZZER and -fsanitize=fuzzer it is a libFuzzer
    binary (make fuzz). Without it, main() runs each file named on the
    command line (or stdin) once, so the normal build replays a corpus or a
    crash with it.
    =========================================================================
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../broker/auth.h"
#include "../../proto/job.h"
#include "../../proto/pv.h"
#include "../../proto/pw.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
s_broken (const char *invariant)
{
    fprintf (stderr, "fuzz_job: invariant broken: %s\n", invariant);
    abort ();
}

static void
s_check_spec (const pv_t *value)
{
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    int rc = job_spec_decode (value, &spec, &errors);
    if (rc != 0) {
        if (spec)
            s_broken ("a refused spec was still returned");
        if (errors.count == 0)
            s_broken ("a refused spec names no problem");
        job_errors_clear (&errors);
        return;
    }
    pw_t *writer = pw_new ();
    job_spec_encode (spec, writer);
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0))
        s_broken ("an encoded spec does not decode");
    job_spec_t *again = NULL;
    job_errors_t again_errors;
    memset (&again_errors, 0, sizeof again_errors);
    if (job_spec_decode (pv_doc_root (doc), &again, &again_errors))
        s_broken ("an encoded spec is refused");
    if (job_spec_step_count (again) != job_spec_step_count (spec)
        || again->phase_count != spec->phase_count
        || again->strategy != spec->strategy
        || again->priority != spec->priority
        || again->timeout_ms != spec->timeout_ms
        || again->target.scope != spec->target.scope
        || again->target.any != spec->target.any)
        s_broken ("a spec changed on a round trip");
    for (size_t step = 0; step < job_spec_step_count (spec); step++) {
        const job_phase_t *one = job_spec_step (spec, step, NULL, NULL);
        const job_phase_t *two = job_spec_step (again, step, NULL, NULL);
        if (!one || !two || strcmp (one->backend, two->backend) != 0
            || strcmp (one->action, two->action) != 0
            || one->param_count != two->param_count
            || one->timeout_ms != two->timeout_ms
            || one->max_retries != two->max_retries
            || one->condition != two->condition)
            s_broken ("a step changed on a round trip");
    }
    job_spec_destroy (&again);
    job_errors_clear (&again_errors);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    job_spec_destroy (&spec);
    job_errors_clear (&errors);
}

static void
s_check_key (const pv_t *value)
{
    auth_key_t key;
    memset (&key, 0, sizeof key);
    if (auth_key_decode (value, &key) != 0) {
        if (key.node || key.hostname || key.pool)
            s_broken ("a refused key record left memory behind");
        return;
    }
    pw_t *writer = pw_new ();
    auth_key_encode (&key, writer);
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0))
        s_broken ("an encoded key record does not decode");
    auth_key_t again;
    memset (&again, 0, sizeof again);
    if (auth_key_decode (pv_doc_root (doc), &again) != 0)
        s_broken ("an encoded key record is refused");
    if (again.status != key.status || !again.node != !key.node
        || (key.node && strcmp (again.node, key.node) != 0)
        || !again.pool != !key.pool
        || (key.pool && strcmp (again.pool, key.pool) != 0)
        || again.relay != key.relay
        || again.first_seen_ms != key.first_seen_ms
        || again.accepted_at_ms != key.accepted_at_ms)
        s_broken ("a key record changed on a round trip");
    free (again.node);
    free (again.hostname);
    free (again.pool);
    pv_doc_destroy (&doc);
    pw_destroy (&writer);
    free (key.node);
    free (key.hostname);
    free (key.pool);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    pv_doc_t *doc = NULL;
    if (pv_doc_decode (data, size, &doc, NULL, 0) == 0) {
        s_check_spec (pv_doc_root (doc));
        s_check_key (pv_doc_root (doc));
    }
    pv_doc_destroy (&doc);
    return 0;
}

#define FUZZ_REPLAY_NAME "fuzz_job"
#include "fuzz_replay.h"
