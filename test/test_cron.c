/*  =========================================================================
    test_cron - cron expressions, next fire times, time zones and DST

    No wall clock: every "now" is a fixed instant written in UTC.
    =========================================================================
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../proto/cron.h"

//  "2026-03-29 01:30" (UTC) as epoch ms.
static int64_t
s_utc (const char *text)
{
    struct tm tm;
    memset (&tm, 0, sizeof tm);
    assert_non_null (strptime (text, "%Y-%m-%d %H:%M", &tm));
    return (int64_t) timegm (&tm) * 1000;
}

//  Epoch ms as "2026-03-29 01:30" (UTC), in a static buffer.
static const char *
s_text (int64_t ms)
{
    static char buf [8][32];
    static int turn;
    char *out = buf [turn++ % 8];
    if (ms < 0)
        return strcpy (out, "never");
    time_t t = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r (&t, &tm);
    strftime (out, 32, "%Y-%m-%d %H:%M", &tm);
    if (ms % 60000)
        sprintf (out + strlen (out), ":%02d", (int) (ms / 1000 % 60));
    return out;
}

static cron_t
s_cron (const char *text)
{
    cron_t cron;
    char err [256] = "";
    int rc = cron_parse (text, &cron, err, sizeof err);
    if (rc != 0)
        print_error ("cron '%s': %s\n", text, err);
    assert_int_equal (rc, 0);
    return cron;
}

//  The next COUNT fire times of TEXT in TZ after AFTER (UTC text), joined
//  by ", ".
static char *
s_runs (const char *text, const char *tz, const char *after, int count)
{
    cron_t cron = s_cron (text);
    static char out [1024];
    out [0] = '\0';
    int64_t t = s_utc (after);
    for (int i = 0; i < count; i++) {
        t = cron_next (&cron, tz, t);
        if (i)
            strcat (out, ", ");
        strcat (out, s_text (t));
        if (t < 0)
            break;
    }
    return out;
}

static void
s_assert_cron_error (const char *text, const char *expected)
{
    cron_t cron;
    char err [256] = "";
    int rc = cron_parse (text, &cron, err, sizeof err);
    if (rc == 0 || !strstr (err, expected))
        print_error ("cron '%s': rc %d, error '%s', expected '%s'\n", text,
                     rc, err, expected);
    assert_int_equal (rc, -1);
    assert_non_null (strstr (err, expected));
}

static void
test_cron_parse_fields (void **state)
{
    cron_t cron = s_cron ("*/15 0-6/2,12 1,15 jan-mar,DEC mon-fri");
    assert_int_equal (cron.minutes, 1ULL << 0 | 1ULL << 15 | 1ULL << 30
                                        | 1ULL << 45);
    assert_int_equal (cron.hours, 1u << 0 | 1u << 2 | 1u << 4 | 1u << 6
                                      | 1u << 12);
    assert_int_equal (cron.days, 1u << 1 | 1u << 15);
    assert_int_equal (cron.months, 1u << 1 | 1u << 2 | 1u << 3 | 1u << 12);
    assert_int_equal (cron.weekdays, 0x3e);
    assert_false (cron.day_star);
    assert_false (cron.weekday_star);
    assert_false (cron.fixed_time);

    cron = s_cron ("30 2 * * 7");          //  7 is Sunday
    assert_int_equal (cron.weekdays, 1);
    assert_true (cron.fixed_time);
    assert_true (cron.day_star);
    cron = s_cron ("0 0 * * sun,6-7");
    assert_int_equal (cron.weekdays, 1 | 1 << 6);
    cron = s_cron ("  5   4\t* * *  ");
    assert_int_equal (cron.minutes, 1ULL << 5);
    cron = s_cron ("* * * * *");
    assert_int_equal (cron.minutes, (1ULL << 60) - 1);
    assert_int_equal (cron.days, 0xfffffffe);
    cron = s_cron ("@daily");
    assert_int_equal (cron.minutes, 1);
    assert_int_equal (cron.hours, 1);
    cron = s_cron ("@weekly");
    assert_int_equal (cron.weekdays, 1);
    assert_false (cron.weekday_star);
    cron = s_cron ("59 23 31 12 *");
    assert_int_equal (cron.days, 1u << 31);
}

static void
test_cron_parse_errors (void **state)
{
    s_assert_cron_error ("", "cron expression is empty");
    s_assert_cron_error (NULL, "cron expression is empty");
    s_assert_cron_error ("* * * *", "needs 5 fields (minute hour "
                                    "day-of-month month day-of-week), got 4");
    s_assert_cron_error ("* * * * * *", "more than 5 fields");
    s_assert_cron_error ("60 * * * *", "minute: 60 is out of range (0-59)");
    s_assert_cron_error ("* 24 * * *", "hour: 24 is out of range (0-23)");
    s_assert_cron_error ("* * 0 * *", "day-of-month: 0 is out of range");
    s_assert_cron_error ("* * 32 * *", "day-of-month: 32 is out of range");
    s_assert_cron_error ("* * * 13 *", "month: 13 is out of range (1-12)");
    s_assert_cron_error ("* * * * 8", "day-of-week: 8 is out of range (0-7)");
    s_assert_cron_error ("* * * foo *", "month: unknown name 'foo' "
                                        "(jan..dec)");
    s_assert_cron_error ("* * * * sunday", "unknown name 'sunday'");
    s_assert_cron_error ("mon * * * *", "minute: unknown name 'mon' "
                                        "(numbers only)");
    s_assert_cron_error ("5/15 * * * *", "minute: a step needs a range or "
                                         "'*'");
    s_assert_cron_error ("*/0 * * * *", "minute: step 0 is out of range");
    s_assert_cron_error ("*/ * * * *", "a step needs a number after '/'");
    s_assert_cron_error ("10-5 * * * *", "minute: range 10-5 runs backwards");
    s_assert_cron_error ("1,,2 * * * *", "minute: expected a number");
    s_assert_cron_error ("1- * * * *", "minute: expected a number");
    s_assert_cron_error ("1;2 * * * *", "minute: unexpected ';'");
    s_assert_cron_error ("99999999999999 * * * *", "out of range");
    s_assert_cron_error ("@reboot", "unknown cron macro '@reboot'");
    char text [CRON_MAX_LEN + 8];
    memset (text, ' ', sizeof text);
    memcpy (text, "* * * * *", 9);
    text [sizeof text - 1] = '\0';
    s_assert_cron_error (text, "too long");
}

static void
test_cron_next_utc (void **state)
{
    assert_string_equal (s_runs ("*/5 * * * *", NULL, "2026-11-25 12:03", 3),
                         "2026-11-25 12:05, 2026-11-25 12:10, "
                         "2026-11-25 12:15");
    //  Strictly after: a run at exactly AFTER is not the next one
    assert_string_equal (s_runs ("*/5 * * * *", "UTC", "2026-11-25 12:05", 1),
                         "2026-11-25 12:10");
    //  Seconds into a minute still give the next whole minute
    cron_t every = s_cron ("* * * * *");
    assert_string_equal (s_text (cron_next (&every, NULL,
                                            s_utc ("2026-01-01 00:00")
                                                + 59999)),
                         "2026-01-01 00:01");
    //  Weekdays over a weekend (2026-11-27 is a Friday)
    assert_string_equal (s_runs ("0 9 * * mon-fri", NULL, "2026-11-27 10:00",
                                 2),
                         "2026-11-30 09:00, 2026-12-01 09:00");
    //  Day-of-month OR day-of-week when both are restricted: the 13th, or
    //  any Friday (2026-11-13 is a Friday, 2026-12-13 a Sunday)
    assert_string_equal (s_runs ("0 0 13 * fri", NULL, "2026-11-27 10:00", 3),
                         "2026-12-04 00:00, 2026-12-11 00:00, "
                         "2026-12-13 00:00");
    //  ... but AND when one starts with '*': odd days that are Fridays
    assert_string_equal (s_runs ("0 0 */2 * fri", NULL, "2026-11-27 10:00",
                                 2),
                         "2026-12-11 00:00, 2026-12-25 00:00");
    //  Sunday as 0 and as 7
    assert_string_equal (s_runs ("0 0 * * 7", NULL, "2026-11-25 00:00", 1),
                         "2026-11-29 00:00");
    assert_string_equal (s_runs ("0 0 * * 0", NULL, "2026-11-25 00:00", 1),
                         "2026-11-29 00:00");
    //  Leap days, month ends, year ends
    assert_string_equal (s_runs ("0 12 29 feb *", NULL, "2026-03-01 00:00",
                                 2),
                         "2028-02-29 12:00, 2032-02-29 12:00");
    assert_string_equal (s_runs ("0 0 31 * *", NULL, "2026-11-25 00:00", 3),
                         "2026-12-31 00:00, 2027-01-31 00:00, "
                         "2027-03-31 00:00");
    assert_string_equal (s_runs ("59 23 31 12 *", NULL, "2026-12-31 23:59",
                                 1),
                         "2027-12-31 23:59");
    //  Never: February 30th
    assert_string_equal (s_runs ("0 0 30 2 *", NULL, "2026-01-01 00:00", 1),
                         "never");
}

static void
test_cron_next_in_a_zone (void **state)
{
    //  09:00 in Berlin is 08:00 UTC in winter (CET, +1), 07:00 in summer
    assert_string_equal (s_runs ("0 9 * * *", "Europe/Berlin",
                                 "2026-11-25 12:00", 1),
                         "2026-11-26 08:00");
    assert_string_equal (s_runs ("0 9 * * *", "Europe/Berlin",
                                 "2026-07-01 12:00", 1),
                         "2026-07-02 07:00");
    //  Midnight local is the day before in UTC: the day is the local one
    //  (2026-11-27 is a Friday in Berlin from 23:00 UTC on the 26th)
    assert_string_equal (s_runs ("0 0 * * fri", "Europe/Berlin",
                                 "2026-11-25 00:00", 1),
                         "2026-11-26 23:00");
    //  New York, west of UTC: 20:00 EST is 01:00 UTC the next day
    assert_string_equal (s_runs ("0 20 * * *", "America/New_York",
                                 "2026-11-25 00:00", 2),
                         "2026-11-25 01:00, 2026-11-26 01:00");
    //  Whole-hour-less zones work too (India, +05:30)
    assert_string_equal (s_runs ("0 9 * * *", "Asia/Kolkata",
                                 "2026-11-25 00:00", 1),
                         "2026-11-25 03:30");
    //  TZ is put back as it was
    setenv ("TZ", "UTC0", 1);
    s_runs ("0 9 * * *", "Europe/Berlin", "2026-11-25 12:00", 1);
    assert_string_equal (getenv ("TZ"), "UTC0");
    unsetenv ("TZ");
    s_runs ("0 9 * * *", "Europe/Berlin", "2026-11-25 12:00", 1);
    assert_null (getenv ("TZ"));
}

//  Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC); local
//  02:00-02:59 does not exist.
static void
test_cron_dst_gap (void **state)
{
    const char *tz = "Europe/Berlin";
    //  A fixed-time job in the gap runs once, when the gap ends (03:00
    //  CEST = 01:00 UTC), then at its time again
    assert_string_equal (s_runs ("30 2 * * *", tz, "2026-03-27 12:00", 4),
                         "2026-03-28 01:30, 2026-03-29 01:00, "
                         "2026-03-30 00:30, 2026-03-31 00:30");
    //  Two fixed times in the gap still run once
    assert_string_equal (s_runs ("0,30 2 * * *", tz, "2026-03-28 23:00", 2),
                         "2026-03-29 01:00, 2026-03-30 00:00");
    //  A wildcard job has no runs in the missing hour
    assert_string_equal (s_runs ("30 * * * *", tz, "2026-03-28 23:45", 3),
                         "2026-03-29 00:30, 2026-03-29 01:30, "
                         "2026-03-29 02:30");
    assert_string_equal (s_runs ("*/30 * * * *", tz, "2026-03-29 00:00", 4),
                         "2026-03-29 00:30, 2026-03-29 01:00, "
                         "2026-03-29 01:30, 2026-03-29 02:00");
    //  New York, 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC)
    assert_string_equal (s_runs ("15 2 * * *", "America/New_York",
                                 "2026-03-07 12:00", 2),
                         "2026-03-08 07:00, 2026-03-09 06:15");
}

//  Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); local
//  02:00-02:59 happens twice (00:00-00:59 and 01:00-01:59 UTC).
static void
test_cron_dst_repeat (void **state)
{
    const char *tz = "Europe/Berlin";
    //  A fixed-time job runs once, on the first pass
    assert_string_equal (s_runs ("30 2 * * *", tz, "2026-10-24 12:00", 3),
                         "2026-10-25 00:30, 2026-10-26 01:30, "
                         "2026-10-27 01:30");
    //  Asked from inside the repeated hour, after the first pass: no
    //  second run
    assert_string_equal (s_runs ("30 2 * * *", tz, "2026-10-25 00:45", 1),
                         "2026-10-26 01:30");
    //  A wildcard job follows real time through both passes
    assert_string_equal (s_runs ("*/30 * * * *", tz, "2026-10-24 23:45", 6),
                         "2026-10-25 00:00, 2026-10-25 00:30, "
                         "2026-10-25 01:00, 2026-10-25 01:30, "
                         "2026-10-25 02:00, 2026-10-25 02:30");
    assert_string_equal (s_runs ("15 * * * *", tz, "2026-10-24 23:30", 3),
                         "2026-10-25 00:15, 2026-10-25 01:15, "
                         "2026-10-25 02:15");
}

static void
test_cron_time_zones (void **state)
{
    char err [256] = "";
    assert_int_equal (cron_tz_check ("Europe/Berlin", err, sizeof err), 0);
    assert_int_equal (cron_tz_check ("UTC", err, sizeof err), 0);
    assert_int_equal (cron_tz_check (NULL, err, sizeof err), 0);
    assert_int_equal (cron_tz_check ("America/Argentina/Buenos_Aires", err,
                                     sizeof err),
                      0);
    assert_int_equal (cron_tz_check ("Etc/GMT+5", err, sizeof err), 0);
    const char *bad [] = {"Mars/Olympus", "../../etc/passwd", "/etc/passwd",
                          "Europe/../UTC", "Europe//Berlin", "Europe/",
                          "Europe/Berlin\n", "Europe", "zone.tab"};
    for (size_t i = 0; i < sizeof bad / sizeof bad [0]; i++) {
        err [0] = '\0';
        if (cron_tz_check (bad [i], err, sizeof err) == 0)
            print_error ("zone '%s' was accepted\n", bad [i]);
        assert_int_equal (cron_tz_check (bad [i], err, sizeof err), -1);
        assert_true (strlen (err) > 0);
    }
    assert_int_equal (cron_tz_check ("Mars/Olympus", err, sizeof err), -1);
    assert_string_equal (err, "unknown time zone 'Mars/Olympus' (not in "
                              "/usr/share/zoneinfo/)");
    char long_name [CRON_TZ_MAX_LEN + 2];
    memset (long_name, 'a', sizeof long_name);
    long_name [sizeof long_name - 1] = '\0';
    assert_int_equal (cron_tz_check (long_name, err, sizeof err), -1);
    //  The name alone: well formed passes, whatever the database holds
    assert_true (cron_tz_local ());
    assert_int_equal (cron_tz_name_check ("Mars/Olympus", err, sizeof err), 0);
    assert_int_equal (cron_tz_name_check ("Europe/Berlin", err, sizeof err), 0);
    const char *malformed [] = {"../../etc/passwd", "/etc/passwd",
                                "Europe/../UTC", "Europe//Berlin", "Europe/",
                                "Europe/Berlin\n", long_name};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed [0]; i++)
        assert_int_equal (cron_tz_name_check (malformed [i], err, sizeof err),
                          -1);
    //  A bad zone never fires
    cron_t cron = s_cron ("* * * * *");
    assert_int_equal (cron_next (&cron, "Mars/Olympus", 0), -1);
}

int
main (void)
{
    const struct CMUnitTest tests [] = {
        cmocka_unit_test (test_cron_parse_fields),
        cmocka_unit_test (test_cron_parse_errors),
        cmocka_unit_test (test_cron_next_utc),
        cmocka_unit_test (test_cron_next_in_a_zone),
        cmocka_unit_test (test_cron_dst_gap),
        cmocka_unit_test (test_cron_dst_repeat),
        cmocka_unit_test (test_cron_time_zones),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
