/*  =========================================================================
    fuzz_replay - the plain build's main for a libFuzzer target: runs
    LLVMFuzzerTestOneInput on each file named (or stdin), so a crash the
    fuzzer kept can be replayed without it. Include it at the end of a
    target with FUZZ_REPLAY_NAME defined; the libFuzzer build
    (GRID_FUZZ_LIBFUZZER) brings its own main.
    =========================================================================
*/
#ifndef GRID_FUZZ_LIBFUZZER

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int
s_run (const char *path)
{
    FILE *file = path ? fopen (path, "rb") : stdin;
    if (!file) {
        perror (path);
        return -1;
    }
    size_t size = 0, room = 4096;
    uint8_t *data = malloc (room);
    while (data) {
        if (size == room) {
            uint8_t *bigger = room < (64 << 20) ? realloc (data, room * 2)
                                                : NULL;
            if (!bigger) {
                free (data);
                data = NULL;
                break;
            }
            data = bigger;
            room *= 2;
        }
        size_t got = fread (data + size, 1, room - size, file);
        size += got;
        if (got == 0)
            break;
    }
    if (file != stdin)
        fclose (file);
    if (!data) {
        fprintf (stderr, FUZZ_REPLAY_NAME ": cannot read %s\n", path ? path : "stdin");
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
    int inputs = argc < 2 ? 1 : argc - 1;
    printf (FUZZ_REPLAY_NAME ": ran %d input%s\n", inputs, inputs == 1 ? "" : "s");
    return failed ? 1 : 0;
}

#endif
