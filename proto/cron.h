/*  =========================================================================
    cron - cron expressions and their next fire time in a named time zone

    The standard 5 fields, as Vixie cron reads them:
        minute hour day-of-month month day-of-week
        0-59   0-23 1-31         1-12  0-7 (0 and 7 are Sunday)
    Each field is a list of items joined by ',': '*', N, N-M, '*'/S or
    N-M/S (every S-th value of the range). Months and weekdays may be
    written by name, case-insensitive: jan..dec, sun..sat (also in ranges:
    mon-fri). "@hourly", "@daily" (= "@midnight"), "@weekly", "@monthly",
    "@yearly" (= "@annually") stand for their usual expressions. A single
    number with a step ("5/15") is refused, as Vixie cron refuses it.

    Day rule (Vixie): when both day-of-month and day-of-week are restricted
    (neither field starts with '*'), a day matches when EITHER matches;
    otherwise both must ("0 0 13 * fri" runs on every 13th and every
    Friday; "0 0 * * fri" on every Friday, since its day-of-month starts
    with '*').

    Time zones are tzdata names (Europe/Berlin, UTC, America/New_York),
    read from /usr/share/zoneinfo through the C library: cron_next sets TZ
    to ":<name>", calls tzset and localtime_r, and puts TZ back as it was
    before it returns. That is safe only because the one thread that calls
    cron_next (the broker's reactor, or a test) is the only thread of the
    process that converts local time or reads TZ: ZeroMQ's I/O threads
    never do, and the broker never turns on CZMQ's verbose ZAP logging, the
    one other thread that could. Do not call it from any other thread. UTC
    and "" never touch the environment.

    Daylight saving time, as Vixie cron and cronie handle it (cron(8)):
    - A local time that does not exist (the hour skipped in spring): a
      job at a fixed time (neither minute nor hour field starts with '*')
      runs once at the first minute after the gap, "30 2 * * *" at 03:00
      on that day; a job with '*' in the minute or hour field simply has
      no run in the missing hour.
    - A local time that happens twice (the hour repeated in autumn): a job
      at a fixed time runs once, at the first occurrence; a job with '*' in
      the minute or hour field runs on both passes, since it follows real
      time ("0,30 * * * *" keeps running every 30 minutes).

    Everything is pure apart from reading zoneinfo: no wall clock, no
    global state beyond TZ while cron_next runs.
    =========================================================================
*/
#ifndef GRID_CRON_H
#define GRID_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CRON_MAX_LEN 256          //  Longest expression text
#define CRON_TZ_MAX_LEN 64        //  Longest time zone name
#define CRON_SEARCH_YEARS 8       //  cron_next looks this far ahead

typedef struct {
    uint64_t minutes;             //  Bit m set: minute m (0-59) matches
    uint32_t hours;               //  Bit h: hour h (0-23)
    uint32_t days;                //  Bit d: day of month d (1-31)
    uint16_t months;              //  Bit m: month m (1-12)
    uint8_t weekdays;             //  Bit w: weekday w (0 = Sunday .. 6)
    bool day_star;                //  Day-of-month field starts with '*'
    bool weekday_star;            //  Day-of-week field starts with '*'
    bool fixed_time;              //  Neither minute nor hour starts with '*'
} cron_t;

//  Parses TEXT into *CRON. Returns 0, or -1 with a sentence in ERR that
//  names the field ("hour: 24 is out of range (0-23)").
int cron_parse (const char *text, cron_t *cron, char *err, size_t err_len);

//  True when TZ names a zone in /usr/share/zoneinfo: 1 to
//  CRON_TZ_MAX_LEN of [A-Za-z0-9_+-] in '/'-separated parts, none "." or
//  "..", and the file starts with "TZif". "UTC" is always valid. Returns
//  0, or -1 with a sentence in ERR.
int cron_tz_check (const char *tz, char *err, size_t err_len);

//  The name part of cron_tz_check alone (no file read): what a client
//  can check of a zone that the broker's machine resolves. Returns 0, or
//  -1 with a sentence in ERR.
int cron_tz_name_check (const char *tz, char *err, size_t err_len);

//  True when this machine has the time zone database (zoneinfo's UTC),
//  so that cron_tz_check can tell a known zone from an unknown one here.
bool cron_tz_local (void);

//  The first time CRON fires strictly after AFTER_MS (Unix epoch ms) in
//  zone TZ (NULL or "" = UTC), in Unix epoch ms (whole minutes, or the
//  instant a DST gap ends). -1 when it never fires within
//  CRON_SEARCH_YEARS ("0 0 30 2 *") or TZ is not a valid zone.
int64_t cron_next (const cron_t *cron, const char *tz, int64_t after_ms);

#endif
