/*  =========================================================================
    trace - W3C trace context (traceparent) for jobs, and span ids
    =========================================================================
*/
#include "trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "names.h"

//  The value of a lowercase hex digit, or -1.
static int
s_hex_digit (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

//  Reads SIZE bytes from 2 * SIZE lowercase hex digits at TEXT. Returns 0,
//  -1 on a digit that is not lowercase hex, -2 on an uppercase one.
static int
s_unhex (const char *text, size_t size, uint8_t *bytes)
{
    for (size_t index = 0; index < size; index++) {
        int high = s_hex_digit (text [2 * index]);
        int low = s_hex_digit (text [2 * index + 1]);
        if (high < 0 || low < 0) {
            char a = text [2 * index], b = text [2 * index + 1];
            bool upper = (a >= 'A' && a <= 'F') || (b >= 'A' && b <= 'F');
            return upper ? -2 : -1;
        }
        bytes [index] = (uint8_t) (high << 4 | low);
    }
    return 0;
}

static bool
s_all_zero (const uint8_t *bytes, size_t size)
{
    for (size_t index = 0; index < size; index++)
        if (bytes [index])
            return false;
    return true;
}

//  Reads the field NAME of SIZE bytes at TEXT, or says why not in ERR.
static int
s_field (const char *text, size_t size, uint8_t *bytes, const char *name,
         char *err, size_t err_len)
{
    int rc = s_unhex (text, size, bytes);
    if (rc == -2) {
        snprintf (err, err_len, "traceparent: the %s has uppercase hex "
                  "digits (only lowercase is valid)", name);
        return -1;
    }
    if (rc != 0) {
        snprintf (err, err_len, "traceparent: the %s must be %zu lowercase "
                  "hex digits", name, 2 * size);
        return -1;
    }
    return 0;
}

int
trace_parse (const char *text, trace_ctx_t *ctx, char *err, size_t err_len)
{
    memset (ctx, 0, sizeof *ctx);
    if (!text) {
        snprintf (err, err_len, "traceparent: missing");
        return -1;
    }
    size_t length = strnlen (text, TRACE_PARENT_LEN + 1);
    uint8_t version = 0;
    if (length >= 2 && s_unhex (text, 1, &version) == 0 && version == 0xff) {
        snprintf (err, err_len, "traceparent: version ff is invalid");
        return -1;
    }
    if (length >= 2 && !(text [0] == '0' && text [1] == '0')) {
        snprintf (err, err_len, "traceparent: only version 00 is "
                  "understood (\"00-<32 hex>-<16 hex>-<2 hex>\")");
        return -1;
    }
    if (length != TRACE_PARENT_LEN) {
        snprintf (err, err_len, "traceparent: must be %d bytes, "
                  "\"00-<32 hex>-<16 hex>-<2 hex>\" (got %s%zu)",
                  TRACE_PARENT_LEN, length > TRACE_PARENT_LEN ? "more than " : "",
                  length > TRACE_PARENT_LEN ? (size_t) TRACE_PARENT_LEN : length);
        return -1;
    }
    if (text [2] != '-' || text [35] != '-' || text [52] != '-') {
        snprintf (err, err_len, "traceparent: fields must be separated by "
                  "'-' (\"00-<32 hex>-<16 hex>-<2 hex>\")");
        return -1;
    }
    if (s_field (text + 3, 16, ctx->trace_id, "trace id", err, err_len) != 0
    ||  s_field (text + 36, 8, ctx->parent_id, "parent id", err, err_len) != 0
    ||  s_field (text + 53, 1, &ctx->flags, "flags", err, err_len) != 0)
        return -1;
    if (s_all_zero (ctx->trace_id, sizeof ctx->trace_id)) {
        snprintf (err, err_len, "traceparent: the trace id is all zeros");
        return -1;
    }
    if (s_all_zero (ctx->parent_id, sizeof ctx->parent_id)) {
        snprintf (err, err_len, "traceparent: the parent id is all zeros");
        return -1;
    }
    return 0;
}

bool
trace_valid (const char *text)
{
    trace_ctx_t ctx;
    char err [160];
    return trace_parse (text, &ctx, err, sizeof err) == 0;
}

char *
trace_hex (const uint8_t *bytes, size_t size, char *hex)
{
    return hex_encode (bytes, size, hex);
}

char *
trace_format (const trace_ctx_t *ctx, char *text)
{
    char trace [TRACE_ID_HEX + 1], parent [TRACE_SPAN_HEX + 1], flags [3];
    trace_hex (ctx->trace_id, sizeof ctx->trace_id, trace);
    trace_hex (ctx->parent_id, sizeof ctx->parent_id, parent);
    trace_hex (&ctx->flags, 1, flags);
    snprintf (text, TRACE_PARENT_LEN + 1, "00-%s-%s-%s", trace, parent, flags);
    return text;
}

int
trace_new (trace_ctx_t *ctx)
{
    memset (ctx, 0, sizeof *ctx);
    uint8_t random [24];
    if (getrandom (random, sizeof random, 0) != (ssize_t) sizeof random)
        return -1;
    memcpy (ctx->trace_id, random, 16);
    memcpy (ctx->parent_id, random + 16, 8);
    //  All zeros is invalid: one chance in 2^64, made impossible
    if (s_all_zero (ctx->trace_id, 16))
        ctx->trace_id [15] = 1;
    if (s_all_zero (ctx->parent_id, 8))
        ctx->parent_id [7] = 1;
    ctx->flags = 0x01;
    return 0;
}

//  FNV-1a, 64 bits, over SIZE bytes at DATA, from HASH.
static uint64_t
s_fnv (uint64_t hash, const void *data, size_t size)
{
    const uint8_t *bytes = (const uint8_t *) data;
    for (size_t index = 0; index < size; index++) {
        hash ^= bytes [index];
        hash *= 1099511628211ULL;
    }
    return hash;
}

void
trace_span_id (const trace_ctx_t *ctx, const char *job, int64_t step,
               const char *node, uint32_t attempt, uint8_t span [8])
{
    uint64_t hash = 14695981039346656037ULL;
    hash = s_fnv (hash, ctx->trace_id, sizeof ctx->trace_id);
    hash = s_fnv (hash, job ? job : "", strlen (job ? job : "") + 1);
    char tail [64];
    int length = snprintf (tail, sizeof tail, "%lld|%u|",
                           (long long) (step < 0 ? -1 : step), attempt);
    hash = s_fnv (hash, tail, (size_t) length);
    if (node)
        hash = s_fnv (hash, node, strlen (node) + 1);
    //  A final mix (splitmix64's) spreads the bits of nearby inputs
    hash ^= hash >> 30;
    hash *= 0xbf58476d1ce4e5b9ULL;
    hash ^= hash >> 27;
    hash *= 0x94d049bb133111ebULL;
    hash ^= hash >> 31;
    if (hash == 0)
        hash = 1;
    for (int index = 0; index < 8; index++)
        span [index] = (uint8_t) (hash >> (56 - 8 * index));
}

//  ---------------------------------------------------------------------
//  The table of jobs' trace ids: an open-addressed hash of job ids, and
//  a ring that says which entry is oldest.

#define S_SLOTS (TRACE_JOBS_MAX * 2)

typedef struct {
    char job [JOB_ID_LEN + 1];        //  "" when free
    char trace_id [TRACE_ID_HEX + 1];
    bool used;                        //  Ever used (a probe goes past it)
} s_slot_t;

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static s_slot_t *s_slots;             //  S_SLOTS of them, on first use
static uint32_t s_ring [TRACE_JOBS_MAX];  //  Slots in the order filled
static size_t s_ring_head;            //  Next ring entry to write
static size_t s_ring_count;           //  Entries in the ring
static size_t s_tombstones;           //  Freed slots still marked used

static size_t
s_slot_of (const char *job)
{
    return (size_t) (s_fnv (14695981039346656037ULL, job, strlen (job))
                     % S_SLOTS);
}

//  The slot holding JOB, or -1.
static ssize_t
s_find (const char *job)
{
    size_t slot = s_slot_of (job);
    for (size_t probe = 0; probe < S_SLOTS; probe++) {
        s_slot_t *entry = &s_slots [(slot + probe) % S_SLOTS];
        if (!entry->used)
            return -1;
        if (strcmp (entry->job, job) == 0)
            return (ssize_t) ((slot + probe) % S_SLOTS);
    }
    return -1;
}

//  Empties every slot and puts the live entries back (the used marks of
//  freed slots would otherwise lengthen every probe).
static void
s_rehash (void)
{
    uint32_t order [TRACE_JOBS_MAX];
    s_slot_t *old = s_slots;
    s_slots = (s_slot_t *) calloc (S_SLOTS, sizeof (s_slot_t));
    if (!s_slots) {
        s_slots = old;
        return;
    }
    size_t count = 0;
    size_t start = (s_ring_head + TRACE_JOBS_MAX - s_ring_count) % TRACE_JOBS_MAX;
    for (size_t index = 0; index < s_ring_count; index++) {
        s_slot_t *entry = &old [s_ring [(start + index) % TRACE_JOBS_MAX]];
        size_t slot = s_slot_of (entry->job);
        while (s_slots [slot].used)
            slot = (slot + 1) % S_SLOTS;
        s_slots [slot] = *entry;
        order [count++] = (uint32_t) slot;
    }
    memcpy (s_ring, order, count * sizeof order [0]);
    s_ring_count = count;
    s_ring_head = count % TRACE_JOBS_MAX;
    free (old);
}

void
trace_job_remember (const char *job, const char *trace_id)
{
    if (!job || !trace_id || strlen (job) > JOB_ID_LEN
        || strlen (trace_id) != TRACE_ID_HEX)
        return;
    pthread_mutex_lock (&s_lock);
    if (!s_slots)
        s_slots = (s_slot_t *) calloc (S_SLOTS, sizeof (s_slot_t));
    if (!s_slots) {
        pthread_mutex_unlock (&s_lock);
        return;
    }
    ssize_t found = s_find (job);
    if (found >= 0) {
        memcpy (s_slots [found].trace_id, trace_id, TRACE_ID_HEX + 1);
        pthread_mutex_unlock (&s_lock);
        return;
    }
    if (s_ring_count == TRACE_JOBS_MAX) {
        //  Forget the oldest; its slot stays marked used until a rehash
        size_t oldest = (s_ring_head + TRACE_JOBS_MAX - s_ring_count)
                        % TRACE_JOBS_MAX;
        s_slots [s_ring [oldest]].job [0] = 0;
        s_ring_count--;
        if (++s_tombstones > TRACE_JOBS_MAX / 4) {
            s_rehash ();
            s_tombstones = 0;
        }
    }
    size_t slot = s_slot_of (job);
    while (s_slots [slot].used && s_slots [slot].job [0])
        slot = (slot + 1) % S_SLOTS;
    snprintf (s_slots [slot].job, sizeof s_slots [slot].job, "%s", job);
    memcpy (s_slots [slot].trace_id, trace_id, TRACE_ID_HEX + 1);
    s_slots [slot].used = true;
    s_ring [s_ring_head] = (uint32_t) slot;
    s_ring_head = (s_ring_head + 1) % TRACE_JOBS_MAX;
    s_ring_count++;
    pthread_mutex_unlock (&s_lock);
}

bool
trace_job_lookup (const char *job, char *trace_id)
{
    if (!job)
        return false;
    pthread_mutex_lock (&s_lock);
    ssize_t found = s_slots ? s_find (job) : -1;
    if (found >= 0)
        memcpy (trace_id, s_slots [found].trace_id, TRACE_ID_HEX + 1);
    pthread_mutex_unlock (&s_lock);
    return found >= 0;
}

void
trace_jobs_clear (void)
{
    pthread_mutex_lock (&s_lock);
    free (s_slots);
    s_slots = NULL;
    s_ring_head = 0;
    s_ring_count = 0;
    s_tombstones = 0;
    pthread_mutex_unlock (&s_lock);
}
