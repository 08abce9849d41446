/*  =========================================================================
    test_trace - traceparent parse and format (hostile strings too), and
    the span ids of a job's spans
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../proto/trace.h"

#define GOOD "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static void
test_trace_parse_good (void **state)
{
    trace_ctx_t ctx;
    char err [200] = "";
    assert_int_equal (trace_parse (GOOD, &ctx, err, sizeof err), 0);
    assert_int_equal (ctx.trace_id [0], 0x4b);
    assert_int_equal (ctx.trace_id [15], 0x36);
    assert_int_equal (ctx.parent_id [0], 0x00);
    assert_int_equal (ctx.parent_id [7], 0xb7);
    assert_int_equal (ctx.flags, 0x01);
    char text [TRACE_PARENT_LEN + 1];
    assert_string_equal (trace_format (&ctx, text), GOOD);
    //  Flags 00 (not sampled) are valid
    assert_true (trace_valid (
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
}

//  Each hostile string is refused, with a sentence that names WORDS.
static void
s_refused (const char *text, const char *words)
{
    trace_ctx_t ctx;
    char err [200] = "";
    assert_int_equal (trace_parse (text, &ctx, err, sizeof err), -1);
    if (!strstr (err, words))
        fail_msg ("\"%s\": \"%s\" does not say \"%s\"", text ? text : "(null)",
                  err, words);
    assert_false (trace_valid (text));
}

static void
test_trace_parse_hostile (void **state)
{
    s_refused (NULL, "missing");
    s_refused ("", "55 bytes");
    s_refused ("00", "55 bytes");
    //  A byte short, a byte long, trailing junk
    s_refused ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
               "55 bytes");
    s_refused (GOOD "1", "55 bytes");
    s_refused (GOOD "-extra", "55 bytes");
    s_refused (GOOD " ", "55 bytes");
    //  Short trace id, long parent id
    s_refused ("00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
               "separated");
    //  Uppercase hex
    s_refused ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
               "uppercase");
    s_refused ("00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
               "uppercase");
    s_refused ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
               "uppercase");
    //  Other versions
    s_refused ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
               "version ff");
    s_refused ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
               "version 00");
    s_refused ("zz-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
               "version 00");
    //  All-zero ids
    s_refused ("00-00000000000000000000000000000000-00f067aa0ba902b7-01",
               "trace id is all zeros");
    s_refused ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
               "parent id is all zeros");
    //  Not hex, wrong separators
    s_refused ("00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
               "lowercase hex");
    s_refused ("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
               "separated");
    s_refused ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7\n01",
               "separated");
    //  A NUL inside: only what is before it is read
    char embedded [TRACE_PARENT_LEN + 1];
    memcpy (embedded, GOOD, sizeof embedded);
    embedded [20] = 0;
    s_refused (embedded, "55 bytes");
}

static void
test_trace_new (void **state)
{
    trace_ctx_t one, two;
    assert_int_equal (trace_new (&one), 0);
    assert_int_equal (trace_new (&two), 0);
    assert_memory_not_equal (one.trace_id, two.trace_id, 16);
    char text [TRACE_PARENT_LEN + 1];
    assert_true (trace_valid (trace_format (&one, text)));
    assert_int_equal (one.flags, 1);
}

static void
test_trace_span_ids (void **state)
{
    trace_ctx_t ctx;
    char err [200];
    assert_int_equal (trace_parse (GOOD, &ctx, err, sizeof err), 0);
    uint8_t job [8], job_again [8], step0 [8], step1 [8], node [8], retry [8];
    trace_span_id (&ctx, "j-1", -1, NULL, 0, job);
    trace_span_id (&ctx, "j-1", -1, NULL, 0, job_again);
    trace_span_id (&ctx, "j-1", 0, NULL, 0, step0);
    trace_span_id (&ctx, "j-1", 1, NULL, 0, step1);
    trace_span_id (&ctx, "j-1", 0, "web-01", 1, node);
    trace_span_id (&ctx, "j-1", 0, "web-01", 2, retry);
    assert_memory_equal (job, job_again, 8);
    assert_memory_not_equal (job, step0, 8);
    assert_memory_not_equal (step0, step1, 8);
    assert_memory_not_equal (step0, node, 8);
    assert_memory_not_equal (node, retry, 8);
    //  Another job of the same trace has other spans
    uint8_t other [8];
    trace_span_id (&ctx, "j-2", -1, NULL, 0, other);
    assert_memory_not_equal (job, other, 8);
    char hex [17];
    assert_int_equal (strlen (trace_hex (job, 8, hex)), 16);
}

static void
test_trace_jobs_table (void **state)
{
    trace_jobs_clear ();
    char trace_id [TRACE_ID_HEX + 1];
    assert_false (trace_job_lookup ("j-0193a1b2c3d4-0001", trace_id));
    trace_job_remember ("j-0193a1b2c3d4-0001",
                        "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_true (trace_job_lookup ("j-0193a1b2c3d4-0001", trace_id));
    assert_string_equal (trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    //  Bad entries are not kept
    trace_job_remember ("j-2", "short");
    assert_false (trace_job_lookup ("j-2", trace_id));
    //  Past the bound the oldest go first; the newest stay
    char job [32];
    for (int index = 0; index < TRACE_JOBS_MAX * 2; index++) {
        snprintf (job, sizeof job, "j-%012d-0001", index);
        trace_job_remember (job, "00000000000000000000000000000001");
    }
    assert_false (trace_job_lookup ("j-0193a1b2c3d4-0001", trace_id));
    assert_false (trace_job_lookup ("j-000000000000-0001", trace_id));
    snprintf (job, sizeof job, "j-%012d-0001", TRACE_JOBS_MAX * 2 - 1);
    assert_true (trace_job_lookup (job, trace_id));
    snprintf (job, sizeof job, "j-%012d-0001", TRACE_JOBS_MAX);
    assert_true (trace_job_lookup (job, trace_id));
    trace_jobs_clear ();
    assert_false (trace_job_lookup (job, trace_id));
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_trace_parse_good),
        cmocka_unit_test (test_trace_parse_hostile),
        cmocka_unit_test (test_trace_new),
        cmocka_unit_test (test_trace_span_ids),
        cmocka_unit_test (test_trace_jobs_table),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
