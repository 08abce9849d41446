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

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test_setup (test_log_text_lines_have_time_program_level, s_setup),
        cmocka_unit_test_setup (test_log_levels_filter, s_setup),
        cmocka_unit_test_setup (test_log_parse_and_configure, s_setup),
        cmocka_unit_test_setup (test_log_json_carries_job_node_and_escapes, s_setup),
        cmocka_unit_test_setup (test_log_journal_prefix_and_instance, s_setup),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
