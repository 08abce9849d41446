/*  =========================================================================
    test_log - the logging module: levels, the three line forms, the job id
    a line names, JSON escaping
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../proto/log.h"

static char s_path [64];

//  Points stderr at a fresh temporary file; returns the saved stderr.
static int
s_capture (void)
{
    strcpy (s_path, "/tmp/test_log_XXXXXX");
    int fd = mkstemp (s_path);
    assert_true (fd >= 0);
    int saved = dup (STDERR_FILENO);
    dup2 (fd, STDERR_FILENO);
    close (fd);
    return saved;
}

//  Restores stderr and returns what was written (caller frees).
static char *
s_release (int saved)
{
    dup2 (saved, STDERR_FILENO);
    close (saved);
    FILE *file = fopen (s_path, "r");
    assert_non_null (file);
    char *text = calloc (1, 65536);
    size_t size = fread (text, 1, 65535, file);
    text [size] = 0;
    fclose (file);
    unlink (s_path);
    return text;
}

static int
s_setup (void **state)
{
    unsetenv ("JOURNAL_STREAM");
    log_init ("gridtest");
    log_set_instance (NULL);
    log_set_level (LOG_LEVEL_INFO);
    log_set_format (LOG_FORMAT_TEXT);
    return 0;
}

static void
test_log_text_lines_have_time_program_level (void **state)
{
    int saved = s_capture ();
    log_info ("hello %d", 42);
    log_debug ("not shown at info");
    char *text = s_release (saved);
    //  2026-11-21T07:00:51.123Z gridtest info: hello 42
    assert_int_equal (strlen (text), 24 + strlen (" gridtest info: hello 42\n"));
    assert_int_equal (text [10], 'T');
    assert_int_equal (text [23], 'Z');
    assert_string_equal (text + 24, " gridtest info: hello 42\n");
    free (text);
}

static void
test_log_levels_filter (void **state)
{
    log_set_level (LOG_LEVEL_WARN);
    int saved = s_capture ();
    log_error ("e");
    log_warn ("w");
    log_info ("i");
    log_debug ("d");
    char *text = s_release (saved);
    assert_non_null (strstr (text, "gridtest error: e\n"));
    assert_non_null (strstr (text, "gridtest warn: w\n"));
    assert_null (strstr (text, ": i\n"));
    assert_null (strstr (text, ": d\n"));
    free (text);
    assert_false (log_enabled (LOG_LEVEL_INFO));
    assert_true (log_enabled (LOG_LEVEL_ERROR));
}

static void
test_log_parse_and_configure (void **state)
{
    log_level_t level;
    log_format_t format;
    assert_int_equal (log_level_parse ("debug", &level), 0);
    assert_int_equal (level, LOG_LEVEL_DEBUG);
    assert_int_equal (log_level_parse ("warning", &level), 0);
    assert_int_equal (level, LOG_LEVEL_WARN);
    assert_int_equal (log_level_parse ("loud", &level), -1);
    assert_int_equal (log_format_parse ("json", &format), 0);
    assert_int_equal (log_format_parse ("xml", &format), -1);
    char err [128];
    assert_int_equal (log_configure ("loud", NULL, false, err, sizeof err), -1);
    assert_non_null (strstr (err, "'loud'"));
    assert_int_equal (log_configure (NULL, "yaml", false, err, sizeof err), -1);
    assert_non_null (strstr (err, "'yaml'"));
    //  --verbose is at least debug; a bad value changes nothing
    assert_int_equal (log_level (), LOG_LEVEL_INFO);
    assert_int_equal (log_configure ("warn", NULL, true, err, sizeof err), 0);
    assert_int_equal (log_level (), LOG_LEVEL_DEBUG);
}

static void
test_log_json_carries_job_node_and_escapes (void **state)
{
    log_set_format (LOG_FORMAT_JSON);
    log_set_instance ("web-01");
    int saved = s_capture ();
    log_info ("job j-0193a1b2c3d4-0001 said \"hi\"\tand\\left\n");
    log_job (LOG_LEVEL_WARN, "j-0193a1b2c3d4-0002", "db-01", "about a job");
    log_info ("not a job: xj-0193a1b2c3d4-0001 j-0193a1b2c3d4-00011");
    char *text = s_release (saved);
    char *second = strchr (text, '\n') + 1;
    char *third = strchr (second, '\n') + 1;
    assert_non_null (strstr (text, "\"level\":\"info\",\"program\":\"gridtest\","));
    assert_non_null (strstr (text, "\"msg\":\"job j-0193a1b2c3d4-0001 said "
                                   "\\\"hi\\\"\\tand\\\\left\\n\""));
    assert_non_null (strstr (text, "\"job\":\"j-0193a1b2c3d4-0001\",\"node\":\"web-01\"}\n"));
    assert_non_null (strstr (second, "\"level\":\"warn\""));
    assert_non_null (strstr (second, "\"job\":\"j-0193a1b2c3d4-0002\",\"node\":\"db-01\"}\n"));
    assert_null (strstr (third, "\"job\""));
    assert_int_equal (strncmp (text, "{\"ts\":\"", 7), 0);
    free (text);
}

static void
test_log_audit_lines (void **state)
{
    //  JSON: "audit":true and the fields, a NULL value left out; written
    //  whatever the level
    log_set_format (LOG_FORMAT_JSON);
    log_set_level (LOG_LEVEL_ERROR);
    int saved = s_capture ();
    const char *fields [] = {"face", "zmq", "object", NULL, "who",
                             "al\"ice", NULL};
    log_audit ("audit: broker.drain by alice", fields);
    log_info ("not written at level error");
    char *text = s_release (saved);
    assert_non_null (strstr (text, "\"msg\":\"audit: broker.drain by alice\","
                                   "\"audit\":true,\"face\":\"zmq\","
                                   "\"who\":\"al\\\"ice\"}\n"));
    assert_null (strstr (text, "object"));
    assert_null (strstr (text, "not written"));
    free (text);
    //  Text: the message as any other line
    log_set_format (LOG_FORMAT_TEXT);
    saved = s_capture ();
    log_audit ("audit: key.accept by bob", NULL);
    text = s_release (saved);
    assert_non_null (strstr (text, " info: audit: key.accept by bob\n"));
    assert_null (strstr (text, "\"audit\""));
    free (text);
}

static void
test_log_journal_prefix_and_instance (void **state)
{
    int saved = s_capture ();
    struct stat st;
    assert_int_equal (fstat (STDERR_FILENO, &st), 0);
    char stream [64];
    snprintf (stream, sizeof stream, "%llu:%llu",
              (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
    setenv ("JOURNAL_STREAM", stream, 1);
    log_init ("gridtest");
    log_set_instance ("web-01");
    log_error ("broken");
    log_info ("fine");
    unsetenv ("JOURNAL_STREAM");
    log_init ("gridtest");
    log_info ("plain again");
    char *text = s_release (saved);
    assert_int_equal (strncmp (text, "<3>broken\n<6>fine\n", 18), 0);
    assert_non_null (strstr (text + 18, " gridtest[web-01] info: plain again\n"));
    free (text);
    //  A JOURNAL_STREAM for another file is not stderr: plain lines
    setenv ("JOURNAL_STREAM", "1:1", 1);
    log_init ("gridtest");
    unsetenv ("JOURNAL_STREAM");
    saved = s_capture ();
    log_info ("x");
    text = s_release (saved);
    assert_int_not_equal (text [0], '<');
    free (text);
}

//  What a task printed (newlines, tabs, terminal escapes) stays on its
//  own stamped line, its control bytes written escaped.
static void
test_log_text_escapes_control_bytes (void **state)
{
    int saved = s_capture ();
    log_info ("out: %s", "one\n2026-01-01T00:00:00.000Z gridagent info: "
              "forged\tx\x1b[31mred\r\x7f\x01");
    char *text = s_release (saved);
    assert_non_null (strstr (text, " gridtest info: out: one\\n2026-01-01T"
                                   "00:00:00.000Z gridagent info: forged\\tx"
                                   "\\x1b[31mred\\r\\x7f\\x01\n"));
    assert_int_equal (strchr (text, '\n') - text, (long) strlen (text) - 1);
    assert_null (strchr (text, '\x1b'));
    free (text);
    //  A long message of escapes is cut, the newline kept
    char long_msg [8000];
    memset (long_msg, '\x1b', sizeof long_msg - 1);
    long_msg [sizeof long_msg - 1] = 0;
    saved = s_capture ();
    log_info ("%s", long_msg);
    log_info ("after");
    text = s_release (saved);
    char *second = strchr (text, '\n');
    assert_non_null (second);
    assert_non_null (strstr (second + 1, " gridtest info: after\n"));
    free (text);
}

//  Decodes the JSON line LINE (up to its newline); asserts it is valid.
static json_t *
s_json_line (const char *line)
{
    const char *end = strchr (line, '\n');
    assert_non_null (end);
    json_error_t error;
    json_t *object = json_loadb (line, (size_t) (end - line), 0, &error);
    if (!object)
        fprintf (stderr, "not JSON (%s): %.*s\n", error.text,
                 (int) (end - line), line);
    assert_non_null (object);
    return object;
}

//  Whatever a message holds (escapes, bytes that are not UTF-8, more than
//  a line holds), a JSON line is one valid object with every field.
static void
test_log_json_lines_are_always_valid (void **state)
{
    log_set_format (LOG_FORMAT_JSON);
    char long_msg [8000];
    memset (long_msg, '\x1b', sizeof long_msg - 1);
    long_msg [sizeof long_msg - 1] = 0;
    int saved = s_capture ();
    log_info ("out: %s", "a\nb\x1b[0m\x7f caf\xc3\xa9 \xff\xc3 end");
    log_node (LOG_LEVEL_WARN, "db-01", "%s", long_msg);
    char *text = s_release (saved);
    json_t *first = s_json_line (text);
    assert_string_equal (json_string_value (json_object_get (first, "msg")),
                         "out: a\nb\x1b[0m\x7f caf\xc3\xa9 \xef\xbf\xbd"
                         "\xef\xbf\xbd end");
    json_decref (first);
    char *next = strchr (text, '\n') + 1;
    json_t *second = s_json_line (next);
    assert_string_equal (json_string_value (json_object_get (second, "node")),
                         "db-01");
    assert_string_equal (json_string_value (json_object_get (second, "level")),
                         "warn");
    assert_true (json_string_length (json_object_get (second, "msg")) > 1000);
    json_decref (second);
    assert_int_equal (*(strchr (next, '\n') + 1), 0);
    free (text);
}

//  log_node names the node a line is about: a field in JSON, the same
//  words in text.
static void
test_log_node_lines_carry_the_node (void **state)
{
    int saved = s_capture ();
    log_node (LOG_LEVEL_INFO, "web-01", "node %s registered", "web-01");
    log_set_format (LOG_FORMAT_JSON);
    log_node (LOG_LEVEL_INFO, "web-01", "node %s registered", "web-01");
    char *text = s_release (saved);
    assert_non_null (strstr (text, " gridtest info: node web-01 "
                                   "registered\n{"));
    assert_non_null (strstr (text, "\"msg\":\"node web-01 registered\","
                                   "\"node\":\"web-01\"}\n"));
    free (text);
}

//  A start-up error and its hints: one stamped line each, at error.
static void
test_log_lines_stamps_every_line (void **state)
{
    int saved = s_capture ();
    log_lines (LOG_LEVEL_ERROR, NULL, "no usable agent key: none\n"
               "  create one with: gridagent keygen\n");
    log_set_format (LOG_FORMAT_JSON);
    log_lines (LOG_LEVEL_ERROR, NULL, "cannot bind tcp://127.0.0.1:7701: "
               "Address already in use");
    char *text = s_release (saved);
    char *second = strchr (text, '\n') + 1;
    char *third = strchr (second, '\n') + 1;
    assert_non_null (strstr (text, " gridtest error: no usable agent key: "
                                   "none\n"));
    assert_int_equal (second [10], 'T');
    assert_non_null (strstr (second, " gridtest error:   create one with: "
                                     "gridagent keygen\n{"));
    json_t *object = s_json_line (third);
    assert_string_equal (json_string_value (json_object_get (object, "level")),
                         "error");
    assert_string_equal (json_string_value (json_object_get (object, "msg")),
                         "cannot bind tcp://127.0.0.1:7701: Address already "
                         "in use");
    json_decref (object);
    free (text);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup (test_log_text_lines_have_time_program_level, s_setup),
        cmocka_unit_test_setup (test_log_levels_filter, s_setup),
        cmocka_unit_test_setup (test_log_parse_and_configure, s_setup),
        cmocka_unit_test_setup (test_log_json_carries_job_node_and_escapes, s_setup),
        cmocka_unit_test_setup (test_log_journal_prefix_and_instance, s_setup),
        cmocka_unit_test_setup (test_log_text_escapes_control_bytes, s_setup),
        cmocka_unit_test_setup (test_log_json_lines_are_always_valid, s_setup),
        cmocka_unit_test_setup (test_log_node_lines_carry_the_node, s_setup),
        cmocka_unit_test_setup (test_log_lines_stamps_every_line, s_setup),
        cmocka_unit_test_setup (test_log_audit_lines, s_setup),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
