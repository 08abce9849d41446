/*  =========================================================================
    cron - cron expressions and their next fire time in a named time zone

    The search walks local calendar days (pure arithmetic on day numbers),
    and only for a day whose month and day match does it ask the C library
    for the zone's UTC offsets. A day with one offset maps each matching
    local minute L to the instant L - offset; a day around a transition
    checks each candidate against both offsets, which finds the DST gaps
    (no instant) and repeats (two instants).
    =========================================================================
*/
#include "cron.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define S_ZONEINFO "/usr/share/zoneinfo/"
#define S_DAY 86400LL

static void
s_err (char *err, size_t err_len, const char *format, ...)
{
    if (!err || err_len == 0)
        return;
    va_list args;
    va_start (args, format);
    vsnprintf (err, err_len, format, args);
    va_end (args);
}

//  ---------------------------------------------------------------------
//  Parsing

typedef struct {
    const char *name;             //  For messages
    int low, high;                //  Allowed values
    const char *const *names;     //  Value names from LOW, or NULL
} s_field_t;

static const char *const s_month_names [] = {
    "jan", "feb", "mar", "apr", "may", "jun",
    "jul", "aug", "sep", "oct", "nov", "dec", NULL};
static const char *const s_day_names [] = {
    "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL};

static const s_field_t s_fields [5] = {
    {"minute", 0, 59, NULL},
    {"hour", 0, 23, NULL},
    {"day-of-month", 1, 31, NULL},
    {"month", 1, 12, s_month_names},
    {"day-of-week", 0, 7, s_day_names}};

//  Reads a number or a name at *P into *VALUE. Returns 0 or -1.
static int
s_value (const s_field_t *field, const char **p, int *value, char *err,
         size_t err_len)
{
    const char *start = *p;
    if (**p >= '0' && **p <= '9') {
        long number = 0;
        while (**p >= '0' && **p <= '9' && number < 1000)
            number = number * 10 + (*(*p)++ - '0');
        if (number < field->low || number > field->high) {
            s_err (err, err_len, "%s: %.*s is out of range (%d-%d)",
                   field->name, (int) (*p - start), start, field->low,
                   field->high);
            return -1;
        }
        *value = (int) number;
        return 0;
    }
    while ((**p >= 'a' && **p <= 'z') || (**p >= 'A' && **p <= 'Z'))
        (*p)++;
    size_t len = (size_t) (*p - start);
    if (len == 3 && field->names)
        for (int i = 0; field->names [i]; i++)
            if (strncasecmp (start, field->names [i], 3) == 0) {
                *value = field->low + i;
                return 0;
            }
    if (len == 0)
        s_err (err, err_len, "%s: expected a number%s at '%.16s'",
               field->name, field->names ? " or a name" : "", start);
    else
        s_err (err, err_len, "%s: unknown name '%.*s'%s", field->name,
               (int) (len > 16 ? 16 : len), start,
               field->names == s_month_names ? " (jan..dec)"
               : field->names                ? " (sun..sat)"
                                             : " (numbers only)");
    return -1;
}

//  Parses one field TEXT (LEN bytes, no spaces) into *BITS.
static int
s_field_parse (const s_field_t *field, const char *text, size_t len,
               uint64_t *bits, char *err, size_t err_len)
{
    char buf [CRON_MAX_LEN + 1];
    memcpy (buf, text, len);
    buf [len] = '\0';
    *bits = 0;
    const char *p = buf;
    while (true) {
        int low = field->low, high = field->high, step = 1;
        bool range = true;
        if (*p == '*')
            p++;
        else {
            if (s_value (field, &p, &low, err, err_len) != 0)
                return -1;
            high = low;
            range = false;
            if (*p == '-') {
                p++;
                if (s_value (field, &p, &high, err, err_len) != 0)
                    return -1;
                range = true;
                if (high < low) {
                    s_err (err, err_len, "%s: range %d-%d runs backwards",
                           field->name, low, high);
                    return -1;
                }
            }
        }
        if (*p == '/') {
            if (!range) {
                s_err (err, err_len, "%s: a step needs a range or '*' "
                                     "(like */15 or 5-59/15)",
                       field->name);
                return -1;
            }
            p++;
            if (*p < '0' || *p > '9') {
                s_err (err, err_len, "%s: a step needs a number after '/'",
                       field->name);
                return -1;
            }
            long number = 0;
            while (*p >= '0' && *p <= '9' && number < 1000)
                number = number * 10 + (*p++ - '0');
            if (number < 1 || number > field->high) {
                s_err (err, err_len, "%s: step %ld is out of range (1-%d)",
                       field->name, number, field->high);
                return -1;
            }
            step = (int) number;
        }
        for (int v = low; v <= high; v += step)
            *bits |= 1ULL << v;
        if (*p == '\0')
            return 0;
        if (*p != ',') {
            s_err (err, err_len, "%s: unexpected '%c' in '%s'", field->name,
                   *p >= ' ' && *p < 127 ? *p : '?', buf);
            return -1;
        }
        p++;
    }
}

int
cron_parse (const char *text, cron_t *cron, char *err, size_t err_len)
{
    static const struct {
        const char *name, *expansion;
    } macros [] = {{"@hourly", "0 * * * *"},   {"@daily", "0 0 * * *"},
                   {"@midnight", "0 0 * * *"}, {"@weekly", "0 0 * * 0"},
                   {"@monthly", "0 0 1 * *"},  {"@yearly", "0 0 1 1 *"},
                   {"@annually", "0 0 1 1 *"}};
    memset (cron, 0, sizeof (*cron));
    if (!text || !*text) {
        s_err (err, err_len, "cron expression is empty (like \"*/5 * * * *\")");
        return -1;
    }
    size_t text_len = strnlen (text, CRON_MAX_LEN + 1);
    if (text_len > CRON_MAX_LEN) {
        s_err (err, err_len, "cron expression is too long (at most %d bytes)",
               CRON_MAX_LEN);
        return -1;
    }
    if (text [0] == '@') {
        for (size_t i = 0; i < sizeof macros / sizeof macros [0]; i++)
            if (strcmp (text, macros [i].name) == 0)
                return cron_parse (macros [i].expansion, cron, err, err_len);
        s_err (err, err_len, "unknown cron macro '%.32s' (@hourly, @daily, "
                             "@weekly, @monthly, @yearly)", text);
        return -1;
    }
    const char *p = text;
    uint64_t bits [5];
    bool star [5];
    for (int f = 0; f < 5; f++) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *start = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
        if (p == start) {
            s_err (err, err_len, "cron expression needs 5 fields (minute "
                                 "hour day-of-month month day-of-week), got "
                                 "%d", f);
            return -1;
        }
        star [f] = *start == '*';
        if (s_field_parse (&s_fields [f], start, (size_t) (p - start),
                           &bits [f], err, err_len) != 0)
            return -1;
    }
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p) {
        s_err (err, err_len, "cron expression has more than 5 fields at "
                             "'%.16s'", p);
        return -1;
    }
    cron->minutes = bits [0];
    cron->hours = (uint32_t) bits [1];
    cron->days = (uint32_t) bits [2];
    cron->months = (uint16_t) bits [3];
    //  7 is Sunday too
    cron->weekdays = (uint8_t) ((bits [4] | bits [4] >> 7) & 0x7f);
    cron->day_star = star [2];
    cron->weekday_star = star [4];
    cron->fixed_time = !star [0] && !star [1];
    return 0;
}

//  ---------------------------------------------------------------------
//  Time zones

int
cron_tz_name_check (const char *tz, char *err, size_t err_len)
{
    if (!tz || !*tz || strcmp (tz, "UTC") == 0)
        return 0;
    size_t len = strnlen (tz, CRON_TZ_MAX_LEN + 1);
    bool ok = len <= CRON_TZ_MAX_LEN && tz [0] != '/';
    const char *part = tz;
    for (size_t i = 0; ok && i <= len; i++) {
        char c = tz [i];
        if (c == '/' || c == '\0') {
            size_t part_len = (size_t) (tz + i - part);
            if (part_len == 0 || (part_len == 1 && part [0] == '.')
                || (part_len == 2 && part [0] == '.' && part [1] == '.'))
                ok = false;
            part = tz + i + 1;
        }
        else
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '_' || c == '+' || c == '-'
              || c == '.'))
            ok = false;
    }
    if (!ok) {
        s_err (err, err_len, "time zone '%.64s' is not a zone name (like "
                             "Europe/Berlin or UTC)", tz);
        return -1;
    }
    return 0;
}

bool
cron_tz_local (void)
{
    struct stat info;
    return stat (S_ZONEINFO "UTC", &info) == 0;
}

int
cron_tz_check (const char *tz, char *err, size_t err_len)
{
    if (cron_tz_name_check (tz, err, err_len) != 0)
        return -1;
    if (!tz || !*tz || strcmp (tz, "UTC") == 0)
        return 0;
    char path [sizeof S_ZONEINFO + CRON_TZ_MAX_LEN];
    snprintf (path, sizeof path, "%s%s", S_ZONEINFO, tz);
    FILE *file = fopen (path, "rb");
    char magic [4] = {0};
    size_t got = file ? fread (magic, 1, 4, file) : 0;
    if (file)
        fclose (file);
    if (got != 4 || memcmp (magic, "TZif", 4) != 0) {
        s_err (err, err_len, "unknown time zone '%s' (not in %s)", tz,
               S_ZONEINFO);
        return -1;
    }
    return 0;
}

//  TZ as it was before s_zone_enter, to put back.
typedef struct {
    bool utc;                     //  Nothing was changed
    bool had;                     //  TZ was set
    char saved [256];             //  Its value
} s_zone_t;

static int
s_zone_enter (s_zone_t *zone, const char *tz)
{
    memset (zone, 0, sizeof (*zone));
    if (!tz || !*tz || strcmp (tz, "UTC") == 0) {
        zone->utc = true;
        return 0;
    }
    if (cron_tz_check (tz, NULL, 0) != 0)
        return -1;
    const char *old = getenv ("TZ");
    if (old && strlen (old) < sizeof zone->saved) {
        zone->had = true;
        strcpy (zone->saved, old);
    }
    char value [CRON_TZ_MAX_LEN + 2];
    snprintf (value, sizeof value, ":%s", tz);
    if (setenv ("TZ", value, 1) != 0)
        return -1;
    tzset ();
    return 0;
}

static void
s_zone_leave (s_zone_t *zone)
{
    if (zone->utc)
        return;
    if (zone->had)
        setenv ("TZ", zone->saved, 1);
    else
        unsetenv ("TZ");
    tzset ();
}

//  The zone's offset from UTC, in seconds, at instant T.
static int64_t
s_offset (const s_zone_t *zone, int64_t t)
{
    if (zone->utc)
        return 0;
    time_t when = (time_t) t;
    struct tm tm;
    if (!localtime_r (&when, &tm))
        return 0;
    return tm.tm_gmtoff;
}

//  ---------------------------------------------------------------------
//  Calendar arithmetic (days since 1970-01-01, proleptic Gregorian;
//  Howard Hinnant's civil_from_days)

static void
s_civil_from_days (int64_t z, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int) (doy - (153 * mp + 2) / 5 + 1);
    *m = (int) (mp < 10 ? mp + 3 : mp - 9);
}

static bool
s_day_matches (const cron_t *cron, int64_t day)
{
    int month, mday;
    s_civil_from_days (day, &month, &mday);
    if (!(cron->months & (1u << month)))
        return false;
    int weekday = (int) (((day % 7) + 11) % 7);   //  1970-01-01 was a Thursday
    bool by_mday = cron->days & (1u << mday);
    bool by_wday = cron->weekdays & (1u << weekday);
    if (!cron->day_star && !cron->weekday_star)
        return by_mday || by_wday;
    return by_mday && by_wday;
}

//  The first instant in [LO, HI] whose offset is that at HI, given the
//  offset at LO differs (the transition).
static int64_t
s_transition (const s_zone_t *zone, int64_t lo, int64_t hi)
{
    int64_t want = s_offset (zone, hi);
    while (hi - lo > 1) {
        int64_t mid = lo + (hi - lo) / 2;
        if (s_offset (zone, mid) == want)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

//  The earliest instant > AFTER (seconds) at which CRON fires on local
//  day DAY, or INT64_MAX.
static int64_t
s_first_on_day (const cron_t *cron, const s_zone_t *zone, int64_t day,
                int64_t after)
{
    int64_t midnight = day * S_DAY;               //  Local midnight as UTC
    int64_t off_before = s_offset (zone, midnight - S_DAY);
    int64_t off_after = s_offset (zone, midnight + 2 * S_DAY);
    int64_t best = INT64_MAX;
    for (int hour = 0; hour < 24; hour++) {
        if (!(cron->hours & (1u << hour)))
            continue;
        for (int minute = 0; minute < 60; minute++) {
            if (!(cron->minutes & (1ULL << minute)))
                continue;
            int64_t local = midnight + hour * 3600 + minute * 60;
            if (off_before == off_after) {
                int64_t t = local - off_before;
                if (t > after)
                    return t;             //  Minutes come in order
                continue;
            }
            //  Near a transition: which offsets make LOCAL real?
            int64_t first = local - (off_before > off_after ? off_before
                                                            : off_after);
            int64_t second = local - (off_before > off_after ? off_after
                                                             : off_before);
            bool first_real = first + s_offset (zone, first) == local;
            bool second_real = second != first
                            && second + s_offset (zone, second) == local;
            int64_t t = INT64_MAX;
            if (first_real && first > after)
                t = first;
            else
            if (second_real && second > after
                && (!first_real || !cron->fixed_time))
                //  A repeated time: once for a fixed-time job, both
                //  passes for a wildcard one
                t = second;
            else
            if (!first_real && !second_real && cron->fixed_time) {
                //  A skipped time: once, when the gap ends
                int64_t end = s_transition (zone, midnight - S_DAY,
                                            midnight + 2 * S_DAY);
                if (end > after)
                    t = end;
            }
            if (t < best)
                best = t;
        }
    }
    return best;
}

int64_t
cron_next (const cron_t *cron, const char *tz, int64_t after_ms)
{
    if (!cron->minutes || !cron->hours || !cron->months
        || (!cron->days && !cron->weekdays))
        return -1;
    s_zone_t zone;
    if (s_zone_enter (&zone, tz) != 0)
        return -1;
    int64_t after = after_ms >= 0 ? after_ms / 1000
                                  : -((-after_ms + 999) / 1000);
    int64_t local_now = after + s_offset (&zone, after);
    int64_t day = local_now >= 0 ? local_now / S_DAY
                                 : -((-local_now + S_DAY - 1) / S_DAY);
    //  A transition can put the first run in the day before
    day--;
    //  The first day with a run, and the day after it (a repeated hour
    //  may put an earlier instant there)
    int64_t best = INT64_MAX;
    int64_t last_day = day + CRON_SEARCH_YEARS * 366;
    for (; day <= last_day; day++) {
        if (!s_day_matches (cron, day))
            continue;
        int64_t t = s_first_on_day (cron, &zone, day, after);
        if (t < best)
            best = t;
        if (best != INT64_MAX && last_day > day + 1)
            last_day = day + 1;
    }
    s_zone_leave (&zone);
    return best == INT64_MAX ? -1 : best * 1000;
}
