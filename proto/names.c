/*  =========================================================================
    names - names, targets, topics, durations, ids and timestamps

    Everything here is pure text handling with no I/O and no global state,
    so the broker, the agent and gridcli check names and targets the same
    way at every boundary.
    =========================================================================
*/
#include "names.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LABEL_MAX_SEGMENTS 8
#define DURATION_MAX_MS (30LL * 24 * 3600 * 1000)
#define JOB_ID_MAX_MS 0xffffffffffffLL   //  12 hex digits
#define JOB_ID_MAX_SEQ 0xffffu           //  4 hex digits
#define JOB_ID_CHARS 19                  //  "j-" + 12 + "-" + 4
#define SHOW_MAX 48                      //  User text quoted in errors

static const char *s_name_rule =
    "use letters, digits, '_' and '-' (1 to 64)";
static const char *s_target_forms =
    "all, group:G, node:ID[,ID...], label:KEY=V1.V2, any[:TARGET]";

//  Writes a sentence into ERR when there is room for one.
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

//  NUL-terminated TEXT quoted for an error, in SHOW (NAME_SHOW_LEN bytes).
static const char *
s_show (const char *text, char *show)
{
    return name_show (text, strlen (text), show, NAME_SHOW_LEN);
}

static bool
s_streq (const char *a, const char *b)
{
    return strcmp (a, b) == 0;
}

static bool
s_name_char (char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

//  True when the LEN bytes at TEXT form a valid name segment.
static bool
s_name_valid_n (const char *text, size_t len)
{
    if (len == 0 || len > NAME_MAX_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!s_name_char (text [i]))
            return false;
    return true;
}

bool
name_valid (const char *text)
{
    if (!text)
        return false;
    return s_name_valid_n (text, strnlen (text, NAME_MAX_LEN + 1));
}

bool
name_label_value_valid (const char *text)
{
    if (!text)
        return false;
    size_t segments = 0;
    const char *start = text;
    while (true) {
        const char *dot = strchr (start, '.');
        size_t len = dot ? (size_t) (dot - start) : strlen (start);
        if (!s_name_valid_n (start, len) || ++segments > LABEL_MAX_SEGMENTS)
            return false;
        if (!dot)
            return true;
        start = dot + 1;
    }
}

//  ---------------------------------------------------------------------
//  Targets

static int
s_compare_strings (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

//  Splits a node list into TARGET->nodes, checking each id, the count and
//  duplicates.
static int
s_parse_nodes (const char *value, target_t *target, char *err,
               size_t err_len)
{
    char show [NAME_SHOW_LEN];
    size_t count = 1;
    for (const char *p = value; *p; p++)
        if (*p == ',')
            count++;
    if (count > TARGET_MAX_NODES) {
        s_err (err, err_len, "too many node ids (%zu, at most %d)", count,
               TARGET_MAX_NODES);
        return -1;
    }
    target->nodes = calloc (count, sizeof (char *));
    if (!target->nodes) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    const char *start = value;
    for (size_t i = 0; i < count; i++) {
        const char *comma = strchr (start, ',');
        size_t len = comma ? (size_t) (comma - start) : strlen (start);
        char *id = strndup (start, len);
        if (!id) {
            s_err (err, err_len, "out of memory");
            return -1;
        }
        target->nodes [target->node_count++] = id;
        if (!s_name_valid_n (id, len)) {
            s_err (err, err_len, "node id '%s' is not valid: %s",
                   s_show (id, show), s_name_rule);
            return -1;
        }
        start = comma ? comma + 1 : start + len;
    }
    //  Duplicates are found on a sorted copy so the list keeps its order
    char **sorted = malloc (count * sizeof (char *));
    if (!sorted) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    memcpy (sorted, target->nodes, count * sizeof (char *));
    qsort (sorted, count, sizeof (char *), s_compare_strings);
    int rc = 0;
    for (size_t i = 1; i < count; i++)
        if (s_streq (sorted [i - 1], sorted [i])) {
            s_err (err, err_len, "node id '%s' is listed twice",
                   s_show (sorted [i], show));
            rc = -1;
            break;
        }
    free (sorted);
    return rc;
}

//  Checks VALUE for SCOPE and fills TARGET. On failure TARGET may hold
//  partial allocations; the caller clears it.
static int
s_target_build (target_scope_t scope, const char *value, bool any,
                target_t *target, char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    target->scope = scope;
    target->any = any;
    if (scope == TARGET_ALL) {
        if (value && *value) {
            s_err (err, err_len, "target 'all' takes no value (got '%s')",
                   s_show (value, show));
            return -1;
        }
        return 0;
    }
    if (!value || !*value) {
        s_err (err, err_len, "a %s target needs a value (%s)",
               target_scope_name (scope),
               scope == TARGET_GROUP  ? "group:G"
               : scope == TARGET_NODE ? "node:ID[,ID...]"
                                      : "label:KEY=V1.V2");
        return -1;
    }
    target->value = strdup (value);
    if (!target->value) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    if (scope == TARGET_GROUP) {
        if (!name_valid (value)) {
            s_err (err, err_len, "group name '%s' is not valid: %s",
                   s_show (value, show), s_name_rule);
            return -1;
        }
        return 0;
    }
    if (scope == TARGET_NODE)
        return s_parse_nodes (value, target, err, err_len);

    //  TARGET_LABEL
    const char *equals = strchr (value, '=');
    if (!equals) {
        s_err (err, err_len,
               "label target '%s' needs KEY=VALUE (label:tier=web.dev)",
               s_show (value, show));
        return -1;
    }
    target->label_key = strndup (value, (size_t) (equals - value));
    target->label_value = strdup (equals + 1);
    if (!target->label_key || !target->label_value) {
        s_err (err, err_len, "out of memory");
        return -1;
    }
    if (!name_valid (target->label_key)) {
        s_err (err, err_len, "label key '%s' is not valid: %s",
               s_show (target->label_key, show), s_name_rule);
        return -1;
    }
    if (!name_label_value_valid (target->label_value)) {
        s_err (err, err_len,
               "label value '%s' is not valid: use 1 to %d names joined by "
               "'.', each of letters, digits, '_' and '-' (1 to 64)",
               s_show (target->label_value, show), LABEL_MAX_SEGMENTS);
        return -1;
    }
    return 0;
}

//  Maps a scope word to its enum; -1 when unknown.
static int
s_scope_lookup (const char *word, size_t len, target_scope_t *scope)
{
    static const struct {
        const char *name;
        target_scope_t scope;
    } scopes [] = {{"all", TARGET_ALL},
                   {"group", TARGET_GROUP},
                   {"node", TARGET_NODE},
                   {"label", TARGET_LABEL}};
    for (size_t i = 0; i < sizeof (scopes) / sizeof (scopes [0]); i++)
        if (strlen (scopes [i].name) == len
            && memcmp (scopes [i].name, word, len) == 0) {
            *scope = scopes [i].scope;
            return 0;
        }
    return -1;
}

int
target_parse (const char *text, target_t *target, char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    memset (target, 0, sizeof (*target));
    if (!text || !*text) {
        s_err (err, err_len, "target is empty (%s)", s_target_forms);
        return -1;
    }
    bool any = false;
    if (s_streq (text, "any"))
        text = "all", any = true;
    else
    if (strncmp (text, "any:", 4) == 0) {
        text += 4, any = true;
        if (strncmp (text, "any", 3) == 0
            && (text [3] == '\0' || text [3] == ':')) {
            s_err (err, err_len, "'any' cannot be nested (%s)",
                   s_target_forms);
            return -1;
        }
        if (!*text) {
            s_err (err, err_len, "'any:' needs a target (%s)",
                   s_target_forms);
            return -1;
        }
    }
    const char *colon = strchr (text, ':');
    size_t word_len = colon ? (size_t) (colon - text) : strlen (text);
    target_scope_t scope;
    if (s_scope_lookup (text, word_len, &scope) != 0) {
        char *word = strndup (text, word_len);
        s_err (err, err_len, "unknown target scope '%s' (%s)",
               word ? s_show (word, show) : "?", s_target_forms);
        free (word);
        return -1;
    }
    if (scope == TARGET_ALL && colon) {
        s_err (err, err_len, "target 'all' takes no value (got '%s')",
               s_show (colon + 1, show));
        return -1;
    }
    if (scope != TARGET_ALL && !colon) {
        s_err (err, err_len, "target '%s' needs a value (%s)",
               target_scope_name (scope), s_target_forms);
        return -1;
    }
    int rc = s_target_build (scope, colon ? colon + 1 : NULL, any, target,
                             err, err_len);
    if (rc != 0)
        target_clear (target);
    return rc;
}

int
target_from_parts (const char *scope, const char *value, bool any,
                   target_t *target, char *err, size_t err_len)
{
    char show [NAME_SHOW_LEN];
    memset (target, 0, sizeof (*target));
    target_scope_t kind;
    if (!scope) {
        s_err (err, err_len, "target scope is missing (all, group, node, "
                             "label)");
        return -1;
    }
    if (s_scope_lookup (scope, strlen (scope), &kind) != 0) {
        s_err (err, err_len,
               "unknown target scope '%s' (all, group, node, label)",
               s_show (scope, show));
        return -1;
    }
    int rc = s_target_build (kind, value, any, target, err, err_len);
    if (rc != 0)
        target_clear (target);
    return rc;
}

void
target_clear (target_t *target)
{
    if (!target)
        return;
    free (target->value);
    free (target->label_key);
    free (target->label_value);
    for (size_t i = 0; i < target->node_count; i++)
        free (target->nodes [i]);
    free (target->nodes);
    memset (target, 0, sizeof (*target));
}

int
target_copy (target_t *dest, const target_t *src)
{
    memset (dest, 0, sizeof (*dest));
    dest->scope = src->scope;
    dest->any = src->any;
    if ((src->value && !(dest->value = strdup (src->value)))
        || (src->label_key && !(dest->label_key = strdup (src->label_key)))
        || (src->label_value
            && !(dest->label_value = strdup (src->label_value))))
        goto fail;
    if (src->node_count > 0) {
        dest->nodes = calloc (src->node_count, sizeof (char *));
        if (!dest->nodes)
            goto fail;
        for (size_t i = 0; i < src->node_count; i++) {
            dest->nodes [i] = strdup (src->nodes [i]);
            if (!dest->nodes [i])
                goto fail;
            dest->node_count++;
        }
    }
    return 0;
fail:
    target_clear (dest);
    return -1;
}

const char *
target_scope_name (target_scope_t scope)
{
    switch (scope) {
    case TARGET_ALL:
        return "all";
    case TARGET_GROUP:
        return "group";
    case TARGET_NODE:
        return "node";
    case TARGET_LABEL:
        return "label";
    }
    return "?";
}

char *
target_format (const target_t *target)
{
    char *text = NULL;
    const char *prefix = target->any ? "any:" : "";
    int rc;
    if (target->scope == TARGET_ALL)
        rc = asprintf (&text, "%sall", prefix);
    else
        rc = asprintf (&text, "%s%s:%s", prefix,
                       target_scope_name (target->scope),
                       target->value ? target->value : "");
    return rc < 0 ? NULL : text;
}

char *
target_topic (const target_t *target)
{
    char *topic = NULL;
    int rc;
    switch (target->scope) {
    case TARGET_ALL:
        return strdup ("all/");
    case TARGET_GROUP:
        rc = asprintf (&topic, "group/%s/", target->value);
        break;
    case TARGET_LABEL:
        rc = asprintf (&topic, "label/%s/%s/", target->label_key,
                       target->label_value);
        break;
    default:
        return NULL;
    }
    return rc < 0 ? NULL : topic;
}

char *
topic_for_node (const char *node_id)
{
    char *topic = NULL;
    return asprintf (&topic, "node/%s/", node_id) < 0 ? NULL : topic;
}

bool
target_matches (const target_t *target, const char *node_id,
                char *const *groups, size_t group_count,
                char *const *label_keys, char *const *label_values,
                size_t label_count)
{
    switch (target->scope) {
    case TARGET_ALL:
        return true;
    case TARGET_GROUP:
        for (size_t i = 0; i < group_count; i++)
            if (groups [i] && s_streq (groups [i], target->value))
                return true;
        return false;
    case TARGET_NODE:
        for (size_t i = 0; i < target->node_count; i++)
            if (node_id && s_streq (target->nodes [i], node_id))
                return true;
        return false;
    case TARGET_LABEL: {
        //  web.dev.us-east is inside web and web.dev, but not inside "we"
        //  (a segment must match whole) nor web.prod
        size_t want = strlen (target->label_value);
        for (size_t i = 0; i < label_count; i++) {
            const char *have = label_values [i];
            if (!label_keys [i] || !have
                || !s_streq (label_keys [i], target->label_key))
                continue;
            if (strncmp (have, target->label_value, want) == 0
                && (have [want] == '\0' || have [want] == '.'))
                return true;
        }
        return false;
    }
    }
    return false;
}

//  ---------------------------------------------------------------------
//  Durations

int
duration_parse (const char *text, int64_t *ms_p)
{
    static const struct {
        const char *unit;
        int64_t ms;
    } units [] = {{"d", 86400000}, {"h", 3600000}, {"m", 60000},
                  {"s", 1000}, {"ms", 1}};
    if (!text || !*text)
        return -1;
    int64_t total = 0;
    //  Units must come largest first, each at most once ("1h30m", not
    //  "30m1h" or "1h1h"), so every duration has one spelling
    size_t next_unit = 0;
    const char *p = text;
    while (*p) {
        if (*p < '0' || *p > '9')
            return -1;
        int64_t count = 0;
        while (*p >= '0' && *p <= '9') {
            count = count * 10 + (*p++ - '0');
            if (count > DURATION_MAX_MS)
                return -1;
        }
        size_t unit = 0;
        size_t unit_len = 0;
        if (p [0] == 'm' && p [1] == 's')
            unit = 4, unit_len = 2;
        else {
            for (unit = 0; unit < 4; unit++)
                if (*p == units [unit].unit [0])
                    break;
            if (unit == 4)
                return -1;
            unit_len = 1;
        }
        if (unit < next_unit)
            return -1;
        next_unit = unit + 1;
        p += unit_len;
        total += count * units [unit].ms;
        if (total > DURATION_MAX_MS)
            return -1;
    }
    *ms_p = total;
    return 0;
}

void
duration_format (int64_t ms, char *buf, size_t buf_len)
{
    if (!buf || buf_len == 0)
        return;
    if (ms < 0)
        ms = 0;
    if (ms == 0) {
        snprintf (buf, buf_len, "0s");
        return;
    }
    if (ms % 1000 != 0) {
        snprintf (buf, buf_len, "%lldms", (long long) ms);
        return;
    }
    int64_t secs = ms / 1000;
    const struct {
        int64_t secs;
        char unit;
    } parts [] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
    size_t used = 0;
    buf [0] = '\0';
    for (size_t i = 0; i < 4; i++) {
        int64_t count = secs / parts [i].secs;
        secs %= parts [i].secs;
        if (count == 0 || used >= buf_len)
            continue;
        int rc = snprintf (buf + used, buf_len - used, "%lld%c",
                           (long long) count, parts [i].unit);
        if (rc < 0)
            return;
        used += (size_t) rc;
    }
}

//  ---------------------------------------------------------------------
//  Ids and time

void
job_id_make (int64_t wall_ms, int64_t *last_ms, uint32_t *seq, char *buf,
             size_t buf_len)
{
    if (wall_ms < 0)
        wall_ms = 0;
    if (wall_ms > JOB_ID_MAX_MS)
        wall_ms = JOB_ID_MAX_MS;
    //  Never go back: a clock that steps backwards, or more than 65536 ids
    //  in one millisecond, borrow the next millisecond instead, so ids stay
    //  unique and in submission order
    if (wall_ms > *last_ms) {
        *last_ms = wall_ms;
        *seq = 0;
    }
    else
    if (*seq >= JOB_ID_MAX_SEQ) {
        *last_ms += 1;
        *seq = 0;
    }
    else
        *seq += 1;
    snprintf (buf, buf_len, "j-%012llx-%04x", (unsigned long long) *last_ms,
              (unsigned) *seq);
}

bool
job_id_valid (const char *text)
{
    if (!text || strlen (text) != JOB_ID_CHARS || text [0] != 'j'
        || text [1] != '-' || text [14] != '-')
        return false;
    for (size_t i = 2; i < JOB_ID_CHARS; i++) {
        if (i == 14)
            continue;
        char c = text [i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

void
time_format (int64_t wall_ms, char *buf, size_t buf_len)
{
    if (!buf || buf_len == 0)
        return;
    int64_t secs = wall_ms / 1000;
    int64_t millis = wall_ms % 1000;
    if (millis < 0) {
        millis += 1000;
        secs -= 1;
    }
    time_t when = (time_t) secs;
    struct tm tm;
    if (!gmtime_r (&when, &tm)) {
        snprintf (buf, buf_len, "1970-01-01T00:00:00.000Z");
        return;
    }
    snprintf (buf, buf_len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
              tm.tm_min, tm.tm_sec, (int) millis);
}

const char *
name_show (const char *text, size_t len, char *buf, size_t buf_len)
{
    if (!buf || buf_len == 0)
        return buf;
    if (!text)
        len = 0;
    //  Room for the cut text, "..." and the NUL
    size_t room = buf_len > 4 ? buf_len - 4 : 0;
    if (room > SHOW_MAX)
        room = SHOW_MAX;
    size_t take = len;
    if (take > room) {
        take = room;
        while (take > 0 && ((unsigned char) text [take] & 0xc0) == 0x80)
            take--;
    }
    for (size_t i = 0; i < take; i++) {
        unsigned char c = (unsigned char) text [i];
        buf [i] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
    }
    if (take < len) {
        memcpy (buf + take, "...", 3);
        take += 3;
    }
    buf [take] = '\0';
    return buf;
}
