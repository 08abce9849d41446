/*  =========================================================================
    fuzz_yaml - libFuzzer target for YAML: config files and job files
    (conf_parse, then job_spec_decode as gridcli job run -f does)

    Beyond "no crash, no leak": a parsed document re-encodes as msgpack
    that decodes again (the same tree the wire gives), and an accepted job
    file re-encodes to a wire spec that is accepted again with the same
    number of steps. A broken invariant aborts, which libFuzzer reports as
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

#include "../../proto/conf.h"
#include "../../proto/job.h"
#include "../../proto/pv.h"
#include "../../proto/pw.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
s_broken (const char *invariant)
{
    fprintf (stderr, "fuzz_yaml: invariant broken: %s\n", invariant);
    abort ();
}

static void
s_check_job (const pv_t *root)
{
    job_spec_t *spec = NULL;
    job_errors_t errors;
    memset (&errors, 0, sizeof errors);
    if (job_spec_decode (root, &spec, &errors) == 0) {
        pw_t *writer = pw_new ();
        job_spec_encode (spec, writer);
        pv_doc_t *doc = NULL;
        if (pv_doc_decode (pw_data (writer), pw_size (writer), &doc, NULL, 0))
            s_broken ("an encoded job file does not decode");
        job_spec_t *again = NULL;
        job_errors_t again_errors;
        memset (&again_errors, 0, sizeof again_errors);
        if (job_spec_decode (pv_doc_root (doc), &again, &again_errors))
            s_broken ("an accepted job file is refused on the wire");
        if (job_spec_step_count (again) != job_spec_step_count (spec))
            s_broken ("a job file changed its steps on a round trip");
        job_spec_destroy (&again);
        job_errors_clear (&again_errors);
        pv_doc_destroy (&doc);
        pw_destroy (&writer);
    }
    else
    if (spec)
        s_broken ("a refused job file still gave a spec");
    job_spec_destroy (&spec);
    job_errors_clear (&errors);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    pv_doc_t *doc = NULL;
    char err [256];
    if (conf_parse ((const char *) data, size, &doc, err, sizeof err) != 0) {
        if (doc)
            s_broken ("a refused document was still returned");
        return 0;
    }
    const pv_t *root = pv_doc_root (doc);
    pw_t *writer = pw_new ();
    pw_pv (writer, root);
    pv_doc_t *again = NULL;
    if (pv_doc_decode (pw_data (writer), pw_size (writer), &again, NULL, 0))
        s_broken ("a parsed document does not re-encode to valid msgpack");
    pv_doc_destroy (&again);
    pw_destroy (&writer);
    s_check_job (root);
    pv_doc_destroy (&doc);
    return 0;
}

#define FUZZ_REPLAY_NAME "fuzz_yaml"
#include "fuzz_replay.h"
