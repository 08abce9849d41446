/*  =========================================================================
    fuzz_text - libFuzzer target for the text grammars grid parses from
    operators: target expressions (target_parse) and cron expressions
    (cron_parse, cron_next)

    An input is taken as text (cut at its first NUL) and parsed. Beyond
    "no crash, no leak": a refused text names its problem; an accepted
    target formats to a text that parses back to the same text, scope and
    any flag, a copy formats the same, and matching it against a few nodes
    agrees with its copy; an accepted cron's next time is later than the
    time asked from, and asking again from just before it gives it again,
    in UTC and in Europe/Berlin. A broken invariant aborts, which libFuzzer
    reports as a crash.

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

#include "../../proto/cron.h"
#include "../../proto/names.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
s_broken (const char *invariant)
{
    fprintf (stderr, "fuzz_text: invariant broken: %s\n", invariant);
    abort ();
}

static void
s_check_target (const char *text)
{
    target_t target, again, copy;
    char err [256] = "";
    if (target_parse (text, &target, err, sizeof err) != 0) {
        if (!err [0])
            s_broken ("a refused target names no problem");
        if (target.value || target.expr || target.nodes)
            s_broken ("a refused target left memory behind");
        return;
    }
    char *formatted = target_format (&target);
    if (!formatted)
        s_broken ("an accepted target does not format");
    if (target_parse (formatted, &again, err, sizeof err) != 0)
        s_broken ("a formatted target is refused");
    if (target_copy (&copy, &target) != 0)
        s_broken ("an accepted target does not copy");
    char *twice = target_format (&again);
    char *copied = target_format (&copy);
    if (!twice || !copied || strcmp (formatted, twice) != 0
        || strcmp (formatted, copied) != 0 || again.scope != target.scope
        || again.any != target.any)
        s_broken ("a target changed on a round trip");
    char *groups [] = {"web", "db"};
    char *keys [] = {"tier"};
    char *values [] = {"web.prod"};
    const char *ids [] = {"web-01", "db-01", "x"};
    for (size_t i = 0; i < 3; i++)
        for (size_t g = 0; g <= 2; g++)
            if (target_matches (&target, ids [i], groups, g, keys, values, 1)
                != target_matches (&copy, ids [i], groups, g, keys, values,
                                   1))
                s_broken ("a copy matches differently");
    free (formatted);
    free (twice);
    free (copied);
    target_clear (&target);
    target_clear (&again);
    target_clear (&copy);
}

static void
s_check_cron (const char *text)
{
    cron_t cron;
    char err [256] = "";
    if (cron_parse (text, &cron, err, sizeof err) != 0) {
        if (!err [0])
            s_broken ("a refused cron names no problem");
        return;
    }
    //  2026-03-29 00:00 UTC: the night Berlin skips an hour
    const int64_t after = 1774742400000LL;
    const char *zones [] = {NULL, "Europe/Berlin"};
    for (size_t z = 0; z < 2; z++) {
        int64_t next = cron_next (&cron, zones [z], after);
        if (next == -1)
            continue;
        if (next <= after)
            s_broken ("a cron's next time is not later");
        if (cron_next (&cron, zones [z], next - 1) != next)
            s_broken ("a cron's next time moved when asked again");
    }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    char *text = malloc (size + 1);
    if (!text)
        return 0;
    memcpy (text, data, size);
    text [size] = '\0';
    s_check_target (text);
    s_check_cron (text);
    free (text);
    return 0;
}

#define FUZZ_REPLAY_NAME "fuzz_text"
#include "fuzz_replay.h"
