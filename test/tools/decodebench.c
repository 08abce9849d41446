/*  =========================================================================
    decodebench - cost of decoding one agent message (developer tool)

    Encodes one typical message of each kind the broker receives most (a
    result with about 20 bytes of output, an ack, a heartbeat, and a hello
    that declares every built-in backend, as a real agent's does), then
    decodes and frees it COUNT times in a loop, as the broker does per
    message, and prints the wall time per decode.

    Wall time on a shared machine is noisy; instruction counts are not.
    s_decode_loop holds nothing but the loop, so callgrind can count it
    alone:

        valgrind --tool=callgrind --toggle-collect=s_decode_loop \
            build/test/tools/decodebench --count 100000 result

    and the total Ir divided by COUNT is the cost of one decode and free.

    usage: decodebench [--count N] [MESSAGE...]
        MESSAGE is result, ack, heartbeat or hello (default: all four)
    =========================================================================
*/
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../backends/backend.h"
#include "../../proto/proto.h"
#include "../../proto/pw.h"

#define JOB_ID "j-0193a1b2c3d4-0001"
#define NODE_ID "web-000123"

static char *
s_dup (const char *text)
{
    char *copy = strdup (text);
    if (!copy) {
        fprintf (stderr, "decodebench: out of memory\n");
        exit (1);
    }
    return copy;
}

static proto_msg_t *
s_result (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_RESULT);
    msg->node = s_dup (NODE_ID);
    msg->job = s_dup (JOB_ID);
    msg->step = 3;
    msg->attempt = 1;
    msg->status = s_dup ("success");
    msg->output = s_dup (" 10:42:07 up 3 days\n");
    msg->error = s_dup ("");
    msg->exit_code = 0;
    msg->duration_ms = 12;
    return msg;
}

static proto_msg_t *
s_ack (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_ACK);
    msg->node = s_dup (NODE_ID);
    msg->job = s_dup (JOB_ID);
    msg->step = 3;
    msg->attempt = 1;
    return msg;
}

static proto_msg_t *
s_heartbeat (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_HEARTBEAT);
    msg->node = s_dup (NODE_ID);
    msg->running = 1;
    msg->queued = 0;
    return msg;
}

static proto_msg_t *
s_hello (void)
{
    proto_msg_t *msg = proto_msg_new (PROTO_HELLO);
    msg->node = s_dup (NODE_ID);
    msg->hostname = s_dup ("web-000123.example.net");
    msg->groups = calloc (2, sizeof (char *));
    msg->labels = calloc (2, sizeof (proto_kv_t));
    if (!msg->groups || !msg->labels) {
        fprintf (stderr, "decodebench: out of memory\n");
        exit (1);
    }
    msg->groups [0] = s_dup ("web");
    msg->groups [1] = s_dup ("prod");
    msg->group_count = 2;
    msg->labels [0].key = s_dup ("rack");
    msg->labels [0].value = s_dup ("r1");
    msg->labels [1].key = s_dup ("tier");
    msg->labels [1].value = s_dup ("web.dev.us-east");
    msg->label_count = 2;
    msg->version = s_dup ("0.1.0");
    msg->concurrency = 4;
    if (backends_hello_specs (NULL, 0, &msg->backends, &msg->backend_count)) {
        fprintf (stderr, "decodebench: cannot describe the backends\n");
        exit (1);
    }
    return msg;
}

typedef struct {
    const char *name;               //  Command-line name
    proto_msg_t *(*build) (void);   //  Makes the message
} s_kind_t;

static const s_kind_t s_kinds [] = {
    { "result", s_result },
    { "ack", s_ack },
    { "heartbeat", s_heartbeat },
    { "hello", s_hello },
};
#define S_KIND_COUNT (sizeof s_kinds / sizeof s_kinds [0])

//  Only the measured work, so that callgrind can count it alone. Not
//  inlined, or the toggle would find nothing to toggle.
__attribute__ ((noinline)) static int
s_decode_loop (const void *data, size_t size, long count)
{
    char why [256];
    for (long index = 0; index < count; index++) {
        proto_msg_t *msg = NULL;
        if (proto_msg_decode (data, size, &msg, why, sizeof why)) {
            fprintf (stderr, "decodebench: refused: %s\n", why);
            return -1;
        }
        proto_msg_destroy (&msg);
    }
    return 0;
}

static int64_t
s_now_ns (void)
{
    struct timespec now;
    clock_gettime (CLOCK_MONOTONIC, &now);
    return (int64_t) now.tv_sec * 1000000000 + now.tv_nsec;
}

static int
s_bench (const s_kind_t *kind, long count)
{
    proto_msg_t *msg = kind->build ();
    pw_t *writer = pw_new ();
    if (proto_msg_encode (msg, writer)) {
        fprintf (stderr, "decodebench: %s does not encode\n", kind->name);
        return -1;
    }
    int64_t start_ns = s_now_ns ();
    int rc = s_decode_loop (pw_data (writer), pw_size (writer), count);
    int64_t spent_ns = s_now_ns () - start_ns;
    if (rc == 0)
        printf ("%-10s %6zu bytes %8ld decodes %10.1f ns each\n", kind->name,
                pw_size (writer), count, (double) spent_ns / (double) count);
    pw_destroy (&writer);
    proto_msg_destroy (&msg);
    return rc;
}

int
main (int argc, char *argv [])
{
    long count = 100000;
    int first = 1;
    if (argc > 2 && strcmp (argv [1], "--count") == 0) {
        count = strtol (argv [2], NULL, 10);
        first = 3;
    }
    if (count <= 0 || (argc > 1 && argv [1][0] == '-' && first == 1)) {
        fprintf (stderr, "usage: decodebench [--count N] "
                         "[result|ack|heartbeat|hello...]\n");
        return 2;
    }
    int rc = 0;
    for (size_t which = 0; which < S_KIND_COUNT; which++) {
        bool wanted = first >= argc;
        for (int arg = first; arg < argc && !wanted; arg++)
            wanted = strcmp (argv [arg], s_kinds [which].name) == 0;
        if (wanted && s_bench (&s_kinds [which], count))
            rc = 1;
    }
    return rc;
}
